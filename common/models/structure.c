#include "common/models/structure.h"

#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Relative tolerance for "symmetric": entries printed with 10 significant digits still pass. */
#define SYM_TOL 1e-9
/* An eigenvalue this small relative to the largest one is a numerical zero: a mechanism. */
#define MECHANISM_TOL 1e-10

static double max_abs(const double *a, int n)
{
    double m = 0.0;
    for (int i = 0; i < n * n; i++)
        if (fabs(a[i]) > m)
            m = fabs(a[i]);
    return m;
}

/* Checks that a (n*n) is finite and symmetric; name is the field path for the message. */
static int check_matrix(const double *a, int n, const char *name, drths_error_t *err)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (!isfinite(a[i * n + j]))
                return drths_error_set(err, -EINVAL, "%s[%d][%d]: must be finite (got %g)", name, i,
                                       j, a[i * n + j]);
    double tol = SYM_TOL * max_abs(a, n);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (fabs(a[i * n + j] - a[j * n + i]) > tol)
                return drths_error_set(err, -EINVAL,
                                       "%s: must be symmetric, but [%d][%d] = %g and [%d][%d] = %g",
                                       name, i, j, a[i * n + j], j, i, a[j * n + i]);
    return 0;
}

/* Copies src into dst and removes the (tolerated) rounding asymmetry, so that everything derived
 * later (damping matrices, integrator matrices) is exactly symmetric. */
static void copy_symmetric(double *dst, const double *src, int n)
{
    for (int i = 0; i < n; i++) {
        dst[i * n + i] = src[i * n + i];
        for (int j = i + 1; j < n; j++) {
            double v = 0.5 * (src[i * n + j] + src[j * n + i]);
            dst[i * n + j] = v;
            dst[j * n + i] = v;
        }
    }
}

/* Allocates M, C, K (zeroed) for n degrees of freedom; on failure leaves *s zeroed. */
static int alloc_matrices(drths_structure_t *s, int n, drths_error_t *err)
{
    memset(s, 0, sizeof *s);
    if (n < 1)
        return drths_error_set(err, -EINVAL,
                               "structure: number of degrees of freedom must be >= 1 "
                               "(got %d)",
                               n);
    size_t nn = (size_t)n * (size_t)n;
    s->M = calloc(nn, sizeof(double));
    s->C = calloc(nn, sizeof(double));
    s->K = calloc(nn, sizeof(double));
    if (!s->M || !s->C || !s->K) {
        drths_structure_close(s);
        return drths_error_set(err, -ENOMEM, "structure: out of memory for %d degrees of freedom",
                               n);
    }
    s->n = n;
    return 0;
}

int drths_structure_init_shear(drths_structure_t *s, int n, const double *floor_mass_kg,
                               const double *storey_stiffness_N_per_m, drths_error_t *err)
{
    memset(s, 0, sizeof *s);
    if (n < 1)
        return drths_error_set(err, -EINVAL, "structure: number of floors must be >= 1 (got %d)",
                               n);
    for (int i = 0; i < n; i++) {
        if (!(floor_mass_kg[i] > 0.0) || !isfinite(floor_mass_kg[i]))
            return drths_error_set(err, -EINVAL,
                                   "structure.floor_mass_kg[%d]: must be > 0 and finite (got %g)",
                                   i, floor_mass_kg[i]);
        if (!(storey_stiffness_N_per_m[i] > 0.0) || !isfinite(storey_stiffness_N_per_m[i]))
            return drths_error_set(err, -EINVAL,
                                   "structure.storey_stiffness_N_per_m[%d]: must be > 0 and finite "
                                   "(got %g)",
                                   i, storey_stiffness_N_per_m[i]);
    }
    int rc = alloc_matrices(s, n, err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        const double *k = storey_stiffness_N_per_m;
        s->M[i * n + i] = floor_mass_kg[i];
        /* Floor i is held by storey i below it and storey i+1 above it (0-based). */
        s->K[i * n + i] = k[i] + (i + 1 < n ? k[i + 1] : 0.0);
        if (i + 1 < n) {
            s->K[i * n + i + 1] = -k[i + 1];
            s->K[(i + 1) * n + i] = -k[i + 1];
        }
    }
    return 0;
}

int drths_structure_init_matrices(drths_structure_t *s, int n, const double *M, const double *C,
                                  const double *K, drths_error_t *err)
{
    memset(s, 0, sizeof *s);
    if (n < 1)
        return drths_error_set(err, -EINVAL,
                               "structure: number of degrees of freedom must be >= 1 "
                               "(got %d)",
                               n);
    int rc = check_matrix(M, n, "structure.M", err);
    if (!rc && C)
        rc = check_matrix(C, n, "structure.C", err);
    if (!rc)
        rc = check_matrix(K, n, "structure.K", err);
    if (rc)
        return rc;
    rc = alloc_matrices(s, n, err);
    if (rc)
        return rc;
    copy_symmetric(s->M, M, n);
    copy_symmetric(s->K, K, n);
    if (C)
        copy_symmetric(s->C, C, n);
    return 0;
}

/* zeta[j] = phi_j^T C phi_j / (2 w_j) for every mode. */
static void update_zeta(drths_structure_t *s)
{
    int n = s->n;
    for (int j = 0; j < n; j++) {
        double q = 0.0;
        for (int a = 0; a < n; a++) {
            double ca = 0.0;
            for (int b = 0; b < n; b++)
                ca += s->C[a * n + b] * s->phi[b * n + j];
            q += s->phi[a * n + j] * ca;
        }
        s->zeta[j] = q / (2.0 * s->omega_rad_s[j]);
    }
}

int drths_structure_modes(drths_structure_t *s, drths_error_t *err)
{
    int n = s->n;
    if (n < 1 || !s->M || !s->K)
        return drths_error_set(err, -EINVAL, "structure: not initialised");
    size_t nn = (size_t)n * (size_t)n;
    /* Work on copies: dsygv overwrites K with the eigenvectors and M with its Cholesky factor,
     * and a failure must leave the structure as it was. */
    double *A = malloc(nn * sizeof(double));
    double *B = malloc(nn * sizeof(double));
    double *w = malloc((size_t)n * sizeof(double));
    if (!A || !B || !w) {
        free(A), free(B), free(w);
        return drths_error_set(err, -ENOMEM, "structure: out of memory for the eigenproblem");
    }
    memcpy(A, s->K, nn * sizeof(double));
    memcpy(B, s->M, nn * sizeof(double));
    lapack_int info = LAPACKE_dsygv(LAPACK_ROW_MAJOR, 1, 'V', 'U', n, A, n, B, n, w);
    int rc = 0;
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
        rc = drths_error_set(err, -ENOMEM, "structure: out of memory in LAPACKE_dsygv");
    else if (info > n)
        rc = drths_error_set(err, -EINVAL,
                             "structure.M: not positive definite (its leading %dx%d block is "
                             "not); every degree of freedom needs a positive mass",
                             (int)(info - n), (int)(info - n));
    else if (info != 0)
        rc = drths_error_set(err, -EINVAL,
                             "structure: eigenproblem K phi = w^2 M phi failed (LAPACKE_dsygv "
                             "info %d)",
                             (int)info);
    else if (!(w[n - 1] > 0.0) || w[0] <= MECHANISM_TOL * w[n - 1])
        rc = drths_error_set(err, -EINVAL,
                             "structure.K: not positive definite: mode 1 has w^2 = %g (rad/s)^2 "
                             "(largest %g); the structure is a mechanism (a storey without "
                             "stiffness, or not attached to the ground)",
                             w[0], w[n - 1]);
    if (!rc && !s->omega_rad_s) {
        s->omega_rad_s = calloc((size_t)n, sizeof(double));
        s->freq_hz = calloc((size_t)n, sizeof(double));
        s->zeta = calloc((size_t)n, sizeof(double));
        s->phi = calloc(nn, sizeof(double));
        if (!s->omega_rad_s || !s->freq_hz || !s->zeta || !s->phi) {
            free(s->omega_rad_s), free(s->freq_hz), free(s->zeta), free(s->phi);
            s->omega_rad_s = s->freq_hz = s->zeta = s->phi = NULL;
            rc = drths_error_set(err, -ENOMEM, "structure: out of memory for the modes");
        }
    }
    if (!rc) {
        for (int j = 0; j < n; j++) {
            s->omega_rad_s[j] = sqrt(w[j]);
            s->freq_hz[j] = s->omega_rad_s[j] / (2.0 * M_PI);
            /* Eigenvectors have no intrinsic sign; fix one so that runs and reports agree. */
            int imax = 0;
            for (int i = 1; i < n; i++)
                if (fabs(A[i * n + j]) > fabs(A[imax * n + j]))
                    imax = i;
            double sign = A[imax * n + j] < 0.0 ? -1.0 : 1.0;
            for (int i = 0; i < n; i++)
                s->phi[i * n + j] = sign * A[i * n + j];
        }
        update_zeta(s);
    }
    free(A), free(B), free(w);
    return rc;
}

static int ensure_modes(drths_structure_t *s, drths_error_t *err)
{
    if (s->omega_rad_s)
        return 0;
    return drths_structure_modes(s, err);
}

static int check_ratio(double z, const char *what, int index, drths_error_t *err)
{
    if (!(z >= 0.0 && z < 1.0))
        return drths_error_set(err, -EINVAL,
                               "%s[%d]: damping ratio must be in [0, 1) (got %g; 2 %% is 0.02)",
                               what, index, z);
    return 0;
}

int drths_structure_set_modal_damping(drths_structure_t *s, const double *zeta, int nzeta,
                                      drths_error_t *err)
{
    int n = s->n;
    if (nzeta != 1 && nzeta != n)
        return drths_error_set(err, -EINVAL,
                               "structure.damping.zeta: give 1 ratio or one per mode (%d), got %d",
                               n, nzeta);
    for (int j = 0; j < nzeta; j++) {
        int rc = check_ratio(zeta[j], "structure.damping.zeta", j, err);
        if (rc)
            return rc;
    }
    int rc = ensure_modes(s, err);
    if (rc)
        return rc;
    size_t nn = (size_t)n * (size_t)n;
    double *u = malloc(nn * sizeof(double));
    if (!u)
        return drths_error_set(err, -ENOMEM, "structure: out of memory for modal damping");
    /* u = M Phi; then C = sum_j c_j u_j u_j^T with c_j = 2 zeta_j w_j. Multiplying u_a u_b before
     * c_j makes C exactly symmetric in floating point. */
    for (int a = 0; a < n; a++)
        for (int j = 0; j < n; j++) {
            double acc = 0.0;
            for (int b = 0; b < n; b++)
                acc += s->M[a * n + b] * s->phi[b * n + j];
            u[a * n + j] = acc;
        }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double acc = 0.0;
            for (int j = 0; j < n; j++) {
                double cj = 2.0 * zeta[nzeta == 1 ? 0 : j] * s->omega_rad_s[j];
                acc += (u[a * n + j] * u[b * n + j]) * cj;
            }
            s->C[a * n + b] = acc;
        }
    free(u);
    update_zeta(s);
    return 0;
}

int drths_structure_set_rayleigh_damping(drths_structure_t *s, int mode_i, int mode_j,
                                         double zeta_i, double zeta_j, drths_error_t *err)
{
    int n = s->n;
    int rc = check_ratio(zeta_i, "structure.damping.rayleigh.zeta", 0, err);
    if (!rc)
        rc = check_ratio(zeta_j, "structure.damping.rayleigh.zeta", 1, err);
    if (rc)
        return rc;
    if (n == 1) {
        if (mode_i != 1 || mode_j != 1)
            return drths_error_set(err, -EINVAL,
                                   "structure.damping.rayleigh.modes: a single-degree-of-freedom "
                                   "structure has only mode 1 (got %d and %d)",
                                   mode_i, mode_j);
    } else if (mode_i < 1 || mode_i > n || mode_j < 1 || mode_j > n || mode_i == mode_j) {
        return drths_error_set(err, -EINVAL,
                               "structure.damping.rayleigh.modes: need two different modes in "
                               "1..%d (got %d and %d)",
                               n, mode_i, mode_j);
    }
    rc = ensure_modes(s, err);
    if (rc)
        return rc;
    double a0, a1;
    if (n == 1) {
        a0 = 2.0 * zeta_i * s->omega_rad_s[0];
        a1 = 0.0;
    } else {
        double wi = s->omega_rad_s[mode_i - 1], wj = s->omega_rad_s[mode_j - 1];
        double d = wj * wj - wi * wi;
        if (fabs(d) <= 1e-12 * wj * wj)
            return drths_error_set(err, -EINVAL,
                                   "structure.damping.rayleigh.modes: modes %d and %d have the "
                                   "same frequency (%g Hz); choose modes with distinct frequencies",
                                   mode_i, mode_j, s->freq_hz[mode_i - 1]);
        /* From zeta = a0 / (2 w) + a1 w / 2 written at both modes. */
        a0 = 2.0 * wi * wj * (zeta_i * wj - zeta_j * wi) / d;
        a1 = 2.0 * (zeta_j * wj - zeta_i * wi) / d;
    }
    for (int k = 0; k < n; k++) {
        double w = s->omega_rad_s[k];
        double zk = a0 / (2.0 * w) + a1 * w / 2.0;
        if (zk < 0.0)
            return drths_error_set(err, -EINVAL,
                                   "structure.damping.rayleigh: ratios %g (mode %d) and %g "
                                   "(mode %d) give mode %d (%.3g Hz) a negative damping ratio %g",
                                   zeta_i, mode_i, zeta_j, mode_j, k + 1, s->freq_hz[k], zk);
    }
    for (int k = 0; k < n * n; k++)
        s->C[k] = a0 * s->M[k] + a1 * s->K[k];
    update_zeta(s);
    return 0;
}

void drths_structure_close(drths_structure_t *s)
{
    free(s->M);
    free(s->C);
    free(s->K);
    free(s->omega_rad_s);
    free(s->freq_hz);
    free(s->zeta);
    free(s->phi);
    memset(s, 0, sizeof *s);
}
