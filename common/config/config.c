/* Experiment file loader: libcyaml parses the YAML into "raw" structs whose every scalar is a
 * string, then this file converts, fills defaults and validates field by field. Each key is
 * declared once, in its section's table (config_sections.h), which gives its name, kind,
 * destination, default and range; the raw structs, the libcyaml schema and the conversion of
 * plain scalars are generated from the tables.
 *
 * Why strings: libcyaml's own number parsing is lenient (it loads "2.5" into an int as 2, "-1"
 * into an unsigned as 2^64-1 and "1_000" as 1), and its enum errors do not list the valid
 * values. Taking scalars as text lets every field be checked strictly with a message that names
 * its path and what it accepts.
 *
 * The file is loaded in two passes: the second loads the matrices of the structure section
 * (config_structure.c says why).
 */
#include "common/config/config_sections.h"

#include <cyaml/cyaml.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A generous bound: a 1000 x 1000 matrix written out is about 15 MB. */
#define MAX_FILE_BYTES (64u << 20)

/* ---- paths ------------------------------------------------------------------------------- */

char *drths_cfg_join_path(const char *dir, const char *rel)
{
    if (rel[0] == '/')
        return strdup(rel);
    size_t n = strlen(dir) + 1 + strlen(rel) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, rel);
    return p;
}

/* Absolute folder of path (the file itself need not exist, for load_buffer). */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *d;
    if (!slash)
        d = strdup(".");
    else if (slash == path)
        d = strdup("/");
    else
        d = strndup(path, (size_t)(slash - path));
    if (!d)
        return NULL;
    char *abs = realpath(d, NULL);
    if (abs) {
        free(d);
        return abs;
    }
    if (d[0] == '/')
        return d;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) {
        free(d);
        return NULL;
    }
    char *j = drths_cfg_join_path(cwd, d);
    free(d);
    return j;
}

/* "host:port" or "[v6]:port", port 1..65535. */
static int check_endpoint(vctx_t *c, const char *path, const char *s)
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

/* ---- validation --------------------------------------------------------------------------- */

static int fill_ground(vctx_t *c, drths_experiment_t *x, const struct raw_ground *g)
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

static int fill_specimen(vctx_t *c, drths_experiment_t *x, const struct raw_specimen *s)
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

/* With control.mode fixed, control.command must be one the damper takes. At the top level the
 * command is named; in a channel (c->prefix set), which takes the command of the control section,
 * its damper model is. */
static int check_damper_command(vctx_t *c, const drths_experiment_t *x)
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

/* The ramp's end must be a drive the limits accept, or HOLD would drive out of them. At the top
 * level the position is named; in a channel (c->prefix set), which takes the position of the
 * physical section, its limit that leaves the position out is. */
static int check_safe_position(vctx_t *c, const drths_experiment_t *x)
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

static int fill_control(vctx_t *c, drths_experiment_t *x, const struct raw_control *ct)
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
    return check_damper_command(c, x);
}

static int fill_actuator(vctx_t *c, drths_experiment_t *x, const struct raw_actuator *a)
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
    return PARSE_RANGE(plant_scale, gain, complex_pole, a ? a->plant_scale : NULL, x);
}

static int fill_network(vctx_t *c, drths_experiment_t *x, const struct raw_top *t)
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
        (r = check_endpoint(c, "numerical.peer", x->numerical.peer)) ||
        (r = PARSE_RANGE(numerical, reorder_ticks, stability_max_cycle_s, t->numerical, x)))
        return r;

    if ((r = PARSE(physical, listen, t->physical, x)) ||
        (r = check_endpoint(c, "physical.listen", x->physical.listen)) ||
        (r = PARSE_RANGE(physical, playout_ticks, stability_min_decay_per_s, t->physical, x)))
        return r;
    if ((r = check_safe_position(c, x)))
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

/* After fill_daq (it needs the back end). lp is the path the limits are under in messages:
 * "physical." for the physical section, "" for a channel's own. own_force and own_disp say
 * whether the limit is the section's own; a channel's limit taken from the physical section is
 * not, and then the message names the channel's converter range (its own actuator section) that
 * the limit does not fit. */
static int check_limits_inside_converters(vctx_t *c, const drths_experiment_t *x, const char *lp,
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

/* physical.channels[i] into ch (the channel's view of x; see drths_experiment_channel_t). */
static int fill_channel(vctx_t *c, const drths_experiment_t *x, int i, const struct raw_channel *rc,
                        drths_experiment_channel_t *ch)
{
    int r;
    drths_experiment_t *v = &ch->exp;
    *v = *x;
    v->n_channels = 0;
    v->channels = NULL;
    v->notes = NULL;
    if (rc->name) {
        size_t n = strlen(rc->name);
        if (n == 0 || n >= DRTHS_CHANNEL_NAME_MAX)
            return drths_cfg_fail(c, -EINVAL, "name", "must be 1..%d characters (got %zu)",
                                  DRTHS_CHANNEL_NAME_MAX - 1, n);
        for (size_t k = 0; k < n; k++) {
            unsigned char ch_k = (unsigned char)rc->name[k];
            if (!isalnum(ch_k) && ch_k != '_' && ch_k != '-' && ch_k != '.')
                return drths_cfg_fail(c, -EINVAL, "name",
                                      "only letters, digits, '_', '-' and '.' (got \"%s\")",
                                      rc->name);
        }
        memcpy(ch->name, rc->name, n + 1);
    } else {
        snprintf(ch->name, sizeof ch->name, "ch%d", i + 1);
    }
    if (rc->specimen) {
        if (rc->specimen->floor)
            return drths_cfg_not_allowed(
                c, "specimen.floor",
                "in a channel (specimen.floor places the numerical site's "
                "damper, and several channels are served over OpenFresco only)");
        if ((r = fill_specimen(c, v, rc->specimen)))
            return r;
        v->specimen.floor = x->specimen.floor;
    }
    if (rc->actuator && (r = fill_actuator(c, v, rc->actuator)))
        return r;
    for (int f = F_channel_limit_displacement_m; f <= F_channel_limit_measured_displacement_m; f++)
        if (drths_cfg_raw_string(&drths_cfg_channel_spec[f], rc) &&
            (r = drths_cfg_parse_field(c, drths_cfg_channel_prefix, &drths_cfg_channel_spec[f], rc,
                                       v)))
            return r;
    if (rc->daq) {
        const struct raw_chdaq *d = rc->daq;
        const struct raw_daq_channel *const raw[4] = {d->command_out, d->current_out,
                                                      d->displacement_in, d->force_in};
        if ((r = drths_cfg_fill_daq_signals(c, v, raw, 1)))
            return r;
    }
    if ((r = check_safe_position(c, v)) || (r = check_damper_command(c, v)))
        return r;
    return check_limits_inside_converters(c, v, "", rc->limit_force_N != NULL,
                                          rc->limit_measured_displacement_m != NULL);
}

/* physical.channels: 2..DRTHS_EXPERIMENT_MAX_CHANNELS channels, unique names, and with the
 * comedi back end no signal of the board driven or read by two channels. */
static int fill_channels(vctx_t *c, drths_experiment_t *x, const struct raw_physical *p)
{
    if (!p || !p->channels)
        return 0;
    unsigned n = p->channels_count;
    if (n < 2 || n > DRTHS_EXPERIMENT_MAX_CHANNELS)
        return drths_cfg_fail(
            c, -EINVAL, "physical.channels",
            "must list 2..%d channels (got %u); leave it out for one channel (the "
            "specimen, actuator and physical sections)",
            DRTHS_EXPERIMENT_MAX_CHANNELS, n);
    x->channels_line = drths_yamlline_find(c->text, c->len, "physical.channels");
    x->channels = calloc(n, sizeof *x->channels);
    if (!x->channels)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    x->n_channels = (int)n;
    int r = 0;
    char prefix[40];
    c->prefix = prefix;
    for (int i = 0; i < (int)n && !r; i++) {
        snprintf(prefix, sizeof prefix, "physical.channels[%d].", i);
        r = fill_channel(c, x, i, &p->channels[i], &x->channels[i]);
        for (int j = 0; j < i && !r; j++)
            if (strcmp(x->channels[j].name, x->channels[i].name) == 0)
                r = drths_cfg_fail(c, -EINVAL, "name",
                                   "\"%s\" is also physical.channels[%d]'s name",
                                   x->channels[i].name, j);
        if (r || x->daq.backend != DRTHS_DAQ_BACKEND_COMEDI)
            continue;
        /* Any two outputs (or inputs) of two channels, not only the same signal's: one
         * channel's command_out on another's current_out would drive one converter twice. */
        for (int j = 0; j < i && !r; j++)
            r = drths_cfg_check_shared_converters(c, &x->channels[j].exp, &x->channels[i].exp, j);
    }
    c->prefix = NULL;
    return r;
}

int drths_experiment_n_actuators(const drths_experiment_t *exp)
{
    return exp->n_channels > 0 ? exp->n_channels : 1;
}

const drths_experiment_t *drths_experiment_actuator(const drths_experiment_t *exp, int i)
{
    return exp->n_channels > 0 ? &exp->channels[i].exp : exp;
}

const char *drths_experiment_actuator_name(const drths_experiment_t *exp, int i)
{
    return exp->n_channels > 0 ? exp->channels[i].name : "ch1";
}

int drths_experiment_check_network(const drths_experiment_t *exp, drths_error_t *err)
{
    if (exp->n_channels == 0)
        return 0;
    char line[16] = "";
    if (exp->channels_line > 0)
        snprintf(line, sizeof line, ":%d", exp->channels_line);
    return drths_error_set(err, -ENOTSUP,
                           "%s%s: physical.channels: %d channels are served over OpenFresco "
                           "only for now (drths-physical --openfresco); a numerical site drives "
                           "one channel (leave physical.channels out)",
                           exp->path, line, exp->n_channels);
}

static int fill(vctx_t *c, drths_experiment_t *x, const struct raw_top *t, matrices_t *mats)
{
    int r;
    if (!t->name || !t->name[0])
        return drths_cfg_fail(c, -EINVAL, "name",
                              "missing (required: a short name for the experiment)");
    if (!(x->name = strdup(t->name)))
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    if ((r = PARSE(top, description, t, x)) || (r = PARSE(top, rate_hz, t, x)))
        return r;
    if ((r = drths_cfg_fill_structure(c, x, t->structure, mats)) ||
        (r = fill_ground(c, x, t->ground_motion)) || (r = fill_specimen(c, x, t->specimen)) ||
        (r = fill_control(c, x, t->control)) || (r = fill_actuator(c, x, t->actuator)) ||
        (r = fill_network(c, x, t)) || (r = drths_cfg_fill_daq(c, x, t->daq)) ||
        (r = check_limits_inside_converters(c, x, "physical.", 1, 1)) ||
        (r = PARSE_RANGE(acceptance, displacement_rms_error_pct, hold_allowed, t->acceptance, x)) ||
        (r = fill_channels(c, x, t->physical))) /* last: each channel's view copies the rest */
        return r;
    return 0;
}

/* ---- load / close ------------------------------------------------------------------------ */

int drths_experiment_load_buffer(drths_experiment_t *exp, const char *data, size_t len,
                                 const char *path, drths_error_t *err)
{
    memset(exp, 0, sizeof *exp);
    vctx_t c = {.file = path, .text = data, .len = len, .err = err, .notes = &exp->notes};
    if (len == 0 || !data)
        return drths_error_set(err, -EINVAL,
                               "%s: empty file (an experiment file is a YAML "
                               "mapping: name:, structure:, ground_motion:, ...)",
                               path);
    exp->path = strdup(path);
    exp->dir = folder_of(path);
    if (!exp->path || !exp->dir) {
        drths_experiment_close(exp);
        return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
    }

    cy_log_t log = {.n = 0};
    const cyaml_config_t cfg = {
        .log_fn = drths_cfg_cy_log,
        .log_ctx = &log,
        .mem_fn = cyaml_mem,
        .log_level = CYAML_LOG_ERROR,
        /* Aliases are refused: an experiment file does not need them, and they let a small
         * file expand without bound. */
        .flags = CYAML_CFG_NO_ALIAS,
    };
    struct raw_top *top = NULL;
    cyaml_err_t e = cyaml_load_data((const uint8_t *)data, len, &cfg, &drths_cfg_top_schema,
                                    (cyaml_data_t **)&top, NULL);
    int r;
    if (e != CYAML_OK) {
        r = drths_cfg_cyaml_error(&c, e, &log);
    } else if (!top) {
        r = drths_error_set(err, -EINVAL,
                            "%s: empty file (an experiment file is a YAML "
                            "mapping: name:, structure:, ground_motion:, ...)",
                            path);
    } else {
        matrices_t mats = {{0, 0, 0}, {NULL, NULL, NULL}};
        r = fill(&c, exp, top, &mats);
        for (int i = 0; i < 3; i++)
            free(mats.out[i]);
    }
    if (top)
        cyaml_free(&cfg, &drths_cfg_top_schema, top, 0);
    if (r)
        drths_experiment_close(exp);
    return r;
}

void drths_acceptance_default(drths_acceptance_t *acc)
{
    drths_experiment_t x;
    memset(&x, 0, sizeof x);
    drths_error_t err;
    vctx_t c = {.file = "(defaults)", .err = &err};
    /* No section: every field takes its default, which cannot fail. */
    (void)drths_cfg_parse_fields(&c, drths_cfg_acceptance_prefix, drths_cfg_acceptance_spec, 0,
                                 F_acceptance_end - 1, NULL, &x);
    *acc = x.acceptance;
}

int drths_experiment_load_acceptance(drths_acceptance_t *acc, const char *path, drths_error_t *err)
{
    drths_experiment_t x;
    memset(&x, 0, sizeof x);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        return drths_error_set(err, -e, "%s: cannot open the experiment file: %s", path,
                               strerror(e));
    }
    char *buf = malloc(MAX_FILE_BYTES + 1);
    size_t len = buf ? fread(buf, 1, MAX_FILE_BYTES + 1, f) : 0;
    int bad = !buf || ferror(f) || len > MAX_FILE_BYTES;
    fclose(f);
    if (bad) {
        int code = buf ? -EINVAL : -ENOMEM;
        free(buf);
        return drths_error_set(err, code, "%s: cannot read it (at most %u bytes)", path,
                               MAX_FILE_BYTES);
    }
    vctx_t c = {.file = path, .text = buf, .len = len, .err = err};
    cy_log_t log = {.n = 0};
    const cyaml_config_t cfg = {
        .log_fn = drths_cfg_cy_log,
        .log_ctx = &log,
        .mem_fn = cyaml_mem,
        .log_level = CYAML_LOG_ERROR,
        .flags = CYAML_CFG_NO_ALIAS | CYAML_CFG_IGNORE_UNKNOWN_KEYS,
    };
    struct raw_acceptance_top *top = NULL;
    cyaml_err_t e = cyaml_load_data((const uint8_t *)buf, len, &cfg,
                                    &drths_cfg_acceptance_top_schema, (cyaml_data_t **)&top, NULL);
    int r = e != CYAML_OK
                ? drths_cfg_cyaml_error(&c, e, &log)
                : drths_cfg_parse_fields(&c, drths_cfg_acceptance_prefix, drths_cfg_acceptance_spec,
                                         0, F_acceptance_end - 1, top ? top->acceptance : NULL, &x);
    if (top)
        cyaml_free(&cfg, &drths_cfg_acceptance_top_schema, top, 0);
    free(buf);
    if (!r)
        *acc = x.acceptance;
    return r;
}

int drths_experiment_load(drths_experiment_t *exp, const char *path, drths_error_t *err)
{
    memset(exp, 0, sizeof *exp);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return drths_error_set(err, -e, "%s: cannot open the experiment file: %s", path,
                               strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return drths_error_set(err, -EINVAL, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
        close(fd);
        return drths_error_set(err, -EFBIG,
                               "%s: too large for an experiment file (%lld bytes, at most %u)",
                               path, (long long)st.st_size, MAX_FILE_BYTES);
    }
    size_t len = (size_t)st.st_size;
    char *buf = malloc(len + 1);
    if (!buf) {
        close(fd);
        return drths_error_set(err, -ENOMEM, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < len) {
        ssize_t k = read(fd, buf + got, len - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            free(buf);
            return drths_error_set(err, -e, "%s: cannot read: %s", path, strerror(e));
        }
        got += (size_t)k;
    }
    close(fd);
    buf[len] = '\0';
    int r = drths_experiment_load_buffer(exp, buf, len, path, err);
    free(buf);
    return r;
}

void drths_experiment_close(drths_experiment_t *x)
{
    if (!x)
        return;
    free(x->path);
    free(x->notes);
    free(x->dir);
    free(x->name);
    free(x->description);
    free(x->structure.floor_mass_kg);
    free(x->structure.storey_stiffness_N_per_m);
    free(x->structure.mass_kg);
    free(x->structure.stiffness_N_per_m);
    free(x->structure.damping_N_s_per_m);
    free(x->structure.damping.ratio);
    free(x->ground_motion.file);
    free(x->ground_motion.record_path);
    free(x->link.key_file);
    free(x->link.key_path);
    free(x->numerical.peer);
    free(x->physical.listen);
    free(x->output.directory);
    free(x->daq.device);
    free(x->daq.calibration_file);
    free(x->daq.calibration_path);
    free(x->channels); /* the views own nothing */
    memset(x, 0, sizeof *x);
}
