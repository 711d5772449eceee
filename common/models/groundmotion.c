#include "common/models/groundmotion.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Records are a few MB at most; a file above this is not a record and is refused before it is
 * read into memory. */
#define MAX_FILE_BYTES (256L * 1024 * 1024)
#define MAX_COLS 64
/* Times in the files are printed with 4 to 6 decimals, exact multiples of dt at that precision,
 * so a step that differs from the first by more than this is a real irregularity. */
#define UNIFORM_TOL 1e-6
/* A resampling instant closer than this (in input steps) to an input sample takes that sample
 * exactly; floor(x) of a ratio computed in floating point could otherwise land just below. */
#define SNAP_TOL 1e-9
/* The largest recorded peak ground acceleration is about 4.4 g; a record above 10 g in its own
 * units has almost surely been given the wrong units (cm/s^2 read as g gives hundreds of g). */
#define PLAUSIBLE_PEAK_G 10.0

static const double TWO_PI = 6.283185307179586476925286766559;

typedef struct text {
    char *buf;
    char **line; /* nlines NUL-terminated lines inside buf, without their \r\n */
    size_t nlines;
} text_t;

/* What a parser found in the file, before units, scale and time compression. */
typedef struct series {
    double *v;
    long *lineno; /* the line each sample came from, for later messages */
    size_t n, cap;
    double dt;              /* from the file, 0 if the file gives none */
    long dt_line;           /* where dt came from */
    drths_gm_units_t units; /* stated by the file, DRTHS_GM_UNITS_FILE if not */
    char units_from[96];    /* how the file states them, for messages */
    long first_line;        /* first data line */
} series_t;

typedef struct tok {
    const char *p;
    size_t len;
} tok_t;

static const char *units_name(drths_gm_units_t u)
{
    switch (u) {
    case DRTHS_GM_UNITS_G:
        return "g";
    case DRTHS_GM_UNITS_M_S2:
        return "m/s^2";
    case DRTHS_GM_UNITS_CM_S2:
        return "cm/s^2";
    case DRTHS_GM_UNITS_MM_S2:
        return "mm/s^2";
    case DRTHS_GM_UNITS_FILE:
        break;
    }
    return "file";
}

static double units_factor(drths_gm_units_t u)
{
    switch (u) {
    case DRTHS_GM_UNITS_G:
        return DRTHS_G_M_S2;
    case DRTHS_GM_UNITS_CM_S2:
        return 0.01;
    case DRTHS_GM_UNITS_MM_S2:
        return 0.001;
    case DRTHS_GM_UNITS_M_S2:
    case DRTHS_GM_UNITS_FILE:
        break;
    }
    return 1.0;
}

void drths_gm_options_default(drths_gm_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->format = DRTHS_GM_AUTO;
    o->units = DRTHS_GM_UNITS_FILE;
    o->time_column = DRTHS_GM_TIME_AUTO;
    o->column = 1;
    o->scale = 1.0;
    o->time_compression = 1.0;
}

int drths_gm_format_parse(const char *name, drths_gm_format_t *out)
{
    static const struct {
        const char *name;
        drths_gm_format_t f;
    } names[] = {{"auto", DRTHS_GM_AUTO},
                 {"at2", DRTHS_GM_AT2},
                 {"two-column", DRTHS_GM_TWO_COLUMN},
                 {"text", DRTHS_GM_TWO_COLUMN},
                 {"csv", DRTHS_GM_CSV}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i].name) == 0) {
            *out = names[i].f;
            return 0;
        }
    return -EINVAL;
}

int drths_gm_units_parse(const char *name, drths_gm_units_t *out)
{
    static const struct {
        const char *name;
        drths_gm_units_t u;
    } names[] = {{"file", DRTHS_GM_UNITS_FILE},    {"g", DRTHS_GM_UNITS_G},
                 {"m/s^2", DRTHS_GM_UNITS_M_S2},   {"m_s2", DRTHS_GM_UNITS_M_S2},
                 {"cm/s^2", DRTHS_GM_UNITS_CM_S2}, {"cm_s2", DRTHS_GM_UNITS_CM_S2},
                 {"gal", DRTHS_GM_UNITS_CM_S2},    {"mm/s^2", DRTHS_GM_UNITS_MM_S2},
                 {"mm_s2", DRTHS_GM_UNITS_MM_S2}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i].name) == 0) {
            *out = names[i].u;
            return 0;
        }
    return -EINVAL;
}

/* ---- reading and splitting ------------------------------------------------------------- */

static void text_free(text_t *t)
{
    free(t->buf);
    free(t->line);
    memset(t, 0, sizeof *t);
}

static int text_read(text_t *t, const char *path, drths_error_t *err)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return drths_error_set(err, -e, "%s: cannot open: %s", path, strerror(e));
    }
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return drths_error_set(err, -EIO, "%s: cannot determine the file size", path);
    }
    if (size > MAX_FILE_BYTES) {
        fclose(f);
        return drths_error_set(err, -EFBIG, "%s: %ld bytes; a ground-motion record is far smaller",
                               path, size);
    }
    t->buf = malloc((size_t)size + 1);
    if (!t->buf) {
        fclose(f);
        return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    size_t got = fread(t->buf, 1, (size_t)size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != (size_t)size) {
        text_free(t);
        return drths_error_set(err, -EIO, "%s: read error", path);
    }
    t->buf[size] = '\0';
    if (memchr(t->buf, '\0', (size_t)size)) {
        text_free(t);
        return drths_error_set(err, -EINVAL, "%s: holds NUL bytes; not a text record", path);
    }
    size_t n = 1;
    for (long i = 0; i < size; i++)
        n += t->buf[i] == '\n';
    t->line = malloc(n * sizeof *t->line);
    if (!t->line) {
        text_free(t);
        return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    char *p = t->buf;
    for (;;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        size_t len = strlen(p);
        if (len > 0 && p[len - 1] == '\r')
            p[len - 1] = '\0';
        t->line[t->nlines++] = p;
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static const char *skip_space(const char *s)
{
    while (is_space(*s))
        s++;
    return s;
}

static int is_blank_line(const char *s)
{
    return *skip_space(s) == '\0';
}

static int is_comment_line(const char *s)
{
    s = skip_space(s);
    return *s == '%' || *s == '#' || *s == '!';
}

/* Parses one token as a decimal number: digits, sign, point and exponent only (Fortran's D
 * exponent is accepted), so that "nan", "inf" and hex floats are refused as in no record. */
static int parse_number(const char *p, size_t len, double *v)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    int digits = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (c >= '0' && c <= '9')
            digits++;
        else if (c == 'd' || c == 'D')
            c = 'e';
        else if (!(c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E'))
            return -1;
        buf[i] = c;
    }
    buf[len] = '\0';
    if (!digits)
        return -1;
    char *end;
    double x = strtod(buf, &end);
    if (end != buf + len || !isfinite(x))
        return -1;
    *v = x;
    return 0;
}

/* Splits s into tokens: blank separated, or comma separated with blanks trimmed (an empty field
 * is an empty token). Returns the count; stops counting tokens beyond max. */
static int split(const char *s, int csv, tok_t *tok, int max)
{
    int n = 0;
    if (!csv) {
        for (;;) {
            s = skip_space(s);
            if (!*s)
                return n;
            const char *b = s;
            while (*s && !is_space(*s))
                s++;
            if (n < max)
                tok[n] = (tok_t){b, (size_t)(s - b)};
            n++;
        }
    }
    for (;;) {
        s = skip_space(s);
        const char *b = s;
        while (*s && *s != ',')
            s++;
        const char *e = s;
        while (e > b && is_space(e[-1]))
            e--;
        if (n < max)
            tok[n] = (tok_t){b, (size_t)(e - b)};
        n++;
        if (!*s)
            return n;
        s++;
    }
}

/* A data row is a line of numbers only (at least one). */
static int is_data_row(const char *s, int csv)
{
    tok_t tok[MAX_COLS];
    int n = split(s, csv, tok, MAX_COLS);
    if (n < 1 || n > MAX_COLS)
        return 0;
    for (int i = 0; i < n; i++) {
        double v;
        if (parse_number(tok[i].p, tok[i].len, &v))
            return 0;
    }
    return 1;
}

static int series_push(series_t *s, double v, long lineno)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        double *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        s->v = nv;
        long *nl = realloc(s->lineno, cap * sizeof *nl);
        if (!nl)
            return -ENOMEM;
        s->lineno = nl;
        s->cap = cap;
    }
    s->v[s->n] = v;
    s->lineno[s->n] = lineno;
    s->n++;
    return 0;
}

static void series_free(series_t *s)
{
    free(s->v);
    free(s->lineno);
    s->v = NULL;
    s->lineno = NULL;
    s->n = s->cap = 0;
}

static int contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return 1;
    return 0;
}

static int contains_nocase_n(const char *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (strncasecmp(hay + i, needle, n) == 0)
            return 1;
    return 0;
}

/* The last line with content, for messages about the end of the file. */
static long last_content_line(const text_t *t)
{
    for (size_t i = t->nlines; i > 0; i--)
        if (!is_blank_line(t->line[i - 1]))
            return (long)i;
    return 1;
}

/* ---- PEER AT2 ------------------------------------------------------------------------------ */

static int parse_at2(const text_t *t, const char *path, series_t *s, drths_error_t *err)
{
    if (t->nlines < 4 || !contains_nocase(t->line[3], "NPTS"))
        return drths_error_set(err, -EINVAL,
                               "%s:4: no NPTS on line 4 (a PEER AT2 header has 4 lines, the "
                               "last like `NPTS=  4000, DT= .01000 SEC`)",
                               path);
    const char *l4 = t->line[3];
    const char *p = l4;
    while (strncasecmp(p, "NPTS", 4) != 0)
        p++;
    const char *q = skip_space(p + 4);
    char *end;
    long npts;
    double dt;
    if (*q == '=') {
        /* NGA style: NPTS=  4000, DT= .01000 SEC */
        npts = strtol(q + 1, &end, 10);
        if (end == q + 1)
            return drths_error_set(err, -EINVAL, "%s:4: NPTS= is not followed by a count", path);
        const char *d = end;
        while (*d && strncasecmp(d, "DT", 2) != 0)
            d++;
        d = *d ? skip_space(d + 2) : d;
        if (*d != '=')
            return drths_error_set(err, -EINVAL, "%s:4: no `DT=` after NPTS", path);
        dt = strtod(d + 1, &end);
        if (end == d + 1)
            return drths_error_set(err, -EINVAL, "%s:4: DT= is not followed by a number", path);
    } else {
        /* Older PEER style: 4000   .01000   NPTS, DT */
        npts = strtol(l4, &end, 10);
        const char *d = end;
        dt = strtod(d, &end);
        if (d == l4 || end == d)
            return drths_error_set(err, -EINVAL, "%s:4: cannot read the point count and time step",
                                   path);
    }
    if (npts < 1 || (unsigned long)npts > DRTHS_GM_MAX_SAMPLES)
        return drths_error_set(err, -EINVAL, "%s:4: NPTS = %ld is not a plausible count", path,
                               npts);
    if (!(dt > 0) || !isfinite(dt))
        return drths_error_set(err, -EINVAL, "%s:4: DT = %g s must be > 0", path, dt);
    s->dt = dt;
    s->dt_line = 4;
    s->units = DRTHS_GM_UNITS_G;
    snprintf(s->units_from, sizeof s->units_from, "PEER AT2 records are in g");
    for (size_t i = 0; i < 3; i++) {
        const char *h = t->line[i];
        if (contains_nocase(h, "VELOC") || contains_nocase(h, "DISPL"))
            return drths_error_set(err, -EINVAL,
                                   "%s:%zu: the header speaks of velocity or displacement; only "
                                   "acceleration records can drive the test",
                                   path, i + 1);
        if (contains_nocase(h, "CM/S")) {
            s->units = DRTHS_GM_UNITS_CM_S2;
            snprintf(s->units_from, sizeof s->units_from, "header line %zu says cm/s", i + 1);
        }
    }
    s->first_line = 5;
    for (size_t i = 4; i < t->nlines; i++) {
        const char *l = t->line[i];
        long lineno = (long)i + 1;
        for (;;) {
            l = skip_space(l);
            if (!*l)
                break;
            const char *b = l;
            while (*l && !is_space(*l))
                l++;
            double v;
            if (parse_number(b, (size_t)(l - b), &v))
                return drths_error_set(err, -EINVAL, "%s:%ld: not a number: \"%.*s\"", path, lineno,
                                       (int)((l - b) > 40 ? 40 : (l - b)), b);
            if (s->n == (size_t)npts)
                return drths_error_set(err, -EINVAL,
                                       "%s:%ld: more values than NPTS = %ld (line 4) announces",
                                       path, lineno, npts);
            if (series_push(s, v, lineno))
                return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
        }
    }
    if (s->n != (size_t)npts)
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: NPTS = %ld (line 4) but the file holds %zu values", path,
                               last_content_line(t), npts, s->n);
    return 0;
}

/* ---- column text and CSV ------------------------------------------------------------------- */

/* Units stated in a column name such as accel_m_s2, Accel[g] or "a (cm/s^2)". */
static drths_gm_units_t units_from_name(const char *name, size_t len)
{
    char s[80];
    if (len >= sizeof s)
        len = sizeof s - 1;
    for (size_t i = 0; i < len; i++)
        s[i] = (char)tolower((unsigned char)name[i]);
    s[len] = '\0';
    if (strstr(s, "cm/s") || strstr(s, "cm_s2") || strstr(s, "[gal]") || strstr(s, "(gal)") ||
        (len > 4 && strcmp(s + len - 4, "_gal") == 0))
        return DRTHS_GM_UNITS_CM_S2;
    if (strstr(s, "mm/s") || strstr(s, "mm_s2"))
        return DRTHS_GM_UNITS_MM_S2;
    if (strstr(s, "m/s") || strstr(s, "m_s2"))
        return DRTHS_GM_UNITS_M_S2;
    if (strcmp(s, "g") == 0 || strstr(s, "[g]") || strstr(s, "(g)") ||
        (len > 2 && strcmp(s + len - 2, "_g") == 0))
        return DRTHS_GM_UNITS_G;
    return DRTHS_GM_UNITS_FILE;
}

static int names_time(const tok_t *name)
{
    if (name->len >= 4 && strncasecmp(name->p, "time", 4) == 0)
        return 1;
    if (name->len >= 1 && (name->p[0] == 't' || name->p[0] == 'T'))
        return name->len == 1 || name->p[1] == '_' || name->p[1] == '[' || name->p[1] == '(' ||
               name->p[1] == ' ';
    return 0;
}

/* The index of the first data row, or t->nlines when there is none. */
static size_t first_data_row(const text_t *t, int csv)
{
    for (size_t i = 0; i < t->nlines; i++) {
        const char *l = t->line[i];
        if (is_blank_line(l) || is_comment_line(l))
            continue;
        if (is_data_row(l, csv))
            return i;
    }
    return t->nlines;
}

/* The names line: the nearest non-blank line above the data row `first`, if it names every one
 * of the ncols columns. Returns 1 with names[] and *line (1-based) filled, else 0. */
static int names_above(const text_t *t, size_t first, int csv, int ncols, tok_t *names, long *line)
{
    for (size_t i = first; i > 0; i--) {
        const char *l = skip_space(t->line[i - 1]);
        if (!*l)
            continue;
        while (*l == '%' || *l == '#' || *l == '!')
            l++;
        *line = (long)i;
        return split(l, csv, names, MAX_COLS) == ncols;
    }
    return 0;
}

/* Whether the first column is time. A first column named like time is time. So is a first column
 * that steps up evenly over its first three values, whatever a free-text line above says: a value
 * column cannot look like that, and taking times for accelerations would be the worst mistake. */
static int first_column_is_time(const text_t *t, size_t first, int csv, int ncols,
                                const tok_t *names, const drths_gm_options_t *o)
{
    if (o->time_column == DRTHS_GM_TIME_FIRST)
        return 1;
    if (o->time_column == DRTHS_GM_TIME_NONE)
        return 0;
    if (names && names_time(&names[0]))
        return 1;
    double c[3];
    int got = 0;
    for (size_t i = first; i < t->nlines && got < 3 && ncols >= 2; i++) {
        const char *l = t->line[i];
        if (is_blank_line(l) || is_comment_line(l))
            continue;
        tok_t tk[MAX_COLS];
        if (split(l, csv, tk, MAX_COLS) < 1 || parse_number(tk[0].p, tk[0].len, &c[got]))
            break;
        got++;
    }
    if (got < 3)
        return 0;
    double d1 = c[1] - c[0], d2 = c[2] - c[1];
    return d1 > 0 && fabs(d2 - d1) <= UNIFORM_TOL * d1;
}

/* What parse_columns learnt from the header and the first rows. */
typedef struct {
    int ncols;    /* fields per data row */
    int has_time; /* column 0 is time */
    int vc;       /* the value column read (0-based) */
} layout_t;

/* The time of a row: the first two set t0 and the step, later ones must keep the step. */
typedef struct {
    double t0, tprev, step0;
} time_check_t;

static int check_time(time_check_t *tc, size_t rows, double tk, const char *path, long lineno,
                      const drths_gm_options_t *o, drths_error_t *err)
{
    if (rows == 0) {
        tc->t0 = tk;
    } else if (rows == 1) {
        tc->step0 = tk - tc->t0;
        if (!(tc->step0 > 0))
            return drths_error_set(err, -EINVAL,
                                   "%s:%ld: time %g s does not increase from %g s "
                                   "(the first column is taken as time%s)",
                                   path, lineno, tk, tc->t0,
                                   o->time_column == DRTHS_GM_TIME_FIRST
                                       ? ""
                                       : ", as the line above the data names it");
    } else if (fabs((tk - tc->tprev) - tc->step0) > UNIFORM_TOL * tc->step0) {
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: time step %.9g s (from %.9g s) differs from the "
                               "first step %.9g s; times must be uniformly spaced "
                               "(within 1e-6 relative)",
                               path, lineno, tk - tc->tprev, tc->tprev, tc->step0);
    }
    tc->tprev = tk;
    return 0;
}

/* Every data row from `first` on: the value column into s, the times checked. */
static int read_rows(const text_t *t, size_t first, const char *path, int csv,
                     const drths_gm_options_t *o, const layout_t *lay, series_t *s,
                     drths_error_t *err)
{
    time_check_t tc = {0};
    size_t rows = 0;
    for (size_t i = first; i < t->nlines; i++) {
        const char *l = t->line[i];
        long lineno = (long)i + 1;
        if (is_blank_line(l) || is_comment_line(l))
            continue;
        tok_t tok[MAX_COLS];
        int n = split(l, csv, tok, MAX_COLS);
        if (n != lay->ncols)
            return drths_error_set(err, -EINVAL,
                                   "%s:%ld: %d fields, the first data row (line "
                                   "%ld) has %d",
                                   path, lineno, n, s->first_line, lay->ncols);
        double row[MAX_COLS];
        for (int c = 0; c < n; c++)
            if (parse_number(tok[c].p, tok[c].len, &row[c])) {
                if (tok[c].len == 0)
                    return drths_error_set(err, -EINVAL, "%s:%ld: field %d is empty", path, lineno,
                                           c + 1);
                return drths_error_set(err, -EINVAL, "%s:%ld: not a number: \"%.*s\"", path, lineno,
                                       (int)(tok[c].len > 40 ? 40 : tok[c].len), tok[c].p);
            }
        int r;
        if (lay->has_time && (r = check_time(&tc, rows, row[0], path, lineno, o, err)))
            return r;
        if (rows >= DRTHS_GM_MAX_SAMPLES)
            return drths_error_set(err, -EFBIG, "%s:%ld: more than %u samples", path, lineno,
                                   DRTHS_GM_MAX_SAMPLES);
        if (series_push(s, row[lay->vc], lineno))
            return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
        rows++;
    }
    if (lay->has_time && rows >= 2) {
        /* The mean step over the whole record averages out the printing precision of the times. */
        s->dt = (tc.tprev - tc.t0) / (double)(rows - 1);
        s->dt_line = s->first_line;
    }
    return 0;
}

/* A time step stated in the header or comment lines above the first data row, as `DT=0.01`,
 * `dt = 0.005 sec` or `DT: 0.02` ("DT" not inside a longer word; any case): 1 with *dt and
 * *line (1-based), else 0. The first such line counts. */
static int header_dt(const text_t *t, size_t first, double *dt, long *line)
{
    for (size_t i = 0; i < first; i++) {
        const char *l = t->line[i];
        for (const char *p = l; *p; p++) {
            if (strncasecmp(p, "dt", 2) != 0 ||
                (p > l && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
                continue;
            const char *q = skip_space(p + 2);
            if (*q != '=' && *q != ':')
                continue;
            q = skip_space(q + 1);
            char *end;
            double v = strtod(q, &end);
            if (end == q || !(v > 0) || !isfinite(v))
                continue;
            *dt = v;
            *line = (long)i + 1;
            return 1;
        }
    }
    return 0;
}

/* The step of a file without a time column from its DT= header line; with a time column, a
 * DT= line must agree with it. */
static int apply_header_dt(const text_t *t, size_t first, int has_time, const char *path,
                           series_t *s, drths_error_t *err)
{
    double hdt;
    long hline;
    if (!header_dt(t, first, &hdt, &hline))
        return 0;
    if (!has_time) {
        s->dt = hdt;
        s->dt_line = hline;
        return 0;
    }
    if (s->dt > 0 && fabs(s->dt - hdt) > UNIFORM_TOL * s->dt)
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: the header says DT = %.9g s but the time column "
                               "(from line %ld) steps %.9g s",
                               path, hline, hdt, s->first_line, s->dt);
    return 0;
}

static int parse_columns(const text_t *t, const char *path, int csv, const drths_gm_options_t *o,
                         series_t *s, drths_error_t *err)
{
    size_t first = first_data_row(t, csv);
    if (first == t->nlines)
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: no data rows as %s (only header or comment lines)", path,
                               last_content_line(t), csv ? "CSV" : "column text");
    s->first_line = (long)first + 1;
    tok_t tok[MAX_COLS];
    layout_t lay;
    lay.ncols = split(t->line[first], csv, tok, MAX_COLS);
    tok_t names[MAX_COLS];
    long names_line = 0;
    int have_names = names_above(t, first, csv, lay.ncols, names, &names_line);
    lay.has_time = first_column_is_time(t, first, csv, lay.ncols, have_names ? names : NULL, o);
    if (lay.has_time && lay.ncols < 2)
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: one column only, so it cannot hold both time and values",
                               path, s->first_line);
    int nvalues = lay.ncols - lay.has_time;
    if (o->column > nvalues)
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: ground_motion.column = %d but the file has %d "
                               "value column%s%s",
                               path, s->first_line, o->column, nvalues, nvalues == 1 ? "" : "s",
                               lay.has_time ? " besides time" : "");
    lay.vc = lay.has_time + o->column - 1;
    if (have_names) {
        const tok_t *nm = &names[lay.vc];
        int shown = (int)(nm->len > 40 ? 40 : nm->len);
        if (contains_nocase_n(nm->p, nm->len, "vel") || contains_nocase_n(nm->p, nm->len, "disp"))
            return drths_error_set(err, -EINVAL,
                                   "%s:%ld: the column is named \"%.*s\", which looks like "
                                   "velocity or displacement; only acceleration records can "
                                   "drive the test",
                                   path, names_line, shown, nm->p);
        s->units = units_from_name(nm->p, nm->len);
        snprintf(s->units_from, sizeof s->units_from, "line %ld names the column \"%.*s\"",
                 names_line, shown, nm->p);
    }
    int r = read_rows(t, first, path, csv, o, &lay, s, err);
    return r ? r : apply_header_dt(t, first, lay.has_time, path, s, err);
}

/* ---- load ---------------------------------------------------------------------------------- */

static int check_options(const drths_gm_options_t *o, const char *path, drths_error_t *err)
{
    if ((unsigned)o->format > DRTHS_GM_CSV)
        return drths_error_set(err, -EINVAL, "%s: ground_motion.format: unknown value %d", path,
                               (int)o->format);
    if ((unsigned)o->units > DRTHS_GM_UNITS_MM_S2)
        return drths_error_set(err, -EINVAL, "%s: ground_motion.units: unknown value %d", path,
                               (int)o->units);
    if ((unsigned)o->time_column > DRTHS_GM_TIME_NONE)
        return drths_error_set(err, -EINVAL, "%s: the time column option: unknown value %d", path,
                               (int)o->time_column);
    if (o->column < 1)
        return drths_error_set(err, -EINVAL, "%s: ground_motion.column: must be >= 1 (got %d)",
                               path, o->column);
    if (!isfinite(o->dt_s) || o->dt_s < 0)
        return drths_error_set(err, -EINVAL,
                               "%s: ground_motion.dt_s: must be > 0, or 0 for none "
                               "(got %g)",
                               path, o->dt_s);
    if (!isfinite(o->scale) || o->scale == 0)
        return drths_error_set(err, -EINVAL,
                               "%s: ground_motion.scale: must be finite and non-zero (got %g)",
                               path, o->scale);
    if (!isfinite(o->time_compression) || !(o->time_compression > 0))
        return drths_error_set(err, -EINVAL,
                               "%s: ground_motion.time_compression: must be > 0 (got %g)", path,
                               o->time_compression);
    if (!isfinite(o->duration_s) || o->duration_s < 0)
        return drths_error_set(err, -EINVAL,
                               "%s: ground_motion.duration_s: must be > 0, or 0 for all (got %g)",
                               path, o->duration_s);
    if (!isfinite(o->tail_s) || o->tail_s < 0)
        return drths_error_set(err, -EINVAL, "%s: ground_motion.tail_s: must be >= 0 (got %g)",
                               path, o->tail_s);
    return 0;
}

/* Picks the format from the content: AT2 when line 4 carries NPTS, CSV when the first data row
 * is comma separated, column text otherwise. */
static drths_gm_format_t detect_format(const text_t *t)
{
    if (t->nlines >= 5 && contains_nocase(t->line[3], "NPTS"))
        return DRTHS_GM_AT2;
    for (size_t i = 0; i < t->nlines; i++) {
        const char *l = t->line[i];
        if (is_blank_line(l) || is_comment_line(l))
            continue;
        if (strchr(l, ',') && is_data_row(l, 1))
            return DRTHS_GM_CSV;
        if (is_data_row(l, 0))
            return DRTHS_GM_TWO_COLUMN;
    }
    return DRTHS_GM_TWO_COLUMN;
}

/* Applies the time step, units, scale, time compression, duration and tail to what the parser
 * found, and hands the samples to r. */
static int finish(drths_record_t *r, series_t *s, const char *path, const drths_gm_options_t *o,
                  drths_error_t *err)
{
    double dt = s->dt;
    if (dt > 0) {
        if (o->dt_s > 0 && fabs(o->dt_s - dt) > UNIFORM_TOL * dt)
            return drths_error_set(
                err, -EINVAL, "%s:%ld: the file gives dt = %.9g s but ground_motion.dt_s = %.9g s",
                path, s->dt_line, dt, o->dt_s);
    } else if (o->dt_s > 0) {
        dt = o->dt_s;
    } else {
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: no time step: the file has no time column and no DT= "
                               "header line, so ground_motion.dt_s must give it",
                               path, s->first_line);
    }

    drths_gm_units_t u = o->units;
    if (u == DRTHS_GM_UNITS_FILE) {
        if (s->units == DRTHS_GM_UNITS_FILE)
            return drths_error_set(
                err, -EINVAL,
                "%s:%ld: the file does not state its units in a column name "
                "(like accel_m_s2 or Accel[g]), so ground_motion.units must give "
                "them",
                path, s->first_line);
        u = s->units;
    } else if (s->units != DRTHS_GM_UNITS_FILE && s->units != u) {
        return drths_error_set(err, -EINVAL,
                               "%s: the file states %s (%s) but ground_motion.units is %s", path,
                               units_name(s->units), s->units_from, units_name(u));
    }
    double factor = units_factor(u);

    size_t ipk = 0;
    for (size_t k = 1; k < s->n; k++)
        if (fabs(s->v[k]) > fabs(s->v[ipk]))
            ipk = k;
    if (fabs(s->v[ipk]) * factor > PLAUSIBLE_PEAK_G * DRTHS_G_M_S2)
        return drths_error_set(err, -EINVAL,
                               "%s:%ld: peak %g %s = %.4g g exceeds %g g; are the units right "
                               "(ground_motion.units)?",
                               path, s->lineno[ipk], s->v[ipk], units_name(u),
                               fabs(s->v[ipk]) * factor / DRTHS_G_M_S2, PLAUSIBLE_PEAK_G);

    double dt_out = dt / o->time_compression;
    size_t keep = s->n;
    if (o->duration_s > 0) {
        double m = floor(o->duration_s / dt_out + SNAP_TOL) + 1;
        if (m < (double)keep)
            keep = (size_t)m;
    }
    double tail = floor(o->tail_s / dt_out + SNAP_TOL);
    if ((double)keep + tail > DRTHS_GM_MAX_SAMPLES)
        return drths_error_set(err, -EINVAL,
                               "%s: ground_motion.tail_s = %g s at dt = %g s makes more "
                               "than %u samples",
                               path, o->tail_s, dt_out, DRTHS_GM_MAX_SAMPLES);
    size_t n = keep + (size_t)tail;
    double *a = malloc(n * sizeof *a);
    if (!a)
        return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
    double gain = factor * o->scale;
    for (size_t k = 0; k < keep; k++)
        a[k] = s->v[k] * gain;
    for (size_t k = keep; k < n; k++)
        a[k] = 0.0;
    r->n = n;
    r->dt_s = dt_out;
    r->ag_m_s2 = a;
    return 0;
}

int drths_record_load(drths_record_t *r, const char *path, const drths_gm_options_t *o,
                      drths_error_t *err)
{
    memset(r, 0, sizeof *r);
    drths_gm_options_t def;
    if (!o) {
        drths_gm_options_default(&def);
        o = &def;
    }
    int rc = check_options(o, path, err);
    if (rc)
        return rc;
    text_t t;
    rc = text_read(&t, path, err);
    if (rc)
        return rc;
    if (last_content_line(&t) == 1 && is_blank_line(t.line[0])) {
        text_free(&t);
        return drths_error_set(err, -EINVAL, "%s:1: empty file", path);
    }
    drths_gm_format_t fmt = o->format == DRTHS_GM_AUTO ? detect_format(&t) : o->format;
    series_t s;
    memset(&s, 0, sizeof s);
    if (fmt == DRTHS_GM_AT2) {
        if (o->column != 1)
            rc = drths_error_set(err, -EINVAL,
                                 "%s: ground_motion.column = %d but an AT2 file has one "
                                 "value column",
                                 path, o->column);
        else if (o->time_column == DRTHS_GM_TIME_FIRST)
            rc = drths_error_set(err, -EINVAL,
                                 "%s: the time column option says first, but an AT2 file has "
                                 "no time column",
                                 path);
        else
            rc = parse_at2(&t, path, &s, err);
    } else {
        rc = parse_columns(&t, path, fmt == DRTHS_GM_CSV, o, &s, err);
    }
    if (!rc && s.n == 0)
        rc = drths_error_set(err, -EINVAL, "%s:%ld: no samples", path, last_content_line(&t));
    if (!rc)
        rc = finish(r, &s, path, o, err);
    series_free(&s);
    text_free(&t);
    return rc;
}

/* ---- resampling, noise, peak --------------------------------------------------------------- */

int drths_record_resample(drths_record_t *out, const drths_record_t *in, double dt_s, double tail_s,
                          drths_error_t *err)
{
    if (!in || in->n == 0 || !in->ag_m_s2 || !(in->dt_s > 0) || !isfinite(in->dt_s))
        return drths_error_set(err, -EINVAL, "resample: the input record is empty or has no dt");
    if (!(dt_s > 0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "resample: dt_s must be > 0 (got %g)", dt_s);
    if (!(tail_s >= 0) || !isfinite(tail_s))
        return drths_error_set(err, -EINVAL, "resample: tail_s must be >= 0 (got %g)", tail_s);
    double T = (double)(in->n - 1) * in->dt_s;
    double main_n = floor(T / dt_s + SNAP_TOL) + 1;
    double total_n = floor((T + tail_s) / dt_s + SNAP_TOL) + 1;
    if (total_n > DRTHS_GM_MAX_SAMPLES)
        return drths_error_set(err, -EINVAL,
                               "resample: %.0f samples of %g s for %g s exceed the limit of %u",
                               total_n, dt_s, T + tail_s, DRTHS_GM_MAX_SAMPLES);
    size_t n = (size_t)total_n, nm = (size_t)main_n;
    double *a = malloc(n * sizeof *a);
    if (!a)
        return drths_error_set(err, -ENOMEM, "resample: out of memory for %zu samples", n);
    const double *x = in->ag_m_s2;
    size_t last = in->n - 1;
    double ratio = dt_s / in->dt_s;
    for (size_t k = 0; k < nm; k++) {
        double pos = (double)k * ratio;
        double i = floor(pos);
        double f = pos - i;
        double tol = SNAP_TOL + 4 * 2.2204460492503131e-16 * pos;
        if (f > 1 - tol) {
            i += 1;
            f = 0;
        } else if (f < tol) {
            f = 0;
        }
        size_t ii = (size_t)i;
        if (ii >= last)
            a[k] = x[last];
        else if (f == 0)
            a[k] = x[ii];
        else
            a[k] = x[ii] + f * (x[ii + 1] - x[ii]);
    }
    for (size_t k = nm; k < n; k++)
        a[k] = 0.0;
    if (out == in)
        free(out->ag_m_s2);
    out->n = n;
    out->dt_s = dt_s;
    out->ag_m_s2 = a;
    return 0;
}

/* splitmix64 (Steele, Lea, Flood 2014): a tiny generator whose output depends only on the seed,
 * on every platform. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The phasors of all frequencies are recomputed exactly this often, so the rounding of the
 * rotation recurrence never accumulates over more than this many samples. */
#define RESYNC_SAMPLES 1024

int drths_record_white_noise(drths_record_t *out, double dt_s, double duration_s, double f_lo_hz,
                             double f_hi_hz, double rms_m_s2, uint64_t seed, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    if (!(dt_s > 0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "white noise: dt_s must be > 0 (got %g)", dt_s);
    if (!(duration_s > 0) || !isfinite(duration_s))
        return drths_error_set(err, -EINVAL, "white noise: duration_s must be > 0 (got %g)",
                               duration_s);
    if (!(f_lo_hz >= 0) || !(f_hi_hz > f_lo_hz) || !isfinite(f_hi_hz))
        return drths_error_set(err, -EINVAL,
                               "white noise: the band must satisfy 0 <= f_lo < f_hi (got %g to "
                               "%g Hz)",
                               f_lo_hz, f_hi_hz);
    if (f_hi_hz > 0.5 / dt_s * (1 + 1e-12))
        return drths_error_set(err, -EINVAL,
                               "white noise: f_hi = %g Hz is above the Nyquist frequency %g Hz "
                               "of dt = %g s",
                               f_hi_hz, 0.5 / dt_s, dt_s);
    if (!(rms_m_s2 > 0) || !isfinite(rms_m_s2))
        return drths_error_set(err, -EINVAL, "white noise: rms_m_s2 must be > 0 (got %g)",
                               rms_m_s2);
    double nd = floor(duration_s / dt_s + SNAP_TOL) + 1;
    if (nd > DRTHS_GM_MAX_SAMPLES)
        return drths_error_set(err, -EINVAL, "white noise: %.0f samples exceed the limit of %u", nd,
                               DRTHS_GM_MAX_SAMPLES);
    size_t n = (size_t)nd;
    double Tn = (double)n * dt_s; /* period of the record's DFT grid */
    double jlo = ceil(f_lo_hz * Tn - SNAP_TOL), jhi = floor(f_hi_hz * Tn + SNAP_TOL);
    if (jlo < 1)
        jlo = 1;
    if (jhi > (double)((n - 1) / 2))
        jhi = (double)((n - 1) / 2);
    if (jhi < jlo)
        return drths_error_set(err, -EINVAL,
                               "white noise: the band %g to %g Hz holds no frequency of the "
                               "record's grid (spacing %g Hz); lengthen the record",
                               f_lo_hz, f_hi_hz, 1 / Tn);
    size_t j0 = (size_t)jlo, m = (size_t)(jhi - jlo) + 1;
    double *a = malloc(n * sizeof *a);
    double *buf = malloc(5 * m * sizeof *buf);
    if (!a || !buf) {
        free(a);
        free(buf);
        return drths_error_set(err, -ENOMEM, "white noise: out of memory");
    }
    double *ph = buf, *re = buf + m, *im = buf + 2 * m, *wr = buf + 3 * m, *wi = buf + 4 * m;
    uint64_t st = seed;
    for (size_t j = 0; j < m; j++) {
        ph[j] = TWO_PI * (double)(splitmix64(&st) >> 11) * 0x1.0p-53;
        double w = TWO_PI * (double)(j0 + j) / (double)n;
        wr[j] = cos(w);
        wi[j] = sin(w);
    }
    for (size_t k = 0; k < n; k++) {
        if (k % RESYNC_SAMPLES == 0)
            for (size_t j = 0; j < m; j++) {
                /* (j * k) mod n in integers keeps the angle exact for long records. */
                uint64_t jk = ((uint64_t)(j0 + j) * (uint64_t)k) % (uint64_t)n;
                double ang = TWO_PI * (double)jk / (double)n + ph[j];
                re[j] = cos(ang);
                im[j] = sin(ang);
            }
        double sum = 0;
        for (size_t j = 0; j < m; j++) {
            sum += re[j];
            double r2 = re[j] * wr[j] - im[j] * wi[j];
            im[j] = re[j] * wi[j] + im[j] * wr[j];
            re[j] = r2;
        }
        a[k] = sum;
    }
    free(buf);
    double ss = 0;
    for (size_t k = 0; k < n; k++)
        ss += a[k] * a[k];
    double g = rms_m_s2 / sqrt(ss / (double)n);
    for (size_t k = 0; k < n; k++)
        a[k] *= g;
    out->n = n;
    out->dt_s = dt_s;
    out->ag_m_s2 = a;
    return 0;
}

double drths_record_peak(const drths_record_t *r, size_t *index)
{
    size_t ipk = 0;
    double pk = 0;
    for (size_t k = 0; k < r->n; k++)
        if (fabs(r->ag_m_s2[k]) > fabs(pk)) {
            pk = r->ag_m_s2[k];
            ipk = k;
        }
    if (index)
        *index = ipk;
    return pk;
}

void drths_record_close(drths_record_t *r)
{
    free(r->ag_m_s2);
    memset(r, 0, sizeof *r);
}
