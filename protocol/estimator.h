/* Round-trip delay estimation and the choice of the loop delay L (docs/design.md#delay-estimator).
 *
 * Five parts:
 * (a) Start-up probe statistics: N probe round trips (default 500), reported as
 *     min/p50/p99/p99.9/max in ns and in ticks (ceil(rtt/dt): a round trip of 400.1 ticks needs
 *     401 ticks of delay).
 * (b) The choice of L: the q-quantile of the round trip in ticks, plus both sites' wake-up
 *     latency margins in ticks, plus a safety margin, at least 1; or a fixed L.
 * (c) The continuous round trip: every COMMAND's counter and send time go into a small ring;
 *     every FEEDBACK echoes the newest COMMAND counter and how long the peer held it, so
 *     rtt = now - sent - hold (RTCP's LSR/DLSR). Samples go into a whole-run histogram (for the
 *     summary) and the caller feeds them to a sliding window (e).
 * (d) The epoch decision: L follows the need, i.e. (b) applied to the sliding window's quantile.
 *     It is raised at once when the need exceeds L by more than a dead band, lowered only after
 *     the need has stayed lower for a hold time, to the highest need seen during it; at most one
 *     change per min_change_interval, except an urgent raise (commands late, or the quantile no
 *     longer fits without the safety margin). A raise forced by a high late rate adds a margin
 *     the quantile does not explain; that margin expires late_hold after the last such raise.
 *     Nothing the decision outputs feeds its next input (the window is never reset or seeded
 *     by a decision), so L cannot ratchet: at constant conditions it converges to the need.
 *     It is a pure function of its inputs and an explicit state, so tests drive it with
 *     synthetic sequences.
 * (e) The sliding round-trip window: a ring of sub-window histograms and their running sum,
 *     so the quantile is over the last (nsub - 1) to nsub sub-windows, with O(1) updates, no
 *     allocation after init and a quantile read of a few hundred counters.
 *
 * Quantiles are nearest-rank (common/platform/stats.h): an exact sample for the probes, the upper edge of
 * the bin (so never an underestimate, and at most one bin width over) for the histograms.
 *
 * Ownership: the caller owns every struct here; those with _init own their arrays, freed by
 * _close (safe twice, and on a zeroed struct).
 */
#ifndef DRTHS_ESTIMATOR_H
#define DRTHS_ESTIMATOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"
#include "common/platform/stats.h"

/* ceil(ns / dt_ns) for ns >= 0 and dt_ns > 0: the ticks needed to cover a delay. RT-safe. */
static inline int64_t drths_ns_to_ticks_ceil(int64_t ns, int64_t dt_ns)
{
    return ns <= 0 ? 0 : (ns + dt_ns - 1) / dt_ns;
}

/* ---- Round-trip summary ------------------------------------------------------------------ */

typedef struct drths_rtt_summary {
    uint64_t count;
    int64_t min_ns, p50_ns, p99_ns, p999_ns, max_ns;
    int64_t min_ticks, p50_ticks, p99_ticks, p999_ticks, max_ticks; /* ceil(ns / dt) */
} drths_rtt_summary_t;

/* Summary of a histogram of round trips (quantiles to the bin width, extremes exact). RT-safe. */
void drths_rtt_summary_from_hist(const drths_hist_t *h, int64_t dt_ns, drths_rtt_summary_t *out);

/* ---- (a) Start-up probes ------------------------------------------------------------------ */

typedef struct drths_probe_stats {
    int64_t *rtt_ns;  /* max_samples slots, owned */
    size_t n, max_samples;
    uint64_t rejected; /* negative round trips, or beyond max_samples */
} drths_probe_stats_t;

/* Room for max_samples probe round trips. Returns 0, -EINVAL (err names it), -ENOMEM. init-only. */
int drths_probe_stats_init(drths_probe_stats_t *ps, size_t max_samples, drths_error_t *err);

/* init-only. */
void drths_probe_stats_close(drths_probe_stats_t *ps);

/* Adds one round trip. Returns 0, -ERANGE for a negative one or -ENOSPC when full (both counted
 * in rejected). RT-safe. */
int drths_probe_stats_add(drths_probe_stats_t *ps, int64_t rtt_ns);

/* Exact nearest-rank summary of the samples (sorted in place). Returns 0 or -ENOENT when there
 * are none. init-only (sorts). */
int drths_probe_stats_summary(drths_probe_stats_t *ps, int64_t dt_ns, drths_rtt_summary_t *out);

/* Exact nearest-rank q-quantile of the samples (sorted in place), or -ENOENT/-EINVAL. init-only. */
int drths_probe_stats_quantile(drths_probe_stats_t *ps, double q, int64_t *out_ns);

/* ---- (b) The choice of L ------------------------------------------------------------------ */

typedef struct drths_lchoice_params {
    double quantile;              /* of the round trip, e.g. 0.999 */
    int64_t wake_margin_local_ns; /* this site's measured wake-up latency margin */
    int64_t wake_margin_peer_ns;  /* the other site's (from its HELLO/status) */
    uint32_t safety_ticks;        /* configured extra margin */
    uint32_t fixed_L;             /* > 0: use this L, ignore the measurements */
} drths_lchoice_params_t;

typedef struct drths_lchoice {
    uint32_t L;           /* the L to use */
    uint32_t L_auto;      /* what the measurements ask for (reported even when L is fixed) */
    uint32_t rtt_ticks, wake_local_ticks, wake_peer_ticks, safety_ticks; /* L_auto's terms */
    int fixed;            /* L came from fixed_L */
} drths_lchoice_t;

/* L_auto = ceil(rtt_q/dt) + ceil(wake_local/dt) + ceil(wake_peer/dt) + safety, at least 1; L is
 * fixed_L when given, else L_auto. The breakdown lets main print how L was reached, and warn when
 * a fixed L is below L_auto. Returns 0, or -EINVAL for dt <= 0, negative times or an L beyond
 * 2^31. RT-safe (pure). */
int drths_lchoice_compute(const drths_lchoice_params_t *p, int64_t rtt_q_ns, int64_t dt_ns,
                          drths_lchoice_t *out);

/* ---- (c) Continuous round trip from echoes ------------------------------------------------ */

typedef struct drths_sendlog {
    uint64_t *counter;     /* size slots, owned */
    int64_t *sent_ns;      /* owned */
    unsigned char *valid;  /* slot state (empty, sent, echoed), owned */
    size_t size;
} drths_sendlog_t;

/* A ring of the last `size` sent counters and their send times (slot = counter mod size).
 * init-only. */
int drths_sendlog_init(drths_sendlog_t *sl, size_t size, drths_error_t *err);
void drths_sendlog_close(drths_sendlog_t *sl);

/* Remembers that `counter` was sent at sent_ns. RT-safe. */
void drths_sendlog_record(drths_sendlog_t *sl, uint64_t counter, int64_t sent_ns);

/* Looks up and forgets the send time of `counter`: 0 and *sent_ns, -ENOENT when it was never
 * recorded or has been overwritten (too old), -EALREADY when it was already used (an echo
 * repeated in several FEEDBACKs yields one sample). RT-safe. */
int drths_sendlog_take(drths_sendlog_t *sl, uint64_t counter, int64_t *sent_ns);

typedef struct drths_rtt_tracker {
    drths_sendlog_t log;
    drths_hist_t run;    /* whole run */
    int64_t last_rtt_ns;
    uint64_t unknown;    /* echoes of counters not (or no longer) in the log */
    uint64_t repeated;   /* echoes of counters already used */
    uint64_t negative;   /* now - sent - hold < 0: a bogus hold time */
} drths_rtt_tracker_t;

/* A send log of log_size counters and the whole-run histogram of bin_ns bins up to max_ns (the
 * sites use 10 µs bins up to 2 s, i.e. 200 000 bins, 1.6 MB). init-only. */
int drths_rtt_tracker_init(drths_rtt_tracker_t *t, size_t log_size, int64_t bin_ns, int64_t max_ns,
                           drths_error_t *err);
void drths_rtt_tracker_close(drths_rtt_tracker_t *t);

/* A COMMAND with this counter was sent at sent_ns. RT-safe. */
void drths_rtt_tracker_sent(drths_rtt_tracker_t *t, uint64_t counter, int64_t sent_ns);

/* A FEEDBACK received at now_ns echoes `counter`, held hold_ns by the peer. Returns 0 with
 * *rtt_ns (may be NULL) = now - sent - hold added to the run histogram, or -ENOENT, -EALREADY,
 * -ERANGE (counted, nothing added). RT-safe. */
int drths_rtt_tracker_echo(drths_rtt_tracker_t *t, uint64_t counter, int64_t hold_ns,
                           int64_t now_ns, int64_t *rtt_ns);

/* ---- (e) Sliding round-trip window -------------------------------------------------------- */

/* The round trips of the last (nsub - 1)·sub_ns to nsub·sub_ns: one histogram
 * (common/platform/stats.h) per sub-window. When time passes a sub-window's end the oldest one is
 * emptied (drths_hist_reset: only its occupied groups are touched) and becomes the current one;
 * a quantile reads the union of the sub-windows (drths_hist_quantile_many). */
typedef struct drths_rtt_window {
    drths_hist_t *sub;    /* nsub histograms, owned */
    size_t nsub;          /* number of sub-windows */
    int64_t sub_ns;       /* length of each */
    size_t cur;           /* the sub-window being filled */
    int64_t cur_start_ns; /* its start (INT64_MIN: no sample yet) */
} drths_rtt_window_t;

/* nsub sub-windows of sub_ns each, bins of bin_ns up to max_ns (so the quantile is at most one
 * bin over the sample quantile: choose bin_ns below a tick). Returns 0, -EINVAL (err names it),
 * -ENOMEM. Memory: nsub × 8 × max_ns / bin_ns bytes. init-only. */
int drths_rtt_window_init(drths_rtt_window_t *w, int64_t bin_ns, int64_t max_ns, int64_t sub_ns,
                          size_t nsub, drths_error_t *err);

/* init-only. */
void drths_rtt_window_close(drths_rtt_window_t *w);

/* Moves the window to now_ns: the sub-windows that ended by then leave it (all of them after a
 * silence of nsub·sub_ns or more). Time never goes back; an earlier now_ns is ignored. RT-safe
 * (at most nsub sub-windows cleared, each in proportion to its occupied groups). */
void drths_rtt_window_advance(drths_rtt_window_t *w, int64_t now_ns);

/* Adds a round trip measured at now_ns (advancing the window first). RT-safe. */
void drths_rtt_window_add(drths_rtt_window_t *w, int64_t now_ns, int64_t rtt_ns);

/* Nearest-rank q-quantile (0 < q <= 1) of the window: the upper edge of its bin, clamped to the
 * window's exact [min, max]; 0 when empty. RT-safe (reads nsub × (ngroups + group) counters). */
int64_t drths_rtt_window_quantile(const drths_rtt_window_t *w, double q);

/* The same over the nrecent most recent sub-windows only (the current one and nrecent - 1
 * before it; nrecent <= 64), with their sample count in *count (may be NULL). RT-safe (reads
 * nrecent × (ngroups + group) counters). */
int64_t drths_rtt_window_recent_quantile(const drths_rtt_window_t *w, size_t nrecent, double q,
                                         uint64_t *count);

/* Round trips in the window. RT-safe (nsub reads). */
uint64_t drths_rtt_window_count(const drths_rtt_window_t *w);

/* Exact smallest and largest round trip in the window; 0 when empty. RT-safe (nsub reads). */
int64_t drths_rtt_window_min(const drths_rtt_window_t *w);
int64_t drths_rtt_window_max(const drths_rtt_window_t *w);

/* Exact smallest round trip of the nrecent most recent sub-windows; 0 when empty. RT-safe. */
int64_t drths_rtt_window_recent_min(const drths_rtt_window_t *w, size_t nrecent);

/* ---- (d) Late rate and epochs --------------------------------------------------------------- */

typedef struct drths_late_window {
    unsigned char *late; /* one flag per tick of the window, owned */
    size_t size;         /* window length in ticks */
    size_t pos;          /* next slot to write */
    size_t filled;       /* ticks in the window so far (<= size) */
    uint64_t late_count; /* late flags in the window */
} drths_late_window_t;

/* A sliding window over the last `ticks` ticks. init-only. */
int drths_late_window_init(drths_late_window_t *w, size_t ticks, drths_error_t *err);
void drths_late_window_close(drths_late_window_t *w);

/* Records one tick, late (nonzero) or not. O(1). RT-safe. */
void drths_late_window_add(drths_late_window_t *w, int late);

/* Late ticks / ticks in the window; 0 when empty. RT-safe. */
double drths_late_window_rate(const drths_late_window_t *w);

/* Empties the window (after an epoch change, so the old L's lates do not count). O(size).
 * RT-safe. */
void drths_late_window_reset(drths_late_window_t *w);

typedef struct drths_epoch_params {
    double late_rate_threshold;  /* raise when the window's late rate exceeds this */
    uint64_t min_window_ticks;   /* the late rate counts only over at least this many ticks */
    uint64_t min_rtt_samples;    /* the round-trip quantile counts only over this many samples */
    uint32_t raise_step_ticks;   /* a late-rate raise adds at least this much */
    int64_t lower_hysteresis_ns; /* the need must stay lower this long before lowering */
    uint32_t max_L;              /* never propose more (0: no limit) */
    /* Dead bands against chasing the noise of a windowed quantile: a round-trip raise only when
     * the need exceeds L by more than raise_deadband_ticks (the safety margin already covers a
     * little), a lowering only when it saves at least lower_min_ticks (0, 0: none). A late-rate
     * raise ignores them. */
    uint32_t raise_deadband_ticks;
    uint32_t lower_min_ticks;
    /* Rate bound: after a change, no other change for this long (0: none), except an urgent
     * raise: a late-rate raise, or a round-trip raise whose quantile plus wake-up margins
     * (the need without the safety margin) no longer fits in L. */
    int64_t min_change_interval_ns;
    /* The margin a late-rate raise added beyond the need is kept this long after the last
     * late-rate raise, then dropped (so L may come down to the round trip's need again); a new
     * late-rate raise re-earns it. 0: dropped at the next decision. */
    int64_t late_hold_ns;
} drths_epoch_params_t;

typedef struct drths_epoch_state {
    int lowering;              /* the need has stayed below the current L since ... */
    int64_t lower_since_ns;    /* ... this time */
    uint32_t lower_needed_max; /* the highest need since then */
    int changed;               /* a change was proposed at ... */
    int64_t last_change_ns;    /* ... this time (the rate bound) */
    /* Ticks the last late-rate raises added beyond the round trip's need, added to the need
     * until late_extra_until_ns; never longer unless lateness returns. */
    uint32_t late_extra_ticks;
    int64_t late_extra_until_ns;
} drths_epoch_state_t;

typedef struct drths_epoch_input {
    int64_t now_ns;
    uint32_t current_L;
    uint64_t window_ticks; /* ticks in the late window */
    uint64_t window_late;  /* late ticks in it */
    uint64_t rtt_samples;  /* round trips in the sliding window */
    int64_t rtt_q_ns;      /* its quantile (the lchoice quantile) */
    uint64_t rtt_recent_samples; /* round trips in its most recent sub-windows (0: unused) */
    int64_t rtt_recent_q_ns;     /* their quantile: the target of a raise when higher */
} drths_epoch_input_t;

typedef enum drths_epoch_reason {
    DRTHS_EPOCH_KEEP = 0,
    DRTHS_EPOCH_RAISE_LATE, /* the late rate exceeded its threshold */
    DRTHS_EPOCH_RAISE_RTT,  /* the round-trip quantile no longer fits in L */
    DRTHS_EPOCH_LOWER,      /* the need stayed lower for the hysteresis time */
} drths_epoch_reason_t;

/* Proposes the L for the next epoch (equal to in->current_L when nothing should change) and why.
 * Call it once per decision interval; st carries the hysteresis, the rate bound and the late
 * margin between calls (zero it at start). The caller applies every change it proposes, then
 * announces the epoch and empties the late window (the late flags of the old L are no evidence
 * against the new one); the round-trip window is left alone, since it measures the link, not L.
 * The need is ceil(rtt_q/dt) + both wake-up margins + safety (drths_lchoice_compute) plus the
 * live late margin:
 *   late rate above threshold   -> max(L + raise_step, need) at once (RAISE_LATE); the excess
 *                                  over the round trip's need becomes the late margin, kept
 *                                  late_hold after this raise;
 *   need > L + raise_deadband   -> urgent: at once to the higher of need and the need of the
 *                                  recent quantile (RAISE_RTT); not urgent: once the rate
 *                                  bound allows, to need + raise_deadband;
 *   need <= L - lower_min for the whole lower_hysteresis, rate bound allowing
 *                               -> the highest need of that time (LOWER);
 *   otherwise, or fewer than min_rtt_samples round trips -> keep.
 * A fixed L (lp->fixed_L) is never changed. RT-safe (pure apart from st). */
uint32_t drths_epoch_decide(const drths_epoch_params_t *p, const drths_lchoice_params_t *lp,
                            int64_t dt_ns, drths_epoch_state_t *st, const drths_epoch_input_t *in,
                            drths_epoch_reason_t *why);

/* "keep", "raise (late rate)", "raise (round trip)", "lower". RT-safe. */
const char *drths_epoch_reason_name(drths_epoch_reason_t r);

#endif
