#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "protocol/playout.h"

#include "alloc_count.h"

/* A command sample as the actuator site would store it: one channel's displacement, velocity,
 * acceleration and the damper command. */
typedef struct sample {
    double x, v, a, cmd;
} sample_t;

static sample_t mk(uint64_t tick, int copy)
{
    sample_t s = {(double)(tick % 100000) * 1e-3, (double)copy, 0.5, 2.5};
    return s;
}

static void test_init_errors(void **state)
{
    (void)state;
    drths_playout_t pb;
    drths_error_t err;
    assert_int_equal(drths_playout_init(&pb, 0, sizeof(sample_t), 0, &err), -EINVAL);
    assert_string_equal(err.msg, "playout buffer capacity: must be > 0 ticks");
    drths_playout_close(&pb);
    assert_int_equal(drths_playout_init(&pb, 8, 0, 0, &err), -EINVAL);
    assert_string_equal(err.msg, "playout buffer sample size: must be > 0 bytes");
    drths_playout_close(&pb);
    drths_playout_close(&pb);
}

static void test_in_order_and_edges(void **state)
{
    (void)state;
    drths_playout_t pb;
    assert_int_equal(drths_playout_init(&pb, 8, sizeof(sample_t), 100, NULL), 0);
    uint64_t newest;
    assert_int_equal(drths_playout_newest(&pb, &newest), -ENOENT);
    for (uint64_t t = 100; t < 108; t++) {
        sample_t s = mk(t, 0);
        assert_int_equal(drths_playout_put(&pb, t, &s, 1000 + (int64_t)t), DRTHS_PLAYOUT_STORED);
    }
    sample_t s = mk(108, 0), out;
    assert_int_equal(drths_playout_put(&pb, 108, &s, 0), DRTHS_PLAYOUT_TOO_FAR);
    assert_int_equal(drths_playout_put(&pb, 99, &s, 0), DRTHS_PLAYOUT_LATE);
    assert_int_equal(drths_playout_newest(&pb, &newest), 0);
    assert_int_equal(newest, 107);

    int64_t lead = 0;
    assert_int_equal(drths_playout_take(&pb, 100, 5000, &out, &lead), 0);
    assert_true(out.x == mk(100, 0).x);
    assert_int_equal(lead, 5000 - 1100); /* deadline minus arrival */
    assert_int_equal(drths_playout_head(&pb), 101);
    /* Taking frees a slot: tick 108 now fits. */
    assert_int_equal(drths_playout_put(&pb, 108, &s, 0), DRTHS_PLAYOUT_STORED);
    assert_int_equal(drths_playout_take(&pb, 100, 0, &out, NULL), -ERANGE);

    /* Preview of the future: ticks 102..108 follow tick 101. */
    sample_t ahead[10];
    assert_int_equal(drths_playout_take(&pb, 101, 0, &out, NULL), 0);
    assert_int_equal(drths_playout_lookahead(&pb, 101, 10, ahead), 7);
    for (int j = 0; j < 7; j++)
        assert_true(ahead[j].x == mk(102 + (uint64_t)j, 0).x);
    assert_int_equal(drths_playout_lookahead(&pb, 101, 3, ahead), 3);

    assert_int_equal(pb.c.stored, 9);
    assert_int_equal(pb.c.too_far, 1);
    assert_int_equal(pb.c.late, 1);
    assert_int_equal(pb.c.taken, 2);
    assert_string_equal(drths_playout_result_name(DRTHS_PLAYOUT_TOO_FAR), "too far");
    drths_playout_close(&pb);
}

static void test_reordered_duplicated_late(void **state)
{
    (void)state;
    drths_playout_t pb;
    assert_int_equal(drths_playout_init(&pb, 16, sizeof(sample_t), 0, NULL), 0);
    const uint64_t order[] = {3, 1, 0, 2, 6, 5};
    for (size_t i = 0; i < 6; i++) {
        sample_t s = mk(order[i], 0);
        assert_int_equal(drths_playout_put(&pb, order[i], &s, 0), DRTHS_PLAYOUT_STORED);
    }
    /* A later copy of tick 1 with different contents: the first copy wins. */
    sample_t s = mk(1, 1), out;
    assert_int_equal(drths_playout_put(&pb, 1, &s, 0), DRTHS_PLAYOUT_DUPLICATE);
    for (uint64_t t = 0; t < 4; t++) {
        assert_int_equal(drths_playout_take(&pb, t, 0, &out, NULL), 0);
        assert_true(out.x == mk(t, 0).x);
        assert_true(out.v == 0.0);
    }
    /* Tick 4 never came: missing at its tick, and late when it finally arrives. */
    assert_false(drths_playout_has(&pb, 4));
    assert_int_equal(drths_playout_lookahead(&pb, 3, 4, &out), 0); /* preview stops at the gap */
    assert_int_equal(drths_playout_take(&pb, 4, 0, &out, NULL), -ENOENT);
    s = mk(4, 0);
    assert_int_equal(drths_playout_put(&pb, 4, &s, 0), DRTHS_PLAYOUT_LATE);
    /* A duplicate of a tick already played is late, not a duplicate. */
    s = mk(2, 0);
    assert_int_equal(drths_playout_put(&pb, 2, &s, 0), DRTHS_PLAYOUT_LATE);
    /* Skipping: taking tick 6 directly jumps over tick 5, which is then gone. */
    assert_int_equal(drths_playout_take(&pb, 6, 0, &out, NULL), 0);
    assert_false(drths_playout_has(&pb, 5));
    assert_int_equal(pb.c.skipped, 1);
    assert_int_equal(pb.c.missing, 1);
    assert_int_equal(pb.c.duplicates, 1);
    assert_int_equal(pb.c.late, 2);
    assert_int_equal(pb.c.stored, 6);
    drths_playout_close(&pb);
}

/* A long run through a 300-slot buffer (not a power of two): each tick's command arrives 40
 * ticks early in 4 redundant copies (datagrams for t, t+1, t+2, t+3 each carry it), 1 datagram
 * in 10 is lost, and every 97th datagram arrives 45 ticks late. */
static void run_long(uint64_t first)
{
    enum { P = 300, LEAD = 40, R = 4, N = 20000 };
    drths_playout_t pb;
    assert_int_equal(drths_playout_init(&pb, P, sizeof(sample_t), first, NULL), 0);
    uint64_t stored_ref = 0, dup_ref = 0, late_ref = 0, missing = 0;
    /* The commands for the first LEAD ticks were sent before the loop started. */
    for (uint64_t k = first; k < first + LEAD; k++) {
        sample_t s = mk(k, 0);
        int64_t sent = (int64_t)(k - first) - LEAD;
        assert_int_equal(drths_playout_put(&pb, k, &s, sent), DRTHS_PLAYOUT_STORED);
        stored_ref++;
    }
    for (uint64_t i = 0; i < N; i++) {
        uint64_t t = first + i;
        /* The datagram sent for tick t + LEAD carries ticks t+LEAD-R+1 .. t+LEAD. */
        uint64_t d = t + LEAD;
        int lost = (d % 10) == 3;
        int delayed = (d % 97) == 0;
        if (!lost && !delayed) {
            for (uint64_t j = 0; j < R; j++) {
                uint64_t k = d - j;
                if (k < first)
                    continue;
                sample_t s = mk(k, (int)j);
                drths_playout_result_t r = drths_playout_put(&pb, k, &s, (int64_t)i);
                if (r == DRTHS_PLAYOUT_STORED)
                    stored_ref++;
                else if (r == DRTHS_PLAYOUT_DUPLICATE)
                    dup_ref++;
                else
                    fail_msg("tick %llu: unexpected %s", (unsigned long long)k,
                             drths_playout_result_name(r));
            }
        }
        if (i >= 45 && ((t + LEAD - 45) % 97) == 0) {
            /* The delayed datagram for tick t - 5 arrives now, after its ticks were played. */
            sample_t s = mk(t - 5, 0);
            assert_int_equal(drths_playout_put(&pb, t - 5, &s, (int64_t)i), DRTHS_PLAYOUT_LATE);
            late_ref++;
        }
        sample_t out;
        int64_t lead;
        int r = drths_playout_take(&pb, t, (int64_t)i, &out, &lead);
        if (r == 0) {
            assert_true(out.x == mk(t, 0).x);
            /* The first copy arrives LEAD ticks early, or LEAD-1 if its datagram was lost. */
            assert_true(lead == LEAD || lead == LEAD - 1 || lead == LEAD - 2);
        } else {
            missing++;
        }
        /* Preview: ticks t+1 .. t+LEAD are buffered, except the newest one or two when their
         * datagrams were lost. */
        sample_t ahead[LEAD];
        size_t n = drths_playout_lookahead(&pb, t, LEAD, ahead);
        if (!lost && !delayed) {
            assert_int_equal(n, LEAD);
            assert_true(ahead[LEAD - 1].x == mk(t + LEAD, 0).x);
        } else {
            assert_true(n >= LEAD - 2 && n < LEAD);
        }
    }
    /* With R = 4 an isolated loss or delay is repaired by the next datagram: nothing missing. */
    assert_int_equal(missing, 0);
    assert_int_equal(pb.c.missing, 0);
    assert_int_equal(pb.c.taken, N);
    assert_int_equal(pb.c.stored, stored_ref);
    assert_int_equal(pb.c.duplicates, dup_ref);
    assert_int_equal(pb.c.late, late_ref);
    assert_int_equal(pb.c.too_far, 0);
    assert_true(stored_ref >= N);
    print_message("first tick %llu: stored %llu, duplicates %llu, late %llu\n",
                  (unsigned long long)first, (unsigned long long)stored_ref,
                  (unsigned long long)dup_ref, (unsigned long long)late_ref);
    drths_playout_close(&pb);
}

static void test_long_run_wraps(void **state)
{
    (void)state;
    run_long(0);
    run_long(((uint64_t)1 << 63) - 7000); /* crosses 2^63 */
    run_long(UINT64_MAX - 20100);         /* ends 100 ticks below the top */
}

static void test_near_top_of_range(void **state)
{
    (void)state;
    drths_playout_t pb;
    const uint64_t top = UINT64_MAX;
    assert_int_equal(drths_playout_init(&pb, 8, sizeof(sample_t), top - 10, NULL), 0);
    sample_t s = mk(0, 0), out;
    assert_int_equal(drths_playout_put(&pb, top - 3, &s, 0), DRTHS_PLAYOUT_STORED);
    assert_int_equal(drths_playout_put(&pb, top - 2, &s, 0), DRTHS_PLAYOUT_TOO_FAR);
    assert_int_equal(drths_playout_put(&pb, top, &s, 0), DRTHS_PLAYOUT_TOO_FAR);
    assert_int_equal(drths_playout_put(&pb, 0, &s, 0), DRTHS_PLAYOUT_LATE); /* no wrap to 0 */
    assert_int_equal(drths_playout_take(&pb, top - 4, 0, &out, NULL), -ENOENT);
    assert_int_equal(pb.c.skipped, 6);
    assert_int_equal(drths_playout_put(&pb, top - 1, &s, 0), DRTHS_PLAYOUT_STORED);
    assert_int_equal(drths_playout_lookahead(&pb, top - 4, 8, &out), 1);
    assert_int_equal(drths_playout_take(&pb, top - 3, 0, &out, NULL), 0);
    assert_int_equal(drths_playout_take(&pb, top - 1, 0, &out, NULL), 0);
    sample_t big[4];
    assert_int_equal(drths_playout_lookahead(&pb, top - 1, 4, big), 0); /* would wrap */
    assert_int_equal(drths_playout_take(&pb, top, 0, &out, NULL), -ERANGE);

    drths_playout_reset(&pb, 5);
    assert_int_equal(drths_playout_head(&pb), 5);
    uint64_t newest;
    assert_int_equal(drths_playout_newest(&pb, &newest), -ENOENT);
    assert_int_equal(drths_playout_take(&pb, 5, 0, &out, NULL), -ENOENT);
    drths_playout_close(&pb);
}

static void test_no_allocation_per_tick(void **state)
{
    (void)state;
    if (!COUNT_ALLOCS)
        skip(); /* a sanitizer's allocator: nothing to count */
    drths_playout_t pb;
    long at_start = alloc_count;
    assert_int_equal(drths_playout_init(&pb, 300, sizeof(sample_t), 0, NULL), 0);
    long before = alloc_count;
    assert_true(before > at_start); /* the counter sees init's allocations */
    uint64_t stored = 0, taken = 0, full_preview = 0;
    for (uint64_t t = 0; t < 100000; t++) {
        /* Each tick: the command for t + 40 and a redundant copy of t + 39. */
        sample_t s = mk(t + 40, 0), out, ahead[40];
        stored += drths_playout_put(&pb, t + 40, &s, 0) == DRTHS_PLAYOUT_STORED;
        stored += drths_playout_put(&pb, t + 39, &s, 0) == DRTHS_PLAYOUT_STORED;
        taken += drths_playout_take(&pb, t, 0, &out, NULL) == 0;
        full_preview += drths_playout_lookahead(&pb, t, 40, ahead) == 40;
    }
    long during = alloc_count - before;
    drths_playout_close(&pb);
    assert_int_equal(during, 0);
    /* Ticks 39 .. 100039 were stored once; ticks 0..38 never sent, so taken from 39 on, and the
     * full 40-tick preview exists from tick 38 on. */
    assert_int_equal(stored, 100001);
    assert_int_equal(taken, 100000 - 39);
    assert_int_equal(full_preview, 100000 - 38);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_in_order_and_edges),
        cmocka_unit_test(test_reordered_duplicated_late),
        cmocka_unit_test(test_long_run_wraps),
        cmocka_unit_test(test_near_top_of_range),
        cmocka_unit_test(test_no_allocation_per_tick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
