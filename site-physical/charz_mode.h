/* drths-physical --characterize, the program mode: the damper's characterization
 * (site-physical/charz.h) on the experiment's DAQ, then the fit of the damper model
 * (common/models/damperfit.h), written to a run folder:
 *   physical.csv   every tick: t_s, test, set_m, displacement_m, force_N, command
 *   fit.csv        the fit's samples: t_s, test, displacement_m, velocity_m_s, command,
 *                  force_N, model_force_N (the fitted model along the measured motion)
 *   model.yaml     the damper model file (common/config/damperfile.h)
 *   fit_parameters.csv  param (index of drths_damperfit_name), value, u, true, error_pct, held
 *                  (why the record could not identify it: drths_damperfit_held_t)
 *   tests.csv      per test: frequency_hz (0: the random segment), amplitude_m, command,
 *                  force_rms_N, force_error_rms_N
 *   summary.json   the protocol, the tests with their force error, the fit table (and the
 *                  virtual specimen's true values in the fit's gauge), provenance
 * main()'s half like iocheck_mode.h: it opens the board and the virtual specimen, paces the
 * ticks on the wall clock (the comedi back end; the virtual specimen runs in tick time as fast
 * as it computes), turns SIGINT and SIGTERM into the end of the protocol, prints the start line
 * with the total actuator time and the fit table. init-only. */
#ifndef DRTHS_CHARZ_MODE_H
#define DRTHS_CHARZ_MODE_H

#include "common/config/config.h"
#include "common/site/shell.h"

/* Characterizes the damper of exp (one actuator channel) with the standard protocol (short:
 * the short one). Returns 0 when the protocol ran and the fit converged, DRTHS_EXIT_FAILED when
 * the protocol stopped early or the fit failed (the folder keeps what was recorded), another
 * exit code on an error before anything moved. */
int drths_charz_mode_run(const drths_experiment_t *exp, const drths_site_options_t *so,
                         int short_protocol);

#endif
