#include "site-physical/charz.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/setup.h"

#define RANDOM_SINES 32
#define RANDOM_TAPER_S 1.0
#define RANDOM_CMD_STEP_S 1.0

void drths_charz_params_default(const drths_experiment_t *exp, int short_protocol,
                                drths_charz_params_t *p)
{
    memset(p, 0, sizeof *p);
    drths_damper_params_t d;
    drths_setup_damper_nominal(exp, &d);
    const double cmax = drths_damper_command_max(&d);
    const double amax = 0.2 * exp->physical.limit_displacement_m;
    p->rate_hz = exp->rate_hz;
    p->n_amp = 2;
    p->amp_m[0] = fmin(0.003, 0.375 * amax);
    p->amp_m[1] = fmin(0.008, amax);
    p->n_freq = short_protocol ? 1 : 2;
    p->freq_hz[0] = short_protocol ? 1.0 : 0.5;
    p->freq_hz[1] = 1.0;
    static const double frac[] = {0.0, 0.04, 0.1, 0.2, 0.4, 1.0};
    p->n_cmd = cmax > 0.0 ? 6 : 1;
    for (int i = 0; i < p->n_cmd; i++)
        p->cmd[i] = frac[i] * cmax;
    p->cycles = short_protocol ? 1 : 2;
    p->settle_s = 1.5;
    p->random_s = short_protocol ? 5.0 : 30.0;
    p->random_band_hz[0] = 0.2;
    p->random_band_hz[1] = 5.0;
    p->random_rms_m = fmin(0.002, 0.25 * amax);
    p->seed = exp->actuator.seed;
    p->max_error_m = 0.2 * exp->physical.limit_displacement_m;
    p->limit_force_N = exp->physical.limit_force_N;
    p->guard_force_N = 0.8 * exp->physical.limit_force_N;
    p->model = d;
}

/* ---- the protocol, tick by tick -------------------------------------------------------------- */

/* Called for each tick with its set-point, velocity, command and test (-1 between tests);
 * WIND_DOWN ends the test's sinusoid early with a ramp, another nonzero value stops the walk. */
#define WIND_DOWN 2
typedef int (*tick_fn)(void *ctx, double set_m, double vel_m_s, double cmd, int test);

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return ((double)(splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
}

static int n_sine_tests(const drths_charz_params_t *p)
{
    return p->n_cmd * p->n_amp * p->n_freq;
}

/* Asked before each sinusoid (test >= 0) whether to leave it out, and before the random segment
 * (test = -1 - c) whether command c is left out of it. */
typedef int (*skip_fn)(void *ctx, int test);

/* Walks the protocol (skip NULL: every test); returns the callback's nonzero value, or 0 at its
 * end. */
static int walk(const drths_charz_params_t *p, tick_fn fn, skip_fn skip, void *ctx)
{
    const double dt = 1.0 / p->rate_hz;
    int test = 0, rc;
    for (int c = 0; c < p->n_cmd; c++) {
        if (skip && skip(ctx, test)) {
            /* The command's first (smallest) test is left out: so are its others. */
            for (int k = 1; k < p->n_amp * p->n_freq; k++)
                (void)skip(ctx, test + k);
            test += p->n_amp * p->n_freq;
            continue;
        }
        long settle = lround(p->settle_s * p->rate_hz);
        for (long i = 0; i < settle; i++)
            if ((rc = fn(ctx, 0.0, 0.0, p->cmd[c], -1)))
                return rc;
        for (int a = 0; a < p->n_amp; a++)
            for (int f = 0; f < p->n_freq; f++, test++) {
                if (skip && (a > 0 || f > 0) && skip(ctx, test))
                    continue;
                const double A = p->amp_m[a], w = 2.0 * M_PI * p->freq_hz[f];
                const double T = 1.0 / p->freq_hz[f], total = (p->cycles + 2) * T;
                const long n = lround(total * p->rate_hz);
                double wind_t0 = -1.0, wind_e0 = 0.0, e = 0.0;
                for (long i = 1; i <= n; i++) {
                    const double t = i * dt;
                    double de = 0.0;
                    if (wind_t0 >= 0.0) {
                        /* Wound down over half a period from where the guard found it. */
                        const double u = (t - wind_t0) / (0.5 * T);
                        if (u >= 1.0)
                            break;
                        e = wind_e0 * 0.5 * (1.0 + cos(M_PI * u));
                        de = -wind_e0 * M_PI / T * sin(M_PI * u);
                    } else if (t < T) {
                        e = 0.5 * (1.0 - cos(M_PI * t / T));
                        de = 0.5 * M_PI / T * sin(M_PI * t / T);
                    } else if (t > total - T) {
                        const double u = (t - (total - T)) / T;
                        e = 0.5 * (1.0 + cos(M_PI * u));
                        de = -0.5 * M_PI / T * sin(M_PI * u);
                    } else {
                        e = 1.0;
                    }
                    if (t >= total)
                        e = de = 0.0;
                    rc = fn(ctx, A * e * sin(w * t), A * (de * sin(w * t) + e * w * cos(w * t)),
                            p->cmd[c], test);
                    if (rc == WIND_DOWN && wind_t0 < 0.0) {
                        wind_t0 = t;
                        wind_e0 = e;
                    } else if (rc && rc != WIND_DOWN) {
                        return rc;
                    }
                }
            }
    }
    if (p->random_s > 0.0) {
        uint64_t s = p->seed ^ 0x636861727aULL; /* "charz" */
        double fr[RANDOM_SINES], ph[RANDOM_SINES];
        for (int k = 0; k < RANDOM_SINES; k++) {
            fr[k] =
                2.0 * M_PI *
                (p->random_band_hz[0] + (p->random_band_hz[1] - p->random_band_hz[0]) * unit(&s));
            ph[k] = 2.0 * M_PI * unit(&s);
        }
        const double a = p->random_rms_m * sqrt(2.0 / RANDOM_SINES);
        const double taper = fmin(RANDOM_TAPER_S, 0.5 * p->random_s);
        const long n = lround(p->random_s * p->rate_hz);
        int ok[DRTHS_CHARZ_MAX_GRID], n_ok = 0;
        for (int c = 0; c < p->n_cmd; c++)
            if (!skip || !skip(ctx, -1 - c))
                ok[n_ok++] = c;
        if (n_ok == 0)
            return 0;
        for (long i = 1; i <= n; i++) {
            const double t = i * dt;
            double x = 0.0, v = 0.0, e = 1.0, de = 0.0;
            for (int k = 0; k < RANDOM_SINES; k++) {
                x += a * sin(fr[k] * t + ph[k]) - a * sin(ph[k]);
                v += a * fr[k] * cos(fr[k] * t + ph[k]);
            }
            if (t < taper) {
                e = 0.5 * (1.0 - cos(M_PI * t / taper));
                de = 0.5 * M_PI / taper * sin(M_PI * t / taper);
            } else if (t > p->random_s - taper) {
                const double u = (t - (p->random_s - taper)) / taper;
                e = 0.5 * (1.0 + cos(M_PI * u));
                de = -0.5 * M_PI / taper * sin(M_PI * u);
            }
            if (i == n)
                e = de = 0.0;
            const int step = ok[(int)(t / RANDOM_CMD_STEP_S) % n_ok];
            if ((rc = fn(ctx, e * x, de * x + e * v, p->cmd[step], test)))
                return rc;
        }
    }
    return 0;
}

typedef struct {
    double dt, prev_x, prev_v;
    long n;
    double max_x, max_v, max_a, max_cmd, min_cmd;
} extremes_t;

static int extreme_tick(void *ctx, double x, double v, double cmd, int test)
{
    (void)v, (void)test;
    extremes_t *e = ctx;
    double vel = (x - e->prev_x) / e->dt;
    double acc = (vel - e->prev_v) / e->dt;
    e->max_x = fmax(e->max_x, fabs(x));
    e->max_v = fmax(e->max_v, fabs(vel));
    if (e->n > 0)
        e->max_a = fmax(e->max_a, fabs(acc));
    e->max_cmd = fmax(e->max_cmd, cmd);
    e->min_cmd = fmin(e->min_cmd, cmd);
    e->prev_x = x;
    e->prev_v = vel;
    e->n++;
    return 0;
}

int drths_charz_plan(const drths_experiment_t *exp, const drths_charz_params_t *p,
                     double *duration_s, drths_error_t *err)
{
    if (!(p->rate_hz > 0.0) || p->n_amp < 1 || p->n_freq < 1 || p->n_cmd < 1 ||
        p->n_amp > DRTHS_CHARZ_MAX_GRID || p->n_freq > DRTHS_CHARZ_MAX_GRID ||
        p->n_cmd > DRTHS_CHARZ_MAX_GRID || p->cycles < 1)
        return drths_error_set(err, -EINVAL, "characterization: empty or oversized grid");
    if (n_sine_tests(p) + 1 > DRTHS_DAMPERFIT_MAX_TESTS)
        return drths_error_set(err, -EINVAL, "characterization: %d tests (at most %d)",
                               n_sine_tests(p) + 1, DRTHS_DAMPERFIT_MAX_TESTS);
    for (int f = 0; f < p->n_freq; f++)
        if (!(p->freq_hz[f] > 0.0) || p->freq_hz[f] > 0.1 * p->rate_hz)
            return drths_error_set(err, -EINVAL, "characterization: frequency %g Hz out of (0, %g]",
                                   p->freq_hz[f], 0.1 * p->rate_hz);
    extremes_t e = {.dt = 1.0 / p->rate_hz, .min_cmd = INFINITY};
    (void)walk(p, extreme_tick, NULL, &e);
    *duration_s = (double)e.n / p->rate_hz;
    const __typeof__(exp->physical) *ph = &exp->physical;
    drths_damper_params_t d;
    drths_setup_damper_nominal(exp, &d);
    const struct {
        const char *what, *limit;
        double v, lim;
    } checks[] = {
        {"displacement", "physical.limit_displacement_m", e.max_x, ph->limit_displacement_m},
        {"displacement", "physical.limit_drive_m", e.max_x, ph->limit_drive_m},
        {"velocity", "physical.limit_velocity_m_s", e.max_v, ph->limit_velocity_m_s},
        {"velocity", "physical.limit_drive_velocity_m_s", e.max_v, ph->limit_drive_velocity_m_s},
        {"acceleration", "physical.limit_drive_acceleration_m_s2", e.max_a,
         ph->limit_drive_acceleration_m_s2},
        {"damper command", "the damper's largest command", e.max_cmd,
         drths_damper_command_max(&d) > 0 ? drths_damper_command_max(&d) : 0.0},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        if (checks[i].lim > 0.0 && checks[i].v > checks[i].lim)
            return drths_error_set(err, -EINVAL,
                                   "characterization: the protocol's largest %s %.4g exceeds %s "
                                   "(%.4g)",
                                   checks[i].what, checks[i].v, checks[i].limit, checks[i].lim);
    if (e.min_cmd < 0.0)
        return drths_error_set(err, -EINVAL, "characterization: damper command %g < 0", e.min_cmd);
    return 0;
}

/* ---- the run ------------------------------------------------------------------------------------
 */

/* A tick of the protocol waiting in the preview queue. */
typedef struct {
    double set_m, vel_m_s, cmd;
    int test;
} pending_t;

typedef struct {
    drths_daq_t *daq;
    const drths_charz_params_t *p;
    drths_charz_record_t *rec;
    double nominal_peak[DRTHS_DAMPERFIT_MAX_TESTS]; /* the nominal model's along each test */
    int last_run;                                   /* the last test run, -1 before any */
    int cmd_skipped[DRTHS_CHARZ_MAX_GRID];
    /* The compensation's preview: the walk runs `lookahead` ticks ahead of the DAQ; q holds
     * the ticks walked and not yet written (qn of them from qhead), past the last four
     * set-points written (oldest first). */
    int lookahead, qhead, qn;
    pending_t q[DRTHS_CHARZ_MAX_PREVIEW + 1];
    double past[4];
} run_t;

/* The nominal model's peak force along each test (the set-point as its motion). */
typedef struct {
    drths_damper_t d;
    int started;
    double *peak;
} nominal_t;

static int nominal_tick(void *ctx, double x, double v, double cmd, int test)
{
    nominal_t *n = ctx;
    if (!n->started) {
        drths_damper_reset(&n->d, x, cmd);
        n->started = 1;
    }
    double f = fabs(drths_damper_step(&n->d, x, v, cmd));
    if (test >= 0 && test < DRTHS_DAMPERFIT_MAX_TESTS && f > n->peak[test])
        n->peak[test] = f;
    return 0;
}

static int cmd_index(const drths_charz_params_t *p, int test)
{
    return test / (p->n_amp * p->n_freq);
}

/* The force guard (charz.h). */
static int guard_skip(void *ctx, int test)
{
    run_t *r = ctx;
    const drths_charz_params_t *p = r->p;
    drths_charz_record_t *rec = r->rec;
    if (test < 0)
        return r->cmd_skipped[-1 - test];
    const int c = cmd_index(p, test);
    if (r->cmd_skipped[c] || (c > 0 && r->cmd_skipped[c - 1])) {
        r->cmd_skipped[c] = 1;
        rec->tests[test].skipped = 1;
        return 1;
    }
    if (r->last_run < 0 || !(r->nominal_peak[r->last_run] > 0.0) || !(p->guard_force_N > 0.0))
        return 0;
    const double pred =
        rec->tests[r->last_run].peak_N * r->nominal_peak[test] / r->nominal_peak[r->last_run];
    rec->tests[test].predicted_N = pred;
    if (pred > p->guard_force_N) {
        rec->tests[test].skipped = 1;
        r->cmd_skipped[c] = 1;
        return 1;
    }
    return 0;
}

static int stop(drths_charz_record_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int stop(drths_charz_record_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->stopped, sizeof r->stopped, fmt, ap);
    va_end(ap);
    return 1;
}

/* Writes the oldest tick of the queue (its drive from the compensation with the n_future
 * set-points after it, or the set-point itself without one), reads, records and checks it. */
static int apply_tick(run_t *r, const double *future, int n_future)
{
    drths_charz_record_t *rec = r->rec;
    const drths_charz_params_t *p = r->p;
    const pending_t t = r->q[r->qhead];
    const double set_m = t.set_m, cmd = t.cmd;
    const int test = t.test;
    r->qhead = (r->qhead + 1) % (DRTHS_CHARZ_MAX_PREVIEW + 1);
    r->qn--;
    if (rec->n >= rec->cap)
        return stop(rec, "the record is full after %ld ticks", rec->n);
    if (p->pace && p->pace(p->pace_ctx, rec->n) != 0)
        return stop(rec, "interrupted after %ld ticks", rec->n);
    const long k = rec->n;
    const int64_t now_ns = (int64_t)llround((double)(k + 1) * 1e9 / p->rate_hz);
    memmove(r->past, r->past + 1, 3 * sizeof *r->past);
    r->past[3] = set_m;
    double drive = set_m;
    if (p->comp) {
        drths_comp_set_command(p->comp, cmd);
        drive = drths_comp_drive(p->comp, r->past, future, n_future);
    }
    if (drths_daq_write(r->daq, drive, t.vel_m_s, cmd, p->comp ? set_m : NAN, now_ns) != 0) {
        drths_error_t e = {{0}};
        drths_daq_error(r->daq, &e);
        return stop(rec, "writing failed at %.3f s: %s", (double)k / p->rate_hz, e.msg);
    }
    double x = NAN, f = NAN;
    int rc = drths_daq_read(r->daq, &x, &f);
    if (p->comp && rc == 0 && !isnan(x))
        drths_comp_observe(p->comp, drths_daq_last_drive(r->daq), x);
    rec->set_m[k] = set_m;
    rec->drive_m[k] = drths_daq_last_drive(r->daq);
    rec->disp_m[k] = x;
    rec->force_N[k] = f;
    rec->cmd[k] = cmd;
    rec->test[k] = test;
    rec->n++;
    if (test >= 0 && fabs(f) > rec->tests[test].peak_N)
        rec->tests[test].peak_N = fabs(f);
    if (test >= 0)
        r->last_run = test;
    if (rc == -ERANGE)
        return stop(rec, "a converter read its end at %.3f s (displacement %.4g m, force %.4g N)",
                    (double)k / p->rate_hz, x, f);
    if (rc != 0 || isnan(x) || isnan(f)) {
        drths_error_t e = {{0}};
        drths_daq_error(r->daq, &e);
        return stop(rec, "reading failed at %.3f s: %s", (double)k / p->rate_hz,
                    e.msg[0] ? e.msg : "not a number");
    }
    if (fabs(x - set_m) > p->max_error_m)
        return stop(rec,
                    "the measured displacement left the set-point by %.3g mm at %.3f s (stop "
                    "at %.3g mm)",
                    fabs(x - set_m) * 1e3, (double)k / p->rate_hz, p->max_error_m * 1e3);
    if (fabs(f) > p->limit_force_N)
        return stop(rec, "force %.4g N beyond physical.limit_force_N (%.4g N) at %.3f s", f,
                    p->limit_force_N, (double)k / p->rate_hz);
    /* The guard: a sinusoid whose force passes it is wound down, and the larger tests after it
     * are left out (guard_skip). */
    if (test >= 0 && rec->tests[test].freq_hz > 0.0 && p->guard_force_N > 0.0 &&
        fabs(f) > p->guard_force_N) {
        if (!rec->tests[test].wound_down) {
            rec->tests[test].wound_down = 1;
            r->cmd_skipped[cmd_index(p, test)] = 1;
        }
        return WIND_DOWN;
    }
    return 0;
}

/* Writes the oldest queued tick with the ticks queued after it as its preview, the newest
 * repeated where fewer are queued (at the protocol's end, which is at rest). */
static int write_oldest(run_t *r)
{
    const int cap = DRTHS_CHARZ_MAX_PREVIEW + 1;
    const double newest = r->q[(r->qhead + r->qn - 1) % cap].set_m;
    double future[DRTHS_CHARZ_MAX_PREVIEW];
    for (int j = 0; j < r->lookahead; j++)
        future[j] = j + 1 < r->qn ? r->q[(r->qhead + 1 + j) % cap].set_m : newest;
    return apply_tick(r, future, r->lookahead);
}

/* The walk's tick: queued; once the queue holds the preview, its oldest tick is written. The
 * guard's WIND_DOWN reaches the walk only while the walk is still in that tick's test (it
 * winds down from where the walk is); a test the walk has already left is over anyway (the
 * guard has marked its command's larger tests to be left out). */
static int queue_tick(void *ctx, double set_m, double vel_m_s, double cmd, int test)
{
    run_t *r = ctx;
    const int cap = DRTHS_CHARZ_MAX_PREVIEW + 1;
    r->q[(r->qhead + r->qn) % cap] = (pending_t){set_m, vel_m_s, cmd, test};
    r->qn++;
    if (r->qn <= r->lookahead)
        return 0;
    const int oldest_test = r->q[r->qhead].test;
    const int rc = write_oldest(r);
    return rc == WIND_DOWN && oldest_test != test ? 0 : rc;
}

/* The ticks still queued at the protocol's end, every one written (a wind-down there has
 * nothing left to wind). */
static void flush_queue(run_t *r)
{
    while (r->qn > 0) {
        const int rc = write_oldest(r);
        if (rc != 0 && rc != WIND_DOWN)
            return;
    }
}

static int record_test(void *ctx, double x, double v, double cmd, int test)
{
    (void)x, (void)v;
    drths_charz_record_t *rec = ctx;
    if (test >= 0 && test >= rec->n_tests && test < DRTHS_DAMPERFIT_MAX_TESTS) {
        rec->n_tests = test + 1;
        rec->tests[test].cmd = cmd;
    }
    return 0;
}

void drths_charz_record_free(drths_charz_record_t *rec)
{
    free(rec->set_m), free(rec->drive_m), free(rec->disp_m), free(rec->force_N), free(rec->cmd);
    free(rec->test);
    rec->set_m = rec->drive_m = rec->disp_m = rec->force_N = rec->cmd = NULL;
    rec->test = NULL;
    rec->n = rec->cap = 0;
}

int drths_charz_run(drths_daq_t *daq, const drths_charz_params_t *p, drths_charz_record_t *rec,
                    drths_error_t *err)
{
    memset(rec, 0, sizeof *rec);
    extremes_t e = {.dt = 1.0 / p->rate_hz, .min_cmd = INFINITY};
    (void)walk(p, extreme_tick, NULL, &e);
    const size_t cap = (size_t)e.n;
    rec->set_m = malloc(cap * sizeof(double));
    rec->drive_m = malloc(cap * sizeof(double));
    rec->disp_m = malloc(cap * sizeof(double));
    rec->force_N = malloc(cap * sizeof(double));
    rec->cmd = malloc(cap * sizeof(double));
    rec->test = malloc(cap * sizeof(int));
    if (!rec->set_m || !rec->drive_m || !rec->disp_m || !rec->force_N || !rec->cmd || !rec->test) {
        drths_charz_record_free(rec);
        return drths_error_set(err, -ENOMEM, "characterization: no memory for %zu ticks", cap);
    }
    rec->cap = (long)cap;
    /* The tests' descriptions, in the walk's order. */
    (void)walk(p, record_test, NULL, rec);
    int t = 0;
    for (int c = 0; c < p->n_cmd; c++)
        for (int a = 0; a < p->n_amp; a++)
            for (int f = 0; f < p->n_freq; f++, t++) {
                rec->tests[t].amp_m = p->amp_m[a];
                rec->tests[t].freq_hz = p->freq_hz[f];
            }
    if (t < rec->n_tests) {
        rec->tests[t].amp_m = p->random_rms_m;
        rec->tests[t].freq_hz = 0.0;
        rec->tests[t].cmd = NAN; /* steps through the grid */
    }
    run_t *r = calloc(1, sizeof *r);
    if (!r) {
        drths_charz_record_free(rec);
        return drths_error_set(err, -ENOMEM, "characterization: no memory");
    }
    r->daq = daq, r->p = p, r->rec = rec, r->last_run = -1;
    nominal_t nom = {.peak = r->nominal_peak};
    if (p->guard_force_N > 0.0) {
        int rc = drths_damper_init(&nom.d, &p->model, 1.0 / p->rate_hz, err);
        if (rc) {
            free(r);
            drths_charz_record_free(rec);
            return drths_error_prefix(err, rc, "characterization: the nominal damper");
        }
        (void)walk(p, nominal_tick, NULL, &nom);
        drths_damper_close(&nom.d);
    }
    if (p->comp) {
        r->lookahead = drths_comp_lookahead_needed(p->comp);
        if (r->lookahead > DRTHS_CHARZ_MAX_PREVIEW)
            r->lookahead = DRTHS_CHARZ_MAX_PREVIEW;
    }
    if (walk(p, queue_tick, guard_skip, r) == 0)
        flush_queue(r);
    free(r);
    return 0;
}

/* ---- the fit's data -----------------------------------------------------------------------------
 */

int drths_charz_fit_data(const drths_charz_record_t *rec, int decimate, int half_window,
                         double rate_hz, drths_damperfit_data_t *data, double **x, double **v,
                         double **cmd, double **force, int **test)
{
    if (decimate < 1)
        decimate = 1;
    const long n = rec->n / decimate;
    *x = malloc((size_t)(n + 1) * sizeof(double));
    *v = malloc((size_t)(n + 1) * sizeof(double));
    *cmd = malloc((size_t)(n + 1) * sizeof(double));
    *force = malloc((size_t)(n + 1) * sizeof(double));
    *test = malloc((size_t)(n + 1) * sizeof(int));
    if (!*x || !*v || !*cmd || !*force || !*test) {
        free(*x), free(*v), free(*cmd), free(*force), free(*test);
        *x = *v = *cmd = *force = NULL;
        *test = NULL;
        return -ENOMEM;
    }
    const double dt = 1.0 / rate_hz;
    for (long j = 0; j < n; j++) {
        const long i = j * decimate;
        /* The set-point's own slope (central difference of the planned walk: no noise), and the
         * tracking error e = displacement - set-point smoothed by a local quadratic over
         * [i - m, i + m] (narrowed symmetrically at the ends): its value is the mean minus a
         * curvature term, its slope sum(k e) / sum(k^2). */
        const long a = i > 0 ? i - 1 : i, b = i + 1 < rec->n ? i + 1 : i;
        const double set_v = b > a ? (rec->set_m[b] - rec->set_m[a]) / ((double)(b - a) * dt) : 0.0;
        long m = half_window;
        if (i - m < 0)
            m = i;
        if (i + m > rec->n - 1)
            m = rec->n - 1 - i;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, k2 = 0.0, k4 = 0.0;
        for (long k = -m; k <= m; k++) {
            const double ei = rec->disp_m[i + k] - rec->set_m[i + k], kk = (double)k;
            s0 += ei;
            s1 += kk * ei;
            s2 += kk * kk * ei;
            k2 += kk * kk;
            k4 += kk * kk * kk * kk;
        }
        const double N = (double)(2 * m + 1);
        double es = rec->disp_m[i] - rec->set_m[i], ev = 0.0;
        if (m > 0) {
            /* e(k) = c0 + c1 k + c2 k^2: c2 = (N s2 - k2 s0) / (N k4 - k2^2), c0 = (s0 - c2 k2)/N.
             */
            const double c2 = (N * s2 - k2 * s0) / (N * k4 - k2 * k2);
            es = (s0 - c2 * k2) / N;
            ev = s1 / k2 / dt;
        }
        /* The command held over the fit's step (i - decimate, i]: the mean of its ticks', so a
         * change of current between two of the fit's samples acts from the right tick on
         * average. */
        const long k0 = i >= decimate - 1 ? i - decimate + 1 : 0;
        double c = 0.0;
        for (long k = k0; k <= i; k++)
            c += rec->cmd[k];
        c /= (double)(i - k0 + 1);
        (*x)[j] = rec->set_m[i] + es;
        (*v)[j] = set_v + ev;
        (*cmd)[j] = c;
        (*force)[j] = rec->force_N[i];
        (*test)[j] = rec->test[i];
    }
    *data =
        (drths_damperfit_data_t){*x, *v, *cmd, *force, *test, n, rec->n_tests, decimate * dt, 0.0};
    return 0;
}
