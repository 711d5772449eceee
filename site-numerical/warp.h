/* Time warps of the command stream at an epoch change (docs/design.md, "Epochs: raise and
 * glide"). The actuator site plays at tick T the command the numerical site computed for it;
 * away from epoch changes that is step s(T) = T - L. A change of L by n ticks moves the step
 * position of the ticks after the change: s(T) = T - L - D(T - t0), where the warp D goes from 0
 * to n (a raise: n > 0, the specimen slows down and falls n ticks behind; a glide: n < 0, it
 * runs faster and gains -n ticks). The command of a tick at a fractional step position is the
 * trajectory there, interpolated between the two computed steps around it (drths_warp_hermite),
 * so the commanded displacement is x(s(T)) and its acceleration
 *     d²x/dt² = a(s) s'² + v(s) s''/dt     (s' per tick, s'' per tick²)
 * has, besides the trajectory's own acceleration scaled by s'², a term v times the warp's
 * "time acceleration" s''/dt (1/s), which the plan bounds.
 *
 * The rate D'(tau) rises from 0 to rho along a quintic smoothstep h(u) = 10u³ - 15u⁴ + 6u⁵ over
 * m ticks, stays at rho for p ticks and comes back to 0 over m ticks, so D, D' and D'' are
 * continuous (D'' is 0 at both ends): position, velocity and acceleration of the command stay
 * continuous. |n| = rho (m + p), and the largest |D''| is 1.875 rho / m.
 *
 * Pure functions, no state beyond the caller's drths_warp_t. RT-safe.
 */
#ifndef DRTHS_WARP_H
#define DRTHS_WARP_H

typedef struct drths_warp {
    double t0;  /* the tick at which D starts (D = 0 there and before) */
    double n;   /* ticks of loop delay added (> 0) or removed (< 0) */
    double rho; /* largest |D'|, ticks per tick */
    double m;   /* length of each ramp of D', ticks */
    double p;   /* length of the plateau of D' at rho, ticks */
} drths_warp_t;

/* Plans the shortest warp of n ticks from t0 with |D'| <= rho_max and |D''| <= curv_max (per
 * tick²): a bell of D' (p = 0) whose peak stays below rho_max, else ramps at curv_max to
 * rho_max with a plateau between. n = 0 gives a warp of length 0. RT-safe. */
void drths_warp_plan(drths_warp_t *w, double t0, double n, double rho_max, double curv_max);

/* The first tick from which D = n (t0 + 2m + p). RT-safe. */
double drths_warp_end(const drths_warp_t *w);

/* D at tick t (0 before t0, n from the end on); *rate = D'(t) if rate is not NULL. RT-safe. */
double drths_warp_delay(const drths_warp_t *w, double t, double *rate);

/* The cubic Hermite interpolant between two steps h seconds apart (x0, v0 and x1, v1) at the
 * fraction f of the way (0..1); *vel is its velocity (m/s) if vel is not NULL. RT-safe. */
double drths_warp_hermite(double x0, double v0, double x1, double v1, double h, double f,
                          double *vel);

#endif
