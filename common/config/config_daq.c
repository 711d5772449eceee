/* The daq section (the actuator site's I/O back end) and the four analog signal mappings it and
 * each of physical.channels[i].daq give: each mapping's fields, the mappings the comedi back
 * end requires, and no two signals on one converter, within one daq section or across
 * channels.
 */
#include "common/config/config_sections.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One channel mapping of daq; path is "daq.command_out" and so on. */
static int fill_daq_channel(vctx_t *c, const char *path, const struct raw_daq_channel *rc,
                            drths_daq_channel_config_t *ch)
{
    char f[64];
    int r;
    memset(ch, 0, sizeof *ch);
    if (!rc)
        return 0;
    ch->given = 1;
#define FIELD(name) (snprintf(f, sizeof f, "%s." name, path), f)
    if (!rc->subdevice)
        return drths_cfg_fail(c, -EINVAL, FIELD("subdevice"),
                              "missing (required: the comedi subdevice)");
    if (!rc->channel)
        return drths_cfg_fail(c, -EINVAL, FIELD("channel"),
                              "missing (required: the channel on the subdevice)");
    if (!rc->units_per_volt)
        return drths_cfg_fail(c, -EINVAL, FIELD("units_per_volt"),
                              "missing (required: engineering units per volt at the connector)");
    if ((r = drths_cfg_parse_fields(c, path, drths_cfg_daq_channel_spec, 0, F_daq_channel_end - 1,
                                    rc, ch)))
        return r;
    if (ch->units_per_volt == 0)
        return drths_cfg_fail(c, -EINVAL, FIELD("units_per_volt"), "must not be 0");
#undef FIELD
    return 0;
}

/* The four signals of the daq section, in this order everywhere: two outputs, then two
 * inputs. */
static const char *const daq_signal_paths[4] = {"daq.command_out", "daq.current_out",
                                                "daq.displacement_in", "daq.force_in"};

static drths_daq_channel_config_t *daq_signal(drths_experiment_t *x, int k)
{
    drths_daq_channel_config_t *const m[4] = {&x->daq.command_out, &x->daq.current_out,
                                              &x->daq.displacement_in, &x->daq.force_in};
    return m[k];
}

/* Whether signals k and l (indices into daq_signal_paths) are both given and on the same
 * subdevice and channel, where they would collide: two outputs would fight, two inputs would
 * read the force as the displacement. An output and an input never collide (a subdevice is one
 * or the other). */
static int daq_signals_collide(const drths_daq_channel_config_t *a, int k,
                               const drths_daq_channel_config_t *b, int l)
{
    return k / 2 == l / 2 && a->given && b->given && a->subdevice == b->subdevice &&
           a->channel == b->channel;
}

int drths_cfg_check_shared_converters(vctx_t *c, drths_experiment_t *a, drths_experiment_t *b,
                                      int j)
{
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < (a == b ? k : 4); l++) {
            const drths_daq_channel_config_t *s = daq_signal(b, k);
            if (!daq_signals_collide(daq_signal(a, l), l, s, k))
                continue;
            if (a == b)
                return drths_cfg_fail(
                    c, -EINVAL, daq_signal_paths[k],
                    "same subdevice and channel as %s (%d/%d); each signal needs its "
                    "own channel",
                    daq_signal_paths[l], s->subdevice, s->channel);
            return drths_cfg_fail(
                c, -EINVAL, daq_signal_paths[k],
                "same subdevice and channel (%d/%d) as physical.channels[%d]'s %s (a "
                "channel without its own takes the daq section's); each channel needs "
                "its own signals",
                s->subdevice, s->channel, j, daq_signal_paths[l]);
        }
    return 0;
}

int drths_cfg_fill_daq_signals(vctx_t *c, drths_experiment_t *x,
                               const struct raw_daq_channel *const raw[4], int keep_absent)
{
    int r;
    for (int k = 0; k < 4; k++) {
        if ((raw[k] || !keep_absent) &&
            (r = fill_daq_channel(c, daq_signal_paths[k], raw[k], daq_signal(x, k))))
            return r;
        if (!daq_signal(x, k)->given && x->daq.backend == DRTHS_DAQ_BACKEND_COMEDI)
            return drths_cfg_fail(c, -EINVAL, daq_signal_paths[k],
                                  "missing (required with daq.backend comedi: subdevice, channel, "
                                  "units_per_volt)");
    }
    return drths_cfg_check_shared_converters(c, x, x, -1);
}

int drths_cfg_fill_daq(vctx_t *c, drths_experiment_t *x, const struct raw_daq *d)
{
    int r;
    const struct raw_daq none = {0};
    if (!d)
        d = &none;
    if ((r = PARSE(daq, backend, d, x)) || (r = PARSE(daq, device, d, x)))
        return r;
    if (!x->daq.device[0])
        return drths_cfg_fail(c, -EINVAL, "daq.device", "must not be empty");
    const struct raw_daq_channel *const raw[4] = {d->command_out, d->current_out,
                                                  d->displacement_in, d->force_in};
    if ((r = drths_cfg_fill_daq_signals(c, x, raw, 0)))
        return r;
    /* Not checked for readability here: the numerical site loads the same file and has no
     * calibration file; the comedi back end opens it at start-up. */
    if (d->calibration_file && d->calibration_file[0]) {
        x->daq.calibration_file = strdup(d->calibration_file);
        x->daq.calibration_path = drths_cfg_join_path(x->dir, d->calibration_file);
        if (!x->daq.calibration_file || !x->daq.calibration_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    }
    return 0;
}
