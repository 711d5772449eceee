#include "site-numerical/warp.h"

#include <math.h>

/* The smoothstep h(u) = 10u³ - 15u⁴ + 6u⁵ (0 -> 1 with h' = h'' = 0 at both ends; largest h'
 * 1.875 at u = 1/2) and its integral H(u) = 2.5u⁴ - 3u⁵ + u⁶ (H(1) = 1/2). */
static double step5(double u)
{
    return u * u * u * (10.0 + u * (-15.0 + 6.0 * u));
}

static double step5_integral(double u)
{
    return u * u * u * u * (2.5 + u * (-3.0 + u));
}

#define STEP5_MAX_SLOPE 1.875

void drths_warp_plan(drths_warp_t *w, double t0, double n, double rho_max, double curv_max)
{
    const double N = fabs(n);
    w->t0 = t0;
    w->n = n;
    w->rho = w->m = w->p = 0.0;
    if (!(N > 0.0) || !(rho_max > 0.0) || !(curv_max > 0.0))
        return;
    /* A bell (no plateau): m ramps of rate rho = N / m, the largest D'' 1.875 N / m². */
    double m = sqrt(STEP5_MAX_SLOPE * N / curv_max);
    double rho = N / m, p = 0.0;
    if (rho > rho_max) {
        /* Ramps at the curvature bound up to rho_max, a plateau for the rest (p >= 0 because
         * the bell's peak was above rho_max). */
        rho = rho_max;
        m = STEP5_MAX_SLOPE * rho_max / curv_max;
        p = N / rho - m;
        if (p < 0.0) {
            p = 0.0;
            m = N / rho;
        }
    }
    w->rho = rho;
    w->m = m;
    w->p = p;
}

double drths_warp_end(const drths_warp_t *w)
{
    return w->t0 + 2.0 * w->m + w->p;
}

double drths_warp_delay(const drths_warp_t *w, double t, double *rate)
{
    const double sgn = w->n < 0.0 ? -1.0 : 1.0, tau = t - w->t0;
    double d, r = 0.0;
    if (w->m <= 0.0 || tau <= 0.0) {
        d = tau <= 0.0 ? 0.0 : w->n;
        if (rate)
            *rate = 0.0;
        return d;
    }
    const double m = w->m, p = w->p, rho = w->rho, N = fabs(w->n);
    if (tau < m) {
        d = rho * m * step5_integral(tau / m);
        r = rho * step5(tau / m);
    } else if (tau < m + p) {
        d = 0.5 * rho * m + rho * (tau - m);
        r = rho;
    } else if (tau < 2.0 * m + p) {
        const double u = (2.0 * m + p - tau) / m;
        d = N - rho * m * step5_integral(u);
        r = rho * step5(u);
    } else {
        d = N;
    }
    if (rate)
        *rate = sgn * r;
    return sgn * d;
}

double drths_warp_hermite(double x0, double v0, double x1, double v1, double h, double f,
                          double *vel)
{
    const double f2 = f * f, f3 = f2 * f;
    const double h00 = 2.0 * f3 - 3.0 * f2 + 1.0, h10 = f3 - 2.0 * f2 + f;
    const double h01 = -2.0 * f3 + 3.0 * f2, h11 = f3 - f2;
    if (vel) {
        const double d00 = 6.0 * f2 - 6.0 * f, d10 = 3.0 * f2 - 4.0 * f + 1.0;
        const double d11 = 3.0 * f2 - 2.0 * f;
        *vel = (d00 * (x0 - x1)) / h + d10 * v0 + d11 * v1;
    }
    return h00 * x0 + h10 * h * v0 + h01 * x1 + h11 * h * v1;
}
