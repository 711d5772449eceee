#include "tools/report/charz.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/models/damperfit.h"
#include "common/platform/cli.h"
#include "common/platform/csvread.h"

#define PROG "drths-report"

static void join(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

int drths_report_is_charz(const char *dir)
{
    char p[4096];
    struct stat st;
    join(p, sizeof p, dir, "fit_parameters.csv");
    return stat(p, &st) == 0;
}

static int need(const drths_csv_table_t *t, const char *name, const double **col)
{
    *col = drths_csv_column(t, name);
    if (!*col) {
        fprintf(stderr, PROG ": %s: no column %s\n", t->path, name);
        return -1;
    }
    return 0;
}

static void print_report(FILE *f, const drths_csv_table_t *pt, const drths_csv_table_t *tt)
{
    const double *idx = drths_csv_column(pt, "param"), *val = drths_csv_column(pt, "value");
    const double *u = drths_csv_column(pt, "u"), *tv = drths_csv_column(pt, "true");
    const double *pct = drths_csv_column(pt, "error_pct");
    int has_true = 0;
    for (long i = 0; i < pt->rows; i++)
        has_true |= !isnan(tv[i]);
    fprintf(f, "Damper characterization: the fit (the model's units: mm, kN, s, A)\n");
    fprintf(f, "%-8s %14s %12s", "param", "value", "u");
    if (has_true)
        fprintf(f, " %14s %9s", "true", "error %");
    fprintf(f, "\n");
    for (long i = 0; i < pt->rows; i++) {
        fprintf(f, "%-8s %14.7g ", drths_damperfit_name((int)idx[i]), val[i]);
        if (isnan(u[i]))
            fprintf(f, "%12s", drths_damperfit_fixed_reason((int)idx[i]) ? "fixed" : "held");
        else
            fprintf(f, "%12.3g", u[i]);
        if (has_true) {
            fprintf(f, " %14.7g", tv[i]);
            if (!isnan(pct[i]))
                fprintf(f, " %+9.3f", pct[i]);
        }
        fprintf(f, "\n");
    }
    const double *fr = drths_csv_column(tt, "frequency_hz"),
                 *am = drths_csv_column(tt, "amplitude_m");
    const double *cm = drths_csv_column(tt, "command"), *frms = drths_csv_column(tt, "force_rms_N");
    const double *erms = drths_csv_column(tt, "force_error_rms_N");
    const double *skip = drths_csv_column(tt, "skipped");
    /* Why each unfitted parameter was not fitted: the model's reason, or the record's (the
     * `held` column; a folder written before it had none). */
    const double *held = drths_csv_column(pt, "held");
    for (long i = 0; i < pt->rows; i++) {
        if (!isnan(u[i]))
            continue;
        const char *why = drths_damperfit_fixed_reason((int)idx[i]);
        if (!why && held && !isnan(held[i]))
            why = drths_damperfit_held_text((int)held[i]);
        fprintf(f, "  %s not identified: %s\n", drths_damperfit_name((int)idx[i]),
                why ? why : "held at its starting value");
    }
    /* Fitted but not within 2 % from the record (the `weak` column, when the folder has it). */
    const double *weak = drths_csv_column(pt, "weak");
    for (long i = 0; weak && i < pt->rows; i++)
        if (!isnan(weak[i]) && drths_damperfit_weak_text((int)weak[i]))
            fprintf(f, "  %s not determined to 2 %% by this record (u %.2g %%): %s\n",
                    drths_damperfit_name((int)idx[i]), 100.0 * u[i] / fabs(val[i]),
                    drths_damperfit_weak_text((int)weak[i]));
    fprintf(f, "\nForce error per test (measured - model)\n");
    fprintf(f, "%4s %-7s %9s %8s %8s %12s %12s %8s\n", "test", "kind", "amp mm", "f Hz", "command",
            "force kN", "error kN", "error %");
    for (long i = 0; i < tt->rows; i++) {
        const int rnd = !(fr[i] > 0.0);
        if (skip[i] != 0.0) {
            fprintf(f, "%4ld %-7s %9.3g %8.3g %8.3g   left out by the force guard\n", i, "sine",
                    am[i] * 1e3, fr[i], cm[i]);
            continue;
        }
        fprintf(f, "%4ld %-7s %9.3g %8.3g %8.3g %12.4g %12.4g %8.2f\n", i, rnd ? "random" : "sine",
                am[i] * 1e3, rnd ? 0.0 : fr[i], rnd ? NAN : cm[i], frms[i] / 1e3, erms[i] / 1e3,
                frms[i] > 0 ? 100.0 * erms[i] / frms[i] : NAN);
    }
}

/* The plots: for each command of the grid, its test at the largest amplitude (and lowest
 * frequency), measured and model, force against displacement and against velocity. */
static int plots(const char *dir, const char *out_dir, const char *gnuplot,
                 const drths_csv_table_t *tt)
{
    const double *fr = drths_csv_column(tt, "frequency_hz"),
                 *am = drths_csv_column(tt, "amplitude_m");
    const double *cm = drths_csv_column(tt, "command");
    const double *skip = drths_csv_column(tt, "skipped");
    double amax = 0.0;
    for (long i = 0; i < tt->rows; i++)
        if (fr[i] > 0.0 && skip[i] == 0.0)
            amax = fmax(amax, am[i]);
    long pick[16];
    int np = 0;
    for (long i = 0; i < tt->rows && np < 16; i++) {
        if (!(fr[i] > 0.0) || am[i] != amax || skip[i] != 0.0)
            continue;
        int dup = 0;
        for (int k = 0; k < np; k++)
            dup |= cm[pick[k]] == cm[i];
        if (!dup)
            pick[np++] = i;
    }
    if (np == 0)
        return 0;
    char script[4096], fit[4096];
    const char *td = getenv("TMPDIR");
    snprintf(script, sizeof script, "%s/drths-report-charz-%ld.gp", td && *td ? td : "/tmp",
             (long)getpid());
    join(fit, sizeof fit, dir, "fit.csv");
    FILE *g = fopen(script, "w");
    if (!g) {
        fprintf(stderr, PROG ": %s: %s\n", script, strerror(errno));
        return -1;
    }
    const int cols = np < 3 ? np : 3, rows = (np + cols - 1) / cols;
    static const char *const what[2][4] = {
        {"fx", "displacement (mm)", "$3*1e3", "force against displacement"},
        {"fv", "velocity (mm/s)", "$4*1e3", "force against velocity"}};
    fprintf(g, "set datafile separator ','\nset key top left box opaque\n");
    for (int w = 0; w < 2; w++) {
        fprintf(g, "set terminal pngcairo size %d,%d font ',10'\n", 480 * cols, 380 * rows + 40);
        fprintf(g, "set output '%s/report_charz_%s.png'\n", out_dir, what[w][0]);
        fprintf(g,
                "set multiplot layout %d,%d title 'Damper characterization: %s, measured and "
                "fitted model, %.3g mm sinusoid'\n",
                rows, cols, what[w][3], amax * 1e3);
        fprintf(g, "set xlabel '%s'\nset ylabel 'force (kN)'\nset grid\n", what[w][1]);
        for (int k = 0; k < np; k++) {
            const long t = pick[k];
            fprintf(g, "set title 'test %ld: %.3g Hz, command %.3g'\n", t, fr[t], cm[t]);
            fprintf(g,
                    "plot '%s' every ::1 using ($2==%ld ? %s : 1/0):($6/1e3) with lines lc rgb "
                    "'#1f77b4' title 'measured', '' every ::1 using ($2==%ld ? %s : 1/0):($7/1e3) "
                    "with lines lc rgb '#d62728' dt 2 title 'model'\n",
                    fit, t, what[w][2], t, what[w][2]);
        }
        fprintf(g, "unset multiplot\n");
    }
    int bad = ferror(g);
    if (fclose(g) != 0 || bad) {
        unlink(script);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl(gnuplot, "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    int rc = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, PROG ": gnuplot failed; plots may be missing\n");
        rc = -1;
    }
    unlink(script);
    return rc;
}

int drths_report_charz(const char *dir, const char *out_dir, const char *gnuplot)
{
    char p[4096];
    drths_csv_table_t pt = {0}, tt = {0};
    drths_error_t err = {{0}};
    const double *c;
    join(p, sizeof p, dir, "fit_parameters.csv");
    if (drths_csv_read(&pt, p, &err) != 0) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return DRTHS_EXIT_USAGE;
    }
    join(p, sizeof p, dir, "tests.csv");
    if (drths_csv_read(&tt, p, &err) != 0) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        drths_csv_close(&pt);
        return DRTHS_EXIT_USAGE;
    }
    int code = 0;
    if (need(&pt, "param", &c) || need(&pt, "value", &c) || need(&pt, "u", &c) ||
        need(&pt, "true", &c) || need(&pt, "error_pct", &c) || need(&tt, "frequency_hz", &c) ||
        need(&tt, "amplitude_m", &c) || need(&tt, "command", &c) || need(&tt, "force_rms_N", &c) ||
        need(&tt, "skipped", &c) || need(&tt, "force_error_rms_N", &c)) {
        code = DRTHS_EXIT_USAGE;
        goto out;
    }
    const double *idx = drths_csv_column(&pt, "param");
    for (long i = 0; i < pt.rows; i++)
        if (!(idx[i] >= 0 && idx[i] < DRTHS_DAMPERFIT_NPARAM) || idx[i] != floor(idx[i])) {
            fprintf(stderr, PROG ": %s: line %ld: param %g is not a parameter index\n", pt.path,
                    i + 2, idx[i]);
            code = DRTHS_EXIT_USAGE;
            goto out;
        }
    print_report(stdout, &pt, &tt);
    join(p, sizeof p, out_dir, "report.txt");
    FILE *f = fopen(p, "w");
    if (!f) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", p, strerror(errno));
        code = DRTHS_EXIT_FAILED;
        goto out;
    }
    print_report(f, &pt, &tt);
    if (fclose(f) != 0) {
        fprintf(stderr, PROG ": %s: write failed\n", p);
        code = DRTHS_EXIT_FAILED;
    }
    if (gnuplot) {
        if (plots(dir, out_dir, gnuplot, &tt) != 0)
            code = DRTHS_EXIT_FAILED;
        else
            printf("\nplots: %s/report_charz_fx.png (force against displacement), "
                   "report_charz_fv.png (force against velocity)\n",
                   out_dir);
    }
out:
    drths_csv_close(&pt);
    drths_csv_close(&tt);
    return code;
}
