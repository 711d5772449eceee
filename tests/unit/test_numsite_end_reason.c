/* The numerical site's exit reason (drths_numsite_end_reason, site-numerical/summary.c): each
 * way a run ends gives its sentence and exit code; a run its records ended is a signal end that
 * told the actuator site ABORT RECORDS, and only that end says "records". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <string.h>

#include "common/platform/cli.h"
#include "site-numerical/hybrid.h"
#include "site-numerical/summary.h"

static drths_hybrid_t h; /* large: static, zeroed per test */

static const char *reason(int by_monitor, int *code)
{
    static char out[600];
    *code = drths_numsite_end_reason(&h, by_monitor, 2.0, out, sizeof out);
    return out;
}

static void test_records_signal_and_monitor(void **state)
{
    (void)state;
    int code = -1;
    memset(&h, 0, sizeof h);
    h.end = DRTHS_HYBRID_END_OF_RECORD;
    assert_string_equal(reason(0, &code), "end of record");
    assert_int_equal(code, 0);

    h.end = DRTHS_HYBRID_SIGNAL;
    h.close_reason = DRTHS_STOP_RECORDS;
    strcpy(h.end_text, "writing numerical.bin failed at row 12 (File too large)");
    assert_string_equal(reason(0, &code), "records: writing numerical.bin failed at row 12 (File "
                                          "too large) (the actuator site was told: ABORT "
                                          "RECORDS)");
    assert_int_equal(code, DRTHS_EXIT_FAILED);
    /* The monitor's stop does not hide that the records ended the run. */
    assert_non_null(strstr(reason(1, &code), "ABORT RECORDS"));

    h.close_reason = DRTHS_STOP_SIGNAL;
    assert_string_equal(reason(0, &code), "stopped by signal");
    assert_int_equal(code, DRTHS_EXIT_FAILED);
    assert_string_equal(reason(1, &code), "stopped from the monitor");

    /* A run still running when the loop stopped is a stop, whatever reason a CLOSE holds. */
    h.end = DRTHS_HYBRID_RUNNING;
    h.close_reason = DRTHS_STOP_RECORDS;
    assert_string_equal(reason(0, &code), "stopped by signal");
    assert_int_equal(code, DRTHS_EXIT_FAILED);

    h.end = DRTHS_HYBRID_STABILITY;
    strcpy(h.end_text, "stability: growing");
    assert_string_equal(reason(0, &code), "stability: growing");
    assert_int_equal(code, DRTHS_EXIT_FAILED);
}

/* With several links the sentence names the site whose end ended the run, and its own counters
 * say what was seen of it (a link lost after the sites' watchdog, not --peer-timeout). */
static void test_several_links_name_the_site(void **state)
{
    (void)state;
    int code = -1;
    static drths_hybrid_link_t lk[2];
    memset(&h, 0, sizeof h);
    memset(lk, 0, sizeof lk);
    strcpy(lk[0].name, "labA");
    strcpy(lk[1].name, "labB");
    lk[1].fb_newest_tick = 5918;
    h.lk = lk;
    h.n_links = 2;
    h.p.peer_timeout_ns = 1000000000;
    h.p.link_timeout_ns = 100000000;
    h.end_link = 1;
    h.end = DRTHS_HYBRID_PEER_LOST;
    const char *r = reason(0, &code);
    assert_int_equal(code, DRTHS_EXIT_FAILED);
    assert_non_null(strstr(r, "site labB stopped the test (every other site was sent ABORT): "
                              "peer lost: no valid datagram from the actuator site for 0.1 s "
                              "after its FEEDBACK for tick 5918"));

    h.end = DRTHS_HYBRID_PEER_ABORT;
    h.end_reason = DRTHS_STOP_HOLD;
    strcpy(h.end_text, "force limit");
    assert_string_equal(reason(0, &code), "site labB stopped the test (every other site was sent "
                                          "ABORT): actuator site aborted: HOLD: force limit");
    /* The end of the record is nobody's. */
    h.end = DRTHS_HYBRID_END_OF_RECORD;
    assert_string_equal(reason(0, &code), "end of record");
    assert_int_equal(code, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_signal_and_monitor),
        cmocka_unit_test(test_several_links_name_the_site),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
