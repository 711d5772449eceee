#include "common/platform/tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/platform/rtclock.h"

int drths_tcp_send_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

ssize_t drths_tcp_recv(int fd, void *buf, size_t n, int flags)
{
    return drths_tcp_recv_until(fd, buf, n, flags, -1);
}

/* Waits until fd is readable or deadline_ns passes. Returns 0 (readable, or no deadline),
 * -ETIMEDOUT, or a negative errno. */
static int wait_readable(int fd, int64_t deadline_ns)
{
    if (deadline_ns < 0)
        return 0;
    for (;;) {
        int64_t left = deadline_ns - drths_now_ns();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {fd, POLLIN, 0};
        /* Round up, so that the last wait does not end a fraction of a ms early and spin. */
        int r = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
    }
}

ssize_t drths_tcp_recv_until(int fd, void *buf, size_t n, int flags, int64_t deadline_ns)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        if (flags & DRTHS_TCP_QUICKACK) {
            int one = 1;
            (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
        }
        int w = wait_readable(fd, deadline_ns);
        if (w < 0)
            return w;
        ssize_t k = recv(fd, p + got, n - got, 0);
        if (k == 0)
            break;
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)k;
    }
    return (ssize_t)got;
}

int drths_tcp_keepalive(int fd, int idle_s, int interval_s, int count)
{
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count) != 0)
        return -errno;
    return 0;
}
