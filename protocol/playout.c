#include "protocol/playout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int drths_playout_init(drths_playout_t *pb, size_t capacity, size_t sample_size,
                       uint64_t first_tick, drths_error_t *err)
{
    memset(pb, 0, sizeof *pb);
    if (capacity == 0)
        return drths_error_set(err, -EINVAL, "playout buffer capacity: must be > 0 ticks");
    if (sample_size == 0)
        return drths_error_set(err, -EINVAL, "playout buffer sample size: must be > 0 bytes");
    if (capacity > SIZE_MAX / sample_size)
        return drths_error_set(err, -EINVAL, "playout buffer: %zu slots of %zu bytes overflow",
                               capacity, sample_size);
    pb->samples = calloc(capacity, sample_size);
    pb->slot_tick = calloc(capacity, sizeof *pb->slot_tick);
    pb->arrival_ns = calloc(capacity, sizeof *pb->arrival_ns);
    pb->present = calloc(capacity, 1);
    if (!pb->samples || !pb->slot_tick || !pb->arrival_ns || !pb->present) {
        drths_playout_close(pb);
        return drths_error_set(err, -ENOMEM, "playout buffer: cannot allocate %zu slots",
                               capacity);
    }
    pb->capacity = capacity;
    pb->sample_size = sample_size;
    pb->head = first_tick;
    return 0;
}

void drths_playout_close(drths_playout_t *pb)
{
    free(pb->samples);
    free(pb->slot_tick);
    free(pb->arrival_ns);
    free(pb->present);
    pb->samples = NULL;
    pb->slot_tick = NULL;
    pb->arrival_ns = NULL;
    pb->present = NULL;
    pb->capacity = 0;
}

void drths_playout_reset(drths_playout_t *pb, uint64_t first_tick)
{
    memset(pb->present, 0, pb->capacity);
    pb->head = first_tick;
    pb->have_newest = 0;
    pb->newest = 0;
}

/* A slot answers for a tick only when it is marked present for exactly that tick, so slots of
 * ticks the head has passed need no clearing: they are simply overwritten. */
static int holds(const drths_playout_t *pb, size_t slot, uint64_t tick)
{
    return pb->present[slot] && pb->slot_tick[slot] == tick;
}

drths_playout_result_t drths_playout_put(drths_playout_t *pb, uint64_t tick, const void *sample,
                                         int64_t arrival_ns)
{
    if (tick < pb->head) {
        pb->c.late++;
        return DRTHS_PLAYOUT_LATE;
    }
    if (tick - pb->head >= pb->capacity || tick == UINT64_MAX) {
        pb->c.too_far++;
        return DRTHS_PLAYOUT_TOO_FAR;
    }
    size_t slot = (size_t)(tick % pb->capacity);
    if (holds(pb, slot, tick)) {
        pb->c.duplicates++;
        return DRTHS_PLAYOUT_DUPLICATE;
    }
    memcpy(pb->samples + slot * pb->sample_size, sample, pb->sample_size);
    pb->slot_tick[slot] = tick;
    pb->arrival_ns[slot] = arrival_ns;
    pb->present[slot] = 1;
    if (!pb->have_newest || tick > pb->newest) {
        pb->newest = tick;
        pb->have_newest = 1;
    }
    pb->c.stored++;
    return DRTHS_PLAYOUT_STORED;
}

int drths_playout_take(drths_playout_t *pb, uint64_t tick, int64_t deadline_ns, void *sample_out,
                       int64_t *lead_ns)
{
    if (tick < pb->head || tick == UINT64_MAX)
        return -ERANGE;
    pb->c.skipped += tick - pb->head;
    pb->head = tick + 1;
    size_t slot = (size_t)(tick % pb->capacity);
    if (!holds(pb, slot, tick)) {
        pb->c.missing++;
        return -ENOENT;
    }
    memcpy(sample_out, pb->samples + slot * pb->sample_size, pb->sample_size);
    if (lead_ns)
        *lead_ns = deadline_ns - pb->arrival_ns[slot];
    pb->present[slot] = 0;
    pb->c.taken++;
    return 0;
}

int drths_playout_has(const drths_playout_t *pb, uint64_t tick)
{
    if (tick < pb->head || tick - pb->head >= pb->capacity)
        return 0;
    return holds(pb, (size_t)(tick % pb->capacity), tick);
}

int drths_playout_newest(const drths_playout_t *pb, uint64_t *tick)
{
    if (!pb->have_newest)
        return -ENOENT;
    *tick = pb->newest;
    return 0;
}

size_t drths_playout_lookahead(const drths_playout_t *pb, uint64_t tick, size_t k, void *out)
{
    unsigned char *o = out;
    size_t n = 0;
    for (; n < k; n++) {
        if (tick == UINT64_MAX - n) /* tick + n + 1 would wrap */
            break;
        uint64_t t = tick + n + 1;
        if (!drths_playout_has(pb, t))
            break;
        memcpy(o + n * pb->sample_size, pb->samples + (size_t)(t % pb->capacity) * pb->sample_size,
               pb->sample_size);
    }
    return n;
}

const char *drths_playout_result_name(drths_playout_result_t r)
{
    switch (r) {
    case DRTHS_PLAYOUT_STORED:
        return "stored";
    case DRTHS_PLAYOUT_DUPLICATE:
        return "duplicate";
    case DRTHS_PLAYOUT_LATE:
        return "late";
    case DRTHS_PLAYOUT_TOO_FAR:
        return "too far";
    }
    return "?";
}
