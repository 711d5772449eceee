/* Tests of the UDP endpoint (real sockets on 127.0.0.1 and ::1) and the recorder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/platform/recorder.h"
#include "common/platform/rtclock.h"
#include "common/platform/udp.h"

static void test_addr_parse(void **state)
{
    (void)state;
    drths_addr_t a;
    drths_error_t err;
    char text[80];
    assert_int_equal(drths_addr_parse(&a, "127.0.0.1:47000", "--peer", &err), 0);
    drths_addr_format(&a, text, sizeof text);
    assert_string_equal(text, "127.0.0.1:47000");
    assert_int_equal(drths_addr_parse(&a, "[::1]:5", "--peer", &err), 0);
    drths_addr_format(&a, text, sizeof text);
    assert_string_equal(text, "[::1]:5");
    assert_true(drths_addr_parse(&a, "127.0.0.1", "--peer", &err) < 0);
    assert_non_null(strstr(err.msg, "--peer"));
    assert_non_null(strstr(err.msg, "no port"));
    assert_true(drths_addr_parse(&a, "127.0.0.1:70000", "--listen", &err) < 0);
    assert_non_null(strstr(err.msg, "0..65535"));
    assert_true(drths_addr_parse(&a, "::1:5", "--peer", &err) < 0);
    assert_int_equal(drths_addr_parse(&a, "127.3.2.1:5", "test", &err), 0);
    assert_true(drths_addr_is_loopback(&a));
    assert_int_equal(drths_addr_parse(&a, "[::1]:5", "test", &err), 0);
    assert_true(drths_addr_is_loopback(&a));
    assert_int_equal(drths_addr_parse(&a, "10.1.2.3:5", "test", &err), 0);
    assert_false(drths_addr_is_loopback(&a));
    assert_int_equal(drths_addr_parse(&a, ":5", "test", &err), 0); /* any address */
    assert_false(drths_addr_is_loopback(&a));
    assert_non_null(strstr(err.msg, "[ADDR]:PORT"));
}

static void roundtrip(const char *bind_text)
{
    drths_addr_t any, la, lb;
    drths_error_t err;
    drths_udp_t a, b;
    assert_int_equal(drths_addr_parse(&any, bind_text, "test", &err), 0);
    assert_int_equal(drths_udp_open(&a, &any, NULL, &err), 0);
    assert_int_equal(drths_udp_open(&b, &any, NULL, &err), 0);
    assert_int_equal(drths_udp_local(&a, &la), 0);
    assert_int_equal(drths_udp_local(&b, &lb), 0);
    /* Nothing waiting: recv returns 0 and wait times out. */
    static drths_udp_msg_t msgs[DRTHS_UDP_BATCH];
    assert_int_equal(drths_udp_recv(&b, msgs, DRTHS_UDP_BATCH), 0);
    assert_int_equal(drths_udp_wait(&b, drths_now_ns() + 1000000), 0);
    int64_t t0 = drths_now_ns();
    for (int i = 0; i < 5; i++) {
        char payload[16];
        int n = snprintf(payload, sizeof payload, "dgram %d", i);
        assert_int_equal(drths_udp_send(&a, &lb, payload, (size_t)n), 0);
    }
    assert_int_equal(drths_udp_wait(&b, drths_now_ns() + 2000000000LL), 1);
    int got = 0;
    for (int tries = 0; got < 5 && tries < 100; tries++) {
        int n = drths_udp_recv(&b, msgs + got, DRTHS_UDP_BATCH - got);
        assert_true(n >= 0);
        got += n;
        if (got < 5)
            drths_udp_wait(&b, drths_now_ns() + 10000000);
    }
    assert_int_equal(got, 5);
    for (int i = 0; i < 5; i++) {
        char want[16];
        snprintf(want, sizeof want, "dgram %d", i);
        assert_int_equal(msgs[i].len, strlen(want));
        assert_memory_equal(msgs[i].data, want, strlen(want));
        assert_true(drths_addr_equal(&msgs[i].from, &la));
        /* Arrival stamps are monotonic times between the first send and now. */
        assert_true(msgs[i].rx_ns >= t0 - 1000000 && msgs[i].rx_ns <= drths_now_ns());
    }
    drths_udp_close(&a);
    drths_udp_close(&b);
    drths_udp_close(&b);
}

static void test_udp_ipv4(void **state)
{
    (void)state;
    roundtrip("127.0.0.1:0");
}

static void test_udp_ipv6(void **state)
{
    (void)state;
    drths_addr_t a;
    drths_udp_t u;
    if (drths_addr_parse(&a, "[::1]:0", "t", NULL) != 0 || drths_udp_open(&u, &a, NULL, NULL)) {
        skip(); /* no IPv6 loopback on this machine */
    }
    drths_udp_close(&u);
    roundtrip("[::1]:0");
}

static void test_bind_in_use(void **state)
{
    (void)state;
    drths_addr_t a, la;
    drths_error_t err;
    drths_udp_t u, v;
    assert_int_equal(drths_addr_parse(&a, "127.0.0.1:0", "t", &err), 0);
    assert_int_equal(drths_udp_open(&u, &a, NULL, &err), 0);
    assert_int_equal(drths_udp_local(&u, &la), 0);
    assert_int_equal(drths_udp_open(&v, &la, NULL, &err), -EADDRINUSE);
    assert_non_null(strstr(err.msg, "cannot listen on 127.0.0.1:"));
    drths_udp_close(&u);
}

static void tap_sum(void *ctx, const double *row)
{
    double *acc = ctx;
    acc[0] += 1;        /* rows seen */
    acc[1] += row[1];   /* their second column */
}

/* drths_udp_wait_spin: times out at the deadline whether it spins all the way or sleeps the
 * rest, and sees a waiting datagram at once. */
static void test_wait_spin(void **state)
{
    (void)state;
    drths_addr_t lo, to;
    drths_error_t err;
    drths_udp_t a, b;
    assert_int_equal(drths_addr_parse(&lo, "127.0.0.1:0", "test", &err), 0);
    assert_int_equal(drths_udp_open(&a, &lo, NULL, &err), 0);
    assert_int_equal(drths_udp_open(&b, &lo, NULL, &err), 0);
    assert_int_equal(drths_udp_local(&b, &to), 0);
    const int64_t ms = 1000000;
    const int64_t spins[] = {0, ms, INT64_MAX};
    for (int i = 0; i < 3; i++) {
        int64_t deadline = drths_now_ns() + 2 * ms;
        assert_int_equal(drths_udp_wait_spin(&b, deadline, spins[i]), 0);
        assert_true(drths_now_ns() >= deadline);
    }
    assert_int_equal(drths_udp_send(&a, &to, "x", 1), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(drths_udp_wait_spin(&b, drths_now_ns() + 2000 * ms, spins[i]), 1);
    drths_udp_close(&a);
    drths_udp_close(&b);
}

static void test_recorder(void **state)
{
    (void)state;
    char dir[] = "/tmp/drths-test-recorder-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/r.csv", dir);
    const char *names[] = {"tick", "v"};
    drths_recorder_t r;
    drths_error_t err;
    assert_int_equal(drths_recorder_open(&r, path, names, 2, 4, &err), 0);
    double acc[2] = {0, 0};
    drths_recorder_set_tap(&r, tap_sum, acc);
    for (int i = 0; i < 4; i++)
        assert_int_equal(drths_recorder_push(&r, (double[]){i, 0.5 * i}), 0);
    /* A full ring drops and counts, never blocks. */
    assert_int_equal(drths_recorder_push(&r, (double[]){9, 9}), -ENOBUFS);
    assert_int_equal(drths_recorder_dropped(&r), 1);
    assert_int_equal(drths_recorder_drain(&r), 4);
    assert_int_equal(drths_recorder_push(&r, (double[]){4, 2}), 0);
    assert_int_equal(drths_recorder_close(&r, &err), 0);
    assert_int_equal(drths_recorder_close(&r, &err), 0);
    /* The tap saw every written row once, the dropped one never. */
    assert_true(acc[0] == 5.0 && acc[1] == 5.0);
    FILE *f = fopen(path, "r");
    char buf[256];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_string_equal(buf, "tick,v\n0,0\n1,0.5\n2,1\n3,1.5\n4,2\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr_parse), cmocka_unit_test(test_udp_ipv4),
        cmocka_unit_test(test_udp_ipv6),   cmocka_unit_test(test_bind_in_use),
        cmocka_unit_test(test_wait_spin),  cmocka_unit_test(test_recorder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
