#include "site-numerical/semiactive.h"

#include <errno.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"

/* Default weights. q_disp = q_acc = 1: displacements and absolute accelerations weigh the same
 * in the first mode (a_ref = w1^2 x_ref), so the design neither ignores the accelerations, which
 * a displacement-only design lets grow when the damper stiffens the first storey, nor the
 * displacements. The acceleration term already penalises the force, because the damper's force
 * accelerates its own floor directly (R enters a_abs), so r changes the gain only from about 1
 * up. r = 100 makes the desired force peak at about 185 kN on the default experiment (El Centro
 * at full scale; the 200-kN damper itself peaks at about 205 kN at 2.5 A), i.e. of the damper's
 * size, as Dyke et al. (1996) intend. With r = 5 the desired force peaks near 600 kN and the
 * response comes closer to passive-on's. The size of f_c scales with the excitation, not only
 * with the structure: on the Dyke 1996 laboratory model, whose damper is strong relative to the
 * structure and the shaking, r = 100 asks for at most 240 N and keeps the damper on 1 % of the
 * time, while r = 5 asks for about 440 N (half the damper's peak at 2.25 V) and beats
 * passive-on's peak roof displacement. tests/unit/test_semiactive.c prints the figures. */
void drths_semiactive_design_default(drths_semiactive_design_t *d)
{
    d->q_disp = 1.0;
    d->q_acc = 1.0;
    d->r = 100.0;
}

/* Small dense row-major helpers for the init-only design (sizes up to 2n + 1). */

/* C = A B, A m x k, B k x p. */
static void mm(int m, int k, int p, const double *A, const double *B, double *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < p; j++) {
            double sum = 0.0;
            for (int l = 0; l < k; l++)
                sum += A[i * k + l] * B[l * p + j];
            C[i * p + j] = sum;
        }
}

/* C = A' B, A k x m, B k x p. */
static void mtm(int k, int m, int p, const double *A, const double *B, double *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < p; j++) {
            double sum = 0.0;
            for (int l = 0; l < k; l++)
                sum += A[l * m + i] * B[l * p + j];
            C[i * p + j] = sum;
        }
}

/* C = A B', A m x k, B p x k. */
static void mmt(int m, int k, int p, const double *A, const double *B, double *C)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < p; j++) {
            double sum = 0.0;
            for (int l = 0; l < k; l++)
                sum += A[i * k + l] * B[j * k + l];
            C[i * p + j] = sum;
        }
}

static double norm_f(int len, const double *A)
{
    double s = 0.0;
    for (int i = 0; i < len; i++)
        s += A[i] * A[i];
    return sqrt(s);
}

static double norm_inf(int n, const double *A)
{
    double best = 0.0;
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int j = 0; j < n; j++)
            s += fabs(A[i * n + j]);
        best = fmax(best, s);
    }
    return best;
}

static void symmetrize(int n, double *A)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            A[i * n + j] = A[j * n + i] = 0.5 * (A[i * n + j] + A[j * n + i]);
}

/* Solves A X = B in place (A n x n is destroyed, B n x p becomes X). */
static int solve(int n, int p, double *A, double *B)
{
    lapack_int ipiv[96];
    if (n > 96)
        return -EINVAL;
    return LAPACKE_dgesv(LAPACK_ROW_MAJOR, n, p, A, n, ipiv, B, p) == 0 ? 0 : -EDOM;
}

/* E = exp(X), X m x m, by the diagonal Pade(6, 6) approximant with scaling and squaring
 * (||X / 2^s||_inf <= 0.5, where the approximant's relative error is below 1e-16). w holds
 * 4 m^2 scratch values. */
static int expm(int m, const double *X, double *E, double *w)
{
    static const double c[7] = {1.0,         0.5,           5.0 / 44.0,    1.0 / 66.0,
                                1.0 / 792.0, 1.0 / 15840.0, 1.0 / 665280.0};
    int mm2 = m * m, sq = 0;
    double nrm = norm_inf(m, X);
    while (nrm > 0.5 && sq < 60) {
        nrm *= 0.5;
        sq++;
    }
    double scale = ldexp(1.0, -sq);
    double *Xs = w, *Pw = w + mm2, *N = w + 2 * mm2, *D = w + 3 * mm2;
    for (int i = 0; i < mm2; i++)
        Xs[i] = X[i] * scale;
    memset(N, 0, (size_t)mm2 * sizeof(double));
    memset(D, 0, (size_t)mm2 * sizeof(double));
    for (int i = 0; i < m; i++)
        N[i * m + i] = D[i * m + i] = 1.0;
    memcpy(Pw, Xs, (size_t)mm2 * sizeof(double));
    for (int k = 1; k <= 6; k++) {
        double sign = (k & 1) ? -1.0 : 1.0;
        for (int i = 0; i < mm2; i++) {
            N[i] += c[k] * Pw[i];
            D[i] += sign * c[k] * Pw[i];
        }
        if (k < 6) {
            mm(m, m, m, Pw, Xs, E);
            memcpy(Pw, E, (size_t)mm2 * sizeof(double));
        }
    }
    int rc = solve(m, m, D, N); /* N = D^-1 N */
    if (rc)
        return rc;
    for (int k = 0; k < sq; k++) {
        mm(m, m, m, N, N, E);
        memcpy(N, E, (size_t)mm2 * sizeof(double));
    }
    memcpy(E, N, (size_t)mm2 * sizeof(double));
    return 0;
}

static int lowest_frequency(const drths_structure_t *st, double *w1, drths_error_t *err)
{
    int n = st->n;
    size_t nn = (size_t)n * (size_t)n;
    double *K = malloc(nn * sizeof(double)), *M = malloc(nn * sizeof(double)),
           *ev = malloc((size_t)n * sizeof(double));
    int rc = 0;
    if (!K || !M || !ev)
        rc = drths_error_set(err, -ENOMEM, "out of memory");
    else {
        memcpy(K, st->K, nn * sizeof(double));
        memcpy(M, st->M, nn * sizeof(double));
        if (LAPACKE_dsygv(LAPACK_ROW_MAJOR, 1, 'N', 'U', n, K, n, M, n, ev) != 0 || ev[0] <= 0)
            rc = drths_error_set(err, -EDOM,
                                 "control: the structure has no positive lowest natural "
                                 "frequency (M or K not positive definite)");
        else
            *w1 = sqrt(ev[0]);
    }
    free(K);
    free(M);
    free(ev);
    return rc;
}

/* Relative DARE residual of P (with the cross term), see the header, for m inputs. w: 3 n2^2 +
 * 4 n2 m + 2 m^2. */
static double dare_residual(int n2, int m, const double *A, const double *B, const double *Q,
                            const double *S, const double *R, const double *P, double *w)
{
    int nn = n2 * n2;
    double *PA = w, *APA = w + nn, *Res = w + 2 * nn, *PB = w + 3 * nn, *L = PB + n2 * m,
           *Lt = L + n2 * m, *RB = Lt + n2 * m, *K = RB + m * m;
    mm(n2, n2, n2, P, A, PA);
    mtm(n2, n2, n2, A, PA, APA);
    mm(n2, n2, m, P, B, PB);
    /* RB = R + B' P B (m x m); L = A' P B + S (n2 x m) */
    mtm(n2, m, m, B, PB, RB);
    for (int i = 0; i < m * m; i++)
        RB[i] += R[i];
    mtm(n2, n2, m, A, PB, L);
    for (int i = 0; i < n2 * m; i++)
        L[i] += S[i];
    /* K = RB^-1 L' (m x n2) */
    for (int i = 0; i < n2; i++)
        for (int k = 0; k < m; k++)
            Lt[k * n2 + i] = L[i * m + k];
    memcpy(K, Lt, (size_t)(n2 * m) * sizeof(double));
    if (solve(m, n2, RB, K))
        return INFINITY;
    for (int i = 0; i < n2; i++)
        for (int j = 0; j < n2; j++) {
            double lk = 0.0;
            for (int k = 0; k < m; k++)
                lk += L[i * m + k] * K[k * n2 + j];
            Res[i * n2 + j] = APA[i * n2 + j] - P[i * n2 + j] - lk + Q[i * n2 + j];
        }
    return norm_f(nn, Res) / fmax(norm_f(nn, P), norm_f(nn, APA));
}

/* The design's scratch: one calloc, carved into the matrices of each stage. */
typedef struct {
    double *buf;
    double *Minv, *MK, *MC, *Ml;                    /* n x n, n x n, n x n, n x nd */
    double *X, *E, *scratch;                        /* m x m, m x m, 4 m x m (m = 2n + nd) */
    double *At, *G, *H, *Wm, *Y, *Z, *T1, *T2, *Hn; /* 2n x 2n each (nd <= 2n) */
    double *Ca, *Da;                                /* n x 2n (fits in 4 n^2), n x nd */
    double *K1, *K2, *Rw;                           /* nd x 2n, nd x 2n, nd x nd */
    double mtot;                                    /* total mass */
} design_ws_t;

/* nd inputs (dampers). */
static int ws_alloc(design_ws_t *w, int n, int nd)
{
    int n2 = 2 * n, m = n2 + nd, nn = n2 * n2;
    size_t words = (size_t)(n * n * 3 + n * nd + 6 * m * m + 10 * nn + n * nd + 2 * nd * n2 +
                            nd * nd + 8 * n2 * nd + 4 * nd * nd);
    w->buf = calloc(words, sizeof(double));
    if (!w->buf)
        return -ENOMEM;
    w->Minv = w->buf;
    w->MK = w->Minv + n * n;
    w->MC = w->MK + n * n;
    w->Ml = w->MC + n * n;
    w->X = w->Ml + n * nd;
    w->E = w->X + m * m;
    w->scratch = w->E + m * m;
    w->At = w->scratch + 4 * m * m;
    w->G = w->At + nn;
    w->H = w->G + nn;
    w->Wm = w->H + nn;
    w->Y = w->Wm + nn;
    w->Z = w->Y + nn;
    w->T1 = w->Z + nn;
    w->T2 = w->T1 + nn;
    w->Hn = w->T2 + nn;
    /* dare_residual's 3 nn + 2 n2 scratch reuses At, G, H and part of Wm, done with by then. */
    w->Ca = w->Hn + nn;
    w->Da = w->Ca + nn;
    w->K1 = w->Da + n * nd;
    w->K2 = w->K1 + nd * n2;
    w->Rw = w->K2 + nd * n2;
    return 0;
}

/* M^-1 K, M^-1 C and M^-1 lambda with lambda = e_top - e_{top-1}; then the zero-order-hold
 * discretisation Ad, Bd of the state-space model from the exponential of X = [Ac Bc; 0 0] dt. */
static int discretise(drths_semiactive_t *s, const drths_structure_t *st, design_ws_t *w,
                      drths_error_t *err)
{
    int n = s->n, n2 = 2 * n, nd = s->m, m = n2 + nd;
    w->mtot = 0.0;
    for (int i = 0; i < n * n; i++)
        w->mtot += st->M[i];
    memcpy(w->Minv, st->M, (size_t)(n * n) * sizeof(double));
    memcpy(w->MK, st->K, (size_t)(n * n) * sizeof(double));
    if (solve(n, n, w->Minv, w->MK))
        return drths_error_set(err, -EDOM, "control: M is singular");
    memcpy(w->Minv, st->M, (size_t)(n * n) * sizeof(double));
    memcpy(w->MC, st->C, (size_t)(n * n) * sizeof(double));
    solve(n, n, w->Minv, w->MC);
    /* Lambda: column k is damper k's e_top - e_{top-1}. */
    memset(w->Ml, 0, (size_t)(n * nd) * sizeof(double));
    for (int k = 0; k < nd; k++) {
        int top = s->floors[k] - 1;
        w->Ml[top * nd + k] = 1.0;
        if (top > 0)
            w->Ml[(top - 1) * nd + k] = -1.0;
    }
    memcpy(w->Minv, st->M, (size_t)(n * n) * sizeof(double));
    solve(n, nd, w->Minv, w->Ml);

    double *X = w->X, *E = w->E;
    memset(X, 0, (size_t)(m * m) * sizeof(double));
    for (int i = 0; i < n; i++) {
        X[i * m + n + i] = s->dt_s;
        for (int j = 0; j < n; j++) {
            X[(n + i) * m + j] = -w->MK[i * n + j] * s->dt_s;
            X[(n + i) * m + n + j] = -w->MC[i * n + j] * s->dt_s;
        }
        for (int k = 0; k < nd; k++)
            X[(n + i) * m + n2 + k] = -w->Ml[i * nd + k] * s->dt_s;
    }
    if (expm(m, X, E, w->scratch))
        return drths_error_set(err, -EDOM, "control: matrix exponential failed");
    for (int i = 0; i < n2; i++) {
        for (int j = 0; j < n2; j++)
            s->Ad[i * n2 + j] = E[i * m + j];
        for (int k = 0; k < nd; k++)
            s->Bd[i * nd + k] = E[i * m + n2 + k];
    }
    return 0;
}

/* Weights scaled by x_ref^2: q_disp on x, q_acc / w1^4 on a_abs = Ca z + Da R,
 * r / (mtot w1^2)^2 on R; fills Q, S and R. */
static int weights(drths_semiactive_t *s, const drths_structure_t *st, design_ws_t *w,
                   drths_error_t *err)
{
    int n = s->n, n2 = 2 * n, nn = n2 * n2, nd = s->m;
    double w1 = 0.0;
    int rc = lowest_frequency(st, &w1, err);
    if (rc)
        return rc;
    double qa = s->design.q_acc / pow(w1, 4.0);
    double ra = s->design.r / pow(w->mtot * w1 * w1, 2.0);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            w->Ca[i * n2 + j] = -w->MK[i * n + j];
            w->Ca[i * n2 + n + j] = -w->MC[i * n + j];
        }
        for (int k = 0; k < nd; k++)
            w->Da[i * nd + k] = -w->Ml[i * nd + k];
    }
    mtm(n, n2, n2, w->Ca, w->Ca, s->Q);
    for (int i = 0; i < nn; i++)
        s->Q[i] *= qa;
    for (int i = 0; i < n; i++)
        s->Q[i * n2 + i] += s->design.q_disp;
    mtm(n, n2, nd, w->Ca, w->Da, s->S);
    for (int i = 0; i < n2 * nd; i++)
        s->S[i] *= qa;
    /* R = qa Da' Da + ra I: every damper's force weighs as the one damper's did. */
    mtm(n, nd, nd, w->Da, w->Da, s->Rm);
    for (int i = 0; i < nd * nd; i++)
        s->Rm[i] *= qa;
    for (int k = 0; k < nd; k++)
        s->Rm[k * nd + k] += ra;
    s->R = s->Rm[0];
    return 0;
}

/* The discrete algebraic Riccati equation's solution P. The cross term is removed first:
 * At = Ad - Bd S' / R, H = Q - S S' / R, G = Bd Bd' / R. Then the doubling iteration: with
 * W = I + G H,
 *   A <- A W^-1 A,  G <- G + A W^-1 G A',  H <- H + A' H W^-1 A,
 * H converges to P quadratically once the horizon 2^k exceeds the slowest closed-loop time
 * constant. */
static int riccati(drths_semiactive_t *s, design_ws_t *w, drths_error_t *err)
{
    int n2 = 2 * s->n, nn = n2 * n2, nd = s->m, rc = 0;
    double *At = w->At, *G = w->G, *H = w->H, *Wm = w->Wm, *Y = w->Y, *Z = w->Z, *T1 = w->T1,
           *T2 = w->T2, *Hn = w->Hn;
    /* K1 = R^-1 S', K2 = R^-1 Bd' (nd x 2n); with one damper a division by R. */
    for (int i = 0; i < n2; i++)
        for (int k = 0; k < nd; k++) {
            w->K1[k * n2 + i] = s->S[i * nd + k];
            w->K2[k * n2 + i] = s->Bd[i * nd + k];
        }
    if (nd == 1) {
        for (int i = 0; i < n2; i++) {
            w->K1[i] /= s->R;
            w->K2[i] /= s->R;
        }
    } else {
        memcpy(w->Rw, s->Rm, (size_t)(nd * nd) * sizeof(double));
        if (solve(nd, n2, w->Rw, w->K1))
            return drths_error_set(err, -EDOM, "control: the force weight is singular");
        memcpy(w->Rw, s->Rm, (size_t)(nd * nd) * sizeof(double));
        solve(nd, n2, w->Rw, w->K2);
    }
    for (int i = 0; i < n2; i++)
        for (int j = 0; j < n2; j++) {
            double bk1 = 0.0, sk1 = 0.0, bk2 = 0.0;
            for (int k = 0; k < nd; k++) {
                bk1 += s->Bd[i * nd + k] * w->K1[k * n2 + j];
                sk1 += s->S[i * nd + k] * w->K1[k * n2 + j];
                bk2 += s->Bd[i * nd + k] * w->K2[k * n2 + j];
            }
            At[i * n2 + j] = s->Ad[i * n2 + j] - bk1;
            H[i * n2 + j] = s->Q[i * n2 + j] - sk1;
            G[i * n2 + j] = bk2;
        }
    symmetrize(n2, H);
    int it, converged = 0;
    for (it = 1; it <= 100 && !converged; it++) {
        mm(n2, n2, n2, G, H, Wm);
        for (int i = 0; i < n2; i++)
            Wm[i * n2 + i] += 1.0;
        memcpy(T1, Wm, (size_t)nn * sizeof(double));
        memcpy(Y, At, (size_t)nn * sizeof(double));
        if (solve(n2, n2, T1, Y)) { /* Y = W^-1 A */
            rc = -EDOM;
            break;
        }
        memcpy(T1, Wm, (size_t)nn * sizeof(double));
        memcpy(Z, G, (size_t)nn * sizeof(double));
        solve(n2, n2, T1, Z);     /* Z = W^-1 G */
        mm(n2, n2, n2, H, Y, T1); /* H W^-1 A */
        mtm(n2, n2, n2, At, T1, T2);
        for (int i = 0; i < nn; i++)
            Hn[i] = H[i] + T2[i];
        symmetrize(n2, Hn);
        mm(n2, n2, n2, At, Z, T1); /* A W^-1 G */
        mmt(n2, n2, n2, T1, At, T2);
        for (int i = 0; i < nn; i++)
            G[i] += T2[i];
        symmetrize(n2, G);
        mm(n2, n2, n2, At, Y, T1);
        memcpy(At, T1, (size_t)nn * sizeof(double));
        double change = 0.0;
        for (int i = 0; i < nn; i++)
            change += (Hn[i] - H[i]) * (Hn[i] - H[i]);
        memcpy(H, Hn, (size_t)nn * sizeof(double));
        if (sqrt(change) <= 1e-14 * norm_f(nn, H))
            converged = 1;
    }
    s->riccati_iterations = it - 1;
    if (rc || !converged)
        return drths_error_set(err, -EDOM,
                               "control: the Riccati iteration did not converge in %d "
                               "iterations (is the damper's storey controllable?)",
                               s->riccati_iterations);
    memcpy(s->P, H, (size_t)nn * sizeof(double));
    /* dare_residual's scratch: At, G, H and on (done with by now). */
    s->riccati_residual = dare_residual(n2, nd, s->Ad, s->Bd, s->Q, s->S, s->Rm, s->P, At);
    if (!(s->riccati_residual < 1e-8))
        return drths_error_set(err, -EDOM,
                               "control: the Riccati solution's relative residual is %.3g "
                               "(> 1e-8)",
                               s->riccati_residual);
    return 0;
}

/* gain = (R + Bd' P Bd)^-1 (Bd' P Ad + S'), and the spectral radius of the closed loop, which
 * must be below 1. */
static int gain_and_check(drths_semiactive_t *s, design_ws_t *w, drths_error_t *err)
{
    int n2 = 2 * s->n, nd = s->m;
    double *PB = w->T1, *BPB = w->Rw, *L = w->H;
    mm(n2, n2, nd, s->P, s->Bd, PB);
    mtm(n2, nd, nd, s->Bd, PB, BPB);
    for (int i = 0; i < nd * nd; i++)
        BPB[i] += s->Rm[i];
    mtm(n2, n2, nd, s->Ad, PB, L); /* Ad' P Bd, n2 x nd */
    for (int i = 0; i < n2; i++)
        for (int k = 0; k < nd; k++)
            s->gain[k * n2 + i] = L[i * nd + k] + s->S[i * nd + k];
    if (nd == 1) {
        for (int i = 0; i < n2; i++)
            s->gain[i] /= BPB[0];
    } else if (solve(nd, n2, BPB, s->gain)) {
        return drths_error_set(err, -EDOM, "control: R + Bd' P Bd is singular");
    }

    double *Acl = w->T2, *wr = w->Y, *wi = w->Z;
    for (int i = 0; i < n2; i++)
        for (int j = 0; j < n2; j++) {
            double bg = 0.0;
            for (int k = 0; k < nd; k++)
                bg += s->Bd[i * nd + k] * s->gain[k * n2 + j];
            Acl[i * n2 + j] = s->Ad[i * n2 + j] - bg;
        }
    if (LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', n2, Acl, n2, wr, wi, NULL, 1, NULL, 1) != 0)
        return drths_error_set(err, -EDOM, "control: eigenvalues of the closed loop failed");
    s->spectral_radius = 0.0;
    for (int i = 0; i < n2; i++)
        s->spectral_radius = fmax(s->spectral_radius, hypot(wr[i], wi[i]));
    if (!(s->spectral_radius < 1.0))
        return drths_error_set(err, -EDOM,
                               "control: the closed loop is not stable (spectral radius %.9f)",
                               s->spectral_radius);
    return 0;
}

static int design(drths_semiactive_t *s, const drths_structure_t *st, drths_error_t *err)
{
    design_ws_t w;
    if (ws_alloc(&w, s->n, s->m) != 0)
        return drths_error_set(err, -ENOMEM, "out of memory for the control design");
    int rc = discretise(s, st, &w, err);
    if (rc == 0)
        rc = weights(s, st, &w, err);
    if (rc == 0)
        rc = riccati(s, &w, err);
    if (rc == 0)
        rc = gain_and_check(s, &w, err);
    free(w.buf);
    return rc;
}

int drths_semiactive_init_multi(drths_semiactive_t *s, const drths_structure_t *st, int m,
                                const int *floors, double dt_s, const double *command_max,
                                drths_control_mode_t mode, double fixed_command,
                                const drths_semiactive_design_t *d, drths_error_t *err)
{
    memset(s, 0, sizeof *s);
    if (!st || st->n < 1 || st->n > 32)
        return drths_error_set(err, -EINVAL, "control: 1 to 32 degrees of freedom (got %d)",
                               st ? st->n : 0);
    if (m < 1 || m > DRTHS_SEMIACTIVE_MAX_DAMPERS)
        return drths_error_set(err, -EINVAL, "control: 1 to %d dampers (got %d)",
                               DRTHS_SEMIACTIVE_MAX_DAMPERS, m);
    for (int k = 0; k < m; k++)
        if (floors[k] < 1 || floors[k] > st->n)
            return drths_error_set(err, -EINVAL, "specimen.floor: must be in 1..%d (got %d)", st->n,
                                   floors[k]);
    if (!(dt_s > 0.0) || !isfinite(dt_s))
        return drths_error_set(err, -EINVAL, "rate_hz: the tick must be > 0 (got dt %g s)", dt_s);
    for (int k = 0; k < m; k++)
        if (!(command_max[k] >= 0.0) || !isfinite(command_max[k]))
            return drths_error_set(err, -EINVAL, "control: command_max must be >= 0 (got %g)",
                                   command_max[k]);
    s->mode = mode;
    s->n = st->n;
    s->m = m;
    memcpy(s->floors, floors, (size_t)m * sizeof *floors);
    s->floor = floors[0];
    s->dt_s = dt_s;
    memcpy(s->command_max_k, command_max, (size_t)m * sizeof *command_max);
    s->command_max = command_max[0];
    if (d)
        s->design = *d;
    else
        drths_semiactive_design_default(&s->design);
    for (int k = 0; k < m; k++) {
        switch (mode) {
        case DRTHS_CONTROL_PASSIVE_OFF:
            s->command_const_k[k] = 0.0;
            break;
        case DRTHS_CONTROL_PASSIVE_ON:
            s->command_const_k[k] = command_max[k];
            break;
        case DRTHS_CONTROL_FIXED:
            if (!(fixed_command >= 0.0 && fixed_command <= command_max[k]))
                return drths_error_set(err, -EINVAL, "control.command: must be in [0, %g] (got %g)",
                                       command_max[k], fixed_command);
            s->command_const_k[k] = fixed_command;
            break;
        case DRTHS_CONTROL_CLIPPED_OPTIMAL:
            break;
        default:
            return drths_error_set(err, -EINVAL, "control.mode: unknown mode %d", (int)mode);
        }
        s->command_k[k] = s->command_const_k[k];
    }
    s->command_const = s->command_const_k[0];
    s->command = s->command_const;
    if (mode != DRTHS_CONTROL_CLIPPED_OPTIMAL)
        return 0;

    for (int k = 0; k < m; k++)
        if (!(command_max[k] > 0.0))
            return drths_error_set(err, -EINVAL,
                                   "control.mode: clipped-optimal needs a damper with a command "
                                   "(specimen.damper.model has none)");
    if (!(s->design.r > 0.0) || !(s->design.q_disp >= 0.0) || !(s->design.q_acc >= 0.0) ||
        !isfinite(s->design.r) || !isfinite(s->design.q_disp) || !isfinite(s->design.q_acc))
        return drths_error_set(err, -EINVAL,
                               "control: weights must be finite, r > 0, q_disp and q_acc >= 0 "
                               "(got r %g, q_disp %g, q_acc %g)",
                               s->design.r, s->design.q_disp, s->design.q_acc);
    if (!st->C)
        return drths_error_set(err, -EINVAL, "control: the structure has no damping matrix");
    int n2 = 2 * s->n;
    /* The design's scratch holds at most as many inputs as states. */
    if (m > n2)
        return drths_error_set(err, -EINVAL,
                               "control.mode: clipped-optimal with %d dampers on %d degrees of "
                               "freedom (at most %d)",
                               m, s->n, n2);
    size_t nn = (size_t)n2 * (size_t)n2, nm = (size_t)n2 * (size_t)m;
    s->mem = calloc(3 * nn + 3 * nm + (size_t)(m * m), sizeof(double));
    if (!s->mem)
        return drths_error_set(err, -ENOMEM, "out of memory for the controller");
    s->gain = s->mem;
    s->Bd = s->gain + nm;
    s->S = s->Bd + nm;
    s->Ad = s->S + nm;
    s->Q = s->Ad + nn;
    s->P = s->Q + nn;
    s->Rm = s->P + nn;
    int rc = design(s, st, err);
    if (rc) {
        drths_semiactive_close(s);
        return rc;
    }
    return 0;
}

int drths_semiactive_init(drths_semiactive_t *s, const drths_structure_t *st, int floor,
                          double dt_s, double command_max, drths_control_mode_t mode,
                          double fixed_command, const drths_semiactive_design_t *d,
                          drths_error_t *err)
{
    return drths_semiactive_init_multi(s, st, 1, &floor, dt_s, &command_max, mode, fixed_command, d,
                                       err);
}

int drths_semiactive_init_experiment(drths_semiactive_t *s, const drths_experiment_t *exp,
                                     const drths_structure_t *st, drths_error_t *err)
{
    drths_semiactive_design_t d;
    return drths_semiactive_init(s, st, exp->specimen.floor, 1.0 / exp->rate_hz,
                                 drths_experiment_command_max(exp->specimen.damper.model),
                                 exp->control.mode, exp->control.command,
                                 drths_semiactive_design_of(exp, &d), err);
}

const drths_semiactive_design_t *drths_semiactive_design_of(const drths_experiment_t *exp,
                                                            drths_semiactive_design_t *d)
{
    if (exp->control.mode != DRTHS_CONTROL_CLIPPED_OPTIMAL)
        return NULL;
    *d = (drths_semiactive_design_t){
        .q_disp = exp->control.q_disp, .q_acc = exp->control.q_acc, .r = exp->control.r};
    return d;
}

double drths_semiactive_clip(double desired_force_N, double measured_force_N, double command_max)
{
    return (desired_force_N - measured_force_N) * measured_force_N > 0.0 ? command_max : 0.0;
}

double drths_semiactive_command(drths_semiactive_t *s, const double *x, const double *v,
                                double measured_force_N)
{
    if (s->mode != DRTHS_CONTROL_CLIPPED_OPTIMAL) {
        s->command = s->command_const;
        return s->command;
    }
    const double *g = s->gain, *gv = s->gain + s->n;
    double u = 0.0;
    for (int i = 0; i < s->n; i++)
        u += g[i] * x[i] + gv[i] * v[i];
    s->desired_force_N = -u;
    s->command = drths_semiactive_clip(s->desired_force_N, measured_force_N, s->command_max);
    return s->command;
}

void drths_semiactive_command_all(drths_semiactive_t *s, const double *x, const double *v,
                                  const double *measured_force_N, double *command)
{
    int n2 = 2 * s->n;
    for (int k = 0; k < s->m; k++) {
        if (s->mode != DRTHS_CONTROL_CLIPPED_OPTIMAL) {
            s->command_k[k] = s->command_const_k[k];
        } else {
            const double *g = s->gain + k * n2, *gv = g + s->n;
            double u = 0.0;
            for (int i = 0; i < s->n; i++)
                u += g[i] * x[i] + gv[i] * v[i];
            s->desired_k[k] = -u;
            s->command_k[k] =
                drths_semiactive_clip(s->desired_k[k], measured_force_N[k], s->command_max_k[k]);
        }
        command[k] = s->command_k[k];
    }
    s->desired_force_N = s->desired_k[0];
    s->command = s->command_k[0];
}

double drths_semiactive_initial_command(const drths_semiactive_t *s)
{
    return s->mode == DRTHS_CONTROL_CLIPPED_OPTIMAL ? 0.0 : s->command_const;
}

double drths_semiactive_desired_force(const drths_semiactive_t *s)
{
    return s->desired_force_N;
}

void drths_semiactive_close(drths_semiactive_t *s)
{
    free(s->mem);
    memset(s, 0, sizeof *s);
}
