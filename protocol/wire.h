/* The drths datagram: header | msgpack payload (encrypted) | 16-byte Poly1305 tag.
 * protocol/PROTOCOL.md is the normative description; this header is its C binding.
 *
 * Sending: drths_wire_seal() validates a drths_msg_t, writes its msgpack straight into the
 * caller's datagram buffer (in the encodings msgpack-c's packer chooses), assigns the next
 * counter and encrypts in place. Receiving: drths_wire_open() runs every check in the order
 * PROTOCOL.md fixes (size, magic, version, type, direction, reserved bits, session, replay
 * window, authentication, window update, msgpack decode, schema, field values) and returns the
 * first failure as a drths_reject_t, so sites count drops by reason (rx->rejects[] counts them
 * already). A COMMAND or FEEDBACK in the shape this implementation sends is read straight from
 * the payload; anything else goes through msgpack-c's decoder into a zone made at init and
 * cleared per datagram, which gives every reject its reason.
 *
 * Ownership: drths_wire_tx_t and drths_wire_rx_t are caller-allocated; _init/_close pairs;
 * _close wipes keys and is safe twice. Datagram buffers and messages belong to the caller; no
 * pointer into them is kept. Messages are plain structs with fixed arrays (no pointers), so a
 * drths_msg_t can be copied or pushed through a ring as is.
 */
#ifndef DRTHS_WIRE_H
#define DRTHS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "common/platform/error.h"
#include "protocol/crypto.h"
#include "protocol/replay.h"

/* The protocol version this code speaks (header byte 4 of every datagram it sends), and the
 * range it offers in HELLO. Version 1 is recognised (DRTHS_REJECT_V1_PEER) but not spoken. */
#define DRTHS_WIRE_VERSION 2
#define DRTHS_WIRE_VERSION_MIN 2
#define DRTHS_WIRE_VERSION_MAX 2
/* Header flag: a 32-byte X25519 ephemeral public key follows the header in clear (part of the
 * associated data). Set on HELLO and HELLO_ACK, and on an ABORT refusing a HELLO. */
#define DRTHS_WIRE_FLAG_EPH 0x0001u
#define DRTHS_WIRE_MAX_SECTIONS 16   /* fingerprint sections listed in HELLO */
#define DRTHS_WIRE_SECTION_HASH 8    /* bytes of each section's hash */
#define DRTHS_WIRE_MAX_NAME 31       /* site name and section name, bytes */
#define DRTHS_WIRE_MAX_HELLO_PAYLOAD 1024 /* a HELLO payload is at most ~960 bytes */
#define DRTHS_WIRE_MAX_OFFSET 65535  /* largest redundancy offset, ticks */
#define DRTHS_WIRE_MAGIC "DRTH"
#define DRTHS_WIRE_HEADER_BYTES 40
#define DRTHS_WIRE_MAX_CHANNELS 8
#define DRTHS_WIRE_MAX_R 16
#define DRTHS_WIRE_MAX_TEXT 200     /* STOP/ABORT text, bytes, without NUL */
#define DRTHS_WIRE_MAX_UNITS 7      /* HELLO units string ("SI") */
#define DRTHS_WIRE_MAX_SOFTWARE 31  /* HELLO software version string */
#define DRTHS_WIRE_FINGERPRINT_BYTES 32
/* Payload limit: a COMMAND with 8 channels and R = 16, shortest array headers and every integer
 * at its widest (9-byte) encoding is 4801 bytes (drths_wire_max_datagram); our own packer
 * makes at most 4781. Datagrams above DRTHS_WIRE_MAX_DATAGRAM (4920) are TOO_LONG. */
#define DRTHS_WIRE_MAX_PAYLOAD 4864
#define DRTHS_WIRE_MAX_DATAGRAM (DRTHS_WIRE_HEADER_BYTES + DRTHS_WIRE_MAX_PAYLOAD + DRTHS_TAG_BYTES)

typedef enum drths_msg_type {
    DRTHS_MSG_HELLO = 1,
    DRTHS_MSG_HELLO_ACK = 2,
    DRTHS_MSG_PROBE = 3,
    DRTHS_MSG_PROBE_ECHO = 4,
    DRTHS_MSG_COMMAND = 5,
    DRTHS_MSG_FEEDBACK = 6,
    DRTHS_MSG_EPOCH = 7,
    DRTHS_MSG_HEARTBEAT = 8,
    DRTHS_MSG_STOP = 9,
    DRTHS_MSG_ABORT = 10
} drths_msg_type_t;
#define DRTHS_MSG_TYPE_MAX 10

/* Why a datagram was dropped. Values are stable (they appear in logs and summaries). */
typedef enum drths_reject {
    DRTHS_REJECT_OK = 0,
    DRTHS_REJECT_TOO_SHORT,       /* shorter than header + 1 payload byte + tag */
    DRTHS_REJECT_TOO_LONG,        /* longer than DRTHS_WIRE_MAX_DATAGRAM */
    DRTHS_REJECT_BAD_MAGIC,       /* bytes 0..3 are not "DRTH" */
    DRTHS_REJECT_BAD_VERSION,     /* byte 4 is not DRTHS_WIRE_VERSION */
    DRTHS_REJECT_BAD_TYPE,        /* byte 5 is not a known message type */
    DRTHS_REJECT_WRONG_DIRECTION, /* a type this role never receives (e.g. FEEDBACK at the
                                     physical site) */
    DRTHS_REJECT_BAD_RESERVED,    /* flags or reserved header bytes not zero */
    DRTHS_REJECT_BAD_SESSION,     /* session id is not the current session's (or is 0) */
    DRTHS_REJECT_NO_KEY,          /* data message before the session keys are installed */
    DRTHS_REJECT_BAD_COUNTER,     /* counter 0 or above DRTHS_REPLAY_COUNTER_MAX */
    DRTHS_REJECT_REPLAYED,        /* counter already seen inside the window */
    DRTHS_REJECT_TOO_OLD,         /* counter older than the window */
    DRTHS_REJECT_BAD_TAG,         /* authentication failed */
    DRTHS_REJECT_BAD_PAYLOAD,     /* not well-formed msgpack (truncated, bad byte, too deep) */
    DRTHS_REJECT_TRAILING_BYTES,  /* bytes after the one msgpack object */
    DRTHS_REJECT_BAD_SCHEMA,      /* wrong msgpack type or array length for a field */
    DRTHS_REJECT_BAD_FIELD,       /* a value out of range: channels, R, non-finite number, ... */
    DRTHS_REJECT_V1_PEER,         /* byte 4 is 1: a peer that speaks protocol v1 */
    /* Set by the actuator site before decryption (PROTOCOL.md section 7): */
    DRTHS_REJECT_HELLO_RUNNING,   /* a HELLO while a run is on */
    DRTHS_REJECT_HELLO_SEEN,      /* a HELLO of a session id this process has seen before */
    DRTHS_REJECT_HELLO_PINNED,    /* a HELLO of another session while a proved one is alive */
    DRTHS_REJECT_COUNT
} drths_reject_t;

/* STOP / ABORT reason codes. Unknown codes (from a newer peer) are delivered as they are and
 * named "UNKNOWN"; a receiver must still stop or abort. */
typedef enum drths_stop_reason {
    DRTHS_STOP_UNSPECIFIED = 0,
    DRTHS_STOP_USER_STOP = 1,
    DRTHS_STOP_END_OF_RECORD = 2,
    DRTHS_STOP_WATCHDOG = 3,
    DRTHS_STOP_LIMIT = 4,
    DRTHS_STOP_PEER_LOST = 5,
    DRTHS_STOP_FINGERPRINT_MISMATCH = 6,
    DRTHS_STOP_VERSION_MISMATCH = 7,
    DRTHS_STOP_CONFIG_MISMATCH = 8,
    DRTHS_STOP_SIGNAL = 9,
    DRTHS_STOP_BUSY = 10,
    DRTHS_STOP_INTERNAL_ERROR = 11,
    DRTHS_STOP_HOLD = 12,
    DRTHS_STOP_RECORDS = 13 /* the sender's records could not be written (disk full, I/O error) */
} drths_stop_reason_t;

typedef enum drths_site_state {
    DRTHS_STATE_WAITING = 1,
    DRTHS_STATE_RUNNING = 2,
    DRTHS_STATE_HOLD = 3,
    DRTHS_STATE_STOPPED = 4
} drths_site_state_t;

#define DRTHS_FB_CONCEALED 0x01u /* the applied command was extrapolated, not received */
#define DRTHS_FB_HOLD 0x02u      /* the actuator site is in HOLD */
#define DRTHS_FB_FLAGS_ALL (DRTHS_FB_CONCEALED | DRTHS_FB_HOLD)

/* The fixed header as it is on the wire, decoded. */
typedef struct drths_wire_header {
    uint8_t version;
    uint8_t type;
    uint16_t flags;      /* 0, or DRTHS_WIRE_FLAG_EPH */
    uint64_t session_id;
    uint64_t counter;
    uint64_t tick;
    uint32_t epoch;
    uint32_t reserved;   /* 0 */
} drths_wire_header_t;

/* One section of the experiment's shared text and a short hash of it (HELLO), so a
 * fingerprint mismatch can name the sections that differ. */
typedef struct drths_hello_section {
    char name[DRTHS_WIRE_MAX_NAME + 1];
    uint8_t hash[DRTHS_WIRE_SECTION_HASH];
} drths_hello_section_t;

/* HELLO (numerical -> physical) and HELLO_ACK (physical -> numerical). The layout is frozen
 * from version 2 on, so any later version can still read it (PROTOCOL.md section 9.1). */
typedef struct drths_msg_hello {
    uint8_t proto_min, proto_max; /* versions the sender speaks */
    uint8_t role;                 /* drths_role_t of the sender */
    uint8_t version;              /* HELLO: 0; HELLO_ACK: the version chosen */
    uint8_t link;                 /* the numerical site's link index; echoed in HELLO_ACK */
    char site[DRTHS_WIRE_MAX_NAME + 1]; /* the sender's site name */
    double rate_hz;               /* control tick rate */
    uint8_t n_channels;
    uint8_t r;                    /* redundancy: number of offsets, samples per COMMAND */
    uint16_t offsets[DRTHS_WIRE_MAX_R]; /* both ways: sample k is for tick T - offsets[k] */
    char units[DRTHS_WIRE_MAX_UNITS + 1];
    uint8_t fingerprint[DRTHS_WIRE_FINGERPRINT_BYTES];
    uint8_t n_sections;
    drths_hello_section_t sections[DRTHS_WIRE_MAX_SECTIONS];
    char software[DRTHS_WIRE_MAX_SOFTWARE + 1];
} drths_msg_hello_t;

/* PROBE and PROBE_ECHO (hold_ns is 0 in a PROBE and not sent). */
typedef struct drths_msg_probe {
    uint64_t seq;
    uint64_t send_time_ns; /* prober's clock; echoed unchanged */
    uint64_t hold_ns;      /* echo only: time the echoer held the probe */
} drths_msg_probe_t;

typedef struct drths_cmd_channel {
    double disp_m, vel_m_s, acc_m_s2;
    double damper_cmd; /* damper current (A) or voltage (V), as the experiment declares */
} drths_cmd_channel_t;

/* COMMAND: s[k] is the command for tick (header tick - offsets[k]), k = 0 .. r-1, with the
 * offsets agreed in the handshake (0, 1, .., R-1 unless configured otherwise). */
typedef struct drths_msg_command {
    uint32_t loop_delay_ticks; /* L in force for the header epoch */
    uint8_t n_channels;
    uint8_t r;
    uint64_t echo_counter; /* newest FEEDBACK counter received, 0 if none */
    uint64_t echo_hold_ns; /* time from its arrival to this send */
    drths_cmd_channel_t s[DRTHS_WIRE_MAX_R][DRTHS_WIRE_MAX_CHANNELS];
} drths_msg_command_t;

typedef struct drths_fb_channel {
    double force_n; /* measured force, N */
    double disp_m;  /* measured displacement, m */
} drths_fb_channel_t;

typedef struct drths_fb_sample {
    int64_t cmd_tick; /* tick of the command applied at this tick, -1 if none yet */
    uint8_t flags;    /* DRTHS_FB_* */
    drths_fb_channel_t ch[DRTHS_WIRE_MAX_CHANNELS];
} drths_fb_sample_t;

/* FEEDBACK: s[k] is the measurement of tick (header tick - offsets[k]), k = 0 .. r-1, with the
 * offsets of the HELLO (PROTOCOL.md section 8; drths_wire_offset in this implementation). */
typedef struct drths_msg_feedback {
    uint8_t n_channels;
    uint8_t r;
    uint64_t echo_counter; /* newest COMMAND counter received, 0 if none */
    uint64_t echo_hold_ns;
    drths_fb_sample_t s[DRTHS_WIRE_MAX_R];
} drths_msg_feedback_t;

typedef struct drths_msg_epoch {
    uint32_t new_epoch;
    uint32_t loop_delay_ticks; /* new L */
    uint64_t effective_tick;   /* first tick whose command uses the new L */
} drths_msg_epoch_t;

typedef struct drths_msg_heartbeat {
    uint8_t state; /* drths_site_state_t */
} drths_msg_heartbeat_t;

typedef struct drths_msg_stop {
    uint8_t reason; /* drths_stop_reason_t */
    char text[DRTHS_WIRE_MAX_TEXT + 1];
} drths_msg_stop_t;

typedef struct drths_msg {
    drths_msg_type_t type;
    uint32_t epoch;      /* header epoch: the sender's current epoch */
    uint64_t tick;       /* header tick: meaning per type, see PROTOCOL.md */
    uint64_t counter;    /* set by drths_wire_open; ignored by drths_wire_seal */
    uint64_t session_id; /* set by drths_wire_open; ignored by drths_wire_seal */
    bool has_eph;        /* set by drths_wire_open: the datagram carried an ephemeral key */
    uint8_t eph[DRTHS_EPH_BYTES]; /* that key (the seal side takes it from the tx) */
    union {
        drths_msg_hello_t hello;       /* HELLO, HELLO_ACK */
        drths_msg_probe_t probe;       /* PROBE, PROBE_ECHO */
        drths_msg_command_t command;   /* COMMAND */
        drths_msg_feedback_t feedback; /* FEEDBACK */
        drths_msg_epoch_t epoch;       /* EPOCH */
        drths_msg_heartbeat_t heartbeat; /* HEARTBEAT */
        drths_msg_stop_t stop;         /* STOP, ABORT */
    } u;
} drths_msg_t;

typedef struct drths_wire_tx {
    drths_role_t role;
    uint64_t session_id;
    uint64_t next_counter;
    uint8_t hs_key[DRTHS_KEY_BYTES]; /* HELLO key (numerical) or HELLO_ACK key (physical) */
    uint8_t eph_pk[DRTHS_EPH_BYTES]; /* our ephemeral public key, sent after the header */
    bool have_hs;
    uint8_t key[DRTHS_KEY_BYTES];
    bool have_key;
    uint8_t hs_plain[DRTHS_WIRE_MAX_HELLO_PAYLOAD]; /* the last HELLO / HELLO_ACK payload sent, */
    size_t hs_plain_len;                            /* for the transcript hash */
} drths_wire_tx_t;

typedef struct drths_wire_rx {
    drths_role_t role; /* our own role; we receive what the other role sends */
    uint8_t psk[DRTHS_KEY_BYTES];
    uint64_t session_id; /* 0: no session yet */
    uint8_t key[DRTHS_KEY_BYTES];
    bool have_key;
    /* Initiator (numerical site): its ephemeral pair until the session keys exist. */
    uint8_t eph_sk[DRTHS_EPH_BYTES], eph_pk[DRTHS_EPH_BYTES];
    bool have_eph;
    uint8_t hs_dh[DRTHS_KEY_BYTES]; /* DH result of the last authenticated HELLO_ACK / ABORT */
    /* Responder (actuator site): the adopted session's HELLO ephemeral, once adopted. */
    uint8_t peer_eph[DRTHS_EPH_BYTES];
    bool have_peer_eph;
    drths_replay_t replay;
    msgpack_zone zone;
    bool zone_ready;
    void *zone_head0; /* the zone's one chunk, to prove it never grows */
    uint8_t plain[DRTHS_WIRE_MAX_PAYLOAD];
    size_t plain_len; /* payload bytes of the last authenticated datagram (transcript) */
    uint64_t accepted;
    uint64_t rejects[DRTHS_REJECT_COUNT]; /* drops by reason, counted by drths_wire_open */
} drths_wire_rx_t;

/* Names for logs: "BAD_TAG", "COMMAND", "FINGERPRINT_MISMATCH", "RUNNING". Unknown values give
 * "UNKNOWN". RT-safe. */
const char *drths_reject_name(drths_reject_t r);
const char *drths_msg_type_name(int type);
const char *drths_stop_reason_name(int reason);
const char *drths_site_state_name(int state);

/* Upper bound of the datagram size of a message of this type with n_channels and r (for
 * COMMAND / FEEDBACK; ignored otherwise), every integer at its widest encoding. Sites use it
 * to warn when a configuration exceeds the path MTU. RT-safe. */
size_t drths_wire_max_datagram(drths_msg_type_t type, int n_channels, int r);

/* Sender state for one session. HELLO / HELLO_ACK need drths_wire_tx_set_handshake() first,
 * data messages drths_wire_tx_set_keys(). Counters start at 1. init-only. */
int drths_wire_tx_init(drths_wire_tx_t *tx, drths_role_t role, uint64_t session_id);
/* The handshake key (HELLO key at the numerical site, HELLO_ACK key at the actuator site) and
 * our ephemeral public key, sent in clear after the header of HELLO / HELLO_ACK / a refusing
 * ABORT. RT-safe. */
void drths_wire_tx_set_handshake(drths_wire_tx_t *tx, const uint8_t key[DRTHS_KEY_BYTES],
                                 const uint8_t eph_pk[DRTHS_EPH_BYTES]);
/* Installs this direction's key out of keys (chosen by tx->role). The handshake key stays (a
 * repeated HELLO is answered with the same HELLO_ACK). RT-safe. */
void drths_wire_tx_set_keys(drths_wire_tx_t *tx, const drths_session_keys_t *keys);
/* Wipes keys. Safe twice. init-only. */
void drths_wire_tx_close(drths_wire_tx_t *tx);

/* Validates m (same rules as the receiver), packs, assigns the next counter, seals into buf.
 * HELLO / HELLO_ACK use the handshake key; ABORT uses the session key, or at the actuator site
 * the handshake key before drths_wire_tx_set_keys() (refusing a HELLO with a reason);
 * everything else needs the session key. Returns 0 and the datagram length in *len, or
 * -EINVAL (invalid message or a type this role never sends), -ENOKEY (data message before
 * keys), -EMSGSIZE (cap too small), -EOVERFLOW (counter exhausted). A counter is consumed only
 * on success. RT-safe. */
int drths_wire_seal(drths_wire_tx_t *tx, const drths_msg_t *m, uint8_t *buf, size_t cap,
                    size_t *len);

/* Receiver state. Allocates the msgpack zone (the only allocation). A failed init leaves
 * nothing to close. init-only. */
int drths_wire_rx_init(drths_wire_rx_t *rx, drths_role_t self, const uint8_t psk[DRTHS_KEY_BYTES],
                       drths_error_t *err);
/* Starts (or restarts) session session_id: window emptied, data key and handshake state
 * forgotten. RT-safe. */
void drths_wire_rx_start(drths_wire_rx_t *rx, uint64_t session_id);
/* Numerical site: our ephemeral pair, to open HELLO_ACK / a refusing ABORT (X25519 with the
 * ephemeral they carry). Wiped by drths_wire_rx_set_keys. RT-safe. */
void drths_wire_rx_set_initiator(drths_wire_rx_t *rx, const uint8_t eph_sk[DRTHS_EPH_BYTES],
                                 const uint8_t eph_pk[DRTHS_EPH_BYTES]);
/* Actuator site: the adopted HELLO's ephemeral; later HELLOs of the session must carry the
 * same. RT-safe. */
void drths_wire_rx_set_peer_eph(drths_wire_rx_t *rx, const uint8_t eph[DRTHS_EPH_BYTES]);
/* Installs the peer-to-us key out of keys and wipes the initiator's ephemeral secret.
 * RT-safe. */
void drths_wire_rx_set_keys(drths_wire_rx_t *rx, const drths_session_keys_t *keys);
/* Frees the zone and wipes keys. Safe twice. init-only (frees memory). */
void drths_wire_rx_close(drths_wire_rx_t *rx);

/* Full receive path for the current session (see the file comment). On DRTHS_REJECT_OK *out
 * holds the message; otherwise *out is unspecified. Counts the outcome in rx. RT-safe. */
drths_reject_t drths_wire_open(drths_wire_rx_t *rx, const uint8_t *buf, size_t len,
                               drths_msg_t *out);

/* For a responder deciding whether to start a new session: authenticates and decodes a HELLO
 * for whatever session id its header names, with the HELLO key of that id and the ephemeral
 * it carries (out->eph), without
 * touching rx's session, window or counters (a forged HELLO must not disturb a running
 * session). If the site accepts it, it calls drths_wire_rx_start(rx, out->session_id) and
 * then drths_wire_open() on the same datagram, which records its counter. RT-safe. */
drths_reject_t drths_wire_open_hello(drths_wire_rx_t *rx, const uint8_t *buf, size_t len,
                                     drths_msg_t *out);

/* Size, magic, version, type and reserved checks only, and the header fields. Nothing here is
 * authenticated: use it to route a datagram, never to act on it. RT-safe. */
drths_reject_t drths_wire_peek_header(const uint8_t *buf, size_t len, drths_wire_header_t *h);

/* The redundancy offset of sample k (0 <= k < DRTHS_WIRE_MAX_R) of a COMMAND and of a FEEDBACK
 * as this implementation chooses them (PROTOCOL.md section 8): R samples are the first R of 0,
 * 1, 2, 3, 8, 16, 32, ..., 16384, so R <= 4 is consecutive and a larger R also spans a burst of
 * losses. RT-safe. */
unsigned drths_wire_offset(int k);

/* How many of the r samples (r at most DRTHS_WIRE_MAX_R) a COMMAND or FEEDBACK for tick `tick`
 * carries: those whose tick, tick - offset(k), exists (is >= 0). The offsets increase, so these
 * are the first ones; near the start of a run a message carries fewer than r. Packing and
 * unpacking both walk k = 0 .. drths_wire_samples_of(tick, r) - 1. RT-safe. */
int drths_wire_samples_of(uint64_t tick, int r);

/* The tick of sample k of a message for tick `tick`: tick - offset(k), for k below
 * drths_wire_samples_of(tick, r). RT-safe. */
uint64_t drths_wire_sample_tick(uint64_t tick, int k);

/* Version negotiation (PROTOCOL.md section 7.2): the highest version in both ranges, or 0 if
 * they do not overlap. RT-safe. */
int drths_wire_pick_version(int min_a, int max_a, int min_b, int max_b);

/* 1 if a site of role sender may send messages of this type (PROTOCOL.md section 9). RT-safe. */
int drths_wire_role_sends(drths_role_t sender, int type);

#endif
