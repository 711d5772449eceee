/* Magnetorheological damper models: the Spencer et al. 1997 phenomenological
 * Bouc-Wen model,
 *
 *     F  = alpha z + c0 (x' - y') + k0 (x - y) + k1 (x - x0)  =  c1 y' + k1 (x - x0)
 *     y' = [alpha z + c0 x' + k0 (x - y)] / (c0 + c1)
 *     z' = -gamma |x' - y'| z |z|^(n-1) - beta (x' - y') |z|^n + A (x' - y'),
 *
 * in two parameterisations:
 *  - PHILLIPS2013: the current-driven 200-kN damper of Phillips & Spencer 2013 (their
 *    Table 3), coefficients in mm, kN, s, A. Each of alpha, c0, c1, gamma, beta depends on the
 *    effective current i as p(i) = p_b + (p_a - p_b) exp(-p_c i). The commanded current i_d
 *    reaches i through (s + 9 pi) / (9 (s + pi)) followed by a second-order low-pass at 75 Hz.
 *    The paper gives only the corner frequency of that low-pass; it is taken as a Butterworth
 *    filter (damping ratio 1/sqrt(2)).
 *  - SPENCER1997: the small voltage-driven damper of Spencer et al. 1997, coefficients in cm, N,
 *    s, V. alpha, c0, c1 are p(u) = p_a + p_b u, where the filtered voltage u follows the
 *    command v through u' = -eta (u - v).
 * and two trivial ones for tests and dry runs: NONE (no force) and LINEAR_SPRING (F = k x).
 *
 * The public API is SI (m, m/s, N; command in A or V). Internally the model runs in the units of
 * its paper (length_unit_m, force_unit_N) so the published numbers are used as they are.
 *
 * Integration: the command dynamics are discretised exactly (zero-order hold on the command
 * over each tick). The (y, z) equations are integrated with classical RK4 over `substeps` equal
 * substeps per tick; displacement and velocity are interpolated linearly across the tick between
 * the previous and the given end-of-step values, and the coefficients are evaluated once per
 * tick at the mean of the start and end effective command (the command dynamics are 100 times
 * slower than a 5 kHz tick). The z equation is stiff at high relative velocity: its Jacobian is
 * about -n (gamma + beta)^(1/n) A^((n-1)/n) |x' - y'| near saturation. With substeps = 0 the
 * number is chosen so that this times the substep stays <= 0.2 at v_max_m_s for every command
 * in range. tests/unit/test_damper.c checks convergence and an independent reference.
 *
 * Ownership: the caller owns drths_damper_t and drths_damper_params_t; init copies the
 * parameters; nothing is allocated.
 */
#ifndef DRTHS_DAMPER_H
#define DRTHS_DAMPER_H

#include "common/platform/error.h"

typedef enum {
    DRTHS_DAMPER_NONE,
    DRTHS_DAMPER_PHILLIPS2013, /* current-driven 200 kN; coefficients in mm, kN, s, A */
    DRTHS_DAMPER_SPENCER1997,  /* voltage-driven small damper; coefficients in cm, N, s, V */
    DRTHS_DAMPER_LINEAR_SPRING /* F = stiffness_N_per_m x */
} drths_damper_model_t;

typedef struct {
    drths_damper_model_t model;

    /* The model's internal units: one length unit is length_unit_m metres (1e-3 for mm, 1e-2
     * for cm), one force unit is force_unit_N newtons (1e3 for kN, 1 for N). Every coefficient
     * below is in these units. */
    double length_unit_m, force_unit_N;

    /* Command-dependent coefficients (a, b, c triples). PHILLIPS2013, effective current i in A:
     * p(i) = p_b + (p_a - p_b) exp(-p_c i), p_c in 1/A. SPENCER1997, filtered voltage u in V:
     * p(u) = p_a + p_b u (p_c unused). */
    double alpha_a, alpha_b, alpha_c; /* force/length */
    double c0_a, c0_b, c0_c;          /* force.s/length */
    double c1_a, c1_b, c1_c;          /* force.s/length */
    double gamma_a, gamma_b, gamma_c; /* length^-n */
    double beta_a, beta_b, beta_c;    /* length^-n */
    double k0, k1;                    /* force/length */
    double x0;                        /* length: the accumulator spring's free position */
    double A;                         /* dimensionless */
    double n;                         /* >= 1 */
    double command_max;               /* A (PHILLIPS2013) or V (SPENCER1997); commands clamp to [0, max] */

    /* Command dynamics. PHILLIPS2013: i_lag = (pole/zero) (s + zero)/(s + pole) i_d (unit DC
     * gain; zero 9 pi, pole pi), then i = wn^2 / (s^2 + 2 zeta wn s + wn^2) i_lag with
     * wn = 2 pi lowpass_hz. SPENCER1997: u' = -eta (u - v). */
    double lag_zero_rad_s, lag_pole_rad_s;
    double lowpass_hz, lowpass_zeta;
    double eta_per_s;

    double stiffness_N_per_m; /* LINEAR_SPRING only */

    /* Substeps of the (y, z) integration per tick; 0 = automatic from v_max_m_s, the largest
     * relative velocity (m/s) the damper is expected to see accurately. */
    int substeps;
    double v_max_m_s;
} drths_damper_params_t;

typedef struct drths_damper {
    drths_damper_params_t p;
    double dt_s;
    int substeps;
    /* command dynamics: s' = Ad s + Bd cmd, effective command = s[out] */
    int nf, out;
    double fad[9], fbd[3], fs[3];
    double cmd_eff;
    /* Bouc-Wen state and the previous tick's input, internal units */
    double y, z, x_prev, v_prev;
    double force_N;
    double x_m; /* LINEAR_SPRING */
} drths_damper_t;

/* Fills p with the published parameters of model m (above; LINEAR_SPRING: 1e6 N/m), automatic
 * substeps and v_max_m_s = 0.5. init-only. */
void drths_damper_params_preset(drths_damper_params_t *p, drths_damper_model_t m);

/* Model mismatch: multiplies every command-dependent coefficient of alpha by alpha (alpha_a and
 * alpha_b, so alpha(i) scales at every current), of c0 by c0, of c1 by c1, of gamma and beta by
 * gamma_beta, and A by A. No effect on NONE and LINEAR_SPRING. init-only. */
void drths_damper_params_scale(drths_damper_params_t *p, double alpha, double c0, double c1,
                               double gamma_beta, double A);

/* Largest command: 2.5 A (PHILLIPS2013), 2.25 V (SPENCER1997); 0 for NONE and LINEAR_SPRING.
 * RT-safe. */
double drths_damper_command_max(const drths_damper_params_t *p);

/* Validates the parameters (errors name the field, e.g. "damper.c1_a"), discretises the command
 * dynamics at dt_s, chooses the substeps and resets at x = 0, command 0. init-only. */
int drths_damper_init(drths_damper_t *d, const drths_damper_params_t *p, double dt_s,
                      drths_error_t *err);

/* At rest at x_m (z = 0, y = x), the command dynamics at their steady state for command.
 * RT-safe. */
void drths_damper_reset(drths_damper_t *d, double x_m, double command);

/* Advances one tick to the end-of-step displacement x_m and velocity v_m_s, with the command
 * (A or V, clamped to [0, command_max]) held over the tick and applied through the command
 * dynamics. Returns the force (N) at the end of the step. RT-safe. */
double drths_damper_step(drths_damper_t *d, double x_m, double v_m_s, double command);

/* The force (N) returned by the last step or reset. RT-safe. */
double drths_damper_force(const drths_damper_t *d);

/* Evolutionary variable z in the model's own length unit (mm or cm). RT-safe. */
double drths_damper_z(const drths_damper_t *d);

/* Internal displacement y in m. RT-safe. */
double drths_damper_y(const drths_damper_t *d);

/* Effective current (A) or filtered voltage (V) at the end of the last step. RT-safe. */
double drths_damper_command_effective(const drths_damper_t *d);

/* Substeps per tick in use (chosen at init when params.substeps was 0). RT-safe. */
int drths_damper_substeps(const drths_damper_t *d);

/* Nothing to free; safe to call twice. */
void drths_damper_close(drths_damper_t *d);

#endif
