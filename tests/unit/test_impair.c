/* Unit tests of the netem-style impairment model (common/platform/impair.h): parsing and its errors, and
 * statistics over 1e6 decisions against the numbers the spec implies. Every bound is about four
 * standard errors wide, so a correct model fails about once in 10^4 seeds; the seeds are fixed,
 * so the test is deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/platform/impair.h"

#define N 1000000
#define MS 1000000.0

static void parse_ok(const char *text, drths_impair_spec_t *s)
{
    drths_error_t err;
    int r = drths_impair_spec_parse(s, text, &err);
    if (r != 0)
        fail_msg("parse \"%s\": %s", text, err.msg);
}

static void parse_bad(const char *text, const char *expect_in_msg)
{
    drths_error_t err;
    drths_impair_spec_t s;
    assert_int_equal(drths_impair_spec_parse(&s, text, &err), -EINVAL);
    if (strstr(err.msg, expect_in_msg) == NULL)
        fail_msg("parse \"%s\": message \"%s\" lacks \"%s\"", text, err.msg, expect_in_msg);
}

static void test_parse_example(void **state)
{
    (void)state;
    drths_impair_spec_t s;
    parse_ok("delay 40ms 5ms distribution normal loss 1% duplicate 0.1% reorder 1%", &s);
    assert_int_equal(s.delay_ns, 40000000);
    assert_int_equal(s.jitter_ns, 5000000);
    assert_int_equal(s.dist, DRTHS_IMPAIR_DIST_NORMAL);
    assert_int_equal(s.loss_model, DRTHS_IMPAIR_LOSS_RANDOM);
    assert_true(fabs(s.loss - 0.01) < 1e-12);
    assert_true(fabs(s.duplicate - 0.001) < 1e-12);
    assert_true(fabs(s.reorder - 0.01) < 1e-12);
    assert_int_equal(s.gap, 1); /* tc's default when reorder is given */

    parse_ok("latency 1.5ms 250us 25% loss gemodel 1% 30% 90% 0.5% rate 10mbit 42 limit 500", &s);
    assert_int_equal(s.delay_ns, 1500000);
    assert_int_equal(s.jitter_ns, 250000);
    assert_true(fabs(s.delay_corr - 0.25) < 1e-12);
    assert_int_equal(s.dist, DRTHS_IMPAIR_DIST_UNIFORM); /* what the kernel does without a table */
    assert_int_equal(s.loss_model, DRTHS_IMPAIR_LOSS_GE);
    assert_true(fabs(s.ge_p - 0.01) < 1e-12 && fabs(s.ge_r - 0.30) < 1e-12);
    assert_true(fabs(s.ge_1h - 0.90) < 1e-12 && fabs(s.ge_1k - 0.005) < 1e-12);
    assert_int_equal(s.rate_bit_s, 10000000);
    assert_int_equal(s.packet_overhead, 42);
    assert_int_equal(s.limit, 500);

    /* gemodel defaults: r = 1 - p, 1-h = 100 %, 1-k = 0 % (tc's). */
    parse_ok("loss gemodel 2%", &s);
    assert_true(fabs(s.ge_r - 0.98) < 1e-12 && s.ge_1h == 1.0 && s.ge_1k == 0.0);
    /* Bare percentages are percent, as in tc; "drop" is tc's alias of "loss". */
    parse_ok("drop 5 25", &s);
    assert_true(fabs(s.loss - 0.05) < 1e-12 && fabs(s.loss_corr - 0.25) < 1e-12);
    parse_ok("rate 1kbps", &s);
    assert_int_equal(s.rate_bit_s, 8000); /* bps is bytes per second in tc */
    parse_ok("", &s);
    assert_int_equal(s.delay_ns, 0);
    parse_ok("delay 10ms reorder 25% 50% gap 5", &s);
    assert_int_equal(s.gap, 5);
    assert_true(fabs(s.reorder_corr - 0.5) < 1e-12);
}

static void test_parse_errors(void **state)
{
    (void)state;
    parse_bad("delay 40xs", "token 2 \"40xs\" (delay time): unknown time unit");
    parse_bad("delay 40", "token 2 \"40\" (delay time): a time needs a unit");
    parse_bad("delay 40ms 5", "token 3 \"5\" (delay jitter)");
    parse_bad("delay", "missing delay time");
    parse_bad("loss 120%", "token 2 \"120%\" (loss percentage): must be between 0% and 100%");
    parse_bad("loss 1x", "token 2 \"1x\" (loss percentage): not a percentage");
    parse_bad("loss sometimes", "token 2 \"sometimes\"");
    parse_bad("loss state 1%", "4-state model is not supported");
    parse_bad("delay 40ms frobnicate 3", "token 3 \"frobnicate\" (keyword): unknown");
    parse_bad("reorder 1%", "token 1 \"reorder\" (keyword): reordering needs a delay");
    parse_bad("delay 10ms gap 5", "gap given without a reorder percentage");
    parse_bad("delay 40ms distribution normal", "needs a delay and a jitter");
    parse_bad("delay 40ms 5ms distribution gaussian", "token 5 \"gaussian\"");
    parse_bad("delay 40ms delay 50ms", "token 3 \"delay\" (keyword): given twice");
    parse_bad("rate 10", "a rate needs a unit");
    parse_bad("rate 10furlongs", "unknown rate unit");
    parse_bad("limit 0", "token 2 \"0\" (limit)");
    parse_bad("delay 40ms seed 3", "--seed");
    parse_bad("delay 2h", "unknown time unit");
}

static void test_format_roundtrip(void **state)
{
    (void)state;
    const char *texts[] = {
        "delay 40ms 5ms distribution normal loss 1% duplicate 0.1% reorder 1%",
        "delay 1500us 250us 25% loss gemodel 1% 30% 90% 0.5% rate 10mbit 42 limit 500",
        "delay 10ms reorder 25% 50% gap 5 corrupt 0.1%",
        "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        drths_impair_spec_t a, b;
        char buf[256];
        parse_ok(texts[i], &a);
        assert_true(drths_impair_spec_format(&a, buf, sizeof buf) < (int)sizeof buf);
        parse_ok(buf, &b);
        assert_memory_equal(&a, &b, sizeof a);
    }
}

typedef struct stats {
    double mean, sd, min, max;
    double lag1; /* lag-1 autocorrelation */
} stats_t;

/* Feeds N packets 200 us apart (5 kHz) and returns the statistics of the first copy's delay. */
static stats_t delay_stats(const char *text, uint64_t seed)
{
    drths_impair_spec_t s;
    drths_impair_t im;
    parse_ok(text, &s);
    assert_int_equal(drths_impair_init(&im, &s, seed), 0);
    double sum = 0, sum2 = 0, mn = INFINITY, mx = -INFINITY, prev = 0, sxy = 0;
    for (int i = 0; i < N; i++) {
        drths_impair_decision_t d;
        int64_t now = (int64_t)i * 200000;
        assert_int_equal(drths_impair_decide(&im, now, 100, &d), 1);
        double x = (double)(d.send_ns[0] - now);
        sum += x;
        sum2 += x * x;
        mn = fmin(mn, x);
        mx = fmax(mx, x);
        if (i)
            sxy += x * prev;
        prev = x;
    }
    stats_t st;
    st.mean = sum / N;
    st.sd = sqrt(sum2 / N - st.mean * st.mean);
    st.min = mn;
    st.max = mx;
    st.lag1 = (sxy / (N - 1) - st.mean * st.mean) / (st.sd * st.sd);
    drths_impair_close(&im);
    drths_impair_close(&im); /* safe twice */
    return st;
}

static void test_delay_uniform(void **state)
{
    (void)state;
    stats_t st = delay_stats("delay 40ms 5ms", 1);
    /* Uniform on [35, 45) ms: sd 5/sqrt(3) = 2.8868 ms, standard error of the mean 2.9 us. */
    assert_true(fabs(st.mean - 40 * MS) < 12e3);
    assert_true(fabs(st.sd - 2.8868 * MS) < 0.005 * 2.8868 * MS);
    assert_true(st.min >= 35 * MS && st.max < 45 * MS);
    assert_true(st.min < 35.01 * MS && st.max > 44.99 * MS);
    assert_true(fabs(st.lag1) < 0.005);
}

static void test_delay_normal(void **state)
{
    (void)state;
    stats_t st = delay_stats("delay 40ms 5ms distribution normal", 2);
    /* netem's normal table spans -4 sigma (clipped to -32768 / 8192) to +3.52 sigma (its last
     * entry is bin 16380 of 16384): sd within 1 % of 5 ms, mean within 5 us. */
    assert_true(fabs(st.mean - 40 * MS) < 25e3);
    assert_true(fabs(st.sd - 5 * MS) < 0.01 * 5 * MS);
    assert_true(st.min >= 40 * MS - 4.0 * 5 * MS - 1e3 && st.max < 40 * MS + 3.53 * 5 * MS);
    assert_true(st.min < 40 * MS - 3.9 * 5 * MS && st.max > 40 * MS + 3.5 * 5 * MS);
}

static void test_delay_pareto(void **state)
{
    (void)state;
    stats_t st = delay_stats("delay 40ms 5ms distribution pareto", 3);
    /* netem's pareto table: a = 3 shifted to zero mean and scaled by 4/3, so its minimum is
     * -2/3 sigma and its tail is long (clipped at 4 sigma). */
    assert_true(st.min >= 40 * MS - 0.667 * 5 * MS - 1e3);
    assert_true(st.min < 40 * MS - 0.66 * 5 * MS);
    assert_true(st.max > 40 * MS + 3.9 * 5 * MS && st.max <= 40 * MS + 4.0 * 5 * MS + 1e3);
    assert_true(fabs(st.mean - 40 * MS) < 0.1 * 5 * MS);
    stats_t pn = delay_stats("delay 40ms 5ms distribution paretonormal", 4);
    assert_true(fabs(pn.mean - 40 * MS) < 0.1 * 5 * MS);
    assert_true(pn.sd > 0.5 * 5 * MS && pn.sd < 1.2 * 5 * MS);
}

static void test_delay_correlation(void **state)
{
    (void)state;
    /* netem's correlated source is an AR(1) process in the uniform domain: lag-1 correlation
     * rho, variance narrowed by (1 - rho) / (1 + rho). */
    stats_t st = delay_stats("delay 40ms 5ms 50%", 5);
    assert_true(fabs(st.lag1 - 0.5) < 0.01);
    assert_true(fabs(st.mean - 40 * MS) < 12e3);
    assert_true(fabs(st.sd - 2.8868 * MS * sqrt(0.5 / 1.5)) < 0.01 * 1.667 * MS);
}

static double loss_fraction(const char *text, uint64_t seed, double *mean_burst, double *p_burst1)
{
    drths_impair_spec_t s;
    drths_impair_t im;
    parse_ok(text, &s);
    assert_int_equal(drths_impair_init(&im, &s, seed), 0);
    long lost = 0, bursts = 0, burst1 = 0, run = 0;
    for (int i = 0; i < N; i++) {
        drths_impair_decision_t d;
        unsigned c = drths_impair_decide(&im, (int64_t)i * 200000, 100, &d);
        assert_int_equal(1 + d.duplicated, c + d.lost_random + d.lost_ge);
        if (c == 0) {
            lost++;
            run++;
        } else if (run) {
            bursts++;
            burst1 += run == 1;
            run = 0;
        }
    }
    if (mean_burst)
        *mean_burst = bursts ? (double)(lost - run) / bursts : 0;
    if (p_burst1)
        *p_burst1 = bursts ? (double)burst1 / bursts : 0;
    return (double)lost / N;
}

static void test_loss_random(void **state)
{
    (void)state;
    double mb;
    double f = loss_fraction("loss 5%", 6, &mb, NULL);
    /* Bernoulli: standard error sqrt(.05 * .95 / 1e6) = 2.2e-4. Bursts are geometric with mean
     * 1 / 0.95. */
    assert_true(fabs(f - 0.05) < 9e-4);
    assert_true(fabs(mb - 1.0 / 0.95) < 0.01);
    assert_true(fabs(loss_fraction("loss 0%", 6, NULL, NULL)) == 0.0);
    assert_true(loss_fraction("loss 100%", 6, NULL, NULL) == 1.0);
    /* Correlated loss keeps its mean (see the header on the deviation from netem) and comes in
     * geometric bursts of mean 1 / ((1 - c)(1 - p)) = 2.105, P(length 1) = (1 - c)(1 - p). The
     * chain inflates the standard error of the mean loss by sqrt((1 + l) / (1 - l)), l = 0.5. */
    double mbc, p1;
    double fc = loss_fraction("loss 5% 50%", 6, &mbc, &p1);
    assert_true(fabs(fc - 0.05) < 1.6e-3);
    assert_true(fabs(mbc - 1.0 / (0.5 * 0.95)) < 0.04);
    assert_true(fabs(p1 - 0.5 * 0.95) < 0.015);
}

static void test_loss_gilbert_elliott(void **state)
{
    (void)state;
    double mb, p1;
    /* p = 1 %, r = 30 %, 1-h = 100 %, 1-k = 0 %: mean loss p / (p + r) = 3.226 %, loss bursts are
     * the Bad-state sojourns, geometric with mean 1 / r = 3.333 and P(length 1) = r. Standard
     * errors: loss 4.1e-4 (Markov-inflated), mean burst 0.028, P(1) 0.0047. */
    double f = loss_fraction("loss gemodel 1% 30% 100% 0%", 7, &mb, &p1);
    assert_true(fabs(f - 0.01 / 0.31) < 1.7e-3);
    assert_true(fabs(mb - 1.0 / 0.30) < 0.12);
    assert_true(fabs(p1 - 0.30) < 0.02);
    drths_impair_spec_t s;
    parse_ok("loss gemodel 1% 30% 100% 0%", &s);
    assert_true(fabs(drths_impair_spec_mean_loss(&s) - 0.01 / 0.31) < 1e-12);
    /* Good-state loss 1-k and partial Bad-state loss 1-h: mean (p (1-h) + r (1-k)) / (p + r). */
    f = loss_fraction("loss gemodel 2% 20% 50% 1%", 8, NULL, NULL);
    double expect = (0.02 * 0.5 + 0.2 * 0.01) / 0.22;
    assert_true(fabs(f - expect) < 1.5e-3);
}

static void test_duplicate(void **state)
{
    (void)state;
    drths_impair_spec_t s;
    drths_impair_t im;
    parse_ok("delay 40ms 5ms duplicate 1% loss 2%", &s);
    assert_int_equal(drths_impair_init(&im, &s, 9), 0);
    long dup = 0, copies = 0, lost = 0, two = 0;
    for (int i = 0; i < N; i++) {
        drths_impair_decision_t d;
        int64_t now = (int64_t)i * 200000;
        unsigned c = drths_impair_decide(&im, now, 100, &d);
        assert_int_equal(1 + d.duplicated, c + d.lost_random);
        dup += d.duplicated;
        copies += c;
        lost += d.lost_random;
        two += c == 2;
        for (unsigned k = 0; k < c; k++)
            assert_true(d.send_ns[k] >= now + 35000000 && d.send_ns[k] < now + 45000000);
    }
    /* Duplicates: 1 % +- 4e-4. Losses are drawn once per copy: 2 % of 1.01 N. Both copies
     * survive with probability 0.01 * 0.98^2. */
    assert_true(fabs((double)dup / N - 0.01) < 4e-4);
    assert_true(fabs((double)lost / (N + dup) - 0.02) < 6e-4);
    assert_true(fabs((double)two / N - 0.01 * 0.98 * 0.98) < 4e-4);
    assert_int_equal(copies + lost, N + dup);
}

static double reorder_fraction(const char *text)
{
    drths_impair_spec_t s;
    drths_impair_t im;
    parse_ok(text, &s);
    assert_int_equal(drths_impair_init(&im, &s, 10), 0);
    long re = 0;
    for (int i = 0; i < N; i++) {
        drths_impair_decision_t d;
        int64_t now = (int64_t)i * 200000;
        drths_impair_decide(&im, now, 100, &d);
        if (d.reordered[0]) {
            assert_int_equal(d.send_ns[0], now);
            re++;
        } else {
            assert_int_equal(d.send_ns[0], now + 10000000);
        }
    }
    return (double)re / N;
}

static void test_reorder(void **state)
{
    (void)state;
    /* Without gap every packet is sent at once with probability P. */
    assert_true(fabs(reorder_fraction("delay 10ms reorder 25%") - 0.25) < 2e-3);
    /* gap 5: four delayed packets, then geometric trials (mean 4) ending in the reordered one:
     * one in eight. */
    assert_true(fabs(reorder_fraction("delay 10ms reorder 25% gap 5") - 0.125) < 2e-3);
}

static void test_jitter_reorders_unless_rate(void **state)
{
    (void)state;
    const char *texts[] = {"delay 40ms 5ms", "delay 40ms 5ms rate 100mbit"};
    long inversions[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        drths_impair_spec_t s;
        drths_impair_t im;
        parse_ok(texts[t], &s);
        assert_int_equal(drths_impair_init(&im, &s, 11), 0);
        int64_t prev = INT64_MIN;
        for (int i = 0; i < 100000; i++) {
            drths_impair_decision_t d;
            drths_impair_decide(&im, (int64_t)i * 200000, 100, &d);
            inversions[t] += d.send_ns[0] < prev;
            prev = d.send_ns[0];
        }
    }
    /* Uniform +-5 ms, arrivals 0.2 ms apart: a packet overtakes its predecessor when the
     * difference of two delays (triangular on +-10 ms) exceeds 0.2 ms, probability
     * 9.8^2 / 200 = 0.4802. With a rate none does. */
    assert_true(labs(inversions[0] - 48020) < 700);
    assert_int_equal(inversions[1], 0);
}

static void test_rate(void **state)
{
    (void)state;
    drths_impair_spec_t s;
    drths_impair_t im;
    drths_impair_decision_t d;
    /* 1 Mbit/s: 125 bytes take 1 ms. A burst at t = 0 leaves at 1, 2, 3 ... ms. */
    parse_ok("rate 1mbit", &s);
    assert_int_equal(drths_impair_init(&im, &s, 12), 0);
    for (int i = 1; i <= 10; i++) {
        drths_impair_decide(&im, 0, 125, &d);
        assert_int_equal(d.send_ns[0], (int64_t)i * 1000000);
    }
    /* After the queue drained, a packet leaves one serialisation time after arriving. */
    drths_impair_decide(&im, 50000000, 125, &d);
    assert_int_equal(d.send_ns[0], 51000000);
    /* Delay and rate: the packet waits for its delay or the queue, whichever is longer. */
    parse_ok("delay 5ms rate 1mbit 25", &s); /* 25 bytes overhead: 150 bytes = 1.2 ms */
    assert_int_equal(drths_impair_init(&im, &s, 12), 0);
    drths_impair_decide(&im, 0, 125, &d);
    assert_int_equal(d.send_ns[0], 6200000);
    drths_impair_decide(&im, 0, 125, &d);
    assert_int_equal(d.send_ns[0], 7400000);
    drths_impair_decide(&im, 100000000, 125, &d);
    assert_int_equal(d.send_ns[0], 106200000);
    /* Cells: 150 bytes in 64-byte cells of 4 bytes overhead = 3 * 68 bytes = 1.632 ms. */
    parse_ok("rate 1mbit 25 64 4", &s);
    assert_int_equal(drths_impair_init(&im, &s, 12), 0);
    drths_impair_decide(&im, 0, 125, &d);
    assert_int_equal(d.send_ns[0], 1632000);
}

static void test_corrupt(void **state)
{
    (void)state;
    drths_impair_spec_t s;
    drths_impair_t im;
    parse_ok("corrupt 10%", &s);
    assert_int_equal(drths_impair_init(&im, &s, 13), 0);
    long hits = 0;
    for (int i = 0; i < 100000; i++) {
        drths_impair_decision_t d;
        drths_impair_decide(&im, i, 37, &d);
        if (d.corrupt_bit[0] >= 0) {
            assert_true(d.corrupt_bit[0] < 37 * 8);
            hits++;
        }
    }
    assert_true(labs(hits - 10000) < 400);
}

static void test_reproducible_and_change(void **state)
{
    (void)state;
    drths_impair_spec_t s, s70;
    parse_ok("delay 40ms 5ms distribution normal loss 1% duplicate 0.1% reorder 1%", &s);
    parse_ok("delay 70ms 5ms distribution normal loss 1% duplicate 0.1% reorder 1%", &s70);
    drths_impair_t a, b, c;
    assert_int_equal(drths_impair_init(&a, &s, 42), 0);
    assert_int_equal(drths_impair_init(&b, &s, 42), 0);
    assert_int_equal(drths_impair_init(&c, &s, 43), 0);
    int differ = 0;
    double sum_after = 0;
    int n_after = 0;
    for (int i = 0; i < 200000; i++) {
        if (i == 100000) {
            assert_int_equal(drths_impair_set_spec(&a, &s70), 0);
            assert_int_equal(drths_impair_set_spec(&b, &s70), 0);
            assert_int_equal(drths_impair_set_spec(&c, &s70), 0);
        }
        drths_impair_decision_t da, db, dc;
        int64_t now = (int64_t)i * 200000;
        drths_impair_decide(&a, now, 64, &da);
        drths_impair_decide(&b, now, 64, &db);
        drths_impair_decide(&c, now, 64, &dc);
        assert_memory_equal(&da, &db, sizeof da);
        differ += memcmp(&da, &dc, sizeof da) != 0;
        if (i >= 100000 && da.copies && !da.reordered[0]) {
            sum_after += (double)(da.send_ns[0] - now);
            n_after++;
        }
    }
    assert_true(differ > 190000);
    assert_true(fabs(sum_after / n_after - 70 * MS) < 50e3);
    /* An invalid spec is refused and leaves the model unchanged. */
    drths_impair_spec_t badspec = s;
    badspec.loss = 2.0;
    assert_int_equal(drths_impair_set_spec(&a, &badspec), -EINVAL);
    assert_int_equal(a.spec.delay_ns, 70000000);
    drths_impair_t z;
    assert_int_equal(drths_impair_init(&z, &badspec, 1), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_example),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_format_roundtrip),
        cmocka_unit_test(test_delay_uniform),
        cmocka_unit_test(test_delay_normal),
        cmocka_unit_test(test_delay_pareto),
        cmocka_unit_test(test_delay_correlation),
        cmocka_unit_test(test_loss_random),
        cmocka_unit_test(test_loss_gilbert_elliott),
        cmocka_unit_test(test_duplicate),
        cmocka_unit_test(test_reorder),
        cmocka_unit_test(test_jitter_reorders_unless_rate),
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_reproducible_and_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
