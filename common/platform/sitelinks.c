#include "common/platform/sitelinks.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char CONCEALED[] = ".fb_concealed";

/* The site of a "<site>.fb_concealed" column name into out; 1, 0 when name is not one, -1
 * when the site's name does not fit. */
static int site_of(const char *name, char out[DRTHS_SITELINKS_NAME_MAX])
{
    size_t n = strlen(name), m = sizeof CONCEALED - 1;
    if (n <= m || strcmp(name + n - m, CONCEALED) != 0)
        return 0;
    if (n - m >= DRTHS_SITELINKS_NAME_MAX)
        return -1;
    memcpy(out, name, n - m);
    out[n - m] = '\0';
    return 1;
}

static void concealed_runs(const double *v, long n, drths_site_link_t *s)
{
    long run = 0;
    for (long i = 0; i < n; i++) {
        int c = v[i] > 0.5;
        s->fb_concealed += c;
        run = c ? run + 1 : 0;
        if (run > s->max_consecutive_concealed)
            s->max_consecutive_concealed = run;
    }
}

int drths_site_links_compute(const drths_csv_table_t *num, drths_site_links_t *out,
                             drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->L = -1;
    for (int c = 0; c < num->ncols; c++) {
        char site[DRTHS_SITELINKS_NAME_MAX];
        int is = site_of(num->names[c], site);
        if (is < 0)
            return drths_error_set(err, -EINVAL,
                                   "%s: column %s: the site's name is longer than "
                                   "%d bytes",
                                   num->path, num->names[c], DRTHS_SITELINKS_NAME_MAX - 1);
        if (is == 0)
            continue;
        if (out->n == DRTHS_SITELINKS_MAX)
            return drths_error_set(err, -EINVAL, "%s: more than %d sites' columns (%s)", num->path,
                                   DRTHS_SITELINKS_MAX, num->names[c]);
        drths_site_link_t *s = &out->s[out->n++];
        memcpy(s->site, site, sizeof s->site);
        s->steps = num->rows;
        s->L_needed = -1;
        s->feedback_wait_ms = NAN;
        concealed_runs(num->cols[c], num->rows, s);
        s->fb_concealed_frac = num->rows > 0 ? (double)s->fb_concealed / (double)num->rows : NAN;
        char rtt[DRTHS_SITELINKS_NAME_MAX + 8];
        snprintf(rtt, sizeof rtt, "%s.rtt_ms", site);
        const double *r = drths_csv_column(num, rtt);
        s->has_rtt = r != NULL;
        if (drths_stats_compute(r, r ? num->rows : 0, &s->rtt_ms) != 0)
            return drths_error_set(err, -ENOMEM, "%s: out of memory", num->path);
    }
    return 0;
}

/* ---- summary.json: just what the table needs, read by a tolerant scanner ------------------ */

typedef struct scan {
    const char *p, *end;
    int bad;
} scan_t;

static void ws(scan_t *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

static int peek(scan_t *s)
{
    ws(s);
    return s->p < s->end ? (unsigned char)*s->p : -1;
}

/* A string into out (cap bytes, truncated; escapes kept as written), or skipped when out is
 * NULL. */
static void string(scan_t *s, char *out, size_t cap)
{
    size_t k = 0;
    if (peek(s) != '"') {
        s->bad = 1;
        return;
    }
    for (s->p++; s->p < s->end && *s->p != '"'; s->p++) {
        if (*s->p == '\\' && s->p + 1 < s->end)
            s->p++;
        if (out && k + 1 < cap)
            out[k++] = *s->p;
    }
    if (out && cap)
        out[k] = '\0';
    if (s->p >= s->end)
        s->bad = 1;
    else
        s->p++;
}

static void value(scan_t *s);

/* An object or array, its members skipped. */
static void container(scan_t *s, char close)
{
    s->p++;
    if (peek(s) == close) {
        s->p++;
        return;
    }
    while (!s->bad) {
        if (close == '}') {
            string(s, NULL, 0);
            if (peek(s) != ':') {
                s->bad = 1;
                return;
            }
            s->p++;
        }
        value(s);
        int c = peek(s);
        s->p++;
        if (c == close)
            return;
        if (c != ',')
            s->bad = 1;
    }
}

static void value(scan_t *s)
{
    int c = peek(s);
    if (c == '"')
        string(s, NULL, 0);
    else if (c == '{')
        container(s, '}');
    else if (c == '[')
        container(s, ']');
    else if (c < 0)
        s->bad = 1;
    else
        while (s->p < s->end && !strchr(",}] \n\r\t", *s->p))
            s->p++;
}

/* A number, or NaN for null or anything else (skipped). */
static double number(scan_t *s)
{
    ws(s);
    char buf[64];
    const char *q = s->p;
    value(s);
    size_t n = (size_t)(s->p - q);
    if (n == 0 || n >= sizeof buf)
        return NAN;
    memcpy(buf, q, n);
    buf[n] = '\0';
    char *e;
    double v = strtod(buf, &e);
    return *e == '\0' ? v : NAN;
}

/* One links[] entry: its site, L_needed and feedback_wait_ms. */
static void link_entry(scan_t *s, char site[DRTHS_SITELINKS_NAME_MAX], double *L, double *wait)
{
    site[0] = '\0';
    *L = *wait = NAN;
    if (peek(s) != '{') {
        value(s);
        return;
    }
    s->p++;
    if (peek(s) == '}') {
        s->p++;
        return;
    }
    while (!s->bad) {
        char key[40];
        string(s, key, sizeof key);
        if (peek(s) != ':') {
            s->bad = 1;
            return;
        }
        s->p++;
        if (strcmp(key, "site") == 0 && peek(s) == '"')
            string(s, site, DRTHS_SITELINKS_NAME_MAX);
        else if (strcmp(key, "L_needed") == 0)
            *L = number(s);
        else if (strcmp(key, "feedback_wait_ms") == 0)
            *wait = number(s);
        else
            value(s);
        int c = peek(s);
        s->p++;
        if (c == '}')
            return;
        if (c != ',')
            s->bad = 1;
    }
}

static drths_site_link_t *find(drths_site_links_t *out, const char *site)
{
    for (int i = 0; i < out->n; i++)
        if (strcmp(out->s[i].site, site) == 0)
            return &out->s[i];
    return NULL;
}

int drths_site_links_read_summary(drths_site_links_t *out, const char *text, size_t len,
                                  const char *path, drths_error_t *err)
{
    scan_t s = {text, text + len, 0};
    out->summary_read = 0;
    if (peek(&s) != '{')
        return drths_error_set(err, -EINVAL, "%s: not a JSON object", path);
    s.p++;
    while (!s.bad && peek(&s) == '"') {
        char key[40];
        string(&s, key, sizeof key);
        if (peek(&s) != ':')
            break;
        s.p++;
        if (strcmp(key, "L") == 0) {
            double L = number(&s);
            out->L = isfinite(L) && L >= 0 && L < 1e9 ? (int)L : -1;
        } else if (strcmp(key, "links") == 0 && peek(&s) == '[') {
            out->summary_read = 1;
            s.p++;
            while (!s.bad && peek(&s) != ']') {
                char site[DRTHS_SITELINKS_NAME_MAX];
                double L, wait;
                link_entry(&s, site, &L, &wait);
                if (s.bad)
                    break;
                drths_site_link_t *l = find(out, site);
                if (!l)
                    return drths_error_set(err, -EINVAL,
                                           "%s: links names site \"%s\", which the record has "
                                           "no columns of (a summary of another run?)",
                                           path, site);
                l->L_needed = isfinite(L) && L >= 0 && L < 1e9 ? (int)L : -1;
                l->feedback_wait_ms = wait;
                if (peek(&s) == ',')
                    s.p++;
            }
            if (peek(&s) == ']')
                s.p++;
        } else {
            value(&s);
        }
        if (peek(&s) == ',')
            s.p++;
    }
    if (s.bad)
        return drths_error_set(err, -EINVAL, "%s: malformed JSON near byte %ld", path,
                               (long)(s.p - text));
    return 0;
}

/* ---- the table ----------------------------------------------------------------------------- */

static void cell_int(char *buf, size_t cap, long v)
{
    if (v < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%ld", v);
}

static void cell_ms(char *buf, size_t cap, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.3f", v);
}

void drths_site_links_print(FILE *f, const drths_site_links_t *s)
{
    if (s->n == 0)
        return;
    char L[24];
    cell_int(L, sizeof L, s->L);
    fprintf(f, "\nLinks (one per site; the run's L %s ticks, the largest any link needs)\n", L);
    fprintf(f, "%-16s %8s %9s %9s %9s %9s %13s %9s\n", "site", "L needed", "wait ms", "rtt p50",
            "rtt p99", "rtt max", "concealed", "longest");
    for (int i = 0; i < s->n; i++) {
        const drths_site_link_t *l = &s->s[i];
        char need[24], wait[24], p50[24], p99[24], max[24], conc[40];
        cell_int(need, sizeof need, l->L_needed);
        cell_ms(wait, sizeof wait, l->feedback_wait_ms);
        cell_ms(p50, sizeof p50, l->rtt_ms.p50);
        cell_ms(p99, sizeof p99, l->rtt_ms.p99);
        cell_ms(max, sizeof max, l->rtt_ms.max);
        snprintf(conc, sizeof conc, "%ld (%.2f%%)", l->fb_concealed,
                 isnan(l->fb_concealed_frac) ? 0.0 : l->fb_concealed_frac * 100.0);
        fprintf(f, "%-16s %8s %9s %9s %9s %9s %13s %9ld\n", l->site, need, wait, p50, p99, max,
                conc, l->max_consecutive_concealed);
    }
    if (!s->summary_read)
        fprintf(f, "(no links in summary.json: L needed and feedback wait unknown)\n");
}

void drths_site_links_json(drths_json_t *j, const drths_site_links_t *s)
{
    if (s->n == 0)
        return;
    drths_json_array_begin(j, "links");
    for (int i = 0; i < s->n; i++) {
        const drths_site_link_t *l = &s->s[i];
        drths_json_object_begin(j, NULL);
        drths_json_string(j, "site", l->site);
        drths_json_int(j, "steps", l->steps);
        if (l->L_needed >= 0)
            drths_json_int(j, "L_needed", l->L_needed);
        drths_json_number(j, "feedback_wait_ms", l->feedback_wait_ms);
        drths_json_object_begin(j, "rtt_ms");
        drths_json_int(j, "n", l->rtt_ms.n);
        drths_json_number(j, "min", l->rtt_ms.min);
        drths_json_number(j, "p50", l->rtt_ms.p50);
        drths_json_number(j, "p99", l->rtt_ms.p99);
        drths_json_number(j, "p999", l->rtt_ms.p999);
        drths_json_number(j, "max", l->rtt_ms.max);
        drths_json_object_end(j);
        drths_json_int(j, "fb_concealed", l->fb_concealed);
        drths_json_number(j, "fb_concealed_pct", l->fb_concealed_frac * 100.0);
        drths_json_int(j, "max_consecutive_concealed", l->max_consecutive_concealed);
        drths_json_object_end(j);
    }
    drths_json_array_end(j);
}
