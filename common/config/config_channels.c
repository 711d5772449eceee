/* physical.channels: several actuator channels, each a view of the experiment
 * (drths_experiment_channel_t) whose specimen, actuator, limits and daq signals are its own
 * where the channel gives them and the top-level sections' otherwise. A channel's sections are
 * read with the top-level sections' code (config_checks.c, config_daq.c), with messages under
 * "physical.channels[i]."; then the checks across sections run again on the view. Across
 * channels, names are unique and, with the comedi back end, no two share a converter.
 */
#include "common/config/config_sections.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int drths_cfg_name(vctx_t *c, const char *field, const char *s, char *out, size_t cap)
{
    size_t n = strlen(s);
    if (n == 0 || n >= cap)
        return drths_cfg_fail(c, -EINVAL, field, "must be 1..%zu characters (got %zu)", cap - 1, n);
    for (size_t k = 0; k < n; k++) {
        unsigned char ch_k = (unsigned char)s[k];
        if (!isalnum(ch_k) && ch_k != '_' && ch_k != '-' && ch_k != '.')
            return drths_cfg_fail(c, -EINVAL, field,
                                  "only letters, digits, '_', '-' and '.' (got \"%s\")", s);
    }
    memcpy(out, s, n + 1);
    return 0;
}

int drths_cfg_fill_channel(vctx_t *c, const drths_experiment_t *x, int i,
                           const struct raw_channel *rc, drths_experiment_channel_t *ch,
                           int in_site)
{
    int r;
    drths_experiment_t *v = &ch->exp;
    *v = *x;
    v->n_channels = 0;
    v->channels = NULL;
    v->notes = NULL;
    v->n_sites = 0;
    v->sites = NULL;
    v->n_dampers = 0;
    v->dampers = NULL;
    if (rc->name) {
        if ((r = drths_cfg_name(c, "name", rc->name, ch->name, sizeof ch->name)))
            return r;
    } else {
        snprintf(ch->name, sizeof ch->name, "ch%d", i + 1);
    }
    if (rc->floor && !in_site)
        return drths_cfg_not_allowed(c, "floor",
                                     "in physical.channels (several channels are served over "
                                     "OpenFresco, whose analysis places them; sites[i].channels "
                                     "take a floor)");
    if (in_site) {
        const field_t *f = SPEC(specimen, floor);
        if (!rc->floor)
            return drths_cfg_fail(c, -EINVAL, "floor",
                                  "missing (required: the floor, 1..%d, whose storey the "
                                  "channel's damper acts on)",
                                  x->n_dof);
        if ((r = drths_cfg_get_int(c, "floor", rc->floor, (long)f->def, (long)f->lo, x->n_dof,
                                   &v->specimen.floor)))
            return r;
    }
    if (rc->specimen) {
        if (rc->specimen->floor)
            return drths_cfg_not_allowed(
                c, "specimen.floor",
                in_site ? "in a site's channel (its floor is the channel's floor)"
                        : "in a channel (specimen.floor places the numerical site's "
                          "damper, and several channels are served over OpenFresco only)");
        int floor = v->specimen.floor;
        if ((r = drths_cfg_fill_specimen(c, v, rc->specimen)))
            return r;
        v->specimen.floor = floor;
    }
    if (rc->actuator && (r = drths_cfg_fill_actuator(c, v, rc->actuator)))
        return r;
    for (int f = F_channel_limit_displacement_m; f <= F_channel_limit_measured_displacement_m; f++)
        if (drths_cfg_raw_string(&drths_cfg_channel_spec[f], rc) &&
            (r = drths_cfg_parse_field(c, drths_cfg_channel_prefix, &drths_cfg_channel_spec[f], rc,
                                       v)))
            return r;
    if (rc->daq) {
        const struct raw_chdaq *d = rc->daq;
        const struct raw_daq_channel *const raw[4] = {d->command_out, d->current_out,
                                                      d->displacement_in, d->force_in};
        if ((r = drths_cfg_fill_daq_signals(c, v, raw, 1)))
            return r;
    }
    if ((r = drths_cfg_check_safe_position(c, v)) || (r = drths_cfg_check_envelope(c, v)) ||
        (r = drths_cfg_check_damper_command(c, v)))
        return r;
    return drths_cfg_check_limits_inside_converters(c, v, "", rc->limit_force_N != NULL,
                                                    rc->limit_measured_displacement_m != NULL);
}

int drths_cfg_fill_channels(vctx_t *c, drths_experiment_t *x, const struct raw_physical *p)
{
    if (!p || !p->channels)
        return 0;
    unsigned n = p->channels_count;
    if (n < 2 || n > DRTHS_EXPERIMENT_MAX_CHANNELS)
        return drths_cfg_fail(
            c, -EINVAL, "physical.channels",
            "must list 2..%d channels (got %u); leave it out for one channel (the "
            "specimen, actuator and physical sections)",
            DRTHS_EXPERIMENT_MAX_CHANNELS, n);
    x->channels_line = drths_yamlline_find(c->text, c->len, "physical.channels");
    x->channels = calloc(n, sizeof *x->channels);
    if (!x->channels)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    x->n_channels = (int)n;
    int r = 0;
    char prefix[40];
    c->prefix = prefix;
    for (int i = 0; i < (int)n && !r; i++) {
        snprintf(prefix, sizeof prefix, "physical.channels[%d].", i);
        r = drths_cfg_fill_channel(c, x, i, &p->channels[i], &x->channels[i], 0);
        for (int j = 0; j < i && !r; j++)
            if (strcmp(x->channels[j].name, x->channels[i].name) == 0)
                r = drths_cfg_fail(c, -EINVAL, "name",
                                   "\"%s\" is also physical.channels[%d]'s name",
                                   x->channels[i].name, j);
        if (r || x->daq.backend != DRTHS_DAQ_BACKEND_COMEDI)
            continue;
        /* Any two outputs (or inputs) of two channels, not only the same signal's: one
         * channel's command_out on another's current_out would drive one converter twice. */
        for (int j = 0; j < i && !r; j++)
            r = drths_cfg_check_shared_converters(c, &x->channels[j].exp, &x->channels[i].exp, j);
    }
    c->prefix = NULL;
    return r;
}

int drths_experiment_n_actuators(const drths_experiment_t *exp)
{
    return exp->n_channels > 0 ? exp->n_channels : 1;
}

const drths_experiment_t *drths_experiment_actuator(const drths_experiment_t *exp, int i)
{
    return exp->n_channels > 0 ? &exp->channels[i].exp : exp;
}

const char *drths_experiment_actuator_name(const drths_experiment_t *exp, int i)
{
    return exp->n_channels > 0 ? exp->channels[i].name : "ch1";
}

int drths_experiment_check_network(const drths_experiment_t *exp, drths_error_t *err)
{
    if (exp->n_sites > 0 && !exp->site) {
        char line[16] = "";
        if (exp->sites_line > 0)
            snprintf(line, sizeof line, ":%d", exp->sites_line);
        return drths_error_set(
            err, -ENOTSUP,
            "%s%s: sites: the numerical site drives one link of one channel for now (%d "
            "sites, %d dampers); drths-numerical --reference integrates them "
            "all, and each actuator site runs its entry (drths-physical "
            "--site NAME)",
            exp->path, line, exp->n_sites, exp->n_dampers);
    }
    if (exp->n_channels == 0)
        return 0;
    char line[16] = "";
    if (exp->channels_line > 0)
        snprintf(line, sizeof line, ":%d", exp->channels_line);
    return drths_error_set(err, -ENOTSUP,
                           "%s%s: physical.channels: %d channels are served over OpenFresco "
                           "only for now (drths-physical --openfresco); a numerical site drives "
                           "one channel (leave physical.channels out)",
                           exp->path, line, exp->n_channels);
}
