/* The DAQ interface's dispatch, the virtual back end and the error text (site-physical/daq.h).
 * The comedi back end is site-physical/daq_comedi.c. */
#include "site-physical/daq.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const drths_daq_channel_names[DRTHS_DAQ_NCHANNELS] = {"command_out", "current_out",
                                                                  "displacement_in", "force_in"};

/* ---- dispatch ---------------------------------------------------------------------------- */

void drths_daq_envelope_limits(const drths_experiment_t *exp, drths_envelope_limits_t *lim)
{
    lim->position_m = exp->physical.limit_drive_m;
    lim->velocity_m_s = exp->physical.limit_drive_velocity_m_s;
    lim->acceleration_m_s2 = exp->physical.limit_drive_acceleration_m_s2;
    lim->offset_m = exp->physical.limit_drive_offset_m;
    lim->rest_after_s = exp->physical.max_tick_late_ms * 1e-3;
}

/* A refused drive is the DAQ's last failure too, so drths_daq_error can say why. */
static int refused(drths_daq_t *d)
{
    d->last_error.code = -EDOM;
    d->last_error.channel = DRTHS_DAQ_COMMAND_OUT;
    d->last_error.comedi_errno = 0;
    d->last_error.op = "envelope";
    return -EDOM;
}

int drths_daq_set_envelope(drths_daq_t *d, const drths_envelope_limits_t *lim, double rate_hz,
                           drths_error_t *err)
{
    const int rc = drths_envelope_init(&d->env, lim, rate_hz, err);
    d->env_set = rc == 0;
    return rc;
}

int drths_daq_write(drths_daq_t *d, double drive_m, double vel_m_s, double damper_command,
                    double command_m, int64_t now_ns)
{
    if (!d->ops)
        return -EBADF;
    if (!d->env_set)
        return -EPERM;
    if (isnan(damper_command))
        return d->ops->write(d, drive_m, vel_m_s, damper_command); /* -EINVAL, recorded */
    if (drths_envelope_admit(&d->env, drive_m, command_m, now_ns, &d->refusal) != 0)
        return refused(d);
    return d->ops->write(d, drive_m, vel_m_s, damper_command);
}

int drths_daq_read(drths_daq_t *d, double *disp_m, double *force_N)
{
    if (!d->ops) {
        *disp_m = *force_N = NAN;
        return -EBADF;
    }
    return d->ops->read(d, disp_m, force_N);
}

int drths_daq_safe_state(drths_daq_t *d, double hold_m, int64_t now_ns)
{
    if (!d->ops)
        return -EBADF;
    if (!d->env_set)
        return -EPERM;
    /* Writing again the drive the converter already holds moves nothing, whatever the
     * velocity before: it is how a run ends at its last drive. */
    if (d->env.n > 0 && hold_m == d->env.u1) {
        drths_envelope_stand(&d->env, now_ns);
        return d->ops->safe_state(d, hold_m);
    }
    if (drths_envelope_admit(&d->env, hold_m, NAN, now_ns, &d->refusal) == 0)
        return d->ops->safe_state(d, hold_m);
    /* The set-point stays where the converter holds it (the last admitted drive, written
     * again, which moves nothing); the damper still goes to its safe command. Before any
     * admitted drive there is no such value, and only the refusal is returned. */
    if (d->env.n > 0) {
        drths_envelope_stand(&d->env, now_ns);
        const int rc = d->ops->safe_state(d, d->env.u1);
        if (rc)
            return rc;
    }
    return refused(d);
}

void drths_daq_close(drths_daq_t *d)
{
    if (!d)
        return;
    if (d->ops && d->ops->close)
        d->ops->close(d);
    memset(d, 0, sizeof *d);
}

const drths_specimen_meas_t *drths_daq_virtual_meas(const drths_daq_t *d)
{
    if (!d->ops || d->backend != DRTHS_DAQ_BACKEND_VIRTUAL)
        return NULL;
    return &d->u.virt.meas;
}

void drths_daq_fault_save(const drths_daq_t *d, drths_daq_fault_t *f)
{
    f->e = d->last_error;
    f->refusal = d->refusal;
    const int ch = d->last_error.channel;
    f->virt_read = d->backend != DRTHS_DAQ_BACKEND_VIRTUAL ? 0.0
                   : ch == DRTHS_DAQ_DISPLACEMENT_IN       ? d->u.virt.meas.disp_m
                                                           : d->u.virt.meas.force_N;
}

int drths_daq_error(const drths_daq_t *d, drths_error_t *err)
{
    drths_daq_fault_t f;
    drths_daq_fault_save(d, &f);
    return drths_daq_fault_describe(d, &f, err);
}

/* The channel's name and, when cfg is given, where it is on the board: "displacement_in
 * (subdevice 0, channel 3, range 1)", without the range unless range is set. */
static void channel_where(char *buf, size_t cap, int ch, const drths_daq_channel_config_t *cfg,
                          int range)
{
    const char *name = ch >= 0 && ch < DRTHS_DAQ_NCHANNELS ? drths_daq_channel_names[ch] : "?";
    if (!cfg)
        snprintf(buf, cap, "%s", name);
    else if (range)
        snprintf(buf, cap, "%s (subdevice %d, channel %d, range %d)", name, cfg->subdevice,
                 cfg->channel, cfg->range);
    else
        snprintf(buf, cap, "%s (subdevice %d, channel %d)", name, cfg->subdevice, cfg->channel);
}

int drths_daq_failure_sentence(char *buf, size_t cap, const char *verb, int code, int channel,
                               const drths_daq_channel_config_t *cfg, const char *call)
{
    const char *why = strerror(-code);
    if (channel < 0 || channel >= DRTHS_DAQ_NCHANNELS)
        return snprintf(buf, cap, "DAQ %s failed (%s)", verb, why);
    char where[96];
    channel_where(where, sizeof where, channel, cfg, 1);
    /* "envelope", "nan" and "saturated" mark the DAQ's own refusals, not a comedilib call. */
    if (call && call[0] && strcmp(call, "envelope") != 0 && strcmp(call, "nan") != 0 &&
        strcmp(call, "saturated") != 0)
        return snprintf(buf, cap, "DAQ %s failed: %s: %s: %s", verb, where, call, why);
    return snprintf(buf, cap, "DAQ %s failed: %s: %s", verb, where, why);
}

int drths_daq_fault_describe(const drths_daq_t *d, const drths_daq_fault_t *f, drths_error_t *err)
{
    const drths_daq_last_error_t *e = &f->e;
    int code = e->code;
    if (code == 0) {
        drths_error_clear(err);
        return 0;
    }
    if (code == -EDOM && e->op && strcmp(e->op, "envelope") == 0) {
        char text[sizeof err->msg];
        drths_envelope_describe(&f->refusal, text, sizeof text);
        return drths_error_set(err, code, "%s", text);
    }
    int ch = e->channel;
    const char *name = ch >= 0 && ch < DRTHS_DAQ_NCHANNELS ? drths_daq_channel_names[ch] : "?";
    if (d->backend != DRTHS_DAQ_BACKEND_COMEDI && e->op && strcmp(e->op, "saturated") == 0)
        return drths_error_set(err, code,
                               "virtual DAQ: %s: the input is at an end of its converter "
                               "(reads %g): the true value may lie beyond",
                               name, f->virt_read);
    if (d->backend != DRTHS_DAQ_BACKEND_COMEDI)
        return drths_error_set(err, code, "virtual DAQ: %s: %s", name,
                               code == -EINVAL ? "the value to write is not a number; nothing "
                                                 "was written"
                                               : strerror(-code));
    const drths_daq_comedi_channel_t *c = &d->u.comedi.ch[ch >= 0 && ch < 4 ? ch : 0];
    const char *op = e->op ? e->op : "?";
    char where[96];
    channel_where(where, sizeof where, ch, &c->cfg, strcmp(op, "nan") != 0);
    if (strcmp(op, "nan") == 0)
        return drths_error_set(err, code,
                               "%s: %s: the value to write is not a number; nothing was written",
                               d->u.comedi.device, where);
    if (strcmp(op, "saturated") == 0) {
        const double v = (double)c->range.min +
                         (c->range.max - c->range.min) * e->code_read / (double)c->maxdata;
        return drths_error_set(err, code,
                               "%s: %s: the input is at the %s end of its converter (code %u of "
                               "0..%u, about %g V): the true value may lie beyond",
                               d->u.comedi.device, where, e->code_read ? "upper" : "lower",
                               (unsigned)e->code_read, (unsigned)c->maxdata, v);
    }
    const drths_comedi_api_t *api = d->u.comedi.api;
    const char *why = api && api->strerror ? api->strerror(e->comedi_errno) : NULL;
    return drths_error_set(err, code, "%s: %s: %s failed: %s", d->u.comedi.device, where, op,
                           why ? why : strerror(-code));
}

/* ---- virtual back end ------------------------------------------------------------------- */

static void virt_record(drths_daq_t *d, int channel)
{
    d->last_error.code = -EINVAL;
    d->last_error.channel = channel;
    d->last_error.comedi_errno = 0;
    d->last_error.op = "nan";
    d->n_errors++;
}

static int virt_write(drths_daq_t *d, double drive_m, double vel_m_s, double damper_command)
{
    d->clamped = 0;
    if (isnan(drive_m) || isnan(vel_m_s)) {
        virt_record(d, DRTHS_DAQ_COMMAND_OUT);
        return -EINVAL;
    }
    if (isnan(damper_command)) {
        virt_record(d, DRTHS_DAQ_CURRENT_OUT);
        return -EINVAL;
    }
    d->u.virt.drive_m = drive_m;
    d->u.virt.vel_m_s = vel_m_s;
    d->u.virt.command = damper_command;
    return 0;
}

/* One tick of the specimen with the outputs as last written: a DAC holds its value until it is
 * written again, so reading twice without a write steps twice with the same drive. */
static int virt_read(drths_daq_t *d, double *disp_m, double *force_N)
{
    const int r = drths_specimen_step(d->u.virt.spec, d->u.virt.drive_m, d->u.virt.vel_m_s,
                                      d->u.virt.command, &d->u.virt.meas);
    /* A converter at an end code is a failed read, as on the comedi back end: the true value
     * may lie anywhere beyond it. */
    const unsigned sat = d->u.virt.meas.saturated;
    d->saturated = ((sat & 1u) ? 1u << DRTHS_DAQ_DISPLACEMENT_IN : 0u) |
                   ((sat & 2u) ? 1u << DRTHS_DAQ_FORCE_IN : 0u);
    if (r < 0) {
        d->n_saturated += (sat & 1u) + ((sat >> 1) & 1u);
        d->last_error.code = r;
        d->last_error.channel = (sat & 1u) ? DRTHS_DAQ_DISPLACEMENT_IN : DRTHS_DAQ_FORCE_IN;
        d->last_error.comedi_errno = 0;
        d->last_error.op = "saturated";
        d->n_errors++;
    }
    *disp_m = d->u.virt.meas.disp_m;
    *force_N = d->u.virt.meas.force_N;
    return r;
}

static int virt_safe_state(drths_daq_t *d, double hold_m)
{
    int r = 0;
    d->clamped = 0;
    /* A NaN set-point is no position to hold: the drive stays where it was. */
    if (isnan(hold_m)) {
        virt_record(d, DRTHS_DAQ_COMMAND_OUT);
        r = -EINVAL;
    } else {
        d->u.virt.drive_m = hold_m;
    }
    d->u.virt.vel_m_s = 0.0;
    d->u.virt.command = 0.0;
    return r;
}

static void virt_close(drths_daq_t *d)
{
    d->u.virt.spec = NULL;
}

static const drths_daq_ops_t virt_ops = {
    .write = virt_write,
    .read = virt_read,
    .safe_state = virt_safe_state,
    .close = virt_close,
};

int drths_daq_open_virtual(drths_specimen_t *spec, drths_daq_t *out, drths_error_t *err)
{
    memset(out, 0, sizeof *out);
    if (!spec)
        return drths_error_set(err, -EINVAL, "virtual DAQ: no specimen");
    out->backend = DRTHS_DAQ_BACKEND_VIRTUAL;
    out->u.virt.spec = spec;
    out->u.virt.meas.disp_m = out->u.virt.meas.force_N = NAN;
    out->ops = &virt_ops;
    return 0;
}

/* ---- from the experiment ------------------------------------------------------------------ */

void drths_daq_comedi_config_from_experiment(const drths_experiment_t *exp,
                                             drths_daq_comedi_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->device = exp->daq.device;
    cfg->ch[DRTHS_DAQ_COMMAND_OUT] = exp->daq.command_out;
    cfg->ch[DRTHS_DAQ_CURRENT_OUT] = exp->daq.current_out;
    cfg->ch[DRTHS_DAQ_DISPLACEMENT_IN] = exp->daq.displacement_in;
    cfg->ch[DRTHS_DAQ_FORCE_IN] = exp->daq.force_in;
    cfg->calibration_path = exp->daq.calibration_path;
    cfg->damper_safe_command = 0.0;
}

int drths_daq_open(const drths_experiment_t *exp, drths_specimen_t *spec,
                   const drths_comedi_api_t *api, drths_daq_t *out, drths_error_t *err)
{
    if (exp->daq.backend == DRTHS_DAQ_BACKEND_COMEDI) {
        drths_daq_comedi_config_t cfg;
        drths_daq_comedi_config_from_experiment(exp, &cfg);
        return drths_daq_open_comedi(&cfg, api, out, err);
    }
    return drths_daq_open_virtual(spec, out, err);
}
