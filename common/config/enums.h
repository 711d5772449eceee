/* The enums the experiment file defines for its own choices: the control mode, what HOLD does,
 * the Smith predictor's mode and the DAQ back end and analog reference. The models define the
 * enums of their own parts (config.h includes their headers); these are here, apart from
 * config.h, so that a module that takes one of them by value (site-numerical/smith.h,
 * semiactive.h, hybrid.h) does not pull in the whole experiment. config.h includes this header
 * and gives the YAML spelling of each value (drths_control_mode_name ...).
 */
#ifndef DRTHS_CONFIG_ENUMS_H
#define DRTHS_CONFIG_ENUMS_H

typedef enum drths_control_mode {
    DRTHS_CONTROL_PASSIVE_OFF = 0, /* "passive-off": command 0 */
    DRTHS_CONTROL_PASSIVE_ON,      /* "passive-on": the damper model's maximum command */
    DRTHS_CONTROL_FIXED,           /* "fixed": control.command */
    /* "clipped-optimal": the maximum command while (f_c - F) F > 0, else 0, with f_c the force
     * of a linear-quadratic design and F the measured force (site-numerical/semiactive.h) */
    DRTHS_CONTROL_CLIPPED_OPTIMAL
} drths_control_mode_t;

/* What the actuator does in HOLD, the safe state the actuator site enters on a limit, a
 * watchdog, too many concealed ticks, a lost session, an ABORT or a signal. Either way the drive
 * moves at most physical.ramp_rate_m_s * dt per tick and the damper command goes to its safe
 * value (0). */
typedef enum drths_hold_mode {
    DRTHS_HOLD_AT_POSITION = 0, /* "hold": to the displacement measured when HOLD began */
    DRTHS_HOLD_RAMP             /* "ramp": to physical.safe_position_m */
} drths_hold_mode_t;

typedef enum drths_smith_mode {
    DRTHS_SMITH_OFF = 0, /* "off" */
    DRTHS_SMITH_FIXED,   /* "fixed" */
    DRTHS_SMITH_ADAPTIVE /* "adaptive" */
} drths_smith_mode_t;

typedef enum drths_daq_backend {
    DRTHS_DAQ_BACKEND_VIRTUAL =
        0,                   /* "virtual": the rehearsal specimen (common/models/specimen.h) */
    DRTHS_DAQ_BACKEND_COMEDI /* "comedi": a board driven through comedilib */
} drths_daq_backend_t;

/* Analog reference of a channel; the values are comedilib's AREF_GROUND, AREF_COMMON and
 * AREF_DIFF. */
typedef enum drths_daq_aref {
    DRTHS_DAQ_AREF_GROUND = 0, /* "ground" */
    DRTHS_DAQ_AREF_COMMON = 1, /* "common" */
    DRTHS_DAQ_AREF_DIFF = 2    /* "diff" */
} drths_daq_aref_t;

#endif
