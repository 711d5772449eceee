/* drths-physical --io-check, the program mode: the commissioning check (site-physical/iocheck.h)
 * of every actuator channel in turn, each on the DAQ opened as for a run, with its report.
 *
 * It is apart from iocheck.c because it is main()'s half of the check, like
 * common/site/shell.h: it opens the board and the virtual specimen, paces the ticks on the
 * wall clock, turns SIGINT and SIGTERM into the end of the check, prints the start line and the
 * report, and turns errors into one message and an exit code (common/platform/cli.h). iocheck.c
 * is the check itself, which tests drive without a clock. init-only. */
#ifndef DRTHS_IOCHECK_MODE_H
#define DRTHS_IOCHECK_MODE_H

#include "common/config/config.h"

/* What the command line sets over the check's defaults (drths_iocheck_params_default of each
 * channel); NAN leaves the default. */
typedef struct drths_iocheck_options {
    double amplitude_m; /* --io-amplitude */
    double leg_s;       /* --io-leg */
    double current;     /* --io-current */
} drths_iocheck_options_t;

/* Checks every actuator channel of exp (physical.channels) in turn, one after the other, so
 * that only one actuator moves at a time; file is the experiment file as given, for messages.
 * Installs its own SIGINT and SIGTERM handlers: a signal ends the check after the channel's
 * current tick, in its safe state. Returns the first error's exit code (a board that does not
 * open, parameters the check refuses), else DRTHS_EXIT_FAILED when a channel's check failed or
 * found something to fix, else 0 (every signal OK, or only notes). */
int drths_iocheck_mode_run(const drths_experiment_t *exp, const char *file,
                           const drths_iocheck_options_t *opt);

#endif
