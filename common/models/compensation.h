/* Actuator compensation (how the actuator site turns the commanded displacement into the drive
 * signal) and the online tracking indicators.
 *
 * At tick t the actuator site knows the desired displacement r (the command of the numerical
 * site) at the ticks t-3 .. t (already applied or being applied) and, through the playout
 * buffer, at some future ticks t+1 .. t+k (drths_playout_lookahead). drths_comp_drive turns
 * them into the drive signal u(t) written to the servo-valve controller at tick t.
 *
 * Timing convention (the one of common/models/specimen.h): with an I/O delay of d ticks, the drive
 * written at tick t is held by the converter over [t+d-1, t+d] and the plant's displacement at
 * tick t+d is the first reading that sees it. A held value best represents the continuous drive
 * at the middle of its interval, so the compensator aims its drive at the instant
 *
 *     t + s,   s = d - 1/2 ticks   (the "lead" of the feedforward; 0.5 for the usual d = 1),
 *
 * i.e. it previews the I/O delay less the half tick of the zero-order hold. (Previewing a whole
 * d ticks would make the actuator lead by half a tick: about 0.3 % RMS error at 5 Hz, 5 kHz.)
 *
 * Modes (drths_compensation_t):
 *  - NONE: u(t) = r(t). The actuator lags by its own dynamics (about 9 ms) plus the I/O delay.
 *  - POLYNOMIAL (Horiuchi et al. 1999): u(t) = r(t + tau), where r(t + tau) is the cubic
 *    through four known samples extrapolated to t + tau (common/models/lagrange.h). tau is
 *    the plant's delay: by default the low-frequency group delay of the design model,
 *    1/p + a/b (8.95 ms for the average model), plus the lead s above; see
 *    drths_comp_set_poly_lead. The four samples end at the newest real sample at or before
 *    t + tau: r(t+m-3 .. t+m), m = min(k, floor(tau)) with k future samples given, so only
 *    tau - m ticks are extrapolated; with no lookahead they are r(t-3 .. t) and this is exactly
 *    Horiuchi's method. It corrects the delay only, not the plant's amplitude.
 *  - FEEDFORWARD_AVERAGE and FEEDFORWARD (Phillips & Spencer 2013): the inverse of the design model
 *    G(s) = K/((s+p)(s^2+a s+b)),
 *        u = a0 r + a1 r' + a2 r'' + a3 r''',
 *        a0 = p b / K,  a1 = (b + a p) / K,  a2 = (a + p) / K,  a3 = 1 / K,
 *    with r and its derivatives evaluated at t + s. They are those of a smooth estimate: the
 *    least-squares polynomial through the window of DRTHS_COMP_FIT_SAMPLES (96) commands that
 *    ends at the newest previewed one, r(t - 95 + n .. t + n) with n <= n_need future samples
 *    (n_need = c + DRTHS_COMP_FIT_PREVIEW, c = max(0, ceil(s - 1/2)): 32 for d <= 1, so with
 *    the whole preview the window is centred on t + s), of the highest degree, at most
 *    DRTHS_COMP_FIT_DEGREE (5), at which no command weighs more than DRTHS_COMP_FIT_BOUND (2)
 *    in the drive of the design model (sum_k a_k times the k-th derivative's weight). So a
 *    one-sample irregularity of the command (a spike, or a tick that advances two samples'
 *    worth) moves the drive by at most twice its size times the adaptive factors, while a real
 *    command, which over the 19 ms window is a polynomial of that degree to about 1e-4 of its
 *    amplitude at 15 Hz, is followed without delay (the fit is exact for polynomials of its
 *    degree). Why not fewer samples: the inverse multiplies the third derivative by 1/K =
 *    6.25e-8 s^3 and the second by (a + p)/K = 2.5e-5 s^2, and the seven-point interpolating
 *    stencil used before weighed a single command up to 4.25/dt^3 in the third derivative and
 *    33171 in the drive: a 6 um irregularity read as a jerk of 3e6 m/s^3, and only the
 *    derivative limits (below) held the drive to millimetres, swinging from one sign of the
 *    limits to the other as the irregularity crossed the stencil (issue 28). With degree 5 over
 *    96 samples and the whole preview no command weighs more than 0.31 in the design model's
 *    drive. The fit's history is the commands of the previous calls (drths_comp_drive), kept
 *    while the caller's ticks follow each other. The weights (Forsythe's orthogonal
 *    polynomials, no allocation) of a full history are computed at init for every preview
 *    length 0 .. n_need, so a preview whose length changes every tick costs nothing on the RT
 *    thread; while the history fills (the first 96 ticks) they are recomputed when the
 *    window's shape changes. The two modes compute the same thing; the
 *    difference is what the caller does. FEEDFORWARD_AVERAGE keeps the average model (the
 *    paper's method). For FEEDFORWARD (the experiment file's `feedforward`, beyond the paper)
 *    the caller schedules the inverse on the damper current (drths_comp_schedule) and feeds it
 *    the COMMANDED current through a model of the damper's current dynamics
 *    (drths_comp_current_model, drths_comp_set_command): the 0 A and 2.5 A actuators differ
 *    from the average model by about +/- 1 ms of lag, which alone costs about 2 % RMS at
 *    0-5 Hz. Until it is scheduled, FEEDFORWARD uses the model given to init.
 *
 * Shorter preview: when fewer future samples are given than the feedforward asks for
 * (n_future < n_need), the window takes more past commands instead (it still ends at the newest
 * real sample), and the tick is counted in drths_comp_t.extrapolated_ticks, the missing samples
 * in extrapolated_samples: the fit then extrapolates its polynomial from the newest real sample
 * to t + s. The bound on the weights then lowers the degree as the preview shortens (with the
 * design model: degree 5 down to 18 future samples, 4 down to 11, 3 below), so the
 * amplification stays bounded and the tracking of fast commands degrades instead: measured with
 * drths-tracking, 0-15 Hz, the adaptive mode's RMS error is the noise floor (0.37 %) from 20
 * future samples on, 0.5 % with 14 and 3.7 % with 8; at 0-5 Hz it stays at the floor (0.08 %)
 * down to 14 and 0.1 % with 8.
 *
 * Adaptive compensation (ADAPTIVE). A lab's actuator is never its identified model: a plant
 * 30 % slower than the model costs the fixed feedforward 6 % RMS at 0-5 Hz. The adaptive mode
 * keeps the feedforward's structure, u = sum_k theta_k a_k r^(k) (k = 0..3, a_k those of the
 * design model, scheduled on the current when the caller schedules it), and identifies the four
 * factors theta_k online, in the manner of the adaptive time-series compensator of Chae,
 * Kazemibidokhti & Ricles (2013), who fit u = a0 x + a1 x' + a2 x'' by least squares over a
 * moving window from the measured displacement and the command. Here the fit is of the full
 * third-order inverse, relative to the model (so theta = 1 is the model and each factor has the
 * same scale), and the derivatives of the noisy measurement come from a state-variable filter
 * (Young 1981): the same filter F(s) = w^4 / (s + w)^4 (DRTHS_COMP_ADAPT_FILTER_HZ) is applied
 * to the measured displacement x, whose filter states are then s^k F x, and to the drive u.
 * A plant whose inverse is sum theta_k a_k s^k then satisfies exactly
 *     F u = sum_k theta_k a_k (s^k F x)
 * shifted by the lead s = d - 1/2 ticks (the drive written at tick t shows at t + s: the filter
 * states at the ticks t + d - 1 and t + d are averaged). This is linear in theta: the normal
 * equations are accumulated with exponential forgetting (time constant
 * DRTHS_COMP_ADAPT_WINDOW_S, the moving window) and solved each tick (4 x 4 Cholesky). The
 * drive u depends on the desired displacement only, not on the measurement noise, so the fit
 * has no closed-loop bias. Bounds: a tick whose regressor is no larger than the sensor noise
 * (no excitation: the actuator at rest) leaves the sums untouched, so a quiet stretch neither
 * forgets nor drifts; a small ridge pulls the solution towards the current estimate (theta = 1,
 * the model, before any excitation); each factor is clamped to [lo_k, hi_k], counted in
 * clamped; a solution that is not finite or a matrix that is not positive definite returns to
 * the model (theta = 1), counted in fallbacks. The factors are drths_comp_t.theta, for the
 * record.
 *
 * Bounds from the plant's plausible range. A bound is a ceiling on what the compensator can
 * learn: until issue 30 every factor was held in [1/4, 4], and a plant with gain 1.2, bandwidth
 * x0.6, real pole x1.4 and complex pair x0.75 (well inside what a lab meets) needs
 * theta3 = 1 / (g fr fc^2) = 4.9: theta3 sat at 4 on 297 000 of 300 000 ticks and 0-15 Hz
 * tracking missed its goal (2.2 % for 1.7 %). So the bounds are derived instead from a range
 * of plants (drths_comp_plant_range_t: an interval for each factor of drths_plant_scale_t, by
 * default gain 0.7 .. 1.4 and bandwidth, real pole and complex pair each x0.5 .. x2): the
 * inverse of a plant scaled by (g, f, r, c) is the model's inverse with the factors
 *     theta0 = 1/g,  theta1 = (b/(f r) + a p/(f c)) / ((b + a p) g),
 *     theta2 = (a/(f^2 r c) + p/(f^2 c^2)) / ((a + p) g),  theta3 = 1 / (g f^3 r c^2),
 * each monotone in every factor, so its extremes over the box are at the box's corners;
 * [lo_k, hi_k] is the smallest and largest value of theta_k over the 16 corners, over the
 * models the inverse is scheduled between (the design model, and the 0 A and high-current
 * models once scheduled), widened by DRTHS_COMP_ADAPT_MARGIN so that a plant on the range's
 * edge is not identified against its bound (the real plant is not exactly a scaled model).
 * With the default range: theta0 in [0.57, 1.79], theta3 in [0.0089, 114]. A factor that sits
 * at its bound anyway says the plant is outside the range: the ticks each factor spent at a
 * bound are counted (at_bound_ticks, of observed ticks) and reported in summary.json. The old
 * symmetric bound [1/b, b] remains (drths_comp_set_adaptive with b > 0) for a lab that wants it.
 *
 * Tracking indicators (drths_tracking_t), accumulated online from the pairs (desired xd,
 * measured xm) of each tick:
 *  - RMS error norm (Phillips & Spencer 2013, eq 31), in percent:
 *        100 sqrt( sum (xm - xd)^2 / sum xd^2 ).
 *  - Tracking indicator TI (as in the LNEC-HS platform, after Mercan & Ricles 2009), in m^2:
 *    the signed area enclosed by the curve of xm (vertical) against xd (horizontal) and the
 *    diagonal,
 *        TI = 0.5 sum_i A_i,   A_i = xd(i-1) xm(i) - xd(i) xm(i-1),
 *    i.e. Mercan & Ricles' 0.5 (A - TA) with A_i = A_(i-1) + (xd(i) + xd(i-1))(xm(i) - xm(i-1))/2
 *    and TA_i = TA_(i-1) + (xm(i) + xm(i-1))(xd(i) - xd(i-1))/2 (their difference per step is
 *    the A_i above: twice the area of the triangle origin, P(i-1), P(i)). It is the shoelace
 *    area swept about the origin; the diagonal xm = xd itself encloses none. Over a closed loop
 *    it is the loop's area: positive when the measured displacement LAGS the desired (the loop
 *    runs counter-clockwise), negative when it leads; pi X^2 sin(phi) per cycle of a sine of
 *    amplitude X lagging by phi. Its growth rate tells the lab the actuator is lagging before
 *    the RMS error says how much.
 *
 * Ownership: the caller owns drths_comp_t and drths_tracking_t (no heap memory inside; the
 * model passed to init is copied). Each belongs to one thread.
 */
#ifndef DRTHS_COMPENSATION_H
#define DRTHS_COMPENSATION_H

#include <stdint.h>

#include "common/models/damper.h"
#include "common/models/plant.h"
#include "common/platform/error.h"

typedef enum drths_compensation {
    DRTHS_COMPENSATION_NONE = 0,   /* "none" */
    DRTHS_COMPENSATION_POLYNOMIAL, /* "polynomial": third-order extrapolation (Horiuchi) */
    /* "feedforward": the inverted three-pole model scheduled on the damper current. The model
     * follows the damper's COMMANDED current passed through a model of the damper's current
     * dynamics (the nominal damper's, common/models/damper.h), interpolated between the 0 A and 2.5 A
     * models of Phillips & Spencer 2013 (common/models/plant.h); nothing of the plant's internal state
     * is used. */
    DRTHS_COMPENSATION_FEEDFORWARD,
    /* "feedforward-average": the inverted AVERAGE three-pole model (Phillips & Spencer 2013
     * as published). */
    DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE,
    /* "adaptive": the feedforward (scheduled when the caller schedules it) with each of its
     * four coefficients multiplied by a factor identified online from the drive written and
     * the displacement measured (see "Adaptive compensation" above). */
    DRTHS_COMPENSATION_ADAPTIVE
} drths_compensation_t;

/* Largest I/O delay the compensator previews (the experiment file allows 0..10). */
#define DRTHS_COMP_MAX_IO_DELAY 32
/* The feedforward's derivatives: the least-squares polynomial of degree at most
 * DRTHS_COMP_FIT_DEGREE over DRTHS_COMP_FIT_SAMPLES commands, reaching DRTHS_COMP_FIT_PREVIEW
 * ticks beyond the tick nearest t + s, whose drive weighs no command more than
 * DRTHS_COMP_FIT_BOUND (see the header comment). */
#define DRTHS_COMP_FIT_SAMPLES 96
#define DRTHS_COMP_FIT_PREVIEW 32
#define DRTHS_COMP_FIT_DEGREE 5
#define DRTHS_COMP_FIT_BOUND 2.0
/* The most future samples the fit can ask for (n_need, at the largest I/O delay). */
#define DRTHS_COMP_FIT_MAX_FUTURE (DRTHS_COMP_FIT_PREVIEW + DRTHS_COMP_MAX_IO_DELAY + 1)
/* Past samples drths_comp_drive takes: r(t-3) .. r(t). */
#define DRTHS_COMP_PAST 4

/* Default time constant of the adaptive identification's exponential window (s) and the
 * cut-off of its state-variable filter (Hz). */
#define DRTHS_COMP_ADAPT_WINDOW_S 2.0
#define DRTHS_COMP_ADAPT_FILTER_HZ 40.0
/* How far beyond the extremes over the plant range each factor's bound lies (a factor). */
#define DRTHS_COMP_ADAPT_MARGIN 1.25

/* The plants the adaptive compensator expects: for each factor of drths_plant_scale_t (0 gain,
 * 1 bandwidth, 2 real pole, 3 complex pole) an interval lo[i] .. hi[i] (0 < lo <= hi). */
typedef struct drths_comp_plant_range {
    double lo[4], hi[4];
} drths_comp_plant_range_t;

/* The default range: gain 0.7 .. 1.4, bandwidth, real pole and complex pair each 0.5 .. 2. */
extern const drths_comp_plant_range_t DRTHS_COMP_PLANT_RANGE_DEFAULT;

/* The online identification of the adaptive mode (drths_comp_observe). */
typedef struct drths_comp_adapt {
    double ad[16], bd[4]; /* the state-variable filter, discretised at dt */
    double zx[4], zu[4];  /* its states on the measured displacement and on the drive */
    double px[4];         /* zx of the previous observation */
    /* The drive's filtered value and the scheduled coefficients of the last
     * DRTHS_COMP_MAX_IO_DELAY + 1 ticks, to pair each drive with the measurement that shows it. */
    double fu[DRTHS_COMP_MAX_IO_DELAY + 1];
    double as[DRTHS_COMP_MAX_IO_DELAY + 1][4];
    int pos;
    double lambda;      /* forgetting factor per informative tick */
    /* theta_k in [lo[k], hi[k]]: from range (derived) or [1/bound, bound] (bound > 0). */
    double lo[4], hi[4];
    double bound;                   /* the symmetric bound, or 0: derived from range */
    drths_comp_plant_range_t range; /* the plants the derived bounds admit */
    double ridge;       /* weight of the pull towards the current estimate, m^2 */
    double excite_m;    /* least dynamic part of a regressor that is used, m */
    double N[16], q[4]; /* exponentially weighted normal equations */
    uint64_t observed;  /* drths_comp_observe calls */
    uint64_t updates;   /* ticks whose regressor was informative */
    uint64_t clamped;   /* solutions cut to the bounds */
    uint64_t fallbacks; /* solutions refused (not finite, singular): back to theta = 1 */
    /* Observed ticks (drths_comp_observe calls) after which theta_k sat at lo[k] or hi[k]. */
    uint64_t at_bound_ticks[4];
    unsigned pinned; /* bit k: theta_k is at a bound now */
} drths_comp_adapt_t;

/* A model of the damper's current dynamics (drths_comp_current_model): the commanded current
 * in, the effective current the plant follows out. */
typedef struct drths_comp_current {
    int enabled;
    int n, out;            /* state size (0, 1 or 3) and the output state */
    double ad[9], bd[3];   /* zero-order-hold discretisation at dt */
    double s[3];           /* state */
    double pole;           /* lag pole (rad/s), for the steady state */
    double command_max;    /* commands are clamped to [0, command_max] like the damper's */
    double scale;          /* plant amperes per unit of effective command */
    double effective;      /* the model's output after the last command, A or V */
} drths_comp_current_t;

typedef struct drths_comp {
    drths_compensation_t mode;
    drths_plant_model_t model; /* design model (the average one in the paper) */
    double dt_s;
    int io_delay_ticks;
    double lead_ticks;      /* s = io_delay_ticks - 1/2: where the feedforward aims */
    double a[4];            /* feedforward coefficients a0 .. a3 (SI: s^0 .. s^3) */
    int n_need;             /* future samples the feedforward's fit asks for */
    /* The fit's history: the newest n_hist commands r(.. t), oldest first. */
    double hist[DRTHS_COMP_FIT_SAMPLES];
    int n_hist;
    /* The fit's window, r(t - fit_past + 1 .. t + fit_future) (-1 before the first drive), and
     * its weights: k-th derivative (SI) at t + s = sum dw[k][j] r(t - fit_past + 1 + j). */
    int fit_past, fit_future, fit_degree;
    double dw[4][DRTHS_COMP_FIT_SAMPLES];
    int dw_past, dw_future; /* the window dw was computed for (-1: none) */
    /* The weights once the history is full (DRTHS_COMP_FIT_SAMPLES commands), for each number
     * of future samples 0 .. n_need, computed at init: a preview whose length changes every
     * tick (commands arriving just ahead of their ticks) costs no refit on the RT thread. */
    double dw_full[DRTHS_COMP_FIT_MAX_FUTURE + 1][4][DRTHS_COMP_FIT_SAMPLES];
    int deg_full[DRTHS_COMP_FIT_MAX_FUTURE + 1];
    double a_design[4]; /* a0 .. a3 of the model given to init, for the fit's bound */
    /* Current scheduling (drths_comp_schedule): denominator coefficients [p b, b + a p, a + p, 1]
     * and K of the models at 0 A and at sched_i_hi_A. */
    int scheduled;
    double sched_lo[5], sched_hi[5], sched_i_hi_A, sched_current_A;
    drths_plant_model_t sched_model[2]; /* the 0 A and high-current models */
    drths_comp_current_t cur; /* current dynamics model (drths_comp_current_model) */
    double poly_lead_ticks; /* tau of the polynomial mode, in ticks */
    uint64_t ticks;              /* drths_comp_drive calls */
    uint64_t extrapolated_ticks; /* feedforward ticks that lacked future samples */
    uint64_t extrapolated_samples; /* future samples extrapolated for them */
    /* Derivative limits of the feedforward (drths_comp_set_limits; 0 = none) and the ticks
     * where one of them cut the desired trajectory's acceleration or jerk. */
    double max_acc_m_s2, max_jerk_m_s3;
    uint64_t limited_ticks;
    /* Factors on a[0..3] (all 1 except in the adaptive mode) and the identification. */
    double theta[4];
    drths_comp_adapt_t ad;
} drths_comp_t;

/* Prepares mode for a plant whose design model is `model` (required for FEEDFORWARD and for
 * the default lead of POLYNOMIAL; may be NULL for NONE) behind an I/O delay of io_delay_ticks
 * (0 .. DRTHS_COMP_MAX_IO_DELAY) at the tick dt_s. Computes the feedforward coefficients; the
 * fit's history starts empty. Errors name the field ("compensation.mode",
 * "compensation.model.K", "compensation.io_delay_ticks", "compensation.dt_s"). init-only. */
int drths_comp_init(drths_comp_t *c, drths_compensation_t mode, const drths_plant_model_t *model,
                    int io_delay_ticks, double dt_s, drths_error_t *err);

/* Sets tau of the polynomial mode, in seconds (>= 0, at most 1 s). The default after init is
 * 1/p + a/b of the model plus the lead (io_delay_ticks - 1/2) ticks. init-only. */
int drths_comp_set_poly_lead(drths_comp_t *c, double lead_s, drths_error_t *err);

/* Beyond Phillips & Spencer 2013 (who design on the average model only): lets the feedforward
 * follow the damper current the way the plant does. The inverse's coefficients become those of
 * the model whose polynomial coefficients (p b, b + a p, a + p and K) are interpolated linearly
 * between lo (0 A) and hi (at i_hi_A > 0) at the current given to drths_comp_set_current, clamped to
 * [0, i_hi_A] (the virtual plant interpolates its discrete matrices the same way, which agrees
 * to first order in dt). Until the first drths_comp_set_current the current is 0. FEEDFORWARD
 * or FEEDFORWARD_AVERAGE only (-EINVAL otherwise). init-only. */
int drths_comp_schedule(drths_comp_t *c, const drths_plant_model_t *lo, const drths_plant_model_t *hi,
                        double i_hi_A, drths_error_t *err);

/* The damper's effective current now (A), for a scheduled feedforward; ignored otherwise. The
 * actuator site knows the commanded current; its effective value comes from the damper's known
 * current dynamics (common/models/damper.h). RT-safe. */
void drths_comp_set_current(drths_comp_t *c, double current_A);

/* What a lab knows: the damper current it COMMANDS, not the current inside the coil. This
 * installs a model of the damper's current dynamics (common/models/damper.h; from dp, the nominal damper:
 * for PHILLIPS2013 (s + 9 pi) / (9 (s + pi)) then the 75 Hz second-order low-pass, for
 * SPENCER1997 u' = -eta (u - v), scaled to the plant's 0..2.5 A like common/models/specimen.h; other
 * dampers: always 0 A), discretised exactly at dt. Afterwards drths_comp_set_command feeds it
 * the commanded current each tick and schedules the feedforward on its output. Requires
 * drths_comp_schedule first (-EINVAL otherwise). Starts at rest at command 0. init-only. */
int drths_comp_current_model(drths_comp_t *c, const drths_damper_params_t *dp,
                             drths_error_t *err);

/* Puts the current model at its steady state for a constant command (clamped to
 * [0, command_max]) and schedules the feedforward there. No effect without a current model.
 * RT-safe. */
void drths_comp_reset_command(drths_comp_t *c, double command);

/* One tick of the current model with the damper command written at this tick (clamped to
 * [0, command_max]); the feedforward is then scheduled on the model's output
 * (drths_comp_set_current). No effect without a current model. RT-safe. */
void drths_comp_set_command(drths_comp_t *c, double command);

/* Future samples the mode uses at most: n_need for the feedforward modes, floor(tau) for
 * POLYNOMIAL (it
 * uses fewer when they are not there, without counting), 0 for NONE. This is
 * how far ahead the playout buffer should be read. RT-safe. */
int drths_comp_lookahead_needed(const drths_comp_t *c);

/* The drive u(t) (m) for tick t. past[0..3] = r(t-3) .. r(t), oldest first; future[0..n-1] =
 * r(t+1) .. r(t+n) (n_future >= 0; future may be NULL when n_future is 0; samples beyond what
 * the mode uses are ignored). The feedforward modes keep r(t) for their fit's history: when
 * past[0..2] are not the last three commands it kept (a first call, or ticks that do not follow
 * each other), the history starts again from past[0..3]. A shorter preview than the mode asks
 * for is counted (see the header comment). RT-safe. */
double drths_comp_drive(drths_comp_t *c, const double *past, const double *future, int n_future);

/* Limits on the acceleration and jerk of the desired trajectory that the feedforward
 * (FEEDFORWARD, FEEDFORWARD_AVERAGE, ADAPTIVE) feeds through its inverse model, m/s^2 and
 * m/s^3 (0 = no limit; both >= 0, else -EINVAL naming the field). Above a limit the fit's
 * derivative is clamped to it (the drive is then the inverse of a trajectory with that
 * acceleration or jerk) and the tick is counted in limited_ticks. A last line only: the fit
 * already spreads a kink (an epoch's pause, a rejoin) over its window, so the commands' own
 * derivatives (jerk about 300 m/s^3 in the example) stay far below the default limits.
 * init-only. */
int drths_comp_set_limits(drths_comp_t *c, double max_acc_m_s2, double max_jerk_m_s3,
                          drths_error_t *err);

/* The adaptive mode's identification: exponential window time constant window_s (0.05 to
 * 600 s) and the bound b on each factor: b in 1 .. 100 holds theta in [1/b, b] (1 fixes the
 * model); b = 0 derives the bounds from the plant range (drths_comp_set_adaptive_range; the
 * default range unless one was set). init sets DRTHS_COMP_ADAPT_WINDOW_S and the bounds of the
 * default range. -EINVAL naming the field ("compensation.adaptive_window_s",
 * "compensation.adaptive_bound") or for another mode. init-only. */
int drths_comp_set_adaptive(drths_comp_t *c, double window_s, double bound, drths_error_t *err);

/* Derives the factors' bounds from the plants in r (see "Bounds from the plant's plausible
 * range" above), over the design model and, once drths_comp_schedule has been called (before or
 * after this), the scheduled models; replaces a symmetric bound. -EINVAL naming the field
 * ("compensation.adaptive_range.<factor>": not finite, not > 0, lo > hi) or for another mode.
 * init-only. */
int drths_comp_set_adaptive_range(drths_comp_t *c, const drths_comp_plant_range_t *r,
                                  drths_error_t *err);

/* The bounds [lo[k], hi[k]] (with the margin) that the plants in r need on the factors of the
 * inverse of model m (the extremes over the range's corners of theta_k, divided and multiplied
 * by DRTHS_COMP_ADAPT_MARGIN). -EINVAL as drths_comp_set_adaptive_range. RT-safe. */
int drths_comp_adapt_bounds(const drths_plant_model_t *m, const drths_comp_plant_range_t *r,
                            double lo[4], double hi[4], drths_error_t *err);

/* One tick of the adaptive identification: drive_m is the drive written at this tick (what
 * drths_comp_drive returned, or what was written instead) and measured_m the displacement read
 * after it. Call it once per tick in which the compensator drove the actuator, after the read;
 * skip it in HOLD. Updates theta and the folded weights. No effect in other modes. RT-safe. */
void drths_comp_observe(drths_comp_t *c, double drive_m, double measured_m);

/* Puts the identification's filters at rest at displacement x_m (drive x_m) and empties its
 * window; theta returns to 1, observed and at_bound_ticks to 0. No effect in other modes.
 * RT-safe. */
void drths_comp_adapt_reset(drths_comp_t *c, double x_m);

/* Nothing to free; safe twice. init-only. */
void drths_comp_close(drths_comp_t *c);

/* Weights of Fornberg's algorithm: wt[m * n + j] is the weight of sample f(x[j]) in the m-th
 * derivative at z of the polynomial through the n points (x[j], f(x[j])), for m = 0 .. 3.
 * Exact for polynomials of degree < n. n is 1 .. 16 and the x[j] distinct. The feedforward's
 * derivatives came from the 7-point one until issue 28; kept for the tests and tools that show
 * why it amplified irregularities. RT-safe (no allocation), but meant for init. */
int drths_comp_stencil_weights(const double *x, int n, double z, double *wt);

typedef struct drths_tracking {
    uint64_t n;          /* pairs added */
    double sum_e2;       /* sum (xm - xd)^2, m^2 */
    double sum_d2;       /* sum xd^2, m^2 */
    double sum_area2;    /* sum A_i, m^2 (twice TI) */
    double max_abs_err;  /* max |xm - xd|, m */
    double prev_d, prev_m;
} drths_tracking_t;

/* Starts empty indicators (nothing is allocated; there is no _close). RT-safe. */
void drths_tracking_init(drths_tracking_t *t);

/* Empties the indicators, as init. RT-safe. */
void drths_tracking_reset(drths_tracking_t *t);

/* Adds the pair of one tick: desired xd_m and measured xm_m (m). RT-safe. */
void drths_tracking_add(drths_tracking_t *t, double xd_m, double xm_m);

/* RMS error norm in percent (Phillips & Spencer 2013, eq 31); 0 with no pair, +inf when every
 * xd was 0 but some error was not. RT-safe. */
double drths_tracking_rms_pct(const drths_tracking_t *t);

/* Tracking indicator TI (m^2), as documented above. RT-safe. */
double drths_tracking_ti(const drths_tracking_t *t);

/* Largest |xm - xd| so far (m). RT-safe. */
double drths_tracking_max_err(const drths_tracking_t *t);

#endif
