#include "common/platform/adaptreport.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- summary.json: a walk that keeps the figures under tracking.adaptive ------------------ */

#define PATH_MAX_LEN 128
/* Nesting deeper than any summary the sites write is refused rather than recursed into. */
#define DEPTH_MAX 32

/* The figures of one factor, as found; a bit per figure in seen. */
enum { F_MIN, F_MAX, F_FINAL, F_TICKS, F_FRACTION, F_COUNT };
static const char *const figure_name[F_COUNT] = {"min", "max", "final", "at_bound_ticks",
                                                 "at_bound_fraction"};

typedef struct walk {
    const char *p, *end, *start;
    const char *bad; /* what was wrong, or NULL */
    drths_adaptive_report_t *out;
    unsigned seen[DRTHS_ADAPTIVE_FACTORS];
} walk_t;

static void ws(walk_t *w)
{
    while (w->p < w->end && (*w->p == ' ' || *w->p == '\n' || *w->p == '\r' || *w->p == '\t'))
        w->p++;
}

/* A string into out (cap bytes, truncated; escapes kept as written). */
static void string(walk_t *w, char *out, size_t cap)
{
    size_t k = 0;
    if (w->p >= w->end || *w->p != '"') {
        w->bad = "a string expected";
        return;
    }
    for (w->p++; w->p < w->end && *w->p != '"'; w->p++) {
        if (*w->p == '\\' && w->p + 1 < w->end)
            w->p++;
        if (k + 1 < cap)
            out[k++] = *w->p;
    }
    out[k] = '\0';
    if (w->p >= w->end)
        w->bad = "a string not closed";
    else
        w->p++;
}

/* What a scalar at path means: the factor (0..3) and figure, or -1 when it is none of ours. */
static int figure_at(const char *path, int *figure)
{
    static const char prefix[] = "tracking.adaptive.theta";
    if (strncmp(path, prefix, sizeof prefix - 1) != 0)
        return -1;
    const char *s = path + sizeof prefix - 1;
    if (s[0] < '0' || s[0] > '3' || s[1] != '.')
        return -1;
    for (int i = 0; i < F_COUNT; i++)
        if (strcmp(s + 2, figure_name[i]) == 0) {
            *figure = i;
            return s[0] - '0';
        }
    return -1;
}

static void number(walk_t *w, const char *path)
{
    char buf[64];
    size_t n = 0;
    while (w->p + n < w->end && n + 1 < sizeof buf && strchr("+-0123456789.eE", w->p[n]))
        n++;
    memcpy(buf, w->p, n);
    buf[n] = '\0';
    char *e = NULL;
    double v = strtod(buf, &e);
    if (n == 0 || *e != '\0') {
        w->bad = "a value expected";
        return;
    }
    w->p += n;
    int fig;
    int k = figure_at(path, &fig);
    if (strcmp(path, "tracking.adaptive.observed_ticks") == 0)
        w->out->observed_ticks = (long)v;
    if (k < 0)
        return;
    drths_adaptive_factor_t *f = &w->out->f[k];
    double *dst[F_COUNT] = {&f->lower, &f->upper, &f->final, NULL, &f->at_bound_fraction};
    if (fig == F_TICKS)
        f->at_bound_ticks = (long)v;
    else
        *dst[fig] = v;
    w->seen[k] |= 1u << fig;
}

static void value(walk_t *w, const char *path, int depth);

/* The members of an object (close '}') or the elements of an array (close ']'). */
static void container(walk_t *w, const char *path, int depth, char close)
{
    w->p++;
    ws(w);
    if (w->p < w->end && *w->p == close) {
        w->p++;
        return;
    }
    if (strcmp(path, "tracking.adaptive") == 0 && close == '}')
        w->out->present = 1;
    for (;;) {
        char sub[PATH_MAX_LEN] = "";
        ws(w);
        if (close == '}') {
            char key[64];
            string(w, key, sizeof key);
            ws(w);
            if (w->bad || w->p >= w->end || *w->p != ':') {
                w->bad = w->bad ? w->bad : "':' expected";
                return;
            }
            w->p++;
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
        }
        value(w, sub, depth + 1);
        if (w->bad)
            return;
        ws(w);
        if (w->p < w->end && *w->p == ',') {
            w->p++;
            continue;
        }
        if (w->p < w->end && *w->p == close) {
            w->p++;
            return;
        }
        w->bad = close == '}' ? "',' or '}' expected" : "',' or ']' expected";
        return;
    }
}

static void value(walk_t *w, const char *path, int depth)
{
    ws(w);
    if (depth > DEPTH_MAX) {
        w->bad = "nested too deeply";
        return;
    }
    if (w->p >= w->end) {
        w->bad = "the text ends early";
        return;
    }
    char c = *w->p;
    if (c == '{' || c == '[') {
        container(w, path, depth, c == '{' ? '}' : ']');
    } else if (c == '"') {
        char s[64];
        string(w, s, sizeof s);
        if (strcmp(path, "tracking.adaptive.bounds_from") == 0)
            snprintf(w->out->bounds_from, sizeof w->out->bounds_from, "%.31s", s);
    } else if (w->end - w->p >= 4 && (!strncmp(w->p, "true", 4) || !strncmp(w->p, "null", 4))) {
        /* A null figure (NaN when written) counts as missing. */
        w->p += 4;
    } else if (w->end - w->p >= 5 && !strncmp(w->p, "false", 5)) {
        w->p += 5;
    } else {
        number(w, path);
    }
}

int drths_adaptive_report_read_summary(drths_adaptive_report_t *out, const char *text, size_t len,
                                       const char *path, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    for (int k = 0; k < DRTHS_ADAPTIVE_FACTORS; k++)
        out->f[k].run_min = out->f[k].run_max = NAN;
    walk_t w = {.p = text, .end = text + len, .start = text, .out = out};
    value(&w, "", 0);
    ws(&w);
    if (!w.bad && w.p != w.end)
        w.bad = "bytes after the JSON value";
    if (w.bad) {
        const char *what = w.bad;
        long at = (long)(w.p - w.start);
        memset(out, 0, sizeof *out);
        return drths_error_set(err, -EINVAL, "%s: not JSON at byte %ld: %s", path, at, what);
    }
    if (!out->present)
        return 0;
    for (int k = 0; k < DRTHS_ADAPTIVE_FACTORS; k++) {
        drths_adaptive_factor_t *f = &out->f[k];
        for (int i = 0; i < F_COUNT; i++)
            if (!(w.seen[k] & (1u << i))) {
                out->present = 0;
                return drths_error_set(err, -EINVAL,
                                       "%s: tracking.adaptive.theta%d has no number %s", path, k,
                                       figure_name[i]);
            }
        const char *wrong = NULL;
        if (!(f->lower > 0.0 && f->lower <= f->upper))
            wrong = "min and max are not bounds (0 < min <= max)";
        else if (!(f->at_bound_fraction >= 0.0 && f->at_bound_fraction <= 1.0))
            wrong = "at_bound_fraction is not between 0 and 1";
        else if (f->at_bound_ticks < 0)
            wrong = "at_bound_ticks is negative";
        if (wrong) {
            out->present = 0;
            return drths_error_set(err, -EINVAL, "%s: tracking.adaptive.theta%d: %s", path, k,
                                   wrong);
        }
        f->flagged = f->at_bound_fraction > DRTHS_ADAPTIVE_AT_BOUND_FLAG;
        out->flagged += f->flagged;
    }
    if (!out->bounds_from[0])
        snprintf(out->bounds_from, sizeof out->bounds_from, "adaptive_range");
    return 0;
}

void drths_adaptive_report_add_record(drths_adaptive_report_t *r, const drths_csv_table_t *phys)
{
    for (int k = 0; k < DRTHS_ADAPTIVE_FACTORS; k++) {
        char name[32];
        snprintf(name, sizeof name, "adaptive_theta%d", k);
        const double *v = drths_csv_column(phys, name);
        drths_adaptive_factor_t *f = &r->f[k];
        f->run_min = f->run_max = NAN;
        for (long i = 0; v && i < phys->rows; i++) {
            if (isnan(v[i]))
                continue;
            if (isnan(f->run_min) || v[i] < f->run_min)
                f->run_min = v[i];
            if (isnan(f->run_max) || v[i] > f->run_max)
                f->run_max = v[i];
        }
    }
}

/* ---- text and JSON ------------------------------------------------------------------------ */

static void cell(char *buf, size_t cap, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.4g", v);
}

/* Which setting the bounds came from, as the experiment file names it. */
static const char *setting(const drths_adaptive_report_t *r)
{
    return strcmp(r->bounds_from, "adaptive_bound") == 0 ? "actuator.adaptive_bound"
                                                         : "actuator.adaptive_range";
}

void drths_adaptive_report_print(FILE *f, const drths_adaptive_report_t *r)
{
    if (!r || !r->present)
        return;
    fprintf(f, "adaptive factors (bounds from %s; run range from physical.csv)\n", setting(r));
    fprintf(f, "  %-7s %10s %10s %10s %10s %10s %10s\n", "", "run min", "run max", "final", "lower",
            "upper", "at bound");
    for (int k = 0; k < DRTHS_ADAPTIVE_FACTORS; k++) {
        const drths_adaptive_factor_t *a = &r->f[k];
        char mn[24], mx[24], fi[24], lo[24], hi[24], name[16];
        cell(mn, sizeof mn, a->run_min);
        cell(mx, sizeof mx, a->run_max);
        cell(fi, sizeof fi, a->final);
        cell(lo, sizeof lo, a->lower);
        cell(hi, sizeof hi, a->upper);
        snprintf(name, sizeof name, "theta%d", k);
        fprintf(f, "  %-7s %10s %10s %10s %10s %10s %8.2f %%%s\n", name, mn, mx, fi, lo, hi,
                a->at_bound_fraction * 100.0, a->flagged ? "  AT BOUND" : "");
    }
    for (int k = 0; k < DRTHS_ADAPTIVE_FACTORS; k++) {
        const drths_adaptive_factor_t *a = &r->f[k];
        if (a->flagged)
            fprintf(f,
                    "  AT BOUND: theta%d sat at a bound on %.2f %% of the run (%ld of %ld ticks, "
                    "more than %.0f %%).\n",
                    k, a->at_bound_fraction * 100.0, a->at_bound_ticks, r->observed_ticks,
                    DRTHS_ADAPTIVE_AT_BOUND_FLAG * 100.0);
    }
    /* What it means once, however many factors are at a bound. */
    if (r->flagged)
        fprintf(f,
                "    The compensator could not follow the actuator: the plant is outside %s.\n"
                "    Widen %s, or check the actuator (gain, servo-valve, hydraulics).\n",
                setting(r), setting(r));
}

void drths_adaptive_report_json(drths_json_t *j, const drths_adaptive_report_t *r)
{
    if (!r || !r->present)
        return;
    drths_json_object_begin(j, "adaptive");
    drths_json_string(j, "bounds_from", r->bounds_from);
    drths_json_int(j, "observed_ticks", r->observed_ticks);
    drths_json_number(j, "flag_above_fraction", DRTHS_ADAPTIVE_AT_BOUND_FLAG);
    drths_json_array_begin(j, "factors");
    for (int k = 0; k < DRTHS_ADAPTIVE_FACTORS; k++) {
        const drths_adaptive_factor_t *a = &r->f[k];
        char name[16];
        snprintf(name, sizeof name, "theta%d", k);
        drths_json_object_begin(j, NULL);
        drths_json_string(j, "factor", name);
        drths_json_number(j, "run_min", a->run_min);
        drths_json_number(j, "run_max", a->run_max);
        drths_json_number(j, "final", a->final);
        drths_json_number(j, "lower", a->lower);
        drths_json_number(j, "upper", a->upper);
        drths_json_int(j, "at_bound_ticks", a->at_bound_ticks);
        drths_json_number(j, "at_bound_fraction", a->at_bound_fraction);
        drths_json_bool(j, "at_bound", a->flagged);
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
    drths_json_array_begin(j, "warnings");
    for (int k = 0; k < DRTHS_ADAPTIVE_FACTORS; k++) {
        const drths_adaptive_factor_t *a = &r->f[k];
        if (!a->flagged)
            continue;
        char msg[320];
        snprintf(msg, sizeof msg,
                 "theta%d sat at a bound on %.2f %% of the run: the plant is outside %s; widen it "
                 "or check the actuator",
                 k, a->at_bound_fraction * 100.0, setting(r));
        drths_json_string(j, NULL, msg);
    }
    drths_json_array_end(j);
    drths_json_object_end(j);
}
