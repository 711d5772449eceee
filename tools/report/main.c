/* drths-report: error metrics of a run against the reference run (the same experiment integrated
 * in one process with the virtual specimen: per floor, the peak, largest and RMS errors of
 * displacement and absolute acceleration), link and real-time statistics, the completeness of
 * the records, a verdict against the acceptance criteria, and PNG plots. docs/report.md defines
 * every figure.
 *
 *   drths-report RUN_DIR [--reference REF_DIR] [--physical PHYS_DIR] [--out DIR] [--no-plots]
 *                [--allow-gaps]
 *
 * The drive (physical.csv's drive_m) is judged from the record itself: its largest step against
 * the command's, and the largest fraction of the drive envelope it used, with the limits of the
 * actuator site's experiment file.
 *
 * Records are joined by step (numerical.csv) and tick (physical.csv), never by row position; a
 * step or tick missing from a record is a gap, named in the table, and fails the run unless
 * --allow-gaps is given. Prints the table, writes report.txt and report.json into RUN_DIR (or
 * DIR), the records with units and the run's metadata as report.h5 (HDF5), the records again as
 * report.mat (MATLAB v7.3, for load), and, when gnuplot is installed, the PNG plots. Exit codes: 0
 * the run passed its acceptance criteria and its records are complete (also when gnuplot is
 * missing), 1 it failed a criterion, a record has a gap, an output could not be written or gnuplot
 * failed, 2 bad usage or a missing/malformed input file or column.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/config/config.h"
#include "common/platform/adaptreport.h"
#include "common/platform/cli.h"
#include "common/platform/csvread.h"
#include "common/platform/metrics.h"
#include "common/platform/sitelinks.h"
#include "common/platform/stats.h"
#include "tools/report/charz.h"
#include "tools/report/hdf5.h"

/* Rows per plotted series: enough for a smooth 1200-pixel plot, small enough for gnuplot to
 * draw quickly from a 60 s run at 5 kHz. Time histories keep each bucket's minimum and maximum,
 * so no peak disappears. */
#define PLOT_ROWS 8000

#define PROG "drths-report"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " RUN_DIR [--reference REF_DIR] [--physical PHYS_DIR] [--out DIR]\n"
            "                    [--no-plots] [--allow-gaps] [--experiment FILE]\n"
            "Compares RUN_DIR/numerical.csv with REF_DIR/numerical.csv step by step (per-floor\n"
            "peak, largest and RMS errors of displacement and absolute acceleration), adds link\n"
            "and real-time statistics from the hybrid columns and the actuator site's\n"
            "physical.csv when present, checks that no step or tick is missing from a record,\n"
            "judges the run against its acceptance criteria (PASS / FAIL), prints the table and\n"
            "writes report.txt, report.json, report.h5 (the records as HDF5, units and metadata\n"
            "as attributes), report.mat (the records for MATLAB's load, v7.3) and PNG plots\n"
            "(with gnuplot). docs/report.md defines every figure. On a characterization folder\n"
            "(drths-physical --characterize): the fit table, the force error per test and the\n"
            "measured-against-model hysteresis loops.\n"
            "\n"
            "  -r, --reference REF_DIR  the reference run to compare with\n"
            "  -p, --physical PHYS_DIR  where physical.csv is (default RUN_DIR)\n"
            "  -o, --out DIR            where the report goes (default RUN_DIR)\n"
            "  -n, --no-plots           no PNG plots\n"
            "  -e, --experiment FILE    the acceptance criteria from FILE's acceptance section\n"
            "                           (default RUN_DIR/experiment.yaml, the run's copy; the\n"
            "                           defaults of docs/experiment-file.md without either),\n"
            "                           and the drive envelope (physical.limit_drive_*) from\n"
            "                           FILE (default PHYS_DIR/experiment.yaml, the actuator\n"
            "                           site's copy, else RUN_DIR's; without either the\n"
            "                           envelope is not judged)\n"
            "  -g, --allow-gaps         steps or ticks missing from a record do not fail the run\n"
            "                           (the figures cover the rows present either way)\n"
            "  -h, --help               print this help and exit\n"
            "      --version            print the version and exit\n"
            "\n"
            "Without gnuplot the report is written without plots (exit 0).\n"
            "\n");
    drths_cli_print_exit_codes(f, "FAIL, a record with a gap, or an output not written");
}

typedef struct inputs {
    drths_csv_table_t run, ref, phys;
    int has_ref, has_phys;
} inputs_t;

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(DRTHS_EXIT_FAILED);
    }
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Loads dir/name into t. A missing optional file returns 1 and leaves t empty. */
static int load(drths_csv_table_t *t, const char *dir, const char *name, int optional)
{
    char *path = join(dir, name);
    drths_error_t err = {{0}};
    int rc = drths_csv_read(t, path, &err);
    free(path);
    if (rc == -ENOENT && optional)
        return 1;
    if (rc) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return -1;
    }
    return 0;
}

static const double *column(const drths_csv_table_t *t, const char *name)
{
    const double *c = drths_csv_column(t, name);
    if (!c)
        fprintf(stderr, PROG ": %s: no column %s\n", t->path, name);
    return c;
}

/* Checks that a record has what the plots need, so that a missing column stops the tool
 * before anything is printed. */
static int check_plot_columns(const drths_csv_table_t *t)
{
    static const char *const needed[] = {"time_s",        "x1_m",           "a1_abs_m_s2",
                                         "damper_disp_m", "damper_vel_m_s", "damper_force_N"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (!column(t, needed[i]))
            return -1;
    int floors = drths_record_floor_count(t);
    for (int i = 1; i <= floors; i++) {
        char name[32];
        snprintf(name, sizeof name, "a%d_abs_m_s2", i);
        if (!column(t, name))
            return -1;
    }
    return 0;
}

/* ---- plot data --------------------------------------------------------------------------- */

typedef struct series {
    const double *v;
    double scale;
} series_t;

/* Writes time and columns; above max_rows, each bucket of rows becomes two rows holding every
 * column's minimum and maximum in the order they occurred. */
static int write_envelope(const char *path, const double *t, const series_t *cols, int ncols,
                          long n, long max_rows)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    long bucket = n <= max_rows ? 1 : (n + max_rows / 2 - 1) / (max_rows / 2);
    for (long b0 = 0; b0 < n; b0 += bucket) {
        long b1 = b0 + bucket < n ? b0 + bucket : n;
        if (bucket == 1) {
            fprintf(f, "%.9g", t[b0]);
            for (int c = 0; c < ncols; c++)
                fprintf(f, " %.9g", cols[c].v[b0] * cols[c].scale);
            fputc('\n', f);
            continue;
        }
        double first[64], second[64];
        for (int c = 0; c < ncols && c < 64; c++) {
            long imin = -1, imax = -1;
            for (long i = b0; i < b1; i++) {
                double v = cols[c].v[i];
                if (isnan(v))
                    continue;
                if (imin < 0 || v < cols[c].v[imin])
                    imin = i;
                if (imax < 0 || v > cols[c].v[imax])
                    imax = i;
            }
            if (imin < 0) {
                first[c] = second[c] = NAN;
                continue;
            }
            long a = imin < imax ? imin : imax, z = imin < imax ? imax : imin;
            first[c] = cols[c].v[a] * cols[c].scale;
            second[c] = cols[c].v[z] * cols[c].scale;
        }
        fprintf(f, "%.9g", t[b0]);
        for (int c = 0; c < ncols; c++)
            fprintf(f, " %.9g", first[c]);
        fprintf(f, "\n%.9g", t[b1 - 1]);
        for (int c = 0; c < ncols; c++)
            fprintf(f, " %.9g", second[c]);
        fputc('\n', f);
    }
    return fclose(f) ? -errno : 0;
}

/* Writes every k-th row so that at most max_rows remain (for loops, where order matters more
 * than extremes). */
static int write_stride(const char *path, const series_t *cols, int ncols, long n, long max_rows)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    long k = n <= max_rows ? 1 : (n + max_rows - 1) / max_rows;
    for (long i = 0; i < n; i += k) {
        for (int c = 0; c < ncols; c++)
            fprintf(f, "%s%.9g", c ? " " : "", cols[c].v[i] * cols[c].scale);
        fputc('\n', f);
    }
    return fclose(f) ? -errno : 0;
}

/* Counts per time bin: column c of the output is the number of rows with flag[c] set, or the
 * largest value of max[c], in each bin of width w seconds. */
static int write_bins(const char *path, const double *t, long n, double w, const double *flag,
                      const double *maxv, long *top_count, double *top_value)
{
    *top_count = 0;
    *top_value = NAN;
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    long i = 0;
    while (i < n) {
        /* Each pass takes at least one row, so rounding of t / w (or a NaN time) can never
         * stall the loop. */
        double k = floor(t[i] / w);
        double b0 = k * w;
        long count = 0;
        double m = NAN;
        do {
            if (flag)
                count += flag[i] > 0.5;
            if (maxv && !isnan(maxv[i]) && (isnan(m) || maxv[i] > m))
                m = maxv[i];
            i++;
        } while (i < n && floor(t[i] / w) == k);
        fprintf(f, "%.9g %ld %.9g\n", b0 + 0.5 * w, count, m);
        if (count > *top_count)
            *top_count = count;
        if (!isnan(m) && (isnan(*top_value) || m > *top_value))
            *top_value = m;
    }
    return fclose(f) ? -errno : 0;
}

/* ---- gnuplot ----------------------------------------------------------------------------- */

/* Returns the gnuplot executable found on PATH (static buffer) or NULL. */
static const char *find_gnuplot(void)
{
    static char found[4096];
    const char *path = getenv("PATH");
    if (!path)
        return NULL;
    while (*path) {
        size_t len = strcspn(path, ":");
        if (len > 0 && len < sizeof found - 16) {
            snprintf(found, sizeof found, "%.*s/gnuplot", (int)len, path);
            if (access(found, X_OK) == 0)
                return found;
        }
        path += len + (path[len] == ':');
    }
    return NULL;
}

/* Writes s as a gnuplot single-quoted string ('' stands for one quote). */
static void gp_string(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static void gp_output(FILE *gp, const char *out_dir, const char *name, int width, int height)
{
    char *png = join(out_dir, name);
    fprintf(gp, "set terminal pngcairo size %d,%d font 'sans,10' noenhanced\nset output ", width,
            height);
    gp_string(gp, png);
    fputc('\n', gp);
    free(png);
}

typedef struct plot_job {
    const char *tmp;     /* temporary folder for .dat files */
    const char *out_dir; /* where the PNGs go */
    FILE *gp;            /* the gnuplot script being written */
    char **files;        /* files created in tmp, removed at the end */
    int nfiles;
    const char *caption; /* run, experiment and date, the second line of every title */
    char layout[32];     /* "rows,cols" of the next multiplot */
} plot_job_t;

/* A multiplot title: what it shows, then the caption on a second line (gnuplot reads "\n" in
 * double quotes as a line break; the texts themselves go in single quotes, taken literally). */
static void gp_title(plot_job_t *j, const char *what)
{
    fprintf(j->gp, "set multiplot layout %s title ", j->layout);
    gp_string(j->gp, what);
    fprintf(j->gp, ".\"\\n\".");
    gp_string(j->gp, j->caption ? j->caption : "");
    fputc('\n', j->gp);
}

static const char *tmpfile_in(plot_job_t *j, const char *name)
{
    char *p = join(j->tmp, name);
    char **nf = realloc(j->files, (size_t)(j->nfiles + 1) * sizeof *nf);
    if (!nf) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(DRTHS_EXIT_FAILED);
    }
    j->files = nf;
    j->files[j->nfiles++] = p;
    return p;
}

static int write_histories(plot_job_t *j, const inputs_t *in, const char *kind)
{
    int disp = strcmp(kind, "displacement") == 0;
    int floors = drths_record_floor_count(&in->run);
    const drths_csv_table_t *tabs[2] = {&in->run, in->has_ref ? &in->ref : NULL};
    const char *dat[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        if (!tabs[k])
            continue;
        series_t cols[64];
        int nc = floors < 64 ? floors : 64;
        for (int i = 0; i < nc; i++) {
            char name[32];
            snprintf(name, sizeof name, disp ? "x%d_m" : "a%d_abs_m_s2", i + 1);
            cols[i].v = drths_csv_column(tabs[k], name);
            cols[i].scale = disp ? 1e3 : 1.0;
            if (!cols[i].v) {
                fprintf(stderr, PROG ": %s: no column %s\n", tabs[k]->path, name);
                return -1;
            }
        }
        char fname[64];
        snprintf(fname, sizeof fname, "%s_%s.dat", kind, k ? "ref" : "run");
        dat[k] = tmpfile_in(j, fname);
        int rc = write_envelope(dat[k], drths_csv_column(tabs[k], "time_s"), cols, nc,
                                tabs[k]->rows, PLOT_ROWS);
        if (rc) {
            fprintf(stderr, PROG ": %s: %s\n", dat[k], strerror(-rc));
            return -1;
        }
    }
    char png[64];
    snprintf(png, sizeof png, "report_%s.png", kind);
    gp_output(j->gp, j->out_dir, png, 1200, 120 + 260 * floors);
    snprintf(j->layout, sizeof j->layout, "%d,1", floors);
    gp_title(j, disp ? "Floor displacement relative to ground" : "Floor absolute acceleration");
    fprintf(j->gp, "set grid\nset key top right\n");
    for (int i = 0; i < floors; i++) {
        fprintf(j->gp, "set ylabel 'floor %d %s'\n", i + 1, disp ? "x (mm)" : "a (m/s^2)");
        fprintf(j->gp, i == floors - 1 ? "set xlabel 'time (s)'\n" : "unset xlabel\n");
        fprintf(j->gp, "plot ");
        if (dat[1]) {
            gp_string(j->gp, dat[1]);
            fprintf(j->gp, " using 1:%d with lines lw 4 lc rgb '#a0a0a0' title 'reference', ",
                    i + 2);
        }
        gp_string(j->gp, dat[0]);
        fprintf(j->gp, " using 1:%d with lines lw 1 lc rgb '#d62728' title 'hybrid'\n", i + 2);
    }
    fprintf(j->gp, "unset multiplot\nunset xlabel\nunset ylabel\n");
    return 0;
}

static int write_damper(plot_job_t *j, const inputs_t *in)
{
    const drths_csv_table_t *tabs[2] = {&in->run, in->has_ref ? &in->ref : NULL};
    const char *dat[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        if (!tabs[k])
            continue;
        series_t cols[3] = {{drths_csv_column(tabs[k], "damper_disp_m"), 1e3},
                            {drths_csv_column(tabs[k], "damper_vel_m_s"), 1.0},
                            {drths_csv_column(tabs[k], "damper_force_N"), 1e-3}};
        dat[k] = tmpfile_in(j, k ? "damper_ref.dat" : "damper_run.dat");
        int rc = write_stride(dat[k], cols, 3, tabs[k]->rows, 4 * PLOT_ROWS);
        if (rc) {
            fprintf(stderr, PROG ": %s: %s\n", dat[k], strerror(-rc));
            return -1;
        }
    }
    gp_output(j->gp, j->out_dir, "report_damper.png", 1200, 520);
    snprintf(j->layout, sizeof j->layout, "1,2");
    gp_title(j, "Damper force-displacement and force-velocity loops");
    fprintf(j->gp, "set grid\nset key top left\nset ylabel 'damper force (kN)'\n");
    for (int p = 0; p < 2; p++) {
        int xcol = p == 0 ? 1 : 2;
        fprintf(j->gp, "set xlabel '%s'\nplot ",
                p == 0 ? "damper displacement (mm)" : "damper velocity (m/s)");
        if (dat[1]) {
            gp_string(j->gp, dat[1]);
            fprintf(j->gp, " using %d:3 with lines lw 4 lc rgb '#a0a0a0' title 'reference', ",
                    xcol);
        }
        gp_string(j->gp, dat[0]);
        fprintf(j->gp, " using %d:3 with lines lw 1 lc rgb '#d62728' title 'hybrid'\n", xcol);
    }
    fprintf(j->gp, "unset multiplot\nunset xlabel\nunset ylabel\n");
    return 0;
}

/* Per time window of w seconds: the window's centre, then for each column its three quantiles
 * q[0..2] (nearest rank: 0 is the minimum, 1 the maximum; NaN left out; NaN for a window without
 * a value). Drawn as lines, the percentiles of a 5 kHz series stay readable where every sample
 * would fill the panel. */
static int write_percentiles(const char *path, const double *t, long n, double w,
                             const double *const *cols, int ncols, const double q[3])
{
    double *scratch = malloc((size_t)(n > 0 ? n : 1) * sizeof *scratch);
    FILE *f = scratch ? fopen(path, "w") : NULL;
    if (!f) {
        int e = scratch ? -errno : -ENOMEM;
        free(scratch);
        return e;
    }
    long i = 0;
    while (i < n) {
        double k = floor(t[i] / w);
        long i0 = i;
        do
            i++;
        while (i < n && floor(t[i] / w) == k);
        fprintf(f, "%.9g", (k + 0.5) * w);
        for (int c = 0; c < ncols; c++) {
            long m = 0;
            for (long r = i0; r < i; r++)
                if (!isnan(cols[c][r]))
                    scratch[m++] = cols[c][r];
            if (m == 0) {
                fprintf(f, " nan nan nan");
                continue;
            }
            drths_sort_double(scratch, (size_t)m);
            for (int qi = 0; qi < 3; qi++)
                fprintf(f, " %.9g", scratch[drths_quantile_rank((size_t)m, q[qi])]);
        }
        fputc('\n', f);
    }
    free(scratch);
    return fclose(f) ? -errno : 0;
}

static const double link_q[3] = {0.5, 0.99, 1.0};
static const char *const link_qname[3] = {"p50", "p99", "max"};
static const double band_q[3] = {0.0, 0.5, 1.0};
static const char *const band_qname[3] = {"min", "p50", "max"};

/* One panel of write_percentiles' columns first..first+2, named by qname: the median (p50)
 * thick and blue, the maximum red, any other quantile orange; the key in one row, above the
 * lines when the y range is automatic. */
static void gp_percentiles(plot_job_t *j, const char *dat, int first, const char *what,
                           const char *const qname[3], double w)
{
    fprintf(j->gp, "set key horizontal\nset offsets 0, 0, graph 0.2, 0\n");
    for (int k = 0; k < 3; k++) {
        int median = strcmp(qname[k], "p50") == 0, max = strcmp(qname[k], "max") == 0;
        fprintf(j->gp, "%s", k ? ", " : "plot ");
        gp_string(j->gp, dat);
        fprintf(j->gp, " using 1:%d with lines lw %d lc rgb '%s' title '%s %s per %.3g s'",
                first + k, median ? 2 : 1,
                median ? "#1f77b4"
                : max  ? "#d62728"
                       : "#ff7f0e",
                what, qname[k], w);
    }
    fprintf(j->gp, "\nset key vertical\nset offsets\n");
}

/* The error of each floor's displacement, hybrid minus reference, over time: the rows of both
 * records with the same step (the join of the table's figures), so that a gap in either record
 * is a gap in the line, not a shift of one history against the other. */
static int write_error(plot_job_t *j, const inputs_t *in)
{
    const drths_csv_table_t *h = &in->run, *r = &in->ref;
    int floors = drths_record_floor_count(h);
    const double *hs = drths_csv_column(h, "step"), *rs = drths_csv_column(r, "step");
    const double *ht = drths_csv_column(h, "time_s");
    if (!hs || !rs) {
        fprintf(stderr, PROG ": %s: no column step\n", hs ? r->path : h->path);
        return -1;
    }
    int nc = floors < 64 ? floors : 64;
    const double *hx[64], *rx[64];
    for (int i = 0; i < nc; i++) {
        char name[32];
        snprintf(name, sizeof name, "x%d_m", i + 1);
        hx[i] = drths_csv_column(h, name);
        rx[i] = drths_csv_column(r, name);
        if (!hx[i] || !rx[i]) {
            fprintf(stderr, PROG ": %s: no column %s\n", hx[i] ? r->path : h->path, name);
            return -1;
        }
    }
    long cap = h->rows < r->rows ? h->rows : r->rows;
    double *buf = malloc(((size_t)nc + 1) * (size_t)(cap > 0 ? cap : 1) * sizeof *buf);
    if (!buf) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    double *t = buf;
    long n = 0;
    /* Both step columns increase (drths_record_range checked them), so one merge pass finds
     * every common step. */
    for (long a = 0, b = 0; a < h->rows && b < r->rows;) {
        if (hs[a] < rs[b]) {
            a++;
        } else if (rs[b] < hs[a]) {
            b++;
        } else {
            t[n] = ht[a];
            for (int i = 0; i < nc; i++)
                buf[(size_t)(i + 1) * (size_t)cap + (size_t)n] = hx[i][a] - rx[i][b];
            n++, a++, b++;
        }
    }
    series_t cols[64];
    for (int i = 0; i < nc; i++)
        cols[i] = (series_t){buf + (size_t)(i + 1) * (size_t)cap, 1e3};
    const char *dat = tmpfile_in(j, "error.dat");
    int rc = write_envelope(dat, t, cols, nc, n, PLOT_ROWS);
    free(buf);
    if (rc) {
        fprintf(stderr, PROG ": %s: %s\n", dat, strerror(-rc));
        return -1;
    }
    gp_output(j->gp, j->out_dir, "report_error.png", 1200, 120 + 260 * nc);
    snprintf(j->layout, sizeof j->layout, "%d,1", nc);
    gp_title(j, "Displacement error, hybrid minus reference (rows joined by step)");
    fprintf(j->gp, "set grid\nset key top right\nset autoscale xfix\n");
    for (int i = 0; i < nc; i++) {
        fprintf(j->gp, "set ylabel 'floor %d error (mm)'\n", i + 1);
        fprintf(j->gp, i == nc - 1 ? "set xlabel 'time (s)'\n" : "unset xlabel\n");
        fprintf(j->gp, "plot ");
        gp_string(j->gp, dat);
        fprintf(j->gp,
                " using 1:%d with lines lw 1 lc rgb '#d62728' title 'x_hybrid - x_reference'\n",
                i + 2);
    }
    fprintf(j->gp, "unset multiplot\nunset xlabel\nunset ylabel\nset autoscale x\n");
    return 0;
}

/* The actuator's tracking from physical.csv: the commanded displacement with the measured one
 * over it, and the tracking error (measured minus commanded) in a second panel. */
static int write_tracking(plot_job_t *j, const inputs_t *in)
{
    const drths_csv_table_t *p = &in->phys;
    const double *t = drths_csv_column(p, "time_s");
    const double *cmd = drths_csv_column(p, "command_m");
    const double *meas = drths_csv_column(p, "meas_disp_m");
    if (!t || !cmd || !meas) {
        fprintf(stderr, PROG ": %s: no column %s\n", p->path,
                !t     ? "time_s"
                : !cmd ? "command_m"
                       : "meas_disp_m");
        return -1;
    }
    double *e = malloc((size_t)(p->rows > 0 ? p->rows : 1) * sizeof *e);
    if (!e) {
        fprintf(stderr, PROG ": out of memory\n");
        return -1;
    }
    /* The error in mm per window of at least 100 ms: its minimum, median and maximum, so that
     * the sensor noise reads as a band and a lag or an offset as a median away from zero. */
    for (long i = 0; i < p->rows; i++)
        e[i] = 1e3 * (meas[i] - cmd[i]);
    double t0 = p->rows > 0 ? t[0] : 0.0, t1 = p->rows > 0 ? t[p->rows - 1] : 1.0;
    double w = (t1 - t0) / 2000.0 > 0.1 ? (t1 - t0) / 2000.0 : 0.1;
    series_t cols[2] = {{cmd, 1e3}, {meas, 1e3}};
    const double *ecol[1] = {e};
    const char *dat = tmpfile_in(j, "tracking.dat"), *edat = tmpfile_in(j, "tracking_err.dat");
    int rc = write_envelope(dat, t, cols, 2, p->rows, PLOT_ROWS);
    if (!rc)
        rc = write_percentiles(edat, t, p->rows, w, ecol, 1, band_q);
    free(e);
    if (rc) {
        fprintf(stderr, PROG ": plot data in %s: %s\n", j->tmp, strerror(-rc));
        return -1;
    }
    gp_output(j->gp, j->out_dir, "report_tracking.png", 1200, 640);
    snprintf(j->layout, sizeof j->layout, "2,1");
    gp_title(j, "Actuator tracking: commanded and measured displacement (physical.csv)");
    fprintf(j->gp, "set grid\nset key top right\nunset xlabel\nset autoscale xfix\n"
                   "set lmargin 12\nset ylabel 'actuator displacement (mm)'\nplot ");
    gp_string(j->gp, dat);
    fprintf(j->gp, " using 1:2 with lines lw 4 lc rgb '#a0a0a0' title 'command', ");
    gp_string(j->gp, dat);
    fprintf(j->gp, " using 1:3 with lines lw 1 lc rgb '#d62728' title 'measured'\n");
    fprintf(j->gp, "set xlabel 'time (s)'\nset ylabel 'measured - command (mm)'\n");
    gp_percentiles(j, edat, 2, "error", band_qname, w);
    fprintf(j->gp, "unset multiplot\nunset xlabel\nunset ylabel\nset autoscale x\nunset lmargin\n");
    return 0;
}

/* Upper end of a y range that starts at 0: some room above the largest value, and at least 1
 * so that an all-zero series still has a range (gnuplot refuses an empty one). */
static double top_of(double v)
{
    return v > 0.0 ? v * 1.15 : 1.0;
}

static int write_link(plot_job_t *j, const inputs_t *in, const drths_link_stats_t *link)
{
    const drths_csv_table_t *run = &in->run;
    const double *t = drths_csv_column(run, "time_s");
    double t0 = run->rows > 0 ? t[0] : 0.0;
    double t1 = run->rows > 0 ? t[run->rows - 1] : 1.0;
    if (!(t1 > t0))
        t1 = t0 + 1.0;
    double w = (t1 - t0) / 1000.0 > 0.1 ? (t1 - t0) / 1000.0 : 0.1;
    /* Round trip and L per window of at least 100 ms (at most about 2000 windows). */
    double pw = (t1 - t0) / 2000.0 > 0.1 ? (t1 - t0) / 2000.0 : 0.1;
    const double *lcols[2] = {drths_csv_column(run, "rtt_ms"),
                              drths_csv_column(run, "loop_delay_ticks")};
    const char *rtt_dat = tmpfile_in(j, "rtt.dat");
    const char *fb_dat = tmpfile_in(j, "fb_bins.dat");
    long top_fb = 0, top_cmd = 0, top_hold = 0;
    double unused, top_late = NAN;
    int rc = write_percentiles(rtt_dat, t, run->rows, pw, lcols, 2, link_q);
    if (!rc)
        rc = write_bins(fb_dat, t, run->rows, w, drths_csv_column(run, "fb_concealed"), NULL,
                        &top_fb, &unused);
    const char *cmd_dat = NULL, *hold_dat = NULL;
    if (!rc && in->has_phys) {
        const double *pt = drths_csv_column(&in->phys, "time_s");
        cmd_dat = tmpfile_in(j, "cmd_bins.dat");
        hold_dat = tmpfile_in(j, "hold_bins.dat");
        rc = write_bins(cmd_dat, pt, in->phys.rows, w, drths_csv_column(&in->phys, "concealed"),
                        drths_csv_column(&in->phys, "wake_late_us"), &top_cmd, &top_late);
        if (!rc)
            rc = write_bins(hold_dat, pt, in->phys.rows, w, drths_csv_column(&in->phys, "hold"),
                            NULL, &top_hold, &unused);
    }
    if (rc) {
        fprintf(stderr, PROG ": plot data in %s: %s\n", j->tmp, strerror(-rc));
        return -1;
    }
    FILE *gp = j->gp;
    int panels = in->has_phys ? 4 : 3;
    gp_output(gp, j->out_dir, "report_link.png", 1200, 120 + 260 * panels);
    snprintf(j->layout, sizeof j->layout, "%d,1", panels);
    gp_title(j, "Link: round trip, loop delay L, concealed and late ticks");
    /* A fixed left margin lines the panels' time axes up whatever their tick labels' width. */
    fprintf(gp,
            "set grid\nset key top right\nunset xlabel\nset xrange [%.9g:%.9g]\n"
            "set lmargin 12\n",
            t0, t1);
    /* Every y range is explicit: an empty range is only a warning, but a panel whose points
     * are all undefined (no round trip measured yet) would stop gnuplot. */
    fprintf(gp, "set ylabel 'round trip (ms)'\n");
    if (link->rtt_ms.n > 0) {
        double lo = link->rtt_ms.min, hi = link->rtt_ms.max, pad = 0.05 * (hi - lo) + 0.5;
        fprintf(gp, "set yrange [%.9g:%.9g]\n", lo - pad, hi + 4 * pad); /* room for the key */
        gp_percentiles(j, rtt_dat, 2, "round trip", link_qname, pw);
    } else {
        fprintf(gp, "set yrange [0:1]\nplot -1 title 'no round trip measured'\n");
    }
    fprintf(gp, "set ylabel 'loop delay L (ticks)'\n");
    if (link->loop_delay_ticks.n > 0) {
        double lo = link->loop_delay_ticks.min, hi = link->loop_delay_ticks.max;
        double pad = 0.05 * (hi - lo) + 0.5;
        fprintf(gp, "set yrange [%.9g:%.9g]\n", lo - pad, hi + 4 * pad);
        gp_percentiles(j, rtt_dat, 5, "L", link_qname, pw);
    } else {
        fprintf(gp, "set yrange [0:1]\nplot -1 title 'no loop delay recorded'\n");
    }
    long top = top_fb > top_cmd ? top_fb : top_cmd;
    top = top > top_hold ? top : top_hold;
    fprintf(gp, "set ylabel 'count per %.3g s'\nset yrange [0:%.9g]\n", w, top_of((double)top));
    if (!in->has_phys)
        fprintf(gp, "set xlabel 'time (s)'\n");
    fprintf(gp, "plot ");
    gp_string(gp, fb_dat);
    fprintf(gp, " using 1:2 with steps lc rgb '#d62728' title 'concealed feedback'");
    if (in->has_phys) {
        fprintf(gp, ", ");
        gp_string(gp, cmd_dat);
        fprintf(gp, " using 1:2 with steps lc rgb '#2ca02c' title 'concealed commands', ");
        gp_string(gp, hold_dat);
        fprintf(gp, " using 1:2 with steps lc rgb '#000000' title 'hold ticks'\n");
        fprintf(gp, "set xlabel 'time (s)'\nset ylabel 'largest tick lateness (us)'\n");
        if (!isnan(top_late)) {
            fprintf(gp, "set yrange [0:%.9g]\nplot ", top_of(top_late));
            gp_string(gp, cmd_dat);
            fprintf(
                gp,
                " using 1:3 with steps lc rgb '#9467bd' title 'tick lateness, max per %.3g s'\n",
                w);
        } else {
            fprintf(gp, "set yrange [0:1]\nplot -1 title 'no tick lateness recorded'\n");
        }
    } else {
        fputc('\n', gp);
    }
    fprintf(gp, "unset multiplot\nset autoscale x\nset autoscale y\nunset lmargin\n");
    return 0;
}

/* Writes the data and the script, runs gnuplot on it, and cleans up. Returns 0 or -1. */
static int make_plots(const char *gnuplot, const inputs_t *in, const char *out_dir,
                      const drths_link_stats_t *link, const char *caption)
{
    const char *tmpdir = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/drths-report-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(tmp)) {
        fprintf(stderr, PROG ": cannot create a temporary folder %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    plot_job_t j = {.tmp = tmp, .out_dir = out_dir, .caption = caption};
    const char *script = tmpfile_in(&j, "report.gp");
    int rc = -1;
    j.gp = fopen(script, "w");
    if (!j.gp) {
        fprintf(stderr, PROG ": %s: %s\n", script, strerror(errno));
    } else {
        fprintf(j.gp, "set datafile missing 'nan'\n");
        rc = write_histories(&j, in, "displacement");
        if (!rc)
            rc = write_histories(&j, in, "acceleration");
        if (!rc && in->has_ref)
            rc = write_error(&j, in);
        if (!rc)
            rc = write_damper(&j, in);
        if (!rc && in->has_phys)
            rc = write_tracking(&j, in);
        if (!rc && link->has_numerical)
            rc = write_link(&j, in, link);
        if (fclose(j.gp) && !rc) {
            fprintf(stderr, PROG ": %s: %s\n", script, strerror(errno));
            rc = -1;
        }
    }
    if (!rc) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            execl(gnuplot, "gnuplot", script, (char *)NULL);
            fprintf(stderr, PROG ": cannot run %s: %s\n", gnuplot, strerror(errno));
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, PROG ": gnuplot failed (status %d); plots may be missing\n",
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            rc = -1;
        }
    }
    for (int i = 0; i < j.nfiles; i++) {
        unlink(j.files[i]);
        free(j.files[i]);
    }
    free(j.files);
    rmdir(tmp);
    return rc;
}

/* ---- main -------------------------------------------------------------------------------- */

static int write_text(const char *path, const drths_report_t *r, int json)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (json)
        drths_report_write_json(f, r);
    else
        drths_report_print(f, r);
    if (ferror(f) | fclose(f)) {
        fprintf(stderr, PROG ": write error on %s\n", path);
        return -1;
    }
    return 0;
}

typedef struct options {
    const char *run_dir, *ref_dir, *out_dir, *phys_dir, *experiment;
    int plots, allow_gaps;
} options_t;

/* Returns -1 to go on, or the exit code. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option opts[] = {{"reference", required_argument, NULL, 'r'},
                                         {"physical", required_argument, NULL, 'p'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"no-plots", no_argument, NULL, 'n'},
                                         {"allow-gaps", no_argument, NULL, 'g'},
                                         {"experiment", required_argument, NULL, 'e'},
                                         DRTHS_CLI_OPTIONS_COMMON,
                                         {NULL, 0, NULL, 0}};
    int c;
    memset(o, 0, sizeof *o);
    o->plots = 1;
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    while ((c = getopt_long(argc, argv, "r:p:o:nge:h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            o->ref_dir = optarg;
            break;
        case 'p':
            o->phys_dir = optarg;
            break;
        case 'o':
            o->out_dir = optarg;
            break;
        case 'n':
            o->plots = 0;
            break;
        case 'g':
            o->allow_gaps = 1;
            break;
        case 'e':
            o->experiment = optarg;
            break;
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind == argc)
        return drths_cli_usage_error(PROG, "no RUN_DIR given (see --help)");
    if (optind + 1 < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind + 1]);
    o->run_dir = argv[optind];
    if (!o->out_dir)
        o->out_dir = o->run_dir;
    if (!o->phys_dir)
        o->phys_dir = o->run_dir;
    return -1;
}

/* The gaps of each record: the numerical records against the steps either has (a step the
 * other record has is a step this one should have), physical.csv against its own ticks. */
static int find_gaps(const inputs_t *in, drths_gaps_t *gaps, int *ngaps, drths_error_t *err)
{
    long lo, hi, rlo, rhi;
    int rc = drths_record_range(&in->run, "step", &lo, &hi, err);
    if (!rc && in->has_ref) {
        rc = drths_record_range(&in->ref, "step", &rlo, &rhi, err);
        lo = rlo < lo ? rlo : lo;
        hi = rhi > hi ? rhi : hi;
    }
    *ngaps = 0;
    if (!rc) {
        rc = drths_gaps_compute(&in->run, "step", lo, hi, &gaps[*ngaps], err);
        gaps[(*ngaps)++].label = in->has_ref ? "hybrid numerical.csv" : "numerical.csv";
    }
    if (!rc && in->has_ref) {
        rc = drths_gaps_compute(&in->ref, "step", lo, hi, &gaps[*ngaps], err);
        gaps[(*ngaps)++].label = "reference numerical.csv";
    }
    if (!rc && in->has_phys) {
        rc = drths_gaps_compute(&in->phys, "tick", 1, 0, &gaps[*ngaps], err);
        gaps[(*ngaps)++].label = "physical.csv";
    }
    return rc;
}

/* A site's summary.json at path, read whole (NULL with *len 0 when it cannot be read; the
 * caller frees it). summary.json is a few kB; 1 MB is far beyond any the sites write. */
static char *read_summary(const char *path, size_t *len)
{
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = malloc(1 << 20);
    if (text)
        *len = fread(text, 1, 1 << 20, f);
    fclose(f);
    return text;
}

/* The per-site link table of a run of several links: the record's per-link columns and, when
 * RUN_DIR has one, summary.json's links (L needed, feedback wait). 0, or -1 after printing why
 * (a summary that names a site the record has not is of another run: a usage error). */
static int site_links(const char *run_dir, const drths_csv_table_t *run, drths_site_links_t *s)
{
    drths_error_t err = {{0}};
    if (drths_site_links_compute(run, s, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return -1;
    }
    if (s->n == 0)
        return 0;
    char *path = join(run_dir, "summary.json");
    size_t len = 0;
    char *text = read_summary(path, &len);
    int rc = text && len > 0 ? drths_site_links_read_summary(s, text, len, path, &err) : 0;
    if (rc)
        fprintf(stderr, PROG ": %s\n", err.msg);
    free(text);
    free(path);
    return rc ? -1 : 0;
}

/* The adaptive compensation's factors (docs/report.md, "Adaptive compensation"): the bounds and
 * the time at a bound from the actuator site's summary.json (PHYS_DIR's), the range over the
 * run from physical.csv. Nothing without physical.csv or a summary with tracking.adaptive. A
 * summary that is not JSON or whose figures are wrong (a site that died writing it) leaves the
 * factors out with a warning naming the file and what is wrong: the records are still judged. */
static void adaptive_factors(const char *phys_dir, const drths_csv_table_t *phys,
                             drths_adaptive_report_t *a)
{
    memset(a, 0, sizeof *a);
    char *path = join(phys_dir, "summary.json");
    size_t len = 0;
    char *text = read_summary(path, &len);
    drths_error_t err = {{0}};
    if (text && len > 0 && drths_adaptive_report_read_summary(a, text, len, path, &err))
        fprintf(stderr, PROG ": warning: %s; adaptive factors left out\n", err.msg);
    else if (a->present)
        drths_adaptive_report_add_record(a, phys);
    free(text);
    free(path);
}

/* "run <folder>, experiment <name>, <date>": the experiment from summary.json (or "?"), the
 * date when numerical.csv was last written. */
static void make_caption(const char *run_dir, char *out, size_t cap)
{
    char exp[256] = "?", date[64] = "?";
    char *path = join(run_dir, "summary.json");
    FILE *f = fopen(path, "r");
    free(path);
    if (f) {
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            char *k = strstr(line, "\"experiment\": \"");
            if (k) {
                k += strlen("\"experiment\": \"");
                size_t n = strcspn(k, "\"");
                snprintf(exp, sizeof exp, "%.*s", (int)n, k);
                break;
            }
        }
        fclose(f);
    }
    path = join(run_dir, "numerical.csv");
    struct stat st;
    if (stat(path, &st) == 0) {
        struct tm tm;
        localtime_r(&st.st_mtime, &tm);
        strftime(date, sizeof date, "%Y-%m-%d %H:%M", &tm);
    }
    free(path);
    snprintf(out, cap, "run %s, experiment %s, %s", run_dir, exp, date);
}

/* The acceptance criteria: from --experiment, else from the run folder's copy of the
 * experiment file, else the defaults. source says which, for the table. */
static int load_acceptance(const options_t *o, drths_acceptance_t *acc, char **source)
{
    drths_acceptance_default(acc);
    char *path = o->experiment ? strdup(o->experiment) : join(o->run_dir, "experiment.yaml");
    if (!path) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(DRTHS_EXIT_FAILED);
    }
    if (!o->experiment && access(path, F_OK) != 0) {
        free(path);
        *source = strdup("defaults (no experiment.yaml in RUN_DIR)");
        return 0;
    }
    drths_error_t err = {{0}};
    if (drths_experiment_load_acceptance(acc, path, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        free(path);
        return -1;
    }
    *source = path;
    return 0;
}

/* What the drive figures need from the experiment file: each actuator channel's envelope
 * (physical.limit_drive_*, per channel with physical.channels), its name and the tick. */
typedef struct envelope_src {
    int loaded; /* 0: no experiment file, the envelope is unknown */
    int nch;
    drths_drive_limits_t lim[DRTHS_METRICS_MAX_CHANNELS];
    char names[DRTHS_METRICS_MAX_CHANNELS][DRTHS_CHANNEL_NAME_MAX];
    double dt_s;
    char *path; /* the file read (owned), or NULL */
} envelope_src_t;

/* The envelope the actuator site enforced: from --experiment, else the actuator site's copy
 * of the experiment file (PHYS_DIR/experiment.yaml), else the run folder's. Neither: loaded 0
 * (the envelope criterion is not evaluated). A file that does not load is an error: the
 * verdict on the drive cannot be given without it. */
static int load_envelope(const options_t *o, envelope_src_t *e)
{
    memset(e, 0, sizeof *e);
    const char *dirs[2] = {o->phys_dir, o->run_dir};
    for (int i = 0; !o->experiment && i < 2 && !e->path; i++) {
        char *p = join(dirs[i], "experiment.yaml");
        if (access(p, F_OK) == 0)
            e->path = p;
        else
            free(p);
    }
    if (o->experiment && !(e->path = strdup(o->experiment))) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(DRTHS_EXIT_FAILED);
    }
    if (!e->path)
        return 0;
    drths_experiment_t x;
    drths_error_t err = {{0}};
    if (drths_experiment_load(&x, e->path, &err)) {
        fprintf(stderr, PROG ": the drive envelope: %s\n", err.msg);
        return -1;
    }
    int n = drths_experiment_n_actuators(&x);
    if (n > DRTHS_METRICS_MAX_CHANNELS) {
        fprintf(stderr, PROG ": %s: %d actuator channels; at most %d are supported\n", e->path, n,
                DRTHS_METRICS_MAX_CHANNELS);
        drths_experiment_close(&x);
        return -1;
    }
    e->nch = n;
    e->dt_s = 1.0 / x.rate_hz;
    for (int i = 0; i < n; i++) {
        const drths_experiment_t *v = drths_experiment_actuator(&x, i);
        e->lim[i] =
            (drths_drive_limits_t){.position_m = v->physical.limit_drive_m,
                                   .velocity_m_s = v->physical.limit_drive_velocity_m_s,
                                   .acceleration_m_s2 = v->physical.limit_drive_acceleration_m_s2,
                                   .offset_m = v->physical.limit_drive_offset_m};
        snprintf(e->names[i], sizeof e->names[i], "%s", drths_experiment_actuator_name(&x, i));
    }
    e->loaded = 1;
    drths_experiment_close(&x);
    return 0;
}

/* The drive figures of physical.csv, with the envelope when the experiment file gave it. */
static int drive_figures(const options_t *o, const inputs_t *in, const drths_link_stats_t *link,
                         envelope_src_t *env, drths_drive_stats_t *out)
{
    memset(out, 0, sizeof *out);
    int nrec = in->has_phys ? drths_record_channel_count(&in->phys) : 0;
    if (nrec == 0)
        return 0;
    if (load_envelope(o, env))
        return -1;
    if (env->loaded && env->nch != nrec) {
        fprintf(stderr, PROG ": %s has %d actuator channel%s (drive_m, ch2_drive_m, ...), %s %d\n",
                in->phys.path, nrec, nrec == 1 ? "" : "s", env->path, env->nch);
        return -1;
    }
    const char *names[DRTHS_METRICS_MAX_CHANNELS];
    for (int i = 0; i < DRTHS_METRICS_MAX_CHANNELS; i++)
        names[i] = env->loaded ? env->names[i] : NULL;
    drths_error_t err = {{0}};
    if (drths_drive_compute(&in->phys, nrec, env->loaded ? env->lim : NULL, names,
                            env->loaded ? env->dt_s : link->tick_s, out, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options_t o;
    int status = parse_options(argc, argv, &o);
    if (status >= 0)
        return status;

    /* A characterization folder (drths-physical --characterize) has its own report. */
    if (drths_report_is_charz(o.run_dir)) {
        if (mkdir(o.out_dir, 0777) && errno != EEXIST) {
            fprintf(stderr, PROG ": cannot create %s: %s\n", o.out_dir, strerror(errno));
            return DRTHS_EXIT_FAILED;
        }
        const char *gp = o.plots ? find_gnuplot() : NULL;
        if (o.plots && !gp)
            printf("gnuplot not found: no plots (install the Debian package gnuplot-nox)\n");
        return drths_report_charz(o.run_dir, o.out_dir, gp);
    }

    inputs_t in;
    memset(&in, 0, sizeof in);
    status = DRTHS_EXIT_USAGE; /* until the inputs are read */
    drths_error_t err = {{0}};
    drths_fidelity_t fid;
    drths_link_stats_t link;
    drths_gaps_t gaps[3];
    int ngaps = 0;
    drths_acceptance_t acc;
    drths_verdict_t verdict;
    drths_drive_stats_t drive;
    static drths_site_links_t sites;
    drths_adaptive_report_t adaptive = {0};
    envelope_src_t env = {0};
    char *acc_source = NULL;
    if (load_acceptance(&o, &acc, &acc_source))
        goto out;
    if (load(&in.run, o.run_dir, "numerical.csv", 0))
        goto out;
    if (o.ref_dir) {
        if (load(&in.ref, o.ref_dir, "numerical.csv", 0))
            goto out;
        in.has_ref = 1;
    }
    /* An explicit --physical folder must hold physical.csv; RUN_DIR may lack it. */
    int prc = load(&in.phys, o.phys_dir, "physical.csv", o.phys_dir == o.run_dir);
    if (prc < 0)
        goto out;
    in.has_phys = prc == 0;
    if (find_gaps(&in, gaps, &ngaps, &err) ||
        (in.has_ref && drths_fidelity_compute(&in.run, &in.ref, &fid, &err)) ||
        drths_link_stats_compute(&in.run, in.has_phys ? &in.phys : NULL, &link, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        goto out;
    }
    if (drive_figures(&o, &in, &link, &env, &drive) || site_links(o.run_dir, &in.run, &sites))
        goto out;
    if (in.has_phys)
        adaptive_factors(o.phys_dir, &in.phys, &adaptive);
    if (o.plots && (check_plot_columns(&in.run) || (in.has_ref && check_plot_columns(&in.ref))))
        goto out;
    const drths_fidelity_t *fp = in.has_ref ? &fid : NULL;
    drths_verdict_compute(&acc, fp, &link, &drive, gaps, ngaps, o.allow_gaps, &verdict);

    /* The verdict decides the exit code; a failure to write an output below overrides it. */
    status = verdict.outcome == DRTHS_OUTCOME_FAIL ? DRTHS_EXIT_FAILED : DRTHS_EXIT_OK;
    drths_report_t rep = {.run = o.run_dir,
                          .ref = o.ref_dir,
                          .acceptance_source = acc_source,
                          .fid = fp,
                          .link = &link,
                          .drive = &drive,
                          .limits_source = env.path,
                          .gaps = gaps,
                          .ngaps = ngaps,
                          .verdict = &verdict,
                          .sites = &sites,
                          .adaptive = &adaptive};
    drths_report_print(stdout, &rep);
    if (!in.has_phys)
        printf("\n(no physical.csv in %s: actuator, tracking and real-time figures left out)\n",
               o.phys_dir);
    printf("(overruns, compute time and timer latency: see the sites' summary.json)\n");
    if (verdict.missing > 0)
        fprintf(stderr, PROG ": %ld steps or ticks are missing from the records (see GAP)%s\n",
                verdict.missing,
                o.allow_gaps ? "; tolerated (--allow-gaps)"
                             : "; the figures cover the rows present (--allow-gaps to accept)");
    fflush(stdout);

    if (mkdir(o.out_dir, 0777) && errno != EEXIST) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", o.out_dir, strerror(errno));
        status = DRTHS_EXIT_FAILED;
        goto out;
    }
    char *txt = join(o.out_dir, "report.txt"), *json = join(o.out_dir, "report.json");
    if (write_text(txt, &rep, 0) || write_text(json, &rep, 1))
        status = DRTHS_EXIT_FAILED;
    free(txt);
    free(json);

    char *h5 = join(o.out_dir, "report.h5"), *summary = join(o.run_dir, "summary.json");
    drths_report_hdf5_t hd = {.run_dir = o.run_dir,
                              .ref_dir = o.ref_dir,
                              .verdict = drths_outcome_name(verdict.outcome),
                              .summary_path = summary,
                              .run = &in.run,
                              .ref = in.has_ref ? &in.ref : NULL,
                              .phys = in.has_phys ? &in.phys : NULL};
    if (drths_report_write_hdf5(h5, &hd, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        status = DRTHS_EXIT_FAILED;
    } else {
        printf("records: %s (HDF5: docs/report.md)\n", h5);
    }
    char *mat = join(o.out_dir, "report.mat");
    if (drths_report_write_mat(mat, &hd, &err)) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        status = DRTHS_EXIT_FAILED;
    } else {
        printf("records: %s (MATLAB v7.3: load('report.mat'))\n", mat);
    }
    free(mat);
    free(h5);
    free(summary);

    if (o.plots) {
        char caption[512];
        const char *gnuplot = find_gnuplot();
        if (!gnuplot)
            printf("gnuplot not found: no plots (install the Debian package gnuplot-nox)\n");
        else if (make_caption(o.run_dir, caption, sizeof caption),
                 make_plots(gnuplot, &in, o.out_dir, &link, caption))
            status = DRTHS_EXIT_FAILED;
        else
            printf("plots: %s/report_*.png:\n       displacement, acceleration%s, damper%s%s\n",
                   o.out_dir, in.has_ref ? ", error" : "", in.has_phys ? ", tracking" : "",
                   link.has_numerical ? ", link" : "");
    }
out:
    free(acc_source);
    free(env.path);
    drths_csv_close(&in.run);
    drths_csv_close(&in.ref);
    drths_csv_close(&in.phys);
    return status;
}
