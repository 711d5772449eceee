/* drths-conform --role numerical, the run: EPOCH 1 repeated until the first FEEDBACK, COMMANDs
 * lock-stepped to FEEDBACK (tick n's FEEDBACK releases the COMMAND for n + 1 + L), forged and
 * replayed HELLOs in the middle of it, STOP, and the checks of what the actuator site sent. */
#include "tools/conform/conform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/platform/rtclock.h"

#define MAX_COUNTER 65536

typedef struct run {
    conform_t *c;
    conform_session_t *s;
    uint32_t L;
    uint64_t last;      /* the last tick to play */
    uint64_t sent_upto; /* the highest tick commanded */
    int64_t *sent_ns;   /* by our counter: when it was sent */
    uint8_t *seen;      /* by tick: a FEEDBACK with this header tick came */
    double *disp;       /* by tick: measured displacement (sample 0) */
    uint64_t n_fb, dup, beyond, bad_shape, mis_off, mis_con, rest_bad, hold, concealed;
    uint64_t echo_bad, echo_n, max_tick, other, stops, stop_tick, stop_reason, aborts;
    int64_t rtt_max, first_fb_ns, last_rx_ns, start_ns;
    uint64_t last_fb_counter;
    int64_t last_fb_ns;
    int epochs, epochs_after;
    bool got_fb;
} run_t;

static void cmd_at(const run_t *r, uint64_t t, drths_cmd_channel_t *ch)
{
    memset(ch, 0, sizeof *ch);
    if (t <= r->L || t > r->last)
        return;
    double rate = r->c->hello.rate_hz, T = (double)(r->last - r->L + 1) / rate;
    double w = 2 * M_PI / T, u = (double)(t - r->L) / rate, a = r->c->amplitude_m / 2;
    ch->disp_m = a * (1 - cos(w * u));
    ch->vel_m_s = a * w * sin(w * u);
    ch->acc_m_s2 = a * w * w * cos(w * u);
}

static void send_msg(run_t *r, drths_msg_t *m)
{
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    uint64_t counter = r->s->tx.next_counter;
    int64_t now = drths_now_ns(); /* before the send: the round trip is never short */
    size_t n = conform_seal(r->s, m, buf, sizeof buf);
    if (n && conform_send(r->c, &r->c->udp, &r->c->peer, buf, n) == 0 && counter < MAX_COUNTER)
        r->sent_ns[counter] = now;
}

static void send_command(run_t *r, uint64_t T)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_COMMAND;
    m.tick = T;
    m.epoch = 1;
    drths_msg_command_t *cm = &m.u.command;
    cm->loop_delay_ticks = r->L;
    cm->n_channels = r->c->hello.n_channels;
    for (int k = 0; k < r->c->hello.r && r->c->hello.offsets[k] <= T; k++) {
        for (int j = 0; j < cm->n_channels; j++)
            cmd_at(r, T - r->c->hello.offsets[k], &cm->s[k][j]);
        cm->r = (uint8_t)(k + 1);
    }
    cm->echo_counter = r->last_fb_counter;
    int64_t held = r->last_fb_counter ? drths_now_ns() - r->last_fb_ns : 0;
    cm->echo_hold_ns = held > 0 ? (uint64_t)held : 0;
    send_msg(r, &m);
}

static void send_epoch1(run_t *r)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_EPOCH;
    m.u.epoch.new_epoch = 1;
    m.u.epoch.loop_delay_ticks = r->L;
    r->epochs++;
    send_msg(r, &m);
}

static void send_stop(run_t *r)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_STOP;
    m.tick = r->last;
    m.epoch = 1;
    m.u.stop.reason = DRTHS_STOP_END_OF_RECORD;
    snprintf(m.u.stop.text, sizeof m.u.stop.text, "end of the conformance run");
    send_msg(r, &m);
}

/* One FEEDBACK sample k of header tick t: its layout (either t - offsets[k] or t - k), the
 * rest ticks' cmd_tick -1, the flags. */
static void on_sample(run_t *r, uint64_t t, int k, const drths_fb_sample_t *sm)
{
    const drths_msg_hello_t *h = &r->c->hello;
    int64_t t_off = (int64_t)t - h->offsets[k], t_con = (int64_t)t - k;
    if (sm->flags & DRTHS_FB_HOLD) {
        r->hold++;
        return;
    }
    r->concealed += k == 0 && (sm->flags & DRTHS_FB_CONCEALED);
    if (t_off >= 0 && (uint64_t)t_off <= r->L)
        r->mis_off += sm->cmd_tick != -1;
    else
        r->mis_off += sm->cmd_tick != t_off;
    if (t_con >= 0 && (uint64_t)t_con <= r->L)
        r->mis_con += sm->cmd_tick != -1;
    else
        r->mis_con += sm->cmd_tick != t_con;
    if (k == 0 && t <= r->L)
        r->rest_bad += sm->cmd_tick != -1;
}

static void on_feedback(run_t *r, const drths_msg_t *m, int64_t rx_ns)
{
    const drths_msg_feedback_t *f = &m->u.feedback;
    uint64_t t = m->tick;
    r->n_fb++;
    r->last_fb_counter = m->counter;
    r->last_fb_ns = rx_ns;
    if (!r->got_fb)
        r->first_fb_ns = rx_ns;
    r->got_fb = true;
    if (f->r > r->c->hello.r || f->r < 1 || (uint64_t)(f->r - 1) > t ||
        f->n_channels != r->c->hello.n_channels || m->epoch > 1)
        r->bad_shape++;
    if (t > r->last) {
        r->beyond++;
        return;
    }
    r->max_tick = t > r->max_tick ? t : r->max_tick;
    r->dup += r->seen[t];
    r->seen[t] = 1;
    r->disp[t] = f->s[0].ch[0].disp_m;
    for (int k = 0; k < f->r && k < r->c->hello.r; k++)
        on_sample(r, t, k, &f->s[k]);
    uint64_t e = f->echo_counter;
    if (e) {
        bool ok = e < r->s->tx.next_counter && e < MAX_COUNTER && r->sent_ns[e];
        int64_t rtt = ok ? rx_ns - r->sent_ns[e] - (int64_t)f->echo_hold_ns : -1;
        r->echo_bad += !ok || rtt <= 0 || rtt > 1000 * CONFORM_MS;
        r->rtt_max = rtt > r->rtt_max ? rtt : r->rtt_max;
        r->echo_n++;
    }
}

/* Receives what is waiting until deadline; returns false on an ABORT from the site. */
static bool receive(run_t *r, int64_t deadline)
{
    drths_msg_t m;
    while (conform_recv(r->c, &r->c->udp, deadline)) {
        deadline = 0; /* after the first, only what is already there */
        if (drths_wire_open(&r->s->rx, r->c->msg->data, r->c->msg->len, &m) != DRTHS_REJECT_OK) {
            r->other++;
            continue;
        }
        r->last_rx_ns = r->c->msg->rx_ns;
        if (m.type == DRTHS_MSG_FEEDBACK)
            on_feedback(r, &m, r->c->msg->rx_ns);
        else if (m.type == DRTHS_MSG_STOP) {
            r->stops++;
            r->stop_tick = m.tick;
            r->stop_reason = m.u.stop.reason;
        } else if (m.type == DRTHS_MSG_ABORT) {
            r->aborts++;
            printf("     the actuator site aborted: %s: %s\n",
                   drths_stop_reason_name(m.u.stop.reason), m.u.stop.text);
            return false;
        } else
            r->other++;
    }
    return true;
}

/* Forged and replayed HELLOs in the middle of the run. */
static void disturb(run_t *r)
{
    conform_t *c = r->c;
    conform_send(c, &c->udp, &c->peer, r->s->hello, r->s->hello_len);
    conform_session_t o;
    if (conform_session_open(c, &o, &c->hello, c->psk) == 0) {
        conform_send(c, &c->udp2, &c->peer, o.hello, o.hello_len);
        o.hello[o.hello_len - 1] ^= 1; /* a forged tag */
        conform_send(c, &c->udp, &c->peer, o.hello, o.hello_len);
        conform_session_close(&o);
    }
}

/* Start and run: returns false when the run could not go on. */
static bool run_loop(run_t *r)
{
    bool disturbed = false;
    int64_t next_epoch = drths_now_ns();
    r->start_ns = next_epoch;
    for (;;) {
        int64_t now = drths_now_ns();
        if (!r->got_fb && now >= next_epoch) {
            send_epoch1(r);
            if (r->epochs == 1)
                send_command(r, r->sent_upto = r->L + 1);
            next_epoch += 20 * CONFORM_MS;
        }
        if (r->got_fb && r->epochs_after == 0) {
            send_epoch1(r); /* as if a repeat crossed the first FEEDBACK: must be ignored */
            r->epochs_after = 1;
        }
        if (!r->got_fb && now - r->start_ns > 2000 * CONFORM_MS)
            return false;
        if (r->got_fb && now - r->last_rx_ns > 1000 * CONFORM_MS)
            return false;
        if (!receive(r, r->got_fb ? now + 50 * CONFORM_MS : next_epoch))
            return false;
        uint64_t want = r->max_tick + 1 + r->L;
        while (r->got_fb && r->sent_upto < want && r->sent_upto < r->last)
            send_command(r, ++r->sent_upto);
        if (!disturbed && r->max_tick >= r->L + (r->last - r->L) / 2) {
            disturb(r);
            disturbed = true;
        }
        if (r->sent_upto >= r->last)
            return true;
    }
}

/* STOP three times 10 ms apart, then the site's answer until 300 ms of quiet after its STOP
 * (or 2 s). */
static void close_run(run_t *r)
{
    int64_t t0 = drths_now_ns(), end = t0 + 2000 * CONFORM_MS;
    for (int i = 0; i < 3; i++) {
        send_stop(r);
        receive(r, t0 + (i + 1) * 10 * CONFORM_MS);
    }
    while (drths_now_ns() < end) {
        int64_t until = r->stops ? r->last_rx_ns + 300 * CONFORM_MS : end;
        if (!conform_recv(r->c, &r->c->udp, until < end ? until : end))
            break;
        drths_msg_t m;
        if (drths_wire_open(&r->s->rx, r->c->msg->data, r->c->msg->len, &m) != DRTHS_REJECT_OK) {
            r->other++;
            continue;
        }
        r->last_rx_ns = r->c->msg->rx_ns;
        if (m.type == DRTHS_MSG_FEEDBACK)
            on_feedback(r, &m, r->c->msg->rx_ns);
        else if (m.type == DRTHS_MSG_STOP) {
            r->stops++;
            r->stop_tick = m.tick;
            r->stop_reason = m.u.stop.reason;
        } else
            r->other++;
    }
}

/* The measured displacement over the rest ticks: its mean is the rig's zero (a real rig's
 * sensor need not read 0 at rest), its spread shows the drive stayed at rest. */
static double rest_zero(const run_t *r, double *spread)
{
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    uint64_t n = 0;
    for (uint64_t t = 0; t <= r->L; t++) {
        if (!r->seen[t])
            continue;
        sum += r->disp[t];
        lo = r->disp[t] < lo ? r->disp[t] : lo;
        hi = r->disp[t] > hi ? r->disp[t] : hi;
        n++;
    }
    *spread = n ? hi - lo : INFINITY;
    return n ? sum / (double)n : 0.0;
}

static void report_follow(run_t *r)
{
    double spread, zero = rest_zero(r, &spread);
    double maxerr = 0, peak = 0, A = r->c->amplitude_m;
    uint64_t n = 0;
    drths_cmd_channel_t ch;
    conform_check(r->c, r->rest_bad == 0 && spread <= 0.2 * A, "feedback-rest",
                  "rest ticks 0..%u: %llu with a command applied; measured displacement %.4g mm, "
                  "spread %.4g mm (limit a fifth of the amplitude)",
                  r->L, (unsigned long long)r->rest_bad, zero * 1e3, spread * 1e3);
    for (uint64_t t = r->L + 1; t <= r->last; t++) {
        if (!r->seen[t])
            continue;
        cmd_at(r, t, &ch);
        double d = r->disp[t] - zero, e = fabs(d - ch.disp_m);
        maxerr = e > maxerr ? e : maxerr;
        peak = d > peak ? d : peak;
        n++;
    }
    conform_check(r->c, n > 0 && maxerr < 0.5 * A && peak > 0.5 * A && peak < 1.5 * A,
                  "feedback-follows",
                  "measured displacement (from the rest reading) against the commanded bump of "
                  "%.3g mm over %llu ticks: peak %.4g mm, largest difference %.4g mm (limit half "
                  "the amplitude)",
                  A * 1e3, (unsigned long long)n, peak * 1e3, maxerr * 1e3);
}

static void report(run_t *r)
{
    conform_t *c = r->c;
    uint64_t ticks = 0;
    for (uint64_t t = 0; t <= r->last; t++)
        ticks += r->seen[t];
    conform_check(
        c, ticks * 100 >= (r->last + 1) * 95 && r->dup == 0 && r->beyond == 0 && r->bad_shape == 0,
        "feedback-ticks",
        "FEEDBACK for %llu of ticks 0..%llu, %llu duplicate(s), %llu beyond the last "
        "tick, %llu with a wrong n_channels / r / epoch",
        (unsigned long long)ticks, (unsigned long long)r->last, (unsigned long long)r->dup,
        (unsigned long long)r->beyond, (unsigned long long)r->bad_shape);
    conform_check(c, r->mis_off == 0 || r->mis_con == 0, "feedback-samples",
                  "sample k's cmd_tick: %llu differ from tick t - offsets[k], %llu from t - k "
                  "(one layout must fit all; -1 on rest ticks 0..L)",
                  (unsigned long long)r->mis_off, (unsigned long long)r->mis_con);
    conform_check(c, r->echo_n > 0 && r->echo_bad == 0, "feedback-echo",
                  "%llu FEEDBACKs echo a COMMAND counter, %llu of them not one we sent or giving "
                  "a round trip outside 0..1 s; largest round trip %.3f ms",
                  (unsigned long long)r->echo_n, (unsigned long long)r->echo_bad,
                  (double)r->rtt_max / 1e6);
    conform_check(c, r->hold == 0 && r->concealed * 100 <= r->n_fb * 2, "feedback-no-hold",
                  "%llu samples flagged HOLD, %llu of %llu FEEDBACKs concealed (limit 2 %%)",
                  (unsigned long long)r->hold, (unsigned long long)r->concealed,
                  (unsigned long long)r->n_fb);
    report_follow(r);
}

static void report_end(run_t *r, int disturbed_answers)
{
    conform_t *c = r->c;
    conform_check(c, disturbed_answers == 0 && r->other == 0 && r->hold == 0 && r->aborts == 0,
                  "hello-during-run",
                  "mid-run: the adopted HELLO replayed, another session's HELLO from another "
                  "port and a forged one: %d answer(s), %llu other datagram(s), run %s",
                  disturbed_answers, (unsigned long long)r->other,
                  r->hold || r->aborts ? "disturbed (HOLD or ABORT)" : "undisturbed");
    conform_check(
        c, r->stops > 0 && r->stop_tick == r->last && r->stop_reason == DRTHS_STOP_END_OF_RECORD,
        "stop-answer",
        "after our STOP (tick %llu): %llu STOP(s) from the site, tick %llu, reason %s",
        (unsigned long long)r->last, (unsigned long long)r->stops, (unsigned long long)r->stop_tick,
        drths_stop_reason_name((int)r->stop_reason));
    int after = 0;
    int64_t end = drths_now_ns() + 300 * CONFORM_MS;
    while (conform_recv(c, &c->udp, end))
        after++;
    conform_check(c, r->seen[r->last] && r->beyond == 0 && after == 0, "run-ends",
                  "FEEDBACK of the last tick %s, %llu beyond it, %d datagram(s) in the 300 ms "
                  "after the site's last",
                  r->seen[r->last] ? "came" : "missing", (unsigned long long)r->beyond, after);
}

void conform_run_numerical_session(conform_t *c, conform_session_t *s)
{
    run_t r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.s = s;
    r.L = (uint32_t)lround(0.02 * c->hello.rate_hz); /* 20 ms: room for a loaded machine */
    if (r.L < 2)
        r.L = 2;
    r.last = r.L + (uint64_t)c->run_ticks;
    r.sent_ns = calloc(MAX_COUNTER, sizeof *r.sent_ns);
    r.seen = calloc(r.last + 1, 1);
    r.disp = calloc(r.last + 1, sizeof *r.disp);
    if (!r.sent_ns || !r.seen || !r.disp) {
        conform_check(c, false, "run", "out of memory");
    } else if (!run_loop(&r)) {
        conform_check(c, false, "start-epoch", "EPOCH 1 sent %d time(s); %s", r.epochs,
                      r.got_fb ? "the site stopped answering or aborted during the run"
                               : "no FEEDBACK within 2 s");
    } else {
        conform_check(c, r.epochs >= 1 && r.got_fb, "start-epoch",
                      "EPOCH 1 (L = %u) sent %d time(s), 20 ms apart, until the first FEEDBACK "
                      "%.1f ms after the first, and once more after it (must be ignored: see "
                      "feedback-ticks)",
                      r.L, r.epochs - 1, (double)(r.first_fb_ns - r.start_ns) / 1e6);
        close_run(&r);
        int answers = 0;
        while (conform_recv(c, &c->udp2, 0))
            answers++;
        report(&r);
        report_end(&r, answers);
    }
    free(r.sent_ns);
    free(r.seen);
    free(r.disp);
}
