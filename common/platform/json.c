#include "common/platform/json.h"

#include <errno.h>
#include <string.h>

#include <math.h>
#include <string.h>

void drths_json_init(drths_json_t *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
}

static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Writes the separator, indentation and key that precede any value. */
static void prefix(drths_json_t *j, const char *key)
{
    if (j->count[j->depth]++)
        fputc(',', j->f);
    if (j->depth > 0) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    if (key) {
        put_string(j->f, key);
        fputs(": ", j->f);
    }
}

static void open_level(drths_json_t *j, const char *key, char c)
{
    prefix(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < DRTHS_JSON_MAX_DEPTH)
        j->count[++j->depth] = 0;
}

static void close_level(drths_json_t *j, char c)
{
    int had = j->count[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (had) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    fputc(c, j->f);
    if (j->depth == 0)
        fputc('\n', j->f);
}

void drths_json_object_begin(drths_json_t *j, const char *key)
{
    open_level(j, key, '{');
}
void drths_json_object_end(drths_json_t *j)
{
    close_level(j, '}');
}
void drths_json_array_begin(drths_json_t *j, const char *key)
{
    open_level(j, key, '[');
}
void drths_json_array_end(drths_json_t *j)
{
    close_level(j, ']');
}

void drths_json_number(drths_json_t *j, const char *key, double v)
{
    prefix(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.10g", v);
    else
        fputs("null", j->f);
}

void drths_json_int(drths_json_t *j, const char *key, int64_t v)
{
    prefix(j, key);
    fprintf(j->f, "%lld", (long long)v);
}

void drths_json_bool(drths_json_t *j, const char *key, int v)
{
    prefix(j, key);
    fputs(v ? "true" : "false", j->f);
}

void drths_json_string(drths_json_t *j, const char *key, const char *s)
{
    prefix(j, key);
    if (s)
        put_string(j->f, s);
    else
        fputs("null", j->f);
}

void drths_json_numbers(drths_json_t *j, const char *key, const double *v, int n)
{
    drths_json_array_begin(j, key);
    for (int i = 0; i < n; i++)
        drths_json_number(j, NULL, v[i]);
    drths_json_array_end(j);
}

int drths_json_file_open(drths_json_t *j, const char *path, drths_error_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return drths_error_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
    drths_json_init(j, f);
    drths_json_object_begin(j, NULL);
    return 0;
}

int drths_json_file_close(drths_json_t *j, const char *path, drths_error_t *err)
{
    drths_json_object_end(j); /* the top-level object's end carries the final newline */
    int bad = ferror(j->f);
    if (fclose(j->f) != 0 || bad)
        return drths_error_set(err, -EIO, "writing %s failed", path);
    return 0;
}
