/* One direction of the drths-impair UDP relay: receive, decide with the impairment model, hold in
 * a time-ordered queue, send at the decided time.
 *
 * Each direction runs one thread. It waits in poll() on its input socket, a timerfd armed with
 * TFD_TIMER_ABSTIME on CLOCK_MONOTONIC at the next send time, and an eventfd for stop. (A
 * timerfd rather than clock_nanosleep, because a thread asleep in clock_nanosleep could not take
 * arrivals while it waits; the timerfd fires at the same absolute deadline.) Arrivals are read
 * with recvmmsg in batches and stamped with the kernel's receive timestamp (SO_TIMESTAMPNS,
 * converted to CLOCK_MONOTONIC), so a datagram that waited in the socket while the thread was
 * sending is still delayed from its true arrival. Packets wait in a binary heap keyed by (send
 * time, arrival order) over a pool of fixed-size slots allocated at start; nothing is allocated
 * per packet. A packet that finds the queue at its limit, or no free slot, is dropped and counted
 * as overflow.
 *
 * Ownership: the caller owns relay_dir_t and the sockets; relay_dir_init allocates the pool and
 * relay_dir_close frees it (safe twice). The peer address is shared between the two directions:
 * the forward direction writes the client's address, the backward direction reads it.
 */
#ifndef DRTHS_TOOLS_IMPAIR_RELAY_H
#define DRTHS_TOOLS_IMPAIR_RELAY_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/platform/impair.h"

/* The last client address seen, written by one thread and read by the other. A mutex, not a
 * seqlock: the critical section is one 128-byte copy, uncontended but for a changing address,
 * and ThreadSanitizer can check it. Initialise with RELAY_PEER_INIT. */
typedef struct relay_peer {
    pthread_mutex_t lock;
    struct sockaddr_storage addr;
    socklen_t len;
    atomic_bool known;
} relay_peer_t;
#define RELAY_PEER_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* A spec that replaces the direction's spec at_ns after start. */
typedef struct relay_change {
    int64_t at_ns;
    drths_impair_spec_t spec;
    char text[256];
} relay_change_t;

#define RELAY_LATE_HIST 20000 /* lateness histogram: 1 us bins up to 20 ms */

/* Counters, written only by the direction's thread, read by the main thread at any time
 * (relaxed atomics: each value is exact, a snapshot of several is not atomic as a whole). */
typedef struct relay_counters {
    _Atomic uint64_t received, bytes_in, forwarded, bytes_out;
    _Atomic uint64_t duplicated, dropped_random, dropped_ge, dropped_overflow, dropped_oversize;
    _Atomic uint64_t dropped_no_client, send_errors, reordered, reorder_untracked;
    _Atomic uint64_t sent_at_once, corrupted, pending, pending_max, spec_changes;
    _Atomic uint64_t delay_n;
    _Atomic int64_t delay_sum_ns, delay_min_ns, delay_max_ns; /* applied: sent - arrived */
    _Atomic int64_t late_sum_ns, late_max_ns;                  /* sent - scheduled */
    _Atomic uint32_t late_hist[RELAY_LATE_HIST + 1];           /* last bin: >= 20 ms */
} relay_counters_t;

typedef struct relay_slot {
    int64_t send_ns;
    int64_t arrival_ns;
    uint64_t seq;     /* arrival order; both copies of a duplicate share it */
    uint32_t len;
    bool tracked;     /* counted in the reorder ring */
} relay_slot_t;

typedef struct relay_dir {
    const char *name;         /* "forward" or "backward" */
    int in_fd;                /* receives from here */
    int out_fd;               /* sends from here */
    bool out_connected;       /* out_fd is connected (forward); else send to the peer */
    bool record_peer;         /* remember the sender of each datagram as the client */
    relay_peer_t *peer;

    drths_impair_t model;
    relay_change_t *changes;  /* sorted by at_ns, owned by the caller */
    size_t n_changes, next_change;
    uint32_t limit_default;   /* queue limit when the spec has none */
    uint32_t limit;

    size_t slot_size;
    uint32_t pool_n;
    uint8_t *buf;             /* pool_n * slot_size bytes (mmap) */
    relay_slot_t *slots;
    uint32_t *free_stack;
    uint32_t free_top;
    uint32_t *heap;
    uint32_t heap_n;

    uint8_t *pend;            /* reorder tracking: copies pending per arrival seq (ring) */
    uint64_t pend_mask, next_seq, lo_seq;

    int64_t clock_off_ns;     /* CLOCK_MONOTONIC - CLOCK_REALTIME, for receive stamps */
    bool clock_off_known;
    int timer_fd, wake_fd;
    int64_t armed_ns;
    int64_t t0_ns;            /* start, CLOCK_MONOTONIC */
    atomic_bool stop;
    int rt_priority;          /* SCHED_FIFO priority for the thread, 0: none */
    bool rt_refused;          /* SCHED_FIFO was not permitted; the thread runs normally */
    int thread_error;         /* set by the thread if it had to stop on an error (negative errno) */
    bool started;
    pthread_t thread;

    relay_counters_t c;
} relay_dir_t;

/* Allocates the pool (pool_n slots of slot_size bytes) and the queue. The model must be set up
 * by the caller (drths_impair_init) before relay_dir_start. init-only. */
int relay_dir_init(relay_dir_t *d, const char *name, uint32_t pool_n, size_t slot_size);

/* Starts the thread. t0_ns is the CLOCK_MONOTONIC start time that changes count from. */
int relay_dir_start(relay_dir_t *d, int64_t t0_ns);

/* Asks the thread to stop, wakes it and joins it. Packets still queued stay counted as pending. */
void relay_dir_stop(relay_dir_t *d);

void relay_dir_close(relay_dir_t *d);

/* Thread CPU time in seconds (after start), or -1. */
double relay_dir_cpu_s(relay_dir_t *d);

/* Lateness percentile (0..1) in microseconds from the histogram. */
double relay_dir_late_us_quantile(relay_dir_t *d, double q);

int64_t relay_now_ns(void);

#endif
