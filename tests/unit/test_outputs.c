/* Tests of the run outputs: CSV writer, JSON writer, run folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/platform/csvwrite.h"
#include "common/platform/json.h"
#include "common/platform/runfolder.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/drths-test-outputs-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void test_csv_header_and_rows(void **state)
{
    (void)state;
    char path[512], buf[1024];
    snprintf(path, sizeof path, "%s/a.csv", tmpdir);
    const char *names[] = {"step", "time_s", "x1_m"};
    drths_csvw_t w;
    drths_error_t err;
    assert_int_equal(drths_csvw_open(&w, path, names, 3, &err), 0);
    drths_csvw_row(&w, (double[]){0, 0.0, 1.5e-3});
    drths_csvw_row(&w, (double[]){1, 2e-4, NAN});
    assert_int_equal(drths_csvw_close(&w, &err), 0);
    assert_int_equal(drths_csvw_close(&w, &err), 0); /* safe twice */
    slurp(path, buf, sizeof buf);
    assert_string_equal(buf, "step,time_s,x1_m\n0,0,0.0015\n1,0.0002,nan\n");
}

static void test_csv_unwritable(void **state)
{
    (void)state;
    drths_csvw_t w;
    drths_error_t err;
    const char *names[] = {"a"};
    assert_true(drths_csvw_open(&w, "/nonexistent-dir/x.csv", names, 1, &err) < 0);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.csv"));
}

static void test_json_nesting(void **state)
{
    (void)state;
    char path[512], buf[1024];
    snprintf(path, sizeof path, "%s/s.json", tmpdir);
    FILE *f = fopen(path, "w");
    drths_json_t j;
    drths_json_init(&j, f);
    drths_json_object_begin(&j, NULL);
    drths_json_string(&j, "name", "a\"b");
    drths_json_number(&j, "nan", NAN);
    drths_json_numbers(&j, "v", (double[]){1, 2.5}, 2);
    drths_json_object_begin(&j, "empty");
    drths_json_object_end(&j);
    drths_json_object_end(&j);
    fclose(f);
    slurp(path, buf, sizeof buf);
    assert_string_equal(buf, "{\n  \"name\": \"a\\\"b\",\n  \"nan\": null,\n  \"v\": [\n    1,\n"
                             "    2.5\n  ],\n  \"empty\": {}\n}\n");
}

/* A document in a file of its own: the object and the final newline come from open and close;
 * a file that cannot be created or written is named in the error. */
static void test_json_file(void **state)
{
    (void)state;
    char path[512], buf[256];
    snprintf(path, sizeof path, "%s/f.json", tmpdir);
    drths_json_t j;
    drths_error_t err;
    assert_int_equal(drths_json_file_open(&j, path, &err), 0);
    drths_json_int(&j, "n", 3);
    assert_int_equal(drths_json_file_close(&j, path, &err), 0);
    slurp(path, buf, sizeof buf);
    assert_string_equal(buf, "{\n  \"n\": 3\n}\n");
    assert_true(drths_json_file_open(&j, "/nonexistent-dir/f.json", &err) < 0);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/f.json"));
    assert_int_equal(drths_json_file_open(&j, "/dev/full", &err), 0);
    drths_json_int(&j, "n", 3);
    assert_int_equal(drths_json_file_close(&j, "/dev/full", &err), -EIO);
    assert_non_null(strstr(err.msg, "writing /dev/full failed"));
}

static void test_runfolder(void **state)
{
    (void)state;
    char exp[512], dir[512], out[1024], copy[1200], buf[64];
    snprintf(exp, sizeof exp, "%s/e.yaml", tmpdir);
    FILE *f = fopen(exp, "w");
    fputs("name: x\n", f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/deep/er/run", tmpdir);
    drths_error_t err;
    assert_int_equal(drths_runfolder_create(out, sizeof out, dir, NULL, "ref", exp, &err), 0);
    assert_string_equal(out, dir);
    assert_int_equal(drths_path_join(copy, sizeof copy, out, "experiment.yaml"), 0);
    slurp(copy, buf, sizeof buf);
    assert_string_equal(buf, "name: x\n");
    /* A default folder name carries the label. */
    char base[512];
    snprintf(base, sizeof base, "%s/runs", tmpdir);
    assert_int_equal(drths_runfolder_create(out, sizeof out, NULL, base, "ref", NULL, &err), 0);
    assert_non_null(strstr(out, "-ref"));
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    /* A file in the way is reported. */
    char blocked[600];
    snprintf(blocked, sizeof blocked, "%s/e.yaml/sub", tmpdir);
    assert_true(drths_mkdirs(blocked, &err) < 0);
}

/* A folder is used by one run: a folder holding any file a run writes is refused with the file
 * named (a killed run's .bin alone counts); other files do not count, and nothing is changed. */
static void test_runfolder_used_once(void **state)
{
    (void)state;
    static const char *const run_files[] = {
        "summary.json",  "provenance.json", "physical.bin",          "physical.csv",
        "numerical.bin", "numerical.csv",   ".drths-reserved-space", "report.txt",
    };
    char dir[512], path[700], out[1024];
    drths_error_t err;
    snprintf(dir, sizeof dir, "%s/used", tmpdir);
    assert_int_equal(drths_mkdirs(dir, &err), 0);
    assert_int_equal(drths_runfolder_check_unused(dir, &err), 0);
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    fclose(f);
    assert_int_equal(drths_runfolder_check_unused(dir, &err), 0);
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, run_files[i]);
        f = fopen(path, "w");
        fputs("earlier run\n", f);
        fclose(f);
        memset(&err, 0, sizeof err);
        assert_int_equal(drths_runfolder_check_unused(dir, &err), -EEXIST);
        char want[100];
        snprintf(want, sizeof want, "already holds an earlier run (%s)", run_files[i]);
        assert_non_null(strstr(err.msg, want));
        assert_non_null(strstr(err.msg, dir));
        /* drths_runfolder_create refuses it too, and leaves the earlier file as it was. */
        assert_int_equal(drths_runfolder_create(out, sizeof out, dir, NULL, "x", NULL, &err),
                         -EEXIST);
        char buf[64];
        slurp(path, buf, sizeof buf);
        assert_string_equal(buf, "earlier run\n");
        unlink(path);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_header_and_rows), cmocka_unit_test(test_csv_unwritable),
        cmocka_unit_test(test_json_nesting),        cmocka_unit_test(test_json_file),
        cmocka_unit_test(test_runfolder),           cmocka_unit_test(test_runfolder_used_once),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
