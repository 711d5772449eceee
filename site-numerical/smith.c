#include "site-numerical/smith.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NP DRTHS_SMITH_NPAR
#define NPHI (DRTHS_SMITH_NPAR + 1) /* off(k) and psi(k) */
/* |lambda| h of the estimate's substeps at v_max, as the damper's automatic rule (damper.h). */
#define LAMBDA_H 0.2

void drths_smith_adapt_default(drths_smith_adapt_params_t *ap)
{
    memset(ap, 0, sizeof *ap);
    /* Wide enough for the mismatches a rehearsal can set (alpha, c0, c1 x3 each; gamma and
     * beta x2 each way; A x2 each way, which alpha and gamma-beta absorb as alpha x2 and
     * gamma-beta x2^(n-1), up to x16 at the largest n; n x2 and x0.5 from the presets' n = 2),
     * narrow enough that a model at a corner is still a damper. */
    for (int i = 0; i < NP; i++) {
        ap->scale_min[i] = 0.1;
        ap->scale_max[i] = 10.0;
    }
    ap->scale_min[DRTHS_SMITH_P_GB] = 0.05;
    ap->scale_max[DRTHS_SMITH_P_GB] = 20.0;
    ap->scale_min[DRTHS_SMITH_P_N] = 0.5;
    ap->scale_max[DRTHS_SMITH_P_N] = 2.5;
    ap->delta = 0.01;
    ap->forgetting = 0.9998;
    ap->p0 = 1.0;
    ap->trace_max = 20.0;
    ap->max_step = 0.002;
    ap->min_signal_rel = 0.01;
    ap->dead_zone_rel = 2e-4;
    ap->max_substeps = 16;
    ap->arm_pairs = 5000;
    ap->unexplained_max = 0.5;
    ap->worse_max = 2.0;
    ap->members = DRTHS_SMITH_MEMBERS;
    ap->n_starts[0] = 1.0;
    ap->n_starts[1] = 0.6;
    ap->n_starts[2] = 2.0;
    ap->switch_arm = 1000;
    ap->switch_ratio = 0.3;
    ap->glide = 0.001;
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

/* The stiffness rate of the (y, z) equations at v_max (the rule of damper.h) at the two ends of
 * the command range, where the monotone coefficients take their extremes. */
static double stiffness_rate(const drths_damper_params_t *p)
{
    double v = p->v_max_m_s / p->length_unit_m, lam = 0.0;
    for (int e = 0; e < 2; e++) {
        double cmd = e ? p->command_max : 0.0;
        double gb = coef(p, p->gamma_a, p->gamma_b, p->gamma_c, cmd) +
                    coef(p, p->beta_a, p->beta_b, p->beta_c, cmd);
        double al = coef(p, p->alpha_a, p->alpha_b, p->alpha_c, cmd);
        double c01 =
            coef(p, p->c0_a, p->c0_b, p->c0_c, cmd) + coef(p, p->c1_a, p->c1_b, p->c1_c, cmd);
        double l = gb > 0.0 ? p->n * pow(gb, 1.0 / p->n) * pow(p->A, (p->n - 1.0) / p->n) * v : 0.0;
        l += (p->A * al + p->k0) / c01;
        lam = fmax(lam, l);
    }
    return lam;
}

/* Sets the parameters of member b's estimate (theta) and of its sensitivity models (theta +
 * delta e_i), keeping their states. The substeps follow the estimate's stiffness. */
static void apply_theta(drths_smith_t *s, drths_smith_member_t *b)
{
    const drths_damper_params_t *nom = &s->nominal;
    double f[NP];
    for (int i = 0; i < NP; i++)
        f[i] = exp(b->theta[i]);
    double up = exp(s->ap.delta);
    int ns = s->model.substeps;
    for (int m = -1; m < NP; m++) {
        drths_damper_t *d = m < 0 ? &b->est : &b->sens[m];
        double g[NP];
        for (int i = 0; i < NP; i++)
            g[i] = i == m ? f[i] * up : f[i];
        d->p = *nom;
        drths_damper_params_scale(&d->p, g[DRTHS_SMITH_P_ALPHA], g[DRTHS_SMITH_P_C0],
                                  g[DRTHS_SMITH_P_C1], g[DRTHS_SMITH_P_GB], 1.0);
        d->p.n = nom->n * g[DRTHS_SMITH_P_N];
        if (m < 0 && nom->substeps == 0) {
            /* At least the nominal model's count, so theta = 0 is the nominal model exactly
             * (the rule below, at the two ends of the command range, never asks for more than
             * the damper's own over the whole range). */
            double need = ceil(stiffness_rate(&d->p) * d->dt_s / LAMBDA_H);
            if (need > ns)
                ns = need < s->ap.max_substeps ? (int)need : s->ap.max_substeps;
        }
        d->substeps = ns;
    }
}

static void reset_cov(const drths_smith_t *s, drths_smith_member_t *b)
{
    memset(b->P, 0, sizeof b->P);
    for (int i = 0; i < NP; i++)
        b->P[i][i] = s->ap.p0;
}

static void reset_adapt(drths_smith_t *s)
{
    for (int j = 0; j < s->nm; j++) {
        drths_smith_member_t *b = &s->m[j];
        memset(b->theta, 0, sizeof b->theta);
        b->theta[DRTHS_SMITH_P_N] = log(b->n_start);
        reset_cov(s, b);
        memset(&b->st, 0, sizeof b->st);
        b->e2 = b->m2 = 0.0;
        b->w = j == 0;
        b->dropped = 0;
        apply_theta(s, b);
    }
    memset(&s->st, 0, sizeof s->st);
    s->st.fallback_step = -1;
    s->lead = 0;
    s->lead_changes = 0;
    s->e2_nominal = s->f2 = s->m2_nominal = 0.0;
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
        int ok = a->forgetting > 0.0 && a->forgetting <= 1.0 && a->p0 > 0.0 &&
                 a->trace_max >= NP * a->p0 && a->delta > 0.0 && a->delta < 0.5 &&
                 a->max_step > 0.0 && a->min_signal_rel >= 0.0 && a->dead_zone_rel >= 0.0 &&
                 a->max_substeps >= 1 && a->arm_pairs >= 0.0 && a->unexplained_max > 0.0 &&
                 a->worse_max > 0.0 && a->members >= 1 && a->members <= DRTHS_SMITH_MEMBERS &&
                 a->switch_arm >= 0.0 && a->switch_ratio > 0.0 && a->switch_ratio <= 1.0 &&
                 a->glide > 0.0 && a->glide <= 1.0;
        for (int j = 0; j < a->members; j++)
            ok &= a->n_starts[j] > 0.0 && isfinite(a->n_starts[j]);
        for (int i = 0; i < NP; i++)
            ok &= a->scale_min[i] > 0.0 && a->scale_min[i] <= 1.0 && a->scale_max[i] >= 1.0 &&
                  isfinite(a->scale_max[i]);
        if (!ok)
            return drths_error_set(err, -EINVAL,
                                   "Smith predictor adaptive tuning: forgetting in (0, 1], p0 > 0, "
                                   "trace_max >= %d p0, delta in (0, 0.5), max_step > 0, "
                                   "max_substeps >= 1, scale boxes around 1, 1..%d members "
                                   "with positive n starts, switch_ratio and glide in (0, 1]",
                                   NP, DRTHS_SMITH_MEMBERS);
    }
    int rc = drths_damper_init(&s->model, nominal, dt_s, err);
    if (rc)
        return drths_error_prefix(err, rc, "Smith predictor model");
    if (adaptive) {
        s->nominal = *nominal;
        for (int i = 0; i < NP; i++) {
            s->lo[i] = log(s->ap.scale_min[i]);
            s->hi[i] = log(s->ap.scale_max[i]);
        }
        /* The model needs n >= 1. */
        s->lo[DRTHS_SMITH_P_N] = fmax(s->lo[DRTHS_SMITH_P_N], -log(nominal->n));
        /* The starts, clipped into the box; a start equal to an earlier one is dropped. */
        for (int j = 0; j < s->ap.members; j++) {
            double t =
                fmin(fmax(log(s->ap.n_starts[j]), s->lo[DRTHS_SMITH_P_N]), s->hi[DRTHS_SMITH_P_N]);
            int dup = 0;
            for (int q = 0; q < s->nm; q++)
                dup |= fabs(log(s->m[q].n_start) - t) < 1e-9;
            if (dup)
                continue;
            drths_smith_member_t *b = &s->m[s->nm++];
            b->n_start = exp(t);
            rc = drths_damper_init(&b->est, nominal, dt_s, err);
            for (int i = 0; i < NP && !rc; i++)
                rc = drths_damper_init(&b->sens[i], nominal, dt_s, err);
            if (!rc && !(b->phi = calloc(history * NPHI, sizeof(double))))
                rc = drths_error_set(err, -ENOMEM, "out of memory for %zu steps of Smith history",
                                     history);
            if (rc) {
                drths_smith_close(s);
                return drths_error_prefix(err, rc, "Smith predictor identification model");
            }
        }
        s->f_scale_N = force_scale(nominal);
    }
    s->hist = calloc(history, sizeof(double));
    if (!s->hist) {
        drths_smith_close(s);
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
    if (s->nm) {
        reset_adapt(s);
        for (int j = 0; j < s->nm; j++) {
            drths_smith_member_t *b = &s->m[j];
            drths_damper_reset(&b->est, 0.0, command);
            for (int i = 0; i < NP; i++)
                drths_damper_reset(&b->sens[i], 0.0, command);
            /* At rest the force is k1 (x - x0) whatever the identified parameters. */
            b->phi_rest[0] = drths_damper_force(&b->est);
            for (int i = 1; i < NPHI; i++)
                b->phi_rest[i] = 0.0;
            memcpy(b->phi, b->phi_rest, sizeof b->phi_rest);
        }
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

static int adapting(const drths_smith_t *s)
{
    return s->nm && !s->st.fell_back;
}

static void fall_back(drths_smith_t *s, int64_t n, const char *why)
{
    if (s->st.fell_back)
        return;
    s->st.fell_back = 1;
    s->st.fallback_step = n;
    s->st.fallback_reason = why;
}

/* Takes member b out of the bank (its force or theta stopped being finite: why); its weight
 * goes to the leader (another member if it led). When none is left, the nominal model takes
 * over for good (its forces are in hist). */
static void drop_member(drths_smith_t *s, int64_t n, drths_smith_member_t *b, const char *why)
{
    b->dropped = 1;
    double w = b->w;
    b->w = 0.0;
    int best = -1;
    for (int j = 0; j < s->nm; j++)
        if (!s->m[j].dropped && (best < 0 || s->m[j].e2 < s->m[best].e2))
            best = j;
    if (best < 0) {
        fall_back(s, n, why);
        return;
    }
    if (&s->m[s->lead] == b) {
        s->lead = best;
        s->lead_changes++;
    }
    s->m[s->lead].w += w;
}

double drths_smith_step(drths_smith_t *s, double disp_m, double vel_m_s, double command)
{
    double f = drths_damper_step(&s->model, disp_m, vel_m_s, command);
    s->step++;
    size_t slot = (size_t)s->step % s->cap;
    s->hist[slot] = f;
    if (!adapting(s))
        return f;
    for (int j = 0; j < s->nm && !s->st.fell_back; j++) {
        drths_smith_member_t *b = &s->m[j];
        if (b->dropped)
            continue;
        double *ph = &b->phi[slot * NPHI];
        double fe = drths_damper_step(&b->est, disp_m, vel_m_s, command);
        int finite = isfinite(fe);
        double off = fe;
        for (int i = 0; i < NP; i++) {
            double fi = drths_damper_step(&b->sens[i], disp_m, vel_m_s, command);
            ph[1 + i] = (fi - fe) / s->ap.delta;
            finite &= isfinite(fi);
            off -= ph[1 + i] * b->theta[i];
        }
        ph[0] = off;
        if (!finite) /* the estimate left the region its integration handles */
            drop_member(s, s->step, b, "the identified model's force stopped being finite");
    }
    return adapting(s) ? drths_smith_model(s, s->step) : f;
}

/* Member b's [off(k), psi(k)]: the rest values for k <= 0, NULL when not in the ring. */
static const double *phi_at(const drths_smith_t *s, const drths_smith_member_t *b, int64_t k)
{
    if (k <= 0)
        return b->phi_rest;
    if (k > s->step || s->step - k >= (int64_t)s->cap)
        return NULL;
    return &b->phi[((size_t)k % s->cap) * NPHI];
}

double drths_smith_model(const drths_smith_t *s, int64_t k)
{
    if (adapting(s)) {
        double f = 0.0;
        for (int j = 0; j < s->nm; j++) {
            const drths_smith_member_t *b = &s->m[j];
            if (b->w == 0.0)
                continue;
            const double *ph = phi_at(s, b, k);
            if (!ph)
                return NAN;
            f += b->w * (ph[0] + dot(b->theta, ph + 1));
        }
        return f;
    }
    if (k <= 0)
        return s->rest_force_N;
    if (k > s->step || s->step - k >= (int64_t)s->cap)
        return NAN;
    return s->hist[(size_t)k % s->cap];
}

const drths_smith_member_t *drths_smith_leader(const drths_smith_t *s)
{
    return s->nm ? &s->m[s->lead] : NULL;
}

double drths_smith_gain(const drths_smith_t *s)
{
    if (!adapting(s) || !(s->m2_nominal > 0.0))
        return 1.0;
    return sqrt(s->m[s->lead].m2 / s->m2_nominal);
}

double drths_smith_scale(const drths_smith_t *s, const drths_smith_member_t *b, int i)
{
    if (!s->nm || i < 0 || i >= NP)
        return 1.0;
    return exp((b ? b : &s->m[s->lead])->theta[i]);
}

double drths_smith_error_rel(const drths_smith_t *s, const drths_smith_member_t *b)
{
    if (!s->nm || !(s->f2 > 0.0))
        return NAN;
    return sqrt((b ? b : &s->m[s->lead])->e2 / s->f2);
}

const char *drths_smith_fallback_reason(const drths_smith_t *s)
{
    return s->nm ? s->st.fallback_reason : NULL;
}

/* Clips member b's theta into the box; returns nonzero when something was clipped. */
static int project(const drths_smith_t *s, drths_smith_member_t *b)
{
    int clipped = 0;
    for (int i = 0; i < NP; i++) {
        double v = fmin(fmax(b->theta[i], s->lo[i]), s->hi[i]);
        clipped |= v != b->theta[i];
        b->theta[i] = v;
    }
    return clipped;
}

/* The fall-back tests on the leader's running means (see smith.h). */
static void check_health(drths_smith_t *s, int64_t n)
{
    const drths_smith_adapt_params_t *a = &s->ap;
    const drths_smith_member_t *b = &s->m[s->lead];
    if ((double)s->st.pairs < a->arm_pairs)
        return;
    if (b->e2 > a->unexplained_max * s->f2)
        fall_back(s, n, "no damper model in the bounds explains the measured force");
    else if (b->e2 > a->worse_max * s->e2_nominal)
        fall_back(s, n, "the identified model predicts worse than the nominal one");
}

/* One guarded RLS step of member b on the pair (F(n), [off(k), psi(k)]) with its error e_N.
 * Returns 0, or -1 when theta stopped being finite. */
static int identify(drths_smith_t *s, drths_smith_member_t *b, const double *ph, double e_N)
{
    const drths_smith_adapt_params_t *a = &s->ap;
    const double *psi = ph + 1;
    double inv = 1.0 / s->f_scale_N;
    if (!(fabs(e_N) >= a->dead_zone_rel * s->f_scale_N)) {
        b->st.dead_zone++;
        return 0;
    }
    double u[NP], Pu[NP], k[NP], d[NP], lam = a->forgetting;
    for (int i = 0; i < NP; i++)
        u[i] = psi[i] * inv;
    double e = e_N * inv;
    /* A parameter at its bound whose step points out of the box is held for this update: its
     * regressor entry and gain are zero, so the others fit the pair with it fixed. (Clipping it
     * after a free step left the covariance and the other parameters moved as if it had moved:
     * a member at n's lower bound, where n x0.5's truth is, saw its gamma-beta wander x0.3 to
     * x2.4.) At most NP passes: each holds one more parameter or ends. */
    int held[NP] = {0};
    double den = lam;
    for (int pass = 0; pass < NP; pass++) {
        for (int i = 0; i < NP; i++)
            Pu[i] = held[i] ? 0.0 : dot(b->P[i], u);
        den = lam + dot(u, Pu);
        int more = 0;
        for (int i = 0; i < NP; i++) {
            k[i] = Pu[i] / den;
            d[i] = k[i] * e;
            if (!held[i] && ((b->theta[i] <= s->lo[i] && d[i] < 0.0) ||
                             (b->theta[i] >= s->hi[i] && d[i] > 0.0))) {
                held[i] = more = 1;
                u[i] = 0.0; /* out of the regression */
            }
        }
        if (!more)
            break;
    }
    double big = 0.0;
    for (int i = 0; i < NP; i++)
        big = fmax(big, fabs(d[i]));
    /* A bounded step keeps the linearisation of F^(k; theta) valid over the lag L. */
    double sc = big > a->max_step ? a->max_step / big : 1.0;
    if (sc < 1.0)
        b->st.step_limited++;
    double old[NP];
    memcpy(old, b->theta, sizeof old);
    for (int i = 0; i < NP; i++)
        b->theta[i] += sc * d[i];
    double tr = 0.0;
    int ok = 1;
    for (int i = 0; i < NP; i++) {
        for (int j = i; j < NP; j++) {
            if (held[i] || held[j])
                continue; /* a held parameter learnt nothing: its covariance stays */
            double v = (b->P[i][j] - k[i] * Pu[j]) / lam;
            b->P[i][j] = b->P[j][i] = v; /* kept exactly symmetric */
        }
        tr += b->P[i][i];
        ok &= b->P[i][i] > 0.0 && isfinite(b->P[i][i]);
    }
    if (!ok) {
        reset_cov(s, b);
        b->st.resets++;
    } else if (tr > a->trace_max) {
        double f = a->trace_max / tr;
        for (int i = 0; i < NP; i++)
            for (int j = 0; j < NP; j++)
                b->P[i][j] *= f;
        b->st.trace_limited++;
    }
    for (int i = 0; i < NP; i++)
        if (!isfinite(b->theta[i])) {
            memcpy(b->theta, old, sizeof old); /* kept as it was for the record */
            return -1;
        }
    if (project(s, b))
        b->st.projections++;
    b->st.updates++;
    apply_theta(s, b);
    return 0;
}

/* After a pair: the lead changes to a member whose e_a^2 is below switch_ratio times the
 * leader's (once switch_arm pairs are in), and the weights glide towards the leader. */
static void follow_leader(drths_smith_t *s)
{
    const drths_smith_adapt_params_t *a = &s->ap;
    if ((double)s->st.pairs >= a->switch_arm) {
        int best = s->lead;
        for (int j = 0; j < s->nm; j++)
            if (!s->m[j].dropped && s->m[j].e2 < a->switch_ratio * s->m[best].e2)
                best = j;
        if (best != s->lead) {
            s->lead = best;
            s->lead_changes++;
        }
    }
    double sum = 0.0;
    for (int j = 0; j < s->nm; j++) {
        drths_smith_member_t *b = &s->m[j];
        double target = j == s->lead ? 1.0 : 0.0;
        b->w += fmax(-a->glide, fmin(a->glide, target - b->w));
        sum += b->w;
    }
    for (int j = 0; j < s->nm; j++)
        s->m[j].w /= sum;
}

/* The identification from the measured force F(n) of the step k applied at tick n: the shared
 * means, then each member's, its RLS step, the fall-back tests and the lead. */
static void adapt(drths_smith_t *s, int64_t n, int64_t k, double measured_N)
{
    const drths_smith_adapt_params_t *a = &s->ap;
    double lam = a->forgetting, f_nom = k <= 0 ? s->rest_force_N : s->hist[(size_t)k % s->cap];
    const double *ph[DRTHS_SMITH_MEMBERS] = {NULL};
    for (int j = 0; j < s->nm; j++) {
        drths_smith_member_t *b = &s->m[j];
        if (b->dropped || !(ph[j] = phi_at(s, b, k)))
            continue;
        double m = sqrt(dot(ph[j] + 1, ph[j] + 1)) / s->f_scale_N;
        if (!(m >= a->min_signal_rel) || m <= 0.0) {
            b->st.low_signal++;
            ph[j] = NULL;
        }
    }
    /* The nominal means move only with the leader's pairs, which the fall-back compares. */
    if (!ph[s->lead])
        return;
    s->e2_nominal = lam * s->e2_nominal + (measured_N - f_nom) * (measured_N - f_nom);
    s->f2 = lam * s->f2 + measured_N * measured_N;
    s->m2_nominal = lam * s->m2_nominal + f_nom * f_nom;
    s->st.pairs++;
    for (int j = 0; j < s->nm && !s->st.fell_back; j++) {
        drths_smith_member_t *b = &s->m[j];
        if (!ph[j])
            continue;
        double fa = ph[j][0] + dot(b->theta, ph[j] + 1);
        double e_N = measured_N - fa;
        b->e2 = lam * b->e2 + e_N * e_N;
        b->m2 = lam * b->m2 + fa * fa;
        b->st.pairs++;
        if (identify(s, b, ph[j], e_N))
            drop_member(s, n, b, "the identified parameters stopped being finite");
    }
    if (s->st.fell_back)
        return;
    follow_leader(s);
    check_health(s, n);
}

double drths_smith_force_at(drths_smith_t *s, int64_t n, int64_t k, double measured_N)
{
    if (adapting(s) && isfinite(measured_N))
        adapt(s, n, k, measured_N);
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
    s->hist = NULL;
    s->cap = 0;
    drths_damper_close(&s->model);
    for (int j = 0; j < DRTHS_SMITH_MEMBERS; j++) {
        drths_smith_member_t *b = &s->m[j];
        free(b->phi);
        b->phi = NULL;
        drths_damper_close(&b->est);
        for (int i = 0; i < NP; i++)
            drths_damper_close(&b->sens[i]);
    }
    s->nm = 0;
}
