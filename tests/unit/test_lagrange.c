#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>

#include "common/models/lagrange.h"

static double cubic(double t)
{
    return 0.3 - 1.7 * t + 0.25 * t * t - 0.045 * t * t * t;
}

static void test_weights(void **state)
{
    (void)state;
    double w[4];
    drths_lagrange3_weights(1.0, w);
    assert_true(w[0] == -1.0 && w[1] == 4.0 && w[2] == -6.0 && w[3] == 4.0);
    drths_lagrange3_weights(0.0, w);
    assert_true(w[0] == 0.0 && w[1] == 0.0 && w[2] == 0.0 && w[3] == 1.0);
    drths_lagrange3_weights(2.0, w); /* by hand: -4, 15, -20, 10 */
    assert_true(w[0] == -4.0 && w[1] == 15.0 && w[2] == -20.0 && w[3] == 10.0);
    for (double k = 0.0; k <= 5.0; k += 0.25) {
        drths_lagrange3_weights(k, w);
        assert_true(fabs(w[0] + w[1] + w[2] + w[3] - 1.0) < 1e-12); /* constants are exact */
    }
}

static void test_exact_for_cubics(void **state)
{
    (void)state;
    /* Samples of a cubic at t = n-3 .. n for several n, extrapolated k = 1, 2, 3, 0.5 ahead. */
    for (int n = -5; n <= 40; n += 5) {
        double x[4];
        for (int j = 0; j < 4; j++)
            x[j] = cubic(n - 3 + j);
        double ref = cubic(n + 1);
        assert_true(fabs(drths_lagrange3_next(x) - ref) <= 1e-12 * (1.0 + fabs(ref)));
        const double ks[] = {1.0, 2.0, 3.0, 0.5, 7.0};
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
            ref = cubic(n + ks[i]);
            double got = drths_lagrange3_extrapolate(x, ks[i]);
            assert_true(fabs(got - ref) <= 1e-11 * (1.0 + fabs(ref)));
        }
    }
    /* Integer cubic: exact in floating point. t^3 at 0,1,2,3 -> 64 at t = 4. */
    const double c[4] = {0.0, 1.0, 8.0, 27.0};
    assert_true(drths_lagrange3_next(c) == 64.0);
    assert_true(drths_lagrange3_extrapolate(c, 2.0) == 125.0);
}

/* A quartic is not reproduced: the error of x(n+1) is the fourth difference, 24·a4. This is the
 * reason consecutive concealment is limited. */
static void test_quartic_error(void **state)
{
    (void)state;
    const double q[4] = {0.0, 1.0, 16.0, 81.0}; /* t^4 */
    assert_true(drths_lagrange3_next(q) == 256.0 - 24.0);
}

static void test_vector(void **state)
{
    (void)state;
    double r0[3], r1[3], r2[3], r3[3];
    double *rows[4] = {r0, r1, r2, r3};
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 3; i++)
            rows[j][i] = cubic(j + 10.0 * i);
    const double *const hist[4] = {r0, r1, r2, r3};
    double out[3];
    drths_lagrange3_extrapolate_n(hist, 1.0, out, 3);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(out[i] - cubic(4 + 10.0 * i)) < 1e-10 * (1.0 + fabs(out[i])));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_exact_for_cubics),
        cmocka_unit_test(test_quartic_error),
        cmocka_unit_test(test_vector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
