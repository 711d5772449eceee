/* One session of drths-numerical (site-numerical/app.h): the shell's hooks, the connection to
 * the actuator site, the probes, the hybrid run and its report. */
#include "site-numerical/app.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/platform/cli.h"
#include "common/platform/rtclock.h"

#define PROG DRTHS_NUMAPP_PROG

static int on_status(void *ctx, char *buf, size_t cap)
{
    drths_numapp_t *a = ctx;
    return drths_numsite_status_text(a->sites, a->n_links, &a->hyb, buf, cap) > 0;
}

/* The run polls the shell's stop flag itself (drths_numsite_run): only the sentence is ours. */
static void on_stop(void *ctx, const drths_site_stop_request_t *r)
{
    drths_numapp_t *a = ctx;
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
    drths_numapp_t *a = ctx;
    f->state = a->tlm_state;
    drths_numsite_frame_counters(a->sites, a->n_links, f);
}

static void on_tap(void *ctx, const double *row, drths_telemetry_frame_t *f)
{
    drths_numsite_frame_row(&((drths_numapp_t *)ctx)->frame_map, row, f);
}

/* The record cannot be written: the run ends with ABORT RECORDS to the actuator site. */
static void on_records_failed(void *ctx, const char *text)
{
    drths_numsite_records_abort(&((drths_numapp_t *)ctx)->sites[0], text);
}

static void rt_body(void *ctx)
{
    drths_numapp_t *a = ctx;
    drths_numsite_run_links(a->sites, a->n_links, &a->hyb, &a->rec, &a->shell.stop, drths_site_wake,
                            &a->shell);
}

/* Link i's key, checked against its peer, and its socket: the file's one link (--peer,
 * numerical.peer, or the one site's address), or sites[i] of a file with several. The key
 * stays in *key for the caller (the monitor's key and the start-up lines: link 0's). Returns 0
 * or the exit code, with the message printed. */
static int open_link(drths_numapp_t *a, int i, drths_site_key_t *key)
{
    drths_error_t err = {{0}};
    const drths_experiment_site_t *site = a->n_links > 1 ? &a->exp.sites[i] : a->exp.site;
    const char *key_path = a->n_links > 1 && site->key_path ? site->key_path : a->exp.link.key_path;
    int rc = drths_site_key_load(key, a->so.key, key_path, &err);
    if (rc != 0)
        return drths_cli_usage_error(PROG, "%s%s%s", a->n_links > 1 ? site->name : "",
                                     a->n_links > 1 ? ": " : "", err.msg);
    /* The rehearsal key only towards loopback; a peer that does not parse is left to
     * drths_numsite_init's own message. */
    drths_addr_t peer;
    /* A file with one site: the link's address is the site's. */
    char what[64];
    const char *peer_text = a->peer ? a->peer : site ? site->address : a->exp.numerical.peer;
    if (a->peer)
        snprintf(what, sizeof what, "--peer");
    else if (site)
        snprintf(what, sizeof what, "sites[%d].address (%s)", i, site->name);
    else
        snprintf(what, sizeof what, "numerical.peer");
    const drths_site_link_t link = {&peer, what, 0, 0, NULL};
    if (drths_addr_parse(&peer, peer_text, link.what, NULL) == 0 &&
        drths_site_key_allowed(key, &link, &err) != 0) {
        drths_site_key_wipe(key);
        return drths_cli_usage_error(PROG, "%s", err.msg);
    }
    rc = drths_numsite_init(&a->sites[i], &a->exp, peer_text, key->psk, &err);
    if (rc == 0 && site)
        snprintf(a->sites[i].name, sizeof a->sites[i].name, "%s", site->name);
    /* HELLO's link index, which the actuator site echoes (PROTOCOL.md section 12). */
    a->sites[i].hello.link = (uint8_t)i;
    if (rc == 0 && a->so.kernel_filter)
        rc = drths_numsite_filter(&a->sites[i], &err);
    if (rc != 0) {
        drths_site_key_wipe(key);
        if (a->n_links > 1)
            fprintf(stderr, "drths-numerical: %s (%s): %s\n", site->name, what, err.msg);
        else
            fprintf(stderr, "drths-numerical: %s\n", err.msg);
        return rc == -EINVAL ? DRTHS_EXIT_CONFIG : DRTHS_EXIT_FAILED;
    }
    a->sites[i].wait_spin_ns = a->wait_spin_ns;
    return 0;
}

/* Keys, sockets, run folder and the start-up lines; then the shell and the monitor. Returns 0 or
 * the exit code (nothing to report yet: no summary.json). */
static int open_site(drths_numapp_t *a)
{
    drths_error_t err = {{0}};
    drths_site_key_t key;
    int rc;
    /* The other links' key ids for the start-up lines (link 0's is key's). */
    char ids[DRTHS_HYBRID_MAX_LINKS][sizeof key.id];
    for (int i = a->n_links - 1; i >= 0; i--) {
        rc = open_link(a, i, &key);
        if (rc != 0)
            return rc;
        snprintf(ids[i], sizeof ids[i], "%s", key.id);
        if (i > 0)
            drths_site_key_wipe(&key);
    }
    /* key is link 0's: the monitor's key is derived from it. */
    drths_site_monitor_key(&a->shell, &key);
    drths_site_key_wipe(&key);
    rc = drths_site_run_folder(a->dir, sizeof a->dir, &a->so, &a->exp, "numerical", &a->prov, &err);
    if (rc == -EEXIST)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    if (rc != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    /* The whole run's space, held before the handshake: a run that cannot keep its records is
     * refused now, before the actuator site moves. */
    if (!a->probe_only) {
        rc = drths_site_reserve_run(&a->shell, a->dir, &a->exp, "numerical.csv",
                                    drths_hybrid_columns_for(&a->exp), &err);
        if (rc == -ENOSPC || rc == -EINVAL)
            return drths_cli_usage_error(PROG, "%s", err.msg);
        if (rc != 0)
            return drths_cli_error(PROG, "%s", err.msg);
    }
    snprintf(a->prov.key_id, sizeof a->prov.key_id, "%s", key.id);
    drths_numsite_print_start(stdout, &a->sites[0], key.path, key.id, a->dir, a->so.kernel_filter,
                              a->probe_only);
    for (int i = 0; a->n_links > 1 && i < a->n_links; i++)
        printf("link %d: %s at %s (key id %s)\n", i + 1, a->sites[i].name, a->sites[i].peer_text,
               ids[i]);
    if (!key.path)
        drths_site_key_warning(PROG, &key);
    if (drths_site_monitor_open(&a->shell, "numerical", a->exp.rate_hz, &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    drths_site_print_monitor(&a->shell, "");
    return 0;
}

/* Sets the reason the run did not happen; returns -1. */
static int not_run(drths_numapp_t *a, const char *reason)
{
    snprintf(a->reason, sizeof a->reason, "%s", reason);
    fprintf(stderr, "drths-numerical: %s\n", a->reason);
    return -1;
}

/* The RT thread (gated: it applies its real-time options and waits), Start, the handshake and
 * the probes. Returns 0, or -1 with the reason set. */
static int connect_peer(drths_numapp_t *a)
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
    /* Every link's handshake before any probe and before any EPOCH 1 (PROTOCOL.md section
     * 12), one link after the other; then each link's probes. */
    rc = 0;
    for (int i = 0; i < a->n_links && rc == 0; i++) {
        drths_numsite_t *l = &a->sites[i];
        if (a->n_links > 1)
            printf("connecting %s: HELLO to %s (session %016llx, up to %g s)\n", l->name,
                   l->peer_text, (unsigned long long)l->session_id, a->connect_timeout_s);
        else
            printf("connecting: HELLO to %s (session %016llx, up to %g s)\n", l->peer_text,
                   (unsigned long long)l->session_id, a->connect_timeout_s);
        fflush(stdout);
        drths_site_event(&a->shell, a->so.kernel_filter
                                        ? "connecting to the actuator site (kernel filter on)"
                                        : "connecting to the actuator site");
        rc = drths_numsite_handshake(l, a->connect_timeout_s, drths_site_poll, &a->shell, &err);
        if (rc == 0) {
            printf("connected%s%s: the actuator site runs the same experiment (fingerprint "
                   "%.16s..)\n",
                   a->n_links > 1 ? " " : "", l->name, l->fingerprint_hex);
            fflush(stdout);
        } else if (a->n_links > 1 && rc != -ECANCELED) {
            char text[sizeof err.msg];
            snprintf(text, sizeof text, "%s", err.msg);
            drths_error_set(&err, rc, "%s: %s", l->name, text);
        }
    }
    if (rc != 0 && a->n_links > 1) /* the sites that did answer are told the test is off */
        for (int i = 0; i < a->n_links; i++)
            if (a->sites[i].peer_fingerprint_hex[0])
                drths_numsite_farewell(&a->sites[i], "another site did not connect");
    for (int i = 0; i < a->n_links && rc == 0; i++) {
        drths_site_event(&a->shell, "connected: measuring the round trip");
        rc = drths_numsite_probe(&a->sites[i], drths_site_poll, &a->shell, &err);
        if (rc != 0 && a->n_links > 1 && rc != -ECANCELED) {
            char text[sizeof err.msg];
            snprintf(text, sizeof text, "%s", err.msg);
            drths_error_set(&err, rc, "%s: %s", a->sites[i].name, text);
        }
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
static int start_run(drths_numapp_t *a)
{
    drths_error_t err = {{0}};
    drths_hybrid_params_t params, *hp = &params;
    drths_hybrid_params_default(hp, &a->exp);
    /* One L for all links: the largest any of them needs (PROTOCOL.md section 12); each link
     * waits for its feedback by its own round trips. */
    hp->L = a->sites[0].lchoice.L;
    for (int i = 1; i < a->n_links; i++)
        if (a->sites[i].lchoice.L > hp->L)
            hp->L = a->sites[i].lchoice.L;
    hp->wait_ns = drths_hybrid_feedback_wait_ns(hp->L, hp->dt_ns, a->sites[0].probe_summary.min_ns,
                                                a->sites[0].rtt_q_ns, hp->reorder_ticks);
    for (int i = 1; i < a->n_links; i++)
        hp->link_wait_ns[i] =
            drths_hybrid_feedback_wait_ns(hp->L, hp->dt_ns, a->sites[i].probe_summary.min_ns,
                                          a->sites[i].rtt_q_ns, hp->reorder_ticks);
    hp->peer_timeout_ns = (int64_t)(a->peer_timeout_s * 1e9);
    hp->rtt_q_ns = a->sites[0].rtt_q_ns;
    for (int i = 1; i < a->n_links; i++)
        if (a->sites[i].rtt_q_ns > hp->rtt_q_ns)
            hp->rtt_q_ns = a->sites[i].rtt_q_ns;
    int rc = drths_hybrid_init(&a->hyb, &a->exp, hp, &err);
    if (rc == 0)
        rc = drths_steptime_init(&a->steptime, hp->dt_ns, &err);
    if (rc == 0)
        a->sites[0].steptime = &a->steptime;
    if (rc == 0)
        rc = drths_site_recorder_open(&a->shell, &a->rec, a->dir, "numerical.csv",
                                      (const char *const *)a->hyb.colnames, a->hyb.ncols,
                                      a->exp.rate_hz, 1, &err);
    if (rc != 0) {
        a->exit_code = rc == -ENOTSUP || rc == -EINVAL ? DRTHS_EXIT_CONFIG : DRTHS_EXIT_FAILED;
        return not_run(a, err.msg);
    }
    drths_site_print_recorders(&a->shell, "");
    if (a->hyb.smith_model_sha256[0])
        printf("smith predictor: %s (characterized %s model %s, sha256 %s, dead time L = %u "
               "ticks)\n",
               drths_smith_mode_name(a->exp.numerical.smith),
               drths_damper_model_name(a->exp.specimen.damper.model), a->exp.numerical.smith_model,
               a->hyb.smith_model_sha256, hp->L);
    else
        printf("smith predictor: %s (nominal %s model, dead time L = %u ticks)\n",
               drths_smith_mode_name(a->exp.numerical.smith),
               drths_damper_model_name(a->exp.specimen.damper.model), hp->L);
    printf("running: %ld steps (%.2f s), control %s, R = %d, feedback wait %.3f ms, L %s\n",
           a->hyb.ns.steps, (double)(a->hyb.ns.steps - 1) * a->hyb.ns.dt_s,
           drths_control_mode_name(a->exp.control.mode), hp->r, (double)a->hyb.p.wait_ns * 1e-6,
           hp->adapt_L ? "on the fly (epochs)" : "fixed");
    for (int i = 0; a->n_links > 1 && i < a->n_links; i++)
        printf("  link %s: needs L = %u ticks (round trip p%g %.3f ms), feedback wait %.3f ms\n",
               a->sites[i].name, a->sites[i].lchoice.L, a->exp.link.quantile * 100.0,
               (double)a->sites[i].rtt_q_ns * 1e-6, (double)a->hyb.lk[i].wait_ns * 1e-6);
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
static int run_hybrid(drths_numapp_t *a)
{
    int code = open_site(a);
    if (code != 0)
        return code;
    if (a->probe_only) {
        drths_error_t err = {{0}};
        uint64_t n = (uint64_t)(a->probe_seconds * 1e9 /
                                (double)drths_numsite_probe_interval_ns(&a->sites[0]));
        for (int i = 0; i < a->n_links; i++)
            if (drths_numsite_set_probes(&a->sites[i], n, &err) != 0)
                return drths_cli_error(PROG, "%s", err.msg);
        printf("probe-only: %llu probes over %g s, one every %.2f ms\n", (unsigned long long)n,
               a->probe_seconds, (double)drths_numsite_probe_interval_ns(&a->sites[0]) * 1e-6);
    }
    int64_t t_start = drths_now_ns();
    a->exit_code = DRTHS_EXIT_FAILED;
    int ok = connect_peer(a) == 0;
    for (int i = 0; ok && i < a->n_links; i++) {
        if (a->n_links > 1)
            printf("link %s:\n", a->sites[i].name);
        drths_numsite_print_probes(stdout, &a->sites[i]);
    }
    if (ok && a->probe_only) {
        for (int i = 0; i < a->n_links; i++) {
            if (a->n_links > 1)
                printf("link %s:\n", a->sites[i].name);
            drths_numsite_print_probe_only(stdout, &a->sites[i]);
        }
        for (int i = 0; i < a->n_links; i++)
            drths_numsite_farewell(&a->sites[i], "probe-only connectivity test finished");
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
        uint64_t ring_dropped = 0;
        int closed = drths_site_records_close(PROG, &a->rec, &ring_dropped, &dropped, &err);
        int by_monitor = atomic_load(&a->shell.stop) == DRTHS_SITE_STOP_MONITOR;
        a->exit_code = drths_numsite_end_reason(&a->hyb, by_monitor, a->peer_timeout_s, a->reason,
                                                sizeof a->reason);
        if (a->exit_code != 0)
            fprintf(stderr, "drths-numerical: %s\n", a->reason);
        drths_site_records_mark(PROG, &a->rec, ring_dropped, closed, &err, a->reason,
                                sizeof a->reason, &a->exit_code);
    }
    char rt_text[400];
    drths_site_rt_summary(&a->shell.rt_report, rt_text, sizeof rt_text);
    drths_site_provenance_rt(&a->shell, &a->shell.rt_report, &a->prov);
    drths_numsite_outcome_t out = {
        a->reason, a->exit_code, (double)(drths_now_ns() - t_start) * 1e-9,
        dropped,   rt_text,      a->running ? &a->rec : NULL,
        &a->prov,  a->sites,     a->n_links,
        NULL}; /* the step timing: below */
    out.steptime = a->running ? &a->steptime : NULL;
    drths_numsite_report_end(stdout, &a->shell, &a->sites[0], a->running ? &a->hyb : NULL, a->dir,
                             &out);
    return a->exit_code;
}

int drths_numapp_run_session(drths_numapp_t *a)
{
    const drths_site_hooks_t hooks = {a,           NULL,   on_status,        on_stop,
                                      on_counters, on_tap, on_records_failed};
    drths_error_t err = {{0}};
    int code = drths_site_init(&a->shell, PROG, &a->so, &hooks, &err) != 0
                   ? drths_cli_error(PROG, "%s", err.msg)
                   : run_hybrid(a);
    drths_site_close(&a->shell);
    drths_hybrid_close(&a->hyb);
    drths_steptime_close(&a->steptime);
    for (int i = 0; i < a->n_links; i++)
        drths_numsite_close(&a->sites[i]);
    return code;
}
