#include "common/platform/reserve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

uint64_t drths_reserve_free_bytes(const char *path)
{
    struct statvfs v;
    if (statvfs(path, &v) != 0)
        return 0;
    return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
}

/* A filesystem that reports no size at all (ramfs: 0 blocks, 0 free, and it grows until memory
 * runs out) says nothing about its space: its 0 free is not a refusal. */
static int size_unknown(const char *path)
{
    struct statvfs v;
    return statvfs(path, &v) != 0 || v.f_blocks == 0;
}

static int refuse(drths_reserve_t *r, const char *dir, uint64_t bytes, uint64_t free_b,
                  const char *what, drths_error_t *err)
{
    return drths_error_set(err, -ENOSPC,
                           "not enough space in %s for this run's records: it needs %.1f MB "
                           "(%s), the filesystem has %.1f MB free; free some space or choose "
                           "another folder (--out or output.directory)",
                           dir, (double)bytes / 1e6, what, (double)free_b / 1e6);
}

int drths_reserve_open(drths_reserve_t *r, const char *dir, uint64_t bytes, const char *what,
                       drths_error_t *err)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    int n = snprintf(r->path, sizeof r->path, "%s/%s", dir, DRTHS_RESERVE_NAME);
    if (n < 0 || (size_t)n >= sizeof r->path)
        return drths_error_set(err, -ENAMETOOLONG, "run folder path too long");
    int fd = open(r->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return drths_error_set(err, -errno, "cannot create %s: %s", r->path, strerror(errno));
    if (fallocate(fd, 0, 0, (off_t)bytes) == 0) {
        r->fd = fd;
        r->bytes = bytes;
        r->held = 1;
        return 0;
    }
    int e = errno;
    /* The file is gone before the free space is read, so the sentence counts its blocks too. */
    close(fd);
    unlink(r->path);
    uint64_t free_b = drths_reserve_free_bytes(dir);
    if (e == EOPNOTSUPP) {
        /* No fallocate here: the free space is the best that can be said. */
        if (free_b < bytes && !size_unknown(dir))
            return refuse(r, dir, bytes, free_b, what, err);
        r->bytes = bytes;
        return 0;
    }
    if (e == ENOSPC || e == EDQUOT || e == EFBIG)
        return refuse(r, dir, bytes, free_b, what, err);
    return drths_error_set(err, -e, "cannot reserve %.1f MB in %s: %s", (double)bytes / 1e6, dir,
                           strerror(e));
}

int drths_reserve_take(drths_reserve_t *r, uint64_t bytes)
{
    if (bytes > r->bytes)
        bytes = r->bytes;
    r->bytes -= bytes;
    if (r->fd < 0)
        return 0;
    /* Shortening the file frees its blocks beyond the new end. */
    if (ftruncate(r->fd, (off_t)r->bytes) != 0)
        return -errno;
    return 0;
}

void drths_reserve_release(drths_reserve_t *r)
{
    if (r->fd >= 0) {
        close(r->fd);
        unlink(r->path);
    }
    r->fd = -1;
    r->bytes = 0;
    r->held = 0;
}
