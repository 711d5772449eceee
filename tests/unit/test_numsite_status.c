/* The numerical site's status line (drths_numsite_status_text, site-numerical/summary.c): one
 * link as always; several links each by site with its own round trip and concealed feedback
 * (link 0 alone hid the far lab); a line longer than the buffer is cut, never overrun. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "site-numerical/hybrid.h"
#include "site-numerical/numsite.h"
#include "site-numerical/summary.h"

static drths_hybrid_t h;                          /* large: static */
static drths_numsite_t s[DRTHS_HYBRID_MAX_LINKS]; /* as drths_numapp_t holds them */

static void publish(int i, int64_t rtt_ns, uint64_t concealed)
{
    atomic_store(&s[i].pub_rtt_ns, rtt_ns);
    atomic_store(&s[i].pub_link_concealed, concealed);
}

static void test_one_link(void **state)
{
    (void)state;
    h.ns.steps = 1000;
    atomic_store(&s[0].pub_step, 500);
    atomic_store(&s[0].pub_concealed, 7);
    publish(0, 1500000, 7);
    char buf[300];
    int n = drths_numsite_status_text(s, 1, &h, buf, sizeof buf);
    assert_string_equal(buf, "  step 500 of 1000 (50 %), concealed 7, rtt 1.500 ms   ");
    assert_int_equal(n, (int)strlen(buf));
}

static void test_every_link(void **state)
{
    (void)state;
    h.ns.steps = 1000;
    atomic_store(&s[0].pub_step, 250);
    atomic_store(&s[0].pub_concealed, 9);
    snprintf(s[0].name, sizeof s[0].name, "labA");
    snprintf(s[1].name, sizeof s[1].name, "labB");
    snprintf(s[2].name, sizeof s[2].name, "labC");
    publish(0, 1500000, 3);
    publish(1, 12250000, 4);
    publish(2, 200123456, 2);
    char buf[300];
    int n = drths_numsite_status_text(s, 3, &h, buf, sizeof buf);
    assert_string_equal(buf, "  step 250 of 1000 (25 %), concealed 9: labA 1.500 ms 3, labB "
                             "12.250 ms 4, labC 200.123 ms 2   ");
    assert_int_equal(n, (int)strlen(buf));
}

/* Eight links into a short buffer: cut at its end, the length what was written. */
static void test_cut(void **state)
{
    (void)state;
    h.ns.steps = 100000;
    atomic_store(&s[0].pub_step, 99999);
    for (int i = 0; i < DRTHS_HYBRID_MAX_LINKS; i++) {
        snprintf(s[i].name, sizeof s[i].name, "laboratory-%d", i);
        publish(i, 123456789, 123456);
    }
    char buf[64];
    memset(buf, 'x', sizeof buf);
    int n = drths_numsite_status_text(s, DRTHS_HYBRID_MAX_LINKS, &h, buf, 48);
    assert_int_equal(n, 47);
    assert_int_equal(buf[47], '\0');
    assert_int_equal(buf[48], 'x'); /* nothing beyond the cap */
    assert_int_equal(strncmp(buf, "  step 99999 of 100000", 22), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_link),
        cmocka_unit_test(test_every_link),
        cmocka_unit_test(test_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
