/* The checks of the sections other than structure, daq and the channels, each section's own
 * (ground motion, specimen, control, actuator, link, numerical, physical, output) and those
 * across sections: a fixed damper command against the damper model, the safe position against
 * the limits, the limits against the virtual converters' full scale, the loop delay against
 * the playout buffer. A field that does not apply to the section's mode is ignored with a note.
 * The order of the checks decides which of several errors is reported first.
 */
#include "common/config/config_sections.h"
#include "common/config/setup.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "host:port" or "[v6]:port", port 1..65535. */
int drths_cfg_check_endpoint(vctx_t *c, const char *path, const char *s)
{
    const char *colon;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close == s + 1 || close[1] != ':')
            return drths_cfg_fail(c, -EINVAL, path, "must be host:port or [IPv6]:port (got \"%s\")",
                                  s);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s)))
            return drths_cfg_fail(
                c, -EINVAL, path,
                "must be host:port or [IPv6]:port, an IPv6 address in brackets (got \"%s\")", s);
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || port < 1 || port > 65535)
        return drths_cfg_fail(c, -EINVAL, path, "port must be in 1..65535 (got \"%s\")", s);
    return 0;
}

int drths_cfg_fill_ground(vctx_t *c, drths_experiment_t *x, const struct raw_ground *g)
{
    int r;
    if (!g)
        return drths_cfg_fail(c, -EINVAL, "ground_motion", "missing (required)");
    if ((r = PARSE(ground, kind, g, x)) || (r = PARSE(ground, duration_s, g, x)) ||
        (r = PARSE(ground, tail_s, g, x)))
        return r;
    if (x->ground_motion.kind == DRTHS_GROUND_MOTION_RECORD) {
        static const char *why = "(it applies to ground_motion.kind white-noise; kind is record)";
        if ((g->band_hz && (r = drths_cfg_ignored(c, "ground_motion.band_hz", why))) ||
            (g->rms_m_s2 && (r = drths_cfg_ignored(c, "ground_motion.rms_m_s2", why))) ||
            (g->seed && (r = drths_cfg_ignored(c, "ground_motion.seed", why))))
            return r;
        if (!g->file || !g->file[0])
            return drths_cfg_fail(c, -EINVAL, "ground_motion.file",
                                  "missing (required for kind record)");
        if ((r = PARSE_RANGE(ground, format, dt_s, g, x)))
            return r;
        x->ground_motion.file = strdup(g->file);
        x->ground_motion.record_path = drths_cfg_join_path(x->dir, g->file);
        if (!x->ground_motion.file || !x->ground_motion.record_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
        /* Checked now so that a typing error in the path stops the run before anything starts. */
        int fd = open(x->ground_motion.record_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            return drths_cfg_fail(c, -e, "ground_motion.file", "cannot open \"%s\": %s",
                                  x->ground_motion.record_path, strerror(e));
        }
        struct stat st;
        int bad = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode);
        close(fd);
        if (bad)
            return drths_cfg_fail(c, -EINVAL, "ground_motion.file", "\"%s\" is not a regular file",
                                  x->ground_motion.record_path);
    } else {
        static const char *why = "(it applies to ground_motion.kind record; kind is white-noise)";
        if ((g->file && (r = drths_cfg_ignored(c, "ground_motion.file", why))) ||
            (g->format && (r = drths_cfg_ignored(c, "ground_motion.format", why))) ||
            (g->units && (r = drths_cfg_ignored(c, "ground_motion.units", why))) ||
            (g->column && (r = drths_cfg_ignored(c, "ground_motion.column", why))) ||
            (g->scale &&
             (r = drths_cfg_ignored(c, "ground_motion.scale",
                                    "(it applies to ground_motion.kind record; white-noise "
                                    "takes its amplitude from rms_m_s2)"))) ||
            (g->time_compression &&
             (r = drths_cfg_ignored(c, "ground_motion.time_compression", why))) ||
            (g->dt_s && (r = drths_cfg_ignored(c, "ground_motion.dt_s", why))))
            return r;
        x->ground_motion.format = DRTHS_RECORD_FORMAT_AUTO;
        x->ground_motion.units = DRTHS_ACCEL_M_S2;
        x->ground_motion.column = 1;
        x->ground_motion.scale = 1.0;
        x->ground_motion.time_compression = 1.0;
        if (!(x->ground_motion.duration_s > 0))
            return drths_cfg_fail(c, -EINVAL, "ground_motion.duration_s",
                                  "must be > 0 for white-noise (got %g)",
                                  x->ground_motion.duration_s);
        x->ground_motion.band_hz[0] = 0;
        x->ground_motion.band_hz[1] = 30;
        if (g->band_hz) {
            if (g->band_hz_count != 2)
                return drths_cfg_fail(c, -EINVAL, "ground_motion.band_hz",
                                      "must be two values [low, high] in Hz (got %u)",
                                      g->band_hz_count);
            if ((r = drths_cfg_get_double(c, "ground_motion.band_hz[0]", g->band_hz[0], 0,
                                          &x->ground_motion.band_hz[0])) ||
                (r = drths_cfg_get_double(c, "ground_motion.band_hz[1]", g->band_hz[1], 0,
                                          &x->ground_motion.band_hz[1])))
                return r;
        }
        double lo = x->ground_motion.band_hz[0], hi = x->ground_motion.band_hz[1];
        if ((r = drths_cfg_check_ge0(c, "ground_motion.band_hz[0]", lo)))
            return r;
        if (!(hi > lo) || hi > x->rate_hz / 2)
            return drths_cfg_fail(c, -EINVAL, "ground_motion.band_hz[1]",
                                  "must be > band_hz[0] (%g) and <= rate_hz / 2 (%g) (got %g)", lo,
                                  x->rate_hz / 2, hi);
        if ((r = PARSE(ground, rms_m_s2, g, x)) || (r = PARSE(ground, seed, g, x)))
            return r;
    }
    return 0;
}

int drths_cfg_fill_specimen(vctx_t *c, drths_experiment_t *x, const struct raw_specimen *s)
{
    int r;
    if (!s)
        return drths_cfg_fail(c, -EINVAL, "specimen", "missing (required)");
    const field_t *floor = SPEC(specimen, floor); /* its upper bound is n_dof */
    if ((r = drths_cfg_get_int(c, "specimen.floor", s->floor, (long)floor->def, (long)floor->lo,
                               x->n_dof, &x->specimen.floor)))
        return r;
    if (!s->damper)
        return drths_cfg_fail(c, -EINVAL, "specimen.damper", "missing (required)");
    if ((r = PARSE(damper, model, s->damper, x)))
        return r;
    if (x->specimen.damper.model == DRTHS_DAMPER_LINEAR_SPRING) {
        if (!s->damper->stiffness_N_per_m)
            return drths_cfg_fail(c, -EINVAL, "specimen.damper.stiffness_N_per_m",
                                  "missing (required)");
        if ((r = PARSE(damper, stiffness_N_per_m, s->damper, x)))
            return r;
    } else if (s->damper->stiffness_N_per_m &&
               (r = drths_cfg_ignored(
                    c, "specimen.damper.stiffness_N_per_m",
                    "(it applies to specimen.damper.model linear-spring only)"))) {
        return r;
    }
    if ((r = PARSE(damper, substeps, s->damper, x)) ||
        (r = PARSE_RANGE(true_scale, alpha, n, s->true_scale, x)))
        return r;
    return 0;
}

int drths_cfg_check_damper_command(vctx_t *c, const drths_experiment_t *x)
{
    if (x->control.mode != DRTHS_CONTROL_FIXED)
        return 0;
    double max = drths_experiment_command_max(x->specimen.damper.model);
    if (!(x->control.command < 0 || x->control.command > max))
        return 0;
    if (c->prefix && c->prefix[0])
        return drths_cfg_fail(c, -EINVAL, "specimen.damper.model",
                              "%s takes a damper command of 0..%g, below control.command (%g)",
                              drths_damper_model_name(x->specimen.damper.model), max,
                              x->control.command);
    const char *unit = x->specimen.damper.model == DRTHS_DAMPER_PHILLIPS2013  ? " A"
                       : x->specimen.damper.model == DRTHS_DAMPER_SPENCER1997 ? " V"
                                                                              : "";
    return drths_cfg_fail(c, -EINVAL, "control.command",
                          "must be in 0..%g%s for damper model %s (got %g)", max, unit,
                          drths_damper_model_name(x->specimen.damper.model), x->control.command);
}

int drths_cfg_check_safe_position(vctx_t *c, const drths_experiment_t *x)
{
    double pos = x->physical.safe_position_m, drive = x->physical.limit_drive_m,
           measured = x->physical.limit_measured_displacement_m;
    int inside_drive = fabs(pos) < drive;
    if (inside_drive && fabs(pos) < measured)
        return 0;
    if (c->prefix && c->prefix[0])
        return drths_cfg_fail(
            c, -EINVAL, inside_drive ? "limit_measured_displacement_m" : "limit_drive_m",
            "must lie beyond physical.safe_position_m (%g), where HOLD may ramp to "
            "(limit_drive_m %g, limit_measured_displacement_m %g)",
            pos, drive, measured);
    return drths_cfg_fail(c, -EINVAL, "physical.safe_position_m",
                          "must lie inside physical.limit_drive_m (%g) and "
                          "physical.limit_measured_displacement_m (%g) (got %g)",
                          drive, measured, pos);
}

int drths_cfg_check_envelope(vctx_t *c, const drths_experiment_t *x)
{
    const int ch = c->prefix && c->prefix[0];
    const double v = x->physical.limit_drive_velocity_m_s,
                 a = x->physical.limit_drive_acceleration_m_s2;
    if (v < x->physical.limit_velocity_m_s)
        return drths_cfg_fail(c, -EINVAL,
                              ch ? "limit_drive_velocity_m_s" : "physical.limit_drive_velocity_m_s",
                              "must be at least limit_velocity_m_s (%g m/s): a command moving that "
                              "fast needs a drive as fast (got %g)",
                              x->physical.limit_velocity_m_s, v);
    if (!(x->physical.ramp_rate_m_s < v))
        return drths_cfg_fail(c, -EINVAL,
                              ch ? "limit_drive_velocity_m_s" : "physical.limit_drive_velocity_m_s",
                              "must exceed physical.ramp_rate_m_s (%g m/s), the HOLD ramp's "
                              "speed (got %g)",
                              x->physical.ramp_rate_m_s, v);
    if (a < x->physical.feedforward_max_acceleration_m_s2)
        return drths_cfg_fail(
            c, -EINVAL,
            ch ? "limit_drive_acceleration_m_s2" : "physical.limit_drive_acceleration_m_s2",
            "must be at least physical.feedforward_max_acceleration_m_s2 (%g m/s^2), the "
            "acceleration the commands may have (got %g)",
            x->physical.feedforward_max_acceleration_m_s2, a);
    if (!(x->physical.limit_drive_offset_m < x->physical.limit_drive_m))
        return drths_cfg_fail(c, -EINVAL,
                              ch ? "limit_drive_offset_m" : "physical.limit_drive_offset_m",
                              "must be below limit_drive_m (%g m) (got %g)",
                              x->physical.limit_drive_m, x->physical.limit_drive_offset_m);
    return 0;
}

int drths_cfg_fill_control(vctx_t *c, drths_experiment_t *x, const struct raw_control *ct)
{
    int r;
    if ((r = PARSE(control, mode, ct, x)))
        return r;
    x->control.q_disp = x->control.q_acc = x->control.r = 0;
    char why[128];
    snprintf(why, sizeof why, "(it applies to control.mode clipped-optimal only; mode is %s)",
             drths_control_mode_name(x->control.mode));
    for (int i = F_control_q_disp; i <= F_control_r; i++) {
        if (x->control.mode != DRTHS_CONTROL_CLIPPED_OPTIMAL) {
            char path[64];
            if (drths_cfg_raw_string(&drths_cfg_control_spec[i], ct) &&
                (r = drths_cfg_ignored(c,
                                       drths_cfg_field_path(path, sizeof path,
                                                            drths_cfg_control_prefix,
                                                            &drths_cfg_control_spec[i]),
                                       why)))
                return r;
            continue;
        }
        if ((r = drths_cfg_parse_field(c, drths_cfg_control_prefix, &drths_cfg_control_spec[i], ct,
                                       x)))
            return r;
    }
    if (x->control.mode == DRTHS_CONTROL_CLIPPED_OPTIMAL &&
        x->control.q_disp + x->control.q_acc <= 0)
        return drths_cfg_fail(c, -EINVAL, "control.q_disp",
                              "q_disp and q_acc are both 0: the design would weigh nothing");
    if (x->control.mode != DRTHS_CONTROL_FIXED) {
        snprintf(why, sizeof why, "(it applies to control.mode fixed only; mode is %s)",
                 drths_control_mode_name(x->control.mode));
        x->control.command = 0;
        return ct && ct->command ? drths_cfg_ignored(c, "control.command", why) : 0;
    }
    if (!(ct && ct->command))
        return drths_cfg_fail(c, -EINVAL, "control.command", "missing (required)");
    if ((r = PARSE(control, command, ct, x)))
        return r;
    return drths_cfg_check_damper_command(c, x);
}

int drths_cfg_fill_actuator(vctx_t *c, drths_experiment_t *x, const struct raw_actuator *a)
{
    int r;
    if ((r = PARSE_RANGE(actuator, plant, adc_bits, a, x)))
        return r;
    if (x->actuator.adc_bits != 0 && x->actuator.adc_bits < 8)
        return drths_cfg_fail(c, -EINVAL, "actuator.adc_bits",
                              "must be 0 (no quantisation) or 8..24 (got %d)",
                              x->actuator.adc_bits);
    if ((r = PARSE_RANGE(actuator, displacement_range_m, adaptive_bound, a, x)))
        return r;
    if (x->actuator.adaptive_bound != 0.0 && x->actuator.adaptive_bound < 1.0)
        return drths_cfg_fail(c, -EINVAL, "actuator.adaptive_bound",
                              "must be 0 (derived from actuator.adaptive_range) or 1..100 (got %g)",
                              x->actuator.adaptive_bound);
    if ((r = PARSE_RANGE(plant_scale, gain, complex_pole, a ? a->plant_scale : NULL, x)))
        return r;
    if ((r = PARSE_RANGE(adaptive_range, gain_min, complex_pole_max, a ? a->adaptive_range : NULL,
                         x)))
        return r;
    drths_comp_plant_range_t range;
    drths_setup_adaptive_range(x, &range);
    static const char *const names[4] = {"gain", "bandwidth", "real_pole", "complex_pole"};
    for (int i = 0; i < 4; i++)
        if (range.lo[i] > range.hi[i]) {
            char key[64];
            snprintf(key, sizeof key, "actuator.adaptive_range.%s_min", names[i]);
            return drths_cfg_fail(c, -EINVAL, key, "%g exceeds %s_max %g", range.lo[i], names[i],
                                  range.hi[i]);
        }
    return 0;
}

int drths_cfg_fill_network(vctx_t *c, drths_experiment_t *x, const struct raw_top *t)
{
    int r;
    const struct raw_link *l = t->link;
    if ((r = PARSE_RANGE(link, redundancy, loop_delay_ticks, l, x)))
        return r;
    if (l && l->key_file && l->key_file[0]) {
        x->link.key_file = strdup(l->key_file);
        x->link.key_path = drths_cfg_join_path(x->dir, l->key_file);
        if (!x->link.key_file || !x->link.key_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    }

    if ((r = PARSE(numerical, peer, t->numerical, x)) ||
        (r = drths_cfg_check_endpoint(c, "numerical.peer", x->numerical.peer)) ||
        (r = PARSE_RANGE(numerical, reorder_ticks, stability_max_cycle_s, t->numerical, x)))
        return r;
    if (t->numerical && t->numerical->smith_model && t->numerical->smith_model[0]) {
        x->numerical.smith_model = strdup(t->numerical->smith_model);
        x->numerical.smith_model_path = drths_cfg_join_path(x->dir, t->numerical->smith_model);
        if (!x->numerical.smith_model || !x->numerical.smith_model_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    }

    if ((r = PARSE(physical, listen, t->physical, x)) ||
        (r = drths_cfg_check_endpoint(c, "physical.listen", x->physical.listen)) ||
        (r = PARSE_RANGE(physical, playout_ticks, stability_min_decay_per_s, t->physical, x)))
        return r;
    if ((r = drths_cfg_check_safe_position(c, x)) || (r = drths_cfg_check_envelope(c, x)))
        return r;
    /* 0 = one second of commands, at least 300 ticks: commands wait in the buffer for up to
     * L ticks, and an epoch may raise L to a round trip of several hundred ms. */
    if (x->physical.playout_ticks == 0) {
        double one_s = ceil(x->rate_hz);
        x->physical.playout_ticks = one_s > 300.0 ? (int)fmin(one_s, 1000000.0) : 300;
    } else if (x->physical.playout_ticks < 10) {
        return drths_cfg_fail(c, -EINVAL, "physical.playout_ticks",
                              "must be 0 (one second of ticks) or 10..1000000 (got %d)",
                              x->physical.playout_ticks);
    }
    /* The concealment budget in ticks: max_concealed_ticks when the file gives it (files
     * written before max_concealed_ms keep their meaning), else max_concealed_ms at rate_hz,
     * rounded down so that the budget never exceeds the time written. */
    if (x->physical.max_concealed_ticks < 0)
        x->physical.max_concealed_ticks =
            (int)fmin(floor(x->physical.max_concealed_ms * 1e-3 * x->rate_hz + 1e-9), 1e8);
    /* A command is sent L ticks ahead of its tick and waits in the playout buffer meanwhile. */
    if (x->link.loop_delay_ticks >= x->physical.playout_ticks)
        return drths_cfg_fail(
            c, -EINVAL, "link.loop_delay_ticks",
            "must be < physical.playout_ticks (%d), which must hold L ticks of commands "
            "(got %d)",
            x->physical.playout_ticks, x->link.loop_delay_ticks);

    if ((r = PARSE(output, directory, t->output, x)))
        return r;
    if (!x->output.directory[0])
        return drths_cfg_fail(c, -EINVAL, "output.directory", "must not be empty");
    return 0;
}

int drths_cfg_check_limits_inside_converters(vctx_t *c, const drths_experiment_t *x, const char *lp,
                                             int own_force, int own_disp)
{
    /* A limit at or beyond its converter's full scale can never trip: a saturated converter
     * reads its end value (a 16-bit converter over +/- 250 kN reads 249 992 N at most), so the
     * limit must lie inside the range the virtual specimen's converters read (with adc_bits;
     * a board's ranges are known only when it is opened, where a reading at an end is itself a
     * HOLD). */
    if (x->daq.backend != DRTHS_DAQ_BACKEND_VIRTUAL || x->actuator.adc_bits <= 0)
        return 0;
    const struct {
        const char *limit, *range;
        double limit_v, range_v;
        int own;
    } k[2] = {
        {"limit_force_N", "force_range_N", x->physical.limit_force_N, x->actuator.force_range_N,
         own_force},
        {"limit_measured_displacement_m", "displacement_range_m",
         x->physical.limit_measured_displacement_m, x->actuator.displacement_range_m, own_disp},
    };
    char path[96];
    for (int i = 0; i < 2; i++) {
        if (k[i].limit_v < k[i].range_v)
            continue;
        if (!k[i].own) {
            snprintf(path, sizeof path, "actuator.%s", k[i].range);
            return drths_cfg_fail(
                c, -EINVAL, path,
                "must be above physical.%s (%g), which this channel takes, or the limit "
                "can never trip: the converter's full scale (got %g)",
                k[i].limit, k[i].limit_v, k[i].range_v);
        }
        snprintf(path, sizeof path, "%s%s", lp, k[i].limit);
        return drths_cfg_fail(
            c, -EINVAL, path,
            "must be below actuator.%s (%g), the converter's full scale, or it can never "
            "trip (got %g)",
            k[i].range, k[i].range_v, k[i].limit_v);
    }
    return 0;
}
