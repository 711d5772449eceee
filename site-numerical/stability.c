#include "site-numerical/stability.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/config/config.h"

void drths_stability_params_from(drths_stability_params_t *p, const drths_experiment_t *exp)
{
    memset(p, 0, sizeof *p);
    p->limit = exp->numerical.stability_ratio;
    p->enabled = p->limit > 0.0;
    p->span_s = exp->numerical.stability_span_s;
    p->min_amplitude_m = exp->numerical.stability_min_amplitude_m;
    p->max_cycle_s = exp->numerical.stability_max_cycle_s;
}

int drths_stability_init(drths_stability_t *st, const drths_stability_params_t *p,
                         const drths_structure_t *s, double dt_s, drths_error_t *err)
{
    memset(st, 0, sizeof *st);
    if (p->enabled && (!(p->limit > 0.0) || !(p->span_s > 0.0) || !(p->min_amplitude_m >= 0.0) ||
                       !(p->max_cycle_s > 0.0)))
        return drths_error_set(err, -EINVAL,
                               "numerical.stability_*: ratio, span and longest "
                               "cycle > 0, amplitude >= 0");
    if (!s || !s->M || !s->K || s->n < 1 || !(dt_s > 0.0))
        return drths_error_set(err, -EINVAL, "stability detector: no structure");
    st->p = *p;
    st->n = s->n;
    st->M = s->M;
    st->C = s->C;
    st->K = s->K;
    st->dt_s = dt_s;
    return 0;
}

/* z^T A z for the n*n row-major A (NULL: 0). */
static double quad(const double *A, const double *z, int n)
{
    if (!A)
        return 0.0;
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        const double *row = A + (size_t)i * (size_t)n;
        double acc = 0.0;
        for (int j = 0; j < n; j++)
            acc += row[j] * z[j];
        s += z[i] * acc;
    }
    return s;
}

static void start_cycle(drths_stability_t *st, double d)
{
    memset(&st->cur, 0, sizeof st->cur);
    st->cur_dmin = st->cur_dmax = d;
}

/* Sums the newest cycles until they last span_s; 0 when the ring holds too few or one of them
 * is below the amplitude floor. */
static int judge(drths_stability_t *st, drths_stability_view_t *v)
{
    memset(v, 0, sizeof *v);
    double w = 0.0, wc = 0.0, ie = 0.0, amp = INFINITY, big = -1.0, big_t = 0.0;
    int k = 0;
    while (v->span_s < st->p.span_s) {
        if (k >= st->count)
            return 0;
        const drths_stability_cycle_t *c =
            &st->ring[(st->head - 1 - k + DRTHS_STABILITY_RING) % DRTHS_STABILITY_RING];
        if (c->amp_m < st->p.min_amplitude_m)
            return 0;
        w += c->w;
        wc += c->wc;
        ie += c->ie;
        v->span_s += c->t_s;
        amp = fmin(amp, c->amp_m);
        if (c->amp_m > big) {
            big = c->amp_m;
            big_t = c->t_s;
        }
        k++;
    }
    v->judged = 1;
    v->cycles = k;
    v->supplied_J = -w;
    v->damping_J = wc;
    /* A structure without damping (C = 0) has no yardstick: any supplied energy is too much. */
    v->ratio = wc > 0.0 ? -w / wc : (w < 0.0 ? INFINITY : 0.0);
    v->growth_per_s = ie > 0.0 ? -w / (2.0 * ie) : 0.0;
    /* The frequency of the largest cycle: a higher mode's small crossings shorten the others. */
    v->freq_hz = big_t > 0.0 ? 1.0 / big_t : 0.0;
    v->amp_m = amp;
    v->time_s = (double)st->step * st->dt_s;
    return 1;
}

static void describe(drths_stability_t *st, const drths_stability_view_t *v)
{
    snprintf(st->text, sizeof st->text,
             "stability: the interface supplied %+.3g J in %.2f s at %.1f Hz, %.2f x what the "
             "structure's damping took (limit %.2f); the loop is adding energy",
             v->supplied_J, v->span_s, v->freq_hz, v->ratio, st->p.limit);
}

/* A cycle has closed at this step: into the ring, then judged. Returns 1 on the first trip. */
static int close_cycle(drths_stability_t *st)
{
    st->cur.amp_m = 0.5 * (st->cur_dmax - st->cur_dmin);
    st->ring[st->head] = st->cur;
    st->head = (st->head + 1) % DRTHS_STABILITY_RING;
    if (st->count < DRTHS_STABILITY_RING)
        st->count++;
    drths_stability_view_t v;
    if (!judge(st, &v))
        return 0;
    st->last = v;
    st->judgements++;
    if (!st->worst.judged || v.ratio > st->worst.ratio)
        st->worst = v;
    if (st->tripped || v.ratio < st->p.limit)
        return 0;
    st->tripped = 1;
    st->trip = v;
    describe(st, &v);
    return 1;
}

int drths_stability_step(drths_stability_t *st, const double *x, const double *v, double d,
                         double r)
{
    st->step++;
    if (!st->p.enabled || !isfinite(d) || !isfinite(r))
        return 0;
    if (!st->have_prev) {
        st->have_prev = 1;
        st->prev_d = d;
        st->prev_r = r;
        start_cycle(st, d);
        return 0;
    }
    const int n = st->n;
    st->cur.w += 0.5 * (r + st->prev_r) * (d - st->prev_d);
    st->cur.wc += quad(st->C, v, n) * st->dt_s;
    st->cur.ie += 0.5 * (quad(st->M, v, n) + quad(st->K, x, n)) * st->dt_s;
    st->cur.t_s += st->dt_s;
    st->cur_dmin = fmin(st->cur_dmin, d);
    st->cur_dmax = fmax(st->cur_dmax, d);
    const int up = st->prev_d < 0.0 && d >= 0.0;
    st->prev_d = d;
    st->prev_r = r;
    int tripped = 0;
    if (up) {
        /* The work before the first crossing is of no whole cycle. */
        if (st->started)
            tripped = close_cycle(st);
        st->started = 1;
        start_cycle(st, d);
    } else if (st->cur.t_s > st->p.max_cycle_s) {
        /* A motion this slow is no oscillation: the sequence starts again at the next crossing. */
        st->count = 0;
        st->started = 0;
        start_cycle(st, d);
    }
    return tripped;
}
