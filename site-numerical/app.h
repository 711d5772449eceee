/* drths-numerical, the program: the state its main(), the shell's hooks and the RT thread
 * share, and one hybrid session (drths_numapp_run_session).
 *
 * main.c parses the options into a drths_numapp_t, loads the experiment and chooses the mode:
 * --reference (site-numerical/reference_mode.h), or a session with the actuator site: the
 * handshake and the probes, then the hybrid run, or with --probe-only the connectivity test
 * alone (the same handshake and probes, their report, and no run).
 *
 * This is main()'s half of the program, like common/site/shell.h: it prints the start-up and
 * end lines and turns errors into one message and an exit code (common/platform/cli.h).
 *
 * Ownership: main owns the drths_numapp_t (static storage: it holds the shell's libuv loop and
 * the data plane, one run per process) and the experiment in it; the session opens the shell,
 * the numerical site's socket, the hybrid loop and the recorder and closes them before it
 * returns. Everything here is init-only; the RT thread runs inside drths_numapp_run_session
 * (drths_numsite_run). */
#ifndef DRTHS_NUMERICAL_APP_H
#define DRTHS_NUMERICAL_APP_H

#include <stdint.h>

#include "common/config/config.h"
#include "common/platform/recorder.h"
#include "common/platform/runfolder.h"
#include "common/site/shell.h"
#include "site-numerical/hybrid.h"
#include "site-numerical/numsite.h"
#include "site-numerical/summary.h"

#define DRTHS_NUMAPP_PROG "drths-numerical"

typedef struct drths_numapp {
    drths_site_options_t so; /* the common options */
    const char *peer;        /* --peer */
    double connect_timeout_s, peer_timeout_s;
    int reference;
    int probe_only;         /* --probe-only */
    double probe_seconds;   /* --probe-seconds */
    int64_t wait_spin_ns; /* --wait */
    drths_experiment_t exp;
    drths_site_t shell;
    drths_numsite_t sites[DRTHS_HYBRID_MAX_LINKS]; /* the links: one per actuator site */
    int n_links;
    drths_hybrid_t hyb;
    drths_recorder_t rec;
    drths_steptime_t steptime; /* the loop's step timing (sites[0].steptime points here) */
    int running;   /* the RT thread was let into the run */
    int tlm_state; /* drths_telemetry_state_t */
    drths_numsite_frame_map_t frame_map; /* numerical.csv columns of the frame's signals */
    char dir[4096];
    char reason[700];
    int exit_code;
    drths_provenance_t prov;
} drths_numapp_t;

/* One session with the actuator site: the shell (a->so, with this program's hooks), the key,
 * the socket, the run folder and the start-up lines; the RT thread, Start when waited for, the
 * handshake and the probes; then (without --probe-only) the hybrid run with the measured loop
 * delay, numerical.csv, and in every case summary.json and the end lines; then the shell, the
 * hybrid loop and the site are closed again. Returns the exit code. */
int drths_numapp_run_session(drths_numapp_t *a);

#endif
