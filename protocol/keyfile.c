#include "protocol/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "a FIFO (named pipe)" for the error sentence; only called for what is not a regular file. */
static const char *type_name(mode_t m)
{
    if (S_ISFIFO(m))
        return "a FIFO (named pipe)";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISLNK(m))
        return "a symbolic link";
    return "not a file of a known type";
}

/* The checks on the opened descriptor: a regular file, mode 0600 or stricter, our own. */
static int check_file(int fd, const char *path, drths_error_t *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        return drths_error_set(err, -e, "key file %s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode))
        return drths_error_set(err, -EINVAL,
                               "key file %s is %s, not a regular file; give the key file "
                               "itself (made by drths-keygen)",
                               path, type_name(st.st_mode));
    unsigned mode = (unsigned)(st.st_mode & 07777);
    if (mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH)) {
        const char *what = (mode & (S_IRGRP | S_IROTH)) ? "readable" : "writable";
        const char *who = (mode & (S_IROTH | S_IWOTH)) ? "others" : "its group";
        return drths_error_set(err, -EPERM, "key file %s is %s by %s (mode %04o); chmod 600 %s",
                               path, what, who, mode, path);
    }
    /* Root included: whoever owns the file may chmod it or replace its contents at any time,
     * so a key owned by another user is that user's key, whoever runs the site. */
    uid_t me = geteuid();
    if (st.st_uid == me)
        return 0;
    if (me == 0)
        return drths_error_set(err, -EPERM,
                               "key file %s is owned by uid %u, not by you (uid 0), so its "
                               "owner can read or replace it; give it to root (chown root %s) "
                               "or use a key file of root's own",
                               path, (unsigned)st.st_uid, path);
    return drths_error_set(err, -EPERM,
                           "key file %s is owned by uid %u, not by you (uid %u), so its owner "
                           "can read or replace it; use a key file of your own",
                           path, (unsigned)st.st_uid, (unsigned)me);
}

/* Reads up to cap bytes (all of a regular file's first cap bytes). Returns the count or a
 * negative errno. */
static ssize_t read_some(int fd, uint8_t *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    return (ssize_t)n;
}

/* The contents: 32 raw bytes, or 64 hex digits with an optional "\n" or "\r\n". cap is the
 * size of the buffer read into, so n == cap means "more than cap - 1". */
static int parse_key(uint8_t key[DRTHS_KEY_BYTES], const uint8_t *buf, size_t n, size_t cap,
                     const char *path, drths_error_t *err)
{
    size_t hexlen = n;
    if (hexlen > 0 && buf[hexlen - 1] == '\n')
        hexlen--;
    if (hexlen > 0 && buf[hexlen - 1] == '\r' && hexlen + 1 == n)
        hexlen--;
    if (n == DRTHS_KEY_BYTES) {
        memcpy(key, buf, DRTHS_KEY_BYTES);
        return 0;
    }
    if (hexlen == 2 * DRTHS_KEY_BYTES) {
        for (size_t i = 0; i < DRTHS_KEY_BYTES; i++) {
            int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);
            if (hi < 0 || lo < 0)
                return drths_error_set(err, -EINVAL,
                                       "key file %s: %zu bytes but not hex: byte %zu is not a "
                                       "hex digit; expected 32 raw bytes or 64 hex digits",
                                       path, n, hi < 0 ? 2 * i : 2 * i + 1);
            key[i] = (uint8_t)(hi << 4 | lo);
        }
        return 0;
    }
    if (n == cap)
        return drths_error_set(err, -EINVAL,
                               "key file %s must be exactly 32 bytes (or 64 hex digits), got "
                               "more than %zu; make one with drths-keygen",
                               path, cap - 1);
    return drths_error_set(err, -EINVAL,
                           "key file %s must be exactly 32 bytes (or 64 hex digits), got %zu; "
                           "make one with drths-keygen",
                           path, n);
}

int drths_key_load(uint8_t key[DRTHS_KEY_BYTES], const char *path, drths_error_t *err)
{
    sodium_memzero(key, DRTHS_KEY_BYTES);
    if (!path || !*path)
        return drths_error_set(err, -EINVAL, "no key file given");
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever (a
     * regular file ignores the flag). O_NOCTTY: a terminal named as the key never becomes the
     * site's controlling terminal. No O_NOFOLLOW: see the file comment. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        return drths_error_set(err, -e, "key file %s: cannot open: %s", path, strerror(e));
    }
    int rc = check_file(fd, path, err);
    /* A little more than the largest accepted form, so that a wrong size is reported with its
     * real value for small files and as "more than" for big ones. */
    uint8_t buf[80];
    ssize_t n = 0;
    if (rc == 0 && (n = read_some(fd, buf, sizeof buf)) < 0)
        rc = drths_error_set(err, (int)n, "key file %s: read failed: %s", path, strerror((int)-n));
    close(fd);
    if (rc == 0)
        rc = parse_key(key, buf, (size_t)n, sizeof buf, path, err);
    sodium_memzero(buf, sizeof buf);
    if (rc == 0 && sodium_is_zero(key, DRTHS_KEY_BYTES))
        rc = drths_error_set(err, -EINVAL,
                             "key file %s holds an all-zero key; make one with drths-keygen", path);
    if (rc != 0)
        sodium_memzero(key, DRTHS_KEY_BYTES);
    return rc;
}
