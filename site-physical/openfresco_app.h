/* The actuator site driven by an OpenSees/OpenFresco analysis client over TCP, instead of the
 * numerical site: drths-physical --openfresco HOST:PORT (user guide: docs/openfresco.md).
 *
 * Two threads:
 *   - the I/O thread (drths_ofr_app_start) accepts one client, tells the wire variant apart
 *     (site-physical/openfresco.h), and reads with blocking recv, TCP_NODELAY set and
 *     TCP_QUICKACK re-armed before every receive (else the client's second back-to-back vector
 *     waits for a delayed ACK: 40 ms a step). It forwards setup, targets, measurement requests
 *     and the end of the session to the RT thread, and writes the replies the RT thread hands
 *     back. Both directions are SPSC rings (common/platform/ring.h).
 *
 * One client at a time, and none may hold the site: the listening socket is closed as soon as a
 * client is accepted (a second one is refused by the kernel, it does not wait in a backlog), and
 * the accepted socket has TCP keepalive (a dead analysis machine fails the connection). A client
 * that has not completed its set-up (ShadowSite: probe, open and setup; GenericTCP: the sizes)
 * within setup_timeout_s of being accepted is dropped with a warning, and the site listens again
 * for a proper client until accept_timeout_s after the start. After the set-up the step
 * watchdog runs on the RT thread: once every target received has been reached and every
 * measurement request answered, the client has step_timeout_s to send its next target, else
 * HOLD (DRTHS_STOP_WATCHDOG, with a sentence saying what was awaited since when).
 *   - the RT thread is drths_physsite_run with this module as its command source
 *     (drths_physsite_source_t): each tick it turns the analysis steps into one COMMAND for
 *     tick + D (D = the compensation's lookahead + 1, so the compensation previews real
 *     commands) and hands it to the actuator's state machine as if it had come from a
 *     numerical site. So playout, compensation, limits and HOLD, physical.csv and summary.json
 *     are those of a drths session.
 *
 * Continuous execution (common/models/precor.h): an analysis step lasts step_duration_s of wall
 * time (N ticks). The command is a chain of polynomial segments, continuous in position,
 * velocity and acceleration at every join: step n starts as soon as step n-1 ends, predicting
 * at constant acceleration from the state step n-1 ended in; from the tick target n is known
 * (at the latest at predict_fraction of the step) a quintic corrects towards it, reaching it at
 * the step's last tick with the velocity and acceleration the next step's predictor starts
 * with. Every segment keeps within half the command velocity limit and half the smaller of
 * physical.feedforward_max_acceleration_m_s2 and limit_drive_acceleration_m_s2; a segment that
 * would not is lengthened (the step takes more wall time, its end is still its target). If
 * target n has not arrived by the switch, the command brakes smoothly to rest (the step is
 * counted late, those ticks held) and corrects from there when it comes. A measurement request
 * (getDaqResponse, getDisp, getForce, ...) is answered once every target received so far has
 * been reached, with the displacement and force measured at that tick: at once when no trial
 * has been sent yet. A trial that is not finite, beyond physical.limit_displacement_m, or
 * further from the current target than one step at physical.limit_velocity_m_s is refused when
 * it arrives: HOLD (DRTHS_STOP_LIMIT) with a sentence naming it, before any command for it.
 *
 * End of session: DIE (or shutdown) is answered (ShadowSite) and ends the run once the command
 * has braked smoothly to rest: exit 0. A connection closed without DIE, a protocol error, or no
 * client within the wait: HOLD (never a jump), records flushed, exit 1 with the reason.
 *
 * When the site ends the session first (HOLD, a client refused at its set-up) the connection is
 * not closed at once: OpenSees's and OpenFresco's TCP_Socket loop on recv() and send() without
 * looking for an end of file or an error, so a client whose connection is closed spins for ever
 * (docs/openfresco.md, "When the site ends first"). Instead the I/O thread answers every further
 * request itself, every value NaN (measurements, forces, matrices), ignores trials and commits
 * and answers DIE as usual, until the client sends DIE, closes, or is silent for
 * DRTHS_OFR_AFTER_END_SILENCE_S (at most --openfresco-step-timeout), DRTHS_OFR_AFTER_END_MAX_S
 * in all; drths_ofr_app_stop waits for that. A NaN force fails an implicit analysis (its
 * convergence test never passes) and runs an explicit one to its end at once; either then
 * reaches the script's wipeExp or exit, which sends DIE. A ShadowSite client refused before its
 * open (a site forced to the generic variant) is answered an open with OpenFresco version 0
 * instead of 2.8: ShadowExpSite's constructor then prints a version mismatch and exits.
 *
 * Steps from commits (docs/openfresco.md, "Repeats and iterations"): for any client once it
 * has committed (genericClient and ShadowSite commit every step), a trial within
 * DRTHS_OFR_REPEAT_TOL_M of the current target is a repeat (not moved; answered from the
 * measurement taken when the target was reached), the first new trial after a commit is the
 * step's target, and further new trials before the commit are iterations: a quintic segment
 * of iteration_duration_s or longer (within the bounds above), at most
 * max_iterations per step, else HOLD. A commit with no new target plays a step in place.
 * Before any commit, with the analysis time in the trials (the first step of genericClient and
 * ShadowSite; GenericTCP, which never commits, with the time mode of -ctrlModes on) a new time
 * begins a step and a trial with the time of the one before is a repeat or an iteration; trials
 * at the rest position before the first step are repeats, and a first commit with nothing
 * played is a step in place. Without either (GenericTCP's default) every trial is a step.
 *
 * The first target after the set-up may take up to the larger of accept_timeout_s
 * (--wait-timeout) and step_timeout_s: GenericTCP asks its operator to press Enter twice there.
 *
 * Several actuator channels (physical.channels): the trial displacement vector has one value
 * per channel, channel i taking the i-th; a client whose control displacement size differs from
 * the number of channels is refused at its set-up with a sentence naming both. The steps,
 * repeats (every component within DRTHS_OFR_REPEAT_TOL_M of the current target), iterations
 * and commits are those of the vector; each tick every channel's actuator gets its own COMMAND,
 * and the measured vectors are each channel's measurement at the same tick.
 *
 * The damper command is the experiment's rest command (passive modes); the analysis client
 * computes no control law. getInitialStiff and getTangentStiff are answered with the diagonal
 * matrix of cfg.stiffness (the channels are not coupled), getDamp and getMass with cfg.damping
 * and cfg.mass on the diagonal. Measured velocity and
 * acceleration are backward differences of the displacement measured at the step ends.
 *
 * Ownership: the caller owns drths_ofr_app_t; _init opens the listening socket and the rings,
 * _close closes and frees them (safe twice, after drths_ofr_app_stop). The physsite borrows
 * the app as its source_ctx.
 */
#ifndef DRTHS_OPENFRESCO_APP_H
#define DRTHS_OPENFRESCO_APP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/models/precor.h"
#include "common/platform/error.h"
#include "common/platform/ring.h"
#include "common/platform/udp.h"
#include "site-physical/openfresco.h"
#include "site-physical/physsite.h"

#define DRTHS_OFR_PENDING 16 /* targets queued in the RT thread */
/* Step ends in flight: computed D ticks before they are applied (D <= the largest lookahead
 * + 1), at most one per tick. */
#define DRTHS_OFR_ENDS (DRTHS_ACT_MAX_LOOKAHEAD + 8)
#define DRTHS_OFR_TEXT 200
/* After the site ended first (see above): the longest silence of the client before the
 * connection is closed (or --openfresco-step-timeout when shorter), and the longest wait in
 * all (Ctrl-C or SIGTERM ends the wait at once: the records are already on disk). */
#define DRTHS_OFR_AFTER_END_SILENCE_S 10.0
#define DRTHS_OFR_AFTER_END_MAX_S 60.0

/* How the client ended after the site had ended first (summary.json openfresco.after_end). */
typedef enum drths_ofr_after_end {
    DRTHS_OFR_AFTER_NONE = 0, /* the site did not end first, or no client was there */
    DRTHS_OFR_AFTER_DIE,      /* the client sent DIE (answered): it ended */
    DRTHS_OFR_AFTER_CLOSED,   /* the client closed the connection (or it failed) */
    DRTHS_OFR_AFTER_EXIT,     /* ShadowSite refused at its open: told a version that exits it */
    DRTHS_OFR_AFTER_SILENT,   /* closed by the site after the client's silence */
    DRTHS_OFR_AFTER_MAX,      /* closed by the site after DRTHS_OFR_AFTER_END_MAX_S */
    DRTHS_OFR_AFTER_UNPARSED, /* closed on a message the site could not parse */
    DRTHS_OFR_AFTER_SIGNAL,   /* closed by the site on Ctrl-C or SIGTERM during the wait */
} drths_ofr_after_end_t;

typedef struct drths_ofr_app_config {
    const char *listen;          /* HOST:PORT to accept the client on */
    drths_ofr_variant_t variant; /* AUTO, SHADOW or GENERIC */
    drths_precor_params_t precor;
    double step_duration_s;      /* wall time per analysis step */
    double accept_timeout_s;     /* how long to wait for a client that sets up, and for its
                                  * first target after the set-up (at least step_timeout_s) */
    double setup_timeout_s;      /* a client accepted must set up within this (0: 10 s) */
    double step_timeout_s;       /* the next target within this once all is answered (0: 10 s) */
    double detect_wait_s;        /* AUTO: quiet time after a lone int32 1 (0.2 s) */
    double iteration_duration_s; /* wall time of one iteration (0: step_duration_s / 4) */
    int max_iterations;          /* iterations allowed in one step (0: 20) */
    /* Actuator channels driven (physical.channels; 0 is taken as 1): the client's control
     * displacement size must equal it. */
    int n_channels;
    /* Each channel's initial stiffness (N/m), answered on the diagonal of getInitialStiff /
     * getTangentStiff (the channels are not coupled), and the damping and mass (N s/m, kg) on
     * the diagonal of getDamp and getMass (docs/openfresco.md). */
    double stiffness[DRTHS_OFR_MAX_DOF];
    double damping, mass;
} drths_ofr_app_config_t;

/* A trial closer than this to the current target is a repeat, not a new target: 1 nm, three
 * orders of magnitude below the resolution of a laboratory displacement transducer (about
 * 1 um), so moving the actuator for it could not change what is measured. genericClient's
 * repeats are in fact bitwise equal (the same node displacement read twice). */
#define DRTHS_OFR_REPEAT_TOL_M 1e-9
#define DRTHS_OFR_DEFAULT_MAX_ITERATIONS 20

/* What a queued target is: the target of an analysis step (played by the predictor-corrector
 * over step_duration_s), or an iteration towards the same step (a short ramp). */
typedef enum drths_ofr_target_kind {
    DRTHS_OFR_TGT_STEP = 0,
    DRTHS_OFR_TGT_ITERATION = 1,
} drths_ofr_target_kind_t;

/* A displacement vector: one value per actuator channel (channel i = element i of the trial
 * displacement vector). */
typedef struct drths_ofr_vec {
    double v[DRTHS_OFR_MAX_DOF];
} drths_ofr_vec_t;

/* What the command generator is doing. */
typedef enum drths_ofr_motion {
    DRTHS_OFR_REST = 0,    /* at rest: before the first step, after braking */
    DRTHS_OFR_PREDICT = 1, /* a step's predictor, its target not known yet */
    DRTHS_OFR_CORRECT = 2, /* a step's corrector, to its target */
    DRTHS_OFR_ITER = 3,    /* an iteration, to its trial */
    DRTHS_OFR_BRAKE = 4,   /* to rest: a target late at the switch, or the end of the session */
} drths_ofr_motion_t;

typedef struct drths_ofr_step_end {
    uint64_t tick; /* the step's (or iteration's) last command tick */
    drths_ofr_vec_t target;
    int kind; /* drths_ofr_target_kind_t */
} drths_ofr_step_end_t;

typedef struct drths_ofr_app {
    drths_ofr_app_config_t cfg;
    drths_addr_t laddr;
    int listen_fd;
    atomic_int conn_fd;
    pthread_t io;
    int io_started;
    drths_ring_t to_rt; /* I/O -> RT requests */
    drths_ring_t to_io; /* RT -> I/O responses */
    atomic_int io_stop;
    /* The site has ended the session (HOLD, a refused set-up): the I/O thread answers every
     * further request with NaN (set by the RT thread at HOLD and at its end, or by the I/O
     * thread when it refuses the client). */
    atomic_int io_refuse;
    atomic_int io_done;         /* the I/O thread has returned */
    _Atomic int64_t io_last_ns; /* when the latest message came (the silence after the end) */

    /* I/O thread (read by the RT thread after the SETUP record, and by main after the join). */
    drths_ofr_rx_t rx;
    drths_ofr_variant_t variant; /* resolved */
    char peer[80];
    uint64_t io_messages, io_unknown_actions, io_replies;
    uint64_t clients_dropped; /* accepted, but no set-up within setup_timeout_s */
    /* After the site ended first: messages received, answers of NaN, how the client ended
     * (drths_ofr_after_end_t; main sets SILENT or MAX after the join). */
    uint64_t after_end_messages, after_end_nan_replies;
    int after_end;
    uint8_t *inbuf, *outbuf;  /* 8·DRTHS_OFR_MAX_DATA + 64 bytes each, owned */

    /* RT thread. Every displacement is a vector of n values (n = cfg.n_channels), channel i's
     * the i-th; the step timing is common to all channels. */
    int n;               /* channels */
    int64_t step_ticks;  /* N */
    uint32_t lead_ticks; /* D */
    int setup_seen, stopping, end_seen;
    double hist[DRTHS_OFR_MAX_DOF][4]; /* per channel, the last four step targets */
    int step_active, step_late;
    drths_ofr_vec_t target;
    int64_t j; /* ticks of the current step played */
    drths_ofr_vec_t pend[DRTHS_OFR_PENDING];
    int pend_kind[DRTHS_OFR_PENDING];
    int pend_head, pend_count;
    /* Steps from commits (docs/openfresco.md, "Repeats and iterations"): on once the client
     * has committed (or from the set-up when REQ_SETUP's flag says so). */
    int commit_mode;
    /* Steps from the trials' time until the first commit (ShadowSite's first step; GenericTCP,
     * which never commits, with the time mode of -ctrlModes on): on from the first trial with
     * a time. */
    int time_mode;
    double last_time;           /* the latest trial's time */
    uint64_t time_steps;        /* steps begun by a new time */
    drths_ofr_vec_t cur_target; /* the latest target queued (0, the rest position, before any) */
    int distinct_since_commit;  /* targets queued since the last commit */
    int iters_in_step;
    int64_t iter_ticks; /* M: the shortest iteration, ticks */
    /* The command generator (common/models/precor.h): one polynomial segment per channel with
     * common timing, joined with continuous position, velocity and acceleration. */
    int motion;                              /* drths_ofr_motion_t */
    drths_precor_seg_t seg[DRTHS_OFR_MAX_DOF];
    int64_t seg_t, seg_len;                  /* ticks played, ticks of the segment */
    drths_ofr_vec_t seg_x1, seg_v1, seg_a1;  /* where a correction or iteration ends */
    drths_ofr_vec_t sx, sv, sa;              /* the command's state at its last tick (per tick) */
    int die_pending;                         /* DIE: brake to rest, then STOP */
    uint64_t steps_queued;                   /* step targets queued (the step numbers) */
    /* Per channel bounds of every segment, per tick: velocity, acceleration (half the command
     * velocity limit; half the smaller of the feedforward's acceleration limit and the drive
     * envelope's), the end rates' acceleration (a quarter of that) and velocity (0.9 of the bound),
     * and |position| (the command limit). */
    double b_v[DRTHS_OFR_MAX_DOF], b_a[DRTHS_OFR_MAX_DOF], b_ae[DRTHS_OFR_MAX_DOF];
    double b_ve[DRTHS_OFR_MAX_DOF], b_x[DRTHS_OFR_MAX_DOF];
    double acc_bound_m_s2;                   /* b_a of the first channel, m/s^2, for the log */
    drths_ofr_response_t last_resp; /* measured when the latest target was reached */
    /* Measured velocity and acceleration: backward differences of the displacement measured
     * at the step ends (base: the previous step's end; last: this step's latest end). */
    drths_ofr_vec_t base_d, base_v, last_d, last_v_meas;
    int have_resp;
    drths_ofr_step_end_t ends[DRTHS_OFR_ENDS];
    int ends_head, ends_count;
    uint64_t daq_pending;
    drths_ofr_vec_t last_x;
    int64_t first_target_ns, end_ns;
    int64_t quiet_since_ns; /* the step watchdog: since when the site has owed nothing */
    int quiet_armed;
    char end_text[DRTHS_OFR_TEXT];

    /* Counters (RT thread; main reads them after the join). */
    uint64_t targets;        /* trials received */
    uint64_t queued;         /* targets queued: steps and iterations (trials less repeats) */
    uint64_t reached;        /* queued targets whose last tick has been applied */
    uint64_t steps_reached;  /* steps whose last tick has been applied */
    uint64_t repeats;        /* trials equal to the current target (every component within
                              * DRTHS_OFR_REPEAT_TOL_M): answered without moving */
    uint64_t iterations;     /* trials of a step after its first (implicit integrators) */
    uint64_t commits;        /* commitState actions */
    uint64_t standing_steps; /* commits with no new target since the last: a step in place */
    int max_iters_seen;      /* most iterations in one step */
    uint64_t late_targets;   /* steps whose target was not there at the switch */
    uint64_t held_ticks;     /* ticks braking or at rest at a switch waiting for a target */
    uint64_t refused;        /* trials refused on arrival (HOLD) */
    uint64_t stretched;      /* segments lengthened to keep within the bounds */
    uint64_t stretch_ticks;  /* ticks added by that */
    double peak_acc_m_s2;    /* largest |acceleration| of the segments planned */
    uint64_t daq_requests, daq_replies;
    /* Target and measured displacement at each step end, per channel; the figures over every
     * channel are derived from these (drths_ofr_app_step_rms_pct, _step_max_err). */
    drths_tracking_t ch_track[DRTHS_OFR_MAX_DOF];
} drths_ofr_app_t;

/* What the I/O thread hands the RT thread. */
typedef enum drths_ofr_req_kind {
    DRTHS_OFR_REQ_SETUP = 1, /* the sizes are known */
    DRTHS_OFR_REQ_TARGET,    /* a trial displacement */
    DRTHS_OFR_REQ_MEASURE,   /* a measurement request: answered once the targets are reached */
    DRTHS_OFR_REQ_DIE,       /* orderly end */
    DRTHS_OFR_REQ_LOST,      /* connection closed, protocol error, no client: text says which */
    DRTHS_OFR_REQ_NOTE,      /* a line for the log (text; a warning when disp is 1) */
    DRTHS_OFR_REQ_COMMIT,    /* commitState: the analysis step is final */
} drths_ofr_req_kind_t;

/* The I/O thread's side of the two rings, public so that a test can drive the RT hooks in
 * virtual time without a socket (only when no I/O thread runs). post waits while the ring is
 * full unless the app is stopping; take returns 0 with the oldest answer, or -EAGAIN. post
 * carries no displacement (disp is the flag of SETUP and NOTE): a TARGET goes by post_trial. */
void drths_ofr_app_post(drths_ofr_app_t *app, drths_ofr_req_kind_t kind, double disp,
                        const char *text);
/* A TARGET of n values with the trial's analysis time (NaN: the client sends none), as the I/O
 * thread posts it. */
void drths_ofr_app_post_trial(drths_ofr_app_t *app, const double *v, int n, double time);
int drths_ofr_app_take(drths_ofr_app_t *app, drths_ofr_response_t *r);

/* Validates cfg (errors name the option), parses the address, creates the rings and the
 * buffers and opens the listening TCP socket (SO_REUSEADDR, backlog 1; the I/O thread closes it
 * once a client is accepted and opens it again after dropping one). A failed init leaves nothing
 * to close. init-only. */
int drths_ofr_app_init(drths_ofr_app_t *app, const drths_ofr_app_config_t *cfg, drths_error_t *err);

/* The physsite command source; pass app as source_ctx. */
const drths_physsite_source_t *drths_ofr_app_source(void);

/* Starts the I/O thread. Returns 0 or a negative errno. init-only. */
int drths_ofr_app_start(drths_ofr_app_t *app, drths_error_t *err);

/* Stops the I/O thread and joins it. When the site ended the session first and a client is
 * still connected, first lets the I/O thread answer it (NaN) until it sends DIE or closes,
 * within the bounds above; then shuts the connection down. Safe twice. init-only. */
void drths_ofr_app_stop(drths_ofr_app_t *app);

/* A sentence on how the client ended after the site had ended first, or NULL when it did not
 * (after drths_ofr_app_stop). */
const char *drths_ofr_app_after_end_text(const drths_ofr_app_t *app);

/* Closes the sockets and frees the rings and buffers. Safe twice. init-only. */
void drths_ofr_app_close(drths_ofr_app_t *app);

/* RMS of (measured - target) at the step ends over RMS of the targets, %, over every channel;
 * NaN before any. */
double drths_ofr_app_step_rms_pct(const drths_ofr_app_t *app);

/* The same for channel i alone. */
double drths_ofr_app_channel_rms_pct(const drths_ofr_app_t *app, int i);

/* Largest |measured - target| at the step ends (m), over every channel; 0 before any. */
double drths_ofr_app_step_max_err(const drths_ofr_app_t *app);

/* The same for channel i alone; NaN for a channel out of range. */
double drths_ofr_app_channel_max_err(const drths_ofr_app_t *app, int i);

#endif
