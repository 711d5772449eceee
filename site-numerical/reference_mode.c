/* drths-numerical --reference (site-numerical/reference_mode.h). */
#include "site-numerical/reference_mode.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "common/platform/cli.h"
#include "site-numerical/reference.h"
#include "site-numerical/summary.h"

#define PROG "drths-numerical"

static void progress(long step, long steps, void *ctx)
{
    fprintf(stderr, "\r  step %ld of %ld (%.0f %%)", step, steps, 100.0 * step / steps);
    fflush(stderr);
}

/* physical.channels cannot be honoured by a reference run, so such a file is refused rather
 * than run with the top-level specimen alone. The reference integrates the experiment's
 * structure with one damper, the specimen at specimen.floor, as a hybrid run does (and a hybrid
 * run refuses such a file too: drths_experiment_check_network). The channels
 * are an OpenFresco analysis's: channel k is the k-th DOF of the analysis's trial vector
 * (genericClient -dof k), a DOF of the OpenSees model, and the file gives no DOF of this
 * structure for any channel (a channel may not set specimen.floor), so there is no place to put
 * their dampers. The reference of such an analysis is the analysis run in OpenSees without the
 * site. Returns 0, or the exit code after the message. */
static int refuse_channels(const drths_experiment_t *exp)
{
    if (exp->n_channels == 0)
        return 0;
    char line[16] = "";
    if (exp->channels_line > 0)
        snprintf(line, sizeof line, ":%d", exp->channels_line);
    return drths_cli_usage_error(PROG,
                                 "%s%s: physical.channels: --reference cannot honour %d actuator "
                                 "channels: it integrates this structure with one damper (the "
                                 "specimen at specimen.floor), and each channel is a DOF of the "
                                 "OpenFresco analysis (genericClient -dof), not of this structure; "
                                 "their reference is the analysis run in OpenSees without the site "
                                 "(docs/openfresco.md). Leave physical.channels out for a "
                                 "reference run of the structure",
                                 exp->path, line, exp->n_channels);
}

int drths_reference_mode_run(const drths_site_options_t *o, const drths_experiment_t *exp)
{
    drths_error_t err = {{0}};
    int code = refuse_channels(exp);
    if (code != 0)
        return code;
    char dir[4096];
    static drths_provenance_t prov;
    if (drths_site_run_folder(dir, sizeof dir, o, exp, "reference", &prov, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    /* The reference run's summary.json is reference.c's; its provenance goes beside it. */
    snprintf(prov.real_time, sizeof prov.real_time, "no real-time thread (reference run)");
    if (drths_provenance_write(dir, &prov, &err) != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    printf("drths-numerical: reference run of '%s' at %.0f Hz into %s\n", exp->name, exp->rate_hz,
           dir);
    drths_reference_summary_t sum;
    int show = !o->quiet && isatty(2);
    int rc = drths_reference_run(exp, dir, &sum, show ? progress : NULL, NULL, &err);
    if (show)
        fprintf(stderr, "\r%60s\r", "");
    if (rc != 0) {
        fprintf(stderr, "drths-numerical: %s\n", err.msg);
        return rc == -EINVAL || rc == -ENOTSUP ? DRTHS_EXIT_CONFIG : DRTHS_EXIT_FAILED;
    }
    drths_numsite_print_reference(stdout, &sum, dir);
    drths_reference_summary_close(&sum);
    return 0;
}
