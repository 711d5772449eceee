/* Third-order Lagrange extrapolation from the last four equally spaced samples.
 *
 * Used to conceal a command that has not arrived by its tick (the PreCor-D predictor of the
 * LNEC-HS platform): the cubic through the last four applied commands x(n-3), x(n-2), x(n-1),
 * x(n) is evaluated k ticks ahead. For k = 1 this is
 *     x(n+1) = 4·x(n) - 6·x(n-1) + 4·x(n-2) - x(n-3),
 * and in general, with the newest sample at t = 0 and the others at t = -1, -2, -3,
 *     w0 =  (k+1)(k+2)(k+3)/6   for x(n)
 *     w1 = -k(k+2)(k+3)/2       for x(n-1)
 *     w2 =  k(k+1)(k+3)/2       for x(n-2)
 *     w3 = -k(k+1)(k+2)/6       for x(n-3).
 * It is exact for any cubic in time. The weights grow like k^3, so the error of a non-cubic
 * signal (and of noise) grows fast with k: that is why consecutive concealed ticks are limited
 * before the actuator goes to HOLD.
 *
 * Sample order in every array here: oldest first, x[0] = x(n-3) ... x[3] = x(n).
 * Header-only, no state, no allocation: every function is RT-safe.
 */
#ifndef DRTHS_LAGRANGE_H
#define DRTHS_LAGRANGE_H

#include <stddef.h>

/* Weights for extrapolating k sample intervals past the newest sample (k may be fractional;
 * k = 0 returns the newest sample). w[] is in the oldest-first order of the samples. RT-safe. */
static inline void drths_lagrange3_weights(double k, double w[4])
{
    w[3] = (k + 1.0) * (k + 2.0) * (k + 3.0) / 6.0;
    w[2] = -k * (k + 2.0) * (k + 3.0) / 2.0;
    w[1] = k * (k + 1.0) * (k + 3.0) / 2.0;
    w[0] = -k * (k + 1.0) * (k + 2.0) / 6.0;
}

/* x(n+1) from x[0] = x(n-3) ... x[3] = x(n). RT-safe. */
static inline double drths_lagrange3_next(const double x[4])
{
    return 4.0 * x[3] - 6.0 * x[2] + 4.0 * x[1] - x[0];
}

/* x(n+k) from x[0] = x(n-3) ... x[3] = x(n). RT-safe. */
static inline double drths_lagrange3_extrapolate(const double x[4], double k)
{
    double w[4];
    drths_lagrange3_weights(k, w);
    return w[0] * x[0] + w[1] * x[1] + w[2] * x[2] + w[3] * x[3];
}

/* Extrapolates n values at once (all channels and fields of a sample record): hist[j] points to
 * the j-th oldest record of the last four (hist[3] is the newest), each n doubles; out gets the
 * n extrapolated values and may alias none of them. RT-safe. */
static inline void drths_lagrange3_extrapolate_n(const double *const hist[4], double k,
                                                 double *out, size_t n)
{
    double w[4];
    drths_lagrange3_weights(k, w);
    for (size_t i = 0; i < n; i++)
        out[i] = w[0] * hist[0][i] + w[1] * hist[1][i] + w[2] * hist[2][i] + w[3] * hist[3][i];
}

#endif
