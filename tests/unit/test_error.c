#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include "common/platform/error.h"

static void test_set_and_prefix(void **state)
{
    (void)state;
    drths_error_t err;
    assert_int_equal(drths_error_set(&err, -EINVAL, "field %s: bad", "rate_hz"), -EINVAL);
    assert_string_equal(err.msg, "field rate_hz: bad");
    assert_int_equal(drths_error_prefix(&err, -EINVAL, "%s:%d", "x.yaml", 3), -EINVAL);
    assert_string_equal(err.msg, "x.yaml:3: field rate_hz: bad");
    assert_int_equal(drths_error_set(NULL, -ENOMEM, "ignored"), -ENOMEM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_set_and_prefix)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
