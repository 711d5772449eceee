/* Experiment file loader: libcyaml parses the YAML into "raw" structs whose every scalar is a
 * string, then this file converts, fills defaults and validates field by field.
 *
 * Why strings: libcyaml's own number parsing is lenient (it loads "2.5" into an int as 2, "-1"
 * into an unsigned as 2^64-1 and "1_000" as 1), and its enum errors do not list the valid
 * values. Taking scalars as text lets every field be checked strictly with a message that names
 * its path and what it accepts.
 *
 * Why two passes: libcyaml cannot load a sequence of variable-length sequences, which is what a
 * matrix written as a list of rows is. The first pass loads everything else and only counts the
 * rows of each matrix (entries of type CYAML_IGNORE); the second pass loads the matrices with a
 * schema built at run time whose rows are fixed sequences as long as the matrix has rows, so a
 * row of the wrong length is reported as "not square" by libcyaml itself.
 */
#include "config/config.h"

#include <cyaml/cyaml.h>

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
#define SYMMETRY_TOL 1e-9
#define G_M_S2 9.80665

/* ---- raw structs, as libcyaml loads them ------------------------------------------------ */

struct raw_damping {
    char *kind;
    char **ratio;
    unsigned ratio_count;
    char **modes;
    unsigned modes_count;
};

struct raw_structure {
    char *model;
    char **floor_mass_kg;
    unsigned floor_mass_kg_count;
    char **storey_stiffness_N_per_m;
    unsigned storey_stiffness_N_per_m_count;
    void **mass_kg; /* pass 1: rows counted only */
    unsigned mass_kg_count;
    void **stiffness_N_per_m;
    unsigned stiffness_N_per_m_count;
    void **damping_N_s_per_m;
    unsigned damping_N_s_per_m_count;
    struct raw_damping *damping;
    char *integrator;
};

struct raw_ground {
    char *kind, *file, *format, *units, *column, *scale, *time_compression, *duration_s, *tail_s;
    char **band_hz;
    unsigned band_hz_count;
    char *rms_m_s2, *seed;
};

struct raw_damper {
    char *model, *stiffness_N_per_m, *substeps;
};

struct raw_true_scale {
    char *alpha, *c0, *c1, *gamma_beta, *A;
};

struct raw_specimen {
    char *floor;
    struct raw_damper *damper;
    struct raw_true_scale *true_scale;
};

struct raw_control {
    char *mode, *command, *q_disp, *q_acc, *r;
};

struct raw_actuator {
    char *plant, *compensation, *noise_displacement_m, *noise_force_N, *adc_bits,
        *displacement_range_m, *force_range_N, *io_delay_ticks, *seed;
};

struct raw_link {
    char *redundancy, *probes, *quantile, *safety_margin_ticks, *loop_delay_ticks, *key_file;
};

struct raw_numerical {
    char *peer, *reorder_ticks, *smith;
};

struct raw_physical {
    char *listen, *playout_ticks, *max_concealed_ticks, *watchdog_ms, *limit_displacement_m,
        *limit_velocity_m_s, *limit_force_N, *limit_drive_m, *limit_measured_displacement_m,
        *hold, *safe_position_m, *ramp_rate_m_s, *feedforward_max_acceleration_m_s2,
        *feedforward_max_jerk_m_s3;
};

struct raw_output {
    char *directory;
};

struct raw_daq_channel {
    char *subdevice, *channel, *range, *aref, *units_per_volt, *offset;
};

struct raw_daq {
    char *backend, *device;
    struct raw_daq_channel *command_out, *current_out, *displacement_in, *force_in;
    char *calibration_file;
};

struct raw_top {
    char *name, *description, *rate_hz;
    struct raw_structure *structure;
    struct raw_ground *ground_motion;
    struct raw_specimen *specimen;
    struct raw_control *control;
    struct raw_actuator *actuator;
    struct raw_link *link;
    struct raw_numerical *numerical;
    struct raw_physical *physical;
    struct raw_output *output;
    struct raw_daq *daq;
};

/* Pass 2: the matrices, as rows of n strings each. */
struct raw2_structure {
    char ***mass_kg;
    unsigned mass_kg_count;
    char ***stiffness_N_per_m;
    unsigned stiffness_N_per_m_count;
    char ***damping_N_s_per_m;
    unsigned damping_N_s_per_m_count;
};

struct raw2_top {
    struct raw2_structure *structure;
};

/* ---- schema ------------------------------------------------------------------------------ */

#define OPT (CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL)
#define STR(type, m) CYAML_FIELD_STRING_PTR(#m, OPT, type, m, 0, CYAML_UNLIMITED)
#define SEQ(type, m, entry) CYAML_FIELD_SEQUENCE(#m, OPT, type, m, entry, 0, CYAML_UNLIMITED)
#define MAP(type, m, fields) CYAML_FIELD_MAPPING_PTR(#m, OPT, type, m, fields)

static const cyaml_schema_value_t string_entry = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};
static const cyaml_schema_value_t ignore_entry = {
    .type = CYAML_IGNORE,
    .flags = CYAML_FLAG_DEFAULT,
    .data_size = 0,
};

static const cyaml_schema_field_t damping_fields[] = {
    STR(struct raw_damping, kind),
    SEQ(struct raw_damping, ratio, &string_entry),
    SEQ(struct raw_damping, modes, &string_entry),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t structure_fields[] = {
    STR(struct raw_structure, model),
    SEQ(struct raw_structure, floor_mass_kg, &string_entry),
    SEQ(struct raw_structure, storey_stiffness_N_per_m, &string_entry),
    SEQ(struct raw_structure, mass_kg, &ignore_entry),
    SEQ(struct raw_structure, stiffness_N_per_m, &ignore_entry),
    SEQ(struct raw_structure, damping_N_s_per_m, &ignore_entry),
    MAP(struct raw_structure, damping, damping_fields),
    STR(struct raw_structure, integrator),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t ground_fields[] = {
    STR(struct raw_ground, kind),
    STR(struct raw_ground, file),
    STR(struct raw_ground, format),
    STR(struct raw_ground, units),
    STR(struct raw_ground, column),
    STR(struct raw_ground, scale),
    STR(struct raw_ground, time_compression),
    STR(struct raw_ground, duration_s),
    STR(struct raw_ground, tail_s),
    SEQ(struct raw_ground, band_hz, &string_entry),
    STR(struct raw_ground, rms_m_s2),
    STR(struct raw_ground, seed),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t damper_fields[] = {
    STR(struct raw_damper, model),
    STR(struct raw_damper, stiffness_N_per_m),
    STR(struct raw_damper, substeps),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t true_scale_fields[] = {
    STR(struct raw_true_scale, alpha),
    STR(struct raw_true_scale, c0),
    STR(struct raw_true_scale, c1),
    STR(struct raw_true_scale, gamma_beta),
    STR(struct raw_true_scale, A),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t specimen_fields[] = {
    STR(struct raw_specimen, floor),
    MAP(struct raw_specimen, damper, damper_fields),
    MAP(struct raw_specimen, true_scale, true_scale_fields),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t control_fields[] = {
    STR(struct raw_control, mode),
    STR(struct raw_control, command),
    STR(struct raw_control, q_disp),
    STR(struct raw_control, q_acc),
    STR(struct raw_control, r),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t actuator_fields[] = {
    STR(struct raw_actuator, plant),
    STR(struct raw_actuator, compensation),
    STR(struct raw_actuator, noise_displacement_m),
    STR(struct raw_actuator, noise_force_N),
    STR(struct raw_actuator, adc_bits),
    STR(struct raw_actuator, displacement_range_m),
    STR(struct raw_actuator, force_range_N),
    STR(struct raw_actuator, io_delay_ticks),
    STR(struct raw_actuator, seed),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t link_fields[] = {
    STR(struct raw_link, redundancy),
    STR(struct raw_link, probes),
    STR(struct raw_link, quantile),
    STR(struct raw_link, safety_margin_ticks),
    STR(struct raw_link, loop_delay_ticks),
    /* "key_file: null" (or ~, or nothing) means no key file. */
    CYAML_FIELD_STRING_PTR("key_file", CYAML_FLAG_POINTER_NULL_STR | CYAML_FLAG_OPTIONAL,
                           struct raw_link, key_file, 0, CYAML_UNLIMITED),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t numerical_fields[] = {
    STR(struct raw_numerical, peer),
    STR(struct raw_numerical, reorder_ticks),
    STR(struct raw_numerical, smith),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t physical_fields[] = {
    STR(struct raw_physical, listen),
    STR(struct raw_physical, playout_ticks),
    STR(struct raw_physical, max_concealed_ticks),
    STR(struct raw_physical, watchdog_ms),
    STR(struct raw_physical, limit_displacement_m),
    STR(struct raw_physical, limit_velocity_m_s),
    STR(struct raw_physical, limit_force_N),
    STR(struct raw_physical, limit_drive_m),
    STR(struct raw_physical, limit_measured_displacement_m),
    STR(struct raw_physical, hold),
    STR(struct raw_physical, safe_position_m),
    STR(struct raw_physical, ramp_rate_m_s),
    STR(struct raw_physical, feedforward_max_acceleration_m_s2),
    STR(struct raw_physical, feedforward_max_jerk_m_s3),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t output_fields[] = {
    STR(struct raw_output, directory),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t daq_channel_fields[] = {
    STR(struct raw_daq_channel, subdevice),
    STR(struct raw_daq_channel, channel),
    STR(struct raw_daq_channel, range),
    STR(struct raw_daq_channel, aref),
    STR(struct raw_daq_channel, units_per_volt),
    STR(struct raw_daq_channel, offset),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t daq_fields[] = {
    STR(struct raw_daq, backend),
    STR(struct raw_daq, device),
    MAP(struct raw_daq, command_out, daq_channel_fields),
    MAP(struct raw_daq, current_out, daq_channel_fields),
    MAP(struct raw_daq, displacement_in, daq_channel_fields),
    MAP(struct raw_daq, force_in, daq_channel_fields),
    /* "calibration_file: null" (or ~, or nothing) means comedilib's default path. */
    CYAML_FIELD_STRING_PTR("calibration_file", CYAML_FLAG_POINTER_NULL_STR | CYAML_FLAG_OPTIONAL,
                           struct raw_daq, calibration_file, 0, CYAML_UNLIMITED),
    CYAML_FIELD_END,
};

static const cyaml_schema_field_t top_fields[] = {
    STR(struct raw_top, name),
    STR(struct raw_top, description),
    STR(struct raw_top, rate_hz),
    MAP(struct raw_top, structure, structure_fields),
    MAP(struct raw_top, ground_motion, ground_fields),
    MAP(struct raw_top, specimen, specimen_fields),
    MAP(struct raw_top, control, control_fields),
    MAP(struct raw_top, actuator, actuator_fields),
    MAP(struct raw_top, link, link_fields),
    MAP(struct raw_top, numerical, numerical_fields),
    MAP(struct raw_top, physical, physical_fields),
    MAP(struct raw_top, output, output_fields),
    MAP(struct raw_top, daq, daq_fields),
    CYAML_FIELD_END,
};

static const cyaml_schema_value_t top_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_top, top_fields),
};

/* ---- enum names ------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    int value;
} enum_name_t;

static const enum_name_t structure_models[] = {
    {"shear-building", DRTHS_STRUCTURE_SHEAR_BUILDING}, {"matrices", DRTHS_STRUCTURE_MATRICES},
    {NULL, 0}};
static const enum_name_t damping_kinds[] = {{"modal", DRTHS_DAMPING_MODAL},
                                            {"rayleigh", DRTHS_DAMPING_RAYLEIGH},
                                            {"matrix", DRTHS_DAMPING_MATRIX},
                                            {"none", DRTHS_DAMPING_NONE},
                                            {NULL, 0}};
static const enum_name_t integrator_kinds[] = {
    {"chen-ricles", DRTHS_INTEGRATOR_CHEN_RICLES},
    {"central-difference", DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE},
    {NULL, 0}};
static const enum_name_t ground_kinds[] = {{"record", DRTHS_GROUND_MOTION_RECORD},
                                           {"white-noise", DRTHS_GROUND_MOTION_WHITE_NOISE},
                                           {NULL, 0}};
static const enum_name_t record_formats[] = {{"auto", DRTHS_RECORD_FORMAT_AUTO},
                                             {"at2", DRTHS_RECORD_FORMAT_AT2},
                                             {"two-column", DRTHS_RECORD_FORMAT_TWO_COLUMN},
                                             {"csv", DRTHS_RECORD_FORMAT_CSV},
                                             {NULL, 0}};
static const enum_name_t accel_units[] = {{"g", DRTHS_ACCEL_G},
                                          {"m/s2", DRTHS_ACCEL_M_S2},
                                          {"cm/s2", DRTHS_ACCEL_CM_S2},
                                          {"mm/s2", DRTHS_ACCEL_MM_S2},
                                          {NULL, 0}};
static const enum_name_t damper_models[] = {{"phillips2013-200kN", DRTHS_DAMPER_PHILLIPS2013},
                                            {"spencer1997-small", DRTHS_DAMPER_SPENCER1997},
                                            {"linear-spring", DRTHS_DAMPER_LINEAR_SPRING},
                                            {"none", DRTHS_DAMPER_NONE},
                                            {NULL, 0}};
static const enum_name_t control_modes[] = {{"passive-off", DRTHS_CONTROL_PASSIVE_OFF},
                                            {"passive-on", DRTHS_CONTROL_PASSIVE_ON},
                                            {"fixed", DRTHS_CONTROL_FIXED},
                                            {"clipped-optimal", DRTHS_CONTROL_CLIPPED_OPTIMAL},
                                            {NULL, 0}};
static const enum_name_t actuator_plants[] = {{"ideal", DRTHS_ACTUATOR_PLANT_IDEAL},
                                              {"three-pole", DRTHS_ACTUATOR_PLANT_THREE_POLE},
                                              {NULL, 0}};
static const enum_name_t compensations[] = {{"none", DRTHS_COMPENSATION_NONE},
                                            {"polynomial", DRTHS_COMPENSATION_POLYNOMIAL},
                                            {"feedforward", DRTHS_COMPENSATION_FEEDFORWARD},
                                            {"feedforward-average",
                                             DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE},
                                            {NULL, 0}};
static const enum_name_t hold_modes[] = {{"hold", DRTHS_HOLD_AT_POSITION},
                                         {"ramp", DRTHS_HOLD_RAMP},
                                         {NULL, 0}};
static const enum_name_t smith_modes[] = {{"off", DRTHS_SMITH_OFF},
                                          {"fixed", DRTHS_SMITH_FIXED},
                                          {"adaptive", DRTHS_SMITH_ADAPTIVE},
                                          {NULL, 0}};

static const enum_name_t daq_backends[] = {{"virtual", DRTHS_DAQ_BACKEND_VIRTUAL},
                                           {"comedi", DRTHS_DAQ_BACKEND_COMEDI},
                                           {NULL, 0}};
static const enum_name_t daq_arefs[] = {{"ground", DRTHS_DAQ_AREF_GROUND},
                                        {"common", DRTHS_DAQ_AREF_COMMON},
                                        {"diff", DRTHS_DAQ_AREF_DIFF},
                                        {NULL, 0}};

static const char *enum_name(const enum_name_t *t, int v)
{
    for (; t->name; t++)
        if (t->value == v)
            return t->name;
    return "?";
}

const char *drths_structure_model_name(drths_structure_model_t v) { return enum_name(structure_models, (int)v); }
const char *drths_damping_kind_name(drths_damping_kind_t v) { return enum_name(damping_kinds, (int)v); }
const char *drths_integrator_kind_name(drths_integrator_kind_t v) { return enum_name(integrator_kinds, (int)v); }
const char *drths_ground_motion_kind_name(drths_ground_motion_kind_t v) { return enum_name(ground_kinds, (int)v); }
const char *drths_record_format_name(drths_record_format_t v) { return enum_name(record_formats, (int)v); }
const char *drths_accel_units_name(drths_accel_units_t v) { return enum_name(accel_units, (int)v); }
const char *drths_damper_model_name(drths_damper_model_t v) { return enum_name(damper_models, (int)v); }
const char *drths_control_mode_name(drths_control_mode_t v) { return enum_name(control_modes, (int)v); }
const char *drths_actuator_plant_name(drths_actuator_plant_t v) { return enum_name(actuator_plants, (int)v); }
const char *drths_compensation_name(drths_compensation_t v) { return enum_name(compensations, (int)v); }
const char *drths_hold_mode_name(drths_hold_mode_t v) { return enum_name(hold_modes, (int)v); }
const char *drths_smith_mode_name(drths_smith_mode_t v) { return enum_name(smith_modes, (int)v); }
const char *drths_daq_backend_name(drths_daq_backend_t v) { return enum_name(daq_backends, (int)v); }
const char *drths_daq_aref_name(drths_daq_aref_t v) { return enum_name(daq_arefs, (int)v); }

double drths_experiment_command_max(drths_damper_model_t model)
{
    switch (model) {
    case DRTHS_DAMPER_PHILLIPS2013:
        return 2.5;
    case DRTHS_DAMPER_SPENCER1997:
        return 2.25;
    default:
        return 0.0;
    }
}

double drths_accel_units_m_s2(drths_accel_units_t units)
{
    switch (units) {
    case DRTHS_ACCEL_G:
        return G_M_S2;
    case DRTHS_ACCEL_M_S2:
        return 1.0;
    case DRTHS_ACCEL_CM_S2:
        return 0.01;
    case DRTHS_ACCEL_MM_S2:
        return 0.001;
    }
    return 0.0;
}

/* ---- error context ----------------------------------------------------------------------- */

typedef struct {
    const char *file;      /* for messages */
    const char *text;      /* the file's bytes, to find the line of a key */
    size_t len;
    drths_error_t *err;
} vctx_t;

/* Finds the line of the key at the end of a dotted path (indices such as "[2]" are skipped) in
 * block-style YAML: each component must appear as "key:" at the start of a line (after
 * indentation) deeper than its parent and before the parent's block ends. Returns 0 if not found
 * (flow style, or the key is absent because it is missing), so messages only add a line they are
 * sure of. */
static int line_of(const vctx_t *c, const char *path)
{
    if (!c->text || !path || !*path)
        return 0;
    size_t pos = 0;     /* search from this byte */
    int line = 1;       /* line number at pos */
    int parent_indent = -1;
    const char *p = path;
    int found_line = 0;
    while (*p) {
        char key[128];
        size_t k = 0;
        while (*p && *p != '.' && *p != '[' && k + 1 < sizeof key)
            key[k++] = *p++;
        key[k] = '\0';
        while (*p == '[') {
            while (*p && *p != ']')
                p++;
            if (*p == ']')
                p++;
        }
        if (*p == '.')
            p++;
        if (k == 0)
            return 0;
        /* Scan lines from pos. */
        int hit = 0;
        while (pos < c->len) {
            size_t eol = pos;
            while (eol < c->len && c->text[eol] != '\n')
                eol++;
            size_t q = pos;
            int indent = 0;
            while (q < eol && c->text[q] == ' ') {
                q++;
                indent++;
            }
            int blank = (q == eol || c->text[q] == '#');
            if (!blank && indent <= parent_indent)
                return 0; /* left the parent's block */
            if (!blank && eol - q > k && memcmp(c->text + q, key, k) == 0) {
                size_t r = q + k;
                while (r < eol && c->text[r] == ' ')
                    r++;
                if (r < eol && c->text[r] == ':') {
                    hit = 1;
                    parent_indent = indent;
                    found_line = line;
                    pos = eol < c->len ? eol + 1 : eol;
                    line++;
                    break;
                }
            }
            pos = eol < c->len ? eol + 1 : eol;
            line++;
        }
        if (!hit)
            return 0;
    }
    return found_line;
}

static int failv(vctx_t *c, int code, const char *path, const char *fmt, va_list ap)
{
    char what[384];
    vsnprintf(what, sizeof what, fmt, ap);
    int line = line_of(c, path);
    if (line > 0)
        return drths_error_set(c->err, code, "%s:%d: %s: %s", c->file, line, path, what);
    return drths_error_set(c->err, code, "%s: %s: %s", c->file, path, what);
}

static int fail(vctx_t *c, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(vctx_t *c, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = failv(c, code, path, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- scalar conversion ------------------------------------------------------------------ */

static int parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    /* strtod also accepts "inf", "nan" and hex floats; the first two are refused below, and a
     * hex float is a number all the same. Leading blanks cannot occur in a plain YAML scalar but
     * can in a quoted one; refuse them so that " 5" is not silently 5. */
    if (s[0] == ' ' || s[0] == '\t')
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* The value of a number field, or def when absent. */
static int get_double(vctx_t *c, const char *path, const char *s, double def, double *out)
{
    if (!s) {
        *out = def;
        return 0;
    }
    if (parse_double(s, out) < 0)
        return fail(c, -EINVAL, path, "must be a finite number (got \"%s\")", s);
    return 0;
}

static int get_required_double(vctx_t *c, const char *path, const char *s, double *out)
{
    if (!s)
        return fail(c, -EINVAL, path, "missing (required)");
    return get_double(c, path, s, 0.0, out);
}

static int check_range(vctx_t *c, const char *path, double v, double lo, double hi)
{
    if (v < lo || v > hi)
        return fail(c, -EINVAL, path, "must be in %g..%g (got %g)", lo, hi, v);
    return 0;
}

static int check_gt0(vctx_t *c, const char *path, double v)
{
    if (!(v > 0))
        return fail(c, -EINVAL, path, "must be > 0 (got %g)", v);
    return 0;
}

static int check_ge0(vctx_t *c, const char *path, double v)
{
    if (!(v >= 0))
        return fail(c, -EINVAL, path, "must be >= 0 (got %g)", v);
    return 0;
}

/* An integer field in lo..hi, or def when absent. */
static int get_int(vctx_t *c, const char *path, const char *s, long def, long lo, long hi,
                   int *out)
{
    long v = def;
    if (s) {
        char *end;
        errno = 0;
        long long t = (s[0] == ' ' || s[0] == '\t') ? 0 : strtoll(s, &end, 10);
        if (s[0] == ' ' || s[0] == '\t' || end == s || *end != '\0' || errno == ERANGE) {
            double d;
            if (parse_double(s, &d) == 0)
                return fail(c, -EINVAL, path, "must be a whole number (got %s)", s);
            return fail(c, -EINVAL, path, "must be a whole number (got \"%s\")", s);
        }
        if (t < lo || t > hi)
            return fail(c, -EINVAL, path, "must be in %ld..%ld (got %lld)", lo, hi, t);
        v = (long)t;
    }
    *out = (int)v;
    return 0;
}

static int get_u64(vctx_t *c, const char *path, const char *s, uint64_t def, uint64_t *out)
{
    if (!s) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = (s[0] >= '0' && s[0] <= '9') ? strtoull(s, &end, 10) : 0;
    if (!(s[0] >= '0' && s[0] <= '9') || *end != '\0' || errno == ERANGE)
        return fail(c, -EINVAL, path, "must be a whole number in 0..18446744073709551615 (got \"%s\")",
                    s);
    *out = (uint64_t)v;
    return 0;
}

static int get_enum(vctx_t *c, const char *path, const char *s, const enum_name_t *t, int def,
                    int *out)
{
    if (s) {
        for (const enum_name_t *e = t; e->name; e++)
            if (strcmp(s, e->name) == 0) {
                *out = e->value;
                return 0;
            }
    }
    if (!s && def >= 0) {
        *out = def;
        return 0;
    }
    char list[256];
    size_t at = 0;
    list[0] = '\0';
    for (const enum_name_t *e = t; e->name; e++)
        at += (size_t)snprintf(list + at, at < sizeof list ? sizeof list - at : 0, "%s%s",
                               e == t ? "" : ", ", e->name);
    if (!s)
        return fail(c, -EINVAL, path, "missing (required; one of %s)", list);
    return fail(c, -EINVAL, path, "must be one of %s (got \"%s\")", list, s);
}

static int not_allowed(vctx_t *c, const char *path, const char *why)
{
    return fail(c, -EINVAL, path, "not allowed %s", why);
}

/* ---- libcyaml messages ------------------------------------------------------------------ */

#define LOG_LINES 24

typedef struct {
    char line[LOG_LINES][256];
    int n;
} cy_log_t;

static void cy_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
    cy_log_t *l = ctx;
    if (level < CYAML_LOG_ERROR || l->n >= LOG_LINES)
        return;
    char *dst = l->line[l->n++];
    vsnprintf(dst, sizeof l->line[0], fmt, args);
    size_t n = strlen(dst);
    while (n > 0 && (dst[n - 1] == '\n' || dst[n - 1] == ' '))
        dst[--n] = '\0';
}

/* Turns libcyaml's message and backtrace into "path: reason" with the innermost line number:
 *     Load: Invalid FLOAT value: abc
 *     Load: Backtrace:
 *       in sequence entry '2' (line: 3, column: 10)
 *       in mapping field 'v' (line: 3, column: 6)
 * becomes v[1] (libcyaml counts entries from 1, paths here from 0). */
static int cyaml_to_error(vctx_t *c, cyaml_err_t e, const cy_log_t *l)
{
    const char *msg = l->n > 0 ? l->line[0] : cyaml_strerror(e);
    if (strncmp(msg, "Load: ", 6) == 0)
        msg += 6;

    /* Frames, innermost first. */
    char names[LOG_LINES][128];
    int is_entry[LOG_LINES], is_anon[LOG_LINES], lines[LOG_LINES];
    int nf = 0;
    for (int i = 1; i < l->n; i++) {
        const char *s = l->line[i];
        while (*s == ' ')
            s++;
        int ln = 0;
        const char *lp = strstr(s, "(line: ");
        if (lp)
            ln = atoi(lp + 7);
        if (strncmp(s, "in mapping field '", 18) == 0 || strncmp(s, "in sequence entry '", 19) == 0) {
            int entry = s[3] == 's';
            const char *q = strchr(s, '\'') + 1;
            const char *r = strchr(q, '\'');
            if (!r)
                continue;
            size_t k = (size_t)(r - q) < sizeof names[0] - 1 ? (size_t)(r - q) : sizeof names[0] - 1;
            memcpy(names[nf], q, k);
            names[nf][k] = '\0';
            is_entry[nf] = entry;
            is_anon[nf] = 0;
            lines[nf] = ln;
            nf++;
        } else if (strncmp(s, "in mapping", 10) == 0 || strncmp(s, "in sequence", 11) == 0) {
            names[nf][0] = '\0';
            is_entry[nf] = 0;
            is_anon[nf] = 1;
            lines[nf] = ln;
            nf++;
        }
    }

    const char *key = NULL; /* a key named by the message rather than by a frame */
    int drop_inner = 0;     /* the innermost frame is a sibling field, not part of the path */
    int use_line = 1;
    char reason[320];
    if (e == CYAML_ERR_INVALID_KEY && strncmp(msg, "Unexpected key: ", 16) == 0) {
        key = msg + 16;
        use_line = 0; /* libcyaml gives the line of the enclosing mapping, not of the key */
        snprintf(reason, sizeof reason, "unknown key (see docs/experiment-file.md for the keys)");
    } else if (strncmp(msg, "Mapping field already seen: ", 28) == 0) {
        key = msg + 28;
        drop_inner = 1;
        snprintf(reason, sizeof reason, "given twice");
    } else if (e == CYAML_ERR_ALIAS) {
        snprintf(reason, sizeof reason, "YAML anchors and aliases are not supported");
    } else if (strncmp(msg, "Expecting ", 10) == 0) {
        const char *got = strstr(msg, "got event: ");
        got = got ? got + 11 : "";
        const char *what = strncmp(got, "SEQUENCE", 8) == 0  ? "a list"
                           : strncmp(got, "MAPPING", 7) == 0 ? "a mapping"
                           : strncmp(got, "SCALAR", 6) == 0  ? "a single value"
                                                              : got;
        if (strncmp(msg + 10, "STRING", 6) == 0)
            snprintf(reason, sizeof reason, "must be a single value, not %s", what);
        else if (strncmp(msg + 10, "MAPPING", 7) == 0)
            snprintf(reason, sizeof reason, "must be a mapping of keys to values, not %s", what);
        else if (strncmp(msg + 10, "SEQUENCE", 8) == 0)
            snprintf(reason, sizeof reason, "must be a list, not %s", what);
        else
            snprintf(reason, sizeof reason, "%s", msg);
    } else if (e == CYAML_ERR_SEQUENCE_ENTRIES_MIN || e == CYAML_ERR_SEQUENCE_ENTRIES_MAX) {
        /* Only matrix rows have a fixed length; the innermost frame is the entry being read. */
        drop_inner = 1;
        snprintf(reason, sizeof reason,
                 "row has %s entries than the matrix has rows (a matrix must be square, n x n)",
                 e == CYAML_ERR_SEQUENCE_ENTRIES_MIN ? "fewer" : "more");
    } else if (e == CYAML_ERR_LIBYAML_PARSER) {
        const char *m = strncmp(msg, "libyaml: ", 9) == 0 ? msg + 9 : msg;
        snprintf(reason, sizeof reason, "YAML syntax error: %s", m);
    } else {
        snprintf(reason, sizeof reason, "%s", msg);
    }

    char path[512];
    size_t at = 0;
    path[0] = '\0';
    int line = 0;
    for (int i = nf - 1; i >= (drop_inner ? 1 : 0); i--) {
        if (is_anon[i])
            continue;
        if (is_entry[i])
            at += (size_t)snprintf(path + at, at < sizeof path ? sizeof path - at : 0, "[%ld]",
                                   strtol(names[i], NULL, 10) - 1);
        else
            at += (size_t)snprintf(path + at, at < sizeof path ? sizeof path - at : 0, "%s%s",
                                   at ? "." : "", names[i]);
        if (at >= sizeof path)
            at = sizeof path - 1;
    }
    if (key)
        snprintf(path + at, at < sizeof path ? sizeof path - at : 0, "%s%s", at ? "." : "", key);
    if (use_line && nf > 0)
        line = lines[drop_inner && nf > 1 ? 1 : 0];
    if (e == CYAML_ERR_SEQUENCE_ENTRIES_MIN || e == CYAML_ERR_SEQUENCE_ENTRIES_MAX)
        line = nf > 1 ? lines[1] : 0;

    if (path[0] == '\0') {
        if (strncmp(msg, "Expecting MAPPING", 17) == 0)
            return drths_error_set(c->err, -EINVAL,
                                   "%s: not an experiment file: the top level must be a YAML "
                                   "mapping (name:, structure:, ground_motion:, specimen:, ...)",
                                   c->file);
        return drths_error_set(c->err, -EINVAL, "%s: %s", c->file, reason);
    }
    if (line > 0)
        return drths_error_set(c->err, -EINVAL, "%s:%d: %s: %s", c->file, line, path, reason);
    return drths_error_set(c->err, -EINVAL, "%s: %s: %s", c->file, path, reason);
}

/* ---- matrices (pass 2) ------------------------------------------------------------------- */

typedef struct {
    unsigned rows[3]; /* mass, stiffness, damping; 0 = absent */
    double *out[3];   /* n x n each (n = rows[i]), malloc'ed */
} matrices_t;

static const char *const matrix_keys[3] = {"mass_kg", "stiffness_N_per_m", "damping_N_s_per_m"};

static int load_matrices(vctx_t *c, matrices_t *m)
{
    cyaml_schema_value_t row[3];
    cyaml_schema_field_t sfields[4];
    int nf = 0;
    static const size_t offs[3] = {offsetof(struct raw2_structure, mass_kg),
                                   offsetof(struct raw2_structure, stiffness_N_per_m),
                                   offsetof(struct raw2_structure, damping_N_s_per_m)};
    static const size_t count_offs[3] = {offsetof(struct raw2_structure, mass_kg_count),
                                         offsetof(struct raw2_structure, stiffness_N_per_m_count),
                                         offsetof(struct raw2_structure, damping_N_s_per_m_count)};
    for (int i = 0; i < 3; i++) {
        if (m->rows[i] == 0)
            continue;
        /* Each row is allocated on its own (CYAML_FLAG_POINTER): libcyaml 1.3.1 walks inline
         * fixed-length rows with a different stride when freeing than when loading. */
        row[i] = (cyaml_schema_value_t){
            .type = CYAML_SEQUENCE_FIXED,
            .flags = CYAML_FLAG_POINTER,
            .data_size = sizeof(char *),
            .sequence = {.entry = &string_entry, .min = m->rows[i], .max = m->rows[i]},
        };
        sfields[nf++] = (cyaml_schema_field_t){
            .key = matrix_keys[i],
            .data_offset = (uint32_t)offs[i],
            .count_offset = (uint32_t)count_offs[i],
            .count_size = sizeof(unsigned),
            .value = {.type = CYAML_SEQUENCE,
                      .flags = OPT,
                      .data_size = sizeof(char **),
                      .sequence = {.entry = &row[i], .min = 0, .max = CYAML_UNLIMITED}},
        };
    }
    if (nf == 0)
        return 0;
    sfields[nf] = (cyaml_schema_field_t)CYAML_FIELD_END;
    const cyaml_schema_field_t tfields[] = {
        CYAML_FIELD_MAPPING_PTR("structure", OPT, struct raw2_top, structure, sfields),
        CYAML_FIELD_END,
    };
    const cyaml_schema_value_t schema = {
        CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw2_top, tfields),
    };
    cy_log_t log = {.n = 0};
    const cyaml_config_t cfg = {
        .log_fn = cy_log,
        .log_ctx = &log,
        .mem_fn = cyaml_mem,
        .log_level = CYAML_LOG_ERROR,
        .flags = CYAML_CFG_IGNORE_UNKNOWN_KEYS | CYAML_CFG_NO_ALIAS,
    };
    struct raw2_top *top = NULL;
    cyaml_err_t e = cyaml_load_data((const uint8_t *)c->text, c->len, &cfg, &schema,
                                    (cyaml_data_t **)&top, NULL);
    if (e != CYAML_OK)
        return cyaml_to_error(c, e, &log);
    int r = 0;
    for (int i = 0; i < 3 && r == 0; i++) {
        if (m->rows[i] == 0)
            continue;
        char ***cells = *(char ****)((char *)top->structure + offs[i]);
        unsigned n = m->rows[i];
        m->out[i] = malloc(sizeof(double) * n * n);
        if (!m->out[i]) {
            r = drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
            break;
        }
        for (unsigned k = 0; k < n * n && r == 0; k++) {
            const char *cell = cells[k / n][k % n];
            if (parse_double(cell, &m->out[i][k]) < 0) {
                char path[96];
                snprintf(path, sizeof path, "structure.%s[%u][%u]", matrix_keys[i], k / n, k % n);
                r = fail(c, -EINVAL, path, "must be a finite number (got \"%s\")", cell);
            }
        }
    }
    cyaml_free(&cfg, &schema, top, 0);
    return r;
}

/* Symmetric to a relative tolerance of the largest entry, as the eigensolver reads only one
 * triangle and an asymmetric entry is almost always a typing error. */
static int check_symmetric(vctx_t *c, const char *key, const double *a, int n)
{
    double amax = 0;
    for (int k = 0; k < n * n; k++)
        amax = fmax(amax, fabs(a[k]));
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (fabs(a[i * n + j] - a[j * n + i]) > SYMMETRY_TOL * amax) {
                char path[96];
                snprintf(path, sizeof path, "structure.%s[%d][%d]", key, i, j);
                return fail(c, -EINVAL, path,
                            "matrix must be symmetric: [%d][%d] is %.10g but [%d][%d] is %.10g", i,
                            j, a[i * n + j], j, i, a[j * n + i]);
            }
    return 0;
}

/* Cholesky factorisation in a scratch copy: succeeds exactly when a is positive definite. */
static int positive_definite(const double *a, int n)
{
    double *l = malloc(sizeof(double) * (size_t)n * (size_t)n);
    if (!l)
        return -ENOMEM;
    memcpy(l, a, sizeof(double) * (size_t)n * (size_t)n);
    int ok = 1;
    for (int j = 0; j < n && ok; j++) {
        double d = l[j * n + j];
        for (int k = 0; k < j; k++)
            d -= l[j * n + k] * l[j * n + k];
        if (!(d > 0)) {
            ok = 0;
            break;
        }
        d = sqrt(d);
        l[j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = l[i * n + j];
            for (int k = 0; k < j; k++)
                s -= l[i * n + k] * l[j * n + k];
            l[i * n + j] = s / d;
        }
    }
    free(l);
    return ok;
}

/* ---- paths ------------------------------------------------------------------------------- */

static char *join_path(const char *dir, const char *rel)
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
    char *j = join_path(cwd, d);
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
            return fail(c, -EINVAL, path, "must be host:port or [IPv6]:port (got \"%s\")", s);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || colon == s || memchr(s, ':', (size_t)(colon - s)))
            return fail(c, -EINVAL, path,
                        "must be host:port or [IPv6]:port, an IPv6 address in brackets (got \"%s\")",
                        s);
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || port < 1 || port > 65535)
        return fail(c, -EINVAL, path, "port must be in 1..65535 (got \"%s\")", s);
    return 0;
}

/* ---- validation --------------------------------------------------------------------------- */

static int fill_structure(vctx_t *c, drths_experiment_t *x, const struct raw_structure *rs,
                          matrices_t *mats)
{
    int r, v;
    if (!rs)
        return fail(c, -EINVAL, "structure", "missing (required)");
    if ((r = get_enum(c, "structure.model", rs->model, structure_models, -1, &v)))
        return r;
    x->structure.model = (drths_structure_model_t)v;
    char path[96];
    int n;
    if (x->structure.model == DRTHS_STRUCTURE_SHEAR_BUILDING) {
        static const char *why = "with structure.model shear-building (use floor_mass_kg and "
                                 "storey_stiffness_N_per_m)";
        if (rs->mass_kg)
            return not_allowed(c, "structure.mass_kg", why);
        if (rs->stiffness_N_per_m)
            return not_allowed(c, "structure.stiffness_N_per_m", why);
        if (rs->damping_N_s_per_m)
            return not_allowed(c, "structure.damping_N_s_per_m", why);
        if (!rs->floor_mass_kg)
            return fail(c, -EINVAL, "structure.floor_mass_kg", "missing (required for shear-building)");
        if (!rs->storey_stiffness_N_per_m)
            return fail(c, -EINVAL, "structure.storey_stiffness_N_per_m",
                        "missing (required for shear-building)");
        n = (int)rs->floor_mass_kg_count;
        if (n < 1 || n > DRTHS_EXPERIMENT_MAX_DOF)
            return fail(c, -EINVAL, "structure.floor_mass_kg", "must have 1..%d values (got %d)",
                        DRTHS_EXPERIMENT_MAX_DOF, n);
        if ((int)rs->storey_stiffness_N_per_m_count != n)
            return fail(c, -EINVAL, "structure.storey_stiffness_N_per_m",
                        "must have as many values as floor_mass_kg (%d), got %u", n,
                        rs->storey_stiffness_N_per_m_count);
        x->n_dof = n;
        size_t nn = (size_t)n * (size_t)n;
        x->structure.floor_mass_kg = calloc((size_t)n, sizeof(double));
        x->structure.storey_stiffness_N_per_m = calloc((size_t)n, sizeof(double));
        x->structure.mass_kg = calloc(nn, sizeof(double));
        x->structure.stiffness_N_per_m = calloc(nn, sizeof(double));
        if (!x->structure.floor_mass_kg || !x->structure.storey_stiffness_N_per_m ||
            !x->structure.mass_kg || !x->structure.stiffness_N_per_m)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "structure.floor_mass_kg[%d]", i);
            if ((r = get_double(c, path, rs->floor_mass_kg[i], 0, &x->structure.floor_mass_kg[i])) ||
                (r = check_gt0(c, path, x->structure.floor_mass_kg[i])))
                return r;
            snprintf(path, sizeof path, "structure.storey_stiffness_N_per_m[%d]", i);
            if ((r = get_double(c, path, rs->storey_stiffness_N_per_m[i], 0,
                                &x->structure.storey_stiffness_N_per_m[i])) ||
                (r = check_gt0(c, path, x->structure.storey_stiffness_N_per_m[i])))
                return r;
        }
        const double *m = x->structure.floor_mass_kg, *k = x->structure.storey_stiffness_N_per_m;
        for (int i = 0; i < n; i++) {
            x->structure.mass_kg[i * n + i] = m[i];
            x->structure.stiffness_N_per_m[i * n + i] = k[i] + (i + 1 < n ? k[i + 1] : 0.0);
            if (i + 1 < n) {
                x->structure.stiffness_N_per_m[i * n + i + 1] = -k[i + 1];
                x->structure.stiffness_N_per_m[(i + 1) * n + i] = -k[i + 1];
            }
        }
    } else {
        static const char *why = "with structure.model matrices (use mass_kg and stiffness_N_per_m)";
        if (rs->floor_mass_kg)
            return not_allowed(c, "structure.floor_mass_kg", why);
        if (rs->storey_stiffness_N_per_m)
            return not_allowed(c, "structure.storey_stiffness_N_per_m", why);
        if (!rs->mass_kg)
            return fail(c, -EINVAL, "structure.mass_kg", "missing (required for matrices)");
        if (!rs->stiffness_N_per_m)
            return fail(c, -EINVAL, "structure.stiffness_N_per_m", "missing (required for matrices)");
        n = (int)rs->mass_kg_count;
        if (n < 1 || n > DRTHS_EXPERIMENT_MAX_DOF)
            return fail(c, -EINVAL, "structure.mass_kg", "must have 1..%d rows (got %d)",
                        DRTHS_EXPERIMENT_MAX_DOF, n);
        if ((int)rs->stiffness_N_per_m_count != n)
            return fail(c, -EINVAL, "structure.stiffness_N_per_m",
                        "must be %d x %d like mass_kg (got %u rows)", n, n,
                        rs->stiffness_N_per_m_count);
        if (rs->damping_N_s_per_m && (int)rs->damping_N_s_per_m_count != n)
            return fail(c, -EINVAL, "structure.damping_N_s_per_m",
                        "must be %d x %d like mass_kg (got %u rows)", n, n,
                        rs->damping_N_s_per_m_count);
        x->n_dof = n;
        mats->rows[0] = (unsigned)n;
        mats->rows[1] = (unsigned)n;
        mats->rows[2] = rs->damping_N_s_per_m ? (unsigned)n : 0;
        if ((r = load_matrices(c, mats)))
            return r;
        x->structure.mass_kg = mats->out[0];
        x->structure.stiffness_N_per_m = mats->out[1];
        x->structure.damping_N_s_per_m = mats->out[2];
        mats->out[0] = mats->out[1] = mats->out[2] = NULL;
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "structure.mass_kg[%d][%d]", i, i);
            if ((r = check_gt0(c, path, x->structure.mass_kg[i * n + i])))
                return r;
            if (x->structure.damping_N_s_per_m) {
                snprintf(path, sizeof path, "structure.damping_N_s_per_m[%d][%d]", i, i);
                if ((r = check_ge0(c, path, x->structure.damping_N_s_per_m[i * n + i])))
                    return r;
            }
        }
        if ((r = check_symmetric(c, "mass_kg", x->structure.mass_kg, n)) ||
            (r = check_symmetric(c, "stiffness_N_per_m", x->structure.stiffness_N_per_m, n)))
            return r;
        if (x->structure.damping_N_s_per_m &&
            (r = check_symmetric(c, "damping_N_s_per_m", x->structure.damping_N_s_per_m, n)))
            return r;
        if ((r = positive_definite(x->structure.mass_kg, n)) <= 0)
            return r < 0 ? drths_error_set(c->err, r, "%s: out of memory", c->file)
                         : fail(c, -EINVAL, "structure.mass_kg", "must be positive definite");
    }
    if ((r = positive_definite(x->structure.stiffness_N_per_m, n)) <= 0)
        return r < 0 ? drths_error_set(c->err, r, "%s: out of memory", c->file)
                     : fail(c, -EINVAL, "structure.stiffness_N_per_m",
                            "must be positive definite (otherwise the structure is a mechanism "
                            "or not attached to the ground)");

    /* Damping. */
    const struct raw_damping *rd = rs->damping;
    int def_kind = x->structure.damping_N_s_per_m ? DRTHS_DAMPING_MATRIX : DRTHS_DAMPING_MODAL;
    if ((r = get_enum(c, "structure.damping.kind", rd ? rd->kind : NULL, damping_kinds, def_kind, &v)))
        return r;
    x->structure.damping.kind = (drths_damping_kind_t)v;
    if (x->structure.damping.kind == DRTHS_DAMPING_MATRIX && !x->structure.damping_N_s_per_m)
        return fail(c, -EINVAL, "structure.damping_N_s_per_m",
                    "missing (required by structure.damping.kind matrix, with model matrices)");
    if (x->structure.damping.kind != DRTHS_DAMPING_MATRIX && x->structure.damping_N_s_per_m)
        return not_allowed(c, "structure.damping_N_s_per_m",
                           "unless structure.damping.kind is matrix");
    switch (x->structure.damping.kind) {
    case DRTHS_DAMPING_MODAL:
    case DRTHS_DAMPING_RAYLEIGH: {
        int rayleigh = x->structure.damping.kind == DRTHS_DAMPING_RAYLEIGH;
        unsigned nr = rd && rd->ratio ? rd->ratio_count : 1;
        if (rayleigh ? (nr != 1 && nr != 2) : (nr != 1 && nr != (unsigned)n))
            return rayleigh ? fail(c, -EINVAL, "structure.damping.ratio",
                                   "rayleigh takes 1 or 2 values (got %u)", nr)
                            : fail(c, -EINVAL, "structure.damping.ratio",
                                   "modal takes 1 value (all modes) or %d (one per mode), got %u",
                                   n, nr);
        x->structure.damping.ratio = calloc(nr, sizeof(double));
        if (!x->structure.damping.ratio)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
        x->structure.damping.n_ratio = (int)nr;
        for (unsigned i = 0; i < nr; i++) {
            snprintf(path, sizeof path, "structure.damping.ratio[%u]", i);
            const char *s = rd && rd->ratio ? rd->ratio[i] : NULL;
            if ((r = get_double(c, path, s, 0.02, &x->structure.damping.ratio[i])))
                return r;
            double z = x->structure.damping.ratio[i];
            if (!(z >= 0 && z < 1))
                return fail(c, -EINVAL, path, "must be in [0, 1), 0.02 meaning 2 %% (got %g)", z);
        }
        if (!rayleigh) {
            if (rd && rd->modes)
                return not_allowed(c, "structure.damping.modes", "unless structure.damping.kind is rayleigh");
            break;
        }
        if (rd && rd->modes) {
            if (rd->modes_count != 2)
                return fail(c, -EINVAL, "structure.damping.modes",
                            "must be two 1-based mode numbers (got %u values)", rd->modes_count);
            for (int i = 0; i < 2; i++) {
                snprintf(path, sizeof path, "structure.damping.modes[%d]", i);
                if ((r = get_int(c, path, rd->modes[i], 1, 1, n, &x->structure.damping.modes[i])))
                    return r;
            }
            if (n > 1 && x->structure.damping.modes[0] == x->structure.damping.modes[1])
                return fail(c, -EINVAL, "structure.damping.modes",
                            "the two modes must differ (got %d twice)", x->structure.damping.modes[0]);
        } else {
            x->structure.damping.modes[0] = 1;
            x->structure.damping.modes[1] = n;
        }
        break;
    }
    case DRTHS_DAMPING_MATRIX:
    case DRTHS_DAMPING_NONE:
        if (rd && rd->ratio)
            return not_allowed(c, "structure.damping.ratio",
                               "with structure.damping.kind matrix or none");
        if (rd && rd->modes)
            return not_allowed(c, "structure.damping.modes", "unless structure.damping.kind is rayleigh");
        break;
    }
    if ((r = get_enum(c, "structure.integrator", rs->integrator, integrator_kinds,
                      DRTHS_INTEGRATOR_CHEN_RICLES, &v)))
        return r;
    x->structure.integrator = (drths_integrator_kind_t)v;
    return 0;
}

static int fill_ground(vctx_t *c, drths_experiment_t *x, const struct raw_ground *g)
{
    int r, v;
    if (!g)
        return fail(c, -EINVAL, "ground_motion", "missing (required)");
    if ((r = get_enum(c, "ground_motion.kind", g->kind, ground_kinds, DRTHS_GROUND_MOTION_RECORD, &v)))
        return r;
    x->ground_motion.kind = (drths_ground_motion_kind_t)v;
    if ((r = get_double(c, "ground_motion.duration_s", g->duration_s, 0, &x->ground_motion.duration_s)) ||
        (r = check_range(c, "ground_motion.duration_s", x->ground_motion.duration_s, 0, 1e6)) ||
        (r = get_double(c, "ground_motion.tail_s", g->tail_s, 0, &x->ground_motion.tail_s)) ||
        (r = check_range(c, "ground_motion.tail_s", x->ground_motion.tail_s, 0, 1e6)))
        return r;
    if (x->ground_motion.kind == DRTHS_GROUND_MOTION_RECORD) {
        static const char *why = "with ground_motion.kind record";
        if (g->band_hz)
            return not_allowed(c, "ground_motion.band_hz", why);
        if (g->rms_m_s2)
            return not_allowed(c, "ground_motion.rms_m_s2", why);
        if (g->seed)
            return not_allowed(c, "ground_motion.seed", why);
        if (!g->file || !g->file[0])
            return fail(c, -EINVAL, "ground_motion.file", "missing (required for kind record)");
        if ((r = get_enum(c, "ground_motion.format", g->format, record_formats,
                          DRTHS_RECORD_FORMAT_AUTO, &v)))
            return r;
        x->ground_motion.format = (drths_record_format_t)v;
        if ((r = get_enum(c, "ground_motion.units", g->units, accel_units, DRTHS_ACCEL_G, &v)))
            return r;
        x->ground_motion.units = (drths_accel_units_t)v;
        if ((r = get_int(c, "ground_motion.column", g->column, 1, 1, 1000, &x->ground_motion.column)) ||
            (r = get_double(c, "ground_motion.scale", g->scale, 1.0, &x->ground_motion.scale)) ||
            (r = check_gt0(c, "ground_motion.scale", x->ground_motion.scale)) ||
            (r = get_double(c, "ground_motion.time_compression", g->time_compression, 1.0,
                            &x->ground_motion.time_compression)) ||
            (r = check_range(c, "ground_motion.time_compression", x->ground_motion.time_compression,
                             1.0, 1000.0)))
            return r;
        x->ground_motion.file = strdup(g->file);
        x->ground_motion.record_path = join_path(x->dir, g->file);
        if (!x->ground_motion.file || !x->ground_motion.record_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
        /* Checked now so that a typing error in the path stops the run before anything starts. */
        int fd = open(x->ground_motion.record_path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            return fail(c, -e, "ground_motion.file", "cannot open \"%s\": %s",
                        x->ground_motion.record_path, strerror(e));
        }
        struct stat st;
        int bad = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode);
        close(fd);
        if (bad)
            return fail(c, -EINVAL, "ground_motion.file", "\"%s\" is not a regular file",
                        x->ground_motion.record_path);
    } else {
        static const char *why = "with ground_motion.kind white-noise";
        if (g->file)
            return not_allowed(c, "ground_motion.file", why);
        if (g->format)
            return not_allowed(c, "ground_motion.format", why);
        if (g->units)
            return not_allowed(c, "ground_motion.units", why);
        if (g->column)
            return not_allowed(c, "ground_motion.column", why);
        if (g->scale)
            return not_allowed(c, "ground_motion.scale", "with ground_motion.kind white-noise (use rms_m_s2)");
        if (g->time_compression)
            return not_allowed(c, "ground_motion.time_compression", why);
        x->ground_motion.format = DRTHS_RECORD_FORMAT_AUTO;
        x->ground_motion.units = DRTHS_ACCEL_M_S2;
        x->ground_motion.column = 1;
        x->ground_motion.scale = 1.0;
        x->ground_motion.time_compression = 1.0;
        if (!(x->ground_motion.duration_s > 0))
            return fail(c, -EINVAL, "ground_motion.duration_s",
                        "must be > 0 for white-noise (got %g)", x->ground_motion.duration_s);
        x->ground_motion.band_hz[0] = 0;
        x->ground_motion.band_hz[1] = 30;
        if (g->band_hz) {
            if (g->band_hz_count != 2)
                return fail(c, -EINVAL, "ground_motion.band_hz",
                            "must be two values [low, high] in Hz (got %u)", g->band_hz_count);
            if ((r = get_double(c, "ground_motion.band_hz[0]", g->band_hz[0], 0, &x->ground_motion.band_hz[0])) ||
                (r = get_double(c, "ground_motion.band_hz[1]", g->band_hz[1], 0, &x->ground_motion.band_hz[1])))
                return r;
        }
        double lo = x->ground_motion.band_hz[0], hi = x->ground_motion.band_hz[1];
        if ((r = check_ge0(c, "ground_motion.band_hz[0]", lo)))
            return r;
        if (!(hi > lo) || hi > x->rate_hz / 2)
            return fail(c, -EINVAL, "ground_motion.band_hz[1]",
                        "must be > band_hz[0] (%g) and <= rate_hz / 2 (%g) (got %g)", lo,
                        x->rate_hz / 2, hi);
        if ((r = get_double(c, "ground_motion.rms_m_s2", g->rms_m_s2, 1.0, &x->ground_motion.rms_m_s2)) ||
            (r = check_gt0(c, "ground_motion.rms_m_s2", x->ground_motion.rms_m_s2)) ||
            (r = get_u64(c, "ground_motion.seed", g->seed, 1, &x->ground_motion.seed)))
            return r;
    }
    return 0;
}

static int fill_specimen(vctx_t *c, drths_experiment_t *x, const struct raw_specimen *s)
{
    int r, v;
    if (!s)
        return fail(c, -EINVAL, "specimen", "missing (required)");
    if ((r = get_int(c, "specimen.floor", s->floor, 1, 1, x->n_dof, &x->specimen.floor)))
        return r;
    if (!s->damper)
        return fail(c, -EINVAL, "specimen.damper", "missing (required)");
    if ((r = get_enum(c, "specimen.damper.model", s->damper->model, damper_models, -1, &v)))
        return r;
    x->specimen.damper.model = (drths_damper_model_t)v;
    if (x->specimen.damper.model == DRTHS_DAMPER_LINEAR_SPRING) {
        if ((r = get_required_double(c, "specimen.damper.stiffness_N_per_m",
                                     s->damper->stiffness_N_per_m,
                                     &x->specimen.damper.stiffness_N_per_m)) ||
            (r = check_gt0(c, "specimen.damper.stiffness_N_per_m",
                           x->specimen.damper.stiffness_N_per_m)))
            return r;
    } else if (s->damper->stiffness_N_per_m) {
        return not_allowed(c, "specimen.damper.stiffness_N_per_m", "unless model is linear-spring");
    }
    if ((r = get_int(c, "specimen.damper.substeps", s->damper->substeps, 0, 0, 1000,
                     &x->specimen.damper.substeps)))
        return r;
    const struct raw_true_scale *t = s->true_scale;
    struct {
        const char *path, *raw;
        double *out;
    } f[] = {
        {"specimen.true_scale.alpha", t ? t->alpha : NULL, &x->specimen.true_scale.alpha},
        {"specimen.true_scale.c0", t ? t->c0 : NULL, &x->specimen.true_scale.c0},
        {"specimen.true_scale.c1", t ? t->c1 : NULL, &x->specimen.true_scale.c1},
        {"specimen.true_scale.gamma_beta", t ? t->gamma_beta : NULL, &x->specimen.true_scale.gamma_beta},
        {"specimen.true_scale.A", t ? t->A : NULL, &x->specimen.true_scale.A},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if ((r = get_double(c, f[i].path, f[i].raw, 1.0, f[i].out)) ||
            (r = check_range(c, f[i].path, *f[i].out, 0.01, 100)))
            return r;
    return 0;
}

static int fill_control(vctx_t *c, drths_experiment_t *x, const struct raw_control *ct)
{
    int r, v;
    if ((r = get_enum(c, "control.mode", ct ? ct->mode : NULL, control_modes,
                      DRTHS_CONTROL_PASSIVE_OFF, &v)))
        return r;
    x->control.mode = (drths_control_mode_t)v;
    x->control.q_disp = x->control.q_acc = x->control.r = 0;
    const struct {
        const char *path, *raw;
        double def, lo, hi;
        double *out;
    } w[] = {
        {"control.q_disp", ct ? ct->q_disp : NULL, 1.0, 0, 1e12, &x->control.q_disp},
        {"control.q_acc", ct ? ct->q_acc : NULL, 1.0, 0, 1e12, &x->control.q_acc},
        {"control.r", ct ? ct->r : NULL, 100.0, 1e-12, 1e12, &x->control.r},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        if (x->control.mode != DRTHS_CONTROL_CLIPPED_OPTIMAL) {
            if (w[i].raw)
                return not_allowed(c, w[i].path, "unless control.mode is clipped-optimal");
            continue;
        }
        if ((r = get_double(c, w[i].path, w[i].raw, w[i].def, w[i].out)) ||
            (r = check_range(c, w[i].path, *w[i].out, w[i].lo, w[i].hi)))
            return r;
    }
    if (x->control.mode == DRTHS_CONTROL_CLIPPED_OPTIMAL &&
        x->control.q_disp + x->control.q_acc <= 0)
        return fail(c, -EINVAL, "control.q_disp",
                    "q_disp and q_acc are both 0: the design would weigh nothing");
    if (x->control.mode != DRTHS_CONTROL_FIXED) {
        if (ct && ct->command)
            return not_allowed(c, "control.command", "unless control.mode is fixed");
        x->control.command = 0;
        return 0;
    }
    if ((r = get_required_double(c, "control.command", ct ? ct->command : NULL, &x->control.command)))
        return r;
    double max = drths_experiment_command_max(x->specimen.damper.model);
    const char *unit = x->specimen.damper.model == DRTHS_DAMPER_PHILLIPS2013 ? " A" :
                       x->specimen.damper.model == DRTHS_DAMPER_SPENCER1997  ? " V" : "";
    if (x->control.command < 0 || x->control.command > max)
        return fail(c, -EINVAL, "control.command", "must be in 0..%g%s for damper model %s (got %g)",
                    max, unit, drths_damper_model_name(x->specimen.damper.model), x->control.command);
    return 0;
}

static int fill_actuator(vctx_t *c, drths_experiment_t *x, const struct raw_actuator *a)
{
    int r, v;
    const struct raw_actuator none = {0};
    if (!a)
        a = &none;
    if ((r = get_enum(c, "actuator.plant", a->plant, actuator_plants, DRTHS_ACTUATOR_PLANT_IDEAL, &v)))
        return r;
    x->actuator.plant = (drths_actuator_plant_t)v;
    if ((r = get_enum(c, "actuator.compensation", a->compensation, compensations,
                      DRTHS_COMPENSATION_NONE, &v)))
        return r;
    x->actuator.compensation = (drths_compensation_t)v;
    if ((r = get_double(c, "actuator.noise_displacement_m", a->noise_displacement_m, 0,
                        &x->actuator.noise_displacement_m)) ||
        (r = check_ge0(c, "actuator.noise_displacement_m", x->actuator.noise_displacement_m)) ||
        (r = get_double(c, "actuator.noise_force_N", a->noise_force_N, 0, &x->actuator.noise_force_N)) ||
        (r = check_ge0(c, "actuator.noise_force_N", x->actuator.noise_force_N)) ||
        (r = get_int(c, "actuator.adc_bits", a->adc_bits, 0, 0, 24, &x->actuator.adc_bits)))
        return r;
    if (x->actuator.adc_bits != 0 && x->actuator.adc_bits < 8)
        return fail(c, -EINVAL, "actuator.adc_bits", "must be 0 (no quantisation) or 8..24 (got %d)",
                    x->actuator.adc_bits);
    if ((r = get_double(c, "actuator.displacement_range_m", a->displacement_range_m, 0.1,
                        &x->actuator.displacement_range_m)) ||
        (r = check_gt0(c, "actuator.displacement_range_m", x->actuator.displacement_range_m)) ||
        (r = get_double(c, "actuator.force_range_N", a->force_range_N, 250000, &x->actuator.force_range_N)) ||
        (r = check_gt0(c, "actuator.force_range_N", x->actuator.force_range_N)) ||
        (r = get_int(c, "actuator.io_delay_ticks", a->io_delay_ticks, 0, 0, 10, &x->actuator.io_delay_ticks)) ||
        (r = get_u64(c, "actuator.seed", a->seed, 1, &x->actuator.seed)))
        return r;
    return 0;
}

static int fill_network(vctx_t *c, drths_experiment_t *x, const struct raw_top *t)
{
    int r, v;
    const struct raw_link nolink = {0};
    const struct raw_numerical nonum = {0};
    const struct raw_physical nophys = {0};
    const struct raw_link *l = t->link ? t->link : &nolink;
    const struct raw_numerical *nu = t->numerical ? t->numerical : &nonum;
    const struct raw_physical *p = t->physical ? t->physical : &nophys;

    if ((r = get_int(c, "link.redundancy", l->redundancy, 4, 1, 16, &x->link.redundancy)) ||
        (r = get_int(c, "link.probes", l->probes, 500, 10, 100000, &x->link.probes)) ||
        (r = get_double(c, "link.quantile", l->quantile, 0.999, &x->link.quantile)) ||
        (r = check_range(c, "link.quantile", x->link.quantile, 0.5, 1.0)) ||
        (r = get_int(c, "link.safety_margin_ticks", l->safety_margin_ticks, 10, 0, 100000,
                     &x->link.safety_margin_ticks)) ||
        (r = get_int(c, "link.loop_delay_ticks", l->loop_delay_ticks, 0, 0, 1000000,
                     &x->link.loop_delay_ticks)))
        return r;
    if (l->key_file && l->key_file[0]) {
        x->link.key_file = strdup(l->key_file);
        x->link.key_path = join_path(x->dir, l->key_file);
        if (!x->link.key_file || !x->link.key_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    }

    x->numerical.peer = strdup(nu->peer ? nu->peer : "127.0.0.1:47000");
    if (!x->numerical.peer)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    if ((r = check_endpoint(c, "numerical.peer", x->numerical.peer)) ||
        (r = get_int(c, "numerical.reorder_ticks", nu->reorder_ticks, 10, 1, 10000,
                     &x->numerical.reorder_ticks)) ||
        (r = get_enum(c, "numerical.smith", nu->smith, smith_modes, DRTHS_SMITH_FIXED, &v)))
        return r;
    x->numerical.smith = (drths_smith_mode_t)v;

    x->physical.listen = strdup(p->listen ? p->listen : "0.0.0.0:47000");
    if (!x->physical.listen)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    if ((r = check_endpoint(c, "physical.listen", x->physical.listen)) ||
        (r = get_int(c, "physical.playout_ticks", p->playout_ticks, 0, 0, 1000000,
                     &x->physical.playout_ticks)) ||
        (r = get_int(c, "physical.max_concealed_ticks", p->max_concealed_ticks, 20, 0, 10000,
                     &x->physical.max_concealed_ticks)) ||
        (r = get_double(c, "physical.watchdog_ms", p->watchdog_ms, 100, &x->physical.watchdog_ms)) ||
        (r = check_range(c, "physical.watchdog_ms", x->physical.watchdog_ms, 1, 60000)) ||
        (r = get_double(c, "physical.limit_displacement_m", p->limit_displacement_m, 0.1,
                        &x->physical.limit_displacement_m)) ||
        (r = check_gt0(c, "physical.limit_displacement_m", x->physical.limit_displacement_m)) ||
        (r = get_double(c, "physical.limit_velocity_m_s", p->limit_velocity_m_s, 1.0,
                        &x->physical.limit_velocity_m_s)) ||
        (r = check_gt0(c, "physical.limit_velocity_m_s", x->physical.limit_velocity_m_s)) ||
        (r = get_double(c, "physical.limit_force_N", p->limit_force_N, 250000, &x->physical.limit_force_N)) ||
        (r = check_gt0(c, "physical.limit_force_N", x->physical.limit_force_N)) ||
        (r = get_double(c, "physical.limit_drive_m", p->limit_drive_m, 0.1,
                        &x->physical.limit_drive_m)) ||
        (r = check_gt0(c, "physical.limit_drive_m", x->physical.limit_drive_m)) ||
        (r = get_double(c, "physical.limit_measured_displacement_m",
                        p->limit_measured_displacement_m, 0.1,
                        &x->physical.limit_measured_displacement_m)) ||
        (r = check_gt0(c, "physical.limit_measured_displacement_m",
                       x->physical.limit_measured_displacement_m)) ||
        (r = get_enum(c, "physical.hold", p->hold, hold_modes, DRTHS_HOLD_AT_POSITION, &v)) ||
        (r = get_double(c, "physical.safe_position_m", p->safe_position_m, 0.0,
                        &x->physical.safe_position_m)) ||
        (r = get_double(c, "physical.ramp_rate_m_s", p->ramp_rate_m_s, 0.05,
                        &x->physical.ramp_rate_m_s)) ||
        (r = check_gt0(c, "physical.ramp_rate_m_s", x->physical.ramp_rate_m_s)) ||
        (r = get_double(c, "physical.feedforward_max_acceleration_m_s2",
                        p->feedforward_max_acceleration_m_s2, 50.0,
                        &x->physical.feedforward_max_acceleration_m_s2)) ||
        (r = check_range(c, "physical.feedforward_max_acceleration_m_s2",
                         x->physical.feedforward_max_acceleration_m_s2, 0, 1e6)) ||
        (r = get_double(c, "physical.feedforward_max_jerk_m_s3", p->feedforward_max_jerk_m_s3,
                        3e4, &x->physical.feedforward_max_jerk_m_s3)) ||
        (r = check_range(c, "physical.feedforward_max_jerk_m_s3",
                         x->physical.feedforward_max_jerk_m_s3, 0, 1e9)))
        return r;
    x->physical.hold = (drths_hold_mode_t)v;
    /* The ramp's end must be a drive the limits accept, or HOLD would drive out of them. */
    if (!(fabs(x->physical.safe_position_m) < x->physical.limit_drive_m) ||
        !(fabs(x->physical.safe_position_m) < x->physical.limit_measured_displacement_m))
        return fail(c, -EINVAL, "physical.safe_position_m",
                    "must lie inside physical.limit_drive_m (%g) and "
                    "physical.limit_measured_displacement_m (%g) (got %g)",
                    x->physical.limit_drive_m, x->physical.limit_measured_displacement_m,
                    x->physical.safe_position_m);
    /* 0 = one second of commands, at least 300 ticks: commands wait in the buffer for up to
     * L ticks, and an epoch may raise L to a round trip of several hundred ms. */
    if (x->physical.playout_ticks == 0) {
        double one_s = ceil(x->rate_hz);
        x->physical.playout_ticks = one_s > 300.0 ? (int)fmin(one_s, 1000000.0) : 300;
    } else if (x->physical.playout_ticks < 10) {
        return fail(c, -EINVAL, "physical.playout_ticks",
                    "must be 0 (one second of ticks) or 10..1000000 (got %d)",
                    x->physical.playout_ticks);
    }
    /* A command is sent L ticks ahead of its tick and waits in the playout buffer meanwhile. */
    if (x->link.loop_delay_ticks >= x->physical.playout_ticks)
        return fail(c, -EINVAL, "link.loop_delay_ticks",
                    "must be < physical.playout_ticks (%d), which must hold L ticks of commands "
                    "(got %d)",
                    x->physical.playout_ticks, x->link.loop_delay_ticks);

    x->output.directory = strdup(t->output && t->output->directory ? t->output->directory : "runs");
    if (!x->output.directory)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    if (!x->output.directory[0])
        return fail(c, -EINVAL, "output.directory", "must not be empty");
    return 0;
}

/* One channel mapping of daq; path is "daq.command_out" and so on. */
static int fill_daq_channel(vctx_t *c, const char *path, const struct raw_daq_channel *rc,
                            drths_daq_channel_config_t *ch)
{
    char f[64];
    int r, v;
    memset(ch, 0, sizeof *ch);
    if (!rc)
        return 0;
    ch->given = 1;
#define FIELD(name) (snprintf(f, sizeof f, "%s." name, path), f)
    if (!rc->subdevice)
        return fail(c, -EINVAL, FIELD("subdevice"), "missing (required: the comedi subdevice)");
    if (!rc->channel)
        return fail(c, -EINVAL, FIELD("channel"), "missing (required: the channel on the subdevice)");
    if (!rc->units_per_volt)
        return fail(c, -EINVAL, FIELD("units_per_volt"),
                    "missing (required: engineering units per volt at the connector)");
    if ((r = get_int(c, FIELD("subdevice"), rc->subdevice, 0, 0, 255, &ch->subdevice)) ||
        (r = get_int(c, FIELD("channel"), rc->channel, 0, 0, 65535, &ch->channel)) ||
        (r = get_int(c, FIELD("range"), rc->range, 0, 0, 255, &ch->range)) ||
        (r = get_enum(c, FIELD("aref"), rc->aref, daq_arefs, DRTHS_DAQ_AREF_GROUND, &v)))
        return r;
    ch->aref = (drths_daq_aref_t)v;
    if ((r = get_double(c, FIELD("units_per_volt"), rc->units_per_volt, 0, &ch->units_per_volt)) ||
        (r = get_double(c, FIELD("offset"), rc->offset, 0, &ch->offset)))
        return r;
    if (ch->units_per_volt == 0)
        return fail(c, -EINVAL, FIELD("units_per_volt"), "must not be 0");
#undef FIELD
    return 0;
}

static int fill_daq(vctx_t *c, drths_experiment_t *x, const struct raw_daq *d)
{
    int r, v;
    const struct raw_daq none = {0};
    if (!d)
        d = &none;
    if ((r = get_enum(c, "daq.backend", d->backend, daq_backends, DRTHS_DAQ_BACKEND_VIRTUAL, &v)))
        return r;
    x->daq.backend = (drths_daq_backend_t)v;
    x->daq.device = strdup(d->device ? d->device : "/dev/comedi0");
    if (!x->daq.device)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    if (!x->daq.device[0])
        return fail(c, -EINVAL, "daq.device", "must not be empty");
    struct {
        const char *path;
        const struct raw_daq_channel *raw;
        drths_daq_channel_config_t *ch;
    } chans[4] = {
        {"daq.command_out", d->command_out, &x->daq.command_out},
        {"daq.current_out", d->current_out, &x->daq.current_out},
        {"daq.displacement_in", d->displacement_in, &x->daq.displacement_in},
        {"daq.force_in", d->force_in, &x->daq.force_in},
    };
    for (int i = 0; i < 4; i++) {
        if ((r = fill_daq_channel(c, chans[i].path, chans[i].raw, chans[i].ch)))
            return r;
        if (!chans[i].ch->given && x->daq.backend == DRTHS_DAQ_BACKEND_COMEDI)
            return fail(c, -EINVAL, chans[i].path,
                        "missing (required with daq.backend comedi: subdevice, channel, "
                        "units_per_volt)");
    }
    /* Two outputs on one channel would fight; two inputs on one channel would read the force
     * as the displacement. Both are typing errors worth stopping for. */
    for (int i = 0; i < 4; i += 2) {
        const drths_daq_channel_config_t *a = chans[i].ch, *b = chans[i + 1].ch;
        if (a->given && b->given && a->subdevice == b->subdevice && a->channel == b->channel)
            return fail(c, -EINVAL, chans[i + 1].path,
                        "same subdevice and channel as %s (%d/%d); each signal needs its own "
                        "channel",
                        chans[i].path, a->subdevice, a->channel);
    }
    /* Not checked for readability here: the numerical site loads the same file and has no
     * calibration file; the comedi back end opens it at start-up. */
    if (d->calibration_file && d->calibration_file[0]) {
        x->daq.calibration_file = strdup(d->calibration_file);
        x->daq.calibration_path = join_path(x->dir, d->calibration_file);
        if (!x->daq.calibration_file || !x->daq.calibration_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    }
    return 0;
}

static int fill(vctx_t *c, drths_experiment_t *x, const struct raw_top *t, matrices_t *mats)
{
    int r;
    if (!t->name || !t->name[0])
        return fail(c, -EINVAL, "name", "missing (required: a short name for the experiment)");
    x->name = strdup(t->name);
    x->description = strdup(t->description ? t->description : "");
    if (!x->name || !x->description)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    if ((r = get_double(c, "rate_hz", t->rate_hz, 5000, &x->rate_hz)) ||
        (r = check_range(c, "rate_hz", x->rate_hz, 100, 100000)))
        return r;
    if ((r = fill_structure(c, x, t->structure, mats)) || (r = fill_ground(c, x, t->ground_motion)) ||
        (r = fill_specimen(c, x, t->specimen)) || (r = fill_control(c, x, t->control)) ||
        (r = fill_actuator(c, x, t->actuator)) || (r = fill_network(c, x, t)) ||
        (r = fill_daq(c, x, t->daq)))
        return r;
    return 0;
}

/* ---- load / close ------------------------------------------------------------------------ */

int drths_experiment_load_buffer(drths_experiment_t *exp, const char *data, size_t len,
                                 const char *path, drths_error_t *err)
{
    memset(exp, 0, sizeof *exp);
    vctx_t c = {.file = path, .text = data, .len = len, .err = err};
    if (len == 0 || !data)
        return drths_error_set(err, -EINVAL, "%s: empty file (an experiment file is a YAML "
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
        .log_fn = cy_log,
        .log_ctx = &log,
        .mem_fn = cyaml_mem,
        .log_level = CYAML_LOG_ERROR,
        /* Aliases are refused: an experiment file does not need them, and they let a small
         * file expand without bound. */
        .flags = CYAML_CFG_NO_ALIAS,
    };
    struct raw_top *top = NULL;
    cyaml_err_t e = cyaml_load_data((const uint8_t *)data, len, &cfg, &top_schema,
                                    (cyaml_data_t **)&top, NULL);
    int r;
    if (e != CYAML_OK) {
        r = cyaml_to_error(&c, e, &log);
    } else if (!top) {
        r = drths_error_set(err, -EINVAL, "%s: empty file (an experiment file is a YAML "
                                          "mapping: name:, structure:, ground_motion:, ...)",
                            path);
    } else {
        matrices_t mats = {{0, 0, 0}, {NULL, NULL, NULL}};
        r = fill(&c, exp, top, &mats);
        for (int i = 0; i < 3; i++)
            free(mats.out[i]);
    }
    if (top)
        cyaml_free(&cfg, &top_schema, top, 0);
    if (r)
        drths_experiment_close(exp);
    return r;
}

int drths_experiment_load(drths_experiment_t *exp, const char *path, drths_error_t *err)
{
    memset(exp, 0, sizeof *exp);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return drths_error_set(err, -e, "%s: cannot open the experiment file: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return drths_error_set(err, -EINVAL, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
        close(fd);
        return drths_error_set(err, -EFBIG, "%s: too large for an experiment file (%lld bytes, at most %u)",
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
    memset(x, 0, sizeof *x);
}
