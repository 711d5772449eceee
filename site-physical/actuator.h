/* The actuator site's per-tick state machine (docs/design.md, "Data flow of one tick"): playout
 * of received commands, concealment of missing ones, the watchdog, the limits, HOLD, one step of
 * the specimen, the FEEDBACK to send and the physical.csv row.
 *
 * It knows nothing of sockets or clocks: the caller opens datagrams (protocol/wire.h) and hands
 * the messages to drths_actuator_receive with their arrival time, then calls drths_actuator_tick
 * once per tick with the tick's deadline and the time it actually woke. So a test drives it in
 * virtual time, and site-physical/physsite.c drives it from the real ticker and socket.
 *
 * The command each tick plays, and the preview after it, come from the command stream
 * (site-physical/command_stream.h), called once per tick; the actuator gives it the received
 * samples, the tick's L and whether the tick runs in HOLD, and checks what it answers.
 *
 * Timing (docs/design.md, "Timing model"): tick t applies c(t) = x(t - L). For t <= L the
 * command is the rest position (displacement 0 and the experiment's rest damper command); the
 * numerical site never sends those ticks. For t > L the command is the one received for tick t;
 * if it has not arrived, it is concealed: extrapolated (third-order Lagrange, common/models/lagrange.h,
 * jerk- and acceleration-limited) one tick ahead from the last four applied commands for the
 * first DRTHS_ACT_CONCEAL_EXTRAP_TICKS, then braking to rest, jerk-limited, the damper command
 * held; counted and flagged. A command that arrives after its tick is kept and, once the playout
 * buffer has run dry (or while already doing so), played behind its tick instead of a guess
 * (delayed playback: cmd_tick < tick in the FEEDBACK, flagged CONCEALED, counted `delayed`), so
 * the specimen follows the trajectory, late, catching up up to 5 % faster once the commands
 * arrive in time again (time-scale modification, interpolated between commands). When the
 * newest command applied, in time or late, is for a tick more than max_concealed_ticks (the
 * budget, physical.max_concealed_ms at rate_hz) before the current one, the actuator goes to
 * HOLD: with no late command, that many concealed in a row. The first received command after
 * concealment, and every switch between late and timely commands, is rejoined without a step:
 * the commands are offset by a blend that starts on the concealed motion (displacement,
 * velocity, acceleration) and vanishes within velocity, acceleration and jerk budgets
 * (docs/design.md, "Concealment").
 *
 * Drive (docs/design.md, "Algorithms", compensation): the command chosen for tick t is the
 * DESIRED displacement r(t); the drive signal written to the DAQ is
 * drths_comp_drive(r(t-3..t), r(t+1..t+k), k) with the experiment's compensation
 * (common/models/compensation.h), the future samples read from the playout buffer
 * (drths_playout_lookahead; rest ticks t <= L preview 0 and the first commands). For
 * `feedforward` the inverse model is scheduled on the commanded damper current through the
 * nominal damper's current dynamics. Tracking (measured against desired) is accumulated on every
 * commanded tick (t > L) outside HOLD whose read succeeded.
 *
 * Limits, each putting the actuator in HOLD: |command| and |command velocity| before the drive
 * is computed (|command| also for each previewed future command), |drive| before it is written
 * (the offending drive is never written), |measured displacement| and |measured force| after
 * the read. A failed DAQ write or read is a HOLD too.
 *
 * Stability (check_stability in actuator.c, physical.stability_*): after the read, the measured
 * displacement's amplitude per window (stab_window_s) is fitted over the last stab_windows
 * windows; an amplitude growing at stab_growth_per_s or more in this fit and the one before, or
 * not decaying at
 * stab_min_decay_per_s once the record has ended (stab_quiet_after_s), is a LIMIT HOLD whose
 * sentence gives the frequency, growth rate, span and amplitude. It takes effect like the
 * measurement limits.
 *
 * HOLD (docs/design.md, "Safety"; this is the description the DAQ and the site refer to). Every
 * cause of HOLD goes through drths_actuator_hold: the watchdog, too many concealed commands, the
 * limits, the stability monitor, a DAQ error, a signal or the monitor (physsite.h), the
 * OpenFresco client lost (openfresco_app.h) and the numerical site's ABORT. A cause found
 * before the tick's drive is written (one entered between ticks, the watchdog, the concealment
 * and command limits, the preview and the drive limit) drives the ramp from that tick on; one
 * found after it (a DAQ error, the measurement limits, the stability monitor) flags that tick's
 * FEEDBACK and row and drives the ramp from the next tick. The first ramp tick fixes the
 * target: the last displacement measured (physical.hold: hold) or physical.safe_position_m
 * (ramp); a target outside +/- limit_drive_m (a runaway or failed measurement) is replaced by
 * the last drive written. Each
 * HOLD tick then moves the drive from the last drive written towards the target by at most
 * ramp_rate_m_s * dt (asserted; the largest step is kept in hold_max_step_m) and writes it with
 * drths_daq_safe_state, which also puts the damper command at its safe value (0); nothing is
 * taken from the commands (the row's command column is the drive, with no command tick,
 * velocity and damper command 0). Every FEEDBACK carries DRTHS_FB_HOLD. Unless the HOLD was the
 * numerical site's own ABORT, an ABORT naming the reason is sent to it three times,
 * abort_interval_s apart from the first ramp tick. The loop keeps ticking, reading and
 * recording until the drive has reached the target and hold_linger_s (at least the two ABORT
 * intervals when ABORTs are sent) has passed since the first ramp tick, then finishes.
 *
 * End of a run without HOLD: the tick of the STOP's last commanded tick finishes the run and
 * writes drths_daq_safe_state at the last drive (no step, damper to its safe value). Whoever
 * ends the run otherwise (an error, a failed start) calls drths_actuator_safe_state.
 *
 * One channel (the damper) for now: COMMANDs with another channel count are counted and dropped.
 *
 * Ownership: the caller owns drths_actuator_t and the DAQ it drives (open, borrowed; it must
 * outlive the actuator). _init allocates the playout buffer, the command stream's memories and
 * two histograms; _close frees them (safe twice) and does not close the DAQ.
 * Messages and outputs are the caller's; nothing keeps pointers into them.
 */
#ifndef DRTHS_ACTUATOR_H
#define DRTHS_ACTUATOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/config/config.h"
#include "common/models/compensation.h"
#include "common/models/damper.h"
#include "common/platform/error.h"
#include "common/platform/stats.h"
#include "protocol/playout.h"
#include "protocol/wire.h"
#include "site-physical/command_stream.h"
#include "site-physical/daq.h"
#include "site-physical/hold_cause.h"

/* Columns of physical.csv, in this order (drths_actuator_columns gives their header names). */
enum {
    DRTHS_ACT_COL_TICK = 0,
    DRTHS_ACT_COL_TIME,
    DRTHS_ACT_COL_CMD_TICK,
    DRTHS_ACT_COL_COMMAND,
    DRTHS_ACT_COL_COMMAND_VEL,
    DRTHS_ACT_COL_DAMPER_COMMAND,
    DRTHS_ACT_COL_CONCEALED,
    DRTHS_ACT_COL_HOLD,
    DRTHS_ACT_COL_MEAS_DISP,
    DRTHS_ACT_COL_MEAS_FORCE,
    DRTHS_ACT_COL_CMD_LEAD,
    DRTHS_ACT_COL_WAKE_LATE,
    DRTHS_ACT_COL_DRIVE,     /* drive signal written to the DAQ (after compensation) */
    DRTHS_ACT_COL_TRACK_ERR, /* measured - desired displacement (NaN when not tracked) */
    DRTHS_ACT_COL_TRACK_RMS, /* running tracking RMS error norm, % */
    DRTHS_ACT_COL_TRACK_TI,  /* running tracking indicator, m^2 */
    /* The adaptive compensation's factors on the feedforward's four coefficients (1 in the
     * other modes; common/models/compensation.h). */
    DRTHS_ACT_COL_THETA0,
    DRTHS_ACT_COL_THETA1,
    DRTHS_ACT_COL_THETA2,
    DRTHS_ACT_COL_THETA3,
    DRTHS_ACT_NCOLS
};

/* The header names of physical.csv, DRTHS_ACT_NCOLS of them. */
extern const char *const drths_actuator_columns[DRTHS_ACT_NCOLS];

/* The command stream's settings (concealment, delayed playback, rejoin, DRTHS_ACT_LATE_MEMORY
 * and DRTHS_ACT_MAX_LOOKAHEAD) are in site-physical/command_stream.h. */

/* The stability monitor keeps the amplitude and zero crossings of at most this many windows. */
#define DRTHS_ACT_STAB_MAX_WINDOWS 64

/* Transitions a tick reports in drths_actuator_out_t.events, for the caller to log. */
enum {
    DRTHS_ACT_EV_HOLD = 1u << 0,     /* entered HOLD (its cause in hold_cause) */
    DRTHS_ACT_EV_SETTLED = 1u << 1,  /* in HOLD, the drive has reached its target */
    DRTHS_ACT_EV_EPOCH = 1u << 2,    /* a new epoch took effect */
    DRTHS_ACT_EV_FIRST_COMMAND = 1u << 3, /* tick L + 1: the first commanded tick */
    DRTHS_ACT_EV_FINISHED = 1u << 4, /* the run ends after this tick */
};

typedef struct drths_actuator_params {
    double rate_hz;              /* tick rate; dt = 1 / rate_hz */
    int r;                       /* samples per FEEDBACK, 1 .. DRTHS_WIRE_MAX_R */
    size_t playout_ticks;        /* playout buffer capacity, ticks */
    int max_concealed_ticks;     /* concealment budget: how far behind its tick the newest
                                  * command applied may be (with none late: consecutive
                                  * concealed ticks allowed); one more is HOLD */
    double watchdog_s;           /* no command to play for this long after tick L + 1: HOLD */
    double limit_displacement_m; /* |command| above this: HOLD */
    double limit_velocity_m_s;   /* |command velocity| above this: HOLD */
    double limit_force_N;        /* |measured force| above this: HOLD */
    double limit_drive_m;        /* |drive signal| above this: HOLD (not written) */
    /* The rest of the drive envelope (site-physical/envelope.h, physical.limit_drive_*): a
     * drive beyond any bound is not written and the tick enters HOLD. */
    double limit_drive_velocity_m_s;
    double limit_drive_acceleration_m_s2;
    double limit_drive_offset_m;
    double max_tick_late_s;      /* a commanded tick woken later than this after its deadline
                                  * is a stall: HOLD, the missed ticks not played */
    double limit_meas_disp_m;    /* |measured displacement| above this: HOLD */
    drths_hold_mode_t hold_mode; /* HOLD target: measured position, or safe_position_m */
    double safe_position_m;      /* target of the ramp */
    double ramp_rate_m_s;        /* largest drive speed in HOLD */
    drths_compensation_t compensation;
    int comp_io_delay_ticks;     /* I/O delay the compensation previews, ticks */
    double ff_max_acc_m_s2;      /* feedforward derivative limits (drths_comp_set_limits) */
    double ff_max_jerk_m_s3;
    drths_damper_params_t damper_nominal; /* current dynamics for `feedforward` */
    double adaptive_window_s;             /* `adaptive`: drths_comp_set_adaptive */
    double adaptive_bound;                /* 0: from adaptive_range */
    drths_comp_plant_range_t adaptive_range;
    double rest_damper_command;  /* damper command (A or V) while t <= L */
    double hold_linger_s;        /* ticking and recording goes on this long in HOLD (0.2 s) */
    double abort_interval_s;     /* the three ABORTs are this far apart (5 ms) */
    double late_wake_fraction;   /* a tick woken later than this fraction of dt is late (0.5) */
    /* The stability monitor (check_stability in actuator.c; physical.stability_*): windows of
     * stab_window_s (0: the monitor is off) of commanded ticks from tick L + 1, the last
     * stab_windows of them fitted. */
    double stab_window_s;
    int stab_windows;            /* 2 .. DRTHS_ACT_STAB_MAX_WINDOWS */
    double stab_min_amp_m;       /* every window's amplitude at least this for a growth HOLD */
    double stab_quiet_amp_m;     /* ... and for a HOLD after the record's end */
    double stab_growth_per_s;    /* amplitude growth rate (1/s, natural log) that is a HOLD */
    double stab_min_decay_per_s; /* once the ground is quiet, decaying slower than this is a
                                  * HOLD (1/s) */
    double stab_quiet_after_s;   /* command time (s from tick L + 1) from which the ground
                                  * motion is over (the record's end); INFINITY: never */
} drths_actuator_params_t;

/* The experiment's actuator-site settings (physical.*, actuator.compensation and
 * io_delay_ticks, link.redundancy, rate_hz), the nominal damper, the rest damper command of a
 * passive control mode (0 otherwise) and the fixed values above. init-only. */
void drths_actuator_params_from_experiment(const drths_experiment_t *exp,
                                           drths_actuator_params_t *p);

/* applied, concealed, max_consecutive_concealed, late, delayed, max_lag_ticks, catchup_ticks,
 * rejoins and max_rejoin_offset_m are the command stream's (drths_cmdstream_counters_t), copied
 * here whenever they may have changed. */
typedef struct drths_actuator_counters {
    uint64_t ticks;              /* ticks processed */
    uint64_t rest_ticks;         /* ticks t <= L (rest position) */
    uint64_t commands;           /* COMMAND messages received */
    uint64_t applied;            /* ticks driven by a received command */
    uint64_t concealed;          /* ticks driven by an extrapolated command */
    uint64_t max_consecutive_concealed;
    uint64_t late;               /* concealed ticks whose command arrived afterwards */
    uint64_t duplicates;         /* COMMANDs for a tick (header tick) already commanded by an
                                  * earlier datagram (a copy the replay window cannot see) */
    uint64_t reordered;          /* COMMANDs for a tick below the newest one already received */
    uint64_t too_far;            /* COMMANDs whose own tick was beyond the playout buffer */
    uint64_t from_redundancy;    /* ticks first stored from a redundant sample, because their own
                                  * COMMAND was lost or is still on its way (reordered) */
    uint64_t bad_commands;       /* COMMANDs with a channel count other than 1 */
    uint64_t refused_commands;   /* samples refused on arrival (check_arrival: a HOLD) */
    uint64_t shaped_ticks;       /* ticks whose correction shape_drive limited */
    uint64_t epochs;             /* epochs applied (the first one included) */
    uint64_t late_wakeups;       /* ticks woken later than late_wake_fraction of dt */
    /* The same by cyclictest's rule: a loop that wakes late runs the ticks it overran back to
     * back (none is skipped), but cyclictest skips them and waits for the first deadline after
     * its wake-up. Counted as cyclictest would: a tick is a wake-up when its deadline is not
     * before the first deadline after the last wake-up; the others are overrun ticks. So a
     * 10 ms stall is one late wake-up here as in cyclictest, and some 100 overrun ticks
     * (tools/bench compares these with cyclictest; README, Benchmarks). */
    uint64_t wakeups;            /* ticks that are wake-ups by that rule */
    uint64_t late_wakeups_cyc;   /* ... woken later than late_wake_fraction of dt */
    uint64_t overrun_ticks;      /* ticks run back to back after a late wake-up */
    uint64_t hold_ticks;         /* ticks flagged HOLD in their row (physical.csv's hold column):
                                  * from the tick whose phase found the cause on */
    uint64_t daq_errors;         /* failed DAQ writes or reads */
    uint64_t safe_writes;        /* writes of the safe state: HOLD ticks (the ramp's drive and the
                                  * damper's safe command) and drths_actuator_safe_state */
    uint64_t safe_write_failures; /* ... of which the DAQ refused the write */
    uint64_t tracked;            /* ticks in the tracking indicators */
    uint64_t delayed;            /* ticks driven by a late command, played behind its tick
                                  * (delayed playback; also flagged CONCEALED) */
    uint64_t max_lag_ticks;      /* largest tick - command tick of a delayed tick */
    uint64_t catchup_ticks;      /* delayed ticks played faster than the commands, catching up */
    uint64_t rejoins;            /* concealed stretches ended by a received command */
    double max_rejoin_offset_m;  /* largest |extrapolation - command| at a rejoin */
} drths_actuator_counters_t;

/* What one tick produced. */
typedef struct drths_actuator_out {
    drths_msg_t feedback; /* the FEEDBACK for this tick, header epoch and tick filled */
    int send_abort;       /* nonzero: send `abort` now as well */
    drths_msg_t abort;    /* ABORT {reason, text} when send_abort */
    int finished;         /* the run ends after this tick */
    unsigned events;      /* DRTHS_ACT_EV_* transitions of this tick */
    int daq_rc;           /* the first DAQ error of this tick (0 if none) */
    double row[DRTHS_ACT_NCOLS]; /* the physical.csv row of this tick */
} drths_actuator_out_t;

typedef struct drths_actuator {
    drths_actuator_params_t p;
    int64_t dt_ns;
    int64_t stall_ns;  /* max_tick_late_s */
    drths_daq_t *daq; /* not owned */
    drths_playout_t pb;
    drths_comp_t comp;
    int lookahead;               /* future commands previewed per tick */
    /* shape_drive in actuator.c: the correction (drive - command) applied, its velocity and
     * the compensator's correction of the tick before. */
    double corr_m, corr_v_m_s, corr_want_m;

    int started;       /* EPOCH 1 received */
    uint32_t L, epoch; /* in force */
    int epoch_pending;
    uint32_t pend_epoch, pend_L;
    uint64_t pend_tick;

    /* The command stream: what each tick plays from the playout buffer pb (received, late or
     * concealed, rejoined), the last four commands played and the preview. Its counters are
     * copied into c after each call. */
    drths_cmdstream_t cs;
    int64_t primary_tick[DRTHS_ACT_LATE_MEMORY];   /* header tick of each recent COMMAND */
    int have_primary;
    uint64_t newest_primary;     /* highest COMMAND header tick received */

    int have_cmd;                /* a COMMAND has arrived */
    uint64_t echo_counter;       /* newest COMMAND counter */
    int64_t echo_arrival_ns;     /* its arrival */
    int64_t last_cmd_ns;         /* arrival of the latest valid COMMAND */
    int watchdog_armed;
    int64_t watchdog_ref_ns;     /* arrival of the latest COMMAND (the first tick before any) */
    int dry;                     /* the playout buffer holds nothing for the current tick on */
    int64_t dry_since_ns;        /* since this tick's wake-up */

    int stop_received;
    uint64_t stop_tick;          /* last commanded tick (STOP header tick) */

    int hold;
    uint8_t hold_reason;         /* drths_stop_reason_t */
    drths_hold_cause_t hold_cause; /* filled by the RT thread; the sentence is the main
                                    * thread's (drths_actuator_hold_text) */
    int hold_abort_peer;         /* send ABORT to the numerical site */
    int hold_started;            /* the first HOLD tick has run (hold_tick valid) */
    uint64_t hold_tick;          /* first tick that drove the HOLD ramp */
    uint64_t hold_first_tick;    /* first tick flagged HOLD (valid once c.hold_ticks > 0): hold_tick, or the tick before it
                                  * when a phase after the drive (the DAQ, the measurement
                                  * limits, the stability monitor) found the cause */
    uint64_t safe_write_failed_tick; /* the last HOLD tick whose safe-state write failed */
    double hold_target_m;        /* where the drive goes in HOLD */
    int hold_settled;            /* the drive has reached the target */
    uint64_t settled_tick;
    double hold_max_step_m;      /* largest |drive step| over a HOLD tick */
    int aborts_sent;
    uint64_t linger_ticks, abort_every_ticks;

    int finished;
    uint8_t end_reason;          /* END_OF_RECORD, or the HOLD reason */

    double last_meas_disp_m;
    /* The measurements the FEEDBACKs repeat: tick t at t % fb_cap, fb_cap reaching back by the
     * largest redundancy offset (drths_wire_offset(r - 1) + 1); owned. */
    drths_fb_sample_t *fb_ring;
    uint64_t *fb_ring_tick; /* the tick each slot holds, UINT64_MAX when none */
    size_t fb_cap;

    /* The stability monitor (check_stability in actuator.c). */
    uint64_t stab_win_ticks;     /* ticks per window (0: off) */
    double stab_mean, stab_mean2; /* the two high-passes' low-pass states */
    int stab_have_mean;
    int stab_sign;               /* side of the mean of the last measurement (-1, 0, +1) */
    double stab_peak;            /* this window's largest |measured - mean| */
    uint64_t stab_cross;         /* this window's crossings of the mean */
    uint64_t stab_in_win;        /* ticks in this window so far */
    uint64_t stab_done;          /* windows completed */
    double stab_amp[DRTHS_ACT_STAB_MAX_WINDOWS];      /* by window number % MAX */
    uint64_t stab_crossings[DRTHS_ACT_STAB_MAX_WINDOWS];
    double stab_prev_rate;       /* the previous window's fitted growth (1/s), NAN if none */
    double stab_max_growth;      /* largest growth rate fitted (1/s), -INFINITY before any */

    int64_t wake_next_ns;        /* the first deadline after the last wake-up (cyclictest's
                                  * rule, c.wakeups) */
    drths_hist_t lateness_ns;    /* tick wake-up lateness */
    drths_hist_t lead_ns;        /* how long before its tick each applied command arrived */
    drths_tracking_t track;      /* desired vs measured, commanded ticks outside HOLD */
    drths_actuator_counters_t c;
} drths_actuator_t;

/* The compensation p names (actuator.compensation, designed on the average plant; feedforward
 * and adaptive scheduled on the commanded current; the adaptive range and window; the
 * derivative limits), at rest at p->rest_damper_command and displacement 0: the one setup of
 * the actuator loop and the characterization (site-physical/charz.h). Errors are prefixed
 * "actuator.compensation <mode>". init-only. */
int drths_actuator_comp_init(drths_comp_t *c, const drths_actuator_params_t *p, drths_error_t *err);

/* Validates p (errors name the field), prepares the compensation, allocates the playout buffer
 * (head at tick 0) and the histograms; with the virtual back end puts its specimen at rest
 * (displacement 0, rest damper command). daq (open) is borrowed. A failed init leaves nothing
 * to close. init-only. */
int drths_actuator_init(drths_actuator_t *a, const drths_actuator_params_t *p, drths_daq_t *daq,
                        drths_error_t *err);

/* Frees the buffers. Safe twice and on a zeroed struct. init-only. */
void drths_actuator_close(drths_actuator_t *a);

/* Takes one authenticated message from the numerical site, received at arrival_ns:
 * COMMAND: its r samples go into the playout buffer (counted); its counter becomes the FEEDBACK
 *          echo; the watchdog restarts.
 * EPOCH:   epoch 1 starts the run with its L (drths_actuator_started becomes true) and moves
 *          the playout buffer's window to [L + 1, L + 1 + playout_ticks), since ticks up to L
 *          are the rest position and are never played from it; a later
 *          epoch changes L at its effective tick. Repeats and older epochs are ignored.
 * STOP:    the run ends after the STOP's header tick (the last commanded tick).
 * ABORT:   HOLD, without an ABORT back.
 * Anything else is ignored (the caller handles HELLO and PROBE). RT-safe. */
void drths_actuator_receive(drths_actuator_t *a, const drths_msg_t *m, int64_t arrival_ns);

/* Nonzero once EPOCH 1 has arrived: the caller then starts its ticker at tick 0. RT-safe. */
static inline int drths_actuator_started(const drths_actuator_t *a)
{
    return a->started;
}

/* Copies src into dst (cap bytes with the NUL) and returns the length written, never
 * overflowing; used to copy texts on the RT thread, where nothing is formatted. RT-safe. */
size_t drths_scopy(char *dst, size_t cap, const char *src);

/* Runs tick `tick` (0, 1, 2, ... in order, none skipped), due at deadline_ns and woken at
 * now_ns, in phases: the command (rest, received or concealed; the watchdog and the command
 * limits), the drive (compensated, or the HOLD ramp), the DAQ write and read (the measurement
 * limits, the tracking), then out is filled with the FEEDBACK, any ABORT to send, the end of
 * the run and the row. Returns 0; -EALREADY when the run has already finished, -EAGAIN before
 * EPOCH 1 (out untouched in both). RT-safe. */
int drths_actuator_tick(drths_actuator_t *a, uint64_t tick, int64_t deadline_ns, int64_t now_ns,
                        drths_actuator_out_t *out);

/* Enters HOLD (if not already in it, nor finished) with a stop reason and its cause (copied;
 * site-physical/hold_cause.h); abort_peer says whether the numerical site is sent ABORT
 * {reason, drths_hold_cause_abort_text}. The single entry into HOLD; when it takes effect is in
 * the file comment (HOLD). RT-safe: it formats nothing. */
void drths_actuator_hold(drths_actuator_t *a, uint8_t reason, int abort_peer,
                         const drths_hold_cause_t *cause);

/* The HOLD's sentence (drths_hold_cause_describe of hold_cause) in buf; "" outside HOLD.
 * Returns buf. Not RT-safe: for the main thread (log lines, summary.json, the exit reason). */
const char *drths_actuator_hold_text(const drths_actuator_t *a, char *buf, size_t cap);

/* Tracking RMS error norm in % (Phillips & Spencer 2013, eq. 31): 100 sqrt(sum (measured -
 * command)^2 / sum command^2) over the ticks driven by a command (received or concealed),
 * outside HOLD; NaN if the commands were all zero. RT-safe. */
double drths_actuator_tracking_rms_pct(const drths_actuator_t *a);

/* Writes the DAQ's safe state at the last drive (no step; damper command to its safe value).
 * For whoever ends the run outside drths_actuator_tick (an error, a failed start). Before the
 * first tick it writes nothing (the drive is unknown) and returns 0. Returns the DAQ's result
 * (-EBADF when the DAQ is closed). RT-safe. */
int drths_actuator_safe_state(drths_actuator_t *a);

#endif
