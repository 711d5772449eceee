#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/platform/stats.h"

static void test_rank(void **state)
{
    (void)state;
    assert_int_equal(drths_quantile_rank(1000, 0.999), 998); /* rank 999, not 1000 */
    assert_int_equal(drths_quantile_rank(1000, 0.5), 499);
    assert_int_equal(drths_quantile_rank(1001, 0.5), 500);
    assert_int_equal(drths_quantile_rank(3, 0.5), 1);
    assert_int_equal(drths_quantile_rank(10, 1.0), 9);
    assert_int_equal(drths_quantile_rank(10, 0.01), 0);
    assert_int_equal(drths_quantile_rank(10, 0.0), 0);
    assert_int_equal(drths_quantile_rank(100000, 0.99), 98999);
    assert_int_equal(drths_quantile_rank(2000000000, 0.5), 999999999);
}

/* Values 1..N µs (in ns), shuffled: the nearest-rank q-quantile is ceil(q·N) µs exactly, and the
 * histogram must return it to within one bin. */
static void test_hist_quantiles(void **state)
{
    (void)state;
    enum { N = 100000 };
    drths_hist_t h;
    drths_error_t err;
    assert_int_equal(drths_hist_init(&h, 10000, 200000, &err), 0); /* 10 µs bins to 2 s */
    int64_t *v = malloc(N * sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < N; i++)
        v[i] = (int64_t)(i + 1) * 1000;
    srand(7);
    for (int i = N - 1; i > 0; i--) {
        int j = rand() % (i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    for (int i = 0; i < N; i++)
        drths_hist_add(&h, v[i]);
    const double qs[] = {0.001, 0.5, 0.9, 0.99, 0.999, 1.0};
    for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
        int64_t exact;
        assert_int_equal(drths_quantile_copy_i64(v, N, qs[k], &exact), 0);
        assert_int_equal(exact, (int64_t)ceil(qs[k] * N - 1e-6) * 1000);
        int64_t got = drths_hist_quantile(&h, qs[k]);
        assert_true(got >= exact);
        assert_true(got <= exact + 10000);
    }
    /* Reference numbers: p50 is 50 000 µs, and 50 000 µs lies at the lower edge of its bin, so
     * the histogram reports the bin's upper edge 50 010 µs; p100 is clamped to the max. */
    assert_int_equal(drths_hist_quantile(&h, 0.5), 50010000);
    assert_int_equal(drths_hist_quantile(&h, 1.0), 100000000);
    assert_int_equal(h.min, 1000);
    assert_int_equal(h.max, 100000000);
    assert_true(fabs(drths_hist_mean(&h) - 50000500.0) < 1e-3);
    free(v);

    drths_hist_reset(&h);
    assert_int_equal(h.count, 0);
    for (size_t i = 0; i < h.nbins; i++)
        assert_int_equal(h.bins[i], 0);
    assert_int_equal(drths_hist_quantile(&h, 0.5), 0);
    drths_hist_close(&h);
    drths_hist_close(&h);
}

static void test_hist_edges(void **state)
{
    (void)state;
    drths_hist_t h;
    drths_error_t err;
    assert_int_equal(drths_hist_init(&h, 0, 10, &err), -EINVAL);
    assert_string_equal(err.msg, "histogram bin width: must be > 0 (got 0)");
    assert_int_equal(drths_hist_init(&h, 100, 0, NULL), -EINVAL);
    drths_hist_close(&h);

    assert_int_equal(drths_hist_init(&h, 100, 7, NULL), 0); /* 3 groups of 3, last one short */
    drths_hist_add(&h, -50);  /* underflow: bin 0 */
    drths_hist_add(&h, 650);  /* last bin [600, 700) */
    drths_hist_add(&h, 700);  /* overflow */
    drths_hist_add(&h, 5000); /* overflow */
    assert_int_equal(h.underflow, 1);
    assert_int_equal(h.overflow, 2);
    assert_int_equal(drths_hist_quantile(&h, 0.25), 100); /* bin 0 upper edge */
    assert_int_equal(drths_hist_quantile(&h, 0.5), 700);   /* upper edge of [600, 700) */
    assert_int_equal(drths_hist_quantile(&h, 0.75), 5000); /* rank 3 is in overflow: the max */
    assert_int_equal(drths_hist_quantile(&h, 1.0), 5000);
    drths_hist_close(&h);

    /* A single value: every quantile is that value. */
    assert_int_equal(drths_hist_init(&h, 10000, 1000, NULL), 0);
    drths_hist_add(&h, 123456);
    assert_int_equal(drths_hist_quantile(&h, 0.001), 123456);
    assert_int_equal(drths_hist_quantile(&h, 1.0), 123456);
    drths_hist_close(&h);
}

static void test_running(void **state)
{
    (void)state;
    drths_running_t r;
    drths_running_reset(&r);
    assert_true(drths_running_stddev(&r) == 0.0);
    const double x[] = {2, 4, 4, 4, 5, 5, 7, 9};
    for (size_t i = 0; i < 8; i++)
        drths_running_add(&r, x[i]);
    assert_int_equal(r.n, 8);
    assert_true(r.min == 2.0 && r.max == 9.0);
    assert_true(fabs(r.mean - 5.0) < 1e-15);
    assert_true(fabs(drths_running_stddev(&r) - 2.0) < 1e-15);
    /* Welford stays exact around a large offset where the naive sum of squares would not. */
    drths_running_reset(&r);
    for (size_t i = 0; i < 8; i++)
        drths_running_add(&r, 1e9 + x[i]);
    assert_true(fabs(drths_running_stddev(&r) - 2.0) < 1e-6);
}

static void test_arrays(void **state)
{
    (void)state;
    const double x[] = {3.0, -4.0, 1.0, 0.0};
    assert_true(drths_peak_abs(x, 4) == 4.0);
    assert_true(fabs(drths_rms(x, 4) - sqrt(26.0 / 4.0)) < 1e-15);
    assert_true(drths_rms(x, 0) == 0.0);
    assert_true(drths_peak_abs(x, 0) == 0.0);
    double q;
    assert_int_equal(drths_quantile_copy(x, 4, 0.5, &q), 0);
    assert_true(q == 0.0); /* sorted -4 0 1 3, rank 2 */
    assert_int_equal(drths_quantile_copy(x, 4, 1.0, &q), 0);
    assert_true(q == 3.0);
    assert_true(x[0] == 3.0 && x[1] == -4.0); /* the input is untouched */
    assert_int_equal(drths_quantile_copy(x, 0, 0.5, &q), -EINVAL);
    assert_int_equal(drths_quantile_copy(x, 4, 1.5, &q), -EINVAL);
    int64_t s[] = {5, -1, 3};
    drths_sort_i64(s, 3);
    assert_true(s[0] == -1 && s[1] == 3 && s[2] == 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank),         cmocka_unit_test(test_hist_quantiles),
        cmocka_unit_test(test_hist_edges),   cmocka_unit_test(test_running),
        cmocka_unit_test(test_arrays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
