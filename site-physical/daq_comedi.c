/* The comedi back end of the DAQ interface (site-physical/daq.h).
 *
 * comedilib is called only through the drths_comedi_api_t given at open, so a test can stand in
 * for the library. The flow is comedilib's own for calibrated conversion: for each channel,
 * comedi_get_subdevice_flags tells whether the subdevice is soft-calibrated; if so the
 * calibration file (the configured one, or comedi_get_default_calibration_path) is parsed with
 * comedi_parse_calibration_file and comedi_get_softcal_converter gives the channel's
 * polynomial; otherwise the polynomial is the linear map of comedi_get_range and
 * comedi_get_maxdata. comedi_from_physical and comedi_to_physical then apply it.
 *
 * Why the clamp is computed here: comedi_from_physical returns nearbyint(polynomial(v)) as an
 * unsigned lsampl_t with no bound, so a voltage beyond the range (or a calibration polynomial
 * that maps the range's end a few codes past maxdata, or below 0) would come out as a wrapped
 * code, and the actuator would jump to the opposite end of its stroke. The voltage is therefore
 * clamped, before conversion, to the interval whose codes lie in 0..maxdata.
 */
#include "site-physical/daq.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const drths_comedi_api_t drths_comedi_api_default = {
    .open = comedi_open,
    .close = comedi_close,
    .get_subdevice_type = comedi_get_subdevice_type,
    .get_subdevice_flags = comedi_get_subdevice_flags,
    .get_n_channels = comedi_get_n_channels,
    .get_maxdata = comedi_get_maxdata,
    .get_range = comedi_get_range,
    .get_n_ranges = comedi_get_n_ranges,
    .data_write = comedi_data_write,
    .data_read = comedi_data_read,
    .to_physical = comedi_to_physical,
    .from_physical = comedi_from_physical,
    .get_default_calibration_path = comedi_get_default_calibration_path,
    .parse_calibration_file = comedi_parse_calibration_file,
    .cleanup_calibration = comedi_cleanup_calibration,
    .get_softcal_converter = comedi_get_softcal_converter,
    .errnum = comedi_errno,
    .strerror = comedi_strerror,
};

/* comedilib's own error numbers (lib/libinternal.h); below them comedi_errno() is errno. */
#define COMEDILIB_ERR_BASE 0x1000
#define COMEDILIB_BADDEV 0x1002
#define COMEDILIB_BADSUBD 0x1003
#define COMEDILIB_BADCHAN 0x1004

/* comedi_errno() as a negative errno-style code. */
static int map_errno(int e)
{
    if (e > 0 && e < COMEDILIB_ERR_BASE)
        return -e;
    switch (e) {
    case COMEDILIB_BADDEV:
        return -ENODEV;
    case COMEDILIB_BADSUBD:
    case COMEDILIB_BADCHAN:
        return -EINVAL;
    default:
        return -EIO;
    }
}

static int is_output(int i)
{
    return i == DRTHS_DAQ_COMMAND_OUT || i == DRTHS_DAQ_CURRENT_OUT;
}

static unsigned aref_of(drths_daq_aref_t a)
{
    switch (a) {
    case DRTHS_DAQ_AREF_COMMON:
        return AREF_COMMON;
    case DRTHS_DAQ_AREF_DIFF:
        return AREF_DIFF;
    default:
        return AREF_GROUND;
    }
}

/* The same evaluation as comedilib's, used at open to find where a polynomial leaves 0..maxdata
 * (comedilib does not export it). */
static double poly_eval(const comedi_polynomial_t *p, double x)
{
    double v = 0.0, term = 1.0;
    for (unsigned i = 0; i <= p->order; i++) {
        v += p->coefficients[i] * term;
        term *= x - p->expansion_origin;
    }
    return v;
}

/* ---- per tick ------------------------------------------------------------------------------ */

/* Keeps the first failure of one write, read or safe_state: when a board stops answering, the
 * second channel's call fails too, and the first one names the cause. */
static void record(drths_daq_t *d, int channel, const char *op, int comedi_errno, int code)
{
    d->n_errors++;
    if (d->u.comedi.failed_in_call)
        return;
    d->u.comedi.failed_in_call = 1;
    d->last_error.code = code;
    d->last_error.channel = channel;
    d->last_error.comedi_errno = comedi_errno;
    d->last_error.op = op;
}

/* Engineering value to volts, clamped, to code, written. The caller has rejected NaN. */
static int write_channel(drths_daq_t *d, int i, double value)
{
    drths_daq_comedi_channel_t *c = &d->u.comedi.ch[i];
    const drths_comedi_api_t *api = d->u.comedi.api;
    double v = (value - c->cfg.offset) / c->cfg.units_per_volt;
    if (!(v >= c->v_lo)) { /* also catches a NaN made from infinities */
        v = c->v_lo;
        d->clamped |= 1u << i;
    } else if (v > c->v_hi) {
        v = c->v_hi;
        d->clamped |= 1u << i;
    }
    lsampl_t code = api->from_physical(v, &c->poly);
    /* The clamp keeps the polynomial within 0..maxdata; rounding at the very end may still
     * give maxdata + 1 for a calibration whose end lies on a half code. */
    if (code > c->maxdata)
        code = c->maxdata;
    if (api->data_write(d->u.comedi.dev, (unsigned)c->cfg.subdevice, (unsigned)c->cfg.channel,
                        (unsigned)c->cfg.range, aref_of(c->cfg.aref), code) < 0) {
        int e = api->errnum();
        int r = map_errno(e);
        record(d, i, "comedi_data_write", e, r);
        return r;
    }
    return 0;
}

static int read_channel(drths_daq_t *d, int i, double *value)
{
    drths_daq_comedi_channel_t *c = &d->u.comedi.ch[i];
    const drths_comedi_api_t *api = d->u.comedi.api;
    lsampl_t code = 0;
    if (api->data_read(d->u.comedi.dev, (unsigned)c->cfg.subdevice, (unsigned)c->cfg.channel,
                       (unsigned)c->cfg.range, aref_of(c->cfg.aref), &code) < 0) {
        int e = api->errnum();
        int r = map_errno(e);
        record(d, i, "comedi_data_read", e, r);
        *value = NAN;
        return r;
    }
    int r = 0;
    if (code == 0 || code >= c->maxdata) {
        /* The converter is at an end: the true value may lie anywhere beyond, so the loop must
         * not go on with it (the value is still given, for the record). */
        d->saturated |= 1u << i;
        if (code > c->maxdata)
            code = c->maxdata;
        r = -ERANGE;
        const int first = !d->u.comedi.failed_in_call;
        record(d, i, "saturated", 0, r);
        if (first)
            d->last_error.code_read = code;
    }
    *value = c->cfg.units_per_volt * api->to_physical(code, &c->poly) + c->cfg.offset;
    return r;
}

static unsigned count_bits(unsigned m)
{
    unsigned n = 0;
    for (; m; m &= m - 1)
        n++;
    return n;
}

static int cm_write(drths_daq_t *d, double drive_m, double vel_m_s, double damper_command)
{
    (void)vel_m_s; /* the servo controller derives its own */
    d->clamped = 0;
    d->u.comedi.failed_in_call = 0;
    if (isnan(drive_m)) {
        record(d, DRTHS_DAQ_COMMAND_OUT, "nan", 0, -EINVAL);
        return -EINVAL;
    }
    if (isnan(damper_command)) {
        record(d, DRTHS_DAQ_CURRENT_OUT, "nan", 0, -EINVAL);
        return -EINVAL;
    }
    int r1 = write_channel(d, DRTHS_DAQ_COMMAND_OUT, drive_m);
    int r2 = write_channel(d, DRTHS_DAQ_CURRENT_OUT, damper_command);
    d->n_clamped += count_bits(d->clamped);
    return r1 ? r1 : r2;
}

static int cm_read(drths_daq_t *d, double *disp_m, double *force_N)
{
    d->saturated = 0;
    d->u.comedi.failed_in_call = 0;
    int r1 = read_channel(d, DRTHS_DAQ_DISPLACEMENT_IN, disp_m);
    int r2 = read_channel(d, DRTHS_DAQ_FORCE_IN, force_N);
    d->n_saturated += count_bits(d->saturated);
    return r1 ? r1 : r2;
}

static int cm_safe_state(drths_daq_t *d, double hold_m)
{
    d->clamped = 0;
    d->u.comedi.failed_in_call = 0;
    int r1 = 0;
    /* A NaN set-point is no position to hold: the output is left as it was, which is the last
     * drive written, so the servo controller keeps the actuator there. */
    if (isnan(hold_m)) {
        r1 = -EINVAL;
        record(d, DRTHS_DAQ_COMMAND_OUT, "nan", 0, r1);
    } else {
        r1 = write_channel(d, DRTHS_DAQ_COMMAND_OUT, hold_m);
    }
    int r2 = write_channel(d, DRTHS_DAQ_CURRENT_OUT, d->u.comedi.damper_safe_command);
    d->n_clamped += count_bits(d->clamped);
    return r1 ? r1 : r2;
}

static void cm_release(drths_daq_t *d)
{
    const drths_comedi_api_t *api = d->u.comedi.api;
    if (d->u.comedi.cal)
        api->cleanup_calibration(d->u.comedi.cal);
    if (d->u.comedi.dev)
        api->close(d->u.comedi.dev);
    d->u.comedi.cal = NULL;
    d->u.comedi.dev = NULL;
}

static const drths_daq_ops_t comedi_ops = {
    .write = cm_write,
    .read = cm_read,
    .safe_state = cm_safe_state,
    .close = cm_release,
};

/* ---- open --------------------------------------------------------------------------------- */

static const char *open_hint(int e)
{
    switch (e) {
    case ENOENT:
        return " \xe2\x80\x94 is the board's driver loaded? (comedi_config)";
    case EACCES:
    case EPERM:
        return " \xe2\x80\x94 may this user open it? (ls -l the device; usually the iocard "
               "group)";
    case ENODEV:
    case ENXIO:
        return " \xe2\x80\x94 no board is attached to this device (comedi_config)";
    case EBUSY:
        return " \xe2\x80\x94 another program holds it";
    default:
        return "";
    }
}

static const char *subdevice_type_name(int t)
{
    switch (t) {
    case COMEDI_SUBD_UNUSED:
        return "unused";
    case COMEDI_SUBD_AI:
        return "an analog input";
    case COMEDI_SUBD_AO:
        return "an analog output";
    case COMEDI_SUBD_DI:
        return "a digital input";
    case COMEDI_SUBD_DO:
        return "a digital output";
    case COMEDI_SUBD_DIO:
        return "a digital I/O";
    case COMEDI_SUBD_COUNTER:
        return "a counter";
    case COMEDI_SUBD_TIMER:
        return "a timer";
    default:
        return "not an analog subdevice";
    }
}

/* Parses the calibration once, the first time a soft-calibrated subdevice needs it. */
static int load_calibration(drths_daq_t *d, const drths_daq_comedi_config_t *cfg, const char *chn,
                            unsigned subd, drths_error_t *err)
{
    const drths_comedi_api_t *api = d->u.comedi.api;
    if (d->u.comedi.cal)
        return 0;
    const char *dev = d->u.comedi.device;
    char *def = NULL;
    const char *path = cfg->calibration_path;
    if (!path) {
        def = api->get_default_calibration_path(d->u.comedi.dev);
        if (!def) {
            int e = api->errnum();
            return drths_error_set(err, map_errno(e),
                                   "%s: daq.%s: subdevice %u is soft-calibrated, but comedilib "
                                   "gives no default calibration file (%s); set "
                                   "daq.calibration_file",
                                   dev, chn, subd, api->strerror(e));
        }
        path = def;
    }
    snprintf(d->u.comedi.calibration_path, sizeof d->u.comedi.calibration_path, "%s", path);
    free(def);
    d->u.comedi.cal = api->parse_calibration_file(d->u.comedi.calibration_path);
    /* comedi_parse_calibration_file sets no comedi_errno when the file does not parse (its
     * parser prints the line to stderr), so whether the file can be read is asked apart. */
    const int readable = d->u.comedi.cal || access(d->u.comedi.calibration_path, R_OK) == 0;
    const int read_errno = readable ? 0 : errno;
    if (!d->u.comedi.cal)
        return drths_error_set(err, readable ? -EINVAL : -read_errno,
                               "%s: daq.%s: subdevice %u is soft-calibrated, but the calibration "
                               "file %s %s%s; run comedi_soft_calibrate%s",
                               dev, chn, subd, d->u.comedi.calibration_path,
                               readable ? "does not parse as a comedi calibration file"
                                        : "cannot be read: ",
                               readable ? "" : strerror(read_errno),
                               cfg->calibration_path ? " or correct daq.calibration_file"
                                                     : " or set daq.calibration_file");
    return 0;
}

/* Narrows an output's voltage interval to where its polynomial gives codes in 0..maxdata. */
static int output_clamp(drths_daq_comedi_channel_t *c, const char *dev, const char *chn,
                        drths_error_t *err)
{
    const double lo = c->range.min, hi = c->range.max, top = (double)c->maxdata;
    /* A DAC is monotonic; a calibration that is not (over the range) is corrupt. */
    double prev = poly_eval(&c->poly, lo);
    for (int k = 1; k <= 256; k++) {
        double y = poly_eval(&c->poly, lo + (hi - lo) * k / 256.0);
        if (!(y > prev) || !isfinite(y))
            return drths_error_set(err, -EINVAL,
                                   "%s: daq.%s (subdevice %d, channel %d, range %d): the "
                                   "conversion polynomial does not increase over %g..%g V; "
                                   "recalibrate (comedi_soft_calibrate)",
                                   dev, chn, c->cfg.subdevice, c->cfg.channel, c->cfg.range, lo,
                                   hi);
        prev = y;
    }
    if (poly_eval(&c->poly, hi) < 0 || poly_eval(&c->poly, lo) > top)
        return drths_error_set(err, -EINVAL,
                               "%s: daq.%s (subdevice %d, channel %d, range %d): the conversion "
                               "polynomial maps %g..%g V outside codes 0..%u; recalibrate",
                               dev, chn, c->cfg.subdevice, c->cfg.channel, c->cfg.range, lo, hi,
                               (unsigned)c->maxdata);
    c->v_lo = lo;
    c->v_hi = hi;
    if (poly_eval(&c->poly, lo) < 0) {
        double a = lo, b = hi; /* code(a) < 0 <= code(b); keep b */
        for (int k = 0; k < 200 && b - a > 0; k++) {
            double m = 0.5 * (a + b);
            if (m <= a || m >= b)
                break;
            if (poly_eval(&c->poly, m) < 0)
                a = m;
            else
                b = m;
        }
        c->v_lo = b;
    }
    if (poly_eval(&c->poly, hi) > top) {
        double a = c->v_lo, b = hi; /* code(a) <= top < code(b); keep a */
        for (int k = 0; k < 200 && b - a > 0; k++) {
            double m = 0.5 * (a + b);
            if (m <= a || m >= b)
                break;
            if (poly_eval(&c->poly, m) > top)
                b = m;
            else
                a = m;
        }
        c->v_hi = a;
    }
    return 0;
}

static int open_channel(drths_daq_t *d, const drths_daq_comedi_config_t *cfg, int i,
                        drths_error_t *err)
{
    const drths_comedi_api_t *api = d->u.comedi.api;
    drths_daq_comedi_channel_t *c = &d->u.comedi.ch[i];
    const char *dev = d->u.comedi.device;
    const char *chn = drths_daq_channel_names[i];
    c->cfg = cfg->ch[i];
    if (!c->cfg.given)
        return drths_error_set(err, -EINVAL, "%s: daq.%s: missing (the comedi back end needs "
                                             "all four channels)",
                               dev, chn);
    if (!isfinite(c->cfg.units_per_volt) || c->cfg.units_per_volt == 0 ||
        !isfinite(c->cfg.offset))
        return drths_error_set(err, -EINVAL, "%s: daq.%s: units_per_volt must be finite and not 0, "
                                             "offset finite (got %g, %g)",
                               dev, chn, c->cfg.units_per_volt, c->cfg.offset);
    unsigned subd = (unsigned)c->cfg.subdevice, chan = (unsigned)c->cfg.channel;
    unsigned rng = (unsigned)c->cfg.range;
    int want = is_output(i) ? COMEDI_SUBD_AO : COMEDI_SUBD_AI;

    int type = api->get_subdevice_type(d->u.comedi.dev, subd);
    if (type < 0) {
        int e = api->errnum();
        return drths_error_set(err, map_errno(e), "%s: daq.%s: no subdevice %u on this board (%s)",
                               dev, chn, subd, api->strerror(e));
    }
    if (type != want)
        return drths_error_set(err, -EINVAL, "%s: daq.%s: subdevice %u is %s, not %s", dev, chn,
                               subd, subdevice_type_name(type), subdevice_type_name(want));
    int n = api->get_n_channels(d->u.comedi.dev, subd);
    if (n < 0) {
        int e = api->errnum();
        return drths_error_set(err, map_errno(e), "%s: daq.%s: subdevice %u: %s", dev, chn, subd,
                               api->strerror(e));
    }
    if (chan >= (unsigned)n)
        return drths_error_set(err, -EINVAL,
                               "%s: daq.%s: subdevice %u has no channel %u (it has %d: 0..%d)",
                               dev, chn, subd, chan, n, n - 1);
    c->maxdata = api->get_maxdata(d->u.comedi.dev, subd, chan);
    if (c->maxdata == 0) {
        int e = api->errnum();
        return drths_error_set(err, map_errno(e),
                               "%s: daq.%s (subdevice %u, channel %u): comedi_get_maxdata "
                               "failed: %s",
                               dev, chn, subd, chan, api->strerror(e));
    }
    /* comedi_get_range does not set comedi_errno for a range past the table, so the number
     * of ranges is asked first (else the message would carry an earlier call's reason). */
    int nr = api->get_n_ranges ? api->get_n_ranges(d->u.comedi.dev, subd, chan) : -1;
    if (nr >= 0 && rng >= (unsigned)nr)
        return drths_error_set(err, -EINVAL,
                               "%s: daq.%s (subdevice %u, channel %u): no range %u (it has %d: "
                               "0..%d); see comedi_board_info for the ranges",
                               dev, chn, subd, chan, rng, nr, nr - 1);
    comedi_range *r = api->get_range(d->u.comedi.dev, subd, chan, rng);
    if (!r) {
        int e = api->errnum();
        return drths_error_set(err, map_errno(e),
                               "%s: daq.%s (subdevice %u, channel %u): no range %u (%s); see "
                               "comedi_board_info for the ranges",
                               dev, chn, subd, chan, rng, api->strerror(e));
    }
    c->range = *r;
    if (c->range.unit != UNIT_volt || !(c->range.max > c->range.min))
        return drths_error_set(err, -EINVAL,
                               "%s: daq.%s (subdevice %u, channel %u): range %u is not a voltage "
                               "range (%g..%g, unit %u); choose a range in volts",
                               dev, chn, subd, chan, rng, c->range.min, c->range.max,
                               c->range.unit);

    enum comedi_conversion_direction dir = is_output(i) ? COMEDI_FROM_PHYSICAL : COMEDI_TO_PHYSICAL;
    int flags = api->get_subdevice_flags(d->u.comedi.dev, subd);
    int rc;
    if (flags >= 0 && (flags & SDF_SOFT_CALIBRATED)) {
        if ((rc = load_calibration(d, cfg, chn, subd, err)))
            return rc;
        if (api->get_softcal_converter(subd, chan, rng, dir, d->u.comedi.cal, &c->poly) < 0) {
            int e = api->errnum();
            return drths_error_set(err, map_errno(e),
                                   "%s: daq.%s (subdevice %u, channel %u, range %u): the "
                                   "calibration file %s has no conversion for it (%s); rerun "
                                   "comedi_soft_calibrate",
                                   dev, chn, subd, chan, rng, d->u.comedi.calibration_path,
                                   api->strerror(e));
        }
        if (c->poly.order >= COMEDI_MAX_NUM_POLYNOMIAL_COEFFICIENTS)
            return drths_error_set(err, -EINVAL,
                                   "%s: daq.%s: the calibration polynomial has order %u (at most "
                                   "%d)",
                                   dev, chn, c->poly.order,
                                   COMEDI_MAX_NUM_POLYNOMIAL_COEFFICIENTS - 1);
        c->soft_calibrated = 1;
    } else {
        /* The linear map of a hardware-calibrated board (as comedi_get_hardcal_converter). */
        memset(&c->poly, 0, sizeof c->poly);
        c->poly.order = 1;
        double span = c->range.max - c->range.min, md = (double)c->maxdata;
        if (dir == COMEDI_TO_PHYSICAL) {
            c->poly.expansion_origin = 0.0;
            c->poly.coefficients[0] = c->range.min;
            c->poly.coefficients[1] = span / md;
        } else {
            c->poly.expansion_origin = c->range.min;
            c->poly.coefficients[0] = 0.0;
            c->poly.coefficients[1] = md / span;
        }
    }
    if (is_output(i))
        return output_clamp(c, dev, chn, err);
    c->v_lo = c->range.min;
    c->v_hi = c->range.max;
    return 0;
}

int drths_daq_open_comedi(const drths_daq_comedi_config_t *cfg, const drths_comedi_api_t *api,
                          drths_daq_t *out, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    if (!api)
        api = &drths_comedi_api_default;
    const char *device = cfg->device && cfg->device[0] ? cfg->device : "/dev/comedi0";
    if (strlen(device) >= sizeof out->u.comedi.device)
        return drths_error_set(err, -ENAMETOOLONG, "daq.device: path too long (%zu bytes)",
                               strlen(device));
    if (cfg->calibration_path &&
        strlen(cfg->calibration_path) >= sizeof out->u.comedi.calibration_path)
        return drths_error_set(err, -ENAMETOOLONG, "daq.calibration_file: path too long");
    if (!isfinite(cfg->damper_safe_command))
        return drths_error_set(err, -EINVAL, "daq: the damper's safe command must be finite");
    out->backend = DRTHS_DAQ_BACKEND_COMEDI;
    out->u.comedi.api = api;
    out->u.comedi.damper_safe_command = cfg->damper_safe_command;
    snprintf(out->u.comedi.device, sizeof out->u.comedi.device, "%s", device);

    out->u.comedi.dev = api->open(device);
    if (!out->u.comedi.dev) {
        int e = api->errnum();
        int r = map_errno(e);
        memset(out, 0, sizeof *out);
        return drths_error_set(err, r, "cannot open %s: %s%s", device, api->strerror(e),
                               open_hint(e));
    }
    int r = 0;
    for (int i = 0; i < DRTHS_DAQ_NCHANNELS && r == 0; i++)
        r = open_channel(out, cfg, i, err);
    if (r == 0) {
        /* The safe state must be reachable exactly: a clamped "0 A" would not be 0 A. */
        const drths_daq_comedi_channel_t *c = &out->u.comedi.ch[DRTHS_DAQ_CURRENT_OUT];
        double v = (cfg->damper_safe_command - c->cfg.offset) / c->cfg.units_per_volt;
        if (v < c->v_lo || v > c->v_hi)
            r = drths_error_set(err, -ERANGE,
                                "%s: daq.current_out (subdevice %d, channel %d, range %d): the "
                                "damper's safe command %g needs %g V, outside the channel's "
                                "%g..%g V; choose another range or offset",
                                device, c->cfg.subdevice, c->cfg.channel, c->cfg.range,
                                cfg->damper_safe_command, v, c->v_lo, c->v_hi);
    }
    if (r != 0) {
        cm_release(out);
        memset(out, 0, sizeof *out);
        return r;
    }
    out->ops = &comedi_ops;
    return 0;
}
