/* DAQ interface (site-physical/daq.h): the comedi back end against a test double of comedilib
 * (a board with an analog-input subdevice 0, an analog-output subdevice 1 and a digital
 * subdevice 2), and the virtual back end against the specimen it wraps.
 *
 * The double's from_physical checks, before calling comedilib's own comedi_from_physical, that
 * the code it is asked for lies in 0..maxdata: a value outside would wrap on a real board, and
 * the test counts it as a failure. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "site-physical/daq.h"

/* ---- the test double --------------------------------------------------------------------- */

#define MAXDATA 65535u
#define MAX_WRITES 64

typedef struct {
    unsigned subd, chan, range, aref;
    lsampl_t data;
} write_rec_t;

static struct {
    int open_errno;       /* open fails with this errno when nonzero */
    char opened[128];
    int soft;             /* subdevices 0 and 1 are soft-calibrated */
    int parse_fail;       /* parse_calibration_file fails (ENOENT) */
    int n_parse, n_cleanup, n_close;
    char parsed_path[256];
    int write_fail_chan;  /* AO channel whose writes fail with EIO, -1 none */
    int read_fail_chan;   /* AI channel whose reads fail with COMEDILIB_BADCHAN, -1 none */
    lsampl_t ai_code[16];
    write_rec_t w[MAX_WRITES];
    int n_w;
    int would_wrap;       /* from_physical asked for a code outside 0..maxdata */
    comedi_polynomial_t to_poly, from_poly;
    int errnum;
} F;

static int fake_board; /* its address is the comedi_t */
#define FAKE_DEV ((comedi_t *)&fake_board)

static comedi_range ai_ranges[] = {{-10, 10, UNIT_volt}, {-5, 5, UNIT_volt}, {0, 20, UNIT_mA}};
static comedi_range ao_ranges[] = {{-10, 10, UNIT_volt}, {0, 10, UNIT_volt}};

static comedi_t *f_open(const char *path)
{
    snprintf(F.opened, sizeof F.opened, "%s", path);
    if (F.open_errno) {
        F.errnum = F.open_errno;
        return NULL;
    }
    return FAKE_DEV;
}

static int f_close(comedi_t *dev)
{
    assert_ptr_equal(dev, FAKE_DEV);
    F.n_close++;
    return 0;
}

static int f_type(comedi_t *dev, unsigned s)
{
    (void)dev;
    if (s == 0)
        return COMEDI_SUBD_AI;
    if (s == 1)
        return COMEDI_SUBD_AO;
    if (s == 2)
        return COMEDI_SUBD_DIO;
    F.errnum = 0x1003; /* COMEDILIB_BADSUBD */
    return -1;
}

static int f_flags(comedi_t *dev, unsigned s)
{
    (void)dev;
    return s <= 1 && F.soft ? SDF_SOFT_CALIBRATED : 0;
}

static int f_nchan(comedi_t *dev, unsigned s)
{
    (void)dev;
    return s == 0 ? 16 : s == 1 ? 2 : 8;
}

static lsampl_t f_maxdata(comedi_t *dev, unsigned s, unsigned c)
{
    (void)dev, (void)s, (void)c;
    return MAXDATA;
}

static comedi_range *f_range(comedi_t *dev, unsigned s, unsigned c, unsigned r)
{
    (void)dev, (void)c;
    if (s == 0 && r < 3)
        return &ai_ranges[r];
    if (s == 1 && r < 2)
        return &ao_ranges[r];
    F.errnum = EINVAL;
    return NULL;
}

static int f_write(comedi_t *dev, unsigned s, unsigned c, unsigned r, unsigned aref, lsampl_t v)
{
    assert_ptr_equal(dev, FAKE_DEV);
    assert_int_equal(s, 1);
    assert_true(v <= MAXDATA);
    if ((int)c == F.write_fail_chan) {
        F.errnum = EIO;
        return -1;
    }
    assert_true(F.n_w < MAX_WRITES);
    F.w[F.n_w++] = (write_rec_t){s, c, r, aref, v};
    return 1;
}

static int f_read(comedi_t *dev, unsigned s, unsigned c, unsigned r, unsigned aref, lsampl_t *v)
{
    (void)r, (void)aref;
    assert_ptr_equal(dev, FAKE_DEV);
    assert_int_equal(s, 0);
    if ((int)c == F.read_fail_chan) {
        F.errnum = 0x1004; /* COMEDILIB_BADCHAN */
        return -1;
    }
    *v = F.ai_code[c];
    return 1;
}

static double poly(const comedi_polynomial_t *p, double x)
{
    double v = 0, t = 1;
    for (unsigned i = 0; i <= p->order; i++, t *= x - p->expansion_origin)
        v += p->coefficients[i] * t;
    return v;
}

static double f_to_phys(lsampl_t data, const comedi_polynomial_t *p)
{
    return comedi_to_physical(data, p);
}

static lsampl_t f_from_phys(double v, const comedi_polynomial_t *p)
{
    double code = poly(p, v);
    if (!(code >= -0.5 && code < MAXDATA + 0.5)) {
        F.would_wrap++;
        return MAXDATA;
    }
    return comedi_from_physical(v, p);
}

static char *f_default_path(comedi_t *dev)
{
    (void)dev;
    return strdup("/var/lib/comedi/calibrations/ni_pcimio_pci-6251_comedi0");
}

static comedi_calibration_t fake_cal;

static comedi_calibration_t *f_parse(const char *path)
{
    F.n_parse++;
    snprintf(F.parsed_path, sizeof F.parsed_path, "%s", path);
    if (F.parse_fail) {
        F.errnum = ENOENT;
        return NULL;
    }
    return &fake_cal;
}

static void f_cleanup(comedi_calibration_t *cal)
{
    assert_ptr_equal(cal, &fake_cal);
    F.n_cleanup++;
}

static int f_softcal(unsigned s, unsigned c, unsigned r, enum comedi_conversion_direction dir,
                     const comedi_calibration_t *cal, comedi_polynomial_t *p)
{
    (void)s, (void)c, (void)r;
    assert_ptr_equal(cal, &fake_cal);
    *p = dir == COMEDI_TO_PHYSICAL ? F.to_poly : F.from_poly;
    return 0;
}

static int f_errnum(void)
{
    return F.errnum;
}

static const drths_comedi_api_t fake_api = {
    .open = f_open,
    .close = f_close,
    .get_subdevice_type = f_type,
    .get_subdevice_flags = f_flags,
    .get_n_channels = f_nchan,
    .get_maxdata = f_maxdata,
    .get_range = f_range,
    .data_write = f_write,
    .data_read = f_read,
    .to_physical = f_to_phys,
    .from_physical = f_from_phys,
    .get_default_calibration_path = f_default_path,
    .parse_calibration_file = f_parse,
    .cleanup_calibration = f_cleanup,
    .get_softcal_converter = f_softcal,
    .errnum = f_errnum,
    .strerror = comedi_strerror,
};

static int reset(void **state)
{
    (void)state;
    memset(&F, 0, sizeof F);
    F.write_fail_chan = F.read_fail_chan = -1;
    return 0;
}

/* A lab's channels: set-point +/-10 V at 10 mm/V (+/-0.1 m), current driver 0..10 V at
 * 0.25 A/V (0..2.5 A), LVDT +/-10 V at 10 mm/V, load cell +/-10 V at 25 kN/V. */
static void lab_config(drths_daq_comedi_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device = "/dev/comedi0";
    cfg->ch[DRTHS_DAQ_COMMAND_OUT] = (drths_daq_channel_config_t){1, 1, 0, 0, DRTHS_DAQ_AREF_GROUND, 0.01, 0};
    cfg->ch[DRTHS_DAQ_CURRENT_OUT] = (drths_daq_channel_config_t){1, 1, 1, 1, DRTHS_DAQ_AREF_GROUND, 0.25, 0};
    cfg->ch[DRTHS_DAQ_DISPLACEMENT_IN] = (drths_daq_channel_config_t){1, 0, 0, 0, DRTHS_DAQ_AREF_DIFF, 0.01, 0};
    cfg->ch[DRTHS_DAQ_FORCE_IN] = (drths_daq_channel_config_t){1, 0, 1, 0, DRTHS_DAQ_AREF_DIFF, 25000, 0};
}

/* The back end under test, behind an envelope wide enough to admit every finite value the test
 * writes (the envelope itself is tested in test_envelope.c). */
static void wide_envelope(drths_daq_t *d)
{
    const drths_envelope_limits_t lim = {1e9, 1e12, 1e18, 1e9, 0};
    drths_error_t err;
    assert_int_equal(drths_daq_set_envelope(d, &lim, 5000.0, &err), 0);
}

static void open_ok(drths_daq_comedi_config_t *cfg, drths_daq_t *d)
{
    drths_error_t err = {{0}};
    int r = drths_daq_open_comedi(cfg, &fake_api, d, &err);
    if (r != 0)
        fail_msg("open: %d %s", r, err.msg);
    wide_envelope(d);
}

static const write_rec_t *last_write(unsigned chan)
{
    for (int i = F.n_w - 1; i >= 0; i--)
        if (F.w[i].chan == chan)
            return &F.w[i];
    fail_msg("no write on channel %u", chan);
    return NULL;
}

/* ---- linear conversion ------------------------------------------------------------------- */

static void test_linear_both_ways(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    lab_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    assert_string_equal(F.opened, "/dev/comedi0");
    assert_int_equal(F.n_parse, 0); /* hardware-calibrated: no file needed */

    /* 0.05 m = 5 V on -10..10 V: (5 + 10) * 65535 / 20 = 49151.25 -> 49151.
     * 1.25 A = 5 V on 0..10 V: 5 * 65535 / 10 = 32767.5 -> 32768 (to even). */
    assert_int_equal(drths_daq_write(&d, 0.05, 0.3, 1.25, NAN, 0), 0);
    assert_int_equal(F.n_w, 2);
    assert_int_equal(F.w[0].chan, 0);
    assert_int_equal(F.w[0].data, 49151);
    assert_int_equal(F.w[0].range, 0);
    assert_int_equal(F.w[0].aref, AREF_GROUND);
    assert_int_equal(F.w[1].chan, 1);
    assert_int_equal(F.w[1].range, 1);
    assert_int_equal(F.w[1].data, 32768);
    assert_int_equal(d.clamped, 0);
    /* -0.0731 m = -7.31 V: 2.69 * 3276.75 = 8814.4575 -> 8814. */
    assert_int_equal(drths_daq_write(&d, -0.0731, 0, 0, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, 8814);
    assert_int_equal(last_write(1)->data, 0);

    /* Codes in, engineering values out: v = -10 + code * 20 / 65535. */
    F.ai_code[0] = 49151;
    F.ai_code[1] = 32768;
    double x, f;
    assert_int_equal(drths_daq_read(&d, &x, &f), 0);
    assert_float_equal(x, 0.01 * (-10 + 49151 * 20.0 / 65535), 1e-15);
    assert_float_equal(x, 0.05, 0.01 * 20.0 / 65535); /* within one code of the write */
    assert_float_equal(f, 25000 * (-10 + 32768 * 20.0 / 65535), 1e-9);
    assert_float_equal(f, 3.8147, 1e-4);
    assert_int_equal(d.saturated, 0);
    assert_int_equal(F.would_wrap, 0);

    /* Offset and a negative gain (an inverted transducer): e = -0.01 v + 0.002. */
    drths_daq_close(&d);
    cfg.ch[DRTHS_DAQ_DISPLACEMENT_IN].units_per_volt = -0.01;
    cfg.ch[DRTHS_DAQ_DISPLACEMENT_IN].offset = 0.002;
    open_ok(&cfg, &d);
    F.ai_code[0] = 16384; /* -10 + 16384 * 20 / 65535 = -5.00000763 V */
    assert_int_equal(drths_daq_read(&d, &x, &f), 0);
    assert_float_equal(x, -0.01 * (-10 + 16384 * 20.0 / 65535) + 0.002, 1e-15);
    assert_float_equal(x, 0.052, 1e-6);
    drths_daq_close(&d);
    assert_int_equal(F.n_close, 2);
    drths_daq_close(&d); /* safe twice */
    assert_int_equal(F.n_close, 2);
}

/* ---- clamping ------------------------------------------------------------------------------ */

static void test_clamp_before_conversion(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    lab_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    /* 0.2 m is 20 V and 3 A is 12 V: both beyond the ranges, clamped to their top code. */
    assert_int_equal(drths_daq_write(&d, 0.2, 0, 3.0, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, MAXDATA);
    assert_int_equal(last_write(1)->data, MAXDATA);
    assert_int_equal(d.clamped, (1u << DRTHS_DAQ_COMMAND_OUT) | (1u << DRTHS_DAQ_CURRENT_OUT));
    /* -0.5 m and -1 A: below, clamped to code 0 (never a wrapped 2^32 - n). */
    assert_int_equal(drths_daq_write(&d, -0.5, 0, -1.0, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, 0);
    assert_int_equal(last_write(1)->data, 0);
    assert_int_equal(d.clamped, 3);
    /* An infinite drive never reaches the back end: the envelope refuses it, nothing is
     * written. The largest finite one is clamped like any other. */
    const int before = F.n_w;
    assert_int_equal(drths_daq_write(&d, -INFINITY, 0, INFINITY, NAN, 0), -EDOM);
    assert_int_equal(d.refusal.bound, DRTHS_ENV_NOT_FINITE);
    assert_int_equal(F.n_w, before);
    assert_int_equal(drths_daq_write(&d, -1e8, 0, INFINITY, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, 0);
    assert_int_equal(last_write(1)->data, MAXDATA);
    /* Inside again: no flag. */
    assert_int_equal(drths_daq_write(&d, 0.1, 0, 2.5, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, MAXDATA);
    assert_int_equal(last_write(1)->data, MAXDATA);
    assert_int_equal(d.clamped, 0);
    assert_int_equal((int)d.n_clamped, 6);
    /* NaN writes nothing: a NaN drive is refused by the envelope, a NaN damper command by the
     * back end. */
    int n = F.n_w;
    assert_int_equal(drths_daq_write(&d, NAN, 0, 0, NAN, 0), -EDOM);
    assert_int_equal(F.n_w, n);
    drths_error_t err = {{0}};
    assert_int_equal(drths_daq_error(&d, &err), -EDOM);
    assert_non_null(strstr(err.msg, "drive envelope: drive nan is not a number"));
    assert_int_equal(drths_daq_write(&d, 0.1, 0, NAN, NAN, 0), -EINVAL);
    assert_int_equal(F.n_w, n);
    assert_int_equal(drths_daq_error(&d, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "current_out (subdevice 1, channel 1): the value to write is "
                                    "not a number"));
    assert_int_equal(F.would_wrap, 0);

    /* Inputs at the converter's ends are flagged as saturated, and the read fails. */
    F.ai_code[0] = 0;
    F.ai_code[1] = MAXDATA;
    double x, f;
    assert_int_equal(drths_daq_read(&d, &x, &f), -ERANGE);
    assert_float_equal(x, -0.1, 1e-15);
    assert_float_equal(f, 250000, 1e-9);
    assert_int_equal(d.saturated, (1u << DRTHS_DAQ_DISPLACEMENT_IN) | (1u << DRTHS_DAQ_FORCE_IN));
    assert_int_equal(drths_daq_error(&d, &err), -ERANGE);
    assert_non_null(strstr(err.msg, "displacement_in (subdevice 0, channel 0, range 0): the "
                                    "input is at the lower end of its converter (code 0 of "
                                    "0..65535"));
    drths_daq_close(&d);
}

/* ---- soft calibration ----------------------------------------------------------------------- */

static void soft_polys(void)
{
    /* from_physical: code = 32700 + 3280 v + 0.5 v^2, which gives -50 at -10 V and 65550 at
     * +10 V: both ends outside 0..65535, so the clamp must narrow the range on both sides. */
    F.from_poly = (comedi_polynomial_t){{32700, 3280, 0.5, 0}, 0.0, 2};
    /* to_physical: v = 0.001 + (code - 32768) * 20 / 65535 + 1e-11 (code - 32768)^2. */
    F.to_poly = (comedi_polynomial_t){{0.001, 20.0 / 65535, 1e-11, 0}, 32768.0, 2};
}

static void test_polynomial_both_ways(void **state)
{
    (void)state;
    F.soft = 1;
    soft_polys();
    drths_daq_comedi_config_t cfg;
    lab_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    /* The default calibration file, parsed once for four channels. */
    assert_int_equal(F.n_parse, 1);
    assert_string_equal(F.parsed_path, "/var/lib/comedi/calibrations/ni_pcimio_pci-6251_comedi0");
    assert_int_equal(d.u.comedi.ch[0].soft_calibrated, 1);

    /* 0.02 m = 2 V: 32700 + 6560 + 2 = 39262. */
    assert_int_equal(drths_daq_write(&d, 0.02, 0, 1.0, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, 39262);
    /* 1 A = 4 V: 32700 + 13120 + 8 = 45828 (the same polynomial serves both outputs here). */
    assert_int_equal(last_write(1)->data, 45828);

    /* Both ends clamped inside 0..maxdata, never asking comedi for a wrapping code. */
    assert_int_equal(drths_daq_write(&d, 1.0, 0, 0.0, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, MAXDATA);
    assert_int_equal(drths_daq_write(&d, -1.0, 0, 0.0, NAN, 0), 0);
    assert_int_equal(last_write(0)->data, 0);
    assert_int_equal(d.clamped & 1u, 1u);
    assert_int_equal(F.would_wrap, 0);
    /* The clamp voltages are where the polynomial reaches 0 and 65535. */
    double vlo = d.u.comedi.ch[0].v_lo, vhi = d.u.comedi.ch[0].v_hi;
    assert_float_equal(poly(&F.from_poly, vlo), 0.0, 1e-6);
    assert_float_equal(poly(&F.from_poly, vhi), 65535.0, 1e-6);
    assert_true(vlo > -10 && vhi < 10);

    /* In: code 40000 -> 0.001 + 7232 * 20 / 65535 + 1e-11 * 7232^2 V. */
    F.ai_code[0] = 40000;
    F.ai_code[1] = 40000;
    double x, f;
    assert_int_equal(drths_daq_read(&d, &x, &f), 0);
    double v = 0.001 + 7232 * 20.0 / 65535 + 1e-11 * 7232.0 * 7232.0;
    assert_float_equal(x, 0.01 * v, 1e-15);
    assert_float_equal(f, 25000 * v, 1e-9);
    /* ... which differs from the linear map by 13.7 um (1.37 mV). */
    double linear = 0.01 * (-10 + 40000 * 20.0 / 65535);
    assert_true(fabs(x - linear) > 1e-5);
    drths_daq_close(&d);
    assert_int_equal(F.n_cleanup, 1);
    assert_int_equal(F.n_close, 1);

    /* A configured file replaces the default path. */
    cfg.calibration_path = "/lab/cal/board1.cal";
    open_ok(&cfg, &d);
    assert_string_equal(F.parsed_path, "/lab/cal/board1.cal");
    drths_daq_close(&d);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void expect_open_error(drths_daq_comedi_config_t *cfg, int code, const char *text)
{
    drths_daq_t d;
    memset(&d, 0xa5, sizeof d);
    drths_error_t err = {{0}};
    int r = drths_daq_open_comedi(cfg, &fake_api, &d, &err);
    if (r != code || !strstr(err.msg, text))
        fail_msg("got %d \"%s\", expected %d and \"%s\"", r, err.msg, code, text);
    assert_null(d.ops); /* nothing to release */
    drths_daq_close(&d);
}

static void test_open_errors(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    lab_config(&cfg);

    F.open_errno = ENOENT;
    drths_daq_t d;
    drths_error_t err = {{0}};
    assert_int_equal(drths_daq_open_comedi(&cfg, &fake_api, &d, &err), -ENOENT);
    assert_string_equal(err.msg, "cannot open /dev/comedi0: No such file or directory \xe2\x80\x94 "
                                 "is the board's driver loaded? (comedi_config)");
    F.open_errno = EACCES;
    expect_open_error(&cfg, -EACCES, "cannot open /dev/comedi0: Permission denied");
    F.open_errno = 0;
    assert_int_equal(F.n_close, 0);

    /* Every failure after the device is open closes it again. */
    cfg.ch[DRTHS_DAQ_COMMAND_OUT].subdevice = 0;
    expect_open_error(&cfg, -EINVAL, "/dev/comedi0: daq.command_out: subdevice 0 is an analog "
                                     "input, not an analog output");
    assert_int_equal(F.n_close, 1);
    lab_config(&cfg);
    cfg.ch[DRTHS_DAQ_FORCE_IN].subdevice = 7;
    expect_open_error(&cfg, -EINVAL, "daq.force_in: no subdevice 7 on this board (Invalid "
                                     "subdevice)");
    lab_config(&cfg);
    cfg.ch[DRTHS_DAQ_CURRENT_OUT].channel = 2;
    expect_open_error(&cfg, -EINVAL, "daq.current_out: subdevice 1 has no channel 2 (it has 2: "
                                     "0..1)");
    lab_config(&cfg);
    cfg.ch[DRTHS_DAQ_FORCE_IN].range = 2;
    expect_open_error(&cfg, -EINVAL, "range 2 is not a voltage range");
    lab_config(&cfg);
    cfg.ch[DRTHS_DAQ_DISPLACEMENT_IN].range = 5;
    expect_open_error(&cfg, -EINVAL, "daq.displacement_in (subdevice 0, channel 0): no range 5");
    lab_config(&cfg);
    cfg.ch[DRTHS_DAQ_FORCE_IN].given = 0;
    expect_open_error(&cfg, -EINVAL, "daq.force_in: missing");
    /* 0 A with a 1 A offset needs -4 V on a 0..10 V output: the safe state would be clamped. */
    lab_config(&cfg);
    cfg.ch[DRTHS_DAQ_CURRENT_OUT].offset = 1.0;
    expect_open_error(&cfg, -ERANGE, "the damper's safe command 0 needs -4 V, outside the "
                                     "channel's 0..10 V");
    /* A soft-calibrated board without its calibration file. */
    lab_config(&cfg);
    F.soft = 1;
    F.parse_fail = 1;
    expect_open_error(&cfg, -ENOENT, "daq.command_out: subdevice 1 is soft-calibrated, but the "
                                     "calibration file /var/lib/comedi/calibrations/"
                                     "ni_pcimio_pci-6251_comedi0 cannot be read: No such file or "
                                     "directory; run comedi_soft_calibrate");
    assert_int_equal(F.n_cleanup, 0);
    int closes = F.n_close;
    F.parse_fail = 0;
    soft_polys();
    F.from_poly.coefficients[1] = -3280; /* decreasing: a corrupt calibration */
    expect_open_error(&cfg, -EINVAL, "the conversion polynomial does not increase");
    assert_int_equal(F.n_cleanup, 1);
    assert_int_equal(F.n_close, closes + 1);
}

/* The real comedilib without a board: the message a lab sees at start-up. */
static void test_open_without_board(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    lab_config(&cfg);
    cfg.device = "/tmp/drths-test-daq-no-such-comedi";
    drths_daq_t d;
    drths_error_t err = {{0}};
    assert_int_equal(drths_daq_open_comedi(&cfg, NULL, &d, &err), -ENOENT);
    assert_string_equal(err.msg, "cannot open /tmp/drths-test-daq-no-such-comedi: No such file or "
                                 "directory \xe2\x80\x94 is the board's driver loaded? "
                                 "(comedi_config)");
    assert_null(d.ops);
    drths_daq_close(&d);
}

static void test_io_errors(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    lab_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    drths_error_t err = {{0}};
    assert_int_equal(drths_daq_error(&d, &err), 0);

    /* The damper's channel fails; the set-point is still written. */
    F.write_fail_chan = 1;
    assert_int_equal(drths_daq_write(&d, 0.01, 0, 1.0, NAN, 0), -EIO);
    assert_int_equal(F.n_w, 1);
    assert_int_equal(F.w[0].chan, 0);
    assert_int_equal(drths_daq_error(&d, &err), -EIO);
    assert_string_equal(err.msg, "/dev/comedi0: current_out (subdevice 1, channel 1, range 1): "
                                 "comedi_data_write failed: Input/output error");
    F.write_fail_chan = -1;

    /* comedilib's own error numbers map to errno-style codes. */
    F.read_fail_chan = 1;
    F.ai_code[0] = 40000;
    double x, f;
    assert_int_equal(drths_daq_read(&d, &x, &f), -EINVAL);
    assert_false(isnan(x));
    assert_true(isnan(f));
    assert_int_equal(drths_daq_error(&d, &err), -EINVAL);
    assert_string_equal(err.msg, "/dev/comedi0: force_in (subdevice 0, channel 1, range 0): "
                                 "comedi_data_read failed: Invalid channel");
    assert_int_equal((int)d.n_errors, 2);
    drths_daq_close(&d);
}

/* ---- safe state ------------------------------------------------------------------------------ */

static void test_safe_state(void **state)
{
    (void)state;
    drths_daq_comedi_config_t cfg;
    lab_config(&cfg);
    drths_daq_t d;
    open_ok(&cfg, &d);
    assert_int_equal(F.n_w, 0); /* open writes nothing */
    assert_int_equal(drths_daq_write(&d, 0.08, 0, 2.5, NAN, 0), 0);
    /* Hold at the last measured 12.3 mm = 1.23 V: 11.23 * 3276.75 = 36797.9 -> 36798; the
     * damper at 0 A = 0 V -> code 0. */
    assert_int_equal(drths_daq_safe_state(&d, 0.0123, 0), 0);
    assert_int_equal(F.n_w, 4);
    assert_int_equal(F.w[2].chan, 0);
    assert_int_equal(F.w[2].data, 36798);
    assert_int_equal(F.w[3].chan, 1);
    assert_int_equal(F.w[3].data, 0);

    /* With a current driver on a bipolar range, 0 A is mid-scale: -10..10 V, 32767.5 -> 32768. */
    drths_daq_close(&d);
    cfg.ch[DRTHS_DAQ_CURRENT_OUT].range = 0;
    open_ok(&cfg, &d);
    F.n_w = 0;
    assert_int_equal(drths_daq_safe_state(&d, -0.02, 0), 0);
    assert_int_equal(F.w[0].data, 26214); /* -2 V: 8 * 3276.75 = 26214 */
    assert_int_equal(F.w[1].data, 32768);
    /* No position to hold (the read failed): the envelope refuses it, the set-point stays at
     * the last drive admitted (written again) and the damper still goes to 0 A. */
    F.n_w = 0;
    assert_int_equal(drths_daq_safe_state(&d, NAN, 0), -EDOM);
    assert_int_equal(F.n_w, 2);
    assert_int_equal(F.w[0].chan, 0);
    assert_int_equal(F.w[0].data, 26214);
    assert_int_equal(F.w[1].chan, 1);
    assert_int_equal(F.w[1].data, 32768);
    /* The damper's write fails too: still attempted, the first error returned. */
    F.n_w = 0;
    F.write_fail_chan = 0;
    assert_int_equal(drths_daq_safe_state(&d, 0.0, 0), -EIO);
    assert_int_equal(F.n_w, 1);
    assert_int_equal(F.w[0].chan, 1);
    drths_daq_close(&d);
}

/* ---- the experiment file ------------------------------------------------------------------- */

static void test_config_from_experiment(void **state)
{
    (void)state;
    drths_experiment_t x;
    memset(&x, 0, sizeof x);
    x.daq.backend = DRTHS_DAQ_BACKEND_COMEDI;
    x.daq.device = "/dev/comedi0";
    drths_daq_comedi_config_t lab;
    lab_config(&lab);
    x.daq.command_out = lab.ch[0];
    x.daq.current_out = lab.ch[1];
    x.daq.displacement_in = lab.ch[2];
    x.daq.force_in = lab.ch[3];
    drths_daq_t d;
    drths_error_t err = {{0}};
    assert_int_equal(drths_daq_open(&x, NULL, &fake_api, &d, &err), 0);
    assert_int_equal(d.backend, DRTHS_DAQ_BACKEND_COMEDI);
    assert_int_equal(d.u.comedi.ch[DRTHS_DAQ_FORCE_IN].cfg.channel, 1);
    assert_true(d.u.comedi.damper_safe_command == 0);
    assert_null(drths_daq_virtual_meas(&d));
    drths_daq_close(&d);
}

/* ---- virtual back end --------------------------------------------------------------------- */

static void test_virtual_is_the_specimen(void **state)
{
    (void)state;
    /* The 200-kN damper behind the 3-pole plant, with noise, quantisation and a one-tick I/O
     * delay: the daq must give exactly what the specimen gives for the same inputs. */
    drths_specimen_params_t p;
    drths_specimen_params_default(&p, DRTHS_DAMPER_PHILLIPS2013);
    drths_specimen_t a, b;
    drths_error_t err = {{0}};
    assert_int_equal(drths_specimen_init(&a, &p, 1.0 / 5000, &err), 0);
    assert_int_equal(drths_specimen_init(&b, &p, 1.0 / 5000, &err), 0);
    drths_daq_t d;
    assert_int_equal(drths_daq_open_virtual(&a, &d, &err), 0);
    assert_int_equal(d.backend, DRTHS_DAQ_BACKEND_VIRTUAL);
    wide_envelope(&d);
    double peak = 0;
    for (int t = 0; t < 2000; t++) {
        double s = sin(2 * M_PI * 2.0 * t / 5000);
        double drive = 0.02 * s, vel = 0.02 * 2 * M_PI * 2.0 * cos(2 * M_PI * 2.0 * t / 5000);
        double cmd = t < 1000 ? 0.0 : 2.5;
        assert_int_equal(drths_daq_write(&d, drive, vel, cmd, NAN, 0), 0);
        double x, f;
        assert_int_equal(drths_daq_read(&d, &x, &f), 0);
        drths_specimen_meas_t m;
        drths_specimen_step(&b, drive, vel, cmd, &m);
        if (x != m.disp_m || f != m.force_N)
            fail_msg("tick %d: daq %.17g m %.17g N, specimen %.17g m %.17g N", t, x, f, m.disp_m,
                     m.force_N);
        assert_true(drths_daq_virtual_meas(&d)->true_force_N == m.true_force_N);
        if (fabs(f) > peak)
            peak = fabs(f);
    }
    assert_true(peak > 1e4); /* the damper did push back */

    /* HOLD: drive held at the given position, damper at 0, velocity 0. */
    assert_int_equal(drths_daq_safe_state(&d, 0.004, 0), 0);
    double x, f;
    assert_int_equal(drths_daq_read(&d, &x, &f), 0);
    drths_specimen_meas_t m;
    drths_specimen_step(&b, 0.004, 0.0, 0.0, &m);
    assert_true(x == m.disp_m && f == m.force_N);
    assert_int_equal(drths_daq_write(&d, NAN, 0, 0, NAN, 0), -EDOM);
    assert_int_equal(drths_daq_error(&d, &err), -EDOM);
    assert_non_null(strstr(err.msg, "drive envelope: drive nan is not a number (not written)"));
    assert_int_equal(drths_daq_write(&d, 0.004, 0, NAN, NAN, 0), -EINVAL);
    assert_int_equal(drths_daq_error(&d, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "virtual DAQ: current_out: the value to write is not a "
                                    "number"));
    drths_daq_close(&d);
    drths_daq_close(&d);
    assert_int_equal(drths_daq_read(&d, &x, &f), -EBADF);
    drths_specimen_close(&a);
    drths_specimen_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_linear_both_ways, reset),
        cmocka_unit_test_setup(test_clamp_before_conversion, reset),
        cmocka_unit_test_setup(test_polynomial_both_ways, reset),
        cmocka_unit_test_setup(test_open_errors, reset),
        cmocka_unit_test_setup(test_open_without_board, reset),
        cmocka_unit_test_setup(test_io_errors, reset),
        cmocka_unit_test_setup(test_safe_state, reset),
        cmocka_unit_test_setup(test_config_from_experiment, reset),
        cmocka_unit_test_setup(test_virtual_is_the_specimen, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
