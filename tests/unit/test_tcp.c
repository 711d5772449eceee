#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/platform/rtclock.h"
#include "common/platform/tcp.h"

static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* A message written in three pieces is read whole; the next read gets what follows. */
static void test_recv_pieces(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    const char *text = "0123456789abcdef";
    assert_int_equal(write(sv[1], text, 3), 3);
    assert_int_equal(write(sv[1], text + 3, 4), 4);
    assert_int_equal(write(sv[1], text + 7, 9), 9);
    char buf[16];
    assert_int_equal(drths_tcp_recv(sv[0], buf, 10, 0), 10);
    assert_memory_equal(buf, text, 10);
    assert_int_equal(drths_tcp_recv(sv[0], buf, 6, 0), 6);
    assert_memory_equal(buf, text + 10, 6);
    close(sv[0]);
    close(sv[1]);
}

/* A close before any byte reads 0; a close in the middle reads what was sent. */
static void test_recv_close(void **state)
{
    (void)state;
    int sv[2];
    char buf[8];
    pair(sv);
    close(sv[1]);
    assert_int_equal(drths_tcp_recv(sv[0], buf, sizeof buf, 0), 0);
    close(sv[0]);
    pair(sv);
    assert_int_equal(write(sv[1], "abc", 3), 3);
    close(sv[1]);
    assert_int_equal(drths_tcp_recv(sv[0], buf, sizeof buf, 0), 3);
    assert_memory_equal(buf, "abc", 3);
    close(sv[0]);
}

/* An error is a negative errno: a receive timeout, a send to a closed peer (no SIGPIPE). */
static void test_errors(void **state)
{
    (void)state;
    int sv[2];
    char buf[8];
    pair(sv);
    struct timeval tv = {0, 20000};
    assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    assert_int_equal(drths_tcp_recv(sv[0], buf, sizeof buf, 0), -EAGAIN);
    close(sv[0]);
    assert_int_equal(drths_tcp_send_all(sv[1], "abc", 3), -EPIPE);
    close(sv[1]);
}

enum { BIG = 4 << 20 };
static uint8_t big_out[BIG], big_in[BIG];

static void *reader(void *arg)
{
    int fd = *(int *)arg;
    ssize_t k = drths_tcp_recv(fd, big_in, BIG, 0);
    return (void *)(intptr_t)k;
}

/* 4 MiB, far more than a socket buffer, goes through send_all whole and in order. */
static void test_send_all_big(void **state)
{
    (void)state;
    int sv[2];
    pair(sv);
    for (size_t i = 0; i < BIG; i++)
        big_out[i] = (uint8_t)(i * 131 + (i >> 13));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reader, &sv[0]), 0);
    assert_int_equal(drths_tcp_send_all(sv[1], big_out, BIG), 0);
    void *res;
    assert_int_equal(pthread_join(t, &res), 0);
    assert_int_equal((intptr_t)res, BIG);
    assert_memory_equal(big_in, big_out, BIG);
    close(sv[0]);
    close(sv[1]);
}

/* On a real loopback TCP connection, with TCP_QUICKACK re-armed before every receive. */
static void test_tcp_quickack(void **state)
{
    (void)state;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(listen(l, 1), 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    int s = accept(l, NULL, NULL);
    assert_true(s >= 0);
    double v[3] = {1.5, -2.25, 3.0}, w[3];
    for (int i = 0; i < 100; i++) {
        v[0] = i;
        assert_int_equal(drths_tcp_send_all(c, v, sizeof v), 0);
        assert_int_equal(drths_tcp_recv(s, w, sizeof w, DRTHS_TCP_QUICKACK), (ssize_t)sizeof w);
        assert_memory_equal(v, w, sizeof v);
    }
    close(c);
    assert_int_equal(drths_tcp_recv(s, w, sizeof w, DRTHS_TCP_QUICKACK), 0);
    close(s);
    close(l);
}

/* A deadline bounds the whole message: what arrived stays in the buffer, the rest times out;
 * with the bytes there before the deadline it reads as drths_tcp_recv does. */
static void test_recv_until(void **state)
{
    (void)state;
    int sv[2];
    char buf[8];
    pair(sv);
    assert_int_equal(write(sv[1], "abc", 3), 3);
    int64_t t0 = drths_now_ns();
    assert_int_equal(drths_tcp_recv_until(sv[0], buf, sizeof buf, 0, t0 + 20000000), -ETIMEDOUT);
    assert_true(drths_now_ns() - t0 >= 20000000);
    assert_memory_equal(buf, "abc", 3);
    /* A deadline already passed times out without reading, even with bytes waiting. */
    assert_int_equal(write(sv[1], "defgh", 5), 5);
    assert_int_equal(drths_tcp_recv_until(sv[0], buf, 5, 0, drths_now_ns() - 1), -ETIMEDOUT);
    assert_int_equal(drths_tcp_recv_until(sv[0], buf, 5, 0, drths_now_ns() + 1000000000), 5);
    assert_memory_equal(buf, "defgh", 5);
    close(sv[1]);
    assert_int_equal(drths_tcp_recv_until(sv[0], buf, 5, 0, drths_now_ns() + 1000000000), 0);
    close(sv[0]);
}

static int get_int(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof v;
    assert_int_equal(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

/* Keepalive with its three times on a TCP socket; an AF_UNIX socket has no TCP options. */
static void test_keepalive(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(get_int(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
    assert_int_equal(drths_tcp_keepalive(fd, 5, 1, 5), 0);
    assert_int_equal(get_int(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    assert_int_equal(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE), 5);
    assert_int_equal(get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL), 1);
    assert_int_equal(get_int(fd, IPPROTO_TCP, TCP_KEEPCNT), 5);
    close(fd);
    int sv[2];
    pair(sv);
    assert_true(drths_tcp_keepalive(sv[0], 5, 1, 5) < 0);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recv_pieces),  cmocka_unit_test(test_recv_close),
        cmocka_unit_test(test_errors),       cmocka_unit_test(test_send_all_big),
        cmocka_unit_test(test_tcp_quickack), cmocka_unit_test(test_recv_until),
        cmocka_unit_test(test_keepalive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
