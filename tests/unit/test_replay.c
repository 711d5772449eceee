#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "protocol/replay.h"

static drths_replay_result_t accept(drths_replay_t *w, uint64_t c)
{
    drths_replay_result_t r = drths_replay_check(w, c);
    if (r == DRTHS_REPLAY_OK)
        assert_int_equal(drths_replay_update(w, c), DRTHS_REPLAY_OK);
    return r;
}

static void test_in_order_and_duplicates(void **state)
{
    (void)state;
    drths_replay_t w;
    drths_replay_reset(&w);
    assert_int_equal(drths_replay_check(&w, 0), DRTHS_REPLAY_OUT_OF_RANGE);
    for (uint64_t c = 1; c <= 5000; c++)
        assert_int_equal(accept(&w, c), DRTHS_REPLAY_OK);
    assert_true(w.highest == 5000);
    /* Every counter still inside the window is a duplicate now; beyond it, too old. */
    for (uint64_t c = 5000 - DRTHS_REPLAY_WINDOW + 1; c <= 5000; c++)
        assert_int_equal(drths_replay_check(&w, c), DRTHS_REPLAY_DUPLICATE);
    assert_int_equal(drths_replay_check(&w, 5000 - DRTHS_REPLAY_WINDOW), DRTHS_REPLAY_TOO_OLD);
    assert_int_equal(drths_replay_check(&w, 1), DRTHS_REPLAY_TOO_OLD);
    assert_int_equal(drths_replay_update(&w, 4999), DRTHS_REPLAY_DUPLICATE);
}

static void test_check_does_not_record(void **state)
{
    (void)state;
    drths_replay_t w;
    drths_replay_reset(&w);
    assert_int_equal(drths_replay_check(&w, 10), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, 10), DRTHS_REPLAY_OK);
    assert_true(w.highest == 0);
    assert_int_equal(drths_replay_update(&w, 10), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, 10), DRTHS_REPLAY_DUPLICATE);
}

static void test_reordering_within_window(void **state)
{
    (void)state;
    drths_replay_t w;
    drths_replay_reset(&w);
    assert_int_equal(accept(&w, 2000), DRTHS_REPLAY_OK);
    /* Late arrivals anywhere in the window are accepted exactly once, in any order. */
    uint64_t late[] = {1999, 977, 1500, 1998, 1100, 1977, 1001};
    for (size_t i = 0; i < sizeof late / sizeof late[0]; i++) {
        assert_int_equal(accept(&w, late[i]), DRTHS_REPLAY_OK);
        assert_int_equal(drths_replay_check(&w, late[i]), DRTHS_REPLAY_DUPLICATE);
    }
    assert_int_equal(drths_replay_check(&w, 2000 - 1024), DRTHS_REPLAY_TOO_OLD);
    /* Jumping ahead by less than a window keeps the overlap: 977 becomes too old only when
     * highest passes 977 + 1024 = 2001. */
    assert_int_equal(accept(&w, 2001), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, 977), DRTHS_REPLAY_TOO_OLD);
    assert_int_equal(drths_replay_check(&w, 978), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, 1500), DRTHS_REPLAY_DUPLICATE);
    /* A gap larger than the window clears everything below. */
    assert_int_equal(accept(&w, 2001 + 5000), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, 2001 + 5000 - 1023), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, 2001 + 4000), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, 2001), DRTHS_REPLAY_TOO_OLD);
}

/* Against a brute-force model (a set of seen counters) for random traffic with reordering and
 * duplicates: the bitmap may not alias blocks when the window advances. */
static void test_against_model(void **state)
{
    (void)state;
    enum { N = 200000, MAXC = 4000000 };
    static uint8_t seen[MAXC + 2000];
    drths_replay_t w;
    drths_replay_reset(&w);
    uint64_t highest = 0, next = 1;
    srand(12345);
    long accepted = 0, dup = 0, old = 0;
    for (int i = 0; i < N && next < MAXC; i++) {
        uint64_t c;
        int r = rand() % 100;
        if (r < 60)
            c = next++;
        else if (r < 62)
            c = (next += (uint64_t)(rand() % 1500));
        else {
            uint64_t back = (uint64_t)(rand() % 1300);
            c = highest > back ? highest - back : 1;
        }
        drths_replay_result_t want;
        if (c > highest)
            want = DRTHS_REPLAY_OK;
        else if (highest - c >= DRTHS_REPLAY_WINDOW)
            want = DRTHS_REPLAY_TOO_OLD;
        else
            want = seen[c] ? DRTHS_REPLAY_DUPLICATE : DRTHS_REPLAY_OK;
        drths_replay_result_t got = accept(&w, c);
        assert_int_equal(got, want);
        if (got == DRTHS_REPLAY_OK) {
            seen[c] = 1;
            if (c > highest)
                highest = c;
            accepted++;
        } else if (got == DRTHS_REPLAY_DUPLICATE) {
            dup++;
        } else {
            old++;
        }
    }
    print_message("accepted %ld, duplicate %ld, too old %ld\n", accepted, dup, old);
    assert_true(accepted > 1000 && dup > 100 && old > 100);
}

/* Counters never wrap: the window refuses 0 and everything above DRTHS_REPLAY_COUNTER_MAX
 * (UINT64_MAX - 1024) and works normally right up to it. */
static void test_wrap_boundary(void **state)
{
    (void)state;
    const uint64_t max = DRTHS_REPLAY_COUNTER_MAX;
    assert_true(max == UINT64_MAX - 1024);
    drths_replay_t w;
    drths_replay_reset(&w);
    assert_int_equal(accept(&w, max - 2000), DRTHS_REPLAY_OK);
    for (uint64_t c = max - 10; c != max + 1; c++)
        assert_int_equal(accept(&w, c), DRTHS_REPLAY_OK);
    assert_true(w.highest == max);
    assert_int_equal(drths_replay_check(&w, max), DRTHS_REPLAY_DUPLICATE);
    assert_int_equal(accept(&w, max - 100), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, max - 1023), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, max - 1024), DRTHS_REPLAY_TOO_OLD);
    assert_int_equal(drths_replay_check(&w, max - 2000), DRTHS_REPLAY_TOO_OLD);
    /* The other side of the limit, including the values that would wrap to small numbers. */
    assert_int_equal(drths_replay_check(&w, max + 1), DRTHS_REPLAY_OUT_OF_RANGE);
    assert_int_equal(drths_replay_update(&w, max + 1), DRTHS_REPLAY_OUT_OF_RANGE);
    assert_int_equal(drths_replay_check(&w, UINT64_MAX), DRTHS_REPLAY_OUT_OF_RANGE);
    assert_int_equal(drths_replay_check(&w, 0), DRTHS_REPLAY_OUT_OF_RANGE);
    assert_int_equal(drths_replay_check(&w, 1), DRTHS_REPLAY_TOO_OLD);
    assert_true(w.highest == max);
    /* A fresh window accepts the largest counter directly (a jump of 2^64 - 1025). */
    drths_replay_reset(&w);
    assert_int_equal(accept(&w, max), DRTHS_REPLAY_OK);
    assert_int_equal(drths_replay_check(&w, max - 1023), DRTHS_REPLAY_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_and_duplicates),
        cmocka_unit_test(test_check_does_not_record),
        cmocka_unit_test(test_reordering_within_window),
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_wrap_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
