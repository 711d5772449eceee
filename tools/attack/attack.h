/* The attacks of drths-attack, as datagram builders that know the reason a receiver must reject
 * each one with.
 *
 * drths-attack (tools/attack/main.c) injects them into a live session; the cmocka test
 * tests/fault/test_attack.c (ctest fault.attack) checks each one against a local receiver of a
 * known session: it must be rejected with exactly the reason declared here, so that a live test
 * can compare the actuator site's counters with the attacker's declared tallies.
 */
#ifndef DRTHS_ATTACK_H
#define DRTHS_ATTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/crypto.h"
#include "protocol/wire.h"

/* Reasons the actuator site counts outside the wire decoder (site-physical), after the
 * decoder's own drths_reject_t values. */
#define DRTHS_ATTACK_OTHER_SESSION DRTHS_REJECT_COUNT
#define DRTHS_ATTACK_WRONG_SOURCE (DRTHS_REJECT_COUNT + 1)
#define DRTHS_ATTACK_N_REASONS (DRTHS_REJECT_COUNT + 2)

/* The number of single attacks: 31 made by changing the genuine datagram or replaying one, and
 * 10 keyed payloads sealed with the session key. */
#define DRTHS_ATTACK_N_PLAIN 31
#define DRTHS_ATTACK_N_KEYED 10
#define DRTHS_ATTACK_COUNT (DRTHS_ATTACK_N_PLAIN + DRTHS_ATTACK_N_KEYED)

/* What an attacker knows of the session it attacks. */
typedef struct drths_attack_knowledge {
    uint8_t psk[DRTHS_KEY_BYTES];
    uint64_t session_id;
    bool have_keys;
    drths_session_keys_t keys;
    uint8_t hello[DRTHS_WIRE_MAX_DATAGRAM]; /* this session's HELLO as sent */
    size_t hello_len;
} drths_attack_knowledge_t;

/* One single attack, as drths_attack_build describes it. */
typedef struct drths_attack {
    const char *name;
    int expect;  /* reason the actuator site must count it under */
    bool after;  /* sent after the genuine datagram is forwarded (replays) */
    bool spends; /* authenticates: the genuine datagram is then REPLAYED */
} drths_attack_t;

/* The name of a reject reason, including the two above ("OTHER_SESSION", "WRONG_SOURCE").
 * RT-safe. */
const char *drths_attack_reason_name(int reason);

/* Seeds the calling thread's random stream (each thread has its own; the default seed is
 * fixed, so runs repeat). RT-safe. */
void drths_attack_seed(uint64_t seed);

/* Builds attack i (0 <= i < DRTHS_ATTACK_COUNT) from the genuine COMMAND g (length n, not yet
 * delivered) and an older datagram of the same session (>= 2000 counters back). Returns the
 * length (0 is a legal empty datagram) and fills *a (a->name is NULL for an i out of range).
 * out holds at least 65536 bytes. init-only (the keyed payloads are built in an allocated
 * msgpack buffer). */
size_t drths_attack_build(int i, const drths_attack_knowledge_t *kn, const uint8_t *g, size_t n,
                          const uint8_t *old, size_t old_n, uint8_t *out, drths_attack_t *a);

/* Junk datagram number k for the actuator site. Six kinds in turn; *reason is the reason the
 * receiver must count it under. The BAD_TAG kind carries the session id and a counter
 * 1000000 + k above base_counter, so the receiver runs the full authentication on it (the
 * costliest path for junk) without its window moving. out holds at least 257 bytes. RT-safe. */
/* The genuine COMMAND g (length n) with its first sample's displacement moved by add_m, sealed
 * again with the session key under the same header and counter: what a numerical site with a
 * bug would send, authenticated and well formed (--spike-at). Returns the length, or 0 when g
 * does not open with the keys or is not a COMMAND payload. */
size_t drths_attack_spike(const drths_attack_knowledge_t *kn, const uint8_t *g, size_t n,
                          double add_m, uint8_t *out);

size_t drths_attack_flood_junk(uint64_t k, const drths_attack_knowledge_t *kn,
                               uint64_t base_counter, uint8_t *out, int *reason);

/* Junk datagram number k for the numerical site: six kinds in turn, none with the session's id
 * (a numerical site with --kernel-filter must drop every one in the kernel); *reason is what a
 * receiver without the filter counts it under. out holds at least 257 bytes. RT-safe. */
size_t drths_attack_client_junk(uint64_t k, const drths_attack_knowledge_t *kn, uint8_t *out,
                                int *reason);

#endif
