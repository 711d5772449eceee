#include "common/platform/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int drths_error_set(drths_error_t *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

int drths_error_prefix(drths_error_t *err, int code, const char *fmt, ...)
{
    if (err) {
        char prefix[256];
        char old[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof old);
        /* Truncation is acceptable here: the message stays a valid, if shortened, sentence. */
        size_t n = strnlen(prefix, sizeof prefix);
        memcpy(err->msg, prefix, n);
        size_t at = n;
        if (at + 2 < sizeof err->msg) {
            err->msg[at++] = ':';
            err->msg[at++] = ' ';
        }
        size_t m = strnlen(old, sizeof old - 1);
        if (m > sizeof err->msg - 1 - at)
            m = sizeof err->msg - 1 - at;
        memcpy(err->msg + at, old, m);
        err->msg[at + m] = '\0';
    }
    return code;
}

void drths_error_clear(drths_error_t *err)
{
    if (err)
        err->msg[0] = '\0';
}
