/* The numerical site's feedback reorder buffer (docs/design.md#jitter-buffer).
 *
 * The numerical site integrates step n with the feedback of tick n, so it consumes feedback
 * strictly in tick order. Datagrams may arrive out of order, duplicated (each carries R samples,
 * of ticks t - offset(k): a lost tick's copy comes up to the largest offset later) or not at
 * all; this small tick-indexed buffer puts them back in order. A copy of a tick not yet consumed
 * is stored however much newer feedback came first (the depth is thousands of ticks). The
 * consumer takes the next tick when it is there; when its deadline passes without it, the
 * consumer conceals the step (Smith model force, docs/design.md#concealment) and skips the tick,
 * which is counted as missing; a copy arriving afterwards is LATE.
 *
 * It is the playout buffer's slot logic (protocol/playout.h) with an in-order consumer: taking
 * never advances past a tick that has not arrived, only an explicit skip does.
 *
 * Ownership: the caller owns the drths_reorder_t; it owns its storage (_init/_close). One thread
 * (the numerical site's RT thread) uses it.
 */
#ifndef DRTHS_REORDER_H
#define DRTHS_REORDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"
#include "protocol/playout.h"

typedef enum drths_reorder_result {
    DRTHS_REORDER_STORED = DRTHS_PLAYOUT_STORED,
    DRTHS_REORDER_DUPLICATE = DRTHS_PLAYOUT_DUPLICATE, /* already buffered */
    DRTHS_REORDER_LATE = DRTHS_PLAYOUT_LATE,           /* already consumed or skipped */
    DRTHS_REORDER_TOO_FAR = DRTHS_PLAYOUT_TOO_FAR,     /* tick >= next + depth */
} drths_reorder_result_t;

typedef struct drths_reorder {
    /* The counters are pb.c: stored, duplicates, late, too_far; taken counts take_next
     * successes and missing counts skips of ticks that never arrived. */
    drths_playout_t pb;
} drths_reorder_t;

/* Allocates depth slots of sample_size bytes; the first tick to consume is first_tick. Returns
 * 0, -EINVAL (with err naming the field) or -ENOMEM; on failure nothing is left allocated.
 * init-only. */
int drths_reorder_init(drths_reorder_t *rb, size_t depth, size_t sample_size, uint64_t first_tick,
                       drths_error_t *err);

/* Frees the storage. Safe twice and on a zeroed struct. init-only. */
void drths_reorder_close(drths_reorder_t *rb);

/* Offers the feedback sample for `tick`; copies it in when the result is STORED. RT-safe. */
drths_reorder_result_t drths_reorder_put(drths_reorder_t *rb, uint64_t tick, const void *sample);

/* If the next tick in order has arrived, copies it to sample_out, sets *tick, advances and
 * returns 0; otherwise returns -EAGAIN and changes nothing (keep waiting, up to the deadline).
 * RT-safe. */
int drths_reorder_take_next(drths_reorder_t *rb, uint64_t *tick, void *sample_out);

/* Gives up on the next tick (its deadline passed): sets *tick to it, counts it missing,
 * advances and returns 0. Returns -EEXIST and changes nothing if the tick is in fact buffered
 * (take it instead). RT-safe. */
int drths_reorder_skip_next(drths_reorder_t *rb, uint64_t *tick);

/* Nonzero when feedback for `tick` is buffered and not yet consumed. RT-safe. */
int drths_reorder_has(const drths_reorder_t *rb, uint64_t tick);

/* The next tick the consumer will take. RT-safe. */
static inline uint64_t drths_reorder_next(const drths_reorder_t *rb)
{
    return rb->pb.head;
}

/* Highest tick stored so far: 0 with *tick, or -ENOENT if none. A newest tick well past next
 * means the next one is probably lost rather than slow. RT-safe. */
int drths_reorder_newest(const drths_reorder_t *rb, uint64_t *tick);

#endif
