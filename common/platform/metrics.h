/* Metrics of a run (docs/report.md defines every figure): fidelity against the reference run,
 * actuator tracking, link and real-time statistics, completeness of the records, the verdict
 * against the acceptance criteria, and the one table that the report tool prints.
 *
 * Records are joined by their step (numerical.csv, column `step`) or tick (physical.csv, column
 * `tick`), never by row position: a row the recorder lost is a step missing from the record,
 * counted and named as a gap (drths_gaps_t), and the figures are computed over the steps both
 * records have.
 *
 * Fidelity, per floor, for the displacement relative to ground (x<i>_m) and the absolute
 * acceleration (a<i>_abs_m_s2) of the hybrid run h against the reference run r, over the steps
 * both records have (the RMS error is the error norm of Phillips & Spencer 2013):
 *     peak error  | max|h| - max|r| | / max|r|   (the difference of the peaks)
 *     max error   max|h - r| / max|r|             (the largest error over time)
 *     RMS error   sqrt( sum (h - r)^2 / sum r^2 )
 * Errors are stored as fractions (0.01 = 1 %) and printed in percent. When the reference is all
 * zero the error is 0 if the hybrid series is too and +inf otherwise; a NaN in either series
 * makes that series' errors NaN, so a defect in a record is never averaged away.
 *
 * Inputs are tables loaded by common/platform/csvread.h; the caller owns them. Nothing here keeps a
 * pointer into a table after returning. Everything here is init-only (offline or after a run):
 * the joins and the percentile statistics allocate.
 */
#ifndef DRTHS_METRICS_H
#define DRTHS_METRICS_H

#include <stdio.h>

#include "common/platform/csvread.h"
#include "common/platform/error.h"
#include "common/platform/json.h"

#define DRTHS_METRICS_MAX_FLOORS 32

/* Holes listed by name in a drths_gaps_t (more are counted, not listed). */
#define DRTHS_GAPS_LISTED 4

/* The steps (or ticks) missing from one record within the range it should cover. */
typedef struct drths_gaps {
    const char *label;  /* names the record in the table; set by the caller, not owned */
    const char *key;    /* "step" or "tick": the column joined on */
    long first, last;   /* the range checked */
    long rows;          /* rows of the record in that range */
    long missing;       /* values of the range that no row has */
    long holes;         /* separate runs of missing values */
    long hole_first[DRTHS_GAPS_LISTED]; /* the first holes, first and last missing value */
    long hole_last[DRTHS_GAPS_LISTED];
} drths_gaps_t;

/* Peak and RMS error of one hybrid series against its reference. */
typedef struct drths_series_error {
    double peak_hyb; /* max |h| (unit of the series) */
    double peak_ref; /* max |r| */
    double peak_err; /* | max|h| - max|r| | / max|r|, fraction */
    double max_abs_err; /* max |h - r| (unit of the series) */
    double max_err;  /* max |h - r| / max|r|, fraction */
    double rms_err;  /* sqrt( sum (h - r)^2 / sum r^2 ), fraction */
} drths_series_error_t;

typedef struct drths_fidelity {
    int floors;       /* number of floors, from columns x1_m, x2_m, ... */
    long rows;        /* steps compared: those both records have */
    long first_step, last_step; /* the first and last step compared */
    long hyb_rows;    /* rows in the hybrid record */
    long ref_rows;    /* rows in the reference record */
    double dt_s;      /* integration step, from time_s and step */
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
    double tick_s; /* control period from time_s and tick (or step); NaN if unknown */

    int has_numerical;         /* numerical.csv has the hybrid columns */
    long steps;                /* rows of numerical.csv (steps present) */
    drths_stats_t rtt_ms;      /* round trip, one sample per step (time-weighted) */
    drths_stats_t rtt_ticks;   /* the same in ticks (rtt_ms / tick) */
    drths_stats_t loop_delay_ticks; /* L in force, per step */
    long fb_concealed;         /* steps whose feedback was concealed by the model force */
    double fb_concealed_frac;

    int has_physical;          /* physical.csv was given */
    long ticks;                /* rows of physical.csv (ticks present) */
    long cmd_concealed;        /* ticks whose command was missing and extrapolated */
    double cmd_concealed_frac;
    long hold_ticks;           /* ticks in HOLD */
    double hold_frac;
    drths_stats_t cmd_lead_ms; /* how long before its tick each command arrived */
    drths_stats_t wake_late_us;/* tick lateness */
    double tracking_rms_err;   /* sqrt(sum (meas - cmd)^2 / sum cmd^2), fraction */
    double tracking_peak_m;    /* max |meas - cmd| */
} drths_link_stats_t;

/* ---- the drive ----------------------------------------------------------------------------
 * What physical.csv says about the drive written to each actuator channel (drive_m) against
 * the command it played (command_m), computed from the record alone (docs/report.md, "The
 * drive"), independently of the site's own envelope bookkeeping. Rows are joined by tick: a
 * difference spans two (three) consecutive ticks, never a gap. A tick is *commanded* when it is
 * outside HOLD (hold 0) and played a command (cmd_tick >= 0 when the record has cmd_tick).
 *
 *   drive step      |u(k) - u(k-1)|, over the commanded ticks k
 *   command step    |r(k) - r(k-1)|, over the commanded ticks k whose tick k-1 was commanded too
 *   step ratio      max drive step / max command step (0 when neither moved, +inf when only
 *                   the drive did)
 *   envelope use    the largest fraction of a bound of the drive envelope
 *                   (physical.limit_drive_*) that the drive used, at any tick:
 *                   |u| / limit_drive_m, |u(k) - u(k-1)| / dt / limit_drive_velocity_m_s,
 *                   |u(k) - 2 u(k-1) + u(k-2)| / dt^2 / limit_drive_acceleration_m_s2, and on
 *                   commanded ticks |u - r| / limit_drive_offset_m
 * physical.csv holds 9 significant digits: each value is first lessened by the rounding error
 * those digits allow (a drive the site admitted exactly at a bound stays within it), so a use
 * above 1 is a drive outside the envelope beyond doubt. A drive that is not a number uses
 * +inf of the position bound. */

#define DRTHS_METRICS_MAX_CHANNELS 8 /* DRTHS_EXPERIMENT_MAX_CHANNELS */

typedef enum drths_drive_bound {
    DRTHS_DRIVE_BOUND_NONE = 0, /* no tick had a figure */
    DRTHS_DRIVE_BOUND_POSITION,
    DRTHS_DRIVE_BOUND_VELOCITY,
    DRTHS_DRIVE_BOUND_ACCELERATION,
    DRTHS_DRIVE_BOUND_OFFSET,
    DRTHS_DRIVE_NBOUNDS
} drths_drive_bound_t;

/* One channel's drive envelope: physical.limit_drive_m, _velocity_m_s, _acceleration_m_s2,
 * _offset_m (each > 0). */
typedef struct drths_drive_limits {
    double position_m, velocity_m_s, acceleration_m_s2, offset_m;
} drths_drive_limits_t;

typedef struct drths_drive_channel {
    char name[32];           /* the channel's name (physical.channels[i].name, or "ch<i+1>") */
    char prefix[8];          /* its columns' prefix: "" for the first channel, "ch<i+1>_" after */
    long ticks;              /* rows */
    long commanded;          /* commanded ticks */
    long steps;              /* commanded ticks that follow a recorded tick (0: no ratio) */
    double max_drive_step_m; /* NaN when a drive was not a number */
    long drive_step_tick;    /* the tick k of the largest drive step (-1: none) */
    double max_cmd_step_m;
    long cmd_step_tick;
    double step_ratio; /* NaN when no commanded tick followed a recorded one */
    /* The envelope, when its limits were given (has_limits). max_* are the record's figures,
     * use the rounding-corrected fraction of its bound. */
    int has_limits;
    drths_drive_limits_t lim;
    double max_abs_m, max_velocity_m_s, max_acceleration_m_s2, max_offset_m;
    double max_use;                          /* largest fraction of any bound (> 1: outside) */
    drths_drive_bound_t use_bound;           /* which bound, */
    long use_tick;                           /* at which tick, */
    double use_value;                        /* and the value there (m, m/s, m/s^2) */
    long outside;                            /* ticks at which the drive was outside a bound */
    long first_outside_tick;                 /* the first of them (-1: none), */
    drths_drive_bound_t first_outside_bound; /* the bound it used most there */
} drths_drive_channel_t;

typedef struct drths_drive_stats {
    int has_drive; /* physical.csv has drive_m */
    int channels;
    int has_limits; /* every channel has its limits */
    double tick_s;
    drths_drive_channel_t ch[DRTHS_METRICS_MAX_CHANNELS];
    /* The channel with the largest step ratio and the one with the largest envelope use (NaN
     * wins: an unknown figure is not a small one). */
    int ratio_channel, use_channel;
} drths_drive_stats_t;

/* Acceptance criteria of a run (the experiment file's acceptance section): errors and shares in
 * percent, the drive step ratio a plain ratio. */
typedef struct drths_acceptance {
    double displacement_rms_error_pct;  /* largest displacement RMS error over the floors */
    double displacement_peak_error_pct; /* largest displacement peak error (difference of peaks) */
    double acceleration_rms_error_pct;  /* largest absolute-acceleration RMS error */
    double tracking_rms_error_pct;      /* actuator tracking RMS error norm */
    double concealed_commands_pct;      /* ticks whose command was concealed */
    double concealed_feedback_pct;      /* steps whose feedback was concealed */
    double drive_step_ratio;            /* largest drive step over largest command step */
    int hold_allowed;                   /* 0: a tick in HOLD fails the run */
} drths_acceptance_t;

typedef enum drths_outcome {
    DRTHS_OUTCOME_PASS = 0,
    DRTHS_OUTCOME_FAIL,
    DRTHS_OUTCOME_NONE /* not evaluated: the figure needs a record that was not given */
} drths_outcome_t;

#define DRTHS_VERDICT_MAX 12

/* One criterion: value against limit (value <= limit passes; NaN fails). */
typedef struct drths_criterion {
    const char *name;  /* e.g. "displacement RMS error (max over floors)" */
    const char *unit;  /* "%", "ticks", "rows", "ratio" or "fraction" */
    double value, limit;
    drths_outcome_t outcome;
    const char *note;  /* why it was not evaluated, or NULL */
    char where[160];   /* where the value was reached (the drive's tick and bound), or "" */
} drths_criterion_t;

typedef struct drths_verdict {
    drths_criterion_t c[DRTHS_VERDICT_MAX];
    int n;
    long missing;       /* steps and ticks missing from the records, summed */
    int gaps_allowed;   /* --allow-gaps: missing rows do not fail the run */
    drths_outcome_t outcome; /* FAIL if any criterion failed or rows are missing (unless
                              * allowed); else PASS */
} drths_verdict_t;

/* Judges the figures against a. fid, link, drive and gaps may be NULL (no reference, no link
 * data, no drive figures, no gap check); the criteria they would feed are then not evaluated.
 * The envelope's limit is 1 (the whole envelope), not a key of a. init-only. */
void drths_verdict_compute(const drths_acceptance_t *a, const drths_fidelity_t *fid,
                           const drths_link_stats_t *link, const drths_drive_stats_t *drive,
                           const drths_gaps_t *gaps, int ngaps, int allow_gaps,
                           drths_verdict_t *out);

struct drths_site_links;      /* common/platform/sitelinks.h */
struct drths_adaptive_report; /* common/platform/adaptreport.h */

/* Everything the table shows; any pointer may be NULL and its part is then left out. */
typedef struct drths_report {
    const char *run;         /* labels of the runs (usually their folders) */
    const char *ref;
    const char *acceptance_source; /* where the criteria came from, for the table */
    const drths_fidelity_t *fid;
    const drths_link_stats_t *link;
    const drths_drive_stats_t *drive;
    const char *limits_source; /* where the drive envelope came from, for the table */
    const drths_gaps_t *gaps; /* ngaps records */
    int ngaps;
    const drths_verdict_t *verdict;
    const struct drths_site_links *sites; /* a run of several links: one row per site */
    /* the actuator's adaptive compensation factors, in the tracking section */
    const struct drths_adaptive_report *adaptive;
} drths_report_t;

/* Computes the peak and RMS error of h against r over n samples. init-only. */
void drths_series_error_compute(const double *h, const double *r, long n,
                                drths_series_error_t *out);

/* Checks the join column key ("step" or "tick") of t: present, whole numbers, strictly
 * increasing; fails with -EINVAL naming file, line and column otherwise, and with a record
 * without rows. Then counts the values of lo..hi no row has (lo > hi: the record's own first
 * ..last). out->label is left NULL for the caller. init-only. */
int drths_gaps_compute(const drths_csv_table_t *t, const char *key, long lo, long hi,
                       drths_gaps_t *out, drths_error_t *err);

/* The first and last value of t's join column key, checked as drths_gaps_compute does.
 * init-only. */
int drths_record_range(const drths_csv_table_t *t, const char *key, long *first, long *last,
                       drths_error_t *err);

/* The number of floors of a numerical.csv: its columns x1_m, x2_m, ... counted up to the first
 * one missing. init-only. */
int drths_record_floor_count(const drths_csv_table_t *t);

/* Compares a hybrid numerical.csv with the reference numerical.csv, step by step: the rows of
 * equal `step` are compared, whatever their position. Fails with -EINVAL and a message naming
 * the file and column when a needed column (step, time_s, x<i>_m, a<i>_abs_m_s2) is missing or
 * a step column is malformed, when the two runs have different floor counts or different steps
 * dt, when one step has different times in the two records, or when fewer than two steps are in
 * both. init-only. */
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

/* The number of actuator channels in a physical.csv: 1 with drive_m, plus one for each of
 * ch2_drive_m, ch3_drive_m, ... up to the first missing; 0 without drive_m. init-only. */
int drths_record_channel_count(const drths_csv_table_t *phys);

/* The drive figures of nch channels of phys (a physical.csv) at tick dt_s: channel i's columns
 * are drive_m, command_m, hold and cmd_tick (optional) with the prefix "ch<i+1>_" after the
 * first. lim (nch entries) may be NULL: no envelope figures. names (nch entries) may be NULL:
 * "ch<i+1>". nch 0 or a record without drive_m gives has_drive 0 and no error. A channel's
 * missing column, nch above DRTHS_METRICS_MAX_CHANNELS, or a bad tick column (as
 * drths_gaps_compute) fail with -EINVAL naming file and column; dt_s must be > 0 when lim is
 * given. init-only. */
int drths_drive_compute(const drths_csv_table_t *phys, int nch, const drths_drive_limits_t *lim,
                        const char *const *names, double dt_s, drths_drive_stats_t *out,
                        drths_error_t *err);

/* The bound's name in the experiment file ("limit_drive_velocity_m_s", ...; "" for none) and
 * its unit ("m", "m/s", "m/s^2"). RT-safe. */
const char *drths_drive_bound_field(drths_drive_bound_t b);
const char *drths_drive_bound_unit(drths_drive_bound_t b);

/* Writes lim as the object "limits" {drive_m, velocity_m_s, acceleration_m_s2, offset_m}: the
 * one writer of the envelope's limits in report.json's drive section and in the actuator site's
 * summary.json (site-physical/summary.c). init-only (stdio). */
void drths_drive_limits_json(drths_json_t *j, const drths_drive_limits_t *lim);

/* Prints the table, aligned for a 100-column terminal: records and gaps, fidelity, link,
 * tracking, real time, the verdict, and what each figure means. init-only. */
void drths_report_print(FILE *f, const drths_report_t *r);

/* Writes the same figures as one JSON object (errors in percent, keys carry units; NaN and
 * infinity as null). init-only. */
void drths_report_write_json(FILE *f, const drths_report_t *r);

/* The name of an outcome: "PASS", "FAIL" or "n/a". RT-safe. */
const char *drths_outcome_name(drths_outcome_t o);

#endif
