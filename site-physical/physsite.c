#include "site-physical/physsite.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/setup.h"
#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "protocol/wire_filter.h"

#define EVENT_CAPACITY 64
#define START_DELAY_NS INT64_C(5000000) /* tick 0 is due 5 ms after EPOCH 1 */
#define ABORT_GAP_NS INT64_C(5000000)   /* ABORTs outside the tick loop: 5 ms apart */
#define STOP_GAP_NS INT64_C(10000000)   /* final STOPs: 10 ms apart */
#define POLL_NS INT64_C(50000000)       /* waiting phases look at the stop flag this often */
#define MAX_BATCHES_PER_TICK 8          /* a flood cannot hold a tick longer than this */
#define WAKE_EVERY_ROWS 256

/* ---- events to main ------------------------------------------------------------------------ */

/* What the RT thread pushes into the event ring: a sentence already written (before the run,
 * and a source's lines), or one of the tick loop's transitions as numbers, which
 * drths_physsite_next_event (main) turns into its line. */
typedef enum {
    EV_TEXT = 0,
    EV_RUN_STARTED,   /* u[0] L, v[0] the tick's length, ms */
    EV_FIXED_L,       /* u[0] L, u[1] playout_ticks */
    EV_FIRST_COMMAND, /* tick, name (the compensation) */
    EV_EPOCH,         /* tick, u[0] epoch, u[1] L */
    EV_HOLD,          /* tick, cause (channel: the channel that held the site) */
    EV_HOLD_DRIVE,    /* channel, u[0] ramp, u[1] the first write refused, v[0] target, v[1]
                       * ramp rate */
    EV_SETTLED,       /* tick, channel, v[0] target, v[1] seconds after HOLD began; u[0] the
                       * safe-state writes the DAQ refused, u[1] those made, u[2] the tick of
                       * the last refused */
    EV_DAQ_ERROR,     /* tick, channel, daq: a DAQ failure (the first of a run of the same) */
    EV_DAQ_REPEATS,   /* channel, u[0] the first tick, u[1] repeats, u[2] the last tick */
} event_kind_t;

typedef struct rt_event {
    drths_physsite_event_t line; /* warning; text for EV_TEXT */
    event_kind_t kind;
    uint64_t tick;
    int channel;
    uint64_t u[3];
    double v[2];
    const char *name; /* static */
    drths_hold_cause_t cause;
    drths_daq_fault_t daq; /* EV_DAQ_ERROR */
} rt_event_t;

static void push_event(drths_physsite_t *ps, const rt_event_t *ev)
{
    (void)drths_ring_push(&ps->events, ev);
    if (ps->cfg.wake)
        ps->cfg.wake(ps->cfg.wake_ctx);
}

/* A transition of the tick loop, formatted by main. RT-safe. */
static void event_rec(drths_physsite_t *ps, int warning, event_kind_t kind, uint64_t tick,
                      int channel, uint64_t u0, uint64_t u1, double v0, double v1)
{
    rt_event_t ev;
    ev.line.warning = warning;
    ev.line.text[0] = '\0';
    ev.kind = kind;
    ev.tick = tick;
    ev.channel = channel;
    ev.u[0] = u0;
    ev.u[1] = u1;
    ev.u[2] = 0;
    ev.v[0] = v0;
    ev.v[1] = v1;
    ev.name = NULL;
    ev.cause.kind = DRTHS_HOLD_NONE;
    push_event(ps, &ev);
}

static void vevent(drths_physsite_t *ps, int warning, const char *fmt, va_list ap)
{
    rt_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.line.warning = warning;
    ev.kind = EV_TEXT;
    vsnprintf(ev.line.text, sizeof ev.line.text, fmt, ap);
    push_event(ps, &ev);
}

static void event(drths_physsite_t *ps, int warning, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void event(drths_physsite_t *ps, int warning, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vevent(ps, warning, fmt, ap);
    va_end(ap);
}

void drths_physsite_event(drths_physsite_t *ps, int warning, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vevent(ps, warning, fmt, ap);
    va_end(ap);
}

/* The site's HOLD sentence for a cause: the label of the channel that held the site first,
 * then the cause's sentence, cut to DRTHS_WIRE_MAX_TEXT bytes together. */
static const char *cause_text(const drths_physsite_t *ps, const drths_hold_cause_t *c, char *buf,
                              size_t cap)
{
    if (!cap)
        return buf;
    if (cap > DRTHS_WIRE_MAX_TEXT + 1)
        cap = DRTHS_WIRE_MAX_TEXT + 1;
    size_t n = 0;
    if (c->channel >= 0 && c->channel < ps->n_channels)
        n = drths_scopy(buf, cap, ps->label[c->channel]);
    drths_hold_cause_describe(c, buf + n, cap - n);
    return buf;
}

int drths_physsite_next_event(drths_physsite_t *ps, drths_physsite_event_t *out)
{
    rt_event_t ev;
    int rc = drths_ring_pop(&ps->events, &ev);
    if (rc)
        return rc;
    *out = ev.line;
    char *t = out->text;
    const size_t cap = sizeof out->text;
    const char *who = ev.channel >= 0 && ev.channel < ps->n_channels ? ps->label[ev.channel] : "";
    char hold[DRTHS_WIRE_MAX_TEXT + 1];
    switch (ev.kind) {
    case EV_TEXT:
        break;
    case EV_RUN_STARTED:
        snprintf(t, cap, "run started: loop delay L = %" PRIu64 " ticks (%.3f ms), epoch 1",
                 ev.u[0], ev.v[0]);
        break;
    case EV_FIXED_L:
        snprintf(t, cap,
                 "fixed loop delay L = %" PRIu64 " ticks is not below physical.playout_ticks = "
                 "%" PRIu64 ": if the round trip is much shorter than L, commands arrive too far "
                 "ahead and are dropped (raise physical.playout_ticks above L)",
                 ev.u[0], ev.u[1]);
        break;
    case EV_FIRST_COMMAND:
        snprintf(t, cap, "tick %" PRIu64 ": first commanded tick (compensation %s)", ev.tick,
                 ev.name);
        break;
    case EV_EPOCH:
        snprintf(t, cap, "tick %" PRIu64 ": epoch %" PRIu64 ", L = %" PRIu64 " ticks", ev.tick,
                 ev.u[0], ev.u[1]);
        break;
    case EV_HOLD:
        snprintf(t, cap, "HOLD at tick %" PRIu64 ": %s", ev.tick,
                 cause_text(ps, &ev.cause, hold, sizeof hold));
        break;
    case EV_HOLD_DRIVE:
        snprintf(t, cap,
                 "%sHOLD: drive %s %.6g m at most %.6g m/s, damper command to its safe value%s",
                 who, ev.u[0] ? "ramps to the safe position" : "goes to the measured position",
                 ev.v[0], ev.v[1],
                 ev.u[1] ? "; the DAQ refused the first write: the outputs stay where the DAQ "
                           "left them"
                         : "");
        break;
    case EV_DAQ_ERROR: {
        drths_error_t derr;
        drths_daq_fault_describe(drths_physsite_daq(ps, ev.channel), &ev.daq, &derr);
        int n = snprintf(t, cap, "tick %" PRIu64 ": %s", ev.tick, who);
        if (n > 0 && (size_t)n < cap)
            drths_scopy(t + n, cap - (size_t)n, derr.msg); /* cut at the line's end */
        break;
    }
    case EV_DAQ_REPEATS:
        snprintf(t, cap,
                 "%sthe DAQ error of tick %" PRIu64 " repeated %" PRIu64
                 " times more, the last at tick %" PRIu64 " (counted, not printed)",
                 who, ev.u[0], ev.u[1], ev.u[2]);
        break;
    case EV_SETTLED:
        /* The ramp has reached its target in the drive sent; whether it reached the actuator is
         * the DAQ's answer, said here (docs/lab-day.md tells the operator what to do). */
        if (!ev.u[0])
            snprintf(t, cap,
                     "tick %" PRIu64 ": %sHOLD: drive at %.6g m, written to the DAQ with the "
                     "damper's safe command (%.3f s after HOLD began)",
                     ev.tick, who, ev.v[0], ev.v[1]);
        else
            snprintf(t, cap,
                     "tick %" PRIu64 ": %sHOLD: the ramp reached %.6g m but the DAQ refused "
                     "%" PRIu64 " of %" PRIu64 " safe-state writes (the last at tick %" PRIu64
                     "): the actuator and the damper are NOT at their safe command; hold the "
                     "actuator with its servo controller (docs/lab-day.md)",
                     ev.tick, who, ev.v[0], ev.u[0], ev.u[1], ev.u[2]);
        break;
    }
    return 0;
}

void drths_physsite_request_stop(drths_physsite_t *ps)
{
    atomic_store(&ps->stop_request, 1);
}

void drths_physsite_request_stop_monitor(drths_physsite_t *ps)
{
    int none = 0;
    atomic_compare_exchange_strong(&ps->stop_request, &none, 2);
}

void drths_physsite_request_records_abort(drths_physsite_t *ps, const char *text)
{
    if (atomic_load(&ps->stop_request) != 0)
        return;
    /* The text is written before the request that publishes it (seq_cst store). */
    drths_scopy(ps->records_text, sizeof ps->records_text, text);
    int none = 0;
    atomic_compare_exchange_strong(&ps->stop_request, &none, 3);
}

/* ---- init / close -------------------------------------------------------------------------- */

/* Channel i's specimen, DAQ and actuator from the channel's view of the experiment. Errors are
 * prefixed with the channel's name when there are several. A failure leaves nothing open. */
static int init_channel(drths_physsite_t *ps, int i, drths_specimen_t *spec, drths_daq_t *daq,
                        drths_actuator_t *act, int *daq_failed, drths_error_t *err)
{
    const drths_experiment_t *exp = drths_experiment_actuator(ps->cfg.exp, i);
    drths_specimen_params_t sp;
    drths_setup_specimen(exp, &sp);
    int rc = drths_specimen_init(spec, &sp, 1.0 / exp->rate_hz, err);
    if (rc) {
        drths_error_prefix(err, rc, "virtual specimen");
        goto named;
    }
    rc = drths_daq_open(exp, spec, ps->cfg.comedi_api, daq, err);
    if (rc) {
        if (daq_failed)
            *daq_failed = 1;
        drths_error_prefix(err, rc, "daq (backend %s)", drths_daq_backend_name(exp->daq.backend));
        drths_specimen_close(spec);
        goto named;
    }
    drths_actuator_params_t ap;
    drths_actuator_params_from_experiment(exp, &ap);
    /* The stability monitor's free-vibration check applies from the end of the experiment
     * file's ground-motion record on, in command time. With a source (an OpenFresco session)
     * that record drives nothing: the client integrates its own ground motion, of its own
     * length, and may pause before its first target, so an analysis longer than the file's
     * record would be held for a response that is not over. The check is off there; the growth
     * check (an instability) stays on. */
    if (ps->cfg.source)
        ap.stab_quiet_after_s = INFINITY;
    rc = drths_actuator_init(act, &ap, daq, err);
    if (rc) {
        drths_daq_close(daq);
        drths_specimen_close(spec);
    }
named:
    if (rc && ps->n_channels > 1) /* the label without its ": " */
        drths_error_prefix(err, rc, "actuator %.*s", (int)strlen(ps->label[i]) - 2, ps->label[i]);
    return rc;
}

static void close_extra(drths_physsite_t *ps, int upto)
{
    for (int i = 0; ps->extra && i < upto; i++) {
        drths_actuator_close(&ps->extra[i].act);
        drths_daq_close(&ps->extra[i].daq);
        drths_specimen_close(&ps->extra[i].spec);
    }
    free(ps->extra);
    ps->extra = NULL;
    if (ps->column_names)
        for (int k = 0; k < ps->n_channels * DRTHS_ACT_NCOLS; k++)
            free(ps->column_names[k]);
    free(ps->column_names);
    ps->column_names = NULL;
    free(ps->row);
    ps->row = NULL;
}

/* The channels after the first, the row and the column names. */
static int init_extra(drths_physsite_t *ps, int *daq_failed, drths_error_t *err)
{
    int n = ps->n_channels;
    ps->extra = calloc((size_t)n - 1, sizeof *ps->extra);
    ps->row = calloc((size_t)n * DRTHS_ACT_NCOLS, sizeof *ps->row);
    ps->column_names = calloc((size_t)n * DRTHS_ACT_NCOLS, sizeof *ps->column_names);
    if (!ps->extra || !ps->row || !ps->column_names) {
        close_extra(ps, 0);
        return drths_error_set(err, -ENOMEM, "out of memory for %d actuator channels", n);
    }
    for (int k = 0; k < n * DRTHS_ACT_NCOLS; k++) {
        const char *base = drths_actuator_columns[k % DRTHS_ACT_NCOLS];
        size_t len = strlen(base) + 8;
        ps->column_names[k] = malloc(len);
        if (!ps->column_names[k]) {
            close_extra(ps, 0);
            return drths_error_set(err, -ENOMEM, "out of memory for the column names");
        }
        if (k < DRTHS_ACT_NCOLS)
            snprintf(ps->column_names[k], len, "%s", base);
        else
            snprintf(ps->column_names[k], len, "ch%d_%s", k / DRTHS_ACT_NCOLS + 1, base);
    }
    for (int i = 1; i < n; i++) {
        drths_physsite_extra_t *x = &ps->extra[i - 1];
        int rc = init_channel(ps, i, &x->spec, &x->daq, &x->act, daq_failed, err);
        if (rc) {
            close_extra(ps, i - 1);
            return rc;
        }
    }
    return 0;
}

int drths_physsite_init(drths_physsite_t *ps, const drths_physsite_config_t *cfg, drths_udp_t *udp,
                        drths_recorder_t *rec, int *daq_failed, drths_error_t *err)
{
    if (daq_failed)
        *daq_failed = 0;
    memset(ps, 0, sizeof *ps);
    ps->cfg = *cfg;
    ps->udp = udp;
    ps->rec = rec;
    ps->rt_report.dma_fd = -1;
    ps->hold_channel = -1;
    const drths_experiment_t *exp = cfg->exp;
    ps->n_channels = drths_experiment_n_actuators(exp);
    for (int i = 0; ps->n_channels > 1 && i < ps->n_channels; i++)
        snprintf(ps->label[i], sizeof ps->label[i], "channel %d (%s): ", i + 1,
                 drths_experiment_actuator_name(exp, i));
    int rc;

    rc = init_channel(ps, 0, &ps->spec, &ps->daq, &ps->act, daq_failed, err);
    if (rc)
        return rc;
    if (ps->n_channels > 1 && (rc = init_extra(ps, daq_failed, err)) != 0)
        goto fail_act;
    rc = drths_hello_init(&ps->hello, exp, DRTHS_ROLE_PHYSICAL, 0, err);
    if (rc)
        goto fail_extra;
    rc = drths_wire_rx_init(&ps->rx, DRTHS_ROLE_PHYSICAL, cfg->psk, err);
    if (rc)
        goto fail_extra;
    rc = drths_wire_rx_init(&ps->pending_rx, DRTHS_ROLE_PHYSICAL, cfg->psk, err);
    if (rc)
        goto fail_rx;
    ps->batch = calloc(DRTHS_UDP_BATCH, sizeof *ps->batch);
    if (!ps->batch) {
        rc = drths_error_set(err, -ENOMEM, "out of memory for the receive batch");
        goto fail_rx;
    }
    rc = drths_ring_init(&ps->events, sizeof(rt_event_t), EVENT_CAPACITY);
    if (rc) {
        rc = drths_error_set(err, rc, "out of memory for the event ring");
        goto fail_batch;
    }
    atomic_init(&ps->stop_request, 0);
    atomic_init(&ps->rt_ready, 0);
    atomic_init(&ps->done, 0);
    atomic_init(&ps->state, DRTHS_PHYSSITE_WAITING);
    ps->exit_code = 1;
    drths_scopy(ps->exit_reason, sizeof ps->exit_reason, "not run");
    return 0;

fail_batch:
    free(ps->batch);
    ps->batch = NULL;
fail_rx:
    drths_wire_rx_close(&ps->pending_rx);
    drths_wire_rx_close(&ps->rx);
fail_extra:
    close_extra(ps, ps->n_channels - 1);
fail_act:
    drths_actuator_close(&ps->act);
    drths_daq_close(&ps->daq);
    drths_specimen_close(&ps->spec);
    return rc;
}

const char *const *drths_physsite_columns(const drths_physsite_t *ps, int *n)
{
    if (ps->n_channels <= 1 || !ps->column_names) {
        *n = DRTHS_ACT_NCOLS;
        return drths_actuator_columns;
    }
    *n = ps->n_channels * DRTHS_ACT_NCOLS;
    return (const char *const *)ps->column_names;
}

void drths_physsite_hold(drths_physsite_t *ps, uint8_t reason, int abort_peer,
                         const drths_hold_cause_t *cause)
{
    for (int i = 0; i < ps->n_channels; i++)
        drths_actuator_hold(drths_physsite_act(ps, i), reason, i == 0 ? abort_peer : 0, cause);
    ps->held_together = 1;
}

void drths_physsite_hold_text_cause(drths_physsite_t *ps, uint8_t reason, int abort_peer,
                                    const char *text)
{
    drths_hold_cause_t c;
    drths_hold_cause_text(&c, text);
    drths_physsite_hold(ps, reason, abort_peer, &c);
}

int drths_physsite_in_hold(const drths_physsite_t *ps)
{
    if (ps->act.hold)
        return 1;
    for (int i = 1; i < ps->n_channels; i++)
        if (ps->extra[i - 1].act.hold)
            return 1;
    return 0;
}

/* The cause of the site's HOLD: the first channel's, or the one of the channel that held the
 * others (its channel set). */
static const drths_hold_cause_t *site_cause(const drths_physsite_t *ps)
{
    return ps->hold_channel >= 0 ? &ps->hold_cause : &ps->act.hold_cause;
}

const char *drths_physsite_hold_text(const drths_physsite_t *ps, char *buf, size_t cap)
{
    if (!drths_physsite_in_hold(ps)) {
        if (cap)
            buf[0] = '\0';
        return buf;
    }
    return cause_text(ps, site_cause(ps), buf, cap);
}

const char *drths_physsite_channel_hold_text(const drths_physsite_t *ps, int i, char *buf,
                                             size_t cap)
{
    const drths_actuator_t *a = drths_physsite_act((drths_physsite_t *)ps, i);
    if (!a->hold) {
        if (cap)
            buf[0] = '\0';
        return buf;
    }
    return cause_text(ps, &a->hold_cause, buf, cap);
}

const char *drths_physsite_exit_reason(drths_physsite_t *ps)
{
    if (ps->exit_hold) {
        ps->exit_hold = 0;
        drths_physsite_hold_text(ps, ps->exit_reason, sizeof ps->exit_reason);
    }
    return ps->exit_reason;
}

const drths_actuator_t *drths_physsite_hold_act(const drths_physsite_t *ps)
{
    if (ps->act.hold || ps->hold_channel <= 0)
        return &ps->act;
    return &ps->extra[ps->hold_channel - 1].act;
}

/* A channel that entered HOLD by itself (a limit, its DAQ, the stability monitor) holds every
 * other channel: one HOLD for the site, its sentence naming the channel. Called after each
 * channel's tick, so the channels after it in the tick enter HOLD before their own tick of it
 * and never drive it as commanded; the channels before it (and itself) have written the tick's
 * drive already and ramp from the next one. RT-safe. */
static void hold_together(drths_physsite_t *ps)
{
    if (ps->n_channels < 2 || ps->held_together)
        return;
    for (int i = 0; i < ps->n_channels; i++) {
        const drths_actuator_t *a = drths_physsite_act(ps, i);
        if (!a->hold)
            continue;
        ps->hold_channel = i;
        /* The sentence will begin with the channel's label (cause_text), so a long reason
         * loses its tail, never the channel. */
        ps->hold_cause = a->hold_cause;
        ps->hold_cause.channel = i;
        for (int j = 0; j < ps->n_channels; j++)
            if (j != i)
                drths_actuator_hold(drths_physsite_act(ps, j), a->hold_reason,
                                    j == 0 ? a->hold_abort_peer : 0, &ps->hold_cause);
        ps->held_together = 1;
        return;
    }
}

void drths_physsite_close(drths_physsite_t *ps)
{
    drths_ring_close(&ps->events);
    free(ps->batch);
    ps->batch = NULL;
    drths_wire_rx_close(&ps->rx);
    drths_wire_rx_close(&ps->pending_rx);
    drths_wire_tx_close(&ps->tx);
    for (int i = 0; i < DRTHS_PHYSSITE_PENDING; i++)
        drths_crypto_wipe(&ps->pending[i], sizeof ps->pending[i]);
    close_extra(ps, ps->n_channels - 1);
    drths_actuator_close(&ps->act);
    drths_daq_close(&ps->daq);
    drths_specimen_close(&ps->spec);
    drths_rt_report_close(&ps->rt_report);
    drths_crypto_wipe(ps->cfg.psk, sizeof ps->cfg.psk);
}

/* ---- sending ------------------------------------------------------------------------------- */

static int send_msg(drths_physsite_t *ps, const drths_msg_t *m)
{
    size_t len = 0;
    int rc = drths_wire_seal(&ps->tx, m, ps->buf, sizeof ps->buf, &len);
    if (rc == 0)
        rc = drths_udp_send(ps->udp, &ps->peer, ps->buf, len);
    if (rc)
        ps->send_errors++;
    return rc;
}

static void send_hello_ack(drths_physsite_t *ps)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_HELLO_ACK;
    m.u.hello = ps->hello;
    send_msg(ps, &m);
}

static void send_stop_like(drths_physsite_t *ps, drths_msg_type_t type, uint8_t reason,
                           uint64_t tick, const char *text)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.epoch = ps->act.epoch;
    m.tick = tick;
    m.u.stop.reason = reason;
    snprintf(m.u.stop.text, sizeof m.u.stop.text, "%s", text);
    send_msg(ps, &m);
}

/* ---- handshake ----------------------------------------------------------------------------- */

static void remember_session(drths_physsite_t *ps, uint64_t sid)
{
    ps->seen_sids[ps->n_seen++ % DRTHS_PHYSSITE_SEEN] = sid;
}

static int session_seen(const drths_physsite_t *ps, uint64_t sid)
{
    unsigned n = ps->n_seen < DRTHS_PHYSSITE_SEEN ? ps->n_seen : DRTHS_PHYSSITE_SEEN;
    for (unsigned i = 0; i < n; i++)
        if (ps->seen_sids[i] == sid)
            return 1;
    return 0;
}

/* An authentic HELLO that does not match: ABORT (three copies: the session id is now seen, so
 * the numerical site's repeats get no second answer) under a HELLO_ACK key of a fresh
 * ephemeral, and go on waiting. */
static void refuse_hello(drths_physsite_t *ps, const drths_udp_msg_t *d, const drths_msg_t *hm,
                         uint8_t reason, const char *text)
{
    drths_wire_tx_t tx;
    uint8_t sk[DRTHS_EPH_BYTES], pk[DRTHS_EPH_BYTES], dh[DRTHS_KEY_BYTES], k[DRTHS_KEY_BYTES];
    drths_crypto_eph_keypair(pk, sk);
    if (drths_wire_tx_init(&tx, DRTHS_ROLE_PHYSICAL, hm->session_id) == 0 &&
        drths_crypto_dh(dh, sk, hm->eph) == 0) {
        drths_crypto_derive_ack(ps->cfg.psk, hm->session_id, hm->eph, pk, dh, k);
        drths_wire_tx_set_handshake(&tx, k, pk);
        drths_msg_t m;
        memset(&m, 0, sizeof m);
        m.type = DRTHS_MSG_ABORT;
        m.u.stop.reason = reason;
        snprintf(m.u.stop.text, sizeof m.u.stop.text, "%s", text);
        for (int i = 0; i < 3; i++) {
            size_t len = 0;
            if (drths_wire_seal(&tx, &m, ps->buf, sizeof ps->buf, &len) == 0)
                drths_udp_send(ps->udp, &d->from, ps->buf, len);
        }
    }
    drths_wire_tx_close(&tx);
    drths_crypto_wipe(sk, sizeof sk);
    drths_crypto_wipe(dh, sizeof dh);
    drths_crypto_wipe(k, sizeof k);
    char from[80];
    drths_addr_format(&d->from, from, sizeof from);
    event(ps, 1, "HELLO from %s refused (%s): %s; still waiting for a numerical site", from,
          drths_stop_reason_name(reason), text);
}

/* Forgets a half-open session (its keys wiped). RT-safe. */
static void pending_drop(drths_physsite_pending_t *p)
{
    drths_wire_tx_close(&p->tx);
    drths_crypto_wipe(p, sizeof *p);
}

static drths_physsite_pending_t *pending_find(drths_physsite_t *ps, uint64_t sid)
{
    for (int i = 0; i < DRTHS_PHYSSITE_PENDING; i++)
        if (ps->pending[i].used && ps->pending[i].session_id == sid)
            return &ps->pending[i];
    return NULL;
}

static int pending_from(const drths_physsite_t *ps, const drths_addr_t *from)
{
    int n = 0;
    for (int i = 0; i < DRTHS_PHYSSITE_PENDING; i++)
        n += ps->pending[i].used && drths_addr_equal(&ps->pending[i].from, from);
    return n;
}

/* A free place for a half-open session from `from`; else the place of the oldest one from the
 * same address; else of the oldest one from the address that holds the most (dropped). A flood
 * of replayed HELLOs from one address then pushes out only its own, and the real numerical
 * site's one half-open session goes only when 8 other addresses hold one each and a ninth
 * comes; besides, a flood brings each recorded session id once per DRTHS_PHYSSITE_SEEN, and the
 * real site needs its place for one round trip only. */
static drths_physsite_pending_t *pending_place(drths_physsite_t *ps, const drths_addr_t *from)
{
    drths_physsite_pending_t *victim = NULL;
    int victim_n = 0;
    for (int i = 0; i < DRTHS_PHYSSITE_PENDING; i++) {
        drths_physsite_pending_t *p = &ps->pending[i];
        if (!p->used)
            return p;
        int n = drths_addr_equal(&p->from, from) ? DRTHS_PHYSSITE_PENDING + 1
                                                 : pending_from(ps, &p->from);
        if (!victim || n > victim_n || (n == victim_n && p->opened_ns < victim->opened_ns)) {
            victim = p;
            victim_n = n;
        }
    }
    ps->pending_evicted++;
    pending_drop(victim);
    return victim;
}

/* The half-open session's HELLO_ACK (again, with the next counter, for a repeated HELLO). */
static void send_pending_ack(drths_physsite_t *ps, drths_physsite_pending_t *p)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_HELLO_ACK;
    m.u.hello = p->ack;
    size_t len = 0;
    int rc = drths_wire_seal(&p->tx, &m, ps->buf, sizeof ps->buf, &len);
    if (rc == 0)
        rc = drths_udp_send(ps->udp, &p->from, ps->buf, len);
    if (rc)
        ps->send_errors++;
}

/* Opens the authentic HELLO hm (its payload is in rx.plain) as a half-open session: a fresh
 * ephemeral, the HELLO_ACK key from DH, the answer, then the session keys from DH and the
 * transcript. The HELLO_ACK's fresh ephemeral goes into the session keys, so the keys of a
 * replayed HELLO's session are new and only the holder of the HELLO's ephemeral secret can
 * derive them. The ephemeral secret and the DH result are wiped before returning. Returns 0, or
 * -1 if the HELLO's ephemeral is unusable (a low-order point). */
static int open_pending(drths_physsite_t *ps, const drths_udp_msg_t *d, const drths_msg_t *hm)
{
    uint64_t sid = hm->session_id;
    uint8_t hello_plain[DRTHS_WIRE_MAX_HELLO_PAYLOAD];
    size_t hello_len = ps->rx.plain_len < sizeof hello_plain ? ps->rx.plain_len : 0;
    memcpy(hello_plain, ps->rx.plain, hello_len);
    uint8_t sk[DRTHS_EPH_BYTES], pk[DRTHS_EPH_BYTES], dh[DRTHS_KEY_BYTES], k[DRTHS_KEY_BYTES];
    drths_crypto_eph_keypair(pk, sk);
    int rc = drths_crypto_dh(dh, sk, hm->eph);
    drths_crypto_wipe(sk, sizeof sk);
    if (rc != 0)
        return -1;
    drths_physsite_pending_t *p = pending_place(ps, &d->from);
    if (drths_wire_tx_init(&p->tx, DRTHS_ROLE_PHYSICAL, sid) != 0) {
        drths_crypto_wipe(dh, sizeof dh);
        return -1;
    }
    p->used = 1;
    p->session_id = sid;
    p->from = d->from;
    p->opened_ns = d->rx_ns;
    memcpy(p->e_num, hm->eph, sizeof p->e_num);
    drths_replay_reset(&p->replay);
    drths_replay_update(&p->replay, hm->counter);
    p->peer = hm->u.hello;
    p->ack = ps->hello;
    p->ack.link = hm->u.hello.link;
    p->ack.version = (uint8_t)drths_wire_pick_version(hm->u.hello.proto_min, hm->u.hello.proto_max,
                                                      ps->hello.proto_min, ps->hello.proto_max);
    drths_crypto_derive_ack(ps->cfg.psk, sid, p->e_num, pk, dh, k);
    drths_wire_tx_set_handshake(&p->tx, k, pk);
    send_pending_ack(ps, p);
    uint8_t th[DRTHS_KEY_BYTES];
    drths_crypto_transcript(th, sid, p->e_num, hello_plain, hello_len, pk, p->tx.hs_plain,
                            p->tx.hs_plain_len);
    drths_crypto_derive(ps->cfg.psk, dh, th, &p->keys);
    drths_wire_tx_set_keys(&p->tx, &p->keys);
    ps->pending_opened++;
    drths_crypto_wipe(dh, sizeof dh);
    drths_crypto_wipe(k, sizeof k);
    drths_crypto_wipe(th, sizeof th);
    return 0;
}

/* A valid HELLO of a new session, before the run: refuse it if it does not match (and keep
 * waiting), else answer it as a half-open session. */
static void accept_session(drths_physsite_t *ps, const drths_udp_msg_t *d, const drths_msg_t *hm)
{
    remember_session(ps, hm->session_id);
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    int reason = drths_hello_mismatch(&ps->hello, &hm->u.hello, text, sizeof text);
    if (reason) {
        refuse_hello(ps, d, hm, (uint8_t)reason, text);
        return;
    }
    (void)open_pending(ps, d, hm);
}

/* Opens a datagram of the half-open session p with its keys and window (in pending_rx), and
 * keeps the window's update. Drops are counted by reason with the HELLO drops. */
static drths_reject_t open_in_pending(drths_physsite_t *ps, drths_physsite_pending_t *p,
                                      const drths_udp_msg_t *d)
{
    drths_wire_rx_t *rx = &ps->pending_rx;
    drths_wire_rx_start(rx, p->session_id);
    drths_wire_rx_set_peer_eph(rx, p->e_num);
    drths_wire_rx_set_keys(rx, &p->keys);
    rx->replay = p->replay;
    drths_reject_t r = drths_wire_open(rx, d->data, d->len, &ps->msg);
    if (r == DRTHS_REJECT_OK)
        p->replay = rx->replay;
    else
        ps->pre_rejects[r]++;
    drths_wire_rx_start(rx, 0); /* the key wiped */
    return r;
}

/* The half-open session p has proved itself (a datagram under its keys, replay checked, is in
 * ps->msg): it becomes the session, replacing one that has gone quiet, and every other
 * half-open session is dropped (their ids stay seen). */
static void prove_session(drths_physsite_t *ps, drths_physsite_pending_t *p, int64_t rx_ns)
{
    drths_wire_tx_close(&ps->tx);
    ps->tx = p->tx;
    drths_wire_rx_start(&ps->rx, p->session_id);
    drths_wire_rx_set_peer_eph(&ps->rx, p->e_num);
    drths_wire_rx_set_keys(&ps->rx, &p->keys);
    ps->rx.replay = p->replay;
    ps->rx.accepted++;
    int replaced = ps->have_session;
    uint64_t old_sid = ps->session_id;
    ps->session_id = p->session_id;
    ps->have_session = 1;
    ps->session_seen_ns = rx_ns;
    ps->peer = p->from;
    ps->peer_rate_hz = p->peer.rate_hz;
    ps->hello = p->ack;
    /* Commands of an earlier session (a numerical site that restarted) must not be played. */
    drths_playout_reset(&ps->act.pb, 0);
    char from[80], others[96] = "", before[64] = "";
    drths_addr_format(&p->from, from, sizeof from);
    unsigned n = 0;
    for (int i = 0; i < DRTHS_PHYSSITE_PENDING; i++)
        if (ps->pending[i].used && &ps->pending[i] != p)
            n++;
    if (n || ps->pending_evicted)
        snprintf(others, sizeof others,
                 "; %u other HELLO(s) answered, nothing sent under their keys (replays?)",
                 n + (unsigned)ps->pending_evicted);
    if (replaced)
        snprintf(before, sizeof before, "; replaces session %016" PRIx64 ", quiet", old_sid);
    event(ps, 0, "numerical site connected from %s (session %016" PRIx64 ", link %u, %s, %s%s%s)",
          from, p->session_id, p->peer.link, p->peer.site,
          p->peer.software[0] ? p->peer.software : "unknown", others, before);
    drths_crypto_wipe(&p->tx, sizeof p->tx); /* its copy lives on in ps->tx */
    for (int i = 0; i < DRTHS_PHYSSITE_PENDING; i++)
        if (ps->pending[i].used)
            pending_drop(&ps->pending[i]);
    atomic_store(&ps->state, DRTHS_PHYSSITE_CONNECTED);
}

/* ---- receiving ----------------------------------------------------------------------------- */

typedef enum { RX_NOTHING = 0, RX_VALID } rx_result_t;

static void echo_probe(drths_physsite_t *ps, const drths_msg_t *p, int64_t rx_ns)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_PROBE_ECHO;
    m.epoch = p->epoch;
    m.tick = p->tick;
    m.u.probe.seq = p->u.probe.seq;
    m.u.probe.send_time_ns = p->u.probe.send_time_ns;
    int64_t held = drths_now_ns() - rx_ns;
    m.u.probe.hold_ns = held > 0 ? (uint64_t)held : 0;
    if (send_msg(ps, &m) == 0)
        ps->probes_answered++;
}

/* A proved session keeps the site this long after its last datagram under its keys. */
#define PIN_NS INT64_C(1000000000)
#define BADTAG_REPORT 3 /* failing HELLOs from one address before we say so */

/* A HELLO-shaped datagram that failed authentication: after a few from one address, say that
 * the key probably differs (once). */
static void hello_failed(drths_physsite_t *ps, const drths_udp_msg_t *d)
{
    if (ps->badtag_count == 0 || !drths_addr_equal(&d->from, &ps->badtag_from)) {
        ps->badtag_from = d->from;
        ps->badtag_count = 0;
    }
    if (++ps->badtag_count == BADTAG_REPORT && !ps->badtag_reported) {
        ps->badtag_reported = 1;
        char from[80];
        drths_addr_format(&d->from, from, sizeof from);
        event(ps, 1,
              "HELLO from %s fails authentication: a different key? compare "
              "`drths-keygen --id` at both sites",
              from);
    }
}

/* The checks a HELLO of a session neither proved nor half-open gets before any decryption
 * (PROTOCOL.md section 7.4), in this order: during a run none is looked at; a session id seen
 * before is a replay; while the proved session has sent a datagram under its keys within PIN_NS
 * another is not considered. Returns the reason, or OK to authenticate it. */
static drths_reject_t hello_precheck(const drths_physsite_t *ps, const drths_udp_msg_t *d,
                                     const drths_wire_header_t *h, int running)
{
    if (running)
        return DRTHS_REJECT_HELLO_RUNNING;
    if (session_seen(ps, h->session_id))
        return DRTHS_REJECT_HELLO_SEEN;
    if (ps->have_session && d->rx_ns - ps->session_seen_ns < PIN_NS)
        return DRTHS_REJECT_HELLO_PINNED;
    return DRTHS_REJECT_OK;
}

/* A HELLO before the run of the session or of a half-open one, from its address: its HELLO_ACK
 * again (the first was lost), with the next counter. Anyone can replay a HELLO, so it proves
 * nothing: it keeps no session pinned and no quiet session alive. */
static void repeated_hello(drths_physsite_t *ps, const drths_udp_msg_t *d,
                           drths_physsite_pending_t *p)
{
    const drths_addr_t *from = p ? &p->from : &ps->peer;
    if (!drths_addr_equal(&d->from, from)) {
        ps->wrong_source++;
        return;
    }
    if (p) {
        if (open_in_pending(ps, p, d) == DRTHS_REJECT_OK)
            send_pending_ack(ps, p);
        return;
    }
    if (drths_wire_open(&ps->rx, d->data, d->len, &ps->msg) == DRTHS_REJECT_OK)
        send_hello_ack(ps);
}

static rx_result_t handle_hello(drths_physsite_t *ps, const drths_udp_msg_t *d,
                                const drths_wire_header_t *h, int running)
{
    drths_msg_t *m = &ps->msg;
    if (!running) {
        drths_physsite_pending_t *p = pending_find(ps, h->session_id);
        if (p || (ps->have_session && h->session_id == ps->session_id)) {
            repeated_hello(ps, d, p);
            return RX_NOTHING;
        }
    }
    drths_reject_t r = hello_precheck(ps, d, h, running);
    if (r == DRTHS_REJECT_OK)
        r = drths_wire_open_hello(&ps->rx, d->data, d->len, m);
    if (r != DRTHS_REJECT_OK) {
        ps->pre_rejects[r]++;
        if (r == DRTHS_REJECT_BAD_TAG)
            hello_failed(ps, d);
        return RX_NOTHING;
    }
    accept_session(ps, d, m);
    return RX_NOTHING;
}

/* A datagram of protocol v1: name it once (no decryption, nothing else to do). */
static void v1_peer(drths_physsite_t *ps, const drths_udp_msg_t *d)
{
    ps->pre_rejects[DRTHS_REJECT_V1_PEER]++;
    if (ps->v1_reported)
        return;
    ps->v1_reported = 1;
    char from[80];
    drths_addr_format(&d->from, from, sizeof from);
    event(ps, 1, "datagram from %s: peer speaks protocol v1: upgrade it (this site speaks v%d)",
          from, DRTHS_WIRE_VERSION);
}

/* One datagram. Before the run a HELLO of a new session may be adopted; afterwards only the
 * numerical site's address and session are acted on. */
static rx_result_t handle_datagram(drths_physsite_t *ps, const drths_udp_msg_t *d, int running)
{
    drths_wire_header_t h;
    drths_msg_t *m = &ps->msg;
    drths_reject_t pr = drths_wire_peek_header(d->data, d->len, &h);
    if (pr == DRTHS_REJECT_V1_PEER) {
        v1_peer(ps, d);
        return RX_NOTHING;
    }
    if (pr == DRTHS_REJECT_OK && h.type == DRTHS_MSG_HELLO)
        return handle_hello(ps, d, &h, running);
    drths_physsite_pending_t *p =
        pr == DRTHS_REJECT_OK && !running ? pending_find(ps, h.session_id) : NULL;
    if (p) {
        /* A half-open session's first datagram under its keys proves that its sender holds the
         * HELLO's ephemeral secret: it becomes the session. */
        if (!drths_addr_equal(&d->from, &p->from)) {
            ps->wrong_source++;
            return RX_NOTHING;
        }
        if (open_in_pending(ps, p, d) != DRTHS_REJECT_OK)
            return RX_NOTHING;
        prove_session(ps, p, d->rx_ns);
    } else {
        if (ps->have_session && !drths_addr_equal(&d->from, &ps->peer)) {
            ps->wrong_source++;
            return RX_NOTHING;
        }
        /* Without a session this counts the datagram as BAD_SESSION (or worse) and drops it. */
        if (drths_wire_open(&ps->rx, d->data, d->len, m) != DRTHS_REJECT_OK)
            return RX_NOTHING;
        ps->session_seen_ns = d->rx_ns;
    }
    switch (m->type) {
    case DRTHS_MSG_PROBE:
        echo_probe(ps, m, d->rx_ns);
        break;
    case DRTHS_MSG_EPOCH:
        if (ps->cfg.probe_only) {
            if (!ps->probe_refused)
                send_stop_like(ps, DRTHS_MSG_ABORT, DRTHS_STOP_CONFIG_MISMATCH, 0,
                               "the actuator site runs --probe-only: it answers connectivity "
                               "tests, never a run");
            ps->probe_refused = 1;
            break;
        }
        drths_actuator_receive(&ps->act, m, d->rx_ns);
        break;
    case DRTHS_MSG_STOP:
        if (!drths_actuator_started(&ps->act))
            snprintf(ps->stop_text, sizeof ps->stop_text, "%s", m->u.stop.text);
        drths_actuator_receive(&ps->act, m, d->rx_ns);
        break;
    case DRTHS_MSG_COMMAND:
    case DRTHS_MSG_ABORT:
        drths_actuator_receive(&ps->act, m, d->rx_ns);
        break;
    default:
        break;
    }
    return RX_VALID;
}

/* Receives everything waiting (at most max_batches batches). Returns the last datagram's
 * arrival time of a valid message (0 if none). */
static int64_t drain(drths_physsite_t *ps, int running, int max_batches)
{
    int64_t last_valid = 0;
    for (int b = 0; b < max_batches; b++) {
        int n = drths_udp_recv(ps->udp, ps->batch, DRTHS_UDP_BATCH);
        if (n <= 0)
            break;
        for (int i = 0; i < n; i++) {
            rx_result_t r = handle_datagram(ps, &ps->batch[i], running);
            if (r == RX_VALID)
                last_valid = ps->batch[i].rx_ns;
        }
        if (n < DRTHS_UDP_BATCH)
            break;
    }
    return last_valid;
}

/* ---- the thread ---------------------------------------------------------------------------- */

/* Ends the site with code and reason; reason NULL: the HOLD's sentence, which main writes
 * from the cause (drths_physsite_exit_reason). */
static int finish(drths_physsite_t *ps, int code, const char *reason)
{
    /* Every end leaves the outputs neutral: the drive where it was, the damper at its safe
     * value. After a normal end or a HOLD the tick has done it already; once more is harmless. */
    for (int i = 0; i < ps->n_channels; i++)
        if (drths_actuator_safe_state(drths_physsite_act(ps, i)) != 0)
            event(ps, 1, "%sthe DAQ's safe state could not be written at the end", ps->label[i]);
    /* A command source (OpenFresco) has no UDP socket. */
    if (ps->udp && !ps->cfg.source)
        ps->kernel_drops = drths_udp_kernel_drops(ps->udp);
    ps->exit_code = code;
    ps->exit_hold = reason == NULL;
    if (!reason)
        ps->exit_reason[0] = '\0';
    else if (reason != ps->exit_reason)
        drths_scopy(ps->exit_reason, sizeof ps->exit_reason, reason);
    atomic_store(&ps->state, DRTHS_PHYSSITE_DONE);
    atomic_store(&ps->done, 1);
    if (ps->cfg.wake)
        ps->cfg.wake(ps->cfg.wake_ctx);
    return code;
}

/* Waits for the handshake and EPOCH 1. Returns 0 when the run can start, else nonzero (the
 * site is done: finish() has set its exit code and reason, 0 for a finished --probe-only
 * session). */
static int before_run(drths_physsite_t *ps)
{
    int64_t start = drths_now_ns();
    int64_t wait_deadline = start + (int64_t)(ps->cfg.wait_timeout_s * 1e9);
    int64_t silence_ns = (int64_t)(ps->cfg.silence_timeout_s * 1e9);
    int64_t last_valid = 0;
    uint64_t probes_before = 0; /* probes answered before the current session */
    char text[DRTHS_PHYSSITE_EVENT_TEXT];
    while (!drths_actuator_started(&ps->act)) {
        int req = atomic_load(&ps->stop_request);
        if (req)
            return finish(ps, 1,
                          req == 3   ? "the records could not be written before the run "
                                       "started"
                          : req == 2 ? "stopped from the monitor before the run started"
                                     : "stopped by signal before the run started");
        int64_t now = drths_now_ns();
        if (!ps->have_session && now >= wait_deadline) {
            snprintf(text, sizeof text, "no numerical site connected within %g s",
                     ps->cfg.wait_timeout_s);
            return finish(ps, 1, text);
        }
        if (ps->have_session && now - last_valid > silence_ns && ps->cfg.probe_only &&
            ps->probes_answered > probes_before) {
            /* A --probe-only session that answered probes and then fell silent: the test ran,
             * and its end (STOP, or ABORT for a failed test, each sent in 20 spaced copies) was
             * lost. Only the session's keys open a PROBE, so these came from the numerical site
             * (PROTOCOL.md section 7.5). */
            snprintf(text, sizeof text,
                     "probe-only session finished: the numerical site fell silent for %g s after "
                     "%" PRIu64 " probes were answered (its end-of-test message did not arrive); "
                     "its report has the verdict",
                     ps->cfg.silence_timeout_s, ps->probes_answered - probes_before);
            finish(ps, 0, text);
            return -1;
        }
        if (ps->have_session && now - last_valid > silence_ns) {
            /* A numerical site that went away after its first PROBE: forget it and wait on
             * (PROTOCOL.md section 7.4). */
            event(ps, 1,
                  "session %016" PRIx64 " went silent for %g s before the run started; "
                  "waiting for a numerical site",
                  ps->session_id, ps->cfg.silence_timeout_s);
            ps->have_session = 0;
            probes_before = ps->probes_answered;
            drths_wire_rx_start(&ps->rx, 0);
            atomic_store(&ps->state, DRTHS_PHYSSITE_WAITING);
            if (wait_deadline < now + silence_ns)
                wait_deadline = now + silence_ns;
            continue;
        }
        int64_t until = now + POLL_NS;
        if (!ps->have_session && until > wait_deadline)
            until = wait_deadline;
        if (drths_udp_wait(ps->udp, until) <= 0)
            continue;
        int had_session = ps->have_session;
        int64_t t = drain(ps, 0, 4);
        if (t)
            last_valid = t;
        if (!had_session && ps->have_session)
            last_valid = drths_now_ns();
        if (ps->act.hold)
            return finish(ps, 1, NULL);
        if (ps->probe_refused)
            return finish(ps, 1,
                          "a numerical site tried to start a run; this site runs "
                          "--probe-only");
        if (ps->act.stop_received && !drths_actuator_started(&ps->act)) {
            snprintf(text, sizeof text, "%s: the numerical site stopped before the run (%s)",
                     ps->cfg.probe_only ? "probe-only session finished" : "no run",
                     ps->stop_text[0] ? ps->stop_text : "no reason given");
            finish(ps, ps->cfg.probe_only ? 0 : 1, text);
            return -1; /* done, with or without success: no run either way */
        }
    }
    return 0;
}

static void publish_status(drths_physsite_t *ps, uint64_t tick)
{
    atomic_store_explicit(&ps->st_tick, tick, memory_order_relaxed);
    atomic_store_explicit(&ps->st_applied, ps->act.c.applied, memory_order_relaxed);
    atomic_store_explicit(&ps->st_concealed, ps->act.c.concealed, memory_order_relaxed);
    atomic_store_explicit(&ps->st_late, ps->act.c.late, memory_order_relaxed);
    int64_t ml = ps->act.lateness_ns.count ? ps->act.lateness_ns.max : 0;
    atomic_store_explicit(&ps->st_max_late_ns, ml > 0 ? (uint64_t)ml : 0, memory_order_relaxed);
    atomic_store_explicit(&ps->st_L, ps->act.L, memory_order_relaxed);
    uint64_t rej = ps->wrong_source + ps->other_session;
    for (int r = 1; r < DRTHS_REJECT_COUNT; r++)
        rej += ps->rx.rejects[r] + ps->pre_rejects[r];
    atomic_store_explicit(&ps->st_rejected, rej, memory_order_relaxed);
}

/* --kernel-filter: the key-less checks in the kernel (protocol/wire_filter.h). Before the run
 * any session's HELLO must get through; once it runs, only the numerical site's address (the
 * socket is connected) and session. */
static int narrow_filter(drths_physsite_t *ps, int running)
{
    drths_wire_filter_t f;
    drths_wire_filter_build(&f, DRTHS_ROLE_PHYSICAL, running ? ps->session_id : 0);
    if (running && drths_udp_connect(ps->udp, &ps->peer) != 0)
        return -1;
    if (drths_udp_attach_filter(ps->udp, f.insns, f.len) != 0)
        return -1;
    if (running)
        event(ps, 0,
              "kernel filter: only session %016" PRIx64 " from the numerical site's "
              "address reaches the site",
              ps->session_id);
    return 0;
}

/* Before the ticker starts: the real-time options, then the command source's start or the
 * handshake (with the kernel filter around it), then the "run started" lines. Returns 0 when
 * the run can start, else nonzero (finish has been called and set the exit code). */
static int start_run(drths_physsite_t *ps)
{
    ps->rt_rc = drths_rt_apply_thread(&ps->cfg.rt, &ps->rt_report);
    atomic_store(&ps->rt_ready, 1);
    if (ps->cfg.wake)
        ps->cfg.wake(ps->cfg.wake_ctx);
    if (ps->rt_rc != 0)
        return finish(ps, 1,
                      ps->cfg.rt.require
                          ? "real time was required (--require-rt) and is not available"
                          : "invalid real-time settings");

    const drths_physsite_source_t *src = ps->cfg.source;
    if (src) {
        const char *why = "the command source did not start";
        if (src->start(ps->cfg.source_ctx, ps, &why) != 0)
            return finish(ps, 1, why);
    } else {
        if (ps->cfg.kernel_filter && narrow_filter(ps, 0) != 0)
            return finish(ps, 1, "the kernel filter (--kernel-filter) could not be attached");
        int rc = before_run(ps);
        if (rc)
            return rc;
        if (ps->cfg.kernel_filter && narrow_filter(ps, 1) != 0)
            return finish(ps, 1,
                          "the kernel filter (--kernel-filter) could not be narrowed to "
                          "the session");
    }

    const drths_actuator_t *a = &ps->act;
    event_rec(ps, 0, EV_RUN_STARTED, 0, -1, a->L, 0, (double)a->L * (double)a->dt_ns * 1e-6, 0.0);
    /* Commands arrive about L ticks minus the round trip ahead of their tick. With L chosen
     * from the round trip that is a small margin; a fixed L far above the round trip can put
     * them beyond the playout buffer. */
    if (ps->cfg.exp->link.loop_delay_ticks > 0 && (size_t)a->L >= a->p.playout_ticks)
        event_rec(ps, 1, EV_FIXED_L, 0, -1, a->L, a->p.playout_ticks, 0.0, 0.0);
    return 0;
}

/* The tick's FEEDBACK (its echo hold time measured up to now) and any ABORT, over UDP. */
static void send_tick(drths_physsite_t *ps)
{
    drths_msg_feedback_t *f = &ps->out.feedback.u.feedback;
    if (f->echo_counter) {
        int64_t held = drths_now_ns() - ps->act.echo_arrival_ns;
        f->echo_hold_ns = held > 0 ? (uint64_t)held : 0;
    }
    if (send_msg(ps, &ps->out.feedback) == 0)
        ps->feedback_sent++;
    if (ps->out.send_abort)
        send_msg(ps, &ps->out.abort);
}

/* The count of channel i's repeated DAQ error, if it repeated. RT-safe (main writes it). */
static void daq_repeat_flush(drths_physsite_t *ps, int i)
{
    const __typeof__(ps->daq_repeat[0]) *r = &ps->daq_repeat[i];
    if (r->active && r->repeats) {
        rt_event_t e = {.line.warning = 1,
                        .kind = EV_DAQ_REPEATS,
                        .channel = i,
                        .u = {r->first_tick, r->repeats, r->last_tick}};
        push_event(ps, &e);
    }
    ps->daq_repeat[i].active = 0;
}

/* Channel i's DAQ error of the tick: a copy for its line (main formats it), unless it is the
 * error reported last (the same code, channel and call), which is counted instead. RT-safe. */
static void daq_error_line(drths_physsite_t *ps, int i, uint64_t tick)
{
    const drths_daq_t *d = drths_physsite_daq(ps, i);
    __typeof__(ps->daq_repeat[0]) *r = &ps->daq_repeat[i];
    if (r->active && r->code == d->last_error.code && r->channel == d->last_error.channel &&
        r->op == d->last_error.op) {
        r->repeats++;
        r->last_tick = tick;
        return;
    }
    daq_repeat_flush(ps, i);
    rt_event_t e = {.line.warning = 1, .kind = EV_DAQ_ERROR, .tick = tick, .channel = i};
    drths_daq_fault_save(d, &e.daq);
    push_event(ps, &e);
    r->active = 1;
    r->code = d->last_error.code;
    r->channel = d->last_error.channel;
    r->op = d->last_error.op;
    r->first_tick = r->last_tick = tick;
    r->repeats = 0;
}

/* The event lines of the tick's transitions; *hold_reported says whether HOLD was reported.
 * With several channels the lines of a channel name it, and the HOLD line is the site's. */
static void report_tick(drths_physsite_t *ps, uint64_t tick, int *hold_reported)
{
    const drths_actuator_t *a = &ps->act;
    unsigned ev = ps->out.events;
    if (ev & DRTHS_ACT_EV_FIRST_COMMAND) {
        rt_event_t e;
        memset(&e, 0, sizeof e);
        e.kind = EV_FIRST_COMMAND;
        e.tick = tick;
        e.channel = -1;
        e.name = drths_compensation_name(a->p.compensation);
        push_event(ps, &e);
    }
    if (ev & DRTHS_ACT_EV_EPOCH)
        event_rec(ps, 0, EV_EPOCH, tick, -1, a->epoch, a->L, 0.0, 0.0);
    if (drths_physsite_in_hold(ps) && !*hold_reported) {
        *hold_reported = 1;
        atomic_store(&ps->state, DRTHS_PHYSSITE_HOLD);
        rt_event_t e;
        memset(&e, 0, sizeof e);
        e.line.warning = 1;
        e.kind = EV_HOLD;
        e.tick = tick;
        e.channel = -1;
        e.cause = *site_cause(ps);
        push_event(ps, &e);
    }
    for (int i = 0; i < ps->n_channels; i++) {
        a = drths_physsite_act(ps, i);
        const drths_actuator_out_t *o = drths_physsite_out(ps, i);
        ev = o->events;
        if (ev & DRTHS_ACT_EV_HOLD)
            event_rec(ps, 1, EV_HOLD_DRIVE, tick, i, a->p.hold_mode == DRTHS_HOLD_RAMP,
                      a->c.safe_write_failures > 0, a->hold_target_m, a->p.ramp_rate_m_s);
        if (ev & DRTHS_ACT_EV_SETTLED) {
            rt_event_t e;
            memset(&e, 0, sizeof e);
            e.line.warning = a->c.safe_write_failures > 0;
            e.kind = EV_SETTLED;
            e.tick = tick;
            e.channel = i;
            e.u[0] = a->c.safe_write_failures;
            e.u[1] = a->c.safe_writes;
            e.u[2] = a->safe_write_failed_tick;
            e.v[0] = a->hold_target_m;
            e.v[1] = (double)(tick - a->hold_tick) / a->p.rate_hz;
            push_event(ps, &e);
        }
        if (o->daq_rc)
            daq_error_line(ps, i, tick);
    }
}

int drths_physsite_tick(drths_physsite_t *ps, uint64_t tick, int64_t deadline_ns, int64_t woke_ns,
                        int *finished)
{
    if (ps->n_channels == 1) {
        int rc = drths_actuator_tick(&ps->act, tick, deadline_ns, woke_ns, &ps->out);
        *finished = ps->out.finished;
        return rc;
    }
    hold_together(ps); /* a HOLD the source gave the first channel alone */
    int ran = 0, all = 1;
    for (int i = 0; i < ps->n_channels; i++) {
        drths_actuator_out_t *o = i ? &ps->extra[i - 1].out : &ps->out;
        double *row = ps->row + (size_t)i * DRTHS_ACT_NCOLS;
        int rc = drths_actuator_tick(drths_physsite_act(ps, i), tick, deadline_ns, woke_ns, o);
        if (rc == 0) {
            ran = 1;
            all &= o->finished != 0;
            memcpy(row, o->row, sizeof o->row);
            hold_together(ps);
            continue;
        }
        /* Only a channel that has finished records the NaN row; any other failure (a channel
         * not started) ends the run as it does with one channel. */
        if (rc != -EALREADY) {
            *finished = 0;
            return rc;
        }
        o->events = 0;
        o->daq_rc = 0;
        o->send_abort = 0;
        o->finished = 1;
        for (int k = 0; k < DRTHS_ACT_NCOLS; k++)
            row[k] = NAN;
        row[DRTHS_ACT_COL_TICK] = (double)tick;
        row[DRTHS_ACT_COL_TIME] = (double)tick / ps->act.p.rate_hz;
    }
    *finished = all;
    return ran ? 0 : -EALREADY;
}

/* After the last tick (`tick`): the source's end, or STOP three times to the numerical site at
 * the end of the record. Returns the exit code. */
static int end_run(drths_physsite_t *ps, uint64_t tick)
{
    const drths_actuator_t *a = &ps->act;
    const drths_physsite_source_t *src = ps->cfg.source;
    ps->run_end_ns = drths_now_ns();
    if (src) {
        const char *ok = src->ended(ps->cfg.source_ctx, ps);
        if (a->end_reason == DRTHS_STOP_END_OF_RECORD && !drths_physsite_in_hold(ps))
            return finish(ps, 0, ok);
        return finish(ps, 1, NULL);
    }
    if (a->end_reason == DRTHS_STOP_END_OF_RECORD && !a->hold) {
        for (int i = 0; i < 3; i++) {
            if (i)
                drths_sleep_until_ns(drths_now_ns() + STOP_GAP_NS);
            send_stop_like(ps, DRTHS_MSG_STOP, DRTHS_STOP_END_OF_RECORD, tick, "end of record");
        }
        return finish(ps, 0, "end of record");
    }
    return finish(ps, 1, NULL);
}

int drths_physsite_run(drths_physsite_t *ps)
{
    if (start_run(ps) != 0)
        return ps->exit_code; /* no run: finish() has set it */
    const drths_physsite_source_t *src = ps->cfg.source;
    const int64_t dt_ns = ps->act.dt_ns;
    drths_ticker_t tk;
    ps->run_start_ns = drths_now_ns() + START_DELAY_NS;
    drths_ticker_init(&tk, dt_ns, ps->run_start_ns, dt_ns / 2, NULL, NULL, NULL);
    drths_ticker_set_spin(&tk, ps->cfg.tick_spin_ns);
    atomic_store(&ps->state, DRTHS_PHYSSITE_RUNNING);
    int signalled = 0, hold_reported = 0;
    uint64_t tick = 0;
    for (;;) {
        if (drths_ticker_wait(&tk, &tick) != 0)
            continue; /* the sleep failed (it cannot with CLOCK_MONOTONIC): try again */
        /* Acquire: a request 3 publishes records_text, written before it by main. */
        int req = signalled ? 0 : atomic_load_explicit(&ps->stop_request, memory_order_acquire);
        if (req == 3) {
            signalled = 1;
            drths_physsite_hold_text_cause(ps, DRTHS_STOP_RECORDS, 1, ps->records_text);
        } else if (req) {
            signalled = 1;
            drths_physsite_hold_text_cause(ps, DRTHS_STOP_SIGNAL, 1,
                                           req == 2 ? "stopped from the monitor"
                                                    : "stopped by signal");
        }
        int64_t woke = tk.deadline_ns + tk.lateness_ns;
        if (src)
            src->before_tick(ps->cfg.source_ctx, ps, tick, woke);
        else
            drain(ps, 1, MAX_BATCHES_PER_TICK);
        int finished = 0;
        if (drths_physsite_tick(ps, tick, tk.deadline_ns, woke, &finished) != 0)
            break;
        if (src)
            src->after_tick(ps->cfg.source_ctx, ps, tick, &ps->out);
        else
            send_tick(ps);
        report_tick(ps, tick, &hold_reported);
        drths_recorder_push(ps->rec, ps->n_channels > 1 ? ps->row : ps->out.row);
        ps->rows_pushed++;
        publish_status(ps, tick);
        if (ps->rows_pushed % WAKE_EVERY_ROWS == 0 && ps->cfg.wake)
            ps->cfg.wake(ps->cfg.wake_ctx);
        if (finished)
            break;
    }
    for (int i = 0; i < ps->n_channels; i++)
        daq_repeat_flush(ps, i);
    return end_run(ps, tick);
}
