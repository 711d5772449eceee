/* One session of drths-physical (site-physical/app.h): the shell's hooks, the configuration,
 * the I/O, the start-up lines, the run and its report. */
#include "site-physical/app.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "protocol/fingerprint.h"
#include "site-physical/report.h"

#define PROG DRTHS_PHYSAPP_PROG

/* ---- the shell's hooks ------------------------------------------------------------------ */

/* The RT thread's report once it is ready, then its event lines. */
static void print_events(void *ctx)
{
    drths_physapp_t *a = ctx;
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
    return drths_physsite_status_text(&((drths_physapp_t *)ctx)->ps, buf, cap);
}

/* Signals and the monitor's Stop / Abort both HOLD at once, then the records are written. */
static void on_stop(void *ctx, const drths_site_stop_request_t *r)
{
    drths_physapp_t *a = ctx;
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
    drths_physsite_frame_counters(&((drths_physapp_t *)ctx)->ps, f);
}

/* The record cannot be written: HOLD, and ABORT RECORDS to the numerical site. */
static void on_records_failed(void *ctx, const char *text)
{
    drths_physsite_request_records_abort(&((drths_physapp_t *)ctx)->ps, text);
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
static int configure(drths_physapp_t *a)
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
static int open_io(drths_physapp_t *a)
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
    if (drths_site_monitor_open(&a->shell, a->site ? a->site : "physical", a->exp.rate_hz,
                                &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    int rc =
        drths_site_run_folder(a->dir, sizeof a->dir, &a->so, &a->exp, "physical", &a->prov, &err);
    if (rc == -EEXIST)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    if (rc != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    /* The space of the whole run, held before any numerical site is answered: the record
     * follows the experiment's ground motion (with OpenFresco the analysis decides, so this is
     * the estimate), and a run that cannot keep it is refused now, not lost later. */
    if (!a->cfg.probe_only) {
        rc = drths_site_reserve_run(&a->shell, a->dir, &a->exp, "physical.csv", ncols, &err);
        if (rc == -ENOSPC || rc == -EINVAL)
            return drths_cli_usage_error(PROG, "%s", err.msg);
        if (rc != 0)
            return drths_cli_error(PROG, "%s", err.msg);
    }
    if (drths_site_recorder_open(&a->shell, &a->rec, a->dir, "physical.csv", columns, ncols,
                                 a->exp.rate_hz, 1, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    a->rec_open = 1;
    snprintf(a->prov.key_id, sizeof a->prov.key_id, "%s", a->key.id);
    return 0;
}

static void print_start(const drths_physapp_t *a)
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
static int run(drths_physapp_t *a)
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
    a->rec_open = 0;
    uint64_t dropped = 0;
    int closed = drths_site_records_close(PROG, &a->rec, &dropped, &a->ps.rec_dropped, &err);
    /* After the records are on disk: when the site ended the session first this waits (briefly)
     * for the OpenFresco client to end, answering it NaN, so that the summary can say how. */
    if (a->openfresco)
        drths_ofr_app_stop(&a->ofr);
    if (rc != 0)
        return DRTHS_EXIT_FAILED; /* the thread never ran: nothing to report */
    drths_physsite_exit_reason(&a->ps); /* a HOLD's sentence, formatted here */
    drths_site_records_mark(PROG, &a->rec, dropped, closed, &err, a->ps.exit_reason,
                            sizeof a->ps.exit_reason, &a->ps.exit_code);
    drths_site_provenance_rt(&a->shell, &a->ps.rt_report, &a->prov);
    a->ps.provenance = &a->prov;
    int code = a->ps.exit_code;
    a->ps.rec_written = a->rec.written;
    if (drths_physsite_report_end(stdout, &a->ps, a->openfresco ? &a->ofr : NULL, a->dir, &err))
        code = drths_cli_error(PROG, "%s", err.msg);
    char text[800];
    snprintf(text, sizeof text, "%s (exit %d)", a->ps.exit_reason, code);
    drths_site_monitor_end(&a->shell, text);
    return code;
}

/* One session: the shell, the experiment's configuration, the I/O, the run and its records, all
 * closed again. Returns the exit code. */
int drths_physapp_run_session(drths_physapp_t *a)
{
    const drths_site_hooks_t hooks = {a,           print_events, on_status,        on_stop,
                                      on_counters, on_tap,       on_records_failed};
    drths_error_t err = {{0}};
    int code;
    if (drths_site_init(&a->shell, PROG, &a->so, &hooks, &err) != 0)
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
