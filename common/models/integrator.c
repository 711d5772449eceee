#include "common/models/integrator.h"

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

static int cd_unstable(double w_max, double dt_s, drths_error_t *err)
{
    return drths_error_set(err, -EINVAL,
                           "central difference is unstable at dt = %g s: highest mode %.2f Hz "
                           "needs dt <= %.6g s; use chen-ricles or a higher rate_hz",
                           dt_s, w_max / (2.0 * M_PI), 2.0 / w_max);
}

/* The full form: every matrix n*n. */
static int init_full(drths_integrator_t *it, const drths_structure_t *s,
                     drths_integrator_kind_t kind, double dt_s, drths_error_t *err)
{
    int n = s->n;
    double w2 = 0.0;
    int rc = highest_w2(s, &w2, err);
    if (rc)
        return rc;
    double w_max = w2 > 0.0 ? sqrt(w2) : 0.0;
    if (kind == DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE && w_max * dt_s > 2.0)
        return cd_unstable(w_max, dt_s, err);

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
    it->form = DRTHS_INTEGRATOR_FORM_FULL;
    it->m = n;
    it->n = n;
    it->dt = dt_s;
    it->w_max_rad_s = w_max;

    rc = precompute(it, s, scratch, scratch + nn, err);
    free(scratch);
    if (rc) {
        drths_integrator_close(it);
        return rc;
    }
    return 0;
}

/* Returned by init_modal when the damping is not classical and the caller let the form be
 * chosen automatically: the full form is used instead. */
#define NOT_CLASSICAL 1

/* The modal form: eigenvectors (LAPACKE_dsygv), the classical-damping check, per-mode
 * coefficients. strict: non-classical damping is an error (else NOT_CLASSICAL). */
static int init_modal(drths_integrator_t *it, const drths_structure_t *s,
                      drths_integrator_kind_t kind, double dt_s, int modes, int strict,
                      drths_error_t *err)
{
    int n = s->n, m = modes > 0 ? modes : n;
    size_t nn = (size_t)n * (size_t)n, nm = (size_t)n * (size_t)m;
    double *A = malloc(nn * sizeof(double));
    double *Bm = malloc(nn * sizeof(double));
    double *w2 = malloc((size_t)n * sizeof(double));
    double *cphi = malloc(nm * sizeof(double));
    int rc = 0;
    if (!A || !Bm || !w2 || !cphi) {
        rc = drths_error_set(err, -ENOMEM, "integrator: out of memory for %d degrees of freedom",
                             n);
        goto out;
    }
    memcpy(A, s->K, nn * sizeof(double));
    memcpy(Bm, s->M, nn * sizeof(double));
    lapack_int info = LAPACKE_dsygv(LAPACK_ROW_MAJOR, 1, 'V', 'U', n, A, n, Bm, n, w2);
    if (info > n) {
        rc = drths_error_set(err, -EINVAL, "integrator: structure.M is not positive definite");
        goto out;
    } else if (info != 0) {
        rc = drths_error_set(err, -EINVAL,
                             "integrator: modes of the structure failed (LAPACKE_dsygv info %d)",
                             (int)info);
        goto out;
    }
    double w_max = w2[n - 1] > 0.0 ? sqrt(w2[n - 1]) : 0.0;
    if (kind == DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE && w_max * dt_s > 2.0) {
        rc = cd_unstable(w_max, dt_s, err);
        goto out;
    }

    /* Physical vectors as in the full form (their matrices stay NULL), then the modal block:
     * phi (n*m), phitm (m*n), 19 vectors of m. */
    it->mem = calloc(11 * (size_t)n, sizeof(double));
    it->mmem = calloc(2 * nm + 19 * (size_t)m, sizeof(double));
    it->watch = malloc((size_t)n * sizeof(int));
    if (!it->mem || !it->mmem || !it->watch) {
        rc = drths_error_set(err, -ENOMEM, "integrator: out of memory for %d degrees of freedom",
                             n);
        goto out;
    }
    double *p = it->mem;
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
    p = it->mmem;
    it->phi = p, p += nm;
    it->phitm = p, p += nm;
    double **vec[] = {&it->mb, &it->me, &it->mp, &it->mq, &it->mr, &it->mc, &it->qx, &it->qv,
                      &it->qa, &it->qx1, &it->qv1, &it->qvq, &it->qw, &it->qai, &it->qai_prev,
                      &it->qan, &it->qf, &it->mw2, &it->mg};
    for (size_t q = 0; q < sizeof vec / sizeof vec[0]; q++)
        *vec[q] = p, p += m;
    for (int i = 0; i < n; i++)
        it->watch[i] = i;
    it->nwatch = n;
    it->kind = kind;
    it->form = DRTHS_INTEGRATOR_FORM_MODAL;
    it->m = m;
    it->n = n;
    it->dt = dt_s;
    it->w_max_rad_s = w_max;

    /* dsygv's eigenvectors are mass-normalised, in ascending frequency: keep the first m. */
    for (int i = 0; i < n; i++)
        memcpy(it->phi + (size_t)i * m, A + (size_t)i * n, (size_t)m * sizeof(double));
    /* phitm = Phi^T M (row j += Phi[k][j] M[k][:]), C Phi (row i += C[i][k] Phi[k][:]). */
    for (int k = 0; k < n; k++)
        for (int j = 0; j < m; j++) {
            double f = it->phi[(size_t)k * m + j];
            const double *mrow = s->M + (size_t)k * n;
            double *dst = it->phitm + (size_t)j * n;
            for (int i = 0; i < n; i++)
                dst[i] += f * mrow[i];
        }
    memset(cphi, 0, nm * sizeof(double));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            double c = s->C[(size_t)i * n + k];
            if (c == 0.0)
                continue;
            const double *prow = it->phi + (size_t)k * m;
            double *dst = cphi + (size_t)i * m;
            for (int j = 0; j < m; j++)
                dst[j] += c * prow[j];
        }
    /* Classical damping: C phi_j = c_j M phi_j, with M phi_j = (Phi^T M)^T row j. */
    double scale = 0.0;
    for (size_t q = 0; q < nm; q++)
        scale = fmax(scale, fabs(cphi[q]));
    for (int j = 0; j < m; j++) {
        double c = 0.0, res = 0.0;
        for (int i = 0; i < n; i++)
            c += it->phi[(size_t)i * m + j] * cphi[(size_t)i * m + j];
        for (int i = 0; i < n; i++)
            res = fmax(res, fabs(cphi[(size_t)i * m + j] - c * it->phitm[(size_t)j * n + i]));
        if (res > DRTHS_INTEGRATOR_CLASSICAL_TOL * scale) {
            rc = strict ? drths_error_set(err, -EINVAL,
                                          "structure.damping: not classical (mode %d couples to "
                                          "the others: |C phi - c M phi| = %.3g of %.3g); the "
                                          "modal form needs classical damping, use the full form",
                                          j + 1, res, scale)
                        : NOT_CLASSICAL;
            goto out;
        }
        it->mc[j] = c;
    }
    for (int j = 0; j < m; j++) {
        double gam = 0.0, c = it->mc[j], wsq = w2[j];
        for (int i = 0; i < n; i++)
            gam += it->phitm[(size_t)j * n + i];
        /* D = M (Chen-Ricles) or M + dt/2 C (central difference), diagonal in the modes. */
        double d = kind == DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE ? 1.0 + 0.5 * dt_s * c : 1.0;
        it->mw2[j] = wsq;
        it->mg[j] = gam;
        it->me[j] = gam / d;
        it->mp[j] = 1.0 / d;
        it->mq[j] = c / d;
        it->mr[j] = wsq / d;
        it->mb[j] = 4.0 * dt_s / (4.0 + 2.0 * dt_s * c + dt_s * dt_s * wsq);
    }
out:
    free(A), free(Bm), free(w2), free(cphi);
    if (rc)
        drths_integrator_close(it);
    return rc;
}

int drths_integrator_init(drths_integrator_t *it, const drths_structure_t *s,
                          drths_integrator_kind_t kind, double dt_s, drths_error_t *err)
{
    return drths_integrator_init_opts(it, s, kind, dt_s, NULL, err);
}

int drths_integrator_init_opts(drths_integrator_t *it, const drths_structure_t *s,
                               drths_integrator_kind_t kind, double dt_s,
                               const drths_integrator_options_t *o, drths_error_t *err)
{
    memset(it, 0, sizeof *it);
    if (!s || s->n < 1 || !s->M || !s->C || !s->K)
        return drths_error_set(err, -EINVAL, "integrator: structure not initialised");
    if (kind != DRTHS_INTEGRATOR_CHEN_RICLES && kind != DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE)
        return drths_error_set(err, -EINVAL, "integrator: unknown kind %d", (int)kind);
    if (!(dt_s > 0.0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "integrator: dt must be > 0 and finite (got %g s)",
                               dt_s);
    drths_integrator_form_t form = o ? o->form : DRTHS_INTEGRATOR_FORM_AUTO;
    int modes = o ? o->modes : 0;
    if (form != DRTHS_INTEGRATOR_FORM_AUTO && form != DRTHS_INTEGRATOR_FORM_FULL &&
        form != DRTHS_INTEGRATOR_FORM_MODAL)
        return drths_error_set(err, -EINVAL, "integrator: unknown form %d", (int)form);
    if (modes < 0 || modes > s->n)
        return drths_error_set(err, -EINVAL,
                               "integrator: modes must be 0 (all) .. %d (got %d)", s->n, modes);
    int rc;
    if (form == DRTHS_INTEGRATOR_FORM_MODAL ||
        (form == DRTHS_INTEGRATOR_FORM_AUTO && s->n >= DRTHS_INTEGRATOR_MODAL_MIN_DOF)) {
        rc = init_modal(it, s, kind, dt_s, modes, form == DRTHS_INTEGRATOR_FORM_MODAL, err);
        if (rc == NOT_CLASSICAL)
            rc = init_full(it, s, kind, dt_s, err);
    } else {
        rc = init_full(it, s, kind, dt_s, err);
    }
    if (rc)
        return rc;
    drths_integrator_reset(it, NULL, NULL, 0.0, NULL);
    return 0;
}

const char *drths_integrator_form_name(drths_integrator_form_t f)
{
    switch (f) {
    case DRTHS_INTEGRATOR_FORM_AUTO:
        return "auto";
    case DRTHS_INTEGRATOR_FORM_FULL:
        return "full";
    case DRTHS_INTEGRATOR_FORM_MODAL:
        return "modal";
    }
    return "?";
}

int drths_integrator_watch(drths_integrator_t *it, const int *dofs, int ndofs)
{
    if (ndofs < 1 || ndofs > it->n)
        return -EINVAL;
    for (int q = 0; q < ndofs; q++)
        if (dofs[q] < 0 || dofs[q] >= it->n)
            return -EINVAL;
    if (it->form != DRTHS_INTEGRATOR_FORM_MODAL)
        return 0;
    memcpy(it->watch, dofs, (size_t)ndofs * sizeof(int));
    it->nwatch = ndofs;
    return 0;
}

/* Physical value at DOF i of the modal vector q: row i of phi times q. */
static inline double at_dof(const drths_integrator_t *it, int i, const double *q)
{
    const double *row = it->phi + (size_t)i * (size_t)it->m;
    double acc = 0.0;
    for (int j = 0; j < it->m; j++)
        acc += row[j] * q[j];
    return acc;
}

void drths_integrator_sync(drths_integrator_t *it)
{
    if (it->form != DRTHS_INTEGRATOR_FORM_MODAL)
        return;
    for (int i = 0; i < it->n; i++) {
        it->x[i] = at_dof(it, i, it->qx);
        it->v[i] = at_dof(it, i, it->qv);
        it->a[i] = at_dof(it, i, it->qa);
        if (it->predicted) {
            it->x1[i] = at_dof(it, i, it->qx1);
            it->v1[i] = at_dof(it, i, it->qv1);
        }
    }
}

/* qf = Phi^T f over the nonzero entries of f (a damper gives one or two). */
static void project_force(drths_integrator_t *it, const double *f)
{
    int m = it->m;
    memset(it->qf, 0, (size_t)m * sizeof(double));
    if (!f)
        return;
    for (int i = 0; i < it->n; i++) {
        if (f[i] == 0.0)
            continue;
        const double *row = it->phi + (size_t)i * (size_t)m;
        for (int j = 0; j < m; j++)
            it->qf[j] += row[j] * f[i];
    }
}

static void reset_modal(drths_integrator_t *it, const double *x0, const double *v0, double ag0,
                        const double *f0)
{
    int n = it->n, m = it->m;
    for (int j = 0; j < m; j++) {
        const double *row = it->phitm + (size_t)j * n;
        double qx = 0.0, qv = 0.0;
        for (int i = 0; i < n; i++) {
            qx += row[i] * (x0 ? x0[i] : 0.0);
            qv += row[i] * (v0 ? v0[i] : 0.0);
        }
        it->qx[j] = qx;
        it->qv[j] = qv;
    }
    project_force(it, f0);
    for (int j = 0; j < m; j++) {
        /* M a = -M iota ag - f - C v - K x in the modes (Phi^T M Phi = I). */
        double a = -it->mg[j] * ag0 - it->qf[j] - it->mc[j] * it->qv[j] - it->mw2[j] * it->qx[j];
        it->qa[j] = a;
        it->qai[j] = a;
        it->qai_prev[j] = a;
        it->qw[j] = it->qv[j] - 0.5 * it->dt * a;
    }
    it->k = 0;
    it->predicted = 0;
    drths_integrator_sync(it);
}

static void predict_modal(drths_integrator_t *it)
{
    int m = it->m;
    double dt = it->dt, half_dt = 0.5 * dt;
    if (it->kind == DRTHS_INTEGRATOR_CHEN_RICLES) {
        for (int j = 0; j < m; j++) {
            it->qvq[j] = it->qw[j] + it->mb[j] * it->qai[j];
            it->qx1[j] = it->qx[j] + dt * it->qvq[j];
        }
    } else {
        for (int j = 0; j < m; j++) {
            it->qx1[j] = it->qx[j] + dt * it->qv[j] + half_dt * dt * it->qa[j];
            it->qvq[j] = it->qv[j] + half_dt * it->qa[j];
        }
    }
    for (int j = 0; j < m; j++)
        it->qv1[j] = it->qvq[j] + half_dt * (2.0 * it->qai[j] - it->qai_prev[j]);
    for (int q = 0; q < it->nwatch; q++) {
        int i = it->watch[q];
        it->x1[i] = at_dof(it, i, it->qx1);
        it->v1[i] = at_dof(it, i, it->qv1);
    }
}

static void correct_modal(drths_integrator_t *it, double ag_next, const double *f)
{
    int m = it->m;
    double half_dt = 0.5 * it->dt;
    project_force(it, f);
    double *an = it->qai_prev;
    it->qai_prev = it->qai;
    it->qai = an;
    for (int j = 0; j < m; j++) {
        an[j] = -it->me[j] * ag_next - it->mp[j] * it->qf[j] - it->mq[j] * it->qvq[j] -
                it->mr[j] * it->qx1[j];
        it->qx[j] = it->qx1[j];
        it->qv[j] = it->qvq[j] + half_dt * an[j];
    }
    if (it->kind == DRTHS_INTEGRATOR_CHEN_RICLES) {
        for (int j = 0; j < m; j++) {
            it->qw[j] = it->qvq[j];
            it->qa[j] = an[j] - half_dt * it->mc[j] * an[j];
        }
    } else {
        memcpy(it->qa, an, (size_t)m * sizeof(double));
    }
    for (int q = 0; q < it->nwatch; q++) {
        int i = it->watch[q];
        it->x[i] = it->x1[i];
        it->v[i] = at_dof(it, i, it->qv);
        it->a[i] = at_dof(it, i, it->qa);
    }
}
void drths_integrator_reset(drths_integrator_t *it, const double *x0, const double *v0, double ag0,
                            const double *f0)
{
    if (it->form == DRTHS_INTEGRATOR_FORM_MODAL) {
        reset_modal(it, x0, v0, ag0, f0);
        return;
    }
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
    if (it->form == DRTHS_INTEGRATOR_FORM_MODAL) {
        predict_modal(it);
        it->predicted = 1;
        if (x_next)
            memcpy(x_next, it->x1, (size_t)n * sizeof(double));
        if (v_next)
            memcpy(v_next, it->v1, (size_t)n * sizeof(double));
        return;
    }
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
    if (it->form == DRTHS_INTEGRATOR_FORM_MODAL) {
        correct_modal(it, ag_next, f_spec_next);
        it->k++;
        it->predicted = 0;
        return;
    }
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
    free(it->mmem);
    free(it->watch);
    memset(it, 0, sizeof *it);
}
