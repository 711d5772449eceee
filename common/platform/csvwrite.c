#include "common/platform/csvwrite.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

int drths_csvw_open(drths_csvw_t *w, const char *path, const char *const *names, int ncols,
                    drths_error_t *err)
{
    memset(w, 0, sizeof *w);
    FILE *f = fopen(path, "w");
    if (!f)
        return drths_error_set(err, -errno, "cannot create %s: %s", path, strerror(errno));
    /* A large buffer keeps the number of write(2) calls low for 5 kHz records. */
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    for (int i = 0; i < ncols; i++)
        fprintf(f, "%s%s", i ? "," : "", names[i]);
    fputc('\n', f);
    w->f = f;
    w->ncols = ncols;
    return 0;
}

/* Formats a double compactly; integers (ticks, flags, steps) print without exponent. The range
 * is tested before the cast, because casting a value out of long long's range (or inf) is
 * undefined. */
static void put_number(FILE *f, double v)
{
    if (isnan(v))
        fputs("nan", f);
    else if (fabs(v) < 1e15 && v == (double)(long long)v)
        fprintf(f, "%lld", (long long)v);
    else
        fprintf(f, "%.9g", v);
}

void drths_csvw_row(drths_csvw_t *w, const double *values)
{
    if (!w->f)
        return;
    for (int i = 0; i < w->ncols; i++) {
        if (i)
            fputc(',', w->f);
        put_number(w->f, values[i]);
    }
    if (fputc('\n', w->f) == EOF)
        w->failed = 1;
    w->rows++;
}

int drths_csvw_flush(drths_csvw_t *w)
{
    if (w->f && fflush(w->f) != 0) {
        w->failed = 1;
        return -EIO;
    }
    return 0;
}

int drths_csvw_close(drths_csvw_t *w, drths_error_t *err)
{
    if (!w->f)
        return 0;
    int rc = 0;
    if (fflush(w->f) != 0 || ferror(w->f) || w->failed)
        rc = -EIO;
    else
        fsync(fileno(w->f));
    if (fclose(w->f) != 0)
        rc = -EIO;
    w->f = NULL;
    if (rc)
        drths_error_set(err, rc, "writing the CSV record failed (disk full?)");
    return rc;
}
