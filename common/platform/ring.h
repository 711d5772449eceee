/* Lock-free single-producer single-consumer ring of fixed-size records.
 *
 * This is the only channel between the real-time thread and the libuv thread
 * (docs/design.md#processes-and-threads): the RT thread pushes event, record and telemetry records;
 * the other thread pops them and does the logging and file writes. Exactly one thread may push and
 * exactly one (other) thread may pop; push and pop never block, never allocate and never take a
 * lock.
 *
 * The producer publishes a record with a release store of the head index after copying it in;
 * the consumer reads the head with acquire, copies the record out, then publishes the freed slot
 * with a release store of the tail. Indices are 64-bit counters that never wrap in practice
 * (at 10^9 records per second they wrap after 584 years), so full and empty are unambiguous.
 *
 * When the ring is full a push fails with -ENOBUFS and is counted: the RT thread must never wait
 * for the logger, and a lost log record is better than a late tick. The drop count tells the
 * consumer that it lost records.
 *
 * Ownership: the caller owns the drths_ring_t; the ring owns its storage (allocated by _init,
 * freed by _close). Records are copied in and out, so callers keep ownership of their buffers.
 */
#ifndef DRTHS_RING_H
#define DRTHS_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define DRTHS_RING_CACHELINE 64

typedef struct drths_ring {
    unsigned char *buf;  /* capacity · record_size bytes, owned */
    size_t record_size;
    uint64_t capacity;   /* a power of two */
    uint64_t mask;       /* capacity - 1 */
    /* Producer's line: the head it publishes and its cached view of the tail. */
    _Alignas(DRTHS_RING_CACHELINE) _Atomic uint64_t head;
    uint64_t tail_cache;
    _Atomic uint64_t dropped; /* written by the producer only, read by anyone */
    /* Consumer's line: the tail it publishes and its cached view of the head. */
    _Alignas(DRTHS_RING_CACHELINE) _Atomic uint64_t tail;
    uint64_t head_cache;
} drths_ring_t;

/* Allocates room for at least `capacity` records of record_size bytes each; the capacity is
 * rounded up to a power of two (drths_ring_capacity tells the result). Returns 0, -EINVAL for a
 * zero size or a capacity above 2^30 records, or -ENOMEM; on failure nothing is left allocated.
 * init-only. */
int drths_ring_init(drths_ring_t *r, size_t record_size, size_t capacity);

/* Frees the storage. Safe twice and on a zeroed struct. Neither side may use the ring during or
 * after the call. init-only. */
void drths_ring_close(drths_ring_t *r);

/* Producer only: copies record_size bytes from rec into the ring. Returns 0, or -ENOBUFS when
 * the ring is full (the record is dropped and counted). RT-safe. */
int drths_ring_push(drths_ring_t *r, const void *rec);

/* Consumer only: copies the oldest record into rec and frees its slot. Returns 0, or -EAGAIN
 * when the ring is empty. RT-safe. */
int drths_ring_pop(drths_ring_t *r, void *rec);

/* Number of records waiting. Exact from either side's own point of view, a snapshot from any
 * other thread. RT-safe. */
size_t drths_ring_count(drths_ring_t *r);

/* Records dropped by push because the ring was full, since init. RT-safe. */
uint64_t drths_ring_dropped(drths_ring_t *r);

/* The capacity after rounding, in records. RT-safe. */
size_t drths_ring_capacity(const drths_ring_t *r);

#endif
