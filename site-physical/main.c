/* drths-physical: the actuator site. Its own options, the start-up and end lines, and the wiring
 * of site-physical/physsite.c (the data plane on one RT thread) into the site shell
 * (common/site/shell.h), which owns the loop, the signals, the monitor and the recorder's drain. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/config/config.h"
#include "common/config/setup.h"
#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "common/platform/runfolder.h"
#include "common/platform/udp.h"
#include "protocol/fingerprint.h"
#include "site-physical/iocheck.h"
#include "site-physical/openfresco_app.h"
#include "site-physical/physsite.h"
#include "site-physical/report.h"
#include "common/site/shell.h"

/* Every channel physical.channels may declare is one element of the OpenFresco vectors (and one
 * --openfresco-stiffness value): the file's bound may not exceed the wire's. */
_Static_assert(DRTHS_EXPERIMENT_MAX_CHANNELS <= DRTHS_OFR_MAX_DOF,
               "physical.channels allows more channels than the OpenFresco vectors carry");

#define PROG "drths-physical"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drths-physical --experiment FILE [--listen HOST:PORT] [--key FILE]\n"
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
            "\n"
            "  --experiment FILE   the experiment file (docs/experiment-file.md)\n"
            "  --listen HOST:PORT  where to wait for the numerical site (default: physical.listen)\n"
            "  --key FILE          pre-shared key file (default: link.key_file; without either,\n"
            "                      the public rehearsal key, for a rehearsal on one machine)\n"
            "  --out DIR           run folder (default: <output.directory>/<date>-<name>-physical)\n"
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
            "  --version           the version of this program\n"
            "  -h, --help          this text\n"
            "\n");
}

/* Everything main, the shell's hooks and the RT thread share (static: one run per process). */
typedef struct app {
    drths_site_options_t so; /* the common options */
    const char *listen, *openfresco;
    double wait_timeout_s;
    long tick_spin_us; /* --tick-spin, -1: auto (drths_ticker_auto_spin_ns) */
    drths_ofr_app_config_t ocfg;
    drths_ofr_app_t ofr;
    int ofr_open;
    int stiffness_set; /* --openfresco-stiffness given */
    int serve;         /* --serve: one analysis after another */
    int signalled;     /* a signal asked the site to stop */
    int served;        /* the last session's client completed its set-up */
    drths_experiment_t exp;
    drths_site_t shell;
    drths_site_key_t key;
    drths_addr_t laddr;
    drths_physsite_config_t cfg;
    drths_physsite_t ps;
    int ps_open;
    drths_udp_t udp;
    drths_recorder_t rec;
    int rec_open;
    int rt_printed;
    char dir[4096];
    drths_provenance_t prov;
    int io_check;
    double io_amplitude_m, io_leg_s, io_current; /* NAN: the default */
} app_t;

static app_t app;

enum { OPT_MAX_ITER = 1001, OPT_ITER_DURATION, OPT_STIFFNESS, OPT_SERVE };

static int own_option(void *ctx, int c, const char *arg)
{
    app_t *a = ctx;
    double v;
    switch (c) {
    case 'l': a->listen = arg; return 0;
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
        return drths_cli_double(PROG, "--io-amplitude", arg, 1e-6, 0.1, "m", &a->io_amplitude_m);
    case 'L': return drths_cli_double(PROG, "--io-leg", arg, 0.01, 60.0, "s", &a->io_leg_s);
    case 'C': return drths_cli_double(PROG, "--io-current", arg, 0.0, 1e3, NULL, &a->io_current);
    default: return -1;
    }
}

/* ---- the shell's hooks ------------------------------------------------------------------ */

/* The RT thread's report once it is ready, then its event lines. */
static void print_events(void *ctx)
{
    app_t *a = ctx;
    drths_physsite_t *ps = &a->ps;
    if (!a->rt_printed && atomic_load(&ps->rt_ready)) {
        a->rt_printed = 1;
        drths_site_clear_status(&a->shell);
        drths_site_rt_print(&ps->rt_report, "  ");
        if (ps->cfg.tick_spin_ns > 0)
            printf("  tick: sleeps to %.0f us before each deadline, then spins%s\n",
                   (double)ps->cfg.tick_spin_ns * 1e-3,
                   a->tick_spin_us < 0 ? " (--tick-spin auto at 10 kHz and above; --tick-spin 0 "
                                         "sleeps to the deadline)"
                                       : "");
        if (ps->rt_rc == 0 && !ps->cfg.source)
            printf("  waiting for the numerical site (up to %g s)\n", ps->cfg.wait_timeout_s);
        fflush(stdout);
    }
    drths_physsite_event_t ev;
    while (drths_physsite_next_event(ps, &ev) == 0) {
        drths_site_clear_status(&a->shell);
        drths_site_event(&a->shell, ev.text);
        if (ev.warning)
            fprintf(stderr, "drths-physical: %s\n", ev.text);
        else
            printf("  %s\n", ev.text);
        fflush(stdout);
    }
}

static int on_status(void *ctx, char *buf, size_t cap)
{
    return drths_physsite_status_text(&((app_t *)ctx)->ps, buf, cap);
}

/* Signals and the monitor's Stop / Abort both HOLD at once, then the records are written. */
static void on_stop(void *ctx, const drths_site_stop_request_t *r)
{
    app_t *a = ctx;
    if (r->by == DRTHS_SITE_STOP_SIGNAL) {
        a->signalled = 1;
        if (r->first)
            fprintf(stderr, "drths-physical: %s: stopping (HOLD, then the records are written)\n",
                    r->signum == SIGINT ? "interrupted" : "terminated");
        drths_physsite_request_stop(&a->ps);
        return;
    }
    if (r->first) {
        fprintf(stderr, "drths-physical: %s from the monitor: stopping (HOLD, then the records "
                        "are written)\n", r->command);
        char text[80];
        snprintf(text, sizeof text, "%s from the monitor: HOLD", r->command);
        drths_site_event(&a->shell, text);
    }
    drths_physsite_request_stop_monitor(&a->ps);
}

static void on_counters(void *ctx, drths_telemetry_frame_t *f)
{
    drths_physsite_frame_counters(&((app_t *)ctx)->ps, f);
}

static void on_tap(void *ctx, const double *row, drths_telemetry_frame_t *f)
{
    drths_physsite_frame_row(row, f);
}

static void rt_body(void *ctx)
{
    drths_physsite_run(ctx);
}

/* ---- start-up --------------------------------------------------------------------------- */

/* The data plane's configuration, the key, the OpenFresco server and the listen address.
 * Returns 0 or the exit code. */
static int configure(app_t *a)
{
    drths_error_t err = {{0}};
    drths_physsite_config_t *cfg = &a->cfg;
    cfg->exp = &a->exp;
    cfg->wait_timeout_s = a->wait_timeout_s;
    cfg->silence_timeout_s = 10.0;
    cfg->kernel_filter = a->so.kernel_filter;
    drths_site_rt_options(&a->so, &cfg->rt);
    cfg->tick_spin_ns = a->tick_spin_us < 0
                            ? drths_ticker_auto_spin_ns((int64_t)llround(1e9 / a->exp.rate_hz))
                            : (int64_t)a->tick_spin_us * 1000;
    cfg->wake = drths_site_wake;
    cfg->wake_ctx = &a->shell;
    /* Several actuator channels are driven from OpenFresco only (the numerical site drives
     * one). */
    if (!a->openfresco && drths_experiment_check_network(&a->exp, &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    if (drths_experiment_fingerprint(&a->exp, cfg->fingerprint, &err) != 0 ||
        drths_site_key_load(&a->key, a->so.key, a->exp.link.key_path, &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    drths_site_monitor_key(&a->shell, &a->key);
    memcpy(cfg->psk, a->key.psk, sizeof cfg->psk);
    if (a->openfresco) {
        a->ocfg.listen = a->openfresco;
        a->ocfg.accept_timeout_s = a->wait_timeout_s;
        /* A linear spring's stiffness is known; an MR damper's force is mostly viscous and
         * hysteretic, with no initial stiffness to speak of: 0 (docs/openfresco.md). One value
         * per actuator channel, in the order of physical.channels. */
        int n = drths_experiment_n_actuators(&a->exp);
        a->ocfg.n_channels = n;
        if (a->stiffness_set && a->stiffness_set != n)
            return drths_cli_usage_error(PROG,
                                         "--openfresco-stiffness: %d value%s, but %s declares %d "
                                         "actuator channel%s (one value per channel, "
                                         "comma-separated)",
                                         a->stiffness_set, a->stiffness_set == 1 ? "" : "s",
                                         a->so.experiment, n, n == 1 ? "" : "s");
        for (int i = 0; i < n && !a->stiffness_set; i++) {
            const drths_experiment_t *v = drths_experiment_actuator(&a->exp, i);
            a->ocfg.stiffness[i] = v->specimen.damper.model == DRTHS_DAMPER_LINEAR_SPRING
                                       ? v->specimen.damper.stiffness_N_per_m
                                       : 0.0;
        }
        int rc = drths_ofr_app_init(&a->ofr, &a->ocfg, &err);
        if (rc != 0) {
            fprintf(stderr, "drths-physical: %s\n", err.msg);
            return rc == -EINVAL ? DRTHS_EXIT_CONFIG : DRTHS_EXIT_FAILED;
        }
        a->ofr_open = 1;
        cfg->source = drths_ofr_app_source();
        cfg->source_ctx = &a->ofr;
    }
    const char *ltext = a->listen ? a->listen : a->exp.physical.listen;
    const char *lwhat = a->listen ? "--listen" : "physical.listen";
    if (drths_addr_parse(&a->laddr, ltext, lwhat, &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    /* An OpenFresco site has no drths link, so no key to refuse (docs/openfresco.md). */
    const drths_site_link_t link = {&a->laddr, lwhat, 1,
                                    a->exp.daq.backend != DRTHS_DAQ_BACKEND_VIRTUAL,
                                    drths_daq_backend_name(a->exp.daq.backend)};
    if (!a->openfresco && drths_site_key_allowed(&a->key, &link, &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    return 0;
}

/* The I/O first: without its board the site stops here, before it listens or writes a run
 * folder (the socket and the recorder are only borrowed by init and opened after it). Then the
 * socket, the monitor, the run folder and physical.csv. Returns 0 or the exit code. */
static int open_io(app_t *a)
{
    drths_error_t err = {{0}};
    if (drths_physsite_init(&a->ps, &a->cfg, &a->udp, &a->rec, NULL, &err) != 0) {
        /* No board (or no memory) is a failed run, not a wrong file. */
        return drths_cli_error(PROG, "%s: %s", a->so.experiment, err.msg);
    }
    a->ps_open = 1;
    if (!a->openfresco && drths_udp_open(&a->udp, &a->laddr, NULL, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    int ncols = 0;
    const char *const *columns = drths_physsite_columns(&a->ps, &ncols);
    if (drths_site_monitor_open(&a->shell, "physical", a->exp.rate_hz, &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    if (drths_site_run_folder(a->dir, sizeof a->dir, &a->so, &a->exp, "physical", &a->prov,
                              &err) != 0 ||
        drths_site_recorder_open(&a->shell, &a->rec, a->dir, "physical.csv", columns, ncols,
                                 a->exp.rate_hz, 1, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    a->rec_open = 1;
    snprintf(a->prov.key_id, sizeof a->prov.key_id, "%s", a->key.id);
    return 0;
}

static void print_start(const app_t *a)
{
    const drths_experiment_t *e = &a->exp;
    char fphex[65], addr[80];
    drths_experiment_fingerprint_hex(a->cfg.fingerprint, fphex);
    printf("drths-physical: experiment '%s' (fingerprint %.16s..)\n", e->name, fphex);
    if (a->openfresco) {
        drths_addr_format(&a->ofr.laddr, addr, sizeof addr);
        printf("  OpenFresco: listening on TCP %s (variant %s; one client, which must set up "
               "within %g s)\n",
               addr, drths_ofr_variant_name(a->ocfg.variant), a->ofr.cfg.setup_timeout_s);
        if (!drths_addr_is_loopback(&a->ofr.laddr))
            drths_cli_warning(PROG, "OpenFresco clients are not authenticated: anyone who "
                                    "reaches %s can drive the actuator (within the limits); keep "
                                    "the port closed to all but the analysis machine "
                                    "(docs/openfresco.md)", addr);
    } else {
        drths_addr_format(&a->laddr, addr, sizeof addr);
        if (a->key.path)
            printf("  listening on %s, key id %s (%s)\n", addr, a->key.id, a->key.path);
        else
            printf("  listening on %s, rehearsal key (public)\n", addr);
        if (drths_addr_is_loopback(&a->laddr))
            printf("  (loopback: only this machine can reach it; for another laboratory set "
                   "physical.listen or --listen)\n");
        fflush(stdout);
        drths_site_key_warning(PROG, &a->key);
    }
    if (a->cfg.probe_only)
        printf("  probe-only: answers a connectivity test (drths-numerical --probe-only); no "
               "board is opened and no run is accepted\n");
    else
        drths_physsite_print_setup(stdout, &a->ps);
    printf("  run folder: %s\n", a->dir);
    drths_site_print_recorders(&a->shell, "  ");
    drths_site_print_monitor(&a->shell, "  ");
}

/* Start (when waited for), the RT thread, the loop until it ends, then the records and the
 * summary. Returns the exit code. */
static int run(app_t *a)
{
    drths_error_t err = {{0}};
    drths_site_timers_start(&a->shell);
    drths_site_event(&a->shell, a->so.wait_start ? "waiting for Start"
                                                 : "waiting for the numerical site");
    drths_site_wait_start(&a->shell);
    int rc = 0;
    if (a->openfresco && (rc = drths_ofr_app_start(&a->ofr, &err)) != 0)
        fprintf(stderr, "drths-physical: %s\n", err.msg);
    else if ((rc = drths_site_rt_start(&a->shell, rt_body, &a->ps, NULL)) != 0)
        fprintf(stderr, "drths-physical: cannot start the control thread: %s\n", strerror(-rc));
    drths_site_run(&a->shell);
    if (a->openfresco)
        drths_ofr_app_stop(&a->ofr);
    a->rec_open = 0;
    a->ps.rec_dropped = drths_recorder_dropped(&a->rec);
    int closed = drths_recorder_close(&a->rec, &err);
    if (rc != 0)
        return DRTHS_EXIT_FAILED; /* the thread never ran: nothing to report */
    drths_site_mark_incomplete(PROG, a->ps.rec_dropped, a->ps.exit_reason,
                               sizeof a->ps.exit_reason, &a->ps.exit_code);
    drths_site_provenance_rt(&a->shell, &a->ps.rt_report, &a->prov);
    a->ps.provenance = &a->prov;
    int code = closed == 0 ? a->ps.exit_code : drths_cli_error(PROG, "%s", err.msg);
    a->ps.rec_written = a->rec.written;
    if (drths_physsite_report_end(stdout, &a->ps, a->openfresco ? &a->ofr : NULL, a->dir, &err))
        code = drths_cli_error(PROG, "%s", err.msg);
    char text[800];
    snprintf(text, sizeof text, "%s (exit %d)", a->ps.exit_reason, code);
    drths_site_monitor_end(&a->shell, text);
    return code;
}

/* ---- --io-check ----------------------------------------------------------------------------- */

static volatile sig_atomic_t io_interrupted;

static void io_on_signal(int sig)
{
    (void)sig;
    io_interrupted = 1;
}

/* The check's pace: tick k is due k periods after the first, slept for (a slow ramp needs no
 * real-time thread; a late tick only stretches the cycle). */
static int io_pace(void *ctx, long k)
{
    const int64_t *t0 = ctx;
    (void)drths_sleep_until_ns(t0[0] + k * t0[1]);
    return io_interrupted;
}

/* drths-physical --io-check of one actuator channel (i; its view of the experiment): the DAQ
 * opened as for a run, the check, its report. Returns the exit code: 0 when every signal is OK
 * (or only notes), 1 otherwise. */
static int io_check_channel(app_t *a, int i)
{
    const drths_experiment_t *e = drths_experiment_actuator(&a->exp, i);
    drths_error_t err = {{0}};
    drths_specimen_params_t sp;
    drths_specimen_t spec;
    drths_daq_t daq = {0};
    char who[DRTHS_CHANNEL_NAME_MAX + 32] = "";
    if (a->exp.n_channels > 0)
        snprintf(who, sizeof who, "actuator channel %d (%s): ", i + 1,
                 drths_experiment_actuator_name(&a->exp, i));
    drths_setup_specimen(e, &sp);
    if (drths_specimen_init(&spec, &sp, 1.0 / e->rate_hz, &err) != 0)
        return drths_cli_error(PROG, "%s: %svirtual specimen: %s", a->so.experiment, who, err.msg);
    if (drths_daq_open(e, &spec, NULL, &daq, &err) != 0) {
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s: %sdaq (backend %s): %s", a->so.experiment, who,
                               drths_daq_backend_name(e->daq.backend), err.msg);
    }
    drths_iocheck_params_t p;
    drths_iocheck_params_default(e, &p);
    if (!isnan(a->io_amplitude_m))
        p.amplitude_m = a->io_amplitude_m;
    if (!isnan(a->io_leg_s))
        p.leg_s = a->io_leg_s;
    if (!isnan(a->io_current))
        p.current = a->io_current;
    int64_t clock[2] = {drths_now_ns(), (int64_t)llround(1e9 / e->rate_hz)};
    p.pace = io_pace;
    p.pace_ctx = clock;
    printf("drths-physical: %sI/O check of '%s' (backend %s), %g Hz: %s of +/-%.3g mm, %g s a "
           "leg, damper command 0%s\n",
           who, e->name, drths_daq_backend_name(e->daq.backend), e->rate_hz,
           p.current > 0 ? "two cycles" : "one cycle", p.amplitude_m * 1e3, p.leg_s,
           p.current > 0 ? " then the --io-current" : "");
    fflush(stdout);
    drths_iocheck_result_t res;
    int rc = drths_iocheck_run(&daq, &p, &res, &err);
    if (rc == 0)
        drths_iocheck_print(stdout, &p, &res);
    drths_daq_close(&daq);
    drths_specimen_close(&spec);
    if (rc != 0)
        return drths_cli_usage_error(PROG, "%s%s", who, err.msg);
    return res.overall <= DRTHS_IOCHECK_NOTE ? 0 : DRTHS_EXIT_FAILED;
}

/* drths-physical --io-check: every actuator channel in turn (physical.channels), one after the
 * other, so only one actuator moves at a time. Returns the first failure's exit code, else the
 * worst result (0 when every channel is OK or has only notes). */
static int io_check(app_t *a)
{
    signal(SIGINT, io_on_signal);
    signal(SIGTERM, io_on_signal);
    int worst = 0;
    for (int i = 0; i < drths_experiment_n_actuators(&a->exp) && !io_interrupted; i++) {
        int rc = io_check_channel(a, i);
        if (rc != 0 && rc != DRTHS_EXIT_FAILED)
            return rc;
        if (rc)
            worst = rc;
    }
    return worst;
}

/* One session: the shell, the experiment's configuration, the I/O, the run and its records, all
 * closed again. Returns the exit code. */
static int session(app_t *a, const drths_site_hooks_t *hooks)
{
    drths_error_t err = {{0}};
    int code;
    if (drths_site_init(&a->shell, PROG, &a->so, hooks, &err) != 0)
        code = drths_cli_error(PROG, "%s", err.msg);
    else if ((code = configure(a)) == 0 && (code = open_io(a)) == 0) {
        print_start(a);
        code = run(a);
    }
    a->served = a->ofr_open && a->ofr.setup_seen;
    drths_site_close(&a->shell);
    if (a->rec_open)
        drths_recorder_close(&a->rec, NULL);
    drths_udp_close(&a->udp);
    if (a->ps_open) {
        /* Neutral outputs whatever happened (nothing is written if no tick ever ran). */
        for (int i = 0; i < a->ps.n_channels; i++)
            drths_actuator_safe_state(drths_physsite_act(&a->ps, i));
        drths_physsite_close(&a->ps);
        a->ps_open = 0;
    }
    if (a->ofr_open) {
        drths_ofr_app_stop(&a->ofr);
        drths_ofr_app_close(&a->ofr);
        a->ofr_open = 0;
    }
    a->rec_open = 0;
    return code;
}

/* --serve: one analysis after another, each in its own run folder OUT/analysis-N, the listener
 * open again between them. An analysis that did not end cleanly (HOLD, a limit, a lost client),
 * a wait with no client, or a signal ends the serving with that exit code: after a HOLD the
 * operator looks at the rig before the next analysis. */
static int serve(app_t *a, const drths_site_hooks_t *hooks)
{
    const char *base = a->so.out;
    char dir[1024];
    if (mkdir(base, 0777) != 0 && errno != EEXIST)
        return drths_cli_error(PROG, "--out %s: %s", base, strerror(errno));
    for (int n = 1;; n++) {
        snprintf(dir, sizeof dir, "%s/analysis-%d", base, n);
        a->so.out = dir;
        int code = session(a, hooks);
        if (code != 0 || a->signalled || !a->served) {
            a->so.out = base;
            return code;
        }
        printf("drths-physical: --serve: analysis %d ended cleanly; waiting for the next client\n",
               n);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    app_t *a = &app;
    a->udp.fd = -1; /* not open (0 would be stdin) */
    a->wait_timeout_s = 300.0;
    a->tick_spin_us = -1;
    a->ocfg.variant = DRTHS_OFR_AUTO;
    a->ocfg.precor.mode = DRTHS_PRECOR_D;
    a->ocfg.precor.predict_fraction = DRTHS_PRECOR_DEFAULT_FRACTION;
    a->ocfg.step_duration_s = 0.01;
    a->io_amplitude_m = a->io_leg_s = a->io_current = NAN;
    static const struct option own[] = {
        {"listen", required_argument, NULL, 'l'},
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
    if (a->cfg.probe_only && (a->io_check || a->openfresco))
        return drths_cli_usage_error(PROG, "--probe-only is a test of the drths link; it does "
                                           "not go with --io-check or --openfresco");
    if (a->cfg.probe_only)
        a->exp.daq.backend = DRTHS_DAQ_BACKEND_VIRTUAL; /* nothing is driven */
    if (a->io_check) {
        code = io_check(a);
        drths_experiment_close(&a->exp);
        return code;
    }
    if (a->serve && (!a->openfresco || !a->so.out))
        return drths_cli_usage_error(PROG, "--serve goes with --openfresco and --out DIR");
    const drths_site_hooks_t hooks = {a, print_events, on_status, on_stop, on_counters, on_tap};
    if (!a->serve) {
        code = session(a, &hooks);
    } else {
        code = serve(a, &hooks);
    }
    drths_site_key_wipe(&a->key);
    drths_crypto_wipe(a->cfg.psk, sizeof a->cfg.psk);
    drths_experiment_close(&a->exp);
    return code;
}
