#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <stdint.h>

#include "common/platform/rtclock.h"

static void test_timespec(void **state)
{
    (void)state;
    struct timespec ts = drths_ns_to_timespec(INT64_C(1500000000));
    assert_int_equal(ts.tv_sec, 1);
    assert_int_equal(ts.tv_nsec, 500000000);
    ts = drths_ns_to_timespec(-1);
    assert_int_equal(ts.tv_sec, -1);
    assert_int_equal(ts.tv_nsec, 999999999);
    ts = drths_ns_to_timespec(-DRTHS_NS_PER_S);
    assert_int_equal(ts.tv_sec, -1);
    assert_int_equal(ts.tv_nsec, 0);
    const int64_t v[] = {0, 1, 999999999, 1000000000, INT64_C(9000000000000000123), -7,
                         -INT64_C(2000000001)};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ts = drths_ns_to_timespec(v[i]);
        assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000);
        assert_true(drths_timespec_to_ns(&ts) == v[i]);
    }
}

/* A deadline in the past returns at once (no sleeping in tests), and the clock is monotonic. */
static void test_real_clock_past_deadline(void **state)
{
    (void)state;
    int64_t a = drths_now_ns();
    assert_int_equal(drths_sleep_until_ns(a - 1000000), 0);
    assert_int_equal(drths_sleep_until_ns(0), 0);
    int64_t b = drths_now_ns();
    assert_true(b >= a);

    /* The real ticker, started 10 periods in the past: tick 0 comes at once and is late by at
     * least 10 periods. */
    drths_ticker_t t;
    assert_int_equal(drths_ticker_init(&t, 200000, b - 2000000, 50000, NULL, NULL, NULL), 0);
    uint64_t k = 99;
    assert_int_equal(drths_ticker_wait(&t, &k), 0);
    assert_int_equal(k, 0);
    assert_true(t.lateness_ns >= 2000000);
    assert_int_equal(t.late_ticks, 1);
}

/* Virtual time: sleeping to a future deadline advances the fake clock to it plus a scripted
 * wake-up latency; a deadline already passed returns at once without advancing it. */
typedef struct fake {
    int64_t now;
    int64_t latency[64]; /* wake-up latency per sleep call that had to wait */
    int calls;
    int fail_call;       /* this call returns -EINVAL (or -1 for never) */
    int64_t read_cost;   /* ns each clock read advances the clock (0: reads are free) */
    int64_t reads;
} fake_t;

static int64_t fake_clock(void *ctx)
{
    fake_t *f = ctx;
    f->reads++;
    f->now += f->read_cost; /* reading the clock takes time (the spin needs that) */
    return f->now;
}

static int fake_sleep(void *ctx, int64_t t)
{
    fake_t *f = ctx;
    int call = f->calls++;
    if (call == f->fail_call)
        return -EINVAL;
    if (f->now < t)
        f->now = t + f->latency[call % 64];
    return 0;
}

static void test_ticker_virtual_stall(void **state)
{
    (void)state;
    const int64_t P = 200000, start = INT64_C(1000000000), work = 20000;
    fake_t f = {.now = 0, .fail_call = -1};
    for (int i = 0; i < 64; i++)
        f.latency[i] = 10000; /* 10 µs */
    f.latency[10] = 730000;   /* the thread wakes 730 µs late for tick 10 */
    drths_ticker_t t;
    assert_int_equal(drths_ticker_init(&t, P, start, 50000, fake_clock, fake_sleep, &f), 0);

    /* Lateness of ticks 0..19 by hand: 10 µs each, except that after the stall the loop (20 µs
     * of work per tick) catches up on ticks whose deadlines passed, each late by 180 µs less. */
    int64_t expect_us[20];
    for (int i = 0; i < 20; i++)
        expect_us[i] = 10;
    expect_us[10] = 730;
    expect_us[11] = 550;
    expect_us[12] = 370;
    expect_us[13] = 190;
    expect_us[14] = 10;

    for (uint64_t i = 0; i < 20; i++) {
        uint64_t k;
        assert_int_equal(drths_ticker_wait(&t, &k), 0);
        assert_int_equal(k, i); /* no index skipped */
        assert_int_equal(t.deadline_ns, start + (int64_t)i * P);
        assert_int_equal(t.lateness_ns, expect_us[i] * 1000);
        f.now += work;
    }
    assert_int_equal(t.ticks, 20);
    assert_int_equal(t.late_ticks, 4); /* 730, 550, 370, 190 µs exceed 50 µs */
    assert_int_equal(t.max_lateness_ns, 730000);
    /* One sleep call per tick; for ticks 11..14 it returned at once. */
    assert_int_equal(f.calls, 20);
    assert_int_equal(drths_ticker_deadline(&t, 20), start + 20 * P);
}

/* With a spin the sleep ends spin_ns early and its wake-up latency is absorbed before the
 * deadline: lateness is one clock read, not the sleep's latency. */
static void test_ticker_spin(void **state)
{
    (void)state;
    const int64_t P = 100000, start = INT64_C(1000000000);
    fake_t f = {.now = 0, .fail_call = -1, .read_cost = 50};
    for (int i = 0; i < 64; i++)
        f.latency[i] = 30000; /* the sleep wakes 30 µs late */
    f.latency[5] = 80000;     /* once 80 µs: more than the spin hides */
    drths_ticker_t t;
    assert_int_equal(drths_ticker_init(&t, P, start, 50000, fake_clock, fake_sleep, &f), 0);
    assert_int_equal(drths_ticker_set_spin(&t, -1), -EINVAL);
    assert_int_equal(drths_ticker_set_spin(&t, 40000), 0);
    for (uint64_t i = 0; i < 10; i++) {
        uint64_t k;
        int64_t reads = f.reads;
        assert_int_equal(drths_ticker_wait(&t, &k), 0);
        assert_int_equal(k, i);
        if (i == 5) {
            assert_int_equal(t.lateness_ns, 80000 - 40000 + 50);
            assert_int_equal(f.reads - reads, 1); /* past the deadline: no spinning */
        } else {
            assert_true(t.lateness_ns >= 0 && t.lateness_ns < 50);
            assert_int_equal(f.reads - reads, 10000 / 50); /* spun the last 10 µs */
        }
    }
    assert_int_equal(t.late_ticks, 0);
    /* drths-physical's default: spin 30 % of the period from 10 kHz on, sleep below. */
    assert_int_equal(drths_ticker_auto_spin_ns(200000), 0);
    assert_int_equal(drths_ticker_auto_spin_ns(100001), 0);
    assert_int_equal(drths_ticker_auto_spin_ns(100000), 30000);
    assert_int_equal(drths_ticker_auto_spin_ns(50000), 15000);
}

static void test_ticker_errors(void **state)
{
    (void)state;
    fake_t f = {.now = 0, .fail_call = 2};
    drths_ticker_t t;
    assert_int_equal(drths_ticker_init(&t, 0, 0, 0, fake_clock, fake_sleep, &f), -EINVAL);
    assert_int_equal(drths_ticker_init(&t, 100, 0, -1, fake_clock, fake_sleep, &f), -EINVAL);
    assert_int_equal(drths_ticker_init(&t, 100, 0, 0, fake_clock, NULL, &f), -EINVAL);
    assert_int_equal(drths_ticker_init(&t, 100, 0, 0, fake_clock, fake_sleep, &f), 0);
    uint64_t k;
    assert_int_equal(drths_ticker_wait(&t, &k), 0);
    assert_int_equal(drths_ticker_wait(&t, &k), 0);
    assert_int_equal(k, 1);
    /* A failing sleep consumes no tick: the next successful wait returns tick 2. */
    assert_int_equal(drths_ticker_wait(&t, &k), -EINVAL);
    assert_int_equal(k, 1);
    assert_int_equal(drths_ticker_wait(&t, &k), 0);
    assert_int_equal(k, 2);
    assert_int_equal(t.ticks, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timespec),
        cmocka_unit_test(test_real_clock_past_deadline),
        cmocka_unit_test(test_ticker_virtual_stall),
        cmocka_unit_test(test_ticker_spin),
        cmocka_unit_test(test_ticker_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
