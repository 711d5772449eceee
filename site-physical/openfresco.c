#include "site-physical/openfresco.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ID_BYTES 4
#define GENERIC_ID_COUNT 11

static double get_d(const uint8_t *buf, size_t i)
{
    double v;
    memcpy(&v, buf + 8 * i, sizeof v);
    return v;
}

static int32_t get_i(const uint8_t *buf, size_t i)
{
    int32_t v;
    memcpy(&v, buf + ID_BYTES * i, sizeof v);
    return v;
}

static void put_d(uint8_t *buf, size_t i, double v)
{
    memcpy(buf + 8 * i, &v, sizeof v);
}

void drths_ofr_rx_init(drths_ofr_rx_t *rx, drths_ofr_variant_t variant)
{
    memset(rx, 0, sizeof *rx);
    rx->variant = variant;
    rx->state = variant == DRTHS_OFR_GENERIC ? DRTHS_OFR_ST_ID : DRTHS_OFR_ST_PROBE;
    rx->data_size = DRTHS_OFR_DEFAULT_DATA;
}

size_t drths_ofr_rx_need(const drths_ofr_rx_t *rx)
{
    switch (rx->state) {
    case DRTHS_OFR_ST_PROBE:
        return ID_BYTES;
    case DRTHS_OFR_ST_OPEN:
        return 8 * (size_t)rx->data_size;
    case DRTHS_OFR_ST_SETUP:
        return 8 * (size_t)rx->data_size + 2 * DRTHS_OFR_NSIZES * ID_BYTES;
    case DRTHS_OFR_ST_ID:
        return GENERIC_ID_COUNT * ID_BYTES;
    case DRTHS_OFR_ST_ACTIONS:
        return 8 * (size_t)rx->data_size;
    default:
        return 0;
    }
}

int drths_ofr_data_size(const int ctrl[DRTHS_OFR_NSIZES], const int meas[DRTHS_OFR_NSIZES])
{
    int c = 1, m = 0;
    for (int i = 0; i < DRTHS_OFR_NSIZES; i++) {
        c += ctrl[i];
        m += meas[i];
    }
    int ds = DRTHS_OFR_DEFAULT_DATA;
    if (c > ds)
        ds = c;
    if (m > ds)
        ds = m;
    return ds;
}

static int fail(drths_ofr_rx_t *rx, drths_ofr_msg_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(drths_ofr_rx_t *rx, drths_ofr_msg_t *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text, sizeof m->text, fmt, ap);
    va_end(ap);
    m->kind = DRTHS_OFR_MSG_ERROR;
    rx->state = DRTHS_OFR_ST_FAILED;
    return -EPROTO;
}

/* Validates and takes the sizes; `declared` is the dataSize the client sent (0 if none). */
static int take_sizes(drths_ofr_rx_t *rx, drths_ofr_msg_t *m, const int32_t *ctrl,
                      const int32_t *meas, double declared)
{
    for (int i = 0; i < DRTHS_OFR_NSIZES; i++) {
        if (ctrl[i] < 0 || ctrl[i] > DRTHS_OFR_MAX_DATA || meas[i] < 0 ||
            meas[i] > DRTHS_OFR_MAX_DATA)
            return fail(rx, m, "size %d out of range (control %d, measurement %d)", i, (int)ctrl[i],
                        (int)meas[i]);
        rx->ctrl[i] = ctrl[i];
        rx->meas[i] = meas[i];
    }
    if (rx->ctrl[DRTHS_OFR_DISP] < 1 || rx->ctrl[DRTHS_OFR_DISP] > DRTHS_OFR_MAX_DOF)
        return fail(rx, m,
                    "the client controls %d displacements; this actuator site drives 1 to %d "
                    "(one per actuator channel)",
                    rx->ctrl[DRTHS_OFR_DISP], DRTHS_OFR_MAX_DOF);
    int ds = drths_ofr_data_size(rx->ctrl, rx->meas);
    /* The smallest vector the sizes need, without the 256 floor: a declared dataSize at least
     * this large is taken as it is. */
    int c = 1, s = 0;
    for (int i = 0; i < DRTHS_OFR_NSIZES; i++) {
        c += rx->ctrl[i];
        s += rx->meas[i];
    }
    int need = c > s ? c : s;
    if (rx->ctrl[DRTHS_OFR_DISP] * rx->ctrl[DRTHS_OFR_DISP] > need)
        need = rx->ctrl[DRTHS_OFR_DISP] * rx->ctrl[DRTHS_OFR_DISP];
    if (declared == floor(declared) && declared >= need && declared <= DRTHS_OFR_MAX_DATA)
        ds = (int)declared;
    if (ds > DRTHS_OFR_MAX_DATA)
        return fail(rx, m, "dataSize %d exceeds %d", ds, DRTHS_OFR_MAX_DATA);
    rx->data_size = ds;
    rx->state = DRTHS_OFR_ST_ACTIONS;
    m->kind = DRTHS_OFR_MSG_SETUP;
    return 0;
}

static void read_block(const uint8_t *buf, size_t *pos, int size, double *out)
{
    for (int i = 0; i < size; i++) {
        double v = get_d(buf, *pos + (size_t)i);
        if (i < DRTHS_OFR_MAX_DOF)
            out[i] = v;
    }
    *pos += (size_t)size;
}

int drths_ofr_rx_parse(drths_ofr_rx_t *rx, const uint8_t *buf, size_t n, drths_ofr_msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->time = NAN;
    if (rx->state == DRTHS_OFR_ST_FAILED)
        return fail(rx, m, "the session already failed");
    if (n != drths_ofr_rx_need(rx))
        return -EINVAL;
    switch (rx->state) {
    case DRTHS_OFR_ST_PROBE: {
        int32_t v = get_i(buf, 0);
        if (v != 1)
            return fail(rx, m, "endianness probe is %d, not 1 (a client of another byte order?)",
                        (int)v);
        m->kind = DRTHS_OFR_MSG_PROBE;
        rx->state = DRTHS_OFR_ST_OPEN;
        return 0;
    }
    case DRTHS_OFR_ST_OPEN: {
        double a = get_d(buf, 0);
        if (a != DRTHS_OFR_OPEN)
            return fail(rx, m, "expected open (action 1), got action %g", a);
        m->kind = DRTHS_OFR_MSG_OPEN;
        m->action = DRTHS_OFR_OPEN;
        m->tag = get_d(buf, 1);
        rx->state = DRTHS_OFR_ST_SETUP;
        return 0;
    }
    case DRTHS_OFR_ST_SETUP: {
        double a = get_d(buf, 0);
        if (a != DRTHS_OFR_SETUP)
            return fail(rx, m, "expected setup (action 2), got action %g", a);
        int32_t ids[2 * DRTHS_OFR_NSIZES];
        memcpy(ids, buf + 8 * (size_t)rx->data_size, sizeof ids);
        return take_sizes(rx, m, ids, ids + DRTHS_OFR_NSIZES, get_d(buf, 1));
    }
    case DRTHS_OFR_ST_ID: {
        int32_t ids[GENERIC_ID_COUNT];
        for (int i = 0; i < GENERIC_ID_COUNT; i++)
            ids[i] = get_i(buf, (size_t)i);
        return take_sizes(rx, m, ids, ids + DRTHS_OFR_NSIZES, (double)ids[10]);
    }
    case DRTHS_OFR_ST_ACTIONS: {
        double a = get_d(buf, 0);
        if (!(a == floor(a)) || a < 0.0 || a > 1000.0)
            return fail(rx, m, "action code %g is not a small integer", a);
        m->kind = DRTHS_OFR_MSG_ACTION;
        m->action = (int)a;
        if (m->action == DRTHS_OFR_SET_TRIAL) {
            size_t pos = 1;
            read_block(buf, &pos, rx->ctrl[DRTHS_OFR_DISP], m->disp);
            read_block(buf, &pos, rx->ctrl[DRTHS_OFR_VEL], m->vel);
            read_block(buf, &pos, rx->ctrl[DRTHS_OFR_ACCEL], m->accel);
            pos += (size_t)rx->ctrl[DRTHS_OFR_FORCE];
            if (rx->ctrl[DRTHS_OFR_TIME] > 0)
                m->time = get_d(buf, pos);
            if (!isfinite(m->disp[0]))
                return fail(rx, m, "trial displacement is not a finite number");
        } else if (m->action == DRTHS_OFR_DIE || m->action == DRTHS_OFR_SHUTDOWN) {
            m->tag = get_d(buf, 1);
        }
        return 0;
    }
    default:
        return fail(rx, m, "the session already failed");
    }
}

drths_ofr_variant_t drths_ofr_detect(const uint8_t *buf, size_t n, int quiet)
{
    if (n < ID_BYTES)
        return DRTHS_OFR_AUTO;
    if (get_i(buf, 0) != 1 || n > ID_BYTES)
        return DRTHS_OFR_GENERIC;
    return quiet ? DRTHS_OFR_SHADOW : DRTHS_OFR_AUTO;
}

size_t drths_ofr_reply_probe(uint8_t *out, size_t cap)
{
    int32_t one = 1;
    return drths_ofr_build_ids(&one, 1, out, cap);
}

size_t drths_ofr_build_vector(const double *v, size_t nv, int data_size, uint8_t *out, size_t cap)
{
    size_t len = 8 * (size_t)data_size;
    if (data_size <= 0 || nv > (size_t)data_size || len > cap)
        return 0;
    memset(out, 0, len);
    for (size_t i = 0; i < nv; i++)
        put_d(out, i, v[i]);
    return len;
}

size_t drths_ofr_build_ids(const int32_t *ids, size_t n, uint8_t *out, size_t cap)
{
    if (ID_BYTES * n > cap)
        return 0;
    memcpy(out, ids, ID_BYTES * n);
    return ID_BYTES * n;
}

size_t drths_ofr_reply_open(uint8_t *out, size_t cap)
{
    const double v[3] = {DRTHS_OFR_REPLY_COMPLETED, DRTHS_OFR_ACTOR_TAG, DRTHS_OFR_VERSION};
    return drths_ofr_build_vector(v, 3, DRTHS_OFR_DEFAULT_DATA, out, cap);
}

size_t drths_ofr_reply_open_refused(uint8_t *out, size_t cap)
{
    const double v[3] = {DRTHS_OFR_REPLY_COMPLETED, DRTHS_OFR_ACTOR_TAG, DRTHS_OFR_REFUSED_VERSION};
    return drths_ofr_build_vector(v, 3, DRTHS_OFR_DEFAULT_DATA, out, cap);
}

static const double *block_of(const drths_ofr_response_t *r, int block)
{
    switch (block) {
    case DRTHS_OFR_DISP:
        return r->disp;
    case DRTHS_OFR_VEL:
        return r->vel;
    case DRTHS_OFR_ACCEL:
        return r->accel;
    case DRTHS_OFR_FORCE:
        return r->force;
    default:
        return NULL;
    }
}

static void write_block(uint8_t *out, size_t *pos, const drths_ofr_response_t *r, int block,
                        int size)
{
    const double *b = block_of(r, block);
    for (int i = 0; i < size; i++) {
        double v = 0.0;
        if (block == DRTHS_OFR_TIME)
            v = r->time;
        else if (i < DRTHS_OFR_MAX_DOF)
            v = b[i];
        put_d(out, *pos + (size_t)i, v);
    }
    *pos += (size_t)size;
}

static size_t start_vector(const drths_ofr_rx_t *rx, uint8_t *out, size_t cap)
{
    if (rx->state != DRTHS_OFR_ST_ACTIONS)
        return 0;
    return drths_ofr_build_vector(NULL, 0, rx->data_size, out, cap);
}

size_t drths_ofr_reply_daq(const drths_ofr_rx_t *rx, const drths_ofr_response_t *r, uint8_t *out,
                           size_t cap)
{
    size_t len = start_vector(rx, out, cap);
    if (!len)
        return 0;
    size_t pos = 0;
    for (int b = 0; b < DRTHS_OFR_NSIZES; b++)
        write_block(out, &pos, r, b, rx->meas[b]);
    return len;
}

size_t drths_ofr_reply_block(const drths_ofr_rx_t *rx, const drths_ofr_response_t *r, int block,
                             uint8_t *out, size_t cap)
{
    if (block < 0 || block >= DRTHS_OFR_NSIZES)
        return 0;
    size_t len = start_vector(rx, out, cap);
    if (!len)
        return 0;
    int size = rx->meas[block] ? rx->meas[block] : rx->ctrl[block];
    size_t pos = 0;
    write_block(out, &pos, r, block, size);
    return len;
}

size_t drths_ofr_reply_diagonal(const drths_ofr_rx_t *rx, const double *diag, uint8_t *out,
                                size_t cap)
{
    size_t len = start_vector(rx, out, cap);
    if (!len)
        return 0;
    int n = rx->ctrl[DRTHS_OFR_DISP];
    if (n * n > rx->data_size)
        return 0;
    for (int i = 0; i < n; i++)
        put_d(out, (size_t)i * (size_t)n + (size_t)i, i < DRTHS_OFR_MAX_DOF ? diag[i] : 0.0);
    return len;
}

size_t drths_ofr_reply_matrix(const drths_ofr_rx_t *rx, double diag, uint8_t *out, size_t cap)
{
    double d[DRTHS_OFR_MAX_DOF];
    for (int i = 0; i < DRTHS_OFR_MAX_DOF; i++)
        d[i] = diag;
    return drths_ofr_reply_diagonal(rx, d, out, cap);
}

size_t drths_ofr_reply_die(const drths_ofr_rx_t *rx, uint8_t *out, size_t cap)
{
    if (rx->variant != DRTHS_OFR_SHADOW)
        return 0;
    const double v[2] = {DRTHS_OFR_REPLY_RECEIVED, DRTHS_OFR_ACTOR_TAG};
    return drths_ofr_build_vector(v, 2, rx->data_size, out, cap);
}

const char *drths_ofr_variant_name(drths_ofr_variant_t v)
{
    switch (v) {
    case DRTHS_OFR_SHADOW:
        return "shadow";
    case DRTHS_OFR_GENERIC:
        return "generic";
    default:
        return "auto";
    }
}

int drths_ofr_variant_parse(const char *text, drths_ofr_variant_t *v)
{
    if (strcmp(text, "auto") == 0)
        *v = DRTHS_OFR_AUTO;
    else if (strcmp(text, "shadow") == 0)
        *v = DRTHS_OFR_SHADOW;
    else if (strcmp(text, "generic") == 0)
        *v = DRTHS_OFR_GENERIC;
    else
        return -EINVAL;
    return 0;
}
