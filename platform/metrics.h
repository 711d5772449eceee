/* Metrics of a run (docs/design.md#records-and-reports): fidelity against the reference run,
 * actuator tracking, link and real-time statistics, and the one table that the report tool and the
 * rehearsal print.
 *
 * Fidelity, per floor, for the displacement relative to ground (x<i>_m) and the absolute
 * acceleration (a<i>_abs_m_s2) of the hybrid run h against the reference run r, over the rows
 * both runs have (the RMS error is the error norm of Phillips & Spencer 2013):
 *     peak error  | max|h| - max|r| | / max|r|
 *     RMS error   sqrt( sum (h - r)^2 / sum r^2 )
 * Errors are stored as fractions (0.01 = 1 %) and printed in percent. When the reference is all
 * zero the error is 0 if the hybrid series is too and +inf otherwise; a NaN in either series
 * makes that series' errors NaN, so a defect in a record is never averaged away.
 *
 * Inputs are tables loaded by platform/csvread.h; the caller owns them. Nothing here keeps a
 * pointer into a table after returning. Everything here is init-only (offline or after a run):
 * the percentile statistics allocate a sorted copy.
 */
#ifndef DRTHS_METRICS_H
#define DRTHS_METRICS_H

#include <stdio.h>

#include "platform/csvread.h"
#include "platform/error.h"

#define DRTHS_METRICS_MAX_FLOORS 32

/* Peak and RMS error of one hybrid series against its reference. */
typedef struct drths_series_error {
    double peak_hyb; /* max |h| (unit of the series) */
    double peak_ref; /* max |r| */
    double peak_err; /* | max|h| - max|r| | / max|r|, fraction */
    double rms_err;  /* sqrt( sum (h - r)^2 / sum r^2 ), fraction */
} drths_series_error_t;

typedef struct drths_fidelity {
    int floors;       /* number of floors, from columns x1_m, x2_m, ... */
    long rows;        /* rows compared: the shorter of the two runs */
    long hyb_rows;    /* rows in the hybrid record */
    long ref_rows;    /* rows in the reference record */
    double dt_s;      /* integration step, from time_s */
    drths_series_error_t disp[DRTHS_METRICS_MAX_FLOORS]; /* x<i>_m, m */
    drths_series_error_t acc[DRTHS_METRICS_MAX_FLOORS];  /* a<i>_abs_m_s2, m/s^2 */
    drths_series_error_t disp_max; /* each field the largest over the floors */
    drths_series_error_t acc_max;
    int has_damper_force;               /* both records have damper_force_N */
    drths_series_error_t damper_force;  /* damper_force_N, N */
} drths_fidelity_t;

/* Order statistics of a column, NaN values left out. With no finite value, n = 0 and the
 * statistics are NaN. Percentiles are nearest-rank: the value at rank ceil(p * n). */
typedef struct drths_stats {
    long n;
    double min, p50, p99, p999, max;
} drths_stats_t;

/* Link and real-time statistics of a hybrid run, from its numerical.csv and physical.csv. */
typedef struct drths_link_stats {
    double tick_s; /* control period from time_s (NaN if unknown) */

    int has_numerical;         /* numerical.csv has the hybrid columns */
    long steps;                /* rows of numerical.csv */
    drths_stats_t rtt_ms;      /* round trip, one sample per step (time-weighted) */
    drths_stats_t rtt_ticks;   /* the same in ticks (rtt_ms / tick) */
    drths_stats_t loop_delay_ticks; /* L in force, per step */
    long fb_concealed;         /* steps whose feedback was concealed by the model force */
    double fb_concealed_frac;

    int has_physical;          /* physical.csv was given */
    long ticks;                /* rows of physical.csv */
    long cmd_concealed;        /* ticks whose command was missing and extrapolated */
    double cmd_concealed_frac;
    long hold_ticks;           /* ticks in HOLD */
    double hold_frac;
    drths_stats_t cmd_lead_ms; /* how long before its tick each command arrived */
    drths_stats_t wake_late_us;/* tick lateness */
    double tracking_rms_err;   /* sqrt(sum (meas - cmd)^2 / sum cmd^2), fraction */
    double tracking_peak_m;    /* max |meas - cmd| */
} drths_link_stats_t;

/* Computes the peak and RMS error of h against r over n samples. init-only. */
void drths_series_error_compute(const double *h, const double *r, long n,
                                drths_series_error_t *out);

/* Compares a hybrid numerical.csv with the reference numerical.csv. Fails with -EINVAL and a
 * message naming the file and column when a needed column (time_s, x<i>_m, a<i>_abs_m_s2) is
 * missing, when the two runs have different floor counts, different steps dt or different start
 * times, or when either has fewer than two rows. init-only. */
int drths_fidelity_compute(const drths_csv_table_t *hyb, const drths_csv_table_t *ref,
                           drths_fidelity_t *out, drths_error_t *err);

/* Statistics of n values, NaN left out. Returns 0 or -ENOMEM. init-only (sorts a copy). */
int drths_stats_compute(const double *v, long n, drths_stats_t *out);

/* Link statistics. num (a numerical.csv) and phys (a physical.csv) may each be NULL. A
 * numerical.csv without the hybrid columns (a reference run) gives has_numerical = 0; one with
 * some of them must have all that are used (fb_concealed, rtt_ms, loop_delay_ticks). A
 * physical.csv must have time_s, concealed, hold, command_m, meas_disp_m, cmd_lead_ms and
 * wake_late_us. A missing column fails with -EINVAL naming file and column. init-only. */
int drths_link_stats_compute(const drths_csv_table_t *num, const drths_csv_table_t *phys,
                             drths_link_stats_t *out, drths_error_t *err);

/* Prints the section-12 table, aligned for a 100-column terminal. run and ref label the runs
 * (usually their folders; ref may be NULL); fid and link may be NULL and then their parts are
 * left out. init-only. */
void drths_report_print(FILE *f, const char *run, const char *ref, const drths_fidelity_t *fid,
                        const drths_link_stats_t *link);

/* Writes the same figures as one JSON object (errors in percent, keys carry units; NaN and
 * infinity as null). init-only. */
void drths_report_write_json(FILE *f, const char *run, const char *ref,
                             const drths_fidelity_t *fid, const drths_link_stats_t *link);

#endif
