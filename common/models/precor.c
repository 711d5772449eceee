#include "common/models/precor.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/models/lagrange.h"

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

/* The cubic through d(n-2), d(n-1), d(n) at -2, -1, 0 and the target at 1, at f. */
static double corrector_cubic(const double hist[4], double target, double f)
{
    const double x[4] = {hist[1], hist[2], hist[3], target};
    return drths_lagrange3_extrapolate(x, f - 1.0);
}

double drths_precor_command(const drths_precor_params_t *p, const double hist[4], double target,
                            int have_target, double f)
{
    if (!(f > 0.0))
        f = 0.0;
    if (f > 1.0)
        f = 1.0;
    double fsw = p->predict_fraction;
    if (f < fsw)
        return drths_precor_predict(hist, f);
    double xsw = drths_precor_predict(hist, fsw);
    if (!have_target)
        return xsw;
    if (f >= 1.0)
        return target;                  /* exactly, whatever the rounding of the blends below */
    double w = (1.0 - f) / (1.0 - fsw); /* 1 at the switch, 0 at the end of the step */
    if (p->mode == DRTHS_PRECOR_LPD)
        return target + (xsw - target) * w;
    double jump = xsw - corrector_cubic(hist, target, fsw);
    return corrector_cubic(hist, target, f) + jump * w;
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
