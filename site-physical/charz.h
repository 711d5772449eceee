/* The damper's characterization at the actuator site (`drths-physical --characterize`): a
 * standard test protocol run on the actuator site alone, without a numerical site, through the
 * same compensation, drths_daq_t and drive envelope as a test (virtual specimen or comedi
 * board), recorded for the identification of the damper model (common/models/damperfit.h).
 * The compensation gets the protocol's set-points as a test's commands, with the preview it
 * asks for (the walk runs that many ticks ahead of the DAQ), so the specimen moves at the
 * planned amplitudes rather than behind them by the actuator's lag; the record keeps the
 * set-point, the drive written and the measurement.
 *
 * The protocol, for each damper command of a grid (from 0 to the damper's largest): a settling
 * time at rest with that command (its dynamics settle), then sinusoids over a grid of
 * amplitudes x frequencies, each `cycles` steady cycles between one cycle of half-cosine ramp
 * of the amplitude in and one out (the drive's velocity and acceleration start and end at 0);
 * then a band-limited random segment (a sum of sines of random phases over `random_band_hz`,
 * scaled to `random_rms_m`, tapered in and out over one second) while the command steps through
 * the grid once a second. drths_charz_plan walks the whole protocol before anything moves:
 * its largest set-point, velocity and acceleration, which must lie within the experiment's
 * limits and the drive envelope, and its duration.
 *
 * The force guard (drths_charz_params_t.guard_force_N) leaves out the tests a damper stronger
 * than its model would take past the force limit.
 *
 * Each tick is checked as the commissioning check's (site-physical/iocheck.h): a converter at
 * its end, a reading that is not a number, the measured displacement more than max_error_m away
 * from the set-point or the force beyond limit_force_N stops the protocol at once, the actuator
 * held where it is (the record up to there is kept).
 *
 * Ownership: the caller owns the daq (open with its envelope set, and closed after) and the
 * record, whose arrays drths_charz_run allocates and drths_charz_record_free frees (safe twice).
 * Not for the RT path: a tool, paced by the caller's callback.
 */
#ifndef DRTHS_CHARZ_H
#define DRTHS_CHARZ_H

#include <stdint.h>

#include "common/config/config.h"
#include "common/models/compensation.h"
#include "common/models/damperfit.h"
#include "common/platform/error.h"
#include "site-physical/daq.h"

#define DRTHS_CHARZ_MAX_GRID 8
#define DRTHS_CHARZ_MAX_PREVIEW 128 /* ticks of the compensation's preview, at most */

typedef struct drths_charz_params {
    double rate_hz;
    int n_amp, n_freq, n_cmd;
    double amp_m[DRTHS_CHARZ_MAX_GRID], freq_hz[DRTHS_CHARZ_MAX_GRID];
    double cmd[DRTHS_CHARZ_MAX_GRID]; /* A (or V) */
    int cycles;                       /* steady cycles of each sinusoid, >= 1 */
    double settle_s;                  /* at rest with each new command */
    double random_s;                  /* the random segment (0: none) */
    double random_band_hz[2];
    double random_rms_m;
    uint64_t seed;
    double max_error_m, limit_force_N;
    /* The force guard: before each sinusoid its peak force is predicted from the last test
     * run (its measured peak times the ratio of the nominal model's peaks along the two
     * tests); a test predicted above guard_force_N is skipped, with every larger one at its
     * command and every higher command, and the random segment keeps to the commands that
     * ran. A sinusoid whose measured force passes guard_force_N all the same is wound down
     * (its amplitude to 0 over half a period, from the tick the walk has reached: with a
     * compensation the preview's ticks already planned, 6.4 ms at 5 kHz, run first) and
     * counts as the last of its command. A
     * damper unlike its model then meets the protocol's limits by leaving tests out, not by
     * stopping at physical.limit_force_N. */
    double guard_force_N;
    drths_damper_params_t model; /* the nominal damper, for the prediction */
    /* The actuator's compensation (drths_actuator_comp_init), the caller's: each set-point
     * goes through it with its next drths_comp_lookahead_needed set-points as its preview, as
     * a test's commands do, and the adaptive mode learns from every tick. NULL: the set-point
     * is the drive. */
    drths_comp_t *comp;
    int (*pace)(void *ctx, long tick); /* as in iocheck.h; NULL: unpaced */
    void *pace_ctx;
} drths_charz_params_t;

/* One test of the protocol: a sinusoid (freq_hz > 0) or the random segment (freq_hz 0). */
typedef struct drths_charz_test {
    double amp_m, freq_hz, cmd;
    int skipped;        /* left out by the force guard */
    int wound_down;     /* ended early by the force guard */
    double peak_N;      /* the largest |measured force| over the test */
    double predicted_N; /* the guard's prediction before it (0: none) */
} drths_charz_test_t;

typedef struct drths_charz_record {
    long n, cap;
    double *set_m, *drive_m, *disp_m, *force_N, *cmd; /* per tick: planned, written, read */
    int *test; /* per tick: the test's index, -1 between tests */
    int n_tests;
    drths_charz_test_t tests[DRTHS_DAMPERFIT_MAX_TESTS];
    char stopped[640]; /* why the protocol stopped early, "" when it ran to its end */
} drths_charz_record_t;

/* The standard protocol from the experiment (short: a shorter grid, for rehearsals and tests):
 * amplitudes 3 and 8 mm (at most a fifth of physical.limit_displacement_m), 0.5 and 1 Hz
 * (short: 1 Hz), commands 0, 4, 10, 20, 40 and 100 % of the damper's largest, 2 steady cycles
 * (short: 1), 1.5 s settling, 30 s of random motion over 0.2-5 Hz at 2 mm RMS (short: 5 s), the
 * force guard at 0.8 physical.limit_force_N.
 * init-only. */
void drths_charz_params_default(const drths_experiment_t *exp, int short_protocol,
                                drths_charz_params_t *p);

/* Walks the protocol without moving anything: *duration_s, and checks its largest |set-point|,
 * velocity and acceleration (by differences of the ticks' set-points) against
 * physical.limit_displacement_m, limit_velocity_m_s, limit_drive_m, limit_drive_velocity_m_s and
 * limit_drive_acceleration_m_s2, and the commands against the damper's range. -EINVAL with err
 * naming the limit and the protocol's value when one is exceeded. init-only. */
int drths_charz_plan(const drths_experiment_t *exp, const drths_charz_params_t *p,
                     double *duration_s, drths_error_t *err);

/* Runs the protocol on daq, recording every tick into *rec. Returns 0 when the protocol ran or
 * stopped on a tick's check (rec->stopped says why), a negative errno when it could not run (no
 * memory, bad parameters). init-only. */
int drths_charz_run(drths_daq_t *daq, const drths_charz_params_t *p, drths_charz_record_t *rec,
                    drths_error_t *err);

/* The record as the fit's data: every `decimate`-th tick, the displacement and velocity as the
 * set-point's (the planned walk, differentiated by a central difference: no noise) plus the
 * tracking error's, the tracking error smoothed and differentiated by a local quadratic
 * (Savitzky-Golay) over +/- half_window ticks; the command as its mean over the ticks the fit's
 * step holds it; the force as recorded. Why (measured on the virtual specimen, abc-x3's damper,
 * 1 um of displacement noise): the hysteresis shape (gamma, beta) follows the velocity so
 * closely that smoothing the whole displacement over +/- 5 ms, whose 0.1-0.2 % attenuation of
 * the random segment's velocity (up to 5 Hz) is all it changes there, moved beta_b by 6.5 %;
 * over +/- 1-2 ms the sensor noise in the velocity moved gamma, beta by 3-13 % (noise in the
 * model's input is not averaged out by least squares). The tracking error is a small part of
 * the motion (0.05 % RMS with the compensation), so smoothing it long costs nothing measurable
 * and removes that noise. The mean command: the random segment changes current while moving,
 * and a command sampled every 5th tick moved each change by up to 0.8 ms (50 N of force error
 * there, beta_a 1.2 % off). With all three the fit's force error is the load cell's noise.
 * The arrays (n of each, allocated here) go to *x, *v, *cmd, *force, *test; the caller frees
 * them with free(). Returns 0 or -ENOMEM. init-only. */
int drths_charz_fit_data(const drths_charz_record_t *rec, int decimate, int half_window,
                         double rate_hz, drths_damperfit_data_t *data, double **x, double **v,
                         double **cmd, double **force, int **test);

void drths_charz_record_free(drths_charz_record_t *rec);

#endif
