/* The damper model file: what a characterization (drths-physical --characterize) identified,
 * for the numerical site's Smith predictor (numerical.smith_model). YAML, written by
 * drths_damperfile_write and read back by drths_damperfile_load; docs/experiment-file.md
 * describes it:
 *
 *   drths_damper_model: 1
 *   model: phillips2013-200kN
 *   date: 2026-11-28T09:40:00Z
 *   experiment: <name>
 *   experiment_fingerprint: <hex>
 *   protocol: {...}                    (one line, for the reader of the file)
 *   force_rms_error_N: 51.2
 *   parameters:                        # the model's units (mm, kN, s, A)
 *     alpha_a: {value: 0.1100, u: 2.4e-05}
 *     A: {value: 300, fixed: "why"}
 *
 * The loader reads only `model` and `parameters` (the rest is provenance) and accepts the
 * subset of YAML the writer produces: one `key: value` per line, comments, the parameters as
 * flow maps. Every parameter of drths_damperfit_name must be there once.
 *
 * Ownership: the caller owns everything passed; nothing is kept. init-only.
 */
#ifndef DRTHS_DAMPERFILE_H
#define DRTHS_DAMPERFILE_H

#include <stdio.h>

#include "common/models/damperfit.h"
#include "common/platform/error.h"

typedef struct drths_damperfile_meta {
    const char *date_utc, *experiment, *fingerprint, *protocol;
} drths_damperfile_meta_t;

/* Writes the model file for a fit to f. Returns 0 or -EIO. */
int drths_damperfile_write(FILE *f, const drths_damperfile_meta_t *meta,
                           const drths_damperfit_result_t *res);

/* Reads path into *p: the preset of the file's model with every parameter the file gives, then
 * validated as drths_damper_init does; sha256_hex (when not NULL) gets the lower-case hex of the
 * SHA-256 of the file's bytes (libsodium crypto_hash_sha256), which names the model in the
 * run's records. Errors name the file, the line and the field, e.g.
 * "model.yaml:12: parameters.c1_b: value 'x' is not a number". Returns 0 or a negative errno. */
int drths_damperfile_load(const char *path, drths_damper_params_t *p, char sha256_hex[65],
                          drths_error_t *err);

#endif
