/* Acceptance tests of the monolithic reference run on the default experiment:
 * step-halving convergence of every floor's peak, and the damper's effect against the structure
 * without it (the magnitudes expected of the default experiment). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/config/config.h"
#include "site-numerical/reference.h"

static drths_experiment_t ex;

static int setup(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/three-story-elcentro.yaml",
             getenv("DRTHS_SOURCE_DIR") ? getenv("DRTHS_SOURCE_DIR") : "..");
    drths_error_t err = {{0}};
    if (drths_experiment_load(&ex, path, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    drths_experiment_close(&ex);
    return 0;
}

static void run(drths_reference_summary_t *s)
{
    drths_error_t err = {{0}};
    int rc = drths_reference_run(&ex, NULL, s, NULL, NULL, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
}

/* Halving the step changes every floor's peak displacement by less than 0.1 %. */
static void halving(drths_control_mode_t mode)
{
    drths_reference_summary_t a, b;
    ex.control.mode = mode;
    ex.rate_hz = 5000;
    run(&a);
    ex.rate_hz = 10000;
    run(&b);
    ex.rate_hz = 5000;
    for (int i = 0; i < a.n; i++) {
        double rel = fabs(a.peak_x_m[i] - b.peak_x_m[i]) / b.peak_x_m[i];
        printf("  %s floor %d: peak %.4f mm at 5 kHz, %.4f mm at 10 kHz, change %.5f %%\n",
               drths_control_mode_name(mode), i + 1, 1e3 * a.peak_x_m[i], 1e3 * b.peak_x_m[i],
               100 * rel);
        assert_true(rel < 1e-3);
    }
    drths_reference_summary_close(&a);
    drths_reference_summary_close(&b);
}

static void test_halving_passive_off(void **state)
{
    (void)state;
    halving(DRTHS_CONTROL_PASSIVE_OFF);
}

static void test_halving_passive_on(void **state)
{
    (void)state;
    halving(DRTHS_CONTROL_PASSIVE_ON);
}

/* The default experiment without delay: passive-on (2.5 A) reduces the roof peak from about 33 mm
 * (no damper) to about 20 mm; the damper force peaks near 205 kN. */
static void test_damper_effect(void **state)
{
    (void)state;
    drths_reference_summary_t none, on, off;
    drths_damper_model_t model = ex.specimen.damper.model;
    ex.control.mode = DRTHS_CONTROL_PASSIVE_OFF;
    ex.specimen.damper.model = DRTHS_DAMPER_NONE;
    run(&none);
    ex.specimen.damper.model = model;
    run(&off);
    ex.control.mode = DRTHS_CONTROL_PASSIVE_ON;
    run(&on);
    int roof = none.n - 1;
    printf("  roof peak: no damper %.2f mm, passive-off %.2f mm, passive-on %.2f mm; "
           "peak damper force (on) %.1f kN\n",
           1e3 * none.peak_x_m[roof], 1e3 * off.peak_x_m[roof], 1e3 * on.peak_x_m[roof],
           1e-3 * on.peak_force_N);
    assert_true(fabs(none.peak_x_m[roof] - 0.033) < 0.003);
    assert_true(fabs(on.peak_x_m[roof] - 0.020) < 0.002);
    assert_true(on.peak_x_m[roof] < 0.7 * none.peak_x_m[roof]);
    assert_true(off.peak_x_m[roof] < none.peak_x_m[roof]);
    assert_true(on.peak_x_m[roof] < off.peak_x_m[roof]);
    assert_true(fabs(on.peak_force_N - 205e3) < 0.05 * 205e3);
    assert_true(none.peak_force_N == 0.0);
    drths_reference_summary_close(&none);
    drths_reference_summary_close(&on);
    drths_reference_summary_close(&off);
}

/* examples/two-labs.yaml (sites: one damper at floor 1 in lab A, one at floor 2 in lab B). */
static void load_two_labs(drths_experiment_t *x)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/two-labs.yaml",
             getenv("DRTHS_SOURCE_DIR") ? getenv("DRTHS_SOURCE_DIR") : "..");
    drths_error_t err = {{0}};
    int rc = drths_experiment_load(x, path, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(drths_experiment_n_dampers(x), 2);
}

static void run_exp(const drths_experiment_t *x, drths_reference_summary_t *s)
{
    drths_error_t err = {{0}};
    int rc = drths_reference_run(x, NULL, s, NULL, NULL, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(rc, 0);
}

/* The reference with sites integrates every damper at once. One site with its one damper at
 * floor 1 is the one-site file to the last bit; two linear springs of k/2 on one storey are one
 * spring of k there (the dampers' forces add up); and lab B's damper at floor 2 lowers the upper
 * floors' peaks below those with lab A's alone. */
static void test_sites(void **state)
{
    (void)state;
    drths_experiment_t two;
    load_two_labs(&two);
    two.ground_motion.duration_s = ex.ground_motion.duration_s = 4.0;
    ex.control.mode = two.control.mode = DRTHS_CONTROL_CLIPPED_OPTIMAL;
    ex.rate_hz = two.rate_hz = 5000;
    for (int k = 0; k < 2; k++) {
        two.dampers[k].exp.rate_hz = 5000;
        two.dampers[k].exp.control = two.control;
    }
    /* Lab A alone. */
    drths_reference_summary_t a, one;
    two.n_sites = 1;
    two.n_dampers = 1;
    run_exp(&two, &a);
    two.n_sites = 2;
    two.n_dampers = 2;
    run_exp(&ex, &one);
    assert_int_equal(a.n_dampers, 1);
    for (int i = 0; i < a.n; i++) {
        assert_true(a.peak_x_m[i] == one.peak_x_m[i]);
        assert_true(a.rms_a_m_s2[i] == one.rms_a_m_s2[i]);
    }
    assert_true(a.peak_force_N == one.peak_force_N);
    drths_reference_summary_close(&one);

    /* Both labs: one regulator with two inputs; damper 2 acts on storey 2. */
    drths_reference_summary_t b;
    run_exp(&two, &b);
    assert_int_equal(b.n_dampers, 2);
    assert_int_equal(b.dampers[1].floor, 2);
    assert_true(b.dampers[1].peak_force_N > 10e3);
    assert_true(b.riccati_residual < 1e-8 && b.spectral_radius < 1.0);
    printf("  clipped-optimal, 4 s: roof peak %.3f mm with lab A's damper, %.3f mm with both\n",
           1e3 * a.peak_x_m[2], 1e3 * b.peak_x_m[2]);
    assert_true(b.peak_x_m[1] < a.peak_x_m[1] && b.peak_x_m[2] < a.peak_x_m[2]);
    drths_reference_summary_close(&a);
    drths_reference_summary_close(&b);

    /* Two springs of k/2 at floor 2 against one spring of k at floor 2. */
    const double k_spring = 2e7;
    two.control.mode = ex.control.mode = DRTHS_CONTROL_PASSIVE_OFF;
    two.control.command = 0.0;
    for (int k = 0; k < 2; k++) {
        drths_experiment_t *v = &two.dampers[k].exp;
        v->control = two.control;
        v->specimen.floor = 2;
        v->specimen.damper.model = DRTHS_DAMPER_LINEAR_SPRING;
        v->specimen.damper.stiffness_N_per_m = 0.5 * k_spring;
    }
    drths_experiment_t saved = ex;
    ex.specimen.floor = 2;
    ex.specimen.damper.model = DRTHS_DAMPER_LINEAR_SPRING;
    ex.specimen.damper.stiffness_N_per_m = k_spring;
    drths_reference_summary_t halves, whole;
    run_exp(&two, &halves);
    run_exp(&ex, &whole);
    ex = saved;
    for (int i = 0; i < whole.n; i++)
        assert_true(fabs(halves.peak_x_m[i] - whole.peak_x_m[i]) <= 1e-9 * whole.peak_x_m[i]);
    assert_true(fabs(halves.dampers[0].peak_force_N - 0.5 * whole.peak_force_N) <=
                1e-9 * whole.peak_force_N);
    drths_reference_summary_close(&halves);
    drths_reference_summary_close(&whole);
    ex.ground_motion.duration_s = 0.0;
    drths_experiment_close(&two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_halving_passive_off),
        cmocka_unit_test(test_halving_passive_on),
        cmocka_unit_test(test_damper_effect),
        cmocka_unit_test(test_sites),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
