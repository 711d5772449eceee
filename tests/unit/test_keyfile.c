/* The key file loader (protocol/keyfile.h) against what a key path can name besides a key: a
 * FIFO (which used to block open() forever: SIGALRM bounds each test, so the test fails instead
 * of hanging), a directory, a character device, a socket, a symbolic link to a good key and to a
 * FIFO, and, when run as root, a 0600 key owned by another user (refused, root included). The
 * contents and mode checks are in unit.crypto. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

#include "protocol/keyfile.h"

#define ALARM_S 10 /* far above the microseconds a refusal takes */
#define NOBODY_UID 65534

static char dir[64];

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void write_key(const char *path, mode_t mode)
{
    uint8_t raw[DRTHS_KEY_BYTES];
    for (int i = 0; i < DRTHS_KEY_BYTES; i++)
        raw[i] = (uint8_t)(i + 1);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, raw, sizeof raw), (ssize_t)sizeof raw);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/drths-keyfile-XXXXXX");
    assert_non_null(mkdtemp(dir));
    alarm(ALARM_S);
    return drths_crypto_init();
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

/* Expects -EINVAL and the sentence "key file PATH is TYPE, not a regular file; ...". */
static void expect_type_refused(const char *path, const char *type)
{
    uint8_t key[DRTHS_KEY_BYTES];
    memset(key, 0xaa, sizeof key);
    drths_error_t err = {{0}};
    assert_int_equal(drths_key_load(key, path, &err), -EINVAL);
    char want[300];
    snprintf(want, sizeof want, "key file %s is %s, not a regular file; give the key file itself",
             path, type);
    if (!strstr(err.msg, want))
        fail_msg("got '%s', want '%s...'", err.msg, want);
    assert_true(sodium_is_zero(key, sizeof key));
}

static void test_fifo_refused_without_blocking(void **state)
{
    (void)state;
    char p[128];
    path_in(p, sizeof p, "fifo.key");
    assert_int_equal(mkfifo(p, 0600), 0);
    expect_type_refused(p, "a FIFO (named pipe)");
}

static void test_other_types_refused(void **state)
{
    (void)state;
    char p[128];
    path_in(p, sizeof p, "d.key");
    assert_int_equal(mkdir(p, 0700), 0);
    expect_type_refused(p, "a directory");
    expect_type_refused("/dev/null", "a character device");

    path_in(p, sizeof p, "sock.key");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(s >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    assert_true(strlen(p) < sizeof a.sun_path);
    memcpy(a.sun_path, p, strlen(p) + 1);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(chmod(p, 0600), 0);
    /* A socket cannot be opened at all: the open's own error names it. */
    uint8_t key[DRTHS_KEY_BYTES];
    drths_error_t err = {{0}};
    assert_int_equal(drths_key_load(key, p, &err), -ENXIO);
    assert_non_null(strstr(err.msg, "cannot open"));
    close(s);
}

/* A link is followed and the file it leads to is checked: a good key loads, a FIFO does not. */
static void test_symlinks_followed(void **state)
{
    (void)state;
    char key_path[128], link_path[128], fifo_path[128];
    path_in(key_path, sizeof key_path, "real.key");
    path_in(link_path, sizeof link_path, "link.key");
    path_in(fifo_path, sizeof fifo_path, "fifo");
    write_key(key_path, 0600);
    assert_int_equal(symlink(key_path, link_path), 0);
    uint8_t key[DRTHS_KEY_BYTES];
    drths_error_t err = {{0}};
    assert_int_equal(drths_key_load(key, link_path, &err), 0);
    assert_int_equal(key[0], 1);
    assert_int_equal(key[31], 32);
    unlink(link_path);
    assert_int_equal(mkfifo(fifo_path, 0600), 0);
    assert_int_equal(symlink(fifo_path, link_path), 0);
    expect_type_refused(link_path, "a FIFO (named pipe)");
}

/* As root, as README's Security section says: a key another user owns is refused. */
static void test_other_owner_refused_as_root(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("not root: cannot give a file to another user\n");
        skip();
    }
    char p[128];
    path_in(p, sizeof p, "nobody.key");
    write_key(p, 0600);
    assert_int_equal(chown(p, NOBODY_UID, (gid_t)-1), 0);
    uint8_t key[DRTHS_KEY_BYTES];
    drths_error_t err = {{0}};
    assert_int_equal(drths_key_load(key, p, &err), -EPERM);
    char want[300];
    snprintf(want, sizeof want, "key file %s is owned by uid %d, not by you (uid 0)", p,
             NOBODY_UID);
    if (!strstr(err.msg, want))
        fail_msg("got '%s', want '%s...'", err.msg, want);
    assert_true(sodium_is_zero(key, sizeof key));
    /* Given back to root it is accepted. */
    assert_int_equal(chown(p, 0, (gid_t)-1), 0);
    assert_int_equal(drths_key_load(key, p, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fifo_refused_without_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_types_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_owner_refused_as_root, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
