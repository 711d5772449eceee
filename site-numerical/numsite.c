#include "site-numerical/numsite.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config/config.h"
#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "protocol/wire_filter.h"

#define MS INT64_C(1000000)
#define IDLE_NS (50 * MS)

int drths_numsite_init(drths_numsite_t *s, const drths_experiment_t *exp, const char *peer_text,
                       const uint8_t psk[DRTHS_KEY_BYTES], drths_error_t *err)
{
    memset(s, 0, sizeof *s);
    s->udp.fd = -1;
    s->exp = exp;
    s->dt_ns = (int64_t)llround(1e9 / exp->rate_hz);
    int rc = drths_addr_parse(&s->peer, peer_text, "--peer", err);
    if (rc)
        return rc;
    drths_addr_format(&s->peer, s->peer_text, sizeof s->peer_text);
    if (drths_crypto_init() != 0)
        return drths_error_set(err, -EIO, "libsodium failed to initialise");
    rc = drths_hello_init(&s->hello, exp, DRTHS_ROLE_NUMERICAL, 0, err);
    if (rc)
        return rc;
    memcpy(s->fingerprint, s->hello.fingerprint, sizeof s->fingerprint);
    drths_experiment_fingerprint_hex(s->fingerprint, s->fingerprint_hex);
    memcpy(s->psk, psk, DRTHS_KEY_BYTES);
    s->batch = calloc(DRTHS_UDP_BATCH, sizeof *s->batch);
    if (!s->batch)
        return drths_error_set(err, -ENOMEM, "out of memory for the receive batch");
    rc = drths_udp_open(&s->udp, NULL, &s->peer, err);
    if (!rc)
        rc = drths_probe_stats_init(&s->probes, (size_t)exp->link.probes, err);
    s->probe_count = (uint64_t)exp->link.probes;
    if (rc) {
        drths_numsite_close(s);
        return rc;
    }
    s->session_id = drths_crypto_random_session_id();
    rc = drths_wire_rx_init(&s->rx, DRTHS_ROLE_NUMERICAL, psk, err);
    if (rc) {
        drths_numsite_close(s);
        return rc;
    }
    drths_wire_rx_start(&s->rx, s->session_id);
    /* A fresh ephemeral pair per session: HELLO is sealed under a key from PSK, session id and
     * its public half; the secret lives only in rx, which wipes it once the keys exist. */
    uint8_t sk[DRTHS_EPH_BYTES], hk[DRTHS_KEY_BYTES];
    drths_crypto_eph_keypair(s->eph_pk, sk);
    drths_wire_rx_set_initiator(&s->rx, sk, s->eph_pk);
    drths_crypto_derive_hello(psk, s->session_id, s->eph_pk, hk);
    drths_wire_tx_init(&s->tx, DRTHS_ROLE_NUMERICAL, s->session_id);
    drths_wire_tx_set_handshake(&s->tx, hk, s->eph_pk);
    drths_crypto_wipe(sk, sizeof sk);
    drths_crypto_wipe(hk, sizeof hk);
    return 0;
}

int drths_numsite_filter(drths_numsite_t *s, drths_error_t *err)
{
    int rc = drths_udp_connect(&s->udp, &s->peer);
    if (rc)
        return drths_error_set(err, rc, "--kernel-filter: cannot connect the socket to %s: %s",
                               s->peer_text, strerror(-rc));
    drths_wire_filter_t f;
    drths_wire_filter_build(&f, DRTHS_ROLE_NUMERICAL, s->session_id);
    rc = drths_udp_attach_filter(&s->udp, f.insns, f.len);
    if (rc)
        return drths_error_set(err, rc, "--kernel-filter: cannot attach the socket filter: %s",
                               strerror(-rc));
    s->kernel_filter = 1;
    return 0;
}

void drths_numsite_close(drths_numsite_t *s)
{
    drths_wire_rx_close(&s->rx);
    drths_wire_tx_close(&s->tx);
    drths_probe_stats_close(&s->probes);
    if (s->udp.fd >= 0)
        drths_udp_close(&s->udp);
    free(s->batch);
    s->batch = NULL;
    drths_crypto_wipe(s->psk, sizeof s->psk);
}

/* Seals and sends m; *counter (may be NULL) gets its counter. RT-safe. */
static int send_msg(drths_numsite_t *s, const drths_msg_t *m, uint64_t *counter)
{
    size_t len;
    int rc = drths_wire_seal(&s->tx, m, s->buf, sizeof s->buf, &len);
    if (rc) {
        s->seal_errors++;
        return rc;
    }
    if (counter)
        *counter = s->tx.next_counter - 1;
    rc = drths_udp_send(&s->udp, &s->peer, s->buf, len);
    if (rc)
        s->send_errors++;
    return rc;
}

/* A STOP or ABORT in `copies` copies, gap_ns apart (0: back to back). */
static void send_stop_copies(drths_numsite_t *s, drths_msg_type_t type, int reason,
                             const char *text, int copies, int64_t gap_ns)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.u.stop.reason = (uint8_t)reason;
    /* A longer sentence is cut to the message's text field. */
    snprintf(m.u.stop.text, sizeof m.u.stop.text, "%.*s", (int)sizeof m.u.stop.text - 1, text);
    for (int i = 0; i < copies; i++) {
        if (i && gap_ns)
            drths_sleep_until_ns(drths_now_ns() + gap_ns);
        send_msg(s, &m, NULL);
    }
}

static void send_stop_like(drths_numsite_t *s, drths_msg_type_t type, int reason,
                           const char *text)
{
    send_stop_copies(s, type, reason, text, 3, 0);
}

static void send_abort(drths_numsite_t *s, int reason, const char *text)
{
    send_stop_like(s, DRTHS_MSG_ABORT, reason, text);
}

/* The end of a --probe-only test, STOP when it finished and ABORT when it failed, in
 * END_COPIES copies END_GAP_NS apart (PROTOCOL.md section 7.5): a burst of loss, or an outage
 * shorter than their span, cannot take them all, and the actuator site ends with the outcome
 * this site has. When every copy is lost all the same, the actuator site decides from the
 * silence (it answered probes: the test ran). */
#define END_COPIES 20
#define END_GAP_NS INT64_C(10000000)

static void send_end_of_probe(drths_numsite_t *s, drths_msg_type_t type, int reason,
                              const char *text)
{
    send_stop_copies(s, type, reason, text, END_COPIES, END_GAP_NS);
}

void drths_numsite_farewell(drths_numsite_t *s, const char *text)
{
    if (s->probe_only)
        send_end_of_probe(s, DRTHS_MSG_STOP, DRTHS_STOP_USER_STOP, text);
    else
        send_stop_like(s, DRTHS_MSG_STOP, DRTHS_STOP_USER_STOP, text);
}

/* Receives what is waiting; calls fn for each valid datagram from the peer until fn returns
 * nonzero (that value is returned). RT-safe. */
typedef int (*msg_fn)(drths_numsite_t *s, const drths_msg_t *m, int64_t rx_ns, void *ctx);

static int drain(drths_numsite_t *s, drths_msg_t *m, msg_fn fn, void *ctx)
{
    for (;;) {
        int n = drths_udp_recv(&s->udp, s->batch, DRTHS_UDP_BATCH);
        if (n <= 0)
            return 0;
        for (int i = 0; i < n; i++) {
            if (!drths_addr_equal(&s->batch[i].from, &s->peer)) {
                s->wrong_source++;
                continue;
            }
            drths_reject_t r = drths_wire_open(&s->rx, s->batch[i].data, s->batch[i].len, m);
            if (r == DRTHS_REJECT_V1_PEER)
                s->v1_peer = 1;
            if (r != DRTHS_REJECT_OK)
                continue; /* counted by reason in rx.rejects */
            int rc = fn(s, m, s->batch[i].rx_ns, ctx);
            if (rc)
                return rc;
        }
        if (n < DRTHS_UDP_BATCH)
            return 0;
    }
}

/* No HELLO_ACK in time: say what the datagrams that did come tell (a v1 peer), else the
 * likely causes, a different key first among them (its HELLOs fail authentication there and
 * are dropped without an answer). */
static int handshake_timeout(drths_numsite_t *s, double timeout_s, drths_error_t *err)
{
    if (s->v1_peer)
        return drths_error_set(err, -EPROTO,
                               "the actuator site at %s speaks protocol v1 and this site v2: "
                               "upgrade it", s->peer_text);
    return drths_error_set(err, -ETIMEDOUT,
                           "no answer from the actuator site at %s after %g s: is drths-physical "
                           "running and listening there? A different key? compare "
                           "`drths-keygen --id` at both sites",
                           s->peer_text, timeout_s);
}

typedef struct hs_ctx {
    drths_error_t *err;
    int result; /* 1 accepted, -EPROTO mismatch */
} hs_ctx_t;

/* DRTHS_KEYLOG_FILE (for test tools only, like TLS's SSLKEYLOGFILE): appends the session's
 * keys, so that a test's on-path attacker can forge keyed datagrams. It defeats the forward
 * secrecy of the ephemeral exchange for that session; never set it in an experiment. */
static void keylog(const drths_numsite_t *s, const drths_session_keys_t *k)
{
    const char *path = getenv("DRTHS_KEYLOG_FILE");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char a[65], b[65], line[160];
    drths_experiment_fingerprint_hex(k->num_to_phys, a);
    drths_experiment_fingerprint_hex(k->phys_to_num, b);
    int n = snprintf(line, sizeof line, "%016" PRIx64 " %s %s\n", s->session_id, a, b);
    if (n > 0 && write(fd, line, (size_t)n) != n)
        n = -1;
    close(fd);
}

/* HELLO_ACK accepted: the session keys from PSK, DH and the transcript of both HELLOs. */
static void install_keys(drths_numsite_t *s, const drths_msg_t *m)
{
    uint8_t th[DRTHS_KEY_BYTES];
    drths_crypto_transcript(th, s->session_id, s->eph_pk, s->tx.hs_plain, s->tx.hs_plain_len,
                            m->eph, s->rx.plain, s->rx.plain_len);
    drths_session_keys_t keys;
    drths_crypto_derive(s->psk, s->rx.hs_dh, th, &keys);
    keylog(s, &keys);
    drths_wire_tx_set_keys(&s->tx, &keys);
    drths_wire_rx_set_keys(&s->rx, &keys); /* wipes the ephemeral secret */
    drths_crypto_wipe(&keys, sizeof keys);
    drths_crypto_wipe(th, sizeof th);
}

static int on_handshake(drths_numsite_t *s, const drths_msg_t *m, int64_t rx_ns, void *vctx)
{
    (void)rx_ns;
    hs_ctx_t *c = vctx;
    if (m->type == DRTHS_MSG_ABORT) {
        drths_error_set(c->err, -EPROTO, "the actuator site refused the session: %s: %s",
                        drths_stop_reason_name(m->u.stop.reason), m->u.stop.text);
        c->result = -EPROTO;
        return 1;
    }
    if (m->type != DRTHS_MSG_HELLO_ACK)
        return 0;
    const drths_msg_hello_t *a = &m->u.hello;
    install_keys(s, m);
    drths_experiment_fingerprint_hex(a->fingerprint, s->peer_fingerprint_hex);
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    int reason = drths_hello_mismatch(&s->hello, a, text, sizeof text);
    if (reason) {
        send_abort(s, reason, text);
        drths_error_set(c->err, -EPROTO, "the actuator site does not match: %s%s", text,
                        reason == DRTHS_STOP_FINGERPRINT_MISMATCH
                            ? " (both sites must use the same shared part of the experiment "
                              "file, docs/experiment-file.md)"
                            : "");
        c->result = -EPROTO;
        return 1;
    }
    c->result = 1;
    return 1;
}

int drths_numsite_handshake(drths_numsite_t *s, double timeout_s, drths_numsite_idle_fn idle,
                            void *ctx, drths_error_t *err)
{
    drths_msg_t hello, m;
    memset(&hello, 0, sizeof hello);
    hello.type = DRTHS_MSG_HELLO;
    hello.u.hello = s->hello;
    int64_t start = drths_now_ns(), end = start + (int64_t)(timeout_s * 1e9), next = start;
    hs_ctx_t c = {err, 0};
    for (;;) {
        int64_t now = drths_now_ns();
        if (now >= end)
            return handshake_timeout(s, timeout_s, err);
        if (now >= next) {
            int rc = send_msg(s, &hello, NULL);
            if (rc && rc != -EAGAIN && rc != -ECONNREFUSED)
                return drths_error_set(err, rc, "cannot send to %s: %s", s->peer_text,
                                       strerror(-rc));
            if (!s->hellos_sent++)
                s->first_hello_ns = now;
            next = now + 200 * MS;
        }
        if (idle && idle(ctx))
            return -ECANCELED;
        int64_t wake = next < end ? next : end;
        if (wake > now + IDLE_NS)
            wake = now + IDLE_NS;
        drths_udp_wait(&s->udp, wake);
        if (drain(s, &m, on_handshake, &c))
            return c.result < 0 ? c.result : 0;
    }
}

typedef struct probe_ctx {
    unsigned char *answered;
    uint64_t newest; /* the highest sequence number answered so far, + 1 */
    drths_error_t *err;
} probe_ctx_t;

static int on_probe(drths_numsite_t *s, const drths_msg_t *m, int64_t rx_ns, void *vctx)
{
    probe_ctx_t *c = vctx;
    if (m->type == DRTHS_MSG_ABORT || m->type == DRTHS_MSG_STOP) {
        drths_error_set(c->err, -EPROTO, "actuator site aborted: %s: %s",
                        drths_stop_reason_name(m->u.stop.reason), m->u.stop.text);
        return -EPROTO;
    }
    if (m->type != DRTHS_MSG_PROBE_ECHO)
        return 0;
    uint64_t seq = m->u.probe.seq;
    if (seq >= s->probes_sent || c->answered[seq])
        return 0;
    c->answered[seq] = 1;
    s->probes_answered++;
    if (seq + 1 < c->newest)
        s->probes_reordered++;
    else
        c->newest = seq + 1;
    drths_probe_stats_add(&s->probes, rx_ns - (int64_t)m->u.probe.send_time_ns -
                                          (int64_t)m->u.probe.hold_ns);
    return 0;
}

int drths_numsite_set_probes(drths_numsite_t *s, uint64_t n, drths_error_t *err)
{
    drths_probe_stats_close(&s->probes);
    int rc = drths_probe_stats_init(&s->probes, (size_t)n, err);
    s->probe_count = rc == 0 ? n : 0;
    s->probe_only = rc == 0;
    return rc;
}

int64_t drths_numsite_probe_interval_ns(const drths_numsite_t *s)
{
    return s->dt_ns > 500000 ? s->dt_ns : 500000;
}

/* The runs of unanswered probes among the n sent. */
static void count_loss_bursts(drths_numsite_t *s, const unsigned char *answered, uint64_t n)
{
    uint64_t run = 0;
    for (uint64_t i = 0; i <= n; i++) {
        if (i < n && !answered[i]) {
            run++;
            continue;
        }
        if (run > 0)
            s->probe_loss_bursts++;
        if (run > s->probe_loss_longest)
            s->probe_loss_longest = run;
        run = 0;
    }
}

int drths_numsite_probe(drths_numsite_t *s, drths_numsite_idle_fn idle, void *ctx,
                        drths_error_t *err)
{
    uint64_t n = s->probe_count;
    int64_t interval = drths_numsite_probe_interval_ns(s);
    probe_ctx_t c = {calloc(n, 1), 0, err};
    if (!c.answered)
        return drths_error_set(err, -ENOMEM, "out of memory for %llu probes",
                               (unsigned long long)n);
    drths_msg_t m, probe;
    memset(&probe, 0, sizeof probe);
    probe.type = DRTHS_MSG_PROBE;
    int64_t next = drths_now_ns(), last_sent = next;
    int rc = 0;
    for (;;) {
        int64_t now = drths_now_ns();
        if (s->probes_sent < n && now >= next) {
            probe.u.probe.seq = s->probes_sent;
            probe.u.probe.send_time_ns = (uint64_t)now;
            send_msg(s, &probe, NULL);
            s->probes_sent++;
            last_sent = now;
            next += interval;
            if (next < now)
                next = now; /* we were late: no burst to catch up */
        }
        if (s->probes_sent == n &&
            (s->probes_answered == n || now - last_sent >= 2 * DRTHS_NS_PER_S))
            break;
        if (idle && idle(ctx)) {
            rc = -ECANCELED;
            break;
        }
        int64_t wake = s->probes_sent < n ? next : last_sent + 2 * DRTHS_NS_PER_S;
        if (wake > now + IDLE_NS)
            wake = now + IDLE_NS;
        drths_udp_wait(&s->udp, wake);
        rc = drain(s, &m, on_probe, &c);
        if (rc)
            break;
    }
    count_loss_bursts(s, c.answered, s->probes_sent);
    free(c.answered);
    /* A --probe-only test that fails here tells the actuator site, which would otherwise take
     * the silence after the probes for a finished test. */
    if (rc == -ECANCELED && s->probe_only)
        send_end_of_probe(s, DRTHS_MSG_ABORT, DRTHS_STOP_USER_STOP,
                          "probe-only test stopped at the numerical site");
    if (rc)
        return rc;
    if (s->probes_answered * 10 < n) {
        rc = drths_error_set(err, -EPROTO,
                             "only %llu of %llu probes were answered within 2 s (%.1f %% "
                             "lost): the link to %s loses too much to run",
                             (unsigned long long)s->probes_answered, (unsigned long long)n,
                             100.0 * (double)(n - s->probes_answered) / (double)n, s->peer_text);
        if (s->probe_only)
            send_end_of_probe(s, DRTHS_MSG_ABORT, DRTHS_STOP_PEER_LOST, err->msg);
        return rc;
    }
    drths_probe_stats_summary(&s->probes, s->dt_ns, &s->probe_summary);
    s->have_probe_summary = 1;
    int64_t q_ns;
    drths_probe_stats_quantile(&s->probes, s->exp->link.quantile, &q_ns);
    drths_lchoice_params_t lp = {
        .quantile = s->exp->link.quantile,
        .wake_margin_local_ns = 2 * s->dt_ns, /* not measured yet: 2 ticks each */
        .wake_margin_peer_ns = 2 * s->dt_ns,
        .safety_ticks = (uint32_t)s->exp->link.safety_margin_ticks,
        .fixed_L = (uint32_t)s->exp->link.loop_delay_ticks,
    };
    s->rtt_q_ns = q_ns;
    rc = drths_lchoice_compute(&lp, q_ns, s->dt_ns, &s->lchoice);
    if (rc)
        return drths_error_set(err, rc, "cannot choose L from a round trip of %lld ns",
                               (long long)q_ns);
    return 0;
}

/* Hands every waiting datagram from link i's peer to the loop. RT-safe (non-blocking
 * recvmmsg). */
static void drain_into(drths_numsite_t *s, int i, drths_hybrid_t *h, drths_msg_t *m)
{
    for (;;) {
        int n = drths_udp_recv(&s->udp, s->batch, DRTHS_UDP_BATCH);
        for (int j = 0; j < n; j++) {
            if (!drths_addr_equal(&s->batch[j].from, &s->peer)) {
                s->wrong_source++;
                continue;
            }
            if (drths_wire_open(&s->rx, s->batch[j].data, s->batch[j].len, m) == DRTHS_REJECT_OK)
                drths_hybrid_on_link_message(h, i, m, s->batch[j].rx_ns);
        }
        if (n < DRTHS_UDP_BATCH)
            return;
    }
}

void drths_numsite_records_abort(drths_numsite_t *s, const char *text)
{
    if (atomic_load(&s->records_abort))
        return;
    snprintf(s->records_text, sizeof s->records_text, "%s", text);
    atomic_store(&s->records_abort, 1); /* publishes the text */
}

void drths_numsite_run(drths_numsite_t *s, drths_hybrid_t *h, drths_recorder_t *rec,
                       atomic_int *stop, void (*wake)(void *ctx), void *ctx)
{
    drths_numsite_run_links(s, 1, h, rec, stop, wake, ctx);
}

void drths_numsite_run_links(drths_numsite_t *s, int nl, drths_hybrid_t *h, drths_recorder_t *rec,
                             atomic_int *stop, void (*wake)(void *ctx), void *ctx)
{
    drths_msg_t m;
    drths_hybrid_action_t a;
    int stop_sent = 0;
    uint64_t rows = 0;
    drths_udp_t *socks[DRTHS_UDP_WAIT_MAX];
    drths_steptime_t *st = s->steptime;
    for (int i = 0; i < nl && i < DRTHS_UDP_WAIT_MAX; i++)
        socks[i] = &s[i].udp;
    s->run_start_ns = drths_now_ns();
    for (;;) {
        if (!stop_sent && atomic_load(&s->records_abort)) {
            drths_hybrid_request_stop(h, DRTHS_STOP_RECORDS, s->records_text);
            stop_sent = 1;
        }
        int req = stop_sent ? 0 : atomic_load_explicit(stop, memory_order_relaxed);
        if (req) {
            drths_hybrid_request_stop(h, DRTHS_STOP_SIGNAL,
                                      req == 2 ? "stopped from the monitor at the numerical site"
                                               : "stopped by signal at the numerical site");
            stop_sent = 1;
        }
        /* Drain before reading the clock: if this thread was descheduled, the feedback that
         * arrived meanwhile (with its kernel arrival time) must be seen before the loop decides
         * that a deadline has passed. Not while the other links' messages of a step are still
         * to go: those polls decide nothing, and with N links draining every socket before
         * each of them was N * N receive calls per step. */
        if (!drths_hybrid_pending(h))
            for (int i = 0; i < nl; i++)
                drain_into(&s[i], i, h, &m);
        int64_t now = drths_now_ns();
        const long step_before = h->ns.step;
        drths_hybrid_poll_result_t pr = drths_hybrid_poll(h, now, &a);
        if (pr == DRTHS_HYBRID_ACT) {
            if (st && h->ns.step != step_before)
                drths_steptime_start(st, h->ns.step, now);
            if (a.send) {
                uint64_t counter;
                drths_numsite_t *l = &s[a.link < nl ? a.link : 0];
                if (send_msg(l, a.send, &counter) == 0 && a.is_command) {
                    int64_t sent = drths_now_ns();
                    drths_hybrid_link_sent(h, a.link, counter, sent);
                    if (st)
                        drths_steptime_sent(st, sent);
                }
            }
            if (a.row) {
                drths_recorder_push(rec, a.row);
                atomic_store_explicit(&s->pub_step, h->ns.step, memory_order_relaxed);
                atomic_store_explicit(&s->pub_concealed, h->c.concealed, memory_order_relaxed);
                atomic_store_explicit(&s->pub_rtt_ns, h->lk[0].rtt.last_rtt_ns,
                                      memory_order_relaxed);
                atomic_store_explicit(&s->pub_late, h->c.fb_late, memory_order_relaxed);
                /* Each link's own figures for the status line (link 0's round trip above). */
                for (int i = 1; i < nl; i++)
                    atomic_store_explicit(&s[i].pub_rtt_ns, h->lk[i].rtt.last_rtt_ns,
                                          memory_order_release);
                uint64_t rej = 0;
                for (int i = 0; i < nl; i++) {
                    uint64_t r_i = s[i].wrong_source;
                    for (int r = 1; r < DRTHS_REJECT_COUNT; r++)
                        r_i += s[i].rx.rejects[r];
                    rej += r_i;
                    if (nl == 1)
                        continue;
                    atomic_store_explicit(&s[i].pub_link_concealed, h->lk[i].c.concealed,
                                          memory_order_release);
                    atomic_store_explicit(&s[i].pub_link_late, h->lk[i].c.fb_late,
                                          memory_order_relaxed);
                    atomic_store_explicit(&s[i].pub_link_rejected, r_i, memory_order_relaxed);
                }
                atomic_store_explicit(&s->pub_rejected, rej, memory_order_relaxed);
                if (++rows % 256 == 0 && wake)
                    wake(ctx);
            }
            continue;
        }
        if (st)
            drths_steptime_idle(st);
        if (pr == DRTHS_HYBRID_DONE)
            break;
        int64_t until = a.wake_ns;
        if (until > now + IDLE_NS)
            until = now + IDLE_NS; /* to see a stop request soon */
        if (nl == 1)
            drths_udp_wait_spin(&s->udp, until, s->wait_spin_ns);
        else
            drths_udp_wait_many(socks, nl, until, s->wait_spin_ns);
    }
    s->run_end_ns = drths_now_ns();
    if (wake)
        wake(ctx);
}
