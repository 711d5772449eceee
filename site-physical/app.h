/* drths-physical, the program: the state its main(), its modes, the shell's hooks and the RT
 * thread share, and one session of the site (drths_physapp_run_session).
 *
 * main.c parses the options into a drths_physapp_t, loads the experiment and chooses the mode:
 * --io-check (site-physical/iocheck_mode.h), --serve (site-physical/serve.h: one session after
 * another), or one session: a drths link to a numerical site (--probe-only: its connectivity
 * test only) or, with --openfresco, one OpenSees/OpenFresco analysis client.
 *
 * This is main()'s half of the program, like common/site/shell.h: it prints the start-up and
 * end lines and turns errors into one message and an exit code (common/platform/cli.h).
 *
 * Ownership: main owns the drths_physapp_t (static storage: it holds the shell's libuv loop and
 * the data plane, one run per process) and the experiment in it, loaded before a session and
 * closed after; a session opens the shell, the data plane, the socket, the OpenFresco server and
 * the recorder, and closes them all again before it returns (so --serve can run the next). The
 * key stays loaded for main to wipe. Everything here is init-only; the RT thread runs inside
 * drths_physapp_run_session (drths_physsite_run) and only touches ps. */
#ifndef DRTHS_PHYSICAL_APP_H
#define DRTHS_PHYSICAL_APP_H

#include "common/config/config.h"
#include "common/platform/runfolder.h"
#include "common/platform/udp.h"
#include "common/site/shell.h"
#include "site-physical/iocheck_mode.h"
#include "site-physical/openfresco_app.h"
#include "site-physical/physsite.h"

#define DRTHS_PHYSAPP_PROG "drths-physical"

typedef struct drths_physapp {
    drths_site_options_t so; /* the common options */
    const char *listen, *openfresco;
    const char *site; /* --site NAME: this site's entry of the file's sites section, or NULL */
    double wait_timeout_s;
    long tick_spin_us; /* --tick-spin, -1: auto (drths_ticker_auto_spin_ns) */
    drths_ofr_app_config_t ocfg;
    drths_ofr_app_t ofr;
    int ofr_open;
    int stiffness_set; /* --openfresco-stiffness given */
    int serve;         /* --serve: one analysis after another */
    int signalled;     /* a signal asked the site to stop */
    int served;        /* the last session's client completed its set-up */
    drths_experiment_t exp;
    drths_site_t shell;
    drths_site_key_t key;
    drths_addr_t laddr;
    drths_physsite_config_t cfg;
    drths_physsite_t ps;
    int ps_open;
    drths_udp_t udp;
    drths_recorder_t rec;
    int rec_open;
    int rt_printed;
    char dir[4096];
    drths_provenance_t prov;
    int io_check;               /* --io-check */
    drths_iocheck_options_t io; /* --io-amplitude, --io-leg, --io-current */
} drths_physapp_t;

/* One session: the shell (a->so, with this program's hooks), the experiment's configuration
 * (the key, the OpenFresco server with --openfresco, the listen address), the data plane and
 * its board, the socket, the run folder and physical.csv; the start-up lines, the run on the
 * RT thread until it ends, the records and summary.json; then everything it opened is closed
 * again and the outputs left in their safe state. Sets a->served (the OpenFresco client
 * completed its set-up) and a->signalled (a signal stopped it). Returns the exit code. */
int drths_physapp_run_session(drths_physapp_t *a);

#endif
