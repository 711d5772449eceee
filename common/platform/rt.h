/* Real-time hardening of the control thread (docs/design.md#processes-and-threads).
 *
 * Four measures, each optional and each reported: SCHED_FIFO priority, CPU affinity, locked and
 * prefaulted memory, and a zero CPU DMA latency request (which keeps the CPU out of deep idle
 * states whose exit latency would show up as tick lateness). On a lab machine set up for real
 * time all four apply; on a laptop or in a container some are not permitted, and the run still
 * goes ahead with a clear line per item saying what is and is not in effect, unless the
 * operator asked for real time to be required (`require`), which turns anything not applied
 * into an error.
 *
 * Two kinds of failure are told apart:
 * - not permitted / not available (EPERM, EACCES, RLIMIT_MEMLOCK, no /dev/cpu_dma_latency): a
 *   property of the machine; reported, and an error only with `require`;
 * - invalid request (a priority outside 1..99, a CPU that does not exist or is not in this
 *   process's cpuset, a stack prefault larger than half the stack): a configuration mistake;
 *   always an error.
 *
 * Ownership: the caller owns the options and the report. The report holds what must stay in
 * place while the experiment runs (the open /dev/cpu_dma_latency descriptor, the memory lock);
 * drths_rt_report_close releases them.
 */
#ifndef DRTHS_RT_H
#define DRTHS_RT_H

#include <pthread.h>

#include <stddef.h>
#include <stdint.h>

typedef struct drths_rt_options {
    int priority;                /* SCHED_FIFO priority 1..99; 0 leaves the policy unchanged */
    int cpu;                     /* CPU to pin the calling thread to; -1 leaves it unpinned */
    int lock_memory;             /* nonzero: mlockall(MCL_CURRENT | MCL_FUTURE) */
    size_t prefault_stack_bytes; /* bytes of the calling thread's stack to touch; 0: none */
    int cpu_dma_latency;         /* nonzero: hold a 0 µs request on /dev/cpu_dma_latency */
    int require;                 /* nonzero: anything not applied makes apply fail */
} drths_rt_options_t;

/* What a control thread should ask for: priority 80, no pinning, locked memory with 256 KiB of
 * stack prefaulted, DMA latency 0, not required. RT-safe (plain assignments). */
void drths_rt_options_default(drths_rt_options_t *o);

typedef enum drths_rt_status {
    DRTHS_RT_NOT_REQUESTED = 0,
    DRTHS_RT_APPLIED,
    DRTHS_RT_NOT_PERMITTED, /* refused by the system: permissions, limits, missing device */
    DRTHS_RT_INVALID,       /* the request itself is wrong */
} drths_rt_status_t;

enum {
    DRTHS_RT_ITEM_SCHED = 0,
    DRTHS_RT_ITEM_AFFINITY,
    DRTHS_RT_ITEM_MEMORY,
    DRTHS_RT_ITEM_DMA_LATENCY,
    DRTHS_RT_NITEMS
};

typedef struct drths_rt_item {
    drths_rt_status_t status;
    int err;          /* negative errno when not applied, else 0 */
    char what[64];    /* e.g. "SCHED_FIFO priority 80" */
    char detail[192]; /* the errno text (< 96 bytes) and any hint, empty when applied */
} drths_rt_item_t;

typedef struct drths_rt_report {
    drths_rt_item_t item[DRTHS_RT_NITEMS];
    int require;
    int dma_fd; /* open /dev/cpu_dma_latency, or -1; owned, closed by drths_rt_report_close */
    int locked; /* mlockall is in effect; undone by drths_rt_report_close */
} drths_rt_report_t;

/* Applies the options: scheduling and affinity to the calling thread (so call it from the RT
 * thread itself), memory locking and the DMA latency request to the whole process. Every item is
 * attempted and reported in rep, even after one fails. Returns 0 when nothing is invalid and,
 * with o->require, everything requested was applied; otherwise the first item's negative errno.
 * rep must be closed with drths_rt_report_close even when this fails. init-only. */
int drths_rt_apply_thread(const drths_rt_options_t *o, drths_rt_report_t *rep);

/* Locks current and future pages (mlockall) and then touches prefault_stack_bytes of the
 * calling thread's stack, so neither page faults nor swapping can stall the loop later. Returns
 * 0, -EINVAL when the prefault exceeds half the thread's stack (nothing is done), or mlockall's
 * negative errno (the stack is prefaulted anyway). init-only. */
int drths_rt_lock_memory(size_t prefault_stack_bytes);

/* The RT thread's stack: the default 8 MiB would all be locked and resident under mlockall;
 * the loops use a few tens of KiB (the prefault touches a quarter of it). Sanitizer builds keep
 * 8 MiB: ThreadSanitizer's thread state lives in static TLS, which glibc carves out of the
 * thread's stack, and leaves less than the prefault needs of 1 MiB. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DRTHS_RT_STACK_BYTES ((size_t)8 << 20)
#else
#define DRTHS_RT_STACK_BYTES ((size_t)1 << 20)
#endif

/* pthread_create with a DRTHS_RT_STACK_BYTES stack. Returns 0 or a negative errno. init-only. */
int drths_rt_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

/* pthread_create with a DRTHS_RT_STACK_BYTES stack at SCHED_FIFO priority (1..99), for a helper
 * thread that must run below the control loop but above ordinary processes (the recorder's
 * writer). When the system refuses the priority (no CAP_SYS_NICE, no rtprio limit), the thread
 * is created with the default policy instead and it says "not permitted": like the control
 * thread's items, a missing privilege is reported, not an error. priority 0: the default
 * policy, "not requested". Returns 0 or a negative errno (no thread). init-only. */
int drths_rt_thread_create_fifo(pthread_t *t, void *(*fn)(void *), void *arg, int priority,
                                drths_rt_item_t *it);

/* Opens path (NULL: /dev/cpu_dma_latency) and writes usec as the PM QoS request. The request
 * holds only while the returned descriptor stays open. Returns the descriptor (>= 0) or a
 * negative errno. init-only. */
int drths_rt_open_dma_latency(const char *path, int32_t usec);

/* Formats item i of the report as one line for the start-up log, for example
 * "rt: SCHED_FIFO priority 80: not permitted (Operation not permitted); continuing without it".
 * Returns snprintf's length. init-only. */
int drths_rt_report_line(const drths_rt_report_t *rep, int i, char *buf, size_t len);

/* Releases what apply acquired: closes the DMA latency descriptor and undoes the memory lock.
 * Scheduling and affinity stay with the thread. Safe twice and on a zeroed report. init-only. */
void drths_rt_report_close(drths_rt_report_t *rep);

/* "applied", "not requested", "not permitted", "invalid". RT-safe. */
const char *drths_rt_status_name(drths_rt_status_t s);

#endif
