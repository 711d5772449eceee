#include "common/platform/udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/rtclock.h"

int drths_addr_parse(drths_addr_t *a, const char *text, const char *what, drths_error_t *err)
{
    char host[256];
    const char *port;
    memset(a, 0, sizeof *a);
    if (!text || !*text)
        return drths_error_set(err, -EINVAL, "%s: empty address (expected HOST:PORT)", what);
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':')
            return drths_error_set(err, -EINVAL, "%s: '%s' is not [IPv6]:PORT", what, text);
        size_t n = (size_t)(close - text - 1);
        if (n >= sizeof host)
            return drths_error_set(err, -EINVAL, "%s: host too long", what);
        memcpy(host, text + 1, n);
        host[n] = '\0';
        port = close + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (!colon)
            return drths_error_set(err, -EINVAL, "%s: '%s' has no port (expected HOST:PORT)",
                                   what, text);
        if (strchr(text, ':') != colon)
            return drths_error_set(err, -EINVAL,
                                   "%s: '%s': write IPv6 addresses as [ADDR]:PORT", what, text);
        size_t n = (size_t)(colon - text);
        if (n >= sizeof host)
            return drths_error_set(err, -EINVAL, "%s: host too long", what);
        memcpy(host, text, n);
        host[n] = '\0';
        port = colon + 1;
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        return drths_error_set(err, -EINVAL, "%s: '%s': port must be 0..65535", what, port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICSERV | (host[0] ? 0 : AI_PASSIVE)};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0 || !res)
        return drths_error_set(err, -EINVAL, "%s: cannot resolve '%s': %s", what, host,
                               gai_strerror(rc));
    memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

void drths_addr_format(const drths_addr_t *a, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a->ss;
        inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
        snprintf(out, cap, "[%s]:%u", host, ntohs(s->sin6_port));
    } else {
        const struct sockaddr_in *s = (const struct sockaddr_in *)&a->ss;
        inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
        snprintf(out, cap, "%s:%u", host, ntohs(s->sin_port));
    }
}

int drths_addr_is_loopback(const drths_addr_t *a)
{
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)&a->ss;
        return (ntohl(s->sin_addr.s_addr) >> 24) == 127;
    }
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a->ss;
        return IN6_IS_ADDR_LOOPBACK(&s->sin6_addr);
    }
    return 0;
}

int drths_addr_equal(const drths_addr_t *a, const drths_addr_t *b)
{
    if (a->ss.ss_family != b->ss.ss_family)
        return 0;
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)&a->ss;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&b->ss;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    const struct sockaddr_in *x = (const struct sockaddr_in *)&a->ss;
    const struct sockaddr_in *y = (const struct sockaddr_in *)&b->ss;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

int drths_udp_open(drths_udp_t *u, const drths_addr_t *bind_addr, const drths_addr_t *family_of,
                   drths_error_t *err)
{
    memset(u, 0, sizeof *u);
    u->fd = -1;
    const drths_addr_t *fam = bind_addr ? bind_addr : family_of;
    int family = fam ? fam->ss.ss_family : AF_INET;
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return drths_error_set(err, -errno, "cannot open a UDP socket: %s", strerror(errno));
    /* Room for a few hundred ms of datagrams at 20 kHz, so a scheduling hiccup drops nothing. */
    int bufsize = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
    int on = 1;
    u->have_kernel_ts = setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) == 0;
    if (bind_addr) {
        if (bind(fd, (const struct sockaddr *)&bind_addr->ss, bind_addr->len) != 0) {
            int e = errno;
            char text[80];
            drths_addr_format(bind_addr, text, sizeof text);
            close(fd);
            return drths_error_set(err, -e, "cannot listen on %s: %s%s", text, strerror(e),
                                   e == EADDRINUSE ? " (another drths-physical running?)" : "");
        }
    }
    u->fd = fd;
    return 0;
}

int drths_udp_local(const drths_udp_t *u, drths_addr_t *out)
{
    memset(out, 0, sizeof *out);
    out->len = sizeof out->ss;
    if (getsockname(u->fd, (struct sockaddr *)&out->ss, &out->len) != 0)
        return -errno;
    return 0;
}

int drths_udp_send(drths_udp_t *u, const drths_addr_t *to, const void *buf, size_t len)
{
    ssize_t n = sendto(u->fd, buf, len, 0, (const struct sockaddr *)&to->ss, to->len);
    if (n < 0)
        return -errno;
    return 0;
}

/* The kernel stamps with CLOCK_REALTIME; the loop runs on CLOCK_MONOTONIC. The offset between
 * them is read per batch, which is exact enough for arrival times (sub-microsecond drift). */
static int64_t realtime_to_monotonic(const struct timespec *ts)
{
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    int64_t off = ((int64_t)mono.tv_sec - rt.tv_sec) * 1000000000LL + (mono.tv_nsec - rt.tv_nsec);
    return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + off;
}

int drths_udp_recv(drths_udp_t *u, drths_udp_msg_t *msgs, int max)
{
    struct mmsghdr hdr[DRTHS_UDP_BATCH];
    struct iovec iov[DRTHS_UDP_BATCH];
    char ctrl[DRTHS_UDP_BATCH][CMSG_SPACE(sizeof(struct timespec))];
    if (max > DRTHS_UDP_BATCH)
        max = DRTHS_UDP_BATCH;
    memset(hdr, 0, sizeof hdr[0] * (size_t)max);
    for (int i = 0; i < max; i++) {
        iov[i].iov_base = msgs[i].data;
        iov[i].iov_len = sizeof msgs[i].data;
        hdr[i].msg_hdr.msg_iov = &iov[i];
        hdr[i].msg_hdr.msg_iovlen = 1;
        hdr[i].msg_hdr.msg_name = &msgs[i].from.ss;
        hdr[i].msg_hdr.msg_namelen = sizeof msgs[i].from.ss;
        hdr[i].msg_hdr.msg_control = ctrl[i];
        hdr[i].msg_hdr.msg_controllen = sizeof ctrl[i];
    }
    int n = recvmmsg(u->fd, hdr, (unsigned)max, MSG_DONTWAIT, NULL);
    if (n < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -errno;
    int64_t now = drths_now_ns();
    for (int i = 0; i < n; i++) {
        msgs[i].len = hdr[i].msg_len;
        msgs[i].from.len = hdr[i].msg_hdr.msg_namelen;
        msgs[i].rx_ns = now;
        if (hdr[i].msg_hdr.msg_flags & MSG_TRUNC)
            msgs[i].len = sizeof msgs[i].data + 1; /* the decoder rejects it as too long */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&hdr[i].msg_hdr); c;
             c = CMSG_NXTHDR(&hdr[i].msg_hdr, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                int64_t t = realtime_to_monotonic(&ts);
                if (t <= now)
                    msgs[i].rx_ns = t;
            }
        }
    }
    return n;
}

int drths_udp_wait(drths_udp_t *u, int64_t deadline_ns)
{
    for (;;) {
        int64_t left = deadline_ns - drths_now_ns();
        if (left < 0)
            left = 0;
        struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
        struct pollfd p = {.fd = u->fd, .events = POLLIN};
        int rc = ppoll(&p, 1, &ts, NULL);
        if (rc > 0)
            return 1;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

int drths_udp_wait_spin(drths_udp_t *u, int64_t deadline_ns, int64_t spin_ns)
{
    int64_t now = drths_now_ns();
    int64_t spin_end = spin_ns < deadline_ns - now ? now + spin_ns : deadline_ns;
    struct pollfd p = {.fd = u->fd, .events = POLLIN};
    while (now < spin_end) {
        int rc = poll(&p, 1, 0);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -errno;
        now = drths_now_ns();
    }
    return drths_udp_wait(u, deadline_ns);
}

int drths_udp_wait_many(drths_udp_t *const *u, int n, int64_t deadline_ns, int64_t spin_ns)
{
    struct pollfd p[DRTHS_UDP_WAIT_MAX];
    if (n < 1 || n > DRTHS_UDP_WAIT_MAX)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = u[i]->fd, .events = POLLIN};
    int64_t now = drths_now_ns();
    int64_t spin_end = spin_ns < deadline_ns - now ? now + spin_ns : deadline_ns;
    while (now < spin_end) {
        int rc = poll(p, (nfds_t)n, 0);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -errno;
        now = drths_now_ns();
    }
    for (;;) {
        int64_t left = deadline_ns - drths_now_ns();
        if (left < 0)
            left = 0;
        struct timespec ts = {.tv_sec = left / 1000000000LL, .tv_nsec = left % 1000000000LL};
        int rc = ppoll(p, (nfds_t)n, &ts, NULL);
        if (rc > 0)
            return 1;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

int drths_udp_attach_filter(drths_udp_t *u, const struct sock_filter *insns, unsigned short len)
{
    struct sock_fprog prog = {.len = len, .filter = (struct sock_filter *)insns};
    return setsockopt(u->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0 ? 0 : -errno;
}

int drths_udp_connect(drths_udp_t *u, const drths_addr_t *peer)
{
    return connect(u->fd, (const struct sockaddr *)&peer->ss, peer->len) == 0 ? 0 : -errno;
}

int64_t drths_udp_kernel_drops(const drths_udp_t *u)
{
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t len = sizeof mem;
    if (getsockopt(u->fd, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0)
        return -errno;
    return len > SK_MEMINFO_DROPS * sizeof mem[0] ? (int64_t)mem[SK_MEMINFO_DROPS] : -ENOTSUP;
}

void drths_udp_close(drths_udp_t *u)
{
    if (u->fd >= 0)
        close(u->fd);
    u->fd = -1;
}
