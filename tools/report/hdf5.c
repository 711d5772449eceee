/* report.h5: the run's records as HDF5 datasets, for MATLAB, Octave and Python (docs/report.md).
 *
 * One group per record (/numerical, /reference, /physical), one 1-D double dataset per CSV
 * column with the column's name, and the unit (from the name's suffix) as the attribute "unit".
 * The run's metadata are attributes of the root group: every scalar of the run folder's
 * summary.json (nested keys joined with '.'), the run and reference folders, and the verdict.
 *
 * report.mat: the same columns in the layout MATLAB's load reads (below).
 */
#include "tools/report/hdf5.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The unit of a column, from the suffix of its name (the recorders' convention). */
static const char *unit_of(const char *name)
{
    static const struct {
        const char *suffix, *unit;
    } units[] = {{"_m_s2", "m/s^2"}, {"_m_s", "m/s"}, {"_ms", "ms"}, {"_us", "us"},
                 {"_m", "m"},        {"_N", "N"},     {"_s", "s"},   {"_ticks", "ticks"},
                 {"_A", "A"},        {"_V", "V"}};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t k = strlen(units[i].suffix);
        if (n > k && strcmp(name + n - k, units[i].suffix) == 0)
            return units[i].unit;
    }
    return "1"; /* a count, a flag, a step or tick number, or a command in its own units */
}

static int attr_string(hid_t obj, const char *key, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) > 0 ? strlen(value) : 1);
    H5Tset_cset(type, H5T_CSET_UTF8);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, key, type, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, type, value) < 0 ? -EIO : 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

static int attr_double(hid_t obj, const char *key, double value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, key, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, H5T_NATIVE_DOUBLE, &value) < 0 ? -EIO : 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    return rc;
}

static int write_table(hid_t file, const char *group, const drths_csv_table_t *t)
{
    hid_t g = H5Gcreate2(file, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return -EIO;
    int rc = attr_string(g, "source", t->path);
    hsize_t dims[1] = {(hsize_t)t->rows};
    for (int c = 0; c < t->ncols && !rc; c++) {
        hid_t space = H5Screate_simple(1, dims, NULL);
        hid_t d = H5Dcreate2(g, t->names[c], H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT);
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->cols[c]) < 0)
            rc = -EIO;
        if (!rc)
            rc = attr_string(d, "unit", unit_of(t->names[c]));
        if (d >= 0)
            H5Dclose(d);
        H5Sclose(space);
    }
    H5Gclose(g);
    return rc;
}

/* ---- summary.json as attributes ----------------------------------------------------------- */

typedef struct {
    const char *p;
    hid_t obj;
    int rc;
} json_walk_t;

static void skip_ws(json_walk_t *w)
{
    while (*w->p == ' ' || *w->p == '\n' || *w->p == '\t' || *w->p == '\r')
        w->p++;
}

/* Reads a JSON string at w->p into buf (escapes kept as the character after the backslash,
 * except \n and \t). Returns 0 or -1. */
static int read_string(json_walk_t *w, char *buf, size_t cap)
{
    if (*w->p != '"')
        return -1;
    w->p++;
    size_t n = 0;
    while (*w->p && *w->p != '"') {
        char ch = *w->p++;
        if (ch == '\\' && *w->p) {
            ch = *w->p++;
            ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch;
        }
        if (n + 1 < cap)
            buf[n++] = ch;
    }
    buf[n] = '\0';
    if (*w->p != '"')
        return -1;
    w->p++;
    return 0;
}

/* Walks one JSON value; scalars become attributes named prefix, objects recurse with
 * prefix.key, arrays of numbers are skipped (they are in report.json). */
static int walk_value(json_walk_t *w, const char *prefix)
{
    skip_ws(w);
    if (*w->p == '{') {
        w->p++;
        for (;;) {
            skip_ws(w);
            if (*w->p == '}') {
                w->p++;
                return 0;
            }
            char key[128], full[256];
            if (read_string(w, key, sizeof key))
                return -1;
            skip_ws(w);
            if (*w->p++ != ':')
                return -1;
            snprintf(full, sizeof full, "%s%s%s", prefix, prefix[0] ? "." : "", key);
            if (walk_value(w, full))
                return -1;
            skip_ws(w);
            if (*w->p == ',')
                w->p++;
        }
    }
    if (*w->p == '[') {
        int depth = 0;
        do {
            if (*w->p == '"') {
                char junk[256];
                if (read_string(w, junk, sizeof junk))
                    return -1;
                continue;
            }
            depth += (*w->p == '[') - (*w->p == ']');
            if (!*w->p)
                return -1;
            w->p++;
        } while (depth > 0);
        return 0;
    }
    if (*w->p == '"') {
        char s[1024];
        if (read_string(w, s, sizeof s))
            return -1;
        if (!w->rc && prefix[0])
            w->rc = attr_string(w->obj, prefix, s);
        return 0;
    }
    if (strncmp(w->p, "true", 4) == 0 || strncmp(w->p, "false", 5) == 0) {
        int v = *w->p == 't';
        w->p += v ? 4 : 5;
        if (!w->rc && prefix[0])
            w->rc = attr_double(w->obj, prefix, v);
        return 0;
    }
    if (strncmp(w->p, "null", 4) == 0) {
        w->p += 4;
        if (!w->rc && prefix[0])
            w->rc = attr_double(w->obj, prefix, NAN);
        return 0;
    }
    char *end;
    double v = strtod(w->p, &end);
    if (end == w->p)
        return -1;
    w->p = end;
    if (!w->rc && prefix[0])
        w->rc = attr_double(w->obj, prefix, v);
    return 0;
}

/* The scalars of summary.json as attributes of obj; a missing file adds nothing. */
static int summary_attributes(hid_t obj, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!buf)
        return -ENOMEM;
    buf[n] = '\0';
    json_walk_t w = {.p = buf, .obj = obj, .rc = 0};
    int bad = walk_value(&w, "summary");
    free(buf);
    /* A summary that is not the JSON the sites write is not this tool's to judge: the records
     * are written all the same, with an attribute saying so. */
    if (bad && !w.rc)
        return attr_string(obj, "summary_unreadable", path);
    return w.rc;
}

int drths_report_write_hdf5(const char *path, const drths_report_hdf5_t *in, drths_error_t *err)
{
    /* HDF5 prints its own error stack by default; the message here is enough. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return drths_error_set(err, -EIO, "%s: cannot create the HDF5 file", path);
    int rc = attr_string(file, "run", in->run_dir);
    if (!rc && in->ref_dir)
        rc = attr_string(file, "reference", in->ref_dir);
    if (!rc && in->verdict)
        rc = attr_string(file, "verdict", in->verdict);
    if (!rc && in->summary_path)
        rc = summary_attributes(file, in->summary_path);
    if (!rc)
        rc = write_table(file, "numerical", in->run);
    if (!rc && in->ref)
        rc = write_table(file, "reference", in->ref);
    if (!rc && in->phys)
        rc = write_table(file, "physical", in->phys);
    if (H5Fclose(file) < 0 && !rc)
        rc = -EIO;
    if (rc)
        return drths_error_set(err, rc, "%s: cannot write the HDF5 file", path);
    return 0;
}

/* ---- report.mat: MATLAB v7.3 -------------------------------------------------------------- */

/* A MATLAB v7.3 MAT-file is an HDF5 file whose 512-byte user block starts with the 128-byte
 * header of the older MAT formats: 116 bytes of text padded with spaces, 8 bytes of subsystem
 * offset (zero), the version 0x0200 and the endian indicator "IM". MATLAB's load reads each
 * root dataset that has the attribute MATLAB_class as the variable of that name. */
#define MAT_USERBLOCK 512

static int mat_header(const char *path)
{
    unsigned char h[128];
    char text[160], date[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a %b %d %H:%M:%S %Y", &tm);
    snprintf(text, sizeof text,
             "MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: %s HDF5 schema 1.00 .", date);
    memset(h, ' ', 116);
    size_t len = strlen(text); /* 95 characters */
    memcpy(h, text, len < 116 ? len : 116);
    memset(h + 116, 0, 8);
    h[124] = 0x00; /* version 0x0200, as MATLAB writes it on a little-endian machine */
    h[125] = 0x02;
    h[126] = 'I';
    h[127] = 'M';
    FILE *f = fopen(path, "r+b");
    if (!f)
        return -errno;
    size_t n = fwrite(h, 1, sizeof h, f);
    if (fclose(f) || n != sizeof h)
        return -EIO;
    return 0;
}

/* prefix_column as a MATLAB variable name: letters, digits and '_' only, at most 63 long. */
static void mat_name(char *out, size_t cap, const char *prefix, const char *column)
{
    snprintf(out, cap, "%s_%s", prefix, column);
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '_';
    if (strlen(out) > 63)
        out[63] = '\0';
}

static int mat_class(hid_t d, const char *cls)
{
    /* MATLAB writes the class as a fixed-length ASCII string without a terminator. */
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(cls));
    H5Tset_strpad(type, H5T_STR_NULLTERM);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(d, "MATLAB_class", type, space, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, type, cls) < 0 ? -EIO : 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

/* Each column of t as a root dataset prefix_<column>: an N-by-1 double in MATLAB, whose HDF5
 * dimensions are {1, N} (MATLAB stores arrays column-major, so HDF5 lists them reversed). */
static int mat_table(hid_t file, const char *prefix, const drths_csv_table_t *t)
{
    hsize_t dims[2] = {1, (hsize_t)t->rows};
    int rc = 0;
    for (int c = 0; c < t->ncols && !rc; c++) {
        char name[128];
        mat_name(name, sizeof name, prefix, t->names[c]);
        hid_t space = H5Screate_simple(2, dims, NULL);
        hid_t d =
            H5Dcreate2(file, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->cols[c]) < 0)
            rc = -EIO;
        if (!rc)
            rc = mat_class(d, "double");
        if (d >= 0)
            H5Dclose(d);
        H5Sclose(space);
    }
    return rc;
}

int drths_report_write_mat(const char *path, const drths_report_hdf5_t *in, drths_error_t *err)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (fcpl < 0 || H5Pset_userblock(fcpl, MAT_USERBLOCK) < 0) {
        if (fcpl >= 0)
            H5Pclose(fcpl);
        return drths_error_set(err, -EIO, "%s: cannot set up the MAT-file", path);
    }
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    if (file < 0)
        return drths_error_set(err, -EIO, "%s: cannot create the MAT-file", path);
    int rc = mat_table(file, "numerical", in->run);
    if (!rc && in->ref)
        rc = mat_table(file, "reference", in->ref);
    if (!rc && in->phys)
        rc = mat_table(file, "physical", in->phys);
    if (H5Fclose(file) < 0 && !rc)
        rc = -EIO;
    /* The header goes into the user block, which HDF5 leaves alone, once the file is closed. */
    if (!rc)
        rc = mat_header(path);
    if (rc)
        return drths_error_set(err, rc, "%s: cannot write the MAT-file", path);
    return 0;
}
