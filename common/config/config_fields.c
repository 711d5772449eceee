/* Scalar conversion: every scalar of the file arrives as the string libcyaml loaded, and is
 * converted here strictly (a whole number is not "2.5", a number is finite and has no leading
 * blank), defaulted when absent and range-checked, with a message that names the field and
 * what it accepts. drths_cfg_parse_field does all of that for one row of a section's table;
 * the fill functions call the single conversions for what they convert
 * by hand (lists, matrices, ranges that depend on other fields).
 */
#include "common/config/config_internal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int drths_cfg_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    /* strtod also accepts "inf", "nan" and hex floats; the first two are refused below, and a
     * hex float is a number all the same. Leading blanks cannot occur in a plain YAML scalar but
     * can in a quoted one; refuse them so that " 5" is not silently 5. */
    if (s[0] == ' ' || s[0] == '\t')
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int drths_cfg_get_double(vctx_t *c, const char *path, const char *s, double def, double *out)
{
    if (!s) {
        *out = def;
        return 0;
    }
    if (drths_cfg_parse_double(s, out) < 0)
        return drths_cfg_fail(c, -EINVAL, path, "must be a finite number (got \"%s\")", s);
    return 0;
}

static int check_range(vctx_t *c, const char *path, double v, double lo, double hi)
{
    if (v < lo || v > hi)
        return drths_cfg_fail(c, -EINVAL, path, "must be in %g..%g (got %g)", lo, hi, v);
    return 0;
}

int drths_cfg_check_gt0(vctx_t *c, const char *path, double v)
{
    if (!(v > 0))
        return drths_cfg_fail(c, -EINVAL, path, "must be > 0 (got %g)", v);
    return 0;
}

int drths_cfg_check_ge0(vctx_t *c, const char *path, double v)
{
    if (!(v >= 0))
        return drths_cfg_fail(c, -EINVAL, path, "must be >= 0 (got %g)", v);
    return 0;
}

int drths_cfg_get_int(vctx_t *c, const char *path, const char *s, long def, long lo, long hi,
                      int *out)
{
    long v = def;
    if (s) {
        char *end;
        errno = 0;
        long long t = (s[0] == ' ' || s[0] == '\t') ? 0 : strtoll(s, &end, 10);
        if (s[0] == ' ' || s[0] == '\t' || end == s || *end != '\0' || errno == ERANGE) {
            double d;
            if (drths_cfg_parse_double(s, &d) == 0)
                return drths_cfg_fail(c, -EINVAL, path, "must be a whole number (got %s)", s);
            return drths_cfg_fail(c, -EINVAL, path, "must be a whole number (got \"%s\")", s);
        }
        if (t < lo || t > hi)
            return drths_cfg_fail(c, -EINVAL, path, "must be in %ld..%ld (got %lld)", lo, hi, t);
        v = (long)t;
    }
    *out = (int)v;
    return 0;
}

static int get_u64(vctx_t *c, const char *path, const char *s, uint64_t def, uint64_t *out)
{
    if (!s) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = (s[0] >= '0' && s[0] <= '9') ? strtoull(s, &end, 10) : 0;
    if (!(s[0] >= '0' && s[0] <= '9') || *end != '\0' || errno == ERANGE)
        return drths_cfg_fail(c, -EINVAL, path,
                              "must be a whole number in 0..18446744073709551615 (got \"%s\")", s);
    *out = (uint64_t)v;
    return 0;
}

static int get_enum(vctx_t *c, const char *path, const char *s, const enum_name_t *t, int def,
                    int *out)
{
    if (s) {
        for (const enum_name_t *e = t; e->name; e++)
            if (strcmp(s, e->name) == 0) {
                *out = e->value;
                return 0;
            }
    }
    if (!s && def >= 0) {
        *out = def;
        return 0;
    }
    char list[256];
    size_t at = 0;
    list[0] = '\0';
    for (const enum_name_t *e = t; e->name; e++)
        at += (size_t)snprintf(list + at, at < sizeof list ? sizeof list - at : 0, "%s%s",
                               e == t ? "" : ", ", e->name);
    if (!s)
        return drths_cfg_fail(c, -EINVAL, path, "missing (required; one of %s)", list);
    return drths_cfg_fail(c, -EINVAL, path, "must be one of %s (got \"%s\")", list, s);
}

/* ---- a row of a section's table --------------------------------------------------------- */

const char *drths_cfg_field_path(char *buf, size_t size, const char *prefix, const field_t *f)
{
    snprintf(buf, size, "%s%s%s", prefix, prefix[0] ? "." : "", f->key);
    return buf;
}

const char *drths_cfg_raw_string(const field_t *f, const void *raw)
{
    return raw ? *(char *const *)((const char *)raw + f->raw) : NULL;
}

int drths_cfg_parse_field(vctx_t *c, const char *prefix, const field_t *f, const void *raw,
                          void *out)
{
    char path[128];
    drths_cfg_field_path(path, sizeof path, prefix, f);
    const char *s = drths_cfg_raw_string(f, raw);
    void *dst = (char *)out + f->out;
    double *d = dst;
    int r, v = 0;
    switch (f->kind) {
    case K_ENUM:
        if ((r = get_enum(c, path, s, f->names, (int)f->def, &v)))
            return r;
        /* Every destination of an ENUM row is one of the experiment's enums (config.h and the
         * models' headers): int-sized, of type int or unsigned int, which an int lvalue may
         * access. */
        *(int *)dst = v;
        return 0;
    case K_INT:
        return drths_cfg_get_int(c, path, s, (long)f->def, (long)f->lo, (long)f->hi, dst);
    case K_U64:
        return get_u64(c, path, s, (uint64_t)f->def, dst);
    case K_REAL:
        return drths_cfg_get_double(c, path, s, f->def, d);
    case K_REAL_GT0:
        if ((r = drths_cfg_get_double(c, path, s, f->def, d)))
            return r;
        return drths_cfg_check_gt0(c, path, *d);
    case K_REAL_GE0:
        if ((r = drths_cfg_get_double(c, path, s, f->def, d)))
            return r;
        return drths_cfg_check_ge0(c, path, *d);
    case K_REAL_IN:
        if ((r = drths_cfg_get_double(c, path, s, f->def, d)))
            return r;
        return check_range(c, path, *d, f->lo, f->hi);
    case K_TEXT:
        if (!s && !f->text)
            return 0;
        if (!(*(char **)dst = strdup(s ? s : f->text)))
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
        return 0;
    default: /* converted by the fill function */
        return 0;
    }
}

int drths_cfg_parse_fields(vctx_t *c, const char *prefix, const field_t *spec, int first, int last,
                           const void *raw, void *out)
{
    int r;
    for (int i = first; i <= last; i++)
        if ((r = drths_cfg_parse_field(c, prefix, &spec[i], raw, out)))
            return r;
    return 0;
}
