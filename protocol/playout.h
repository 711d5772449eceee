/* The actuator site's playout buffer: commands indexed by the tick they are for
 * (docs/design.md#jitter-buffer).
 *
 * A command for tick k may arrive at any time before tick k; at tick k the control loop takes
 * it (or learns that it is missing and conceals it). The buffer is a ring of P slots indexed by
 * tick mod P, so it holds ticks [head, head + P) where head is the play head, the next tick to
 * be played. Each datagram carries the last R samples, so the same tick arrives up to R times:
 * the first copy is stored and the others are reported as DUPLICATE (whether to count a
 * duplicate depends on whether it came in a distinct datagram, which only the caller knows).
 *
 * Samples are opaque fixed-size records (for example displacement, velocity and acceleration per
 * channel and the damper command); the buffer copies them in and out. Ticks are 64-bit and
 * compared without wrap (they start from a session's first tick and never approach 2^64), but
 * nothing overflows near the top of the range either; the one value never used is UINT64_MAX,
 * since the play head after it could not be represented.
 *
 * Ownership: the caller owns the drths_playout_t; it owns its slot storage (allocated by _init,
 * freed by _close). It belongs to one thread (the RT thread); other threads see its counters
 * only through snapshots the RT thread publishes.
 */
#ifndef DRTHS_PLAYOUT_H
#define DRTHS_PLAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"

typedef enum drths_playout_result {
    DRTHS_PLAYOUT_STORED = 0, /* first copy of a tick still to be played */
    DRTHS_PLAYOUT_DUPLICATE,  /* the tick is already buffered; this copy is ignored */
    DRTHS_PLAYOUT_LATE,       /* the tick has already been played (or skipped) */
    DRTHS_PLAYOUT_TOO_FAR,    /* tick >= head + capacity (or UINT64_MAX): no slot for it yet */
} drths_playout_result_t;

typedef struct drths_playout_counters {
    uint64_t stored;     /* put returned STORED */
    uint64_t duplicates; /* put returned DUPLICATE */
    uint64_t late;       /* put returned LATE */
    uint64_t too_far;    /* put returned TOO_FAR */
    uint64_t taken;      /* take found the sample */
    uint64_t missing;    /* take found no sample */
    uint64_t skipped;    /* ticks the play head jumped over without a take */
} drths_playout_counters_t;

typedef struct drths_playout {
    size_t capacity;       /* P, slots */
    size_t sample_size;    /* bytes per sample */
    unsigned char *samples; /* capacity · sample_size, owned */
    uint64_t *slot_tick;   /* tick held by each slot, owned */
    int64_t *arrival_ns;   /* arrival time of each slot's sample, owned */
    unsigned char *present; /* slot holds a sample for slot_tick, owned */
    uint64_t head;         /* next tick to play; ticks below it are finished */
    uint64_t newest;       /* highest tick stored since init/reset (valid if have_newest) */
    int have_newest;
    drths_playout_counters_t c;
} drths_playout_t;

/* Allocates capacity slots of sample_size bytes; the play head starts at first_tick. Returns
 * 0, -EINVAL (zero capacity or size, with err naming it) or -ENOMEM; on failure nothing is
 * left allocated. init-only. */
int drths_playout_init(drths_playout_t *pb, size_t capacity, size_t sample_size,
                       uint64_t first_tick, drths_error_t *err);

/* Frees the storage. Safe twice and on a zeroed struct. init-only. */
void drths_playout_close(drths_playout_t *pb);

/* Empties the buffer and moves the play head to first_tick, keeping the counters (a new epoch
 * or session continues the same run's statistics). RT-safe: O(capacity), no allocation. */
void drths_playout_reset(drths_playout_t *pb, uint64_t first_tick);

/* Offers the sample for `tick`, received at arrival_ns. Copies it in only when the result is
 * STORED. RT-safe. */
drths_playout_result_t drths_playout_put(drths_playout_t *pb, uint64_t tick, const void *sample,
                                         int64_t arrival_ns);

/* Plays tick `tick` (normally the play head; a larger tick skips and counts the ticks between).
 * If its sample is buffered, copies it to sample_out, sets *lead_ns (may be NULL) to
 * deadline_ns minus its arrival time, i.e. how long before it was needed it arrived, and
 * returns 0. Otherwise returns -ENOENT (counted missing). Either way the play head moves to
 * tick + 1, so a copy arriving afterwards is LATE. Returns -ERANGE, changing nothing, for a tick
 * below the play head (or UINT64_MAX). RT-safe. */
int drths_playout_take(drths_playout_t *pb, uint64_t tick, int64_t deadline_ns, void *sample_out,
                       int64_t *lead_ns);

/* Nonzero when the sample for `tick` is buffered (and not yet played). RT-safe. */
int drths_playout_has(const drths_playout_t *pb, uint64_t tick);

/* Highest tick stored since init or reset: 0 with *tick set, or -ENOENT if none. The distance
 * newest - head is how far ahead of the loop the commands are arriving. RT-safe. */
int drths_playout_newest(const drths_playout_t *pb, uint64_t *tick);

/* Copies the buffered samples for ticks tick+1 .. tick+k into out (k · sample_size bytes),
 * stopping at the first one not buffered, and returns how many were copied. This is the preview
 * of future commands for the actuator compensation (docs/design.md#compensation).
 * RT-safe. */
size_t drths_playout_lookahead(const drths_playout_t *pb, uint64_t tick, size_t k, void *out);

/* The play head: the next tick to be played. RT-safe. */
static inline uint64_t drths_playout_head(const drths_playout_t *pb)
{
    return pb->head;
}

/* "stored", "duplicate", "late", "too far". RT-safe. */
const char *drths_playout_result_name(drths_playout_result_t r);

#endif
