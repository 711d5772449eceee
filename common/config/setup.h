/* Building the models an experiment file describes: the structure with its damping and modes,
 * the ground motion at the tick rate, the damper parameters (nominal for the Smith predictor's
 * model, "true" for the virtual specimen) and the damper command of a passive control mode. Shared by the reference run and both sites so they build identical models.
 * All functions are init-only.
 */
#ifndef DRTHS_SETUP_H
#define DRTHS_SETUP_H

#include "common/config/config.h"
#include "common/models/compensation.h"
#include "common/models/damper.h"
#include "common/models/groundmotion.h"
#include "common/models/specimen.h"
#include "common/models/structure.h"
#include "common/platform/error.h"

/* M, K and C from the file, then the modes (frequencies and damping ratios). The caller owns s
 * and closes it with drths_structure_close. */
int drths_setup_structure(const drths_experiment_t *exp, drths_structure_t *s,
                          drths_error_t *err);

/* The ground acceleration at dt = 1/rate_hz, tail included. The caller closes it. */
int drths_setup_ground_motion(const drths_experiment_t *exp, drths_record_t *rec,
                              drths_error_t *err);

/* Nominal damper parameters (the model the numerical site knows). */
void drths_setup_damper_nominal(const drths_experiment_t *exp, drths_damper_params_t *p);

/* The virtual specimen's true damper: nominal times specimen.true_scale. */
void drths_setup_damper_true(const drths_experiment_t *exp, drths_damper_params_t *p);

/* The whole virtual specimen of the actuator site (true damper, plant, sensors). */
void drths_setup_specimen(const drths_experiment_t *exp, drths_specimen_params_t *p);

/* The adaptive compensation's plant range (actuator.adaptive_range). */
void drths_setup_adaptive_range(const drths_experiment_t *exp, drths_comp_plant_range_t *r);

/* The constant damper command of a passive mode (A or V). -ENOTSUP for clipped-optimal, which
 * needs the state-feedback design. */
int drths_setup_passive_command(const drths_experiment_t *exp, double *command,
                                drths_error_t *err);

#endif
