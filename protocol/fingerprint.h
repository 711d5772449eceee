/* The experiment's fingerprint: the shared part of the experiment file (name, rate_hz,
 * structure, ground_motion with the record file's bytes, specimen, control, link except
 * key_file) as one canonical text, and its BLAKE2b-256 hash. Both sites send the hash in HELLO
 * and refuse a peer whose hash differs, so they cannot run different experiments by accident.
 * It belongs to the protocol: the text's format is part of what two sites must agree on
 * (docs/experiment-file.md specifies it). */
#ifndef DRTHS_FINGERPRINT_H
#define DRTHS_FINGERPRINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"
#include "protocol/wire.h"

/* Only pointers to the experiment are taken here; common/config/config.h defines it. */
typedef struct drths_experiment drths_experiment_t;

#define DRTHS_FINGERPRINT_BYTES 32

/* The canonical text of the shared part: one "key=value" line per field in a fixed order,
 * numbers printed with %.17g, enums by their YAML names, defaults filled in, and a last line
 * "ground_motion.record_blake2b256=<hex>" with the hash of the record file's bytes (absent for
 * white-noise). docs/experiment-file.md specifies it. *text is malloc'ed, NUL-terminated and
 * owned by the caller (free()); *len excludes the NUL. Reads the record file. init-only. */
int drths_experiment_shared_text(const drths_experiment_t *exp, char **text, size_t *len,
                                 drths_error_t *err);

/* BLAKE2b-256 (libsodium crypto_generichash, no key) of drths_experiment_shared_text. Both sites
 * send it in HELLO. init-only. */
int drths_experiment_fingerprint(const drths_experiment_t *exp,
                                 uint8_t out[DRTHS_FINGERPRINT_BYTES], drths_error_t *err);

/* The shared text cut into sections (the part of each key before its first '.': name,
 * rate_hz, structure, ground_motion, specimen, control, link) and a short hash of each
 * (BLAKE2b-64 of that section's lines in order), for HELLO: a peer whose fingerprint differs
 * can then name the sections that differ. *n gets the count (at most
 * DRTHS_WIRE_MAX_SECTIONS). init-only. */
int drths_experiment_sections(const drths_experiment_t *exp, drths_hello_section_t *out, int *n,
                              drths_error_t *err);

/* Writes the names of the sections whose hashes differ between two HELLOs (or that only one
 * lists), comma-separated, into out ("" if none or if either lists no sections). Returns the
 * number of such sections. RT-safe. */
int drths_hello_section_diff(const drths_msg_hello_t *a, const drths_msg_hello_t *b, char *out,
                             size_t cap);

/* The first difference between this site's HELLO (ours) and the peer's (theirs) that refuses
 * the session, as the sentence of the ABORT (into text, cap bytes); returns its reason,
 * DRTHS_STOP_VERSION_MISMATCH, DRTHS_STOP_FINGERPRINT_MISMATCH or DRTHS_STOP_CONFIG_MISMATCH,
 * or 0 when the two agree (text is then ""). The checks come in that order: versions,
 * fingerprint (naming the sections that differ, drths_hello_section_diff), then the set-up.
 * ours->role says which of the two handshake checks it is, because the two messages differ:
 *  - DRTHS_ROLE_PHYSICAL: the actuator site checks a HELLO, which offers a range of versions
 *    (refused when it has none in common with ours); rate, channel count, redundancy and units
 *    are compared in that order, each in a sentence of its own;
 *  - DRTHS_ROLE_NUMERICAL: the numerical site checks a HELLO_ACK, which names the version the
 *    actuator site chose (refused outside our range); rate, channel count, redundancy, units
 *    and the echoed link index are compared at once and named together in one sentence.
 * Each sentence names the sites by their role, this site first where both are named (the
 * short fingerprints: the first 16 hex digits). RT-safe. */
int drths_hello_mismatch(const drths_msg_hello_t *ours, const drths_msg_hello_t *theirs, char *text,
                         size_t cap);

/* The HELLO / HELLO_ACK fields both sites fill alike from the experiment: versions, role,
 * rate, one channel, the redundancy offsets (drths_wire_offset), SI units, fingerprint, sections, software
 * and the site name (the host name). link is the numerical site's link index. init-only. */
int drths_hello_init(drths_msg_hello_t *h, const drths_experiment_t *exp, drths_role_t role,
                     uint8_t link, drths_error_t *err);

/* Lower-case hex of a fingerprint, NUL-terminated. RT-safe. */
void drths_experiment_fingerprint_hex(const uint8_t fp[DRTHS_FINGERPRINT_BYTES], char out[65]);

#endif
