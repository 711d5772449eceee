/* The damper model's identification (common/models/damperfit.h) on synthetic records: a
 * protocol of sinusoids over amplitudes and currents, the force of a damper unlike the
 * nominal model (every coefficient scaled, n too) with load-cell noise, fitted from the nominal
 * model. Each fitted parameter must come within 2 % of the truth (in the fit's gauge of A) and
 * within a few standard uncertainties; a wrong record (the force of another damper) must leave
 * a large force error. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/damperfit.h"

#define DT 4e-3
#define NOISE_N 50.0

typedef struct {
    double *x, *v, *cmd, *f;
    int *test;
    long n;
    int n_tests;
} rec_t;

/* The record as the fit's data; the protocol's highest current is 2.5 A. */
static drths_damperfit_data_t data_of(const rec_t *r)
{
    return (drths_damperfit_data_t){r->x, r->v, r->cmd, r->f, r->test, r->n, r->n_tests, DT, 2.5};
}

/* Fits r from start (at most 100 iterations); the test fails when the fit does not run. */
static void fit(const rec_t *r, const drths_damper_params_t *start, drths_damperfit_result_t *res)
{
    drths_damperfit_data_t d = data_of(r);
    drths_error_t err = {{0}};
    if (drths_damperfit_run(&d, start, 0, res, &err))
        fail_msg("fit failed: %s", err.msg);
}

static uint64_t rng = 88172645463325252ULL;

static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(void)
{
    return sqrt(-2.0 * log(uniform())) * cos(2.0 * M_PI * uniform());
}

/* Sinusoids: 2 amplitudes x the ncur currents cur at 1 Hz, two cycles each (the first and last
 * with a half-cosine ramp of the amplitude), 0.3 s at rest between; the force of `truth` plus
 * noise. */
static void make_record_at(rec_t *r, const drths_damper_params_t *truth, const double *cur,
                           int ncur)
{
    static const double amp[] = {0.003, 0.010};
    const long per = (long)(1.0 / DT), rest = (long)(0.3 / DT), cycles = 2;
    const long cap = 2 * ncur * (cycles * per + rest) + 1;
    r->x = calloc((size_t)cap, sizeof(double));
    r->v = calloc((size_t)cap, sizeof(double));
    r->cmd = calloc((size_t)cap, sizeof(double));
    r->f = calloc((size_t)cap, sizeof(double));
    r->test = calloc((size_t)cap, sizeof(int));
    assert_non_null(r->test);
    long k = 0;
    int t = 0;
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < ncur; c++, t++) {
            for (long i = 0; i < rest; i++, k++) {
                r->cmd[k] = cur[c];
                r->test[k] = -1;
            }
            for (long i = 0; i < cycles * per; i++, k++) {
                double s = (double)i / (double)per, w = 2.0 * M_PI;
                double e = 1.0, de = 0.0;
                if (s < 1.0)
                    e = 0.5 * (1.0 - cos(M_PI * s)), de = 0.5 * M_PI * sin(M_PI * s);
                else if (s > cycles - 1.0)
                    e = 0.5 * (1.0 + cos(M_PI * (s - cycles + 1.0))),
                    de = -0.5 * M_PI * sin(M_PI * (s - cycles + 1.0));
                r->x[k] = amp[a] * e * sin(w * s);
                r->v[k] = amp[a] * (de * sin(w * s) + e * w * cos(w * s));
                r->cmd[k] = cur[c];
                r->test[k] = t;
            }
        }
    r->n = k;
    r->n_tests = t;
    drths_damperfit_data_t d = data_of(r);
    assert_int_equal(drths_damperfit_simulate(&d, truth, r->f, NULL), 0);
    for (long i = 0; i < r->n; i++)
        r->f[i] += NOISE_N * gauss();
}

static void make_record(rec_t *r, const drths_damper_params_t *truth)
{
    static const double cur[] = {0.0, 0.1, 0.25, 0.5, 1.0, 2.5};
    make_record_at(r, truth, cur, 6);
}

static void free_record(rec_t *r)
{
    free(r->x), free(r->v), free(r->cmd), free(r->f), free(r->test);
}

static void test_recovers_parameters(void **state)
{
    (void)state;
    drths_damper_params_t nominal, truth, gauged;
    drths_damper_params_preset(&nominal, DRTHS_DAMPER_PHILLIPS2013);
    truth = nominal;
    drths_damper_params_scale(&truth, 1.2, 0.85, 1.15, 0.8, 1.3);
    truth.n = 1.9;
    rec_t r;
    make_record(&r, &truth);
    drths_damperfit_result_t res;
    fit(&r, &nominal, &res);
    drths_damperfit_gauge(&truth, nominal.A, &gauged);
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
        double want = drths_damperfit_get(&gauged, i), got = res.value[i];
        printf("  %-8s %12.6g +- %-10.3g true %12.6g  %s\n", drths_damperfit_name(i), got, res.u[i],
               want, res.fitted[i] ? "" : "(fixed)");
        if (!res.fitted[i]) {
            assert_non_null(drths_damperfit_fixed_reason(i));
            assert_true(got == drths_damperfit_get(&nominal, i));
            continue;
        }
        if (want == 0.0) { /* k0, k1: absolute, in the force/length unit (kN/mm) */
            if (fabs(got) > 0.01)
                fail_msg("%s = %g, true 0", drths_damperfit_name(i), got);
            continue;
        }
        if (fabs(got - want) > 0.02 * fabs(want))
            fail_msg("%s = %g, true %g (%.2f %%)", drths_damperfit_name(i), got, want,
                     100.0 * (got - want) / want);
        /* Every current tested, the force well above the noise: nothing to warn of. */
        if (res.weak[i])
            fail_msg("%s flagged: %s", drths_damperfit_name(i),
                     drths_damperfit_weak_text(res.weak[i]));
    }
    printf("  force error %.1f N RMS of %.0f N, %d iterations\n", res.rms_N, res.force_rms_N,
           res.iterations);
    /* The residual is the load cell's noise, no more. */
    assert_true(res.rms_N < 1.2 * NOISE_N);
    for (int t = 0; t < r.n_tests; t++)
        assert_true(res.test_rms_N[t] < 1.5 * NOISE_N);
    free_record(&r);
}

/* Tests at two currents (the force guard left out the strong ones) fix each current-dependent
 * coefficient at those two only: its c is held at the starting value, with the reason, and a, b
 * are fitted; at one current b and c are held. The truth has the nominal c's (what a held c
 * assumes), so a and b must come within 2 % and the force error stay at the noise. */
static void test_held_by_the_currents(void **state)
{
    (void)state;
    static const double two[] = {0.0, 0.5}, one[] = {0.5};
    for (int ncur = 2; ncur >= 1; ncur--) {
        drths_damper_params_t nominal, truth, gauged;
        drths_damper_params_preset(&nominal, DRTHS_DAMPER_PHILLIPS2013);
        truth = nominal;
        truth.alpha_a *= 1.2, truth.alpha_b *= 1.2, truth.c0_a *= 0.85, truth.c0_b *= 0.85;
        truth.c1_a *= 1.15, truth.c1_b *= 1.15;
        rec_t r;
        make_record_at(&r, &truth, ncur == 2 ? two : one, ncur);
        drths_damperfit_result_t res;
        fit(&r, &nominal, &res);
        assert_int_equal(res.n_commands, ncur);
        assert_true(res.commands[ncur - 1] == 0.5);
        drths_damperfit_gauge(&truth, nominal.A, &gauged);
        for (int i = DRTHS_DAMPERFIT_ALPHA_A; i <= DRTHS_DAMPERFIT_BETA_C; i++) {
            const int which = i % 3; /* a, b, c */
            const int held = which == 2 || (which == 1 && ncur == 1);
            assert_int_equal(res.fitted[i], !held);
            assert_int_equal(res.held[i], !held       ? DRTHS_DAMPERFIT_NOT_HELD
                                          : ncur == 2 ? DRTHS_DAMPERFIT_HELD_TWO_CURRENTS
                                                      : DRTHS_DAMPERFIT_HELD_ONE_CURRENT);
            if (held)
                assert_non_null(drths_damperfit_held_text(res.held[i]));
            if (held) {
                assert_true(res.value[i] == drths_damperfit_get(&nominal, i));
                assert_int_equal(res.weak[i], DRTHS_DAMPERFIT_NOT_WEAK);
                continue;
            }
            /* Tests up to 0.5 A of the protocol's 2.5 A: a fitted b is carried beyond them. */
            if (which == 1)
                assert_true(res.weak[i] == DRTHS_DAMPERFIT_WEAK_EXTRAPOLATED ||
                            res.weak[i] == DRTHS_DAMPERFIT_WEAK_UNCERTAIN);
            double want = drths_damperfit_get(&gauged, i), got = res.value[i];
            if (ncur == 1) { /* a: what one current identifies, p(0.5) through the held b, c */
                const double *fa = &res.value[i], *ta = &want;
                double tb = drths_damperfit_get(&gauged, i + 1);
                double tc = drths_damperfit_get(&gauged, i + 2);
                want = tb + (*ta - tb) * exp(-tc * 0.5);
                got = fa[1] + (fa[0] - fa[1]) * exp(-fa[2] * 0.5);
            }
            if (fabs(got - want) > 0.02 * fabs(want))
                fail_msg("%d currents: %s = %g, true %g (%.2f %%)", ncur, drths_damperfit_name(i),
                         got, want, 100.0 * (got - want) / want);
        }
        assert_true(res.rms_N < 1.2 * NOISE_N);
        free_record(&r);
    }
}

/* A damper whose hysteresis the record resolves poorly (n = 4: its Bouc-Wen force is a seventh
 * of n = 2's, gamma and beta a few N against the load cell's noise): every fitted parameter is
 * either within 2 % of the truth or flagged not within 2 % (seen: gamma, beta 6-12 % off with
 * 3-4 % uncertainty, unflagged before), and some are flagged. With a twentieth of the noise the
 * same record flags none: the flag is the record's, not the damper's. */
static void test_weak_says_what_is_not_within_2pct(void **state)
{
    (void)state;
#ifdef __SANITIZE_THREAD__
    /* Two fits of one thread, 20 s in a plain build: beyond the test's time under
     * ThreadSanitizer, which has nothing to check in them (the ASan build runs it). */
    skip();
#endif
    for (int quiet = 0; quiet <= 1; quiet++) {
        drths_damper_params_t nominal, truth, gauged;
        drths_damper_params_preset(&nominal, DRTHS_DAMPER_PHILLIPS2013);
        truth = nominal;
        truth.n = 4.0;
        rec_t r;
        make_record(&r, &truth);
        if (quiet) { /* the same record with a twentieth of the noise */
            drths_damperfit_data_t d0 = data_of(&r);
            assert_int_equal(drths_damperfit_simulate(&d0, &truth, r.f, NULL), 0);
            for (long i = 0; i < r.n; i++)
                r.f[i] += 0.05 * NOISE_N * gauss();
        }
        drths_damperfit_result_t res;
        fit(&r, &nominal, &res);
        drths_damperfit_gauge(&truth, nominal.A, &gauged);
        int n_weak = 0;
        for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
            const double want = drths_damperfit_get(&gauged, i), got = res.value[i];
            if (!res.fitted[i] || want == 0.0)
                continue;
            const double pct = 100.0 * (got - want) / want;
            printf("  %s noise: %-8s %+7.2f %% (u %.2f %%)%s\n", quiet ? "0.05x" : "1x",
                   drths_damperfit_name(i), pct, 100.0 * res.u[i] / fabs(got),
                   res.weak[i] ? " flagged" : "");
            n_weak += res.weak[i] != 0;
            if (fabs(pct) > 2.0 && !res.weak[i])
                fail_msg("%s %.2f %% off and not flagged", drths_damperfit_name(i), pct);
            if (res.weak[i])
                assert_int_equal(res.weak[i], DRTHS_DAMPERFIT_WEAK_UNCERTAIN);
        }
        if (quiet)
            assert_int_equal(n_weak, 0);
        else
            assert_true(n_weak > 0);
        free_record(&r);
    }
}

/* A damper far from the starting model in its hysteretic force's two scales and in n at once
 * (the study's draw 91, mixed-1, in the fit's gauge: alpha x3.5, gamma and beta x5.6, n 2.54,
 * c0 x1.25, c1 x0.61): found, its force error at the noise. Before the scan of the two scales
 * every start in n ended at 45 % force error with beta_a collapsed to 0. */
static void test_far_damper_found(void **state)
{
    (void)state;
#ifdef __SANITIZE_THREAD__
    skip(); /* one long single-thread fit, as above */
#endif
    drths_damper_params_t nominal, truth;
    drths_damper_params_preset(&nominal, DRTHS_DAMPER_PHILLIPS2013);
    truth = nominal;
    drths_damper_params_scale(&truth, 3.5, 1.25, 0.61, 5.6, 1.0);
    truth.n = 2.54;
    rec_t r;
    make_record(&r, &truth);
    drths_damperfit_result_t res;
    fit(&r, &nominal, &res);
    printf("  far damper: force error %.1f N RMS of %.0f N, alpha_a %.4g (true %.4g), n %.4g\n",
           res.rms_N, res.force_rms_N, res.value[DRTHS_DAMPERFIT_ALPHA_A], truth.alpha_a,
           res.value[DRTHS_DAMPERFIT_N]);
    assert_true(res.rms_N < 1.2 * NOISE_N);
    assert_true(fabs(res.value[DRTHS_DAMPERFIT_N] / truth.n - 1.0) < 0.02);
    free_record(&r);
}

/* A record of a damper far outside the fit's reach is not passed off as fitted: the force
 * error stays well above the noise. */
static void test_wrong_record_leaves_error(void **state)
{
    (void)state;
    drths_damper_params_t nominal, other;
    drths_damper_params_preset(&nominal, DRTHS_DAMPER_PHILLIPS2013);
    other = nominal;
    rec_t r;
    make_record(&r, &other);
    /* A force the model cannot produce: the damper's force plus a spring of 5 kN/mm about
     * x = 2 mm (k1 x0 is fixed at 0, so the offset cannot be fitted). */
    for (long i = 0; i < r.n; i++)
        r.f[i] += 5e6 * (r.x[i] - 0.002);
    drths_damperfit_data_t d = data_of(&r);
    drths_damperfit_result_t res;
    assert_int_equal(drths_damperfit_run(&d, &nominal, 5, &res, NULL), 0);
    assert_true(res.rms_N > 5.0 * NOISE_N);
    free_record(&r);
}

static void test_refuses(void **state)
{
    (void)state;
    drths_damper_params_t p;
    drths_damper_params_preset(&p, DRTHS_DAMPER_SPENCER1997);
    double x[400] = {0}, f[400] = {0};
    drths_damperfit_data_t d = {x, x, x, f, NULL, 400, 0, DT, 0.0};
    drths_damperfit_result_t res;
    drths_error_t err = {{0}};
    assert_int_equal(drths_damperfit_run(&d, &p, 0, &res, &err), -ENOTSUP);
    assert_non_null(strstr(err.msg, "phillips2013"));
    drths_damper_params_preset(&p, DRTHS_DAMPER_PHILLIPS2013);
    d.n = 50;
    assert_int_equal(drths_damperfit_run(&d, &p, 0, &res, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "samples"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recovers_parameters),
        cmocka_unit_test(test_held_by_the_currents),
        cmocka_unit_test(test_weak_says_what_is_not_within_2pct),
        cmocka_unit_test(test_far_damper_found),
        cmocka_unit_test(test_wrong_record_leaves_error),
        cmocka_unit_test(test_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
