#include "platform/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "platform/json.h"

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

void drths_series_error_compute(const double *h, const double *r, long n,
                                drths_series_error_t *out)
{
    double peak_h = 0.0, peak_r = 0.0, sum_d2 = 0.0, sum_r2 = 0.0;
    int bad = 0;
    for (long i = 0; i < n; i++) {
        double hi = h[i], ri = r[i];
        if (isnan(hi) || isnan(ri)) {
            bad = 1;
            continue;
        }
        double ah = fabs(hi), ar = fabs(ri);
        if (ah > peak_h)
            peak_h = ah;
        if (ar > peak_r)
            peak_r = ar;
        sum_d2 += (hi - ri) * (hi - ri);
        sum_r2 += ri * ri;
    }
    out->peak_hyb = peak_h;
    out->peak_ref = peak_r;
    out->peak_err = bad ? NAN : ratio(fabs(peak_h - peak_r), peak_r);
    out->rms_err = bad ? NAN : ratio(sqrt(sum_d2), sqrt(sum_r2));
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
    acc->rms_err = max_nan(acc->rms_err, e->rms_err);
}

static const double *need(const drths_csv_table_t *t, const char *name, drths_error_t *err)
{
    const double *c = drths_csv_column(t, name);
    if (!c)
        drths_error_set(err, -EINVAL, "%s: no column %s", t->path, name);
    return c;
}

static int count_floors(const drths_csv_table_t *t)
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

/* The step of a record, from its first two times. */
static int record_dt(const drths_csv_table_t *t, const double *time, double *dt,
                     drths_error_t *err)
{
    if (t->rows < 2)
        return drths_error_set(err, -EINVAL, "%s: %ld rows; at least 2 are needed", t->path,
                               t->rows);
    *dt = time[1] - time[0];
    if (!(*dt > 0.0))
        return drths_error_set(err, -EINVAL, "%s:3: time_s does not increase (%g then %g)",
                               t->path, time[0], time[1]);
    return 0;
}

int drths_fidelity_compute(const drths_csv_table_t *hyb, const drths_csv_table_t *ref,
                           drths_fidelity_t *out, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    const double *th = need(hyb, "time_s", err);
    if (!th)
        return -EINVAL;
    const double *tr = need(ref, "time_s", err);
    if (!tr)
        return -EINVAL;
    double dth, dtr;
    int rc = record_dt(hyb, th, &dth, err);
    if (rc)
        return rc;
    rc = record_dt(ref, tr, &dtr, err);
    if (rc)
        return rc;
    /* Times are written with 9 significant digits, so equal steps agree to far better than
     * 1e-6 relative; anything more is a different experiment. */
    if (fabs(dth - dtr) > 1e-6 * dtr)
        return drths_error_set(err, -EINVAL,
                               "time steps differ: %s has dt %.9g s, %s has dt %.9g s",
                               hyb->path, dth, ref->path, dtr);
    if (fabs(th[0] - tr[0]) > 0.5 * dtr)
        return drths_error_set(err, -EINVAL,
                               "start times differ: %s starts at %.9g s, %s at %.9g s",
                               hyb->path, th[0], ref->path, tr[0]);
    int fh = count_floors(hyb), fr = count_floors(ref);
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
    out->hyb_rows = hyb->rows;
    out->ref_rows = ref->rows;
    out->rows = hyb->rows < ref->rows ? hyb->rows : ref->rows;
    out->dt_s = dtr;
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
        drths_series_error_compute(xh, xr, out->rows, &out->disp[i]);
        drths_series_error_compute(ah, ar, out->rows, &out->acc[i]);
        error_max(&out->disp_max, &out->disp[i], i == 0);
        error_max(&out->acc_max, &out->acc[i], i == 0);
    }
    const double *fh_n = drths_csv_column(hyb, "damper_force_N");
    const double *fr_n = drths_csv_column(ref, "damper_force_N");
    if (fh_n && fr_n) {
        out->has_damper_force = 1;
        drths_series_error_compute(fh_n, fr_n, out->rows, &out->damper_force);
    }
    return 0;
}

/* ---- order statistics -------------------------------------------------------------------- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest rank ceil(p n), 1-based; the small slack keeps 0.999 * 1000 at rank 999. */
static double percentile(const double *sorted, long n, double p)
{
    long rank = (long)ceil(p * (double)n - 1e-9);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

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
        qsort(s, (size_t)m, sizeof *s, compare_double);
        out->n = m;
        out->min = s[0];
        out->p50 = percentile(s, m, 0.5);
        out->p99 = percentile(s, m, 0.99);
        out->p999 = percentile(s, m, 0.999);
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
    const double *conc = need(num, "fb_concealed", err);
    const double *rtt = need(num, "rtt_ms", err);
    const double *ld = need(num, "loop_delay_ticks", err);
    if (!conc || !rtt || !ld)
        return -EINVAL;
    out->has_numerical = 1;
    out->steps = num->rows;
    out->fb_concealed = count_set(conc, num->rows);
    out->fb_concealed_frac = frac(out->fb_concealed, num->rows);
    if (drths_stats_compute(rtt, num->rows, &out->rtt_ms) ||
        drths_stats_compute(ld, num->rows, &out->loop_delay_ticks))
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
    for (int k = 0; k < 2 && isnan(out->tick_s); k++) {
        const double *t = sources[k] ? drths_csv_column(sources[k], "time_s") : NULL;
        if (t && sources[k]->rows >= 2 && t[1] > t[0])
            out->tick_s = t[1] - t[0];
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

/* ---- the table --------------------------------------------------------------------------- */

static double pct(double f)
{
    return f * 100.0;
}

static void print_stats_row(FILE *f, const char *label, const drths_stats_t *s, double scale)
{
    if (s->n == 0) {
        fprintf(f, "%-22s %9d %11s %11s %11s %11s %11s\n", label, 0, "-", "-", "-", "-", "-");
        return;
    }
    fprintf(f, "%-22s %9ld %11.3f %11.3f %11.3f %11.3f %11.3f\n", label, s->n, s->min * scale,
            s->p50 * scale, s->p99 * scale, s->p999 * scale, s->max * scale);
}

static void print_fidelity_row(FILE *f, const char *label, const drths_series_error_t *x,
                               const drths_series_error_t *a)
{
    fprintf(f, "%5s %10.3f %10.3f %10.3f %10.3f   %10.3f %10.3f %10.3f %10.3f\n", label,
            x->peak_hyb * 1e3, x->peak_ref * 1e3, pct(x->peak_err), pct(x->rms_err), a->peak_hyb,
            a->peak_ref, pct(a->peak_err), pct(a->rms_err));
}

void drths_report_print(FILE *f, const char *run, const char *ref, const drths_fidelity_t *fid,
                        const drths_link_stats_t *link)
{
    fprintf(f, "drths report\n");
    fprintf(f, "  run        %s\n", run ? run : "-");
    if (ref)
        fprintf(f, "  reference  %s\n", ref);
    if (fid) {
        fprintf(f, "  compared   %ld steps of %.6g ms (%.3f s); hybrid %ld rows, reference %ld rows\n",
                fid->rows, fid->dt_s * 1e3, (double)fid->rows * fid->dt_s, fid->hyb_rows,
                fid->ref_rows);
        fprintf(f, "\nFidelity against the reference (errors in %% of the reference)\n");
        fprintf(f, "      ------ displacement rel. ground -------   "
                   "-------- absolute acceleration --------\n");
        fprintf(f, "floor   peak hyb   peak ref   peak err    RMS err     "
                   "peak hyb   peak ref   peak err    RMS err\n");
        fprintf(f, "            (mm)       (mm)        (%%)        (%%)      "
                   "(m/s^2)    (m/s^2)        (%%)        (%%)\n");
        for (int i = 0; i < fid->floors; i++) {
            char label[16];
            snprintf(label, sizeof label, "%d", i + 1);
            print_fidelity_row(f, label, &fid->disp[i], &fid->acc[i]);
        }
        print_fidelity_row(f, "max", &fid->disp_max, &fid->acc_max);
        if (fid->has_damper_force) {
            const drths_series_error_t *d = &fid->damper_force;
            fprintf(f, "damper force: peak hyb %.3f kN, peak ref %.3f kN, peak err %.3f %%, "
                       "RMS err %.3f %%\n",
                    d->peak_hyb * 1e-3, d->peak_ref * 1e-3, pct(d->peak_err), pct(d->rms_err));
        }
    }
    if (!link)
        return;
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
        fprintf(f, "\nReal time (actuator site)\n");
        fprintf(f, "%-22s %9s %11s %11s %11s %11s %11s\n", "", "n", "min", "p50", "p99", "p99.9",
                "max");
        print_stats_row(f, "tick lateness (us)", &link->wake_late_us, 1.0);
    }
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
    snprintf(key, sizeof key, "%s_rms_err_pct", what);
    drths_json_number(j, key, pct(e->rms_err));
}

void drths_report_write_json(FILE *f, const char *run, const char *ref,
                             const drths_fidelity_t *fid, const drths_link_stats_t *link)
{
    drths_json_t j;
    drths_json_init(&j, f);
    drths_json_object_begin(&j, NULL);
    drths_json_string(&j, "run", run ? run : "");
    if (ref)
        drths_json_string(&j, "reference", ref);
    if (fid) {
        drths_json_object_begin(&j, "fidelity");
        drths_json_int(&j, "rows", fid->rows);
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
            drths_json_object_end(&j);
            drths_json_object_begin(&j, "realtime");
            json_stats(&j, "wake_late_us", &link->wake_late_us);
            drths_json_object_end(&j);
        }
    }
    drths_json_object_end(&j);
}
