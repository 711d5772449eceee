/* The numerical site's stability detector (docs/design.md, "Safety"): the energy the interface
 * force supplies to the structure, judged over whole cycles of the specimen's displacement
 * against the energy the structure's own damping dissipates over the same cycles.
 *
 * A specimen that is passive (a damper, a spring, anything without its own power source)
 * cannot give the structure energy over a cycle of its displacement that starts and ends at
 * zero: at the cycle's ends a spring stores nothing, and whatever it dissipated was taken from
 * the structure. With the loop delay, the force the structure feels is the force of a moment
 * ago (corrected by the Smith predictor's model where it has one); where the model is wrong or
 * absent, a damper's force acts late, its work over a cycle of a mode at frequency f changes by
 * cos(2 pi f tau), and past a quarter period of lag it becomes negative: the loop makes the
 * specimen a source of energy. The energy-based view of hybrid-test stability follows Mercan &
 * Ricles (energy added by actuator delay, the energy-based tracking indicator) and the energy
 * error of Ahmadizadeh & Mosqueda; here it is applied to the force the integrator used, which
 * only the numerical site knows together with the structure's state.
 *
 * Per step, with x, v the floors' displacements and velocities after the step, d the damper's
 * displacement and R the force the step used (drths_numsub_correct):
 *     W   += (R + R_prev) / 2 (d - d_prev)      work done on the specimen (absorbed)
 *     Wc  += v^T C v dt                         energy the structure's damping dissipated
 *     IE  += (v^T M v + x^T K x) / 2 dt         time integral of the mechanical energy
 * and between two upward zero crossings of d a cycle is closed. At each closed cycle the most
 * recent cycles that together last at least span_s are judged:
 *     supplied = -sum W,  ratio = supplied / sum Wc,  growth = supplied / (2 sum IE)
 * (growth is the amplitude growth rate, 1/s, that the supplied energy alone would give). The
 * indicator is the ratio: at 1 the loop supplies as much as the structure's damping removes,
 * which is the edge of instability in free vibration. It is judged only while every cycle's
 * damper amplitude is at least min_amplitude_m (the onset from rest and the sensor noise are
 * no cycles) and the cycle lasts at most max_cycle_s (slower motion is no oscillation).
 *
 * RT-safe after _init; no allocation (the structure's matrices are borrowed).
 */
#ifndef DRTHS_STABILITY_H
#define DRTHS_STABILITY_H

#include <stdint.h>

#include "common/models/structure.h"
#include "common/platform/error.h"

/* Only pointers to the experiment are taken here; common/config/config.h defines it. */
typedef struct drths_experiment drths_experiment_t;

#define DRTHS_STABILITY_RING 64
#define DRTHS_STABILITY_TEXT 200

typedef struct drths_stability_params {
    int enabled;            /* numerical.stability_ratio > 0 */
    double limit;           /* HOLD when the ratio reaches this */
    double span_s;          /* the cycles judged together last at least this long */
    double min_amplitude_m; /* every judged cycle's damper half peak-to-peak at least this */
    double max_cycle_s;     /* a cycle longer than this breaks the sequence */
} drths_stability_params_t;

typedef struct drths_stability_cycle {
    double w, wc, ie; /* absorbed work, damping energy, integral of the energy */
    double t_s;       /* duration */
    double amp_m;     /* half the damper's peak-to-peak over the cycle */
} drths_stability_cycle_t;

/* The judgement of the cycles that closed last (valid when judged is nonzero). */
typedef struct drths_stability_view {
    int judged;
    int cycles;
    double span_s, supplied_J, damping_J, ratio, growth_per_s;
    double freq_hz; /* 1 / the duration of the largest cycle judged */
    double amp_m;   /* the smallest cycle amplitude judged */
    double time_s;  /* simulated time of the judgement */
} drths_stability_view_t;

typedef struct drths_stability {
    drths_stability_params_t p;
    int n;
    const double *M, *C, *K; /* borrowed, n*n row-major */
    double dt_s;
    long step;
    int have_prev;
    double prev_d, prev_r;
    drths_stability_cycle_t cur;
    double cur_dmin, cur_dmax;
    int started; /* a first upward crossing has been seen */
    drths_stability_cycle_t ring[DRTHS_STABILITY_RING];
    int head, count;
    drths_stability_view_t last;
    drths_stability_view_t worst; /* the judgement with the largest ratio */
    uint64_t judgements;
    int tripped;
    drths_stability_view_t trip;
    char text[DRTHS_STABILITY_TEXT];
} drths_stability_t;

/* The settings of the experiment (numerical.stability_*). init-only. */
void drths_stability_params_from(drths_stability_params_t *p, const drths_experiment_t *exp);

/* Checks p and borrows the structure's M, C and K (they must outlive st). init-only. */
int drths_stability_init(drths_stability_t *st, const drths_stability_params_t *p,
                         const drths_structure_t *s, double dt_s, drths_error_t *err);

/* One step: the state after it (x, v, n each), the damper displacement d and the force R the
 * step used. Returns 1 at the step where the indicator first reaches the limit (st->text then
 * says what was seen), 0 otherwise. NaN inputs are skipped. RT-safe. */
int drths_stability_step(drths_stability_t *st, const double *x, const double *v, double d,
                         double r);

#endif
