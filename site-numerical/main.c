/* drths-numerical: the numerical site. Parses options, loads the experiment and wires modules;
 * the logic lives in site-numerical/ and the layers below it. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "config/config.h"
#include "config/setup.h"
#include "platform/recorder.h"
#include "platform/rt.h"
#include "platform/rtclock.h"
#include "platform/runfolder.h"
#include "platform/telemetry.h"
#include "protocol/crypto.h"
#include "site-numerical/hybrid.h"
#include "site-numerical/numsite.h"
#include "site-numerical/reference.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drths-numerical --experiment FILE [--peer HOST:PORT] [--key FILE] [--out DIR]\n"
            "                       [--connect-timeout S] [--peer-timeout S] [--require-rt]\n"
            "                       [--cpu N] [--wait block|spin|hybrid:US] [--kernel-filter]\n"
            "                       [--quiet]\n"
            "                       [--monitor HOST:PORT [--monitor-token FILE] [--wait-start]]\n"
            "       drths-numerical --experiment FILE --reference [--out DIR] [--quiet]\n"
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
            "  --reference          run the monolithic reference: structure and virtual specimen\n"
            "                       in one process, no network, no actuator\n"
            "  --out DIR            run folder (default: <output.directory>/<date>-<name>-numerical\n"
            "                       or -reference)\n"
            "  --quiet              no progress line\n"
            "  --monitor HOST:PORT  send telemetry (50 frames/s) to drths-monitor and accept its\n"
            "                       Start / Stop / Abort (Stop and Abort act as SIGTERM)\n"
            "  --monitor-token FILE control datagrams must carry the token in FILE\n"
            "  --wait-start         wait for Start from the monitor before connecting\n"
            "  -h, --help           this text\n"
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

static int run_reference(const char *experiment, const char *out, int quiet)
{
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

/* ---- hybrid run ------------------------------------------------------------------------- */

typedef struct options {
    const char *experiment, *out, *peer, *key, *monitor, *monitor_token;
    double connect_timeout_s, peer_timeout_s;
    int reference, quiet, require_rt, wait_start, kernel_filter;
    int cpu; /* --cpu, -1 none */
    int64_t wait_spin_ns; /* --wait */
} options_t;

/* Everything the main thread, the libuv callbacks and the RT thread share. */
typedef struct app {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    uv_async_t async;
    uv_timer_t drain_timer, status_timer;
    int handles_open;
    atomic_int stop; /* 1: a signal asked the run to end; 2: the monitor did */
    atomic_int done; /* the RT thread has finished the run */
    sem_t ready, go;
    int go_run;      /* set before posting go: 1 run, 0 leave at once */
    drths_rt_options_t rt_opts;
    drths_rt_report_t rt_rep;
    int rt_rc;
    drths_numsite_t site;
    drths_hybrid_t hyb;
    drths_recorder_t rec;
    int status_line;
    /* live monitor (--monitor) */
    int tlm_on;
    drths_telemetry_t tlm;
    uv_timer_t tlm_timer;
    int tlm_state;   /* drths_telemetry_state_t, set by main */
    int started;     /* Start received (or not waiting for it) */
    int col[9];      /* numerical.csv columns of the frame's signals, -1 if absent */
} app_t;

enum { C_STEP, C_TIME, C_CMD, C_DAMPER, C_FMEAS, C_FUSED, C_RTT, C_L, C_CONCEALED };

static void on_signal(uv_signal_t *h, int signum)
{
    app_t *app = h->data;
    app->started = 1; /* a site waiting for Start leaves at once */
    if (!atomic_exchange(&app->stop, 1))
        fprintf(stderr, "\ndrths-numerical: %s received, stopping (the actuator site is told "
                        "to hold)\n", signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void close_handles(app_t *app)
{
    if (!app->handles_open)
        return;
    app->handles_open = 0;
    uv_close((uv_handle_t *)&app->sigint, NULL);
    uv_close((uv_handle_t *)&app->sigterm, NULL);
    uv_close((uv_handle_t *)&app->async, NULL);
    uv_close((uv_handle_t *)&app->drain_timer, NULL);
    uv_close((uv_handle_t *)&app->status_timer, NULL);
    if (app->tlm_on)
        uv_close((uv_handle_t *)&app->tlm_timer, NULL);
}

/* ---- live monitor ---- */

static void tlm_event(app_t *app, const char *text)
{
    if (app->tlm_on)
        drths_telemetry_frame_event(&app->tlm.f, text);
}

static void tlm_counters(app_t *app)
{
    drths_telemetry_frame_t *f = &app->tlm.f;
    f->state = app->tlm_state;
    f->late = atomic_load_explicit(&app->site.pub_late, memory_order_relaxed);
    f->concealed = atomic_load_explicit(&app->site.pub_concealed, memory_order_relaxed);
    f->rejected = atomic_load_explicit(&app->site.pub_rejected, memory_order_relaxed);
}

static double col_of(const app_t *app, const double *row, int which)
{
    return app->col[which] >= 0 ? row[app->col[which]] : NAN;
}

/* Every decimation-th row of numerical.csv becomes a frame (libuv thread, from the drain). */
static void tlm_tap(void *ctx, const double *row)
{
    app_t *app = ctx;
    if (!drths_telemetry_row_due(&app->tlm))
        return;
    drths_telemetry_frame_t *f = &app->tlm.f;
    f->tick = (int64_t)col_of(app, row, C_STEP);
    f->time_s = col_of(app, row, C_TIME);
    f->cmd_disp_m = col_of(app, row, C_CMD);
    f->damper_cmd = col_of(app, row, C_DAMPER);
    f->meas_force_N = col_of(app, row, C_FMEAS);
    f->used_force_N = col_of(app, row, C_FUSED);
    f->smith_N = f->used_force_N - f->meas_force_N;
    f->rtt_ms = col_of(app, row, C_RTT);
    f->L_ticks = col_of(app, row, C_L);
    tlm_counters(app);
    drths_telemetry_send(&app->tlm);
}

static void act_on_control(app_t *app, drths_telemetry_cmd_t cmd)
{
    if (cmd == DRTHS_TELEM_CMD_START) {
        if (!app->started) {
            app->started = 1;
            tlm_event(app, "start from the monitor");
        }
        return;
    }
    if (cmd != DRTHS_TELEM_CMD_STOP && cmd != DRTHS_TELEM_CMD_ABORT)
        return;
    /* Stop and Abort take the SIGTERM path: the actuator site is told to hold. */
    app->started = 1;
    int none = 0;
    if (atomic_compare_exchange_strong(&app->stop, &none, 2)) {
        const char *what = cmd == DRTHS_TELEM_CMD_STOP ? "stop" : "abort";
        fprintf(stderr, "\ndrths-numerical: %s from the monitor, stopping (the actuator site is "
                        "told to hold)\n", what);
        char text[80];
        snprintf(text, sizeof text, "%s from the monitor: the actuator site is told to hold",
                 what);
        tlm_event(app, text);
    }
}

/* 50 Hz: control datagrams; a frame 5 times a second when the record gives none. */
static void on_tlm_timer(uv_timer_t *t)
{
    app_t *app = t->data;
    drths_telemetry_cmd_t cmd;
    drths_telemetry_poll(&app->tlm, &cmd);
    act_on_control(app, cmd);
    if (drths_telemetry_beat_due(&app->tlm)) {
        tlm_counters(app);
        drths_telemetry_send(&app->tlm);
    }
}

static void on_async(uv_async_t *h)
{
    app_t *app = h->data;
    drths_recorder_drain(&app->rec);
    if (atomic_load(&app->done))
        close_handles(app);
}

static void on_drain_timer(uv_timer_t *t)
{
    app_t *app = t->data;
    drths_recorder_drain(&app->rec);
}

static void on_status_timer(uv_timer_t *t)
{
    app_t *app = t->data;
    long step = atomic_load_explicit(&app->site.pub_step, memory_order_relaxed);
    unsigned long long conc =
        atomic_load_explicit(&app->site.pub_concealed, memory_order_relaxed);
    int64_t rtt = atomic_load_explicit(&app->site.pub_rtt_ns, memory_order_relaxed);
    fprintf(stderr, "\r  step %ld of %ld (%.0f %%), concealed %llu, rtt %.3f ms   ", step,
            app->hyb.ns.steps, 100.0 * (double)step / (double)app->hyb.ns.steps, conc,
            (double)rtt * 1e-6);
    fflush(stderr);
    app->status_line = 1;
}

static void wake_main(void *ctx)
{
    app_t *app = ctx;
    uv_async_send(&app->async);
}

/* Serves signals while the main thread waits on the network (handshake, probes). */
static int idle(void *ctx)
{
    app_t *app = ctx;
    uv_run(&app->loop, UV_RUN_NOWAIT);
    return atomic_load(&app->stop);
}

static void *rt_thread(void *arg)
{
    app_t *app = arg;
    app->rt_rc = drths_rt_apply_thread(&app->rt_opts, &app->rt_rep);
    sem_post(&app->ready);
    while (sem_wait(&app->go) != 0)
        ;
    if (app->go_run)
        drths_numsite_run(&app->site, &app->hyb, &app->rec, &app->stop, wake_main, app);
    atomic_store(&app->done, 1);
    uv_async_send(&app->async);
    return NULL;
}

static void print_probes(const drths_numsite_t *s)
{
    const drths_rtt_summary_t *r = &s->probe_summary;
    printf("probes: %llu sent, %llu answered (%.1f %% lost)\n",
           (unsigned long long)s->probes_sent, (unsigned long long)s->probes_answered,
           100.0 * (double)(s->probes_sent - s->probes_answered) / (double)s->probes_sent);
    printf("  round trip  min %.3f  p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f ms\n",
           (double)r->min_ns * 1e-6, (double)r->p50_ns * 1e-6, (double)r->p99_ns * 1e-6,
           (double)r->p999_ns * 1e-6, (double)r->max_ns * 1e-6);
    printf("              min %lld  p50 %lld  p99 %lld  p99.9 %lld  max %lld ticks\n",
           (long long)r->min_ticks, (long long)r->p50_ticks, (long long)r->p99_ticks,
           (long long)r->p999_ticks, (long long)r->max_ticks);
    const drths_lchoice_t *l = &s->lchoice;
    printf("loop delay L = %u ticks (%.3f ms)", l->L, (double)l->L * (double)s->dt_ns * 1e-6);
    if (l->fixed)
        printf(": fixed by link.loop_delay_ticks (the measurements ask for %u)%s\n", l->L_auto,
               l->L < l->L_auto ? " -- WARNING: below what the link needs" : "");
    else
        printf(": round trip q%g %u + wake margins %u + %u + safety %u\n", s->exp->link.quantile,
               l->rtt_ticks, l->wake_local_ticks, l->wake_peer_ticks, l->safety_ticks);
}

static void rt_summary_text(const drths_rt_report_t *rep, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < DRTHS_RT_NITEMS && n < cap; i++) {
        const drths_rt_item_t *it = &rep->item[i];
        n += (size_t)snprintf(out + n, cap - n, "%s%s: %s", i ? "; " : "", it->what,
                              drths_rt_status_name(it->status));
    }
}

static const char *rejects_text(const drths_numsite_t *s, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int r = 1; r < DRTHS_REJECT_COUNT && n < cap; r++)
        if (s->rx.rejects[r])
            n += (size_t)snprintf(out + n, cap - n, "%s%s %llu", n ? ", " : "",
                                  drths_reject_name((drths_reject_t)r),
                                  (unsigned long long)s->rx.rejects[r]);
    if (s->wrong_source && n < cap)
        n += (size_t)snprintf(out + n, cap - n, "%sfrom other addresses %llu", n ? ", " : "",
                              (unsigned long long)s->wrong_source);
    return n ? out : "none";
}

static int run_hybrid(const options_t *o)
{
    drths_error_t err = {{0}};
    drths_experiment_t exp;
    if (drths_experiment_load(&exp, o->experiment, &err) != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        return DRTHS_EXIT_CONFIG;
    }
    uint8_t psk[DRTHS_KEY_BYTES];
    const char *key_path = o->key ? o->key : exp.link.key_path;
    if (drths_crypto_init() != 0) {
        fprintf(stderr, "drths-numerical: libsodium failed to initialise\n");
        drths_experiment_close(&exp);
        return 1;
    }
    if (key_path) {
        if (drths_key_load(psk, key_path, &err) != 0) {
            fprintf(stderr, "drths-numerical: %s\n", err.msg);
            drths_experiment_close(&exp);
            return DRTHS_EXIT_CONFIG;
        }
    } else {
        drths_key_rehearsal(psk);
    }
    char key_id[17];
    drths_key_id(psk, key_id);

    app_t *app = calloc(1, sizeof *app);
    if (!app) {
        fprintf(stderr, "drths-numerical: out of memory\n");
        drths_experiment_close(&exp);
        return 1;
    }
    const char *peer = o->peer ? o->peer : exp.numerical.peer;
    int rc = drths_numsite_init(&app->site, &exp, peer, psk, &err);
    drths_crypto_wipe(psk, sizeof psk);
    if (rc == 0 && o->kernel_filter && (rc = drths_numsite_filter(&app->site, &err)) != 0)
        drths_numsite_close(&app->site);
    if (rc) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        drths_experiment_close(&exp);
        free(app);
        return rc == -EINVAL ? DRTHS_EXIT_CONFIG : 1;
    }
    char label[300], dir[4096];
    snprintf(label, sizeof label, "%s-numerical", exp.name);
    if (drths_runfolder_create(dir, sizeof dir, o->out, exp.output.directory, label,
                               o->experiment, &err) != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        drths_numsite_close(&app->site);
        drths_experiment_close(&exp);
        free(app);
        return 1;
    }
    printf("drths-numerical: hybrid run of '%s' at %.0f Hz\n", exp.name, exp.rate_hz);
    printf("peer: actuator site at %s\n", app->site.peer_text);
    if (o->kernel_filter)
        printf("kernel filter: only session %016" PRIx64 " from %s reaches the site\n",
               app->site.session_id, app->site.peer_text);
    app->site.wait_spin_ns = o->wait_spin_ns;
    if (o->wait_spin_ns == INT64_MAX)
        printf("wait: the real-time thread busy-polls for the feedback (--wait spin)\n");
    else if (o->wait_spin_ns > 0)
        printf("wait: busy-polls %.0f us for the feedback, then sleeps (--wait hybrid)\n",
               (double)o->wait_spin_ns * 1e-3);
    if (key_path)
        printf("key: %s (key id %s)\n", key_path, key_id);
    else
        fprintf(stderr, "drths-numerical: WARNING: no key file (link.key_file or --key): using "
                        "the public rehearsal key (key id %s); fine on one machine, not "
                        "across the Internet\n", key_id);
    printf("run folder: %s\n", dir);
    fflush(stdout);

    /* Main loop handles, then the RT thread (which reports its real-time set-up first). */
    uv_loop_init(&app->loop);
    app->sigint.data = app->sigterm.data = app->async.data = app;
    app->drain_timer.data = app->status_timer.data = app;
    uv_signal_init(&app->loop, &app->sigint);
    uv_signal_init(&app->loop, &app->sigterm);
    uv_async_init(&app->loop, &app->async, on_async);
    uv_timer_init(&app->loop, &app->drain_timer);
    uv_timer_init(&app->loop, &app->status_timer);
    app->handles_open = 1;
    uv_signal_start(&app->sigint, on_signal, SIGINT);
    uv_signal_start(&app->sigterm, on_signal, SIGTERM);
    if (o->monitor) {
        if (drths_telemetry_open(&app->tlm, o->monitor, o->monitor_token, "numerical",
                                 exp.rate_hz, DRTHS_TELEMETRY_DEFAULT_HZ, &err) != 0) {
            fprintf(stderr, "drths-numerical: %s\n", err.msg);
            close_handles(app);
            uv_run(&app->loop, UV_RUN_DEFAULT);
            uv_loop_close(&app->loop);
            drths_numsite_close(&app->site);
            drths_experiment_close(&exp);
            free(app);
            return DRTHS_EXIT_CONFIG;
        }
        app->tlm_on = 1;
        uv_timer_init(&app->loop, &app->tlm_timer);
        app->tlm_timer.data = app;
        uv_timer_start(&app->tlm_timer, on_tlm_timer, 0, 20);
        printf("monitor: telemetry to %s (%g frames/s)%s%s\n", o->monitor,
               DRTHS_TELEMETRY_DEFAULT_HZ, o->monitor_token ? ", control with a token" : "",
               o->wait_start ? "; waiting for Start" : "");
        fflush(stdout);
    }
    app->started = !o->wait_start;
    drths_rt_options_default(&app->rt_opts);
    app->rt_opts.require = o->require_rt;
    app->rt_opts.cpu = o->cpu;
    sem_init(&app->ready, 0, 0);
    sem_init(&app->go, 0, 0);
    pthread_t thread;
    int64_t t_start = drths_now_ns();
    int exit_code = 1, started = 0;
    char reason[700] = "";
    if ((rc = drths_rt_thread_create(&thread, rt_thread, app)) != 0) {
        fprintf(stderr, "drths-numerical: cannot start the real-time thread: %s\n",
                strerror(-rc));
        snprintf(reason, sizeof reason, "cannot start the real-time thread");
        goto finish_nothread;
    }
    while (sem_wait(&app->ready) != 0)
        ;
    for (int i = 0; i < DRTHS_RT_NITEMS; i++) {
        char line[300];
        drths_rt_report_line(&app->rt_rep, i, line, sizeof line);
        printf("%s\n", line);
    }
    if (app->rt_rc) {
        snprintf(reason, sizeof reason, "real time required (--require-rt) but not granted");
        fprintf(stderr, "drths-numerical: %s\n", reason);
        goto finish;
    }
    if (!app->started) {
        app->tlm_state = DRTHS_TELEM_READY;
        tlm_event(app, "waiting for Start");
        /* Until Start (or a stop), only the monitor and the signals are served. */
        while (!app->started)
            uv_run(&app->loop, UV_RUN_ONCE);
        app->tlm_state = DRTHS_TELEM_WAITING;
    }
    printf("connecting: HELLO to %s (session %016llx, up to %g s)\n", app->site.peer_text,
           (unsigned long long)app->site.session_id, o->connect_timeout_s);
    fflush(stdout);
    tlm_event(app, o->kernel_filter ? "connecting to the actuator site (kernel filter on)"
                                    : "connecting to the actuator site");
    rc = drths_numsite_handshake(&app->site, o->connect_timeout_s, idle, app, &err);
    if (rc == 0) {
        printf("connected: the actuator site runs the same experiment (fingerprint %.16s..)\n",
               app->site.fingerprint_hex);
        fflush(stdout);
        tlm_event(app, "connected: measuring the round trip");
        rc = drths_numsite_probe(&app->site, idle, app, &err);
    }
    if (rc) {
        snprintf(reason, sizeof reason, "%s",
                 rc != -ECANCELED ? err.msg
                 : atomic_load(&app->stop) == 2 ? "stopped from the monitor before the run"
                                                : "stopped by signal before the run");
        fprintf(stderr, "drths-numerical: %s\n", reason);
        goto finish;
    }
    print_probes(&app->site);

    drths_hybrid_params_t hp;
    drths_hybrid_params_default(&hp, &exp);
    hp.L = app->site.lchoice.L;
    hp.wait_ns = drths_hybrid_feedback_wait_ns(hp.L, hp.dt_ns, app->site.probe_summary.min_ns,
                                               app->site.rtt_q_ns, hp.reorder_ticks);
    hp.peer_timeout_ns = (int64_t)(o->peer_timeout_s * 1e9);
    hp.rtt_q_ns = app->site.rtt_q_ns;
    char path[4200];
    snprintf(path, sizeof path, "%s/numerical.csv", dir);
    if ((rc = drths_hybrid_init(&app->hyb, &exp, &hp, &err)) != 0 ||
        (rc = drths_recorder_open(&app->rec, path, (const char *const *)app->hyb.colnames,
                                  app->hyb.ncols, drths_recorder_rows_for(exp.rate_hz),
                                  &err)) != 0) {
        snprintf(reason, sizeof reason, "%s", err.msg);
        fprintf(stderr, "drths-numerical: %s\n", reason);
        exit_code = rc == -ENOTSUP || rc == -EINVAL ? DRTHS_EXIT_CONFIG : 1;
        goto finish;
    }
    printf("smith predictor: %s (nominal %s model, dead time L = %u ticks)\n",
           drths_smith_mode_name(exp.numerical.smith),
           drths_damper_model_name(exp.specimen.damper.model), hp.L);
    printf("running: %ld steps (%.2f s), control %s, R = %d, feedback wait %.3f ms, L %s\n",
           app->hyb.ns.steps, (double)(app->hyb.ns.steps - 1) * app->hyb.ns.dt_s,
           drths_control_mode_name(exp.control.mode), hp.r, (double)app->hyb.p.wait_ns * 1e-6,
           hp.adapt_L ? "on the fly (epochs)" : "fixed");
    fflush(stdout);
    if (app->tlm_on) {
        for (int k = 0; k < 9; k++)
            app->col[k] = -1;
        static const char *const want[9] = {"step", "time_s", "damper_disp_m",
                                            "damper_command", "force_measured_N",
                                            "force_used_N", "rtt_ms", "loop_delay_ticks",
                                            "fb_concealed"};
        for (int c = 0; c < app->hyb.ncols; c++)
            for (int k = 0; k < 9; k++)
                if (strcmp(app->hyb.colnames[c], want[k]) == 0)
                    app->col[k] = c;
        drths_recorder_set_tap(&app->rec, tlm_tap, app);
        char text[120];
        snprintf(text, sizeof text, "running: %ld steps, L = %u ticks", app->hyb.ns.steps, hp.L);
        tlm_event(app, text);
        app->tlm_state = DRTHS_TELEM_RUN;
    }
    uv_timer_start(&app->drain_timer, on_drain_timer, 50, 50);
    if (!o->quiet && isatty(2))
        uv_timer_start(&app->status_timer, on_status_timer, 1000, 1000);
    started = 1;
    app->go_run = 1;

finish:
    sem_post(&app->go);
    if (started)
        uv_run(&app->loop, UV_RUN_DEFAULT);
    pthread_join(thread, NULL);
finish_nothread:
    close_handles(app);
    uv_run(&app->loop, UV_RUN_DEFAULT);
    uv_loop_close(&app->loop);
    if (app->status_line)
        fprintf(stderr, "\r%70s\r", "");
    uint64_t dropped = 0;
    if (started) {
        dropped = drths_recorder_dropped(&app->rec);
        if (drths_recorder_close(&app->rec, &err) != 0)
            fprintf(stderr, "drths-numerical: %s\n", err.msg);
        const drths_hybrid_t *h = &app->hyb;
        switch (h->end) {
        case DRTHS_HYBRID_END_OF_RECORD:
            exit_code = 0;
            snprintf(reason, sizeof reason, "end of record");
            break;
        case DRTHS_HYBRID_PEER_ABORT:
            snprintf(reason, sizeof reason, "actuator site aborted: %s: %s",
                     drths_stop_reason_name(h->end_reason), h->end_text);
            break;
        case DRTHS_HYBRID_PEER_LOST:
            snprintf(reason, sizeof reason,
                     "peer lost: no valid datagram from the actuator site for %g s",
                     o->peer_timeout_s);
            break;
        case DRTHS_HYBRID_NO_START:
            snprintf(reason, sizeof reason,
                     "peer lost: no FEEDBACK from the actuator site within %g s of EPOCH 1",
                     (double)hp.start_timeout_ns * 1e-9);
            break;
        case DRTHS_HYBRID_SIGNAL:
        case DRTHS_HYBRID_RUNNING:
            snprintf(reason, sizeof reason, "%s",
                     atomic_load(&app->stop) == 2 ? "stopped from the monitor"
                                                  : "stopped by signal");
            break;
        }
        if (exit_code != 0)
            fprintf(stderr, "drths-numerical: %s\n", reason);
    }
    char rt_text[400];
    rt_summary_text(&app->rt_rep, rt_text, sizeof rt_text);
    drths_numsite_outcome_t out = {reason, exit_code, (double)(drths_now_ns() - t_start) * 1e-9,
                                   dropped, rt_text};
    if (drths_numsite_write_summary(&app->site, started ? &app->hyb : NULL, dir, &out, &err))
        fprintf(stderr, "drths-numerical: %s\n", err.msg);

    printf("run finished: %s (exit %d)\n", reason, exit_code);
    if (app->tlm_on) {
        char text[800];
        snprintf(text, sizeof text, "run finished: %s (exit %d)", reason, exit_code);
        tlm_event(app, text);
        app->tlm_state = DRTHS_TELEM_DONE;
        tlm_counters(app);
        drths_telemetry_send(&app->tlm);
        drths_telemetry_close(&app->tlm);
    }
    if (started) {
        const drths_hybrid_t *h = &app->hyb;
        drths_rtt_summary_t rs;
        drths_rtt_summary_from_hist(&h->rtt.run, app->site.dt_ns, &rs);
        printf("  steps %llu of %ld, concealed feedback %llu (max %llu in a row), late "
               "feedback %llu\n",
               (unsigned long long)h->c.rows, h->ns.steps, (unsigned long long)h->c.concealed,
               (unsigned long long)h->c.max_consecutive_concealed,
               (unsigned long long)h->c.fb_late);
        if (rs.count)
            printf("  round trip p50 %.3f ms, p99 %.3f ms, max %.3f ms (%llu echoes)\n",
                   (double)rs.p50_ns * 1e-6, (double)rs.p99_ns * 1e-6,
                   (double)rs.max_ns * 1e-6, (unsigned long long)rs.count);
        else
            printf("  round trip: no echo measured\n");
        if (h->c.epoch_changes)
            printf("  epochs: %llu changes, L from %u to %u ticks, %llu transition steps, "
                   "final L %u\n",
                   (unsigned long long)h->c.epoch_changes, h->c.L_min_seen, h->c.L_max_seen,
                   (unsigned long long)h->c.transition, h->L);
        if (h->adaptive)
            printf("  adaptive Smith: force gain %.4f, %llu updates (%llu low signal, %llu in "
                   "the dead zone)\n",
                   drths_smith_gain(&h->smith), (unsigned long long)h->smith.st.updates,
                   (unsigned long long)h->smith.st.low_signal,
                   (unsigned long long)h->smith.st.dead_zone);
        if (dropped)
            printf("  WARNING: %llu rows dropped by the recorder\n",
                   (unsigned long long)dropped);
    }
    char rej[600];
    printf("  rejected datagrams: %s\n", rejects_text(&app->site, rej, sizeof rej));
    printf("  run folder: %s\n", dir);
    drths_hybrid_close(&app->hyb);
    drths_rt_report_close(&app->rt_rep);
    drths_numsite_close(&app->site);
    sem_destroy(&app->ready);
    sem_destroy(&app->go);
    free(app);
    drths_experiment_close(&exp);
    return exit_code;
}

int main(int argc, char **argv)
{
    options_t o = {.connect_timeout_s = 10.0, .peer_timeout_s = 1.0, .cpu = -1};
    static const struct option opts[] = {
        {"experiment", required_argument, NULL, 'e'},
        {"reference", no_argument, NULL, 'r'},
        {"out", required_argument, NULL, 'o'},
        {"peer", required_argument, NULL, 'p'},
        {"key", required_argument, NULL, 'k'},
        {"connect-timeout", required_argument, NULL, 'c'},
        {"peer-timeout", required_argument, NULL, 't'},
        {"require-rt", no_argument, NULL, 'R'},
        {"cpu", required_argument, NULL, 'C'},
        {"wait", required_argument, NULL, 'W'},
        {"kernel-filter", no_argument, NULL, 'K'},
        {"quiet", no_argument, NULL, 'q'},
        {"monitor", required_argument, NULL, 'M'},
        {"monitor-token", required_argument, NULL, 'T'},
        {"wait-start", no_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'e':
            o.experiment = optarg;
            break;
        case 'r':
            o.reference = 1;
            break;
        case 'o':
            o.out = optarg;
            break;
        case 'p':
            o.peer = optarg;
            break;
        case 'k':
            o.key = optarg;
            break;
        case 'c':
        case 't': {
            double v = strtod(optarg, &end);
            if (*end || !(v > 0) || !isfinite(v)) {
                fprintf(stderr, "drths-numerical: --%s: '%s' is not a positive number of "
                                "seconds\n", c == 'c' ? "connect-timeout" : "peer-timeout",
                        optarg);
                return DRTHS_EXIT_CONFIG;
            }
            *(c == 'c' ? &o.connect_timeout_s : &o.peer_timeout_s) = v;
            break;
        }
        case 'R':
            o.require_rt = 1;
            break;
        case 'C': {
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v > 4095) {
                fprintf(stderr, "drths-numerical: --cpu: '%s' is not a CPU number 0..4095\n",
                        optarg);
                return DRTHS_EXIT_CONFIG;
            }
            o.cpu = (int)v;
            break;
        }
        case 'W':
            if (strcmp(optarg, "block") == 0) {
                o.wait_spin_ns = 0;
            } else if (strcmp(optarg, "spin") == 0) {
                o.wait_spin_ns = INT64_MAX;
            } else {
                long us = strncmp(optarg, "hybrid:", 7) == 0 ? strtol(optarg + 7, &end, 10) : -1;
                if (us <= 0 || us > 1000000 || *end) {
                    fprintf(stderr, "drths-numerical: --wait: '%s' is not block, spin or "
                                    "hybrid:US (US = 1..1000000 microseconds)\n", optarg);
                    return DRTHS_EXIT_CONFIG;
                }
                o.wait_spin_ns = (int64_t)us * 1000;
            }
            break;
        case 'K':
            o.kernel_filter = 1;
            break;
        case 'q':
            o.quiet = 1;
            break;
        case 'M':
            o.monitor = optarg;
            break;
        case 'T':
            o.monitor_token = optarg;
            break;
        case 'S':
            o.wait_start = 1;
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
    if (!o.experiment) {
        fprintf(stderr, "drths-numerical: --experiment FILE is required (see --help)\n");
        return DRTHS_EXIT_CONFIG;
    }
    if ((o.wait_start || o.monitor_token) && !o.monitor) {
        fprintf(stderr, "drths-numerical: --wait-start and --monitor-token need --monitor\n");
        return DRTHS_EXIT_CONFIG;
    }
    if (o.reference && o.kernel_filter) {
        fprintf(stderr, "drths-numerical: --kernel-filter is for a hybrid run; --reference "
                        "has no network\n");
        return DRTHS_EXIT_CONFIG;
    }
    if (o.reference)
        return run_reference(o.experiment, o.out, o.quiet);
    return run_hybrid(&o);
}
