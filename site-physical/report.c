/* What the actuator site tells people about a run: the start-up lines describing the specimen,
 * the DAQ, the compensation and the limits; the end lines with the actuator's counters,
 * tracking and HOLD; the status line; the live monitor's frames. summary.json is written by
 * drths_physsite_write_summary. The printing functions write to the stream they are given
 * (main passes stdout). */
#include "site-physical/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

void drths_physsite_print_setup(FILE *f, const drths_physsite_t *ps)
{
    /* The first channel's view: with physical.channels its specimen, actuator and limits may
     * be its own (the lines below are the first channel's, then one line per channel). */
    const drths_experiment_t *e = drths_experiment_actuator(ps->cfg.exp, 0);
    fprintf(f, "  rate %g Hz, dt %.4g ms; watchdog %g ms, at most %d concealed ticks in a row\n",
           e->rate_hz, 1e3 / e->rate_hz, e->physical.watchdog_ms, e->physical.max_concealed_ticks);
    fprintf(f, "  specimen: %s damper, %s actuator, noise %g m / %g N, %s%d-tick I/O delay, rest "
           "damper command %g\n",
           drths_damper_model_name(e->specimen.damper.model),
           drths_actuator_plant_name(e->actuator.plant), e->actuator.noise_displacement_m,
           e->actuator.noise_force_N, e->actuator.adc_bits ? "" : "no quantisation, ",
           e->actuator.io_delay_ticks, ps->act.p.rest_damper_command);
    if (e->actuator.adc_bits)
        fprintf(f, "  converters: %d bits over +/- %g m and +/- %g N\n", e->actuator.adc_bits,
               e->actuator.displacement_range_m, e->actuator.force_range_N);
    if (ps->daq.backend == DRTHS_DAQ_BACKEND_COMEDI)
        fprintf(f, "  DAQ: comedi board %s (the specimen settings above are not used)\n",
               ps->daq.u.comedi.device);
    else
        fprintf(f, "  DAQ: virtual (rehearsal specimen)\n");
    fprintf(f, "  compensation %s (lookahead %d ticks, I/O delay %d ticks",
           drths_compensation_name(e->actuator.compensation), ps->act.lookahead,
           e->actuator.io_delay_ticks);
    if (e->actuator.compensation == DRTHS_COMPENSATION_FEEDFORWARD ||
        e->actuator.compensation == DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE)
        fprintf(f, "; desired trajectory limited to %g m/s2, %g m/s3",
               e->physical.feedforward_max_acceleration_m_s2, e->physical.feedforward_max_jerk_m_s3);
    fprintf(f, ")\n");
    fprintf(f, "  limits: command %g m, %g m/s; drive %g m; measured %g m, %g N; HOLD: %s",
           e->physical.limit_displacement_m, e->physical.limit_velocity_m_s,
           e->physical.limit_drive_m, e->physical.limit_measured_displacement_m,
           e->physical.limit_force_N, drths_hold_mode_name(e->physical.hold));
    if (e->physical.hold == DRTHS_HOLD_RAMP)
        fprintf(f, " to %g m", e->physical.safe_position_m);
    fprintf(f, " at most %g m/s\n", e->physical.ramp_rate_m_s);
    /* Several channels: the lines above are the first channel's; one line each. */
    for (int i = 0; ps->n_channels > 1 && i < ps->n_channels; i++) {
        const drths_experiment_t *v = drths_experiment_actuator(ps->cfg.exp, i);
        const drths_actuator_t *a = drths_physsite_act((drths_physsite_t *)ps, i);
        fprintf(f, "  channel %d (%s, trial displacement element %d): %s", i + 1,
                drths_experiment_actuator_name(ps->cfg.exp, i), i,
                drths_damper_model_name(v->specimen.damper.model));
        if (v->specimen.damper.model == DRTHS_DAMPER_LINEAR_SPRING)
            fprintf(f, " %g N/m", v->specimen.damper.stiffness_N_per_m);
        fprintf(f,
                ", %s actuator, compensation %s (lookahead %d); limits command %g m, %g m/s; "
                "drive %g m; measured %g m, %g N\n",
                drths_actuator_plant_name(v->actuator.plant),
                drths_compensation_name(v->actuator.compensation), a->lookahead,
                v->physical.limit_displacement_m, v->physical.limit_velocity_m_s,
                v->physical.limit_drive_m, v->physical.limit_measured_displacement_m,
                v->physical.limit_force_N);
    }
}

void drths_physsite_print_end(FILE *f, const drths_physsite_t *ps, const char *dir)
{
    const drths_actuator_t *act = &ps->act;
    const drths_actuator_counters_t *c = &act->c;
    double rate = ps->cfg.exp->rate_hz;
    fprintf(f, "drths-physical: %s (exit %d)\n", ps->exit_reason, ps->exit_code);
    if (c->ticks) {
        fprintf(f, "  ticks %" PRIu64 " (%.2f s), loop delay L = %u ticks (%.3f ms), epochs %" PRIu64
               "\n", c->ticks, (double)c->ticks / rate, act->L, (double)act->L * 1e3 / rate,
               c->epochs);
        fprintf(f, "  commands: received %" PRIu64 ", applied %" PRIu64 ", concealed %" PRIu64
               " (longest run %" PRIu64 "), late %" PRIu64 "\n"
               "            reordered %" PRIu64 ", duplicate %" PRIu64 ", too far %" PRIu64
               ", ticks filled from redundancy %" PRIu64 "\n",
               c->commands, c->applied, c->concealed, c->max_consecutive_concealed, c->late,
               c->reordered, c->duplicates, c->too_far, c->from_redundancy);
        const drths_hist_t *lh = &act->lateness_ns;
        fprintf(f, "  tick lateness: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us; %" PRIu64
               " ticks later than dt/2 (%" PRIu64 " late wake-ups, %" PRIu64
               " ticks run back to back after them)\n",
               drths_hist_quantile(lh, 0.5) * 1e-3, drths_hist_quantile(lh, 0.99) * 1e-3,
               drths_hist_quantile(lh, 0.999) * 1e-3, lh->count ? lh->max * 1e-3 : 0.0,
               c->late_wakeups, c->late_wakeups_cyc, c->overrun_ticks);
        const drths_hist_t *ld = &act->lead_ns;
        if (ld->count)
            fprintf(f, "  command lead: p50 %.3f ms, min %.3f ms\n",
                   drths_hist_quantile(ld, 0.5) * 1e-6, ld->min * 1e-6);
        fprintf(f, "  tracking (%s): RMS error %.3f %%, indicator %.4g mm^2, peak error %.4f mm; "
               "%" PRIu64 " ticks with the preview completed by the concealment, %" PRIu64
               " with the derivatives limited\n",
               drths_compensation_name(act->p.compensation), drths_actuator_tracking_rms_pct(act),
               drths_tracking_ti(&act->track) * 1e6, drths_tracking_max_err(&act->track) * 1e3,
               act->cs.c.preview_extended, act->comp.limited_ticks);
        for (int i = 0; ps->n_channels > 1 && i < ps->n_channels; i++) {
            const drths_actuator_t *a = drths_physsite_act((drths_physsite_t *)ps, i);
            fprintf(f,
                    "  channel %d (%s): tracking RMS error %.3f %%, peak error %.4f mm, "
                    "%" PRIu64 " ticks in HOLD\n",
                    i + 1, drths_experiment_actuator_name(ps->cfg.exp, i),
                    drths_actuator_tracking_rms_pct(a), drths_tracking_max_err(&a->track) * 1e3,
                    a->c.hold_ticks);
        }
        const drths_actuator_t *h = drths_physsite_hold_act(ps);
        char hold[DRTHS_WIRE_MAX_TEXT + 1];
        if (h->hold) {
            fprintf(f, "  HOLD: %s (%" PRIu64 " ticks in HOLD from tick %" PRIu64 ")\n",
                    drths_physsite_hold_text(ps, hold, sizeof hold), h->c.hold_ticks,
                    h->hold_first_tick);
            /* Every channel's safe state: a settled ramp is where the drive was sent, not proof
             * that the DAQ wrote it. */
            for (int i = 0; i < ps->n_channels; i++) {
                const drths_actuator_t *a = drths_physsite_act((drths_physsite_t *)ps, i);
                if (!a->c.safe_write_failures)
                    fprintf(f, "  %ssafe state written (%" PRIu64 " writes)\n", ps->label[i],
                            a->c.safe_writes);
                else
                    fprintf(f,
                            "  %ssafe state NOT written: the DAQ refused %" PRIu64 " of %" PRIu64
                            " writes: hold the actuator with its servo controller "
                            "(docs/lab-day.md)\n",
                            ps->label[i], a->c.safe_write_failures, a->c.safe_writes);
            }
        }
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
    fprintf(f, "  rejected datagrams: %s\n", rejects[0] ? rejects : "none");
    fprintf(f,
            "  records: %" PRIu64 " rows (%" PRIu64 " lost%s) in %s/physical.csv; summary %s/"
            "summary.json\n",
            ps->rec_written, ps->rec_dropped,
            ps->rec && ps->rec->failed ? ": the disk refused a write, the record is incomplete"
                                       : "",
            dir, dir);
}

int drths_physsite_status_text(const drths_physsite_t *ps, char *buf, size_t cap)
{
    int st = atomic_load((atomic_int *)&ps->state);
    if (st != DRTHS_PHYSSITE_RUNNING && st != DRTHS_PHYSSITE_HOLD)
        return 0;
    uint64_t tick = atomic_load_explicit(&ps->st_tick, memory_order_relaxed);
    snprintf(buf, cap,
             "  %s  tick %" PRIu64 " (%.1f s)  L %u  applied %" PRIu64 "  concealed %" PRIu64
             "  late %" PRIu64 "  max wake-up lateness %.0f us   ",
             st == DRTHS_PHYSSITE_RUNNING ? "running" : "HOLD", tick,
             (double)tick / ps->cfg.exp->rate_hz,
             (unsigned)atomic_load_explicit(&ps->st_L, memory_order_relaxed),
             (uint64_t)atomic_load_explicit(&ps->st_applied, memory_order_relaxed),
             (uint64_t)atomic_load_explicit(&ps->st_concealed, memory_order_relaxed),
             (uint64_t)atomic_load_explicit(&ps->st_late, memory_order_relaxed),
             (double)atomic_load_explicit(&ps->st_max_late_ns, memory_order_relaxed) * 1e-3);
    return 1;
}

void drths_physsite_frame_counters(const drths_physsite_t *ps, drths_telemetry_frame_t *f)
{
    static const int state[] = {[DRTHS_PHYSSITE_WAITING] = DRTHS_TELEM_WAITING,
                                [DRTHS_PHYSSITE_CONNECTED] = DRTHS_TELEM_WAITING,
                                [DRTHS_PHYSSITE_RUNNING] = DRTHS_TELEM_RUN,
                                [DRTHS_PHYSSITE_HOLD] = DRTHS_TELEM_HOLD,
                                [DRTHS_PHYSSITE_DONE] = DRTHS_TELEM_DONE};
    int st = atomic_load((atomic_int *)&ps->state);
    f->state = st >= 0 && st <= DRTHS_PHYSSITE_DONE ? state[st] : DRTHS_TELEM_DONE;
    f->late = atomic_load_explicit(&ps->st_late, memory_order_relaxed);
    f->concealed = atomic_load_explicit(&ps->st_concealed, memory_order_relaxed);
    f->rejected = atomic_load_explicit(&ps->st_rejected, memory_order_relaxed);
    if (f->state == DRTHS_TELEM_RUN || f->state == DRTHS_TELEM_HOLD)
        f->L_ticks = (double)atomic_load_explicit(&ps->st_L, memory_order_relaxed);
}

void drths_physsite_frame_row(const double *row, drths_telemetry_frame_t *f)
{
    f->tick = (int64_t)row[DRTHS_ACT_COL_TICK];
    f->time_s = row[DRTHS_ACT_COL_TIME];
    f->cmd_disp_m = row[DRTHS_ACT_COL_COMMAND];
    f->meas_disp_m = row[DRTHS_ACT_COL_MEAS_DISP];
    f->meas_force_N = row[DRTHS_ACT_COL_MEAS_FORCE];
    f->damper_cmd = row[DRTHS_ACT_COL_DAMPER_COMMAND];
    f->lateness_us = row[DRTHS_ACT_COL_WAKE_LATE];
}

int drths_physsite_report_end(FILE *f, drths_physsite_t *ps, const drths_ofr_app_t *ofr,
                              const char *dir, drths_error_t *err)
{
    char path[4200];
    int rc = drths_path_join(path, sizeof path, dir, "summary.json") != 0
                 ? drths_error_set(err, -ENAMETOOLONG, "run folder path too long")
                 : drths_physsite_write_summary(ps, path, err);
    drths_physsite_print_end(f, ps, dir);
    if (ofr)
        fprintf(f,
                "  OpenFresco: %" PRIu64 " steps reached of %" PRIu64 " trials, %" PRIu64
                " late targets (%" PRIu64 " ticks held), step-end tracking RMS error %.3f %%, "
                "peak %.4f mm\n",
                ofr->steps_reached, ofr->targets, ofr->late_targets, ofr->held_ticks,
                drths_ofr_app_step_rms_pct(ofr), drths_ofr_app_step_max_err(ofr) * 1e3);
    const char *after = ofr ? drths_ofr_app_after_end_text(ofr) : NULL;
    if (after)
        fprintf(f,
                "  OpenFresco after the site ended the session: %" PRIu64
                " requests answered with NaN; %s\n",
                ofr->after_end_nan_replies, after);
    for (int i = 0; ofr && ps->n_channels > 1 && i < ps->n_channels; i++)
        fprintf(f,
                "  OpenFresco channel %d (%s): step-end tracking RMS error %.3f %%, peak %.4f mm\n",
                i + 1, drths_experiment_actuator_name(ps->cfg.exp, i),
                drths_ofr_app_channel_rms_pct(ofr, i), drths_ofr_app_channel_max_err(ofr, i) * 1e3);
    return rc;
}
