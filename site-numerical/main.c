/* drths-numerical: the numerical site. Parses options, loads the experiment and wires modules;
 * the logic lives in site-numerical/ and common/. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/runfolder.h"
#include "site-numerical/reference.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drths-numerical --experiment FILE --reference [--out DIR]\n"
            "\n"
            "  --experiment FILE  the experiment file (docs/experiment-file.md)\n"
            "  --reference        run the monolithic reference: structure and virtual specimen\n"
            "                     in one process, no network, no actuator\n"
            "  --out DIR          run folder (default: <output.directory>/<date>-<name>-reference)\n"
            "  --quiet            no progress line\n"
            "  -h, --help         this text\n"
            "\n"
            "Exit status: 0 success, 1 run failed, 2 wrong experiment file or options.\n");
}

static void progress(long step, long steps, void *ctx)
{
    (void)ctx;
    fprintf(stderr, "\r  step %ld of %ld (%.0f %%)", step, steps, 100.0 * step / steps);
    fflush(stderr);
}

static void print_structure(const drths_reference_summary_t *s)
{
    printf("structure: %d degrees of freedom\n  mode  frequency (Hz)  damping (%%)\n", s->n);
    for (int i = 0; i < s->n && i < 10; i++)
        printf("  %4d  %14.4f  %11.3f\n", i + 1, s->freq_hz[i], 100.0 * s->zeta[i]);
    if (s->n > 10)
        printf("  ... (%d modes in summary.json)\n", s->n);
}

static void print_peaks(const drths_reference_summary_t *s)
{
    printf("  floor  peak disp (mm)  RMS disp (mm)  peak abs accel (m/s2)\n");
    for (int i = 0; i < s->n && i < 10; i++)
        printf("  %5d  %14.3f  %13.3f  %21.3f\n", i + 1, 1e3 * s->peak_x_m[i],
               1e3 * s->rms_x_m[i], s->peak_a_m_s2[i]);
    printf("  damper: peak force %.1f kN, peak stroke %.2f mm, peak velocity %.1f mm/s, "
           "command %.3g\n",
           1e-3 * s->peak_force_N, 1e3 * s->peak_damper_disp_m, 1e3 * s->peak_damper_vel_m_s,
           s->command);
    printf("  %ld steps (%.2f s simulated) in %.3f s wall time (%.3f s per simulated s)\n",
           s->steps, s->duration_s, s->wall_s, s->wall_s / s->duration_s);
}

int main(int argc, char **argv)
{
    const char *experiment = NULL, *out = NULL;
    int reference = 0, quiet = 0;
    static const struct option opts[] = {
        {"experiment", required_argument, NULL, 'e'},
        {"reference", no_argument, NULL, 'r'},
        {"out", required_argument, NULL, 'o'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'e':
            experiment = optarg;
            break;
        case 'r':
            reference = 1;
            break;
        case 'o':
            out = optarg;
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return DRTHS_EXIT_CONFIG;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "drths-numerical: unexpected argument '%s'\n", argv[optind]);
        return DRTHS_EXIT_CONFIG;
    }
    if (!experiment) {
        fprintf(stderr, "drths-numerical: --experiment FILE is required (see --help)\n");
        return DRTHS_EXIT_CONFIG;
    }
    if (!reference) {
        fprintf(stderr, "drths-numerical: only --reference is available in this version\n");
        return DRTHS_EXIT_CONFIG;
    }

    drths_error_t err = {{0}};
    drths_experiment_t exp;
    if (drths_experiment_load(&exp, experiment, &err) != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        return DRTHS_EXIT_CONFIG;
    }
    char label[300], dir[4096];
    snprintf(label, sizeof label, "%s-reference", exp.name);
    if (drths_runfolder_create(dir, sizeof dir, out, exp.output.directory, label, experiment,
                               &err) != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        drths_experiment_close(&exp);
        return 1;
    }
    printf("drths-numerical: reference run of '%s' at %.0f Hz into %s\n", exp.name, exp.rate_hz,
           dir);
    drths_reference_summary_t sum;
    int rc = drths_reference_run(&exp, dir, &sum, (!quiet && isatty(2)) ? progress : NULL, NULL,
                                 &err);
    if (!quiet && isatty(2))
        fprintf(stderr, "\r%60s\r", "");
    if (rc != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        drths_experiment_close(&exp);
        return rc == -EINVAL || rc == -ENOTSUP ? DRTHS_EXIT_CONFIG : 1;
    }
    print_structure(&sum);
    print_peaks(&sum);
    printf("  written: %s/numerical.csv, %s/summary.json\n", dir, dir);
    drths_reference_summary_close(&sum);
    drths_experiment_close(&exp);
    return 0;
}
