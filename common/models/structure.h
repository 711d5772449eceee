/* Linear numerical substructure: mass, damping and stiffness matrices, modes and damping models
 * (the experiment file's structure section, docs/experiment-file.md).
 *
 * The equation of motion the integrators solve is
 *     M a + C v + K x = -M iota ag(t) - f_spec
 * with x the displacement relative to the ground, iota = (1, ..., 1) (every degree of freedom is
 * a horizontal translation in the direction of the ground motion) and f_spec the specimen's
 * restoring force mapped onto the degrees of freedom by the caller.
 *
 * Ownership: drths_structure_t owns every array it points to; they are allocated by the _init
 * functions (and the modal arrays by drths_structure_modes) and freed by drths_structure_close.
 * The caller may read all fields and must not free or resize them. Everything here is init-only
 * (allocates and calls LAPACK); the real-time path uses drths_integrator_t instead.
 */
#ifndef DRTHS_STRUCTURE_H
#define DRTHS_STRUCTURE_H

#include "common/platform/error.h"

/* How the experiment file describes the structure (structure.model) and its damping
 * (structure.damping.kind); common/config/config.h has their YAML names. */
typedef enum drths_structure_model {
    DRTHS_STRUCTURE_SHEAR_BUILDING = 0, /* "shear-building" */
    DRTHS_STRUCTURE_MATRICES            /* "matrices" */
} drths_structure_model_t;

typedef enum drths_damping_kind {
    DRTHS_DAMPING_MODAL = 0, /* "modal" */
    DRTHS_DAMPING_RAYLEIGH,  /* "rayleigh" */
    DRTHS_DAMPING_MATRIX,    /* "matrix": structure.damping_N_s_per_m given explicitly */
    DRTHS_DAMPING_NONE       /* "none" */
} drths_damping_kind_t;

typedef struct drths_structure {
    int n;             /* number of degrees of freedom */
    double *M, *C, *K; /* n*n row-major, owned */
    /* Filled by drths_structure_modes (and by the damping setters, which compute the modes
     * first when needed); NULL before. All n long, modes in ascending frequency. */
    double *omega_rad_s; /* natural circular frequencies, rad/s */
    double *freq_hz;     /* natural frequencies, Hz */
    double *zeta;        /* modal damping ratios, see drths_structure_modes */
    double *phi;         /* n*n row-major, mass-normalised (phi^T M phi = I); column j = mode j,
                          * sign chosen so that the largest-magnitude entry of each column is
                          * positive */
} drths_structure_t;

/* Shear building with n floors: floor_mass_kg[i] is the mass of floor i+1 and
 * storey_stiffness_N_per_m[i] the lateral stiffness of storey i+1, storey 1 being the one between
 * the ground and floor 1. M is diagonal; K is the tridiagonal shear-building stiffness. C is zero
 * until a damping model is set. Does not compute the modes. init-only. */
int drths_structure_init_shear(drths_structure_t *s, int n, const double *floor_mass_kg,
                               const double *storey_stiffness_N_per_m, drths_error_t *err);

/* Full matrices (n*n row-major, copied). C may be NULL for an undamped structure. M, K and C must
 * be finite and symmetric (to 1e-9 of the largest entry), because the eigensolver reads only one
 * triangle and an asymmetric entry is almost always a typing error in the experiment file.
 * Does not compute the modes. init-only. */
int drths_structure_init_matrices(drths_structure_t *s, int n, const double *M, const double *C,
                                  const double *K, drths_error_t *err);

/* Solves the generalized symmetric eigenproblem K phi = w^2 M phi (LAPACKE_dsygv) and fills
 * omega_rad_s, freq_hz, phi and zeta. Fails with a message if M is not positive definite or if K
 * is not positive definite (a zero or negative eigenvalue is a mechanism: a storey without
 * stiffness or a structure not attached to the ground).
 *
 * zeta[j] = phi_j^T C phi_j / (2 w_j). This is exact for classical damping (C diagonal in the
 * modal basis, which modal and Rayleigh damping are); for non-classical C it is the ratio of the
 * diagonal modal term only and ignores the coupling terms. init-only. */
int drths_structure_modes(drths_structure_t *s, drths_error_t *err);

/* C = M Phi diag(2 zeta_j w_j) Phi^T M: each mode gets exactly its damping ratio. zeta has nzeta
 * entries: 1 (the same ratio for every mode) or n (one per mode, ascending frequency). Ratios
 * must be in [0, 1): 0.02 means 2 %. Computes the modes first if needed; updates zeta[].
 * init-only. */
int drths_structure_set_modal_damping(drths_structure_t *s, const double *zeta, int nzeta,
                                      drths_error_t *err);

/* Rayleigh damping C = a0 M + a1 K with a0, a1 chosen so that modes mode_i and mode_j (1-based,
 * different) get the ratios zeta_i and zeta_j. The other modes get a0/(2w) + a1 w/2, which is
 * refused if negative for any mode. With n == 1 the damping is mass-proportional (a1 = 0) and
 * both mode numbers must be 1; zeta_i is used. Computes the modes first if needed; updates
 * zeta[]. init-only. */
int drths_structure_set_rayleigh_damping(drths_structure_t *s, int mode_i, int mode_j,
                                         double zeta_i, double zeta_j, drths_error_t *err);

/* Frees everything and zeroes *s. Safe twice and after a failed _init. init-only. */
void drths_structure_close(drths_structure_t *s);

#endif
