#include "common/config/setup.h"

#include <errno.h>
#include <string.h>

static drths_gm_units_t gm_units(drths_accel_units_t u)
{
    switch (u) {
    case DRTHS_ACCEL_M_S2:
        return DRTHS_GM_UNITS_M_S2;
    case DRTHS_ACCEL_CM_S2:
        return DRTHS_GM_UNITS_CM_S2;
    case DRTHS_ACCEL_MM_S2:
        return DRTHS_GM_UNITS_MM_S2;
    default:
        return DRTHS_GM_UNITS_G;
    }
}

static drths_gm_format_t gm_format(drths_record_format_t f)
{
    switch (f) {
    case DRTHS_RECORD_FORMAT_AT2:
        return DRTHS_GM_AT2;
    case DRTHS_RECORD_FORMAT_TWO_COLUMN:
        return DRTHS_GM_TWO_COLUMN;
    case DRTHS_RECORD_FORMAT_CSV:
        return DRTHS_GM_CSV;
    default:
        return DRTHS_GM_AUTO;
    }
}

int drths_setup_ground_motion(const drths_experiment_t *exp, drths_record_t *rec,
                              drths_error_t *err)
{
    const __typeof__(exp->ground_motion) *g = &exp->ground_motion;
    double dt = 1.0 / exp->rate_hz;
    memset(rec, 0, sizeof *rec);
    if (g->kind == DRTHS_GROUND_MOTION_WHITE_NOISE) {
        int rc = drths_record_white_noise(rec, dt, g->duration_s, g->band_hz[0], g->band_hz[1],
                                          g->rms_m_s2, g->seed, err);
        if (rc)
            return drths_error_prefix(err, rc, "ground_motion");
        if (g->tail_s > 0) {
            drths_record_t raw = *rec;
            rc = drths_record_resample(rec, &raw, dt, g->tail_s, err);
            drths_record_close(&raw);
        }
        return rc;
    }
    drths_gm_options_t o;
    drths_gm_options_default(&o);
    o.format = gm_format(g->format);
    o.units = gm_units(g->units);
    o.column = g->column;
    o.scale = g->scale;
    o.time_compression = g->time_compression;
    o.duration_s = g->duration_s;
    o.dt_s = g->dt_s;
    drths_record_t raw;
    int rc = drths_record_load(&raw, g->record_path, &o, err);
    if (rc)
        return drths_error_prefix(err, rc, "ground_motion.file");
    rc = drths_record_resample(rec, &raw, dt, g->tail_s, err);
    drths_record_close(&raw);
    return rc ? drths_error_prefix(err, rc, "ground_motion") : 0;
}

void drths_setup_damper_nominal(const drths_experiment_t *exp, drths_damper_params_t *p)
{
    drths_damper_params_preset(p, exp->specimen.damper.model);
    if (exp->specimen.damper.model == DRTHS_DAMPER_LINEAR_SPRING)
        p->stiffness_N_per_m = exp->specimen.damper.stiffness_N_per_m;
    p->substeps = exp->specimen.damper.substeps;
}

void drths_setup_damper_true(const drths_experiment_t *exp, drths_damper_params_t *p)
{
    drths_setup_damper_nominal(exp, p);
    const __typeof__(exp->specimen.true_scale) *t = &exp->specimen.true_scale;
    drths_damper_params_scale(p, t->alpha, t->c0, t->c1, t->gamma_beta, t->A);
    /* The exponent of the hysteresis; only the Bouc-Wen models have one. */
    if (p->model == DRTHS_DAMPER_PHILLIPS2013 || p->model == DRTHS_DAMPER_SPENCER1997)
        p->n *= t->n;
}

void drths_setup_specimen(const drths_experiment_t *exp, drths_specimen_params_t *p)
{
    drths_specimen_params_default(p, exp->specimen.damper.model);
    drths_setup_damper_true(exp, &p->damper);
    p->plant_enabled = exp->actuator.plant == DRTHS_ACTUATOR_PLANT_THREE_POLE;
    p->noise_disp_m = exp->actuator.noise_displacement_m;
    p->noise_force_N = exp->actuator.noise_force_N;
    p->adc_bits = exp->actuator.adc_bits;
    p->disp_range_m = exp->actuator.displacement_range_m;
    p->force_range_N = exp->actuator.force_range_N;
    p->io_delay_ticks = exp->actuator.io_delay_ticks;
    p->seed = exp->actuator.seed;
    p->plant_scale = (drths_plant_scale_t){
        exp->actuator.plant_scale.gain, exp->actuator.plant_scale.bandwidth,
        exp->actuator.plant_scale.real_pole, exp->actuator.plant_scale.complex_pole};
}

int drths_setup_passive_command(const drths_experiment_t *exp, double *command,
                                drths_error_t *err)
{
    switch (exp->control.mode) {
    case DRTHS_CONTROL_PASSIVE_OFF:
        *command = 0.0;
        return 0;
    case DRTHS_CONTROL_PASSIVE_ON:
        *command = drths_experiment_command_max(exp->specimen.damper.model);
        return 0;
    case DRTHS_CONTROL_FIXED:
        *command = exp->control.command;
        return 0;
    default:
        return drths_error_set(err, -ENOTSUP,
                               "control.mode: %s is not available yet (use passive-off, "
                               "passive-on or fixed)",
                               drths_control_mode_name(exp->control.mode));
    }
}

void drths_setup_adaptive_range(const drths_experiment_t *exp, drths_comp_plant_range_t *r)
{
    const __typeof__(exp->actuator.adaptive_range) *a = &exp->actuator.adaptive_range;
    *r = (drths_comp_plant_range_t){
        .lo = {a->gain_min, a->bandwidth_min, a->real_pole_min, a->complex_pole_min},
        .hi = {a->gain_max, a->bandwidth_max, a->real_pole_max, a->complex_pole_max},
    };
}
