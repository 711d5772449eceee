/* The wire protocol of an OpenSees/OpenFresco analysis client (docs/openfresco.md, "The wire
 * protocol"), as a pure codec: no sockets, no clocks.
 *
 * The stream has no framing: each message's length follows from the sequence so far. So the
 * receiver asks the codec how many bytes the next message has (drths_ofr_rx_need), reads exactly
 * that many, and hands them to drths_ofr_rx_parse, which decodes them and moves the sequence on.
 * Two variants:
 *   SHADOW  (`expSite ShadowSite` to an actor site): int32 probe, open vector, setup vector
 *           followed by two int32[5] size arrays, then action vectors; DIE is answered.
 *   GENERIC (`expControl GenericTCP`, `element genericClient`): an int32[11] ID (control
 *           sizes, measurement sizes, dataSize), then action vectors; DIE is not answered.
 * Both start with the int32 1 when the control displacement size is 1, so `auto` cannot tell
 * them apart from the first four bytes alone: drths_ofr_detect uses the first int32 and whether
 * more bytes followed it (the ShadowSite client waits for the probe's answer, the GenericTCP
 * client sends its 44 bytes at once).
 *
 * Numbers are in host byte order, as the client writes them (little-endian on x86-64); the
 * ShadowSite probe lets a client check that. Sizes are in the order disp, vel, accel, force,
 * time. One control displacement per actuator channel, 1 to DRTHS_OFR_MAX_DOF: a size outside
 * that is a protocol error (DRTHS_OFR_MSG_ERROR names it); whether it matches the experiment's
 * channels is the caller's check (site-physical/openfresco_app.c).
 *
 * Ownership: the caller owns drths_ofr_rx_t (fixed size, no allocation; _init cannot fail).
 * Functions here are RT-safe (no allocation, no I/O) although the I/O thread is their user.
 */
#ifndef DRTHS_OPENFRESCO_H
#define DRTHS_OPENFRESCO_H

#include <stddef.h>
#include <stdint.h>

/* Largest dataSize accepted (doubles per vector). The default is 256. */
#define DRTHS_OFR_MAX_DATA 4096
/* Values per response block kept (disp, vel, accel, force); the rest are sent as 0. */
#define DRTHS_OFR_MAX_DOF 8
#define DRTHS_OFR_DEFAULT_DATA 256
#define DRTHS_OFR_VERSION 2.8
/* The version a refusing answer to open carries: ShadowExpSite exits unless it reads exactly
 * DRTHS_OFR_VERSION there. */
#define DRTHS_OFR_REFUSED_VERSION 0.0
#define DRTHS_OFR_ACTOR_TAG 1.0

typedef enum drths_ofr_variant {
    DRTHS_OFR_AUTO = 0,
    DRTHS_OFR_SHADOW = 1,
    DRTHS_OFR_GENERIC = 2,
} drths_ofr_variant_t;

/* Action codes (element 0 of a vector). */
enum {
    DRTHS_OFR_OPEN = 1,
    DRTHS_OFR_SETUP = 2,
    DRTHS_OFR_SET_TRIAL = 3,
    DRTHS_OFR_EXECUTE = 4,
    DRTHS_OFR_COMMIT = 5,
    DRTHS_OFR_GET_DAQ = 6,
    DRTHS_OFR_GET_DISP = 7,
    DRTHS_OFR_GET_VEL = 8,
    DRTHS_OFR_GET_ACCEL = 9,
    DRTHS_OFR_GET_FORCE = 10,
    DRTHS_OFR_GET_TIME = 11,
    DRTHS_OFR_GET_INITIAL_STIFF = 12,
    DRTHS_OFR_GET_TANGENT_STIFF = 13,
    DRTHS_OFR_GET_DAMP = 14,
    DRTHS_OFR_GET_MASS = 15,
    DRTHS_OFR_SHUTDOWN = 98,
    DRTHS_OFR_DIE = 99,
};

/* Reply codes. */
#define DRTHS_OFR_REPLY_COMPLETED 0.0
#define DRTHS_OFR_REPLY_RECEIVED 4.0

typedef enum drths_ofr_size_index {
    DRTHS_OFR_DISP = 0,
    DRTHS_OFR_VEL,
    DRTHS_OFR_ACCEL,
    DRTHS_OFR_FORCE,
    DRTHS_OFR_TIME,
    DRTHS_OFR_NSIZES
} drths_ofr_size_index_t;

typedef enum drths_ofr_msg_kind {
    DRTHS_OFR_MSG_ERROR = 0, /* protocol error: text says why; the session cannot go on */
    DRTHS_OFR_MSG_PROBE,     /* SHADOW: the int32 endianness probe */
    DRTHS_OFR_MSG_OPEN,      /* SHADOW: open (tag) */
    DRTHS_OFR_MSG_SETUP,     /* sizes known: SHADOW setup, or the GENERIC ID */
    DRTHS_OFR_MSG_ACTION,    /* an action vector: action says which */
} drths_ofr_msg_kind_t;

typedef struct drths_ofr_msg {
    drths_ofr_msg_kind_t kind;
    int action; /* DRTHS_OFR_* for ACTION (an unknown code is passed on) */
    double tag; /* OPEN: the client's tag; DIE: element 1 */
    /* SET_TRIAL: the trial blocks (only the first DRTHS_OFR_MAX_DOF values of each). */
    double disp[DRTHS_OFR_MAX_DOF], vel[DRTHS_OFR_MAX_DOF], accel[DRTHS_OFR_MAX_DOF];
    double time;    /* SET_TRIAL: the time slot, NaN if absent */
    char text[128]; /* ERROR */
} drths_ofr_msg_t;

typedef enum drths_ofr_state {
    DRTHS_OFR_ST_PROBE = 0, /* SHADOW: waiting for the probe */
    DRTHS_OFR_ST_OPEN,      /* SHADOW: waiting for open */
    DRTHS_OFR_ST_SETUP,     /* SHADOW: waiting for setup + sizes */
    DRTHS_OFR_ST_ID,        /* GENERIC: waiting for the ID */
    DRTHS_OFR_ST_ACTIONS,   /* action vectors */
    DRTHS_OFR_ST_FAILED,    /* after a protocol error */
} drths_ofr_state_t;

typedef struct drths_ofr_rx {
    drths_ofr_variant_t variant;
    drths_ofr_state_t state;
    int ctrl[DRTHS_OFR_NSIZES]; /* control (trial) sizes */
    int meas[DRTHS_OFR_NSIZES]; /* measurement sizes */
    int data_size;              /* doubles per vector now */
} drths_ofr_rx_t;

/* The measured (or computed) response a reply carries. Blocks beyond DRTHS_OFR_MAX_DOF values
 * are zero. */
typedef struct drths_ofr_response {
    double disp[DRTHS_OFR_MAX_DOF], vel[DRTHS_OFR_MAX_DOF], accel[DRTHS_OFR_MAX_DOF];
    double force[DRTHS_OFR_MAX_DOF];
    double time;
} drths_ofr_response_t;

/* Starts the sequence for a variant (SHADOW or GENERIC; AUTO is resolved by the caller with
 * drths_ofr_detect first). RT-safe. */
void drths_ofr_rx_init(drths_ofr_rx_t *rx, drths_ofr_variant_t variant);

/* Bytes of the next message. RT-safe. */
size_t drths_ofr_rx_need(const drths_ofr_rx_t *rx);

/* Decodes exactly drths_ofr_rx_need(rx) bytes into m and advances the sequence. Returns 0, or
 * -EPROTO with m->kind ERROR and m->text set (the state is then FAILED and stays so); -EINVAL
 * when n is not the needed length. RT-safe. */
int drths_ofr_rx_parse(drths_ofr_rx_t *rx, const uint8_t *buf, size_t n, drths_ofr_msg_t *m);

/* AUTO: which variant sent the first bytes buf[0..n) (n >= 4). `quiet` is nonzero when no
 * more bytes came within the caller's wait after them. Returns SHADOW, GENERIC, or AUTO when
 * it needs to know whether more bytes follow (first int32 is 1, n == 4, !quiet). RT-safe. */
drths_ofr_variant_t drths_ofr_detect(const uint8_t *buf, size_t n, int quiet);

/* ---- replies: each writes the whole message into out (cap bytes) and returns its length, or
 * 0 when it does not fit or the state does not allow it. RT-safe. ---- */

/* SHADOW: the answer to the probe, int32 1. */
size_t drths_ofr_reply_probe(uint8_t *out, size_t cap);

/* SHADOW: the answer to open, [0, actorTag, 2.8, 0...] of the default dataSize. */
size_t drths_ofr_reply_open(uint8_t *out, size_t cap);

/* SHADOW: a refusing answer to open, [0, actorTag, DRTHS_OFR_REFUSED_VERSION, 0...]: OpenFresco's
 * ShadowExpSite prints a version mismatch and exits (status 255) on it, the one answer that
 * ends the client rather than leaving it waiting. */
size_t drths_ofr_reply_open_refused(uint8_t *out, size_t cap);

/* getDaqResponse: the measurement blocks by the measurement sizes from element 0. */
size_t drths_ofr_reply_daq(const drths_ofr_rx_t *rx, const drths_ofr_response_t *r, uint8_t *out,
                           size_t cap);

/* getDisp/getVel/getAccel/getForce/getTime: one block (index DRTHS_OFR_DISP ..) from element 0,
 * as long as the measurement size, or the control size when the measurement size is 0 (the
 * genericClient asks for the force with a measurement force size n). */
size_t drths_ofr_reply_block(const drths_ofr_rx_t *rx, const drths_ofr_response_t *r, int block,
                             uint8_t *out, size_t cap);

/* getInitialStiff/getTangentStiff/getDamp/getMass: an n·n matrix column-major from element 0,
 * n the control displacement size, all entries `diag` on the diagonal and 0 elsewhere. */
size_t drths_ofr_reply_matrix(const drths_ofr_rx_t *rx, double diag, uint8_t *out, size_t cap);

/* The same with diag[i] (i < DRTHS_OFR_MAX_DOF) at row and column i: one value per actuator
 * channel, the channels uncoupled. */
size_t drths_ofr_reply_diagonal(const drths_ofr_rx_t *rx, const double *diag, uint8_t *out,
                                size_t cap);

/* SHADOW: the answer to DIE, [4, actorTag, 0...]. */
size_t drths_ofr_reply_die(const drths_ofr_rx_t *rx, uint8_t *out, size_t cap);

/* "shadow" / "generic" / "auto". RT-safe. */
const char *drths_ofr_variant_name(drths_ofr_variant_t v);

/* Parses "auto" / "shadow" / "generic". Returns 0 or -EINVAL. init-only. */
int drths_ofr_variant_parse(const char *text, drths_ofr_variant_t *v);

/* ---- the client side, for tests and tools: build the messages an OpenSees client sends. ---- */

/* A vector of data_size doubles, v[0..nv) then zeros. Returns its length or 0. */
size_t drths_ofr_build_vector(const double *v, size_t nv, int data_size, uint8_t *out, size_t cap);

/* int32 values in host order. Returns its length or 0. */
size_t drths_ofr_build_ids(const int32_t *ids, size_t n, uint8_t *out, size_t cap);

/* The dataSize both sides use after setup: max(256, 1 + sum(ctrl), sum(meas)). */
int drths_ofr_data_size(const int ctrl[DRTHS_OFR_NSIZES], const int meas[DRTHS_OFR_NSIZES]);

#endif
