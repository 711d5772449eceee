/* The adaptive compensator's factors in drths-report (common/platform/adaptreport.c): a
 * summary.json whose theta3 sat at its bound on 99 % of the run is flagged, one at 10 % or
 * less is not; a summary without tracking.adaptive gives nothing; a figure missing or out of
 * range and a text that is not JSON are refused by name; the run range comes from
 * physical.csv's adaptive_thetaK; the printed lines and the JSON say the same. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/platform/adaptreport.h"

/* A summary with theta0 at a bound for fraction f0 (of 300000 ticks) and theta3 for 99 %. */
static int summary(char *buf, size_t cap, const char *bounds_from, double f0, const char *extra)
{
    return snprintf(
        buf, cap,
        "{\"kind\": \"physical\", \"links\": [{\"site\": \"a\", \"L\": 3}], \"ok\": true,\n"
        " \"tracking\": {\"compensation\": \"adaptive\", \"adaptive\": {\n"
        "  \"bounds_from\": \"%s\", \"observed_ticks\": 300000, \"updates\": 299000,\n"
        "  \"theta0\": {\"min\": 0.57, \"max\": 1.79, \"final\": 1.2, \"at_bound_ticks\": %ld,"
        " \"at_bound_fraction\": %.17g},\n"
        "  \"theta1\": {\"min\": 0.14, \"max\": 7.1, \"final\": 1.5, \"at_bound_ticks\": 0,"
        " \"at_bound_fraction\": 0},\n"
        "  \"theta2\": {\"min\": 0.036, \"max\": 29, \"final\": 2, \"at_bound_ticks\": 0,"
        " \"at_bound_fraction\": 0.0},\n"
        "  \"theta3\": {\"min\": 0.25, \"max\": 4, \"final\": 4, \"at_bound_ticks\": 297000,"
        " \"at_bound_fraction\": 0.99%s}}}}\n",
        bounds_from, (long)(f0 * 300000), f0, extra);
}

static int read_text(drths_adaptive_report_t *r, const char *text, drths_error_t *err)
{
    return drths_adaptive_report_read_summary(r, text, strlen(text), "/x/summary.json", err);
}

static void test_flagged_at_99_percent(void **state)
{
    (void)state;
    char text[2048];
    summary(text, sizeof text, "adaptive_range", 0.10, "");
    drths_adaptive_report_t r;
    drths_error_t err = {{0}};
    assert_int_equal(read_text(&r, text, &err), 0);
    assert_true(r.present);
    assert_string_equal(r.bounds_from, "adaptive_range");
    assert_int_equal(r.observed_ticks, 300000);
    assert_int_equal(r.flagged, 1);
    assert_true(r.f[3].flagged);
    assert_false(r.f[0].flagged); /* exactly 10 % is not more than 10 % */
    assert_int_equal(r.f[3].at_bound_ticks, 297000);
    assert_true(r.f[3].upper == 4.0);
    assert_true(r.f[2].lower == 0.036);
    assert_true(r.f[1].final == 1.5);
    assert_true(isnan(r.f[3].run_min)); /* no record yet */
}

static void test_nothing_without_adaptive(void **state)
{
    (void)state;
    const char *text = "{\"kind\": \"numerical\", \"tracking\": {\"compensation\": \"none\"},"
                       " \"adaptive\": {\"theta0\": {\"min\": 1}}}";
    drths_adaptive_report_t r;
    drths_error_t err = {{0}};
    assert_int_equal(read_text(&r, text, &err), 0);
    assert_false(r.present);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    drths_adaptive_report_print(f, &r);
    fclose(f);
    assert_int_equal(len, 0);
    free(out);
}

static void test_refused_by_name(void **state)
{
    (void)state;
    char text[2048];
    drths_adaptive_report_t r;
    drths_error_t err = {{0}};
    /* A figure missing: theta3's at_bound_fraction written as null (NaN). */
    summary(text, sizeof text, "adaptive_range", 0.0, "");
    char *p = strstr(text, "\"at_bound_fraction\": 0.99");
    assert_non_null(p);
    memcpy(p + strlen("\"at_bound_fraction\": "), "null", 4);
    assert_int_equal(read_text(&r, text, &err), -EINVAL);
    assert_false(r.present);
    assert_non_null(strstr(err.msg, "/x/summary.json: tracking.adaptive.theta3 has no number "
                                    "at_bound_fraction"));
    /* A fraction above 1. */
    summary(text, sizeof text, "adaptive_range", 1.5, "");
    assert_int_equal(read_text(&r, text, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "theta0: at_bound_fraction is not between 0 and 1"));
    /* Cut short: not JSON, with where. */
    summary(text, sizeof text, "adaptive_range", 0.0, "");
    text[strlen(text) / 2] = '\0';
    assert_int_equal(read_text(&r, text, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "/x/summary.json: not JSON at byte"));
    assert_false(r.present);
    /* Bytes after the value. */
    assert_int_equal(read_text(&r, "{} x", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "bytes after the JSON value"));
}

static void test_record_range_and_output(void **state)
{
    (void)state;
    char text[2048];
    summary(text, sizeof text, "adaptive_bound", 0.0, "");
    drths_adaptive_report_t r;
    drths_error_t err = {{0}};
    assert_int_equal(read_text(&r, text, &err), 0);

    char path[64] = "/tmp/drths-test-adaptreport-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fprintf(f, "tick,adaptive_theta0,adaptive_theta3\n");
    for (int i = 0; i < 100; i++)
        fprintf(f, "%d,%s,%.17g\n", i, i == 50 ? "nan" : "1.25", i < 10 ? 1.0 + 0.3 * i : 4.0);
    fclose(f);
    drths_csv_table_t t;
    assert_int_equal(drths_csv_read(&t, path, &err), 0);
    unlink(path);
    drths_adaptive_report_add_record(&r, &t);
    drths_csv_close(&t);
    assert_true(r.f[0].run_min == 1.25);
    assert_true(r.f[0].run_max == 1.25);
    assert_true(r.f[3].run_min == 1.0);
    assert_true(r.f[3].run_max == 4.0);
    assert_true(isnan(r.f[1].run_min)); /* no column */

    char *out = NULL;
    size_t len = 0;
    f = open_memstream(&out, &len);
    drths_adaptive_report_print(f, &r);
    fclose(f);
    assert_non_null(strstr(out, "bounds from actuator.adaptive_bound"));
    assert_non_null(strstr(out, "  theta3           1          4          4       0.25          4"
                                "    99.00 %  AT BOUND\n"));
    assert_non_null(strstr(out, "  theta1           -          -        1.5       0.14        7.1"
                                "     0.00 %\n"));
    assert_non_null(strstr(out, "AT BOUND: theta3 sat at a bound on 99.00 % of the run (297000 of "
                                "300000 ticks, more than 10 %)"));
    assert_non_null(strstr(out, "the plant is outside actuator.adaptive_bound"));
    assert_null(strstr(out, "theta0 sat"));
    free(out);

    out = NULL;
    f = open_memstream(&out, &len);
    drths_json_t j;
    drths_json_init(&j, f);
    drths_json_object_begin(&j, NULL);
    drths_adaptive_report_json(&j, &r);
    drths_json_object_end(&j);
    fclose(f);
    /* The JSON reads back through the same walker as a well-formed text. */
    drths_adaptive_report_t back;
    assert_int_equal(drths_adaptive_report_read_summary(&back, out, len, "json", &err), 0);
    assert_non_null(strstr(out, "\"at_bound\": true"));
    assert_non_null(strstr(out, "\"run_min\": null")); /* theta1 has no column */
    assert_non_null(strstr(out, "theta3 sat at a bound on 99.00 % of the run: the plant is "
                                "outside actuator.adaptive_bound"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flagged_at_99_percent),
        cmocka_unit_test(test_nothing_without_adaptive),
        cmocka_unit_test(test_refused_by_name),
        cmocka_unit_test(test_record_range_and_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
