/* The cause of a HOLD as a fixed-size record (docs/design.md, "Safety", HOLD).
 *
 * The RT thread formats nothing (CONVENTIONS.md rule 7): where it finds a cause of HOLD it fills
 * a drths_hold_cause_t with the cause's kind, the tick and the numbers the sentence will name,
 * and hands it to drths_actuator_hold. The main thread turns the record into the sentence
 * (drths_hold_cause_describe) for the log line, summary.json, the report and the site's exit
 * reason. drths_hold_cause_describe is the one place the HOLD sentences are written.
 *
 * The ABORT datagram the RT thread sends to the numerical site names the cause without
 * formatting: its reason code, and as its text drths_hold_cause_abort_text, a fixed sentence per
 * kind (with the limit's name in the experiment file, but no values), or the cause's own text
 * for the causes that carry one (a signal, the monitor, the OpenFresco client). The numerical
 * site keeps the first ABORT it receives and stops, so a full sentence sent later (formatted by
 * the main thread, in the second or third ABORT) would never be read, and delaying the first
 * ABORT until the main thread has formatted one would hold up the numerical site's stop by the
 * main thread's latency; an exact printf-free formatter of %g would be a second copy of every
 * sentence to keep in step with this one. So the numerical site's log says what kind of limit
 * or failure held the test ("actuator site aborted: LIMIT: force limit: the measured force
 * exceeds physical.limit_force_N"), and the actuator site's own log and summary.json give the
 * values.
 *
 * Ownership: plain values; the text is a copy. */
#ifndef DRTHS_HOLD_CAUSE_H
#define DRTHS_HOLD_CAUSE_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/wire.h"
#include "site-physical/envelope.h"

typedef enum drths_hold_kind {
    DRTHS_HOLD_NONE = 0,
    /* A fixed or received sentence, carried in text (a signal, the monitor, the OpenFresco
     * client's causes, a caller's sentence). */
    DRTHS_HOLD_TEXT,
    /* The numerical site's ABORT: reason (drths_stop_reason_t) and its text. */
    DRTHS_HOLD_PEER_ABORT,
    /* The command limits: v[0] the command, v[1] the limit. */
    DRTHS_HOLD_DISPLACEMENT,
    DRTHS_HOLD_VELOCITY,
    /* A command sample refused on arrival for `tick` (sub: drths_hold_arrival_t). */
    DRTHS_HOLD_ARRIVAL,
    /* The measurement limits: v[0] the measurement (m, N), v[1] the limit. */
    DRTHS_HOLD_MEASURED_DISPLACEMENT,
    DRTHS_HOLD_FORCE,
    /* The watchdog: v[0] the time without a command (ms), v[1] the limit (ms). */
    DRTHS_HOLD_WATCHDOG,
    /* A stall: `tick` woke v[0] ms late, v[1] the bound (ms). */
    DRTHS_HOLD_STALL,
    /* A drive the envelope refused: envelope. */
    DRTHS_HOLD_ENVELOPE,
    /* A failed DAQ call: sub is drths_hold_daq_op_t, n[0] the negative errno, n[1] the DAQ
     * channel that failed plus one (drths_daq_channel_names; 0 unknown); n[2] 1 when v[0..2] hold
     * its comedi subdevice, channel and range; text the failing call ("comedi_data_read"). */
    DRTHS_HOLD_DAQ,
    /* A converter at its end: sub 0 displacement (v[0] m), 1 force (v[0] N). */
    DRTHS_HOLD_SATURATED,
    /* A previewed command beyond the displacement limit: v[0] the command for `tick`, v[1] the
     * limit. */
    DRTHS_HOLD_PREVIEW,
    /* The stability monitor: sub 0 growing, 1 not decaying after the record's end; v[0] the
     * frequency (Hz), v[1] the growth (%/s), v[2] the span (s), v[3] the last amplitude (m),
     * v[4] the first (m). */
    DRTHS_HOLD_STABILITY,
    /* The concealment budget: sub 0 concealed in a row, 1 commands too late; n[0] the ticks,
     * n[1] the budget. */
    DRTHS_HOLD_CONCEALMENT,
    DRTHS_HOLD_KIND_COUNT
} drths_hold_kind_t;

typedef enum drths_hold_arrival {
    DRTHS_HOLD_ARRIVAL_DISPLACEMENT = 0, /* v[0..2] disp, vel, damper; v[3] the limit */
    DRTHS_HOLD_ARRIVAL_VELOCITY,         /* v[0] vel, v[1] the limit */
    DRTHS_HOLD_ARRIVAL_STEP,             /* v[0] |step| (m), v[1] velocity, v[2] the limit;
                                          * n[0] 1: to the next tick (else from the previous) */
    DRTHS_HOLD_ARRIVAL_ACCELERATION,     /* v[0] |acceleration|, v[1] the bound */
} drths_hold_arrival_t;

typedef enum drths_hold_daq_op {
    DRTHS_HOLD_DAQ_WRITE = 0,
    DRTHS_HOLD_DAQ_SAFE_STATE,
    DRTHS_HOLD_DAQ_READ,
} drths_hold_daq_op_t;

#define DRTHS_HOLD_NV 5

typedef struct drths_hold_cause {
    drths_hold_kind_t kind;
    int sub;     /* the kind's variant (see the kind) */
    int channel; /* the channel whose own HOLD held the site, -1 for none (physsite.h) */
    uint64_t tick;
    double v[DRTHS_HOLD_NV];
    int64_t n[3];
    drths_envelope_violation_t envelope; /* DRTHS_HOLD_ENVELOPE */
    char text[DRTHS_WIRE_MAX_TEXT + 1];  /* TEXT, PEER_ABORT */
} drths_hold_cause_t;

/* A cause of the kind, zeroed, channel -1. RT-safe. */
void drths_hold_cause_init(drths_hold_cause_t *c, drths_hold_kind_t kind);

/* A cause carrying a sentence (DRTHS_HOLD_TEXT), copied and cut to DRTHS_WIRE_MAX_TEXT bytes.
 * RT-safe. */
void drths_hold_cause_text(drths_hold_cause_t *c, const char *text);

/* The HOLD sentence, at most DRTHS_WIRE_MAX_TEXT bytes (less when cap is smaller), without the
 * channel (drths_physsite_hold_text prefixes it). Returns its length. Not RT-safe (snprintf):
 * the main thread's. */
int drths_hold_cause_describe(const drths_hold_cause_t *c, char *buf, size_t cap);

/* The ABORT's text for the cause: fixed per kind, or the cause's own text (see the file
 * comment). Static or in c. RT-safe. */
const char *drths_hold_cause_abort_text(const drths_hold_cause_t *c);

#endif
