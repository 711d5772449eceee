/* Virtual servo-hydraulic plant: the identified 3-pole models of Phillips & Spencer 2013,
 *
 *     G(s) = K / ((s + p)(s^2 + a s + b)),
 *
 * from the actuator drive signal u (in metres of commanded displacement, so the DC gain is close
 * to 1) to the measured displacement y (m).
 *
 * Each model is realised with the physical state [y, y', y''] (y''' = -p b y - (b + a p) y'
 * - (a + p) y'' + K u), so that the states mean the same thing for every model. Both end models
 * are discretised exactly at dt with a zero-order hold on u (matrix exponential of the augmented
 * system), and at each step the DISCRETE matrices are interpolated linearly in the damper's
 * effective current. Because the state is physical, a change of current never makes the output
 * jump.
 *
 * Ownership: the caller owns drths_plant_t (no heap memory inside); the model structs passed to
 * drths_plant_init are copied.
 */
#ifndef DRTHS_PLANT_H
#define DRTHS_PLANT_H

#include "common/platform/error.h"

/* The experiment file's actuator.plant: which virtual plant a rehearsal drives (common/config/config.h
 * has the YAML names). */
typedef enum drths_actuator_plant {
    DRTHS_ACTUATOR_PLANT_IDEAL = 0,   /* "ideal": measured displacement = command */
    DRTHS_ACTUATOR_PLANT_THREE_POLE   /* "three-pole": drths_plant_t on the identified models
                                       * below, following the damper current */
} drths_actuator_plant_t;

/* G(s) = K / ((s + p)(s^2 + a s + b)); K in s^-3, p in s^-1, a in s^-1, b in s^-2. */
typedef struct {
    double K, p, a, b;
} drths_plant_model_t;

/* How a plant differs from its model (the experiment file's actuator.plant_scale): factors on
 * the static gain, on every pole together (the bandwidth), on the real pole alone and on the
 * natural frequency of the complex pair alone (its damping ratio kept). 1 everywhere is the
 * model itself. A bandwidth factor f makes the plant f times faster: G_f(s) = G(s / f). */
typedef struct drths_plant_scale {
    double gain, bandwidth, real_pole, complex_pole;
} drths_plant_scale_t;

/* Phillips & Spencer 2013, eqs 28-30: identified at 0.0 A, at 2.5 A, and their average (the
 * compensator's design model). */
extern const drths_plant_model_t DRTHS_PLANT_0A;
extern const drths_plant_model_t DRTHS_PLANT_2P5A;
extern const drths_plant_model_t DRTHS_PLANT_AVERAGE;

typedef struct drths_plant {
    double ad_lo[9], bd_lo[3]; /* discrete model at 0 A (row-major) */
    double ad_hi[9], bd_hi[3]; /* discrete model at i_hi_A */
    double i_hi_A;
    double x[3]; /* [y (m), y' (m/s), y'' (m/s^2)] */
    double dt_s;
} drths_plant_t;

/* Largest state dimension drths_plant_zoh accepts. */
#define DRTHS_ZOH_MAX_N 7

/* Exact zero-order-hold discretisation of the single-input system x' = A x + B u:
 * Ad = exp(A dt), Bd = integral_0^dt exp(A s) ds B, computed as the matrix exponential of the
 * augmented (n+1)x(n+1) matrix [[A, B], [0, 0]] dt (diagonal balancing by powers of two, then
 * scaling and squaring with a Taylor series evaluated far beyond double precision). A is n x n
 * row-major, 1 <= n <= DRTHS_ZOH_MAX_N. Returns 0 or -EINVAL (bad n, dt or non-finite input).
 * Shared with the damper's current dynamics. init-only (not needed per tick, but it does not
 * allocate). */
int drths_plant_zoh(int n, const double *A, const double *B, double dt_s, double *Ad, double *Bd);

/* Discretises both models at dt_s. lo is the model at 0 A, hi the model at i_hi_A (> 0); pass
 * the same model twice for a current-independent plant. The state starts at rest at y = 0.
 * Errors name the offending field. init-only. */
int drths_plant_init(drths_plant_t *pl, const drths_plant_model_t *lo, const drths_plant_model_t *hi,
                     double i_hi_A, double dt_s, drths_error_t *err);

/* Puts the plant at rest at displacement y_m (the steady state for the drive y_m / DC gain).
 * RT-safe. */
void drths_plant_reset(drths_plant_t *pl, double y_m);

/* Advances one dt with the drive u_m held constant over the step, using the discrete matrices
 * interpolated at current_A (clamped to [0, i_hi_A]). Returns the displacement (m) at the end of
 * the step and stores its velocity (m/s) in *vel_m_s if not NULL. RT-safe. */
double drths_plant_step(drths_plant_t *pl, double u_m, double current_A, double *vel_m_s);

/* out = m changed by the factors of sc (each > 0, else -EINVAL naming the field
 * "plant_scale.<name>"): p' = p f r, the complex pair's natural frequency times f c with its
 * damping ratio kept (a' = a f c, b' = b (f c)^2), and K' such that K'/(p' b') = g K/(p b), for
 * f = bandwidth, r = real_pole, c = complex_pole, g = gain. init-only. */
int drths_plant_model_scale(const drths_plant_model_t *m, const drths_plant_scale_t *sc,
                            drths_plant_model_t *out, drths_error_t *err);

/* K / (p b): the static gain from drive to displacement. RT-safe. */
double drths_plant_dc_gain(const drths_plant_model_t *m);

/* Nothing to free; provided for symmetry and safe to call twice. */
void drths_plant_close(drths_plant_t *pl);

#endif
