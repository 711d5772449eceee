/* Tests of the kernel socket filter (protocol/wire_filter.h) on a real UDP socket on
 * 127.0.0.1: which hand-made headers the kernel lets through, and that it counts the rest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "common/platform/rtclock.h"
#include "common/platform/udp.h"
#include "protocol/wire_filter.h"

#define SID 0x0123456789abcdefULL

typedef struct sockets {
    drths_udp_t tx, rx;
    drths_addr_t to;
    uint64_t marker;
    uint8_t marker_type; /* a type the filter under test lets through */
} sockets_t;

static void be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* A datagram that passes every check the filter makes: a COMMAND of session SID, 57 bytes. */
static size_t datagram(uint8_t *d, size_t len, uint8_t type, uint64_t sid, uint64_t tick)
{
    memset(d, 0xa5, len);
    memcpy(d, "DRTH", 4);
    d[4] = DRTHS_WIRE_VERSION;
    d[5] = type;
    be(d + 6, 0, 2);
    be(d + 8, sid, 8);
    be(d + 16, 1, 8);
    be(d + 24, tick, 8);
    be(d + 32, 1, 4);
    be(d + 36, 0, 4);
    return len;
}

static void open_pair(sockets_t *s)
{
    drths_addr_t lo;
    drths_error_t err;
    assert_int_equal(drths_addr_parse(&lo, "127.0.0.1:0", "test", &err), 0);
    assert_int_equal(drths_udp_open(&s->tx, &lo, NULL, &err), 0);
    assert_int_equal(drths_udp_open(&s->rx, &lo, NULL, &err), 0);
    assert_int_equal(drths_udp_local(&s->rx, &s->to), 0);
    s->marker = 1000;
    s->marker_type = 5; /* COMMAND */
}

/* Sends d, then a datagram that passes, and receives until that marker: returns 1 if d
 * arrived before it. Loopback keeps the order of one sender's datagrams. */
static int passes(sockets_t *s, const uint8_t *d, size_t len)
{
    static drths_udp_msg_t msgs[DRTHS_UDP_BATCH];
    static uint8_t m[64];
    uint64_t marker = ++s->marker;
    datagram(m, 57, s->marker_type, SID, marker);
    assert_int_equal(drths_udp_send(&s->tx, &s->to, d, len), 0);
    assert_int_equal(drths_udp_send(&s->tx, &s->to, m, 57), 0);
    int arrived = 0;
    int64_t deadline = drths_now_ns() + 2000000000LL;
    while (drths_udp_wait(&s->rx, deadline) == 1) {
        int n = drths_udp_recv(&s->rx, msgs, DRTHS_UDP_BATCH);
        for (int i = 0; i < n; i++) {
            if (msgs[i].len == 57 && memcmp(msgs[i].data, m, 57) == 0)
                return arrived;
            assert_int_equal(msgs[i].len, len);
            assert_memory_equal(msgs[i].data, d, len);
            arrived = 1;
        }
    }
    fail_msg("the marker datagram never arrived");
    return -1;
}

static void test_before_the_session(void **state)
{
    (void)state;
    sockets_t s;
    open_pair(&s);
    drths_wire_filter_t f;
    drths_wire_filter_build(&f, DRTHS_ROLE_PHYSICAL, 0);
    assert_true(f.len <= DRTHS_WIRE_FILTER_MAX_INSNS);
    assert_int_equal(drths_udp_attach_filter(&s.rx, f.insns, f.len), 0);
    int64_t drops0 = drths_udp_kernel_drops(&s.rx);
    assert_true(drops0 >= 0);
    static uint8_t d[DRTHS_WIRE_MAX_DATAGRAM + 8];
    int dropped = 0;

    /* What the numerical site sends, of any session, at the smallest and largest size. */
    const uint8_t from_numerical[] = {1, 3, 4, 5, 7, 8, 9, 10};
    for (size_t i = 0; i < sizeof from_numerical; i++)
        assert_int_equal(passes(&s, d, datagram(d, 57, from_numerical[i], 42, 1)), 1);
    assert_int_equal(passes(&s, d, datagram(d, DRTHS_WIRE_MAX_DATAGRAM, 5, SID, 1)), 1);

    /* Too short, too long, what only the actuator site sends, unknown types. */
    assert_int_equal(passes(&s, d, datagram(d, 56, 5, SID, 1)), 0);
    assert_int_equal(passes(&s, d, datagram(d, DRTHS_WIRE_MAX_DATAGRAM + 1, 5, SID, 1)), 0);
    const uint8_t not_ours[] = {0, 2, 6, 11, 31, 32, 200, 255};
    for (size_t i = 0; i < sizeof not_ours; i++)
        assert_int_equal(passes(&s, d, datagram(d, 57, not_ours[i], SID, 1)), 0);
    dropped += 2 + (int)sizeof not_ours;

    /* One wrong header byte at a time: magic, version, flags, reserved. */
    const size_t offsets[] = {0, 3, 4, 6, 7, 36, 39};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        datagram(d, 57, 5, SID, 1);
        d[offsets[i]] ^= 0x02; /* 0x01 at byte 7 would be the EPH flag, which passes */
        assert_int_equal(passes(&s, d, 57), 0);
        dropped++;
    }
    assert_int_equal(drths_udp_kernel_drops(&s.rx) - drops0, dropped);
    drths_udp_close(&s.tx);
    drths_udp_close(&s.rx);
}

static void test_in_the_session(void **state)
{
    (void)state;
    sockets_t s;
    open_pair(&s);
    drths_wire_filter_t f;
    drths_wire_filter_build(&f, DRTHS_ROLE_PHYSICAL, SID);
    assert_int_equal(drths_udp_attach_filter(&s.rx, f.insns, f.len), 0);
    static uint8_t d[128];
    assert_int_equal(passes(&s, d, datagram(d, 100, 5, SID, 1)), 1);
    assert_int_equal(passes(&s, d, datagram(d, 100, 1, SID, 1)), 1); /* a repeated HELLO */
    /* Another session, differing in either half of the id, and a HELLO of a new session. */
    assert_int_equal(passes(&s, d, datagram(d, 100, 5, SID ^ (1ULL << 40), 1)), 0);
    assert_int_equal(passes(&s, d, datagram(d, 100, 5, SID ^ 1, 1)), 0);
    assert_int_equal(passes(&s, d, datagram(d, 100, 1, 7, 1)), 0);
    drths_udp_close(&s.tx);
    drths_udp_close(&s.rx);
}

/* The numerical site's filter (drths-numerical --kernel-filter): it knows its session from the
 * start, so the session check is on from the first HELLO. */
static void test_numerical_role(void **state)
{
    (void)state;
    sockets_t s;
    open_pair(&s);
    drths_wire_filter_t f;
    drths_wire_filter_build(&f, DRTHS_ROLE_NUMERICAL, SID);
    assert_true(f.len <= DRTHS_WIRE_FILTER_MAX_INSNS);
    assert_int_equal(drths_udp_attach_filter(&s.rx, f.insns, f.len), 0);
    int64_t drops0 = drths_udp_kernel_drops(&s.rx);
    assert_true(drops0 >= 0);
    static uint8_t d[DRTHS_WIRE_MAX_DATAGRAM + 8];
    int dropped = 0;
    s.marker_type = 6; /* FEEDBACK: the numerical site never receives a COMMAND */

    /* What the actuator site sends (HELLO_ACK, PROBE, PROBE_ECHO, FEEDBACK, HEARTBEAT, STOP,
     * ABORT) passes; every other type byte, HELLO, COMMAND and EPOCH among them, is dropped. */
    const uint8_t from_physical[] = {2, 3, 4, 6, 8, 9, 10};
    for (int t = 0; t < 256; t++) {
        int theirs = memchr(from_physical, t, sizeof from_physical) != NULL;
        assert_int_equal(passes(&s, d, datagram(d, 60, (uint8_t)t, SID, 1)), theirs);
        dropped += !theirs;
    }
    assert_int_equal(passes(&s, d, datagram(d, 57, 6, SID, 1)), 1);
    assert_int_equal(passes(&s, d, datagram(d, DRTHS_WIRE_MAX_DATAGRAM, 6, SID, 1)), 1);
    assert_int_equal(passes(&s, d, datagram(d, 56, 6, SID, 1)), 0);
    assert_int_equal(passes(&s, d, datagram(d, DRTHS_WIRE_MAX_DATAGRAM + 1, 6, SID, 1)), 0);
    dropped += 2;

    /* Other sessions: either half of the id wrong, no session, in the answer to a HELLO too. */
    const uint64_t others[] = {SID ^ 1, SID ^ (1ULL << 40), 0, ~SID};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        assert_int_equal(passes(&s, d, datagram(d, 60, 6, others[i], 1)), 0);
        assert_int_equal(passes(&s, d, datagram(d, 60, 2, others[i], 1)), 0);
        dropped += 2;
    }

    /* One wrong header byte at a time: magic, version, flags, reserved. */
    const size_t offsets[] = {0, 3, 4, 6, 7, 36, 39};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        datagram(d, 60, 6, SID, 1);
        d[offsets[i]] ^= 0x02; /* 0x01 at byte 7 would be the EPH flag, which passes */
        assert_int_equal(passes(&s, d, 60), 0);
        dropped++;
    }
    assert_int_equal(drths_udp_kernel_drops(&s.rx) - drops0, dropped);
    drths_udp_close(&s.tx);
    drths_udp_close(&s.rx);
}

/* The numerical site connects its socket before its first HELLO and keeps sending with
 * drths_udp_send (sendto with the peer's address): that works on a connected socket, the
 * datagram comes from the same address, and the peer's answer gets through the filter. */
static void test_connected_socket_sends_to_its_peer(void **state)
{
    (void)state;
    sockets_t s;
    open_pair(&s);
    drths_addr_t peer, self;
    assert_int_equal(drths_udp_local(&s.tx, &peer), 0);
    assert_int_equal(drths_udp_connect(&s.rx, &peer), 0);
    drths_wire_filter_t f;
    drths_wire_filter_build(&f, DRTHS_ROLE_NUMERICAL, SID);
    assert_int_equal(drths_udp_attach_filter(&s.rx, f.insns, f.len), 0);
    assert_int_equal(drths_udp_local(&s.rx, &self), 0);

    static uint8_t d[64];
    static drths_udp_msg_t msgs[DRTHS_UDP_BATCH];
    datagram(d, 60, 1, SID, 1); /* a HELLO */
    assert_int_equal(drths_udp_send(&s.rx, &peer, d, 60), 0);
    assert_int_equal(drths_udp_wait(&s.tx, drths_now_ns() + 2000000000LL), 1);
    assert_int_equal(drths_udp_recv(&s.tx, msgs, DRTHS_UDP_BATCH), 1);
    assert_int_equal(msgs[0].len, 60);
    assert_memory_equal(msgs[0].data, d, 60);
    assert_true(drths_addr_equal(&msgs[0].from, &self));

    s.marker_type = 6;
    assert_int_equal(passes(&s, d, datagram(d, 60, 2, SID, 1)), 1); /* its HELLO_ACK */
    drths_udp_close(&s.tx);
    drths_udp_close(&s.rx);
}

static void test_connected_socket_drops_other_senders(void **state)
{
    (void)state;
    sockets_t s, other;
    open_pair(&s);
    open_pair(&other);
    drths_addr_t peer;
    assert_int_equal(drths_udp_local(&s.tx, &peer), 0);
    assert_int_equal(drths_udp_connect(&s.rx, &peer), 0);
    static uint8_t d[64];
    datagram(d, 57, 5, SID, 7);
    assert_int_equal(drths_udp_send(&other.tx, &s.to, d, 57), 0);
    assert_int_equal(passes(&s, d, 57), 1);
    /* The datagram from the other socket, sent first, never arrived (passes() fails on any
     * datagram that is not the one it sent or its marker). */
    drths_udp_close(&s.tx);
    drths_udp_close(&s.rx);
    drths_udp_close(&other.tx);
    drths_udp_close(&other.rx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_before_the_session),
        cmocka_unit_test(test_in_the_session),
        cmocka_unit_test(test_numerical_role),
        cmocka_unit_test(test_connected_socket_sends_to_its_peer),
        cmocka_unit_test(test_connected_socket_drops_other_senders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
