/* The actuator site's I/O driver interface: one drive signal and one damper command out, one
 * displacement and one force in, and a safe state. Two back ends:
 *
 *   virtual  the rehearsal specimen (common/models/specimen.h): each read is one tick of the
 * virtual plant and damper, driven by the outputs last written. comedi   a data-acquisition board
 * through comedilib: analog outputs for the actuator's displacement set-point and the damper's
 * current driver, analog inputs for the displacement transducer and the load cell
 * (docs/experiment-file.md, `daq`).
 *
 * Per tick the site calls drths_daq_write, then drths_daq_read; in HOLD it calls
 * drths_daq_safe_state instead of the write, with the drive of the HOLD ramp (what the site
 * passes, and when, is described once, in site-physical/actuator.h, HOLD).
 *
 * The drive envelope (site-physical/envelope.h) is the one gate before the converter: every
 * drive written by drths_daq_write or drths_daq_safe_state is first admitted by the DAQ's
 * envelope, set with drths_daq_set_envelope after the open. A drive it refuses is not written:
 * the call returns -EDOM and d->refusal says which bound and by how much (a refused safe state
 * still puts the damper at its safe command and writes the last admitted drive again, which is
 * where the converter already stands). A DAQ whose envelope was never set writes nothing
 * (-EPERM). Only this file calls a back end's write. Every per-tick call
 * is RT-safe: no allocation, no logging; the comedi back end makes one synchronous comedilib
 * call (an ioctl) per channel. A failing call returns a negative errno-style code and records what
 * failed; drths_daq_error formats it later, outside the RT thread.
 *
 * Conversion on the comedi back end. Engineering value e and connector voltage v are related
 * by e = units_per_volt * v + offset. Outputs: v is clamped to what the channel can produce
 * (the comedilib range, narrowed where a calibration polynomial would map its ends outside
 * 0..maxdata) *before* conversion, so no value can wrap around in the converter; then
 * comedi_from_physical gives the code. Inputs: comedi_to_physical turns the code into v; a code
 * at 0 or maxdata is flagged as saturated and the read fails with -ERANGE, since the true value
 * may lie anywhere beyond and the loop must not go on with it (the actuator site holds). The
 * polynomial
 * of each channel is the soft calibration's (comedi_get_softcal_converter) when the subdevice
 * is soft-calibrated (SDF_SOFT_CALIBRATED), else the linear map of comedi_get_range and
 * comedi_get_maxdata (what comedi_get_hardcal_converter gives).
 *
 * comedilib is reached only through a drths_comedi_api_t, whose default instance points at the
 * library's functions; tests pass a test double, so the back end is tested without a board.
 *
 * Ownership: the caller owns drths_daq_t (usually inside its site struct). The virtual back end
 * borrows the specimen, which must outlive the daq. The comedi back end owns the comedilib
 * device and the parsed calibration; it copies what it needs from the config, so the config
 * and its strings may be freed after open. The api table must outlive the daq (the default one
 * is static). drths_daq_close releases everything and is safe twice and after a failed open.
 */
#ifndef DRTHS_DAQ_H
#define DRTHS_DAQ_H

#include <comedilib.h>

#include "common/config/config.h"
#include "common/models/specimen.h"
#include "common/platform/error.h"
#include "site-physical/envelope.h"

/* The four channels, in the order of the bit masks and of drths_daq_comedi_config_t. */
enum {
    DRTHS_DAQ_COMMAND_OUT = 0,
    DRTHS_DAQ_CURRENT_OUT,
    DRTHS_DAQ_DISPLACEMENT_IN,
    DRTHS_DAQ_FORCE_IN,
    DRTHS_DAQ_NCHANNELS
};

/* "command_out", "current_out", "displacement_in", "force_in" (the experiment file's keys). */
extern const char *const drths_daq_channel_names[DRTHS_DAQ_NCHANNELS];

/* Every comedilib function the comedi back end uses, so that a test can replace the library.
 * Each member has the signature of the comedilib function it is named after (errnum is
 * comedi_errno, which cannot be a member's name because errno is a macro). */
typedef struct drths_comedi_api {
    comedi_t *(*open)(const char *filename);
    int (*close)(comedi_t *dev);
    int (*get_subdevice_type)(comedi_t *dev, unsigned subdevice);
    int (*get_subdevice_flags)(comedi_t *dev, unsigned subdevice);
    int (*get_n_channels)(comedi_t *dev, unsigned subdevice);
    lsampl_t (*get_maxdata)(comedi_t *dev, unsigned subdevice, unsigned channel);
    comedi_range *(*get_range)(comedi_t *dev, unsigned subdevice, unsigned channel, unsigned range);
    int (*get_n_ranges)(comedi_t *dev, unsigned subdevice, unsigned channel); /* may be NULL */
    int (*data_write)(comedi_t *dev, unsigned subdevice, unsigned channel, unsigned range,
                      unsigned aref, lsampl_t data);
    int (*data_read)(comedi_t *dev, unsigned subdevice, unsigned channel, unsigned range,
                     unsigned aref, lsampl_t *data);
    double (*to_physical)(lsampl_t data, const comedi_polynomial_t *poly);
    lsampl_t (*from_physical)(double data, const comedi_polynomial_t *poly);
    char *(*get_default_calibration_path)(comedi_t *dev); /* malloc'ed; free() */
    comedi_calibration_t *(*parse_calibration_file)(const char *path);
    void (*cleanup_calibration)(comedi_calibration_t *cal);
    int (*get_softcal_converter)(unsigned subdevice, unsigned channel, unsigned range,
                                 enum comedi_conversion_direction direction,
                                 const comedi_calibration_t *cal, comedi_polynomial_t *poly);
    int (*errnum)(void);
    const char *(*strerror)(int errnum);
} drths_comedi_api_t;

/* Points at comedilib itself. */
extern const drths_comedi_api_t drths_comedi_api_default;

typedef struct drths_daq_comedi_config {
    const char *device; /* "/dev/comedi0" */
    /* Indexed by DRTHS_DAQ_COMMAND_OUT ... DRTHS_DAQ_FORCE_IN; all four must be given. */
    drths_daq_channel_config_t ch[DRTHS_DAQ_NCHANNELS];
    /* A soft-calibration file, or NULL for comedilib's default path. Read only when a channel's
     * subdevice is soft-calibrated. */
    const char *calibration_path;
    /* The damper command written by safe_state, A (or V for a voltage-driven damper): 0, as a
     * de-energised MR damper is the passive-off state. */
    double damper_safe_command;
} drths_daq_comedi_config_t;

/* One channel of the comedi back end, resolved at open. */
typedef struct drths_daq_comedi_channel {
    drths_daq_channel_config_t cfg;
    lsampl_t maxdata;
    comedi_range range;       /* copied from comedilib */
    comedi_polynomial_t poly; /* from_physical for outputs, to_physical for inputs */
    int soft_calibrated;      /* 1 when poly comes from the calibration file */
    double v_lo, v_hi;        /* outputs: the clamp, volts; inputs: the range */
} drths_daq_comedi_channel_t;

struct drths_daq;

typedef struct drths_daq_ops {
    int (*write)(struct drths_daq *d, double drive_m, double vel_m_s, double damper_command);
    int (*read)(struct drths_daq *d, double *disp_m, double *force_N);
    int (*safe_state)(struct drths_daq *d, double hold_m);
    void (*close)(struct drths_daq *d);
} drths_daq_ops_t;

/* A DAQ failure as the DAQ records it (drths_daq_t.last_error): code (negative errno, 0 =
 * none), the channel, the comedilib function (or "envelope", "nan", "saturated") and
 * comedi_errno() at that moment. */
typedef struct drths_daq_last_error {
    int code;
    int channel;
    int comedi_errno;
    const char *op;     /* static */
    lsampl_t code_read; /* op "saturated": the converter code read (0 or maxdata) */
} drths_daq_last_error_t;

/* A copy of what drths_daq_error formats, taken on the RT thread (drths_daq_fault_save, a plain
 * copy) and formatted later on another (drths_daq_fault_describe), while the tick loop goes on
 * overwriting the DAQ's own record. */
typedef struct drths_daq_fault {
    drths_daq_last_error_t e;
    drths_envelope_violation_t refusal; /* op "envelope" */
    double virt_read;                   /* virtual op "saturated": the value read */
} drths_daq_fault_t;

typedef struct drths_daq {
    const drths_daq_ops_t *ops; /* NULL when closed or never opened */
    drths_daq_backend_t backend;

    /* Set by each write (and safe_state): bit (1 << DRTHS_DAQ_COMMAND_OUT) and/or
     * (1 << DRTHS_DAQ_CURRENT_OUT) when that output was clamped to the channel's range. */
    unsigned clamped;
    /* Set by each read: bit (1 << DRTHS_DAQ_DISPLACEMENT_IN) and/or (1 << DRTHS_DAQ_FORCE_IN)
     * when that input was at an end of its converter (0 or maxdata). */
    unsigned saturated;
    /* Counts over the run, for the summary. */
    unsigned long long n_clamped, n_saturated, n_errors;

    /* The drive envelope every written drive passes (drths_daq_set_envelope; env_set 0: none,
     * every write refused) and the last refusal. */
    drths_envelope_t env;
    int env_set;
    drths_envelope_violation_t refusal;

    /* The last failure, for drths_daq_error: code (negative errno), the channel, the comedilib
     * function and comedi_errno() at that moment. code 0 = none. On the comedi back end, the
     * first failure of the last failing call: when a board stops answering, the second channel
     * fails too, and the first names the cause. */
    drths_daq_last_error_t last_error;

    union {
        struct {
            drths_specimen_t *spec; /* borrowed */
            double drive_m, vel_m_s, command;
            drths_specimen_meas_t meas; /* of the last read */
        } virt;
        struct {
            const drths_comedi_api_t *api;
            comedi_t *dev;
            comedi_calibration_t *cal; /* NULL when no channel is soft-calibrated */
            char device[256];
            char calibration_path[1024]; /* the file used, "" when none */
            double damper_safe_command;
            int failed_in_call; /* last_error holds this call's first failure */
            drths_daq_comedi_channel_t ch[DRTHS_DAQ_NCHANNELS];
        } comedi;
    } u;
} drths_daq_t;

/* Opens the virtual back end over spec (initialised by the caller, borrowed). The outputs start
 * at drive 0, velocity 0, command 0 until the first write. init-only. */
int drths_daq_open_virtual(drths_specimen_t *spec, drths_daq_t *out, drths_error_t *err);

/* Opens the device, checks each channel (subdevice type, channel count, range, maxdata), loads
 * the soft calibration where a subdevice needs it and builds each channel's conversion. Writes
 * nothing: the outputs keep what they held until the first write or safe_state. On failure
 * returns a negative errno, fills err naming the device (and channel, subdevice and
 * comedilib's reason), and leaves *out closed with nothing to release; without a board:
 *   "cannot open /dev/comedi0: No such file or directory — is the board's driver loaded?
 *    (comedi_config)". api NULL means drths_comedi_api_default. init-only. */
int drths_daq_open_comedi(const drths_daq_comedi_config_t *cfg, const drths_comedi_api_t *api,
                          drths_daq_t *out, drths_error_t *err);

/* The comedi config of an experiment's daq section (pointers into exp, which must outlive the
 * open call). init-only. */
void drths_daq_comedi_config_from_experiment(const drths_experiment_t *exp,
                                             drths_daq_comedi_config_t *cfg);

/* Opens the back end the experiment names: virtual over spec, or comedi with api (NULL =
 * comedilib). init-only. */
int drths_daq_open(const drths_experiment_t *exp, drths_specimen_t *spec,
                   const drths_comedi_api_t *api, drths_daq_t *out, drths_error_t *err);

/* Sets the drive envelope (site-physical/envelope.h) every later write passes, with no drive
 * written yet. Returns 0, or -EINVAL with err naming the physical.limit_drive_* field.
 * init-only. */
int drths_daq_set_envelope(drths_daq_t *d, const drths_envelope_limits_t *lim, double rate_hz,
                           drths_error_t *err);

/* The envelope of an experiment's physical section (or channel view): limit_drive_m and
 * physical.limit_drive_*. init-only. */
void drths_daq_envelope_limits(const drths_experiment_t *exp, drths_envelope_limits_t *lim);

/* The last drive the envelope admitted, i.e. where the converter stands (0 before any).
 * RT-safe. */
static inline double drths_daq_last_drive(const drths_daq_t *d)
{
    return d->env.u1;
}

/* Writes the actuator's displacement set-point (m) and the damper command (A or V), at now_ns,
 * for the command command_m (NaN: none; the envelope's offset bound then does not apply).
 * vel_m_s is the commanded velocity, which only the virtual ideal actuator uses (a servo
 * controller derives its own). A drive the envelope refuses writes nothing and returns -EDOM
 * (d->refusal says why); a NaN damper command writes nothing and returns -EINVAL; -EPERM when
 * no envelope was set. RT-safe. */
int drths_daq_write(drths_daq_t *d, double drive_m, double vel_m_s, double damper_command,
                    double command_m, int64_t now_ns);

/* Reads the measured displacement (m) and force (N). On the virtual back end this steps the
 * specimen one tick. When comedilib fails the value of that channel is NaN; an input at an end
 * of its converter (comedi back end) gives its value, flags it in d->saturated and returns
 * -ERANGE. Both channels are read even if the first fails; returns the first error. RT-safe. */
int drths_daq_read(drths_daq_t *d, double *disp_m, double *force_N);

/* Writes the neutral outputs at now_ns: the set-point hold_m and the damper's safe command (0
 * on the virtual back end). The caller chooses hold_m (the actuator site: each tick of the HOLD
 * ramp, or the last drive at the end of the run; see site-physical/actuator.h, HOLD). A hold_m
 * the envelope refuses (NaN included) is not written: the last admitted drive is written again
 * with the damper's safe command, and the call returns -EDOM (d->refusal says why). Both
 * outputs are attempted even if the first fails; returns the first error. RT-safe. */
int drths_daq_safe_state(drths_daq_t *d, double hold_m, int64_t now_ns);

/* The virtual back end's full measurement of the last read (true values as well as the
 * measured ones); NULL for the other back ends. RT-safe. */
const drths_specimen_meas_t *drths_daq_virtual_meas(const drths_daq_t *d);

/* Formats the last failure of write/read/safe_state into err, naming the device, the channel
 * with its subdevice and channel numbers, the comedilib function and comedilib's text; returns
 * its code (0 if none). init-only (formats text; call it from the non-RT thread). */
int drths_daq_error(const drths_daq_t *d, drths_error_t *err);

/* The DAQ's last failure copied into f, for drths_daq_fault_describe on another thread.
 * RT-safe (no formatting). */
void drths_daq_fault_save(const drths_daq_t *d, drths_daq_fault_t *f);

/* drths_daq_error of a saved failure: d gives only what does not change after init (the device,
 * the channels' settings, the back end). Returns the failure's code (0 if none). Not RT-safe. */
int drths_daq_fault_describe(const drths_daq_t *d, const drths_daq_fault_t *f, drths_error_t *err);

/* The sentence of a failed DAQ call that held the test (site-physical/hold_cause.h): "DAQ
 * <verb> failed: displacement_in (subdevice 0, channel 3, range 1): comedi_data_read:
 * Input/output error". code is the negative errno; channel the DAQ channel (out of range:
 * unknown, and the sentence names only the errno's text); cfg its comedi mapping (NULL: name
 * only); call the failing comedilib function (NULL, "" or one of the DAQ's own refusals: none).
 * drths_daq_fault_describe shares its naming of the channel. Returns snprintf's count. Not
 * RT-safe (snprintf). */
int drths_daq_failure_sentence(char *buf, size_t cap, const char *verb, int code, int channel,
                               const drths_daq_channel_config_t *cfg, const char *call);

/* Releases the back end. Writes nothing: call drths_daq_safe_state first. Safe twice.
 * init-only. */
void drths_daq_close(drths_daq_t *d);

#endif
