/* Predictor-corrector for continuous execution of an analysis step, after Nakashima and
 * Mosqueda, with C2-continuous segments.
 *
 * An analysis client (OpenSees through OpenFresco) hands the actuator site one target
 * displacement per analysis step and waits for the measured response before it computes the
 * next one. To keep the actuator moving while the analysis computes, the command is a chain of
 * polynomial segments whose position, velocity and acceleration are continuous at every join:
 *   - predictor, while the step's target d(n+1) is not known: from the state (d(n), v, a) in
 *     which the previous step ended, constant acceleration: x(t) = d(n) + v t + a t^2 / 2.
 *     (v, a) are the end rates of the step (drths_precor_end_rates): PreCor-D takes the
 *     velocity and acceleration of the cubic through the last four targets at d(n), so the
 *     predictor is that cubic's Taylor expansion to second order (the Lagrange extrapolation of
 *     Nakashima's predictor without its jerk term); PreCor-LPD takes the last step's velocity
 *     and no acceleration (a straight-line predictor).
 *   - corrector, from the tick the target is known (at the latest at predict_fraction of the
 *     step): the quintic Hermite segment (drths_precor_seg_init) from the command's present
 *     position, velocity and acceleration to the target with the end rates of the next step, so
 *     the next step's predictor continues it without a kink. The target is reached exactly.
 * drths_precor_seg_peaks gives a segment's largest velocity, acceleration and |position|: the
 * caller lengthens a segment until they are within its bounds.
 *
 * Histories are oldest first: hist[0] = d(n-3) ... hist[3] = d(n), one target per step, step
 * spacing 1. Before four targets exist the caller fills the missing ones with the rest position.
 * No allocation: every function is RT-safe.
 */
#ifndef DRTHS_PRECOR_H
#define DRTHS_PRECOR_H

typedef enum drths_precor_mode {
    DRTHS_PRECOR_D = 0,   /* cubic end rates: velocity and acceleration of the last four targets */
    DRTHS_PRECOR_LPD = 1, /* linear end rates: the last step's velocity, no acceleration */
} drths_precor_mode_t;

#define DRTHS_PRECOR_DEFAULT_FRACTION 0.6

typedef struct drths_precor_params {
    drths_precor_mode_t mode;
    double predict_fraction; /* f_sw, in [0, 1): the latest start of the correction */
} drths_precor_params_t;

/* Checks p: a known mode and 0 <= predict_fraction < 1. Returns 0 or -EINVAL. RT-safe. */
int drths_precor_check(const drths_precor_params_t *p);

/* The cubic through hist extrapolated f steps past hist[3] (Nakashima's predictor). RT-safe. */
double drths_precor_predict(const double hist[4], double f);

/* The velocity (per step) and acceleration (per step^2) with which a step ending at hist[3]
 * ends and the next step's predictor starts: PreCor-D the derivatives of the cubic through
 * hist at hist[3], PreCor-LPD hist[3] - hist[2] and 0. RT-safe. */
void drths_precor_end_rates(const drths_precor_params_t *p, const double hist[4], double *v,
                            double *a);

/* A polynomial segment x(t) = c[0] + c[1] t + ... + c[5] t^5 for t in [0, len] (t in ticks). */
typedef struct drths_precor_seg {
    double c[6];
    double len;
} drths_precor_seg_t;

/* The quintic Hermite segment of len > 0 from (x0, v0, a0) at t = 0 to (x1, v1, a1) at
 * t = len (velocities per tick, accelerations per tick^2). RT-safe. */
void drths_precor_seg_init(drths_precor_seg_t *s, double x0, double v0, double a0, double x1,
                           double v1, double a1, double len);

/* The constant-acceleration segment x0 + v0 t + a0 t^2 / 2 of length len. RT-safe. */
void drths_precor_seg_parabola(drths_precor_seg_t *s, double x0, double v0, double a0,
                               double len);

/* Position, velocity and acceleration at t (not clamped to [0, len]); v and a may be NULL.
 * RT-safe. */
double drths_precor_seg_eval(const drths_precor_seg_t *s, double t, double *v, double *a);

/* The largest |velocity|, |acceleration| and |position| over [0, len], from the values at
 * every tick up to 256 ticks (at 256 points spread over longer segments) and at the ends.
 * RT-safe. */
void drths_precor_seg_peaks(const drths_precor_seg_t *s, double *vmax, double *amax,
                            double *xmax);

/* "d" or "lpd". RT-safe. */
const char *drths_precor_mode_name(drths_precor_mode_t m);

/* Parses "d" / "lpd" (case-sensitive). Returns 0 or -EINVAL. init-only. */
int drths_precor_mode_parse(const char *text, drths_precor_mode_t *m);

#endif
