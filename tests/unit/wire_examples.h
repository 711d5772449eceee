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

/* PSK 00 01 .. 1f, ephemeral secrets 40 .. 5f (numerical) and 60 .. 7f (physical),
 * fingerprint a0 .. bf. */
static inline void ex_psk(uint8_t k[DRTHS_KEY_BYTES]) { ex_fill(k, 0x00, DRTHS_KEY_BYTES); }
static inline void ex_eph_num_sk(uint8_t n[32]) { ex_fill(n, 0x40, 32); }
static inline void ex_eph_phys_sk(uint8_t n[32]) { ex_fill(n, 0x60, 32); }

static inline void ex_msg(drths_msg_type_t t, drths_msg_t *m);

/* Every key of the example session, derived as the sites do. */
typedef struct ex_keys {
    uint8_t psk[32], en_sk[32], en_pk[32], ep_sk[32], ep_pk[32], dh[32];
    uint8_t hello_key[32], ack_key[32], transcript[32];
    drths_session_keys_t keys;
} ex_keys_t;

/* The plaintext payload of example HELLO / HELLO_ACK (for the transcript). */
static inline size_t ex_hello_plain(drths_msg_type_t t, const ex_keys_t *k, uint8_t *out)
{
    drths_wire_tx_t tx;
    drths_msg_t m;
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    size_t len = 0;
    drths_wire_tx_init(&tx, t == DRTHS_MSG_HELLO ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL,
                       EX_SESSION_ID);
    drths_wire_tx_set_handshake(&tx, k->hello_key, k->en_pk);
    ex_msg(t, &m);
    if (drths_wire_seal(&tx, &m, buf, sizeof buf, &len) != 0)
        return 0;
    memcpy(out, tx.hs_plain, tx.hs_plain_len);
    len = tx.hs_plain_len;
    drths_wire_tx_close(&tx);
    return len;
}

static inline void ex_keys(ex_keys_t *k)
{
    ex_psk(k->psk);
    ex_eph_num_sk(k->en_sk);
    ex_eph_phys_sk(k->ep_sk);
    drths_crypto_eph_public(k->en_pk, k->en_sk);
    drths_crypto_eph_public(k->ep_pk, k->ep_sk);
    if (drths_crypto_dh(k->dh, k->en_sk, k->ep_pk) != 0)
        memset(k->dh, 0, 32);
    drths_crypto_derive_hello(k->psk, EX_SESSION_ID, k->en_pk, k->hello_key);
    drths_crypto_derive_ack(k->psk, EX_SESSION_ID, k->en_pk, k->ep_pk, k->dh, k->ack_key);
    uint8_t h[DRTHS_WIRE_MAX_HELLO_PAYLOAD], a[DRTHS_WIRE_MAX_HELLO_PAYLOAD];
    size_t hl = ex_hello_plain(DRTHS_MSG_HELLO, k, h);
    size_t al = ex_hello_plain(DRTHS_MSG_HELLO_ACK, k, a);
    drths_crypto_transcript(k->transcript, EX_SESSION_ID, k->en_pk, h, hl, k->ep_pk, a, al);
    drths_crypto_derive(k->psk, k->dh, k->transcript, &k->keys);
}

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
        static const char *const sec[] = {"name", "rate_hz", "structure", "ground_motion",
                                          "specimen", "control", "link"};
        h->proto_min = 2;
        h->proto_max = 2;
        h->role = t == DRTHS_MSG_HELLO ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL;
        h->version = t == DRTHS_MSG_HELLO ? 0 : 2;
        h->link = 0;
        strcpy(h->site, t == DRTHS_MSG_HELLO ? "num-lab" : "act-lab");
        h->rate_hz = 5000.0;
        h->n_channels = 1;
        h->r = 4;
        for (int k = 0; k < 4; k++)
            h->offsets[k] = (uint16_t)(k < 2 ? k : 4 * (k - 1));
        strcpy(h->units, "SI");
        ex_fill(h->fingerprint, 0xa0, 32);
        h->n_sections = 7;
        for (int i = 0; i < 7; i++) {
            strcpy(h->sections[i].name, sec[i]);
            ex_fill(h->sections[i].hash, (uint8_t)(0x10 * (i + 1)), DRTHS_WIRE_SECTION_HASH);
        }
        strcpy(h->software, "drths 0.2.0");
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
        /* The HELLOs' offsets 0, 1, 4, 8: measurements of ticks 1250, 1249, 1246, 1242. */
        static const int64_t off[4] = {0, 1, 4, 8};
        for (int k = 0; k < 4; k++) {
            f->s[k].cmd_tick = 1250 - off[k];
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
    ex_keys_t k;
    ex_keys(&k);
    drths_wire_tx_t tx;
    int rc = drths_wire_tx_init(&tx, ex_sender(t), EX_SESSION_ID);
    if (rc != 0)
        return rc;
    if (ex_sender(t) == DRTHS_ROLE_NUMERICAL)
        drths_wire_tx_set_handshake(&tx, k.hello_key, k.en_pk);
    else
        drths_wire_tx_set_handshake(&tx, k.ack_key, k.ep_pk);
    drths_wire_tx_set_keys(&tx, &k.keys);
    tx.next_counter = ex_counter(t);
    drths_msg_t m;
    ex_msg(t, &m);
    rc = drths_wire_seal(&tx, &m, buf, cap, len);
    drths_wire_tx_close(&tx);
    return rc;
}

/* A receiver of the example session for role self, keys installed; the numerical one also
 * keeps its ephemeral secret (a site wipes it with the keys), so it opens HELLO_ACK too. */
static inline int ex_rx(drths_wire_rx_t *rx, drths_role_t self)
{
    ex_keys_t k;
    ex_keys(&k);
    int rc = drths_wire_rx_init(rx, self, k.psk, NULL);
    if (rc != 0)
        return rc;
    drths_wire_rx_start(rx, EX_SESSION_ID);
    drths_wire_rx_set_keys(rx, &k.keys);
    if (self == DRTHS_ROLE_NUMERICAL)
        drths_wire_rx_set_initiator(rx, k.en_sk, k.en_pk);
    return 0;
}

#endif
