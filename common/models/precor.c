#include "common/models/precor.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/models/lagrange.h"

#define PEAK_SAMPLES 256

int drths_precor_check(const drths_precor_params_t *p)
{
    if (p->mode != DRTHS_PRECOR_D && p->mode != DRTHS_PRECOR_LPD)
        return -EINVAL;
    if (!(p->predict_fraction >= 0.0 && p->predict_fraction < 1.0))
        return -EINVAL;
    return 0;
}

double drths_precor_predict(const double hist[4], double f)
{
    return drths_lagrange3_extrapolate(hist, f);
}

void drths_precor_end_rates(const drths_precor_params_t *p, const double hist[4], double *v,
                            double *a)
{
    if (p->mode == DRTHS_PRECOR_LPD) {
        *v = hist[3] - hist[2];
        *a = 0.0;
        return;
    }
    /* The first and second derivatives, at its last node, of the cubic through four equally
     * spaced values (backward differences to third order). */
    *v = (11.0 * hist[3] - 18.0 * hist[2] + 9.0 * hist[1] - 2.0 * hist[0]) / 6.0;
    *a = 2.0 * hist[3] - 5.0 * hist[2] + 4.0 * hist[1] - hist[0];
}

void drths_precor_seg_init(drths_precor_seg_t *s, double x0, double v0, double a0, double x1,
                           double v1, double a1, double len)
{
    double T = len, T2 = T * T, T3 = T2 * T, d = x1 - x0;
    s->len = len;
    s->c[0] = x0;
    s->c[1] = v0;
    s->c[2] = 0.5 * a0;
    s->c[3] = (20.0 * d - (8.0 * v1 + 12.0 * v0) * T - (3.0 * a0 - a1) * T2) / (2.0 * T3);
    s->c[4] = (-30.0 * d + (14.0 * v1 + 16.0 * v0) * T + (3.0 * a0 - 2.0 * a1) * T2) /
              (2.0 * T3 * T);
    s->c[5] = (12.0 * d - 6.0 * (v1 + v0) * T + (a1 - a0) * T2) / (2.0 * T3 * T2);
}

void drths_precor_seg_parabola(drths_precor_seg_t *s, double x0, double v0, double a0,
                               double len)
{
    memset(s, 0, sizeof *s);
    s->len = len;
    s->c[0] = x0;
    s->c[1] = v0;
    s->c[2] = 0.5 * a0;
}

double drths_precor_seg_eval(const drths_precor_seg_t *s, double t, double *v, double *a)
{
    const double *c = s->c;
    if (v)
        *v = c[1] + t * (2.0 * c[2] + t * (3.0 * c[3] + t * (4.0 * c[4] + t * 5.0 * c[5])));
    if (a)
        *a = 2.0 * c[2] + t * (6.0 * c[3] + t * (12.0 * c[4] + t * 20.0 * c[5]));
    return c[0] + t * (c[1] + t * (c[2] + t * (c[3] + t * (c[4] + t * c[5]))));
}

void drths_precor_seg_peaks(const drths_precor_seg_t *s, double *vmax, double *amax,
                            double *xmax)
{
    int n = s->len > PEAK_SAMPLES ? PEAK_SAMPLES : (int)ceil(s->len);
    if (n < 1)
        n = 1;
    double vm = 0.0, am = 0.0, xm = 0.0;
    for (int i = 0; i <= n; i++) {
        double v, a, x = drths_precor_seg_eval(s, s->len * (double)i / n, &v, &a);
        vm = fmax(vm, fabs(v));
        am = fmax(am, fabs(a));
        xm = fmax(xm, fabs(x));
    }
    /* A segment planned from a non-finite value is beyond every bound (fmax drops NaN). */
    for (int k = 0; k < 6; k++)
        if (!isfinite(s->c[k]))
            vm = am = xm = INFINITY;
    *vmax = vm;
    *amax = am;
    *xmax = xm;
}

const char *drths_precor_mode_name(drths_precor_mode_t m)
{
    return m == DRTHS_PRECOR_LPD ? "lpd" : "d";
}

int drths_precor_mode_parse(const char *text, drths_precor_mode_t *m)
{
    if (strcmp(text, "d") == 0)
        *m = DRTHS_PRECOR_D;
    else if (strcmp(text, "lpd") == 0)
        *m = DRTHS_PRECOR_LPD;
    else
        return -EINVAL;
    return 0;
}
