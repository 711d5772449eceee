/* The drive envelope: the one gate every value written to the servo controller's drive passes
 * (docs/design.md, "Safety", "The drive envelope").
 *
 * The actuator site is the last software before the hydraulics. Whatever produced a drive (the
 * compensation of a command, the HOLD ramp, concealment, delayed playback, the rejoin, an
 * OpenFresco move, the I/O check, the safe state at the end), it reaches the converter only
 * through site-physical/daq.c, and the DAQ admits it only through drths_envelope_admit: a
 * drive that would leave the envelope is refused and NOT written; the DAQ call fails with
 * -EDOM and the caller enters HOLD naming the bound and by how much (drths_envelope_describe).
 *
 * The envelope, set by a laboratory from its actuator's ratings (physical.limit_drive_*):
 *   position      |u + stop(v)|                               <= position_m
 *   velocity      |u(k) - u(k-1)| / dt                        <= velocity_m_s
 *   acceleration  |u(k) - 2 u(k-1) + u(k-2)| / dt^2           <= acceleration_m_s2
 *   offset        |u - r| from the command r the drive serves  <= offset_m (when r is given)
 * with dt the tick and stop(v) the distance the HOLD ramp needs to stop from the drive's
 * velocity v at half the acceleration bound (v^2 / (2 a) + |v| dt / 2, in the direction of v):
 * every admitted drive is one from which HOLD can still stop inside the position bound.
 * Velocity and acceleration are those the servo controller sees: the
 * differences of successive writes. Before the first write the output is taken to be at rest
 * at the first value written (the converter's previous output is unknown: the first write
 * is checked for position only, which is why the actuator site's first writes are its rest
 * position). A write later than rest_after_s (at least DRTHS_ENV_REST_TICKS ticks) after
 * the one before follows an output that stood still (the converter held its value): it is
 * checked against rest there, so a stall of the site is never mistaken for motion, and the
 * motion that follows it starts from rest. Shorter gaps (a late tick of a machine with
 * millisecond hiccups, whose missed ticks are then played back to back) count as the ticks'
 * own rhythm: the actuator site sets rest_after_s to its stall bound, beyond which it holds.
 *
 * HOLD moves the drive with drths_envelope_ramp: from the drive last admitted (never from a
 * refused one) and its velocity, it brakes at half the acceleration bound and goes to the
 * target no faster than the ramp rate, so every ramp value is admitted. A ramp step never
 * covers more than the wall time since the last write (at most one tick): ticks replayed back
 * to back after a stall do not move the drive faster than real time.
 *
 * Ownership: the caller owns drths_envelope_t (no heap memory). One thread uses it.
 */
#ifndef DRTHS_ENVELOPE_H
#define DRTHS_ENVELOPE_H

#include <stdint.h>

#include "common/platform/error.h"

/* A write this many ticks or more after the previous one follows an output at rest, when
 * rest_after_s is shorter. */
#define DRTHS_ENV_REST_TICKS 3

typedef enum drths_envelope_bound {
    DRTHS_ENV_OK = 0,
    DRTHS_ENV_NOT_FINITE, /* the drive is NaN or infinite */
    DRTHS_ENV_POSITION,
    DRTHS_ENV_VELOCITY,
    DRTHS_ENV_ACCELERATION,
    DRTHS_ENV_OFFSET, /* distance from the command being played */
    DRTHS_ENV_NBOUNDS
} drths_envelope_bound_t;

/* The four limits are the drive's (drths_drive_limits_t, common/platform/metrics.h, which names
 * them in the experiment file and writes them to JSON), with the rest gap of the RT side. */
typedef struct drths_envelope_limits {
    double position_m;        /* physical.limit_drive_m */
    double velocity_m_s;      /* physical.limit_drive_velocity_m_s */
    double acceleration_m_s2; /* physical.limit_drive_acceleration_m_s2 */
    double offset_m;          /* physical.limit_drive_offset_m */
    double rest_after_s;      /* a gap between writes this long is a stall (0: the minimum) */
} drths_envelope_limits_t;

/* A refused drive: which bound, the value it would have had and the bound. */
typedef struct drths_envelope_violation {
    drths_envelope_bound_t bound;
    double drive_m; /* the refused drive */
    double value;   /* |position|, |velocity|, |acceleration| or |offset| it would have had */
    double limit;
    double command_m; /* the command it served (NaN: none) */
} drths_envelope_violation_t;

typedef struct drths_envelope {
    drths_envelope_limits_t lim;
    double dt_s;
    int64_t rest_ns; /* rest_after_s, at least DRTHS_ENV_REST_TICKS ticks */
    int n;           /* drives admitted so far, saturating at 2 */
    double u1, v1;   /* the last admitted drive and its velocity (m/s) */
    int64_t last_ns; /* when it was admitted */
    /* Over the run: the largest |velocity|, |acceleration| and |offset| admitted, the largest
     * fraction of any bound used (the margin is 1 minus it), drives refused, the first
     * refusal. */
    double max_velocity_m_s, max_acceleration_m_s2, max_offset_m, max_use;
    drths_envelope_bound_t max_use_bound;
    uint64_t admitted, refused;
    drths_envelope_violation_t first_refusal;
} drths_envelope_t;

/* Checks the limits (each finite and > 0; errors name the physical.limit_drive_* field) and
 * starts with no drive written. init-only. */
int drths_envelope_init(drths_envelope_t *e, const drths_envelope_limits_t *lim, double rate_hz,
                        drths_error_t *err);

/* Admits drive u, written at now_ns, serving command r (NaN when it serves none: HOLD, the
 * safe state, the I/O check). Returns 0 and records u as written; or -EDOM, fills *v (may be
 * NULL) and records nothing: u must not be written. RT-safe. */
int drths_envelope_admit(drths_envelope_t *e, double u, double r, int64_t now_ns,
                         drths_envelope_violation_t *v);

/* The fastest speed from which a motion braking at decel_m_s2, in whole ticks of dt_s, still
 * stops within distance_m >= 0: v^2 / (2 a) + v dt / 2 <= distance. The HOLD ramp and the
 * actuator's shaping of the compensation brake onto their targets with it. RT-safe. */
double drths_envelope_stop_speed(double distance_m, double decel_m_s2, double dt_s);

/* The output stands still at the last admitted drive from now_ns on (it was written again, or
 * nothing was written and the converter holds it): velocity 0. RT-safe. */
void drths_envelope_stand(drths_envelope_t *e, int64_t now_ns);

/* The next HOLD drive towards target at now_ns, moving no faster than max_speed_m_s: from the
 * last admitted drive and its velocity, braking at half the acceleration bound; admitted by
 * drths_envelope_admit with r NaN whenever target lies within the position bound. Before any
 * drive was admitted it is the target itself. *done (may be NULL) becomes nonzero once the
 * drive is at the target and at rest. RT-safe. */
double drths_envelope_ramp(const drths_envelope_t *e, double target, double max_speed_m_s,
                           int64_t now_ns, int *done);

/* The bound's name in the experiment file ("limit_drive_velocity_m_s", ...). RT-safe. */
const char *drths_envelope_field(drths_envelope_bound_t b);

/* One sentence for a refusal, e.g. "drive envelope: velocity 9.35 m/s exceeds
 * limit_drive_velocity_m_s 1.25 m/s by 8.1 m/s (drive 0.097 m not written)". Not RT-safe
 * (snprintf): the main thread formats it from the violation. Returns its length. */
int drths_envelope_describe(const drths_envelope_violation_t *v, char *buf, size_t cap);

#endif
