/* Zero heap allocations in both nodes' steady state (nothing allocates after activation): the
 * numerical site's hybrid loop (site-numerical/hybrid.h) and the actuator site's state machine
 * (site-physical/actuator.h, virtual DAQ and specimen) run against each other in virtual time for
 * thousands of ticks, every message going through the real codec (drths_wire_seal and
 * drths_wire_open, both directions) and every row through drths_recorder_push, as on the two RT
 * threads. The test binary interposes malloc, calloc, realloc and free and counts them over 10000
 * ticks after a 2000-tick warm-up; the recorder's drain (the libuv thread's job: it formats and
 * writes the CSV) runs outside the counted calls. The loop's step timing (steptime.h) is kept
 * as drths_numsite_run_links keeps it. With one, two and three links. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config/setup.h"
#include "common/platform/recorder.h"
#include "protocol/crypto.h"
#include "protocol/wire.h"
#include "site-numerical/hybrid.h"
#include "site-numerical/steptime.h"
#include "site-physical/actuator.h"
#include "site-physical/daq.h"

#include "alloc_count.h"

#define LOOP_L 25
#define QCAP 256
#define WARM_TICKS 2000
#define COUNT_TICKS 10000
#define ONE_WAY_NS 1000000 /* 1 ms each way */

typedef struct dgram {
    int64_t t;
    size_t len;
    uint8_t b[DRTHS_WIRE_MAX_DATAGRAM];
} dgram_t;

typedef struct queue {
    dgram_t q[QCAP];
    size_t head, n;
} queue_t;

static void q_push(queue_t *q, drths_wire_tx_t *tx, const drths_msg_t *m, int64_t t)
{
    assert_true(q->n < QCAP);
    dgram_t *d = &q->q[(q->head + q->n) % QCAP];
    assert_int_equal(drths_wire_seal(tx, m, d->b, sizeof d->b, &d->len), 0);
    d->t = t;
    q->n++;
}

static dgram_t *q_due(queue_t *q, int64_t now)
{
    return (q->n && q->q[q->head].t <= now) ? &q->q[q->head] : NULL;
}

static void q_pop(queue_t *q)
{
    q->head = (q->head + 1) % QCAP;
    q->n--;
}

static const char *source_dir(void)
{
    const char *s = getenv("DRTHS_SOURCE_DIR");
    return s ? s : "..";
}

/* One actuator site of the run: its experiment view, virtual specimen, state machine, codec
 * ends, queues and record. */
typedef struct tlink {
    drths_experiment_t *exp; /* the actuator site's view (its --site entry), owned */
    drths_specimen_t spec;
    drths_daq_t daq;
    drths_actuator_t *act;
    drths_actuator_out_t *out;
    drths_wire_tx_t ntx, ptx;
    drths_wire_rx_t *nrx, *prx;
    drths_recorder_t *rp;
    char ppath[64];
    int64_t one_way_ns, t0;
    int started;
    uint64_t tick;
} tlink_t;

#define MAX_TLINKS 3
static queue_t cqs[MAX_TLINKS], fqs[MAX_TLINKS]; /* per link: numerical -> physical, back */

static drths_experiment_t *load_example(const char *name, const char *site)
{
    drths_error_t err = {{0}};
    drths_experiment_t *exp = calloc(1, sizeof *exp);
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/%s", source_dir(), name);
    int rc = drths_experiment_load(exp, path, &err);
    if (!rc && site)
        rc = drths_experiment_select_site(exp, site, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, 0);
    exp->ground_motion.duration_s = 4.0; /* 20000 ticks: the counted window ends before STOP */
    exp->ground_motion.tail_s = 0.0;
    return exp;
}

/* The steady state of a numerical site with nl links (the example's sites, or the one site of a
 * file without sites), link i 1 + 2 i ms away each way, in virtual time. */
static void run_steady(const char *example, int nl, uint32_t L)
{
    if (!COUNT_ALLOCS) {
        print_message("sanitizer build: allocation counting skipped\n");
        skip();
    }
    assert_int_equal(drths_crypto_init(), 0);
    drths_error_t err = {{0}};
    drths_experiment_t *exp = load_example(example, NULL);

    /* Numerical site. */
    drths_hybrid_params_t hp;
    drths_hybrid_params_default(&hp, exp);
    assert_int_equal(hp.n_links, nl);
    hp.L = L;
    drths_hybrid_t *h = calloc(1, sizeof *h);
    int rc = drths_hybrid_init(h, exp, &hp, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, 0);

    /* Recorders into a scratch folder. */
    char dir[] = "/tmp/drths-steady-XXXXXX", npath[64];
    assert_non_null(mkdtemp(dir));
    snprintf(npath, sizeof npath, "%s/numerical.csv", dir);
    drths_recorder_t *rn = calloc(1, sizeof *rn);
    assert_int_equal(drths_recorder_open(rn, npath, (const char *const *)h->colnames, h->ncols,
                                         4096, &err),
                     0);

    tlink_t *tl = calloc((size_t)nl, sizeof *tl);
    for (int i = 0; i < nl; i++) {
        tlink_t *l = &tl[i];
        l->exp = nl > 1 ? load_example(example, exp->sites[i].name) : exp;
        l->one_way_ns = ONE_WAY_NS * (1 + 2 * i);
        /* Actuator site: virtual specimen behind the virtual DAQ. */
        drths_specimen_params_t sp;
        drths_setup_specimen(l->exp, &sp);
        assert_int_equal(drths_specimen_init(&l->spec, &sp, 1.0 / l->exp->rate_hz, &err), 0);
        assert_int_equal(drths_daq_open_virtual(&l->spec, &l->daq, &err), 0);
        drths_actuator_params_t ap;
        drths_actuator_params_from_experiment(l->exp, &ap);
        l->act = calloc(1, sizeof *l->act);
        l->out = calloc(1, sizeof *l->out);
        assert_int_equal(drths_actuator_init(l->act, &ap, &l->daq, &err), 0);
        /* Codec: one session per link, keys as after the handshake. */
        uint8_t psk[DRTHS_KEY_BYTES] = {7, 7, (uint8_t)i}, dh[DRTHS_KEY_BYTES] = {1},
                th[DRTHS_KEY_BYTES] = {2};
        const uint64_t sid = 0x5eed5eed5eedULL + (uint64_t)i;
        drths_session_keys_t keys;
        drths_crypto_derive(psk, dh, th, &keys);
        l->nrx = calloc(1, sizeof *l->nrx);
        l->prx = calloc(1, sizeof *l->prx);
        assert_int_equal(drths_wire_tx_init(&l->ntx, DRTHS_ROLE_NUMERICAL, sid), 0);
        assert_int_equal(drths_wire_tx_init(&l->ptx, DRTHS_ROLE_PHYSICAL, sid), 0);
        assert_int_equal(drths_wire_rx_init(l->nrx, DRTHS_ROLE_NUMERICAL, psk, &err), 0);
        assert_int_equal(drths_wire_rx_init(l->prx, DRTHS_ROLE_PHYSICAL, psk, &err), 0);
        drths_wire_tx_set_keys(&l->ntx, &keys);
        drths_wire_tx_set_keys(&l->ptx, &keys);
        drths_wire_rx_start(l->nrx, sid);
        drths_wire_rx_set_keys(l->nrx, &keys);
        drths_wire_rx_start(l->prx, sid);
        drths_wire_rx_set_keys(l->prx, &keys);
        snprintf(l->ppath, sizeof l->ppath, "%s/physical%d.csv", dir, i);
        l->rp = calloc(1, sizeof *l->rp);
        assert_int_equal(drths_recorder_open(l->rp, l->ppath, drths_actuator_columns,
                                             DRTHS_ACT_NCOLS, 4096, &err),
                         0);
        memset(&cqs[i], 0, sizeof cqs[i]);
        memset(&fqs[i], 0, sizeof fqs[i]);
    }

    /* The loop's step timing, as drths_numsite_run_links keeps it (site-numerical/steptime.h). */
    drths_steptime_t *st = calloc(1, sizeof *st);
    assert_int_equal(drths_steptime_init(st, hp.dt_ns, &err), 0);

    const int64_t dt = hp.dt_ns;
    int64_t now = 1000000000;
    unsigned long at_warm = 0, at_end = 0;
    unsigned long accepted_c = 0, accepted_f = 0;
    drths_hybrid_action_t a;
    drths_msg_t m;
    for (int done = 0; !done;) {
        drths_hybrid_poll_result_t pr;
        long step_before = h->ns.step;
        while ((pr = drths_hybrid_poll(h, now, &a)) == DRTHS_HYBRID_ACT) {
            if (h->ns.step != step_before) {
                drths_steptime_start(st, h->ns.step, now);
                /* A step's COMMANDs to the other links are still to go (the site skips its
                 * drains until they are out). */
                if (nl > 1 && a.is_command)
                    assert_true(drths_hybrid_pending(h));
            }
            step_before = h->ns.step;
            if (a.send) {
                tlink_t *l = &tl[a.link];
                q_push(&cqs[a.link], &l->ntx, a.send, now + l->one_way_ns);
                if (a.is_command) {
                    drths_hybrid_link_sent(h, a.link, l->ntx.next_counter - 1, now);
                    drths_steptime_sent(st, now);
                }
            }
            if (a.row)
                assert_int_equal(drths_recorder_push(rn, a.row), 0);
        }
        drths_steptime_idle(st);
        assert_false(drths_hybrid_pending(h));       /* waiting: everything built was sent */
        assert_int_not_equal(pr, DRTHS_HYBRID_DONE); /* the window ends before the record */
        int64_t next = a.wake_ns;
        for (int i = 0; i < nl; i++) {
            const tlink_t *l = &tl[i];
            if (l->started && l->t0 + (int64_t)l->tick * dt < next)
                next = l->t0 + (int64_t)l->tick * dt;
            if (cqs[i].n && cqs[i].q[cqs[i].head].t < next)
                next = cqs[i].q[cqs[i].head].t;
            if (fqs[i].n && fqs[i].q[fqs[i].head].t < next)
                next = fqs[i].q[fqs[i].head].t;
        }
        assert_true(next >= now);
        now = next;

        for (int i = 0; i < nl && !done; i++) {
            tlink_t *l = &tl[i];
            for (dgram_t *d; (d = q_due(&cqs[i], now)); q_pop(&cqs[i])) {
                assert_int_equal(drths_wire_open(l->prx, d->b, d->len, &m), DRTHS_REJECT_OK);
                accepted_c++;
                drths_actuator_receive(l->act, &m, d->t);
                if (!l->started && drths_actuator_started(l->act)) {
                    l->started = 1;
                    l->t0 = d->t + 5000000;
                }
            }
            if (l->started && now >= l->t0 + (int64_t)l->tick * dt) {
                assert_int_equal(drths_actuator_tick(l->act, l->tick, l->t0 + (int64_t)l->tick * dt,
                                                     now, l->out),
                                 0);
                q_push(&fqs[i], &l->ptx, &l->out->feedback, now + l->one_way_ns);
                if (l->out->send_abort)
                    q_push(&fqs[i], &l->ptx, &l->out->abort, now + l->one_way_ns);
                assert_int_equal(drths_recorder_push(l->rp, l->out->row), 0);
                l->tick++;
                if (l->tick % 1000 == 0) {
                    /* The libuv thread's drain: not part of the RT path, so not counted. */
                    long before = alloc_count;
                    drths_recorder_drain(rn);
                    drths_recorder_drain(l->rp);
                    alloc_count = before;
                }
                /* Link 0's ticks count the window. */
                if (i == 0 && l->tick == WARM_TICKS)
                    at_warm = alloc_count;
                if (i == 0 && l->tick == WARM_TICKS + COUNT_TICKS) {
                    at_end = alloc_count;
                    done = 1;
                }
            }
        }
        for (int i = 0; i < nl && !done; i++) {
            tlink_t *l = &tl[i];
            for (dgram_t *d; (d = q_due(&fqs[i], now)); q_pop(&fqs[i])) {
                assert_int_equal(drths_wire_open(l->nrx, d->b, d->len, &m), DRTHS_REJECT_OK);
                accepted_f++;
                drths_hybrid_on_link_message(h, i, &m, d->t);
            }
        }
    }
    print_message("%d link(s), %d ticks in steady state: %lu COMMAND/EPOCH and %lu FEEDBACK "
                  "datagrams opened so far, %lu commands applied at link 0, %lu concealed "
                  "feedback steps, %lu heap allocations\n",
                  nl, COUNT_TICKS, accepted_c, accepted_f, (unsigned long)tl[0].act->c.applied,
                  (unsigned long)h->c.concealed, at_end - at_warm);
    /* The run is a real one: commands applied, nothing concealed on these ideal links. */
    for (int i = 0; i < nl; i++) {
        assert_true(tl[i].act->c.applied > (uint64_t)COUNT_TICKS);
        assert_int_equal(tl[i].act->c.concealed, 0);
    }
    assert_int_equal(h->c.concealed, 0);
    assert_true(at_warm > 0); /* the interposition is live: init allocated */
    assert_int_equal(at_end - at_warm, 0);
    /* Every step of the window was timed. */
    drths_steptime_summary_t sts;
    drths_steptime_summary(st, &sts);
    assert_true(sts.steps > (uint64_t)COUNT_TICKS);
    drths_steptime_close(st);
    free(st);

    assert_int_equal(drths_recorder_close(rn, &err), 0);
    unlink(npath);
    for (int i = 0; i < nl; i++) {
        tlink_t *l = &tl[i];
        assert_int_equal(drths_recorder_close(l->rp, &err), 0);
        unlink(l->ppath);
        free(l->rp);
        drths_wire_tx_close(&l->ntx);
        drths_wire_tx_close(&l->ptx);
        drths_wire_rx_close(l->nrx);
        drths_wire_rx_close(l->prx);
        free(l->nrx), free(l->prx);
        drths_actuator_close(l->act);
        free(l->act), free(l->out);
        drths_daq_close(&l->daq);
        drths_specimen_close(&l->spec);
        if (l->exp != exp) {
            drths_experiment_close(l->exp);
            free(l->exp);
        }
    }
    free(tl);
    rmdir(dir);
    free(rn);
    drths_hybrid_close(h);
    free(h);
    drths_experiment_close(exp);
    free(exp);
}

static void test_steady_state_allocates_nothing(void **state)
{
    (void)state;
    run_steady("three-story-elcentro.yaml", 1, LOOP_L);
}

/* The numerical site holding two links (examples/two-labs.yaml, 1 ms and 3 ms away each way,
 * one L for both that covers the far one) against two actuator sites: nothing allocates
 * either. */
static void test_two_links_allocate_nothing(void **state)
{
    (void)state;
    run_steady("two-labs.yaml", 2, 2 * LOOP_L);
}

/* Three links (examples/three-labs.yaml, 1, 3 and 5 ms away each way): nothing allocates. */
static void test_three_links_allocate_nothing(void **state)
{
    (void)state;
    run_steady("three-labs.yaml", 3, 3 * LOOP_L);
}

int main(void)
{
    if (!COUNT_ALLOCS) {
        /* The program's one check: ctest reports it skipped (SKIP_RETURN_CODE 77). */
        printf("SKIPPED: sanitizer build: its allocator cannot be counted\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_state_allocates_nothing),
        cmocka_unit_test(test_two_links_allocate_nothing),
        cmocka_unit_test(test_three_links_allocate_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
