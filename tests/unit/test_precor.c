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

static void test_precor_d_exact_for_cubic(void **state)
{
    (void)state;
    drths_precor_params_t p = {DRTHS_PRECOR_D, 0.5};
    assert_int_equal(drths_precor_check(&p), 0);
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 0.25) == 4.25 * 4.25 * 4.25);
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 0.5) == 91.125);
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 0.75) == 107.171875); /* 4.75^3 */
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 1.0) == 125.0);
    /* The whole step follows the cubic, whatever the switch. */
    for (int fs = 0; fs < 10; fs++) {
        p.predict_fraction = fs * 0.1;
        for (int i = 0; i <= 100; i++) {
            double f = i * 0.01, ref = pow(4.0 + f, 3.0);
            assert_true(fabs(drths_precor_command(&p, cube_hist, 125.0, 1, f) - ref) < 1e-11);
        }
    }
}

static void test_precor_lpd(void **state)
{
    (void)state;
    drths_precor_params_t p = {DRTHS_PRECOR_LPD, 0.5};
    /* Predictor up to the switch, then the straight line from 91.125 to 125. */
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 0.25) == 4.25 * 4.25 * 4.25);
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 0.5) == 91.125);
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 0.75) == 108.0625);
    assert_true(drths_precor_command(&p, cube_hist, 125.0, 1, 1.0) == 125.0);
}

static void test_target_reached_and_continuity(void **state)
{
    (void)state;
    /* A history the cubic cannot follow (a jump), and a target far from the prediction. */
    const double h[4] = {0.0, 0.0, 0.0, 0.01};
    const drths_precor_mode_t modes[2] = {DRTHS_PRECOR_D, DRTHS_PRECOR_LPD};
    for (int m = 0; m < 2; m++) {
        drths_precor_params_t p = {modes[m], DRTHS_PRECOR_DEFAULT_FRACTION};
        double xsw = drths_precor_predict(h, 0.6);
        assert_true(fabs(xsw - 0.02496) < 1e-15); /* w3(0.6) = 1.6·2.6·3.6/6 = 2.496 */
        assert_true(drths_precor_command(&p, h, -0.02, 1, 1.0) == -0.02);
        assert_true(drths_precor_command(&p, h, -0.02, 1, 7.0) == -0.02); /* clamped */
        assert_true(drths_precor_command(&p, h, -0.02, 1, -1.0) == 0.01); /* clamped to f = 0 */
        double before = drths_precor_command(&p, h, -0.02, 1, 0.6 - 1e-9);
        double at = drths_precor_command(&p, h, -0.02, 1, 0.6);
        assert_true(fabs(at - xsw) < 1e-15);
        assert_true(fabs(before - at) < 1e-9);
        /* Steps of 1/1000 of a step move by a bounded amount around the switch and the end. */
        double prev = drths_precor_command(&p, h, -0.02, 1, 0.0);
        for (int i = 1; i <= 1000; i++) {
            double x = drths_precor_command(&p, h, -0.02, 1, i * 1e-3);
            assert_true(fabs(x - prev) < 1e-3);
            prev = x;
        }
    }
}

static void test_hold_without_target(void **state)
{
    (void)state;
    drths_precor_params_t p = {DRTHS_PRECOR_D, 0.5};
    /* Before the switch the target is not needed; after it, the switch value is held. */
    assert_true(drths_precor_command(&p, cube_hist, NAN, 0, 0.25) == 4.25 * 4.25 * 4.25);
    assert_true(drths_precor_command(&p, cube_hist, NAN, 0, 0.5) == 91.125);
    assert_true(drths_precor_command(&p, cube_hist, NAN, 0, 0.9) == 91.125);
    assert_true(drths_precor_command(&p, cube_hist, NAN, 0, 1.0) == 91.125);
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
        cmocka_unit_test(test_precor_d_exact_for_cubic),
        cmocka_unit_test(test_precor_lpd),
        cmocka_unit_test(test_target_reached_and_continuity),
        cmocka_unit_test(test_hold_without_target),
        cmocka_unit_test(test_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
