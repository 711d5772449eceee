#include "site-numerical/reference.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/config/setup.h"
#include "common/models/damper.h"
#include "common/platform/csvwrite.h"
#include "common/platform/json.h"
#include "common/platform/rtclock.h"
#include "common/platform/runfolder.h"
#include "protocol/fingerprint.h"
#include "site-numerical/numsub.h"
#include "site-numerical/semiactive.h"

static int summary_alloc(drths_reference_summary_t *s, int n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    double **arrays[] = {&s->freq_hz,     &s->zeta,    &s->peak_x_m,
                         &s->rms_x_m,     &s->peak_a_m_s2, &s->rms_a_m_s2};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (!(*arrays[i] = calloc((size_t)n, sizeof(double))))
            return -ENOMEM;
    return 0;
}

void drths_reference_summary_close(drths_reference_summary_t *s)
{
    free(s->freq_hz);
    free(s->zeta);
    free(s->peak_x_m);
    free(s->rms_x_m);
    free(s->peak_a_m_s2);
    free(s->rms_a_m_s2);
    memset(s, 0, sizeof *s);
}

static int write_summary(const char *dir, const drths_experiment_t *exp,
                         const drths_reference_summary_t *s, drths_error_t *err)
{
    uint8_t fp[DRTHS_FINGERPRINT_BYTES];
    char fphex[65] = "";
    if (drths_experiment_fingerprint(exp, fp, NULL) == 0)
        drths_experiment_fingerprint_hex(fp, fphex);
    char path[4096];
    drths_json_t j;
    int r = drths_runfolder_json_open(&j, dir, "summary.json", path, sizeof path, err);
    if (r)
        return r;
    drths_json_string(&j, "kind", "reference");
    drths_json_string(&j, "experiment", exp->name);
    drths_json_string(&j, "fingerprint", fphex);
    drths_json_number(&j, "rate_hz", exp->rate_hz);
    drths_json_number(&j, "dt_s", s->dt_s);
    drths_json_int(&j, "steps", s->steps);
    drths_json_number(&j, "duration_s", s->duration_s);
    drths_json_number(&j, "wall_time_s", s->wall_s);
    drths_json_number(&j, "wall_per_simulated_s", s->wall_s / s->duration_s);
    drths_json_object_begin(&j, "structure");
    drths_json_string(&j, "integrator", drths_integrator_kind_name(exp->structure.integrator));
    drths_json_numbers(&j, "natural_frequencies_hz", s->freq_hz, s->n);
    drths_json_numbers(&j, "damping_ratios", s->zeta, s->n);
    drths_json_object_end(&j);
    drths_json_object_begin(&j, "control");
    drths_json_string(&j, "mode", drths_control_mode_name(exp->control.mode));
    drths_json_string(&j, "damper", drths_damper_model_name(exp->specimen.damper.model));
    drths_json_number(&j, "command", s->command);
    if (exp->control.mode == DRTHS_CONTROL_CLIPPED_OPTIMAL) {
        drths_json_number(&j, "peak_desired_force_N", s->peak_desired_force_N);
        drths_json_number(&j, "on_fraction", s->on_fraction);
        drths_json_number(&j, "q_disp", s->design.q_disp);
        drths_json_number(&j, "q_acc", s->design.q_acc);
        drths_json_number(&j, "r", s->design.r);
        drths_json_number(&j, "riccati_residual", s->riccati_residual);
        drths_json_number(&j, "closed_loop_spectral_radius", s->spectral_radius);
    }
    drths_json_object_end(&j);
    drths_json_array_begin(&j, "floors");
    for (int i = 0; i < s->n; i++) {
        drths_json_object_begin(&j, NULL);
        drths_json_int(&j, "floor", i + 1);
        drths_json_number(&j, "peak_disp_m", s->peak_x_m[i]);
        drths_json_number(&j, "rms_disp_m", s->rms_x_m[i]);
        drths_json_number(&j, "peak_abs_accel_m_s2", s->peak_a_m_s2[i]);
        drths_json_number(&j, "rms_abs_accel_m_s2", s->rms_a_m_s2[i]);
        drths_json_object_end(&j);
    }
    drths_json_array_end(&j);
    drths_json_object_begin(&j, "damper");
    drths_json_number(&j, "peak_force_N", s->peak_force_N);
    drths_json_number(&j, "peak_disp_m", s->peak_damper_disp_m);
    drths_json_number(&j, "peak_vel_m_s", s->peak_damper_vel_m_s);
    drths_json_object_end(&j);
    /* Several dampers (sites): each one's, named <site>.<channel>; "damper" above holds the
     * largest over them. */
    if (s->n_dampers > 1) {
        drths_json_array_begin(&j, "dampers");
        for (int k = 0; k < s->n_dampers; k++) {
            char name[2 * DRTHS_SITE_NAME_MAX + 2];
            drths_experiment_damper_name(exp, k, name, sizeof name);
            drths_json_object_begin(&j, NULL);
            drths_json_string(&j, "name", name);
            drths_json_int(&j, "floor", s->dampers[k].floor);
            drths_json_number(&j, "peak_force_N", s->dampers[k].peak_force_N);
            drths_json_number(&j, "peak_disp_m", s->dampers[k].peak_disp_m);
            drths_json_number(&j, "peak_vel_m_s", s->dampers[k].peak_vel_m_s);
            drths_json_object_end(&j);
        }
        drths_json_array_end(&j);
    }
    return drths_json_file_close(&j, path, err);
}

static void accumulate(drths_reference_summary_t *s, const drths_numsub_t *ns, const double *force,
                       const double *row)
{
    int n = ns->n;
    const double *x = row + 3, *a = row + 3 + 2 * n;
    for (int i = 0; i < n; i++) {
        s->peak_x_m[i] = fmax(s->peak_x_m[i], fabs(x[i]));
        s->rms_x_m[i] += x[i] * x[i];
        s->peak_a_m_s2[i] = fmax(s->peak_a_m_s2[i], fabs(a[i]));
        s->rms_a_m_s2[i] += a[i] * a[i];
    }
    for (int k = 0; k < ns->n_dampers; k++) {
        const double *d = row + 3 + 3 * n + 4 * k; /* disp, vel, force, command */
        s->dampers[k].peak_force_N = fmax(s->dampers[k].peak_force_N, fabs(force[k]));
        s->dampers[k].peak_disp_m = fmax(s->dampers[k].peak_disp_m, fabs(d[0]));
        s->dampers[k].peak_vel_m_s = fmax(s->dampers[k].peak_vel_m_s, fabs(d[1]));
        s->peak_force_N = fmax(s->peak_force_N, s->dampers[k].peak_force_N);
        s->peak_damper_disp_m = fmax(s->peak_damper_disp_m, s->dampers[k].peak_disp_m);
        s->peak_damper_vel_m_s = fmax(s->peak_damper_vel_m_s, s->dampers[k].peak_vel_m_s);
    }
}

int drths_reference_run(const drths_experiment_t *exp, const char *out_dir,
                        drths_reference_summary_t *sum, drths_progress_fn progress, void *ctx,
                        drths_error_t *err)
{
    drths_semiactive_design_t d;
    return drths_reference_run_design(exp, drths_semiactive_design_of(exp, &d), out_dir, sum,
                                      progress, ctx, err);
}

int drths_reference_run_design(const drths_experiment_t *exp,
                               const drths_semiactive_design_t *design, const char *out_dir,
                               drths_reference_summary_t *sum, drths_progress_fn progress,
                               void *ctx, drths_error_t *err)
{
    drths_numsub_t ns;
    int rc = drths_numsub_init(&ns, exp, err);
    if (rc)
        return rc;
    int m = ns.n_dampers;
    /* The controller is designed on the numerical site's own model, which the reference shares;
     * in the passive modes it returns drths_setup_passive_command's constant. */
    double cmax[DRTHS_NUMSUB_MAX_DAMPERS];
    for (int k = 0; k < m; k++)
        cmax[k] =
            drths_experiment_command_max(drths_experiment_damper(exp, k)->specimen.damper.model);
    drths_semiactive_t ctl;
    rc = drths_semiactive_init_multi(&ctl, &ns.st, m, ns.floors, ns.dt_s, cmax, exp->control.mode,
                                     exp->control.command, design, err);
    if (rc) {
        drths_numsub_close(&ns);
        return rc;
    }
    drths_damper_t damper[DRTHS_NUMSUB_MAX_DAMPERS];
    int n_open = 0;
    for (; n_open < m; n_open++) {
        drths_damper_params_t dp;
        drths_setup_damper_true(drths_experiment_damper(exp, n_open), &dp);
        rc = drths_damper_init(&damper[n_open], &dp, ns.dt_s, err);
        if (rc)
            break;
    }
    if (rc) {
        while (n_open > 0)
            drths_damper_close(&damper[--n_open]);
        drths_semiactive_close(&ctl);
        drths_numsub_close(&ns);
        return drths_error_prefix(err, rc, "specimen.damper");
    }
    double *row = calloc((size_t)ns.ncols, sizeof(double));
    if (!row || summary_alloc(sum, ns.n)) {
        free(row);
        drths_reference_summary_close(sum);
        for (int k = 0; k < m; k++)
            drths_damper_close(&damper[k]);
        drths_semiactive_close(&ctl);
        drths_numsub_close(&ns);
        return drths_error_set(err, -ENOMEM, "out of memory");
    }
    sum->n_dampers = m;
    for (int k = 0; k < m; k++)
        sum->dampers[k].floor = ns.floors[k];
    memcpy(sum->freq_hz, ns.st.freq_hz, (size_t)ns.n * sizeof(double));
    memcpy(sum->zeta, ns.st.zeta, (size_t)ns.n * sizeof(double));
    int clipped = exp->control.mode == DRTHS_CONTROL_CLIPPED_OPTIMAL;
    double command[DRTHS_NUMSUB_MAX_DAMPERS], force[DRTHS_NUMSUB_MAX_DAMPERS];
    double d[DRTHS_NUMSUB_MAX_DAMPERS], v[DRTHS_NUMSUB_MAX_DAMPERS];
    for (int k = 0; k < m; k++)
        command[k] = clipped ? 0.0 : ctl.command_const_k[k];
    sum->command = clipped ? ctl.command_max : command[0];
    sum->dt_s = ns.dt_s;
    if (clipped) {
        sum->design = ctl.design;
        sum->riccati_residual = ctl.riccati_residual;
        sum->spectral_radius = ctl.spectral_radius;
    }
    long on_ticks = 0;

    drths_csvw_t csv = {0};
    if (out_dir) {
        char path[4096];
        if (drths_path_join(path, sizeof path, out_dir, "numerical.csv"))
            rc = drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
        else
            rc = drths_csvw_open(&csv, path, (const char *const *)ns.colnames, ns.ncols, err);
    }

    int64_t t0 = drths_now_ns(), last_progress = t0;
    if (!rc) {
        for (int k = 0; k < m; k++) {
            drths_damper_reset(&damper[k], 0.0, command[k]);
            force[k] = drths_damper_force(&damper[k]);
        }
        drths_numsub_reset_all(&ns, force);
        for (;;) {
            drths_numsub_row_all(&ns, force, command, row);
            accumulate(sum, &ns, force, row);
            if (csv.f)
                drths_csvw_row(&csv, row);
            if (ns.step + 1 >= ns.steps)
                break;
            /* The commands for step k+1 from the state and the damper forces at step k. */
            drths_semiactive_command_all(&ctl, ns.it.x, ns.it.v, force, command);
            if (clipped) {
                /* The largest desired force over the dampers, and the ticks damper 0 is on
                 * (the one-damper figure). */
                for (int k = 0; k < m; k++)
                    sum->peak_desired_force_N =
                        fmax(sum->peak_desired_force_N, fabs(ctl.desired_k[k]));
                on_ticks += command[0] > 0.0;
            }
            drths_numsub_predict_all(&ns, d, v);
            for (int k = 0; k < m; k++)
                force[k] = drths_damper_step(&damper[k], d[k], v[k], command[k]);
            drths_numsub_correct_all(&ns, force);
            if (progress && (ns.step & 1023) == 0) {
                int64_t now = drths_now_ns();
                if (now - last_progress > 1000000000) {
                    progress(ns.step, ns.steps, ctx);
                    last_progress = now;
                }
            }
        }
    }
    sum->wall_s = (double)(drths_now_ns() - t0) * 1e-9;
    sum->steps = ns.step + 1;
    sum->duration_s = (double)ns.step * ns.dt_s;
    if (clipped && ns.step > 0)
        sum->on_fraction = (double)on_ticks / (double)ns.step;
    for (int i = 0; i < ns.n; i++) {
        sum->rms_x_m[i] = sqrt(sum->rms_x_m[i] / (double)sum->steps);
        sum->rms_a_m_s2[i] = sqrt(sum->rms_a_m_s2[i] / (double)sum->steps);
    }
    int crc = drths_csvw_close(&csv, rc ? NULL : err);
    if (!rc)
        rc = crc;
    if (!rc && out_dir)
        rc = write_summary(out_dir, exp, sum, err);
    free(row);
    for (int k = 0; k < m; k++)
        drths_damper_close(&damper[k]);
    drths_semiactive_close(&ctl);
    drths_numsub_close(&ns);
    return rc;
}
