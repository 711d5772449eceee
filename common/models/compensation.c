#include "common/models/compensation.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/models/lagrange.h"

/* The polynomial lead is at most 1 s; its future samples are read only up to the window. */
#define POLY_LEAD_MAX_S 1.0

int drths_comp_stencil_weights(const double *x, int n, double z, double *wt)
{
    enum { M = 3, NMAX = 16 };
    if (n < 1 || n > NMAX)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (!(x[i] != x[j]))
                return -EINVAL;
    /* Fornberg (1988), "Generation of finite difference formulas on arbitrarily spaced grids":
     * C[j][k] is the weight of f(x[j]) in the k-th derivative at z, built by adding one node at
     * a time. */
    double C[NMAX][M + 1];
    memset(C, 0, sizeof C);
    double c1 = 1.0, c4 = x[0] - z;
    C[0][0] = 1.0;
    for (int i = 1; i < n; i++) {
        const int mn = i < M ? i : M;
        double c2 = 1.0;
        const double c5 = c4;
        c4 = x[i] - z;
        for (int j = 0; j < i; j++) {
            const double c3 = x[i] - x[j];
            c2 *= c3;
            if (j == i - 1) {
                for (int k = mn; k >= 1; k--)
                    C[i][k] = c1 * (k * C[i - 1][k - 1] - c5 * C[i - 1][k]) / c2;
                C[i][0] = -c1 * c5 * C[i - 1][0] / c2;
            }
            for (int k = mn; k >= 1; k--)
                C[j][k] = (c4 * C[j][k] - k * C[j][k - 1]) / c3;
            C[j][0] = c4 * C[j][0] / c3;
        }
        c1 = c2;
    }
    for (int k = 0; k <= M; k++)
        for (int j = 0; j < n; j++)
            wt[k * n + j] = C[j][k];
    return 0;
}

/* Clamps *x to [-limit, limit] when limit > 0; returns 1 when it did. */
static int clamp_abs(double *x, double limit)
{
    if (!(limit > 0.0) || fabs(*x) <= limit)
        return 0;
    *x = *x > 0.0 ? limit : -limit;
    return 1;
}

static int is_ff(drths_compensation_t m)
{
    return m == DRTHS_COMPENSATION_FEEDFORWARD || m == DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE ||
           m == DRTHS_COMPENSATION_ADAPTIVE;
}

/* The weights of the feedforward's derivatives for the window of n samples at the tick offsets
 * x0 .. x0 + n - 1: c->dw[k][j] is the weight of sample j in the k-th derivative (SI) at the
 * offset z of the least-squares polynomial through them, of the highest degree (at most
 * DRTHS_COMP_FIT_DEGREE and n - 1) at which no sample weighs more than DRTHS_COMP_FIT_BOUND in
 * the drive of the design model (sum_k a_k dw[k][j] with init's a_k). Returns that degree. The
 * polynomials orthonormal on the window come from Forsythe's three-term recurrence in
 * xi = (x - z) / h (h the window's reach from z, so |xi| <= 1), their derivatives at xi = 0 from
 * the same recurrence differentiated, one degree at a time: well conditioned for any window,
 * and exact for polynomials of the degree returned. */
static int fit_weights(drths_comp_t *c, int x0, int n, double z)
{
    const int max_deg = DRTHS_COMP_FIT_DEGREE < n - 1 ? DRTHS_COMP_FIT_DEGREE : n - 1;
    const double h = fmax(fabs(x0 - z), fabs(x0 + n - 1 - z));
    double q[DRTHS_COMP_FIT_SAMPLES], qp[DRTHS_COMP_FIT_SAMPLES], xi[DRTHS_COMP_FIT_SAMPLES];
    double d[4] = {0.0, 0.0, 0.0, 0.0}, dp[4] = {0.0, 0.0, 0.0, 0.0}, beta = 0.0;
    /* The k-th derivative in xi becomes SI with (h dt)^-k; sc[k] also folds the design model's
     * coefficient in, for the bound. */
    double si[4], sc[4];
    for (int k = 0; k < 4; k++) {
        si[k] = 1.0 / pow(h * c->dt_s, k);
        sc[k] = si[k] * c->a_design[k];
    }
    for (int j = 0; j < n; j++) {
        xi[j] = (x0 + j - z) / h;
        q[j] = 1.0 / sqrt((double)n);
        qp[j] = 0.0;
    }
    d[0] = 1.0 / sqrt((double)n);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < n; j++)
            c->dw[k][j] = q[j] * d[k] * si[k];
    int deg = 0;
    for (int m = 0; m < max_deg; m++) {
        double alpha = 0.0, gamma = 0.0;
        for (int j = 0; j < n; j++)
            alpha += xi[j] * q[j] * q[j];
        for (int j = 0; j < n; j++) {
            const double v = (xi[j] - alpha) * q[j] - beta * qp[j];
            qp[j] = q[j];
            q[j] = v;
            gamma += v * v;
        }
        gamma = sqrt(gamma);
        double dn[4];
        for (int k = 0; k < 4; k++)
            dn[k] = (-alpha * d[k] + (k > 0 ? k * d[k - 1] : 0.0) - beta * dp[k]) / gamma;
        for (int j = 0; j < n; j++)
            q[j] /= gamma;
        /* Degree m + 1 only when its drive weighs no sample more than the bound. */
        int within = 1;
        for (int j = 0; j < n && within; j++) {
            double w = 0.0;
            for (int k = 0; k < 4; k++)
                w += (c->dw[k][j] * c->a_design[k]) + q[j] * dn[k] * sc[k];
            within = fabs(w) <= DRTHS_COMP_FIT_BOUND;
        }
        if (!within)
            break;
        for (int k = 0; k < 4; k++) {
            dp[k] = d[k];
            d[k] = dn[k];
            for (int j = 0; j < n; j++)
                c->dw[k][j] += q[j] * d[k] * si[k];
        }
        beta = gamma;
        deg = m + 1;
    }
    return deg;
}

/* The state-variable filter F(s) = w^4 / (s + w)^4 in companion form, states [z, z', z'', z''']
 * with z = F x, discretised with a zero-order hold on its input. */
static int adapt_filter(drths_comp_adapt_t *ad, double dt_s)
{
    const double w = 2.0 * M_PI * DRTHS_COMP_ADAPT_FILTER_HZ;
    const double w2 = w * w, w3 = w2 * w, w4 = w2 * w2;
    const double A[16] = {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, -w4, -4 * w3, -6 * w2, -4 * w};
    const double B[4] = {0, 0, 0, w4};
    return drths_plant_zoh(4, A, B, dt_s, ad->ad, ad->bd);
}

static int check_model(const drths_plant_model_t *m, drths_error_t *err)
{
    if (!m)
        return drths_error_set(err, -EINVAL, "compensation.model: required for this mode");
    const double v[4] = {m->K, m->p, m->a, m->b};
    const char *names[4] = {"K", "p", "a", "b"};
    for (int i = 0; i < 4; i++)
        if (!(v[i] > 0.0) || !isfinite(v[i]))
            return drths_error_set(err, -EINVAL, "compensation.model.%s: must be > 0 (got %g)",
                                   names[i], v[i]);
    return 0;
}

const drths_comp_plant_range_t DRTHS_COMP_PLANT_RANGE_DEFAULT = {
    .lo = {0.7, 0.5, 0.5, 0.5},
    .hi = {1.4, 2.0, 2.0, 2.0},
};

int drths_comp_adapt_bounds(const drths_plant_model_t *m, const drths_comp_plant_range_t *r,
                            double lo[4], double hi[4], drths_error_t *err)
{
    static const char *const names[4] = {"gain", "bandwidth", "real_pole", "complex_pole"};
    for (int i = 0; i < 4; i++) {
        if (!(r->lo[i] > 0.0) || !isfinite(r->lo[i]) || !(r->hi[i] > 0.0) || !isfinite(r->hi[i]))
            return drths_error_set(err, -EINVAL,
                                   "compensation.adaptive_range.%s: must be > 0 (got %g .. %g)",
                                   names[i], r->lo[i], r->hi[i]);
        if (r->lo[i] > r->hi[i])
            return drths_error_set(err, -EINVAL,
                                   "compensation.adaptive_range.%s: min %g exceeds max %g",
                                   names[i], r->lo[i], r->hi[i]);
    }
    const double a0[4] = {m->p * m->b / m->K, (m->b + m->a * m->p) / m->K, (m->a + m->p) / m->K,
                          1.0 / m->K};
    for (int k = 0; k < 4; k++) {
        lo[k] = INFINITY;
        hi[k] = 0.0;
    }
    /* Each theta_k is monotone in every factor: its extremes over the box are at corners. */
    for (int corner = 0; corner < 16; corner++) {
        drths_plant_scale_t sc;
        double v[4];
        for (int i = 0; i < 4; i++)
            v[i] = corner & (1 << i) ? r->hi[i] : r->lo[i];
        sc = (drths_plant_scale_t){v[0], v[1], v[2], v[3]};
        drths_plant_model_t s;
        int rc = drths_plant_model_scale(m, &sc, &s, err);
        if (rc < 0)
            return rc;
        const double as[4] = {s.p * s.b / s.K, (s.b + s.a * s.p) / s.K, (s.a + s.p) / s.K,
                              1.0 / s.K};
        for (int k = 0; k < 4; k++) {
            const double th = as[k] / a0[k];
            if (th < lo[k])
                lo[k] = th;
            if (th > hi[k])
                hi[k] = th;
        }
    }
    for (int k = 0; k < 4; k++) {
        lo[k] /= DRTHS_COMP_ADAPT_MARGIN;
        hi[k] *= DRTHS_COMP_ADAPT_MARGIN;
    }
    return 0;
}

/* The adaptive bounds: [1/bound, bound] when a symmetric bound is set, else the widest over the
 * models the inverse uses of those its range needs. */
static int derive_bounds(drths_comp_t *c, drths_error_t *err)
{
    drths_comp_adapt_t *ad = &c->ad;
    if (ad->bound > 0.0) {
        for (int k = 0; k < 4; k++) {
            ad->lo[k] = 1.0 / ad->bound;
            ad->hi[k] = ad->bound;
        }
        return 0;
    }
    const drths_plant_model_t *models[3] = {&c->model, &c->sched_model[0], &c->sched_model[1]};
    double lo[4] = {INFINITY, INFINITY, INFINITY, INFINITY}, hi[4] = {0.0, 0.0, 0.0, 0.0};
    for (int i = 0; i < (c->scheduled ? 3 : 1); i++) {
        double l[4], h[4];
        int rc = drths_comp_adapt_bounds(models[i], &ad->range, l, h, err);
        if (rc < 0)
            return rc;
        for (int k = 0; k < 4; k++) {
            lo[k] = fmin(lo[k], l[k]);
            hi[k] = fmax(hi[k], h[k]);
        }
    }
    memcpy(ad->lo, lo, sizeof lo);
    memcpy(ad->hi, hi, sizeof hi);
    return 0;
}

int drths_comp_init(drths_comp_t *c, drths_compensation_t mode, const drths_plant_model_t *model,
                    int io_delay_ticks, double dt_s, drths_error_t *err)
{
    if (mode != DRTHS_COMPENSATION_NONE && mode != DRTHS_COMPENSATION_POLYNOMIAL && !is_ff(mode))
        return drths_error_set(err, -EINVAL, "compensation.mode: unknown mode %d", (int)mode);
    if (io_delay_ticks < 0 || io_delay_ticks > DRTHS_COMP_MAX_IO_DELAY)
        return drths_error_set(err, -EINVAL, "compensation.io_delay_ticks: must be 0 to %d (got %d)",
                               DRTHS_COMP_MAX_IO_DELAY, io_delay_ticks);
    if (!(dt_s > 0.0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "compensation.dt_s: must be > 0 (got %g)", dt_s);
    drths_comp_t t;
    memset(&t, 0, sizeof t);
    t.mode = mode;
    t.dt_s = dt_s;
    t.io_delay_ticks = io_delay_ticks;
    t.lead_ticks = io_delay_ticks - 0.5;
    for (int k = 0; k < 4; k++)
        t.theta[k] = 1.0;
    if (mode == DRTHS_COMPENSATION_ADAPTIVE) {
        if (adapt_filter(&t.ad, dt_s) < 0)
            return drths_error_set(err, -EINVAL, "compensation: adaptive filter at dt %g s failed",
                                   dt_s);
        t.ad.lambda = exp(-dt_s / DRTHS_COMP_ADAPT_WINDOW_S);
        t.ad.range = DRTHS_COMP_PLANT_RANGE_DEFAULT; /* the bounds follow the model, below */
        /* The pull towards the current estimate weighs as much as 100 ticks of a 10 um
         * regressor: nothing against a moving actuator, enough to keep a direction the motion
         * has not excited where it was. */
        t.ad.ridge = 1e-8;
        /* Sensor noise (a few um) through the filter gives well under 1 um of regressor. */
        t.ad.excite_m = 5e-6;
    }
    if (mode != DRTHS_COMPENSATION_NONE) {
        int rc = check_model(model, err);
        if (rc < 0)
            return rc;
        t.model = *model;
        const drths_plant_model_t *m = model;
        t.a[0] = m->p * m->b / m->K;
        t.a[1] = (m->b + m->a * m->p) / m->K;
        t.a[2] = (m->a + m->p) / m->K;
        t.a[3] = 1.0 / m->K;
        memcpy(t.a_design, t.a, sizeof t.a);
        if (mode == DRTHS_COMPENSATION_ADAPTIVE && (rc = derive_bounds(&t, err)) < 0)
            return rc;
        /* Low-frequency group delay of G: the phase is -w (1/p + a/b) + O(w^3). */
        t.poly_lead_ticks = (1.0 / m->p + m->a / m->b) / dt_s + t.lead_ticks;
        if (t.poly_lead_ticks < 0.0)
            t.poly_lead_ticks = 0.0;
        if (t.poly_lead_ticks * dt_s > POLY_LEAD_MAX_S)
            return drths_error_set(err, -EINVAL,
                                   "compensation.model: its delay 1/p + a/b = %g s exceeds %g s",
                                   t.poly_lead_ticks * dt_s, POLY_LEAD_MAX_S);
    }
    /* The fit's window reaches DRTHS_COMP_FIT_PREVIEW ticks beyond the tick nearest t + s. */
    int centre = (int)ceil(t.lead_ticks - 0.5);
    if (centre < 0)
        centre = 0;
    t.n_need = centre + DRTHS_COMP_FIT_PREVIEW;
    t.fit_past = t.fit_future = -1;
    t.dw_past = t.dw_future = -1;
    *c = t;
    if (is_ff(mode) && c->n_need <= DRTHS_COMP_FIT_MAX_FUTURE) {
        for (int nf = 0; nf <= c->n_need; nf++) {
            const int np = DRTHS_COMP_FIT_SAMPLES - nf;
            c->deg_full[nf] = fit_weights(c, 1 - np, DRTHS_COMP_FIT_SAMPLES, c->lead_ticks);
            memcpy(c->dw_full[nf], c->dw, sizeof c->dw);
        }
    }
    drths_comp_adapt_reset(c, 0.0);
    return 0;
}

static void denominator(const drths_plant_model_t *m, double *d)
{
    d[0] = m->p * m->b;
    d[1] = m->b + m->a * m->p;
    d[2] = m->a + m->p;
    d[3] = 1.0;
    d[4] = m->K;
}

int drths_comp_schedule(drths_comp_t *c, const drths_plant_model_t *lo, const drths_plant_model_t *hi,
                        double i_hi_A, drths_error_t *err)
{
    if (!is_ff(c->mode))
        return drths_error_set(err, -EINVAL, "compensation.schedule: only for the feedforward");
    int rc = check_model(lo, err);
    if (rc < 0)
        return drths_error_prefix(err, rc, "compensation.schedule (0 A)");
    rc = check_model(hi, err);
    if (rc < 0)
        return drths_error_prefix(err, rc, "compensation.schedule (high current)");
    if (!(i_hi_A > 0.0) || !isfinite(i_hi_A))
        return drths_error_set(err, -EINVAL, "compensation.schedule.i_hi_A: must be > 0 (got %g)",
                               i_hi_A);
    denominator(lo, c->sched_lo);
    denominator(hi, c->sched_hi);
    c->sched_model[0] = *lo;
    c->sched_model[1] = *hi;
    c->sched_i_hi_A = i_hi_A;
    c->scheduled = 1;
    drths_comp_set_current(c, 0.0);
    if (c->mode == DRTHS_COMPENSATION_ADAPTIVE)
        return derive_bounds(c, err);
    return 0;
}

void drths_comp_set_current(drths_comp_t *c, double current_A)
{
    if (!c->scheduled)
        return;
    double f = current_A / c->sched_i_hi_A;
    if (!(f >= 0.0))
        f = 0.0;
    else if (f > 1.0)
        f = 1.0;
    c->sched_current_A = f * c->sched_i_hi_A;
    double d[5];
    for (int k = 0; k < 5; k++)
        d[k] = c->sched_lo[k] + f * (c->sched_hi[k] - c->sched_lo[k]);
    for (int k = 0; k < 4; k++)
        c->a[k] = d[k] / d[4];
}

int drths_comp_current_model(drths_comp_t *c, const drths_damper_params_t *dp, drths_error_t *err)
{
    if (!c->scheduled)
        return drths_error_set(err, -EINVAL,
                               "compensation.current_model: schedule the feedforward first");
    drths_comp_current_t m;
    memset(&m, 0, sizeof m);
    m.command_max = drths_damper_command_max(dp);
    double A[9] = {0}, B[3] = {0};
    switch (dp->model) {
    case DRTHS_DAMPER_PHILLIPS2013: {
        /* x1' = -pole x1 + u; i_lag = (pole/zero)(u + (zero - pole) x1); the low-pass
         * x2'' = wn^2 (i_lag - x2) - 2 zeta wn x2', with x3 = x2'. Effective current = x2. */
        const double z = dp->lag_zero_rad_s, pl = dp->lag_pole_rad_s;
        const double wn = 2.0 * M_PI * dp->lowpass_hz, zeta = dp->lowpass_zeta;
        if (!(z > 0.0) || !(pl > 0.0) || !(wn > 0.0) || !(zeta > 0.0))
            return drths_error_set(err, -EINVAL,
                                   "compensation.current_model: the damper's current dynamics "
                                   "need positive zero, pole, low-pass frequency and damping");
        m.n = 3;
        A[0] = -pl;
        A[5] = 1.0;
        A[6] = wn * wn * (pl / z) * (z - pl);
        A[7] = -wn * wn;
        A[8] = -2.0 * zeta * wn;
        B[0] = 1.0;
        B[2] = wn * wn * pl / z;
        m.out = 1;
        m.pole = pl;
        /* The plant's models are identified in amperes of this damper. */
        m.scale = 1.0;
        break;
    }
    case DRTHS_DAMPER_SPENCER1997:
        if (!(dp->eta_per_s > 0.0))
            return drths_error_set(err, -EINVAL,
                                   "compensation.current_model: eta_per_s must be > 0 (got %g)",
                                   dp->eta_per_s);
        m.n = 1;
        A[0] = -dp->eta_per_s;
        B[0] = dp->eta_per_s;
        m.out = 0;
        /* As common/models/specimen.h: the plant follows command / command_max on the 0..2.5 A scale. */
        m.scale = m.command_max > 0.0 ? c->sched_i_hi_A / m.command_max : 0.0;
        break;
    default:
        /* No current: the plant stays at its 0 A model, and so does the inverse. */
        m.n = 0;
        m.scale = 0.0;
        break;
    }
    if (m.n > 0) {
        double An[9], Bn[3];
        for (int i = 0; i < m.n; i++) {
            Bn[i] = B[i];
            for (int j = 0; j < m.n; j++)
                An[i * m.n + j] = A[i * 3 + j];
        }
        if (drths_plant_zoh(m.n, An, Bn, c->dt_s, m.ad, m.bd) != 0)
            return drths_error_set(err, -EINVAL, "compensation.current_model: discretisation failed");
    }
    m.enabled = 1;
    c->cur = m;
    drths_comp_reset_command(c, 0.0);
    return 0;
}

void drths_comp_reset_command(drths_comp_t *c, double command)
{
    drths_comp_current_t *m = &c->cur;
    if (!m->enabled)
        return;
    if (!(command >= 0.0))
        command = 0.0;
    else if (command > m->command_max)
        command = m->command_max;
    /* Steady state of each realisation for a constant command. */
    memset(m->s, 0, sizeof m->s);
    if (m->n == 3) {
        /* x1 = u / pole, x2 = u, x3 = 0. */
        m->s[0] = command / m->pole;
        m->s[1] = command;
    } else if (m->n == 1) {
        m->s[0] = command;
    }
    m->effective = m->n > 0 ? m->s[m->out] : 0.0;
    drths_comp_set_current(c, m->effective * m->scale);
}

void drths_comp_set_command(drths_comp_t *c, double command)
{
    drths_comp_current_t *m = &c->cur;
    if (!m->enabled)
        return;
    if (!(command >= 0.0))
        command = 0.0;
    else if (command > m->command_max)
        command = m->command_max;
    double ns[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < m->n; i++) {
        double v = m->bd[i] * command;
        for (int j = 0; j < m->n; j++)
            v += m->ad[i * m->n + j] * m->s[j];
        ns[i] = v;
    }
    for (int i = 0; i < m->n; i++)
        m->s[i] = ns[i];
    m->effective = m->n > 0 ? m->s[m->out] : 0.0;
    drths_comp_set_current(c, m->effective * m->scale);
}

int drths_comp_set_poly_lead(drths_comp_t *c, double lead_s, drths_error_t *err)
{
    if (!(lead_s >= 0.0) || !(lead_s <= POLY_LEAD_MAX_S))
        return drths_error_set(err, -EINVAL,
                               "compensation.polynomial_lead_s: must be 0 to %g s (got %g)",
                               POLY_LEAD_MAX_S, lead_s);
    c->poly_lead_ticks = lead_s / c->dt_s;
    return 0;
}

int drths_comp_lookahead_needed(const drths_comp_t *c)
{
    switch (c->mode) {
    case DRTHS_COMPENSATION_FEEDFORWARD:
    case DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE:
    case DRTHS_COMPENSATION_ADAPTIVE:
        return c->n_need;
    case DRTHS_COMPENSATION_POLYNOMIAL:
        return (int)floor(c->poly_lead_ticks);
    default:
        return 0;
    }
}

/* Appends r(t) = past[3] to the fit's history when past[0..2] are its newest three samples (the
 * caller's ticks follow each other); otherwise the history starts again from past[0..3]. */
static void remember(drths_comp_t *c, const double *past)
{
    int h = c->n_hist;
    if (h >= DRTHS_COMP_PAST && c->hist[h - 3] == past[0] && c->hist[h - 2] == past[1] &&
        c->hist[h - 1] == past[2]) {
        if (h == DRTHS_COMP_FIT_SAMPLES) {
            memmove(c->hist, c->hist + 1, (size_t)(h - 1) * sizeof c->hist[0]);
            h--;
        }
        c->hist[h++] = past[3];
    } else {
        for (h = 0; h < DRTHS_COMP_PAST; h++)
            c->hist[h] = past[h];
    }
    c->n_hist = h;
}

/* r(t + tau) from the cubic through r(t+m-3 .. t+m), m the newest given sample at or before
 * t + tau. */
static double poly_drive(const drths_comp_t *c, const double *past, const double *future,
                         int n_future)
{
    const double tau = c->poly_lead_ticks;
    int m = (int)floor(tau);
    if (m > n_future)
        m = n_future;
    double h[4];
    for (int i = 0; i < 4; i++) {
        const int o = m - 3 + i; /* tick offset */
        h[i] = o <= 0 ? past[3 + o] : future[o - 1];
    }
    return drths_lagrange3_extrapolate(h, tau - m);
}

double drths_comp_drive(drths_comp_t *c, const double *past, const double *future, int n_future)
{
    c->ticks++;
    if (n_future < 0 || !future)
        n_future = 0;
    switch (c->mode) {
    case DRTHS_COMPENSATION_POLYNOMIAL:
        return poly_drive(c, past, future, n_future);
    case DRTHS_COMPENSATION_FEEDFORWARD:
    case DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE:
    case DRTHS_COMPENSATION_ADAPTIVE: {
        remember(c, past);
        const int need = c->n_need;
        const int nf = n_future < need ? n_future : need;
        if (nf < need) {
            c->extrapolated_ticks++;
            c->extrapolated_samples += (uint64_t)(need - nf);
        }
        const int np =
            c->n_hist < DRTHS_COMP_FIT_SAMPLES - nf ? c->n_hist : DRTHS_COMP_FIT_SAMPLES - nf;
        const double(*dw)[DRTHS_COMP_FIT_SAMPLES] = c->dw;
        if (np + nf == DRTHS_COMP_FIT_SAMPLES && nf <= c->n_need) {
            dw = c->dw_full[nf]; /* the history is full: the weights computed at init */
            c->fit_degree = c->deg_full[nf];
        } else if (np != c->dw_past || nf != c->dw_future) {
            c->fit_degree = fit_weights(c, 1 - np, np + nf, c->lead_ticks);
            c->dw_past = np;
            c->dw_future = nf;
        }
        c->fit_past = np;
        c->fit_future = nf;
        const double *h = &c->hist[c->n_hist - np];
        double d[4] = {0.0, 0.0, 0.0, 0.0};
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < np; j++)
                d[k] += dw[k][j] * h[j];
            for (int j = 0; j < nf; j++)
                d[k] += dw[k][np + j] * future[j];
        }
        double u = 0.0;
        const int cut = clamp_abs(&d[2], c->max_acc_m_s2) | clamp_abs(&d[3], c->max_jerk_m_s3);
        if (cut)
            c->limited_ticks++;
        for (int k = 0; k < 4; k++)
            u += c->theta[k] * c->a[k] * d[k];
        return u;
    }
    default:
        return past[3];
    }
}

int drths_comp_set_limits(drths_comp_t *c, double max_acc_m_s2, double max_jerk_m_s3,
                          drths_error_t *err)
{
    if (!(max_acc_m_s2 >= 0.0) || !isfinite(max_acc_m_s2))
        return drths_error_set(err, -EINVAL,
                               "compensation.max_acceleration_m_s2: must be >= 0 (got %g)",
                               max_acc_m_s2);
    if (!(max_jerk_m_s3 >= 0.0) || !isfinite(max_jerk_m_s3))
        return drths_error_set(err, -EINVAL, "compensation.max_jerk_m_s3: must be >= 0 (got %g)",
                               max_jerk_m_s3);
    c->max_acc_m_s2 = max_acc_m_s2;
    c->max_jerk_m_s3 = max_jerk_m_s3;
    return 0;
}

int drths_comp_set_adaptive(drths_comp_t *c, double window_s, double bound, drths_error_t *err)
{
    if (c->mode != DRTHS_COMPENSATION_ADAPTIVE)
        return drths_error_set(err, -EINVAL, "compensation.adaptive: only for the adaptive mode");
    if (!(window_s >= 0.05 && window_s <= 600.0))
        return drths_error_set(err, -EINVAL,
                               "compensation.adaptive_window_s: must be 0.05 to 600 s (got %g)",
                               window_s);
    if (!(bound == 0.0 || (bound >= 1.0 && bound <= 100.0)))
        return drths_error_set(err, -EINVAL,
                               "compensation.adaptive_bound: must be 0 (derived from the plant "
                               "range) or 1 to 100 (got %g)",
                               bound);
    c->ad.lambda = exp(-c->dt_s / window_s);
    c->ad.bound = bound;
    return derive_bounds(c, err);
}

int drths_comp_set_adaptive_range(drths_comp_t *c, const drths_comp_plant_range_t *r,
                                  drths_error_t *err)
{
    if (c->mode != DRTHS_COMPENSATION_ADAPTIVE)
        return drths_error_set(err, -EINVAL, "compensation.adaptive: only for the adaptive mode");
    const drths_comp_adapt_t keep = c->ad;
    c->ad.range = *r;
    c->ad.bound = 0.0;
    int rc = derive_bounds(c, err);
    if (rc < 0)
        c->ad = keep; /* a range refused leaves the bounds as they were */
    return rc;
}

void drths_comp_adapt_reset(drths_comp_t *c, double x_m)
{
    if (c->mode != DRTHS_COMPENSATION_ADAPTIVE)
        return;
    drths_comp_adapt_t *ad = &c->ad;
    memset(ad->zx, 0, sizeof ad->zx);
    memset(ad->zu, 0, sizeof ad->zu);
    ad->zx[0] = ad->zu[0] = ad->px[0] = x_m;
    ad->px[1] = ad->px[2] = ad->px[3] = 0.0;
    for (int i = 0; i <= DRTHS_COMP_MAX_IO_DELAY; i++) {
        ad->fu[i] = x_m;
        for (int k = 0; k < 4; k++)
            ad->as[i][k] = c->a[k];
    }
    ad->pos = 0;
    ad->observed = 0;
    memset(ad->at_bound_ticks, 0, sizeof ad->at_bound_ticks);
    ad->pinned = 0;
    memset(ad->N, 0, sizeof ad->N);
    memset(ad->q, 0, sizeof ad->q);
    for (int k = 0; k < 4; k++)
        c->theta[k] = 1.0;
}

/* One step of the state-variable filter on input v. */
static void svf_step(const drths_comp_adapt_t *ad, double *z, double v)
{
    double n[4];
    for (int i = 0; i < 4; i++) {
        double s = ad->bd[i] * v;
        for (int j = 0; j < 4; j++)
            s += ad->ad[i * 4 + j] * z[j];
        n[i] = s;
    }
    memcpy(z, n, sizeof n);
}

/* Solves the symmetric positive definite 4 x 4 system M x = b by Cholesky; -EDOM when M is not
 * positive definite. */
static int solve4(const double *M, const double *b, double *x)
{
    double L[16] = {0}, y[4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j <= i; j++) {
            double s = M[i * 4 + j];
            for (int k = 0; k < j; k++)
                s -= L[i * 4 + k] * L[j * 4 + k];
            if (i == j) {
                if (!(s > 0.0))
                    return -EDOM;
                L[i * 4 + i] = sqrt(s);
            } else {
                L[i * 4 + j] = s / L[j * 4 + j];
            }
        }
    for (int i = 0; i < 4; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= L[i * 4 + k] * y[k];
        y[i] = s / L[i * 4 + i];
    }
    for (int i = 3; i >= 0; i--) {
        double s = y[i];
        for (int k = i + 1; k < 4; k++)
            s -= L[k * 4 + i] * x[k];
        x[i] = s / L[i * 4 + i];
    }
    return 0;
}

/* The identification's step of drths_comp_observe (the caller counts the tick). */
static void observe_update(drths_comp_t *c, double drive_m, double measured_m)
{
    drths_comp_adapt_t *ad = &c->ad;
    if (!isfinite(drive_m) || !isfinite(measured_m))
        return;
    const int len = DRTHS_COMP_MAX_IO_DELAY + 1;
    memcpy(ad->px, ad->zx, sizeof ad->px);
    svf_step(ad, ad->zx, measured_m);
    svf_step(ad, ad->zu, drive_m);
    ad->pos = (ad->pos + 1) % len;
    ad->fu[ad->pos] = ad->zu[0];
    for (int k = 0; k < 4; k++)
        ad->as[ad->pos][k] = c->a[k];
    /* The drive written d ticks ago is the one this reading shows (at t + d - 1/2). */
    const int d = c->io_delay_ticks;
    if (ad->observed <= (uint64_t)d + 4) /* the ring holds no drive that old yet */
        return;
    const int at = (ad->pos - d + len) % len;
    double psi[4], dyn = 0.0;
    for (int k = 0; k < 4; k++) {
        psi[k] = ad->as[at][k] * 0.5 * (ad->zx[k] + ad->px[k]);
        if (k > 0)
            dyn += fabs(psi[k]);
    }
    const double y = ad->fu[at];
    if (!(dyn > ad->excite_m))
        return;
    ad->updates++;
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++)
            ad->N[i * 4 + j] = ad->lambda * ad->N[i * 4 + j] + psi[i] * psi[j];
        ad->q[i] = ad->lambda * ad->q[i] + psi[i] * y;
    }
    double M[16], b[4], th[4];
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++)
            M[i * 4 + j] = ad->N[i * 4 + j] + (i == j ? ad->ridge : 0.0);
        b[i] = ad->q[i] + ad->ridge * c->theta[i];
    }
    int ok = solve4(M, b, th) == 0;
    for (int k = 0; ok && k < 4; k++)
        ok = isfinite(th[k]);
    if (!ok) {
        ad->fallbacks++;
        for (int k = 0; k < 4; k++)
            th[k] = 1.0;
    }
    int cut = 0;
    unsigned pinned = 0;
    for (int k = 0; k < 4; k++) {
        if (!(th[k] < ad->hi[k])) {
            cut |= th[k] > ad->hi[k];
            th[k] = ad->hi[k];
            pinned |= 1u << k;
        } else if (!(th[k] > ad->lo[k])) {
            cut |= th[k] < ad->lo[k];
            th[k] = ad->lo[k];
            pinned |= 1u << k;
        }
        c->theta[k] = th[k];
    }
    ad->pinned = pinned;
    ad->clamped += (uint64_t)cut;
}

void drths_comp_observe(drths_comp_t *c, double drive_m, double measured_m)
{
    if (c->mode != DRTHS_COMPENSATION_ADAPTIVE)
        return;
    drths_comp_adapt_t *ad = &c->ad;
    ad->observed++;
    observe_update(c, drive_m, measured_m);
    /* A factor stays where the last solution put it until the next one: a tick that does not
     * update it still counts when it sits at a bound. */
    for (int k = 0; k < 4; k++)
        ad->at_bound_ticks[k] += (ad->pinned >> k) & 1u;
}

void drths_comp_close(drths_comp_t *c)
{
    (void)c;
}

void drths_tracking_init(drths_tracking_t *t)
{
    memset(t, 0, sizeof *t);
}

void drths_tracking_reset(drths_tracking_t *t)
{
    memset(t, 0, sizeof *t);
}

void drths_tracking_add(drths_tracking_t *t, double xd_m, double xm_m)
{
    const double e = xm_m - xd_m;
    t->sum_e2 += e * e;
    t->sum_d2 += xd_m * xd_m;
    /* A NaN sticks, so a defect in a record is never hidden by later good samples. */
    if (!isnan(t->max_abs_err) && !(fabs(e) <= t->max_abs_err))
        t->max_abs_err = fabs(e);
    if (t->n > 0)
        t->sum_area2 += t->prev_d * xm_m - xd_m * t->prev_m;
    t->prev_d = xd_m;
    t->prev_m = xm_m;
    t->n++;
}

double drths_tracking_rms_pct(const drths_tracking_t *t)
{
    if (t->n == 0)
        return 0.0;
    if (t->sum_d2 == 0.0)
        return t->sum_e2 == 0.0 ? 0.0 : INFINITY;
    return 100.0 * sqrt(t->sum_e2 / t->sum_d2);
}

double drths_tracking_ti(const drths_tracking_t *t)
{
    return 0.5 * t->sum_area2;
}

double drths_tracking_max_err(const drths_tracking_t *t)
{
    return t->max_abs_err;
}
