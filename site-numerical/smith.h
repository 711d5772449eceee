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
 * The adaptive mode (online identification, DESIGN.md 5.4) is not implemented yet: init refuses
 * it with -ENOTSUP.
 *
 * Ownership: the caller owns drths_smith_t; _init allocates the F^ history ring, _close frees it
 * (safe twice, and on a zeroed struct). A failed _init leaves nothing to free.
 */
#ifndef DRTHS_SMITH_H
#define DRTHS_SMITH_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "common/damper.h"
#include "common/error.h"

typedef struct drths_smith {
    drths_smith_mode_t mode;
    drths_damper_t model; /* nominal damper */
    double *hist;         /* F^(k) at hist[k % cap] for the last cap steps, owned */
    size_t cap;
    int64_t step;         /* newest k with F^(k) known (0 after reset) */
    uint32_t L;
    double rest_force_N;  /* F^(k) for k <= 0 */
    double last_corr_N;   /* c(m) of the newest measured step, 0 before any */
    int64_t corr_step;    /* m, -1 before any */
} drths_smith_t;

/* Builds the model from nominal damper parameters at dt_s with a history ring of `history`
 * steps (at least L_max + 1 for the largest L the run may use). mode adaptive is refused with
 * -ENOTSUP and a sentence naming numerical.smith. init-only. */
int drths_smith_init(drths_smith_t *s, drths_smith_mode_t mode,
                     const drths_damper_params_t *nominal, double dt_s, size_t history,
                     drths_error_t *err);

/* At rest (x = 0) with the damper command's steady state, step 0, dead time L, no correction.
 * Returns 0, or -ERANGE when L + 1 exceeds the history ring. RT-safe. */
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
 * F(n) - F^(n-L) for concealment. RT-safe. */
double drths_smith_force(drths_smith_t *s, int64_t n, double measured_N);

/* R(n) when F(n) is missing: the model's estimate of F(n) with the last correction (see the file
 * comment). Changes nothing. RT-safe. */
double drths_smith_conceal(const drths_smith_t *s, int64_t n);

/* Frees the ring. Safe twice. init-only. */
void drths_smith_close(drths_smith_t *s);

#endif
