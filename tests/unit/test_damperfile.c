/* The damper model file (common/config/damperfile.h): what drths_damperfile_write writes,
 * drths_damperfile_load reads back to the same parameters with the file's SHA-256; a damaged
 * file is refused with the file, the line and the field named. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config/damperfile.h"

static char path[64];

static void write_model(drths_damperfit_result_t *res)
{
    memset(res, 0, sizeof *res);
    drths_damper_params_preset(&res->params, DRTHS_DAMPER_PHILLIPS2013);
    drths_damper_params_scale(&res->params, 1.2, 0.9, 1.1, 0.8, 1.0);
    res->params.n = 1.7;
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
        res->value[i] = drths_damperfit_get(&res->params, i);
        res->fitted[i] = drths_damperfit_fixed_reason(i) == NULL;
        res->u[i] = 1e-3;
    }
    snprintf(path, sizeof path, "/tmp/drths-test-damperfile-%d.yaml", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    drths_damperfile_meta_t meta = {"2026-11-28T10:00:00Z", "test", "00ff", "{cycles: 1}"};
    assert_int_equal(drths_damperfile_write(f, &meta, res), 0);
    fclose(f);
}

static void test_round_trip(void **state)
{
    (void)state;
    drths_damperfit_result_t res;
    write_model(&res);
    drths_damper_params_t p;
    char sha[65] = "";
    drths_error_t err = {{0}};
    int rc = drths_damperfile_load(path, &p, sha, &err);
    if (rc)
        fail_msg("%s", err.msg);
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
        const double want = drths_damperfit_get(&res.params, i);
        assert_float_equal(drths_damperfit_get(&p, i), want, 1e-9 * (want < 0 ? -want : want));
    }
    assert_float_equal(p.alpha_a, res.params.alpha_a, 1e-9 * res.params.alpha_a);
    assert_float_equal(p.c1_b, res.params.c1_b, 1e-9 * res.params.c1_b);
    assert_float_equal(p.gamma_c, res.params.gamma_c, 1e-9 * res.params.gamma_c);
    assert_float_equal(p.n, 1.7, 1e-12);
    assert_int_equal(strlen(sha), 64);
    unlink(path);
}

/* Replaces the first line starting with `start` by `line` and loads: the error. */
static void damaged(const char *start, const char *line, const char *want)
{
    drths_damperfit_result_t res;
    write_model(&res);
    FILE *f = fopen(path, "r");
    char buf[16384] = "", l[1024];
    int n = 0, at = 0;
    while (fgets(l, sizeof l, f)) {
        n++;
        if (!at && strncmp(l, start, strlen(start)) == 0) {
            at = n;
            strcat(buf, line);
        } else {
            strcat(buf, l);
        }
    }
    fclose(f);
    assert_true(at > 0);
    f = fopen(path, "w");
    fputs(buf, f);
    fclose(f);
    drths_damper_params_t p;
    drths_error_t err = {{0}};
    assert_int_equal(drths_damperfile_load(path, &p, NULL, &err), -EINVAL);
    char where[128];
    snprintf(where, sizeof where, "%s:%d: %s", path, at, want);
    if (!*line)
        snprintf(where, sizeof where, "%s: %s", path, want);
    if (!strstr(err.msg, where))
        fail_msg("got '%s', want '%s'", err.msg, where);
    unlink(path);
}

static void test_damaged(void **state)
{
    (void)state;
    damaged("  c1_b:", "  c1_b: {value: 1x5, u: 1}\n",
            "parameters.c1_b: value '1x5' is not a number");
    damaged("  k0:", "  kk: {value: 0, u: 1}\n", "parameters.kk: unknown parameter");
    damaged("model:", "model: spencer1997-small\n", "model: 'spencer1997-small'");
    damaged("  n:", "", "parameters.n: missing");
    damaged("  alpha_a:", "  alpha_a: 0.1\n", "parameters.alpha_a: expected {value: NUMBER");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
