/* The commissioning check (site-physical/iocheck.h) on the virtual specimen of the default
 * experiment: a right rig is judged right, with the plant's own gain and a delay of a few ms;
 * each single reversed channel (a double of the daq that flips one sign on the way) is named;
 * a dead current driver is a warning; a set-point whose zero is off stops the check before it
 * moves the actuator further; a converter at its end stops it at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/setup.h"
#include "site-physical/iocheck.h"

#ifndef DRTHS_SOURCE_DIR_DEFAULT
#define DRTHS_SOURCE_DIR_DEFAULT "."
#endif

/* The fault the double puts between the check and the virtual back end. */
static struct {
    double cmd_sign, disp_sign, force_sign; /* -1 reverses that channel */
    double current_gain;                    /* 0: the damper never sees its command */
    double cmd_offset_m;                    /* added to every set-point written */
    long saturate_after;                    /* reads before the force reads its end; <0 never */
    long reads;
    const drths_daq_ops_t *real;
} F;

static int f_write(drths_daq_t *d, double drive, double vel, double cmd)
{
    return F.real->write(d, F.cmd_sign * drive + F.cmd_offset_m, F.cmd_sign * vel,
                         F.current_gain * cmd);
}

static int f_read(drths_daq_t *d, double *x, double *f)
{
    int rc = F.real->read(d, x, f);
    *x *= F.disp_sign;
    *f *= F.force_sign;
    if (F.saturate_after >= 0 && F.reads++ >= F.saturate_after) {
        *f = 250000.0;
        return -ERANGE;
    }
    return rc;
}

static int f_safe(drths_daq_t *d, double hold)
{
    return F.real->safe_state(d, F.cmd_sign * hold + F.cmd_offset_m);
}

static drths_experiment_t exp_;
static drths_specimen_t spec;
static drths_daq_t daq;
static drths_daq_ops_t ops;

static int setup(void **state)
{
    (void)state;
    const char *src = getenv("DRTHS_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/three-story-elcentro.yaml",
             src ? src : DRTHS_SOURCE_DIR_DEFAULT);
    drths_error_t err = {{0}};
    if (drths_experiment_load(&exp_, path, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    drths_specimen_params_t sp;
    drths_setup_specimen(&exp_, &sp);
    sp.noise_disp_m = 1e-6;
    sp.noise_force_N = 50.0;
    drths_envelope_limits_t lim;
    drths_daq_envelope_limits(&exp_, &lim);
    if (drths_specimen_init(&spec, &sp, 1.0 / exp_.rate_hz, &err) != 0 ||
        drths_daq_open_virtual(&spec, &daq, &err) != 0 ||
        drths_daq_set_envelope(&daq, &lim, exp_.rate_hz, &err) != 0)
        return -1;
    F.real = daq.ops;
    ops = *daq.ops;
    ops.write = f_write;
    ops.read = f_read;
    ops.safe_state = f_safe;
    daq.ops = &ops;
    F.cmd_sign = F.disp_sign = F.force_sign = F.current_gain = 1.0;
    F.cmd_offset_m = 0.0;
    F.saturate_after = -1;
    F.reads = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    daq.ops = F.real;
    drths_daq_close(&daq);
    drths_specimen_close(&spec);
    drths_experiment_close(&exp_);
    return 0;
}

static void run(drths_iocheck_result_t *res)
{
    drths_iocheck_params_t p;
    drths_iocheck_params_default(&exp_, &p);
    p.leg_s = 0.2;
    p.rest_s = 0.2;
    drths_error_t err = {{0}};
    assert_int_equal(drths_iocheck_run(&daq, &p, res, &err), 0);
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    drths_iocheck_print(f, &p, res);
    fclose(f);
    printf("%s", buf);
}

static void test_right_rig(void **state)
{
    (void)state;
    drths_iocheck_result_t r;
    run(&r);
    assert_int_equal(r.cycles_done, 2);
    assert_string_equal(r.stopped, "");
    /* The example's plant has a static gain of 0.95 and a lag of a few ms. */
    assert_true(fabs(r.gain - exp_.actuator.plant_scale.gain) < 0.01);
    assert_true(r.delay_s > 0.001 && r.delay_s < 0.03);
    assert_true(fabs(r.offset_m) < 1e-5);
    assert_true(r.energy_J[0] > 0 && r.energy_J[1] > 2.0 * r.energy_J[0]);
    assert_true(fabs(r.force_vs_model - 1.0) < 0.3);
    assert_true(r.displacement <= DRTHS_IOCHECK_NOTE);
    assert_int_equal(r.force, DRTHS_IOCHECK_OK);
    assert_int_equal(r.current, DRTHS_IOCHECK_OK);
    assert_true(r.overall <= DRTHS_IOCHECK_NOTE);
}

static void test_reversed_force(void **state)
{
    (void)state;
    F.force_sign = -1.0;
    drths_iocheck_result_t r;
    run(&r);
    assert_int_equal(r.force, DRTHS_IOCHECK_REVERSED);
    assert_true(r.gain > 0);
    assert_int_equal(r.overall, DRTHS_IOCHECK_REVERSED);
}

static void test_reversed_displacement(void **state)
{
    (void)state;
    F.disp_sign = -1.0;
    drths_iocheck_result_t r;
    run(&r);
    assert_int_equal(r.displacement, DRTHS_IOCHECK_REVERSED);
    assert_int_equal(r.force, DRTHS_IOCHECK_OK); /* the force agrees with the command */
    assert_true(r.energy_J[1] > 0);
}

static void test_reversed_command(void **state)
{
    (void)state;
    F.cmd_sign = -1.0;
    drths_iocheck_result_t r;
    run(&r);
    assert_int_equal(r.displacement, DRTHS_IOCHECK_REVERSED);
    assert_true(r.energy_J[1] < 0); /* the force agrees with the measured motion */
    assert_int_equal(r.force, DRTHS_IOCHECK_OK);
}

static void test_dead_current_driver(void **state)
{
    (void)state;
    F.current_gain = 0.0;
    drths_iocheck_result_t r;
    run(&r);
    assert_int_equal(r.current, DRTHS_IOCHECK_WARNING);
    assert_int_equal(r.overall, DRTHS_IOCHECK_WARNING);
}

static void test_setpoint_zero_off_stops_before_the_cycles(void **state)
{
    (void)state;
    F.cmd_offset_m = 0.003; /* 3 mm: beyond half the 2 mm amplitude */
    drths_iocheck_result_t r;
    run(&r);
    assert_int_equal(r.cycles_done, 0);
    assert_non_null(strstr(r.stopped, "left the set-point"));
    assert_int_equal(r.overall, DRTHS_IOCHECK_FAILED);
}

static void test_saturated_converter_stops_at_once(void **state)
{
    (void)state;
    F.saturate_after = 2000;
    drths_iocheck_result_t r;
    run(&r);
    assert_non_null(strstr(r.stopped, "converter read its end"));
    assert_int_equal(r.ticks, 2001);
    assert_int_equal(r.overall, DRTHS_IOCHECK_FAILED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_right_rig, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reversed_force, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reversed_displacement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reversed_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_current_driver, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setpoint_zero_off_stops_before_the_cycles, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_saturated_converter_stops_at_once, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
