#include "common/models/plant.h"

#include <errno.h>
#include <math.h>
#include <string.h>

const drths_plant_model_t DRTHS_PLANT_0A = {1.730e7, 182.7, 225.3, 9.499e4};
const drths_plant_model_t DRTHS_PLANT_2P5A = {1.613e7, 134.2, 324.6, 1.211e5};
const drths_plant_model_t DRTHS_PLANT_AVERAGE = {1.600e7, 151.7, 250.4, 1.061e5};

#define MAXA (DRTHS_ZOH_MAX_N + 1)

static void matmul(int m, const double *x, const double *y, double *out)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) {
            double s = 0.0;
            for (int k = 0; k < m; k++)
                s += x[i * m + k] * y[k * m + j];
            out[i * m + j] = s;
        }
}

/* Diagonal similarity D^-1 M D with powers of two (so it is exact), which equalises row and
 * column norms. The plant's companion form has entries from 1 to 1e7; balanced, its norm is of
 * the order of its eigenvalues, so the exponential needs few or no squarings and stays accurate.
 * This is the classic Parlett-Reinsch iteration (LAPACK dgebal without permutations). */
static void balance(int m, double *M, double *scale)
{
    const double radix = 2.0, sqrdx = 4.0;
    for (int i = 0; i < m; i++)
        scale[i] = 1.0;
    int done = 0;
    for (int iter = 0; !done && iter < 100; iter++) {
        done = 1;
        for (int i = 0; i < m; i++) {
            double r = 0.0, c = 0.0;
            for (int j = 0; j < m; j++)
                if (j != i) {
                    c += fabs(M[j * m + i]);
                    r += fabs(M[i * m + j]);
                }
            if (c == 0.0 || r == 0.0)
                continue;
            double g = r / radix, f = 1.0, s = c + r;
            while (c < g) {
                f *= radix;
                c *= sqrdx;
            }
            g = r * radix;
            while (c > g) {
                f /= radix;
                c /= sqrdx;
            }
            if ((c + r) / f < 0.95 * s) {
                done = 0;
                scale[i] *= f;
                for (int j = 0; j < m; j++)
                    M[i * m + j] /= f;
                for (int j = 0; j < m; j++)
                    M[j * m + i] *= f;
            }
        }
    }
}

/* exp(M) for a small m x m matrix, in place. */
static void expm(int m, double *M)
{
    double scale[MAXA];
    balance(m, M, scale);

    double norm = 0.0; /* infinity norm */
    for (int i = 0; i < m; i++) {
        double r = 0.0;
        for (int j = 0; j < m; j++)
            r += fabs(M[i * m + j]);
        if (r > norm)
            norm = r;
    }
    int sq = 0;
    while (norm > 0.5 && sq < 64) {
        norm *= 0.5;
        sq++;
    }
    const double f = ldexp(1.0, -sq);
    double X[MAXA * MAXA], E[MAXA * MAXA], T[MAXA * MAXA], U[MAXA * MAXA];
    for (int k = 0; k < m * m; k++)
        X[k] = M[k] * f;
    /* Taylor series: with ||X|| <= 0.5, 30 terms leave a remainder below 1e-40. */
    memset(E, 0, sizeof E);
    memset(T, 0, sizeof T);
    for (int i = 0; i < m; i++)
        E[i * m + i] = T[i * m + i] = 1.0;
    for (int k = 1; k <= 30; k++) {
        matmul(m, T, X, U);
        for (int q = 0; q < m * m; q++) {
            T[q] = U[q] / k;
            E[q] += T[q];
        }
    }
    for (int s = 0; s < sq; s++) {
        matmul(m, E, E, U);
        memcpy(E, U, sizeof(double) * (size_t)(m * m));
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++)
            M[i * m + j] = E[i * m + j] * scale[i] / scale[j];
}

int drths_plant_zoh(int n, const double *A, const double *B, double dt_s, double *Ad, double *Bd)
{
    if (n < 1 || n > DRTHS_ZOH_MAX_N || !(dt_s > 0.0) || !isfinite(dt_s))
        return -EINVAL;
    const int m = n + 1;
    double M[MAXA * MAXA];
    memset(M, 0, sizeof M);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            if (!isfinite(A[i * n + j]))
                return -EINVAL;
            M[i * m + j] = A[i * n + j] * dt_s;
        }
        if (!isfinite(B[i]))
            return -EINVAL;
        M[i * m + n] = B[i] * dt_s;
    }
    expm(m, M);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            Ad[i * n + j] = M[i * m + j];
        Bd[i] = M[i * m + n];
    }
    return 0;
}

static int check_model(const drths_plant_model_t *md, const char *name, drths_error_t *err)
{
    if (!md)
        return drths_error_set(err, -EINVAL, "plant.%s: model missing", name);
    if (!(md->K > 0.0) || !isfinite(md->K))
        return drths_error_set(err, -EINVAL, "plant.%s.K: must be > 0 (got %g)", name, md->K);
    if (!(md->p > 0.0) || !isfinite(md->p))
        return drths_error_set(err, -EINVAL, "plant.%s.p: must be > 0 (got %g)", name, md->p);
    if (!(md->a > 0.0) || !isfinite(md->a))
        return drths_error_set(err, -EINVAL, "plant.%s.a: must be > 0 (got %g)", name, md->a);
    if (!(md->b > 0.0) || !isfinite(md->b))
        return drths_error_set(err, -EINVAL, "plant.%s.b: must be > 0 (got %g)", name, md->b);
    return 0;
}

static int discretise(const drths_plant_model_t *md, double dt_s, double *ad, double *bd)
{
    /* States [y, y', y'']; y''' = -p b y - (b + a p) y' - (a + p) y'' + K u. */
    const double A[9] = {0.0, 1.0, 0.0, 0.0, 0.0, 1.0, -md->p * md->b, -(md->b + md->a * md->p),
                         -(md->a + md->p)};
    const double B[3] = {0.0, 0.0, md->K};
    return drths_plant_zoh(3, A, B, dt_s, ad, bd);
}

int drths_plant_init(drths_plant_t *pl, const drths_plant_model_t *lo, const drths_plant_model_t *hi,
                     double i_hi_A, double dt_s, drths_error_t *err)
{
    int rc;
    if ((rc = check_model(lo, "lo", err)) < 0 || (rc = check_model(hi, "hi", err)) < 0)
        return rc;
    if (!(i_hi_A > 0.0) || !isfinite(i_hi_A))
        return drths_error_set(err, -EINVAL, "plant.i_hi_A: must be > 0 (got %g)", i_hi_A);
    if (!(dt_s > 0.0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "plant.dt_s: must be > 0 (got %g)", dt_s);
    memset(pl, 0, sizeof *pl);
    if (discretise(lo, dt_s, pl->ad_lo, pl->bd_lo) < 0 || discretise(hi, dt_s, pl->ad_hi, pl->bd_hi) < 0)
        return drths_error_set(err, -EINVAL, "plant: discretisation failed at dt %g s", dt_s);
    pl->i_hi_A = i_hi_A;
    pl->dt_s = dt_s;
    return 0;
}

void drths_plant_reset(drths_plant_t *pl, double y_m)
{
    pl->x[0] = y_m;
    pl->x[1] = 0.0;
    pl->x[2] = 0.0;
}

double drths_plant_step(drths_plant_t *pl, double u_m, double current_A, double *vel_m_s)
{
    double w = current_A / pl->i_hi_A;
    if (!(w > 0.0)) /* also catches NaN: fall back to the 0 A model */
        w = 0.0;
    else if (w > 1.0)
        w = 1.0;
    const double v = 1.0 - w;
    double xn[3];
    for (int i = 0; i < 3; i++) {
        double s = (v * pl->bd_lo[i] + w * pl->bd_hi[i]) * u_m;
        for (int j = 0; j < 3; j++)
            s += (v * pl->ad_lo[i * 3 + j] + w * pl->ad_hi[i * 3 + j]) * pl->x[j];
        xn[i] = s;
    }
    memcpy(pl->x, xn, sizeof xn);
    if (vel_m_s)
        *vel_m_s = xn[1];
    return xn[0];
}

int drths_plant_model_scale(const drths_plant_model_t *m, const drths_plant_scale_t *sc,
                            drths_plant_model_t *out, drths_error_t *err)
{
    const double v[4] = {sc->gain, sc->bandwidth, sc->real_pole, sc->complex_pole};
    const char *names[4] = {"gain", "bandwidth", "real_pole", "complex_pole"};
    for (int i = 0; i < 4; i++)
        if (!(v[i] > 0.0) || !isfinite(v[i]))
            return drths_error_set(err, -EINVAL, "plant_scale.%s: must be > 0 (got %g)", names[i],
                                   v[i]);
    const double fr = sc->bandwidth * sc->real_pole, fc = sc->bandwidth * sc->complex_pole;
    drths_plant_model_t r;
    r.p = m->p * fr;
    r.a = m->a * fc;
    r.b = m->b * fc * fc;
    r.K = sc->gain * m->K * fr * fc * fc;
    *out = r;
    return 0;
}

double drths_plant_dc_gain(const drths_plant_model_t *m)
{
    return m->K / (m->p * m->b);
}

void drths_plant_close(drths_plant_t *pl)
{
    (void)pl;
}
