/* The monolithic reference run (DESIGN.md 10, 12): the experiment's structure and its virtual
 * specimen's damper (true parameters, no actuator, no network) integrated in one process. Every
 * hybrid run is judged against it, so it uses exactly the numerical site's substructure code.
 * init-only: it allocates and writes files.
 */
#ifndef DRTHS_REFERENCE_H
#define DRTHS_REFERENCE_H

#include "common/config.h"
#include "common/error.h"

typedef struct drths_reference_summary {
    int n;                  /* floors */
    long steps;
    double dt_s, duration_s, wall_s;
    double command;         /* the damper command used (A or V) */
    double *freq_hz, *zeta; /* n each */
    double *peak_x_m, *rms_x_m, *peak_a_m_s2, *rms_a_m_s2; /* n each; a = absolute */
    double peak_force_N, peak_damper_disp_m, peak_damper_vel_m_s;
} drths_reference_summary_t;

/* Called about once a second of wall time with the progress; may be NULL. */
typedef void (*drths_progress_fn)(long step, long steps, void *ctx);

/* Runs the reference. If out_dir is not NULL, writes numerical.csv and summary.json there (the
 * caller has created the folder and copied the experiment). sum is filled and must be closed
 * with drths_reference_summary_close. */
int drths_reference_run(const drths_experiment_t *exp, const char *out_dir,
                        drths_reference_summary_t *sum, drths_progress_fn progress, void *ctx,
                        drths_error_t *err);

void drths_reference_summary_close(drths_reference_summary_t *sum);

#endif
