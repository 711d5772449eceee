#include "common/models/damper.h"

#include "common/models/plant.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* The automatic substep keeps |lambda| h below this at v_max (see damper.h). RK4 is stable to
 * 2.78 and monotone for real lambda h > -2.2; 0.2 leaves the truncation error far below the
 * 0.1 % the tests demand. */
#define AUTO_LAMBDA_H 0.2
#define MAX_SUBSTEPS 100000

void drths_damper_params_preset(drths_damper_params_t *p, drths_damper_model_t m)
{
    memset(p, 0, sizeof *p);
    p->model = m;
    p->substeps = 0;
    p->v_max_m_s = 0.5;
    p->length_unit_m = 1.0;
    p->force_unit_N = 1.0;
    p->n = 2.0;
    switch (m) {
    case DRTHS_DAMPER_PHILLIPS2013:
        /* Phillips & Spencer (2013), the 200-kN damper's identified parameters: mm, kN, A. */
        p->length_unit_m = 1e-3;
        p->force_unit_N = 1e3;
        p->c0_a = 0.080, p->c0_b = 0.32, p->c0_c = 1.5;
        p->c1_a = 3.0, p->c1_b = 15.0, p->c1_c = 2.0;
        p->alpha_a = 0.11, p->alpha_b = 0.55, p->alpha_c = 1.0;
        p->gamma_a = 0.050, p->gamma_b = 0.0020, p->gamma_c = 5.2;
        p->beta_a = 0.050, p->beta_b = 0.0020, p->beta_c = 5.2;
        p->k0 = 0.0, p->k1 = 0.0, p->x0 = 0.0;
        p->A = 300.0;
        p->n = 2.0;
        p->command_max = 2.5;
        p->lag_zero_rad_s = 9.0 * M_PI;
        p->lag_pole_rad_s = M_PI;
        p->lowpass_hz = 75.0;
        p->lowpass_zeta = M_SQRT1_2;
        break;
    case DRTHS_DAMPER_SPENCER1997:
        /* Spencer et al. 1997, small damper: cm, N, V. */
        p->length_unit_m = 1e-2;
        p->force_unit_N = 1.0;
        p->c0_a = 21.0, p->c0_b = 3.50;
        p->c1_a = 283.0, p->c1_b = 2.95;
        p->alpha_a = 140.0, p->alpha_b = 695.0;
        p->gamma_a = 363.0, p->gamma_b = 0.0;
        p->beta_a = 363.0, p->beta_b = 0.0;
        p->k0 = 46.9, p->k1 = 5.00, p->x0 = 14.3;
        p->A = 301.0;
        p->n = 2.0;
        p->eta_per_s = 190.0;
        p->command_max = 2.25;
        break;
    case DRTHS_DAMPER_LINEAR_SPRING:
        p->stiffness_N_per_m = 1e6;
        break;
    case DRTHS_DAMPER_NONE:
    default:
        break;
    }
}

void drths_damper_params_scale(drths_damper_params_t *p, double alpha, double c0, double c1,
                               double gamma_beta, double A)
{
    if (p->model != DRTHS_DAMPER_PHILLIPS2013 && p->model != DRTHS_DAMPER_SPENCER1997)
        return;
    p->alpha_a *= alpha, p->alpha_b *= alpha;
    p->c0_a *= c0, p->c0_b *= c0;
    p->c1_a *= c1, p->c1_b *= c1;
    p->gamma_a *= gamma_beta, p->gamma_b *= gamma_beta;
    p->beta_a *= gamma_beta, p->beta_b *= gamma_beta;
    p->A *= A;
}

double drths_damper_command_max(const drths_damper_params_t *p)
{
    if (p->model == DRTHS_DAMPER_PHILLIPS2013 || p->model == DRTHS_DAMPER_SPENCER1997)
        return p->command_max;
    return 0.0;
}

/* Coefficients at one effective command, internal units. */
typedef struct {
    double alpha, c0, c1, gamma, beta;
} coef_t;

static double dep(const drths_damper_params_t *p, double a, double b, double c, double cmd)
{
    if (p->model == DRTHS_DAMPER_PHILLIPS2013)
        return b + (a - b) * exp(-c * cmd);
    return a + b * cmd;
}

static void coef_at(const drths_damper_params_t *p, double cmd, coef_t *k)
{
    k->alpha = dep(p, p->alpha_a, p->alpha_b, p->alpha_c, cmd);
    k->c0 = dep(p, p->c0_a, p->c0_b, p->c0_c, cmd);
    k->c1 = dep(p, p->c1_a, p->c1_b, p->c1_c, cmd);
    k->gamma = dep(p, p->gamma_a, p->gamma_b, p->gamma_c, cmd);
    k->beta = dep(p, p->beta_a, p->beta_b, p->beta_c, cmd);
}

static int finite_pos(double v)
{
    return isfinite(v) && v > 0.0;
}

static int validate(const drths_damper_params_t *p, drths_error_t *err)
{
    const struct {
        const char *name;
        double v;
    } all[] = {
        {"alpha_a", p->alpha_a}, {"alpha_b", p->alpha_b}, {"alpha_c", p->alpha_c},
        {"c0_a", p->c0_a},       {"c0_b", p->c0_b},       {"c0_c", p->c0_c},
        {"c1_a", p->c1_a},       {"c1_b", p->c1_b},       {"c1_c", p->c1_c},
        {"gamma_a", p->gamma_a}, {"gamma_b", p->gamma_b}, {"gamma_c", p->gamma_c},
        {"beta_a", p->beta_a},   {"beta_b", p->beta_b},   {"beta_c", p->beta_c},
        {"k0", p->k0},           {"k1", p->k1},           {"x0", p->x0},
        {"A", p->A},             {"n", p->n},             {"command_max", p->command_max},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (!isfinite(all[i].v))
            return drths_error_set(err, -EINVAL, "damper.%s: must be finite (got %g)", all[i].name,
                                   all[i].v);
    if (!finite_pos(p->length_unit_m))
        return drths_error_set(err, -EINVAL, "damper.length_unit_m: must be > 0 (got %g)",
                               p->length_unit_m);
    if (!finite_pos(p->force_unit_N))
        return drths_error_set(err, -EINVAL, "damper.force_unit_N: must be > 0 (got %g)",
                               p->force_unit_N);
    if (!finite_pos(p->command_max))
        return drths_error_set(err, -EINVAL, "damper.command_max: must be > 0 (got %g)",
                               p->command_max);
    if (p->n < 1.0)
        return drths_error_set(err, -EINVAL, "damper.n: must be >= 1 (got %g)", p->n);
    if (p->A < 0.0)
        return drths_error_set(err, -EINVAL, "damper.A: must be >= 0 (got %g)", p->A);
    if (p->k0 < 0.0 || p->k1 < 0.0)
        return drths_error_set(err, -EINVAL, "damper.%s: must be >= 0 (got %g)",
                               p->k0 < 0.0 ? "k0" : "k1", p->k0 < 0.0 ? p->k0 : p->k1);
    /* The dependences are monotone in the command, so checking both ends covers the range. */
    const double ends[2] = {0.0, p->command_max};
    for (int e = 0; e < 2; e++) {
        coef_t k;
        coef_at(p, ends[e], &k);
        const char *at = e ? "at command_max" : "at command 0";
        if (!(k.c1 > 0.0))
            return drths_error_set(err, -EINVAL, "damper.c1_a/c1_b: c1 must be > 0 %s (got %g)", at,
                                   k.c1);
        if (k.c0 < 0.0)
            return drths_error_set(err, -EINVAL, "damper.c0_a/c0_b: c0 must be >= 0 %s (got %g)", at,
                                   k.c0);
        if (k.alpha < 0.0)
            return drths_error_set(err, -EINVAL,
                                   "damper.alpha_a/alpha_b: alpha must be >= 0 %s (got %g)", at,
                                   k.alpha);
        if (k.gamma < 0.0 || k.gamma + k.beta < 0.0)
            return drths_error_set(err, -EINVAL,
                                   "damper.gamma/beta: need gamma >= 0 and gamma + beta >= 0 %s "
                                   "(got %g, %g)",
                                   at, k.gamma, k.beta);
    }
    if (p->substeps < 0 || p->substeps > MAX_SUBSTEPS)
        return drths_error_set(err, -EINVAL, "damper.substeps: must be 0 (automatic) to %d (got %d)",
                               MAX_SUBSTEPS, p->substeps);
    if (p->substeps == 0 && !finite_pos(p->v_max_m_s))
        return drths_error_set(err, -EINVAL, "damper.v_max_m_s: must be > 0 (got %g)",
                               p->v_max_m_s);
    if (p->model == DRTHS_DAMPER_PHILLIPS2013) {
        if (!finite_pos(p->lag_zero_rad_s))
            return drths_error_set(err, -EINVAL, "damper.lag_zero_rad_s: must be > 0 (got %g)",
                                   p->lag_zero_rad_s);
        if (!finite_pos(p->lag_pole_rad_s))
            return drths_error_set(err, -EINVAL, "damper.lag_pole_rad_s: must be > 0 (got %g)",
                                   p->lag_pole_rad_s);
        if (!finite_pos(p->lowpass_hz))
            return drths_error_set(err, -EINVAL, "damper.lowpass_hz: must be > 0 (got %g)",
                                   p->lowpass_hz);
        if (!finite_pos(p->lowpass_zeta))
            return drths_error_set(err, -EINVAL, "damper.lowpass_zeta: must be > 0 (got %g)",
                                   p->lowpass_zeta);
    } else if (!finite_pos(p->eta_per_s)) {
        return drths_error_set(err, -EINVAL, "damper.eta_per_s: must be > 0 (got %g)", p->eta_per_s);
    }
    return 0;
}

/* Largest |d z'/d z| + |d y'/d y| expected at relative velocity v (internal units/s) over the
 * command range: near saturation |z| = (A / (gamma + beta))^(1/n), the z equation's Jacobian is
 * n (gamma + beta)^(1/n) A^((n-1)/n) |v|; the coupling through y' adds A alpha / (c0 + c1), and
 * k0 / (c0 + c1) is the y equation's own rate. */
static double stiffness_rate(const drths_damper_params_t *p, double v)
{
    double lam = 0.0;
    for (int e = 0; e <= 10; e++) {
        coef_t k;
        coef_at(p, p->command_max * e / 10.0, &k);
        const double gb = k.gamma + k.beta;
        double l = 0.0;
        if (gb > 0.0)
            l = p->n * pow(gb, 1.0 / p->n) * pow(p->A, (p->n - 1.0) / p->n) * fabs(v);
        else
            l = (fabs(k.gamma) + fabs(k.beta)) * fabs(v); /* z stays small; crude but safe */
        l += (p->A * k.alpha + p->k0) / (k.c0 + k.c1);
        if (l > lam)
            lam = l;
    }
    return lam;
}

int drths_damper_init(drths_damper_t *d, const drths_damper_params_t *p, double dt_s,
                      drths_error_t *err)
{
    if (!(dt_s > 0.0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "damper.dt_s: must be > 0 (got %g)", dt_s);
    switch (p->model) {
    case DRTHS_DAMPER_NONE:
        break;
    case DRTHS_DAMPER_LINEAR_SPRING:
        if (!isfinite(p->stiffness_N_per_m))
            return drths_error_set(err, -EINVAL, "damper.stiffness_N_per_m: must be finite (got %g)",
                                   p->stiffness_N_per_m);
        break;
    case DRTHS_DAMPER_PHILLIPS2013:
    case DRTHS_DAMPER_SPENCER1997: {
        int rc = validate(p, err);
        if (rc < 0)
            return rc;
        break;
    }
    default:
        return drths_error_set(err, -EINVAL, "damper.model: unknown model %d", (int)p->model);
    }

    memset(d, 0, sizeof *d);
    d->p = *p;
    d->dt_s = dt_s;
    d->substeps = 1;
    if (p->model == DRTHS_DAMPER_PHILLIPS2013) {
        /* States [w, i, i']: w' = -pole w + i_d; the lag's output is
         * (pole/zero)(i_d + (zero - pole) w); the low-pass takes it to i. */
        const double z0 = p->lag_zero_rad_s, p0 = p->lag_pole_rad_s;
        const double wn = 2.0 * M_PI * p->lowpass_hz, g = p0 / z0;
        const double A[9] = {-p0, 0.0, 0.0, 0.0, 0.0, 1.0, wn * wn * g * (z0 - p0), -wn * wn,
                             -2.0 * p->lowpass_zeta * wn};
        const double B[3] = {1.0, 0.0, wn * wn * g};
        d->nf = 3;
        d->out = 1;
        if (drths_plant_zoh(3, A, B, dt_s, d->fad, d->fbd) < 0)
            return drths_error_set(err, -EINVAL, "damper: current dynamics not discretisable at dt %g s",
                                   dt_s);
    } else if (p->model == DRTHS_DAMPER_SPENCER1997) {
        d->nf = 1;
        d->out = 0;
        d->fad[0] = exp(-p->eta_per_s * dt_s);
        d->fbd[0] = 1.0 - d->fad[0];
    }
    if (p->model == DRTHS_DAMPER_PHILLIPS2013 || p->model == DRTHS_DAMPER_SPENCER1997) {
        if (p->substeps > 0) {
            d->substeps = p->substeps;
        } else {
            const double lam = stiffness_rate(p, p->v_max_m_s / p->length_unit_m);
            const double nsub = ceil(lam * dt_s / AUTO_LAMBDA_H);
            if (!(nsub <= MAX_SUBSTEPS))
                return drths_error_set(err, -EINVAL,
                                       "damper.v_max_m_s: %g m/s at dt %g s needs %g substeps "
                                       "(limit %d); lower v_max_m_s or dt",
                                       p->v_max_m_s, dt_s, nsub, MAX_SUBSTEPS);
            d->substeps = nsub < 1.0 ? 1 : (int)nsub;
        }
    }
    drths_damper_reset(d, 0.0, 0.0);
    return 0;
}

static double clamp_cmd(const drths_damper_t *d, double c)
{
    if (!(c > 0.0)) /* also NaN */
        return 0.0;
    return c > d->p.command_max ? d->p.command_max : c;
}

void drths_damper_reset(drths_damper_t *d, double x_m, double command)
{
    const drths_damper_params_t *p = &d->p;
    d->x_m = x_m;
    switch (p->model) {
    case DRTHS_DAMPER_PHILLIPS2013:
    case DRTHS_DAMPER_SPENCER1997: {
        const double c = clamp_cmd(d, command);
        if (p->model == DRTHS_DAMPER_PHILLIPS2013) {
            d->fs[0] = c / p->lag_pole_rad_s;
            d->fs[1] = c;
            d->fs[2] = 0.0;
        } else {
            d->fs[0] = c;
        }
        d->cmd_eff = c;
        const double x = x_m / p->length_unit_m;
        d->x_prev = x;
        d->v_prev = 0.0;
        d->y = x;
        d->z = 0.0;
        d->force_N = p->k1 * (x - p->x0) * p->force_unit_N;
        break;
    }
    case DRTHS_DAMPER_LINEAR_SPRING:
        d->force_N = p->stiffness_N_per_m * x_m;
        break;
    default:
        d->force_N = 0.0;
        break;
    }
}

/* Right-hand side of (y, z) at displacement x and velocity xd; returns y' and z'. */
static inline void rhs(const coef_t *k, const drths_damper_params_t *p, double inv_c01, double x,
                       double xd, double y, double z, double *yd, double *zd)
{
    const double ydot = (k->alpha * z + k->c0 * xd + p->k0 * (x - y)) * inv_c01;
    const double r = xd - ydot;
    const double az = fabs(z);
    double zn1, zn; /* |z|^(n-1), |z|^n */
    if (p->n == 2.0) {
        zn1 = az;
        zn = az * az;
    } else if (p->n == 1.0) {
        zn1 = 1.0;
        zn = az;
    } else {
        zn1 = pow(az, p->n - 1.0);
        zn = zn1 * az;
    }
    *yd = ydot;
    *zd = -k->gamma * fabs(r) * z * zn1 - k->beta * r * zn + p->A * r;
}

double drths_damper_step(drths_damper_t *d, double x_m, double v_m_s, double command)
{
    const drths_damper_params_t *p = &d->p;
    if (p->model == DRTHS_DAMPER_NONE)
        return d->force_N = 0.0;
    if (p->model == DRTHS_DAMPER_LINEAR_SPRING) {
        d->x_m = x_m;
        return d->force_N = p->stiffness_N_per_m * x_m;
    }

    /* Command dynamics, exact for a command held over the tick. */
    const double c = clamp_cmd(d, command);
    const double c_start = d->cmd_eff;
    double sn[3];
    for (int i = 0; i < d->nf; i++) {
        double s = d->fbd[i] * c;
        for (int j = 0; j < d->nf; j++)
            s += d->fad[i * d->nf + j] * d->fs[j];
        sn[i] = s;
    }
    for (int i = 0; i < d->nf; i++)
        d->fs[i] = sn[i];
    d->cmd_eff = d->fs[d->out];

    coef_t k;
    coef_at(p, 0.5 * (c_start + d->cmd_eff), &k);
    const double inv_c01 = 1.0 / (k.c0 + k.c1);

    const double x0 = d->x_prev, v0 = d->v_prev;
    const double x1 = x_m / p->length_unit_m, v1 = v_m_s / p->length_unit_m;
    const double dx = x1 - x0, dv = v1 - v0;
    const int ns = d->substeps;
    const double h = d->dt_s / ns, inv_ns = 1.0 / ns;
    double y = d->y, z = d->z;
    for (int s = 0; s < ns; s++) {
        const double fa = s * inv_ns, fm = (s + 0.5) * inv_ns, fb = (s + 1) * inv_ns;
        const double xa = x0 + fa * dx, va = v0 + fa * dv;
        const double xm = x0 + fm * dx, vm = v0 + fm * dv;
        const double xb = x0 + fb * dx, vb = v0 + fb * dv;
        double ky1, kz1, ky2, kz2, ky3, kz3, ky4, kz4;
        rhs(&k, p, inv_c01, xa, va, y, z, &ky1, &kz1);
        rhs(&k, p, inv_c01, xm, vm, y + 0.5 * h * ky1, z + 0.5 * h * kz1, &ky2, &kz2);
        rhs(&k, p, inv_c01, xm, vm, y + 0.5 * h * ky2, z + 0.5 * h * kz2, &ky3, &kz3);
        rhs(&k, p, inv_c01, xb, vb, y + h * ky3, z + h * kz3, &ky4, &kz4);
        y += h / 6.0 * (ky1 + 2.0 * ky2 + 2.0 * ky3 + ky4);
        z += h / 6.0 * (kz1 + 2.0 * kz2 + 2.0 * kz3 + kz4);
    }
    d->y = y;
    d->z = z;
    d->x_prev = x1;
    d->v_prev = v1;

    const double ydot = (k.alpha * z + k.c0 * v1 + p->k0 * (x1 - y)) * inv_c01;
    d->force_N = (k.c1 * ydot + p->k1 * (x1 - p->x0)) * p->force_unit_N;
    return d->force_N;
}

double drths_damper_force(const drths_damper_t *d)
{
    return d->force_N;
}

double drths_damper_z(const drths_damper_t *d)
{
    return d->z;
}

double drths_damper_y(const drths_damper_t *d)
{
    if (d->p.model == DRTHS_DAMPER_PHILLIPS2013 || d->p.model == DRTHS_DAMPER_SPENCER1997)
        return d->y * d->p.length_unit_m;
    return d->x_m;
}

double drths_damper_command_effective(const drths_damper_t *d)
{
    return d->cmd_eff;
}

int drths_damper_substeps(const drths_damper_t *d)
{
    return d->substeps;
}

void drths_damper_close(drths_damper_t *d)
{
    (void)d;
}
