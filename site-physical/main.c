/* drths-physical: the actuator site. Parses options, loads the experiment, wires the modules
 * (site-physical/physsite.c runs the data plane on one RT thread) and runs a libuv loop for
 * signals, the recorder's file writes, start-up lines and the status line. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "config/config.h"
#include "platform/recorder.h"
#include "platform/rt.h"
#include "platform/rtclock.h"
#include "platform/runfolder.h"
#include "platform/telemetry.h"
#include "platform/udp.h"
#include "protocol/crypto.h"
#include "protocol/fingerprint.h"
#include "site-physical/openfresco_app.h"
#include "site-physical/physsite.h"


static void usage(FILE *f)
{
    fprintf(f,
            "usage: drths-physical --experiment FILE [--listen HOST:PORT] [--key FILE]\n"
            "                      [--out DIR] [--wait-timeout S] [--require-rt] [--cpu N]\n"
            "                      [--tick-spin US|auto] [--kernel-filter] [--quiet]\n"
            "                      [--monitor HOST:PORT [--monitor-token FILE] [--wait-start]]\n"
            "       drths-physical --experiment FILE --openfresco HOST:PORT [--step-duration S]\n"
            "                      [--openfresco-variant auto|shadow|generic] [--precor d|lpd]\n"
            "                      [--predict-fraction F] [--out DIR] [--wait-timeout S] ...\n"
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
            "  --monitor-token FILE  control datagrams must carry the token in FILE\n"
            "  --wait-start        wait for Start from the monitor before taking part\n"
            "  --openfresco HOST:PORT  be the laboratory side of an OpenSees/OpenFresco analysis\n"
            "                      (expSite ShadowSite, expControl GenericTCP, element\n"
            "                      genericClient) on this TCP address instead of waiting for a\n"
            "                      numerical site (docs/openfresco.md)\n"
            "  --step-duration S   wall time per analysis step (default 0.01)\n"
            "  --openfresco-variant auto|shadow|generic  wire variant (default auto)\n"
            "  --precor d|lpd      corrector: PreCor-D (default) or PreCor-LPD\n"
            "  --predict-fraction F  fraction of a step predicted before correcting (0.6)\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 run completed, 1 run failed (no peer, peer lost, abort, hold),\n"
            "2 wrong experiment file or options.\n");
}

typedef struct app {
    drths_physsite_t ps;
    drths_recorder_t rec;
    uv_loop_t *loop;
    uv_signal_t sigint, sigterm;
    uv_async_t async;
    uv_timer_t drain_timer, status_timer;
    int status_on;
    int rt_printed;
    int closing;
    int status_shown;
    double rate_hz;
    int tick_spin_auto; /* no --tick-spin: drths_ticker_auto_spin_ns */
    /* live monitor (--monitor) */
    int tlm_on;
    drths_telemetry_t tlm;
    uv_timer_t tlm_timer;
    int wait_start, started;
} app_t;

static void clear_status(app_t *app)
{
    if (app->status_shown) {
        fprintf(stderr, "\r%100s\r", "");
        app->status_shown = 0;
    }
}

static void print_events(app_t *app)
{
    drths_physsite_t *ps = &app->ps;
    if (!app->rt_printed && atomic_load(&ps->rt_ready)) {
        app->rt_printed = 1;
        clear_status(app);
        for (int i = 0; i < DRTHS_RT_NITEMS; i++) {
            char line[320];
            drths_rt_report_line(&ps->rt_report, i, line, sizeof line);
            printf("  %s\n", line);
        }
        if (ps->cfg.tick_spin_ns > 0)
            printf("  tick: sleeps to %.0f us before each deadline, then spins%s\n",
                   (double)ps->cfg.tick_spin_ns * 1e-3,
                   app->tick_spin_auto ? " (--tick-spin auto at 10 kHz and above; --tick-spin 0 "
                                         "sleeps to the deadline)"
                                       : "");
        if (ps->rt_rc == 0 && !ps->cfg.source)
            printf("  waiting for the numerical site (up to %g s)\n", ps->cfg.wait_timeout_s);
        fflush(stdout);
    }
    drths_physsite_event_t ev;
    while (drths_physsite_next_event(ps, &ev) == 0) {
        clear_status(app);
        if (app->tlm_on)
            drths_telemetry_frame_event(&app->tlm.f, ev.text);
        if (ev.warning)
            fprintf(stderr, "drths-physical: %s\n", ev.text);
        else
            printf("  %s\n", ev.text);
        fflush(stdout);
    }
}

static void on_close(uv_handle_t *h)
{
    (void)h;
}

static void shutdown_loop(app_t *app)
{
    if (app->closing)
        return;
    app->closing = 1;
    uv_close((uv_handle_t *)&app->sigint, on_close);
    uv_close((uv_handle_t *)&app->sigterm, on_close);
    uv_close((uv_handle_t *)&app->async, on_close);
    uv_close((uv_handle_t *)&app->drain_timer, on_close);
    uv_close((uv_handle_t *)&app->status_timer, on_close);
    if (app->tlm_on)
        uv_close((uv_handle_t *)&app->tlm_timer, on_close);
}

static void service(app_t *app)
{
    print_events(app);
    drths_recorder_drain(&app->rec);
    if (atomic_load(&app->ps.done))
        shutdown_loop(app);
}

static void on_async(uv_async_t *h)
{
    service(h->data);
}

static void on_drain_timer(uv_timer_t *h)
{
    service(h->data);
}

static const char *state_name(int s)
{
    switch (s) {
    case DRTHS_PHYSSITE_WAITING: return "waiting";
    case DRTHS_PHYSSITE_CONNECTED: return "connected";
    case DRTHS_PHYSSITE_RUNNING: return "running";
    case DRTHS_PHYSSITE_HOLD: return "HOLD";
    default: return "done";
    }
}

static void on_status_timer(uv_timer_t *h)
{
    app_t *app = h->data;
    drths_physsite_t *ps = &app->ps;
    int st = atomic_load(&ps->state);
    if (st == DRTHS_PHYSSITE_RUNNING || st == DRTHS_PHYSSITE_HOLD) {
        uint64_t tick = atomic_load_explicit(&ps->st_tick, memory_order_relaxed);
        fprintf(stderr,
                "\r  %s  tick %" PRIu64 " (%.1f s)  L %u  applied %" PRIu64 "  concealed %" PRIu64
                "  late %" PRIu64 "  max wake-up lateness %.0f us   ",
                state_name(st), tick, (double)tick / app->rate_hz,
                (unsigned)atomic_load_explicit(&ps->st_L, memory_order_relaxed),
                (uint64_t)atomic_load_explicit(&ps->st_applied, memory_order_relaxed),
                (uint64_t)atomic_load_explicit(&ps->st_concealed, memory_order_relaxed),
                (uint64_t)atomic_load_explicit(&ps->st_late, memory_order_relaxed),
                (double)atomic_load_explicit(&ps->st_max_late_ns, memory_order_relaxed) * 1e-3);
        app->status_shown = 1;
    }
}

/* ---- live monitor ---- */

static int tlm_state(app_t *app)
{
    if (app->wait_start && !app->started)
        return DRTHS_TELEM_READY;
    switch (atomic_load(&app->ps.state)) {
    case DRTHS_PHYSSITE_WAITING:
    case DRTHS_PHYSSITE_CONNECTED: return DRTHS_TELEM_WAITING;
    case DRTHS_PHYSSITE_RUNNING: return DRTHS_TELEM_RUN;
    case DRTHS_PHYSSITE_HOLD: return DRTHS_TELEM_HOLD;
    default: return DRTHS_TELEM_DONE;
    }
}

static void tlm_counters(app_t *app)
{
    drths_physsite_t *ps = &app->ps;
    drths_telemetry_frame_t *f = &app->tlm.f;
    f->state = tlm_state(app);
    f->late = atomic_load_explicit(&ps->st_late, memory_order_relaxed);
    f->concealed = atomic_load_explicit(&ps->st_concealed, memory_order_relaxed);
    f->rejected = atomic_load_explicit(&ps->st_rejected, memory_order_relaxed);
    if (f->state == DRTHS_TELEM_RUN || f->state == DRTHS_TELEM_HOLD)
        f->L_ticks = (double)atomic_load_explicit(&ps->st_L, memory_order_relaxed);
}

/* Every decimation-th row of physical.csv becomes a frame (libuv thread, from the drain). */
static void tlm_tap(void *ctx, const double *row)
{
    app_t *app = ctx;
    if (!drths_telemetry_row_due(&app->tlm))
        return;
    drths_telemetry_frame_t *f = &app->tlm.f;
    f->tick = (int64_t)row[DRTHS_ACT_COL_TICK];
    f->time_s = row[DRTHS_ACT_COL_TIME];
    f->cmd_disp_m = row[DRTHS_ACT_COL_COMMAND];
    f->meas_disp_m = row[DRTHS_ACT_COL_MEAS_DISP];
    f->meas_force_N = row[DRTHS_ACT_COL_MEAS_FORCE];
    f->damper_cmd = row[DRTHS_ACT_COL_DAMPER_COMMAND];
    f->lateness_us = row[DRTHS_ACT_COL_WAKE_LATE];
    tlm_counters(app);
    drths_telemetry_send(&app->tlm);
}

static void act_on_control(app_t *app, drths_telemetry_cmd_t cmd)
{
    if (cmd == DRTHS_TELEM_CMD_START) {
        if (!app->started) {
            app->started = 1;
            drths_telemetry_frame_event(&app->tlm.f, "start from the monitor");
        }
        return;
    }
    if (cmd != DRTHS_TELEM_CMD_STOP && cmd != DRTHS_TELEM_CMD_ABORT)
        return;
    /* Stop and Abort take the SIGTERM path: HOLD at once, then the records are written. */
    const char *what = cmd == DRTHS_TELEM_CMD_STOP ? "stop" : "abort";
    if (!atomic_load(&app->ps.stop_request)) {
        clear_status(app);
        fprintf(stderr, "drths-physical: %s from the monitor: stopping (HOLD, then the records "
                "are written)\n", what);
        char text[80];
        snprintf(text, sizeof text, "%s from the monitor: HOLD", what);
        drths_telemetry_frame_event(&app->tlm.f, text);
    }
    app->started = 1; /* a site waiting for Start leaves at once */
    drths_physsite_request_stop_monitor(&app->ps);
}

/* 50 Hz: control datagrams; a frame 5 times a second when the record gives none (waiting,
 * ready, done) so the monitor sees the site alive. */
static void on_tlm_timer(uv_timer_t *h)
{
    app_t *app = h->data;
    drths_telemetry_cmd_t cmd;
    drths_telemetry_poll(&app->tlm, &cmd);
    act_on_control(app, cmd);
    if (drths_telemetry_beat_due(&app->tlm)) {
        tlm_counters(app);
        drths_telemetry_send(&app->tlm);
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    app_t *app = h->data;
    app->started = 1; /* a site waiting for Start leaves at once */
    if (!atomic_load(&app->ps.stop_request)) {
        clear_status(app);
        fprintf(stderr, "drths-physical: %s: stopping (HOLD, then the records are written)\n",
                signum == SIGINT ? "interrupted" : "terminated");
    }
    drths_physsite_request_stop(&app->ps);
}

static void wake_main(void *ctx)
{
    uv_async_send(ctx);
}

static void *rt_main(void *arg)
{
    drths_physsite_run(arg);
    return NULL;
}

static int parse_int(const char *text, const char *opt, long min, long max, long *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < min || v > max) {
        fprintf(stderr, "drths-physical: %s: '%s' is not an integer in %ld..%ld\n", opt, text,
                min, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_seconds(const char *text, const char *opt, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (!*text || *end || !isfinite(v) || v <= 0.0) {
        fprintf(stderr, "drths-physical: %s: '%s' is not a positive number of seconds\n", opt,
                text);
        return -1;
    }
    *out = v;
    return 0;
}

static void print_summary(app_t *app, const char *dir)
{
    drths_physsite_t *ps = &app->ps;
    const drths_actuator_t *a = &ps->act;
    const drths_actuator_counters_t *c = &a->c;
    printf("drths-physical: %s (exit %d)\n", ps->exit_reason, ps->exit_code);
    if (c->ticks) {
        printf("  ticks %" PRIu64 " (%.2f s), loop delay L = %u ticks (%.3f ms), epochs %" PRIu64
               "\n",
               c->ticks, (double)c->ticks / app->rate_hz, a->L, (double)a->L * 1e3 / app->rate_hz,
               c->epochs);
        printf("  commands: received %" PRIu64 ", applied %" PRIu64 ", concealed %" PRIu64
               " (longest run %" PRIu64 "), late %" PRIu64 "\n"
               "            reordered %" PRIu64 ", duplicate %" PRIu64 ", too far %" PRIu64
               ", ticks filled from redundancy %" PRIu64 "\n",
               c->commands, c->applied, c->concealed, c->max_consecutive_concealed, c->late,
               c->reordered, c->duplicates, c->too_far, c->from_redundancy);
        const drths_hist_t *lh = &a->lateness_ns;
        printf("  tick lateness: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us; %" PRIu64
               " ticks later than dt/2\n",
               drths_hist_quantile(lh, 0.5) * 1e-3, drths_hist_quantile(lh, 0.99) * 1e-3,
               drths_hist_quantile(lh, 0.999) * 1e-3, lh->count ? lh->max * 1e-3 : 0.0,
               c->late_wakeups);
        const drths_hist_t *ld = &a->lead_ns;
        if (ld->count)
            printf("  command lead: p50 %.3f ms, min %.3f ms\n",
                   drths_hist_quantile(ld, 0.5) * 1e-6, ld->min * 1e-6);
        printf("  tracking (%s): RMS error %.3f %%, indicator %.4g mm^2, peak error %.4f mm; "
               "%" PRIu64 " ticks with the preview short, %" PRIu64
               " with the derivatives limited\n",
               drths_compensation_name(a->p.compensation), drths_actuator_tracking_rms_pct(a),
               drths_tracking_ti(&a->track) * 1e6, drths_tracking_max_err(&a->track) * 1e3,
               a->comp.extrapolated_ticks, a->comp.limited_ticks);
        if (a->hold)
            printf("  HOLD: %s (%" PRIu64 " ticks in HOLD)\n", a->hold_text, c->hold_ticks);
    }
    char rejects[512] = "";
    size_t n = 0;
    for (int r = 1; r < DRTHS_REJECT_COUNT; r++) {
        uint64_t k = ps->rx.rejects[r] + ps->pre_rejects[r];
        if (k && n < sizeof rejects)
            n += (size_t)snprintf(rejects + n, sizeof rejects - n, "%s%s %" PRIu64,
                                  n ? ", " : "", drths_reject_name((drths_reject_t)r), k);
    }
    if (ps->wrong_source && n < sizeof rejects)
        n += (size_t)snprintf(rejects + n, sizeof rejects - n, "%swrong source %" PRIu64,
                              n ? ", " : "", ps->wrong_source);
    if (ps->other_session && n < sizeof rejects)
        snprintf(rejects + n, sizeof rejects - n, "%sother session %" PRIu64, n ? ", " : "",
                 ps->other_session);
    printf("  rejected datagrams: %s\n", rejects[0] ? rejects : "none");
    printf("  records: %" PRIu64 " rows (%" PRIu64 " dropped) in %s/physical.csv; summary %s/"
           "summary.json\n",
           ps->rec_written, ps->rec_dropped, dir, dir);
}

int main(int argc, char **argv)
{
    const char *experiment = NULL, *out = NULL, *listen = NULL, *key_file = NULL;
    const char *monitor = NULL, *monitor_token = NULL;
    double wait_timeout = 300.0;
    int require_rt = 0, quiet = 0, kernel_filter = 0, wait_start = 0;
    long cpu = -1, tick_spin_us = -1; /* -1: auto */
    const char *openfresco = NULL;
    static drths_ofr_app_t ofr;
    int ofr_open = 0;
    drths_ofr_app_config_t ocfg;
    memset(&ocfg, 0, sizeof ocfg);
    ocfg.variant = DRTHS_OFR_AUTO;
    ocfg.precor.mode = DRTHS_PRECOR_D;
    ocfg.precor.predict_fraction = DRTHS_PRECOR_DEFAULT_FRACTION;
    ocfg.step_duration_s = 0.01;
    static const struct option opts[] = {
        {"openfresco", required_argument, NULL, 'O'},
        {"step-duration", required_argument, NULL, 'D'},
        {"openfresco-variant", required_argument, NULL, 'V'},
        {"precor", required_argument, NULL, 'P'},
        {"predict-fraction", required_argument, NULL, 'F'},
        {"experiment", required_argument, NULL, 'e'},
        {"listen", required_argument, NULL, 'l'},
        {"key", required_argument, NULL, 'k'},
        {"out", required_argument, NULL, 'o'},
        {"wait-timeout", required_argument, NULL, 'w'},
        {"require-rt", no_argument, NULL, 'R'},
        {"quiet", no_argument, NULL, 'q'},
        {"kernel-filter", no_argument, NULL, 'K'},
        {"cpu", required_argument, NULL, 'C'},
        {"tick-spin", required_argument, NULL, 'S'},
        {"monitor", required_argument, NULL, 'M'},
        {"monitor-token", required_argument, NULL, 'T'},
        {"wait-start", no_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'e': experiment = optarg; break;
        case 'l': listen = optarg; break;
        case 'k': key_file = optarg; break;
        case 'o': out = optarg; break;
        case 'w':
            if (parse_seconds(optarg, "--wait-timeout", &wait_timeout))
                return DRTHS_EXIT_CONFIG;
            break;
        case 'R': require_rt = 1; break;
        case 'O': openfresco = optarg; break;
        case 'D':
            if (parse_seconds(optarg, "--step-duration", &ocfg.step_duration_s))
                return DRTHS_EXIT_CONFIG;
            break;
        case 'V':
            if (drths_ofr_variant_parse(optarg, &ocfg.variant) != 0) {
                fprintf(stderr, "drths-physical: --openfresco-variant: '%s' is not auto, shadow "
                        "or generic\n", optarg);
                return DRTHS_EXIT_CONFIG;
            }
            break;
        case 'P':
            if (drths_precor_mode_parse(optarg, &ocfg.precor.mode) != 0) {
                fprintf(stderr, "drths-physical: --precor: '%s' is not d or lpd\n", optarg);
                return DRTHS_EXIT_CONFIG;
            }
            break;
        case 'F': {
            char *end;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || !(v >= 0.0 && v < 1.0)) {
                fprintf(stderr, "drths-physical: --predict-fraction: '%s' is not in [0, 1)\n",
                        optarg);
                return DRTHS_EXIT_CONFIG;
            }
            ocfg.precor.predict_fraction = v;
            break;
        }
        case 'q': quiet = 1; break;
        case 'K': kernel_filter = 1; break;
        case 'C':
            if (parse_int(optarg, "--cpu", 0, 4095, &cpu))
                return DRTHS_EXIT_CONFIG;
            break;
        case 'S':
            if (strcmp(optarg, "auto") == 0)
                tick_spin_us = -1;
            else if (parse_int(optarg, "--tick-spin (or auto)", 0, 1000000, &tick_spin_us))
                return DRTHS_EXIT_CONFIG;
            break;
        case 'M': monitor = optarg; break;
        case 'T': monitor_token = optarg; break;
        case 'W': wait_start = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return DRTHS_EXIT_CONFIG;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "drths-physical: unexpected argument '%s'\n", argv[optind]);
        return DRTHS_EXIT_CONFIG;
    }
    if (!experiment) {
        fprintf(stderr, "drths-physical: --experiment FILE is required (see --help)\n");
        return DRTHS_EXIT_CONFIG;
    }
    if (openfresco && kernel_filter) {
        fprintf(stderr, "drths-physical: --kernel-filter is for the drths UDP link; an "
                        "--openfresco site has no UDP socket\n");
        return DRTHS_EXIT_CONFIG;
    }
    if ((wait_start || monitor_token) && !monitor) {
        fprintf(stderr, "drths-physical: --wait-start and --monitor-token need --monitor\n");
        return DRTHS_EXIT_CONFIG;
    }

    drths_error_t err = {{0}};
    if (drths_crypto_init() != 0) {
        fprintf(stderr, "drths-physical: cannot initialise libsodium\n");
        return 1;
    }
    static drths_experiment_t exp;
    if (drths_experiment_load(&exp, experiment, &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg);
        return DRTHS_EXIT_CONFIG;
    }
    int code = DRTHS_EXIT_CONFIG;
    static app_t app;
    drths_physsite_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.exp = &exp;
    cfg.wait_timeout_s = wait_timeout;
    cfg.silence_timeout_s = 10.0;
    cfg.kernel_filter = kernel_filter;
    drths_rt_options_default(&cfg.rt);
    cfg.rt.require = require_rt;
    cfg.rt.cpu = (int)cpu;
    app.tick_spin_auto = tick_spin_us < 0;
    cfg.tick_spin_ns = app.tick_spin_auto
                           ? drths_ticker_auto_spin_ns((int64_t)llround(1e9 / exp.rate_hz))
                           : (int64_t)tick_spin_us * 1000;
    app.rate_hz = exp.rate_hz;

    if (drths_experiment_fingerprint(&exp, cfg.fingerprint, &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg);
        goto out_exp;
    }
    const char *kpath = key_file ? key_file : exp.link.key_path;
    char key_line[200];
    int rehearsal_key = 0;
    if (kpath) {
        if (drths_key_load(cfg.psk, kpath, &err) != 0) {
            fprintf(stderr, "drths-physical: %s\n", err.msg);
            goto out_exp;
        }
        char id[17];
        drths_key_id(cfg.psk, id);
        snprintf(key_line, sizeof key_line, "key id %s (%s)", id, kpath);
    } else {
        drths_key_rehearsal(cfg.psk);
        rehearsal_key = 1;
        snprintf(key_line, sizeof key_line, "rehearsal key (public)");
    }

    if (openfresco) {
        ocfg.listen = openfresco;
        ocfg.accept_timeout_s = wait_timeout;
        int orc = drths_ofr_app_init(&ofr, &ocfg, &err);
        if (orc != 0) {
            fprintf(stderr, "drths-physical: %s\n", err.msg);
            code = orc == -EINVAL ? DRTHS_EXIT_CONFIG : 1;
            goto out_exp;
        }
        ofr_open = 1;
        cfg.source = drths_ofr_app_source();
        cfg.source_ctx = &ofr;
    }

    drths_addr_t laddr;
    const char *ltext = listen ? listen : exp.physical.listen;
    if (drths_addr_parse(&laddr, ltext, listen ? "--listen" : "physical.listen", &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg);
        goto out_exp;
    }

    /* The I/O first: without its board the site stops here, before it listens or writes a run
     * folder. The socket and the recorder are only borrowed by init and opened below. */
    static drths_udp_t udp;
    app.loop = uv_default_loop();
    uv_async_init(app.loop, &app.async, on_async);
    app.async.data = &app;
    cfg.wake = wake_main;
    cfg.wake_ctx = &app.async;
    int daq_failed = 0;
    if (drths_physsite_init(&app.ps, &cfg, &udp, &app.rec, &daq_failed, &err) != 0) {
        fprintf(stderr, "drths-physical: %s: %s\n", experiment, err.msg);
        uv_close((uv_handle_t *)&app.async, NULL);
        uv_run(app.loop, UV_RUN_DEFAULT);
        /* No board (or no memory) is a failed run, not a wrong file. */
        code = 1;
        goto out_exp;
    }
    udp.fd = -1;
    if (!openfresco && drths_udp_open(&udp, &laddr, NULL, &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg);
        code = 1;
        goto out_ps;
    }

    if (monitor) {
        if (drths_telemetry_open(&app.tlm, monitor, monitor_token, "physical", exp.rate_hz,
                                 DRTHS_TELEMETRY_DEFAULT_HZ, &err) != 0) {
            fprintf(stderr, "drths-physical: %s\n", err.msg);
            code = DRTHS_EXIT_CONFIG;
            goto out_udp;
        }
        app.tlm_on = 1;
        app.wait_start = wait_start;
    }

    char label[300], dir[4096], path[4200];
    snprintf(label, sizeof label, "%s-physical", exp.name);
    if (drths_runfolder_create(dir, sizeof dir, out, exp.output.directory, label, experiment,
                               &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg);
        code = 1;
        goto out_udp;
    }
    if (drths_path_join(path, sizeof path, dir, "physical.csv") != 0 ||
        drths_recorder_open(&app.rec, path, drths_actuator_columns, DRTHS_ACT_NCOLS,
                            drths_recorder_rows_for(exp.rate_hz), &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg[0] ? err.msg : "run folder path too long");
        code = 1;
        goto out_udp;
    }

    char fphex[65], addr[80];
    drths_experiment_fingerprint_hex(cfg.fingerprint, fphex);
    printf("drths-physical: experiment '%s' (fingerprint %.16s..)\n", exp.name, fphex);
    if (openfresco) {
        drths_addr_format(&ofr.laddr, addr, sizeof addr);
        printf("  OpenFresco: listening on TCP %s (variant %s)\n", addr,
               drths_ofr_variant_name(ocfg.variant));
        if (!drths_addr_is_loopback(&ofr.laddr))
            fprintf(stderr, "drths-physical: warning: OpenFresco clients are not authenticated: "
                            "anyone who reaches %s can drive the actuator (within the limits); "
                            "keep the port closed to all but the analysis machine "
                            "(docs/openfresco.md)\n",
                    addr);
    } else {
        drths_addr_format(&laddr, addr, sizeof addr);
        printf("  listening on %s, %s\n", addr, key_line);
    }
    fflush(stdout);
    if (rehearsal_key && !openfresco)
        fprintf(stderr,
                "drths-physical: warning: no key file (link.key_file or --key): using the public "
                "rehearsal key, which protects nothing; use it only to rehearse on one machine\n");
    printf("  rate %g Hz, dt %.4g ms; watchdog %g ms, at most %d concealed ticks in a row\n",
           exp.rate_hz, 1e3 / exp.rate_hz, exp.physical.watchdog_ms,
           exp.physical.max_concealed_ticks);
    printf("  specimen: %s damper, %s actuator, noise %g m / %g N, %s%d-tick I/O delay, rest "
           "damper command %g\n",
           drths_damper_model_name(exp.specimen.damper.model),
           drths_actuator_plant_name(exp.actuator.plant), exp.actuator.noise_displacement_m,
           exp.actuator.noise_force_N,
           exp.actuator.adc_bits ? "" : "no quantisation, ", exp.actuator.io_delay_ticks,
           app.ps.act.p.rest_damper_command);
    if (exp.actuator.adc_bits)
        printf("  converters: %d bits over +/- %g m and +/- %g N\n", exp.actuator.adc_bits,
               exp.actuator.displacement_range_m, exp.actuator.force_range_N);
    if (app.ps.daq.backend == DRTHS_DAQ_BACKEND_COMEDI)
        printf("  DAQ: comedi board %s (the specimen settings above are not used)\n",
               app.ps.daq.u.comedi.device);
    else
        printf("  DAQ: virtual (rehearsal specimen)\n");
    printf("  compensation %s (lookahead %d ticks, I/O delay %d ticks",
           drths_compensation_name(exp.actuator.compensation), app.ps.act.lookahead,
           exp.actuator.io_delay_ticks);
    if (exp.actuator.compensation == DRTHS_COMPENSATION_FEEDFORWARD ||
        exp.actuator.compensation == DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE)
        printf("; desired trajectory limited to %g m/s2, %g m/s3",
               exp.physical.feedforward_max_acceleration_m_s2,
               exp.physical.feedforward_max_jerk_m_s3);
    printf(")\n");
    printf("  limits: command %g m, %g m/s; drive %g m; measured %g m, %g N; HOLD: %s",
           exp.physical.limit_displacement_m, exp.physical.limit_velocity_m_s,
           exp.physical.limit_drive_m, exp.physical.limit_measured_displacement_m,
           exp.physical.limit_force_N, drths_hold_mode_name(exp.physical.hold));
    if (exp.physical.hold == DRTHS_HOLD_RAMP)
        printf(" to %g m", exp.physical.safe_position_m);
    printf(" at most %g m/s\n", exp.physical.ramp_rate_m_s);
    printf("  run folder: %s\n", dir);
    if (app.tlm_on)
        printf("  monitor: telemetry to %s (%g frames/s)%s%s\n", monitor,
               DRTHS_TELEMETRY_DEFAULT_HZ, monitor_token ? ", control with a token" : "",
               wait_start ? "; waiting for Start" : "");
    fflush(stdout);

    uv_signal_init(app.loop, &app.sigint);
    uv_signal_init(app.loop, &app.sigterm);
    app.sigint.data = app.sigterm.data = &app;
    uv_signal_start(&app.sigint, on_signal, SIGINT);
    uv_signal_start(&app.sigterm, on_signal, SIGTERM);
    uv_timer_init(app.loop, &app.drain_timer);
    uv_timer_init(app.loop, &app.status_timer);
    app.drain_timer.data = app.status_timer.data = &app;
    uv_timer_start(&app.drain_timer, on_drain_timer, 50, 50);
    if (!quiet && isatty(2))
        uv_timer_start(&app.status_timer, on_status_timer, 1000, 1000);
    if (app.tlm_on) {
        drths_recorder_set_tap(&app.rec, tlm_tap, &app);
        uv_timer_init(app.loop, &app.tlm_timer);
        app.tlm_timer.data = &app;
        uv_timer_start(&app.tlm_timer, on_tlm_timer, 0, 20);
        drths_telemetry_frame_event(&app.tlm.f, app.wait_start ? "waiting for Start"
                                                                : "waiting for the numerical site");
        /* Until Start (or a stop), only the monitor and the signals are served. */
        while (app.wait_start && !app.started)
            uv_run(app.loop, UV_RUN_ONCE);
    }

    if (openfresco && drths_ofr_app_start(&ofr, &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg);
        atomic_store(&app.ps.done, 1);
        shutdown_loop(&app);
        uv_run(app.loop, UV_RUN_DEFAULT);
        drths_recorder_close(&app.rec, NULL);
        code = 1;
        goto out_udp;
    }
    pthread_t th;
    int prc = drths_rt_thread_create(&th, rt_main, &app.ps);
    if (prc != 0) {
        fprintf(stderr, "drths-physical: cannot start the control thread: %s\n", strerror(-prc));
        atomic_store(&app.ps.done, 1);
        shutdown_loop(&app);
        uv_run(app.loop, UV_RUN_DEFAULT);
        drths_recorder_close(&app.rec, NULL);
        code = 1;
        goto out_udp;
    }
    uv_run(app.loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
    if (openfresco)
        drths_ofr_app_stop(&ofr);
    print_events(&app);
    clear_status(&app);

    drths_recorder_drain(&app.rec);
    app.ps.rec_dropped = drths_recorder_dropped(&app.rec);
    code = app.ps.exit_code;
    if (drths_recorder_close(&app.rec, &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg);
        code = 1;
    }
    app.ps.rec_written = app.rec.written;
    if (drths_path_join(path, sizeof path, dir, "summary.json") != 0 ||
        drths_physsite_write_summary(&app.ps, path, &err) != 0) {
        fprintf(stderr, "drths-physical: %s\n", err.msg[0] ? err.msg : "run folder path too long");
        code = 1;
    }
    print_summary(&app, dir);
    if (openfresco)
        printf("  OpenFresco: %" PRIu64 " steps reached of %" PRIu64 " trials, %" PRIu64
               " late targets (%" PRIu64 " ticks held), step-end tracking RMS error %.3f %%, "
               "peak %.4f mm\n",
               ofr.steps_reached, ofr.targets, ofr.late_targets, ofr.held_ticks,
               drths_ofr_app_step_rms_pct(&ofr), ofr.max_abs_err * 1e3);
    if (app.tlm_on) {
        char text[800];
        snprintf(text, sizeof text, "%s (exit %d)", app.ps.exit_reason, code);
        drths_telemetry_frame_event(&app.tlm.f, text);
        tlm_counters(&app);
        app.tlm.f.state = DRTHS_TELEM_DONE;
        drths_telemetry_send(&app.tlm);
    }
out_udp:
    drths_telemetry_close(&app.tlm);
    drths_udp_close(&udp);
    if (openfresco)
        drths_ofr_app_stop(&ofr);
out_ps:
    if (!app.closing) {
        uv_close((uv_handle_t *)&app.async, NULL);
        uv_run(app.loop, UV_RUN_DEFAULT);
    }
    /* Neutral outputs whatever happened (nothing is written if no tick ever ran). */
    drths_actuator_safe_state(&app.ps.act);
    drths_physsite_close(&app.ps);
    uv_loop_close(app.loop);
out_exp:
    if (ofr_open)
        drths_ofr_app_close(&ofr);
    drths_crypto_wipe(cfg.psk, sizeof cfg.psk);
    drths_experiment_close(&exp);
    return code;
}
