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
    if (r < 0)
        drths_rtt_tracker_close(t);
    return r;
}

void drths_rtt_tracker_close(drths_rtt_tracker_t *t)
{
    drths_sendlog_close(&t->log);
    drths_hist_close(&t->run);
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
    if (rtt_ns)
        *rtt_ns = rtt;
    return 0;
}

/* ---- (e) Sliding window ------------------------------------------------------------------ */

int drths_rtt_window_init(drths_rtt_window_t *w, int64_t bin_ns, int64_t max_ns, int64_t sub_ns,
                          size_t nsub, drths_error_t *err)
{
    memset(w, 0, sizeof *w);
    if (bin_ns <= 0 || max_ns < bin_ns || sub_ns <= 0 || nsub < 2 || nsub > 64)
        return drths_error_set(err, -EINVAL,
                               "round-trip window: need 0 < bin (%lld ns) <= max (%lld ns), "
                               "sub-window > 0 (%lld ns) and 2 to 64 of them (%zu)",
                               (long long)bin_ns, (long long)max_ns, (long long)sub_ns, nsub);
    size_t nbins = (size_t)((max_ns + bin_ns - 1) / bin_ns);
    w->sub = calloc(nsub, sizeof *w->sub);
    if (!w->sub)
        return drths_error_set(err, -ENOMEM, "round-trip window: cannot allocate %zu sub-windows",
                               nsub);
    w->nsub = nsub;
    for (size_t k = 0; k < nsub; k++) {
        int r = drths_hist_init(&w->sub[k], bin_ns, nbins, err);
        if (r != 0) {
            drths_rtt_window_close(w);
            return r;
        }
    }
    w->sub_ns = sub_ns;
    w->cur_start_ns = INT64_MIN;
    return 0;
}

void drths_rtt_window_close(drths_rtt_window_t *w)
{
    for (size_t k = 0; w->sub && k < w->nsub; k++)
        drths_hist_close(&w->sub[k]);
    free(w->sub);
    memset(w, 0, sizeof *w);
}

void drths_rtt_window_advance(drths_rtt_window_t *w, int64_t now_ns)
{
    if (w->cur_start_ns == INT64_MIN) {
        w->cur_start_ns = now_ns;
        return;
    }
    if (now_ns - w->cur_start_ns < w->sub_ns)
        return;
    int64_t passed = (now_ns - w->cur_start_ns) / w->sub_ns;
    if ((uint64_t)passed >= w->nsub) {
        /* A silence longer than the window: none of it is recent any more. */
        for (size_t k = 0; k < w->nsub; k++)
            drths_hist_reset(&w->sub[k]);
        w->cur_start_ns = now_ns;
        return;
    }
    for (int64_t i = 0; i < passed; i++) {
        w->cur = (w->cur + 1) % w->nsub;
        drths_hist_reset(&w->sub[w->cur]); /* the oldest leaves and becomes the current one */
    }
    w->cur_start_ns += passed * w->sub_ns;
}

void drths_rtt_window_add(drths_rtt_window_t *w, int64_t now_ns, int64_t rtt_ns)
{
    drths_rtt_window_advance(w, now_ns);
    drths_hist_add(&w->sub[w->cur], rtt_ns < 0 ? 0 : rtt_ns);
}

/* The nrecent most recent sub-windows (the current one first) into hs; returns how many. */
static size_t window_recent(const drths_rtt_window_t *w, size_t nrecent,
                            const drths_hist_t *hs[64])
{
    size_t n = nrecent < w->nsub ? nrecent : w->nsub;
    for (size_t j = 0; j < n; j++)
        hs[j] = &w->sub[(w->cur + w->nsub - j) % w->nsub];
    return n;
}

static int64_t window_extreme(const drths_rtt_window_t *w, size_t nrecent, int want_max)
{
    const drths_hist_t *hs[64];
    size_t n = window_recent(w, nrecent, hs);
    int64_t m = want_max ? INT64_MIN : INT64_MAX;
    for (size_t j = 0; j < n; j++) {
        if (!hs[j]->count)
            continue;
        if (want_max ? hs[j]->max > m : hs[j]->min < m)
            m = want_max ? hs[j]->max : hs[j]->min;
    }
    return (m == INT64_MIN || m == INT64_MAX) ? 0 : m;
}

uint64_t drths_rtt_window_count(const drths_rtt_window_t *w)
{
    uint64_t n = 0;
    for (size_t k = 0; k < w->nsub; k++)
        n += w->sub[k].count;
    return n;
}

int64_t drths_rtt_window_min(const drths_rtt_window_t *w)
{
    return window_extreme(w, w->nsub, 0);
}

int64_t drths_rtt_window_max(const drths_rtt_window_t *w)
{
    return window_extreme(w, w->nsub, 1);
}

int64_t drths_rtt_window_recent_min(const drths_rtt_window_t *w, size_t nrecent)
{
    return window_extreme(w, nrecent, 0);
}

int64_t drths_rtt_window_quantile(const drths_rtt_window_t *w, double q)
{
    return drths_rtt_window_recent_quantile(w, w->nsub, q, NULL);
}

int64_t drths_rtt_window_recent_quantile(const drths_rtt_window_t *w, size_t nrecent, double q,
                                         uint64_t *count)
{
    const drths_hist_t *hs[64];
    size_t n = window_recent(w, nrecent, hs);
    if (count) {
        *count = 0;
        for (size_t j = 0; j < n; j++)
            *count += hs[j]->count;
    }
    return n ? drths_hist_quantile_many(hs, n, q) : 0;
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

static uint32_t clamp_u32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
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

    /* The late margin is evidence of a past moment, not of the link now: it lapses late_hold
     * after the last late-rate raise, so L can come back down to what the round trip needs. */
    if (st->late_extra_ticks && in->now_ns >= st->late_extra_until_ns)
        st->late_extra_ticks = 0;

    /* What the sliding window's round trip asks for (need_rtt), with the live late margin
     * (need); both 0 when there are too few samples to say. Neither depends on cur. */
    uint32_t need_rtt = 0, need = 0, urgent_rtt = 0, target_rtt = 0, target = 0;
    drths_lchoice_t lc;
    if (in->rtt_samples >= p->min_rtt_samples && in->rtt_samples > 0 &&
        drths_lchoice_compute(lp, in->rtt_q_ns, dt_ns, &lc) == 0) {
        need_rtt = lc.L_auto;
        need = clamp_u32((uint64_t)need_rtt + st->late_extra_ticks);
        /* The quantile plus the wake-up margins alone no longer fit: commands at that quantile
         * are already late, so the rate bound must not delay the raise. */
        urgent_rtt = need_rtt > cur + lc.safety_ticks;
        /* An urgent raise goes to the higher of the window's need and the recent sub-windows'
         * need: after a step up the window's quantile crosses L as soon as a few new round
         * trips are in it, but reaches the new level only as they fill it; the recent quantile
         * gets there sooner, so one raise does most of what would otherwise be a staircase. */
        target_rtt = need_rtt;
        drths_lchoice_t lr;
        if (in->rtt_recent_samples >= p->min_rtt_samples && in->rtt_recent_samples > 0 &&
            drths_lchoice_compute(lp, in->rtt_recent_q_ns, dt_ns, &lr) == 0 &&
            lr.L_auto > target_rtt)
            target_rtt = lr.L_auto;
        target = clamp_u32((uint64_t)target_rtt + st->late_extra_ticks);
    }
    int rate_ok = !st->changed || p->min_change_interval_ns <= 0 ||
                  in->now_ns - st->last_change_ns >= p->min_change_interval_ns;

    int late_high = in->window_ticks >= p->min_window_ticks && in->window_ticks > 0 &&
                    (double)in->window_late > p->late_rate_threshold * (double)in->window_ticks;

    if (late_high) {
        /* Commands are arriving late now: raise at once, by at least a step even if the round
         * trip looks fine (the lateness may come from wake-up latency or bursts the quantile
         * did not catch). What this adds beyond the round trip's need is kept as the late
         * margin for late_hold; lateness that persists re-earns it, one that stops lets it
         * lapse. */
        uint64_t up = (uint64_t)cur + (p->raise_step_ticks ? p->raise_step_ticks : 1);
        if (target > up)
            up = target;
        next = clamp_u32(up);
        reason = DRTHS_EPOCH_RAISE_LATE;
        st->lowering = 0;
    } else if (need > cur && need - cur > p->raise_deadband_ticks) {
        st->lowering = 0;
        if (urgent_rtt) {
            next = target;
            reason = DRTHS_EPOCH_RAISE_RTT;
        } else if (rate_ok) {
            /* Not urgent: the window's own need (the recent quantile, from fewer samples,
             * would overshoot it by its noise), plus the dead band again as headroom, so that
             * the next wobble of the quantile does not ask for another small raise. */
            next = clamp_u32((uint64_t)need + p->raise_deadband_ticks);
            reason = DRTHS_EPOCH_RAISE_RTT;
        }
        /* else: the need fits within the safety margin; raise once the rate bound allows. */
    } else if (need >= cur) {
        st->lowering = 0; /* inside the raise dead band: keep, and no lowering either */
    } else if (need > 0 && cur - need >= p->lower_min_ticks) {
        if (!st->lowering) {
            st->lowering = 1;
            st->lower_since_ns = in->now_ns;
            st->lower_needed_max = need;
        } else if (need > st->lower_needed_max) {
            st->lower_needed_max = need;
        }
        if (in->now_ns - st->lower_since_ns >= p->lower_hysteresis_ns && rate_ok) {
            /* Lower only to what the whole hysteresis period needed, not to the last need. */
            next = st->lower_needed_max;
            reason = DRTHS_EPOCH_LOWER;
            st->lowering = 0;
        }
    } else if (need > 0) {
        st->lowering = 0; /* below L by less than lower_min_ticks: not worth a change */
    }
    /* need == 0 (too few samples): no round-trip evidence either way; keep any lowering
     * period running, since nothing contradicted it. */

    if (p->max_L > 0 && next > p->max_L)
        next = p->max_L < cur ? cur : p->max_L;
    if (next < 1)
        next = 1;
    if (reason == DRTHS_EPOCH_RAISE_LATE) {
        st->late_extra_ticks = target_rtt > 0 && next > target_rtt ? next - target_rtt : 0;
        st->late_extra_until_ns = in->now_ns + p->late_hold_ns;
    }
    if (next == cur) {
        reason = DRTHS_EPOCH_KEEP;
    } else {
        st->changed = 1;
        st->last_change_ns = in->now_ns;
    }
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
