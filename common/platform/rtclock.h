/* Time for the real-time loop: CLOCK_MONOTONIC in int64 nanoseconds, an absolute-deadline sleep,
 * and the tick scheduler of the actuator site's control loop (docs/design.md#timing-model).
 *
 * All times are int64_t nanoseconds on CLOCK_MONOTONIC (good for 292 years from boot). Absolute
 * deadlines, never relative sleeps: a relative sleep adds the loop's own run time to every
 * period and drifts; an absolute deadline start + k·period does not.
 *
 * The ticker never skips a tick. If the thread wakes late (the machine did not schedule it in
 * time), tick k is still returned, with its own index and its lateness; the following ticks,
 * whose deadlines may also have passed, are returned immediately one after the other until the
 * loop has caught up. Skipping would silently break the tick-indexed protocol (a command for
 * tick k is applied at tick k).
 *
 * The ticker reads time and sleeps through function pointers, so tests drive it in virtual time
 * with a fake clock and a fake sleep that only advances the fake clock.
 *
 * Ownership: the caller owns the drths_ticker_t and the context passed to the clock functions;
 * nothing is allocated, so there is no _close.
 */
#ifndef DRTHS_RTCLOCK_H
#define DRTHS_RTCLOCK_H

#include <stdint.h>
#include <time.h>

#define DRTHS_NS_PER_S INT64_C(1000000000)

/* CLOCK_MONOTONIC now, in ns. RT-safe (vDSO, no system call on Linux/x86-64 and arm64). */
int64_t drths_now_ns(void);

/* timespec <-> ns. The timespec from a negative ns has a non-negative tv_nsec, as POSIX
 * requires. RT-safe. */
static inline int64_t drths_timespec_to_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * DRTHS_NS_PER_S + (int64_t)ts->tv_nsec;
}

static inline struct timespec drths_ns_to_timespec(int64_t ns)
{
    struct timespec ts;
    int64_t sec = ns / DRTHS_NS_PER_S;
    int64_t rem = ns % DRTHS_NS_PER_S;
    if (rem < 0) {
        rem += DRTHS_NS_PER_S;
        sec -= 1;
    }
    ts.tv_sec = (time_t)sec;
    ts.tv_nsec = (long)rem;
    return ts;
}

/* Sleeps until CLOCK_MONOTONIC reaches t_ns (returns at once if it already has). Restarts the
 * sleep after a signal, since the deadline is absolute. Returns 0 or a negative errno (the
 * positive code clock_nanosleep returns, negated). RT-safe: the only blocking call the RT loop
 * is allowed. */
int drths_sleep_until_ns(int64_t t_ns);

/* The clock and sleep the ticker uses; ctx is the caller's (NULL for the real ones). */
typedef int64_t (*drths_clock_fn)(void *ctx);
typedef int (*drths_sleep_until_fn)(void *ctx, int64_t t_ns);

/* The real clock and sleep, in the ticker's function-pointer form. RT-safe. */
int64_t drths_clock_monotonic(void *ctx);
int drths_sleep_monotonic(void *ctx, int64_t t_ns);

typedef struct drths_ticker {
    int64_t period_ns;
    int64_t start_ns;          /* deadline of tick 0 */
    int64_t late_threshold_ns; /* lateness above this counts as a late tick */
    int64_t spin_ns;           /* sleep until this long before the deadline, then spin (0) */
    uint64_t next_tick;        /* index the next drths_ticker_wait returns */
    int64_t next_deadline_ns;  /* start_ns + next_tick·period_ns */
    /* The current tick (the one the last wait returned): */
    uint64_t tick;
    int64_t deadline_ns;
    int64_t lateness_ns;       /* wake-up time minus deadline; >= 0 with a real clock */
    /* Since init: */
    uint64_t ticks;            /* ticks returned */
    uint64_t late_ticks;       /* ticks with lateness_ns > late_threshold_ns */
    int64_t max_lateness_ns;
    drths_clock_fn clock;
    drths_sleep_until_fn sleep_until;
    void *ctx;
} drths_ticker_t;

/* Sets up a ticker whose tick 0 is due at start_ns, then one tick every period_ns. clock and
 * sleep_until may both be NULL for CLOCK_MONOTONIC (or both given, for tests). Returns 0, or
 * -EINVAL for a period <= 0, a negative threshold or only one of the two functions. init-only. */
int drths_ticker_init(drths_ticker_t *t, int64_t period_ns, int64_t start_ns,
                      int64_t late_threshold_ns, drths_clock_fn clock,
                      drths_sleep_until_fn sleep_until, void *ctx);

/* Sleeps only until spin_ns before each deadline and spins on the clock for the rest, so the
 * wake-up latency of the sleep (tens of µs on a virtual machine) is paid before the deadline
 * instead of after it. Costs spin_ns of CPU per tick; spin_ns >= period_ns spins always.
 * spin_ns < 0 is -EINVAL. init-only. */
int drths_ticker_set_spin(drths_ticker_t *t, int64_t spin_ns);

/* Periods at or below this (rates of 10 kHz and more) spin by default: half such a period is
 * within the wake-up latency of a virtual machine's timer (20-50 µs), so sleeping to the
 * deadline makes ticks late that spinning keeps on time (README, Benchmarks). */
#define DRTHS_TICKER_AUTO_SPIN_PERIOD_NS 100000
/* The spin drths-physical uses without --tick-spin: 30 % of period_ns for a period of at most
 * DRTHS_TICKER_AUTO_SPIN_PERIOD_NS, else 0 (sleep to the deadline). init-only. */
int64_t drths_ticker_auto_spin_ns(int64_t period_ns);

/* Sleeps until the next tick's deadline, then records when it woke. Returns 0 with *tick set to
 * the tick's index (each index exactly once, in order, none skipped), or the sleep's negative
 * errno (the tick is then not consumed). After it returns, t->deadline_ns and t->lateness_ns
 * describe this tick. RT-safe. */
int drths_ticker_wait(drths_ticker_t *t, uint64_t *tick);

/* Deadline of tick k (start_ns + k·period_ns). RT-safe. */
static inline int64_t drths_ticker_deadline(const drths_ticker_t *t, uint64_t k)
{
    return t->start_ns + (int64_t)k * t->period_ns;
}

#endif
