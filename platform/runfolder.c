#include "platform/runfolder.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
