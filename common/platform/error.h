/* Error reporting for library code.
 *
 * Library functions return 0 on success or a negative errno-style code, and never print.
 * Where a caller needs to know *what* was wrong (a field path, a file and line, a datagram
 * reason), the function also takes a drths_error_t that it fills with one sentence. main()
 * prints that sentence and chooses the exit code.
 *
 * Ownership: the caller owns the drths_error_t (usually on its stack). Every function that takes
 * one accepts NULL.
 */
#ifndef DRTHS_ERROR_H
#define DRTHS_ERROR_H

#include <stddef.h>

typedef struct drths_error {
    char msg[512];
} drths_error_t;

/* Formats the message into err (if not NULL) and returns code, so that a failing path reads
 * `return drths_error_set(err, -EINVAL, "structure.floor_mass_kg[%d]: must be > 0", i);`.
 * init-only (uses vsnprintf). */
int drths_error_set(drths_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the existing message with a context, e.g. the file name. init-only. */
int drths_error_prefix(drths_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears the message. */
void drths_error_clear(drths_error_t *err);

#endif
