/* libFuzzer target for the datagram receive path (drths_wire_open / drths_wire_open_hello).
 *
 * The first input byte picks a mode:
 *   bits 1..0 = 00: the rest is a raw datagram, opened by both a physical and a numerical
 *         receiver of the example session (keys installed). Almost everything stops at the
 *         header or the tag, which is what a hostile network delivers.
 *   bits 1..0 = 10: before authentication: the rest is a raw datagram, opened by receivers that
 *         hold no valid key: one with no session at all (a site waiting for a HELLO), one with
 *         the example session started but no session keys yet (between HELLO and the first
 *         data message), both through drths_wire_open and the HELLO path drths_wire_open_hello
 *         (which derives a handshake key for whatever session id the header names). Nothing
 *         may be accepted except a HELLO that really is sealed
 *         with the example PSK, and nothing may count as accepted on a rejection.
 *   odd:  the rest is a *plaintext payload* and a type; the harness seals it with the example
 *         session keys (as a genuine peer would) and opens it, so the msgpack scanner, decoder
 *         and field checks behind the tag are reached. The harness also flips one bit chosen
 *         by the input in a sealed example datagram ("sealed-then-mutated") and requires a
 *         rejection.
 * Invariants checked (abort on violation): open never accepts a mutated datagram; an accepted
 * message passes the sender's validation (re-sealing it succeeds); the msgpack zone never
 * grows beyond its initial chunk.
 *
 * Build: cmake -DDRTHS_FUZZ=ON -DCMAKE_C_COMPILER=clang; run: ./fuzz_datagram corpus/datagram
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/wire_examples.h"
#include "protocol/wire.h"

static drths_wire_rx_t rx_phys, rx_num;
static drths_wire_tx_t tx_phys, tx_num;
static bool ready;
static ex_keys_t exk;

/* The example session again, keys installed (and the numerical receiver's ephemeral secret,
 * so that it opens HELLO_ACK and refusing ABORTs too). */
static void restart(drths_wire_rx_t *rx)
{
    drths_wire_rx_start(rx, EX_SESSION_ID);
    drths_wire_rx_set_keys(rx, &exk.keys);
    if (rx->role == DRTHS_ROLE_NUMERICAL)
        drths_wire_rx_set_initiator(rx, exk.en_sk, exk.en_pk);
}

static void setup(void)
{
    if (drths_crypto_init() != 0 || ex_rx(&rx_phys, DRTHS_ROLE_PHYSICAL) != 0 ||
        ex_rx(&rx_num, DRTHS_ROLE_NUMERICAL) != 0)
        abort();
    ex_keys(&exk);
    drths_wire_tx_init(&tx_phys, DRTHS_ROLE_PHYSICAL, EX_SESSION_ID);
    drths_wire_tx_init(&tx_num, DRTHS_ROLE_NUMERICAL, EX_SESSION_ID);
    drths_wire_tx_set_handshake(&tx_phys, exk.ack_key, exk.ep_pk);
    drths_wire_tx_set_handshake(&tx_num, exk.hello_key, exk.en_pk);
    drths_wire_tx_set_keys(&tx_phys, &exk.keys);
    drths_wire_tx_set_keys(&tx_num, &exk.keys);
    ready = true;
}

static void check_zone(const drths_wire_rx_t *rx)
{
    if (rx->zone.chunk_list.head != rx->zone_head0)
        abort();
}

/* An accepted message must be one the sender side would also produce. */
static void check_accepted(const drths_msg_t *m)
{
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len;
    drths_wire_tx_t *tx = ex_sender(m->type) == DRTHS_ROLE_PHYSICAL ? &tx_phys : &tx_num;
    if (m->type == DRTHS_MSG_PROBE || m->type == DRTHS_MSG_PROBE_ECHO ||
        m->type == DRTHS_MSG_HEARTBEAT || m->type == DRTHS_MSG_STOP)
        tx = &tx_num;
    if (m->type == DRTHS_MSG_ABORT)
        tx = &tx_phys;
    tx->next_counter = 1;
    if (drths_wire_seal(tx, m, buf, sizeof buf, &len) != 0)
        abort();
}

static void raw(const uint8_t *data, size_t size)
{
    static drths_msg_t out;
    drths_wire_rx_t *rxs[2] = {&rx_phys, &rx_num};
    for (int i = 0; i < 2; i++) {
        restart(rxs[i]);
        if (drths_wire_open(rxs[i], data, size, &out) == DRTHS_REJECT_OK)
            check_accepted(&out);
        if (drths_wire_open_hello(rxs[i], data, size, &out) == DRTHS_REJECT_OK)
            check_accepted(&out);
        check_zone(rxs[i]);
    }
}

static drths_wire_rx_t rx_nosession, rx_nokey;
static bool preauth_ready;

/* Before authentication (see the file comment). */
static void preauth(const uint8_t *data, size_t size)
{
    static drths_msg_t out;
    if (!preauth_ready) {
        if (ex_rx(&rx_nosession, DRTHS_ROLE_PHYSICAL) != 0 ||
            ex_rx(&rx_nokey, DRTHS_ROLE_PHYSICAL) != 0)
            abort();
        preauth_ready = true;
    }
    /* A site that has never had a session: session id 0, no keys. */
    rx_nosession.session_id = 0;
    rx_nosession.have_key = false;
    drths_wire_rx_start(&rx_nokey, EX_SESSION_ID);
    drths_wire_rx_t *rxs[2] = {&rx_nosession, &rx_nokey};
    for (int i = 0; i < 2; i++) {
        drths_wire_rx_t *rx = rxs[i];
        uint64_t accepted = rx->accepted;
        drths_reject_t r = drths_wire_open(rx, data, size, &out);
        if (r == DRTHS_REJECT_OK) {
            /* Without session keys only a genuine HELLO of the example session can pass (a
             * refusing ABORT is for the numerical site only, PROTOCOL.md section 7.4). */
            if (i == 0 || out.type != DRTHS_MSG_HELLO)
                abort();
            check_accepted(&out);
        } else if (rx->accepted != accepted) {
            abort();
        }
        drths_reject_t h = drths_wire_open_hello(rx, data, size, &out);
        if (h == DRTHS_REJECT_OK) {
            if (out.type != DRTHS_MSG_HELLO)
                abort();
            check_accepted(&out);
        }
        check_zone(rx);
    }
}

static void sealed(const uint8_t *data, size_t size)
{
    static drths_msg_t out;
    static uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM + 64];
    if (size < 3)
        return;
    int type = 1 + data[0] % DRTHS_MSG_TYPE_MAX;
    uint16_t flip = (uint16_t)(data[1] | data[2] << 8);
    data += 3;
    size -= 3;
    if (size == 0 || size > DRTHS_WIRE_MAX_PAYLOAD)
        return;
    drths_role_t sender = ex_sender((drths_msg_type_t)type);
    if (type == DRTHS_MSG_COMMAND || type == DRTHS_MSG_EPOCH || type == DRTHS_MSG_HELLO)
        sender = DRTHS_ROLE_NUMERICAL;
    drths_wire_rx_t *rx = sender == DRTHS_ROLE_NUMERICAL ? &rx_phys : &rx_num;
    restart(rx);
    /* Header by hand (tick 1000 so that r <= tick + 1 holds for any r); HELLO / HELLO_ACK with
     * the EPH flag and the example's ephemeral key after it. */
    bool hs = type == DRTHS_MSG_HELLO || type == DRTHS_MSG_HELLO_ACK;
    size_t pre = DRTHS_WIRE_HEADER_BYTES + (hs ? DRTHS_EPH_BYTES : 0);
    memset(buf, 0, DRTHS_WIRE_HEADER_BYTES);
    memcpy(buf, "DRTH", 4);
    buf[4] = DRTHS_WIRE_VERSION;
    buf[5] = (uint8_t)type;
    buf[7] = hs ? DRTHS_WIRE_FLAG_EPH : 0;
    for (int i = 0; i < 8; i++)
        buf[8 + i] = (uint8_t)(EX_SESSION_ID >> (56 - 8 * i));
    buf[23] = 9;                 /* counter 9 */
    buf[30] = 0x03, buf[31] = 0xe8; /* tick 1000 */
    if (hs)
        memcpy(buf + DRTHS_WIRE_HEADER_BYTES, type == DRTHS_MSG_HELLO ? exk.en_pk : exk.ep_pk,
               DRTHS_EPH_BYTES);
    memcpy(buf + pre, data, size);
    const uint8_t *key = type == DRTHS_MSG_HELLO           ? exk.hello_key
                         : type == DRTHS_MSG_HELLO_ACK     ? exk.ack_key
                         : sender == DRTHS_ROLE_NUMERICAL ? exk.keys.num_to_phys
                                                          : exk.keys.phys_to_num;
    drths_crypto_seal(key, sender, 9, buf, pre, buf + pre, size, buf + pre + size);
    size_t len = pre + size + DRTHS_TAG_BYTES;
    drths_reject_t r = drths_wire_open(rx, buf, len, &out);
    if (r == DRTHS_REJECT_OK)
        check_accepted(&out);
    check_zone(rx);
    /* Sealed-then-mutated: one flipped bit must never be accepted. */
    restart(rx);
    size_t bit = flip % (len * 8);
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    if (drths_wire_open(rx, buf, len, &out) == DRTHS_REJECT_OK)
        abort();
    check_zone(rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready)
        setup();
    if (size < 1)
        return 0;
    if (data[0] & 1)
        sealed(data + 1, size - 1);
    else if (data[0] & 2)
        preauth(data + 1, size - 1);
    else
        raw(data + 1, size - 1);
    return 0;
}
