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

#include "models/damper.h"
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
    drths_damper_params_t spring;
    drths_damper_params_preset(&spring, DRTHS_DAMPER_LINEAR_SPRING);
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_ADAPTIVE, &spring, DT, 100, &err),
                     -ENOTSUP);
    assert_non_null(strstr(err.msg, "numerical.smith: adaptive"));
    drths_smith_close(&s);
    drths_smith_adapt_params_t ap;
    drths_smith_adapt_default(&ap);
    ap.forgetting = 1.5;
    assert_int_equal(drths_smith_init_ex(&s, DRTHS_SMITH_ADAPTIVE, &p, DT, 100, &ap, &err),
                     -EINVAL);
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

/* ---- adaptive ---- */

/* An earthquake-like displacement: a quiet start, a strong part with several frequencies and a
 * decaying tail, 20 mm peak. */
static void quake(long k, double *x, double *v)
{
    double t = (double)k * DT;
    double env = t < 1.0 ? t : (t < 8.0 ? 1.0 : exp(-(t - 8.0) / 3.0));
    double denv = t < 1.0 ? 1.0 : (t < 8.0 ? 0.0 : -env / 3.0);
    double w[3] = {2 * M_PI * 1.1, 2 * M_PI * 2.9, 2 * M_PI * 8.1};
    double a[3] = {0.012, 0.007, 0.0015};
    double s = 0.0, ds = 0.0;
    for (int i = 0; i < 3; i++) {
        s += a[i] * sin(w[i] * t + i);
        ds += a[i] * w[i] * cos(w[i] * t + i);
    }
    *x = env * s;
    *v = denv * s + env * ds;
}

typedef struct adapt_result {
    double rms_rel;   /* RMS(R - truth) / RMS(truth) over the last half */
    double peak_rel;  /* max |R - truth| / max |truth| over the last half */
    double gain;      /* final force gain */
    drths_smith_adapt_stats_t st;
} adapt_result_t;

/* The specimen has the nominal parameters scaled (true_scale), is driven LD steps late, and its
 * force carries noise_N of deterministic pseudo-noise. The predictor runs in `mode`. */
static void run_mismatch(drths_smith_mode_t mode, double sa, double sc0, double sc1, double sgb,
                         double noise_N, long steps, adapt_result_t *out)
{
    drths_damper_params_t p, tp;
    params(&p);
    tp = p;
    drths_damper_params_scale(&tp, sa, sc0, sc1, sgb, 1.0);
    drths_smith_t s;
    drths_damper_t plant, truth;
    assert_int_equal(drths_smith_init(&s, mode, &p, DT, 2 * LD + 64, NULL), 0);
    assert_int_equal(drths_damper_init(&plant, &tp, DT, NULL), 0);
    assert_int_equal(drths_damper_init(&truth, &tp, DT, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, CMD, LD), 0);
    drths_damper_reset(&plant, 0.0, CMD);
    drths_damper_reset(&truth, 0.0, CMD);
    double se = 0, st = 0, pe = 0, pt = 0;
    uint32_t rng = 12345;
    for (long n = 1; n <= steps; n++) {
        double x, v;
        quake(n, &x, &v);
        drths_smith_step(&s, x, v, CMD);
        double ft = drths_damper_step(&truth, x, v, CMD);
        double xd = 0, vd = 0;
        if (n > LD)
            quake(n - LD, &xd, &vd);
        double fp = drths_damper_step(&plant, xd, vd, CMD);
        rng = rng * 1664525u + 1013904223u;
        fp += noise_N * ((double)(rng >> 8) / 16777216.0 - 0.5) * 3.4641; /* unit variance */
        double R = drths_smith_force(&s, n, fp);
        if (n > steps / 2) {
            se += (R - ft) * (R - ft);
            st += ft * ft;
            pe = fmax(pe, fabs(R - ft));
            pt = fmax(pt, fabs(ft));
        }
    }
    out->rms_rel = sqrt(se / st);
    out->peak_rel = pe / pt;
    out->gain = drths_smith_gain(&s);
    out->st = s.st;
    drths_smith_close(&s);
}

static void test_adaptive_fixes_mismatch(void **state)
{
    (void)state;
    static const double cases[4][4] = {
        {1.2, 1.2, 1.2, 1.0}, {0.8, 0.8, 0.8, 1.0}, {1.0, 1.0, 1.0, 2.0}, {1.2, 1.0, 0.8, 0.5}};
    for (int c = 0; c < 4; c++) {
        const double *k = cases[c];
        adapt_result_t fx, ad;
        run_mismatch(DRTHS_SMITH_FIXED, k[0], k[1], k[2], k[3], 50.0, 60000, &fx);
        run_mismatch(DRTHS_SMITH_ADAPTIVE, k[0], k[1], k[2], k[3], 50.0, 60000, &ad);
        print_message("true scale alpha %.1f c0 %.1f c1 %.1f gamma,beta %.1f: force error "
                      "RMS fixed %.2f %% adaptive %.3f %%, peak fixed %.2f %% adaptive %.3f %%, "
                      "gain %.3f, updates %llu, low signal %llu, dead zone %llu\n",
                      k[0], k[1], k[2], k[3], 100 * fx.rms_rel, 100 * ad.rms_rel,
                      100 * fx.peak_rel, 100 * ad.peak_rel, ad.gain,
                      (unsigned long long)ad.st.updates, (unsigned long long)ad.st.low_signal,
                      (unsigned long long)ad.st.dead_zone);
        assert_true(fx.rms_rel > 0.03);             /* the mismatch matters to the fixed one */
        assert_true(ad.rms_rel < 0.25 * fx.rms_rel); /* adaptive removes most of it */
        assert_true(ad.rms_rel < 0.02);
        assert_true(ad.st.updates > 1000);
        if (k[1] == k[0] && k[2] == k[0] && k[3] == 1.0)
            assert_true(fabs(ad.gain - k[0]) < 0.02); /* a pure scale is found as the gain */
    }
}

static void test_adaptive_equals_fixed_when_exact(void **state)
{
    (void)state;
    adapt_result_t fx, ad;
    run_mismatch(DRTHS_SMITH_FIXED, 1, 1, 1, 1, 0.0, 20000, &fx);
    run_mismatch(DRTHS_SMITH_ADAPTIVE, 1, 1, 1, 1, 0.0, 20000, &ad);
    /* With an exact model every error is inside the dead zone: theta never moves. */
    assert_true(ad.st.updates == 0);
    assert_true(ad.rms_rel < 1e-12 && fx.rms_rel < 1e-12);
    assert_true(ad.gain == 1.0);
}

static void test_adaptive_guards(void **state)
{
    (void)state;
    drths_damper_params_t p;
    params(&p);
    drths_smith_t s;
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_ADAPTIVE, &p, DT, 2 * LD + 64, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, CMD, LD), 0);
    /* At rest with a wrong force: the regressor is tiny, nothing is learnt. */
    for (long n = 1; n <= 2000; n++) {
        drths_smith_step(&s, 0.0, 0.0, CMD);
        drths_smith_force(&s, n, 5000.0);
    }
    assert_true(s.st.updates == 0 && s.st.low_signal == 2000);
    assert_true(drths_smith_gain(&s) == 1.0);
    /* Moving, with a measured force 20 times the model's: the gain stops at its bound. */
    for (long n = 2001; n <= 12000; n++) {
        double x, v;
        quake(n, &x, &v);
        drths_smith_step(&s, x, v, CMD);
        /* 20 times the nominal model's force (hist keeps it in adaptive mode too) */
        drths_smith_force(&s, n, 20.0 * s.hist[(size_t)(n - LD) % s.cap]);
    }
    print_message("gain %.3f after a 20x force, %llu projections, trace limited %llu\n",
                  drths_smith_gain(&s), (unsigned long long)s.st.projections,
                  (unsigned long long)s.st.trace_limited);
    assert_true(s.st.updates > 100 && s.st.projections > 0);
    /* No 20x model exists inside the bounds; whatever mix it settles on stays inside them. */
    assert_true(drths_smith_gain(&s) <= s.ap.gain_max + 1e-12);
    for (int i = 0; i < DRTHS_SMITH_BANK; i++)
        assert_true(s.theta[i] >= s.ap.weight_min && s.theta[i] <= s.ap.weight_max);
    assert_true(fabs(s.theta[3]) <= s.ap.visc_max);
    double tr = 0;
    for (int i = 0; i < DRTHS_SMITH_NPAR; i++)
        tr += s.P[i][i];
    assert_true(tr <= s.ap.trace_max * (1 + 1e-12));
    /* Reset returns to the nominal model. */
    assert_int_equal(drths_smith_reset(&s, CMD, LD), 0);
    assert_true(drths_smith_gain(&s) == 1.0 && s.theta[1] == 1.0 && s.st.updates == 0);
    drths_smith_close(&s);
    drths_smith_close(&s);
}

/* force_at pairs F(n) with the step actually applied at tick n: a specimen held at step 40 for
 * ticks 100..120 (a pause) gives the exact force when the loop names step 40. */
static void test_force_at_names_the_applied_step(void **state)
{
    (void)state;
    drths_damper_params_t p;
    params(&p);
    drths_smith_t s;
    drths_damper_t twin;
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_FIXED, &p, DT, 2 * LD + 64, NULL), 0);
    assert_int_equal(drths_damper_init(&twin, &p, DT, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, CMD, LD), 0);
    drths_damper_reset(&twin, 0.0, CMD);
    double f40 = 0;
    for (long n = 1; n <= 130; n++) {
        double x, v;
        motion(n, &x, &v);
        double f = drths_smith_step(&s, x, v, CMD);
        double ft = drths_damper_step(&twin, x, v, CMD);
        assert_true(f == ft);
        if (n == 40)
            f40 = f;
    }
    double R = drths_smith_force_at(&s, 110, 40, f40);
    assert_true(fabs(R - drths_smith_model(&s, 110)) < 1e-9);
    assert_true(s.last_corr_N == 0.0);
    drths_smith_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adaptive_fixes_mismatch),
        cmocka_unit_test(test_adaptive_equals_fixed_when_exact),
        cmocka_unit_test(test_adaptive_guards),
        cmocka_unit_test(test_force_at_names_the_applied_step),
        cmocka_unit_test(test_exact_model_removes_delay),
        cmocka_unit_test(test_off_mode_passes_measurement),
        cmocka_unit_test(test_concealment_uses_last_correction),
        cmocka_unit_test(test_history_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
