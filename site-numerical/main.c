/* drths-numerical: the numerical site. Its own options, then the mode they choose: the
 * reference run (site-numerical/reference_mode.h) or a session with the actuator site
 * (site-numerical/app.h: connect, probe, run, report, in the site shell, common/site/shell.h,
 * which owns the loop, the signals, the monitor and the real-time thread). The logic lives in
 * site-numerical/. */
#include <stdio.h>
#include <string.h>

#include "common/config/config.h"
#include "common/config/damperfile.h"
#include "common/platform/cli.h"
#include "common/site/shell.h"
#include "site-numerical/app.h"
#include "site-numerical/reference_mode.h"

#define PROG DRTHS_NUMAPP_PROG

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drths-numerical --experiment FILE [--peer HOST:PORT] [--key FILE] [--out DIR]\n"
            "                       [--connect-timeout S] [--peer-timeout S] [--require-rt]\n"
            "                       [--cpu N] [--wait block|spin|hybrid:US] [--kernel-filter]\n"
            "                       [--quiet]\n"
            "                       [--monitor HOST:PORT [--wait-start]]\n"
            "       drths-numerical --experiment FILE --reference [--out DIR] [--quiet]\n"
            "       drths-numerical --experiment FILE --probe-only [--probe-seconds S] [--peer ...]\n"
            "\n"
            "Without --reference: the numerical site of a hybrid run. It connects to the actuator\n"
            "site (drths-physical), measures the round trip, chooses the loop delay L and\n"
            "integrates the structure with the measured damper force.\n"
            "\n"
            "  --experiment FILE    the experiment file (docs/experiment-file.md)\n"
            "  --peer HOST:PORT     the actuator site (default: numerical.peer of the file)\n"
            "  --key FILE           pre-shared key file (default: link.key_file; without either\n"
            "                       the public rehearsal key is used, with a warning)\n"
            "  --connect-timeout S  give up when the actuator site does not answer (default 10)\n"
            "  --peer-timeout S     stop when nothing valid arrives for S s in the run (default 1)\n"
            "  --require-rt         fail unless SCHED_FIFO and mlockall are granted\n"
            "  --cpu N              pin the real-time thread to CPU N\n"
            "  --wait MODE          how the real-time thread waits for the feedback: block (sleep\n"
            "                       in the kernel; default), spin (busy-poll: the least latency,\n"
            "                       a whole CPU), hybrid:US (busy-poll US microseconds, then sleep)\n"
            "  --kernel-filter      drop malformed datagrams, other sessions and other senders in\n"
            "                       the kernel (counted only as kernel_drops in summary.json, not\n"
            "                       by reason); for a site reachable from the Internet\n"
            "  --probe-only         the connectivity test of the days before: the handshake, then\n"
            "                       probes for --probe-seconds (default 60); prints the round\n"
            "                       trip's distribution, the loss and its bursts against what the\n"
            "                       redundancy repairs and the concealment budget, and the L the\n"
            "                       sites would choose; then ends the session (nothing moves)\n"
            "  --probe-seconds S    how long --probe-only probes (1..3600, default 60)\n"
            "  --reference          run the monolithic reference: structure and virtual specimen\n"
            "                       in one process, no network, no actuator\n"
            "  --out DIR            run folder (default: <output.directory>/<date>-<time>-<name>-\n"
            "                       numerical or -reference)\n"
            "  --quiet              no progress line\n"
            "  --monitor HOST:PORT  send telemetry (50 frames/s) to drths-monitor and accept its\n"
            "                       Start / Stop / Abort (Stop and Abort act as SIGTERM)\n"
            "                       (authenticated with a key derived from the link key)\n"
            "  --wait-start         wait for Start from the monitor before connecting\n"
            "  --version            the version of this program\n"
            "  -h, --help           this text\n"
            "\n");
}

/* Static: one run per process (site-numerical/app.h). */
static drths_numapp_t app;

static int own_option(void *ctx, int c, const char *arg)
{
    drths_numapp_t *a = ctx;
    long us;
    switch (c) {
    case 'p': a->peer = arg; return 0;
    case 'r': a->reference = 1; return 0;
    case 'O': a->probe_only = 1; return 0;
    case 'S':
        return drths_cli_double(PROG, "--probe-seconds", arg, 1.0, 3600.0, "s", &a->probe_seconds);
    case 'c': return drths_cli_positive(PROG, "--connect-timeout", arg, "seconds",
                                        &a->connect_timeout_s);
    case 't': return drths_cli_positive(PROG, "--peer-timeout", arg, "seconds", &a->peer_timeout_s);
    case 'W':
        if (strcmp(arg, "block") == 0 || strcmp(arg, "spin") == 0) {
            a->wait_spin_ns = arg[0] == 's' ? INT64_MAX : 0;
            return 0;
        }
        if (strncmp(arg, "hybrid:", 7) != 0) {
            drths_cli_usage_error(PROG, "--wait: '%s' is not block, spin or hybrid:US", arg);
            return -1;
        }
        if (drths_cli_long(PROG, "--wait hybrid:US", arg + 7, 1, 1000000, &us) != 0)
            return -1;
        a->wait_spin_ns = (int64_t)us * 1000;
        return 0;
    default: return -1;
    }
}

int main(int argc, char **argv)
{
    drths_numapp_t *a = &app;
    for (int i = 0; i < DRTHS_HYBRID_MAX_LINKS; i++)
        a->sites[i].udp.fd = -1; /* not open (0 would be stdin) */
    a->n_links = 1;
    a->connect_timeout_s = 10.0;
    a->peer_timeout_s = 1.0;
    a->probe_seconds = 60.0;
    static const struct option own[] = {
        {"peer", required_argument, NULL, 'p'},
        {"reference", no_argument, NULL, 'r'},
        {"probe-only", no_argument, NULL, 'O'},
        {"probe-seconds", required_argument, NULL, 'S'},
        {"connect-timeout", required_argument, NULL, 'c'},
        {"peer-timeout", required_argument, NULL, 't'},
        {"wait", required_argument, NULL, 'W'},
        {0, 0, 0, 0},
    };
    const drths_site_cli_t cli = {PROG, own, own_option, a, usage,
                                  "the run failed (no peer, peer lost, abort, HOLD)"};
    int code = drths_site_parse(&cli, argc, argv, &a->so);
    if (code != DRTHS_SITE_CONTINUE)
        return code;
    if (a->reference && a->probe_only)
        return drths_cli_usage_error(PROG, "--probe-only and --reference exclude each other");
    if (a->reference && a->so.kernel_filter)
        return drths_cli_usage_error(PROG, "--kernel-filter is for a hybrid run; --reference "
                                           "has no network");
    if ((code = drths_site_load_experiment(PROG, &a->exp, a->so.experiment)) != 0)
        return code;
    /* A hybrid run drives one actuator channel per link; several channels of one site are
     * served over OpenFresco only. A file with one site of one channel is that link (its
     * address, key and channel); a file with several sites of one channel each is one link per
     * site (PROTOCOL.md section 12). The reference run integrates every site's dampers. */
    drths_error_t cerr = {{0}};
    if (!a->reference && a->exp.n_sites == 1 && a->exp.sites[0].n_channels == 1 &&
        drths_experiment_select_site(&a->exp, a->exp.sites[0].name, &cerr) != 0) {
        drths_experiment_close(&a->exp);
        return drths_cli_usage_error(PROG, "%s", cerr.msg);
    }
    if (!a->reference && a->exp.n_sites > 1) {
        int rc = 0;
        if (a->peer)
            rc = drths_cli_usage_error(PROG,
                                       "--peer names one actuator site; %s has %d sites, "
                                       "each link goes to its sites[i].address",
                                       a->exp.path, a->exp.n_sites);
        for (int i = 0; rc == 0 && i < a->exp.n_sites; i++)
            if (a->exp.sites[i].n_channels != 1)
                rc = drths_cli_usage_error(
                    PROG,
                    "%s:%d: sites[%d] (%s): %d channels: a numerical site drives one "
                    "channel per site (several channels of one site are served over "
                    "OpenFresco only)",
                    a->exp.path, a->exp.sites[i].line, i, a->exp.sites[i].name,
                    a->exp.sites[i].n_channels);
        if (rc == 0 && a->exp.numerical.smith_model_path)
            rc = drths_cli_usage_error(
                PROG,
                "%s: numerical.smith_model: one characterized model for %d sites' "
                "dampers; leave it out (each damper's Smith predictor uses its "
                "channel's nominal model)",
                a->exp.path, a->exp.n_sites);
        if (rc != 0) {
            drths_experiment_close(&a->exp);
            return rc;
        }
        a->n_links = a->exp.n_sites;
    } else if (!a->reference && drths_experiment_check_network(&a->exp, &cerr) != 0) {
        drths_experiment_close(&a->exp);
        return drths_cli_usage_error(PROG, "%s", cerr.msg);
    }
    /* A bad damper model file stops here, before any peer is waited for. */
    if (!a->reference && a->exp.numerical.smith_model_path) {
        drths_damper_params_t model;
        if (drths_damperfile_load(a->exp.numerical.smith_model_path, &model, NULL, &cerr) != 0) {
            drths_experiment_close(&a->exp);
            return drths_cli_usage_error(PROG, "numerical.smith_model: %s", cerr.msg);
        }
    }
    code = a->reference ? drths_reference_mode_run(&a->so, &a->exp) : drths_numapp_run_session(a);
    drths_experiment_close(&a->exp);
    return code;
}
