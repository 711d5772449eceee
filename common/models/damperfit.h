/* Identification of the MR damper model (common/models/damper.h, PHILLIPS2013) from a
 * characterization record: nonlinear least squares (Levenberg-Marquardt) of the model's force,
 * driven by the recorded displacement, velocity and damper command, against the recorded force.
 *
 * Every parameter of the model is either fitted or fixed for a stated reason:
 *  - fitted, as logarithms (each is > 0 in the model, and the log makes relative steps): the
 *    a, b, c of alpha, c0, c1, gamma and beta, and n;
 *  - fitted, linear and kept >= 0 (their nominal value is 0, where a log cannot start): k0, k1;
 *  - fixed: A, because the Bouc-Wen force depends only on alpha A and on gamma, beta times
 *    A^(n-1): replacing z by z / s, alpha by alpha s, A by A / s and gamma, beta by
 *    gamma s^(n-1), beta s^(n-1) gives the same force for every s > 0, so no record can tell
 *    A apart from alpha (the fit reports alpha, gamma, beta in the gauge of the A it was given;
 *    drths_damperfit_gauge maps any parameter set into that gauge to compare);
 *    x0, because the force depends on it only through k1 x0, a constant force that a zeroed load
 *    cell removes, and not at all when k1 is 0 (the 200-kN damper's model);
 *    the command dynamics (lag, low-pass), which a protocol of constant currents does not
 *    excite;
 *  - held by the record: each of alpha, c0, c1, gamma, beta depends on the current u as
 *    p(u) = b + (a - b) exp(-c u), three numbers that need three currents. A record with tests
 *    at only two currents (the force guard left out the strong ones) fixes p at those two and
 *    nothing more: b and c trade off along a line (seen: c0_b 3.7e5, c0_c 7e-7 for truths of
 *    0.32 and 1.5), so c is held at its starting value and a, b fitted; at one current b and c
 *    are both held. res->held says why, and the model outside the tested currents is then the
 *    starting model's shape through the fitted points.
 * The standard uncertainty of each fitted parameter is sqrt(diag(s^2 (J^T J)^-1)) with s^2 the
 * residual variance (sum of squares / (samples - parameters)) and J the Jacobian of the force
 * by forward differences; for a logarithm, u(p) = p u(log p). It assumes independent residuals;
 * the force noise of a load cell is close to that, model error is not.
 *
 * Ownership: the caller owns the data arrays and the result; drths_damperfit_run allocates its
 * work arrays and frees them before it returns. Not for the RT path: it is a tool (init-only).
 */
#ifndef DRTHS_DAMPERFIT_H
#define DRTHS_DAMPERFIT_H

#include <stdio.h>

#include "common/models/damper.h"
#include "common/platform/error.h"

/* The parameters of drths_damper_params_t the fit knows, in this order. */
enum {
    DRTHS_DAMPERFIT_ALPHA_A,
    DRTHS_DAMPERFIT_ALPHA_B,
    DRTHS_DAMPERFIT_ALPHA_C,
    DRTHS_DAMPERFIT_C0_A,
    DRTHS_DAMPERFIT_C0_B,
    DRTHS_DAMPERFIT_C0_C,
    DRTHS_DAMPERFIT_C1_A,
    DRTHS_DAMPERFIT_C1_B,
    DRTHS_DAMPERFIT_C1_C,
    DRTHS_DAMPERFIT_GAMMA_A,
    DRTHS_DAMPERFIT_GAMMA_B,
    DRTHS_DAMPERFIT_GAMMA_C,
    DRTHS_DAMPERFIT_BETA_A,
    DRTHS_DAMPERFIT_BETA_B,
    DRTHS_DAMPERFIT_BETA_C,
    DRTHS_DAMPERFIT_K0,
    DRTHS_DAMPERFIT_K1,
    DRTHS_DAMPERFIT_X0,
    DRTHS_DAMPERFIT_A,
    DRTHS_DAMPERFIT_N,
    DRTHS_DAMPERFIT_NPARAM
};

#define DRTHS_DAMPERFIT_MAX_TESTS 256

/* The record the fit runs over, at a constant step dt_s (the caller may decimate the tick-rate
 * record: the model is integrated at dt_s). test[i] is the index of the protocol's test sample
 * i belongs to (0 .. n_tests - 1), or -1 (rest, ramps between tests): every sample enters the
 * fit; the tests only group the force error. */
typedef struct drths_damperfit_data {
    const double *x_m, *v_m_s, *command, *force_N;
    const int *test;
    long n;
    int n_tests;
    double dt_s;
    double command_max; /* the protocol's highest current (0: not known): below it, the b of
                         * each current dependence is an extrapolation (weak, below) */
} drths_damperfit_data_t;

typedef struct drths_damperfit_result {
    drths_damper_params_t params;                 /* the fitted model */
    int fitted[DRTHS_DAMPERFIT_NPARAM];           /* 1 when the fit estimated it, 0 when fixed */
    int held[DRTHS_DAMPERFIT_NPARAM];             /* why the record could not identify it (held
                                                   * at its starting value): drths_damperfit_held_t */
    int weak[DRTHS_DAMPERFIT_NPARAM];             /* fitted, but not within 2 % from this
                                                   * record: drths_damperfit_weak_t */
    int n_commands;                               /* distinct currents the tests ran at */
    double commands[8];                           /* ... the first 8 of them, ascending */
    double value[DRTHS_DAMPERFIT_NPARAM];         /* the model's own units (damper.h) */
    double u[DRTHS_DAMPERFIT_NPARAM];             /* standard uncertainty; 0 when fixed */
    double rms_N, force_rms_N;                    /* force error, and the measured force's RMS */
    double test_rms_N[DRTHS_DAMPERFIT_MAX_TESTS]; /* force error per test */
    double test_force_rms_N[DRTHS_DAMPERFIT_MAX_TESTS]; /* measured force RMS per test */
    int iterations;
    int converged;
} drths_damperfit_result_t;

/* Name of parameter i as in damper.h ("alpha_a", ..., "n"). */
const char *drths_damperfit_name(int i);

/* Value of parameter i in p. */
double drths_damperfit_get(const drths_damper_params_t *p, int i);

/* Why parameter i is fixed, or NULL when the fit estimates it. */
const char *drths_damperfit_fixed_reason(int i);

/* Why the record could not identify a parameter ("held by the record" above). */
typedef enum drths_damperfit_held {
    DRTHS_DAMPERFIT_NOT_HELD = 0,
    DRTHS_DAMPERFIT_HELD_TWO_CURRENTS, /* a c: the tests ran at two currents */
    DRTHS_DAMPERFIT_HELD_ONE_CURRENT,  /* a b or c: the tests ran at one current */
    DRTHS_DAMPERFIT_HELD_UNSEPARATED   /* a c: b and c not separated by the record */
} drths_damperfit_held_t;

/* The sentence for a held code (fit_parameters.csv's `held` column, the printout, the report),
 * NULL for DRTHS_DAMPERFIT_NOT_HELD or an unknown code. */
const char *drths_damperfit_held_text(int code);

/* Why a fitted parameter is not determined within 2 % by the record (res->weak): the fit uses
 * its value, and says this of it.
 *  - UNCERTAIN: its standard uncertainty is above 1 % of it (2 u > 2 %): the force depends on
 *    it too little against the load cell's noise over this record (seen on the virtual
 *    specimen at n = 4, whose hysteresis force is a seventh of n = 2's: gamma, beta 2-3 %
 *    uncertain and 7-10 % off with the study's mixed-2 damper).
 *  - EXTRAPOLATED: a b (p(u) for u large) when the tests stopped below the protocol's highest
 *    current (data->command_max; the force guard left the strong tests out): b is then the
 *    fitted curve carried beyond the currents tested, where nothing measured it. Its
 *    uncertainty says how well the curve is fitted, not how right the carrying is: when the
 *    damper follows the model's exponential it comes out right (tests up to 0.5 A of 2.5 A:
 *    the five b's within 1 %), but nothing in the record shows that it does. */
typedef enum drths_damperfit_weak {
    DRTHS_DAMPERFIT_NOT_WEAK = 0,
    DRTHS_DAMPERFIT_WEAK_UNCERTAIN,
    DRTHS_DAMPERFIT_WEAK_EXTRAPOLATED
} drths_damperfit_weak_t;

/* The sentence for a weak code, NULL for DRTHS_DAMPERFIT_NOT_WEAK or an unknown code. */
const char *drths_damperfit_weak_text(int code);

/* The same force model as p with A = A_ref (the gauge of a fit started at A_ref): with
 * s = A / A_ref, alpha (a and b) times s and gamma, beta (a and b) times s^(n-1), so that
 * alpha A and gamma A^(n-1), beta A^(n-1) are unchanged. For comparing a fit with a known
 * truth. */
void drths_damperfit_gauge(const drths_damper_params_t *p, double A_ref,
                           drths_damper_params_t *out);

/* Fits start's model (PHILLIPS2013 only: -ENOTSUP otherwise) to data, starting from start's
 * values, at most max_iter Levenberg-Marquardt iterations (0: 100). Returns 0 with *res filled,
 * or a negative errno with err saying why (too few samples, a model that does not run, no
 * memory). */
int drths_damperfit_run(const drths_damperfit_data_t *data, const drths_damper_params_t *start,
                        int max_iter, drths_damperfit_result_t *res, drths_error_t *err);

/* The model's force along data with parameters p, into force_N[data->n]. Returns 0 or a
 * negative errno (p does not validate). */
int drths_damperfit_simulate(const drths_damperfit_data_t *data, const drths_damper_params_t *p,
                             double *force_N, drths_error_t *err);

#endif
