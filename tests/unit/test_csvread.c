#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/platform/csvread.h"

/* Writes text to a fresh temporary file and returns its path (static buffer). */
static const char *write_tmp(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/drths-test-csvread-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Reads text expecting failure; checks the code and that the message contains want. */
static void expect_error(const char *text, const char *want)
{
    const char *path = write_tmp(text);
    drths_csv_table_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_csv_read(&t, path, &err), -EINVAL);
    if (!strstr(err.msg, want) || !strstr(err.msg, path))
        fail_msg("message \"%s\" lacks \"%s\" or the path", err.msg, want);
    assert_null(t.cols); /* a failed read leaves nothing behind */
    drths_csv_close(&t);
    unlink(path);
}

static void test_columns_by_name(void **state)
{
    (void)state;
    const char *path = write_tmp("step, time_s ,x1_m,rtt_ms\r\n"
                                 "0,0,0.001,nan\r\n"
                                 "1,0.0002,-2.5e-3,NaN\r\n"
                                 "2, 0.0004 ,3,80.25"); /* no final newline */
    drths_csv_table_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_csv_read(&t, path, &err), 0);
    assert_int_equal(t.ncols, 4);
    assert_int_equal(t.rows, 3);
    const double *x = drths_csv_column(&t, "x1_m");
    const double *time = drths_csv_column(&t, "time_s");
    const double *rtt = drths_csv_column(&t, "rtt_ms");
    assert_non_null(x);
    assert_non_null(time); /* blanks around the name are trimmed */
    assert_null(drths_csv_column(&t, "x2_m"));
    assert_null(drths_csv_column(&t, "x1"));
    assert_true(x[0] == 0.001 && x[1] == -2.5e-3 && x[2] == 3.0);
    assert_true(time[2] == 0.0004);
    assert_true(isnan(rtt[0]) && isnan(rtt[1]));
    assert_true(rtt[2] == 80.25);
    drths_csv_close(&t);
    drths_csv_close(&t); /* safe twice */
    unlink(path);
}

static void test_header_only_and_trailing_blank_lines(void **state)
{
    (void)state;
    const char *path = write_tmp("a,b\n1,2\n\n\n");
    drths_csv_table_t t;
    assert_int_equal(drths_csv_read(&t, path, NULL), 0);
    assert_int_equal(t.rows, 1);
    drths_csv_close(&t);
    unlink(path);
    path = write_tmp("a,b\n");
    assert_int_equal(drths_csv_read(&t, path, NULL), 0);
    assert_int_equal(t.rows, 0);
    assert_non_null(drths_csv_column(&t, "b")); /* present, with no values */
    drths_csv_close(&t);
    unlink(path);
}

static void test_malformed_rows_name_file_and_line(void **state)
{
    (void)state;
    expect_error("a,b,c\n1,2,3\n1,2\n", ":3: 2 fields, the header has 3");
    expect_error("a,b,c\n1,2,3\n4,5,6\n1,2,3,4\n", ":4: 4 fields, the header has 3");
    expect_error("a,b,c\n1,abc,3\n", ":2: column 2 (b): \"abc\" is not a number");
    expect_error("a,b,c\n1,2x,3\n", ":2: column 2 (b): trailing characters \"x\"");
    expect_error("a,b,c\n1,,3\n", ":2: column 2 (b) is empty");
    expect_error("a,b,c\n1,2,\n", ":2: column 3 (c) is empty");
    expect_error("a,b\n1,2\n\n3,4\n", ":3: blank line inside the data");
    expect_error("a,b,a\n1,2,3\n", ":1: column name \"a\" appears twice");
    expect_error("a,,c\n1,2,3\n", ":1: column 2 has no name");
    expect_error("", "empty file");
}

static void test_missing_file(void **state)
{
    (void)state;
    drths_csv_table_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_csv_read(&t, "/nonexistent/numerical.csv", &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/numerical.csv"));
}

/* 200 000 rows cross many 1 MiB read blocks, so lines are split across reads; the sums prove
 * that no row is lost, duplicated or cut. */
static void test_many_rows_across_blocks(void **state)
{
    (void)state;
    char path[64] = "/tmp/drths-test-csvread-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("step,time_s,x1_m\n", f);
    const long n = 200000;
    for (long i = 0; i < n; i++)
        fprintf(f, "%ld,%.9g,%.9g\n", i, i * 2e-4, 1e-3 * (double)(i % 7));
    fclose(f);
    drths_csv_table_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_csv_read(&t, path, &err), 0);
    assert_int_equal(t.rows, n);
    const double *step = drths_csv_column(&t, "step");
    const double *x = drths_csv_column(&t, "x1_m");
    double s = 0, sx = 0;
    for (long i = 0; i < n; i++) {
        s += step[i];
        sx += x[i];
    }
    assert_true(s == (double)n * (double)(n - 1) / 2.0);
    /* sum of (i % 7) over i < 200000: 28571 full cycles of 21 plus 0+1+2 */
    assert_true(fabs(sx - 1e-3 * (28571.0 * 21.0 + 3.0)) < 1e-6);
    assert_true(step[n - 1] == (double)(n - 1));
    drths_csv_close(&t);
    unlink(path);
}

/* A header longer than the 1 MiB read block must grow the buffer, not fail. */
static void test_line_longer_than_block(void **state)
{
    (void)state;
    char path[64] = "/tmp/drths-test-csvread-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    const int ncols = 150000; /* header about 1.2 MB */
    for (int c = 0; c < ncols; c++)
        fprintf(f, "%scol%d", c ? "," : "", c);
    fputc('\n', f);
    for (int c = 0; c < ncols; c++)
        fprintf(f, "%s%d", c ? "," : "", c);
    fputc('\n', f);
    fclose(f);
    drths_csv_table_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_csv_read(&t, path, &err), 0);
    assert_int_equal(t.ncols, ncols);
    assert_int_equal(t.rows, 1);
    assert_true(t.cols[ncols - 1][0] == ncols - 1);
    assert_true(drths_csv_column(&t, "col149999")[0] == 149999.0);
    drths_csv_close(&t);
    unlink(path);
}

/* The reader's fast decimal path must give exactly what strtod gives, bit for bit, for the
 * formats the writers use and for the ones that fall back to strtod. */
static void test_same_bits_as_strtod(void **state)
{
    (void)state;
    static const char *fmts[] = {"%.9g", "%.17g", "%.3f", "%.6e", "%.15g", "%g"};
    const int nf = (int)(sizeof fmts / sizeof fmts[0]);
    const int n = 20000;
    char path[64] = "/tmp/drths-test-csvread-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    char **text = calloc((size_t)(n * nf), sizeof *text);
    for (int k = 0; k < nf; k++)
        fprintf(f, "%sc%d", k ? "," : "", k);
    fputc('\n', f);
    srand(12345);
    for (int i = 0; i < n; i++) {
        /* magnitudes from 1e-12 to 1e12, both signs, plus some exact integers */
        double mant = (double)rand() / RAND_MAX - 0.5;
        double v = i % 10 == 0 ? (double)(rand() % 100000) : mant * pow(10.0, rand() % 25 - 12);
        for (int k = 0; k < nf; k++) {
            char buf[64];
            snprintf(buf, sizeof buf, fmts[k], v);
            text[i * nf + k] = strdup(buf);
            fprintf(f, "%s%s", k ? "," : "", buf);
        }
        fputc('\n', f);
    }
    fputs("1e-30,-0,0x1p-3,inf,-nan,123456789012345678901234567890\n", f);
    fclose(f);
    drths_csv_table_t t;
    drths_error_t err = {{0}};
    assert_int_equal(drths_csv_read(&t, path, &err), 0);
    assert_int_equal(t.rows, n + 1);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < nf; k++) {
            double want = strtod(text[i * nf + k], NULL);
            if (memcmp(&want, &t.cols[k][i], sizeof want) != 0)
                fail_msg("\"%s\": got %.17g, strtod gives %.17g", text[i * nf + k], t.cols[k][i],
                         want);
            free(text[i * nf + k]);
        }
    free(text);
    assert_true(t.cols[0][n] == 1e-30);
    assert_true(t.cols[1][n] == 0.0 && signbit(t.cols[1][n]));
    assert_true(t.cols[2][n] == 0.125);
    assert_true(isinf(t.cols[3][n]));
    assert_true(isnan(t.cols[4][n]));
    assert_true(t.cols[5][n] == strtod("123456789012345678901234567890", NULL));
    drths_csv_close(&t);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_by_name),
        cmocka_unit_test(test_header_only_and_trailing_blank_lines),
        cmocka_unit_test(test_malformed_rows_name_file_and_line),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_many_rows_across_blocks),
        cmocka_unit_test(test_line_longer_than_block),
        cmocka_unit_test(test_same_bits_as_strtod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
