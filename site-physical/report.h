/* The actuator site's printed start-up and end lines, status line and monitor frames
 * (site-physical/report.c). */
#ifndef DRTHS_PHYSSITE_REPORT_H
#define DRTHS_PHYSSITE_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "common/platform/telemetry.h"
#include "site-physical/openfresco_app.h"
#include "site-physical/physsite.h"

/* The experiment as this site runs it: rate and watchdog, specimen, converters, DAQ,
 * compensation, limits and HOLD. After drths_physsite_init. init-only. */
void drths_physsite_print_setup(FILE *f, const drths_physsite_t *ps);

/* After the RT thread has ended: how it ended, ticks and L, commands, tick lateness, command
 * lead, tracking, HOLD, rejected datagrams, and where the records are (dir). init-only. */
void drths_physsite_print_end(FILE *f, const drths_physsite_t *ps, const char *dir);

/* The end of a run, after drths_physsite_exit_reason: dir/summary.json, then the end lines
 * (drths_physsite_print_end) and, for an OpenFresco site (ofr not NULL), its steps and step-end
 * tracking, on f. 0, or an error (err) when the summary could not be written (the lines are printed
 * either way). */
int drths_physsite_report_end(FILE *f, drths_physsite_t *ps, const drths_ofr_app_t *ofr,
                              const char *dir, drths_error_t *err);

/* The status line while running or in HOLD ("  running  tick T (S s)  L ..."); 0 (nothing to
 * show) in the other states, else 1. Reads the RT thread's published atomics (loop thread). */
int drths_physsite_status_text(const drths_physsite_t *ps, char *buf, size_t cap);

/* The monitor frame's state and counters from the published atomics (loop thread). */
void drths_physsite_frame_counters(const drths_physsite_t *ps, drths_telemetry_frame_t *f);

/* One physical.csv row (drths_actuator_columns) into the frame's signals. */
void drths_physsite_frame_row(const double *row, drths_telemetry_frame_t *f);

#endif
