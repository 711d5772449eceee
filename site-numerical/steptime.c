#include "site-numerical/steptime.h"

#include <errno.h>
#include <string.h>

#define COMPUTE_BIN_NS 100
#define COMPUTE_BINS 100000 /* to 10 ms */
#define OFFSET_BIN_NS 1000
#define OFFSET_SPAN_NS 100000000 /* each side of the first step's offset */

int drths_steptime_init(drths_steptime_t *t, int64_t dt_ns, drths_error_t *err)
{
    memset(t, 0, sizeof *t);
    if (dt_ns <= 0)
        return drths_error_set(err, -EINVAL, "step timing: dt %lld ns is not positive",
                               (long long)dt_ns);
    t->dt_ns = dt_ns;
    int rc = drths_hist_init(&t->compute, COMPUTE_BIN_NS, COMPUTE_BINS, err);
    if (!rc)
        rc = drths_hist_init(&t->offset, OFFSET_BIN_NS, 2 * OFFSET_SPAN_NS / OFFSET_BIN_NS, err);
    if (rc)
        drths_steptime_close(t);
    return rc;
}

void drths_steptime_close(drths_steptime_t *t)
{
    drths_hist_close(&t->compute);
    drths_hist_close(&t->offset);
}

void drths_steptime_idle(drths_steptime_t *t)
{
    if (!t->open)
        return;
    drths_hist_add(&t->compute, t->last_send_ns - t->start_ns);
    t->open = 0;
}

void drths_steptime_start(drths_steptime_t *t, int64_t step, int64_t now_ns)
{
    drths_steptime_idle(t);
    int64_t off = now_ns - step * t->dt_ns;
    if (!t->have_base) {
        t->base_ns = off - OFFSET_SPAN_NS;
        t->have_base = 1;
    }
    drths_hist_add(&t->offset, off - t->base_ns);
    t->open = 1;
    t->start_ns = t->last_send_ns = now_ns;
}

void drths_steptime_sent(drths_steptime_t *t, int64_t now_ns)
{
    if (t->open)
        t->last_send_ns = now_ns;
}

void drths_steptime_summary(const drths_steptime_t *t, drths_steptime_summary_t *s)
{
    memset(s, 0, sizeof *s);
    const drths_hist_t *c = &t->compute, *o = &t->offset;
    s->steps = c->count;
    if (c->count > 0) {
        s->compute_p50 = drths_hist_quantile(c, 0.5);
        s->compute_p99 = drths_hist_quantile(c, 0.99);
        s->compute_p999 = drths_hist_quantile(c, 0.999);
        s->compute_max = c->max;
    }
    if (o->count == 0)
        return;
    /* Lateness is measured from the earliest start offset of the run (the histogram's exact
     * minimum); one bin is the resolution of the quantiles. */
    const int64_t min = o->min;
    s->late_p50 = drths_hist_quantile(o, 0.5) - min;
    s->late_p99 = drths_hist_quantile(o, 0.99) - min;
    s->late_p999 = drths_hist_quantile(o, 0.999) - min;
    s->late_max = o->max - min;
    /* Steps whose offset lies beyond min + dt/2: the bins wholly past it, and the overflow. A
     * bin that straddles the bound is not counted (its values may lie either side). */
    int64_t bound = min + t->dt_ns / 2;
    size_t first = (size_t)(bound / o->bin_width) + 1;
    uint64_t n = o->overflow;
    for (size_t b = first; b < o->nbins; b++)
        n += o->bins[b];
    s->later_than_half_dt = n;
}
