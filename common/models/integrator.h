/* Time integrators for the numerical substructure:
 *     M a + C v + K x = -M iota ag(t) - f_spec,   iota = (1, ..., 1),
 * x relative to the ground, f_spec the specimen's restoring force already mapped onto the
 * degrees of freedom by the caller (a damper between floor k-1 and floor k pushing with force F
 * contributes +F on DOF k and -F on DOF k-1; between the ground and floor 1, +F on DOF 1).
 *
 * Both integrators are explicit in displacement, which a hybrid test needs: the command for step
 * k+1 must be known before the specimen's force at k+1 is measured. One step is
 *     drths_integrator_predict(it, x1, v1);   -> send x1 (and v1) to the specimen
 *     ... measure f_spec at step k+1 ...
 *     drths_integrator_correct(it, ag(k+1), f_spec);
 *
 * Chen-Ricles (Chen & Ricles 2008), the default: alpha = 4 (4M + 2 dt C + dt^2 K)^-1 M,
 *     w(k+1) = w(k) + dt alpha a(k),  x(k+1) = x(k) + dt w(k) + dt^2 alpha a(k),
 *     M a(k+1) = -M iota ag(k+1) - f_spec(k+1) - C w(k+1) - K x(k+1),
 * exactly the recurrence of Chen & Ricles 2008; explicit in displacement and velocity and
 * unconditionally stable for linear and softening systems. Eliminating w and a shows that its
 * displacements obey the trapezoidal (average acceleration) rule's difference equation, so x is
 * second-order accurate; but the algorithm's own velocity is w(k+1) = (x(k+1) - x(k)) / dt, the
 * mean velocity over the step, which lags the velocity at t(k+1) by dt/2 (first order). Measured
 * consequences (tests/unit/test_integrator.c) and what this module does about them:
 *   - Started with w(0) = v0, the first step puts x(1) off by dt^2 a0 / 2 and every later
 *     displacement carries an O(dt) error (a half-step time shift). reset() therefore starts the
 *     recurrence consistently with w(0) = v0 - dt/2 a0.
 *   - The reported state is second order: v(k) = w(k) + dt/2 a_cr(k) (a_cr the recurrence's
 *     acceleration above) and a(k) from equilibrium with that v(k), so that the reported x, v, a
 *     satisfy M a + C v + K x = -M iota ag - f_spec exactly.
 *   - A velocity-dependent specimen fed w(k+1) converges only at first order (the damper force
 *     lags). predict() hands out the estimate w(k+1) + dt/2 (2 a_cr(k) - a_cr(k-1)) instead
 *     (a_cr(k+1) extrapolated linearly; at step 0 a_cr(-1) = a_cr(0)), error O(dt^3) per step.
 * alpha is built from the numerical substructure's C and K only: the specimen is outside it.
 *
 * Central difference, in the explicit Newmark form (beta = 0, gamma = 1/2), which is the
 * classical central difference method written with a velocity state:
 *     x(k+1) = x(k) + dt v(k) + dt^2/2 a(k)
 *     v(k+1) = v(k) + dt/2 (a(k) + a(k+1))
 *     (M + dt/2 C) a(k+1) = -M iota ag(k+1) - f_spec(k+1) - K x(k+1) - C (v(k) + dt/2 a(k))
 * This form treats C exactly (no lagged damping force) and keeps x(k+1) explicit. v(k+1) depends
 * on a(k+1) and so on the specimen force not yet measured; predict() therefore returns the
 * explicit estimate v(k) + dt/2 a(k) + dt/2 (2 a(k) - a(k-1)) (a(k+1) extrapolated linearly; at
 * step 0, a(-1) = a(0)), error O(dt^3) per step. Stable while w_max dt <= 2 for the undamped
 * system (the specimen's stiffness, if any, raises w_max: leave margin).
 *
 * Two forms of the same recurrences (drths_integrator_form_t):
 * - full: the matrices above, n*n each; every step costs five n*n matrix-vector products
 *   (O(n^2) time, 7 n^2 doubles of memory);
 * - modal: for classically damped structures (Phi^T C Phi diagonal, which modal and Rayleigh
 *   damping are) every matrix above is diagonal in the mass-normalised modes Phi (K Phi =
 *   M Phi diag(w^2), Phi^T M Phi = I): alpha = Phi diag(4 / (4 + 2 dt c_j + dt^2 w_j^2)) Phi^-1,
 *   M^-1 C = Phi diag(c_j) Phi^-1, and so on. Each recurrence then runs mode by mode on scalars
 *   (O(m) per step for m modes), the specimen force is projected as Phi^T f using only its
 *   nonzero entries (a damper touches one or two DOFs), and the physical state x = Phi q costs
 *   O(n m) per vector. With every mode kept (m = n) the modal form equals the full form in exact
 *   arithmetic, so the two agree to round-off (tests/unit/test_integrator.c: < 1e-9 relative).
 *   With m < n the higher modes are dropped (modal truncation: x, v, a have no component in
 *   them, including the static response of the dropped modes to the specimen force).
 *   The physical state is maintained at every DOF by default (O(n m) per step: four products
 *   with the n*m matrix Phi). drths_integrator_watch restricts the per-step update to a few
 *   DOFs (the specimen's); the per-step cost is then O(m) plus O(m) per nonzero specimen force,
 *   and drths_integrator_sync fills the rest when the caller needs it (a record row).
 * DRTHS_INTEGRATOR_FORM_AUTO (what drths_integrator_init uses) picks the modal form with every
 * mode for n >= DRTHS_INTEGRATOR_MODAL_MIN_DOF when the damping is classical, else the full form:
 * from that size the modal form is faster even with every DOF updated each step (measured by
 * tools/bench) and needs 2 n^2 doubles instead of 7 n^2.
 *
 * Ownership: drths_integrator_t owns every array (allocated by _init, freed by _close); the
 * caller reads x, v, a (state at step k) and must not write them. The integrator keeps no
 * pointer to the structure, which may be closed after _init.
 */
#ifndef DRTHS_INTEGRATOR_H
#define DRTHS_INTEGRATOR_H

#include "common/models/structure.h"
#include "common/platform/error.h"

typedef enum {
    DRTHS_INTEGRATOR_CHEN_RICLES,
    DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE
} drths_integrator_kind_t;

typedef enum {
    DRTHS_INTEGRATOR_FORM_AUTO = 0, /* modal (all modes) from MODAL_MIN_DOF DOFs if classical */
    DRTHS_INTEGRATOR_FORM_FULL,     /* n*n matrices */
    DRTHS_INTEGRATOR_FORM_MODAL     /* modal coordinates; fails unless classically damped */
} drths_integrator_form_t;

/* From this many DOFs the automatic choice is the modal form (see above). */
#define DRTHS_INTEGRATOR_MODAL_MIN_DOF 24

/* Damping counts as classical when every kept mode satisfies
 * |C phi_j - c_j M phi_j|_inf <= DRTHS_INTEGRATOR_CLASSICAL_TOL * max_i |C phi_i|_inf. */
#define DRTHS_INTEGRATOR_CLASSICAL_TOL 1e-8

typedef struct drths_integrator_options {
    drths_integrator_form_t form;
    int modes; /* modal form: modes kept, lowest first; 0 = all n */
} drths_integrator_options_t;

typedef struct drths_integrator {
    drths_integrator_kind_t kind;
    drths_integrator_form_t form; /* FULL or MODAL: the form in use */
    int m;                        /* modal form: modes kept (n for the full form) */
    int n;
    double dt;          /* s */
    long k;             /* step index of the state x, v, a */
    double w_max_rad_s; /* highest natural circular frequency of the structure */
    double *x, *v, *a;  /* state at step k: m, m/s, m/s^2 (relative to the ground) */
    /* Private below: read-only for tests. */
    double *x1;           /* predicted x(k+1) */
    double *v1;           /* the velocity estimate at k+1 handed to the specimen */
    double *vq;           /* the part of v(k+1) known before a(k+1): Chen-Ricles w(k+1),
                           * central difference v(k) + dt/2 a(k) */
    double *w;            /* Chen-Ricles: the recurrence's velocity w(k) */
    double *ai, *ai_prev; /* the recurrence's acceleration at k and k-1 (a_cr for Chen-Ricles,
                           * a for central difference) */
    double *work;         /* n scratch values */
    double *B;            /* Chen-Ricles: dt alpha (n*n) */
    /* Equilibrium solved for ai(k+1) = -e ag - P f - Q vq - R x(k+1), with D e = M iota,
     * D P = I, D Q = C, D R = K, where D = M for Chen-Ricles and M + dt/2 C for central
     * difference. n*n each, e has n. */
    double *e, *P, *Q, *R;
    double *Minv, *Cm, *Km; /* for reset(): a from M a = -M iota ag - f - C v - K x */
    int predicted;          /* x1, v1 are valid for step k+1 */
    double *mem;            /* the block that owns every array above */
    /* Modal form only (NULL otherwise). Per mode j: the diagonal entries of B, e, P, Q, R above
     * (mb, me, mp, mq, mr), c_j = phi_j^T C phi_j (mc), w_j^2 (mw2), the participation factor
     * phi_j^T M iota (mg), the modal coordinates of the state (q*), and the projected specimen
     * force qf. phi is n*m row-major (x = phi q), phitm m*n (q = phitm x for reset). */
    double *phi, *phitm;
    double *mb, *me, *mp, *mq, *mr, *mc, *mw2, *mg;
    double *qx, *qv, *qa, *qx1, *qv1, *qvq, *qw, *qai, *qai_prev, *qan, *qf;
    int *watch;             /* DOFs updated every step (nwatch of them); all when nwatch == n */
    int nwatch;
    double *mmem;           /* the block that owns the modal arrays */
} drths_integrator_t;

/* Precomputes every matrix for time step dt_s (LAPACK), in the automatic form. Refuses central difference when
 * w_max dt > 2 with the message "central difference is unstable at dt = ... s: highest mode
 * ... Hz needs dt <= ... s; use chen-ricles or a higher rate_hz". The state is set to rest
 * (x = v = 0, ag = 0, no specimen force). init-only. */
int drths_integrator_init(drths_integrator_t *it, const drths_structure_t *s,
                          drths_integrator_kind_t kind, double dt_s, drths_error_t *err);

/* As drths_integrator_init with a choice of form (NULL: automatic, every mode). Errors: modal
 * form asked for non-classical damping ("structure.damping: not classical (mode j couples to
 * the others by ...); use the full form"), modes outside 0..n. init-only. */
int drths_integrator_init_opts(drths_integrator_t *it, const drths_structure_t *s,
                               drths_integrator_kind_t kind, double dt_s,
                               const drths_integrator_options_t *o, drths_error_t *err);

/* Modal form: from now on predict() and correct() update x1, v1, x, v, a (and what predict()
 * copies out) only at the ndofs DOFs listed (0-based); the other entries keep the values of the
 * last drths_integrator_sync or reset. The full form updates everything anyway and ignores it.
 * Returns 0 or -EINVAL (a DOF out of range, ndofs < 1 or > n). init-only. */
int drths_integrator_watch(drths_integrator_t *it, const int *dofs, int ndofs);

/* Modal form: computes x, v, a (and x1, v1 when predicted) at every DOF, O(n m). Nothing to do
 * in the full form. RT-safe. */
void drths_integrator_sync(drths_integrator_t *it);

/* "full" or "modal". RT-safe. */
const char *drths_integrator_form_name(drths_integrator_form_t f);

/* Sets the state at step 0: x0 and v0 (NULL means zero), a0 from equilibrium with the ground
 * acceleration ag0 (m/s^2) and the specimen force f0 (NULL means zero); starts the Chen-Ricles
 * recurrence consistently (see above). RT-safe. */
void drths_integrator_reset(drths_integrator_t *it, const double *x0, const double *v0, double ag0,
                            const double *f0);

/* Computes x(k+1) (exact: the value the integrator will use) and the explicit estimate of the
 * velocity at k+1 described above for the specimen, and copies them into x_next and
 * v_next (n each; either may be NULL). Calling it again before correct() gives the same values.
 * RT-safe: matrix-vector products only. */
void drths_integrator_predict(drths_integrator_t *it, double *x_next, double *v_next);

/* Computes a(k+1) from equilibrium with the ground acceleration ag_next (m/s^2) and the specimen
 * force f_spec_next (N, n values mapped onto the DOFs; NULL means zero) at step k+1, then advances
 * the state to k+1. Predicts first if predict() was not called for this step. RT-safe. */
void drths_integrator_correct(drths_integrator_t *it, double ag_next, const double *f_spec_next);

/* Frees everything and zeroes *it. Safe twice and after a failed _init. init-only. */
void drths_integrator_close(drths_integrator_t *it);

#endif
