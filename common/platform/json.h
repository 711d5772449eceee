/* Minimal streaming JSON writer for run summaries (summary.json, report.json).
 *
 * The writer tracks nesting so callers never handle commas; NaN and infinities are written as
 * null (JSON has no NaN). Keys are passed with each value; inside arrays pass key = NULL.
 * Ownership: the caller owns the FILE. init-only (uses stdio).
 */
#ifndef DRTHS_JSON_H
#define DRTHS_JSON_H

#include <stdint.h>
#include <stdio.h>

#include "common/platform/error.h"

#define DRTHS_JSON_MAX_DEPTH 16

typedef struct drths_json {
    FILE *f;
    int depth;
    int count[DRTHS_JSON_MAX_DEPTH]; /* items written at each level */
} drths_json_t;

void drths_json_init(drths_json_t *j, FILE *f);
void drths_json_object_begin(drths_json_t *j, const char *key);
void drths_json_object_end(drths_json_t *j);
void drths_json_array_begin(drths_json_t *j, const char *key);
void drths_json_array_end(drths_json_t *j);
void drths_json_number(drths_json_t *j, const char *key, double v);
void drths_json_int(drths_json_t *j, const char *key, int64_t v);
void drths_json_bool(drths_json_t *j, const char *key, int v);
void drths_json_string(drths_json_t *j, const char *key, const char *s);
/* Writes an array of n numbers under key. */
void drths_json_numbers(drths_json_t *j, const char *key, const double *v, int n);

/* A JSON document in a file of its own (summary.json, provenance.json): _open creates the file at
 * path and begins the top-level object (0, or -errno with err naming the file); _close ends the
 * object (and the line) and closes the file, 0 or -EIO when a write failed. The writer
 * owns the FILE between the two. */
int drths_json_file_open(drths_json_t *j, const char *path, drths_error_t *err);
int drths_json_file_close(drths_json_t *j, const char *path, drths_error_t *err);

#endif
