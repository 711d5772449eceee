#include "site-numerical/smith.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int drths_smith_init(drths_smith_t *s, drths_smith_mode_t mode,
                     const drths_damper_params_t *nominal, double dt_s, size_t history,
                     drths_error_t *err)
{
    memset(s, 0, sizeof *s);
    if (mode == DRTHS_SMITH_ADAPTIVE)
        return drths_error_set(err, -ENOTSUP,
                               "numerical.smith: adaptive is not available yet (use fixed or "
                               "off)");
    if (mode != DRTHS_SMITH_OFF && mode != DRTHS_SMITH_FIXED)
        return drths_error_set(err, -EINVAL, "numerical.smith: unknown mode %d", (int)mode);
    if (history < 2)
        return drths_error_set(err, -EINVAL,
                               "Smith predictor history: must be >= 2 steps (got %zu)", history);
    int rc = drths_damper_init(&s->model, nominal, dt_s, err);
    if (rc)
        return drths_error_prefix(err, rc, "Smith predictor model");
    s->hist = calloc(history, sizeof(double));
    if (!s->hist)
        return drths_error_set(err, -ENOMEM, "out of memory for %zu steps of Smith history",
                               history);
    s->cap = history;
    s->mode = mode;
    s->corr_step = -1;
    return 0;
}

int drths_smith_reset(drths_smith_t *s, double command, uint32_t L)
{
    if ((size_t)L + 1 > s->cap)
        return -ERANGE;
    drths_damper_reset(&s->model, 0.0, command);
    s->rest_force_N = drths_damper_force(&s->model);
    s->step = 0;
    s->hist[0] = s->rest_force_N;
    s->L = L;
    s->last_corr_N = 0.0;
    s->corr_step = -1;
    return 0;
}

int drths_smith_set_delay(drths_smith_t *s, uint32_t L)
{
    if ((size_t)L + 1 > s->cap)
        return -ERANGE;
    s->L = L;
    return 0;
}

double drths_smith_step(drths_smith_t *s, double disp_m, double vel_m_s, double command)
{
    double f = drths_damper_step(&s->model, disp_m, vel_m_s, command);
    s->step++;
    s->hist[(size_t)s->step % s->cap] = f;
    return f;
}

double drths_smith_model(const drths_smith_t *s, int64_t k)
{
    if (k <= 0)
        return s->rest_force_N;
    if (k > s->step || s->step - k >= (int64_t)s->cap)
        return NAN;
    return s->hist[(size_t)k % s->cap];
}

double drths_smith_force(drths_smith_t *s, int64_t n, double measured_N)
{
    double delayed = drths_smith_model(s, n - (int64_t)s->L);
    s->last_corr_N = measured_N - delayed;
    s->corr_step = n;
    if (s->mode == DRTHS_SMITH_OFF)
        return measured_N;
    return drths_smith_model(s, n) + s->last_corr_N;
}

double drths_smith_conceal(const drths_smith_t *s, int64_t n)
{
    int64_t k = s->mode == DRTHS_SMITH_OFF ? n - (int64_t)s->L : n;
    return drths_smith_model(s, k) + s->last_corr_N;
}

void drths_smith_close(drths_smith_t *s)
{
    free(s->hist);
    s->hist = NULL;
    s->cap = 0;
    drths_damper_close(&s->model);
}
