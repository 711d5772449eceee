/* site-physical/hold_cause.h: the sentences the main thread writes from the causes the RT thread
 * fills (the same as the RT thread formatted before), their cut at the ABORT's text size, and
 * the ABORT's fixed texts. The actuator's own tests check the sentences of real HOLDs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "site-physical/actuator.h"
#include "site-physical/hold_cause.h"

static char buf[DRTHS_WIRE_MAX_TEXT + 64];

static const char *describe(const drths_hold_cause_t *c)
{
    drths_hold_cause_describe(c, buf, sizeof buf);
    return buf;
}

static void test_sentences(void **state)
{
    (void)state;
    drths_hold_cause_t c;
    drths_hold_cause_init(&c, DRTHS_HOLD_PREVIEW);
    c.tick = 1234;
    c.v[0] = 0.123456789;
    c.v[1] = 0.1;
    assert_string_equal(describe(&c),
                        "displacement limit: command 0.123457 m for tick 1234 exceeds 0.1 m");
    drths_hold_cause_init(&c, DRTHS_HOLD_STALL);
    c.tick = 77;
    c.v[0] = 12.34;
    c.v[1] = 5;
    assert_string_equal(describe(&c), "stall: tick 77 woke 12.3 ms after its deadline "
                                      "(physical.max_tick_late_ms 5); the missed ticks are not "
                                      "played");
    drths_hold_cause_init(&c, DRTHS_HOLD_ARRIVAL);
    c.sub = DRTHS_HOLD_ARRIVAL_STEP;
    c.tick = 30;
    c.n[0] = 1;
    c.v[0] = 0.004;
    c.v[1] = 0.8;
    c.v[2] = 0.5;
    assert_string_equal(describe(&c), "command for tick 30 refused on arrival: it moves 4 mm to "
                                      "tick 31, a velocity of 0.8 m/s beyond limit_velocity_m_s "
                                      "0.5 m/s");
    c.n[0] = 0;
    assert_non_null(strstr(describe(&c), "4 mm from tick 29"));
    drths_hold_cause_init(&c, DRTHS_HOLD_DAQ);
    c.sub = DRTHS_HOLD_DAQ_READ;
    c.n[0] = -5; /* EIO */
    assert_string_equal(describe(&c), "DAQ read failed (Input/output error)");
    /* With the channel the DAQ recorded (issue 29: the HOLD reason names it), and on the comedi
     * back end its subdevice, channel and range and the call. */
    c.n[1] = 1 + 2; /* displacement_in */
    assert_string_equal(describe(&c), "DAQ read failed: displacement_in: Input/output error");
    c.n[2] = 1;
    c.v[0] = 0;
    c.v[1] = 3;
    c.v[2] = 1;
    drths_scopy(c.text, sizeof c.text, "comedi_data_read");
    assert_string_equal(describe(&c), "DAQ read failed: displacement_in (subdevice 0, channel 3, "
                                      "range 1): comedi_data_read: Input/output error");
    drths_hold_cause_init(&c, DRTHS_HOLD_SATURATED);
    c.sub = 1;
    c.v[0] = 250e3;
    assert_non_null(strstr(describe(&c), "measured force reads 250 kN on force_in"));
    drths_hold_cause_init(&c, DRTHS_HOLD_STABILITY);
    c.sub = 1;
    c.v[0] = 3.14;
    c.v[1] = 12.4;
    c.v[2] = 0.8;
    c.v[3] = 0.0021;
    assert_string_equal(describe(&c), "stability: oscillation at 3.1 Hz not decaying after the "
                                      "record's end (+12 %/s over 0.8 s); amplitude 2.1 mm");
    drths_hold_cause_init(&c, DRTHS_HOLD_PEER_ABORT);
    c.sub = DRTHS_STOP_SIGNAL;
    strcpy(c.text, "interrupted");
    assert_string_equal(describe(&c), "numerical site aborted: SIGNAL: interrupted");
    c.text[0] = '\0';
    assert_string_equal(describe(&c), "numerical site aborted: SIGNAL");
}

/* The sentence is cut where the ABORT's text field cut it, whatever the buffer. */
static void test_cut_to_the_text_size(void **state)
{
    (void)state;
    drths_hold_cause_t c;
    drths_hold_cause_init(&c, DRTHS_HOLD_PEER_ABORT);
    c.sub = DRTHS_STOP_HOLD;
    memset(c.text, 'x', DRTHS_WIRE_MAX_TEXT);
    c.text[DRTHS_WIRE_MAX_TEXT] = '\0';
    assert_int_equal(drths_hold_cause_describe(&c, buf, sizeof buf), DRTHS_WIRE_MAX_TEXT);
    assert_int_equal(strlen(buf), DRTHS_WIRE_MAX_TEXT);
    char small[10];
    assert_int_equal(drths_hold_cause_describe(&c, small, sizeof small), 9);
    assert_string_equal(small, "numerical");
    drths_hold_cause_text(&c, "stopped by signal");
    assert_string_equal(describe(&c), "stopped by signal");
}

/* Every kind's ABORT text is a fixed sentence without values (the RT thread formats nothing),
 * or the cause's own text. */
static void test_abort_texts(void **state)
{
    (void)state;
    drths_hold_cause_t c;
    for (int k = DRTHS_HOLD_DISPLACEMENT; k < DRTHS_HOLD_KIND_COUNT; k++) {
        for (int sub = 0; sub < 5; sub++) {
            drths_hold_cause_init(&c, (drths_hold_kind_t)k);
            c.sub = sub;
            c.envelope.bound = (drths_envelope_bound_t)(sub + 1);
            const char *t = drths_hold_cause_abort_text(&c);
            assert_true(strlen(t) > 10 && strlen(t) <= DRTHS_WIRE_MAX_TEXT);
            /* No value: a digit only inside a name (limit_drive_acceleration_m_s2). */
            for (const char *d = t; (d = strpbrk(d, "0123456789")) != NULL; d++)
                assert_true(d > t && (d[-1] == '_' || (d[-1] >= 'a' && d[-1] <= 'z')));
        }
    }
    drths_hold_cause_text(&c, "stopped from the monitor");
    assert_string_equal(drths_hold_cause_abort_text(&c), "stopped from the monitor");
    drths_hold_cause_init(&c, DRTHS_HOLD_FORCE);
    assert_string_equal(drths_hold_cause_abort_text(&c),
                        "force limit: the measured force exceeds physical.limit_force_N");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sentences),
        cmocka_unit_test(test_cut_to_the_text_size),
        cmocka_unit_test(test_abort_texts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
