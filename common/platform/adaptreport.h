/* The adaptive compensator's factors in drths-report's tracking section (docs/report.md,
 * "Adaptive compensation"): for each factor theta0..3 of the actuator site's adaptive
 * compensation, its bounds, its value at the end and how long it sat at a bound, from the
 * actuator site's summary.json (`tracking.adaptive`, written by site-physical/summary.c), and
 * its range over the run from physical.csv's `adaptive_theta0..3`.
 *
 * A factor at a bound for more than DRTHS_ADAPTIVE_AT_BOUND_FLAG of the run is flagged: the
 * compensator could not follow the plant there, so the plant is outside the range the bounds
 * were derived from (actuator.adaptive_range, or the symmetric actuator.adaptive_bound).
 *
 * Everything here is init-only (offline, after a run). Nothing keeps a pointer into the text,
 * the table or the path after returning.
 */
#ifndef DRTHS_ADAPTREPORT_H
#define DRTHS_ADAPTREPORT_H

#include <stddef.h>
#include <stdio.h>

#include "common/platform/csvread.h"
#include "common/platform/error.h"
#include "common/platform/json.h"

#define DRTHS_ADAPTIVE_FACTORS 4
/* The share of the run at a bound above which a factor is flagged. */
#define DRTHS_ADAPTIVE_AT_BOUND_FLAG 0.10

typedef struct drths_adaptive_factor {
    double lower, upper;      /* the factor's bounds (summary.json min, max) */
    double final;             /* its value at the end of the run */
    long at_bound_ticks;      /* observed ticks it sat at lower or upper */
    double at_bound_fraction; /* of the observed ticks, 0 .. 1 */
    double run_min, run_max;  /* over physical.csv's adaptive_thetaK; NaN without the column */
    int flagged;              /* at_bound_fraction > DRTHS_ADAPTIVE_AT_BOUND_FLAG */
} drths_adaptive_factor_t;

typedef struct drths_adaptive_report {
    int present;          /* the summary had tracking.adaptive */
    char bounds_from[32]; /* "adaptive_range" or "adaptive_bound" */
    long observed_ticks;
    int flagged; /* factors flagged */
    drths_adaptive_factor_t f[DRTHS_ADAPTIVE_FACTORS];
} drths_adaptive_report_t;

/* Fills out from a summary.json text (len bytes, need not be NUL-terminated) named path:
 * present = 0 when the text has no tracking.adaptive (a numerical site's summary, another
 * compensation). -EINVAL with err naming path and what is wrong when the text is not JSON, or
 * tracking.adaptive lacks a factor's figure or has one out of range. init-only. */
int drths_adaptive_report_read_summary(drths_adaptive_report_t *out, const char *text, size_t len,
                                       const char *path, drths_error_t *err);

/* Adds each factor's range over the run from phys's adaptive_theta0..3 (NaN values left out);
 * a factor whose column is missing or all NaN keeps run_min and run_max NaN. init-only. */
void drths_adaptive_report_add_record(drths_adaptive_report_t *r, const drths_csv_table_t *phys);

/* One line per factor, then a line per flagged factor and, once, what it means for the lab;
 * nothing unless present. init-only. */
void drths_adaptive_report_print(FILE *f, const drths_adaptive_report_t *r);

/* "adaptive": {...} into the open object of j; nothing unless present. init-only. */
void drths_adaptive_report_json(drths_json_t *j, const drths_adaptive_report_t *r);

#endif
