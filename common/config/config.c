/* Experiment file loader, its entry points and top-level flow: libcyaml parses the YAML into
 * "raw" structs whose every scalar is a string, then the fill functions convert, fill defaults
 * and validate field by field, section by section (fill, below). Each key is declared once, in
 * its section's table (config_sections.h), which gives its name, kind, destination, default and
 * range; the raw structs, the libcyaml schema and the conversion of plain scalars are generated
 * from the tables. The loader's other files, one concern each, are listed in
 * config_internal.h.
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

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* The whole file t into x, section by section, in the order that decides which of several
 * errors is reported first. */
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
        (r = drths_cfg_fill_ground(c, x, t->ground_motion)) ||
        (r = drths_cfg_fill_specimen(c, x, t->specimen)) ||
        (r = drths_cfg_fill_control(c, x, t->control)) ||
        (r = drths_cfg_fill_actuator(c, x, t->actuator)) || (r = drths_cfg_fill_network(c, x, t)) ||
        (r = drths_cfg_fill_daq(c, x, t->daq)) ||
        (r = drths_cfg_check_limits_inside_converters(c, x, "physical.", 1, 1)) ||
        (r = PARSE_RANGE(acceptance, displacement_rms_error_pct, hold_allowed, t->acceptance, x)) ||
        /* last: each channel's view copies the rest */
        (r = drths_cfg_fill_channels(c, x, t->physical)) || (r = drths_cfg_fill_sites(c, x, t)))
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
    free(x->numerical.smith_model);
    free(x->numerical.smith_model_path);
    free(x->numerical.peer);
    free(x->physical.listen);
    free(x->output.directory);
    free(x->daq.device);
    free(x->daq.calibration_file);
    free(x->daq.calibration_path);
    free(x->channels); /* the views own nothing */
    for (int i = 0; x->sites && i < x->n_sites; i++) {
        free(x->sites[i].address);
        free(x->sites[i].listen);
        free(x->sites[i].key_file);
        free(x->sites[i].key_path);
    }
    free(x->sites);
    free(x->dampers);
    memset(x, 0, sizeof *x);
}
