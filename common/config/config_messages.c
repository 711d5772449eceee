/* The loader's messages: an error names the file, the field's full path and, when it can be
 * found, its line; a field that does not apply to the file's choices becomes a note
 * (drths_experiment_t.notes); and libcyaml's own message and backtrace become the same
 * "file:line: path: reason" sentence. The wording of every message a field's check gives is at
 * the check; this file only frames it.
 */
#include "common/config/config_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The full path of a field in messages: c->prefix then path. */
static const char *full_path(const vctx_t *c, const char *path, char *buf, size_t size)
{
    if (!c->prefix || !c->prefix[0])
        return path;
    snprintf(buf, size, "%s%s", c->prefix, path);
    return buf;
}

/* The line of the full path of a field; in a channel, a field the channel does not give (it
 * takes the top-level value) is named at the channel's own line, its entry's dash line. */
static int line_in(const vctx_t *c, const char *full)
{
    int line = drths_yamlline_find(c->text, c->len, full);
    if (line > 0 || !c->prefix || !c->prefix[0])
        return line;
    char entry[64];
    size_t n = strlen(c->prefix);
    if (n < 2 || n > sizeof entry)
        return 0;
    memcpy(entry, c->prefix, n - 1); /* without the trailing '.' */
    entry[n - 1] = '\0';
    return drths_yamlline_find(c->text, c->len, entry);
}

static int failv(vctx_t *c, int code, const char *path, const char *fmt, va_list ap)
{
    char what[384], full[160];
    path = full_path(c, path, full, sizeof full);
    vsnprintf(what, sizeof what, fmt, ap);
    int line = line_in(c, path);
    if (line > 0)
        return drths_error_set(c->err, code, "%s:%d: %s: %s", c->file, line, path, what);
    return drths_error_set(c->err, code, "%s: %s: %s", c->file, path, what);
}

int drths_cfg_fail(vctx_t *c, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = failv(c, code, path, fmt, ap);
    va_end(ap);
    return r;
}

int drths_cfg_not_allowed(vctx_t *c, const char *path, const char *why)
{
    return drths_cfg_fail(c, -EINVAL, path, "not allowed %s", why);
}

int drths_cfg_ignored(vctx_t *c, const char *path, const char *why)
{
    if (!c->notes)
        return 0;
    char line[512], full[160];
    path = full_path(c, path, full, sizeof full);
    int ln = line_in(c, path);
    int k = ln > 0 ? snprintf(line, sizeof line, "%s:%d: %s: ignored %s\n", c->file, ln, path, why)
                   : snprintf(line, sizeof line, "%s: %s: ignored %s\n", c->file, path, why);
    size_t add = k < 0 ? 0 : ((size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
    size_t have = *c->notes ? strlen(*c->notes) : 0;
    char *n = realloc(*c->notes, have + add + 1);
    if (!n)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    memcpy(n + have, line, add);
    n[have + add] = '\0';
    *c->notes = n;
    return 0;
}

void drths_cfg_cy_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
    cy_log_t *l = ctx;
    if (level < CYAML_LOG_ERROR || l->n >= LOG_LINES)
        return;
    char *dst = l->line[l->n++];
    vsnprintf(dst, sizeof l->line[0], fmt, args);
    size_t n = strlen(dst);
    while (n > 0 && (dst[n - 1] == '\n' || dst[n - 1] == ' '))
        dst[--n] = '\0';
}

/* Turns libcyaml's message and backtrace into "path: reason" with the innermost line number:
 *     Load: Invalid FLOAT value: abc
 *     Load: Backtrace:
 *       in sequence entry '2' (line: 3, column: 10)
 *       in mapping field 'v' (line: 3, column: 6)
 * becomes v[1] (libcyaml counts entries from 1, paths here from 0). */
int drths_cfg_cyaml_error(vctx_t *c, cyaml_err_t e, const cy_log_t *l)
{
    const char *msg = l->n > 0 ? l->line[0] : cyaml_strerror(e);
    if (strncmp(msg, "Load: ", 6) == 0)
        msg += 6;

    /* Frames, innermost first. */
    char names[LOG_LINES][128];
    int is_entry[LOG_LINES], is_anon[LOG_LINES], lines[LOG_LINES];
    int nf = 0;
    for (int i = 1; i < l->n; i++) {
        const char *s = l->line[i];
        while (*s == ' ')
            s++;
        int ln = 0;
        const char *lp = strstr(s, "(line: ");
        if (lp)
            ln = atoi(lp + 7);
        if (strncmp(s, "in mapping field '", 18) == 0 ||
            strncmp(s, "in sequence entry '", 19) == 0) {
            int entry = s[3] == 's';
            const char *q = strchr(s, '\'') + 1;
            const char *r = strchr(q, '\'');
            if (!r)
                continue;
            size_t k =
                (size_t)(r - q) < sizeof names[0] - 1 ? (size_t)(r - q) : sizeof names[0] - 1;
            memcpy(names[nf], q, k);
            names[nf][k] = '\0';
            is_entry[nf] = entry;
            is_anon[nf] = 0;
            lines[nf] = ln;
            nf++;
        } else if (strncmp(s, "in mapping", 10) == 0 || strncmp(s, "in sequence", 11) == 0) {
            names[nf][0] = '\0';
            is_entry[nf] = 0;
            is_anon[nf] = 1;
            lines[nf] = ln;
            nf++;
        }
    }

    const char *key = NULL; /* a key named by the message rather than by a frame */
    int drop_inner = 0;     /* the innermost frame is a sibling field, not part of the path */
    int use_line = 1;
    char reason[320];
    if (e == CYAML_ERR_INVALID_KEY && strncmp(msg, "Unexpected key: ", 16) == 0) {
        key = msg + 16;
        use_line = 0; /* libcyaml gives the line of the enclosing mapping, not of the key */
        snprintf(reason, sizeof reason, "unknown key (see docs/experiment-file.md for the keys)");
    } else if (strncmp(msg, "Mapping field already seen: ", 28) == 0) {
        key = msg + 28;
        drop_inner = 1;
        snprintf(reason, sizeof reason, "given twice");
    } else if (e == CYAML_ERR_ALIAS) {
        snprintf(reason, sizeof reason, "YAML anchors and aliases are not supported");
    } else if (strncmp(msg, "Expecting ", 10) == 0) {
        const char *got = strstr(msg, "got event: ");
        got = got ? got + 11 : "";
        const char *what = strncmp(got, "SEQUENCE", 8) == 0  ? "a list"
                           : strncmp(got, "MAPPING", 7) == 0 ? "a mapping"
                           : strncmp(got, "SCALAR", 6) == 0  ? "a single value"
                                                             : got;
        if (strncmp(msg + 10, "STRING", 6) == 0)
            snprintf(reason, sizeof reason, "must be a single value, not %s", what);
        else if (strncmp(msg + 10, "MAPPING", 7) == 0)
            snprintf(reason, sizeof reason, "must be a mapping of keys to values, not %s", what);
        else if (strncmp(msg + 10, "SEQUENCE", 8) == 0)
            snprintf(reason, sizeof reason, "must be a list, not %s", what);
        else
            snprintf(reason, sizeof reason, "%s", msg);
    } else if (e == CYAML_ERR_SEQUENCE_ENTRIES_MIN || e == CYAML_ERR_SEQUENCE_ENTRIES_MAX) {
        /* Only matrix rows have a fixed length; the innermost frame is the entry being read. */
        drop_inner = 1;
        snprintf(reason, sizeof reason,
                 "row has %s entries than the matrix has rows (a matrix must be square, n x n)",
                 e == CYAML_ERR_SEQUENCE_ENTRIES_MIN ? "fewer" : "more");
    } else if (e == CYAML_ERR_LIBYAML_PARSER) {
        const char *m = strncmp(msg, "libyaml: ", 9) == 0 ? msg + 9 : msg;
        snprintf(reason, sizeof reason, "YAML syntax error: %s", m);
    } else {
        snprintf(reason, sizeof reason, "%s", msg);
    }

    char path[512];
    size_t at = 0;
    path[0] = '\0';
    int line = 0;
    for (int i = nf - 1; i >= (drop_inner ? 1 : 0); i--) {
        if (is_anon[i])
            continue;
        if (is_entry[i])
            at += (size_t)snprintf(path + at, at < sizeof path ? sizeof path - at : 0, "[%ld]",
                                   strtol(names[i], NULL, 10) - 1);
        else
            at += (size_t)snprintf(path + at, at < sizeof path ? sizeof path - at : 0, "%s%s",
                                   at ? "." : "", names[i]);
        if (at >= sizeof path)
            at = sizeof path - 1;
    }
    if (key)
        snprintf(path + at, at < sizeof path ? sizeof path - at : 0, "%s%s", at ? "." : "", key);
    if (use_line && nf > 0)
        line = lines[drop_inner && nf > 1 ? 1 : 0];
    if (e == CYAML_ERR_SEQUENCE_ENTRIES_MIN || e == CYAML_ERR_SEQUENCE_ENTRIES_MAX)
        line = nf > 1 ? lines[1] : 0;

    if (path[0] == '\0') {
        if (strncmp(msg, "Expecting MAPPING", 17) == 0)
            return drths_error_set(c->err, -EINVAL,
                                   "%s: not an experiment file: the top level must be a YAML "
                                   "mapping (name:, structure:, ground_motion:, specimen:, ...)",
                                   c->file);
        return drths_error_set(c->err, -EINVAL, "%s: %s", c->file, reason);
    }
    if (line > 0)
        return drths_error_set(c->err, -EINVAL, "%s:%d: %s: %s", c->file, line, path, reason);
    return drths_error_set(c->err, -EINVAL, "%s: %s: %s", c->file, path, reason);
}
