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

#include "common/config/config.h" /* drths_acceptance_default */
#include "common/platform/metrics.h"

#define N 1000

/* cmocka's assert_float_equal compares floats; these figures need doubles. */
#define assert_near(a, b, eps) assert_near_at((a), (b), (eps), #a, __LINE__)
static void assert_near_at(double a, double b, double eps, const char *what, int line)
{
    if (!(fabs(a - b) <= eps))
        fail_msg("line %d: %s = %.17g, expected %.17g within %g", line, what, a, b, eps);
}

/* Writes a CSV with the given columns (each n values) and loads it back into t. The file is
 * removed at once; t keeps its path for messages. */
static void load(drths_csv_table_t *t, const char *const *names, const double *const *cols,
                 int ncols, long n)
{
    char path[64] = "/tmp/drths-test-metrics-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    for (int c = 0; c < ncols; c++)
        fprintf(f, "%s%s", c ? "," : "", names[c]);
    fputc('\n', f);
    for (long i = 0; i < n; i++) {
        for (int c = 0; c < ncols; c++)
            fprintf(f, "%s%.17g", c ? "," : "", cols[c][i]);
        fputc('\n', f);
    }
    fclose(f);
    drths_error_t err = {{0}};
    int rc = drths_csv_read(t, path, &err);
    if (rc)
        fail_msg("%s", err.msg);
    unlink(path);
}

static double tm[N], r1[N], r2[N], h1[N], h2[N], ra[N], ha[N], tm2[N], tm_late[N], st[N];

/* Reference: floor 1 x = sin, floor 2 x = 2 cos, accelerations -sin; hybrid: floor 1 scaled by
 * 1.01, floor 2 offset by 1 % of its peak, acceleration scaled by 0.98. */
static void fill(void)
{
    for (int i = 0; i < N; i++) {
        st[i] = i;
        tm[i] = i * 0.002;
        tm2[i] = i * 0.001;
        tm_late[i] = tm[i] + 5.0;
        r1[i] = sin(2 * M_PI * tm[i]);
        r2[i] = 2 * cos(2 * M_PI * tm[i]);
        ra[i] = -sin(2 * M_PI * tm[i]);
        h1[i] = 1.01 * r1[i];
        h2[i] = r2[i] + 0.02;
        ha[i] = 0.98 * ra[i];
    }
}

/* The report fits a 100-column terminal: no line of text is wider. */
static void assert_narrow(const char *text)
{
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t w = nl ? (size_t)(nl - line) : strlen(line);
        if (w > 100)
            fail_msg("line wider than 100 columns: %.*s", (int)w, line);
        line += w + (nl != NULL);
    }
}

static void test_scaled_series_gives_one_percent(void **state)
{
    (void)state;
    fill();
    drths_series_error_t e;
    drths_series_error_compute(h1, r1, N, &e);
    assert_near(e.peak_err, 0.01, 1e-12);
    assert_near(e.rms_err, 0.01, 1e-12);
    assert_near(e.peak_hyb, 1.01 * e.peak_ref, 1e-12);
}

static void test_offset_and_hand_values(void **state)
{
    (void)state;
    /* r = 1,-1,1,-1 and h = r + 0.1: max|h| = 1.1 -> 10 %; sum d^2 = 0.04, sum r^2 = 4 -> 10 %. */
    const double r[] = {1, -1, 1, -1}, h[] = {1.1, -0.9, 1.1, -0.9};
    drths_series_error_t e;
    drths_series_error_compute(h, r, 4, &e);
    assert_near(e.peak_err, 0.1, 1e-12);
    assert_near(e.rms_err, 0.1, 1e-12);
    /* r = 0,3,-4 and h = 0,3,-3: peak |3 - 4| / 4 = 25 %; RMS sqrt(1 / 25) = 20 %. */
    const double r2v[] = {0, 3, -4}, h2v[] = {0, 3, -3};
    drths_series_error_compute(h2v, r2v, 3, &e);
    assert_near(e.peak_err, 0.25, 1e-12);
    assert_near(e.rms_err, 0.20, 1e-12);
    assert_near(e.peak_hyb, 3.0, 0);
    assert_near(e.peak_ref, 4.0, 0);
}

static void test_zeros_and_nan(void **state)
{
    (void)state;
    const double z[] = {0, 0, 0}, one[] = {0, 1, 0}, nanv[] = {0, NAN, 0};
    drths_series_error_t e;
    drths_series_error_compute(z, z, 3, &e);
    assert_true(e.peak_err == 0.0 && e.rms_err == 0.0);
    drths_series_error_compute(one, z, 3, &e);
    assert_true(isinf(e.peak_err) && isinf(e.rms_err));
    drths_series_error_compute(nanv, one, 3, &e);
    assert_true(isnan(e.peak_err) && isnan(e.rms_err));
    drths_series_error_compute(one, one, 0, &e); /* nothing compared: both peaks 0 */
    assert_true(e.peak_err == 0.0 && e.rms_err == 0.0);
}

static void test_fidelity_per_floor_and_max(void **state)
{
    (void)state;
    fill();
    const char *names[] = {"step", "time_s", "x1_m", "x2_m", "a1_abs_m_s2", "a2_abs_m_s2",
                           "damper_force_N"};
    const double *refc[] = {st, tm, r1, r2, ra, ra, r1};
    const double *hybc[] = {st, tm, h1, h2, ha, ra, h1};
    drths_csv_table_t ref, hyb;
    load(&ref, names, refc, 7, N);
    load(&hyb, names, hybc, 7, N - 100); /* a hybrid run stopped early: compare 900 rows */
    drths_fidelity_t fid;
    drths_error_t err = {{0}};
    assert_int_equal(drths_fidelity_compute(&hyb, &ref, &fid, &err), 0);
    assert_int_equal(fid.floors, 2);
    assert_int_equal(fid.rows, N - 100);
    assert_int_equal(fid.hyb_rows, N - 100);
    assert_int_equal(fid.ref_rows, N);
    assert_int_equal(fid.first_step, 0);
    assert_int_equal(fid.last_step, N - 101);
    assert_near(fid.dt_s, 0.002, 1e-12);
    assert_near(fid.disp[0].peak_err, 0.01, 1e-9);
    assert_near(fid.disp[0].rms_err, 0.01, 1e-9);
    /* floor 2: the peak of 2 cos is 2 (at t = 0), so the offset 0.02 adds 1 % to the peak; the
     * RMS error is 0.02 / rms(2 cos), about 0.02 / sqrt(2) = 1.41 %, computed here from the
     * definition over the 900 compared rows. */
    double sd = 0, sr = 0;
    for (int i = 0; i < N - 100; i++) {
        sd += 0.02 * 0.02;
        sr += r2[i] * r2[i];
    }
    assert_near(fid.disp[1].peak_err, 0.01, 1e-9);
    assert_near(fid.disp[1].rms_err, sqrt(sd / sr), 1e-9);
    assert_true(fid.disp[1].rms_err > 0.0139 && fid.disp[1].rms_err < 0.0145);
    assert_near(fid.acc[0].peak_err, 0.02, 1e-9);
    assert_near(fid.acc[0].rms_err, 0.02, 1e-9);
    assert_near(fid.acc[1].peak_err, 0.0, 1e-12);
    assert_near(fid.disp_max.rms_err, fid.disp[1].rms_err, 0);
    assert_near(fid.disp_max.peak_ref, 2.0, 1e-12);
    assert_near(fid.acc_max.peak_err, 0.02, 1e-9);
    assert_true(fid.has_damper_force);
    assert_near(fid.damper_force.rms_err, 0.01, 1e-9);

    /* The same order swapped compares the reference against the hybrid: 1/1.01 - 1. */
    assert_int_equal(drths_fidelity_compute(&ref, &hyb, &fid, &err), 0);
    assert_near(fid.disp[0].peak_err, 0.01 / 1.01, 1e-9);
    drths_csv_close(&ref);
    drths_csv_close(&hyb);
}

static void expect_fidelity_error(const char *const *hn, const double *const *hc, int hcols,
                                  const char *const *rn, const double *const *rc, int rcols,
                                  const char *want)
{
    drths_csv_table_t ref, hyb;
    load(&hyb, hn, hc, hcols, 10);
    load(&ref, rn, rc, rcols, 10);
    drths_fidelity_t fid;
    drths_error_t err = {{0}};
    assert_int_equal(drths_fidelity_compute(&hyb, &ref, &fid, &err), -EINVAL);
    if (!strstr(err.msg, want))
        fail_msg("message \"%s\" lacks \"%s\"", err.msg, want);
    drths_csv_close(&ref);
    drths_csv_close(&hyb);
}

static void test_fidelity_refuses_mismatches(void **state)
{
    (void)state;
    fill();
    const char *two[] = {"step", "time_s", "x1_m", "x2_m", "a1_abs_m_s2", "a2_abs_m_s2"};
    const char *one[] = {"step", "time_s", "x1_m", "a1_abs_m_s2"};
    const double *c2[] = {st, tm, r1, r2, ra, ra};
    const double *c2dt[] = {st, tm2, r1, r2, ra, ra};
    const double *c2late[] = {st, tm_late, r1, r2, ra, ra};
    expect_fidelity_error(two, c2, 6, one, c2, 4, "floors differ");
    expect_fidelity_error(two, c2dt, 6, two, c2, 6, "time steps differ");
    expect_fidelity_error(two, c2late, 6, two, c2, 6, "start times differ");
    const char *noacc[] = {"step", "time_s", "x1_m", "x2_m", "a1_abs_m_s2", "a3_abs_m_s2"};
    expect_fidelity_error(noacc, c2, 6, two, c2, 6, ": no column a2_abs_m_s2");
    const char *notime[] = {"step", "t", "x1_m", "x2_m", "a1_abs_m_s2", "a2_abs_m_s2"};
    expect_fidelity_error(two, c2, 6, notime, c2, 6, ": no column time_s");
    const char *nox[] = {"step", "time_s", "y1_m", "x2_m", "a1_abs_m_s2", "a2_abs_m_s2"};
    expect_fidelity_error(nox, c2, 6, two, c2, 6, ": no column x1_m");
    /* Without a step column the rows cannot be joined: refused, never matched by position. */
    expect_fidelity_error(two + 1, c2 + 1, 5, two, c2, 6, ": no column step");
    /* Steps that go back are a malformed record: file, line and column named. */
    double back[10];
    for (int i = 0; i < 10; i++)
        back[i] = i == 5 ? 3 : i;
    const double *cback[] = {back, tm, r1, r2, ra, ra};
    expect_fidelity_error(two, cback, 6, two, c2, 6, ":7: step 3 does not follow 4");
}

/* Rows cut out of the hybrid record: the gap is counted and named, and the errors are those of
 * the steps both records have, computed here from the definitions. */
static void test_fidelity_joins_by_step(void **state)
{
    (void)state;
    fill();
    /* The hybrid record lacks steps 100..299 and 700..709; its rows after the first hole sit at
     * positions 200 and 10 rows earlier than the reference's rows of the same steps. */
    static double hs[N], ht[N], hx[N], ha2[N];
    long n = 0;
    for (int i = 0; i < N; i++) {
        if ((i >= 100 && i < 300) || (i >= 700 && i < 710))
            continue;
        hs[n] = st[i];
        ht[n] = tm[i];
        hx[n] = h1[i];
        ha2[n] = ha[i];
        n++;
    }
    const char *names[] = {"step", "time_s", "x1_m", "a1_abs_m_s2"};
    const double *refc[] = {st, tm, r1, ra};
    const double *hybc[] = {hs, ht, hx, ha2};
    drths_csv_table_t ref, hyb;
    load(&ref, names, refc, 4, N);
    load(&hyb, names, hybc, 4, n);
    drths_fidelity_t fid;
    drths_error_t err = {{0}};
    assert_int_equal(drths_fidelity_compute(&hyb, &ref, &fid, &err), 0);
    assert_int_equal(fid.rows, N - 210);
    assert_near(fid.dt_s, 0.002, 1e-12);
    /* Scaled by 1.01 at every step: 1 % whatever rows are missing, if joined by step. */
    assert_near(fid.disp[0].rms_err, 0.01, 1e-9);
    assert_near(fid.disp[0].peak_err, 0.01, 1e-9);
    assert_near(fid.disp[0].max_err, 0.01, 1e-9);
    assert_near(fid.acc[0].rms_err, 0.02, 1e-9);

    drths_gaps_t g;
    assert_int_equal(drths_gaps_compute(&hyb, "step", 0, N - 1, &g, &err), 0);
    assert_int_equal(g.missing, 210);
    assert_int_equal(g.holes, 2);
    assert_int_equal(g.rows, N - 210);
    assert_int_equal(g.hole_first[0], 100);
    assert_int_equal(g.hole_last[0], 299);
    assert_int_equal(g.hole_first[1], 700);
    assert_int_equal(g.hole_last[1], 709);
    /* A range wider than the record: the missing ends count too. */
    assert_int_equal(drths_gaps_compute(&hyb, "step", -5, N + 4, &g, &err), 0);
    assert_int_equal(g.missing, 220);
    assert_int_equal(g.holes, 4);
    assert_int_equal(g.hole_first[0], -5);
    assert_int_equal(g.hole_last[3], N + 4);
    /* Its own range, and a complete record. */
    assert_int_equal(drths_gaps_compute(&ref, "step", 1, 0, &g, &err), 0);
    assert_int_equal(g.missing, 0);
    assert_int_equal(g.first, 0);
    assert_int_equal(g.last, N - 1);
    assert_int_equal(drths_gaps_compute(&ref, "tick", 1, 0, &g, &err), -EINVAL);
    assert_non_null(strstr(err.msg, ": no column tick"));
    drths_csv_close(&ref);
    drths_csv_close(&hyb);
}

static void test_verdict(void **state)
{
    (void)state;
    drths_acceptance_t a;
    drths_acceptance_default(&a);
    drths_fidelity_t fid;
    memset(&fid, 0, sizeof fid);
    fid.disp_max.rms_err = 0.005;
    fid.disp_max.peak_err = 0.012; /* above 1 % */
    fid.acc_max.rms_err = 0.04;
    drths_link_stats_t ls;
    memset(&ls, 0, sizeof ls);
    ls.has_numerical = ls.has_physical = 1;
    ls.tracking_rms_err = 0.01;
    ls.cmd_concealed_frac = 0.001;
    ls.fb_concealed_frac = NAN; /* unknown: fails */
    ls.hold_ticks = 0;
    drths_gaps_t g = {.missing = 0};
    drths_verdict_t v;
    drths_verdict_compute(&a, &fid, &ls, NULL, &g, 1, 0, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_FAIL);
    assert_int_equal(v.c[0].outcome, DRTHS_OUTCOME_PASS); /* no rows missing */
    assert_int_equal(v.c[1].outcome, DRTHS_OUTCOME_PASS);
    assert_int_equal(v.c[2].outcome, DRTHS_OUTCOME_FAIL);
    assert_near(v.c[2].value, 1.2, 1e-12);
    assert_int_equal(v.c[6].outcome, DRTHS_OUTCOME_FAIL);
    fid.disp_max.peak_err = 0.009;
    ls.fb_concealed_frac = 0.0;
    drths_verdict_compute(&a, &fid, &ls, NULL, &g, 1, 0, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_PASS);
    /* A gap fails the run unless allowed; HOLD fails unless allowed. */
    g.missing = 3;
    drths_verdict_compute(&a, &fid, &ls, NULL, &g, 1, 0, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_FAIL);
    assert_int_equal(v.missing, 3);
    drths_verdict_compute(&a, &fid, &ls, NULL, &g, 1, 1, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_PASS);
    assert_int_equal(v.c[0].outcome, DRTHS_OUTCOME_NONE);
    ls.hold_ticks = 5;
    drths_verdict_compute(&a, &fid, &ls, NULL, &g, 1, 1, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_FAIL);
    a.hold_allowed = 1;
    drths_verdict_compute(&a, &fid, &ls, NULL, &g, 1, 1, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_PASS);
    /* Without a reference and link data nothing is judged but the records. */
    drths_verdict_compute(&a, NULL, NULL, NULL, NULL, 0, 0, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_PASS);
    assert_int_equal(v.c[1].outcome, DRTHS_OUTCOME_NONE);
}

static void test_stats_nearest_rank(void **state)
{
    (void)state;
    double v[1003];
    for (int i = 0; i < 1000; i++)
        v[i] = 1000 - i; /* 1000 .. 1, unsorted on purpose */
    v[1000] = v[1001] = v[1002] = NAN;
    drths_stats_t s;
    assert_int_equal(drths_stats_compute(v, 1003, &s), 0);
    assert_int_equal(s.n, 1000);
    assert_near(s.min, 1, 0);
    assert_near(s.p50, 500, 0);
    assert_near(s.p99, 990, 0);
    assert_near(s.p999, 999, 0);
    assert_near(s.max, 1000, 0);
    assert_int_equal(drths_stats_compute(v + 1000, 3, &s), 0);
    assert_int_equal(s.n, 0);
    assert_true(isnan(s.p50));
}

static double fb_conc[N], rtt[N], ld[N], phys_conc[N], hold[N], cmd[N], meas[N], lead[N],
    late[N];

static void fill_link(void)
{
    fill();
    for (int i = 0; i < N; i++) {
        fb_conc[i] = i % 100 == 0;          /* 10 of 1000 */
        rtt[i] = i < 10 ? NAN : 80.0 + i % 10; /* 80 .. 89 ms after the first measurement */
        ld[i] = 450;
        phys_conc[i] = i % 250 == 0;        /* 4 of 1000 */
        hold[i] = i >= 990;                 /* 10 of 1000 */
        cmd[i] = 0.01 * r1[i];
        meas[i] = 1.01 * cmd[i];
        lead[i] = phys_conc[i] ? NAN : 5.0 + i % 3;
        late[i] = i + 1;                    /* 1 .. 1000 us */
    }
}

static void test_link_stats(void **state)
{
    (void)state;
    fill_link();
    const char *nn[] = {"time_s", "x1_m", "a1_abs_m_s2", "fb_concealed", "rtt_ms",
                        "loop_delay_ticks"};
    const double *nc[] = {tm, r1, ra, fb_conc, rtt, ld};
    const char *pn[] = {"tick", "time_s", "concealed", "hold", "command_m", "meas_disp_m",
                        "cmd_lead_ms", "wake_late_us"};
    const double *pc[] = {st, tm, phys_conc, hold, cmd, meas, lead, late};
    drths_csv_table_t num, phys;
    load(&num, nn, nc, 6, N);
    load(&phys, pn, pc, 8, N);
    drths_link_stats_t ls;
    drths_error_t err = {{0}};
    assert_int_equal(drths_link_stats_compute(&num, &phys, &ls, &err), 0);
    assert_near(ls.tick_s, 0.002, 1e-12);
    assert_true(ls.has_numerical && ls.has_physical);
    assert_int_equal(ls.fb_concealed, 10);
    assert_near(ls.fb_concealed_frac, 0.01, 1e-12);
    assert_int_equal(ls.rtt_ms.n, 990);
    assert_near(ls.rtt_ms.min, 80, 0);
    assert_near(ls.rtt_ms.max, 89, 0);
    assert_near(ls.rtt_ticks.max, 89 / 2.0, 1e-9); /* 2 ms ticks */
    assert_near(ls.loop_delay_ticks.p50, 450, 0);
    assert_int_equal(ls.cmd_concealed, 4);
    assert_int_equal(ls.hold_ticks, 10);
    assert_int_equal(ls.cmd_lead_ms.n, 996);
    assert_near(ls.cmd_lead_ms.min, 5, 0);
    assert_near(ls.wake_late_us.p50, 500, 0);
    assert_near(ls.wake_late_us.p99, 990, 0);
    assert_near(ls.wake_late_us.p999, 999, 0);
    assert_near(ls.wake_late_us.max, 1000, 0);
    assert_near(ls.tracking_rms_err, 0.01, 1e-9);
    assert_near(ls.tracking_peak_m, 0.01 * 0.01, 1e-9);

    /* A reference numerical.csv and no physical.csv: nothing to report, no error. */
    drths_csv_table_t plain;
    load(&plain, nn, nc, 3, N);
    assert_int_equal(drths_link_stats_compute(&plain, NULL, &ls, &err), 0);
    assert_false(ls.has_numerical || ls.has_physical);
    drths_csv_close(&plain);

    /* A hybrid record missing one of its columns, and a physical.csv missing one. */
    load(&plain, nn, nc, 5, N);
    assert_int_equal(drths_link_stats_compute(&plain, NULL, &ls, &err), -EINVAL);
    assert_non_null(strstr(err.msg, ": no column loop_delay_ticks"));
    assert_non_null(strstr(err.msg, plain.path));
    drths_csv_close(&plain);
    load(&plain, pn, pc, 7, N);
    assert_int_equal(drths_link_stats_compute(NULL, &plain, &ls, &err), -EINVAL);
    assert_non_null(strstr(err.msg, ": no column wake_late_us"));
    drths_csv_close(&plain);
    drths_csv_close(&num);
    drths_csv_close(&phys);
}

static void test_report_table_and_json(void **state)
{
    (void)state;
    fill_link();
    const char *names[] = {"step", "time_s", "x1_m", "a1_abs_m_s2", "fb_concealed", "rtt_ms",
                           "loop_delay_ticks"};
    const double *refc[] = {st, tm, r1, ra, fb_conc, rtt, ld};
    const double *hybc[] = {st, tm, h1, ha, fb_conc, rtt, ld};
    const char *pn[] = {"time_s", "concealed", "hold", "command_m", "meas_disp_m", "cmd_lead_ms",
                        "wake_late_us"};
    const double *pc[] = {tm, phys_conc, hold, cmd, meas, lead, late};
    drths_csv_table_t ref, hyb, phys;
    load(&ref, names, refc, 4, N);
    load(&hyb, names, hybc, 7, N);
    load(&phys, pn, pc, 7, N);
    drths_fidelity_t fid;
    drths_link_stats_t ls;
    assert_int_equal(drths_fidelity_compute(&hyb, &ref, &fid, NULL), 0);
    assert_int_equal(drths_link_stats_compute(&hyb, &phys, &ls, NULL), 0);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    drths_report_t rep = {.run = "runs/hyb", .ref = "runs/ref", .fid = &fid, .link = &ls};
    drths_report_print(f, &rep);
    fclose(f);
    /* floor 1: peaks 1.01 vs 1 m -> 1010 mm vs 1000 mm; acceleration 0.98 -> 2 % */
    assert_non_null(strstr(text, "    1   1010.000   1000.000      1.000      1.000      1.000"));
    assert_non_null(strstr(text, "0.980      1.000      2.000      2.000      2.000"));
    assert_non_null(strstr(text, "max err   max|h - r| / max|r|"));
    assert_non_null(strstr(text, "concealed feedback     10 of 1000 steps (1.000 %)"));
    assert_non_null(strstr(text, "RMS error norm         1.000 %"));
    assert_non_null(strstr(text, "tick lateness (us)"));
    assert_narrow(text);
    free(text);

    f = open_memstream(&text, &len);
    drths_report_write_json(f, &rep);
    fclose(f);
    assert_non_null(strstr(text, "\"disp_rms_err_pct\": 1"));
    assert_non_null(strstr(text, "\"acc_peak_err_pct\": 2"));
    assert_non_null(strstr(text, "\"fb_concealed\": 10"));
    assert_non_null(strstr(text, "\"rms_err_pct\": 1"));
    free(text);

    /* Without link statistics the table stops after the fidelity part. */
    f = open_memstream(&text, &len);
    drths_report_t bare = {.run = "a", .fid = &fid};
    drths_report_print(f, &bare);
    fclose(f);
    assert_null(strstr(text, "Link"));
    assert_null(strstr(text, "reference  "));
    free(text);
    drths_csv_close(&ref);
    drths_csv_close(&hyb);
    drths_csv_close(&phys);
}

/* ---- the drive --------------------------------------------------------------------------- */

#define ND 1000
#define DT 0.0002 /* 5 kHz */
static double d_tick[ND], d_time[ND], d_cmdtick[ND], d_cmd[ND], d_hold[ND], d_drive[ND],
    d_drive2[ND], d_cmd2[ND];

/* A command that starts from rest after 10 rest ticks, 2.5 mm (1 - cos(4 pi t)), and a drive
 * that leads it by two ticks, as a compensation does; ticks 700..709 in HOLD, where the
 * command column is the drive. */
static double smooth(double t)
{
    return t <= 0 ? 0.0 : 0.0025 * (1 - cos(4 * M_PI * t));
}

static void fill_drive(void)
{
    for (int i = 0; i < ND; i++) {
        double t = i * DT;
        d_tick[i] = i;
        d_time[i] = t;
        d_cmdtick[i] = i < 10 ? -1 : i;
        d_cmd[i] = smooth(t - 10 * DT);
        d_drive[i] = smooth(t - 8 * DT);
        d_hold[i] = i >= 700 && i < 710;
        if (d_hold[i])
            d_cmd[i] = d_drive[i];
    }
}

static const drths_drive_limits_t default_env = {0.1, 1.25, 200, 0.01};

static void drive_table(drths_csv_table_t *t, const double *drive, long n)
{
    const char *names[] = {"tick", "time_s", "cmd_tick", "command_m", "hold", "drive_m"};
    const double *cols[] = {d_tick, d_time, d_cmdtick, d_cmd, d_hold, drive};
    load(t, names, cols, 6, n);
}

/* The verdict of a physical.csv with drive figures d, everything else passing. */
static void drive_verdict(const drths_drive_stats_t *d, drths_verdict_t *v)
{
    drths_acceptance_t a;
    drths_acceptance_default(&a);
    drths_link_stats_t ls;
    memset(&ls, 0, sizeof ls);
    ls.has_physical = 1;
    drths_verdict_compute(&a, NULL, &ls, d, NULL, 0, 0, v);
}

static void test_drive_smooth_passes(void **state)
{
    (void)state;
    fill_drive();
    drths_csv_table_t t;
    drive_table(&t, d_drive, ND);
    assert_int_equal(drths_record_channel_count(&t), 1);
    drths_drive_stats_t d;
    drths_error_t err = {{0}};
    assert_int_equal(drths_drive_compute(&t, 1, &default_env, NULL, DT, &d, &err), 0);
    const drths_drive_channel_t *c = &d.ch[0];
    assert_true(d.has_drive && d.has_limits && d.channels == 1);
    assert_string_equal(c->name, "ch1");
    /* Commanded: not the 10 rest ticks, not the 10 in HOLD. */
    assert_int_equal(c->commanded, ND - 20);
    /* The largest command step is 2.5 mm * 4 pi * dt at t = 0.125 s. */
    double step = 0.0025 * 4 * M_PI * DT;
    assert_near(c->max_cmd_step_m, step, 1e-9);
    assert_true(c->step_ratio >= 0.99 && c->step_ratio < 1.01);
    /* The largest fraction: the position at the end, 4.5 mm of 100 mm (the velocity, 31 mm/s,
     * uses 2.5 % of its bound). */
    assert_int_equal(c->use_bound, DRTHS_DRIVE_BOUND_POSITION);
    assert_int_equal(c->use_tick, ND - 1);
    assert_near(c->max_use, smooth((ND - 9) * DT) / 0.1, 1e-6);
    assert_near(c->max_velocity_m_s, 0.0025 * 4 * M_PI, 1e-4);
    assert_int_equal(c->outside, 0);
    assert_int_equal(c->first_outside_tick, -1);
    drths_verdict_t v;
    drive_verdict(&d, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_PASS);
    assert_string_equal(v.c[8].name, "drive step / command step");
    assert_int_equal(v.c[8].outcome, DRTHS_OUTCOME_PASS);
    assert_int_equal(v.c[9].outcome, DRTHS_OUTCOME_PASS);
    assert_near(v.c[9].limit, 1.0, 0);
    assert_non_null(strstr(v.c[9].where, "position"));
    drths_csv_close(&t);
}

static void test_drive_jump_fails(void **state)
{
    (void)state;
    fill_drive();
    /* The drive jumps 2 mm for one tick at tick 500 while the command glides. */
    memcpy(d_drive2, d_drive, sizeof d_drive2);
    d_drive2[500] += 0.002;
    drths_csv_table_t t;
    drive_table(&t, d_drive2, ND);
    drths_drive_stats_t d;
    drths_error_t err = {{0}};
    assert_int_equal(drths_drive_compute(&t, 1, &default_env, NULL, DT, &d, &err), 0);
    const drths_drive_channel_t *c = &d.ch[0];
    double step = 0.0025 * 4 * M_PI * DT;
    assert_true(c->drive_step_tick == 500 || c->drive_step_tick == 501);
    assert_near(c->max_drive_step_m, 0.002, 2e-5);
    assert_near(c->step_ratio, c->max_drive_step_m / step, 1e-3);
    assert_true(c->step_ratio > 150);
    /* Velocity 10 m/s at ticks 500 and 501; the acceleration peaks at tick 501 (the drive
     * turns back): 4 mm / dt^2 = 1e5 m/s^2, 500 times its bound. Ticks 500..502 outside. */
    assert_int_equal(c->use_bound, DRTHS_DRIVE_BOUND_ACCELERATION);
    assert_int_equal(c->use_tick, 501);
    assert_near(c->max_use, 500, 1.0);
    assert_near(c->max_velocity_m_s, 10, 0.1);
    assert_int_equal(c->outside, 3);
    assert_int_equal(c->first_outside_tick, 500);
    drths_verdict_t v;
    drive_verdict(&d, &v);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_FAIL);
    assert_int_equal(v.c[8].outcome, DRTHS_OUTCOME_FAIL);
    assert_non_null(strstr(v.c[8].where, "at tick 50"));
    assert_int_equal(v.c[9].outcome, DRTHS_OUTCOME_FAIL);
    assert_non_null(strstr(v.c[9].where, "acceleration"));
    assert_non_null(strstr(v.c[9].where, "at tick 501"));
    assert_non_null(strstr(v.c[9].where, "outside at 3 ticks, the first 500"));

    /* The table says where, and so does report.json. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    drths_link_stats_t ls;
    memset(&ls, 0, sizeof ls);
    drths_report_t rep = {.run = "r", .drive = &d, .limits_source = "exp.yaml", .verdict = &v};
    drths_report_print(f, &rep);
    fclose(f);
    assert_non_null(strstr(text, "  envelope   exp.yaml\n"));
    assert_non_null(strstr(text, "OUTSIDE the envelope at 3 ticks, the first at tick 500"));
    assert_non_null(strstr(text, "drive envelope used, max (fraction)"));
    assert_non_null(strstr(text, "  where: acceleration"));
    assert_narrow(text);
    free(text);
    f = open_memstream(&text, &len);
    drths_report_write_json(f, &rep);
    fclose(f);
    assert_non_null(strstr(text, "\"max_use_bound\": \"limit_drive_acceleration_m_s2\""));
    assert_non_null(strstr(text, "\"first_outside_tick\": 500"));
    assert_non_null(strstr(text, "\"where\": \"acceleration"));
    free(text);

    /* A tighter ratio limit fails the smooth drive too; a looser one passes the jump. */
    drths_acceptance_t a;
    drths_acceptance_default(&a);
    assert_near(a.drive_step_ratio, 2, 0);
    a.drive_step_ratio = 1000;
    drths_link_stats_t lp = {.has_physical = 1};
    drths_verdict_compute(&a, NULL, &lp, &d, NULL, 0, 0, &v);
    assert_int_equal(v.c[8].outcome, DRTHS_OUTCOME_PASS);
    assert_int_equal(v.outcome, DRTHS_OUTCOME_FAIL); /* the envelope still fails it */
    drths_csv_close(&t);
}

static void test_drive_details(void **state)
{
    (void)state;
    fill_drive();
    drths_drive_stats_t d;
    drths_error_t err = {{0}};
    drths_csv_table_t t;

    /* A jump in HOLD is no drive step of the ratio (the drive serves no command there), but the
     * envelope sees it. */
    memcpy(d_drive2, d_drive, sizeof d_drive2);
    for (int i = 703; i < ND; i++)
        d_drive2[i] += 0.001;
    drive_table(&t, d_drive2, ND);
    assert_int_equal(drths_drive_compute(&t, 1, &default_env, NULL, DT, &d, &err), 0);
    assert_true(d.ch[0].step_ratio < 1.01);
    assert_int_equal(d.ch[0].first_outside_tick, 703);
    drths_csv_close(&t);
    /* The jump back on the first commanded tick after HOLD is a drive step: the rejoin. */
    for (int i = 710; i < ND; i++)
        d_drive2[i] -= 0.001;
    drive_table(&t, d_drive2, ND);
    assert_int_equal(drths_drive_compute(&t, 1, &default_env, NULL, DT, &d, &err), 0);
    assert_int_equal(d.ch[0].drive_step_tick, 710);
    assert_true(d.ch[0].step_ratio > 100);
    drths_csv_close(&t);

    /* A drive moving exactly at its velocity bound, as written with 9 digits, is inside. */
    for (int i = 0; i < ND; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.9g", 1e-3 + i * 1.25 * DT);
        d_drive2[i] = strtod(buf, NULL);
        d_cmd2[i] = d_drive2[i];
    }
    const char *names[] = {"tick", "time_s", "command_m", "hold", "drive_m"};
    const double *cols[] = {d_tick, d_time, d_cmd2, d_hold, d_drive2};
    load(&t, names, cols, 5, 400);
    drths_drive_limits_t wide = {1.0, 1.25, 1e12, 0.01};
    assert_int_equal(drths_drive_compute(&t, 1, &wide, NULL, DT, &d, &err), 0);
    assert_int_equal(d.ch[0].use_bound, DRTHS_DRIVE_BOUND_VELOCITY);
    assert_true(d.ch[0].max_use <= 1.0 && d.ch[0].max_use > 0.999);
    assert_int_equal(d.ch[0].outside, 0);
    assert_int_equal(d.ch[0].commanded, 400); /* no cmd_tick: every tick outside HOLD */
    /* Without limits: the ratio alone; the envelope criterion is not evaluated. */
    assert_int_equal(drths_drive_compute(&t, 1, NULL, NULL, DT, &d, &err), 0);
    assert_false(d.has_limits);
    drths_verdict_t v;
    drive_verdict(&d, &v);
    assert_int_equal(v.c[8].outcome, DRTHS_OUTCOME_PASS);
    assert_int_equal(v.c[9].outcome, DRTHS_OUTCOME_NONE);
    assert_non_null(strstr(v.c[9].note, "envelope unknown"));
    drths_csv_close(&t);

    /* A gap: no difference spans it. The tick after a hole is judged for position alone. */
    const char *gn[] = {"tick", "time_s", "cmd_tick", "command_m", "hold", "drive_m"};
    double gt[4] = {0, 1, 5, 6}, gtime[4], gc[4] = {0, 1, 5, 6}, gz[4] = {0},
           gu[4] = {0, 0, 0.05, 0.05};
    for (int i = 0; i < 4; i++)
        gtime[i] = gt[i] * DT;
    const double *gcols[] = {gt, gtime, gc, gu, gz, gu};
    load(&t, gn, gcols, 6, 4);
    assert_int_equal(drths_drive_compute(&t, 1, &default_env, NULL, DT, &d, &err), 0);
    assert_near(d.ch[0].max_drive_step_m, 0, 0);
    assert_int_equal(d.ch[0].use_bound, DRTHS_DRIVE_BOUND_POSITION);
    assert_near(d.ch[0].max_use, 0.5, 1e-6);
    drths_csv_close(&t);

    /* A drive that is not a number is outside, whatever the bounds. */
    memcpy(d_drive2, d_drive, sizeof d_drive2);
    d_drive2[300] = NAN;
    drive_table(&t, d_drive2, ND);
    assert_int_equal(drths_drive_compute(&t, 1, &default_env, NULL, DT, &d, &err), 0);
    assert_true(isinf(d.ch[0].max_use));
    assert_true(isnan(d.ch[0].step_ratio));
    drive_verdict(&d, &v);
    assert_int_equal(v.c[8].outcome, DRTHS_OUTCOME_FAIL);
    assert_int_equal(v.c[9].outcome, DRTHS_OUTCOME_FAIL);
    drths_csv_close(&t);

    /* No drive_m: no figures, no error; the criteria are not evaluated. */
    load(&t, names, cols, 4, 10);
    assert_int_equal(drths_record_channel_count(&t), 0);
    assert_int_equal(drths_drive_compute(&t, 1, &default_env, NULL, DT, &d, &err), 0);
    assert_false(d.has_drive);
    drive_verdict(&d, &v);
    assert_int_equal(v.c[8].outcome, DRTHS_OUTCOME_NONE);
    assert_string_equal(v.c[8].note, "no drive_m in physical.csv");
    drths_csv_close(&t);
}

static void test_drive_channels(void **state)
{
    (void)state;
    fill_drive();
    memcpy(d_drive2, d_drive, sizeof d_drive2);
    d_drive2[400] -= 0.001;
    const char *names[] = {"tick",    "time_s",       "cmd_tick",      "command_m", "hold",
                           "drive_m", "ch2_cmd_tick", "ch2_command_m", "ch2_hold",  "ch2_drive_m"};
    const double *cols[] = {d_tick,  d_time,    d_cmdtick, d_cmd,  d_hold,
                            d_drive, d_cmdtick, d_cmd,     d_hold, d_drive2};
    drths_csv_table_t t;
    load(&t, names, cols, 10, ND);
    assert_int_equal(drths_record_channel_count(&t), 2);
    const char *chn[] = {"x", "y"};
    drths_drive_limits_t lim[2] = {default_env, default_env};
    lim[1].acceleration_m_s2 = 1e6; /* y's own envelope: the jump stays inside it */
    lim[1].velocity_m_s = 10;
    drths_drive_stats_t d;
    drths_error_t err = {{0}};
    assert_int_equal(drths_drive_compute(&t, 2, lim, chn, DT, &d, &err), 0);
    assert_string_equal(d.ch[1].name, "y");
    assert_string_equal(d.ch[1].prefix, "ch2_");
    assert_int_equal(d.ratio_channel, 1);
    assert_int_equal(d.ch[1].drive_step_tick == 400 || d.ch[1].drive_step_tick == 401, 1);
    assert_int_equal(d.ch[1].outside, 0);
    drths_verdict_t v;
    drive_verdict(&d, &v);
    assert_int_equal(v.c[8].outcome, DRTHS_OUTCOME_FAIL);
    assert_non_null(strstr(v.c[8].where, "y: drive step"));
    assert_int_equal(v.c[9].outcome, DRTHS_OUTCOME_PASS);
    /* The same jump against the first channel's envelope is outside it. */
    lim[1] = default_env;
    assert_int_equal(drths_drive_compute(&t, 2, lim, chn, DT, &d, &err), 0);
    assert_int_equal(d.use_channel, 1);
    drive_verdict(&d, &v);
    assert_int_equal(v.c[9].outcome, DRTHS_OUTCOME_FAIL);
    assert_non_null(strstr(v.c[9].where, "y: acceleration"));
    /* A third channel the record does not have. */
    drths_drive_limits_t lim3[3] = {default_env, default_env, default_env};
    assert_int_equal(drths_drive_compute(&t, 3, lim3, NULL, DT, &d, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "no column ch3_drive_m"));
    drths_csv_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scaled_series_gives_one_percent),
        cmocka_unit_test(test_offset_and_hand_values),
        cmocka_unit_test(test_zeros_and_nan),
        cmocka_unit_test(test_fidelity_per_floor_and_max),
        cmocka_unit_test(test_fidelity_refuses_mismatches),
        cmocka_unit_test(test_fidelity_joins_by_step),
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_stats_nearest_rank),
        cmocka_unit_test(test_link_stats),
        cmocka_unit_test(test_report_table_and_json),
        cmocka_unit_test(test_drive_smooth_passes),
        cmocka_unit_test(test_drive_jump_fails),
        cmocka_unit_test(test_drive_details),
        cmocka_unit_test(test_drive_channels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
