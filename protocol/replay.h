/* Sliding replay window over 64-bit datagram counters (RFC 6479 style bitmap).
 *
 * Every sender numbers its datagrams 1, 2, 3, ... per direction per session. The receiver keeps
 * the highest authenticated counter and a bitmap of the DRTHS_REPLAY_WINDOW counters below it.
 * drths_replay_check() is called before authentication (cheap rejection of duplicates and
 * stale datagrams without spending a Poly1305 computation), drths_replay_update() only after
 * the tag has been verified, so a forged datagram can never move the window.
 *
 * Wrap: counters never wrap. A session that sends 5000 datagrams per second needs 117 million
 * years to reach 2^64, so the window simply refuses counter 0 and every counter above
 * DRTHS_REPLAY_COUNTER_MAX (UINT64_MAX - DRTHS_REPLAY_WINDOW); the arithmetic highest + k never
 * overflows for an accepted counter. Senders refuse to send past the same limit.
 *
 * Ownership: caller-allocated plain struct, no pointers, nothing to close.
 */
#ifndef DRTHS_REPLAY_H
#define DRTHS_REPLAY_H

#include <stdint.h>

/* Number of counters at and below the highest one that are still accepted once each. */
#define DRTHS_REPLAY_WINDOW 1024u
/* Largest counter a session may use (both senders and receivers enforce it). */
#define DRTHS_REPLAY_COUNTER_MAX (UINT64_MAX - DRTHS_REPLAY_WINDOW)
/* 1024 bits plus one spare 64-bit block so the window never aliases with the block being
 * cleared when it advances. */
#define DRTHS_REPLAY_BLOCKS (DRTHS_REPLAY_WINDOW / 64u + 1u)

typedef enum drths_replay_result {
    DRTHS_REPLAY_OK = 0,
    DRTHS_REPLAY_DUPLICATE,   /* inside the window and already seen */
    DRTHS_REPLAY_TOO_OLD,     /* highest - counter >= DRTHS_REPLAY_WINDOW */
    DRTHS_REPLAY_OUT_OF_RANGE /* counter 0 or above DRTHS_REPLAY_COUNTER_MAX */
} drths_replay_result_t;

typedef struct drths_replay {
    uint64_t highest; /* highest accepted counter; 0 = nothing accepted yet */
    uint64_t bits[DRTHS_REPLAY_BLOCKS];
} drths_replay_t;

/* Empties the window (a new session). RT-safe. */
void drths_replay_reset(drths_replay_t *w);

/* Would counter be accepted? Does not change the window. RT-safe. */
drths_replay_result_t drths_replay_check(const drths_replay_t *w, uint64_t counter);

/* Checks again and, if acceptable, records counter as seen (advancing the window when it is
 * the new highest). Call only after the datagram authenticated. RT-safe. */
drths_replay_result_t drths_replay_update(drths_replay_t *w, uint64_t counter);

#endif
