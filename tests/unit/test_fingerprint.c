/* protocol/fingerprint.h's handshake checks on hand-made HELLOs: drths_hello_section_diff and
 * drths_hello_mismatch, the sentence each site's ABORT carries when the peer's HELLO (at the
 * actuator site) or HELLO_ACK (at the numerical site) does not match, pinned word for word:
 * operators read them, and tests/integration/test_mismatch.sh and drths-conform look for them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/fingerprint.h"

/* A HELLO as drths_hello_init fills it for the default experiment (5 kHz, one channel, R 3,
 * SI, version 2, three sections), with a recognisable fingerprint: 00 11 22 .. */
static void hello(drths_msg_hello_t *h, drths_role_t role)
{
    memset(h, 0, sizeof *h);
    h->proto_min = h->proto_max = 2;
    h->role = (uint8_t)role;
    h->version = role == DRTHS_ROLE_PHYSICAL ? 2 : 0; /* a HELLO_ACK names the version chosen */
    h->rate_hz = 5000;
    h->n_channels = 1;
    h->r = 3;
    for (int k = 0; k < h->r; k++)
        h->offsets[k] = (uint16_t)k;
    snprintf(h->units, sizeof h->units, "SI");
    for (int i = 0; i < DRTHS_FINGERPRINT_BYTES; i++)
        h->fingerprint[i] = (uint8_t)(0x11 * (i % 16));
    static const char *const names[] = {"name", "structure", "specimen"};
    h->n_sections = 3;
    for (int i = 0; i < 3; i++) {
        snprintf(h->sections[i].name, sizeof h->sections[i].name, "%s", names[i]);
        memset(h->sections[i].hash, i + 1, DRTHS_WIRE_SECTION_HASH);
    }
}

/* Checks the reason and the exact sentence of drths_hello_mismatch(ours, theirs). */
static void expect(const drths_msg_hello_t *ours, const drths_msg_hello_t *theirs, int reason,
                   const char *text)
{
    char out[DRTHS_WIRE_MAX_TEXT + 1];
    memset(out, 'x', sizeof out);
    assert_int_equal(drths_hello_mismatch(ours, theirs, out, sizeof out), reason);
    assert_string_equal(out, text);
}

static void test_section_diff(void **state)
{
    (void)state;
    drths_msg_hello_t a, b;
    hello(&a, DRTHS_ROLE_PHYSICAL);
    hello(&b, DRTHS_ROLE_NUMERICAL);
    char diff[96];
    assert_int_equal(drths_hello_section_diff(&a, &b, diff, sizeof diff), 0);
    assert_string_equal(diff, "");
    /* Another hash, and a section only one side lists: each named once, a's order first. */
    b.sections[2].hash[0] ^= 0xff;
    snprintf(b.sections[1].name, sizeof b.sections[1].name, "control");
    assert_int_equal(drths_hello_section_diff(&a, &b, diff, sizeof diff), 3);
    assert_string_equal(diff, "structure, specimen, control");
    /* A peer that lists no sections: nothing can be named. */
    b.n_sections = 0;
    assert_int_equal(drths_hello_section_diff(&a, &b, diff, sizeof diff), 0);
    assert_string_equal(diff, "");
}

static void test_matching_hellos(void **state)
{
    (void)state;
    drths_msg_hello_t phys, num;
    hello(&phys, DRTHS_ROLE_PHYSICAL);
    hello(&num, DRTHS_ROLE_NUMERICAL);
    expect(&phys, &num, 0, "");
    expect(&num, &phys, 0, "");
    /* The site names differ between the two sites and are not compared. */
    snprintf(num.site, sizeof num.site, "lab-b");
    expect(&phys, &num, 0, "");
}

/* The actuator site checks the numerical site's HELLO. */
static void test_actuator_checks_hello(void **state)
{
    (void)state;
    drths_msg_hello_t o, t;
    hello(&o, DRTHS_ROLE_PHYSICAL);

    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.proto_min = 3;
    t.proto_max = 4;
    t.fingerprint[0] ^= 0xff; /* the versions are checked first */
    expect(&o, &t, DRTHS_STOP_VERSION_MISMATCH,
           "no common protocol version: numerical site speaks 3..4, actuator site 2..2");
    t.proto_min = 1; /* a range that includes ours is enough */
    assert_int_equal(drths_hello_mismatch(&o, &t, NULL, 0), DRTHS_STOP_FINGERPRINT_MISMATCH);

    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.fingerprint[1] = 0xab;
    t.sections[2].hash[0] ^= 0xff;
    t.rate_hz = 1000; /* the fingerprint comes before the set-up */
    expect(&o, &t, DRTHS_STOP_FINGERPRINT_MISMATCH,
           "experiment differs in specimen: actuator 0011223344556677.. "
           "numerical 00ab223344556677..");
    t.n_sections = 0;
    expect(&o, &t, DRTHS_STOP_FINGERPRINT_MISMATCH,
           "experiment differs in (sections unknown): actuator 0011223344556677.. "
           "numerical 00ab223344556677..");

    /* The set-up: the first field that differs, in its own sentence, this site first. */
    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.rate_hz = 1000;
    snprintf(t.units, sizeof t.units, "mm");
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH,
           "tick rate differs: actuator site 5000 Hz, numerical site 1000 Hz");
    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.n_channels = 2;
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH,
           "channel count differs: actuator site 1, numerical site 2");
    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.r = 2;
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH,
           "redundancy differs: actuator site R 3, numerical site R 2 (or other offsets)");
    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.offsets[2] = 5;
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH,
           "redundancy differs: actuator site R 3, numerical site R 3 (or other offsets)");
    hello(&t, DRTHS_ROLE_NUMERICAL);
    snprintf(t.units, sizeof t.units, "mm");
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH, "units differ: actuator site SI, numerical site mm");
    /* The link index is the numerical site's to choose: a HELLO's is not compared. */
    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.link = 3;
    expect(&o, &t, 0, "");
}

/* The numerical site checks the actuator site's HELLO_ACK. */
static void test_numerical_checks_ack(void **state)
{
    (void)state;
    drths_msg_hello_t o, t;
    hello(&o, DRTHS_ROLE_NUMERICAL);

    hello(&t, DRTHS_ROLE_PHYSICAL);
    t.version = 3; /* outside our 2..2, whatever range the ACK itself lists */
    t.fingerprint[0] ^= 0xff;
    expect(&o, &t, DRTHS_STOP_VERSION_MISMATCH,
           "protocol version differs: numerical site speaks 2..2, actuator site chose 3");

    hello(&t, DRTHS_ROLE_PHYSICAL);
    t.fingerprint[1] = 0xab;
    t.sections[0].hash[0] ^= 0xff;
    t.sections[1].hash[0] ^= 0xff;
    expect(&o, &t, DRTHS_STOP_FINGERPRINT_MISMATCH,
           "experiment differs in name, structure: numerical 0011223344556677.. "
           "actuator 00ab223344556677..");

    /* The set-up, the echoed link index included, named together in one sentence. */
    static const char both[] =
        "configuration differs: numerical site 5000 Hz, 1 channel(s), R 3, SI, link 0; "
        "actuator site %g Hz, %u channel(s), R %u, %s, link %u";
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    hello(&t, DRTHS_ROLE_PHYSICAL);
    t.link = 1;
    snprintf(text, sizeof text, both, 5000.0, 1u, 3u, "SI", 1u);
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH, text);
    hello(&t, DRTHS_ROLE_PHYSICAL);
    t.rate_hz = 1000;
    t.n_channels = 2;
    t.r = 2;
    snprintf(t.units, sizeof t.units, "mm");
    snprintf(text, sizeof text, both, 1000.0, 2u, 2u, "mm", 0u);
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH, text);
    hello(&t, DRTHS_ROLE_PHYSICAL);
    t.offsets[1] = 4; /* the same R with other offsets: the sentence cannot show it */
    snprintf(text, sizeof text, both, 5000.0, 1u, 3u, "SI", 0u);
    expect(&o, &t, DRTHS_STOP_CONFIG_MISMATCH, text);
}

/* A short buffer truncates the sentence, never the verdict. */
static void test_short_buffer(void **state)
{
    (void)state;
    drths_msg_hello_t o, t;
    hello(&o, DRTHS_ROLE_PHYSICAL);
    hello(&t, DRTHS_ROLE_NUMERICAL);
    t.rate_hz = 1000;
    char text[10];
    assert_int_equal(drths_hello_mismatch(&o, &t, text, sizeof text), DRTHS_STOP_CONFIG_MISMATCH);
    assert_string_equal(text, "tick rate");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_section_diff),
        cmocka_unit_test(test_matching_hellos),
        cmocka_unit_test(test_actuator_checks_hello),
        cmocka_unit_test(test_numerical_checks_ack),
        cmocka_unit_test(test_short_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
