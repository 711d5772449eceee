#include "common/site/shell.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "common/config/setup.h"
#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "common/platform/runfolder.h"
#include "protocol/fingerprint.h"
#include "protocol/keyfile.h"
#include "protocol/wire.h"

/* ---- command line ----------------------------------------------------------------------- */

static const struct option common_options[] = {
    {"experiment", required_argument, NULL, DRTHS_SITE_OPT_EXPERIMENT},
    {"key", required_argument, NULL, DRTHS_SITE_OPT_KEY},
    {"out", required_argument, NULL, DRTHS_SITE_OPT_OUT},
    {"require-rt", no_argument, NULL, DRTHS_SITE_OPT_REQUIRE_RT},
    {"cpu", required_argument, NULL, DRTHS_SITE_OPT_CPU},
    {"kernel-filter", no_argument, NULL, DRTHS_SITE_OPT_KERNEL_FILTER},
    {"quiet", no_argument, NULL, DRTHS_SITE_OPT_QUIET},
    {"monitor", required_argument, NULL, DRTHS_SITE_OPT_MONITOR},
    {"monitor-token", required_argument, NULL, DRTHS_SITE_OPT_MONITOR_TOKEN},
    {"wait-start", no_argument, NULL, DRTHS_SITE_OPT_WAIT_START},
    DRTHS_CLI_OPTIONS_COMMON,
};
#define NCOMMON (int)(sizeof common_options / sizeof common_options[0])

void drths_site_options_default(drths_site_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->cpu = -1;
}

/* One common option: 1 when it was one (and good), 0 when it is not a common option, -1 when
 * its value is wrong (printed). */
static int common_option(const char *prog, drths_site_options_t *o, int c, const char *arg)
{
    long v;
    switch (c) {
    case DRTHS_SITE_OPT_EXPERIMENT: o->experiment = arg; return 1;
    case DRTHS_SITE_OPT_KEY: o->key = arg; return 1;
    case DRTHS_SITE_OPT_OUT: o->out = arg; return 1;
    case DRTHS_SITE_OPT_REQUIRE_RT: o->require_rt = 1; return 1;
    case DRTHS_SITE_OPT_CPU:
        if (drths_cli_long(prog, "--cpu", arg, 0, 4095, &v) != 0)
            return -1;
        o->cpu = (int)v;
        return 1;
    case DRTHS_SITE_OPT_KERNEL_FILTER: o->kernel_filter = 1; return 1;
    case DRTHS_SITE_OPT_QUIET: o->quiet = 1; return 1;
    case DRTHS_SITE_OPT_MONITOR: o->monitor = arg; return 1;
    case DRTHS_SITE_OPT_MONITOR_TOKEN: o->monitor_token = arg; return 1;
    case DRTHS_SITE_OPT_WAIT_START: o->wait_start = 1; return 1;
    default: return 0;
    }
}

int drths_site_parse(const drths_site_cli_t *cli, int argc, char **argv, drths_site_options_t *o)
{
    struct option all[NCOMMON + DRTHS_SITE_MAX_OWN_OPTIONS + 1];
    int n = 0;
    for (int i = 0; i < NCOMMON; i++)
        all[n++] = common_options[i];
    for (const struct option *p = cli->options; p && p->name; p++) {
        if (n == NCOMMON + DRTHS_SITE_MAX_OWN_OPTIONS)
            return drths_cli_error(cli->prog, "too many options (DRTHS_SITE_MAX_OWN_OPTIONS)");
        all[n++] = *p;
    }
    memset(&all[n], 0, sizeof all[n]);

    drths_site_options_default(o);
    optind = 0; /* GNU getopt: start over, re-reading the environment */
    int c;
    while ((c = getopt_long(argc, argv, "h", all, NULL)) != -1) {
        if (c == 'h') {
            cli->usage(stdout);
            drths_cli_print_exit_codes(stdout, cli->failed);
            return DRTHS_EXIT_OK;
        }
        if (c == DRTHS_CLI_OPT_VERSION) {
            drths_cli_print_version(cli->prog);
            return DRTHS_EXIT_OK;
        }
        if (c == '?' || c == ':')
            return drths_cli_bad_option(cli->prog);
        int rc = common_option(cli->prog, o, c, optarg);
        if (rc == 0)
            rc = cli->option && cli->option(cli->ctx, c, optarg) == 0 ? 1 : -1;
        if (rc < 0)
            return DRTHS_EXIT_USAGE;
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(cli->prog, argv[optind]);
    o->argc = argc;
    o->argv = argv;
    if (!o->experiment)
        return drths_cli_usage_error(cli->prog, "--experiment FILE is required (see --help)");
    if (o->monitor_token)
        return drths_cli_usage_error(cli->prog,
                                     "--monitor-token is no longer used: control datagrams are "
                                     "authenticated with a key derived from the link key (--key), "
                                     "which drths-monitor is given too (its --key)");
    if (o->wait_start && !o->monitor)
        return drths_cli_usage_error(cli->prog, "--wait-start needs --monitor");
    return DRTHS_SITE_CONTINUE;
}

void drths_site_rt_options(const drths_site_options_t *o, drths_rt_options_t *rt)
{
    drths_rt_options_default(rt);
    rt->require = o->require_rt;
    rt->cpu = o->cpu;
}

/* ---- start-up steps --------------------------------------------------------------------- */

void drths_site_print_notes(const char *prog, const drths_experiment_t *exp)
{
    for (const char *l = exp->notes; l && *l;) {
        const char *nl = strchr(l, '\n');
        int len = nl ? (int)(nl - l) : (int)strlen(l);
        drths_cli_warning(prog, "%.*s", len, l);
        l += len + (nl ? 1 : 0);
    }
}

int drths_site_load_experiment(const char *prog, drths_experiment_t *exp, const char *path)
{
    /* libsodium first: the experiment's fingerprint and the key need it. */
    if (drths_crypto_init() != 0)
        return drths_cli_error(prog, "cannot initialise libsodium");
    drths_error_t err = {{0}};
    if (drths_experiment_load(exp, path, &err) != 0)
        return drths_cli_usage_error(prog, "%s", err.msg);
    drths_site_print_notes(prog, exp);
    return 0;
}

int drths_site_key_load(drths_site_key_t *k, const char *option_path, const char *file_path,
                        drths_error_t *err)
{
    memset(k, 0, sizeof *k);
    k->path = option_path ? option_path : file_path;
    if (k->path) {
        int rc = drths_key_load(k->psk, k->path, err);
        if (rc != 0) {
            drths_site_key_wipe(k);
            return rc;
        }
    } else {
        drths_key_rehearsal(k->psk);
    }
    drths_key_id(k->psk, k->id);
    return 0;
}

void drths_site_key_warning(const char *prog, const drths_site_key_t *k)
{
    if (k->path)
        return;
    drths_cli_warning(prog,
                      "no key file (link.key_file or --key): using the public rehearsal key (key "
                      "id %s), which protects nothing; use it only to rehearse on one machine",
                      k->id);
}

int drths_site_key_allowed(const drths_site_key_t *k, const drths_site_link_t *l,
                           drths_error_t *err)
{
    static const char todo[] =
        "make a key with drths-keygen (drths-keygen lab.key), copy the same file to the other "
        "laboratory and give it to both sites with --key lab.key or link.key_file";
    if (k->path)
        return 0;
    if (l->real_daq)
        return drths_error_set(err, -EPERM,
                               "no key file, and the public rehearsal key is refused with a real "
                               "DAQ (daq.backend %s): anyone who knows it could drive the "
                               "actuator; %s",
                               l->daq_name, todo);
    if (drths_addr_is_loopback(l->addr))
        return 0;
    char text[80];
    drths_addr_format(l->addr, text, sizeof text);
    return drths_error_set(err, -EPERM,
                           "no key file, and the public rehearsal key is refused for a link %s "
                           "%s (%s), which is not a loopback address: anyone who can reach it "
                           "could %s; %s (to rehearse on one machine, use 127.0.0.1)",
                           l->listens ? "listening on" : "to", text, l->what,
                           l->listens ? "drive the actuator" : "answer as the actuator site",
                           todo);
}

void drths_site_key_wipe(drths_site_key_t *k)
{
    drths_crypto_wipe(k->psk, sizeof k->psk);
}

int drths_site_run_folder(char *dir, size_t cap, const drths_site_options_t *o,
                          const drths_experiment_t *exp, const char *role,
                          drths_provenance_t *prov, drths_error_t *err)
{
    char label[300];
    snprintf(label, sizeof label, "%s-%s", exp->name, role);
    drths_provenance_init(prov, o->argc, o->argv);
    snprintf(prov->experiment_file, sizeof prov->experiment_file, "%s", o->experiment);
    uint8_t fp[DRTHS_FINGERPRINT_BYTES];
    if (drths_experiment_fingerprint(exp, fp, err) == 0)
        drths_experiment_fingerprint_hex(fp, prov->fingerprint);
    int rc = drths_runfolder_create(dir, cap, o->out, exp->output.directory, label,
                                    o->experiment, err);
    if (rc == 0 && exp->ground_motion.record_path) {
        rc = drths_runfolder_copy_record(dir, exp->ground_motion.record_path,
                                         exp->ground_motion.file, prov->record_file,
                                         sizeof prov->record_file, err);
        snprintf(prov->record_source, sizeof prov->record_source, "%s",
                 exp->ground_motion.record_path);
    }
    return rc;
}

void drths_site_mark_incomplete(const char *prog, uint64_t dropped, char *reason, size_t cap,
                                int *exit_code)
{
    if (dropped == 0)
        return;
    char text[160];
    snprintf(text, sizeof text,
             "record incomplete: %llu rows lost (the recorder's ring overflowed)",
             (unsigned long long)dropped);
    fprintf(stderr, "%s: %s\n", prog, text);
    size_t n = strlen(reason);
    if (*exit_code == 0 || n == 0)
        snprintf(reason, cap, "%s", text);
    else if (n < cap)
        snprintf(reason + n, cap - n, "; %s", text);
    *exit_code = DRTHS_EXIT_FAILED;
}

void drths_site_mark_unwritten(const char *prog, const drths_recorder_t *r, char *reason,
                               size_t cap, int *exit_code)
{
    if (!r->failed)
        return;
    int e = atomic_load((atomic_int *)&r->fail_errno);
    char text[300];
    snprintf(text, sizeof text,
             "record incomplete: %llu rows of %s not written (%s; it stops at row %llu)",
             (unsigned long long)drths_recorder_unwritten(r), r->bin_name, strerror(e ? e : EIO),
             (unsigned long long)r->written);
    fprintf(stderr, "%s: %s\n", prog, text);
    drths_site_append_reason(reason, cap, *exit_code, text);
    *exit_code = DRTHS_EXIT_FAILED;
}

int drths_site_records_close(const char *prog, drths_recorder_t *r, uint64_t *ring_dropped,
                             uint64_t *lost, drths_error_t *err)
{
    const uint64_t dropped = drths_recorder_dropped(r);
    const int closed = drths_recorder_close(r, err);
    if (closed != 0)
        fprintf(stderr, "%s: %s\n", prog, err->msg);
    if (ring_dropped)
        *ring_dropped = dropped;
    /* Rows lost either way: dropped by the ring, or refused by the disk. */
    if (lost)
        *lost = dropped + drths_recorder_unwritten(r);
    return closed;
}

void drths_site_records_mark(const char *prog, const drths_recorder_t *r, uint64_t ring_dropped,
                             int closed, const drths_error_t *close_err, char *reason, size_t cap,
                             int *exit_code)
{
    drths_site_mark_incomplete(prog, ring_dropped, reason, cap, exit_code);
    drths_site_mark_unwritten(prog, r, reason, cap, exit_code);
    /* The CSV could not be written from the .bin: the run's reason says so. */
    if (closed != 0 && !r->failed)
        drths_site_append_reason(reason, cap, *exit_code, close_err->msg);
    if (closed != 0)
        *exit_code = DRTHS_EXIT_FAILED;
}

void drths_site_append_reason(char *reason, size_t cap, int exit_code, const char *text)
{
    if (cap == 0)
        return;
    size_t n = strlen(reason);
    if (exit_code == 0 || n == 0)
        n = 0;
    else if (n + 2 < cap) {
        memcpy(reason + n, "; ", 2);
        n += 2;
    }
    size_t t = strlen(text);
    if (n + t >= cap)
        t = cap - 1 - n;
    memcpy(reason + n, text, t);
    reason[n + t] = '\0';
}

uint64_t drths_site_rows_lost(drths_recorder_t *r)
{
    return drths_recorder_dropped(r) + drths_recorder_unwritten(r);
}

void drths_site_provenance_rt(const drths_site_t *s, const drths_rt_report_t *rep,
                              drths_provenance_t *prov)
{
    size_t cap = sizeof prov->real_time, n = 0;
    if (rep)
        drths_site_rt_summary(rep, prov->real_time, cap);
    else
        snprintf(prov->real_time, cap, "no real-time thread");
    n = strlen(prov->real_time);
    for (int i = 0; i < s->nrec && n < cap; i++) {
        const drths_rt_item_t *it = &s->rec[i]->writer_rt;
        n += (size_t)snprintf(prov->real_time + n, cap - n, "; %s writer %s: %s",
                              s->rec[i]->bin_name, it->what, drths_rt_status_name(it->status));
    }
}

/* ---- loop ------------------------------------------------------------------------------- */

static void close_handles(drths_site_t *s)
{
    if (!s->handles_open)
        return;
    s->handles_open = 0;
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->async, NULL);
    uv_close((uv_handle_t *)&s->drain_timer, NULL);
    uv_close((uv_handle_t *)&s->status_timer, NULL);
    uv_close((uv_handle_t *)&s->tlm_timer, NULL);
}

/* Rows lost by a recorder (its ring overflowed) are said at once, on stderr and to the
 * monitor, then at most once a second while the count grows: the record is incomplete and the
 * run will exit 1 (the program decides that at the end). */
static void warn_lost_rows(drths_site_t *s, int i)
{
    uint64_t lost = drths_recorder_dropped(s->rec[i]);
    if (lost == s->rec_warned[i])
        return;
    int64_t now = drths_now_ns();
    if (s->rec_warned[i] != 0 && now - s->rec_warn_ns[i] < 1000000000)
        return;
    s->rec_warned[i] = lost;
    s->rec_warn_ns[i] = now;
    char text[300];
    snprintf(text, sizeof text, "WARNING: %llu rows of %s lost so far: the recorder's ring "
             "overflowed (the disk or its writer thread stalled); the record is incomplete",
             (unsigned long long)lost, s->rec[i]->csv_name);
    drths_site_clear_status(s);
    fprintf(stderr, "%s: %s\n", s->prog, text);
    fflush(stderr);
    drths_site_event(s, text);
}

/* A write the disk refused is said once, on stderr and to the monitor, and handed to the
 * program, which ends the run and tells its peer: a run whose record is lost is not worth the
 * specimen's wear, and the peer must not record a run its partner cannot. */
static void check_write_failed(drths_site_t *s, int i)
{
    uint64_t row = 0, lost = 0;
    int e = drths_recorder_failed(s->rec[i], &row, &lost);
    if (!e || s->rec_failed_said[i])
        return;
    s->rec_failed_said[i] = 1;
    char what[400], text[480], peer[DRTHS_WIRE_MAX_TEXT + 1];
    drths_recorder_failure_text(what, sizeof what, s->rec[i]->bin_name, e, row, lost,
                                "lost so far");
    snprintf(text, sizeof text, "ERROR: %s; ending the run (the record is incomplete)", what);
    drths_site_clear_status(s);
    fprintf(stderr, "%s: %s\n", s->prog, text);
    fflush(stderr);
    drths_site_event(s, text);
    snprintf(peer, sizeof peer,
             "writing %s failed at row %llu (%s): records incomplete, %llu rows lost so far",
             s->rec[i]->bin_name, (unsigned long long)row, strerror(e), (unsigned long long)lost);
    if (s->hooks.records_failed)
        s->hooks.records_failed(s->hooks.ctx, peer);
}

static void drain(drths_site_t *s)
{
    for (int i = 0; i < s->nrec; i++) {
        drths_recorder_drain(s->rec[i]);
        warn_lost_rows(s, i);
        check_write_failed(s, i);
    }
}

/* The program's events, the recorders, and the end of the loop once the thread is done. */
static void service(drths_site_t *s)
{
    if (s->hooks.service)
        s->hooks.service(s->hooks.ctx);
    drain(s);
    if (atomic_load(&s->done))
        close_handles(s);
}

static void on_async(uv_async_t *h)
{
    service(h->data);
}

static void on_drain_timer(uv_timer_t *t)
{
    service(t->data);
}

void drths_site_clear_status(drths_site_t *s)
{
    if (!s->status_shown)
        return;
    fprintf(stderr, "\r%*s\r", s->status_len, "");
    fflush(stderr);
    s->status_shown = 0;
}

static void on_status_timer(uv_timer_t *t)
{
    drths_site_t *s = t->data;
    char text[300];
    if (!s->hooks.status || !s->hooks.status(s->hooks.ctx, text, sizeof text))
        return;
    int n = fprintf(stderr, "\r%s", text);
    fflush(stderr);
    s->status_shown = 1;
    if (n > s->status_len)
        s->status_len = n;
}

/* One stop request, from a signal or the monitor: recorded in s->stop, then handed to the
 * program. A site waiting for Start leaves at once. */
static void request_stop(drths_site_t *s, drths_site_stop_t by, int signum, const char *command)
{
    s->started = 1;
    int prev = 0;
    if (by == DRTHS_SITE_STOP_SIGNAL)
        prev = atomic_exchange(&s->stop, DRTHS_SITE_STOP_SIGNAL);
    else
        atomic_compare_exchange_strong(&s->stop, &prev, DRTHS_SITE_STOP_MONITOR);
    drths_site_stop_request_t req = {by, signum, command, prev == DRTHS_SITE_STOP_NONE};
    if (req.first)
        drths_site_clear_status(s);
    if (s->hooks.stop)
        s->hooks.stop(s->hooks.ctx, &req);
}

static void on_signal(uv_signal_t *h, int signum)
{
    request_stop(h->data, DRTHS_SITE_STOP_SIGNAL, signum, NULL);
}

int drths_site_init(drths_site_t *s, const char *prog, const drths_site_options_t *o,
                    const drths_site_hooks_t *hooks, drths_error_t *err)
{
    s->prog = prog;
    s->opt = o;
    s->hooks = *hooks;
    s->started = !o->wait_start;
    int rc = uv_loop_init(&s->loop);
    if (rc != 0)
        return drths_error_set(err, rc, "cannot create the event loop: %s", uv_strerror(rc));
    s->loop_open = 1;
    uv_signal_init(&s->loop, &s->sigint);
    uv_signal_init(&s->loop, &s->sigterm);
    uv_async_init(&s->loop, &s->async, on_async);
    uv_timer_init(&s->loop, &s->drain_timer);
    uv_timer_init(&s->loop, &s->status_timer);
    uv_timer_init(&s->loop, &s->tlm_timer);
    s->sigint.data = s->sigterm.data = s->async.data = s;
    s->drain_timer.data = s->status_timer.data = s->tlm_timer.data = s;
    s->handles_open = 1;
    /* A file size limit (ulimit -f) must fail the write (EFBIG, then the run ends as for a full
     * disk), not kill the site in the middle of a run with the actuator driven. */
    signal(SIGXFSZ, SIG_IGN);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    return 0;
}

void drths_site_wake(void *s)
{
    uv_async_send(&((drths_site_t *)s)->async);
}

int drths_site_poll(void *vs)
{
    drths_site_t *s = vs;
    uv_run(&s->loop, UV_RUN_NOWAIT);
    return atomic_load(&s->stop);
}

void drths_site_timers_start(drths_site_t *s)
{
    uv_timer_start(&s->drain_timer, on_drain_timer, 50, 50);
    if (!s->opt->quiet && isatty(2))
        uv_timer_start(&s->status_timer, on_status_timer, 1000, 1000);
}

/* ---- live monitor ----------------------------------------------------------------------- */

static void frame_counters(drths_site_t *s)
{
    drths_telemetry_frame_t *f = &s->tlm.f;
    if (s->hooks.counters)
        s->hooks.counters(s->hooks.ctx, f);
    if (s->opt->wait_start && !s->started)
        f->state = DRTHS_TELEM_READY;
}

/* Every decimation-th row of a tapped recorder becomes a frame (loop thread, from the drain). */
static void on_row(void *ctx, const double *row)
{
    drths_site_t *s = ctx;
    if (!drths_telemetry_row_due(&s->tlm))
        return;
    s->hooks.tap(s->hooks.ctx, row, &s->tlm.f);
    frame_counters(s);
    drths_telemetry_send(&s->tlm);
}

static void act_on_control(drths_site_t *s, drths_telemetry_cmd_t cmd)
{
    if (cmd == DRTHS_TELEM_CMD_START) {
        if (!s->started) {
            s->started = 1;
            drths_site_event(s, "start from the monitor");
        }
        return;
    }
    /* Stop and Abort take the signal's path (the program says what that means for it). */
    if (cmd == DRTHS_TELEM_CMD_STOP || cmd == DRTHS_TELEM_CMD_ABORT)
        request_stop(s, DRTHS_SITE_STOP_MONITOR, 0,
                     cmd == DRTHS_TELEM_CMD_STOP ? "stop" : "abort");
}

/* 50 Hz: control datagrams, answered at once by a frame (its ACK tells the monitor the command
 * arrived); a frame 5 times a second when no record row gives one (waiting, ready, done), so
 * the monitor sees the site alive. */
static void on_tlm_timer(uv_timer_t *t)
{
    drths_site_t *s = t->data;
    drths_telemetry_cmd_t cmd;
    int answered = drths_telemetry_poll(&s->tlm, &cmd);
    act_on_control(s, cmd);
    if (answered > 0 || drths_telemetry_beat_due(&s->tlm)) {
        frame_counters(s);
        drths_telemetry_send(&s->tlm);
    }
}

void drths_site_monitor_key(drths_site_t *s, const drths_site_key_t *k)
{
    drths_telemetry_key_derive(s->mkey, k->psk, sizeof k->psk);
    s->mkey_set = 1;
    s->mkey_rehearsal = k->path == NULL;
}

int drths_site_monitor_open(drths_site_t *s, const char *role, double rate_hz, drths_error_t *err)
{
    if (!s->opt->monitor)
        return 0;
    if (!s->mkey_set)
        return drths_error_set(err, -EINVAL, "--monitor: no key to authenticate the telemetry");
    int rc = drths_telemetry_open(&s->tlm, s->opt->monitor, s->mkey, role, rate_hz,
                                  DRTHS_TELEMETRY_DEFAULT_HZ, err);
    sodium_memzero(s->mkey, sizeof s->mkey);
    if (rc != 0)
        return rc;
    s->tlm_on = 1;
    uv_timer_start(&s->tlm_timer, on_tlm_timer, 0, 20);
    return 0;
}

void drths_site_print_monitor(const drths_site_t *s, const char *indent)
{
    if (!s->tlm_on)
        return;
    printf("%smonitor: telemetry to %s (%g frames/s), authenticated with the %s%s\n", indent,
           s->opt->monitor, DRTHS_TELEMETRY_DEFAULT_HZ,
           s->mkey_rehearsal ? "rehearsal key" : "link key",
           s->opt->wait_start ? "; waiting for Start" : "");
    fflush(stdout);
}

void drths_site_event(drths_site_t *s, const char *text)
{
    if (s->tlm_on)
        drths_telemetry_frame_event(&s->tlm.f, text);
}

void drths_site_monitor_end(drths_site_t *s, const char *text)
{
    if (!s->tlm_on)
        return;
    drths_site_event(s, text);
    frame_counters(s);
    s->tlm.f.state = DRTHS_TELEM_DONE;
    drths_telemetry_send(&s->tlm);
}

void drths_site_wait_start(drths_site_t *s)
{
    /* Until Start (or a stop), only the monitor and the signals are served. */
    while (!s->started && s->handles_open)
        uv_run(&s->loop, UV_RUN_ONCE);
}

/* ---- recorders -------------------------------------------------------------------------- */

int drths_site_recorder_open(drths_site_t *s, drths_recorder_t *rec, const char *dir,
                             const char *file, const char *const *columns, int ncols,
                             double rate_hz, int tap, drths_error_t *err)
{
    if (s->nrec == DRTHS_SITE_MAX_RECORDERS)
        return drths_error_set(err, -ENOSPC, "more than %d recorders",
                               DRTHS_SITE_MAX_RECORDERS);
    char path[4200];
    if (drths_path_join(path, sizeof path, dir, file) != 0)
        return drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
    s->rec_rate_hz[s->nrec] = rate_hz;
    int rc = drths_recorder_open(rec, path, columns, ncols, drths_recorder_rows_for(rate_hz), err);
    if (rc != 0)
        return rc;
    for (int i = 0; i < s->nspace && s->reserve_on; i++) {
        if (strcmp(s->space[i].file, file) != 0)
            continue;
        /* The .bin's share moves from the reserve file to the .bin itself. */
        drths_reserve_take(&s->reserve, drths_recorder_bin_bytes(ncols, s->space[i].rows));
        rc = drths_recorder_preallocate(rec, s->space[i].rows, err);
        if (rc == -EOPNOTSUPP)
            rc = 0;
        if (rc != 0) {
            drths_recorder_close(rec, NULL);
            return rc;
        }
    }
    if (tap && s->tlm_on && s->hooks.tap && (rc = drths_recorder_set_tap(rec, on_row, s)) != 0) {
        drths_recorder_close(rec, NULL);
        return drths_error_set(err, rc, "out of memory for the telemetry tap");
    }
    if ((rc = drths_recorder_start(rec, DRTHS_RECORDER_WRITER_PRIORITY, err)) != 0) {
        drths_recorder_close(rec, NULL);
        return rc;
    }
    s->rec[s->nrec++] = rec;
    return 0;
}

int drths_site_record_steps(const drths_experiment_t *exp, uint64_t *steps, drths_error_t *err)
{
    drths_record_t rec;
    memset(&rec, 0, sizeof rec);
    int rc = drths_setup_ground_motion(exp, &rec, err);
    *steps = rc == 0 ? (uint64_t)rec.n : 0;
    drths_record_close(&rec);
    return rc;
}

uint64_t drths_site_rows_for(uint64_t steps, double rate_hz)
{
    return steps + (uint64_t)(10.0 * rate_hz);
}

int drths_site_reserve_run(drths_site_t *s, const char *dir, const drths_experiment_t *exp,
                           const char *file, int ncols, drths_error_t *err)
{
    uint64_t steps = 0;
    if (drths_site_record_steps(exp, &steps, err) != 0)
        return -EINVAL;
    const drths_site_space_t space = {file, ncols, drths_site_rows_for(steps, exp->rate_hz)};
    return drths_site_reserve(s, dir, &space, 1, err);
}

int drths_site_reserve(drths_site_t *s, const char *dir, const drths_site_space_t *recs, int n,
                       drths_error_t *err)
{
    if (n > DRTHS_SITE_MAX_RECORDERS)
        return drths_error_set(err, -EINVAL, "more than %d recorders", DRTHS_SITE_MAX_RECORDERS);
    uint64_t total = DRTHS_RESERVE_END_BYTES;
    char what[600];
    size_t w = 0;
    what[0] = '\0';
    for (int i = 0; i < n; i++) {
        uint64_t bin = drths_recorder_bin_bytes(recs[i].ncols, recs[i].rows);
        uint64_t csv = drths_recorder_csv_bytes(recs[i].ncols, recs[i].rows);
        total += bin + csv;
        const char *dot = strrchr(recs[i].file, '.');
        int base = dot ? (int)(dot - recs[i].file) : (int)strlen(recs[i].file);
        if (w < sizeof what)
            w += (size_t)snprintf(
                what + w, sizeof what - w, "%s%.*s.bin %.1f MB and %s up to %.1f MB for %llu rows",
                i ? "; " : "", base, recs[i].file, (double)bin / 1e6, recs[i].file,
                (double)csv / 1e6, (unsigned long long)recs[i].rows);
        snprintf(s->space[i].file, sizeof s->space[i].file, "%s", recs[i].file);
        s->space[i].rows = recs[i].rows;
    }
    if (w < sizeof what)
        snprintf(what + w, sizeof what - w, "%s%.1f MB for the summary and report", n ? "; " : "",
                 (double)DRTHS_RESERVE_END_BYTES / 1e6);
    int rc = drths_reserve_open(&s->reserve, dir, total, what, err);
    if (rc != 0)
        return rc;
    s->nspace = n;
    s->reserve_on = 1;
    s->reserve_total = total;
    return 0;
}

void drths_site_print_recorders(const drths_site_t *s, const char *indent)
{
    for (int i = 0; i < s->nrec; i++) {
        const drths_recorder_t *r = s->rec[i];
        const drths_rt_item_t *it = &r->writer_rt;
        printf("%srecord: %s, written by a thread at %s: %s%s%s%s; ring of %zu rows (%.1f s)\n",
               indent, r->bin_name, it->what, drths_rt_status_name(it->status),
               it->detail[0] ? " (" : "", it->detail, it->detail[0] ? ")" : "",
               drths_ring_capacity(&r->ring),
               (double)drths_ring_capacity(&r->ring) / s->rec_rate_hz[i]);
    }
    if (s->reserve_on)
        printf(s->reserve.held ? "%sspace: %.1f MB held for the records, the summary and the "
                                 "report (fallocate)\n"
                               : "%sspace: %.1f MB needed, not held (this filesystem cannot "
                                 "reserve space: another file may still fill it)\n",
               indent, (double)s->reserve_total / 1e6);
    fflush(stdout);
}

/* ---- the real-time thread --------------------------------------------------------------- */

static void *rt_main(void *arg)
{
    drths_site_t *s = arg;
    int run = 1;
    if (s->gated) {
        s->rt_rc = drths_rt_apply_thread(&s->rt, &s->rt_report);
        sem_post(&s->ready);
        while (sem_wait(&s->go) != 0)
            ;
        run = s->go_run;
    }
    if (run)
        s->body(s->body_ctx);
    atomic_store(&s->done, 1);
    uv_async_send(&s->async);
    return NULL;
}

int drths_site_rt_start(drths_site_t *s, void (*body)(void *ctx), void *ctx,
                        const drths_rt_options_t *rt)
{
    s->body = body;
    s->body_ctx = ctx;
    if (rt) {
        s->gated = 1;
        s->rt = *rt;
        sem_init(&s->ready, 0, 0);
        sem_init(&s->go, 0, 0);
    }
    int rc = drths_rt_thread_create(&s->thread, rt_main, s);
    if (rc != 0)
        return rc;
    s->thread_on = 1;
    return 0;
}

int drths_site_rt_ready(drths_site_t *s)
{
    while (sem_wait(&s->ready) != 0)
        ;
    return s->rt_rc;
}

void drths_site_rt_go(drths_site_t *s, int run)
{
    s->go_run = run;
    sem_post(&s->go);
}

void drths_site_run(drths_site_t *s)
{
    if (s->thread_on) {
        if (s->handles_open)
            uv_run(&s->loop, UV_RUN_DEFAULT);
        pthread_join(s->thread, NULL);
        s->thread_on = 0;
    }
    close_handles(s);
    if (s->loop_open)
        uv_run(&s->loop, UV_RUN_DEFAULT);
    /* Closing the signal handles gave SIGINT and SIGTERM back their default action, which
     * would end the process in the middle of writing its records and summary: a second Ctrl-C,
     * or a script's SIGTERM after the terminal's SIGINT, must not cut them (kill -9 still
     * can). The run is over: the signals have nothing left to stop. */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    if (s->hooks.service)
        s->hooks.service(s->hooks.ctx);
    drain(s);
    drths_site_clear_status(s);
    /* The CSV and the summary are written next: they get the room held for them. */
    if (s->reserve_on)
        drths_reserve_release(&s->reserve);
}

void drths_site_close(drths_site_t *s)
{
    if (s->thread_on) {
        /* A gated thread still waiting for go is let out before the join. */
        if (s->gated)
            drths_site_rt_go(s, 0);
        pthread_join(s->thread, NULL);
        s->thread_on = 0;
    }
    close_handles(s);
    if (s->loop_open) {
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        s->loop_open = 0;
    }
    if (s->tlm_on) {
        drths_telemetry_close(&s->tlm);
        s->tlm_on = 0;
    }
    if (s->reserve_on) {
        drths_reserve_release(&s->reserve);
        s->reserve_on = 0;
    }
    if (s->gated) {
        drths_rt_report_close(&s->rt_report);
        sem_destroy(&s->ready);
        sem_destroy(&s->go);
        s->gated = 0;
    }
}

void drths_site_rt_print(const drths_rt_report_t *rep, const char *indent)
{
    for (int i = 0; i < DRTHS_RT_NITEMS; i++) {
        char line[320];
        drths_rt_report_line(rep, i, line, sizeof line);
        printf("%s%s\n", indent, line);
    }
}

void drths_site_rt_summary(const drths_rt_report_t *rep, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < DRTHS_RT_NITEMS && n < cap; i++) {
        const drths_rt_item_t *it = &rep->item[i];
        n += (size_t)snprintf(out + n, cap - n, "%s%s: %s", i ? "; " : "", it->what,
                              drths_rt_status_name(it->status));
    }
}
