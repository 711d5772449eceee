#include "common/platform/stats.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int drths_hist_init(drths_hist_t *h, int64_t bin_width, size_t nbins, drths_error_t *err)
{
    memset(h, 0, sizeof *h);
    if (bin_width <= 0)
        return drths_error_set(err, -EINVAL, "histogram bin width: must be > 0 (got %lld)",
                               (long long)bin_width);
    if (nbins == 0 || nbins > (size_t)1 << 28)
        return drths_error_set(err, -EINVAL, "histogram bin count: must be 1..%zu (got %zu)",
                               (size_t)1 << 28, nbins);
    /* Groups of about sqrt(nbins) fine bins make a quantile read O(sqrt(nbins)). */
    size_t group = (size_t)ceil(sqrt((double)nbins));
    if (group == 0)
        group = 1;
    size_t ngroups = (nbins + group - 1) / group;
    uint64_t *bins = calloc(nbins, sizeof *bins);
    uint64_t *groups = calloc(ngroups, sizeof *groups);
    if (!bins || !groups) {
        free(bins);
        free(groups);
        return drths_error_set(err, -ENOMEM, "histogram: cannot allocate %zu bins", nbins);
    }
    h->bin_width = bin_width;
    h->nbins = nbins;
    h->group = group;
    h->ngroups = ngroups;
    h->bins = bins;
    h->groups = groups;
    return 0;
}

void drths_hist_close(drths_hist_t *h)
{
    free(h->bins);
    free(h->groups);
    h->bins = NULL;
    h->groups = NULL;
    h->nbins = 0;
    h->ngroups = 0;
}

void drths_hist_add(drths_hist_t *h, int64_t v)
{
    if (h->count == 0) {
        h->min = v;
        h->max = v;
    } else {
        if (v < h->min)
            h->min = v;
        if (v > h->max)
            h->max = v;
    }
    h->count++;
    h->sum += (double)v;
    size_t i;
    if (v < 0) {
        h->underflow++;
        i = 0;
    } else {
        uint64_t b = (uint64_t)v / (uint64_t)h->bin_width;
        if (b >= h->nbins) {
            h->overflow++;
            return;
        }
        i = (size_t)b;
    }
    h->bins[i]++;
    h->groups[i / h->group]++;
}

int64_t drths_hist_quantile(const drths_hist_t *h, double q)
{
    return drths_hist_quantile_many(&h, 1, q);
}

int64_t drths_hist_quantile_many(const drths_hist_t *const *hs, size_t n, double q)
{
    uint64_t count = 0;
    int64_t mn = INT64_MAX, mx = INT64_MIN;
    for (size_t k = 0; k < n; k++) {
        if (!hs[k]->count)
            continue;
        count += hs[k]->count;
        mn = hs[k]->min < mn ? hs[k]->min : mn;
        mx = hs[k]->max > mx ? hs[k]->max : mx;
    }
    if (count == 0)
        return 0;
    const drths_hist_t *h0 = hs[0];
    uint64_t rank = (uint64_t)drths_quantile_rank((size_t)count, q) + 1; /* 1-based */
    uint64_t cum = 0;
    size_t g = 0;
    for (; g < h0->ngroups; g++) {
        uint64_t c = 0;
        for (size_t k = 0; k < n; k++)
            c += hs[k]->groups[g];
        if (cum + c >= rank)
            break;
        cum += c;
    }
    if (g == h0->ngroups)
        return mx; /* the rank lies among the overflow values */
    size_t i = g * h0->group;
    size_t end = i + h0->group < h0->nbins ? i + h0->group : h0->nbins;
    for (; i < end; i++) {
        for (size_t k = 0; k < n; k++)
            cum += hs[k]->bins[i];
        if (cum >= rank)
            break;
    }
    int64_t v = ((int64_t)i + 1) * h0->bin_width;
    if (v > mx)
        v = mx;
    if (v < mn)
        v = mn;
    return v;
}

double drths_hist_mean(const drths_hist_t *h)
{
    return h->count ? h->sum / (double)h->count : 0.0;
}

void drths_hist_reset(drths_hist_t *h)
{
    for (size_t g = 0; g < h->ngroups; g++) {
        if (h->groups[g]) {
            size_t i = g * h->group;
            size_t end = i + h->group < h->nbins ? i + h->group : h->nbins;
            memset(&h->bins[i], 0, (end - i) * sizeof h->bins[0]);
            h->groups[g] = 0;
        }
    }
    h->count = 0;
    h->underflow = 0;
    h->overflow = 0;
    h->min = 0;
    h->max = 0;
    h->sum = 0.0;
}

void drths_running_reset(drths_running_t *r)
{
    memset(r, 0, sizeof *r);
}

void drths_running_add(drths_running_t *r, double x)
{
    if (r->n == 0) {
        r->min = x;
        r->max = x;
    } else {
        if (x < r->min)
            r->min = x;
        if (x > r->max)
            r->max = x;
    }
    r->n++;
    double d = x - r->mean;
    r->mean += d / (double)r->n;
    r->m2 += d * (x - r->mean);
}

double drths_running_stddev(const drths_running_t *r)
{
    return r->n > 1 ? sqrt(r->m2 / (double)r->n) : 0.0;
}

size_t drths_quantile_rank(size_t n, double q)
{
    if (n == 0)
        return 0;
    double r = ceil(q * (double)n * (1.0 - 1e-12));
    if (!(r >= 1.0))
        return 0;
    if (r >= (double)n)
        return n - 1;
    return (size_t)r - 1;
}

double drths_peak_abs(const double *x, size_t n)
{
    double p = 0.0;
    for (size_t i = 0; i < n; i++) {
        double a = fabs(x[i]);
        if (a > p)
            p = a;
    }
    return p;
}

double drths_rms(const double *x, size_t n)
{
    if (n == 0)
        return 0.0;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return sqrt(s / (double)n);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int drths_quantile_copy(const double *x, size_t n, double q, double *out)
{
    if (n == 0 || !(q > 0.0 && q <= 1.0))
        return -EINVAL;
    double *c = malloc(n * sizeof *c);
    if (!c)
        return -ENOMEM;
    memcpy(c, x, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    *out = c[drths_quantile_rank(n, q)];
    free(c);
    return 0;
}

int drths_quantile_copy_i64(const int64_t *x, size_t n, double q, int64_t *out)
{
    if (n == 0 || !(q > 0.0 && q <= 1.0))
        return -EINVAL;
    int64_t *c = malloc(n * sizeof *c);
    if (!c)
        return -ENOMEM;
    memcpy(c, x, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_i64);
    *out = c[drths_quantile_rank(n, q)];
    free(c);
    return 0;
}

void drths_sort_i64(int64_t *x, size_t n)
{
    if (n > 1)
        qsort(x, n, sizeof *x, cmp_i64);
}

void drths_sort_double(double *x, size_t n)
{
    if (n > 1)
        qsort(x, n, sizeof *x, cmp_double);
}
