/* The OpenFresco command source (site-physical/openfresco_app.h) in virtual time: its RT hooks
 * around the real actuator state machine (virtual DAQ, the elastic specimen of
 * tests/data/openfresco/elastic.yaml: k = 2 MN/m, ideal actuator, no noise, no compensation),
 * fed through the same rings the I/O thread uses, with no socket traffic and no clock. Checks
 * when a measurement request is answered (at once before any trial; on the step's last tick
 * after one), the values (target and k·target), the late-target hold, the end on DIE and on a
 * lost client, and that the steady state allocates nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "site-physical/openfresco_app.h"
#include "site-physical/physsite.h"

#include "alloc_count.h"

/* Channel i's HOLD sentence, formatted from the cause as the main thread does. */
static const char *channel_hold_text(const drths_physsite_t *ps, int i)
{
    static char buf[DRTHS_WIRE_MAX_TEXT + 1];
    return drths_physsite_channel_hold_text(ps, i, buf, sizeof buf);
}

#define K_N_PER_M 2.0e6
/* The most ticks a step may take here: 50 at the step duration, more when a step's segment is
 * stretched to keep the command within its acceleration bound (a first step from rest). */
#define STEP_MAX 1000

typedef struct world {
    drths_experiment_t exp;
    drths_physsite_t ps;
    drths_ofr_app_t app;
    const drths_physsite_source_t *src;
    uint64_t tick;
    int64_t dt_ns;
} world_t;

static world_t *W;

/* The commands handed to the actuators, every tick: the largest change in one tick and the
 * largest second difference, per channel, over the whole run. */
typedef struct trace {
    double x1[2], x2[2]; /* the last two commands */
    int n;               /* commands seen */
    double max_dx[2], max_d2x[2];
} trace_t;

static trace_t T;
static void assert_smooth(void);

static int setup(void **state)
{
    (void)state;
    memset(&T, 0, sizeof T);
    W = calloc(1, sizeof *W);
    const char *srcdir = getenv("DRTHS_SOURCE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/openfresco/elastic.yaml", srcdir ? srcdir : "..");
    drths_error_t err;
    assert_int_equal(drths_experiment_load(&W->exp, path, &err), 0);
    drths_ofr_app_config_t oc;
    memset(&oc, 0, sizeof oc);
    oc.listen = "127.0.0.1:0";
    oc.variant = DRTHS_OFR_SHADOW;
    oc.precor.mode = DRTHS_PRECOR_D;
    oc.precor.predict_fraction = 0.6;
    oc.step_duration_s = 0.01; /* 50 ticks at 5 kHz */
    oc.accept_timeout_s = 1.0;
    assert_int_equal(drths_ofr_app_init(&W->app, &oc, &err), 0);
    drths_physsite_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.exp = &W->exp;
    cfg.source = drths_ofr_app_source();
    cfg.source_ctx = &W->app;
    assert_int_equal(drths_physsite_init(&W->ps, &cfg, NULL, NULL, NULL, &err), 0);
    W->src = cfg.source;
    W->dt_ns = W->ps.act.dt_ns;
    /* The client has set up: start feeds EPOCH 1 and returns at once. */
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_SETUP, 0.0, NULL);
    const char *why = NULL;
    assert_int_equal(W->src->start(&W->app, &W->ps, &why), 0);
    assert_int_equal(W->app.step_ticks, 50);
    assert_int_equal(W->app.lead_ticks, 1); /* compensation none: no lookahead */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    double dt = 1.0 / W->ps.act.p.rate_hz;
    print_message("commands: largest step %.3g mm/tick (%.3g m/s), second difference %.3g m/s^2; "
                  "%llu segments stretched; hold: %s\n",
                  T.max_dx[0] * 1e3, T.max_dx[0] / dt, T.max_d2x[0] / (dt * dt),
                  (unsigned long long)W->app.stretched,
                  W->ps.act.hold ? channel_hold_text(&W->ps, 0) : "no");
    /* Every run on elastic.yaml: the commands within the bounds, whatever the test did. */
    if (W->app.n == 1)
        assert_smooth();
    drths_physsite_close(&W->ps);
    drths_ofr_app_close(&W->app);
    drths_experiment_close(&W->exp);
    free(W);
    return 0;
}

/* One tick of every channel as drths_physsite_run does it, in virtual time. Returns the site's
 * result. */
static int tick(void)
{
    int64_t t = (int64_t)W->tick * W->dt_ns;
    int finished = 0;
    W->src->before_tick(&W->app, &W->ps, W->tick, t);
    /* Commands only: in HOLD the actuator's own ramp moves the drive, not the commands. */
    for (int i = 0; i < 2 && !W->ps.act.hold; i++) {
        double x = W->app.last_x.v[i];
        if (T.n >= 1)
            T.max_dx[i] = fmax(T.max_dx[i], fabs(x - T.x1[i]));
        if (T.n >= 2)
            T.max_d2x[i] = fmax(T.max_d2x[i], fabs(x - 2.0 * T.x1[i] + T.x2[i]));
        T.x2[i] = T.x1[i];
        T.x1[i] = x;
    }
    T.n += !W->ps.act.hold;
    int rc = drths_physsite_tick(&W->ps, W->tick, t, t, &finished);
    if (rc == 0)
        W->src->after_tick(&W->app, &W->ps, W->tick, &W->ps.out);
    W->tick++;
    return rc;
}

/* Runs ticks until an answer comes (at most max). Returns the tick it came after, or -1. */
static int64_t until_answer(drths_ofr_response_t *r, int max)
{
    for (int i = 0; i < max; i++) {
        assert_int_equal(tick(), 0);
        if (drths_ofr_app_take(&W->app, r) == 0)
            return (int64_t)W->tick - 1;
    }
    return -1;
}

/* A trial of one channel without a time, as the I/O thread posts it. */
static void target(double d)
{
    drths_ofr_app_post_trial(&W->app, &d, 1, NAN);
}

/* The bounds of the commands here (elastic.yaml): half the smaller of
 * feedforward_max_acceleration_m_s2 (50) and limit_drive_acceleration_m_s2 (200), and half
 * limit_velocity_m_s (1); dt = 0.2 ms. */
#define ACC_BOUND 25.0
#define VEL_BOUND 0.5
#define DT 2e-4

/* The commands of the whole run so far within the bounds: the largest change in one tick and
 * the largest second difference. */
static void assert_smooth(void)
{
    assert_true(T.max_dx[0] <= VEL_BOUND * DT * 1.001);
    assert_true(T.max_d2x[0] <= ACC_BOUND * DT * DT * 1.001);
}

static void test_steps(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    /* getDaqResponse before any trial: answered on the next tick, at rest. */
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    assert_int_equal(until_answer(&r, 1), 0);
    assert_true(r.disp[0] == 0.0 && r.force[0] == 0.0);
    for (int i = 0; i < 9; i++)
        assert_int_equal(tick(), 0);
    /* Trial 1 and its request at tick 10: step 1 begins at command tick 11 (D = 1). From rest,
     * 1 mm in 50 ticks would end at 0.18 m/s (the end rates of [0, 0, 0, 1 mm]) with more
     * than 25 m/s^2: the step is stretched to 57 ticks (11 .. 67), and the answer comes after
     * tick 67, with the target reached exactly. */
    target(0.001);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    assert_int_equal(until_answer(&r, STEP_MAX), 67);
    assert_true(r.disp[0] == 0.001);
    assert_true(fabs(r.force[0] - K_N_PER_M * 0.001) < 1e-9);
    assert_int_equal(W->app.late_targets, 0);
    assert_int_equal(W->app.stretched, 1);
    /* Step 2 runs on (from tick 68) predicting from [0, 0, 0, 0.001]; its switch is its 30th
     * tick (f = 0.6), tick 97, where it begins to brake. Trial 2 comes at tick 107: the step is
     * counted late with 11 held ticks (97 .. 107), and corrects from there over the step's 21
     * ticks left, stretched (it turns the braking motion round). */
    while (W->tick < 107)
        assert_int_equal(tick(), 0);
    target(0.0015);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    int64_t end2 = until_answer(&r, STEP_MAX);
    assert_true(end2 >= 128);
    assert_true(r.disp[0] == 0.0015);
    assert_int_equal(W->app.late_targets, 1);
    assert_int_equal(W->app.held_ticks, 11);
    assert_int_equal(W->app.steps_reached, 2);
    print_message("step 2 ended at tick %lld\n", (long long)end2);
    /* No HOLD, no concealment: one command per tick. */
    assert_false(W->ps.act.hold);
    assert_int_equal(W->ps.act.c.concealed, 0);
    /* DIE while step 3 is predicting: the command brakes to rest (within the bounds), then
     * the run ends after its last command, without HOLD. */
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_DIE, 0.0, NULL);
    int rc = 0, k = 0;
    for (; k < STEP_MAX && rc == 0 && !W->ps.out.finished; k++)
        rc = tick();
    assert_int_equal(rc, 0);
    assert_true(W->ps.out.finished);
    assert_true(k > 1);
    assert_false(W->ps.act.hold);
    assert_int_equal(W->app.motion, DRTHS_OFR_REST);
    assert_true(W->app.sv.v[0] == 0.0 && W->app.sa.v[0] == 0.0);
    assert_smooth();
    assert_int_equal(tick(), -EALREADY);
    assert_non_null(strstr(W->src->ended(&W->app, &W->ps), "DIE) after 2 steps"));
}

static void test_lost_client_holds(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    target(0.002);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    target(0.003);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    for (int i = 0; i < 20; i++)
        assert_int_equal(tick(), 0);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_LOST, 0.0, "the client went away");
    int rc = 0;
    for (int i = 0; i < 100000 && rc == 0 && !W->ps.out.finished; i++)
        rc = tick();
    assert_true(W->ps.out.finished);
    assert_true(W->ps.act.hold);
    assert_int_equal(W->ps.act.hold_reason, DRTHS_STOP_PEER_LOST);
    assert_non_null(strstr(channel_hold_text(&W->ps, 0), "went away"));
    /* The request pending at the loss is never answered from HOLD. */
    assert_int_equal(drths_ofr_app_take(&W->app, &r), -EAGAIN);
}

/* The step watchdog (step_timeout_s, here 0.05 s = 250 ticks): silence counts only from the
 * tick the site owes nothing (the step reached and its measurement answered), and its end is a
 * WATCHDOG HOLD whose sentence says what was awaited. */
static void test_step_watchdog(void **state)
{
    (void)state;
    W->app.cfg.step_timeout_s = 0.05;
    drths_ofr_response_t r;
    target(0.001);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    int64_t answered = until_answer(&r, STEP_MAX);
    assert_true(answered > 0);
    int64_t held = -1;
    for (int i = 0; i < 1000 && held < 0; i++) {
        assert_int_equal(tick(), 0);
        if (W->ps.act.hold)
            held = (int64_t)W->tick - 1;
    }
    /* 0.05 s after the first tick that owed nothing (the one after the answer), within a tick
     * or two of rounding. */
    assert_true(held > answered + 250);
    assert_true(held <= answered + 253);
    assert_int_equal(W->ps.act.hold_reason, DRTHS_STOP_WATCHDOG);
    assert_non_null(strstr(channel_hold_text(&W->ps, 0),
                           "sent no new target for 0.05 s after step 1 was "
                           "reached and answered (--openfresco-step-"
                           "timeout)"));
}

/* Before the first target the silence counts from the set-up and is bounded by the wait for a
 * client (accept_timeout_s, here 0.2 s = 1000 ticks), not by the step watchdog (0.05 s):
 * GenericTCP's operator presses Enter twice there. */
static void test_step_watchdog_before_any_target(void **state)
{
    (void)state;
    W->app.cfg.step_timeout_s = 0.05;
    W->app.cfg.accept_timeout_s = 0.2;
    for (int i = 0; i < 2000 && !W->ps.act.hold; i++)
        assert_int_equal(tick(), 0);
    assert_true(W->ps.act.hold);
    assert_true(W->tick >= 1000 && W->tick <= 1003);
    assert_int_equal(W->ps.act.hold_reason, DRTHS_STOP_WATCHDOG);
    assert_non_null(strstr(channel_hold_text(&W->ps, 0),
                           "sent no first target within 0.2 s of its set-up (--wait-"));
}

/* A client that does not commit but sends the analysis time (GenericTCP with the time mode of
 * -ctrlModes on): a new time begins a step, a trial with the time of the one before is a repeat
 * (at the current target) or an iteration (a short ramp, then measured there); trials without
 * a time are each a step. */
static void trial_at(double d, double t)
{
    drths_ofr_app_post_trial(&W->app, &d, 1, t);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
}

static void test_steps_from_time(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    /* GenericTCP's set-up: the rest position at time 0, a repeat answered at once. */
    trial_at(0.0, 0.0);
    int64_t now = (int64_t)W->tick;
    assert_int_equal(until_answer(&r, 5), now);
    assert_int_equal(W->app.repeats, 1);
    /* The first step, with time 0 as well (an explicit integrator's first trial may carry
     * it): a step, not an iteration of the set-up's trial. */
    trial_at(0.001, 0.0);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_true(r.disp[0] == 0.001);
    assert_int_equal(W->app.time_steps, 1);
    assert_int_equal(W->app.iterations, 0);
    /* Step 2 at 0.01 s, at the same displacement: a step of wall time all the same. */
    trial_at(0.001, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    /* Two Newton iterations of step 2, then the converged value repeated. */
    trial_at(0.0012, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_true(fabs(r.disp[0] - 0.0012) < 1e-15);
    trial_at(0.0011, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    trial_at(0.0011, 0.01);
    now = (int64_t)W->tick;
    assert_int_equal(until_answer(&r, 5), now);
    assert_int_equal(W->app.iterations, 2);
    assert_int_equal(W->app.max_iters_seen, 2);
    assert_int_equal(W->app.repeats, 2);
    /* Steps 3 and 4, the same displacement in both: still a step of wall time. */
    trial_at(0.0015, 0.02);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    trial_at(0.0015, 0.03);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_int_equal(W->app.steps_reached, 4);
    assert_int_equal(W->app.time_steps, 4);
    assert_int_equal(W->app.iterations, 2);
    assert_true(W->app.time_mode && !W->app.commit_mode);
    assert_false(drths_physsite_in_hold(&W->ps));
}

/* More than max_iterations trials with one time: HOLD naming the step and the time. */
static void test_time_iteration_limit(void **state)
{
    (void)state;
    W->app.cfg.max_iterations = 3;
    drths_ofr_response_t r;
    trial_at(0.001, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    for (int i = 1; i <= 4 && !W->ps.act.hold; i++) {
        trial_at(0.001 + 1e-5 * i, 0.01);
        for (int k = 0; k < 400 && !W->ps.act.hold && drths_ofr_app_take(&W->app, &r) != 0; k++)
            assert_int_equal(tick(), 0);
    }
    assert_true(W->ps.act.hold);
    assert_non_null(strstr(channel_hold_text(&W->ps, 0),
                           "more than 3 iterations in analysis step 1 "
                           "(trials with the same time, 0.01 s;"));
}

/* ShadowSite: it commits every step but its first step is over before its first commit, so
 * until then the steps come from the time in its trials (the first step's Newton iterations
 * are iterations), and from its commits after. A first commit with nothing played before it
 * (the first step at rest: ShadowSite sends no trial for it) is a step in place. */
static void test_time_then_commits(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_COMMIT, 0.0, NULL);
    trial_at(0.001, 0.02);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_int_equal(W->app.standing_steps, 1);
    assert_int_equal(W->app.steps_reached, 2);
    assert_true(W->app.commit_mode);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_COMMIT, 0.0, NULL);
    trial_at(0.002, 0.03);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    trial_at(0.0021, 0.03);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_COMMIT, 0.0, NULL);
    assert_int_equal(W->app.iterations, 1);
    assert_int_equal(W->app.steps_reached, 3);
}

static void test_time_first_step_iterations(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    trial_at(0.001, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    trial_at(0.0012, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_COMMIT, 0.0, NULL);
    trial_at(0.002, 0.02);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    trial_at(0.0021, 0.02);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_COMMIT, 0.0, NULL);
    trial_at(0.003, 0.03);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_int_equal(W->app.iterations, 2);
    assert_int_equal(W->app.steps_reached, 3);
    assert_int_equal(W->app.standing_steps, 0);
    assert_true(W->app.commit_mode);
}

/* The experiment file's ground-motion record drives nothing in an OpenFresco session, so the
 * stability monitor's free-vibration check after its end is off (an analysis longer than the
 * file's record would otherwise be held mid-earthquake); its growth check stays on. */
static void test_no_record_end_check(void **state)
{
    (void)state;
    assert_true(isinf(W->ps.act.p.stab_quiet_after_s));
    assert_true(W->ps.act.p.stab_growth_per_s > 0.0);
}

/* Without a time (NaN) every trial is a step, as before. */
static void test_steps_without_time(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    trial_at(0.001, NAN);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    trial_at(0.0012, NAN);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_int_equal(W->app.steps_reached, 2);
    assert_int_equal(W->app.iterations, 0);
    assert_false(W->app.time_mode);
}

static void test_steady_state_allocates_nothing(void **state)
{
    (void)state;
    if (!COUNT_ALLOCS) {
        print_message("sanitizer build: allocation count skipped\n");
        skip();
    }
    drths_ofr_response_t r;
    int k = 0;
    long before = 0;
    for (int step = 0; step < 200; step++) {
        if (step == 20)
            before = atomic_load(&alloc_count);
        double d = 0.005 * sin(2.0 * M_PI * (++k) / 40.0);
        target(d);
        drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
        assert_true(until_answer(&r, STEP_MAX) > 0);
        assert_true(fabs(r.disp[0] - d) < 1e-15);
    }
    long after = atomic_load(&alloc_count);
    assert_int_equal(after - before, 0);
    assert_int_equal(W->app.steps_reached, 200);
}

/* Two actuator channels (examples/opensees/linear-springs-2dof-ideal.yaml: springs of 1e7 and
 * 2e7 N/m on ideal plants). The trials carry the analysis time, so the iteration before the
 * first commit is known as one, as a production client's would be. */
static int setup_two(void **state)
{
    (void)state;
    memset(&T, 0, sizeof T);
    W = calloc(1, sizeof *W);
    const char *srcdir = getenv("DRTHS_SOURCE_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/examples/opensees/linear-springs-2dof-ideal.yaml",
             srcdir ? srcdir : "..");
    drths_error_t err;
    assert_int_equal(drths_experiment_load(&W->exp, path, &err), 0);
    drths_ofr_app_config_t oc;
    memset(&oc, 0, sizeof oc);
    oc.listen = "127.0.0.1:0";
    oc.variant = DRTHS_OFR_GENERIC;
    oc.precor.mode = DRTHS_PRECOR_D;
    oc.precor.predict_fraction = 0.6;
    oc.step_duration_s = 0.01;
    oc.accept_timeout_s = 1.0;
    oc.n_channels = 2;
    assert_int_equal(drths_ofr_app_init(&W->app, &oc, &err), 0);
    drths_physsite_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.exp = &W->exp;
    cfg.source = drths_ofr_app_source();
    cfg.source_ctx = &W->app;
    assert_int_equal(drths_physsite_init(&W->ps, &cfg, NULL, NULL, NULL, &err), 0);
    assert_int_equal(W->ps.n_channels, 2);
    W->src = cfg.source;
    W->dt_ns = W->ps.act.dt_ns;
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_SETUP, 0.0, NULL);
    const char *why = NULL;
    assert_int_equal(W->src->start(&W->app, &W->ps, &why), 0);
    assert_int_equal(W->app.n, 2);
    return 0;
}

static void trial_two(double d0, double d1, double t)
{
    const double v[2] = {d0, d1};
    drths_ofr_app_post_trial(&W->app, v, 2, t);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
}

/* Trial vectors: channel i takes element i and measures k_i times it; a repeat is a vector
 * whose every element is within 1 nm of the target, so a change of one element alone is an
 * iteration; a site-wide HOLD (drths_physsite_hold) holds both channels. */
static void test_two_channels(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    trial_two(0.001, -0.002, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_true(r.disp[0] == 0.001 && r.disp[1] == -0.002);
    assert_true(fabs(r.force[0] - 1.0e7 * 0.001) <= 1e-12 * 1e4);
    assert_true(fabs(r.force[1] - 2.0e7 * -0.002) <= 1e-12 * 4e4);
    assert_true(r.disp[2] == 0.0 && r.force[2] == 0.0);
    /* The repeat: channel 2 within the tolerance. Answered at once from the step's end. */
    trial_two(0.001, -0.002 + 0.5 * DRTHS_OFR_REPEAT_TOL_M, 0.01);
    int64_t now = (int64_t)W->tick;
    assert_int_equal(until_answer(&r, 5), now);
    assert_int_equal(W->app.repeats, 1);
    assert_true(r.disp[1] == -0.002);
    /* Channel 2 alone moves by 1 um: an iteration of the same step. */
    trial_two(0.001, -0.002 + 1e-6, 0.01);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_int_equal(W->app.iterations, 1);
    assert_true(r.disp[0] == 0.001 && fabs(r.disp[1] - (-0.002 + 1e-6)) < 1e-15);
    /* Commit, then the next step moves both. */
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_COMMIT, 0.0, NULL);
    trial_two(0.0015, -0.0015, 0.02);
    assert_true(until_answer(&r, STEP_MAX) > 0);
    assert_true(r.disp[0] == 0.0015 && r.disp[1] == -0.0015);
    assert_int_equal(W->app.steps_reached, 2);
    assert_true(drths_ofr_app_channel_rms_pct(&W->app, 0) == 0.0);
    assert_true(drths_ofr_app_channel_rms_pct(&W->app, 1) == 0.0);
    assert_false(drths_physsite_in_hold(&W->ps));
    /* A cause of the whole site holds both channels with one sentence. */
    drths_physsite_hold_text_cause(&W->ps, DRTHS_STOP_PEER_LOST, 0, "the client went away");
    assert_true(W->ps.act.hold && W->ps.extra[0].act.hold);
    assert_string_equal(channel_hold_text(&W->ps, 1), "the client went away");
}

/* A normal run of steps (a sine of 5 mm, 40 steps a period): every answer is its target, and
 * the command is within the bounds throughout. */
static void test_smooth_steps(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    for (int k = 1; k <= 80; k++) {
        double d = 0.005 * sin(2.0 * M_PI * k / 40.0);
        target(d);
        drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
        assert_true(until_answer(&r, STEP_MAX) > 0);
        assert_true(r.disp[0] == d);
    }
    assert_smooth();
    assert_false(W->ps.act.hold);
    assert_int_equal(W->app.steps_reached, 80);
}

/* Issue 28: ten steps of 0.2 mm, then a target 43 mm away. It is refused when it arrives
 * (HOLD, with a sentence naming the target, the step and the bound), no command is made for
 * it, and the commands of the whole run stay within the bounds. */
static void test_target_jump_refused(void **state)
{
    (void)state;
    drths_ofr_response_t r;
    for (int k = 1; k <= 10; k++) {
        target(0.0002 * k);
        drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
        assert_true(until_answer(&r, STEP_MAX) > 0);
    }
    target(0.045);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    assert_int_equal(until_answer(&r, STEP_MAX), -1);
    assert_true(W->ps.act.hold);
    assert_int_equal(W->ps.act.hold_reason, DRTHS_STOP_LIMIT);
    assert_non_null(strstr(channel_hold_text(&W->ps, 0),
                           "OpenFresco target 0.045 m for step 11 is 43 mm from the current 2 mm: "
                           "reaching it in one step of 10 ms needs 4.3 m/s, beyond physical."
                           "limit_velocity_m_s 1 m/s"));
    assert_int_equal(W->app.refused, 1);
    assert_true(fabs(W->app.last_x.v[0]) < 0.005);
    assert_smooth();
}

/* A trial that is not a finite number, or beyond the command limit: HOLD when it arrives,
 * nothing moves. */
static void refused_at_rest(double d, const char *text)
{
    drths_ofr_response_t r;
    for (int i = 0; i < 5; i++)
        assert_int_equal(tick(), 0);
    target(d);
    drths_ofr_app_post(&W->app, DRTHS_OFR_REQ_MEASURE, 0.0, NULL);
    assert_int_equal(until_answer(&r, 100), -1);
    assert_true(W->ps.act.hold);
    assert_int_equal(W->ps.act.hold_reason, DRTHS_STOP_LIMIT);
    assert_non_null(strstr(channel_hold_text(&W->ps, 0), text));
    assert_true(W->app.last_x.v[0] == 0.0);
    assert_true(T.max_dx[0] == 0.0);
    assert_int_equal(W->app.queued, 0);
}

static void test_nan_target_refused(void **state)
{
    (void)state;
    refused_at_rest(NAN, "OpenFresco target nan m for step 1 refused: not a number within "
                         "physical.limit_displacement_m 0.1 m");
}

static void test_huge_target_refused(void **state)
{
    (void)state;
    refused_at_rest(1e300, "OpenFresco target 1e+300 m for step 1 refused: beyond "
                           "physical.limit_displacement_m 0.1 m");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_client_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_watchdog, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_watchdog_before_any_target, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steady_state_allocates_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps_from_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_iteration_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steps_without_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_then_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_record_end_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_first_step_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_channels, setup_two, teardown),
        cmocka_unit_test_setup_teardown(test_smooth_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_target_jump_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nan_target_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_target_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
