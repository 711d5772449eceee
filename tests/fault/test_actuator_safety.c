/* Fault injection on the actuator site's state machine in virtual time (docs/design.md#safety),
 * with the realistic rehearsal specimen: the Phillips & Spencer (2013) three-pole servo-hydraulic
 * plant, the 200-kN MR damper, sensor noise, 16-bit converters, a one-tick I/O delay, 5 kHz and the
 * scheduled feedforward, all behind the virtual DAQ back end.
 *
 *  - A command beyond the displacement limit puts the site in HOLD when it arrives, long before
 *    its tick, so it never reaches the preview nor the drive; the HOLD ramp brakes from the
 *    drive's speed within the envelope and then never steps by more than ramp_rate_m_s * dt per
 *    tick, in both HOLD modes (ramp to the safe position; hold at the measured position) until
 *    it settles at its target.
 *  - A drive signal beyond its limit (the feedforward leads and amplifies a command that is
 *    itself inside the command limit) is never written: HOLD in that tick.
 *  - In every tick of every case the drive written stays inside the envelope (position,
 *    velocity, acceleration of successive drives).
 *  - A measured displacement beyond its limit: HOLD.
 *  - A link cut (no COMMAND arrives any more) longer than the watchdog: HOLD within the
 *    watchdog time plus one tick of the last COMMAND's arrival, and the rate limit holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "site-physical/actuator.h"

/* The HOLD sentence, formatted from the cause as the main thread does. */
static const char *hold_text(const drths_actuator_t *a)
{
    static char buf[DRTHS_WIRE_MAX_TEXT + 1];
    return drths_actuator_hold_text(a, buf, sizeof buf);
}

#define RATE 5000.0
#define DT_NS INT64_C(200000)
#define T0 INT64_C(5000000000)
#define L_TICKS 100
#define LEAD_NS INT64_C(4000000) /* each COMMAND arrives 4 ms (20 ticks) before its tick */

typedef double (*traj_fn)(uint64_t tick);

static struct {
    drths_specimen_t spec;
    drths_daq_t daq;
    drths_actuator_t a;
    drths_actuator_out_t out;
    uint64_t counter;
    traj_fn x;
    double prev_drive;
    double max_hold_step;
    uint64_t hold_ticks_seen;
    uint64_t first_hold_tick;
    double max_abs_drive;
    double prev_drive2;        /* the drive two ticks back */
    double hold_entry_speed_m_s; /* the drive's speed when HOLD began */
} W;

static void params(drths_actuator_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->rate_hz = RATE;
    p->r = 4;
    p->playout_ticks = 300;
    p->max_concealed_ticks = 1000000; /* only the watchdog acts on a silent link */
    p->watchdog_s = 0.020;
    p->limit_displacement_m = 0.1;
    p->limit_velocity_m_s = 1.0;
    p->limit_force_N = 250e3;
    p->limit_drive_m = 0.1;
    /* The experiment file's defaults of the rest of the envelope. */
    p->limit_drive_velocity_m_s = 1.25;
    p->limit_drive_acceleration_m_s2 = 200.0;
    p->limit_drive_offset_m = 0.01;
    p->max_tick_late_s = 0.02;
    p->limit_meas_disp_m = 0.1;
    p->hold_mode = DRTHS_HOLD_RAMP;
    p->safe_position_m = 0.0;
    p->ramp_rate_m_s = 0.01; /* 2 um per tick */
    p->compensation = DRTHS_COMPENSATION_FEEDFORWARD;
    p->comp_io_delay_ticks = 1;
    drths_damper_params_preset(&p->damper_nominal, DRTHS_DAMPER_PHILLIPS2013);
    p->hold_linger_s = 0.05;
    p->abort_interval_s = 0.005;
    p->late_wake_fraction = 0.5;
}

static void setup(const drths_actuator_params_t *p, traj_fn x)
{
    memset(&W, 0, sizeof W);
    drths_specimen_params_t sp;
    drths_specimen_params_default(&sp, DRTHS_DAMPER_PHILLIPS2013);
    drths_error_t err;
    assert_int_equal(drths_specimen_init(&W.spec, &sp, 1.0 / RATE, &err), 0);
    assert_int_equal(drths_daq_open_virtual(&W.spec, &W.daq, &err), 0);
    assert_int_equal(drths_actuator_init(&W.a, p, &W.daq, &err), 0);
    W.x = x;
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_EPOCH;
    m.u.epoch.new_epoch = 1;
    m.u.epoch.loop_delay_ticks = L_TICKS;
    drths_actuator_receive(&W.a, &m, T0 - 5 * DT_NS);
}

static void teardown(void)
{
    drths_actuator_close(&W.a);
    drths_daq_close(&W.daq);
    drths_specimen_close(&W.spec);
}

static int64_t deadline(uint64_t t)
{
    return T0 + (int64_t)t * DT_NS;
}

static void send_cmd(uint64_t T, int64_t arrival)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_COMMAND;
    m.epoch = 1;
    m.tick = T;
    m.counter = ++W.counter;
    m.u.command.n_channels = 1;
    m.u.command.r = 4;
    m.u.command.loop_delay_ticks = L_TICKS;
    for (int k = 0; k < 4; k++) {
        uint64_t t = T - (uint64_t)k;
        double d = t > L_TICKS ? W.x(t) : 0.0;
        m.u.command.s[k][0].disp_m = d;
        m.u.command.s[k][0].vel_m_s = 0.0;
        m.u.command.s[k][0].damper_cmd = 0.0;
    }
    drths_actuator_receive(&W.a, &m, arrival);
}

/* Runs ticks until the run finishes or `last` is reached. COMMANDs for ticks up to cut (0 = no
 * cut) arrive LEAD_NS before their tick. Checks the drive's rate limit in every HOLD tick.
 * Returns the last tick run. */
static uint64_t run(uint64_t last, uint64_t cut)
{
    const double max_step = W.a.p.ramp_rate_m_s / RATE;
    const uint64_t lead_ticks = (uint64_t)(LEAD_NS / DT_NS);
    for (uint64_t T = L_TICKS + 1; T <= L_TICKS + 1 + lead_ticks; T++)
        if (!cut || T <= cut)
            send_cmd(T, deadline(T) - LEAD_NS);
    uint64_t t = 0;
    for (; t <= last; t++) {
        uint64_t T = t + lead_ticks + 1 + L_TICKS;
        if (t > 0 && (!cut || T <= cut))
            send_cmd(T, deadline(T) - LEAD_NS);
        assert_int_equal(drths_actuator_tick(&W.a, t, deadline(t), deadline(t) + 10000, &W.out), 0);
        const double drive = W.out.row[DRTHS_ACT_COL_DRIVE];
        if (fabs(drive) > W.max_abs_drive)
            W.max_abs_drive = fabs(drive);
        /* The envelope, every tick. */
        assert_true(fabs(drive) <= W.a.p.limit_drive_m);
        if (t >= 1)
            assert_true(fabs(drive - W.prev_drive) * RATE <= W.a.p.limit_drive_velocity_m_s);
        if (t >= 2)
            assert_true(fabs(drive - 2.0 * W.prev_drive + W.prev_drive2) * RATE * RATE <=
                        W.a.p.limit_drive_acceleration_m_s2 * (1.0 + 1e-9));
        if (W.out.row[DRTHS_ACT_COL_HOLD] == 1.0 && W.a.hold_started) {
            if (!W.hold_ticks_seen) {
                W.first_hold_tick = t;
                W.hold_entry_speed_m_s = fabs(W.prev_drive - W.prev_drive2) * RATE;
            }
            W.hold_ticks_seen++;
            const double step = fabs(drive - W.prev_drive);
            if (step > W.max_hold_step)
                W.max_hold_step = step;
            /* Braking from the speed it had, then no faster than the ramp rate: from 1.25 m/s at
             * half the 200 m/s^2 bound that takes 12.5 ms, 63 ticks. */
            const double entry_step = W.hold_entry_speed_m_s / RATE;
            assert_true(step <= (max_step > entry_step ? max_step : entry_step) * (1.0 + 1e-9) +
                                    1e-12);
            if (W.hold_ticks_seen > 100)
                assert_true(step <= max_step * (1.0 + 1e-9));
            assert_true(W.out.row[DRTHS_ACT_COL_DAMPER_COMMAND] == 0.0);
        }
        W.prev_drive2 = W.prev_drive;
        W.prev_drive = drive;
        if (W.out.finished)
            break;
    }
    return t;
}

/* A sine of amplitude X (m) and frequency f (Hz) from tick L + 1, faded in over 0.2 s with a
 * half cosine so that it starts as smoothly as a structure's response does: the feedforward's
 * third derivative would turn a kink into a drive spike the drive limit would stop. */
static double smooth_sine(uint64_t t, double X, double f)
{
    const double s = (double)(t - L_TICKS) / RATE;
    const double w = s < 0.2 ? 0.5 - 0.5 * cos(M_PI * s / 0.2) : 1.0;
    return X * w * sin(2.0 * M_PI * f * s);
}

/* 10 mm at 1 Hz, and 0.2 m (beyond the 0.1 m limit) at tick 2000. */
static double sine_trip(uint64_t t)
{
    if (t == 2000)
        return 0.2;
    return smooth_sine(t, 0.01, 1.0);
}

static void command_limit_case(drths_hold_mode_t mode)
{
    drths_actuator_params_t p;
    params(&p);
    p.hold_mode = mode;
    p.safe_position_m = 0.002;
    setup(&p, sine_trip);
    uint64_t end = run(40000, 0);
    assert_true(W.out.finished);
    assert_true(W.a.hold);
    assert_int_equal(W.a.hold_reason, DRTHS_STOP_LIMIT);
    /* HOLD when the command arrives (sent with the COMMAND read before tick 1879), long before
     * the compensator's preview (32 ticks) could hold it: it never reached the drive. */
    assert_non_null(strstr(hold_text(&W.a), "command for tick 2000 refused on arrival: "
                                            "displacement 0.2 m"));
    assert_int_equal(W.a.hold_tick, 2000 - (uint64_t)(LEAD_NS / DT_NS) - 1 - L_TICKS);
    assert_true(W.a.hold_tick < 2000 - (uint64_t)W.a.lookahead);
    assert_int_equal(W.first_hold_tick, W.a.hold_tick);
    assert_true(W.max_abs_drive < 0.02);
    /* The drive was moving; HOLD brakes from the last drive written and reaches the target at
     * 2 um per tick (run() checks each step). */
    const double target = mode == DRTHS_HOLD_RAMP ? 0.002 : W.a.hold_target_m;
    assert_true(W.a.hold_settled);
    assert_true(W.out.row[DRTHS_ACT_COL_DRIVE] == target);
    assert_true(W.max_hold_step > 0.0);
    /* It finished after settling and lingering. */
    assert_true(end >= W.a.settled_tick);
    assert_true(end - W.a.hold_tick >= (uint64_t)(p.hold_linger_s * RATE) - 1);
    print_message("%s: HOLD at tick %llu, settled at %.6g m after %llu ticks, largest step "
                  "%.3g um (limit %.3g um)\n",
                  drths_hold_mode_name(mode), (unsigned long long)W.a.hold_tick, target,
                  (unsigned long long)(W.a.settled_tick - W.a.hold_tick), W.max_hold_step * 1e6,
                  p.ramp_rate_m_s / RATE * 1e6);
    teardown();
}

static void test_command_limit_ramp(void **state)
{
    (void)state;
    command_limit_case(DRTHS_HOLD_RAMP);
}

static void test_command_limit_hold(void **state)
{
    (void)state;
    command_limit_case(DRTHS_HOLD_AT_POSITION);
}

/* 5 mm at 15 Hz: within the 5.5 mm command limit, but the feedforward's drive (it makes up
 * the plant's loss of gain at 15 Hz, |1/G| about 1.1) exceeds a 5.2 mm drive limit. */
static double sine15(uint64_t t)
{
    return smooth_sine(t, 0.005, 15.0);
}

static void test_drive_limit(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params(&p);
    p.limit_displacement_m = 0.0055;
    p.limit_drive_m = 0.0052;
    setup(&p, sine15);
    run(20000, 0);
    assert_true(W.a.hold);
    assert_int_equal(W.a.hold_reason, DRTHS_STOP_LIMIT);
    assert_non_null(strstr(hold_text(&W.a), "drive envelope: drive "));
    assert_non_null(strstr(hold_text(&W.a), "limit_drive_m 0.0052 m"));
    /* The offending drive was never written. */
    assert_true(W.max_abs_drive <= p.limit_drive_m);
    print_message("drive limit: %s at tick %llu; largest drive written %.4f mm\n", hold_text(&W.a),
                  (unsigned long long)W.a.hold_tick, W.max_abs_drive * 1e3);
    assert_true(W.a.hold_settled);
    teardown();
}

static void test_measured_displacement_limit(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params(&p);
    p.limit_meas_disp_m = 0.008; /* the 10 mm sine measures beyond 8 mm */
    setup(&p, sine_trip);
    run(1900, 0);
    assert_true(W.a.hold);
    print_message("hold: %s\n", hold_text(&W.a));
    assert_int_equal(W.a.hold_reason, DRTHS_STOP_LIMIT);
    assert_non_null(strstr(hold_text(&W.a), "measured displacement limit: "));
    assert_true(W.hold_ticks_seen > 0);
    teardown();
}

/* The link is cut after the COMMAND for tick 3000: the last one arrives LEAD_NS before that
 * tick; the playout buffer plays the ticks up to 3000 and then conceals; the watchdog (20 ms),
 * which acts on the absence of commands to play, must act within 20 ms + one tick of the
 * buffer running dry (tick 3001). */
static double sine1(uint64_t t)
{
    return smooth_sine(t, 0.01, 1.0);
}

static void test_link_cut_watchdog(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params(&p);
    setup(&p, sine1);
    const uint64_t cut = 3000;
    run(40000, cut);
    assert_true(W.a.hold);
    print_message("hold: %s at %llu\n", hold_text(&W.a), (unsigned long long)W.a.hold_tick);
    assert_int_equal(W.a.hold_reason, DRTHS_STOP_WATCHDOG);
    const int64_t last_arrival = deadline(cut) - LEAD_NS;
    /* The site woke 10 us after each deadline. */
    const int64_t dry_at = deadline(cut + 1) + 10000;
    const int64_t hold_at = deadline(W.a.hold_tick) + 10000;
    const int64_t wd = (int64_t)llround(p.watchdog_s * 1e9);
    assert_true(hold_at - dry_at > wd);
    assert_true(hold_at - dry_at <= wd + DT_NS);
    assert_true(W.a.hold_settled);
    print_message("link cut: last COMMAND at %.3f ms, HOLD at %.3f ms (watchdog %.0f ms, tick "
                  "%.1f ms)\n",
                  (double)(last_arrival - T0) * 1e-6, (double)(hold_at - T0) * 1e-6,
                  p.watchdog_s * 1e3, 1e3 / RATE);
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_command_limit_ramp),
        cmocka_unit_test(test_command_limit_hold),
        cmocka_unit_test(test_drive_limit),
        cmocka_unit_test(test_measured_displacement_limit),
        cmocka_unit_test(test_link_cut_watchdog),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
