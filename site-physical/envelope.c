/* The drive envelope (site-physical/envelope.h). */
#include "site-physical/envelope.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "common/platform/metrics.h"

/* The envelope's bounds are the drive's (common/platform/metrics.h), whose names in the
 * experiment file are defined there; a drive that is not a number breaks limit_drive_m. */
static const drths_drive_bound_t drive_bound[DRTHS_ENV_NBOUNDS] = {
    [DRTHS_ENV_OK] = DRTHS_DRIVE_BOUND_NONE,
    [DRTHS_ENV_NOT_FINITE] = DRTHS_DRIVE_BOUND_POSITION,
    [DRTHS_ENV_POSITION] = DRTHS_DRIVE_BOUND_POSITION,
    [DRTHS_ENV_VELOCITY] = DRTHS_DRIVE_BOUND_VELOCITY,
    [DRTHS_ENV_ACCELERATION] = DRTHS_DRIVE_BOUND_ACCELERATION,
    [DRTHS_ENV_OFFSET] = DRTHS_DRIVE_BOUND_OFFSET,
};

const char *drths_envelope_field(drths_envelope_bound_t b)
{
    return (unsigned)b < DRTHS_ENV_NBOUNDS ? drths_drive_bound_field(drive_bound[b]) : "?";
}

int drths_envelope_init(drths_envelope_t *e, const drths_envelope_limits_t *lim, double rate_hz,
                        drths_error_t *err)
{
    const double v[4] = {lim->position_m, lim->velocity_m_s, lim->acceleration_m_s2, lim->offset_m};
    const drths_envelope_bound_t b[4] = {DRTHS_ENV_POSITION, DRTHS_ENV_VELOCITY,
                                         DRTHS_ENV_ACCELERATION, DRTHS_ENV_OFFSET};
    for (int i = 0; i < 4; i++)
        if (!(v[i] > 0.0) || !isfinite(v[i]))
            return drths_error_set(err, -EINVAL, "physical.%s: must be finite and > 0 (got %g)",
                                   drths_envelope_field(b[i]), v[i]);
    if (!(rate_hz > 0.0) || !isfinite(rate_hz))
        return drths_error_set(err, -EINVAL, "rate_hz: must be > 0 (got %g)", rate_hz);
    *e = (drths_envelope_t){
        .lim = *lim,
        .dt_s = 1.0 / rate_hz,
        .rest_ns = (int64_t)llround(fmax(DRTHS_ENV_REST_TICKS / rate_hz,
                                         isfinite(lim->rest_after_s) ? lim->rest_after_s : 0.0) *
                                    1e9),
        .first_refusal = {.bound = DRTHS_ENV_OK, .command_m = NAN},
    };
    return 0;
}

/* The velocity the output had before a write at now_ns: the last one's, unless the converter
 * has held its value for rest_ns (a stall, a pause between phases). */
static double prior_velocity(const drths_envelope_t *e, int64_t now_ns)
{
    if (e->n < 2 || now_ns - e->last_ns >= e->rest_ns)
        return 0.0;
    return e->v1;
}

static int refuse(drths_envelope_t *e, drths_envelope_violation_t *out,
                  drths_envelope_violation_t v)
{
    e->refused++;
    if (e->first_refusal.bound == DRTHS_ENV_OK)
        e->first_refusal = v;
    if (out)
        *out = v;
    return -EDOM;
}

int drths_envelope_admit(drths_envelope_t *e, double u, double r, int64_t now_ns,
                         drths_envelope_violation_t *out)
{
    drths_envelope_violation_t v = {.drive_m = u, .command_m = r};
    if (!isfinite(u)) {
        v.bound = DRTHS_ENV_NOT_FINITE;
        v.value = u;
        v.limit = e->lim.position_m;
        return refuse(e, out, v);
    }
    /* Each bound's use, as a fraction of it; the first one above 1 refuses the drive. */
    double val[DRTHS_ENV_NBOUNDS] = {0};
    const double lim[DRTHS_ENV_NBOUNDS] = {
        [DRTHS_ENV_POSITION] = e->lim.position_m,
        [DRTHS_ENV_VELOCITY] = e->lim.velocity_m_s,
        [DRTHS_ENV_ACCELERATION] = e->lim.acceleration_m_s2,
        [DRTHS_ENV_OFFSET] = e->lim.offset_m,
    };
    double vel = 0.0;
    if (e->n > 0) {
        vel = (u - e->u1) / e->dt_s;
        val[DRTHS_ENV_VELOCITY] = fabs(vel);
        val[DRTHS_ENV_ACCELERATION] = fabs(vel - prior_velocity(e, now_ns)) / e->dt_s;
    }
    /* The position is judged where the drive would come to rest if HOLD braked now (at the
     * ramp's deceleration, half the bound): a drive moving towards the bound faster than it can
     * stop before it is refused now, while the ramp can still stop inside. */
    const double a = 0.5 * e->lim.acceleration_m_s2;
    val[DRTHS_ENV_POSITION] =
        fabs(u + copysign(vel * vel / (2.0 * a) + 0.5 * fabs(vel) * e->dt_s, vel));
    if (!isnan(r))
        val[DRTHS_ENV_OFFSET] = fabs(u - r);
    double use = 0.0;
    drths_envelope_bound_t use_b = DRTHS_ENV_POSITION;
    /* A jump is named as one (velocity, acceleration) before where it would lead. */
    static const drths_envelope_bound_t order[] = {DRTHS_ENV_VELOCITY, DRTHS_ENV_ACCELERATION,
                                                   DRTHS_ENV_POSITION, DRTHS_ENV_OFFSET};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const drths_envelope_bound_t b = order[i];
        if (!(val[b] <= lim[b])) {
            v.bound = b;
            v.value = val[b];
            v.limit = lim[b];
            return refuse(e, out, v);
        }
        if (val[b] / lim[b] > use) {
            use = val[b] / lim[b];
            use_b = b;
        }
    }
    if (use > e->max_use) {
        e->max_use = use;
        e->max_use_bound = use_b;
    }
    if (val[DRTHS_ENV_VELOCITY] > e->max_velocity_m_s)
        e->max_velocity_m_s = val[DRTHS_ENV_VELOCITY];
    if (val[DRTHS_ENV_ACCELERATION] > e->max_acceleration_m_s2)
        e->max_acceleration_m_s2 = val[DRTHS_ENV_ACCELERATION];
    if (val[DRTHS_ENV_OFFSET] > e->max_offset_m)
        e->max_offset_m = val[DRTHS_ENV_OFFSET];
    e->v1 = vel;
    e->u1 = u;
    e->last_ns = now_ns;
    if (e->n < 2)
        e->n++;
    e->admitted++;
    return 0;
}

double drths_envelope_stop_speed(double distance_m, double decel_m_s2, double dt_s)
{
    const double h = 0.5 * decel_m_s2 * dt_s;
    return -h + sqrt(h * h + 2.0 * decel_m_s2 * distance_m);
}

void drths_envelope_stand(drths_envelope_t *e, int64_t now_ns)
{
    e->v1 = 0.0;
    e->last_ns = now_ns;
}

double drths_envelope_ramp(const drths_envelope_t *e, double target, double max_speed_m_s,
                           int64_t now_ns, int *done)
{
    if (done)
        *done = 0;
    if (e->n == 0) {
        if (done)
            *done = 1;
        return target;
    }
    const double dt = e->dt_s;
    /* Half the bound: the snap to the target below may take up to 1.5 times this. */
    const double a = 0.5 * e->lim.acceleration_m_s2;
    double vmax = 0.9 * e->lim.velocity_m_s;
    if (max_speed_m_s > 0.0 && max_speed_m_s < vmax)
        vmax = max_speed_m_s;
    const double v = prior_velocity(e, now_ns);
    const double d = target - e->u1;
    const double snap = 0.5 * a * dt * dt < vmax * dt ? 0.5 * a * dt * dt : vmax * dt;
    if (fabs(d) <= snap && fabs(v) <= a * dt) {
        if (done)
            *done = 1;
        return target;
    }
    const double vstop = drths_envelope_stop_speed(fabs(d), a, dt);
    const double vdes = copysign(vstop < vmax ? vstop : vmax, d);
    double vn = vdes;
    if (vn < v - a * dt)
        vn = v - a * dt;
    if (vn > v + a * dt)
        vn = v + a * dt;
    return e->u1 + vn * dt;
}

int drths_envelope_describe(const drths_envelope_violation_t *v, char *buf, size_t cap)
{
    const char *f = drths_envelope_field(v->bound);
    switch (v->bound) {
    case DRTHS_ENV_NOT_FINITE:
        return snprintf(buf, cap, "drive envelope: drive %g is not a number (not written)",
                        v->drive_m);
    case DRTHS_ENV_POSITION:
        if (fabs(v->drive_m) > v->limit)
            return snprintf(buf, cap,
                            "drive envelope: drive %.6g m exceeds %s %.6g m by %.3g mm (not "
                            "written)",
                            v->drive_m, f, v->limit, (fabs(v->drive_m) - v->limit) * 1e3);
        return snprintf(buf, cap,
                        "drive envelope: drive %.6g m moves too fast to stop inside %s %.6g m "
                        "(braking, it would reach %.6g m; not written)",
                        v->drive_m, f, v->limit, copysign(v->value, v->drive_m));
    case DRTHS_ENV_VELOCITY:
        return snprintf(buf, cap,
                        "drive envelope: drive velocity %.4g m/s exceeds %s %.6g m/s by %.3g m/s "
                        "(drive %.6g m not written)",
                        v->value, f, v->limit, v->value - v->limit, v->drive_m);
    case DRTHS_ENV_ACCELERATION:
        return snprintf(buf, cap,
                        "drive envelope: drive acceleration %.4g m/s^2 exceeds %s %.6g m/s^2 by "
                        "%.3g m/s^2 (drive %.6g m not written)",
                        v->value, f, v->limit, v->value - v->limit, v->drive_m);
    case DRTHS_ENV_OFFSET:
        return snprintf(buf, cap,
                        "drive envelope: drive %.6g m is %.4g mm from the command %.6g m, beyond "
                        "%s %.6g mm by %.3g mm (not written)",
                        v->drive_m, v->value * 1e3, v->command_m, f, v->limit * 1e3,
                        (v->value - v->limit) * 1e3);
    default:
        return snprintf(buf, cap, "drive envelope: no violation");
    }
}
