#include "site-physical/command_stream.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/lagrange.h"

/* ---- the kept commands ---------------------------------------------------------------------- */

/* The commands kept for the delayed playback, by tick (the latest DRTHS_ACT_LATE_MEMORY): tick
 * t's, or NULL when it is not kept. */
static const drths_cmd_channel_t *kept_at(const drths_cmdstream_t *cs, uint64_t t)
{
    size_t slot = t % DRTHS_ACT_LATE_MEMORY;
    return cs->late_tick[slot] == (int64_t)t ? &cs->late_s[slot] : NULL;
}

static void keep(drths_cmdstream_t *cs, uint64_t t, const drths_cmd_channel_t *c)
{
    cs->late_tick[t % DRTHS_ACT_LATE_MEMORY] = (int64_t)t;
    cs->late_s[t % DRTHS_ACT_LATE_MEMORY] = *c;
}

/* ---- concealment and rejoin ----------------------------------------------------------------- */

static void push_history(drths_cmdstream_t *cs, const drths_cmd_channel_t *s)
{
    cs->hist[0] = cs->hist[1];
    cs->hist[1] = cs->hist[2];
    cs->hist[2] = cs->hist[3];
    cs->hist[3] = *s;
}

/* The acceleration and jerk the concealment and the rejoin respect: the limits given (the
 * actuator gives the feedforward's, physical.feedforward_max_acceleration_m_s2 and _jerk_m_s3,
 * which bound what the desired trajectory may do anyway), or DRTHS_ACT_DEFAULT_MAX_ACC_M_S2 /
 * _JERK_M_S3 where they are 0 (no limit). */
static double max_acc(const drths_cmdstream_t *cs)
{
    return cs->p.max_acc_m_s2 > 0.0 ? cs->p.max_acc_m_s2 : DRTHS_ACT_DEFAULT_MAX_ACC_M_S2;
}

static double max_jerk(const drths_cmdstream_t *cs)
{
    return cs->p.max_jerk_m_s3 > 0.0 ? cs->p.max_jerk_m_s3 : DRTHS_ACT_DEFAULT_MAX_JERK_M_S3;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The velocity left, braking from velocity v with this tick's acceleration na, once the
 * acceleration has been taken back to 0 by at most jdt per tick (the tick in which it is below
 * jdt takes it to 0 and moves no more). In closed form: the k = ceil(|na| / jdt) - 1 ticks
 * that follow have accelerations |na| - jdt, |na| - 2 jdt, ..., an arithmetic series, so the
 * cost does not grow with |na| / jdt (a bisection calls this some 40 times a concealed tick). */
static double stop_velocity(double v, double na, double jdt, double dt)
{
    const double m = fabs(na);
    const double k = m > jdt ? ceil(m / jdt) - 1.0 : 0.0;
    const double dv = (k * m - jdt * k * (k + 1.0) / 2.0) * dt;
    return v + na * dt + (na > 0.0 ? dv : -dv);
}

/* The braking acceleration of a concealed tick: within jdt of the last one and within +/- d
 * (or moving towards that band at jdt per tick), the one that brings the velocity left
 * (stop_velocity) to 0, else the band's end nearest to it. So the command slows at d, takes its
 * acceleration back to 0 in time and rests exactly, never reversing; at rest it stays there. */
static double brake_acceleration(double v, double acc, double d, double jdt, double dt)
{
    double lo = acc - jdt, hi = acc + jdt;
    lo = lo < -d ? fmin(-d, hi) : lo;
    hi = hi > d ? fmax(d, lo) : hi;
    if (stop_velocity(v, lo, jdt, dt) >= 0.0)
        return lo;
    if (stop_velocity(v, hi, jdt, dt) <= 0.0)
        return hi;
    /* stop_velocity grows with na: bisection, to the resolution of a double. */
    for (int i = 0; i < 100 && hi - lo > 1e-12 * (fabs(lo) + fabs(hi) + 1e-12); i++) {
        const double mid = 0.5 * (lo + hi);
        if (stop_velocity(v, mid, jdt, dt) < 0.0)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* One tick ahead of the last applied commands, in terms of the discrete motion: the last step
 * s = x(n) - x(n-1) (velocity s / dt) and acceleration a = (x(n) - 2 x(n-1) + x(n-2)) / dt^2;
 * the tick's new acceleration a' gives the step s + a' dt^2, so (a' - a) / dt is the jerk.
 *
 * The first DRTHS_ACT_CONCEAL_EXTRAP_TICKS concealed ticks in a row extrapolate: a' is the
 * cubic's through the last four commands (third-order Lagrange extrapolation,
 * common/models/lagrange.h), which is exact for a smooth trajectory, kept within the jerk limit of
 * a and within the acceleration limit (right after a kink the cubic accelerates away: through c, c,
 * c, c - d it goes on c - 4d, ...). Later ones brake: a' moves towards the braking acceleration
 * -sign(v*) min(D, sqrt(2 J |v*|)) by at most J dt, where v* = v + a |a| / (2 J) is the velocity
 * left once a has been taken to 0 at the jerk J, D the braking deceleration
 * (DRTHS_ACT_CONCEAL_DECEL_M_S2, at most half the acceleration limit) and J half the jerk
 * limit. That is the time-optimal jerk-limited stop: the velocity falls to 0 together with the
 * acceleration without changing sign, and the command then rests (a 0.25 m/s motion stops in
 * about 26 ms and 3.2 mm; one at the 1 m/s velocity limit in 0.1 s and 5 cm). Close to rest, a
 * residual below one tick's jerk is taken out in one tick, so the command comes to rest
 * exactly. A concealed command therefore never runs away: after the few extrapolated ticks it
 * only decelerates. The damper command is held: a semi-active command switches between its
 * bounds, and a cubic through a switch leaves them. */
static void conceal_after(const drths_cmdstream_t *cs, const drths_cmd_channel_t *hist,
                          uint64_t concealed, drths_cmd_channel_t *out)
{
    out->damper_cmd = hist[3].damper_cmd;
    const double dt = 1.0 / cs->p.rate_hz, dt2 = dt * dt;
    const double A = max_acc(cs), J = max_jerk(cs);
    const double x3 = hist[3].disp_m, x2 = hist[2].disp_m, x1 = hist[1].disp_m;
    const double step = x3 - x2; /* m per tick */
    const double v = step / dt;
    const double acc = (x3 - 2.0 * x2 + x1) / dt2;
    double na;
    if (concealed < DRTHS_ACT_CONCEAL_EXTRAP_TICKS) {
        const double x[4] = {hist[0].disp_m, x1, x2, x3};
        na = (drths_lagrange3_next(x) - x3 - step) / dt2;
        na = clampd(na, acc - J * dt, acc + J * dt);
        na = clampd(na, -A, A);
    } else {
        const double d = fmin(DRTHS_ACT_CONCEAL_DECEL_M_S2, 0.5 * A);
        na = brake_acceleration(v, acc, d, 0.5 * J * dt, dt);
        /* At rest (to rounding) the command stays exactly where it is. */
        if (fabs(v) < 1e-12 && fabs(acc) < 1e-9)
            na = -v / dt;
    }
    const double nstep = step + na * dt2;
    /* Velocity and acceleration follow the displacement actually concealed (the received
     * samples' own fields are the numerical site's and may not agree with a kinked path). */
    out->disp_m = x3 + nstep;
    out->vel_m_s = nstep / dt;
    out->acc_m_s2 = na;
}

static void conceal(const drths_cmdstream_t *cs, drths_cmd_channel_t *out)
{
    conceal_after(cs, cs->hist, cs->consecutive_concealed, out);
}

/* The shapes of the rejoin blend's terms, as value (d = 0) or first derivative (d = 1) in x:
 * h0 = (1 - x)^3 (1 + 3x + 6x^2), from 1 at x = 0 to 0 at x = 1, its slope and curvature 0 at
 * both ends; g = the integral of h0 from 0, x - 5x^4/2 + 3x^5 - x^6, from 0 to 1/2 with slope
 * from 1 to 0 (monotonically) and curvature 0 at both ends; h2 = x^2 (1 - x)^3 / 2, 0 at both
 * ends with curvature 1 at x = 0. They extend to x < 0 as the same polynomials. */
static double rejoin_h(int j, int d, double x)
{
    const double y = 1.0 - x, y2 = y * y, y3 = y2 * y;
    switch (j * 2 + d) {
    case 0:
    case 3: /* h0, and g' = h0 */
        return y3 * (1.0 + x * (3.0 + 6.0 * x));
    case 1: /* h0' = -30 x^2 (1 - x)^2 */
        return -30.0 * x * x * y2;
    case 2: /* g */
        return x * (1.0 + x * x * x * (-2.5 + x * (3.0 - x)));
    case 4: /* h2 */
        return 0.5 * x * x * y3;
    default: /* h2' = x (1 - x)^2 (2 - 5x) / 2 */
        return 0.5 * x * y2 * (2.0 - 5.0 * x);
    }
}

/* The blend u ticks after the rejoin (d = 0), or its slope in m per tick (d = 1):
 *   e(u) = (e0 + w1 N1 / 2) h0(u / N0) + w1 N1 (g(u / N1) - 1/2) + w2 N2^2 h2(u / N2),
 * each shape taken at its end value (0, 1/2, 0) from its own length on. */
static double rejoin_eval(const drths_cmdstream_t *cs, double u, int d)
{
    const double n0 = (double)cs->rejoin_n[0], n1 = (double)cs->rejoin_n[1];
    const double n2 = (double)cs->rejoin_n[2];
    const double w0 = cs->rejoin_w[0] + 0.5 * cs->rejoin_w[1] * n1;
    double e = 0.0;
    if (u < n0)
        e += w0 * rejoin_h(0, d, u / n0) / (d ? n0 : 1.0);
    if (u < n1)
        e += cs->rejoin_w[1] * (d ? rejoin_h(1, 1, u / n1) : n1 * (rejoin_h(1, 0, u / n1) - 0.5));
    if (u < n2)
        e += cs->rejoin_w[2] * (d ? n2 * rejoin_h(2, 1, u / n2) : n2 * n2 * rejoin_h(2, 0, u / n2));
    return e;
}

/* The rejoin blend at tick t (0 outside it). */
static double rejoin_offset(const drths_cmdstream_t *cs, uint64_t t)
{
    if (t < cs->rejoin_tick || t >= cs->rejoin_tick + cs->rejoin_ticks)
        return 0.0;
    return rejoin_eval(cs, (double)(t - cs->rejoin_tick), 0);
}

/* Its slope, in m per tick. */
static double rejoin_slope(const drths_cmdstream_t *cs, uint64_t t)
{
    if (t < cs->rejoin_tick || t >= cs->rejoin_tick + cs->rejoin_ticks)
        return 0.0;
    return rejoin_eval(cs, (double)(t - cs->rejoin_tick), 1);
}

/* The shortest whole number of ticks (at least DRTHS_ACT_REJOIN_MIN_TICKS, at most one second)
 * no shorter than each of the durations given in seconds. */
static uint64_t rejoin_len(const drths_cmdstream_t *cs, double t1, double t2, double t3)
{
    const double s = fmax(t1, fmax(t2, t3)) * cs->p.rate_hz;
    const double n = fmin(fmax(ceil(s - 1e-9), DRTHS_ACT_REJOIN_MIN_TICKS), ceil(cs->p.rate_hz));
    return (uint64_t)fmax(n, DRTHS_ACT_REJOIN_MIN_TICKS);
}

/* A received command at `tick` after concealed ticks: the concealment has taken the actuator
 * where the commands are not, moving differently. Instead of stepping there, the commands are
 * offset by a blend e that starts where the concealment was going and vanishes, with its first
 * two derivatives, a bounded number of ticks later: command(t) = x(t) + e(t - tick), x the
 * received trajectory.
 *
 * Start: x is carried two ticks back by the cubic through x(tick .. tick + 3) from the playout
 * buffer when their third difference is within the jerk limit (with fewer samples ahead, a lower
 * order; with none, the sample's own velocity); across a kink (the fillers of a raise of L) by
 * the line through x(tick), x(tick + 1) and the smaller second difference, within the
 * acceleration limit; the
 * differences e(-2), e(-1) between the last two applied commands and that extension, and e(0)
 * between the concealment's next value and x(tick), give the blend's offset p, velocity v and
 * acceleration c at its start. The blend is the sum of three quintic terms, one per initial
 * value: p h0(u / N0) + v T1 h1(u / N1) + c T2^2 h2(u / N2), each vanishing with its slope and
 * curvature after its own length (u in ticks, T = N dt), their weights fitted so that the
 * blend passes exactly through e(-2), e(-1) and e(0). So the commands applied, this tick's and
 * the blended ones after it form one smooth sequence: no step in displacement, velocity or
 * acceleration.
 *
 * Lengths: each term is given the shortest length at which its share of the budgets holds,
 * from the largest of its derivatives (|h0'| 1.875, |h0''| 5.774, |h0'''| 60; |h1''| 3.940,
 * |h1'''| 36; |h2'| 0.0678, |h2'''| 9): the blend's velocity beyond |v| within the HOLD ramp
 * rate (the speed trusted for a move nobody commanded; 4/5 to the offset term, 1/5 to the
 * acceleration term), its acceleration beyond |c| within half the acceleration limit (half to
 * each of the offset and velocity terms), and its jerk within half the jerk limit (a third to
 * each term). The command's derivatives are the received trajectory's plus these. The offset
 * term is the long one (the velocity budget: 2 mm take 75 ms at 0.05 m/s), the two others
 * settle the initial velocity and acceleration in a few ms. The acceleration term must also be
 * short for its velocity share; where the jerk forbids that, the jerk wins. Every length is at
 * most one second. */
static void start_rejoin(drths_cmdstream_t *cs, uint64_t tick, const drths_cmd_channel_t *cmd,
                         const drths_cmd_channel_t ahead[3], size_t k, const double *behind)
{
    drths_cmd_channel_t next;
    conceal(cs, &next);
    const double dt = 1.0 / cs->p.rate_hz;
    const double r0 = cmd->disp_m;
    double rm1, rm2; /* the extension of x to tick - 1 and tick - 2 */
    if (behind) {
        /* Delayed playback: the two commands before this one arrived too; they are x there. */
        rm1 = behind[0];
        rm2 = behind[1];
    } else if (k >= 2) {
        const double r1 = ahead[0].disp_m, r2 = ahead[1].disp_m;
        const double J = max_jerk(cs), A = max_acc(cs);
        const double r3 = k >= 3 ? ahead[2].disp_m : 0.0;
        if (k >= 3 && fabs(r3 - 3.0 * r2 + 3.0 * r1 - r0) <= J * dt * dt * dt) {
            /* Within the jerk limit: the cubic, exact for a smooth trajectory. */
            rm1 = 4.0 * r0 - 6.0 * r1 + 4.0 * r2 - r3;
            rm2 = 10.0 * r0 - 20.0 * r1 + 15.0 * r2 - 4.0 * r3;
        } else {
            /* A kink among the samples ahead (a jump in velocity beyond the jerk limit: the
             * fillers of a raise of L hold the last position with velocity 0, and the
             * commands after them go on from it). Carried across it, the cubic (and even the
             * parabola) turns the kink into an acceleration of the received trajectory of
             * about v / dt that it does not have, which the blend would then match. So the
             * extension is the line through r0 and r1 with the smaller of the two second
             * differences (0 when they differ in sign), within the acceleration limit. */
            double s2 = r2 - 2.0 * r1 + r0;
            if (k >= 3) {
                const double s3 = r3 - 2.0 * r2 + r1;
                s2 = s2 * s3 <= 0.0 ? 0.0 : fabs(s2) < fabs(s3) ? s2 : s3;
            }
            s2 = clampd(s2, -A * dt * dt, A * dt * dt);
            rm1 = 2.0 * r0 - r1 + s2;
            rm2 = 3.0 * r0 - 2.0 * r1 + 3.0 * s2;
        }
    } else if (k == 1) {
        rm1 = 2.0 * r0 - ahead[0].disp_m;
        rm2 = 3.0 * r0 - 2.0 * ahead[0].disp_m;
    } else {
        const double v = isfinite(cmd->vel_m_s) ? cmd->vel_m_s : 0.0;
        rm1 = r0 - v * dt;
        rm2 = r0 - 2.0 * v * dt;
    }
    const double e0 = next.disp_m - r0;
    const double em1 = cs->hist[3].disp_m - rm1, em2 = cs->hist[2].disp_m - rm2;
    cs->c.rejoins++;
    if (fabs(e0) > cs->c.max_rejoin_offset_m)
        cs->c.max_rejoin_offset_m = fabs(e0);
    /* The start in SI units, from the quadratic through the three values. */
    const double v = (1.5 * e0 - 2.0 * em1 + 0.5 * em2) / dt;
    const double c = fabs(e0 - 2.0 * em1 + em2) / (dt * dt);
    const double vb = cs->p.ramp_rate_m_s, ab = 0.5 * max_acc(cs), jb = 0.5 * max_jerk(cs);
    cs->rejoin_n[1] =
        rejoin_len(cs, 1.875 * fabs(v) / (0.5 * ab), sqrt(5.7735 * fabs(v) / (jb / 3.0)), 0.0);
    cs->rejoin_n[2] = rejoin_len(cs, 9.0 * c / (jb / 3.0), 0.0, 0.0);
    /* Its velocity grows with its length (|h2'| 0.0678 c T2), so the length the jerk share asks
     * for a large c (9 c / (jb / 3), growing with c too) moves the command by about c^2 / jb at
     * 1.2 m/s for c = 100 m/s^2 (the concealment's acceleration limit against the commands').
     * Beyond its velocity share (1/5 of the ramp rate) the term is made shorter, down to the
     * length at which it takes the blend's whole jerk budget. */
    if (c > 0.0 && 0.0678 * c * (double)cs->rejoin_n[2] * dt > 0.2 * vb) {
        const uint64_t n_vel = (uint64_t)fmax(floor(0.2 * vb / (0.0678 * c) * cs->p.rate_hz), 0.0);
        const uint64_t n_jerk = rejoin_len(cs, 9.0 * c / jb, 0.0, 0.0);
        cs->rejoin_n[2] = n_vel > n_jerk ? n_vel : n_jerk;
    }
    /* The velocity term moves v T1 / 2 by its end: the offset term takes that back too. */
    const double p = fabs(e0 + 0.5 * v * (double)cs->rejoin_n[1] * dt);
    cs->rejoin_n[0] = rejoin_len(cs, 1.875 * p / (0.8 * vb), sqrt(5.7735 * p / (0.5 * ab)),
                                 cbrt(60.0 * p / (jb / 3.0)));
    cs->rejoin_ticks = cs->rejoin_n[0];
    for (int j = 1; j < 3; j++)
        if (cs->rejoin_n[j] > cs->rejoin_ticks)
            cs->rejoin_ticks = cs->rejoin_n[j];
    cs->rejoin_tick = tick;
    /* The weights: e(0) = e0 whatever w1 and w2; these from e(-1) and e(-2). */
    const double n0 = (double)cs->rejoin_n[0], n1 = (double)cs->rejoin_n[1];
    const double n2 = (double)cs->rejoin_n[2];
    double m[2][2], rhs[2];
    for (int i = 0; i < 2; i++) {
        const double u = -(double)(i + 1), h0 = rejoin_h(0, 0, u / n0);
        m[i][0] = n1 * (0.5 * h0 + rejoin_h(1, 0, u / n1) - 0.5);
        m[i][1] = n2 * n2 * rejoin_h(2, 0, u / n2);
        rhs[i] = (i ? em2 : em1) - e0 * h0;
    }
    const double det = m[0][0] * m[1][1] - m[0][1] * m[1][0];
    cs->rejoin_w[0] = e0;
    cs->rejoin_w[1] = (rhs[0] * m[1][1] - m[0][1] * rhs[1]) / det;
    cs->rejoin_w[2] = (m[0][0] * rhs[1] - rhs[0] * m[1][0]) / det;
}

/* The kept command at command time pos (ticks), interpolated linearly between the two around it;
 * false when one of them is not there. */
static bool late_at(const drths_cmdstream_t *cs, double pos, drths_cmd_channel_t *out)
{
    const uint64_t i0 = (uint64_t)floor(pos);
    const double frac = pos - (double)i0;
    const drths_cmd_channel_t *c0 = kept_at(cs, i0);
    if (!c0)
        return false;
    *out = *c0;
    if (frac > 0.0) {
        const drths_cmd_channel_t *c1 = kept_at(cs, i0 + 1);
        if (!c1)
            return false;
        out->disp_m += frac * (c1->disp_m - c0->disp_m);
        out->vel_m_s += frac * (c1->vel_m_s - c0->vel_m_s);
        out->acc_m_s2 += frac * (c1->acc_m_s2 - c0->acc_m_s2);
    }
    return true;
}

/* The kept commands at the k command times pos + rate, pos + 2 rate, ..., into out, stopping at
 * the first one missing; returns how many. The delayed playback's preview (from the command time
 * applied now at its rate), and, at rate 1 from a tick, the late commands after it (as
 * drths_playout_lookahead gives the received ones). */
static size_t late_preview(const drths_cmdstream_t *cs, double pos, double rate, size_t k,
                           drths_cmd_channel_t *out)
{
    size_t n = 0;
    while (n < k && late_at(cs, pos + rate * (double)(n + 1), &out[n]))
        n++;
    return n;
}

/* o->future filled up to the look-ahead by the concealment from the last four desired
 * displacements (past and future together), the first of them `concealed` ticks into a
 * concealed stretch. */
static void extend_preview(drths_cmdstream_t *cs, drths_cmdstream_out_t *o, uint64_t concealed)
{
    const int n = o->n_future;
    if (n >= cs->p.lookahead)
        return;
    cs->c.preview_extended++;
    drths_cmd_channel_t h[4];
    for (int i = 0; i < 4; i++) {
        const int j = n - 4 + i; /* index into future; negative: into past */
        h[i] = cs->hist[3];
        h[i].disp_m = j >= 0 ? o->future[j] : o->past[4 + j];
    }
    for (int i = n; i < cs->p.lookahead; i++) {
        drths_cmd_channel_t next;
        conceal_after(cs, h, concealed + (uint64_t)(i - n), &next);
        o->future[i] = next.disp_m;
        h[0] = h[1];
        h[1] = h[2];
        h[2] = h[3];
        h[3] = next;
    }
    o->n_future = cs->p.lookahead;
}

/* The preview: the desired displacements of the ticks after `tick` (at most lookahead), into
 * o->future: 0 for rest ticks (<= L), then the commands the playback will reach, with the rejoin
 * offset, up to the first missing one, and after it the concealment's continuation
 * (extend_preview): always `lookahead` of them. (The actuator checks them against the
 * displacement limit: a command beyond it must not reach the drive even through the
 * preview.) */
static void preview(drths_cmdstream_t *cs, const drths_playout_t *pb, uint64_t tick, uint64_t L,
                    drths_cmdstream_out_t *o)
{
    int n = 0;
    while (n < cs->p.lookahead && tick + (uint64_t)n + 1 <= L)
        o->future[n++] = 0.0;
    o->n_future = n;
    if (n == cs->p.lookahead)
        return;
    uint64_t from = tick + (uint64_t)n; /* lookahead reads from + 1 .. */
    /* In delayed playback the ticks ahead play the kept commands at the command times the
     * playback will reach, play_rate apart: a preview at whole command ticks while the
     * playback runs between them would put the current command up to a tick out of step with
     * the preview, a jerk the feedforward answers at its limit. */
    drths_cmd_channel_t *fs = cs->future_s;
    size_t k;
    if (!cs->delayed)
        k = drths_playout_lookahead(pb, from, (size_t)(cs->p.lookahead - n), fs);
    else if (cs->consecutive_concealed)
        k = 0; /* a guess while the late commands pause: none of them continues it */
    else
        k = late_preview(cs, cs->play_pos, cs->play_rate, (size_t)(cs->p.lookahead - n), fs);
    for (size_t i = 0; i < k; i++)
        o->future[n + (int)i] = fs[i].disp_m + rejoin_offset(cs, from + 1 + i);
    o->n_future = n + (int)k;
    /* The ticks after the last command there: what the concealment will play if no more come
     * (a concealed tick's own continuation, its count going on). So the compensation always
     * sees the whole look-ahead, and its estimate does not jump where the preview runs out or
     * comes back: the trajectory it fits is the one that will be played, concealed or not. */
    extend_preview(cs, o, k == 0 && n == 0 ? cs->consecutive_concealed : 0);
}

/* ---- the tick ------------------------------------------------------------------------------ */

/* One tick as the helpers below see it. */
typedef struct step {
    drths_playout_t *pb;
    uint64_t tick;
    bool dry; /* the playout buffer holds nothing for this tick or a later one */
    drths_cmdstream_out_t *o;
} step_t;

/* A received command for tick `base` applied at this tick (base == tick in time, base < tick in
 * delayed playback): ends a concealed stretch or a switch between the late and the timely
 * commands with a rejoin, and is shifted by the rejoin offset. */
static void apply_command(drths_cmdstream_t *cs, step_t *s, uint64_t base, bool flowing)
{
    drths_cmdstream_out_t *o = s->o;
    o->cmd_tick = (int64_t)base;
    if (cs->consecutive_concealed || (base != cs->last_base + 1 && !flowing)) {
        drths_cmd_channel_t ahead[3];
        const size_t k = base == s->tick ? drths_playout_lookahead(s->pb, base, 3, ahead)
                                         : late_preview(cs, (double)base, 1.0, 3, ahead);
        /* The two late commands before a late one, when they are there and the trajectory has
         * no kink through them (the fillers of a raise of L start with one, which the
         * extension in start_rejoin handles), are the trajectory behind it exactly. */
        double behind[2];
        bool have_behind = false;
        if (base != s->tick && base >= 2) {
            const drths_cmd_channel_t *c1 = kept_at(cs, base - 1), *c2 = kept_at(cs, base - 2);
            if (c1 && c2) {
                behind[0] = c1->disp_m;
                behind[1] = c2->disp_m;
                const double dt = 1.0 / cs->p.rate_hz;
                have_behind =
                    fabs(o->cmd.disp_m - 2.0 * behind[0] + behind[1]) <= max_acc(cs) * dt * dt;
            }
        }
        start_rejoin(cs, s->tick, &o->cmd, ahead, k, have_behind ? behind : NULL);
    }
    o->cmd.disp_m += rejoin_offset(cs, s->tick);
    o->cmd.vel_m_s += rejoin_slope(cs, s->tick) * cs->p.rate_hz;
    cs->consecutive_concealed = 0;
    cs->last_base = base;
    cs->delayed = base != s->tick;
}

/* A command received in time for this tick: its own COMMAND's, a redundant copy's, or either
 * shifted by a running rejoin blend. */
static void apply_received(drths_cmdstream_t *cs, step_t *s, int64_t lead_ns)
{
    apply_command(cs, s, s->tick, false);
    cs->play_rate = 1.0;
    cs->c.applied++;
    s->o->lead_ns = lead_ns;
    const size_t slot = s->tick % cs->p.playout_ticks;
    if (s->tick >= cs->rejoin_tick && s->tick < cs->rejoin_tick + cs->rejoin_ticks)
        s->o->source = DRTHS_CMD_SRC_REJOIN;
    else if (cs->redundant_tick[slot] == (int64_t)s->tick)
        s->o->source = DRTHS_CMD_SRC_REDUNDANT;
    else
        s->o->source = DRTHS_CMD_SRC_TIMELY;
}

/* Whether the commands after base are there for the next `need` ticks: kept (late, or timely
 * while playing behind), or in the playout buffer for the ticks after `tick`. */
static bool commands_ahead(const drths_cmdstream_t *cs, const drths_playout_t *pb, uint64_t base,
                           uint64_t need, uint64_t tick)
{
    for (uint64_t t = base + 1; t <= base + need; t++)
        if (!kept_at(cs, t) && !(t > tick && drths_playout_has(pb, t)))
            return false;
    return true;
}

/* Delayed playback. This tick's command has not arrived, or the actuator is already playing
 * commands behind their ticks: when, with nothing buffered for this tick or a later one (the
 * commands are late or the link is silent; not a loss within a stream arriving in time) or
 * already playing them (a tick concealed in between included), the command after the last one
 * applied has arrived late, the trajectory is played from there, behind its ticks, instead of
 * guessed. The specimen then follows the numerical site's trajectory itself, late, rather than
 * an extrapolation braking to rest.
 *
 * While playing behind, the timely commands are kept with the late ones (drths_cmdstream_tick),
 * and the playback catches up by time-scale modification, as adaptive playout does for speech
 * (Liang, Faerber & Girod 2003): the command time advances by a rate that moves between 1 and
 * 1 + 1/DRTHS_ACT_CATCHUP_EVERY by at most DRTHS_ACT_CATCHUP_SLEW_PER_S * dt a tick, the
 * command interpolated linearly between the two commands around it; faster while the commands
 * of the next DRTHS_ACT_CATCHUP_AHEAD_MS are there and the lag left exceeds what slowing back
 * down to 1 takes. So the specimen runs at most 5 % faster, its acceleration changes by at most
 * v * slew per tick, and once less than a tick behind the timely commands take over through a
 * rejoin of a fraction of a tick's motion. A rejoin between two lags (the offset v * lag, a
 * mm or more in strong motion) would move the specimen at up to the ramp rate where the
 * commands do not, which a velocity-dependent specimen answers with a force error of that
 * velocity times its damping.
 *
 * The command played is the one nearest to the command time (cmd_tick), LATE: the tick's own
 * command was not there (the FEEDBACK flags it CONCEALED). Only within the budget: a command
 * more than max_concealed_ticks behind its tick is not played (conceal_missing then gives up).
 * Returns true when it applied one. */
static bool play_late(drths_cmdstream_t *cs, step_t *s)
{
    if (!s->dry && !cs->delayed)
        return false;
    const uint64_t tick = s->tick;
    const bool flowing = cs->delayed && !cs->consecutive_concealed;
    double pos;
    if (flowing) {
        /* The rate, towards its target. */
        const double fast = 1.0 + 1.0 / DRTHS_ACT_CATCHUP_EVERY; /* a constant */
        const double slew = cs->catchup_slew;
        const uint64_t ahead = cs->catchup_ahead_ticks;
        const double lag = (double)tick - (cs->play_pos + cs->play_rate);
        const double down = (cs->play_rate - 1.0) * (cs->play_rate - 1.0) / (2.0 * slew) + 1.0;
        const double target =
            lag > down && commands_ahead(cs, s->pb, (uint64_t)cs->play_pos, ahead + 2, tick) ? fast
                                                                                             : 1.0;
        cs->play_rate += clampd(target - cs->play_rate, -slew, slew);
        pos = cs->play_pos + cs->play_rate;
        if (pos > (double)tick - 1.0) {
            /* Less than a tick behind: the timely command, through a small rejoin (apply_command
             * starts one: the tick is not the one after the last command applied). */
            return false;
        }
    } else {
        /* The next command, or, after ticks concealed in between, one of the next that many:
         * each concealed tick stands for one missing command, as in a stream arriving in time,
         * so a command lost for good (all its copies) does not stop the playback. The oldest
         * there is taken, at the normal rate. */
        uint64_t base = cs->last_base + 1;
        const uint64_t last = base + cs->consecutive_concealed;
        while (base <= last && !kept_at(cs, base))
            base++;
        if (base > last)
            return false;
        pos = (double)base;
        cs->play_rate = 1.0;
    }
    const uint64_t i0 = (uint64_t)floor(pos);
    drths_cmd_channel_t c;
    if (i0 >= tick || tick - i0 > (uint64_t)cs->p.max_concealed_ticks || !late_at(cs, pos, &c))
        return false;
    s->o->cmd = c;
    s->o->cmd.vel_m_s *= cs->play_rate;
    cs->play_pos = pos;
    apply_command(cs, s, i0, flowing);
    s->o->cmd_tick = (int64_t)floor(pos + 0.5);
    s->o->source = DRTHS_CMD_SRC_LATE;
    cs->c.delayed++;
    if (tick - i0 > cs->c.max_lag_ticks)
        cs->c.max_lag_ticks = tick - i0;
    if (cs->play_rate > 1.0)
        cs->c.catchup_ticks++;
    return true;
}

/* A missing command: concealed, unless the newest command applied (received, in time or late)
 * is for a tick more than max_concealed_ticks before this one (the horizon of the guess), which
 * is OVERDUE, a HOLD (returns true with its cause in hold_cause). Without late commands that
 * is more than max_concealed_ticks concealed in a row. */
static bool conceal_missing(drths_cmdstream_t *cs, step_t *s)
{
    drths_cmdstream_out_t *o = s->o;
    const uint64_t horizon = s->tick - cs->last_base;
    if (horizon > (uint64_t)cs->p.max_concealed_ticks) {
        drths_hold_cause_init(&o->hold_cause, DRTHS_HOLD_CONCEALMENT);
        o->hold_cause.tick = s->tick;
        o->hold_cause.sub = horizon == cs->consecutive_concealed + 1 ? 0 : 1;
        o->hold_cause.n[0] = (int64_t)horizon;
        o->hold_cause.n[1] = cs->p.max_concealed_ticks;
        o->source = DRTHS_CMD_SRC_OVERDUE;
        return true;
    }
    /* cs->delayed stays: the late commands go on after the ticks concealed in between. */
    conceal(cs, &o->cmd);
    o->source = DRTHS_CMD_SRC_CONCEALED;
    o->cmd_tick = (int64_t)s->tick;
    cs->consecutive_concealed++;
    cs->c.concealed++;
    if (cs->consecutive_concealed > cs->c.max_consecutive_concealed)
        cs->c.max_consecutive_concealed = cs->consecutive_concealed;
    cs->concealed_tick[s->tick % DRTHS_ACT_LATE_MEMORY] = (int64_t)s->tick;
    return false;
}

/* The command of a tick t > L outside HOLD: the take, then the received command, a late one or
 * a concealed one. Returns false when it is OVERDUE. */
static bool choose(drths_cmdstream_t *cs, step_t *s, int64_t deadline_ns)
{
    drths_cmdstream_out_t *o = s->o;
    uint64_t newest;
    s->dry = !(drths_playout_newest(s->pb, &newest) == 0 && newest >= s->tick);
    int64_t lead_ns = 0;
    const int rc = drths_playout_take(s->pb, s->tick, deadline_ns, &o->cmd, &lead_ns);
    if (rc == 0 && cs->delayed) {
        /* Kept for the delayed playback, which reaches it later (or now, having caught up). */
        keep(cs, s->tick, &o->cmd);
    }
    if (rc == 0 && !cs->delayed) {
        apply_received(cs, s, lead_ns);
    } else if (play_late(cs, s)) {
        /* Catching up: the tick's own command was there in time; played behind it, but not a
         * late one (the FEEDBACK's flag feeds the late rate of the delay estimator). */
        if (rc == 0)
            o->source = DRTHS_CMD_SRC_CATCHUP;
    } else {
        /* Caught up (the tick's own command is the next one), or no late command to go on
         * with: the timely command, through a rejoin. */
        if (rc == 0)
            apply_received(cs, s, lead_ns);
        else if (conceal_missing(cs, s))
            return false;
    }
    return true;
}

void drths_cmdstream_tick(drths_cmdstream_t *cs, drths_playout_t *pb, uint64_t tick,
                          int64_t deadline_ns, uint64_t L, int hold, drths_cmdstream_out_t *o)
{
    o->source = DRTHS_CMD_SRC_REST;
    o->cmd = (drths_cmd_channel_t){0.0, 0.0, 0.0, cs->p.rest_damper_command};
    o->cmd_tick = -1;
    o->lead_ns = 0;
    o->n_future = 0;
    o->hold_cause.kind = DRTHS_HOLD_NONE;
    if (hold) {
        /* The play head keeps up, so that a copy arriving later is counted late. */
        drths_cmd_channel_t taken;
        (void)drths_playout_take(pb, tick, deadline_ns, &taken, NULL);
        o->source = DRTHS_CMD_SRC_NONE;
        return;
    }
    step_t s = {.pb = pb, .tick = tick, .o = o};
    if (tick > L && !choose(cs, &s, deadline_ns))
        return;
    push_history(cs, &o->cmd);
    for (int i = 0; i < 4; i++)
        o->past[i] = cs->hist[i].disp_m;
    preview(cs, pb, tick, L, o);
}

/* ---- reception and set-up ------------------------------------------------------------------- */

drths_playout_result_t drths_cmdstream_put(drths_cmdstream_t *cs, drths_playout_t *pb,
                                           uint64_t tick, int redundant,
                                           const drths_cmd_channel_t *sample, int64_t arrival_ns)
{
    const drths_playout_result_t r = drths_playout_put(pb, tick, sample, arrival_ns);
    if (r == DRTHS_PLAYOUT_STORED) {
        cs->redundant_tick[tick % cs->p.playout_ticks] = redundant ? (int64_t)tick : -1;
    } else if (r == DRTHS_PLAYOUT_LATE) {
        /* Copies of ticks that were played from a received sample are redundancy; a copy of a
         * tick that had to be concealed is a late command, counted once, and kept for the
         * delayed playback (play_late). */
        int64_t *slot = &cs->concealed_tick[tick % DRTHS_ACT_LATE_MEMORY];
        if (*slot == (int64_t)tick) {
            cs->c.late++;
            *slot = -1;
        }
        if (!kept_at(cs, tick))
            keep(cs, tick, sample);
    }
    return r;
}

void drths_cmdstream_start(drths_cmdstream_t *cs, drths_playout_t *pb, uint64_t L)
{
    cs->last_base = L;
    /* The first COMMAND (tick L + 1) is sent with EPOCH 1, before tick 0 has run: with the play
     * head at L + 1 it fits even when L exceeds the buffer. Taking tick L moves the head there
     * and keeps anything already stored for later ticks. */
    if (drths_playout_head(pb) <= L)
        (void)drths_playout_take(pb, L, 0, &(drths_cmd_channel_t){0}, NULL);
}

int drths_cmdstream_init(drths_cmdstream_t *cs, const drths_cmdstream_params_t *p,
                         drths_error_t *err)
{
    memset(cs, 0, sizeof *cs);
    if (!(p->rate_hz > 0.0) || p->playout_ticks < 1 || p->max_concealed_ticks < 0 ||
        p->lookahead < 0 || p->lookahead > DRTHS_ACT_MAX_LOOKAHEAD)
        return drths_error_set(err, -EINVAL,
                               "command stream: rate > 0, playout > 0, budget >= 0 and "
                               "lookahead 0..%d",
                               DRTHS_ACT_MAX_LOOKAHEAD);
    cs->p = *p;
    /* The delayed playback's catch-up (play_late), from the rate alone. */
    cs->catchup_slew = DRTHS_ACT_CATCHUP_SLEW_PER_S / p->rate_hz;
    cs->catchup_ahead_ticks = (uint64_t)ceil(DRTHS_ACT_CATCHUP_AHEAD_MS * 1e-3 * p->rate_hz - 1e-9);
    for (size_t i = 0; i < DRTHS_ACT_LATE_MEMORY; i++)
        cs->concealed_tick[i] = -1;
    drths_cmd_channel_t rest = {0.0, 0.0, 0.0, p->rest_damper_command};
    for (int i = 0; i < 4; i++)
        cs->hist[i] = rest;
    cs->late_s = calloc(DRTHS_ACT_LATE_MEMORY, sizeof *cs->late_s);
    cs->late_tick = malloc(DRTHS_ACT_LATE_MEMORY * sizeof *cs->late_tick);
    cs->redundant_tick = malloc(p->playout_ticks * sizeof *cs->redundant_tick);
    if (!cs->late_s || !cs->late_tick || !cs->redundant_tick) {
        drths_cmdstream_close(cs);
        return drths_error_set(err, -ENOMEM,
                               "command stream: no memory for %d late commands and %zu "
                               "redundant-sample tags",
                               DRTHS_ACT_LATE_MEMORY, p->playout_ticks);
    }
    for (size_t i = 0; i < DRTHS_ACT_LATE_MEMORY; i++)
        cs->late_tick[i] = -1;
    for (size_t i = 0; i < p->playout_ticks; i++)
        cs->redundant_tick[i] = -1;
    return 0;
}

void drths_cmdstream_close(drths_cmdstream_t *cs)
{
    free(cs->late_s);
    free(cs->late_tick);
    free(cs->redundant_tick);
    cs->late_s = NULL;
    cs->late_tick = NULL;
    cs->redundant_tick = NULL;
}
