/* The experiment file (docs/experiment-file.md documents every key).
 *
 * One YAML file describes both sites of an experiment. drths_experiment_load parses it with
 * libcyaml, fills in every default, checks every field and resolves the paths; afterwards each
 * node reads its own part (actuator, physical and daq, or numerical) and the shared part. The
 * shared part (name, rate_hz, structure, ground_motion with the record file's bytes, specimen,
 * control, link except key_file) is hashed by drths_experiment_fingerprint; both sites compare
 * the hashes in HELLO, so they cannot run different experiments by accident.
 *
 * Units are SI unless the field name says otherwise (the names are those of the YAML keys).
 * Every error message starts with the file name, names the field path and, where the parser
 * knows it, the line:
 *     experiment.yaml: structure.floor_mass_kg[1]: must be > 0 (got -5)
 * main() prints it and exits with DRTHS_EXIT_CONFIG before anything runs.
 *
 * Ownership: drths_experiment_t owns every pointer in it (strings and arrays), allocated by
 * drths_experiment_load and freed by drths_experiment_close. The caller reads the fields and
 * must not free or resize them. Optional strings that were not given are NULL unless the comment
 * names a default.
 */
#ifndef DRTHS_CONFIG_H
#define DRTHS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Each model owns the enums of its own part of the file; this header adds the YAML names. */
#include "common/models/compensation.h" /* drths_compensation_t */
#include "common/models/damper.h"       /* drths_damper_model_t */
#include "common/models/groundmotion.h" /* drths_ground_motion_kind_t, _record_format_t, _accel_units_t */
#include "common/models/integrator.h"   /* drths_integrator_kind_t */
#include "common/models/plant.h"        /* drths_actuator_plant_t */
#include "common/models/structure.h"    /* drths_structure_model_t, drths_damping_kind_t */
#include "common/platform/cli.h"
#include "common/platform/metrics.h" /* drths_acceptance_t */        /* DRTHS_EXIT_USAGE */
#include "common/platform/error.h"
/* The enums of the file's own choices (control mode, hold, Smith predictor, DAQ). */
#include "common/config/enums.h"

/* Exit code of a site or tool whose experiment file (or command line) is wrong. */
#define DRTHS_EXIT_CONFIG DRTHS_EXIT_USAGE

/* Largest number of degrees of freedom the file may describe (the loader refuses bigger files
 * rather than allocating without bound). */
#define DRTHS_EXPERIMENT_MAX_DOF 1000

/* Largest number of actuator channels physical.channels may declare: the OpenFresco wire's
 * response blocks carry this many values each (site-physical/openfresco.h, DRTHS_OFR_MAX_DOF). */
#define DRTHS_EXPERIMENT_MAX_CHANNELS 8
/* A channel's name, at most this many bytes with the terminating NUL. */
#define DRTHS_CHANNEL_NAME_MAX 32

/* Largest number of actuator sites the sites section may list (links of the numerical site). */
#define DRTHS_EXPERIMENT_MAX_SITES 8
/* A site's name, at most this many bytes with the terminating NUL. */
#define DRTHS_SITE_NAME_MAX 32
/* The most dampers the sites may give the structure, every site's channels together: the
 * numerical site's structure and controller take this many (site-numerical/numsub.h,
 * semiactive.h). */
#define DRTHS_EXPERIMENT_MAX_DAMPERS 16

struct drths_experiment_channel;

/* One entry of the sites section: an actuator site (a laboratory), one link of the numerical
 * site. Its channels are the experiment's dampers first .. first + n_channels - 1. The strings
 * are owned by the experiment (drths_experiment_select_site may swap them with the top-level
 * ones; both are freed by drths_experiment_close). */
typedef struct drths_experiment_site {
    char name[DRTHS_SITE_NAME_MAX]; /* sites[i].name, required, unique */
    char *address;  /* "host:port": where the numerical site sends this link's datagrams */
    char *listen;   /* "host:port" the actuator site binds (default: address) */
    char *key_file; /* as written; NULL: link.key_file's */
    char *key_path; /* resolved against dir; NULL: link.key_path's */
    int line;       /* the line of sites[i] in the file, 0 if unknown */
    int first;      /* index of its first channel in dampers */
    int n_channels; /* 1..DRTHS_EXPERIMENT_MAX_CHANNELS */
} drths_experiment_site_t;

/* One analog channel of the comedi back end. The engineering value is
 * units_per_volt * volts + offset (m, A or N), volts being the calibrated voltage at the board's
 * connector. */
typedef struct drths_daq_channel_config {
    int given;                  /* 1 when the mapping was in the file */
    int subdevice;              /* 0..255, required */
    int channel;                /* 0..65535, required */
    int range;                  /* comedilib range index 0..255 (default 0) */
    drths_daq_aref_t aref;      /* default ground */
    double units_per_volt;      /* finite, != 0, required: m/V, A/V (V/V) or N/V */
    double offset;              /* engineering value at 0 V (default 0) */
} drths_daq_channel_config_t;


typedef struct drths_experiment {
    /* Bookkeeping, filled by the loader. */
    char *path;        /* the path as given to drths_experiment_load */
    char *dir;         /* absolute folder of the file; relative paths in it are resolved here */
    int n_dof;         /* number of degrees of freedom (floors), >= 1 */
    /* Fields the file gives that do not apply to its choices (q_disp with control.mode
     * passive-on...), which the loader ignored: one line each, "<file>:<line>: <field>: ignored
     * ...", newline-terminated; NULL when none. Programs print them as warnings. */
    char *notes;

    char *name;        /* required */
    char *description; /* optional; "" when absent */
    double rate_hz;    /* control tick rate, 100..100000 (default 5000) */

    struct {
        drths_structure_model_t model;
        /* shear-building: n_dof values each (floor 1 first; storey 1 = ground to floor 1);
         * NULL for matrices. */
        double *floor_mass_kg;
        double *storey_stiffness_N_per_m;
        /* n_dof x n_dof row-major. For shear-building they are built from the two lists above
         * (M diagonal, K tridiagonal), so every consumer can use them whatever the model. */
        double *mass_kg;
        double *stiffness_N_per_m;
        /* n_dof x n_dof row-major; non-NULL only when damping.kind is DRTHS_DAMPING_MATRIX. */
        double *damping_N_s_per_m;
        struct {
            drths_damping_kind_t kind; /* default modal */
            /* modal: 1 (all modes) or n_dof values; rayleigh: 1 or 2 values (for modes[0],
             * modes[1]; one value is used for both); each in [0, 1). Default {0.02}. Empty (NULL,
             * 0) for matrix and none. */
            double *ratio;
            int n_ratio;
            /* rayleigh: two distinct 1-based modes; default {1, n_dof} ({1, 1} when n_dof is
             * 1, which means mass-proportional damping). {0, 0} for the other kinds. */
            int modes[2];
        } damping;
        drths_integrator_kind_t integrator; /* default chen-ricles */
    } structure;

    struct {
        drths_ground_motion_kind_t kind; /* default record */
        /* record */
        char *file;          /* as written in the file; NULL for white-noise */
        char *record_path;   /* absolute (resolved against dir, checked readable); NULL for
                              * white-noise */
        drths_record_format_t format; /* default auto */
        drths_accel_units_t units;    /* default g */
        int column;                   /* 1-based acceleration column (time not counted), >= 1 */
        double scale;                 /* amplitude factor, > 0 (default 1) */
        double time_compression;      /* >= 1 (default 1); dt_record / factor */
        double duration_s;            /* >= 0; 0 = the whole record (required > 0 for
                                       * white-noise) */
        double tail_s;                /* >= 0 free vibration after the record (default 0) */
        double dt_s; /* the record's step when the file has no time column and no DT= header
                      * (0 = not given; must agree with the file's when both are given) */
        /* white-noise */
        double band_hz[2];            /* 0 <= low < high <= rate_hz / 2 (default 0, 30) */
        double rms_m_s2;              /* > 0 (default 1) */
        uint64_t seed;                /* default 1 */
    } ground_motion;

    struct {
        int floor; /* 1..n_dof: damper between floor-1 (0 = ground) and floor (default 1) */
        struct {
            drths_damper_model_t model;  /* required */
            double stiffness_N_per_m;    /* linear-spring: > 0; 0 otherwise */
            int substeps;                /* 0..1000, 0 = automatic (default 0) */
        } damper;
        /* Rehearsal only: the virtual specimen's parameters are the nominal ones times these
         * factors (each > 0, default 1); gamma_beta multiplies both gamma and beta, n is the
         * exponent of the hysteresis. */
        struct {
            double alpha, c0, c1, gamma_beta, A, n;
        } true_scale;
    } specimen;

    struct {
        drths_control_mode_t mode; /* default passive-off */
        /* fixed only (required there): A (phillips2013-200kN, 0..2.5) or V (spencer1997-small,
         * 0..2.25); 0 for the other damper models. 0 and not accepted in the file for the other
         * modes, which derive the command themselves (drths_experiment_command_max). */
        double command;
        /* clipped-optimal only: the LQ design's weights (site-numerical/semiactive.h; defaults
         * 1, 1, 100); 0 for the other modes and not accepted in the file there. */
        double q_disp, q_acc, r;
    } control;

    /* Actuator site's virtual plant and sensors (rehearsal), not shared. */
    struct {
        drths_actuator_plant_t plant;     /* default ideal */
        drths_compensation_t compensation; /* default none */
        double noise_displacement_m;      /* sensor noise std, >= 0 (default 0) */
        double noise_force_N;             /* >= 0 (default 0) */
        int adc_bits;                     /* 0 (no quantisation) or 8..24 (default 0) */
        double displacement_range_m;      /* > 0, +/- full scale (default 0.1) */
        double force_range_N;             /* > 0 (default 250000) */
        int io_delay_ticks;               /* 0..10 (default 0) */
        uint64_t seed;                    /* default 1 */
        /* adaptive compensation: window time constant (s, 0.05..600, default 2) and bound on
         * each factor (0: derived from adaptive_range, the default, or 1..100: [1/b, b];
         * common/models/compensation.h) */
        double adaptive_window_s, adaptive_bound;
        /* The plants the adaptive bounds admit (drths_comp_plant_range_t): each 0.1..10,
         * min <= max; default gain 0.7..1.4, the others 0.5..2. */
        struct {
            double gain_min, gain_max, bandwidth_min, bandwidth_max, real_pole_min, real_pole_max,
                complex_pole_min, complex_pole_max;
        } adaptive_range;
        /* How the three-pole plant differs from its models (common/models/plant.h,
         * drths_plant_scale_t): each factor 0.1..10, default 1. */
        struct {
            double gain, bandwidth, real_pole, complex_pole;
        } plant_scale;
    } actuator;

    /* Shared by both sites, except key_file. */
    struct {
        int redundancy;          /* samples per datagram, 1..16 (default 4) */
        int probes;              /* start-up probes, 10..100000 (default 500) */
        double quantile;         /* 0.5..1 (default 0.999) */
        int safety_margin_ticks; /* 0..100000 (default 10) */
        int loop_delay_ticks;    /* 0 = choose from probes; else fixed L, 1..1000000 */
        char *key_file;          /* as written, NULL if absent; not fingerprinted */
        char *key_path;          /* key_file resolved against dir (not checked here: the
                                  * command line may override it); NULL if absent */
    } link;

    /* Numerical site only. */
    struct {
        char *peer;              /* "host:port" or "[v6]:port" (default "127.0.0.1:47000") */
        int reorder_ticks;       /* 1..10000 (default 10) */
        drths_smith_mode_t smith; /* default fixed */
        /* The stability detector (site-numerical/stability.h, docs/design.md "Safety"). */
        double stability_ratio;   /* HOLD at this supplied/damping energy ratio, 0 = off;
                                   * 0..100 (default 0.5) */
        double stability_span_s;  /* whole cycles judged together, at least (0.3 s) */
        double stability_min_amplitude_m; /* damper amplitude floor per cycle (0.2 mm) */
        double stability_max_cycle_s;     /* longer cycles break the sequence (2 s) */
        /* numerical.smith_model, a damper model file (common/config/damperfile.h), as written
         * and resolved against dir; both NULL if absent. Read by the numerical site. */
        char *smith_model, *smith_model_path;
    } numerical;

    /* Actuator site only. */
    struct {
        char *listen;               /* "host:port" or "[v6]:port" (default "0.0.0.0:47000") */
        int playout_ticks;          /* 0 in the file = one second (at least 300); 10..1000000 */
        /* The concealment budget: consecutive missing commands concealed before HOLD. In the
         * file -1..10000, -1 (the default) meaning not given; after loading, the budget in
         * ticks: the file's value when given, else max_concealed_ms at rate_hz (rounded
         * down). */
        int max_concealed_ticks;
        double max_concealed_ms;    /* 0..10000 (default 50) */
        double watchdog_ms;         /* 1..60000 (default 100) */
        double limit_displacement_m; /* > 0 (default 0.1) */
        double limit_velocity_m_s;  /* > 0 (default 1.0) */
        double limit_force_N;       /* > 0 (default 250000) */
        double limit_drive_m;       /* |drive signal| (after compensation) above this: HOLD;
                                     * > 0 (default 0.1) */
        double limit_measured_displacement_m; /* |measured displacement| above this: HOLD;
                                               * > 0 (default 0.1) */
        /* The rest of the drive envelope (site-physical/envelope.h), with limit_drive_m: a
         * drive whose velocity, acceleration (differences of successive writes) or distance
         * from the command it serves exceeds these is not written: HOLD. > 0 (defaults 1.25
         * m/s, 200 m/s^2, 0.01 m). */
        double limit_drive_velocity_m_s;
        double limit_drive_acceleration_m_s2;
        double limit_drive_offset_m;
        /* A commanded tick woken later than this after its deadline is a stall: HOLD, and the
         * ticks missed are not played back to back. 0.01..60000 (default 20). */
        double max_tick_late_ms;
        drths_hold_mode_t hold;     /* default hold */
        double safe_position_m;     /* ramp target, inside both displacement limits
                                     * (default 0) */
        double ramp_rate_m_s;       /* largest drive speed in HOLD, > 0 (default 0.05) */
        /* Acceleration and jerk of the desired trajectory the feedforward's inverse model
         * sees at most (common/models/compensation.h drths_comp_set_limits); 0 = no limit.
         * 0..1e6 (default 50) and 0..1e9 (default 3e4). */
        double feedforward_max_acceleration_m_s2;
        double feedforward_max_jerk_m_s3;
        /* The stability monitor (site-physical/actuator.c check_stability): windows of
         * stability_window_s (0..10, default 0.2; 0 = off), the last stability_windows (2..64,
         * default 4) fitted. HOLD when the amplitude grows at stability_growth_per_s
         * (0.01..100 per s, natural log, default 2.0), every window's amplitude at least
         * stability_min_amplitude_m (>= 0, default 0.002), or, after the record's end and every
         * window at least stability_quiet_amplitude_m (>= 0, default 0.0005), decays slower than
         * stability_min_decay_per_s (-100..100 per s, default 0.25). */
        double stability_window_s;
        int stability_windows;
        double stability_min_amplitude_m;
        double stability_quiet_amplitude_m;
        double stability_growth_per_s;
        double stability_min_decay_per_s;
    } physical;

    /* Actuator site only, not fingerprinted: its I/O back end (site-physical/daq.h). With
     * backend virtual the channel mappings may be present (a rehearsal of a lab file) and are
     * checked but not used; with comedi all four are required. */
    struct {
        drths_daq_backend_t backend;  /* default virtual */
        char *device;                 /* default "/dev/comedi0" */
        drths_daq_channel_config_t command_out;     /* actuator displacement set-point, m/V */
        drths_daq_channel_config_t current_out;     /* damper current driver, A/V (or V/V) */
        drths_daq_channel_config_t displacement_in; /* displacement transducer, m/V */
        drths_daq_channel_config_t force_in;        /* load cell, N/V */
        /* Soft-calibration file (comedi_soft_calibrate's output) as written, or NULL: then
         * comedilib's default path is used for the subdevices that need soft calibration. */
        char *calibration_file;
        char *calibration_path;       /* calibration_file resolved against dir; NULL if absent */
    } daq;

    struct {
        char *directory; /* run folders go here, relative to the current directory (default
                          * "runs") */
    } output;

    /* The acceptance section (common/platform/metrics.h drths_acceptance_t): what drths-report judges
     * the run by; not fingerprinted, so a lab may tighten it after a run. Defaults: 1, 1, 5, 2,
     * 0.5, 0.5 %, drive_step_ratio 2 (1..1e6), hold_allowed 0 (the acceptance table in
     * config_sections.h). */
    drths_acceptance_t acceptance;

    /* physical.channels: 0 when the file has none (one actuator channel, described by the
     * specimen, actuator, physical and daq sections, as always), else 2..
     * DRTHS_EXPERIMENT_MAX_CHANNELS entries, channel i driven by the i-th value of the
     * analysis's trial displacement vector. Not fingerprinted: several channels are served
     * over OpenFresco only, where no numerical site compares fingerprints. Read them with
     * drths_experiment_n_actuators and drths_experiment_actuator. */
    int n_channels;
    int channels_line; /* the line of physical.channels in the file, 0 if unknown */
    struct drths_experiment_channel *channels; /* n_channels entries, owned */

    /* sites: 0 when the file has none (one actuator site, as always), else 1..
     * DRTHS_EXPERIMENT_MAX_SITES actuator sites (sites[i]) and n_dampers channels over all of
     * them, in the file's order (dampers[k], each a view as physical.channels' entries are,
     * whose specimen.floor is the channel's floor, physical.listen and link.key_* its site's).
     * Fingerprinted, except the addresses and the key files. Read them with
     * drths_experiment_n_dampers and drths_experiment_damper; an actuator site takes its own
     * entry with drths_experiment_select_site. */
    int n_sites;
    int sites_line;                           /* the line of sites in the file, 0 if unknown */
    drths_experiment_site_t *sites;           /* n_sites entries, owned */
    int n_dampers;                            /* sum of the sites' n_channels */
    struct drths_experiment_channel *dampers; /* n_dampers entries, owned */
    /* The site drths_experiment_select_site chose (an actuator site's own), or NULL. */
    const drths_experiment_site_t *site;
} drths_experiment_t;

/* One entry of physical.channels. `exp` is a view of the whole experiment as this channel sees
 * it: a copy of the experiment whose specimen, actuator, the five physical.limit_* fields and
 * the four daq channel mappings are the channel's (each taken from the top-level section when
 * the channel does not give it), with n_channels 0. Its pointers are the experiment's (owned
 * by it, never freed through the view), so the models built for one channel
 * (drths_setup_specimen, drths_actuator_params_from_experiment, drths_daq_open) are built from
 * the view exactly as from a one-channel file. */
typedef struct drths_experiment_channel {
    char name[DRTHS_CHANNEL_NAME_MAX]; /* physical.channels[i].name, default "ch<i+1>" */
    int site; /* sites[site] holds it (an entry of dampers); 0 in physical.channels */
    drths_experiment_t exp;
} drths_experiment_channel_t;

/* The number of actuator channels: n_channels, or 1 for a file without physical.channels.
 * RT-safe. */
int drths_experiment_n_actuators(const drths_experiment_t *exp);

/* The experiment as actuator channel i (0-based, < drths_experiment_n_actuators) sees it: the
 * channel's view, or exp itself for a file without physical.channels. RT-safe. */
const drths_experiment_t *drths_experiment_actuator(const drths_experiment_t *exp, int i);

/* The name of actuator channel i ("ch1" for a file without physical.channels). RT-safe. */
const char *drths_experiment_actuator_name(const drths_experiment_t *exp, int i);

/* A numerical site drives one channel: 0 for a file without physical.channels, else -ENOTSUP
 * with err saying that several channels are served over OpenFresco only (file, line, field).
 * A file with sites is -ENOTSUP too unless a site was selected (an actuator site's view).
 * init-only. */
int drths_experiment_check_network(const drths_experiment_t *exp, drths_error_t *err);

/* The structure's dampers (one per channel, each acting on its view's specimen.floor): the
 * channels of every site, or 1 (the experiment itself) for a file without sites. RT-safe. */
int drths_experiment_n_dampers(const drths_experiment_t *exp);

/* Damper k (0-based, < drths_experiment_n_dampers) as its channel sees it: dampers[k]'s view,
 * or exp itself for a file without sites. RT-safe. */
const drths_experiment_t *drths_experiment_damper(const drths_experiment_t *exp, int k);

/* Damper k's name: "<site>.<channel>" (into out, cap bytes), or "ch1" for a file without sites.
 * RT-safe. */
void drths_experiment_damper_name(const drths_experiment_t *exp, int k, char *out, size_t cap);

/* The index of the site named name, or -ENOENT with err naming the file, the line of sites and
 * the sites it lists (-EINVAL when the file has no sites section). init-only. */
int drths_experiment_find_site(const drths_experiment_t *exp, const char *name, drths_error_t *err);

/* Makes exp the experiment of the actuator site named name (drths-physical --site): its
 * specimen, actuator, physical limits and daq signals become the site's channel's (for a site
 * with one channel) or its physical.channels the site's channels (several, served over
 * OpenFresco only), physical.listen the site's listen address and link.key_file / key_path its
 * key file when it names one. The sites and the fingerprint are unchanged. Returns 0, or
 * drths_experiment_find_site's error. init-only. */
int drths_experiment_select_site(drths_experiment_t *exp, const char *name, drths_error_t *err);

/* Loads, fills defaults and validates the experiment file at path. On success returns 0 and
 * *exp must later be given to drths_experiment_close. On failure returns a negative errno
 * (-ENOENT/-EACCES for an unreadable experiment or record file, -EINVAL for anything wrong in
 * the content), fills err with one sentence "<file>: <field path>: <reason>", and leaves *exp
 * zeroed with nothing to free. init-only. */
int drths_experiment_load(drths_experiment_t *exp, const char *path, drths_error_t *err);

/* As drths_experiment_load, but parses the len bytes at data (which need no NUL) as if they were
 * the file at path: path names the file in messages, and relative paths in it are resolved
 * against path's folder. Used by the fuzz target. init-only. */
int drths_experiment_load_buffer(drths_experiment_t *exp, const char *data, size_t len,
                                 const char *path, drths_error_t *err);

/* Reads only the acceptance section of the experiment file at path (defaults for what is
 * absent), ignoring and not checking the rest: drths-report reads it from the copy in a run
 * folder, where the record file's relative path no longer resolves. Returns 0, or a negative
 * errno with err filled as drths_experiment_load does. init-only. */
int drths_experiment_load_acceptance(drths_acceptance_t *acc, const char *path,
                                     drths_error_t *err);

/* The acceptance section's defaults, from the same table the loader uses. init-only. */
void drths_acceptance_default(drths_acceptance_t *acc);

/* Frees everything and zeroes *exp. Safe twice and after a failed load. init-only. */
void drths_experiment_close(drths_experiment_t *exp);

/* The damper model's command range [0, max]: 2.5 A for phillips2013-200kN, 2.25 V for
 * spencer1997-small, 0 for the others. RT-safe. */
double drths_experiment_command_max(drths_damper_model_t model);

/* Metres per second squared per unit (9.80665 for g, 1, 0.01, 0.001). RT-safe. */
double drths_accel_units_m_s2(drths_accel_units_t units);

/* The YAML spelling of each enum value ("shear-building", "phillips2013-200kN", ...); "?" for a
 * value out of range. RT-safe. */
const char *drths_structure_model_name(drths_structure_model_t v);
const char *drths_damping_kind_name(drths_damping_kind_t v);
const char *drths_integrator_kind_name(drths_integrator_kind_t v);
const char *drths_ground_motion_kind_name(drths_ground_motion_kind_t v);
const char *drths_record_format_name(drths_record_format_t v);
const char *drths_accel_units_name(drths_accel_units_t v);
const char *drths_damper_model_name(drths_damper_model_t v);
const char *drths_control_mode_name(drths_control_mode_t v);
const char *drths_actuator_plant_name(drths_actuator_plant_t v);
const char *drths_compensation_name(drths_compensation_t v);
const char *drths_hold_mode_name(drths_hold_mode_t v);
const char *drths_smith_mode_name(drths_smith_mode_t v);
const char *drths_daq_backend_name(drths_daq_backend_t v);
const char *drths_daq_aref_name(drths_daq_aref_t v);

#endif
