#include "common/platform/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/platform/adaptreport.h"
#include "common/platform/json.h"
#include "common/platform/sitelinks.h"
#include "common/platform/stats.h"

/* ---- fidelity ---------------------------------------------------------------------------- */

/* num / den for a relative error, with the conventions of the header for a zero reference. */
static double ratio(double num, double den)
{
    if (isnan(num) || isnan(den))
        return NAN;
    if (den > 0.0)
        return num / den;
    return num == 0.0 ? 0.0 : INFINITY;
}

/* The errors of h against r over n samples; with index arrays ih and ir (NULL: 0..n-1), sample
 * k is h[ih[k]] against r[ir[k]]. */
static void series_error(const double *h, const long *ih, const double *r, const long *ir,
                         long n, drths_series_error_t *out)
{
    double peak_h = 0.0, peak_r = 0.0, sum_d2 = 0.0, sum_r2 = 0.0, max_d = 0.0;
    int bad = 0;
    for (long k = 0; k < n; k++) {
        double hi = h[ih ? ih[k] : k], ri = r[ir ? ir[k] : k];
        if (isnan(hi) || isnan(ri)) {
            bad = 1;
            continue;
        }
        double ah = fabs(hi), ar = fabs(ri), d = fabs(hi - ri);
        if (ah > peak_h)
            peak_h = ah;
        if (ar > peak_r)
            peak_r = ar;
        if (d > max_d)
            max_d = d;
        sum_d2 += d * d;
        sum_r2 += ri * ri;
    }
    out->peak_hyb = peak_h;
    out->peak_ref = peak_r;
    out->max_abs_err = bad ? NAN : max_d;
    out->peak_err = bad ? NAN : ratio(fabs(peak_h - peak_r), peak_r);
    out->max_err = bad ? NAN : ratio(max_d, peak_r);
    out->rms_err = bad ? NAN : ratio(sqrt(sum_d2), sqrt(sum_r2));
}

void drths_series_error_compute(const double *h, const double *r, long n,
                                drths_series_error_t *out)
{
    series_error(h, NULL, r, NULL, n, out);
}

static double pct(double f)
{
    return f * 100.0;
}

/* Largest value, where NaN wins: an unknown error must not hide behind a known one. */
static double max_nan(double a, double b)
{
    if (isnan(a) || isnan(b))
        return NAN;
    return a > b ? a : b;
}

static void error_max(drths_series_error_t *acc, const drths_series_error_t *e, int first)
{
    if (first) {
        *acc = *e;
        return;
    }
    acc->peak_hyb = max_nan(acc->peak_hyb, e->peak_hyb);
    acc->peak_ref = max_nan(acc->peak_ref, e->peak_ref);
    acc->peak_err = max_nan(acc->peak_err, e->peak_err);
    acc->max_abs_err = max_nan(acc->max_abs_err, e->max_abs_err);
    acc->max_err = max_nan(acc->max_err, e->max_err);
    acc->rms_err = max_nan(acc->rms_err, e->rms_err);
}

static const double *need(const drths_csv_table_t *t, const char *name, drths_error_t *err)
{
    const double *c = drths_csv_column(t, name);
    if (!c)
        drths_error_set(err, -EINVAL, "%s: no column %s", t->path, name);
    return c;
}

int drths_record_floor_count(const drths_csv_table_t *t)
{
    int n = 0;
    char name[32];
    for (;;) {
        snprintf(name, sizeof name, "x%d_m", n + 1);
        if (!drths_csv_column(t, name))
            return n;
        n++;
    }
}

/* ---- joining by step ---------------------------------------------------------------------- */

/* The join column of t, checked: present, whole numbers, strictly increasing. */
static const double *join_column(const drths_csv_table_t *t, const char *key, drths_error_t *err)
{
    const double *k = need(t, key, err);
    if (!k)
        return NULL;
    if (t->rows < 1) {
        drths_error_set(err, -EINVAL, "%s: no rows", t->path);
        return NULL;
    }
    for (long i = 0; i < t->rows; i++) {
        /* Line i + 2: the header is line 1. */
        if (!(k[i] == floor(k[i])) || fabs(k[i]) > 9e15) {
            drths_error_set(err, -EINVAL, "%s:%ld: %s %g is not a whole number", t->path, i + 2,
                            key, k[i]);
            return NULL;
        }
        if (i > 0 && !(k[i] > k[i - 1])) {
            drths_error_set(err, -EINVAL,
                            "%s:%ld: %s %.0f does not follow %.0f (a record's %ss must increase)",
                            t->path, i + 2, key, k[i], k[i - 1], key);
            return NULL;
        }
    }
    return k;
}

int drths_record_range(const drths_csv_table_t *t, const char *key, long *first, long *last,
                       drths_error_t *err)
{
    const double *k = join_column(t, key, err);
    if (!k)
        return -EINVAL;
    *first = (long)k[0];
    *last = (long)k[t->rows - 1];
    return 0;
}

int drths_gaps_compute(const drths_csv_table_t *t, const char *key, long lo, long hi,
                       drths_gaps_t *out, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->key = key;
    const double *k = join_column(t, key, err);
    if (!k)
        return -EINVAL;
    if (lo > hi) {
        lo = (long)k[0];
        hi = (long)k[t->rows - 1];
    }
    out->first = lo;
    out->last = hi;
    /* Walk the range once: each row in it closes the hole before it, if any. */
    long next = lo; /* the first value not yet accounted for */
    for (long i = 0; i <= t->rows; i++) {
        long v = i < t->rows ? (long)k[i] : hi + 1;
        if (v < lo)
            continue;
        if (v > hi + 1)
            v = hi + 1;
        if (v > next) {
            if (out->holes < DRTHS_GAPS_LISTED) {
                out->hole_first[out->holes] = next;
                out->hole_last[out->holes] = v - 1;
            }
            out->holes++;
            out->missing += v - next;
        }
        if (v > hi)
            break;
        out->rows++;
        next = v + 1;
    }
    return 0;
}

/* Pairs of rows with the same step: ih[k] in a and ib[k] in b, k < *n, in step order. The
 * arrays are allocated here (free both). */
static int join_rows(const double *sa, long na, const double *sb, long nb, long **ia, long **ib,
                     long *n)
{
    long cap = na < nb ? na : nb;
    *ia = malloc((size_t)(cap > 0 ? cap : 1) * sizeof **ia);
    *ib = malloc((size_t)(cap > 0 ? cap : 1) * sizeof **ib);
    if (!*ia || !*ib) {
        free(*ia);
        free(*ib);
        *ia = *ib = NULL;
        return -ENOMEM;
    }
    long i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        if (sa[i] < sb[j]) {
            i++;
        } else if (sb[j] < sa[i]) {
            j++;
        } else {
            (*ia)[k] = i++;
            (*ib)[k] = j++;
            k++;
        }
    }
    *n = k;
    return 0;
}

/* The step dt of a record from its first and last rows: steps may be missing in between. */
static int record_dt(const drths_csv_table_t *t, const double *step, const double *time,
                     double *dt, drths_error_t *err)
{
    if (t->rows < 2)
        return drths_error_set(err, -EINVAL, "%s: %ld rows; at least 2 are needed", t->path,
                               t->rows);
    long n = t->rows - 1;
    *dt = (time[n] - time[0]) / (step[n] - step[0]);
    if (!(*dt > 0.0))
        return drths_error_set(err, -EINVAL, "%s: time_s does not increase (%g at line 2, %g at "
                                             "line %ld)",
                               t->path, time[0], time[n], n + 2);
    return 0;
}

static int fidelity_floors(const drths_csv_table_t *hyb, const drths_csv_table_t *ref,
                           const long *ih, const long *ir, drths_fidelity_t *out,
                           drths_error_t *err)
{
    int fh = drths_record_floor_count(hyb), fr = drths_record_floor_count(ref);
    if (fh == 0)
        return drths_error_set(err, -EINVAL, "%s: no column x1_m", hyb->path);
    if (fr == 0)
        return drths_error_set(err, -EINVAL, "%s: no column x1_m", ref->path);
    if (fh != fr)
        return drths_error_set(err, -EINVAL,
                               "floors differ: %s has %d (x1_m..x%d_m), %s has %d (x1_m..x%d_m)",
                               hyb->path, fh, fh, ref->path, fr, fr);
    if (fh > DRTHS_METRICS_MAX_FLOORS)
        return drths_error_set(err, -EINVAL, "%s: %d floors; at most %d are supported",
                               hyb->path, fh, DRTHS_METRICS_MAX_FLOORS);
    out->floors = fh;
    for (int i = 0; i < fh; i++) {
        char xn[32], an[32];
        snprintf(xn, sizeof xn, "x%d_m", i + 1);
        snprintf(an, sizeof an, "a%d_abs_m_s2", i + 1);
        const double *xh = need(hyb, xn, err), *xr = need(ref, xn, err);
        const double *ah = need(hyb, an, err);
        if (!ah)
            return -EINVAL;
        const double *ar = need(ref, an, err);
        if (!xh || !xr || !ar)
            return -EINVAL;
        series_error(xh, ih, xr, ir, out->rows, &out->disp[i]);
        series_error(ah, ih, ar, ir, out->rows, &out->acc[i]);
        error_max(&out->disp_max, &out->disp[i], i == 0);
        error_max(&out->acc_max, &out->acc[i], i == 0);
    }
    const double *fh_n = drths_csv_column(hyb, "damper_force_N");
    const double *fr_n = drths_csv_column(ref, "damper_force_N");
    if (fh_n && fr_n) {
        out->has_damper_force = 1;
        series_error(fh_n, ih, fr_n, ir, out->rows, &out->damper_force);
    }
    return 0;
}

int drths_fidelity_compute(const drths_csv_table_t *hyb, const drths_csv_table_t *ref,
                           drths_fidelity_t *out, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    const double *sh = join_column(hyb, "step", err);
    if (!sh)
        return -EINVAL;
    const double *sr = join_column(ref, "step", err);
    if (!sr)
        return -EINVAL;
    const double *th = need(hyb, "time_s", err);
    if (!th)
        return -EINVAL;
    const double *tr = need(ref, "time_s", err);
    if (!tr)
        return -EINVAL;
    double dth = 0.0, dtr = 0.0;
    int rc = record_dt(hyb, sh, th, &dth, err);
    if (rc)
        return rc;
    rc = record_dt(ref, sr, tr, &dtr, err);
    if (rc)
        return rc;
    /* Times are written with 9 significant digits, so equal steps agree to far better than
     * 1e-6 relative; anything more is a different experiment. */
    if (fabs(dth - dtr) > 1e-6 * dtr)
        return drths_error_set(err, -EINVAL,
                               "time steps differ: %s has dt %.9g s, %s has dt %.9g s",
                               hyb->path, dth, ref->path, dtr);
    long *ih = NULL, *ir = NULL, n = 0;
    if (join_rows(sh, hyb->rows, sr, ref->rows, &ih, &ir, &n))
        return drths_error_set(err, -ENOMEM, "%s: out of memory", hyb->path);
    if (n < 2) {
        rc = drths_error_set(err, -EINVAL,
                             "%s and %s have %ld step%s in common; at least 2 are needed",
                             hyb->path, ref->path, n, n == 1 ? "" : "s");
        goto out;
    }
    /* The same step must be the same time: else the records are of different experiments
     * (or one of them is numbered wrongly) and comparing them would mean nothing. */
    if (fabs(th[ih[0]] - tr[ir[0]]) > 0.5 * dtr) {
        rc = drths_error_set(err, -EINVAL,
                             "start times differ: step %.0f is at %.9g s in %s, at %.9g s in %s",
                             sh[ih[0]], th[ih[0]], hyb->path, tr[ir[0]], ref->path);
        goto out;
    }
    out->hyb_rows = hyb->rows;
    out->ref_rows = ref->rows;
    out->rows = n;
    out->first_step = (long)sh[ih[0]];
    out->last_step = (long)sh[ih[n - 1]];
    out->dt_s = dtr;
    rc = fidelity_floors(hyb, ref, ih, ir, out, err);
out:
    free(ih);
    free(ir);
    return rc;
}

/* ---- order statistics -------------------------------------------------------------------- */

int drths_stats_compute(const double *v, long n, drths_stats_t *out)
{
    out->n = 0;
    out->min = out->p50 = out->p99 = out->p999 = out->max = NAN;
    if (n <= 0)
        return 0;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return -ENOMEM;
    long m = 0;
    for (long i = 0; i < n; i++)
        if (!isnan(v[i]))
            s[m++] = v[i];
    if (m > 0) {
        drths_sort_double(s, (size_t)m);
        out->n = m;
        out->min = s[0];
        out->p50 = s[drths_quantile_rank((size_t)m, 0.5)];
        out->p99 = s[drths_quantile_rank((size_t)m, 0.99)];
        out->p999 = s[drths_quantile_rank((size_t)m, 0.999)];
        out->max = s[m - 1];
    }
    free(s);
    return 0;
}

/* ---- link statistics --------------------------------------------------------------------- */

static long count_set(const double *v, long n)
{
    long c = 0;
    for (long i = 0; i < n; i++)
        c += v[i] > 0.5;
    return c;
}

static double frac(long k, long n)
{
    return n > 0 ? (double)k / (double)n : NAN;
}

/* Ends with suffix. */
static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The "<site>.fb_concealed" and "<site>.rtt_ms" columns of several links merged per row (any
 * concealed; the largest round trip, NaN where no link has one), allocated into *conc and *rtt;
 * both stay NULL when the record has no such columns. 0 or -ENOMEM. */
static int links_merged(const drths_csv_table_t *t, double **conc, double **rtt, drths_error_t *err)
{
    int nc = 0;
    for (int c = 0; c < t->ncols; c++)
        nc += ends_with(t->names[c], ".fb_concealed");
    if (nc == 0)
        return 0;
    size_t n = t->rows > 0 ? (size_t)t->rows : 1;
    *conc = calloc(n, sizeof(double));
    *rtt = malloc(n * sizeof(double));
    if (!*conc || !*rtt) {
        free(*conc);
        free(*rtt);
        *conc = *rtt = NULL;
        return drths_error_set(err, -ENOMEM, "%s: out of memory", t->path);
    }
    for (long i = 0; i < t->rows; i++)
        (*rtt)[i] = NAN;
    for (int c = 0; c < t->ncols; c++) {
        const double *v = t->cols[c];
        if (ends_with(t->names[c], ".fb_concealed")) {
            for (long i = 0; i < t->rows; i++)
                if (v[i] != 0.0 && !isnan(v[i]))
                    (*conc)[i] = 1.0;
        } else if (ends_with(t->names[c], ".rtt_ms")) {
            for (long i = 0; i < t->rows; i++)
                if (!isnan(v[i]) && (isnan((*rtt)[i]) || v[i] > (*rtt)[i]))
                    (*rtt)[i] = v[i];
        }
    }
    return 0;
}

static int numerical_link(const drths_csv_table_t *num, drths_link_stats_t *out,
                          drths_error_t *err)
{
    static const char *const hybrid_cols[] = {"fb_tick",       "fb_concealed",  "force_measured_N",
                                              "force_model_N", "force_used_N",  "rtt_ms",
                                              "loop_delay_ticks"};
    int hybrid = 0;
    for (size_t i = 0; i < sizeof hybrid_cols / sizeof hybrid_cols[0]; i++)
        hybrid |= drths_csv_column(num, hybrid_cols[i]) != NULL;
    if (!hybrid)
        return 0;
    /* A numerical site with several links records each link's columns as "<site>.<name>":
     * a step counts as concealed when any link's feedback was, and its round trip is the
     * slowest link's (the one L is chosen for). */
    double *conc_m = NULL, *rtt_m = NULL;
    if (!drths_csv_column(num, "fb_concealed") && links_merged(num, &conc_m, &rtt_m, err) != 0)
        return -EINVAL;
    const double *conc = conc_m ? conc_m : need(num, "fb_concealed", err);
    const double *rtt = rtt_m ? rtt_m : need(num, "rtt_ms", err);
    const double *ld = need(num, "loop_delay_ticks", err);
    if (!conc || !rtt || !ld) {
        free(conc_m);
        free(rtt_m);
        return -EINVAL;
    }
    out->has_numerical = 1;
    out->steps = num->rows;
    out->fb_concealed = count_set(conc, num->rows);
    out->fb_concealed_frac = frac(out->fb_concealed, num->rows);
    int bad = drths_stats_compute(rtt, num->rows, &out->rtt_ms) ||
              drths_stats_compute(ld, num->rows, &out->loop_delay_ticks);
    free(conc_m);
    free(rtt_m);
    if (bad)
        return drths_error_set(err, -ENOMEM, "%s: out of memory", num->path);
    /* Ticks are the same statistics scaled, as the scaling is monotonic. */
    double ms_per_tick = out->tick_s * 1e3;
    out->rtt_ticks = out->rtt_ms;
    out->rtt_ticks.min /= ms_per_tick;
    out->rtt_ticks.p50 /= ms_per_tick;
    out->rtt_ticks.p99 /= ms_per_tick;
    out->rtt_ticks.p999 /= ms_per_tick;
    out->rtt_ticks.max /= ms_per_tick;
    return 0;
}

static int physical_link(const drths_csv_table_t *phys, drths_link_stats_t *out,
                         drths_error_t *err)
{
    const double *conc = need(phys, "concealed", err);
    const double *hold = conc ? need(phys, "hold", err) : NULL;
    const double *cmd = hold ? need(phys, "command_m", err) : NULL;
    const double *meas = cmd ? need(phys, "meas_disp_m", err) : NULL;
    const double *lead = meas ? need(phys, "cmd_lead_ms", err) : NULL;
    const double *late = lead ? need(phys, "wake_late_us", err) : NULL;
    if (!late)
        return -EINVAL;
    long n = phys->rows;
    out->has_physical = 1;
    out->ticks = n;
    out->cmd_concealed = count_set(conc, n);
    out->cmd_concealed_frac = frac(out->cmd_concealed, n);
    out->hold_ticks = count_set(hold, n);
    out->hold_frac = frac(out->hold_ticks, n);
    if (drths_stats_compute(lead, n, &out->cmd_lead_ms) ||
        drths_stats_compute(late, n, &out->wake_late_us))
        return drths_error_set(err, -ENOMEM, "%s: out of memory", phys->path);
    /* Tracking RMS error norm (Phillips & Spencer 2013) over the ticks where both values are
     * known. */
    double sum_d2 = 0.0, sum_c2 = 0.0, peak = 0.0;
    for (long i = 0; i < n; i++) {
        if (isnan(cmd[i]) || isnan(meas[i]))
            continue;
        double d = meas[i] - cmd[i];
        sum_d2 += d * d;
        sum_c2 += cmd[i] * cmd[i];
        if (fabs(d) > peak)
            peak = fabs(d);
    }
    out->tracking_rms_err = ratio(sqrt(sum_d2), sqrt(sum_c2));
    out->tracking_peak_m = peak;
    return 0;
}

int drths_link_stats_compute(const drths_csv_table_t *num, const drths_csv_table_t *phys,
                             drths_link_stats_t *out, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->tick_s = NAN;
    out->fb_concealed_frac = out->cmd_concealed_frac = out->hold_frac = NAN;
    out->tracking_rms_err = out->tracking_peak_m = NAN;
    drths_stats_compute(NULL, 0, &out->rtt_ms);
    out->rtt_ticks = out->loop_delay_ticks = out->cmd_lead_ms = out->wake_late_us = out->rtt_ms;
    /* The control period: the physical site's ticks when known, else the numerical steps,
     * which are lock-stepped to the ticks (docs/design.md#timing-model). */
    const drths_csv_table_t *sources[2] = {phys, num};
    const char *keys[2] = {"tick", "step"};
    for (int k = 0; k < 2 && isnan(out->tick_s); k++) {
        const drths_csv_table_t *src = sources[k];
        const double *t = src ? drths_csv_column(src, "time_s") : NULL;
        if (!t || src->rows < 2)
            continue;
        /* From the first and last rows and their ticks, when known: rows may be missing. */
        const double *key = drths_csv_column(src, keys[k]);
        long n = src->rows - 1;
        double span = key ? key[n] - key[0] : 1.0;
        double dt = key ? (t[n] - t[0]) / span : t[1] - t[0];
        if (span > 0 && dt > 0)
            out->tick_s = dt;
    }
    if (num) {
        int rc = numerical_link(num, out, err);
        if (rc)
            return rc;
    }
    if (phys) {
        int rc = physical_link(phys, out, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- the drive --------------------------------------------------------------------------- */

static const char *const bound_field[DRTHS_DRIVE_NBOUNDS] = {
    "", "limit_drive_m", "limit_drive_velocity_m_s", "limit_drive_acceleration_m_s2",
    "limit_drive_offset_m"};
static const char *const bound_unit[DRTHS_DRIVE_NBOUNDS] = {"", "m", "m/s", "m/s^2", "m"};
static const char *const bound_name[DRTHS_DRIVE_NBOUNDS] = {"", "position", "velocity",
                                                            "acceleration", "offset"};

const char *drths_drive_bound_field(drths_drive_bound_t b)
{
    return (unsigned)b < DRTHS_DRIVE_NBOUNDS ? bound_field[b] : "?";
}

const char *drths_drive_bound_unit(drths_drive_bound_t b)
{
    return (unsigned)b < DRTHS_DRIVE_NBOUNDS ? bound_unit[b] : "?";
}

static const char *bound_word(drths_drive_bound_t b)
{
    return (unsigned)b < DRTHS_DRIVE_NBOUNDS ? bound_name[b] : "?";
}

int drths_record_channel_count(const drths_csv_table_t *phys)
{
    if (!drths_csv_column(phys, "drive_m"))
        return 0;
    int n = 1;
    char name[32];
    for (;;) {
        snprintf(name, sizeof name, "ch%d_drive_m", n + 1);
        if (!drths_csv_column(phys, name))
            return n;
        n++;
    }
}

/* The rounding error of a value written with 9 significant digits (%.9g): at most half a unit
 * of its ninth digit, 5e-9 of it; twice that, for the conversion back. */
static double slack(double x)
{
    return 1e-8 * fabs(x);
}

/* Where the drive stood at one tick against the envelope: the bound it used most. */
typedef struct tick_use {
    double use;
    drths_drive_bound_t bound;
    double value;
} tick_use_t;

/* One bound at one tick: value, lessened by its rounding error, as a fraction of limit. */
static void use_bound(tick_use_t *t, drths_drive_bound_t b, double value, double err, double limit,
                      double *max_value)
{
    if (value > *max_value)
        *max_value = value;
    double u = (value > err ? value - err : 0.0) / limit;
    if (u > t->use || t->bound == DRTHS_DRIVE_BOUND_NONE) {
        t->use = u;
        t->bound = b;
        t->value = value;
    }
}

/* Larger, where NaN wins; *at follows the value kept. */
static void keep_max(double *m, long *at, double v, long tick)
{
    if (isnan(*m))
        return;
    if (isnan(v) || v > *m) {
        *m = v;
        *at = tick;
    }
}

typedef struct drive_cols {
    const double *drive, *cmd, *hold, *cmd_tick; /* cmd_tick may be NULL */
} drive_cols_t;

static int commanded(const drive_cols_t *c, long i)
{
    return !(c->hold[i] > 0.5) && (!c->cmd_tick || c->cmd_tick[i] >= 0.0);
}

/* The envelope at row i (ticks consecutive back to row i - c1 - c2). */
static void envelope_tick(const drive_cols_t *c, const drths_drive_limits_t *lim, double dt, long i,
                          int c1, int c2, int cmdd, drths_drive_channel_t *ch, tick_use_t *t)
{
    const double *u = c->drive;
    *t = (tick_use_t){.use = 0.0, .bound = DRTHS_DRIVE_BOUND_NONE, .value = NAN};
    if (!isfinite(u[i])) {
        /* Not a drive: nothing can say how far it is from the envelope. */
        *t = (tick_use_t){.use = INFINITY, .bound = DRTHS_DRIVE_BOUND_POSITION, .value = u[i]};
        ch->max_abs_m = INFINITY;
        return;
    }
    use_bound(t, DRTHS_DRIVE_BOUND_POSITION, fabs(u[i]), slack(u[i]), lim->position_m,
              &ch->max_abs_m);
    if (c1 && isfinite(u[i - 1]))
        use_bound(t, DRTHS_DRIVE_BOUND_VELOCITY, fabs(u[i] - u[i - 1]) / dt,
                  (slack(u[i]) + slack(u[i - 1])) / dt, lim->velocity_m_s, &ch->max_velocity_m_s);
    if (c2 && isfinite(u[i - 1]) && isfinite(u[i - 2]))
        use_bound(t, DRTHS_DRIVE_BOUND_ACCELERATION,
                  fabs(u[i] - 2.0 * u[i - 1] + u[i - 2]) / (dt * dt),
                  (slack(u[i]) + 2.0 * slack(u[i - 1]) + slack(u[i - 2])) / (dt * dt),
                  lim->acceleration_m_s2, &ch->max_acceleration_m_s2);
    if (cmdd && isfinite(c->cmd[i]))
        use_bound(t, DRTHS_DRIVE_BOUND_OFFSET, fabs(u[i] - c->cmd[i]),
                  slack(u[i]) + slack(c->cmd[i]), lim->offset_m, &ch->max_offset_m);
}

static int drive_channel(const drths_csv_table_t *t, const double *tick,
                         const drths_drive_limits_t *lim, double dt, drths_drive_channel_t *ch,
                         drths_error_t *err)
{
    char name[64];
    drive_cols_t c;
    const double **need_cols[3] = {&c.drive, &c.cmd, &c.hold};
    static const char *const base[3] = {"drive_m", "command_m", "hold"};
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "%s%s", ch->prefix, base[k]);
        if (!(*need_cols[k] = need(t, name, err)))
            return -EINVAL;
    }
    snprintf(name, sizeof name, "%scmd_tick", ch->prefix);
    c.cmd_tick = drths_csv_column(t, name);

    ch->ticks = t->rows;
    ch->max_drive_step_m = ch->max_cmd_step_m = 0.0;
    ch->drive_step_tick = ch->cmd_step_tick = -1;
    ch->step_ratio = NAN;
    ch->use_tick = ch->first_outside_tick = -1;
    ch->use_value = NAN;
    for (long i = 0; i < t->rows; i++) {
        int c1 = i >= 1 && tick[i] == tick[i - 1] + 1.0;
        int c2 = c1 && i >= 2 && tick[i - 1] == tick[i - 2] + 1.0;
        int cmdd = commanded(&c, i);
        long k = (long)tick[i];
        if (cmdd) {
            ch->commanded++;
            if (c1) {
                ch->steps++;
                keep_max(&ch->max_drive_step_m, &ch->drive_step_tick,
                         fabs(c.drive[i] - c.drive[i - 1]), k);
                if (commanded(&c, i - 1))
                    keep_max(&ch->max_cmd_step_m, &ch->cmd_step_tick, fabs(c.cmd[i] - c.cmd[i - 1]),
                             k);
            }
        }
        if (!ch->has_limits)
            continue;
        tick_use_t u;
        envelope_tick(&c, lim, dt, i, c1, c2, cmdd, ch, &u);
        if (u.bound != DRTHS_DRIVE_BOUND_NONE &&
            (u.use > ch->max_use || ch->use_bound == DRTHS_DRIVE_BOUND_NONE)) {
            ch->max_use = u.use;
            ch->use_bound = u.bound;
            ch->use_tick = k;
            ch->use_value = u.value;
        }
        if (u.use > 1.0) {
            if (ch->outside++ == 0) {
                ch->first_outside_tick = k;
                ch->first_outside_bound = u.bound;
            }
        }
    }
    if (ch->steps > 0) {
        double d = ch->max_drive_step_m, r = ch->max_cmd_step_m;
        ch->step_ratio = isnan(d) || isnan(r) ? NAN : r > 0.0 ? d / r : d == 0.0 ? 0.0 : INFINITY;
    }
    return 0;
}

int drths_drive_compute(const drths_csv_table_t *phys, int nch, const drths_drive_limits_t *lim,
                        const char *const *names, double dt_s, drths_drive_stats_t *out,
                        drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->tick_s = dt_s;
    if (nch <= 0 || !drths_csv_column(phys, "drive_m"))
        return 0;
    if (nch > DRTHS_METRICS_MAX_CHANNELS)
        return drths_error_set(err, -EINVAL, "%s: %d actuator channels; at most %d are supported",
                               phys->path, nch, DRTHS_METRICS_MAX_CHANNELS);
    if (lim && !(dt_s > 0.0))
        return drths_error_set(err, -EINVAL, "%s: the tick is unknown (time_s and tick)",
                               phys->path);
    const double *tick = join_column(phys, "tick", err);
    if (!tick)
        return -EINVAL;
    out->has_drive = 1;
    out->channels = nch;
    out->has_limits = lim != NULL;
    for (int i = 0; i < nch; i++) {
        drths_drive_channel_t *ch = &out->ch[i];
        if (names && names[i])
            snprintf(ch->name, sizeof ch->name, "%s", names[i]);
        else
            snprintf(ch->name, sizeof ch->name, "ch%d", i + 1);
        if (i > 0)
            snprintf(ch->prefix, sizeof ch->prefix, "ch%d_", i + 1);
        if (lim) {
            const drths_drive_limits_t *l = &lim[i];
            if (!(l->position_m > 0.0 && l->velocity_m_s > 0.0 && l->acceleration_m_s2 > 0.0 &&
                  l->offset_m > 0.0))
                return drths_error_set(err, -EINVAL,
                                       "channel %s: the drive envelope's limits "
                                       "must be > 0",
                                       ch->name);
            ch->has_limits = 1;
            ch->lim = *l;
        }
        int rc = drive_channel(phys, tick, lim ? &lim[i] : NULL, dt_s, ch, err);
        if (rc)
            return rc;
        /* Among the channels with a step, NaN wins: an unknown figure must not hide behind a
         * known one. */
        const drths_drive_channel_t *rb = &out->ch[out->ratio_channel];
        if (i > 0 && ch->steps > 0 &&
            (rb->steps == 0 || (!isnan(rb->step_ratio) &&
                                (isnan(ch->step_ratio) || ch->step_ratio > rb->step_ratio))))
            out->ratio_channel = i;
        const drths_drive_channel_t *ub = &out->ch[out->use_channel];
        if (i > 0 && ch->max_use > ub->max_use)
            out->use_channel = i;
    }
    return 0;
}

/* ---- the verdict ------------------------------------------------------------------------- */

const char *drths_outcome_name(drths_outcome_t o)
{
    return o == DRTHS_OUTCOME_PASS ? "PASS" : o == DRTHS_OUTCOME_FAIL ? "FAIL" : "n/a";
}

/* One criterion: value against limit when known and judged; a value not known is shown as n/a,
 * one known but not judged (tolerated by an option) is shown with its value; either way the
 * note says why and the outcome is NONE. */
static void criterion(drths_verdict_t *v, const char *name, const char *unit, int known,
                      int judged, double value, double limit, const char *note)
{
    if (v->n >= DRTHS_VERDICT_MAX)
        return;
    drths_criterion_t *c = &v->c[v->n++];
    c->name = name;
    c->unit = unit;
    c->value = known ? value : NAN;
    c->limit = limit;
    c->note = known && judged ? NULL : note;
    /* A NaN figure fails: an unknown error is not a small one. */
    c->outcome = !known || !judged ? DRTHS_OUTCOME_NONE
                 : value <= limit  ? DRTHS_OUTCOME_PASS
                                   : DRTHS_OUTCOME_FAIL;
}

/* "ch2: " before a channel's figures when there are several channels, else nothing. */
static const char *channel_label(const drths_drive_stats_t *d, int i, char *buf, size_t cap)
{
    if (d->channels < 2)
        return "";
    snprintf(buf, cap, "%s: ", d->ch[i].name);
    return buf;
}

/* The two drive criteria: the step ratio against a->drive_step_ratio, the envelope's use
 * against 1. */
static void drive_criteria(const drths_acceptance_t *a, const drths_link_stats_t *link,
                           const drths_drive_stats_t *d, drths_verdict_t *out)
{
    int ph = link && link->has_physical;
    int dr = d && d->has_drive;
    const char *why = !ph ? "no physical.csv" : "no drive_m in physical.csv";
    char lab[48];

    const drths_drive_channel_t *r = dr ? &d->ch[d->ratio_channel] : NULL;
    int known = r && r->steps > 0;
    criterion(out, "drive step / command step", "ratio", known, 1, known ? r->step_ratio : 0,
              a->drive_step_ratio, dr ? "no commanded ticks" : why);
    if (known && out->n > 0)
        snprintf(out->c[out->n - 1].where, sizeof out->c[0].where,
                 "%sdrive step %.3f mm at tick %ld; command step at most %.3f mm (tick %ld)",
                 channel_label(d, d->ratio_channel, lab, sizeof lab), r->max_drive_step_m * 1e3,
                 r->drive_step_tick, r->max_cmd_step_m * 1e3, r->cmd_step_tick);

    const drths_drive_channel_t *u = dr ? &d->ch[d->use_channel] : NULL;
    known = u && d->has_limits && u->use_bound != DRTHS_DRIVE_BOUND_NONE;
    criterion(out, "drive envelope used, max", "fraction", known, 1, known ? u->max_use : 0, 1.0,
              !dr              ? why
              : !d->has_limits ? "no experiment file: envelope unknown"
                               : "no ticks");
    if (known && out->n > 0) {
        drths_criterion_t *c = &out->c[out->n - 1];
        double scale =
            u->use_bound == DRTHS_DRIVE_BOUND_POSITION || u->use_bound == DRTHS_DRIVE_BOUND_OFFSET
                ? 1e3
                : 1.0;
        const char *unit = scale == 1e3 ? "mm" : drths_drive_bound_unit(u->use_bound);
        double lims[DRTHS_DRIVE_NBOUNDS] = {0, u->lim.position_m, u->lim.velocity_m_s,
                                            u->lim.acceleration_m_s2, u->lim.offset_m};
        int w =
            snprintf(c->where, sizeof c->where, "%s%s %.4g %s (limit %.4g) at tick %ld",
                     channel_label(d, d->use_channel, lab, sizeof lab), bound_word(u->use_bound),
                     u->use_value * scale, unit, lims[u->use_bound] * scale, u->use_tick);
        long outside = 0, first = -1;
        for (int i = 0; i < d->channels; i++) {
            outside += d->ch[i].outside;
            if (d->ch[i].outside > 0 && (first < 0 || d->ch[i].first_outside_tick < first))
                first = d->ch[i].first_outside_tick;
        }
        if (outside > 0 && w > 0 && (size_t)w < sizeof c->where)
            snprintf(c->where + w, sizeof c->where - (size_t)w,
                     "; outside at %ld tick%s, the first %ld", outside, outside == 1 ? "" : "s",
                     first);
    }
}

void drths_verdict_compute(const drths_acceptance_t *a, const drths_fidelity_t *fid,
                           const drths_link_stats_t *link, const drths_drive_stats_t *drive,
                           const drths_gaps_t *gaps, int ngaps, int allow_gaps,
                           drths_verdict_t *out)
{
    memset(out, 0, sizeof *out);
    out->gaps_allowed = allow_gaps;
    for (int i = 0; gaps && i < ngaps; i++)
        out->missing += gaps[i].missing;
    criterion(out, "rows missing from the records", "rows", 1, !allow_gaps, (double)out->missing,
              0.0, "tolerated (--allow-gaps)");
    int f = fid != NULL, nl = link && link->has_numerical, ph = link && link->has_physical;
    criterion(out, "displacement RMS error, max", "%", f, 1, f ? pct(fid->disp_max.rms_err) : 0,
              a->displacement_rms_error_pct, "no reference");
    criterion(out, "displacement peak error, max", "%", f, 1, f ? pct(fid->disp_max.peak_err) : 0,
              a->displacement_peak_error_pct, "no reference");
    criterion(out, "acceleration RMS error, max", "%", f, 1, f ? pct(fid->acc_max.rms_err) : 0,
              a->acceleration_rms_error_pct, "no reference");
    criterion(out, "tracking RMS error", "%", ph, 1, ph ? pct(link->tracking_rms_err) : 0,
              a->tracking_rms_error_pct, "no physical.csv");
    criterion(out, "concealed commands", "%", ph, 1, ph ? pct(link->cmd_concealed_frac) : 0,
              a->concealed_commands_pct, "no physical.csv");
    criterion(out, "concealed feedback", "%", nl, 1, nl ? pct(link->fb_concealed_frac) : 0,
              a->concealed_feedback_pct, "not a hybrid record");
    criterion(out, "ticks in HOLD", "ticks", ph, !a->hold_allowed,
              ph ? (double)link->hold_ticks : 0, 0.0,
              ph ? "allowed (acceptance.hold_allowed)" : "no physical.csv");
    drive_criteria(a, link, drive, out);
    out->outcome = DRTHS_OUTCOME_PASS;
    for (int i = 0; i < out->n; i++)
        if (out->c[i].outcome == DRTHS_OUTCOME_FAIL)
            out->outcome = DRTHS_OUTCOME_FAIL;
}

/* ---- the table --------------------------------------------------------------------------- */

static void print_stats_row(FILE *f, const char *label, const drths_stats_t *s, double scale)
{
    if (s->n == 0) {
        fprintf(f, "%-22s %9d %11s %11s %11s %11s %11s\n", label, 0, "-", "-", "-", "-", "-");
        return;
    }
    fprintf(f, "%-22s %9ld %11.3f %11.3f %11.3f %11.3f %11.3f\n", label, s->n, s->min * scale,
            s->p50 * scale, s->p99 * scale, s->p999 * scale, s->max * scale);
}

static void print_fidelity_row(FILE *f, const char *label, const drths_series_error_t *e,
                               double scale)
{
    fprintf(f, "%5s %10.3f %10.3f %10.3f %10.3f %10.3f\n", label, e->peak_hyb * scale,
            e->peak_ref * scale, pct(e->peak_err), pct(e->max_err), pct(e->rms_err));
}

static void print_fidelity_table(FILE *f, const drths_fidelity_t *fid, int disp)
{
    fprintf(f, "%s\n", disp ? "Displacement relative to ground" : "Absolute acceleration");
    fprintf(f, "floor   peak hyb   peak ref   peak err    max err    RMS err\n");
    fprintf(f, "      %10s %10s        (%%)        (%%)        (%%)\n", disp ? "(mm)" : "(m/s^2)",
            disp ? "(mm)" : "(m/s^2)");
    double scale = disp ? 1e3 : 1.0;
    for (int i = 0; i < fid->floors; i++) {
        char label[16];
        snprintf(label, sizeof label, "%d", i + 1);
        print_fidelity_row(f, label, disp ? &fid->disp[i] : &fid->acc[i], scale);
    }
    print_fidelity_row(f, "max", disp ? &fid->disp_max : &fid->acc_max, scale);
}

static void print_gaps(FILE *f, const drths_gaps_t *gaps, int n)
{
    fprintf(f, "\nRecords (rows joined by step or tick, never by position)\n");
    fprintf(f, "%-26s %-24s %10s %10s %7s\n", "record", "range", "rows", "missing", "holes");
    for (int i = 0; i < n; i++) {
        const drths_gaps_t *g = &gaps[i];
        char range[64];
        snprintf(range, sizeof range, "%s %ld..%ld", g->key, g->first, g->last);
        fprintf(f, "%-26s %-24s %10ld %10ld %7ld\n", g->label ? g->label : "-", range, g->rows,
                g->missing, g->holes);
        long listed = g->holes < DRTHS_GAPS_LISTED ? g->holes : DRTHS_GAPS_LISTED;
        for (long h = 0; h < listed; h++)
            fprintf(f, "  GAP: %ss %ld..%ld missing (%ld)\n", g->key, g->hole_first[h],
                    g->hole_last[h], g->hole_last[h] - g->hole_first[h] + 1);
        if (g->holes > listed)
            fprintf(f, "  GAP: and %ld more holes\n", g->holes - listed);
    }
}

static void print_verdict(FILE *f, const drths_verdict_t *v, const char *source)
{
    fprintf(f, "\nVerdict (acceptance criteria: %s)\n", source ? source : "defaults");
    fprintf(f, "%-36s %12s %12s   %s\n", "criterion", "value", "limit", "result");
    for (int i = 0; i < v->n; i++) {
        const drths_criterion_t *c = &v->c[i];
        char name[64], value[32], limit[32];
        snprintf(name, sizeof name, "%s (%s)", c->name, c->unit);
        int whole = strcmp(c->unit, "ticks") == 0 || strcmp(c->unit, "rows") == 0;
        if (c->outcome == DRTHS_OUTCOME_NONE)
            snprintf(value, sizeof value, "-");
        else
            snprintf(value, sizeof value, whole ? "%.0f" : "%.3f", c->value);
        snprintf(limit, sizeof limit, whole ? "%.0f" : "%.3f", c->limit);
        fprintf(f, "%-36s %12s %12s   %s%s%s\n", name, value, limit,
                drths_outcome_name(c->outcome), c->note ? ": " : "", c->note ? c->note : "");
        if (c->where[0])
            fprintf(f, "  where: %s\n", c->where);
    }
    fprintf(f, "%-36s %12s %12s   %s\n", "overall", "", "", drths_outcome_name(v->outcome));
}

static void print_figures(FILE *f)
{
    fprintf(f, "\nFigures (docs/report.md): h hybrid, r reference, over the steps both have\n"
               "  peak err  |max|h| - max|r|| / max|r|, the difference of the peaks\n"
               "  max err   max|h - r| / max|r|, the largest error over time\n"
               "  RMS err   sqrt(sum (h - r)^2 / sum r^2), the error norm of Phillips & Spencer "
               "2013\n"
               "  tracking  sqrt(sum (meas - cmd)^2 / sum cmd^2) over the ticks of physical.csv\n"
               "  concealed a step whose measured force, or a tick whose command, was missing "
               "and replaced\n"
               "  p50, p99, p99.9  nearest-rank percentiles; round trip and L one sample per "
               "step\n"
               "  step      largest |drive_m(k) - drive_m(k-1)| (or command_m) over commanded "
               "ticks k\n"
               "  used      largest fraction of a drive envelope bound (limit_drive_*) the drive "
               "used\n");
}

static void print_link(FILE *f, const drths_link_stats_t *link,
                       const struct drths_adaptive_report *adaptive)
{
    if (link->has_numerical || link->has_physical) {
        fprintf(f, "\nLink");
        if (!isnan(link->tick_s))
            fprintf(f, " (tick %.6g ms)", link->tick_s * 1e3);
        fprintf(f, "\n%-22s %9s %11s %11s %11s %11s %11s\n", "", "n", "min", "p50", "p99",
                "p99.9", "max");
    }
    if (link->has_numerical) {
        print_stats_row(f, "round trip (ms)", &link->rtt_ms, 1.0);
        print_stats_row(f, "round trip (ticks)", &link->rtt_ticks, 1.0);
        print_stats_row(f, "loop delay L (ticks)", &link->loop_delay_ticks, 1.0);
    }
    if (link->has_physical)
        print_stats_row(f, "command lead (ms)", &link->cmd_lead_ms, 1.0);
    if (link->has_numerical)
        fprintf(f, "%-22s %ld of %ld steps (%.3f %%)\n", "concealed feedback", link->fb_concealed,
                link->steps, pct(link->fb_concealed_frac));
    if (link->has_physical) {
        fprintf(f, "%-22s %ld of %ld ticks (%.3f %%)\n", "concealed commands",
                link->cmd_concealed, link->ticks, pct(link->cmd_concealed_frac));
        fprintf(f, "%-22s %ld of %ld ticks (%.3f %%)\n", "hold", link->hold_ticks, link->ticks,
                pct(link->hold_frac));
        fprintf(f, "\nTracking (measured vs commanded actuator displacement)\n");
        fprintf(f, "%-22s %.3f %%\n", "RMS error norm", pct(link->tracking_rms_err));
        fprintf(f, "%-22s %.3f mm\n", "peak |meas - cmd|", link->tracking_peak_m * 1e3);
        drths_adaptive_report_print(f, adaptive);
        fprintf(f, "\nReal time (actuator site)\n");
        fprintf(f, "%-22s %9s %11s %11s %11s %11s %11s\n", "", "n", "min", "p50", "p99", "p99.9",
                "max");
        print_stats_row(f, "tick lateness (us)", &link->wake_late_us, 1.0);
    }
}

/* A figure in the drive table: "-" when unknown, else value * scale. */
static void drive_cell(char *buf, size_t cap, double v, double scale, int known)
{
    if (!known)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.3f", v * scale);
}

static void print_drive(FILE *f, const drths_drive_stats_t *d, const char *limits_source)
{
    fprintf(f, "\nDrive (physical.csv: drive_m against command_m)\n");
    fprintf(f, "  envelope   %s\n",
            d->has_limits ? (limits_source ? limits_source : "given")
                          : "unknown (no experiment file): not judged");
    fprintf(f, "%-16s %10s %10s %10s %13s %10s %10s\n", "", "step", "|u| max", "velocity",
            "acceleration", "offset", "used");
    fprintf(f, "%-16s %10s %10s %10s %13s %10s %10s\n", "", "(mm)", "(mm)", "(m/s)", "(m/s^2)",
            "(mm)", "(fraction)");
    for (int i = 0; i < d->channels; i++) {
        const drths_drive_channel_t *c = &d->ch[i];
        int e = c->has_limits;
        char st[24], ab[24], ve[24], ac[24], of[24], us[24], label[64];
        drive_cell(st, sizeof st, c->max_drive_step_m, 1e3, c->steps > 0);
        drive_cell(ab, sizeof ab, c->max_abs_m, 1e3, e);
        drive_cell(ve, sizeof ve, c->max_velocity_m_s, 1.0, e);
        drive_cell(ac, sizeof ac, c->max_acceleration_m_s2, 1.0, e);
        drive_cell(of, sizeof of, c->max_offset_m, 1e3, e);
        drive_cell(us, sizeof us, c->max_use, 1.0, e && c->use_bound != DRTHS_DRIVE_BOUND_NONE);
        snprintf(label, sizeof label, "%.9s drive", c->name);
        fprintf(f, "%-16s %10s %10s %10s %13s %10s %10s\n", label, st, ab, ve, ac, of, us);
        drive_cell(st, sizeof st, c->max_cmd_step_m, 1e3, c->steps > 0);
        fprintf(f, "%-16s %10s\n", "  command", st);
        if (e) {
            drive_cell(ab, sizeof ab, c->lim.position_m, 1e3, 1);
            drive_cell(ve, sizeof ve, c->lim.velocity_m_s, 1.0, 1);
            drive_cell(ac, sizeof ac, c->lim.acceleration_m_s2, 1.0, 1);
            drive_cell(of, sizeof of, c->lim.offset_m, 1e3, 1);
            fprintf(f, "%-16s %10s %10s %10s %13s %10s %10.3f\n", "  envelope", "", ab, ve, ac, of,
                    1.0);
        }
        if (c->steps > 0)
            fprintf(f, "  step ratio %.3f: drive step at tick %ld, command step at tick %ld\n",
                    c->step_ratio, c->drive_step_tick, c->cmd_step_tick);
        if (e && c->outside > 0)
            fprintf(f, "  OUTSIDE the envelope at %ld ticks, the first at tick %ld (%s)\n",
                    c->outside, c->first_outside_tick, bound_word(c->first_outside_bound));
    }
}

void drths_report_print(FILE *f, const drths_report_t *r)
{
    const drths_fidelity_t *fid = r->fid;
    const drths_link_stats_t *link = r->link;
    fprintf(f, "drths report\n");
    fprintf(f, "  run        %s\n", r->run ? r->run : "-");
    if (r->ref)
        fprintf(f, "  reference  %s\n", r->ref);
    if (fid) {
        fprintf(f, "  compared   %ld steps of %.6g ms (%.3f s) that both records have, steps "
                   "%ld..%ld\n",
                fid->rows, fid->dt_s * 1e3, (double)fid->rows * fid->dt_s, fid->first_step,
                fid->last_step);
        fprintf(f, "  rows       hybrid %ld, reference %ld\n", fid->hyb_rows, fid->ref_rows);
    }
    if (r->gaps && r->ngaps > 0)
        print_gaps(f, r->gaps, r->ngaps);
    if (fid) {
        fprintf(f, "\nFidelity against the reference (errors in %% of the reference)\n");
        print_fidelity_table(f, fid, 1);
        print_fidelity_table(f, fid, 0);
        if (fid->has_damper_force) {
            const drths_series_error_t *d = &fid->damper_force;
            fprintf(f, "damper force: peak hyb %.3f kN, peak ref %.3f kN\n"
                       "  peak err %.3f %%, max err %.3f %%, RMS err %.3f %%\n",
                    d->peak_hyb * 1e-3, d->peak_ref * 1e-3, pct(d->peak_err), pct(d->max_err),
                    pct(d->rms_err));
        }
    }
    if (link)
        print_link(f, link, r->adaptive);
    if (r->sites)
        drths_site_links_print(f, r->sites);
    if (r->drive && r->drive->has_drive)
        print_drive(f, r->drive, r->limits_source);
    if (r->verdict)
        print_verdict(f, r->verdict, r->acceptance_source);
    print_figures(f);
}

/* ---- JSON -------------------------------------------------------------------------------- */

static void json_stats(drths_json_t *j, const char *key, const drths_stats_t *s)
{
    drths_json_object_begin(j, key);
    drths_json_int(j, "n", s->n);
    drths_json_number(j, "min", s->min);
    drths_json_number(j, "p50", s->p50);
    drths_json_number(j, "p99", s->p99);
    drths_json_number(j, "p99_9", s->p999);
    drths_json_number(j, "max", s->max);
    drths_json_object_end(j);
}

static void json_errors(drths_json_t *j, const char *what, const char *unit,
                        const drths_series_error_t *e)
{
    char key[64];
    snprintf(key, sizeof key, "%s_peak_hyb_%s", what, unit);
    drths_json_number(j, key, e->peak_hyb);
    snprintf(key, sizeof key, "%s_peak_ref_%s", what, unit);
    drths_json_number(j, key, e->peak_ref);
    snprintf(key, sizeof key, "%s_peak_err_pct", what);
    drths_json_number(j, key, pct(e->peak_err));
    snprintf(key, sizeof key, "%s_max_abs_err_%s", what, unit);
    drths_json_number(j, key, e->max_abs_err);
    snprintf(key, sizeof key, "%s_max_err_pct", what);
    drths_json_number(j, key, pct(e->max_err));
    snprintf(key, sizeof key, "%s_rms_err_pct", what);
    drths_json_number(j, key, pct(e->rms_err));
}

static void json_gaps(drths_json_t *j, const drths_gaps_t *gaps, int n)
{
    drths_json_array_begin(j, "records");
    for (int i = 0; i < n; i++) {
        const drths_gaps_t *g = &gaps[i];
        drths_json_object_begin(j, NULL);
        drths_json_string(j, "record", g->label ? g->label : "");
        drths_json_string(j, "key", g->key ? g->key : "");
        drths_json_int(j, "first", g->first);
        drths_json_int(j, "last", g->last);
        drths_json_int(j, "rows", g->rows);
        drths_json_int(j, "missing", g->missing);
        drths_json_int(j, "holes", g->holes);
        drths_json_array_begin(j, "listed_holes");
        long listed = g->holes < DRTHS_GAPS_LISTED ? g->holes : DRTHS_GAPS_LISTED;
        for (long h = 0; h < listed; h++) {
            drths_json_object_begin(j, NULL);
            drths_json_int(j, "first_missing", g->hole_first[h]);
            drths_json_int(j, "last_missing", g->hole_last[h]);
            drths_json_object_end(j);
        }
        drths_json_array_end(j);
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
}

static void json_verdict(drths_json_t *j, const drths_verdict_t *v, const char *source)
{
    drths_json_object_begin(j, "verdict");
    drths_json_string(j, "outcome", drths_outcome_name(v->outcome));
    drths_json_string(j, "acceptance", source ? source : "defaults");
    drths_json_int(j, "rows_missing", v->missing);
    drths_json_bool(j, "gaps_allowed", v->gaps_allowed);
    drths_json_array_begin(j, "criteria");
    for (int i = 0; i < v->n; i++) {
        const drths_criterion_t *c = &v->c[i];
        drths_json_object_begin(j, NULL);
        drths_json_string(j, "criterion", c->name);
        drths_json_string(j, "unit", c->unit);
        drths_json_number(j, "value", c->value);
        drths_json_number(j, "limit", c->limit);
        drths_json_string(j, "outcome", drths_outcome_name(c->outcome));
        if (c->note)
            drths_json_string(j, "note", c->note);
        if (c->where[0])
            drths_json_string(j, "where", c->where);
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
    drths_json_object_end(j);
}

void drths_drive_limits_json(drths_json_t *j, const drths_drive_limits_t *lim)
{
    drths_json_object_begin(j, "limits");
    drths_json_number(j, "drive_m", lim->position_m);
    drths_json_number(j, "velocity_m_s", lim->velocity_m_s);
    drths_json_number(j, "acceleration_m_s2", lim->acceleration_m_s2);
    drths_json_number(j, "offset_m", lim->offset_m);
    drths_json_object_end(j);
}

static void json_drive(drths_json_t *j, const drths_drive_stats_t *d, const char *source)
{
    drths_json_object_begin(j, "drive");
    drths_json_number(j, "tick_s", d->tick_s);
    drths_json_string(j, "envelope", d->has_limits ? (source ? source : "given") : "unknown");
    drths_json_array_begin(j, "channels");
    for (int i = 0; i < d->channels; i++) {
        const drths_drive_channel_t *c = &d->ch[i];
        drths_json_object_begin(j, NULL);
        drths_json_string(j, "name", c->name);
        drths_json_int(j, "ticks", c->ticks);
        drths_json_int(j, "commanded_ticks", c->commanded);
        drths_json_int(j, "steps", c->steps);
        drths_json_number(j, "max_drive_step_m", c->max_drive_step_m);
        drths_json_int(j, "drive_step_tick", c->drive_step_tick);
        drths_json_number(j, "max_command_step_m", c->max_cmd_step_m);
        drths_json_int(j, "command_step_tick", c->cmd_step_tick);
        drths_json_number(j, "step_ratio", c->step_ratio);
        if (c->has_limits) {
            drths_json_object_begin(j, "envelope");
            drths_drive_limits_json(j, &c->lim);
            drths_json_number(j, "max_abs_m", c->max_abs_m);
            drths_json_number(j, "max_velocity_m_s", c->max_velocity_m_s);
            drths_json_number(j, "max_acceleration_m_s2", c->max_acceleration_m_s2);
            drths_json_number(j, "max_offset_m", c->max_offset_m);
            drths_json_number(j, "max_use", c->max_use);
            drths_json_string(j, "max_use_bound", drths_drive_bound_field(c->use_bound));
            drths_json_int(j, "max_use_tick", c->use_tick);
            drths_json_number(j, "max_use_value", c->use_value);
            drths_json_int(j, "outside_ticks", c->outside);
            if (c->outside > 0) {
                drths_json_int(j, "first_outside_tick", c->first_outside_tick);
                drths_json_string(j, "first_outside_bound",
                                  drths_drive_bound_field(c->first_outside_bound));
            }
            drths_json_object_end(j);
        }
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
    drths_json_object_end(j);
}

void drths_report_write_json(FILE *f, const drths_report_t *r)
{
    const drths_fidelity_t *fid = r->fid;
    const drths_link_stats_t *link = r->link;
    drths_json_t j;
    drths_json_init(&j, f);
    drths_json_object_begin(&j, NULL);
    drths_json_string(&j, "run", r->run ? r->run : "");
    if (r->ref)
        drths_json_string(&j, "reference", r->ref);
    if (r->gaps && r->ngaps > 0)
        json_gaps(&j, r->gaps, r->ngaps);
    if (r->verdict)
        json_verdict(&j, r->verdict, r->acceptance_source);
    if (fid) {
        drths_json_object_begin(&j, "fidelity");
        drths_json_int(&j, "rows", fid->rows);
        drths_json_int(&j, "first_step", fid->first_step);
        drths_json_int(&j, "last_step", fid->last_step);
        drths_json_int(&j, "hybrid_rows", fid->hyb_rows);
        drths_json_int(&j, "reference_rows", fid->ref_rows);
        drths_json_number(&j, "dt_s", fid->dt_s);
        drths_json_array_begin(&j, "floors");
        for (int i = 0; i < fid->floors; i++) {
            drths_json_object_begin(&j, NULL);
            drths_json_int(&j, "floor", i + 1);
            json_errors(&j, "disp", "m", &fid->disp[i]);
            json_errors(&j, "acc", "m_s2", &fid->acc[i]);
            drths_json_object_end(&j);
        }
        drths_json_array_end(&j);
        drths_json_object_begin(&j, "max");
        json_errors(&j, "disp", "m", &fid->disp_max);
        json_errors(&j, "acc", "m_s2", &fid->acc_max);
        drths_json_object_end(&j);
        if (fid->has_damper_force) {
            drths_json_object_begin(&j, "damper_force");
            json_errors(&j, "force", "N", &fid->damper_force);
            drths_json_object_end(&j);
        }
        drths_json_object_end(&j);
    }
    if (link && (link->has_numerical || link->has_physical)) {
        drths_json_object_begin(&j, "link");
        drths_json_number(&j, "tick_s", link->tick_s);
        if (link->has_numerical) {
            drths_json_int(&j, "steps", link->steps);
            json_stats(&j, "rtt_ms", &link->rtt_ms);
            json_stats(&j, "rtt_ticks", &link->rtt_ticks);
            json_stats(&j, "loop_delay_ticks", &link->loop_delay_ticks);
            drths_json_int(&j, "fb_concealed", link->fb_concealed);
            drths_json_number(&j, "fb_concealed_pct", pct(link->fb_concealed_frac));
        }
        if (link->has_physical) {
            drths_json_int(&j, "ticks", link->ticks);
            json_stats(&j, "cmd_lead_ms", &link->cmd_lead_ms);
            drths_json_int(&j, "cmd_concealed", link->cmd_concealed);
            drths_json_number(&j, "cmd_concealed_pct", pct(link->cmd_concealed_frac));
            drths_json_int(&j, "hold_ticks", link->hold_ticks);
            drths_json_number(&j, "hold_pct", pct(link->hold_frac));
        }
        drths_json_object_end(&j);
        if (link->has_physical) {
            drths_json_object_begin(&j, "tracking");
            drths_json_number(&j, "rms_err_pct", pct(link->tracking_rms_err));
            drths_json_number(&j, "peak_m", link->tracking_peak_m);
            drths_adaptive_report_json(&j, r->adaptive);
            drths_json_object_end(&j);
            drths_json_object_begin(&j, "realtime");
            json_stats(&j, "wake_late_us", &link->wake_late_us);
            drths_json_object_end(&j);
        }
    }
    if (r->sites)
        drths_site_links_json(&j, r->sites);
    if (r->drive && r->drive->has_drive)
        json_drive(&j, r->drive, r->limits_source);
    drths_json_object_end(&j);
}
