/* drths-physical --characterize (site-physical/charz_mode.h). */
#include "site-physical/charz_mode.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/damperfile.h"
#include "common/config/setup.h"
#include "common/platform/cli.h"
#include "common/platform/csvwrite.h"
#include "common/platform/json.h"
#include "common/platform/rtclock.h"
#include "common/platform/runfolder.h"
#include "site-physical/actuator.h"
#include "site-physical/charz.h"

#define PROG "drths-physical"
#define FIT_RATE_HZ 1000.0  /* the fit's samples: the record decimated to about this rate */
#define SMOOTH_HALF_S 0.02 /* the tracking error's local quadratic: +/- 20 ms */

static volatile sig_atomic_t cz_interrupted;

static void cz_on_signal(int sig)
{
    (void)sig;
    cz_interrupted = 1;
}

static int cz_pace(void *ctx, long k)
{
    const int64_t *t0 = ctx;
    if (t0[1] > 0)
        (void)drths_sleep_until_ns(t0[0] + k * t0[1]);
    return cz_interrupted;
}

static void protocol_text(const drths_charz_params_t *p, char *out, size_t cap)
{
    size_t o = 0;
#define ADD(...)                                                                                   \
    do {                                                                                           \
        if (o < cap)                                                                               \
            o += (size_t)snprintf(out + o, cap - o, __VA_ARGS__);                                  \
    } while (0)
    ADD("{amplitudes_m: [");
    for (int i = 0; i < p->n_amp; i++)
        ADD("%s%g", i ? ", " : "", p->amp_m[i]);
    ADD("], frequencies_hz: [");
    for (int i = 0; i < p->n_freq; i++)
        ADD("%s%g", i ? ", " : "", p->freq_hz[i]);
    ADD("], commands: [");
    for (int i = 0; i < p->n_cmd; i++)
        ADD("%s%g", i ? ", " : "", p->cmd[i]);
    ADD("], cycles: %d, settle_s: %g, random_s: %g, random_band_hz: [%g, %g], random_rms_m: %g}",
        p->cycles, p->settle_s, p->random_s, p->random_band_hz[0], p->random_band_hz[1],
        p->random_rms_m);
#undef ADD
}

/* dir/name with the columns given, through the project's CSV writer (%.9g, "nan"). */
static int open_csv(drths_csvw_t *w, const char *dir, const char *name, const char *const *cols,
                    int ncols, drths_error_t *err)
{
    char path[4096];
    if (drths_path_join(path, sizeof path, dir, name) != 0)
        return drths_error_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
    return drths_csvw_open(w, path, cols, ncols, err);
}

static int write_physical_csv(const char *dir, const drths_charz_record_t *rec, double rate_hz,
                              drths_error_t *err)
{
    static const char *const cols[] = {"t_s",     "test",    "set_m",  "displacement_m",
                                       "force_N", "command", "drive_m"};
    drths_csvw_t w;
    int rc = open_csv(&w, dir, "physical.csv", cols, 7, err);
    if (rc)
        return rc;
    for (long i = 0; i < rec->n; i++) {
        const double v[7] = {(double)i / rate_hz, rec->test[i], rec->set_m[i],  rec->disp_m[i],
                             rec->force_N[i],     rec->cmd[i],  rec->drive_m[i]};
        drths_csvw_row(&w, v);
    }
    return drths_csvw_close(&w, err);
}

/* How the measured displacement followed the set-points over the tests (ticks with test >= 0). */
static void tracking_of(const drths_charz_record_t *rec, drths_tracking_t *t)
{
    drths_tracking_init(t);
    for (long i = 0; i < rec->n; i++)
        if (rec->test[i] >= 0 && !isnan(rec->disp_m[i]))
            drths_tracking_add(t, rec->set_m[i], rec->disp_m[i]);
}

static int write_fit_csv(const char *dir, const drths_damperfit_data_t *d, const double *model,
                         drths_error_t *err)
{
    static const char *const cols[] = {"t_s",     "test",    "displacement_m", "velocity_m_s",
                                       "command", "force_N", "model_force_N"};
    drths_csvw_t w;
    int rc = open_csv(&w, dir, "fit.csv", cols, 7, err);
    if (rc)
        return rc;
    for (long i = 0; i < d->n; i++) {
        const double v[7] = {(double)i * d->dt_s, d->test[i],    d->x_m[i], d->v_m_s[i],
                             d->command[i],       d->force_N[i], model[i]};
        drths_csvw_row(&w, v);
    }
    return drths_csvw_close(&w, err);
}

/* Why parameter i was not fitted: the record could not identify it, or the model never can. */
static const char *why_not(const drths_damperfit_result_t *res, int i)
{
    return res->held[i] ? drths_damperfit_held_text(res->held[i]) : drths_damperfit_fixed_reason(i);
}

/* fit_parameters.csv (param: the index of drths_damperfit_name; u nan when fixed or held, true
 * and error_pct nan without a known truth, held the drths_damperfit_held_t code) and tests.csv,
 * for drths-report. */
static int write_fit_tables(const char *dir, const drths_charz_record_t *rec,
                            const drths_damperfit_result_t *res, const drths_damper_params_t *truth,
                            drths_error_t *err)
{
    char path[4096];
    if (drths_path_join(path, sizeof path, dir, "fit_parameters.csv") != 0)
        return drths_error_set(err, -ENAMETOOLONG, "%s/fit_parameters.csv: path too long", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return drths_error_set(err, -errno, "%s: %s", path, strerror(errno));
    fprintf(f, "param,value,u,true,error_pct,held,weak\n");
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
        double tv = truth ? drths_damperfit_get(truth, i) : NAN;
        double pct = truth && tv != 0.0 ? 100.0 * (res->value[i] - tv) / tv : NAN;
        fprintf(f, "%d,%.10g,%.4g,%.10g,%.4g,%d,%d\n", i, res->value[i],
                res->fitted[i] ? res->u[i] : NAN, tv, pct, res->held[i], res->weak[i]);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return drths_error_set(err, -EIO, "%s: write failed", path);
    if (drths_path_join(path, sizeof path, dir, "tests.csv") != 0)
        return drths_error_set(err, -ENAMETOOLONG, "%s/tests.csv: path too long", dir);
    if (!(f = fopen(path, "w")))
        return drths_error_set(err, -errno, "%s: %s", path, strerror(errno));
    fprintf(f, "test,frequency_hz,amplitude_m,command,skipped,peak_force_N,force_rms_N,"
               "force_error_rms_N\n");
    for (int t = 0; t < rec->n_tests; t++)
        fprintf(f, "%d,%g,%g,%g,%d,%.6g,%.6g,%.6g\n", t, rec->tests[t].freq_hz, rec->tests[t].amp_m,
                rec->tests[t].cmd, rec->tests[t].skipped, rec->tests[t].peak_N,
                rec->tests[t].skipped ? NAN : res->test_force_rms_N[t],
                rec->tests[t].skipped ? NAN : res->test_rms_N[t]);
    bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return drths_error_set(err, -EIO, "%s: write failed", path);
    return 0;
}

static int write_model(const char *dir, const drths_damperfile_meta_t *meta,
                       const drths_damperfit_result_t *res, drths_error_t *err)
{
    char path[4096];
    if (drths_path_join(path, sizeof path, dir, "model.yaml") != 0)
        return drths_error_set(err, -ENAMETOOLONG, "%s/model.yaml: path too long", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return drths_error_set(err, -errno, "%s: %s", path, strerror(errno));
    int rc = drths_damperfile_write(f, meta, res);
    if (fclose(f) != 0 || rc)
        return drths_error_set(err, -EIO, "%s: write failed", path);
    return 0;
}

static int write_summary(const char *dir, const drths_provenance_t *prov,
                         const drths_charz_params_t *p, const drths_charz_record_t *rec,
                         double planned_s, const char *compensation, const drths_tracking_t *track,
                         const drths_damperfit_result_t *res, int fitted,
                         const drths_damper_params_t *truth, const char *fit_error,
                         drths_error_t *err)
{
    drths_json_t j;
    char path[4096];
    int rc = drths_runfolder_json_open(&j, dir, "summary.json", path, sizeof path, err);
    if (rc)
        return rc;
    drths_json_string(&j, "role", "characterize");
    drths_provenance_json(&j, "provenance", prov);
    drths_json_object_begin(&j, "protocol");
    drths_json_numbers(&j, "amplitudes_m", p->amp_m, p->n_amp);
    drths_json_numbers(&j, "frequencies_hz", p->freq_hz, p->n_freq);
    drths_json_numbers(&j, "commands", p->cmd, p->n_cmd);
    drths_json_int(&j, "cycles", p->cycles);
    drths_json_number(&j, "settle_s", p->settle_s);
    drths_json_number(&j, "random_s", p->random_s);
    drths_json_numbers(&j, "random_band_hz", p->random_band_hz, 2);
    drths_json_number(&j, "random_rms_m", p->random_rms_m);
    drths_json_number(&j, "planned_s", planned_s);
    drths_json_number(&j, "run_s", (double)rec->n / p->rate_hz);
    drths_json_number(&j, "guard_force_N", p->guard_force_N);
    drths_json_object_end(&j);
    drths_json_object_begin(&j, "tracking");
    drths_json_string(&j, "compensation", compensation);
    drths_json_number(&j, "rms_error_pct", drths_tracking_rms_pct(track));
    drths_json_number(&j, "peak_error_m", drths_tracking_max_err(track));
    drths_json_object_end(&j);
    drths_json_bool(&j, "complete", rec->stopped[0] == '\0');
    drths_json_string(&j, "stopped", rec->stopped);
    drths_json_array_begin(&j, "tests");
    for (int t = 0; t < rec->n_tests; t++) {
        drths_json_object_begin(&j, NULL);
        drths_json_int(&j, "test", t);
        drths_json_string(&j, "kind", rec->tests[t].freq_hz > 0 ? "sine" : "random");
        drths_json_number(&j, "amplitude_m", rec->tests[t].amp_m);
        drths_json_number(&j, "frequency_hz", rec->tests[t].freq_hz);
        drths_json_number(&j, "command", rec->tests[t].cmd);
        drths_json_bool(&j, "skipped", rec->tests[t].skipped);
        drths_json_bool(&j, "wound_down", rec->tests[t].wound_down);
        drths_json_number(&j, "peak_force_N", rec->tests[t].peak_N);
        if (rec->tests[t].predicted_N > 0.0)
            drths_json_number(&j, "predicted_peak_N", rec->tests[t].predicted_N);
        if (fitted && !rec->tests[t].skipped) {
            drths_json_number(&j, "force_rms_N", res->test_force_rms_N[t]);
            drths_json_number(&j, "force_error_rms_N", res->test_rms_N[t]);
        }
        drths_json_object_end(&j);
    }
    drths_json_array_end(&j);
    drths_json_object_begin(&j, "fit");
    drths_json_bool(&j, "done", fitted);
    if (fit_error)
        drths_json_string(&j, "error", fit_error);
    if (fitted) {
        drths_json_string(&j, "model_file", "model.yaml");
        drths_json_string(&j, "units", "mm, kN, s, A");
        drths_json_int(&j, "iterations", res->iterations);
        drths_json_bool(&j, "converged", res->converged);
        drths_json_number(&j, "force_error_rms_N", res->rms_N);
        drths_json_number(&j, "force_rms_N", res->force_rms_N);
        drths_json_array_begin(&j, "parameters");
        for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
            drths_json_object_begin(&j, NULL);
            drths_json_string(&j, "name", drths_damperfit_name(i));
            drths_json_number(&j, "value", res->value[i]);
            if (res->fitted[i])
                drths_json_number(&j, "u", res->u[i]);
            if (res->weak[i])
                drths_json_string(&j, "not_within_2pct", drths_damperfit_weak_text(res->weak[i]));
            if (!res->fitted[i])
                drths_json_string(&j, res->held[i] ? "held" : "fixed", why_not(res, i));
            if (truth) {
                const double tv = drths_damperfit_get(truth, i);
                drths_json_number(&j, "true", tv);
                if (tv != 0.0)
                    drths_json_number(&j, "error_pct", 100.0 * (res->value[i] - tv) / tv);
            }
            drths_json_object_end(&j);
        }
        drths_json_array_end(&j);
    }
    drths_json_object_end(&j);
    return drths_json_file_close(&j, path, err);
}

static void print_fit(const drths_damperfit_result_t *res, const drths_damper_params_t *truth)
{
    printf("drths-physical: the tests ran at %d current%s:", res->n_commands,
           res->n_commands == 1 ? "" : "s");
    for (int k = 0; k < res->n_commands && k < 8; k++)
        printf(" %g", res->commands[k]);
    printf("\n");
    printf("drths-physical: fit: %d iterations%s, force error %.4g N RMS of %.4g N (%.2f %%)\n",
           res->iterations, res->converged ? "" : " (not converged)", res->rms_N, res->force_rms_N,
           100.0 * res->rms_N / res->force_rms_N);
    printf("  %-8s %14s %12s %14s %9s\n", "param", "value", "u", truth ? "true" : "",
           truth ? "error %" : "");
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
        printf("  %-8s %14.7g ", drths_damperfit_name(i), res->value[i]);
        if (res->fitted[i])
            printf("%12.3g", res->u[i]);
        else
            printf("%12s", res->held[i] ? "held" : "fixed");
        if (truth) {
            double tv = drths_damperfit_get(truth, i);
            printf(" %14.7g", tv);
            if (tv != 0.0)
                printf(" %+9.3f", 100.0 * (res->value[i] - tv) / tv);
        }
        printf("\n");
    }
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++)
        if (!res->fitted[i])
            printf("  %s not identified: %s\n", drths_damperfit_name(i), why_not(res, i));
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++)
        if (res->weak[i])
            printf("  %s not determined to 2 %% by this record (u %.2g %%): %s\n",
                   drths_damperfit_name(i), 100.0 * res->u[i] / fabs(res->value[i]),
                   drths_damperfit_weak_text(res->weak[i]));
}

int drths_charz_mode_run(const drths_experiment_t *exp, const drths_site_options_t *so,
                         int short_protocol)
{
    if (drths_experiment_n_actuators(exp) != 1)
        return drths_cli_usage_error(PROG,
                                     "--characterize: one actuator channel at a time (the "
                                     "experiment has %d)",
                                     drths_experiment_n_actuators(exp));
    if (exp->specimen.damper.model != DRTHS_DAMPER_PHILLIPS2013)
        return drths_cli_usage_error(PROG,
                                     "--characterize: specimen.damper.model %s: only the "
                                     "current-driven phillips2013-200kN model is identified",
                                     drths_damper_model_name(exp->specimen.damper.model));
    const char *file = so->experiment;
    drths_error_t err = {{0}};
    drths_charz_params_t p;
    drths_charz_params_default(exp, short_protocol, &p);
    double planned_s = 0.0;
    if (drths_charz_plan(exp, &p, &planned_s, &err) != 0)
        return drths_cli_usage_error(PROG, "%s: %s", file, err.msg);

    drths_specimen_params_t sp;
    drths_specimen_t spec;
    drths_daq_t daq = {0};
    drths_setup_specimen(exp, &sp);
    if (drths_specimen_init(&spec, &sp, 1.0 / exp->rate_hz, &err) != 0)
        return drths_cli_error(PROG, "%s: virtual specimen: %s", file, err.msg);
    if (drths_daq_open(exp, &spec, NULL, &daq, &err) != 0) {
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s: daq (backend %s): %s", file,
                               drths_daq_backend_name(exp->daq.backend), err.msg);
    }
    drths_envelope_limits_t lim;
    drths_daq_envelope_limits(exp, &lim);
    if (drths_daq_set_envelope(&daq, &lim, exp->rate_hz, &err) != 0) {
        drths_daq_close(&daq);
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s: %s", file, err.msg);
    }
    /* The test's own compensation, from rest at command 0 (the protocol's first). */
    drths_actuator_params_t ap;
    drths_actuator_params_from_experiment(exp, &ap);
    ap.rest_damper_command = 0.0;
    drths_comp_t comp;
    if (drths_actuator_comp_init(&comp, &ap, &err) != 0) {
        drths_daq_close(&daq);
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s: %s", file, err.msg);
    }
    p.comp = &comp;

    char dir[4096];
    drths_provenance_t prov;
    if (drths_site_run_folder(dir, sizeof dir, so, exp, "characterize", &prov, &err) != 0) {
        drths_daq_close(&daq);
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s", err.msg);
    }

    const int paced = exp->daq.backend != DRTHS_DAQ_BACKEND_VIRTUAL;
    int64_t clock[2] = {drths_now_ns(), paced ? (int64_t)llround(1e9 / exp->rate_hz) : 0};
    p.pace = cz_pace;
    p.pace_ctx = clock;
    signal(SIGINT, cz_on_signal);
    signal(SIGTERM, cz_on_signal);
    const int n_tests = p.n_cmd * p.n_amp * p.n_freq + (p.random_s > 0.0);
    printf("drths-physical: characterization of '%s' (backend %s%s), %s protocol: %d tests, "
           "total actuator time %.1f s (%d min %02d s)\n",
           exp->name, drths_daq_backend_name(exp->daq.backend),
           paced ? "" : ", in tick time, not paced", short_protocol ? "short" : "standard", n_tests,
           planned_s, (int)(planned_s / 60.0), (int)fmod(planned_s, 60.0));
    printf("drths-physical: run folder %s\n", dir);
    printf("drths-physical: compensation %s (actuator.compensation), the drive envelope of a "
           "test\n",
           drths_compensation_name(exp->actuator.compensation));
    fflush(stdout);

    drths_charz_record_t rec;
    int rc = drths_charz_run(&daq, &p, &rec, &err);
    (void)drths_daq_safe_state(&daq, drths_daq_last_drive(&daq),
                               (int64_t)llround((double)(rec.n + 1) * 1e9 / exp->rate_hz));
    drths_daq_close(&daq);
    drths_comp_close(&comp);
    if (rc != 0) {
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s", err.msg);
    }
    drths_tracking_t track;
    tracking_of(&rec, &track);
    printf("drths-physical: tracking of the set-points over the tests: RMS error %.3f %%, peak "
           "error %.3g mm\n",
           drths_tracking_rms_pct(&track), drths_tracking_max_err(&track) * 1e3);
    int code = 0, n_skipped = 0;
    for (int t = 0; t < rec.n_tests; t++)
        if (rec.tests[t].skipped) {
            if (n_skipped++ == 0)
                printf("drths-physical: the force guard (%.4g N, 0.8 physical.limit_force_N) left "
                       "out:",
                       p.guard_force_N);
            printf(" %d (%.3g mm, %.3g Hz, command %.3g: predicted %.4g N)", t,
                   rec.tests[t].amp_m * 1e3, rec.tests[t].freq_hz, rec.tests[t].cmd,
                   rec.tests[t].predicted_N);
        }
    if (n_skipped)
        printf("\n");
    for (int t = 0; t < rec.n_tests; t++)
        if (rec.tests[t].wound_down)
            printf("drths-physical: the force guard wound test %d down (%.3g mm, %.3g Hz, command "
                   "%.3g: %.4g N)\n",
                   t, rec.tests[t].amp_m * 1e3, rec.tests[t].freq_hz, rec.tests[t].cmd,
                   rec.tests[t].peak_N);
    if (rec.stopped[0]) {
        drths_cli_error(PROG, "characterization stopped: %s (the record up to there is in %s)",
                        rec.stopped, dir);
        code = DRTHS_EXIT_FAILED;
    }
    if (write_physical_csv(dir, &rec, exp->rate_hz, &err) != 0) {
        drths_cli_error(PROG, "%s", err.msg);
        code = DRTHS_EXIT_FAILED;
    }

    /* The fit, over a complete protocol only (a partial one may miss the currents that make
     * every parameter identifiable). */
    drths_damperfit_result_t *res = calloc(1, sizeof *res);
    drths_damper_params_t nominal, truth_g, *truth = NULL;
    drths_setup_damper_nominal(exp, &nominal);
    if (exp->daq.backend == DRTHS_DAQ_BACKEND_VIRTUAL) {
        drths_damper_params_t t;
        drths_setup_damper_true(exp, &t);
        drths_damperfit_gauge(&t, nominal.A, &truth_g);
        truth = &truth_g;
    }
    int fitted = 0;
    char fit_error[sizeof err.msg + sizeof rec.stopped] = "";
    if (!res) {
        snprintf(fit_error, sizeof fit_error, "no memory");
    } else if (!rec.stopped[0]) {
        drths_damperfit_data_t d;
        double *x, *v, *cmd, *force, *model = NULL;
        int *test;
        int dec = (int)fmax(1.0, round(exp->rate_hz / FIT_RATE_HZ));
        int hw = (int)fmax(1.0, round(SMOOTH_HALF_S * exp->rate_hz));
        if (drths_charz_fit_data(&rec, dec, hw, exp->rate_hz, &d, &x, &v, &cmd, &force, &test) !=
            0) {
            snprintf(fit_error, sizeof fit_error, "no memory for the fit's data");
        } else {
            d.command_max = p.cmd[p.n_cmd - 1];
            printf("drths-physical: fitting the %s model to %ld samples at %g Hz\n",
                   drths_damper_model_name(nominal.model), d.n, 1.0 / d.dt_s);
            fflush(stdout);
            if (drths_damperfit_run(&d, &nominal, 0, res, &err) != 0) {
                snprintf(fit_error, sizeof fit_error, "%s", err.msg);
            } else {
                fitted = 1;
                model = malloc((size_t)d.n * sizeof *model);
                if (model && drths_damperfit_simulate(&d, &res->params, model, &err) == 0 &&
                    write_fit_csv(dir, &d, model, &err) != 0) {
                    drths_cli_error(PROG, "%s", err.msg);
                    code = DRTHS_EXIT_FAILED;
                }
                char proto[1024];
                protocol_text(&p, proto, sizeof proto);
                drths_damperfile_meta_t meta = {prov.started_utc, exp->name, prov.fingerprint,
                                                proto};
                if (write_fit_tables(dir, &rec, res, truth, &err) != 0 ||
                    write_model(dir, &meta, res, &err) != 0) {
                    drths_cli_error(PROG, "%s", err.msg);
                    code = DRTHS_EXIT_FAILED;
                }
                print_fit(res, truth);
            }
            free(x), free(v), free(cmd), free(force), free(test), free(model);
        }
    } else {
        snprintf(fit_error, sizeof fit_error, "protocol incomplete: %s", rec.stopped);
    }
    if (fit_error[0] && !rec.stopped[0]) {
        drths_cli_error(PROG, "fit: %s", fit_error);
        code = DRTHS_EXIT_FAILED;
    }
    if (write_summary(dir, &prov, &p, &rec, planned_s,
                      drths_compensation_name(exp->actuator.compensation), &track, res, fitted,
                      truth, fit_error[0] ? fit_error : NULL, &err) != 0) {
        drths_cli_error(PROG, "%s", err.msg);
        code = DRTHS_EXIT_FAILED;
    }
    if (fitted)
        printf("drths-physical: model file %s/model.yaml (numerical.smith_model)\n", dir);
    free(res);
    drths_charz_record_free(&rec);
    drths_specimen_close(&spec);
    return code;
}
