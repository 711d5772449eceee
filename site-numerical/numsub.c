#include "site-numerical/numsub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/config/setup.h"

/* A file the loader accepts (common/config/config_sites.c) fits the structure. */
_Static_assert(DRTHS_NUMSUB_MAX_DAMPERS >= DRTHS_EXPERIMENT_MAX_DAMPERS,
               "the structure takes every damper a file may give it");

static int make_colnames(drths_numsub_t *ns)
{
    int n = ns->n, m = ns->n_dampers;
    ns->ncols = 3 + 3 * n + 4 * m;
    ns->colnames = calloc((size_t)ns->ncols, sizeof *ns->colnames);
    if (!ns->colnames)
        return -ENOMEM;
    int c = 0;
    const char *fixed_head[] = {"step", "time_s", "ag_m_s2"};
    const char *fixed_tail[] = {"damper_disp_m", "damper_vel_m_s", "damper_force_N",
                                "damper_command"};
    for (int i = 0; i < 3; i++)
        ns->colnames[c++] = strdup(fixed_head[i]);
    const char *fmt[] = {"x%d_m", "v%d_m_s", "a%d_abs_m_s2"};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, fmt[k], i + 1);
            ns->colnames[c++] = strdup(name);
        }
    for (int i = 0; i < 4 && m == 1; i++)
        ns->colnames[c++] = strdup(fixed_tail[i]);
    for (int k = 0; k < m && m > 1; k++)
        for (int i = 0; i < 4; i++) {
            char name[48];
            /* "damper_disp_m" -> "damper2_disp_m" */
            snprintf(name, sizeof name, "damper%d%s", k + 1, fixed_tail[i] + strlen("damper"));
            ns->colnames[c++] = strdup(name);
        }
    for (int i = 0; i < c; i++)
        if (!ns->colnames[i])
            return -ENOMEM;
    return 0;
}

int drths_numsub_init(drths_numsub_t *ns, const drths_experiment_t *exp, drths_error_t *err)
{
    memset(ns, 0, sizeof *ns);
    ns->n = exp->n_dof;
    ns->n_dampers = drths_experiment_n_dampers(exp);
    if (ns->n_dampers > DRTHS_NUMSUB_MAX_DAMPERS)
        return drths_error_set(err, -EINVAL,
                               "sites: %d channels in all; the structure takes at "
                               "most %d dampers",
                               ns->n_dampers, DRTHS_NUMSUB_MAX_DAMPERS);
    for (int k = 0; k < ns->n_dampers; k++)
        ns->floors[k] = drths_experiment_damper(exp, k)->specimen.floor;
    ns->floor = ns->floors[0];
    ns->dt_s = 1.0 / exp->rate_hz;
    int rc = drths_setup_structure(exp, &ns->st, err);
    if (rc)
        return rc;
    rc = drths_integrator_init(&ns->it, &ns->st, exp->structure.integrator, ns->dt_s, err);
    if (rc) {
        drths_structure_close(&ns->st);
        return drths_error_prefix(err, rc, "structure.integrator");
    }
    rc = drths_setup_ground_motion(exp, &ns->rec, err);
    if (rc) {
        drths_integrator_close(&ns->it);
        drths_structure_close(&ns->st);
        return rc;
    }
    ns->steps = (long)ns->rec.n;
    ns->x_next = calloc((size_t)ns->n, sizeof(double));
    ns->v_next = calloc((size_t)ns->n, sizeof(double));
    ns->f = calloc((size_t)ns->n, sizeof(double));
    if (!ns->x_next || !ns->v_next || !ns->f || make_colnames(ns)) {
        drths_numsub_close(ns);
        return drths_error_set(err, -ENOMEM, "out of memory for %d degrees of freedom", ns->n);
    }
    return 0;
}

double drths_numsub_ag(const drths_numsub_t *ns, long k)
{
    return (k >= 0 && (size_t)k < ns->rec.n) ? ns->rec.ag_m_s2[k] : 0.0;
}

/* The dampers' forces into f: each resists its own elongation, +R on its top floor and -R on
 * the floor below; several on one storey add up. */
static void set_forces(drths_numsub_t *ns, const double *force_N)
{
    memset(ns->f, 0, (size_t)ns->n * sizeof(double));
    for (int k = 0; k < ns->n_dampers; k++) {
        int top = ns->floors[k] - 1;
        ns->f[top] += force_N[k];
        if (top > 0)
            ns->f[top - 1] -= force_N[k];
    }
}

void drths_numsub_reset_all(drths_numsub_t *ns, const double *force_N)
{
    memset(ns->x_next, 0, (size_t)ns->n * sizeof(double));
    set_forces(ns, force_N);
    drths_integrator_reset(&ns->it, ns->x_next, ns->x_next, drths_numsub_ag(ns, 0), ns->f);
    ns->step = 0;
}

void drths_numsub_reset(drths_numsub_t *ns, double force_N)
{
    drths_numsub_reset_all(ns, &force_N);
}

static void relative(const drths_numsub_t *ns, int k, const double *x, const double *v, double *d,
                     double *vd)
{
    int top = ns->floors[k] - 1;
    *d = x[top] - (top > 0 ? x[top - 1] : 0.0);
    *vd = v[top] - (top > 0 ? v[top - 1] : 0.0);
}

void drths_numsub_predict_all(drths_numsub_t *ns, double *damper_disp_m, double *damper_vel_m_s)
{
    drths_integrator_predict(&ns->it, ns->x_next, ns->v_next);
    for (int k = 0; k < ns->n_dampers; k++)
        relative(ns, k, ns->x_next, ns->v_next, &damper_disp_m[k], &damper_vel_m_s[k]);
}

void drths_numsub_predict(drths_numsub_t *ns, double *damper_disp_m, double *damper_vel_m_s)
{
    drths_integrator_predict(&ns->it, ns->x_next, ns->v_next);
    relative(ns, 0, ns->x_next, ns->v_next, damper_disp_m, damper_vel_m_s);
}

void drths_numsub_correct_all(drths_numsub_t *ns, const double *force_N)
{
    set_forces(ns, force_N);
    drths_integrator_correct(&ns->it, drths_numsub_ag(ns, ns->step + 1), ns->f);
    ns->step++;
}

void drths_numsub_correct(drths_numsub_t *ns, double force_N)
{
    drths_numsub_correct_all(ns, &force_N);
}

void drths_numsub_damper_state_all(const drths_numsub_t *ns, double *disp_m, double *vel_m_s)
{
    for (int k = 0; k < ns->n_dampers; k++)
        relative(ns, k, ns->it.x, ns->it.v, &disp_m[k], &vel_m_s[k]);
}

void drths_numsub_damper_state(const drths_numsub_t *ns, double *disp_m, double *vel_m_s)
{
    relative(ns, 0, ns->it.x, ns->it.v, disp_m, vel_m_s);
}

void drths_numsub_row_all(const drths_numsub_t *ns, const double *force_N, const double *command,
                          double *row)
{
    int n = ns->n, c = 0;
    double ag = drths_numsub_ag(ns, ns->step);
    row[c++] = (double)ns->step;
    row[c++] = (double)ns->step * ns->dt_s;
    row[c++] = ag;
    for (int i = 0; i < n; i++)
        row[c++] = ns->it.x[i];
    for (int i = 0; i < n; i++)
        row[c++] = ns->it.v[i];
    for (int i = 0; i < n; i++)
        row[c++] = ns->it.a[i] + ag;
    for (int k = 0; k < ns->n_dampers; k++) {
        relative(ns, k, ns->it.x, ns->it.v, &row[c], &row[c + 1]);
        c += 2;
        row[c++] = force_N[k];
        row[c++] = command[k];
    }
}

void drths_numsub_row(const drths_numsub_t *ns, double force_N, double command, double *row)
{
    drths_numsub_row_all(ns, &force_N, &command, row);
}

void drths_numsub_close(drths_numsub_t *ns)
{
    if (ns->colnames) {
        for (int i = 0; i < ns->ncols; i++)
            free(ns->colnames[i]);
        free(ns->colnames);
        ns->colnames = NULL;
    }
    free(ns->x_next);
    free(ns->v_next);
    free(ns->f);
    ns->x_next = ns->v_next = ns->f = NULL;
    drths_record_close(&ns->rec);
    drths_integrator_close(&ns->it);
    drths_structure_close(&ns->st);
}
