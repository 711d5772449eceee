/* drths-numerical: the numerical site. Its own options, the reference run, and the steps of a
 * hybrid run (connect, probe, run, report) in the site shell (common/site/shell.h), which owns the
 * loop, the signals, the monitor and the real-time thread. The logic lives in site-numerical/. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/config/config.h"
#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "site-numerical/hybrid.h"
#include "site-numerical/numsite.h"
#include "site-numerical/reference.h"
#include "site-numerical/summary.h"
#include "common/site/shell.h"

#define PROG "drths-numerical"

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
            "  --out DIR            run folder (default: <output.directory>/<date>-<name>-numerical\n"
            "                       or -reference)\n"
            "  --quiet              no progress line\n"
            "  --monitor HOST:PORT  send telemetry (50 frames/s) to drths-monitor and accept its\n"
            "                       Start / Stop / Abort (Stop and Abort act as SIGTERM)\n"
            "                       (authenticated with a key derived from the link key)\n"
            "  --wait-start         wait for Start from the monitor before connecting\n"
            "  --version            the version of this program\n"
            "  -h, --help           this text\n"
            "\n");
}

static void progress(long step, long steps, void *ctx)
{
    fprintf(stderr, "\r  step %ld of %ld (%.0f %%)", step, steps, 100.0 * step / steps);
    fflush(stderr);
}

/* --reference: the structure and the virtual specimen in one process, no network. */
static int run_reference(const drths_site_options_t *o, drths_experiment_t *exp)
{
    drths_error_t err = {{0}};
    char dir[4096];
    static drths_provenance_t prov;
    if (drths_site_run_folder(dir, sizeof dir, o, exp, "reference", &prov, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    /* The reference run's summary.json is reference.c's; its provenance goes beside it. */
    snprintf(prov.real_time, sizeof prov.real_time, "no real-time thread (reference run)");
    if (drths_provenance_write(dir, &prov, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    printf("drths-numerical: reference run of '%s' at %.0f Hz into %s\n", exp->name, exp->rate_hz,
           dir);
    drths_reference_summary_t sum;
    int show = !o->quiet && isatty(2);
    int rc = drths_reference_run(exp, dir, &sum, show ? progress : NULL, NULL, &err);
    if (show)
        fprintf(stderr, "\r%60s\r", "");
    if (rc != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        return rc == -EINVAL || rc == -ENOTSUP ? DRTHS_EXIT_CONFIG : DRTHS_EXIT_FAILED;
    }
    drths_numsite_print_reference(stdout, &sum, dir);
    drths_reference_summary_close(&sum);
    return 0;
}

/* Everything main, the shell's hooks and the RT thread share (static: one run per process). */
typedef struct app {
    drths_site_options_t so; /* the common options */
    const char *peer;        /* --peer */
    double connect_timeout_s, peer_timeout_s;
    int reference;
    int probe_only;         /* --probe-only */
    double probe_seconds;   /* --probe-seconds */
    int64_t wait_spin_ns; /* --wait */
    drths_experiment_t exp;
    drths_site_t shell;
    drths_numsite_t site;
    drths_hybrid_t hyb;
    drths_recorder_t rec;
    int running;   /* the RT thread was let into the run */
    int tlm_state; /* drths_telemetry_state_t */
    drths_numsite_frame_map_t frame_map; /* numerical.csv columns of the frame's signals */
    char dir[4096];
    char reason[700];
    int exit_code;
    drths_provenance_t prov;
} app_t;

static app_t app;

static int own_option(void *ctx, int c, const char *arg)
{
    app_t *a = ctx;
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

static int on_status(void *ctx, char *buf, size_t cap)
{
    app_t *a = ctx;
    return drths_numsite_status_text(&a->site, &a->hyb, buf, cap) > 0;
}

/* The run polls the shell's stop flag itself (drths_numsite_run): only the sentence is ours. */
static void on_stop(void *ctx, const drths_site_stop_request_t *r)
{
    app_t *a = ctx;
    if (!r->first)
        return;
    if (r->by == DRTHS_SITE_STOP_SIGNAL) {
        fprintf(stderr, "drths-numerical: %s received, stopping (the actuator site is told to "
                        "hold)\n", r->signum == SIGINT ? "SIGINT" : "SIGTERM");
        return;
    }
    fprintf(stderr, "drths-numerical: %s from the monitor, stopping (the actuator site is told "
                    "to hold)\n", r->command);
    char text[80];
    snprintf(text, sizeof text, "%s from the monitor: the actuator site is told to hold",
             r->command);
    drths_site_event(&a->shell, text);
}

static void on_counters(void *ctx, drths_telemetry_frame_t *f)
{
    app_t *a = ctx;
    f->state = a->tlm_state;
    drths_numsite_frame_counters(&a->site, f);
}

static void on_tap(void *ctx, const double *row, drths_telemetry_frame_t *f)
{
    drths_numsite_frame_row(&((app_t *)ctx)->frame_map, row, f);
}

static void rt_body(void *ctx)
{
    app_t *a = ctx;
    drths_numsite_run(&a->site, &a->hyb, &a->rec, &a->shell.stop, drths_site_wake, &a->shell);
}

/* Key, socket, run folder and the start-up lines; then the shell and the monitor. Returns 0 or
 * the exit code (nothing to report yet: no summary.json). */
static int open_site(app_t *a)
{
    drths_error_t err = {{0}};
    drths_site_key_t key;
    int rc = drths_site_key_load(&key, a->so.key, a->exp.link.key_path, &err);
    if (rc != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    /* The rehearsal key only towards loopback; a peer that does not parse is left to
     * drths_numsite_init's own message. */
    drths_addr_t peer;
    const drths_site_link_t link = {&peer, a->peer ? "--peer" : "numerical.peer", 0, 0, NULL};
    if (drths_addr_parse(&peer, a->peer ? a->peer : a->exp.numerical.peer, link.what, NULL) == 0 &&
        drths_site_key_allowed(&key, &link, &err) != 0) {
        drths_site_key_wipe(&key);
        return drths_cli_usage_error(PROG, "%s", err.msg);
    }
    drths_site_monitor_key(&a->shell, &key);
    rc = drths_numsite_init(&a->site, &a->exp, a->peer ? a->peer : a->exp.numerical.peer, key.psk,
                            &err);
    drths_site_key_wipe(&key);
    if (rc == 0 && a->so.kernel_filter)
        rc = drths_numsite_filter(&a->site, &err);
    if (rc != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        return rc == -EINVAL ? DRTHS_EXIT_CONFIG : DRTHS_EXIT_FAILED;
    }
    if (drths_site_run_folder(a->dir, sizeof a->dir, &a->so, &a->exp, "numerical", &a->prov,
                              &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    snprintf(a->prov.key_id, sizeof a->prov.key_id, "%s", key.id);
    a->site.wait_spin_ns = a->wait_spin_ns;
    drths_numsite_print_start(stdout, &a->site, key.path, key.id, a->dir, a->so.kernel_filter);
    if (!key.path)
        drths_site_key_warning(PROG, &key);
    if (drths_site_monitor_open(&a->shell, "numerical", a->exp.rate_hz, &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    drths_site_print_monitor(&a->shell, "");
    return 0;
}

/* Sets the reason the run did not happen; returns -1. */
static int not_run(app_t *a, const char *reason)
{
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    fprintf(stderr, "drths-numerical: %s\n", a->reason);
    return -1;
}

/* The RT thread (gated: it applies its real-time options and waits), Start, the handshake and
 * the probes. Returns 0, or -1 with the reason set. */
static int connect_peer(app_t *a)
{
    drths_error_t err = {{0}};
    drths_rt_options_t rt;
    drths_site_rt_options(&a->so, &rt);
    int rc = drths_site_rt_start(&a->shell, rt_body, a, &rt);
    if (rc != 0) {
        fprintf(stderr, "drths-numerical: cannot start the real-time thread: %s\n", strerror(-rc));
        snprintf(a->reason, sizeof a->reason, "cannot start the real-time thread");
        return -1;
    }
    rc = drths_site_rt_ready(&a->shell);
    drths_site_rt_print(&a->shell.rt_report, "");
    if (rc != 0)
        return not_run(a, "real time required (--require-rt) but not granted");
    if (!a->shell.started) {
        drths_site_event(&a->shell, "waiting for Start");
        drths_site_wait_start(&a->shell);
    }
    printf("connecting: HELLO to %s (session %016llx, up to %g s)\n", a->site.peer_text,
           (unsigned long long)a->site.session_id, a->connect_timeout_s);
    fflush(stdout);
    drths_site_event(&a->shell, a->so.kernel_filter
                                    ? "connecting to the actuator site (kernel filter on)"
                                    : "connecting to the actuator site");
    rc = drths_numsite_handshake(&a->site, a->connect_timeout_s, drths_site_poll, &a->shell, &err);
    if (rc == 0) {
        printf("connected: the actuator site runs the same experiment (fingerprint %.16s..)\n",
               a->site.fingerprint_hex);
        fflush(stdout);
        drths_site_event(&a->shell, "connected: measuring the round trip");
        rc = drths_numsite_probe(&a->site, drths_site_poll, &a->shell, &err);
    }
    if (rc != 0)
        return not_run(a, rc != -ECANCELED ? err.msg
                          : atomic_load(&a->shell.stop) == DRTHS_SITE_STOP_MONITOR
                              ? "stopped from the monitor before the run"
                              : "stopped by signal before the run");
    return 0;
}

/* The hybrid loop with the measured L, numerical.csv, the start lines and the timers. Returns
 * 0, or -1 with the reason and exit code set. */
static int start_run(app_t *a)
{
    drths_error_t err = {{0}};
    drths_hybrid_params_t params, *hp = &params;
    drths_hybrid_params_default(hp, &a->exp);
    hp->L = a->site.lchoice.L;
    hp->wait_ns = drths_hybrid_feedback_wait_ns(hp->L, hp->dt_ns, a->site.probe_summary.min_ns,
                                                a->site.rtt_q_ns, hp->reorder_ticks);
    hp->peer_timeout_ns = (int64_t)(a->peer_timeout_s * 1e9);
    hp->rtt_q_ns = a->site.rtt_q_ns;
    int rc = drths_hybrid_init(&a->hyb, &a->exp, hp, &err);
    if (rc == 0)
        rc = drths_site_recorder_open(&a->shell, &a->rec, a->dir, "numerical.csv",
                                      (const char *const *)a->hyb.colnames, a->hyb.ncols,
                                      a->exp.rate_hz, 1, &err);
    if (rc != 0) {
        a->exit_code = rc == -ENOTSUP || rc == -EINVAL ? DRTHS_EXIT_CONFIG : DRTHS_EXIT_FAILED;
        return not_run(a, err.msg);
    }
    drths_site_print_recorders(&a->shell, "");
    printf("smith predictor: %s (nominal %s model, dead time L = %u ticks)\n",
           drths_smith_mode_name(a->exp.numerical.smith),
           drths_damper_model_name(a->exp.specimen.damper.model), hp->L);
    printf("running: %ld steps (%.2f s), control %s, R = %d, feedback wait %.3f ms, L %s\n",
           a->hyb.ns.steps, (double)(a->hyb.ns.steps - 1) * a->hyb.ns.dt_s,
           drths_control_mode_name(a->exp.control.mode), hp->r, (double)a->hyb.p.wait_ns * 1e-6,
           hp->adapt_L ? "on the fly (epochs)" : "fixed");
    fflush(stdout);
    drths_numsite_frame_map(&a->frame_map, &a->hyb);
    char text[120];
    snprintf(text, sizeof text, "running: %ld steps, L = %u ticks", a->hyb.ns.steps, hp->L);
    drths_site_event(&a->shell, text);
    a->tlm_state = DRTHS_TELEM_RUN;
    drths_site_timers_start(&a->shell);
    a->running = 1;
    return 0;
}

/* The run and its report: summary.json, the end lines, the monitor's last frame. */
static int run_hybrid(app_t *a)
{
    int code = open_site(a);
    if (code != 0)
        return code;
    if (a->probe_only) {
        drths_error_t err = {{0}};
        uint64_t n = (uint64_t)(a->probe_seconds * 1e9 /
                                (double)drths_numsite_probe_interval_ns(&a->site));
        if (drths_numsite_set_probes(&a->site, n, &err) != 0)
            return drths_cli_error(PROG, "%s", err.msg);
        printf("probe-only: %llu probes over %g s, one every %.2f ms\n", (unsigned long long)n,
               a->probe_seconds, (double)drths_numsite_probe_interval_ns(&a->site) * 1e-6);
    }
    int64_t t_start = drths_now_ns();
    a->exit_code = DRTHS_EXIT_FAILED;
    int ok = connect_peer(a) == 0;
    if (ok)
        drths_numsite_print_probes(stdout, &a->site);
    if (ok && a->probe_only) {
        drths_numsite_print_probe_only(stdout, &a->site);
        drths_numsite_farewell(&a->site, "probe-only connectivity test finished");
        snprintf(a->reason, sizeof a->reason, "probe-only connectivity test finished");
        a->exit_code = 0;
        ok = 0; /* no run */
    }
    ok = ok && start_run(a) == 0;
    if (a->shell.gated)
        drths_site_rt_go(&a->shell, ok);
    drths_site_run(&a->shell);
    drths_error_t err = {{0}};
    uint64_t dropped = 0;
    if (a->running) {
        dropped = drths_recorder_dropped(&a->rec);
        if (drths_recorder_close(&a->rec, &err) != 0)
            fprintf(stderr, "drths-numerical: %s\n", err.msg);
        int by_monitor = atomic_load(&a->shell.stop) == DRTHS_SITE_STOP_MONITOR;
        a->exit_code = drths_numsite_end_reason(&a->hyb, by_monitor, a->peer_timeout_s, a->reason,
                                                sizeof a->reason);
        if (a->exit_code != 0)
            fprintf(stderr, "drths-numerical: %s\n", a->reason);
        drths_site_mark_incomplete(PROG, dropped, a->reason, sizeof a->reason, &a->exit_code);
    }
    char rt_text[400];
    drths_site_rt_summary(&a->shell.rt_report, rt_text, sizeof rt_text);
    drths_site_provenance_rt(&a->shell, &a->shell.rt_report, &a->prov);
    drths_numsite_outcome_t out = {a->reason, a->exit_code,
                                   (double)(drths_now_ns() - t_start) * 1e-9, dropped, rt_text,
                                   a->running ? &a->rec : NULL, &a->prov};
    drths_numsite_report_end(stdout, &a->shell, &a->site, a->running ? &a->hyb : NULL, a->dir,
                             &out);
    return a->exit_code;
}

int main(int argc, char **argv)
{
    app_t *a = &app;
    a->site.udp.fd = -1; /* not open (0 would be stdin) */
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
    /* A hybrid run drives one actuator channel; several are served over OpenFresco only. */
    drths_error_t cerr = {{0}};
    if (!a->reference && drths_experiment_check_network(&a->exp, &cerr) != 0) {
        drths_experiment_close(&a->exp);
        return drths_cli_usage_error(PROG, "%s", cerr.msg);
    }
    if (a->reference) {
        code = run_reference(&a->so, &a->exp);
    } else {
        const drths_site_hooks_t hooks = {a, NULL, on_status, on_stop, on_counters, on_tap};
        drths_error_t err = {{0}};
        code = drths_site_init(&a->shell, PROG, &a->so, &hooks, &err) != 0
                   ? drths_cli_error(PROG, "%s", err.msg)
                   : run_hybrid(a);
        drths_site_close(&a->shell);
        drths_hybrid_close(&a->hyb);
        drths_numsite_close(&a->site);
    }
    drths_experiment_close(&a->exp);
    return code;
}
