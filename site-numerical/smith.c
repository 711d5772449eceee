#include "site-numerical/smith.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NP DRTHS_SMITH_NPAR

void drths_smith_adapt_default(drths_smith_adapt_params_t *ap)
{
    memset(ap, 0, sizeof *ap);
    /* The bank brackets the nominal shape by a factor of about 2.5 each way without containing
     * the factor 2 of the acceptance case, so that case is a true interpolation. */
    ap->bank_gamma_beta[0] = 0.4;
    ap->bank_gamma_beta[1] = 1.0;
    ap->bank_gamma_beta[2] = 2.5;
    ap->forgetting = 0.9998;
    ap->p0 = 10.0;
    ap->trace_max = 1000.0;
    ap->min_regressor_rel = 0.02;
    ap->dead_zone_rel = 2e-4;
    ap->weight_min = -1.5;
    ap->weight_max = 3.0;
    ap->gain_min = 0.3;
    ap->gain_max = 3.0;
    ap->visc_max = 2.0;
}

/* A command-dependent coefficient of the damper model at command cmd (damper.h). */
static double coef(const drths_damper_params_t *p, double a, double b, double c, double cmd)
{
    if (p->model == DRTHS_DAMPER_PHILLIPS2013)
        return b + (a - b) * exp(-c * cmd);
    return a + b * cmd;
}

/* The largest hysteretic force alpha z_max, z_max = (A / (gamma + beta))^(1/n), over the two
 * ends of the command range, in N. */
static double force_scale(const drths_damper_params_t *p)
{
    double best = 0.0;
    for (int e = 0; e < 2; e++) {
        double cmd = e ? p->command_max : 0.0;
        double al = coef(p, p->alpha_a, p->alpha_b, p->alpha_c, cmd);
        double gb = coef(p, p->gamma_a, p->gamma_b, p->gamma_c, cmd) +
                    coef(p, p->beta_a, p->beta_b, p->beta_c, cmd);
        if (gb > 0.0 && p->A > 0.0)
            best = fmax(best, fabs(al) * pow(p->A / gb, 1.0 / p->n) * p->force_unit_N);
    }
    return best > 1.0 ? best : 1.0;
}

static void reset_adapt(drths_smith_t *s)
{
    memset(s->theta, 0, sizeof s->theta);
    s->theta[1] = 1.0;
    memset(s->P, 0, sizeof s->P);
    for (int i = 0; i < NP; i++)
        s->P[i][i] = s->ap.p0;
    memset(&s->st, 0, sizeof s->st);
}

int drths_smith_init(drths_smith_t *s, drths_smith_mode_t mode,
                     const drths_damper_params_t *nominal, double dt_s, size_t history,
                     drths_error_t *err)
{
    return drths_smith_init_ex(s, mode, nominal, dt_s, history, NULL, err);
}

int drths_smith_init_ex(drths_smith_t *s, drths_smith_mode_t mode,
                        const drths_damper_params_t *nominal, double dt_s, size_t history,
                        const drths_smith_adapt_params_t *ap, drths_error_t *err)
{
    memset(s, 0, sizeof *s);
    if (mode != DRTHS_SMITH_OFF && mode != DRTHS_SMITH_FIXED && mode != DRTHS_SMITH_ADAPTIVE)
        return drths_error_set(err, -EINVAL, "numerical.smith: unknown mode %d", (int)mode);
    if (history < 2)
        return drths_error_set(err, -EINVAL,
                               "Smith predictor history: must be >= 2 steps (got %zu)", history);
    int adaptive = mode == DRTHS_SMITH_ADAPTIVE;
    if (adaptive && nominal->model != DRTHS_DAMPER_PHILLIPS2013 &&
        nominal->model != DRTHS_DAMPER_SPENCER1997)
        return drths_error_set(err, -ENOTSUP,
                               "numerical.smith: adaptive identifies a Bouc-Wen damper "
                               "(phillips2013-200kN or spencer1997-small), not this model "
                               "(use fixed)");
    if (adaptive) {
        if (ap)
            s->ap = *ap;
        else
            drths_smith_adapt_default(&s->ap);
        const drths_smith_adapt_params_t *a = &s->ap;
        if (!(a->forgetting > 0.0 && a->forgetting <= 1.0) || !(a->p0 > 0.0) ||
            !(a->trace_max >= NP * a->p0) || !(a->weight_min < a->weight_max) ||
            !(a->gain_min < a->gain_max) || !(a->visc_max >= 0.0) ||
            !(a->min_regressor_rel >= 0.0) || !(a->dead_zone_rel >= 0.0) ||
            a->bank_gamma_beta[1] != 1.0 || !(a->bank_gamma_beta[0] > 0.0) ||
            !(a->bank_gamma_beta[2] > 0.0))
            return drths_error_set(err, -EINVAL,
                                   "Smith predictor adaptive tuning: forgetting in (0, 1], p0 > 0, "
                                   "trace_max >= %d p0, ordered bounds, bank factors > 0 with "
                                   "the middle one 1",
                                   NP);
    }
    int rc = drths_damper_init(&s->model, nominal, dt_s, err);
    if (rc)
        return drths_error_prefix(err, rc, "Smith predictor model");
    if (adaptive) {
        for (int j = 0; j < DRTHS_SMITH_BANK; j++) {
            if (j == 1)
                continue;
            drths_damper_params_t bp = *nominal;
            drths_damper_params_scale(&bp, 1.0, 1.0, 1.0, s->ap.bank_gamma_beta[j], 1.0);
            rc = drths_damper_init(&s->bank[j], &bp, dt_s, err);
            if (rc)
                return drths_error_prefix(err, rc, "Smith predictor bank model %d", j + 1);
        }
        s->phi = calloc(history * NP, sizeof(double));
        if (!s->phi)
            return drths_error_set(err, -ENOMEM, "out of memory for %zu steps of Smith history",
                                   history);
        s->f_scale_N = force_scale(nominal);
        s->c_ref = coef(nominal, nominal->c0_a, nominal->c0_b, nominal->c0_c,
                        nominal->command_max) *
                   nominal->force_unit_N / nominal->length_unit_m;
    }
    s->hist = calloc(history, sizeof(double));
    if (!s->hist) {
        free(s->phi);
        s->phi = NULL;
        return drths_error_set(err, -ENOMEM, "out of memory for %zu steps of Smith history",
                               history);
    }
    s->cap = history;
    s->mode = mode;
    s->corr_step = -1;
    if (adaptive)
        reset_adapt(s);
    return 0;
}

static double dot(const double *a, const double *b)
{
    double r = 0.0;
    for (int i = 0; i < NP; i++)
        r += a[i] * b[i];
    return r;
}

int drths_smith_reset(drths_smith_t *s, double command, uint32_t L)
{
    if ((size_t)L + 1 > s->cap)
        return -ERANGE;
    drths_damper_reset(&s->model, 0.0, command);
    s->rest_force_N = drths_damper_force(&s->model);
    s->step = 0;
    s->hist[0] = s->rest_force_N;
    s->L = L;
    s->last_corr_N = 0.0;
    s->corr_step = -1;
    if (s->phi) {
        for (int j = 0; j < DRTHS_SMITH_BANK; j++) {
            if (j != 1)
                drths_damper_reset(&s->bank[j], 0.0, command);
            s->phi_rest[j] = drths_damper_force(j == 1 ? &s->model : &s->bank[j]);
        }
        s->phi_rest[3] = 0.0;
        memcpy(s->phi, s->phi_rest, sizeof s->phi_rest);
        reset_adapt(s);
    }
    return 0;
}

int drths_smith_set_delay(drths_smith_t *s, uint32_t L)
{
    if ((size_t)L + 1 > s->cap)
        return -ERANGE;
    s->L = L;
    return 0;
}

double drths_smith_step(drths_smith_t *s, double disp_m, double vel_m_s, double command)
{
    double f = drths_damper_step(&s->model, disp_m, vel_m_s, command);
    s->step++;
    size_t slot = (size_t)s->step % s->cap;
    s->hist[slot] = f;
    if (!s->phi)
        return f;
    double *ph = &s->phi[slot * NP];
    ph[0] = drths_damper_step(&s->bank[0], disp_m, vel_m_s, command);
    ph[1] = f;
    ph[2] = drths_damper_step(&s->bank[2], disp_m, vel_m_s, command);
    ph[3] = s->c_ref * vel_m_s;
    return dot(s->theta, ph);
}

/* phi(k): the rest regressors for k <= 0, NULL when not in the ring. */
static const double *phi_at(const drths_smith_t *s, int64_t k)
{
    if (k <= 0)
        return s->phi_rest;
    if (k > s->step || s->step - k >= (int64_t)s->cap)
        return NULL;
    return &s->phi[((size_t)k % s->cap) * NP];
}

double drths_smith_model(const drths_smith_t *s, int64_t k)
{
    if (s->phi) {
        const double *ph = phi_at(s, k);
        return ph ? dot(s->theta, ph) : NAN;
    }
    if (k <= 0)
        return s->rest_force_N;
    if (k > s->step || s->step - k >= (int64_t)s->cap)
        return NAN;
    return s->hist[(size_t)k % s->cap];
}

double drths_smith_gain(const drths_smith_t *s)
{
    return s->phi ? s->theta[0] + s->theta[1] + s->theta[2] : 1.0;
}

/* Clips theta to the bounds; returns nonzero when something was clipped. A gain outside its
 * bounds is brought back by moving the three bank weights equally (which keeps the shape mix),
 * then each weight is clipped; twice, so both hold unless they contradict each other. */
static int project(drths_smith_t *s)
{
    const drths_smith_adapt_params_t *a = &s->ap;
    int clipped = 0;
    for (int pass = 0; pass < 2; pass++) {
        double g = s->theta[0] + s->theta[1] + s->theta[2];
        double gc = fmin(fmax(g, a->gain_min), a->gain_max);
        if (gc != g) {
            for (int i = 0; i < DRTHS_SMITH_BANK; i++)
                s->theta[i] += (gc - g) / DRTHS_SMITH_BANK;
            clipped = 1;
        }
        for (int i = 0; i < DRTHS_SMITH_BANK; i++) {
            double v = fmin(fmax(s->theta[i], a->weight_min), a->weight_max);
            clipped |= v != s->theta[i];
            s->theta[i] = v;
        }
    }
    double v4 = fmin(fmax(s->theta[3], -a->visc_max), a->visc_max);
    clipped |= v4 != s->theta[3];
    s->theta[3] = v4;
    return clipped;
}

/* One guarded RLS step on the pair (F, phi). */
static void identify(drths_smith_t *s, double measured_N, const double *phi)
{
    const drths_smith_adapt_params_t *a = &s->ap;
    double m = sqrt(dot(phi, phi));
    if (!(m >= a->min_regressor_rel * s->f_scale_N) || m <= 0.0) {
        s->st.low_signal++;
        return;
    }
    double e_N = measured_N - dot(s->theta, phi);
    if (!(fabs(e_N) >= a->dead_zone_rel * s->f_scale_N)) {
        s->st.dead_zone++;
        return;
    }
    double u[NP], Pu[NP], k[NP];
    for (int i = 0; i < NP; i++)
        u[i] = phi[i] / m;
    double e = e_N / m;
    for (int i = 0; i < NP; i++)
        Pu[i] = dot(s->P[i], u);
    double den = a->forgetting + dot(u, Pu);
    for (int i = 0; i < NP; i++) {
        k[i] = Pu[i] / den;
        s->theta[i] += k[i] * e;
    }
    double tr = 0.0;
    int ok = 1;
    for (int i = 0; i < NP; i++) {
        for (int j = i; j < NP; j++) {
            double v = (s->P[i][j] - k[i] * Pu[j]) / a->forgetting;
            s->P[i][j] = s->P[j][i] = v; /* kept exactly symmetric */
        }
        tr += s->P[i][i];
        ok &= s->P[i][i] > 0.0 && isfinite(s->P[i][i]);
    }
    if (!ok) {
        memset(s->P, 0, sizeof s->P);
        for (int i = 0; i < NP; i++)
            s->P[i][i] = a->p0;
        s->st.resets++;
    } else if (tr > a->trace_max) {
        double f = a->trace_max / tr;
        for (int i = 0; i < NP; i++)
            for (int j = 0; j < NP; j++)
                s->P[i][j] *= f;
        s->st.trace_limited++;
    }
    if (project(s))
        s->st.projections++;
    s->st.updates++;
}

double drths_smith_force_at(drths_smith_t *s, int64_t n, int64_t k, double measured_N)
{
    if (s->phi) {
        const double *ph = phi_at(s, k);
        if (ph && isfinite(measured_N))
            identify(s, measured_N, ph);
    }
    double delayed = drths_smith_model(s, k);
    s->last_corr_N = measured_N - delayed;
    s->corr_step = n;
    if (s->mode == DRTHS_SMITH_OFF)
        return measured_N;
    return drths_smith_model(s, n) + s->last_corr_N;
}

double drths_smith_force(drths_smith_t *s, int64_t n, double measured_N)
{
    return drths_smith_force_at(s, n, n - (int64_t)s->L, measured_N);
}

double drths_smith_conceal(const drths_smith_t *s, int64_t n)
{
    int64_t k = s->mode == DRTHS_SMITH_OFF ? n - (int64_t)s->L : n;
    return drths_smith_model(s, k) + s->last_corr_N;
}

void drths_smith_close(drths_smith_t *s)
{
    free(s->hist);
    free(s->phi);
    s->hist = NULL;
    s->phi = NULL;
    s->cap = 0;
    drths_damper_close(&s->model);
    for (int j = 0; j < DRTHS_SMITH_BANK; j++)
        drths_damper_close(&s->bank[j]);
}
