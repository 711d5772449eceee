/* Virtual specimen: ideal actuator = damper alone, I/O delay, reproducible Gaussian noise of the
 * right size, ADC quantisation and saturation, the plant following the damper current, no
 * allocation per tick, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/specimen.h"

#define DT 2e-4

#include "alloc_count.h"

static void quiet_params(drths_specimen_params_t *p, drths_damper_model_t m)
{
    drths_specimen_params_default(p, m);
    p->plant_enabled = 0;
    p->noise_disp_m = p->noise_force_N = 0.0;
    p->adc_bits = 0;
    p->io_delay_ticks = 0;
}

static void test_ideal_equals_damper(void **state)
{
    (void)state;
    drths_specimen_params_t p;
    quiet_params(&p, DRTHS_DAMPER_PHILLIPS2013);
    drths_specimen_t s;
    drths_damper_t d;
    drths_error_t err;
    assert_int_equal(drths_specimen_init(&s, &p, DT, &err), 0);
    assert_int_equal(drths_damper_init(&d, &p.damper, DT, &err), 0);
    drths_specimen_reset(&s, 0.0, 1.0);
    drths_damper_reset(&d, 0.0, 1.0);
    double peak = 0.0;
    for (int k = 1; k < 5000; k++) {
        const double w = 2.0 * M_PI * 2.0, t = k * DT;
        const double x = 0.02 * sin(w * t), v = 0.02 * w * cos(w * t);
        const double c = k < 2500 ? 1.0 : 2.5;
        drths_specimen_meas_t m;
        drths_specimen_step(&s, x, v, c, &m);
        const double f = drths_damper_step(&d, x, v, c);
        assert_true(m.true_force_N == f && m.force_N == f);
        assert_true(m.true_disp_m == x && m.disp_m == x && m.true_vel_m_s == v);
        assert_true(m.current == drths_damper_command_effective(&d));
        peak = fmax(peak, fabs(f));
    }
    assert_true(peak > 50e3);
    drths_specimen_close(&s);
    drths_specimen_close(&s);
}

static void test_io_delay(void **state)
{
    (void)state;
    drths_specimen_params_t p;
    quiet_params(&p, DRTHS_DAMPER_LINEAR_SPRING);
    p.damper.stiffness_N_per_m = 1000.0;
    p.io_delay_ticks = 3;
    drths_specimen_t s;
    assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
    drths_specimen_reset(&s, 0.5, 0.0);
    for (int k = 0; k < 20; k++) {
        drths_specimen_meas_t m;
        drths_specimen_step(&s, k * 0.01, k * 0.1, 0.0, &m);
        const double want = k < 3 ? 0.5 : (k - 3) * 0.01;
        const double wantv = k < 3 ? 0.0 : (k - 3) * 0.1;
        assert_true(fabs(m.true_disp_m - want) < 1e-15);
        assert_true(fabs(m.true_vel_m_s - wantv) < 1e-15);
        assert_true(fabs(m.force_N - 1000.0 * want) < 1e-12);
    }
    drths_specimen_close(&s);
}

static void noise_run(drths_specimen_t *s, int n, double *buf)
{
    for (int k = 0; k < n; k++) {
        drths_specimen_meas_t m;
        drths_specimen_step(s, 0.0, 0.0, 0.0, &m);
        buf[2 * k] = m.disp_m;
        buf[2 * k + 1] = m.force_N;
    }
}

#define NN 40000
static void test_noise(void **state)
{
    (void)state;
    static double a[2 * NN], b[2 * NN], c[2 * NN];
    drths_specimen_params_t p;
    quiet_params(&p, DRTHS_DAMPER_NONE);
    p.noise_disp_m = 1e-5;
    p.noise_force_N = 100.0;
    p.seed = 42;
    drths_specimen_t s1, s2;
    assert_int_equal(drths_specimen_init(&s1, &p, DT, NULL), 0);
    noise_run(&s1, NN, a);
    drths_specimen_reset(&s1, 0.0, 0.0);
    noise_run(&s1, NN, b);
    assert_memory_equal(a, b, sizeof a); /* reset restarts the generator */
    p.seed = 43;
    assert_int_equal(drths_specimen_init(&s2, &p, DT, NULL), 0);
    noise_run(&s2, NN, c);
    assert_true(memcmp(a, c, sizeof a) != 0);

    double sd[2] = {0, 0}, mean[2] = {0, 0}, corr = 0.0, k4 = 0.0;
    int beyond3 = 0;
    for (int k = 0; k < NN; k++)
        for (int j = 0; j < 2; j++)
            mean[j] += a[2 * k + j] / NN;
    for (int k = 0; k < NN; k++) {
        for (int j = 0; j < 2; j++)
            sd[j] += (a[2 * k + j] - mean[j]) * (a[2 * k + j] - mean[j]) / NN;
        corr += a[2 * k] * a[2 * k + 1] / NN;
        const double zf = a[2 * k + 1] / 100.0;
        k4 += zf * zf * zf * zf / NN;
        beyond3 += fabs(zf) > 3.0;
    }
    sd[0] = sqrt(sd[0]);
    sd[1] = sqrt(sd[1]);
    printf("  noise: disp mean %.2e m sd %.4e m; force mean %.3f N sd %.3f N; "
           "corr %.4f; kurtosis %.3f; |z|>3: %d of %d\n",
           mean[0], sd[0], mean[1], sd[1], corr / (sd[0] * sd[1]), k4, beyond3, NN);
    /* 40000 samples: the standard error of the sd is 0.35 %, of the mean 0.5 % of sd. */
    assert_true(fabs(sd[0] / 1e-5 - 1.0) < 0.02 && fabs(sd[1] / 100.0 - 1.0) < 0.02);
    assert_true(fabs(mean[0]) < 0.03e-5 && fabs(mean[1]) < 3.0);
    assert_true(fabs(corr / (sd[0] * sd[1])) < 0.03);
    assert_true(fabs(k4 - 3.0) < 0.15);                   /* Gaussian kurtosis */
    assert_true(beyond3 > 0.0027 * NN * 0.6 && beyond3 < 0.0027 * NN * 1.4);
    drths_specimen_close(&s1);
    drths_specimen_close(&s2);
}

static void test_quantisation(void **state)
{
    (void)state;
    drths_specimen_params_t p;
    quiet_params(&p, DRTHS_DAMPER_LINEAR_SPRING);
    p.damper.stiffness_N_per_m = 1e3;
    p.adc_bits = 8;
    p.disp_range_m = 1.0;
    p.force_range_N = 500.0;
    drths_specimen_t s;
    assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
    const double qd = 2.0 / 256.0, qf = 1000.0 / 256.0;
    for (int k = -1200; k <= 1200; k++) {
        const double x = k * 1e-3;
        drths_specimen_meas_t m;
        const int rc = drths_specimen_step(&s, x, 0.0, 0.0, &m);
        const double code = m.disp_m / qd, fcode = m.force_N / qf;
        /* A reading at an end code is a saturated converter, reported like the comedi back
         * end's (-ERANGE), with the channel's bit. */
        const unsigned want =
            (code >= 127 || code <= -128 ? 1u : 0u) | (fcode >= 127 || fcode <= -128 ? 2u : 0u);
        assert_int_equal(m.saturated, want);
        assert_int_equal(rc, want ? -ERANGE : 0);
        assert_true(code == nearbyint(code) && fcode == nearbyint(fcode));
        if (fabs(x) < 0.99) {
            assert_true(fabs(m.disp_m - x) <= qd / 2 + 1e-15);
        }
        if (fabs(1e3 * x) < 495.0) {
            assert_true(fabs(m.force_N - 1e3 * x) <= qf / 2 + 1e-12);
        }
        if (x >= 1.0) {
            assert_true(m.disp_m == 127 * qd);
        }
        if (x <= -1.0) {
            assert_true(m.disp_m == -1.0);
        }
        if (x >= 0.5) {
            assert_true(m.force_N == 127 * qf);
        }
        assert_true(m.true_disp_m == x);
    }
    drths_specimen_close(&s);
}

/* Settled displacement under a constant drive through the plant. */
static double settle(drths_specimen_t *s, double drive, double command)
{
    drths_specimen_reset(s, 0.0, command);
    drths_specimen_meas_t m = {0};
    for (int k = 0; k < 5000; k++)
        drths_specimen_step(s, drive, 0.0, command, &m);
    return m.true_disp_m;
}

/* The plant's factors: the gain factor scales the settled displacement; the bandwidth factor
 * keeps it and slows the response. */
static void test_plant_scale(void **state)
{
    (void)state;
    drths_specimen_params_t p;
    quiet_params(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.plant_enabled = 1;
    drths_specimen_t s;
    assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
    const double nominal = settle(&s, 0.01, 0.0);
    drths_specimen_close(&s);
    p.plant_scale.gain = 0.8;
    assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
    const double g = settle(&s, 0.01, 0.0);
    drths_specimen_close(&s);
    assert_true(fabs(g / nominal - 0.8) < 1e-9);
    /* 10 ms after a step the slower plant has covered less of it. */
    double early[2];
    for (int i = 0; i < 2; i++) {
        p.plant_scale.gain = 1.0;
        p.plant_scale.bandwidth = i ? 0.7 : 1.0;
        assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
        drths_specimen_meas_t m = {0};
        for (int k = 0; k < 50; k++)
            drths_specimen_step(&s, 0.01, 0.0, 0.0, &m);
        early[i] = m.true_disp_m;
        assert_true(fabs(settle(&s, 0.01, 0.0) - nominal) < 1e-12);
        drths_specimen_close(&s);
    }
    assert_true(early[1] < 0.9 * early[0]);
}

static void test_plant_follows_current(void **state)
{
    (void)state;
    drths_specimen_params_t p;
    quiet_params(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.plant_enabled = 1;
    p.io_delay_ticks = 1;
    drths_specimen_t s;
    assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
    const double y0 = settle(&s, 0.01, 0.0), y25 = settle(&s, 0.01, 2.5);
    printf("  plant: drive 10 mm settles at %.7f mm (0 A), %.7f mm (2.5 A)\n", y0 * 1e3, y25 * 1e3);
    assert_true(fabs(y0 - 0.01 * drths_plant_dc_gain(&DRTHS_PLANT_0A)) < 1e-12);
    assert_true(fabs(y25 - 0.01 * drths_plant_dc_gain(&DRTHS_PLANT_2P5A)) < 1e-12);

    /* A 2 Hz sine: the plant lags a little and its output velocity is the displacement's
     * derivative. */
    drths_specimen_reset(&s, 0.0, 2.5);
    double maxerr = 0.0, prev = 0.0, maxdv = 0.0;
    for (int k = 1; k <= 5000; k++) {
        const double t = k * DT, w = 2.0 * M_PI * 2.0;
        drths_specimen_meas_t m;
        drths_specimen_step(&s, 0.02 * sin(w * t), 0.0, 2.5, &m);
        if (k > 2500) {
            maxerr = fmax(maxerr, fabs(m.true_disp_m - 0.02 * sin(w * t)));
            maxdv = fmax(maxdv, fabs((m.true_disp_m - prev) / DT - m.true_vel_m_s));
        }
        prev = m.true_disp_m;
    }
    /* Expected: 20 mm |1 - G(jw) exp(-jw dt/2)|: with one tick of I/O delay the drive of tick t
     * is held over [t, t+1] (half a tick of delay on average), and the plant adds about 7
     * degrees of phase lag at 2 Hz. */
    const drths_plant_model_t *g = &DRTHS_PLANT_2P5A;
    const double complex jw = I * 2.0 * M_PI * 2.0;
    const double complex G = g->K / ((jw + g->p) * (jw * jw + g->a * jw + g->b));
    const double expect = 0.02 * cabs(1.0 - G * cexp(-jw * 0.5 * DT));
    printf("  plant: 20 mm 2 Hz drive, max tracking error %.4f mm (frequency response: %.4f mm), "
           "|dy/dt - v| %.2e m/s\n",
           maxerr * 1e3, expect * 1e3, maxdv);
    assert_true(fabs(maxerr - expect) < 0.002 * expect);
    assert_true(maxdv < 2e-3);
    drths_specimen_close(&s);

    /* The voltage-driven damper maps 0..2.25 V onto the plant's 0..2.5 A models. */
    quiet_params(&p, DRTHS_DAMPER_SPENCER1997);
    p.plant_enabled = 1;
    assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
    assert_true(fabs(settle(&s, 0.01, 2.25) - 0.01 * drths_plant_dc_gain(&DRTHS_PLANT_2P5A)) < 1e-12);
    drths_specimen_close(&s);
}

static void test_no_allocation_per_tick(void **state)
{
    (void)state;
#if COUNT_ALLOCS
    drths_specimen_params_t p;
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    drths_specimen_t s;
    const long before_init = alloc_count;
    assert_int_equal(drths_specimen_init(&s, &p, DT, NULL), 0);
    assert_true(alloc_count > before_init); /* the counter works: init allocates the delay line */
    const long before = alloc_count;
    drths_specimen_meas_t m;
    for (int k = 0; k < 20000; k++)
        drths_specimen_step(&s, 0.02 * sin(k * 1e-3), 0.0, (k / 1000) % 2 ? 2.5 : 0.0, &m);
    drths_specimen_reset(&s, 0.0, 1.0);
    assert_int_equal(alloc_count - before, 0);
    drths_specimen_close(&s);
#else
    skip();
#endif
}

static void test_errors(void **state)
{
    (void)state;
    drths_specimen_params_t p;
    drths_specimen_t s;
    drths_error_t err;
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.adc_bits = 40;
    assert_int_equal(drths_specimen_init(&s, &p, DT, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "specimen.adc_bits"));
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.force_range_N = 0.0;
    assert_int_equal(drths_specimen_init(&s, &p, DT, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "specimen.force_range_N"));
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.noise_disp_m = -1.0;
    assert_int_equal(drths_specimen_init(&s, &p, DT, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "specimen.noise_disp_m"));
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.io_delay_ticks = -1;
    assert_int_equal(drths_specimen_init(&s, &p, DT, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "specimen.io_delay_ticks"));
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.damper.A = -1.0;
    assert_int_equal(drths_specimen_init(&s, &p, DT, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "specimen: damper.A"));
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    p.plant_scale.bandwidth = 0.0;
    assert_int_equal(drths_specimen_init(&s, &p, DT, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "specimen: plant_scale.bandwidth"));
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    assert_int_equal(drths_specimen_init(&s, &p, 0.0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "dt_s"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ideal_equals_damper),
        cmocka_unit_test(test_io_delay),
        cmocka_unit_test(test_noise),
        cmocka_unit_test(test_quantisation),
        cmocka_unit_test(test_plant_follows_current),
        cmocka_unit_test(test_plant_scale),
        cmocka_unit_test(test_no_allocation_per_tick),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
