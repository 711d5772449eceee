#include "platform/tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/socket.h>

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
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        if (flags & DRTHS_TCP_QUICKACK) {
            int one = 1;
            (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
        }
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
