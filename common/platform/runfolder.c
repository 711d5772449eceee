#include "common/platform/runfolder.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/cli.h"
#include "common/platform/reserve.h"

int drths_path_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

int drths_mkdirs(const char *path, drths_error_t *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return drths_error_set(err, -ENAMETOOLONG, "path too long: %s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return drths_error_set(err, -errno, "cannot create folder %s: %s", tmp,
                                   strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return drths_error_set(err, -errno, "cannot create folder %s: %s", tmp, strerror(errno));
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
        return drths_error_set(err, -ENOTDIR, "%s exists and is not a folder", tmp);
    return 0;
}

static int copy_file(const char *from, const char *to, drths_error_t *err)
{
    FILE *in = fopen(from, "rb");
    if (!in)
        return drths_error_set(err, -errno, "cannot read %s: %s", from, strerror(errno));
    FILE *out = fopen(to, "wb");
    if (!out) {
        int e = errno;
        fclose(in);
        return drths_error_set(err, -e, "cannot create %s: %s", to, strerror(e));
    }
    char buf[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -EIO;
    if (ferror(in))
        rc = -EIO;
    fclose(in);
    if (fclose(out) != 0)
        rc = -EIO;
    if (rc)
        return drths_error_set(err, rc, "copying %s to %s failed", from, to);
    return 0;
}

/* The files a run leaves in its folder (and the report drths-report may add to it). A folder
 * holding one of them holds an earlier run. */
static const char *const run_files[] = {
    "summary.json",  "provenance.json", "physical.bin",     "physical.csv",
    "numerical.bin", "numerical.csv",   "report.txt",       "report.json",
    "report.h5",     "report.mat",      DRTHS_RESERVE_NAME,
};

int drths_runfolder_check_unused(const char *dir, drths_error_t *err)
{
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
        char path[4200];
        struct stat st;
        if (drths_path_join(path, sizeof path, dir, run_files[i]) != 0)
            return drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
        if (lstat(path, &st) == 0)
            return drths_error_set(err, -EEXIST,
                                   "the run folder %s already holds an earlier run (%s): a new "
                                   "run there would leave that run's files beside its own "
                                   "records; choose a new folder with --out (or move the "
                                   "earlier run away)",
                                   dir, run_files[i]);
    }
    return 0;
}

int drths_runfolder_create(char *out, size_t cap, const char *dir, const char *base,
                           const char *label, const char *experiment_path, drths_error_t *err)
{
    int n;
    if (dir && *dir) {
        n = snprintf(out, cap, "%s", dir);
    } else {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        n = snprintf(out, cap, "%s/%s-%s", base && *base ? base : "runs", stamp, label);
    }
    if (n < 0 || (size_t)n >= cap)
        return drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
    int rc = drths_mkdirs(out, err);
    if (rc == 0)
        rc = drths_runfolder_check_unused(out, err);
    if (rc)
        return rc;
    if (experiment_path) {
        char to[4096];
        if (drths_path_join(to, sizeof to, out, "experiment.yaml"))
            return drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
        return copy_file(experiment_path, to, err);
    }
    return 0;
}

/* The commit in drths_version(): "0.1.0 (git v0.1-3-gabc1234-dirty)" gives "abc1234-dirty",
 * "0.1.0 (git abc1234)" gives "abc1234"; "" without git. */
static void commit_of(const char *version, char *out, size_t cap)
{
    out[0] = '\0';
    const char *d = strstr(version, "(git ");
    if (!d)
        return;
    d += 5;
    const char *end = strchr(d, ')');
    size_t n = end ? (size_t)(end - d) : strlen(d);
    const char *g = NULL;
    for (const char *p = d; p + 2 < d + n; p++)
        if (p[0] == '-' && p[1] == 'g')
            g = p + 2;
    if (g) {
        n -= (size_t)(g - d);
        d = g;
    }
    snprintf(out, cap, "%.*s", (int)n, d);
}

/* A word the shell takes as it is, or the word in single quotes. */
static size_t quote_arg(char *out, size_t cap, const char *a)
{
    int plain = *a != '\0';
    for (const char *p = a; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%", *p))
            plain = 0;
    if (plain)
        return (size_t)snprintf(out, cap, "%s", a);
    size_t n = (size_t)snprintf(out, cap, "'");
    for (const char *p = a; *p && n < cap; p++)
        n += (size_t)(*p == '\'' ? snprintf(out + n, cap - n, "'\\''")
                                 : snprintf(out + n, cap - n, "%c", *p));
    if (n < cap)
        n += (size_t)snprintf(out + n, cap - n, "'");
    return n;
}

void drths_provenance_init(drths_provenance_t *p, int argc, char *const *argv)
{
    memset(p, 0, sizeof *p);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(p->started_utc, sizeof p->started_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (gethostname(p->host, sizeof p->host - 1) != 0)
        snprintf(p->host, sizeof p->host, "unknown");
    snprintf(p->version, sizeof p->version, "%s", drths_version());
    commit_of(p->version, p->commit, sizeof p->commit);
    size_t n = 0, cap = sizeof p->command_line;
    for (int i = 0; i < argc && n < cap; i++) {
        if (i)
            n += (size_t)snprintf(p->command_line + n, cap - n, " ");
        if (n < cap)
            n += quote_arg(p->command_line + n, cap - n, argv[i]);
    }
}

void drths_provenance_json(drths_json_t *j, const char *key, const drths_provenance_t *p)
{
    drths_json_object_begin(j, key);
    drths_json_string(j, "started_utc", p->started_utc);
    drths_json_string(j, "host", p->host);
    drths_json_string(j, "version", p->version);
    drths_json_string(j, "commit", p->commit);
    drths_json_string(j, "key_id", p->key_id);
    drths_json_string(j, "fingerprint", p->fingerprint);
    drths_json_string(j, "command_line", p->command_line);
    drths_json_string(j, "real_time", p->real_time);
    drths_json_string(j, "experiment_file", p->experiment_file);
    drths_json_string(j, "record_file", p->record_file);
    drths_json_string(j, "record_source", p->record_source);
    drths_json_object_end(j);
}

int drths_runfolder_json_open(drths_json_t *j, const char *dir, const char *name, char *path,
                              size_t cap, drths_error_t *err)
{
    if (drths_path_join(path, cap, dir, name))
        return drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
    return drths_json_file_open(j, path, err);
}

int drths_provenance_write(const char *dir, const drths_provenance_t *p, drths_error_t *err)
{
    char path[4096];
    drths_json_t j;
    int r = drths_runfolder_json_open(&j, dir, "provenance.json", path, sizeof path, err);
    if (r)
        return r;
    drths_provenance_json(&j, "provenance", p);
    return drths_json_file_close(&j, path, err);
}

int drths_runfolder_copy_record(const char *dir, const char *record_path, const char *as_written,
                                char *rel, size_t cap, drths_error_t *err)
{
    rel[0] = '\0';
    if (!record_path)
        return 0;
    /* The experiment's own relative path when it stays below the folder (no "..", not
     * absolute), so that the folder's experiment.yaml runs as it is. */
    int inside = as_written && as_written[0] && as_written[0] != '/' &&
                 strstr(as_written, "..") == NULL;
    const char *base = strrchr(record_path, '/');
    int n = inside ? snprintf(rel, cap, "%s", as_written)
                   : snprintf(rel, cap, "records/%s", base ? base + 1 : record_path);
    if (n < 0 || (size_t)n >= cap)
        return drths_error_set(err, -ENAMETOOLONG, "record path too long");
    char to[4096];
    if (drths_path_join(to, sizeof to, dir, rel))
        return drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
    char *slash = strrchr(to, '/');
    if (slash > to + strlen(dir)) {
        *slash = '\0';
        int rc = drths_mkdirs(to, err);
        *slash = '/';
        if (rc)
            return rc;
    }
    /* A run folder that is the experiment's own folder already holds the record. */
    struct stat a, b;
    if (stat(record_path, &a) == 0 && stat(to, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return 0;
    return copy_file(record_path, to, err);
}
