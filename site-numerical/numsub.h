/* The numerical substructure in motion (docs/design.md, "Integrators"): the structure, its
 * integrator and the ground motion at the tick rate, stepped one tick at a time with the specimen's
 * force supplied from outside. The monolithic reference run and the hybrid numerical site both
 * drive it, so the two integrate exactly the same equations:
 *
 *     reset                      state at step 0, at rest
 *     loop k = 0 .. steps-2:
 *         predict  -> x(k+1), v(k+1) and the damper's displacement and velocity at k+1
 *         (specimen force R(k+1) comes from the damper model, or from the actuator site)
 *         correct(R(k+1))        a(k+1) from equilibrium; the state is now at k+1
 *
 * The damper acts between floor-1 (0 = ground) and floor: its displacement is
 * x[floor-1] - x[floor-2] (x[-1] = 0) and its force R pushes floor back and floor-1 forward.
 * A file with sites has several dampers, one per channel of every site (config.h
 * drths_experiment_damper), each at its own floor; their forces add up. The _all functions
 * take and give one value per damper; the others are damper 0's (a one-damper experiment's).
 * Ownership: numsub owns its structure, integrator, record and buffers (allocated by _init).
 */
#ifndef DRTHS_NUMSUB_H
#define DRTHS_NUMSUB_H

#include "common/models/groundmotion.h"
#include "common/models/integrator.h"
#include "common/models/structure.h"
#include "common/platform/error.h"

/* Only pointers to the experiment are taken here; common/config/config.h defines it. */
typedef struct drths_experiment drths_experiment_t;

/* The most dampers one structure takes (every site's channels together). */
#define DRTHS_NUMSUB_MAX_DAMPERS 16

typedef struct drths_numsub {
    drths_structure_t st;
    drths_integrator_t it;
    drths_record_t rec;
    int n;           /* degrees of freedom */
    int floor;       /* 1-based floor damper 0's top attaches to (floors[0]) */
    int n_dampers;   /* 1..DRTHS_NUMSUB_MAX_DAMPERS */
    int floors[DRTHS_NUMSUB_MAX_DAMPERS]; /* each damper's floor */
    double dt_s;
    long step;       /* the integrator's state is at this step */
    long steps;      /* number of steps in the run (ground-motion samples) */
    double *x_next, *v_next, *f;
    int ncols;       /* columns of drths_numsub_row */
    char **colnames; /* ncols names for numerical.csv */
} drths_numsub_t;

/* Builds the models from the experiment: one damper at specimen.floor, or with sites one per
 * channel at its floor (-EINVAL beyond DRTHS_NUMSUB_MAX_DAMPERS). numerical.csv has damper 0's
 * four columns for one damper, else four per damper named damper<k>_... (k from 1, in the
 * file's order). init-only. */
int drths_numsub_init(drths_numsub_t *ns, const drths_experiment_t *exp, drths_error_t *err);

/* At rest at step 0, the initial acceleration from equilibrium with the specimen's force at rest
 * (not always zero: the Spencer 1997 damper's accumulator pushes with k1 (x - x0)). */
void drths_numsub_reset(drths_numsub_t *ns, double force_N);

/* Computes x(k+1), v(k+1) (kept in ns->x_next, ns->v_next) and returns the damper's
 * displacement and velocity at k+1. RT-safe. */
void drths_numsub_predict(drths_numsub_t *ns, double *damper_disp_m, double *damper_vel_m_s);

/* Completes step k+1 with the specimen force R (N). RT-safe. */
void drths_numsub_correct(drths_numsub_t *ns, double force_N);

/* Damper displacement and velocity of the current state. RT-safe. */
void drths_numsub_damper_state(const drths_numsub_t *ns, double *disp_m, double *vel_m_s);

/* The numerical.csv base columns of the current state (see the run-folder contract):
 * step, time_s, ag_m_s2, x_i, v_i, a_abs_i, damper_disp_m, damper_vel_m_s, damper_force_N,
 * damper_command. row holds ns->ncols values. RT-safe. */
void drths_numsub_row(const drths_numsub_t *ns, double force_N, double command, double *row);

/* As drths_numsub_reset, _predict, _correct, _damper_state and _row with one value per damper
 * (n_dampers each). RT-safe, but reset_all. */
void drths_numsub_reset_all(drths_numsub_t *ns, const double *force_N);
void drths_numsub_predict_all(drths_numsub_t *ns, double *damper_disp_m, double *damper_vel_m_s);
void drths_numsub_correct_all(drths_numsub_t *ns, const double *force_N);
void drths_numsub_damper_state_all(const drths_numsub_t *ns, double *disp_m, double *vel_m_s);
void drths_numsub_row_all(const drths_numsub_t *ns, const double *force_N, const double *command,
                          double *row);

/* Ground acceleration at step k (0 beyond the record). RT-safe. */
double drths_numsub_ag(const drths_numsub_t *ns, long k);

void drths_numsub_close(drths_numsub_t *ns);

#endif
