/* The numerical site's lock-stepped loop (docs/design.md, "Timing model": step n uses the
 * feedback of tick n and sends x(n+1) as the command for tick n+1+L), with no socket and no
 * clock: the caller feeds it decoded messages with their arrival times and polls it with the
 * current time; it answers with what to send and what to record. The site's
 * glue (numsite.c) connects it to the socket, the wire codec and the recorder; the tests connect
 * it to a simulated actuator site in virtual time.
 *
 * Sequence (t = physical tick, n = integration step, L = loop delay):
 *   start     send EPOCH {1, L, effective tick 0}; record row 0 (rest); predict x(1), step the
 *             Smith model with it and send it as the COMMAND for tick 1 + L. EPOCH is repeated
 *             every 20 ms until the first FEEDBACK arrives (at most 2 s, else PEER_LOST).
 *   step n    when the reorder buffer has tick n: R(n) from F(n); when the deadline
 *             est_arrival(n) + reorder_ticks·dt has passed, or a feedback for tick
 *             >= n + reorder_ticks has arrived: R(n) concealed by the model (counted, flagged).
 *             Then correct (state at n), record row n, predict x(n+1), step the model, send the
 *             COMMAND for tick n + 1 + L with the last r samples and the feedback echo.
 *   end       after step steps-1: STOP {END_OF_RECORD, tick = last command tick} three times
 *             10 ms apart, then wait up to 1 s for the FEEDBACK of that tick (or the peer's
 *             STOP). An ABORT from the peer ends at once; a stop request (signal) or a silent
 *             peer (no message for peer_timeout) sends ABORT three times and ends.
 * The estimated arrival time of tick n is min_offset + n·dt, where min_offset is the smallest
 * (arrival - tick·dt) of the FEEDBACKs of the last 0.5 to 1 s.
 *
 * Damper command (clipped-optimal or passive, site-numerical/semiactive.h): the command sent
 * with x(n+1) is computed from the state at n and the force R(n) used at n, as in the reference
 * run; the passive modes send their constant.
 *
 * On-the-fly loop delay (docs/design.md, "Algorithms", "Delay estimator"; when L is not fixed
 * by link.loop_delay_ticks): every echoed round trip goes into a sliding window (8 sub-windows
 * of 1 s by default, protocol/estimator.h); every decide_ticks steps drths_epoch_decide is asked
 * for a new L from the window's quantile, the quantile of its 2 most recent sub-windows (the
 * target of an urgent raise) and the late rate (feedback samples flagged CONCEALED by the
 * actuator site, for ticks under the current epoch only). Dead bands: a round-trip raise needs
 * more than half the safety margin, a lowering must save at least 10 ms; at most one change
 * per 2 s unless commands are, or are about to be, late. No decision resets or seeds the
 * window, so L follows the round trip both ways and cannot ratchet. The feedback wait moves
 * with each new L and is kept in step with the round trips of the last 1 to 2 s (minimum and
 * quantile, drths_hybrid_feedback_wait_ns) at every decision. The actuator site plays whatever
 * each tick was commanded, so the change of L is a change of which step each tick gets, and it
 * is made smooth by a time warp (site-numerical/warp.h; docs/design.md, "Epochs: raise and
 * glide"): the ticks after the change get the trajectory at fractional step positions
 * s(T) = T - L1 - D(T), with D going from 0 to L2 - L1 along a quintic profile, so the command's
 * position, velocity and acceleration stay continuous. A tick's command is the cubic Hermite
 * interpolant between the two computed steps around s(T) (displacement and velocity of each),
 * and it is sent as soon as the later of them is computed: never extrapolated, no delay added.
 *   raise L1 -> L2 (at once): the specimen slows down (s' = 1 - D' >= 0, stopping only for a
 *     raise longer than the curvature bound allows) and falls L2 - L1 ticks behind; the
 *     warp's "time acceleration" |s''|/dt is at most warp_raise_per_s, so the command's
 *     acceleration differs from the trajectory's by at most that times its velocity.
 *     EPOCH {e+1, L2, the first tick at L2}.
 *   lower L1 -> L2 (after the hysteresis): a glide; the specimen runs at most 1/glide_every
 *     faster (warp_glide_per_s bounds |s''|/dt) until L2. EPOCH {e+1, L2, the first tick at
 *     L2}.
 * A raise during a raise, and any lowering, start where the warps in progress end; a raise
 * during a glide adds to it at once. Each EPOCH is sent three times 10 ms apart. The step
 * applied at each tick is remembered (tick map: the nearest step to s(T)), so the Smith
 * predictor pairs F(n) with the model at the step the specimen really got, to half a step;
 * feedback of a tick whose rate s' differs from 1 by more than 1/glide_every (the specimen
 * slowed down by more than a glide speeds it up: its velocity-dependent force is no longer the
 * model's at that step) is concealed by the model and counted as a transition step, not as
 * lost feedback. A feedback sample that names an earlier command tick
 * (the actuator site played a late command behind its tick) is paired with the step sent for
 * that tick; one flagged CONCEALED that names its own tick (the actuator site guessed the
 * command) is concealed by the model too, and counts for the late rate.
 *
 * Several links (PROTOCOL.md section 12; docs/design.md, "Several laboratories"): with a file
 * of several sites the loop holds one drths_hybrid_link_t per actuator site (its damper's Smith
 * predictor and stability detector, its feedback and commands) around one integrator, one
 * control law and one L, fixed. Step n waits for every link's feedback of tick n, each until
 * its own deadline; an action sends one message on action.link, so the COMMANDs (EPOCHs,
 * STOP/ABORT) of one tick go out in consecutive polls. One link is the loop described above.
 *
 * Ownership: the caller owns drths_hybrid_t; _init allocates everything the run needs (models,
 * buffers, histograms, the row); _close frees it (safe twice). Pointers handed out in
 * drths_hybrid_action_t point into the struct and are valid until the next call. One thread
 * uses it; other threads read its counters only after that thread is done.
 */
#ifndef DRTHS_HYBRID_H
#define DRTHS_HYBRID_H

#include <stdint.h>

#include "common/config/enums.h" /* drths_smith_mode_t */
#include "common/platform/error.h"
#include "protocol/estimator.h"
#include "protocol/reorder.h"
#include "protocol/wire.h"
#include "site-numerical/numsub.h"
#include "site-numerical/semiactive.h"
#include "site-numerical/smith.h"
#include "site-numerical/stability.h"
#include "site-numerical/warp.h"

/* Only pointers to the experiment are taken here; common/config/config.h defines it. */
typedef struct drths_experiment drths_experiment_t;

/* Columns after the numsub base columns (run-folder contract); adaptive Smith adds
 * DRTHS_HYBRID_ADAPT_COLS more (smith_gain, the identified factors smith_alpha_scale,
 * smith_c0_scale, smith_c1_scale, smith_gamma_beta_scale, smith_n_scale, then smith_err_rel,
 * smith_fallback and smith_lead_n_start: the leading identifier's starting factor on n). */
#define DRTHS_HYBRID_EXTRA_COLS 7
#define DRTHS_HYBRID_ADAPT_COLS 9
/* Epoch changes remembered for summary.json. */
#define DRTHS_HYBRID_MAX_EPOCH_LOG 64
/* Warps (epoch changes) in progress at once; a change that finds no room waits for the next
 * decision. */
#define DRTHS_HYBRID_MAX_WARPS 8
/* Computed steps kept for the interpolation of fractional step positions. */
#define DRTHS_HYBRID_STEP_RING 16
/* Links (actuator sites) one loop holds: the experiment file's sites. */
#define DRTHS_HYBRID_MAX_LINKS 8

typedef struct drths_hybrid_params {
    uint32_t L;                /* loop delay of epoch 1, ticks (>= 1) */
    int r;                     /* samples per COMMAND (link.redundancy) */
    int reorder_ticks;         /* numerical.reorder_ticks: the shortest feedback wait */
    int64_t wait_ns;           /* how long past its earliest expected arrival the loop waits
                                * for F(n) before concealing it (drths_hybrid_feedback_wait_ns);
                                * 0 = reorder_ticks ticks */
    drths_smith_mode_t smith;  /* numerical.smith */
    int64_t dt_ns;             /* tick period, rounded to ns as the actuator site's ticker */
    int64_t peer_timeout_ns;   /* no valid message for this long: PEER_LOST (1 s) */
    int64_t start_timeout_ns;  /* no FEEDBACK this long after EPOCH 1: PEER_LOST (2 s) */
    int64_t epoch_repeat_ns;   /* EPOCH 1 repeated until the first FEEDBACK (20 ms) */
    int64_t close_repeat_ns;   /* STOP / ABORT sent 3 times this far apart (10 ms) */
    int64_t final_wait_ns;     /* after STOP, wait this long for the last FEEDBACK (1 s) */
    /* on-the-fly L (docs/design.md, "Delay estimator") */
    int adapt_L;               /* nonzero: epochs may change L (default: unless L is fixed) */
    uint32_t L_max;            /* largest L allowed (sizes the history rings) */
    drths_lchoice_params_t lp; /* quantile, margins for the L needed by a round trip */
    drths_epoch_params_t ep;   /* thresholds and hysteresis of drths_epoch_decide */
    int decide_ticks;          /* steps between decisions (50) */
    int glide_every;           /* a glide runs the specimen at most 1/glide_every faster (20) */
    double warp_raise_per_s;   /* largest |s''|/dt of a raise, 1/s (200): its acceleration is
                                * the trajectory's plus at most this times the velocity */
    double warp_glide_per_s;   /* the same for a glide (5) */
    int64_t rtt_window_ns;     /* length of the sliding round-trip window (8 s) */
    int64_t rtt_q_ns;          /* the probes' round-trip quantile L was first chosen for
                                * (reported by the caller; the decisions use the echoes) */
    /* Several links (docs/design.md, "Several laboratories"): n_links actuator sites, link k
     * driving damper k (a file with sites of one channel each, not selected), with one L for
     * all and, for link k > 0, its own feedback wait link_wait_ns[k] (link 0's is wait_ns).
     * n_links > 1 fixes L (adapt_L 0). Default: 1, or the file's sites when it has several. */
    int n_links;
    int64_t link_wait_ns[DRTHS_HYBRID_MAX_LINKS];
    /* With several links a link silent this long is lost (0: peer_timeout_ns): by default the
     * sites' physical.watchdog_ms, after which that site holds by itself, so that the others
     * are told within about their own watchdog instead of running on with its force
     * concealed. */
    int64_t link_timeout_ns;
} drths_hybrid_params_t;

/* The feedback wait (docs/design.md, "Timing model"): x(n+1) must reach the actuator site
 * before tick n+1+L, so the loop can wait for F(n) until (L+1) dt after tick n minus the
 * command's way back. Seen from the numerical site, tick n is earliest expected at the minimum arrival offset (tick n plus the
 * fastest way up); a feedback later than that by the up-link jitter is still worth waiting for,
 * as long as the command then leaves in time for the slowest way down. With only the round trip
 * measured, the way up at its fastest plus the way down at its slow quantile is estimated as
 * the mean of the round trip's minimum and its quantile (symmetric jitter):
 *     wait = (L + 1) dt - (rtt_min + rtt_q) / 2,
 * never shorter than reorder_ticks ticks. Waiting less conceals feedback that was on its way
 * (jitter reorders datagrams); waiting more makes commands late. init-only. */
int64_t drths_hybrid_feedback_wait_ns(uint32_t L, int64_t dt_ns, int64_t rtt_min_ns,
                                      int64_t rtt_q_ns, int reorder_ticks);

typedef enum drths_hybrid_end {
    DRTHS_HYBRID_RUNNING = 0,
    DRTHS_HYBRID_END_OF_RECORD, /* every step done: success */
    DRTHS_HYBRID_PEER_ABORT,    /* the actuator site sent ABORT (or an early STOP) */
    DRTHS_HYBRID_PEER_LOST,     /* no valid message for peer_timeout */
    DRTHS_HYBRID_NO_START,      /* no FEEDBACK within start_timeout of EPOCH 1 */
    DRTHS_HYBRID_SIGNAL,        /* drths_hybrid_request_stop (SIGINT/SIGTERM) */
    DRTHS_HYBRID_STABILITY,     /* the stability detector: ABORT {HOLD, what it saw} */
} drths_hybrid_end_t;

typedef enum drths_hybrid_poll_result {
    DRTHS_HYBRID_WAIT = 0, /* nothing to do before action.wake_ns or the next message */
    DRTHS_HYBRID_ACT,      /* do what action says, then poll again */
    DRTHS_HYBRID_DONE,     /* the run is over: see h->end */
} drths_hybrid_poll_result_t;

typedef struct drths_hybrid_action {
    const drths_msg_t *send; /* seal and send this now, or NULL */
    int link;                /* on this link (0 with one link) */
    int is_command;          /* send is a COMMAND: report its counter with drths_hybrid_sent */
    const double *row;       /* push this row (h->ncols values) to the recorder, or NULL */
    int64_t wake_ns;         /* WAIT: poll again at this time at the latest */
} drths_hybrid_action_t;

typedef struct drths_hybrid_counters {
    uint64_t rows;                /* rows recorded (row 0 included) */
    uint64_t concealed;           /* steps whose feedback was concealed by the model */
    uint64_t max_consecutive_concealed;
    uint64_t fb_datagrams;        /* FEEDBACK messages accepted */
    uint64_t fb_samples_stored;   /* distinct ticks received */
    uint64_t fb_duplicates;       /* copies of ticks already received (R-1 per tick is normal) */
    uint64_t fb_late;             /* ticks that first arrived after their step was concealed */
    uint64_t fb_too_far;          /* ticks too far ahead for the reorder buffer */
    uint64_t phys_concealed;      /* feedback samples flagged "command concealed" */
    uint64_t phys_hold;           /* feedback samples flagged "HOLD" */
    uint64_t phys_hold_tick;      /* header tick of the first FEEDBACK flagged "HOLD" (valid
                                   * when phys_hold > 0): what the end reason says when the
                                   * actuator site's ABORT was lost (drths_numsite_end_reason) */
    uint64_t commands_sent, epochs_sent, closes_sent;
    uint64_t unexpected;          /* valid messages of a type not expected here */
    uint64_t transition;          /* steps whose tick was slowed down by a raise (concealed) */
    uint64_t fillers_sent;        /* COMMANDs of such ticks sent */
    uint64_t glide_skips;         /* steps after which no COMMAND was due (a glide skipped
                                   * past their position) */
    uint64_t epoch_changes;       /* epochs after the first */
    uint32_t L_min_seen, L_max_seen;
} drths_hybrid_counters_t;

typedef struct drths_hybrid_epoch_log {
    uint32_t epoch, L_from, L_to;
    int64_t step;            /* step at which it was decided */
    uint64_t effective_tick;
    double time_s;           /* simulated time of that step */
    drths_epoch_reason_t reason;
} drths_hybrid_epoch_log_t;

/* One link of the loop: an actuator site, its damper's Smith predictor and stability detector
 * (the energy of its interface), its feedback's reorder buffer, arrival estimate and round
 * trips, its commands' ring and the message to send to it. A file with one site, or none, is
 * one link. */
typedef struct drths_hybrid_link {
    char name[32]; /* the site's name ("" without sites) */
    int damper;    /* the damper it drives (numsub's index) */
    drths_smith_t smith;
    drths_stability_t stab; /* the stability detector (site-numerical/stability.h) */
    drths_reorder_t rb;
    drths_rtt_tracker_t rtt;
    double command;             /* damper command sent with the newest x */
    int64_t wait_ns;            /* the feedback wait (drths_hybrid_feedback_wait_ns) */
    /* the computed steps (damper displacement, velocity, damper command) at k % STEP_RING */
    double st_x[DRTHS_HYBRID_STEP_RING], st_v[DRTHS_HYBRID_STEP_RING];
    double st_cmd[DRTHS_HYBRID_STEP_RING];
    int64_t last_rx_ns;
    int got_feedback;
    int64_t off_cur, off_prev, off_bucket_ns; /* arrival offset minima, two buckets */
    int64_t off_short_cur, off_short_prev, off_short_bucket_ns; /* 50 ms arrival minima */
    uint64_t fb_newest_tick, fb_last_counter;
    int64_t fb_last_counter_rx_ns;
    int peer_stopped;
    uint64_t *concealed_tick; /* ring (reorder depth) of concealed ticks, owned */
    size_t concealed_cap;
    size_t rb_depth; /* reorder buffer capacity, ticks */
    uint64_t consecutive;
    drths_cmd_channel_t *sent; /* sample of tick T at sent[T % sent_cap], owned */
    uint64_t *sent_tick;       /* the tick each slot holds, owned */
    size_t sent_cap;           /* above the largest redundancy offset */
    double prev_vel;
    drths_msg_t out;
    int pending;    /* out is still to be sent: 1, or 2 for a COMMAND */
    int skip_close; /* it ended the run itself (its ABORT): no close sent to it */
    /* the step being resolved: its feedback sample, or concealed */
    int resolved, have_sample;
    drths_fb_sample_t sample;
    double measured, used;     /* of the newest step */
    drths_hybrid_counters_t c; /* this link's counters (h->c sums them) */
} drths_hybrid_link_t;

typedef struct drths_hybrid {
    drths_hybrid_params_t p;
    drths_numsub_t ns;
    drths_hybrid_link_t *lk; /* n_links links, owned */
    int n_links;
    int end_link;               /* the link whose end ended the run, -1: none (or this site) */
    drths_semiactive_t ctl;     /* damper command law */
    double rest_command;        /* damper command of the rest ticks */
    int adaptive;               /* Smith adaptive: extra columns */
    /* epochs */
    uint32_t L;                 /* loop delay of the newest commanded tick, rounded */
    uint32_t epoch;             /* newest epoch announced */
    uint32_t glide_target;      /* the L the changes in progress lead to (== L when none) */
    uint32_t L_base;            /* the L the warps in progress start from */
    drths_warp_t warp[DRTHS_HYBRID_MAX_WARPS];
    int n_warps;
    double warp_tol;            /* |s' - 1| beyond which a tick's feedback is concealed */
    uint64_t epoch_eff_tick;    /* ticks from here on count for the late rate */
    drths_late_window_t late;
    drths_epoch_state_t est;
    drths_rtt_window_t rttw;    /* sliding window of the echoed round trips */
    int64_t wait0_ns;           /* the feedback wait of epoch 1 (p.L, p.rtt_q_ns) */
    int64_t *tm_tick, *tm_step; /* tick map ring: nearest step to the position each tick got,
                                 * -1 - k for a slowed-down tick near step k; owned */
    size_t tm_cap;
    int epoch_copies;           /* EPOCH copies still to send */
    int64_t epoch_next_ns;
    drths_msg_epoch_t epoch_msg;
    int64_t newest_step;        /* the newest computed step */
    drths_hybrid_epoch_log_t elog[DRTHS_HYBRID_MAX_EPOCH_LOG];
    int n_elog;
    double row_dead;            /* dead time n - k of the row's step, ticks */
    int state;                  /* internal */
    drths_hybrid_end_t end;
    char end_text[DRTHS_WIRE_MAX_TEXT + 64]; /* the peer's ABORT text or why the run ended */
    char close_text[DRTHS_WIRE_MAX_TEXT + 1]; /* the text of the STOP/ABORT sent */
    int end_reason;             /* the peer's ABORT/STOP reason code (PEER_ABORT) */
    /* timing */
    int64_t start_ns, next_send_ns, close_start_ns;
    int got_feedback;       /* every link has sent FEEDBACK */
    uint64_t last_cmd_tick; /* the last tick commanded (L of epoch 1 before the first) */
    int close_type, close_reason, close_sent;
    /* record */
    int ncols;
    char **colnames;            /* ncols names, owned */
    double *row;                /* owned */
    double *peak_x, *sum_x2, *peak_a, *sum_a2; /* per floor, owned */
    double peak_force_N;
    drths_hybrid_counters_t c;
    /* numerical.smith_model's SHA-256 (hex), "" when the Smith model is the nominal one. */
    char smith_model_sha256[65];
} drths_hybrid_t;

/* Defaults for everything but L: r, reorder_ticks and smith from the experiment, dt from its
 * rate, the timeouts listed with drths_hybrid_params_t, and the epoch settings: adapt_L unless link.loop_delay_ticks
 * fixes L, L_max = max(4 L, L + 2500) once L is set (0 here: init computes it), late rate
 * threshold 1 % over at least 250 ticks, 200 round trips, raise step 25 ticks, lowering
 * hysteresis 3 s (lowering by at least 10 ms), at most one change per 2 s unless urgent, late
 * margin kept 30 s, round-trip window 8 s, decisions every 50 steps, a glide at most 1/20
 * faster, warps of at most 40/s (raise) and 5/s (glide). init-only. */
void drths_hybrid_params_default(drths_hybrid_params_t *p, const drths_experiment_t *exp);

/* The columns of the run's record (h->ncols after drths_hybrid_init with the defaults of
 * drths_hybrid_params_default), known before the handshake for the space the run needs.
 * init-only. */
int drths_hybrid_columns_for(const drths_experiment_t *exp);

/* Builds the substructure, the controller, the Smith model (the damper of numerical.smith_model
 * when the file names one, else the nominal damper; history L_max + 64), the reorder buffer, the
 * round-trip tracker, the tick map and the column names. Errors as the models report them.
 * init-only. */
int drths_hybrid_init(drths_hybrid_t *h, const drths_experiment_t *exp,
                      const drths_hybrid_params_t *p, drths_error_t *err);

/* Frees everything. Safe twice. init-only. */
void drths_hybrid_close(drths_hybrid_t *h);

/* A valid message from the actuator site of link 0 (drths_wire_open accepted it, so counter
 * is set), received at rx_ns. RT-safe. */
void drths_hybrid_on_message(drths_hybrid_t *h, const drths_msg_t *m, int64_t rx_ns);

/* The same from the actuator site of link `link`. Its ABORT, or its early STOP, ends the run:
 * with several links, the others are sent ABORT {the same reason, "<site> stopped the test:
 * <its text>"} (one fate). RT-safe. */
void drths_hybrid_on_link_message(drths_hybrid_t *h, int link, const drths_msg_t *m, int64_t rx_ns);

/* The COMMAND of the last action was sent with this counter at sent_ns (for the round trip),
 * on the action's link. RT-safe. */
void drths_hybrid_sent(drths_hybrid_t *h, uint64_t counter, int64_t sent_ns);
void drths_hybrid_link_sent(drths_hybrid_t *h, int link, uint64_t counter, int64_t sent_ns);

/* Nonzero while a message built for a link is still to be sent (the other links' COMMANDs of a
 * step, an ABORT or STOP to every link): the next polls return them, one per poll, before
 * anything that looks at the clock or at the feedback, so the caller need not drain the
 * sockets in between. RT-safe. */
int drths_hybrid_pending(const drths_hybrid_t *h);

/* Does the next thing due at now_ns (see drths_hybrid_poll_result_t). The first call starts the
 * run. RT-safe. */
drths_hybrid_poll_result_t drths_hybrid_poll(drths_hybrid_t *h, int64_t now_ns,
                                             drths_hybrid_action_t *a);

/* Asks the run to end with ABORT {reason, text} (a signal: DRTHS_STOP_SIGNAL); the next polls
 * send it and finish. RT-safe. */
void drths_hybrid_request_stop(drths_hybrid_t *h, int reason, const char *text);

/* The step whose state the integrator holds (rows recorded up to it). RT-safe. */
static inline long drths_hybrid_step(const drths_hybrid_t *h)
{
    return h->ns.step;
}

/* How long a link may be silent before it is lost: peer_timeout_ns, or with several links the
 * shorter link_timeout_ns. RT-safe. */
int64_t drths_hybrid_link_timeout_ns(const drths_hybrid_t *h);

/* "end of record", "aborted by the actuator site", "peer lost", "no feedback at start",
 * "stopped by signal", "stability HOLD", "running". RT-safe. */
const char *drths_hybrid_end_name(drths_hybrid_end_t e);

#endif
