/* drths-conform: reporting, sockets, sessions and the key schedule recomputed from libsodium. */
#include "tools/conform/conform.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "common/platform/rtclock.h"

static void vline(const char *word, const char *name, const char *fmt, va_list ap)
{
    printf("%s %s: ", word, name);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
}

void conform_check(conform_t *c, bool ok, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(ok ? "PASS" : "FAIL", name, fmt, ap);
    va_end(ap);
    if (ok)
        c->pass++;
    else
        c->fail++;
}

void conform_skip(conform_t *c, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("SKIP", name, fmt, ap);
    va_end(ap);
    c->skip++;
}

int conform_recv(conform_t *c, drths_udp_t *u, int64_t deadline_ns)
{
    for (;;) {
        if (drths_udp_recv(u, c->msg, 1) == 1)
            return 1;
        if (drths_now_ns() >= deadline_ns)
            return 0;
        drths_udp_wait(u, deadline_ns);
    }
}

int conform_send(conform_t *c, drths_udp_t *u, const drths_addr_t *to, const void *d, size_t len)
{
    (void)c;
    return drths_udp_send(u, to, d, len);
}

int conform_session_open(conform_t *c, conform_session_t *s, const drths_msg_hello_t *h,
                         const uint8_t seal_psk[DRTHS_KEY_BYTES])
{
    memset(s, 0, sizeof *s);
    drths_error_t err;
    s->sid = drths_crypto_random_session_id();
    drths_crypto_eph_keypair(s->eph_pk, s->eph_sk);
    if (drths_wire_rx_init(&s->rx, DRTHS_ROLE_NUMERICAL, c->psk, &err) != 0)
        return -ENOMEM;
    drths_wire_rx_start(&s->rx, s->sid);
    drths_wire_rx_set_initiator(&s->rx, s->eph_sk, s->eph_pk);
    uint8_t hk[DRTHS_KEY_BYTES];
    drths_crypto_derive_hello(seal_psk, s->sid, s->eph_pk, hk);
    drths_wire_tx_init(&s->tx, DRTHS_ROLE_NUMERICAL, s->sid);
    drths_wire_tx_set_handshake(&s->tx, hk, s->eph_pk);
    drths_crypto_wipe(hk, sizeof hk);
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_HELLO;
    m.u.hello = *h;
    s->hello_len = conform_seal(s, &m, s->hello, sizeof s->hello);
    return s->hello_len ? 0 : -EINVAL;
}

void conform_session_close(conform_session_t *s)
{
    drths_wire_tx_close(&s->tx);
    drths_wire_rx_close(&s->rx);
    drths_crypto_wipe(s->eph_sk, sizeof s->eph_sk);
    drths_crypto_wipe(&s->keys, sizeof s->keys);
}

size_t conform_seal(conform_session_t *s, const drths_msg_t *m, uint8_t *buf, size_t cap)
{
    size_t len = 0;
    return drths_wire_seal(&s->tx, m, buf, cap, &len) == 0 ? len : 0;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* BLAKE2b-256 of label || parts, keyed with key (NULL: no key). */
static void b2(uint8_t out[32], const uint8_t *key, const char *label, const uint8_t *const *p,
               const size_t *n, int parts)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, key ? 32 : 0, 32);
    crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
    for (int i = 0; i < parts; i++)
        crypto_generichash_update(&st, p[i], n[i]);
    crypto_generichash_final(&st, out, 32);
}

/* Opens an EPH datagram of the actuator site (nonce direction 0x02) under key into plain. */
static int open_eph(const uint8_t key[32], const uint8_t *d, size_t len, uint8_t *plain,
                    size_t *plain_len)
{
    size_t ad = DRTHS_WIRE_HEADER_BYTES + DRTHS_EPH_BYTES;
    if (len < ad + 1 + DRTHS_TAG_BYTES)
        return -1;
    uint8_t nonce[12] = {DRTHS_ROLE_PHYSICAL};
    memcpy(nonce + 4, d + 16, 8);
    *plain_len = len - ad - DRTHS_TAG_BYTES;
    return crypto_aead_chacha20poly1305_ietf_decrypt_detached(
        plain, NULL, d + ad, *plain_len, d + len - DRTHS_TAG_BYTES, d, ad, nonce, key);
}

int conform_key_schedule(const conform_t *c, conform_session_t *s, const uint8_t *ack,
                         size_t ack_len, char *what, size_t cap)
{
    const uint8_t *e_phys = ack + DRTHS_WIRE_HEADER_BYTES;
    uint8_t dh[32], k[32], sid[8], th[32], plain[DRTHS_WIRE_MAX_PAYLOAD];
    size_t plain_len;
    if (crypto_scalarmult(dh, s->eph_sk, e_phys) != 0) {
        snprintf(what, cap, "the HELLO_ACK's ephemeral is a low-order point");
        return -1;
    }
    if (get_u64(ack + 8) != s->sid) {
        snprintf(what, cap, "the HELLO_ACK names another session id");
        return -1;
    }
    put_u64(sid, s->sid);
    const uint8_t *ap[] = {sid, s->eph_pk, e_phys, dh};
    const size_t an[] = {8, 32, 32, 32};
    b2(k, c->psk, "drths-v2 hello_ack", ap, an, 4);
    if (open_eph(k, ack, ack_len, plain, &plain_len) != 0) {
        snprintf(what, cap,
                 "the HELLO_ACK does not open under BLAKE2b(PSK, \"drths-v2 "
                 "hello_ack\" || sid || e_num || e_phys || dh)");
        return -1;
    }
    uint8_t lh[2] = {(uint8_t)(s->tx.hs_plain_len >> 8), (uint8_t)s->tx.hs_plain_len};
    uint8_t la[2] = {(uint8_t)(plain_len >> 8), (uint8_t)plain_len};
    const uint8_t *tp[] = {sid, s->eph_pk, lh, s->tx.hs_plain, e_phys, la, plain};
    const size_t tn[] = {8, 32, 2, s->tx.hs_plain_len, 32, 2, plain_len};
    b2(th, NULL, "drths-v2 transcript", tp, tn, 7);
    uint8_t d1 = 0x01, d2 = 0x02;
    const uint8_t *p1[] = {&d1, dh, th}, *p2[] = {&d2, dh, th};
    const size_t sn[] = {1, 32, 32};
    b2(s->keys.num_to_phys, c->psk, "drths-v2 session", p1, sn, 3);
    b2(s->keys.phys_to_num, c->psk, "drths-v2 session", p2, sn, 3);
    drths_wire_tx_set_keys(&s->tx, &s->keys);
    drths_wire_rx_set_keys(&s->rx, &s->keys);
    sodium_memzero(dh, sizeof dh);
    sodium_memzero(k, sizeof k);
    return 0;
}
