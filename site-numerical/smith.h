/* The Smith predictor of the numerical site (DESIGN.md 2 and 5.4).
 *
 * The measured force F(n) of tick n responds to the displacement history x(..n-L), because the
 * command computed at step k is applied at tick k + L. The force the integrator needs at step n
 * responds to x(..n). The predictor adds what an internal damper model says the difference is:
 *
 *     R(n) = F(n) + [F^(n) - F^(n-L)]
 *
 * where F^(k) is the model force after being driven by x(..k). L is exact (the loop delay of the
 * epoch), so with a model equal to the specimen F(n) = F^(n-L) and R(n) = F^(n) exactly. The
 * model is a drths_damper_t with the experiment's NOMINAL parameters, stepped once per step with
 * the numerical site's own damper displacement and velocity (those of the command it sends) and
 * the damper command. F^(k) for k <= 0 is the rest force.
 *
 * The correction c(m) = F(m) - F^(m-L) is the model's error at the newest measured step m. When
 * the feedback of step n is missing (lost or too late), the measured force is estimated as
 * F^(n-L) + c(m) and R(n) follows from that estimate with the mode's formula:
 *     fixed:  R(n) = F^(n) + c(m)
 *     off:    R(n) = F^(n-L) + c(m)   (off uses F(n) as measured; the model only conceals)
 * Both are computed as a model force plus the correction, so a correction of exactly zero gives
 * exactly the model force (no round-off from adding and subtracting equal numbers).
 *
 * Dead time per tick. Normally the specimen at tick n was driven by step n - L. Around a change
 * of L (a new epoch) the loop pauses the specimen (L raised) or skips steps (L lowered), so the
 * caller names the step k whose command the specimen got at tick n: drths_smith_force_at uses
 * F^(k) in place of F^(n-L). drths_smith_force is drths_smith_force_at with k = n - L.
 *
 * Adaptive mode (DESIGN.md 5.4, beyond the seed): the model force is a linear combination
 *     F^(k) = theta . phi(k),
 *     phi(k) = [F_1(k), F_2(k), F_3(k), c_ref x'(k)]
 * where F_j are the forces of a bank of three Bouc-Wen models with the nominal parameters but
 * gamma and beta multiplied by bank_gamma_beta[j] (the middle one is the nominal model itself),
 * driven by the same displacement, velocity and command, and c_ref x' is a viscous term
 * (c_ref = the nominal c0 at the largest command, N s/m). theta starts at [0, 1, 0, 0], which is
 * exactly the fixed predictor. A scale error of alpha, c0 and c1 scales the force (theta_2 takes
 * it up); a different shape of the hysteresis loop (gamma, beta) is a mix of the bank's shapes;
 * a different viscous part is the last term.
 *   theta is identified online from the pairs (F(n), phi(k)), k the step applied at tick n, by
 * recursive least squares with exponential forgetting on the pair divided by |phi(k)| (so the
 * covariance is dimensionless and each tick weighs alike), with these guards:
 *   - no update when |phi(k)| < min_regressor_rel F_scale (the damper barely moves: little
 *     information and much noise), nor when |F(n) - theta . phi(k)| < dead_zone_rel F_scale
 *     (nothing to learn; stops drift on noise), nor from concealed feedback (the caller does not
 *     call force for it);
 *   - each weight bounded to [weight_min, weight_max], the sum of the bank weights (the force
 *     gain) to [gain_min, gain_max], |theta_4| to visc_max (projection after each update);
 *   - the covariance trace is limited to trace_max (no wind-up under forgetting when the
 *     excitation is poor), and reset to p0 I if it stops being positive.
 * F_scale is the nominal model's largest hysteretic force alpha z_max over the command range.
 * The same theta is used in both terms of R(n), and in concealment.
 *
 * Cost per step: three damper steps instead of one, and an RLS update of 4 parameters (about
 * 100 flops). RT-safe; nothing is allocated after init.
 *
 * Ownership: the caller owns drths_smith_t; _init allocates the F^ history ring, _close frees it
 * (safe twice, and on a zeroed struct). A failed _init leaves nothing to free.
 */
#ifndef DRTHS_SMITH_H
#define DRTHS_SMITH_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "models/damper.h"
#include "platform/error.h"

#define DRTHS_SMITH_BANK 3
#define DRTHS_SMITH_NPAR 4 /* the bank's three forces and the viscous term */

/* Tuning of the adaptive mode (see the file comment). */
typedef struct drths_smith_adapt_params {
    double bank_gamma_beta[DRTHS_SMITH_BANK]; /* gamma and beta factors (default 0.4, 1, 2.5) */
    double forgetting;        /* lambda in (0, 1] (default 0.9998: memory 5000 steps) */
    double p0;                /* initial covariance, dimensionless (default 10) */
    double trace_max;         /* covariance trace limit (default 1000) */
    double min_regressor_rel; /* no update below this |phi| / F_scale (default 0.02) */
    double dead_zone_rel;     /* no update below this |error| / F_scale (default 2e-4) */
    double weight_min, weight_max; /* each weight (default -1.5, 3) */
    double gain_min, gain_max;     /* sum of the bank weights (default 0.3, 3) */
    double visc_max;               /* |theta_4| (default 2) */
} drths_smith_adapt_params_t;

/* What the identification did so far. */
typedef struct drths_smith_adapt_stats {
    uint64_t updates;        /* RLS updates made */
    uint64_t low_signal;     /* pairs skipped: |phi| below the threshold */
    uint64_t dead_zone;      /* pairs skipped: error inside the dead zone */
    uint64_t projections;    /* updates whose result was clipped to the bounds */
    uint64_t trace_limited;  /* updates after which the covariance was scaled down */
    uint64_t resets;         /* covariance resets (lost positiveness) */
} drths_smith_adapt_stats_t;

typedef struct drths_smith {
    drths_smith_mode_t mode;
    drths_damper_t model; /* nominal damper */
    double *hist;         /* F^(k) at hist[k % cap] for the last cap steps, owned */
    /* adaptive only (phi NULL otherwise) */
    drths_smith_adapt_params_t ap;
    drths_damper_t bank[DRTHS_SMITH_BANK]; /* bank[1] unused: the nominal one is `model` */
    double *phi;          /* phi(k) at phi[(k % cap) * NPAR], owned */
    double phi_rest[DRTHS_SMITH_NPAR];
    double theta[DRTHS_SMITH_NPAR];
    double P[DRTHS_SMITH_NPAR][DRTHS_SMITH_NPAR];
    double c_ref;         /* N s/m of the viscous regressor */
    double f_scale_N;     /* F_scale */
    drths_smith_adapt_stats_t st;
    size_t cap;
    int64_t step;         /* newest k with F^(k) known (0 after reset) */
    uint32_t L;
    double rest_force_N;  /* F^(k) for k <= 0 */
    double last_corr_N;   /* c(m) of the newest measured step, 0 before any */
    int64_t corr_step;    /* m, -1 before any */
} drths_smith_t;

/* The default tuning of the adaptive mode. RT-safe. */
void drths_smith_adapt_default(drths_smith_adapt_params_t *ap);

/* Builds the model from nominal damper parameters at dt_s with a history ring of `history`
 * steps (at least L_max + 1 for the largest dead time the run may use). Adaptive mode uses ap
 * (NULL: the defaults) and needs a Bouc-Wen damper model (-ENOTSUP otherwise, naming
 * numerical.smith). init-only. */
int drths_smith_init_ex(drths_smith_t *s, drths_smith_mode_t mode,
                        const drths_damper_params_t *nominal, double dt_s, size_t history,
                        const drths_smith_adapt_params_t *ap, drths_error_t *err);

/* drths_smith_init_ex with the default tuning. init-only. */
int drths_smith_init(drths_smith_t *s, drths_smith_mode_t mode,
                     const drths_damper_params_t *nominal, double dt_s, size_t history,
                     drths_error_t *err);

/* At rest (x = 0) with the damper command's steady state, step 0, dead time L, no correction,
 * theta at the nominal model and the covariance at p0 I (adaptive). Returns 0, or -ERANGE when L + 1 exceeds the history ring. RT-safe. */
int drths_smith_reset(drths_smith_t *s, double command, uint32_t L);

/* Changes the dead time (a new epoch). -ERANGE, changing nothing, when L + 1 exceeds the ring.
 * RT-safe. */
int drths_smith_set_delay(drths_smith_t *s, uint32_t L);

/* Steps the model to step k + 1 with the damper displacement (m) and velocity (m/s) of that
 * step and the damper command; returns F^(k+1) (N). RT-safe. */
double drths_smith_step(drths_smith_t *s, double disp_m, double vel_m_s, double command);

/* F^(k): the rest force for k <= 0, NaN for a step not yet computed or already overwritten in
 * the ring. RT-safe. */
double drths_smith_model(const drths_smith_t *s, int64_t k);

/* R(n) from the measured force F(n) (n <= the model's step), and records the correction
 * F(n) - F^(n-L) for concealment. Adaptive: first identifies from (F(n), phi(n-L)). RT-safe. */
double drths_smith_force(drths_smith_t *s, int64_t n, double measured_N);

/* As drths_smith_force with the specimen at tick n driven by step k (k <= n) instead of n - L.
 * RT-safe. */
double drths_smith_force_at(drths_smith_t *s, int64_t n, int64_t k, double measured_N);

/* The model's force gain: the sum of the bank weights (1 for fixed and off). RT-safe. */
double drths_smith_gain(const drths_smith_t *s);

/* R(n) when F(n) is missing: the model's estimate of F(n) with the last correction (see the file
 * comment). Changes nothing. RT-safe. */
double drths_smith_conceal(const drths_smith_t *s, int64_t n);

/* Frees the ring. Safe twice. init-only. */
void drths_smith_close(drths_smith_t *s);

#endif
