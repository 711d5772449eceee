/* drths-physical --openfresco HOST:PORT --serve --out DIR, the program mode: OpenFresco
 * analyses served one after another, each a session of its own (drths_physapp_run_session) in
 * its own run folder DIR/analysis-N, the listener open again between them. main()'s half of the
 * program (site-physical/app.h): it prints a line between analyses. init-only. */
#ifndef DRTHS_PHYSICAL_SERVE_H
#define DRTHS_PHYSICAL_SERVE_H

#include "site-physical/app.h"

/* Serves analyses until one does not end cleanly: a HOLD, a limit, a lost client, a wait with
 * no client or a signal ends the serving with that session's exit code (after a HOLD the
 * operator looks at the rig before the next analysis). a->so.out is DIR (it is created if
 * need be) and is DIR again on return. Returns the exit code. */
int drths_physapp_serve(drths_physapp_t *a);

#endif
