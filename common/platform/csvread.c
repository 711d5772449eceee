#include "common/platform/csvread.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Block size for fread. Large blocks keep the number of system calls small on 100 MB files. */
#define BLOCK_BYTES (1u << 20)

/* State of one read, kept apart from the table so that a failure can free it all at once. */
typedef struct reader {
    drths_csv_table_t *t;
    drths_error_t *err;
    long cap;          /* rows allocated in every column */
    long lineno;       /* line number of the line being parsed (1 = header) */
    long blank_lineno; /* first blank line seen after the header, 0 if none */
} reader_t;

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Exact powers of ten: every one up to 1e22 is representable in a double. */
static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int ends_field(char c)
{
    return c == ',' || c == '\0' || is_blank(c);
}

/* Parses a number like strtod, with the same result bit for bit. Plain decimals as the writers
 * print them ("%.9g") take a fast path (Clinger 1990): when the digits form an integer m below
 * 2^53 and the decimal exponent e is within +-22, m and 10^|e| are exact doubles and one
 * multiplication or division rounds once, exactly as strtod does. Anything else (nan, inf,
 * hex, long mantissas, large exponents) goes to strtod. This halves the load time of a
 * 100 MB record. */
static double parse_number(char *p, char **end)
{
    const char *s = p;
    int neg = 0;
    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    uint64_t m = 0;
    int digits = 0, frac = 0;
    while (*s >= '0' && *s <= '9') {
        if (m >= UINT64_C(100000000000000000))
            return strtod(p, end);
        m = m * 10 + (uint64_t)(*s++ - '0');
        digits++;
    }
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') {
            if (m >= UINT64_C(100000000000000000))
                return strtod(p, end);
            m = m * 10 + (uint64_t)(*s++ - '0');
            digits++;
            frac++;
        }
    }
    if (digits == 0)
        return strtod(p, end);
    int e = -frac;
    if (*s == 'e' || *s == 'E') {
        s++;
        int eneg = 0;
        if (*s == '-' || *s == '+')
            eneg = *s++ == '-';
        if (!(*s >= '0' && *s <= '9'))
            return strtod(p, end);
        int x = 0;
        while (*s >= '0' && *s <= '9') {
            if (x > 1000)
                return strtod(p, end);
            x = x * 10 + (*s++ - '0');
        }
        e += eneg ? -x : x;
    }
    if (!ends_field(*s) || m > (UINT64_C(1) << 53) || e < -22 || e > 22)
        return strtod(p, end);
    double v = (double)m;
    v = e >= 0 ? v * pow10_exact[e] : v / pow10_exact[-e];
    *end = (char *)s;
    return neg ? -v : v;
}

static char *trim(char *s)
{
    while (is_blank(*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_blank(s[n - 1]))
        s[--n] = '\0';
    return s;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int parse_header(reader_t *r, char *line)
{
    drths_csv_table_t *t = r->t;
    int n = 1;
    for (const char *p = line; *p; p++)
        n += *p == ',';
    t->names = calloc((size_t)n, sizeof *t->names);
    t->cols = calloc((size_t)n, sizeof *t->cols);
    if (!t->names || !t->cols)
        return drths_error_set(r->err, -ENOMEM, "%s: out of memory", t->path);
    t->ncols = n;
    char *p = line;
    for (int c = 0; c < n; c++) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        char *name = trim(p);
        if (!*name)
            return drths_error_set(r->err, -EINVAL, "%s:1: column %d has no name", t->path,
                                   c + 1);
        t->names[c] = strdup(name);
        if (!t->names[c])
            return drths_error_set(r->err, -ENOMEM, "%s: out of memory", t->path);
        p = comma ? comma + 1 : p + strlen(p);
    }
    /* Sorting a copy finds duplicates in n log n, which matters only for very wide files. */
    char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted)
        return drths_error_set(r->err, -ENOMEM, "%s: out of memory", t->path);
    memcpy(sorted, t->names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_names);
    for (int c = 1; c < n; c++)
        if (strcmp(sorted[c - 1], sorted[c]) == 0) {
            int rc = drths_error_set(r->err, -EINVAL, "%s:1: column name \"%s\" appears twice",
                                     t->path, sorted[c]);
            free(sorted);
            return rc;
        }
    free(sorted);
    r->cap = 4096;
    for (int c = 0; c < n; c++) {
        t->cols[c] = malloc((size_t)r->cap * sizeof(double));
        if (!t->cols[c])
            return drths_error_set(r->err, -ENOMEM, "%s: out of memory", t->path);
    }
    return 0;
}

static int grow(reader_t *r)
{
    drths_csv_table_t *t = r->t;
    long cap = r->cap * 2;
    for (int c = 0; c < t->ncols; c++) {
        double *p = realloc(t->cols[c], (size_t)cap * sizeof(double));
        if (!p)
            return drths_error_set(r->err, -ENOMEM, "%s: out of memory at %ld rows", t->path,
                                   t->rows);
        t->cols[c] = p;
    }
    r->cap = cap;
    return 0;
}

static int count_fields(const char *line)
{
    int n = 1;
    for (; *line; line++)
        n += *line == ',';
    return n;
}

/* Parses one data line (NUL-terminated, without its newline). */
static int parse_row(reader_t *r, char *line)
{
    drths_csv_table_t *t = r->t;
    char *p = line;
    while (is_blank(*p))
        p++;
    if (!*p) {
        if (!r->blank_lineno)
            r->blank_lineno = r->lineno;
        return 0;
    }
    if (r->blank_lineno)
        return drths_error_set(r->err, -EINVAL, "%s:%ld: blank line inside the data", t->path,
                               r->blank_lineno);
    if (t->rows == r->cap) {
        int rc = grow(r);
        if (rc)
            return rc;
    }
    for (int c = 0; c < t->ncols; c++) {
        if (c > 0) {
            if (*p != ',')
                return drths_error_set(r->err, -EINVAL, "%s:%ld: %d fields, the header has %d",
                                       t->path, r->lineno, count_fields(line), t->ncols);
            p++;
        }
        while (*p == ' ' || *p == '\t')
            p++;
        char *end;
        double v = parse_number(p, &end);
        if (end == p) {
            if (*p == ',' || *p == '\0' || *p == '\r')
                return drths_error_set(r->err, -EINVAL, "%s:%ld: column %d (%s) is empty",
                                       t->path, r->lineno, c + 1, t->names[c]);
            size_t len = strcspn(p, ",\r");
            return drths_error_set(r->err, -EINVAL, "%s:%ld: column %d (%s): \"%.*s\" is not a number",
                                   t->path, r->lineno, c + 1, t->names[c],
                                   (int)(len > 40 ? 40 : len), p);
        }
        p = end;
        while (is_blank(*p))
            p++;
        if (*p != ',' && *p != '\0') {
            size_t len = strcspn(p, ",\r");
            return drths_error_set(r->err, -EINVAL,
                                   "%s:%ld: column %d (%s): trailing characters \"%.*s\"",
                                   t->path, r->lineno, c + 1, t->names[c],
                                   (int)(len > 40 ? 40 : len), p);
        }
        t->cols[c][t->rows] = v;
    }
    if (*p != '\0')
        return drths_error_set(r->err, -EINVAL, "%s:%ld: %d fields, the header has %d",
                               t->path, r->lineno, count_fields(line), t->ncols);
    t->rows++;
    return 0;
}

static int parse_line(reader_t *r, char *line)
{
    r->lineno++;
    if (r->lineno == 1)
        return parse_header(r, line);
    return parse_row(r, line);
}

static int read_all(reader_t *r, FILE *f)
{
    drths_csv_table_t *t = r->t;
    size_t cap = BLOCK_BYTES;
    char *buf = malloc(cap + 1);
    if (!buf)
        return drths_error_set(r->err, -ENOMEM, "%s: out of memory", t->path);
    size_t len = 0; /* bytes held in buf, all of them an unfinished line after each pass */
    int rc = 0;
    for (;;) {
        if (len == cap) {
            /* A single line longer than the buffer: make room for it. */
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                rc = drths_error_set(r->err, -ENOMEM, "%s: out of memory", t->path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        if (got == 0) {
            if (ferror(f)) {
                rc = drths_error_set(r->err, -EIO, "%s: read error after line %ld", t->path,
                                     r->lineno);
                break;
            }
            /* End of file: the last line may lack its newline. */
            if (len > 0) {
                buf[len] = '\0';
                rc = parse_line(r, buf);
            }
            break;
        }
        len += got;
        char *p = buf;
        char *end = buf + len;
        char *nl;
        while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            *nl = '\0';
            rc = parse_line(r, p);
            if (rc)
                break;
            p = nl + 1;
        }
        if (rc)
            break;
        len = (size_t)(end - p);
        memmove(buf, p, len);
    }
    free(buf);
    if (!rc && r->lineno == 0)
        rc = drths_error_set(r->err, -EINVAL, "%s: empty file (no header line)", t->path);
    return rc;
}

int drths_csv_read(drths_csv_table_t *t, const char *path, drths_error_t *err)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return drths_error_set(err, -e, "%s: cannot open: %s", path, strerror(e));
    }
    t->path = strdup(path);
    if (!t->path) {
        fclose(f);
        return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    reader_t r = {.t = t, .err = err};
    int rc = read_all(&r, f);
    fclose(f);
    if (rc)
        drths_csv_close(t);
    return rc;
}

const double *drths_csv_column(const drths_csv_table_t *t, const char *name)
{
    for (int c = 0; c < t->ncols; c++)
        if (strcmp(t->names[c], name) == 0)
            return t->cols[c];
    return NULL;
}

void drths_csv_close(drths_csv_table_t *t)
{
    if (t->names)
        for (int c = 0; c < t->ncols; c++)
            free(t->names[c]);
    if (t->cols)
        for (int c = 0; c < t->ncols; c++)
            free(t->cols[c]);
    free(t->names);
    free(t->cols);
    free(t->path);
    memset(t, 0, sizeof *t);
}
