/* Unit tests of common/platform/cli.h: the number parsers accept exactly what they promise and print
 * one message naming the program, the option and the value; the version string has the
 * project's version first. stderr is redirected to a file to read the messages back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/platform/cli.h"

static char msg[512];

/* Runs the parser call in `expr` with stderr going to a temporary file, then reads it into msg. */
#define CAPTURE(expr, rc)                                                                          \
    do {                                                                                           \
        fflush(stderr);                                                                            \
        FILE *tmp_ = tmpfile();                                                                    \
        assert_non_null(tmp_);                                                                     \
        int saved_ = dup(2);                                                                       \
        dup2(fileno(tmp_), 2);                                                                     \
        (rc) = (expr);                                                                             \
        fflush(stderr);                                                                            \
        dup2(saved_, 2);                                                                           \
        close(saved_);                                                                             \
        rewind(tmp_);                                                                              \
        size_t n_ = fread(msg, 1, sizeof msg - 1, tmp_);                                           \
        msg[n_] = '\0';                                                                            \
        fclose(tmp_);                                                                              \
    } while (0)

static void test_long(void **state)
{
    (void)state;
    long v = 7;
    int rc;
    CAPTURE(drths_cli_long("drths-x", "--cpu", "12", 0, 4095, &v), rc);
    assert_int_equal(rc, 0);
    assert_int_equal(v, 12);
    assert_string_equal(msg, "");
    const char *bad[] = {"", "9x", "4096", "-1", "1.5", " 3", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        CAPTURE(drths_cli_long("drths-x", "--cpu", bad[i], 0, 4095, &v), rc);
        assert_int_equal(rc, -1);
        assert_int_equal(v, 7);
        char want[200];
        snprintf(want, sizeof want, "drths-x: --cpu: '%s' is not an integer in 0..4095\n", bad[i]);
        assert_string_equal(msg, want);
    }
}

static void test_double_and_positive(void **state)
{
    (void)state;
    double v = -3;
    int rc;
    CAPTURE(drths_cli_double("p", "--f", "0.25", 0.0, 1.0, NULL, &v), rc);
    assert_int_equal(rc, 0);
    assert_true(v == 0.25);
    CAPTURE(drths_cli_double("p", "--f", "1.5", 0.0, 1.0, "s", &v), rc);
    assert_int_equal(rc, -1);
    assert_true(v == 0.25);
    assert_string_equal(msg, "p: --f: '1.5' is not a number from 0 s to 1 s\n");
    CAPTURE(drths_cli_double("p", "--f", "nan", 0.0, 1.0, NULL, &v), rc);
    assert_int_equal(rc, -1);
    CAPTURE(drths_cli_positive("p", "--wait", "2.5", "seconds", &v), rc);
    assert_int_equal(rc, 0);
    assert_true(v == 2.5);
    const char *bad[] = {"0", "-1", "inf", "", "3s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CAPTURE(drths_cli_positive("p", "--wait", bad[i], "seconds", &v), rc);
        assert_int_equal(rc, -1);
        char want[200];
        snprintf(want, sizeof want, "p: --wait: '%s' is not a positive number of seconds\n",
                 bad[i]);
        assert_string_equal(msg, want);
    }
    assert_true(v == 2.5);
}

static void test_choice_and_errors(void **state)
{
    (void)state;
    static const char *const names[] = {"auto", "shadow", "generic", NULL};
    int rc;
    CAPTURE(drths_cli_choice("p", "--variant", "shadow", names), rc);
    assert_int_equal(rc, 1);
    CAPTURE(drths_cli_choice("p", "--variant", "x", names), rc);
    assert_int_equal(rc, -1);
    assert_string_equal(msg, "p: --variant: 'x' is not one of auto, shadow or generic\n");
    CAPTURE(drths_cli_usage_error("p", "--a needs --b"), rc);
    assert_int_equal(rc, DRTHS_EXIT_USAGE);
    assert_string_equal(msg, "p: --a needs --b\n");
    CAPTURE(drths_cli_error("p", "cannot write %s", "f"), rc);
    assert_int_equal(rc, DRTHS_EXIT_FAILED);
    assert_string_equal(msg, "p: cannot write f\n");
    CAPTURE(drths_cli_unexpected_argument("p", "zz"), rc);
    assert_int_equal(rc, DRTHS_EXIT_USAGE);
    assert_string_equal(msg, "p: unexpected argument 'zz' (see --help)\n");
}

static int usage_calls;
static void fake_usage(FILE *f)
{
    (void)f;
    usage_calls++;
}

static void test_other_option(void **state)
{
    (void)state;
    int rc;
    usage_calls = 0;
    CAPTURE(drths_cli_other_option("p", 'h', fake_usage), rc);
    assert_int_equal(rc, DRTHS_EXIT_OK);
    assert_int_equal(usage_calls, 1);
    CAPTURE(drths_cli_other_option("p", '?', fake_usage), rc);
    assert_int_equal(rc, DRTHS_EXIT_USAGE);
    assert_string_equal(msg, "Try 'p --help'.\n");
    assert_int_equal(usage_calls, 1);
    fflush(stdout);
    assert_int_equal(drths_cli_other_option("p", DRTHS_CLI_OPT_VERSION, fake_usage), DRTHS_EXIT_OK);
}

static void test_version(void **state)
{
    (void)state;
    const char *v = drths_version();
    const char *want = getenv("DRTHS_EXPECT_VERSION"); /* CMake's PROJECT_VERSION */
    assert_non_null(want);
    assert_int_equal(strncmp(v, want, strlen(want)), 0);
    assert_true(v[strlen(want)] == '\0' || strncmp(v + strlen(want), " (git ", 6) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long),
        cmocka_unit_test(test_double_and_positive),
        cmocka_unit_test(test_choice_and_errors),
        cmocka_unit_test(test_other_option),
        cmocka_unit_test(test_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
