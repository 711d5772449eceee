/* Fixed example messages and keys shared by test_wire.c, test_protocol_doc.c and the datagram
 * fuzz target. The PROTOCOL.md hex dumps were generated from exactly these (run
 * `DRTHS_PRINT_EXAMPLES=1 ./unit_protocol_doc`), so changing a value here means regenerating
 * the dumps. */
#ifndef DRTHS_TEST_WIRE_EXAMPLES_H
#define DRTHS_TEST_WIRE_EXAMPLES_H

#include <stdio.h>
#include <string.h>

#include "protocol/wire.h"

#define EX_SESSION_ID UINT64_C(0x0123456789abcdef)

static inline void ex_fill(uint8_t *p, uint8_t first, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(first + i);
}

/* PSK 00 01 .. 1f, nonce_num 40 .. 5f, nonce_phys 60 .. 7f, fingerprint a0 .. bf. */
static inline void ex_psk(uint8_t k[DRTHS_KEY_BYTES]) { ex_fill(k, 0x00, DRTHS_KEY_BYTES); }
static inline void ex_nonce_num(uint8_t n[32]) { ex_fill(n, 0x40, 32); }
static inline void ex_nonce_phys(uint8_t n[32]) { ex_fill(n, 0x60, 32); }

static const drths_msg_type_t ex_types[] = {
    DRTHS_MSG_HELLO,    DRTHS_MSG_HELLO_ACK, DRTHS_MSG_PROBE,     DRTHS_MSG_PROBE_ECHO,
    DRTHS_MSG_COMMAND,  DRTHS_MSG_FEEDBACK,  DRTHS_MSG_EPOCH,     DRTHS_MSG_HEARTBEAT,
    DRTHS_MSG_STOP,     DRTHS_MSG_ABORT,
};
#define EX_NTYPES ((int)(sizeof ex_types / sizeof ex_types[0]))

/* The role that sends the example of this type (types that go both ways: the one shown). */
static inline drths_role_t ex_sender(drths_msg_type_t t)
{
    switch (t) {
    case DRTHS_MSG_HELLO_ACK:
    case DRTHS_MSG_PROBE_ECHO:
    case DRTHS_MSG_FEEDBACK:
    case DRTHS_MSG_ABORT:
        return DRTHS_ROLE_PHYSICAL;
    default:
        return DRTHS_ROLE_NUMERICAL;
    }
}

/* The counter each example is sealed with, so the dumps show realistic values. */
static inline uint64_t ex_counter(drths_msg_type_t t)
{
    switch (t) {
    case DRTHS_MSG_HELLO: return 1;
    case DRTHS_MSG_HELLO_ACK: return 1;
    case DRTHS_MSG_PROBE: return 2;
    case DRTHS_MSG_PROBE_ECHO: return 2;
    case DRTHS_MSG_COMMAND: return 1503;
    case DRTHS_MSG_FEEDBACK: return 1001;
    case DRTHS_MSG_EPOCH: return 1504;
    case DRTHS_MSG_HEARTBEAT: return 1505;
    case DRTHS_MSG_STOP: return 6502;
    case DRTHS_MSG_ABORT: return 6000;
    }
    return 1;
}

static inline void ex_msg(drths_msg_type_t t, drths_msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->type = t;
    switch (t) {
    case DRTHS_MSG_HELLO:
    case DRTHS_MSG_HELLO_ACK: {
        drths_msg_hello_t *h = &m->u.hello;
        h->proto_min = 1;
        h->proto_max = 1;
        h->role = t == DRTHS_MSG_HELLO ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL;
        h->rate_hz = 5000.0;
        h->n_channels = 1;
        h->r = 4;
        strcpy(h->units, "SI");
        if (t == DRTHS_MSG_HELLO)
            ex_nonce_num(h->nonce);
        else
            ex_nonce_phys(h->nonce);
        ex_fill(h->fingerprint, 0xa0, 32);
        strcpy(h->software, "drths 0.1.0");
        break;
    }
    case DRTHS_MSG_PROBE:
        m->u.probe.seq = 7;
        m->u.probe.send_time_ns = UINT64_C(1700000000123456789);
        break;
    case DRTHS_MSG_PROBE_ECHO:
        m->u.probe.seq = 7;
        m->u.probe.send_time_ns = UINT64_C(1700000000123456789);
        m->u.probe.hold_ns = 41250;
        break;
    case DRTHS_MSG_COMMAND: {
        drths_msg_command_t *c = &m->u.command;
        m->tick = 1500;
        m->epoch = 1;
        c->loop_delay_ticks = 250;
        c->n_channels = 2;
        c->r = 3;
        c->echo_counter = 998;
        c->echo_hold_ns = 120500;
        for (int k = 0; k < 3; k++)
            for (int j = 0; j < 2; j++) {
                drths_cmd_channel_t *s = &c->s[k][j];
                s->disp_m = 0.0125 - 0.0005 * k + 0.25 * j;
                s->vel_m_s = -0.5 + 0.125 * k - j;
                s->acc_m_s2 = 3.75 + k + 2 * j;
                s->damper_cmd = 1.5 + 0.25 * j;
            }
        break;
    }
    case DRTHS_MSG_FEEDBACK: {
        drths_msg_feedback_t *f = &m->u.feedback;
        m->tick = 1250;
        m->epoch = 1;
        f->n_channels = 1;
        f->r = 4;
        f->echo_counter = 1002;
        f->echo_hold_ns = 87000;
        for (int k = 0; k < 4; k++) {
            f->s[k].cmd_tick = 1250 - k;
            f->s[k].flags = k == 2 ? DRTHS_FB_CONCEALED : 0;
            f->s[k].ch[0].force_n = -12500.5 + 100.0 * k;
            f->s[k].ch[0].disp_m = 0.01 - 0.001 * k;
        }
        break;
    }
    case DRTHS_MSG_EPOCH:
        m->tick = 1501;
        m->epoch = 1;
        m->u.epoch.new_epoch = 2;
        m->u.epoch.loop_delay_ticks = 300;
        m->u.epoch.effective_tick = 2000;
        break;
    case DRTHS_MSG_HEARTBEAT:
        m->tick = 1502;
        m->epoch = 1;
        m->u.heartbeat.state = DRTHS_STATE_RUNNING;
        break;
    case DRTHS_MSG_STOP:
        m->tick = 6500;
        m->epoch = 2;
        m->u.stop.reason = DRTHS_STOP_END_OF_RECORD;
        strcpy(m->u.stop.text, "end of ground-motion record");
        break;
    case DRTHS_MSG_ABORT:
        m->tick = 5999;
        m->epoch = 2;
        m->u.stop.reason = DRTHS_STOP_LIMIT;
        strcpy(m->u.stop.text, "force limit exceeded: 212000 N > 200000 N");
        break;
    }
}

/* Seals example t as its sender would in the example session (fixed keys and counters). */
static inline int ex_seal(drths_msg_type_t t, uint8_t *buf, size_t cap, size_t *len)
{
    uint8_t psk[32], nn[32], np[32];
    ex_psk(psk);
    ex_nonce_num(nn);
    ex_nonce_phys(np);
    drths_session_keys_t keys;
    drths_crypto_derive(psk, nn, np, EX_SESSION_ID, &keys);
    drths_wire_tx_t tx;
    int rc = drths_wire_tx_init(&tx, ex_sender(t), psk, EX_SESSION_ID);
    if (rc != 0)
        return rc;
    drths_wire_tx_set_keys(&tx, &keys);
    tx.next_counter = ex_counter(t);
    drths_msg_t m;
    ex_msg(t, &m);
    rc = drths_wire_seal(&tx, &m, buf, cap, len);
    drths_wire_tx_close(&tx);
    return rc;
}

/* A receiver of the example session for role self, keys installed. */
static inline int ex_rx(drths_wire_rx_t *rx, drths_role_t self)
{
    uint8_t psk[32], nn[32], np[32];
    ex_psk(psk);
    ex_nonce_num(nn);
    ex_nonce_phys(np);
    int rc = drths_wire_rx_init(rx, self, psk, NULL);
    if (rc != 0)
        return rc;
    drths_session_keys_t keys;
    drths_crypto_derive(psk, nn, np, EX_SESSION_ID, &keys);
    drths_wire_rx_start(rx, EX_SESSION_ID);
    drths_wire_rx_set_keys(rx, &keys);
    return 0;
}

#endif
