#include "protocol/wire.h"

#include <endian.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#define TRY(x)                                                                                 \
    do {                                                                                       \
        drths_reject_t r_ = (x);                                                               \
        if (r_ != DRTHS_REJECT_OK)                                                             \
            return r_;                                                                         \
    } while (0)

/* ---- names ---------------------------------------------------------------------------- */

const char *drths_reject_name(drths_reject_t r)
{
    static const char *const names[DRTHS_REJECT_COUNT] = {
        [DRTHS_REJECT_OK] = "OK",
        [DRTHS_REJECT_TOO_SHORT] = "TOO_SHORT",
        [DRTHS_REJECT_TOO_LONG] = "TOO_LONG",
        [DRTHS_REJECT_BAD_MAGIC] = "BAD_MAGIC",
        [DRTHS_REJECT_BAD_VERSION] = "BAD_VERSION",
        [DRTHS_REJECT_BAD_TYPE] = "BAD_TYPE",
        [DRTHS_REJECT_WRONG_DIRECTION] = "WRONG_DIRECTION",
        [DRTHS_REJECT_BAD_RESERVED] = "BAD_RESERVED",
        [DRTHS_REJECT_BAD_SESSION] = "BAD_SESSION",
        [DRTHS_REJECT_NO_KEY] = "NO_KEY",
        [DRTHS_REJECT_BAD_COUNTER] = "BAD_COUNTER",
        [DRTHS_REJECT_REPLAYED] = "REPLAYED",
        [DRTHS_REJECT_TOO_OLD] = "TOO_OLD",
        [DRTHS_REJECT_BAD_TAG] = "BAD_TAG",
        [DRTHS_REJECT_BAD_PAYLOAD] = "BAD_PAYLOAD",
        [DRTHS_REJECT_TRAILING_BYTES] = "TRAILING_BYTES",
        [DRTHS_REJECT_BAD_SCHEMA] = "BAD_SCHEMA",
        [DRTHS_REJECT_BAD_FIELD] = "BAD_FIELD",
        [DRTHS_REJECT_V1_PEER] = "V1_PEER",
        [DRTHS_REJECT_HELLO_RUNNING] = "HELLO_RUNNING",
        [DRTHS_REJECT_HELLO_SEEN] = "HELLO_SEEN",
        [DRTHS_REJECT_HELLO_PINNED] = "HELLO_PINNED",
    };
    if ((unsigned)r >= DRTHS_REJECT_COUNT)
        return "UNKNOWN";
    return names[r];
}

const char *drths_msg_type_name(int type)
{
    static const char *const names[DRTHS_MSG_TYPE_MAX + 1] = {
        [DRTHS_MSG_HELLO] = "HELLO",         [DRTHS_MSG_HELLO_ACK] = "HELLO_ACK",
        [DRTHS_MSG_PROBE] = "PROBE",         [DRTHS_MSG_PROBE_ECHO] = "PROBE_ECHO",
        [DRTHS_MSG_COMMAND] = "COMMAND",     [DRTHS_MSG_FEEDBACK] = "FEEDBACK",
        [DRTHS_MSG_EPOCH] = "EPOCH",         [DRTHS_MSG_HEARTBEAT] = "HEARTBEAT",
        [DRTHS_MSG_STOP] = "STOP",           [DRTHS_MSG_ABORT] = "ABORT",
    };
    if (type < 1 || type > DRTHS_MSG_TYPE_MAX)
        return "UNKNOWN";
    return names[type];
}

const char *drths_stop_reason_name(int reason)
{
    static const char *const names[] = {
        [DRTHS_STOP_UNSPECIFIED] = "UNSPECIFIED",
        [DRTHS_STOP_USER_STOP] = "USER_STOP",
        [DRTHS_STOP_END_OF_RECORD] = "END_OF_RECORD",
        [DRTHS_STOP_WATCHDOG] = "WATCHDOG",
        [DRTHS_STOP_LIMIT] = "LIMIT",
        [DRTHS_STOP_PEER_LOST] = "PEER_LOST",
        [DRTHS_STOP_FINGERPRINT_MISMATCH] = "FINGERPRINT_MISMATCH",
        [DRTHS_STOP_VERSION_MISMATCH] = "VERSION_MISMATCH",
        [DRTHS_STOP_CONFIG_MISMATCH] = "CONFIG_MISMATCH",
        [DRTHS_STOP_SIGNAL] = "SIGNAL",
        [DRTHS_STOP_BUSY] = "BUSY",
        [DRTHS_STOP_INTERNAL_ERROR] = "INTERNAL_ERROR",
        [DRTHS_STOP_HOLD] = "HOLD",
        [DRTHS_STOP_RECORDS] = "RECORDS",
    };
    if (reason < 0 || (size_t)reason >= sizeof names / sizeof names[0])
        return "UNKNOWN";
    return names[reason];
}

const char *drths_site_state_name(int state)
{
    switch (state) {
    case DRTHS_STATE_WAITING: return "WAITING";
    case DRTHS_STATE_RUNNING: return "RUNNING";
    case DRTHS_STATE_HOLD: return "HOLD";
    case DRTHS_STATE_STOPPED: return "STOPPED";
    default: return "UNKNOWN";
    }
}

/* ---- header --------------------------------------------------------------------------- */

static void put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* The big-endian value of n bytes (0 to 8). The widths the wire uses load as one word and a
 * byte swap; a byte loop was a tenth of opening a COMMAND. */
static inline uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v8;
    uint32_t v4;
    uint16_t v2;
    switch (n) {
    case 8:
        memcpy(&v8, p, 8);
        return be64toh(v8);
    case 4:
        memcpy(&v4, p, 4);
        return be32toh(v4);
    case 2:
        memcpy(&v2, p, 2);
        return be16toh(v2);
    case 1:
        return p[0];
    default: {
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
            v = v << 8 | p[i];
        return v;
    }
    }
}

static void header_write(uint8_t *p, const drths_wire_header_t *h)
{
    memcpy(p, DRTHS_WIRE_MAGIC, 4);
    p[4] = h->version;
    p[5] = h->type;
    put_be16(p + 6, h->flags);
    put_be64(p + 8, h->session_id);
    put_be64(p + 16, h->counter);
    put_be64(p + 24, h->tick);
    put_be32(p + 32, h->epoch);
    put_be32(p + 36, h->reserved);
}

/* Bytes before the payload: the header, and the ephemeral key when the EPH flag is set. */
static size_t prefix_len(const drths_wire_header_t *h)
{
    return DRTHS_WIRE_HEADER_BYTES + ((h->flags & DRTHS_WIRE_FLAG_EPH) ? DRTHS_EPH_BYTES : 0);
}

/* The EPH flag is required on HELLO / HELLO_ACK, allowed on ABORT, and nothing else. */
static bool flags_ok(const drths_wire_header_t *h)
{
    if (h->flags & ~DRTHS_WIRE_FLAG_EPH)
        return false;
    bool eph = h->flags & DRTHS_WIRE_FLAG_EPH;
    if (h->type == DRTHS_MSG_HELLO || h->type == DRTHS_MSG_HELLO_ACK)
        return eph;
    return !eph || h->type == DRTHS_MSG_ABORT;
}

drths_reject_t drths_wire_peek_header(const uint8_t *buf, size_t len, drths_wire_header_t *h)
{
    if (len < DRTHS_WIRE_HEADER_BYTES + 1 + DRTHS_TAG_BYTES)
        return DRTHS_REJECT_TOO_SHORT;
    if (len > DRTHS_WIRE_MAX_DATAGRAM)
        return DRTHS_REJECT_TOO_LONG;
    if (memcmp(buf, DRTHS_WIRE_MAGIC, 4) != 0)
        return DRTHS_REJECT_BAD_MAGIC;
    /* A v1 peer is named before anything else of its header is judged: its datagrams are
     * well formed for v1, and the operator needs to hear "upgrade it", not "bad header". */
    if (buf[4] == 1)
        return DRTHS_REJECT_V1_PEER;
    h->version = buf[4];
    h->type = buf[5];
    h->flags = (uint16_t)get_be(buf + 6, 2);
    h->session_id = get_be(buf + 8, 8);
    h->counter = get_be(buf + 16, 8);
    h->tick = get_be(buf + 24, 8);
    h->epoch = (uint32_t)get_be(buf + 32, 4);
    h->reserved = (uint32_t)get_be(buf + 36, 4);
    if (h->version != DRTHS_WIRE_VERSION)
        return DRTHS_REJECT_BAD_VERSION;
    if (h->type < 1 || h->type > DRTHS_MSG_TYPE_MAX)
        return DRTHS_REJECT_BAD_TYPE;
    if (!flags_ok(h) || h->reserved != 0)
        return DRTHS_REJECT_BAD_RESERVED;
    if (len < prefix_len(h) + 1 + DRTHS_TAG_BYTES)
        return DRTHS_REJECT_TOO_SHORT;
    return DRTHS_REJECT_OK;
}

unsigned drths_wire_offset(int k)
{
    if (k < 0)
        return 0;
    if (k < 4)
        return (unsigned)k;
    if (k >= DRTHS_WIRE_MAX_R)
        k = DRTHS_WIRE_MAX_R - 1;
    return 8u << (k - 4);
}

int drths_wire_samples_of(uint64_t tick, int r)
{
    if (r > DRTHS_WIRE_MAX_R)
        r = DRTHS_WIRE_MAX_R;
    int k = 0;
    while (k < r && drths_wire_offset(k) <= tick)
        k++;
    return k;
}

uint64_t drths_wire_sample_tick(uint64_t tick, int k)
{
    return tick - drths_wire_offset(k);
}

int drths_wire_pick_version(int min_a, int max_a, int min_b, int max_b)
{
    int lo = min_a > min_b ? min_a : min_b, hi = max_a < max_b ? max_a : max_b;
    return lo <= hi ? hi : 0;
}

/* Which role may send which type. PROBE / PROBE_ECHO, HEARTBEAT, STOP and ABORT go both ways;
 * the handshake, COMMAND and EPOCH come from the numerical site, FEEDBACK from the physical. */
static bool role_sends(drths_role_t sender, int type)
{
    switch (type) {
    case DRTHS_MSG_HELLO:
    case DRTHS_MSG_COMMAND:
    case DRTHS_MSG_EPOCH:
        return sender == DRTHS_ROLE_NUMERICAL;
    case DRTHS_MSG_HELLO_ACK:
    case DRTHS_MSG_FEEDBACK:
        return sender == DRTHS_ROLE_PHYSICAL;
    case DRTHS_MSG_PROBE:
    case DRTHS_MSG_PROBE_ECHO:
    case DRTHS_MSG_HEARTBEAT:
    case DRTHS_MSG_STOP:
    case DRTHS_MSG_ABORT:
        return true;
    default:
        return false;
    }
}

int drths_wire_role_sends(drths_role_t sender, int type)
{
    return role_sends(sender, type);
}

static drths_role_t peer_of(drths_role_t self)
{
    return self == DRTHS_ROLE_NUMERICAL ? DRTHS_ROLE_PHYSICAL : DRTHS_ROLE_NUMERICAL;
}

static bool is_handshake(int type)
{
    return type == DRTHS_MSG_HELLO || type == DRTHS_MSG_HELLO_ACK;
}

/* ---- validation (shared by sender and receiver) ---------------------------------------- */

static bool text_ok(const char *s, size_t max)
{
    return memchr(s, '\0', max + 1) != NULL;
}

static drths_reject_t validate(const drths_msg_t *m)
{
    switch (m->type) {
    case DRTHS_MSG_HELLO:
    case DRTHS_MSG_HELLO_ACK: {
        const drths_msg_hello_t *h = &m->u.hello;
        drths_role_t want = m->type == DRTHS_MSG_HELLO ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL;
        if (h->proto_min < 1 || h->proto_min > h->proto_max || h->role != want ||
            h->version > h->proto_max)
            return DRTHS_REJECT_BAD_FIELD;
        if (!text_ok(h->site, DRTHS_WIRE_MAX_NAME) || h->n_sections > DRTHS_WIRE_MAX_SECTIONS)
            return DRTHS_REJECT_BAD_FIELD;
        for (int i = 0; i < h->n_sections; i++)
            if (!text_ok(h->sections[i].name, DRTHS_WIRE_MAX_NAME))
                return DRTHS_REJECT_BAD_FIELD;
        if (!isfinite(h->rate_hz) || h->rate_hz <= 0.0 || h->rate_hz > 1e6)
            return DRTHS_REJECT_BAD_FIELD;
        if (h->n_channels < 1 || h->n_channels > DRTHS_WIRE_MAX_CHANNELS || h->r < 1 ||
            h->r > DRTHS_WIRE_MAX_R)
            return DRTHS_REJECT_BAD_FIELD;
        if (!text_ok(h->units, DRTHS_WIRE_MAX_UNITS) || !text_ok(h->software, DRTHS_WIRE_MAX_SOFTWARE))
            return DRTHS_REJECT_BAD_FIELD;
        /* Offsets: 0 first, strictly increasing (each sample a different tick). */
        if (h->offsets[0] != 0)
            return DRTHS_REJECT_BAD_FIELD;
        for (int k = 1; k < h->r; k++)
            if (h->offsets[k] <= h->offsets[k - 1])
                return DRTHS_REJECT_BAD_FIELD;
        return DRTHS_REJECT_OK;
    }
    case DRTHS_MSG_PROBE:
    case DRTHS_MSG_PROBE_ECHO:
        return DRTHS_REJECT_OK;
    case DRTHS_MSG_COMMAND: {
        const drths_msg_command_t *c = &m->u.command;
        if (c->n_channels < 1 || c->n_channels > DRTHS_WIRE_MAX_CHANNELS || c->r < 1 ||
            c->r > DRTHS_WIRE_MAX_R || (uint64_t)(c->r - 1) > m->tick)
            return DRTHS_REJECT_BAD_FIELD;
        for (int k = 0; k < c->r; k++)
            for (int j = 0; j < c->n_channels; j++) {
                const drths_cmd_channel_t *s = &c->s[k][j];
                if (!isfinite(s->disp_m) || !isfinite(s->vel_m_s) || !isfinite(s->acc_m_s2) ||
                    !isfinite(s->damper_cmd))
                    return DRTHS_REJECT_BAD_FIELD;
            }
        return DRTHS_REJECT_OK;
    }
    case DRTHS_MSG_FEEDBACK: {
        const drths_msg_feedback_t *f = &m->u.feedback;
        if (f->n_channels < 1 || f->n_channels > DRTHS_WIRE_MAX_CHANNELS || f->r < 1 ||
            f->r > DRTHS_WIRE_MAX_R || (uint64_t)(f->r - 1) > m->tick)
            return DRTHS_REJECT_BAD_FIELD;
        for (int k = 0; k < f->r; k++) {
            const drths_fb_sample_t *s = &f->s[k];
            if (s->cmd_tick < -1 || (s->flags & ~DRTHS_FB_FLAGS_ALL) != 0)
                return DRTHS_REJECT_BAD_FIELD;
            for (int j = 0; j < f->n_channels; j++)
                if (!isfinite(s->ch[j].force_n) || !isfinite(s->ch[j].disp_m))
                    return DRTHS_REJECT_BAD_FIELD;
        }
        return DRTHS_REJECT_OK;
    }
    case DRTHS_MSG_EPOCH:
        return DRTHS_REJECT_OK;
    case DRTHS_MSG_HEARTBEAT:
        return (m->u.heartbeat.state >= DRTHS_STATE_WAITING &&
                m->u.heartbeat.state <= DRTHS_STATE_STOPPED)
                   ? DRTHS_REJECT_OK
                   : DRTHS_REJECT_BAD_FIELD;
    case DRTHS_MSG_STOP:
    case DRTHS_MSG_ABORT:
        return text_ok(m->u.stop.text, DRTHS_WIRE_MAX_TEXT) ? DRTHS_REJECT_OK
                                                            : DRTHS_REJECT_BAD_FIELD;
    default:
        return DRTHS_REJECT_BAD_TYPE;
    }
}

/* ---- sizes ---------------------------------------------------------------------------- */

static size_t arr_hdr(size_t n)
{
    return n <= 15 ? 1 : n <= 0xffff ? 3 : 5;
}

static size_t str_hdr(size_t n)
{
    return n <= 31 ? 1 : n <= 0xff ? 2 : n <= 0xffff ? 3 : 5;
}

size_t drths_wire_max_datagram(drths_msg_type_t type, int n_channels, int r)
{
    const size_t I = 9, F = 9; /* widest integer, float64 */
    size_t n = n_channels < 1 ? 1 : (size_t)n_channels;
    size_t k = r < 1 ? 1 : (size_t)r;
    size_t p;
    switch (type) {
    case DRTHS_MSG_HELLO:
    case DRTHS_MSG_HELLO_ACK:
        p = arr_hdr(13) + 5 * I + str_hdr(DRTHS_WIRE_MAX_NAME) + DRTHS_WIRE_MAX_NAME + F + I +
            arr_hdr(DRTHS_WIRE_MAX_R) + DRTHS_WIRE_MAX_R * I + str_hdr(DRTHS_WIRE_MAX_UNITS) +
            DRTHS_WIRE_MAX_UNITS + 2 + 32 + arr_hdr(DRTHS_WIRE_MAX_SECTIONS) +
            DRTHS_WIRE_MAX_SECTIONS * (arr_hdr(2) + str_hdr(DRTHS_WIRE_MAX_NAME) +
                                       DRTHS_WIRE_MAX_NAME + 2 + DRTHS_WIRE_SECTION_HASH) +
            str_hdr(DRTHS_WIRE_MAX_SOFTWARE) + DRTHS_WIRE_MAX_SOFTWARE;
        return DRTHS_WIRE_HEADER_BYTES + DRTHS_EPH_BYTES + p + DRTHS_TAG_BYTES;
    case DRTHS_MSG_PROBE:
    case DRTHS_MSG_PROBE_ECHO:
        p = arr_hdr(3) + 3 * I;
        break;
    case DRTHS_MSG_COMMAND:
        p = arr_hdr(6) + 5 * I + arr_hdr(k) + k * (arr_hdr(n) + n * (arr_hdr(4) + 4 * F));
        break;
    case DRTHS_MSG_FEEDBACK:
        p = arr_hdr(5) + 4 * I + arr_hdr(k) + k * (arr_hdr(3) + 2 * I + arr_hdr(n) + n * (arr_hdr(2) + 2 * F));
        break;
    case DRTHS_MSG_EPOCH:
        p = arr_hdr(3) + 3 * I;
        break;
    case DRTHS_MSG_HEARTBEAT:
        p = arr_hdr(1) + I;
        break;
    case DRTHS_MSG_STOP:
    case DRTHS_MSG_ABORT: /* an ABORT refusing a HELLO also carries an ephemeral key */
        p = arr_hdr(2) + I + str_hdr(DRTHS_WIRE_MAX_TEXT) + DRTHS_WIRE_MAX_TEXT +
            (type == DRTHS_MSG_ABORT ? DRTHS_EPH_BYTES : 0);
        break;
    default:
        return 0;
    }
    return DRTHS_WIRE_HEADER_BYTES + p + DRTHS_TAG_BYTES;
}

/* HELLO / HELLO_ACK payload: this many elements in version 2; later versions may append more,
 * which a version 2 receiver ignores (the layout is frozen, PROTOCOL.md section 9.1). */
#define HELLO_FIELDS 13

/* ---- packing -------------------------------------------------------------------------- */

/* msgpack written straight into the datagram buffer, in the encodings msgpack-c's packer chose
 * when it wrote here through a callback (PROTOCOL.md: the shortest form of each integer and
 * length, float64 for every double): the same bytes (unit.wire's golden bytes), without a
 * callback and a memcpy per element, which were half the cost of sealing a COMMAND at R = 8. */
typedef struct outbuf {
    uint8_t *p;
    size_t cap;
    size_t len;
    bool overflow;
} outbuf_t;

/* n bytes to write at, or NULL (and overflow recorded, so no later write fits either). */
static inline uint8_t *out_room(outbuf_t *o, size_t n)
{
    if (o->overflow || n > o->cap - o->len) {
        o->overflow = true;
        return NULL;
    }
    uint8_t *q = o->p + o->len;
    o->len += n;
    return q;
}

/* A one-byte tag then v in n big-endian bytes (n = 0, 1, 2, 4 or 8; 0: the tag alone), each
 * width as one byte swap and one store (the readers' get_be in reverse). */
static inline void w_tagged(outbuf_t *o, uint8_t tag, uint64_t v, int n)
{
    uint8_t *q = out_room(o, 1 + (size_t)n);
    if (!q)
        return;
    q[0] = tag;
    uint64_t v8;
    uint32_t v4;
    uint16_t v2;
    switch (n) {
    case 8:
        v8 = htobe64(v);
        memcpy(q + 1, &v8, 8);
        break;
    case 4:
        v4 = htobe32((uint32_t)v);
        memcpy(q + 1, &v4, 4);
        break;
    case 2:
        v2 = htobe16((uint16_t)v);
        memcpy(q + 1, &v2, 2);
        break;
    case 1:
        q[1] = (uint8_t)v;
        break;
    default:
        break;
    }
}

static inline void w_uint(outbuf_t *o, uint64_t v)
{
    if (v < 128)
        w_tagged(o, (uint8_t)v, 0, 0); /* positive fixint */
    else if (v < 0x100)
        w_tagged(o, 0xcc, v, 1);
    else if (v < 0x10000)
        w_tagged(o, 0xcd, v, 2);
    else if (v < 0x100000000)
        w_tagged(o, 0xce, v, 4);
    else
        w_tagged(o, 0xcf, v, 8);
}

/* msgpack-c's msgpack_pack_int64: non-negative values as w_uint, negative ones in the shortest
 * signed form. */
static inline void w_int(outbuf_t *o, int64_t v)
{
    if (v >= 0)
        w_uint(o, (uint64_t)v);
    else if (v >= -32)
        w_tagged(o, (uint8_t)v, 0, 0); /* negative fixint */
    else if (v >= INT8_MIN)
        w_tagged(o, 0xd0, (uint64_t)v, 1);
    else if (v >= INT16_MIN)
        w_tagged(o, 0xd1, (uint64_t)v, 2);
    else if (v >= INT32_MIN)
        w_tagged(o, 0xd2, (uint64_t)v, 4);
    else
        w_tagged(o, 0xd3, (uint64_t)v, 8);
}

static inline void w_double(outbuf_t *o, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    w_tagged(o, 0xcb, bits, 8);
}

static inline void w_array(outbuf_t *o, size_t n)
{
    if (n < 16)
        w_tagged(o, (uint8_t)(0x90 | n), 0, 0);
    else if (n < 0x10000)
        w_tagged(o, 0xdc, n, 2);
    else
        w_tagged(o, 0xdd, n, 4);
}

static void w_bytes(outbuf_t *o, const void *b, size_t n)
{
    uint8_t *q = out_room(o, n);
    if (q && n > 0)
        memcpy(q, b, n);
}

static void w_str(outbuf_t *o, const char *s)
{
    size_t n = strlen(s);
    if (n < 32)
        w_tagged(o, (uint8_t)(0xa0 | n), 0, 0);
    else if (n < 0x100)
        w_tagged(o, 0xd9, n, 1);
    else if (n < 0x10000)
        w_tagged(o, 0xda, n, 2);
    else
        w_tagged(o, 0xdb, n, 4);
    w_bytes(o, s, n);
}

static void w_bin(outbuf_t *o, const uint8_t *b, size_t n)
{
    if (n < 0x100)
        w_tagged(o, 0xc4, n, 1);
    else if (n < 0x10000)
        w_tagged(o, 0xc5, n, 2);
    else
        w_tagged(o, 0xc6, n, 4);
    w_bytes(o, b, n);
}

/* Packs the payload; overflow is recorded in the outbuf, so return values need no checks. */
static void pack_payload(outbuf_t *o, const drths_msg_t *m)
{
    switch (m->type) {
    case DRTHS_MSG_HELLO:
    case DRTHS_MSG_HELLO_ACK: {
        const drths_msg_hello_t *h = &m->u.hello;
        w_array(o, HELLO_FIELDS);
        w_uint(o, h->proto_min);
        w_uint(o, h->proto_max);
        w_uint(o, h->role);
        w_uint(o, h->version);
        w_uint(o, h->link);
        w_str(o, h->site);
        w_double(o, h->rate_hz);
        w_uint(o, h->n_channels);
        w_array(o, h->r);
        for (int k = 0; k < h->r; k++)
            w_uint(o, h->offsets[k]);
        w_str(o, h->units);
        w_bin(o, h->fingerprint, sizeof h->fingerprint);
        w_array(o, h->n_sections);
        for (int i = 0; i < h->n_sections; i++) {
            w_array(o, 2);
            w_str(o, h->sections[i].name);
            w_bin(o, h->sections[i].hash, DRTHS_WIRE_SECTION_HASH);
        }
        w_str(o, h->software);
        break;
    }
    case DRTHS_MSG_PROBE:
    case DRTHS_MSG_PROBE_ECHO: {
        const drths_msg_probe_t *p = &m->u.probe;
        bool echo = m->type == DRTHS_MSG_PROBE_ECHO;
        w_array(o, echo ? 3 : 2);
        w_uint(o, p->seq);
        w_uint(o, p->send_time_ns);
        if (echo)
            w_uint(o, p->hold_ns);
        break;
    }
    case DRTHS_MSG_COMMAND: {
        const drths_msg_command_t *c = &m->u.command;
        w_array(o, 6);
        w_uint(o, c->loop_delay_ticks);
        w_uint(o, c->n_channels);
        w_uint(o, c->r);
        w_uint(o, c->echo_counter);
        w_uint(o, c->echo_hold_ns);
        w_array(o, c->r);
        for (int k = 0; k < c->r; k++) {
            w_array(o, c->n_channels);
            for (int j = 0; j < c->n_channels; j++) {
                const drths_cmd_channel_t *s = &c->s[k][j];
                w_array(o, 4);
                w_double(o, s->disp_m);
                w_double(o, s->vel_m_s);
                w_double(o, s->acc_m_s2);
                w_double(o, s->damper_cmd);
            }
        }
        break;
    }
    case DRTHS_MSG_FEEDBACK: {
        const drths_msg_feedback_t *f = &m->u.feedback;
        w_array(o, 5);
        w_uint(o, f->n_channels);
        w_uint(o, f->r);
        w_uint(o, f->echo_counter);
        w_uint(o, f->echo_hold_ns);
        w_array(o, f->r);
        for (int k = 0; k < f->r; k++) {
            const drths_fb_sample_t *s = &f->s[k];
            w_array(o, 3);
            w_int(o, s->cmd_tick);
            w_uint(o, s->flags);
            w_array(o, f->n_channels);
            for (int j = 0; j < f->n_channels; j++) {
                w_array(o, 2);
                w_double(o, s->ch[j].force_n);
                w_double(o, s->ch[j].disp_m);
            }
        }
        break;
    }
    case DRTHS_MSG_EPOCH:
        w_array(o, 3);
        w_uint(o, m->u.epoch.new_epoch);
        w_uint(o, m->u.epoch.loop_delay_ticks);
        w_uint(o, m->u.epoch.effective_tick);
        break;
    case DRTHS_MSG_HEARTBEAT:
        w_array(o, 1);
        w_uint(o, m->u.heartbeat.state);
        break;
    case DRTHS_MSG_STOP:
    case DRTHS_MSG_ABORT:
        w_array(o, 2);
        w_uint(o, m->u.stop.reason);
        w_str(o, m->u.stop.text);
        break;
    }
}

int drths_wire_tx_init(drths_wire_tx_t *tx, drths_role_t role, uint64_t session_id)
{
    if ((role != DRTHS_ROLE_NUMERICAL && role != DRTHS_ROLE_PHYSICAL) || session_id == 0)
        return -EINVAL;
    memset(tx, 0, sizeof *tx);
    tx->role = role;
    tx->session_id = session_id;
    tx->next_counter = 1;
    return 0;
}

void drths_wire_tx_set_handshake(drths_wire_tx_t *tx, const uint8_t key[DRTHS_KEY_BYTES],
                                 const uint8_t eph_pk[DRTHS_EPH_BYTES])
{
    memcpy(tx->hs_key, key, DRTHS_KEY_BYTES);
    memcpy(tx->eph_pk, eph_pk, DRTHS_EPH_BYTES);
    tx->have_hs = true;
}

void drths_wire_tx_set_keys(drths_wire_tx_t *tx, const drths_session_keys_t *keys)
{
    memcpy(tx->key, tx->role == DRTHS_ROLE_NUMERICAL ? keys->num_to_phys : keys->phys_to_num,
           DRTHS_KEY_BYTES);
    tx->have_key = true;
}

void drths_wire_tx_close(drths_wire_tx_t *tx)
{
    drths_crypto_wipe(tx, sizeof *tx);
}

/* The key m is sealed with and whether the ephemeral key goes after the header: HELLO /
 * HELLO_ACK the handshake key; ABORT the session key, or (actuator site refusing a HELLO) the
 * handshake key; the rest the session key. NULL if that key is not there yet. */
static const uint8_t *seal_key(const drths_wire_tx_t *tx, int type, bool *eph)
{
    *eph = false;
    if (is_handshake(type) || (type == DRTHS_MSG_ABORT && !tx->have_key &&
                               tx->role == DRTHS_ROLE_PHYSICAL)) {
        *eph = true;
        return tx->have_hs ? tx->hs_key : NULL;
    }
    return tx->have_key ? tx->key : NULL;
}

int drths_wire_seal(drths_wire_tx_t *tx, const drths_msg_t *m, uint8_t *buf, size_t cap,
                    size_t *len)
{
    if (!role_sends(tx->role, m->type) || validate(m) != DRTHS_REJECT_OK)
        return -EINVAL;
    bool eph;
    const uint8_t *key = seal_key(tx, m->type, &eph);
    if (!key)
        return -ENOKEY;
    if (tx->next_counter == 0 || tx->next_counter > DRTHS_REPLAY_COUNTER_MAX)
        return -EOVERFLOW;
    size_t pre = DRTHS_WIRE_HEADER_BYTES + (eph ? DRTHS_EPH_BYTES : 0);
    if (cap < pre + 1 + DRTHS_TAG_BYTES)
        return -EMSGSIZE;
    size_t room = cap - pre - DRTHS_TAG_BYTES;
    if (room > DRTHS_WIRE_MAX_PAYLOAD)
        room = DRTHS_WIRE_MAX_PAYLOAD;
    drths_wire_header_t h = {
        .version = DRTHS_WIRE_VERSION,
        .type = (uint8_t)m->type,
        .flags = eph ? DRTHS_WIRE_FLAG_EPH : 0,
        .session_id = tx->session_id,
        .counter = tx->next_counter,
        .tick = m->tick,
        .epoch = m->epoch,
    };
    header_write(buf, &h);
    if (eph)
        memcpy(buf + DRTHS_WIRE_HEADER_BYTES, tx->eph_pk, DRTHS_EPH_BYTES);
    outbuf_t o = {.p = buf + pre, .cap = room};
    pack_payload(&o, m);
    if (o.overflow)
        return -EMSGSIZE;
    if (is_handshake(m->type)) {
        if (o.len > sizeof tx->hs_plain)
            return -EMSGSIZE;
        memcpy(tx->hs_plain, o.p, o.len); /* for the transcript hash */
        tx->hs_plain_len = o.len;
    }
    drths_crypto_seal(key, tx->role, h.counter, buf, pre, o.p, o.len, o.p + o.len);
    *len = pre + o.len + DRTHS_TAG_BYTES;
    tx->next_counter++;
    return 0;
}

/* ---- receiving ------------------------------------------------------------------------ */

/* Each msgpack object takes sizeof(msgpack_object) in the zone plus at most one alignment pad
 * per array; scan() guarantees that every declared element has at least one byte behind it,
 * so a payload of n bytes never needs more than n of each. One chunk of this size therefore
 * holds any payload and the zone never grows. */
#define ZONE_BYTES (DRTHS_WIRE_MAX_PAYLOAD * (sizeof(msgpack_object) + MSGPACK_ZONE_ALIGN) + 256)

int drths_wire_rx_init(drths_wire_rx_t *rx, drths_role_t self, const uint8_t psk[DRTHS_KEY_BYTES],
                       drths_error_t *err)
{
    if (self != DRTHS_ROLE_NUMERICAL && self != DRTHS_ROLE_PHYSICAL)
        return drths_error_set(err, -EINVAL, "wire receiver: role must be numerical or physical");
    if (!psk)
        return drths_error_set(err, -EINVAL, "wire receiver: no pre-shared key");
    memset(rx, 0, sizeof *rx);
    if (!msgpack_zone_init(&rx->zone, ZONE_BYTES))
        return drths_error_set(err, -ENOMEM, "wire receiver: cannot allocate %zu bytes for the "
                               "msgpack zone", (size_t)ZONE_BYTES);
    rx->zone_ready = true;
    rx->zone_head0 = rx->zone.chunk_list.head;
    rx->role = self;
    memcpy(rx->psk, psk, DRTHS_KEY_BYTES);
    drths_replay_reset(&rx->replay);
    return 0;
}

void drths_wire_rx_start(drths_wire_rx_t *rx, uint64_t session_id)
{
    rx->session_id = session_id;
    drths_crypto_wipe(rx->key, sizeof rx->key);
    rx->have_key = false;
    drths_crypto_wipe(rx->eph_sk, sizeof rx->eph_sk);
    drths_crypto_wipe(rx->hs_dh, sizeof rx->hs_dh);
    rx->have_eph = false;
    rx->have_peer_eph = false;
    drths_replay_reset(&rx->replay);
}

void drths_wire_rx_set_initiator(drths_wire_rx_t *rx, const uint8_t eph_sk[DRTHS_EPH_BYTES],
                                 const uint8_t eph_pk[DRTHS_EPH_BYTES])
{
    memcpy(rx->eph_sk, eph_sk, DRTHS_EPH_BYTES);
    memcpy(rx->eph_pk, eph_pk, DRTHS_EPH_BYTES);
    rx->have_eph = true;
}

void drths_wire_rx_set_peer_eph(drths_wire_rx_t *rx, const uint8_t eph[DRTHS_EPH_BYTES])
{
    memcpy(rx->peer_eph, eph, DRTHS_EPH_BYTES);
    rx->have_peer_eph = true;
}

void drths_wire_rx_set_keys(drths_wire_rx_t *rx, const drths_session_keys_t *keys)
{
    memcpy(rx->key, rx->role == DRTHS_ROLE_NUMERICAL ? keys->phys_to_num : keys->num_to_phys,
           DRTHS_KEY_BYTES);
    rx->have_key = true;
    /* Forward secrecy: once the session keys exist the ephemeral secret has no use left. */
    drths_crypto_wipe(rx->eph_sk, sizeof rx->eph_sk);
    drths_crypto_wipe(rx->hs_dh, sizeof rx->hs_dh);
    rx->have_eph = false;
}

void drths_wire_rx_close(drths_wire_rx_t *rx)
{
    if (rx->zone_ready)
        msgpack_zone_destroy(&rx->zone);
    drths_crypto_wipe(rx, sizeof *rx);
}

/* Walks the msgpack bytes without decoding: well-formedness, every length within the buffer,
 * and every declared array/map element backed by at least one remaining byte (which bounds
 * the zone use, see ZONE_BYTES). One top-level object; anything after it is TRAILING_BYTES. */
static drths_reject_t scan(const uint8_t *p, size_t n)
{
    size_t i = 0;
    uint64_t pending = 1;
    while (pending > 0) {
        if (i >= n)
            return DRTHS_REJECT_BAD_PAYLOAD;
        uint8_t b = p[i++];
        pending--;
        uint64_t skip = 0, add = 0;
        size_t lenbytes = 0; /* size of a big-endian length that follows b */
        int kind = 0;        /* 0 scalar, 1 bytes (skip), 2 array, 3 map, 4 ext (skip + type) */
        if (b <= 0x7f || b >= 0xe0) {
        } else if (b <= 0x8f) {
            add = 2u * (b & 0x0fu);
        } else if (b <= 0x9f) {
            add = b & 0x0fu;
        } else if (b <= 0xbf) {
            skip = b & 0x1fu;
        } else {
            switch (b) {
            case 0xc0: case 0xc2: case 0xc3: break;
            case 0xc4: case 0xd9: lenbytes = 1; kind = 1; break;
            case 0xc5: case 0xda: lenbytes = 2; kind = 1; break;
            case 0xc6: case 0xdb: lenbytes = 4; kind = 1; break;
            case 0xc7: lenbytes = 1; kind = 4; break;
            case 0xc8: lenbytes = 2; kind = 4; break;
            case 0xc9: lenbytes = 4; kind = 4; break;
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: skip = 4; break;
            case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc: lenbytes = 2; kind = 2; break;
            case 0xdd: lenbytes = 4; kind = 2; break;
            case 0xde: lenbytes = 2; kind = 3; break;
            case 0xdf: lenbytes = 4; kind = 3; break;
            default: return DRTHS_REJECT_BAD_PAYLOAD; /* 0xc1 is never used */
            }
        }
        if (lenbytes) {
            if (n - i < lenbytes)
                return DRTHS_REJECT_BAD_PAYLOAD;
            uint64_t v = get_be(p + i, (int)lenbytes);
            i += lenbytes;
            switch (kind) {
            case 1: skip = v; break;
            case 2: add = v; break;
            case 3: add = 2 * v; break;
            case 4: skip = v + 1; break;
            }
        }
        if (skip > n - i)
            return DRTHS_REJECT_BAD_PAYLOAD;
        i += (size_t)skip;
        pending += add;
        if (pending > n - i)
            return DRTHS_REJECT_BAD_PAYLOAD;
    }
    return i < n ? DRTHS_REJECT_TRAILING_BYTES : DRTHS_REJECT_OK;
}

static drths_reject_t get_array(const msgpack_object *o, uint32_t n, const msgpack_object **items)
{
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != n)
        return DRTHS_REJECT_BAD_SCHEMA;
    *items = o->via.array.ptr;
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_uint(const msgpack_object *o, uint64_t max, uint64_t *v)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return DRTHS_REJECT_BAD_FIELD;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return DRTHS_REJECT_BAD_SCHEMA;
    if (o->via.u64 > max)
        return DRTHS_REJECT_BAD_FIELD;
    *v = o->via.u64;
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_u8(const msgpack_object *o, uint8_t *v)
{
    uint64_t u = 0;
    TRY(get_uint(o, UINT8_MAX, &u));
    *v = (uint8_t)u;
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_u32(const msgpack_object *o, uint32_t *v)
{
    uint64_t u = 0;
    TRY(get_uint(o, UINT32_MAX, &u));
    *v = (uint32_t)u;
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_u64(const msgpack_object *o, uint64_t *v)
{
    return get_uint(o, UINT64_MAX, v);
}

static drths_reject_t get_i64(const msgpack_object *o, int64_t *v)
{
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *v = o->via.i64;
        return DRTHS_REJECT_OK;
    }
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return DRTHS_REJECT_BAD_SCHEMA;
    if (o->via.u64 > (uint64_t)INT64_MAX)
        return DRTHS_REJECT_BAD_FIELD;
    *v = (int64_t)o->via.u64;
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_f64(const msgpack_object *o, double *v)
{
    if (o->type != MSGPACK_OBJECT_FLOAT64 && o->type != MSGPACK_OBJECT_FLOAT32)
        return DRTHS_REJECT_BAD_SCHEMA;
    *v = o->via.f64;
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_str(const msgpack_object *o, char *out, size_t max)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return DRTHS_REJECT_BAD_SCHEMA;
    size_t n = o->via.str.size;
    if (n > max || (n > 0 && memchr(o->via.str.ptr, '\0', n) != NULL))
        return DRTHS_REJECT_BAD_FIELD;
    if (n > 0) /* msgpack-c may give a NULL pointer for an empty string */
        memcpy(out, o->via.str.ptr, n);
    out[n] = '\0';
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_bin(const msgpack_object *o, uint8_t *out, size_t n)
{
    if (o->type != MSGPACK_OBJECT_BIN)
        return DRTHS_REJECT_BAD_SCHEMA;
    if (o->via.bin.size != n)
        return DRTHS_REJECT_BAD_FIELD;
    memcpy(out, o->via.bin.ptr, n);
    return DRTHS_REJECT_OK;
}

/* n_channels and r first (range-checked), so the nested arrays can be checked against them. */
static drths_reject_t get_shape(const msgpack_object *on, const msgpack_object *or_, uint8_t *n,
                                uint8_t *r)
{
    TRY(get_u8(on, n));
    TRY(get_u8(or_, r));
    if (*n < 1 || *n > DRTHS_WIRE_MAX_CHANNELS || *r < 1 || *r > DRTHS_WIRE_MAX_R)
        return DRTHS_REJECT_BAD_FIELD;
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_offsets(const msgpack_object *o, drths_msg_hello_t *h)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return DRTHS_REJECT_BAD_SCHEMA;
    uint32_t n = o->via.array.size;
    if (n < 1 || n > DRTHS_WIRE_MAX_R)
        return DRTHS_REJECT_BAD_FIELD;
    h->r = (uint8_t)n;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t v = 0;
        TRY(get_uint(&o->via.array.ptr[k], DRTHS_WIRE_MAX_OFFSET, &v));
        h->offsets[k] = (uint16_t)v;
    }
    return DRTHS_REJECT_OK;
}

static drths_reject_t get_sections(const msgpack_object *o, drths_msg_hello_t *h)
{
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return DRTHS_REJECT_BAD_SCHEMA;
    uint32_t n = o->via.array.size;
    if (n > DRTHS_WIRE_MAX_SECTIONS)
        return DRTHS_REJECT_BAD_FIELD;
    h->n_sections = (uint8_t)n;
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *e;
        TRY(get_array(&o->via.array.ptr[i], 2, &e));
        TRY(get_str(&e[0], h->sections[i].name, DRTHS_WIRE_MAX_NAME));
        TRY(get_bin(&e[1], h->sections[i].hash, DRTHS_WIRE_SECTION_HASH));
    }
    return DRTHS_REJECT_OK;
}

static drths_reject_t decode_payload(const msgpack_object *root, drths_msg_t *m)
{
    const msgpack_object *a, *b, *c;
    switch (m->type) {
    case DRTHS_MSG_HELLO:
    case DRTHS_MSG_HELLO_ACK: {
        drths_msg_hello_t *h = &m->u.hello;
        /* At least HELLO_FIELDS elements: a later version may append some (frozen layout). */
        if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size < HELLO_FIELDS)
            return DRTHS_REJECT_BAD_SCHEMA;
        a = root->via.array.ptr;
        TRY(get_u8(&a[0], &h->proto_min));
        TRY(get_u8(&a[1], &h->proto_max));
        TRY(get_u8(&a[2], &h->role));
        TRY(get_u8(&a[3], &h->version));
        TRY(get_u8(&a[4], &h->link));
        TRY(get_str(&a[5], h->site, DRTHS_WIRE_MAX_NAME));
        TRY(get_f64(&a[6], &h->rate_hz));
        TRY(get_u8(&a[7], &h->n_channels));
        TRY(get_offsets(&a[8], h));
        TRY(get_str(&a[9], h->units, DRTHS_WIRE_MAX_UNITS));
        TRY(get_bin(&a[10], h->fingerprint, sizeof h->fingerprint));
        TRY(get_sections(&a[11], h));
        TRY(get_str(&a[12], h->software, DRTHS_WIRE_MAX_SOFTWARE));
        return DRTHS_REJECT_OK;
    }
    case DRTHS_MSG_PROBE:
    case DRTHS_MSG_PROBE_ECHO: {
        bool echo = m->type == DRTHS_MSG_PROBE_ECHO;
        TRY(get_array(root, echo ? 3 : 2, &a));
        TRY(get_u64(&a[0], &m->u.probe.seq));
        TRY(get_u64(&a[1], &m->u.probe.send_time_ns));
        if (echo)
            TRY(get_u64(&a[2], &m->u.probe.hold_ns));
        return DRTHS_REJECT_OK;
    }
    case DRTHS_MSG_COMMAND: {
        drths_msg_command_t *cm = &m->u.command;
        TRY(get_array(root, 6, &a));
        TRY(get_u32(&a[0], &cm->loop_delay_ticks));
        TRY(get_shape(&a[1], &a[2], &cm->n_channels, &cm->r));
        TRY(get_u64(&a[3], &cm->echo_counter));
        TRY(get_u64(&a[4], &cm->echo_hold_ns));
        TRY(get_array(&a[5], cm->r, &b));
        for (int k = 0; k < cm->r; k++) {
            TRY(get_array(&b[k], cm->n_channels, &c));
            for (int j = 0; j < cm->n_channels; j++) {
                const msgpack_object *v;
                drths_cmd_channel_t *s = &cm->s[k][j];
                TRY(get_array(&c[j], 4, &v));
                TRY(get_f64(&v[0], &s->disp_m));
                TRY(get_f64(&v[1], &s->vel_m_s));
                TRY(get_f64(&v[2], &s->acc_m_s2));
                TRY(get_f64(&v[3], &s->damper_cmd));
            }
        }
        return DRTHS_REJECT_OK;
    }
    case DRTHS_MSG_FEEDBACK: {
        drths_msg_feedback_t *f = &m->u.feedback;
        TRY(get_array(root, 5, &a));
        TRY(get_shape(&a[0], &a[1], &f->n_channels, &f->r));
        TRY(get_u64(&a[2], &f->echo_counter));
        TRY(get_u64(&a[3], &f->echo_hold_ns));
        TRY(get_array(&a[4], f->r, &b));
        for (int k = 0; k < f->r; k++) {
            drths_fb_sample_t *s = &f->s[k];
            TRY(get_array(&b[k], 3, &c));
            TRY(get_i64(&c[0], &s->cmd_tick));
            TRY(get_u8(&c[1], &s->flags));
            const msgpack_object *ch;
            TRY(get_array(&c[2], f->n_channels, &ch));
            for (int j = 0; j < f->n_channels; j++) {
                const msgpack_object *v;
                TRY(get_array(&ch[j], 2, &v));
                TRY(get_f64(&v[0], &s->ch[j].force_n));
                TRY(get_f64(&v[1], &s->ch[j].disp_m));
            }
        }
        return DRTHS_REJECT_OK;
    }
    case DRTHS_MSG_EPOCH:
        TRY(get_array(root, 3, &a));
        TRY(get_u32(&a[0], &m->u.epoch.new_epoch));
        TRY(get_u32(&a[1], &m->u.epoch.loop_delay_ticks));
        TRY(get_u64(&a[2], &m->u.epoch.effective_tick));
        return DRTHS_REJECT_OK;
    case DRTHS_MSG_HEARTBEAT:
        TRY(get_array(root, 1, &a));
        TRY(get_u8(&a[0], &m->u.heartbeat.state));
        return DRTHS_REJECT_OK;
    case DRTHS_MSG_STOP:
    case DRTHS_MSG_ABORT:
        TRY(get_array(root, 2, &a));
        TRY(get_u8(&a[0], &m->u.stop.reason));
        TRY(get_str(&a[1], m->u.stop.text, DRTHS_WIRE_MAX_TEXT));
        return DRTHS_REJECT_OK;
    default:
        return DRTHS_REJECT_BAD_TYPE;
    }
}

/* Decrypts with key. The caller has done the header, session and window checks. */
static bool try_open(drths_wire_rx_t *rx, const uint8_t *key, const drths_wire_header_t *h,
                     const uint8_t *buf, size_t len)
{
    size_t pre = prefix_len(h), plen = len - pre - DRTHS_TAG_BYTES;
    return key && drths_crypto_open(key, peer_of(rx->role), h->counter, buf, pre, buf + pre,
                                    plen, buf + len - DRTHS_TAG_BYTES, rx->plain) == 0;
}

/* Decrypts with key and decodes. The caller has done the header, session and window checks. */
/* The message's header fields, everything else zero. */
static void msg_start(drths_msg_t *out, const drths_wire_header_t *h, const uint8_t *buf)
{
    memset(out, 0, sizeof *out);
    out->type = (drths_msg_type_t)h->type;
    out->epoch = h->epoch;
    out->tick = h->tick;
    out->counter = h->counter;
    out->session_id = h->session_id;
    if (prefix_len(h) > DRTHS_WIRE_HEADER_BYTES) {
        out->has_eph = true;
        memcpy(out->eph, buf + DRTHS_WIRE_HEADER_BYTES, DRTHS_EPH_BYTES);
    }
}

/* ---- the fast path of COMMAND and FEEDBACK ------------------------------------------------ */

/* A COMMAND or FEEDBACK read straight from the payload bytes, for the encodings msgpack-c
 * decodes to what decode_payload accepts: arrays of exactly the expected length (fixarray,
 * array 16 or array 32), integers as fixints or uint / int 8..64 within the field's range, and
 * doubles as float64. On anything else (another type or form, a value out of range, bytes
 * missing or left over, or a value validate refuses) it returns false having decided nothing,
 * and the general path (scan, the zone, decode_payload, validate) gives the datagram the reason
 * it always got. Where it returns true the general path would have decoded the same message and
 * validate passed it: scan passes on such bytes, the nesting is 4 deep, and every value is read
 * as msgpack-c reads it. It exists because the general path's msgpack_unpack into the zone was
 * more than half of opening a COMMAND at R = 8. */
typedef struct inbuf {
    const uint8_t *p;
    size_t n, i;
} inbuf_t;

/* The big-endian value of the n bytes after the tag byte, consumed; false if they are not
 * there. */
static inline bool r_be(inbuf_t *in, int n, uint64_t *v)
{
    if ((size_t)n > in->n - in->i)
        return false;
    *v = get_be(in->p + in->i, n);
    in->i += (size_t)n;
    return true;
}

static inline bool r_tag(inbuf_t *in, uint8_t *b)
{
    if (in->i >= in->n)
        return false;
    *b = in->p[in->i++];
    return true;
}

static inline bool r_array(inbuf_t *in, uint64_t n)
{
    uint8_t b;
    uint64_t v;
    if (!r_tag(in, &b))
        return false;
    if (b >= 0x90 && b <= 0x9f)
        return (uint64_t)(b & 0x0f) == n;
    if (b == 0xdc || b == 0xdd)
        return r_be(in, b == 0xdc ? 2 : 4, &v) && v == n;
    return false;
}

/* A non-negative integer (positive fixint, uint 8..64, or int 8..64 holding a value >= 0)
 * or, with sign, also a negative one; *v as msgpack-c gives it (via.u64 / via.i64). */
static inline bool r_int(inbuf_t *in, bool sign, uint64_t *v)
{
    uint8_t b;
    if (!r_tag(in, &b))
        return false;
    if (b <= 0x7f) {
        *v = b;
        return true;
    }
    if (b >= 0xe0) { /* negative fixint */
        *v = (uint64_t)(int64_t)(int8_t)b;
        return sign;
    }
    if (b >= 0xcc && b <= 0xcf)
        return r_be(in, 1 << (b - 0xcc), v);
    if (b >= 0xd0 && b <= 0xd3) {
        int n = 1 << (b - 0xd0);
        if (!r_be(in, n, v))
            return false;
        if (n < 8 && (*v >> (8 * n - 1)) & 1) /* sign-extend */
            *v |= ~UINT64_C(0) << (8 * n);
        return sign || (int64_t)*v >= 0;
    }
    return false;
}

static inline bool r_uint(inbuf_t *in, uint64_t max, uint64_t *v)
{
    return r_int(in, false, v) && *v <= max;
}

/* A float64 that is finite (validate refuses the others: left to the general path, which gives
 * them BAD_FIELD). */
static inline bool r_f64(inbuf_t *in, double *d)
{
    uint64_t bits;
    if (in->n - in->i < 9 || in->p[in->i] != 0xcb)
        return false;
    memcpy(&bits, in->p + in->i + 1, 8);
    bits = be64toh(bits);
    if ((bits >> 52 & 0x7ff) == 0x7ff)
        return false;
    in->i += 9;
    memcpy(d, &bits, sizeof *d);
    return true;
}

/* n_channels and r in range, as get_shape checks them. */
static bool r_shape(inbuf_t *in, uint8_t *n, uint8_t *r)
{
    uint64_t a, b;
    if (!r_uint(in, DRTHS_WIRE_MAX_CHANNELS, &a) || a < 1 || !r_uint(in, DRTHS_WIRE_MAX_R, &b) ||
        b < 1)
        return false;
    *n = (uint8_t)a;
    *r = (uint8_t)b;
    return true;
}

static bool fast_command(inbuf_t *in, drths_msg_command_t *cm)
{
    uint64_t ld, ec, eh;
    if (!r_array(in, 6) || !r_uint(in, UINT32_MAX, &ld) || !r_shape(in, &cm->n_channels, &cm->r) ||
        !r_uint(in, UINT64_MAX, &ec) || !r_uint(in, UINT64_MAX, &eh) || !r_array(in, cm->r))
        return false;
    cm->loop_delay_ticks = (uint32_t)ld;
    cm->echo_counter = ec;
    cm->echo_hold_ns = eh;
    for (int k = 0; k < cm->r; k++) {
        if (!r_array(in, cm->n_channels))
            return false;
        for (int j = 0; j < cm->n_channels; j++) {
            drths_cmd_channel_t *s = &cm->s[k][j];
            if (!r_array(in, 4) || !r_f64(in, &s->disp_m) || !r_f64(in, &s->vel_m_s) ||
                !r_f64(in, &s->acc_m_s2) || !r_f64(in, &s->damper_cmd))
                return false;
        }
    }
    return true;
}

static bool fast_feedback(inbuf_t *in, drths_msg_feedback_t *f)
{
    uint64_t ec, eh;
    if (!r_array(in, 5) || !r_shape(in, &f->n_channels, &f->r) || !r_uint(in, UINT64_MAX, &ec) ||
        !r_uint(in, UINT64_MAX, &eh) || !r_array(in, f->r))
        return false;
    f->echo_counter = ec;
    f->echo_hold_ns = eh;
    for (int k = 0; k < f->r; k++) {
        drths_fb_sample_t *s = &f->s[k];
        uint64_t tick, flags;
        if (!r_array(in, 3) || !r_int(in, true, &tick) || !r_uint(in, UINT8_MAX, &flags) ||
            !r_array(in, f->n_channels))
            return false;
        /* validate's bounds: the general path names anything else BAD_FIELD */
        if ((int64_t)tick < -1 || (flags & ~(uint64_t)DRTHS_FB_FLAGS_ALL) != 0)
            return false;
        s->cmd_tick = (int64_t)tick;
        s->flags = (uint8_t)flags;
        for (int j = 0; j < f->n_channels; j++)
            if (!r_array(in, 2) || !r_f64(in, &s->ch[j].force_n) || !r_f64(in, &s->ch[j].disp_m))
                return false;
    }
    return true;
}

/* True if the payload was a COMMAND or FEEDBACK that this path decoded into out and that
 * validate would pass (finite numbers, a known flag, a command tick of -1 or more: checked as
 * they are read; the number of samples against the tick here), so the caller need not run
 * validate again. */
static bool decode_fast(const uint8_t *p, size_t n, const drths_wire_header_t *h,
                        const uint8_t *buf, drths_msg_t *out)
{
    if (h->type != DRTHS_MSG_COMMAND && h->type != DRTHS_MSG_FEEDBACK)
        return false;
    inbuf_t in = {.p = p, .n = n, .i = 0};
    msg_start(out, h, buf);
    bool command = h->type == DRTHS_MSG_COMMAND;
    bool ok = command ? fast_command(&in, &out->u.command) : fast_feedback(&in, &out->u.feedback);
    int r = command ? out->u.command.r : out->u.feedback.r;
    return ok && in.i == n && (uint64_t)(r - 1) <= h->tick;
}

/* Decrypts with key and decodes. The caller has done the header, session and window checks. */
static drths_reject_t open_and_decode(drths_wire_rx_t *rx, const uint8_t *key,
                                      const drths_wire_header_t *h, const uint8_t *buf,
                                      size_t len, drths_replay_t *window, drths_msg_t *out)
{
    size_t pre = prefix_len(h), plen = len - pre - DRTHS_TAG_BYTES;
    if (!try_open(rx, key, h, buf, len))
        return DRTHS_REJECT_BAD_TAG;
    /* Authenticated: the counter is now spent even if the payload turns out to be invalid,
     * so the same datagram replayed is REPLAYED, not decoded again. */
    if (window && drths_replay_update(window, h->counter) != DRTHS_REPLAY_OK)
        return DRTHS_REJECT_REPLAYED;
    rx->plain_len = plen;
    if (decode_fast(rx->plain, plen, h, buf, out))
        return DRTHS_REJECT_OK;
    TRY(scan(rx->plain, plen));
    msg_start(out, h, buf);
    msgpack_zone_clear(&rx->zone);
    msgpack_object root;
    size_t off = 0;
    msgpack_unpack_return ur =
        msgpack_unpack((const char *)rx->plain, plen, &off, &rx->zone, &root);
    if (ur == MSGPACK_UNPACK_EXTRA_BYTES)
        return DRTHS_REJECT_TRAILING_BYTES;
    if (ur != MSGPACK_UNPACK_SUCCESS)
        return DRTHS_REJECT_BAD_PAYLOAD;
    TRY(decode_payload(&root, out));
    return validate(out);
}

static drths_reject_t replay_reason(drths_replay_result_t r)
{
    switch (r) {
    case DRTHS_REPLAY_OK: return DRTHS_REJECT_OK;
    case DRTHS_REPLAY_DUPLICATE: return DRTHS_REJECT_REPLAYED;
    case DRTHS_REPLAY_TOO_OLD: return DRTHS_REJECT_TOO_OLD;
    default: return DRTHS_REJECT_BAD_COUNTER;
    }
}

/* The key of a datagram carrying an ephemeral key e (after the window check: the DH is the
 * expensive part). HELLO at the actuator site: the HELLO key of (session, e), and e must be the
 * adopted session's. HELLO_ACK / refusing ABORT at the numerical site: the HELLO_ACK key from
 * X25519(our secret, e); none once the session keys exist (the secret is gone). */
static drths_reject_t eph_key(drths_wire_rx_t *rx, const drths_wire_header_t *h,
                              const uint8_t *e, uint8_t key[DRTHS_KEY_BYTES])
{
    if (h->type == DRTHS_MSG_HELLO) {
        if (rx->have_peer_eph && memcmp(e, rx->peer_eph, DRTHS_EPH_BYTES) != 0)
            return DRTHS_REJECT_BAD_SESSION;
        drths_crypto_derive_hello(rx->psk, h->session_id, e, key);
        return DRTHS_REJECT_OK;
    }
    if (!rx->have_eph)
        return DRTHS_REJECT_NO_KEY;
    if (drths_crypto_dh(rx->hs_dh, rx->eph_sk, e) != 0)
        return DRTHS_REJECT_BAD_TAG;
    drths_crypto_derive_ack(rx->psk, h->session_id, rx->eph_pk, e, rx->hs_dh, key);
    return DRTHS_REJECT_OK;
}

static drths_reject_t open_current(drths_wire_rx_t *rx, const uint8_t *buf, size_t len,
                                   drths_msg_t *out)
{
    drths_wire_header_t h;
    TRY(drths_wire_peek_header(buf, len, &h));
    if (!role_sends(peer_of(rx->role), h.type))
        return DRTHS_REJECT_WRONG_DIRECTION;
    /* Only the actuator site refuses a HELLO with an ABORT carrying its ephemeral key. */
    if ((h.flags & DRTHS_WIRE_FLAG_EPH) && h.type == DRTHS_MSG_ABORT &&
        rx->role != DRTHS_ROLE_NUMERICAL)
        return DRTHS_REJECT_BAD_RESERVED;
    if (h.session_id == 0 || h.session_id != rx->session_id)
        return DRTHS_REJECT_BAD_SESSION;
    bool eph = h.flags & DRTHS_WIRE_FLAG_EPH;
    if (!eph && !rx->have_key)
        return DRTHS_REJECT_NO_KEY;
    TRY(replay_reason(drths_replay_check(&rx->replay, h.counter)));
    uint8_t hk[DRTHS_KEY_BYTES];
    const uint8_t *key = rx->key;
    if (eph) {
        TRY(eph_key(rx, &h, buf + DRTHS_WIRE_HEADER_BYTES, hk));
        key = hk;
    }
    drths_reject_t r = open_and_decode(rx, key, &h, buf, len, &rx->replay, out);
    drths_crypto_wipe(hk, sizeof hk);
    return r;
}

drths_reject_t drths_wire_open(drths_wire_rx_t *rx, const uint8_t *buf, size_t len,
                               drths_msg_t *out)
{
    drths_reject_t r = open_current(rx, buf, len, out);
    if (r == DRTHS_REJECT_OK)
        rx->accepted++;
    else if ((unsigned)r < DRTHS_REJECT_COUNT)
        rx->rejects[r]++;
    return r;
}

drths_reject_t drths_wire_open_hello(drths_wire_rx_t *rx, const uint8_t *buf, size_t len,
                                     drths_msg_t *out)
{
    drths_wire_header_t h;
    TRY(drths_wire_peek_header(buf, len, &h));
    if (h.type != DRTHS_MSG_HELLO)
        return DRTHS_REJECT_BAD_TYPE;
    if (!role_sends(peer_of(rx->role), h.type))
        return DRTHS_REJECT_WRONG_DIRECTION;
    if (h.session_id == 0)
        return DRTHS_REJECT_BAD_SESSION;
    if (h.counter == 0 || h.counter > DRTHS_REPLAY_COUNTER_MAX)
        return DRTHS_REJECT_BAD_COUNTER;
    uint8_t key[DRTHS_KEY_BYTES];
    drths_crypto_derive_hello(rx->psk, h.session_id, buf + DRTHS_WIRE_HEADER_BYTES, key);
    drths_reject_t r = open_and_decode(rx, key, &h, buf, len, NULL, out);
    drths_crypto_wipe(key, sizeof key);
    return r;
}
