/* The monolithic reference run (docs/design.md, "Records and reports"): the experiment's structure and its virtual
 * specimen's damper (true parameters, no actuator, no network) integrated in one process. Every
 * hybrid run is judged against it, so it uses exactly the numerical site's substructure code.
 * init-only: it allocates and writes files.
 */
#ifndef DRTHS_REFERENCE_H
#define DRTHS_REFERENCE_H

#include "common/platform/error.h"
#include "site-numerical/numsub.h" /* DRTHS_NUMSUB_MAX_DAMPERS */
#include "site-numerical/semiactive.h"

/* Only pointers to the experiment are taken here; common/config/config.h defines it. */
typedef struct drths_experiment drths_experiment_t;

typedef struct drths_reference_summary {
    int n;                  /* floors */
    long steps;
    double dt_s, duration_s, wall_s;
    double command;         /* the damper command of a passive mode (A or V); for
                             * clipped-optimal the maximum it switches to */
    double *freq_hz, *zeta; /* n each */
    double *peak_x_m, *rms_x_m, *peak_a_m_s2, *rms_a_m_s2; /* n each; a = absolute */
    double peak_force_N, peak_damper_disp_m, peak_damper_vel_m_s; /* the largest over dampers */
    /* Each damper's (n_dampers of them; a file with sites has one per channel of every site,
     * config.h drths_experiment_damper): floor and peaks. */
    int n_dampers;
    struct {
        int floor;
        double peak_force_N, peak_disp_m, peak_vel_m_s;
    } dampers[DRTHS_NUMSUB_MAX_DAMPERS];
    /* clipped-optimal (0 otherwise): the largest desired force |f_c| and the fraction of ticks
     * the damper was commanded on */
    double peak_desired_force_N, on_fraction;
    drths_semiactive_design_t design;         /* the weights used (clipped-optimal) */
    double riccati_residual, spectral_radius; /* of the design (clipped-optimal) */
} drths_reference_summary_t;

/* Called about once a second of wall time with the progress; may be NULL. */
typedef void (*drths_progress_fn)(long step, long steps, void *ctx);

/* Runs the reference: the structure with every damper of the experiment (one, or with sites
 * one per channel of every site, each a true-parameter damper at its floor) integrated at once.
 * The damper commands come from site-numerical/semiactive.h: a constant
 * in the passive modes; in clipped-optimal the command for step k+1 is computed from the
 * state and the damper force at step k (one tick of delay, as in a real controller), and row k
 * of numerical.csv records the command applied over the tick that ends at k. If out_dir is not
 * NULL, writes numerical.csv and summary.json there (the caller has created the folder and copied
 * the experiment). sum is filled and must be closed with drths_reference_summary_close. */
int drths_reference_run(const drths_experiment_t *exp, const char *out_dir,
                        drths_reference_summary_t *sum, drths_progress_fn progress, void *ctx,
                        drths_error_t *err);

/* As drths_reference_run with the clipped-optimal weights design (NULL: the defaults of
 * drths_semiactive_design_default); for tests and studies of the weights. */
int drths_reference_run_design(const drths_experiment_t *exp,
                               const drths_semiactive_design_t *design, const char *out_dir,
                               drths_reference_summary_t *sum, drths_progress_fn progress,
                               void *ctx, drths_error_t *err);

void drths_reference_summary_close(drths_reference_summary_t *sum);

#endif
