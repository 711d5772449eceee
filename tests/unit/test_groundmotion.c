#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/models/groundmotion.h"

#define G DRTHS_G_M_S2

/* |a - b| <= tol, reporting both values (this cmocka has no assert_double_equal). */
#define assert_near(a, b, tol) near_at((a), (b), (tol), #a, __LINE__)
static void near_at(double a, double b, double tol, const char *what, int line)
{
    if (!(fabs(a - b) <= tol))
        fail_msg("line %d: %s = %.17g, want %.17g within %g", line, what, a, b, tol);
}

/* Path of a shipped record (static buffer). */
static const char *record_path(const char *name)
{
    static char path[1024];
    const char *src = getenv("DRTHS_SOURCE_DIR");
    assert_non_null(src);
    snprintf(path, sizeof path, "%s/examples/records/%s", src, name);
    return path;
}

static void load_ok(drths_record_t *r, const char *name, const drths_gm_options_t *o)
{
    drths_error_t err = {{0}};
    int rc = drths_record_load(r, record_path(name), o, &err);
    if (rc)
        fail_msg("%s: rc %d: %s", name, rc, err.msg);
}

/* Writes text to a fresh temporary file whose name ends in suffix; returns its path. */
static const char *write_tmp(const char *text, const char *suffix)
{
    static char path[96];
    snprintf(path, sizeof path, "/tmp/drths-test-gm-XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Loads text expecting failure with code; the message must hold "path:line:" (line > 0) or
 * "path:" (line 0) and want. A failed load must leave nothing behind. */
static void expect_error(const char *text, const drths_gm_options_t *o, int code, int line,
                         const char *want)
{
    const char *path = write_tmp(text, ".txt");
    drths_record_t r;
    drths_error_t err = {{0}};
    assert_int_equal(drths_record_load(&r, path, o, &err), code);
    char where[160];
    if (line > 0)
        snprintf(where, sizeof where, "%s:%d: ", path, line);
    else
        snprintf(where, sizeof where, "%s: ", path);
    if (strncmp(err.msg, where, strlen(where)) != 0 || !strstr(err.msg, want))
        fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", err.msg, where, want);
    assert_null(r.ag_m_s2);
    assert_int_equal(r.n, 0);
    drths_record_close(&r);
    unlink(path);
}

/* ---- the shipped records against PROVENANCE.md ------------------------------------------- */

static void test_peknold_at2(void **state)
{
    (void)state;
    drths_record_t r;
    load_ok(&r, "elcentro-1940-ns-peknold.AT2", NULL); /* format and units from the file */
    assert_int_equal(r.n, 1559);
    assert_true(r.dt_s == 0.02);
    size_t i;
    double pk = drths_record_peak(&r, &i);
    /* PROVENANCE: -0.31882 g at sample 101 (t = 2.02 s): index 101 counted from 0. */
    assert_int_equal(i, 101);
    assert_near(pk, -0.31882 * G, 1e-12);
    assert_near(r.ag_m_s2[0], 0.00630 * G, 1e-15);  /* first value of line 5 */
    assert_near(r.ag_m_s2[8], -0.00128 * G, 1e-15); /* first value of line 6 */
    assert_near(r.ag_m_s2[1558], 0.0, 0);           /* last line has no newline */
    drths_record_close(&r);
    drths_record_close(&r); /* safe twice */
    assert_null(r.ag_m_s2);

    drths_gm_options_t o;
    drths_gm_options_default(&o);
    o.format = DRTHS_GM_AT2;
    o.units = DRTHS_GM_UNITS_G; /* agrees with the file */
    load_ok(&r, "elcentro-1940-ns-peknold.AT2", &o);
    assert_int_equal(r.n, 1559);
    drths_record_close(&r);
}

static void test_ielc180_at2(void **state)
{
    (void)state;
    drths_record_t r;
    load_ok(&r, "elcentro-1940-ielc180-peer.AT2", NULL);
    assert_int_equal(r.n, 4000);
    assert_true(r.dt_s == 0.01);
    size_t i;
    double pk = drths_record_peak(&r, &i);
    assert_near((double)i * r.dt_s, 2.15, 1e-12);
    assert_near(pk / G, -0.31288, 5e-6); /* table rounds -0.3128806 */
    assert_near(r.ag_m_s2[0], -0.6403182e-2 * G, 1e-15);
    drths_record_close(&r);
}

static void test_northridge_two_column(void **state)
{
    (void)state;
    drths_record_t r;
    /* 5 header lines, "Time[s] Accel[g]": time column and units g both come from the names. */
    load_ok(&r, "northridge-1994-cdmg24278-090.dat", NULL);
    assert_int_equal(r.n, 3989);
    assert_near(r.dt_s, 0.01, 1e-15);
    size_t i;
    double pk = drths_record_peak(&r, &i);
    assert_near((double)i * r.dt_s, 8.14, 1e-9);
    assert_near(pk, 0.5683 * G, 1e-12);
    assert_near(r.ag_m_s2[0], -0.0012 * G, 1e-15);
    drths_record_close(&r);
}

/* One-column records: the step from ground_motion.dt_s, or from a DT= line in the header or a
 * comment (any case, = or :); none of them is an error naming the field to give. */
static void test_one_column_dt(void **state)
{
    (void)state;
    drths_gm_options_t o;
    drths_gm_options_default(&o);
    o.units = DRTHS_GM_UNITS_G;
    static const struct {
        const char *text;
        double dt;
    } ok[] = {
        {"DT=0.02\n0.01\n-0.02\n0.03\n", 0.02},
        {"# station X, dt = 0.005 sec\n0.01\n-0.02\n0.03\n", 0.005},
        {"% NPTS 3 DT: .01 SEC\n0.01\n-0.02\n0.03\n", 0.01},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *path = write_tmp(ok[i].text, ".txt");
        drths_record_t r;
        drths_error_t err = {{0}};
        if (drths_record_load(&r, path, &o, &err) != 0)
            fail_msg("case %zu: %s", i, err.msg);
        assert_true(r.dt_s == ok[i].dt);
        assert_int_equal(r.n, 3);
        assert_near(r.ag_m_s2[1], -0.02 * G, 1e-15);
        drths_record_close(&r);
        unlink(path);
    }
    /* No DT line: ground_motion.dt_s gives it; "width=3" or "VDT=" are not a step. */
    const char *bare = "# width=3 VDT=9\n0.01\n-0.02\n0.03\n";
    o.dt_s = 0.004;
    const char *path = write_tmp(bare, ".txt");
    drths_record_t r;
    drths_error_t err = {{0}};
    assert_int_equal(drths_record_load(&r, path, &o, &err), 0);
    assert_true(r.dt_s == 0.004);
    drths_record_close(&r);
    unlink(path);
    o.dt_s = 0;
    expect_error(bare, &o, -EINVAL, 2, "no time step");
    expect_error(bare, &o, -EINVAL, 2, "so ground_motion.dt_s must give it");
    /* A DT line that contradicts the time column is refused. */
    expect_error("# DT=0.02\ntime_s accel_g\n0 0.01\n0.01 0.02\n0.02 0.03\n", &o, -EINVAL, 1,
                 "the header says DT = 0.02 s but the time column");
}

static void test_kobe_value_columns(void **state)
{
    (void)state;
    drths_gm_options_t o;
    drths_gm_options_default(&o);
    o.units = DRTHS_GM_UNITS_CM_S2;
    o.dt_s = 0.005; /* stated only in a comment of the file */
    drths_record_t r;
    load_ok(&r, "kobe-1995-jma-ns-ew-cms2.txt", &o);
    assert_int_equal(r.n, 6000);
    assert_true(r.dt_s == 0.005);
    size_t i;
    double pk = drths_record_peak(&r, &i);
    assert_near((double)i * r.dt_s, 8.54, 1e-9);
    assert_near(pk, -8.25, 1e-12); /* -825 cm/s^2 */
    assert_near(r.ag_m_s2[2], -0.105e-2, 1e-15);
    drths_record_close(&r);

    o.column = 2; /* E-W */
    load_ok(&r, "kobe-1995-jma-ns-ew-cms2.txt", &o);
    assert_int_equal(r.n, 6000);
    assert_near(r.ag_m_s2[2], -0.204e-2, 1e-15);
    assert_near(r.ag_m_s2[1708], 0.939, 1e-12); /* E-W at the N-S peak, line 1712 */
    drths_record_close(&r);

    drths_error_t err = {{0}};
    o.column = 3;
    assert_int_equal(drths_record_load(&r, record_path("kobe-1995-jma-ns-ew-cms2.txt"), &o, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "kobe-1995-jma-ns-ew-cms2.txt:4: ground_motion.column = 3"));

    /* Without dt_s the step comes from the comment line 3, "... and dt=0.005 sec.". */
    o.column = 1;
    o.dt_s = 0;
    load_ok(&r, "kobe-1995-jma-ns-ew-cms2.txt", &o);
    assert_true(r.dt_s == 0.005);
    assert_int_equal(r.n, 6000);
    drths_record_close(&r);
    /* A dt_s that disagrees with the comment is refused, naming its line and the field. */
    o.dt_s = 0.01;
    assert_int_equal(drths_record_load(&r, record_path("kobe-1995-jma-ns-ew-cms2.txt"), &o, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg,
                           "kobe-1995-jma-ns-ew-cms2.txt:3: the file gives dt = 0.005 s but "
                           "ground_motion.dt_s = 0.01 s"));

    /* No units anywhere. */
    o.dt_s = 0.005;
    o.units = DRTHS_GM_UNITS_FILE;
    assert_int_equal(drths_record_load(&r, record_path("kobe-1995-jma-ns-ew-cms2.txt"), &o, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "does not state its units"));

    /* cm/s^2 mistaken for g: 825 g is refused as a units mistake, naming the line. */
    o.units = DRTHS_GM_UNITS_G;
    assert_int_equal(drths_record_load(&r, record_path("kobe-1995-jma-ns-ew-cms2.txt"), &o, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "kobe-1995-jma-ns-ew-cms2.txt:1712: peak -825 g"));
    assert_null(r.ag_m_s2);
}

static void test_benchmark_csv(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t n, ipk;
        double dt, pk;
    } want[] = {
        {"benchmark-elcentro-ms2.csv", 2060, 351, 0.02, -3.134930197},   /* t = 7.02 s */
        {"benchmark-kobe-ms2.csv", 5095, 1117, 0.01, -6.329845419},      /* t = 11.17 s */
        {"benchmark-morganhill-ms2.csv", 7995, 1373, 0.005, 2.38917149}, /* t = 6.865 s */
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        drths_record_t r;
        load_ok(&r, want[k].name, NULL); /* "# time_s,accel_m_s2": time and m/s^2 */
        assert_int_equal(r.n, want[k].n);
        assert_near(r.dt_s, want[k].dt, 1e-12);
        size_t i;
        double pk = drths_record_peak(&r, &i);
        assert_int_equal(i, want[k].ipk);
        assert_near(pk, want[k].pk, 1e-15);
        drths_record_close(&r);
    }
    /* The benchmark El Centro is Peknold behind 5 s (250 samples) of zeros: same shape. */
    drths_record_t b, p;
    load_ok(&b, "benchmark-elcentro-ms2.csv", NULL);
    load_ok(&p, "elcentro-1940-ns-peknold.AT2", NULL);
    size_t ib, ip;
    drths_record_peak(&b, &ib);
    drths_record_peak(&p, &ip);
    assert_int_equal(ib, ip + 250);
    drths_record_close(&b);
    drths_record_close(&p);
}

/* ---- options ------------------------------------------------------------------------------ */

static void test_scale_compression_duration_tail(void **state)
{
    (void)state;
    drths_record_t base, r;
    load_ok(&base, "elcentro-1940-ns-peknold.AT2", NULL);
    drths_gm_options_t o;
    drths_gm_options_default(&o);
    o.time_compression = 5; /* Dyke et al. 1996 */
    o.scale = -2;
    load_ok(&r, "elcentro-1940-ns-peknold.AT2", &o);
    assert_int_equal(r.n, 1559);
    assert_near(r.dt_s, 0.004, 1e-18);
    for (size_t k = 0; k < r.n; k++)
        assert_true(r.ag_m_s2[k] == -2 * base.ag_m_s2[k]);
    drths_record_close(&r);

    /* duration in compressed time: 2 s at 0.004 s keeps 501 samples; tail 0.1 s adds 25 zeros. */
    o.scale = 1;
    o.duration_s = 2.0;
    o.tail_s = 0.1;
    load_ok(&r, "elcentro-1940-ns-peknold.AT2", &o);
    assert_int_equal(r.n, 501 + 25);
    assert_true(r.ag_m_s2[500] == base.ag_m_s2[500]);
    for (size_t k = 501; k < r.n; k++)
        assert_true(r.ag_m_s2[k] == 0.0);
    drths_record_close(&r);

    /* A duration longer than the record keeps it whole. */
    o.duration_s = 1000;
    o.tail_s = 0;
    load_ok(&r, "elcentro-1940-ns-peknold.AT2", &o);
    assert_int_equal(r.n, 1559);
    drths_record_close(&r);
    drths_record_close(&base);
}

static void test_bad_options(void **state)
{
    (void)state;
    const char *path = record_path("elcentro-1940-ns-peknold.AT2");
    drths_gm_options_t o;
    drths_record_t r;
    drths_error_t err = {{0}};
    static const char *const field[] = {
        "ground_motion.scale", "ground_motion.time_compression", "ground_motion.column",
        "ground_motion.dt_s",  "ground_motion.duration_s",       "ground_motion.tail_s"};
    for (size_t k = 0; k < sizeof field / sizeof field[0]; k++) {
        drths_gm_options_default(&o);
        switch (k) {
        case 0:
            o.scale = 0;
            break;
        case 1:
            o.time_compression = 0;
            break;
        case 2:
            o.column = 0;
            break;
        case 3:
            o.dt_s = -1;
            break;
        case 4:
            o.duration_s = NAN;
            break;
        default:
            o.tail_s = -1;
            break;
        }
        assert_int_equal(drths_record_load(&r, path, &o, &err), -EINVAL);
        if (!strstr(err.msg, field[k]) || !strstr(err.msg, "peknold"))
            fail_msg("\"%s\" does not name %s and the file", err.msg, field[k]);
    }
    /* The file's dt and the caller's must agree. */
    drths_gm_options_default(&o);
    o.dt_s = 0.01;
    assert_int_equal(drths_record_load(&r, path, &o, &err), -EINVAL);
    assert_non_null(
        strstr(err.msg, "peknold.AT2:4: the file gives dt = 0.02 s but ground_motion.dt_s"));
    o.dt_s = 0.02; /* agreeing is fine */
    assert_int_equal(drths_record_load(&r, path, &o, &err), 0);
    drths_record_close(&r);
    /* Explicit units must agree with what the file states. */
    drths_gm_options_default(&o);
    o.units = DRTHS_GM_UNITS_M_S2;
    assert_int_equal(
        drths_record_load(&r, record_path("northridge-1994-cdmg24278-090.dat"), &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "states g (line 5 names the column \"Accel[g]\")"));
    /* AT2 has one value column. */
    drths_gm_options_default(&o);
    o.column = 2;
    assert_int_equal(drths_record_load(&r, path, &o, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "ground_motion.column = 2"));

    drths_gm_format_t f;
    drths_gm_units_t u;
    assert_int_equal(drths_gm_format_parse("AT2", &f), 0);
    assert_int_equal(f, DRTHS_GM_AT2);
    assert_int_equal(drths_gm_format_parse("two-column", &f), 0);
    assert_int_equal(f, DRTHS_GM_TWO_COLUMN);
    assert_int_equal(drths_gm_format_parse("xls", &f), -EINVAL);
    assert_int_equal(drths_gm_units_parse("cm/s^2", &u), 0);
    assert_int_equal(u, DRTHS_GM_UNITS_CM_S2);
    assert_int_equal(drths_gm_units_parse("g", &u), 0);
    assert_int_equal(u, DRTHS_GM_UNITS_G);
    assert_int_equal(drths_gm_units_parse("ft/s^2", &u), -EINVAL);
}

/* ---- other spellings of the formats -------------------------------------------------------- */

static void test_format_variants(void **state)
{
    (void)state;
    drths_record_t r;
    drths_error_t err = {{0}};
    drths_gm_options_t o;
    drths_gm_options_default(&o);

    /* Older PEER header "NPTS, DT" after the numbers; Fortran D exponents; free count a line. */
    const char *path = write_tmp("old PEER\nline 2\nUNITS OF G\n   5   .0200   NPTS, DT\n"
                                 "1.0D-02 -2.0d-2\n  3e-2\n\n 0.04 0.05  \n",
                                 ".AT2");
    assert_int_equal(drths_record_load(&r, path, NULL, &err), 0);
    assert_int_equal(r.n, 5);
    assert_true(r.dt_s == 0.02);
    assert_near(r.ag_m_s2[1], -0.02 * G, 1e-15);
    assert_near(r.ag_m_s2[4], 0.05 * G, 1e-15);
    drths_record_close(&r);
    unlink(path);

    /* A CSV with a plain header line, times starting at dt, and a cm/s^2 column chosen as 2. */
    path = write_tmp("t_s,a_x_m_s2,a_y_cm_s2\n0.01,1,100\n0.02,2,200\n0.03,3,300\n", ".csv");
    o.column = 2;
    assert_int_equal(drths_record_load(&r, path, &o, &err), 0);
    assert_int_equal(r.n, 3);
    assert_near(r.dt_s, 0.01, 1e-15);
    assert_near(r.ag_m_s2[2], 3.0, 1e-15);
    drths_record_close(&r);
    unlink(path);

    /* No names: the first column steps evenly, so it is time; explicit mm/s^2. */
    path = write_tmp("0.0 5\n0.5 -7\n1.0 9\n", ".txt");
    o.column = 1;
    o.units = DRTHS_GM_UNITS_MM_S2;
    assert_int_equal(drths_record_load(&r, path, &o, &err), 0);
    assert_int_equal(r.n, 3);
    assert_true(r.dt_s == 0.5);
    assert_near(r.ag_m_s2[1], -0.007, 1e-17);
    drths_record_close(&r);
    /* ... unless the caller says there is no time column. */
    o.time_column = DRTHS_GM_TIME_NONE;
    o.dt_s = 0.1;
    o.column = 2;
    assert_int_equal(drths_record_load(&r, path, &o, &err), 0);
    assert_true(r.dt_s == 0.1);
    assert_near(r.ag_m_s2[2], 0.009, 1e-17);
    drths_record_close(&r);
    unlink(path);

    /* A free-text line with one word per column does not hide an evenly stepping time column. */
    path = write_tmp("Northridge record\n0.00 1\n0.01 2\n0.02 3\n", ".txt");
    drths_gm_options_default(&o);
    o.units = DRTHS_GM_UNITS_G;
    assert_int_equal(drths_record_load(&r, path, &o, &err), 0);
    assert_true(r.ag_m_s2[2] == 3 * G);
    drths_record_close(&r);
    unlink(path);
}

/* ---- malformed files ---------------------------------------------------------------------- */

static void test_malformed(void **state)
{
    (void)state;
    drths_gm_options_t o;
    drths_gm_options_default(&o);
    const char *at2_head = "h1\nh2\nUNITS OF G\nNPTS=  4, DT= .02000 SEC\n";
    char buf[512];

    snprintf(buf, sizeof buf, "%s  0.1 0.2\n  0.3\n", at2_head); /* 3 values, 4 announced */
    expect_error(buf, NULL, -EINVAL, 6, "NPTS = 4 (line 4) but the file holds 3 values");
    snprintf(buf, sizeof buf, "%s  0.1 0.2\n  0.3 0.4 0.5\n", at2_head);
    expect_error(buf, NULL, -EINVAL, 6, "more values than NPTS = 4");
    snprintf(buf, sizeof buf, "%s  0.1\n  0.2\n  0.0O630\n 0.4\n", at2_head);
    expect_error(buf, NULL, -EINVAL, 7, "not a number: \"0.0O630\"");
    expect_error("h1\nh2\nh3\nNPTS=  4, DT= 0 SEC\n1 2 3 4\n", NULL, -EINVAL, 4, "DT = 0 s");
    expect_error("h1\nh2\nVELOCITY IN CM/S\nNPTS=  1, DT= .01\n1\n", NULL, -EINVAL, 3, "velocity");
    o.format = DRTHS_GM_AT2;
    expect_error("h1\nh2\nh3\nh4\n1 2 3\n", &o, -EINVAL, 4, "no NPTS on line 4");
    drths_gm_options_default(&o);

    /* Column text: a time step off by 1e-5 relative on line 8; a wrong field count; a bad
     * number; inf refused. */
    expect_error("h1\nh2\nTime[s] Accel[g]\n0.00 1\n0.01 2\n0.02 3\n0.03 4\n0.0400001 5\n", NULL,
                 -EINVAL, 8, "uniformly spaced");
    expect_error("Time[s] Accel[g]\n0.00 1\n0.01 2\n0.02 3\n0.02 4\n", NULL, -EINVAL, 5,
                 "time step 0 s");
    expect_error("Time[s] Accel[g]\n0.01 1\n0.00 2\n", NULL, -EINVAL, 3, "does not increase");
    expect_error("Time[s] Accel[g]\n0.00 1\n0.01 2 7\n", NULL, -EINVAL, 3,
                 "3 fields, the first data row (line 2) has 2");
    expect_error("# time_s,accel_m_s2\n0,1\n0.01,x2\n", NULL, -EINVAL, 3, "not a number: \"x2\"");
    expect_error("# time_s,accel_m_s2\n0,1\n0.01,\n", NULL, -EINVAL, 3, "field 2 is empty");
    expect_error("# time_s,accel_m_s2\n0,1\n0.01,inf\n", NULL, -EINVAL, 3, "not a number: \"inf\"");
    expect_error("# time_s,vel_m_s\n0,1\n0.01,2\n", NULL, -EINVAL, 1, "velocity");

    /* Values only and no dt: the first data line is named. */
    o.units = DRTHS_GM_UNITS_G;
    expect_error("% header\n% more\n0.1\n0.2\n", &o, -EINVAL, 3, "no time step");
    drths_gm_options_default(&o);

    /* Empty, blank, header only. */
    expect_error("", NULL, -EINVAL, 1, "empty file");
    expect_error("\n  \n\n", NULL, -EINVAL, 1, "empty file");
    expect_error("% only\n% comments\n", NULL, -EINVAL, 2, "no data rows");

    /* Nonexistent: the errno and the path; nothing to close. */
    drths_record_t r;
    drths_error_t err = {{0}};
    assert_int_equal(drths_record_load(&r, "/nonexistent/drths/elcentro.AT2", NULL, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/drths/elcentro.AT2: cannot open"));
    assert_null(r.ag_m_s2);
}

/* ---- resampling ---------------------------------------------------------------------------- */

static void make_record(drths_record_t *r, size_t n, double dt)
{
    r->n = n;
    r->dt_s = dt;
    r->ag_m_s2 = malloc(n * sizeof(double));
    assert_non_null(r->ag_m_s2);
}

static void test_resample_ramp_and_length(void **state)
{
    (void)state;
    drths_record_t in, out;
    make_record(&in, 11, 0.1); /* T = 1 s */
    for (size_t k = 0; k < in.n; k++)
        in.ag_m_s2[k] = 1.0 + 3.0 * (double)k * 0.1;
    drths_error_t err = {{0}};
    assert_int_equal(drths_record_resample(&out, &in, 0.013, 0, &err), 0);
    assert_int_equal(out.n, 77); /* floor(1 / 0.013) + 1 */
    for (size_t k = 0; k < out.n; k++)
        assert_near(out.ag_m_s2[k], 1.0 + 3.0 * (double)k * 0.013, 1e-12);
    drths_record_close(&out);

    /* A tail of 0.5 s: n = floor(1.5 / 0.013) + 1 = 116, zeros after T. */
    assert_int_equal(drths_record_resample(&out, &in, 0.013, 0.5, &err), 0);
    assert_int_equal(out.n, 116);
    assert_near(out.ag_m_s2[76], 1.0 + 3.0 * 76 * 0.013, 1e-12);
    for (size_t k = 77; k < out.n; k++)
        assert_true(out.ag_m_s2[k] == 0.0);
    drths_record_close(&out);

    /* The exact end point is kept: 1 / 0.1 and 1 / 0.25 divide evenly. */
    assert_int_equal(drths_record_resample(&out, &in, 0.25, 0, &err), 0);
    assert_int_equal(out.n, 5);
    assert_true(out.ag_m_s2[4] == in.ag_m_s2[10]);
    drths_record_close(&out);

    assert_int_equal(drths_record_resample(&out, &in, 0, 0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "dt_s must be > 0"));
    assert_int_equal(drths_record_resample(&out, &in, 1e-9, 0, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "exceed the limit"));
    drths_record_close(&in);
}

static void test_resample_coincident_samples(void **state)
{
    (void)state;
    drths_record_t in, out;
    load_ok(&in, "elcentro-1940-ns-peknold.AT2", NULL);
    drths_error_t err = {{0}};
    /* Upsampling to the 5 kHz loop: every 100th output sample is an input sample, bit for bit. */
    assert_int_equal(drths_record_resample(&out, &in, 0.0002, 0, &err), 0);
    assert_int_equal(out.n, 155801); /* 31.16 s / 0.2 ms + 1 */
    for (size_t k = 0; k < in.n; k++)
        assert_true(out.ag_m_s2[100 * k] == in.ag_m_s2[k]);
    /* In between, the straight line: halfway between samples 101 and 102. */
    assert_near(out.ag_m_s2[10150], 0.5 * (in.ag_m_s2[101] + in.ag_m_s2[102]), 1e-15);
    drths_record_close(&out);
    /* Downsampling by 2 picks every other sample. */
    assert_int_equal(drths_record_resample(&out, &in, 0.04, 0, &err), 0);
    assert_int_equal(out.n, 780);
    for (size_t k = 0; k < out.n; k++)
        assert_true(out.ag_m_s2[k] == in.ag_m_s2[2 * k]);
    drths_record_close(&out);
    /* In place, after a 5x time compression (dt 0.004 s) onto 0.001 s. */
    drths_record_t c;
    drths_gm_options_t o;
    drths_gm_options_default(&o);
    o.time_compression = 5;
    load_ok(&c, "elcentro-1940-ns-peknold.AT2", &o);
    assert_int_equal(drths_record_resample(&c, &c, 0.001, 1.0, &err), 0);
    assert_int_equal(c.n, 6233 + 1000); /* 6.232 s / 1 ms + 1, then 1 s of zeros */
    assert_true(c.dt_s == 0.001);
    for (size_t k = 0; k < in.n; k++)
        assert_true(c.ag_m_s2[4 * k] == in.ag_m_s2[k]);
    drths_record_close(&c);
    /* Compressed 3x (dt 1/150 s) onto 3 kHz: k * ratio falls just below the integer for many
     * coincident samples, which must still be copied exactly, not interpolated. */
    o.time_compression = 3;
    load_ok(&c, "elcentro-1940-ns-peknold.AT2", &o);
    assert_int_equal(drths_record_resample(&out, &c, 1.0 / 3000, 0, &err), 0);
    assert_int_equal(out.n, 1558 * 20 + 1);
    for (size_t k = 0; k < in.n; k++)
        assert_true(out.ag_m_s2[20 * k] == in.ag_m_s2[k]);
    drths_record_close(&out);
    drths_record_close(&c);
    drths_record_close(&in);
}

/* ---- white noise --------------------------------------------------------------------------- */

static void test_white_noise(void **state)
{
    (void)state;
    drths_record_t a, b;
    drths_error_t err = {{0}};
    /* 1000 samples at 100 Hz, band 5-15 Hz: grid spacing 0.1 Hz, bins 50..150. */
    assert_int_equal(drths_record_white_noise(&a, 0.01, 9.99, 5, 15, 1.0, 42, &err), 0);
    assert_int_equal(a.n, 1000);
    double ss = 0, sum = 0;
    for (size_t k = 0; k < a.n; k++) {
        ss += a.ag_m_s2[k] * a.ag_m_s2[k];
        sum += a.ag_m_s2[k];
    }
    assert_near(sqrt(ss / (double)a.n), 1.0, 1e-12);
    assert_near(sum / (double)a.n, 0.0, 1e-12); /* no DC */

    /* DFT: by Parseval the in-band bins carry all the energy; outside, rounding only. */
    double in_band = 0, out_band = 0;
    for (size_t j = 0; j <= a.n / 2; j++) {
        double re = 0, im = 0;
        for (size_t k = 0; k < a.n; k++) {
            double w = 2 * 3.14159265358979323846 * (double)((j * k) % a.n) / (double)a.n;
            re += a.ag_m_s2[k] * cos(w);
            im -= a.ag_m_s2[k] * sin(w);
        }
        double e = re * re + im * im;
        if (j >= 50 && j <= 150)
            in_band += e;
        else
            out_band += e;
    }
    assert_true(in_band > 0);
    if (!(out_band / in_band < 1e-20))
        fail_msg("energy outside the band: %g of the total", out_band / in_band);

    /* Same seed, same samples; another seed, other samples, same RMS. */
    assert_int_equal(drths_record_white_noise(&b, 0.01, 9.99, 5, 15, 1.0, 42, &err), 0);
    assert_memory_equal(a.ag_m_s2, b.ag_m_s2, a.n * sizeof(double));
    drths_record_close(&b);
    assert_int_equal(drths_record_white_noise(&b, 0.01, 9.99, 5, 15, 1.0, 43, &err), 0);
    assert_true(memcmp(a.ag_m_s2, b.ag_m_s2, a.n * sizeof(double)) != 0);
    drths_record_close(&b);
    drths_record_close(&a);

    /* The input of Phillips & Spencer's (2013) SDOF study at the loop rate: 0-30 Hz, 1000 mm/s^2
     * RMS, 5 kHz, longer than one phasor resynchronisation. */
    assert_int_equal(drths_record_white_noise(&a, 0.0002, 2.0, 0, 30, 1.0, 7, &err), 0);
    assert_int_equal(a.n, 10001);
    ss = 0;
    sum = 0;
    for (size_t k = 0; k < a.n; k++) {
        ss += a.ag_m_s2[k] * a.ag_m_s2[k];
        sum += a.ag_m_s2[k];
    }
    assert_near(sqrt(ss / (double)a.n), 1.0, 1e-12);
    assert_near(sum / (double)a.n, 0.0, 1e-12); /* a band from 0 Hz still has no DC */
    drths_record_close(&a);

    assert_int_equal(drths_record_white_noise(&a, 0.01, 10, 5, 60, 1.0, 1, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "Nyquist"));
    assert_int_equal(drths_record_white_noise(&a, 0.01, 1, 5.1, 5.2, 1.0, 1, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "holds no frequency"));
    assert_int_equal(drths_record_white_noise(&a, 0.01, 1, 5, 15, 0, 1, &err), -EINVAL);
    assert_null(a.ag_m_s2);
}

static void test_peak(void **state)
{
    (void)state;
    double v[] = {0.5, -2.0, 2.0, 1.0};
    drths_record_t r = {.n = 4, .dt_s = 0.01, .ag_m_s2 = v};
    size_t i = 99;
    assert_true(drths_record_peak(&r, &i) == -2.0); /* first of equal magnitudes */
    assert_int_equal(i, 1);
    assert_true(drths_record_peak(&r, NULL) == -2.0);
    drths_record_t e = {0};
    assert_true(drths_record_peak(&e, &i) == 0.0);
    assert_int_equal(i, 0);
    drths_record_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peknold_at2),
        cmocka_unit_test(test_ielc180_at2),
        cmocka_unit_test(test_northridge_two_column),
        cmocka_unit_test(test_kobe_value_columns),
        cmocka_unit_test(test_one_column_dt),
        cmocka_unit_test(test_benchmark_csv),
        cmocka_unit_test(test_scale_compression_duration_tail),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_format_variants),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_resample_ramp_and_length),
        cmocka_unit_test(test_resample_coincident_samples),
        cmocka_unit_test(test_white_noise),
        cmocka_unit_test(test_peak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
