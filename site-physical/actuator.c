#include "site-physical/actuator.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/setup.h"
#include "common/models/lagrange.h"

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
    if (!(p->limit_meas_disp_m > 0.0))
        return drths_error_set(err, -EINVAL,
                               "physical.limit_measured_displacement_m: must be > 0 (got %g)",
                               p->limit_meas_disp_m);
    if (p->hold_mode != DRTHS_HOLD_AT_POSITION && p->hold_mode != DRTHS_HOLD_RAMP)
        return drths_error_set(err, -EINVAL, "physical.hold: unknown mode %d", (int)p->hold_mode);
    if (!(fabs(p->safe_position_m) < p->limit_drive_m))
        return drths_error_set(err, -EINVAL,
                               "physical.safe_position_m: must lie inside +/- limit_drive_m "
                               "(got %g)", p->safe_position_m);
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
    const double dt = 1.0 / p->rate_hz;
    /* Every compensator is designed on the average plant model, as Phillips & Spencer (2013)
     * do; `feedforward` then schedules the inverse between the 0 A and 2.5 A models on the
     * commanded current, and `adaptive` identifies factors on that scheduled inverse. */
    rc = drths_comp_init(&a->comp, p->compensation, &DRTHS_PLANT_AVERAGE, p->comp_io_delay_ticks,
                         dt, err);
    if (!rc && p->compensation == DRTHS_COMPENSATION_ADAPTIVE)
        rc = drths_comp_set_adaptive(&a->comp, p->adaptive_window_s, p->adaptive_bound, err);
    if (!rc && (p->compensation == DRTHS_COMPENSATION_FEEDFORWARD ||
                p->compensation == DRTHS_COMPENSATION_ADAPTIVE)) {
        rc = drths_comp_schedule(&a->comp, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 2.5, err);
        if (!rc)
            rc = drths_comp_current_model(&a->comp, &p->damper_nominal, err);
    }
    if (!rc)
        rc = drths_comp_set_limits(&a->comp, p->ff_max_acc_m_s2, p->ff_max_jerk_m_s3, err);
    if (rc)
        return drths_error_prefix(err, rc, "actuator.compensation %s",
                                  drths_compensation_name(p->compensation));
    a->lookahead = drths_comp_lookahead_needed(&a->comp);
    if (a->lookahead > DRTHS_ACT_MAX_LOOKAHEAD)
        a->lookahead = DRTHS_ACT_MAX_LOOKAHEAD;
    drths_comp_reset_command(&a->comp, p->rest_damper_command);
    drths_comp_adapt_reset(&a->comp, 0.0);
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
    /* The delayed playback's catch-up (play_late), from the rate alone. */
    a->catchup_slew = DRTHS_ACT_CATCHUP_SLEW_PER_S / p->rate_hz;
    a->catchup_ahead_ticks = (uint64_t)ceil(DRTHS_ACT_CATCHUP_AHEAD_MS * 1e-3 * p->rate_hz - 1e-9);
    for (size_t i = 0; i < DRTHS_ACT_LATE_MEMORY; i++)
        a->concealed_tick[i] = a->primary_tick[i] = -1;
    drths_cmd_channel_t rest = {0.0, 0.0, 0.0, p->rest_damper_command};
    for (int i = 0; i < 4; i++)
        a->hist[i] = rest;
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
    a->late_s = calloc(DRTHS_ACT_LATE_MEMORY, sizeof *a->late_s);
    a->late_tick = malloc(DRTHS_ACT_LATE_MEMORY * sizeof *a->late_tick);
    if (!a->late_s || !a->late_tick) {
        drths_actuator_close(a);
        return drths_error_set(err, -ENOMEM, "actuator: no memory for %d late commands",
                               DRTHS_ACT_LATE_MEMORY);
    }
    for (size_t i = 0; i < DRTHS_ACT_LATE_MEMORY; i++)
        a->late_tick[i] = -1;
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
    free(a->late_s);
    free(a->late_tick);
    a->fb_ring = NULL;
    a->fb_ring_tick = NULL;
    a->late_s = NULL;
    a->late_tick = NULL;
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

void drths_actuator_hold(drths_actuator_t *a, uint8_t reason, int abort_peer, const char *text)
{
    if (a->hold || a->finished)
        return;
    a->hold = 1;
    a->hold_reason = reason;
    a->hold_abort_peer = abort_peer;
    drths_scopy(a->hold_text, sizeof a->hold_text, text);
}

/* The commands kept for the delayed playback, by tick (the latest DRTHS_ACT_LATE_MEMORY): tick
 * t's, or NULL when it is not kept. */
static const drths_cmd_channel_t *kept_at(const drths_actuator_t *a, uint64_t t)
{
    size_t slot = t % DRTHS_ACT_LATE_MEMORY;
    return a->late_tick[slot] == (int64_t)t ? &a->late_s[slot] : NULL;
}

static void keep(drths_actuator_t *a, uint64_t t, const drths_cmd_channel_t *c)
{
    a->late_tick[t % DRTHS_ACT_LATE_MEMORY] = (int64_t)t;
    a->late_s[t % DRTHS_ACT_LATE_MEMORY] = *c;
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
        drths_playout_result_t r = drths_playout_put(&a->pb, tick, &c->s[k][0], arrival_ns);
        switch (r) {
        case DRTHS_PLAYOUT_STORED:
            if (k > 0)
                a->c.from_redundancy++;
            break;
        case DRTHS_PLAYOUT_DUPLICATE:
            break;
        case DRTHS_PLAYOUT_TOO_FAR:
            if (k == 0)
                a->c.too_far++;
            break;
        case DRTHS_PLAYOUT_LATE: {
            /* Copies of ticks that were played from a received sample are redundancy; a copy of
             * a tick that had to be concealed is a late command, counted once, and kept for
             * the delayed playback (play_late). */
            int64_t *slot = &a->concealed_tick[tick % DRTHS_ACT_LATE_MEMORY];
            if (*slot == (int64_t)tick) {
                a->c.late++;
                *slot = -1;
            }
            if (!kept_at(a, tick))
                keep(a, tick, &c->s[k][0]);
            break;
        }
        }
    }
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
        a->last_base = a->L;
        a->c.epochs = 1;
        /* The first COMMAND (tick L + 1) is sent with EPOCH 1, before tick 0 has run: with the
         * play head at L + 1 it fits even when L exceeds the buffer. Taking tick L moves the
         * head there and keeps anything already stored for later ticks. */
        if (drths_playout_head(&a->pb) <= a->L)
            (void)drths_playout_take(&a->pb, a->L, 0, &(drths_cmd_channel_t){0}, NULL);
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
        char text[DRTHS_WIRE_MAX_TEXT + 1];
        size_t n = drths_scopy(text, sizeof text, "numerical site aborted: ");
        n += drths_scopy(text + n, sizeof text - n, drths_stop_reason_name(m->u.stop.reason));
        if (m->u.stop.text[0]) {
            n += drths_scopy(text + n, sizeof text - n, ": ");
            drths_scopy(text + n, sizeof text - n, m->u.stop.text);
        }
        drths_actuator_hold(a, m->u.stop.reason, 0, text);
        break;
    }
    default:
        break;
    }
}

/* ---- HOLD causes ---------------------------------------------------------------------------- */

/* Each check below returns true when its limit is exceeded, after entering HOLD through
 * drths_actuator_hold with a sentence naming the limit and the offending value (ignored when a
 * cause came first, such as a failed write before the measurement is checked). */

/* The command limits, checked before a command reaches the drive. */
static bool check_command(drths_actuator_t *a, const drths_cmd_channel_t *s)
{
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    if (fabs(s->disp_m) > a->p.limit_displacement_m) {
        snprintf(text, sizeof text, "displacement limit: command %.6g m exceeds %.6g m", s->disp_m,
                 a->p.limit_displacement_m);
    } else if (fabs(s->vel_m_s) > a->p.limit_velocity_m_s) {
        snprintf(text, sizeof text, "velocity limit: command velocity %.6g m/s exceeds %.6g m/s",
                 s->vel_m_s, a->p.limit_velocity_m_s);
    } else {
        return false;
    }
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, text);
    return true;
}

/* The measurement limits, checked after each read. */
static bool check_measurement(drths_actuator_t *a, double disp_m, double force_N)
{
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    if (!(fabs(disp_m) <= a->p.limit_meas_disp_m)) {
        snprintf(text, sizeof text, "measured displacement limit: %.6g m exceeds %.6g m", disp_m,
                 a->p.limit_meas_disp_m);
    } else if (!(fabs(force_N) <= a->p.limit_force_N)) {
        snprintf(text, sizeof text, "force limit: measured force %.6g kN exceeds %.6g kN",
                 force_N * 1e-3, a->p.limit_force_N * 1e-3);
    } else {
        return false;
    }
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, text);
    return true;
}

/* The drive limit, checked before the drive is written. */
static bool check_drive(drths_actuator_t *a, double drive_m)
{
    if (fabs(drive_m) <= a->p.limit_drive_m)
        return false;
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    snprintf(text, sizeof text, "drive limit: drive signal %.6g m exceeds %.6g m (not written)",
             drive_m, a->p.limit_drive_m);
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, text);
    return true;
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
    const int64_t from_ns = a->dry_since_ns > a->watchdog_ref_ns ? a->dry_since_ns
                                                                 : a->watchdog_ref_ns;
    const int64_t limit_ns = (int64_t)llround(a->p.watchdog_s * 1e9);
    const int64_t quiet_ns = now_ns - from_ns;
    if (quiet_ns <= limit_ns)
        return false;
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    snprintf(text, sizeof text, "watchdog: no command to play for %.1f ms (limit %.6g ms)",
             (double)quiet_ns * 1e-6, a->p.watchdog_s * 1e3);
    drths_actuator_hold(a, DRTHS_STOP_WATCHDOG, 1, text);
    return true;
}

/* A failed DAQ call is counted and is a HOLD (a no-op when already in HOLD). */
static void daq_failed(drths_actuator_t *a, int rc, const char *what)
{
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    snprintf(text, sizeof text, "DAQ %s failed (%s)", what, strerror(-rc));
    a->c.daq_errors++;
    drths_actuator_hold(a, DRTHS_STOP_INTERNAL_ERROR, 1, text);
}

/* A converter at an end code (the DAQ read fails with -ERANGE and flags the channel): the
 * true value may lie anywhere beyond, so no limit can be checked against it. A limit HOLD of
 * its own, counted as a DAQ error (the read did fail). */
static void converter_saturated(drths_actuator_t *a, double disp_m, double force_N)
{
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    if (a->daq->saturated & (1u << DRTHS_DAQ_DISPLACEMENT_IN))
        snprintf(text, sizeof text,
                 "converter saturated: measured displacement reads %.6g m, the end of its "
                 "converter; the true value may lie beyond",
                 disp_m);
    else
        snprintf(text, sizeof text,
                 "converter saturated: measured force reads %.6g kN, the end of its converter; "
                 "the true value may lie beyond",
                 force_N * 1e-3);
    a->c.daq_errors++;
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, text);
}

/* ---- concealment and rejoin ----------------------------------------------------------------- */

static void push_history(drths_actuator_t *a, const drths_cmd_channel_t *s)
{
    a->hist[0] = a->hist[1];
    a->hist[1] = a->hist[2];
    a->hist[2] = a->hist[3];
    a->hist[3] = *s;
}

/* The acceleration and jerk the concealment and the rejoin respect: the feedforward's limits
 * (physical.feedforward_max_acceleration_m_s2 and _jerk_m_s3), which bound what the desired
 * trajectory may do anyway, or DRTHS_ACT_DEFAULT_MAX_ACC_M_S2 / _JERK_M_S3 where they are 0 (no
 * limit). */
static double max_acc(const drths_actuator_t *a)
{
    return a->p.ff_max_acc_m_s2 > 0.0 ? a->p.ff_max_acc_m_s2 : DRTHS_ACT_DEFAULT_MAX_ACC_M_S2;
}

static double max_jerk(const drths_actuator_t *a)
{
    return a->p.ff_max_jerk_m_s3 > 0.0 ? a->p.ff_max_jerk_m_s3 : DRTHS_ACT_DEFAULT_MAX_JERK_M_S3;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The velocity left, braking from velocity v with this tick's acceleration na, once the
 * acceleration has been taken back to 0 by at most jdt per tick (the tick in which it is below
 * jdt takes it to 0 and moves no more). In closed form: the k = ceil(|na| / jdt) - 1 ticks
 * that follow have accelerations |na| - jdt, |na| - 2 jdt, ..., an arithmetic series, so the
 * cost does not grow with |na| / jdt (a bisection calls this some 40 times a concealed tick). */
static double stop_velocity(double v, double na, double jdt, double dt)
{
    const double m = fabs(na);
    const double k = m > jdt ? ceil(m / jdt) - 1.0 : 0.0;
    const double dv = (k * m - jdt * k * (k + 1.0) / 2.0) * dt;
    return v + na * dt + (na > 0.0 ? dv : -dv);
}

/* The braking acceleration of a concealed tick: within jdt of the last one and within +/- d
 * (or moving towards that band at jdt per tick), the one that brings the velocity left
 * (stop_velocity) to 0, else the band's end nearest to it. So the command slows at d, takes its
 * acceleration back to 0 in time and rests exactly, never reversing; at rest it stays there. */
static double brake_acceleration(double v, double acc, double d, double jdt, double dt)
{
    double lo = acc - jdt, hi = acc + jdt;
    lo = lo < -d ? fmin(-d, hi) : lo;
    hi = hi > d ? fmax(d, lo) : hi;
    if (stop_velocity(v, lo, jdt, dt) >= 0.0)
        return lo;
    if (stop_velocity(v, hi, jdt, dt) <= 0.0)
        return hi;
    /* stop_velocity grows with na: bisection, to the resolution of a double. */
    for (int i = 0; i < 100 && hi - lo > 1e-12 * (fabs(lo) + fabs(hi) + 1e-12); i++) {
        const double mid = 0.5 * (lo + hi);
        if (stop_velocity(v, mid, jdt, dt) < 0.0)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* One tick ahead of the last applied commands, in terms of the discrete motion: the last step
 * s = x(n) - x(n-1) (velocity s / dt) and acceleration a = (x(n) - 2 x(n-1) + x(n-2)) / dt^2;
 * the tick's new acceleration a' gives the step s + a' dt^2, so (a' - a) / dt is the jerk.
 *
 * The first DRTHS_ACT_CONCEAL_EXTRAP_TICKS concealed ticks in a row extrapolate: a' is the
 * cubic's through the last four commands (third-order Lagrange extrapolation,
 * common/models/lagrange.h), which is exact for a smooth trajectory, kept within the jerk limit of a
 * and within the acceleration limit (right after a kink the cubic accelerates away: through c,
 * c, c, c - d it goes on c - 4d, ...). Later ones brake: a' moves towards the braking
 * acceleration -sign(v*) min(D, sqrt(2 J |v*|)) by at most J dt, where v* = v + a |a| / (2 J) is
 * the velocity left once a has been taken to 0 at the jerk J, D the braking deceleration
 * (DRTHS_ACT_CONCEAL_DECEL_M_S2, at most half the acceleration limit) and J half the jerk
 * limit. That is the time-optimal jerk-limited stop: the velocity falls to 0 together with the
 * acceleration without changing sign, and the command then rests (a 0.25 m/s motion stops in
 * about 26 ms and 3.2 mm; one at the 1 m/s velocity limit in 0.1 s and 5 cm). Close to rest, a
 * residual below one tick's jerk is taken out in one tick, so the command comes to rest
 * exactly. A concealed command therefore never runs away: after the few extrapolated ticks it
 * only decelerates. The damper command is held: a semi-active command switches between its
 * bounds, and a cubic through a switch leaves them. */
static void conceal(const drths_actuator_t *a, drths_cmd_channel_t *out)
{
    out->damper_cmd = a->hist[3].damper_cmd;
    const double dt = 1.0 / a->p.rate_hz, dt2 = dt * dt;
    const double A = max_acc(a), J = max_jerk(a);
    const double x3 = a->hist[3].disp_m, x2 = a->hist[2].disp_m, x1 = a->hist[1].disp_m;
    const double step = x3 - x2; /* m per tick */
    const double v = step / dt;
    const double acc = (x3 - 2.0 * x2 + x1) / dt2;
    double na;
    if (a->consecutive_concealed < DRTHS_ACT_CONCEAL_EXTRAP_TICKS) {
        const double x[4] = {a->hist[0].disp_m, x1, x2, x3};
        na = (drths_lagrange3_next(x) - x3 - step) / dt2;
        na = clampd(na, acc - J * dt, acc + J * dt);
        na = clampd(na, -A, A);
    } else {
        const double d = fmin(DRTHS_ACT_CONCEAL_DECEL_M_S2, 0.5 * A);
        na = brake_acceleration(v, acc, d, 0.5 * J * dt, dt);
        /* At rest (to rounding) the command stays exactly where it is. */
        if (fabs(v) < 1e-12 && fabs(acc) < 1e-9)
            na = -v / dt;
    }
    const double nstep = step + na * dt2;
    /* Velocity and acceleration follow the displacement actually concealed (the received
     * samples' own fields are the numerical site's and may not agree with a kinked path). */
    out->disp_m = x3 + nstep;
    out->vel_m_s = nstep / dt;
    out->acc_m_s2 = na;
}

/* The shapes of the rejoin blend's terms, as value (d = 0) or first derivative (d = 1) in x:
 * h0 = (1 - x)^3 (1 + 3x + 6x^2), from 1 at x = 0 to 0 at x = 1, its slope and curvature 0 at
 * both ends; g = the integral of h0 from 0, x - 5x^4/2 + 3x^5 - x^6, from 0 to 1/2 with slope
 * from 1 to 0 (monotonically) and curvature 0 at both ends; h2 = x^2 (1 - x)^3 / 2, 0 at both
 * ends with curvature 1 at x = 0. They extend to x < 0 as the same polynomials. */
static double rejoin_h(int j, int d, double x)
{
    const double y = 1.0 - x, y2 = y * y, y3 = y2 * y;
    switch (j * 2 + d) {
    case 0:
    case 3: /* h0, and g' = h0 */
        return y3 * (1.0 + x * (3.0 + 6.0 * x));
    case 1: /* h0' = -30 x^2 (1 - x)^2 */
        return -30.0 * x * x * y2;
    case 2: /* g */
        return x * (1.0 + x * x * x * (-2.5 + x * (3.0 - x)));
    case 4: /* h2 */
        return 0.5 * x * x * y3;
    default: /* h2' = x (1 - x)^2 (2 - 5x) / 2 */
        return 0.5 * x * y2 * (2.0 - 5.0 * x);
    }
}

/* The blend u ticks after the rejoin (d = 0), or its slope in m per tick (d = 1):
 *   e(u) = (e0 + w1 N1 / 2) h0(u / N0) + w1 N1 (g(u / N1) - 1/2) + w2 N2^2 h2(u / N2),
 * each shape taken at its end value (0, 1/2, 0) from its own length on. */
static double rejoin_eval(const drths_actuator_t *a, double u, int d)
{
    const double n0 = (double)a->rejoin_n[0], n1 = (double)a->rejoin_n[1];
    const double n2 = (double)a->rejoin_n[2];
    const double w0 = a->rejoin_w[0] + 0.5 * a->rejoin_w[1] * n1;
    double e = 0.0;
    if (u < n0)
        e += w0 * rejoin_h(0, d, u / n0) / (d ? n0 : 1.0);
    if (u < n1)
        e += a->rejoin_w[1] * (d ? rejoin_h(1, 1, u / n1) : n1 * (rejoin_h(1, 0, u / n1) - 0.5));
    if (u < n2)
        e += a->rejoin_w[2] * (d ? n2 * rejoin_h(2, 1, u / n2) : n2 * n2 * rejoin_h(2, 0, u / n2));
    return e;
}

/* The rejoin blend at tick t (0 outside it). */
static double rejoin_offset(const drths_actuator_t *a, uint64_t t)
{
    if (t < a->rejoin_tick || t >= a->rejoin_tick + a->rejoin_ticks)
        return 0.0;
    return rejoin_eval(a, (double)(t - a->rejoin_tick), 0);
}

/* Its slope, in m per tick. */
static double rejoin_slope(const drths_actuator_t *a, uint64_t t)
{
    if (t < a->rejoin_tick || t >= a->rejoin_tick + a->rejoin_ticks)
        return 0.0;
    return rejoin_eval(a, (double)(t - a->rejoin_tick), 1);
}

/* The shortest whole number of ticks (at least DRTHS_ACT_REJOIN_MIN_TICKS, at most one second)
 * no shorter than each of the durations given in seconds. */
static uint64_t rejoin_len(const drths_actuator_t *a, double t1, double t2, double t3)
{
    const double s = fmax(t1, fmax(t2, t3)) * a->p.rate_hz;
    const double n = fmin(fmax(ceil(s - 1e-9), DRTHS_ACT_REJOIN_MIN_TICKS), ceil(a->p.rate_hz));
    return (uint64_t)fmax(n, DRTHS_ACT_REJOIN_MIN_TICKS);
}

/* A received command at `tick` after concealed ticks: the concealment has taken the actuator
 * where the commands are not, moving differently. Instead of stepping there, the commands are
 * offset by a blend e that starts where the concealment was going and vanishes, with its first
 * two derivatives, a bounded number of ticks later: command(t) = x(t) + e(t - tick), x the
 * received trajectory.
 *
 * Start: x is carried two ticks back by the cubic through x(tick .. tick + 3) from the playout
 * buffer when their third difference is within the jerk limit (with fewer samples ahead, a lower
 * order; with none, the sample's own velocity); across a kink (the fillers of a raise of L) by
 * the line through x(tick), x(tick + 1) and the smaller second difference, within the
 * acceleration limit; the
 * differences e(-2), e(-1) between the last two applied commands and that extension, and e(0)
 * between the concealment's next value and x(tick), give the blend's offset p, velocity v and
 * acceleration c at its start. The blend is the sum of three quintic terms, one per initial
 * value: p h0(u / N0) + v T1 h1(u / N1) + c T2^2 h2(u / N2), each vanishing with its slope and
 * curvature after its own length (u in ticks, T = N dt), their weights fitted so that the
 * blend passes exactly through e(-2), e(-1) and e(0). So the commands applied, this tick's and
 * the blended ones after it form one smooth sequence: no step in displacement, velocity or
 * acceleration.
 *
 * Lengths: each term is given the shortest length at which its share of the budgets holds,
 * from the largest of its derivatives (|h0'| 1.875, |h0''| 5.774, |h0'''| 60; |h1''| 3.940,
 * |h1'''| 36; |h2'| 0.0678, |h2'''| 9): the blend's velocity beyond |v| within the HOLD ramp
 * rate (the speed trusted for a move nobody commanded; 4/5 to the offset term, 1/5 to the
 * acceleration term), its acceleration beyond |c| within half the acceleration limit (half to
 * each of the offset and velocity terms), and its jerk within half the jerk limit (a third to
 * each term). The command's derivatives are the received trajectory's plus these. The offset
 * term is the long one (the velocity budget: 2 mm take 75 ms at 0.05 m/s), the two others
 * settle the initial velocity and acceleration in a few ms. The acceleration term must also be
 * short for its velocity share; where the jerk forbids that, the jerk wins. Every length is at
 * most one second. */
static void start_rejoin(drths_actuator_t *a, uint64_t tick, const drths_cmd_channel_t *cmd,
                         const drths_cmd_channel_t ahead[3], size_t k, const double *behind)
{
    drths_cmd_channel_t next;
    conceal(a, &next);
    const double dt = 1.0 / a->p.rate_hz;
    const double r0 = cmd->disp_m;
    double rm1, rm2; /* the extension of x to tick - 1 and tick - 2 */
    if (behind) {
        /* Delayed playback: the two commands before this one arrived too; they are x there. */
        rm1 = behind[0];
        rm2 = behind[1];
    } else if (k >= 2) {
        const double r1 = ahead[0].disp_m, r2 = ahead[1].disp_m;
        const double J = max_jerk(a), A = max_acc(a);
        const double r3 = k >= 3 ? ahead[2].disp_m : 0.0;
        if (k >= 3 && fabs(r3 - 3.0 * r2 + 3.0 * r1 - r0) <= J * dt * dt * dt) {
            /* Within the jerk limit: the cubic, exact for a smooth trajectory. */
            rm1 = 4.0 * r0 - 6.0 * r1 + 4.0 * r2 - r3;
            rm2 = 10.0 * r0 - 20.0 * r1 + 15.0 * r2 - 4.0 * r3;
        } else {
            /* A kink among the samples ahead (a jump in velocity beyond the jerk limit: the
             * fillers of a raise of L hold the last position with velocity 0, and the
             * commands after them go on from it). Carried across it, the cubic (and even the
             * parabola) turns the kink into an acceleration of the received trajectory of
             * about v / dt that it does not have, which the blend would then match. So the
             * extension is the line through r0 and r1 with the smaller of the two second
             * differences (0 when they differ in sign), within the acceleration limit. */
            double s2 = r2 - 2.0 * r1 + r0;
            if (k >= 3) {
                const double s3 = r3 - 2.0 * r2 + r1;
                s2 = s2 * s3 <= 0.0 ? 0.0 : fabs(s2) < fabs(s3) ? s2 : s3;
            }
            s2 = clampd(s2, -A * dt * dt, A * dt * dt);
            rm1 = 2.0 * r0 - r1 + s2;
            rm2 = 3.0 * r0 - 2.0 * r1 + 3.0 * s2;
        }
    } else if (k == 1) {
        rm1 = 2.0 * r0 - ahead[0].disp_m;
        rm2 = 3.0 * r0 - 2.0 * ahead[0].disp_m;
    } else {
        const double v = isfinite(cmd->vel_m_s) ? cmd->vel_m_s : 0.0;
        rm1 = r0 - v * dt;
        rm2 = r0 - 2.0 * v * dt;
    }
    const double e0 = next.disp_m - r0;
    const double em1 = a->hist[3].disp_m - rm1, em2 = a->hist[2].disp_m - rm2;
    a->c.rejoins++;
    if (fabs(e0) > a->c.max_rejoin_offset_m)
        a->c.max_rejoin_offset_m = fabs(e0);
    /* The start in SI units, from the quadratic through the three values. */
    const double v = (1.5 * e0 - 2.0 * em1 + 0.5 * em2) / dt;
    const double c = fabs(e0 - 2.0 * em1 + em2) / (dt * dt);
    const double vb = a->p.ramp_rate_m_s, ab = 0.5 * max_acc(a), jb = 0.5 * max_jerk(a);
    a->rejoin_n[1] = rejoin_len(a, 1.875 * fabs(v) / (0.5 * ab),
                                sqrt(5.7735 * fabs(v) / (jb / 3.0)), 0.0);
    a->rejoin_n[2] = rejoin_len(a, 9.0 * c / (jb / 3.0), 0.0, 0.0);
    /* Its velocity grows with its length (|h2'| 0.0678 c T2), so the length the jerk share asks
     * for a large c (9 c / (jb / 3), growing with c too) moves the command by about c^2 / jb at
     * 1.2 m/s for c = 100 m/s^2 (the concealment's acceleration limit against the commands').
     * Beyond its velocity share (1/5 of the ramp rate) the term is made shorter, down to the
     * length at which it takes the blend's whole jerk budget. */
    if (c > 0.0 && 0.0678 * c * (double)a->rejoin_n[2] * dt > 0.2 * vb) {
        const uint64_t n_vel = (uint64_t)fmax(floor(0.2 * vb / (0.0678 * c) * a->p.rate_hz), 0.0);
        const uint64_t n_jerk = rejoin_len(a, 9.0 * c / jb, 0.0, 0.0);
        a->rejoin_n[2] = n_vel > n_jerk ? n_vel : n_jerk;
    }
    /* The velocity term moves v T1 / 2 by its end: the offset term takes that back too. */
    const double p = fabs(e0 + 0.5 * v * (double)a->rejoin_n[1] * dt);
    a->rejoin_n[0] = rejoin_len(a, 1.875 * p / (0.8 * vb), sqrt(5.7735 * p / (0.5 * ab)),
                                cbrt(60.0 * p / (jb / 3.0)));
    a->rejoin_ticks = a->rejoin_n[0];
    for (int j = 1; j < 3; j++)
        if (a->rejoin_n[j] > a->rejoin_ticks)
            a->rejoin_ticks = a->rejoin_n[j];
    a->rejoin_tick = tick;
    /* The weights: e(0) = e0 whatever w1 and w2; these from e(-1) and e(-2). */
    const double n0 = (double)a->rejoin_n[0], n1 = (double)a->rejoin_n[1];
    const double n2 = (double)a->rejoin_n[2];
    double m[2][2], rhs[2];
    for (int i = 0; i < 2; i++) {
        const double u = -(double)(i + 1), h0 = rejoin_h(0, 0, u / n0);
        m[i][0] = n1 * (0.5 * h0 + rejoin_h(1, 0, u / n1) - 0.5);
        m[i][1] = n2 * n2 * rejoin_h(2, 0, u / n2);
        rhs[i] = (i ? em2 : em1) - e0 * h0;
    }
    const double det = m[0][0] * m[1][1] - m[0][1] * m[1][0];
    a->rejoin_w[0] = e0;
    a->rejoin_w[1] = (rhs[0] * m[1][1] - m[0][1] * rhs[1]) / det;
    a->rejoin_w[2] = (m[0][0] * rhs[1] - rhs[0] * m[1][0]) / det;
}

/* The kept command at command time pos (ticks), interpolated linearly between the two around it;
 * false when one of them is not there. */
static bool late_at(const drths_actuator_t *a, double pos, drths_cmd_channel_t *out)
{
    const uint64_t i0 = (uint64_t)floor(pos);
    const double frac = pos - (double)i0;
    const drths_cmd_channel_t *c0 = kept_at(a, i0);
    if (!c0)
        return false;
    *out = *c0;
    if (frac > 0.0) {
        const drths_cmd_channel_t *c1 = kept_at(a, i0 + 1);
        if (!c1)
            return false;
        out->disp_m += frac * (c1->disp_m - c0->disp_m);
        out->vel_m_s += frac * (c1->vel_m_s - c0->vel_m_s);
        out->acc_m_s2 += frac * (c1->acc_m_s2 - c0->acc_m_s2);
    }
    return true;
}

/* The kept commands at the k command times pos + rate, pos + 2 rate, ..., into out, stopping at
 * the first one missing; returns how many. The delayed playback's preview (from the command time
 * applied now at its rate), and, at rate 1 from a tick, the late commands after it (as
 * drths_playout_lookahead gives the received ones). */
static size_t late_preview(const drths_actuator_t *a, double pos, double rate, size_t k,
                           drths_cmd_channel_t *out)
{
    size_t n = 0;
    while (n < k && late_at(a, pos + rate * (double)(n + 1), &out[n]))
        n++;
    return n;
}

/* The desired displacements of the ticks after `tick` (at most a->lookahead), into a->future:
 * 0 for rest ticks (<= L), then what the playout buffer holds, stopping at the first missing
 * one; *n is how many. A command beyond the displacement limit must not reach the drive even
 * through the preview (the feedforward's derivatives would amplify it): it is a HOLD as soon as
 * it is seen, and true is returned. */
static bool gather_future(drths_actuator_t *a, uint64_t tick, int *n_out)
{
    int n = 0;
    while (n < a->lookahead && tick + (uint64_t)n + 1 <= a->L)
        a->future[n++] = 0.0;
    *n_out = n;
    if (n == a->lookahead)
        return false;
    uint64_t from = tick + (uint64_t)n; /* lookahead reads from + 1 .. */
    /* In delayed playback the ticks ahead play the kept commands at the command times the
     * playback will reach, play_rate apart: a preview at whole command ticks while the
     * playback runs between them would put the current command up to a tick out of step with
     * the preview, a jerk the feedforward answers at its limit. */
    size_t k;
    if (!a->delayed)
        k = drths_playout_lookahead(&a->pb, from, (size_t)(a->lookahead - n), a->future_s);
    else if (a->consecutive_concealed)
        k = 0; /* a guess while the late commands pause: none of them continues it */
    else
        k = late_preview(a, a->play_pos, a->play_rate, (size_t)(a->lookahead - n), a->future_s);
    for (size_t i = 0; i < k; i++) {
        const double d = a->future_s[i].disp_m + rejoin_offset(a, from + 1 + i);
        a->future[n + (int)i] = d;
        if (!(fabs(d) <= a->p.limit_displacement_m)) {
            char text[DRTHS_WIRE_MAX_TEXT + 1];
            snprintf(text, sizeof text,
                     "displacement limit: command %.6g m for tick %llu exceeds %.6g m", d,
                     (unsigned long long)(from + 1 + i), a->p.limit_displacement_m);
            drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, text);
            *n_out = n + (int)i;
            return true;
        }
    }
    *n_out = n + (int)k;
    return false;
}

/* ---- the tick's phases ---------------------------------------------------------------------- */

/* What one tick carries from phase to phase. */
typedef struct tick_state {
    uint64_t tick;
    int64_t deadline_ns, now_ns;
    int64_t lateness_ns;     /* now_ns - deadline_ns */
    bool holding;            /* this tick drives the HOLD ramp */
    bool rest;               /* t <= L: the rest position, not a command */
    bool concealed;          /* the command was not there in time (flagged in the FEEDBACK) */
    bool late_played;        /* ... and a late command was played instead (delayed playback) */
    drths_cmd_channel_t cmd; /* the desired command (rest, received or concealed) */
    int64_t cmd_tick;        /* the tick of the command applied, -1 for none */
    double lead_ms;          /* how long before its tick the command arrived, NaN for none */
    double drive, vel, dcmd; /* what goes to the DAQ */
    double md, mf;           /* measured displacement and force, NaN after a failed read */
    double terr;             /* measured - desired displacement, NaN when not tracked */
} tick_state_t;

/* Lateness of the wake-up, the tick count and a new epoch taking effect at this tick. */
static void begin_tick(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    out->events = 0;
    s->lateness_ns = s->now_ns - s->deadline_ns;
    drths_hist_add(&a->lateness_ns, s->lateness_ns);
    if ((double)s->lateness_ns > a->p.late_wake_fraction * (double)a->dt_ns)
        a->c.late_wakeups++;
    a->c.ticks++;
    if (a->epoch_pending && s->tick >= a->pend_tick) {
        a->epoch = a->pend_epoch;
        a->L = a->pend_L;
        a->epoch_pending = 0;
        a->c.epochs++;
        out->events |= DRTHS_ACT_EV_EPOCH;
    }
}

/* A received command for tick `base` applied at this tick (base == tick in time, base < tick in
 * delayed playback): ends a concealed stretch or a switch between the late and the timely
 * commands with a rejoin, and is shifted by the rejoin offset. */
static void apply_command(drths_actuator_t *a, tick_state_t *s, uint64_t base, bool flowing)
{
    s->cmd_tick = (int64_t)base;
    if (a->consecutive_concealed || (base != a->last_base + 1 && !flowing)) {
        drths_cmd_channel_t ahead[3];
        const size_t k = base == s->tick ? drths_playout_lookahead(&a->pb, base, 3, ahead)
                                         : late_preview(a, (double)base, 1.0, 3, ahead);
        /* The two late commands before a late one, when they are there and the trajectory has
         * no kink through them (the fillers of a raise of L start with one, which the
         * extension in start_rejoin handles), are the trajectory behind it exactly. */
        double behind[2];
        bool have_behind = false;
        if (base != s->tick && base >= 2) {
            const drths_cmd_channel_t *c1 = kept_at(a, base - 1), *c2 = kept_at(a, base - 2);
            if (c1 && c2) {
                behind[0] = c1->disp_m;
                behind[1] = c2->disp_m;
                const double dt = 1.0 / a->p.rate_hz;
                have_behind = fabs(s->cmd.disp_m - 2.0 * behind[0] + behind[1]) <=
                              max_acc(a) * dt * dt;
            }
        }
        start_rejoin(a, s->tick, &s->cmd, ahead, k, have_behind ? behind : NULL);
    }
    s->cmd.disp_m += rejoin_offset(a, s->tick);
    s->cmd.vel_m_s += rejoin_slope(a, s->tick) * a->p.rate_hz;
    a->consecutive_concealed = 0;
    a->last_base = base;
    a->delayed = base != s->tick;
}

/* A command received in time for this tick. */
static void apply_received(drths_actuator_t *a, tick_state_t *s, int64_t lead_ns)
{
    apply_command(a, s, s->tick, false);
    a->play_rate = 1.0;
    a->c.applied++;
    drths_hist_add(&a->lead_ns, lead_ns);
    s->lead_ms = (double)lead_ns * 1e-6;
}

/* Whether the commands after base are there for the next `need` ticks: kept (late, or timely
 * while playing behind), or in the playout buffer for the ticks after `tick`. */
static bool commands_ahead(const drths_actuator_t *a, uint64_t base, uint64_t need, uint64_t tick)
{
    for (uint64_t t = base + 1; t <= base + need; t++)
        if (!kept_at(a, t) && !(t > tick && drths_playout_has(&a->pb, t)))
            return false;
    return true;
}

/* Delayed playback. This tick's command has not arrived, or the actuator is already playing
 * commands behind their ticks: when, with nothing buffered for this tick or a later one (the
 * commands are late or the link is silent; not a loss within a stream arriving in time) or
 * already playing them (a tick concealed in between included), the command after the last one
 * applied has arrived late, the trajectory is played from there, behind its ticks, instead of
 * guessed. The specimen then follows the numerical site's trajectory itself, late, rather than
 * an extrapolation braking to rest.
 *
 * While playing behind, the timely commands are kept with the late ones (choose_command), and
 * the playback catches up by time-scale modification, as adaptive playout does for speech
 * (Liang, Faerber & Girod 2003): the command time advances by a rate that moves between 1 and
 * 1 + 1/DRTHS_ACT_CATCHUP_EVERY by at most DRTHS_ACT_CATCHUP_SLEW_PER_S * dt a tick, the
 * command interpolated linearly between the two commands around it; faster while the commands
 * of the next DRTHS_ACT_CATCHUP_AHEAD_MS are there and the lag left exceeds what slowing back
 * down to 1 takes. So the specimen runs at most 5 % faster, its acceleration changes by at most
 * v * slew per tick, and once less than a tick behind the timely commands take over through a
 * rejoin of a fraction of a tick's motion. A rejoin between two lags (the offset v * lag, a
 * mm or more in strong motion) would move the specimen at up to the ramp rate where the
 * commands do not, which a velocity-dependent specimen answers with a force error of that
 * velocity times its damping.
 *
 * The FEEDBACK sample names the command nearest to the command time (cmd_tick) and is flagged
 * CONCEALED: the tick's own command was not there. Only within the budget: a command more than
 * max_concealed_ticks behind its tick is not played (conceal_missing then holds). Returns true
 * when it applied one. */
static bool play_late(drths_actuator_t *a, tick_state_t *s)
{
    if (!a->dry && !a->delayed)
        return false;
    const uint64_t tick = s->tick;
    const bool flowing = a->delayed && !a->consecutive_concealed;
    double pos;
    if (flowing) {
        /* The rate, towards its target. */
        const double fast = 1.0 + 1.0 / DRTHS_ACT_CATCHUP_EVERY; /* a constant */
        const double slew = a->catchup_slew;
        const uint64_t ahead = a->catchup_ahead_ticks;
        const double lag = (double)tick - (a->play_pos + a->play_rate);
        const double down = (a->play_rate - 1.0) * (a->play_rate - 1.0) / (2.0 * slew) + 1.0;
        const double target =
            lag > down && commands_ahead(a, (uint64_t)a->play_pos, ahead + 2, tick) ? fast : 1.0;
        a->play_rate += clampd(target - a->play_rate, -slew, slew);
        pos = a->play_pos + a->play_rate;
        if (pos > (double)tick - 1.0) {
            /* Less than a tick behind: the timely command, through a small rejoin (apply_command
             * starts one: the tick is not the one after the last command applied). */
            return false;
        }
    } else {
        /* The next command, or, after ticks concealed in between, one of the next that many:
         * each concealed tick stands for one missing command, as in a stream arriving in time,
         * so a command lost for good (all its copies) does not stop the playback. The oldest
         * there is taken, at the normal rate. */
        uint64_t base = a->last_base + 1;
        const uint64_t last = base + a->consecutive_concealed;
        while (base <= last && !kept_at(a, base))
            base++;
        if (base > last)
            return false;
        pos = (double)base;
        a->play_rate = 1.0;
    }
    const uint64_t i0 = (uint64_t)floor(pos);
    drths_cmd_channel_t c;
    if (i0 >= tick || tick - i0 > (uint64_t)a->p.max_concealed_ticks || !late_at(a, pos, &c))
        return false;
    s->cmd = c;
    s->cmd.vel_m_s *= a->play_rate;
    a->play_pos = pos;
    apply_command(a, s, i0, flowing);
    s->cmd_tick = (int64_t)floor(pos + 0.5);
    s->concealed = true;
    s->late_played = true;
    a->c.delayed++;
    if (tick - i0 > a->c.max_lag_ticks)
        a->c.max_lag_ticks = tick - i0;
    if (a->play_rate > 1.0)
        a->c.catchup_ticks++;
    return true;
}

/* A missing command: concealed, unless the newest command applied (received, in time or late)
 * is for a tick more than max_concealed_ticks before this one (the horizon of the guess), which
 * is a HOLD (returns true). Without late commands that is more than max_concealed_ticks
 * concealed in a row. */
static bool conceal_missing(drths_actuator_t *a, tick_state_t *s)
{
    const uint64_t horizon = s->tick - a->last_base;
    if (horizon > (uint64_t)a->p.max_concealed_ticks) {
        char text[DRTHS_WIRE_MAX_TEXT + 1];
        if (horizon == a->consecutive_concealed + 1)
            snprintf(text, sizeof text, "too many concealed commands (%llu in a row, limit %d)",
                     (unsigned long long)horizon, a->p.max_concealed_ticks);
        else
            snprintf(text, sizeof text,
                     "commands too late: the newest applied is %llu ticks behind its tick "
                     "(limit %d)",
                     (unsigned long long)horizon, a->p.max_concealed_ticks);
        drths_actuator_hold(a, DRTHS_STOP_HOLD, 1, text);
        return true;
    }
    /* a->delayed stays: the late commands go on after the ticks concealed in between. */
    conceal(a, &s->cmd);
    s->concealed = true;
    s->cmd_tick = (int64_t)s->tick;
    a->consecutive_concealed++;
    a->c.concealed++;
    if (a->consecutive_concealed > a->c.max_consecutive_concealed)
        a->c.max_consecutive_concealed = a->consecutive_concealed;
    a->concealed_tick[s->tick % DRTHS_ACT_LATE_MEMORY] = (int64_t)s->tick;
    return false;
}

/* Phase 1, the command: the rest position for t <= L; otherwise the watchdog, then the one
 * take of this tick from the playout buffer (in HOLD too, so that the play head keeps up and
 * a copy arriving later is counted late), then the received command, or a concealed one, and
 * the command limits. Returns true when the tick runs in HOLD. */
static bool choose_command(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    if (!a->hold && s->tick <= a->L) {
        s->rest = true;
        a->c.rest_ticks++;
        return false;
    }
    const bool hold = a->hold || check_watchdog(a, s->tick, s->now_ns, out);
    int64_t lead_ns = 0;
    const int rc = drths_playout_take(&a->pb, s->tick, s->deadline_ns, &s->cmd, &lead_ns);
    if (hold)
        return true;
    if (rc == 0 && a->delayed) {
        /* Kept for the delayed playback, which reaches it later (or now, having caught up). */
        keep(a, s->tick, &s->cmd);
    }
    if (rc == 0 && !a->delayed) {
        apply_received(a, s, lead_ns);
    } else if (play_late(a, s)) {
        /* Catching up: the tick's own command was there in time; played behind it, but not a
         * late one (the FEEDBACK's flag feeds the late rate of the delay estimator). */
        if (rc == 0)
            s->concealed = false;
    } else {
        /* Caught up (the tick's own command is the next one), or no late command to go on
         * with: the timely command, through a rejoin. */
        if (rc == 0)
            apply_received(a, s, lead_ns);
        else if (conceal_missing(a, s))
            return true;
    }
    return check_command(a, &s->cmd);
}

/* Phase 2, the drive outside HOLD: the compensation of the desired displacement with its past
 * and previewed future, checked against the drive limit before anything is written. Returns
 * true when the preview or the drive is a HOLD (the drive is then not written). */
static bool compute_drive(drths_actuator_t *a, tick_state_t *s)
{
    push_history(a, &s->cmd);
    drths_comp_set_command(&a->comp, s->cmd.damper_cmd);
    double past[4];
    for (int i = 0; i < 4; i++)
        past[i] = a->hist[i].disp_m;
    int nf;
    if (gather_future(a, s->tick, &nf))
        return true;
    s->drive = drths_comp_drive(&a->comp, past, a->future, nf);
    s->vel = s->cmd.vel_m_s;
    s->dcmd = s->cmd.damper_cmd;
    return check_drive(a, s->drive);
}

/* Phase 2 in HOLD: on its first tick the target is fixed; the drive then moves from the last
 * drive written towards it, never faster than the ramp rate, and the tick carries no command. */
static void hold_drive(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    if (!a->hold_started) {
        a->hold_started = 1;
        a->hold_tick = s->tick;
        out->events |= DRTHS_ACT_EV_HOLD;
        a->hold_target_m =
            a->p.hold_mode == DRTHS_HOLD_RAMP ? a->p.safe_position_m : a->last_meas_disp_m;
        /* A measurement that failed or left the limits is no place to hold at. */
        if (!(fabs(a->hold_target_m) < a->p.limit_drive_m))
            a->hold_target_m = a->last_drive_m;
    }
    const double max_step = a->p.ramp_rate_m_s / a->p.rate_hz;
    const double gap = a->hold_target_m - a->last_drive_m;
    s->drive = fabs(gap) <= max_step ? a->hold_target_m
                                     : a->last_drive_m + (gap > 0 ? max_step : -max_step);
    const double step = fabs(s->drive - a->last_drive_m);
    assert(step <= max_step * (1.0 + 1e-12));
    if (step > a->hold_max_step_m)
        a->hold_max_step_m = step;
    if (!a->hold_settled && s->drive == a->hold_target_m) {
        a->hold_settled = 1;
        a->settled_tick = s->tick;
        out->events |= DRTHS_ACT_EV_SETTLED;
    }
    s->vel = 0.0;
    s->dcmd = 0.0;
    s->cmd_tick = -1;
    s->concealed = false;
    s->lead_ms = NAN;
    a->c.hold_ticks++;
}

/* Phase 3, the DAQ: writes the drive (the safe state in HOLD), reads the measurement, checks
 * its limits and adds a commanded tick to the tracking. A failure or a limit here is a HOLD
 * that this tick's FEEDBACK and row flag and the next tick's drive carries out. */
static void write_and_read(drths_actuator_t *a, tick_state_t *s, drths_actuator_out_t *out)
{
    out->daq_rc = 0;
    int rc = s->holding ? drths_daq_safe_state(a->daq, s->drive)
                        : drths_daq_write(a->daq, s->drive, s->vel, s->dcmd);
    a->last_drive_m = s->drive;
    if (rc) {
        out->daq_rc = rc;
        daq_failed(a, rc, s->holding ? "safe state" : "write");
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
        daq_failed(a, rc, "read");
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
    const double freq = (double)cross / (2.0 * span_s);
    const double pct = (exp(rate) - 1.0) * 100.0;
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    if (growing)
        snprintf(text, sizeof text,
                 "stability: oscillation at %.1f Hz growing %.0f %%/s over %.1f s; amplitude "
                 "%.1f -> %.1f mm",
                 freq, pct, span_s, first * 1e3, last * 1e3);
    else
        snprintf(text, sizeof text,
                 "stability: oscillation at %.1f Hz not decaying after the record's end "
                 "(%+.0f %%/s over %.1f s); amplitude %.1f mm",
                 freq, pct, span_s, last * 1e3);
    drths_actuator_hold(a, DRTHS_STOP_LIMIT, 1, text);
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
    drths_scopy(out->abort.u.stop.text, sizeof out->abort.u.stop.text, a->hold_text);
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
        const int rc = drths_daq_safe_state(a->daq, a->last_drive_m);
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
        .drive = a->last_drive_m,
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
    return drths_daq_safe_state(a->daq, a->last_drive_m);
}
