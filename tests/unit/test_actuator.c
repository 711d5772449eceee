/* The actuator site's per-tick state machine in virtual time: rest for t <= L, in-order
 * commands applied at their tick, redundancy repairing a lost datagram, Lagrange concealment
 * (exact for a cubic), late and duplicate commands counted, HOLD after too many concealed
 * ticks, the watchdog, the displacement / velocity / force limits, the peer's ABORT, STOP,
 * a later epoch, FEEDBACK contents and echo, and no allocation per tick.
 *
 * The specimen is a linear spring (1e6 N/m) behind an ideal actuator with no noise and no I/O
 * delay, so the measured displacement equals the drive and the force is 1e6 times it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "site-physical/actuator.h"

#include "alloc_count.h"

#define RATE 1000.0
#define DT_NS INT64_C(1000000)
#define T0 INT64_C(5000000000)
#define K_SPRING 1e6
#define REST_CMD 2.5

typedef double (*traj_fn)(uint64_t tick);

typedef struct fixture {
    drths_specimen_t spec;
    drths_daq_t daq;
    drths_actuator_t a;
    drths_actuator_params_t p;
    drths_actuator_out_t out;
    uint64_t counter; /* last COMMAND counter used */
} fixture_t;

static fixture_t F;

/* The damper command send_cmd puts in each sample: 1.5 unless a test sets this. */
static double (*damper_of)(uint64_t tick);

static void params_default(drths_actuator_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->rate_hz = RATE;
    p->r = 4;
    p->playout_ticks = 64;
    p->max_concealed_ticks = 5;
    p->watchdog_s = 1.0;
    p->limit_displacement_m = 0.1;
    p->limit_velocity_m_s = 1.0;
    p->limit_force_N = 250e3;
    p->rest_damper_command = REST_CMD;
    p->hold_linger_s = 0.2;
    p->abort_interval_s = 0.005;
    p->late_wake_fraction = 0.5;
    p->limit_drive_m = 0.1;
    p->limit_meas_disp_m = 0.1;
    p->hold_mode = DRTHS_HOLD_AT_POSITION;
    p->safe_position_m = 0.0;
    /* Fast enough that the ideal actuator's drive reaches the HOLD target in one tick; the
     * rate limit has its own tests. */
    p->ramp_rate_m_s = 1e3;
    p->compensation = DRTHS_COMPENSATION_NONE;
}

static void setup_with(const drths_actuator_params_t *p)
{
    memset(&F, 0, sizeof F);
    drths_specimen_params_t sp;
    drths_specimen_params_default(&sp, DRTHS_DAMPER_LINEAR_SPRING);
    sp.damper.stiffness_N_per_m = K_SPRING;
    sp.plant_enabled = 0;
    sp.noise_disp_m = sp.noise_force_N = 0.0;
    sp.adc_bits = 0;
    sp.io_delay_ticks = 0;
    drths_error_t err;
    assert_int_equal(drths_specimen_init(&F.spec, &sp, 1.0 / RATE, &err), 0);
    assert_int_equal(drths_daq_open_virtual(&F.spec, &F.daq, &err), 0);
    F.p = *p;
    assert_int_equal(drths_actuator_init(&F.a, &F.p, &F.daq, &err), 0);
}

static void teardown(void)
{
    damper_of = NULL;
    drths_actuator_close(&F.a);
    drths_actuator_close(&F.a); /* safe twice */
    drths_daq_close(&F.daq);
    drths_specimen_close(&F.spec);
}

static int64_t deadline(uint64_t t)
{
    return T0 + (int64_t)t * DT_NS;
}

static void start(uint32_t L)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_EPOCH;
    m.u.epoch.new_epoch = 1;
    m.u.epoch.loop_delay_ticks = L;
    m.u.epoch.effective_tick = 0;
    assert_false(drths_actuator_started(&F.a));
    drths_actuator_receive(&F.a, &m, T0 - 5 * DT_NS);
    assert_true(drths_actuator_started(&F.a));
    assert_int_equal(F.a.L, L);
}

/* A COMMAND for tick T carrying r samples T, T-1, ..., each from traj (velocity: traj of the
 * tick plus 1e6, so it can be told apart; damper command 1.5). */
static void send_cmd(uint64_t T, int r, traj_fn x, int64_t arrival)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_COMMAND;
    m.epoch = 1;
    m.tick = T;
    m.counter = ++F.counter;
    m.u.command.n_channels = 1;
    m.u.command.r = (uint8_t)r;
    m.u.command.loop_delay_ticks = F.a.L;
    for (int k = 0; k < r; k++) {
        m.u.command.s[k][0].disp_m = x(T - (uint64_t)k);
        m.u.command.s[k][0].vel_m_s = 0.5 * x(T - (uint64_t)k);
        m.u.command.s[k][0].acc_m_s2 = 0.0;
        m.u.command.s[k][0].damper_cmd = damper_of ? damper_of(T - (uint64_t)k) : 1.5;
    }
    drths_actuator_receive(&F.a, &m, arrival);
}

static int tick(uint64_t t, int64_t late_ns)
{
    return drths_actuator_tick(&F.a, t, deadline(t), deadline(t) + late_ns, &F.out);
}

/* A smooth 1 mm, 2 Hz command. */
static double sine(uint64_t t)
{
    return 1e-3 * sin(2.0 * M_PI * 2.0 * (double)t / RATE);
}

/* A cubic in time with all four coefficients non-zero (metres, t in s). */
static double cubic(uint64_t t)
{
    double s = (double)t / RATE;
    return 1e-3 + 2e-3 * s - 5e-3 * s * s + 4e-3 * s * s * s;
}

static double big_at_30(uint64_t t)
{
    return t == 30 ? 0.2 : 1e-3;
}

static double force_trip(uint64_t t)
{
    return t >= 30 ? 0.06 : 1e-3;
}

/* The numerical site's rhythm: the command for tick t + 1 + L is sent after tick t's FEEDBACK,
 * arriving 0.3 ms after tick t's deadline. Runs ticks from..to (inclusive) unless `drop` says a tick's
 * datagram is lost. */
typedef int (*drop_fn)(uint64_t T);
static int no_drop(uint64_t T)
{
    (void)T;
    return 0;
}

static void run(uint64_t from, uint64_t to, traj_fn x, int r, drop_fn drop)
{
    for (uint64_t t = from; t <= to; t++) {
        assert_int_equal(tick(t, 20000), 0);
        uint64_t T = t + 1 + F.a.L;
        if (t >= 1 && !drop(T)) /* F(0) is not used: the COMMAND for 1 + L went with EPOCH 1 */
            send_cmd(T, r, x, deadline(t) + 300000);
    }
}

static void test_init_errors(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    drths_specimen_t spec;
    drths_specimen_params_t sp;
    drths_specimen_params_default(&sp, DRTHS_DAMPER_LINEAR_SPRING);
    drths_error_t err;
    assert_int_equal(drths_specimen_init(&spec, &sp, 1e-3, &err), 0);
    drths_daq_t daq;
    assert_int_equal(drths_daq_open_virtual(&spec, &daq, &err), 0);
    drths_actuator_t a;
    p.r = 17;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "link.redundancy: must be 1..16 (got 17)");
    params_default(&p);
    p.watchdog_s = 0.0;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "physical.watchdog_ms: must be > 0 (got 0)");
    params_default(&p);
    p.limit_force_N = -1.0;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "physical.limit_force_N: must be > 0 (got -1)");
    params_default(&p);
    p.ramp_rate_m_s = 0.0;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "physical.ramp_rate_m_s: must be > 0 (got 0)");
    params_default(&p);
    p.safe_position_m = 0.2;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "physical.safe_position_m: must lie inside +/- limit_drive_m (got 0.2)");
    params_default(&p);
    assert_int_equal(drths_actuator_init(&a, &p, NULL, &err), -EINVAL);
    drths_actuator_close(&a); /* a failed init leaves a closable struct */
    drths_daq_close(&daq);
    drths_specimen_close(&spec);
}

static void test_rest_then_in_order(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    /* Not started: no tick. */
    assert_int_equal(tick(0, 0), -EAGAIN);
    start(5);
    /* The first COMMAND (for tick 1 + L) is sent right after EPOCH 1. */
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    run(0, 99, sine, 4, no_drop);
    assert_int_equal(F.a.c.ticks, 100);
    assert_int_equal(F.a.c.rest_ticks, 6); /* ticks 0..5 */
    assert_int_equal(F.a.c.applied, 94);
    assert_int_equal(F.a.c.concealed, 0);
    assert_int_equal(F.a.c.late, 0);
    assert_int_equal(F.a.c.duplicates, 0);
    assert_int_equal(F.a.c.reordered, 0);
    assert_int_equal(F.a.c.too_far, 0);
    assert_int_equal(F.a.c.from_redundancy, 0);
    assert_int_equal(F.a.c.commands, 100);
    /* Tick 99 applied x(99); FEEDBACK carries ticks 99, 98, 97, 96 as measured. */
    const drths_msg_feedback_t *f = &F.out.feedback.u.feedback;
    assert_int_equal(F.out.feedback.type, DRTHS_MSG_FEEDBACK);
    assert_int_equal(F.out.feedback.tick, 99);
    assert_int_equal(F.out.feedback.epoch, 1);
    assert_int_equal(f->r, 4);
    assert_int_equal(f->n_channels, 1);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(f->s[k].cmd_tick, 99 - k);
        assert_int_equal(f->s[k].flags, 0);
        assert_true(fabs(f->s[k].ch[0].disp_m - sine(99 - (uint64_t)k)) < 1e-15);
        assert_true(fabs(f->s[k].ch[0].force_n - K_SPRING * sine(99 - (uint64_t)k)) < 1e-9);
    }
    /* Echo: at tick 99 the newest COMMAND (counter 99, for tick 104) had arrived 0.3 ms after
     * tick 98's deadline; tick 99 woke 20 us after its deadline: held 0.72 ms. */
    assert_int_equal(f->echo_counter, 99);
    assert_int_equal(f->echo_hold_ns, 720000);
    /* Row of tick 99. */
    const double *row = F.out.row;
    assert_int_equal((int)row[DRTHS_ACT_COL_TICK], 99);
    assert_true(fabs(row[DRTHS_ACT_COL_TIME] - 0.099) < 1e-12);
    assert_int_equal((int)row[DRTHS_ACT_COL_CMD_TICK], 99);
    assert_true(row[DRTHS_ACT_COL_COMMAND] == sine(99));
    assert_true(row[DRTHS_ACT_COL_COMMAND_VEL] == 0.5 * sine(99));
    assert_true(row[DRTHS_ACT_COL_DAMPER_COMMAND] == 1.5);
    assert_true(row[DRTHS_ACT_COL_CONCEALED] == 0.0 && row[DRTHS_ACT_COL_HOLD] == 0.0);
    /* Sent 0.3 ms after tick 93's deadline, applied at tick 99: 5.7 ms early. */
    assert_true(fabs(row[DRTHS_ACT_COL_CMD_LEAD] - 5.7) < 1e-9);
    assert_true(fabs(row[DRTHS_ACT_COL_WAKE_LATE] - 20.0) < 1e-9);
    assert_false(F.out.finished);
    assert_false(F.out.send_abort);
    assert_true(drths_actuator_tracking_rms_pct(&F.a) < 1e-12);
    teardown();
}

static void test_rest_rows_and_short_feedback(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    for (uint64_t t = 0; t <= 6; t++) {
        assert_int_equal(tick(t, 0), 0);
        if (t >= 1)
            send_cmd(t + 6, 4, sine, deadline(t) + 300000);
        const double *row = F.out.row;
        const drths_msg_feedback_t *f = &F.out.feedback.u.feedback;
        /* The first FEEDBACKs carry only the ticks that exist (the wire wants r - 1 <= tick). */
        assert_int_equal(f->r, t < 3 ? t + 1 : 4);
        if (t <= 5) {
            assert_true(row[DRTHS_ACT_COL_COMMAND] == 0.0);
            assert_true(row[DRTHS_ACT_COL_COMMAND_VEL] == 0.0);
            assert_true(row[DRTHS_ACT_COL_DAMPER_COMMAND] == REST_CMD);
            assert_int_equal((int)row[DRTHS_ACT_COL_CMD_TICK], -1);
            assert_true(isnan(row[DRTHS_ACT_COL_CMD_LEAD]));
            assert_int_equal(f->s[0].cmd_tick, -1);
        } else {
            assert_true(row[DRTHS_ACT_COL_COMMAND] == sine(6));
            assert_int_equal(f->s[0].cmd_tick, 6);
            assert_int_equal(f->s[1].cmd_tick, -1);
        }
    }
    teardown();
}

static int drop_one(uint64_t T)
{
    return T == 40;
}

static void test_redundancy_repairs_a_loss(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    run(0, 80, sine, 4, drop_one);
    assert_int_equal(F.a.c.concealed, 0);
    assert_int_equal(F.a.c.from_redundancy, 1); /* tick 40 came in the COMMAND for tick 41 */
    assert_int_equal(F.a.c.applied, 75);
    teardown();
}

static int drop_20_to_22(uint64_t T)
{
    return T >= 20 && T <= 22;
}

static void test_conceal_exact_for_cubic(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.r = 1; /* no redundancy, so the three lost commands stay lost */
    setup_with(&p);
    start(5);
    send_cmd(6, 1, cubic, T0 - 4 * DT_NS);
    double drive[30] = {0};
    for (uint64_t t = 0; t < 30; t++) {
        assert_int_equal(tick(t, 0), 0);
        drive[t] = F.out.row[DRTHS_ACT_COL_COMMAND];
        if (t >= 20 && t <= 22) {
            assert_true(F.out.row[DRTHS_ACT_COL_CONCEALED] == 1.0);
            assert_int_equal(F.out.feedback.u.feedback.s[0].flags, DRTHS_FB_CONCEALED);
            assert_int_equal(F.out.feedback.u.feedback.s[0].cmd_tick, (int64_t)t);
            assert_true(isnan(F.out.row[DRTHS_ACT_COL_CMD_LEAD]));
            /* The velocity is the concealed tick's own step. */
            assert_true(fabs(F.out.row[DRTHS_ACT_COL_COMMAND_VEL] -
                             (cubic(t) - cubic(t - 1)) * RATE) < 1e-9);
            assert_true(fabs(F.out.row[DRTHS_ACT_COL_DAMPER_COMMAND] - 1.5) < 1e-12);
        } else {
            assert_true(F.out.row[DRTHS_ACT_COL_CONCEALED] == 0.0);
        }
        uint64_t T = t + 6;
        if (t >= 1 && !drop_20_to_22(T))
            send_cmd(T, 1, cubic, deadline(t) + 300000);
    }
    /* Three extrapolations in a row from a cubic history are exact (to rounding). */
    for (uint64_t t = 20; t <= 22; t++)
        assert_true(fabs(drive[t] - cubic(t)) < 1e-15);
    assert_int_equal(F.a.c.concealed, 3);
    assert_int_equal(F.a.c.max_consecutive_concealed, 3);
    assert_int_equal(F.a.c.late, 0);
    teardown();
}

/* A semi-active command switching 0 -> 2.5 just before a gap: the cubic through 0, 0, 0, 2.5
 * would command 10; the concealment holds 2.5. */
static double switch_at_19(uint64_t t)
{
    return t >= 19 ? 2.5 : 0.0;
}

static void test_conceal_holds_damper_command(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.r = 1;
    setup_with(&p);
    damper_of = switch_at_19;
    start(5);
    send_cmd(6, 1, sine, T0 - 4 * DT_NS);
    for (uint64_t t = 0; t < 30; t++) {
        assert_int_equal(tick(t, 0), 0);
        if (t >= 20 && t <= 22) {
            assert_true(F.out.row[DRTHS_ACT_COL_CONCEALED] == 1.0);
            assert_true(F.out.row[DRTHS_ACT_COL_DAMPER_COMMAND] == 2.5);
        }
        uint64_t T = t + 6;
        if (t >= 1 && !drop_20_to_22(T))
            send_cmd(T, 1, sine, deadline(t) + 300000);
    }
    assert_int_equal(F.a.c.concealed, 3);
    teardown();
}

/* The commands jump by 2 mm while ticks 20..23 are concealed (what a discontinuity the
 * extrapolation cannot see looks like). The actuator must not step there: at tick 24 it stays
 * on the extrapolation, then fades into the commands no faster than the ramp rate, and from
 * the fade's end on applies the commands exactly. */
static double jump_at_22(uint64_t t)
{
    return sine(t) + (t >= 22 ? 2e-3 : 0.0);
}

static int drop_20_to_23(uint64_t T)
{
    return T >= 20 && T <= 23;
}

static void test_rejoin_fades_into_commands(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.r = 1;
    p.ramp_rate_m_s = 0.05; /* 50 um per tick at 1 kHz */
    setup_with(&p);
    start(5);
    send_cmd(6, 1, jump_at_22, T0 - 4 * DT_NS);
    double cmd[200];
    for (uint64_t t = 0; t < 200; t++) {
        assert_int_equal(tick(t, 0), 0);
        cmd[t] = F.out.row[DRTHS_ACT_COL_COMMAND];
        assert_true(F.out.row[DRTHS_ACT_COL_HOLD] == 0.0);
        uint64_t T = t + 6;
        if (t >= 1 && !drop_20_to_23(T))
            send_cmd(T, 1, jump_at_22, deadline(t) + 300000);
    }
    assert_int_equal(F.a.c.concealed, 4);
    assert_int_equal(F.a.c.rejoins, 1);
    /* The extrapolation stays near the sine, so the gap is the 2 mm jump. */
    assert_true(fabs(F.a.c.max_rejoin_offset_m - 2e-3) < 1e-5);
    /* About 1.875 * 2 mm / 50 um = 75 ticks of fade. */
    const uint64_t n = F.a.rejoin_ticks;
    assert_int_equal(n, (uint64_t)ceil(1.875 * F.a.c.max_rejoin_offset_m / (0.05 / RATE)));
    assert_true(n >= 74 && n <= 76);
    for (uint64_t t = 7; t < 200; t++) {
        /* Beyond the sine's own motion (at most 2 pi 2 Hz 1 mm per s = 12.6 um per tick). */
        double extra = fabs((cmd[t] - cmd[t - 1]) - (sine(t) - sine(t - 1)));
        assert_true(extra <= 0.05 / RATE * (1.0 + 1e-9) + 1e-7);
    }
    for (uint64_t t = 24 + n; t < 200; t++)
        assert_true(fabs(cmd[t] - jump_at_22(t)) < 1e-15);
    teardown();
}

/* A 0.05 m/s ramp with 100 commands lost (ticks 20..119): four ticks extrapolated on the ramp,
 * then the glide takes 10 m/s^2 * 1 ms = 10 mm/s off the speed per tick and the actuator rests
 * until the commands come back, and rejoins them without a step. */
static double ramp_5cm_s(uint64_t t)
{
    return 0.05 * (double)t / RATE;
}

static int drop_20_to_119(uint64_t T)
{
    return T >= 20 && T <= 119;
}

static void test_long_gap_glides_to_rest(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.r = 1;
    p.max_concealed_ticks = 200;
    p.ramp_rate_m_s = 0.05;
    setup_with(&p);
    start(5);
    send_cmd(6, 1, ramp_5cm_s, T0 - 4 * DT_NS);
    double cmd[400];
    for (uint64_t t = 0; t < 400; t++) {
        assert_int_equal(tick(t, 0), 0);
        cmd[t] = F.out.row[DRTHS_ACT_COL_COMMAND];
        assert_true(F.out.row[DRTHS_ACT_COL_HOLD] == 0.0);
        uint64_t T = t + 6;
        if (t >= 1 && !drop_20_to_119(T))
            send_cmd(T, 1, ramp_5cm_s, deadline(t) + 300000);
    }
    assert_int_equal(F.a.c.concealed, 100);
    for (uint64_t t = 20; t <= 23; t++)
        assert_true(fabs(cmd[t] - ramp_5cm_s(t)) < 1e-15);
    const double speeds[5] = {4e-5, 3e-5, 2e-5, 1e-5, 0.0}; /* m per tick from tick 24 */
    for (int i = 0; i < 5; i++)
        assert_true(fabs((cmd[24 + i] - cmd[23 + i]) - speeds[i]) < 1e-15);
    for (uint64_t t = 29; t <= 119; t++)
        assert_true(cmd[t] == cmd[28]);
    /* The rejoin: no step beyond the ramp's own 50 um plus the fade's 50 um per tick; the
     * commands exactly after the fade. */
    for (uint64_t t = 7; t < 400; t++)
        assert_true(fabs(cmd[t] - cmd[t - 1]) <= 1e-4 * (1.0 + 1e-9));
    assert_int_equal(F.a.c.rejoins, 1);
    for (uint64_t t = 120 + F.a.rejoin_ticks; t < 400; t++)
        assert_true(fabs(cmd[t] - ramp_5cm_s(t)) < 1e-15);
    teardown();
}

static void test_late_and_duplicate_counted(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.r = 1;
    setup_with(&p);
    start(5);
    send_cmd(6, 1, sine, T0 - 4 * DT_NS);
    for (uint64_t t = 0; t <= 40; t++) {
        assert_int_equal(tick(t, 0), 0);
        uint64_t T = t + 6;
        if (t >= 1 && T != 30)
            send_cmd(T, 1, sine, deadline(t) + 300000);
        if (T == 35) /* the same tick's command sent twice (two datagrams): a duplicate */
            send_cmd(T, 1, sine, deadline(t) + 400000);
        if (t == 30) { /* the command for 30 arrives after its tick (twice): late, once */
            send_cmd(30, 1, sine, deadline(t) + 500000);
            send_cmd(30, 1, sine, deadline(t) + 600000);
        }
    }
    assert_int_equal(F.a.c.concealed, 1);
    assert_int_equal(F.a.c.late, 1);
    /* The second copies of 30 and 35 are duplicates; the first copy of 30 came after 35's. */
    assert_int_equal(F.a.c.duplicates, 2);
    assert_int_equal(F.a.c.reordered, 1);
    /* Concealment of a smooth sine one tick ahead: error far below a micrometre. */
    teardown();
}

static uint64_t last_sent_tick;
static int drop_after_40(uint64_t T)
{
    return T > last_sent_tick;
}

static void test_too_many_concealed_holds(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.r = 1;
    setup_with(&p);
    start(5);
    send_cmd(6, 1, sine, T0 - 4 * DT_NS);
    last_sent_tick = 40;
    /* Ticks 41..45 are concealed (max 5), tick 46 goes to HOLD. */
    run(0, 45, sine, 1, drop_after_40);
    assert_int_equal(F.a.c.concealed, 5);
    assert_false(F.a.hold);
    double held = F.out.row[DRTHS_ACT_COL_MEAS_DISP];
    assert_int_equal(tick(46, 0), 0);
    assert_true(F.a.hold);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_HOLD);
    assert_string_equal(F.a.hold_text, "too many concealed commands (6 in a row, limit 5)");
    assert_true(F.out.row[DRTHS_ACT_COL_HOLD] == 1.0);
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == held); /* drive held where it was measured */
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND_VEL] == 0.0);
    assert_true(F.out.row[DRTHS_ACT_COL_DAMPER_COMMAND] == 0.0); /* safe damper command */
    assert_int_equal(F.out.feedback.u.feedback.s[0].flags, DRTHS_FB_HOLD);
    assert_int_equal(F.out.feedback.u.feedback.s[0].cmd_tick, -1);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.type, DRTHS_MSG_ABORT);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_HOLD);
    assert_string_equal(F.out.abort.u.stop.text, F.a.hold_text);
    /* ABORT three times, 5 ticks (5 ms) apart; the drive stays held; finish after 0.2 s. */
    int aborts = 1;
    uint64_t t = 47;
    for (;; t++) {
        assert_int_equal(tick(t, 0), 0);
        assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == held);
        if (F.out.send_abort) {
            aborts++;
            assert_true(t == 51 || t == 56);
        }
        if (F.out.finished)
            break;
    }
    assert_int_equal(aborts, 3);
    assert_int_equal(t, 46 + 200);
    assert_int_equal(F.a.end_reason, DRTHS_STOP_HOLD);
    assert_int_equal(tick(t + 1, 0), -EALREADY);
    teardown();
}

static void test_watchdog(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.r = 1;
    p.watchdog_s = 0.020;
    p.max_concealed_ticks = 1000; /* so that only the watchdog can act */
    setup_with(&p);
    start(5);
    send_cmd(6, 1, sine, T0 - 4 * DT_NS);
    last_sent_tick = 40; /* the COMMAND for 40 is sent at tick 34 */
    uint64_t t = 0;
    for (; t < 200; t++) {
        assert_int_equal(tick(t, 20000), 0);
        if (F.a.hold)
            break;
        uint64_t T = t + 6;
        if (t >= 1 && T <= last_sent_tick)
            send_cmd(T, 1, sine, deadline(t) + 300000);
    }
    assert_true(F.a.hold);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_WATCHDOG);
    int64_t last_arrival = deadline(34) + 300000;
    int64_t at = deadline(t) + 20000;
    assert_true(at - last_arrival > 20 * DT_NS);
    assert_true(at - last_arrival <= 21 * DT_NS); /* within watchdog + 1 tick */
    assert_string_equal(F.a.hold_text, "watchdog: no command for 20.7 ms (limit 20 ms)");
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_WATCHDOG);
    teardown();
}

static void test_displacement_limit(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    start(5);
    send_cmd(6, 4, big_at_30, T0 - 4 * DT_NS);
    run(0, 29, big_at_30, 4, no_drop);
    assert_false(F.a.hold);
    assert_int_equal(tick(30, 0), 0);
    /* The 0.2 m command never reaches the drive: HOLD in the same tick. */
    assert_true(F.a.hold);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_LIMIT);
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == 1e-3);
    assert_true(F.out.row[DRTHS_ACT_COL_HOLD] == 1.0);
    assert_string_equal(F.a.hold_text, "displacement limit: command 0.2 m exceeds 0.1 m");
    teardown();
}

static double fast_at_30(uint64_t t)
{
    return t == 30 ? 4.0 : 1e-3; /* velocity field is 0.5 x: 2 m/s at tick 30 */
}

static void test_velocity_limit(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.limit_displacement_m = 10.0;
    setup_with(&p);
    start(5);
    send_cmd(6, 4, fast_at_30, T0 - 4 * DT_NS);
    run(0, 29, fast_at_30, 4, no_drop);
    assert_int_equal(tick(30, 0), 0);
    assert_true(F.a.hold);
    assert_string_equal(F.a.hold_text, "velocity limit: command velocity 2 m/s exceeds 1 m/s");
    teardown();
}

static void test_force_limit(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.limit_force_N = 50e3; /* the spring gives 60 kN at 0.06 m */
    setup_with(&p);
    start(5);
    send_cmd(6, 4, force_trip, T0 - 4 * DT_NS);
    run(0, 29, force_trip, 4, no_drop);
    assert_false(F.a.hold);
    assert_int_equal(tick(30, 0), 0);
    /* Measured in this tick: HOLD is flagged in this tick's FEEDBACK and row ... */
    assert_true(F.a.hold);
    assert_int_equal(F.out.feedback.u.feedback.s[0].flags, DRTHS_FB_HOLD);
    assert_string_equal(F.a.hold_text, "force limit: measured force 60 kN exceeds 50 kN");
    /* ... and the next tick holds the drive at the measured 0.06 m with the damper off. */
    assert_int_equal(tick(31, 0), 0);
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == 0.06);
    assert_true(F.out.row[DRTHS_ACT_COL_DAMPER_COMMAND] == 0.0);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_LIMIT);
    teardown();
}

static void test_stop_ends_after_last_tick(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.watchdog_s = 0.002; /* shorter than L: the watchdog must not fire after STOP */
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    /* The numerical site's last command is for tick 50 (sent at tick 44), then STOP. */
    uint64_t t = 0;
    for (; t < 100; t++) {
        assert_int_equal(tick(t, 0), 0);
        if (F.out.finished)
            break;
        uint64_t T = t + 6;
        if (t >= 1 && T <= 50)
            send_cmd(T, 4, sine, deadline(t) + 300000);
        if (T == 50) {
            drths_msg_t m;
            memset(&m, 0, sizeof m);
            m.type = DRTHS_MSG_STOP;
            m.tick = 50;
            m.u.stop.reason = DRTHS_STOP_END_OF_RECORD;
            drths_actuator_receive(&F.a, &m, deadline(t) + 400000);
        }
    }
    assert_int_equal(t, 50);
    assert_false(F.a.hold);
    assert_int_equal(F.a.end_reason, DRTHS_STOP_END_OF_RECORD);
    assert_int_equal(F.a.c.concealed, 0);
    assert_int_equal(F.a.c.applied, 45);
    assert_false(F.out.send_abort);
    assert_int_equal(tick(51, 0), -EALREADY);
    teardown();
}

static void test_peer_abort(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    run(0, 20, sine, 4, no_drop);
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_ABORT;
    m.u.stop.reason = DRTHS_STOP_SIGNAL;
    strcpy(m.u.stop.text, "interrupted");
    drths_actuator_receive(&F.a, &m, deadline(20) + 500000);
    assert_true(F.a.hold);
    assert_string_equal(F.a.hold_text, "numerical site aborted: SIGNAL: interrupted");
    uint64_t t = 21;
    for (;; t++) {
        assert_int_equal(tick(t, 0), 0);
        assert_false(F.out.send_abort); /* no ABORT back to the site that aborted */
        if (F.out.finished)
            break;
    }
    assert_int_equal(t, 21 + 200);
    assert_int_equal(F.a.end_reason, DRTHS_STOP_SIGNAL);
    teardown();
}

static void test_signal_hold(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    run(0, 20, sine, 4, no_drop);
    drths_actuator_hold(&F.a, DRTHS_STOP_SIGNAL, 1, "stopped by signal");
    drths_actuator_hold(&F.a, DRTHS_STOP_LIMIT, 1, "second cause ignored");
    assert_int_equal(tick(21, 0), 0);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_SIGNAL);
    assert_string_equal(F.out.abort.u.stop.text, "stopped by signal");
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == sine(20));
    teardown();
}

static void test_later_epoch(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    run(0, 20, sine, 4, no_drop);
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_EPOCH;
    m.u.epoch.new_epoch = 2;
    m.u.epoch.loop_delay_ticks = 7;
    m.u.epoch.effective_tick = 30;
    drths_actuator_receive(&F.a, &m, deadline(20) + 1000);
    m.u.epoch.new_epoch = 1; /* a late repeat of EPOCH 1 changes nothing */
    drths_actuator_receive(&F.a, &m, deadline(20) + 2000);
    run(21, 29, sine, 4, no_drop);
    assert_int_equal(F.a.L, 5);
    assert_int_equal(F.out.feedback.epoch, 1);
    assert_int_equal(tick(30, 0), 0);
    assert_int_equal(F.a.L, 7);
    assert_int_equal(F.out.feedback.epoch, 2);
    assert_int_equal(F.a.c.epochs, 2);
    teardown();
}

/* L above the playout capacity (64): the first COMMAND, sent with EPOCH 1 before tick 0, still
 * fits, because the play head starts at L + 1. */
static void test_L_beyond_playout_capacity(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    setup_with(&p);
    start(100);
    send_cmd(101, 4, sine, T0 - 4 * DT_NS);
    assert_int_equal(F.a.c.too_far, 0);
    /* A 90-tick round trip: F(n) reaches the numerical site at tick n + 90, which then sends
     * the command for n + 1 + L. */
    for (uint64_t t = 0; t <= 150; t++) {
        assert_int_equal(tick(t, 0), 0);
        if (t >= 91)
            send_cmd(t - 90 + 101, 4, sine, deadline(t) + 300000);
    }
    assert_int_equal(F.a.c.too_far, 0);
    assert_int_equal(F.a.c.concealed, 0);
    assert_int_equal(F.a.c.rest_ticks, 101);
    assert_int_equal(F.a.c.applied, 50);
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == sine(150));
    /* A command L ticks ahead of the loop once it runs is beyond the buffer. */
    send_cmd(150 + 100, 1, sine, deadline(150) + 1000);
    assert_int_equal(F.a.c.too_far, 1);
    teardown();
}

static int drop_some(uint64_t T)
{
    return (T % 97) == 0 || (T % 211) < 3;
}

static void test_no_allocation_per_tick(void **state)
{
    (void)state;
    drths_actuator_params_t p;
    params_default(&p);
    p.max_concealed_ticks = 2;
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    long before = alloc_count;
    /* 3000 ticks with losses repaired and concealed, then the too-many-concealed HOLD path
     * (which formats its sentence) and the linger to the end. */
    run(0, 2999, sine, 4, drop_some);
    last_sent_tick = 3004;
    uint64_t t = 3000;
    for (; t < 4000; t++) {
        assert_int_equal(tick(t, 0), 0);
        if (F.out.finished)
            break;
        if (t + 6 <= last_sent_tick)
            send_cmd(t + 6, 4, sine, deadline(t) + 300000);
    }
    assert_true(F.out.finished);
    if (COUNT_ALLOCS)
        assert_int_equal(alloc_count - before, 0);
    assert_true(F.a.c.from_redundancy > 0);
    assert_true(F.a.c.concealed > 0);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_HOLD);
    teardown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_rest_then_in_order),
        cmocka_unit_test(test_rest_rows_and_short_feedback),
        cmocka_unit_test(test_redundancy_repairs_a_loss),
        cmocka_unit_test(test_conceal_exact_for_cubic),
        cmocka_unit_test(test_conceal_holds_damper_command),
        cmocka_unit_test(test_rejoin_fades_into_commands),
        cmocka_unit_test(test_long_gap_glides_to_rest),
        cmocka_unit_test(test_late_and_duplicate_counted),
        cmocka_unit_test(test_too_many_concealed_holds),
        cmocka_unit_test(test_watchdog),
        cmocka_unit_test(test_displacement_limit),
        cmocka_unit_test(test_velocity_limit),
        cmocka_unit_test(test_force_limit),
        cmocka_unit_test(test_stop_ends_after_last_tick),
        cmocka_unit_test(test_peer_abort),
        cmocka_unit_test(test_signal_hold),
        cmocka_unit_test(test_later_epoch),
        cmocka_unit_test(test_L_beyond_playout_capacity),
        cmocka_unit_test(test_no_allocation_per_tick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
