/* Experiment file loader: the two examples, defaults, the fingerprint, and wrong files whose
 * messages must name the field path (tests/data/config/bad-*.yaml). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config/config.h"
#include "common/config/setup.h"
#include "protocol/fingerprint.h"
#include "text_file.h"

static char *src_path(const char *rel)
{
    const char *top = getenv("DRTHS_SOURCE_DIR");
    if (!top)
        top = ".";
    size_t n = strlen(top) + strlen(rel) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", top, rel);
    return p;
}

static void load_ok(drths_experiment_t *x, const char *path)
{
    drths_error_t err = {{0}};
    int r = drths_experiment_load(x, path, &err);
    if (r != 0)
        fail_msg("%s: %s", path, err.msg);
}

static void fingerprint(const drths_experiment_t *x, uint8_t fp[32])
{
    drths_error_t err = {{0}};
    int r = drths_experiment_fingerprint(x, fp, &err);
    if (r != 0)
        fail_msg("fingerprint: %s", err.msg);
}

static void test_example_three_story(void **state)
{
    (void)state;
    char *p = src_path("examples/three-story-elcentro.yaml");
    drths_experiment_t x;
    load_ok(&x, p);
    assert_string_equal(x.name, "three-story-elcentro");
    assert_int_equal(x.n_dof, 3);
    assert_true(x.rate_hz == 5000);
    assert_int_equal(x.structure.model, DRTHS_STRUCTURE_SHEAR_BUILDING);
    assert_true(x.structure.floor_mass_kg[2] == 5.0e4);
    /* K built from the storeys: k1 + k2 on the first diagonal entry, -k2 beside it, k3 last. */
    assert_true(x.structure.stiffness_N_per_m[0] == 7.3955e7 + 1.00510e8);
    assert_true(x.structure.stiffness_N_per_m[1] == -1.00510e8);
    assert_true(x.structure.stiffness_N_per_m[3] == -1.00510e8);
    assert_true(x.structure.stiffness_N_per_m[2] == 0);
    assert_true(x.structure.stiffness_N_per_m[8] == 8.5740e7);
    assert_true(x.structure.mass_kg[4] == 5.0e4 && x.structure.mass_kg[1] == 0);
    assert_null(x.structure.damping_N_s_per_m);
    assert_int_equal(x.structure.damping.kind, DRTHS_DAMPING_MODAL);
    assert_int_equal(x.structure.damping.n_ratio, 1);
    assert_true(x.structure.damping.ratio[0] == 0.02);
    assert_int_equal(x.structure.integrator, DRTHS_INTEGRATOR_CHEN_RICLES);
    assert_int_equal(x.ground_motion.kind, DRTHS_GROUND_MOTION_RECORD);
    assert_int_equal(x.ground_motion.units, DRTHS_ACCEL_G);
    assert_non_null(strstr(x.ground_motion.record_path,
                           "/examples/records/elcentro-1940-ns-peknold.AT2"));
    assert_true(x.ground_motion.record_path[0] == '/');
    assert_int_equal(x.specimen.floor, 1);
    assert_int_equal(x.specimen.damper.model, DRTHS_DAMPER_PHILLIPS2013);
    assert_int_equal(x.control.mode, DRTHS_CONTROL_CLIPPED_OPTIMAL);
    assert_int_equal(x.actuator.plant, DRTHS_ACTUATOR_PLANT_THREE_POLE);
    assert_int_equal(x.actuator.compensation, DRTHS_COMPENSATION_ADAPTIVE);
    assert_true(x.actuator.plant_scale.bandwidth == 0.8 && x.actuator.plant_scale.gain == 0.95);
    /* The adaptive bounds come from the plant range by default (issue 30). */
    assert_true(x.actuator.adaptive_window_s == 2.0 && x.actuator.adaptive_bound == 0.0);
    assert_true(x.actuator.adaptive_range.gain_min == 0.7 &&
                x.actuator.adaptive_range.gain_max == 1.4 &&
                x.actuator.adaptive_range.bandwidth_min == 0.5 &&
                x.actuator.adaptive_range.complex_pole_max == 2.0);
    assert_int_equal(x.actuator.adc_bits, 16);
    assert_int_equal(x.actuator.io_delay_ticks, 1);
    assert_int_equal(x.physical.hold, DRTHS_HOLD_AT_POSITION);
    assert_true(x.physical.ramp_rate_m_s == 0.05 && x.physical.limit_drive_m == 0.1);
    assert_true(x.actuator.noise_force_N == 50);
    assert_int_equal(x.numerical.smith, DRTHS_SMITH_FIXED);
    assert_null(x.link.key_file);
    assert_string_equal(x.numerical.peer, "127.0.0.1:47000");
    assert_string_equal(x.output.directory, "runs");
    drths_experiment_close(&x);
    drths_experiment_close(&x); /* safe twice */
    assert_null(x.name);
    free(p);
}

static void test_example_dyke(void **state)
{
    (void)state;
    char *p = src_path("examples/dyke1996-three-story.yaml");
    drths_experiment_t x;
    load_ok(&x, p);
    assert_int_equal(x.n_dof, 3);
    assert_int_equal(x.structure.model, DRTHS_STRUCTURE_MATRICES);
    assert_null(x.structure.floor_mass_kg);
    assert_true(x.structure.mass_kg[0] == 98.3 && x.structure.mass_kg[8] == 98.3);
    assert_true(x.structure.stiffness_N_per_m[4] == 1.37e6);
    assert_true(x.structure.stiffness_N_per_m[5] == -6.84e5);
    assert_true(x.structure.stiffness_N_per_m[7] == -6.84e5);
    assert_true(x.structure.stiffness_N_per_m[8] == 6.84e5);
    assert_non_null(x.structure.damping_N_s_per_m);
    assert_true(x.structure.damping_N_s_per_m[0] == 175);
    assert_true(x.structure.damping_N_s_per_m[1] == -50);
    assert_true(x.structure.damping_N_s_per_m[8] == 50);
    assert_int_equal(x.structure.damping.kind, DRTHS_DAMPING_MATRIX);
    assert_true(x.ground_motion.time_compression == 5.0);
    assert_int_equal(x.specimen.damper.model, DRTHS_DAMPER_SPENCER1997);
    assert_int_equal(x.control.mode, DRTHS_CONTROL_FIXED);
    assert_true(x.control.command == 1.0);
    assert_true(drths_experiment_command_max(x.specimen.damper.model) == 2.25);
    drths_experiment_close(&x);
    free(p);
}

static void test_defaults(void **state)
{
    (void)state;
    char *p = src_path("tests/data/config/minimal.yaml");
    drths_experiment_t x;
    load_ok(&x, p);
    assert_string_equal(x.description, "");
    assert_true(x.rate_hz == 5000);
    assert_int_equal(x.structure.damping.kind, DRTHS_DAMPING_MODAL);
    assert_true(x.structure.damping.ratio[0] == 0.02);
    assert_int_equal(x.structure.integrator, DRTHS_INTEGRATOR_CHEN_RICLES);
    assert_int_equal(x.ground_motion.format, DRTHS_RECORD_FORMAT_AUTO);
    assert_int_equal(x.ground_motion.units, DRTHS_ACCEL_G);
    assert_int_equal(x.ground_motion.column, 1);
    assert_true(x.ground_motion.scale == 1.0 && x.ground_motion.time_compression == 1.0);
    assert_true(x.ground_motion.duration_s == 0 && x.ground_motion.tail_s == 0);
    assert_int_equal(x.specimen.floor, 1);
    assert_int_equal(x.specimen.damper.substeps, 0);
    assert_true(x.specimen.true_scale.gamma_beta == 1.0 && x.specimen.true_scale.A == 1.0);
    assert_true(x.specimen.true_scale.n == 1.0);
    assert_int_equal(x.control.mode, DRTHS_CONTROL_PASSIVE_OFF);
    assert_true(x.control.command == 0);
    assert_int_equal(x.actuator.plant, DRTHS_ACTUATOR_PLANT_IDEAL);
    assert_int_equal(x.actuator.compensation, DRTHS_COMPENSATION_NONE);
    assert_true(x.actuator.displacement_range_m == 0.1 && x.actuator.force_range_N == 250000);
    assert_int_equal(x.link.redundancy, 8);
    assert_int_equal(x.link.probes, 500);
    assert_true(x.link.quantile == 0.999);
    assert_int_equal(x.link.safety_margin_ticks, 10);
    assert_int_equal(x.link.loop_delay_ticks, 0);
    assert_int_equal(x.numerical.reorder_ticks, 10);
    assert_int_equal(x.numerical.smith, DRTHS_SMITH_FIXED);
    assert_string_equal(x.physical.listen, "0.0.0.0:47000");
    assert_int_equal(x.daq.backend, DRTHS_DAQ_BACKEND_VIRTUAL);
    assert_string_equal(x.daq.device, "/dev/comedi0");
    assert_false(x.daq.command_out.given || x.daq.force_in.given);
    assert_null(x.daq.calibration_file);
    assert_null(x.daq.calibration_path);
    assert_int_equal(x.physical.playout_ticks, 5000); /* 0 = one second at 5000 Hz */
    /* Not given: max_concealed_ms (50) at 5000 Hz. */
    assert_int_equal(x.physical.max_concealed_ticks, 250);
    assert_true(x.physical.max_concealed_ms == 50);
    assert_true(x.physical.watchdog_ms == 100);
    assert_true(x.physical.limit_displacement_m == 0.1 && x.physical.limit_velocity_m_s == 1.0);
    /* Below the default converters' full scale (actuator.force_range_N, displacement_range_m),
     * so that they can trip. */
    assert_true(x.physical.limit_force_N == 240000);
    assert_true(x.physical.limit_drive_m == 0.1 &&
                x.physical.limit_measured_displacement_m == 0.095);
    assert_int_equal(x.physical.hold, DRTHS_HOLD_AT_POSITION);
    assert_true(x.physical.safe_position_m == 0.0 && x.physical.ramp_rate_m_s == 0.05);
    assert_true(x.physical.feedforward_max_acceleration_m_s2 == 50.0 &&
                x.physical.feedforward_max_jerk_m_s3 == 3e4);
    /* The stability monitor is on by default. */
    assert_true(x.physical.stability_window_s == 0.2);
    assert_int_equal(x.physical.stability_windows, 4);
    assert_true(x.physical.stability_min_amplitude_m == 0.002);
    assert_true(x.physical.stability_growth_per_s == 2.0);
    assert_true(x.physical.stability_quiet_amplitude_m == 0.0005);
    assert_true(x.physical.stability_min_decay_per_s == 0.25);
    /* The drive envelope and the stall threshold. */
    assert_true(x.physical.limit_drive_velocity_m_s == 1.25 &&
                x.physical.limit_drive_acceleration_m_s2 == 200 &&
                x.physical.limit_drive_offset_m == 0.01);
    assert_true(x.physical.max_tick_late_ms == 20);
    /* The acceptance section, from the loader and from drths_acceptance_default alike. */
    assert_true(x.acceptance.drive_step_ratio == 2);
    assert_true(x.acceptance.tracking_rms_error_pct == 2 && x.acceptance.hold_allowed == 0);
    drths_acceptance_t acc;
    drths_acceptance_default(&acc);
    assert_memory_equal(&acc, &x.acceptance, sizeof acc);
    drths_experiment_close(&x);
    free(p);
}


/* ---- a temporary folder with a record, for variants written by the tests ---------------- */

static char tmpdir[64];

static int make_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/drths-test-config-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    char p[128];
    snprintf(p, sizeof p, "%s/rec.txt", tmpdir);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    fputs("time acc\n0 0\n0.01 0.1\n0.02 -0.1\n", f);
    fclose(f);
    return 0;
}

static int remove_tmpdir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *write_tmp(const char *name, const char *text)
{
    char *p = malloc(256);
    assert_non_null(p);
    snprintf(p, 256, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static const char base_yaml[] =
    "name: fp\n"
    "structure:\n"
    "  model: shear-building\n"
    "  floor_mass_kg: [1000, 1000]\n"
    "  storey_stiffness_N_per_m: [1.0e6, 1.0e6]\n"
    "ground_motion:\n"
    "  file: rec.txt\n"
    "specimen:\n"
    "  damper: {model: phillips2013-200kN}\n";

/* Fingerprint of base_yaml with extra appended (YAML keys must not repeat, so extra adds
 * sections that base_yaml lacks, or replaces a line). */
static void fp_of(const char *text, uint8_t fp[32])
{
    char *p = write_tmp("fp.yaml", text);
    drths_experiment_t x;
    load_ok(&x, p);
    fingerprint(&x, fp);
    drths_experiment_close(&x);
    free(p);
}

static void fp_with(const char *extra, uint8_t fp[32])
{
    char text[2048];
    snprintf(text, sizeof text, "%s%s", base_yaml, extra);
    fp_of(text, fp);
}

static void test_fingerprint(void **state)
{
    (void)state;
    uint8_t a[32], b[32];
    fp_with("", a);
    fp_with("", b);
    assert_memory_equal(a, b, 32); /* stable */

    /* Explicit defaults are the same experiment as omitted ones. */
    fp_with("rate_hz: 5000\ncontrol: {mode: passive-off}\nlink: {redundancy: 8, quantile: 0.999}\n",
            b);
    assert_memory_equal(a, b, 32);

    /* Not shared: the fingerprint does not change. */
    static const char *const same[] = {
        /* n = 1 is not printed, so files from before it existed keep their fingerprints */
        "  true_scale: {n: 1}\n", /* (base_yaml ends inside specimen) */
        "physical: {listen: \"0.0.0.0:48000\"}\n",
        "numerical: {peer: \"[::1]:47001\", reorder_ticks: 20, smith: adaptive}\n",
        "actuator: {plant: three-pole, noise_force_N: 50, adc_bits: 16}\n",
        "output: {directory: elsewhere}\n",
        "description: another description\n",
        "link: {key_file: lab.key}\n",
        "daq: {backend: comedi, device: /dev/comedi1,\n"
        "      command_out: {subdevice: 1, channel: 0, units_per_volt: 0.01},\n"
        "      current_out: {subdevice: 1, channel: 1, units_per_volt: 0.25},\n"
        "      displacement_in: {subdevice: 0, channel: 0, units_per_volt: 0.01},\n"
        "      force_in: {subdevice: 0, channel: 1, units_per_volt: 25000}}\n",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        fp_with(same[i], b);
        if (memcmp(a, b, 32) != 0)
            fail_msg("fingerprint changed with a non-shared field: %s", same[i]);
    }

    /* Shared: each change gives a different fingerprint. */
    static const char *const differ[] = {
        "rate_hz: 4000\n",
        "  true_scale: {n: 2}\n", /* (base_yaml ends inside specimen) */
        "control: {mode: fixed, command: 1.0}\n",
        "link: {redundancy: 5}\n",
        "link: {loop_delay_ticks: 200}\n",
    };
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        fp_with(differ[i], b);
        if (memcmp(a, b, 32) == 0)
            fail_msg("fingerprint did not change with a shared field: %s", differ[i]);
    }
    /* The clipped-optimal design's weights: explicit defaults are the same, a change is not. */
    uint8_t c1[32], c2[32];
    fp_with("control: {mode: clipped-optimal}\n", c1);
    fp_with("control: {mode: clipped-optimal, q_disp: 1, q_acc: 1, r: 100}\n", c2);
    assert_memory_equal(c1, c2, 32);
    fp_with("control: {mode: clipped-optimal, r: 5}\n", c2);
    assert_memory_not_equal(c1, c2, 32);

    char text[2048];
    snprintf(text, sizeof text, "%s", base_yaml);
    char *m = strstr(text, "[1000, 1000]");
    assert_non_null(m);
    memcpy(m, "[1000, 1001]", 12);
    fp_of(text, b);
    assert_memory_not_equal(a, b, 32);

    /* The record's bytes are part of it: same name, one byte changed. */
    free(write_tmp("rec.txt", "time acc\n0 0\n0.01 0.1\n0.02 -0.2\n"));
    fp_with("", b);
    assert_memory_not_equal(a, b, 32);
    free(write_tmp("rec.txt", "time acc\n0 0\n0.01 0.1\n0.02 -0.1\n"));
    fp_with("", b);
    assert_memory_equal(a, b, 32);

    char hex[65];
    drths_experiment_fingerprint_hex(a, hex);
    assert_int_equal(strlen(hex), 64);
    assert_true(strspn(hex, "0123456789abcdef") == 64);
}

static void test_shared_text(void **state)
{
    (void)state;
    char *p = write_tmp("st.yaml", base_yaml);
    drths_experiment_t x;
    load_ok(&x, p);
    char *text;
    size_t len;
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_shared_text(&x, &text, &len, &err), 0);
    assert_int_equal(strlen(text), len);
    assert_true(strncmp(text, "drths-experiment-shared v1\nname=fp\nrate_hz=5000\n", 48) == 0);
    assert_non_null(strstr(text, "\nstructure.floor_mass_kg=1000,1000\n"));
    assert_non_null(strstr(text, "\nspecimen.damper.model=phillips2013-200kN\n"));
    assert_non_null(strstr(text, "\nground_motion.record_blake2b256="));
    assert_null(strstr(text, "listen"));
    assert_null(strstr(text, "peer"));
    free(text);
    drths_experiment_close(&x);
    free(p);
}

/* physical.stability_*: read, range-checked, 0 turns the monitor off, and not fingerprinted
 * (a site-local safety setting). */
static void test_stability_fields(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof text,
             "%sphysical:\n  stability_window_s: 0\n  stability_windows: 6\n"
             "  stability_min_amplitude_m: 0.005\n  stability_growth_per_s: 1.5\n"
             "  stability_min_decay_per_s: -0.2\n",
             base_yaml);
    char *p = write_tmp("stab.yaml", text);
    drths_experiment_t x;
    load_ok(&x, p);
    assert_true(x.physical.stability_window_s == 0.0);
    assert_int_equal(x.physical.stability_windows, 6);
    assert_true(x.physical.stability_min_amplitude_m == 0.005);
    assert_true(x.physical.stability_growth_per_s == 1.5);
    assert_true(x.physical.stability_min_decay_per_s == -0.2);
    drths_experiment_close(&x);
    free(p);

    uint8_t a[32], b[32];
    fp_with("", a);
    fp_with("physical: {stability_window_s: 0.5, stability_growth_per_s: 3}\n", b);
    assert_memory_equal(a, b, 32);

    snprintf(text, sizeof text, "%sphysical:\n  stability_windows: 1\n", base_yaml);
    p = write_tmp("stab-bad.yaml", text);
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_load(&x, p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "physical.stability_windows: must be in 2..64 (got 1)"));
    free(p);
}

static void test_rayleigh_defaults(void **state)
{
    (void)state;
    char *p = write_tmp("ray.yaml",
                        "name: r\n"
                        "structure:\n"
                        "  model: shear-building\n"
                        "  floor_mass_kg: [1, 1, 1, 1]\n"
                        "  storey_stiffness_N_per_m: [1, 1, 1, 1]\n"
                        "  damping: {kind: rayleigh, ratio: [0.05]}\n"
                        "ground_motion: {kind: white-noise, duration_s: 10, band_hz: [0.5, 25]}\n"
                        "specimen: {floor: 4, damper: {model: linear-spring, stiffness_N_per_m: 1e5}}\n");
    drths_experiment_t x;
    load_ok(&x, p);
    assert_int_equal(x.structure.damping.modes[0], 1);
    assert_int_equal(x.structure.damping.modes[1], 4);
    assert_int_equal(x.ground_motion.kind, DRTHS_GROUND_MOTION_WHITE_NOISE);
    assert_null(x.ground_motion.record_path);
    assert_true(x.ground_motion.band_hz[1] == 25 && x.ground_motion.rms_m_s2 == 1.0);
    assert_int_equal(x.ground_motion.seed, 1);
    assert_true(x.specimen.damper.stiffness_N_per_m == 1e5);
    uint8_t fp[32];
    fingerprint(&x, fp); /* white noise: no record to hash */
    drths_experiment_close(&x);
    free(p);
}

/* A lab's daq section: a +/-10 V set-point of 10 mm/V, a current driver of 0.25 A/V with an
 * offset, an LVDT of 10 mm/V on a differential input and a load cell of 25 kN/V. */
static void test_daq_section(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof text, "%s%s", base_yaml,
             "daq:\n"
             "  backend: comedi\n"
             "  device: /dev/comedi1\n"
             "  command_out: {subdevice: 1, channel: 0, range: 0, aref: ground, "
             "units_per_volt: 0.01}\n"
             "  current_out: {subdevice: 1, channel: 1, range: 1, units_per_volt: 0.25, "
             "offset: -0.05}\n"
             "  displacement_in:\n"
             "    subdevice: 0\n"
             "    channel: 2\n"
             "    aref: diff\n"
             "    units_per_volt: -0.01\n"
             "  force_in: {subdevice: 0, channel: 3, range: 2, aref: common, "
             "units_per_volt: 25000, offset: 12.5}\n"
             "  calibration_file: cal/ni6251.cal\n");
    char *p = write_tmp("daq.yaml", text);
    drths_experiment_t x;
    load_ok(&x, p);
    assert_int_equal(x.daq.backend, DRTHS_DAQ_BACKEND_COMEDI);
    assert_string_equal(x.daq.device, "/dev/comedi1");
    assert_true(x.daq.command_out.given);
    assert_int_equal(x.daq.command_out.subdevice, 1);
    assert_int_equal(x.daq.command_out.channel, 0);
    assert_int_equal(x.daq.command_out.aref, DRTHS_DAQ_AREF_GROUND);
    assert_true(x.daq.command_out.units_per_volt == 0.01 && x.daq.command_out.offset == 0);
    assert_int_equal(x.daq.current_out.range, 1);
    assert_true(x.daq.current_out.offset == -0.05);
    assert_int_equal(x.daq.displacement_in.channel, 2);
    assert_int_equal(x.daq.displacement_in.aref, DRTHS_DAQ_AREF_DIFF);
    assert_true(x.daq.displacement_in.units_per_volt == -0.01);
    assert_int_equal(x.daq.force_in.aref, DRTHS_DAQ_AREF_COMMON);
    assert_int_equal(x.daq.force_in.range, 2);
    assert_true(x.daq.force_in.units_per_volt == 25000 && x.daq.force_in.offset == 12.5);
    assert_string_equal(x.daq.calibration_file, "cal/ni6251.cal");
    char want[256];
    snprintf(want, sizeof want, "%s/cal/ni6251.cal", tmpdir);
    assert_string_equal(x.daq.calibration_path, want); /* resolved against the file's folder */
    drths_experiment_close(&x);
    free(p);

    /* A virtual back end may keep the lab's mappings (checked, not used) and an explicit null
     * calibration file means comedilib's default. */
    snprintf(text, sizeof text, "%s%s", base_yaml,
             "daq: {backend: virtual, calibration_file: null,\n"
             "      force_in: {subdevice: 0, channel: 3, units_per_volt: 25000}}\n");
    p = write_tmp("daqv.yaml", text);
    load_ok(&x, p);
    assert_int_equal(x.daq.backend, DRTHS_DAQ_BACKEND_VIRTUAL);
    assert_true(x.daq.force_in.given && !x.daq.command_out.given);
    assert_null(x.daq.calibration_file);
    drths_experiment_close(&x);
    free(p);
    assert_string_equal(drths_daq_backend_name(DRTHS_DAQ_BACKEND_COMEDI), "comedi");
    assert_string_equal(drths_daq_aref_name(DRTHS_DAQ_AREF_DIFF), "diff");
}

/* ---- wrong files ------------------------------------------------------------------------ */

typedef struct {
    const char *file;  /* under tests/data/config/ */
    int code;
    const char *expect; /* must appear in the message */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"bad-missing-name.yaml", -EINVAL, "bad-missing-name.yaml: name: missing"},
    {"bad-missing-model.yaml", -EINVAL, "structure.model: missing"},
    {"bad-wrong-type.yaml", -EINVAL, ":2: rate_hz: must be a finite number (got \"fast\")"},
    {"bad-negative-mass.yaml", -EINVAL, ":4: structure.floor_mass_kg[1]: must be > 0 (got -5)"},
    {"bad-non-symmetric.yaml", -EINVAL,
     "structure.stiffness_N_per_m[0][1]: matrix must be symmetric"},
    {"bad-non-square.yaml", -EINVAL, "structure.mass_kg[1]: row has fewer entries"},
    {"bad-unknown-key.yaml", -EINVAL, "structure.floor_masses_kg: unknown key"},
    {"bad-unreadable-record.yaml", -ENOENT, "ground_motion.file: cannot open"},
    {"bad-lengths.yaml", -EINVAL, "structure.storey_stiffness_N_per_m: must have as many values"},
    {"bad-rate.yaml", -EINVAL, "rate_hz: must be in 100..100000 (got 50)"},
    {"bad-enum.yaml", -EINVAL,
     "control.mode: must be one of passive-off, passive-on, fixed, "
     "clipped-optimal (got \"semi-active\")"},
    {"bad-floor.yaml", -EINVAL, "specimen.floor: must be in 1..3 (got 4)"},
    {"bad-command.yaml", -EINVAL, "control.command: must be in 0..2.5 A"},
    {"bad-rayleigh-mode.yaml", -EINVAL, "structure.damping.modes[1]: must be in 1..3 (got 5)"},
    {"bad-empty.yaml", -EINVAL, "bad-empty.yaml: empty file"},
    {"bad-not-yaml.yaml", -EINVAL, "bad-not-yaml.yaml: not an experiment file"},
    {"bad-syntax.yaml", -EINVAL, "YAML syntax error"},
    {"bad-exclusive.yaml", -EINVAL,
     "structure.mass_kg: not allowed with structure.model shear-building"},
    {"bad-fraction.yaml", -EINVAL, "specimen.floor: must be a whole number (got 1.5)"},
    {"bad-list-for-value.yaml", -EINVAL, ":1: name: must be a single value, not a list"},
    {"bad-duplicate.yaml", -EINVAL, "link.probes: given twice"},
    {"bad-matrix-cell.yaml", -EINVAL,
     "structure.mass_kg[1][1]: must be a finite number (got \"one\")"},
    {"bad-mechanism.yaml", -EINVAL, "structure.stiffness_N_per_m: must be positive definite"},
    {"bad-spring.yaml", -EINVAL, "specimen.damper.stiffness_N_per_m: missing"},
    {"bad-peer.yaml", -EINVAL, "numerical.peer: must be host:port or [IPv6]:port"},
    {"bad-white-noise-band.yaml", -EINVAL, "ground_motion.band_hz[1]: must be > band_hz[0]"},
    {"bad-infinite.yaml", -EINVAL, "structure.floor_mass_kg[1]: must be a finite number"},
    {"bad-daq-missing-channel.yaml", -EINVAL,
     "daq.force_in: missing (required with daq.backend comedi"},
    {"bad-daq-aref.yaml", -EINVAL,
     ":12: daq.displacement_in.aref: must be one of ground, common, diff (got \"differential\")"},
    {"bad-daq-zero-scale.yaml", -EINVAL, ":13: daq.force_in.units_per_volt: must not be 0"},
    {"bad-daq-same-channel.yaml", -EINVAL,
     "daq.current_out: same subdevice and channel as daq.command_out (1/0)"},
    {"bad-hold-mode.yaml", -EINVAL,
     ":6: physical.hold: must be one of hold, ramp (got \"freeze\")"},
    {"bad-control-r.yaml", -EINVAL, ":7: control.r: must be in 1e-12..1e+12 (got 0)"},
    {"bad-feedforward-jerk.yaml", -EINVAL,
     ":6: physical.feedforward_max_jerk_m_s3: must be in 0..1e+09 (got -1)"},
    {"bad-safe-position.yaml", -EINVAL,
     "physical.safe_position_m: must lie inside physical.limit_drive_m (0.05)"},
    {"bad-force-limit-full-scale.yaml", -EINVAL,
     ":7: physical.limit_force_N: must be below actuator.force_range_N (250000), the converter's "
     "full scale, or it can never trip (got 250000)"},
    {"bad-displacement-limit-full-scale.yaml", -EINVAL,
     "physical.limit_measured_displacement_m: must be below actuator.displacement_range_m (0.05)"},
    {"bad-plant-scale.yaml", -EINVAL, "actuator.plant_scale.bandwidth: must be in 0.1..10 (got 0)"},
    {"bad-adaptive-range.yaml", -EINVAL,
     "actuator.adaptive_range.real_pole_min: 1.5 exceeds real_pole_max 1.2"},
    {"bad-adaptive-bound.yaml", -EINVAL,
     "actuator.adaptive_bound: must be 0 (derived from actuator.adaptive_range) or 1..100 (got "
     "0.5)"},
    {"no-such-experiment.yaml", -ENOENT, "cannot open the experiment file"},
};

static void test_bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/data/config/%s", bad_cases[i].file);
        char *p = src_path(rel);
        drths_experiment_t x;
        memset(&x, 0xa5, sizeof x); /* load must zero it whatever it held */
        drths_error_t err = {{0}};
        int r = drths_experiment_load(&x, p, &err);
        if (r != bad_cases[i].code || !strstr(err.msg, bad_cases[i].expect))
            fail_msg("%s: got %d \"%s\", expected %d and \"%s\"", bad_cases[i].file, r, err.msg,
                     bad_cases[i].code, bad_cases[i].expect);
        /* Nothing to free after a failure, and close is still safe. */
        assert_null(x.name);
        assert_null(x.structure.mass_kg);
        assert_null(x.path);
        drths_experiment_close(&x);
        free(p);
    }
    print_message("%zu wrong files rejected with their field path\n",
                  sizeof bad_cases / sizeof bad_cases[0]);
}

static void test_unreadable_record_permissions(void **state)
{
    (void)state;
    if (geteuid() == 0)
        skip(); /* root reads anything */
    char *rec = write_tmp("secret.txt", "0 0\n");
    assert_int_equal(chmod(rec, 0), 0);
    char text[1024];
    snprintf(text, sizeof text, "%s", base_yaml);
    char *m = strstr(text, "rec.txt");
    memcpy(m, "secret.txt\n", 12);
    char *p = write_tmp("perm.yaml", text);
    drths_experiment_t x;
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_load(&x, p, &err), -EACCES);
    assert_non_null(strstr(err.msg, "ground_motion.file: cannot open"));
    assert_non_null(strstr(err.msg, "Permission denied"));
    free(p);
    free(rec);
}

/* Fields of another mode are ignored with a note naming the field, its line and why, and leave
 * the experiment (and so its fingerprint) as if they were absent. */
static void test_ignored_fields(void **state)
{
    (void)state;
    char *p = src_path("tests/data/config/ignored-control-weights.yaml");
    drths_experiment_t x;
    load_ok(&x, p);
    assert_non_null(x.notes);
    assert_non_null(strstr(x.notes, "ignored-control-weights.yaml:7: control.q_disp: ignored (it "
                                    "applies to control.mode clipped-optimal only; mode is "
                                    "passive-on)\n"));
    assert_non_null(strstr(x.notes, ":9: control.r: ignored"));
    assert_non_null(strstr(x.notes, ":10: control.command: ignored (it applies to control.mode "
                                    "fixed only"));
    assert_true(x.control.q_disp == 0 && x.control.r == 0 && x.control.command == 0);
    free(p);
    drths_experiment_close(&x);
    assert_null(x.notes);
    /* The same experiment with and without the ignored keys has one fingerprint. */
    uint8_t with[32], without[32];
    fp_with("control: {mode: passive-on}\n", without);
    fp_with("control:\n  mode: passive-on\n  q_disp: 3\n  r: 5\n  command: 1\n", with);
    assert_memory_equal(with, without, 32);
    /* An unknown key is still an error: only the keys of another mode are ignored. */
    char text[1024];
    snprintf(text, sizeof text, "%s%s", base_yaml,
             "control:\n  mode: passive-on\n  q_disp: 3\n  q_dsip: 3\n");
    char *bad = write_tmp("unknown.yaml", text);
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_load(&x, bad, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "control.q_dsip: unknown key"));
    free(bad);
    /* A file without ignored fields has no notes. */
    char *clean = write_tmp("clean.yaml", base_yaml);
    load_ok(&x, clean);
    assert_null(x.notes);
    drths_experiment_close(&x);
    free(clean);
    /* White-noise with the record's fields left in, and a spring stiffness on an MR damper. */
    const char *wn = "name: wn\n"
                     "structure: {model: shear-building, floor_mass_kg: [1000], "
                     "storey_stiffness_N_per_m: [1.0e6]}\n"
                     "ground_motion:\n  kind: white-noise\n  file: rec.txt\n  scale: 2\n"
                     "  dt_s: 0.01\n  duration_s: 1\n"
                     "specimen: {damper: {model: phillips2013-200kN, stiffness_N_per_m: 5}}\n";
    char *w = write_tmp("wn.yaml", wn);
    load_ok(&x, w);
    assert_non_null(strstr(x.notes, ":5: ground_motion.file: ignored (it applies to "
                                    "ground_motion.kind record; kind is white-noise)"));
    assert_non_null(strstr(x.notes, "ground_motion.scale: ignored"));
    assert_non_null(strstr(x.notes, "rms_m_s2"));
    assert_non_null(strstr(x.notes, ":7: ground_motion.dt_s: ignored"));
    assert_non_null(strstr(x.notes, "specimen.damper.stiffness_N_per_m: ignored"));
    assert_null(x.ground_motion.file);
    assert_true(x.ground_motion.scale == 1.0 && x.ground_motion.dt_s == 0);
    drths_experiment_close(&x);
    free(w);
}

/* A one-column record runs with ground_motion.dt_s, which is part of the fingerprint only when
 * given (every other file's fingerprint is unchanged); a DT= header line serves as well. */
static void test_record_dt_s(void **state)
{
    (void)state;
    char *rec = write_tmp("one.txt", "0.01\n-0.02\n0.03\n0.0\n");
    free(rec);
    char *hdr = write_tmp("one-dt.txt", "% DT= 0.01 SEC\n0.01\n-0.02\n0.03\n0.0\n");
    free(hdr);
    static const char head[] = "name: one\n"
                               "rate_hz: 1000\n"
                               "structure: {model: shear-building, floor_mass_kg: [1000], "
                               "storey_stiffness_N_per_m: [1.0e6]}\n"
                               "specimen: {damper: {model: phillips2013-200kN}}\n";
    char text[1024];
    snprintf(text, sizeof text, "%sground_motion: {file: one.txt, units: g}\n", head);
    char *p = write_tmp("one.yaml", text);
    drths_experiment_t x;
    load_ok(&x, p);
    drths_record_t r;
    drths_error_t err = {{0}};
    assert_int_equal(drths_setup_ground_motion(&x, &r, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "ground_motion.dt_s must give it"));
    drths_experiment_close(&x);
    free(p);

    snprintf(text, sizeof text, "%sground_motion: {file: one.txt, units: g, dt_s: 0.01}\n", head);
    p = write_tmp("one.yaml", text);
    load_ok(&x, p);
    assert_true(x.ground_motion.dt_s == 0.01);
    assert_int_equal(drths_setup_ground_motion(&x, &r, &err), 0);
    assert_int_equal(r.n, 31); /* 0.03 s at 1 kHz */
    assert_true(r.dt_s == 0.001);
    drths_record_close(&r);
    char *st;
    size_t len;
    assert_int_equal(drths_experiment_shared_text(&x, &st, &len, &err), 0);
    assert_non_null(strstr(st, "\nground_motion.dt_s=0.01\n"));
    free(st);
    drths_experiment_close(&x);
    free(p);

    snprintf(text, sizeof text, "%sground_motion: {file: one-dt.txt, units: g}\n", head);
    p = write_tmp("one.yaml", text);
    load_ok(&x, p);
    assert_int_equal(drths_setup_ground_motion(&x, &r, &err), 0);
    assert_int_equal(r.n, 31);
    drths_record_close(&r);
    assert_int_equal(drths_experiment_shared_text(&x, &st, &len, &err), 0);
    assert_null(strstr(st, "ground_motion.dt_s"));
    free(st);
    drths_experiment_close(&x);
    free(p);
}

static void test_load_buffer(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/virtual.yaml", tmpdir);
    drths_experiment_t x;
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_load_buffer(&x, base_yaml, strlen(base_yaml), path, &err), 0);
    assert_int_equal(x.n_dof, 2);
    drths_experiment_close(&x);
    /* Not NUL-terminated, cut in the middle of a key: must fail cleanly, not read beyond. */
    char *cut = malloc(40);
    memcpy(cut, base_yaml, 40);
    assert_int_not_equal(drths_experiment_load_buffer(&x, cut, 40, path, &err), 0);
    free(cut);
}

/* The fingerprints both sites compare in HELLO, pinned: a change to the loader (a default, a
 * conversion) or to the canonical text that alters them makes two builds refuse each other, and
 * must be deliberate (then update these, and say so in docs/experiment-file.md). */
static void test_pinned_fingerprints(void **state)
{
    (void)state;
    static const struct {
        const char *file, *hex;
    } pinned[] = {
        {"examples/three-story-elcentro.yaml",
         "863f62c51cbdec71a6128b7957d78b095db32b6f0fe611ef75d9756d767b05b8"},
        {"tests/data/config/minimal.yaml",
         "63662dbf101940fd4e1d21fc42d3f92f2fd5b3b254d9d1c35a239e1cac844063"},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
        char *p = src_path(pinned[i].file);
        drths_experiment_t x;
        load_ok(&x, p);
        uint8_t fp[32];
        char hex[65];
        fingerprint(&x, fp);
        drths_experiment_fingerprint_hex(fp, hex);
        if (strcmp(hex, pinned[i].hex) != 0)
            fail_msg("%s: fingerprint %s, pinned %s", pinned[i].file, hex, pinned[i].hex);
        drths_experiment_close(&x);
        free(p);
    }
}

/* Loads text as the two-channel example would be at path; returns the loader's result. */
static int load_text(drths_experiment_t *x, const char *text, drths_error_t *err)
{
    char *p = src_path("examples/opensees/linear-springs-2dof-ideal.yaml");
    int r = drths_experiment_load_buffer(x, text, strlen(text), p, err);
    free(p);
    return r;
}

/* A wrong variant of the two-channel example: its message must carry `want` (file line,
 * field path and reason). */
static void channel_error(const char *text, const char *want)
{
    drths_experiment_t x;
    drths_error_t err = {{0}};
    int r = load_text(&x, text, &err);
    if (r != -EINVAL || !strstr(err.msg, want))
        fail_msg("got %d \"%s\", expected -EINVAL and \"%s\"", r, err.msg, want);
}

/* Wrong variants of the two-channel example, each one replacement in it: the message must carry
 * want (file line, field path and reason). */
static const struct {
    const char *from, *to, *want;
} channel_cases[] = {
    {"stiffness_N_per_m: 2.0e7", "stiffness_N_per_m: -2",
     ":67: physical.channels[1].specimen.damper.stiffness_N_per_m: must be > 0"},
    {"      limit_force_N: 240000", "      limit_force_N: abc",
     ":68: physical.channels[1].limit_force_N: must be a finite number"},
    {"    - name: y", "    - name: x",
     ":63: physical.channels[1].name: \"x\" is also physical.channels[0]'s name"},
    {"    - name: y", "    - name: \"y z\"",
     ":63: physical.channels[1].name: only letters, digits"},
    {"    - name: x\n      specimen:\n", "    - name: x\n      specimen:\n        floor: 1\n",
     ":60: physical.channels[0].specimen.floor: not allowed in a channel"},
    {"      limit_force_N: 240000", "      limit_drive_m: 0",
     ":68: physical.channels[1].limit_drive_m: must be > 0"},
    /* A channel's converters too narrow for the physical section's limit it takes: named by
     * the channel's converter range, at its line (the channel gives no limit of its own). */
    {"          stiffness_N_per_m: 1.0e7\n",
     "          stiffness_N_per_m: 1.0e7\n      actuator:\n        adc_bits: 16\n"
     "        force_range_N: 200000\n",
     ":65: physical.channels[0].actuator.force_range_N: must be above physical.limit_force_N "
     "(240000), which this channel takes"},
    /* Its own limit beyond its own converter: named by the limit. */
    {"      limit_force_N: 240000\n",
     "      limit_force_N: 240000\n      actuator:\n        adc_bits: 16\n"
     "        force_range_N: 200000\n",
     ":68: physical.channels[1].limit_force_N: must be below actuator.force_range_N (200000)"},
};

/* physical.channels: the example's two channels, what each takes from the top-level sections,
 * the fingerprint left alone, a file without channels unchanged, and wrong channels named with
 * their line. */
static void test_channels(void **state)
{
    (void)state;
    char *p = src_path("examples/opensees/linear-springs-2dof-ideal.yaml");
    char *text = slurp(p);
    drths_experiment_t x;
    drths_error_t err = {{0}};
    load_ok(&x, p);
    assert_int_equal(x.n_channels, 2);
    assert_int_equal(drths_experiment_n_actuators(&x), 2);
    assert_int_equal(x.channels_line, 57);
    const drths_experiment_t *a = drths_experiment_actuator(&x, 0);
    const drths_experiment_t *b = drths_experiment_actuator(&x, 1);
    assert_string_equal(drths_experiment_actuator_name(&x, 0), "x");
    assert_string_equal(drths_experiment_actuator_name(&x, 1), "y");
    assert_true(a->specimen.damper.stiffness_N_per_m == 1.0e7);
    assert_true(b->specimen.damper.stiffness_N_per_m == 2.0e7);
    assert_int_equal(a->n_channels, 0); /* a view is a one-channel experiment */
    /* Everything a channel does not give is the experiment's, the sections read last too. */
    assert_memory_equal(&b->acceptance, &x.acceptance, sizeof x.acceptance);
    assert_true(b->acceptance.tracking_rms_error_pct == 2);
    assert_int_equal(b->actuator.plant, DRTHS_ACTUATOR_PLANT_IDEAL);
    assert_true(b->physical.limit_force_N == 240000 && b->physical.limit_drive_m == 0.1);
    /* The virtual specimen of each channel is built from its view. */
    drths_specimen_params_t sa, sb;
    drths_setup_specimen(a, &sa);
    drths_setup_specimen(b, &sb);
    assert_true(sa.damper.stiffness_N_per_m == 1.0e7 && sb.damper.stiffness_N_per_m == 2.0e7);
    /* Several channels are for OpenFresco only: refused for a numerical site, with the line. */
    assert_int_equal(drths_experiment_check_network(&x, &err), -ENOTSUP);
    assert_non_null(strstr(err.msg, "linear-springs-2dof-ideal.yaml:57: physical.channels: 2 "
                                    "channels are served over OpenFresco only"));
    /* The channels are not fingerprinted: the same file without them has the same hash. */
    uint8_t fp2[32], fp1[32];
    fingerprint(&x, fp2);
    drths_experiment_close(&x);
    char *one = strdup(text);
    *strstr(one, "  channels:\n") = '\0';
    assert_int_equal(load_text(&x, one, &err), 0);
    assert_int_equal(x.n_channels, 0);
    assert_int_equal(drths_experiment_n_actuators(&x), 1);
    assert_ptr_equal(drths_experiment_actuator(&x, 0), &x);
    assert_string_equal(drths_experiment_actuator_name(&x, 0), "ch1");
    assert_int_equal(drths_experiment_check_network(&x, &err), 0);
    fingerprint(&x, fp1);
    assert_memory_equal(fp1, fp2, 32);
    drths_experiment_close(&x);
    free(one);

    /* Inherited: the physical section's limits and the top-level actuator; replaced whole: a
     * channel's own actuator section (its absent keys take the defaults, not the top level's). */
    char *t1 = replaced(text, "  limit_displacement_m: 0.1\n",
                        "  limit_displacement_m: 0.05\n  limit_velocity_m_s: 0.5\n");
    char *t2 = replaced(t1, "      limit_force_N: 240000\n",
                        "      limit_force_N: 150000\n      actuator:\n"
                        "        compensation: polynomial\n");
    char *t3 = replaced(t2, "  noise_force_N: 0\n", "  noise_force_N: 5\n");
    assert_int_equal(load_text(&x, t3, &err), 0);
    a = drths_experiment_actuator(&x, 0);
    b = drths_experiment_actuator(&x, 1);
    assert_true(a->physical.limit_displacement_m == 0.05 &&
                b->physical.limit_displacement_m == 0.05);
    assert_true(a->physical.limit_velocity_m_s == 0.5 && b->physical.limit_velocity_m_s == 0.5);
    assert_true(a->physical.limit_force_N == 240000 && b->physical.limit_force_N == 150000);
    assert_true(a->actuator.noise_force_N == 5 &&
                a->actuator.compensation == DRTHS_COMPENSATION_NONE);
    assert_true(b->actuator.noise_force_N == 0 &&
                b->actuator.compensation == DRTHS_COMPENSATION_POLYNOMIAL);
    drths_experiment_close(&x);
    free(t1);
    free(t2);
    free(t3);

    /* Wrong channels: file, line, field path, reason. */
    char *e;
    for (size_t i = 0; i < sizeof channel_cases / sizeof channel_cases[0]; i++) {
        e = replaced(text, channel_cases[i].from, channel_cases[i].to);
        channel_error(e, channel_cases[i].want);
        free(e);
    }
    /* A dash alone on its line opens an entry too: the second entry's key, not the first's. */
    e = replaced(text, "    - name: y\n", "    -\n      name: y\n");
    char *e4 = replaced(e, "    - name: x\n", "    -\n      name: x\n      limit_force_N: 1\n");
    char *e5 = replaced(e4, "      limit_force_N: 240000", "      limit_force_N: abc");
    channel_error(e5, ":71: physical.channels[1].limit_force_N: must be a finite number");
    free(e5);
    free(e4);
    free(e);
    /* The dashes at the column of "channels:" (YAML allows it; PyYAML writes it so): the file
     * loads, and the second entry's field is still named at its own line. */
    e = strdup(text);
    for (char *q = strstr(e, "  channels:\n") + strlen("  channels:\n"); q && *q;) {
        memmove(q, q + 2, strlen(q + 2) + 1); /* every line after it is indented by 4 or more */
        q = strchr(q, '\n');
        q = q ? q + 1 : NULL;
    }
    assert_int_equal(load_text(&x, e, &err), 0);
    assert_int_equal(x.n_channels, 2);
    assert_true(drths_experiment_actuator(&x, 1)->physical.limit_force_N == 240000);
    drths_experiment_close(&x);
    e4 = replaced(e, "\n    limit_force_N: 240000", "\n    limit_force_N: abc");
    channel_error(e4, ":68: physical.channels[1].limit_force_N: must be a finite number");
    free(e4);
    free(e);
    /* One channel, or more than the wire carries: the list's own line. */
    e = strdup(text);
    *strstr(e, "    - name: y") = '\0';
    channel_error(e, ":57: physical.channels: must list 2..8 channels (got 1)");
    free(e);
    /* With the comedi back end two channels may not share a signal (here both take the daq
     * section's mappings). */
    e = replaced(text, "physical:\n",
                 "daq:\n  backend: comedi\n"
                 "  command_out: {subdevice: 1, channel: 0, units_per_volt: 0.01}\n"
                 "  current_out: {subdevice: 1, channel: 1, units_per_volt: 1}\n"
                 "  displacement_in: {subdevice: 0, channel: 0, units_per_volt: 0.01}\n"
                 "  force_in: {subdevice: 0, channel: 1, units_per_volt: 25000}\n"
                 "physical:\n");
    /* The channel gives no daq mapping: the message stands at the channel's own line. */
    channel_error(e, ":69: physical.channels[1].daq.command_out: same subdevice and channel (1/0) "
                     "as physical.channels[0]'s daq.command_out");
    /* Another role of another channel on the same converter: channel 2's current_out on
     * channel 1's command_out would drive one output twice. */
    char *e3 =
        replaced(e, "      limit_force_N: 240000\n",
                 "      limit_force_N: 240000\n      daq:\n"
                 "        command_out: {subdevice: 1, channel: 2, units_per_volt: 0.01}\n"
                 "        current_out: {subdevice: 1, channel: 0, units_per_volt: 1}\n"
                 "        displacement_in: {subdevice: 0, channel: 2, units_per_volt: 0.01}\n"
                 "        force_in: {subdevice: 0, channel: 3, units_per_volt: 25000}\n");
    channel_error(e3, ":77: physical.channels[1].daq.current_out: same subdevice and channel "
                      "(1/0) as physical.channels[0]'s daq.command_out");
    free(e3);
    e3 = replaced(e, "      limit_force_N: 240000\n",
                  "      limit_force_N: 240000\n      daq:\n"
                  "        command_out: {subdevice: 1, channel: 2, units_per_volt: 0.01}\n"
                  "        current_out: {subdevice: 1, channel: 3, units_per_volt: 1}\n"
                  "        displacement_in: {subdevice: 0, channel: 1, units_per_volt: 0.01}\n"
                  "        force_in: {subdevice: 0, channel: 3, units_per_volt: 25000}\n");
    channel_error(e3, ":78: physical.channels[1].daq.displacement_in: same subdevice and channel "
                      "(0/1) as physical.channels[0]'s daq.force_in");
    free(e3);
    char *e2 =
        replaced(e, "      limit_force_N: 240000\n",
                 "      limit_force_N: 240000\n      daq:\n"
                 "        command_out: {subdevice: 1, channel: 2, units_per_volt: 0.01}\n"
                 "        current_out: {subdevice: 1, channel: 3, units_per_volt: 1}\n"
                 "        displacement_in: {subdevice: 0, channel: 2, units_per_volt: 0.01}\n"
                 "        force_in: {subdevice: 0, channel: 3, units_per_volt: 25000}\n");
    assert_int_equal(load_text(&x, e2, &err), 0);
    assert_int_equal(drths_experiment_actuator(&x, 0)->daq.command_out.channel, 0);
    assert_int_equal(drths_experiment_actuator(&x, 1)->daq.command_out.channel, 2);
    assert_int_equal(drths_experiment_actuator(&x, 1)->daq.force_in.channel, 3);
    drths_experiment_close(&x);
    free(e2);
    free(e);
    free(text);
    free(p);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(drths_control_mode_name(DRTHS_CONTROL_CLIPPED_OPTIMAL), "clipped-optimal");
    assert_string_equal(drths_damper_model_name(DRTHS_DAMPER_PHILLIPS2013), "phillips2013-200kN");
    assert_string_equal(drths_structure_model_name(DRTHS_STRUCTURE_MATRICES), "matrices");
    assert_string_equal(drths_integrator_kind_name(DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE),
                        "central-difference");
    assert_string_equal(drths_accel_units_name(DRTHS_ACCEL_CM_S2), "cm/s2");
    assert_string_equal(drths_smith_mode_name((drths_smith_mode_t)99), "?");
    assert_true(drths_accel_units_m_s2(DRTHS_ACCEL_G) == 9.80665);
    assert_true(drths_experiment_command_max(DRTHS_DAMPER_PHILLIPS2013) == 2.5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_three_story),
        cmocka_unit_test(test_example_dyke),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_shared_text),
        cmocka_unit_test(test_stability_fields),
        cmocka_unit_test(test_pinned_fingerprints),
        cmocka_unit_test(test_rayleigh_defaults),
        cmocka_unit_test(test_daq_section),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_unreadable_record_permissions),
        cmocka_unit_test(test_ignored_fields),
        cmocka_unit_test(test_record_dt_s),
        cmocka_unit_test(test_load_buffer),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_channels),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
