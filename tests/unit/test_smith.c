/* Smith predictor (site-numerical/smith.h): with a model equal to the specimen and a measurement
 * delayed by exactly L steps, R(n) is the undelayed force; off mode passes F(n) through;
 * concealment uses the last correction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "common/damper.h"
#include "site-numerical/smith.h"

#define DT (1.0 / 5000.0)
#define CMD 2.5 /* A, passive-on */
#define LD 50

/* A displacement history with a few frequencies, 12 mm peak, so the damper goes through its
 * pre-yield and post-yield branches repeatedly. */
static void motion(long k, double *x, double *v)
{
    double t = (double)k * DT, w1 = 2 * M_PI * 2.0, w2 = 2 * M_PI * 7.3;
    *x = 0.010 * sin(w1 * t) + 0.002 * sin(w2 * t);
    *v = 0.010 * w1 * cos(w1 * t) + 0.002 * w2 * cos(w2 * t);
}

static void params(drths_damper_params_t *p)
{
    drths_damper_params_preset(p, DRTHS_DAMPER_PHILLIPS2013);
}

/* Runs N steps: `plant` is driven LD steps late (rest before), `truth` undelayed. Returns the
 * largest |R(n) - truth(n)| and stores the largest |F(n) - truth(n)| (what the delay alone
 * costs) in *raw_err. */
static double run_fixed(drths_smith_mode_t mode, double *raw_err, double *peak)
{
    drths_damper_params_t p;
    params(&p);
    drths_smith_t s;
    drths_damper_t plant, truth;
    assert_int_equal(drths_smith_init(&s, mode, &p, DT, 2 * LD + 64, NULL), 0);
    assert_int_equal(drths_damper_init(&plant, &p, DT, NULL), 0);
    assert_int_equal(drths_damper_init(&truth, &p, DT, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, CMD, LD), 0);
    drths_damper_reset(&plant, 0.0, CMD);
    drths_damper_reset(&truth, 0.0, CMD);
    double worst = 0.0;
    *raw_err = 0.0;
    *peak = 0.0;
    for (long n = 1; n <= 5000; n++) {
        double x, v;
        motion(n, &x, &v);
        drths_smith_step(&s, x, v, CMD);
        double ft = drths_damper_step(&truth, x, v, CMD);
        double fp;
        if (n <= LD) {
            fp = drths_damper_step(&plant, 0.0, 0.0, CMD);
        } else {
            motion(n - LD, &x, &v);
            fp = drths_damper_step(&plant, x, v, CMD);
        }
        double R = drths_smith_force(&s, n, fp);
        if (mode == DRTHS_SMITH_OFF)
            assert_true(R == fp);
        worst = fmax(worst, fabs(R - ft));
        *raw_err = fmax(*raw_err, fabs(fp - ft));
        *peak = fmax(*peak, fabs(ft));
    }
    drths_smith_close(&s);
    drths_smith_close(&s); /* safe twice */
    return worst;
}

static void test_exact_model_removes_delay(void **state)
{
    (void)state;
    double raw, peak;
    double err = run_fixed(DRTHS_SMITH_FIXED, &raw, &peak);
    print_message("peak force %.1f kN, delay error %.1f kN, Smith error %.3g N\n", peak * 1e-3,
                  raw * 1e-3, err);
    assert_true(peak > 100e3);    /* the damper is really working */
    assert_true(raw > 0.1 * peak); /* 10 ms of delay matters */
    assert_true(err <= 1e-9 * peak);
}

static void test_off_mode_passes_measurement(void **state)
{
    (void)state;
    double raw, peak;
    double err = run_fixed(DRTHS_SMITH_OFF, &raw, &peak);
    assert_true(err == raw); /* R(n) = F(n): the whole delay error stays */
}

static void test_concealment_uses_last_correction(void **state)
{
    (void)state;
    drths_damper_params_t p;
    params(&p);
    drths_smith_t s;
    for (int m = 0; m < 2; m++) {
        drths_smith_mode_t mode = m ? DRTHS_SMITH_OFF : DRTHS_SMITH_FIXED;
        assert_int_equal(drths_smith_init(&s, mode, &p, DT, 2 * LD + 64, NULL), 0);
        assert_int_equal(drths_smith_reset(&s, CMD, LD), 0);
        for (long n = 1; n <= 200; n++) {
            double x, v;
            motion(n, &x, &v);
            drths_smith_step(&s, x, v, CMD);
        }
        /* Before any measurement the correction is zero: the model's own estimate. */
        double expect0 = drths_smith_model(&s, mode == DRTHS_SMITH_FIXED ? 150 : 150 - LD);
        assert_true(drths_smith_conceal(&s, 150) == expect0);
        /* A measurement at 150 that is 3 kN above the delayed model. */
        double measured = drths_smith_model(&s, 150 - LD) + 3000.0;
        double R = drths_smith_force(&s, 150, measured);
        if (mode == DRTHS_SMITH_FIXED)
            assert_true(fabs(R - (drths_smith_model(&s, 150) + 3000.0)) < 1e-9);
        else
            assert_true(R == measured);
        /* Step 151 missing: model force (at 151, or 151 - LD when off) plus the same 3 kN. */
        double want = (mode == DRTHS_SMITH_FIXED ? drths_smith_model(&s, 151)
                                                 : drths_smith_model(&s, 151 - LD)) + 3000.0;
        assert_true(fabs(drths_smith_conceal(&s, 151) - want) < 1e-9);
        assert_true(fabs(drths_smith_conceal(&s, 160) - want) > 1.0); /* model moved on */
        drths_smith_close(&s);
    }
}

static void test_history_and_errors(void **state)
{
    (void)state;
    drths_damper_params_t p;
    params(&p);
    drths_smith_t s;
    drths_error_t err;
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_ADAPTIVE, &p, DT, 100, &err), -ENOTSUP);
    assert_non_null(strstr(err.msg, "numerical.smith: adaptive"));
    drths_smith_close(&s);
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_FIXED, &p, DT, 10, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, CMD, 10), -ERANGE); /* needs LD + 1 = 11 slots */
    assert_int_equal(drths_smith_reset(&s, CMD, 9), 0);
    assert_int_equal(drths_smith_set_delay(&s, 10), -ERANGE);
    assert_int_equal(s.L, 9u);
    double rest = drths_smith_model(&s, 0);
    assert_true(drths_smith_model(&s, -5) == rest);
    assert_true(isnan(drths_smith_model(&s, 1))); /* not computed yet */
    for (long n = 1; n <= 25; n++) {
        double x, v;
        motion(n, &x, &v);
        drths_smith_step(&s, x, v, CMD);
    }
    assert_true(isnan(drths_smith_model(&s, 15)));  /* overwritten */
    assert_false(isnan(drths_smith_model(&s, 16))); /* the oldest kept */
    drths_smith_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_model_removes_delay),
        cmocka_unit_test(test_off_mode_passes_measurement),
        cmocka_unit_test(test_concealment_uses_last_correction),
        cmocka_unit_test(test_history_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
