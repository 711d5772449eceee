/* The per-site link table (common/platform/sitelinks.c): a numerical record of two links with
 * known concealed runs and round trips, the summary.json figures matched by site (a nested "L"
 * is not the run's), a summary of another run and a malformed one refused by name, a record of
 * one link without rows, and the printed table and JSON. */
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

#include "common/platform/sitelinks.h"

#define N 1000

/* Writes a CSV of the given columns (n values each) and loads it into t; the file is removed. */
static void load(drths_csv_table_t *t, const char *const *names, const double *const *cols,
                 int ncols, long n)
{
    char path[64] = "/tmp/drths-test-sitelinks-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    for (int c = 0; c < ncols; c++)
        fprintf(f, "%s%s", c ? "," : "", names[c]);
    fputc('\n', f);
    for (long i = 0; i < n; i++) {
        for (int c = 0; c < ncols; c++)
            fprintf(f, "%s%.17g", c ? "," : "", cols[c][i]);
        fputc('\n', f);
    }
    fclose(f);
    drths_error_t err = {{0}};
    if (drths_csv_read(t, path, &err))
        fail_msg("%s", err.msg);
    unlink(path);
}

static double step[N], conc_a[N], rtt_a[N], conc_b[N], rtt_b[N], ld[N];

/* Lab A: steps 100..109 and 500..529 concealed (40, longest 30), round trip 1 ms + i % 10 us
 * (NaN on the first 5 steps); lab B: every 100th step concealed (10, longest 1), round trip 5
 * ms. */
static void two_links(drths_csv_table_t *t)
{
    for (int i = 0; i < N; i++) {
        step[i] = i;
        conc_a[i] = (i >= 100 && i < 110) || (i >= 500 && i < 530);
        rtt_a[i] = i < 5 ? NAN : 1.0 + (i % 10) * 1e-3;
        conc_b[i] = i % 100 == 0;
        rtt_b[i] = 5.0;
        ld[i] = 40;
    }
    static const char *const names[] = {"step",        "loop_delay_ticks",  "labA.fb_concealed",
                                        "labA.rtt_ms", "labB.fb_concealed", "labB.rtt_ms"};
    const double *const cols[] = {step, ld, conc_a, rtt_a, conc_b, rtt_b};
    load(t, names, cols, 6, N);
}

static const char SUMMARY[] =
    "{\n  \"kind\": \"numerical\",\n  \"loop_delay\": {\"L\": 7, \"note\": \"a } in a string\"},\n"
    "  \"L\": 40,\n  \"floors\": [1, 2, 3],\n  \"links\": [\n"
    "    {\"site\": \"labA\", \"peer\": \"127.0.0.1:1\", \"L_needed\": 12, \"feedback_wait_ms\": "
    "2.5, \"nested\": {\"L_needed\": 99}},\n"
    "    {\"site\": \"labB\", \"L_needed\": 40, \"feedback_wait_ms\": null}\n  ]\n}\n";

static void test_two_links(void **state)
{
    (void)state;
    drths_csv_table_t t;
    two_links(&t);
    drths_site_links_t s;
    drths_error_t err = {{0}};
    assert_int_equal(drths_site_links_compute(&t, &s, &err), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.s[0].site, "labA");
    assert_string_equal(s.s[1].site, "labB");
    assert_int_equal(s.s[0].fb_concealed, 40);
    assert_int_equal(s.s[0].max_consecutive_concealed, 30);
    assert_int_equal(s.s[1].fb_concealed, 10);
    assert_int_equal(s.s[1].max_consecutive_concealed, 1);
    assert_true(fabs(s.s[0].fb_concealed_frac - 0.04) < 1e-12);
    assert_int_equal(s.s[0].rtt_ms.n, N - 5);
    assert_true(fabs(s.s[0].rtt_ms.max - 1.009) < 1e-9);
    assert_true(fabs(s.s[0].rtt_ms.min - 1.0) < 1e-9);
    assert_true(fabs(s.s[1].rtt_ms.p50 - 5.0) < 1e-12);
    /* Unknown until the summary is read. */
    assert_int_equal(s.L, -1);
    assert_int_equal(s.s[0].L_needed, -1);

    assert_int_equal(drths_site_links_read_summary(&s, SUMMARY, strlen(SUMMARY), "s.json", &err),
                     0);
    assert_int_equal(s.summary_read, 1);
    assert_int_equal(s.L, 40); /* the top level's, not loop_delay's */
    assert_int_equal(s.s[0].L_needed, 12);
    assert_true(fabs(s.s[0].feedback_wait_ms - 2.5) < 1e-12);
    assert_int_equal(s.s[1].L_needed, 40);
    assert_true(isnan(s.s[1].feedback_wait_ms));

    /* The table: one row per site with its figures. */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    drths_site_links_print(f, &s);
    fclose(f);
    assert_non_null(strstr(out, "the run's L 40 ticks"));
    if (!strstr(out, "labA                   12     2.500") || !strstr(out, "40 (4.00%)") ||
        !strstr(out, "labB                   40         -     5.000     5.000     5.000"))
        fail_msg("table:\n%s", out);
    free(out);

    /* JSON: an array of both sites. */
    out = NULL;
    f = open_memstream(&out, &len);
    assert_non_null(f);
    drths_json_t j;
    drths_json_init(&j, f);
    drths_json_object_begin(&j, NULL);
    drths_site_links_json(&j, &s);
    drths_json_object_end(&j);
    fclose(f);
    if (!strstr(out, "\"links\"") || !strstr(out, "\"site\": \"labB\"") ||
        !strstr(out, "\"max_consecutive_concealed\": 30") || !strstr(out, "\"L_needed\": 12"))
        fail_msg("json:\n%s", out);
    free(out);
    drths_csv_close(&t);
}

/* A summary naming a site the record has not (another run's), and malformed text: refused,
 * named. A summary without links reads nothing. */
static void test_summary_refused(void **state)
{
    (void)state;
    drths_csv_table_t t;
    two_links(&t);
    drths_site_links_t s;
    drths_error_t err = {{0}};
    assert_int_equal(drths_site_links_compute(&t, &s, &err), 0);
    static const char other[] = "{\"L\": 3, \"links\": [{\"site\": \"labC\", \"L_needed\": 3}]}";
    assert_int_equal(drths_site_links_read_summary(&s, other, strlen(other), "x.json", &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "x.json: links names site \"labC\""));
    static const char bad[] = "{\"L\": 3, \"links\": [{\"site\" \"labA\"}]}";
    assert_int_equal(drths_site_links_read_summary(&s, bad, strlen(bad), "y.json", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "y.json: malformed JSON"));
    static const char none[] = "{\"kind\": \"numerical\", \"L\": 9}";
    assert_int_equal(drths_site_links_read_summary(&s, none, strlen(none), "z.json", &err), 0);
    assert_int_equal(s.summary_read, 0);
    assert_int_equal(s.L, 9);
    drths_csv_close(&t);
}

/* One link's record (plain fb_concealed): no site rows, nothing printed. */
static void test_one_link(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        step[i] = i;
        conc_a[i] = i == 3;
        rtt_a[i] = 1.0;
    }
    static const char *const names[] = {"step", "fb_concealed", "rtt_ms"};
    const double *const cols[] = {step, conc_a, rtt_a};
    drths_csv_table_t t;
    load(&t, names, cols, 3, N);
    drths_site_links_t s;
    drths_error_t err = {{0}};
    assert_int_equal(drths_site_links_compute(&t, &s, &err), 0);
    assert_int_equal(s.n, 0);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    drths_site_links_print(f, &s);
    fclose(f);
    assert_int_equal(len, 0);
    free(out);
    drths_csv_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_links),
        cmocka_unit_test(test_summary_refused),
        cmocka_unit_test(test_one_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
