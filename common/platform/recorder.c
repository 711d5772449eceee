#include "common/platform/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/rtclock.h"

/* The writer's block: large enough that a write(2) per block costs nothing at 5 kHz, small
 * enough to stay a small part of the locked memory. */
#define BLOCK_BYTES ((size_t)256 << 10)
/* The tap ring: the libuv thread drains it every 50 ms (250 rows at 5 kHz); when it is late,
 * telemetry loses rows, which the monitor does not notice (it shows one row in 100). */
#define TAP_ROWS 4096

static char *bin_path_of(const char *csv)
{
    size_t n = strlen(csv);
    int has_csv = n >= 4 && strcmp(csv + n - 4, ".csv") == 0;
    size_t base = has_csv ? n - 4 : n;
    char *p = malloc(base + 5);
    if (p) {
        memcpy(p, csv, base);
        memcpy(p + base, ".bin", 5);
    }
    return p;
}

static void free_all(drths_recorder_t *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    drths_ring_close(&r->ring);
    drths_ring_close(&r->tap_ring);
    if (r->names)
        for (int i = 0; i < r->ncols; i++)
            free(r->names[i]);
    free(r->names);
    r->names = NULL;
    free(r->csv_path);
    free(r->bin_path);
    r->csv_path = r->bin_path = NULL;
    free(r->block);
    r->block = NULL;
    free(r->row);
    r->row = NULL;
}

/* Writes all of buf (retrying short writes and EINTR), adding the bytes written to *done when
 * done is not NULL (a failure after a short write leaves them counted). Returns 0 or a negative
 * errno. */
static int write_all(drths_recorder_t *r, const void *buf, size_t n, uint64_t *done)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = r->write_fn(r->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        p += w;
        n -= (size_t)w;
        if (done)
            *done += (uint64_t)w;
    }
    return 0;
}

/* The first failed write (or write-back): the record stops at the rows written. */
static void mark_failed(drths_recorder_t *r, int e)
{
    r->failed = 1;
    atomic_store(&r->fail_row, (unsigned long long)r->written);
    atomic_store(&r->fail_errno, e);
}

/* The text header, padded with newlines to a multiple of 4096 bytes. */
static int write_header(drths_recorder_t *r, drths_error_t *err)
{
    size_t names_len = 0;
    for (int i = 0; i < r->ncols; i++)
        names_len += strlen(r->names[i]) + 1;
    size_t need = names_len + 256;
    size_t hb = (need + 4095) / 4096 * 4096;
    char *h = malloc(hb);
    if (!h)
        return drths_error_set(err, -ENOMEM, "out of memory for the recorder");
    memset(h, '\n', hb);
    int n = snprintf(h, hb,
                     "drths-record 1\nheader_bytes %zu\ncolumns %d\nrow_bytes %zu\n"
                     "encoding float64 %s\nnames ",
                     hb, r->ncols, r->row_bytes,
                     __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? "little-endian" : "big-endian");
    size_t at = (size_t)n;
    for (int i = 0; i < r->ncols; i++) {
        size_t l = strlen(r->names[i]);
        if (i)
            h[at++] = ',';
        memcpy(h + at, r->names[i], l);
        at += l;
    }
    h[at] = '\n';
    int rc = write_all(r, h, hb, NULL);
    free(h);
    if (rc)
        return drths_error_set(err, rc, "cannot write %s: %s", r->bin_path, strerror(-rc));
    r->header_bytes = hb;
    return 0;
}

int drths_recorder_open(drths_recorder_t *r, const char *path, const char *const *names, int ncols,
                        size_t capacity, drths_error_t *err)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->write_fn = write;
    atomic_init(&r->fail_errno, 0);
    atomic_init(&r->fail_row, 0);
    atomic_init(&r->taken_pub, 0);
    r->ncols = ncols;
    r->row_bytes = (size_t)ncols * sizeof(double);
    atomic_init(&r->quit, 0);
    r->csv_path = strdup(path);
    r->bin_path = bin_path_of(path);
    r->names = calloc((size_t)ncols, sizeof *r->names);
    r->row = calloc((size_t)ncols, sizeof(double));
    r->block_cap = BLOCK_BYTES / r->row_bytes * r->row_bytes;
    if (r->block_cap == 0)
        r->block_cap = r->row_bytes;
    r->block = malloc(r->block_cap);
    int ok = r->csv_path && r->bin_path && r->names && r->row && r->block;
    if (ok) {
        const char *c = strrchr(r->csv_path, '/'), *b = strrchr(r->bin_path, '/');
        snprintf(r->csv_name, sizeof r->csv_name, "%s", c ? c + 1 : r->csv_path);
        snprintf(r->bin_name, sizeof r->bin_name, "%s", b ? b + 1 : r->bin_path);
    }
    for (int i = 0; ok && i < ncols; i++)
        ok = (r->names[i] = strdup(names[i])) != NULL;
    if (!ok) {
        free_all(r);
        return drths_error_set(err, -ENOMEM, "out of memory for the recorder");
    }
    /* Touch the block now, so its pages are resident (and locked under mlockall). */
    memset(r->block, 0, r->block_cap);
    int rc = drths_ring_init(&r->ring, r->row_bytes, capacity);
    if (rc) {
        free_all(r);
        return drths_error_set(err, rc, "cannot allocate the recorder ring (%zu rows)", capacity);
    }
    /* A CSV left in the folder by an earlier run must not pass for this run's record: this
     * run's CSV appears only when it is complete (at close). */
    if (unlink(r->csv_path) != 0 && errno != ENOENT) {
        rc = drths_error_set(err, -errno, "cannot replace %s: %s", r->csv_path, strerror(errno));
        free_all(r);
        return rc;
    }
    r->fd = open(r->bin_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r->fd < 0) {
        rc = drths_error_set(err, -errno, "cannot create %s: %s", r->bin_path, strerror(errno));
        free_all(r);
        return rc;
    }
    rc = write_header(r, err);
    if (rc) {
        free_all(r);
        return rc;
    }
    r->last_write_ns = drths_now_ns();
    r->open = 1;
    return 0;
}

size_t drths_recorder_rows_for(double rate_hz)
{
    size_t rows = 4096;
    while (rows < DRTHS_RECORDER_RING_S * rate_hz && rows < ((size_t)1 << 24))
        rows <<= 1;
    return rows;
}

int drths_recorder_push(drths_recorder_t *r, const double *row)
{
    return drths_ring_push(&r->ring, row);
}

/* Writes the block out (the writer's side). After the first failure nothing more is written:
 * the record on disk stops at one row and has no hole. */
static void flush_block(drths_recorder_t *r, int64_t now)
{
    r->last_write_ns = now;
    if (r->block_len == 0)
        return;
    int64_t t0 = drths_now_ns();
    if (!r->failed) {
        int e = write_all(r, r->block, r->block_len, &r->out_bytes);
        r->written = r->out_bytes / r->row_bytes;
        if (e)
            mark_failed(r, -e);
    }
    int64_t dt = drths_now_ns() - t0;
    if (dt > r->max_write_ns)
        r->max_write_ns = dt;
    r->block_len = 0;
}

/* One pass of the writer: every queued row into the block, each full block to the file, and
 * what is left too once DRTHS_RECORDER_FLUSH_MS have passed (or when final). Returns the rows
 * moved. */
static uint64_t writer_pass(drths_recorder_t *r, int final)
{
    uint64_t n = 0;
    size_t waiting = drths_ring_count(&r->ring);
    if (waiting > r->peak_rows)
        r->peak_rows = waiting;
    while (drths_ring_pop(&r->ring, r->block + r->block_len) == 0) {
        if (r->tap)
            drths_ring_push(&r->tap_ring, r->block + r->block_len);
        r->block_len += r->row_bytes;
        n++;
        if (r->block_len + r->row_bytes > r->block_cap)
            flush_block(r, drths_now_ns());
    }
    r->taken += n;
    atomic_store_explicit(&r->taken_pub, (unsigned long long)r->taken, memory_order_release);
    int64_t now = drths_now_ns();
    if (final || now - r->last_write_ns >= (int64_t)DRTHS_RECORDER_FLUSH_MS * 1000000)
        flush_block(r, now);
    return n;
}

static void *writer_main(void *arg)
{
    drths_recorder_t *r = arg;
    int64_t prev = drths_now_ns();
    const struct timespec nap = {0, (long)DRTHS_RECORDER_POLL_MS * 1000000L};
    for (;;) {
        int quit = atomic_load_explicit(&r->quit, memory_order_acquire);
        int64_t now = drths_now_ns();
        if (now - prev > r->max_stall_ns)
            r->max_stall_ns = now - prev;
        prev = now;
        writer_pass(r, quit);
        if (quit)
            break;
        nanosleep(&nap, NULL);
    }
    return NULL;
}

int drths_recorder_start(drths_recorder_t *r, int priority, drths_error_t *err)
{
    if (!r->open || r->thread_on)
        return 0;
    int rc = drths_rt_thread_create_fifo(&r->thread, writer_main, r, priority, &r->writer_rt);
    if (rc)
        return drths_error_set(err, rc, "cannot start the recorder's writer thread: %s",
                               strerror(-rc));
    r->thread_on = 1;
    return 0;
}

static uint64_t serve_tap(drths_recorder_t *r)
{
    uint64_t n = 0;
    if (!r->tap)
        return 0;
    while (drths_ring_pop(&r->tap_ring, r->row) == 0) {
        r->tap(r->tap_ctx, r->row);
        n++;
    }
    return n;
}

uint64_t drths_recorder_drain(drths_recorder_t *r)
{
    if (!r->open)
        return 0;
    uint64_t n = r->thread_on ? 0 : writer_pass(r, 0);
    serve_tap(r);
    return n;
}

int drths_recorder_set_tap(drths_recorder_t *r, void (*tap)(void *ctx, const double *row),
                           void *ctx)
{
    if (!r->tap_ring.buf) {
        int rc = drths_ring_init(&r->tap_ring, r->row_bytes, TAP_ROWS);
        if (rc)
            return rc;
    }
    r->tap = tap;
    r->tap_ctx = ctx;
    return 0;
}

uint64_t drths_recorder_dropped(drths_recorder_t *r)
{
    return drths_ring_dropped(&r->ring);
}

int drths_recorder_failed(drths_recorder_t *r, uint64_t *row, uint64_t *lost)
{
    int e = atomic_load(&r->fail_errno);
    uint64_t at = e ? (uint64_t)atomic_load(&r->fail_row) : 0;
    if (row)
        *row = at;
    if (lost) {
        uint64_t seen = (uint64_t)atomic_load(&r->taken_pub) + drths_ring_count(&r->ring);
        *lost = e && seen > at ? seen - at : 0;
    }
    return e;
}

uint64_t drths_recorder_unwritten(const drths_recorder_t *r)
{
    return r->taken > r->written ? r->taken - r->written : 0;
}

/* The header's size for ncols columns, as write_header makes it (names of at most 64 bytes
 * each are assumed; a longer header only takes a little of the CSV's margin). */
static uint64_t header_bytes_for(int ncols)
{
    uint64_t need = (uint64_t)ncols * 65 + 256;
    return (need + 4095) / 4096 * 4096;
}

uint64_t drths_recorder_bin_bytes(int ncols, uint64_t rows)
{
    return header_bytes_for(ncols) + rows * (uint64_t)ncols * sizeof(double);
}

uint64_t drths_recorder_csv_bytes(int ncols, uint64_t rows)
{
    /* "%.9g" of a double is at most 15 characters ("-1.23456789e-300"), an integer below
     * 1e15 at most 16 ("-999999999999999"); each is followed by a comma or the newline. */
    return (uint64_t)ncols * 65 + rows * (uint64_t)ncols * 17;
}

int drths_recorder_preallocate(drths_recorder_t *r, uint64_t rows, drths_error_t *err)
{
    uint64_t bytes = r->header_bytes + rows * r->row_bytes;
    /* FALLOC_FL_KEEP_SIZE: the blocks are the file's, its size is still what was written (the
     * header now), so a reader of the .bin during the run (or after kill -9) sees only rows. */
    if (fallocate(r->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) != 0) {
        int e = errno;
        if (e == EOPNOTSUPP)
            return -EOPNOTSUPP;
        return drths_error_set(err, -e, "cannot reserve %.1f MB for %s: %s", (double)bytes / 1e6,
                               r->bin_path, strerror(e));
    }
    r->prealloc_bytes = bytes;
    return 0;
}

int drths_recorder_failure_text(char *buf, size_t cap, const char *file, int errnum, uint64_t row,
                                uint64_t rows, const char *what)
{
    return snprintf(buf, cap, "writing %s failed (%s): the record stops at row %llu, %llu rows %s",
                    file, strerror(errnum), (unsigned long long)row, (unsigned long long)rows,
                    what);
}

int drths_recorder_close(drths_recorder_t *r, drths_error_t *err)
{
    if (!r->open)
        return 0;
    r->open = 0;
    if (r->thread_on) {
        atomic_store_explicit(&r->quit, 1, memory_order_release);
        pthread_join(r->thread, NULL);
        r->thread_on = 0;
    } else {
        writer_pass(r, 1);
    }
    serve_tap(r);
    int rc = 0;
    int e = atomic_load(&r->fail_errno);
    if (r->failed) {
        char text[sizeof err->msg];
        drths_recorder_failure_text(text, sizeof text, r->bin_path, e, r->written,
                                    drths_recorder_unwritten(r), "not written");
        rc = drths_error_set(err, -EIO, "%s", text);
    } else if (fsync(r->fd) != 0 && errno != EINVAL) {
        /* The kernel could not write back what it had accepted: which rows is unknown. */
        const int sync_errno = errno;
        mark_failed(r, sync_errno);
        rc = drths_error_set(err, -EIO, "writing %s failed: %s", r->bin_path,
                             strerror(sync_errno));
    }
    /* The blocks reserved for rows the run did not write go back to the filesystem (a run
     * that ended early, or the margin for a HOLD that did not happen). */
    if (r->prealloc_bytes > r->header_bytes + r->out_bytes) {
        /* A truncation to the file's own size frees the blocks beyond it (ext4, XFS, tmpfs),
         * where a punched hole beyond the end is a no-op on ext4. The size is the header and
         * the bytes written: a partial last row stays for the conversion to leave out. */
        off_t end = (off_t)(r->header_bytes + r->out_bytes);
        if (ftruncate(r->fd, end) != 0) {
            /* Not worth failing the record for: the blocks stay allocated. */
        }
    }
    if (close(r->fd) != 0 && rc == 0)
        rc = drths_error_set(err, -EIO, "writing %s failed: %s", r->bin_path, strerror(errno));
    r->fd = -1;
    /* The CSV, even after a failed write: it holds every row the .bin holds. */
    int crc = drths_recorder_bin_to_csv(r->bin_path, r->csv_path, &r->converted, rc ? NULL : err);
    if (crc != 0) {
        /* A CSV cut short (the disk refused it) must not pass for the record, and it would
         * take the room summary.json needs: it goes, and the .bin is the record. */
        unlink(r->csv_path);
        r->converted = 0;
        if (rc == 0)
            rc = drths_error_set(err, crc,
                                 "writing %s failed, so it was removed: the record is "
                                 "whole in %s (%llu rows; docs/design.md, Binary record)",
                                 r->csv_path, r->bin_name, (unsigned long long)r->written);
    }
    if (rc == 0)
        rc = crc;
    if (rc == 0 && r->converted != r->written)
        rc = drths_error_set(err, -EIO, "%s holds %llu rows, %llu were written", r->bin_path,
                             (unsigned long long)r->converted, (unsigned long long)r->written);
    /* What the summary reads stays (the counts, the file names, the drop count); the ring's
     * capacity is kept before its storage goes. */
    r->ring_rows = drths_ring_capacity(&r->ring);
    free_all(r);
    return rc;
}

/* Reads "key value" from the header text; returns the value or -1. */
static long header_value(const char *h, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = h; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
            return strtol(p + kl + 1, NULL, 10);
    return -1;
}

int drths_recorder_bin_to_csv(const char *bin_path, const char *csv_path, uint64_t *rows,
                              drths_error_t *err)
{
    if (rows)
        *rows = 0;
    FILE *in = fopen(bin_path, "rb");
    if (!in)
        return drths_error_set(err, -errno, "cannot read %s: %s", bin_path, strerror(errno));
    char first[4097];
    size_t got = fread(first, 1, 4096, in);
    first[got] = '\0';
    long hb = header_value(first, "header_bytes"), nc = header_value(first, "columns");
    long rb = header_value(first, "row_bytes");
    if (strncmp(first, "drths-record 1\n", 15) != 0 || hb < 4096 || hb % 4096 || nc < 1 ||
        rb != nc * (long)sizeof(double)) {
        fclose(in);
        return drths_error_set(err, -EINVAL, "%s is not a drths record", bin_path);
    }
    char *head = malloc((size_t)hb + 1);
    char **names = calloc((size_t)nc, sizeof *names);
    double *row = malloc((size_t)rb);
    int rc = head && names && row ? 0 : -ENOMEM;
    if (rc == 0 && (fseek(in, 0, SEEK_SET) != 0 || fread(head, 1, (size_t)hb, in) != (size_t)hb))
        rc = -EIO;
    if (rc == 0) {
        head[hb] = '\0';
        char *p = strstr(head, "\nnames ");
        char *end = p ? strchr(p + 7, '\n') : NULL;
        if (!end) {
            rc = -EINVAL;
        } else {
            *end = '\0';
            char *save = NULL;
            long i = 0;
            for (char *t = strtok_r(p + 7, ",", &save); t && i < nc; t = strtok_r(NULL, ",", &save))
                names[i++] = t;
            if (i != nc)
                rc = -EINVAL;
        }
    }
    drths_csvw_t w;
    memset(&w, 0, sizeof w);
    if (rc == 0)
        rc = drths_csvw_open(&w, csv_path, (const char *const *)names, (int)nc, err);
    else
        drths_error_set(err, rc, "%s: %s", bin_path,
                        rc == -ENOMEM ? "out of memory" : "unreadable header");
    uint64_t n = 0;
    if (rc == 0) {
        /* A partial last row (a site killed in the middle of a write) is left out. */
        while (fread(row, (size_t)rb, 1, in) == 1) {
            drths_csvw_row(&w, row);
            n++;
        }
        if (ferror(in))
            rc = drths_error_set(err, -EIO, "reading %s failed", bin_path);
        int crc = drths_csvw_close(&w, rc ? NULL : err);
        if (rc == 0)
            rc = crc;
    }
    fclose(in);
    free(head);
    free(names);
    free(row);
    if (rows)
        *rows = n;
    return rc;
}

void drths_recorder_json(drths_json_t *j, const char *key, const drths_recorder_t *r)
{
    drths_json_object_begin(j, key);
    drths_json_string(j, "csv", r->csv_name);
    drths_json_string(j, "bin", r->bin_name);
    drths_json_int(j, "rows", (int64_t)r->written);
    drths_json_int(j, "dropped_rows", (int64_t)drths_ring_dropped((drths_ring_t *)&r->ring));
    drths_json_int(j, "unwritten_rows", (int64_t)drths_recorder_unwritten(r));
    int e = atomic_load((atomic_int *)&r->fail_errno);
    drths_json_string(j, "write_error", e ? strerror(e) : "");
    drths_json_int(j, "reserved_bytes", (int64_t)r->prealloc_bytes);
    drths_json_int(j, "ring_rows",
                   (int64_t)(r->ring_rows ? r->ring_rows : drths_ring_capacity(&r->ring)));
    drths_json_int(j, "peak_ring_rows", (int64_t)r->peak_rows);
    drths_json_number(j, "writer_max_stall_ms", (double)r->max_stall_ns * 1e-6);
    drths_json_number(j, "writer_max_write_ms", (double)r->max_write_ns * 1e-6);
    drths_json_string(j, "writer_priority",
                      r->writer_rt.what[0] ? drths_rt_status_name(r->writer_rt.status)
                                           : "no writer thread");
    drths_json_object_end(j);
}
