/* The actuator site's command stream (docs/design.md, "Concealment"): which command each tick
 * plays, and the commands previewed after it. Once per tick it takes the tick's command from
 * the playout buffer and answers with the command to play and where it came from:
 *
 * - the rest position for t <= L (the numerical site never sends those ticks);
 * - the tick's own command, received in time (its own COMMAND's sample, or first stored from a
 *   redundant sample of a later COMMAND), shifted by the rejoin blend while one runs;
 * - a command that arrived after its tick, played behind it (delayed playback), catching up by
 *   time-scale modification once the commands arrive in time again;
 * - a concealed one: extrapolated (third-order Lagrange, jerk- and acceleration-limited) for the
 *   first DRTHS_ACT_CONCEAL_EXTRAP_TICKS, then braking to rest, the damper command held;
 * - none, when the newest command applied is for a tick more than max_concealed_ticks before
 *   the current one (the concealment budget): the caller enters HOLD with the sentence given.
 *
 * The first received command after concealment, and every switch between late and timely
 * commands, is rejoined without a step: the commands (and the preview) are offset by a blend
 * that starts on the concealed motion and vanishes within velocity, acceleration and jerk
 * budgets. The last four commands played (the compensation's past) and the preview of up to
 * `lookahead` future commands (its future, with the rejoin offset) come with each answer.
 *
 * It knows nothing of the DAQ, the limits, the watchdog or epochs: the actuator
 * (site-physical/actuator.h) checks the command and the preview against its limits, decides
 * HOLD and gives the stream each tick's L and whether the tick runs in HOLD.
 *
 * Ownership: the caller owns drths_cmdstream_t and the playout buffer it passes to each call
 * (the stream keeps no pointer to it). _init allocates the memory of kept (late) commands and
 * of redundant samples; _close frees it (safe twice). Nothing allocates after _init.
 */
#ifndef DRTHS_COMMAND_STREAM_H
#define DRTHS_COMMAND_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"
#include "protocol/playout.h"
#include "protocol/wire.h"
#include "site-physical/hold_cause.h"

/* The stream's settings are the actuator site's, hence their names. */

/* Ticks whose concealment (and, in the actuator, COMMAND header ticks) are remembered, so that
 * a command arriving after its tick was concealed is counted late once (and a second COMMAND
 * for the same tick is counted as a duplicate); also the memory of kept (late) commands. */
#define DRTHS_ACT_LATE_MEMORY 4096

/* Concealment (conceal in command_stream.c): the first this many missing commands in a row are
 * extrapolated by the cubic through the last four (jerk- and acceleration-limited); later ones
 * brake to rest at DRTHS_ACT_CONCEAL_DECEL_M_S2 (at most half the acceleration limit) with half
 * the jerk limit. */
#define DRTHS_ACT_CONCEAL_EXTRAP_TICKS 4
#define DRTHS_ACT_CONCEAL_DECEL_M_S2 10.0
/* The acceleration and jerk limits of the concealment and the rejoin where the feedforward's
 * (physical.feedforward_max_acceleration_m_s2, _jerk_m_s3) are 0 (the default experiment's
 * commands peak at about 8 m/s^2, the SDOF sweep's at 15). */
#define DRTHS_ACT_DEFAULT_MAX_ACC_M_S2 50.0
#define DRTHS_ACT_DEFAULT_MAX_JERK_M_S3 3e4
/* Delayed playback (play_late in command_stream.c) catches up at a rate of up to
 * 1 + 1/DRTHS_ACT_CATCHUP_EVERY, changed by at most DRTHS_ACT_CATCHUP_SLEW_PER_S per second,
 * while the commands of the next DRTHS_ACT_CATCHUP_AHEAD_MS are there. */
#define DRTHS_ACT_CATCHUP_EVERY 20
#define DRTHS_ACT_CATCHUP_SLEW_PER_S 12.5
#define DRTHS_ACT_CATCHUP_AHEAD_MS 2.0
/* The shortest length of each term of the rejoin blend. */
#define DRTHS_ACT_REJOIN_MIN_TICKS 4

/* Future commands previewed for the compensation at most (the polynomial mode's lead is about
 * 45 ticks at 5 kHz). */
#define DRTHS_ACT_MAX_LOOKAHEAD 128

/* Where the command of a tick came from. */
typedef enum drths_cmd_source {
    DRTHS_CMD_SRC_NONE = 0,  /* the tick runs in HOLD: nothing is played (the take only) */
    DRTHS_CMD_SRC_REST,      /* t <= L: the rest position (displacement 0, rest damper command) */
    DRTHS_CMD_SRC_TIMELY,    /* the tick's own command, received in time */
    DRTHS_CMD_SRC_REDUNDANT, /* the same, first stored from a redundant sample of a later
                              * COMMAND (its own was lost or is still on its way) */
    DRTHS_CMD_SRC_REJOIN,    /* a command received in time, shifted by the blend of a rejoin
                              * that is still running */
    DRTHS_CMD_SRC_LATE,      /* delayed playback: a command that arrived after its tick,
                              * played behind it (possibly shifted by a rejoin blend); the
                              * tick's own command has not arrived */
    DRTHS_CMD_SRC_CATCHUP,   /* delayed playback catching up: the tick's own command arrived in
                              * time, but a kept one behind it is played */
    DRTHS_CMD_SRC_CONCEALED, /* extrapolated, or braking to rest */
    DRTHS_CMD_SRC_OVERDUE,   /* beyond the concealment budget: nothing to play, HOLD (its
                              * cause is in hold_cause) */
} drths_cmd_source_t;

typedef struct drths_cmdstream_params {
    double rate_hz;          /* tick rate; dt = 1 / rate_hz */
    size_t playout_ticks;    /* capacity of the playout buffer the stream is used with */
    int max_concealed_ticks; /* the budget: how far behind its tick the newest command applied
                              * may be (with none late: consecutive concealed ticks) */
    int lookahead;           /* future commands previewed, 0 .. DRTHS_ACT_MAX_LOOKAHEAD */
    double ramp_rate_m_s;    /* the rejoin blend's velocity budget (the HOLD ramp rate) */
    double max_acc_m_s2;     /* concealment and rejoin limits; 0: DRTHS_ACT_DEFAULT_MAX_ACC_M_S2 */
    double max_jerk_m_s3;    /* 0: DRTHS_ACT_DEFAULT_MAX_JERK_M_S3 */
    double rest_damper_command; /* damper command of the rest position */
} drths_cmdstream_params_t;

/* The stream's counters; the actuator reports them among its own (drths_actuator_counters_t). */
typedef struct drths_cmdstream_counters {
    uint64_t applied;   /* ticks driven by a command received in time */
    uint64_t concealed; /* ticks driven by an extrapolated command */
    uint64_t max_consecutive_concealed;
    uint64_t late;              /* concealed ticks whose command arrived afterwards */
    uint64_t delayed;           /* ticks driven by a late command, played behind its tick */
    uint64_t max_lag_ticks;     /* largest tick - command tick of a delayed tick */
    uint64_t catchup_ticks;     /* delayed ticks played faster than the commands, catching up */
    uint64_t rejoins;           /* concealed stretches ended by a received command */
    double max_rejoin_offset_m; /* largest |extrapolation - command| at a rejoin */
    uint64_t preview_extended;  /* ticks whose preview the concealment completed */
} drths_cmdstream_counters_t;

/* One tick's answer. */
typedef struct drths_cmdstream_out {
    drths_cmd_source_t source;
    drths_cmd_channel_t cmd; /* the desired command (the rest position when none is played) */
    int64_t cmd_tick;        /* the tick of the command played (nearest to the command time in
                              * delayed playback), -1 for none (rest, HOLD) */
    int64_t lead_ns;         /* TIMELY, REDUNDANT, REJOIN: how long before the tick's deadline
                              * its command arrived */
    /* With a command (REST to CONCEALED): the desired displacements of the last four ticks,
     * oldest first, this one's last, and of the n_future ticks after it (tick + 1 + j at
     * future[j]): 0 for rest ticks, then the commands the playback will reach, with the rejoin
     * offset, up to the first one missing; after it, what the concealment would play from there
     * (a concealed tick: its own continuation), so n_future is the look-ahead. */
    double past[4];
    int n_future;
    double future[DRTHS_ACT_MAX_LOOKAHEAD];
    drths_hold_cause_t hold_cause; /* OVERDUE: the HOLD's cause (hold_cause.h) */
} drths_cmdstream_out_t;

typedef struct drths_cmdstream {
    drths_cmdstream_params_t p;
    drths_cmd_channel_t hist[4];    /* last four commands played, oldest first */
    uint64_t consecutive_concealed; /* extrapolated ticks in a row */
    /* Delayed playback (play_late): the commands that arrived after their tick, by tick %
     * DRTHS_ACT_LATE_MEMORY (late_tick: which tick each slot holds, -1 for none; both owned),
     * the tick of the newest received command applied (L before the first) and whether the
     * last tick applied a late one. */
    drths_cmd_channel_t *late_s;
    int64_t *late_tick;
    uint64_t last_base;
    int delayed;
    double play_pos;              /* command time of the delayed tick last applied (ticks) */
    double play_rate;             /* command ticks per tick of the delayed playback */
    double catchup_slew;          /* its largest change per tick (DRTHS_ACT_CATCHUP_SLEW_PER_S) */
    uint64_t catchup_ahead_ticks; /* ticks of DRTHS_ACT_CATCHUP_AHEAD_MS, rounded up */
    /* Rejoin after concealment: the received commands of the rejoin_ticks ticks from
     * rejoin_tick on are offset by a blend of three quintic terms (weights rejoin_w, lengths
     * rejoin_n in ticks, the longest rejoin_ticks), preview included (start_rejoin). */
    double rejoin_w[3];
    uint64_t rejoin_n[3];
    uint64_t rejoin_tick, rejoin_ticks;
    int64_t concealed_tick[DRTHS_ACT_LATE_MEMORY]; /* tick whose concealment each slot holds */
    /* The tick each playout slot (tick % playout_ticks) was last stored for from a redundant
     * sample, -1 when its own sample came first; owned. */
    int64_t *redundant_tick;
    drths_cmd_channel_t future_s[DRTHS_ACT_MAX_LOOKAHEAD]; /* the preview's commands */
    drths_cmdstream_counters_t c;
} drths_cmdstream_t;

/* Validates p, allocates the memories and starts with the last four commands at rest. A failed
 * init leaves nothing to close. init-only. */
int drths_cmdstream_init(drths_cmdstream_t *cs, const drths_cmdstream_params_t *p,
                         drths_error_t *err);

/* Frees the memories. Safe twice and on a zeroed struct. init-only. */
void drths_cmdstream_close(drths_cmdstream_t *cs);

/* The run starts with loop delay L (EPOCH 1): ticks up to L are the rest position and are never
 * played from pb, so its play head moves to L + 1 (keeping anything already stored for later
 * ticks), and the newest command applied counts as tick L's. RT-safe. */
void drths_cmdstream_start(drths_cmdstream_t *cs, drths_playout_t *pb, uint64_t L);

/* Offers pb the received sample for `tick` (redundant: it is not its COMMAND's own sample
 * but a copy of an earlier tick's) and returns pb's answer. A copy of a tick already played is
 * counted late once if that tick was concealed, and is kept for the delayed playback. RT-safe. */
drths_playout_result_t drths_cmdstream_put(drths_cmdstream_t *cs, drths_playout_t *pb,
                                           uint64_t tick, int redundant,
                                           const drths_cmd_channel_t *sample, int64_t arrival_ns);

/* Tick `tick` (in order, none skipped), due at deadline_ns, with loop delay L: the rest
 * position for t <= L outside HOLD; otherwise the one take of this tick from pb (in HOLD too,
 * so that the play head keeps up and a copy arriving later is counted late), then in HOLD
 * nothing (NONE), else the received command, a late one or a concealed one, or OVERDUE. out
 * is filled as drths_cmdstream_out_t says. RT-safe. */
void drths_cmdstream_tick(drths_cmdstream_t *cs, drths_playout_t *pb, uint64_t tick,
                          int64_t deadline_ns, uint64_t L, int hold, drths_cmdstream_out_t *out);

#endif
