/* summary.json of a hybrid run at the numerical site: what ran (experiment, fingerprint, peer,
 * software version), how it ended, the start-up probes and the choice of L, the rejected
 * datagrams and, once the run started, the loop's counters, round trips, peaks, Smith predictor
 * and epochs. drths-report and the tests read it. */
#include "site-numerical/summary.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/platform/cli.h"
#include "common/platform/json.h"
#include "common/platform/runfolder.h"

static void rtt_json(drths_json_t *j, const char *key, const drths_rtt_summary_t *r)
{
    drths_json_object_begin(j, key);
    drths_json_int(j, "count", (int64_t)r->count);
    drths_json_number(j, "min_ms", (double)r->min_ns * 1e-6);
    drths_json_number(j, "p50_ms", (double)r->p50_ns * 1e-6);
    drths_json_number(j, "p99_ms", (double)r->p99_ns * 1e-6);
    drths_json_number(j, "p999_ms", (double)r->p999_ns * 1e-6);
    drths_json_number(j, "max_ms", (double)r->max_ns * 1e-6);
    drths_json_int(j, "min_ticks", r->min_ticks);
    drths_json_int(j, "p50_ticks", r->p50_ticks);
    drths_json_int(j, "p99_ticks", r->p99_ticks);
    drths_json_int(j, "p999_ticks", r->p999_ticks);
    drths_json_int(j, "max_ticks", r->max_ticks);
    drths_json_object_end(j);
}

/* Who ran what: versions, the peer, the outcome, the probes and the initial L. */
static void head_json(drths_json_t *j, const drths_numsite_t *s, const drths_numsite_outcome_t *o)
{
    const drths_experiment_t *e = s->exp;
    drths_json_string(j, "kind", "hybrid-numerical");
    drths_json_string(j, "version", drths_version());
    drths_json_string(j, "experiment", e->name);
    drths_json_string(j, "fingerprint", s->fingerprint_hex);
    drths_json_string(j, "peer", s->peer_text);
    drths_json_string(j, "peer_fingerprint", s->peer_fingerprint_hex);
    drths_json_number(j, "rate_hz", e->rate_hz);
    drths_json_int(j, "redundancy", e->link.redundancy);
    drths_json_string(j, "smith", drths_smith_mode_name(e->numerical.smith));
    drths_json_string(j, "exit_reason", o->exit_reason);
    drths_json_int(j, "exit_code", o->exit_code);
    /* Whether numerical.csv holds every row the loop produced (false: the recorder's ring
     * overflowed or the disk refused a write, records_lost_rows were lost, and the run exited
     * 1). */
    drths_json_bool(j, "records_complete", o->recorder_dropped == 0 && !(o->rec && o->rec->failed));
    drths_json_int(j, "records_lost_rows", (int64_t)o->recorder_dropped);
    drths_json_number(j, "wall_time_s", o->wall_s);
    if (o->rt_summary)
        drths_json_string(j, "real_time", o->rt_summary);
    if (o->provenance)
        drths_provenance_json(j, "provenance", o->provenance);
    /* How long the handshake and the probes took: under a flood of replayed HELLOs at the
     * actuator site this is the figure that says whether they kept the run from starting. */
    drths_json_object_begin(j, "handshake");
    drths_json_int(j, "hellos_sent", (int64_t)s->hellos_sent);
    if (s->first_hello_ns && s->run_start_ns >= s->first_hello_ns)
        drths_json_number(j, "start_after_first_hello_s",
                          (double)(s->run_start_ns - s->first_hello_ns) * 1e-9);
    drths_json_object_end(j);
    drths_json_object_begin(j, "probes");
    drths_json_int(j, "sent", (int64_t)s->probes_sent);
    drths_json_int(j, "answered", (int64_t)s->probes_answered);
    drths_json_int(j, "loss_bursts", (int64_t)s->probe_loss_bursts);
    drths_json_int(j, "loss_longest", (int64_t)s->probe_loss_longest);
    drths_json_int(j, "reordered", (int64_t)s->probes_reordered);
    if (s->have_probe_summary)
        rtt_json(j, "round_trip", &s->probe_summary);
    drths_json_object_end(j);
    if (!s->have_probe_summary)
        return;
    const drths_lchoice_t *l = &s->lchoice;
    drths_json_object_begin(j, "loop_delay");
    drths_json_int(j, "L", l->L);
    drths_json_number(j, "L_ms", (double)l->L * (double)s->dt_ns * 1e-6);
    drths_json_int(j, "L_auto", l->L_auto);
    drths_json_bool(j, "fixed", l->fixed);
    drths_json_int(j, "rtt_ticks", l->rtt_ticks);
    drths_json_int(j, "wake_local_ticks", l->wake_local_ticks);
    drths_json_int(j, "wake_peer_ticks", l->wake_peer_ticks);
    drths_json_int(j, "safety_ticks", l->safety_ticks);
    drths_json_object_end(j);
}

/* What the socket refused or lost. */
static void socket_json(drths_json_t *j, const drths_numsite_t *s, const drths_numsite_outcome_t *o)
{
    drths_json_object_begin(j, "rejects");
    for (int r = 1; r < DRTHS_REJECT_COUNT; r++)
        if (s->rx.rejects[r])
            drths_json_int(j, drths_reject_name((drths_reject_t)r), (int64_t)s->rx.rejects[r]);
    if (s->wrong_source)
        drths_json_int(j, "WRONG_SOURCE", (int64_t)s->wrong_source);
    drths_json_object_end(j);
    /* Not by reason: what the kernel filter refused plus any receive-buffer overflow. */
    drths_json_bool(j, "kernel_filter", s->kernel_filter);
    int64_t kernel_drops = s->udp.fd >= 0 ? drths_udp_kernel_drops(&s->udp) : -1;
    if (kernel_drops >= 0)
        drths_json_int(j, "kernel_drops", kernel_drops);
    drths_json_int(j, "send_errors", (int64_t)s->send_errors);
    drths_json_int(j, "recorder_dropped_rows", (int64_t)o->recorder_dropped);
    if (o->rec)
        drths_recorder_json(j, "recorder", o->rec);
}

/* The loop's counters: steps, concealment, feedback, the round trip. */
static void loop_json(drths_json_t *j, const drths_numsite_t *s, const drths_hybrid_t *h)
{
    const drths_hybrid_counters_t *c = &h->c;
    drths_json_int(j, "L", h->L);
    drths_json_int(j, "L_start", h->p.L);
    drths_json_int(j, "steps", (int64_t)c->rows);
    drths_json_int(j, "steps_planned", h->ns.steps);
    drths_json_number(j, "simulated_s", (double)h->ns.step * h->ns.dt_s);
    drths_json_int(j, "concealed_feedback", (int64_t)c->concealed);
    drths_json_int(j, "max_consecutive_concealed", (int64_t)c->max_consecutive_concealed);
    drths_json_object_begin(j, "feedback");
    drths_json_int(j, "datagrams", (int64_t)c->fb_datagrams);
    drths_json_int(j, "ticks_received", (int64_t)c->fb_samples_stored);
    drths_json_int(j, "duplicates", (int64_t)c->fb_duplicates);
    drths_json_int(j, "late_after_concealed", (int64_t)c->fb_late);
    drths_json_int(j, "too_far", (int64_t)c->fb_too_far);
    drths_json_int(j, "actuator_concealed_ticks", (int64_t)c->phys_concealed);
    drths_json_int(j, "actuator_hold_ticks", (int64_t)c->phys_hold);
    drths_json_number(j, "actuator_hold_seen_from_tick",
                      c->phys_hold ? (double)c->phys_hold_tick : NAN);
    drths_json_object_end(j);
    drths_json_int(j, "commands_sent", (int64_t)c->commands_sent);
    drths_json_int(j, "unexpected_messages", (int64_t)c->unexpected);
    drths_rtt_summary_t rs;
    drths_rtt_summary_from_hist(&h->lk[0].rtt.run, s->dt_ns, &rs);
    rtt_json(j, "rtt", &rs);
    drths_json_int(j, "rtt_unknown_echoes", (int64_t)h->lk[0].rtt.unknown);
    if (h->end == DRTHS_HYBRID_PEER_ABORT) {
        drths_json_string(j, "peer_abort_reason", drths_stop_reason_name(h->end_reason));
        drths_json_string(j, "peer_abort_text", h->end_text);
    }
}

/* The structure's response and the damper. */
static void response_json(drths_json_t *j, const drths_experiment_t *e, const drths_hybrid_t *h)
{
    long rows = (long)h->c.rows;
    drths_json_array_begin(j, "floors");
    for (int i = 0; i < h->ns.n; i++) {
        drths_json_object_begin(j, NULL);
        drths_json_int(j, "floor", i + 1);
        drths_json_number(j, "peak_disp_m", h->peak_x[i]);
        drths_json_number(j, "rms_disp_m", rows ? sqrt(h->sum_x2[i] / rows) : 0.0);
        drths_json_number(j, "peak_abs_accel_m_s2", h->peak_a[i]);
        drths_json_number(j, "rms_abs_accel_m_s2", rows ? sqrt(h->sum_a2[i] / rows) : 0.0);
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
    drths_json_object_begin(j, "damper");
    drths_json_number(j, "peak_force_N", h->peak_force_N);
    drths_json_number(j, "command", h->lk[0].command);
    drths_json_string(j, "control", drths_control_mode_name(e->control.mode));
    drths_json_object_end(j);
}

static void stability_view_json(drths_json_t *j, const char *key, const drths_stability_view_t *v)
{
    drths_json_object_begin(j, key);
    drths_json_number(j, "time_s", v->time_s);
    drths_json_number(j, "ratio", v->ratio);
    drths_json_number(j, "supplied_J", v->supplied_J);
    drths_json_number(j, "damping_J", v->damping_J);
    drths_json_number(j, "growth_per_s", v->growth_per_s);
    drths_json_number(j, "freq_hz", v->freq_hz);
    drths_json_int(j, "cycles", v->cycles);
    drths_json_number(j, "span_s", v->span_s);
    drths_json_number(j, "amplitude_m", v->amp_m);
    drths_json_object_end(j);
}

/* The stability detector: its settings, the largest ratio it judged (the run's margin against
 * the limit, written even when it never tripped) and the judgement that tripped it. */
static void stability_json(drths_json_t *j, const drths_hybrid_t *h)
{
    const drths_stability_t *st = &h->lk[0].stab;
    drths_json_object_begin(j, "stability");
    drths_json_bool(j, "enabled", st->p.enabled);
    drths_json_number(j, "limit_ratio", st->p.limit);
    drths_json_number(j, "span_s", st->p.span_s);
    drths_json_number(j, "min_amplitude_m", st->p.min_amplitude_m);
    drths_json_int(j, "judgements", (int64_t)st->judgements);
    drths_json_number(j, "max_ratio", st->worst.judged ? st->worst.ratio : 0.0);
    drths_json_number(j, "margin",
                      st->worst.judged && st->p.limit > 0.0 ? st->worst.ratio / st->p.limit : 0.0);
    if (st->worst.judged)
        stability_view_json(j, "worst", &st->worst);
    drths_json_bool(j, "tripped", st->tripped);
    if (st->tripped) {
        stability_view_json(j, "trip", &st->trip);
        drths_json_string(j, "text", st->text);
    }
    drths_json_object_end(j);
}

/* The identified factors and the relative error of member b (NULL: the leader). */
static void smith_fit_json(drths_json_t *j, const drths_smith_t *sm, const drths_smith_member_t *b)
{
    static const char *const names[DRTHS_SMITH_NPAR] = {"alpha", "c0", "c1", "gamma_beta", "n"};
    drths_json_object_begin(j, "scales");
    for (int i = 0; i < DRTHS_SMITH_NPAR; i++)
        drths_json_number(j, names[i], drths_smith_scale(sm, b, i));
    drths_json_object_end(j);
    drths_json_number(j, "error_rel", drths_smith_error_rel(sm, b));
}

static void smith_json(drths_json_t *j, const drths_hybrid_t *h)
{
    const drths_smith_t *sm = &h->lk[0].smith;
    drths_json_object_begin(j, "smith_predictor");
    drths_json_string(j, "mode", drths_smith_mode_name(sm->mode));
    drths_json_number(j, "force_gain", drths_smith_gain(sm));
    /* The damper model it starts from: the nominal one, or numerical.smith_model's (its
     * SHA-256 names the file's bytes). */
    drths_json_string(j, "model", h->smith_model_sha256[0] ? "characterized" : "nominal");
    if (h->smith_model_sha256[0])
        drths_json_string(j, "model_sha256", h->smith_model_sha256);
    if (h->adaptive) {
        const char *why = drths_smith_fallback_reason(sm);
        drths_json_string(j, "identification", why ? "fell back to the nominal model" : "running");
        if (why) {
            drths_json_string(j, "fallback_reason", why);
            drths_json_int(j, "fallback_step", sm->st.fallback_step);
        }
        smith_fit_json(j, sm, NULL);
        drths_json_number(j, "nominal_error_rel",
                          sm->f2 > 0.0 ? sqrt(sm->e2_nominal / sm->f2) : NAN);
        drths_json_number(j, "forgetting", sm->ap.forgetting);
        drths_json_int(j, "pairs", (int64_t)sm->st.pairs);
        drths_json_int(j, "lead_changes", (int64_t)sm->lead_changes);
        drths_json_array_begin(j, "members");
        for (int m = 0; m < sm->nm; m++) {
            const drths_smith_member_t *b = &sm->m[m];
            drths_json_object_begin(j, NULL);
            drths_json_number(j, "n_start", b->n_start);
            drths_json_bool(j, "lead", b == drths_smith_leader(sm));
            drths_json_bool(j, "dropped", b->dropped);
            smith_fit_json(j, sm, b);
            drths_json_int(j, "updates", (int64_t)b->st.updates);
            drths_json_int(j, "skipped_low_signal", (int64_t)b->st.low_signal);
            drths_json_int(j, "skipped_dead_zone", (int64_t)b->st.dead_zone);
            drths_json_int(j, "step_limited", (int64_t)b->st.step_limited);
            drths_json_int(j, "projections", (int64_t)b->st.projections);
            drths_json_int(j, "covariance_trace_limited", (int64_t)b->st.trace_limited);
            drths_json_int(j, "covariance_resets", (int64_t)b->st.resets);
            drths_json_object_end(j);
        }
        drths_json_array_end(j);
    }
    drths_json_object_end(j);
}

static void epochs_json(drths_json_t *j, const drths_hybrid_t *h)
{
    const drths_hybrid_counters_t *c = &h->c;
    drths_json_object_begin(j, "epochs");
    drths_json_bool(j, "on_the_fly", h->p.adapt_L);
    drths_json_int(j, "changes", (int64_t)c->epoch_changes);
    drths_json_int(j, "L_final", h->L);
    drths_json_int(j, "L_min", c->L_min_seen);
    drths_json_int(j, "L_max", c->L_max_seen);
    drths_json_int(j, "transition_steps", (int64_t)c->transition);
    drths_json_int(j, "filler_commands", (int64_t)c->fillers_sent);
    drths_json_int(j, "glide_skips", (int64_t)c->glide_skips);
    drths_json_array_begin(j, "log");
    for (int i = 0; i < h->n_elog; i++) {
        const drths_hybrid_epoch_log_t *l = &h->elog[i];
        drths_json_object_begin(j, NULL);
        drths_json_int(j, "epoch", l->epoch);
        drths_json_number(j, "time_s", l->time_s);
        drths_json_int(j, "step", l->step);
        drths_json_int(j, "L_from", l->L_from);
        drths_json_int(j, "L_to", l->L_to);
        drths_json_int(j, "effective_tick", (int64_t)l->effective_tick);
        drths_json_string(j, "reason", drths_epoch_reason_name(l->reason));
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
    drths_json_object_end(j);
}

/* With several links: each link's site, peer, probes, L it needs, round trip and feedback
 * counters, and which site stopped the test (one fate) and why. */
static void links_json(drths_json_t *j, const drths_numsite_outcome_t *o, const drths_hybrid_t *h)
{
    if (h && h->end != DRTHS_HYBRID_END_OF_RECORD && h->end_link >= 0 && h->end_link < h->n_links) {
        drths_json_object_begin(j, "stopped_by");
        drths_json_string(j, "site", h->lk[h->end_link].name);
        drths_json_string(j, "end", drths_hybrid_end_name(h->end));
        drths_json_string(j, "reason", o->exit_reason);
        drths_json_object_end(j);
    }
    drths_json_array_begin(j, "links");
    for (int i = 0; i < o->n_links; i++) {
        const drths_numsite_t *s = &o->links[i];
        drths_json_object_begin(j, NULL);
        drths_json_string(j, "site", s->name);
        drths_json_string(j, "peer", s->peer_text);
        char sid[17];
        snprintf(sid, sizeof sid, "%016" PRIx64, s->session_id);
        drths_json_string(j, "session_id", sid);
        drths_json_int(j, "probes_sent", (int64_t)s->probes_sent);
        drths_json_int(j, "probes_answered", (int64_t)s->probes_answered);
        drths_json_number(j, "probe_rtt_quantile_ms", (double)s->rtt_q_ns * 1e-6);
        drths_json_int(j, "L_needed", s->lchoice.L);
        drths_json_int(j, "wrong_source", (int64_t)s->wrong_source);
        drths_json_int(j, "send_errors", (int64_t)s->send_errors);
        if (h && i < h->n_links) {
            const drths_hybrid_link_t *l = &h->lk[i];
            const drths_hybrid_counters_t *c = &l->c;
            drths_rtt_summary_t rs;
            drths_rtt_summary_from_hist(&l->rtt.run, s->dt_ns, &rs);
            drths_json_number(j, "feedback_wait_ms", (double)l->wait_ns * 1e-6);
            drths_json_int(j, "rtt_echoes", (int64_t)rs.count);
            drths_json_number(j, "rtt_p50_ms", rs.count ? (double)rs.p50_ns * 1e-6 : NAN);
            drths_json_number(j, "rtt_p99_ms", rs.count ? (double)rs.p99_ns * 1e-6 : NAN);
            drths_json_number(j, "rtt_max_ms", rs.count ? (double)rs.max_ns * 1e-6 : NAN);
            drths_json_int(j, "concealed_feedback", (int64_t)c->concealed);
            drths_json_int(j, "max_consecutive_concealed", (int64_t)c->max_consecutive_concealed);
            drths_json_int(j, "feedback_datagrams", (int64_t)c->fb_datagrams);
            drths_json_int(j, "ticks_received", (int64_t)c->fb_samples_stored);
            drths_json_int(j, "late_after_concealed", (int64_t)c->fb_late);
            drths_json_int(j, "actuator_concealed_ticks", (int64_t)c->phys_concealed);
            drths_json_int(j, "actuator_hold_ticks", (int64_t)c->phys_hold);
            drths_json_int(j, "commands_sent", (int64_t)c->commands_sent);
            drths_json_int(j, "newest_feedback_tick", (int64_t)l->fb_newest_tick);
        }
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
}

/* "step_timing": the loop's cost per step and how late its steps started (steptime.h). */
static void step_timing_json(drths_json_t *j, const drths_steptime_t *t)
{
    drths_steptime_summary_t s;
    drths_steptime_summary(t, &s);
    drths_json_object_begin(j, "step_timing");
    drths_json_int(j, "steps", (int64_t)s.steps);
    drths_json_object_begin(j, "compute_us");
    drths_json_number(j, "p50", (double)s.compute_p50 * 1e-3);
    drths_json_number(j, "p99", (double)s.compute_p99 * 1e-3);
    drths_json_number(j, "p999", (double)s.compute_p999 * 1e-3);
    drths_json_number(j, "max", (double)s.compute_max * 1e-3);
    drths_json_object_end(j);
    drths_json_object_begin(j, "lateness_us");
    drths_json_number(j, "p50", (double)s.late_p50 * 1e-3);
    drths_json_number(j, "p99", (double)s.late_p99 * 1e-3);
    drths_json_number(j, "p999", (double)s.late_p999 * 1e-3);
    drths_json_number(j, "max", (double)s.late_max * 1e-3);
    drths_json_int(j, "later_than_half_dt", (int64_t)s.later_than_half_dt);
    drths_json_object_end(j);
    drths_json_object_end(j);
}

int drths_numsite_write_summary(const drths_numsite_t *s, const drths_hybrid_t *h, const char *dir,
                                const drths_numsite_outcome_t *o, drths_error_t *err)
{
    char path[4096];
    drths_json_t j;
    int r = drths_runfolder_json_open(&j, dir, "summary.json", path, sizeof path, err);
    if (r)
        return r;
    head_json(&j, s, o);
    socket_json(&j, s, o);
    if (h) {
        loop_json(&j, s, h);
        response_json(&j, s->exp, h);
        smith_json(&j, h);
        stability_json(&j, h);
        epochs_json(&j, h);
    }
    if (h && o->steptime)
        step_timing_json(&j, o->steptime);
    if (o->links && o->n_links > 1)
        links_json(&j, o, h);
    return drths_json_file_close(&j, path, err);
}

void drths_numsite_print_start(FILE *f, const drths_numsite_t *s, const char *key_path,
                               const char *key_id, const char *dir, int kernel_filter,
                               int probe_only)
{
    fprintf(f, "drths-numerical: %s of '%s' at %.0f Hz\n",
            probe_only ? "connectivity test (--probe-only)" : "hybrid run", s->exp->name,
            s->exp->rate_hz);
    fprintf(f, "peer: actuator site at %s\n", s->peer_text);
    if (kernel_filter)
        fprintf(f, "kernel filter: only session %016" PRIx64 " from %s reaches the site\n",
                s->session_id, s->peer_text);
    if (s->wait_spin_ns == INT64_MAX)
        fprintf(f, "wait: the real-time thread busy-polls for the feedback (--wait spin)\n");
    else if (s->wait_spin_ns > 0)
        fprintf(f, "wait: busy-polls %.0f us for the feedback, then sleeps (--wait hybrid)\n",
                (double)s->wait_spin_ns * 1e-3);
    if (key_path)
        fprintf(f, "key: %s (key id %s)\n", key_path, key_id);
    fprintf(f, "run folder: %s\n", dir);
    fflush(f);
}

void drths_numsite_report_end(FILE *f, drths_site_t *shell, const drths_numsite_t *s,
                              const drths_hybrid_t *h, const char *dir,
                              const drths_numsite_outcome_t *o)
{
    drths_error_t err = {{0}};
    if (drths_numsite_write_summary(s, h, dir, o, &err))
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
    char text[800];
    snprintf(text, sizeof text, "run finished: %s (exit %d)", o->exit_reason, o->exit_code);
    fprintf(f, "%s\n", text);
    drths_site_monitor_end(shell, text);
    drths_numsite_print_end(f, s, h, o->recorder_dropped);
    fprintf(f, "  run folder: %s\n", dir);
}

/* ---- the printed lines ------------------------------------------------------------------ */

void drths_numsite_print_reference(FILE *f, const drths_reference_summary_t *s, const char *dir)
{
    fprintf(f, "structure: %d degrees of freedom\n  mode  frequency (Hz)  damping (%%)\n", s->n);
    for (int i = 0; i < s->n && i < 10; i++)
        fprintf(f, "  %4d  %14.4f  %11.3f\n", i + 1, s->freq_hz[i], 100.0 * s->zeta[i]);
    if (s->n > 10)
        fprintf(f, "  ... (%d modes in summary.json)\n", s->n);
    fprintf(f, "  floor  peak disp (mm)  RMS disp (mm)  peak abs accel (m/s2)\n");
    for (int i = 0; i < s->n && i < 10; i++)
        fprintf(f, "  %5d  %14.3f  %13.3f  %21.3f\n", i + 1, 1e3 * s->peak_x_m[i],
                1e3 * s->rms_x_m[i], s->peak_a_m_s2[i]);
    if (s->n_dampers > 1) {
        /* Several dampers (sites): one line each, in the file's order (summary.json names them). */
        for (int k = 0; k < s->n_dampers; k++)
            fprintf(f,
                    "  damper %d (floor %d): peak force %.1f kN, peak stroke %.2f mm, peak "
                    "velocity %.1f mm/s\n",
                    k + 1, s->dampers[k].floor, 1e-3 * s->dampers[k].peak_force_N,
                    1e3 * s->dampers[k].peak_disp_m, 1e3 * s->dampers[k].peak_vel_m_s);
        fprintf(f, "  damper command %.3g\n", s->command);
    } else {
        fprintf(f,
                "  damper: peak force %.1f kN, peak stroke %.2f mm, peak velocity %.1f mm/s, "
                "command %.3g\n",
                1e-3 * s->peak_force_N, 1e3 * s->peak_damper_disp_m, 1e3 * s->peak_damper_vel_m_s,
                s->command);
    }
    fprintf(f, "  %ld steps (%.2f s simulated) in %.3f s wall time (%.3f s per simulated s)\n",
            s->steps, s->duration_s, s->wall_s, s->wall_s / s->duration_s);
    fprintf(f, "  written: %s/numerical.csv, %s/summary.json\n", dir, dir);
}

void drths_numsite_print_probes(FILE *f, const drths_numsite_t *s)
{
    const drths_rtt_summary_t *r = &s->probe_summary;
    fprintf(f, "probes: %llu sent, %llu answered (%.1f %% lost)\n",
            (unsigned long long)s->probes_sent, (unsigned long long)s->probes_answered,
            100.0 * (double)(s->probes_sent - s->probes_answered) / (double)s->probes_sent);
    fprintf(f, "  round trip  min %.3f  p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f ms\n",
            (double)r->min_ns * 1e-6, (double)r->p50_ns * 1e-6, (double)r->p99_ns * 1e-6,
            (double)r->p999_ns * 1e-6, (double)r->max_ns * 1e-6);
    fprintf(f, "              min %lld  p50 %lld  p99 %lld  p99.9 %lld  max %lld ticks\n",
            (long long)r->min_ticks, (long long)r->p50_ticks, (long long)r->p99_ticks,
            (long long)r->p999_ticks, (long long)r->max_ticks);
    const drths_lchoice_t *l = &s->lchoice;
    fprintf(f, "loop delay L = %u ticks (%.3f ms)", l->L, (double)l->L * (double)s->dt_ns * 1e-6);
    if (l->fixed)
        fprintf(f, ": fixed by link.loop_delay_ticks (the measurements ask for %u)%s\n", l->L_auto,
                l->L < l->L_auto ? " -- WARNING: below what the link needs" : "");
    else
        fprintf(f, ": round trip q%g %u + wake margins %u + %u + safety %u\n",
                s->exp->link.quantile, l->rtt_ticks, l->wake_local_ticks, l->wake_peer_ticks,
                l->safety_ticks);
}

void drths_numsite_print_probe_only(FILE *f, const drths_numsite_t *s)
{
    const drths_experiment_t *e = s->exp;
    double dt_ms = (double)s->dt_ns * 1e-6,
           every_ms = (double)drths_numsite_probe_interval_ns(s) * 1e-6;
    uint64_t lost = s->probes_sent - s->probes_answered;
    fprintf(f,
            "  loss: %llu probes (%.3f %%) in %llu bursts, the longest %llu probes (%.1f ms); "
            "%llu echoes reordered\n",
            (unsigned long long)lost, 100.0 * (double)lost / (double)s->probes_sent,
            (unsigned long long)s->probe_loss_bursts, (unsigned long long)s->probe_loss_longest,
            (double)s->probe_loss_longest * every_ms, (unsigned long long)s->probes_reordered);
    int r = e->link.redundancy;
    double reach_ms = (double)drths_wire_offset(r - 1) * dt_ms;
    double budget_ms = (double)e->physical.max_concealed_ticks * dt_ms;
    double burst_ms = (double)s->probe_loss_longest * every_ms;
    fprintf(f,
            "  repair: each command travels in %d datagrams reaching back %.1f ms "
            "(link.redundancy); a longer burst is concealed, for at most %.0f ms before HOLD "
            "(physical.max_concealed_ms)\n",
            r, reach_ms, budget_ms);
    const char *verdict = burst_ms <= reach_ms ? "GO: every loss burst seen is repaired"
                          : burst_ms < budget_ms
                              ? "GO, with concealment: the longest burst is concealed, not repaired"
                              : "NO-GO: the longest burst exceeds the concealment budget (HOLD)";
    fprintf(f, "verdict: %s; L = %u ticks (%.1f ms) from this link\n", verdict, s->lchoice.L,
            (double)s->lchoice.L * dt_ms);
}

/* One link's end: the sentence as for one link, with several named by the link's site. */
static int end_reason_one(const drths_hybrid_t *h, int by_monitor, double peer_timeout_s, char *out,
                          size_t cap);

int drths_numsite_end_reason(const drths_hybrid_t *h, int by_monitor, double peer_timeout_s,
                             char *out, size_t cap)
{
    if (h->n_links <= 1 || h->end_link < 0 || h->end_link >= h->n_links ||
        h->end == DRTHS_HYBRID_END_OF_RECORD)
        return end_reason_one(h, by_monitor, peer_timeout_s, out, cap);
    char one[700];
    int code = end_reason_one(h, by_monitor, (double)drths_hybrid_link_timeout_ns(h) * 1e-9, one,
                              sizeof one);
    snprintf(out, cap, "site %s stopped the test (every other site was sent ABORT): %s",
             h->lk[h->end_link].name, one);
    return code;
}

static int end_reason_one(const drths_hybrid_t *h, int by_monitor, double peer_timeout_s, char *out,
                          size_t cap)
{
    const int li = h->end_link >= 0 && h->end_link < h->n_links ? h->end_link : 0;
    const drths_hybrid_link_t *l = h->lk ? &h->lk[li] : NULL;
    const drths_hybrid_counters_t *lc = l ? &l->c : &h->c;
    /* A run its records ended (the disk refused a write) is stopped as by a signal; what tells
     * it apart is the reason its CLOSE gave the actuator site. */
    if (h->end == DRTHS_HYBRID_SIGNAL && h->close_reason == DRTHS_STOP_RECORDS) {
        snprintf(out, cap, "records: %s (the actuator site was told: ABORT RECORDS)", h->end_text);
        return DRTHS_EXIT_FAILED;
    }
    switch (h->end) {
    case DRTHS_HYBRID_END_OF_RECORD:
        snprintf(out, cap, "end of record");
        return 0;
    case DRTHS_HYBRID_PEER_ABORT:
        snprintf(out, cap, "actuator site aborted: %s: %s", drths_stop_reason_name(h->end_reason),
                 h->end_text);
        break;
    case DRTHS_HYBRID_PEER_LOST:
        /* What this site knows of the other's end: the ABORT that names the cause may have been
         * lost (a blackout), but FEEDBACKs flagged HOLD that came through say the actuator site
         * held; without them, the silence alone says it may have stopped. */
        if (lc->phys_hold)
            snprintf(out, cap,
                     "peer lost: no valid datagram from the actuator site for %g s; it was in "
                     "HOLD by tick %llu (its FEEDBACKs say so) and its ABORT, which names the "
                     "cause, did not arrive: the cause is in the actuator site's log and "
                     "summary.json",
                     peer_timeout_s, (unsigned long long)lc->phys_hold_tick);
        else
            snprintf(out, cap,
                     "peer lost: no valid datagram from the actuator site for %g s after its "
                     "FEEDBACK for tick %llu; the actuator site may have stopped (it holds and "
                     "sends ABORT when its commands stop for physical.max_concealed_ms, and an "
                     "ABORT can be lost with them) or the link is down",
                     peer_timeout_s, (unsigned long long)(l ? l->fb_newest_tick : 0));
        break;
    case DRTHS_HYBRID_NO_START:
        snprintf(out, cap, "peer lost: no FEEDBACK from the actuator site within %g s of EPOCH 1",
                 (double)h->p.start_timeout_ns * 1e-9);
        break;
    case DRTHS_HYBRID_STABILITY:
        snprintf(out, cap, "%s", h->end_text);
        break;
    case DRTHS_HYBRID_SIGNAL:
    case DRTHS_HYBRID_RUNNING:
        snprintf(out, cap, "%s", by_monitor ? "stopped from the monitor" : "stopped by signal");
        break;
    }
    return DRTHS_EXIT_FAILED;
}

void drths_numsite_print_end(FILE *f, const drths_numsite_t *s, const drths_hybrid_t *h,
                             uint64_t dropped)
{
    if (h) {
        drths_rtt_summary_t rs;
        drths_rtt_summary_from_hist(&h->lk[0].rtt.run, s->dt_ns, &rs);
        fprintf(f,
                "  steps %llu of %ld, concealed feedback %llu (max %llu in a row), late "
                "feedback %llu\n",
                (unsigned long long)h->c.rows, h->ns.steps, (unsigned long long)h->c.concealed,
                (unsigned long long)h->c.max_consecutive_concealed,
                (unsigned long long)h->c.fb_late);
        if (rs.count)
            fprintf(f, "  round trip p50 %.3f ms, p99 %.3f ms, max %.3f ms (%llu echoes)\n",
                    (double)rs.p50_ns * 1e-6, (double)rs.p99_ns * 1e-6, (double)rs.max_ns * 1e-6,
                    (unsigned long long)rs.count);
        else
            fprintf(f, "  round trip: no echo measured\n");
        if (h->c.epoch_changes)
            fprintf(f,
                    "  epochs: %llu changes, L from %u to %u ticks, %llu transition steps, "
                    "final L %u\n",
                    (unsigned long long)h->c.epoch_changes, h->c.L_min_seen, h->c.L_max_seen,
                    (unsigned long long)h->c.transition, h->L);
        if (h->adaptive) {
            const drths_smith_t *sm = &h->lk[0].smith;
            const drths_smith_member_t *lb = drths_smith_leader(sm);
            fprintf(f,
                    "  adaptive Smith: alpha x%.3f, c0 x%.3f, c1 x%.3f, gamma,beta x%.3f, n x%.3f, "
                    "force gain %.4f, error %.2f %% of the force, %llu updates (%llu low "
                    "signal, %llu in the dead zone); led by the identifier started at n "
                    "x%g (%d in the bank, %llu lead changes)\n",
                    drths_smith_scale(sm, NULL, DRTHS_SMITH_P_ALPHA),
                    drths_smith_scale(sm, NULL, DRTHS_SMITH_P_C0),
                    drths_smith_scale(sm, NULL, DRTHS_SMITH_P_C1),
                    drths_smith_scale(sm, NULL, DRTHS_SMITH_P_GB),
                    drths_smith_scale(sm, NULL, DRTHS_SMITH_P_N), drths_smith_gain(sm),
                    100.0 * drths_smith_error_rel(sm, NULL), (unsigned long long)lb->st.updates,
                    (unsigned long long)lb->st.low_signal, (unsigned long long)lb->st.dead_zone,
                    lb->n_start, sm->nm, (unsigned long long)sm->lead_changes);
            if (drths_smith_fallback_reason(sm))
                fprintf(f,
                        "  WARNING: the adaptive Smith predictor could not identify the damper "
                        "and fell back to the nominal model at step %lld (%s)\n",
                        (long long)sm->st.fallback_step, drths_smith_fallback_reason(sm));
        }
        if (dropped)
            fprintf(f, "  WARNING: %llu rows lost by the recorder: numerical.csv is incomplete\n",
                    (unsigned long long)dropped);
    }
    char out[600] = "";
    size_t n = 0;
    for (int r = 1; r < DRTHS_REJECT_COUNT && n < sizeof out; r++)
        if (s->rx.rejects[r])
            n += (size_t)snprintf(out + n, sizeof out - n, "%s%s %llu", n ? ", " : "",
                                  drths_reject_name((drths_reject_t)r),
                                  (unsigned long long)s->rx.rejects[r]);
    if (s->wrong_source && n < sizeof out)
        n += (size_t)snprintf(out + n, sizeof out - n, "%sfrom other addresses %llu", n ? ", " : "",
                              (unsigned long long)s->wrong_source);
    fprintf(f, "  rejected datagrams: %s\n", n ? out : "none");
}

/* ---- the status line and the monitor's frames ------------------------------------------- */

int drths_numsite_status_text(const drths_numsite_t *s, int nl, const drths_hybrid_t *h, char *buf,
                              size_t cap)
{
    long step = atomic_load_explicit(&s->pub_step, memory_order_relaxed);
    unsigned long long conc = atomic_load_explicit(&s->pub_concealed, memory_order_relaxed);
    int64_t rtt = atomic_load_explicit(&s->pub_rtt_ns, memory_order_relaxed);
    double pct = h->ns.steps > 0 ? 100.0 * (double)step / (double)h->ns.steps : 0.0;
    if (nl <= 1)
        return snprintf(buf, cap, "  step %ld of %ld (%.0f %%), concealed %llu, rtt %.3f ms   ",
                        step, h->ns.steps, pct, conc, (double)rtt * 1e-6);
    /* Every link: the far one is the one to watch, and link 0 alone hid it. */
    int n = snprintf(buf, cap, "  step %ld of %ld (%.0f %%), concealed %llu:", step, h->ns.steps,
                     pct, conc);
    for (int i = 0; i < nl && n >= 0 && (size_t)n < cap; i++) {
        int64_t r =
            atomic_load_explicit(&s[i].pub_rtt_ns, i ? memory_order_acquire : memory_order_relaxed);
        unsigned long long c = atomic_load_explicit(&s[i].pub_link_concealed, memory_order_acquire);
        n += snprintf(buf + n, cap - (size_t)n, "%s %s %.3f ms %llu", i ? "," : "", s[i].name,
                      (double)r * 1e-6, c);
    }
    if (n >= 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "   ");
    return n < 0 ? n : ((size_t)n < cap ? n : (int)cap - 1);
}

void drths_numsite_frame_counters(const drths_numsite_t *s, int nl, drths_telemetry_frame_t *f)
{
    f->late = atomic_load_explicit(&s->pub_late, memory_order_relaxed);
    f->concealed = atomic_load_explicit(&s->pub_concealed, memory_order_relaxed);
    f->rejected = atomic_load_explicit(&s->pub_rejected, memory_order_relaxed);
    /* The links are named from the first frame on (the page knows which sites to expect
     * before the run); link i drives damper i (hybrid.h). */
    f->n_links = nl > 1 ? (nl < DRTHS_TELEMETRY_MAX_LINKS ? nl : DRTHS_TELEMETRY_MAX_LINKS) : 0;
    for (int i = 0; i < f->n_links; i++) {
        drths_telemetry_link_t *l = &f->link[i];
        snprintf(l->site, sizeof l->site, "%s", s[i].name);
        l->first = i < DRTHS_TELEMETRY_MAX_CHANNELS ? i : 0;
        l->n_channels = i < DRTHS_TELEMETRY_MAX_CHANNELS;
        l->concealed = atomic_load_explicit(&s[i].pub_link_concealed, memory_order_acquire);
        l->late = atomic_load_explicit(&s[i].pub_link_late, memory_order_relaxed);
        l->rejected = atomic_load_explicit(&s[i].pub_link_rejected, memory_order_relaxed);
    }
}

/* The frame's signals, in the order of drths_numsite_frame_map_t.col. */
static const char *const frame_columns[DRTHS_NUMSITE_FRAME_SIGNALS] = {
    "step",         "time_s", "damper_disp_m",   "damper_command", "force_measured_N",
    "force_used_N", "rtt_ms", "loop_delay_ticks"};

static int column(const drths_hybrid_t *h, const char *name)
{
    for (int c = 0; c < h->ncols; c++)
        if (strcmp(h->colnames[c], name) == 0)
            return c;
    return -1;
}

void drths_numsite_frame_map(drths_numsite_frame_map_t *m, const drths_hybrid_t *h)
{
    memset(m, 0, sizeof *m);
    for (int k = 0; k < DRTHS_NUMSITE_FRAME_SIGNALS; k++)
        m->col[k] = column(h, frame_columns[k]);
    if (h->n_links < 2)
        return;
    /* Several links: link i drives damper i (hybrid.h). */
    char name[96];
    m->n_links = h->n_links < DRTHS_TELEMETRY_MAX_LINKS ? h->n_links : DRTHS_TELEMETRY_MAX_LINKS;
    for (int i = 0; i < m->n_links; i++) {
        snprintf(name, sizeof name, "%s.rtt_ms", h->lk[i].name);
        m->link_rtt[i] = column(h, name);
        snprintf(name, sizeof name, "%s.force_measured_N", h->lk[i].name);
        m->link_force[i] = column(h, name);
    }
    m->n_channels = h->ns.n_dampers < DRTHS_TELEMETRY_MAX_CHANNELS ? h->ns.n_dampers
                                                                    : DRTHS_TELEMETRY_MAX_CHANNELS;
    for (int k = 0; k < m->n_channels; k++) {
        snprintf(name, sizeof name, "damper%d_disp_m", k + 1);
        m->ch_disp[k] = column(h, name);
        snprintf(name, sizeof name, "damper%d_force_N", k + 1);
        m->ch_force[k] = column(h, name);
        snprintf(name, sizeof name, "damper%d_command", k + 1);
        m->ch_cmd[k] = column(h, name);
    }
}

static double at(const double *row, int c)
{
    return c >= 0 ? row[c] : NAN;
}

void drths_numsite_frame_row(const drths_numsite_frame_map_t *m, const double *row,
                             drths_telemetry_frame_t *f)
{
    double v[DRTHS_NUMSITE_FRAME_SIGNALS];
    for (int k = 0; k < DRTHS_NUMSITE_FRAME_SIGNALS; k++)
        v[k] = at(row, m->col[k]);
    f->tick = (int64_t)v[0];
    f->time_s = v[1];
    f->cmd_disp_m = v[2];
    f->damper_cmd = v[3];
    f->meas_force_N = v[4];
    f->used_force_N = v[5];
    f->rtt_ms = v[6];
    f->L_ticks = v[7];
    for (int i = 0; i < m->n_links; i++) {
        f->link[i].rtt_ms = at(row, m->link_rtt[i]);
        f->link[i].meas_force_N = at(row, m->link_force[i]);
    }
    for (int k = 0; k < m->n_channels; k++) {
        f->ch[k].cmd_disp_m = at(row, m->ch_disp[k]);
        f->ch[k].used_force_N = at(row, m->ch_force[k]);
        f->ch[k].damper_cmd = at(row, m->ch_cmd[k]);
    }
    if (m->n_links > 0) { /* the frame's first signals: damper 1 and link 1 */
        f->cmd_disp_m = f->ch[0].cmd_disp_m;
        f->damper_cmd = f->ch[0].damper_cmd;
        f->used_force_N = f->ch[0].used_force_N;
        f->meas_force_N = f->link[0].meas_force_N;
        f->rtt_ms = f->link[0].rtt_ms;
    }
    f->smith_N = f->used_force_N - f->meas_force_N;
}
