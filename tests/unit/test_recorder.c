/* Tests of the run recorder (common/platform/recorder.c): the binary stream converts to the same CSV as
 * rows written straight with common/platform/csvwrite.c, with or without the writer thread; a stalled
 * writer never blocks the producer, and the rows a full ring drops are counted and reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/csvwrite.h"
#include "common/platform/json.h"
#include "common/platform/recorder.h"

#define NCOLS 5

static const char *const names[NCOLS] = {"tick", "time_s", "x_m", "force_N", "flag"};

/* A synthetic table with what formatting must get right: integers, NaN, negative zero, values
 * on both sides of the integer shortcut, tiny and huge exponents, infinities. */
static void make_row(int i, double *row)
{
    static const double odd[] = {NAN,      -0.0,    1e300,  -1e-300, 1.5e15,
                                 -2.5e-17, INFINITY, -INFINITY, 0.1, 123456789.123456789,
                                 1e15,     -1e15,   4.9e-324, 1.7976931348623157e308, -7};
    row[0] = i;
    row[1] = i * 2e-4;
    row[2] = odd[i % 15];
    row[3] = sin(i) * 1e4;
    row[4] = odd[(i * 7) % 15];
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* The lines of the CSV at path (its header included). */
static int csv_lines(const char *path)
{
    char *csv = slurp(path);
    int lines = 0;
    for (char *p = csv; *p; p++)
        lines += *p == '\n';
    free(csv);
    return lines;
}

/* The recorder's summary.json object as text (to be freed). */
static char *recorder_json(const drths_recorder_t *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    drths_json_t j;
    drths_json_init(&j, f);
    drths_json_object_begin(&j, NULL);
    drths_recorder_json(&j, "recorder", r);
    drths_json_object_end(&j);
    fclose(f);
    return text;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* The recorder's CSV (through the .bin) is byte for byte the one csvwrite writes directly. */
static void round_trip(int threaded)
{
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char direct[128], path[128], bin[128], again[128];
    snprintf(direct, sizeof direct, "%s/direct.csv", dir);
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    snprintf(again, sizeof again, "%s/again.csv", dir);
    const int rows = 20000; /* more than one 256 KiB block of 40-byte rows */
    drths_error_t err;

    drths_csvw_t w;
    assert_int_equal(drths_csvw_open(&w, direct, names, NCOLS, &err), 0);
    double row[NCOLS];
    for (int i = 0; i < rows; i++) {
        make_row(i, row);
        drths_csvw_row(&w, row);
    }
    assert_int_equal(drths_csvw_close(&w, &err), 0);

    drths_recorder_t r;
    assert_int_equal(drths_recorder_open(&r, path, names, NCOLS, 1 << 15, &err), 0);
    if (threaded)
        assert_int_equal(drths_recorder_start(&r, 0, &err), 0);
    /* The CSV appears only when the record is complete. */
    assert_int_not_equal(access(path, F_OK), 0);
    for (int i = 0; i < rows; i++) {
        make_row(i, row);
        assert_int_equal(drths_recorder_push(&r, row), 0);
        if (i % 5000 == 4999)
            drths_recorder_drain(&r);
    }
    assert_int_equal(drths_recorder_close(&r, &err), 0);
    assert_int_equal(drths_recorder_close(&r, &err), 0); /* safe twice */
    assert_int_equal(r.written, rows);
    assert_int_equal(r.converted, rows);
    assert_int_equal(drths_recorder_dropped(&r), 0);

    char *a = slurp(direct), *b = slurp(path);
    assert_string_equal(a, b);
    /* The kept .bin converts again to the same CSV. */
    uint64_t n = 0;
    assert_int_equal(drths_recorder_bin_to_csv(bin, again, &n, &err), 0);
    assert_int_equal(n, rows);
    char *c = slurp(again);
    assert_string_equal(a, c);
    free(a);
    free(b);
    free(c);
    unlink(direct);
    unlink(path);
    unlink(bin);
    unlink(again);
    rmdir(dir);
}

static void test_round_trip(void **state)
{
    (void)state;
    round_trip(0);
}

static void test_round_trip_thread(void **state)
{
    (void)state;
    round_trip(1);
}

/* A "disk" that blocks the writer in its first write until the test lets it go. */
static sem_t stall_release;
static atomic_int stall_entered;

static ssize_t stalling_write(int fd, const void *buf, size_t n)
{
    if (!atomic_exchange(&stall_entered, 1))
        while (sem_wait(&stall_release) != 0)
            ;
    return write(fd, buf, n);
}

static void tap_count(void *ctx, const double *row)
{
    (void)row;
    (*(int *)ctx)++;
}

/* The writer stalls in write(2): the producer keeps pushing without waiting until the ring is
 * full, then each push fails at once and is counted; the summary reports the count; once the
 * disk is back every row that was not dropped reaches the CSV, in order. */
static void test_stalled_writer(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], bin[128];
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    drths_error_t err;
    drths_recorder_t r;
    const int cap = 1024;
    assert_int_equal(drths_recorder_open(&r, path, names, NCOLS, cap, &err), 0);
    int tapped = 0;
    assert_int_equal(drths_recorder_set_tap(&r, tap_count, &tapped), 0);
    r.write_fn = stalling_write;
    sem_init(&stall_release, 0, 0);
    atomic_store(&stall_entered, 0);
    assert_int_equal(drths_recorder_start(&r, 0, &err), 0);

    double row[NCOLS];
    make_row(0, row);
    assert_int_equal(drths_recorder_push(&r, row), 0);
    /* The writer writes its block after DRTHS_RECORDER_FLUSH_MS and blocks there. */
    for (int i = 0; i < 400 && !atomic_load(&stall_entered); i++)
        sleep_ms(5);
    assert_true(atomic_load(&stall_entered));

    for (int i = 1; i <= cap; i++) {
        make_row(i, row);
        assert_int_equal(drths_recorder_push(&r, row), 0);
    }
    for (int i = 0; i < 10; i++)
        assert_int_equal(drths_recorder_push(&r, row), -ENOBUFS);
    assert_int_equal(drths_recorder_dropped(&r), 10);
    drths_recorder_drain(&r); /* the libuv thread is not held up either */
    assert_int_equal(tapped, 1);

    sem_post(&stall_release);
    assert_int_equal(drths_recorder_close(&r, &err), 0);
    assert_int_equal(r.written, cap + 1);
    assert_int_equal(r.converted, cap + 1);
    assert_int_equal(drths_recorder_dropped(&r), 10);
    assert_int_equal(tapped, cap + 1);
    assert_true(r.peak_rows >= (uint64_t)cap);

    /* The count reaches summary.json. */
    char *text = recorder_json(&r);
    assert_non_null(strstr(text, "\"dropped_rows\": 10"));
    assert_non_null(strstr(text, "\"rows\": 1025"));
    assert_non_null(strstr(text, "\"bin\": \"rec.bin\""));
    free(text);

    assert_int_equal(csv_lines(path), 1 + cap + 1);
    sem_destroy(&stall_release);
    unlink(path);
    unlink(bin);
    rmdir(dir);
}

/* A disk that refuses writes after limit bytes (a partial write first, then ENOSPC). */
static size_t disk_left;
static ssize_t full_disk_write(int fd, const void *buf, size_t n)
{
    if (disk_left == 0) {
        errno = ENOSPC;
        return -1;
    }
    if (n > disk_left)
        n = disk_left;
    ssize_t w = write(fd, buf, n);
    if (w > 0)
        disk_left -= (size_t)w;
    return w;
}

/* A write the disk refuses is never silent: the writer stops at the last whole row on disk (no
 * hole after it), raises drths_recorder_failed with the errno and that row, counts every row it
 * could not write, close says so (-EIO and a sentence), the CSV holds exactly the rows on disk
 * and summary.json carries the count and the error. */
static void test_write_failure(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], bin[128];
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    drths_error_t err;
    drths_recorder_t r;
    const int rows = 3000;
    assert_int_equal(drths_recorder_open(&r, path, names, NCOLS, 4096, &err), 0);
    const size_t row_bytes = NCOLS * sizeof(double);
    disk_left = 1000 * row_bytes + 17; /* 1000 rows and part of the next */
    r.write_fn = full_disk_write;
    assert_int_equal(drths_recorder_failed(&r, NULL, NULL), 0);
    double row[NCOLS];
    for (int i = 0; i < rows; i++) {
        make_row(i, row);
        assert_int_equal(drths_recorder_push(&r, row), 0);
    }
    uint64_t at = 0, lost = 0;
    /* Without a writer thread close writes the 3000 rows (one block) itself. */
    assert_int_equal(drths_recorder_close(&r, &err), -EIO);
    assert_int_equal(drths_recorder_failed(&r, &at, &lost), ENOSPC);
    assert_int_equal(at, 1000);
    assert_int_equal(r.written, 1000);
    assert_int_equal(drths_recorder_unwritten(&r), rows - 1000);
    assert_int_equal(r.converted, 1000);
    assert_non_null(strstr(err.msg, "No space left on device"));
    assert_non_null(strstr(err.msg, "the record stops at row 1000, 2000 rows not written"));

    char *text = recorder_json(&r);
    assert_non_null(strstr(text, "\"unwritten_rows\": 2000"));
    assert_non_null(strstr(text, "\"write_error\": \"No space left on device\""));
    assert_non_null(strstr(text, "\"rows\": 1000"));
    free(text);

    assert_int_equal(csv_lines(path), 1 + 1000);
    unlink(path);
    unlink(bin);
    rmdir(dir);
}

/* The same failure during the run, with the writer thread: drths_recorder_failed says it while
 * rows are still pushed (the site's loop polls it), counting the rows lost so far; nothing is
 * written after the failure, even when the disk has room again. */
static void test_write_failure_live(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], bin[128];
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    drths_error_t err;
    drths_recorder_t r;
    assert_int_equal(drths_recorder_open(&r, path, names, NCOLS, 1 << 16, &err), 0);
    const size_t row_bytes = NCOLS * sizeof(double);
    disk_left = 500 * row_bytes;
    r.write_fn = full_disk_write;
    assert_int_equal(drths_recorder_start(&r, 0, &err), 0);
    double row[NCOLS];
    int pushed = 0, e = 0;
    uint64_t at = 0, lost = 0;
    /* Bounded: the writer writes at least every DRTHS_RECORDER_FLUSH_MS. */
    for (int k = 0; k < 400 && !e; k++) {
        for (int i = 0; i < 100; i++, pushed++) {
            make_row(pushed, row);
            assert_int_equal(drths_recorder_push(&r, row), 0);
        }
        sleep_ms(5);
        e = drths_recorder_failed(&r, &at, &lost);
    }
    assert_int_equal(e, ENOSPC);
    assert_int_equal(at, 500);
    assert_true(lost >= 1 && lost <= (uint64_t)pushed - 500);
    disk_left = (size_t)1 << 30; /* room again: still nothing after the hole */
    for (int i = 0; i < 100; i++, pushed++) {
        make_row(pushed, row);
        assert_int_equal(drths_recorder_push(&r, row), 0);
    }
    assert_int_equal(drths_recorder_close(&r, &err), -EIO);
    assert_int_equal(r.written, 500);
    assert_int_equal(drths_recorder_unwritten(&r), (uint64_t)pushed - 500);
    struct stat st;
    assert_int_equal(stat(bin, &st), 0);
    assert_int_equal((uint64_t)st.st_size, r.header_bytes + 500 * row_bytes);
    unlink(path);
    unlink(bin);
    rmdir(dir);
}

/* A CSV the disk refuses (here a file size limit between the .bin's size and the CSV's) is
 * removed rather than left cut short, and close says the .bin holds the record. */
static void test_csv_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], bin[128];
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    drths_error_t err;
    drths_recorder_t r;
    assert_int_equal(drths_recorder_open(&r, path, names, NCOLS, 4096, &err), 0);
    /* Values whose text is twice their 8 bytes: the CSV is larger than the .bin. */
    double row[NCOLS];
    for (int i = 0; i < 3000; i++) {
        for (int k = 0; k < NCOLS; k++)
            row[k] = -1.23456789e-100 * (i + k + 1);
        assert_int_equal(drths_recorder_push(&r, row), 0);
    }
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = r.header_bytes + 3000 * 40; /* the .bin fits, its CSV does not */
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = drths_recorder_close(&r, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, -EIO);
    assert_int_equal(r.written, 3000);
    assert_int_equal(r.converted, 0);
    assert_non_null(
        strstr(err.msg, "so it was removed: the record is whole in rec.bin (3000 rows"));
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(stat(bin, &st), 0);
    assert_int_equal((uint64_t)st.st_size, r.header_bytes + 3000 * 40);
    unlink(bin);
    rmdir(dir);
}

/* The .bin's blocks for a run are reserved at the start without changing its size (a reader
 * sees only the rows written), and what the run did not use is given back at close. */
static void test_preallocate(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], bin[128];
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    drths_error_t err;
    drths_recorder_t r;
    assert_int_equal(drths_recorder_open(&r, path, names, NCOLS, 1024, &err), 0);
    const uint64_t rows = 100000; /* 4 MB */
    int rc = drths_recorder_preallocate(&r, rows, &err);
    if (rc == -EOPNOTSUPP) {
        drths_recorder_close(&r, NULL);
        skip();
    }
    assert_int_equal(rc, 0);
    assert_int_equal(drths_recorder_bin_bytes(NCOLS, rows), r.header_bytes + rows * 40);
    struct stat st;
    assert_int_equal(stat(bin, &st), 0);
    assert_int_equal((uint64_t)st.st_size, r.header_bytes);
    assert_true((uint64_t)st.st_blocks * 512 >= r.header_bytes + rows * 40);
    double row[NCOLS];
    for (int i = 0; i < 10; i++) {
        make_row(i, row);
        assert_int_equal(drths_recorder_push(&r, row), 0);
    }
    assert_int_equal(drths_recorder_close(&r, &err), 0);
    assert_int_equal(stat(bin, &st), 0);
    assert_int_equal((uint64_t)st.st_size, r.header_bytes + 10 * 40);
    assert_true((uint64_t)st.st_blocks * 512 < 1 << 20);
    assert_int_equal(r.converted, 10);
    unlink(path);
    unlink(bin);
    rmdir(dir);
}

/* A .bin cut in the middle of a row (a site killed during a write) converts up to the last
 * whole row; a file that is not a record is refused. */
static void test_truncated_and_foreign(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], bin[128], out[128];
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    snprintf(out, sizeof out, "%s/out.csv", dir);
    drths_error_t err;
    drths_recorder_t r;
    assert_int_equal(drths_recorder_open(&r, path, names, NCOLS, 64, &err), 0);
    double row[NCOLS];
    for (int i = 0; i < 10; i++) {
        make_row(i, row);
        assert_int_equal(drths_recorder_push(&r, row), 0);
    }
    assert_int_equal(drths_recorder_close(&r, &err), 0);
    assert_int_equal(truncate(bin, 4096 + 7 * NCOLS * 8 + 3), 0);
    uint64_t n = 0;
    assert_int_equal(drths_recorder_bin_to_csv(bin, out, &n, &err), 0);
    assert_int_equal(n, 7);
    assert_int_equal(drths_recorder_bin_to_csv(path, out, &n, &err), -EINVAL);
    unlink(path);
    unlink(bin);
    unlink(out);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_round_trip_thread),
        cmocka_unit_test(test_stalled_writer), cmocka_unit_test(test_truncated_and_foreign),
        cmocka_unit_test(test_write_failure),  cmocka_unit_test(test_write_failure_live),
        cmocka_unit_test(test_preallocate),    cmocka_unit_test(test_csv_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
