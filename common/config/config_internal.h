/* The experiment-file loader's own declarations, shared by its files in common/config/ and by
 * nothing else (the public interface is config.h). The loader is split by what a reader looks
 * for:
 *
 *   config.c             load and close, the top-level flow, defaults, paths
 *   config_yamlline.c    the line of a key in the file's text, for messages
 *
 * Functions here are not static because another file of the loader calls them; their names
 * start with drths_ like every symbol the library exports, so that they cannot collide with a
 * program's own.
 */
#ifndef DRTHS_CONFIG_INTERNAL_H
#define DRTHS_CONFIG_INTERNAL_H

#include <stddef.h>

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

/* ---- config_yamlline.c ------------------------------------------------------------------- */

/* Finds the line of the key at the end of a dotted path ("physical.channels[1].name") in the
 * len bytes of block-style YAML at text: each component must appear as "key:" at the start of a
 * line (after indentation) deeper than its parent and before the parent's block ends; an index
 * ("[2]") of a block sequence moves to that entry's dash line. Returns the 1-based line, or 0
 * if not found (flow style, or the key is absent because it is missing), so messages only add a
 * line they are sure of. init-only. */
int drths_yamlline_find(const char *text, size_t len, const char *path);

#endif
