/* drths-physical: the actuator site. Its own options, then the mode they choose: --io-check
 * (site-physical/iocheck_mode.h), --serve (site-physical/serve.h), or one session
 * (site-physical/app.h: site-physical/physsite.c, the data plane on one RT thread, wired into
 * the site shell, common/site/shell.h, which owns the loop, the signals, the monitor and the
 * recorder's drain). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/config/config.h"
#include "common/platform/cli.h"
#include "common/site/shell.h"
#include "site-physical/app.h"
#include "site-physical/charz_mode.h"
#include "site-physical/iocheck_mode.h"
#include "site-physical/serve.h"

/* Every channel physical.channels may declare is one element of the OpenFresco vectors (and one
 * --openfresco-stiffness value): the file's bound may not exceed the wire's. */
_Static_assert(DRTHS_EXPERIMENT_MAX_CHANNELS <= DRTHS_OFR_MAX_DOF,
               "physical.channels allows more channels than the OpenFresco vectors carry");

#define PROG DRTHS_PHYSAPP_PROG

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drths-physical --experiment FILE [--site NAME] [--listen HOST:PORT]\n"
            "                      [--key FILE]\n"
            "                      [--out DIR] [--wait-timeout S] [--require-rt] [--cpu N]\n"
            "                      [--tick-spin US|auto] [--kernel-filter] [--quiet]\n"
            "                      [--monitor HOST:PORT [--wait-start]]\n"
            "       drths-physical --experiment FILE --openfresco HOST:PORT [--step-duration S]\n"
            "                      [--openfresco-variant auto|shadow|generic] [--precor d|lpd]\n"
            "                      [--predict-fraction F] [--openfresco-setup-timeout S]\n"
            "                      [--openfresco-step-timeout S] [--openfresco-max-iterations N]\n"
            "                      [--openfresco-iteration-duration S]\n"
            "                      [--openfresco-stiffness K[,K2,...]] [--out DIR]\n"
            "                      [--wait-timeout S] ...\n"
            "       drths-physical --experiment FILE --probe-only [--listen HOST:PORT] [--key FILE] ...\n"
            "       drths-physical --experiment FILE --io-check [--io-amplitude M] [--io-leg S]\n"
            "                      [--io-current A]\n"
            "       drths-physical --experiment FILE --characterize [--protocol standard|short]\n"
            "                      [--out DIR]\n"
            "\n"
            "  --experiment FILE   the experiment file (docs/experiment-file.md)\n"
            "  --site NAME         with a file that lists sites: this site's entry (its channels,\n"
            "                      listen address and key file); required there\n"
            "  --listen HOST:PORT  where to wait for the numerical site (default: physical.listen)\n"
            "  --key FILE          pre-shared key file (default: link.key_file; without either,\n"
            "                      the public rehearsal key, for a rehearsal on one machine)\n"
            "  --out DIR           run folder (default:\n"
            "                      <output.directory>/<date>-<time>-<name>-physical)\n"
            "  --wait-timeout S    how long to wait for the numerical site (default 300)\n"
            "  --require-rt        fail unless real-time scheduling and memory locking apply\n"
            "  --cpu N             pin the control thread to CPU N (isolate it with isolcpus=N)\n"
            "  --tick-spin US|auto sleep until US microseconds before each tick, then spin: trades\n"
            "                      US/period of a CPU for the timer's wake-up latency; auto\n"
            "                      (default): 30 %% of the period at 10 kHz and above, else 0\n"
            "  --kernel-filter     drop malformed datagrams, other sessions and other senders in\n"
            "                      the kernel (counted only as kernel_drops in summary.json, not by\n"
            "                      reason); for a site reachable from the Internet\n"
            "  --quiet             no status line\n"
            "  --monitor HOST:PORT send telemetry (50 frames/s) to drths-monitor and accept its\n"
            "                      Start / Stop / Abort (Stop and Abort act as SIGTERM: HOLD)\n"
            "                      (authenticated with a key derived from the link key)\n"
            "  --wait-start        wait for Start from the monitor before taking part\n"
            "  --openfresco HOST:PORT  be the laboratory side of an OpenSees/OpenFresco analysis\n"
            "                      (expSite ShadowSite, expControl GenericTCP, element\n"
            "                      genericClient) on this TCP address instead of waiting for a\n"
            "                      numerical site (docs/openfresco.md)\n"
            "  --step-duration S   wall time per analysis step (default 0.01)\n"
            "  --openfresco-variant auto|shadow|generic  wire variant (default auto)\n"
            "  --precor d|lpd      corrector: PreCor-D (default) or PreCor-LPD\n"
            "  --predict-fraction F  fraction of a step predicted before correcting (0.6)\n"
            "  --openfresco-setup-timeout S  drop a client that has not set up S s after it\n"
            "                      connected, and wait for another (default 10)\n"
            "  --openfresco-step-timeout S  HOLD when the client sends no new target for S s\n"
            "                      once the site has answered it (default 10)\n"
            "  --openfresco-max-iterations N  HOLD when an analysis step has more than N\n"
            "                      iterations (new trials before its commit; default 20)\n"
            "  --openfresco-iteration-duration S  wall time of one iteration (default\n"
            "                      --step-duration / 4)\n"
            "  --openfresco-stiffness K[,K2,...]  each actuator channel's stiffness (N/m),\n"
            "                      answered on the diagonal of the client's stiffness requests\n"
            "                      (default: a linear-spring specimen's stiffness, else 0)\n"
            "  --serve             with --openfresco and --out DIR: serve analyses one after\n"
            "                      another, each in DIR/analysis-N, while each ends cleanly\n"
            "  --probe-only        the other end of drths-numerical --probe-only (the days-before\n"
            "                      connectivity test): answers the handshake and the probes,\n"
            "                      opens no board (the virtual back end whatever daq says) and\n"
            "                      refuses a run; exit 0 when the test session ends\n"
            "  --io-check          commissioning, without a numerical site: read both inputs at\n"
            "                      rest, then move the actuator through two slow cycles about\n"
            "                      where it stands (damper command 0, then --io-current), and\n"
            "                      report each channel's noise, polarity, scale, offset and the\n"
            "                      I/O delay against the experiment file (docs/lab-day.md)\n"
            "  --io-amplitude M    the cycles' amplitude (default min(0.002, a tenth of\n"
            "                      physical.limit_displacement_m))\n"
            "  --io-leg S          seconds from rest to the amplitude and back each (default 1)\n"
            "  --io-current A      the damper command of the second cycle, A or V (default half\n"
            "                      the damper's largest; 0: one cycle)\n"
            "  --characterize      the damper's characterization, without a numerical site:\n"
            "                      sinusoids over amplitudes x frequencies x damper commands\n"
            "                      and a band-limited random segment through the DAQ and the\n"
            "                      drive envelope, then the fit of the damper model; writes\n"
            "                      model.yaml for numerical.smith_model (docs/lab-day.md)\n"
            "  --protocol standard|short  the characterization's protocol (default standard,\n"
            "                      about 3 min of actuator time; short: about 1 min)\n"
            "  --version           the version of this program\n"
            "  -h, --help          this text\n"
            "\n");
}

/* Static: one run per process (site-physical/app.h). */
static drths_physapp_t app;

enum { OPT_MAX_ITER = 1001, OPT_ITER_DURATION, OPT_STIFFNESS, OPT_SERVE, OPT_CHARZ, OPT_PROTOCOL };

/* --characterize and its --protocol (site-physical/charz_mode.h). */
static int characterize = 0, charz_short = 0, charz_protocol_set = 0;

static int own_option(void *ctx, int c, const char *arg)
{
    drths_physapp_t *a = ctx;
    double v;
    switch (c) {
    case 'l': a->listen = arg; return 0;
    case 'T': a->site = arg; return 0;
    case 'w': return drths_cli_positive(PROG, "--wait-timeout", arg, "seconds", &a->wait_timeout_s);
    case 'S':
        if (strcmp(arg, "auto") == 0) {
            a->tick_spin_us = -1;
            return 0;
        }
        return drths_cli_long(PROG, "--tick-spin (or auto)", arg, 0, 1000000, &a->tick_spin_us);
    case 'O': a->openfresco = arg; return 0;
    case 'D':
        return drths_cli_positive(PROG, "--step-duration", arg, "seconds",
                                  &a->ocfg.step_duration_s);
    case 'V':
        if (drths_ofr_variant_parse(arg, &a->ocfg.variant) == 0)
            return 0;
        drths_cli_usage_error(PROG, "--openfresco-variant: '%s' is not auto, shadow or generic",
                              arg);
        return -1;
    case 'P':
        if (drths_precor_mode_parse(arg, &a->ocfg.precor.mode) == 0)
            return 0;
        drths_cli_usage_error(PROG, "--precor: '%s' is not d or lpd", arg);
        return -1;
    case 'U':
        return drths_cli_positive(PROG, "--openfresco-setup-timeout", arg, "seconds",
                                  &a->ocfg.setup_timeout_s);
    case 'X':
        return drths_cli_positive(PROG, "--openfresco-step-timeout", arg, "seconds",
                                  &a->ocfg.step_timeout_s);
    case OPT_MAX_ITER: {
        long n;
        if (drths_cli_long(PROG, "--openfresco-max-iterations", arg, 1, 10000, &n) != 0)
            return -1;
        a->ocfg.max_iterations = (int)n;
        return 0;
    }
    case OPT_SERVE:
        a->serve = 1;
        return 0;
    case OPT_CHARZ:
        characterize = 1;
        return 0;
    case OPT_PROTOCOL:
        charz_protocol_set = 1;
        if (strcmp(arg, "standard") == 0 || strcmp(arg, "short") == 0) {
            charz_short = arg[1] == 'h';
            return 0;
        }
        drths_cli_usage_error(PROG, "--protocol: '%s' is not standard or short", arg);
        return -1;
    case OPT_STIFFNESS: {
        /* K, or K1,K2,... one per actuator channel (checked against the file in configure). An
         * empty value (K1,,K2) is refused rather than skipped: it would shift the channels. */
        a->stiffness_set = 0;
        for (const char *p = arg;; p++) {
            size_t n = strcspn(p, ",");
            char value[64];
            if (a->stiffness_set == DRTHS_OFR_MAX_DOF)
                return drths_cli_usage_error(PROG,
                                             "--openfresco-stiffness: at most %d values "
                                             "(one per actuator channel)",
                                             DRTHS_OFR_MAX_DOF);
            if (n == 0 || n >= sizeof value)
                return drths_cli_usage_error(PROG,
                                             "--openfresco-stiffness: value %d of '%s' is %s "
                                             "(K1,K2,... one per actuator channel, N/m)",
                                             a->stiffness_set + 1, arg, n ? "too long" : "empty");
            memcpy(value, p, n);
            value[n] = '\0';
            if (drths_cli_double(PROG, "--openfresco-stiffness", value, 0.0, 1e15, "N/m",
                                 &a->ocfg.stiffness[a->stiffness_set]) != 0)
                return -1;
            a->stiffness_set++;
            p += n;
            if (!*p)
                return 0;
        }
    }
    case OPT_ITER_DURATION:
        return drths_cli_positive(PROG, "--openfresco-iteration-duration", arg, "seconds",
                                  &a->ocfg.iteration_duration_s);
    case 'F':
        if (drths_cli_double(PROG, "--predict-fraction", arg, 0.0, 1.0, NULL, &v) != 0)
            return -1;
        if (v >= 1.0) {
            drths_cli_usage_error(PROG, "--predict-fraction: '%s' is not in [0, 1)", arg);
            return -1;
        }
        a->ocfg.precor.predict_fraction = v;
        return 0;
    case 'I': a->io_check = 1; return 0;
    case 'B': a->cfg.probe_only = 1; return 0;
    case 'A':
        return drths_cli_double(PROG, "--io-amplitude", arg, 1e-6, 0.1, "m", &a->io.amplitude_m);
    case 'L': return drths_cli_double(PROG, "--io-leg", arg, 0.01, 60.0, "s", &a->io.leg_s);
    case 'C': return drths_cli_double(PROG, "--io-current", arg, 0.0, 1e3, NULL, &a->io.current);
    default: return -1;
    }
}

int main(int argc, char **argv)
{
    drths_physapp_t *a = &app;
    a->udp.fd = -1; /* not open (0 would be stdin) */
    a->wait_timeout_s = 300.0;
    a->tick_spin_us = -1;
    a->ocfg.variant = DRTHS_OFR_AUTO;
    a->ocfg.precor.mode = DRTHS_PRECOR_D;
    a->ocfg.precor.predict_fraction = DRTHS_PRECOR_DEFAULT_FRACTION;
    a->ocfg.step_duration_s = 0.01;
    a->io.amplitude_m = a->io.leg_s = a->io.current = NAN;
    static const struct option own[] = {
        {"listen", required_argument, NULL, 'l'},
        {"site", required_argument, NULL, 'T'},
        {"wait-timeout", required_argument, NULL, 'w'},
        {"tick-spin", required_argument, NULL, 'S'},
        {"openfresco", required_argument, NULL, 'O'},
        {"step-duration", required_argument, NULL, 'D'},
        {"openfresco-variant", required_argument, NULL, 'V'},
        {"precor", required_argument, NULL, 'P'},
        {"predict-fraction", required_argument, NULL, 'F'},
        {"openfresco-setup-timeout", required_argument, NULL, 'U'},
        {"openfresco-step-timeout", required_argument, NULL, 'X'},
        {"openfresco-max-iterations", required_argument, NULL, OPT_MAX_ITER},
        {"openfresco-iteration-duration", required_argument, NULL, OPT_ITER_DURATION},
        {"openfresco-stiffness", required_argument, NULL, OPT_STIFFNESS},
        {"serve", no_argument, NULL, OPT_SERVE},
        {"characterize", no_argument, NULL, OPT_CHARZ},
        {"protocol", required_argument, NULL, OPT_PROTOCOL},
        {"io-check", no_argument, NULL, 'I'},
        {"probe-only", no_argument, NULL, 'B'},
        {"io-amplitude", required_argument, NULL, 'A'},
        {"io-leg", required_argument, NULL, 'L'},
        {"io-current", required_argument, NULL, 'C'},
        {0, 0, 0, 0},
    };
    const drths_site_cli_t cli = {PROG, own, own_option, a, usage,
                                  "the run failed (no peer, peer lost, abort, HOLD)"};
    int code = drths_site_parse(&cli, argc, argv, &a->so);
    if (code != DRTHS_SITE_CONTINUE)
        return code;
    if (a->openfresco && a->so.kernel_filter)
        return drths_cli_usage_error(PROG, "--kernel-filter is for the drths UDP link; an "
                                           "--openfresco site has no UDP socket");
    if ((code = drths_site_load_experiment(PROG, &a->exp, a->so.experiment)) != 0)
        return code;
    /* A file with several sites is run by each of them with its own entry; without --site
     * the site would not know which channels are its own. */
    if (a->site || a->exp.n_sites > 0) {
        drths_error_t err = {{0}};
        if (!a->site) {
            char list[DRTHS_EXPERIMENT_MAX_SITES * (DRTHS_SITE_NAME_MAX + 2)] = "";
            for (int i = 0; i < a->exp.n_sites; i++) {
                if (i)
                    strcat(list, ", ");
                strcat(list, a->exp.sites[i].name);
            }
            code = drths_cli_usage_error(PROG,
                                         "%s lists %d sites (%s): say which is this one with "
                                         "--site NAME",
                                         a->so.experiment, a->exp.n_sites, list);
            drths_experiment_close(&a->exp);
            return code;
        }
        if (drths_experiment_select_site(&a->exp, a->site, &err) != 0) {
            code = drths_cli_usage_error(PROG, "%s", err.msg);
            drths_experiment_close(&a->exp);
            return code;
        }
    }
    if (a->cfg.probe_only && (a->io_check || a->openfresco))
        return drths_cli_usage_error(PROG, "--probe-only is a test of the drths link; it does "
                                           "not go with --io-check or --openfresco");
    if (a->cfg.probe_only)
        a->exp.daq.backend = DRTHS_DAQ_BACKEND_VIRTUAL; /* nothing is driven */
    if (charz_protocol_set && !characterize)
        return drths_cli_usage_error(PROG, "--protocol goes with --characterize");
    if (characterize && (a->io_check || a->openfresco || a->cfg.probe_only || a->serve))
        return drths_cli_usage_error(PROG, "--characterize runs alone; it does not go with "
                                           "--io-check, --openfresco, --probe-only or --serve");
    if (characterize) {
        code = drths_charz_mode_run(&a->exp, &a->so, charz_short);
        drths_experiment_close(&a->exp);
        return code;
    }
    if (a->io_check) {
        code = drths_iocheck_mode_run(&a->exp, a->so.experiment, &a->io);
        drths_experiment_close(&a->exp);
        return code;
    }
    if (a->serve && (!a->openfresco || !a->so.out))
        return drths_cli_usage_error(PROG, "--serve goes with --openfresco and --out DIR");
    code = a->serve ? drths_physapp_serve(a) : drths_physapp_run_session(a);
    drths_site_key_wipe(&a->key);
    drths_crypto_wipe(a->cfg.psk, sizeof a->cfg.psk);
    drths_experiment_close(&a->exp);
    return code;
}
