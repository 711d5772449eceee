/* Exact-length I/O on a connected stream socket (TCP, or AF_UNIX in tests): the OpenFresco
 * link (site-physical/openfresco_app.c), its client tool and its test send and receive
 * fixed-size messages, and a stream may deliver them in pieces.
 * Ownership: the caller owns the descriptor and the buffers; nothing here allocates.
 */
#ifndef DRTHS_TCP_H
#define DRTHS_TCP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* drths_tcp_recv flag: set TCP_QUICKACK before every recv. The kernel leaves quick-ACK mode by
 * itself, and a delayed ACK would hold back a peer that writes two messages without
 * TCP_NODELAY (OpenFresco's client). Ignored on a socket that is not TCP. */
#define DRTHS_TCP_QUICKACK 1

/* Sends all n bytes (MSG_NOSIGNAL: a closed peer gives -EPIPE, not SIGPIPE), retrying after
 * EINTR and short sends. Returns 0 or a negative errno. Blocking; I/O threads only. */
int drths_tcp_send_all(int fd, const void *buf, size_t n);

/* Receives until n bytes are in buf, retrying after EINTR. Returns n; fewer (0 included) when
 * the peer closed the connection first, the count of bytes it did send; or a negative errno
 * (-EAGAIN after SO_RCVTIMEO). flags: 0 or DRTHS_TCP_QUICKACK. Blocking; I/O threads only. */
ssize_t drths_tcp_recv(int fd, void *buf, size_t n, int flags);

/* drths_tcp_recv with a deadline: before each receive it waits (poll) until the absolute
 * CLOCK_MONOTONIC time deadline_ns at most, and returns -ETIMEDOUT once it has passed with fewer
 * than n bytes in buf (those already received stay there). A negative deadline_ns waits for
 * ever, as drths_tcp_recv. The deadline bounds the whole message, so a peer that trickles one
 * byte at a time cannot stretch it. Blocking; I/O threads only. */
ssize_t drths_tcp_recv_until(int fd, void *buf, size_t n, int flags, int64_t deadline_ns);

/* Turns on TCP keepalive: after idle_s seconds without traffic the kernel probes the peer every
 * interval_s seconds and, after count unanswered probes, fails the connection (a blocked recv
 * then returns -ETIMEDOUT), so a peer machine that died or was cut off is noticed within
 * idle_s + count * interval_s even when neither side has anything to send. Returns 0 or a
 * negative errno. init-only. */
int drths_tcp_keepalive(int fd, int idle_s, int interval_s, int count);

#endif
