/* The attacks of drths-attack (tools/attack/attack.h), checked offline.
 *
 * Every attack datagram that the live tests inject is built here against a local receiver of a
 * known session and must be rejected with exactly the reason the attacker declares (so that
 * tests/fault/test_attack_live.sh can compare the actuator site's counters with the attacker's
 * declared tallies), and the genuine datagram it was made from must still be accepted afterwards
 * (or be REPLAYED when the attack spent its counter with the key). The flood junk of both
 * directions is checked the same way, datagram by datagram.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/crypto.h"
#include "protocol/wire.h"
#include "tools/attack/attack.h"

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

typedef struct pair {
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    drths_attack_knowledge_t kn;
} pair_t;

static int pair_setup(void **state)
{
    static pair_t p;
    assert_int_equal(drths_crypto_init(), 0);
    memset(&p, 0, sizeof p);
    drths_key_rehearsal(p.kn.psk);
    p.kn.session_id = UINT64_C(0x1122334455667788);
    uint8_t pk[32], sk[32], hk[32], dh[32] = {1}, th[32] = {2};
    drths_crypto_eph_keypair(pk, sk);
    drths_crypto_derive_hello(p.kn.psk, p.kn.session_id, pk, hk);
    drths_crypto_derive(p.kn.psk, dh, th, &p.kn.keys);
    p.kn.have_keys = true;
    assert_int_equal(drths_wire_tx_init(&p.tx, DRTHS_ROLE_NUMERICAL, p.kn.session_id), 0);
    drths_wire_tx_set_handshake(&p.tx, hk, pk);
    drths_error_t err;
    assert_int_equal(drths_wire_rx_init(&p.rx, DRTHS_ROLE_PHYSICAL, p.kn.psk, &err), 0);
    drths_wire_rx_start(&p.rx, p.kn.session_id);
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_HELLO;
    m.u.hello = (drths_msg_hello_t){.proto_min = 2,
                                    .proto_max = 2,
                                    .role = 1,
                                    .rate_hz = 5000,
                                    .n_channels = 1,
                                    .r = 4,
                                    .offsets = {0, 1, 2, 3},
                                    .units = "SI"};
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
    for (int i = 0; i < DRTHS_ATTACK_COUNT; i++) {
        size_t n = seal_command(p, 5000 + (uint64_t)i, g);
        drths_attack_t a;
        size_t len = drths_attack_build(i, &p->kn, g, n, old, old_n, out, &a);
        assert_non_null(a.name);
        drths_reject_t got_g = DRTHS_REJECT_OK;
        if (a.after)
            got_g = drths_wire_open(&p->rx, g, n, &m);
        drths_reject_t got;
        if (a.expect == DRTHS_REJECT_HELLO_RUNNING) {
            /* The site's HELLO path during a run (site-physical/physsite.c): any HELLO is
             * dropped on its header, before decryption, whether it would authenticate (a
             * genuine HELLO of this or another session) or not (a forged one). */
            drths_wire_header_t h;
            assert_int_equal(drths_wire_peek_header(out, len, &h), DRTHS_REJECT_OK);
            assert_int_equal(h.type, DRTHS_MSG_HELLO);
            got = DRTHS_REJECT_HELLO_RUNNING;
            drths_reject_t dec = drths_wire_open_hello(&p->rx, out, len, &m);
            assert_int_equal(dec, strstr(a.name, "forged") ? DRTHS_REJECT_BAD_TAG
                                                           : DRTHS_REJECT_OK);
        } else {
            drths_wire_header_t h;
            if (drths_wire_peek_header(out, len, &h) == DRTHS_REJECT_OK &&
                h.type == DRTHS_MSG_HELLO && h.session_id != p->kn.session_id)
                got = drths_wire_open_hello(&p->rx, out, len, &m);
            else
                got = drths_wire_open(&p->rx, out, len, &m);
            if ((int)got != a.expect)
                fail_msg("attack %d (%s): %s, expected %s", i, a.name, drths_reject_name(got),
                         drths_attack_reason_name(a.expect));
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
        size_t len = drths_attack_flood_junk(k, &p->kn, 9000, buf, &reason);
        drths_reject_t got = drths_wire_open(&p->rx, buf, len, &m);
        if ((int)got != reason)
            fail_msg("junk %" PRIu64 ": %s, expected %s", k, drths_reject_name(got),
                     drths_attack_reason_name(reason));
    }
    size_t n = seal_command(p, 9000, g);
    assert_int_equal(drths_wire_open(&p->rx, g, n, &m), DRTHS_REJECT_OK);
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
        size_t len = drths_attack_client_junk(k, &p->kn, buf, &reason);
        assert_true(len < 57 || get_u64(buf + 8) != p->kn.session_id);
        drths_reject_t got = drths_wire_open(&rx, buf, len, &m);
        if ((int)got != reason)
            fail_msg("client junk %" PRIu64 ": %s, expected %s", k, drths_reject_name(got),
                     drths_attack_reason_name(reason));
    }
    drths_wire_rx_close(&rx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_attack_gives_its_reason),
        cmocka_unit_test(test_flood_junk_reasons),
        cmocka_unit_test(test_client_junk_reasons),
    };
    return cmocka_run_group_tests(tests, pair_setup, NULL);
}
