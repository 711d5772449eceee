/* Ground-motion records: load, scale, compress in time,
 * cut, resample to the integrator's step, and band-limited white noise.
 *
 * Formats read (examples/records/ has one file of each; PROVENANCE.md there describes them):
 * - PEER AT2: 4 header lines, the 4th `NPTS=  4000, DT= .01000 SEC` (or the older
 *   `4000  .01000  NPTS, DT`), then NPTS values in g, any number a line. Units are g unless
 *   header lines 1-3 say CM/S; a header that says VELOCITY or DISPLACEMENT is refused.
 * - Headered column text: any header lines (or comment lines starting with %, # or !), then rows
 *   of numbers separated by blanks or tabs: `time accel [accel ...]`, or value columns only.
 * - CSV: the same with commas, e.g. `# time_s,accel_m_s2` then `0.02,-0.0617`.
 * Everything in a file after the first data row must be a data row, a comment or blank.
 *
 * Time column: the first of two or more columns is time when the names line (the last header or
 * comment line before the data, if it has one name per column) calls it "time...", "t", "t_s",
 * "t[s]"..., or when its first three values step up evenly, which no acceleration column does.
 * The time_column option overrides this. A time column must be uniformly spaced: every
 * step within 1e-6 (relative) of the first, otherwise the load fails naming the line. The first
 * sample is taken as t = 0 whatever time the file gives it.
 *
 * Units: the value column's name may state them (`accel_m_s2`, `Accel[g]`, `a [cm/s^2]`);
 * units = DRTHS_GM_UNITS_FILE takes them from there (AT2: g) and fails when the file
 * does not state them; any other value must agree with what the file states, so that a record
 * in cm/s^2 is never read as g. A record whose peak exceeds 10 g in its own units (before
 * scale) is refused as a units mistake, and so is a column named like velocity or
 * displacement.
 *
 * Time step: from the time column, the AT2 header, or a header or comment line above the data
 * of a file without a time column that states it as `DT=0.01`, `dt = 0.005 sec` or `DT: 0.02`
 * (the Kobe record's comment says "dt=0.005 sec"); dt_s is needed only when the file has none of
 * these, and must agree with the file's when both are given. A DT= line in a file with a time
 * column must agree with that column.
 *
 * Messages name the options by the experiment file's fields (ground_motion.column,
 * ground_motion.dt_s, ...), which common/config/setup.c passes here one to one.
 *
 * Ownership: drths_record_t owns ag_m_s2 (malloc'd); drths_record_close() frees it. All of this
 * module is init-only (it reads files and allocates); the RT loop reads r->ag_m_s2[k] directly.
 */
#ifndef DRTHS_GROUNDMOTION_H
#define DRTHS_GROUNDMOTION_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"

/* Standard gravity, m/s^2: the value behind every record stored in g. */
#define DRTHS_G_M_S2 9.80665

/* The experiment file's ground_motion.kind, .format and .units (common/config/config.h has their YAML
 * names). The loader options below use drths_gm_format_t and drths_gm_units_t, which add what
 * only a loader needs (units stated by the file); common/config/setup.c maps one onto the other. */
typedef enum drths_ground_motion_kind {
    DRTHS_GROUND_MOTION_RECORD = 0, /* "record" */
    DRTHS_GROUND_MOTION_WHITE_NOISE /* "white-noise" */
} drths_ground_motion_kind_t;

typedef enum drths_record_format {
    DRTHS_RECORD_FORMAT_AUTO = 0,   /* "auto" */
    DRTHS_RECORD_FORMAT_AT2,        /* "at2": PEER NGA */
    DRTHS_RECORD_FORMAT_TWO_COLUMN, /* "two-column": headered text, time then acceleration(s) */
    DRTHS_RECORD_FORMAT_CSV         /* "csv" */
} drths_record_format_t;

typedef enum drths_accel_units {
    DRTHS_ACCEL_G = 0, /* "g" (9.80665 m/s^2) */
    DRTHS_ACCEL_M_S2,  /* "m/s2" */
    DRTHS_ACCEL_CM_S2, /* "cm/s2" */
    DRTHS_ACCEL_MM_S2  /* "mm/s2" */
} drths_accel_units_t;

/* A loaded or resampled record may not exceed this many samples (800 MB of doubles): a bigger
 * count means a wrong time step, not a real experiment. */
#define DRTHS_GM_MAX_SAMPLES 100000000u

typedef enum {
    DRTHS_GM_AUTO = 0, /* AT2 if line 4 holds NPTS; CSV if the first data row has commas;
                        * column text otherwise */
    DRTHS_GM_AT2,
    DRTHS_GM_TWO_COLUMN, /* headered column text, blank or tab separated */
    DRTHS_GM_CSV,
} drths_gm_format_t;

typedef enum {
    DRTHS_GM_UNITS_FILE = 0, /* as the file states (see above); an error if it does not */
    DRTHS_GM_UNITS_G,
    DRTHS_GM_UNITS_M_S2,
    DRTHS_GM_UNITS_CM_S2,
    DRTHS_GM_UNITS_MM_S2,
} drths_gm_units_t;

typedef enum {
    DRTHS_GM_TIME_AUTO = 0, /* decide from the names line or the first values (see above) */
    DRTHS_GM_TIME_FIRST,    /* the first column is time */
    DRTHS_GM_TIME_NONE,     /* every column holds values */
} drths_gm_time_column_t;

typedef struct drths_gm_options {
    drths_gm_format_t format;
    drths_gm_units_t units;
    drths_gm_time_column_t time_column; /* column files only */
    int column;              /* 1-based value column, the time column not counted; AT2: 1 */
    double dt_s;             /* record step when the file gives none; 0 = none */
    double scale;            /* multiplies every sample (after units); finite, non-zero */
    double time_compression; /* > 0; the loaded dt is the file's dt divided by this */
    double duration_s;       /* keep samples with t <= duration_s (compressed time); 0 = all */
    double tail_s;           /* zeros appended so the record covers [0, T + tail_s] */
} drths_gm_options_t;

typedef struct drths_record {
    size_t n;        /* samples, at t = k * dt_s, k = 0 .. n-1 */
    double dt_s;     /* > 0 */
    double *ag_m_s2; /* n ground accelerations, m/s^2; owned by the record */
} drths_record_t;

/* Fills o with: format auto, units from the file, time column auto, column 1, no dt, scale 1,
 * time compression 1, whole record, no tail. init-only. */
void drths_gm_options_default(drths_gm_options_t *o);

/* Parses a format name as an experiment file writes it: "auto", "at2", "two-column" (also
 * "text"), "csv". Returns 0 or -EINVAL. init-only. */
int drths_gm_format_parse(const char *name, drths_gm_format_t *out);

/* Parses a units name: "file", "g", "m/s^2" (also "m_s2"), "cm/s^2" ("cm_s2", "gal"),
 * "mm/s^2" ("mm_s2"). Returns 0 or -EINVAL. init-only. */
int drths_gm_units_parse(const char *name, drths_gm_units_t *out);

/* Loads the record at path into r: samples converted to m/s^2 and multiplied by o->scale, dt
 * divided by o->time_compression, cut to o->duration_s, o->tail_s of zeros appended. o NULL
 * means defaults. On failure r holds nothing (nothing to close) and err names the file and, for
 * bad content, the line: `elcentro.AT2:7: not a number: "0.0O630"`. Returns 0, the negative
 * errno of fopen (-ENOENT...), -EINVAL for bad content or options, -EFBIG, -ENOMEM.
 * init-only. */
int drths_record_load(drths_record_t *r, const char *path, const drths_gm_options_t *o,
                      drths_error_t *err);

/* Resamples in onto t = k * dt_s by linear interpolation, for k = 0 .. floor(T/dt_s) with
 * T = (in->n - 1) * in->dt_s, then appends zeros up to T + tail_s (so n =
 * floor((T + tail_s)/dt_s) + 1). Samples at times that coincide with input samples (within
 * 1e-9 of a step) are copied exactly. out may be in (in is then replaced); otherwise out is
 * overwritten without being closed. On failure out is unchanged if it is in, else holds
 * nothing. Returns 0, -EINVAL or -ENOMEM. init-only. */
int drths_record_resample(drths_record_t *out, const drths_record_t *in, double dt_s, double tail_s,
                          drths_error_t *err);

/* Band-limited white noise of duration_s (n = floor(duration_s/dt_s) + 1 samples): a sum of
 * equal-amplitude sinusoids at every frequency j/(n*dt_s) inside [f_lo_hz, f_hi_hz] (never DC,
 * never Nyquist) with phases drawn from a generator seeded by seed, scaled so that the RMS over
 * the record is rms_m_s2 exactly (to rounding). The frequencies sit on the record's own DFT
 * grid, so a DFT of the record has no energy outside the band, and the same seed gives the same
 * samples. The record starts at a non-zero value (it is periodic, not tapered). Cost is
 * O(n * number of frequencies): about 0.5 s for 60 s at 5 kHz, 0-30 Hz. Returns 0, -EINVAL
 * (bad arguments, band holding no grid frequency, f_hi_hz above Nyquist) or -ENOMEM.
 * init-only. */
int drths_record_white_noise(drths_record_t *out, double dt_s, double duration_s, double f_lo_hz,
                             double f_hi_hz, double rms_m_s2, uint64_t seed, drths_error_t *err);

/* Returns the sample of largest magnitude (signed, m/s^2) and, if index is not NULL, its index
 * (the first one on ties). An empty record gives 0 and index 0. RT-safe. */
double drths_record_peak(const drths_record_t *r, size_t *index);

/* Frees what r owns and zeroes it; safe twice and on a zeroed record. init-only. */
void drths_record_close(drths_record_t *r);

#endif
