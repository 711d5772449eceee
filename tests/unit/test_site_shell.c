/* Unit tests of the site shell's parts that need no live run (common/site/shell.h): the common
 * options with a program's own, their errors and exit codes, --help and --version; key loading and
 * its errors; the real-time options taken from the common ones; the disk space held for a run and a
 * record the disk refused. stdout and stderr are redirected to a file to read the messages
 * back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/platform/cli.h"
#include "common/site/shell.h"

static char msg[2048];

/* Runs `expr` with stdout and stderr going to a temporary file, then reads it into msg. */
#define CAPTURE(expr, rc)                                                                          \
    do {                                                                                           \
        fflush(stdout);                                                                            \
        fflush(stderr);                                                                            \
        FILE *tmp_ = tmpfile();                                                                    \
        assert_non_null(tmp_);                                                                     \
        int out_ = dup(1), err_ = dup(2);                                                          \
        dup2(fileno(tmp_), 1);                                                                     \
        dup2(fileno(tmp_), 2);                                                                     \
        (rc) = (expr);                                                                             \
        fflush(stdout);                                                                            \
        fflush(stderr);                                                                            \
        dup2(out_, 1);                                                                             \
        dup2(err_, 2);                                                                             \
        close(out_);                                                                               \
        close(err_);                                                                               \
        rewind(tmp_);                                                                              \
        size_t n_ = fread(msg, 1, sizeof msg - 1, tmp_);                                           \
        msg[n_] = '\0';                                                                            \
        fclose(tmp_);                                                                              \
    } while (0)

/* A program with one option of its own, --peer-timeout S, and one flag, --reference. */
typedef struct own {
    double peer_timeout_s;
    int reference;
} own_t;

static int own_option(void *ctx, int c, const char *arg)
{
    own_t *o = ctx;
    if (c == 'r') {
        o->reference = 1;
        return 0;
    }
    return drths_cli_positive("drths-x", "--peer-timeout", arg, "seconds", &o->peer_timeout_s);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: drths-x --experiment FILE\n\n");
}

static const struct option own_options[] = {
    {"peer-timeout", required_argument, NULL, 't'},
    {"reference", no_argument, NULL, 'r'},
    {0, 0, 0, 0},
};

static own_t own;

/* Parses the NULL-terminated argument list (after the program name). */
static int parse(drths_site_options_t *o, const char *const *args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"drths-x";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    memset(&own, 0, sizeof own);
    const drths_site_cli_t cli = {"drths-x", own_options, own_option, &own, usage,
                                  "the run failed"};
    return drths_site_parse(&cli, argc, argv, o);
}

static void test_parse_all(void **state)
{
    (void)state;
    drths_site_options_t o;
    int rc;
    const char *args[] = {"--experiment", "e.yaml", "--key", "k", "--out", "d", "--require-rt",
                          "--cpu", "3", "--kernel-filter", "--quiet", "--monitor", "h:1",
                          "--wait-start", "--peer-timeout", "0.5",
                          "--reference", NULL};
    CAPTURE(parse(&o, args), rc);
    assert_int_equal(rc, DRTHS_SITE_CONTINUE);
    assert_string_equal(msg, "");
    assert_string_equal(o.experiment, "e.yaml");
    assert_string_equal(o.key, "k");
    assert_string_equal(o.out, "d");
    assert_string_equal(o.monitor, "h:1");
    assert_int_equal(o.require_rt, 1);
    assert_int_equal(o.cpu, 3);
    assert_int_equal(o.kernel_filter, 1);
    assert_int_equal(o.quiet, 1);
    assert_int_equal(o.wait_start, 1);
    assert_true(own.peer_timeout_s == 0.5);
    assert_int_equal(own.reference, 1);

    /* The defaults, and a second parse starting over. */
    const char *min[] = {"--experiment", "e.yaml", NULL};
    CAPTURE(parse(&o, min), rc);
    assert_int_equal(rc, DRTHS_SITE_CONTINUE);
    assert_null(o.key);
    assert_null(o.monitor);
    assert_int_equal(o.cpu, -1);
    assert_int_equal(o.quiet, 0);
    assert_int_equal(own.reference, 0);
}

static void expect_usage(const char *const *args, const char *want)
{
    drths_site_options_t o;
    int rc;
    CAPTURE(parse(&o, args), rc);
    assert_int_equal(rc, DRTHS_EXIT_USAGE);
    if (!strstr(msg, want))
        fail_msg("expected '%s' in '%s'", want, msg);
}

static void test_parse_errors(void **state)
{
    (void)state;
    expect_usage((const char *const[]){"--experiment", "e", "--cpu", "9x", NULL},
                 "drths-x: --cpu: '9x' is not an integer in 0..4095\n");
    expect_usage((const char *const[]){"--experiment", "e", "--cpu", "4096", NULL},
                 "is not an integer in 0..4095");
    expect_usage((const char *const[]){"--experiment", "e", "--peer-timeout", "0", NULL},
                 "drths-x: --peer-timeout: '0' is not a positive number of seconds\n");
    expect_usage((const char *const[]){NULL},
                 "drths-x: --experiment FILE is required (see --help)\n");
    expect_usage((const char *const[]){"--experiment", "e", "--wait-start", NULL},
                 "drths-x: --wait-start needs --monitor\n");
    /* The old clear-text control token is gone; a script still giving it is told why. */
    expect_usage((const char *const[]){"--experiment", "e", "--monitor", "h:1",
                                       "--monitor-token", "t", NULL},
                 "--monitor-token is no longer used");
    expect_usage((const char *const[]){"--experiment", "e", "stray", NULL},
                 "drths-x: unexpected argument 'stray' (see --help)\n");
    expect_usage((const char *const[]){"--experiment", "e", "--bogus", NULL},
                 "Try 'drths-x --help'.\n");
    expect_usage((const char *const[]){"--experiment", NULL}, "Try 'drths-x --help'.\n");
}

static void test_help_and_version(void **state)
{
    (void)state;
    drths_site_options_t o;
    int rc;
    /* --help wins even with nothing else given, and ends with the exit-code paragraph. */
    CAPTURE(parse(&o, (const char *const[]){"--help", NULL}), rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(msg, "usage: drths-x --experiment FILE\n"));
    assert_non_null(strstr(msg, "Exit status:\n  0  success\n  1  the run failed\n  2  "));
    CAPTURE(parse(&o, (const char *const[]){"-h", NULL}), rc);
    assert_int_equal(rc, 0);
    CAPTURE(parse(&o, (const char *const[]){"--version", NULL}), rc);
    assert_int_equal(rc, 0);
    char want[200];
    snprintf(want, sizeof want, "drths-x (drths) %s\n", drths_version());
    assert_string_equal(msg, want);
}

static void test_rt_options(void **state)
{
    (void)state;
    drths_site_options_t o;
    drths_site_options_default(&o);
    drths_rt_options_t rt, def;
    drths_rt_options_default(&def);
    drths_site_rt_options(&o, &rt);
    assert_int_equal(rt.require, 0);
    assert_int_equal(rt.cpu, -1);
    assert_int_equal(rt.priority, def.priority);
    o.require_rt = 1;
    o.cpu = 2;
    drths_site_rt_options(&o, &rt);
    assert_int_equal(rt.require, 1);
    assert_int_equal(rt.cpu, 2);
}

static void write_key(const char *path, size_t n, mode_t mode)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        fputc((int)(i * 7 + 1), f);
    fclose(f);
    chmod(path, mode);
}

static void test_key_load(void **state)
{
    (void)state;
    assert_int_equal(drths_crypto_init(), 0);
    char dir[] = "/tmp/drths-shell-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char good[300], open_[300], shortk[300];
    snprintf(good, sizeof good, "%s/good.key", dir);
    snprintf(open_, sizeof open_, "%s/open.key", dir);
    snprintf(shortk, sizeof shortk, "%s/short.key", dir);
    write_key(good, DRTHS_KEY_BYTES, 0600);
    write_key(open_, DRTHS_KEY_BYTES, 0644);
    write_key(shortk, DRTHS_KEY_BYTES - 1, 0600);

    drths_site_key_t k, r;
    drths_error_t err = {{0}};
    /* --key comes before link.key_file. */
    assert_int_equal(drths_site_key_load(&k, good, "/nonexistent", &err), 0);
    assert_string_equal(k.path, good);
    assert_int_equal(strlen(k.id), 16);
    /* No file at all: the rehearsal key, with its warning. */
    assert_int_equal(drths_site_key_load(&r, NULL, NULL, &err), 0);
    assert_null(r.path);
    assert_string_not_equal(r.id, k.id);
    int rc;
    CAPTURE((drths_site_key_warning("drths-x", &r), 0), rc);
    assert_non_null(strstr(msg, "drths-x: warning: no key file (link.key_file or --key): using "
                                "the public rehearsal key (key id "));
    assert_non_null(strstr(msg, r.id));
    CAPTURE((drths_site_key_warning("drths-x", &k), 0), rc);
    assert_int_equal(rc, 0);
    assert_string_equal(msg, "");
    /* A key file from the experiment, and the refusals (the error names the file). */
    assert_int_equal(drths_site_key_load(&k, NULL, good, &err), 0);
    assert_string_equal(k.path, good);
    assert_true(drths_site_key_load(&k, open_, NULL, &err) < 0);
    assert_non_null(strstr(err.msg, "readable by others (mode 0644); chmod 600"));
    assert_true(drths_site_key_load(&k, NULL, shortk, &err) < 0);
    assert_non_null(strstr(err.msg, "got 31"));
    assert_true(drths_site_key_load(&k, "/nonexistent/key", NULL, &err) < 0);
    assert_non_null(strstr(err.msg, "/nonexistent/key"));
    /* A refused key leaves nothing behind. */
    static const uint8_t zero[DRTHS_KEY_BYTES];
    assert_memory_equal(k.psk, zero, sizeof zero);
    unlink(good);
    unlink(open_);
    unlink(shortk);
    rmdir(dir);
}

static void test_close_unused(void **state)
{
    (void)state;
    /* A shell that was never initialised, and one that ran nothing, close cleanly. */
    static drths_site_t never, idle;
    drths_site_close(&never);
    drths_site_options_t o;
    drths_site_options_default(&o);
    drths_site_hooks_t hooks = {0};
    drths_error_t err = {{0}};
    assert_int_equal(drths_site_init(&idle, "drths-x", &o, &hooks, &err), 0);
    assert_int_equal(idle.started, 1);
    assert_int_equal(drths_site_poll(&idle), DRTHS_SITE_STOP_NONE);
    drths_site_run(&idle);
    drths_site_close(&idle);
    drths_site_close(&idle);
}

/* A record the disk refused becomes the run's reason with its count and exit 1, printed; a
 * record written whole changes nothing; a reason is replaced when the run had not failed and
 * appended when it had. */
static void test_mark_unwritten(void **state)
{
    (void)state;
    char reason[200] = "end of record";
    drths_site_append_reason(reason, sizeof reason, 1, "x");
    assert_string_equal(reason, "end of record; x");
    drths_site_append_reason(reason, sizeof reason, 0, "y");
    assert_string_equal(reason, "y");
    char small[8] = "abc";
    drths_site_append_reason(small, sizeof small, 1, "defghij");
    assert_string_equal(small, "abc; de");

    static drths_recorder_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.bin_name, sizeof r.bin_name, "physical.bin");
    r.taken = 1500;
    r.written = 1000;
    int code = 0, rc = 0;
    snprintf(reason, sizeof reason, "end of record");
    drths_site_mark_unwritten("drths-x", &r, reason, sizeof reason, &code);
    assert_int_equal(code, 0);
    assert_string_equal(reason, "end of record");
    r.failed = 1;
    atomic_store(&r.fail_errno, ENOSPC);
    CAPTURE((drths_site_mark_unwritten("drths-x", &r, reason, sizeof reason, &code), 0), rc);
    const char *want = "record incomplete: 500 rows of physical.bin not written (No space left "
                       "on device; it stops at row 1000)";
    assert_int_equal(code, DRTHS_EXIT_FAILED);
    assert_string_equal(reason, want);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(msg, want));
}

/* The run's reason after its record (drths_site_records_mark, both sites' one sequence): a
 * clean close changes nothing; a CSV that could not be written from a whole .bin adds the
 * close's sentence and fails the run; a refused .bin is said by its own sentence, not twice; a
 * ring that dropped rows says so first. */
static void test_records_mark(void **state)
{
    (void)state;
    static drths_recorder_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.bin_name, sizeof r.bin_name, "numerical.bin");
    drths_error_t close_err = {{0}};
    snprintf(close_err.msg, sizeof close_err.msg,
             "writing numerical.csv failed, so it was removed");
    char reason[300] = "end of record";
    int code = 0, rc = 0;
    drths_site_records_mark("drths-x", &r, 0, 0, &close_err, reason, sizeof reason, &code);
    assert_int_equal(code, 0);
    assert_string_equal(reason, "end of record");
    drths_site_records_mark("drths-x", &r, 0, -EIO, &close_err, reason, sizeof reason, &code);
    assert_int_equal(code, DRTHS_EXIT_FAILED);
    assert_string_equal(reason, "writing numerical.csv failed, so it was removed");

    snprintf(reason, sizeof reason, "stopped by signal");
    code = DRTHS_EXIT_FAILED;
    r.taken = 30;
    r.written = 10;
    r.failed = 1;
    atomic_store(&r.fail_errno, ENOSPC);
    CAPTURE(
        (drths_site_records_mark("drths-x", &r, 4, -EIO, &close_err, reason, sizeof reason, &code),
         0),
        rc);
    assert_int_equal(rc, 0);
    assert_int_equal(code, DRTHS_EXIT_FAILED);
    assert_string_equal(reason, "stopped by signal; record incomplete: 4 rows lost (the "
                                "recorder's ring overflowed); record incomplete: 20 rows of "
                                "numerical.bin not written (No space left on device; it stops "
                                "at row 10)");
}

/* The space of a run: held in the run folder by drths_site_reserve, the recorder's .bin share
 * moved to the .bin when it opens, the rest given back when the run ends; a run that needs
 * more than the filesystem has is refused with the folder named. */
static void test_reserve_space(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-shell-XXXXXX";
    assert_non_null(mkdtemp(dir));
    static drths_site_t s;
    memset(&s, 0, sizeof s);
    drths_site_options_t o;
    drths_site_options_default(&o);
    drths_site_hooks_t hooks = {0};
    drths_error_t err = {{0}};
    assert_int_equal(drths_site_init(&s, "drths-x", &o, &hooks, &err), 0);
    assert_int_equal(drths_site_rows_for(1000, 100.0), 2000);
    const drths_site_space_t space = {"rec.csv", 4, 100000};
    assert_int_equal(drths_site_reserve(&s, dir, &space, 1, &err), 0);
    char path[300], bin[300];
    snprintf(path, sizeof path, "%s/%s", dir, DRTHS_RESERVE_NAME);
    snprintf(bin, sizeof bin, "%s/rec.bin", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    const uint64_t total = drths_recorder_bin_bytes(4, 100000) +
                           drths_recorder_csv_bytes(4, 100000) + DRTHS_RESERVE_END_BYTES;
    assert_int_equal(s.reserve_total, total);
    static const char *const cols[4] = {"tick", "a_m", "b_m", "c_N"};
    static drths_recorder_t rec;
    assert_int_equal(drths_site_recorder_open(&s, &rec, dir, "rec.csv", cols, 4, 1000.0, 0, &err),
                     0);
    assert_int_equal(stat(path, &st), 0);
    if (s.reserve.held) {
        assert_int_equal((uint64_t)st.st_size, total - drths_recorder_bin_bytes(4, 100000));
        assert_int_equal(stat(bin, &st), 0);
        assert_true((uint64_t)st.st_blocks * 512 >= drths_recorder_bin_bytes(4, 100000));
    }
    drths_site_run(&s);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(drths_recorder_close(&rec, &err), 0);
    drths_site_close(&s);
    /* More than there is: refused, the folder named, nothing left. */
    static drths_site_t s2;
    memset(&s2, 0, sizeof s2);
    assert_int_equal(drths_site_init(&s2, "drths-x", &o, &hooks, &err), 0);
    const drths_site_space_t huge = {"rec.csv", 4, (uint64_t)1 << 48};
    assert_int_equal(drths_site_reserve(&s2, dir, &huge, 1, &err), -ENOSPC);
    assert_non_null(strstr(err.msg, dir));
    assert_non_null(strstr(err.msg, "rec.bin"));
    assert_int_equal(stat(path, &st), -1);
    drths_site_close(&s2);
    unlink(bin);
    snprintf(path, sizeof path, "%s/rec.csv", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_all),        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_help_and_version), cmocka_unit_test(test_rt_options),
        cmocka_unit_test(test_key_load),         cmocka_unit_test(test_close_unused),
        cmocka_unit_test(test_mark_unwritten),   cmocka_unit_test(test_records_mark),
        cmocka_unit_test(test_reserve_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
