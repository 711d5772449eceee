#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>

#include "protocol/reorder.h"

/* A feedback sample: measured force and displacement of one channel, and the tick it is for. */
typedef struct fb {
    double force, disp;
    uint64_t tick;
} fb_t;

static fb_t mk(uint64_t t)
{
    fb_t f = {(double)(t % 1000) * 10.0, (double)(t % 1000) * 1e-4, t};
    return f;
}

static void test_init_errors(void **state)
{
    (void)state;
    drths_reorder_t rb;
    drths_error_t err;
    assert_int_equal(drths_reorder_init(&rb, 0, sizeof(fb_t), 0, &err), -EINVAL);
    assert_string_equal(err.msg, "feedback reorder buffer depth: must be > 0 ticks");
    drths_reorder_close(&rb);
    assert_int_equal(drths_reorder_init(&rb, 10, 0, 0, &err), -EINVAL);
    assert_string_equal(err.msg, "feedback reorder buffer sample size: must be > 0 bytes");
    drths_reorder_close(&rb);
}

static void test_order_gap_skip(void **state)
{
    (void)state;
    drths_reorder_t rb;
    assert_int_equal(drths_reorder_init(&rb, 10, sizeof(fb_t), 0, NULL), 0);
    fb_t f, out;
    uint64_t t;
    assert_int_equal(drths_reorder_take_next(&rb, &t, &out), -EAGAIN);
    /* Arrive 2, 0, 1, 4 (3 is lost), then a duplicate of 1. */
    const uint64_t order[] = {2, 0, 1, 4};
    for (int i = 0; i < 4; i++) {
        f = mk(order[i]);
        assert_int_equal(drths_reorder_put(&rb, order[i], &f), DRTHS_REORDER_STORED);
    }
    f = mk(1);
    assert_int_equal(drths_reorder_put(&rb, 1, &f), DRTHS_REORDER_DUPLICATE);
    for (uint64_t k = 0; k < 3; k++) {
        assert_int_equal(drths_reorder_take_next(&rb, &t, &out), 0);
        assert_int_equal(t, k);
        assert_int_equal(out.tick, k);
    }
    /* Tick 3 is not there: take waits (does not jump to 4). */
    assert_int_equal(drths_reorder_take_next(&rb, &t, &out), -EAGAIN);
    assert_int_equal(drths_reorder_next(&rb), 3);
    assert_true(drths_reorder_has(&rb, 4));
    uint64_t newest;
    assert_int_equal(drths_reorder_newest(&rb, &newest), 0);
    assert_int_equal(newest, 4);
    /* Deadline passes: skip 3. */
    assert_int_equal(drths_reorder_skip_next(&rb, &t), 0);
    assert_int_equal(t, 3);
    /* Skipping a tick that is present is refused. */
    assert_int_equal(drths_reorder_skip_next(&rb, &t), -EEXIST);
    assert_int_equal(drths_reorder_next(&rb), 4);
    assert_int_equal(drths_reorder_take_next(&rb, &t, &out), 0);
    assert_int_equal(t, 4);
    /* Tick 3 finally arrives, and an old duplicate of 2: both late. */
    f = mk(3);
    assert_int_equal(drths_reorder_put(&rb, 3, &f), DRTHS_REORDER_LATE);
    f = mk(2);
    assert_int_equal(drths_reorder_put(&rb, 2, &f), DRTHS_REORDER_LATE);
    /* Depth 10: next is 5, so 15 is too far and 14 fits. */
    f = mk(15);
    assert_int_equal(drths_reorder_put(&rb, 15, &f), DRTHS_REORDER_TOO_FAR);
    f = mk(14);
    assert_int_equal(drths_reorder_put(&rb, 14, &f), DRTHS_REORDER_STORED);

    const drths_playout_counters_t *c = &rb.pb.c;
    assert_int_equal(c->stored, 5);
    assert_int_equal(c->duplicates, 1);
    assert_int_equal(c->late, 2);
    assert_int_equal(c->too_far, 1);
    assert_int_equal(c->taken, 4);
    assert_int_equal(c->missing, 1);
    drths_reorder_close(&rb);
    drths_reorder_close(&rb);
}

/* Consumer: takes in order, and skips the next tick only when the newest stored tick is 8 past
 * it (a stand-in for the step deadline). */
typedef struct consumer {
    uint64_t expect, taken, skipped;
} consumer_t;

static void drain(drths_reorder_t *rb, consumer_t *c)
{
    for (;;) {
        uint64_t t, newest;
        fb_t out;
        if (drths_reorder_take_next(rb, &t, &out) == 0) {
            assert_true(t == c->expect);
            assert_true(out.tick == t);
            c->expect++;
            c->taken++;
        } else if (drths_reorder_newest(rb, &newest) == 0 && newest >= c->expect + 8) {
            assert_int_equal(drths_reorder_skip_next(rb, &t), 0);
            assert_true(t == c->expect);
            c->expect++;
            c->skipped++;
        } else {
            return;
        }
    }
}

/* Long run, 10-deep buffer: each tick's feedback is carried by R = 3 redundant datagrams, the
 * datagrams are shuffled within blocks of 6 and 1 in 7 is lost. Whatever arrives, the sequence
 * consumed is strictly increasing with no gaps, and every tick is either taken or counted
 * missing. */
static void run_long(uint64_t first)
{
    enum { DEPTH = 10, N = 30000, BLOCK = 6, R = 3 };
    drths_reorder_t rb;
    assert_int_equal(drths_reorder_init(&rb, DEPTH, sizeof(fb_t), first, NULL), 0);
    srand(11);
    consumer_t c = {.expect = first};
    uint64_t too_far = 0;
    for (uint64_t b = 0; b < N / BLOCK; b++) {
        uint64_t perm[BLOCK];
        for (int i = 0; i < BLOCK; i++)
            perm[i] = b * BLOCK + (uint64_t)i;
        for (int i = BLOCK - 1; i > 0; i--) {
            int j = rand() % (i + 1);
            uint64_t x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (int i = 0; i < BLOCK; i++) {
            uint64_t d = first + perm[i]; /* datagram sent at tick d carries d-R+1 .. d */
            if (rand() % 7 == 0)
                continue;
            for (uint64_t j = 0; j < R; j++) {
                if (d - j < first || d - j > d)
                    continue;
                fb_t f = mk(d - j);
                drths_reorder_result_t r = drths_reorder_put(&rb, d - j, &f);
                if (r == DRTHS_REORDER_TOO_FAR)
                    too_far++;
            }
            drain(&rb, &c);
        }
    }
    assert_true(c.taken + c.skipped == c.expect - first);
    assert_true(c.expect - first > N - 20);
    assert_int_equal(rb.pb.c.taken, c.taken);
    assert_int_equal(rb.pb.c.missing, c.skipped);
    assert_int_equal(rb.pb.c.too_far, too_far);
    /* Losing a tick needs all R = 3 of its datagrams lost (about 1 in 343). */
    assert_true(c.skipped < N / 100);
    print_message("first %llu: taken %llu, skipped %llu, duplicates %llu, late %llu, too far "
                  "%llu\n",
                  (unsigned long long)first, (unsigned long long)c.taken,
                  (unsigned long long)c.skipped, (unsigned long long)rb.pb.c.duplicates,
                  (unsigned long long)rb.pb.c.late, (unsigned long long)too_far);
    drths_reorder_close(&rb);
}

static void test_long_run(void **state)
{
    (void)state;
    run_long(0);
    run_long(((uint64_t)1 << 63) - 15000);
    run_long(UINT64_MAX - 30100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_order_gap_skip),
        cmocka_unit_test(test_long_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
