/* An on-path attacker for the fault tests (issue 5), and its own offline test.
 *
 * Without arguments this is a cmocka test: every attack datagram that the live test injects is
 * built here against a local receiver of a known session and must be rejected with exactly the
 * reason the attacker declares (so the live test can compare the actuator site's counters with
 * the attacker's declared tallies), and the genuine datagram it was made from must still be
 * accepted afterwards (or be REPLAYED when the attack spent its counter with the key).
 *
 * With a mode argument it is a tool, started by tests/fault/test_attack_live.sh and
 * tools/bench-flood:
 *
 *   fault_attack relay --listen HOST:PORT --target HOST:PORT [--key FILE] [--seed N]
 *                      [--capture FILE] [--attack] [--old FILE] [--flood-seconds S]
 *                      [--flood-all] [--flood-rate N] [--flood-client]
 *                      [--burst-at C --burst N] [--report FILE]
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
 * relay could miss). At SIGTERM it writes --report (JSON): what it sent, by the reject reason each
 * datagram must be counted under at the actuator site, and the kernel's drop count of the actuator
 * site's socket (a flood can overflow the receive buffer; those datagrams never reach the site);
 * with --flood-client also what it sent the numerical site, by the reason each would be counted
 * under there without the filter.
 *
 * Attack schedule (--attack), counted in COMMAND datagrams forwarded (5000 per second):
 *   from COMMAND 2200, every 50th: one single attack of the table below, made from the genuine
 *       COMMAND about to be forwarded (one at a time, so redundancy R = 4 repairs the genuine
 *       COMMANDs the keyed attacks make REPLAYED);
 *   COMMAND 3000: 1000 datagrams from another socket (off path), one of them a genuine COMMAND
 *       before its forwarded copy: all WRONG_SOURCE;
 *   from COMMAND 4000: the old session (--old), 4 datagrams per COMMAND forwarded;
 *   from COMMAND 12000: junk flood for --flood-seconds (default 1) at the highest rate.
 * With --flood-client, from COMMAND 10000: junk flood of the numerical site for --flood-seconds
 * (the client flood starts first, so a run with both has them one after the other).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>

#include "protocol/crypto.h"
#include "protocol/wire.h"

/* Reasons the actuator site counts outside the wire decoder (physsite.c). */
#define R_OTHER_SESSION DRTHS_REJECT_COUNT
#define R_WRONG_SOURCE (DRTHS_REJECT_COUNT + 1)
#define R_N (DRTHS_REJECT_COUNT + 2)

static const char *reason_name(int r)
{
    if (r == R_OTHER_SESSION)
        return "OTHER_SESSION";
    if (r == R_WRONG_SOURCE)
        return "WRONG_SOURCE";
    return drths_reject_name((drths_reject_t)r);
}

/* ---- small helpers ------------------------------------------------------------------------ */

static _Thread_local uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What an attacker knows of the session it attacks. */
typedef struct knowledge {
    uint8_t psk[DRTHS_KEY_BYTES];
    uint64_t session_id;
    bool have_keys;
    drths_session_keys_t keys;
    uint8_t hello[DRTHS_WIRE_MAX_DATAGRAM]; /* this session's HELLO as sent */
    size_t hello_len;
} knowledge_t;

/* ---- keyed payloads: valid-looking msgpack with wrong types, sealed with the session key ---- */

typedef struct pk {
    msgpack_sbuffer sb;
    msgpack_packer p;
} pk_t;

static void pk_begin(pk_t *k)
{
    msgpack_sbuffer_init(&k->sb);
    msgpack_packer_init(&k->p, &k->sb, msgpack_sbuffer_write);
}

/* A COMMAND payload for one channel and r samples; variant changes one thing. */
enum { KV_STRING_L, KV_SHORT_ARRAY, KV_NAN, KV_CHANNELS_9, KV_TRAILING, KV_NEVER_USED_BYTE,
       KV_MAP, KV_DEEP, KV_CHANNEL_SCALAR, KV_HEADER_HEARTBEAT, KV_COUNT };

static const struct {
    const char *name;
    drths_reject_t expect;
} keyed_variant[KV_COUNT] = {
    [KV_STRING_L] = {"keyed: loop_delay_ticks is a str", DRTHS_REJECT_BAD_SCHEMA},
    [KV_SHORT_ARRAY] = {"keyed: COMMAND array of 5", DRTHS_REJECT_BAD_SCHEMA},
    [KV_NAN] = {"keyed: displacement NaN", DRTHS_REJECT_BAD_FIELD},
    [KV_CHANNELS_9] = {"keyed: n_channels 9", DRTHS_REJECT_BAD_FIELD},
    [KV_TRAILING] = {"keyed: valid COMMAND + 1 trailing byte", DRTHS_REJECT_TRAILING_BYTES},
    [KV_NEVER_USED_BYTE] = {"keyed: msgpack byte 0xc1", DRTHS_REJECT_BAD_PAYLOAD},
    [KV_MAP] = {"keyed: map instead of array", DRTHS_REJECT_BAD_SCHEMA},
    [KV_DEEP] = {"keyed: arrays nested 40 deep", DRTHS_REJECT_BAD_PAYLOAD},
    [KV_CHANNEL_SCALAR] = {"keyed: channel is a float, not an array", DRTHS_REJECT_BAD_SCHEMA},
    [KV_HEADER_HEARTBEAT] = {"keyed: COMMAND payload under a HEARTBEAT header",
                             DRTHS_REJECT_BAD_SCHEMA},
};

static size_t keyed_payload(int v, uint64_t tick, uint8_t *out, size_t cap)
{
    pk_t k;
    pk_begin(&k);
    msgpack_packer *p = &k.p;
    int r = tick >= 3 ? 4 : (int)tick + 1;
    if (v == KV_NEVER_USED_BYTE) {
        msgpack_sbuffer_write(&k.sb, "\xc1", 1);
    } else if (v == KV_MAP) {
        msgpack_pack_map(p, 1);
        msgpack_pack_uint8(p, 0);
        msgpack_pack_uint8(p, 1);
    } else if (v == KV_DEEP) {
        for (int i = 0; i < 40; i++)
            msgpack_pack_array(p, 1);
        msgpack_pack_nil(p);
    } else {
        msgpack_pack_array(p, v == KV_SHORT_ARRAY ? 5 : 6);
        if (v == KV_STRING_L)
            msgpack_pack_str_with_body(p, "100", 3);
        else
            msgpack_pack_uint32(p, 100);
        msgpack_pack_uint8(p, v == KV_CHANNELS_9 ? 9 : 1);
        msgpack_pack_uint8(p, (uint8_t)r);
        msgpack_pack_uint8(p, 0);
        msgpack_pack_uint8(p, 0);
        if (v != KV_SHORT_ARRAY) {
            int nch = v == KV_CHANNELS_9 ? 9 : 1;
            msgpack_pack_array(p, (size_t)r);
            for (int s = 0; s < r; s++) {
                msgpack_pack_array(p, (size_t)nch);
                for (int c = 0; c < nch; c++) {
                    if (v == KV_CHANNEL_SCALAR) {
                        msgpack_pack_double(p, 0.0);
                        continue;
                    }
                    msgpack_pack_array(p, 4);
                    msgpack_pack_double(p, v == KV_NAN ? NAN : 0.0);
                    msgpack_pack_double(p, 0.0);
                    msgpack_pack_double(p, 0.0);
                    msgpack_pack_double(p, 0.0);
                }
            }
        }
        if (v == KV_TRAILING)
            msgpack_pack_nil(p);
    }
    size_t n = k.sb.size <= cap ? k.sb.size : 0;
    memcpy(out, k.sb.data, n);
    msgpack_sbuffer_destroy(&k.sb);
    return n;
}

/* ---- the single attacks ------------------------------------------------------------------- */

typedef struct attack {
    const char *name;
    int expect;        /* reason the actuator site must count it under */
    bool after;        /* sent after the genuine datagram is forwarded (replays) */
    bool spends;       /* authenticates: the genuine datagram is then REPLAYED */
} attack_t;

/* The number of single attacks (the table below plus the keyed variants). */
#define N_PLAIN 31
#define N_ATTACKS (N_PLAIN + KV_COUNT)

/* Builds attack i from the genuine COMMAND g (length n, not yet delivered) and an older
 * datagram of the same session (>= 2000 counters back). Returns the length (0 is a legal empty
 * datagram) and fills *a. out holds at least 65536 bytes. */
static size_t build_attack(int i, const knowledge_t *kn, const uint8_t *g, size_t n,
                           const uint8_t *old, size_t old_n, uint8_t *out, attack_t *a)
{
    memset(a, 0, sizeof *a);
    memcpy(out, g, n);
    size_t len = n;
    size_t body = n - DRTHS_WIRE_HEADER_BYTES - DRTHS_TAG_BYTES;
#define SET(nm, r) (a->name = (nm), a->expect = (r))
    switch (i) {
    case 0:
        SET("forged tag", DRTHS_REJECT_BAD_TAG);
        for (int k = 0; k < DRTHS_TAG_BYTES; k++)
            out[n - DRTHS_TAG_BYTES + k] = (uint8_t)rnd();
        break;
    case 1:
        SET("bit flip in the ciphertext", DRTHS_REJECT_BAD_TAG);
        out[DRTHS_WIRE_HEADER_BYTES + rnd() % body] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 2:
        SET("bit flip in the tag", DRTHS_REJECT_BAD_TAG);
        out[n - 1 - rnd() % DRTHS_TAG_BYTES] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 3:
        SET("bit flip in the header tick", DRTHS_REJECT_BAD_TAG);
        out[24 + rnd() % 8] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 4:
        SET("bit flip in the header epoch", DRTHS_REJECT_BAD_TAG);
        out[32 + rnd() % 4] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 5:
        SET("bit flip in the reserved bytes", DRTHS_REJECT_BAD_RESERVED);
        out[36 + rnd() % 4] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 6:
        SET("bit flip in the flags", DRTHS_REJECT_BAD_RESERVED);
        out[6 + rnd() % 2] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 7:
        SET("truncated by 1 byte", DRTHS_REJECT_BAD_TAG);
        len = n - 1;
        break;
    case 8:
        SET("truncated to 56 bytes", DRTHS_REJECT_TOO_SHORT);
        len = 56;
        break;
    case 9:
        SET("truncated to the header", DRTHS_REJECT_TOO_SHORT);
        len = DRTHS_WIRE_HEADER_BYTES;
        break;
    case 10:
        SET("empty datagram", DRTHS_REJECT_TOO_SHORT);
        len = 0;
        break;
    case 11:
        SET("oversized: 4921 bytes", DRTHS_REJECT_TOO_LONG);
        memset(out + n, 0, DRTHS_WIRE_MAX_DATAGRAM + 1 - n);
        len = DRTHS_WIRE_MAX_DATAGRAM + 1;
        break;
    case 12:
        SET("oversized: 60000 bytes", DRTHS_REJECT_TOO_LONG);
        for (size_t k = n; k < 60000; k++)
            out[k] = (uint8_t)rnd();
        len = 60000;
        break;
    case 13:
        SET("bad magic", DRTHS_REJECT_BAD_MAGIC);
        out[0] = 'X';
        break;
    case 14:
        SET("wrong version 0", DRTHS_REJECT_BAD_VERSION);
        out[4] = 0;
        break;
    case 15:
        SET("wrong version 2", DRTHS_REJECT_BAD_VERSION);
        out[4] = 2;
        break;
    case 16:
        SET("wrong type 0", DRTHS_REJECT_BAD_TYPE);
        out[5] = 0;
        break;
    case 17:
        SET("wrong type 11", DRTHS_REJECT_BAD_TYPE);
        out[5] = 11;
        break;
    case 18:
        SET("wrong type 255", DRTHS_REJECT_BAD_TYPE);
        out[5] = 255;
        break;
    case 19:
        SET("type FEEDBACK sent to the actuator site", DRTHS_REJECT_WRONG_DIRECTION);
        out[5] = DRTHS_MSG_FEEDBACK;
        break;
    case 20:
        SET("type HELLO_ACK sent to the actuator site", DRTHS_REJECT_WRONG_DIRECTION);
        out[5] = DRTHS_MSG_HELLO_ACK;
        break;
    case 21:
        SET("wrong session id (one bit)", DRTHS_REJECT_BAD_SESSION);
        out[8 + rnd() % 8] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 22:
        SET("session id 0", DRTHS_REJECT_BAD_SESSION);
        memset(out + 8, 0, 8);
        break;
    case 23:
        SET("counter 0", DRTHS_REJECT_BAD_COUNTER);
        memset(out + 16, 0, 8);
        break;
    case 24:
        SET("counter 2^64 - 1", DRTHS_REJECT_BAD_COUNTER);
        memset(out + 16, 0xff, 8);
        break;
    case 25:
        SET("counter 1e6 ahead, forged (the window must not move)", DRTHS_REJECT_BAD_TAG);
        put_u64(out + 16, get_u64(g + 16) + 1000000);
        break;
    case 26:
        SET("replay of the COMMAND just delivered", DRTHS_REJECT_REPLAYED);
        a->after = true;
        break;
    case 27:
        SET("replay of a COMMAND 2000+ counters old", DRTHS_REJECT_TOO_OLD);
        a->after = true;
        memcpy(out, old, old_n);
        len = old_n;
        break;
    case 28:
        SET("replay of this session's HELLO", DRTHS_REJECT_TOO_OLD);
        memcpy(out, kn->hello, kn->hello_len);
        len = kn->hello_len;
        break;
    case 29: {
        /* A genuine-looking HELLO of another session, sealed with the (public) key: the site
         * must not leave its running session for it. */
        SET("HELLO of a new session, validly sealed", R_OTHER_SESSION);
        drths_wire_tx_t tx;
        drths_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = DRTHS_MSG_HELLO;
        drths_msg_hello_t *h = &m.u.hello;
        h->proto_min = h->proto_max = 1;
        h->role = DRTHS_ROLE_NUMERICAL;
        h->rate_hz = 5000;
        h->n_channels = 1;
        h->r = 4;
        strcpy(h->units, "SI");
        strcpy(h->software, "attacker");
        drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, kn->psk, kn->session_id ^ 0x5a5a5a5a);
        if (drths_wire_seal(&tx, &m, out, 65536, &len) != 0)
            len = 0;
        drths_wire_tx_close(&tx);
        break;
    }
    case 30:
        SET("HELLO of a new session, forged tag", DRTHS_REJECT_BAD_TAG);
        memcpy(out, kn->hello, kn->hello_len);
        len = kn->hello_len;
        put_u64(out + 8, kn->session_id ^ 0xa5a5a5a5);
        break;
    default: {
        int v = i - N_PLAIN;
        if (v < 0 || v >= KV_COUNT)
            return 0;
        /* Keyed: the genuine header (its counter: the numerical site uses every counter, so
         * a keyed message must take one), our payload, sealed with the session key. */
        SET(keyed_variant[v].name, keyed_variant[v].expect);
        a->spends = true;
        if (v == KV_HEADER_HEARTBEAT)
            out[5] = DRTHS_MSG_HEARTBEAT;
        size_t pl = keyed_payload(v == KV_HEADER_HEARTBEAT ? KV_COUNT : v, get_u64(g + 24),
                                  out + DRTHS_WIRE_HEADER_BYTES, DRTHS_WIRE_MAX_PAYLOAD);
        drths_crypto_seal(kn->keys.num_to_phys, DRTHS_ROLE_NUMERICAL, get_u64(g + 16), out,
                          DRTHS_WIRE_HEADER_BYTES, out + DRTHS_WIRE_HEADER_BYTES, pl,
                          out + DRTHS_WIRE_HEADER_BYTES + pl);
        len = DRTHS_WIRE_HEADER_BYTES + pl + DRTHS_TAG_BYTES;
        break;
    }
    }
#undef SET
    return len;
}

/* ---- flood junk ---------------------------------------------------------------------------- */

/* Junk datagram number k. Six kinds in turn; the reason each must be counted under is known by
 * construction. The BAD_TAG kind carries the session id and a counter far ahead, so the
 * receiver runs the full authentication on it (the costliest path for junk). */
static size_t flood_junk(uint64_t k, const knowledge_t *kn, uint64_t base_counter, uint8_t *out,
                         int *reason)
{
    size_t len = 57 + rnd() % 200;
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)rnd();
    switch (k % 6) {
    case 0:
        out[0] = 'x';
        *reason = DRTHS_REJECT_BAD_MAGIC;
        break;
    case 1:
        len = rnd() % 57;
        *reason = DRTHS_REJECT_TOO_SHORT;
        break;
    case 2:
        memcpy(out, "DRTH", 4);
        out[4] = (uint8_t)(2 + rnd() % 200);
        *reason = DRTHS_REJECT_BAD_VERSION;
        break;
    case 3:
        memcpy(out, "DRTH", 4);
        out[4] = 1;
        out[5] = (uint8_t)(11 + rnd() % 200);
        *reason = DRTHS_REJECT_BAD_TYPE;
        break;
    case 4:
        memcpy(out, "DRTH", 4);
        out[4] = 1;
        out[5] = DRTHS_MSG_COMMAND;
        out[6] = 0x80;
        *reason = DRTHS_REJECT_BAD_RESERVED;
        break;
    default:
        memcpy(out, "DRTH", 4);
        out[4] = 1;
        out[5] = DRTHS_MSG_COMMAND;
        memset(out + 6, 0, 2);
        put_u64(out + 8, kn->session_id);
        put_u64(out + 16, base_counter + 1000000 + k);
        memset(out + 32, 0, 8);
        *reason = DRTHS_REJECT_BAD_TAG;
        break;
    }
    return len;
}

/* Junk datagram number k for the numerical site (--flood-client): six kinds in turn, none of
 * them with the session's id, so a numerical site with --kernel-filter must drop every one in
 * the kernel. The reason each would be counted under without the filter is known by
 * construction. */
static size_t client_junk(uint64_t k, const knowledge_t *kn, uint8_t *out, int *reason)
{
    size_t len = 57 + rnd() % 200;
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)rnd();
    memcpy(out, "DRTH", 4);
    out[4] = 1;
    out[5] = DRTHS_MSG_FEEDBACK;
    memset(out + 6, 0, 2);
    uint64_t other = kn->session_id ^ (rnd() | 1); /* differs in the last bit at least */
    put_u64(out + 8, other);
    put_u64(out + 16, 1 + k);
    memset(out + 36, 0, 4);
    switch (k % 6) {
    case 0:
        out[0] = 'x';
        *reason = DRTHS_REJECT_BAD_MAGIC;
        break;
    case 1:
        len = rnd() % 57;
        *reason = DRTHS_REJECT_TOO_SHORT;
        break;
    case 2:
        out[4] = (uint8_t)(2 + rnd() % 200);
        *reason = DRTHS_REJECT_BAD_VERSION;
        break;
    case 3: /* what only the numerical site sends */
        out[5] = (k / 6) % 2 ? DRTHS_MSG_COMMAND : DRTHS_MSG_HELLO;
        *reason = DRTHS_REJECT_WRONG_DIRECTION;
        break;
    case 4:
        out[39] = 0x01;
        *reason = DRTHS_REJECT_BAD_RESERVED;
        break;
    default: { /* well formed, of another session: what the actuator site sends */
        static const uint8_t types[] = {DRTHS_MSG_FEEDBACK, DRTHS_MSG_HELLO_ACK,
                                        DRTHS_MSG_HEARTBEAT, DRTHS_MSG_ABORT};
        out[5] = types[(k / 6) % 4];
        *reason = DRTHS_REJECT_BAD_SESSION;
        break;
    }
    }
    return len;
}

/* ---- offline test ---------------------------------------------------------------------------- */

typedef struct pair {
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    knowledge_t kn;
} pair_t;

static int pair_setup(void **state)
{
    static pair_t p;
    assert_int_equal(drths_crypto_init(), 0);
    memset(&p, 0, sizeof p);
    drths_key_rehearsal(p.kn.psk);
    p.kn.session_id = UINT64_C(0x1122334455667788);
    uint8_t nn[32], np[32];
    drths_crypto_random_nonce(nn);
    drths_crypto_random_nonce(np);
    drths_crypto_derive(p.kn.psk, nn, np, p.kn.session_id, &p.kn.keys);
    p.kn.have_keys = true;
    assert_int_equal(drths_wire_tx_init(&p.tx, DRTHS_ROLE_NUMERICAL, p.kn.psk, p.kn.session_id), 0);
    drths_error_t err;
    assert_int_equal(drths_wire_rx_init(&p.rx, DRTHS_ROLE_PHYSICAL, p.kn.psk, &err), 0);
    drths_wire_rx_start(&p.rx, p.kn.session_id);
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_HELLO;
    m.u.hello = (drths_msg_hello_t){.proto_min = 1, .proto_max = 1, .role = 1, .rate_hz = 5000,
                                    .n_channels = 1, .r = 4, .units = "SI"};
    memcpy(m.u.hello.nonce, nn, 32);
    assert_int_equal(drths_wire_seal(&p.tx, &m, p.kn.hello, sizeof p.kn.hello, &p.kn.hello_len), 0);
    drths_msg_t out;
    assert_int_equal(drths_wire_open(&p.rx, p.kn.hello, p.kn.hello_len, &out), DRTHS_REJECT_OK);
    drths_wire_tx_set_keys(&p.tx, &p.kn.keys);
    drths_wire_rx_set_keys(&p.rx, &p.kn.keys);
    *state = &p;
    return 0;
}

static size_t seal_command(pair_t *p, uint64_t tick, uint8_t *buf)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_COMMAND;
    m.epoch = 1;
    m.tick = tick;
    m.u.command.loop_delay_ticks = 100;
    m.u.command.n_channels = 1;
    m.u.command.r = 4;
    m.u.command.s[0][0].disp_m = 0.01;
    size_t len = 0;
    assert_int_equal(drths_wire_seal(&p->tx, &m, buf, DRTHS_WIRE_MAX_DATAGRAM, &len), 0);
    return len;
}

/* Every attack is rejected with its declared reason, and the genuine COMMAND after it is
 * accepted (or REPLAYED when the attack spent its counter). */
static void test_each_attack_gives_its_reason(void **state)
{
    pair_t *p = *state;
    static uint8_t old[DRTHS_WIRE_MAX_DATAGRAM], g[DRTHS_WIRE_MAX_DATAGRAM], out[65536];
    size_t old_n = seal_command(p, 1000, old);
    drths_msg_t m;
    assert_int_equal(drths_wire_open(&p->rx, old, old_n, &m), DRTHS_REJECT_OK);
    for (int k = 0; k < 2100; k++) {
        size_t n = seal_command(p, 1001 + (uint64_t)k, g);
        assert_int_equal(drths_wire_open(&p->rx, g, n, &m), DRTHS_REJECT_OK);
    }
    for (int i = 0; i < N_ATTACKS; i++) {
        size_t n = seal_command(p, 5000 + (uint64_t)i, g);
        attack_t a;
        size_t len = build_attack(i, &p->kn, g, n, old, old_n, out, &a);
        assert_non_null(a.name);
        drths_reject_t got_g = DRTHS_REJECT_OK;
        if (a.after)
            got_g = drths_wire_open(&p->rx, g, n, &m);
        drths_reject_t got;
        if (a.expect == R_OTHER_SESSION) {
            /* The site's HELLO path: it authenticates, but names another session. */
            got = drths_wire_open_hello(&p->rx, out, len, &m);
            assert_int_equal(got, DRTHS_REJECT_OK);
            assert_true(m.session_id != p->kn.session_id);
        } else {
            drths_wire_header_t h;
            if (drths_wire_peek_header(out, len, &h) == DRTHS_REJECT_OK &&
                h.type == DRTHS_MSG_HELLO && h.session_id != p->kn.session_id)
                got = drths_wire_open_hello(&p->rx, out, len, &m);
            else
                got = drths_wire_open(&p->rx, out, len, &m);
            if ((int)got != a.expect)
                fail_msg("attack %d (%s): %s, expected %s", i, a.name, drths_reject_name(got),
                         reason_name(a.expect));
        }
        if (!a.after)
            got_g = drths_wire_open(&p->rx, g, n, &m);
        assert_int_equal(got_g, a.spends ? DRTHS_REJECT_REPLAYED : DRTHS_REJECT_OK);
    }
}

/* Flood junk is rejected with the reason its kind declares and never moves the window. */
static void test_flood_junk_reasons(void **state)
{
    pair_t *p = *state;
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM], g[DRTHS_WIRE_MAX_DATAGRAM];
    drths_msg_t m;
    for (uint64_t k = 0; k < 6000; k++) {
        int reason;
        size_t len = flood_junk(k, &p->kn, 9000, buf, &reason);
        drths_reject_t got = drths_wire_open(&p->rx, buf, len, &m);
        if ((int)got != reason)
            fail_msg("junk %" PRIu64 ": %s, expected %s", k, drths_reject_name(got),
                     reason_name(reason));
    }
    size_t n = seal_command(p, 9000, g);
    assert_int_equal(drths_wire_open(&p->rx, g, n, &m), DRTHS_REJECT_OK);
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
    uint64_t expect[R_N]; /* by the reason each datagram is counted under at the receiver */
    uint64_t sent;
    double rate;
} flood_t;

typedef struct relay {
    int fd_listen, fd_target, fd_offpath;
    struct sockaddr_storage client;
    socklen_t client_len;
    bool have_client;
    struct sockaddr_in target;
    knowledge_t kn;
    drths_wire_rx_t rx_phys, rx_num; /* to read HELLO (nonce_num) and HELLO_ACK (nonce_phys) */
    uint8_t nonce_num[32];
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
    uint64_t expect[R_N];
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
    sa->sin_port = htons((uint16_t)atoi(c + 1));
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
            iov[i].iov_len = f->client ? client_junk(n, &r->kn, bufs[i], &reasons[i])
                                       : flood_junk(n, &r->kn, r->flood_base, bufs[i], &reasons[i]);
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
            memcpy(r->nonce_num, m.u.hello.nonce, 32);
            memcpy(r->kn.hello, d, n);
            r->kn.hello_len = n;
        }
    } else if (!from_numerical && h.type == DRTHS_MSG_HELLO_ACK && !r->kn.have_keys &&
               h.session_id == r->kn.session_id) {
        drths_wire_rx_start(&r->rx_num, h.session_id);
        if (drths_wire_open(&r->rx_num, d, n, &m) == DRTHS_REJECT_OK) {
            drths_crypto_derive(r->kn.psk, r->nonce_num, m.u.hello.nonce, h.session_id,
                                &r->kn.keys);
            r->kn.have_keys = true;
        }
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
    attack_t a = {0};
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
        if (r->flood_all && c == 0)
            start_flood(r);
        if (r->attack && r->kn.have_keys && c >= ATTACK_FROM && c % ATTACK_EVERY == 0 &&
            r->next_attack < N_ATTACKS) {
            uint64_t oc = c - 2100;
            alen = build_attack(r->next_attack, &r->kn, d, n, r->ring[oc % RING],
                                r->ring_len[oc % RING], out, &a);
            do_attack = true;
            r->next_attack++;
        }
        if (r->attack && c == OFFPATH_AT) {
            /* Off path: from another address, even a genuine datagram is dropped. */
            send_target(r, r->fd_offpath, d, n);
            for (int k = 1; k < 1000; k++) {
                int reason;
                size_t jl = flood_junk((uint64_t)k, &r->kn, h.counter, out, &reason);
                send_target(r, r->fd_offpath, out, jl);
            }
            r->expect[R_WRONG_SOURCE] += 1000;
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
                /* Its HELLO authenticates (a genuine HELLO) but names another session. */
                r->expect[oh.type == DRTHS_MSG_HELLO ? R_OTHER_SESSION
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
        fprintf(r->log, "attack %-55s -> %s%s\n", a.name, reason_name(a.expect),
                a.spends ? " (+ genuine REPLAYED)" : "");
    }
    send_target(r, r->fd_target, d, n);
    r->forwarded_fwd++;
    if (do_attack && a.after) {
        send_target(r, r->fd_target, out, alen);
        r->expect[a.expect]++;
        r->injected++;
        fprintf(r->log, "attack %-55s -> %s\n", a.name, reason_name(a.expect));
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
            r->forwarded_fwd, r->forwarded_back, r->commands, r->next_attack, N_ATTACKS);
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
    for (int k = 1; k < R_N; k++)
        if (r->expect[k]) {
            fprintf(f, "%s\"%s\": %" PRIu64, sep, reason_name(k), r->expect[k]);
            sep = ", ";
        }
    sep = "";
    fprintf(f, "},\n  \"flood_expect\": {");
    for (int k = 1; k < R_N; k++)
        if (r->flood.expect[k]) {
            fprintf(f, "%s\"%s\": %" PRIu64, sep, reason_name(k), r->flood.expect[k]);
            sep = ", ";
        }
    sep = "";
    fprintf(f, "},\n  \"client_flood_expect\": {");
    for (int k = 1; k < R_N; k++)
        if (r->client_flood.expect[k]) {
            fprintf(f, "%s\"%s\": %" PRIu64, sep, reason_name(k), r->client_flood.expect[k]);
            sep = ", ";
        }
    fprintf(f, "}\n}\n");
    fclose(f);
}

static int relay_main(int argc, char **argv)
{
    static relay_t r;
    memset(&r, 0, sizeof r);
    r.log = stderr;
    r.flood_seconds = 1.0;
    const char *listen_s = NULL, *target_s = NULL, *key = NULL, *old = NULL;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--attack"))
            r.attack = true;
        else if (!strcmp(o, "--flood-all"))
            r.flood_all = true;
        else if (!strcmp(o, "--flood-client"))
            r.flood_client = true;
        else if (v && !strcmp(o, "--listen"))
            listen_s = v, i++;
        else if (v && !strcmp(o, "--target"))
            target_s = v, i++;
        else if (v && !strcmp(o, "--key"))
            key = v, i++;
        else if (v && !strcmp(o, "--capture"))
            r.capture_path = v, i++;
        else if (v && !strcmp(o, "--old"))
            old = v, i++;
        else if (v && !strcmp(o, "--report"))
            r.report_path = v, i++;
        else if (v && !strcmp(o, "--flood-seconds"))
            r.flood_seconds = atof(v), i++;
        else if (v && !strcmp(o, "--flood-rate"))
            r.flood_rate_limit = atof(v), i++;
        else if (v && !strcmp(o, "--burst-at"))
            r.burst_at = strtoull(v, NULL, 10), i++;
        else if (v && !strcmp(o, "--burst"))
            r.burst_n = strtoull(v, NULL, 10), i++;
        else if (v && !strcmp(o, "--seed"))
            rng_state ^= strtoull(v, NULL, 10) * 0x2545F4914F6CDD1Du, i++;
        else {
            fprintf(stderr, "fault_attack relay: unknown or incomplete option %s\n", o);
            return 2;
        }
    }
    struct sockaddr_in la;
    if (!listen_s || !target_s || parse_addr(listen_s, &la) || parse_addr(target_s, &r.target)) {
        fprintf(stderr, "fault_attack relay: --listen and --target HOST:PORT (IPv4) needed\n");
        return 2;
    }
    if (drths_crypto_init() != 0)
        return 1;
    drths_error_t err;
    if (key) {
        if (drths_key_load(r.kn.psk, key, &err) != 0) {
            fprintf(stderr, "fault_attack: %s\n", err.msg);
            return 2;
        }
    } else {
        drths_key_rehearsal(r.kn.psk);
    }
    if (drths_wire_rx_init(&r.rx_phys, DRTHS_ROLE_PHYSICAL, r.kn.psk, &err) ||
        drths_wire_rx_init(&r.rx_num, DRTHS_ROLE_NUMERICAL, r.kn.psk, &err))
        return 1;
    if (old && read_file(old, &r.old, &r.old_len) != 0) {
        fprintf(stderr, "fault_attack: cannot read %s\n", old);
        return 2;
    }
    r.ring = calloc(RING, sizeof *r.ring);
    r.ring_len = calloc(RING, sizeof *r.ring_len);
    r.fd_listen = socket(AF_INET, SOCK_DGRAM, 0);
    r.fd_target = socket(AF_INET, SOCK_DGRAM, 0);
    r.fd_offpath = socket(AF_INET, SOCK_DGRAM, 0);
    int big = 4 << 20;
    setsockopt(r.fd_listen, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(r.fd_target, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(r.fd_target, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (bind(r.fd_listen, (struct sockaddr *)&la, sizeof la) != 0 ||
        connect(r.fd_target, (struct sockaddr *)&r.target, sizeof r.target) != 0) {
        fprintf(stderr, "fault_attack: bind %s / connect %s: %s\n", listen_s, target_s,
                strerror(errno));
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    /* The relay is the network: on a loaded machine an ordinary process is descheduled for
     * tens of ms, which the sites see (correctly) as a network outage. Below the sites' RT
     * threads (priority 80); without the privilege it runs as it is. */
    struct sched_param sp = {.sched_priority = 70};
    (void)sched_setscheduler(0, SCHED_FIFO, &sp);
    (void)mlockall(MCL_CURRENT | MCL_FUTURE);
    static uint8_t buf[65536];
    struct pollfd pf[2] = {{.fd = r.fd_listen, .events = POLLIN}, {.fd = r.fd_target, .events = POLLIN}};
    uint16_t tport = ntohs(r.target.sin_port);
    int64_t next_drops = 0;
    while (!stop_flag) {
        int np = poll(pf, 2, 50);
        if (now_ns() >= next_drops) {
            /* The site's socket disappears when it exits: keep the last value seen. */
            uint64_t d = udp_drops(tport);
            if (d > r.kernel_drops)
                r.kernel_drops = d;
            next_drops = now_ns() + 20000000;
        }
        if (np <= 0)
            continue;
        for (int burst = 0; burst < 64; burst++) {
            bool any = false;
            struct sockaddr_storage from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(r.fd_listen, buf, sizeof buf, MSG_DONTWAIT,
                                 (struct sockaddr *)&from, &fl);
            if (n >= 0) {
                any = true;
                r.client = from;
                r.client_len = fl;
                r.have_client = true;
                forward(&r, buf, (size_t)n);
            }
            n = recv(r.fd_target, buf, sizeof buf, MSG_DONTWAIT);
            if (n >= 0) {
                any = true;
                learn(&r, buf, (size_t)n, false);
                if (r.burst_back_left) {
                    r.burst_back_left--;
                    r.burst_dropped[1]++;
                } else if (r.have_client) {
                    (void)sendto(r.fd_listen, buf, (size_t)n, 0, (struct sockaddr *)&r.client,
                                 r.client_len);
                    r.forwarded_back++;
                }
            }
            if (!any)
                break;
        }
    }
    if (r.flood.started || r.client_flood.started)
        atomic_store(&r.flood_stop, 1);
    if (r.flood.started)
        pthread_join(r.flood.thread, NULL);
    if (r.client_flood.started)
        pthread_join(r.client_flood.thread, NULL);
    if (r.capture_path && write_file(r.capture_path, r.cap, r.cap_len) != 0)
        fprintf(stderr, "fault_attack: cannot write %s\n", r.capture_path);
    if (r.kernel_drops < r.kernel_drops0)
        r.kernel_drops = r.kernel_drops0;
    write_report(&r);
    fprintf(stderr,
            "fault_attack: forwarded %" PRIu64 " / %" PRIu64 ", commands %" PRIu64
            ", attacks %d of %d, injected %" PRIu64 ", flood %" PRIu64 " (%.0f/s), kernel drops %" PRIu64
            "\n",
            r.forwarded_fwd, r.forwarded_back, r.commands, r.next_attack, N_ATTACKS, r.injected,
            r.flood.sent, r.flood.rate, r.kernel_drops - r.kernel_drops0);
    free(r.cap);
    free(r.old);
    free(r.ring);
    free(r.ring_len);
    drths_wire_rx_close(&r.rx_phys);
    drths_wire_rx_close(&r.rx_num);
    return 0;
}

/* The numerical site's flood junk is rejected by a receiver of the numerical role with the
 * reason its kind declares. */
static void test_client_junk_reasons(void **state)
{
    pair_t *p = *state;
    drths_wire_rx_t rx;
    drths_error_t err;
    assert_int_equal(drths_wire_rx_init(&rx, DRTHS_ROLE_NUMERICAL, p->kn.psk, &err), 0);
    drths_wire_rx_start(&rx, p->kn.session_id);
    drths_wire_rx_set_keys(&rx, &p->kn.keys);
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    drths_msg_t m;
    for (uint64_t k = 0; k < 6000; k++) {
        int reason;
        size_t len = client_junk(k, &p->kn, buf, &reason);
        assert_true(len < 57 || get_u64(buf + 8) != p->kn.session_id);
        drths_reject_t got = drths_wire_open(&rx, buf, len, &m);
        if ((int)got != reason)
            fail_msg("client junk %" PRIu64 ": %s, expected %s", k, drths_reject_name(got),
                     reason_name(reason));
    }
    drths_wire_rx_close(&rx);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "relay"))
        return relay_main(argc, argv);
    if (argc > 1) {
        fprintf(stderr, "usage: fault_attack [relay OPTIONS] (see the file comment)\n");
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_attack_gives_its_reason),
        cmocka_unit_test(test_flood_junk_reasons),
        cmocka_unit_test(test_client_junk_reasons),
    };
    return cmocka_run_group_tests(tests, pair_setup, NULL);
}
