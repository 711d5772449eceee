/* Smith predictor (site-numerical/smith.h): with a model equal to the specimen and a measurement
 * delayed by exactly L steps, R(n) is the undelayed force; off mode passes F(n) through;
 * concealment uses the last correction. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>
#include <time.h>

#include "common/models/damper.h"
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
    assert_true(peak > 100e3);     /* the damper is really working */
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
                                                 : drths_smith_model(&s, 151 - LD)) +
                      3000.0;
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
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_ADAPTIVE, &spring, DT, 100, &err), -ENOTSUP);
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

#define LDA 250      /* 50 ms of loop delay */
#define ASTEPS 40000 /* 8 s */
#define TAIL 15000   /* the last 3 s are scored */

/* A structure-like excitation, fixed for every case: the response of two lightly damped modes
 * (2.5 Hz and 8 Hz, 5 %) to band-limited pseudo-random forcing, scaled to 15 mm peak, with the
 * damper command switched between 0 and 2.5 A at pseudo-random instants (about every 0.2 s),
 * as a semi-active controller does. */
static double ex_x[ASTEPS + 1], ex_v[ASTEPS + 1], ex_c[ASTEPS + 1];

static double lcg(uint32_t *r)
{
    *r = *r * 1664525u + 1013904223u;
    return (double)(*r >> 8) / 16777216.0 - 0.5;
}

static void excitation(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const double w[2] = {2 * M_PI * 2.5, 2 * M_PI * 8.0}, g[2] = {1.0, 0.15};
    double x[2] = {0, 0}, v[2] = {0, 0}, drive = 0.0, peak = 0.0;
    uint32_t r = 2024;
    double cmd = 0.0;
    for (long k = 0; k <= ASTEPS; k++) {
        drive += 0.02 * (lcg(&r) - drive); /* a first-order low-pass of white noise */
        ex_x[k] = ex_v[k] = 0.0;
        for (int m = 0; m < 2; m++) {
            double a = -2 * 0.05 * w[m] * v[m] - w[m] * w[m] * x[m] + g[m] * w[m] * w[m] * drive;
            v[m] += DT * a;
            x[m] += DT * v[m];
            ex_x[k] += x[m];
            ex_v[k] += v[m];
        }
        peak = fmax(peak, fabs(ex_x[k]));
        if (lcg(&r) + 0.5 < 1.0 / 1000.0)
            cmd = cmd > 0.0 ? 0.0 : CMD;
        ex_c[k] = cmd;
    }
    for (long k = 0; k <= ASTEPS; k++) {
        ex_x[k] *= 0.015 / peak;
        ex_v[k] *= 0.015 / peak;
    }
}

typedef struct adapt_result {
    double model_rms_rel; /* RMS(F^(n) - truth(n)) / RMS(truth) over the scored tail */
    double rms_rel;       /* RMS(R(n) - truth(n)) / RMS(truth) over the scored tail */
    double peak_rel;      /* max |R - truth| / max |truth| over the scored tail */
    double scale[DRTHS_SMITH_NPAR];
    double gain;
    int in_box; /* every member's theta stayed in its box at every step */
    int glides; /* the weights summed to 1 and none moved more than glide a step */
    drths_smith_adapt_stats_t st;   /* the predictor's (pairs, fall-back) */
    drths_smith_adapt_stats_t lead; /* the leader's counters */
    double lead_n_start;            /* the factor on n the leader started from */
    uint64_t lead_changes;
} adapt_result_t;

/* Every member's theta is in the box. */
static int in_box(const drths_smith_t *s)
{
    int ok = 1;
    for (int j = 0; j < s->nm; j++)
        for (int i = 0; i < DRTHS_SMITH_NPAR; i++)
            ok &= s->m[j].theta[i] >= s->lo[i] && s->m[j].theta[i] <= s->hi[i];
    return ok;
}

/* The specimen is the nominal damper with its parameters scaled (sa: alpha, c0, c1, gamma and
 * beta, A, n), driven LDA steps late; its force carries noise_N of pseudo-noise. When `junk`,
 * the measured force is unrelated to the motion. */
static void run_mismatch(drths_smith_mode_t mode, const double sc[6], double noise_N, int junk,
                         adapt_result_t *out)
{
    excitation();
    drths_damper_params_t p, tp;
    params(&p);
    tp = p;
    drths_damper_params_scale(&tp, sc[0], sc[1], sc[2], sc[3], sc[4]);
    tp.n *= sc[5];
    drths_smith_t s;
    drths_damper_t truth;
    assert_int_equal(drths_smith_init(&s, mode, &p, DT, LDA + 64, NULL), 0);
    assert_int_equal(drths_damper_init(&truth, &tp, DT, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, ex_c[0], LDA), 0);
    drths_damper_reset(&truth, 0.0, ex_c[0]);
    static double ft[ASTEPS + 1];
    ft[0] = drths_damper_force(&truth);
    double se = 0, sm = 0, st = 0, pe = 0, pt = 0;
    uint32_t rng = 12345;
    out->in_box = out->glides = 1;
    double w_prev[DRTHS_SMITH_MEMBERS] = {1.0};
    for (long n = 1; n <= ASTEPS; n++) {
        drths_smith_step(&s, ex_x[n], ex_v[n], ex_c[n]);
        ft[n] = drths_damper_step(&truth, ex_x[n], ex_v[n], ex_c[n]);
        double fp = ft[n > LDA ? n - LDA : 0] + noise_N * lcg(&rng) * 3.4641;
        if (junk)
            fp = 1e5 * sin(2 * M_PI * 0.7 * n * DT) + 4e4 * sin(2 * M_PI * 5.3 * n * DT + 1.0);
        double R = drths_smith_force(&s, n, fp);
        out->in_box &= in_box(&s);
        double sum = 0.0;
        for (int j = 0; j < s.nm && !s.st.fell_back; j++) {
            out->glides &= fabs(s.m[j].w - w_prev[j]) <= s.ap.glide * (1 + 1e-9);
            w_prev[j] = s.m[j].w;
            sum += s.m[j].w;
        }
        out->glides &= s.nm == 0 || s.st.fell_back || fabs(sum - 1.0) < 1e-12;
        if (n > ASTEPS - TAIL) {
            double fm = drths_smith_model(&s, n);
            se += (R - ft[n]) * (R - ft[n]);
            sm += (fm - ft[n]) * (fm - ft[n]);
            st += ft[n] * ft[n];
            pe = fmax(pe, fabs(R - ft[n]));
            pt = fmax(pt, fabs(ft[n]));
        }
    }
    out->rms_rel = sqrt(se / st);
    out->model_rms_rel = sqrt(sm / st);
    out->peak_rel = pe / pt;
    for (int i = 0; i < DRTHS_SMITH_NPAR; i++)
        out->scale[i] = drths_smith_scale(&s, NULL, i);
    out->gain = drths_smith_gain(&s);
    out->st = s.st;
    const drths_smith_member_t *lb = drths_smith_leader(&s);
    if (lb) {
        out->lead = lb->st;
        out->lead_n_start = lb->n_start;
    }
    out->lead_changes = s.lead_changes;
    drths_smith_close(&s);
}

/* Each parameter alone x0.5 and x2 (gamma and beta together), n also x1.5, then alpha, c0, c1
 * x3 and every factor but n x3: after 5 s the estimate's force is within 2 % RMS of the
 * specimen's, and theta never leaves its box. n x2 is found by the bank's member started there,
 * n x0.5 (n = 1, on the box's bound) by the bank started at x1, x0.6 and x2 (on this motion the
 * nominal member ends leading, n x0.665 with gamma-beta x0.15, 0.9 % force error; in the
 * study's closed loop the member started at x0.6 leads, its n held on the bound);
 * a single identifier started at the nominal n is trapped (n x0.5, n = 1: a
 * damper that hardly yields over the stroke, with 8 times the nominal force). n x0.6 and x0.75
 * lie between the starts: identified since gamma and beta, not A, are identified (with A, the
 * pair alpha, A has no information near n = 1, and the members drifted along it to the box's
 * corner, alpha x10 and A x0.05: 52 % and 81 % force error, fell back). */
static void test_adaptive_identifies_the_damper(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        double sc[6];
        int beyond; /* not identified: falls back or no worse than the fixed predictor */
    } cases[] = {
        {"alpha x0.5", {0.5, 1, 1, 1, 1, 1}, 0},      {"alpha x2", {2, 1, 1, 1, 1, 1}, 0},
        {"c0 x0.5", {1, 0.5, 1, 1, 1, 1}, 0},         {"c0 x2", {1, 2, 1, 1, 1, 1}, 0},
        {"c1 x0.5", {1, 1, 0.5, 1, 1, 1}, 0},         {"c1 x2", {1, 1, 2, 1, 1, 1}, 0},
        {"gamma,beta x0.5", {1, 1, 1, 0.5, 1, 1}, 0}, {"gamma,beta x2", {1, 1, 1, 2, 1, 1}, 0},
        {"A x0.5", {1, 1, 1, 1, 0.5, 1}, 0},          {"A x2", {1, 1, 1, 1, 2, 1}, 0},
        {"n x0.5", {1, 1, 1, 1, 1, 0.5}, 0},          {"n x2", {1, 1, 1, 1, 1, 2}, 0},
        {"n x0.6", {1, 1, 1, 1, 1, 0.6}, 0},          {"n x0.75", {1, 1, 1, 1, 1, 0.75}, 0},
        {"n x1.5", {1, 1, 1, 1, 1, 1.5}, 0},          {"alpha,c0,c1 x3", {3, 3, 3, 1, 1, 1}, 0},
        {"all but n x3", {3, 3, 3, 3, 3, 1}, 0},
    };
    int fails = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        adapt_result_t fx, ad;
        run_mismatch(DRTHS_SMITH_FIXED, cases[c].sc, 50.0, 0, &fx);
        run_mismatch(DRTHS_SMITH_ADAPTIVE, cases[c].sc, 50.0, 0, &ad);
        print_message("%-16s force error RMS: fixed %6.2f %%, adaptive model %6.3f %% "
                      "(predictor %6.3f %%, peak %6.3f %%); alpha x%.3f c0 x%.3f c1 x%.3f "
                      "gamma,beta x%.3f n x%.3f; led from n x%g (%llu changes), %llu updates%s\n",
                      cases[c].what, 100 * fx.model_rms_rel, 100 * ad.model_rms_rel,
                      100 * ad.rms_rel, 100 * ad.peak_rel, ad.scale[0], ad.scale[1], ad.scale[2],
                      ad.scale[3], ad.scale[4], ad.lead_n_start,
                      (unsigned long long)ad.lead_changes, (unsigned long long)ad.lead.updates,
                      ad.st.fell_back ? " FELL BACK" : "");
        int ok = ad.in_box && ad.glides && !ad.st.fell_back && ad.model_rms_rel < 0.02 &&
                 ad.rms_rel < 0.02 && ad.model_rms_rel < fx.model_rms_rel;
        if (cases[c].beyond)
            ok = ad.in_box && ad.glides && (ad.st.fell_back || ad.rms_rel < fx.rms_rel);
        if (!ok)
            print_message("  ^ FAILED (in box %d, fell back %d, fixed predictor %.3f %%)\n",
                          ad.in_box, ad.st.fell_back, 100 * fx.rms_rel);
        fails += !ok;
    }
    assert_int_equal(fails, 0);
}

static void test_adaptive_equals_fixed_when_exact(void **state)
{
    (void)state;
    static const double one[6] = {1, 1, 1, 1, 1, 1};
    adapt_result_t fx, ad;
    run_mismatch(DRTHS_SMITH_FIXED, one, 0.0, 0, &fx);
    run_mismatch(DRTHS_SMITH_ADAPTIVE, one, 0.0, 0, &ad);
    /* With an exact model every error is inside the dead zone: theta never moves. */
    assert_true(ad.lead.updates == 0 && ad.lead_changes == 0 && ad.st.pairs > 1000);
    assert_true(ad.rms_rel < 1e-12 && fx.rms_rel < 1e-12);
    assert_true(ad.gain == 1.0 && ad.scale[0] == 1.0 && ad.scale[4] == 1.0);
}

/* A measured force unrelated to the motion: no damper explains it; the predictor falls back to
 * the nominal model and says why. */
static void test_adaptive_falls_back_on_junk(void **state)
{
    (void)state;
    static const double one[6] = {1, 1, 1, 1, 1, 1};
    adapt_result_t ad;
    run_mismatch(DRTHS_SMITH_ADAPTIVE, one, 0.0, 1, &ad);
    print_message("junk force: fell back at step %lld: %s\n", (long long)ad.st.fallback_step,
                  ad.st.fallback_reason ? ad.st.fallback_reason : "(no)");
    assert_true(ad.st.fell_back && ad.st.fallback_reason != NULL);
    assert_true(ad.st.fallback_step > 0 && ad.in_box);
}

static void test_adaptive_guards(void **state)
{
    (void)state;
    excitation();
    drths_damper_params_t p;
    params(&p);
    drths_smith_t s, fx;
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_ADAPTIVE, &p, DT, LDA + 64, NULL), 0);
    assert_int_equal(drths_smith_init(&fx, DRTHS_SMITH_FIXED, &p, DT, LDA + 64, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, CMD, LDA), 0);
    assert_int_equal(drths_smith_reset(&fx, CMD, LDA), 0);
    /* At rest with a wrong force: the sensitivities are zero, nothing is learnt, nothing
     * drifts, and there is no ground for a fall-back. */
    for (long n = 1; n <= 20000; n++) {
        drths_smith_step(&s, 0.0, 0.0, CMD);
        drths_smith_force(&s, n, 5000.0);
    }
    assert_true(s.nm == DRTHS_SMITH_MEMBERS && !s.st.fell_back && s.st.pairs == 0);
    for (int j = 0; j < s.nm; j++) {
        assert_true(s.m[j].st.updates == 0 && s.m[j].st.low_signal == 20000);
        for (int i = 0; i < DRTHS_SMITH_NPAR; i++)
            assert_true(s.m[j].theta[i] == (i == DRTHS_SMITH_P_N ? log(s.m[j].n_start) : 0.0));
    }
    assert_true(drths_smith_gain(&s) == 1.0 && s.m[0].n_start == 1.0 && s.m[1].n_start == 0.6 &&
                s.m[2].n_start == 2.0);
    /* Moving, with a measured force 30 times the nominal model's: theta stops in its box. */
    assert_int_equal(drths_smith_reset(&s, CMD, LDA), 0);
    int box = 1;
    for (long n = 1; n <= 20000; n++) {
        drths_smith_step(&s, ex_x[n], ex_v[n], CMD);
        drths_smith_step(&fx, ex_x[n], ex_v[n], CMD);
        drths_smith_force(&s, n, 30.0 * drths_smith_model(&fx, n - LDA));
        box &= in_box(&s);
    }
    const drths_smith_member_t *lb = drths_smith_leader(&s);
    print_message(
        "30x force: alpha x%.2f c0 x%.2f c1 x%.2f gamma,beta x%.2f n x%.2f, %llu projections, "
        "trace limited %llu, %s\n",
        drths_smith_scale(&s, NULL, 0), drths_smith_scale(&s, NULL, 1),
        drths_smith_scale(&s, NULL, 2), drths_smith_scale(&s, NULL, 3),
        drths_smith_scale(&s, NULL, 4), (unsigned long long)lb->st.projections,
        (unsigned long long)lb->st.trace_limited,
        s.st.fell_back ? s.st.fallback_reason : "no fall-back");
    assert_true(box && lb->st.updates > 100);
    for (int j = 0; j < s.nm; j++) {
        double tr = 0;
        for (int i = 0; i < DRTHS_SMITH_NPAR; i++)
            tr += s.m[j].P[i][i];
        assert_true(tr <= s.ap.trace_max * (1 + 1e-12));
    }
    /* Reset returns to the nominal model and the first member's lead. */
    assert_int_equal(drths_smith_reset(&s, CMD, LDA), 0);
    assert_true(drths_smith_gain(&s) == 1.0 && s.lead == 0 && s.lead_changes == 0 &&
                s.m[0].theta[0] == 0.0 && s.m[0].st.updates == 0 && s.m[0].w == 1.0 &&
                s.m[1].w == 0.0 && !s.st.fell_back && drths_smith_fallback_reason(&s) == NULL);
    drths_smith_close(&fx);
    drths_smith_close(&s);
    drths_smith_close(&s);
}

/* A member whose force stops being finite leaves the bank and the others go on; the predictor
 * falls back to the nominal model, naming why, only when no member is left. */
static void test_adaptive_drops_a_member(void **state)
{
    (void)state;
    excitation();
    drths_damper_params_t p;
    params(&p);
    drths_smith_t s;
    assert_int_equal(drths_smith_init(&s, DRTHS_SMITH_ADAPTIVE, &p, DT, LDA + 64, NULL), 0);
    assert_int_equal(drths_smith_reset(&s, CMD, LDA), 0);
    long n = 1;
    for (; n <= 2000; n++) {
        drths_smith_step(&s, ex_x[n], ex_v[n], CMD);
        drths_smith_force(&s, n, 1.3 * drths_smith_model(&s, n - LDA));
    }
    /* Break the leader's model: the lead goes to another member, which takes its weight. */
    s.m[0].est.p.n = NAN;
    drths_smith_step(&s, ex_x[n], ex_v[n], CMD);
    double R = drths_smith_force(&s, n, 1.3 * drths_smith_model(&s, n - LDA));
    n++;
    assert_true(s.m[0].dropped && s.m[0].w == 0.0 && s.lead != 0 && !s.st.fell_back);
    assert_true(isfinite(R) && fabs(s.m[1].w + s.m[2].w - 1.0) < 1e-12);
    s.m[1].est.p.n = NAN;
    s.m[2].est.p.n = NAN;
    drths_smith_step(&s, ex_x[n], ex_v[n], CMD);
    assert_true(s.st.fell_back && s.st.fallback_step == n);
    assert_non_null(strstr(drths_smith_fallback_reason(&s), "force stopped being finite"));
    assert_true(isfinite(drths_smith_force(&s, n, 1000.0))); /* the nominal model goes on */
    drths_smith_close(&s);
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The RT budget: the work of one step and one measured force of the adaptive predictor is
 * bounded by the substep cap of the estimates' models (the bank's member started at n x2 is its
 * stiffest state in these tests). The time per step is printed for information only: timing
 * goals are benchmarks' (a unit test on a loaded machine cannot assert one). */
static void test_adaptive_work_is_bounded(void **state)
{
    (void)state;
    excitation();
    drths_damper_params_t p;
    params(&p);
    for (int c = 0; c < 3; c++) {
        drths_smith_t s;
        drths_smith_mode_t mode = c == 0 ? DRTHS_SMITH_FIXED : DRTHS_SMITH_ADAPTIVE;
        drths_smith_adapt_params_t ap;
        drths_smith_adapt_default(&ap);
        ap.members = c == 1 ? 1 : DRTHS_SMITH_MEMBERS;
        assert_int_equal(drths_smith_init_ex(&s, mode, &p, DT, LDA + 64, &ap, NULL), 0);
        assert_int_equal(drths_smith_reset(&s, CMD, LDA), 0);
        double worst = 0.0, t0 = now_ns();
        for (long n = 1; n <= 20000; n++) {
            double a = now_ns();
            drths_smith_step(&s, ex_x[n], ex_v[n], ex_c[n]);
            drths_smith_force(&s, n, 1.1 * drths_smith_model(&s, n - LDA));
            worst = fmax(worst, now_ns() - a);
        }
        double mean = (now_ns() - t0) / 20000;
        int sub = s.model.substeps;
        for (int j = 0; j < s.nm; j++) {
            assert_true(s.m[j].est.substeps <= s.ap.max_substeps);
            sub = s.m[j].est.substeps > sub ? s.m[j].est.substeps : sub;
        }
        print_message("%s: %.0f ns per step on average, %.0f ns at worst (most substeps %d)\n",
                      c == 0   ? "fixed"
                      : c == 1 ? "adaptive, one identifier"
                               : "adaptive, bank of 3",
                      mean, worst, sub);
        drths_smith_close(&s);
    }
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
        cmocka_unit_test(test_adaptive_identifies_the_damper),
        cmocka_unit_test(test_adaptive_equals_fixed_when_exact),
        cmocka_unit_test(test_adaptive_falls_back_on_junk),
        cmocka_unit_test(test_adaptive_guards),
        cmocka_unit_test(test_adaptive_drops_a_member),
        cmocka_unit_test(test_adaptive_work_is_bounded),
        cmocka_unit_test(test_force_at_names_the_applied_step),
        cmocka_unit_test(test_exact_model_removes_delay),
        cmocka_unit_test(test_off_mode_passes_measurement),
        cmocka_unit_test(test_concealment_uses_last_correction),
        cmocka_unit_test(test_history_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
