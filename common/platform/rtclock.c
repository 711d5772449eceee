#include "common/platform/rtclock.h"

#include <errno.h>

int64_t drths_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return drths_timespec_to_ns(&ts);
}

int drths_sleep_until_ns(int64_t t_ns)
{
    struct timespec ts = drths_ns_to_timespec(t_ns);
    int r;
    /* clock_nanosleep returns the error number instead of setting errno. With TIMER_ABSTIME
     * an interrupted sleep is simply restarted toward the same deadline. */
    do {
        r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    } while (r == EINTR);
    return -r;
}

int64_t drths_clock_monotonic(void *ctx)
{
    (void)ctx;
    return drths_now_ns();
}

int drths_sleep_monotonic(void *ctx, int64_t t_ns)
{
    (void)ctx;
    return drths_sleep_until_ns(t_ns);
}

int drths_ticker_init(drths_ticker_t *t, int64_t period_ns, int64_t start_ns,
                      int64_t late_threshold_ns, drths_clock_fn clock,
                      drths_sleep_until_fn sleep_until, void *ctx)
{
    if (period_ns <= 0 || late_threshold_ns < 0 || (!clock != !sleep_until))
        return -EINVAL;
    *t = (drths_ticker_t){
        .period_ns = period_ns,
        .start_ns = start_ns,
        .late_threshold_ns = late_threshold_ns,
        .next_tick = 0,
        .next_deadline_ns = start_ns,
        .clock = clock ? clock : drths_clock_monotonic,
        .sleep_until = sleep_until ? sleep_until : drths_sleep_monotonic,
        .ctx = ctx,
    };
    return 0;
}

int drths_ticker_set_spin(drths_ticker_t *t, int64_t spin_ns)
{
    if (spin_ns < 0)
        return -EINVAL;
    t->spin_ns = spin_ns;
    return 0;
}

int64_t drths_ticker_auto_spin_ns(int64_t period_ns)
{
    return period_ns <= DRTHS_TICKER_AUTO_SPIN_PERIOD_NS ? period_ns * 3 / 10 : 0;
}

int drths_ticker_wait(drths_ticker_t *t, uint64_t *tick)
{
    /* A deadline already passed returns from the sleep at once, which is how a late loop
     * catches up without skipping ticks. */
    int r = t->sleep_until(t->ctx, t->next_deadline_ns - t->spin_ns);
    if (r < 0)
        return r;
    int64_t now = t->clock(t->ctx);
    while (now < t->next_deadline_ns)
        now = t->clock(t->ctx);
    t->tick = t->next_tick;
    t->deadline_ns = t->next_deadline_ns;
    t->lateness_ns = now - t->deadline_ns;
    t->ticks++;
    if (t->lateness_ns > t->late_threshold_ns)
        t->late_ticks++;
    if (t->ticks == 1 || t->lateness_ns > t->max_lateness_ns)
        t->max_lateness_ns = t->lateness_ns;
    t->next_tick++;
    t->next_deadline_ns += t->period_ns;
    *tick = t->tick;
    return 0;
}
