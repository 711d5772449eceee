/* drths-numerical --reference, the program mode: the monolithic reference run
 * (site-numerical/reference.h) of the experiment into a run folder of its own, with its
 * provenance, its start line, a progress line on a terminal and the summary lines.
 *
 * It is apart from reference.c because it is main()'s half of the run, like
 * common/site/shell.h: it prints, and turns errors into one message and an exit code
 * (common/platform/cli.h). reference.c is the run itself, which drths-check and the tests
 * drive too. init-only. */
#ifndef DRTHS_REFERENCE_MODE_H
#define DRTHS_REFERENCE_MODE_H

#include "common/config/config.h"
#include "common/site/shell.h"

/* Runs the reference of exp with the common options o (--out, --quiet) into the run folder
 * (<output.directory>/<date>-<name>-reference unless --out). A file with physical.channels is
 * refused before anything is written: the reference has one damper, at specimen.floor, and the
 * channels are DOFs of an OpenFresco analysis, not of this structure. Returns the exit code: 0,
 * or DRTHS_EXIT_CONFIG for an experiment the reference cannot run, DRTHS_EXIT_FAILED when the
 * run folder or the run failed. */
int drths_reference_mode_run(const drths_site_options_t *o, const drths_experiment_t *exp);

#endif
