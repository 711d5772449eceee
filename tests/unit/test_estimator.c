#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/estimator.h"

#include "alloc_count.h"

#define US INT64_C(1000)
#define MS INT64_C(1000000)
#define S INT64_C(1000000000)
#define DT (200 * US) /* 5000 Hz */

/* 1000 probe round trips 80.00, 80.01, ..., 89.99 ms in a scrambled order. */
static int64_t probe_rtt(int i)
{
    return 80 * MS + (int64_t)((i * 7919) % 1000) * 10 * US;
}

static void test_probe_summary(void **state)
{
    (void)state;
    drths_probe_stats_t ps;
    drths_error_t err;
    assert_int_equal(drths_probe_stats_init(&ps, 0, &err), -EINVAL);
    assert_int_equal(drths_probe_stats_init(&ps, 1000, &err), 0);
    drths_rtt_summary_t s;
    assert_int_equal(drths_probe_stats_summary(&ps, DT, &s), -ENOENT);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(drths_probe_stats_add(&ps, probe_rtt(i)), 0);
    assert_int_equal(drths_probe_stats_add(&ps, 1), -ENOSPC);
    assert_int_equal(drths_probe_stats_add(&ps, -1), -ERANGE);
    assert_int_equal(ps.rejected, 2);
    assert_int_equal(drths_probe_stats_summary(&ps, DT, &s), 0);
    /* Nearest rank of 1000 values: p50 is the 500th (84.99 ms), p99 the 990th (89.89 ms),
     * p99.9 the 999th (89.98 ms). In 200 µs ticks, rounded up: 400, 425, 450, 450, 450. */
    assert_int_equal(s.count, 1000);
    assert_int_equal(s.min_ns, 80 * MS);
    assert_int_equal(s.p50_ns, 84990 * US);
    assert_int_equal(s.p99_ns, 89890 * US);
    assert_int_equal(s.p999_ns, 89980 * US);
    assert_int_equal(s.max_ns, 89990 * US);
    assert_int_equal(s.min_ticks, 400);
    assert_int_equal(s.p50_ticks, 425);
    assert_int_equal(s.p99_ticks, 450);
    assert_int_equal(s.p999_ticks, 450);
    assert_int_equal(s.max_ticks, 450);
    int64_t q;
    assert_int_equal(drths_probe_stats_quantile(&ps, 0.9, &q), 0);
    assert_int_equal(q, 88990 * US);
    drths_probe_stats_close(&ps);
    drths_probe_stats_close(&ps);
}

static void test_ticks_ceil(void **state)
{
    (void)state;
    assert_int_equal(drths_ns_to_ticks_ceil(0, DT), 0);
    assert_int_equal(drths_ns_to_ticks_ceil(1, DT), 1);
    assert_int_equal(drths_ns_to_ticks_ceil(DT, DT), 1);
    assert_int_equal(drths_ns_to_ticks_ceil(DT + 1, DT), 2);
    assert_int_equal(drths_ns_to_ticks_ceil(80 * MS, DT), 400);
}

static void test_lchoice(void **state)
{
    (void)state;
    /* p99.9 = 89.98 ms -> 450 ticks; wake-up margins 60 µs -> 1 tick and 250 µs -> 2 ticks;
     * safety 10: L = 463. */
    drths_lchoice_params_t p = {.quantile = 0.999,
                                .wake_margin_local_ns = 60 * US,
                                .wake_margin_peer_ns = 250 * US,
                                .safety_ticks = 10};
    drths_lchoice_t c;
    assert_int_equal(drths_lchoice_compute(&p, 89980 * US, DT, &c), 0);
    assert_int_equal(c.rtt_ticks, 450);
    assert_int_equal(c.wake_local_ticks, 1);
    assert_int_equal(c.wake_peer_ticks, 2);
    assert_int_equal(c.L_auto, 463);
    assert_int_equal(c.L, 463);
    assert_false(c.fixed);
    /* Fixed L overrides, and the automatic value is still reported. */
    p.fixed_L = 420;
    assert_int_equal(drths_lchoice_compute(&p, 89980 * US, DT, &c), 0);
    assert_int_equal(c.L, 420);
    assert_int_equal(c.L_auto, 463);
    assert_true(c.fixed);
    /* Floor of 1 on a loopback with no margins. */
    drths_lchoice_params_t z = {.quantile = 0.999};
    assert_int_equal(drths_lchoice_compute(&z, 0, DT, &c), 0);
    assert_int_equal(c.L, 1);
    assert_int_equal(drths_lchoice_compute(&z, 30 * US, DT, &c), 0);
    assert_int_equal(c.L, 1);
    assert_int_equal(drths_lchoice_compute(&z, 201 * US, DT, &c), 0);
    assert_int_equal(c.L, 2);
    assert_int_equal(drths_lchoice_compute(&z, -1, DT, &c), -EINVAL);
    assert_int_equal(drths_lchoice_compute(&z, 0, 0, &c), -EINVAL);
    assert_int_equal(drths_lchoice_compute(&z, INT64_C(1) << 62, 1, &c), -EINVAL);
}

static void test_sendlog(void **state)
{
    (void)state;
    drths_sendlog_t sl;
    int64_t t;
    assert_int_equal(drths_sendlog_init(&sl, 8, NULL), 0);
    assert_int_equal(drths_sendlog_take(&sl, 0, &t), -ENOENT); /* nothing sent yet */
    for (uint64_t c = 0; c < 20; c++)
        drths_sendlog_record(&sl, c, (int64_t)c * 1000);
    assert_int_equal(drths_sendlog_take(&sl, 12, &t), 0);
    assert_int_equal(t, 12000);
    assert_int_equal(drths_sendlog_take(&sl, 12, &t), -EALREADY);
    assert_int_equal(drths_sendlog_take(&sl, 5, &t), -ENOENT);  /* overwritten by 13 */
    assert_int_equal(drths_sendlog_take(&sl, 25, &t), -ENOENT); /* not sent yet */
    assert_int_equal(drths_sendlog_take(&sl, 19, &t), 0);
    drths_sendlog_close(&sl);
    drths_sendlog_close(&sl);
    /* Counters near 2^64. */
    assert_int_equal(drths_sendlog_init(&sl, 5, NULL), 0);
    drths_sendlog_record(&sl, UINT64_MAX - 1, 7);
    drths_sendlog_record(&sl, UINT64_MAX, 8);
    assert_int_equal(drths_sendlog_take(&sl, UINT64_MAX - 1, &t), 0);
    assert_int_equal(t, 7);
    assert_int_equal(drths_sendlog_take(&sl, UINT64_MAX, &t), 0);
    assert_int_equal(t, 8);
    drths_sendlog_close(&sl);
}

/* Continuous round trip: one COMMAND per tick, each echoed by a FEEDBACK; the true network round
 * trip follows a known sequence and the peer's hold time varies. The tracker must recover the
 * round trip exactly per echo, and its quantiles to the 10 µs bin width. */
static void test_tracker(void **state)
{
    (void)state;
    enum { N = 20000 };
    drths_rtt_tracker_t tr;
    drths_error_t err;
    assert_int_equal(drths_rtt_tracker_init(&tr, 64, 10 * US, 2 * S, &err), 0);
    assert_int_equal(tr.run.nbins, 200000);
    int64_t *truth = malloc(N * sizeof *truth);
    assert_non_null(truth);
    srand(3);
    for (int i = 0; i < N; i++) {
        int64_t sent = (int64_t)i * DT;
        /* 78..82 ms uniform, plus a 1 % tail at 95..100 ms. */
        int64_t rtt = 78 * MS + (int64_t)(rand() % 4000) * US;
        if (rand() % 100 == 0)
            rtt = 95 * MS + (int64_t)(rand() % 5000) * US;
        truth[i] = rtt;
        int64_t hold = (int64_t)(rand() % 300) * US;
        drths_rtt_tracker_sent(&tr, (uint64_t)i, sent);
        /* The echo travels back within the same call: the order of events does not matter to
         * the tracker, only the three times. */
        int64_t got;
        assert_int_equal(drths_rtt_tracker_echo(&tr, (uint64_t)i, hold, sent + rtt + hold, &got),
                         0);
        assert_int_equal(got, rtt);
    }
    const double qs[] = {0.5, 0.99, 0.999};
    for (int k = 0; k < 3; k++) {
        int64_t exact;
        assert_int_equal(drths_quantile_copy_i64(truth, N, qs[k], &exact), 0);
        int64_t h = drths_hist_quantile(&tr.run, qs[k]);
        assert_true(h >= exact && h <= exact + 10 * US);
        print_message("q %.3f: exact %lld ns, histogram %lld ns\n", qs[k], (long long)exact,
                      (long long)h);
    }
    drths_rtt_summary_t s;
    drths_rtt_summary_from_hist(&tr.run, DT, &s);
    assert_int_equal(s.count, N);
    assert_true(s.p999_ns > 95 * MS); /* the tail is above the 99th percentile */
    assert_int_equal(s.p999_ticks, drths_ns_to_ticks_ceil(s.p999_ns, DT));

    /* Bad echoes are counted and not added. */
    assert_int_equal(drths_rtt_tracker_echo(&tr, 5, 0, 0, NULL), -ENOENT);           /* too old */
    assert_int_equal(drths_rtt_tracker_echo(&tr, N - 1, 0, S * 100, NULL), -EALREADY); /* reused */
    drths_rtt_tracker_sent(&tr, N, 10 * S);
    assert_int_equal(drths_rtt_tracker_echo(&tr, N, 5 * MS, 10 * S + 4 * MS, NULL), -ERANGE);
    assert_int_equal(tr.unknown, 1);
    assert_int_equal(tr.repeated, 1);
    assert_int_equal(tr.negative, 1);
    assert_int_equal(tr.run.count, N);

    free(truth);
    drths_rtt_tracker_close(&tr);
    drths_rtt_tracker_close(&tr);
    assert_int_equal(drths_rtt_tracker_init(&tr, 64, 0, S, &err), -EINVAL);
    drths_rtt_tracker_close(&tr);
}

static void test_late_window(void **state)
{
    (void)state;
    enum { W = 100, N = 1000 };
    drths_late_window_t w;
    assert_int_equal(drths_late_window_init(&w, 0, NULL), -EINVAL);
    assert_int_equal(drths_late_window_init(&w, W, NULL), 0);
    assert_true(drths_late_window_rate(&w) == 0.0);
    static int flags[N];
    srand(5);
    for (int i = 0; i < N; i++) {
        flags[i] = (rand() % 10) == 0 || (i >= 500 && i < 540);
        drths_late_window_add(&w, flags[i]);
        /* Brute force over the last min(i+1, W) ticks. */
        int from = i + 1 > W ? i + 1 - W : 0, late = 0;
        for (int k = from; k <= i; k++)
            late += flags[k];
        assert_int_equal(w.late_count, late);
        assert_int_equal(w.filled, i + 1 - from);
    }
    drths_late_window_reset(&w);
    assert_int_equal(w.late_count, 0);
    drths_late_window_add(&w, 1);
    assert_true(drths_late_window_rate(&w) == 1.0);
    drths_late_window_close(&w);
    drths_late_window_close(&w);
}

/* The sliding window against brute force: 10 sub-windows of 100 ms, round trips every 0.2 ms;
 * after each sub-window boundary the window holds exactly the samples of the current and the 9
 * sub-windows before it, and its quantiles are within one bin (50 µs) above the exact ones. */
static void test_sliding_window(void **state)
{
    (void)state;
    enum { N = 30000, NSUB = 10 };
    const int64_t sub = 100 * MS, bin = 50 * US;
    drths_rtt_window_t w;
    drths_error_t err;
    assert_int_equal(drths_rtt_window_init(&w, bin, 2 * S, sub, 1, &err), -EINVAL);
    assert_int_equal(drths_rtt_window_init(&w, 0, 2 * S, sub, NSUB, &err), -EINVAL);
    assert_int_equal(drths_rtt_window_init(&w, bin, 2 * S, sub, NSUB, &err), 0);
    assert_int_equal(drths_rtt_window_quantile(&w, 0.999), 0);
    assert_int_equal(drths_rtt_window_min(&w), 0);
    int64_t *v = malloc(N * sizeof *v), *t = malloc(N * sizeof *t);
    assert_non_null(v && t);
    srand(11);
    for (int i = 0; i < N; i++) {
        t[i] = (int64_t)i * DT;
        /* A level that moves every 1.3 s, so old sub-windows really differ from new ones. */
        v[i] = (70 + 20 * ((i / 6500) % 3)) * MS + (int64_t)(rand() % 10000) * US;
        if (i == 12345)
            v[i] = 3 * S; /* beyond the last bin: counted there, reported as the maximum */
        drths_rtt_window_add(&w, t[i], v[i]);
        if (i % 997 != 0 && i != N - 1)
            continue;
        /* The window started at t = 0: sub-window k covers [k sub, (k+1) sub). */
        int64_t cur_start = (t[i] / sub) * sub;
        int64_t from = cur_start - (NSUB - 1) * sub;
        int first = from <= 0 ? 0 : (int)(from / DT);
        size_t n = (size_t)(i - first + 1);
        assert_int_equal(drths_rtt_window_count(&w), n);
        const double qs[] = {0.5, 0.99, 0.999, 1.0};
        for (int k = 0; k < 4; k++) {
            int64_t exact;
            assert_int_equal(drths_quantile_copy_i64(v + first, n, qs[k], &exact), 0);
            int64_t got = drths_rtt_window_quantile(&w, qs[k]);
            if (exact >= 2 * S)
                assert_int_equal(got, exact);
            else
                assert_true(got >= exact && got <= exact + bin);
        }
        int64_t lo = v[first], hi = v[first];
        for (int j = first; j <= i; j++) {
            lo = v[j] < lo ? v[j] : lo;
            hi = v[j] > hi ? v[j] : hi;
        }
        assert_int_equal(drths_rtt_window_min(&w), lo);
        assert_int_equal(drths_rtt_window_max(&w), hi);
        /* The 3 most recent sub-windows. */
        int64_t rfrom = cur_start - 2 * sub;
        int rfirst = rfrom <= 0 ? 0 : (int)(rfrom / DT);
        uint64_t rn;
        int64_t exact;
        assert_int_equal(drths_quantile_copy_i64(v + rfirst, (size_t)(i - rfirst + 1), 0.999,
                                                 &exact),
                         0);
        int64_t got = drths_rtt_window_recent_quantile(&w, 3, 0.999, &rn);
        assert_int_equal(rn, (uint64_t)(i - rfirst + 1));
        if (exact < 2 * S)
            assert_true(got >= exact && got <= exact + bin);
    }
    /* A silence longer than the window empties it. */
    drths_rtt_window_advance(&w, t[N - 1] + NSUB * sub);
    assert_int_equal(drths_rtt_window_count(&w), 0);
    drths_rtt_window_add(&w, t[N - 1] + NSUB * sub + 1, 42 * MS);
    assert_int_equal(drths_rtt_window_quantile(&w, 0.999), 42 * MS);
    free(v);
    free(t);
    drths_rtt_window_close(&w);
    drths_rtt_window_close(&w);
}

/* Epoch decisions, once per second, on a synthetic history. Reference numbers: margins of
 * 1 + 2 + 10 ticks (as in test_lchoice), so a p99.9 of r ms needs L = 5·r + 13 ticks. */
static void test_epoch_decisions(void **state)
{
    (void)state;
    const drths_lchoice_params_t lp = {.quantile = 0.999,
                                       .wake_margin_local_ns = 60 * US,
                                       .wake_margin_peer_ns = 250 * US,
                                       .safety_ticks = 10};
    drths_epoch_params_t p = {.late_rate_threshold = 1e-3,
                              .min_window_ticks = 5000,
                              .min_rtt_samples = 1000,
                              .raise_step_ticks = 25,
                              .lower_hysteresis_ns = 10 * S,
                              .max_L = 5000,
                              .late_hold_ns = 20 * S};
    drths_epoch_state_t st = {0};
    drths_epoch_reason_t why;
    drths_epoch_input_t in = {.now_ns = 0,
                              .current_L = 463,
                              .window_ticks = 5000,
                              .window_late = 0,
                              .rtt_samples = 5000,
                              .rtt_q_ns = 89980 * US};
    /* Steady: p99.9 89.98 ms needs exactly 463. */
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 463);
    assert_int_equal(why, DRTHS_EPOCH_KEEP);

    /* The round trip grows to 100 ms: raise at once to 513. */
    in.now_ns = 1 * S;
    in.rtt_q_ns = 100 * MS;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 513);
    assert_int_equal(why, DRTHS_EPOCH_RAISE_RTT);
    in.current_L = 513;

    /* Late rate 6/5000 = 0.12 % > 0.1 % with an unchanged quantile: raise by the step. */
    in.now_ns = 2 * S;
    in.window_late = 6;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 538);
    assert_int_equal(why, DRTHS_EPOCH_RAISE_LATE);
    in.current_L = 538;
    /* 5/5000 is exactly the threshold, not above it: keep. */
    in.window_late = 5;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 538);
    assert_int_equal(why, DRTHS_EPOCH_KEEP);
    /* A late rate over too short a window is no evidence. */
    in.window_ticks = 100;
    in.window_late = 50;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 538);
    in.window_ticks = 5000;
    in.window_late = 0;

    /* The late raise is kept as 25 ticks of extra margin for late_hold (20 s, until t = 22 s):
     * meanwhile the same round trip does not count as "lower". */
    assert_int_equal(st.late_extra_ticks, 25);
    for (int t = 3; t < 10; t++) {
        in.now_ns = t * S;
        assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 538);
        assert_false(st.lowering);
    }

    /* The round trip drops to 60..65 ms from t = 10 s: L may go down only at t = 20 s, and
     * only to what the highest need of that time was (65 ms -> 338, + 25 of late margin). */
    const int64_t q_ms[] = {60, 62, 65, 61, 60, 60, 63, 60, 60, 60, 60};
    for (int k = 0; k <= 10; k++) {
        in.now_ns = (10 + k) * S;
        in.rtt_q_ns = q_ms[k] * MS;
        uint32_t L = drths_epoch_decide(&p, &lp, DT, &st, &in, &why);
        if (k < 10) {
            assert_int_equal(L, 538);
            assert_int_equal(why, DRTHS_EPOCH_KEEP);
        } else {
            assert_int_equal(L, 363);
            assert_int_equal(why, DRTHS_EPOCH_LOWER);
        }
    }
    in.current_L = 363;

    /* The late margin lapses at t = 22 s (no lateness since the raise at 2 s): the need of a
     * 65 ms round trip is 338 again, and after the hysteresis L follows it down (32 s). The
     * margin of a late raise is not kept for the rest of the run. */
    in.rtt_q_ns = 65 * MS;
    for (int t = 21; t <= 32; t++) {
        in.now_ns = t * S;
        uint32_t L = drths_epoch_decide(&p, &lp, DT, &st, &in, &why);
        if (t < 32) {
            assert_int_equal(L, 363);
        } else {
            assert_int_equal(L, 338);
            assert_int_equal(why, DRTHS_EPOCH_LOWER);
        }
        assert_int_equal(st.late_extra_ticks, t < 22 ? 25 : 0);
    }
    in.current_L = 338;

    /* A dip that does not last: 50 ms for 5 s, then back to 65 ms (needs exactly 338), then
     * 50 ms again; the hysteresis restarts from the second dip (t = 46 s -> lower at 56 s). */
    for (int t = 40; t <= 56; t++) {
        in.now_ns = t * S;
        in.rtt_q_ns = (t < 45 || t >= 46) ? 50 * MS : 65 * MS;
        uint32_t L = drths_epoch_decide(&p, &lp, DT, &st, &in, &why);
        if (t < 56) {
            assert_int_equal(L, 338);
        } else {
            assert_int_equal(L, 263);
            assert_int_equal(why, DRTHS_EPOCH_LOWER);
        }
    }
    in.current_L = 263;

    /* Rate bound of 5 s and a dead band of 5 ticks. 52 ms needs 273: more than the dead band
     * over L, not urgent (without the safety margin 263 still fits), and the last change was
     * long ago: raise, with the dead band as headroom (278). 55 ms (288) is again not urgent:
     * it waits until 5 s after the last change, then goes to 293. 62 ms (323: 313 without the
     * safety margin, over 293) is urgent: at once, to the need itself. */
    p.min_change_interval_ns = 5 * S;
    p.raise_deadband_ticks = 5;
    in.now_ns = 100 * S;
    in.rtt_q_ns = 52 * MS;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 278);
    assert_int_equal(why, DRTHS_EPOCH_RAISE_RTT);
    in.current_L = 278;
    /* 53 ms (278) is inside the dead band: nothing. */
    in.now_ns = 101 * S;
    in.rtt_q_ns = 53 * MS;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 278);
    in.rtt_q_ns = 55 * MS;
    for (int t = 101; t <= 105; t++) {
        in.now_ns = t * S;
        uint32_t L = drths_epoch_decide(&p, &lp, DT, &st, &in, &why);
        assert_int_equal(L, t < 105 ? 278 : 293);
    }
    in.current_L = 293;
    in.now_ns = 106 * S;
    in.rtt_q_ns = 62 * MS;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 323);
    assert_int_equal(why, DRTHS_EPOCH_RAISE_RTT);
    in.current_L = 323;
    /* A raise goes to the recent quantile when that is higher (a step up half seen by the
     * window): 70 ms in the window (363), 80 ms in the recent sub-windows (413). The recent
     * quantile alone, below the window's need, raises nothing. */
    in.now_ns = 107 * S;
    in.rtt_q_ns = 70 * MS;
    in.rtt_recent_samples = 2000;
    in.rtt_recent_q_ns = 80 * MS;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 413);
    in.current_L = 413;
    in.now_ns = 120 * S;
    in.rtt_q_ns = 80 * MS;
    in.rtt_recent_q_ns = 82 * MS;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 413);
    in.rtt_recent_samples = 0;
    p.min_change_interval_ns = 0;
    p.raise_deadband_ticks = 0;

    /* Too few round-trip samples: no round-trip decision either way. */
    in.rtt_samples = 10;
    in.rtt_q_ns = 500 * MS;
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 413);
    in.rtt_samples = 5000;

    /* max_L caps a raise. */
    in.rtt_q_ns = 1500 * MS; /* needs 7513 */
    assert_int_equal(drths_epoch_decide(&p, &lp, DT, &st, &in, &why), 5000);
    assert_int_equal(why, DRTHS_EPOCH_RAISE_RTT);

    /* A fixed L never changes. */
    drths_lchoice_params_t fixed = lp;
    fixed.fixed_L = 288;
    in.current_L = 288;
    in.window_late = 4000;
    assert_int_equal(drths_epoch_decide(&p, &fixed, DT, &st, &in, &why), 288);
    assert_int_equal(why, DRTHS_EPOCH_KEEP);
    assert_string_equal(drths_epoch_reason_name(DRTHS_EPOCH_RAISE_LATE), "raise (late rate)");
}

/* ---- Synthetic links at the real decision cadence ------------------------------------------
 *
 * The numerical site's estimator, as hybrid.c runs it, in virtual time: one round trip per
 * tick (5 kHz) into an 8 s window of 8 sub-windows in quarter-tick bins, a decision every 50
 * ticks with the site's default epoch parameters, the late flags of a command whose round trip
 * does not fit in L minus the wake-up margins into a 2500-tick late window (emptied at each
 * change). Each change is applied at once. Margins: 2 + 2 wake-up ticks, 10 safety ticks. */

#define SIM_DECIDE_TICKS 50
#define SIM_MARGIN_TICKS 14

/* xorshift64*: deterministic and the same on every platform. */
static uint64_t rng_state;

static double rng_uniform(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * UINT64_C(2685821657736338717)) >> 11) * 0x1.0p-53;
}

/* Standard normal (Box-Muller), truncated at 4 sigma as netem's tables are. */
static double rng_normal(void)
{
    for (;;) {
        double u = rng_uniform(), v = rng_uniform();
        if (u <= 0.0)
            continue;
        double z = sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
        if (fabs(z) <= 4.0)
            return z;
    }
}

typedef enum { JIT_NORMAL, JIT_UNIFORM, JIT_PARETO } jitter_t;

/* One round trip around base_ms: normal and uniform as two one-way delays of base/2 with
 * 5 ms jitter each (sigma for normal, half-width for uniform: 80 +/- 10 ms), Pareto as
 * base - 5 ms plus a Pareto tail of scale 5 ms and shape 3 (p99.9 at base + 45 ms). */
static int64_t sim_rtt(jitter_t j, double base_ms)
{
    double ms;
    switch (j) {
    case JIT_NORMAL:
        ms = base_ms + 5.0 * rng_normal() + 5.0 * rng_normal();
        break;
    case JIT_UNIFORM:
        ms = base_ms + 5.0 * (2.0 * rng_uniform() - 1.0) + 5.0 * (2.0 * rng_uniform() - 1.0);
        break;
    default: {
        double u = 1.0 - rng_uniform();
        ms = base_ms - 5.0 + 5.0 * pow(u, -1.0 / 3.0);
        break;
    }
    }
    return (int64_t)(ms * 1e6);
}

typedef struct sim_link {
    jitter_t jitter;
    double (*base_ms)(double t_s); /* the round trip's level at time t */
    double loss;                   /* fraction of round trips never measured */
    double drift_ppm;              /* the actuator site's clock rate error */
    double duration_s;
} sim_link_t;

/* Round trips on their way back, by arrival tick. */
#define SIM_RING 8192
#define SIM_BUCKET 32
typedef struct sim_bucket {
    int n;
    int64_t rtt[SIM_BUCKET];
    unsigned char late[SIM_BUCKET];
    uint64_t sent_tick[SIM_BUCKET];
} sim_bucket_t;
static sim_bucket_t sim_arrivals[SIM_RING];

typedef struct sim_result {
    uint32_t L0, L_final, L_max;
    int changes, late_raises, lowers;
    double last_change_s;
    uint32_t L_at[200];     /* L at every whole second */
    int64_t offset_drift_ns; /* how far the one-way arrival offset moved */
} sim_result_t;

static int64_t sim_need(int64_t q_ns)
{
    return drths_ns_to_ticks_ceil(q_ns, DT) + SIM_MARGIN_TICKS;
}

static void sim_run(const sim_link_t *link, uint64_t seed, sim_result_t *res)
{
    rng_state = seed;
    memset(res, 0, sizeof *res);
    const drths_lchoice_params_t lp = {.quantile = 0.999,
                                       .wake_margin_local_ns = 2 * DT,
                                       .wake_margin_peer_ns = 2 * DT,
                                       .safety_ticks = 10};
    /* hybrid.c's defaults at 5 kHz. */
    const drths_epoch_params_t p = {.late_rate_threshold = 0.01,
                                    .min_window_ticks = 250,
                                    .min_rtt_samples = 200,
                                    .raise_step_ticks = 25,
                                    .lower_hysteresis_ns = 3 * S,
                                    .max_L = 0,
                                    .raise_deadband_ticks = 5,
                                    .lower_min_ticks = 50,
                                    .min_change_interval_ns = 2 * S,
                                    .late_hold_ns = 30 * S};
    drths_rtt_window_t w;
    drths_late_window_t lw;
    drths_rtt_tracker_t tr;
    assert_int_equal(drths_rtt_window_init(&w, DT / 4, 2 * S, S, 8, NULL), 0);
    assert_int_equal(drths_late_window_init(&lw, 2500, NULL), 0);
    assert_int_equal(drths_rtt_tracker_init(&tr, 4096, 10 * US, 2 * S, NULL), 0);
    drths_epoch_state_t st = {0};

    /* L of epoch 1 from 500 start-up probes, as drths_numsite_probe chooses it. */
    int64_t probes[500];
    for (int i = 0; i < 500; i++)
        probes[i] = sim_rtt(link->jitter, link->base_ms(0.0));
    int64_t q0;
    assert_int_equal(drths_quantile_copy_i64(probes, 500, 0.999, &q0), 0);
    uint32_t L = (uint32_t)sim_need(q0);
    res->L0 = res->L_max = L;

    const int64_t t0 = 1000 * S; /* the peer's clock differs by an offset and a rate */
    int64_t first_offset = INT64_MIN, last_offset = 0;
    uint64_t ticks = (uint64_t)(link->duration_s * 5000.0);
    uint64_t change_tick = 0; /* late flags of commands sent before the last change: ignored */
    memset(sim_arrivals, 0, sizeof sim_arrivals);
    for (uint64_t i = 0; i < ticks; i++) {
        int64_t now = (int64_t)i * DT;
        double t_s = (double)now * 1e-9;
        /* What arrives at this tick: echoes into the window, late flags into the late window
         * (both ride in FEEDBACKs, so they come back a round trip after the COMMAND left). */
        sim_bucket_t *b = &sim_arrivals[i % SIM_RING];
        for (int k = 0; k < b->n; k++) {
            drths_rtt_window_add(&w, now, b->rtt[k]);
            if (b->sent_tick[k] >= change_tick)
                drths_late_window_add(&lw, b->late[k]);
        }
        b->n = 0;
        int64_t rtt = sim_rtt(link->jitter, link->base_ms(t_s));
        if (rng_uniform() >= link->loss) {
            /* COMMAND sent at now (this site's clock); the peer holds it `hold` by its own
             * clock, which runs drift_ppm fast: the echo's round trip is off by hold × drift
             * only, while the one-way arrival offset drifts by the whole elapsed time × drift. */
            int64_t hold = (int64_t)(rng_uniform() * (double)DT);
            int64_t peer_hold = hold + (int64_t)((double)hold * link->drift_ppm * 1e-6);
            int64_t up = rtt / 2;
            int64_t peer_rx =
                t0 + now + up + (int64_t)((double)(now + up) * link->drift_ppm * 1e-6);
            int64_t offset = peer_rx - now;
            if (first_offset == INT64_MIN)
                first_offset = offset;
            last_offset = offset;
            int64_t got;
            drths_rtt_tracker_sent(&tr, i, now);
            assert_int_equal(drths_rtt_tracker_echo(&tr, i, peer_hold, now + rtt + hold, &got),
                             0);
            uint64_t at = i + (uint64_t)drths_ns_to_ticks_ceil(rtt + hold, DT);
            assert_true(at - i < SIM_RING);
            sim_bucket_t *ab = &sim_arrivals[at % SIM_RING];
            assert_true(ab->n < SIM_BUCKET);
            ab->rtt[ab->n] = got;
            ab->late[ab->n] = rtt > ((int64_t)L - 4) * DT;
            ab->sent_tick[ab->n] = i;
            ab->n++;
        }
        if (i % 5000 == 0 && i / 5000 < 200)
            res->L_at[i / 5000] = L;
        if (i % SIM_DECIDE_TICKS != 0 || i == 0)
            continue;
        drths_rtt_window_advance(&w, now);
        drths_epoch_input_t in = {.now_ns = now,
                                  .current_L = L,
                                  .window_ticks = lw.filled,
                                  .window_late = lw.late_count,
                                  .rtt_samples = drths_rtt_window_count(&w),
                                  .rtt_q_ns = drths_rtt_window_quantile(&w, 0.999)};
        in.rtt_recent_q_ns = drths_rtt_window_recent_quantile(&w, 2, 0.999,
                                                              &in.rtt_recent_samples);
        drths_epoch_reason_t why;
        uint32_t next = drths_epoch_decide(&p, &lp, DT, &st, &in, &why);
        if (next != L) {
            print_message("    %7.3f s: L %u -> %u (%s; window p99.9 %.2f ms of %llu, recent %.2f "
                          "ms)\n",
                          t_s, L, next, drths_epoch_reason_name(why), 1e-6 * (double)in.rtt_q_ns,
                          (unsigned long long)in.rtt_samples, 1e-6 * (double)in.rtt_recent_q_ns);
            res->changes++;
            res->late_raises += why == DRTHS_EPOCH_RAISE_LATE;
            res->lowers += why == DRTHS_EPOCH_LOWER;
            res->last_change_s = t_s;
            L = next;
            if (L > res->L_max)
                res->L_max = L;
            drths_late_window_reset(&lw);
            change_tick = i;
        }
    }
    res->L_final = L;
    res->offset_drift_ns = last_offset - first_offset;
    drths_rtt_window_close(&w);
    drths_late_window_close(&lw);
    drths_rtt_tracker_close(&tr);
}

/* The L that the p99.9 of `n` round trips at a constant level asks for (a long sample of the
 * generator, separate from the run's). */
static int64_t expected_L(jitter_t j, double base_ms)
{
    enum { N = 400000 };
    int64_t *v = malloc(N * sizeof *v);
    assert_non_null(v);
    uint64_t saved = rng_state;
    rng_state = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < N; i++)
        v[i] = sim_rtt(j, base_ms);
    rng_state = saved;
    int64_t q;
    assert_int_equal(drths_quantile_copy_i64(v, N, 0.999, &q), 0);
    free(v);
    return sim_need(q);
}

static void assert_near(uint32_t L, int64_t expected, const char *what)
{
    double rel = fabs((double)L - (double)expected) / (double)expected;
    print_message("  %s: L %u, expected %lld (%.1f %%)\n", what, L, (long long)expected,
                  100.0 * rel);
    assert_true(rel <= 0.10);
}

static double level_80(double t)
{
    (void)t;
    return 80.0;
}

static double level_step(double t)
{
    return t >= 20.0 && t < 50.0 ? 140.0 : 80.0;
}

static double level_flaps(double t)
{
    return ((int)(t / 3.0)) % 2 ? 140.0 : 80.0;
}

static void print_result(const char *name, const sim_result_t *r)
{
    print_message("%s: L %u -> %u (max %u), %d changes (%d late raises, %d lowers), last at "
                  "%.1f s\n",
                  name, r->L0, r->L_final, r->L_max, r->changes, r->late_raises, r->lowers,
                  r->last_change_s);
}

/* Constant conditions, three jitter shapes, 60 s: L settles within 10 % of what the p99.9
 * needs after a handful of changes (the first L comes from only 500 probes) and never climbs
 * past it: no ratchet. */
static void test_constant_links(void **state)
{
    (void)state;
    const jitter_t js[] = {JIT_NORMAL, JIT_UNIFORM, JIT_PARETO};
    const char *names[] = {"normal 80 +/- 10 ms", "uniform 80 +/- 10 ms",
                           "Pareto 75 ms + tail"};
    for (int k = 0; k < 3; k++) {
        sim_link_t link = {.jitter = js[k], .base_ms = level_80, .duration_s = 60.0};
        sim_result_t r;
        sim_run(&link, 1000 + (uint64_t)k, &r);
        print_result(names[k], &r);
        int64_t want = expected_L(js[k], 80.0);
        assert_near(r.L_final, want, "final");
        /* Above the start (which 500 probes chose) only within the 10 %. */
        assert_true(r.L_max <= r.L0 || r.L_max <= (uint32_t)(1.1 * (double)want));
        assert_true(r.changes <= 3);
        assert_int_equal(r.late_raises, 0);
        /* Settled: the same L over the last 30 s. */
        for (int s = 30; s < 60; s++)
            assert_int_equal(r.L_at[s], r.L_final);
    }
}

/* 80 -> 140 ms at 20 s, back to 80 ms at 50 s: raised within a second of the step to the new
 * need, and DOWN again after the window has forgotten the slow route (8 s) and the hysteresis
 * (3 s). */
static void test_step_up_and_down(void **state)
{
    (void)state;
    sim_link_t link = {.jitter = JIT_NORMAL, .base_ms = level_step, .duration_s = 80.0};
    sim_result_t r;
    sim_run(&link, 2000, &r);
    print_result("80 -> 140 -> 80 ms", &r);
    int64_t lo = expected_L(JIT_NORMAL, 80.0), hi = expected_L(JIT_NORMAL, 140.0);
    /* At 21 s L already covers the new minimum round trip plus margins. */
    assert_true(r.L_at[21] >= (uint32_t)(0.9 * (double)hi));
    assert_near(r.L_at[49], hi, "at 49 s (140 ms)");
    assert_true(r.L_max <= (uint32_t)(1.1 * (double)hi));
    /* Still up at 57 s (the window holds the slow route until 58 s), down by 65 s. */
    assert_true(r.L_at[57] >= (uint32_t)(0.9 * (double)hi));
    assert_near(r.L_at[65], lo, "at 65 s (80 ms again)");
    assert_near(r.L_final, lo, "final");
    assert_true(r.lowers >= 1 && r.lowers <= 2);
    /* Up: a short staircase while the new round trips fill the window (each raise justified by
     * a measured quantile), then at most a few small raises every 2 s or more; down: one or
     * two lowerings (the sub-window holding the last slow round trips leaves a second after
     * the others). */
    assert_true(r.changes <= 12);
    /* Commands sent before the raise took effect were late: the emergency path may fire during
     * the step, and its margin has lapsed by the end (L is back at the need). */
    assert_true(r.late_raises <= 3);
}

/* The route flaps between 80 and 140 ms every 3 s for 60 s: L goes up at the first slow
 * period (a short staircase of raises as the slow round trips fill the window) and stays there,
 * since the 8 s window always holds slow round trips: no lowering, no climbing past what
 * 140 ms needs. */
static void test_route_flaps(void **state)
{
    (void)state;
    sim_link_t link = {.jitter = JIT_NORMAL, .base_ms = level_flaps, .duration_s = 60.0};
    sim_result_t r;
    sim_run(&link, 3000, &r);
    print_result("flaps 80 <-> 140 ms every 3 s", &r);
    int64_t hi = expected_L(JIT_NORMAL, 140.0);
    assert_near(r.L_final, hi, "final");
    assert_true(r.L_max <= (uint32_t)(1.1 * (double)hi));
    assert_true(r.changes <= 8);
    assert_int_equal(r.lowers, 0);
}

/* The actuator site's clock runs 50 ppm fast: the one-way arrival offset moves by 3 ms over
 * the minute, the echoed round trip does not (the hold time is the only term the peer's clock
 * measures). L is as without drift. */
static void test_clock_drift(void **state)
{
    (void)state;
    sim_link_t link = {.jitter = JIT_NORMAL, .base_ms = level_80, .duration_s = 60.0,
                       .drift_ppm = 50.0};
    sim_result_t r;
    sim_run(&link, 4000, &r);
    print_result("50 ppm clock drift", &r);
    print_message("  one-way offset moved %.3f ms\n", 1e-6 * (double)r.offset_drift_ns);
    assert_true(r.offset_drift_ns > 2 * MS);
    assert_near(r.L_final, expected_L(JIT_NORMAL, 80.0), "final");
    assert_true(r.changes <= 3);
}

/* 1 % and 5 % of the round trips are never measured (lost COMMANDs or FEEDBACKs). */
static void test_loss(void **state)
{
    (void)state;
    const double losses[] = {0.01, 0.05};
    for (int k = 0; k < 2; k++) {
        sim_link_t link = {.jitter = JIT_NORMAL, .base_ms = level_80, .duration_s = 80.0,
                           .loss = losses[k]};
        sim_result_t r;
        sim_run(&link, 5000 + (uint64_t)k, &r);
        print_message("loss %.0f %%:\n", 100 * losses[k]);
        print_result("  normal 80 +/- 10 ms", &r);
        assert_near(r.L_final, expected_L(JIT_NORMAL, 80.0), "final");
        assert_true(r.changes <= 3);
        /* And with loss the step still comes back down. */
        link.base_ms = level_step;
        sim_run(&link, 5100 + (uint64_t)k, &r);
        print_result("  80 -> 140 -> 80 ms", &r);
        assert_near(r.L_final, expected_L(JIT_NORMAL, 80.0), "final after the step");
        assert_true(r.changes <= 12);
    }
}

/* The per-tick and per-decision paths allocate nothing. */
static void test_no_allocation_per_tick(void **state)
{
    (void)state;
#if COUNT_ALLOCS
    drths_rtt_tracker_t tr;
    drths_rtt_window_t w;
    drths_late_window_t lw;
    long at_start = alloc_count;
    assert_int_equal(drths_rtt_tracker_init(&tr, 64, 10 * US, 2 * S, NULL), 0);
    assert_true(alloc_count > at_start); /* the counter sees init's allocations */
    assert_int_equal(drths_rtt_window_init(&w, DT / 4, 2 * S, S, 8, NULL), 0);
    assert_int_equal(drths_late_window_init(&lw, 5000, NULL), 0);
    const drths_lchoice_params_t lp = {.quantile = 0.999, .safety_ticks = 10};
    const drths_epoch_params_t p = {.late_rate_threshold = 1e-3,
                                    .min_window_ticks = 5000,
                                    .min_rtt_samples = 1000,
                                    .raise_step_ticks = 25,
                                    .lower_hysteresis_ns = 10 * S,
                                    .min_change_interval_ns = 2 * S,
                                    .late_hold_ns = 30 * S};
    drths_epoch_state_t st = {0};
    uint32_t L = 500;
    long before = alloc_count;
    for (int i = 0; i < 120000; i++) {
        int64_t sent = (int64_t)i * DT, rtt;
        drths_rtt_tracker_sent(&tr, (uint64_t)i, sent);
        drths_rtt_tracker_echo(&tr, (uint64_t)i, 100 * US, sent + 80 * MS + (i % 50) * US, &rtt);
        drths_rtt_window_add(&w, sent + 80 * MS, rtt);
        drths_late_window_add(&lw, i % 2000 == 0);
        if (i % 50 == 49) {
            drths_rtt_window_advance(&w, sent);
            drths_epoch_input_t in = {.now_ns = sent,
                                      .current_L = L,
                                      .window_ticks = lw.filled,
                                      .window_late = lw.late_count,
                                      .rtt_samples = drths_rtt_window_count(&w),
                                      .rtt_q_ns = drths_rtt_window_quantile(&w, 0.999)};
            in.rtt_recent_q_ns =
                drths_rtt_window_recent_quantile(&w, 2, 0.999, &in.rtt_recent_samples);
            drths_epoch_reason_t why;
            uint32_t next = drths_epoch_decide(&p, &lp, DT, &st, &in, &why);
            if (next != L)
                drths_late_window_reset(&lw);
            L = next;
            drths_rtt_summary_t s;
            drths_rtt_summary_from_hist(&tr.run, DT, &s);
        }
    }
    long during = alloc_count - before;
    drths_rtt_tracker_close(&tr);
    drths_rtt_window_close(&w);
    drths_late_window_close(&lw);
    assert_int_equal(during, 0);
    /* Round trips 80 ms + 0..49 µs - 100 µs hold: p99.9 79.949 ms -> 400 ticks, + 10 safety =
     * 410, reached from 500 once the lower need has lasted the 10 s hysteresis. */
    assert_int_equal(L, 410);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_summary),
        cmocka_unit_test(test_ticks_ceil),
        cmocka_unit_test(test_lchoice),
        cmocka_unit_test(test_sendlog),
        cmocka_unit_test(test_tracker),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_late_window),
        cmocka_unit_test(test_epoch_decisions),
        cmocka_unit_test(test_constant_links),
        cmocka_unit_test(test_step_up_and_down),
        cmocka_unit_test(test_route_flaps),
        cmocka_unit_test(test_clock_drift),
        cmocka_unit_test(test_loss),
        cmocka_unit_test(test_no_allocation_per_tick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
