#include "site-physical/iocheck.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/setup.h"

#define HOLD_S 0.2        /* the set-point written at the rest position, before any motion */
#define SETTLE_S 0.2      /* at rest with the second cycle's damper command, before it moves */
#define MAX_LAG_S 0.1     /* the I/O delay searched: 0 .. 100 ms */
#define JUDGE_SIGMAS 5.0  /* an energy is judged when it exceeds its noise bound this many times */
#define CURRENT_GAIN 1.2  /* the damper answers when the energy grows by at least this factor */

const char *drths_iocheck_verdict_name(drths_iocheck_verdict_t v)
{
    static const char *const names[] = {"OK", "NOTE", "WARNING", "REVERSED", "FAILED"};
    return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";
}

void drths_iocheck_params_default(const drths_experiment_t *exp, drths_iocheck_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->rate_hz = exp->rate_hz;
    p->amplitude_m = fmin(0.002, 0.1 * exp->physical.limit_displacement_m);
    p->leg_s = 1.0;
    p->rest_s = 0.5;
    drths_setup_damper_nominal(exp, &p->model);
    p->current = 0.5 * drths_damper_command_max(&p->model);
    p->max_error_m = 0.2 * exp->physical.limit_displacement_m;
    p->limit_force_N = exp->physical.limit_force_N;
}

/* ---- the ticks ------------------------------------------------------------------------------ */

typedef struct iorun {
    drths_daq_t *daq;
    const drths_iocheck_params_t *p;
    drths_iocheck_result_t *res;
    double *set, *disp, *force; /* the cycles' samples */
    long n, cap;
} iorun_t;

static int stop(iorun_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int stop(iorun_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->res->stopped, sizeof r->res->stopped, fmt, ap);
    va_end(ap);
    return 1;
}

/* One tick: pace, write the set-point (NaN: write nothing), read, check (the measured
 * displacement within bound_m of the set-point). Returns 0, or 1 when the check must stop
 * (res->stopped says why). */
static int tick(iorun_t *r, double set_m, double vel_m_s, double command, double bound_m,
                double *x, double *f)
{
    const drths_iocheck_params_t *p = r->p;
    if (p->pace && p->pace(p->pace_ctx, r->res->ticks) != 0)
        return stop(r, "interrupted after %ld ticks", r->res->ticks);
    r->res->ticks++;
    /* The envelope judges the set-points in tick time, as the ticks are paced. */
    const int64_t now_ns = (int64_t)llround((double)r->res->ticks * 1e9 / p->rate_hz);
    if (!isnan(set_m) && drths_daq_write(r->daq, set_m, vel_m_s, command, NAN, now_ns) != 0) {
        drths_error_t e = {{0}};
        drths_daq_error(r->daq, &e);
        return stop(r, "writing failed: %s", e.msg);
    }
    int rc = drths_daq_read(r->daq, x, f);
    if (rc == -ERANGE)
        return stop(r, "a converter read its end (displacement %.4g m, force %.4g N): the "
                       "input is beyond its range",
                    *x, *f);
    if (rc != 0 || isnan(*x) || isnan(*f)) {
        drths_error_t e = {{0}};
        drths_daq_error(r->daq, &e);
        return stop(r, "reading failed: %s", e.msg[0] ? e.msg : "not a number");
    }
    if (!isnan(set_m) && fabs(*x - set_m) > bound_m)
        return stop(r, "the measured displacement left the set-point by %.3g mm (stop at %.3g "
                       "mm): command_out and displacement_in disagree (polarity, zero or scale)",
                    fabs(*x - set_m) * 1e3, bound_m * 1e3);
    if (fabs(*f) > p->limit_force_N)
        return stop(r, "force %.4g N beyond the limit %.4g N", *f, p->limit_force_N);
    return 0;
}

static void mean_std(const double *v, long n, double *mean, double *sd)
{
    double s = 0.0, s2 = 0.0;
    for (long i = 0; i < n; i++)
        s += v[i];
    *mean = s / (double)n;
    for (long i = 0; i < n; i++)
        s2 += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(s2 / (double)(n - 1)) : 0.0;
}

/* Rest: inputs only, outputs untouched. Uses the sample arrays as scratch. */
static int rest(iorun_t *r, long n)
{
    for (long i = 0; i < n; i++)
        if (tick(r, NAN, 0.0, 0.0, 0.0, &r->disp[i], &r->force[i]))
            return 1;
    mean_std(r->disp, n, &r->res->disp_rest_m, &r->res->disp_noise_m);
    mean_std(r->force, n, &r->res->force_rest_N, &r->res->force_noise_N);
    return 0;
}

/* Still at the rest position for n ticks with the damper command given. The set-point written
 * is the position read: the actuator must not move, and a move of half the amplitude (a
 * set-point channel whose zero is off) stops the check before any cycle. */
static int hold(iorun_t *r, long n, double command)
{
    double x, f, bound = fmax(0.5 * r->p->amplitude_m, 10.0 * r->res->disp_noise_m);
    for (long i = 0; i < n; i++)
        if (tick(r, r->res->disp_rest_m, 0.0, command, bound, &x, &f))
            return 1;
    return 0;
}

/* One cycle +A, 0, -A, 0 of half cosines, recorded. A reversed channel leaves the measured
 * displacement up to twice the amplitude from the set-point, which the check must see through
 * to name the channel: the bound is three amplitudes (at most max_error_m). */
static int cycle(iorun_t *r, long leg, double command)
{
    const double a = r->p->amplitude_m, x0 = r->res->disp_rest_m;
    const double vpeak = a * M_PI / (2.0 * (double)leg / r->p->rate_hz);
    static const double from[4] = {0, 1, 0, -1}, to[4] = {1, 0, -1, 0};
    for (int l = 0; l < 4; l++) {
        for (long i = 1; i <= leg; i++) {
            double s = (double)i / (double)leg, u = 0.5 * (1.0 - cos(M_PI * s));
            double set = x0 + a * (from[l] + (to[l] - from[l]) * u);
            double vel = (to[l] - from[l]) * vpeak * sin(M_PI * s);
            long k = r->n++;
            r->set[k] = set;
            if (tick(r, set, vel, command, fmin(3.0 * a, r->p->max_error_m), &r->disp[k],
                     &r->force[k]))
                return 1;
        }
    }
    return 0;
}

/* ---- the analysis --------------------------------------------------------------------------- */

/* Least squares y[i] = g set[i - lag] + b over i in [from, n); returns the residual sum. */
static double fit_lag(const iorun_t *r, long lag, long from, double *g, double *b)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
    long m = r->n - from;
    for (long i = from; i < r->n; i++) {
        double x = r->set[i - lag], y = r->disp[i];
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        syy += y * y;
    }
    double vx = sxx - sx * sx / (double)m, cxy = sxy - sx * sy / (double)m;
    double vy = syy - sy * sy / (double)m;
    *g = vx > 0 ? cxy / vx : 0.0;
    *b = (sy - *g * sx) / (double)m;
    return fmax(vy - *g * cxy, 0.0);
}

/* The delay (whole ticks, then a parabola through the neighbours), gain and offset. */
static void fit_displacement(const iorun_t *r, drths_iocheck_result_t *res)
{
    long maxlag = (long)(MAX_LAG_S * r->p->rate_hz);
    if (maxlag > r->n / 4)
        maxlag = r->n / 4;
    long best = 0;
    double sse_best = INFINITY, g, b;
    double *sse = calloc((size_t)maxlag + 1, sizeof *sse);
    for (long k = 0; k <= maxlag; k++) {
        double s = sse ? (sse[k] = fit_lag(r, k, maxlag, &g, &b)) : fit_lag(r, k, maxlag, &g, &b);
        if (s < sse_best) {
            sse_best = s;
            best = k;
        }
    }
    double frac = 0.0;
    if (sse && best > 0 && best < maxlag) {
        double den = sse[best - 1] - 2.0 * sse[best] + sse[best + 1];
        if (den > 0)
            frac = 0.5 * (sse[best - 1] - sse[best + 1]) / den;
    }
    free(sse);
    (void)fit_lag(r, best, maxlag, &res->gain, &res->offset_m);
    res->delay_s = ((double)best + frac) / r->p->rate_hz;
    res->fit_rms_m = sqrt(sse_best / (double)(r->n - maxlag));
}

/* The energy the measured force dissipates over each cycle, along the set-point's increments
 * (noise-free, where the measured displacement's increments are mostly sensor noise), and its
 * noise bound. Signs: a damper's force lies along the velocity, so a right load cell gives a
 * positive energy along the motion the command makes. */
static void energies(const iorun_t *r, long per_cycle, drths_iocheck_result_t *res)
{
    for (int c = 0; c < res->cycles_done; c++) {
        double w = 0.0, s2 = 0.0;
        for (long i = c * per_cycle + 1; i < (c + 1) * per_cycle; i++) {
            double dx = r->set[i] - r->set[i - 1];
            w += (r->force[i] - res->force_rest_N) * dx;
            s2 += dx * dx;
        }
        res->energy_J[c] = w;
        res->energy_noise_J[c] = res->force_noise_N * sqrt(s2);
    }
}

/* The measured force against the experiment's model driven along the measured motion (the
 * fitted set-point, free of sensor noise): least-squares scale. */
static void force_scale(const iorun_t *r, long per_cycle, drths_iocheck_result_t *res)
{
    drths_damper_t d;
    drths_error_t e = {{0}};
    double dt = 1.0 / r->p->rate_hz, lag = res->delay_s * r->p->rate_hz;
    long k = lround(lag);
    if (drths_damper_init(&d, &r->p->model, dt, &e) != 0) {
        res->force_vs_model = NAN;
        return;
    }
    double sff = 0.0, smm = 0.0, x_prev = NAN;
    for (long i = 0; i < r->n; i++) {
        if (i % per_cycle == 0)
            drths_damper_reset(&d, res->disp_rest_m, i < per_cycle ? 0.0 : r->p->current);
        double x = res->gain * r->set[i >= k ? i - k : 0] + res->offset_m;
        double v = isnan(x_prev) || i % per_cycle == 0 ? 0.0 : (x - x_prev) / dt;
        double fm = drths_damper_step(&d, x, v, i < per_cycle ? 0.0 : r->p->current);
        x_prev = x;
        sff += (r->force[i] - res->force_rest_N) * fm;
        smm += fm * fm;
    }
    res->force_vs_model = smm > 0 ? sff / smm : NAN;
    drths_damper_close(&d);
}

static drths_iocheck_verdict_t worst(drths_iocheck_verdict_t a, drths_iocheck_verdict_t b)
{
    return a > b ? a : b;
}

/* The index of the cycle whose energy is the most clearly above its noise, or -1. */
static int judged_cycle(const drths_iocheck_result_t *res)
{
    int best = -1;
    double z_best = JUDGE_SIGMAS;
    for (int c = 0; c < res->cycles_done; c++) {
        double z = fabs(res->energy_J[c]) / fmax(res->energy_noise_J[c], 1e-300);
        if (z >= z_best) {
            z_best = z;
            best = c;
        }
    }
    return best;
}

static void judge(const drths_iocheck_params_t *p, drths_iocheck_result_t *res)
{
    res->displacement = res->force = res->current = DRTHS_IOCHECK_FAILED;
    if (res->cycles_done > 0) {
        double g = res->gain;
        res->displacement = g <= 0                    ? DRTHS_IOCHECK_REVERSED
                            : fabs(g - 1.0) > 0.2     ? DRTHS_IOCHECK_WARNING
                            : fabs(g - 1.0) > 0.05 ||
                                      fabs(res->offset_m) >
                                          3.0 * res->disp_noise_m + 0.02 * p->amplitude_m
                                ? DRTHS_IOCHECK_NOTE
                                : DRTHS_IOCHECK_OK;
        int c = judged_cycle(res);
        if (c >= 0) {
            int along_command = res->energy_J[c] > 0;
            /* Which one of the three disagrees with the other two (a single fault): the force
             * against the command, the displacement against the command. */
            if (!along_command && g > 0)
                res->force = DRTHS_IOCHECK_REVERSED;
            else if (!along_command && g <= 0)
                res->force = DRTHS_IOCHECK_OK; /* command_out reversed: the force agrees with the
                                                  measured motion */
            else
                res->force = isfinite(res->force_vs_model) &&
                                     (fabs(res->force_vs_model) < 0.5 ||
                                      fabs(res->force_vs_model) > 2.0)
                                 ? DRTHS_IOCHECK_NOTE
                                 : DRTHS_IOCHECK_OK;
        }
    }
    if (res->cycles_done == 2) {
        double e0 = fabs(res->energy_J[0]), e1 = fabs(res->energy_J[1]);
        res->current = e1 >= CURRENT_GAIN * e0 + JUDGE_SIGMAS * res->energy_noise_J[1]
                           ? DRTHS_IOCHECK_OK
                           : DRTHS_IOCHECK_WARNING;
    } else if (p->current == 0.0 && res->cycles_done == 1) {
        res->current = DRTHS_IOCHECK_NOTE; /* not tried */
    }
    res->overall = res->stopped[0] ? DRTHS_IOCHECK_FAILED
                                   : worst(worst(res->displacement, res->force), res->current);
    if (res->overall == DRTHS_IOCHECK_NOTE && res->current == DRTHS_IOCHECK_NOTE &&
        res->displacement == DRTHS_IOCHECK_OK && res->force == DRTHS_IOCHECK_OK)
        res->overall = DRTHS_IOCHECK_OK;
}

static int check_params(const drths_iocheck_params_t *p, drths_error_t *err)
{
    if (!(p->rate_hz > 0) || !(p->amplitude_m > 0) || !(p->leg_s > 0) || !(p->rest_s > 0) ||
        !(p->current >= 0) || !(p->max_error_m > 0) || !(p->limit_force_N > 0))
        return drths_error_set(err, -EINVAL, "I/O check: rate, amplitude, leg, rest, error "
                                             "and force limits must be positive");
    if (2.0 * p->amplitude_m > p->max_error_m * 10.0)
        return drths_error_set(err, -EINVAL, "I/O check: amplitude %.3g mm is too large for "
                                             "the displacement limit (at most %.3g mm)",
                               p->amplitude_m * 1e3, p->max_error_m * 5e3);
    long leg = lround(p->leg_s * p->rate_hz);
    if (leg < 10 || (double)leg * 8.0 > 1e8)
        return drths_error_set(err, -EINVAL, "I/O check: a leg of %g s at %g Hz is %ld ticks "
                                             "(10 .. 12.5 million)",
                               p->leg_s, p->rate_hz, leg);
    return 0;
}

int drths_iocheck_run(drths_daq_t *daq, const drths_iocheck_params_t *p,
                      drths_iocheck_result_t *res, drths_error_t *err)
{
    memset(res, 0, sizeof *res);
    int rc = check_params(p, err);
    if (rc)
        return rc;
    long leg = lround(p->leg_s * p->rate_hz), per_cycle = 4 * leg;
    long nrest = lround(p->rest_s * p->rate_hz);
    int ncycles = p->current > 0 ? 2 : 1;
    iorun_t r = {daq, p, res, NULL, NULL, NULL, 0, per_cycle * ncycles};
    if (r.cap < nrest)
        r.cap = nrest;
    r.set = calloc((size_t)r.cap, sizeof *r.set);
    r.disp = calloc((size_t)r.cap, sizeof *r.disp);
    r.force = calloc((size_t)r.cap, sizeof *r.force);
    if (!r.set || !r.disp || !r.force) {
        rc = drths_error_set(err, -ENOMEM, "I/O check: out of memory for %ld samples", r.cap);
        goto out;
    }
    if (rest(&r, nrest) == 0 && hold(&r, lround(HOLD_S * p->rate_hz), 0.0) == 0) {
        for (int c = 0; c < ncycles; c++) {
            double command = c == 0 ? 0.0 : p->current;
            if ((c > 0 && hold(&r, lround(SETTLE_S * p->rate_hz), command)) ||
                cycle(&r, leg, command))
                break;
            res->cycles_done++;
        }
    }
    (void)drths_daq_safe_state(daq, r.n > 0 ? r.set[r.n - 1] : res->disp_rest_m,
                               (int64_t)llround((double)res->ticks * 1e9 / p->rate_hz));
    r.n = res->cycles_done * per_cycle; /* a cycle cut short is not analysed */
    if (res->cycles_done > 0) {
        fit_displacement(&r, res);
        energies(&r, per_cycle, res);
        force_scale(&r, per_cycle, res);
    }
    judge(p, res);
out:
    free(r.set);
    free(r.disp);
    free(r.force);
    return rc;
}

/* ---- the report ----------------------------------------------------------------------------- */

static const char *command_unit(const drths_iocheck_params_t *p)
{
    return p->model.model == DRTHS_DAMPER_SPENCER1997 ? "V" : "A";
}

static void print_force(FILE *f, const drths_iocheck_params_t *p, const drths_iocheck_result_t *r)
{
    int c = judged_cycle(r);
    fprintf(f, "  force_in         ");
    if (c < 0) {
        fprintf(f, "energy per cycle %+.3g J (noise %.2g J): too small to judge its polarity  %s\n",
                r->energy_J[r->cycles_done - 1], r->energy_noise_J[r->cycles_done - 1],
                drths_iocheck_verdict_name(r->force));
        return;
    }
    fprintf(f, "dissipates %+.3g J per cycle at %g %s (noise %.2g J), x%.2f the model's force  %s\n",
            r->energy_J[c], c == 0 ? 0.0 : p->current, command_unit(p), r->energy_noise_J[c],
            fabs(r->force_vs_model), drths_iocheck_verdict_name(r->force));
    if (r->force == DRTHS_IOCHECK_REVERSED)
        fprintf(f, "                   the force opposes the damper's motion: force_in is "
                   "reversed (or both command_out and displacement_in): check the sign of its "
                   "units_per_volt and the load cell's wiring\n");
    else if (r->displacement == DRTHS_IOCHECK_REVERSED && r->energy_J[c] > 0)
        fprintf(f, "                   the force agrees with command_out: displacement_in is the "
                   "reversed one (or both command_out and force_in)\n");
    else if (r->displacement == DRTHS_IOCHECK_REVERSED)
        fprintf(f, "                   the force agrees with displacement_in: command_out is the "
                   "reversed one (or both displacement_in and force_in)\n");
    else if (r->force == DRTHS_IOCHECK_NOTE)
        fprintf(f, "                   x%.2f the model: check force_in's units_per_volt (N per "
                   "V), or the damper differs from the experiment's model\n",
                fabs(r->force_vs_model));
}

static void print_current(FILE *f, const drths_iocheck_params_t *p,
                          const drths_iocheck_result_t *r)
{
    if (r->cycles_done < 2) {
        fprintf(f, "  current_out      %s\n",
                p->current > 0 ? "not tried (the check stopped before)"
                               : "not tried (--io-current 0): it has no read-back");
        return;
    }
    fprintf(f, "  current_out      at %g %s the damper dissipates x%.2f the energy at 0  %s\n",
            p->current, command_unit(p), fabs(r->energy_J[1]) / fmax(fabs(r->energy_J[0]), 1e-300),
            drths_iocheck_verdict_name(r->current));
    if (r->current == DRTHS_IOCHECK_WARNING)
        fprintf(f, "                   the damper's force did not grow with its command: check "
                   "current_out's channel and units_per_volt and the current driver\n");
}

void drths_iocheck_print(FILE *f, const drths_iocheck_params_t *p,
                         const drths_iocheck_result_t *r)
{
    fprintf(f, "  at rest          displacement %+.4f mm (noise %.4f mm RMS), force %+.1f N "
               "(noise %.1f N RMS)\n",
            r->disp_rest_m * 1e3, r->disp_noise_m * 1e3, r->force_rest_N, r->force_noise_N);
    if (r->cycles_done > 0) {
        fprintf(f, "  command_out -> displacement_in  gain %+.3f, offset %+.4f mm, delay %.2f ms, "
                   "fit %.4f mm RMS  %s\n",
                r->gain, r->offset_m * 1e3, r->delay_s * 1e3, r->fit_rms_m * 1e3,
                drths_iocheck_verdict_name(r->displacement));
        if (r->displacement == DRTHS_IOCHECK_REVERSED)
            fprintf(f, "                   the actuator moves against its set-point as "
                       "displacement_in reads it: one of them is reversed (see force_in)\n");
        else if (r->displacement == DRTHS_IOCHECK_WARNING)
            fprintf(f, "                   the measured stroke is x%.2f the set-point: check the "
                       "units_per_volt of command_out and displacement_in, and the servo "
                       "controller's span\n",
                    r->gain);
        else if (r->displacement == DRTHS_IOCHECK_NOTE)
            fprintf(f, "                   stroke x%.3f of the set-point, offset %+.4f mm: the "
                       "compensation adapts to a few per cent; more is worth a look at the spans "
                       "and zeros\n",
                    r->gain, r->offset_m * 1e3);
        print_force(f, p, r);
    }
    print_current(f, p, r);
    if (r->stopped[0])
        fprintf(f, "  stopped: %s\n", r->stopped);
    fprintf(f, "verdict: %s%s\n", drths_iocheck_verdict_name(r->overall),
            r->overall == DRTHS_IOCHECK_OK     ? ": the rig's I/O agrees with the experiment file"
            : r->overall == DRTHS_IOCHECK_NOTE ? ": look at the NOTE lines before the test"
            : r->overall == DRTHS_IOCHECK_FAILED
                ? ": the check could not finish; fix what stopped it and run it again"
                : ": do not run a test until the lines above are fixed");
}
