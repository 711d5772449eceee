/* The run recorder: the RT thread, which never writes files or logs, pushes fixed-size rows of
 * doubles into an SPSC ring without blocking; the libuv thread drains the ring into the CSV file.
 * Nothing is lost while the ring has room; a full ring drops the row and counts it, so the summary
 * can say the record is incomplete (it never blocks the RT thread).
 * Ownership: the recorder owns its ring and CSV writer. drths_recorder_push is the only
 * function the RT thread calls.
 */
#ifndef DRTHS_RECORDER_H
#define DRTHS_RECORDER_H

#include <stdint.h>

#include "platform/csvwrite.h"
#include "platform/error.h"
#include "platform/ring.h"

typedef struct drths_recorder {
    drths_ring_t ring;
    drths_csvw_t csv;
    int ncols;
    double *row; /* drain buffer */
    uint64_t written;
    void (*tap)(void *ctx, const double *row); /* sees each drained row (may be NULL) */
    void *tap_ctx;
} drths_recorder_t;

/* Creates the CSV at path with the header names and a ring of capacity rows (rounded up to a
 * power of two). init-only. */
int drths_recorder_open(drths_recorder_t *r, const char *path, const char *const *names,
                        int ncols, size_t capacity, drths_error_t *err);

/* The ring size for a loop at rate_hz: about two seconds of rows (a power of two, at least
 * 4096), which rides out a disk that stalls for seconds while the ring is drained every 50 ms,
 * and keeps the resident memory that mlockall pins small. init-only. */
size_t drths_recorder_rows_for(double rate_hz);

/* Queues one row of ncols values. Returns 0 or -ENOBUFS (dropped and counted). RT-safe. */
int drths_recorder_push(drths_recorder_t *r, const double *row);

/* Writes every queued row to the file (libuv thread). Returns the number written. */
uint64_t drths_recorder_drain(drths_recorder_t *r);

/* Calls tap(ctx, row) on the libuv thread for each row drained, after it is written (the live
 * monitor's telemetry samples the record this way, away from the RT thread). Set after _open.
 * init-only. */
void drths_recorder_set_tap(drths_recorder_t *r, void (*tap)(void *ctx, const double *row),
                            void *ctx);

/* Rows dropped because the ring was full. */
uint64_t drths_recorder_dropped(drths_recorder_t *r);

/* Drains, flushes, fsyncs and closes; -EIO if any write failed. Safe twice. */
int drths_recorder_close(drths_recorder_t *r, drths_error_t *err);

#endif
