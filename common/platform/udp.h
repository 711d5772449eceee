/* UDP endpoints for the data plane (docs/design.md#processes-and-threads): address parsing for
 * "host:port" and "[v6]:port", a non-blocking socket, batched receive with kernel receive
 * timestamps.
 * The socket belongs to the RT thread once the run starts.
 * Ownership: drths_udp_t owns its file descriptor; _close is safe twice.
 */
#ifndef DRTHS_UDP_H
#define DRTHS_UDP_H

#include <stddef.h>
#include <stdint.h>
#include <linux/filter.h>
#include <sys/socket.h>

#include "common/platform/error.h"

#define DRTHS_UDP_BATCH 32       /* datagrams per drths_udp_recv call */
#define DRTHS_UDP_MAX_DATAGRAM 8192

typedef struct drths_addr {
    struct sockaddr_storage ss;
    socklen_t len;
} drths_addr_t;

typedef struct drths_udp_msg {
    uint8_t data[DRTHS_UDP_MAX_DATAGRAM];
    size_t len;
    drths_addr_t from;
    int64_t rx_ns; /* CLOCK_MONOTONIC arrival time (kernel timestamp converted, or read on
                    * receipt when the kernel gives none) */
} drths_udp_msg_t;

typedef struct drths_udp {
    int fd;
    int have_kernel_ts;
} drths_udp_t;

/* Parses "host:port", "[v6addr]:port" or ":port" (any address) with getaddrinfo (numeric or
 * resolvable names). what names the option in the error ("--peer"). init-only. */
int drths_addr_parse(drths_addr_t *a, const char *text, const char *what, drths_error_t *err);

/* "127.0.0.1:47000" / "[::1]:47000". RT-safe. */
void drths_addr_format(const drths_addr_t *a, char *out, size_t cap);

/* 1 for 127.0.0.0/8 and ::1 (reachable from this machine only). RT-safe. */
int drths_addr_is_loopback(const drths_addr_t *a);

/* 1 if the two addresses are the same host and port. RT-safe. */
int drths_addr_equal(const drths_addr_t *a, const drths_addr_t *b);

/* Opens a non-blocking UDP socket of a's family. If bind_addr is not NULL it binds there (an
 * actuator site's listen address; error names the address and says if it is in use); if NULL it
 * binds an ephemeral port of the same family as peer_family_of. Asks for kernel receive
 * timestamps and larger buffers. init-only. */
int drths_udp_open(drths_udp_t *u, const drths_addr_t *bind_addr, const drths_addr_t *family_of,
                   drths_error_t *err);

/* The locally bound address (to learn an ephemeral port). init-only. */
int drths_udp_local(const drths_udp_t *u, drths_addr_t *out);

/* Sends one datagram. Returns 0, or a negative errno (-EAGAIN when the socket buffer is full:
 * the datagram is dropped, as the network would). RT-safe. */
int drths_udp_send(drths_udp_t *u, const drths_addr_t *to, const void *buf, size_t len);

/* Receives up to max (<= DRTHS_UDP_BATCH) waiting datagrams without blocking into msgs.
 * Returns how many (0 if none), or a negative errno. RT-safe (recvmmsg). */
int drths_udp_recv(drths_udp_t *u, drths_udp_msg_t *msgs, int max);

/* Waits until a datagram is readable or the absolute CLOCK_MONOTONIC time deadline_ns passes.
 * Returns 1 if readable, 0 on timeout, negative errno on error (EINTR is retried). RT-safe
 * (ppoll). */
int drths_udp_wait(drths_udp_t *u, int64_t deadline_ns);

/* Attaches a classic BPF socket filter (SO_ATTACH_FILTER; protocol/wire_filter.h builds the
 * drths one), replacing any earlier one. Returns 0 or a negative errno. RT-safe (one
 * setsockopt, no allocation in user space). */
int drths_udp_attach_filter(drths_udp_t *u, const struct sock_filter *insns, unsigned short len);

/* Connects the socket to peer: from then on the kernel drops datagrams from any other address
 * before they are queued. Sending with drths_udp_send to peer still works. RT-safe. */
int drths_udp_connect(drths_udp_t *u, const drths_addr_t *peer);

/* Datagrams the kernel dropped for this socket (filter refused them or the receive buffer was
 * full; SO_MEMINFO), or a negative errno. RT-safe. */
int64_t drths_udp_kernel_drops(const drths_udp_t *u);

/* drths_udp_wait that first busy-polls (poll with a zero timeout) for up to spin_ns, then
 * sleeps in ppoll: a datagram that comes within spin_ns is seen without the scheduler's wake-up
 * latency, at the cost of a CPU while it spins. spin_ns 0 is drths_udp_wait. RT-safe. */
int drths_udp_wait_spin(drths_udp_t *u, int64_t deadline_ns, int64_t spin_ns);

/* As drths_udp_wait_spin for the first of n sockets (n <= DRTHS_UDP_WAIT_MAX) to have a
 * datagram waiting: 1 when one has, 0 at the deadline, or a negative errno. RT-safe. */
#define DRTHS_UDP_WAIT_MAX 16
int drths_udp_wait_many(drths_udp_t *const *u, int n, int64_t deadline_ns, int64_t spin_ns);

void drths_udp_close(drths_udp_t *u);

#endif
