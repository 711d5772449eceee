#include "common/integrator.h"

#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* y = A x for an n*n row-major A. */
static void matvec(const double *A, const double *x, double *y, int n)
{
    for (int i = 0; i < n; i++) {
        const double *row = A + (size_t)i * (size_t)n;
        double acc = 0.0;
        for (int j = 0; j < n; j++)
            acc += row[j] * x[j];
        y[i] = acc;
    }
}

/* y -= A x. */
static void matvec_sub(const double *A, const double *x, double *y, int n)
{
    for (int i = 0; i < n; i++) {
        const double *row = A + (size_t)i * (size_t)n;
        double acc = 0.0;
        for (int j = 0; j < n; j++)
            acc += row[j] * x[j];
        y[i] -= acc;
    }
}

/* Solves A X = Bm for X (n x nrhs, row-major, overwrites Bm); A (n*n) is overwritten by its LU
 * factors. what names the matrix for the message. */
static int solve(double *A, double *Bm, int n, int nrhs, const char *what, drths_error_t *err)
{
    lapack_int *ipiv = malloc((size_t)n * sizeof(lapack_int));
    if (!ipiv)
        return drths_error_set(err, -ENOMEM, "integrator: out of memory");
    lapack_int info = LAPACKE_dgesv(LAPACK_ROW_MAJOR, n, nrhs, A, n, ipiv, Bm, nrhs);
    free(ipiv);
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
        return drths_error_set(err, -ENOMEM, "integrator: out of memory in LAPACKE_dgesv");
    if (info > 0)
        return drths_error_set(err, -EINVAL, "integrator: %s is singular (pivot %d is zero)", what,
                               (int)info);
    if (info < 0)
        return drths_error_set(err, -EINVAL, "integrator: LAPACKE_dgesv argument %d invalid",
                               (int)-info);
    return 0;
}

/* Highest eigenvalue w^2 of K phi = w^2 M phi; fails if M is not positive definite. */
static int highest_w2(const drths_structure_t *s, double *w2_max, drths_error_t *err)
{
    int n = s->n;
    size_t nn = (size_t)n * (size_t)n;
    double *A = malloc(nn * sizeof(double));
    double *Bm = malloc(nn * sizeof(double));
    double *w = malloc((size_t)n * sizeof(double));
    int rc = 0;
    if (!A || !Bm || !w) {
        rc = drths_error_set(err, -ENOMEM, "integrator: out of memory");
    } else {
        memcpy(A, s->K, nn * sizeof(double));
        memcpy(Bm, s->M, nn * sizeof(double));
        lapack_int info = LAPACKE_dsygv(LAPACK_ROW_MAJOR, 1, 'N', 'U', n, A, n, Bm, n, w);
        if (info > n)
            rc = drths_error_set(err, -EINVAL, "integrator: structure.M is not positive definite");
        else if (info != 0)
            rc = drths_error_set(err, -EINVAL,
                                 "integrator: eigenvalues of the structure failed (LAPACKE_dsygv "
                                 "info %d)",
                                 (int)info);
        else
            *w2_max = w[n - 1];
    }
    free(A), free(Bm), free(w);
    return rc;
}

/* Fills P, Q, R, e (and B for Chen-Ricles) and Minv, Cm, Km. T and Rhs are scratch blocks of
 * n*n and n*(3n+1). */
static int precompute(drths_integrator_t *it, const drths_structure_t *s, double *T, double *Rhs,
                      drths_error_t *err)
{
    int n = it->n;
    size_t nn = (size_t)n * (size_t)n;
    int m = 3 * n + 1;
    double dt = it->dt;
    int rc;

    memcpy(it->Cm, s->C, nn * sizeof(double));
    memcpy(it->Km, s->K, nn * sizeof(double));

    /* M^-1: M X = I. */
    memcpy(T, s->M, nn * sizeof(double));
    memset(it->Minv, 0, nn * sizeof(double));
    for (int i = 0; i < n; i++)
        it->Minv[(size_t)i * n + i] = 1.0;
    rc = solve(T, it->Minv, n, n, "the mass matrix M", err);
    if (rc)
        return rc;

    /* Equilibrium operator D X = [M iota | I | C | K], with D = M for Chen-Ricles (a(k+1) from the
     * full equilibrium) and D = M + dt/2 C for central difference (v(k+1) implicit in a(k+1)). */
    for (int i = 0; i < n; i++) {
        double *row = Rhs + (size_t)i * m;
        double miota = 0.0;
        for (int j = 0; j < n; j++) {
            miota += s->M[(size_t)i * n + j];
            row[1 + j] = i == j ? 1.0 : 0.0;
            row[1 + n + j] = s->C[(size_t)i * n + j];
            row[1 + 2 * n + j] = s->K[(size_t)i * n + j];
        }
        row[0] = miota;
    }
    for (size_t q = 0; q < nn; q++)
        T[q] = it->kind == DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE ? s->M[q] + 0.5 * dt * s->C[q]
                                                               : s->M[q];
    rc = solve(T, Rhs, n, m, it->kind == DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE ? "M + dt/2 C" : "M",
               err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        const double *row = Rhs + (size_t)i * m;
        it->e[i] = row[0];
        for (int j = 0; j < n; j++) {
            it->P[(size_t)i * n + j] = row[1 + j];
            it->Q[(size_t)i * n + j] = row[1 + n + j];
            it->R[(size_t)i * n + j] = row[1 + 2 * n + j];
        }
    }
    if (it->kind == DRTHS_INTEGRATOR_CHEN_RICLES) {
        /* M^-1 (M iota) is iota in exact arithmetic; use it exactly. */
        for (int i = 0; i < n; i++)
            it->e[i] = 1.0;
        /* B = dt alpha = dt 4 (4M + 2 dt C + dt^2 K)^-1 M. */
        for (size_t q = 0; q < nn; q++) {
            T[q] = 4.0 * s->M[q] + 2.0 * dt * s->C[q] + dt * dt * s->K[q];
            it->B[q] = 4.0 * dt * s->M[q];
        }
        rc = solve(T, it->B, n, n, "4M + 2 dt C + dt^2 K", err);
        if (rc)
            return rc;
    }
    return 0;
}

int drths_integrator_init(drths_integrator_t *it, const drths_structure_t *s,
                          drths_integrator_kind_t kind, double dt_s, drths_error_t *err)
{
    memset(it, 0, sizeof *it);
    if (!s || s->n < 1 || !s->M || !s->C || !s->K)
        return drths_error_set(err, -EINVAL, "integrator: structure not initialised");
    if (kind != DRTHS_INTEGRATOR_CHEN_RICLES && kind != DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE)
        return drths_error_set(err, -EINVAL, "integrator: unknown kind %d", (int)kind);
    if (!(dt_s > 0.0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "integrator: dt must be > 0 and finite (got %g s)",
                               dt_s);
    int n = s->n;
    double w2 = 0.0;
    int rc = highest_w2(s, &w2, err);
    if (rc)
        return rc;
    double w_max = w2 > 0.0 ? sqrt(w2) : 0.0;
    if (kind == DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE && w_max * dt_s > 2.0)
        return drths_error_set(err, -EINVAL,
                               "central difference is unstable at dt = %g s: highest mode %.2f Hz "
                               "needs dt <= %.6g s; use chen-ricles or a higher rate_hz",
                               dt_s, w_max / (2.0 * M_PI), 2.0 / w_max);

    size_t nn = (size_t)n * (size_t)n;
    size_t m = 3 * (size_t)n + 1;
    /* One resident block: 11 vectors (x v a x1 v1 vq w ai ai_prev work e) and 7 matrices (B P Q
     * R Minv Cm Km). The LAPACK scratch (T: n*n, Rhs: n*m) is separate and freed at the end of
     * init. */
    double *mem = calloc(11 * (size_t)n + 7 * nn, sizeof(double));
    double *scratch = malloc((nn + (size_t)n * m) * sizeof(double));
    if (!mem || !scratch) {
        free(mem), free(scratch);
        return drths_error_set(err, -ENOMEM, "integrator: out of memory for %d degrees of freedom",
                               n);
    }
    double *p = mem;
    it->x = p, p += n;
    it->v = p, p += n;
    it->a = p, p += n;
    it->x1 = p, p += n;
    it->v1 = p, p += n;
    it->vq = p, p += n;
    it->w = p, p += n;
    it->ai = p, p += n;
    it->ai_prev = p, p += n;
    it->work = p, p += n;
    it->e = p, p += n;
    it->B = p, p += nn;
    it->P = p, p += nn;
    it->Q = p, p += nn;
    it->R = p, p += nn;
    it->Minv = p, p += nn;
    it->Cm = p, p += nn;
    it->Km = p, p += nn;
    it->mem = mem;
    it->kind = kind;
    it->n = n;
    it->dt = dt_s;
    it->w_max_rad_s = w_max;

    rc = precompute(it, s, scratch, scratch + nn, err);
    free(scratch);
    if (rc) {
        drths_integrator_close(it);
        return rc;
    }
    drths_integrator_reset(it, NULL, NULL, 0.0, NULL);
    return 0;
}

void drths_integrator_reset(drths_integrator_t *it, const double *x0, const double *v0, double ag0,
                            const double *f0)
{
    int n = it->n;
    for (int i = 0; i < n; i++) {
        it->x[i] = x0 ? x0[i] : 0.0;
        it->v[i] = v0 ? v0[i] : 0.0;
    }
    /* work = -f0 - C v0 - K x0; a0 = -iota ag0 + M^-1 work. */
    matvec(it->Cm, it->v, it->work, n);
    for (int i = 0; i < n; i++)
        it->work[i] = -it->work[i] - (f0 ? f0[i] : 0.0);
    matvec_sub(it->Km, it->x, it->work, n);
    matvec(it->Minv, it->work, it->a, n);
    for (int i = 0; i < n; i++) {
        it->a[i] -= ag0;
        it->ai[i] = it->a[i];
        it->ai_prev[i] = it->a[i];
        /* Chen-Ricles' w is the mean velocity over the step before: half a step behind. Using
         * a0 instead of the recurrence's own a_cr(0) changes x(1) only at O(dt^3). */
        it->w[i] = it->v[i] - 0.5 * it->dt * it->a[i];
    }
    it->k = 0;
    it->predicted = 0;
}

void drths_integrator_predict(drths_integrator_t *it, double *x_next, double *v_next)
{
    int n = it->n;
    double dt = it->dt;
    if (it->kind == DRTHS_INTEGRATOR_CHEN_RICLES) {
        /* w1 = w + dt alpha a_cr; x1 = x + dt w + dt^2 alpha a_cr = x + dt w1 (alpha1 = alpha2). */
        matvec(it->B, it->ai, it->vq, n);
        for (int i = 0; i < n; i++) {
            it->vq[i] += it->w[i];
            it->x1[i] = it->x[i] + dt * it->vq[i];
        }
    } else {
        for (int i = 0; i < n; i++) {
            it->x1[i] = it->x[i] + dt * it->v[i] + 0.5 * dt * dt * it->a[i];
            it->vq[i] = it->v[i] + 0.5 * dt * it->a[i];
        }
    }
    /* Both: v(k+1) = vq + dt/2 ai(k+1); ai(k+1) is extrapolated from ai(k) and ai(k-1). */
    for (int i = 0; i < n; i++)
        it->v1[i] = it->vq[i] + 0.5 * dt * (2.0 * it->ai[i] - it->ai_prev[i]);
    it->predicted = 1;
    if (x_next)
        memcpy(x_next, it->x1, (size_t)n * sizeof(double));
    if (v_next)
        memcpy(v_next, it->v1, (size_t)n * sizeof(double));
}

void drths_integrator_correct(drths_integrator_t *it, double ag_next, const double *f_spec_next)
{
    int n = it->n;
    if (!it->predicted)
        drths_integrator_predict(it, NULL, NULL);
    int cr = it->kind == DRTHS_INTEGRATOR_CHEN_RICLES;
    double half_dt = 0.5 * it->dt;
    /* ai_prev <- ai(k) by swapping the two arrays, then ai(k+1) = -e ag - P f - Q vq - R x1. */
    double *an = it->ai_prev;
    it->ai_prev = it->ai;
    it->ai = an;
    matvec(it->R, it->x1, an, n);
    for (int i = 0; i < n; i++)
        an[i] = -an[i] - it->e[i] * ag_next;
    matvec_sub(it->Q, it->vq, an, n);
    if (f_spec_next)
        matvec_sub(it->P, f_spec_next, an, n);
    for (int i = 0; i < n; i++) {
        it->x[i] = it->x1[i];
        it->v[i] = it->vq[i] + half_dt * an[i];
    }
    if (cr) {
        /* Reported a: equilibrium with the reported v = w + dt/2 a_cr instead of w, i.e.
         * a = a_cr - M^-1 C (dt/2 a_cr); Q is M^-1 C for Chen-Ricles. */
        memcpy(it->w, it->vq, (size_t)n * sizeof(double));
        matvec(it->Q, an, it->work, n);
        for (int i = 0; i < n; i++)
            it->a[i] = an[i] - half_dt * it->work[i];
    } else {
        memcpy(it->a, an, (size_t)n * sizeof(double));
    }
    it->k++;
    it->predicted = 0;
}

void drths_integrator_close(drths_integrator_t *it)
{
    free(it->mem);
    memset(it, 0, sizeof *it);
}
