/* Tests of the space held for a run (common/platform/reserve.c): the reserve file holds its
 * blocks without data, gives them back piece by piece and at the end; more than the filesystem
 * has is refused with a sentence naming the folder, the space needed and the space free, and
 * nothing is left behind. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/platform/reserve.h"

static char dir[] = "/tmp/drths-test-reserve-XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(dir);
}

static void test_hold_take_release(void **state)
{
    (void)state;
    drths_reserve_t r;
    drths_error_t err;
    const uint64_t mb = 1 << 20;
    assert_int_equal(drths_reserve_open(&r, dir, 4 * mb, "four", &err), 0);
    assert_int_equal(r.bytes, 4 * mb);
    struct stat st;
    if (!r.held) {
        /* This filesystem has no fallocate: only the check was made, and no file is left. */
        assert_int_equal(stat(r.path, &st), -1);
        drths_reserve_release(&r);
        skip();
    }
    assert_int_equal(stat(r.path, &st), 0);
    assert_true((uint64_t)st.st_blocks * 512 >= 4 * mb);
    assert_int_equal(drths_reserve_take(&r, 3 * mb), 0);
    assert_int_equal(r.bytes, mb);
    assert_int_equal(stat(r.path, &st), 0);
    assert_int_equal((uint64_t)st.st_size, mb);
    assert_true((uint64_t)st.st_blocks * 512 < 2 * mb);
    /* More than is left takes what is left. */
    assert_int_equal(drths_reserve_take(&r, 5 * mb), 0);
    assert_int_equal(r.bytes, 0);
    drths_reserve_release(&r);
    assert_int_equal(stat(r.path, &st), -1);
    drths_reserve_release(&r); /* safe twice */
}

static void test_refused(void **state)
{
    (void)state;
    drths_reserve_t r;
    drths_error_t err;
    memset(&err, 0, sizeof err);
    uint64_t free_b = drths_reserve_free_bytes(dir);
    assert_true(free_b > 0);
    /* A petabyte more than the filesystem has. */
    uint64_t want = free_b + ((uint64_t)1 << 50);
    assert_int_equal(drths_reserve_open(&r, dir, want, "a.bin 1 MB", &err), -ENOSPC);
    assert_non_null(strstr(err.msg, "not enough space in "));
    assert_non_null(strstr(err.msg, dir));
    assert_non_null(strstr(err.msg, "(a.bin 1 MB)"));
    assert_non_null(strstr(err.msg, " MB free"));
    char needs[64];
    snprintf(needs, sizeof needs, "it needs %.1f MB", (double)want / 1e6);
    assert_non_null(strstr(err.msg, needs));
    struct stat st;
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, DRTHS_RESERVE_NAME);
    assert_int_equal(stat(path, &st), -1);
    drths_reserve_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hold_take_release),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
