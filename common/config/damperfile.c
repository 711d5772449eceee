#include "common/config/damperfile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"

#define FORMAT_VERSION 1

int drths_damperfile_write(FILE *f, const drths_damperfile_meta_t *meta,
                           const drths_damperfit_result_t *res)
{
    fprintf(
        f,
        "# The damper model identified by drths-physical --characterize (docs/experiment-file.md,\n"
        "# The damper model file); numerical.smith_model reads it.\n");
    fprintf(f, "drths_damper_model: %d\n", FORMAT_VERSION);
    fprintf(f, "model: %s\n", drths_damper_model_name(res->params.model));
    fprintf(f, "date: %s\n", meta->date_utc ? meta->date_utc : "");
    fprintf(f, "experiment: \"%s\"\n", meta->experiment ? meta->experiment : "");
    fprintf(f, "experiment_fingerprint: %s\n", meta->fingerprint ? meta->fingerprint : "");
    fprintf(f, "protocol: %s\n", meta->protocol ? meta->protocol : "{}");
    fprintf(f, "force_rms_error_N: %.6g\n", res->rms_N);
    fprintf(f, "force_rms_N: %.6g\n", res->force_rms_N);
    fprintf(f,
            "parameters:                         # the model's units (mm, kN, s, A); u: standard "
            "uncertainty\n");
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++) {
        if (res->fitted[i])
            fprintf(f, "  %s: {value: %.10g, u: %.3g}\n", drths_damperfit_name(i), res->value[i],
                    res->u[i]);
        else
            fprintf(f, "  %s: {value: %.10g, fixed: \"%s\"}\n", drths_damperfit_name(i),
                    res->value[i], drths_damperfit_fixed_reason(i));
    }
    return ferror(f) ? -EIO : 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Cuts a comment (# outside double quotes) off the line. */
static void cut_comment(char *s)
{
    int q = 0;
    for (; *s; s++) {
        if (*s == '"')
            q = !q;
        else if (*s == '#' && !q) {
            *s = '\0';
            return;
        }
    }
}

int drths_damperfile_load(const char *path, drths_damper_params_t *p, char sha256_hex[65],
                          drths_error_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return drths_error_set(err, -errno, "%s: %s", path, strerror(errno));
    if (sha256_hex) {
        crypto_hash_sha256_state st;
        unsigned char buf[4096], h[crypto_hash_sha256_BYTES];
        size_t got;
        if (sodium_init() < 0) {
            fclose(f);
            return drths_error_set(err, -EIO, "%s: libsodium did not initialise", path);
        }
        crypto_hash_sha256_init(&st);
        while ((got = fread(buf, 1, sizeof buf, f)) > 0)
            crypto_hash_sha256_update(&st, buf, got);
        crypto_hash_sha256_final(&st, h);
        sodium_bin2hex(sha256_hex, 65, h, sizeof h);
        rewind(f);
    }
    char line[1024];
    int lineno = 0, in_params = 0, version = 0, have_model = 0;
    int seen[DRTHS_DAMPERFIT_NPARAM] = {0};
    drths_damper_params_t q;
    drths_damper_params_preset(&q, DRTHS_DAMPER_PHILLIPS2013);
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = drths_error_set(err, -EINVAL, "%s:%d: line longer than %zu characters", path,
                                 lineno, sizeof line - 1);
            goto out;
        }
        const int indented = isspace((unsigned char)line[0]) && line[0] != '\n';
        cut_comment(line);
        char *s = trim(line);
        if (!*s)
            continue;
        char *colon = strchr(s, ':');
        if (!colon) {
            rc = drths_error_set(err, -EINVAL, "%s:%d: expected 'key: value', got '%s'", path,
                                 lineno, s);
            goto out;
        }
        *colon = '\0';
        char *key = trim(s), *val = trim(colon + 1);
        if (!indented) {
            in_params = strcmp(key, "parameters") == 0;
            if (in_params && *val) {
                rc = drths_error_set(err, -EINVAL,
                                     "%s:%d: parameters: expected one parameter a line below it",
                                     path, lineno);
                goto out;
            }
            if (strcmp(key, "drths_damper_model") == 0) {
                version = atoi(val);
                if (version != FORMAT_VERSION) {
                    rc = drths_error_set(err, -EINVAL,
                                         "%s:%d: drths_damper_model: version '%s' (this program "
                                         "reads %d)",
                                         path, lineno, val, FORMAT_VERSION);
                    goto out;
                }
            } else if (strcmp(key, "model") == 0) {
                if (strcmp(val, drths_damper_model_name(DRTHS_DAMPER_PHILLIPS2013)) != 0) {
                    rc = drths_error_set(
                        err, -EINVAL, "%s:%d: model: '%s' (a characterized model is %s)", path,
                        lineno, val, drths_damper_model_name(DRTHS_DAMPER_PHILLIPS2013));
                    goto out;
                }
                have_model = 1;
            }
            continue;
        }
        if (!in_params) {
            rc = drths_error_set(err, -EINVAL, "%s:%d: '%s': indented outside parameters", path,
                                 lineno, key);
            goto out;
        }
        int i = 0;
        while (i < DRTHS_DAMPERFIT_NPARAM && strcmp(key, drths_damperfit_name(i)) != 0)
            i++;
        if (i == DRTHS_DAMPERFIT_NPARAM) {
            rc = drths_error_set(err, -EINVAL, "%s:%d: parameters.%s: unknown parameter", path,
                                 lineno, key);
            goto out;
        }
        if (seen[i]++) {
            rc = drths_error_set(err, -EINVAL, "%s:%d: parameters.%s: given twice", path, lineno,
                                 key);
            goto out;
        }
        char *v = strstr(val, "value:");
        if (val[0] != '{' || !v) {
            rc = drths_error_set(err, -EINVAL,
                                 "%s:%d: parameters.%s: expected {value: NUMBER, ...}, got '%s'",
                                 path, lineno, key, val);
            goto out;
        }
        v += strlen("value:");
        while (isspace((unsigned char)*v))
            v++;
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        while (isspace((unsigned char)*end))
            end++;
        if (end == v || errno || !isfinite(x) || (*end != ',' && *end != '}')) {
            rc = drths_error_set(err, -EINVAL, "%s:%d: parameters.%s: value '%.*s' is not a number",
                                 path, lineno, key, (int)strcspn(v, ",}"), v);
            goto out;
        }
        switch (i) {
#define SET(E, f)                                                                                  \
    case E:                                                                                        \
        q.f = x;                                                                                   \
        break;
            SET(DRTHS_DAMPERFIT_ALPHA_A, alpha_a)
            SET(DRTHS_DAMPERFIT_ALPHA_B, alpha_b)
            SET(DRTHS_DAMPERFIT_ALPHA_C, alpha_c)
            SET(DRTHS_DAMPERFIT_C0_A, c0_a)
            SET(DRTHS_DAMPERFIT_C0_B, c0_b)
            SET(DRTHS_DAMPERFIT_C0_C, c0_c)
            SET(DRTHS_DAMPERFIT_C1_A, c1_a)
            SET(DRTHS_DAMPERFIT_C1_B, c1_b)
            SET(DRTHS_DAMPERFIT_C1_C, c1_c)
            SET(DRTHS_DAMPERFIT_GAMMA_A, gamma_a)
            SET(DRTHS_DAMPERFIT_GAMMA_B, gamma_b)
            SET(DRTHS_DAMPERFIT_GAMMA_C, gamma_c)
            SET(DRTHS_DAMPERFIT_BETA_A, beta_a)
            SET(DRTHS_DAMPERFIT_BETA_B, beta_b)
            SET(DRTHS_DAMPERFIT_BETA_C, beta_c)
            SET(DRTHS_DAMPERFIT_K0, k0)
            SET(DRTHS_DAMPERFIT_K1, k1)
            SET(DRTHS_DAMPERFIT_X0, x0)
            SET(DRTHS_DAMPERFIT_A, A)
            SET(DRTHS_DAMPERFIT_N, n)
#undef SET
        default:
            break;
        }
    }
    if (ferror(f)) {
        rc = drths_error_set(err, -EIO, "%s: read error", path);
        goto out;
    }
    if (!version) {
        rc = drths_error_set(err, -EINVAL, "%s: not a damper model file (no drths_damper_model:)",
                             path);
        goto out;
    }
    if (!have_model) {
        rc = drths_error_set(err, -EINVAL, "%s: model: missing", path);
        goto out;
    }
    for (int i = 0; i < DRTHS_DAMPERFIT_NPARAM; i++)
        if (!seen[i]) {
            rc = drths_error_set(err, -EINVAL, "%s: parameters.%s: missing", path,
                                 drths_damperfit_name(i));
            goto out;
        }
    drths_damper_t d;
    rc = drths_damper_init(&d, &q, 1e-3, err);
    if (rc) {
        drths_error_prefix(err, rc, "%s: parameters", path);
        goto out;
    }
    drths_damper_close(&d);
    *p = q;
out:
    fclose(f);
    return rc;
}
