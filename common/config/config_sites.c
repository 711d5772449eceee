/* sites: several actuator sites (laboratories) in one test, each one link of the numerical site
 * with its own address and key, and its channels, each a damper of the structure at its own
 * floor. A channel is read as a physical.channels entry (drths_cfg_fill_channel, its view of
 * the experiment) with a floor; the site's listen address and key file go into the views, so
 * that an actuator site that selects its entry (drths_experiment_select_site) sees the file
 * exactly as a one-site file that gives them at the top level.
 */
#include "common/config/config_sections.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sites[i] into s and its channels into x->dampers from k on (c->prefix is "sites[i]."). */
static int fill_site(vctx_t *c, drths_experiment_t *x, int i, const struct raw_site *rs,
                     drths_experiment_site_t *s, int k)
{
    int r;
    char path[48];
    snprintf(path, sizeof path, "sites[%d].name", i);
    s->line = drths_yamlline_find(c->text, c->len, path);
    if (!rs->name)
        return drths_cfg_fail(c, -EINVAL, "name",
                              "missing (required: the site's name, which "
                              "its actuator site gives as --site NAME)");
    if ((r = drths_cfg_name(c, "name", rs->name, s->name, sizeof s->name)))
        return r;
    if (strcmp(s->name, "numerical") == 0)
        return drths_cfg_fail(c, -EINVAL, "name",
                              "\"numerical\" is the numerical site's name in the monitor and the "
                              "records: give the actuator site another");
    if (!rs->address)
        return drths_cfg_fail(c, -EINVAL, "address",
                              "missing (required: host:port where the numerical site sends "
                              "site %s's datagrams)",
                              s->name);
    if ((r = drths_cfg_check_endpoint(c, "address", rs->address)) ||
        (rs->listen && (r = drths_cfg_check_endpoint(c, "listen", rs->listen))))
        return r;
    s->address = strdup(rs->address);
    s->listen = strdup(rs->listen ? rs->listen : rs->address);
    if (!s->address || !s->listen)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    if (rs->key_file && rs->key_file[0]) {
        s->key_file = strdup(rs->key_file);
        s->key_path = drths_cfg_join_path(x->dir, rs->key_file);
        if (!s->key_file || !s->key_path)
            return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    }
    unsigned n = rs->channels_count;
    if (!rs->channels || n < 1 || n > DRTHS_EXPERIMENT_MAX_CHANNELS)
        return drths_cfg_fail(c, -EINVAL, "channels",
                              "must list 1..%d channels (got %u): each a damper with its floor",
                              DRTHS_EXPERIMENT_MAX_CHANNELS, rs->channels ? n : 0u);
    s->first = k;
    s->n_channels = (int)n;
    const char *site_prefix = c->prefix;
    char prefix[64];
    for (int j = 0; j < (int)n && !r; j++) {
        snprintf(prefix, sizeof prefix, "sites[%d].channels[%d].", i, j);
        c->prefix = prefix;
        drths_experiment_channel_t *ch = &x->dampers[k + j];
        ch->site = i;
        r = drths_cfg_fill_channel(c, x, j, &rs->channels[j], ch, 1);
        if (r)
            break;
        ch->exp.physical.listen = s->listen;
        if (s->key_path) {
            ch->exp.link.key_file = s->key_file;
            ch->exp.link.key_path = s->key_path;
        }
        /* Names are unique over the whole file: the numerical site's records and report name
         * each damper by its channel. */
        for (int m = 0; m < k + j && !r; m++)
            if (strcmp(x->dampers[m].name, ch->name) == 0)
                r = drths_cfg_fail(c, -EINVAL, "name",
                                   "\"%s\" is also the name of a channel of site %s (channel "
                                   "names are unique over every site)",
                                   ch->name, x->sites[x->dampers[m].site].name);
        /* The comedi back end: one site's channels may not share a converter. */
        for (int m = k; m < k + j && !r && x->daq.backend == DRTHS_DAQ_BACKEND_COMEDI; m++)
            r = drths_cfg_check_shared_converters(c, &x->dampers[m].exp, &ch->exp, m - k);
    }
    c->prefix = site_prefix;
    return r;
}

/* What the numerical site would refuse only when it builds its loop, after every handshake and
 * the probes (site-numerical/hybrid.c: the controller's design, each damper's Smith predictor),
 * refused here with the field that decides it: every damper a command under clipped-optimal
 * (the LQ design commands each), at most two dampers per degree of freedom for that design
 * (its inputs may not outnumber its states), a Bouc-Wen damper for the adaptive Smith
 * predictor (it identifies that model's parameters), and at most DRTHS_EXPERIMENT_MAX_DAMPERS
 * in all. The reference run and drths-check refused the first two too, but without naming a
 * line; the others no one refused before the run. */
static int check_dampers(vctx_t *c, const drths_experiment_t *x)
{
    int r = 0;
    char prefix[64];
    if (x->n_dampers > DRTHS_EXPERIMENT_MAX_DAMPERS)
        return drths_cfg_fail(c, -EINVAL, "sites",
                              "%d channels in all: the structure takes at most %d dampers",
                              x->n_dampers, DRTHS_EXPERIMENT_MAX_DAMPERS);
    for (int k = 0; k < x->n_dampers && !r; k++) {
        const drths_experiment_channel_t *ch = &x->dampers[k];
        drths_damper_model_t model = ch->exp.specimen.damper.model;
        snprintf(prefix, sizeof prefix, "sites[%d].channels[%d].", ch->site,
                 k - x->sites[ch->site].first);
        c->prefix = prefix;
        if (x->control.mode == DRTHS_CONTROL_CLIPPED_OPTIMAL &&
            !(drths_experiment_command_max(model) > 0.0))
            r = drths_cfg_fail(c, -EINVAL, "specimen.damper.model",
                               "%s takes no command, and control.mode clipped-optimal commands "
                               "every damper (use a damper with a command, or control.mode "
                               "passive-off, passive-on or fixed)",
                               drths_damper_model_name(model));
        else if (x->numerical.smith == DRTHS_SMITH_ADAPTIVE && model != DRTHS_DAMPER_PHILLIPS2013 &&
                 model != DRTHS_DAMPER_SPENCER1997)
            r = drths_cfg_fail(c, -EINVAL, "specimen.damper.model",
                               "%s: numerical.smith adaptive identifies a Bouc-Wen damper "
                               "(phillips2013-200kN or spencer1997-small) for each damper; use "
                               "numerical.smith fixed",
                               drths_damper_model_name(model));
    }
    c->prefix = NULL;
    if (r)
        return r;
    /* The LQ design's inputs (one per damper) may not outnumber its 2 n states. */
    if (x->control.mode == DRTHS_CONTROL_CLIPPED_OPTIMAL && x->n_dampers > 2 * x->n_dof)
        return drths_cfg_fail(c, -EINVAL, "sites",
                              "%d dampers on %d degrees of freedom: control.mode clipped-optimal "
                              "designs for at most %d (two per degree of freedom); use fewer "
                              "channels or control.mode passive-off, passive-on or fixed",
                              x->n_dampers, x->n_dof, 2 * x->n_dof);
    return 0;
}

int drths_cfg_fill_sites(vctx_t *c, drths_experiment_t *x, const struct raw_top *t)
{
    if (!t->sites)
        return 0;
    unsigned n = t->sites_count;
    x->sites_line = drths_yamlline_find(c->text, c->len, "sites");
    if (x->n_channels > 0)
        return drths_cfg_not_allowed(c, "sites",
                                     "with physical.channels (a site's channels go under "
                                     "sites[i].channels)");
    if (n < 1 || n > DRTHS_EXPERIMENT_MAX_SITES)
        return drths_cfg_fail(c, -EINVAL, "sites", "must list 1..%d sites (got %u)",
                              DRTHS_EXPERIMENT_MAX_SITES, n);
    unsigned total = 0;
    for (unsigned i = 0; i < n; i++)
        total += t->sites[i].channels && t->sites[i].channels_count <= DRTHS_EXPERIMENT_MAX_CHANNELS
                     ? t->sites[i].channels_count
                     : 0;
    x->sites = calloc(n, sizeof *x->sites);
    x->dampers = calloc(total > 0 ? total : 1, sizeof *x->dampers);
    if (!x->sites || !x->dampers)
        return drths_error_set(c->err, -ENOMEM, "%s: out of memory", c->file);
    x->n_sites = (int)n;
    int r = 0, k = 0;
    char prefix[40];
    for (int i = 0; i < (int)n && !r; i++) {
        snprintf(prefix, sizeof prefix, "sites[%d].", i);
        c->prefix = prefix;
        drths_experiment_site_t *s = &x->sites[i];
        r = fill_site(c, x, i, &t->sites[i], s, k);
        if (r)
            break;
        k += s->n_channels;
        x->n_dampers = k;
        for (int j = 0; j < i && !r; j++) {
            if (strcmp(x->sites[j].name, s->name) == 0)
                r = drths_cfg_fail(c, -EINVAL, "name", "\"%s\" is also sites[%d]'s name", s->name,
                                   j);
            else if (strcmp(x->sites[j].address, s->address) == 0)
                r = drths_cfg_fail(c, -EINVAL, "address",
                                   "\"%s\" is also the address of site %s (sites[%d]): each "
                                   "link needs its own",
                                   s->address, x->sites[j].name, j);
        }
    }
    c->prefix = NULL;
    return r ? r : check_dampers(c, x);
}

int drths_experiment_n_dampers(const drths_experiment_t *exp)
{
    return exp->n_sites > 0 ? exp->n_dampers : 1;
}

const drths_experiment_t *drths_experiment_damper(const drths_experiment_t *exp, int k)
{
    return exp->n_sites > 0 ? &exp->dampers[k].exp : exp;
}

void drths_experiment_damper_name(const drths_experiment_t *exp, int k, char *out, size_t cap)
{
    if (exp->n_sites > 0)
        snprintf(out, cap, "%s.%s", exp->sites[exp->dampers[k].site].name, exp->dampers[k].name);
    else
        snprintf(out, cap, "ch1");
}

int drths_experiment_find_site(const drths_experiment_t *exp, const char *name, drths_error_t *err)
{
    if (exp->n_sites == 0)
        return drths_error_set(err, -EINVAL,
                               "%s: --site %s: the file has no sites section (it describes one "
                               "actuator site; leave --site out)",
                               exp->path, name);
    for (int i = 0; i < exp->n_sites; i++)
        if (strcmp(exp->sites[i].name, name) == 0)
            return i;
    char list[DRTHS_EXPERIMENT_MAX_SITES * (DRTHS_SITE_NAME_MAX + 2)] = "";
    size_t used = 0;
    for (int i = 0; i < exp->n_sites; i++) {
        int w =
            snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", exp->sites[i].name);
        if (w > 0 && (size_t)w < sizeof list - used)
            used += (size_t)w;
    }
    char line[16] = "";
    if (exp->sites_line > 0)
        snprintf(line, sizeof line, ":%d", exp->sites_line);
    return drths_error_set(err, -ENOENT, "%s%s: sites: no site named \"%s\" (the file lists %s)",
                           exp->path, line, name, list);
}

int drths_experiment_select_site(drths_experiment_t *x, const char *name, drths_error_t *err)
{
    int i = drths_experiment_find_site(x, name, err);
    if (i < 0)
        return i;
    drths_experiment_site_t *s = &x->sites[i];
    if (s->n_channels > 1) {
        drths_experiment_channel_t *chs = calloc((size_t)s->n_channels, sizeof *chs);
        if (!chs)
            return drths_error_set(err, -ENOMEM, "%s: out of memory", x->path);
        memcpy(chs, &x->dampers[s->first], (size_t)s->n_channels * sizeof *chs);
        x->channels = chs;
        x->n_channels = s->n_channels;
        x->channels_line = s->line;
    } else {
        /* The view's sections are the top level's with the channel's own in place. */
        const drths_experiment_t *v = &x->dampers[s->first].exp;
        x->specimen = v->specimen;
        x->actuator = v->actuator;
        x->daq = v->daq;
        char *listen = x->physical.listen;
        x->physical = v->physical;
        x->physical.listen = listen;
    }
    /* Swapped, not copied: each string stays owned once, by the site or by the top level. */
    char *t = x->physical.listen;
    x->physical.listen = s->listen;
    s->listen = t;
    if (s->key_path) {
        t = x->link.key_file;
        x->link.key_file = s->key_file;
        s->key_file = t;
        t = x->link.key_path;
        x->link.key_path = s->key_path;
        s->key_path = t;
    }
    x->site = s;
    return 0;
}
