/* The run recorder (docs/design.md#records-and-reports).
 *
 * Three threads take part, and only the first one is real-time:
 *  - the RT thread, which never writes files or logs, pushes fixed-size rows of doubles into an
 *    SPSC ring (drths_recorder_push) without blocking;
 *  - the writer thread (drths_recorder_start), at a SCHED_FIFO priority below the control loop
 *    (DRTHS_RECORDER_WRITER_PRIORITY), moves the rows from the ring into a large block and writes
 *    the block to a binary file (<name>.bin beside the CSV path) with plain write(2): no
 *    formatting, so it keeps up with any rate the disk accepts, and a stall of the disk is
 *    absorbed by the ring. With a tap it also hands each row to a second small SPSC ring for the
 *    libuv thread (telemetry), dropping there rather than waiting;
 *  - the libuv thread calls drths_recorder_drain every 50 ms, which feeds the tap; at the end,
 *    drths_recorder_close (after the RT thread has joined) stops the writer and converts the
 *    binary file into the CSV with common/platform/csvwrite.c, exactly as rows were formatted before.
 *
 * Without drths_recorder_start (the tests, the offline tools) there is no writer thread:
 * drths_recorder_drain does the writer's work on the calling thread.
 *
 * A row is lost when the ring is full: the push drops it and counts it
 * (drths_recorder_dropped), so the site can warn during the run and mark the record incomplete;
 * the RT thread is never blocked. A row is also lost when the disk refuses it: from the first
 * write that fails (a full disk, an I/O error, a file size limit) the writer writes nothing more
 * (the record on disk is complete up to that row, with no hole after it), counts every row it
 * takes from then on as not written (drths_recorder_unwritten) and raises drths_recorder_failed,
 * which the site's loop polls to end the run.
 *
 * Space: drths_recorder_preallocate reserves the .bin's blocks for the rows a run will write
 * (fallocate with FALLOC_FL_KEEP_SIZE: the file's size still grows row by row, so readers see
 * only rows written), so that another file filling the disk during the run cannot take them;
 * close gives back the blocks the run did not use.
 *
 * The binary file starts with a text header of header_bytes (a multiple of 4096) bytes:
 *     drths-record 1
 *     header_bytes 4096
 *     columns 16
 *     row_bytes 128
 *     encoding float64 little-endian
 *     names tick,time_s,...      (the CSV header: each name ends with its unit)
 * padded with newlines; then one row after the other, row_bytes each, the doubles in column
 * order. A site killed before it could convert leaves its record complete up to the last
 * block written (at most DRTHS_RECORDER_FLUSH_MS old) in this file.
 *
 * Ownership: the caller owns drths_recorder_t; the recorder owns its rings, buffers, file
 * descriptor and writer thread. drths_recorder_push is the only function the RT thread calls.
 */
#ifndef DRTHS_RECORDER_H
#define DRTHS_RECORDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/platform/csvwrite.h"
#include "common/platform/error.h"
#include "common/platform/json.h"
#include "common/platform/ring.h"
#include "common/platform/rt.h"

/* The writer thread's SCHED_FIFO priority: below the control loops (80) and the impairment
 * relay of a rehearsal (70), above everything that runs at normal priority. */
#define DRTHS_RECORDER_WRITER_PRIORITY 60

/* The writer writes what it holds at least this often, so the .bin on disk lags the run by
 * at most this much (and a reader can follow the run's progress in it). */
#define DRTHS_RECORDER_FLUSH_MS 50

/* How long the writer sleeps when the ring is empty. */
#define DRTHS_RECORDER_POLL_MS 5

typedef struct drths_recorder {
    drths_ring_t ring;     /* RT thread -> writer */
    drths_ring_t tap_ring; /* writer -> libuv thread; only with a tap */
    int ncols;
    size_t row_bytes;
    char *csv_path, *bin_path;         /* owned; freed by close */
    char csv_name[128], bin_name[128]; /* their file names, kept after close */
    size_t ring_rows;                  /* the ring's capacity, kept after close */
    char **names;                      /* owned copies of the column names */
    int fd;                            /* the .bin, -1 when closed */
    size_t header_bytes;
    unsigned char *block; /* the writer's block, block_cap bytes */
    size_t block_cap, block_len;
    int64_t last_write_ns;
    double *row;        /* the libuv thread's buffer for the tap */
    uint64_t written;   /* rows on disk in the .bin (writer side; read after close) */
    uint64_t taken;     /* rows the writer took from the ring (writer side) */
    uint64_t converted; /* rows in the CSV after close */
    uint64_t out_bytes; /* bytes of rows written to the .bin (writer side) */
    uint64_t prealloc_bytes; /* the .bin's size reserved by drths_recorder_preallocate */
    int failed;         /* a write failed: close returns -EIO */
    atomic_int fail_errno;   /* the first failed write's errno, 0 while none failed (any thread) */
    atomic_ullong fail_row;  /* the rows on disk when it failed (any thread) */
    atomic_ullong taken_pub; /* taken, published by each writer pass (any thread) */
    int open;

    /* the writer thread */
    pthread_t thread;
    int thread_on;
    atomic_int quit;
    drths_rt_item_t writer_rt; /* its priority: applied, not permitted or not requested */

    /* What the writer saw, for the summary: the longest time between two passes over the ring
     * (a write(2) that blocked, or the thread not scheduled) and the most rows it ever found
     * waiting in the ring. Written by the writer, read after close. */
    int64_t max_stall_ns;
    int64_t max_write_ns;
    uint64_t peak_rows;

    void (*tap)(void *ctx, const double *row); /* sees the rows written (may be NULL) */
    void *tap_ctx;

    /* write(2); a test replaces it to stall the "disk". */
    ssize_t (*write_fn)(int fd, const void *buf, size_t n);
} drths_recorder_t;

/* Prepares a record whose CSV will be path (any previous file there is removed) and whose
 * binary stream is path with .csv replaced by .bin (created now, with its header), with a ring
 * of capacity rows (rounded up to a power of two). No thread yet. init-only. */
int drths_recorder_open(drths_recorder_t *r, const char *path, const char *const *names, int ncols,
                        size_t capacity, drths_error_t *err);

/* The ring size for a loop at rate_hz: DRTHS_RECORDER_RING_S seconds of rows (a power of two,
 * at least 4096). Measured on a loaded 2-CPU virtual machine (six busy loops, a dd writing
 * 1 MiB blocks with O_DIRECT or through the page cache, and other builds beside a run;
 * tests/integration/test_records_under_load.sh), the writer's longest stall was 13 ms at
 * SCHED_FIFO 60 and 80 ms at the default policy (no privilege), with at most 403 rows waiting:
 * two seconds cover 25 times that, for a slower disk, and keep the memory that mlockall pins
 * to a few MB. init-only. */
#define DRTHS_RECORDER_RING_S 2.0
size_t drths_recorder_rows_for(double rate_hz);

/* Starts the writer thread at SCHED_FIFO priority (0: the default policy). Without the
 * privilege the thread runs at the default policy and r->writer_rt says so (not an error).
 * Returns 0 or a negative errno (no thread). init-only. */
int drths_recorder_start(drths_recorder_t *r, int priority, drths_error_t *err);

/* Queues one row of ncols values. Returns 0 or -ENOBUFS (dropped and counted). RT-safe. */
int drths_recorder_push(drths_recorder_t *r, const double *row);

/* The libuv thread's share, every 50 ms: without a writer thread, first the writer's work
 * (every queued row into the .bin); then the tap for the rows the writer handed over. Returns
 * the rows written to the .bin by this call (0 with a writer thread). */
uint64_t drths_recorder_drain(drths_recorder_t *r);

/* Calls tap(ctx, row) on the libuv thread (from drths_recorder_drain) for the rows written
 * (the live monitor's telemetry samples the record this way, away from the RT thread and off
 * the writer's path: a slow tap loses tap rows, never record rows). Set after _open and before
 * _start. Returns 0 or -ENOMEM. init-only. */
int drths_recorder_set_tap(drths_recorder_t *r, void (*tap)(void *ctx, const double *row),
                           void *ctx);

/* Rows dropped because the ring was full. RT-safe (any thread). */
uint64_t drths_recorder_dropped(drths_recorder_t *r);

/* The errno of the first write to the .bin that failed (ENOSPC, EIO, EFBIG ...), 0 while none
 * did; *row (may be NULL) gets the rows on disk before it, where the record stops, and *lost
 * (may be NULL) the rows lost so far (taken by the writer or waiting in the ring, none of which
 * will reach the disk). RT-safe (any thread; the site's loop polls it). */
int drths_recorder_failed(drths_recorder_t *r, uint64_t *row, uint64_t *lost);

/* The sentence of a write the disk refused: "writing <file> failed (<errnum's text>): the
 * record stops at row <row>, <rows> rows <what>" (what: "not written", "lost so far"), the one
 * wording of it for drths_recorder_close and the site's shell. Returns snprintf's count.
 * init-only (snprintf). */
int drths_recorder_failure_text(char *buf, size_t cap, const char *file, int errnum, uint64_t row,
                                uint64_t rows, const char *what);

/* Rows taken from the ring that did not reach the disk because a write failed. After close. */
uint64_t drths_recorder_unwritten(const drths_recorder_t *r);

/* The .bin's size for rows rows (the header and the rows), for drths_recorder_preallocate and
 * for the space a run needs before its recorder is opened. */
uint64_t drths_recorder_bin_bytes(int ncols, uint64_t rows);

/* The most bytes the CSV of rows rows of ncols columns can take (each value at most 16
 * characters and a separator, plus the header line). */
uint64_t drths_recorder_csv_bytes(int ncols, uint64_t rows);

/* Reserves the .bin's blocks for rows rows (drths_recorder_bin_bytes) without changing its
 * size. Returns 0, -EOPNOTSUPP when the filesystem cannot (nothing reserved: the caller checks
 * the free space instead), or -ENOSPC and other negative errnos (err says which file and how
 * much). init-only. */
int drths_recorder_preallocate(drths_recorder_t *r, uint64_t rows, drths_error_t *err);

/* Stops and joins the writer (it writes every queued row first), fsyncs the .bin, gives back
 * the blocks preallocated beyond its end, then writes the CSV from it (r->converted rows). The
 * .bin is kept; a CSV that could not be written whole is removed (the .bin is the record). Call
 * after the RT thread has joined. Returns 0, -EIO if a write failed (err says which file, why and
 * how many rows did not reach it). Safe twice. init-only. */
int drths_recorder_close(drths_recorder_t *r, drths_error_t *err);

/* Converts a .bin record (header above) into a CSV at csv_path, formatted as the recorder's
 * CSV. *rows gets the rows converted (may be NULL). Returns 0 or a negative errno. init-only. */
int drths_recorder_bin_to_csv(const char *bin_path, const char *csv_path, uint64_t *rows,
                              drths_error_t *err);

/* The "recorder" member of summary.json: files, rows, dropped rows, ring size and peak, the
 * writer's longest stall and its priority. After close. init-only. */
void drths_recorder_json(drths_json_t *j, const char *key, const drths_recorder_t *r);

#endif
