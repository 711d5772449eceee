#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/platform/rt.h"

static drths_rt_options_t none(void)
{
    drths_rt_options_t o = {.priority = 0, .cpu = -1};
    return o;
}

static void test_nothing_requested(void **state)
{
    (void)state;
    drths_rt_options_t o = none();
    drths_rt_report_t rep;
    assert_int_equal(drths_rt_apply_thread(&o, &rep), 0);
    char line[256];
    const char *expect[] = {"rt: SCHED_FIFO: not requested", "rt: CPU affinity: not requested",
                            "rt: mlockall: not requested",
                            "rt: /dev/cpu_dma_latency: not requested"};
    for (int i = 0; i < DRTHS_RT_NITEMS; i++) {
        assert_int_equal(rep.item[i].status, DRTHS_RT_NOT_REQUESTED);
        drths_rt_report_line(&rep, i, line, sizeof line);
        assert_string_equal(line, expect[i]);
    }
    drths_rt_report_close(&rep);
    drths_rt_report_close(&rep);
    drths_rt_report_t zero;
    memset(&zero, 0, sizeof zero);
    drths_rt_report_close(&zero); /* must not close descriptor 0 */
    assert_true(fcntl(0, F_GETFD) != -1 || errno != EBADF);
}

static void test_invalid_priority(void **state)
{
    (void)state;
    drths_rt_options_t o = none();
    drths_rt_report_t rep;
    char line[256];
    o.priority = 200;
    assert_int_equal(drths_rt_apply_thread(&o, &rep), -EINVAL);
    assert_int_equal(rep.item[DRTHS_RT_ITEM_SCHED].status, DRTHS_RT_INVALID);
    drths_rt_report_line(&rep, DRTHS_RT_ITEM_SCHED, line, sizeof line);
    assert_string_equal(line, "rt: SCHED_FIFO priority 200: invalid (priority must be 1..99 (0 "
                              "leaves the policy unchanged))");
    drths_rt_report_close(&rep);
    o.priority = -5;
    assert_int_equal(drths_rt_apply_thread(&o, &rep), -EINVAL);
    drths_rt_report_close(&rep);
}

static void test_invalid_cpu(void **state)
{
    (void)state;
    drths_rt_options_t o = none();
    drths_rt_report_t rep;
    o.cpu = CPU_SETSIZE + 3;
    assert_int_equal(drths_rt_apply_thread(&o, &rep), -EINVAL);
    assert_int_equal(rep.item[DRTHS_RT_ITEM_AFFINITY].status, DRTHS_RT_INVALID);
    drths_rt_report_close(&rep);
    o.cpu = -2;
    assert_int_equal(drths_rt_apply_thread(&o, &rep), -EINVAL);
    drths_rt_report_close(&rep);
    /* A CPU index the machine does not have (this test machine has far fewer than 1000). */
    o.cpu = 1000;
    assert_int_equal(drths_rt_apply_thread(&o, &rep), -EINVAL);
    assert_int_equal(rep.item[DRTHS_RT_ITEM_AFFINITY].status, DRTHS_RT_INVALID);
    char line[256];
    drths_rt_report_line(&rep, DRTHS_RT_ITEM_AFFINITY, line, sizeof line);
    assert_non_null(strstr(line, "rt: CPU affinity to CPU 1000: invalid (CPU 1000 is not online"));
    drths_rt_report_close(&rep);
}

static void test_invalid_prefault(void **state)
{
    (void)state;
    drths_rt_options_t o = none();
    drths_rt_report_t rep;
    o.lock_memory = 1;
    o.prefault_stack_bytes = (size_t)1 << 40;
    assert_int_equal(drths_rt_apply_thread(&o, &rep), -EINVAL);
    assert_int_equal(rep.item[DRTHS_RT_ITEM_MEMORY].status, DRTHS_RT_INVALID);
    assert_int_equal(rep.locked, 0);
    drths_rt_report_close(&rep);
}

/* Scheduling and affinity are applied in a thread of their own so the test runner's thread is
 * left as it was. Whether SCHED_FIFO is permitted depends on the machine; what must hold either
 * way is that the report and the return code agree with `require`. */
typedef struct sched_case {
    int require;
    int rc;
    drths_rt_report_t rep;
    int cpu;
    int policy;
} sched_case_t;

static void *sched_thread(void *arg)
{
    sched_case_t *c = arg;
    drths_rt_options_t o = none();
    o.priority = 10;
    o.cpu = c->cpu;
    o.require = c->require;
    c->rc = drths_rt_apply_thread(&o, &c->rep);
    struct sched_param sp;
    pthread_getschedparam(pthread_self(), &c->policy, &sp);
    return NULL;
}

static void test_sched_and_affinity_consistent(void **state)
{
    (void)state;
    cpu_set_t mine;
    assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
    int cpu = 0;
    while (!CPU_ISSET((size_t)cpu, &mine))
        cpu++;
    for (int require = 0; require <= 1; require++) {
        sched_case_t c = {.require = require, .cpu = cpu};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, sched_thread, &c), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        drths_rt_item_t *s = &c.rep.item[DRTHS_RT_ITEM_SCHED];
        /* Pinning a thread to a CPU this process already runs on is always allowed. */
        assert_int_equal(c.rep.item[DRTHS_RT_ITEM_AFFINITY].status, DRTHS_RT_APPLIED);
        if (s->status == DRTHS_RT_APPLIED) {
            assert_int_equal(c.rc, 0);
            assert_int_equal(c.policy, SCHED_FIFO);
        } else {
            assert_int_equal(s->status, DRTHS_RT_NOT_PERMITTED);
            assert_int_equal(c.rc, require ? s->err : 0);
            assert_true(s->err < 0);
            assert_true(strlen(s->detail) > 0);
        }
        char line[256];
        drths_rt_report_line(&c.rep, DRTHS_RT_ITEM_SCHED, line, sizeof line);
        print_message("require=%d: %s\n", require, line);
        drths_rt_report_close(&c.rep);
    }
}

static void test_report_lines(void **state)
{
    (void)state;
    drths_rt_report_t rep;
    memset(&rep, 0, sizeof rep);
    rep.dma_fd = -1;
    drths_rt_item_t *it = &rep.item[DRTHS_RT_ITEM_MEMORY];
    snprintf(it->what, sizeof it->what, "mlockall + 256 KiB stack prefault");
    it->status = DRTHS_RT_NOT_PERMITTED;
    it->err = -ENOMEM;
    snprintf(it->detail, sizeof it->detail, "Cannot allocate memory; RLIMIT_MEMLOCK is 64 KiB");
    char line[256];
    drths_rt_report_line(&rep, DRTHS_RT_ITEM_MEMORY, line, sizeof line);
    assert_string_equal(line, "rt: mlockall + 256 KiB stack prefault: not permitted (Cannot "
                              "allocate memory; RLIMIT_MEMLOCK is 64 KiB); continuing without it");
    rep.require = 1;
    drths_rt_report_line(&rep, DRTHS_RT_ITEM_MEMORY, line, sizeof line);
    assert_non_null(strstr(line, "); real time is required, stopping"));
    assert_string_equal(drths_rt_status_name(DRTHS_RT_APPLIED), "applied");
}

static void test_dma_latency_file(void **state)
{
    (void)state;
    /* A regular file stands in for the device, so the test does not change the machine's power
     * management. */
    char path[] = "/tmp/drths-test-dma-XXXXXX";
    int tmp = mkstemp(path);
    assert_true(tmp >= 0);
    close(tmp);
    int fd = drths_rt_open_dma_latency(path, 0);
    assert_true(fd >= 0);
    close(fd);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    int32_t v = -1;
    assert_int_equal(fread(&v, sizeof v, 1, f), 1);
    assert_int_equal(v, 0);
    assert_int_equal(fgetc(f), EOF); /* exactly 4 bytes, binary */
    fclose(f);
    unlink(path);
    assert_int_equal(drths_rt_open_dma_latency("/nonexistent/drths/cpu_dma_latency", 0),
                     -ENOENT);
}

static void test_lock_memory(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* mlockall would try to lock the sanitizers' huge shadow mappings. */
    skip();
#else
    int r = drths_rt_lock_memory(64 * 1024);
    assert_true(r == 0 || r == -EPERM || r == -ENOMEM || r == -EAGAIN);
    print_message("mlockall + 64 KiB prefault: %s\n", r == 0 ? "applied" : strerror(-r));
    if (r == 0)
        munlockall();
    assert_int_equal(drths_rt_lock_memory((size_t)1 << 40), -EINVAL);
#endif
}

/* drths_rt_thread_create: the thread runs on a DRTHS_RT_STACK_BYTES stack, big enough for the
 * default stack prefault (at most half the stack, drths_rt_lock_memory's own check). */
static void *stack_probe(void *arg)
{
    size_t *size = arg;
    pthread_attr_t attr;
    void *addr;
    *size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, size);
        pthread_attr_destroy(&attr);
    }
    return NULL;
}

static void test_thread_stack(void **state)
{
    (void)state;
    pthread_t t;
    size_t size = 1;
    assert_int_equal(drths_rt_thread_create(&t, stack_probe, &size), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(size >= DRTHS_RT_STACK_BYTES && size < DRTHS_RT_STACK_BYTES + (64u << 10));
    drths_rt_options_t o;
    drths_rt_options_default(&o);
    assert_true(o.prefault_stack_bytes <= DRTHS_RT_STACK_BYTES / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_stack),
        cmocka_unit_test(test_nothing_requested),
        cmocka_unit_test(test_invalid_priority),
        cmocka_unit_test(test_invalid_cpu),
        cmocka_unit_test(test_invalid_prefault),
        cmocka_unit_test(test_sched_and_affinity_consistent),
        cmocka_unit_test(test_report_lines),
        cmocka_unit_test(test_dma_latency_file),
        cmocka_unit_test(test_lock_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
