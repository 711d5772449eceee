#include "common/platform/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RING_MAX_CAPACITY ((uint64_t)1 << 30)

int drths_ring_init(drths_ring_t *r, size_t record_size, size_t capacity)
{
    memset(r, 0, sizeof *r);
    if (record_size == 0 || capacity == 0 || capacity > RING_MAX_CAPACITY)
        return -EINVAL;
    uint64_t cap = 1;
    while (cap < capacity)
        cap <<= 1;
    if (record_size > SIZE_MAX / cap)
        return -EINVAL;
    unsigned char *buf = malloc((size_t)cap * record_size);
    if (!buf)
        return -ENOMEM;
    /* Write every byte now so that every page of the ring is faulted in (and locked, under
     * mlockall) before the RT thread starts, rather than at its first wrap. */
    memset(buf, 0, (size_t)cap * record_size);
    r->buf = buf;
    r->record_size = record_size;
    r->capacity = cap;
    r->mask = cap - 1;
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    atomic_init(&r->dropped, 0);
    r->tail_cache = 0;
    r->head_cache = 0;
    return 0;
}

void drths_ring_close(drths_ring_t *r)
{
    free(r->buf);
    r->buf = NULL;
    r->capacity = 0;
    r->mask = 0;
}

int drths_ring_push(drths_ring_t *r, const void *rec)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (head - r->tail_cache >= r->capacity) {
        /* Only re-read the consumer's index when the cached view says full, so that the two
         * threads do not bounce each other's cache line on every record. */
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head - r->tail_cache >= r->capacity) {
            atomic_store_explicit(&r->dropped,
                                  atomic_load_explicit(&r->dropped, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
            return -ENOBUFS;
        }
    }
    memcpy(r->buf + (size_t)(head & r->mask) * r->record_size, rec, r->record_size);
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    return 0;
}

int drths_ring_pop(drths_ring_t *r, void *rec)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (tail == r->head_cache) {
        r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
        if (tail == r->head_cache)
            return -EAGAIN;
    }
    memcpy(rec, r->buf + (size_t)(tail & r->mask) * r->record_size, r->record_size);
    atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
    return 0;
}

size_t drths_ring_count(drths_ring_t *r)
{
    /* Read the tail first: the head only grows, so head - tail can overstate but never go
     * negative; a snapshot taken while both move is clamped to the capacity. */
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t n = head - tail;
    return (size_t)(n > r->capacity ? r->capacity : n);
}

uint64_t drths_ring_dropped(drths_ring_t *r)
{
    return atomic_load_explicit(&r->dropped, memory_order_relaxed);
}

size_t drths_ring_capacity(const drths_ring_t *r)
{
    return (size_t)r->capacity;
}
