/* The experiment-file loader's own declarations, shared by its files in common/config/ and by
 * nothing else (the public interface is config.h). The loader is split by what a reader looks
 * for:
 *
 *   config.c             the entry points (load, load_acceptance, close), the top-level flow
 *                        and the file's folder
 *   config_sections.h    the keys: one table per section, and the raw structs they generate
 *   config_sections.c    the sections' libcyaml schemas and rows, from the same tables
 *   config_names.c       the spellings of the enums' values (and what some stand for)
 *   config_fields.c      a scalar's strict conversion, default and range (a table's row)
 *   config_structure.c   structure: the matrices (their second pass) and the damping
 *   config_checks.c      the other sections' own checks, and the checks across sections
 *   config_daq.c         daq: the back end and the signal mappings, no converter used twice
 *   config_channels.c    physical.channels: each channel's view of the experiment
 *   config_sites.c       sites: the actuator sites and their channels (the dampers)
 *   config_messages.c    errors and notes: file, line and field path; libcyaml's messages
 *   config_yamlline.c    the line of a key in the file's text, for messages
 *
 * Functions here are not static because another file of the loader calls them; their names
 * start with drths_ like every symbol the library exports, so that they cannot collide with a
 * program's own.
 */
#ifndef DRTHS_CONFIG_INTERNAL_H
#define DRTHS_CONFIG_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cyaml/cyaml.h>

#include "common/config/config.h"

/* ---- error context ----------------------------------------------------------------------- */

/* What every step of the loader reports into, passed as c. */
typedef struct {
    const char *file; /* for messages */
    const char *text; /* the file's bytes, to find the line of a key */
    size_t len;
    drths_error_t *err;
    char **notes; /* the experiment's notes (ignored fields); NULL: not collected */
    /* Prepended to every path in messages: "physical.channels[1]." while a channel's sections
     * are read with the top-level sections' code, "" (or NULL) otherwise. */
    const char *prefix;
} vctx_t;

/* ---- a row of a section's table ---------------------------------------------------------- */

/* One spelling of an enum in the file and its value; a table of them ends with {NULL, 0}. */
typedef struct {
    const char *name;
    int value;
} enum_name_t;

/* The kinds of a row (config_sections.h says what each takes), and a row as the conversion
 * reads it. */
typedef enum {
    K_ENUM,
    K_INT,
    K_U64,
    K_REAL,
    K_REAL_GT0,
    K_REAL_GE0,
    K_REAL_IN,
    K_TEXT,
    K_OPTPATH,
    K_LIST,
    K_MATRIX,
    K_MAP,
    K_SEQ,
} field_kind_t;

typedef struct {
    const char *key;
    field_kind_t kind;
    size_t raw;               /* offset of the member in the raw struct */
    size_t out;               /* offset of the destination in the output struct */
    double def, lo, hi;       /* numbers and enums */
    const char *text;         /* TEXT: default */
    const enum_name_t *names; /* ENUM */
} field_t;

/* The raw structs of the sections (config_sections.h), which the fill functions take. */
struct raw_actuator;
struct raw_channel;
struct raw_control;
struct raw_daq;
struct raw_daq_channel;
struct raw_ground;
struct raw_physical;
struct raw_specimen;
struct raw_structure;
struct raw_top;

/* ---- config.c ---------------------------------------------------------------------------- */

/* rel resolved against the folder dir (rel itself when absolute), malloc'ed; NULL when out of
 * memory. */
char *drths_cfg_join_path(const char *dir, const char *rel);

/* ---- config_channels.c ------------------------------------------------------------------- */

/* physical.channels of p into x->channels (none when p is NULL or has no channels), after
 * every other section: each channel's view copies the rest of x. 2..
 * DRTHS_EXPERIMENT_MAX_CHANNELS channels, unique names, and with the comedi back end no signal
 * of the board driven or read by two channels. */
int drths_cfg_fill_channels(vctx_t *c, drths_experiment_t *x, const struct raw_physical *p);

/* One channel rc (physical.channels[i], or a site's channel when in_site, which requires its
 * floor) into ch, the channel's view of x; messages under c->prefix. */
int drths_cfg_fill_channel(vctx_t *c, const drths_experiment_t *x, int i,
                           const struct raw_channel *rc, drths_experiment_channel_t *ch,
                           int in_site);

/* A name (a channel's, a site's) into out: 1..cap-1 of A-Z a-z 0-9 _ - ., else -EINVAL naming
 * field. */
int drths_cfg_name(vctx_t *c, const char *field, const char *s, char *out, size_t cap);

/* ---- config_sites.c ---------------------------------------------------------------------- */

/* The sites section t->sites into x->sites and x->dampers (none when absent), after every other
 * section: each channel's view copies the rest of x. Unique site names, addresses and channel
 * names; each channel's floor in 1..n_dof; not with physical.channels. */
int drths_cfg_fill_sites(vctx_t *c, drths_experiment_t *x, const struct raw_top *t);

/* "host:port" or "[v6]:port", port 1..65535, else -EINVAL naming path. */
int drths_cfg_check_endpoint(vctx_t *c, const char *path, const char *s);

/* ---- config_checks.c --------------------------------------------------------------------- */

/* Each section (NULL: absent) into x, after the structure (n_dof, for specimen.floor) and
 * rate_hz. ground_motion and specimen are required; fill_specimen and fill_actuator also read
 * a channel's own sections into its view. fill_network reads link, numerical, physical (all but
 * its channels) and output from the top level t. */
int drths_cfg_fill_ground(vctx_t *c, drths_experiment_t *x, const struct raw_ground *g);
int drths_cfg_fill_specimen(vctx_t *c, drths_experiment_t *x, const struct raw_specimen *s);
int drths_cfg_fill_control(vctx_t *c, drths_experiment_t *x, const struct raw_control *ct);
int drths_cfg_fill_actuator(vctx_t *c, drths_experiment_t *x, const struct raw_actuator *a);
int drths_cfg_fill_network(vctx_t *c, drths_experiment_t *x, const struct raw_top *t);

/* With control.mode fixed, control.command must be one the damper takes. At the top level the
 * command is named; in a channel (c->prefix set), which takes the command of the control section,
 * its damper model is. */
int drths_cfg_check_damper_command(vctx_t *c, const drths_experiment_t *x);

/* The ramp's end must be a drive the limits accept, or HOLD would drive out of them. At the top
 * level the position is named; in a channel (c->prefix set), which takes the position of the
 * physical section, its limit that leaves the position out is. */
int drths_cfg_check_safe_position(vctx_t *c, const drths_experiment_t *x);

/* The drive envelope must admit what the other limits allow: commands at the command velocity
 * limit, the HOLD ramp, the feedforward's acceleration, and an offset inside the drive range.
 * Messages name the envelope's field (under the channel's prefix in a channel). */
int drths_cfg_check_envelope(vctx_t *c, const drths_experiment_t *x);

/* After drths_cfg_fill_daq (it needs the back end): with the virtual back end and adc_bits, the
 * force and measured-displacement limits must lie below their converters' full scale. lp is the
 * path the limits are under in messages: "physical." for the physical section, "" for a
 * channel's own. own_force and own_disp say whether the limit is the section's own; a channel's
 * limit taken from the physical section is not, and then the message names the channel's
 * converter range (its own actuator section) that the limit does not fit. */
int drths_cfg_check_limits_inside_converters(vctx_t *c, const drths_experiment_t *x, const char *lp,
                                             int own_force, int own_disp);

/* ---- config_daq.c ------------------------------------------------------------------------ */

/* The daq section d (NULL: absent) into x: back end, device, the four signals and the
 * calibration file. */
int drths_cfg_fill_daq(vctx_t *c, drths_experiment_t *x, const struct raw_daq *d);

/* The daq signals of raw (command_out, current_out, displacement_in, force_in; NULL where not
 * given) into x: where keep_absent, an absent one keeps x's mapping (a channel's takes the daq
 * section's). Then every signal is required with the comedi back end, and no two collide. */
int drths_cfg_fill_daq_signals(vctx_t *c, drths_experiment_t *x,
                               const struct raw_daq_channel *const raw[4], int keep_absent);

/* Whether a signal of b is on the converter of a signal of a (when a is b, of an earlier one of
 * its own): a typing error worth stopping for. a is physical.channels[j] when it is another
 * channel than b. Returns 0, or -EINVAL naming both signals. */
int drths_cfg_check_shared_converters(vctx_t *c, drths_experiment_t *a, drths_experiment_t *b,
                                      int j);

/* ---- config_fields.c --------------------------------------------------------------------- */

/* The finite number s (strtod's syntax without leading blanks, infinities or NaN) into *out.
 * Returns 0, or -1 when s is NULL, empty or not such a number. */
int drths_cfg_parse_double(const char *s, double *out);

/* The value of a number field at path, or def when s is NULL (absent). */
int drths_cfg_get_double(vctx_t *c, const char *path, const char *s, double def, double *out);

/* -EINVAL unless v > 0 (respectively v >= 0), naming the field at path. */
int drths_cfg_check_gt0(vctx_t *c, const char *path, double v);
int drths_cfg_check_ge0(vctx_t *c, const char *path, double v);

/* An integer field in lo..hi, or def when s is NULL (absent). */
int drths_cfg_get_int(vctx_t *c, const char *path, const char *s, long def, long lo, long hi,
                      int *out);

/* "prefix.key" of row f into buf, or "key" at the top level (prefix ""); returns buf. */
const char *drths_cfg_field_path(char *buf, size_t size, const char *prefix, const field_t *f);

/* The string row f loaded into raw, NULL when the key (or its whole section, raw NULL) is
 * absent. */
const char *drths_cfg_raw_string(const field_t *f, const void *raw);

/* Converts the scalar of row f (kinds ENUM to TEXT) from raw into its destination in out: the
 * default when absent, else the parsed value, range-checked as the kind says. prefix is the
 * section's path in messages. A TEXT row without a default is left to the fill function, and so
 * are the other kinds. */
int drths_cfg_parse_field(vctx_t *c, const char *prefix, const field_t *f, const void *raw,
                          void *out);

/* drths_cfg_parse_field for rows first..last of a section's spec, in table order. */
int drths_cfg_parse_fields(vctx_t *c, const char *prefix, const field_t *spec, int first, int last,
                           const void *raw, void *out);

/* ---- config_messages.c ------------------------------------------------------------------- */

/* Every message names c->file, the field's path (after c->prefix) and, when
 * drths_yamlline_find is sure of it, the line: "<file>:<line>: <path>: <reason>". */

/* Fills c->err with the message fmt formats for the field at path and returns code. */
int drths_cfg_fail(vctx_t *c, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* -EINVAL: the field at path is "not allowed <why>". */
int drths_cfg_not_allowed(vctx_t *c, const char *path, const char *why);

/* A field that does not apply to the file's choices (q_disp when control.mode is not
 * clipped-optimal): it is left out of the experiment, so neither run nor fingerprint sees it,
 * and a note naming it ("<file>:<line>: <path>: ignored <why>") is added to *c->notes for the
 * programs to print. A file edited from one mode to another then runs without deleting keys by
 * hand, and still says what it did not use. Returns 0, or -ENOMEM. */
int drths_cfg_ignored(vctx_t *c, const char *path, const char *why);

/* libcyaml's log lines of one load (error level and above), for drths_cfg_cyaml_error. */
#define LOG_LINES 24
typedef struct {
    char line[LOG_LINES][256];
    int n;
} cy_log_t;

/* The log_fn of every cyaml_config_t of the loader; ctx is a cy_log_t. */
void drths_cfg_cy_log(cyaml_log_t level, void *ctx, const char *fmt, va_list args);

/* Fills c->err from libcyaml's error e and its log l: the path of the field it refused, with
 * the innermost line number it gave, and the reason in the loader's words. Returns -EINVAL. */
int drths_cfg_cyaml_error(vctx_t *c, cyaml_err_t e, const cy_log_t *l);

/* ---- config_names.c ---------------------------------------------------------------------- */

/* The spellings of each enum's values, for the ENUM rows of the section tables (booleans: false
 * and true as 0 and 1). */
extern const enum_name_t drths_cfg_structure_models[];
extern const enum_name_t drths_cfg_damping_kinds[];
extern const enum_name_t drths_cfg_integrator_kinds[];
extern const enum_name_t drths_cfg_ground_kinds[];
extern const enum_name_t drths_cfg_record_formats[];
extern const enum_name_t drths_cfg_accel_units[];
extern const enum_name_t drths_cfg_damper_models[];
extern const enum_name_t drths_cfg_control_modes[];
extern const enum_name_t drths_cfg_actuator_plants[];
extern const enum_name_t drths_cfg_compensations[];
extern const enum_name_t drths_cfg_hold_modes[];
extern const enum_name_t drths_cfg_smith_modes[];
extern const enum_name_t drths_cfg_daq_backends[];
extern const enum_name_t drths_cfg_booleans[];
extern const enum_name_t drths_cfg_daq_arefs[];

/* ---- config_structure.c ------------------------------------------------------------------ */

/* The matrices of the second pass. */
typedef struct {
    unsigned rows[3]; /* mass, stiffness, damping; 0 = absent */
    double *out[3];   /* n x n each (n = rows[i]), malloc'ed */
} matrices_t;

/* The structure section rs (NULL: absent) into x: the model and its matrices, n_dof, the
 * damping and the integrator. Matrices are loaded into mats (the second pass), which the caller
 * frees whatever the result. */
int drths_cfg_fill_structure(vctx_t *c, drths_experiment_t *x, const struct raw_structure *rs,
                             matrices_t *mats);

/* ---- config_yamlline.c ------------------------------------------------------------------- */

/* Finds the line of the key at the end of a dotted path ("physical.channels[1].name") in the
 * len bytes of block-style YAML at text: each component must appear as "key:" at the start of a
 * line (after indentation) deeper than its parent and before the parent's block ends; an index
 * ("[2]") of a block sequence moves to that entry's dash line. Returns the 1-based line, or 0
 * if not found (flow style, or the key is absent because it is missing), so messages only add a
 * line they are sure of. init-only. */
int drths_yamlline_find(const char *text, size_t len, const char *path);

#endif
