#include "site-physical/hold_cause.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "site-physical/actuator.h"
#include "site-physical/daq.h"

void drths_hold_cause_init(drths_hold_cause_t *c, drths_hold_kind_t kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->channel = -1;
}

void drths_hold_cause_text(drths_hold_cause_t *c, const char *text)
{
    drths_hold_cause_init(c, DRTHS_HOLD_TEXT);
    drths_scopy(c->text, sizeof c->text, text);
}

static int arrival(const drths_hold_cause_t *c, char *buf, size_t cap)
{
    const unsigned long long t = (unsigned long long)c->tick;
    const double *v = c->v;
    switch (c->sub) {
    case DRTHS_HOLD_ARRIVAL_DISPLACEMENT:
        return snprintf(buf, cap,
                        "command for tick %llu refused on arrival: displacement %.6g m (velocity "
                        "%.6g m/s, damper %.6g) is not a number or exceeds limit_displacement_m "
                        "%.6g m",
                        t, v[0], v[1], v[2], v[3]);
    case DRTHS_HOLD_ARRIVAL_VELOCITY:
        return snprintf(buf, cap,
                        "command for tick %llu refused on arrival: velocity %.6g m/s exceeds "
                        "limit_velocity_m_s %.6g m/s",
                        t, v[0], v[1]);
    case DRTHS_HOLD_ARRIVAL_STEP:
        return snprintf(buf, cap,
                        "command for tick %llu refused on arrival: it moves %.4g mm %s tick "
                        "%llu, a velocity of %.4g m/s beyond limit_velocity_m_s %.6g m/s",
                        t, v[0] * 1e3, c->n[0] ? "to" : "from", c->n[0] ? t + 1 : t - 1, v[1],
                        v[2]);
    default:
        return snprintf(buf, cap,
                        "command for tick %llu refused on arrival: with its neighbours it "
                        "accelerates at %.4g m/s^2, beyond limit_drive_acceleration_m_s2 %.6g",
                        t, v[0], v[1]);
    }
}

static const char *daq_op(int sub)
{
    return sub == DRTHS_HOLD_DAQ_WRITE  ? "write"
           : sub == DRTHS_HOLD_DAQ_READ ? "read"
                                        : "safe state";
}

/* The channel and the call when the DAQ recorded them (hold_cause.h, DRTHS_HOLD_DAQ). */
static int daq(const drths_hold_cause_t *c, char *buf, size_t cap)
{
    drths_daq_channel_config_t cfg = {0};
    cfg.subdevice = (int)c->v[0];
    cfg.channel = (int)c->v[1];
    cfg.range = (int)c->v[2];
    return drths_daq_failure_sentence(buf, cap, daq_op(c->sub), (int)c->n[0], (int)c->n[1] - 1,
                                      c->n[2] == 1 ? &cfg : NULL, c->text);
}

/* The sentence, into a buffer of at most DRTHS_WIRE_MAX_TEXT + 1 bytes. */
static int describe(const drths_hold_cause_t *c, char *buf, size_t cap)
{
    const double *v = c->v;
    switch (c->kind) {
    case DRTHS_HOLD_TEXT:
        return (int)drths_scopy(buf, cap, c->text);
    case DRTHS_HOLD_PEER_ABORT: {
        size_t n = drths_scopy(buf, cap, "numerical site aborted: ");
        n += drths_scopy(buf + n, cap - n, drths_stop_reason_name(c->sub));
        if (c->text[0]) {
            n += drths_scopy(buf + n, cap - n, ": ");
            n += drths_scopy(buf + n, cap - n, c->text);
        }
        return (int)n;
    }
    case DRTHS_HOLD_DISPLACEMENT:
        return snprintf(buf, cap, "displacement limit: command %.6g m exceeds %.6g m", v[0], v[1]);
    case DRTHS_HOLD_VELOCITY:
        return snprintf(buf, cap, "velocity limit: command velocity %.6g m/s exceeds %.6g m/s",
                        v[0], v[1]);
    case DRTHS_HOLD_ARRIVAL:
        return arrival(c, buf, cap);
    case DRTHS_HOLD_MEASURED_DISPLACEMENT:
        return snprintf(buf, cap, "measured displacement limit: %.6g m exceeds %.6g m", v[0], v[1]);
    case DRTHS_HOLD_FORCE:
        return snprintf(buf, cap, "force limit: measured force %.6g kN exceeds %.6g kN",
                        v[0] * 1e-3, v[1] * 1e-3);
    case DRTHS_HOLD_WATCHDOG:
        return snprintf(buf, cap, "watchdog: no command to play for %.1f ms (limit %.6g ms)", v[0],
                        v[1]);
    case DRTHS_HOLD_STALL:
        return snprintf(buf, cap,
                        "stall: tick %llu woke %.1f ms after its deadline "
                        "(physical.max_tick_late_ms %g); the missed ticks are not played",
                        (unsigned long long)c->tick, v[0], v[1]);
    case DRTHS_HOLD_ENVELOPE:
        return drths_envelope_describe(&c->envelope, buf, cap);
    case DRTHS_HOLD_DAQ:
        return daq(c, buf, cap);
    case DRTHS_HOLD_SATURATED:
        if (c->sub == 0)
            return snprintf(buf, cap,
                            "converter saturated: measured displacement reads %.6g m on "
                            "displacement_in, the end of "
                            "its converter; the true value may lie beyond",
                            v[0]);
        return snprintf(buf, cap,
                        "converter saturated: measured force reads %.6g kN on force_in, the "
                        "end of its "
                        "converter; the true value may lie beyond",
                        v[0] * 1e-3);
    case DRTHS_HOLD_PREVIEW:
        return snprintf(buf, cap, "displacement limit: command %.6g m for tick %llu exceeds %.6g m",
                        v[0], (unsigned long long)c->tick, v[1]);
    case DRTHS_HOLD_STABILITY:
        if (c->sub == 0)
            return snprintf(buf, cap,
                            "stability: oscillation at %.1f Hz growing %.0f %%/s over %.1f s; "
                            "amplitude %.1f -> %.1f mm",
                            v[0], v[1], v[2], v[4] * 1e3, v[3] * 1e3);
        return snprintf(buf, cap,
                        "stability: oscillation at %.1f Hz not decaying after the record's end "
                        "(%+.0f %%/s over %.1f s); amplitude %.1f mm",
                        v[0], v[1], v[2], v[3] * 1e3);
    case DRTHS_HOLD_CONCEALMENT:
        if (c->sub == 0)
            return snprintf(buf, cap, "too many concealed commands (%llu in a row, limit %d)",
                            (unsigned long long)c->n[0], (int)c->n[1]);
        return snprintf(buf, cap,
                        "commands too late: the newest applied is %llu ticks behind its tick "
                        "(limit %d)",
                        (unsigned long long)c->n[0], (int)c->n[1]);
    default:
        return (int)drths_scopy(buf, cap, "");
    }
}

int drths_hold_cause_describe(const drths_hold_cause_t *c, char *buf, size_t cap)
{
    if (!cap)
        return 0;
    /* The sentences were cut to the ABORT's text field when the RT thread formatted them; the
     * same cut keeps them identical. */
    if (cap > DRTHS_WIRE_MAX_TEXT + 1)
        cap = DRTHS_WIRE_MAX_TEXT + 1;
    const int n = describe(c, buf, cap);
    return n < 0 ? 0 : n >= (int)cap ? (int)cap - 1 : n;
}

const char *drths_hold_cause_abort_text(const drths_hold_cause_t *c)
{
    switch (c->kind) {
    case DRTHS_HOLD_TEXT:
    case DRTHS_HOLD_PEER_ABORT:
        return c->text;
    case DRTHS_HOLD_DISPLACEMENT:
        return "displacement limit: a command exceeds physical.limit_displacement_m";
    case DRTHS_HOLD_VELOCITY:
        return "velocity limit: a command velocity exceeds physical.limit_velocity_m_s";
    case DRTHS_HOLD_ARRIVAL:
        switch (c->sub) {
        case DRTHS_HOLD_ARRIVAL_DISPLACEMENT:
            return "a command refused on arrival: not a number or beyond "
                   "physical.limit_displacement_m";
        case DRTHS_HOLD_ARRIVAL_VELOCITY:
            return "a command refused on arrival: its velocity exceeds "
                   "physical.limit_velocity_m_s";
        case DRTHS_HOLD_ARRIVAL_STEP:
            return "a command refused on arrival: it moves from or to its neighbour faster than "
                   "physical.limit_velocity_m_s";
        default:
            return "a command refused on arrival: with its neighbours it accelerates beyond "
                   "physical.limit_drive_acceleration_m_s2";
        }
    case DRTHS_HOLD_MEASURED_DISPLACEMENT:
        return "measured displacement limit: beyond physical.limit_measured_displacement_m";
    case DRTHS_HOLD_FORCE:
        return "force limit: the measured force exceeds physical.limit_force_N";
    case DRTHS_HOLD_WATCHDOG:
        return "watchdog: no command to play for longer than physical.watchdog_ms";
    case DRTHS_HOLD_STALL:
        return "stall: a tick woke later than physical.max_tick_late_ms after its deadline; the "
               "missed ticks are not played";
    case DRTHS_HOLD_ENVELOPE:
        switch (c->envelope.bound) {
        case DRTHS_ENV_NOT_FINITE:
            return "drive envelope: a drive that is not a number (not written)";
        case DRTHS_ENV_POSITION:
            return "drive envelope: a drive beyond physical.limit_drive_m (not written)";
        case DRTHS_ENV_VELOCITY:
            return "drive envelope: a drive velocity beyond physical.limit_drive_velocity_m_s "
                   "(not written)";
        case DRTHS_ENV_ACCELERATION:
            return "drive envelope: a drive acceleration beyond "
                   "physical.limit_drive_acceleration_m_s2 (not written)";
        default:
            return "drive envelope: a drive beyond physical.limit_drive_offset_m from its "
                   "command (not written)";
        }
    case DRTHS_HOLD_DAQ:
        return c->sub == DRTHS_HOLD_DAQ_WRITE  ? "DAQ write failed"
               : c->sub == DRTHS_HOLD_DAQ_READ ? "DAQ read failed"
                                               : "DAQ safe state failed";
    case DRTHS_HOLD_SATURATED:
        return c->sub == 0 ? "converter saturated: the measured displacement is at the end of "
                             "its converter"
                           : "converter saturated: the measured force is at the end of its "
                             "converter";
    case DRTHS_HOLD_PREVIEW:
        return "displacement limit: a previewed command exceeds physical.limit_displacement_m";
    case DRTHS_HOLD_STABILITY:
        return c->sub == 0 ? "stability: a growing oscillation of the measured displacement"
                           : "stability: an oscillation not decaying after the record's end";
    case DRTHS_HOLD_CONCEALMENT:
        return c->sub == 0 ? "too many concealed commands (physical.max_concealed_ms)"
                           : "commands too late: beyond the concealment budget "
                             "(physical.max_concealed_ms)";
    default:
        return "";
    }
}
