/* The actuator site's per-tick state machine in virtual time: rest for t <= L, in-order
 * commands applied at their tick, redundancy repairing a lost datagram, late and duplicate
 * commands counted, HOLD after too many concealed ticks, late commands played behind their
 * ticks as the FEEDBACK and the row say, the watchdog, the displacement (command and preview) /
 * velocity / force limits, the peer's ABORT, STOP, a later epoch, FEEDBACK contents and echo, no
 * allocation per tick, and golden hashes of everything seven varied runs hand back; the
 * stability monitor: a growing oscillation and one that outlives the record are a HOLD with
 * their sentence, a strong earthquake-like response and band-limited noise (0.2-15 Hz) are not.
 * The command stream inside the tick (concealment, rejoin, delayed playback, preview) has its
 * own tests in test_command_stream.c.
 *
 * Every test starts from the default parameters (params_default) in F.p, changes what it needs
 * and opens the actuator with begin() (or open_actuator()); the tear-down closes it. The
 * specimen is a linear spring (1e6 N/m) behind an ideal actuator with no noise and no I/O
 * delay, so the measured displacement equals the drive and the force is 1e6 times it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "site-physical/actuator.h"

#include "alloc_count.h"

/* The HOLD sentence, formatted from the cause as the main thread does. */
static const char *hold_text(const drths_actuator_t *a)
{
    static char buf[DRTHS_WIRE_MAX_TEXT + 1];
    return drths_actuator_hold_text(a, buf, sizeof buf);
}

#define RATE 1000.0
#define DT_NS INT64_C(1000000)
#define T0 INT64_C(5000000000)
#define K_SPRING 1e6
#define REST_CMD 2.5

typedef double (*traj_fn)(uint64_t tick);

typedef struct fixture {
    /* What the next actuator is opened with (the test changes these before begin). */
    drths_actuator_params_t p;
    int adc_bits;         /* > 0: converters over +/- 0.1 m and +/- force_range_N */
    double force_range_N;
    bool plant;           /* the 200-kN damper behind the virtual plant instead of the spring */
    /* The actuator opened. */
    bool open;
    drths_specimen_t spec;
    drths_daq_t daq;
    drths_actuator_t a;
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
    /* An envelope that admits every drive these tests make (its own tests are in
     * test_envelope.c and test_drive_envelope.c), so they see the actuator as before it. */
    p->limit_drive_velocity_m_s = 1e4;
    p->limit_drive_acceleration_m_s2 = 1e9;
    p->limit_drive_offset_m = 1.0;
    p->max_tick_late_s = 1.0;
    p->limit_meas_disp_m = 0.1;
    p->hold_mode = DRTHS_HOLD_AT_POSITION;
    p->safe_position_m = 0.0;
    /* Fast enough that the ideal actuator's drive reaches the HOLD target in one tick; the
     * rate limit has its own tests. */
    p->ramp_rate_m_s = 1e3;
    p->compensation = DRTHS_COMPENSATION_NONE;
}

/* Closes the actuator (if open) and puts the defaults back: each test's set-up, and the
 * start of each run of a test that opens several. */
static void fresh(void)
{
    if (F.open) {
        drths_actuator_close(&F.a);
        drths_actuator_close(&F.a); /* safe twice */
        drths_daq_close(&F.daq);
        drths_specimen_close(&F.spec);
    }
    memset(&F, 0, sizeof F);
    params_default(&F.p);
    damper_of = NULL;
}

static int setup(void **state)
{
    (void)state;
    fresh();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fresh();
    return 0;
}

/* Opens the actuator with F.p on the specimen F says: the spring behind the ideal actuator, or
 * the 200-kN damper behind the virtual plant with sensor noise, quantisation and an I/O delay
 * (so that the drive, the measurement and the HOLD ramp all carry non-trivial numbers). */
static void open_actuator(void)
{
    drths_specimen_params_t sp;
    if (F.plant) {
        drths_specimen_params_default(&sp, DRTHS_DAMPER_PHILLIPS2013);
        sp.plant_enabled = 1;
        sp.io_delay_ticks = 1;
        sp.seed = 42;
    } else {
        drths_specimen_params_default(&sp, DRTHS_DAMPER_LINEAR_SPRING);
        sp.damper.stiffness_N_per_m = K_SPRING;
        sp.plant_enabled = 0;
        sp.noise_disp_m = sp.noise_force_N = 0.0;
        sp.adc_bits = F.adc_bits;
        sp.disp_range_m = 0.1;
        sp.force_range_N = F.force_range_N;
        sp.io_delay_ticks = 0;
    }
    drths_error_t err;
    assert_int_equal(drths_specimen_init(&F.spec, &sp, 1.0 / RATE, &err), 0);
    assert_int_equal(drths_daq_open_virtual(&F.spec, &F.daq, &err), 0);
    assert_int_equal(drths_actuator_init(&F.a, &F.p, &F.daq, &err), 0);
    F.open = true;
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

/* The usual opening: the actuator opened with F.p, started with L, and the first COMMAND (for
 * tick L + 1, r samples of x) sent right after EPOCH 1. */
static void begin(uint32_t L, int r, traj_fn x)
{
    open_actuator();
    start(L);
    send_cmd(L + 1, r, x, T0 - 4 * DT_NS);
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

static double big_at_30(uint64_t t)
{
    return t == 30 ? 0.2 : 1e-3;
}

static double force_trip(uint64_t t)
{
    return t >= 30 ? 0.06 : 1e-3;
}

/* The numerical site's rhythm: the command for tick t + 1 + L is sent after tick t's FEEDBACK,
 * arriving 0.3 ms after tick t's deadline. Runs ticks from..to (inclusive) unless `drop` says a
 * tick's datagram is lost. */
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
    drths_specimen_t spec;
    drths_specimen_params_t sp;
    drths_specimen_params_default(&sp, DRTHS_DAMPER_LINEAR_SPRING);
    drths_error_t err;
    assert_int_equal(drths_specimen_init(&spec, &sp, 1e-3, &err), 0);
    drths_daq_t daq;
    assert_int_equal(drths_daq_open_virtual(&spec, &daq, &err), 0);
    drths_actuator_t a;
    drths_actuator_params_t p = F.p;
    p.r = 17;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "link.redundancy: must be 1..16 (got 17)");
    p = F.p;
    p.watchdog_s = 0.0;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "physical.watchdog_ms: must be > 0 (got 0)");
    p = F.p;
    p.limit_force_N = -1.0;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "physical.limit_force_N: must be > 0 (got -1)");
    p = F.p;
    p.ramp_rate_m_s = 0.0;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg, "physical.ramp_rate_m_s: must be > 0 (got 0)");
    p = F.p;
    p.safe_position_m = 0.2;
    assert_int_equal(drths_actuator_init(&a, &p, &daq, &err), -EINVAL);
    assert_string_equal(err.msg,
                        "physical.safe_position_m: must lie inside +/- limit_drive_m (got 0.2)");
    p = F.p;
    assert_int_equal(drths_actuator_init(&a, &p, NULL, &err), -EINVAL);
    drths_actuator_close(&a); /* a failed init leaves a closable struct */
    drths_daq_close(&daq);
    drths_specimen_close(&spec);
}

static void test_rest_then_in_order(void **state)
{
    (void)state;
    open_actuator();
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
}

static void test_rest_rows_and_short_feedback(void **state)
{
    (void)state;
    begin(5, 4, sine);
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
}

static int drop_one(uint64_t T)
{
    return T == 40;
}

static void test_redundancy_repairs_a_loss(void **state)
{
    (void)state;
    begin(5, 4, sine);
    run(0, 80, sine, 4, drop_one);
    assert_int_equal(F.a.c.concealed, 0);
    assert_int_equal(F.a.c.from_redundancy, 1); /* tick 40 came in the COMMAND for tick 41 */
    assert_int_equal(F.a.c.applied, 75);
}

static void test_late_and_duplicate_counted(void **state)
{
    (void)state;
    F.p.r = 1;
    begin(5, 1, sine);
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
}

static uint64_t last_sent_tick;
static int drop_after_40(uint64_t T)
{
    return T > last_sent_tick;
}

static void test_too_many_concealed_holds(void **state)
{
    (void)state;
    F.p.r = 1;
    begin(5, 1, sine);
    last_sent_tick = 40;
    /* Ticks 41..45 are concealed (max 5), tick 46 goes to HOLD. */
    run(0, 45, sine, 1, drop_after_40);
    assert_int_equal(F.a.c.concealed, 5);
    assert_false(F.a.hold);
    double held = F.out.row[DRTHS_ACT_COL_MEAS_DISP];
    assert_int_equal(tick(46, 0), 0);
    assert_true(F.a.hold);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_HOLD);
    assert_string_equal(hold_text(&F.a), "too many concealed commands (6 in a row, limit 5)");
    assert_true(F.out.row[DRTHS_ACT_COL_HOLD] == 1.0);
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == held); /* drive held where it was measured */
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND_VEL] == 0.0);
    assert_true(F.out.row[DRTHS_ACT_COL_DAMPER_COMMAND] == 0.0); /* safe damper command */
    assert_int_equal(F.out.feedback.u.feedback.s[0].flags, DRTHS_FB_HOLD);
    assert_int_equal(F.out.feedback.u.feedback.s[0].cmd_tick, -1);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.type, DRTHS_MSG_ABORT);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_HOLD);
    /* The RT thread formats nothing: the ABORT names the cause in a fixed text (hold_cause.h). */
    assert_string_equal(F.out.abort.u.stop.text,
                        "too many concealed commands (physical.max_concealed_ms)");
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
}

/* The commands for ticks 46 .. 65 arrive 12 ticks after their tick (r = 1, budget 30), the ones
 * after them in time: the command stream plays them behind their ticks, then catches up (its
 * own tests are in test_command_stream.c). The tick says so: the FEEDBACK's cmd_tick, the same
 * as the row's, is behind the tick; the FEEDBACK flags it CONCEALED while the tick's own command
 * is late, and not once it is there in time and the playback is catching up; the row's
 * concealed column stays 0 (it marks the guesses, not the late commands played). */
static void test_delayed_playback_in_feedback_and_row(void **state)
{
    (void)state;
    F.p.r = 1;
    F.p.max_concealed_ticks = 30;
    F.p.ramp_rate_m_s = 0.05;
    begin(5, 1, sine);
    uint64_t late = 0, catching_up = 0;
    for (uint64_t t = 0; t < 600; t++) {
        assert_int_equal(tick(t, 0), 0);
        assert_false(F.a.hold);
        const drths_fb_sample_t *fs = &F.out.feedback.u.feedback.s[0];
        const double ct = F.out.row[DRTHS_ACT_COL_CMD_TICK];
        assert_true((double)fs->cmd_tick == ct);
        if (ct >= 0.0 && ct < (double)t) {
            assert_true(F.out.row[DRTHS_ACT_COL_CONCEALED] == 0.0); /* not a guess */
            if (t < 66) {
                assert_true(fs->flags & DRTHS_FB_CONCEALED);
                late++;
            } else {
                assert_false(fs->flags & DRTHS_FB_CONCEALED);
                catching_up++;
            }
        } else if (t >= 46 && t <= 58) {
            /* Before the first late command arrives: concealed, a guess. */
            assert_true(F.out.row[DRTHS_ACT_COL_CONCEALED] == 1.0);
            assert_true(fs->flags & DRTHS_FB_CONCEALED);
        }
        if (t >= 1 && (t < 40 || t >= 60))
            send_cmd(t + 6, 1, sine, deadline(t) + 300000);
        if (t >= 58 && t < 78) /* sent 18 ticks late: the command for t - 12 */
            send_cmd(t - 12, 1, sine, deadline(t) + 400000);
    }
    assert_true(late > 0 && catching_up > 0);
    assert_int_equal(F.a.c.delayed, late + catching_up);
    assert_true(F.a.c.catchup_ticks > 0);
    assert_int_equal(F.a.c.concealed, 13);
    /* Caught up: the last ticks play their own commands again. */
    assert_int_equal((int64_t)F.out.row[DRTHS_ACT_COL_CMD_TICK], 599);
}

static void test_watchdog(void **state)
{
    (void)state;
    F.p.r = 1;
    F.p.watchdog_s = 0.020;
    F.p.max_concealed_ticks = 1000; /* so that only the watchdog can act */
    begin(5, 1, sine);
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
    /* The last command (tick 40) arrived at tick 34; the buffer is dry from tick 41 and the
     * watchdog acts 20 ms later (within one tick). */
    int64_t dry_from = deadline(41) + 20000;
    int64_t at = deadline(t) + 20000;
    assert_true(at - dry_from > 20 * DT_NS);
    assert_true(at - dry_from <= 21 * DT_NS);
    assert_string_equal(hold_text(&F.a), "watchdog: no command to play for 21.0 ms (limit 20 ms)");
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_WATCHDOG);
}

/* The watchdog acts on the absence of commands to play, not on a gap in the arrivals: with L =
 * 60 (commands 60 ms ahead), nothing arrives from tick 40 to 100 (60 ms, three times the 20 ms
 * watchdog) while the buffer still holds the commands up to tick 100: no HOLD, nothing
 * concealed. Then the arrivals stop for good: the buffer runs dry at tick 162, the concealment
 * budget (10 ticks) runs out and the HOLD is the concealment's, at tick 172; with a budget
 * longer than the watchdog, the watchdog acts 20 ms after the buffer ran dry. */
static void test_watchdog_waits_for_an_empty_buffer(void **state)
{
    (void)state;
    for (int budget_case = 0; budget_case < 2; budget_case++) {
        fresh();
        F.p.r = 1;
        F.p.playout_ticks = 256;
        F.p.watchdog_s = 0.020;
        F.p.max_concealed_ticks = budget_case ? 1000 : 10;
        begin(60, 1, sine);
        int64_t last_arrival = 0;
        uint64_t t = 0;
        for (; t < 400; t++) {
            assert_int_equal(tick(t, 20000), 0);
            if (F.a.hold)
                break;
            const uint64_t T = t + 61;
            /* Sent at tick t - 1 + ... : arrivals pause over ticks 40..99 and stop at 100. */
            if (t >= 1 && t < 40) {
                send_cmd(T, 1, sine, deadline(t) + 300000);
                last_arrival = deadline(t) + 300000;
            } else if (t == 100) {
                for (uint64_t k = 40 + 61; k <= 100 + 61; k++)
                    send_cmd(k, 1, sine, deadline(t) + 300000);
                last_arrival = deadline(t) + 300000;
            }
            if (t == 99) {
                /* 59.7 ms without a COMMAND, the buffer still full: no HOLD. */
                assert_false(F.a.hold);
                assert_int_equal(F.a.c.concealed, 0);
            }
        }
        assert_true(F.a.hold);
        /* Commands were played up to tick 161, the last one sent; the buffer is dry from 162. */
        if (!budget_case) {
            assert_int_equal(t, 162 + 10);
            assert_int_equal(F.a.hold_reason, DRTHS_STOP_HOLD);
            assert_int_equal(F.a.c.concealed, 10);
        } else {
            assert_int_equal(F.a.hold_reason, DRTHS_STOP_WATCHDOG);
            assert_int_equal(t, 162 + 21);
            assert_true(deadline(t) - last_arrival > 20 * DT_NS);
            assert_string_equal(hold_text(&F.a),
                                "watchdog: no command to play for 21.0 ms (limit 20 ms)");
        }
    }
}

static void test_displacement_limit(void **state)
{
    (void)state;
    begin(5, 4, big_at_30);
    run(0, 23, big_at_30, 4, no_drop);
    assert_false(F.a.hold);
    /* Tick 24, then tick 30's COMMAND (sent L + 1 ahead) arrives: the 0.2 m command is refused
     * there, before any tick's preview or drive can use it. */
    run(24, 24, big_at_30, 4, no_drop);
    assert_true(F.a.hold);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_LIMIT);
    assert_int_equal(F.a.c.refused_commands, 1);
    assert_non_null(strstr(hold_text(&F.a), "command for tick 30 refused on arrival: displacement "
                                            "0.2 m"));
    assert_non_null(strstr(hold_text(&F.a), "exceeds limit_displacement_m 0.1 m"));
    /* The next tick already holds. */
    assert_int_equal(tick(25, 0), 0);
    assert_true(F.out.row[DRTHS_ACT_COL_HOLD] == 1.0);
    assert_true(fabs(F.out.row[DRTHS_ACT_COL_DRIVE]) < 2e-3);
}

/* With a compensation that previews the commands ahead (polynomial, a lead of several ticks),
 * the 0.2 m command would be in the preview from tick 25 on: refused on arrival, it never is,
 * and no drive is computed from it. */
static void test_preview_limit(void **state)
{
    (void)state;
    F.p.compensation = DRTHS_COMPENSATION_POLYNOMIAL;
    begin(5, 4, big_at_30);
    assert_true(F.a.lookahead >= 5);
    run(0, 24, big_at_30, 4, no_drop);
    assert_true(F.a.hold);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_LIMIT);
    assert_non_null(strstr(hold_text(&F.a), "command for tick 30 refused on arrival"));
    assert_int_equal(tick(25, 0), 0);
    assert_true(F.out.row[DRTHS_ACT_COL_HOLD] == 1.0);
    assert_true(fabs(F.out.row[DRTHS_ACT_COL_DRIVE]) < 2e-3);
}

static double fast_at_30(uint64_t t)
{
    return t == 30 ? 4.0 : 1e-3; /* velocity field is 0.5 x: 2 m/s at tick 30 */
}

static void test_velocity_limit(void **state)
{
    (void)state;
    F.p.limit_displacement_m = 10.0;
    begin(5, 4, fast_at_30);
    run(0, 23, fast_at_30, 4, no_drop);
    assert_false(F.a.hold);
    run(24, 24, fast_at_30, 4, no_drop); /* tick 30's command arrives: refused */
    assert_true(F.a.hold);
    assert_string_equal(hold_text(&F.a), "command for tick 30 refused on arrival: velocity 2 m/s "
                                         "exceeds limit_velocity_m_s 1 m/s");
}

static void test_force_limit(void **state)
{
    (void)state;
    F.p.limit_force_N = 50e3; /* the spring gives 60 kN at 0.06 m */
    F.p.limit_velocity_m_s = 100.0; /* the step to 0.06 m in one tick is a command */
    begin(5, 4, force_trip);
    run(0, 29, force_trip, 4, no_drop);
    assert_false(F.a.hold);
    assert_int_equal(tick(30, 0), 0);
    /* Measured in this tick: HOLD is flagged in this tick's FEEDBACK and row ... */
    assert_true(F.a.hold);
    assert_int_equal(F.out.feedback.u.feedback.s[0].flags, DRTHS_FB_HOLD);
    assert_string_equal(hold_text(&F.a), "force limit: measured force 60 kN exceeds 50 kN");
    /* ... and the next tick holds the drive at the measured 0.06 m with the damper off. */
    assert_int_equal(tick(31, 0), 0);
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == 0.06);
    assert_true(F.out.row[DRTHS_ACT_COL_DAMPER_COMMAND] == 0.0);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_LIMIT);
}

/* A force converter at its end (full scale 55 kN; the spring gives 60 kN at 0.06 m) is a HOLD
 * of its own, whatever the force limit: the true force may lie beyond what it reads. */
static void test_converter_saturated(void **state)
{
    (void)state;
    F.p.limit_force_N = 1e9; /* could never trip */
    F.p.limit_velocity_m_s = 100.0; /* the step to 0.06 m in one tick is a command */
    F.adc_bits = 16;
    F.force_range_N = 55e3;
    begin(5, 4, force_trip);
    run(0, 29, force_trip, 4, no_drop);
    assert_false(F.a.hold);
    assert_int_equal(tick(30, 0), 0);
    assert_true(F.a.hold);
    assert_int_equal(F.out.daq_rc, -ERANGE);
    assert_int_equal(F.out.feedback.u.feedback.s[0].flags, DRTHS_FB_HOLD);
    assert_non_null(strstr(hold_text(&F.a), "converter saturated: measured force reads 54.99"));
    assert_non_null(strstr(hold_text(&F.a), "the true value may lie beyond"));
    assert_int_equal(tick(31, 0), 0);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_LIMIT);
    assert_true(F.daq.n_saturated >= 1);
    drths_error_t err;
    assert_int_equal(drths_daq_error(&F.daq, &err), -ERANGE);
    assert_non_null(
        strstr(err.msg, "virtual DAQ: force_in: the input is at an end of its converter"));
}

static void test_stop_ends_after_last_tick(void **state)
{
    (void)state;
    F.p.watchdog_s = 0.002; /* shorter than L: the watchdog must not fire after STOP */
    begin(5, 4, sine);
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
}

static void test_peer_abort(void **state)
{
    (void)state;
    begin(5, 4, sine);
    run(0, 20, sine, 4, no_drop);
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_ABORT;
    m.u.stop.reason = DRTHS_STOP_SIGNAL;
    strcpy(m.u.stop.text, "interrupted");
    drths_actuator_receive(&F.a, &m, deadline(20) + 500000);
    assert_true(F.a.hold);
    assert_string_equal(hold_text(&F.a), "numerical site aborted: SIGNAL: interrupted");
    uint64_t t = 21;
    for (;; t++) {
        assert_int_equal(tick(t, 0), 0);
        assert_false(F.out.send_abort); /* no ABORT back to the site that aborted */
        if (F.out.finished)
            break;
    }
    assert_int_equal(t, 21 + 200);
    assert_int_equal(F.a.end_reason, DRTHS_STOP_SIGNAL);
}

static void test_signal_hold(void **state)
{
    (void)state;
    begin(5, 4, sine);
    run(0, 20, sine, 4, no_drop);
    drths_hold_cause_t c;
    drths_hold_cause_text(&c, "stopped by signal");
    drths_actuator_hold(&F.a, DRTHS_STOP_SIGNAL, 1, &c);
    drths_hold_cause_text(&c, "second cause ignored");
    drths_actuator_hold(&F.a, DRTHS_STOP_LIMIT, 1, &c);
    assert_int_equal(tick(21, 0), 0);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_SIGNAL);
    assert_string_equal(F.out.abort.u.stop.text, "stopped by signal");
    assert_true(F.out.row[DRTHS_ACT_COL_COMMAND] == sine(20));
}

static void test_later_epoch(void **state)
{
    (void)state;
    begin(5, 4, sine);
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
}

/* L above the playout capacity (64): the first COMMAND, sent with EPOCH 1 before tick 0, still
 * fits, because the play head starts at L + 1. */
static void test_L_beyond_playout_capacity(void **state)
{
    (void)state;
    begin(100, 4, sine);
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
}

static int drop_some(uint64_t T)
{
    return (T % 97) == 0 || (T % 211) < 3;
}

static void test_no_allocation_per_tick(void **state)
{
    (void)state;
    F.p.max_concealed_ticks = 2;
    begin(5, 4, sine);
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
}

/* ---- golden record ------------------------------------------------------------------------ */

/* Everything a tick hands back, folded into a 64-bit FNV-1a hash: the row, the FEEDBACK, the
 * ABORT, the events and the end flag, bit for bit (NaN payloads included). The constants in
 * test_golden_runs were computed by this test on the tick before it was split into phases, so
 * that any change of behaviour, however small, shows; change them only for a deliberate change
 * of behaviour, from the hash the failing test prints. */
static uint64_t golden_hash;

static void hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        golden_hash ^= b[i];
        golden_hash *= UINT64_C(1099511628211);
    }
}

static void hash_u64(uint64_t v)
{
    hash_bytes(&v, sizeof v);
}

static void hash_double(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    hash_u64(u);
}

static void hash_out(int rc, const drths_actuator_out_t *o)
{
    hash_u64((uint64_t)(int64_t)rc);
    if (rc)
        return;
    /* The columns up to the tracking indicator; the adaptive factors after them are 1 in
     * these runs' modes (checked here), so the hashes predate those columns. */
    for (int i = 0; i <= DRTHS_ACT_COL_TRACK_TI; i++)
        hash_double(o->row[i]);
    for (int i = DRTHS_ACT_COL_THETA0; i <= DRTHS_ACT_COL_THETA3; i++)
        assert_true(o->row[i] == 1.0);
    const drths_msg_t *fb = &o->feedback;
    const drths_msg_feedback_t *f = &fb->u.feedback;
    hash_u64(fb->type);
    hash_u64(fb->epoch);
    hash_u64(fb->tick);
    hash_u64(fb->counter);
    hash_u64(fb->session_id);
    hash_u64(f->n_channels);
    hash_u64(f->r);
    hash_u64(f->echo_counter);
    hash_u64(f->echo_hold_ns);
    for (int k = 0; k < f->r; k++) {
        hash_u64((uint64_t)f->s[k].cmd_tick);
        hash_u64(f->s[k].flags);
        hash_double(f->s[k].ch[0].force_n);
        hash_double(f->s[k].ch[0].disp_m);
    }
    hash_u64((uint64_t)o->send_abort);
    if (o->send_abort) {
        hash_u64(o->abort.type);
        hash_u64(o->abort.epoch);
        hash_u64(o->abort.tick);
        hash_u64(o->abort.u.stop.reason);
        hash_bytes(o->abort.u.stop.text, strlen(o->abort.u.stop.text));
    }
    hash_u64((uint64_t)o->finished);
    hash_u64(o->events);
    hash_u64((uint64_t)(int64_t)o->daq_rc);
}

/* The counters and HOLD state after a run. */
static void hash_end(const drths_actuator_t *a)
{
    const drths_actuator_counters_t *c = &a->c;
    const uint64_t n[] = {c->ticks,       c->rest_ticks,      c->commands,
                          c->applied,     c->concealed,       c->max_consecutive_concealed,
                          c->late,        c->duplicates,      c->reordered,
                          c->too_far,     c->from_redundancy, c->bad_commands,
                          c->epochs,      c->late_wakeups,    c->hold_ticks,
                          c->daq_errors,  c->tracked,         c->rejoins,
                          a->hold_tick,   a->settled_tick,    (uint64_t)a->hold,
                          a->hold_reason, a->end_reason,      (uint64_t)a->aborts_sent};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        hash_u64(n[i]);
    hash_double(c->max_rejoin_offset_m);
    hash_double(a->hold_target_m);
    hash_double(a->hold_max_step_m);
    hash_double(drths_daq_last_drive(a->daq));
    hash_double(drths_actuator_tracking_rms_pct(a));
    hash_bytes(hold_text(a), strlen(hold_text(a)));
}

/* A 2 mm, 1.5 Hz sine whose damper command switches between 0 and 2.5 A every 37 ticks, with
 * a spike of golden_spike_m at tick golden_spike (0: none). */
static uint64_t golden_spike;
static double golden_spike_m;

static double golden_traj(uint64_t t)
{
    if (golden_spike && t == golden_spike)
        return golden_spike_m;
    return 2e-3 * sin(2.0 * M_PI * 1.5 * (double)t / RATE);
}

static double golden_damper(uint64_t t)
{
    return (t / 37) % 2 ? 2.5 : 0.0;
}

/* Lost datagrams: one now and then (repaired by redundancy), and a run of five. */
static int golden_drop(uint64_t T)
{
    return T % 97 == 0 || (T >= 150 && T <= 154);
}

typedef struct golden_case {
    const char *name;
    drths_compensation_t comp;
    int plant; /* the 200-kN damper and plant, else the spring */
    int r;
    drths_hold_mode_t hold_mode; /* 0: at the measured position */
    double ramp_rate_m_s;        /* 0: 0.05 */
    double limit_drive_m;        /* 0: 0.1 */
    uint64_t spike;              /* tick of a spike command (a limit), 0: none */
    double spike_m;
    uint64_t last_sent;   /* no COMMAND after this tick (concealment, watchdog), 0: none */
    uint64_t stop_tick;   /* STOP after this tick's COMMAND, 0: none */
    uint64_t abort_at;    /* the numerical site's ABORT after this tick, 0: none */
    uint64_t epoch_at;    /* EPOCH 2 (L 7) effective at this tick, 0: none */
    double watchdog_s;    /* 0: 1 s */
    int max_concealed;    /* 0: 10 */
    double limit_force_N; /* 0: 250 kN */
    uint64_t expect;
} golden_case_t;

static uint64_t golden_run(const golden_case_t *gc)
{
    fresh();
    drths_actuator_params_t *p = &F.p;
    p->compensation = gc->comp;
    p->comp_io_delay_ticks = 1;
    p->ff_max_acc_m_s2 = 50.0;
    p->ff_max_jerk_m_s3 = 2e4;
    drths_damper_params_preset(&p->damper_nominal, DRTHS_DAMPER_PHILLIPS2013);
    p->r = gc->r;
    p->hold_mode = gc->hold_mode;
    p->safe_position_m = 5e-4;
    p->ramp_rate_m_s = gc->ramp_rate_m_s > 0.0 ? gc->ramp_rate_m_s : 0.05;
    p->limit_drive_m = gc->limit_drive_m > 0.0 ? gc->limit_drive_m : 0.1;
    p->watchdog_s = gc->watchdog_s > 0.0 ? gc->watchdog_s : 1.0;
    p->max_concealed_ticks = gc->max_concealed ? gc->max_concealed : 10;
    p->limit_force_N = gc->limit_force_N > 0.0 ? gc->limit_force_N : 250e3;
    F.plant = gc->plant;
    const uint64_t last_sent = gc->last_sent ? gc->last_sent : UINT64_MAX;
    damper_of = golden_damper;
    golden_spike = gc->spike;
    golden_spike_m = gc->spike_m;
    golden_hash = UINT64_C(14695981039346656037);
    begin(5, gc->r, golden_traj);
    uint64_t t = 0, held = 0, hold_rows = 0, first_hold_row = 0;
    for (; t < 2000; t++) {
        /* Wake-up lateness from 0 to 0.9 ms, some of it above half a tick. */
        int rc = tick(t, (int64_t)((t * 7919u) % 900u) * 1000);
        hash_out(rc, &F.out);
        assert_int_equal(rc, 0);
        if (F.out.row[DRTHS_ACT_COL_HOLD] != 0.0 && !hold_rows++)
            first_hold_row = t;
        if (F.out.finished)
            break;
        uint64_t T = t + 1 + F.a.L;
        if (gc->epoch_at && t == gc->epoch_at - 20) {
            drths_msg_t m;
            memset(&m, 0, sizeof m);
            m.type = DRTHS_MSG_EPOCH;
            m.u.epoch.new_epoch = 2;
            m.u.epoch.loop_delay_ticks = 7;
            m.u.epoch.effective_tick = gc->epoch_at;
            drths_actuator_receive(&F.a, &m, deadline(t) + 100000);
        }
        const int64_t at = deadline(t) + 300000;
        if (t >= 1 && T <= last_sent && !golden_drop(T) && (!gc->stop_tick || T <= gc->stop_tick)) {
            /* Every 13th datagram arrives after the next one (reordered), every 41st twice. */
            if (T % 13 == 0) {
                held = T;
            } else {
                send_cmd(T, gc->r, golden_traj, at);
                if (T % 41 == 0)
                    send_cmd(T, gc->r, golden_traj, at + 50000);
            }
        }
        if (held && held != T) {
            send_cmd(held, gc->r, golden_traj, at + 100000);
            held = 0;
        }
        if (t == 151) /* the lost command of tick 150 arrives after its tick: late */
            send_cmd(150, 1, golden_traj, deadline(t) + 200000);
        if (gc->stop_tick && T == gc->stop_tick) {
            drths_msg_t m;
            memset(&m, 0, sizeof m);
            m.type = DRTHS_MSG_STOP;
            m.tick = gc->stop_tick;
            drths_actuator_receive(&F.a, &m, deadline(t) + 400000);
        }
        if (gc->abort_at && t == gc->abort_at) {
            drths_msg_t m;
            memset(&m, 0, sizeof m);
            m.type = DRTHS_MSG_ABORT;
            m.u.stop.reason = DRTHS_STOP_SIGNAL;
            strcpy(m.u.stop.text, "interrupted");
            drths_actuator_receive(&F.a, &m, deadline(t) + 500000);
        }
    }
    assert_true(F.out.finished);
    /* summary.json's HOLD ticks are the rows flagged HOLD (issue 29: they differed by the tick
     * whose measurement found a limit). */
    assert_int_equal(F.a.c.hold_ticks, hold_rows);
    if (hold_rows)
        assert_int_equal(F.a.hold_first_tick, first_hold_row);
    hash_u64(t);
    hash_end(&F.a);
    golden_spike = 0;
    return golden_hash;
}

static void test_golden_runs(void **state)
{
    (void)state;
    const golden_case_t cases[] = {
        /* Feedforward over the plant: redundancy, concealment and rejoin, a late, reordered and
         * duplicate commands, a second epoch, then a command over the limit refused on arrival
         * and the HOLD ramp to the safe position with its three ABORTs. */
        {.name = "feedforward ramp",
         .comp = DRTHS_COMPENSATION_FEEDFORWARD,
         .plant = 1,
         .r = 2,
         .hold_mode = DRTHS_HOLD_RAMP,
         .ramp_rate_m_s = 0.01,
         .spike = 600,
         .spike_m = 0.2,
         .epoch_at = 300,
         .expect = UINT64_C(0x4afe1da27c8b5fee)},
        /* The polynomial compensation to the end of the record (STOP). */
        {.name = "polynomial stop",
         .comp = DRTHS_COMPENSATION_POLYNOMIAL,
         .plant = 1,
         .r = 4,
         .stop_tick = 400,
         .expect = UINT64_C(0xdec079e4e99fedf6)},
        /* Too many concealed commands: HOLD at the measured position over the spring. */
        {.name = "concealed hold",
         .comp = DRTHS_COMPENSATION_NONE,
         .r = 1,
         .last_sent = 250,
         .max_concealed = 3,
         .expect = UINT64_C(0x0b499c234393e393)},
        /* The drive limit (the command itself within its limit): the envelope refuses the first
         * drive beyond 1.5 mm, and the ramp starts from the last one it admitted. */
        {.name = "drive limit",
         .comp = DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE,
         .plant = 1,
         .r = 4,
         .limit_drive_m = 1.5e-3,
         .expect = UINT64_C(0xa8c2e98fac7be2a0)},
        /* The watchdog, with concealment allowed for longer. */
        {.name = "watchdog",
         .comp = DRTHS_COMPENSATION_NONE,
         .r = 1,
         .hold_mode = DRTHS_HOLD_RAMP,
         .ramp_rate_m_s = 0.02,
         .last_sent = 250,
         .watchdog_s = 0.02,
         .max_concealed = 1000,
         .expect = UINT64_C(0xb60142ec7520c082)},
        /* The force limit, measured over the spring (1 MN/m: 2 kN at the trajectory's 2 mm). */
        {.name = "force limit",
         .comp = DRTHS_COMPENSATION_NONE,
         .r = 4,
         .limit_force_N = 1.5e3,
         .expect = UINT64_C(0xd6e150b2c025f91a)},
        /* The numerical site's ABORT: HOLD without an ABORT back. */
        {.name = "peer abort",
         .comp = DRTHS_COMPENSATION_FEEDFORWARD,
         .plant = 1,
         .r = 4,
         .abort_at = 350,
         .expect = UINT64_C(0x22a12b27998464a9)},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint64_t h = golden_run(&cases[i]);
        if (h != cases[i].expect) {
            print_message("golden %s: hash 0x%016llx, expected 0x%016llx\n", cases[i].name,
                          (unsigned long long)h, (unsigned long long)cases[i].expect);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* ---- the stability monitor ---------------------------------------------------------------- */

#define STAB_L 5

/* Command time (s from tick L + 1) of tick t. */
static double cmd_time(uint64_t t)
{
    return t > STAB_L ? (double)(t - STAB_L - 1) / RATE : 0.0;
}

/* The monitor's defaults (physical.stability_*) with the record ending at quiet_after_s, in
 * F.p (fresh). */
static void stability(double quiet_after_s)
{
    fresh();
    drths_actuator_params_t *p = &F.p;
    p->playout_ticks = 256;
    p->stab_window_s = 0.2;
    p->stab_windows = 4;
    p->stab_min_amp_m = 0.002;
    p->stab_growth_per_s = 2.0;
    p->stab_quiet_amp_m = 0.0005;
    p->stab_min_decay_per_s = 0.25;
    p->stab_quiet_after_s = quiet_after_s;
    /* The trajectories here move up to about 1 m/s at 1 kHz; the command limits are not what
     * these tests are about. */
    p->limit_velocity_m_s = 10.0;
}

/* Runs ticks 0..to with traj in the numerical site's rhythm (run above) until HOLD is entered;
 * returns the tick that entered it, or UINT64_MAX. */
static uint64_t run_until_hold(uint64_t to, traj_fn x)
{
    send_cmd(STAB_L + 1, 4, x, T0 - 4 * DT_NS);
    for (uint64_t t = 0; t <= to; t++) {
        assert_int_equal(tick(t, 20000), 0);
        if (F.a.hold)
            return t;
        if (t >= 1)
            send_cmd(t + 1 + STAB_L, 4, x, deadline(t) + 300000);
    }
    return UINT64_MAX;
}

/* A loop going unstable during the record: 3.1 Hz growing 3/s (x20 per second) from 0.2 mm.
 * The amplitude passes the 2 mm floor at ln(10)/3 = 0.77 s, and the displacement limit (0.1 m)
 * at 2.07 s. */
static double fast_growth(uint64_t t)
{
    const double s = cmd_time(t);
    return 2e-4 * exp(3.0 * s) * sin(2.0 * M_PI * 3.1 * s);
}

/* A self-excited oscillation that the record's end (at 2 s) gives away: 3 mm at 3.1 Hz growing
 * 40 %/s from the start, which during the record is no faster than a response to an earthquake
 * may grow; after its end a stable structure's response decays. */
static double slow_growth(uint64_t t)
{
    const double s = cmd_time(t);
    return 3e-3 * pow(1.4, s) * sin(2.0 * M_PI * 3.1 * s);
}

static void test_stability_growth_holds(void **state)
{
    (void)state;
    stability(INFINITY);
    open_actuator();
    start(STAB_L);
    const uint64_t at = run_until_hold(3000, fast_growth);
    assert_true(F.a.hold);
    const double t_hold = cmd_time(at);
    /* Within 1 s of the amplitude reaching the monitor's floor, well before the limits. */
    assert_true(t_hold > log(10.0) / 3.0 && t_hold < log(10.0) / 3.0 + 1.0);
    assert_int_equal(F.a.hold_reason, DRTHS_STOP_LIMIT);
    assert_non_null(strstr(hold_text(&F.a), "stability: oscillation at 3.1 Hz growing"));
    assert_non_null(strstr(hold_text(&F.a), "%/s over 0.8 s; amplitude"));
    /* HOLD flags this tick's FEEDBACK; the next tick drives the ramp and sends the ABORT. */
    assert_int_equal(F.out.feedback.u.feedback.s[0].flags, DRTHS_FB_HOLD);
    assert_int_equal(tick(at + 1, 0), 0);
    assert_true(F.out.send_abort);
    assert_int_equal(F.out.abort.u.stop.reason, DRTHS_STOP_LIMIT);
    assert_string_equal(F.out.abort.u.stop.text,
                        "stability: a growing oscillation of the measured displacement");
}

static void test_stability_after_record_holds(void **state)
{
    (void)state;
    stability(2.0);
    open_actuator();
    start(STAB_L);
    const uint64_t at = run_until_hold(6000, slow_growth);
    assert_true(F.a.hold);
    const double t_hold = cmd_time(at);
    /* Not during the record (40 %/s is below the growth rate), within 1 s after its end. */
    assert_true(t_hold > 2.0 && t_hold <= 3.0);
    assert_non_null(strstr(hold_text(&F.a), "stability: oscillation at 3.1 Hz not decaying after "
                                            "the record's end (+"));
}

/* Band-limited noise, 0.2 to 15 Hz: 60 sines with pseudo-random phases, their amplitudes flat
 * or falling as 1/f (noise_pink: slow motion dominates), unit RMS. */
static int noise_pink;
static double noise(double s)
{
    static double ph[60];
    static int ready;
    if (!ready) {
        uint32_t z = 12345u;
        for (int i = 0; i < 60; i++) {
            z = z * 1664525u + 1013904223u;
            ph[i] = 2.0 * M_PI * (double)(z >> 8) / 16777216.0;
        }
        ready = 1;
    }
    double v = 0.0, norm = 0.0;
    for (int i = 0; i < 60; i++) {
        const double f = 0.2 + (15.0 - 0.2) * i / 59.0;
        const double g = noise_pink ? 1.0 / f : 1.0;
        v += g * sin(2.0 * M_PI * f * s + ph[i]);
        norm += 0.5 * g * g;
    }
    return v / sqrt(norm);
}

/* A strong, stable, earthquake-like response: the noise under an envelope that rises 1/s (the
 * default experiment's response grows at most 1.5/s over 0.8 s) to 20 mm RMS (peaks near 60 mm)
 * at 3 s and decays 0.3/s until the record ends at 10 s, then free vibration at 2.88 Hz with 2 %
 * damping. */
static double quake(uint64_t t)
{
    const double s = cmd_time(t);
    const double w = 2.0 * M_PI * 2.88;
    if (s < 10.0)
        return 0.02 * (s < 3.0 ? exp(s - 3.0) : exp(-0.3 * (s - 3.0))) * noise(s);
    return 0.02 * exp(-2.1) * exp(-0.02 * w * (s - 10.0)) * cos(w * (s - 10.0));
}

/* Stationary band-limited noise, 0.2-15 Hz, 15 mm RMS: the kind of command the tracking study
 * (drths-tracking) drives, which does not go through the actuator's tick. */
static double steady_noise(uint64_t t)
{
    return 0.015 * noise(cmd_time(t));
}

/* The onset of strong motion as the default experiment's first floor sees it (the reference
 * run of examples/three-story-elcentro.yaml: about 3.8 mm until 2 s, 12 mm at 2.6 s): 3.8 mm at
 * 2.9 Hz until 1.1 s, then growing 2.3/s to 12 mm, then steady. One fit of four windows
 * reaches the HOLD's 2.0/s, as the reference run's does for one window alignment in four; the
 * fits before and after it do not. */
static double quake_onset(uint64_t t)
{
    const double s = cmd_time(t);
    const double env = s < 1.1 ? 3.8e-3 : fmin(3.8e-3 * exp(2.3 * (s - 1.1)), 12e-3);
    return env * sin(2.0 * M_PI * 2.9 * s);
}

/* A single fit at the growth rate is no HOLD: the fit one window earlier must reach it too
 * (fast_growth, an instability, does and holds in test_stability_growth_holds). */
static void test_stability_onset_is_no_hold(void **state)
{
    (void)state;
    stability(INFINITY);
    open_actuator();
    start(STAB_L);
    assert_int_equal(run_until_hold(15000, quake_onset), UINT64_MAX);
    /* A single fit reached the rate: without the persistence this run was a HOLD. */
    assert_true(F.a.stab_max_growth >= F.p.stab_growth_per_s);
}

static void test_stability_no_false_hold(void **state)
{
    (void)state;
    for (noise_pink = 0; noise_pink <= 1; noise_pink++) {
        stability(10.0);
        open_actuator();
        start(STAB_L);
        assert_int_equal(run_until_hold(14000, quake), UINT64_MAX);
        /* The steepest growth the monitor fitted stays below the HOLD's (1.57/s with the flat
         * spectrum, 0.79/s with 1/f: the envelope's 1/s and the scatter of the windows' peaks). */
        assert_true(F.a.stab_max_growth < F.p.stab_growth_per_s);

        stability(INFINITY);
        open_actuator();
        start(STAB_L);
        assert_int_equal(run_until_hold(20000, steady_noise), UINT64_MAX);
        assert_true(F.a.stab_max_growth < F.p.stab_growth_per_s);
    }
    noise_pink = 0;

    /* Off: the growing oscillation runs into the displacement limit instead. */
    stability(INFINITY);
    F.p.stab_window_s = 0.0;
    open_actuator();
    start(STAB_L);
    assert_true(run_until_hold(3000, fast_growth) != UINT64_MAX);
    assert_null(strstr(hold_text(&F.a), "stability"));
}

/* R = 8: the FEEDBACK's samples are the measurements of ticks t - offset(k), offsets 0, 1, 2, 3,
 * 8, 16, 32, 64 (the HELLO's list serves both directions, PROTOCOL.md section 8). */
static void test_feedback_spread_offsets(void **state)
{
    (void)state;
    F.p.r = 8;
    begin(5, 4, sine);
    run(0, 99, sine, 4, no_drop);
    assert_int_equal(F.a.c.concealed, 0);
    const drths_msg_feedback_t *f = &F.out.feedback.u.feedback;
    assert_int_equal(F.out.feedback.tick, 99);
    assert_int_equal(f->r, 8);
    static const uint64_t ticks[8] = {99, 98, 97, 96, 91, 83, 67, 35};
    for (int k = 0; k < 8; k++) {
        assert_int_equal(f->s[k].cmd_tick, (int64_t)ticks[k]);
        assert_true(fabs(f->s[k].ch[0].disp_m - sine(ticks[k])) < 1e-15);
        assert_true(fabs(f->s[k].ch[0].force_n - K_SPRING * sine(ticks[k])) < 1e-9);
    }

    /* Near the start only the ticks that exist: at tick 40 offset 64 is not there yet. */
    fresh();
    F.p.r = 8;
    begin(5, 4, sine);
    run(0, 40, sine, 4, no_drop);
    assert_int_equal(F.out.feedback.tick, 40);
    assert_int_equal(f->r, 7);
    assert_int_equal(f->s[6].cmd_tick, 8);
}

/* Each test opens its actuator from the defaults and closes it in the tear-down. */
/* Late wake-ups counted two ways: every tick run later than dt/2 (a stall's catch-up ticks
 * included), and by cyclictest's rule (a stall is one wake-up; the ticks it overran, run back to
 * back, are overrun ticks). Rest ticks (L = 30), 1 ms ticks: tick 10 wakes 5 ms late, ticks
 * 11..15 run 10 us apart after it (ticks 11..14 still late, 15 not), tick 16 on time. */
static void test_wakeups_by_cyclictest_rule(void **state)
{
    (void)state;
    open_actuator();
    start(30);
    for (uint64_t t = 0; t < 10; t++)
        assert_int_equal(tick(t, 20000), 0);
    const int64_t woke = deadline(10) + 5 * DT_NS;
    for (uint64_t t = 10; t <= 15; t++)
        assert_int_equal(drths_actuator_tick(&F.a, t, deadline(t),
                                             woke + (int64_t)(t - 10) * 10000, &F.out), 0);
    assert_int_equal(tick(16, 5000), 0);
    assert_int_equal(F.a.c.ticks, 17);
    assert_int_equal(F.a.c.late_wakeups, 5);    /* ticks 10..14 */
    assert_int_equal(F.a.c.overrun_ticks, 5);   /* ticks 11..15 */
    assert_int_equal(F.a.c.wakeups, 12);        /* ticks 0..10 and 16 */
    assert_int_equal(F.a.c.late_wakeups_cyc, 1); /* tick 10 */
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_init_errors),
        TEST(test_rest_then_in_order),
        TEST(test_rest_rows_and_short_feedback),
        TEST(test_redundancy_repairs_a_loss),
        TEST(test_late_and_duplicate_counted),
        TEST(test_wakeups_by_cyclictest_rule),
        TEST(test_too_many_concealed_holds),
        TEST(test_delayed_playback_in_feedback_and_row),
        TEST(test_watchdog),
        TEST(test_watchdog_waits_for_an_empty_buffer),
        TEST(test_displacement_limit),
        TEST(test_preview_limit),
        TEST(test_velocity_limit),
        TEST(test_force_limit),
        TEST(test_converter_saturated),
        TEST(test_stop_ends_after_last_tick),
        TEST(test_peer_abort),
        TEST(test_signal_hold),
        TEST(test_later_epoch),
        TEST(test_L_beyond_playout_capacity),
        TEST(test_no_allocation_per_tick),
        TEST(test_golden_runs),
        TEST(test_feedback_spread_offsets),
        TEST(test_stability_growth_holds),
        TEST(test_stability_onset_is_no_hold),
        TEST(test_stability_after_record_holds),
        TEST(test_stability_no_false_hold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
