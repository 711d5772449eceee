#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "common/platform/ring.h"

/* A record the consumer can check: the sequence number and a value derived from it, so a torn
 * or stale copy is detected, not only a wrong order. */
typedef struct rec {
    uint64_t seq;
    uint64_t check;
    uint32_t pad[6];
} rec_t;

static uint64_t check_of(uint64_t seq)
{
    return seq * 0x9E3779B97F4A7C15ull ^ 0x5555;
}

static void make(rec_t *r, uint64_t seq)
{
    r->seq = seq;
    r->check = check_of(seq);
    for (int i = 0; i < 6; i++)
        r->pad[i] = (uint32_t)(seq + (uint64_t)i);
}

static int valid(const rec_t *r)
{
    if (r->check != check_of(r->seq))
        return 0;
    for (int i = 0; i < 6; i++)
        if (r->pad[i] != (uint32_t)(r->seq + (uint64_t)i))
            return 0;
    return 1;
}

static void test_init_and_edges(void **state)
{
    (void)state;
    drths_ring_t r;
    assert_int_equal(drths_ring_init(&r, 0, 8), -EINVAL);
    assert_int_equal(drths_ring_init(&r, 8, 0), -EINVAL);
    assert_int_equal(drths_ring_init(&r, 8, ((size_t)1 << 30) + 1), -EINVAL);
    drths_ring_close(&r); /* a failed init leaves a closable struct */

    assert_int_equal(drths_ring_init(&r, sizeof(rec_t), 5), 0);
    assert_int_equal(drths_ring_capacity(&r), 8); /* rounded up to a power of two */
    rec_t in, out;
    assert_int_equal(drths_ring_pop(&r, &out), -EAGAIN);
    assert_int_equal(drths_ring_count(&r), 0);
    for (uint64_t i = 0; i < 8; i++) {
        make(&in, i);
        assert_int_equal(drths_ring_push(&r, &in), 0);
    }
    assert_int_equal(drths_ring_count(&r), 8);
    make(&in, 8);
    assert_int_equal(drths_ring_push(&r, &in), -ENOBUFS);
    assert_int_equal(drths_ring_push(&r, &in), -ENOBUFS);
    assert_int_equal(drths_ring_dropped(&r), 2);
    assert_int_equal(drths_ring_pop(&r, &out), 0);
    assert_int_equal(out.seq, 0);
    assert_int_equal(drths_ring_push(&r, &in), 0); /* one slot freed, one record fits */
    assert_int_equal(drths_ring_push(&r, &in), -ENOBUFS);
    assert_int_equal(drths_ring_dropped(&r), 3);
    for (uint64_t i = 1; i <= 8; i++) {
        assert_int_equal(drths_ring_pop(&r, &out), 0);
        assert_int_equal(out.seq, i);
        assert_true(valid(&out));
    }
    assert_int_equal(drths_ring_pop(&r, &out), -EAGAIN);
    assert_int_equal(drths_ring_count(&r), 0);
    drths_ring_close(&r);
    drths_ring_close(&r); /* safe twice */
}

static void test_single_thread_wrap(void **state)
{
    (void)state;
    drths_ring_t r;
    assert_int_equal(drths_ring_init(&r, sizeof(rec_t), 4), 0);
    /* Varying fill levels across many wraps of the 4-slot ring. */
    uint64_t next_in = 0, next_out = 0;
    for (int round = 0; round < 10000; round++) {
        int n = 1 + round % 4;
        for (int k = 0; k < n; k++) {
            rec_t in;
            make(&in, next_in++);
            assert_int_equal(drths_ring_push(&r, &in), 0);
        }
        for (int k = 0; k < n; k++) {
            rec_t out;
            assert_int_equal(drths_ring_pop(&r, &out), 0);
            assert_int_equal(out.seq, next_out++);
            assert_true(valid(&out));
        }
    }
    assert_int_equal(next_out, 25000);
    assert_int_equal(drths_ring_dropped(&r), 0);
    drths_ring_close(&r);
}

/* ---- Two threads -------------------------------------------------------------------------- */

typedef struct run {
    drths_ring_t ring;
    uint64_t n;       /* records to produce */
    int retry;        /* producer retries a full ring (1) or drops (0) */
    uint64_t full;    /* producer: pushes refused */
    uint64_t received;
    uint64_t bad;     /* consumer: out-of-order, duplicated or torn records */
    _Atomic int done; /* producer finished */
} run_t;

static void *producer(void *arg)
{
    run_t *run = arg;
    for (uint64_t i = 0; i < run->n; i++) {
        rec_t in;
        make(&in, i);
        while (drths_ring_push(&run->ring, &in) == -ENOBUFS) {
            run->full++;
            if (!run->retry)
                break;
            sched_yield();
        }
    }
    atomic_store(&run->done, 1);
    return NULL;
}

static void *consumer(void *arg)
{
    run_t *run = arg;
    uint64_t expect = 0;
    for (;;) {
        rec_t out;
        if (drths_ring_pop(&run->ring, &out) == 0) {
            /* With retries every record arrives in order; with drops the sequence only grows. */
            if (!valid(&out) || (run->retry ? out.seq != expect : out.seq < expect))
                run->bad++;
            expect = out.seq + 1;
            run->received++;
        } else if (atomic_load(&run->done)) {
            /* The producer's last push happens before done is set, so one more pass drains
             * everything that was pushed. */
            if (drths_ring_pop(&run->ring, &out) == 0) {
                if (!valid(&out) || out.seq < expect)
                    run->bad++;
                expect = out.seq + 1;
                run->received++;
                continue;
            }
            break;
        } else {
            sched_yield();
        }
    }
    return NULL;
}

static void run_threads(run_t *run)
{
    pthread_t p, c;
    atomic_init(&run->done, 0);
    assert_int_equal(pthread_create(&c, NULL, consumer, run), 0);
    assert_int_equal(pthread_create(&p, NULL, producer, run), 0);
    assert_int_equal(pthread_join(p, NULL), 0);
    assert_int_equal(pthread_join(c, NULL), 0);
}

static void test_threads_capacity_suffices(void **state)
{
    (void)state;
    static run_t run;
    memset(&run, 0, sizeof run);
    run.n = 1000000;
    run.retry = 0;
    assert_int_equal(drths_ring_init(&run.ring, sizeof(rec_t), (size_t)run.n), 0);
    run_threads(&run);
    assert_int_equal(run.full, 0);
    assert_int_equal(drths_ring_dropped(&run.ring), 0);
    assert_int_equal(run.received, run.n);
    assert_int_equal(run.bad, 0);
    drths_ring_close(&run.ring);
}

static void test_threads_small_ring_retry(void **state)
{
    (void)state;
    static run_t run;
    memset(&run, 0, sizeof run);
    run.n = 3000000;
    run.retry = 1;
    assert_int_equal(drths_ring_init(&run.ring, sizeof(rec_t), 64), 0);
    run_threads(&run);
    assert_int_equal(run.received, run.n); /* nothing lost, in order, not torn */
    assert_int_equal(run.bad, 0);
    assert_int_equal(drths_ring_dropped(&run.ring), run.full); /* every refusal counted */
    assert_int_equal(drths_ring_count(&run.ring), 0);
    drths_ring_close(&run.ring);
}

static void test_threads_lossy(void **state)
{
    (void)state;
    static run_t run;
    memset(&run, 0, sizeof run);
    run.n = 3000000;
    run.retry = 0;
    assert_int_equal(drths_ring_init(&run.ring, sizeof(rec_t), 16), 0);
    run_threads(&run);
    assert_int_equal(run.bad, 0);
    /* Every record is either received or counted as dropped. */
    assert_int_equal(run.received + drths_ring_dropped(&run.ring), run.n);
    assert_int_equal(drths_ring_dropped(&run.ring), run.full);
    print_message("lossy ring: %llu received, %llu dropped of %llu\n",
                  (unsigned long long)run.received,
                  (unsigned long long)drths_ring_dropped(&run.ring), (unsigned long long)run.n);
    drths_ring_close(&run.ring);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_edges),
        cmocka_unit_test(test_single_thread_wrap),
        cmocka_unit_test(test_threads_capacity_suffices),
        cmocka_unit_test(test_threads_small_ring_retry),
        cmocka_unit_test(test_threads_lossy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
