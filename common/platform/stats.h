/* Small statistics helpers for summaries, the delay estimator and benchmarks.
 *
 * Three kinds of tools, marked by where they may run:
 * - drths_hist_t: a fixed-bin histogram of int64 values (nanoseconds in practice: tick lateness,
 *   round trips). Bins are allocated at init; adding a value and reading a quantile are RT-safe
 *   and cheap (two-level counts, so a quantile read touches at most a few thousand counters).
 * - drths_running_t: streaming count/min/max/mean/standard deviation, RT-safe, no storage.
 * - Array helpers (peak abs, RMS, quantile): peak and RMS are RT-safe loops; the quantile of an
 *   unsorted array sorts a copy and is init-only (post-processing, summaries).
 *
 * Quantiles everywhere use the nearest-rank definition: the q-quantile of n values is the
 * value of rank ceil(q·n) (1-based) in sorted order. It never interpolates, so a reported p99.9
 * round trip is a round trip that actually occurred (or, for a histogram, the upper edge of the
 * bin that holds it), which is the conservative choice for sizing delays.
 *
 * Ownership: the caller owns every struct; drths_hist_t owns its bin arrays (freed by _close).
 */
#ifndef DRTHS_STATS_H
#define DRTHS_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"

/* ---- Histogram ---------------------------------------------------------------------------- */

typedef struct drths_hist {
    int64_t bin_width;   /* width of one bin, in the caller's unit (ns) */
    size_t nbins;        /* bins cover [0, nbins·bin_width); larger values go to overflow */
    size_t group;        /* fine bins per coarse group */
    size_t ngroups;
    uint64_t *bins;      /* nbins counters, owned */
    uint64_t *groups;    /* ngroups counters (sum of their fine bins), owned */
    uint64_t count;      /* all values, including underflow and overflow */
    uint64_t underflow;  /* values < 0 (counted in bin 0) */
    uint64_t overflow;   /* values >= nbins·bin_width */
    int64_t min, max;    /* exact extremes of the values added (valid when count > 0) */
    double sum;          /* for the mean */
} drths_hist_t;

/* Allocates nbins bins of width bin_width (both > 0). Example: round trips in 10 µs bins up to
 * 2 s are drths_hist_init(&h, 10000, 200000, &err). On failure nothing is left allocated.
 * init-only. */
int drths_hist_init(drths_hist_t *h, int64_t bin_width, size_t nbins, drths_error_t *err);

/* Frees the bins. Safe twice and on a zeroed struct. init-only. */
void drths_hist_close(drths_hist_t *h);

/* Adds one value. Negative values are counted in bin 0 (and in underflow); values beyond the
 * last bin are counted in overflow. RT-safe (a few increments). */
void drths_hist_add(drths_hist_t *h, int64_t v);

/* Nearest-rank q-quantile (0 < q <= 1), returned as the upper edge of the bin holding that rank,
 * clamped to the exact [min, max] seen; so the result is >= the true sample quantile and at
 * most one bin width above it. Ranks that fall in overflow return max. Returns 0 when empty.
 * RT-safe: reads at most ngroups + group counters. */
int64_t drths_hist_quantile(const drths_hist_t *h, double q);

/* The same over the union of n histograms of the same bins (a sliding window made of
 * sub-windows): their counts added bin by bin, clamped to the exact extremes of the non-empty
 * ones; 0 when all are empty. RT-safe (reads n × (ngroups + group) counters). */
int64_t drths_hist_quantile_many(const drths_hist_t *const *hs, size_t n, double q);

/* Mean of the values added (exact, not binned); 0 when empty. RT-safe. */
double drths_hist_mean(const drths_hist_t *h);

/* Empties the histogram, clearing only the groups that hold values, so the cost is proportional
 * to how spread the data were, not to nbins. RT-safe. */
void drths_hist_reset(drths_hist_t *h);

/* ---- Streaming min/max/mean -------------------------------------------------------------- */

typedef struct drths_running {
    uint64_t n;
    double min, max;
    double mean;
    double m2; /* sum of squared deviations from the mean (Welford) */
} drths_running_t;

/* Zeroes the accumulator. RT-safe. */
void drths_running_reset(drths_running_t *r);

/* Adds one value (Welford's update, stable for long runs). RT-safe. */
void drths_running_add(drths_running_t *r, double x);

/* Population standard deviation of the values added; 0 for fewer than two values. RT-safe. */
double drths_running_stddev(const drths_running_t *r);

/* ---- Arrays ------------------------------------------------------------------------------- */

/* 0-based index of the nearest-rank q-quantile in a sorted array of n > 0 values: ceil(q·n) - 1,
 * clamped to [0, n-1]. q·n is nudged down by one part in 1e12 so that, e.g., q = 0.999 of 1000
 * values is rank 999 although 0.999 is not exact in binary. RT-safe. */
size_t drths_quantile_rank(size_t n, double q);

/* max |x[i]|; 0 for n = 0. RT-safe. */
double drths_peak_abs(const double *x, size_t n);

/* sqrt(Σ x[i]² / n); 0 for n = 0. RT-safe. */
double drths_rms(const double *x, size_t n);

/* Nearest-rank q-quantile of n values, computed on a sorted copy, so x is untouched. Returns 0
 * and sets *out, -EINVAL for n = 0 or q outside (0, 1], -ENOMEM. init-only (allocates). */
int drths_quantile_copy(const double *x, size_t n, double q, double *out);

/* Same for int64 values (nanosecond samples). init-only (allocates). */
int drths_quantile_copy_i64(const int64_t *x, size_t n, double q, int64_t *out);

/* Sort int64 / double values in place, ascending. init-only (qsort, not bounded-time). */
void drths_sort_i64(int64_t *x, size_t n);
void drths_sort_double(double *x, size_t n);

#endif
