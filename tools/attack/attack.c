/* The attacks of drths-attack: see attack.h. */
#include "tools/attack/attack.h"

#include <math.h>
#include <msgpack.h>
#include <string.h>

const char *drths_attack_reason_name(int r)
{
    if (r == DRTHS_ATTACK_OTHER_SESSION)
        return "OTHER_SESSION";
    if (r == DRTHS_ATTACK_WRONG_SOURCE)
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

void drths_attack_seed(uint64_t seed)
{
    rng_state ^= seed * 0x2545F4914F6CDD1Du;
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
enum {
    KV_STRING_L,
    KV_SHORT_ARRAY,
    KV_NAN,
    KV_CHANNELS_9,
    KV_TRAILING,
    KV_NEVER_USED_BYTE,
    KV_MAP,
    KV_DEEP,
    KV_CHANNEL_SCALAR,
    KV_HEADER_HEARTBEAT,
    KV_COUNT
};
_Static_assert(KV_COUNT == DRTHS_ATTACK_N_KEYED, "attack.h counts the keyed variants");

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

/* Packs o with the first float64 found in depth-first order (the first sample's displacement
 * in a COMMAND payload: [L, channels, r, flags, reserved, [[[disp, vel, acc, cmd]], ...]])
 * moved by add; *done says whether one was. */
static void pack_spiked(msgpack_packer *p, const msgpack_object *o, double add, int *done)
{
    if (o->type == MSGPACK_OBJECT_FLOAT64 && !*done) {
        *done = 1;
        msgpack_pack_double(p, o->via.f64 + add);
        return;
    }
    if (o->type != MSGPACK_OBJECT_ARRAY) {
        msgpack_pack_object(p, *o);
        return;
    }
    msgpack_pack_array(p, o->via.array.size);
    for (uint32_t i = 0; i < o->via.array.size; i++)
        pack_spiked(p, &o->via.array.ptr[i], add, done);
}

size_t drths_attack_spike(const drths_attack_knowledge_t *kn, const uint8_t *g, size_t n,
                          double add_m, uint8_t *out)
{
    if (!kn->have_keys || n < DRTHS_WIRE_HEADER_BYTES + DRTHS_TAG_BYTES)
        return 0;
    const size_t body = n - DRTHS_WIRE_HEADER_BYTES - DRTHS_TAG_BYTES;
    uint8_t plain[DRTHS_WIRE_MAX_PAYLOAD];
    if (body > sizeof plain ||
        drths_crypto_open(kn->keys.num_to_phys, DRTHS_ROLE_NUMERICAL, get_u64(g + 16), g,
                          DRTHS_WIRE_HEADER_BYTES, g + DRTHS_WIRE_HEADER_BYTES, body,
                          g + DRTHS_WIRE_HEADER_BYTES + body, plain) != 0)
        return 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    size_t len = 0;
    if (msgpack_unpack_next(&u, (const char *)plain, body, &off) == MSGPACK_UNPACK_SUCCESS) {
        pk_t k;
        pk_begin(&k);
        int done = 0;
        pack_spiked(&k.p, &u.data, add_m, &done);
        if (done && k.sb.size <= DRTHS_WIRE_MAX_PAYLOAD) {
            memcpy(out, g, DRTHS_WIRE_HEADER_BYTES);
            memcpy(out + DRTHS_WIRE_HEADER_BYTES, k.sb.data, k.sb.size);
            drths_crypto_seal(kn->keys.num_to_phys, DRTHS_ROLE_NUMERICAL, get_u64(g + 16), out,
                              DRTHS_WIRE_HEADER_BYTES, out + DRTHS_WIRE_HEADER_BYTES, k.sb.size,
                              out + DRTHS_WIRE_HEADER_BYTES + k.sb.size);
            len = DRTHS_WIRE_HEADER_BYTES + k.sb.size + DRTHS_TAG_BYTES;
        }
        msgpack_sbuffer_destroy(&k.sb);
    }
    msgpack_unpacked_destroy(&u);
    return len;
}

/* ---- the single attacks ------------------------------------------------------------------- */

/* The attack's name and the reason it must be counted under. */
#define SET(nm, r) (a->name = (nm), a->expect = (r))

/* Attacks 0-12: bits flipped, the datagram truncated or padded. */
static void tamper_bytes(int i, const drths_attack_knowledge_t *kn, const uint8_t *g, size_t n,
                         const uint8_t *old, size_t old_n, uint8_t *out, size_t *len,
                         drths_attack_t *a)
{
    size_t body = n - DRTHS_WIRE_HEADER_BYTES - DRTHS_TAG_BYTES;
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
        *len = n - 1;
        break;
    case 8:
        SET("truncated to 56 bytes", DRTHS_REJECT_TOO_SHORT);
        *len = 56;
        break;
    case 9:
        SET("truncated to the header", DRTHS_REJECT_TOO_SHORT);
        *len = DRTHS_WIRE_HEADER_BYTES;
        break;
    case 10:
        SET("empty datagram", DRTHS_REJECT_TOO_SHORT);
        *len = 0;
        break;
    case 11:
        SET("oversized: 4921 bytes", DRTHS_REJECT_TOO_LONG);
        memset(out + n, 0, DRTHS_WIRE_MAX_DATAGRAM + 1 - n);
        *len = DRTHS_WIRE_MAX_DATAGRAM + 1;
        break;
    case 12:
        SET("oversized: 60000 bytes", DRTHS_REJECT_TOO_LONG);
        for (size_t k = n; k < 60000; k++)
            out[k] = (uint8_t)rnd();
        *len = 60000;
        break;
    }
}

/* Attacks 13-25: one header field set to a wrong value. */
static void tamper_header(int i, const drths_attack_knowledge_t *kn, const uint8_t *g, size_t n,
                          const uint8_t *old, size_t old_n, uint8_t *out, size_t *len,
                          drths_attack_t *a)
{
    switch (i) {
    case 13:
        SET("bad magic", DRTHS_REJECT_BAD_MAGIC);
        out[0] = 'X';
        break;
    case 14:
        SET("wrong version 0", DRTHS_REJECT_BAD_VERSION);
        out[4] = 0;
        break;
    case 15:
        SET("wrong version 3", DRTHS_REJECT_BAD_VERSION);
        out[4] = 3;
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
        out[7] = DRTHS_WIRE_FLAG_EPH; /* as a HELLO_ACK has it (else BAD_RESERVED first) */
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
    }
}

/* Attacks 26-30: replays and HELLOs of other sessions. */
static void replay_or_session(int i, const drths_attack_knowledge_t *kn, const uint8_t *g, size_t n,
                              const uint8_t *old, size_t old_n, uint8_t *out, size_t *len,
                              drths_attack_t *a)
{
    switch (i) {
    case 26:
        SET("replay of the COMMAND just delivered", DRTHS_REJECT_REPLAYED);
        a->after = true;
        break;
    case 27:
        SET("replay of a COMMAND 2000+ counters old", DRTHS_REJECT_TOO_OLD);
        a->after = true;
        memcpy(out, old, old_n);
        *len = old_n;
        break;
    case 28:
        SET("replay of this session's HELLO", DRTHS_REJECT_HELLO_RUNNING);
        memcpy(out, kn->hello, kn->hello_len);
        *len = kn->hello_len;
        break;
    case 29: {
        /* A genuine-looking HELLO of another session, sealed with the (public) key: during a
         * run the site drops every HELLO before decrypting it. */
        SET("HELLO of a new session, validly sealed", DRTHS_REJECT_HELLO_RUNNING);
        drths_wire_tx_t tx;
        drths_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = DRTHS_MSG_HELLO;
        drths_msg_hello_t *h = &m.u.hello;
        h->proto_min = h->proto_max = DRTHS_WIRE_VERSION;
        h->role = DRTHS_ROLE_NUMERICAL;
        h->rate_hz = 5000;
        h->n_channels = 1;
        h->r = 4;
        for (int k = 0; k < 4; k++)
            h->offsets[k] = (uint16_t)k;
        strcpy(h->units, "SI");
        strcpy(h->software, "attacker");
        uint64_t sid = kn->session_id ^ 0x5a5a5a5a;
        uint8_t pk[DRTHS_EPH_BYTES], sk[DRTHS_EPH_BYTES], k[DRTHS_KEY_BYTES];
        drths_crypto_eph_keypair(pk, sk);
        drths_crypto_derive_hello(kn->psk, sid, pk, k);
        drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, sid);
        drths_wire_tx_set_handshake(&tx, k, pk);
        if (drths_wire_seal(&tx, &m, out, 65536, len) != 0)
            *len = 0;
        drths_wire_tx_close(&tx);
        break;
    }
    case 30:
        SET("HELLO of a new session, forged tag", DRTHS_REJECT_HELLO_RUNNING);
        memcpy(out, kn->hello, kn->hello_len);
        *len = kn->hello_len;
        put_u64(out + 8, kn->session_id ^ 0xa5a5a5a5);
        break;
    }
}

/* Attacks from DRTHS_ATTACK_N_PLAIN on: sealed with the session key, so only the payload
 * checks can refuse them. Returns the length, 0 past the last variant. */
static size_t keyed(int i, const drths_attack_knowledge_t *kn, const uint8_t *g, uint8_t *out,
                    drths_attack_t *a)
{
    int v = i - DRTHS_ATTACK_N_PLAIN;
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
    return DRTHS_WIRE_HEADER_BYTES + pl + DRTHS_TAG_BYTES;
}
#undef SET

/* Builds attack i from the genuine COMMAND g (length n, not yet delivered) and an older
 * datagram of the same session (>= 2000 counters back). Returns the length (0 is a legal empty
 * datagram) and fills *a. out holds at least 65536 bytes. */
size_t drths_attack_build(int i, const drths_attack_knowledge_t *kn, const uint8_t *g, size_t n,
                          const uint8_t *old, size_t old_n, uint8_t *out, drths_attack_t *a)
{
    memset(a, 0, sizeof *a);
    memcpy(out, g, n);
    size_t len = n;
    if (i <= 12)
        tamper_bytes(i, kn, g, n, old, old_n, out, &len, a);
    else if (i <= 25)
        tamper_header(i, kn, g, n, old, old_n, out, &len, a);
    else if (i < DRTHS_ATTACK_N_PLAIN)
        replay_or_session(i, kn, g, n, old, old_n, out, &len, a);
    else
        len = keyed(i, kn, g, out, a);
    return len;
}

/* ---- flood junk ---------------------------------------------------------------------------- */

/* Junk datagram number k. Six kinds in turn; the reason each must be counted under is known by
 * construction. The BAD_TAG kind carries the session id and a counter far ahead, so the
 * receiver runs the full authentication on it (the costliest path for junk). */
size_t drths_attack_flood_junk(uint64_t k, const drths_attack_knowledge_t *kn,
                               uint64_t base_counter, uint8_t *out, int *reason)
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
        out[4] = (uint8_t)(3 + rnd() % 200); /* not 1 (V1_PEER) nor 2 */
        *reason = DRTHS_REJECT_BAD_VERSION;
        break;
    case 3:
        memcpy(out, "DRTH", 4);
        out[4] = DRTHS_WIRE_VERSION;
        out[5] = (uint8_t)(11 + rnd() % 200);
        *reason = DRTHS_REJECT_BAD_TYPE;
        break;
    case 4:
        memcpy(out, "DRTH", 4);
        out[4] = DRTHS_WIRE_VERSION;
        out[5] = DRTHS_MSG_COMMAND;
        out[6] = 0x80;
        *reason = DRTHS_REJECT_BAD_RESERVED;
        break;
    default:
        memcpy(out, "DRTH", 4);
        out[4] = DRTHS_WIRE_VERSION;
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
size_t drths_attack_client_junk(uint64_t k, const drths_attack_knowledge_t *kn, uint8_t *out,
                                int *reason)
{
    size_t len = 57 + rnd() % 200;
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)rnd();
    memcpy(out, "DRTH", 4);
    out[4] = DRTHS_WIRE_VERSION;
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
        out[4] = (uint8_t)(3 + rnd() % 200); /* not 1 (V1_PEER) nor 2 */
        *reason = DRTHS_REJECT_BAD_VERSION;
        break;
    case 3: /* what only the numerical site sends */
        out[5] = (k / 6) % 2 ? DRTHS_MSG_COMMAND : DRTHS_MSG_EPOCH;
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
        if (out[5] == DRTHS_MSG_HELLO_ACK) { /* with its ephemeral key, so long enough */
            out[7] = DRTHS_WIRE_FLAG_EPH;
            if (len < DRTHS_WIRE_HEADER_BYTES + DRTHS_EPH_BYTES + 1 + DRTHS_TAG_BYTES)
                len = DRTHS_WIRE_HEADER_BYTES + DRTHS_EPH_BYTES + 1 + DRTHS_TAG_BYTES;
        }
        *reason = DRTHS_REJECT_BAD_SESSION;
        break;
    }
    }
    return len;
}