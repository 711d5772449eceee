/* drths-attack: an on-path attacker between the two sites, for the fault tests and
 * tools/bench-flood.
 *
 *   drths-attack --listen HOST:PORT --target HOST:PORT [--key FILE] [--seed N]
 *                [--capture FILE] [--attack] [--old FILE] [--flood-seconds S]
 *                [--flood-all] [--flood-rate N] [--flood-client]
 *                [--burst-at C --burst N] [--spike-at C [--spike-m X]] [--report FILE]
 *
 * A UDP forwarder between the numerical site (which sends to --listen) and the actuator site
 * (--target), like drths-impair without impairment. Because it forwards the numerical site's
 * datagrams from its own socket, everything it injects comes from the address the actuator site
 * accepts as its peer: it is the strongest network attacker short of holding the key (and with
 * the public rehearsal key it holds that too, which the keyed attacks use). --capture writes
 * every datagram the numerical site sent (for a later replay); --attack runs the schedule below
 * during the run; --old FILE replays a captured earlier session; --flood-all floods junk that
 * fails authentication (the most expensive junk for the receiver) from the first COMMAND until
 * SIGTERM (--flood-rate N: at most N datagrams per second; default: as fast as it can).
 * --flood-client floods the other way, the numerical site, from the relay's listen socket (the
 * address the numerical site sends to, so a socket connected there takes it in): junk and
 * well-formed headers of other sessions, nothing with the session's own id (for
 * drths-numerical --kernel-filter, whose filter must refuse all of it).
 * --burst-at C --burst N drops N consecutive datagrams in each direction from the
 * C-th COMMAND on (a loss burst defined by datagrams, not by a time window that a descheduled
 * relay could miss). --spike-at C replaces the C-th COMMAND by the same COMMAND whose first
 * sample (the header tick's command) is moved by --spike-m X (default 0.03 m), sealed with the
 * session key (--keylog): an authenticated, well-formed command off the trajectory, as a
 * numerical site with a bug would send. At SIGTERM it writes --report (JSON): what it sent, by the
 * reject reason each datagram must be counted under at the actuator site, and the kernel's drop
 * count of the actuator site's socket (a flood can overflow the receive buffer; those datagrams
 * never reach the site); with --flood-client also what it sent the numerical site, by the reason
 * each would be counted under there without the filter.
 *
 * Attack schedule (--attack), counted in COMMAND datagrams forwarded (5000 per second):
 *   from COMMAND 2200, every 50th: one single attack of attack.h, made from the genuine
 *       COMMAND about to be forwarded (one at a time, so redundancy R = 4 repairs the genuine
 *       COMMANDs the keyed attacks make REPLAYED);
 *   COMMAND 3000: 1000 datagrams from another socket (off path), one of them a genuine COMMAND
 *       before its forwarded copy: all WRONG_SOURCE;
 *   from COMMAND 4000: the old session (--old), 4 datagrams per COMMAND forwarded;
 *   from COMMAND 12000: junk flood for --flood-seconds (default 1) at the highest rate.
 * With --flood-client, from COMMAND 10000: junk flood of the numerical site for --flood-seconds
 * (the client flood starts first, so a run with both has them one after the other).
 *
 * Every attack is checked offline against a local receiver by tests/fault/test_attack.c
 * (ctest fault.attack); tests/fault/test_attack_live.sh runs the schedule against live sites.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/cli.h"
#include "common/platform/error.h"
#include "protocol/crypto.h"
#include "protocol/keyfile.h"
#include "protocol/wire.h"
#include "tools/attack/attack.h"

#define PROG "drths-attack"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the relay ---------------------------------------------------------------------------- */

/* One junk flood and its tallies. */
typedef struct flood {
    struct relay *r;
    bool client; /* to the numerical site, from the listen socket (else to the target) */
    bool started;
    pthread_t thread;
    struct sockaddr_storage to; /* client: the numerical site's address, copied at start */
    socklen_t to_len;
    uint64_t expect[DRTHS_ATTACK_N_REASONS]; /* by the reason each datagram is counted under at the
                                                receiver */
    uint64_t sent;
    double rate;
} flood_t;

typedef struct relay {
    int fd_listen, fd_target, fd_offpath;
    struct sockaddr_storage client;
    socklen_t client_len;
    bool have_client;
    struct sockaddr_in target;
    drths_attack_knowledge_t kn;
    drths_wire_rx_t rx_phys; /* to read HELLO (session id) */
    const char *keylog;      /* --keylog: the numerical site's session keys (DRTHS_KEYLOG_FILE) */
    /* capture of the numerical site's datagrams */
    uint8_t *cap;
    size_t cap_len, cap_size;
    const char *capture_path;
    /* old session for replay */
    uint8_t *old;
    size_t old_len, old_pos;
    /* ring of recent COMMANDs for the TOO_OLD replay */
    uint8_t (*ring)[DRTHS_WIRE_MAX_DATAGRAM];
    size_t *ring_len;
    uint64_t commands;
    bool attack, flood_all;
    double flood_seconds;
    int next_attack;
    uint64_t expect[DRTHS_ATTACK_N_REASONS];
    uint64_t forwarded_fwd, forwarded_back, injected;
    uint64_t last_counter;
    uint64_t flood_base; /* counter the BAD_TAG junk starts above, fixed at flood start */
    /* flood threads: junk to the actuator site (--attack, --flood-all) and to the numerical
     * site (--flood-client) */
    flood_t flood, client_flood;
    bool flood_client;
    atomic_int flood_stop;
    double flood_rate_limit;
    uint64_t kernel_drops0, kernel_drops;
    const char *report_path;
    FILE *log;
    uint64_t burst_at, burst_n, burst_fwd_left, burst_back_left, burst_dropped[2];
    uint64_t spike_at; /* --spike-at: 0 none, else the COMMAND number + 1 */
    double spike_m;
} relay_t;

static volatile sig_atomic_t stop_flag;
static void on_signal(int s)
{
    (void)s;
    stop_flag = 1;
}

static int parse_addr(const char *text, struct sockaddr_in *sa)
{
    char host[128];
    const char *c = strrchr(text, ':');
    if (!c || (size_t)(c - text) >= sizeof host)
        return -1;
    memcpy(host, text, (size_t)(c - text));
    host[c - text] = '\0';
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    char *end;
    long port = strtol(c + 1, &end, 10);
    if (c[1] == '\0' || *end || port < 1 || port > 65535)
        return -1;
    sa->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* The kernel's drop count of the UDP socket bound to port (the actuator site's), from
 * /proc/net/udp; 0 if it is not there. */
static uint64_t udp_drops(uint16_t port)
{
    FILE *f = fopen("/proc/net/udp", "r");
    if (!f)
        return 0;
    char line[512];
    uint64_t drops = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned lport = 0;
        char *colon = strchr(line, ':');
        if (!colon || !(colon = strchr(colon + 1, ':')))
            continue;
        if (sscanf(colon + 1, "%x", &lport) != 1 || lport != port)
            continue;
        /* drops is the last field */
        char *last = strrchr(line, ' ');
        if (last)
            drops = strtoull(last + 1, NULL, 10);
    }
    fclose(f);
    return drops;
}

static void send_target(relay_t *r, int fd, const uint8_t *d, size_t n)
{
    if (fd == r->fd_target)
        (void)send(fd, d, n, 0);
    else
        (void)sendto(fd, d, n, 0, (const struct sockaddr *)&r->target, sizeof r->target);
}

/* A flood thread: --flood-seconds (until SIGTERM with --flood-all) of junk, as fast as it can
 * or at --flood-rate, each datagram tallied under the reason the receiver must count it. */
static void *flood_main(void *arg)
{
    flood_t *f = arg;
    relay_t *r = f->r;
    enum { BATCH = 64 };
    uint8_t bufs[BATCH][300];
    struct mmsghdr hdr[BATCH];
    struct iovec iov[BATCH];
    int reasons[BATCH];
    /* The flood is an attacker elsewhere: ordinary scheduling, not the relay's real-time
     * priority (which stands for the network's own forwarding). */
    struct sched_param sp = {.sched_priority = 0};
    (void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
    int64_t start = now_ns();
    int64_t end =
        r->flood_all && !f->client ? INT64_MAX : start + (int64_t)(r->flood_seconds * 1e9);
    uint64_t k = 0;
    while (!atomic_load(&r->flood_stop) && now_ns() < end) {
        if (r->flood_rate_limit > 0) {
            /* Paced: the next batch is due when the ones sent so far fill the rate. */
            int64_t due = start + (int64_t)((double)f->sent / r->flood_rate_limit * 1e9);
            int64_t wait = due - now_ns();
            if (wait > 0) {
                struct timespec ts = {wait / 1000000000, wait % 1000000000};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        for (int i = 0; i < BATCH; i++) {
            uint64_t n = k + (uint64_t)i;
            iov[i].iov_base = bufs[i];
            iov[i].iov_len =
                f->client ? drths_attack_client_junk(n, &r->kn, bufs[i], &reasons[i])
                          : drths_attack_flood_junk(n, &r->kn, r->flood_base, bufs[i], &reasons[i]);
            memset(&hdr[i], 0, sizeof hdr[i]);
            if (f->to_len) {
                hdr[i].msg_hdr.msg_name = &f->to;
                hdr[i].msg_hdr.msg_namelen = f->to_len;
            }
            hdr[i].msg_hdr.msg_iov = &iov[i];
            hdr[i].msg_hdr.msg_iovlen = 1;
        }
        int sent = sendmmsg(f->client ? r->fd_listen : r->fd_target, hdr, BATCH, 0);
        if (sent < 0)
            continue;
        for (int i = 0; i < sent; i++)
            f->expect[reasons[i]]++;
        f->sent += (uint64_t)sent;
        k += (uint64_t)sent;
    }
    double secs = (double)(now_ns() - start) * 1e-9;
    f->rate = secs > 0 ? (double)f->sent / secs : 0;
    return NULL;
}

static void start_flood(relay_t *r)
{
    if (r->flood.started)
        return;
    r->kernel_drops0 = udp_drops(ntohs(r->target.sin_port));
    r->flood_base = r->last_counter;
    atomic_store(&r->flood_stop, 0);
    r->flood.r = r;
    if (pthread_create(&r->flood.thread, NULL, flood_main, &r->flood) == 0)
        r->flood.started = true;
}

/* --flood-client: the same to the numerical site, from the listen socket. */
static void start_client_flood(relay_t *r)
{
    flood_t *f = &r->client_flood;
    if (f->started || !r->have_client)
        return;
    /* The thread's own copy: the main loop rewrites r->client with every datagram. */
    f->r = r;
    f->client = true;
    f->to = r->client;
    f->to_len = r->client_len;
    if (pthread_create(&f->thread, NULL, flood_main, f) == 0)
        f->started = true;
}

/* Protocol v2's session keys come from an ephemeral Diffie-Hellman: even with the PSK an
 * on-path attacker cannot compute them. The keyed attacks need them, so the test has the
 * numerical site write them (DRTHS_KEYLOG_FILE, like TLS's SSLKEYLOGFILE) and reads the line
 * of the session here: "<session id hex> <num->phys key hex> <phys->num key hex>". */
static void read_keylog(relay_t *r)
{
    if (!r->keylog)
        return;
    FILE *f = fopen(r->keylog, "r");
    if (!f)
        return;
    char line[256], want[17];
    snprintf(want, sizeof want, "%016" PRIx64, r->kn.session_id);
    while (fgets(line, sizeof line, f)) {
        char a[65], b[65];
        if (strncmp(line, want, 16) != 0 || sscanf(line + 16, " %64s %64s", a, b) != 2)
            continue;
        for (int i = 0; i < 32; i++) {
            unsigned x, y;
            if (sscanf(a + 2 * i, "%2x", &x) != 1 || sscanf(b + 2 * i, "%2x", &y) != 1)
                break;
            r->kn.keys.num_to_phys[i] = (uint8_t)x;
            r->kn.keys.phys_to_num[i] = (uint8_t)y;
        }
        r->kn.have_keys = true;
    }
    fclose(f);
}

static void learn(relay_t *r, const uint8_t *d, size_t n, bool from_numerical)
{
    drths_wire_header_t h;
    if (drths_wire_peek_header(d, n, &h) != DRTHS_REJECT_OK)
        return;
    drths_msg_t m;
    if (from_numerical && h.type == DRTHS_MSG_HELLO && h.session_id != r->kn.session_id) {
        if (drths_wire_open_hello(&r->rx_phys, d, n, &m) == DRTHS_REJECT_OK) {
            r->kn.session_id = m.session_id;
            r->kn.have_keys = false;
            memcpy(r->kn.hello, d, n);
            r->kn.hello_len = n;
        }
    } else if (from_numerical && !r->kn.have_keys && r->kn.session_id &&
               h.type == DRTHS_MSG_PROBE) {
        read_keylog(r);
    }
}

#define RING 4096
#define ATTACK_FROM 2200
#define ATTACK_EVERY 50
#define OFFPATH_AT 3000
#define OLD_FROM 4000
#define OLD_PER_COMMAND 4
#define FLOOD_AT 12000
#define FLOOD_CLIENT_AT 10000

/* One datagram from the numerical site: the attacks around it, then the datagram itself. */
static void forward(relay_t *r, const uint8_t *d, size_t n)
{
    static uint8_t out[65536];
    if (r->burst_fwd_left) {
        r->burst_fwd_left--;
        r->burst_dropped[0]++;
        return;
    }
    if (r->capture_path) {
        if (r->cap_len + n + 4 > r->cap_size) {
            r->cap_size = (r->cap_size + n + 4) * 2;
            r->cap = realloc(r->cap, r->cap_size);
            if (!r->cap)
                abort();
        }
        uint32_t l = (uint32_t)n;
        memcpy(r->cap + r->cap_len, &l, 4);
        memcpy(r->cap + r->cap_len + 4, d, n);
        r->cap_len += n + 4;
    }
    learn(r, d, n, true);
    drths_wire_header_t h;
    bool command = drths_wire_peek_header(d, n, &h) == DRTHS_REJECT_OK &&
                   h.type == DRTHS_MSG_COMMAND && h.session_id == r->kn.session_id;
    drths_attack_t a = {0};
    size_t alen = 0;
    bool do_attack = false;
    if (command) {
        r->last_counter = h.counter;
        uint64_t c = r->commands++;
        memcpy(r->ring[c % RING], d, n);
        r->ring_len[c % RING] = n;
        if (r->burst_n && c == r->burst_at) {
            r->burst_fwd_left = r->burst_n - 1;
            r->burst_back_left = r->burst_n;
            r->burst_dropped[0]++;
            return;
        }
        if (r->spike_at && c + 1 == r->spike_at) {
            uint8_t sp[DRTHS_WIRE_MAX_DATAGRAM];
            const size_t sl = drths_attack_spike(&r->kn, d, n, r->spike_m, sp);
            if (sl) {
                send_target(r, r->fd_target, sp, sl);
                fprintf(r->log,
                        "spike: COMMAND %" PRIu64 " (tick %" PRIu64 ") sent with its "
                        "first sample moved by %g m\n",
                        c, h.tick, r->spike_m);
                return;
            }
            fprintf(r->log, "spike: COMMAND %" PRIu64 " could not be opened (no keys?)\n", c);
        }
        if (r->flood_all && c == 0)
            start_flood(r);
        if (r->attack && r->kn.have_keys && c >= ATTACK_FROM && c % ATTACK_EVERY == 0 &&
            r->next_attack < DRTHS_ATTACK_COUNT) {
            uint64_t oc = c - 2100;
            alen = drths_attack_build(r->next_attack, &r->kn, d, n, r->ring[oc % RING],
                                      r->ring_len[oc % RING], out, &a);
            do_attack = true;
            r->next_attack++;
        }
        if (r->attack && c == OFFPATH_AT) {
            /* Off path: from another address, even a genuine datagram is dropped. */
            send_target(r, r->fd_offpath, d, n);
            for (int k = 1; k < 1000; k++) {
                int reason;
                size_t jl = drths_attack_flood_junk((uint64_t)k, &r->kn, h.counter, out, &reason);
                send_target(r, r->fd_offpath, out, jl);
            }
            r->expect[DRTHS_ATTACK_WRONG_SOURCE] += 1000;
            r->injected += 1000;
        }
        if (r->attack && r->old && c >= OLD_FROM) {
            for (int k = 0; k < OLD_PER_COMMAND && r->old_pos + 4 <= r->old_len; k++) {
                uint32_t l;
                memcpy(&l, r->old + r->old_pos, 4);
                const uint8_t *od = r->old + r->old_pos + 4;
                r->old_pos += 4 + l;
                drths_wire_header_t oh;
                if (drths_wire_peek_header(od, l, &oh) != DRTHS_REJECT_OK)
                    continue;
                send_target(r, r->fd_target, od, l);
                /* Its HELLO is genuine, but during a run no HELLO is even decrypted. */
                r->expect[oh.type == DRTHS_MSG_HELLO ? DRTHS_REJECT_HELLO_RUNNING
                                                     : DRTHS_REJECT_BAD_SESSION]++;
                r->injected++;
            }
        }
        if (r->attack && c == FLOOD_AT)
            start_flood(r);
        if (r->flood_client && c == FLOOD_CLIENT_AT)
            start_client_flood(r);
    }
    if (do_attack && !a.after) {
        send_target(r, r->fd_target, out, alen);
        r->expect[a.expect]++;
        if (a.spends)
            r->expect[DRTHS_REJECT_REPLAYED]++;
        r->injected++;
        fprintf(r->log, "attack %-55s -> %s%s\n", a.name, drths_attack_reason_name(a.expect),
                a.spends ? " (+ genuine REPLAYED)" : "");
    }
    send_target(r, r->fd_target, d, n);
    r->forwarded_fwd++;
    if (do_attack && a.after) {
        send_target(r, r->fd_target, out, alen);
        r->expect[a.expect]++;
        r->injected++;
        fprintf(r->log, "attack %-55s -> %s\n", a.name, drths_attack_reason_name(a.expect));
    }
}

static int write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static int read_file(const char *path, uint8_t **p, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    *p = malloc(sz > 0 ? (size_t)sz : 1);
    *n = fread(*p, 1, sz > 0 ? (size_t)sz : 0, f);
    fclose(f);
    return 0;
}

static void write_report(relay_t *r)
{
    FILE *f = r->report_path ? fopen(r->report_path, "w") : NULL;
    if (!f)
        return;
    fprintf(f,
            "{\n  \"forwarded_to_target\": %" PRIu64 ",\n  \"forwarded_to_client\": %" PRIu64
            ",\n  \"commands\": %" PRIu64 ",\n  \"attacks_done\": %d,\n  \"attacks_total\": %d,\n",
            r->forwarded_fwd, r->forwarded_back, r->commands, r->next_attack, DRTHS_ATTACK_COUNT);
    fprintf(f, "  \"injected\": %" PRIu64 ",\n  \"old_session_sent\": %zu,\n", r->injected,
            r->old_pos);
    fprintf(f, "  \"flood_sent\": %" PRIu64 ",\n  \"flood_rate_per_s\": %.0f,\n", r->flood.sent,
            r->flood.rate);
    fprintf(f, "  \"client_flood_sent\": %" PRIu64 ",\n  \"client_flood_rate_per_s\": %.0f,\n",
            r->client_flood.sent, r->client_flood.rate);
    fprintf(f, "  \"burst_dropped\": [%" PRIu64 ", %" PRIu64 "],\n", r->burst_dropped[0],
            r->burst_dropped[1]);
    fprintf(f, "  \"kernel_drops\": %" PRIu64 ",\n", r->kernel_drops - r->kernel_drops0);
    const char *sep = "";
    fprintf(f, "  \"expect\": {");
    for (int k = 1; k < DRTHS_ATTACK_N_REASONS; k++)
        if (r->expect[k]) {
            fprintf(f, "%s\"%s\": %" PRIu64, sep, drths_attack_reason_name(k), r->expect[k]);
            sep = ", ";
        }
    sep = "";
    fprintf(f, "},\n  \"flood_expect\": {");
    for (int k = 1; k < DRTHS_ATTACK_N_REASONS; k++)
        if (r->flood.expect[k]) {
            fprintf(f, "%s\"%s\": %" PRIu64, sep, drths_attack_reason_name(k), r->flood.expect[k]);
            sep = ", ";
        }
    sep = "";
    fprintf(f, "},\n  \"client_flood_expect\": {");
    for (int k = 1; k < DRTHS_ATTACK_N_REASONS; k++)
        if (r->client_flood.expect[k]) {
            fprintf(f, "%s\"%s\": %" PRIu64, sep, drths_attack_reason_name(k),
                    r->client_flood.expect[k]);
            sep = ", ";
        }
    fprintf(f, "}\n}\n");
    fclose(f);
}

static void usage(FILE *f)
{
    fputs("usage: drths-attack --listen HOST:PORT --target HOST:PORT [--key FILE] [--seed N]\n"
          "         [--capture FILE] [--attack] [--old FILE] [--flood-seconds S]\n"
          "         [--flood-all] [--flood-rate N] [--flood-client]\n"
          "         [--burst-at C --burst N] [--report FILE] [--keylog FILE]\n"
          "\n"
          "An on-path attacker: forwards the numerical site's datagrams (sent to --listen) to\n"
          "the actuator site (--target) and back, and injects attacks from the same address.\n"
          "Runs until SIGTERM or SIGINT. For rehearsals and tests only.\n"
          "\n"
          "  --listen HOST:PORT   where the numerical site sends (IPv4)\n"
          "  --target HOST:PORT   the actuator site (IPv4)\n"
          "  --key FILE           the pre-shared key (default: the public rehearsal key)\n"
          "  --seed N             seed of the random bytes in attacks and junk\n"
          "  --capture FILE       write every datagram of the numerical site to FILE\n"
          "  --attack             run the attack schedule (single attacks from COMMAND 2200,\n"
          "                       off-path datagrams at 3000, --old from 4000, flood at 12000)\n"
          "  --old FILE           a --capture of an earlier session to replay during --attack\n"
          "  --keylog FILE        the session keys the numerical site writes when started with\n"
          "                       DRTHS_KEYLOG_FILE=FILE (protocol v2's keys come from an\n"
          "                       ephemeral exchange: without them no keyed attack is made)\n"
          "  --flood-seconds S    length of the --attack and --flood-client floods (default 1)\n"
          "  --flood-all          flood the actuator site from the first COMMAND to the end\n"
          "  --flood-rate N       at most N datagrams per second in a flood (default: no limit)\n"
          "  --flood-client       flood the numerical site from COMMAND 10000\n"
          "  --burst-at C         drop --burst N datagrams each way from the C-th COMMAND on\n"
          "  --burst N\n"
          "  --spike-at C         replace the C-th COMMAND by itself with its first sample\n"
          "                       moved by --spike-m X m (default 0.03), sealed with the\n"
          "                       session key (needs --keylog): a numerical site's bug\n"
          "  --report FILE        at exit, what was sent, by the reason the receiver must\n"
          "                       count it under (JSON)\n"
          "  --version            print the version and exit\n"
          "\n",
          f);
    drths_cli_print_exit_codes(f, "a socket could not be opened");
}

/* The options that are not kept in the relay itself. */
typedef struct {
    const char *listen, *target, *key, *old;
} args_t;

/* Fills *r and *a from the command line. Returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, relay_t *r, args_t *a)
{
    enum {
        O_FLOOD_SECONDS,
        O_FLOOD_RATE,
        O_FLOOD_ALL,
        O_FLOOD_CLIENT,
        O_BURST_AT,
        O_BURST,
        O_SPIKE_AT,
        O_SPIKE_M,
        O_SEED,
        O_CAPTURE,
        O_OLD,
        O_REPORT,
        O_KEYLOG
    };
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"target", required_argument, NULL, 't'},
        {"key", required_argument, NULL, 'k'},
        {"attack", no_argument, NULL, 'a'},
        {"seed", required_argument, NULL, O_SEED},
        {"capture", required_argument, NULL, O_CAPTURE},
        {"old", required_argument, NULL, O_OLD},
        {"report", required_argument, NULL, O_REPORT},
        {"keylog", required_argument, NULL, O_KEYLOG},
        {"flood-seconds", required_argument, NULL, O_FLOOD_SECONDS},
        {"flood-rate", required_argument, NULL, O_FLOOD_RATE},
        {"flood-all", no_argument, NULL, O_FLOOD_ALL},
        {"flood-client", no_argument, NULL, O_FLOOD_CLIENT},
        {"burst-at", required_argument, NULL, O_BURST_AT},
        {"burst", required_argument, NULL, O_BURST},
        {"spike-at", required_argument, NULL, O_SPIKE_AT},
        {"spike-m", required_argument, NULL, O_SPIKE_M},
        DRTHS_CLI_OPTIONS_COMMON,
        {0, 0, 0, 0},
    };
    int c;
    long v;
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            a->listen = optarg;
            break;
        case 't':
            a->target = optarg;
            break;
        case 'k':
            a->key = optarg;
            break;
        case 'a':
            r->attack = true;
            break;
        case O_SEED:
            if (drths_cli_long(PROG, "--seed", optarg, 0, LONG_MAX, &v) != 0)
                return DRTHS_EXIT_USAGE;
            drths_attack_seed((uint64_t)v);
            break;
        case O_CAPTURE:
            r->capture_path = optarg;
            break;
        case O_OLD:
            a->old = optarg;
            break;
        case O_REPORT:
            r->report_path = optarg;
            break;
        case O_KEYLOG:
            r->keylog = optarg;
            break;
        case O_FLOOD_SECONDS:
            if (drths_cli_positive(PROG, "--flood-seconds", optarg, "seconds", &r->flood_seconds) !=
                0)
                return DRTHS_EXIT_USAGE;
            break;
        case O_FLOOD_RATE:
            /* 0 is the default: no limit. */
            if (drths_cli_double(PROG, "--flood-rate", optarg, 0, 1e9, "datagrams/s",
                                 &r->flood_rate_limit) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case O_FLOOD_ALL:
            r->flood_all = true;
            break;
        case O_FLOOD_CLIENT:
            r->flood_client = true;
            break;
        case O_BURST_AT:
            if (drths_cli_long(PROG, "--burst-at", optarg, 0, LONG_MAX, &v) != 0)
                return DRTHS_EXIT_USAGE;
            r->burst_at = (uint64_t)v;
            break;
        case O_BURST:
            if (drths_cli_long(PROG, "--burst", optarg, 1, 1000000, &v) != 0)
                return DRTHS_EXIT_USAGE;
            r->burst_n = (uint64_t)v;
            break;
        case O_SPIKE_AT:
            if (drths_cli_long(PROG, "--spike-at", optarg, 0, LONG_MAX - 1, &v) != 0)
                return DRTHS_EXIT_USAGE;
            r->spike_at = (uint64_t)v + 1;
            break;
        case O_SPIKE_M:
            if (drths_cli_double(PROG, "--spike-m", optarg, -1.0, 1.0, "m", &r->spike_m) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    return -1;
}

/* Addresses, key, sockets. Returns -1 to go on, else the exit code. */
static int set_up(relay_t *r, const args_t *a)
{
    struct sockaddr_in la;
    if (!a->listen || !a->target)
        return drths_cli_usage_error(PROG, "--listen and --target are needed (see --help)");
    if (parse_addr(a->listen, &la) != 0)
        return drths_cli_usage_error(PROG, "--listen: '%s' is not an IPv4 HOST:PORT", a->listen);
    if (parse_addr(a->target, &r->target) != 0)
        return drths_cli_usage_error(PROG, "--target: '%s' is not an IPv4 HOST:PORT", a->target);
    if (drths_crypto_init() != 0)
        return drths_cli_error(PROG, "libsodium failed to initialise");
    drths_error_t err;
    if (a->key) {
        if (drths_key_load(r->kn.psk, a->key, &err) != 0) {
            return drths_cli_usage_error(PROG, "--key: %s", err.msg);
        }
    } else {
        drths_key_rehearsal(r->kn.psk);
    }
    if (drths_wire_rx_init(&r->rx_phys, DRTHS_ROLE_PHYSICAL, r->kn.psk, &err))
        return drths_cli_error(PROG, "%s", err.msg);
    if (a->old && read_file(a->old, &r->old, &r->old_len) != 0)
        return drths_cli_usage_error(PROG, "--old: cannot read %s: %s", a->old, strerror(errno));
    r->ring = calloc(RING, sizeof *r->ring);
    r->ring_len = calloc(RING, sizeof *r->ring_len);
    r->fd_listen = socket(AF_INET, SOCK_DGRAM, 0);
    r->fd_target = socket(AF_INET, SOCK_DGRAM, 0);
    r->fd_offpath = socket(AF_INET, SOCK_DGRAM, 0);
    int big = 4 << 20;
    setsockopt(r->fd_listen, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(r->fd_target, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(r->fd_target, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (bind(r->fd_listen, (struct sockaddr *)&la, sizeof la) != 0 ||
        connect(r->fd_target, (struct sockaddr *)&r->target, sizeof r->target) != 0) {
        return drths_cli_error(PROG, "bind %s / connect %s: %s", a->listen, a->target,
                               strerror(errno));
    }
    return -1;
}

/* Forwards both ways, attacking and flooding as asked, until SIGINT or SIGTERM. */
static void relay_loop(relay_t *r)
{
    static uint8_t buf[65536];
    struct pollfd pf[2] = {{.fd = r->fd_listen, .events = POLLIN},
                           {.fd = r->fd_target, .events = POLLIN}};
    uint16_t tport = ntohs(r->target.sin_port);
    int64_t next_drops = 0;
    while (!stop_flag) {
        int np = poll(pf, 2, 50);
        if (now_ns() >= next_drops) {
            /* The site's socket disappears when it exits: keep the last value seen. */
            uint64_t d = udp_drops(tport);
            if (d > r->kernel_drops)
                r->kernel_drops = d;
            next_drops = now_ns() + 20000000;
        }
        if (np <= 0)
            continue;
        for (int burst = 0; burst < 64; burst++) {
            bool any = false;
            struct sockaddr_storage from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(r->fd_listen, buf, sizeof buf, MSG_DONTWAIT,
                                 (struct sockaddr *)&from, &fl);
            if (n >= 0) {
                any = true;
                r->client = from;
                r->client_len = fl;
                r->have_client = true;
                forward(r, buf, (size_t)n);
            }
            n = recv(r->fd_target, buf, sizeof buf, MSG_DONTWAIT);
            if (n >= 0) {
                any = true;
                learn(r, buf, (size_t)n, false);
                if (r->burst_back_left) {
                    r->burst_back_left--;
                    r->burst_dropped[1]++;
                } else if (r->have_client) {
                    (void)sendto(r->fd_listen, buf, (size_t)n, 0, (struct sockaddr *)&r->client,
                                 r->client_len);
                    r->forwarded_back++;
                }
            }
            if (!any)
                break;
        }
    }
}

/* Stops the floods, writes the capture and the report, frees. */
static void finish(relay_t *r)
{
    if (r->flood.started || r->client_flood.started)
        atomic_store(&r->flood_stop, 1);
    if (r->flood.started)
        pthread_join(r->flood.thread, NULL);
    if (r->client_flood.started)
        pthread_join(r->client_flood.thread, NULL);
    if (r->capture_path && write_file(r->capture_path, r->cap, r->cap_len) != 0)
        drths_cli_warning(PROG, "--capture: cannot write %s", r->capture_path);
    if (r->kernel_drops < r->kernel_drops0)
        r->kernel_drops = r->kernel_drops0;
    write_report(r);
    fprintf(stderr,
            "drths-attack: forwarded %" PRIu64 " / %" PRIu64 ", commands %" PRIu64
            ", attacks %d of %d, injected %" PRIu64 ", flood %" PRIu64
            " (%.0f/s), kernel drops %" PRIu64 "\n",
            r->forwarded_fwd, r->forwarded_back, r->commands, r->next_attack, DRTHS_ATTACK_COUNT,
            r->injected, r->flood.sent, r->flood.rate, r->kernel_drops - r->kernel_drops0);
    free(r->cap);
    free(r->old);
    free(r->ring);
    free(r->ring_len);
    drths_wire_rx_close(&r->rx_phys);
}

int main(int argc, char **argv)
{
    static relay_t r;
    memset(&r, 0, sizeof r);
    r.log = stderr;
    r.flood_seconds = 1.0;
    r.spike_m = 0.03;
    args_t a = {0};
    int rc = parse_options(argc, argv, &r, &a);
    if (rc < 0)
        rc = set_up(&r, &a);
    if (rc >= 0)
        return rc;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    /* The relay is the network: on a loaded machine an ordinary process is descheduled for
     * tens of ms, which the sites see (correctly) as a network outage. Below the sites' RT
     * threads (priority 80); without the privilege it runs as it is. */
    struct sched_param sp = {.sched_priority = 70};
    (void)sched_setscheduler(0, SCHED_FIFO, &sp);
    (void)mlockall(MCL_CURRENT | MCL_FUTURE);
    relay_loop(&r);
    finish(&r);
    return 0;
}
