#include "platform/recorder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int drths_recorder_open(drths_recorder_t *r, const char *path, const char *const *names,
                        int ncols, size_t capacity, drths_error_t *err)
{
    memset(r, 0, sizeof *r);
    r->ncols = ncols;
    r->row = calloc((size_t)ncols, sizeof(double));
    if (!r->row)
        return drths_error_set(err, -ENOMEM, "out of memory for the recorder");
    int rc = drths_ring_init(&r->ring, (size_t)ncols * sizeof(double), capacity);
    if (rc) {
        free(r->row);
        r->row = NULL;
        return drths_error_set(err, rc, "cannot allocate the recorder ring (%zu rows)", capacity);
    }
    rc = drths_csvw_open(&r->csv, path, names, ncols, err);
    if (rc) {
        drths_ring_close(&r->ring);
        free(r->row);
        r->row = NULL;
    }
    return rc;
}

size_t drths_recorder_rows_for(double rate_hz)
{
    size_t rows = 4096;
    while (rows < 2.0 * rate_hz && rows < ((size_t)1 << 24))
        rows <<= 1;
    return rows;
}

int drths_recorder_push(drths_recorder_t *r, const double *row)
{
    return drths_ring_push(&r->ring, row);
}

uint64_t drths_recorder_drain(drths_recorder_t *r)
{
    uint64_t n = 0;
    if (!r->row)
        return 0;
    while (drths_ring_pop(&r->ring, r->row) == 0) {
        drths_csvw_row(&r->csv, r->row);
        if (r->tap)
            r->tap(r->tap_ctx, r->row);
        n++;
    }
    r->written += n;
    return n;
}

void drths_recorder_set_tap(drths_recorder_t *r, void (*tap)(void *ctx, const double *row),
                            void *ctx)
{
    r->tap = tap;
    r->tap_ctx = ctx;
}

uint64_t drths_recorder_dropped(drths_recorder_t *r)
{
    return drths_ring_dropped(&r->ring);
}

int drths_recorder_close(drths_recorder_t *r, drths_error_t *err)
{
    if (!r->row)
        return 0;
    drths_recorder_drain(r);
    int rc = drths_csvw_close(&r->csv, err);
    drths_ring_close(&r->ring);
    free(r->row);
    r->row = NULL;
    return rc;
}
