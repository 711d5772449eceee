/* Time warps of the command stream (site-numerical/warp.h): the plan keeps the rate and the
 * curvature bounds, ends at n exactly, and D, D' and D'' are continuous; the Hermite interpolant
 * reproduces a cubic and its velocity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>

#include "site-numerical/warp.h"

/* Samples D on a fine grid: largest |D'|, |D''| (from differences) and the largest jump of D'
 * and D'' between neighbouring samples. */
static void check_plan(double n, double rho_max, double curv_max)
{
    drths_warp_t w;
    drths_warp_plan(&w, 100.0, n, rho_max, curv_max);
    const double end = drths_warp_end(&w), h = 1e-3;
    assert_true(end > 100.0);
    assert_true(w.rho <= rho_max * (1 + 1e-12));
    assert_true(fabs(fabs(n) - w.rho * (w.m + w.p)) < 1e-9 * fabs(n));
    double r_prev = 0.0, worst_r = 0.0, worst_c = 0.0, worst_jump = 0.0;
    for (double t = 99.0; t <= end + 1.0; t += h) {
        double r;
        const double d = drths_warp_delay(&w, t, &r);
        assert_true(fabs(d) <= fabs(n) * (1 + 1e-12));
        worst_r = fmax(worst_r, fabs(r));
        const double c = (r - r_prev) / h;
        if (t > 99.0 + h)
            worst_c = fmax(worst_c, fabs(c));
        worst_jump = fmax(worst_jump, fabs(r - r_prev));
        r_prev = r;
    }
    /* D' moves by at most curv_max per tick: on this grid by curv_max * h (plus round-off). */
    assert_true(worst_r <= rho_max * (1 + 1e-12));
    assert_true(worst_c <= curv_max * 1.001);
    assert_true(worst_jump <= curv_max * h * 1.001);
    assert_true(drths_warp_delay(&w, 100.0, NULL) == 0.0);
    assert_true(drths_warp_delay(&w, end, NULL) == n);
    assert_true(drths_warp_delay(&w, end + 1e6, NULL) == n);
}

static void test_plans_keep_their_bounds(void **state)
{
    (void)state;
    const double dt = 1.0 / 5000;
    /* Raises of 1 to 1000 ticks at 40/s (rho <= 1: never backwards), glides at 5/s, 1/20. */
    for (double n = 1; n <= 1000; n *= 3.7) {
        check_plan(n, 1.0, 40.0 * dt);
        check_plan(-n, 1.0 / 20, 5.0 * dt);
    }
    /* A 25-tick raise at 40/s and 5 kHz is a bell 153 ticks long with a peak rate of 1/3; a
     * 300-tick one stops the specimen for 66 ticks between two ramps of 234. */
    drths_warp_t w;
    drths_warp_plan(&w, 0.0, 25.0, 1.0, 40.0 * dt);
    assert_true(w.p == 0.0 && fabs(2 * w.m - 153.1) < 0.1 && fabs(w.rho - 0.3266) < 1e-3);
    drths_warp_plan(&w, 0.0, 300.0, 1.0, 40.0 * dt);
    assert_true(w.rho == 1.0 && fabs(w.m - 234.375) < 1e-9 && fabs(w.p - 65.625) < 1e-9);
    /* Nothing to do. */
    drths_warp_plan(&w, 7.0, 0.0, 1.0, 0.01);
    assert_true(drths_warp_end(&w) == 7.0 && drths_warp_delay(&w, 8.0, NULL) == 0.0);
}

static void test_hermite_reproduces_a_cubic(void **state)
{
    (void)state;
    const double h = 2e-4;
    /* x(t) = 1 + 2t - 30t² + 500t³ between t = 0 and h. */
    const double x0 = 1.0, v0 = 2.0;
    const double x1 = 1 + 2 * h - 30 * h * h + 500 * h * h * h, v1 = 2 - 60 * h + 1500 * h * h;
    for (double f = 0.0; f <= 1.0; f += 0.125) {
        const double t = f * h;
        double v;
        const double x = drths_warp_hermite(x0, v0, x1, v1, h, f, &v);
        assert_true(fabs(x - (1 + 2 * t - 30 * t * t + 500 * t * t * t)) < 1e-14);
        assert_true(fabs(v - (2 - 60 * t + 1500 * t * t)) < 1e-9);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plans_keep_their_bounds),
        cmocka_unit_test(test_hermite_reproduces_a_cubic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
