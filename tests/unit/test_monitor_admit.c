/* Which HTTP connections drths-monitor keeps (tools/monitor/admit.h), in virtual time: the caps
 * per address and in all, which connection is dropped for a new one (not the newcomer, an
 * unproven one before one that showed the token, the oldest of the address holding the most),
 * the stream pool, the request and answer deadlines, and the acceptance case of issue 29 in
 * bookkeeping with drths-monitor's own limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tools/monitor/admit.h"

#define S 1000000000LL

static const uint8_t H1[4] = {127, 0, 0, 1}, H2[4] = {127, 0, 0, 2}, H3[4] = {127, 0, 0, 3};

static drths_admit_conn_t *open_from(drths_admit_t *a, const uint8_t h[4], int64_t now,
                                     drths_admit_conn_t **victim)
{
    drths_admit_conn_t *c = drths_admit_open(a, h, 4, now, victim);
    assert_non_null(c);
    return c;
}

static drths_admit_conn_t *stream_from(drths_admit_t *a, const uint8_t h[4],
                                       drths_admit_conn_t **victim)
{
    drths_admit_conn_t *v = NULL; /* a request dropped for it, marked (the callers check) */
    drths_admit_conn_t *c = open_from(a, h, 0, &v);
    drths_admit_headers(c, 1);
    drths_admit_answer(a, c, 0);
    drths_admit_stream(a, c, victim);
    return c;
}

/* Small caps for the rules: requests 4 per address, 8 in all; streams 2 and 4. */
static const drths_admit_limits_t L = {
    .per_host = {4, 2}, .max = {8, 4}, .request_ns = 3 * S, .answer_ns = 10 * S};

static void test_per_host_cap_drops_that_hosts_oldest(void **state)
{
    (void)state;
    static drths_admit_t a;
    drths_admit_init(&a, &L);
    drths_admit_conn_t *v, *first = open_from(&a, H2, 0, &v);
    assert_null(v);
    for (int i = 1; i < 4; i++) {
        open_from(&a, H2, i, &v);
        assert_null(v);
    }
    drths_admit_conn_t *other = open_from(&a, H3, 20, &v);
    assert_null(v);
    open_from(&a, H2, 21, &v); /* the 5th of H2: H2's oldest goes, not H3's */
    assert_ptr_equal(v, first);
    assert_true(first->dropping);
    assert_false(other->dropping);
    assert_int_equal(drths_admit_count(&a, DRTHS_ADMIT_OTHER, H2, 4), 4);
    drths_admit_close(first); /* its slot is free again; closing twice is harmless */
    drths_admit_close(first);
    assert_int_equal(drths_admit_count(&a, DRTHS_ADMIT_OTHER, NULL, 0), 5);
}

static void test_unproven_go_before_the_operator(void **state)
{
    (void)state;
    static drths_admit_t a;
    drths_admit_init(&a, &L);
    drths_admit_conn_t *v;
    /* The operator's keep-alive connection showed the token; then 3 slow requests from the
     * same address that never finish theirs. */
    drths_admit_conn_t *op = open_from(&a, H1, 0, &v);
    drths_admit_headers(op, 1);
    drths_admit_answer(&a, op, 1);
    drths_admit_done(&a, op, 2);
    drths_admit_conn_t *slow[3];
    for (int i = 0; i < 3; i++)
        slow[i] = open_from(&a, H1, 10 + i, &v);
    /* More slow ones: each drops the oldest slow one, never the operator's older connection. */
    for (int i = 0; i < 3; i++) {
        open_from(&a, H1, 100 + i, &v);
        assert_ptr_equal(v, slow[i]);
        assert_false(op->dropping);
    }
    /* In all, too: 4 + 4 from two other addresses that showed the token, then a newcomer; the
     * unproven ones of 127.0.0.1 go first although the others are older and as many. */
    static drths_admit_t b;
    drths_admit_init(&b, &L);
    drths_admit_conn_t *proven[8], *unproven;
    for (int i = 0; i < 7; i++) {
        proven[i] = open_from(&b, i < 4 ? H2 : H3, i, &v);
        drths_admit_headers(proven[i], 1);
    }
    unproven = open_from(&b, H1, 10, &v);
    assert_null(v);
    open_from(&b, H3, 11, &v);
    assert_ptr_equal(v, unproven);
}

static void test_global_cap(void **state)
{
    (void)state;
    static drths_admit_t a;
    drths_admit_init(&a, &L);
    drths_admit_conn_t *v, *h2[4], *h3[4];
    for (int i = 0; i < 4; i++) { /* 4 slow requests from each of 127.0.0.2..3 */
        h2[i] = open_from(&a, H2, i, &v);
        assert_null(v);
    }
    for (int i = 0; i < 4; i++) {
        h3[i] = open_from(&a, H3, 10 + i, &v);
        assert_null(v);
    }
    assert_int_equal(drths_admit_count(&a, DRTHS_ADMIT_OTHER, NULL, 0), 8);
    /* Unproven connections go oldest first, whatever their address: the operator's comes in
     * and 127.0.0.2's first goes; newcomers from further addresses take the next oldest, never
     * the operator's younger connection. */
    drths_admit_conn_t *op = open_from(&a, H1, 100, &v);
    assert_ptr_equal(v, h2[0]);
    for (int i = 0; i < 6; i++) {
        uint8_t host[4] = {127, 0, 1, (uint8_t)i};
        open_from(&a, host, 200 + i, &v);
        assert_ptr_equal(v, i < 3 ? h2[1 + i] : h3[i - 3]);
        assert_false(op->dropping);
    }
    /* Among connections that all showed the token, the oldest of the address holding the most
     * goes (127.0.0.3 with 3 against 1 and 2, although 127.0.0.2's is older). */
    static drths_admit_t b;
    drths_admit_init(&b, &L);
    const uint8_t *hosts[8] = {H2, H3, H3, H3, H1, H1, H2, H1};
    drths_admit_conn_t *c[8];
    for (int i = 0; i < 8; i++) {
        c[i] = open_from(&b, hosts[i], i, &v);
        assert_null(v);
        drths_admit_headers(c[i], 1);
    }
    open_from(&b, H2, 20, &v); /* H1 and H3 tie at 3: H3's oldest is the older */
    assert_ptr_equal(v, c[1]);
}

static void test_streams_capped_per_host_and_in_all(void **state)
{
    (void)state;
    static drths_admit_t a;
    drths_admit_init(&a, &L);
    drths_admit_conn_t *v, *s[2];
    for (int i = 0; i < 2; i++) {
        s[i] = stream_from(&a, H1, &v);
        assert_null(v);
    }
    /* The third stream of 127.0.0.1 ends its oldest (a reloaded page wins). */
    drths_admit_conn_t *third = stream_from(&a, H1, &v);
    assert_ptr_equal(v, s[0]);
    assert_int_equal(drths_admit_count(&a, DRTHS_ADMIT_STREAM, H1, 4), 2);
    /* 2 from another address fill the 4; a stream from a third address ends the oldest of the
     * address holding the most (both tie at 2: the oldest stream, 127.0.0.1's second). */
    for (int i = 0; i < 2; i++) {
        stream_from(&a, H2, &v);
        assert_null(v);
    }
    assert_int_equal(drths_admit_count(&a, DRTHS_ADMIT_STREAM, NULL, 0), 4);
    stream_from(&a, H3, &v);
    assert_ptr_equal(v, s[1]);
    assert_false(third->dropping);
    /* Streams and requests are separate pools: 4 streams leave requests free. */
    assert_int_equal(drths_admit_count(&a, DRTHS_ADMIT_OTHER, NULL, 0), 0);
    drths_admit_conn_t *req = open_from(&a, H1, 0, &v);
    assert_null(v);
    assert_int_equal(req->pool, DRTHS_ADMIT_OTHER);
}

static void test_deadlines(void **state)
{
    (void)state;
    static drths_admit_t a;
    drths_admit_init(&a, &L);
    drths_admit_conn_t *v, *x[DRTHS_ADMIT_SLOTS];
    drths_admit_conn_t *slow = open_from(&a, H1, 0, &v);  /* never completes its request */
    drths_admit_conn_t *quick = open_from(&a, H2, 0, &v); /* completes it at 1 s */
    drths_admit_conn_t *stream = stream_from(&a, H3, &v); /* a stream: no deadline */
    drths_admit_headers(quick, 1);
    drths_admit_answer(&a, quick, 1 * S);
    assert_int_equal(drths_admit_expired(&a, 3 * S - 1, x, DRTHS_ADMIT_SLOTS), 0);
    assert_int_equal(drths_admit_expired(&a, 3 * S, x, DRTHS_ADMIT_SLOTS), 1);
    assert_ptr_equal(x[0], slow); /* the whole request within 3 s, however it trickles */
    assert_int_equal(drths_admit_expired(&a, 3 * S, x, DRTHS_ADMIT_SLOTS), 0); /* once */
    /* The answer within 10 s of the request; then the next request within 3 s. */
    assert_int_equal(drths_admit_expired(&a, 11 * S - 1, x, DRTHS_ADMIT_SLOTS), 0);
    drths_admit_done(&a, quick, 5 * S);
    assert_int_equal(drths_admit_expired(&a, 8 * S - 1, x, DRTHS_ADMIT_SLOTS), 0);
    assert_int_equal(drths_admit_expired(&a, 8 * S, x, DRTHS_ADMIT_SLOTS), 1);
    assert_ptr_equal(x[0], quick);
    assert_int_equal(drths_admit_expired(&a, 1000 * S, x, DRTHS_ADMIT_SLOTS), 0);
    assert_false(stream->dropping);
}

/* Issue 29, case 3, with drths-monitor's limits: 16 readers on the operator's address and, on
 * each of four others, 8 readers and 8 slow requests, every reader also holding a connection
 * while it reconnects: no request is displaced (the operator's 6 included), the streams stay
 * within their caps, the operator's newest stream stands and the server's slots are never all
 * taken. */
static void test_acceptance_case(void **state)
{
    (void)state;
    static drths_admit_t a;
    drths_admit_init(&a, &drths_admit_default_limits);
    drths_admit_conn_t *v;
    for (int i = 0; i < 16; i++) {
        stream_from(&a, H1, &v);  /* 16 readers on the operator's address */
        open_from(&a, H1, i, &v); /* and each reconnecting */
        assert_null(v);
    }
    for (int h = 0; h < 4; h++) {
        uint8_t host[4] = {127, 0, 0, (uint8_t)(2 + h)};
        for (int i = 0; i < 8; i++) {
            stream_from(&a, host, &v);
            open_from(&a, host, i, &v); /* a reader reconnecting */
            assert_null(v);
            open_from(&a, host, i, &v); /* a slow request */
            assert_null(v);
        }
    }
    drths_admit_conn_t *op[6];
    for (int i = 0; i < 6; i++) {
        op[i] = open_from(&a, H1, 100, &v);
        assert_null(v);
    }
    drths_admit_conn_t *op_stream = stream_from(&a, H1, &v);
    assert_non_null(v); /* one of 127.0.0.1's older streams */
    for (int j = 0; j < DRTHS_ADMIT_SLOTS; j++)
        if (a.conn[j].used && a.conn[j].dropping)
            drths_admit_close(&a.conn[j]);
    assert_true(drths_admit_count(&a, DRTHS_ADMIT_OTHER, NULL, 0) <= 96);
    assert_true(drths_admit_count(&a, DRTHS_ADMIT_STREAM, NULL, 0) <= 16);
    /* Beyond it: 200 more slow requests and streams from the attack's addresses. The operator's
     * requests and its stream (the newest of its address) stand. */
    for (int i = 0; i < 200; i++) {
        uint8_t host[4] = {127, 0, 0, (uint8_t)(2 + i % 4)};
        open_from(&a, host, 200 + i, &v);
        stream_from(&a, host, &v);
        for (int j = 0; j < DRTHS_ADMIT_SLOTS; j++)
            if (a.conn[j].used && a.conn[j].dropping)
                drths_admit_close(&a.conn[j]);
        for (int k = 0; k < 6; k++)
            assert_false(op[k]->dropping);
        assert_false(op_stream->dropping);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_host_cap_drops_that_hosts_oldest),
        cmocka_unit_test(test_unproven_go_before_the_operator),
        cmocka_unit_test(test_global_cap),
        cmocka_unit_test(test_streams_capped_per_host_and_in_all),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_acceptance_case),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
