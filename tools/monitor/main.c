/* drths-monitor: the live monitor of a run (docs/monitor.md). Receives the sites' telemetry (one
 * authenticated JSON frame per UDP datagram, common/platform/telemetry.h), keeps the recent frames
 * in memory, serves the page from the web directory (tools/web-build puts it in build/web), streams
 * the frames to the page as server-sent events (GET /events) and forwards Start / Stop / Abort
 * (POST /control/...) to the sites as authenticated control datagrams on the same UDP socket.
 *
 * Sites. A frame counts only when its MAC checks with a monitor key (derived from a link key,
 * --key, one per link of a test with several laboratories; a site keeps the key of its first
 * frame) and it is newer than the site's last one; anything else is dropped and counted by
 * reason. A site's address is pinned by its first authenticated frame and moves only with a
 * frame of a later epoch (the site was restarted); control goes to the pinned address only.
 * A control datagram is retransmitted every 100 ms until the site's frames acknowledge it (their
 * ACK), at most 20 times; GET /sites says per site whether it was acknowledged and when.
 *
 * HTTP is libmicrohttpd with a thread per connection: an /events stream blocks in its reader on
 * a condition variable until new frames arrive. The main thread receives the telemetry.
 *
 * Security: it listens on 127.0.0.1 by default. Any other address needs --token FILE; every
 * request must then carry the token (?token=... or the X-Drths-Token header). Control requests
 * also need the header X-Drths-Control: 1, which a page of another origin cannot send without a
 * CORS preflight this server never grants, and on loopback the Host header must name loopback
 * (DNS rebinding).
 *
 * Reachability (admit.h): every connection is accounted in one of two pools, requests (32 per
 * address, 96 in all) and event streams (4 per address, 16 in all); a new one past a cap drops
 * an older one (one that has not yet sent a complete request with the token first, the oldest
 * first) instead of being refused; a request must be complete within 3 s and its answer sent
 * within 10 s; the server's 160 slots leave a reserve for the connections being closed. So the
 * operator's page and Abort get a connection whatever the others hold.
 * A connection is dropped by shutdown(2) on our duplicate of its socket: libmicrohttpd's thread
 * for it then sees the end and closes it; a stream's reader also ends at its next wake-up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <sodium.h>

#include "common/platform/cli.h"
#include "common/platform/error.h"
#include "common/platform/telemetry.h"
#include "common/platform/udp.h"
#include "protocol/crypto.h"
#include "protocol/keyfile.h"
#include "tools/monitor/admit.h"

#define PROG "drths-monitor"
#define RING 8192          /* frames kept (about 80 s of two sites at 50 Hz, 27 s of six) */
#define BACKLOG_FRAMES 2000 /* a new page gets the last 20 s */
/* The numerical site, up to 8 actuator sites (a file with sites) and a spare. */
#define MAX_SITES 10
#define MAX_KEYS 8 /* --key: one per link */
#define LINE_MAX_BYTES DRTHS_TELEMETRY_MAX_DATAGRAM
#define RETRY_NS 100000000LL /* control retransmitted every 100 ms until acknowledged */
#define MAX_TRIES 20         /* ... for at most 2 s */
#define HTTP_TIMEOUT_S 5u    /* libmicrohttpd closes a connection idle for this */
#define MHD_LOG_EVERY_NS 10000000000LL /* libmicrohttpd's messages: at most one per 10 s */

/* Telemetry datagrams dropped, by reason. */
enum { REJ_MALFORMED, REJ_MAC, REJ_REPLAY, REJ_ADDRESS, REJ_NO_SLOT, REJ_N };
static const char *const rej_name[REJ_N] = {"malformed", "bad_mac", "replay", "address",
                                            "no_slot"};

/* The last control command sent to a site and whether its frames acknowledged it. */
typedef struct control {
    drths_telemetry_cmd_t cmd; /* NONE: nothing sent yet */
    uint64_t ctr;
    int tries;
    int64_t next_ns;            /* next retransmission (monotonic) */
    struct timespec sent_at, acked_at;
    int acked;
} control_t;

/* --site NAME=HOST: frames of NAME are taken from HOST only (any port: a site's telemetry
 * socket has an ephemeral port). */
typedef struct fixed_host {
    char name[DRTHS_TELEMETRY_SITE_MAX];
    drths_addr_t addr; /* port ignored */
} fixed_host_t;

typedef struct site {
    char name[DRTHS_TELEMETRY_SITE_MAX];
    drths_addr_t addr; /* pinned by the first authenticated frame of its epoch */
    uint64_t epoch, seq, ack;
    int64_t last_ns;
    uint64_t frames;
    char state[16];
    int key;           /* the --key its first frame was authenticated with */
    control_t ctl;
} site_t;

typedef struct monitor {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char (*lines)[LINE_MAX_BYTES]; /* RING frames, each NUL-terminated without the newline */
    uint64_t next;                 /* sequence number of the next frame */
    site_t sites[MAX_SITES];
    int nsites;
    int fd;                        /* telemetry socket */
    atomic_int quit;
    char token[DRTHS_TELEMETRY_TOKEN_MAX];
    size_t token_len;              /* 0: no token needed by the page */
    uint8_t key[MAX_KEYS][DRTHS_TELEMETRY_KEY_BYTES]; /* the monitor keys, one per --key */
    int nkeys;
    uint64_t ctr;                  /* the last control counter used */
    int loopback;                  /* listening on a loopback address */
    char web[PATH_MAX];
    uint64_t controls_sent, rejected[REJ_N];
    int64_t mac_warned_ns;         /* when a wrong key was last said */
    fixed_host_t fixed[MAX_SITES]; /* --site */
    int nfixed;
    drths_admit_t admit;      /* the HTTP connections (admit.h), under mu */
    uint64_t http_displaced;  /* connections dropped for a newer one */
    uint64_t http_expired;    /* ... past their deadline */
    uint64_t http_refused;    /* ... with no slot at all */
    int64_t mhd_logged_ns;    /* when libmicrohttpd's last message was printed */
    uint64_t mhd_log_skipped; /* and how many were not printed since */
} monitor_t;

static monitor_t M;

static void reap(void); /* HTTP connections past their deadline (below) */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_quit(int sig)
{
    (void)sig;
    atomic_store(&M.quit, 1);
}

/* ---- telemetry in ------------------------------------------------------------------------ */

/* The "state" string value of a frame (plain names: no escapes). */
static int json_str(const char *line, const char *key, char *out, size_t cap)
{
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(line, pat);
    if (!p)
        return -1;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p++ != ':')
        return -1;
    while (*p == ' ')
        p++;
    if (*p++ != '"')
        return -1;
    size_t n = 0;
    while (p[n] && p[n] != '"' && p[n] != '\\' && n + 1 < cap)
        n++;
    if (p[n] != '"' || n == 0)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

/* The same host (the port aside). */
static int same_host(const drths_addr_t *a, const drths_addr_t *b)
{
    if (a->ss.ss_family != b->ss.ss_family)
        return 0;
    if (a->ss.ss_family == AF_INET)
        return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)&b->ss)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr,
                  &((const struct sockaddr_in6 *)&b->ss)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/* 0 when --site does not name this site or names the host it sends from. */
static int wrong_host(const char *name, const drths_addr_t *from)
{
    for (int i = 0; i < M.nfixed; i++)
        if (strcmp(M.fixed[i].name, name) == 0)
            return !same_host(&M.fixed[i].addr, from);
    return 0;
}

/* A wrong key at one end is the likely cause of frames failing their MAC: said on stderr, at
 * most every 10 s, with the sender. */
static void warn_mac(const drths_addr_t *from)
{
    int64_t now = now_ns();
    if (M.mac_warned_ns && now - M.mac_warned_ns < 10000000000LL)
        return;
    M.mac_warned_ns = now;
    char a[80];
    drths_addr_format(from, a, sizeof a);
    fprintf(stderr, PROG ": telemetry from %s fails authentication (dropped): is --key the "
            "sites' key file?\n", a);
}

/* The site a datagram of h from `from` may update, or NULL with the reason counted. A site
 * named by --site must send from its host. A new name takes a free slot and pins its address; a later epoch (the site restarted) moves the
 * pin; within an epoch, frames must come from the pin and be newer. Called with M.mu held. */
static site_t *site_for(const drths_telemetry_header_t *h, int key, const drths_addr_t *from)
{
    if (wrong_host(h->site, from)) {
        M.rejected[REJ_ADDRESS]++;
        return NULL;
    }
    for (int i = 0; i < M.nsites; i++) {
        site_t *s = &M.sites[i];
        if (strcmp(s->name, h->site) != 0)
            continue;
        if (key != s->key) { /* authentic with another link's key, not this site's */
            M.rejected[REJ_MAC]++;
            return NULL;
        }
        if (h->epoch < s->epoch || (h->epoch == s->epoch && h->seq <= s->seq)) {
            M.rejected[REJ_REPLAY]++;
            return NULL;
        }
        if (h->epoch == s->epoch && !drths_addr_equal(from, &s->addr)) {
            M.rejected[REJ_ADDRESS]++;
            return NULL;
        }
        if (h->epoch > s->epoch) { /* the site was restarted: a new pin, a new count */
            s->addr = *from;
            s->epoch = h->epoch;
            s->ack = 0;
            /* A command meant for the earlier run is not carried over to this one (a Start
             * pressed for the run that ended must not start the next): its retries end, and
             * it stays unacknowledged. */
            s->ctl.tries = MAX_TRIES;
        }
        return s;
    }
    if (M.nsites == MAX_SITES) {
        M.rejected[REJ_NO_SLOT]++;
        return NULL;
    }
    site_t *s = &M.sites[M.nsites++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", h->site);
    s->key = key;
    s->addr = *from;
    s->epoch = h->epoch;
    return s;
}

static void take_frame(const char *buf, size_t len, const drths_addr_t *from)
{
    drths_telemetry_header_t h;
    int rc = -EACCES, key = 0;
    for (; key < M.nkeys && rc == -EACCES; key++)
        rc = drths_telemetry_frame_open(M.key[key], buf, len, &h);
    key--;
    char line[LINE_MAX_BYTES], state[16];
    if (rc == 0 && h.json_len >= sizeof line)
        rc = -EINVAL;
    if (rc == 0) {
        memcpy(line, h.json, h.json_len);
        line[h.json_len] = '\0';
        if (json_str(line, "state", state, sizeof state) != 0)
            rc = -EINVAL;
    }
    pthread_mutex_lock(&M.mu);
    site_t *s = NULL;
    if (rc == -EACCES) {
        M.rejected[REJ_MAC]++;
        warn_mac(from);
    } else if (rc != 0) {
        M.rejected[REJ_MALFORMED]++;
    } else {
        s = site_for(&h, key, from);
    }
    if (s) {
        s->seq = h.seq;
        s->last_ns = now_ns();
        s->frames++;
        snprintf(s->state, sizeof s->state, "%s", state);
        if (h.ack > s->ack)
            s->ack = h.ack;
        if (s->ctl.cmd != DRTHS_TELEM_CMD_NONE && !s->ctl.acked && s->ack >= s->ctl.ctr) {
            s->ctl.acked = 1;
            clock_gettime(CLOCK_REALTIME, &s->ctl.acked_at);
        }
        memcpy(M.lines[M.next % RING], line, h.json_len + 1);
        M.next++;
        pthread_cond_broadcast(&M.cv);
    }
    pthread_mutex_unlock(&M.mu);
}

/* Sends the site its pending control datagram (sealed for its current epoch). M.mu held. */
static int send_control(site_t *s)
{
    drths_telemetry_control_t c = {.epoch = s->epoch, .ctr = s->ctl.ctr, .cmd = s->ctl.cmd};
    snprintf(c.site, sizeof c.site, "%s", s->name);
    char msg[DRTHS_TELEMETRY_CONTROL_MAX];
    int len = drths_telemetry_control_seal(M.key[s->key], &c, msg, sizeof msg);
    s->ctl.tries++;
    s->ctl.next_ns = now_ns() + RETRY_NS;
    if (len < 0 ||
        sendto(M.fd, msg, (size_t)len, 0, (struct sockaddr *)&s->addr.ss, s->addr.len) != len)
        return -1;
    M.controls_sent++;
    return 0;
}

/* Control not yet acknowledged goes again, every RETRY_NS, MAX_TRIES times in all. */
static void retransmit(void)
{
    int64_t now = now_ns();
    pthread_mutex_lock(&M.mu);
    for (int i = 0; i < M.nsites; i++) {
        control_t *c = &M.sites[i].ctl;
        if (c->cmd != DRTHS_TELEM_CMD_NONE && !c->acked && c->tries < MAX_TRIES &&
            now >= c->next_ns)
            send_control(&M.sites[i]);
    }
    pthread_mutex_unlock(&M.mu);
}

static void receive_loop(void)
{
    while (!atomic_load(&M.quit)) {
        struct pollfd p = {M.fd, POLLIN, 0};
        int r = poll(&p, 1, 20);
        retransmit();
        reap();
        if (r <= 0)
            continue;
        for (int i = 0; i < 256; i++) {
            char buf[DRTHS_TELEMETRY_MAX_DATAGRAM + 1];
            drths_addr_t from;
            from.len = sizeof from.ss;
            ssize_t n = recvfrom(M.fd, buf, sizeof buf, MSG_DONTWAIT,
                                 (struct sockaddr *)&from.ss, &from.len);
            if (n < 0)
                break;
            take_frame(buf, (size_t)n, &from);
        }
    }
    pthread_mutex_lock(&M.mu);
    pthread_cond_broadcast(&M.cv);
    pthread_mutex_unlock(&M.mu);
}

/* ---- HTTP -------------------------------------------------------------------------------- */

/* A short answer; a refusal (403) closes the connection, so that a client without the token
 * keeps no connection for its next try. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
                             const char *body)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (code == 403)
        MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- who keeps a connection (admit.h) ---------------------------------------------------- */

typedef struct stream {
    uint64_t seq; /* next frame to send */
    char pending[LINE_MAX_BYTES + 16];
    size_t plen, poff;
    int dropped;              /* ended for a newer stream: the reader stops (M.mu) */
    drths_admit_conn_t *conn; /* its connection's slot, NULL once closed (M.mu) */
} stream_t;

/* Ends a connection named by admit.h: shut down under libmicrohttpd, whose thread for it then
 * sees the end and closes it; a stream's reader stops at once. M.mu held. */
static void drop(drths_admit_conn_t *a, uint64_t *count)
{
    if (!a)
        return;
    (*count)++;
    if (a->fd >= 0)
        shutdown(a->fd, SHUT_RDWR);
    stream_t *st = a->user;
    if (st) {
        st->dropped = 1;
        pthread_cond_broadcast(&M.cv);
    }
}

/* The client's address as admit.h's key: 4 bytes for IPv4 (also when mapped into IPv6), 16 for
 * IPv6. */
static size_t host_key(const struct sockaddr *sa, uint8_t out[16])
{
    if (sa && sa->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 4;
    }
    if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            memcpy(out, a6->s6_addr + 12, 4);
            return 4;
        }
        memcpy(out, a6->s6_addr, 16);
        return 16;
    }
    return 0;
}

static drths_admit_conn_t *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* A connection opens (a slot, perhaps in place of an older one) or closes (its slot freed). We
 * keep a duplicate of its socket, so that a shutdown(2) never reaches a descriptor number that
 * libmicrohttpd has closed and the process reused. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        uint8_t host[16];
        size_t hl = host_key(ai ? ai->client_addr : NULL, host);
        int fd = fi ? fcntl(fi->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
        pthread_mutex_lock(&M.mu);
        drths_admit_conn_t *victim = NULL;
        drths_admit_conn_t *a =
            fd >= 0 ? drths_admit_open(&M.admit, host, hl, now_ns(), &victim) : NULL;
        if (a) {
            a->fd = fd;
        } else { /* no slot (or no descriptor): this one goes */
            if (fi)
                shutdown(fi->connect_fd, SHUT_RDWR);
            if (fd >= 0)
                close(fd);
            M.http_refused++;
        }
        *socket_context = a;
        drop(victim, &M.http_displaced);
        pthread_mutex_unlock(&M.mu);
        return;
    }
    pthread_mutex_lock(&M.mu);
    drths_admit_conn_t *a = *socket_context;
    if (a) {
        stream_t *st = a->user;
        if (st)
            st->conn = NULL;
        if (a->fd >= 0)
            close(a->fd);
        drths_admit_close(a);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&M.mu);
}

/* A request's answer was sent (or its connection failed): the connection may bring another. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)con_cls;
    (void)toe;
    drths_admit_conn_t *a = conn_of(c);
    if (!a)
        return;
    pthread_mutex_lock(&M.mu);
    drths_admit_done(&M.admit, a, now_ns());
    pthread_mutex_unlock(&M.mu);
}

/* Connections past their deadline (a request not complete within 3 s, an answer not sent within
 * 10 s) are dropped; called by the main thread every 20 ms. */
static void reap(void)
{
    drths_admit_conn_t *x[DRTHS_ADMIT_SLOTS];
    pthread_mutex_lock(&M.mu);
    size_t n = drths_admit_expired(&M.admit, now_ns(), x, DRTHS_ADMIT_SLOTS);
    for (size_t i = 0; i < n; i++)
        drop(x[i], &M.http_expired);
    pthread_mutex_unlock(&M.mu);
}

/* libmicrohttpd's own messages (a closed connection, a refused one) are printed at most once
 * per 10 s with a count of those left out, so that a flood of connections cannot flood the
 * log. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    int64_t now = now_ns();
    if (M.mhd_logged_ns && now - M.mhd_logged_ns < MHD_LOG_EVERY_NS) {
        M.mhd_log_skipped++;
    } else {
        if (M.mhd_log_skipped)
            fprintf(stderr, PROG ": (%llu messages of libmicrohttpd left out in the last %lld s)\n",
                    (unsigned long long)M.mhd_log_skipped, MHD_LOG_EVERY_NS / 1000000000LL);
        M.mhd_log_skipped = 0;
        M.mhd_logged_ns = now;
        fprintf(stderr, PROG ": http: ");
        vfprintf(stderr, fmt, ap);
    }
    pthread_mutex_unlock(&mu);
}

static int token_ok(struct MHD_Connection *c)
{
    if (M.token_len == 0)
        return 1;
    const char *t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
    if (!t)
        t = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Drths-Token");
    return t && strlen(t) == M.token_len && sodium_memcmp(t, M.token, M.token_len) == 0;
}

static int host_ok(struct MHD_Connection *c)
{
    if (!M.loopback)
        return 1; /* the token protects a non-loopback listener */
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (!h)
        return 0;
    static const char *const ok[] = {"127.0.0.1", "localhost", "[::1]"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        size_t n = strlen(ok[i]);
        if (strncmp(h, ok[i], n) == 0 && (h[n] == '\0' || h[n] == ':'))
            return 1;
    }
    return 0;
}

/* The /events reader: frames as "data: {...}\n\n"; a comment line every second of silence so
 * that a closed page is noticed. Blocks (thread per connection). */
static ssize_t events_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_t *st = cls;
    size_t n = 0;
    for (;;) {
        if (st->poff < st->plen) {
            size_t k = st->plen - st->poff;
            if (k > max - n)
                k = max - n;
            memcpy(buf + n, st->pending + st->poff, k);
            st->poff += k;
            n += k;
            if (n == max)
                return (ssize_t)n;
        }
        pthread_mutex_lock(&M.mu);
        if (n == 0) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += 1;
            while (st->seq >= M.next && !atomic_load(&M.quit) && !st->dropped)
                if (pthread_cond_timedwait(&M.cv, &M.mu, &dl) == ETIMEDOUT)
                    break;
        }
        if (st->dropped) { /* a newer stream took its place: the connection ends */
            pthread_mutex_unlock(&M.mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (atomic_load(&M.quit)) {
            pthread_mutex_unlock(&M.mu);
            return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (M.next > RING && st->seq < M.next - RING)
            st->seq = M.next - RING; /* too slow a reader skips what the ring lost */
        if (st->seq >= M.next) {
            pthread_mutex_unlock(&M.mu);
            if (n)
                return (ssize_t)n;
            static const char ka[] = ": keep-alive\n\n";
            memcpy(st->pending, ka, sizeof ka - 1);
            st->plen = sizeof ka - 1;
            st->poff = 0;
            continue;
        }
        st->plen = (size_t)snprintf(st->pending, sizeof st->pending, "data: %s\n\n",
                                    M.lines[st->seq % RING]);
        st->poff = 0;
        st->seq++;
        pthread_mutex_unlock(&M.mu);
    }
}

static void events_free(void *cls)
{
    stream_t *st = cls;
    pthread_mutex_lock(&M.mu);
    if (st->conn && st->conn->user == st)
        st->conn->user = NULL;
    pthread_mutex_unlock(&M.mu);
    free(st);
}

/* GET /events: a stream, in the stream pool of admit.h (4 per address, 16 in all): past a cap,
 * the oldest stream of the same address, or of the address holding the most, ends for this one
 * (a page reloaded or opened again wins over a forgotten one; the page's EventSource reconnects
 * by itself). The stream's connection closes when it ends. */
static enum MHD_Result serve_events(struct MHD_Connection *c)
{
    stream_t *st = calloc(1, sizeof *st);
    if (!st)
        return reply(c, 500, "text/plain", "out of memory\n");
    drths_admit_conn_t *a = conn_of(c);
    pthread_mutex_lock(&M.mu);
    st->seq = M.next > BACKLOG_FRAMES ? M.next - BACKLOG_FRAMES : 0;
    if (a) {
        drths_admit_conn_t *victim = NULL;
        drths_admit_stream(&M.admit, a, &victim);
        drop(victim, &M.http_displaced);
        a->user = st;
        st->conn = a;
    }
    pthread_mutex_unlock(&M.mu);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, events_reader, st,
                                          events_free);
    if (!r) {
        free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void put_time(char *out, size_t cap, const struct timespec *t)
{
    struct tm tm;
    gmtime_r(&t->tv_sec, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03ldZ", t->tv_nsec / 1000000);
}

/* A site's last control as JSON: command, status ("acknowledged", "sent": still retrying,
 * "unacknowledged": retries spent), tries, sent_at and acked_at (UTC). M.mu held. */
static size_t control_json(const control_t *c, char *out, size_t cap)
{
    if (c->cmd == DRTHS_TELEM_CMD_NONE)
        return (size_t)snprintf(out, cap, "null");
    char sent[40], acked[40] = "";
    put_time(sent, sizeof sent, &c->sent_at);
    if (c->acked)
        put_time(acked, sizeof acked, &c->acked_at);
    const char *status = c->acked                ? "acknowledged"
                         : c->tries < MAX_TRIES ? "sent"
                                                : "unacknowledged";
    return (size_t)snprintf(out, cap,
                            "{\"command\":\"%s\",\"status\":\"%s\",\"tries\":%d,"
                            "\"sent_at\":\"%s\",\"acked_at\":%s%s%s}",
                            drths_telemetry_cmd_name(c->cmd), status, c->tries, sent,
                            c->acked ? "\"" : "", c->acked ? acked : "null",
                            c->acked ? "\"" : "");
}

/* GET /sites: what the monitor knows of each site, its last control and the telemetry it
 * dropped (the page's disconnected check uses its own clock). */
static enum MHD_Result serve_sites(struct MHD_Connection *c)
{
    char body[4096], ctl[256];
    size_t n = 0;
    int64_t now = now_ns();
    pthread_mutex_lock(&M.mu);
    n += (size_t)snprintf(body + n, sizeof body - n, "{\"frames\":%llu,\"sites\":[",
                          (unsigned long long)M.next);
    for (int i = 0; i < M.nsites && n < sizeof body; i++) {
        const site_t *s = &M.sites[i];
        char addr[80];
        drths_addr_format(&s->addr, addr, sizeof addr);
        control_json(&s->ctl, ctl, sizeof ctl);
        n += (size_t)snprintf(body + n, sizeof body - n,
                              "%s{\"site\":\"%s\",\"state\":\"%s\",\"frames\":%llu,"
                              "\"age_ms\":%.0f,\"addr\":\"%s\",\"control\":%s}",
                              i ? "," : "", s->name, s->state, (unsigned long long)s->frames,
                              (double)(now - s->last_ns) * 1e-6, addr, ctl);
    }
    if (n < sizeof body)
        n += (size_t)snprintf(body + n, sizeof body - n, "],\"controls_sent\":%llu,\"rejected\":{",
                              (unsigned long long)M.controls_sent);
    for (int r = 0; r < REJ_N && n < sizeof body; r++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s\"%s\":%llu", r ? "," : "",
                              rej_name[r], (unsigned long long)M.rejected[r]);
    if (n < sizeof body)
        snprintf(body + n, sizeof body - n,
                 "},\"http\":{\"requests\":%u,\"streams\":%u,\"displaced\":%llu,"
                 "\"expired\":%llu,\"refused\":%llu}}\n",
                 drths_admit_count(&M.admit, DRTHS_ADMIT_OTHER, NULL, 0),
                 drths_admit_count(&M.admit, DRTHS_ADMIT_STREAM, NULL, 0),
                 (unsigned long long)M.http_displaced, (unsigned long long)M.http_expired,
                 (unsigned long long)M.http_refused);
    pthread_mutex_unlock(&M.mu);
    return reply(c, 200, "application/json", body);
}

/* Start goes to every site; Abort (HOLD now) to every site at once; Stop (graceful) to the
 * numerical site, which ends the run and tells the actuator site to hold, or to the actuator
 * site when the numerical site has not been heard from for 2 s. Each goes to the site's pinned
 * address with a new counter and is retransmitted until acknowledged (retransmit). */
static enum MHD_Result serve_control(struct MHD_Connection *c, const char *what)
{
    drths_telemetry_cmd_t cmd = drths_telemetry_cmd_parse(what);
    if (cmd == DRTHS_TELEM_CMD_NONE)
        return reply(c, 404, "application/json", "{\"error\":\"unknown command\"}\n");
    const char *hdr = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Drths-Control");
    if (!hdr || strcmp(hdr, "1") != 0)
        return reply(c, 403, "application/json",
                     "{\"error\":\"control requests need the header X-Drths-Control: 1\"}\n");
    char body[512];
    size_t n = (size_t)snprintf(body, sizeof body, "{\"command\":\"%s\",\"sent_to\":[", what);
    int sent = 0;
    int64_t now = now_ns();
    pthread_mutex_lock(&M.mu);
    int num_alive = 0;
    for (int i = 0; i < M.nsites; i++)
        if (strcmp(M.sites[i].name, "numerical") == 0 &&
            now - M.sites[i].last_ns < 2000000000LL && strcmp(M.sites[i].state, "DONE") != 0)
            num_alive = 1;
    for (int i = 0; i < M.nsites; i++) {
        site_t *s = &M.sites[i];
        if (cmd == DRTHS_TELEM_CMD_STOP && num_alive && strcmp(s->name, "numerical") != 0)
            continue;
        memset(&s->ctl, 0, sizeof s->ctl);
        s->ctl.cmd = cmd;
        s->ctl.ctr = ++M.ctr;
        clock_gettime(CLOCK_REALTIME, &s->ctl.sent_at);
        if (send_control(s) == 0) {
            n += (size_t)snprintf(body + n, sizeof body - n, "%s\"%s\"", sent ? "," : "",
                                  s->name);
            sent++;
        }
    }
    pthread_mutex_unlock(&M.mu);
    snprintf(body + n, sizeof body - n, "]}\n");
    return reply(c, sent ? 200 : 409, "application/json", body);
}

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return "application/octet-stream";
    if (!strcmp(dot, ".html"))
        return "text/html; charset=utf-8";
    if (!strcmp(dot, ".js") || !strcmp(dot, ".mjs"))
        return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".css"))
        return "text/css; charset=utf-8";
    if (!strcmp(dot, ".json") || !strcmp(dot, ".map"))
        return "application/json";
    if (!strcmp(dot, ".png"))
        return "image/png";
    if (!strcmp(dot, ".svg"))
        return "image/svg+xml";
    return "application/octet-stream";
}

/* Files of the web directory by plain name only: no sub-directories, no dot files. */
static enum MHD_Result serve_file(struct MHD_Connection *c, const char *url)
{
    const char *name = url[1] ? url + 1 : "index.html";
    if (name[0] == '.' || strlen(name) > 128)
        return reply(c, 404, "text/plain", "not found\n");
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            return reply(c, 404, "text/plain", "not found\n");
    char path[PATH_MAX + 160];
    snprintf(path, sizeof path, "%s/%s", M.web, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        if (fd >= 0)
            close(fd);
        return reply(c, 404, "text/plain", "not found\n");
    }
    struct MHD_Response *r = MHD_create_response_from_fd((size_t)sb.st_size, fd);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", content_type(name));
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)cls;
    (void)version;
    (void)upload_data;
    static int marker;
    drths_admit_conn_t *a = conn_of(c);
    if (*con_cls == NULL) { /* the headers are complete: with the token? */
        *con_cls = &marker;
        if (a) {
            int proven = host_ok(c) && token_ok(c);
            pthread_mutex_lock(&M.mu);
            drths_admit_headers(a, proven);
            pthread_mutex_unlock(&M.mu);
        }
        return MHD_YES;
    }
    if (*upload_data_size) { /* a request body is read and ignored */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (a) { /* the whole request is in: its answer has a deadline now */
        pthread_mutex_lock(&M.mu);
        drths_admit_answer(&M.admit, a, now_ns());
        pthread_mutex_unlock(&M.mu);
    }
    if (!host_ok(c))
        return reply(c, 403, "text/plain", "wrong Host header\n");
    if (!token_ok(c))
        return reply(c, 403, "text/plain", "this monitor needs its access token (?token=...)\n");
    if (strcmp(method, "POST") == 0) {
        if (strncmp(url, "/control/", 9) == 0)
            return serve_control(c, url + 9);
        return reply(c, 404, "text/plain", "not found\n");
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, 405, "text/plain", "method not allowed\n");
    if (strcmp(url, "/events") == 0)
        return serve_events(c);
    if (strcmp(url, "/sites") == 0)
        return serve_sites(c);
    return serve_file(c, url);
}

/* ---- main -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [--listen HOST:PORT] [--telemetry [HOST:]PORT] [--web DIR]\n"
            "                     [--token FILE] [--key FILE]... [--site NAME=HOST]...\n"
            "Serves the live page of a run: receives the sites' telemetry, streams it to the page\n"
            "and forwards its Start, Stop and Abort to the sites. Prints 'drths-monitor: page\n"
            "http://...' and 'drths-monitor: telemetry udp ...' and runs until SIGINT or SIGTERM.\n"
            "\n"
            "  --listen HOST:PORT    where the page is served (default 127.0.0.1:8080)\n"
            "  --telemetry [H:]PORT  UDP address for the sites' --monitor (default port 47900)\n"
            "  --web DIR             the page (default: web/ beside this program, else\n"
            "                        ../share/drths/web from it, where it is installed)\n"
            "  --token FILE          the page and its API need this token (?token=...)\n"
            "  --key FILE            the link's key file (the sites' --key or link.key_file):\n"
            "                        telemetry and control are authenticated with a key\n"
            "                        derived from it; several laboratories: each link's key\n"
            "                        (up to 8 --key; a site keeps the key of its first frame)\n"
            "  --site NAME=HOST      take the frames of site NAME (numerical, physical, or an\n"
            "                        actuator site's name in a file with sites) from\n"
            "                        HOST only (any port); without it, a site is pinned to\n"
            "                        the address of its first authenticated frame\n"
            "  -h, --help            print this help and exit\n"
            "  --version             print the version and exit\n"
            "\n"
            "A --listen address other than loopback needs --token. Telemetry port 0 picks a free\n"
            "port. Without --key the public rehearsal key is used, for sites that use it too,\n"
            "and only with a loopback --telemetry address. tools/web-build makes the page.\n"
            "\n");
    drths_cli_print_exit_codes(f, "the page or the telemetry socket could not be opened");
}

/* --site NAME=HOST (HOST a name, an IPv4 address or an IPv6 address, bracketed or not). */
static int add_fixed_host(const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (M.nfixed == MAX_SITES) {
        drths_cli_usage_error(PROG, "--site: at most %d sites", MAX_SITES);
        return -1;
    }
    fixed_host_t *f = &M.fixed[M.nfixed];
    size_t nl = eq ? (size_t)(eq - arg) : 0;
    if (!eq || nl == 0 || nl >= sizeof f->name || !eq[1]) {
        drths_cli_usage_error(PROG, "--site: '%s' is not NAME=HOST", arg);
        return -1;
    }
    memcpy(f->name, arg, nl);
    f->name[nl] = '\0';
    const char *host = eq + 1;
    int v6 = strchr(host, ':') && host[0] != '[';
    char text[300];
    snprintf(text, sizeof text, "%s%s%s:0", v6 ? "[" : "", host, v6 ? "]" : "");
    drths_error_t err = {{0}};
    if (drths_addr_parse(&f->addr, text, "--site", &err) != 0) {
        drths_cli_usage_error(PROG, "%s", err.msg);
        return -1;
    }
    M.nfixed++;
    return 0;
}

/* A monitor key M.key[M.nkeys++], from a link's key file or (path NULL: on a loopback telemetry
 * address only, with a warning) the public rehearsal key; the link key itself is wiped at once.
 * Prints its key id. */
static int load_key(const char *path, const drths_addr_t *taddr, drths_error_t *err)
{
    uint8_t psk[DRTHS_KEY_BYTES];
    if (path) {
        int rc = drths_key_load(psk, path, err);
        if (rc != 0)
            return rc;
    } else {
        if (!drths_addr_is_loopback(taddr))
            return drths_error_set(err, -EINVAL,
                                   "--telemetry: an address other than loopback needs --key FILE "
                                   "(the sites' key file)");
        drths_key_rehearsal(psk);
        drths_cli_warning(PROG, "no --key: using the public rehearsal key, which protects "
                          "nothing; the sites must use it too (no key file)");
    }
    char key_id[17];
    drths_key_id(psk, key_id);
    drths_telemetry_key_derive(M.key[M.nkeys++], psk, sizeof psk);
    sodium_memzero(psk, sizeof psk);
    printf("drths-monitor: key id %s (%s; the sites print theirs)\n", key_id,
           path ? path : "the public rehearsal key");
    return 0;
}

static void default_web(const char *argv0, char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(exe, sizeof exe, "%s", argv0);
        n = (ssize_t)strlen(exe);
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(exe, sizeof exe, ".");
    snprintf(out, cap, "%s/web", exe);
    /* Installed (cmake/install.cmake): bin/drths-monitor and share/drths/web, whatever the
     * prefix; a build folder's web/ beside the program comes first. */
    char probe[PATH_MAX + 40];
    snprintf(probe, sizeof probe, "%s/web/index.html", exe);
    if (access(probe, R_OK) != 0) {
        snprintf(probe, sizeof probe, "%s/../share/drths/web/index.html", exe);
        if (access(probe, R_OK) == 0)
            snprintf(out, cap, "%s/../share/drths/web", exe);
    }
}

int main(int argc, char **argv)
{
    enum { OPT_LISTEN = 1, OPT_TELEMETRY, OPT_WEB, OPT_TOKEN, OPT_KEY, OPT_SITE };
    const char *listen = "127.0.0.1:8080", *telemetry = "127.0.0.1:47900", *web = NULL;
    const char *token_file = NULL, *key_file[MAX_KEYS] = {NULL};
    int nkey_files = 0;
    static const struct option opts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"telemetry", required_argument, NULL, OPT_TELEMETRY},
        {"web", required_argument, NULL, OPT_WEB},
        {"token", required_argument, NULL, OPT_TOKEN},
        {"key", required_argument, NULL, OPT_KEY},
        {"site", required_argument, NULL, OPT_SITE},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    const char *argv0 = argv[0]; /* where the default web directory is looked for */
    argv[0] = (char *)PROG;      /* getopt names the program in its messages from argv[0] */
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case OPT_LISTEN:
            listen = optarg;
            break;
        case OPT_TELEMETRY:
            telemetry = optarg;
            break;
        case OPT_WEB:
            web = optarg;
            break;
        case OPT_TOKEN:
            token_file = optarg;
            break;
        case OPT_KEY:
            if (nkey_files == MAX_KEYS)
                return drths_cli_usage_error(PROG, "--key: at most %d (one per link)", MAX_KEYS);
            key_file[nkey_files++] = optarg;
            break;
        case OPT_SITE:
            if (add_fixed_host(optarg) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        default:
            return drths_cli_other_option(PROG, o, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    if (sodium_init() < 0)
        return drths_cli_error(PROG, "cannot initialise libsodium");
    drths_error_t err = {{0}};
    drths_addr_t laddr, taddr;
    char tbuf[128];
    if (strchr(telemetry, ':') == NULL) { /* a bare port */
        snprintf(tbuf, sizeof tbuf, "127.0.0.1:%s", telemetry);
        telemetry = tbuf;
    }
    if (drths_addr_parse(&laddr, listen, "--listen", &err) != 0 ||
        drths_addr_parse(&taddr, telemetry, "--telemetry", &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    M.loopback = drths_addr_is_loopback(&laddr);
    if (!M.loopback && !token_file)
        return drths_cli_usage_error(PROG,
                                     "--listen: '%s' is not a loopback address: it needs "
                                     "--token FILE",
                                     listen);
    if (token_file && drths_telemetry_token_load(M.token, &M.token_len, token_file, &err) != 0)
        return drths_cli_usage_error(PROG, "--token: %s", err.msg);
    int rc = 0;
    for (int k = 0; k < (nkey_files ? nkey_files : 1) && rc == 0; k++)
        rc = load_key(key_file[k], &taddr, &err);
    if (rc != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    if (web)
        snprintf(M.web, sizeof M.web, "%s", web);
    else
        default_web(argv0, M.web, sizeof M.web);
    char probe[PATH_MAX + 20];
    snprintf(probe, sizeof probe, "%s/index.html", M.web);
    if (access(probe, R_OK) != 0)
        drths_cli_warning(PROG, "no page at %s (run tools/web-build)", probe);

    /* Control counters start at the wall clock, so that those of a restarted monitor are above
     * the last one a running site executed. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    M.ctr = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    M.lines = calloc(RING, sizeof *M.lines);
    if (!M.lines)
        return drths_cli_error(PROG, "out of memory");
    pthread_mutex_init(&M.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&M.cv, &ca);
    M.fd = socket(taddr.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (M.fd < 0 || bind(M.fd, (struct sockaddr *)&taddr.ss, taddr.len) != 0)
        return drths_cli_error(PROG, "cannot listen for telemetry on udp %s: %s", telemetry,
                               strerror(errno));
    drths_addr_t tbound;
    tbound.len = sizeof tbound.ss;
    getsockname(M.fd, (struct sockaddr *)&tbound.ss, &tbound.len);

    drths_admit_init(&M.admit, &drths_admit_default_limits);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG;
    if (laddr.ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* No per-address limit of libmicrohttpd's: admit.h keeps the caps, dropping an older
     * connection instead of refusing the new one. */
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&laddr.ss, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)DRTHS_ADMIT_SLOTS, MHD_OPTION_CONNECTION_TIMEOUT, HTTP_TIMEOUT_S,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, NULL, MHD_OPTION_END);
    if (!d)
        return drths_cli_error(PROG, "cannot serve the page on %s (address in use?)", listen);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned port = di ? di->port : 0;
    char host[80], taddr_text[80];
    drths_addr_format(&laddr, host, sizeof host);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    drths_addr_format(&tbound, taddr_text, sizeof taddr_text);
    printf("drths-monitor: page http://%s:%u/%s\n", host, port,
           M.token_len ? "?token=<the token>" : "");
    printf("drths-monitor: telemetry udp %s (give the sites --monitor %s)\n", taddr_text,
           taddr_text);
    printf("drths-monitor: web files from %s\n", M.web);
    fflush(stdout);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    receive_loop();
    MHD_stop_daemon(d);
    close(M.fd);
    uint64_t rej = 0;
    for (int r = 0; r < REJ_N; r++)
        rej += M.rejected[r];
    printf("drths-monitor: %llu frames received, %llu rejected (", (unsigned long long)M.next,
           (unsigned long long)rej);
    for (int r = 0; r < REJ_N; r++)
        printf("%s%s %llu", r ? ", " : "", rej_name[r], (unsigned long long)M.rejected[r]);
    printf("), %llu control datagrams sent\n", (unsigned long long)M.controls_sent);
    printf("drths-monitor: http connections dropped: %llu for newer ones, %llu past their "
           "deadline, %llu with no slot\n",
           (unsigned long long)M.http_displaced, (unsigned long long)M.http_expired,
           (unsigned long long)M.http_refused);
    free(M.lines);
    sodium_memzero(M.token, sizeof M.token);
    sodium_memzero(M.key, sizeof M.key);
    return DRTHS_EXIT_OK;
}
