/* The experiment-file loader's own declarations, shared by its files in common/config/ and by
 * nothing else (the public interface is config.h). The loader is split by what a reader looks
 * for:
 *
 *   config.c             load and close, the top-level flow, defaults, paths
 *   config_messages.c    errors and notes: file, line, field path; libcyaml's messages
 *   config_yamlline.c    the line of a key in the file's text, for messages
 *
 * Functions here are not static because another file of the loader calls them; their names
 * start with drths_ like every symbol the library exports, so that they cannot collide with a
 * program's own.
 */
#ifndef DRTHS_CONFIG_INTERNAL_H
#define DRTHS_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include <cyaml/cyaml.h>

#include "common/config/config.h"

/* ---- error context ----------------------------------------------------------------------- */

/* What every step of the loader reports into, passed as c. */
typedef struct {
    const char *file; /* for messages */
    const char *text; /* the file's bytes, to find the line of a key */
    size_t len;
    drths_error_t *err;
    char **notes; /* the experiment's notes (ignored fields); NULL: not collected */
    /* Prepended to every path in messages: "physical.channels[1]." while a channel's sections
     * are read with the top-level sections' code, "" (or NULL) otherwise. */
    const char *prefix;
} vctx_t;

/* ---- config_messages.c ------------------------------------------------------------------- */

/* Every message names c->file, the field's path (after c->prefix) and, when
 * drths_yamlline_find is sure of it, the line: "<file>:<line>: <path>: <reason>". */

/* Fills c->err with the message fmt formats for the field at path and returns code. */
int drths_cfg_fail(vctx_t *c, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* -EINVAL: the field at path is "not allowed <why>". */
int drths_cfg_not_allowed(vctx_t *c, const char *path, const char *why);

/* A field that does not apply to the file's choices (q_disp when control.mode is not
 * clipped-optimal): it is left out of the experiment, so neither run nor fingerprint sees it,
 * and a note naming it ("<file>:<line>: <path>: ignored <why>") is added to *c->notes for the
 * programs to print. A file edited from one mode to another then runs without deleting keys by
 * hand, and still says what it did not use. Returns 0, or -ENOMEM. */
int drths_cfg_ignored(vctx_t *c, const char *path, const char *why);

/* libcyaml's log lines of one load (error level and above), for drths_cfg_cyaml_error. */
#define LOG_LINES 24
typedef struct {
    char line[LOG_LINES][256];
    int n;
} cy_log_t;

/* The log_fn of every cyaml_config_t of the loader; ctx is a cy_log_t. */
void drths_cfg_cy_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args);

/* Fills c->err from libcyaml's error e and its log l: the path of the field it refused, with
 * the innermost line number it gave, and the reason in the loader's words. Returns -EINVAL. */
int drths_cfg_cyaml_error(vctx_t *c, cyaml_err_t e, const cy_log_t *l);

/* ---- config_yamlline.c ------------------------------------------------------------------- */

/* Finds the line of the key at the end of a dotted path ("physical.channels[1].name") in the
 * len bytes of block-style YAML at text: each component must appear as "key:" at the start of a
 * line (after indentation) deeper than its parent and before the parent's block ends; an index
 * ("[2]") of a block sequence moves to that entry's dash line. Returns the 1-based line, or 0
 * if not found (flow style, or the key is absent because it is missing), so messages only add a
 * line they are sure of. init-only. */
int drths_yamlline_find(const char *text, size_t len, const char *path);

#endif
