/* Virtual specimen for rehearsals: what the actuator site's `virtual` DAQ
 * back end sees in place of a lab. Per tick:
 *
 *   1. I/O delay: the drive signal (and the damper command, which leaves through the same
 *      analog-output card) reaches the hardware io_delay_ticks ticks after it is written.
 *      The plant step that produces the reading of tick t integrates over [t-1, t] the drive
 *      that arrived at tick t. So with io_delay_ticks = 1 the drive written at tick t is held
 *      over [t, t+1] and first seen in the reading of tick t+1, as with a real DAC/ADC pair
 *      (on average half a tick of latency besides the plant's own lag); with 0 the drive of
 *      tick t already acts over [t-1, t], which no real loop can do.
 *   2. Actuator: either ideal (the damper sees the drive displacement and the commanded
 *      velocity) or the 3-pole servo-hydraulic plant (common/models/plant.h), whose coefficients follow
 *      the damper's effective current, interpolated between the 0 A and 2.5 A models. For the
 *      voltage-driven damper the plant follows command_eff / command_max on the same scale.
 *   3. Damper (common/models/damper.h) driven by the actuator's displacement and velocity.
 *   4. Sensors: zero-mean Gaussian noise of the given standard deviation, then quantisation to
 *      the ADC step 2 range / 2^bits with saturation at the ends of +/- range. A reading at
 *      either end code is a saturated converter: its value says only "at least this much", so
 *      drths_specimen_step reports it (-ERANGE) as the comedi back end does.
 *
 * Noise comes from a private xoshiro256** generator seeded with splitmix64(seed), with
 * Box-Muller normals: reproducible for a given seed, no allocation, no locks.
 *
 * Ownership: the caller owns drths_specimen_t; init allocates the delay line, which
 * drths_specimen_close frees (safe twice). A failed init leaves nothing to free.
 */
#ifndef DRTHS_SPECIMEN_H
#define DRTHS_SPECIMEN_H

#include <stdint.h>

#include "common/models/damper.h"
#include "common/models/plant.h"
#include "common/platform/error.h"

typedef struct {
    drths_damper_params_t damper;
    int plant_enabled;      /* 0 = ideal actuator */
    /* How the virtual actuator differs from the identified models the compensator is designed
     * on (common/models/plant.h, drths_plant_model_scale): applied to both the 0 A and the 2.5 A
     * model. All 1 (the default) is a plant exactly equal to the models, which no lab has. */
    drths_plant_scale_t plant_scale;
    double noise_disp_m;    /* standard deviation of the displacement sensor noise; 0 = none */
    double noise_force_N;   /* standard deviation of the load-cell noise; 0 = none */
    int adc_bits;           /* 0 = no quantisation; else 1 to 32 */
    double disp_range_m;    /* ADC input range +/- disp_range_m (needed when adc_bits > 0) */
    double force_range_N;   /* ADC input range +/- force_range_N */
    int io_delay_ticks;     /* >= 0 */
    uint64_t seed;
} drths_specimen_params_t;

typedef struct {
    double disp_m, force_N;                     /* measured: noisy, quantised */
    double true_disp_m, true_vel_m_s, true_force_N;
    double current; /* the damper's effective current (A) or filtered voltage (V) */
    /* Bit 0: the displacement converter read an end code; bit 1: the force converter did. */
    unsigned saturated;
} drths_specimen_meas_t;

typedef struct drths_specimen {
    drths_specimen_params_t p;
    drths_damper_t damper;
    drths_plant_t plant;
    double plant_current_scale; /* A of plant current per unit of damper command */
    /* delay line: io_delay_ticks + 1 slots of (drive, velocity, command) */
    double *line;
    int line_len, line_pos;
    double q_disp, q_force; /* ADC steps, 0 = off */
    double code_lo, code_hi;
    uint64_t rng[4];
    double spare;
    int has_spare;
} drths_specimen_t;

/* Fills p with a plausible rehearsal specimen for damper model m: the common/models/damper.h preset,
 * the plant on and equal to its models (plant_scale all 1), a one-tick I/O delay, 16-bit converters
 * over +/- 0.1 m and +/- 250 kN (200-kN damper; +/- 0.05 m and +/- 5 kN for the small damper),
 * noise of 2 um and 50 N (5 N), seed 1. init-only. */
void drths_specimen_params_default(drths_specimen_params_t *p, drths_damper_model_t m);

/* Validates (errors name the field), initialises damper and plant at dt_s, allocates the delay
 * line and resets at x = 0, command 0. init-only. */
int drths_specimen_init(drths_specimen_t *s, const drths_specimen_params_t *p, double dt_s,
                        drths_error_t *err);

/* At rest at x_m with the command's steady state: the delay line is filled with drive x_m,
 * velocity 0 and the command; the noise generator restarts from the seed. RT-safe. */
void drths_specimen_reset(drths_specimen_t *s, double x_m, double command);

/* One tick: writes the drive (m), the commanded velocity (m/s; used only by the ideal
 * actuator) and the damper command (A or V), and reads the sensors into *out. Returns 0, or
 * -ERANGE when a converter read one of its end codes (saturated; *out is filled all the same,
 * with the end value). RT-safe. */
int drths_specimen_step(drths_specimen_t *s, double drive_m, double vel_m_s, double command,
                        drths_specimen_meas_t *out);

/* Frees the delay line; safe to call twice. */
void drths_specimen_close(drths_specimen_t *s);

#endif
