/* The numerical site's own timing in the run, for summary.json's `step_timing` and tools/bench:
 * per step, what it costs and how late it starts.
 *
 * - compute: from the poll that starts step n (its every link's feedback in hand or given up)
 *   to the send of its last COMMAND (every link's), so with N links it holds the correction,
 *   the control law, N Smith models and N seals and sends;
 * - lateness: the step's start against the loop's own tick clock. The numerical site has no
 *   clock of its own in the loop (docs/design.md, "Timing model"): step n starts when tick n's
 *   feedback is there, and the actuator sites' ticks are dt apart. So the start offset
 *   start(n) - n dt is constant for a site that is never late, and a step's lateness is its
 *   offset minus the smallest offset of the run. It holds the numerical site's wake-up, a step
 *   that overran into the next, and whatever made the feedback late (the actuator sites'
 *   ticks, the network): on localhost without a relay, the first two.
 *
 * Both go into fixed-bin histograms allocated at init (common/platform/stats.h), so recording
 * a step is RT-safe and a run of any length costs the same memory.
 *
 * Ownership: the caller owns drths_steptime_t; _init allocates the histograms, _close frees
 * them (safe twice).
 */
#ifndef DRTHS_STEPTIME_H
#define DRTHS_STEPTIME_H

#include <stdint.h>

#include "common/platform/error.h"
#include "common/platform/stats.h"

typedef struct drths_steptime {
    int64_t dt_ns;
    drths_hist_t compute; /* ns per step, 100 ns bins to 10 ms */
    drths_hist_t offset;  /* start(n) - n dt - base_ns, 1 us bins over +/- 100 ms */
    int64_t base_ns;      /* the first step's offset - 100 ms */
    int have_base;
    /* the step in progress: started, its last COMMAND's send so far */
    int open;
    int64_t start_ns, last_send_ns;
} drths_steptime_t;

/* The figures of a run (drths_steptime_summary); times in ns. A quantile is the upper edge of
 * the bin holding it (at most 100 ns above the true one for compute, 1 us for lateness); the
 * maxima are exact. */
typedef struct drths_steptime_summary {
    uint64_t steps;
    int64_t compute_p50, compute_p99, compute_p999, compute_max;
    int64_t late_p50, late_p99, late_p999, late_max;
    uint64_t later_than_half_dt; /* steps that started more than dt/2 late */
} drths_steptime_summary_t;

/* For steps dt_ns apart. Returns 0 or -ENOMEM / -EINVAL (err says which); nothing is left
 * allocated on failure. init-only. */
int drths_steptime_init(drths_steptime_t *t, int64_t dt_ns, drths_error_t *err);

/* Frees the histograms. Safe twice and on a zeroed struct. init-only. */
void drths_steptime_close(drths_steptime_t *t);

/* Step `step` started at now_ns: the step before it ends here if it was still open. RT-safe. */
void drths_steptime_start(drths_steptime_t *t, int64_t step, int64_t now_ns);

/* A COMMAND of the open step was sent at now_ns. RT-safe. */
void drths_steptime_sent(drths_steptime_t *t, int64_t now_ns);

/* The loop waits (nothing more to send for the open step): it ends at its last send. RT-safe. */
void drths_steptime_idle(drths_steptime_t *t);

/* The figures so far (an open step is not counted). init-only (it reads every bin). */
void drths_steptime_summary(const drths_steptime_t *t, drths_steptime_summary_t *s);

#endif
