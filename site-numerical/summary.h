/* What the numerical site tells people about a run: summary.json; the lines drths-numerical
 * prints about the start-up probes, the end of a hybrid run and a reference run; the status
 * line; the live monitor's frames. The printing functions write to the stream they are given
 * (main passes stdout). init-only, except the status and frame functions, which read the RT
 * thread's published atomics from the loop thread during the run. */
#ifndef DRTHS_NUMSITE_SUMMARY_H
#define DRTHS_NUMSITE_SUMMARY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/platform/error.h"
#include "common/platform/recorder.h"
#include "common/platform/runfolder.h"
#include "common/platform/telemetry.h"
#include "site-numerical/hybrid.h"
#include "site-numerical/numsite.h"
#include "site-numerical/reference.h"
#include "common/site/shell.h"

/* What summary.json says besides the loop's own numbers. */
typedef struct drths_numsite_outcome {
    const char *exit_reason; /* one sentence */
    int exit_code;
    double wall_s;
    uint64_t recorder_dropped;
    const char *rt_summary;  /* e.g. "SCHED_FIFO 80: not permitted; ..." */
    const drths_recorder_t *rec; /* closed; NULL when the run never started */
    const drths_provenance_t *provenance; /* may be NULL */
    const drths_numsite_t *links; /* every link (links[0] is the s of the calls below), or NULL */
    int n_links;                  /* several: summary.json gets "links" and "stopped_by" */
    const drths_steptime_t *steptime; /* the loop's step timing, or NULL (not measured) */
} drths_numsite_outcome_t;

/* Writes dir/summary.json (kind "hybrid-numerical"). h may be NULL when the run never started.
 * init-only. */
int drths_numsite_write_summary(const drths_numsite_t *s, const drths_hybrid_t *h,
                                const char *dir, const drths_numsite_outcome_t *o,
                                drths_error_t *err);

/* The end of a hybrid run: dir/summary.json (an error is printed on stderr), the "run finished:
 * REASON (exit N)" line (also to the monitor), the end lines and the run folder, on f. */
void drths_numsite_report_end(FILE *f, drths_site_t *shell, const drths_numsite_t *s,
                              const drths_hybrid_t *h, const char *dir,
                              const drths_numsite_outcome_t *o);

/* The start-up lines of a hybrid run or, probe_only set, of the connectivity test: experiment,
 * peer, kernel filter, the feedback wait, the key (key_path NULL: the rehearsal key, whose
 * warning the caller prints), the run folder. */
void drths_numsite_print_start(FILE *f, const drths_numsite_t *s, const char *key_path,
                               const char *key_id, const char *dir, int kernel_filter,
                               int probe_only);

/* The probes' round trips and the loop delay L chosen from them. */
void drths_numsite_print_probes(FILE *f, const drths_numsite_t *s);

/* --probe-only: the probes' losses (bursts, reordering) against the redundancy's reach and the
 * concealment budget, and a go / no-go line. init-only. */
void drths_numsite_print_probe_only(FILE *f, const drths_numsite_t *s);

/* The sentence saying how a run that started ended (by_monitor: the stop came from the live
 * monitor); returns the exit code: 0 at the end of the record, else DRTHS_EXIT_FAILED. */
int drths_numsite_end_reason(const drths_hybrid_t *h, int by_monitor, double peer_timeout_s,
                             char *out, size_t cap);

/* The end lines: the loop's counters and round trips (h NULL: the run never started), then the
 * rejected datagrams. */
void drths_numsite_print_end(FILE *f, const drths_numsite_t *s, const drths_hybrid_t *h,
                             uint64_t dropped);

/* The modes, peaks and timing of a reference run, and the files it wrote into dir. */
void drths_numsite_print_reference(FILE *f, const drths_reference_summary_t *s, const char *dir);

/* The status line during the run ("  step S of N (P %), concealed C, rtt R ms"); with
 * several links (s[0 .. nl-1], as drths_numsite_run_links holds them) every link's round trip
 * and concealed feedback by site ("  step S of N (P %), concealed C: labA 0.412 ms 3, labB
 * 12.020 ms 0"); returns its length (snprintf's: at most cap - 1 written). Reads the atomics
 * the loop thread publishes; init-only (the shell's status timer). */
int drths_numsite_status_text(const drths_numsite_t *s, int nl, const drths_hybrid_t *h, char *buf,
                              size_t cap);

/* The frame's counters (late, concealed, rejected; with several links each link's too, nl
 * links s[0..nl-1]); the caller sets its state. */
void drths_numsite_frame_counters(const drths_numsite_t *s, int nl, drths_telemetry_frame_t *f);

/* Where the frame's signals are in numerical.csv (step, time, damper displacement and
 * command, measured and used force, round trip, L): -1 when the loop does not record one. With
 * several links, each link's round trip and measured force and each damper's displacement,
 * force and command too (the frame's first signals are then damper 1's and link 1's). */
#define DRTHS_NUMSITE_FRAME_SIGNALS 8
typedef struct drths_numsite_frame_map {
    int col[DRTHS_NUMSITE_FRAME_SIGNALS];
    int n_links; /* 0 with one link */
    int link_rtt[DRTHS_TELEMETRY_MAX_LINKS], link_force[DRTHS_TELEMETRY_MAX_LINKS];
    int n_channels;
    int ch_disp[DRTHS_TELEMETRY_MAX_CHANNELS], ch_force[DRTHS_TELEMETRY_MAX_CHANNELS],
        ch_cmd[DRTHS_TELEMETRY_MAX_CHANNELS];
} drths_numsite_frame_map_t;

void drths_numsite_frame_map(drths_numsite_frame_map_t *m, const drths_hybrid_t *h);

/* One numerical.csv row into the frame's signals (NaN for a signal not recorded). */
void drths_numsite_frame_row(const drths_numsite_frame_map_t *m, const double *row,
                             drths_telemetry_frame_t *f);

#endif
