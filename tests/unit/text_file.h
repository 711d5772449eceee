/* Unit tests' text files: a whole file read into memory, and a text with one piece replaced
 * (to make a variant of an example). Include after <cmocka.h>; both return malloc'd text the
 * caller frees, and fail the test on any error. */
#ifndef DRTHS_TEST_TEXT_FILE_H
#define DRTHS_TEST_TEXT_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file at path, NUL-terminated. */
static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0); /* the files read here are never empty */
    rewind(f);
    char *t = malloc((size_t)n + 1);
    assert_non_null(t);
    assert_int_equal(fread(t, 1, (size_t)n, f), (size_t)n);
    t[n] = '\0';
    fclose(f);
    return t;
}

/* text with the first occurrence of `from` replaced by `to`, which must occur. */
static inline char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    if (!at)
        fail_msg("'%s' not in the text", from);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *t = malloc(n);
    assert_non_null(t);
    snprintf(t, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return t;
}

#endif
