#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "site-physical/openfresco.h"

/* Byte layouts from docs/openfresco.md (The wire protocol), written out by hand (little-endian
 * x86-64). */

static uint8_t buf[8 * 1024 + 64];

static double d_at(const uint8_t *b, size_t i)
{
    double v;
    memcpy(&v, b + 8 * i, 8);
    return v;
}

static void test_shadow_session(void **state)
{
    (void)state;
    drths_ofr_rx_t rx;
    drths_ofr_msg_t m;
    drths_ofr_rx_init(&rx, DRTHS_OFR_SHADOW);
    /* 1. The endianness probe: int32 1 = 01 00 00 00; the answer is the same four bytes. */
    assert_int_equal(drths_ofr_rx_need(&rx), 4);
    const uint8_t probe[4] = {1, 0, 0, 0};
    assert_int_equal(drths_ofr_rx_parse(&rx, probe, 4, &m), 0);
    assert_int_equal(m.kind, DRTHS_OFR_MSG_PROBE);
    assert_int_equal(drths_ofr_reply_probe(buf, sizeof buf), 4);
    assert_memory_equal(buf, probe, 4);
    /* 2. open [1, shadowTag, 2.8, 0...] of 256 doubles; answer [0, actorTag, 2.8, 0...]. */
    assert_int_equal(drths_ofr_rx_need(&rx), 2048);
    const double open[3] = {1.0, 7.0, 2.8};
    assert_int_equal(drths_ofr_build_vector(open, 3, 256, buf, sizeof buf), 2048);
    /* 1.0 as a little-endian double is 00 00 00 00 00 00 f0 3f. */
    const uint8_t one[8] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f};
    assert_memory_equal(buf, one, 8);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_int_equal(m.kind, DRTHS_OFR_MSG_OPEN);
    assert_true(m.tag == 7.0);
    assert_int_equal(drths_ofr_reply_open(buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 0.0 && d_at(buf, 1) == 1.0 && d_at(buf, 2) == 2.8);
    assert_true(d_at(buf, 3) == 0.0 && d_at(buf, 255) == 0.0);
    /* The refusing answer: the same vector with a version ShadowExpSite exits on. */
    assert_int_equal(drths_ofr_reply_open_refused(buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 0.0 && d_at(buf, 1) == 1.0 && d_at(buf, 2) != 2.8);
    assert_true(d_at(buf, 2) == DRTHS_OFR_REFUSED_VERSION && d_at(buf, 255) == 0.0);
    /* 3. setup [2, dataSize] then int32[5] control and measurement sizes; no reply. */
    assert_int_equal(drths_ofr_rx_need(&rx), 2048 + 40);
    const double setup[2] = {2.0, 256.0};
    assert_int_equal(drths_ofr_build_vector(setup, 2, 256, buf, sizeof buf), 2048);
    const int32_t sizes[10] = {1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    assert_int_equal(drths_ofr_build_ids(sizes, 10, buf + 2048, sizeof buf - 2048), 40);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2088, &m), 0);
    assert_int_equal(m.kind, DRTHS_OFR_MSG_SETUP);
    assert_int_equal(rx.data_size, 256);
    assert_int_equal(rx.meas[DRTHS_OFR_FORCE], 1);
    /* setTrialResponse [3, d, v, a, t]. */
    assert_int_equal(drths_ofr_rx_need(&rx), 2048);
    const double trial[5] = {3.0, 0.0125, -0.5, 9.75, 0.02};
    drths_ofr_build_vector(trial, 5, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_int_equal(m.kind, DRTHS_OFR_MSG_ACTION);
    assert_int_equal(m.action, DRTHS_OFR_SET_TRIAL);
    assert_true(m.disp[0] == 0.0125 && m.vel[0] == -0.5 && m.accel[0] == 9.75 && m.time == 0.02);
    /* getDaqResponse with stale values after element 0: they are ignored. */
    const double daq[4] = {6.0, 0.0125, -0.5, 123.0};
    drths_ofr_build_vector(daq, 4, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_int_equal(m.action, DRTHS_OFR_GET_DAQ);
    /* The reply: [d, v, a, f, t] from element 0 by the measurement sizes [1,1,1,1,1]. */
    drths_ofr_response_t r;
    memset(&r, 0, sizeof r);
    r.disp[0] = 0.0124;
    r.vel[0] = -0.4;
    r.accel[0] = 9.5;
    r.force[0] = -1234.5;
    r.time = 0.02;
    assert_int_equal(drths_ofr_reply_daq(&rx, &r, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 0.0124 && d_at(buf, 1) == -0.4 && d_at(buf, 2) == 9.5);
    assert_true(d_at(buf, 3) == -1234.5 && d_at(buf, 4) == 0.02 && d_at(buf, 5) == 0.0);
    /* commitState [5, ..., t_commit]: an action, nothing to decode. */
    const double commit[6] = {5.0, 1, 2, 3, 4, 0.04};
    drths_ofr_build_vector(commit, 6, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_int_equal(m.action, DRTHS_OFR_COMMIT);
    /* DIE [99, shadowTag]; reply [4, actorTag]. */
    const double die[2] = {99.0, 7.0};
    drths_ofr_build_vector(die, 2, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_int_equal(m.action, DRTHS_OFR_DIE);
    assert_true(m.tag == 7.0);
    assert_int_equal(drths_ofr_reply_die(&rx, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 4.0 && d_at(buf, 1) == 1.0);
}

static void test_shadow_large_data_size(void **state)
{
    (void)state;
    drths_ofr_rx_t rx;
    drths_ofr_msg_t m;
    drths_ofr_rx_init(&rx, DRTHS_OFR_SHADOW);
    rx.state = DRTHS_OFR_ST_SETUP;
    /* 1 + 1 + 300 control values: the vectors grow to 302 doubles. */
    const double setup[2] = {2.0, 302.0};
    drths_ofr_build_vector(setup, 2, 256, buf, sizeof buf);
    const int32_t sizes[10] = {1, 300, 0, 0, 0, 1, 0, 0, 1, 0};
    drths_ofr_build_ids(sizes, 10, buf + 2048, 40);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2088, &m), 0);
    assert_int_equal(rx.data_size, 302);
    assert_int_equal(drths_ofr_rx_need(&rx), 8 * 302);
    /* A declared dataSize that is too small is replaced by the formula. */
    drths_ofr_rx_init(&rx, DRTHS_OFR_SHADOW);
    rx.state = DRTHS_OFR_ST_SETUP;
    const double bad[2] = {2.0, 3.0};
    drths_ofr_build_vector(bad, 2, 256, buf, sizeof buf);
    drths_ofr_build_ids(sizes, 10, buf + 2048, 40);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2088, &m), 0);
    assert_int_equal(rx.data_size, 302);
    assert_int_equal(drths_ofr_data_size(sizes, sizes + 5), 302);
}

static void test_generic_tcp(void **state)
{
    (void)state;
    drths_ofr_rx_t rx;
    drths_ofr_msg_t m;
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    /* ID[11]: control [1,0,0,0,0], measurement [1,0,0,1,0], dataSize 256. */
    assert_int_equal(drths_ofr_rx_need(&rx), 44);
    const int32_t id[11] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 256};
    assert_int_equal(drths_ofr_build_ids(id, 11, buf, sizeof buf), 44);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), 0);
    assert_int_equal(m.kind, DRTHS_OFR_MSG_SETUP);
    const double trial[2] = {3.0, -0.003};
    drths_ofr_build_vector(trial, 2, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_int_equal(m.action, DRTHS_OFR_SET_TRIAL);
    assert_true(m.disp[0] == -0.003);
    assert_true(isnan(m.time));
    drths_ofr_response_t r;
    memset(&r, 0, sizeof r);
    r.disp[0] = -0.0029;
    r.vel[0] = 5.0; /* not asked for: not sent */
    r.force[0] = 87.5;
    assert_int_equal(drths_ofr_reply_daq(&rx, &r, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == -0.0029 && d_at(buf, 1) == 87.5 && d_at(buf, 2) == 0.0);
    /* DIE: no reply in this variant. */
    const double die[1] = {99.0};
    drths_ofr_build_vector(die, 1, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_int_equal(m.action, DRTHS_OFR_DIE);
    assert_int_equal(drths_ofr_reply_die(&rx, buf, sizeof buf), 0);
}

static void test_generic_client_element(void **state)
{
    (void)state;
    drths_ofr_rx_t rx;
    drths_ofr_msg_t m;
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    /* genericClient with n = 1: [1,1,1,0,1], [0,0,0,1,0], dataSize 256. */
    const int32_t id[11] = {1, 1, 1, 0, 1, 0, 0, 0, 1, 0, 256};
    drths_ofr_build_ids(id, 11, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), 0);
    const double trial[5] = {3.0, 0.01, 0.2, 3.0, 1.5};
    drths_ofr_build_vector(trial, 5, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), 0);
    assert_true(m.disp[0] == 0.01 && m.vel[0] == 0.2 && m.accel[0] == 3.0 && m.time == 1.5);
    drths_ofr_response_t r;
    memset(&r, 0, sizeof r);
    r.force[0] = 42.0;
    /* [10] getForce -> force(n) from element 0. */
    assert_int_equal(drths_ofr_reply_block(&rx, &r, DRTHS_OFR_FORCE, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 42.0 && d_at(buf, 1) == 0.0);
    /* [15] getMass -> n·n. */
    assert_int_equal(drths_ofr_reply_matrix(&rx, 0.0, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 0.0);
    assert_int_equal(drths_ofr_reply_matrix(&rx, 3.5e6, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 3.5e6 && d_at(buf, 1) == 0.0);
    /* Two driven displacements (genericClient -dof 1 2): a trial carries both, in order, then
     * both velocities and both accelerations; replies carry two values per block and a 2 x 2
     * diagonal matrix, column-major. */
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    const int32_t id2[11] = {2, 2, 2, 0, 1, 0, 0, 0, 2, 0, 256};
    drths_ofr_build_ids(id2, 11, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), 0);
    assert_int_equal(m.kind, DRTHS_OFR_MSG_SETUP);
    const double trial2[] = {DRTHS_OFR_SET_TRIAL, 0.01, -0.02, 0.1, 0.2, 1.0, 2.0, 0.5};
    drths_ofr_build_vector(trial2, 8, rx.data_size, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 8 * (size_t)rx.data_size, &m), 0);
    assert_true(m.disp[0] == 0.01 && m.disp[1] == -0.02 && m.vel[0] == 0.1 && m.vel[1] == 0.2 &&
                m.accel[0] == 1.0 && m.accel[1] == 2.0 && m.time == 0.5);
    memset(&r, 0, sizeof r);
    r.force[0] = 1e5;
    r.force[1] = -4e5;
    assert_int_equal(drths_ofr_reply_block(&rx, &r, DRTHS_OFR_FORCE, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 1e5 && d_at(buf, 1) == -4e5 && d_at(buf, 2) == 0.0);
    const double k2[DRTHS_OFR_MAX_DOF] = {1e7, 2e7};
    assert_int_equal(drths_ofr_reply_diagonal(&rx, k2, buf, sizeof buf), 2048);
    assert_true(d_at(buf, 0) == 1e7 && d_at(buf, 1) == 0.0 && d_at(buf, 2) == 0.0 &&
                d_at(buf, 3) == 2e7 && d_at(buf, 4) == 0.0);
    /* More displacements than the wire's blocks hold (DRTHS_OFR_MAX_DOF) are refused with a
     * reason. */
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    const int32_t id9[11] = {9, 9, 9, 0, 1, 0, 0, 0, 9, 0, 256};
    drths_ofr_build_ids(id9, 11, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), -EPROTO);
    assert_int_equal(m.kind, DRTHS_OFR_MSG_ERROR);
    assert_non_null(strstr(m.text, "controls 9 displacements"));
    assert_int_equal(drths_ofr_rx_need(&rx), 0);
}

static void test_errors(void **state)
{
    (void)state;
    drths_ofr_rx_t rx;
    drths_ofr_msg_t m;
    drths_ofr_rx_init(&rx, DRTHS_OFR_SHADOW);
    /* Wrong length: -EINVAL, the state unchanged. */
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 3, &m), -EINVAL);
    /* A big-endian probe (00 00 00 01). */
    const uint8_t be[4] = {0, 0, 0, 1};
    assert_int_equal(drths_ofr_rx_parse(&rx, be, 4, &m), -EPROTO);
    assert_non_null(strstr(m.text, "endianness"));
    /* A setup where open was expected. */
    drths_ofr_rx_init(&rx, DRTHS_OFR_SHADOW);
    rx.state = DRTHS_OFR_ST_OPEN;
    const double setup[2] = {2.0, 256.0};
    drths_ofr_build_vector(setup, 2, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), -EPROTO);
    /* A non-integer action code and a NaN trial. */
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    const int32_t id[11] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 256};
    drths_ofr_build_ids(id, 11, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), 0);
    const double odd[1] = {3.5};
    drths_ofr_build_vector(odd, 1, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), -EPROTO);
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    drths_ofr_build_ids(id, 11, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), 0);
    const double nan_trial[2] = {3.0, NAN};
    drths_ofr_build_vector(nan_trial, 2, 256, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 2048, &m), -EPROTO);
    /* Negative and huge sizes. */
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    const int32_t neg[11] = {1, -1, 0, 0, 0, 1, 0, 0, 1, 0, 256};
    drths_ofr_build_ids(neg, 11, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), -EPROTO);
    drths_ofr_rx_init(&rx, DRTHS_OFR_GENERIC);
    const int32_t huge[11] = {1, 0, 0, 0, 0, 1, 0, 0, 5000, 0, 256};
    drths_ofr_build_ids(huge, 11, buf, sizeof buf);
    assert_int_equal(drths_ofr_rx_parse(&rx, buf, 44, &m), -EPROTO);
}

static void test_detect(void **state)
{
    (void)state;
    const uint8_t one[4] = {1, 0, 0, 0};
    const uint8_t two[4] = {2, 0, 0, 0};
    assert_int_equal(drths_ofr_detect(one, 4, 0), DRTHS_OFR_AUTO);
    assert_int_equal(drths_ofr_detect(one, 4, 1), DRTHS_OFR_SHADOW);
    assert_int_equal(drths_ofr_detect(two, 4, 0), DRTHS_OFR_GENERIC);
    uint8_t id[44] = {1, 0, 0, 0};
    assert_int_equal(drths_ofr_detect(id, 44, 0), DRTHS_OFR_GENERIC);
    assert_int_equal(drths_ofr_detect(one, 3, 1), DRTHS_OFR_AUTO);
    drths_ofr_variant_t v;
    assert_int_equal(drths_ofr_variant_parse("shadow", &v), 0);
    assert_int_equal(v, DRTHS_OFR_SHADOW);
    assert_int_equal(drths_ofr_variant_parse("tcp", &v), -EINVAL);
    assert_string_equal(drths_ofr_variant_name(DRTHS_OFR_GENERIC), "generic");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shadow_session), cmocka_unit_test(test_shadow_large_data_size),
        cmocka_unit_test(test_generic_tcp),    cmocka_unit_test(test_generic_client_element),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
