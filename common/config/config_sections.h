/* The keys of the experiment file (docs/experiment-file.md documents them). Every key is
 * declared once, in the section tables below, one row per key:
 *
 *     X(section, KIND, key, destination, default, lo, hi, names)
 *
 * From each table this header generates the section's raw struct (what libcyaml loads: a
 * string per scalar) and config_sections.c its libcyaml schema and a field_t array that
 * drths_cfg_parse_field reads to convert, default and range-check a scalar. `destination` is the
 * member the value goes to, in the section's output struct (drths_experiment_t for every section
 * but the DAQ channels). Unused columns are `_`. The kinds:
 *
 *   ENUM      one of the spellings in `names`; default -1 means required
 *   INT       whole number in lo..hi
 *   U64       whole number in 0..2^64-1
 *   REAL      finite number, any value
 *   REAL_GT0  finite number > 0
 *   REAL_GE0  finite number >= 0
 *   REAL_IN   finite number in lo..hi
 *   TEXT      string; default is the string used when absent (NULL: required, checked by hand)
 *   OPTPATH   path resolved against the file's folder; absent, empty or null means none
 *   LIST      list of scalars, converted by hand (the row's comment gives default and range)
 *   MATRIX    list of rows; pass 1 only counts the rows (load_matrices reads them)
 *   MAP       nested section; `names` is its table's name
 *   SEQ       list of nested sections; `names` is their table's name
 *
 * A row's comment says what the fill functions check beyond the table (a default or a range
 * that depends on other fields, a field allowed only with some other value). The fill functions
 * take the fields in the order that decides which of several errors is reported first.
 */
#ifndef DRTHS_CONFIG_SECTIONS_H
#define DRTHS_CONFIG_SECTIONS_H

#include <stddef.h>

#include <cyaml/cyaml.h>

#include "common/config/config_internal.h"

/* The raw struct: a string per scalar, a string array and its count per list, a pointer per
 * nested section. */
#define RAW_MEMBER(s, kind, key, dest, def, lo, hi, names) RAW_##kind(key, names)
#define RAW_SCALAR(key) char *key;
#define RAW_ENUM(key, names) RAW_SCALAR(key)
#define RAW_INT(key, names) RAW_SCALAR(key)
#define RAW_U64(key, names) RAW_SCALAR(key)
#define RAW_REAL(key, names) RAW_SCALAR(key)
#define RAW_REAL_GT0(key, names) RAW_SCALAR(key)
#define RAW_REAL_GE0(key, names) RAW_SCALAR(key)
#define RAW_REAL_IN(key, names) RAW_SCALAR(key)
#define RAW_TEXT(key, names) RAW_SCALAR(key)
#define RAW_OPTPATH(key, names) RAW_SCALAR(key)
#define RAW_LIST(key, names)                                                                       \
    char **key;                                                                                    \
    unsigned key##_count;
#define RAW_MATRIX(key, names)                                                                     \
    void **key;                                                                                    \
    unsigned key##_count;
#define RAW_MAP(key, names) struct raw_##names *key;
#define RAW_SEQ(key, names)                                                                        \
    struct raw_##names *key;                                                                       \
    unsigned key##_count;

/* F_<section>_<key>, the index of each row in the section's field_t array. */
#define INDEX_FIELD(s, kind, key, ...) F_##s##_##key,

/* What the loader's files see of a section, from its table: struct raw_<s>, the F_<s>_<key>
 * indices, drths_cfg_<s>_spec (the rows, config_sections.c) and drths_cfg_<s>_prefix, the path
 * its keys are under in messages. */
#define DECLARE_SECTION(s, FIELDS, out_type, prefix)                                               \
    struct raw_##s {                                                                               \
        FIELDS(RAW_MEMBER, s)                                                                      \
    };                                                                                             \
    typedef out_type s##_out_t;                                                                    \
    enum { FIELDS(INDEX_FIELD, s) F_##s##_end };                                                   \
    extern const char drths_cfg_##s##_prefix[];                                                    \
    extern const field_t drths_cfg_##s##_spec[];

/* clang-format off */

/* structure.damping */
#define DAMPING_FIELDS(X, s)                                                                       \
    /* default matrix when structure.damping_N_s_per_m is given, which needs kind matrix */        \
    X(s, ENUM, kind, structure.damping.kind, DRTHS_DAMPING_MODAL, _, _, damping_kinds)             \
    /* modal: 1 value (all modes) or n_dof; rayleigh: 1 or 2; each in [0, 1), default [0.02];     \
     * refused with matrix and none */                                                             \
    X(s, LIST, ratio, _, _, _, _, _)                                                               \
    /* rayleigh only: two different 1-based modes in 1..n_dof, default [1, n_dof] */               \
    X(s, LIST, modes, _, _, _, _, _)

/* structure */
#define STRUCTURE_FIELDS(X, s)                                                                     \
    X(s, ENUM,   model, structure.model, -1, _, _, structure_models)                               \
    /* shear-building only (and required there): 1..DRTHS_EXPERIMENT_MAX_DOF values, each > 0,  \
     * the two lists equally long */                                                               \
    X(s, LIST,   floor_mass_kg, _, _, _, _, _)                                                     \
    X(s, LIST,   storey_stiffness_N_per_m, _, _, _, _, _)                                          \
    /* matrices only: n x n (n = 1..DRTHS_EXPERIMENT_MAX_DOF), symmetric; mass and stiffness     \
     * required and positive definite; damping optional, diagonal >= 0 */                         \
    X(s, MATRIX, mass_kg, _, _, _, _, _)                                                           \
    X(s, MATRIX, stiffness_N_per_m, _, _, _, _, _)                                                 \
    X(s, MATRIX, damping_N_s_per_m, _, _, _, _, _)                                                 \
    X(s, MAP,    damping, _, _, _, _, damping)                                                     \
    X(s, ENUM,   integrator, structure.integrator, DRTHS_INTEGRATOR_CHEN_RICLES, _, _,             \
      integrator_kinds)

/* ground_motion: file, format, units, column, scale, time_compression and dt_s apply to kind
 * record (file required there, and a readable regular file); band_hz, rms_m_s2 and seed to
 * white-noise, which sets format auto, units m/s2, dt_s 0 and the rest to 1. The fields of the
 * other kind are ignored with a note. */
#define GROUND_FIELDS(X, s)                                                                        \
    X(s, ENUM,     kind, ground_motion.kind, DRTHS_GROUND_MOTION_RECORD, _, _, ground_kinds)       \
    X(s, TEXT,     file, ground_motion.file, NULL, _, _, _)                                        \
    X(s, ENUM,     format, ground_motion.format, DRTHS_RECORD_FORMAT_AUTO, _, _, record_formats)   \
    X(s, ENUM,     units, ground_motion.units, DRTHS_ACCEL_G, _, _, accel_units)                   \
    X(s, INT,      column, ground_motion.column, 1, 1, 1000, _)                                    \
    X(s, REAL_GT0, scale, ground_motion.scale, 1.0, _, _, _)                                       \
    X(s, REAL_IN,  time_compression, ground_motion.time_compression, 1.0, 1.0, 1000.0, _)          \
    /* record only: the step of a record without a time column or DT= header; 0 = not given */   \
    X(s, REAL_GE0, dt_s, ground_motion.dt_s, 0, _, _, _)                                           \
    /* white-noise: > 0 */                                                                         \
    X(s, REAL_IN,  duration_s, ground_motion.duration_s, 0, 0, 1e6, _)                             \
    X(s, REAL_IN,  tail_s, ground_motion.tail_s, 0, 0, 1e6, _)                                     \
    /* two values [low, high], 0 <= low < high <= rate_hz / 2, default [0, 30] */                  \
    X(s, LIST,     band_hz, _, _, _, _, _)                                                         \
    X(s, REAL_GT0, rms_m_s2, ground_motion.rms_m_s2, 1.0, _, _, _)                                 \
    X(s, U64,      seed, ground_motion.seed, 1, _, _, _)

/* specimen.damper */
#define DAMPER_FIELDS(X, s)                                                                        \
    X(s, ENUM,     model, specimen.damper.model, -1, _, _, damper_models)                          \
    /* linear-spring only, and required there */                                                  \
    X(s, REAL_GT0, stiffness_N_per_m, specimen.damper.stiffness_N_per_m, 0, _, _, _)               \
    X(s, INT,      substeps, specimen.damper.substeps, 0, 0, 1000, _)

/* specimen.true_scale */
#define TRUE_SCALE_FIELDS(X, s)                                                                    \
    X(s, REAL_IN, alpha, specimen.true_scale.alpha, 1.0, 0.01, 100, _)                             \
    X(s, REAL_IN, c0, specimen.true_scale.c0, 1.0, 0.01, 100, _)                                   \
    X(s, REAL_IN, c1, specimen.true_scale.c1, 1.0, 0.01, 100, _)                                   \
    X(s, REAL_IN, gamma_beta, specimen.true_scale.gamma_beta, 1.0, 0.01, 100, _)                   \
    X(s, REAL_IN, A, specimen.true_scale.A, 1.0, 0.01, 100, _)                                    \
    /* both damper presets have n = 2, and the model needs n >= 1 */                              \
    X(s, REAL_IN, n, specimen.true_scale.n, 1.0, 0.5, 4, _)

/* specimen */
#define SPECIMEN_FIELDS(X, s)                                                                      \
    /* at most n_dof */                                                                            \
    X(s, INT, floor, specimen.floor, 1, 1, DRTHS_EXPERIMENT_MAX_DOF, _)                            \
    X(s, MAP, damper, _, _, _, _, damper)                                                          \
    X(s, MAP, true_scale, _, _, _, _, true_scale)

/* control */
#define CONTROL_FIELDS(X, s)                                                                       \
    X(s, ENUM,    mode, control.mode, DRTHS_CONTROL_PASSIVE_OFF, _, _, control_modes)              \
    /* fixed only, and required there: 0..drths_experiment_command_max(damper model) */            \
    X(s, REAL,    command, control.command, 0, _, _, _)                                            \
    /* clipped-optimal only (0 otherwise); q_disp + q_acc > 0 */                                   \
    X(s, REAL_IN, q_disp, control.q_disp, 1.0, 0, 1e12, _)                                         \
    X(s, REAL_IN, q_acc, control.q_acc, 1.0, 0, 1e12, _)                                           \
    X(s, REAL_IN, r, control.r, 100.0, 1e-12, 1e12, _)

/* actuator.plant_scale */
#define PLANT_SCALE_FIELDS(X, s)                                                                   \
    X(s, REAL_IN, gain, actuator.plant_scale.gain, 1.0, 0.1, 10, _)                                \
    X(s, REAL_IN, bandwidth, actuator.plant_scale.bandwidth, 1.0, 0.1, 10, _)                      \
    X(s, REAL_IN, real_pole, actuator.plant_scale.real_pole, 1.0, 0.1, 10, _)                      \
    X(s, REAL_IN, complex_pole, actuator.plant_scale.complex_pole, 1.0, 0.1, 10, _)

/* actuator.adaptive_range: the plants the adaptive compensation's bounds admit (min <= max) */
#define ADAPTIVE_RANGE_FIELDS(X, s)                                                                \
    X(s, REAL_IN, gain_min, actuator.adaptive_range.gain_min, 0.7, 0.1, 10, _)                     \
    X(s, REAL_IN, gain_max, actuator.adaptive_range.gain_max, 1.4, 0.1, 10, _)                     \
    X(s, REAL_IN, bandwidth_min, actuator.adaptive_range.bandwidth_min, 0.5, 0.1, 10, _)           \
    X(s, REAL_IN, bandwidth_max, actuator.adaptive_range.bandwidth_max, 2.0, 0.1, 10, _)           \
    X(s, REAL_IN, real_pole_min, actuator.adaptive_range.real_pole_min, 0.5, 0.1, 10, _)           \
    X(s, REAL_IN, real_pole_max, actuator.adaptive_range.real_pole_max, 2.0, 0.1, 10, _)           \
    X(s, REAL_IN, complex_pole_min, actuator.adaptive_range.complex_pole_min, 0.5, 0.1, 10, _)     \
    X(s, REAL_IN, complex_pole_max, actuator.adaptive_range.complex_pole_max, 2.0, 0.1, 10, _)

/* actuator */
#define ACTUATOR_FIELDS(X, s)                                                                      \
    X(s, ENUM,     plant, actuator.plant, DRTHS_ACTUATOR_PLANT_IDEAL, _, _, actuator_plants)       \
    X(s, ENUM,     compensation, actuator.compensation, DRTHS_COMPENSATION_NONE, _, _,             \
      compensations)                                                                               \
    X(s, REAL_GE0, noise_displacement_m, actuator.noise_displacement_m, 0, _, _, _)                \
    X(s, REAL_GE0, noise_force_N, actuator.noise_force_N, 0, _, _, _)                              \
    /* 0 (no quantisation) or 8..24 */                                                             \
    X(s, INT,      adc_bits, actuator.adc_bits, 0, 0, 24, _)                                       \
    X(s, REAL_GT0, displacement_range_m, actuator.displacement_range_m, 0.1, _, _, _)              \
    X(s, REAL_GT0, force_range_N, actuator.force_range_N, 250000, _, _, _)                         \
    X(s, INT,      io_delay_ticks, actuator.io_delay_ticks, 0, 0, 10, _)                           \
    X(s, U64,      seed, actuator.seed, 1, _, _, _)                                                \
    X(s, REAL_IN,  adaptive_window_s, actuator.adaptive_window_s, 2.0, 0.05, 600, _)               \
    /* 0 (derived from adaptive_range) or 1..100 */                                               \
    X(s, REAL_IN,  adaptive_bound, actuator.adaptive_bound, 0.0, 0, 100, _)                        \
    X(s, MAP,      plant_scale, _, _, _, _, plant_scale)                                           \
    X(s, MAP,      adaptive_range, _, _, _, _, adaptive_range)

/* link */
#define LINK_FIELDS(X, s)                                                                          \
    X(s, INT,     redundancy, link.redundancy, 8, 1, 16, _)                                        \
    X(s, INT,     probes, link.probes, 500, 10, 100000, _)                                         \
    X(s, REAL_IN, quantile, link.quantile, 0.999, 0.5, 1.0, _)                                     \
    X(s, INT,     safety_margin_ticks, link.safety_margin_ticks, 10, 0, 100000, _)                 \
    /* < physical.playout_ticks */                                                                 \
    X(s, INT,     loop_delay_ticks, link.loop_delay_ticks, 0, 0, 1000000, _)                       \
    X(s, OPTPATH, key_file, _, _, _, _, _)

/* numerical */
#define NUMERICAL_FIELDS(X, s)                                                                     \
    /* host:port or [IPv6]:port */                                                                 \
    X(s, TEXT, peer, numerical.peer, "127.0.0.1:47000", _, _, _)                                   \
    X(s, INT,  reorder_ticks, numerical.reorder_ticks, 10, 1, 10000, _)                            \
    X(s, ENUM, smith, numerical.smith, DRTHS_SMITH_FIXED, _, _, smith_modes)                      \
    /* the stability detector (site-numerical/stability.h); ratio 0 turns it off */             \
    X(s, REAL_IN, stability_ratio, numerical.stability_ratio, 0.5, 0, 100, _)                      \
    X(s, REAL_IN, stability_span_s, numerical.stability_span_s, 0.3, 0.01, 60, _)                  \
    X(s, REAL_GE0, stability_min_amplitude_m, numerical.stability_min_amplitude_m, 0.0002, _, _, \
      _)                                                                                           \
    X(s, REAL_IN, stability_max_cycle_s, numerical.stability_max_cycle_s, 2.0, 0.01, 60, _)      \
    /* a damper model file (drths-physical --characterize): the Smith predictor's model */        \
    X(s, OPTPATH, smith_model, _, _, _, _, _)

/* daq.command_out, .current_out, .displacement_in, .force_in: one analog channel each. The
 * prefix is the channel's own path. */
#define DAQ_CHANNEL_FIELDS(X, s)                                                                   \
    /* required */                                                                                 \
    X(s, INT,  subdevice, subdevice, 0, 0, 255, _)                                                 \
    /* required */                                                                                 \
    X(s, INT,  channel, channel, 0, 0, 65535, _)                                                   \
    X(s, INT,  range, range, 0, 0, 255, _)                                                         \
    X(s, ENUM, aref, aref, DRTHS_DAQ_AREF_GROUND, _, _, daq_arefs)                                 \
    /* required, not 0 */                                                                          \
    X(s, REAL, units_per_volt, units_per_volt, 0, _, _, _)                                         \
    X(s, REAL, offset, offset, 0, _, _, _)

/* The four signal mappings, in daq and in each of physical.channels[i].daq (where an absent one
 * is the daq section's). */
#define DAQ_SIGNAL_FIELDS(X, s)                                                                    \
    X(s, MAP, command_out, _, _, _, _, daq_channel)                                                \
    X(s, MAP, current_out, _, _, _, _, daq_channel)                                                \
    X(s, MAP, displacement_in, _, _, _, _, daq_channel)                                            \
    X(s, MAP, force_in, _, _, _, _, daq_channel)

/* The limits, in physical and in each of physical.channels (where an absent one is the
 * physical section's: fill_channel parses only those given, so the defaults are physical's). */
#define LIMIT_FIELDS(X, s)                                                                         \
    X(s, REAL_GT0, limit_displacement_m, physical.limit_displacement_m, 0.1, _, _, _)              \
    X(s, REAL_GT0, limit_velocity_m_s, physical.limit_velocity_m_s, 1.0, _, _, _)                  \
    /* with the virtual back end and adc_bits: below actuator.force_range_N */                    \
    X(s, REAL_GT0, limit_force_N, physical.limit_force_N, 240000, _, _, _)                         \
    X(s, REAL_GT0, limit_drive_m, physical.limit_drive_m, 0.1, _, _, _)                            \
    /* the rest of the drive envelope (site-physical/envelope.h) */                               \
    X(s, REAL_GT0, limit_drive_velocity_m_s, physical.limit_drive_velocity_m_s, 1.25, _, _, _)     \
    X(s, REAL_GT0, limit_drive_acceleration_m_s2, physical.limit_drive_acceleration_m_s2, 200, _, \
      _, _)                                                                                        \
    X(s, REAL_GT0, limit_drive_offset_m, physical.limit_drive_offset_m, 0.01, _, _, _)             \
    /* with the virtual back end and adc_bits: below actuator.displacement_range_m */             \
    X(s, REAL_GT0, limit_measured_displacement_m, physical.limit_measured_displacement_m, 0.095,  \
      _, _, _)

/* physical.channels[i]: one actuator channel. specimen and actuator are read as the top-level
 * sections of those names (same keys, defaults and checks) and replace them for this channel
 * when given; each limit absent takes the physical section's value. Messages name the field
 * under "physical.channels[i]." (vctx_t.prefix). */
#define CHANNEL_FIELDS(X, s)                                                                       \
    /* read by hand (fill_channel): 1..31 of A-Z a-z 0-9 _ - ., unique; default ch<i+1> */      \
    X(s, TEXT,     name, name, NULL, _, _, _)                                                      \
    /* sites[i].channels[j] only (required there, 1..n_dof, read by hand): the DOF its damper     \
     * acts on, as specimen.floor */                                                               \
    X(s, TEXT,     floor, name, NULL, _, _, _)                                                     \
    X(s, MAP,      specimen, _, _, _, _, specimen)                                                 \
    X(s, MAP,      actuator, _, _, _, _, actuator)                                                 \
    LIMIT_FIELDS(X, s)                                                                             \
    X(s, MAP,      daq, _, _, _, _, chdaq)

/* sites[i]: one actuator site (config_sites.c). Its channels are read as physical.channels'
 * entries (CHANNEL_FIELDS), with floor. */
#define SITE_FIELDS(X, s)                                                                          \
    /* read by hand: 1..31 of A-Z a-z 0-9 _ - ., unique; required */                              \
    X(s, TEXT,     name, name, NULL, _, _, _)                                                      \
    /* required: host:port or [IPv6]:port, where the numerical site sends this link's datagrams */\
    X(s, TEXT,     address, name, NULL, _, _, _)                                                   \
    /* host:port or [IPv6]:port the actuator site binds; default address */                      \
    X(s, TEXT,     listen, name, NULL, _, _, _)                                                    \
    /* absent: link.key_file */                                                                    \
    X(s, OPTPATH,  key_file, _, _, _, _, _)                                                        \
    /* required: 1..DRTHS_EXPERIMENT_MAX_CHANNELS */                                               \
    X(s, SEQ,      channels, _, _, _, _, channel)

/* physical */
#define PHYSICAL_FIELDS(X, s)                                                                      \
    /* host:port or [IPv6]:port */                                                                 \
    X(s, TEXT,     listen, physical.listen, "0.0.0.0:47000", _, _, _)                              \
    /* 0 = one second of ticks (at least 300); otherwise 10..1000000 */                            \
    X(s, INT,      playout_ticks, physical.playout_ticks, 0, 0, 1000000, _)                        \
    /* -1 = not given: the budget is max_concealed_ms (the older field wins when given) */       \
    X(s, INT,      max_concealed_ticks, physical.max_concealed_ticks, -1, -1, 10000, _)            \
    X(s, REAL_IN,  max_concealed_ms, physical.max_concealed_ms, 50, 0, 10000, _)                   \
    X(s, REAL_IN,  watchdog_ms, physical.watchdog_ms, 100, 1, 60000, _)                            \
    X(s, REAL_IN,  max_tick_late_ms, physical.max_tick_late_ms, 20, 0.01, 60000, _)                \
    LIMIT_FIELDS(X, s)                                                                             \
    X(s, ENUM,     hold, physical.hold, DRTHS_HOLD_AT_POSITION, _, _, hold_modes)                  \
    /* |value| < limit_drive_m and < limit_measured_displacement_m */                              \
    X(s, REAL,     safe_position_m, physical.safe_position_m, 0.0, _, _, _)                        \
    X(s, REAL_GT0, ramp_rate_m_s, physical.ramp_rate_m_s, 0.05, _, _, _)                           \
    X(s, REAL_IN,  feedforward_max_acceleration_m_s2, physical.feedforward_max_acceleration_m_s2, \
      50.0, 0, 1e6, _)                                                                             \
    X(s, REAL_IN,  feedforward_max_jerk_m_s3, physical.feedforward_max_jerk_m_s3, 3e4, 0, 1e9, _)\
    /* the stability monitor; stability_window_s 0 = off */                                       \
    X(s, REAL_IN,  stability_window_s, physical.stability_window_s, 0.2, 0, 10, _)                 \
    X(s, INT,      stability_windows, physical.stability_windows, 4, 2, 64, _)                    \
    X(s, REAL_GE0, stability_min_amplitude_m, physical.stability_min_amplitude_m, 0.002, _, _, _) \
    X(s, REAL_GE0, stability_quiet_amplitude_m, physical.stability_quiet_amplitude_m, 0.0005, _, _,\
      _)                                                                                           \
    X(s, REAL_IN,  stability_growth_per_s, physical.stability_growth_per_s, 2.0, 0.01, 100, _)     \
    X(s, REAL_IN,  stability_min_decay_per_s, physical.stability_min_decay_per_s, 0.25, -100, 100,\
      _)                                                                                           \
    /* absent: one channel; else 2..DRTHS_EXPERIMENT_MAX_CHANNELS (fill_channels) */              \
    X(s, SEQ,      channels, _, _, _, _, channel)

/* output */
#define OUTPUT_FIELDS(X, s)                                                                        \
    /* not empty */                                                                                \
    X(s, TEXT, directory, output.directory, "runs", _, _, _)

/* acceptance: read by drths-report, not fingerprinted (protocol/fingerprint.c leaves it out). */
#define ACCEPTANCE_FIELDS(X, s)                                                                    \
    X(s, REAL_IN, displacement_rms_error_pct, acceptance.displacement_rms_error_pct, 1, 0, 1e6, _) \
    X(s, REAL_IN, displacement_peak_error_pct, acceptance.displacement_peak_error_pct, 1, 0, 1e6,  \
      _)                                                                                           \
    X(s, REAL_IN, acceleration_rms_error_pct, acceptance.acceleration_rms_error_pct, 5, 0, 1e6, _) \
    X(s, REAL_IN, tracking_rms_error_pct, acceptance.tracking_rms_error_pct, 2, 0, 1e6, _)         \
    X(s, REAL_IN, concealed_commands_pct, acceptance.concealed_commands_pct, 0.5, 0, 100, _)       \
    X(s, REAL_IN, concealed_feedback_pct, acceptance.concealed_feedback_pct, 0.5, 0, 100, _)       \
    /* the largest drive change in one tick over the largest command change (docs/report.md) */  \
    X(s, REAL_IN, drive_step_ratio, acceptance.drive_step_ratio, 2, 1, 1e6, _)                     \
    /* last: config.c parses the section from displacement_rms_error_pct to hold_allowed */      \
    X(s, ENUM, hold_allowed, acceptance.hold_allowed, 0, _, _, booleans)

/* daq: with backend comedi the four channels are required; the two outputs, and the two
 * inputs, must be on different channels. */
#define DAQ_FIELDS(X, s)                                                                           \
    X(s, ENUM,    backend, daq.backend, DRTHS_DAQ_BACKEND_VIRTUAL, _, _, daq_backends)             \
    /* not empty */                                                                                \
    X(s, TEXT,    device, daq.device, "/dev/comedi0", _, _, _)                                     \
    DAQ_SIGNAL_FIELDS(X, s)                                                                        \
    /* absent: comedilib's default path */                                                         \
    X(s, OPTPATH, calibration_file, _, _, _, _, _)

/* The top level's acceptance row; drths_experiment_load_acceptance reads the file with it alone
 * (acceptance_top below). */
#define TOP_ACCEPTANCE_FIELDS(X, s)                                                                \
    X(s, MAP,     acceptance, _, _, _, _, acceptance)

/* The top level. */
#define TOP_FIELDS(X, s)                                                                           \
    /* required, not empty */                                                                      \
    X(s, TEXT,    name, name, NULL, _, _, _)                                                       \
    X(s, TEXT,    description, description, "", _, _, _)                                          \
    X(s, REAL_IN, rate_hz, rate_hz, 5000, 100, 100000, _)                                          \
    /* required */                                                                                 \
    X(s, MAP,     structure, _, _, _, _, structure)                                                \
    /* required */                                                                                 \
    X(s, MAP,     ground_motion, _, _, _, _, ground)                                               \
    /* required */                                                                                 \
    X(s, MAP,     specimen, _, _, _, _, specimen)                                                  \
    X(s, MAP,     control, _, _, _, _, control)                                                    \
    X(s, MAP,     actuator, _, _, _, _, actuator)                                                  \
    X(s, MAP,     link, _, _, _, _, link)                                                          \
    X(s, MAP,     numerical, _, _, _, _, numerical)                                                \
    X(s, MAP,     physical, _, _, _, _, physical)                                                  \
    X(s, MAP,     output, _, _, _, _, output)                                                      \
    X(s, MAP,     daq, _, _, _, _, daq)                                                            \
    /* absent: one actuator site (the specimen, actuator, physical and daq sections); else      \
     * 1..DRTHS_EXPERIMENT_MAX_SITES (config_sites.c) */                                          \
    X(s, SEQ,     sites, _, _, _, _, site)                                                         \
    TOP_ACCEPTANCE_FIELDS(X, s)

/* Every section: its name, table, output struct and path in messages. A nested section comes
 * before the sections that hold it, as config_sections.c defines their schemas in this order. */
#define SECTIONS(X)                                                                                \
    X(damping,        DAMPING_FIELDS,        drths_experiment_t,         "structure.damping")      \
    X(structure,      STRUCTURE_FIELDS,      drths_experiment_t,         "structure")              \
    X(ground,         GROUND_FIELDS,         drths_experiment_t,         "ground_motion")          \
    X(damper,         DAMPER_FIELDS,         drths_experiment_t,         "specimen.damper")        \
    X(true_scale,     TRUE_SCALE_FIELDS,     drths_experiment_t,         "specimen.true_scale")    \
    X(specimen,       SPECIMEN_FIELDS,       drths_experiment_t,         "specimen")               \
    X(control,        CONTROL_FIELDS,        drths_experiment_t,         "control")                \
    X(plant_scale,    PLANT_SCALE_FIELDS,    drths_experiment_t,         "actuator.plant_scale")   \
    X(adaptive_range, ADAPTIVE_RANGE_FIELDS, drths_experiment_t,         "actuator.adaptive_range") \
    X(actuator,       ACTUATOR_FIELDS,       drths_experiment_t,         "actuator")               \
    X(link,           LINK_FIELDS,           drths_experiment_t,         "link")                   \
    X(numerical,      NUMERICAL_FIELDS,      drths_experiment_t,         "numerical")              \
    X(daq_channel,    DAQ_CHANNEL_FIELDS,    drths_daq_channel_config_t, "")                       \
    X(chdaq,          DAQ_SIGNAL_FIELDS,     drths_experiment_t,         "daq")                    \
    X(channel,        CHANNEL_FIELDS,        drths_experiment_t,         "")                       \
    X(site,           SITE_FIELDS,           drths_experiment_t,         "")                       \
    X(physical,       PHYSICAL_FIELDS,       drths_experiment_t,         "physical")               \
    X(output,         OUTPUT_FIELDS,         drths_experiment_t,         "output")                 \
    X(acceptance,     ACCEPTANCE_FIELDS,     drths_experiment_t,         "acceptance")             \
    X(daq,            DAQ_FIELDS,            drths_experiment_t,         "daq")                    \
    X(top,            TOP_FIELDS,            drths_experiment_t,         "")                       \
    X(acceptance_top, TOP_ACCEPTANCE_FIELDS, drths_experiment_t,         "")
SECTIONS(DECLARE_SECTION)

/* clang-format on */

/* Every key optional in the schemas (the fill functions report what is missing). */
#define OPT (CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL)

/* A list entry that is a string. */
extern const cyaml_schema_value_t drths_cfg_string_entry;
/* The whole file (struct raw_top), and the acceptance section alone (struct
 * raw_acceptance_top, to be loaded with every other key ignored). */
extern const cyaml_schema_value_t drths_cfg_top_schema;
extern const cyaml_schema_value_t drths_cfg_acceptance_top_schema;

/* The row of key in section s, and drths_cfg_parse_field(s) for one row or a run of rows of s
 * (in the fill functions, where the error context is c). */
#define SPEC(s, key) (&drths_cfg_##s##_spec[F_##s##_##key])
#define PARSE(s, key, raw, out)                                                                    \
    drths_cfg_parse_field(c, drths_cfg_##s##_prefix, SPEC(s, key), raw, out)
#define PARSE_RANGE(s, first, last, raw, out)                                                      \
    drths_cfg_parse_fields(c, drths_cfg_##s##_prefix, drths_cfg_##s##_spec, F_##s##_##first,       \
                           F_##s##_##last, raw, out)

#endif
