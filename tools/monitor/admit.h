/* Which HTTP connections drths-monitor keeps (docs/monitor.md, "Who gets a connection"). Pure
 * bookkeeping: no sockets, no clocks (times are passed in), no locking (the caller serialises
 * every call). The caller closes the connections this module names.
 *
 * Two pools. A connection is "other" while it sends a request or waits for its answer (the
 * page, /sites, control), "stream" while it holds an event stream. Each pool has a cap per
 * client address and in all. A new connection or a new stream is never refused: when a cap is
 * passed, one connection of the pool is named to be dropped instead (a victim):
 *   - per address: one of that address's own, one that has not yet sent a complete request
 *     (with the token, when the monitor has one) first, then the oldest;
 *   - in all: the oldest connection that has not yet sent a complete request, whatever its
 *     address (the young ones are about to send theirs, the operator's among them); when every
 *     one has, the oldest of the address that holds the most.
 * So neither slow nor idle nor many connections can keep the operator's next request out: it
 * always gets a connection, and it sends its request at once, so it is not the one dropped.
 * Deadlines: a request (headers and body) must be complete within request_ns of the
 * connection's opening or of its previous answer; an answer other than a stream must be sent
 * within answer_ns. Streams have none (they send a comment every second).
 * The slots beyond the two pools' caps are a reserve: they hold only the connections being
 * closed, so the server's own limit (DRTHS_ADMIT_SLOTS) is never what turns the operator away. */
#ifndef DRTHS_MONITOR_ADMIT_H
#define DRTHS_MONITOR_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#define DRTHS_ADMIT_SLOTS 160 /* connections in all, the server's limit */

typedef enum { DRTHS_ADMIT_OTHER, DRTHS_ADMIT_STREAM, DRTHS_ADMIT_NPOOLS } drths_admit_pool_t;

typedef struct drths_admit_limits {
    unsigned per_host[DRTHS_ADMIT_NPOOLS]; /* connections of one client address */
    unsigned max[DRTHS_ADMIT_NPOOLS];      /* in all; their sum below DRTHS_ADMIT_SLOTS */
    int64_t request_ns, answer_ns;
} drths_admit_limits_t;

typedef struct drths_admit_conn {
    int used;
    int dropping;     /* named as a victim or expired: counted in no pool */
    uint8_t host[16]; /* the client's address, the port aside */
    size_t host_len;
    drths_admit_pool_t pool;
    int proven;          /* sent a complete request, with the token if one is needed */
    int answering;       /* its request is complete, its answer not yet sent */
    int64_t deadline_ns; /* 0: none (a stream) */
    uint64_t order;      /* when it entered its pool: the smallest is the oldest */
    int fd;              /* the caller's: not used here */
    void *user;          /* the caller's: not used here */
} drths_admit_conn_t;

typedef struct drths_admit {
    drths_admit_limits_t lim;
    drths_admit_conn_t conn[DRTHS_ADMIT_SLOTS];
    uint64_t order;
} drths_admit_t;

/* The limits drths-monitor uses: other 32 per address, 96 in all; streams 4 per address, 16
 * in all; a request within 3 s, an answer within 10 s. Sized so that 16 event readers that
 * reconnect at once when dropped, from the operator's own address, and 64 slow or reading
 * clients from four others (issue 29) displace no request at all: the operator's connections
 * fit beside them (a browser opens up to 6). Past these numbers the rule of who is dropped
 * still favours the operator, whose request comes at once. */
extern const drths_admit_limits_t drths_admit_default_limits;

/* Empty bookkeeping with these limits (copied). */
void drths_admit_init(drths_admit_t *a, const drths_admit_limits_t *lim);

/* A new connection from host (4 or 16 bytes) at now: its slot, or NULL when every slot is taken
 * (the caller closes it). *victim: a connection to drop to keep the "other" pool within its caps
 * (already marked dropping), or NULL. */
drths_admit_conn_t *drths_admit_open(drths_admit_t *a, const void *host, size_t host_len,
                                     int64_t now, drths_admit_conn_t **victim);

/* The connection's request headers are complete; proven: it showed the token (or none is
 * needed). Only a proven connection is protected from being dropped before unproven ones. */
void drths_admit_headers(drths_admit_conn_t *c, int proven);

/* The request is complete and answered now (other pool, the answer's deadline). */
void drths_admit_answer(drths_admit_t *a, drths_admit_conn_t *c, int64_t now);

/* The request is an event stream: the connection moves to the stream pool. *victim: a stream
 * to end to keep the pool within its caps (marked dropping), or NULL. */
void drths_admit_stream(drths_admit_t *a, drths_admit_conn_t *c, drths_admit_conn_t **victim);

/* The answer was sent: the connection waits for its next request (the request's deadline). */
void drths_admit_done(drths_admit_t *a, drths_admit_conn_t *c, int64_t now);

/* The connection is closed: its slot is free. Safe on a slot already closed. */
void drths_admit_close(drths_admit_conn_t *c);

/* Marks dropping, and puts in out (at most cap), the connections past their deadline at now;
 * returns how many. */
size_t drths_admit_expired(drths_admit_t *a, int64_t now, drths_admit_conn_t **out, size_t cap);

/* Connections of pool counted (not dropping) from host, or from every address (host NULL). */
unsigned drths_admit_count(const drths_admit_t *a, drths_admit_pool_t pool, const void *host,
                           size_t host_len);

#endif
