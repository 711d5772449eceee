/* drths-conform --role numerical: this tool is the numerical site, the site under test the
 * actuator site. The handshake checks first (each with a fresh session), then one session
 * through a short run and its end. */
#include "tools/conform/conform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "common/platform/rtclock.h"

#define QUIET_MS 400 /* a datagram that gets no answer within this gets none */
#define MAX_EPHS 16
#define START_MS 2000 /* under a replay, the real site starts within this of its first HELLO */
#define RECORDED 12   /* recorded HELLOs replayed by the attack checks */
#define UNPIN_MS 1100 /* after an attack check its session goes quiet this long (7.4) */

/* Every ephemeral the site has sent us: a new HELLO_ACK's must differ from all of them. */
static uint8_t seen_eph[MAX_EPHS][DRTHS_EPH_BYTES];
static int n_seen_eph;

static bool eph_is_new(const uint8_t *e)
{
    for (int i = 0; i < n_seen_eph; i++)
        if (memcmp(seen_eph[i], e, DRTHS_EPH_BYTES) == 0)
            return false;
    if (n_seen_eph < MAX_EPHS)
        memcpy(seen_eph[n_seen_eph++], e, DRTHS_EPH_BYTES);
    return true;
}

/* Datagrams arriving on u within ms (from anyone). */
static int count_answers(conform_t *c, drths_udp_t *u, int ms)
{
    int n = 0;
    int64_t end = drths_now_ns() + ms * CONFORM_MS;
    while (conform_recv(c, u, end))
        n++;
    return n;
}

static void check_junk(conform_t *c)
{
    uint8_t junk[120];
    randombytes_buf(junk, sizeof junk);
    memcpy(junk, "DRTH", 4); /* past the magic, so the site looks further */
    conform_send(c, &c->udp, &c->peer, junk, sizeof junk);
    conform_send(c, &c->udp, &c->peer, junk + 4, 30);
    int n = count_answers(c, &c->udp, QUIET_MS);
    conform_check(c, n == 0, "junk-ignored",
                  "two junk datagrams (120 bytes after DRTH, 30 random bytes): %d answer(s) in "
                  "%d ms",
                  n, QUIET_MS);
}

static void check_v1(conform_t *c)
{
    conform_session_t s;
    if (conform_session_open(c, &s, &c->hello, c->psk) != 0) {
        conform_check(c, false, "v1-ignored", "could not build a HELLO");
        return;
    }
    s.hello[4] = 1;
    conform_send(c, &c->udp, &c->peer, s.hello, s.hello_len);
    int n = count_answers(c, &c->udp, QUIET_MS);
    conform_check(c, n == 0, "v1-ignored",
                  "a HELLO with header version 1: %d answer(s) in %d ms (a v2 site drops it "
                  "before decryption, V1_PEER)",
                  n, QUIET_MS);
    conform_session_close(&s);
}

/* Sends s's HELLO and waits for the first datagram of its session that opens; returns 1 with
 * it in *m (and the bytes in raw), else 0. *others counts datagrams that did not open. */
static int exchange(conform_t *c, conform_session_t *s, int ms, drths_msg_t *m, uint8_t *raw,
                    size_t *raw_len, int *others)
{
    conform_send(c, &c->udp, &c->peer, s->hello, s->hello_len);
    int64_t end = drths_now_ns() + ms * CONFORM_MS;
    *others = 0;
    while (conform_recv(c, &c->udp, end)) {
        if (drths_wire_open(&s->rx, c->msg->data, c->msg->len, m) == DRTHS_REJECT_OK) {
            if (raw) {
                memcpy(raw, c->msg->data, c->msg->len);
                *raw_len = c->msg->len;
            }
            return 1;
        }
        (*others)++;
    }
    return 0;
}

/* A HELLO with fields h gets a refusing ABORT with reason want whose text contains needle. */
static void check_refusal(conform_t *c, const char *name, const drths_msg_hello_t *h, int want,
                          const char *needle, const char *what)
{
    conform_session_t s;
    drths_msg_t m;
    int others;
    if (conform_session_open(c, &s, h, c->psk) != 0) {
        conform_check(c, false, name, "could not build the HELLO");
        return;
    }
    int got = exchange(c, &s, 1000, &m, NULL, NULL, &others);
    bool ok = got && m.type == DRTHS_MSG_ABORT && m.has_eph && m.u.stop.reason == want &&
              strstr(m.u.stop.text, needle) != NULL;
    bool fresh = got && m.has_eph && eph_is_new(m.eph);
    if (!got)
        conform_check(c, false, name, "%s: no ABORT that opens in 1 s (%d other datagram(s))", what,
                      others);
    else
        conform_check(c, ok && fresh, name, "%s: got %s %s \"%s\" (expected %s naming %s%s)", what,
                      drths_msg_type_name(m.type), drths_stop_reason_name(m.u.stop.reason),
                      m.u.stop.text, drths_stop_reason_name(want), needle,
                      fresh ? "" : "; its ephemeral was used before");
    count_answers(c, &c->udp, 100); /* the other copies of the ABORT */
    conform_session_close(&s);
}

static void check_version(conform_t *c)
{
    drths_msg_hello_t h = c->hello;
    h.proto_min = 3;
    h.proto_max = 4;
    check_refusal(c, "version-mismatch", &h, DRTHS_STOP_VERSION_MISMATCH, "3..4",
                  "a HELLO offering versions 3..4");
}

static void check_fingerprint(conform_t *c)
{
    drths_msg_hello_t h = c->hello;
    h.fingerprint[0] ^= 0xff;
    const char *section = "(none listed)";
    if (h.n_sections > 0) {
        int i = h.n_sections > 2 ? 2 : 0;
        h.sections[i].hash[0] ^= 0xff;
        section = c->hello.sections[i].name;
    }
    char what[96];
    snprintf(what, sizeof what, "a HELLO whose fingerprint and '%s' section hash differ", section);
    check_refusal(c, "fingerprint-mismatch", &h, DRTHS_STOP_FINGERPRINT_MISMATCH,
                  h.n_sections > 0 ? section : "", what);
}

static void check_wrong_key(conform_t *c)
{
    conform_session_t s;
    uint8_t wrong[DRTHS_KEY_BYTES];
    memcpy(wrong, c->psk, sizeof wrong);
    wrong[7] ^= 0x5a;
    if (conform_session_open(c, &s, &c->hello, wrong) != 0) {
        conform_check(c, false, "wrong-key-ignored", "could not build the HELLO");
        return;
    }
    conform_send(c, &c->udp, &c->peer, s.hello, s.hello_len);
    int n = count_answers(c, &c->udp, QUIET_MS);
    conform_check(c, n == 0, "wrong-key-ignored",
                  "a HELLO sealed under another PSK: %d answer(s) in %d ms", n, QUIET_MS);
    conform_session_close(&s);
}

/* The first HELLO_ACK of the session: its fields, its ephemeral, the key schedule. */
static int check_good_hello(conform_t *c, conform_session_t *s, uint8_t *ack, size_t *ack_len)
{
    drths_msg_t m;
    int others;
    if (conform_session_open(c, s, &c->hello, c->psk) != 0)
        return 0;
    int got = exchange(c, s, 1500, &m, ack, ack_len, &others);
    if (!got || m.type != DRTHS_MSG_HELLO_ACK) {
        conform_check(c, false, "hello-ack", "a matching HELLO (after the refusals): %s",
                      got ? drths_msg_type_name(m.type)
                          : "no answer that opens in 1.5 s (a different key? compare "
                            "drths-keygen --id at both sites)");
        return 0;
    }
    const drths_msg_hello_t *a = &m.u.hello;
    bool ok = a->version == 2 && a->role == DRTHS_ROLE_PHYSICAL && a->link == c->hello.link &&
              a->proto_min <= 2 && a->proto_max >= 2 &&
              memcmp(a->fingerprint, c->hello.fingerprint, DRTHS_WIRE_FINGERPRINT_BYTES) == 0 &&
              a->rate_hz == c->hello.rate_hz && a->n_channels == c->hello.n_channels &&
              a->r == c->hello.r &&
              memcmp(a->offsets, c->hello.offsets, a->r * sizeof a->offsets[0]) == 0 &&
              m.counter == 1 && m.tick == 0 && m.epoch == 0;
    conform_check(c, ok, "hello-ack",
                  "HELLO_ACK counter %llu tick %llu: version %u (range %u..%u), link %u, %g Hz, "
                  "%u channel(s), R %u, fingerprint %s, site \"%s\", software \"%s\"",
                  (unsigned long long)m.counter, (unsigned long long)m.tick, a->version,
                  a->proto_min, a->proto_max, a->link, a->rate_hz, a->n_channels, a->r,
                  memcmp(a->fingerprint, c->hello.fingerprint, 32) ? "differs" : "equal", a->site,
                  a->software);
    conform_check(c, eph_is_new(m.eph), "hello-ack-fresh-ephemeral",
                  "the HELLO_ACK's ephemeral differs from the %d the site sent before",
                  n_seen_eph - 1);
    char what[160];
    int rc = conform_key_schedule(c, s, ack, *ack_len, what, sizeof what);
    if (rc)
        conform_check(c, false, "key-schedule", "%s", what);
    return rc == 0;
}

/* A PROBE under the recomputed keys; its PROBE_ECHO must open under them. */
static void check_probe(conform_t *c, conform_session_t *s)
{
    drths_msg_t p, m;
    memset(&p, 0, sizeof p);
    p.type = DRTHS_MSG_PROBE;
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    int echoed = 0, bad = 0;
    for (int i = 0; i < 5; i++) {
        p.u.probe.seq = (uint64_t)i;
        p.u.probe.send_time_ns = (uint64_t)drths_now_ns();
        size_t n = conform_seal(s, &p, buf, sizeof buf);
        conform_send(c, &c->udp, &c->peer, buf, n);
        int64_t end = drths_now_ns() + 200 * CONFORM_MS;
        while (conform_recv(c, &c->udp, end)) {
            if (drths_wire_open(&s->rx, c->msg->data, c->msg->len, &m) != DRTHS_REJECT_OK)
                continue;
            bool ok = m.type == DRTHS_MSG_PROBE_ECHO && m.u.probe.seq == p.u.probe.seq &&
                      m.u.probe.send_time_ns == p.u.probe.send_time_ns;
            echoed += ok;
            bad += !ok;
            break;
        }
    }
    conform_check(c, echoed > 0, "key-schedule",
                  "session keys recomputed from dh and the transcript (section 3): %d of 5 "
                  "PROBE_ECHOs open under them",
                  echoed);
    conform_check(c, echoed == 5 && bad == 0, "probe-echo",
                  "5 PROBEs: %d PROBE_ECHO(s) echoing seq and send_time_ns, %d other", echoed, bad);
}

/* Another session's valid HELLO from another source port while ours is pinned. */
static void check_pinned(conform_t *c)
{
    conform_session_t o;
    if (conform_session_open(c, &o, &c->hello, c->psk) != 0)
        return;
    conform_send(c, &c->udp2, &c->peer, o.hello, o.hello_len);
    int n = count_answers(c, &c->udp2, QUIET_MS);
    conform_check(c, n == 0, "hello-pinned",
                  "a valid HELLO of another session from another port while ours has proved "
                  "itself (its PROBEs): %d answer(s) in %d ms",
                  n, QUIET_MS);
    conform_session_close(&o);
}

/* The adopted HELLO again, byte for byte: no answer, or a HELLO_ACK never under the same key
 * and nonce (another ephemeral or another counter). */
static void check_replay(conform_t *c, conform_session_t *s, const uint8_t *ack)
{
    conform_send(c, &c->udp, &c->peer, s->hello, s->hello_len);
    int64_t end = drths_now_ns() + QUIET_MS * CONFORM_MS;
    int acks = 0, same = 0;
    while (conform_recv(c, &c->udp, end)) {
        const uint8_t *d = c->msg->data;
        if (c->msg->len < 72 || d[5] != DRTHS_MSG_HELLO_ACK)
            continue;
        acks++;
        same += memcmp(d + 16, ack + 16, 8) == 0 && memcmp(d + 40, ack + 40, 32) == 0;
    }
    conform_check(c, same == 0, "hello-replay",
                  "the adopted HELLO replayed byte for byte: %d HELLO_ACK(s), %d under the first "
                  "one's ephemeral and counter (same key and nonce)",
                  acks, same);
}

/* Recorded HELLOs, replayed from the second port by the attack checks. */
typedef struct recording {
    uint8_t d[RECORDED][DRTHS_WIRE_MAX_DATAGRAM];
    size_t len[RECORDED];
    int n;
} recording_t;

/* Case 1 of issue 29: a numerical site that waited, repeating its HELLO (one session, counters
 * 1 .. RECORDED). */
static int record_waiting(conform_t *c, recording_t *r)
{
    conform_session_t s;
    if (conform_session_open(c, &s, &c->hello, c->psk) != 0)
        return -1;
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_HELLO;
    m.u.hello = c->hello;
    memcpy(r->d[0], s.hello, s.hello_len);
    r->len[0] = s.hello_len;
    for (r->n = 1; r->n < RECORDED; r->n++)
        if ((r->len[r->n] = conform_seal(&s, &m, r->d[r->n], sizeof r->d[r->n])) == 0)
            break;
    conform_session_close(&s);
    return r->n == RECORDED ? 0 : -1;
}

/* Case 2: RECORDED sessions, one HELLO each. */
static int record_chain(conform_t *c, recording_t *r)
{
    for (r->n = 0; r->n < RECORDED; r->n++) {
        conform_session_t s;
        if (conform_session_open(c, &s, &c->hello, c->psk) != 0)
            return -1;
        memcpy(r->d[r->n], s.hello, s.hello_len);
        r->len[r->n] = s.hello_len;
        conform_session_close(&s);
    }
    return 0;
}

/* A numerical site's start while the recording r is replayed from the second port, one
 * datagram every gap_ms from lead_ms before its first HELLO: HELLO every 200 ms until a
 * HELLO_ACK of its session opens, then a PROBE every 20 ms under the session keys until a
 * PROBE_ECHO opens. Returns the ms from the first HELLO to that PROBE_ECHO, or -1 if it did not
 * come within START_MS; *replays and *answers count the replays sent and the datagrams the
 * site sent back to the second port. */
static int start_under_replay(conform_t *c, const recording_t *r, int gap_ms, int lead_ms,
                              int *replays, int *answers)
{
    conform_session_t g;
    *replays = *answers = 0;
    if (conform_session_open(c, &g, &c->hello, c->psk) != 0)
        return -1;
    drths_msg_t hello, probe, m;
    memset(&hello, 0, sizeof hello);
    hello.type = DRTHS_MSG_HELLO;
    hello.u.hello = c->hello;
    memset(&probe, 0, sizeof probe);
    probe.type = DRTHS_MSG_PROBE;
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    int64_t now = drths_now_ns(), next_replay = now;
    int64_t t0 = now + lead_ms * CONFORM_MS, limit = t0 + START_MS * CONFORM_MS;
    int64_t next_send = t0;
    bool keyed = false, first = true;
    int result = -1;
    while ((now = drths_now_ns()) < limit) {
        if (now >= next_replay) {
            conform_send(c, &c->udp2, &c->peer, r->d[*replays % r->n], r->len[*replays % r->n]);
            (*replays)++;
            next_replay += gap_ms * CONFORM_MS;
        }
        if (now >= next_send) {
            size_t n = 0;
            if (keyed) {
                probe.u.probe.seq++;
                probe.u.probe.send_time_ns = (uint64_t)now;
                n = conform_seal(&g, &probe, buf, sizeof buf);
            } else if (first) {
                memcpy(buf, g.hello, g.hello_len);
                n = g.hello_len;
                first = false;
            } else {
                n = conform_seal(&g, &hello, buf, sizeof buf);
            }
            if (n)
                conform_send(c, &c->udp, &c->peer, buf, n);
            next_send = now + (keyed ? 20 : 200) * CONFORM_MS;
        }
        while (conform_recv(c, &c->udp2, 0))
            (*answers)++;
        int64_t until = next_send < next_replay ? next_send : next_replay;
        if (until > now + 5 * CONFORM_MS)
            until = now + 5 * CONFORM_MS;
        while (conform_recv(c, &c->udp, until)) {
            if (drths_wire_open(&g.rx, c->msg->data, c->msg->len, &m) != DRTHS_REJECT_OK)
                continue;
            char what[160];
            if (!keyed && m.type == DRTHS_MSG_HELLO_ACK &&
                conform_key_schedule(c, &g, c->msg->data, c->msg->len, what, sizeof what) == 0) {
                keyed = true;
                next_send = drths_now_ns();
                break;
            }
            if (keyed && m.type == DRTHS_MSG_PROBE_ECHO) {
                result = (int)((drths_now_ns() - t0) / CONFORM_MS);
                goto done;
            }
        }
    }
done:
    conform_session_close(&g);
    /* Our session has proved itself: let it go quiet, so the next session is not pinned. */
    count_answers(c, &c->udp, UNPIN_MS);
    while (conform_recv(c, &c->udp2, 0))
        (*answers)++;
    return result;
}

static void check_replay_attack(conform_t *c, const char *name, bool chain)
{
    recording_t *r = calloc(1, sizeof *r);
    if (!r || (chain ? record_chain(c, r) : record_waiting(c, r)) != 0) {
        conform_check(c, false, name, "could not build the recorded HELLOs");
        free(r);
        return;
    }
    int replays, answers;
    /* The waiting session's HELLO comes twice before the real one: the repeat is what kept a
     * session pinned before issue 29. */
    int ms = start_under_replay(c, r, chain ? 5 : 800, chain ? 300 : 900, &replays, &answers);
    if (chain)
        conform_check(c, ms >= 0, name,
                      "one HELLO of each of %d other sessions flooded from another port "
                      "(%d sent, %d answer(s)): the real session's PROBE_ECHO %d ms after its "
                      "first HELLO (at most %d; -1: none)",
                      r->n, replays, answers, ms, START_MS);
    else
        conform_check(c, ms >= 0, name,
                      "%d HELLOs of one other session (counters 1..%d) replayed every 800 ms from "
                      "another port (%d sent, %d answer(s)): the real session's PROBE_ECHO %d ms "
                      "after its first HELLO (at most %d; -1: none)",
                      r->n, r->n, replays, answers, ms, START_MS);
    free(r);
}

void conform_run_numerical(conform_t *c)
{
    check_junk(c);
    check_v1(c);
    check_version(c);
    check_fingerprint(c);
    check_wrong_key(c);
    check_replay_attack(c, "replayed-hello-start", false);
    check_replay_attack(c, "chained-hellos-start", true);
    conform_session_t s;
    uint8_t ack[DRTHS_WIRE_MAX_DATAGRAM];
    size_t ack_len = 0;
    if (!check_good_hello(c, &s, ack, &ack_len)) {
        conform_skip(c, "run", "no session: the run checks cannot be made");
        conform_session_close(&s);
        return;
    }
    check_probe(c, &s);
    check_pinned(c);
    check_replay(c, &s, ack);
    conform_run_numerical_session(c, &s);
    conform_session_close(&s);
}
