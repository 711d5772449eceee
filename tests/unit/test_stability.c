/* The numerical site's stability detector (site-numerical/stability.h) on synthetic responses of
 * a one-storey structure (3 Hz, 2 % damping) with a damper at its storey: a passive damper's
 * free vibration, the same damper's force arriving 100 ms late (the loop delay without a Smith
 * predictor: negative damping at 3 Hz), and an earthquake-like transient with a friction damper.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "site-numerical/stability.h"

#define RATE_HZ 5000.0
#define DT (1.0 / RATE_HZ)
#define MASS 1000.0
#define FREQ_HZ 3.0
#define ZETA 0.02
/* The damper's viscous coefficient: five times the structure's own damping. */
#define DAMPER_C_FACTOR 5.0
#define DELAY_TICKS 500 /* 100 ms */

typedef struct {
    drths_structure_t st;
    drths_stability_t det;
    double k, c;
} fixture_t;

static drths_stability_params_t default_params(void)
{
    drths_stability_params_t p = {1, 0.5, 0.3, 0.0002, 2.0};
    return p;
}

static void setup_fixture(fixture_t *f, const drths_stability_params_t *p)
{
    memset(f, 0, sizeof *f);
    double w = 2.0 * M_PI * FREQ_HZ;
    double m = MASS;
    f->k = w * w * MASS;
    f->c = 2.0 * ZETA * w * MASS;
    drths_error_t err = {{0}};
    assert_int_equal(drths_structure_init_matrices(&f->st, 1, &m, &f->c, &f->k, &err), 0);
    assert_int_equal(drths_stability_init(&f->det, p, &f->st, DT, &err), 0);
}

typedef double (*damper_fn)(const double *v_hist, long n, double v);

/* Semi-implicit Euler of m a + c v + k x + R = -m ag for `seconds`, feeding the detector each
 * step. v_hist holds every velocity (for the delayed damper). Returns the step of the first trip
 * or -1; *peak gets the largest |x|. */
static long simulate(fixture_t *f, double x0, double seconds, damper_fn damper,
                     double (*ag)(double t), double *peak)
{
    long steps = (long)(seconds * RATE_HZ);
    double *v_hist = calloc((size_t)steps + 1, sizeof(double));
    assert_non_null(v_hist);
    double x = x0, v = 0.0, r = damper(v_hist, 0, 0.0);
    long trip = -1;
    *peak = fabs(x);
    for (long n = 1; n <= steps; n++) {
        double t = (double)n * DT;
        double a = (-MASS * (ag ? ag(t) : 0.0) - f->c * v - f->k * x - r) / MASS;
        v += a * DT;
        x += v * DT;
        v_hist[n] = v;
        r = damper(v_hist, n, v);
        *peak = fmax(*peak, fabs(x));
        if (drths_stability_step(&f->det, &x, &v, x, r) && trip < 0)
            trip = n;
    }
    free(v_hist);
    return trip;
}

static double damper_c(void)
{
    return DAMPER_C_FACTOR * 2.0 * ZETA * 2.0 * M_PI * FREQ_HZ * MASS;
}

static double passive_damper(const double *v_hist, long n, double v)
{
    (void)v_hist;
    (void)n;
    return damper_c() * v;
}

/* The same damper's force as the structure gets it DELAY_TICKS late (no Smith predictor). */
static double late_damper(const double *v_hist, long n, double v)
{
    (void)v;
    return n >= DELAY_TICKS ? damper_c() * v_hist[n - DELAY_TICKS] : 0.0;
}

/* A friction damper (an MR damper's yield force, smoothed) plus a little viscosity: passive. */
static double friction_damper(const double *v_hist, long n, double v)
{
    (void)v_hist;
    (void)n;
    return 300.0 * tanh(v / 0.005) + 0.5 * damper_c() * v;
}

/* A burst of ground motion at 2.5, 3 and 4.5 Hz under a 1 - 6 s envelope, 3 m/s2 peak. */
static double quake(double t)
{
    if (t < 1.0 || t > 6.0)
        return 0.0;
    double env = sin(M_PI * (t - 1.0) / 5.0);
    return 3.0 * env *
           (0.5 * sin(2.0 * M_PI * 2.5 * t) + 0.3 * sin(2.0 * M_PI * 3.0 * t + 1.0) +
            0.2 * sin(2.0 * M_PI * 4.5 * t + 2.0));
}

static void test_stable_decay_does_not_trip(void **state)
{
    (void)state;
    fixture_t f;
    drths_stability_params_t p = default_params();
    setup_fixture(&f, &p);
    double peak;
    long trip = simulate(&f, 0.02, 5.0, passive_damper, NULL, &peak);
    assert_int_equal(trip, -1);
    assert_false(f.det.tripped);
    assert_true(f.det.judgements > 3);
    /* The damper took energy in every judgement: the ratio is negative, far from the limit. */
    assert_true(f.det.worst.judged);
    assert_true(f.det.worst.ratio < 0.0);
    drths_structure_close(&f.st);
}

static void test_growing_oscillation_trips_within_a_second(void **state)
{
    (void)state;
    fixture_t f;
    drths_stability_params_t p = default_params();
    setup_fixture(&f, &p);
    double peak;
    /* 1 mm from the start, above the amplitude floor: the oscillation starts at t = 0. */
    long trip = simulate(&f, 0.001, 5.0, late_damper, NULL, &peak);
    assert_true(trip > 0);
    double trip_s = (double)trip * DT;
    print_message("late damper: HOLD at %.3f s, ratio %.2f, growth %.2f/s: %s\n", trip_s,
                  f.det.trip.ratio, f.det.trip.growth_per_s, f.det.text);
    assert_true(trip_s <= 1.0);
    assert_true(f.det.tripped);
    assert_true(f.det.trip.ratio >= p.limit);
    assert_true(f.det.trip.freq_hz > 2.0 && f.det.trip.freq_hz < 4.0);
    assert_non_null(strstr(f.det.text, "adding energy"));
    assert_true(strlen(f.det.text) <= 200); /* fits an ABORT's text */
    /* It trips once: the view of the trip stays. */
    double first = f.det.trip.time_s;
    double x = 0.0, v = 0.0;
    for (int i = 0; i < 10000; i++)
        drths_stability_step(&f.det, &x, &v, sin(i * 0.01), 0.0);
    assert_true(f.det.trip.time_s == first);
    drths_structure_close(&f.st);
}

static void test_earthquake_transient_does_not_trip(void **state)
{
    (void)state;
    fixture_t f;
    drths_stability_params_t p = default_params();
    setup_fixture(&f, &p);
    double peak;
    long trip = simulate(&f, 0.0, 10.0, friction_damper, quake, &peak);
    print_message("earthquake-like transient: peak %.1f mm, largest ratio %.2f\n", peak * 1e3,
                  f.det.worst.ratio);
    assert_true(peak > 0.01); /* a large response: the ground put much energy in */
    assert_int_equal(trip, -1);
    assert_true(f.det.judgements > 10);
    assert_true(f.det.worst.ratio < 0.0);
    drths_structure_close(&f.st);
}

static void test_off_and_bad_settings(void **state)
{
    (void)state;
    fixture_t f;
    drths_stability_params_t p = default_params();
    p.enabled = 0;
    p.limit = 0.0;
    setup_fixture(&f, &p);
    double peak;
    assert_int_equal(simulate(&f, 0.001, 3.0, late_damper, NULL, &peak), -1);
    assert_int_equal(f.det.judgements, 0);
    drths_structure_close(&f.st);

    drths_stability_t det;
    drths_error_t err = {{0}};
    p = default_params();
    p.span_s = 0.0;
    setup_fixture(&f, &(drths_stability_params_t){0});
    assert_int_equal(drths_stability_init(&det, &p, &f.st, DT, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "numerical.stability_"));
    p = default_params();
    assert_int_equal(drths_stability_init(&det, &p, NULL, DT, &err), -EINVAL);
    drths_structure_close(&f.st);
}

/* A floor below the amplitude keeps a growing but tiny oscillation (sensor noise) unjudged. */
static void test_amplitude_floor(void **state)
{
    (void)state;
    fixture_t f;
    drths_stability_params_t p = default_params();
    p.min_amplitude_m = 0.01; /* 10 mm: the 1 mm start stays below it for 2 s */
    setup_fixture(&f, &p);
    double peak;
    long trip = simulate(&f, 0.001, 2.0, late_damper, NULL, &peak);
    assert_true(peak < 0.01);
    assert_int_equal(trip, -1);
    assert_int_equal(f.det.judgements, 0);
    drths_structure_close(&f.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stable_decay_does_not_trip),
        cmocka_unit_test(test_growing_oscillation_trips_within_a_second),
        cmocka_unit_test(test_earthquake_transient_does_not_trip),
        cmocka_unit_test(test_off_and_bad_settings),
        cmocka_unit_test(test_amplitude_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
