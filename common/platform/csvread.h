/* Reader for run-folder CSV files (numerical.csv, physical.csv; see
 * docs/design.md#records-and-reports).
 *
 * The first line names the columns (comma separated, units in the names); every further line is
 * one row of numbers in the same order. "nan" (any case, as strtod accepts it) is a number.
 * Readers look columns up by name, never by position, so a site may add columns freely.
 *
 * The whole file is loaded into memory, one contiguous array per column, so that metrics can
 * walk a column as a plain double array. A 60 s run at 5 kHz with 30 columns (300k rows,
 * about 70 MB of doubles) loads in a fraction of a second: the file is read in large blocks
 * and parsed in one pass with strtod.
 *
 * Ownership: drths_csv_table_t owns every array it points to; drths_csv_close() frees them.
 * Pointers returned by drths_csv_column() stay valid until drths_csv_close().
 * None of this is RT-safe: it allocates and reads files; offline tools and the end of a run use it.
 */
#ifndef DRTHS_CSVREAD_H
#define DRTHS_CSVREAD_H

#include "common/platform/error.h"

typedef struct drths_csv_table {
    char *path;      /* copy of the path given to drths_csv_read, for messages */
    int ncols;       /* number of columns named in the header */
    long rows;       /* number of data rows (the header is not a row) */
    char **names;    /* ncols column names, trimmed of blanks */
    double **cols;   /* ncols arrays of `rows` values each, in file order */
} drths_csv_table_t;

/* Reads the CSV file at path into t. On failure t holds nothing (nothing to close) and err
 * names the file and, for a bad row, the line number (1 = header) and what was wrong: a field
 * that is not a number, or a wrong number of fields. A blank line counts as malformed unless
 * it is at the end of the file. Duplicate column names are refused, as lookup by name would
 * be ambiguous. Returns 0, -ENOENT/-EACCES/... from fopen, -EINVAL for malformed content or
 * -ENOMEM. init-only. */
int drths_csv_read(drths_csv_table_t *t, const char *path, drths_error_t *err);

/* Returns the column called name (exact match) as an array of t->rows values, or NULL when the
 * file has no such column. init-only (linear search over the names). */
const double *drths_csv_column(const drths_csv_table_t *t, const char *name);

/* Frees everything t owns and zeroes it; safe twice and on a zeroed table. init-only. */
void drths_csv_close(drths_csv_table_t *t);

#endif
