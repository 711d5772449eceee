/* The actuator site's command stream driven directly, in virtual time, as the actuator drives it
 * (a playout buffer, the received samples put in as drths_actuator_receive does, one call a tick
 * with the tick's L): the source of each tick's command, the last four commands and the preview
 * with the rejoin offset; Lagrange concealment (exact for a cubic) holding the damper command,
 * braking to rest after a long gap; the rejoin blending into the commands after a jump and after
 * a raise of L; gaps at every phase within the motion limits, and the budget's HOLD beyond them;
 * late commands played behind their ticks (delayed playback), catching up, surviving a gap, and
 * the HOLD when they fall further behind than the budget.
 *
 * What the actuator makes of the source (the FEEDBACK's CONCEALED flag for LATE and CONCEALED,
 * the record's concealed column for CONCEALED, the lead for the commands received in time) is
 * asserted through the same helpers here; test_actuator.c checks that mapping through the tick. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "site-physical/command_stream.h"

/* An OVERDUE tick's HOLD sentence, formatted from the cause as the main thread does. */
static const char *hold_text(const drths_cmdstream_out_t *o)
{
    static char buf[DRTHS_WIRE_MAX_TEXT + 1];
    drths_hold_cause_describe(&o->hold_cause, buf, sizeof buf);
    return buf;
}

#define RATE 1000.0
#define DT_NS INT64_C(1000000)
#define T0 INT64_C(5000000000)
#define REST_CMD 2.5
/* The actuator's velocity limit in these runs (physical.limit_velocity_m_s). */
#define LIMIT_VEL 1.0

typedef double (*traj_fn)(uint64_t tick);
typedef void (*sample_fn)(uint64_t tick, drths_cmd_channel_t *s);

typedef struct fixture {
    drths_cmdstream_params_t p;
    drths_playout_t pb;
    drths_cmdstream_t cs;
    drths_cmdstream_out_t out;    /* the last tick's answer */
    uint64_t L;                   /* in force */
    uint64_t next_L, next_L_tick; /* a new L and the tick it takes effect from (0: none) */
    bool hold;                    /* the stream answered OVERDUE: the actuator is in HOLD */
    bool open;
} fixture_t;

static fixture_t F;

/* The damper command send_cmd puts in each sample: 1.5 unless a test sets this. */
static double (*damper_of)(uint64_t tick);

/* The actuator's defaults in test_actuator.c, as the stream sees them: no compensation (no
 * preview), a fast HOLD ramp, no feedforward limits. */
static void params_default(drths_cmdstream_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->rate_hz = RATE;
    p->playout_ticks = 64;
    p->max_concealed_ticks = 5;
    p->lookahead = 0;
    p->ramp_rate_m_s = 1e3;
    p->rest_damper_command = REST_CMD;
}

static void teardown(void)
{
    if (!F.open)
        return;
    damper_of = NULL;
    drths_cmdstream_close(&F.cs);
    drths_cmdstream_close(&F.cs); /* safe twice */
    drths_playout_close(&F.pb);
    F.open = false;
}

static void setup_with(const drths_cmdstream_params_t *p)
{
    teardown();
    memset(&F, 0, sizeof F);
    F.p = *p;
    drths_error_t err;
    assert_int_equal(
        drths_playout_init(&F.pb, p->playout_ticks, sizeof(drths_cmd_channel_t), 0, &err), 0);
    assert_int_equal(drths_cmdstream_init(&F.cs, &F.p, &err), 0);
    F.open = true;
}

static int64_t deadline(uint64_t t)
{
    return T0 + (int64_t)t * DT_NS;
}

static void start(uint64_t L)
{
    F.L = L;
    drths_cmdstream_start(&F.cs, &F.pb, L);
}

/* A COMMAND for tick T with r samples, received at `arrival`, as drths_actuator_receive takes
 * it: sample k is for tick T - offset(k), and ticks up to L (the rest position) are skipped. */
static void receive(uint64_t T, int r, sample_fn f, int64_t arrival)
{
    const int n = drths_wire_samples_of(T, r);
    for (int k = 0; k < n; k++) {
        const uint64_t t = drths_wire_sample_tick(T, k);
        if (t <= F.L)
            continue;
        drths_cmd_channel_t s;
        f(t, &s);
        (void)drths_cmdstream_put(&F.cs, &F.pb, t, k > 0, &s, arrival);
    }
}

static traj_fn send_traj;

/* traj's sample (velocity: half its displacement, so it can be told apart; damper command
 * 1.5 unless damper_of says otherwise). */
static void traj_sample(uint64_t t, drths_cmd_channel_t *s)
{
    s->disp_m = send_traj(t);
    s->vel_m_s = 0.5 * send_traj(t);
    s->acc_m_s2 = 0.0;
    s->damper_cmd = damper_of ? damper_of(t) : 1.5;
}

static void send_cmd(uint64_t T, int r, traj_fn x, int64_t arrival)
{
    send_traj = x;
    receive(T, r, traj_sample, arrival);
}

/* Tick t, due at deadline_ns, outside HOLD until the stream answers OVERDUE (the actuator's
 * HOLD), then in HOLD; a new L takes effect at its tick as the actuator's epochs do. */
static void tick_at(uint64_t t, int64_t deadline_ns)
{
    if (F.next_L_tick && t >= F.next_L_tick) {
        F.L = F.next_L;
        F.next_L_tick = 0;
    }
    drths_cmdstream_tick(&F.cs, &F.pb, t, deadline_ns, F.L, F.hold, &F.out);
    if (F.out.source == DRTHS_CMD_SRC_OVERDUE)
        F.hold = true;
}

static void tick(uint64_t t)
{
    tick_at(t, deadline(t));
}

/* What the actuator makes of the source: the FEEDBACK's CONCEALED flag (the tick's own command
 * was not there), the record's concealed column (a guess) and the lead (received in time). */
static bool fb_concealed(void)
{
    return F.out.source == DRTHS_CMD_SRC_LATE || F.out.source == DRTHS_CMD_SRC_CONCEALED;
}

static bool row_concealed(void)
{
    return F.out.source == DRTHS_CMD_SRC_CONCEALED;
}

static bool has_lead(void)
{
    return F.out.source == DRTHS_CMD_SRC_TIMELY || F.out.source == DRTHS_CMD_SRC_REDUNDANT ||
           F.out.source == DRTHS_CMD_SRC_REJOIN;
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

/* The motion limits every command sequence must respect after a gap (finite differences of the
 * commands over ticks from..to-1): velocity within the actuator's limit, acceleration within
 * the acceleration limit and jerk within the jerk limit (these runs leave the feedforward's
 * limits at 0, so these are DRTHS_ACT_DEFAULT_MAX_ACC_M_S2 and _JERK_M_S3; the trajectories'
 * own acceleration and jerk are far below). */
static void assert_smooth(const double *cmd, uint64_t from, uint64_t to, double *peak_vel)
{
    double pv = 0.0;
    for (uint64_t t = from + 3; t < to; t++) {
        const double v = (cmd[t] - cmd[t - 1]) * RATE;
        const double acc = (cmd[t] - 2.0 * cmd[t - 1] + cmd[t - 2]) * RATE * RATE;
        const double j =
            (cmd[t] - 3.0 * cmd[t - 1] + 3.0 * cmd[t - 2] - cmd[t - 3]) * RATE * RATE * RATE;
        if (!(fabs(v) <= LIMIT_VEL && fabs(acc) <= DRTHS_ACT_DEFAULT_MAX_ACC_M_S2 &&
              fabs(j) <= DRTHS_ACT_DEFAULT_MAX_JERK_M_S3 * (1.0 + 1e-6)))
            fail_msg("tick %llu: velocity %g m/s, acceleration %g m/s^2, jerk %g m/s^3",
                     (unsigned long long)t, v, acc, j);
        if (fabs(v) > pv)
            pv = fabs(v);
    }
    if (peak_vel)
        *peak_vel = pv;
}

static void test_init_errors(void **state)
{
    (void)state;
    drths_cmdstream_params_t p;
    params_default(&p);
    p.lookahead = DRTHS_ACT_MAX_LOOKAHEAD + 1;
    drths_cmdstream_t cs;
    drths_error_t err;
    assert_int_equal(drths_cmdstream_init(&cs, &p, &err), -EINVAL);
    drths_cmdstream_close(&cs); /* a failed init leaves a closable struct */
    params_default(&p);
    p.playout_ticks = 0;
    assert_int_equal(drths_cmdstream_init(&cs, &p, &err), -EINVAL);
}

/* The COMMAND that first brought tick t's sample in test_sources_past_and_preview (sent after
 * tick T - 6, 0.3 ms after its deadline; the first one with EPOCH 1): the datagram for 20 is
 * lost (21's carries it) and those for 40 .. 43 too (44's carries 41 .. 43; 40 never comes). */
static uint64_t brought_by(uint64_t t)
{
    return t == 20 ? 21 : t >= 41 && t <= 43 ? 44 : t;
}

/* The sources one by one, with the last four commands and the preview (three ahead): the rest
 * ticks preview 0 up to L and then the first commands; a command received in time comes with
 * its lead; one stored from a redundant sample says so; the preview stops at the first command
 * missing; a tick with its commands lost is concealed and the next one is rejoined, the blend
 * in the preview too (what the preview says for the next tick is what it plays, except where a
 * rejoin starts); in HOLD nothing is played, but the play head moves on. */
static void test_sources_past_and_preview(void **state)
{
    (void)state;
    drths_cmdstream_params_t p;
    params_default(&p);
    p.lookahead = 3;
    p.ramp_rate_m_s = 0.05;
    setup_with(&p);
    start(5);
    send_cmd(6, 4, sine, T0 - 4 * DT_NS);
    double prev_next = NAN; /* what the last tick previewed for this one */
    for (uint64_t t = 0; t < 200; t++) {
        tick(t);
        const drths_cmdstream_out_t *o = &F.out;
        if (t <= 5) {
            assert_int_equal(o->source, DRTHS_CMD_SRC_REST);
            assert_int_equal(o->cmd_tick, -1);
            assert_true(o->cmd.disp_m == 0.0 && o->cmd.damper_cmd == REST_CMD);
            /* Rest ticks (<= L) preview 0; the commands stored after them follow. */
            assert_int_equal(o->n_future, 3);
            for (int j = 0; j < 3; j++)
                assert_true(o->future[j] ==
                            (t + 1 + (uint64_t)j <= 5 ? 0.0 : sine(t + 1 + (uint64_t)j)));
        } else if (t == 40) {
            assert_int_equal(o->source, DRTHS_CMD_SRC_CONCEALED);
            assert_int_equal(o->cmd_tick, 40);
        } else if (t == 20) {
            assert_int_equal(o->source, DRTHS_CMD_SRC_REDUNDANT);
            assert_true(o->cmd.disp_m == sine(20));
        } else if (t == 41) {
            assert_int_equal(o->source, DRTHS_CMD_SRC_REJOIN);
            assert_int_equal(F.cs.rejoin_tick, 41);
        } else if (t > 41 + F.cs.rejoin_ticks || (t > 5 && t < 40)) {
            assert_int_equal(o->source, DRTHS_CMD_SRC_TIMELY);
            assert_true(o->cmd.disp_m == sine(t));
        }
        if (t > 5) {
            /* Tick 40 is missing: the preview has the commands up to 39's, then what the
             * concealment will play, so tick 39 previews exactly what tick 40 plays. */
            assert_int_equal(o->n_future, 3);
            if (t == 40)
                assert_true(o->cmd.disp_m == prev_next);
            if (has_lead()) {
                const uint64_t T = brought_by(t);
                assert_int_equal(o->lead_ns,
                                 T == 6 ? 10 * DT_NS : (int64_t)(t - (T - 6)) * DT_NS - 300000);
                if (t != 41)
                    assert_true(o->cmd.disp_m == prev_next);
            }
        }
        /* The last four, this one last. */
        assert_true(o->past[3] == o->cmd.disp_m);
        prev_next = o->future[0];
        const uint64_t T = t + 6;
        /* 20 comes in 21's COMMAND; 40 in none (41 .. 44 in 44's). */
        if (t >= 1 && T != 20 && !(T >= 40 && T <= 43))
            send_cmd(T, 4, sine, deadline(t) + 300000);
    }
    assert_int_equal(F.cs.c.concealed, 1);
    assert_int_equal(F.cs.c.rejoins, 1);
    assert_int_equal(F.cs.c.applied, 200 - 6 - 1);
    assert_true(F.cs.c.preview_extended >= 3); /* ticks 37 .. 39 at least */
    /* In HOLD: nothing played, the take only, so a copy arriving after is late (counted late
     * only for a concealed tick). */
    drths_cmdstream_tick(&F.cs, &F.pb, 200, deadline(200), F.L, 1, &F.out);
    assert_int_equal(F.out.source, DRTHS_CMD_SRC_NONE);
    assert_int_equal(F.out.cmd_tick, -1);
    const drths_cmd_channel_t s = {sine(200), 0.0, 0.0, 1.5};
    assert_int_equal(drths_cmdstream_put(&F.cs, &F.pb, 200, 0, &s, deadline(200) + 1),
                     DRTHS_PLAYOUT_LATE);
    assert_int_equal(F.cs.c.late, 0);
    teardown();
}

/* After tick t, the numerical site's COMMAND for tick t + 1 + L (L = 5), arriving 0.3 ms after
 * t's deadline, unless drop says it is lost. */
static void send_next(uint64_t t, int r, traj_fn x, int (*drop)(uint64_t))
{
    const uint64_t T = t + 6;
    if (t >= 1 && !drop(T))
        send_cmd(T, r, x, deadline(t) + 300000);
}

static int drop_20_to_22(uint64_t T)
{
    return T >= 20 && T <= 22;
}

static void test_conceal_exact_for_cubic(void **state)
{
    (void)state;
    drths_cmdstream_params_t p;
    params_default(&p);
    setup_with(&p);
    start(5);
    /* r = 1: no redundancy, so the three lost commands stay lost. */
    send_cmd(6, 1, cubic, T0 - 4 * DT_NS);
    double drive[30] = {0};
    for (uint64_t t = 0; t < 30; t++) {
        tick(t);
        drive[t] = F.out.cmd.disp_m;
        if (t >= 20 && t <= 22) {
            assert_true(row_concealed());
            assert_true(fb_concealed());
            assert_int_equal(F.out.cmd_tick, (int64_t)t);
            assert_false(has_lead());
            /* The velocity is the concealed tick's own step. */
            assert_true(fabs(F.out.cmd.vel_m_s - (cubic(t) - cubic(t - 1)) * RATE) < 1e-9);
            assert_true(fabs(F.out.cmd.damper_cmd - 1.5) < 1e-12);
        } else {
            assert_false(row_concealed());
        }
        send_next(t, 1, cubic, drop_20_to_22);
    }
    /* Three extrapolations in a row from a cubic history are exact (to rounding). */
    for (uint64_t t = 20; t <= 22; t++)
        assert_true(fabs(drive[t] - cubic(t)) < 1e-15);
    assert_int_equal(F.cs.c.concealed, 3);
    assert_int_equal(F.cs.c.max_consecutive_concealed, 3);
    assert_int_equal(F.cs.c.late, 0);
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
    drths_cmdstream_params_t p;
    params_default(&p);
    setup_with(&p);
    damper_of = switch_at_19;
    start(5);
    send_cmd(6, 1, sine, T0 - 4 * DT_NS);
    for (uint64_t t = 0; t < 30; t++) {
        tick(t);
        if (t >= 20 && t <= 22) {
            assert_true(row_concealed());
            assert_true(F.out.cmd.damper_cmd == 2.5);
        }
        send_next(t, 1, sine, drop_20_to_22);
    }
    assert_int_equal(F.cs.c.concealed, 3);
    teardown();
}

/* The commands jump by 2 mm while ticks 20..23 are concealed (what a discontinuity the
 * extrapolation cannot see looks like). The actuator must not step there: at tick 24 it goes on
 * from the concealment, then blends into the commands within the motion limits, its own speed
 * above the sine's at most the ramp rate, and from the blend's end on applies the commands
 * exactly. */
static double jump_at_22(uint64_t t)
{
    return sine(t) + (t >= 22 ? 2e-3 : 0.0);
}

static int drop_20_to_23(uint64_t T)
{
    return T >= 20 && T <= 23;
}

static void test_rejoin_blends_into_commands(void **state)
{
    (void)state;
    drths_cmdstream_params_t p;
    params_default(&p);
    p.ramp_rate_m_s = 0.05; /* 50 um per tick at 1 kHz */
    setup_with(&p);
    start(5);
    send_cmd(6, 1, jump_at_22, T0 - 4 * DT_NS);
    double cmd[200];
    for (uint64_t t = 0; t < 200; t++) {
        tick(t);
        cmd[t] = F.out.cmd.disp_m;
        assert_false(F.hold);
        send_next(t, 1, jump_at_22, drop_20_to_23);
    }
    assert_int_equal(F.cs.c.concealed, 4);
    assert_int_equal(F.cs.c.rejoins, 1);
    /* The extrapolation stays near the sine, so the gap is the 2 mm jump. */
    assert_true(fabs(F.cs.c.max_rejoin_offset_m - 2e-3) < 1e-5);
    /* The velocity budget binds: the quintic's steepest slope is 15/8 of the offset over its
     * length, and the offset term has 4/5 of the ramp rate: 1.875 * 2 mm / 40 um = 94 ticks. */
    const uint64_t n = F.cs.rejoin_ticks;
    assert_true(n >= 75 && n <= 100);
    assert_smooth(cmd, 6, 200, NULL);
    for (uint64_t t = 7; t < 200; t++) {
        /* Beyond the sine's own motion (at most 2 pi 2 Hz 1 mm per s = 12.6 um per tick). */
        double extra = fabs((cmd[t] - cmd[t - 1]) - (sine(t) - sine(t - 1)));
        assert_true(extra <= 0.05 / RATE + 2e-6);
    }
    for (uint64_t t = 24 + n; t < 200; t++)
        assert_true(fabs(cmd[t] - jump_at_22(t)) < 1e-15);
    teardown();
}

/* A 0.05 m/s ramp with 100 commands lost (ticks 20..119): four ticks extrapolated on the ramp
 * (exactly), then the brake: the speed falls monotonically to exactly 0 within the jerk and
 * acceleration limits and the actuator rests until the commands come back, and rejoins them
 * without a step. */
static double ramp_5cm_s(uint64_t t)
{
    return 0.05 * (double)t / RATE;
}

static int drop_20_to_119(uint64_t T)
{
    return T >= 20 && T <= 119;
}

static void test_long_gap_brakes_to_rest(void **state)
{
    (void)state;
    drths_cmdstream_params_t p;
    params_default(&p);
    p.max_concealed_ticks = 200;
    p.ramp_rate_m_s = 0.05;
    setup_with(&p);
    start(5);
    send_cmd(6, 1, ramp_5cm_s, T0 - 4 * DT_NS);
    double cmd[600];
    for (uint64_t t = 0; t < 600; t++) {
        tick(t);
        cmd[t] = F.out.cmd.disp_m;
        assert_false(F.hold);
        send_next(t, 1, ramp_5cm_s, drop_20_to_119);
    }
    assert_int_equal(F.cs.c.concealed, 100);
    for (uint64_t t = 20; t <= 23; t++)
        assert_true(fabs(cmd[t] - ramp_5cm_s(t)) < 1e-15);
    /* Braking at 10 m/s^2 with a jerk of 1.5e4 m/s^3: 0.05 m/s stop in about 6 ms. */
    uint64_t rest = 0;
    for (uint64_t t = 24; t <= 119; t++) {
        const double step = cmd[t] - cmd[t - 1], prev = cmd[t - 1] - cmd[t - 2];
        assert_true(step >= 0.0 && step <= prev + 1e-18);
        if (!rest && step == 0.0)
            rest = t;
    }
    assert_true(rest > 24 && rest <= 34);
    for (uint64_t t = rest; t <= 119; t++)
        assert_true(cmd[t] == cmd[rest]);
    /* About 0.05^2 / 20 = 0.125 mm of braking travel plus the jerk phase. */
    assert_true(cmd[rest] - cmd[23] > 1e-4 && cmd[rest] - cmd[23] < 2e-4);
    assert_smooth(cmd, 6, 600, NULL);
    assert_int_equal(F.cs.c.rejoins, 1);
    /* The ramp is 4.9 mm ahead: the blend catches up at no more than the ramp rate above the
     * ramp's speed, and then applies the commands exactly. */
    assert_true(120 + F.cs.rejoin_ticks < 600);
    for (uint64_t t = 121; t < 600; t++)
        assert_true(cmd[t] - cmd[t - 1] <= 0.1 / RATE + 1e-6);
    for (uint64_t t = 120 + F.cs.rejoin_ticks; t < 600; t++)
        assert_true(fabs(cmd[t] - ramp_5cm_s(t)) < 1e-15);
    teardown();
}

/* Gaps of several lengths at several phases of a 10 mm, 2 Hz sine (0.126 m/s peak): at every
 * tick the command's velocity, acceleration and jerk stay within the limits; a gap within the
 * concealment budget (30 ticks here) rejoins and ends exactly on the received commands, with a
 * command speed never above 1.5 times the sine's peak; a longer one is a HOLD by the budget at
 * its 31st tick. */
static double sine10(uint64_t t)
{
    return 1e-2 * sin(2.0 * M_PI * 2.0 * (double)t / RATE);
}

/* The late stream of run_late_stream: the commands sent from tick `from` on arrive `by` ticks
 * after the ones before did, so after their own tick, until the commands sent from `until` on
 * arrive in time again (a raise of L, or the step back down); those sent from `by2_from` on
 * (0: never) arrive `by2` ticks after instead. At tick `future_at` (0: never) a COMMAND for a
 * tick 350 ahead arrives at once (the buffer is then not empty), and the eight COMMANDs sent from
 * tick `drop_from` (0: never) are lost (with R = 4, the commands of five ticks never arrive). */
typedef struct late_stream {
    uint64_t from, until, by;
    uint64_t by2_from, by2;
    uint64_t future_at, drop_from;
} late_stream_t;

/* The test's late stream, as late_setup left it: "never" is UINT64_MAX there. */
static late_stream_t LS;

/* The opening of the gap and late-stream tests: a concealment budget of 30 ticks, a ramp rate
 * of 0.05 m/s, r samples a COMMAND, a playout buffer of playout_ticks; started with L = 5 and
 * the COMMAND for tick 6 sent. The late stream is *ls (NULL: none), set whole so that nothing of
 * a test before is left. */
static void late_setup(int r, size_t playout_ticks, const late_stream_t *ls)
{
    drths_cmdstream_params_t p;
    params_default(&p);
    p.max_concealed_ticks = 30;
    p.ramp_rate_m_s = 0.05;
    p.playout_ticks = playout_ticks;
    setup_with(&p);
    start(5);
    send_cmd(6, r, sine10, T0 - 4 * DT_NS);
    memset(&LS, 0, sizeof LS);
    if (ls)
        LS = *ls;
    uint64_t *never[] = {&LS.by2_from, &LS.future_at, &LS.drop_from};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (*never[i] == 0)
            *never[i] = UINT64_MAX;
}

static uint64_t gap_from, gap_len;
static int drop_gap(uint64_t T)
{
    return T >= gap_from && T < gap_from + gap_len;
}

static void test_gaps_at_phases(void **state)
{
    (void)state;
    const uint64_t lens[] = {1, 2, 3, 5, 10, 20, 30, 31, 60};
    const double peak = 2.0 * M_PI * 2.0 * 1e-2;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        for (int ph = 0; ph < 8; ph++) {
            late_setup(1, 64, NULL);
            gap_from = 300 + (uint64_t)ph * 500 / 8; /* eight phases of the 500-tick period */
            gap_len = lens[li];
            static double cmd[1200];
            uint64_t t = 0, hold_at = 0;
            for (; t < 1200; t++) {
                tick(t);
                if (F.hold) {
                    hold_at = t;
                    break;
                }
                cmd[t] = F.out.cmd.disp_m;
                send_next(t, 1, sine10, drop_gap);
            }
            double pv = 0.0;
            assert_smooth(cmd, 6, hold_at ? hold_at : 1200, &pv);
            if (gap_len <= 30) {
                assert_int_equal(hold_at, 0);
                assert_int_equal(F.cs.c.concealed, gap_len);
                assert_int_equal(F.cs.c.rejoins, 1);
                const uint64_t end = gap_from + gap_len + F.cs.rejoin_ticks;
                assert_true(end < 1200);
                for (uint64_t k = end; k < 1200; k++)
                    assert_true(fabs(cmd[k] - sine10(k)) < 1e-15);
                if (pv > 1.5 * peak)
                    fail_msg("gap %llu at phase %d: peak command velocity %g m/s",
                             (unsigned long long)gap_len, ph, pv);
            } else {
                assert_int_equal(hold_at, gap_from + 30);
                assert_int_equal(F.out.source, DRTHS_CMD_SRC_OVERDUE);
                assert_int_equal(F.cs.c.rejoins, 0);
            }
            teardown();
        }
    }
}

/* A step up of the down-link's delay (as the study's delaystep cell sees it): the late stream
 * LS (late_stream_t). The datagrams go through a queue and reach the stream at their arrival
 * time. R = 4 (offsets 0 .. 3). */
#define LQ_CAP 4096
static uint64_t lq_T[LQ_CAP];
static int64_t lq_at[LQ_CAP];
static size_t lq_n;

static void lq_deliver(int64_t now)
{
    size_t kept = 0;
    for (size_t i = 0; i < lq_n; i++) {
        if (lq_at[i] <= now) {
            send_cmd(lq_T[i], 4, sine10, lq_at[i]);
        } else {
            lq_T[kept] = lq_T[i];
            lq_at[kept++] = lq_at[i];
        }
    }
    lq_n = kept;
}

/* Runs ticks 0 .. ticks - 1 with the late stream, the commands applied into cmd; returns the
 * tick of HOLD (0: none). */
static uint64_t late_back_at; /* the first tick in time after late ones (0: none) */

static uint64_t run_late_stream(uint64_t ticks, double *cmd, double *peak_vel)
{
    lq_n = 0;
    late_back_at = 0;
    bool was_late = false;
    uint64_t hold_at = 0;
    for (uint64_t t = 0; t < ticks; t++) {
        lq_deliver(deadline(t));
        tick(t);
        if (F.hold) {
            hold_at = t;
            break;
        }
        cmd[t] = F.out.cmd.disp_m;
        const double ct = (double)F.out.cmd_tick;
        if (ct >= 0.0 && ct < (double)t) {
            /* Delayed playback: a late command, said so in the FEEDBACK. */
            assert_true(t > LS.from);
            /* Flagged while the tick's own command is late; not once it is in time again and
             * the playback is catching up. */
            if (t < LS.until)
                assert_true(fb_concealed());
            if (t > LS.until + 6 + LS.by && t < LS.by2_from)
                assert_false(fb_concealed());
            assert_false(row_concealed()); /* not a guess */
            /* Once back on the timely commands, no going back to the late ones. */
            assert_int_equal(late_back_at, 0);
            was_late = true;
        } else if (was_late && !late_back_at && ct == (double)t && !row_concealed()) {
            late_back_at = t;
        }
        if (t == LS.future_at)
            send_cmd(t + 350, 4, sine10, deadline(t) + 300000);
        if (t >= LS.drop_from && t < LS.drop_from + 8)
            continue;
        if (t >= 1) {
            uint64_t delay = t >= LS.from && t < LS.until ? LS.by : 0;
            if (t >= LS.by2_from && t < LS.until)
                delay = LS.by2;
            assert_true(lq_n < LQ_CAP);
            lq_T[lq_n] = t + 6;
            lq_at[lq_n++] = deadline(t + delay) + 300000;
        }
    }
    assert_smooth(cmd, 6, hold_at ? hold_at : ticks, peak_vel);
    return hold_at;
}

/* Commands late by 12 ticks for 400 ticks (the budget is 30): they are played behind their
 * ticks instead of concealed, so there is no HOLD; the lag stays near the lateness; the
 * command stays within the velocity, acceleration and jerk limits and below 1.5 times the
 * sine's peak speed at every tick, through both rejoins (into the late commands, and back to
 * the timely ones); after the last blend the commands are applied exactly. The step starts at
 * eight phases of the sine. */
static void test_late_stream_played_behind(void **state)
{
    (void)state;
    const double peak = 2.0 * M_PI * 2.0 * 1e-2;
    for (int ph = 0; ph < 8; ph++) {
        const uint64_t from = 300 + (uint64_t)ph * 500 / 8;
        /* Lead 6 ticks: 12 ticks late. */
        const late_stream_t ls = {.from = from, .until = from + 400, .by = 18};
        late_setup(4, 256, &ls);
        static double cmd[2000];
        double pv = 0.0;
        assert_int_equal(run_late_stream(2000, cmd, &pv), 0);
        assert_false(F.hold);
        assert_true(F.cs.c.delayed > 300);
        assert_true(F.cs.c.max_lag_ticks >= 12 && F.cs.c.max_lag_ticks <= 20);
        assert_true(F.cs.c.max_consecutive_concealed <= 13);
        /* Back on the timely commands once caught up, at most 5 % faster: the lag of 12 to 20
         * ticks takes 240 to 400 ticks and the rate's ramps a few more. */
        assert_true(late_back_at > LS.until + 200 && late_back_at <= LS.until + 450);
        assert_true(F.cs.c.catchup_ticks >= 200);
        if (pv > 1.5 * peak)
            fail_msg("phase %d: peak command velocity %g m/s", ph, pv);
        for (uint64_t k = 1800; k < 2000; k++)
            assert_true(fabs(cmd[k] - sine10(k)) < 1e-15);
        teardown();
    }
}

/* In the late stream, eight COMMANDs are lost, so that the commands of five ticks never arrive,
 * while the buffer holds a timely command for a later tick (as after a raise of L): the ticks
 * without a late command are concealed, each standing for a missing command, and the delayed
 * playback then goes on with the next late command there is; it is given up neither because the
 * buffer is no longer empty nor because those commands never come. */
static void test_late_stream_survives_a_gap(void **state)
{
    (void)state;
    const late_stream_t ls = {
        .from = 300, .until = 700, .by = 18, .future_at = 400, .drop_from = 410};
    late_setup(4, 256, &ls);
    static double cmd[1200];
    const uint64_t hold_at = run_late_stream(1200, cmd, NULL);
    assert_int_equal(hold_at, 0);
    assert_true(F.cs.c.delayed > 300);
    /* The gap: a few ticks concealed inside the late stream, not the whole budget. */
    assert_true(F.cs.c.max_consecutive_concealed <= 13);
    teardown();
}

/* The same late stream, then later still (by 40 ticks, beyond the budget of 30): the stream
 * plays the late commands as long as they are within the budget, then conceals and gives up
 * (HOLD) when the newest command applied is 31 ticks behind, saying so. A silent link is still
 * "too many concealed commands" (test_too_many_concealed_holds in test_actuator.c). */
static void test_late_stream_beyond_budget_holds(void **state)
{
    (void)state;
    /* From tick 500 on, 40 ticks late. */
    const late_stream_t ls = {.from = 300, .until = 1000, .by = 18, .by2_from = 500, .by2 = 46};
    late_setup(4, 256, &ls);
    static double cmd[1000];
    const uint64_t hold_at = run_late_stream(1000, cmd, NULL);
    assert_true(hold_at > 500);
    assert_true(F.cs.c.delayed > 150);
    assert_int_equal(F.out.source, DRTHS_CMD_SRC_OVERDUE);
    assert_int_equal(hold_at - F.cs.last_base, 31);
    assert_string_equal(hold_text(&F.out),
                        "commands too late: the newest applied is 31 ticks behind its tick "
                        "(limit 30)");
    teardown();
}

/* The relay restart with a raise of L, as the numerical site sends it (5 kHz, L = 105): the
 * damper moves slowly (-11.8 mm/s, as in the live run that ended in a HOLD by the velocity
 * limit); the datagrams for ticks 300 on are lost and the stream conceals, then rests. The
 * numerical site then raises L to 291 at step k: its last COMMAND (tick T_last = k - 1 + 105,
 * carrying T_last - 3 .. T_last) arrives together with EPOCH 2 and, in one burst, the fillers
 * for T_last + 1 .. k + 290 that hold x(T_last) with velocity and acceleration 0, two filler
 * ticks further per datagram; from the next tick on each COMMAND carries x(k), x(k + 1), ... for
 * ticks k + 291, ...: the specimen pauses and goes on. The received trajectory so has a kink
 * (velocity -11.8 mm/s to 0 in one tick) a few ticks after the rejoin, and another where the
 * fillers end. The rejoin tick is placed from 1 tick before to 5 ticks after T_last, so that the
 * kink falls everywhere in the ticks the rejoin looks ahead at. The blend must neither
 * extrapolate the received trajectory across the kink nor run away: no HOLD, the command within
 * the velocity limit at every tick, its acceleration and jerk within the limits wherever the
 * received trajectory's own are (the two kinks are the numerical site's), the blend (command
 * minus received) no faster than the initial velocity mismatch plus the ramp rate and within the
 * acceleration and jerk limits, and from the blend's end on the command is the received
 * trajectory exactly, across the change of L too (EPOCH 2 takes effect at the new first tick,
 * as the actuator applies it). */
#define RJ_RATE 5000.0
#define RJ_DT_NS INT64_C(200000)
#define RJ_L1 105u
#define RJ_L2 291u
#define RJ_TICKS 1100u

static double rj_slow(uint64_t t)
{
    return -1.2e-3 - 0.0118 * (double)t / RJ_RATE;
}

static uint64_t rj_last, rj_first_new;

/* What the numerical site commands for tick T: x(T) up to T_last, the filler x(T_last) until
 * the new first tick, then x of the step that tick now belongs to. */
static double rj_received(uint64_t T)
{
    if (T <= rj_last)
        return rj_slow(T);
    if (T < rj_first_new)
        return rj_slow(rj_last);
    return rj_slow(T - (RJ_L2 - RJ_L1));
}

static void rj_sample(uint64_t t, drths_cmd_channel_t *s)
{
    const bool filler = t > rj_last && t < rj_first_new;
    s->disp_m = rj_received(t);
    s->vel_m_s = filler ? 0.0 : -0.0118;
    s->acc_m_s2 = 0.0;
    s->damper_cmd = 1.5;
}

static int64_t rj_deadline(uint64_t t)
{
    return T0 + (int64_t)t * RJ_DT_NS;
}

/* The commands of rj_received around the raise of L, the tick being t (see above). */
static void rj_send_after(uint64_t t, uint64_t rejoin, uint64_t k)
{
    const int64_t arrival = rj_deadline(t) + 60000;
    if (t >= 1 && t + 1 + RJ_L1 < 300) {
        receive(t + 1 + RJ_L1, 4, rj_sample, arrival);
    } else if (t + 1 == rejoin) {
        /* The last COMMANDs before the raise (from the rejoin tick on), EPOCH 2 and the burst
         * of fillers. */
        for (uint64_t T = rj_last < rejoin ? rj_last : rejoin; T <= rj_last; T++)
            receive(T, 4, rj_sample, arrival);
        F.next_L = RJ_L2;
        F.next_L_tick = rj_first_new;
        for (uint64_t f = rj_last + 1; f < rj_first_new; f += 2) {
            const uint64_t T = f + 3 < rj_first_new ? f + 3 : rj_first_new - 1;
            const uint64_t avail = T - rj_last;
            receive(T, avail < 4 ? (int)avail : 4, rj_sample, arrival);
        }
        receive(rj_first_new, 4, rj_sample, arrival); /* x(k), the first on the new L */
    } else if (t >= rejoin) {
        receive(t + 1 - rejoin + k + RJ_L2, 4, rj_sample, arrival);
    }
}

/* The motion checks of test_rejoin_into_fillers_after_raise_of_L at tick t. */
static void rj_check(const double *cmd, uint64_t t, uint64_t rejoin, int off, double ramp)
{
    const double A = DRTHS_ACT_DEFAULT_MAX_ACC_M_S2, J = DRTHS_ACT_DEFAULT_MAX_JERK_M_S3;
    double d[4], x[4];
    for (int i = 0; i < 4; i++) {
        d[i] = cmd[t - (uint64_t)i];
        x[i] = rj_received(t - (uint64_t)i);
    }
    const double r = RJ_RATE;
    const double v = (d[0] - d[1]) * r, acc = (d[0] - 2.0 * d[1] + d[2]) * r * r;
    const double j = (d[0] - 3.0 * d[1] + 3.0 * d[2] - d[3]) * r * r * r;
    const double xv = (x[0] - x[1]) * r, xa = (x[0] - 2.0 * x[1] + x[2]) * r * r;
    const double xj = (x[0] - 3.0 * x[1] + 3.0 * x[2] - x[3]) * r * r * r;
    const double ev = v - xv, ea = acc - xa, ej = j - xj;
    if (!(fabs(v) <= LIMIT_VEL))
        fail_msg("offset %d, tick %llu: command velocity %g m/s", off, (unsigned long long)t, v);
    if (fabs(xa) <= A && fabs(xj) <= J && !(fabs(acc) <= A && fabs(j) <= J * (1.0 + 1e-6)))
        fail_msg("offset %d, tick %llu: acceleration %g m/s^2, jerk %g m/s^3", off,
                 (unsigned long long)t, acc, j);
    if (t >= rejoin + 3 &&
        !(fabs(ev) <= 0.0118 + ramp + 1e-6 && fabs(ea) <= A && fabs(ej) <= J * (1.0 + 1e-6)))
        fail_msg("offset %d, tick %llu: blend velocity %g m/s, acceleration %g m/s^2, "
                 "jerk %g m/s^3",
                 off, (unsigned long long)t, ev, ea, ej);
}

static void test_rejoin_into_fillers_after_raise_of_L(void **state)
{
    (void)state;
    const uint64_t rejoin = 500; /* ticks 300 .. 499 concealed */
    for (int off = -1; off <= 5; off++) {
        drths_cmdstream_params_t p;
        params_default(&p);
        p.rate_hz = RJ_RATE;
        p.playout_ticks = 5000; /* one second */
        p.max_concealed_ticks = 250;
        p.ramp_rate_m_s = 0.05;
        setup_with(&p);
        rj_last = (uint64_t)((int64_t)rejoin + off);
        const uint64_t k = rj_last + 1 - RJ_L1;
        rj_first_new = k + RJ_L2;
        start(RJ_L1);
        receive(RJ_L1 + 1, 1, rj_sample, T0 - 4 * RJ_DT_NS);
        static double cmd[RJ_TICKS];
        for (uint64_t t = 0; t < RJ_TICKS; t++) {
            tick_at(t, rj_deadline(t));
            if (F.hold)
                fail_msg("offset %d: HOLD at tick %llu: %s", off, (unsigned long long)t,
                         hold_text(&F.out));
            cmd[t] = F.out.cmd.disp_m;
            rj_send_after(t, rejoin, k);
        }
        if (F.cs.c.concealed != rejoin - 300)
            fail_msg("offset %d: %llu concealed", off, (unsigned long long)F.cs.c.concealed);
        assert_true(F.cs.c.rejoins >= 1);
        assert_int_equal(F.L, RJ_L2);
        for (uint64_t t = RJ_L1 + 4; t < RJ_TICKS; t++)
            rj_check(cmd, t, rejoin, off, p.ramp_rate_m_s);
        const uint64_t end = F.cs.rejoin_tick + F.cs.rejoin_ticks;
        assert_true(end < rj_first_new);
        for (uint64_t t = end; t < RJ_TICKS; t++)
            if (!(fabs(cmd[t] - rj_received(t)) < 1e-15))
                fail_msg("offset %d, tick %llu: command %g m, received %g m", off,
                         (unsigned long long)t, cmd[t], rj_received(t));
        teardown();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_sources_past_and_preview),
        cmocka_unit_test(test_conceal_exact_for_cubic),
        cmocka_unit_test(test_conceal_holds_damper_command),
        cmocka_unit_test(test_rejoin_blends_into_commands),
        cmocka_unit_test(test_long_gap_brakes_to_rest),
        cmocka_unit_test(test_gaps_at_phases),
        cmocka_unit_test(test_rejoin_into_fillers_after_raise_of_L),
        cmocka_unit_test(test_late_stream_played_behind),
        cmocka_unit_test(test_late_stream_survives_a_gap),
        cmocka_unit_test(test_late_stream_beyond_budget_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
