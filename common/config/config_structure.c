/* The structure section: the mass, stiffness and damping of the numerical model, either a
 * shear building's two lists or three full matrices, checked (square, symmetric, positive
 * definite) and expanded to n_dof x n_dof matrices; then its damping (kind, ratios, modes).
 *
 * Why two passes: libcyaml cannot load a sequence of variable-length sequences, which is what a
 * matrix written as a list of rows is. The first pass loads everything else and only counts the
 * rows of each matrix (entries of type CYAML_IGNORE); the second pass loads the matrices with a
 * schema built at run time whose rows are fixed sequences as long as the matrix has rows, so a
 * row of the wrong length is reported as "not square" by libcyaml itself.
 */
#include "common/config/config_sections.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Relative to the largest entry (check_symmetric). */
#define SYMMETRY_TOL 1e-9

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

/* The rows of the three matrices in the structure table, in the order of matrices_t: the
 * second pass takes their keys from there, and the structure section's from the top table, so
 * that no key is declared twice. */
static const int matrix_rows[3] = {F_structure_mass_kg, F_structure_stiffness_N_per_m,
                                   F_structure_damping_N_s_per_m};

static const char *matrix_key(int i)
{
    return drths_cfg_structure_spec[matrix_rows[i]].key;
}

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
            .sequence = {.entry = &drths_cfg_string_entry, .min = m->rows[i], .max = m->rows[i]},
        };
        sfields[nf++] = (cyaml_schema_field_t){
            .key = matrix_key(i),
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
        CYAML_FIELD_MAPPING_PTR(drths_cfg_top_spec[F_top_structure].key, OPT, struct raw2_top,
                                structure, sfields),
        CYAML_FIELD_END,
    };
    const cyaml_schema_value_t schema = {
        CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw2_top, tfields),
    };
    cy_log_t log = {.n = 0};
    const cyaml_config_t cfg = {
        .log_fn = drths_cfg_cy_log,
        .log_ctx = &log,
        .mem_fn = cyaml_mem,
        .log_level = CYAML_LOG_ERROR,
        .flags = CYAML_CFG_IGNORE_UNKNOWN_KEYS | CYAML_CFG_NO_ALIAS,
    };
    struct raw2_top *top = NULL;
    cyaml_err_t e = cyaml_load_data((const uint8_t *)c->text, c->len, &cfg, &schema,
                                    (cyaml_data_t **)&top, NULL);
    if (e != CYAML_OK)
        return drths_cfg_cyaml_error(c, e, &log);
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
            if (drths_cfg_parse_double(cell, &m->out[i][k]) < 0) {
                char path[96];
                snprintf(path, sizeof path, "structure.%s[%u][%u]", matrix_key(i), k / n, k % n);
                r = drths_cfg_fail(c, -EINVAL, path, "must be a finite number (got \"%s\")", cell);
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
                return drths_cfg_fail(
                    c, -EINVAL, path,
                    "matrix must be symmetric: [%d][%d] is %.10g but [%d][%d] is %.10g", i, j,
                    a[i * n + j], j, i, a[j * n + i]);
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

/* structure.floor_mass_kg and storey_stiffness_N_per_m: the shear building's diagonal mass
 * and tridiagonal stiffness matrices; sets x->n_dof. */
static int fill_shear_building(vctx_t *c, drths_experiment_t *x, const struct raw_structure *rs)
{
    int r, n;
    char path[96];
    static const char *why = "with structure.model shear-building (use floor_mass_kg and "
                             "storey_stiffness_N_per_m)";
    if (rs->mass_kg)
        return drths_cfg_not_allowed(c, "structure.mass_kg", why);
    if (rs->stiffness_N_per_m)
        return drths_cfg_not_allowed(c, "structure.stiffness_N_per_m", why);
    if (rs->damping_N_s_per_m)
        return drths_cfg_not_allowed(c, "structure.damping_N_s_per_m", why);
    if (!rs->floor_mass_kg)
        return drths_cfg_fail(c, -EINVAL, "structure.floor_mass_kg",
                              "missing (required for shear-building)");
    if (!rs->storey_stiffness_N_per_m)
        return drths_cfg_fail(c, -EINVAL, "structure.storey_stiffness_N_per_m",
                              "missing (required for shear-building)");
    n = (int)rs->floor_mass_kg_count;
    if (n < 1 || n > DRTHS_EXPERIMENT_MAX_DOF)
        return drths_cfg_fail(c, -EINVAL, "structure.floor_mass_kg",
                              "must have 1..%d values (got %d)", DRTHS_EXPERIMENT_MAX_DOF, n);
    if ((int)rs->storey_stiffness_N_per_m_count != n)
        return drths_cfg_fail(c, -EINVAL, "structure.storey_stiffness_N_per_m",
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
        if ((r = drths_cfg_get_double(c, path, rs->floor_mass_kg[i], 0,
                                      &x->structure.floor_mass_kg[i])) ||
            (r = drths_cfg_check_gt0(c, path, x->structure.floor_mass_kg[i])))
            return r;
        snprintf(path, sizeof path, "structure.storey_stiffness_N_per_m[%d]", i);
        if ((r = drths_cfg_get_double(c, path, rs->storey_stiffness_N_per_m[i], 0,
                                      &x->structure.storey_stiffness_N_per_m[i])) ||
            (r = drths_cfg_check_gt0(c, path, x->structure.storey_stiffness_N_per_m[i])))
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
    return 0;
}

/* structure.mass_kg, stiffness_N_per_m and damping_N_s_per_m given as matrices: square, the
 * same size, symmetric, mass positive definite; sets x->n_dof. */
static int fill_matrices(vctx_t *c, drths_experiment_t *x, const struct raw_structure *rs,
                         matrices_t *mats)
{
    int r, n;
    char path[96];
    static const char *why = "with structure.model matrices (use mass_kg and stiffness_N_per_m)";
    if (rs->floor_mass_kg)
        return drths_cfg_not_allowed(c, "structure.floor_mass_kg", why);
    if (rs->storey_stiffness_N_per_m)
        return drths_cfg_not_allowed(c, "structure.storey_stiffness_N_per_m", why);
    if (!rs->mass_kg)
        return drths_cfg_fail(c, -EINVAL, "structure.mass_kg", "missing (required for matrices)");
    if (!rs->stiffness_N_per_m)
        return drths_cfg_fail(c, -EINVAL, "structure.stiffness_N_per_m",
                              "missing (required for matrices)");
    n = (int)rs->mass_kg_count;
    if (n < 1 || n > DRTHS_EXPERIMENT_MAX_DOF)
        return drths_cfg_fail(c, -EINVAL, "structure.mass_kg", "must have 1..%d rows (got %d)",
                              DRTHS_EXPERIMENT_MAX_DOF, n);
    if ((int)rs->stiffness_N_per_m_count != n)
        return drths_cfg_fail(c, -EINVAL, "structure.stiffness_N_per_m",
                              "must be %d x %d like mass_kg (got %u rows)", n, n,
                              rs->stiffness_N_per_m_count);
    if (rs->damping_N_s_per_m && (int)rs->damping_N_s_per_m_count != n)
        return drths_cfg_fail(c, -EINVAL, "structure.damping_N_s_per_m",
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
        if ((r = drths_cfg_check_gt0(c, path, x->structure.mass_kg[i * n + i])))
            return r;
        if (x->structure.damping_N_s_per_m) {
            snprintf(path, sizeof path, "structure.damping_N_s_per_m[%d][%d]", i, i);
            if ((r = drths_cfg_check_ge0(c, path, x->structure.damping_N_s_per_m[i * n + i])))
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
                     : drths_cfg_fail(c, -EINVAL, "structure.mass_kg", "must be positive definite");
    return 0;
}

/* structure.damping: its kind (matrix when a damping matrix is given) and the ratios or modes
 * each kind takes, for n degrees of freedom. */
static int fill_damping(vctx_t *c, drths_experiment_t *x, const struct raw_structure *rs, int n)
{
    int r;
    char path[96];
    const struct raw_damping *rd = rs->damping;
    if ((r = PARSE(damping, kind, rd, x)))
        return r;
    if (!(rd && rd->kind) && x->structure.damping_N_s_per_m)
        x->structure.damping.kind = DRTHS_DAMPING_MATRIX;
    if (x->structure.damping.kind == DRTHS_DAMPING_MATRIX && !x->structure.damping_N_s_per_m)
        return drths_cfg_fail(
            c, -EINVAL, "structure.damping_N_s_per_m",
            "missing (required by structure.damping.kind matrix, with model matrices)");
    if (x->structure.damping.kind != DRTHS_DAMPING_MATRIX && x->structure.damping_N_s_per_m) {
        /* Left out of the experiment: only kind matrix reads it. */
        free(x->structure.damping_N_s_per_m);
        x->structure.damping_N_s_per_m = NULL;
        if ((r = drths_cfg_ignored(c, "structure.damping_N_s_per_m",
                                   "(it applies to structure.damping.kind matrix only)")))
            return r;
    }
    switch (x->structure.damping.kind) {
    case DRTHS_DAMPING_MODAL:
    case DRTHS_DAMPING_RAYLEIGH: {
        int rayleigh = x->structure.damping.kind == DRTHS_DAMPING_RAYLEIGH;
        unsigned nr = rd && rd->ratio ? rd->ratio_count : 1;
        if (rayleigh ? (nr != 1 && nr != 2) : (nr != 1 && nr != (unsigned)n))
            return rayleigh
                       ? drths_cfg_fail(c, -EINVAL, "structure.damping.ratio",
                                        "rayleigh takes 1 or 2 values (got %u)", nr)
                       : drths_cfg_fail(
                             c, -EINVAL, "structure.damping.ratio",
                             "modal takes 1 value (all modes) or %d (one per mode), got %u", n, nr);
        x->structure.damping.ratio = calloc(nr, sizeof(double));
        if (!x->structure.damping.ratio)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
        x->structure.damping.n_ratio = (int)nr;
        for (unsigned i = 0; i < nr; i++) {
            snprintf(path, sizeof path, "structure.damping.ratio[%u]", i);
            const char *s = rd && rd->ratio ? rd->ratio[i] : NULL;
            if ((r = drths_cfg_get_double(c, path, s, 0.02, &x->structure.damping.ratio[i])))
                return r;
            double z = x->structure.damping.ratio[i];
            if (!(z >= 0 && z < 1))
                return drths_cfg_fail(c, -EINVAL, path,
                                      "must be in [0, 1), 0.02 meaning 2 %% (got %g)", z);
        }
        if (!rayleigh) {
            if (rd && rd->modes &&
                (r = drths_cfg_ignored(c, "structure.damping.modes",
                                       "(it applies to structure.damping.kind rayleigh only)")))
                return r;
            break;
        }
        if (rd && rd->modes) {
            if (rd->modes_count != 2)
                return drths_cfg_fail(c, -EINVAL, "structure.damping.modes",
                                      "must be two 1-based mode numbers (got %u values)",
                                      rd->modes_count);
            for (int i = 0; i < 2; i++) {
                snprintf(path, sizeof path, "structure.damping.modes[%d]", i);
                if ((r = drths_cfg_get_int(c, path, rd->modes[i], 1, 1, n,
                                           &x->structure.damping.modes[i])))
                    return r;
            }
            if (n > 1 && x->structure.damping.modes[0] == x->structure.damping.modes[1])
                return drths_cfg_fail(c, -EINVAL, "structure.damping.modes",
                                      "the two modes must differ (got %d twice)",
                                      x->structure.damping.modes[0]);
        } else {
            x->structure.damping.modes[0] = 1;
            x->structure.damping.modes[1] = n;
        }
        break;
    }
    case DRTHS_DAMPING_MATRIX:
    case DRTHS_DAMPING_NONE:
        if (rd && rd->ratio &&
            (r = drths_cfg_ignored(
                 c, "structure.damping.ratio",
                 "(it applies to structure.damping.kind modal and rayleigh only)")))
            return r;
        if (rd && rd->modes &&
            (r = drths_cfg_ignored(c, "structure.damping.modes",
                                   "(it applies to structure.damping.kind rayleigh only)")))
            return r;
        break;
    }
    return 0;
}

int drths_cfg_fill_structure(vctx_t *c, drths_experiment_t *x, const struct raw_structure *rs,
                             matrices_t *mats)
{
    int r;
    if (!rs)
        return drths_cfg_fail(c, -EINVAL, "structure", "missing (required)");
    if ((r = PARSE(structure, model, rs, x)))
        return r;
    r = x->structure.model == DRTHS_STRUCTURE_SHEAR_BUILDING ? fill_shear_building(c, x, rs)
                                                             : fill_matrices(c, x, rs, mats);
    if (r)
        return r;
    int n = x->n_dof;
    if ((r = positive_definite(x->structure.stiffness_N_per_m, n)) <= 0)
        return r < 0 ? drths_error_set(c->err, r, "%s: out of memory", c->file)
                     : drths_cfg_fail(
                           c, -EINVAL, "structure.stiffness_N_per_m",
                           "must be positive definite (otherwise the structure is a mechanism "
                           "or not attached to the ground)");
    if ((r = fill_damping(c, x, rs, n)))
        return r;
    return PARSE(structure, integrator, rs, x);
}
