/* drths-physical --serve (site-physical/serve.h). */
#include "site-physical/serve.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/platform/cli.h"
#include "common/platform/runfolder.h"

#define PROG DRTHS_PHYSAPP_PROG

int drths_physapp_serve(drths_physapp_t *a)
{
    const char *base = a->so.out;
    char dir[1024];
    if (mkdir(base, 0777) != 0 && errno != EEXIST)
        return drths_cli_error(PROG, "--out %s: %s", base, strerror(errno));
    for (int n = 1;; n++) {
        snprintf(dir, sizeof dir, "%s/analysis-%d", base, n);
        /* A folder is used by one run (drths_runfolder_check_unused): a site serving again into
         * the same --out goes on after the analyses already there. */
        if (drths_runfolder_check_unused(dir, NULL) != 0)
            continue;
        a->so.out = dir;
        int code = drths_physapp_run_session(a);
        if (code != 0 || a->signalled || !a->served) {
            a->so.out = base;
            return code;
        }
        printf("drths-physical: --serve: analysis %d ended cleanly; waiting for the next client\n",
               n);
        fflush(stdout);
    }
}
