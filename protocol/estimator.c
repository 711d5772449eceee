#include "protocol/estimator.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- Summary ----------------------------------------------------------------------------- */

static void fill_ticks(drths_rtt_summary_t *s, int64_t dt_ns)
{
    s->min_ticks = drths_ns_to_ticks_ceil(s->min_ns, dt_ns);
    s->p50_ticks = drths_ns_to_ticks_ceil(s->p50_ns, dt_ns);
    s->p99_ticks = drths_ns_to_ticks_ceil(s->p99_ns, dt_ns);
    s->p999_ticks = drths_ns_to_ticks_ceil(s->p999_ns, dt_ns);
    s->max_ticks = drths_ns_to_ticks_ceil(s->max_ns, dt_ns);
}

void drths_rtt_summary_from_hist(const drths_hist_t *h, int64_t dt_ns, drths_rtt_summary_t *out)
{
    memset(out, 0, sizeof *out);
    out->count = h->count;
    if (h->count == 0)
        return;
    out->min_ns = h->min;
    out->p50_ns = drths_hist_quantile(h, 0.5);
    out->p99_ns = drths_hist_quantile(h, 0.99);
    out->p999_ns = drths_hist_quantile(h, 0.999);
    out->max_ns = h->max;
    fill_ticks(out, dt_ns);
}

/* ---- (a) Probes --------------------------------------------------------------------------- */

int drths_probe_stats_init(drths_probe_stats_t *ps, size_t max_samples, drths_error_t *err)
{
    memset(ps, 0, sizeof *ps);
    if (max_samples == 0)
        return drths_error_set(err, -EINVAL, "probe count: must be > 0");
    ps->rtt_ns = calloc(max_samples, sizeof *ps->rtt_ns);
    if (!ps->rtt_ns)
        return drths_error_set(err, -ENOMEM, "probes: cannot allocate %zu samples", max_samples);
    ps->max_samples = max_samples;
    return 0;
}

void drths_probe_stats_close(drths_probe_stats_t *ps)
{
    free(ps->rtt_ns);
    ps->rtt_ns = NULL;
    ps->n = 0;
    ps->max_samples = 0;
}

int drths_probe_stats_add(drths_probe_stats_t *ps, int64_t rtt_ns)
{
    if (rtt_ns < 0) {
        ps->rejected++;
        return -ERANGE;
    }
    if (ps->n >= ps->max_samples) {
        ps->rejected++;
        return -ENOSPC;
    }
    ps->rtt_ns[ps->n++] = rtt_ns;
    return 0;
}

int drths_probe_stats_quantile(drths_probe_stats_t *ps, double q, int64_t *out_ns)
{
    if (ps->n == 0)
        return -ENOENT;
    if (!(q > 0.0 && q <= 1.0))
        return -EINVAL;
    drths_sort_i64(ps->rtt_ns, ps->n);
    *out_ns = ps->rtt_ns[drths_quantile_rank(ps->n, q)];
    return 0;
}

int drths_probe_stats_summary(drths_probe_stats_t *ps, int64_t dt_ns, drths_rtt_summary_t *out)
{
    memset(out, 0, sizeof *out);
    if (ps->n == 0)
        return -ENOENT;
    drths_sort_i64(ps->rtt_ns, ps->n);
    const int64_t *v = ps->rtt_ns;
    out->count = ps->n;
    out->min_ns = v[0];
    out->p50_ns = v[drths_quantile_rank(ps->n, 0.5)];
    out->p99_ns = v[drths_quantile_rank(ps->n, 0.99)];
    out->p999_ns = v[drths_quantile_rank(ps->n, 0.999)];
    out->max_ns = v[ps->n - 1];
    fill_ticks(out, dt_ns);
    return 0;
}

/* ---- (b) L --------------------------------------------------------------------------------- */

int drths_lchoice_compute(const drths_lchoice_params_t *p, int64_t rtt_q_ns, int64_t dt_ns,
                          drths_lchoice_t *out)
{
    memset(out, 0, sizeof *out);
    if (dt_ns <= 0 || rtt_q_ns < 0 || p->wake_margin_local_ns < 0 || p->wake_margin_peer_ns < 0)
        return -EINVAL;
    int64_t rtt = drths_ns_to_ticks_ceil(rtt_q_ns, dt_ns);
    int64_t wl = drths_ns_to_ticks_ceil(p->wake_margin_local_ns, dt_ns);
    int64_t wp = drths_ns_to_ticks_ceil(p->wake_margin_peer_ns, dt_ns);
    const int64_t lim = INT64_C(1) << 31;
    if (rtt > lim || wl > lim || wp > lim)
        return -EINVAL;
    int64_t L = rtt + wl + wp + (int64_t)p->safety_ticks;
    if (L > lim)
        return -EINVAL;
    if (L < 1)
        L = 1;
    out->rtt_ticks = (uint32_t)rtt;
    out->wake_local_ticks = (uint32_t)wl;
    out->wake_peer_ticks = (uint32_t)wp;
    out->safety_ticks = p->safety_ticks;
    out->L_auto = (uint32_t)L;
    out->fixed = p->fixed_L > 0;
    out->L = out->fixed ? p->fixed_L : out->L_auto;
    return 0;
}

/* ---- (c) Echoes ---------------------------------------------------------------------------- */

enum { SLOT_EMPTY = 0, SLOT_SENT, SLOT_USED };

int drths_sendlog_init(drths_sendlog_t *sl, size_t size, drths_error_t *err)
{
    memset(sl, 0, sizeof *sl);
    if (size == 0)
        return drths_error_set(err, -EINVAL, "send log size: must be > 0");
    sl->counter = calloc(size, sizeof *sl->counter);
    sl->sent_ns = calloc(size, sizeof *sl->sent_ns);
    sl->valid = calloc(size, 1);
    if (!sl->counter || !sl->sent_ns || !sl->valid) {
        drths_sendlog_close(sl);
        return drths_error_set(err, -ENOMEM, "send log: cannot allocate %zu entries", size);
    }
    sl->size = size;
    return 0;
}

void drths_sendlog_close(drths_sendlog_t *sl)
{
    free(sl->counter);
    free(sl->sent_ns);
    free(sl->valid);
    sl->counter = NULL;
    sl->sent_ns = NULL;
    sl->valid = NULL;
    sl->size = 0;
}

void drths_sendlog_record(drths_sendlog_t *sl, uint64_t counter, int64_t sent_ns)
{
    size_t i = (size_t)(counter % sl->size);
    sl->counter[i] = counter;
    sl->sent_ns[i] = sent_ns;
    sl->valid[i] = SLOT_SENT;
}

int drths_sendlog_take(drths_sendlog_t *sl, uint64_t counter, int64_t *sent_ns)
{
    size_t i = (size_t)(counter % sl->size);
    if (sl->valid[i] == SLOT_EMPTY || sl->counter[i] != counter)
        return -ENOENT;
    if (sl->valid[i] == SLOT_USED)
        return -EALREADY;
    *sent_ns = sl->sent_ns[i];
    sl->valid[i] = SLOT_USED;
    return 0;
}

int drths_rtt_tracker_init(drths_rtt_tracker_t *t, size_t log_size, int64_t bin_ns, int64_t max_ns,
                           drths_error_t *err)
{
    memset(t, 0, sizeof *t);
    if (bin_ns <= 0 || max_ns < bin_ns)
        return drths_error_set(err, -EINVAL,
                               "round-trip histogram: need 0 < bin (%lld ns) <= max (%lld ns)",
                               (long long)bin_ns, (long long)max_ns);
    size_t nbins = (size_t)((max_ns + bin_ns - 1) / bin_ns);
    int r = drths_sendlog_init(&t->log, log_size, err);
    if (r == 0)
        r = drths_hist_init(&t->run, bin_ns, nbins, err);
    if (r == 0)
        r = drths_hist_init(&t->window, bin_ns, nbins, err);
    if (r < 0)
        drths_rtt_tracker_close(t);
    return r;
}

void drths_rtt_tracker_close(drths_rtt_tracker_t *t)
{
    drths_sendlog_close(&t->log);
    drths_hist_close(&t->run);
    drths_hist_close(&t->window);
}

void drths_rtt_tracker_sent(drths_rtt_tracker_t *t, uint64_t counter, int64_t sent_ns)
{
    drths_sendlog_record(&t->log, counter, sent_ns);
}

int drths_rtt_tracker_echo(drths_rtt_tracker_t *t, uint64_t counter, int64_t hold_ns,
                           int64_t now_ns, int64_t *rtt_ns)
{
    int64_t sent;
    int r = drths_sendlog_take(&t->log, counter, &sent);
    if (r == -ENOENT) {
        t->unknown++;
        return r;
    }
    if (r == -EALREADY) {
        t->repeated++;
        return r;
    }
    int64_t rtt = now_ns - sent - hold_ns;
    if (hold_ns < 0 || rtt < 0) {
        t->negative++;
        return -ERANGE;
    }
    t->last_rtt_ns = rtt;
    drths_hist_add(&t->run, rtt);
    drths_hist_add(&t->window, rtt);
    if (rtt_ns)
        *rtt_ns = rtt;
    return 0;
}

void drths_rtt_tracker_window_reset(drths_rtt_tracker_t *t)
{
    drths_hist_reset(&t->window);
}

/* ---- (d) Late window and epochs ------------------------------------------------------------ */

int drths_late_window_init(drths_late_window_t *w, size_t ticks, drths_error_t *err)
{
    memset(w, 0, sizeof *w);
    if (ticks == 0)
        return drths_error_set(err, -EINVAL, "late-rate window: must be > 0 ticks");
    w->late = calloc(ticks, 1);
    if (!w->late)
        return drths_error_set(err, -ENOMEM, "late-rate window: cannot allocate %zu ticks",
                               ticks);
    w->size = ticks;
    return 0;
}

void drths_late_window_close(drths_late_window_t *w)
{
    free(w->late);
    w->late = NULL;
    w->size = 0;
}

void drths_late_window_add(drths_late_window_t *w, int late)
{
    unsigned char v = late != 0;
    if (w->filled == w->size)
        w->late_count -= w->late[w->pos]; /* the oldest tick leaves the window */
    else
        w->filled++;
    w->late[w->pos] = v;
    w->late_count += v;
    w->pos = (w->pos + 1) % w->size;
}

double drths_late_window_rate(const drths_late_window_t *w)
{
    return w->filled ? (double)w->late_count / (double)w->filled : 0.0;
}

void drths_late_window_reset(drths_late_window_t *w)
{
    memset(w->late, 0, w->size);
    w->pos = 0;
    w->filled = 0;
    w->late_count = 0;
}

uint32_t drths_epoch_decide(const drths_epoch_params_t *p, const drths_lchoice_params_t *lp,
                            int64_t dt_ns, drths_epoch_state_t *st, const drths_epoch_input_t *in,
                            drths_epoch_reason_t *why)
{
    uint32_t cur = in->current_L;
    uint32_t next = cur;
    drths_epoch_reason_t reason = DRTHS_EPOCH_KEEP;

    if (lp->fixed_L > 0) {
        st->lowering = 0;
        *why = DRTHS_EPOCH_KEEP;
        return cur;
    }

    /* What the windowed round trip asks for; 0 when there are too few samples to say. */
    uint32_t needed = 0;
    drths_lchoice_t lc;
    if (in->rtt_samples >= p->min_rtt_samples && in->rtt_samples > 0 &&
        drths_lchoice_compute(lp, in->rtt_q_ns, dt_ns, &lc) == 0) {
        /* Include the margin that late-rate raises showed the quantile alone misses, so that L
         * is not lowered back into the lateness as soon as the hysteresis time has passed. */
        uint64_t n = (uint64_t)lc.L_auto + st->late_excess_ticks;
        needed = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    }

    int late_high = in->window_ticks >= p->min_window_ticks && in->window_ticks > 0 &&
                    (double)in->window_late > p->late_rate_threshold * (double)in->window_ticks;

    if (late_high) {
        /* Commands are arriving late now: raise at once, by at least a step even if the round
         * trip looks fine (the lateness may come from wake-up latency or bursts the quantile
         * window did not catch). */
        uint64_t up = (uint64_t)cur + (p->raise_step_ticks ? p->raise_step_ticks : 1);
        if (needed > up)
            up = needed;
        next = up > UINT32_MAX ? UINT32_MAX : (uint32_t)up;
        reason = DRTHS_EPOCH_RAISE_LATE;
        st->lowering = 0;
        st->late_excess_ticks += next - (needed > cur ? needed : cur);
    } else if (needed > cur && needed - cur > p->raise_deadband_ticks) {
        next = needed;
        reason = DRTHS_EPOCH_RAISE_RTT;
        st->lowering = 0;
    } else if (needed >= cur) {
        st->lowering = 0; /* inside the raise dead band: keep, and no lowering either */
    } else if (needed > 0 && cur - needed >= p->lower_min_ticks) {
        if (!st->lowering) {
            st->lowering = 1;
            st->lower_since_ns = in->now_ns;
            st->lower_needed_max = needed;
        } else if (needed > st->lower_needed_max) {
            st->lower_needed_max = needed;
        }
        if (in->now_ns - st->lower_since_ns >= p->lower_hysteresis_ns) {
            /* Lower only to what the whole hysteresis period needed, not to the last window. */
            next = st->lower_needed_max;
            reason = DRTHS_EPOCH_LOWER;
            st->lowering = 0;
        }
    } else if (needed > 0) {
        st->lowering = 0; /* below L by less than lower_min_ticks: not worth a change */
    }
    /* needed == 0 (too few samples): no round-trip evidence either way; keep any lowering
     * period running, since nothing contradicted it. */

    if (p->max_L > 0 && next > p->max_L)
        next = p->max_L < cur ? cur : p->max_L;
    if (next < 1)
        next = 1;
    if (next == cur)
        reason = DRTHS_EPOCH_KEEP;
    *why = reason;
    return next;
}

const char *drths_epoch_reason_name(drths_epoch_reason_t r)
{
    switch (r) {
    case DRTHS_EPOCH_KEEP:
        return "keep";
    case DRTHS_EPOCH_RAISE_LATE:
        return "raise (late rate)";
    case DRTHS_EPOCH_RAISE_RTT:
        return "raise (round trip)";
    case DRTHS_EPOCH_LOWER:
        return "lower";
    }
    return "?";
}
