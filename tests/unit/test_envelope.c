/* Unit tests of the drive envelope (site-physical/envelope.h): each bound refuses what leaves
 * it and records nothing of a refused drive, a held output counts as at rest, and the HOLD ramp
 * from any admissible state reaches its target with every value admitted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "site-physical/envelope.h"

#define RATE 5000.0
#define DT_NS 200000

static const drths_envelope_limits_t lim = {
    .position_m = 0.1, .velocity_m_s = 1.0, .acceleration_m_s2 = 100.0, .offset_m = 0.005};

static void init(drths_envelope_t *e)
{
    drths_error_t err;
    assert_int_equal(drths_envelope_init(e, &lim, RATE, &err), 0);
}

static void test_init_names_the_field(void **state)
{
    (void)state;
    drths_envelope_t e;
    drths_error_t err;
    drths_envelope_limits_t l = lim;
    l.acceleration_m_s2 = 0.0;
    assert_int_equal(drths_envelope_init(&e, &l, RATE, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "physical.limit_drive_acceleration_m_s2"));
    l = lim;
    l.offset_m = NAN;
    assert_int_equal(drths_envelope_init(&e, &l, RATE, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "physical.limit_drive_offset_m"));
}

/* Each bound in turn: a drive just inside is admitted, one just outside is refused with that
 * bound, its value and the limit, and the state stays at the last admitted drive. */
static void test_each_bound(void **state)
{
    (void)state;
    drths_envelope_t e;
    drths_envelope_violation_t v;
    init(&e);
    int64_t t = 0;
    /* Position, and NaN / infinity, even as the first drive. */
    assert_int_equal(drths_envelope_admit(&e, 0.1001, NAN, t, &v), -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_POSITION);
    assert_true(fabs(v.limit - 0.1) < 1e-15);
    assert_int_equal(drths_envelope_admit(&e, NAN, NAN, t, &v), -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_NOT_FINITE);
    assert_int_equal(drths_envelope_admit(&e, 1e300, NAN, t, &v), -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_POSITION);
    assert_int_equal(drths_envelope_admit(&e, 0.0, NAN, t, &v), 0);
    /* Velocity: 1 m/s is 200 um per tick; acceleration from rest allows 4 um in the first. */
    t += DT_NS;
    assert_int_equal(drths_envelope_admit(&e, 4e-6 * 1.001, NAN, t, &v), -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_ACCELERATION);
    assert_int_equal(drths_envelope_admit(&e, 3.9e-6, NAN, t, &v), 0);
    /* Ramp the velocity up to just under 1 m/s within the acceleration bound. */
    double u = 3.9e-6, vel = 3.9e-6 * RATE;
    while (vel + 0.019 < 1.0) {
        vel += 0.019; /* 95 m/s^2 */
        u += vel / RATE;
        t += DT_NS;
        assert_int_equal(drths_envelope_admit(&e, u, NAN, t, &v), 0);
    }
    /* Now 1.02 m/s would be within the acceleration bound but beyond the velocity bound. */
    t += DT_NS;
    assert_int_equal(drths_envelope_admit(&e, u + 1.01 / RATE, NAN, t, &v), -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_VELOCITY);
    assert_true(v.value > 1.0 && v.value < 1.02);
    /* The refused drive left nothing: the same tick's velocity-keeping drive is admitted. */
    assert_int_equal(drths_envelope_admit(&e, u + vel / RATE, NAN, t, &v), 0);
    u += vel / RATE;
    /* Offset from the command being played. */
    t += DT_NS;
    assert_int_equal(drths_envelope_admit(&e, u + vel / RATE, u + vel / RATE - 0.0051, t, &v),
                     -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_OFFSET);
    assert_true(fabs(v.value - 0.0051) < 1e-12);
    assert_int_equal(drths_envelope_admit(&e, u + vel / RATE, u + vel / RATE - 0.0049, t, &v), 0);
    assert_int_equal(e.refused, 6);
    assert_int_equal(e.first_refusal.bound, DRTHS_ENV_POSITION);
    assert_true(e.max_velocity_m_s <= 1.0 && e.max_velocity_m_s > 0.98);
    assert_true(e.max_acceleration_m_s2 <= 100.0);
    assert_true(e.max_use <= 1.0 && e.max_use > 0.98);
}

/* The 8 mm jump of one tick the issue measured is refused; so is a sudden stop from 0.5 m/s,
 * unless the output has stood still for DRTHS_ENV_REST_TICKS ticks (a stall): then the motion
 * that follows starts from rest. */
static void test_jump_and_rest(void **state)
{
    (void)state;
    drths_envelope_t e;
    drths_envelope_violation_t v;
    init(&e);
    int64_t t = 0;
    double u = 0.0;
    assert_int_equal(drths_envelope_admit(&e, u, NAN, t, NULL), 0);
    for (int k = 1; k <= 300; k++) { /* up to 0.5 m/s at 83 m/s^2 */
        const double vel = 0.5 * (k < 30 ? k / 30.0 : 1.0);
        u += vel / RATE;
        t += DT_NS;
        assert_int_equal(drths_envelope_admit(&e, u, u, t, &v), 0);
    }
    t += DT_NS;
    assert_int_equal(drths_envelope_admit(&e, u + 0.0083, u, t, &v), -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_VELOCITY);
    assert_int_equal(drths_envelope_admit(&e, u, NAN, t, &v), -EDOM);
    assert_int_equal(v.bound, DRTHS_ENV_ACCELERATION);
    /* Three ticks later the converter has held u: writing u again is no acceleration. */
    t += (DRTHS_ENV_REST_TICKS - 1) * (int64_t)DT_NS;
    assert_int_equal(drths_envelope_admit(&e, u, NAN, t, &v), 0);
    assert_true(fabs(e.v1) < 1e-12);
}

/* The HOLD ramp from many admissible states: every value is admitted, the speed never exceeds
 * the larger of the ramp rate and the speed it started with, and it ends at the target. */
static void test_ramp_always_admitted(void **state)
{
    (void)state;
    srand(7);
    int reached = 0, tried = 0;
    for (int trial = 0; trial < 400; trial++) {
        drths_envelope_t e;
        init(&e);
        int64_t t = 0;
        double u = ((double)rand() / RAND_MAX - 0.5) * 0.18;
        const double vel0 = ((double)rand() / RAND_MAX - 0.5) * 1.8;
        /* Reach (u, vel0) admissibly: two writes at vel0 after a rest long enough. */
        assert_int_equal(drths_envelope_admit(&e, u - vel0 / RATE, NAN, t, NULL), 0);
        e.v1 = vel0; /* as if it had been moving at vel0 */
        e.n = 2;
        t += DT_NS;
        if (drths_envelope_admit(&e, u, NAN, t, NULL) != 0)
            continue; /* beyond the position bound: not an admissible state */
        const double target = ((double)rand() / RAND_MAX - 0.5) * 0.19;
        const double ramp = trial % 2 ? 0.05 : 0.0;
        double vmax = fabs(vel0) > 0.9 ? fabs(vel0) : 0.9;
        int done = 0, k;
        for (k = 0; k < 200000 && !done; k++) {
            t += DT_NS;
            const double next = drths_envelope_ramp(&e, target, ramp, t, &done);
            drths_envelope_violation_t v;
            const int rc = drths_envelope_admit(&e, next, NAN, t, &v);
            if (rc != 0) {
                /* Braking from near the position bound towards it may overshoot it: the only
                 * refusal allowed, and a target there is not admissible anyway. */
                assert_int_equal(v.bound, DRTHS_ENV_POSITION);
                break;
            }
            assert_true(fabs(e.v1) <= vmax * (1 + 1e-9));
            if (ramp > 0 && k > 2000) /* braked by then (<= 1 m/s at 50 m/s^2: 20 ms) */
                assert_true(fabs(e.v1) <= ramp * (1 + 1e-9));
        }
        tried++;
        if (done) {
            assert_true(e.u1 == target);
            reached++;
        }
    }
    print_message("ramp: %d of %d admissible starts reached their target\n", reached, tried);
    assert_true(reached >= tried * 9 / 10);
}

/* Before any drive the ramp is the target itself (nothing known to brake from). */
static void test_ramp_first(void **state)
{
    (void)state;
    drths_envelope_t e;
    init(&e);
    int done = 0;
    assert_true(drths_envelope_ramp(&e, 0.01, 0.05, 0, &done) == 0.01);
    assert_true(done);
}

static void test_describe(void **state)
{
    (void)state;
    char buf[256];
    drths_envelope_violation_t v = {.bound = DRTHS_ENV_VELOCITY,
                                    .drive_m = 0.097,
                                    .value = 9.35,
                                    .limit = 1.25,
                                    .command_m = 0.045};
    drths_envelope_describe(&v, buf, sizeof buf);
    assert_non_null(strstr(buf, "limit_drive_velocity_m_s"));
    assert_non_null(strstr(buf, "9.35 m/s"));
    assert_non_null(strstr(buf, "not written"));
    v.bound = DRTHS_ENV_OFFSET;
    v.value = 0.052;
    v.limit = 0.005;
    drths_envelope_describe(&v, buf, sizeof buf);
    assert_non_null(strstr(buf, "limit_drive_offset_m"));
    assert_non_null(strstr(buf, "52 mm"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_names_the_field), cmocka_unit_test(test_each_bound),
        cmocka_unit_test(test_jump_and_rest),        cmocka_unit_test(test_ramp_always_admitted),
        cmocka_unit_test(test_ramp_first),           cmocka_unit_test(test_describe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
