#include "common/models/specimen.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The plant's 2.5 A model is the damper's largest current (Phillips & Spencer 2013 identified
 * the actuator at 0 A and at 2.5 A). */
#define PLANT_I_HI_A 2.5

void drths_specimen_params_default(drths_specimen_params_t *p, drths_damper_model_t m)
{
    memset(p, 0, sizeof *p);
    drths_damper_params_preset(&p->damper, m);
    p->plant_enabled = 1;
    p->plant_scale = (drths_plant_scale_t){1.0, 1.0, 1.0, 1.0};
    p->adc_bits = 16;
    p->io_delay_ticks = 1;
    p->seed = 1;
    p->noise_disp_m = 2e-6;
    p->disp_range_m = 0.1;
    if (m == DRTHS_DAMPER_SPENCER1997) {
        p->disp_range_m = 0.05;
        p->force_range_N = 5e3;
        p->noise_force_N = 5.0;
    } else {
        p->force_range_N = 2.5e5;
        p->noise_force_N = 50.0;
    }
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman & Vigna). */
static uint64_t next_u64(uint64_t *st)
{
    const uint64_t r = rotl(st[1] * 5, 7) * 9;
    const uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl(st[3], 45);
    return r;
}

/* Uniform in (0, 1]: never 0, so log() below is finite. */
static double uniform01(uint64_t *st)
{
    return ((double)(next_u64(st) >> 11) + 1.0) * 0x1.0p-53;
}

static double gaussian(drths_specimen_t *s)
{
    if (s->has_spare) {
        s->has_spare = 0;
        return s->spare;
    }
    const double u1 = uniform01(s->rng), u2 = uniform01(s->rng);
    const double r = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
    s->spare = r * sin(th);
    s->has_spare = 1;
    return r * cos(th);
}

static void seed_rng(drths_specimen_t *s)
{
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    s->has_spare = 0;
    s->spare = 0.0;
}

/* The converter's reading of v; bit is set in *saturated when it is one of the end codes. */
static double quantise(const drths_specimen_t *s, double v, double q, unsigned bit,
                       unsigned *saturated)
{
    if (q <= 0.0)
        return v;
    double code = nearbyint(v / q);
    if (!(code >= s->code_lo)) /* also NaN: a saturated converter reads its lowest code */
        code = s->code_lo;
    else if (code > s->code_hi)
        code = s->code_hi;
    if (code <= s->code_lo || code >= s->code_hi)
        *saturated |= bit;
    return code * q;
}

int drths_specimen_init(drths_specimen_t *s, const drths_specimen_params_t *p, double dt_s,
                        drths_error_t *err)
{
    if (!(p->noise_disp_m >= 0.0) || !isfinite(p->noise_disp_m))
        return drths_error_set(err, -EINVAL, "specimen.noise_disp_m: must be >= 0 (got %g)",
                               p->noise_disp_m);
    if (!(p->noise_force_N >= 0.0) || !isfinite(p->noise_force_N))
        return drths_error_set(err, -EINVAL, "specimen.noise_force_N: must be >= 0 (got %g)",
                               p->noise_force_N);
    if (p->adc_bits < 0 || p->adc_bits > 32)
        return drths_error_set(err, -EINVAL, "specimen.adc_bits: must be 0 (off) to 32 (got %d)",
                               p->adc_bits);
    if (p->adc_bits > 0) {
        if (!(p->disp_range_m > 0.0) || !isfinite(p->disp_range_m))
            return drths_error_set(err, -EINVAL, "specimen.disp_range_m: must be > 0 (got %g)",
                                   p->disp_range_m);
        if (!(p->force_range_N > 0.0) || !isfinite(p->force_range_N))
            return drths_error_set(err, -EINVAL, "specimen.force_range_N: must be > 0 (got %g)",
                                   p->force_range_N);
    }
    if (p->io_delay_ticks < 0 || p->io_delay_ticks > 1000000)
        return drths_error_set(err, -EINVAL, "specimen.io_delay_ticks: must be 0 to 1000000 (got %d)",
                               p->io_delay_ticks);

    drths_specimen_t t;
    memset(&t, 0, sizeof t);
    t.p = *p;
    int rc = drths_damper_init(&t.damper, &p->damper, dt_s, err);
    if (rc < 0)
        return drths_error_prefix(err, rc, "specimen");
    drths_plant_model_t lo, hi;
    if ((rc = drths_plant_model_scale(&DRTHS_PLANT_0A, &p->plant_scale, &lo, err)) < 0 ||
        (rc = drths_plant_model_scale(&DRTHS_PLANT_2P5A, &p->plant_scale, &hi, err)) < 0)
        return drths_error_prefix(err, rc, "specimen");
    rc = drths_plant_init(&t.plant, &lo, &hi, PLANT_I_HI_A, dt_s, err);
    if (rc < 0)
        return drths_error_prefix(err, rc, "specimen");
    const double cmax = drths_damper_command_max(&p->damper);
    t.plant_current_scale = 0.0;
    if (cmax > 0.0)
        t.plant_current_scale = p->damper.model == DRTHS_DAMPER_PHILLIPS2013 ? 1.0 : PLANT_I_HI_A / cmax;
    if (p->adc_bits > 0) {
        const double levels = ldexp(1.0, p->adc_bits);
        t.q_disp = 2.0 * p->disp_range_m / levels;
        t.q_force = 2.0 * p->force_range_N / levels;
        t.code_lo = -0.5 * levels;
        t.code_hi = 0.5 * levels - 1.0;
    }
    t.line_len = p->io_delay_ticks + 1;
    t.line = calloc((size_t)t.line_len * 3, sizeof(double));
    if (!t.line)
        return drths_error_set(err, -ENOMEM, "specimen: no memory for a %d-tick delay line",
                               p->io_delay_ticks);
    *s = t;
    drths_specimen_reset(s, 0.0, 0.0);
    return 0;
}

void drths_specimen_reset(drths_specimen_t *s, double x_m, double command)
{
    drths_damper_reset(&s->damper, x_m, command);
    drths_plant_reset(&s->plant, x_m);
    for (int i = 0; i < s->line_len; i++) {
        s->line[3 * i] = x_m;
        s->line[3 * i + 1] = 0.0;
        s->line[3 * i + 2] = command;
    }
    s->line_pos = 0;
    seed_rng(s);
}

int drths_specimen_step(drths_specimen_t *s, double drive_m, double vel_m_s, double command,
                        drths_specimen_meas_t *out)
{
    /* The slot at line_pos holds the oldest entry, written io_delay_ticks ticks ago (or this
     * very tick when there is no delay). */
    double *slot = &s->line[3 * s->line_pos];
    slot[0] = drive_m;
    slot[1] = vel_m_s;
    slot[2] = command;
    s->line_pos = (s->line_pos + 1) % s->line_len;
    const double *old = &s->line[3 * s->line_pos];
    const double drive = old[0], vel = old[1], cmd = old[2];

    double x, v;
    if (s->p.plant_enabled) {
        const double i_plant = drths_damper_command_effective(&s->damper) * s->plant_current_scale;
        x = drths_plant_step(&s->plant, drive, i_plant, &v);
    } else {
        x = drive;
        v = vel;
    }
    const double f = drths_damper_step(&s->damper, x, v, cmd);

    double md = x, mf = f;
    if (s->p.noise_disp_m > 0.0)
        md += s->p.noise_disp_m * gaussian(s);
    if (s->p.noise_force_N > 0.0)
        mf += s->p.noise_force_N * gaussian(s);
    unsigned saturated = 0;
    out->disp_m = quantise(s, md, s->q_disp, 1u, &saturated);
    out->force_N = quantise(s, mf, s->q_force, 2u, &saturated);
    out->saturated = saturated;
    out->true_disp_m = x;
    out->true_vel_m_s = v;
    out->true_force_N = f;
    out->current = drths_damper_command_effective(&s->damper);
    return saturated ? -ERANGE : 0;
}

void drths_specimen_close(drths_specimen_t *s)
{
    if (!s)
        return;
    free(s->line);
    s->line = NULL;
    drths_damper_close(&s->damper);
    drths_plant_close(&s->plant);
}
