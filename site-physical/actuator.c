#include "site-physical/actuator.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/setup.h"

const char *const drths_actuator_columns[DRTHS_ACT_NCOLS] = {
    "tick",
    "time_s",
    "cmd_tick",
    "command_m",
    "command_vel_m_s",
    "damper_command",
    "concealed",
    "hold",
    "meas_disp_m",
    "meas_force_N",
    "cmd_lead_ms",
    "wake_late_us",
    "drive_m",
    "tracking_error_m",
    "tracking_rms_pct",
    "tracking_indicator_m2",
    "adaptive_theta0",
    "adaptive_theta1",
    "adaptive_theta2",
    "adaptive_theta3",
};

/* Histogram layouts: wake-up lateness in 1 us bins up to 100 ms, command lead in 10 us bins up
 * to 2 s (larger values are counted in overflow and still give an exact maximum). */
#define LATENESS_BIN_NS 1000
#define LATENESS_BINS 100000
#define LEAD_BIN_NS 10000
#define LEAD_BINS 200000

void drths_actuator_params_from_experiment(const drths_experiment_t *exp,
                                           drths_actuator_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->rate_hz = exp->rate_hz;
    p->r = exp->link.redundancy;
    p->playout_ticks = (size_t)exp->physical.playout_ticks;
    p->max_concealed_ticks = exp->physical.max_concealed_ticks;
    p->watchdog_s = exp->physical.watchdog_ms * 1e-3;
    p->limit_displacement_m = exp->physical.limit_displacement_m;
    p->limit_velocity_m_s = exp->physical.limit_velocity_m_s;
    p->limit_force_N = exp->physical.limit_force_N;
    p->limit_drive_m = exp->physical.limit_drive_m;
    p->limit_drive_velocity_m_s = exp->physical.limit_drive_velocity_m_s;
    p->limit_drive_acceleration_m_s2 = exp->physical.limit_drive_acceleration_m_s2;
    p->limit_drive_offset_m = exp->physical.limit_drive_offset_m;
    p->max_tick_late_s = exp->physical.max_tick_late_ms * 1e-3;
    p->limit_meas_disp_m = exp->physical.limit_measured_displacement_m;
    p->hold_mode = exp->physical.hold;
    p->safe_position_m = exp->physical.safe_position_m;
    p->ramp_rate_m_s = exp->physical.ramp_rate_m_s;
    p->compensation = exp->actuator.compensation;
    /* The virtual plant's I/O delay; with a board it is the converters' and controller's delay
     * the lab sets in the same field. */
    p->comp_io_delay_ticks = exp->actuator.io_delay_ticks;
    p->ff_max_acc_m_s2 = exp->physical.feedforward_max_acceleration_m_s2;
    p->ff_max_jerk_m_s3 = exp->physical.feedforward_max_jerk_m_s3;
    p->adaptive_window_s = exp->actuator.adaptive_window_s;
    p->adaptive_bound = exp->actuator.adaptive_bound;
    drths_setup_adaptive_range(exp, &p->adaptive_range);
    /* The lab knows its damper's nominal model, not the rehearsal's "true" one. */
    drths_setup_damper_nominal(exp, &p->damper_nominal);
    /* A passive mode's constant command is what the numerical site will send from tick L + 1
     * on; holding it during the rest ticks lets the damper's current settle before the motion
     * starts, as in the reference run. Semi-active modes start from 0 (the safe value). */
    double cmd = 0.0;
    if (drths_setup_passive_command(exp, &cmd, NULL) != 0)
        cmd = 0.0;
    p->rest_damper_command = cmd;
    p->hold_linger_s = 0.2;
    p->abort_interval_s = 0.005;
    p->late_wake_fraction = 0.5;
    p->stab_window_s = exp->physical.stability_window_s;
    p->stab_windows = exp->physical.stability_windows;
    p->stab_min_amp_m = exp->physical.stability_min_amplitude_m;
    p->stab_quiet_amp_m = exp->physical.stability_quiet_amplitude_m;
    p->stab_growth_per_s = exp->physical.stability_growth_per_s;
    p->stab_min_decay_per_s = exp->physical.stability_min_decay_per_s;
    /* The COMMANDs carry no ground motion, but the record is part of the shared experiment
     * (fingerprinted with its bytes): the ground is quiet from the record's end on, the tail
     * (ground_motion.tail_s of free vibration) after it. Without a readable record the quiet
     * check never applies. */
    p->stab_quiet_after_s = INFINITY;
    drths_record_t rec;
    memset(&rec, 0, sizeof rec);
    if (p->stab_window_s > 0.0 && drths_setup_ground_motion(exp, &rec, NULL) == 0 &&
        rec.dt_s > 0.0) {
        const double end_s = (double)rec.n * rec.dt_s - exp->ground_motion.tail_s;
        p->stab_quiet_after_s = end_s > 0.0 ? end_s : 0.0;
    }
    drths_record_close(&rec);
}

static int check_params(const drths_actuator_params_t *p, drths_error_t *err)
{
    if (!(p->rate_hz > 0.0 && p->rate_hz <= 1e6))
        return drths_error_set(err, -EINVAL, "rate_hz: must be in (0, 1e6] (got %g)", p->rate_hz);
    if (p->r < 1 || p->r > DRTHS_WIRE_MAX_R)
        return drths_error_set(err, -EINVAL, "link.redundancy: must be 1..%d (got %d)",
                               DRTHS_WIRE_MAX_R, p->r);
    if (p->playout_ticks < 1)
        return drths_error_set(err, -EINVAL, "physical.playout_ticks: must be > 0");
    if (p->max_concealed_ticks < 0)
        return drths_error_set(err, -EINVAL, "physical.max_concealed_ticks: must be >= 0 (got %d)",
                               p->max_concealed_ticks);
    if (!(p->watchdog_s > 0.0))
        return drths_error_set(err, -EINVAL, "physical.watchdog_ms: must be > 0 (got %g)",
                               p->watchdog_s * 1e3);
    if (!(p->limit_displacement_m > 0.0))
        return drths_error_set(err, -EINVAL, "physical.limit_displacement_m: must be > 0 (got %g)",
                               p->limit_displacement_m);
    if (!(p->limit_velocity_m_s > 0.0))
        return drths_error_set(err, -EINVAL, "physical.limit_velocity_m_s: must be > 0 (got %g)",
                               p->limit_velocity_m_s);
    if (!(p->limit_force_N > 0.0))
        return drths_error_set(err, -EINVAL, "physical.limit_force_N: must be > 0 (got %g)",
                               p->limit_force_N);
    if (!(p->limit_drive_m > 0.0))
        return drths_error_set(err, -EINVAL, "physical.limit_drive_m: must be > 0 (got %g)",
                               p->limit_drive_m);
    if (!(p->max_tick_late_s > 0.0))
        return drths_error_set(err, -EINVAL, "physical.max_tick_late_ms: must be > 0 (got %g)",
                               p->max_tick_late_s * 1e3);
    if (!(p->limit_meas_disp_m > 0.0))
        return drths_error_set(err, -EINVAL,
                               "physical.limit_measured_displacement_m: must be > 0 (got %g)",
                               p->limit_meas_disp_m);
    if (p->hold_mode != DRTHS_HOLD_AT_POSITION && p->hold_mode != DRTHS_HOLD_RAMP)
        return drths_error_set(err, -EINVAL, "physical.hold: unknown mode %d", (int)p->hold_mode);
    if (!(fabs(p->safe_position_m) < p->limit_drive_m))
        return drths_error_set(err, -EINVAL,
                               "physical.safe_position_m: must lie inside +/- limit_drive_m "
                               "(got %g)",
                               p->safe_position_m);
    if (!(p->ramp_rate_m_s > 0.0) || !isfinite(p->ramp_rate_m_s))
        return drths_error_set(err, -EINVAL, "physical.ramp_rate_m_s: must be > 0 (got %g)",
                               p->ramp_rate_m_s);
    if (!isfinite(p->rest_damper_command))
        return drths_error_set(err, -EINVAL, "rest damper command: must be finite");
    if (!(p->hold_linger_s >= 0.0) || !(p->abort_interval_s >= 0.0))
        return drths_error_set(err, -EINVAL, "hold linger and abort interval: must be >= 0");
    if (!(p->late_wake_fraction > 0.0))
        return drths_error_set(err, -EINVAL, "late wake-up fraction: must be > 0");
    if (!(p->stab_window_s >= 0.0) || !isfinite(p->stab_window_s))
        return drths_error_set(err, -EINVAL, "physical.stability_window_s: must be >= 0 (got %g)",
                               p->stab_window_s);
    if (p->stab_window_s > 0.0) {
        if (p->stab_windows < 2 || p->stab_windows > DRTHS_ACT_STAB_MAX_WINDOWS)
            return drths_error_set(err, -EINVAL,
                                   "physical.stability_windows: must be 2..%d (got %d)",
                                   DRTHS_ACT_STAB_MAX_WINDOWS, p->stab_windows);
        if (p->stab_window_s * p->rate_hz < 2.0)
            return drths_error_set(err, -EINVAL,
                                   "physical.stability_window_s: %g s is under two ticks",
                                   p->stab_window_s);
        if (!(p->stab_min_amp_m >= 0.0) || !isfinite(p->stab_min_amp_m) ||
            !(p->stab_quiet_amp_m >= 0.0) || !isfinite(p->stab_quiet_amp_m) ||
            !(p->stab_growth_per_s > 0.0) || !isfinite(p->stab_growth_per_s) ||
            !isfinite(p->stab_min_decay_per_s) || isnan(p->stab_quiet_after_s))
            return drths_error_set(err, -EINVAL,
                                   "physical.stability_*: amplitude >= 0, growth > 0, decay "
                                   "and record end finite");
    }
    return 0;
}

int drths_actuator_comp_init(drths_comp_t *c, const drths_actuator_params_t *p, drths_error_t *err)
{
    /* Every compensator is designed on the average plant model, as Phillips & Spencer (2013)
     * do; `feedforward` then schedules the inverse between the 0 A and 2.5 A models on the
     * commanded current, and `adaptive` identifies factors on that scheduled inverse. */
    int rc = drths_comp_init(c, p->compensation, &DRTHS_PLANT_AVERAGE, p->comp_io_delay_ticks,
                             1.0 / p->rate_hz, err);
    if (!rc && p->compensation == DRTHS_COMPENSATION_ADAPTIVE)
        rc = drths_comp_set_adaptive_range(c, &p->adaptive_range, err);
    if (!rc && p->compensation == DRTHS_COMPENSATION_ADAPTIVE)
        rc = drths_comp_set_adaptive(c, p->adaptive_window_s, p->adaptive_bound, err);
    if (!rc && (p->compensation == DRTHS_COMPENSATION_FEEDFORWARD ||
                p->compensation == DRTHS_COMPENSATION_ADAPTIVE)) {
        rc = drths_comp_schedule(c, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 2.5, err);
        if (!rc)
            rc = drths_comp_current_model(c, &p->damper_nominal, err);
    }
    if (!rc)
        rc = drths_comp_set_limits(c, p->ff_max_acc_m_s2, p->ff_max_jerk_m_s3, err);
    if (rc)
        return drths_error_prefix(err, rc, "actuator.compensation %s",
                                  drths_compensation_name(p->compensation));
    drths_comp_reset_command(c, p->rest_damper_command);
    drths_comp_adapt_reset(c, 0.0);
    return 0;
}

int drths_actuator_init(drths_actuator_t *a, const drths_actuator_params_t *p, drths_daq_t *daq,
                        drths_error_t *err)
{
    memset(a, 0, sizeof *a);
    int rc = check_params(p, err);
    if (rc)
        return rc;
    if (!daq || !daq->ops)
        return drths_error_set(err, -EINVAL, "actuator: no open DAQ");
    a->p = *p;
    a->daq = daq;
    a->dt_ns = (int64_t)llround(1e9 / p->rate_hz);
    if (a->dt_ns <= 0)
        return drths_error_set(err, -EINVAL, "rate_hz: %g gives a tick below 1 ns", p->rate_hz);
    a->stall_ns = (int64_t)llround(p->max_tick_late_s * 1e9);
    /* Every drive this actuator writes passes the DAQ's envelope, from the first one. */
    const drths_envelope_limits_t lim = {
        .position_m = p->limit_drive_m,
        .velocity_m_s = p->limit_drive_velocity_m_s,
        .acceleration_m_s2 = p->limit_drive_acceleration_m_s2,
        .offset_m = p->limit_drive_offset_m,
        .rest_after_s = p->max_tick_late_s,
    };
    rc = drths_daq_set_envelope(daq, &lim, p->rate_hz, err);
    if (rc)
        return rc;
    rc = drths_actuator_comp_init(&a->comp, p, err);
    if (rc)
        return rc;
    a->lookahead = drths_comp_lookahead_needed(&a->comp);
    if (a->lookahead > DRTHS_ACT_MAX_LOOKAHEAD)
        a->lookahead = DRTHS_ACT_MAX_LOOKAHEAD;
    drths_tracking_init(&a->track);
    rc = drths_playout_init(&a->pb, p->playout_ticks, sizeof(drths_cmd_channel_t), 0, err);
    if (rc)
        return rc;
    rc = drths_hist_init(&a->lateness_ns, LATENESS_BIN_NS, LATENESS_BINS, err);
    if (!rc)
        rc = drths_hist_init(&a->lead_ns, LEAD_BIN_NS, LEAD_BINS, err);
    if (rc) {
        drths_actuator_close(a);
        return rc;
    }
    /* The small subtraction keeps 0.2 s at 5 kHz at 1000 ticks despite binary rounding. */
    a->linger_ticks = (uint64_t)ceil(p->hold_linger_s * p->rate_hz - 1e-9);
    a->abort_every_ticks = (uint64_t)ceil(p->abort_interval_s * p->rate_hz - 1e-9);
    for (size_t i = 0; i < DRTHS_ACT_LATE_MEMORY; i++)
        a->primary_tick[i] = -1;
    if (daq->backend == DRTHS_DAQ_BACKEND_VIRTUAL && daq->u.virt.spec)
        drths_specimen_reset(daq->u.virt.spec, 0.0, p->rest_damper_command);
    /* FEEDBACK sample k is for tick t - offset(k), as in a COMMAND (PROTOCOL.md section 8). */
    a->fb_cap = (size_t)drths_wire_offset(p->r - 1) + 1;
    a->fb_ring = calloc(a->fb_cap, sizeof *a->fb_ring);
    a->fb_ring_tick = malloc(a->fb_cap * sizeof *a->fb_ring_tick);
    if (!a->fb_ring || !a->fb_ring_tick) {
        drths_actuator_close(a);
        return drths_error_set(err, -ENOMEM, "actuator: no memory for %zu feedback samples",
                               a->fb_cap);
    }
    for (size_t i = 0; i < a->fb_cap; i++)
        a->fb_ring_tick[i] = UINT64_MAX;
    /* The command stream conceals, rejoins and previews within the feedforward's derivative
     * limits (the defaults where they are 0), its rejoin no faster than the HOLD ramp. */
    const drths_cmdstream_params_t sp = {
        .rate_hz = p->rate_hz,
        .playout_ticks = p->playout_ticks,
        .max_concealed_ticks = p->max_concealed_ticks,
        .lookahead = a->lookahead,
        .ramp_rate_m_s = p->ramp_rate_m_s,
        .max_acc_m_s2 = p->ff_max_acc_m_s2,
        .max_jerk_m_s3 = p->ff_max_jerk_m_s3,
        .rest_damper_command = p->rest_damper_command,
    };
    rc = drths_cmdstream_init(&a->cs, &sp, err);
    if (rc) {
        drths_actuator_close(a);
        return rc;
    }
    a->stab_win_ticks =
        p->stab_window_s > 0.0 ? (uint64_t)llround(p->stab_window_s * p->rate_hz) : 0;
    a->stab_max_growth = -INFINITY;
    a->stab_prev_rate = NAN;
    return 0;
}

void drths_actuator_close(drths_actuator_t *a)
{
    drths_playout_close(&a->pb);
    drths_hist_close(&a->lateness_ns);
    drths_hist_close(&a->lead_ns);
    free(a->fb_ring);
    free(a->fb_ring_tick);
    drths_cmdstream_close(&a->cs);
    a->fb_ring = NULL;
    a->fb_ring_tick = NULL;
}

size_t drths_scopy(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    while (src && src[n] && n + 1 < cap) {
        dst[n] = src[n];
        n++;
    }
    if (cap)
        dst[n] = '\0';
    return n;
}

void drths_actuator_hold(drths_actuator_t *a, uint8_t reason, int abort_peer,
                         const drths_hold_cause_t *cause)
{
    if (a->hold || a->finished)
        return;
    a->hold = 1;
    a->hold_reason = reason;
    a->hold_abort_peer = abort_peer;
    a->hold_cause = *cause;
}

const char *drths_actuator_hold_text(const drths_actuator_t *a, char *buf, size_t cap)
{
    if (!a->hold) {
        if (cap)
            buf[0] = '\0';
        return buf;
    }
    drths_hold_cause_describe(&a->hold_cause, buf, cap);
    return buf;
}

/* A limit HOLD of the kind with two numbers (the value and its limit) and the tick. */
static void hold_limit(drths_actuator_t *a, drths_hold_kind_t kind, uint64_t tick, double value,
                       double limit)
{
    drths_hold_cause_t c;
    drths_hold_cause_init(&c, kind);
    c.tick = tick;
    c.v[0] = value;
    c.v[1] = limit;
    drths_actuator_hold(a,
                        kind == DRTHS_HOLD_WATCHDOG || kind == DRTHS_HOLD_STALL
                            ? DRTHS_STOP_WATCHDOG
                            : DRTHS_STOP_LIMIT,
                        1, &c);
}

/* The command stream's counters, reported among the actuator's. */
static void stream_counters(drths_actuator_t *a)
{
    const drths_cmdstream_counters_t *sc = &a->cs.c;
    a->c.applied = sc->applied;
    a->c.concealed = sc->concealed;
    a->c.max_consecutive_concealed = sc->max_consecutive_concealed;
    a->c.late = sc->late;
    a->c.delayed = sc->delayed;
    a->c.max_lag_ticks = sc->max_lag_ticks;
    a->c.catchup_ticks = sc->catchup_ticks;
    a->c.rejoins = sc->rejoins;
    a->c.max_rejoin_offset_m = sc->max_rejoin_offset_m;
}

/* The command held for tick t (in the playout buffer, not yet played), or NULL. */
static const drths_cmd_channel_t *held(const drths_actuator_t *a, uint64_t t,
                                       drths_cmd_channel_t *buf)
{
    return t >= 1 && drths_playout_lookahead(&a->pb, t - 1, 1, buf) == 1 ? buf : NULL;
}

/* A command sample is checked when it arrives, before the playout buffer (and so the preview
 * of the compensation) can hold it: finite, within the command limits, and moving from the
 * commands held for the ticks beside it no faster than the velocity limit and with no larger
 * acceleration than the drive's bound (physical.limit_drive_acceleration_m_s2; a trajectory
 * the drive may not follow is no command). An authenticated sample that fails comes from a
 * numerical site (or an OpenFresco target) that is wrong: it is refused, and the run holds
 * before any drive is computed from it. Each pair and triple of neighbours is checked when its
 * last member arrives. Returns true when refused. RT thread: the sentence is the HOLD's. */
/* A refused sample's cause: tick t, what failed. */
static void arrival_cause(drths_hold_cause_t *c, uint64_t t, int sub)
{
    drths_hold_cause_init(c, DRTHS_HOLD_ARRIVAL);
    c->tick = t;
    c->sub = sub;
}

static bool check_arrival(drths_actuator_t *a, uint64_t t, const drths_cmd_channel_t *s)
{
    /* Filled only for a refusal: an accepted sample (every one of a healthy run) costs no
     * initialisation of the cause. */
    drths_hold_cause_t c;
    const double dt = 1.0 / a->p.rate_hz;
    if (!isfinite(s->disp_m) || !isfinite(s->vel_m_s) || !isfinite(s->damper_cmd) ||
        fabs(s->disp_m) > a->p.limit_displacement_m) {
        arrival_cause(&c, t, DRTHS_HOLD_ARRIVAL_DISPLACEMENT);
        c.v[0] = s->disp_m;
        c.v[1] = s->vel_m_s;
        c.v[2] = s->damper_cmd;
        c.v[3] = a->p.limit_displacement_m;
    } else if (fabs(s->vel_m_s) > a->p.limit_velocity_m_s) {
        arrival_cause(&c, t, DRTHS_HOLD_ARRIVAL_VELOCITY);
        c.v[0] = s->vel_m_s;
        c.v[1] = a->p.limit_velocity_m_s;
    } else {
        drths_cmd_channel_t b[4];
        const drths_cmd_channel_t *n[5] = {held(a, t - 2, &b[0]), held(a, t - 1, &b[1]), s,
                                           held(a, t + 1, &b[2]), held(a, t + 2, &b[3])};
        if (t < 2)
            n[0] = NULL;
        for (int i = 1; i < 5; i++) {
            if (!n[i] || !n[i - 1])
                continue;
            const double v = (n[i]->disp_m - n[i - 1]->disp_m) / dt;
            if (fabs(v) > a->p.limit_velocity_m_s) {
                arrival_cause(&c, t, DRTHS_HOLD_ARRIVAL_STEP);
                c.n[0] = i > 2; /* to the next tick, else from the previous one */
                c.v[0] = fabs(n[i]->disp_m - n[i - 1]->disp_m);
                c.v[1] = fabs(v);
                c.v[2] = a->p.limit_velocity_m_s;
                goto refuse;
            }
        }
        for (int i = 1; i < 4; i++) {
            if (!n[i - 1] || !n[i] || !n[i + 1])
                continue;
            const double acc = (n[i + 1]->disp_m - 2.0 * n[i]->disp_m + n[i - 1]->disp_m) / dt / dt;
            if (fabs(acc) > a->p.limit_drive_acceleration_m_s2) {
                arrival_cause(&c, t, DRTHS_HOLD_ARRIVAL_ACCELERATION);
                c.v[0] = fabs(acc);
                c.v[1] = a->p.limit_drive_acceleration_m_s2;
                goto refuse;
            }
        }
        return false;
    }
refuse:
    a->c.refused_commands++;
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, &c);
    return true;
}

static void on_command(drths_actuator_t *a, const drths_msg_t *m, int64_t arrival_ns)
{
    const drths_msg_command_t *c = &m->u.command;
    if (c->n_channels != 1) {
        a->c.bad_commands++;
        return;
    }
    a->c.commands++;
    /* The echo is the COMMAND that arrived last, whatever its counter, so that the slow
     * (overtaken) datagrams are measured too and the round trip is not biased low. */
    a->echo_counter = m->counter;
    a->echo_arrival_ns = arrival_ns;
    if (!a->have_cmd || arrival_ns > a->last_cmd_ns)
        a->last_cmd_ns = arrival_ns;
    a->have_cmd = 1;
    if (a->watchdog_armed && arrival_ns > a->watchdog_ref_ns)
        a->watchdog_ref_ns = arrival_ns;
    /* Each tick is the header tick of exactly one COMMAND the numerical site sends; network
     * copies of that datagram are stopped by the replay window, so a second COMMAND for the same
     * tick is a duplicate the sender made. */
    int64_t *prim = &a->primary_tick[m->tick % DRTHS_ACT_LATE_MEMORY];
    if (*prim == (int64_t)m->tick) {
        a->c.duplicates++;
    } else {
        *prim = (int64_t)m->tick;
        if (a->have_primary && m->tick < a->newest_primary)
            a->c.reordered++;
        if (!a->have_primary || m->tick > a->newest_primary)
            a->newest_primary = m->tick;
        a->have_primary = 1;
    }
    const int n = drths_wire_samples_of(m->tick, c->r);
    for (int k = 0; k < n; k++) {
        /* Sample k is for tick T - offset(k) (PROTOCOL.md section 8; both sites agreed on the
         * offsets in the handshake). */
        uint64_t tick = drths_wire_sample_tick(m->tick, k);
        /* Ticks up to L are the rest position; redundant samples for them (the first COMMANDs
         * carry some) are not commands and are not stored. */
        if (a->started && tick <= a->L)
            continue;
        if (check_arrival(a, tick, &c->s[k][0]))
            break;
        /* The command stream counts and keeps a late copy. */
        switch (drths_cmdstream_put(&a->cs, &a->pb, tick, k > 0, &c->s[k][0], arrival_ns)) {
        case DRTHS_PLAYOUT_STORED:
            if (k > 0)
                a->c.from_redundancy++;
            break;
        case DRTHS_PLAYOUT_TOO_FAR:
            if (k == 0)
                a->c.too_far++;
            break;
        case DRTHS_PLAYOUT_DUPLICATE:
        case DRTHS_PLAYOUT_LATE:
            break;
        }
    }
    stream_counters(a);
}

static void on_epoch(drths_actuator_t *a, const drths_msg_t *m)
{
    const drths_msg_epoch_t *e = &m->u.epoch;
    if (!a->started) {
        if (e->new_epoch != 1)
            return;
        a->started = 1;
        a->epoch = 1;
        a->L = e->loop_delay_ticks;
        a->c.epochs = 1;
        drths_cmdstream_start(&a->cs, &a->pb, a->L);
        return;
    }
    if (e->new_epoch <= a->epoch || (a->epoch_pending && e->new_epoch <= a->pend_epoch))
        return;
    a->epoch_pending = 1;
    a->pend_epoch = e->new_epoch;
    a->pend_L = e->loop_delay_ticks;
    a->pend_tick = e->effective_tick;
}

void drths_actuator_receive(drths_actuator_t *a, const drths_msg_t *m, int64_t arrival_ns)
{
    switch (m->type) {
    case DRTHS_MSG_COMMAND:
        on_command(a, m, arrival_ns);
        break;
    case DRTHS_MSG_EPOCH:
        on_epoch(a, m);
        break;
    case DRTHS_MSG_STOP:
        if (!a->stop_received || m->tick < a->stop_tick) {
            a->stop_received = 1;
            a->stop_tick = m->tick;
        }
        break;
    case DRTHS_MSG_ABORT: {
        drths_hold_cause_t c;
        drths_hold_cause_init(&c, DRTHS_HOLD_PEER_ABORT);
        c.sub = m->u.stop.reason;
        drths_scopy(c.text, sizeof c.text, m->u.stop.text);
        drths_actuator_hold(a, m->u.stop.reason, 0, &c);
        break;
    }
    default:
        break;
    }
}

/* ---- HOLD causes ---------------------------------------------------------------------------- */

/* Each check below returns true when its limit is exceeded, after entering HOLD through
 * drths_actuator_hold with a cause naming the limit and the offending value (ignored when a
 * cause came first, such as a failed write before the measurement is checked). The causes are
 * numbers only; the main thread writes the sentence (site-physical/hold_cause.h). */

/* The command limits, checked before a command reaches the drive. */
static bool check_command(drths_actuator_t *a, const drths_cmd_channel_t *s)
{
    if (fabs(s->disp_m) > a->p.limit_displacement_m)
        hold_limit(a, DRTHS_HOLD_DISPLACEMENT, 0, s->disp_m, a->p.limit_displacement_m);
    else if (fabs(s->vel_m_s) > a->p.limit_velocity_m_s)
        hold_limit(a, DRTHS_HOLD_VELOCITY, 0, s->vel_m_s, a->p.limit_velocity_m_s);
    else
        return false;
    return true;
}

/* The measurement limits, checked after each read. */
static bool check_measurement(drths_actuator_t *a, double disp_m, double force_N)
{
    if (!(fabs(disp_m) <= a->p.limit_meas_disp_m))
        hold_limit(a, DRTHS_HOLD_MEASURED_DISPLACEMENT, 0, disp_m, a->p.limit_meas_disp_m);
    else if (!(fabs(force_N) <= a->p.limit_force_N))
        hold_limit(a, DRTHS_HOLD_FORCE, 0, force_N, a->p.limit_force_N);
    else
        return false;
    return true;
}

/* The preview, checked before the drive is computed: a command beyond the displacement limit
 * must not reach the drive even through it (the feedforward's derivatives would amplify it). It
 * is a HOLD as soon as it is seen. */
static bool check_preview(drths_actuator_t *a, uint64_t tick, const drths_cmdstream_out_t *o)
{
    for (int j = 0; j < o->n_future; j++) {
        const double d = o->future[j];
        if (!(fabs(d) <= a->p.limit_displacement_m)) {
            hold_limit(a, DRTHS_HOLD_PREVIEW, tick + 1 + (uint64_t)j, d, a->p.limit_displacement_m);
            return true;
        }
    }
    return false;
}

/* The first commanded tick arms the watchdog; from then on, until STOP has announced the last
 * commanded tick, it is a HOLD when there has been no command to play for longer than
 * watchdog_s: the playout buffer has held nothing for this tick or a later one since a tick
 * that long ago, and no COMMAND has arrived since then either. The watchdog acts on the
 * absence of commands to play, not on a gap in the arrivals while commands sent ahead are still
 * being played (after a rise of L a burst of losses may leave hundreds of ms of them buffered).
 * Once the buffer runs dry the concealment budget counts too, and with the defaults (50 ms
 * against 100 ms) it acts first; the watchdog is the time-based backstop that does not depend
 * on ticks being counted (a budget set longer than watchdog_ms, or stalled ticks). */
static bool check_watchdog(drths_actuator_t *a, uint64_t tick, int64_t now_ns,
                           drths_actuator_out_t *out)
{
    if (!a->watchdog_armed) {
        out->events |= DRTHS_ACT_EV_FIRST_COMMAND;
        a->watchdog_armed = 1;
        a->watchdog_ref_ns = now_ns;
    }
    uint64_t newest;
    if (drths_playout_newest(&a->pb, &newest) == 0 && newest >= tick) {
        a->dry = 0;
        return false;
    }
    if (!a->dry) {
        a->dry = 1;
        a->dry_since_ns = now_ns;
    }
    if (a->stop_received)
        return false;
    const int64_t from_ns =
        a->dry_since_ns > a->watchdog_ref_ns ? a->dry_since_ns : a->watchdog_ref_ns;
    const int64_t limit_ns = (int64_t)llround(a->p.watchdog_s * 1e9);
    const int64_t quiet_ns = now_ns - from_ns;
    if (quiet_ns <= limit_ns)
        return false;
    hold_limit(a, DRTHS_HOLD_WATCHDOG, tick, (double)quiet_ns * 1e-6, a->p.watchdog_s * 1e3);
    return true;
}

/* A drive the envelope refused (site-physical/envelope.h): a limit HOLD naming the bound and
 * by how much; the drive was not written. */
static void drive_refused(drths_actuator_t *a)
{
    drths_hold_cause_t c;
    drths_hold_cause_init(&c, DRTHS_HOLD_ENVELOPE);
    c.envelope = a->daq->refusal;
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, &c);
}

/* A failed DAQ call is counted and is a HOLD (a no-op when already in HOLD). */
static void daq_failed(drths_actuator_t *a, int rc, drths_hold_daq_op_t op)
{
    drths_hold_cause_t c;
    drths_hold_cause_init(&c, DRTHS_HOLD_DAQ);
    c.sub = op;
    c.n[0] = rc;
    /* The channel and the call the DAQ recorded for this failure (read now: the tick's next
     * call overwrites them), so the HOLD's sentence names them (docs/comedi.md). */
    const drths_daq_t *d = a->daq;
    const int ch = d->last_error.code ? d->last_error.channel : -1;
    const bool known = ch >= 0 && ch < DRTHS_DAQ_NCHANNELS;
    c.n[1] = known ? ch + 1 : 0;
    if (known && d->backend == DRTHS_DAQ_BACKEND_COMEDI) {
        const drths_daq_channel_config_t *cfg = &d->u.comedi.ch[ch].cfg;
        c.n[2] = 1;
        c.v[0] = cfg->subdevice;
        c.v[1] = cfg->channel;
        c.v[2] = cfg->range;
    }
    if (d->last_error.code && d->last_error.op)
        drths_scopy(c.text, sizeof c.text, d->last_error.op);
    a->c.daq_errors++;
    drths_actuator_hold(a, DRTHS_STOP_INTERNAL_ERROR, 1, &c);
}

/* A converter at an end code (the DAQ read fails with -ERANGE and flags the channel): the
 * true value may lie anywhere beyond, so no limit can be checked against it. A limit HOLD of
 * its own, counted as a DAQ error (the read did fail). */
static void converter_saturated(drths_actuator_t *a, double disp_m, double force_N)
{
    drths_hold_cause_t c;
    drths_hold_cause_init(&c, DRTHS_HOLD_SATURATED);
    const bool disp = a->daq->saturated & (1u << DRTHS_DAQ_DISPLACEMENT_IN);
    c.sub = disp ? 0 : 1;
    c.v[0] = disp ? disp_m : force_N;
    a->c.daq_errors++;
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, &c);
}

/* ---- the tick's phases ---------------------------------------------------------------------- */

/* What one tick carries from phase to phase. */
typedef struct tick_state {
    uint64_t tick;
    int64_t deadline_ns, now_ns;
    int64_t lateness_ns;          /* now_ns - deadline_ns */
    bool holding;                 /* this tick drives the HOLD ramp */
    bool rest;                    /* t <= L: the rest position, not a command */
    bool concealed;               /* the command was not there in time (flagged in the FEEDBACK) */
    bool late_played;             /* ... and a late command was played instead (delayed playback) */
    bool skip_write;              /* in HOLD, behind its time: nothing is written (hold_drive) */
    drths_cmd_channel_t cmd;      /* the desired command (rest, received or concealed) */
    int64_t cmd_tick;             /* the tick of the command applied, -1 for none */
    double lead_ms;               /* how long before its tick the command arrived, NaN for none */
    double drive, vel, dcmd;      /* what goes to the DAQ */
    double md, mf;                /* measured displacement and force, NaN after a failed read */
    double terr;                  /* measured - desired displacement, NaN when not tracked */
    drths_cmdstream_out_t stream; /* the command stream's answer: cmd, past and preview */
} tick_state_t;

/* Lateness of the wake-up, the tick count and a new epoch taking effect at this tick. */
static void begin_tick(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    out->events = 0;
    s->lateness_ns = s->now_ns - s->deadline_ns;
    drths_hist_add(&a->lateness_ns, s->lateness_ns);
    const bool late = (double)s->lateness_ns > a->p.late_wake_fraction * (double)a->dt_ns;
    if (late)
        a->c.late_wakeups++;
    if (a->c.ticks == 0 || s->deadline_ns >= a->wake_next_ns) {
        a->c.wakeups++;
        a->c.late_wakeups_cyc += late;
        const int64_t behind = s->lateness_ns > 0 ? s->lateness_ns : 0;
        a->wake_next_ns = s->deadline_ns + (behind / a->dt_ns + 1) * a->dt_ns;
    } else {
        a->c.overrun_ticks++;
    }
    a->c.ticks++;
    if (a->epoch_pending && s->tick >= a->pend_tick) {
        a->epoch = a->pend_epoch;
        a->L = a->pend_L;
        a->epoch_pending = 0;
        a->c.epochs++;
        out->events |= DRTHS_ACT_EV_EPOCH;
    }
}

/* A commanded tick woken more than max_tick_late_s after its deadline follows a stall of the
 * site or the machine. Playing it and the ticks missed meanwhile would sweep the specimen
 * through that stretch of the trajectory back to back, faster than real time: HOLD instead,
 * and in HOLD the ticks behind their time write nothing (hold_drive). Rest ticks (t <= L) move
 * nothing and are not checked. */
static bool check_stall(drths_actuator_t *a, const tick_state_t *s)
{
    if (s->lateness_ns <= a->stall_ns)
        return false;
    hold_limit(a, DRTHS_HOLD_STALL, s->tick, (double)s->lateness_ns * 1e-6,
               a->p.max_tick_late_s * 1e3);
    return true;
}

/* Phase 1, the command: the rest position for t <= L; otherwise the watchdog, then the command
 * stream's answer (the take of this tick from the playout buffer, in HOLD too; then the
 * received command, a late or a concealed one, or the concealment budget's HOLD) and the
 * command limits. Returns true when the tick runs in HOLD. */
static bool choose_command(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    const bool rest = !a->hold && s->tick <= a->L;
    const bool hold =
        !rest && (a->hold || check_stall(a, s) || check_watchdog(a, s->tick, s->now_ns, out));
    drths_cmdstream_out_t *o = &s->stream;
    drths_cmdstream_tick(&a->cs, &a->pb, s->tick, s->deadline_ns, a->L, hold, o);
    stream_counters(a);
    switch (o->source) {
    case DRTHS_CMD_SRC_NONE:
        return true;
    case DRTHS_CMD_SRC_OVERDUE:
        drths_actuator_hold(a, DRTHS_STOP_HOLD, 1, &o->hold_cause);
        return true;
    case DRTHS_CMD_SRC_REST:
        s->rest = true;
        a->c.rest_ticks++;
        return false;
    case DRTHS_CMD_SRC_TIMELY:
    case DRTHS_CMD_SRC_REDUNDANT:
    case DRTHS_CMD_SRC_REJOIN:
        drths_hist_add(&a->lead_ns, o->lead_ns);
        s->lead_ms = (double)o->lead_ns * 1e-6;
        break;
    case DRTHS_CMD_SRC_LATE:
        s->concealed = true;
        s->late_played = true;
        break;
    case DRTHS_CMD_SRC_CATCHUP:
        /* The tick's own command was there in time; played behind it, but not a late one (the
         * FEEDBACK's flag feeds the late rate of the delay estimator). */
        s->late_played = true;
        break;
    case DRTHS_CMD_SRC_CONCEALED:
        s->concealed = true;
        break;
    }
    s->cmd = o->cmd;
    s->cmd_tick = o->cmd_tick;
    return check_command(a, &s->cmd);
}

/* The compensation's correction (drive - command) is, in a test, a smooth signal: the lead
 * and gain that make up the actuator's lag. Where the compensator's estimate jumps (a rejoin
 * onto commands far from the concealment's guess, a switch between late and timely commands)
 * the correction follows the new value no faster than a quarter of the drive's
 * velocity bound and with at most a quarter of its acceleration bound, tracking the new value's
 * own motion and braking onto it; a correction that moves within those bounds passes
 * unchanged. So a hand-over of the command stream moves the drive only as the (smooth) command
 * moves, and the rest of the envelope is left to the command's own motion. (The preview is
 * always whole, completed by the concealment's continuation, so the estimate seldom jumps;
 * three quarters of the acceleration bound used 0.8 of the envelope at an ordinary 8-tick
 * concealment of the default rehearsal before that, 0.3 with a quarter.) RT-safe. */
static double shape_drive(drths_actuator_t *a, double r, double u)
{
    const double dt = 1.0 / a->p.rate_hz;
    const double amax = 0.25 * a->p.limit_drive_acceleration_m_s2;
    const double vmax = 0.25 * a->p.limit_drive_velocity_m_s;
    const double want = u - r, c1 = a->corr_m, v1 = a->corr_v_m_s, prev_want = a->corr_want_m;
    const double vd = (want - c1) / dt;
    a->corr_want_m = want;
    if (fabs(vd - v1) <= amax * dt && fabs(vd) <= vmax) {
        a->corr_v_m_s = vd;
        a->corr_m = want;
        return u; /* unchanged, to the last bit */
    }
    double vt = (want - prev_want) / dt; /* the new value's own motion */
    if (fabs(vt) > vmax)
        vt = copysign(vmax, vt);
    const double d = want - c1;
    double vn = vt + copysign(drths_envelope_stop_speed(fabs(d), amax, dt), d);
    vn = fmin(fmax(vn, v1 - amax * dt), v1 + amax * dt);
    vn = fmin(fmax(vn, -vmax), vmax);
    a->c.shaped_ticks++;
    a->corr_v_m_s = vn;
    a->corr_m = c1 + vn * dt;
    return r + a->corr_m;
}

/* Phase 2, the drive outside HOLD: the compensation of the desired displacement with its past
 * and previewed future (shape_drive). Returns true when the preview is a HOLD. The drive itself
 * is judged by the envelope when it is written (write_and_read). */
static bool compute_drive(drths_actuator_t *a, tick_state_t *s)
{
    drths_comp_set_command(&a->comp, s->cmd.damper_cmd);
    if (check_preview(a, s->tick, &s->stream))
        return true;
    s->drive = shape_drive(
        a, s->cmd.disp_m,
        drths_comp_drive(&a->comp, s->stream.past, s->stream.future, s->stream.n_future));
    s->vel = s->cmd.vel_m_s;
    s->dcmd = s->cmd.damper_cmd;
    return false;
}

/* Phase 2 in HOLD: on its first tick the target is fixed; the drive then moves from the last
 * drive the envelope admitted (never from a refused one), braking from its velocity within the
 * envelope and then no faster than the ramp rate (drths_envelope_ramp), and the tick carries
 * no command. A tick behind its time (woken a period or more after its deadline: the ticks
 * missed in a stall, played back to back) moves nothing: s->skip_write, the converter keeps
 * its value, so the ramp never runs faster than real time. */
static void hold_drive(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    const drths_envelope_t *env = &a->daq->env;
    if (!a->hold_started) {
        a->hold_started = 1;
        a->hold_tick = s->tick;
        out->events |= DRTHS_ACT_EV_HOLD;
        a->hold_target_m =
            a->p.hold_mode == DRTHS_HOLD_RAMP ? a->p.safe_position_m : a->last_meas_disp_m;
        /* A measurement that failed or left the limits is no place to hold at. */
        if (!(fabs(a->hold_target_m) < a->p.limit_drive_m))
            a->hold_target_m = drths_daq_last_drive(a->daq);
    }
    s->skip_write = s->lateness_ns >= a->dt_ns && env->n > 0;
    int done = 0;
    s->drive = s->skip_write ? env->u1
                             : drths_envelope_ramp(env, a->hold_target_m, a->p.ramp_rate_m_s,
                                                   s->now_ns, &done);
    const double step = env->n > 0 ? fabs(s->drive - env->u1) : 0.0;
    if (step > a->hold_max_step_m)
        a->hold_max_step_m = step;
    if (!a->hold_settled && done) {
        a->hold_settled = 1;
        a->settled_tick = s->tick;
        out->events |= DRTHS_ACT_EV_SETTLED;
    }
    s->vel = 0.0;
    s->dcmd = 0.0;
    s->cmd_tick = -1;
    s->concealed = false;
    s->lead_ms = NAN;
}

/* Phase 3, the DAQ: writes the drive (the safe state in HOLD), reads the measurement, checks
 * its limits and adds a commanded tick to the tracking. A failure or a limit here is a HOLD
 * that this tick's FEEDBACK and row flag and the next tick's drive carries out. */
static void write_and_read(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    out->daq_rc = 0;
    int rc = 0;
    if (!s->holding) {
        rc = drths_daq_write(a->daq, s->drive, s->vel, s->dcmd, s->cmd.disp_m, s->now_ns);
        if (rc == -EDOM) {
            /* The envelope refused the drive: nothing was written. HOLD now, and this tick
             * already writes the ramp's first value instead. */
            drive_refused(a);
            s->holding = true;
            hold_drive(a, s, out);
        }
    }
    if (s->holding && !s->skip_write) {
        rc = drths_daq_safe_state(a->daq, s->drive, s->now_ns);
        if (rc == -EDOM) /* the last admitted drive was written again */
            rc = 0;
        /* Whether the safe state really reached the outputs: the HOLD lines and the summary
         * say so, since a refused write leaves the actuator where the DAQ left it. */
        a->c.safe_writes++;
        if (rc) {
            a->c.safe_write_failures++;
            a->safe_write_failed_tick = s->tick;
        }
    }
    s->drive = drths_daq_last_drive(a->daq);
    if (rc) {
        out->daq_rc = rc;
        daq_failed(a, rc, s->holding ? DRTHS_HOLD_DAQ_SAFE_STATE : DRTHS_HOLD_DAQ_WRITE);
    }
    s->md = NAN;
    s->mf = NAN;
    rc = drths_daq_read(a->daq, &s->md, &s->mf);
    if (rc == -ERANGE && a->daq->saturated) {
        if (!out->daq_rc)
            out->daq_rc = rc;
        converter_saturated(a, s->md, s->mf);
        return;
    }
    if (rc) {
        if (!out->daq_rc)
            out->daq_rc = rc;
        daq_failed(a, rc, DRTHS_HOLD_DAQ_READ);
        return;
    }
    a->last_meas_disp_m = s->md;
    if (s->holding)
        return;
    /* The compensator drove this tick: the adaptive mode learns from what it wrote and what
     * was read (a no-op in the other modes). */
    drths_comp_observe(&a->comp, s->drive, s->md);
    check_measurement(a, s->md, s->mf);
    if (!s->rest) {
        s->terr = s->md - s->cmd.disp_m;
        drths_tracking_add(&a->track, s->cmd.disp_m, s->md);
        a->c.tracked++;
    }
}

/* Phase 3b, the stability monitor: a self-excited oscillation of the loop (the numerical
 * site's Smith predictor far from the specimen, or off, with the loop delay L) shows in the
 * measured displacement as an amplitude that grows faster than the structure's response to an
 * earthquake does, or that does not decay once the ground motion is over. The COMMANDs carry no
 * ground motion, so the monitor compares the measurement with two things it can know: how fast
 * a response to the ground can grow (stab_growth_per_s) and the record's end
 * (stab_quiet_after_s, from the shared experiment), after which a stable structure is in free
 * vibration and its amplitude falls at least as fast as its lowest modal damping makes it (2 %
 * at 2.88 Hz in the default experiment: 0.36/s).
 *
 * The measured displacement, high-passed (twice first-order at 1 Hz: the drift, offsets and
 * slow motions of the measurement are not the oscillation looked for), gives one amplitude per
 * window of stab_win_ticks commanded ticks (the largest |deviation|) and its crossings of zero.
 * Over the last stab_windows windows, each with a crossing (an oscillation faster than
 * 1 / (2 window), 2.5 Hz with the defaults, below the default structure's first mode), the
 * least-squares slope of log amplitude is the growth rate. It is a HOLD when it reaches
 * stab_growth_per_s with every window at least stab_min_amp_m (the onset of an earthquake's
 * response, from rest, grows faster than any threshold: the floor keeps it out) and the fit one
 * window earlier reached it too (a strong motion's onset may grow that fast over one fit, as the
 * window alignment falls; an instability keeps growing), or, all the
 * windows lying after the record's end and at least stab_quiet_amp_m (an oscillation a stable
 * structure would have shed), when it is above -stab_min_decay_per_s. Rest ticks, HOLD ticks
 * and failed reads are not monitored. O(stab_windows) once per window, no allocation. */
static void check_stability(drths_actuator_t *a, const tick_state_t *s)
{
    if (!a->stab_win_ticks || a->hold || s->holding || s->rest || !isfinite(s->md))
        return;
    const double dt = 1.0 / a->p.rate_hz;
    if (!a->stab_have_mean) {
        a->stab_have_mean = 1;
        a->stab_mean = s->md;
        a->stab_mean2 = 0.0;
    }
    /* Two first-order high-passes at 1 Hz: 0.9 of a 3 Hz oscillation is kept, a 0.5 Hz motion
     * is cut to 0.2 and the offsets and drift vanish. */
    const double alpha = 2.0 * M_PI * 1.0 * dt;
    a->stab_mean += alpha * (s->md - a->stab_mean);
    const double hp1 = s->md - a->stab_mean;
    a->stab_mean2 += alpha * (hp1 - a->stab_mean2);
    const double dev = hp1 - a->stab_mean2;
    const int sign = dev > 0.0 ? 1 : dev < 0.0 ? -1 : 0;
    if (sign && a->stab_sign && sign != a->stab_sign)
        a->stab_cross++;
    if (sign)
        a->stab_sign = sign;
    if (fabs(dev) > a->stab_peak)
        a->stab_peak = fabs(dev);
    if (++a->stab_in_win < a->stab_win_ticks)
        return;
    const uint64_t w = a->stab_done++;
    a->stab_amp[w % DRTHS_ACT_STAB_MAX_WINDOWS] = a->stab_peak;
    a->stab_crossings[w % DRTHS_ACT_STAB_MAX_WINDOWS] = a->stab_cross;
    a->stab_peak = 0.0;
    a->stab_cross = 0;
    a->stab_in_win = 0;
    const uint64_t n = (uint64_t)a->p.stab_windows;
    if (a->stab_done < n)
        return;
    /* Least squares of log amplitude on window number over windows done - n .. done - 1. */
    const double win_s = (double)a->stab_win_ticks * dt;
    double sx = 0.0, sy = 0.0, sxx = 0.0, sxy = 0.0, first = 0.0, last = 0.0, min_amp = INFINITY;
    uint64_t cross = 0;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t k = (a->stab_done - n + i) % DRTHS_ACT_STAB_MAX_WINDOWS;
        const double amp = a->stab_amp[k];
        /* A window without a crossing of the mean sees part of a motion slower than 1 / (2
         * window): its peak is no sample of an envelope. */
        if (!(amp > 0.0) || !a->stab_crossings[k]) {
            a->stab_prev_rate = NAN;
            return;
        }
        if (amp < min_amp)
            min_amp = amp;
        const double x = (double)i, y = log(amp);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        cross += a->stab_crossings[k];
        if (i == 0)
            first = amp;
        last = amp;
    }
    const double dn = (double)n;
    const double rate = (dn * sxy - sx * sy) / (dn * sxx - sx * sx) / win_s;
    const double prev_rate = a->stab_prev_rate;
    a->stab_prev_rate = rate;
    const double span_s = dn * win_s;
    const bool quiet = (double)(a->stab_done - n) * win_s >= a->p.stab_quiet_after_s &&
                       min_amp >= a->p.stab_quiet_amp_m;
    if (min_amp < a->p.stab_min_amp_m && !quiet)
        return;
    if (rate > a->stab_max_growth)
        a->stab_max_growth = rate;
    /* Growth must also have been there one window earlier (that fit's windows may be below the
     * floor): an earthquake's onset can grow as fast as the threshold over one fit, a
     * self-excited oscillation keeps growing. The default experiment's reference run fits up to
     * 2.14/s for one window alignment in four, but never two fits in a row above 1.82/s. */
    const bool growing = rate >= a->p.stab_growth_per_s && min_amp >= a->p.stab_min_amp_m &&
                         prev_rate >= a->p.stab_growth_per_s;
    if (!growing && !(quiet && rate > -a->p.stab_min_decay_per_s))
        return;
    drths_hold_cause_t c;
    drths_hold_cause_init(&c, DRTHS_HOLD_STABILITY);
    c.sub = growing ? 0 : 1;
    c.v[0] = (double)cross / (2.0 * span_s); /* Hz */
    c.v[1] = (exp(rate) - 1.0) * 100.0;      /* %/s */
    c.v[2] = span_s;
    c.v[3] = last;
    c.v[4] = first;
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, &c);
}

/* Phase 4, the FEEDBACK: this tick's measurement goes into the ring, and the message carries
 * the measurements of ticks t - offset(k) (the offsets both sites agreed on in the handshake,
 * PROTOCOL.md section 8) and the echo of the newest COMMAND. */
static void build_feedback(drths_actuator_t *a, const tick_state_t *s, drths_actuator_out_t *out)
{
    const uint64_t tick = s->tick;
    drths_fb_sample_t *fs = &a->fb_ring[tick % a->fb_cap];
    memset(fs, 0, sizeof *fs);
    a->fb_ring_tick[tick % a->fb_cap] = tick;
    fs->cmd_tick = s->cmd_tick;
    fs->flags =
        (uint8_t)((s->concealed ? DRTHS_FB_CONCEALED : 0u) | (a->hold ? DRTHS_FB_HOLD : 0u));
    fs->ch[0].force_n = s->mf;
    fs->ch[0].disp_m = s->md;

    drths_msg_t *fb = &out->feedback;
    fb->type = DRTHS_MSG_FEEDBACK;
    fb->epoch = a->epoch;
    fb->tick = tick;
    fb->counter = 0;
    fb->session_id = 0;
    drths_msg_feedback_t *f = &fb->u.feedback;
    f->n_channels = 1;
    f->echo_counter = a->have_cmd ? a->echo_counter : 0;
    f->echo_hold_ns = a->have_cmd && s->now_ns > a->echo_arrival_ns
                          ? (uint64_t)(s->now_ns - a->echo_arrival_ns)
                          : 0;
    /* Near the start only the ticks that exist (>= 0) are carried. A tick the ring does not hold
     * (no FEEDBACK was built for it) ends the samples too: the receiver reads sample k as tick
     * t - offset(k), so none may be skipped. */
    const int n = drths_wire_samples_of(tick, a->p.r);
    int k = 0;
    for (; k < n; k++) {
        const uint64_t t = drths_wire_sample_tick(tick, k);
        if (a->fb_ring_tick[t % a->fb_cap] != t)
            break;
        f->s[k] = a->fb_ring[t % a->fb_cap];
    }
    f->r = (uint8_t)k;
}

/* Phase 5, the ABORT: in HOLD, unless the numerical site's own ABORT caused it, three of them
 * abort_interval_s apart from the first HOLD tick. */
static void build_abort(drths_actuator_t *a, uint64_t tick, drths_actuator_out_t *out)
{
    out->send_abort = 0;
    if (!a->hold_started || !a->hold_abort_peer || a->aborts_sent >= 3 ||
        tick < a->hold_tick + (uint64_t)a->aborts_sent * a->abort_every_ticks)
        return;
    out->send_abort = 1;
    a->aborts_sent++;
    memset(&out->abort, 0, sizeof out->abort);
    out->abort.type = DRTHS_MSG_ABORT;
    out->abort.epoch = a->epoch;
    out->abort.tick = tick;
    out->abort.u.stop.reason = a->hold_reason;
    /* A fixed text naming the cause, or the cause's own text: the RT thread formats nothing
     * (site-physical/hold_cause.h says why the numbers stay at this site). */
    drths_scopy(out->abort.u.stop.text, sizeof out->abort.u.stop.text,
                drths_hold_cause_abort_text(&a->hold_cause));
}

/* Phase 6, the end of the run: in HOLD once the drive has settled and the linger (and the
 * three ABORTs) are over; without HOLD at the STOP's last commanded tick, which writes the
 * safe state at the last drive (no step; the damper goes to its safe value). */
static void end_of_run(drths_actuator_t *a, uint64_t tick, drths_actuator_out_t *out)
{
    out->finished = 0;
    if (a->hold_started) {
        uint64_t end = a->linger_ticks;
        if (a->hold_abort_peer && 2 * a->abort_every_ticks > end)
            end = 2 * a->abort_every_ticks;
        if (tick >= a->hold_tick + end && a->hold_settled) {
            out->finished = 1;
            a->end_reason = a->hold_reason;
        }
    } else if (!a->hold && a->stop_received && tick >= a->stop_tick) {
        out->finished = 1;
        a->end_reason = DRTHS_STOP_END_OF_RECORD;
        const int rc =
            drths_daq_safe_state(a->daq, drths_daq_last_drive(a->daq), a->daq->env.last_ns);
        if (rc) {
            a->c.daq_errors++;
            if (!out->daq_rc)
                out->daq_rc = rc;
        }
    }
    a->finished = out->finished;
    if (out->finished)
        out->events |= DRTHS_ACT_EV_FINISHED;
}

/* The HOLD's ticks as the row flags them (fill_row): from the tick whose phase found the cause,
 * which is the tick before the ramp's first when the DAQ, a measurement limit or the stability
 * monitor found it after this tick's drive was written. summary.json, the log and the report
 * count these, so they agree with physical.csv. */
static void count_hold(drths_actuator_t *a, uint64_t tick)
{
    if (!a->hold)
        return;
    if (a->c.hold_ticks++ == 0)
        a->hold_first_tick = tick;
}

/* Phase 7, the physical.csv row. In HOLD the command column is the drive. */
static void fill_row(const drths_actuator_t *a, const tick_state_t *s, drths_actuator_out_t *out)
{
    double *row = out->row;
    row[DRTHS_ACT_COL_TICK] = (double)s->tick;
    row[DRTHS_ACT_COL_TIME] = (double)s->tick / a->p.rate_hz;
    row[DRTHS_ACT_COL_CMD_TICK] = (double)s->cmd_tick;
    row[DRTHS_ACT_COL_COMMAND] = s->holding ? s->drive : s->cmd.disp_m;
    row[DRTHS_ACT_COL_COMMAND_VEL] = s->vel;
    row[DRTHS_ACT_COL_DAMPER_COMMAND] = s->dcmd;
    /* The column marks the guesses; a late command played behind its tick has cmd_tick < tick. */
    row[DRTHS_ACT_COL_CONCEALED] = s->concealed && !s->late_played;
    row[DRTHS_ACT_COL_HOLD] = a->hold ? 1.0 : 0.0;
    row[DRTHS_ACT_COL_MEAS_DISP] = s->md;
    row[DRTHS_ACT_COL_MEAS_FORCE] = s->mf;
    row[DRTHS_ACT_COL_CMD_LEAD] = s->lead_ms;
    row[DRTHS_ACT_COL_WAKE_LATE] = (double)s->lateness_ns * 1e-3;
    row[DRTHS_ACT_COL_DRIVE] = s->drive;
    row[DRTHS_ACT_COL_TRACK_ERR] = s->terr;
    row[DRTHS_ACT_COL_TRACK_RMS] = drths_tracking_rms_pct(&a->track);
    row[DRTHS_ACT_COL_TRACK_TI] = drths_tracking_ti(&a->track);
    for (int k = 0; k < 4; k++)
        row[DRTHS_ACT_COL_THETA0 + k] = a->comp.theta[k];
}

int drths_actuator_tick(drths_actuator_t *a, uint64_t tick, int64_t deadline_ns, int64_t now_ns,
                        drths_actuator_out_t *out)
{
    if (a->finished)
        return -EALREADY;
    if (!a->started)
        return -EAGAIN;
    tick_state_t s = {
        .tick = tick,
        .deadline_ns = deadline_ns,
        .now_ns = now_ns,
        .cmd = {0.0, 0.0, 0.0, a->p.rest_damper_command},
        .cmd_tick = -1,
        .lead_ms = NAN,
        .drive = drths_daq_last_drive(a->daq),
        .md = NAN,
        .mf = NAN,
        .terr = NAN,
    };
    begin_tick(a, &s, out);
    s.holding = choose_command(a, &s, out);
    if (!s.holding)
        s.holding = compute_drive(a, &s);
    if (s.holding)
        hold_drive(a, &s, out);
    write_and_read(a, &s, out);
    check_stability(a, &s);
    build_feedback(a, &s, out);
    build_abort(a, tick, out);
    end_of_run(a, tick, out);
    count_hold(a, tick);
    fill_row(a, &s, out);
    return 0;
}

double drths_actuator_tracking_rms_pct(const drths_actuator_t *a)
{
    if (!(a->track.sum_d2 > 0.0))
        return NAN;
    return drths_tracking_rms_pct(&a->track);
}

int drths_actuator_safe_state(drths_actuator_t *a)
{
    if (!a->daq || !a->daq->ops)
        return -EBADF;
    /* Before the first tick nothing was written and the drive is unknown: writing the rest
     * position could step a real actuator, so the outputs are left as they are. */
    if (!a->c.ticks)
        return 0;
    int rc = drths_daq_safe_state(a->daq, drths_daq_last_drive(a->daq), a->daq->env.last_ns);
    if (rc == -EDOM) /* the last admitted drive was written again */
        rc = 0;
    a->c.safe_writes++;
    if (rc)
        a->c.safe_write_failures++;
    return rc;
}
