/* summary.json of the actuator site (drths_physsite_write_summary, declared in
 * site-physical/physsite.h): one JSON object written after the RT thread has ended, from the
 * site's counters, the actuator's state and the experiment. Each section below writes one
 * group of members, in the order they appear in the file. init-only throughout. */
#include "site-physical/physsite.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/platform/cli.h"
#include "common/platform/json.h"
#include "common/platform/metrics.h"
#include "common/platform/stats.h"

static double us(int64_t ns)
{
    return (double)ns * 1e-3;
}

/* What ran, with whom, for how long and how it ended. */
static void write_run(const drths_physsite_t *ps, drths_json_t *j)
{
    const drths_experiment_t *exp = ps->cfg.exp;
    const drths_actuator_t *a = &ps->act;
    char fphex[65], text[80];
    drths_experiment_fingerprint_hex(ps->cfg.fingerprint, fphex);
    drths_json_string(j, "kind", "hybrid-physical");
    drths_json_string(j, "version", drths_version());
    drths_json_string(j, "experiment", exp->name);
    drths_json_string(j, "fingerprint", fphex);
    drths_json_number(j, "rate_hz", exp->rate_hz);
    drths_json_number(j, "dt_s", 1.0 / exp->rate_hz);
    if (ps->have_session) {
        snprintf(text, sizeof text, "%016" PRIx64, ps->session_id);
        drths_json_string(j, "session", text);
        drths_addr_format(&ps->peer, text, sizeof text);
        drths_json_string(j, "numerical_site", text);
    }
    drths_json_int(j, "exit_code", ps->exit_code);
    drths_json_string(j, "exit_reason", ps->exit_reason);
    /* Whether physical.csv holds every row the loop produced (false: the recorder's ring
     * overflowed or the disk refused a write, records_lost_rows were lost, and the run exited
     * 1). */
    drths_json_bool(j, "records_complete", ps->rec_dropped == 0 && !(ps->rec && ps->rec->failed));
    drths_json_int(j, "records_lost_rows", (int64_t)ps->rec_dropped);
    drths_json_int(j, "ticks", (int64_t)a->c.ticks);
    drths_json_number(j, "duration_s", (double)a->c.ticks / exp->rate_hz);
    drths_json_number(j, "wall_time_s",
                      ps->run_end_ns > ps->run_start_ns
                          ? (double)(ps->run_end_ns - ps->run_start_ns) * 1e-9
                          : 0.0);
    drths_json_int(j, "loop_delay_ticks", a->L);
    drths_json_number(j, "loop_delay_ms", (double)a->L * 1e3 / exp->rate_hz);
    drths_json_int(j, "epochs", (int64_t)a->c.epochs);
    if (ps->provenance)
        drths_provenance_json(j, "provenance", ps->provenance);
}

/* "commands": what the playout buffer received, applied and concealed. */
static void write_commands(const drths_actuator_counters_t *c, drths_json_t *j)
{
    drths_json_object_begin(j, "commands");
    drths_json_int(j, "received", (int64_t)c->commands);
    drths_json_int(j, "applied", (int64_t)c->applied);
    drths_json_int(j, "rest_ticks", (int64_t)c->rest_ticks);
    drths_json_int(j, "late", (int64_t)c->late);
    drths_json_int(j, "duplicate", (int64_t)c->duplicates);
    drths_json_int(j, "too_far", (int64_t)c->too_far);
    drths_json_int(j, "reordered", (int64_t)c->reordered);
    drths_json_int(j, "from_redundancy", (int64_t)c->from_redundancy);
    drths_json_int(j, "concealed", (int64_t)c->concealed);
    drths_json_int(j, "max_consecutive_concealed", (int64_t)c->max_consecutive_concealed);
    drths_json_int(j, "delayed", (int64_t)c->delayed);
    drths_json_int(j, "max_lag_ticks", (int64_t)c->max_lag_ticks);
    drths_json_int(j, "catchup_ticks", (int64_t)c->catchup_ticks);
    drths_json_int(j, "rejoins", (int64_t)c->rejoins);
    drths_json_number(j, "max_rejoin_offset_m", c->max_rejoin_offset_m);
    drths_json_int(j, "wrong_channel_count", (int64_t)c->bad_commands);
    drths_json_object_end(j);
}

/* "hold": whether the run ended in HOLD, why (`reason`: the sentence), and how the ramp went. */
static void write_hold(const drths_actuator_t *a, const char *reason, drths_json_t *j)
{
    drths_json_object_begin(j, "hold");
    drths_json_bool(j, "active", a->hold);
    if (a->hold) {
        drths_json_string(j, "reason_code", drths_stop_reason_name(a->hold_reason));
        drths_json_string(j, "reason", reason);
        drths_json_int(j, "ticks", (int64_t)a->c.hold_ticks);
        drths_json_int(j, "first_tick", (int64_t)a->hold_first_tick);
        drths_json_string(j, "mode", drths_hold_mode_name(a->p.hold_mode));
        drths_json_number(j, "target_m", a->hold_target_m);
        drths_json_number(j, "ramp_rate_m_s", a->p.ramp_rate_m_s);
        drths_json_number(j, "max_drive_step_m", a->hold_max_step_m);
        drths_json_number(j, "max_drive_step_allowed_m", a->p.ramp_rate_m_s / a->p.rate_hz);
        /* Whether the safe state reached the outputs: a settled ramp says where the drive was
         * sent, not that the DAQ wrote it. */
        drths_json_bool(j, "safe_state_written", a->c.safe_write_failures == 0);
        drths_json_int(j, "safe_state_writes", (int64_t)a->c.safe_writes);
        drths_json_int(j, "safe_state_write_failures", (int64_t)a->c.safe_write_failures);
        drths_json_bool(j, "settled", a->hold_settled);
        if (a->hold_settled)
            drths_json_int(j, "settled_tick", (int64_t)a->settled_tick);
    }
    drths_json_object_end(j);
}

/* "stability": the stability monitor's settings and the steepest amplitude growth it fitted
 * (null when it never had windows to fit: off, or no oscillation above its amplitude floor),
 * the margin a run left below stability_growth_per_s. */
static void write_stability(const drths_actuator_t *a, drths_json_t *j)
{
    drths_json_object_begin(j, "stability");
    drths_json_bool(j, "enabled", a->stab_win_ticks > 0);
    if (a->stab_win_ticks) {
        drths_json_number(j, "window_s", a->p.stab_window_s);
        drths_json_int(j, "windows", a->p.stab_windows);
        drths_json_number(j, "growth_per_s", a->p.stab_growth_per_s);
        drths_json_number(j, "record_end_s", a->p.stab_quiet_after_s);
        drths_json_int(j, "windows_done", (int64_t)a->stab_done);
        drths_json_number(j, "max_growth_per_s", a->stab_max_growth);
    }
    drths_json_object_end(j);
}

/* "rejects" by reason (only the reasons that occurred), then the kernel filter's drops. */
static void write_rejects(const drths_physsite_t *ps, drths_json_t *j)
{
    drths_json_object_begin(j, "rejects");
    for (int r = 1; r < DRTHS_REJECT_COUNT; r++) {
        uint64_t n = ps->rx.rejects[r] + ps->pre_rejects[r];
        if (n)
            drths_json_int(j, drths_reject_name((drths_reject_t)r), (int64_t)n);
    }
    if (ps->wrong_source)
        drths_json_int(j, "WRONG_SOURCE", (int64_t)ps->wrong_source);
    if (ps->other_session)
        drths_json_int(j, "OTHER_SESSION", (int64_t)ps->other_session);
    drths_json_object_end(j);
    /* HELLOs answered (half-open sessions, PROTOCOL.md section 7.4): more than one before the
     * run means replayed HELLOs, or numerical sites that started and went away. */
    if (!ps->cfg.source) {
        drths_json_object_begin(j, "half_open");
        drths_json_int(j, "answered", (int64_t)ps->pending_opened);
        drths_json_int(j, "pushed_out", (int64_t)ps->pending_evicted);
        drths_json_object_end(j);
    }
    /* Not by reason: what the kernel filter refused plus any receive-buffer overflow (a
     * command source such as OpenFresco has no UDP socket). */
    if (!ps->cfg.source) {
        drths_json_bool(j, "kernel_filter", ps->cfg.kernel_filter);
        if (ps->kernel_drops >= 0)
            drths_json_int(j, "kernel_drops", ps->kernel_drops);
    }
}

/* "tick_lateness_us" and "command_lead_ms": the wake-ups and how early commands arrived. */
static void write_timing(const drths_physsite_t *ps, drths_json_t *j)
{
    const drths_actuator_t *a = &ps->act;
    const drths_hist_t *lh = &a->lateness_ns;
    drths_json_object_begin(j, "tick_lateness_us");
    if (lh->count) {
        drths_json_number(j, "p50", us(drths_hist_quantile(lh, 0.5)));
        drths_json_number(j, "p99", us(drths_hist_quantile(lh, 0.99)));
        drths_json_number(j, "p999", us(drths_hist_quantile(lh, 0.999)));
        drths_json_number(j, "max", us(lh->max));
    }
    drths_json_int(j, "later_than_half_dt", (int64_t)a->c.late_wakeups);
    /* cyclictest's rule (actuator.h): what tools/bench compares with cyclictest. */
    drths_json_int(j, "wakeups", (int64_t)a->c.wakeups);
    drths_json_int(j, "wakeups_later_than_half_dt", (int64_t)a->c.late_wakeups_cyc);
    drths_json_int(j, "overrun_ticks", (int64_t)a->c.overrun_ticks);
    drths_json_number(j, "spin_us", (double)ps->cfg.tick_spin_ns * 1e-3);
    drths_json_object_end(j);

    const drths_hist_t *ld = &a->lead_ns;
    drths_json_object_begin(j, "command_lead_ms");
    if (ld->count) {
        drths_json_number(j, "p50", (double)drths_hist_quantile(ld, 0.5) * 1e-6);
        drths_json_number(j, "min", (double)ld->min * 1e-6);
    }
    drths_json_object_end(j);
}

/* "adaptive" (in "tracking"): the adaptive compensator's bounds on its four factors, the factors
 * at the end, and how long each sat at a bound: ticks (of the identification's observed ticks)
 * and fraction. A factor at its bound for much of a run means the plant is outside the range
 * the bounds were derived from (docs/experiment-file.md, actuator.adaptive_range). */
static void write_adaptive(const drths_comp_t *c, drths_json_t *j)
{
    const drths_comp_adapt_t *ad = &c->ad;
    drths_json_object_begin(j, "adaptive");
    drths_json_string(j, "bounds_from", ad->bound > 0.0 ? "adaptive_bound" : "adaptive_range");
    drths_json_int(j, "observed_ticks", (int64_t)ad->observed);
    drths_json_int(j, "updates", (int64_t)ad->updates);
    drths_json_int(j, "clamped", (int64_t)ad->clamped);
    drths_json_int(j, "fallbacks", (int64_t)ad->fallbacks);
    double worst = 0.0;
    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof name, "theta%d", k);
        drths_json_object_begin(j, name);
        drths_json_number(j, "min", ad->lo[k]);
        drths_json_number(j, "max", ad->hi[k]);
        drths_json_number(j, "final", c->theta[k]);
        drths_json_int(j, "at_bound_ticks", (int64_t)ad->at_bound_ticks[k]);
        const double f = ad->observed ? (double)ad->at_bound_ticks[k] / (double)ad->observed : 0.0;
        drths_json_number(j, "at_bound_fraction", f);
        if (f > worst)
            worst = f;
        drths_json_object_end(j);
    }
    drths_json_number(j, "max_at_bound_fraction", worst);
    drths_json_object_end(j);
}

/* "tracking_rms_error_pct" and "tracking": measured against desired displacement. */
static void write_tracking(const drths_actuator_t *a, drths_json_t *j)
{
    drths_json_number(j, "tracking_rms_error_pct", drths_actuator_tracking_rms_pct(a));
    drths_json_object_begin(j, "tracking");
    drths_json_string(j, "compensation", drths_compensation_name(a->p.compensation));
    drths_json_int(j, "lookahead_ticks", a->lookahead);
    drths_json_int(j, "ticks", (int64_t)a->c.tracked);
    drths_json_number(j, "rms_error_pct", drths_actuator_tracking_rms_pct(a));
    drths_json_number(j, "tracking_indicator_m2", drths_tracking_ti(&a->track));
    drths_json_number(j, "max_abs_error_m", drths_tracking_max_err(&a->track));
    drths_json_int(j, "preview_completed_ticks", (int64_t)a->cs.c.preview_extended);
    drths_json_int(j, "extrapolated_ticks", (int64_t)a->comp.extrapolated_ticks);
    drths_json_int(j, "derivative_limited_ticks", (int64_t)a->comp.limited_ticks);
    if (a->p.compensation == DRTHS_COMPENSATION_ADAPTIVE)
        write_adaptive(&a->comp, j);
    drths_json_object_end(j);
}

/* "envelope": the drive envelope this channel's DAQ admitted every drive through
 * (site-physical/envelope.h): its four limits, the largest velocity, acceleration and offset
 * it admitted, the margin left (1 - the largest fraction of any bound used) and which bound
 * that was, the drives admitted and refused, and the first refusal. drths-report recomputes the
 * same from physical.csv (docs/report.md, "The drive"). */
static void write_envelope(const drths_daq_t *d, drths_json_t *j)
{
    const drths_envelope_t *e = &d->env;
    drths_json_object_begin(j, "envelope");
    drths_json_bool(j, "set", d->env_set);
    if (d->env_set) {
        const drths_drive_limits_t lim = {e->lim.position_m, e->lim.velocity_m_s,
                                          e->lim.acceleration_m_s2, e->lim.offset_m};
        drths_drive_limits_json(j, &lim);
        drths_json_number(j, "max_velocity_m_s", e->max_velocity_m_s);
        drths_json_number(j, "max_acceleration_m_s2", e->max_acceleration_m_s2);
        drths_json_number(j, "max_offset_m", e->max_offset_m);
        drths_json_number(j, "margin", 1.0 - e->max_use);
        /* The bound closest to its limit; "" before any drive was admitted. */
        drths_json_string(j, "margin_bound",
                          e->admitted ? drths_envelope_field(e->max_use_bound) : "");
        drths_json_int(j, "admitted", (int64_t)e->admitted);
        drths_json_int(j, "refused", (int64_t)e->refused);
        if (e->refused) {
            const drths_envelope_violation_t *v = &e->first_refusal;
            drths_json_object_begin(j, "first_refusal");
            drths_json_string(j, "bound",
                              v->bound == DRTHS_ENV_NOT_FINITE ? "not_finite"
                                                               : drths_envelope_field(v->bound));
            drths_json_number(j, "value", v->value);
            drths_json_number(j, "limit", v->limit);
            drths_json_number(j, "drive_m", v->drive_m);
            drths_json_number(j, "command_m", v->command_m);
            drths_json_object_end(j);
        }
    }
    drths_json_object_end(j);
}

/* "channels" (several actuator channels only; the members above are the first channel's): each
 * channel's name, specimen, limits, tracking, HOLD and DAQ counts, in the order of
 * physical.channels (channel i took element i of the trial displacement vector). */
static void write_channels(drths_physsite_t *ps, drths_json_t *j)
{
    if (ps->n_channels < 2)
        return;
    const drths_experiment_t *exp = ps->cfg.exp;
    drths_json_array_begin(j, "channels");
    for (int i = 0; i < ps->n_channels; i++) {
        const drths_experiment_t *v = drths_experiment_actuator(exp, i);
        const drths_actuator_t *a = drths_physsite_act(ps, i);
        const drths_daq_t *d = drths_physsite_daq(ps, i);
        drths_json_object_begin(j, NULL);
        drths_json_int(j, "channel", i + 1);
        drths_json_string(j, "name", drths_experiment_actuator_name(exp, i));
        drths_json_int(j, "trial_element", i);
        drths_json_string(j, "damper", drths_damper_model_name(v->specimen.damper.model));
        if (v->specimen.damper.model == DRTHS_DAMPER_LINEAR_SPRING)
            drths_json_number(j, "stiffness_N_per_m", v->specimen.damper.stiffness_N_per_m);
        drths_json_string(j, "plant", drths_actuator_plant_name(v->actuator.plant));
        drths_json_object_begin(j, "limits");
        drths_json_number(j, "displacement_m", v->physical.limit_displacement_m);
        drths_json_number(j, "velocity_m_s", v->physical.limit_velocity_m_s);
        drths_json_number(j, "force_N", v->physical.limit_force_N);
        drths_json_number(j, "drive_m", v->physical.limit_drive_m);
        drths_json_number(j, "measured_displacement_m", v->physical.limit_measured_displacement_m);
        drths_json_object_end(j);
        write_envelope(d, j);
        write_tracking(a, j);
        char hold[DRTHS_WIRE_MAX_TEXT + 1];
        write_hold(a, drths_physsite_channel_hold_text(ps, i, hold, sizeof hold), j);
        drths_json_bool(j, "held_the_site", ps->hold_channel == i);
        drths_json_object_begin(j, "daq");
        drths_json_int(j, "errors", (int64_t)a->c.daq_errors);
        drths_json_int(j, "clamped_writes", (int64_t)d->n_clamped);
        drths_json_int(j, "saturated_reads", (int64_t)d->n_saturated);
        drths_json_object_end(j);
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
}

/* "daq", "envelope", the datagrams sent and "recorder". The DAQ counts are the site's, summed
 * over the channels (each channel's own are under "channels"), so that a DAQ fault on any
 * channel shows where a single-channel run shows it; the envelope is the first channel's. */
static void write_io(drths_physsite_t *ps, drths_json_t *j)
{
    uint64_t errors = 0, clamped = 0, saturated = 0;
    for (int i = 0; i < ps->n_channels; i++) {
        errors += drths_physsite_act(ps, i)->c.daq_errors;
        clamped += drths_physsite_daq(ps, i)->n_clamped;
        saturated += drths_physsite_daq(ps, i)->n_saturated;
    }
    drths_json_object_begin(j, "daq");
    drths_json_string(j, "backend", drths_daq_backend_name(ps->daq.backend));
    if (ps->daq.backend == DRTHS_DAQ_BACKEND_COMEDI)
        drths_json_string(j, "device", ps->daq.u.comedi.device);
    drths_json_int(j, "errors", (int64_t)errors);
    drths_json_int(j, "clamped_writes", (int64_t)clamped);
    drths_json_int(j, "saturated_reads", (int64_t)saturated);
    drths_json_object_end(j);
    /* The first channel's (each channel's own are under "channels"). */
    write_envelope(drths_physsite_daq(ps, 0), j);
    drths_json_int(j, "probes_answered", (int64_t)ps->probes_answered);
    drths_json_int(j, "feedback_sent", (int64_t)ps->feedback_sent);
    drths_json_int(j, "send_errors", (int64_t)ps->send_errors);
    if (ps->rec) {
        drths_recorder_json(j, "recorder", ps->rec);
    } else {
        drths_json_object_begin(j, "recorder");
        drths_json_int(j, "rows", (int64_t)ps->rec_written);
        drths_json_int(j, "dropped_rows", (int64_t)ps->rec_dropped);
        drths_json_object_end(j);
    }
}

/* "specimen" (the rehearsal's virtual one, as the experiment describes it) and "real_time"
 * (what the RT options achieved). */
static void write_setup(const drths_physsite_t *ps, drths_json_t *j)
{
    const drths_experiment_t *exp = drths_experiment_actuator(ps->cfg.exp, 0); /* its view */
    drths_json_object_begin(j, "specimen");
    drths_json_string(j, "damper", drths_damper_model_name(exp->specimen.damper.model));
    drths_json_string(j, "plant", drths_actuator_plant_name(exp->actuator.plant));
    drths_json_number(j, "noise_displacement_m", exp->actuator.noise_displacement_m);
    drths_json_number(j, "noise_force_N", exp->actuator.noise_force_N);
    drths_json_int(j, "adc_bits", exp->actuator.adc_bits);
    drths_json_int(j, "io_delay_ticks", exp->actuator.io_delay_ticks);
    drths_json_number(j, "rest_damper_command", ps->act.p.rest_damper_command);
    drths_json_object_end(j);

    drths_json_object_begin(j, "real_time");
    for (int i = 0; i < DRTHS_RT_NITEMS; i++) {
        const drths_rt_item_t *it = &ps->rt_report.item[i];
        if (it->what[0])
            drths_json_string(j, it->what, drths_rt_status_name(it->status));
    }
    drths_json_object_end(j);
}

int drths_physsite_write_summary(drths_physsite_t *ps, const char *path, drths_error_t *err)
{
    drths_json_t j;
    int r = drths_json_file_open(&j, path, err);
    if (r)
        return r;
    write_run(ps, &j);
    write_commands(&ps->act.c, &j);
    /* The site's HOLD sentence, which names the channel that held the others. */
    char hold[DRTHS_WIRE_MAX_TEXT + 1];
    write_hold(drths_physsite_hold_act(ps), drths_physsite_hold_text(ps, hold, sizeof hold), &j);
    write_stability(&ps->act, &j);
    write_rejects(ps, &j);
    write_timing(ps, &j);
    write_tracking(&ps->act, &j);
    write_io(ps, &j);
    write_setup(ps, &j);
    write_channels(ps, &j);
    if (ps->cfg.source && ps->cfg.source->summary)
        ps->cfg.source->summary(ps->cfg.source_ctx, ps, &j);
    return drths_json_file_close(&j, path, err);
}
