/* Semi-active control (docs/design.md#clipped-optimal-control): the exact discretisation, the
 * Riccati solution and its gain, the clipped-optimal switching law, the sign convention against the
 * integrator, no allocation per tick, and the acceptance runs: on the default experiment
 * clipped-optimal reduces the reference run's peak roof displacement and peak roof absolute
 * acceleration against passive-off; the Dyke et al. 1996 example in clipped-optimal mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/config/setup.h"
#include "common/models/integrator.h"
#include "common/models/structure.h"
#include "site-numerical/reference.h"
#include "site-numerical/semiactive.h"

#include "alloc_count.h"

static void load(drths_experiment_t *ex, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/%s",
             getenv("DRTHS_SOURCE_DIR") ? getenv("DRTHS_SOURCE_DIR") : "..", name);
    drths_error_t err = {{0}};
    int rc = drths_experiment_load(ex, path, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
}

/* The default experiment's structure and its clipped-optimal controller. */
static void default_controller(drths_structure_t *st, drths_semiactive_t *c)
{
    drths_experiment_t ex;
    load(&ex, "three-story-elcentro.yaml");
    ex.control.mode = DRTHS_CONTROL_CLIPPED_OPTIMAL;
    ex.control.command = 0.0;
    drths_error_t err = {{0}};
    assert_int_equal(drths_setup_structure(&ex, st, &err), 0);
    int rc = drths_semiactive_init_experiment(c, &ex, st, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    drths_experiment_close(&ex);
}

/* H((f_c - F) F) on hand cases, H(0) = 0. */
static void test_clip_law(void **state)
{
    (void)state;
    const double m = 2.5;
    assert_true(drths_semiactive_clip(100.0, 50.0, m) == m);   /* wants more, same sign */
    assert_true(drths_semiactive_clip(30.0, 50.0, m) == 0.0);  /* already more than wanted */
    assert_true(drths_semiactive_clip(-100.0, 50.0, m) == 0.0); /* pushes the wrong way */
    assert_true(drths_semiactive_clip(-100.0, -50.0, m) == m);
    assert_true(drths_semiactive_clip(-30.0, -50.0, m) == 0.0);
    assert_true(drths_semiactive_clip(100.0, -50.0, m) == 0.0);
    assert_true(drths_semiactive_clip(100.0, 0.0, m) == 0.0);  /* H(0) = 0 */
    assert_true(drths_semiactive_clip(50.0, 50.0, m) == 0.0);  /* H(0) = 0 */
    assert_true(drths_semiactive_clip(0.0, 50.0, m) == 0.0);
}

/* The command through the controller: f_c = -gain . [x; v], the law above, one tick's work;
 * the passive modes return their constants; init refuses what it cannot do. */
static void test_command_and_modes(void **state)
{
    (void)state;
    drths_structure_t st;
    drths_semiactive_t c;
    default_controller(&st, &c);
    double x[3] = {0.01, 0.02, 0.025}, v[3] = {0.1, -0.05, 0.2};
    double fc = 0.0;
    for (int i = 0; i < 3; i++)
        fc -= c.gain[i] * x[i] + c.gain[3 + i] * v[i];
    double F = 0.5 * fc;
    assert_true(drths_semiactive_command(&c, x, v, F) == 2.5);
    assert_true(fabs(drths_semiactive_desired_force(&c) - fc) <= 1e-9 * fabs(fc));
    assert_true(drths_semiactive_command(&c, x, v, 2.0 * fc) == 0.0);
    assert_true(drths_semiactive_command(&c, x, v, -F) == 0.0);
    assert_true(drths_semiactive_initial_command(&c) == 0.0);
    drths_semiactive_close(&c);
    drths_semiactive_close(&c); /* safe twice */

    drths_error_t err = {{0}};
    assert_int_equal(drths_semiactive_init(&c, &st, 1, 2e-4, 2.5, DRTHS_CONTROL_PASSIVE_ON, 0.0,
                                           NULL, &err),
                     0);
    assert_true(drths_semiactive_command(&c, x, v, 123.0) == 2.5);
    assert_true(drths_semiactive_initial_command(&c) == 2.5);
    assert_null(c.gain);
    drths_semiactive_close(&c);
    assert_int_equal(drths_semiactive_init(&c, &st, 1, 2e-4, 2.5, DRTHS_CONTROL_PASSIVE_OFF, 0.0,
                                           NULL, &err),
                     0);
    assert_true(drths_semiactive_command(&c, x, v, 123.0) == 0.0);
    drths_semiactive_close(&c);
    assert_int_equal(drths_semiactive_init(&c, &st, 1, 2e-4, 2.5, DRTHS_CONTROL_FIXED, 1.25, NULL,
                                           &err),
                     0);
    assert_true(drths_semiactive_command(&c, x, v, 123.0) == 1.25);
    drths_semiactive_close(&c);

    assert_int_equal(drths_semiactive_init(&c, &st, 4, 2e-4, 2.5,
                                           DRTHS_CONTROL_CLIPPED_OPTIMAL, 0.0, NULL, &err),
                     -EINVAL);
    assert_string_equal(err.msg, "specimen.floor: must be in 1..3 (got 4)");
    assert_int_equal(drths_semiactive_init(&c, &st, 1, 2e-4, 0.0,
                                           DRTHS_CONTROL_CLIPPED_OPTIMAL, 0.0, NULL, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "clipped-optimal needs a damper with a command"));
    drths_semiactive_design_t d = {1.0, 1.0, 0.0};
    assert_int_equal(drths_semiactive_init(&c, &st, 1, 2e-4, 2.5,
                                           DRTHS_CONTROL_CLIPPED_OPTIMAL, 0.0, &d, &err),
                     -EINVAL);
    assert_int_equal(drths_semiactive_init(&c, &st, 1, 2e-4, 2.5, DRTHS_CONTROL_FIXED, 3.0, NULL,
                                           &err),
                     -EINVAL);
    assert_string_equal(err.msg, "control.command: must be in [0, 2.5] (got 3)");
    drths_semiactive_close(&c);
    drths_structure_close(&st);

    /* The passive-command helper the hybrid site still uses keeps refusing clipped-optimal. */
    drths_experiment_t ex;
    load(&ex, "three-story-elcentro.yaml");
    ex.control.mode = DRTHS_CONTROL_CLIPPED_OPTIMAL;
    double cmd;
    assert_int_equal(drths_setup_passive_command(&ex, &cmd, &err), -ENOTSUP);
    drths_experiment_close(&ex);
}

/* Zero-order-hold discretisation of a damped oscillator (m 2 kg, w 20 rad/s, zeta 5 %, force
 * on its single floor) against the closed form, at a step large enough to need the squaring. */
static void test_zoh_sdof(void **state)
{
    (void)state;
    const double m = 2.0, w = 20.0, z = 0.05, dt = 0.01;
    const double k = m * w * w, c = 2.0 * z * w * m;
    drths_structure_t st;
    drths_error_t err = {{0}};
    assert_int_equal(drths_structure_init_matrices(&st, 1, &m, &c, &k, &err), 0);
    drths_semiactive_t s;
    int rc = drths_semiactive_init(&s, &st, 1, dt, 1.0, DRTHS_CONTROL_CLIPPED_OPTIMAL, 0.0, NULL,
                                   &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    double wd = w * sqrt(1.0 - z * z), e = exp(-z * w * dt), cs = cos(wd * dt),
           sn = sin(wd * dt);
    double Ad[4] = {e * (cs + z * w / wd * sn), e * sn / wd, -e * w * w / wd * sn,
                    e * (cs - z * w / wd * sn)};
    /* Bd = A^-1 (Ad - I) Bc, Bc = [0; -1/m], A^-1 = [-c/k  -m/k; 1 0]. */
    double b0 = -Ad[1] / m, b1 = -(Ad[3] - 1.0) / m;
    double Bd[2] = {-c / k * b0 - m / k * b1, b0};
    double worst = 0.0;
    for (int i = 0; i < 4; i++)
        worst = fmax(worst, fabs(s.Ad[i] - Ad[i]) / fmax(fabs(Ad[i]), 1e-3));
    for (int i = 0; i < 2; i++)
        worst = fmax(worst, fabs(s.Bd[i] - Bd[i]) / fabs(Bd[i]));
    printf("  ZOH of a 20 rad/s oscillator at dt 0.01 s: largest relative error %.2e\n", worst);
    assert_true(worst < 1e-12);
    drths_semiactive_close(&s);
    drths_structure_close(&st);
}

/* The design on the default experiment: P solves the DARE (residual recomputed here), P is
 * symmetric positive definite, the gain is the DARE's, the closed loop is stable, and P is the
 * closed loop's cost to go (the sum of the stage costs from a state z0 equals z0' P z0), which a
 * perturbed gain exceeds. */
static double stage_cost_sum(const drths_semiactive_t *c, const double *gain, const double *z0)
{
    int n2 = 2 * c->n;
    double z[64], zn[64], J = 0.0;
    memcpy(z, z0, (size_t)n2 * sizeof(double));
    for (long k = 0; k < 400000; k++) {
        double u = 0.0, zQz = 0.0, zS = 0.0;
        for (int i = 0; i < n2; i++) {
            u -= gain[i] * z[i];
            zS += z[i] * c->S[i];
            for (int j = 0; j < n2; j++)
                zQz += z[i] * c->Q[i * n2 + j] * z[j];
        }
        J += zQz + 2.0 * zS * u + c->R * u * u;
        for (int i = 0; i < n2; i++) {
            zn[i] = c->Bd[i] * u;
            for (int j = 0; j < n2; j++)
                zn[i] += c->Ad[i * n2 + j] * z[j];
        }
        memcpy(z, zn, (size_t)n2 * sizeof(double));
    }
    return J;
}

static void test_riccati_default(void **state)
{
    (void)state;
    drths_structure_t st;
    drths_semiactive_t c;
    default_controller(&st, &c);
    int n2 = 2 * c.n, nn = n2 * n2;
    double PA[36], APA[36], PB[6], L[6], Res[36], BPB = 0.0;
    for (int i = 0; i < n2; i++) {
        PB[i] = 0.0;
        for (int j = 0; j < n2; j++) {
            PB[i] += c.P[i * n2 + j] * c.Bd[j];
            PA[i * n2 + j] = 0.0;
            for (int l = 0; l < n2; l++)
                PA[i * n2 + j] += c.P[i * n2 + l] * c.Ad[l * n2 + j];
        }
        BPB += c.Bd[i] * PB[i];
    }
    for (int i = 0; i < n2; i++) {
        L[i] = c.S[i];
        for (int j = 0; j < n2; j++) {
            L[i] += c.Ad[j * n2 + i] * PB[j];
            APA[i * n2 + j] = 0.0;
            for (int l = 0; l < n2; l++)
                APA[i * n2 + j] += c.Ad[l * n2 + i] * PA[l * n2 + j];
        }
    }
    double rn = 0.0, pn = 0.0, qn = 0.0, asym = 0.0, gerr = 0.0;
    for (int i = 0; i < n2; i++) {
        for (int j = 0; j < n2; j++) {
            Res[i * n2 + j] = APA[i * n2 + j] - c.P[i * n2 + j] - L[i] * L[j] / (c.R + BPB) +
                              c.Q[i * n2 + j];
            rn += Res[i * n2 + j] * Res[i * n2 + j];
            pn += c.P[i * n2 + j] * c.P[i * n2 + j];
            qn += c.Q[i * n2 + j] * c.Q[i * n2 + j];
            asym = fmax(asym, fabs(c.P[i * n2 + j] - c.P[j * n2 + i]));
        }
        gerr = fmax(gerr, fabs(c.gain[i] - L[i] / (c.R + BPB)) / fabs(c.gain[i]));
    }
    rn = sqrt(rn);
    pn = sqrt(pn);
    qn = sqrt(qn);
    printf("  DARE: %d doubling iterations, ||residual||/||P|| %.2e (module: %.2e), "
           "||residual||/||Q|| %.2e, gain mismatch %.1e\n",
           c.riccati_iterations, rn / pn, c.riccati_residual, rn / qn, gerr);
    assert_true(rn / pn < 1e-8);
    assert_true(c.riccati_residual < 1e-8);
    assert_true(gerr < 1e-9);
    assert_true(asym <= 1e-12 * pn);
    double Pc[36];
    memcpy(Pc, c.P, (size_t)nn * sizeof(double));
    assert_int_equal(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', n2, Pc, n2), 0);

    /* Closed loop and open loop eigenvalues: spectral radius and equivalent damping ratios. */
    double Acl[36], Aol[36], wr[6], wi[6];
    for (int i = 0; i < n2; i++)
        for (int j = 0; j < n2; j++) {
            Aol[i * n2 + j] = c.Ad[i * n2 + j];
            Acl[i * n2 + j] = c.Ad[i * n2 + j] - c.Bd[i] * c.gain[j];
        }
    const char *name[2] = {"open", "closed"};
    double *mats[2] = {Aol, Acl}, rho[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', n2, mats[k], n2, wr, wi, NULL,
                                       1, NULL, 1),
                         0);
        printf("  %s loop: ", name[k]);
        for (int i = 0; i < n2; i++) {
            rho[k] = fmax(rho[k], hypot(wr[i], wi[i]));
            if (wi[i] < 0)
                continue;
            double sr = log(hypot(wr[i], wi[i])) / c.dt_s, si = atan2(wi[i], wr[i]) / c.dt_s;
            printf("%.2f Hz zeta %.3f; ", hypot(sr, si) / (2 * M_PI), -sr / hypot(sr, si));
        }
        printf("spectral radius %.9f\n", rho[k]);
    }
    assert_true(rho[1] < 1.0);
    assert_true(fabs(rho[1] - c.spectral_radius) < 1e-12);
    assert_true(rho[1] < rho[0]); /* the design adds damping to the slowest mode */

    double z0[6] = {0.01, 0.02, 0.03, 0.1, -0.1, 0.2}, zPz = 0.0;
    for (int i = 0; i < n2; i++)
        for (int j = 0; j < n2; j++)
            zPz += z0[i] * c.P[i * n2 + j] * z0[j];
    double J = stage_cost_sum(&c, c.gain, z0);
    double g2[6];
    for (int i = 0; i < n2; i++)
        g2[i] = c.gain[i] * 1.05;
    double J2 = stage_cost_sum(&c, g2, z0);
    printf("  cost to go from z0: z0'P z0 %.9e, summed %.9e (rel %.1e); gain x1.05: %.9e\n", zPz,
           J, fabs(J - zPz) / zPz, J2);
    assert_true(fabs(J - zPz) < 1e-7 * zPz);
    assert_true(J2 > J);
    drths_semiactive_close(&c);
    drths_structure_close(&st);
}

/* Sign convention: the integrator under a constant damper force R (numsub's mapping: +R on the
 * damper's floor, -R below) against the discrete model z(k+1) = Ad z(k) + Bd R, damper at the
 * second floor so both entries of the mapping count. A sign error would be a 200 % mismatch;
 * the integrator's own second-order error at 5 kHz is far below 0.1 %. */
static void test_sign_against_integrator(void **state)
{
    (void)state;
    drths_experiment_t ex;
    load(&ex, "three-story-elcentro.yaml");
    drths_structure_t st;
    drths_error_t err = {{0}};
    assert_int_equal(drths_setup_structure(&ex, &st, &err), 0);
    drths_experiment_close(&ex);
    drths_semiactive_t c;
    assert_int_equal(drths_semiactive_init(&c, &st, 2, 2e-4, 2.5, DRTHS_CONTROL_CLIPPED_OPTIMAL,
                                           0.0, NULL, &err),
                     0);
    drths_integrator_t it;
    assert_int_equal(drths_integrator_init(&it, &st, DRTHS_INTEGRATOR_CHEN_RICLES, 2e-4, &err), 0);
    const double R = 1e5;
    double f[3] = {-R, R, 0.0}, z[6] = {0}, zn[6];
    drths_integrator_reset(&it, NULL, NULL, 0.0, f);
    double worst = 0.0, peak = 0.0;
    for (int k = 0; k < 1000; k++) {
        drths_integrator_correct(&it, 0.0, f);
        for (int i = 0; i < 6; i++) {
            zn[i] = c.Bd[i] * R;
            for (int j = 0; j < 6; j++)
                zn[i] += c.Ad[i * 6 + j] * z[j];
        }
        memcpy(z, zn, sizeof z);
        for (int i = 0; i < 3; i++) {
            worst = fmax(worst, fabs(it.x[i] - z[i]));
            peak = fmax(peak, fabs(z[i]));
        }
    }
    printf("  constant 100 kN at floor 2, 0.2 s: peak %.4f mm, integrator vs ZOH model %.2e "
           "relative\n",
           1e3 * peak, worst / peak);
    assert_true(worst < 1e-3 * peak);
    drths_integrator_close(&it);
    drths_semiactive_close(&c);
    drths_structure_close(&st);
}

/* The per-tick function allocates nothing. */
static void test_no_allocation(void **state)
{
    (void)state;
#if COUNT_ALLOCS
    drths_structure_t st;
    drths_semiactive_t c;
    default_controller(&st, &c);
    double x[3] = {0}, v[3] = {0}, sum = 0.0;
    long before = alloc_count;
    for (int k = 0; k < 100000; k++) {
        x[k % 3] = 1e-3 * sin(0.01 * k);
        v[(k + 1) % 3] = 1e-2 * cos(0.013 * k);
        sum += drths_semiactive_command(&c, x, v, 1e4 * sin(0.007 * k));
    }
    assert_int_equal(alloc_count - before, 0);
    assert_true(sum > 0.0); /* the law did switch on */
    drths_semiactive_close(&c);
    drths_structure_close(&st);
#else
    skip();
#endif
}

typedef struct {
    const char *label;
    drths_reference_summary_t s;
} row_t;

static void run_mode(drths_experiment_t *ex, drths_control_mode_t mode,
                     const drths_semiactive_design_t *d, row_t *r, const char *label)
{
    drths_error_t err = {{0}};
    ex->control.mode = mode;
    ex->control.command = 0.0;
    int rc = drths_reference_run_design(ex, d, NULL, &r->s, NULL, NULL, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    r->label = label;
}

static void print_table(const char *title, const char *fu, double fs, row_t *rows, int nrows)
{
    printf("  %s (roof = floor %d)\n", title, rows[0].s.n);
    printf("  %-26s %9s %9s %10s %10s %9s %9s %6s\n", "mode", "peak x", "rms x", "peak a_abs",
           "rms a_abs", "peak F", "peak f_c", "on");
    printf("  %-26s %9s %9s %10s %10s %9s %9s %6s\n", "", "mm", "mm", "m/s2", "m/s2", fu, fu, "%");
    for (int i = 0; i < nrows; i++) {
        const drths_reference_summary_t *s = &rows[i].s;
        int r = s->n - 1;
        printf("  %-26s %9.3f %9.3f %10.3f %10.3f %9.2f %9.2f %6.1f\n", rows[i].label,
               1e3 * s->peak_x_m[r], 1e3 * s->rms_x_m[r], s->peak_a_m_s2[r], s->rms_a_m_s2[r],
               s->peak_force_N / fs, s->peak_desired_force_N / fs, 100 * s->on_fraction);
    }
}

/* Acceptance on the default experiment. */
static void test_default_experiment(void **state)
{
    (void)state;
    drths_experiment_t ex;
    load(&ex, "three-story-elcentro.yaml");
    row_t rows[3];
    run_mode(&ex, DRTHS_CONTROL_PASSIVE_OFF, NULL, &rows[0], "passive-off (0 A)");
    run_mode(&ex, DRTHS_CONTROL_PASSIVE_ON, NULL, &rows[1], "passive-on (2.5 A)");
    run_mode(&ex, DRTHS_CONTROL_CLIPPED_OPTIMAL, NULL, &rows[2], "clipped-optimal (r 100)");
    print_table("three-story-elcentro, El Centro full scale", "kN", 1e3, rows, 3);
    const drths_reference_summary_t *off = &rows[0].s, *co = &rows[2].s;
    int r = off->n - 1;
    assert_true(co->peak_x_m[r] < off->peak_x_m[r]);
    assert_true(co->peak_a_m_s2[r] < off->peak_a_m_s2[r]);
    /* the desired force is of the damper's size (semiactive.c, default weights) */
    assert_true(co->peak_desired_force_N > 100e3 && co->peak_desired_force_N < 250e3);
    assert_true(co->on_fraction > 0.0 && co->on_fraction < 1.0);
    for (int i = 0; i < 3; i++)
        drths_reference_summary_close(&rows[i].s);
    drths_experiment_close(&ex);
}

/* Dyke et al. 1996 example (voltage-driven damper, 0..2.25 V), with the default weights and
 * with r = 5, which asks for forces of this damper's size. */
static void test_dyke1996(void **state)
{
    (void)state;
    drths_experiment_t ex;
    load(&ex, "dyke1996-three-story.yaml");
    row_t rows[4];
    drths_semiactive_design_t d;
    drths_semiactive_design_default(&d);
    d.r = 5.0;
    run_mode(&ex, DRTHS_CONTROL_PASSIVE_OFF, NULL, &rows[0], "passive-off (0 V)");
    run_mode(&ex, DRTHS_CONTROL_PASSIVE_ON, NULL, &rows[1], "passive-on (2.25 V)");
    run_mode(&ex, DRTHS_CONTROL_CLIPPED_OPTIMAL, NULL, &rows[2], "clipped-optimal (r 100)");
    run_mode(&ex, DRTHS_CONTROL_CLIPPED_OPTIMAL, &d, &rows[3], "clipped-optimal (r 5)");
    print_table("dyke1996-three-story, El Centro 5x compressed", "N", 1.0, rows, 4);
    int r = rows[0].s.n - 1;
    for (int i = 2; i < 4; i++) {
        assert_true(rows[i].s.peak_x_m[r] < rows[0].s.peak_x_m[r]);
        assert_true(rows[i].s.peak_a_m_s2[r] < rows[0].s.peak_a_m_s2[r]);
        assert_true(rows[i].s.riccati_residual < 1e-8);
        assert_true(rows[i].s.spectral_radius < 1.0);
    }
    for (int i = 0; i < 4; i++)
        drths_reference_summary_close(&rows[i].s);
    drths_experiment_close(&ex);
}

/* Two dampers on one storey, each weighted by r, are one damper weighted by r/2 split in
 * halves: u1 = u2 = u/2 turns r (u1^2 + u2^2) into (r/2) u^2 with everything else alike. So
 * each row of the two-input gain is half the one-input gain designed with r/2, and each damper
 * is commanded from its own force. */
static void test_two_dampers(void **state)
{
    (void)state;
    drths_experiment_t ex;
    load(&ex, "three-story-elcentro.yaml");
    drths_structure_t st;
    drths_error_t err = {{0}};
    assert_int_equal(drths_setup_structure(&ex, &st, &err), 0);
    drths_experiment_close(&ex);
    drths_semiactive_design_t d = {1.0, 1.0, 100.0}, half = {1.0, 1.0, 50.0};
    drths_semiactive_t two, one;
    const int floors[2] = {1, 1};
    const double cmax[2] = {2.5, 2.5};
    int rc = drths_semiactive_init_multi(&two, &st, 2, floors, 2e-4, cmax,
                                         DRTHS_CONTROL_CLIPPED_OPTIMAL, 0.0, &d, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(drths_semiactive_init(&one, &st, 1, 2e-4, 2.5, DRTHS_CONTROL_CLIPPED_OPTIMAL,
                                           0.0, &half, &err),
                     0);
    assert_true(two.riccati_residual < 1e-8 && two.spectral_radius < 1.0);
    double worst = 0.0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 6; i++)
            worst = fmax(worst, fabs(two.gain[k * 6 + i] - 0.5 * one.gain[i]) / fabs(one.gain[i]));
    printf("  two dampers on storey 1: gain rows against half the r/2 design: %.2e\n", worst);
    assert_true(worst < 1e-7);
    /* Each damper switches on its own force. */
    double x[3] = {0.01, 0.02, 0.025}, v[3] = {0.1, -0.05, 0.2}, cmd[2];
    (void)drths_semiactive_command(&one, x, v, 0.0);
    double fc = 0.5 * drths_semiactive_desired_force(&one); /* each damper's share */
    const double f[2] = {0.5 * fc, 2.0 * fc};
    drths_semiactive_command_all(&two, x, v, f, cmd);
    assert_true(fabs(two.desired_k[0] - fc) <= 1e-7 * fabs(fc));
    assert_true(cmd[0] == 2.5 && cmd[1] == 0.0);
    drths_semiactive_close(&one);
    drths_semiactive_close(&two);
    drths_structure_close(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clip_law),
        cmocka_unit_test(test_command_and_modes),
        cmocka_unit_test(test_zoh_sdof),
        cmocka_unit_test(test_riccati_default),
        cmocka_unit_test(test_sign_against_integrator),
        cmocka_unit_test(test_no_allocation),
        cmocka_unit_test(test_default_experiment),
        cmocka_unit_test(test_dyke1996),
        cmocka_unit_test(test_two_dampers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
