/* Buffered CSV writer for run records (the run-folder contract:
 * docs/design.md#records-and-reports).
 *
 * The header names every column with its unit. Rows are written as numbers with enough digits
 * to round-trip a double's useful precision (%.9g); NaN is written as "nan".
 * Ownership: the writer owns its FILE and closes it in drths_csvw_close().
 * Not RT-safe: the real-time thread never writes files; it pushes records through a ring and
 * the libuv thread calls these functions.
 */
#ifndef DRTHS_CSVWRITE_H
#define DRTHS_CSVWRITE_H

#include <stdio.h>

#include "common/platform/error.h"

typedef struct drths_csvw {
    FILE *f;
    int ncols;
    long rows;
    int failed; /* a write failed (disk full, ...): reported by _close */
} drths_csvw_t;

/* Creates path and writes the header (names joined with commas). init-only. */
int drths_csvw_open(drths_csvw_t *w, const char *path, const char *const *names, int ncols,
                    drths_error_t *err);
/* Writes one row of w->ncols values. */
void drths_csvw_row(drths_csvw_t *w, const double *values);
/* Flushes to the kernel, so a crash after it loses nothing written before. */
int drths_csvw_flush(drths_csvw_t *w);
/* Flushes, fsyncs and closes; returns -EIO if any write failed. Safe twice. */
int drths_csvw_close(drths_csvw_t *w, drths_error_t *err);

#endif
