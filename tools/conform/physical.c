/* drths-conform --role physical: this tool is the actuator site (an ideal specimen: the
 * measured displacement is the command, the force 0), the site under test the numerical site.
 * Its first HELLO is left unanswered to see the repeat, the second adopted; then the probes,
 * the start, the run on this tool's tick clock, and the end. */
#include "tools/conform/conform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/platform/rtclock.h"
#include "protocol/fingerprint.h"

#define RING 65536       /* ticks of commands and measurements kept */
#define START_HOLD_MS 70 /* the first FEEDBACK is held back this long to see EPOCH repeats */
#define SILENCE_MS 1000  /* no datagram from the numerical site this long: it is gone */

typedef struct cmd_slot {
    uint64_t tick; /* tag; UINT64_MAX when empty */
    drths_cmd_channel_t ch[DRTHS_WIRE_MAX_CHANNELS];
} cmd_slot_t;

typedef struct phys {
    conform_t *c;
    drths_addr_t from;
    drths_wire_rx_t rx;
    drths_wire_tx_t tx;
    drths_msg_t m;
    uint64_t sid;
    uint8_t e_num[DRTHS_EPH_BYTES];
    uint8_t hello_plain[DRTHS_WIRE_MAX_HELLO_PAYLOAD];
    size_t hello_plain_len;
    drths_msg_hello_t h; /* the numerical site's HELLO */
    cmd_slot_t *cmd;     /* by tick % RING */
    double *meas;        /* measured displacement by tick % RING */
    int64_t *fb_sent_ns; /* by our counter % RING */
    uint32_t L;
    bool started, stopping;
    int epochs, epoch_bad, probes, aborts, stops;
    int64_t epoch_first_ns, epoch_last_ns, epoch_gap_min, epoch_gap_max, tick0_ns, last_rx_ns;
    uint64_t tick, first_cmd_tick, max_cmd_tick, stop_tick, n_cmd, cmd_shape, cmd_diff, late;
    uint64_t concealed, echo_n, echo_bad, last_cmd_counter, cmd_before_fb;
    int64_t last_cmd_ns, rtt_max;
    int stop_reason;
} phys_t;

/* Waits for a HELLO from anyone that opens; returns 1 with it in p->m and the sender in
 * p->from. */
static int wait_hello(phys_t *p, int64_t deadline)
{
    while (conform_recv(p->c, &p->c->udp, deadline)) {
        const drths_udp_msg_t *d = p->c->msg;
        drths_wire_header_t h;
        if (drths_wire_peek_header(d->data, d->len, &h) != DRTHS_REJECT_OK ||
            h.type != DRTHS_MSG_HELLO)
            continue;
        if (drths_wire_open_hello(&p->rx, d->data, d->len, &p->m) != DRTHS_REJECT_OK)
            continue;
        p->from = d->from;
        return 1;
    }
    return 0;
}

static bool same_sections(const drths_msg_hello_t *a, const drths_msg_hello_t *b, char *diff,
                          size_t cap)
{
    int n = drths_hello_section_diff(a, b, diff, cap);
    return n == 0 && a->n_sections == b->n_sections && a->n_sections > 0;
}

/* The first HELLO: header and fields. */
static void check_hello(phys_t *p)
{
    conform_t *c = p->c;
    const uint8_t *d = c->msg->data;
    const drths_msg_hello_t *h = &p->m.u.hello, *o = &c->hello;
    bool hdr = d[4] == 2 && p->m.has_eph && p->m.counter == 1 && p->m.tick == 0 && p->m.epoch == 0;
    conform_check(c, hdr, "hello-format",
                  "first HELLO: header version %u, ephemeral %s, counter %llu, tick %llu, epoch "
                  "%u (expected 2, present, 1, 0, 0)",
                  d[4], p->m.has_eph ? "present" : "absent", (unsigned long long)p->m.counter,
                  (unsigned long long)p->m.tick, p->m.epoch);
    bool offs = h->r == o->r && memcmp(h->offsets, o->offsets, o->r * sizeof o->offsets[0]) == 0;
    /* The fields the actuator site itself checks (drths_hello_mismatch: a common version, the
     * fingerprint, rate, channels, redundancy, units), and what a first HELLO of version 2 must
     * say besides. */
    char why[DRTHS_WIRE_MAX_TEXT + 1];
    bool ok = h->proto_min <= 2 && h->proto_max >= 2 && h->role == DRTHS_ROLE_NUMERICAL &&
              h->version == 0 && drths_hello_mismatch(o, h, why, sizeof why) == 0;
    char list[128] = "";
    for (int k = 0; k < h->r; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%u", k ? "," : "",
                 h->offsets[k]);
    conform_check(c, ok, "hello-fields",
                  "versions %u..%u, role %u, version %u, link %u, %g Hz, %u channel(s), offsets "
                  "%s (%s the experiment's), units %s, fingerprint %s, software \"%s\"",
                  h->proto_min, h->proto_max, h->role, h->version, h->link, h->rate_hz,
                  h->n_channels, list, offs ? "as" : "NOT", h->units,
                  memcmp(h->fingerprint, o->fingerprint, 32) ? "differs" : "equal", h->software);
    /* PROTOCOL.md section 12: link i of a file with sites goes to sites[i]; a file without
     * sites is link 0. */
    int want = c->link < 0 ? 0 : c->link;
    conform_check(c, h->link == want, "hello-link", "HELLO for link %u, %d expected (%s%s)",
                  h->link, want, c->exp.site ? "the index of site " : "a file without sites",
                  c->exp.site ? c->exp.site->name : "");
    char diff[128];
    bool secs = same_sections(o, h, diff, sizeof diff);
    conform_check(c, secs, "hello-sections", "%u section hashes listed, %d expected; differing: %s",
                  h->n_sections, o->n_sections, diff[0] ? diff : "none");
}

/* The repeat of the unanswered HELLO: same session, ephemeral and payload, next counter. */
static int check_repeat(phys_t *p, int64_t first_ns)
{
    conform_t *c = p->c;
    uint64_t sid = p->m.session_id, ctr = p->m.counter;
    uint8_t e[DRTHS_EPH_BYTES], plain[DRTHS_WIRE_MAX_HELLO_PAYLOAD];
    size_t plen = p->rx.plain_len < sizeof plain ? p->rx.plain_len : 0;
    memcpy(e, p->m.eph, sizeof e);
    memcpy(plain, p->rx.plain, plen);
    if (!wait_hello(p, drths_now_ns() + 1500 * CONFORM_MS)) {
        conform_check(c, false, "hello-repeat", "no second HELLO within 1.5 s of the first");
        return 0;
    }
    double gap = (double)(c->msg->rx_ns - first_ns) / 1e6;
    bool ok = p->m.session_id == sid && memcmp(p->m.eph, e, sizeof e) == 0 &&
              p->m.counter == ctr + 1 && p->rx.plain_len == plen &&
              memcmp(p->rx.plain, plain, plen) == 0 && gap > 100 && gap < 400;
    conform_check(c, ok, "hello-repeat",
                  "unanswered, the HELLO came again after %.0f ms (200 expected) with counter "
                  "%llu, %s session and ephemeral, %s payload",
                  gap, (unsigned long long)p->m.counter,
                  p->m.session_id == sid && !memcmp(p->m.eph, e, 32) ? "the same" : "ANOTHER",
                  p->rx.plain_len == plen && !memcmp(p->rx.plain, plain, plen) ? "the same"
                                                                               : "ANOTHER");
    return 1;
}

/* Adopts the HELLO in p->m as the actuator site does (PROTOCOL.md section 7.4, Adopt);
 * mismatch makes the HELLO_ACK's fingerprint and one section hash differ. */
static int adopt(phys_t *p, bool mismatch)
{
    conform_t *c = p->c;
    p->sid = p->m.session_id;
    memcpy(p->e_num, p->m.eph, sizeof p->e_num);
    p->h = p->m.u.hello;
    p->hello_plain_len = p->rx.plain_len;
    memcpy(p->hello_plain, p->rx.plain, p->hello_plain_len);
    uint8_t sk[DRTHS_EPH_BYTES], pk[DRTHS_EPH_BYTES], dh[DRTHS_KEY_BYTES], k[DRTHS_KEY_BYTES];
    drths_crypto_eph_keypair(pk, sk);
    int rc = drths_crypto_dh(dh, sk, p->e_num);
    drths_crypto_wipe(sk, sizeof sk);
    if (rc != 0 || drths_wire_tx_init(&p->tx, DRTHS_ROLE_PHYSICAL, p->sid) != 0)
        return -1;
    drths_wire_rx_start(&p->rx, p->sid);
    drths_wire_rx_set_peer_eph(&p->rx, p->e_num);
    drths_replay_update(&p->rx.replay, p->m.counter);
    drths_crypto_derive_ack(c->psk, p->sid, p->e_num, pk, dh, k);
    drths_wire_tx_set_handshake(&p->tx, k, pk);
    drths_msg_t a;
    memset(&a, 0, sizeof a);
    a.type = DRTHS_MSG_HELLO_ACK;
    a.u.hello = c->hello;
    a.u.hello.link = p->h.link;
    a.u.hello.version = 2;
    if (mismatch) {
        a.u.hello.fingerprint[0] ^= 0xff;
        if (a.u.hello.n_sections > 2)
            a.u.hello.sections[2].hash[0] ^= 0xff;
    }
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len = 0;
    if (drths_wire_seal(&p->tx, &a, buf, sizeof buf, &len) != 0)
        return -1;
    conform_send(c, &c->udp, &p->from, buf, len);
    uint8_t th[DRTHS_KEY_BYTES];
    drths_crypto_transcript(th, p->sid, p->e_num, p->hello_plain, p->hello_plain_len, pk,
                            p->tx.hs_plain, p->tx.hs_plain_len);
    drths_session_keys_t keys;
    drths_crypto_derive(c->psk, dh, th, &keys);
    drths_wire_tx_set_keys(&p->tx, &keys);
    drths_wire_rx_set_keys(&p->rx, &keys);
    drths_crypto_wipe(&keys, sizeof keys);
    drths_crypto_wipe(dh, sizeof dh);
    drths_crypto_wipe(k, sizeof k);
    return 0;
}

static void send_msg(phys_t *p, drths_msg_t *m)
{
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len = 0;
    uint64_t counter = p->tx.next_counter;
    int64_t now = drths_now_ns();
    if (drths_wire_seal(&p->tx, m, buf, sizeof buf, &len) == 0 &&
        conform_send(p->c, &p->c->udp, &p->from, buf, len) == 0)
        p->fb_sent_ns[counter % RING] = now;
}

static void on_probe(phys_t *p, const drths_msg_t *m, int64_t rx_ns)
{
    drths_msg_t e;
    memset(&e, 0, sizeof e);
    e.type = DRTHS_MSG_PROBE_ECHO;
    e.tick = m->tick;
    e.epoch = m->epoch;
    e.u.probe = m->u.probe;
    int64_t held = drths_now_ns() - rx_ns;
    e.u.probe.hold_ns = held > 0 ? (uint64_t)held : 0;
    send_msg(p, &e);
    p->probes++;
}

static void on_epoch(phys_t *p, const drths_msg_t *m, int64_t rx_ns)
{
    const drths_msg_epoch_t *e = &m->u.epoch;
    if (e->new_epoch != 1)
        return; /* later epochs: this short suite does not follow L changes */
    p->epoch_bad += e->effective_tick != 0 || m->tick != 0 || m->epoch != 0 ||
                    (p->epochs && e->loop_delay_ticks != p->L);
    if (p->epochs) {
        int64_t gap = rx_ns - p->epoch_last_ns;
        p->epoch_gap_min = p->epochs == 1 || gap < p->epoch_gap_min ? gap : p->epoch_gap_min;
        p->epoch_gap_max = gap > p->epoch_gap_max ? gap : p->epoch_gap_max;
    } else {
        p->L = e->loop_delay_ticks;
        p->epoch_first_ns = rx_ns;
        p->tick0_ns = rx_ns + START_HOLD_MS * CONFORM_MS;
        p->started = true;
    }
    p->epoch_last_ns = rx_ns;
    p->epochs++;
}

/* Sample k of COMMAND tick T is the command for T - offsets[k]: every tick's command must be
 * the same in every datagram that carries it. */
static void on_command(phys_t *p, const drths_msg_t *m, int64_t rx_ns)
{
    const drths_msg_command_t *cm = &m->u.command;
    uint64_t T = m->tick;
    p->n_cmd++;
    p->cmd_before_fb += p->tick == 0 && drths_now_ns() < p->tick0_ns;
    p->first_cmd_tick = p->n_cmd == 1 ? T : p->first_cmd_tick;
    p->max_cmd_tick = T > p->max_cmd_tick ? T : p->max_cmd_tick;
    p->cmd_shape += cm->n_channels != p->h.n_channels || cm->r > p->h.r ||
                    cm->loop_delay_ticks != p->L || m->epoch != 1;
    for (int k = 0; k < cm->r && k < p->h.r; k++) {
        uint64_t u = T - p->h.offsets[k];
        cmd_slot_t *s = &p->cmd[u % RING];
        if (s->tick != u) {
            s->tick = u;
            memcpy(s->ch, cm->s[k], sizeof s->ch);
            p->late += k == 0 && p->started && u < p->tick;
        } else {
            p->cmd_diff += memcmp(s->ch, cm->s[k], cm->n_channels * sizeof s->ch[0]) != 0;
        }
    }
    p->last_cmd_counter = m->counter;
    p->last_cmd_ns = rx_ns;
    uint64_t e = cm->echo_counter;
    if (e) {
        int64_t sent = p->fb_sent_ns[e % RING];
        int64_t rtt = rx_ns - sent - (int64_t)cm->echo_hold_ns;
        bool ok = e < p->tx.next_counter && sent && rtt > 0 && rtt < 1000 * CONFORM_MS;
        p->echo_bad += !ok;
        p->rtt_max = ok && rtt > p->rtt_max ? rtt : p->rtt_max;
        p->echo_n++;
    }
}

/* Everything from the numerical site until deadline. */
static void receive(phys_t *p, int64_t deadline)
{
    conform_t *c = p->c;
    while (conform_recv(c, &c->udp, deadline)) {
        deadline = 0;
        const drths_udp_msg_t *d = c->msg;
        drths_msg_t m;
        if (!drths_addr_equal(&d->from, &p->from) ||
            drths_wire_open(&p->rx, d->data, d->len, &m) != DRTHS_REJECT_OK)
            continue;
        p->last_rx_ns = d->rx_ns;
        switch (m.type) {
        case DRTHS_MSG_PROBE:
            on_probe(p, &m, d->rx_ns);
            break;
        case DRTHS_MSG_EPOCH:
            on_epoch(p, &m, d->rx_ns);
            break;
        case DRTHS_MSG_COMMAND:
            on_command(p, &m, d->rx_ns);
            break;
        case DRTHS_MSG_STOP:
            p->stops++;
            p->stop_tick = m.tick;
            p->stop_reason = m.u.stop.reason;
            p->stopping = true;
            break;
        case DRTHS_MSG_ABORT:
            p->aborts++;
            printf("     the numerical site aborted: %s: %s\n",
                   drths_stop_reason_name(m.u.stop.reason), m.u.stop.text);
            break;
        default:
            break;
        }
    }
}

/* The measurement of tick t: the command played (ideal specimen), the rest position up to L,
 * the last one held when the command is missing (concealed). */
static void measure(phys_t *p, uint64_t t, drths_fb_sample_t *s)
{
    memset(s, 0, sizeof *s);
    const cmd_slot_t *cs = &p->cmd[t % RING];
    double prev = t ? p->meas[(t - 1) % RING] : 0.0;
    if (t <= p->L) {
        s->cmd_tick = -1;
        p->meas[t % RING] = 0.0;
    } else if (cs->tick == t) {
        s->cmd_tick = (int64_t)t;
        p->meas[t % RING] = cs->ch[0].disp_m;
    } else {
        s->cmd_tick = (int64_t)t;
        s->flags = DRTHS_FB_CONCEALED;
        p->meas[t % RING] = prev;
        p->concealed++;
    }
    for (int j = 0; j < p->h.n_channels; j++)
        s->ch[j].disp_m = p->meas[t % RING];
}

/* FEEDBACK of tick t: sample k is the measurement of tick t - offsets[k] (the offsets of the
 * HELLO; t - k for R <= 4). Measurements are remade from the ring, flags included. */
static void send_feedback(phys_t *p, uint64_t t)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_FEEDBACK;
    m.tick = t;
    m.epoch = 1;
    drths_msg_feedback_t *f = &m.u.feedback;
    f->n_channels = p->h.n_channels;
    drths_fb_sample_t s0;
    measure(p, t, &s0);
    for (int k = 0; k < p->h.r && p->h.offsets[k] <= t; k++) {
        uint64_t u = t - p->h.offsets[k];
        f->s[k] = s0;
        if (k) {
            f->s[k].cmd_tick = u <= p->L ? -1 : (int64_t)u;
            f->s[k].flags = p->cmd[u % RING].tick == u || u <= p->L ? 0 : DRTHS_FB_CONCEALED;
            for (int j = 0; j < p->h.n_channels; j++)
                f->s[k].ch[j].disp_m = p->meas[u % RING];
        }
        f->r = (uint8_t)(k + 1);
    }
    f->echo_counter = p->last_cmd_counter;
    int64_t held = p->last_cmd_counter ? drths_now_ns() - p->last_cmd_ns : 0;
    f->echo_hold_ns = held > 0 ? (uint64_t)held : 0;
    send_msg(p, &m);
}

static void send_stops(phys_t *p)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_STOP;
    m.tick = p->stop_tick;
    m.epoch = 1;
    m.u.stop.reason = DRTHS_STOP_END_OF_RECORD;
    snprintf(m.u.stop.text, sizeof m.u.stop.text, "end of record (conformance actuator site)");
    for (int i = 0; i < 3; i++) {
        send_msg(p, &m);
        receive(p, drths_now_ns() + 10 * CONFORM_MS);
    }
}

/* Until EPOCH 1 (probes answered on the way), then the tick clock until the STOP's tick.
 * Returns a sentence on failure, NULL when the run ended with STOP. */
static const char *serve(phys_t *p, int64_t deadline)
{
    int64_t dt = (int64_t)llround(1e9 / p->h.rate_hz);
    p->last_rx_ns = drths_now_ns();
    while (!p->started) {
        receive(p, drths_now_ns() + 50 * CONFORM_MS);
        if (p->aborts || drths_now_ns() > deadline)
            return p->aborts ? "the numerical site aborted before the start"
                             : "no EPOCH 1 before the timeout";
    }
    for (;;) {
        int64_t due = p->tick0_ns + (int64_t)p->tick * dt;
        receive(p, due);
        if (p->aborts)
            return "the numerical site aborted during the run";
        if (drths_now_ns() - p->last_rx_ns > SILENCE_MS * CONFORM_MS)
            return "the numerical site went silent for 1 s during the run";
        if (drths_now_ns() < due)
            continue;
        send_feedback(p, p->tick);
        if (p->stopping && p->tick >= p->stop_tick)
            break;
        p->tick++;
    }
    send_stops(p);
    return NULL;
}

static void report(phys_t *p)
{
    conform_t *c = p->c;
    double gmin = (double)p->epoch_gap_min / 1e6, gmax = (double)p->epoch_gap_max / 1e6;
    conform_check(c, p->epochs >= 2 && p->epoch_bad == 0 && gmin > 10 && gmax < 40, "start-epoch",
                  "with the first FEEDBACK held back %d ms: %d EPOCH 1 (L = %u), %.1f..%.1f ms "
                  "apart (20 expected), %d with other fields than new_epoch 1, effective_tick 0, "
                  "header tick 0, epoch 0",
                  START_HOLD_MS, p->epochs, p->L, gmin, gmax, p->epoch_bad);
    conform_check(c, p->first_cmd_tick == p->L + 1 && p->cmd_before_fb > 0, "command-first",
                  "first COMMAND for tick %llu (L + 1 = %u expected), %llu COMMAND(s) before our "
                  "first FEEDBACK",
                  (unsigned long long)p->first_cmd_tick, p->L + 1,
                  (unsigned long long)p->cmd_before_fb);
    conform_check(c, p->n_cmd > 0 && p->cmd_shape == 0 && p->cmd_diff == 0, "command-samples",
                  "%llu COMMANDs: %llu with another n_channels, r > R, L or epoch; %llu samples "
                  "for tick T - offsets[k] differing from another datagram's for that tick",
                  (unsigned long long)p->n_cmd, (unsigned long long)p->cmd_shape,
                  (unsigned long long)p->cmd_diff);
    conform_check(c, p->echo_n > 0 && p->echo_bad == 0, "command-echo",
                  "%llu COMMANDs echo a FEEDBACK counter, %llu not ours or with a round trip "
                  "outside 0..1 s; largest %.3f ms",
                  (unsigned long long)p->echo_n, (unsigned long long)p->echo_bad,
                  (double)p->rtt_max / 1e6);
    conform_check(c, (p->concealed + p->late) * 50 <= p->tick + 1, "command-timely",
                  "%llu of %llu ticks without their command in time (concealed), %llu "
                  "commands late (limit 2 %%)",
                  (unsigned long long)p->concealed, (unsigned long long)(p->tick + 1),
                  (unsigned long long)p->late);
    conform_check(c,
                  p->stops > 0 && p->stop_tick == p->max_cmd_tick &&
                      p->stop_reason == DRTHS_STOP_END_OF_RECORD,
                  "stop-sent",
                  "%d STOP(s) received, tick %llu (the last commanded tick is %llu), reason %s",
                  p->stops, (unsigned long long)p->stop_tick, (unsigned long long)p->max_cmd_tick,
                  drths_stop_reason_name(p->stop_reason));
}

/* --mismatch: a HELLO_ACK whose fingerprint differs must get ABORT FINGERPRINT_MISMATCH. */
static void check_mismatch(phys_t *p)
{
    conform_t *c = p->c;
    const char *section = c->hello.n_sections > 2 ? c->hello.sections[2].name : "";
    p->stops = p->aborts = 0;
    int64_t end = drths_now_ns() + 2000 * CONFORM_MS;
    drths_msg_t m;
    int got = 0;
    while (!got && conform_recv(c, &c->udp, end))
        got = drths_wire_open(&p->rx, c->msg->data, c->msg->len, &m) == DRTHS_REJECT_OK &&
              m.type == DRTHS_MSG_ABORT;
    conform_check(c,
                  got && m.u.stop.reason == DRTHS_STOP_FINGERPRINT_MISMATCH &&
                      strstr(m.u.stop.text, section) != NULL,
                  "fingerprint-abort",
                  "a HELLO_ACK whose fingerprint and '%s' hash differ: %s%s \"%s\"", section,
                  got ? "ABORT " : "no ABORT in 2 s",
                  got ? drths_stop_reason_name(m.u.stop.reason) : "", got ? m.u.stop.text : "");
}

void conform_run_physical(conform_t *c)
{
    static phys_t p;
    drths_error_t err;
    p.c = c;
    p.cmd = calloc(RING, sizeof *p.cmd);
    p.meas = calloc(RING, sizeof *p.meas);
    p.fb_sent_ns = calloc(RING, sizeof *p.fb_sent_ns);
    if (!p.cmd || !p.meas || !p.fb_sent_ns ||
        drths_wire_rx_init(&p.rx, DRTHS_ROLE_PHYSICAL, c->psk, &err) != 0) {
        conform_check(c, false, "set-up", "out of memory");
        return;
    }
    for (int i = 0; i < RING; i++)
        p.cmd[i].tick = UINT64_MAX;
    int64_t deadline = drths_now_ns() + (int64_t)(c->timeout_s * 1e9);
    if (!wait_hello(&p, deadline)) {
        conform_check(c, false, "hello-format", "no HELLO that opens within %g s", c->timeout_s);
    } else {
        int64_t first_ns = c->msg->rx_ns;
        check_hello(&p);
        if (check_repeat(&p, first_ns) && adopt(&p, c->mismatch) == 0) {
            if (c->mismatch) {
                check_mismatch(&p);
            } else {
                const char *why = serve(&p, deadline);
                conform_check(c, p.probes > 0, "probes", "%d PROBE(s) answered", p.probes);
                if (why)
                    conform_check(c, false, "run", "%s", why);
                report(&p);
            }
        }
    }
    drths_wire_rx_close(&p.rx);
    drths_wire_tx_close(&p.tx);
    free(p.cmd);
    free(p.meas);
    free(p.fb_sent_ns);
}
