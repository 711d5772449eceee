/* Servo-hydraulic plant: the exact ZOH discretisation reproduces the analytic continuous step
 * response (partial fractions, complex poles) at the sample instants; DC gain; the current
 * interpolation at its ends equals each model; steady state after reset; errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/models/plant.h"

/* Unit step response y(t) and its derivative for K / ((s + p)(s^2 + a s + b)). */
static void analytic_step(const drths_plant_model_t *m, double t, double *y, double *v)
{
    const double complex sq = csqrt(m->a * m->a - 4.0 * m->b + 0.0 * I);
    const double complex sp = (-m->a + sq) / 2.0, sm = (-m->a - sq) / 2.0;
    const double rp = 1.0 / ((-m->p) * (m->p * m->p - m->a * m->p + m->b));
    const double complex r1 = 1.0 / (sp * (sp + m->p) * (sp - sm));
    const double complex r2 = 1.0 / (sm * (sm + m->p) * (sm - sp));
    const double e = exp(-m->p * t);
    *y = m->K * (1.0 / (m->p * m->b) + rp * e + creal(r1 * cexp(sp * t) + r2 * cexp(sm * t)));
    *v = m->K * (-m->p * rp * e + creal(sp * r1 * cexp(sp * t) + sm * r2 * cexp(sm * t)));
}

static void check_step(const drths_plant_model_t *m, const char *name, double dt, double t_end)
{
    drths_plant_t pl;
    drths_error_t err;
    assert_int_equal(drths_plant_init(&pl, m, m, 2.5, dt, &err), 0);
    drths_plant_reset(&pl, 0.0);
    const int n = (int)lround(t_end / dt);
    double ey = 0.0, ev = 0.0, ymax = 0.0, vmax = 0.0, y = 0.0;
    for (int k = 1; k <= n; k++) {
        double v, ya, va;
        y = drths_plant_step(&pl, 1.0, 1.0, &v);
        analytic_step(m, k * dt, &ya, &va);
        ey = fmax(ey, fabs(y - ya));
        ev = fmax(ev, fabs(v - va));
        ymax = fmax(ymax, fabs(ya));
        vmax = fmax(vmax, fabs(va));
    }
    printf("  %-8s dt %-6g: max |y - y_analytic| %.2e of peak, |v - v_analytic| %.2e of peak, "
           "y(%g s) %.9f, DC gain %.9f\n",
           name, dt, ey / ymax, ev / vmax, t_end, y, drths_plant_dc_gain(m));
    assert_true(ey <= 1e-9 * ymax);
    assert_true(ev <= 1e-9 * vmax);
    drths_plant_close(&pl);
    drths_plant_close(&pl);
}

static void test_zoh_step_response(void **state)
{
    (void)state;
    const struct {
        const drths_plant_model_t *m;
        const char *name;
    } models[] = {{&DRTHS_PLANT_0A, "0.0 A"}, {&DRTHS_PLANT_2P5A, "2.5 A"}, {&DRTHS_PLANT_AVERAGE, "average"}};
    for (int i = 0; i < 3; i++) {
        check_step(models[i].m, models[i].name, 2e-4, 0.5);
        check_step(models[i].m, models[i].name, 1e-3, 0.5);
        check_step(models[i].m, models[i].name, 2e-2, 2.0); /* exercises scaling and squaring */
    }
}

static void test_dc_gain(void **state)
{
    (void)state;
    assert_true(fabs(drths_plant_dc_gain(&DRTHS_PLANT_0A) - 1.730e7 / (182.7 * 9.499e4)) < 1e-15);
    assert_true(fabs(drths_plant_dc_gain(&DRTHS_PLANT_0A) - 0.9968497) < 1e-7);
    assert_true(fabs(drths_plant_dc_gain(&DRTHS_PLANT_2P5A) - 0.9925164) < 1e-7);
    assert_true(fabs(drths_plant_dc_gain(&DRTHS_PLANT_AVERAGE) - 0.9940747) < 1e-7);

    /* The discrete plant settles to the same gain, and holds a reset steady state. */
    drths_plant_t pl;
    assert_int_equal(drths_plant_init(&pl, &DRTHS_PLANT_2P5A, &DRTHS_PLANT_2P5A, 2.5, 2e-4, NULL), 0);
    drths_plant_reset(&pl, 0.0);
    double y = 0.0;
    for (int k = 0; k < 5000; k++)
        y = drths_plant_step(&pl, 0.02, 0.0, NULL);
    assert_true(fabs(y - 0.02 * drths_plant_dc_gain(&DRTHS_PLANT_2P5A)) < 1e-12);

    drths_plant_reset(&pl, 0.01);
    const double u = 0.01 / drths_plant_dc_gain(&DRTHS_PLANT_2P5A);
    double dev = 0.0, v = 1.0;
    for (int k = 0; k < 1000; k++)
        dev = fmax(dev, fabs(drths_plant_step(&pl, u, 2.5, &v) - 0.01));
    assert_true(dev < 1e-13);
    assert_true(fabs(v) < 1e-10);
}

/* Drive both a current-dependent plant and the two single-model plants with the same drive;
 * at 0 A and 2.5 A (and beyond, clamped) the outputs are identical. */
static void test_current_interpolation(void **state)
{
    (void)state;
    const double dt = 2e-4;
    drths_plant_t mix, lo, hi;
    assert_int_equal(drths_plant_init(&mix, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 2.5, dt, NULL), 0);
    assert_int_equal(drths_plant_init(&lo, &DRTHS_PLANT_0A, &DRTHS_PLANT_0A, 2.5, dt, NULL), 0);
    assert_int_equal(drths_plant_init(&hi, &DRTHS_PLANT_2P5A, &DRTHS_PLANT_2P5A, 2.5, dt, NULL), 0);
    const double currents[] = {0.0, 2.5, 4.0, -1.0, NAN};
    for (int c = 0; c < 5; c++) {
        drths_plant_t *ref = (currents[c] > 1.0) ? &hi : &lo;
        drths_plant_reset(&mix, 0.001);
        drths_plant_reset(ref, 0.001);
        double maxd = 0.0;
        for (int k = 0; k < 3000; k++) {
            const double u = 0.02 * sin(2.0 * M_PI * 5.0 * k * dt);
            double v1, v2;
            const double y1 = drths_plant_step(&mix, u, currents[c], &v1);
            const double y2 = drths_plant_step(ref, u, currents[c], &v2);
            maxd = fmax(maxd, fabs(y1 - y2) + fabs(v1 - v2));
        }
        assert_true(maxd == 0.0);
    }

    /* In between, one step is the weighted mean of the two models' steps from the same state. */
    drths_plant_reset(&mix, 0.003);
    drths_plant_reset(&lo, 0.003);
    drths_plant_reset(&hi, 0.003);
    const double ym = drths_plant_step(&mix, 0.01, 0.625, NULL);
    const double yl = drths_plant_step(&lo, 0.01, 0.0, NULL);
    const double yh = drths_plant_step(&hi, 0.01, 0.0, NULL);
    assert_true(fabs(ym - (0.75 * yl + 0.25 * yh)) < 1e-15);
    assert_true(yl != yh);
}

static void test_zoh_generic(void **state)
{
    (void)state;
    const double dt = 0.1;
    const double A2[4] = {0.0, 1.0, 0.0, 0.0}, B2[2] = {0.0, 1.0};
    double Ad[49], Bd[7];
    assert_int_equal(drths_plant_zoh(2, A2, B2, dt, Ad, Bd), 0);
    assert_true(fabs(Ad[0] - 1.0) < 1e-15 && fabs(Ad[1] - dt) < 1e-15);
    assert_true(fabs(Ad[2]) < 1e-15 && fabs(Ad[3] - 1.0) < 1e-15);
    assert_true(fabs(Bd[0] - dt * dt / 2.0) < 1e-15 && fabs(Bd[1] - dt) < 1e-15);

    const double A1 = -3.0, B1 = 2.0;
    assert_int_equal(drths_plant_zoh(1, &A1, &B1, dt, Ad, Bd), 0);
    assert_true(fabs(Ad[0] - exp(-0.3)) < 1e-15);
    assert_true(fabs(Bd[0] - 2.0 * (1.0 - exp(-0.3)) / 3.0) < 1e-15);

    assert_int_equal(drths_plant_zoh(0, &A1, &B1, dt, Ad, Bd), -EINVAL);
    assert_int_equal(drths_plant_zoh(1, &A1, &B1, 0.0, Ad, Bd), -EINVAL);
    const double bad = NAN;
    assert_int_equal(drths_plant_zoh(1, &bad, &B1, dt, Ad, Bd), -EINVAL);
}

/* The factors of drths_plant_model_scale: the bandwidth factor f scales every pole and keeps
 * the static gain (G_f(s) = G(s / f)); the gain factor scales the static gain alone; the pole
 * factors move one pole each, the complex pair's damping ratio kept. */
static void test_model_scale(void **state)
{
    (void)state;
    const drths_plant_model_t *m = &DRTHS_PLANT_AVERAGE;
    drths_plant_model_t o;
    drths_error_t err;
    drths_plant_scale_t sc = {1.0, 0.7, 1.0, 1.0};
    assert_int_equal(drths_plant_model_scale(m, &sc, &o, &err), 0);
    assert_true(fabs(o.p - 0.7 * m->p) < 1e-12 && fabs(o.a - 0.7 * m->a) < 1e-12);
    assert_true(fabs(o.b / (0.49 * m->b) - 1.0) < 1e-12);
    assert_true(fabs(o.K / (0.343 * m->K) - 1.0) < 1e-12);
    assert_true(fabs(drths_plant_dc_gain(&o) / drths_plant_dc_gain(m) - 1.0) < 1e-12);
    sc = (drths_plant_scale_t){1.2, 1.0, 1.0, 1.0};
    assert_int_equal(drths_plant_model_scale(m, &sc, &o, &err), 0);
    assert_true(fabs(drths_plant_dc_gain(&o) / drths_plant_dc_gain(m) - 1.2) < 1e-12);
    assert_true(o.p == m->p && o.a == m->a && o.b == m->b);
    sc = (drths_plant_scale_t){1.0, 1.0, 2.0, 0.5};
    assert_int_equal(drths_plant_model_scale(m, &sc, &o, &err), 0);
    assert_true(fabs(o.p - 2.0 * m->p) < 1e-12);
    /* zeta = a / (2 sqrt(b)) kept, wn = sqrt(b) halved */
    assert_true(fabs(o.a / (2.0 * sqrt(o.b)) - m->a / (2.0 * sqrt(m->b))) < 1e-12);
    assert_true(fabs(sqrt(o.b) - 0.5 * sqrt(m->b)) < 1e-9);
    assert_true(fabs(drths_plant_dc_gain(&o) / drths_plant_dc_gain(m) - 1.0) < 1e-12);
    sc = (drths_plant_scale_t){1.0, 1.0, 1.0, 0.0};
    assert_int_equal(drths_plant_model_scale(m, &sc, &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "plant_scale.complex_pole"));
    sc = (drths_plant_scale_t){NAN, 1.0, 1.0, 1.0};
    assert_int_equal(drths_plant_model_scale(m, &sc, &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "plant_scale.gain"));
}

static void test_init_errors(void **state)
{
    (void)state;
    drths_plant_t pl;
    drths_error_t err;
    drths_plant_model_t m = DRTHS_PLANT_0A;
    m.K = 0.0;
    assert_int_equal(drths_plant_init(&pl, &m, &DRTHS_PLANT_2P5A, 2.5, 2e-4, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "plant.lo.K"));
    m = DRTHS_PLANT_2P5A;
    m.b = -1.0;
    assert_int_equal(drths_plant_init(&pl, &DRTHS_PLANT_0A, &m, 2.5, 2e-4, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "plant.hi.b"));
    assert_int_equal(drths_plant_init(&pl, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 0.0, 2e-4, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "plant.i_hi_A"));
    assert_int_equal(drths_plant_init(&pl, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 2.5, -1.0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "plant.dt_s"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zoh_step_response),     cmocka_unit_test(test_dc_gain),
        cmocka_unit_test(test_current_interpolation), cmocka_unit_test(test_zoh_generic),
        cmocka_unit_test(test_model_scale),           cmocka_unit_test(test_init_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
