#include "protocol/reorder.h"

#include <errno.h>
#include <string.h>

int drths_reorder_init(drths_reorder_t *rb, size_t depth, size_t sample_size, uint64_t first_tick,
                       drths_error_t *err)
{
    if (depth == 0) {
        memset(rb, 0, sizeof *rb);
        return drths_error_set(err, -EINVAL, "feedback reorder buffer depth: must be > 0 ticks");
    }
    if (sample_size == 0) {
        memset(rb, 0, sizeof *rb);
        return drths_error_set(err, -EINVAL,
                               "feedback reorder buffer sample size: must be > 0 bytes");
    }
    return drths_playout_init(&rb->pb, depth, sample_size, first_tick, err);
}

void drths_reorder_close(drths_reorder_t *rb)
{
    drths_playout_close(&rb->pb);
}

drths_reorder_result_t drths_reorder_put(drths_reorder_t *rb, uint64_t tick, const void *sample)
{
    /* Arrival times are not kept here: the numerical site measures the round trip from echoes
     * (protocol/estimator.h), not from the reorder buffer. */
    return (drths_reorder_result_t)drths_playout_put(&rb->pb, tick, sample, 0);
}

int drths_reorder_take_next(drths_reorder_t *rb, uint64_t *tick, void *sample_out)
{
    uint64_t next = rb->pb.head;
    if (!drths_playout_has(&rb->pb, next))
        return -EAGAIN;
    int r = drths_playout_take(&rb->pb, next, 0, sample_out, NULL);
    if (r < 0)
        return r;
    *tick = next;
    return 0;
}

int drths_reorder_skip_next(drths_reorder_t *rb, uint64_t *tick)
{
    uint64_t next = rb->pb.head;
    if (drths_playout_has(&rb->pb, next))
        return -EEXIST;
    /* take on an absent tick counts it missing and advances the head. */
    unsigned char none;
    int r = drths_playout_take(&rb->pb, next, 0, &none, NULL);
    if (r != -ENOENT)
        return r < 0 ? r : -EEXIST;
    *tick = next;
    return 0;
}

int drths_reorder_has(const drths_reorder_t *rb, uint64_t tick)
{
    return drths_playout_has(&rb->pb, tick);
}

int drths_reorder_newest(const drths_reorder_t *rb, uint64_t *tick)
{
    return drths_playout_newest(&rb->pb, tick);
}
