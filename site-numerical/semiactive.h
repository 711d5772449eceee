/* Semi-active control of the MR damper (clipped-optimal, Dyke et al. 1996; docs/design.md,
 * "Clipped-optimal control"): the damper command (A or V) for each tick from the numerical
 * site's own state and the measured damper force.
 *
 *   passive-off      0
 *   passive-on       command_max
 *   fixed            the experiment's control.command
 *   clipped-optimal  command_max * H((f_c - F) F),  f_c = -G [x; v]
 *
 * F is the damper force with the sign convention of drths_numsub_correct (the force R the damper
 * exerts resisting its own elongation: -R on its top floor, +R on the floor below in the
 * equation of motion M a + C v + K x = -M iota ag - Lambda R). H is the Heaviside step with
 * H(0) = 0, so the damper stays off when the force is exactly zero (at rest). When the damper
 * already pushes harder than desired in the desired direction, or pushes in the wrong direction,
 * the command drops to zero; otherwise it goes to the maximum.
 *
 * The gain G is a discrete linear-quadratic regulator designed at start-up on the numerical
 * model, with the damper force as an ideal input:
 *   - continuous state z = [x; v] (2n; x relative to the ground), z' = Ac z + Bc R + E ag with
 *     Ac = [0 I; -M^-1 K  -M^-1 C], Bc = [0; -M^-1 Lambda];
 *   - discretised exactly at dt with the force held over each tick (zero-order hold):
 *     exp([Ac Bc; 0 0] dt) by Pade(6) with scaling and squaring;
 *   - cost per tick J = sum_k  q_disp sum_i (x_i / x_ref)^2 + q_acc sum_i (a_i / a_ref)^2
 *                            + r (R / F_ref)^2,
 *     a_i the absolute acceleration of floor i (a_abs = -M^-1 (K x + C v + Lambda R), so it
 *     depends on the force too, which gives the cost a cross term). The references tie the three
 *     terms to the structure so the weights are dimensionless and x_ref drops out:
 *     a_ref = w1^2 x_ref and F_ref = m_total w1^2 x_ref (the base shear of the first mode at
 *     x_ref), w1 the lowest natural circular frequency, m_total the sum of M;
 *   - the discrete algebraic Riccati equation with the cross term is solved by Riccati iteration
 *     in its doubling form (each iteration doubles the horizon, so about 20 iterations cover the
 *     10^5 ticks a plain iteration needs at 5 kHz), and its residual is checked;
 *   - G = (R + Bd' P Bd)^-1 (Bd' P Ad + S'); the closed loop Ad - Bd G must have spectral
 *     radius < 1.
 * Default weights (drths_semiactive_design_default): see semiactive.c.
 *
 * Several dampers (a file with sites, one per channel of every site): Lambda has one column per
 * damper, the force weight is r on each force (R = qa Da' Da + ra I, m x m), and the regulator
 * has m inputs: row k of the gain is damper k's desired force, and damper k switches on its
 * own measured force. With one damper every matrix is the one above.
 *
 * Timing: the command returned for the state and force of step k is applied over the tick that
 * ends at k+1 (it travels with x(k+1)), one tick of delay as in a real controller.
 *
 * Ownership: drths_semiactive_t owns its arrays (one block allocated by _init, freed by _close).
 * It keeps no pointer to the structure or the experiment.
 */
#ifndef DRTHS_SEMIACTIVE_H
#define DRTHS_SEMIACTIVE_H

#include "common/config/enums.h" /* drths_control_mode_t */
#include "common/models/structure.h"
#include "common/platform/error.h"

/* Only pointers to the experiment are taken here; common/config/config.h defines it. */
typedef struct drths_experiment drths_experiment_t;

/* Weights of the clipped-optimal design (dimensionless, see above). */
typedef struct drths_semiactive_design {
    double q_disp; /* on each floor's displacement relative to the ground, >= 0 */
    double q_acc;  /* on each floor's absolute acceleration, >= 0 */
    double r;      /* on the damper force, > 0 */
} drths_semiactive_design_t;

/* The most dampers one controller commands. */
#define DRTHS_SEMIACTIVE_MAX_DAMPERS 16

typedef struct drths_semiactive {
    drths_control_mode_t mode;
    int n;     /* degrees of freedom; the state has 2n entries */
    int floor; /* 1-based floor damper 0's top attaches to (floors[0]) */
    int m;     /* dampers (inputs), 1..DRTHS_SEMIACTIVE_MAX_DAMPERS */
    int floors[DRTHS_SEMIACTIVE_MAX_DAMPERS];
    double dt_s;
    double command_max;   /* A or V (damper 0's) */
    double command_const; /* the passive modes' command (damper 0's) */
    double command_max_k[DRTHS_SEMIACTIVE_MAX_DAMPERS];   /* each damper's */
    double command_const_k[DRTHS_SEMIACTIVE_MAX_DAMPERS]; /* each damper's */
    drths_semiactive_design_t design;
    /* Clipped-optimal only (NULL otherwise), all row-major, read-only for the caller. With one
     * damper (m = 1) the vectors below are 2n long: */
    double *gain;            /* m x 2n: f_c,k = -(gain_k[0..n-1] . x + gain_k[n..2n-1] . v) */
    double *Ad, *Bd;         /* 2n x 2n and 2n x m: the ZOH discretisation */
    double *Q, *S;           /* 2n x 2n and 2n x m: state weight and cross term (x_ref^2) */
    double R;                /* force weight incl. the acceleration's force term (Rm[0]) */
    double *Rm;              /* m x m: the force weights (diagonal r term plus acceleration's) */
    double *P;               /* 2n x 2n: the Riccati solution */
    double riccati_residual; /* ||DARE residual||_F / ||P||_F */
    int riccati_iterations;  /* doubling iterations used */
    double spectral_radius;  /* of Ad - Bd gain */
    /* Last call of drths_semiactive_command (damper 0's) or _command_all (each damper's): */
    double desired_force_N; /* f_c (0 in the passive modes) */
    double command;         /* the command returned */
    double desired_k[DRTHS_SEMIACTIVE_MAX_DAMPERS], command_k[DRTHS_SEMIACTIVE_MAX_DAMPERS];
    double *mem;
} drths_semiactive_t;

/* The default weights: q_disp 1, q_acc 1, r 100 (the reasoning is in semiactive.c). RT-safe. */
void drths_semiactive_design_default(drths_semiactive_design_t *d);

/* Sets up the controller for the structure st (its M, C, K; the modes are computed here from
 * copies), the damper between floor-1 (0 = ground) and floor (1-based), tick dt_s, the damper's
 * largest command (A or V, > 0 unless mode is passive-off or fixed at 0), the mode, and the
 * fixed mode's command (ignored otherwise). design may be NULL for the defaults and is used
 * only by clipped-optimal, which computes the LQR gain here (LAPACK) and fails with a message if
 * the Riccati iteration does not converge, its residual exceeds 1e-8 or the closed loop is not
 * stable. init-only. */
int drths_semiactive_init(drths_semiactive_t *s, const drths_structure_t *st, int floor,
                          double dt_s, double command_max, drths_control_mode_t mode,
                          double fixed_command, const drths_semiactive_design_t *design,
                          drths_error_t *err);

/* As drths_semiactive_init for m dampers (1..DRTHS_SEMIACTIVE_MAX_DAMPERS) at floors[k], each
 * with its own largest command command_max[k]; clipped-optimal designs one LQ regulator with m
 * inputs (the dampers' forces, each weighted by r), whose row k is damper k's desired force.
 * init-only. */
int drths_semiactive_init_multi(drths_semiactive_t *s, const drths_structure_t *st, int m,
                                const int *floors, double dt_s, const double *command_max,
                                drths_control_mode_t mode, double fixed_command,
                                const drths_semiactive_design_t *design, drths_error_t *err);

/* As drths_semiactive_init with the experiment's specimen.floor, 1/rate_hz, the damper model's
 * largest command, control.mode and control.command, and the default weights. st is the
 * experiment's structure (drths_setup_structure). init-only. */
int drths_semiactive_init_experiment(drths_semiactive_t *s, const drths_experiment_t *exp,
                                     const drths_structure_t *st, drths_error_t *err);

/* The command (A or V) for the next tick from the state at step k (x, v: n each, relative to
 * the ground, as drths_integrator_t holds them) and the damper force F(k) in N (the convention
 * of drths_numsub_correct). Updates desired_force_N and command. RT-safe: 2n multiply-adds. */
double drths_semiactive_command(drths_semiactive_t *s, const double *x, const double *v,
                                double measured_force_N);

/* Every damper's command (m values into command) from the state and every damper's force
 * (m values); each damper switches on its own desired force and its own force. Updates
 * desired_k and command_k (and desired_force_N, command: damper 0's). RT-safe: 2nm
 * multiply-adds. */
void drths_semiactive_command_all(drths_semiactive_t *s, const double *x, const double *v,
                                  const double *measured_force_N, double *command);

/* The clipped-optimal switching law alone: command_max if (f_c - F) F > 0, else 0. RT-safe. */
double drths_semiactive_clip(double desired_force_N, double measured_force_N, double command_max);

/* The command before the first call (the damper at rest): the passive modes' constant, 0 for
 * clipped-optimal. RT-safe. */
double drths_semiactive_initial_command(const drths_semiactive_t *s);

/* f_c of the last drths_semiactive_command call (N). RT-safe. */
double drths_semiactive_desired_force(const drths_semiactive_t *s);

/* Frees everything and zeroes *s. Safe twice and after a failed _init. init-only. */
void drths_semiactive_close(drths_semiactive_t *s);

/* The experiment's clipped-optimal weights (control.q_disp, q_acc, r) in d, and d; NULL for the
 * other modes (the init functions then take the defaults). init-only. */
const drths_semiactive_design_t *drths_semiactive_design_of(const drths_experiment_t *exp,
                                                            drths_semiactive_design_t *d);

#endif
