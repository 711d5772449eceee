/* drths-conform: a conformance suite for a second implementation of the drths wire protocol
 * (protocol/PROTOCOL.md, section "Conformance"). It plays one role against a running site of
 * the other role and prints one line per check: "PASS|FAIL|SKIP name: what was checked, what
 * was seen".
 *
 * The normal path uses the project's own protocol library (drths_wire_seal / drths_wire_open);
 * the attacks are hand-built datagrams, and the key schedule is recomputed here from libsodium's
 * primitives, so that a site whose keys do not derive as the specification says fails.
 */
#ifndef DRTHS_CONFORM_H
#define DRTHS_CONFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config/config.h"
#include "common/platform/udp.h"
#include "protocol/crypto.h"
#include "protocol/wire.h"

#define CONFORM_PROG "drths-conform"
#define CONFORM_MS INT64_C(1000000)

/* One run of the suite: the experiment, the key, the sockets and the tally. */
typedef struct conform {
    drths_experiment_t exp;
    uint8_t psk[DRTHS_KEY_BYTES];
    drths_msg_hello_t hello; /* our HELLO / HELLO_ACK fields, from the experiment */
    drths_addr_t peer;       /* numerical role: the actuator site */
    char peer_text[80];
    drths_udp_t udp;      /* numerical role: our main socket; physical role: the listening one */
    drths_udp_t udp2;     /* numerical role: a second source port */
    drths_udp_msg_t *msg; /* one received datagram */
    long run_ticks;       /* commanded ticks of the short run (numerical role) */
    double amplitude_m;   /* peak of the commanded displacement (numerical role) */
    double timeout_s;     /* physical role: how long to wait for the numerical site */
    bool mismatch;        /* physical role: answer with another fingerprint */
    int pass, fail, skip;
    /* --site NAME (a file with sites, PROTOCOL.md section 12): the site's index in the file,
     * which is its link (-1 without --site), and its address there. */
    int link;
    char site_address[80];
} conform_t;

/* A session this tool opens as the numerical site: its ephemeral pair (kept here, so the key
 * schedule can be recomputed), its sender and receiver, and its HELLO as sent. */
typedef struct conform_session {
    uint64_t sid;
    uint8_t eph_sk[DRTHS_EPH_BYTES], eph_pk[DRTHS_EPH_BYTES];
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    uint8_t hello[DRTHS_WIRE_MAX_DATAGRAM];
    size_t hello_len;
    drths_session_keys_t keys;
} conform_session_t;

/* Prints "PASS name: ..." (ok) or "FAIL name: ..." and counts it. */
void conform_check(conform_t *c, bool ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void conform_skip(conform_t *c, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Receives one datagram on u before deadline_ns into c->msg. Returns 1, or 0 on timeout. */
int conform_recv(conform_t *c, drths_udp_t *u, int64_t deadline_ns);
/* Sends len bytes to the peer from u; 0 or a negative errno. */
int conform_send(conform_t *c, drths_udp_t *u, const drths_addr_t *to, const void *d, size_t len);

/* Starts a session: fresh id and ephemeral pair, tx and rx (keyed with c->psk); the HELLO with
 * fields h, sealed under the HELLO key of seal_psk (c->psk, or a wrong key), into s->hello. */
int conform_session_open(conform_t *c, conform_session_t *s, const drths_msg_hello_t *h,
                         const uint8_t seal_psk[DRTHS_KEY_BYTES]);
void conform_session_close(conform_session_t *s);
/* Seals m with the session's sender into buf; the length, or 0 on failure. */
size_t conform_seal(conform_session_t *s, const drths_msg_t *m, uint8_t *buf, size_t cap);

/* The key schedule of PROTOCOL.md section 3, recomputed from libsodium's primitives: opens the
 * HELLO_ACK ack (its tag under the HELLO_ACK key), then derives the transcript and both session
 * keys into s->keys. Returns 0, or -1 with why in what. */
int conform_key_schedule(const conform_t *c, conform_session_t *s, const uint8_t *ack,
                         size_t ack_len, char *what, size_t cap);

/* The two roles. Each returns after its last check. */
void conform_run_numerical(conform_t *c);
/* The run part of the numerical role, on the session the handshake checks opened. */
void conform_run_numerical_session(conform_t *c, conform_session_t *s);
void conform_run_physical(conform_t *c);

#endif
