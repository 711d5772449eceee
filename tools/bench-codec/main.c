/* drths-bench-codec: nanoseconds per datagram to encode and seal (drths_wire_seal) and to open
 * and decode (drths_wire_open: header checks, replay window, ChaCha20-Poly1305, msgpack decode
 * into the zone, schema), for the steady-state COMMAND and FEEDBACK of an experiment: its
 * link.redundancy R (every sample present, offsets drths_wire_offset(0 .. R-1)) and its number
 * of actuator channels, from --experiment FILE (default three-story-elcentro.yaml: the installed
 * one beside this program's bin/, else the source tree's examples/).
 *
 * Beside each, the floor this code can approach: libsodium's ChaCha20-Poly1305 IETF AEAD alone
 * (the construction protocol/crypto.c implements), one crypto_aead_..._encrypt_detached and one
 * ..._decrypt_detached call on the same bytes (the header as associated data, the payload as
 * message), timed the same way in the same run. Their ratio is what to compare across runs: both
 * move together with the machine's load.
 *
 * Each figure is the median over --rounds rounds of the mean time of --batch calls (one clock
 * read per batch, so the clock's own cost hardly counts). The batches are short (20 datagrams,
 * about 25 us): on a machine shared with other work the kernel switched this thread out about
 * every 90 us (11 000 context switches a second, measured with perf stat), and batches of 200
 * were mostly interrupted, so their median measured the other work too; most short batches run
 * through, and the median is theirs.
 *
 * Then the software latency on loopback (--pingpong N round trips): one thread plays the
 * actuator site (seal a FEEDBACK, sendmsg to 127.0.0.1), another the numerical site (blocking
 * recv, open, seal a COMMAND, send back); the figure is the time from just before the FEEDBACK
 * is sealed to the COMMAND opened, i.e. two trips through the kernel's UDP stack and both
 * codecs, without the integration step (drths-bench-step gives that) and without any network.
 * Both threads ask for SCHED_FIFO, and the process holds a 0 us /dev/cpu_dma_latency request,
 * as the sites do while they run (refusals are reported, not fatal): without it an idle virtual
 * CPU halts, and waking it costs tens of microseconds. Twice: with blocking recv (the thread
 * sleeps, the kernel wakes it) and spinning on a non-blocking recv (busy-poll).
 *
 * Output, for tools/bench:
 *   experiment path=.. r=.. channels=.. chacha20=avx512vl|avx2|libsodium   (the keystream code
 *         this CPU runs, protocol/chacha20.h: the codec's figures depend on it)
 *   codec type=COMMAND bytes=.. seal_ns=.. open_ns=.. total_ns=.. aead_seal_ns=.. aead_open_ns=..
 *         aead_total_ns=.. ratio=..   (ratio: median over the rounds of the round's codec
 *         seal + open time over its AEAD-alone seal + open time)
 *   latency mode=blocking|busy-poll round_trips=.. p50_us=.. p99_us=.. max_us=.. sched_fifo=0|1
 *           dma_latency_0=0|1
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "common/config/config.h"
#include "common/platform/cli.h"
#include "common/platform/rt.h"
#include "common/platform/rtclock.h"
#include "common/platform/stats.h"
#include "protocol/chacha20.h"
#include "protocol/crypto.h"
#include "protocol/wire.h"

#define PROG "drths-bench-codec"
#define DEFAULT_EXAMPLE "three-story-elcentro.yaml"
#ifndef DRTHS_SOURCE_EXAMPLES /* set by CMakeLists.txt */
#define DRTHS_SOURCE_EXAMPLES "examples"
#endif
#define MAX_ROUNDS 1000
#define MAX_BATCH 100000        /* a 4.9 KB datagram buffer per call: at most 490 MB */
#define MAX_PINGPONG 100000000L /* one double per round trip: at most 800 MB */

/* The shape of the steady-state datagrams: samples per datagram and channels. */
typedef struct shape {
    int r, channels;
} shape_t;

/* A steady-state message of a run 30 s in at 5 kHz: every one of the r samples present, counters
 * and ticks at their 32-bit msgpack encoding, as most of a run's datagrams carry them. */
static void fill(drths_msg_t *m, drths_msg_type_t type, shape_t sh)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->epoch = 1;
    m->tick = 150000;
    if (type == DRTHS_MSG_COMMAND) {
        drths_msg_command_t *c = &m->u.command;
        c->loop_delay_ticks = 25;
        c->n_channels = (uint8_t)sh.channels;
        c->r = (uint8_t)sh.r;
        c->echo_counter = 149970;
        c->echo_hold_ns = 71234;
        for (int k = 0; k < sh.r; k++)
            for (int j = 0; j < sh.channels; j++) {
                drths_cmd_channel_t *s = &c->s[k][j];
                s->disp_m = 0.0123 - 1e-5 * k + 1e-3 * j;
                s->vel_m_s = 0.2345 + 1e-4 * k;
                s->acc_m_s2 = -3.21 + 0.01 * k;
                s->damper_cmd = 2.5;
            }
    } else {
        drths_msg_feedback_t *f = &m->u.feedback;
        f->n_channels = (uint8_t)sh.channels;
        f->r = (uint8_t)sh.r;
        f->echo_counter = 149970;
        f->echo_hold_ns = 65123;
        for (int k = 0; k < sh.r; k++) {
            f->s[k].cmd_tick = (int64_t)drths_wire_sample_tick(m->tick, k) - 25;
            for (int j = 0; j < sh.channels; j++) {
                f->s[k].ch[j].force_n = 153234.5 - 10.0 * k + j;
                f->s[k].ch[j].disp_m = 0.0121 - 1e-5 * k;
            }
        }
    }
}

static double median(double *x, int n)
{
    drths_sort_double(x, (size_t)n);
    return x[n / 2];
}

/* libsodium's ChaCha20-Poly1305 IETF alone on datagrams of len bytes (pre bytes of header as
 * associated data, the payload as message, the tag after it), in place as drths_wire_seal and
 * drths_wire_open work: a batch of seals, each with its own nonce, then the batch opened. */
typedef struct aead_bench {
    uint8_t key[crypto_aead_chacha20poly1305_ietf_KEYBYTES];
    size_t pre, plen;
    uint64_t counter;
} aead_bench_t;

static int aead_round(aead_bench_t *a, uint8_t (*bufs)[DRTHS_WIRE_MAX_DATAGRAM], int batch,
                      double *seal, double *open)
{
    uint8_t nonce[DRTHS_AEAD_NONCE_BYTES];
    uint64_t first = a->counter;
    size_t pre = a->pre, plen = a->plen;
    int bad = 0;
    int64_t t0 = drths_now_ns();
    for (int b = 0; b < batch; b++) {
        uint8_t *d = bufs[b];
        drths_crypto_nonce(nonce, DRTHS_ROLE_NUMERICAL, a->counter++);
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(d + pre, d + pre + plen, NULL, d + pre,
                                                           plen, d, pre, NULL, nonce, a->key);
    }
    int64_t t1 = drths_now_ns();
    for (int b = 0; b < batch; b++) {
        uint8_t *d = bufs[b];
        drths_crypto_nonce(nonce, DRTHS_ROLE_NUMERICAL, first + (uint64_t)b);
        bad |= crypto_aead_chacha20poly1305_ietf_decrypt_detached(
            d + pre, NULL, d + pre, plen, d + pre + plen, d, pre, nonce, a->key);
    }
    int64_t t2 = drths_now_ns();
    *seal = (double)(t1 - t0) / batch;
    *open = (double)(t2 - t1) / batch;
    return bad;
}

/* Each round seals a batch of datagrams (each with its own counter, as in a run) and opens
 * them, then does the same with the AEAD alone on as many bytes, so that both figures of a
 * round see the same load; the ratio is taken per round, then its median. */
static int bench(drths_msg_type_t type, shape_t sh, int rounds, int batch)
{
    uint8_t psk[DRTHS_KEY_BYTES], dh[DRTHS_KEY_BYTES], th[DRTHS_KEY_BYTES];
    for (size_t i = 0; i < sizeof psk; i++)
        psk[i] = (uint8_t)(i * 7 + 1);
    memset(dh, 0x11, sizeof dh);
    memset(th, 0x22, sizeof th);
    const uint64_t sid = 0x0123456789abcdefULL;
    drths_session_keys_t keys;
    drths_crypto_derive(psk, dh, th, &keys);
    drths_role_t sender = type == DRTHS_MSG_COMMAND ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL;
    drths_role_t receiver = type == DRTHS_MSG_COMMAND ? DRTHS_ROLE_PHYSICAL : DRTHS_ROLE_NUMERICAL;
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    drths_error_t err;
    if (drths_wire_tx_init(&tx, sender, sid) || drths_wire_rx_init(&rx, receiver, psk, &err)) {
        fprintf(stderr, PROG ": init failed\n");
        return 1;
    }
    drths_wire_tx_set_keys(&tx, &keys);
    drths_wire_rx_start(&rx, sid);
    drths_wire_rx_set_keys(&rx, &keys);
    static drths_msg_t m, out;
    fill(&m, type, sh);
    uint8_t(*bufs)[DRTHS_WIRE_MAX_DATAGRAM] = calloc((size_t)batch, sizeof *bufs);
    size_t *lens = malloc((size_t)batch * sizeof *lens);
    static double seal[MAX_ROUNDS], open[MAX_ROUNDS], aseal[MAX_ROUNDS], aopen[MAX_ROUNDS],
        ratio[MAX_ROUNDS];
    if (!bufs || !lens)
        return 1;
    aead_bench_t a = {.pre = DRTHS_WIRE_HEADER_BYTES, .counter = 1};
    memset(a.key, 0x5a, sizeof a.key);
    int bad = 0;
    for (int r = 0; r < rounds && !bad; r++) {
        int64_t t0 = drths_now_ns();
        for (int b = 0; b < batch; b++) {
            m.tick++;
            bad |= drths_wire_seal(&tx, &m, bufs[b], sizeof bufs[b], &lens[b]);
        }
        int64_t t1 = drths_now_ns();
        for (int b = 0; b < batch; b++)
            bad |= drths_wire_open(&rx, bufs[b], lens[b], &out) != DRTHS_REJECT_OK;
        int64_t t2 = drths_now_ns();
        seal[r] = (double)(t1 - t0) / batch;
        open[r] = (double)(t2 - t1) / batch;
        a.plen = lens[0] - a.pre - DRTHS_TAG_BYTES;
        bad |= aead_round(&a, bufs, batch, &aseal[r], &aopen[r]);
        ratio[r] = (seal[r] + open[r]) / (aseal[r] + aopen[r]);
    }
    size_t len = lens[0];
    free(bufs), free(lens);
    drths_wire_tx_close(&tx);
    drths_wire_rx_close(&rx);
    if (bad) {
        fprintf(stderr, PROG ": a datagram failed to seal or open\n");
        return 1;
    }
    double s = median(seal, rounds), o = median(open, rounds);
    double as = median(aseal, rounds), ao = median(aopen, rounds);
    printf("codec type=%s bytes=%zu seal_ns=%.0f open_ns=%.0f total_ns=%.0f aead_seal_ns=%.0f "
           "aead_open_ns=%.0f aead_total_ns=%.0f ratio=%.2f\n",
           drths_msg_type_name(type), len, s, o, s + o, as, ao, as + ao, median(ratio, rounds));
    return 0;
}

/* ---- handshake ---------------------------------------------------------------------------- */

static void hello_msg(drths_msg_t *m, drths_msg_type_t type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    drths_msg_hello_t *h = &m->u.hello;
    h->proto_min = h->proto_max = DRTHS_WIRE_VERSION;
    h->version = type == DRTHS_MSG_HELLO_ACK ? DRTHS_WIRE_VERSION : 0;
    h->role = type == DRTHS_MSG_HELLO ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL;
    snprintf(h->site, sizeof h->site, "bench");
    h->rate_hz = 5000;
    h->n_channels = 1;
    h->r = 4;
    for (int k = 0; k < 4; k++)
        h->offsets[k] = (uint16_t)k;
    snprintf(h->units, sizeof h->units, "SI");
    h->n_sections = 7;
    for (int i = 0; i < 7; i++)
        snprintf(h->sections[i].name, sizeof h->sections[i].name, "section%d", i);
    snprintf(h->software, sizeof h->software, "drths bench");
}

/* One whole handshake between two in-memory peers, as the sites do it: ephemeral pairs, HELLO
 * sealed and opened, the responder's DH, HELLO_ACK sealed and opened (the initiator's DH), the
 * transcript and both sessions' keys. Returns 0 if both ends derived the same keys. */
static int one_handshake(const uint8_t psk[DRTHS_KEY_BYTES], uint64_t sid, drths_wire_rx_t *nrx,
                         drths_wire_rx_t *prx, drths_msg_t *m, uint8_t *buf)
{
    drths_wire_tx_t ntx, ptx;
    uint8_t nsk[32], npk[32], psk_e[32], ppk[32], k[32], dh[32], th[32], hp[1024];
    drths_session_keys_t nk, pk;
    size_t len, hlen;
    drths_crypto_eph_keypair(npk, nsk);
    drths_crypto_derive_hello(psk, sid, npk, k);
    drths_wire_tx_init(&ntx, DRTHS_ROLE_NUMERICAL, sid);
    drths_wire_tx_set_handshake(&ntx, k, npk);
    drths_wire_rx_start(nrx, sid);
    drths_wire_rx_set_initiator(nrx, nsk, npk);
    hello_msg(m, DRTHS_MSG_HELLO);
    int bad = drths_wire_seal(&ntx, m, buf, DRTHS_WIRE_MAX_DATAGRAM, &len);
    bad |= drths_wire_open_hello(prx, buf, len, m) != DRTHS_REJECT_OK;
    hlen = prx->plain_len;
    memcpy(hp, prx->plain, hlen);
    drths_crypto_eph_keypair(ppk, psk_e);
    bad |= drths_crypto_dh(dh, psk_e, npk);
    drths_crypto_derive_ack(psk, sid, npk, ppk, dh, k);
    drths_wire_tx_init(&ptx, DRTHS_ROLE_PHYSICAL, sid);
    drths_wire_tx_set_handshake(&ptx, k, ppk);
    hello_msg(m, DRTHS_MSG_HELLO_ACK);
    bad |= drths_wire_seal(&ptx, m, buf, DRTHS_WIRE_MAX_DATAGRAM, &len);
    drths_crypto_transcript(th, sid, npk, hp, hlen, ppk, ptx.hs_plain, ptx.hs_plain_len);
    drths_crypto_derive(psk, dh, th, &pk);
    bad |= drths_wire_open(nrx, buf, len, m) != DRTHS_REJECT_OK;
    drths_crypto_transcript(th, sid, npk, ntx.hs_plain, ntx.hs_plain_len, m->eph, nrx->plain,
                            nrx->plain_len);
    drths_crypto_derive(psk, nrx->hs_dh, th, &nk);
    bad |= memcmp(&nk, &pk, sizeof nk) != 0;
    drths_wire_tx_close(&ntx);
    drths_wire_tx_close(&ptx);
    return bad;
}

/* The handshake's cost, and what a forged HELLO costs the actuator site's receive path during
 * a run: version 1 authenticated it (open_hello) before looking whether a run was on; version
 * 2 drops it on its header (drths_wire_peek_header, then the run check). */
static int bench_handshake(int rounds)
{
    uint8_t psk[DRTHS_KEY_BYTES] = {9, 8, 7};
    drths_wire_rx_t nrx, prx;
    drths_error_t err;
    static drths_msg_t m;
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    if (drths_wire_rx_init(&nrx, DRTHS_ROLE_NUMERICAL, psk, &err) ||
        drths_wire_rx_init(&prx, DRTHS_ROLE_PHYSICAL, psk, &err))
        return 1;
    double hs[MAX_ROUNDS], dec[MAX_ROUNDS], pre[MAX_ROUNDS];
    int bad = 0;
    for (int r = 0; r < rounds; r++) {
        int64_t t0 = drths_now_ns();
        bad |= one_handshake(psk, 0x1000 + (uint64_t)r, &nrx, &prx, &m, buf);
        hs[r] = (double)(drths_now_ns() - t0);
    }
    /* A forged HELLO: a genuine one with its tag flipped. */
    drths_wire_tx_t tx;
    uint8_t pk[32] = {9}, k[32] = {1};
    size_t len;
    drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, 77);
    drths_wire_tx_set_handshake(&tx, k, pk);
    hello_msg(&m, DRTHS_MSG_HELLO);
    bad |= drths_wire_seal(&tx, &m, buf, sizeof buf, &len);
    buf[len - 1] ^= 1;
    enum { N = 200 };
    volatile int sink = 0;
    for (int r = 0; r < rounds; r++) {
        int64_t t0 = drths_now_ns();
        for (int i = 0; i < N; i++)
            sink += drths_wire_open_hello(&prx, buf, len, &m) == DRTHS_REJECT_BAD_TAG;
        int64_t t1 = drths_now_ns();
        for (int i = 0; i < N; i++) {
            drths_wire_header_t h;
            sink += drths_wire_peek_header(buf, len, &h) == DRTHS_REJECT_OK &&
                    h.type == DRTHS_MSG_HELLO;
        }
        int64_t t2 = drths_now_ns();
        dec[r] = (double)(t1 - t0) / N;
        pre[r] = (double)(t2 - t1) / N;
    }
    drths_sort_double(hs, (size_t)rounds);
    drths_sort_double(dec, (size_t)rounds);
    drths_sort_double(pre, (size_t)rounds);
    printf("handshake total_us=%.1f\n", hs[rounds / 2] / 1000.0);
    printf("forged_hello v1_decrypt_ns=%.0f v2_header_ns=%.0f\n", dec[rounds / 2], pre[rounds / 2]);
    drths_wire_tx_close(&tx);
    drths_wire_rx_close(&nrx);
    drths_wire_rx_close(&prx);
    return bad || sink < 0;
}

/* ---- ping-pong ---------------------------------------------------------------------------- */

typedef struct peer {
    int fd;
    int busy;
    struct sockaddr_in to;
    long n;
    shape_t shape;
    int rc;
} peer_t;

static const uint8_t PP_PSK[DRTHS_KEY_BYTES] = {1, 2, 3};
#define PP_SID 0x1122334455667788ULL

static void pp_keys(drths_session_keys_t *keys)
{
    uint8_t dh[DRTHS_KEY_BYTES] = {4}, th[DRTHS_KEY_BYTES] = {5};
    drths_crypto_derive(PP_PSK, dh, th, keys);
}

static int pp_open(drths_role_t self, drths_wire_tx_t *tx, drths_wire_rx_t *rx)
{
    drths_session_keys_t keys;
    drths_error_t err;
    pp_keys(&keys);
    if (drths_wire_tx_init(tx, self, PP_SID) || drths_wire_rx_init(rx, self, PP_PSK, &err))
        return -1;
    drths_wire_tx_set_keys(tx, &keys);
    drths_wire_rx_start(rx, PP_SID);
    drths_wire_rx_set_keys(rx, &keys);
    return 0;
}

/* Blocking recv, or with busy a spin on a non-blocking one (what a thread with a core of its
 * own can afford: no wake-up latency). */
static ssize_t rx_wait(int fd, uint8_t *buf, size_t cap, int busy)
{
    if (!busy)
        return recv(fd, buf, cap, 0);
    for (;;) {
        ssize_t r = recv(fd, buf, cap, MSG_DONTWAIT);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return r;
    }
}

static int fifo(void)
{
    struct sched_param sp = {.sched_priority = 80};
    return pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
}

/* The numerical site's side: FEEDBACK in, COMMAND out, n times. */
static void *echo_thread(void *arg)
{
    peer_t *p = arg;
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    fifo();
    p->rc = 1;
    if (pp_open(DRTHS_ROLE_NUMERICAL, &tx, &rx))
        return NULL;
    drths_msg_t in, out;
    fill(&out, DRTHS_MSG_COMMAND, p->shape);
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    for (long i = 0; i < p->n; i++) {
        ssize_t r = rx_wait(p->fd, buf, sizeof buf, p->busy);
        if (r <= 0 || drths_wire_open(&rx, buf, (size_t)r, &in) != DRTHS_REJECT_OK)
            goto done;
        size_t len;
        out.tick = in.tick + 26;
        out.u.command.echo_counter = in.counter;
        if (drths_wire_seal(&tx, &out, buf, sizeof buf, &len) ||
            sendto(p->fd, buf, len, 0, (const struct sockaddr *)&p->to, sizeof p->to) < 0)
            goto done;
    }
    p->rc = 0;
done:
    drths_wire_tx_close(&tx);
    drths_wire_rx_close(&rx);
    return NULL;
}

static int udp_socket(struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof *addr;
    if (bind(fd, (struct sockaddr *)addr, sizeof *addr) ||
        getsockname(fd, (struct sockaddr *)addr, &sl)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int pingpong(long n, int busy, int dma, shape_t sh)
{
    struct sockaddr_in a_addr, b_addr;
    int a = udp_socket(&a_addr), b = udp_socket(&b_addr);
    double *lat = malloc((size_t)n * sizeof(double));
    if (a < 0 || b < 0 || !lat) {
        fprintf(stderr, PROG ": loopback sockets: %s\n", strerror(errno));
        return 1;
    }
    peer_t p = {.fd = b, .busy = busy, .to = a_addr, .n = n, .shape = sh, .rc = 0};
    pthread_t th;
    if (pthread_create(&th, NULL, echo_thread, &p)) {
        fprintf(stderr, PROG ": cannot start the echo thread\n");
        return 1;
    }
    int rt = fifo();
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    if (pp_open(DRTHS_ROLE_PHYSICAL, &tx, &rx))
        return 1;
    drths_msg_t fb, in;
    fill(&fb, DRTHS_MSG_FEEDBACK, sh);
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    long done = 0;
    for (long i = 0; i < n; i++) {
        int64_t t0 = drths_now_ns();
        size_t len;
        fb.tick++;
        if (drths_wire_seal(&tx, &fb, buf, sizeof buf, &len) ||
            sendto(a, buf, len, 0, (const struct sockaddr *)&b_addr, sizeof b_addr) < 0)
            break;
        ssize_t r = rx_wait(a, buf, sizeof buf, busy);
        if (r <= 0 || drths_wire_open(&rx, buf, (size_t)r, &in) != DRTHS_REJECT_OK)
            break;
        lat[done++] = (double)(drths_now_ns() - t0) * 1e-3;
    }
    pthread_join(th, NULL);
    drths_wire_tx_close(&tx);
    drths_wire_rx_close(&rx);
    close(a);
    close(b);
    if (done < n || p.rc) {
        fprintf(stderr, PROG ": ping-pong stopped after %ld of %ld\n", done, n);
        free(lat);
        return 1;
    }
    drths_sort_double(lat, (size_t)n);
    printf("latency mode=%s round_trips=%ld p50_us=%.2f p99_us=%.2f max_us=%.2f sched_fifo=%d "
           "dma_latency_0=%d\n",
           busy ? "busy-poll" : "blocking", n, lat[n / 2],
           lat[drths_quantile_rank((size_t)n, 0.99)], lat[n - 1], rt, dma);
    free(lat);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [--experiment FILE] [--rounds N] [--batch N] [--pingpong N]\n"
            "       [--chacha20 CODE]\n"
            "Nanoseconds per datagram to seal and to open the steady-state COMMAND and\n"
            "FEEDBACK of an experiment (its link.redundancy and actuator channels), beside\n"
            "libsodium's ChaCha20-Poly1305 alone on the same bytes (the floor), each the\n"
            "median over the rounds of the mean of a batch of calls; the whole handshake\n"
            "(X25519 at both ends) and the cost of rejecting a forged HELLO (authenticated,\n"
            "or dropped on its header); then the FEEDBACK-to-COMMAND latency through loopback\n"
            "sockets, with a blocking and with a busy-polling receiver. One \"key=value\" line\n"
            "per figure, for tools/bench.\n"
            "\n"
            "  --experiment FILE  the experiment whose datagrams to measure (default\n"
            "                     " DEFAULT_EXAMPLE " in share/drths/examples beside\n"
            "                     this program's bin/ where it is installed, else in the\n"
            "                     source tree's examples/)\n"
            "  --rounds N         rounds, 1 to %d (default 1000)\n"
            "  --batch N          calls per round, 1 to %d (default 20)\n"
            "  --pingpong N       loopback round trips per receiver, 0 for none (default 20000)\n"
            "  --chacha20 CODE    the codec's ChaCha20 code: avx512vl, avx2 or libsodium, to\n"
            "                     see what a CPU without AVX-512VL or AVX2 would do (default\n"
            "                     the fastest this CPU runs; one it cannot run is refused)\n"
            "  -h, --help         print this help and exit\n"
            "  --version          print the version and exit\n"
            "\n",
            MAX_ROUNDS, MAX_BATCH);
    drths_cli_print_exit_codes(f, "a datagram failed to seal or open, or the loopback failed");
}

/* The default experiment: share/drths/examples where this program is installed
 * (cmake/install.cmake: bin/ and share/ side by side, whatever the prefix), else examples/ of
 * the source tree it was built from. 0, or -ENOENT with the places tried in err. */
static int default_experiment(char *out, size_t cap, drths_error_t *err)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    int m = snprintf(out, cap, "%s/../share/drths/examples/" DEFAULT_EXAMPLE, exe);
    if (n > 0 && m > 0 && (size_t)m < cap && access(out, R_OK) == 0)
        return 0;
    m = snprintf(out, cap, "%s", DRTHS_SOURCE_EXAMPLES "/" DEFAULT_EXAMPLE);
    if (m > 0 && (size_t)m < cap && access(out, R_OK) == 0)
        return 0;
    return drths_error_set(
        err, -ENOENT,
        "no default experiment: neither %s/../share/drths/examples/" DEFAULT_EXAMPLE
        " nor " DRTHS_SOURCE_EXAMPLES "/" DEFAULT_EXAMPLE " is readable; give --experiment FILE",
        exe);
}

/* R and the channel count of the experiment at path. */
static int experiment_shape(const char *path, shape_t *sh, drths_error_t *err)
{
    drths_experiment_t exp;
    int rc = drths_experiment_load(&exp, path, err);
    if (rc != 0)
        return rc;
    sh->r = exp.link.redundancy;
    sh->channels = drths_experiment_n_actuators(&exp);
    drths_experiment_close(&exp);
    if (sh->r < 1 || sh->r > DRTHS_WIRE_MAX_R || sh->channels < 1 ||
        sh->channels > DRTHS_WIRE_MAX_CHANNELS)
        return drths_error_set(err, -EINVAL,
                               "%s: redundancy %d and %d channels: the wire "
                               "carries 1 to %d samples of 1 to %d channels",
                               path, sh->r, sh->channels, DRTHS_WIRE_MAX_R,
                               DRTHS_WIRE_MAX_CHANNELS);
    return 0;
}

int main(int argc, char **argv)
{
    enum { OPT_ROUNDS = 1, OPT_BATCH, OPT_PINGPONG, OPT_EXPERIMENT, OPT_CHACHA20 };
    static const char *const chacha_names[] = {"avx512vl", "avx2", "libsodium", NULL};
    static const drths_chacha20_impl_t chacha_impls[] = {
        DRTHS_CHACHA20_AVX512VL, DRTHS_CHACHA20_AVX2, DRTHS_CHACHA20_LIBSODIUM};
    static const struct option opts[] = {
        {"experiment", required_argument, NULL, OPT_EXPERIMENT},
        {"rounds", required_argument, NULL, OPT_ROUNDS},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"pingpong", required_argument, NULL, OPT_PINGPONG},
        {"chacha20", required_argument, NULL, OPT_CHACHA20},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    long rounds = 1000, batch = 20, pp = 20000;
    const char *experiment = NULL;
    int chacha = -1;
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_EXPERIMENT:
            experiment = optarg;
            break;
        case OPT_ROUNDS:
            if (drths_cli_long(PROG, "--rounds", optarg, 1, MAX_ROUNDS, &rounds) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_BATCH:
            if (drths_cli_long(PROG, "--batch", optarg, 1, MAX_BATCH, &batch) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_PINGPONG:
            if (drths_cli_long(PROG, "--pingpong", optarg, 0, MAX_PINGPONG, &pp) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_CHACHA20:
            chacha = drths_cli_choice(PROG, "--chacha20", optarg, chacha_names);
            if (chacha < 0)
                return DRTHS_EXIT_USAGE;
            break;
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    if (drths_crypto_init() != 0)
        return drths_cli_error(PROG, "libsodium failed to initialise");
    if (chacha >= 0 && drths_chacha20_prefer(chacha_impls[chacha]) != 0)
        return drths_cli_error(PROG, "--chacha20 %s: this CPU cannot run it", chacha_names[chacha]);
    char path[PATH_MAX];
    drths_error_t err;
    shape_t sh;
    if (!experiment && default_experiment(path, sizeof path, &err) == 0)
        experiment = path;
    if (!experiment || experiment_shape(experiment, &sh, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    printf("experiment path=%s r=%d channels=%d chacha20=%s\n", experiment, sh.r, sh.channels,
           drths_chacha20_impl_name(drths_chacha20_impl()));
    fflush(stdout);
    char loadavg[32] = "unknown";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%31s", loadavg) != 1)
            snprintf(loadavg, sizeof loadavg, "unknown");
        fclose(la);
    }
    fprintf(stderr,
            PROG ": figures from one run on %ld CPUs (1-minute load average %s): other work on "
                 "the machine moves every figure; compare the ratio to the AEAD alone, measured in "
                 "the same run, rather than nanoseconds across runs\n",
            sysconf(_SC_NPROCESSORS_ONLN), loadavg);
    if (bench(DRTHS_MSG_COMMAND, sh, (int)rounds, (int)batch) ||
        bench(DRTHS_MSG_FEEDBACK, sh, (int)rounds, (int)batch) || bench_handshake((int)rounds))
        return DRTHS_EXIT_FAILED;
    if (pp == 0)
        return DRTHS_EXIT_OK;
    int dma_fd = drths_rt_open_dma_latency(NULL, 0);
    int rc = pingpong(pp, 0, dma_fd >= 0, sh) || pingpong(pp, 1, dma_fd >= 0, sh);
    if (dma_fd >= 0)
        close(dma_fd);
    return rc ? DRTHS_EXIT_FAILED : DRTHS_EXIT_OK;
}
