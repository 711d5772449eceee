/* The actuator site's commissioning check (`drths-physical --io-check`): the rig's I/O against
 * the experiment file, without a numerical site, before the first test with a real specimen.
 *
 * What it does, through the same drths_daq_t as a run (virtual specimen or comedi board):
 *  1. rest: reads both inputs with the outputs untouched: the reading at rest and its noise;
 *  2. hold: writes the displacement read at rest as the set-point (and the damper command 0),
 *     and checks that the actuator stays there: a set-point channel whose zero disagrees with
 *     the transducer's would move it, and the check stops before any ramp;
 *  3. two slow cycles about the rest position, +A, back, -A, back (each leg a half cosine of
 *     leg_s), the first with the damper command 0 and the second with `current` (skipped when
 *     0). Every tick is checked as a run's would be: a converter at its end, a reading that is
 *     not a number, the measured displacement more than `max_error_m` away from the set-point
 *     or the force beyond its limit stops the check at once in the safe state, where it is.
 *
 * From the cycles: the measured displacement is fitted to the set-point delayed by a whole
 * number of ticks (least squares, refined between ticks by a parabola), which gives the gain
 * (its sign: polarity), the offset and the I/O delay of command_out -> displacement_in; the
 * energy the measured force dissipates over each closed cycle (a damper only dissipates, so a
 * negative energy is a reversed load cell) with its noise bound, and the ratio of the energy at
 * `current` to that at 0 (the damper's driver answers); the measured force against the
 * experiment's damper model driven by the measured motion (a gross scale error).
 *
 * Ownership: the caller owns the daq (open, and closed after); drths_iocheck_run allocates its
 * sample arrays and frees them before it returns. Not for the RT path: it is a tool. */
#ifndef DRTHS_IOCHECK_H
#define DRTHS_IOCHECK_H

#include <stdio.h>

#include "common/config/config.h"
#include "common/platform/error.h"
#include "site-physical/daq.h"

typedef struct drths_iocheck_params {
    double rate_hz;
    double amplitude_m;   /* A: the cycles' amplitude, > 0 */
    double leg_s;         /* one leg (0 -> A, A -> 0, ...), > 0 */
    double rest_s;        /* the rest reading, > 0 */
    double current;       /* the damper command of the second cycle; 0 = one cycle only */
    double max_error_m;   /* |measured - set-point| beyond this stops the check */
    double limit_force_N; /* |force| beyond this stops the check */
    /* The experiment's damper model (the nominal one), to compare the force's size with. */
    drths_damper_params_t model;
    /* Called before each tick with its index, to keep the real-time pace (NULL: as fast as the
     * daq answers, which the virtual back end allows). A nonzero return stops the check (an
     * interrupt). */
    int (*pace)(void *ctx, long tick);
    void *pace_ctx;
} drths_iocheck_params_t;

/* What a line of the report says about a channel. */
typedef enum drths_iocheck_verdict {
    DRTHS_IOCHECK_OK = 0,
    DRTHS_IOCHECK_NOTE,     /* worth a look, not a reason to stop */
    DRTHS_IOCHECK_WARNING,  /* fix before a test with the real specimen */
    DRTHS_IOCHECK_REVERSED, /* a polarity is wrong */
    DRTHS_IOCHECK_FAILED    /* the check could not judge or had to stop */
} drths_iocheck_verdict_t;

typedef struct drths_iocheck_result {
    /* Rest. */
    double disp_rest_m, disp_noise_m, force_rest_N, force_noise_N;
    /* command_out -> displacement_in, over the cycles. */
    double gain, offset_m, delay_s, fit_rms_m;
    /* The force: energy dissipated per cycle (J) at command 0 and at `current`, the noise bound
     * of each, and the measured force's scale against the model's (least squares). */
    double energy_J[2], energy_noise_J[2];
    double force_vs_model;
    int cycles_done; /* 0, 1 or 2 */
    long ticks;      /* ticks run */
    drths_iocheck_verdict_t displacement, force, current, overall;
    /* Why the check stopped early, or "" when it ran to its end. */
    char stopped[640];
} drths_iocheck_result_t;

/* Defaults from the experiment: amplitude min(2 mm, a tenth of the displacement limit), legs of
 * 1 s, rest 0.5 s, the second cycle at half the damper's largest command, a stop at a fifth of
 * the displacement limit of error or at the force limit. init-only. */
void drths_iocheck_params_default(const drths_experiment_t *exp, drths_iocheck_params_t *p);

/* Runs the check on daq and fills *res. Returns 0 when the check ran (whatever it found: see
 * res->overall), or a negative errno when it could not (bad parameters, no memory, err says
 * which); a stop on a tick's reading is not an error: res->stopped says what stopped it. The
 * daq is left in its safe state at the last set-point. init-only. */
int drths_iocheck_run(drths_daq_t *daq, const drths_iocheck_params_t *p,
                      drths_iocheck_result_t *res, drths_error_t *err);

/* The report: one line per channel with its figures and verdict, then the overall verdict
 * with what to do. init-only. */
void drths_iocheck_print(FILE *f, const drths_iocheck_params_t *p,
                         const drths_iocheck_result_t *res);

/* "OK", "NOTE", "WARNING", "REVERSED", "FAILED". RT-safe. */
const char *drths_iocheck_verdict_name(drths_iocheck_verdict_t v);

#endif
