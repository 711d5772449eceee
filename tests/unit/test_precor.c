#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>

#include "common/models/precor.h"

/* Targets d(m) = m^3 for m = 1 .. 4 and the new target d(5) = 125: every value below is a
 * binary fraction, so the cubic cases are exact in floating point. */
static const double cube_hist[4] = {1.0, 8.0, 27.0, 64.0};

static void test_predictor_exact_for_cubic(void **state)
{
    (void)state;
    assert_true(drths_precor_predict(cube_hist, 0.0) == 64.0);
    assert_true(drths_precor_predict(cube_hist, 0.5) == 91.125); /* 4.5^3 */
    assert_true(drths_precor_predict(cube_hist, 1.0) == 125.0);
    /* A quadratic and a constant as well. */
    const double q[4] = {4.0, 1.0, 0.0, 1.0}; /* (m-2)^2 at m = 0..3 */
    assert_true(drths_precor_predict(q, 1.0) == 4.0);
    const double c[4] = {0.25, 0.25, 0.25, 0.25};
    assert_true(fabs(drths_precor_predict(c, 0.37) - 0.25) < 1e-15);
}

/* The end rates: PreCor-D the derivatives of the cubic through the history at its last node
 * (m^3 at m = 4: 48 and 24), PreCor-LPD the last difference and no acceleration. */
static void test_end_rates(void **state)
{
    (void)state;
    drths_precor_params_t p = {DRTHS_PRECOR_D, 0.6};
    double v, a;
    drths_precor_end_rates(&p, cube_hist, &v, &a);
    assert_true(v == 48.0 && a == 24.0);
    /* They are the predictor's derivatives at f = 0 (central differences of it). */
    const double h[4] = {0.0, 0.0, 0.0, 0.001};
    drths_precor_end_rates(&p, h, &v, &a);
    double e = 1e-4;
    double dv = (drths_precor_predict(h, e) - drths_precor_predict(h, -e)) / (2 * e);
    double da = (drths_precor_predict(h, e) - 2 * drths_precor_predict(h, 0) +
                 drths_precor_predict(h, -e)) / (e * e);
    assert_true(fabs(v - dv) < 1e-9 && fabs(a - da) < 1e-6);
    p.mode = DRTHS_PRECOR_LPD;
    drths_precor_end_rates(&p, cube_hist, &v, &a);
    assert_true(v == 37.0 && a == 0.0);
}

/* The quintic Hermite segment meets its six end conditions, and its peaks are those of its
 * samples. */
static void test_segment(void **state)
{
    (void)state;
    drths_precor_seg_t s;
    drths_precor_seg_init(&s, 1.0, 0.5, -0.25, 3.0, -0.125, 0.0625, 8.0);
    double v, a;
    assert_true(fabs(drths_precor_seg_eval(&s, 0.0, &v, &a) - 1.0) < 1e-15);
    assert_true(fabs(v - 0.5) < 1e-15 && fabs(a + 0.25) < 1e-15);
    assert_true(fabs(drths_precor_seg_eval(&s, 8.0, &v, &a) - 3.0) < 1e-12);
    assert_true(fabs(v + 0.125) < 1e-12 && fabs(a - 0.0625) < 1e-12);
    /* Rest to rest over len: peak velocity 1.875 d / len, acceleration 10 / sqrt(3) d / len^2
     * (sampled at 256 points: within 0.1 %). */
    drths_precor_seg_init(&s, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1000.0);
    double vm, am, xm;
    drths_precor_seg_peaks(&s, &vm, &am, &xm);
    assert_true(fabs(vm - 1.875e-3) < 1e-9);
    assert_true(fabs(am / (10.0 / sqrt(3.0) * 1e-6) - 1.0) < 1e-3);
    assert_true(fabs(xm - 1.0) < 1e-15);
    /* A non-finite end is beyond every bound. */
    drths_precor_seg_init(&s, 0.0, 0.0, 0.0, NAN, 0.0, 0.0, 10.0);
    drths_precor_seg_peaks(&s, &vm, &am, &xm);
    assert_true(isinf(vm) && isinf(am) && isinf(xm));
    /* The parabola: constant acceleration. */
    drths_precor_seg_parabola(&s, 2.0, 1.0, 0.5, 4.0);
    assert_true(drths_precor_seg_eval(&s, 2.0, &v, &a) == 5.0);
    assert_true(v == 2.0 && a == 0.5);
}

/* A predictor, then a correction from the predictor's state at the switch to the target with
 * the next step's end rates: position, velocity and acceleration continuous at the switch and
 * at the step end, and close to the cubic history it follows. */
static void test_chain_c2(void **state)
{
    (void)state;
    drths_precor_params_t p = {DRTHS_PRECOR_D, 0.6};
    const double n = 50.0;
    double v0, a0;
    drths_precor_end_rates(&p, cube_hist, &v0, &a0);
    drths_precor_seg_t pr, co;
    drths_precor_seg_parabola(&pr, 64.0, v0 / n, a0 / (n * n), 30.0);
    double xs, vs, as;
    xs = drths_precor_seg_eval(&pr, 30.0, &vs, &as);
    const double next[4] = {8.0, 27.0, 64.0, 125.0};
    double v1, a1;
    drths_precor_end_rates(&p, next, &v1, &a1);
    drths_precor_seg_init(&co, xs, vs, as, 125.0, v1 / n, a1 / (n * n), 20.0);
    double v, a;
    assert_true(fabs(drths_precor_seg_eval(&co, 0.0, &v, &a) - xs) < 1e-12);
    assert_true(fabs(v - vs) < 1e-12 && fabs(a - as) < 1e-12);
    assert_true(fabs(drths_precor_seg_eval(&co, 20.0, &v, &a) - 125.0) < 1e-9);
    assert_true(fabs(v - 75.0 / n) < 1e-9 && fabs(a - 30.0 / (n * n)) < 1e-9);
    /* The correction stays within 0.3 of the cubic (4 + f)^3 (91 .. 125) it follows: the
     * predictor drops its jerk term, (f^3 / 6) 6 = 0.216 at the switch, which it corrects. */
    for (int i = 0; i <= 20; i++) {
        double f = (30.0 + i) / n;
        assert_true(fabs(drths_precor_seg_eval(&co, i, NULL, NULL) - pow(4.0 + f, 3.0)) < 0.3);
    }
}

static void test_params(void **state)
{
    (void)state;
    drths_precor_params_t p = {DRTHS_PRECOR_D, 1.0};
    assert_int_equal(drths_precor_check(&p), -EINVAL);
    p.predict_fraction = -0.1;
    assert_int_equal(drths_precor_check(&p), -EINVAL);
    p.predict_fraction = NAN;
    assert_int_equal(drths_precor_check(&p), -EINVAL);
    p.predict_fraction = 0.0;
    assert_int_equal(drths_precor_check(&p), 0);
    p.mode = (drths_precor_mode_t)7;
    assert_int_equal(drths_precor_check(&p), -EINVAL);
    drths_precor_mode_t m;
    assert_int_equal(drths_precor_mode_parse("lpd", &m), 0);
    assert_int_equal(m, DRTHS_PRECOR_LPD);
    assert_int_equal(drths_precor_mode_parse("d", &m), 0);
    assert_int_equal(m, DRTHS_PRECOR_D);
    assert_int_equal(drths_precor_mode_parse("D2", &m), -EINVAL);
    assert_string_equal(drths_precor_mode_name(DRTHS_PRECOR_LPD), "lpd");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predictor_exact_for_cubic),
        cmocka_unit_test(test_end_rates),
        cmocka_unit_test(test_segment),
        cmocka_unit_test(test_chain_c2),
        cmocka_unit_test(test_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
