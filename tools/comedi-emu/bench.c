/* drths-bench-comedi: the cost of one tick of the comedi DAQ path (site-physical/daq.h: the
 * drive and damper writes, then the displacement and force reads, four comedilib calls and four
 * ioctls) through the real comedilib, on the emulated board linked ahead of libc
 * (tools/comedi-emu), with the virtual specimen behind it when an experiment is given. Prints
 * one line "comedi ticks=N median_ns=... p99_ns=... max_ns=..." for tools/bench.
 *
 * What it measures is comedilib and the back end's conversions and clamps, plus the emulator's
 * ioctl (lock, instruction, specimen step); a real board adds its bus time per conversion. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "common/platform/stats.h"
#include "site-physical/daq.h"
#include "tools/comedi-emu/comedi_emu.h"

static const char *prog = "drths-bench-comedi";

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s --experiment FILE [--ticks N]\n"
            "Times one tick of the comedi DAQ path (2 writes + 2 reads through comedilib) on the\n"
            "emulated board, wired and with the specimen as FILE's daq section says.\n"
            "  --experiment FILE  an experiment with daq: backend: comedi\n"
            "  --ticks N          ticks to time (default 50000)\n"
            "  --version, --help\n",
            prog);
    drths_cli_print_exit_codes(f, "the device could not be opened or a tick failed");
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    long ticks = 50000;
    static const struct option opts[] = {{"experiment", required_argument, 0, 'e'},
                                         {"ticks", required_argument, 0, 't'},
                                         {"version", no_argument, 0, 'V'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e':
            path = optarg;
            break;
        case 't':
            if (drths_cli_long(prog, "--ticks", optarg, 1, 100000000, &ticks))
                return DRTHS_EXIT_USAGE;
            break;
        case 'V':
            drths_cli_print_version(prog);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return drths_cli_bad_option(prog);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(prog, argv[optind]);
    if (!path)
        return drths_cli_usage_error(prog, "--experiment is required");

    drths_experiment_t exp;
    drths_error_t err;
    if (drths_experiment_load(&exp, path, &err))
        return drths_cli_usage_error(prog, "%s", err.msg);
    if (exp.daq.backend != DRTHS_DAQ_BACKEND_COMEDI) {
        drths_experiment_close(&exp);
        return drths_cli_usage_error(prog, "%s: daq.backend is not comedi", path);
    }
    setenv("DRTHS_COMEDI_EMU_DEVICE", exp.daq.device ? exp.daq.device : "/dev/comedi0", 1);
    setenv("DRTHS_COMEDI_EMU_EXPERIMENT", path, 1);
    drths_daq_t d;
    drths_envelope_limits_t lim;
    drths_daq_envelope_limits(&exp, &lim);
    if (drths_daq_open(&exp, NULL, NULL, &d, &err) ||
        drths_daq_set_envelope(&d, &lim, exp.rate_hz, &err)) {
        drths_daq_close(&d);
        drths_experiment_close(&exp);
        return drths_cli_error(prog, "%s", err.msg);
    }
    int64_t *ns = malloc((size_t)ticks * sizeof *ns);
    if (!ns) {
        drths_daq_close(&d);
        drths_experiment_close(&exp);
        return drths_cli_error(prog, "out of memory");
    }
    int rc = 0;
    double x = 0, f = 0;
    for (long t = -1000; t < ticks && rc == 0; t++) {
        /* A 1 Hz sine of 5 mm as the drive, the damper switching as clipped-optimal control
         * does. */
        double drive = 0.005 * sin(2.0 * M_PI * (double)t / 5000.0);
        double cmd = (t / 500) % 2 ? 2.5 : 0.0;
        int64_t t0 = drths_now_ns();
        rc = drths_daq_write(&d, drive, 0.0, cmd, NAN, t0);
        if (!rc)
            rc = drths_daq_read(&d, &x, &f);
        int64_t t1 = drths_now_ns();
        if (t >= 0)
            ns[t] = t1 - t0;
    }
    if (rc) {
        drths_daq_error(&d, &err);
        free(ns);
        drths_daq_close(&d);
        drths_experiment_close(&exp);
        return drths_cli_error(prog, "%s", err.msg);
    }
    drths_sort_i64(ns, (size_t)ticks);
    printf("comedi ticks=%ld median_ns=%lld p99_ns=%lld max_ns=%lld\n", ticks,
           (long long)ns[drths_quantile_rank((size_t)ticks, 0.5)],
           (long long)ns[drths_quantile_rank((size_t)ticks, 0.99)], (long long)ns[ticks - 1]);
    free(ns);
    drths_daq_close(&d);
    drths_experiment_close(&exp);
    return 0;
}
