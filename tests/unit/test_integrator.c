/* Integrators against exact solutions: second-order convergence of Chen-Ricles and central
 * difference (damped SDOF free and forced through ag, 3-DOF undamped modal), the central
 * difference stability limit, the sign convention of f_spec, and no allocation per step; the
 * modal form against the full form (equal to 1e-9 with every mode), truncation and its choice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/models/integrator.h"
#include "common/models/structure.h"

#include "alloc_count.h"

static const double default_mass[3] = {5.0e4, 5.0e4, 5.0e4};
static const double default_k[3] = {7.3955e7, 1.00510e8, 8.5740e7};

static const char *kind_name(drths_integrator_kind_t kind)
{
    return kind == DRTHS_INTEGRATOR_CHEN_RICLES ? "chen-ricles" : "central difference";
}

/* ---- SDOF exact solution of x'' + 2 z w x' + w^2 x = -A sin(W t), x(0) = x0, x'(0) = 0. */
typedef struct {
    double m, c, k, w, z, wd;
    double A, W; /* ground acceleration amplitude (m/s^2) and circular frequency */
    double x0;
} sdof_t;

static void sdof_exact(const sdof_t *p, double t, double *x, double *v)
{
    double P = 0.0, Q = 0.0;
    if (p->A != 0.0) {
        /* Particular solution P sin(W t) + Q cos(W t). */
        double a = p->w * p->w - p->W * p->W, b = 2.0 * p->z * p->w * p->W;
        double det = a * a + b * b;
        P = -p->A * a / det;
        Q = p->A * b / det;
    }
    /* Homogeneous part e^(-z w t) (B cos wd t + D sin wd t) matching the initial state. */
    double B = p->x0 - Q;
    double vh0 = 0.0 - P * p->W;
    double D = (vh0 + p->z * p->w * B) / p->wd;
    double ex = exp(-p->z * p->w * t), cs = cos(p->wd * t), sn = sin(p->wd * t);
    *x = ex * (B * cs + D * sn) + P * sin(p->W * t) + Q * cos(p->W * t);
    *v = ex * (-p->z * p->w * (B * cs + D * sn) + p->wd * (-B * sn + D * cs)) +
         P * p->W * cos(p->W * t) - Q * p->W * sin(p->W * t);
}

/* Integrates the SDOF to time T with step dt; returns the phase-space error
 * sqrt(ex^2 + (ev / w)^2) at T, which does not vanish at a zero crossing of x. */
static double sdof_error(const sdof_t *p, drths_integrator_kind_t kind, double T, double dt)
{
    drths_structure_t s;
    drths_integrator_t it;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 1, &p->m, &p->k, &err), 0);
    assert_int_equal(drths_structure_set_modal_damping(&s, &p->z, 1, &err), 0);
    assert_true(fabs(s.C[0] - p->c) < 1e-12 * p->c);
    assert_int_equal(drths_integrator_init(&it, &s, kind, dt, &err), 0);
    drths_integrator_reset(&it, &p->x0, NULL, 0.0, NULL);
    long steps = lround(T / dt);
    for (long k = 1; k <= steps; k++)
        drths_integrator_correct(&it, p->A * sin(p->W * k * dt), NULL);
    double x, v;
    sdof_exact(p, steps * dt, &x, &v);
    double e = hypot(it.x[0] - x, (it.v[0] - v) / p->w);
    drths_integrator_close(&it);
    drths_structure_close(&s);
    return e;
}

/* Asserts an observed order between 1.8 and 2.2 for each halving of dt. */
static void assert_order2(const char *what, drths_integrator_kind_t kind, const double e[4],
                          double dt0)
{
    for (int i = 0; i < 4; i++) {
        print_message("%s, %s: dt %.6f s  error %.3e", what, kind_name(kind), dt0 / (1 << i), e[i]);
        if (i)
            print_message("  observed order %.3f", log2(e[i - 1] / e[i]));
        print_message("\n");
    }
    for (int i = 1; i < 4; i++) {
        double order = log2(e[i - 1] / e[i]);
        assert_true(order > 1.8 && order < 2.2);
    }
}

static sdof_t make_sdof(double f_hz, double zeta, double x0, double A, double fg_hz)
{
    sdof_t p;
    p.m = 2.0e4;
    p.w = 2.0 * M_PI * f_hz;
    p.z = zeta;
    p.k = p.m * p.w * p.w;
    p.c = 2.0 * zeta * p.w * p.m;
    p.wd = p.w * sqrt(1.0 - zeta * zeta);
    p.A = A;
    p.W = 2.0 * M_PI * fg_hz;
    p.x0 = x0;
    return p;
}

static void test_sdof_convergence(void **state)
{
    (void)state;
    const drths_integrator_kind_t kinds[2] = {DRTHS_INTEGRATOR_CHEN_RICLES,
                                              DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE};
    const double dt0 = 0.01, T = 2.0;
    for (int q = 0; q < 2; q++) {
        /* Free vibration, 2 Hz, 5 % damping, from 10 mm. */
        sdof_t free_p = make_sdof(2.0, 0.05, 0.01, 0.0, 0.0);
        double e[4];
        for (int i = 0; i < 4; i++)
            e[i] = sdof_error(&free_p, kinds[q], T, dt0 / (1 << i));
        assert_order2("SDOF free vibration", kinds[q], e, dt0);
        /* Forced from rest through ag = 1 m/s^2 sin(2 pi 1.3 Hz t). */
        sdof_t forced = make_sdof(2.0, 0.05, 0.0, 1.0, 1.3);
        for (int i = 0; i < 4; i++)
            e[i] = sdof_error(&forced, kinds[q], T, dt0 / (1 << i));
        assert_order2("SDOF harmonic ag", kinds[q], e, dt0);
    }
}

/* 3-DOF undamped default building released from a mix of all three modes: exact by modal
 * superposition. Returns the energy-norm error sqrt(ex^T K ex + ev^T M ev) at T. */
static double modal_error(drths_integrator_kind_t kind, double T, double dt)
{
    drths_structure_t s;
    drths_integrator_t it;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, default_k, &err), 0);
    assert_int_equal(drths_structure_modes(&s, &err), 0);
    const double q0[3] = {0.02 * sqrt(5e4), 0.005 * sqrt(5e4), 0.002 * sqrt(5e4)};
    double x0[3] = {0}, xe[3] = {0}, ve[3] = {0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double w = s.omega_rad_s[j];
            x0[i] += s.phi[i * 3 + j] * q0[j];
            xe[i] += s.phi[i * 3 + j] * q0[j] * cos(w * T);
            ve[i] += -s.phi[i * 3 + j] * q0[j] * w * sin(w * T);
        }
    assert_int_equal(drths_integrator_init(&it, &s, kind, dt, &err), 0);
    drths_integrator_reset(&it, x0, NULL, 0.0, NULL);
    long steps = lround(T / dt);
    assert_true(fabs(steps * dt - T) < 1e-12);
    for (long k = 1; k <= steps; k++)
        drths_integrator_correct(&it, 0.0, NULL);
    double ex[3], ev[3], en = 0.0;
    for (int i = 0; i < 3; i++) {
        ex[i] = it.x[i] - xe[i];
        ev[i] = it.v[i] - ve[i];
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            en += ex[i] * s.K[i * 3 + j] * ex[j] + ev[i] * s.M[i * 3 + j] * ev[j];
    drths_integrator_close(&it);
    drths_structure_close(&s);
    return sqrt(en);
}

static void test_modal_convergence(void **state)
{
    (void)state;
    const drths_integrator_kind_t kinds[2] = {DRTHS_INTEGRATOR_CHEN_RICLES,
                                              DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE};
    const double dt0 = 0.004, T = 1.0;
    for (int q = 0; q < 2; q++) {
        double e[4];
        for (int i = 0; i < 4; i++)
            e[i] = modal_error(kinds[q], T, dt0 / (1 << i));
        assert_order2("3-DOF undamped modal", kinds[q], e, dt0);
    }
}

static void test_central_difference_limit(void **state)
{
    (void)state;
    drths_structure_t s;
    drths_integrator_t it;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, default_k, &err), 0);
    assert_int_equal(drths_structure_modes(&s, &err), 0);
    double dt_lim = 2.0 / s.omega_rad_s[2];
    print_message("central difference limit for the default building: %.6g s\n", dt_lim);
    assert_true(fabs(dt_lim - 2.0 / (2 * M_PI * 12.34)) < 1e-3 * dt_lim);

    assert_int_equal(
        drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE, dt_lim * 1.001, &err),
        -EINVAL);
    print_message("%s\n", err.msg);
    char want[256];
    snprintf(want, sizeof want,
             "central difference is unstable at dt = %g s: highest mode 12.34 Hz needs dt <= "
             "%.6g s; use chen-ricles or a higher rate_hz",
             dt_lim * 1.001, dt_lim);
    assert_string_equal(err.msg, want);
    drths_integrator_close(&it); /* a failed init leaves nothing; close is still safe */
    assert_int_equal(
        drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE, 0.04, &err), -EINVAL);
    /* Chen-Ricles takes any step. */
    assert_int_equal(drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CHEN_RICLES, 0.04, &err), 0);
    drths_integrator_close(&it);

    /* Just below the limit the integrator is accepted and stays bounded over 20000 steps from
     * the third mode (where the growth would show first). */
    assert_int_equal(
        drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE, dt_lim * 0.999, &err),
        0);
    double x0[3];
    for (int i = 0; i < 3; i++)
        x0[i] = s.phi[i * 3 + 2] * 0.01;
    drths_integrator_reset(&it, x0, NULL, 0.0, NULL);
    double peak = 0.0;
    for (int k = 0; k < 20000; k++) {
        drths_integrator_correct(&it, 0.0, NULL);
        peak = fmax(peak, fabs(it.x[0]));
    }
    print_message("just below the limit: peak |x1| %.6g m from %.6g m\n", peak, fabs(x0[0]));
    /* Released from rest in one mode, central difference gives x(k) = x0 cos(k theta) with
     * cos(theta) = 1 - (w dt)^2 / 2: bounded by |x0| even next to the limit (above it, the
     * amplitude would grow without bound). */
    assert_true(peak <= fabs(x0[0]) * (1.0 + 1e-6));
    drths_integrator_close(&it);
    drths_integrator_close(&it);

    /* Bad steps. */
    assert_int_equal(drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CHEN_RICLES, 0.0, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "dt must be > 0"));
    assert_int_equal(drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CHEN_RICLES, NAN, &err),
                     -EINVAL);
    drths_structure_close(&s);
}

/* Runs the damped default building under ag = 2 m/s^2 sin(2 pi 2.5 Hz t) from x(0) = 5 mm at
 * the first floor, with a specimen at floor 1 (DOF 0) giving f = ks x1 + cs v1 (v1 the velocity
 * predict() hands out, or with raw_w Chen-Ricles' own w(k+1)), and with dk, dc added to the
 * matrices' (0,0) entries instead. Stores the first-floor displacement history in out. */
static void run_building(drths_integrator_kind_t kind, double dt, long steps, double ks, double cs,
                         double dk, double dc, int raw_w, double *out)
{
    drths_structure_t base, s;
    drths_integrator_t it;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&base, 3, default_mass, default_k, &err), 0);
    const double z = 0.02;
    assert_int_equal(drths_structure_set_modal_damping(&base, &z, 1, &err), 0);
    double K[9], C[9];
    memcpy(K, base.K, sizeof K);
    memcpy(C, base.C, sizeof C);
    K[0] += dk;
    C[0] += dc;
    assert_int_equal(drths_structure_init_matrices(&s, 3, base.M, C, K, &err), 0);
    assert_int_equal(drths_integrator_init(&it, &s, kind, dt, &err), 0);
    const double x0[3] = {0.005, 0.0, 0.0};
    double f[3] = {ks * x0[0], 0.0, 0.0};
    drths_integrator_reset(&it, x0, NULL, 0.0, f);
    out[0] = it.x[0];
    for (long k = 1; k <= steps; k++) {
        double x1[3], v1[3];
        drths_integrator_predict(&it, x1, v1);
        f[0] = ks * x1[0] + cs * (raw_w ? it.vq[0] : v1[0]);
        drths_integrator_correct(&it, 2.0 * sin(2 * M_PI * 2.5 * k * dt), f);
        out[k] = it.x[0];
    }
    drths_integrator_close(&it);
    drths_structure_close(&s);
    drths_structure_close(&base);
}

static double max_diff(const double *a, const double *b, long n, double *peak)
{
    double d = 0.0, p = 0.0;
    for (long i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        p = fmax(p, fabs(b[i]));
    }
    *peak = p;
    return d;
}

static void test_specimen_sign(void **state)
{
    (void)state;
    const double ks = 3.0e7; /* 40 % of the first storey */
    const double T = 2.0;
    double peak;
    /* Central difference: x(k+1) does not depend on K, so the specimen spring reproduces K + ks to
     * rounding. */
    {
        const double dt = 0.002;
        long steps = lround(T / dt);
        double *h = calloc(steps + 1, sizeof(double)), *r = calloc(steps + 1, sizeof(double));
        double *wrong = calloc(steps + 1, sizeof(double));
        run_building(DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE, dt, steps, ks, 0, 0, 0, 0, h);
        run_building(DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE, dt, steps, 0, 0, ks, 0, 0, r);
        run_building(DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE, dt, steps, 0, 0, -ks, 0, 0, wrong);
        double d = max_diff(h, r, steps + 1, &peak);
        double dw = max_diff(wrong, r, steps + 1, &peak);
        print_message("central difference, spring specimen vs K + ks: max diff %.3g m of peak "
                      "%.3g m (opposite sign: %.3g m)\n",
                      d, peak, dw);
        assert_true(d < 1e-12 * peak);
        assert_true(dw > 0.1 * peak);
        free(h), free(r), free(wrong);
    }
    /* Chen-Ricles: alpha is built from the substructure's K only, so the two runs differ by the
     * discretisation error, which must vanish at second order (both converge to the solution of
     * K + ks); with the opposite sign they converge to a different solution. */
    {
        double d[3];
        for (int i = 0; i < 3; i++) {
            double dt = 0.004 / (1 << i);
            long steps = lround(T / dt);
            double *h = calloc(steps + 1, sizeof(double)), *r = calloc(steps + 1, sizeof(double));
            run_building(DRTHS_INTEGRATOR_CHEN_RICLES, dt, steps, ks, 0, 0, 0, 0, h);
            run_building(DRTHS_INTEGRATOR_CHEN_RICLES, dt, steps, 0, 0, ks, 0, 0, r);
            d[i] = max_diff(h, r, steps + 1, &peak);
            print_message("chen-ricles, spring specimen vs K + ks: dt %.4f s max diff %.3g m of "
                          "peak %.3g m\n",
                          dt, d[i], peak);
            free(h), free(r);
        }
        for (int i = 1; i < 3; i++)
            assert_true(log2(d[i - 1] / d[i]) > 1.8 && log2(d[i - 1] / d[i]) < 2.2);
        assert_true(d[2] < 1e-3 * peak);
    }
}

/* A viscous specimen f = cs v seen through predict(): the run must converge at (at least) second
 * order to the structure with cs added to C. Chen-Ricles' own velocity w(k+1) = (x(k+1) - x(k))
 * / dt would give only first order, which is why predict() hands out an estimate instead. */
static void test_velocity_specimen(void **state)
{
    (void)state;
    const double cs = 2.0e6; /* N s/m: about 8 % extra damping in mode 1 */
    const double T = 2.0;
    const struct {
        drths_integrator_kind_t kind;
        int raw_w;
        const char *name;
        double lo, hi; /* accepted observed order */
    } cases[3] = {
        {DRTHS_INTEGRATOR_CHEN_RICLES, 0, "chen-ricles", 1.8, 2.2},
        {DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE, 0, "central difference", 1.8, 3.2},
        {DRTHS_INTEGRATOR_CHEN_RICLES, 1, "chen-ricles fed its own w(k+1)", 0.9, 1.1},
    };
    for (int q = 0; q < 3; q++) {
        double d[4], peak;
        for (int i = 0; i < 4; i++) {
            double dt = 0.004 / (1 << i);
            long steps = lround(T / dt);
            double *h = calloc(steps + 1, sizeof(double)), *r = calloc(steps + 1, sizeof(double));
            run_building(cases[q].kind, dt, steps, 0, cs, 0, 0, cases[q].raw_w, h);
            run_building(cases[q].kind, dt, steps, 0, 0, 0, cs, 0, r);
            d[i] = max_diff(h, r, steps + 1, &peak);
            print_message("%s, dashpot specimen vs C + cs: dt %.4f s max diff %.3g m of peak "
                          "%.3g m",
                          cases[q].name, dt, d[i], peak);
            if (i)
                print_message("  observed order %.3f", log2(d[i - 1] / d[i]));
            print_message("\n");
            free(h), free(r);
        }
        for (int i = 2; i < 4; i++) {
            double order = log2(d[i - 1] / d[i]);
            assert_true(order > cases[q].lo && order < cases[q].hi);
        }
        if (!cases[q].raw_w)
            assert_true(d[3] < 1e-4 * peak);
    }
}

static void test_reset_predict_correct(void **state)
{
    (void)state;
    drths_structure_t s;
    drths_integrator_t a, b;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, default_k, &err), 0);
    const double z = 0.02;
    assert_int_equal(drths_structure_set_modal_damping(&s, &z, 1, &err), 0);
    for (int kind = 0; kind < 2; kind++) {
        assert_int_equal(drths_integrator_init(&a, &s, kind, 0.0002, &err), 0);
        assert_int_equal(drths_integrator_init(&b, &s, kind, 0.0002, &err), 0);
        /* a0 from equilibrium: M a0 = -M iota ag0 - f0 - C v0 - K x0. */
        const double x0[3] = {0.001, 0.002, 0.003}, v0[3] = {0.01, -0.02, 0.03};
        const double f0[3] = {1e4, -1e4, 0.0}, ag0 = 0.7;
        drths_integrator_reset(&a, x0, v0, ag0, f0);
        for (int i = 0; i < 3; i++) {
            double r = -s.M[i * 4] * ag0 - f0[i];
            for (int j = 0; j < 3; j++)
                r -= s.C[i * 3 + j] * v0[j] + s.K[i * 3 + j] * x0[j];
            assert_true(fabs(a.a[i] - r / s.M[i * 4]) < 1e-12 * fabs(r / s.M[i * 4]) + 1e-12);
            assert_true(a.x[i] == x0[i] && a.v[i] == v0[i]);
        }
        assert_int_equal(a.k, 0);
        drths_integrator_reset(&b, x0, v0, ag0, f0);
        /* predict() twice gives the same values; correct() without predict() predicts itself. */
        double x1[3], v1[3], x1b[3], v1b[3];
        drths_integrator_predict(&a, x1, v1);
        drths_integrator_predict(&a, x1b, v1b);
        assert_memory_equal(x1, x1b, sizeof x1);
        assert_memory_equal(v1, v1b, sizeof v1);
        if (kind == DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE)
            for (int i = 0; i < 3; i++) /* step 0: v0 + dt a0 */
                assert_true(fabs(v1[i] - (v0[i] + 0.0002 * a.a[i])) < 1e-15);
        drths_integrator_correct(&a, 0.5, f0);
        drths_integrator_correct(&b, 0.5, f0);
        assert_memory_equal(a.x, b.x, 3 * sizeof(double));
        assert_memory_equal(a.v, b.v, 3 * sizeof(double));
        assert_memory_equal(a.a, b.a, 3 * sizeof(double));
        assert_memory_equal(a.x, x1, sizeof x1);
        /* The estimate handed out differs from the final v(1) by the extrapolation error of the
         * recurrence's acceleration: dt/2 (ai(1) - 2 ai(0) + ai(-1)), with ai(-1) = ai(0). */
        for (int i = 0; i < 3; i++) {
            double want = 0.5 * 0.0002 * (a.ai[i] - a.ai_prev[i]);
            assert_true(fabs((a.v[i] - v1[i]) - want) < 1e-12 * fabs(a.v[i]) + 1e-15);
        }
        assert_int_equal(a.k, 1);
        /* The state at step 1 satisfies equilibrium with the force at step 1. */
        for (int i = 0; i < 3; i++) {
            double r = s.M[i * 4] * (a.a[i] + 0.5) + f0[i];
            double scale = fabs(s.M[i * 4] * a.a[i]) + fabs(f0[i]);
            for (int j = 0; j < 3; j++) {
                r += s.C[i * 3 + j] * a.v[j] + s.K[i * 3 + j] * a.x[j];
                scale += fabs(s.K[i * 3 + j] * a.x[j]);
            }
            assert_true(fabs(r) < 1e-12 * scale);
        }
        drths_integrator_close(&a);
        drths_integrator_close(&b);
    }
    drths_structure_close(&s);
}

static void test_no_allocation_per_step(void **state)
{
    (void)state;
    if (!COUNT_ALLOCS) {
        print_message("sanitizer build: allocation counting skipped\n");
        skip();
    }
    drths_structure_t s;
    drths_integrator_t it;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, default_k, &err), 0);
    const double z = 0.02;
    assert_int_equal(drths_structure_set_modal_damping(&s, &z, 1, &err), 0);
    for (int kind = 0; kind < 2; kind++) {
        long before_init = atomic_load(&alloc_count);
        assert_int_equal(drths_integrator_init(&it, &s, kind, 0.0002, &err), 0);
        /* The interposition is live: init allocates. */
        assert_true(atomic_load(&alloc_count) > before_init);
        double x1[3], v1[3], f[3] = {0};
        long before = atomic_load(&alloc_count);
        drths_integrator_reset(&it, NULL, NULL, 0.0, NULL);
        for (int k = 1; k <= 10000; k++) {
            drths_integrator_predict(&it, x1, v1);
            f[0] = 1e5 * tanh(v1[0] / 0.01);
            drths_integrator_correct(&it, sin(k * 0.001), f);
        }
        long during = atomic_load(&alloc_count) - before;
        print_message("%s: %ld allocations in 10000 steps\n", kind_name(kind), during);
        assert_int_equal(during, 0);
        drths_integrator_close(&it);
    }
    drths_structure_close(&s);
}

/* ---- Modal form ------------------------------------------------------------------------------
 * A tall shear building with uneven floors, a nonlinear damper between the ground and floor 1
 * and a linear spring-dashpot between floors 4 and 5 (specimen forces computed from what
 * predict() hands out, so any difference feeds back), under ag = 3 m/s^2 sin(2 pi 1.3 Hz t). */
#define TALL_N 100
#define TALL_STEPS 3000

static void tall_building(drths_structure_t *s, int damping)
{
    double m[TALL_N], k[TALL_N];
    for (int i = 0; i < TALL_N; i++) {
        m[i] = 4.0e4 + 1.0e4 * (double)(i % 3);
        k[i] = 2.0e8 * (1.0 - 0.5 * i / TALL_N) + 1.0e7 * (double)(i % 5);
    }
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(s, TALL_N, m, k, &err), 0);
    if (damping == 0) {
        const double z = 0.02;
        assert_int_equal(drths_structure_set_modal_damping(s, &z, 1, &err), 0);
    } else {
        assert_int_equal(drths_structure_set_rayleigh_damping(s, 1, 5, 0.02, 0.03, &err), 0);
    }
}

static void tall_forces(const double *x1, const double *v1, double *f)
{
    double fd = 2.0e5 * tanh(v1[0] / 0.02);              /* floor 1 to the ground */
    double fs = 1.0e7 * (x1[4] - x1[3]) + 5.0e5 * (v1[4] - v1[3]); /* floors 4 and 5 */
    f[0] = fd;
    f[3] = -fs;
    f[4] = fs;
}

/* Largest |a - b| over steps and DOFs, relative to the largest |b|, for x, v and a. */
typedef struct tall_diff {
    double x, v, a;
} tall_diff_t;

static void run_pair(const drths_structure_t *s, drths_integrator_kind_t kind,
                     const drths_integrator_options_t *oa, const drths_integrator_options_t *ob,
                     const int *watch, int nwatch, tall_diff_t *d)
{
    drths_integrator_t A, B;
    drths_error_t err;
    const double dt = 2e-4;
    assert_int_equal(drths_integrator_init_opts(&A, s, kind, dt, oa, &err), 0);
    assert_int_equal(drths_integrator_init_opts(&B, s, kind, dt, ob, &err), 0);
    if (watch)
        assert_int_equal(drths_integrator_watch(&A, watch, nwatch), 0);
    double fa[TALL_N] = {0}, fb[TALL_N] = {0}, x1a[TALL_N], v1a[TALL_N], x1b[TALL_N],
           v1b[TALL_N];
    double x0[TALL_N];
    for (int i = 0; i < TALL_N; i++)
        x0[i] = 1e-3 * sin(0.05 * i);
    drths_integrator_reset(&A, x0, NULL, 0.0, NULL);
    drths_integrator_reset(&B, x0, NULL, 0.0, NULL);
    double dx = 0, dv = 0, da = 0, px = 0, pv = 0, pa = 0;
    for (int k = 1; k <= TALL_STEPS; k++) {
        drths_integrator_predict(&A, x1a, v1a);
        drths_integrator_predict(&B, x1b, v1b);
        tall_forces(x1a, v1a, fa);
        tall_forces(x1b, v1b, fb);
        double ag = 3.0 * sin(2 * M_PI * 1.3 * k * dt);
        drths_integrator_correct(&A, ag, fa);
        drths_integrator_correct(&B, ag, fb);
        if (watch)
            drths_integrator_sync(&A);
        for (int i = 0; i < TALL_N; i++) {
            dx = fmax(dx, fabs(A.x[i] - B.x[i]));
            dv = fmax(dv, fabs(A.v[i] - B.v[i]));
            da = fmax(da, fabs(A.a[i] - B.a[i]));
            px = fmax(px, fabs(B.x[i]));
            pv = fmax(pv, fabs(B.v[i]));
            pa = fmax(pa, fabs(B.a[i]));
        }
    }
    d->x = dx / px;
    d->v = dv / pv;
    d->a = da / pa;
    drths_integrator_close(&A);
    drths_integrator_close(&B);
}

/* With every mode kept the modal form is the full form in exact arithmetic: both integrators,
 * modal and Rayleigh damping, every DOF updated or only the specimen's (then synced). */
static void test_modal_equals_full(void **state)
{
    (void)state;
    const drths_integrator_options_t full = {DRTHS_INTEGRATOR_FORM_FULL, 0};
    const drths_integrator_options_t modal = {DRTHS_INTEGRATOR_FORM_MODAL, 0};
    const int watch[3] = {0, 3, 4};
    const char *dname[2] = {"modal damping", "Rayleigh damping"};
    for (int damping = 0; damping < 2; damping++) {
        drths_structure_t s;
        tall_building(&s, damping);
        for (int kind = 0; kind < 2; kind++)
            for (int w = 0; w < 2; w++) {
                tall_diff_t d;
                run_pair(&s, kind, &modal, &full, w ? watch : NULL, 3, &d);
                print_message("%d DOF, %s, %s%s: modal vs full over %d steps: relative max "
                              "difference x %.2g, v %.2g, a %.2g\n",
                              TALL_N, dname[damping], kind_name(kind),
                              w ? ", specimen DOFs watched + sync" : "", TALL_STEPS, d.x, d.v,
                              d.a);
                assert_true(d.x < 1e-9 && d.v < 1e-9 && d.a < 1e-9);
            }
        drths_structure_close(&s);
    }
}

/* Keeping the lowest 20 of 100 modes (the dropped ones are above 5.7 Hz, the excitation is at
 * 1.3 Hz): close to the full model, but not equal to it. */
static void test_modal_truncated(void **state)
{
    (void)state;
    drths_structure_t s;
    tall_building(&s, 0);
    const drths_integrator_options_t full = {DRTHS_INTEGRATOR_FORM_FULL, 0};
    const drths_integrator_options_t modal = {DRTHS_INTEGRATOR_FORM_MODAL, 20};
    tall_diff_t d;
    run_pair(&s, DRTHS_INTEGRATOR_CHEN_RICLES, &modal, &full, NULL, 0, &d);
    print_message("20 of %d modes (mode 21 at %.1f Hz): relative max difference x %.2g, v %.2g\n",
                  TALL_N, s.freq_hz[20], d.x, d.v);
    assert_true(d.x > 1e-9 && d.x < 0.01);
    assert_true(d.v < 0.05);
    drths_structure_close(&s);
}

/* The automatic choice and its fallback; non-classical damping is refused by the modal form. */
static void test_modal_choice(void **state)
{
    (void)state;
    drths_structure_t s, t;
    drths_integrator_t it;
    drths_error_t err;
    tall_building(&s, 0);
    assert_int_equal(drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &err), 0);
    assert_int_equal(it.form, DRTHS_INTEGRATOR_FORM_MODAL);
    assert_int_equal(it.m, TALL_N);
    drths_integrator_close(&it);
    assert_int_equal(drths_structure_init_shear(&t, 3, default_mass, default_k, &err), 0);
    assert_int_equal(drths_integrator_init(&it, &t, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &err), 0);
    assert_int_equal(it.form, DRTHS_INTEGRATOR_FORM_FULL);
    drths_integrator_close(&it);
    drths_structure_close(&t);

    /* A dashpot at floor 1 added to C couples the modes. */
    size_t nn = (size_t)TALL_N * TALL_N;
    double *C = malloc(nn * sizeof(double));
    memcpy(C, s.C, nn * sizeof(double));
    C[0] += 1e6;
    assert_int_equal(drths_structure_init_matrices(&t, TALL_N, s.M, C, s.K, &err), 0);
    free(C);
    const drths_integrator_options_t modal = {DRTHS_INTEGRATOR_FORM_MODAL, 0};
    assert_int_equal(
        drths_integrator_init_opts(&it, &t, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &modal, &err),
        -EINVAL);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "structure.damping: not classical"));
    drths_integrator_close(&it); /* nothing to clean up; still safe */
    assert_int_equal(drths_integrator_init(&it, &t, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &err), 0);
    assert_int_equal(it.form, DRTHS_INTEGRATOR_FORM_FULL);
    drths_integrator_close(&it);

    /* Wrong options. */
    const drths_integrator_options_t bad = {DRTHS_INTEGRATOR_FORM_MODAL, TALL_N + 1};
    assert_int_equal(
        drths_integrator_init_opts(&it, &s, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &bad, &err),
        -EINVAL);
    assert_non_null(strstr(err.msg, "modes must be 0 (all) .. 100 (got 101)"));
    assert_int_equal(
        drths_integrator_init_opts(&it, &s, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &modal, &err), 0);
    const int out_of_range[1] = {TALL_N};
    assert_int_equal(drths_integrator_watch(&it, out_of_range, 1), -EINVAL);
    drths_integrator_close(&it);
    drths_structure_close(&t);
    drths_structure_close(&s);
}

static void test_modal_no_allocation(void **state)
{
    (void)state;
    if (!COUNT_ALLOCS)
        skip();
    drths_structure_t s;
    drths_integrator_t it;
    drths_error_t err;
    tall_building(&s, 1);
    assert_int_equal(drths_integrator_init(&it, &s, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &err), 0);
    const int watch[1] = {0};
    double x1[TALL_N], v1[TALL_N], f[TALL_N] = {0};
    long before = atomic_load(&alloc_count);
    for (int pass = 0; pass < 2; pass++) {
        drths_integrator_reset(&it, NULL, NULL, 0.0, NULL);
        for (int k = 1; k <= 2000; k++) {
            drths_integrator_predict(&it, x1, v1);
            f[0] = 1e5 * tanh(v1[0] / 0.01);
            drths_integrator_correct(&it, sin(k * 0.001), f);
        }
        drths_integrator_sync(&it);
        assert_int_equal(drths_integrator_watch(&it, watch, 1), 0); /* second pass: watched */
    }
    long during = atomic_load(&alloc_count) - before;
    print_message("modal form: %ld allocations in 4000 steps\n", during);
    assert_int_equal(during, 0);
    drths_integrator_close(&it);
    drths_structure_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sdof_convergence),
        cmocka_unit_test(test_modal_convergence),
        cmocka_unit_test(test_central_difference_limit),
        cmocka_unit_test(test_specimen_sign),
        cmocka_unit_test(test_velocity_specimen),
        cmocka_unit_test(test_reset_predict_correct),
        cmocka_unit_test(test_no_allocation_per_step),
        cmocka_unit_test(test_modal_equals_full),
        cmocka_unit_test(test_modal_truncated),
        cmocka_unit_test(test_modal_choice),
        cmocka_unit_test(test_modal_no_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
