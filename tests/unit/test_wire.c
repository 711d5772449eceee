#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "protocol/wire.h"
#include "wire_examples.h"

#include "alloc_count.h"

/* BLAKE2b-256 of the golden set as sealed by the codec before it was made faster (see
 * test_golden_bytes). */
#define GOLDEN_HASH "3653276c99ba0630394df172d1125eacc674c822edbf6693275b12abe60f0b25"

/* ---- helpers ----------------------------------------------------------------------------- */

static uint8_t psk[32];
static drths_session_keys_t keys;
static ex_keys_t exk;

static int setup(void **state)
{
    (void)state;
    int rc = drths_crypto_init();
    ex_keys(&exk);
    memcpy(psk, exk.psk, 32);
    keys = exk.keys;
    return rc;
}

static drths_role_t other(drths_role_t r)
{
    return r == DRTHS_ROLE_NUMERICAL ? DRTHS_ROLE_PHYSICAL : DRTHS_ROLE_NUMERICAL;
}

static void be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* Seals arbitrary plaintext as a datagram of the example session, bypassing the encoder, so
 * the receiver's payload checks can be exercised behind a valid tag. */
static size_t seal_raw(drths_role_t sender, int type, uint64_t counter, uint64_t tick,
                       const void *plain, size_t plen, uint8_t *buf)
{
    bool hs = type == DRTHS_MSG_HELLO || type == DRTHS_MSG_HELLO_ACK;
    size_t pre = DRTHS_WIRE_HEADER_BYTES + (hs ? DRTHS_EPH_BYTES : 0);
    memset(buf, 0, DRTHS_WIRE_HEADER_BYTES);
    memcpy(buf, "DRTH", 4);
    buf[4] = DRTHS_WIRE_VERSION;
    buf[5] = (uint8_t)type;
    buf[7] = hs ? DRTHS_WIRE_FLAG_EPH : 0;
    be(buf + 8, EX_SESSION_ID, 8);
    be(buf + 16, counter, 8);
    be(buf + 24, tick, 8);
    if (hs)
        memcpy(buf + DRTHS_WIRE_HEADER_BYTES, type == DRTHS_MSG_HELLO ? exk.en_pk : exk.ep_pk, 32);
    memcpy(buf + pre, plain, plen);
    const uint8_t *key = type == DRTHS_MSG_HELLO           ? exk.hello_key
                         : type == DRTHS_MSG_HELLO_ACK     ? exk.ack_key
                         : sender == DRTHS_ROLE_NUMERICAL ? keys.num_to_phys
                                                          : keys.phys_to_num;
    drths_crypto_seal(key, sender, counter, buf, pre, buf + pre, plen, buf + pre + plen);
    return pre + plen + DRTHS_TAG_BYTES;
}

static void reset_rx(drths_wire_rx_t *rx)
{
    drths_wire_rx_start(rx, EX_SESSION_ID);
    drths_wire_rx_set_keys(rx, &keys);
    if (rx->role == DRTHS_ROLE_NUMERICAL)
        drths_wire_rx_set_initiator(rx, exk.en_sk, exk.en_pk);
}

static bool zone_intact(const drths_wire_rx_t *rx)
{
    return rx->zone.chunk_list.head == rx->zone_head0;
}

/* ---- golden bytes --------------------------------------------------------------------------- */

/* Integers at every msgpack width boundary, and doubles of every kind the wire may carry. */
static const uint64_t golden_uints[] = {0,
                                        1,
                                        127,
                                        128,
                                        255,
                                        256,
                                        65535,
                                        65536,
                                        4294967295u,
                                        UINT64_C(4294967296),
                                        UINT64_MAX / 3,
                                        UINT64_MAX};
static const int64_t golden_ints[] = {
    -1, 0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295, INT64_C(4294967296), INT64_MAX};
static const double golden_doubles[] = {0.0,    -0.0,   1.0, -3.21, 0.0123,        153234.5,
                                        1e-310, -1e300, 2.5, 0.1,   6.02214076e23, -7.0};

/* COMMAND or FEEDBACK number i of the golden set: shape and values from i. */
static void golden_msg(drths_msg_type_t t, int i, int r, int n, drths_msg_t *m)
{
    const int nu = (int)(sizeof golden_uints / sizeof golden_uints[0]);
    const int nd = (int)(sizeof golden_doubles / sizeof golden_doubles[0]);
    memset(m, 0, sizeof *m);
    m->type = t;
    m->epoch = (uint32_t)i;
    m->tick = 100000 + (uint64_t)i;
    if (t == DRTHS_MSG_COMMAND) {
        drths_msg_command_t *c = &m->u.command;
        c->loop_delay_ticks = (uint32_t)golden_uints[i % 9];
        c->n_channels = (uint8_t)n;
        c->r = (uint8_t)r;
        c->echo_counter = golden_uints[(i + 3) % nu];
        c->echo_hold_ns = golden_uints[(i + 7) % nu];
        for (int k = 0; k < r; k++)
            for (int j = 0; j < n; j++) {
                drths_cmd_channel_t *s = &c->s[k][j];
                s->disp_m = golden_doubles[(i + k + j) % nd];
                s->vel_m_s = golden_doubles[(i + 2 * k + j + 1) % nd];
                s->acc_m_s2 = golden_doubles[(i + 3 * k + j + 2) % nd];
                s->damper_cmd = golden_doubles[(i + k + 5 * j + 3) % nd];
            }
    } else {
        drths_msg_feedback_t *f = &m->u.feedback;
        f->n_channels = (uint8_t)n;
        f->r = (uint8_t)r;
        f->echo_counter = golden_uints[(i + 5) % nu];
        f->echo_hold_ns = golden_uints[(i + 2) % nu];
        for (int k = 0; k < r; k++) {
            f->s[k].cmd_tick = golden_ints[(i + k) % 12];
            f->s[k].flags = (uint8_t)((i + k) % 4);
            for (int j = 0; j < n; j++) {
                f->s[k].ch[j].force_n = golden_doubles[(i + k + 2 * j) % nd];
                f->s[k].ch[j].disp_m = golden_doubles[(i + 3 * k + j + 4) % nd];
            }
        }
    }
}

/* Every datagram of the golden set, sealed in order by one sender per direction of the example
 * session: COMMAND and FEEDBACK of many shapes and values, then every example message. The
 * sealing is deterministic (the nonce is the counter), so the bytes are fixed. Calls f on each. */
static void golden_each(void (*f)(const uint8_t *d, size_t len, const drths_msg_t *m, void *ctx),
                        void *ctx)
{
    static const int rs[] = {1, 2, 4, 8, 16}, ns[] = {1, 2, 3, 8};
    drths_wire_tx_t ntx, ptx;
    drths_wire_tx_init(&ntx, DRTHS_ROLE_NUMERICAL, EX_SESSION_ID);
    drths_wire_tx_init(&ptx, DRTHS_ROLE_PHYSICAL, EX_SESSION_ID);
    drths_wire_tx_set_keys(&ntx, &keys);
    drths_wire_tx_set_keys(&ptx, &keys);
    drths_wire_tx_set_handshake(&ntx, exk.hello_key, exk.en_pk);
    drths_wire_tx_set_handshake(&ptx, exk.ack_key, exk.ep_pk);
    static drths_msg_t m;
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    int i = 0;
    for (size_t a = 0; a < sizeof rs / sizeof rs[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (int rep = 0; rep < 3; rep++, i++)
                for (int t = DRTHS_MSG_COMMAND; t <= DRTHS_MSG_FEEDBACK; t++) {
                    size_t len = 0;
                    golden_msg((drths_msg_type_t)t, i, rs[a], ns[b], &m);
                    drths_wire_tx_t *tx = t == DRTHS_MSG_COMMAND ? &ntx : &ptx;
                    assert_int_equal(drths_wire_seal(tx, &m, buf, sizeof buf, &len), 0);
                    f(buf, len, &m, ctx);
                }
    for (int t = 1; t <= DRTHS_MSG_TYPE_MAX; t++) {
        size_t len = 0;
        ex_msg((drths_msg_type_t)t, &m);
        drths_wire_tx_t *tx = drths_wire_role_sends(DRTHS_ROLE_NUMERICAL, t) ? &ntx : &ptx;
        assert_int_equal(drths_wire_seal(tx, &m, buf, sizeof buf, &len), 0);
        f(buf, len, &m, ctx);
    }
    drths_wire_tx_close(&ntx);
    drths_wire_tx_close(&ptx);
}

static void golden_hash_one(const uint8_t *d, size_t len, const drths_msg_t *m, void *ctx)
{
    (void)m;
    uint8_t l[2] = {(uint8_t)(len >> 8), (uint8_t)len};
    crypto_generichash_update(ctx, l, 2);
    crypto_generichash_update(ctx, d, len);
}

/* The sealed bytes of the golden set are those this implementation has always sent: BLAKE2b-256
 * of (u16be length || datagram) over the set, recorded before the codec was made faster. A
 * change to the encoder or to the AEAD that alters one byte of one datagram fails here. */
static void test_golden_bytes(void **state)
{
    (void)state;
    crypto_generichash_state st;
    uint8_t h[32];
    char hex[65];
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    golden_each(golden_hash_one, &st);
    crypto_generichash_final(&st, h, sizeof h);
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    assert_string_equal(hex, GOLDEN_HASH);
}

/* msgpack-c's packer, as wire.c used it before it wrote msgpack itself: the reference for
 * COMMAND, FEEDBACK, STOP and ABORT payloads. */
static bool ref_payload(const drths_msg_t *m, msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    switch (m->type) {
    case DRTHS_MSG_COMMAND: {
        const drths_msg_command_t *c = &m->u.command;
        msgpack_pack_array(&pk, 6);
        msgpack_pack_uint64(&pk, c->loop_delay_ticks);
        msgpack_pack_uint64(&pk, c->n_channels);
        msgpack_pack_uint64(&pk, c->r);
        msgpack_pack_uint64(&pk, c->echo_counter);
        msgpack_pack_uint64(&pk, c->echo_hold_ns);
        msgpack_pack_array(&pk, c->r);
        for (int k = 0; k < c->r; k++) {
            msgpack_pack_array(&pk, c->n_channels);
            for (int j = 0; j < c->n_channels; j++) {
                msgpack_pack_array(&pk, 4);
                msgpack_pack_double(&pk, c->s[k][j].disp_m);
                msgpack_pack_double(&pk, c->s[k][j].vel_m_s);
                msgpack_pack_double(&pk, c->s[k][j].acc_m_s2);
                msgpack_pack_double(&pk, c->s[k][j].damper_cmd);
            }
        }
        return true;
    }
    case DRTHS_MSG_FEEDBACK: {
        const drths_msg_feedback_t *f = &m->u.feedback;
        msgpack_pack_array(&pk, 5);
        msgpack_pack_uint64(&pk, f->n_channels);
        msgpack_pack_uint64(&pk, f->r);
        msgpack_pack_uint64(&pk, f->echo_counter);
        msgpack_pack_uint64(&pk, f->echo_hold_ns);
        msgpack_pack_array(&pk, f->r);
        for (int k = 0; k < f->r; k++) {
            msgpack_pack_array(&pk, 3);
            msgpack_pack_int64(&pk, f->s[k].cmd_tick);
            msgpack_pack_uint64(&pk, f->s[k].flags);
            msgpack_pack_array(&pk, f->n_channels);
            for (int j = 0; j < f->n_channels; j++) {
                msgpack_pack_array(&pk, 2);
                msgpack_pack_double(&pk, f->s[k].ch[j].force_n);
                msgpack_pack_double(&pk, f->s[k].ch[j].disp_m);
            }
        }
        return true;
    }
    case DRTHS_MSG_STOP:
    case DRTHS_MSG_ABORT: {
        size_t n = strlen(m->u.stop.text);
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint64(&pk, m->u.stop.reason);
        msgpack_pack_str(&pk, n);
        msgpack_pack_str_body(&pk, m->u.stop.text, n);
        return true;
    }
    default:
        return false;
    }
}

typedef struct ref_ctx {
    drths_wire_rx_t rx[3]; /* by role */
    int compared;
} ref_ctx_t;

/* Opens the datagram and, for the types ref_payload knows, compares its plaintext payload with
 * msgpack-c's packing of the message and the decoded message with the one sealed. */
static void ref_check(const uint8_t *d, size_t len, const drths_msg_t *m, void *arg)
{
    ref_ctx_t *c = arg;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (ref_payload(m, &sb)) {
        drths_wire_rx_t *rx = &c->rx[other(drths_wire_role_sends(DRTHS_ROLE_NUMERICAL, m->type)
                                               ? DRTHS_ROLE_NUMERICAL
                                               : DRTHS_ROLE_PHYSICAL)];
        static drths_msg_t out;
        assert_int_equal(drths_wire_open(rx, d, len, &out), DRTHS_REJECT_OK);
        assert_int_equal(rx->plain_len, sb.size);
        assert_memory_equal(rx->plain, sb.data, sb.size);
        if (m->type == DRTHS_MSG_COMMAND)
            assert_memory_equal(&out.u.command, &m->u.command, sizeof m->u.command);
        if (m->type == DRTHS_MSG_FEEDBACK)
            assert_memory_equal(&out.u.feedback, &m->u.feedback, sizeof m->u.feedback);
        c->compared++;
    }
    msgpack_sbuffer_destroy(&sb);
}

/* The payloads wire.c writes are those msgpack-c's packer writes, integer widths, string
 * lengths (a STOP text of every length up to the limit: fixstr and str 8) and all; COMMAND
 * and FEEDBACK decode (the fast path) to the message sealed. */
static void test_payload_is_msgpack_c(void **state)
{
    (void)state;
    static ref_ctx_t c;
    assert_int_equal(ex_rx(&c.rx[DRTHS_ROLE_NUMERICAL], DRTHS_ROLE_NUMERICAL), 0);
    assert_int_equal(ex_rx(&c.rx[DRTHS_ROLE_PHYSICAL], DRTHS_ROLE_PHYSICAL), 0);
    golden_each(ref_check, &c);
    assert_true(c.compared >= 120);

    reset_rx(&c.rx[DRTHS_ROLE_PHYSICAL]); /* the counters start again at 1 */
    drths_wire_tx_t tx;
    drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, EX_SESSION_ID);
    drths_wire_tx_set_keys(&tx, &keys);
    static drths_msg_t m;
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    for (int n = 0; n <= DRTHS_WIRE_MAX_TEXT; n++) {
        memset(&m, 0, sizeof m);
        m.type = DRTHS_MSG_STOP;
        m.u.stop.reason = (uint8_t)(n % 14);
        for (int i = 0; i < n; i++)
            m.u.stop.text[i] = (char)('a' + i % 26);
        size_t len = 0;
        assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), 0);
        ref_check(buf, len, &m, &c);
    }
    drths_wire_tx_close(&tx);
    drths_wire_rx_close(&c.rx[DRTHS_ROLE_NUMERICAL]);
    drths_wire_rx_close(&c.rx[DRTHS_ROLE_PHYSICAL]);
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_names(void **state)
{
    (void)state;
    for (int i = 0; i < DRTHS_REJECT_COUNT; i++) {
        assert_string_not_equal(drths_reject_name((drths_reject_t)i), "UNKNOWN");
        for (int j = 0; j < i; j++)
            assert_string_not_equal(drths_reject_name((drths_reject_t)i),
                                    drths_reject_name((drths_reject_t)j));
    }
    assert_string_equal(drths_reject_name(DRTHS_REJECT_BAD_TAG), "BAD_TAG");
    assert_string_equal(drths_reject_name(DRTHS_REJECT_COUNT), "UNKNOWN");
    assert_string_equal(drths_msg_type_name(DRTHS_MSG_PROBE_ECHO), "PROBE_ECHO");
    assert_string_equal(drths_msg_type_name(11), "UNKNOWN");
    assert_string_equal(drths_stop_reason_name(DRTHS_STOP_FINGERPRINT_MISMATCH),
                        "FINGERPRINT_MISMATCH");
    assert_string_equal(drths_stop_reason_name(200), "UNKNOWN");
    assert_string_equal(drths_site_state_name(DRTHS_STATE_HOLD), "HOLD");
}

static void test_round_trip_every_type(void **state)
{
    (void)state;
    drths_wire_rx_t rx[3];
    assert_int_equal(ex_rx(&rx[DRTHS_ROLE_NUMERICAL], DRTHS_ROLE_NUMERICAL), 0);
    assert_int_equal(ex_rx(&rx[DRTHS_ROLE_PHYSICAL], DRTHS_ROLE_PHYSICAL), 0);
    for (int i = 0; i < EX_NTYPES; i++) {
        drths_msg_type_t t = ex_types[i];
        uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
        size_t len = 0;
        assert_int_equal(ex_seal(t, buf, sizeof buf, &len), 0);
        assert_true(len <= drths_wire_max_datagram(t, 8, 16));
        drths_msg_t want, got;
        ex_msg(t, &want);
        want.counter = ex_counter(t);
        want.session_id = EX_SESSION_ID;
        if (t == DRTHS_MSG_HELLO || t == DRTHS_MSG_HELLO_ACK) {
            want.has_eph = true;
            memcpy(want.eph, t == DRTHS_MSG_HELLO ? exk.en_pk : exk.ep_pk, 32);
        }
        drths_wire_rx_t *r = &rx[other(ex_sender(t))];
        assert_int_equal(drths_wire_open(r, buf, len, &got), DRTHS_REJECT_OK);
        assert_memory_equal(&got, &want, sizeof got);
        print_message("%-10s %4zu bytes\n", drths_msg_type_name(t), len);
    }
    drths_wire_rx_close(&rx[1]);
    drths_wire_rx_close(&rx[2]);
    drths_wire_rx_close(&rx[2]); /* safe twice */
}

static void fill_max_command(drths_msg_t *m, unsigned seed)
{
    memset(m, 0, sizeof *m);
    m->type = DRTHS_MSG_COMMAND;
    m->tick = UINT64_MAX - 1;
    m->epoch = UINT32_MAX;
    m->u.command.loop_delay_ticks = UINT32_MAX;
    m->u.command.n_channels = DRTHS_WIRE_MAX_CHANNELS;
    m->u.command.r = DRTHS_WIRE_MAX_R;
    m->u.command.echo_counter = UINT64_MAX;
    m->u.command.echo_hold_ns = UINT64_MAX;
    srand(seed);
    for (int k = 0; k < DRTHS_WIRE_MAX_R; k++)
        for (int j = 0; j < DRTHS_WIRE_MAX_CHANNELS; j++) {
            drths_cmd_channel_t *s = &m->u.command.s[k][j];
            s->disp_m = (rand() - RAND_MAX / 2) * 1e-9;
            s->vel_m_s = -(double)rand() / 3.0;
            s->acc_m_s2 = 1e300 * ((double)rand() / RAND_MAX);
            s->damper_cmd = -0.0;
        }
}

static void test_largest_messages(void **state)
{
    (void)state;
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    assert_int_equal(drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, EX_SESSION_ID), 0);
    drths_wire_tx_set_keys(&tx, &keys);
    assert_int_equal(ex_rx(&rx, DRTHS_ROLE_PHYSICAL), 0);
    static drths_msg_t m, got;
    fill_max_command(&m, 1);
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM + 64];
    size_t len;
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), 0);
    size_t bound = drths_wire_max_datagram(DRTHS_MSG_COMMAND, 8, 16);
    print_message("COMMAND 8 channels R=16: %zu bytes (bound %zu, limit %d)\n", len, bound,
                  DRTHS_WIRE_MAX_DATAGRAM);
    assert_true(len <= bound && bound <= DRTHS_WIRE_MAX_DATAGRAM);
    assert_int_equal(drths_wire_open(&rx, buf, len, &got), DRTHS_REJECT_OK);
    m.counter = 1;
    m.session_id = EX_SESSION_ID;
    assert_memory_equal(&got, &m, sizeof m);
    /* Default configuration (1 channel, R = 8) stays far below an Ethernet MTU. */
    size_t dflt = drths_wire_max_datagram(DRTHS_MSG_COMMAND, 1, 8);
    print_message("COMMAND 1 channel R=8 bound: %zu bytes\n", dflt);
    assert_true(dflt < 450);
    assert_true(drths_wire_max_datagram(DRTHS_MSG_FEEDBACK, 1, 8) < 450);
    /* Every bound fits the receive limit. */
    for (int t = 1; t <= DRTHS_MSG_TYPE_MAX; t++)
        assert_true(drths_wire_max_datagram((drths_msg_type_t)t, 8, 16) <= DRTHS_WIRE_MAX_DATAGRAM);
    /* One byte more than the limit is TOO_LONG before anything else is looked at. */
    assert_int_equal(drths_wire_open(&rx, buf, DRTHS_WIRE_MAX_DATAGRAM + 1, &got),
                     DRTHS_REJECT_TOO_LONG);
    drths_wire_rx_close(&rx);
}

/* Any single flipped bit anywhere in any message type is rejected: by a header check when the
 * bit is in the header, otherwise by the tag. */
static void test_every_bit_flip(void **state)
{
    (void)state;
    drths_wire_rx_t rx[3];
    assert_int_equal(ex_rx(&rx[1], DRTHS_ROLE_NUMERICAL), 0);
    assert_int_equal(ex_rx(&rx[2], DRTHS_ROLE_PHYSICAL), 0);
    long flips = 0, by_reason[DRTHS_REJECT_COUNT] = {0};
    for (int i = 0; i < EX_NTYPES; i++) {
        drths_msg_type_t t = ex_types[i];
        uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
        size_t len;
        assert_int_equal(ex_seal(t, buf, sizeof buf, &len), 0);
        drths_wire_rx_t *r = &rx[other(ex_sender(t))];
        drths_msg_t out;
        for (size_t bit = 0; bit < len * 8; bit++) {
            reset_rx(r);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            drths_reject_t why = drths_wire_open(r, buf, len, &out);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            assert_int_not_equal(why, DRTHS_REJECT_OK);
            if (bit / 8 >= DRTHS_WIRE_HEADER_BYTES)
                assert_int_equal(why, DRTHS_REJECT_BAD_TAG);
            else
                assert_true(why != DRTHS_REJECT_BAD_PAYLOAD && why != DRTHS_REJECT_BAD_FIELD &&
                            why != DRTHS_REJECT_BAD_SCHEMA && why != DRTHS_REJECT_TRAILING_BYTES);
            by_reason[why]++;
            flips++;
        }
        reset_rx(r);
        assert_int_equal(drths_wire_open(r, buf, len, &out), DRTHS_REJECT_OK);
    }
    print_message("%ld single-bit flips, all rejected:", flips);
    for (int i = 1; i < DRTHS_REJECT_COUNT; i++)
        if (by_reason[i])
            print_message(" %s %ld", drths_reject_name((drths_reject_t)i), by_reason[i]);
    print_message("\n");
    assert_true(by_reason[DRTHS_REJECT_BAD_TAG] > flips / 2);
    drths_wire_rx_close(&rx[1]);
    drths_wire_rx_close(&rx[2]);
}

/* Each header-level reason, in the documented order, and the counters per reason. */
static void test_header_reasons(void **state)
{
    (void)state;
    drths_wire_rx_t rx;
    assert_int_equal(ex_rx(&rx, DRTHS_ROLE_PHYSICAL), 0);
    uint8_t good[DRTHS_WIRE_MAX_DATAGRAM], b[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len;
    assert_int_equal(ex_seal(DRTHS_MSG_COMMAND, good, sizeof good, &len), 0);
    drths_msg_t out;
#define EXPECT(why)                                                                            \
    do {                                                                                       \
        reset_rx(&rx);                                                                         \
        assert_int_equal(drths_wire_open(&rx, b, len, &out), (why));                           \
    } while (0)
    size_t minlen = DRTHS_WIRE_HEADER_BYTES + 1 + DRTHS_TAG_BYTES;
    assert_int_equal(drths_wire_open(&rx, good, minlen - 1, &out), DRTHS_REJECT_TOO_SHORT);
    assert_int_equal(drths_wire_open(&rx, good, 0, &out), DRTHS_REJECT_TOO_SHORT);
    assert_int_equal(drths_wire_open(&rx, good, minlen, &out), DRTHS_REJECT_BAD_TAG);
    memcpy(b, good, len); b[0] = 'X'; b[4] = 9;     EXPECT(DRTHS_REJECT_BAD_MAGIC);
    memcpy(b, good, len); b[4] = 3; b[5] = 0;       EXPECT(DRTHS_REJECT_BAD_VERSION);
    memcpy(b, good, len); b[4] = 1; b[0] = 'X';     EXPECT(DRTHS_REJECT_BAD_MAGIC);
    memcpy(b, good, len); b[4] = 1; b[5] = 0;       EXPECT(DRTHS_REJECT_V1_PEER);
    memcpy(b, good, len); b[5] = 0; b[6] = 1;       EXPECT(DRTHS_REJECT_BAD_TYPE);
    memcpy(b, good, len); b[5] = 11;                EXPECT(DRTHS_REJECT_BAD_TYPE);
    memcpy(b, good, len); b[5] = DRTHS_MSG_FEEDBACK; EXPECT(DRTHS_REJECT_WRONG_DIRECTION);
    memcpy(b, good, len); b[5] = DRTHS_MSG_HELLO_ACK; b[7] = 1;
    EXPECT(DRTHS_REJECT_WRONG_DIRECTION);
    memcpy(b, good, len); b[5] = DRTHS_MSG_HELLO_ACK; EXPECT(DRTHS_REJECT_BAD_RESERVED);
    memcpy(b, good, len); b[7] = 1;                 EXPECT(DRTHS_REJECT_BAD_RESERVED);
    memcpy(b, good, len); b[39] = 1; b[15] ^= 1;    EXPECT(DRTHS_REJECT_BAD_RESERVED);
    memcpy(b, good, len); b[15] ^= 1;               EXPECT(DRTHS_REJECT_BAD_SESSION);
    memcpy(b, good, len); memset(b + 8, 0, 8);      EXPECT(DRTHS_REJECT_BAD_SESSION);
    memcpy(b, good, len); memset(b + 16, 0, 8);     EXPECT(DRTHS_REJECT_BAD_COUNTER);
    memcpy(b, good, len); memset(b + 16, 0xff, 8);  EXPECT(DRTHS_REJECT_BAD_COUNTER);
    memcpy(b, good, len); b[23] ^= 1;               EXPECT(DRTHS_REJECT_BAD_TAG);
    memcpy(b, good, len); b[31] ^= 1;               EXPECT(DRTHS_REJECT_BAD_TAG); /* tick */
    memcpy(b, good, len); b[35] ^= 1;               EXPECT(DRTHS_REJECT_BAD_TAG); /* epoch */
    /* No keys yet: data messages are NO_KEY, handshake messages are still checked. */
    memcpy(b, good, len);
    drths_wire_rx_start(&rx, EX_SESSION_ID);
    assert_int_equal(drths_wire_open(&rx, b, len, &out), DRTHS_REJECT_NO_KEY);
    /* Replay: the same datagram twice, and one older than the window. */
    reset_rx(&rx);
    assert_int_equal(drths_wire_open(&rx, good, len, &out), DRTHS_REJECT_OK);
    assert_int_equal(drths_wire_open(&rx, good, len, &out), DRTHS_REJECT_REPLAYED);
    drths_wire_tx_t tx;
    assert_int_equal(drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, EX_SESSION_ID), 0);
    drths_wire_tx_set_keys(&tx, &keys);
    tx.next_counter = ex_counter(DRTHS_MSG_COMMAND) + DRTHS_REPLAY_WINDOW;
    drths_msg_t m;
    ex_msg(DRTHS_MSG_COMMAND, &m);
    assert_int_equal(drths_wire_seal(&tx, &m, b, sizeof b, &len), 0);
    assert_int_equal(drths_wire_open(&rx, b, len, &out), DRTHS_REJECT_OK);
    assert_int_equal(drths_wire_open(&rx, good, len, &out), DRTHS_REJECT_TOO_OLD);
    /* A forged datagram (bad tag) does not move the window: the genuine one still opens. */
    assert_int_equal(drths_wire_seal(&tx, &m, b, sizeof b, &len), 0);
    b[len - 1] ^= 0x80;
    assert_int_equal(drths_wire_open(&rx, b, len, &out), DRTHS_REJECT_BAD_TAG);
    b[len - 1] ^= 0x80;
    assert_int_equal(drths_wire_open(&rx, b, len, &out), DRTHS_REJECT_OK);
    assert_true(rx.rejects[DRTHS_REJECT_REPLAYED] == 1 && rx.rejects[DRTHS_REJECT_TOO_OLD] == 1 &&
                rx.rejects[DRTHS_REJECT_BAD_TAG] >= 1 && rx.accepted >= 3);
#undef EXPECT
    drths_wire_tx_close(&tx);
    drths_wire_rx_close(&rx);
}

/* Payload checks behind a valid tag: malformed msgpack, trailing bytes, wrong types, bad
 * values. Plaintexts are written byte by byte in msgpack. */
typedef struct {
    int type;
    uint64_t tick;
    const char *hex;
    drths_reject_t want;
    const char *what;
} payload_case_t;

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = 0;
    for (; *h; h++) {
        if (*h == ' ')
            continue;
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (uint8_t)v;
        h++;
    }
    return n;
}

static void test_payload_reasons(void **state)
{
    (void)state;
    /* cb + 8 bytes = float64; 7ff8.. = NaN, 7ff0.. = +inf. */
#define F1 "cb3ff0000000000000"   /* 1.0 */
#define FNAN "cb7ff8000000000000"
#define FINF "cb7ff0000000000000"
    static const payload_case_t cases[] = {
        {DRTHS_MSG_HEARTBEAT, 0, "9102", DRTHS_REJECT_OK, "heartbeat RUNNING"},
        {DRTHS_MSG_HEARTBEAT, 0, "91cf0000000000000002", DRTHS_REJECT_OK, "uint64-encoded 2"},
        {DRTHS_MSG_HEARTBEAT, 0, "9109", DRTHS_REJECT_BAD_FIELD, "state 9"},
        {DRTHS_MSG_HEARTBEAT, 0, "91ff", DRTHS_REJECT_BAD_FIELD, "state -1"},
        {DRTHS_MSG_HEARTBEAT, 0, "91", DRTHS_REJECT_BAD_PAYLOAD, "truncated array"},
        {DRTHS_MSG_HEARTBEAT, 0, "91c1", DRTHS_REJECT_BAD_PAYLOAD, "never-used byte c1"},
        {DRTHS_MSG_HEARTBEAT, 0, "910200", DRTHS_REJECT_TRAILING_BYTES, "one byte after"},
        {DRTHS_MSG_HEARTBEAT, 0, "02", DRTHS_REJECT_BAD_SCHEMA, "not an array"},
        {DRTHS_MSG_HEARTBEAT, 0, "920202", DRTHS_REJECT_BAD_SCHEMA, "two elements"},
        {DRTHS_MSG_HEARTBEAT, 0, "91a132", DRTHS_REJECT_BAD_SCHEMA, "string \"2\""},
        {DRTHS_MSG_HEARTBEAT, 0, "81" "02" "02", DRTHS_REJECT_BAD_SCHEMA, "map"},
        {DRTHS_MSG_HEARTBEAT, 0, "ddffffffff02", DRTHS_REJECT_BAD_PAYLOAD, "array32 of 2^32-1"},
        {DRTHS_MSG_HEARTBEAT, 0, "dbffffffff", DRTHS_REJECT_BAD_PAYLOAD, "str32 past end"},
        {DRTHS_MSG_HEARTBEAT, 0, "919191919191919191919191919191919191919191919191919191919191919191"
                                 "9191919191", DRTHS_REJECT_BAD_PAYLOAD, "nesting 38 deep"},
        {DRTHS_MSG_EPOCH, 0, "93 02 cd012c cd07d0", DRTHS_REJECT_OK, "epoch"},
        {DRTHS_MSG_EPOCH, 0, "93 02 cf0000000100000000 00", DRTHS_REJECT_BAD_FIELD, "L 2^32"},
        {DRTHS_MSG_EPOCH, 0, "93 02 " F1 " 00", DRTHS_REJECT_BAD_SCHEMA, "L float"},
        {DRTHS_MSG_STOP, 0, "92 01 a0", DRTHS_REJECT_OK, "empty text"},
        {DRTHS_MSG_STOP, 0, "92 ccc8 a0", DRTHS_REJECT_OK, "unknown reason 200 delivered"},
        {DRTHS_MSG_STOP, 0, "92 01 a3 610062", DRTHS_REJECT_BAD_FIELD, "NUL in text"},
        {DRTHS_MSG_STOP, 0, "92 01 c403 616263", DRTHS_REJECT_BAD_SCHEMA, "bin text"},
        {DRTHS_MSG_PROBE, 0, "92 07 08", DRTHS_REJECT_OK, "probe"},
        {DRTHS_MSG_PROBE, 0, "93 07 08 09", DRTHS_REJECT_BAD_SCHEMA, "probe with hold"},
        /* COMMAND [L, n, r, echo, hold, [[ [d v a u] ]]] at tick 0 */
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 F1 F1 F1, DRTHS_REJECT_OK, "cmd"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 F1 "ca3f800000" F1,
         DRTHS_REJECT_OK, "float32 accepted"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 FNAN F1 F1, DRTHS_REJECT_BAD_FIELD,
         "NaN velocity"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 F1 F1 FINF, DRTHS_REJECT_BAD_FIELD,
         "inf damper command"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 F1 F1 "01", DRTHS_REJECT_BAD_SCHEMA,
         "integer where float"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 93" F1 F1 F1, DRTHS_REJECT_BAD_SCHEMA,
         "3 values per channel"},
        {DRTHS_MSG_COMMAND, 0, "96 05 09 01 00 00 91 91 94" F1 F1 F1 F1, DRTHS_REJECT_BAD_FIELD,
         "9 channels"},
        {DRTHS_MSG_COMMAND, 0, "96 05 00 01 00 00 91 90", DRTHS_REJECT_BAD_FIELD, "0 channels"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 00 00 00 90", DRTHS_REJECT_BAD_FIELD, "R = 0"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 11 00 00 90", DRTHS_REJECT_BAD_FIELD, "R = 17"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 02 00 00 92 91 94" F1 F1 F1 F1 "91 94" F1 F1 F1 F1,
         DRTHS_REJECT_BAD_FIELD, "R = 2 at tick 0 (tick -1 does not exist)"},
        {DRTHS_MSG_COMMAND, 1, "96 05 01 02 00 00 92 91 94" F1 F1 F1 F1 "91 94" F1 F1 F1 F1,
         DRTHS_REJECT_OK, "R = 2 at tick 1"},
        {DRTHS_MSG_COMMAND, 1, "96 05 01 02 00 00 91 91 94" F1 F1 F1 F1, DRTHS_REJECT_BAD_SCHEMA,
         "R = 2 but one sample"},
        /* FEEDBACK [n, r, echo, hold, [[cmd_tick, flags, [[F d]]]]] at tick 5 */
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 ff 00 91 92" F1 F1, DRTHS_REJECT_OK,
         "cmd_tick -1"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 fe 00 91 92" F1 F1, DRTHS_REJECT_BAD_FIELD,
         "cmd_tick -2"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 05 04 91 92" F1 F1, DRTHS_REJECT_BAD_FIELD,
         "undefined flag bit"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 05 03 91 92" F1 FNAN, DRTHS_REJECT_BAD_FIELD,
         "NaN displacement"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 05 03 92 92" F1 F1 "92" F1 F1,
         DRTHS_REJECT_BAD_SCHEMA, "two channels, n = 1"},
        /* The edges of the COMMAND / FEEDBACK fast path (wire.c decode_fast): what it does not
         * take goes to the general path and gets the reason it always got. */
        {DRTHS_MSG_COMMAND, 0, "dc0006 05 01 01 00 00 91 91 94" F1 F1 F1 F1, DRTHS_REJECT_OK,
         "array 16"},
        {DRTHS_MSG_COMMAND, 0, "96 d005 d001 d10001 00 00 91 91 94" F1 F1 F1 F1, DRTHS_REJECT_OK,
         "int 8/16 holding L, n, r"},
        {DRTHS_MSG_COMMAND, 0, "96 d0ff 01 01 00 00 91 91 94" F1 F1 F1 F1, DRTHS_REJECT_BAD_FIELD,
         "L -1"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 F1 F1 "c0", DRTHS_REJECT_BAD_SCHEMA,
         "nil where float"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 F1 F1 F1 "00",
         DRTHS_REJECT_TRAILING_BYTES, "one byte after a COMMAND"},
        {DRTHS_MSG_COMMAND, 0, "96 05 01 01 00 00 91 91 94" F1 F1 F1 "cb3ff00000000000",
         DRTHS_REJECT_BAD_PAYLOAD, "last float cut short"},
        {DRTHS_MSG_COMMAND, 0,
         "96 9191919191919191919191919191919191919191919191919191919191919191"
         "9191919191 05 01 01 00 00 91 91 94" F1 F1 F1 F1,
         DRTHS_REJECT_BAD_PAYLOAD, "L nested 38 deep"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 d3ffffffffffffffff 00 91 92" F1 F1,
         DRTHS_REJECT_OK, "cmd_tick -1 as int 64"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 cf8000000000000000 00 91 92" F1 F1,
         DRTHS_REJECT_BAD_FIELD, "cmd_tick 2^63"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 05 d0ff 91 92" F1 F1, DRTHS_REJECT_BAD_FIELD,
         "flags -1"},
        {DRTHS_MSG_FEEDBACK, 5, "95 01 01 00 00 91 93 05 00 81 92" F1 F1 "00",
         DRTHS_REJECT_BAD_SCHEMA, "a map of channels"},
    };
    drths_wire_rx_t rx[3];
    assert_int_equal(ex_rx(&rx[1], DRTHS_ROLE_NUMERICAL), 0);
    assert_int_equal(ex_rx(&rx[2], DRTHS_ROLE_PHYSICAL), 0);
    long before = alloc_count;
    uint64_t counter = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const payload_case_t *c = &cases[i];
        uint8_t plain[256], buf[512];
        size_t plen = unhex(c->hex, plain);
        drths_role_t sender = c->type == DRTHS_MSG_FEEDBACK ? DRTHS_ROLE_PHYSICAL
                                                             : DRTHS_ROLE_NUMERICAL;
        drths_wire_rx_t *r = &rx[other(sender)];
        size_t len = seal_raw(sender, c->type, counter, c->tick, plain, plen, buf);
        drths_msg_t out;
        drths_reject_t got = drths_wire_open(r, buf, len, &out);
        if (got != c->want)
            fail_msg("case %zu (%s): got %s, want %s", i, c->what, drths_reject_name(got),
                     drths_reject_name(c->want));
        /* Authenticated means spent, valid or not. */
        assert_int_equal(drths_wire_open(r, buf, len, &out), DRTHS_REJECT_REPLAYED);
        assert_true(zone_intact(r));
        counter++;
    }
    if (COUNT_ALLOCS)
        assert_int_equal(alloc_count - before, 0);
    drths_wire_rx_close(&rx[1]);
    drths_wire_rx_close(&rx[2]);
}

/* Steady state: sealing and opening thousands of datagrams of every type, the largest
 * included, allocates nothing and never grows the msgpack zone. */
static void test_no_allocation(void **state)
{
    (void)state;
    drths_wire_tx_t tx[3];
    drths_wire_rx_t rx[3];
    for (int role = 1; role <= 2; role++) {
        assert_int_equal(drths_wire_tx_init(&tx[role], (drths_role_t)role, EX_SESSION_ID), 0);
        drths_wire_tx_set_keys(&tx[role], &keys);
        if (role == DRTHS_ROLE_NUMERICAL)
            drths_wire_tx_set_handshake(&tx[role], exk.hello_key, exk.en_pk);
        else
            drths_wire_tx_set_handshake(&tx[role], exk.ack_key, exk.ep_pk);
        assert_int_equal(ex_rx(&rx[role], (drths_role_t)role), 0);
    }
    static drths_msg_t m, out, big;
    fill_max_command(&big, 7);
    long before = alloc_count;
    long opened = 0;
    for (int rep = 0; rep < 500; rep++) {
        for (int i = 0; i <= EX_NTYPES; i++) {
            drths_msg_type_t t = i < EX_NTYPES ? ex_types[i] : DRTHS_MSG_COMMAND;
            if (i < EX_NTYPES)
                ex_msg(t, &m);
            drths_role_t s = ex_sender(t);
            uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
            size_t len;
            assert_int_equal(drths_wire_seal(&tx[s], i < EX_NTYPES ? &m : &big, buf, sizeof buf,
                                             &len), 0);
            assert_int_equal(drths_wire_open(&rx[other(s)], buf, len, &out), DRTHS_REJECT_OK);
            opened++;
        }
    }
    long allocs = alloc_count - before;
    print_message("%ld datagrams sealed and opened: %ld allocations (counting %s)\n", opened,
                  allocs, COUNT_ALLOCS ? "on" : "off under a sanitizer");
    if (COUNT_ALLOCS) {
        assert_int_equal(allocs, 0);
        /* The counter itself works: the init allocates the zone. */
        drths_wire_rx_t probe;
        assert_int_equal(drths_wire_rx_init(&probe, DRTHS_ROLE_PHYSICAL, psk, NULL), 0);
        assert_true(alloc_count - before >= 1);
        drths_wire_rx_close(&probe);
    }
    assert_true(zone_intact(&rx[1]) && zone_intact(&rx[2]));
    for (int role = 1; role <= 2; role++) {
        drths_wire_tx_close(&tx[role]);
        drths_wire_rx_close(&rx[role]);
    }
}

static void test_seal_refusals(void **state)
{
    (void)state;
    drths_wire_tx_t tx;
    assert_int_equal(drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, 0), -EINVAL);
    assert_int_equal(drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, EX_SESSION_ID), 0);
    drths_msg_t m;
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len;
    ex_msg(DRTHS_MSG_COMMAND, &m);
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), -ENOKEY);
    drths_wire_tx_set_keys(&tx, &keys);
    m.u.command.s[2][1].vel_m_s = NAN;
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), -EINVAL);
    ex_msg(DRTHS_MSG_COMMAND, &m);
    m.u.command.r = 17;
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), -EINVAL);
    ex_msg(DRTHS_MSG_FEEDBACK, &m); /* the numerical site never sends FEEDBACK */
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), -EINVAL);
    ex_msg(DRTHS_MSG_STOP, &m);
    memset(m.u.stop.text, 'x', sizeof m.u.stop.text); /* not terminated within 200 bytes */
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), -EINVAL);
    ex_msg(DRTHS_MSG_COMMAND, &m);
    assert_int_equal(drths_wire_seal(&tx, &m, buf, 100, &len), -EMSGSIZE);
    assert_true(tx.next_counter == 1); /* nothing consumed by failures */
    tx.next_counter = DRTHS_REPLAY_COUNTER_MAX;
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), 0);
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), -EOVERFLOW);
    /* The receiver accepts that last counter. */
    drths_wire_rx_t rx;
    assert_int_equal(ex_rx(&rx, DRTHS_ROLE_PHYSICAL), 0);
    drths_msg_t out;
    assert_int_equal(drths_wire_open(&rx, buf, len, &out), DRTHS_REJECT_OK);
    assert_true(out.counter == DRTHS_REPLAY_COUNTER_MAX);
    drths_wire_rx_close(&rx);
    drths_wire_tx_close(&tx);
    drths_wire_tx_close(&tx);
}

/* One side of a handshake as the sites run it (site-numerical/numsite.c and
 * site-physical/physsite.c do the same steps). */
typedef struct hs_side {
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    uint8_t pk[32];
    drths_session_keys_t keys;
} hs_side_t;

/* Numerical: fresh ephemeral, HELLO of session sid into buf. */
static size_t hs_hello(hs_side_t *n, uint64_t sid, uint8_t *buf)
{
    uint8_t sk[32], k[32];
    size_t len = 0;
    drths_msg_t m;
    drths_crypto_eph_keypair(n->pk, sk);
    drths_crypto_derive_hello(psk, sid, n->pk, k);
    assert_int_equal(drths_wire_tx_init(&n->tx, DRTHS_ROLE_NUMERICAL, sid), 0);
    drths_wire_tx_set_handshake(&n->tx, k, n->pk);
    assert_int_equal(drths_wire_rx_init(&n->rx, DRTHS_ROLE_NUMERICAL, psk, NULL), 0);
    drths_wire_rx_start(&n->rx, sid);
    drths_wire_rx_set_initiator(&n->rx, sk, n->pk);
    ex_msg(DRTHS_MSG_HELLO, &m);
    assert_int_equal(drths_wire_seal(&n->tx, &m, buf, DRTHS_WIRE_MAX_DATAGRAM, &len), 0);
    return len;
}

/* Physical (receiver prx, kept across runs): adopts the HELLO in buf, answers into ack; its
 * HELLO_ACK key is returned in ack_key. */
static size_t hs_adopt(hs_side_t *p, drths_wire_rx_t *prx, const uint8_t *buf, size_t len,
                       uint8_t *ack, uint8_t ack_key[32])
{
    drths_msg_t h, m;
    assert_int_equal(drths_wire_open_hello(prx, buf, len, &h), DRTHS_REJECT_OK);
    assert_true(h.has_eph);
    uint8_t hp[DRTHS_WIRE_MAX_HELLO_PAYLOAD], sk[32], dh[32], th[32];
    size_t hl = prx->plain_len;
    memcpy(hp, prx->plain, hl);
    drths_crypto_eph_keypair(p->pk, sk);
    assert_int_equal(drths_crypto_dh(dh, sk, h.eph), 0);
    drths_crypto_derive_ack(psk, h.session_id, h.eph, p->pk, dh, ack_key);
    drths_wire_rx_start(prx, h.session_id);
    drths_wire_rx_set_peer_eph(prx, h.eph);
    assert_int_equal(drths_wire_open(prx, buf, len, &m), DRTHS_REJECT_OK);
    assert_int_equal(drths_wire_tx_init(&p->tx, DRTHS_ROLE_PHYSICAL, h.session_id), 0);
    drths_wire_tx_set_handshake(&p->tx, ack_key, p->pk);
    ex_msg(DRTHS_MSG_HELLO_ACK, &m);
    size_t alen = 0;
    assert_int_equal(drths_wire_seal(&p->tx, &m, ack, DRTHS_WIRE_MAX_DATAGRAM, &alen), 0);
    drths_crypto_transcript(th, h.session_id, h.eph, hp, hl, p->pk, p->tx.hs_plain,
                            p->tx.hs_plain_len);
    drths_crypto_derive(psk, dh, th, &p->keys);
    drths_wire_tx_set_keys(&p->tx, &p->keys);
    drths_wire_rx_set_keys(prx, &p->keys);
    return alen;
}

/* Numerical: opens the HELLO_ACK, derives its keys (and so wipes its ephemeral secret). */
static void hs_finish(hs_side_t *n, uint64_t sid, const uint8_t *ack, size_t alen)
{
    drths_msg_t out;
    assert_int_equal(drths_wire_open(&n->rx, ack, alen, &out), DRTHS_REJECT_OK);
    assert_int_equal(out.type, DRTHS_MSG_HELLO_ACK);
    uint8_t th[32], zero[32] = {0};
    drths_crypto_transcript(th, sid, n->pk, n->tx.hs_plain, n->tx.hs_plain_len, out.eph,
                            n->rx.plain, n->rx.plain_len);
    drths_crypto_derive(psk, n->rx.hs_dh, th, &n->keys);
    drths_wire_tx_set_keys(&n->tx, &n->keys);
    drths_wire_rx_set_keys(&n->rx, &n->keys);
    assert_memory_equal(n->rx.eph_sk, zero, 32); /* forward secrecy: the secret is gone */
    assert_false(n->rx.have_eph);
    assert_int_equal(drths_wire_open(&n->rx, ack, alen, &out), DRTHS_REJECT_REPLAYED);
}

/* The handshake as the two sites run it, then the attacks the design must stop. */
static void test_handshake_and_old_session(void **state)
{
    (void)state;
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM], ack[DRTHS_WIRE_MAX_DATAGRAM],
        hello1[DRTHS_WIRE_MAX_DATAGRAM], cmd1[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len, alen, hello1_len = 0, cmd1_len = 0;
    drths_msg_t m, out;
    drths_wire_rx_t prx; /* physical site, lives across runs */
    assert_int_equal(drths_wire_rx_init(&prx, DRTHS_ROLE_PHYSICAL, psk, NULL), 0);
    uint8_t ack_key1[32] = {0}, ack_key[32];
    for (int run = 0; run < 2; run++) {
        uint64_t sid = drths_crypto_random_session_id();
        hs_side_t n, p;
        len = hs_hello(&n, sid, buf);
        if (run == 0) {
            memcpy(hello1, buf, len);
            hello1_len = len;
        }
        assert_int_equal(drths_wire_open(&prx, buf, len, &out), DRTHS_REJECT_BAD_SESSION);
        alen = hs_adopt(&p, &prx, buf, len, ack, ack_key);
        if (run == 0)
            memcpy(ack_key1, ack_key, 32);
        assert_int_equal(drths_wire_open(&prx, buf, len, &out), DRTHS_REJECT_REPLAYED);
        hs_finish(&n, sid, ack, alen);
        assert_memory_equal(&n.keys, &p.keys, sizeof n.keys);
        /* The HELLO_ACK repeated (answer to a repeated HELLO): same payload, next counter,
         * and once the keys exist it is dropped without a DH. */
        ex_msg(DRTHS_MSG_HELLO_ACK, &m);
        assert_int_equal(drths_wire_seal(&p.tx, &m, ack, sizeof ack, &alen), 0);
        assert_int_equal(drths_wire_open(&n.rx, ack, alen, &out), DRTHS_REJECT_NO_KEY);
        ex_msg(DRTHS_MSG_COMMAND, &m);
        if (run == 0)
            n.tx.next_counter = 100; /* so that run 2's window has not seen this counter */
        assert_int_equal(drths_wire_seal(&n.tx, &m, buf, sizeof buf, &len), 0);
        assert_int_equal(drths_wire_open(&prx, buf, len, &out), DRTHS_REJECT_OK);
        if (run == 0) {
            memcpy(cmd1, buf, len);
            cmd1_len = len;
        } else {
            /* Run 2 is live. The recorded COMMAND of run 1 is refused for its session id, and
             * with the session id rewritten to the live one it fails authentication. */
            assert_int_equal(drths_wire_open(&prx, cmd1, cmd1_len, &out),
                             DRTHS_REJECT_BAD_SESSION);
            memcpy(cmd1 + 8, buf + 8, 8);
            assert_int_equal(drths_wire_open(&prx, cmd1, cmd1_len, &out), DRTHS_REJECT_BAD_TAG);
            memcpy(cmd1 + 8, hello1 + 8, 8);
            /* Run 1's HELLO replayed and (by a responder that did not refuse it) adopted
             * again: a fresh ephemeral makes a new HELLO_ACK key, so the second HELLO_ACK of
             * that session is never sealed under the key and nonce of the first (the v1 fault:
             * the key depended on PSK and session id only); and the new session keys do not
             * open run 1's recorded COMMAND. */
            drths_wire_rx_t arx;
            hs_side_t q;
            uint8_t ack2[DRTHS_WIRE_MAX_DATAGRAM], ack_key2[32];
            assert_int_equal(drths_wire_rx_init(&arx, DRTHS_ROLE_PHYSICAL, psk, NULL), 0);
            hs_adopt(&q, &arx, hello1, hello1_len, ack2, ack_key2);
            assert_memory_not_equal(ack_key1, ack_key2, 32);
            assert_int_equal(drths_wire_open(&arx, cmd1, cmd1_len, &out), DRTHS_REJECT_BAD_TAG);
            drths_wire_rx_close(&arx);
            drths_wire_tx_close(&q.tx);
            /* The live session keeps working. */
            assert_int_equal(drths_wire_seal(&n.tx, &m, buf, sizeof buf, &len), 0);
            assert_int_equal(drths_wire_open(&prx, buf, len, &out), DRTHS_REJECT_OK);
        }
        drths_wire_tx_close(&n.tx);
        drths_wire_rx_close(&n.rx);
        drths_wire_tx_close(&p.tx);
    }
    /* A HELLO sealed with another PSK is BAD_TAG in open_hello. */
    uint8_t other_psk[32], pk[32], sk[32], k[32];
    drths_key_rehearsal(other_psk);
    drths_crypto_eph_keypair(pk, sk);
    drths_crypto_derive_hello(other_psk, 42, pk, k);
    drths_wire_tx_t etx;
    assert_int_equal(drths_wire_tx_init(&etx, DRTHS_ROLE_NUMERICAL, 42), 0);
    drths_wire_tx_set_handshake(&etx, k, pk);
    ex_msg(DRTHS_MSG_HELLO, &m);
    assert_int_equal(drths_wire_seal(&etx, &m, buf, sizeof buf, &len), 0);
    assert_int_equal(drths_wire_open_hello(&prx, buf, len, &out), DRTHS_REJECT_BAD_TAG);
    /* Its ephemeral key is authenticated: another one in its place fails too. */
    drths_crypto_derive_hello(psk, 42, pk, k);
    drths_wire_tx_init(&etx, DRTHS_ROLE_NUMERICAL, 42);
    drths_wire_tx_set_handshake(&etx, k, pk);
    assert_int_equal(drths_wire_seal(&etx, &m, buf, sizeof buf, &len), 0);
    assert_int_equal(drths_wire_open_hello(&prx, buf, len, &out), DRTHS_REJECT_OK);
    buf[DRTHS_WIRE_HEADER_BYTES] ^= 1;
    assert_int_equal(drths_wire_open_hello(&prx, buf, len, &out), DRTHS_REJECT_BAD_TAG);
    /* open_hello takes only HELLO. */
    assert_int_equal(ex_seal(DRTHS_MSG_COMMAND, buf, sizeof buf, &len), 0);
    assert_int_equal(drths_wire_open_hello(&prx, buf, len, &out), DRTHS_REJECT_BAD_TYPE);
    drths_wire_rx_close(&prx);
}

/* Version negotiation: a v1 datagram is named before anything else; the ranges pick the
 * highest common version; a HELLO of a later version with more elements is still read. */
static void test_versions(void **state)
{
    (void)state;
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len;
    drths_msg_t out;
    drths_wire_header_t h;
    assert_int_equal(ex_seal(DRTHS_MSG_HELLO, buf, sizeof buf, &len), 0);
    buf[4] = 1;
    assert_int_equal(drths_wire_peek_header(buf, len, &h), DRTHS_REJECT_V1_PEER);
    buf[7] = 0; /* a v1 HELLO: no flags, and 40 + 98 + 16 bytes */
    assert_int_equal(drths_wire_peek_header(buf, 154, &h), DRTHS_REJECT_V1_PEER);
    buf[4] = 3;
    assert_int_equal(drths_wire_peek_header(buf, len, &h), DRTHS_REJECT_BAD_VERSION);
    assert_int_equal(drths_wire_pick_version(2, 2, 2, 2), 2);
    assert_int_equal(drths_wire_pick_version(2, 5, 1, 3), 3);
    assert_int_equal(drths_wire_pick_version(3, 4, 2, 2), 0);
    /* A HELLO with a 14th element (as a later version may send) opens; the element is ignored.
     * Its plaintext is the example's with the array header 0x9d -> 0x9e and one byte more. */
    drths_wire_tx_t tx;
    drths_msg_t m;
    drths_wire_tx_init(&tx, DRTHS_ROLE_NUMERICAL, EX_SESSION_ID);
    drths_wire_tx_set_handshake(&tx, exk.hello_key, exk.en_pk);
    ex_msg(DRTHS_MSG_HELLO, &m);
    assert_int_equal(drths_wire_seal(&tx, &m, buf, sizeof buf, &len), 0);
    uint8_t plain[DRTHS_WIRE_MAX_HELLO_PAYLOAD + 1];
    size_t pl = tx.hs_plain_len;
    memcpy(plain, tx.hs_plain, pl);
    assert_int_equal(plain[0], 0x9d);
    plain[0] = 0x9e;
    plain[pl++] = 0x07;
    len = seal_raw(DRTHS_ROLE_NUMERICAL, DRTHS_MSG_HELLO, 1, 0, plain, pl, buf);
    drths_wire_rx_t prx;
    assert_int_equal(drths_wire_rx_init(&prx, DRTHS_ROLE_PHYSICAL, psk, NULL), 0);
    assert_int_equal(drths_wire_open_hello(&prx, buf, len, &out), DRTHS_REJECT_OK);
    assert_string_equal(out.u.hello.site, "num-lab");
    /* Twelve elements are too few. */
    plain[0] = 0x9c;
    len = seal_raw(DRTHS_ROLE_NUMERICAL, DRTHS_MSG_HELLO, 1, 0, plain, pl - 1, buf);
    assert_int_equal(drths_wire_open_hello(&prx, buf, len, &out), DRTHS_REJECT_TRAILING_BYTES);
    drths_wire_rx_close(&prx);
    drths_wire_tx_close(&tx);
}

/* An actuator site refusing a HELLO has no session keys: its ABORT carries a fresh ephemeral
 * and is sealed under that HELLO_ACK key; the numerical site opens it while it still has its
 * ephemeral secret. Nothing else may carry an ephemeral, and no other data message goes out
 * without session keys. */
static void test_abort_before_keys(void **state)
{
    (void)state;
    drths_wire_tx_t ptx;
    assert_int_equal(drths_wire_tx_init(&ptx, DRTHS_ROLE_PHYSICAL, EX_SESSION_ID), 0);
    drths_msg_t m, out;
    ex_msg(DRTHS_MSG_ABORT, &m);
    m.u.stop.reason = DRTHS_STOP_FINGERPRINT_MISMATCH;
    strcpy(m.u.stop.text, "experiment differs in structure, link: actuator 00.. numerical a0..");
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len;
    assert_int_equal(drths_wire_seal(&ptx, &m, buf, sizeof buf, &len), -ENOKEY);
    drths_wire_tx_set_handshake(&ptx, exk.ack_key, exk.ep_pk);
    assert_int_equal(drths_wire_seal(&ptx, &m, buf, sizeof buf, &len), 0);
    assert_int_equal(buf[7], DRTHS_WIRE_FLAG_EPH);
    drths_wire_rx_t nrx;
    assert_int_equal(drths_wire_rx_init(&nrx, DRTHS_ROLE_NUMERICAL, psk, NULL), 0);
    drths_wire_rx_start(&nrx, EX_SESSION_ID);
    drths_wire_rx_set_initiator(&nrx, exk.en_sk, exk.en_pk);
    assert_int_equal(drths_wire_open(&nrx, buf, len, &out), DRTHS_REJECT_OK);
    assert_int_equal(out.u.stop.reason, DRTHS_STOP_FINGERPRINT_MISMATCH);
    assert_string_equal(out.u.stop.text, m.u.stop.text);
    /* The actuator site never accepts an ABORT with an ephemeral (only it refuses). */
    drths_wire_rx_t prx;
    assert_int_equal(drths_wire_rx_init(&prx, DRTHS_ROLE_PHYSICAL, psk, NULL), 0);
    reset_rx(&prx);
    uint8_t nb[DRTHS_WIRE_MAX_DATAGRAM];
    memcpy(nb, buf, len);
    nb[5] = DRTHS_MSG_ABORT;
    assert_int_equal(drths_wire_open(&prx, nb, len, &out), DRTHS_REJECT_BAD_RESERVED);
    /* STOP is not an exception: without keys the sender cannot seal it. */
    ex_msg(DRTHS_MSG_STOP, &m);
    assert_int_equal(drths_wire_seal(&ptx, &m, buf, sizeof buf, &len), -ENOKEY);
    /* A FEEDBACK with the EPH flag is refused on its header. */
    uint8_t plain[] = {0x95, 0x01, 0x01, 0x00, 0x00, 0x91, 0x93, 0xff, 0x00, 0x91, 0x92,
                       0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0};
    reset_rx(&nrx);
    len = seal_raw(DRTHS_ROLE_PHYSICAL, DRTHS_MSG_FEEDBACK, 50, 5, plain, sizeof plain, buf);
    assert_int_equal(drths_wire_open(&nrx, buf, len, &out), DRTHS_REJECT_OK);
    buf[7] = DRTHS_WIRE_FLAG_EPH;
    assert_int_equal(drths_wire_open(&nrx, buf, len, &out), DRTHS_REJECT_BAD_RESERVED);
    drths_wire_rx_close(&nrx);
    drths_wire_rx_close(&prx);
    drths_wire_tx_close(&ptx);
}

/* The samples a message for tick T carries are the first k of the offsets 0, 1, 2, 3, 8, 16,
 * ... whose tick T - offset(k) is >= 0, and sample k is for tick T - offset(k): the same count
 * and ticks as the loop both sites wrote by hand before (k < r && offset(k) <= T). */
static void test_sample_ticks(void **state)
{
    (void)state;
    assert_int_equal(drths_wire_samples_of(0, 4), 1);
    assert_int_equal(drths_wire_samples_of(2, 4), 3);
    assert_int_equal(drths_wire_samples_of(3, 4), 4);
    assert_int_equal(drths_wire_samples_of(1000, 4), 4);
    assert_int_equal(drths_wire_samples_of(7, 8), 4);
    assert_int_equal(drths_wire_samples_of(8, 8), 5);
    assert_int_equal(drths_wire_samples_of(63, 8), 7);
    assert_int_equal(drths_wire_samples_of(64, 8), 8);
    assert_int_equal(drths_wire_samples_of(5, 0), 0);
    assert_int_equal(drths_wire_samples_of(UINT64_MAX, DRTHS_WIRE_MAX_R), DRTHS_WIRE_MAX_R);
    /* Never more than a message holds. */
    assert_int_equal(drths_wire_samples_of(UINT64_MAX, DRTHS_WIRE_MAX_R + 5), DRTHS_WIRE_MAX_R);
    static const uint64_t ticks[8] = {99, 98, 97, 96, 91, 83, 67, 35};
    for (int k = 0; k < 8; k++)
        assert_int_equal(drths_wire_sample_tick(99, k), ticks[k]);
    for (int r = 1; r <= DRTHS_WIRE_MAX_R; r++) {
        for (uint64_t T = 0; T < 40000; T += T < 100 ? 1 : 97) {
            int k = 0;
            for (; k < r && drths_wire_offset(k) <= T; k++)
                assert_int_equal(drths_wire_sample_tick(T, k), T - drths_wire_offset(k));
            assert_int_equal(drths_wire_samples_of(T, r), k);
        }
    }
}

static void test_peek_header(void **state)
{
    (void)state;
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len;
    assert_int_equal(ex_seal(DRTHS_MSG_FEEDBACK, buf, sizeof buf, &len), 0);
    drths_wire_header_t h;
    assert_int_equal(drths_wire_peek_header(buf, len, &h), DRTHS_REJECT_OK);
    assert_int_equal(h.type, DRTHS_MSG_FEEDBACK);
    assert_true(h.session_id == EX_SESSION_ID && h.counter == 1001 && h.tick == 1250 &&
                h.epoch == 1 && h.version == DRTHS_WIRE_VERSION);
}

/* DRTHS_WRITE_CORPUS=DIR ./unit_wire writes the fuzz seed corpus (tests/fuzz/corpus/datagram):
 * per message type, the sealed example as a raw-mode input (first byte 0x00) and as a
 * before-authentication input (0x02), and its plaintext as a sealed-mode input (0x01, type,
 * two bytes choosing the bit to flip, payload). */
static int write_corpus(const char *dir)
{
    for (int i = 0; i < EX_NTYPES; i++) {
        drths_msg_type_t t = ex_types[i];
        uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM + 4], in[DRTHS_WIRE_MAX_DATAGRAM + 8];
        size_t len;
        if (ex_seal(t, buf, sizeof buf, &len) != 0)
            return 1;
        drths_wire_rx_t rx;
        drths_msg_t out;
        if (ex_rx(&rx, other(ex_sender(t))) != 0 || drths_wire_open(&rx, buf, len, &out) != 0)
            return 1;
        size_t plen = rx.plain_len;
        for (int mode = 0; mode < 3; mode++) {
            size_t n;
            in[0] = (uint8_t)mode;
            if (mode != 1) {
                memcpy(in + 1, buf, len);
                n = 1 + len;
            } else {
                in[1] = (uint8_t)(t - 1);
                in[2] = (uint8_t)(37 * i);
                in[3] = 0;
                memcpy(in + 4, rx.plain, plen);
                n = 4 + plen;
            }
            char path[4096];
            snprintf(path, sizeof path, "%s/%s-%s", dir,
                     mode == 0 ? "raw" : mode == 1 ? "sealed" : "preauth", drths_msg_type_name(t));
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(in, 1, n, f) != n || fclose(f) != 0)
                return 1;
        }
        drths_wire_rx_close(&rx);
    }
    return 0;
}

int main(void)
{
    if (getenv("DRTHS_WRITE_CORPUS")) {
        setup(NULL);
        return write_corpus(getenv("DRTHS_WRITE_CORPUS"));
    }

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_largest_messages),
        cmocka_unit_test(test_every_bit_flip),
        cmocka_unit_test(test_header_reasons),
        cmocka_unit_test(test_payload_reasons),
        cmocka_unit_test(test_no_allocation),
        cmocka_unit_test(test_seal_refusals),
        cmocka_unit_test(test_handshake_and_old_session),
        cmocka_unit_test(test_abort_before_keys),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_peek_header),
        cmocka_unit_test(test_sample_ticks),
        cmocka_unit_test(test_golden_bytes),
        cmocka_unit_test(test_payload_is_msgpack_c),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
