/* Predictor-corrector for continuous execution of an analysis step, as in the LNEC-HS
 * hybrid-simulation platform.
 *
 * An analysis client (OpenSees through OpenFresco) hands the actuator site one target
 * displacement per analysis step and waits for the measured response before it computes the
 * next one. To keep the actuator moving while the analysis computes, each step of wall duration
 * T is played as a command x(f) for f = t/T in [0, 1]:
 *   - predictor, f < predict_fraction: the cubic through the last four targets
 *     d(n-3) .. d(n) (one target per step, step spacing 1) extrapolated f steps ahead
 *     (common/models/lagrange.h). The new target d(n+1) is not needed yet.
 *   - corrector, f >= predict_fraction, once d(n+1) is known, reaching it exactly at f = 1:
 *       PreCor-D:   the cubic through d(n-2), d(n-1), d(n), d(n+1) evaluated at f, plus the jump
 *                   at the switch, x_sw - cubic(f_sw), faded out linearly to 0 at f = 1;
 *       PreCor-LPD: the straight line from the last predicted displacement x_sw to d(n+1).
 *     x_sw is the predictor's value at the switch, f_sw = predict_fraction, so both are
 *     continuous there. Any target history that lies on a polynomial of degree <= 3 is followed
 *     exactly by PreCor-D over the whole step; PreCor-LPD is exact at the switch and at f = 1.
 *   - if d(n+1) is not known at the switch, the caller holds x_sw (drths_precor_command with
 *     have_target 0 returns it for every f >= f_sw) and resumes the correction when it comes.
 *
 * Histories are oldest first: hist[0] = d(n-3) ... hist[3] = d(n). Before four targets exist the
 * caller fills the missing ones with the rest position.
 * No state, no allocation: every function is RT-safe.
 */
#ifndef DRTHS_PRECOR_H
#define DRTHS_PRECOR_H

typedef enum drths_precor_mode {
    DRTHS_PRECOR_D = 0,   /* Lagrange corrector with the switch jump faded out */
    DRTHS_PRECOR_LPD = 1, /* straight line from the last predicted displacement */
} drths_precor_mode_t;

#define DRTHS_PRECOR_DEFAULT_FRACTION 0.6

typedef struct drths_precor_params {
    drths_precor_mode_t mode;
    double predict_fraction; /* f_sw, in [0, 1) */
} drths_precor_params_t;

/* Checks p: a known mode and 0 <= predict_fraction < 1. Returns 0 or -EINVAL. RT-safe. */
int drths_precor_check(const drths_precor_params_t *p);

/* The predictor: the cubic through hist extrapolated f steps past hist[3]. RT-safe. */
double drths_precor_predict(const double hist[4], double f);

/* The command at fraction f of the step towards `target` (used only when have_target):
 * the predictor for f < f_sw; at and after the switch the corrector, or x_sw held when
 * !have_target. f is clamped to [0, 1]. RT-safe. */
double drths_precor_command(const drths_precor_params_t *p, const double hist[4], double target,
                            int have_target, double f);

/* "d" or "lpd". RT-safe. */
const char *drths_precor_mode_name(drths_precor_mode_t m);

/* Parses "d" / "lpd" (case-sensitive). Returns 0 or -EINVAL. init-only. */
int drths_precor_mode_parse(const char *text, drths_precor_mode_t *m);

#endif
