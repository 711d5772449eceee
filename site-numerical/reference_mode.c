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

int drths_reference_mode_run(const drths_site_options_t *o, const drths_experiment_t *exp)
{
    drths_error_t err = {{0}};
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
