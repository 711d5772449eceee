/* The Smith predictor of the numerical site (docs/design.md, "Smith predictor").
 *
 * The measured force F(n) of tick n responds to the displacement history x(..n-L), because the
 * command computed at step k is applied at tick k + L. The force the integrator needs at step n
 * responds to x(..n). The predictor adds what an internal damper model says the difference is:
 *
 *     R(n) = F(n) + [F^(n) - F^(n-L)]
 *
 * where F^(k) is the model force after being driven by x(..k). L is exact (the loop delay of the
 * epoch), so with a model equal to the specimen F(n) = F^(n-L) and R(n) = F^(n) exactly. The
 * model is a drths_damper_t with the experiment's NOMINAL parameters, stepped once per step with
 * the numerical site's own damper displacement and velocity (those of the command it sends) and
 * the damper command. F^(k) for k <= 0 is the rest force.
 *
 * The correction c(m) = F(m) - F^(m-L) is the model's error at the newest measured step m. When
 * the feedback of step n is missing (lost or too late), the measured force is estimated as
 * F^(n-L) + c(m) and R(n) follows from that estimate with the mode's formula:
 *     fixed:  R(n) = F^(n) + c(m)
 *     off:    R(n) = F^(n-L) + c(m)   (off uses F(n) as measured; the model only conceals)
 * Both are computed as a model force plus the correction, so a correction of exactly zero gives
 * exactly the model force (no round-off from adding and subtracting equal numbers).
 *
 * Dead time per tick. Normally the specimen at tick n was driven by step n - L. Around a change
 * of L (a new epoch) the loop pauses the specimen (L raised) or skips steps (L lowered), so the
 * caller names the step k whose command the specimen got at tick n: drths_smith_force_at uses
 * F^(k) in place of F^(n-L). drths_smith_force is drths_smith_force_at with k = n - L.
 *
 * Adaptive mode: the predictor identifies the damper, not a gain. A second damper model, the
 * estimate, runs with the nominal parameters scaled by exp(theta), theta being the log-scales
 * of the five Bouc-Wen parameters that shape the force:
 *     theta = [ln alpha, ln c0, ln c1, ln gb, ln n] relative to the nominal model
 * (alpha and c0, c1 at every command, as specimen.true_scale scales them; gb scales gamma and
 * beta together). A is not identified: the model with A scaled by s is exactly the model with
 * alpha scaled by s and gamma, beta by s^(n-1) (z rescaled by 1/s), for every n, so alpha and
 * gb cover it; identifying all three would leave a direction without information. (The
 * reverse choice, A identified and gamma, beta not, covers them only through
 * g^(1/(n-1)): near n = 1 the pair alpha, A has a direction without information, along which
 * an identifier started at n x0.5 of the presets' n = 2 drifted to the box's corner, alpha x10
 * and A x0.05, and n x0.6 and x0.75 were not identified.) NP more
 * models run with one log-scale raised by delta each; (F_i - F^)/delta is the sensitivity
 * psi_i(k) = dF^(k)/dtheta_i. Per step the ring keeps F^(k) as the affine function
 *     F^(k; theta) = off(k) + psi(k) . theta,   off(k) = F^(k) - psi(k) . theta_k
 * of the parameters, theta_k being the estimate the models ran with at step k. Both model
 * terms of R(n) use the current theta through it, so a change of theta does not show up as a
 * jump of R, and the pair used for identification is exactly a linear regression
 *     F(n) - off(k) = psi(k) . theta + noise,    k the step applied at tick n
 * (the models' state at the step the measurement belongs to: the delay is in the ring, not in
 * the regression). theta is identified by recursive least squares with exponential forgetting
 * (a recursive prediction-error method: the regressor is the model's own sensitivity), on the
 * pair divided by F_scale (so the covariance is that of the log-scales), with these guards:
 *   - no update when |psi(k)| < min_signal_rel F_scale (the damper barely moves: the force
 *     does not depend on the parameters, so nothing can be learnt and nothing may drift), nor
 *     when |error| < dead_zone_rel F_scale, nor from concealed feedback;
 *   - each update moves no log-scale by more than max_step (the linearisation above stays
 *     valid over the L steps the regression lags the models);
 *   - a parameter at its bound whose step points out of the box is held for that update (its
 *     regressor entry and gain zero, its covariance row kept), so the others fit the pair with
 *     it fixed; theta is then clipped into the box [ln scale_min, ln scale_max] (and n >= 1);
 *   - the covariance trace is limited to trace_max (no wind-up under forgetting) and reset to
 *     p0 I if it stops being positive.
 * Fall-back: the errors of the estimate, e_a = F(n) - F^(k; theta), and of the nominal model,
 * e_n = F(n) - F_nom(k), and the force F(n) are averaged (squares, same forgetting) over the
 * pairs with signal. After arm_pairs such pairs, the predictor falls back to the nominal model
 * for the rest of the run (it is then the fixed predictor) when
 *   - the estimate explains too little of the force: mean e_a^2 > unexplained_max mean F^2
 *     (a specimen the Bouc-Wen model cannot describe, or a force unrelated to the motion);
 *   - or it predicts worse than the nominal model: mean e_a^2 > worse_max mean e_n^2;
 * and at once when a model force or theta stops being finite. The reason and the step are kept
 * (drths_smith_fallback_reason) for the summary and the end-of-run message.
 * F_scale is the nominal model's largest hysteretic force alpha z_max over the command range.
 *
 * A bank of identifiers started from different n. The force depends on n through
 * z_max = (A / (gamma + beta))^(1/n), an exponent of an exponent: the identification above,
 * started from the nominal n, finds the damper when n is within about x0.75..x1.5 of the truth
 * and is trapped in a wrong valley further out (n x0.5 of the 200-kN damper gives 8 times its
 * force; the estimate raises alpha and ends far from the damper). So up to
 * DRTHS_SMITH_MEMBERS identifiers run side by side, identical but for the factor on n they
 * start from (ap.n_starts, default x1, x0.6, x2; starts outside the box are clipped into it and
 * a start equal to an earlier one is dropped). x0.6, not x0.5: started at x0.5 (n = 1, on n's
 * lower bound) the member led a true n x0.75 from 0.7 s with its start's parameters and adapted
 * through the strong motion with 7-9 % force error (the study's n-x0.75: 1.92 % displacement
 * error); from x0.6 it finds x0.75 within 2 s (0.71 %) and, its n held at the bound, x0.5 too
 * (0.38 %). Each has its own estimate, sensitivity models,
 * ring, theta and covariance; the nominal model, its ring and the fall-back means are shared.
 * The predictor follows a leader: the first member at the start; after switch_arm pairs with
 * signal, another member takes the lead when its mean squared error e_a^2 is below
 * switch_ratio times the leader's. The model force the predictor uses is the members'
 * mixture sum_j w_j F^_j(k; theta_j); the weights glide towards the leader (1 for it, 0 for the
 * others) by at most glide per pair, so a change of leader is no step of R (a full change takes
 * 1 / glide pairs). The fall-back tests judge the leader. A member whose force stops being
 * finite is dropped (its weight goes to the others); the predictor falls back only when no
 * member is left. The scales, the gain and the error reported are the leader's.
 *
 * Cost per step: 1 + M (1 + NP) damper steps for M members (the nominal model for hist and the
 * fall-back; per member the estimate and its NP perturbations) and M RLS updates of NP
 * parameters. The estimate's substeps follow its stiffness (the rule of damper.h at the nominal
 * v_max_m_s), at least the nominal model's and at most max_substeps, so the work per step is
 * bounded. RT-safe; nothing is allocated after init.
 *
 * Ownership: the caller owns drths_smith_t; _init allocates the F^ history ring, _close frees it
 * (safe twice, and on a zeroed struct). A failed _init leaves nothing to free.
 */
#ifndef DRTHS_SMITH_H
#define DRTHS_SMITH_H

#include <stddef.h>
#include <stdint.h>

#include "common/config/enums.h" /* drths_smith_mode_t */
#include "common/models/damper.h"
#include "common/platform/error.h"

/* The identified parameters: log-scales of these nominal parameters. */
enum {
    DRTHS_SMITH_P_ALPHA,
    DRTHS_SMITH_P_C0,
    DRTHS_SMITH_P_C1,
    DRTHS_SMITH_P_GB, /* gamma and beta together */
    DRTHS_SMITH_P_N,
    DRTHS_SMITH_NPAR
};

/* The most identifiers the adaptive mode runs side by side. */
#define DRTHS_SMITH_MEMBERS 3

/* Tuning of the adaptive mode (see the file comment). */
typedef struct drths_smith_adapt_params {
    double scale_min[DRTHS_SMITH_NPAR], scale_max[DRTHS_SMITH_NPAR]; /* box of the factors
                               (default alpha, c0, c1 0.1..10, A 0.05..20, n 0.5..2.5) */
    double delta;             /* log-scale step of the sensitivity models (default 0.01) */
    double forgetting;        /* lambda in (0, 1] (default 0.9998: memory 5000 steps) */
    double p0;                /* initial covariance of each log-scale (default 1) */
    double trace_max;         /* covariance trace limit (default 20) */
    double max_step;          /* largest change of a log-scale per update (default 0.002) */
    double min_signal_rel;    /* no update below this |psi| / F_scale (default 0.01) */
    double dead_zone_rel;     /* no update below this |error| / F_scale (default 2e-4) */
    int max_substeps;         /* substeps cap of the estimate's models (default 16) */
    double arm_pairs;         /* pairs with signal before the fall-back tests (default 5000) */
    double unexplained_max;   /* fall back above this mean e_a^2 / mean F^2 (default 0.5) */
    double worse_max;         /* fall back above this mean e_a^2 / mean e_n^2 (default 2) */
    int members;              /* identifiers in the bank, 1..DRTHS_SMITH_MEMBERS (default 3) */
    double n_starts[DRTHS_SMITH_MEMBERS]; /* their starting factors on n (default 1, 0.6, 2) */
    double switch_arm;   /* pairs with signal before the lead may change (default 1000) */
    double switch_ratio; /* a member leads below this e_a^2 / the leader's (default 0.3) */
    double glide;        /* largest change of a mixing weight per pair (default 0.001) */
} drths_smith_adapt_params_t;

/* What the identification did so far. */
typedef struct drths_smith_adapt_stats {
    uint64_t updates;        /* RLS updates made */
    uint64_t low_signal;     /* pairs skipped: |psi| below the threshold */
    uint64_t dead_zone;      /* pairs skipped: error inside the dead zone */
    uint64_t step_limited;   /* updates whose change was scaled down to max_step */
    uint64_t projections;    /* updates whose result was clipped to the box */
    uint64_t trace_limited;  /* updates after which the covariance was scaled down */
    uint64_t resets;         /* covariance resets (lost positiveness) */
    uint64_t pairs;          /* pairs with signal (averaged into the error means) */
    int fell_back;           /* 1 once the predictor fell back to the nominal model */
    int64_t fallback_step;   /* the step n at which it did, -1 before */
    const char *fallback_reason; /* static text, NULL before */
} drths_smith_adapt_stats_t;

/* One identifier of the bank (see the file comment). */
typedef struct drths_smith_member {
    drths_damper_t est;                    /* the estimate, at theta */
    drths_damper_t sens[DRTHS_SMITH_NPAR]; /* at theta + delta e_i */
    double *phi; /* [off(k), psi(k)] at phi[(k % cap) * (NPAR + 1)], owned */
    double phi_rest[DRTHS_SMITH_NPAR + 1];
    double theta[DRTHS_SMITH_NPAR];
    double P[DRTHS_SMITH_NPAR][DRTHS_SMITH_NPAR];
    double e2, m2;                /* forgetting sums of e_a^2 and of its model force squared */
    double n_start;               /* the factor on n it started from */
    double w;                     /* its weight in the mixture */
    int dropped;                  /* its force stopped being finite: out of the bank */
    drths_smith_adapt_stats_t st; /* its counters (the fall-back fields unused) */
} drths_smith_member_t;

typedef struct drths_smith {
    drths_smith_mode_t mode;
    drths_damper_t model; /* nominal damper */
    double *hist;         /* F^(k) of the nominal model at hist[k % cap] for the last cap steps */
    /* adaptive only (nm 0 otherwise) */
    drths_smith_adapt_params_t ap;
    drths_damper_params_t nominal;             /* the parameters theta scales */
    drths_smith_member_t m[DRTHS_SMITH_MEMBERS];
    int nm;   /* members in the bank */
    int lead; /* the leader's index */
    uint64_t lead_changes;
    double lo[DRTHS_SMITH_NPAR], hi[DRTHS_SMITH_NPAR]; /* the box of theta */
    double f_scale_N;     /* F_scale */
    double e2_nominal, f2, m2_nominal; /* forgetting means (sums), shared */
    drths_smith_adapt_stats_t st; /* the predictor's: pairs and the fall-back */
    size_t cap;
    int64_t step;         /* newest k with F^(k) known (0 after reset) */
    uint32_t L;
    double rest_force_N;  /* F^(k) for k <= 0 */
    double last_corr_N;   /* c(m) of the newest measured step, 0 before any */
    int64_t corr_step;    /* m, -1 before any */
} drths_smith_t;

/* The default tuning of the adaptive mode. RT-safe. */
void drths_smith_adapt_default(drths_smith_adapt_params_t *ap);

/* Builds the model from nominal damper parameters at dt_s with a history ring of `history`
 * steps (at least L_max + 1 for the largest dead time the run may use). Adaptive mode uses ap
 * (NULL: the defaults) and needs a Bouc-Wen damper model (-ENOTSUP otherwise, naming
 * numerical.smith). init-only. */
int drths_smith_init_ex(drths_smith_t *s, drths_smith_mode_t mode,
                        const drths_damper_params_t *nominal, double dt_s, size_t history,
                        const drths_smith_adapt_params_t *ap, drths_error_t *err);

/* drths_smith_init_ex with the default tuning. init-only. */
int drths_smith_init(drths_smith_t *s, drths_smith_mode_t mode,
                     const drths_damper_params_t *nominal, double dt_s, size_t history,
                     drths_error_t *err);

/* At rest (x = 0) with the damper command's steady state, step 0, dead time L, no correction,
 * theta at the nominal model, the covariance at p0 I and no fall-back (adaptive). Returns 0, or
 * -ERANGE when L + 1 exceeds the history ring. RT-safe. */
int drths_smith_reset(drths_smith_t *s, double command, uint32_t L);

/* Changes the dead time (a new epoch). -ERANGE, changing nothing, when L + 1 exceeds the ring.
 * RT-safe. */
int drths_smith_set_delay(drths_smith_t *s, uint32_t L);

/* Steps the model to step k + 1 with the damper displacement (m) and velocity (m/s) of that
 * step and the damper command; returns F^(k+1) (N). RT-safe. */
double drths_smith_step(drths_smith_t *s, double disp_m, double vel_m_s, double command);

/* F^(k): the rest force for k <= 0, NaN for a step not yet computed or already overwritten in
 * the ring. RT-safe. */
double drths_smith_model(const drths_smith_t *s, int64_t k);

/* R(n) from the measured force F(n) (n <= the model's step), and records the correction
 * F(n) - F^(n-L) for concealment. Adaptive: first identifies from (F(n), psi(n-L)). RT-safe. */
double drths_smith_force(drths_smith_t *s, int64_t n, double measured_N);

/* As drths_smith_force with the specimen at tick n driven by step k (k <= n) instead of n - L.
 * RT-safe. */
double drths_smith_force_at(drths_smith_t *s, int64_t n, int64_t k, double measured_N);

/* The estimate's force gain: the RMS of its force over the RMS of the nominal model's force,
 * both averaged with the forgetting over the pairs with signal (1 for fixed and off, before
 * any pair and after a fall-back). RT-safe. */
double drths_smith_gain(const drths_smith_t *s);

/* The identified factor on nominal parameter i (DRTHS_SMITH_P_*) of member b (NULL: the leader):
 * exp(theta_i); 1 for fixed and off. RT-safe. */
double drths_smith_scale(const drths_smith_t *s, const drths_smith_member_t *b, int i);

/* The error of member b (NULL: the leader) relative to the measured force, sqrt(mean e_a^2 /
 * mean F^2) over the pairs with signal; NaN before any pair and for fixed and off. RT-safe. */
double drths_smith_error_rel(const drths_smith_t *s, const drths_smith_member_t *b);

/* The leading identifier of the bank, NULL for fixed and off. RT-safe. */
const drths_smith_member_t *drths_smith_leader(const drths_smith_t *s);

/* Why the adaptive predictor fell back to the nominal model, or NULL while it identifies (and
 * for fixed and off). RT-safe. */
const char *drths_smith_fallback_reason(const drths_smith_t *s);

/* R(n) when F(n) is missing: the model's estimate of F(n) with the last correction (see the file
 * comment). Changes nothing. RT-safe. */
double drths_smith_conceal(const drths_smith_t *s, int64_t n);

/* Frees the ring. Safe twice. init-only. */
void drths_smith_close(drths_smith_t *s);

#endif
