/* The numerical site's step timing (site-numerical/steptime.c): the cost of a step from its
 * start to its last COMMAND, the lateness of its start against the run's earliest offset, the
 * steps later than dt/2, and the bad dt refused. Times are made up, no clock is read. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "site-numerical/steptime.h"

#define DT 200000 /* ns: 5 kHz */
#define US 1000

/* A step of n links starting `late` ns after its due time base + step dt, each COMMAND sent
 * `each` ns after the one before. */
static void step(drths_steptime_t *t, int64_t base, int64_t k, int64_t late, int links,
                 int64_t each)
{
    int64_t now = base + k * DT + late;
    drths_steptime_start(t, k, now);
    for (int i = 0; i < links; i++) {
        now += each;
        drths_steptime_sent(t, now);
    }
}

/* 1000 steps on time with one link (10 us each); the first step 20 us late, one step 300 us
 * late, and one of 8 links 5 us apart (40 us) closed by the next step's start, not by an idle
 * poll. Lateness counts from the earliest start, so the on-time steps are 0, not -20 us. */
static void test_figures(void **state)
{
    (void)state;
    drths_steptime_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_steptime_init(&t, DT, &err), 0);
    const int64_t base = 123456789;
    step(&t, base, 1, 20 * US, 1, 10 * US);
    drths_steptime_idle(&t);
    for (int64_t k = 2; k <= 1000; k++) {
        step(&t, base, k, k == 500 ? 300 * US : 0, 1, 10 * US);
        drths_steptime_idle(&t);
        drths_steptime_idle(&t); /* a second idle poll counts nothing more */
    }
    step(&t, base, 1001, 0, 8, 5 * US);
    step(&t, base, 1002, 0, 1, 10 * US); /* closes 1001; itself still open */
    drths_steptime_summary_t s;
    drths_steptime_summary(&t, &s);
    assert_int_equal(s.steps, 1001);
    /* Quantiles are the upper edge of their bin (100 ns for compute, 1 us for lateness); the
     * maxima are exact. */
    assert_true(s.compute_p50 >= 10 * US && s.compute_p50 <= 10 * US + 100);
    assert_int_equal(s.compute_max, 40 * US);
    assert_true(s.late_p50 >= 0 && s.late_p50 <= 1 * US);
    assert_int_equal(s.late_max, 300 * US);
    assert_int_equal(s.later_than_half_dt, 1);
    /* The 20 us step lies in the top 0.1 %, with the 300 us one. */
    assert_true(s.late_p999 >= 20 * US && s.late_p999 <= 21 * US);
    drths_steptime_close(&t);
    drths_steptime_close(&t); /* safe twice */
}

/* Steps that start earlier than the first: the minimum moves down with them. */
static void test_earlier_than_the_first(void **state)
{
    (void)state;
    drths_steptime_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_steptime_init(&t, DT, &err), 0);
    step(&t, 0, 10, 5000 * US, 1, 10 * US); /* 5 ms late: the start-up */
    for (int64_t k = 11; k < 100; k++)
        step(&t, 0, k, 0, 1, 10 * US);
    drths_steptime_idle(&t);
    drths_steptime_summary_t s;
    drths_steptime_summary(&t, &s);
    assert_int_equal(s.steps, 90);
    assert_true(s.late_p50 >= 0 && s.late_p50 <= 1 * US);
    assert_int_equal(s.late_max, 5000 * US);
    assert_int_equal(s.later_than_half_dt, 1);
    drths_steptime_close(&t);
}

/* Nothing measured: zeros. A dt that is not positive is refused with a sentence. */
static void test_empty_and_bad_dt(void **state)
{
    (void)state;
    drths_steptime_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_steptime_init(&t, DT, &err), 0);
    drths_steptime_summary_t s;
    drths_steptime_summary(&t, &s);
    assert_int_equal(s.steps, 0);
    assert_int_equal(s.late_max, 0);
    drths_steptime_close(&t);
    assert_int_equal(drths_steptime_init(&t, 0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "dt 0 ns is not positive"));
    drths_steptime_close(&t); /* nothing left to free */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures),
        cmocka_unit_test(test_earlier_than_the_first),
        cmocka_unit_test(test_empty_and_bad_dt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
