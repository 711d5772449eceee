/* The comedi back end (site-physical/daq_comedi.c) through the real comedilib, against the
 * emulated board of tools/comedi-emu, which this program links ahead of libc so that
 * comedilib's open and ioctl reach it (docs/comedi.md). Each case is one way the lab's
 * configuration or board can be wrong: a subdevice of the wrong type, a channel or range that
 * does not exist, a missing device file, a calibration file that does not parse, an output
 * beyond its range (clamped, never wrapped), an input at full scale (saturated, the read
 * fails), an ioctl that fails in the middle of a run (the message names the channel and
 * comedilib's reason). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "site-physical/daq.h"
#include "tools/comedi-emu/comedi_emu.h"

#define DEVICE "/dev/comedi-drths-emu3"

static char cal_path[1024];

/* comedilib 0.11 leaks 32 bytes of its parser's state when a calibration file does not parse
 * (test_bad_calibration_file); LeakSanitizer in the ASan build is told that this one is not
 * ours. The actuator site stops at start on that error anyway. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:comedi_parse_calibration_file\n";
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(drths_comedi_emu_reset(), 0);
    return 0;
}

/* The wiring of examples/three-story-elcentro-comedi-emu.yaml. */
static void good_config(drths_daq_comedi_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device = DEVICE;
    cfg->calibration_path = cal_path;
    drths_daq_channel_config_t out = {1, 1, 0, 0, DRTHS_DAQ_AREF_GROUND, 0.01, 0.0};
    cfg->ch[DRTHS_DAQ_COMMAND_OUT] = out;
    out.channel = 1;
    out.units_per_volt = 0.25;
    cfg->ch[DRTHS_DAQ_CURRENT_OUT] = out;
    drths_daq_channel_config_t in = {1, 0, 0, 0, DRTHS_DAQ_AREF_DIFF, 0.01, 0.0};
    cfg->ch[DRTHS_DAQ_DISPLACEMENT_IN] = in;
    in.channel = 1;
    in.units_per_volt = 25000;
    cfg->ch[DRTHS_DAQ_FORCE_IN] = in;
}

static int open_fails(const drths_daq_comedi_config_t *cfg, const char *text)
{
    drths_daq_t d;
    drths_error_t err = {{0}};
    int rc = drths_daq_open_comedi(cfg, NULL, &d, &err);
    print_message("  %s\n", err.msg);
    assert_true(rc < 0);
    assert_null(d.ops);
    if (!strstr(err.msg, text))
        fail_msg("expected '%s' in '%s'", text, err.msg);
    drths_daq_close(&d);
    return rc;
}

/* The back end under test, behind an envelope wide enough to admit every finite value the test
 * writes (the envelope itself is tested in test_envelope.c). */
static void wide_envelope(drths_daq_t *d)
{
    const drths_envelope_limits_t lim = {1e9, 1e12, 1e18, 1e9, 0};
    drths_error_t err;
    assert_int_equal(drths_daq_set_envelope(d, &lim, 5000.0, &err), 0);
}

static void open_ok(const drths_daq_comedi_config_t *cfg, drths_daq_t *d)
{
    drths_error_t err = {{0}};
    int rc = drths_daq_open_comedi(cfg, NULL, d, &err);
    if (rc)
        fail_msg("open: %s", err.msg);
    wide_envelope(d);
}

/* The board as configured: the inputs are soft-calibrated from the file, the outputs not, and a
 * voltage comes back within one code, which the raw converter (gain and offset errors) alone
 * would miss by tens of codes. */
static void test_calibrated_read(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    assert_int_equal(d.u.comedi.ch[DRTHS_DAQ_DISPLACEMENT_IN].soft_calibrated, 1);
    assert_int_equal(d.u.comedi.ch[DRTHS_DAQ_FORCE_IN].soft_calibrated, 1);
    assert_int_equal(d.u.comedi.ch[DRTHS_DAQ_COMMAND_OUT].soft_calibrated, 0);
    const double lsb = 20.0 / 65535;
    const double volts[] = {-9.5, -5.0, -0.001, 0.0, 0.5, 3.3, 9.5};
    for (size_t k = 0; k < sizeof volts / sizeof volts[0]; k++) {
        drths_comedi_emu_set_input(0, volts[k]);
        drths_comedi_emu_set_input(1, -volts[k]);
        double x, f;
        assert_int_equal(drths_daq_read(&d, &x, &f), 0);
        assert_float_equal(x, 0.01 * volts[k], 0.01 * lsb);
        assert_float_equal(f, -25000 * volts[k], 25000 * lsb);
        lsampl_t raw = drths_comedi_emu_ai_code(0, volts[k]);
        double uncalibrated = -10.0 + raw * lsb;
        if (fabs(volts[k]) > 1.0)
            assert_true(fabs(uncalibrated - volts[k]) > 5 * lsb);
    }
    assert_int_equal(d.saturated, 0);
    /* An output arrives as the code of its voltage. */
    assert_int_equal(drths_daq_write(&d, 0.05, 0.0, 1.25, NAN, 0), 0);
    assert_int_equal(drths_comedi_emu_output_code(0), 49151); /* 5 V: 32767.5 + 16383.75 */
    assert_int_equal(drths_comedi_emu_output_code(1), 49151);
    drths_daq_close(&d);
}

static void test_wrong_subdevice_type(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    cfg.ch[DRTHS_DAQ_COMMAND_OUT].subdevice = 0;
    assert_int_equal(open_fails(&cfg, DEVICE ": daq.command_out: subdevice 0 is an analog input, "
                                             "not an analog output"),
                     -EINVAL);
    good_config(&cfg);
    cfg.ch[DRTHS_DAQ_FORCE_IN].subdevice = 2;
    open_fails(&cfg, "daq.force_in: subdevice 2 is a digital I/O, not an analog input");
    good_config(&cfg);
    cfg.ch[DRTHS_DAQ_FORCE_IN].subdevice = 7;
    open_fails(&cfg, "daq.force_in: no subdevice 7 on this board (Invalid subdevice)");
}

static void test_no_such_channel_or_range(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    cfg.ch[DRTHS_DAQ_CURRENT_OUT].channel = 2;
    assert_int_equal(open_fails(&cfg, "daq.current_out: subdevice 1 has no channel 2 (it has 2: "
                                      "0..1)"),
                     -EINVAL);
    good_config(&cfg);
    cfg.ch[DRTHS_DAQ_DISPLACEMENT_IN].range = 4;
    open_fails(&cfg, "daq.displacement_in (subdevice 0, channel 0): no range 4 (it has 4: 0..3)");
    good_config(&cfg);
    cfg.ch[DRTHS_DAQ_COMMAND_OUT].range = 2; /* 0..20 mA */
    open_fails(&cfg, "range 2 is not a voltage range");
}

static void test_missing_device(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    cfg.device = "/dev/comedi-drths-emu-absent";
    assert_int_equal(open_fails(&cfg, "cannot open /dev/comedi-drths-emu-absent: No such file or "
                                      "directory"),
                     -ENOENT);
}

static void test_bad_calibration_file(void **state)
{
    (void)state;
    char path[] = "/tmp/drths-comedi-cal-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char junk[] = "{ driver_name => \"drths_comedi_emu\", calibrations => [ { "
                               "subdevice => zero } ] }\n";
    assert_int_equal(write(fd, junk, sizeof junk - 1), (ssize_t)(sizeof junk - 1));
    close(fd);
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    cfg.calibration_path = path;
    open_fails(&cfg, "the calibration file /tmp/drths-comedi-cal-");
    assert_int_equal(open_fails(&cfg, "does not parse as a comedi calibration file"), -EINVAL);
    unlink(path);
    cfg.calibration_path = "/nonexistent/emu.calibration";
    assert_int_equal(open_fails(&cfg, "the calibration file /nonexistent/emu.calibration cannot "
                                      "be read: No such file or directory"),
                     -ENOENT);
}

/* Beyond the range the output stops at its end, whatever the value; never a wrapped code. */
static void test_output_clamped(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    const struct {
        double drive, command;
        lsampl_t code0, code1;
    } cases[] = {
        {0.5, 3.0, 65535, 65535}, {-0.5, -3.0, 0, 0},    {1e8, -1e300, 65535, 0},
        {-1e8, INFINITY, 0, 65535},  {0.1, -2.5, 65535, 0}, {-0.1, 2.5, 0, 65535},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        assert_int_equal(drths_daq_write(&d, cases[k].drive, 0.0, cases[k].command, NAN, 0), 0);
        assert_int_equal(drths_comedi_emu_output_code(0), cases[k].code0);
        assert_int_equal(drths_comedi_emu_output_code(1), cases[k].code1);
    }
    /* A drive of 1e300 or an infinite one never reaches the board: the envelope refuses it. */
    assert_int_equal(drths_daq_write(&d, 1e300, 0.0, 0.0, NAN, 0), -EDOM);
    assert_int_equal(drths_daq_write(&d, -INFINITY, 0.0, 0.0, NAN, 0), -EDOM);
    assert_int_equal(drths_comedi_emu_output_code(0), 0);
    assert_int_equal(drths_daq_write(&d, 0.10001, 0.0, 0.0, NAN, 0), 0);
    assert_int_equal(d.clamped, 1u << DRTHS_DAQ_COMMAND_OUT);
    assert_int_equal(drths_daq_write(&d, 0.0999, 0.0, 0.0, NAN, 0), 0);
    assert_int_equal(d.clamped, 0);
    drths_daq_close(&d);
}

/* At full scale (or beyond) the input saturates: the value is the converter's end, the channel
 * is flagged, and the read fails so that the site holds. */
static void test_input_saturated(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    drths_comedi_emu_set_input(0, 0.1);
    drths_comedi_emu_set_input(1, 10.0); /* 250 kN: beyond the calibrated 9.98 V */
    double x, f;
    assert_int_equal(drths_daq_read(&d, &x, &f), -ERANGE);
    assert_int_equal(d.saturated, 1u << DRTHS_DAQ_FORCE_IN);
    assert_float_equal(x, 0.001, 0.01 * 20.0 / 65535);
    assert_true(f > 249000 && f < 250000);
    drths_error_t err = {{0}};
    assert_int_equal(drths_daq_error(&d, &err), -ERANGE);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg,
                           DEVICE ": force_in (subdevice 0, channel 1, range 0): the "
                                  "input is at the upper end of its converter (code 65535"));
    drths_comedi_emu_set_input(1, 0.0);
    drths_comedi_emu_set_input(0, -20.0);
    assert_int_equal(drths_daq_read(&d, &x, &f), -ERANGE);
    assert_int_equal(d.saturated, 1u << DRTHS_DAQ_DISPLACEMENT_IN);
    assert_int_equal(drths_daq_error(&d, &err), -ERANGE);
    assert_non_null(strstr(err.msg, "displacement_in (subdevice 0, channel 0, range 0): the "
                                    "input is at the lower end of its converter (code 0 of"));
    drths_comedi_emu_set_input(0, 0.0);
    assert_int_equal(drths_daq_read(&d, &x, &f), 0);
    assert_int_equal(d.saturated, 0);
    assert_int_equal((int)d.n_saturated, 2);
    drths_daq_close(&d);
}

/* A run of ticks, then the board stops answering: the failing call returns comedilib's error,
 * and drths_daq_error names the channel, the call and comedilib's text. */
static void test_ioctl_fails_mid_run(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    good_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    double x, f;
    for (int t = 0; t < 1000; t++) {
        assert_int_equal(drths_daq_write(&d, 1e-5 * t, 0.0, 0.0, NAN, 0), 0);
        assert_int_equal(drths_daq_read(&d, &x, &f), 0);
    }
    /* Tick 1000: the write of both outputs succeeds, both reads fail; the message names the
     * first. */
    drths_comedi_emu_fail_after(2, EIO);
    assert_int_equal(drths_daq_write(&d, 0.0, 0.0, 0.0, NAN, 0), 0);
    assert_int_equal(drths_daq_read(&d, &x, &f), -EIO);
    assert_true(isnan(x));
    drths_error_t err = {{0}};
    assert_int_equal(drths_daq_error(&d, &err), -EIO);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "displacement_in (subdevice 0, channel 0, range 0): "
                                    "comedi_data_read failed: Input/output error"));
    assert_int_equal((int)d.n_errors, 2);
    /* An unplugged board: both writes of the safe state fail, each attempted; the message names
     * the first. */
    drths_comedi_emu_fail_after(0, ENODEV);
    assert_int_equal(drths_daq_safe_state(&d, 0.0, 0), -ENODEV);
    assert_int_equal(drths_daq_error(&d, &err), -ENODEV);
    assert_non_null(strstr(err.msg, "command_out (subdevice 1, channel 0, range 0): "
                                    "comedi_data_write failed: No such device"));
    assert_int_equal((int)d.n_errors, 4);
    drths_comedi_emu_fail_after(0, 0);
    assert_int_equal(drths_daq_safe_state(&d, 0.0, 0), 0);
    drths_daq_close(&d);
}

int main(void)
{
    const char *src = getenv("DRTHS_SOURCE_DIR");
    snprintf(cal_path, sizeof cal_path, "%s/examples/comedi-emu.calibration", src ? src : "..");
    if (access(cal_path, R_OK) != 0) {
        printf("SKIPPED: %s not found (set DRTHS_SOURCE_DIR)\n", cal_path);
        return 77;
    }
    setenv("DRTHS_COMEDI_EMU_DEVICE", DEVICE, 1);
    unsetenv("DRTHS_COMEDI_EMU_EXPERIMENT");
    unsetenv("DRTHS_COMEDI_EMU_FAULT");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_calibrated_read, setup),
        cmocka_unit_test_setup(test_wrong_subdevice_type, setup),
        cmocka_unit_test_setup(test_no_such_channel_or_range, setup),
        cmocka_unit_test_setup(test_missing_device, setup),
        cmocka_unit_test_setup(test_bad_calibration_file, setup),
        cmocka_unit_test_setup(test_output_clamped, setup),
        cmocka_unit_test_setup(test_input_saturated, setup),
        cmocka_unit_test_setup(test_ioctl_fails_mid_run, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
