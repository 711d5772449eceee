/* Network impairment model with netem's vocabulary and semantics.
 *
 * Used by drths-impair (tools/impair), the user-space UDP relay that emulates a wide-area link on
 * machines whose kernel has no netem qdisc. The model is pure: given a spec, a seed and the
 * sequence of (arrival time, size) it is fed, its decisions are always the same. It knows nothing
 * about sockets or clocks; the relay stamps arrivals and sends each copy at the time decided here.
 *
 * Option string: the words of `tc qdisc add ... netem OPTIONS` (tc-netem(8)):
 *   delay TIME [JITTER [CORRELATION]]   (alias: latency)
 *   distribution {uniform|normal|pareto|paretonormal}
 *   loss [random] PERCENT [CORRELATION]  (alias: drop)
 *   loss gemodel p [r [1-h [1-k]]]
 *   duplicate PERCENT [CORRELATION]
 *   reorder PERCENT [CORRELATION] [gap DISTANCE]
 *   corrupt PERCENT [CORRELATION]
 *   rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]
 *   limit PACKETS
 * TIME needs a unit (ns, us, ms, s and tc's spellings usec, msec, sec...): unlike tc, a bare number
 * is refused, because tc's bare-number unit has changed between versions. PERCENT is "1%" or "1"
 * (tc reads both as one percent). RATE needs a unit: bit, kbit, mbit, gbit, tbit (SI), kibit...
 * (IEC), or bps, kbps, mbps, gbps (BYTES per second, as in tc). Not supported (refused with a
 * message): loss state, ecn, slot, seed (use the relay's --seed).
 *
 * Semantics, as in Linux sch_netem.c (netem_enqueue):
 * - Delay = TIME + a draw from the jitter distribution of half-width / scale JITTER. Without
 *   "distribution" the draw is uniform on [TIME - JITTER, TIME + JITTER): that is what the kernel
 *   does when tc loads no table (tc-netem(8) claims "normal"; the code is uniform). normal, pareto
 *   and paretonormal use netem's 4096-entry tables, generated here exactly as iproute2's
 *   normal.c / pareto.c / paretonormal.c generate theirs (values clipped to +-4 JITTER).
 * - Delay correlation c (0..1) is netem's: u(n) = (1 - c) * uniform + c * u(n-1) on the 32-bit
 *   random number before it becomes a delay: consecutive delays have lag-1 correlation c, and
 *   their spread narrows (by sqrt((1 - c) / (1 + c)) for uniform). Deviation: a table
 *   distribution is indexed with the high bits of u(n) (netem uses the low bits, which makes
 *   delay correlation have no effect with a table).
 * - Deviation from netem for the correlation of loss, duplicate, reorder and corrupt: netem
 *   applies the same weighted average to the random number, which pulls it towards 1/2 and all
 *   but removes rare events ("loss 5% 50%" then loses nearly nothing). Here an event with
 *   probability p and correlation c is a two-state chain with the same mean p and lag-1
 *   correlation c: after an event the next one happens with p + c (1 - p), otherwise with
 *   p (1 - c). "loss 5% 50%" loses 5 % in bursts of mean length 1 / ((1 - c)(1 - p)).
 * - Jitter reorders packets: each packet is sent at its own time, so a packet with a short delay
 *   overtakes an earlier one with a long delay whenever the jitter exceeds the inter-packet gap.
 *   This is netem's default behaviour and is kept (drths handles reordering). With "rate", netem
 *   (and this model) never reorders by jitter: each packet leaves after the previous one.
 * - Delay may come out negative (JITTER > TIME, or a distribution tail): the copy is due at once.
 * - duplicate: with that probability the packet is cloned; the clone then goes through the whole
 *   model again (loss, delay, reorder) with duplication disabled, so it gets its own delay.
 * - loss: a loss event removes one copy; a packet both duplicated and lost is therefore sent once.
 *   gemodel is the Gilbert-Elliott chain (Good/Bad states): p = P(Good -> Bad), r = P(Bad ->
 *   Good), 1-h = loss probability in Bad, 1-k = loss probability in Good; defaults r = 1 - p,
 *   1-h = 100 %, 1-k = 0 %. The loss of a packet is decided by the state it finds; the chain then
 *   moves (netem's order). Mean loss = (p (1-h) + r (1-k)) / (p + r).
 * - reorder P [gap G]: every packet after the first G-1 delayed ones since the last reordered
 *   packet is, with probability P, sent immediately (no delay). Without gap, G = 1. reorder needs
 *   a delay (tc refuses it otherwise, and so does this parser).
 * - corrupt: flips one random bit of the copy.
 * - rate: packet serialisation; a packet leaves (size + overhead) * 8 / rate after the previous
 *   one has left, and not before its own delay has passed. Size is whatever the caller passes
 *   (the relay passes the UDP payload size; add e.g. 42 bytes of PACKETOVERHEAD for
 *   Ethernet + IPv4 + UDP headers).
 * - limit: the relay's queue limit in packets (0: the relay's pool size). The model itself never
 *   drops for lack of space; the relay does, and counts it separately.
 *
 * Ownership: the caller owns every struct. drths_impair_t holds no pointer to the spec it was
 * given (it copies it) and points only at process-wide constant tables.
 */
#ifndef DRTHS_IMPAIR_H
#define DRTHS_IMPAIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"

typedef enum drths_impair_dist {
    DRTHS_IMPAIR_DIST_UNIFORM = 0,
    DRTHS_IMPAIR_DIST_NORMAL,
    DRTHS_IMPAIR_DIST_PARETO,
    DRTHS_IMPAIR_DIST_PARETONORMAL,
} drths_impair_dist_t;

typedef enum drths_impair_loss_model {
    DRTHS_IMPAIR_LOSS_NONE = 0,
    DRTHS_IMPAIR_LOSS_RANDOM,
    DRTHS_IMPAIR_LOSS_GE,
} drths_impair_loss_model_t;

/* A parsed option string. Probabilities and correlations are fractions in [0, 1] (the text says
 * percent). A zeroed struct means "no impairment". */
typedef struct drths_impair_spec {
    int64_t delay_ns;
    int64_t jitter_ns;
    double delay_corr;
    drths_impair_dist_t dist;

    drths_impair_loss_model_t loss_model;
    double loss;       /* random: probability */
    double loss_corr;  /* random: correlation */
    double ge_p;       /* Good -> Bad */
    double ge_r;       /* Bad -> Good */
    double ge_1h;      /* loss probability in Bad */
    double ge_1k;      /* loss probability in Good */

    double duplicate;
    double duplicate_corr;
    double reorder;
    double reorder_corr;
    uint32_t gap;      /* 0 when reorder is 0 */
    double corrupt;
    double corrupt_corr;

    uint64_t rate_bit_s;       /* 0: no rate limit */
    int32_t packet_overhead;   /* bytes added to each packet's size for the rate */
    uint32_t cell_size;        /* bytes, 0: none */
    int32_t cell_overhead;     /* bytes per cell */

    uint32_t limit;            /* packets, 0: the relay's default */
} drths_impair_spec_t;

/* Parses a netem option string into spec (fully overwritten; an empty string gives the zero
 * spec). On error returns -EINVAL and err names the token, its position and what was expected,
 * e.g. `token 3 "5xs" (delay jitter): not a time; give a unit, e.g. 5ms`. init-only. */
int drths_impair_spec_parse(drths_impair_spec_t *spec, const char *text, drths_error_t *err);

/* Writes the spec back as a netem option string (canonical units), for logs and reports. Returns
 * the length it needed, like snprintf. init-only. */
int drths_impair_spec_format(const drths_impair_spec_t *spec, char *buf, size_t len);

/* Correlated 32-bit random source, netem's struct crndstate. */
typedef struct drths_impair_crnd {
    uint64_t rho;  /* correlation scaled to 2^32 */
    uint64_t last;
} drths_impair_crnd_t;

/* Correlated event (loss, duplicate, reorder, corrupt): thresholds scaled to 2^32. */
typedef struct drths_impair_cevent {
    uint64_t after_event;
    uint64_t after_none;
    bool last;
} drths_impair_cevent_t;

typedef struct drths_impair {
    drths_impair_spec_t spec;
    uint64_t prng[4];        /* xoshiro256** state */
    /* Probabilities scaled to 2^32: an event happens when a 32-bit draw is below them. */
    uint64_t p_ge_p, p_ge_r, p_ge_1h, p_ge_1k;
    drths_impair_cevent_t e_loss, e_dup, e_reorder, e_corrupt;
    drths_impair_crnd_t c_delay;
    const int16_t *table;    /* NULL for uniform; else 4096 entries, netem's scale 8192 */
    bool ge_bad;             /* Gilbert-Elliott state */
    uint32_t counter;        /* packets delayed since the last reordered one (netem q->counter) */
    int64_t last_send_ns;    /* rate: when the last scheduled packet leaves */
    bool initialised;
} drths_impair_t;

#define DRTHS_IMPAIR_MAX_COPIES 2

typedef enum drths_impair_loss_kind {
    DRTHS_IMPAIR_LOST_NONE = 0,
    DRTHS_IMPAIR_LOST_RANDOM,
    DRTHS_IMPAIR_LOST_GE,
} drths_impair_loss_kind_t;

/* What to do with one arriving packet. copies == 0: drop it. Otherwise send copy i at
 * send_ns[i] (which may be earlier than now: then at once). Counting: received + duplicated ==
 * copies + lost_random + lost_ge, for every decision. */
typedef struct drths_impair_decision {
    unsigned copies;
    int64_t send_ns[DRTHS_IMPAIR_MAX_COPIES];
    bool reordered[DRTHS_IMPAIR_MAX_COPIES];     /* sent immediately by "reorder" */
    int64_t corrupt_bit[DRTHS_IMPAIR_MAX_COPIES]; /* bit to flip (byte * 8 + bit), or -1 */
    unsigned duplicated;   /* 1 when a clone was made */
    unsigned lost_random;  /* loss events by the random model (0..2) */
    unsigned lost_ge;      /* loss events by the Gilbert-Elliott model (0..2) */
} drths_impair_decision_t;

/* Initialises the model from spec with a seed (any value; the same seed gives the same
 * decisions). Returns -EINVAL if the spec is out of range. init-only (the first call in a process
 * builds the distribution tables, about 10 ms). */
int drths_impair_init(drths_impair_t *im, const drths_impair_spec_t *spec, uint64_t seed);

/* Replaces the spec of an initialised model, keeping its random stream, Gilbert-Elliott state and
 * rate queue reference, as `tc qdisc change` does. Used for mid-run steps (e.g. delay 40 ms ->
 * 70 ms). Returns -EINVAL if the spec is out of range (the model is then unchanged). RT-safe. */
int drths_impair_set_spec(drths_impair_t *im, const drths_impair_spec_t *spec);

/* Decides the fate of a packet of size_bytes arriving at now_ns (any monotonic time base; the
 * send times are in the same base) and returns the number of copies to send (0: drop). The
 * decisions depend only on the seed, the spec and the sequence of calls. Consecutive calls must
 * not go back in time for "rate" to be meaningful. RT-safe. */
unsigned drths_impair_decide(drths_impair_t *im, int64_t now_ns, size_t size_bytes,
                         drths_impair_decision_t *d);

/* Mean loss fraction the spec produces for uncorrelated loss (for reports and tests). */
double drths_impair_spec_mean_loss(const drths_impair_spec_t *spec);

/* Marks the model closed. Safe twice. */
void drths_impair_close(drths_impair_t *im);

#endif
