/* The shell both site programs (drths-numerical, drths-physical) run in: everything around the
 * real-time data plane that is not a site's own.
 *
 *  - the options common to both sites (--experiment, --key, --out, --require-rt, --cpu,
 *    --kernel-filter, --quiet, --monitor, --wait-start, --help, --version),
 *    parsed together with the program's own in one getopt_long loop, with common/platform/cli.h's
 *    messages and exit codes;
 *  - the start-up steps: libsodium, then the experiment file; the pre-shared key (or the public
 *    rehearsal key, with a warning); the run folder; the recorders;
 *  - one libuv loop owned by drths_site_t: SIGINT and SIGTERM become a stop request, an async
 *    handle lets the real-time thread wake the loop, a 50 ms timer serves the recorders (their
 *    telemetry tap, and a warning if one loses rows; each has its own writer thread), a 1 s timer redraws the status line, and with --monitor a 50 Hz timer sends
 *    telemetry and acts on the monitor's Start / Stop / Abort;
 *  - the real-time thread: started, optionally held at a gate until main has done its network
 *    start-up, and joined.
 *
 * What a site does itself comes in through drths_site_hooks_t: its event lines, its status
 * text, its telemetry counters and signals, and what a stop request means to it. The shell
 * knows nothing about peers: a stop request is one flag (drths_site_t.stop) the program hands to
 * each of its peers' loops, and a site may register several recorders, so a numerical site
 * coupled to several actuator sites needs no change here.
 *
 * This is main()'s half of each program, like common/platform/cli.h: it prints the status line, and
 * the parsers print their messages. Steps that can fail fill a drths_error_t and return a
 * negative errno, and main chooses the message and the exit code. Nothing here runs on the
 * real-time thread except the body the program gives drths_site_rt_start and drths_site_wake.
 *
 * Ownership: the program owns drths_site_t (static storage: it holds a libuv loop and a
 * telemetry frame). drths_site_init opens the loop and its handles; drths_site_close closes
 * them, the telemetry socket and the real-time report. Every function is init-only unless its
 * comment says otherwise.
 */
#ifndef DRTHS_SITE_SHELL_H
#define DRTHS_SITE_SHELL_H

#include <getopt.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "common/config/config.h"
#include "common/platform/error.h"
#include "common/platform/recorder.h"
#include "common/platform/reserve.h"
#include "common/platform/rt.h"
#include "common/platform/runfolder.h"
#include "common/platform/telemetry.h"
#include "common/platform/udp.h"
#include "protocol/crypto.h"

/* ---- command line ----------------------------------------------------------------------- */

/* getopt_long codes of the common options (above any character a program uses). */
enum {
    DRTHS_SITE_OPT_EXPERIMENT = 0x1000,
    DRTHS_SITE_OPT_KEY,
    DRTHS_SITE_OPT_OUT,
    DRTHS_SITE_OPT_REQUIRE_RT,
    DRTHS_SITE_OPT_CPU,
    DRTHS_SITE_OPT_KERNEL_FILTER,
    DRTHS_SITE_OPT_QUIET,
    DRTHS_SITE_OPT_MONITOR,
    DRTHS_SITE_OPT_MONITOR_TOKEN,
    DRTHS_SITE_OPT_WAIT_START,
};

/* The common options (the pointers are into argv). */
typedef struct drths_site_options {
    const char *experiment;    /* --experiment FILE (required) */
    const char *key;           /* --key FILE, or NULL: link.key_file, else the rehearsal key */
    const char *out;           /* --out DIR, or NULL: <output.directory>/<date>-<name>-<role> */
    const char *monitor;       /* --monitor HOST:PORT, or NULL */
    const char *monitor_token; /* --monitor-token FILE: refused (control is authenticated) */
    int require_rt;            /* --require-rt */
    int cpu;                   /* --cpu N, -1 when not given */
    int kernel_filter;         /* --kernel-filter */
    int quiet;                 /* --quiet: no status line */
    int wait_start;            /* --wait-start (needs --monitor) */
    int argc;                  /* the command line, for the run's provenance */
    char *const *argv;
} drths_site_options_t;

/* What the program adds to the common command line. */
typedef struct drths_site_cli {
    const char *prog;              /* "drths-numerical" */
    const struct option *options;  /* the program's own options, {0}-terminated; may be NULL */
    /* One of the program's own options (its code from `options`, arg NULL for a flag).
     * Returns 0, or -1 after printing why the value is wrong (common/platform/cli.h). */
    int (*option)(void *ctx, int code, const char *arg);
    void *ctx;
    void (*usage)(FILE *f);        /* --help text; the shell appends the exit-code paragraph */
    const char *failed;            /* what exit 1 means, for drths_cli_print_exit_codes */
} drths_site_cli_t;

/* The most options a program may add to the common ones. */
#define DRTHS_SITE_MAX_OWN_OPTIONS 32

/* drths_site_parse's result when main goes on with the run. */
#define DRTHS_SITE_CONTINUE (-1)

/* Parses argv: the common options into *o (after drths_site_options_default) and the program's
 * through cli->option. Then checks what every site needs: --experiment is given, --wait-start
 * comes with --monitor, and --monitor-token (gone) is not given. Returns DRTHS_SITE_CONTINUE, or
 * the exit code main returns at once: 0 after --help or --version, DRTHS_EXIT_USAGE after
 * printing what is wrong. Resets getopt first (optind = 0), so it may be called more than once. */
int drths_site_parse(const drths_site_cli_t *cli, int argc, char **argv,
                     drths_site_options_t *o);

/* No option given: cpu -1, everything else 0 or NULL. */
void drths_site_options_default(drths_site_options_t *o);

/* The real-time options of the common ones: the defaults, --require-rt and --cpu. */
void drths_site_rt_options(const drths_site_options_t *o, drths_rt_options_t *rt);

/* ---- start-up steps --------------------------------------------------------------------- */

/* Initialises libsodium, then loads the experiment file (in that order in both programs).
 * Prints "PROG: ..." and returns the exit code on failure (1 for libsodium, DRTHS_EXIT_USAGE
 * for the file), 0 on success. */
int drths_site_load_experiment(const char *prog, drths_experiment_t *exp, const char *path);

/* Prints each of the experiment's notes (fields the loader ignored) as one warning line on
 * stderr. init-only. */
void drths_site_print_notes(const char *prog, const drths_experiment_t *exp);

/* The pre-shared key of the link. */
typedef struct drths_site_key {
    uint8_t psk[DRTHS_KEY_BYTES];
    char id[17];      /* drths_key_id: 16 hex digits to compare between the laboratories */
    const char *path; /* the file it came from; NULL: the public rehearsal key */
} drths_site_key_t;

/* Loads the key from option_path (--key), else from file_path (link.key_file), else takes the
 * public rehearsal key. Returns 0 or drths_key_load's negative errno (err names the file and
 * what to change: mode, size). */
int drths_site_key_load(drths_site_key_t *k, const char *option_path, const char *file_path,
                        drths_error_t *err);

/* With the rehearsal key, prints on stderr "PROG: warning: no key file ...: using the public
 * rehearsal key (key id ...), which protects nothing; use it only to rehearse on one machine".
 * Nothing with a key file. */
void drths_site_key_warning(const char *prog, const drths_site_key_t *k);

/* Where a site's link goes, for drths_site_key_allowed. */
typedef struct drths_site_link {
    const drths_addr_t *addr; /* the actuator site's listen address, the numerical site's peer */
    const char *what;         /* where it came from: "--listen", "physical.listen", "--peer" ... */
    int listens;              /* 1: the site listens on addr; 0: it sends to addr */
    int real_daq;             /* the actuator site drives a real DAQ (daq.backend comedi) */
    const char *daq_name;     /* that back end's name, for the sentence */
} drths_site_link_t;

/* The public rehearsal key protects nothing, so it is only for a rehearsal on one machine: with
 * it, a link to or from an address that is not loopback (127.0.0.0/8, ::1; 0.0.0.0 and "::" are
 * every address) or a real DAQ is refused with -EPERM and a sentence in err naming the address
 * (or the back end) and what to do (drths-keygen, then --key or link.key_file). 0 with a key
 * file, or on loopback with the virtual specimen (the caller then prints
 * drths_site_key_warning). */
int drths_site_key_allowed(const drths_site_key_t *k, const drths_site_link_t *l,
                           drths_error_t *err);

/* Overwrites the key with zeros. RT-safe. */
void drths_site_key_wipe(drths_site_key_t *k);

/* Creates the run folder: o->out, else <exp.output.directory>/<date>-<exp.name>-<role>, with a
 * copy of the experiment file and of its ground motion record (drths_runfolder_copy_record), and
 * starts the run's provenance in *prov (drths_provenance_init, the experiment file, the record's
 * copy and the fingerprint; the program adds the key id and the real-time measures). Returns 0
 * or a negative errno (err says which path). */
int drths_site_run_folder(char *dir, size_t cap, const drths_site_options_t *o,
                          const drths_experiment_t *exp, const char *role,
                          drths_provenance_t *prov, drths_error_t *err);


/* ---- the shell -------------------------------------------------------------------------- */

/* What drths_site_t.stop holds: who asked the run to end first (a signal after the monitor
 * still counts as the signal, as SIGINT then SIGTERM is one stop). */
typedef enum drths_site_stop {
    DRTHS_SITE_STOP_NONE = 0,
    DRTHS_SITE_STOP_SIGNAL = 1,  /* SIGINT or SIGTERM */
    DRTHS_SITE_STOP_MONITOR = 2, /* Stop or Abort from the live monitor */
} drths_site_stop_t;

/* A stop request, as the program's stop hook sees it. */
typedef struct drths_site_stop_request {
    drths_site_stop_t by;
    int signum;          /* SIGINT or SIGTERM when by is DRTHS_SITE_STOP_SIGNAL */
    const char *command; /* "stop" or "abort" when by is DRTHS_SITE_STOP_MONITOR */
    int first;           /* no stop was requested before: say so (the status line is cleared) */
} drths_site_stop_request_t;

/* The program's side. Every hook runs on the loop's thread and may be NULL. */
typedef struct drths_site_hooks {
    void *ctx;
    /* Prints what the real-time side has queued (start-up and event lines), on each wake, every
     * 50 ms and once more after the join; calls drths_site_clear_status before printing. */
    void (*service)(void *ctx);
    /* The status line's text (without the leading \r); returns 0 to show nothing this time. */
    int (*status)(void *ctx, char *buf, size_t cap);
    /* A stop was requested (signal or monitor): the program tells its real-time side(s), and
     * when req->first prints its sentence. drths_site_t.stop is already set. */
    void (*stop)(void *ctx, const drths_site_stop_request_t *req);
    /* Telemetry: the frame's state and counters (the shell then sets the state READY while the
     * site waits for Start). */
    void (*counters)(void *ctx, drths_telemetry_frame_t *f);
    /* Telemetry: one recorder row (of a recorder opened with tap) into the frame's signals. */
    void (*tap)(void *ctx, const double *row, drths_telemetry_frame_t *f);
    /* A recorder's write failed (the disk is full despite the reserve, an I/O error, a file
     * size limit): the shell has said so on stderr and to the monitor; the program ends the run
     * and tells its peer (ABORT RECORDS with text, at most DRTHS_WIRE_MAX_TEXT bytes). Once per
     * recorder. */
    void (*records_failed)(void *ctx, const char *text);
} drths_site_hooks_t;

/* Recorders one site may register (one per peer and direction is far below this). */
#define DRTHS_SITE_MAX_RECORDERS 8

typedef struct drths_site {
    const char *prog;
    const drths_site_options_t *opt; /* borrowed */
    drths_site_hooks_t hooks;
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    uv_async_t async;
    uv_timer_t drain_timer, status_timer, tlm_timer;
    int loop_open;    /* uv_loop_init done */
    int handles_open; /* the handles above are open (until the run ends) */
    int started;      /* not waiting for Start (any more) */
    atomic_int stop;  /* drths_site_stop_t; read by the real-time side */
    atomic_int done;  /* the real-time thread has returned */

    /* the status line */
    int status_shown;
    int status_len;

    /* recorders drained by the loop */
    drths_recorder_t *rec[DRTHS_SITE_MAX_RECORDERS];
    double rec_rate_hz[DRTHS_SITE_MAX_RECORDERS];
    uint64_t rec_warned[DRTHS_SITE_MAX_RECORDERS]; /* lost rows last said */
    int64_t rec_warn_ns[DRTHS_SITE_MAX_RECORDERS]; /* when */
    int rec_failed_said[DRTHS_SITE_MAX_RECORDERS]; /* its write failure was said */
    int nrec;

    /* the space held for the run's files (drths_site_reserve) */
    drths_reserve_t reserve;
    int reserve_on;
    uint64_t reserve_total;
    struct {
        char file[64];
        uint64_t rows;
    } space[DRTHS_SITE_MAX_RECORDERS];
    int nspace;

    /* --monitor */
    int tlm_on;
    drths_telemetry_t tlm;
    uint8_t mkey[DRTHS_TELEMETRY_KEY_BYTES]; /* drths_site_monitor_key, until the open */
    int mkey_set, mkey_rehearsal;

    /* the real-time thread */
    pthread_t thread;
    int thread_on;
    void (*body)(void *ctx);
    void *body_ctx;
    int gated;         /* the shell applies rt itself and waits for drths_site_rt_go */
    sem_t ready, go;
    int go_run;        /* set before go is posted: 1 run the body, 0 return at once */
    drths_rt_options_t rt;
    drths_rt_report_t rt_report; /* gated: filled before ready */
    int rt_rc;                   /* gated: drths_rt_apply_thread's result */
} drths_site_t;

/* Opens the loop, starts serving SIGINT and SIGTERM, prepares the wake and the timers (started
 * by drths_site_timers_start). s must be zeroed (static storage). o and hooks->ctx must outlive
 * s. Returns 0 or a negative errno. */
int drths_site_init(drths_site_t *s, const char *prog, const drths_site_options_t *o,
                    const drths_site_hooks_t *hooks, drths_error_t *err);

/* Closes what is still open: the handles (running the loop until they are closed), the loop,
 * the telemetry socket, the real-time report. Joins the thread if it was not joined. Safe
 * twice, and on a zeroed s. */
void drths_site_close(drths_site_t *s);

/* Wakes the loop (uv_async_send): the real-time side calls it with ctx = s after a batch of
 * rows and at the end. RT-safe (async-signal-safe, allocates nothing). */
void drths_site_wake(void *s);

/* Serves signals and the monitor once without blocking and returns drths_site_t.stop (nonzero:
 * give up). For main's waits on the network (a drths_numsite_idle_fn). */
int drths_site_poll(void *s);

/* The monitor key (drths_telemetry_key_derive) from the link key, kept until
 * drths_site_monitor_open (call it before the key is wiped). RT-safe. */
void drths_site_monitor_key(drths_site_t *s, const drths_site_key_t *k);

/* --monitor: opens the telemetry socket (role "numerical" or "physical", frames decimated from
 * rate_hz rows) and starts the 50 Hz timer. Without --monitor, does nothing. Returns 0 or a
 * negative errno (err: the address, or no drths_site_monitor_key before). Wipes the copy of the
 * monitor key kept in s (the telemetry keeps its own). */
int drths_site_monitor_open(drths_site_t *s, const char *role, double rate_hz, drths_error_t *err);

/* With --monitor, prints "INDENTmonitor: telemetry to HOST:PORT (50 frames/s), authenticated
 * with the link key[; waiting for Start]" on stdout. */
void drths_site_print_monitor(const drths_site_t *s, const char *indent);

/* An event line for the monitor's log (nothing without --monitor). */
void drths_site_event(drths_site_t *s, const char *text);

/* The last frame: the event text, the counters, state DONE. Nothing without --monitor. */
void drths_site_monitor_end(drths_site_t *s, const char *text);

/* Runs the loop (signals and the monitor only) until Start, a signal or Stop; at once without
 * --wait-start. */
void drths_site_wait_start(drths_site_t *s);

/* One record a run will write, for drths_site_reserve: its CSV's file name, its columns and at
 * most how many rows. */
typedef struct drths_site_space {
    const char *file; /* "physical.csv" */
    int ncols;
    uint64_t rows;
} drths_site_space_t;

/* The steps of the experiment's record at its rate (its ground motion, tail included), for the
 * space a run needs. Returns 0 or a negative errno (err says what). */
int drths_site_record_steps(const drths_experiment_t *exp, uint64_t *steps, drths_error_t *err);

/* The rows to reserve for a record of steps steps at rate_hz: the steps, and 10 s more for the
 * dead time, a HOLD's ramp and settling, and the end. */
uint64_t drths_site_rows_for(uint64_t steps, double rate_hz);

/* Before the handshake: holds in dir the space the run will write (each record's .bin and CSV,
 * and DRTHS_RESERVE_END_BYTES for the summary and report; common/platform/reserve.h), so that
 * the recorders opened later (drths_site_recorder_open) get theirs and the end finds room for
 * the CSV and the summary. Returns 0, or -ENOSPC with the sentence naming the folder, the space
 * needed and the space free, or another negative errno. */
int drths_site_reserve(drths_site_t *s, const char *dir, const drths_site_space_t *recs, int n,
                       drths_error_t *err);

/* drths_site_reserve for a site's one record of a whole run: file with ncols columns, at most
 * drths_site_rows_for the experiment's record steps rows. Returns 0, -ENOSPC (the space is not
 * there) or -EINVAL (the experiment's record cannot be read), both refusals before anything ran,
 * or another negative errno; err says what. */
int drths_site_reserve_run(drths_site_t *s, const char *dir, const drths_experiment_t *exp,
                           const char *file, int ncols, drths_error_t *err);

/* Opens a recorder on dir/file (the CSV written at close; the binary stream beside it during
 * the run) with the columns given, its ring sized for rate_hz, takes its .bin's share of the
 * space held by drths_site_reserve (preallocated: -ENOSPC if it is gone), starts its writer
 * thread at
 * DRTHS_RECORDER_WRITER_PRIORITY (without the privilege, at the default policy: reported by
 * drths_site_print_recorders) and serves it from the loop from now on: with tap and --monitor
 * its rows feed the telemetry (hooks.tap); rows it loses are said at once, on stderr and to
 * the monitor. Returns 0 or a negative errno. */
int drths_site_recorder_open(drths_site_t *s, drths_recorder_t *rec, const char *dir,
                             const char *file, const char *const *columns, int ncols,
                             double rate_hz, int tap, drths_error_t *err);

/* "INDENTrecord: physical.bin, written by a thread at SCHED_FIFO priority 60: applied; ring of
 * 32768 rows (6.6 s)" for each recorder, then "INDENTspace: 5.6 MB held for the records
 * (fallocate)" or why not, on stdout. */
void drths_site_print_recorders(const drths_site_t *s, const char *indent);

/* Starts the drain timer (every 50 ms) and, unless --quiet or stderr is not a terminal, the
 * status line (every second). */
void drths_site_timers_start(drths_site_t *s);

/* Erases the status line if one is shown (before printing anything else). */
void drths_site_clear_status(drths_site_t *s);

/* Starts the real-time thread running body(ctx). With rt non-NULL the thread first applies rt
 * to itself (drths_site_t.rt_report, .rt_rc), then waits for drths_site_rt_go; with NULL the
 * body applies its own real-time options. When the body returns, drths_site_t.done is set and
 * the loop woken. Returns 0 or a negative errno. */
int drths_site_rt_start(drths_site_t *s, void (*body)(void *ctx), void *ctx,
                        const drths_rt_options_t *rt);

/* With a gate: waits until the thread has applied its options; returns rt_rc. */
int drths_site_rt_ready(drths_site_t *s);

/* With a gate: lets the thread run its body (run = 1) or return at once (run = 0). */
void drths_site_rt_go(drths_site_t *s, int run);

/* Runs the loop until the real-time thread has returned (at once if there is none), joins it,
 * closes the handles, serves the program's last events (hooks.service), drains the recorders
 * once more, erases the status line and gives back the space held (the CSV and the summary are
 * written next). */
void drths_site_run(drths_site_t *s);

/* Prints the real-time report's lines (drths_rt_report_line), each after indent, on stdout. */
void drths_site_rt_print(const drths_rt_report_t *rep, const char *indent);

/* "SCHED_FIFO 80: granted; mlockall: ...": the report on one line, for summary.json. */
void drths_site_rt_summary(const drths_rt_report_t *rep, char *out, size_t cap);

/* A record with holes must not pass for a complete one: when the recorder lost `dropped` rows,
 * "record incomplete: N rows lost (the recorder's ring overflowed)" becomes the run's reason
 * (or is appended to a failure's reason), *exit_code becomes DRTHS_EXIT_FAILED and the sentence
 * is printed on stderr. Nothing happens when dropped is 0. */
void drths_site_mark_incomplete(const char *prog, uint64_t dropped, char *reason, size_t cap,
                                int *exit_code);

/* A record the disk did not take must not pass for a complete one either: when writing r's .bin
 * failed, "record incomplete: N rows of physical.bin not written (No space left on device; it
 * stops at row M)" becomes the run's reason (or is appended), *exit_code becomes
 * DRTHS_EXIT_FAILED and the sentence is printed on stderr. After drths_recorder_close; nothing
 * happens when every write succeeded. */
void drths_site_mark_unwritten(const char *prog, const drths_recorder_t *r, char *reason,
                               size_t cap, int *exit_code);

/* The end of a run's record, once nothing pushes rows into r any more: closes r, printing
 * close's error after prog on stderr. *ring_dropped (may be NULL) becomes the rows r's ring
 * dropped and *lost (may be NULL) those and the rows the disk refused. Returns
 * drths_recorder_close's result, with err its sentence. init-only. */
int drths_site_records_close(const char *prog, drths_recorder_t *r, uint64_t *ring_dropped,
                             uint64_t *lost, drths_error_t *err);

/* The run's reason and exit code after its record, once the reason is set: closed and close_err
 * are drths_site_records_close's result and sentence. drths_site_mark_incomplete with
 * ring_dropped, drths_site_mark_unwritten, and when the close failed for another reason (the CSV
 * could not be written from the .bin) its sentence appended; *exit_code becomes
 * DRTHS_EXIT_FAILED whenever the close failed. init-only. */
void drths_site_records_mark(const char *prog, const drths_recorder_t *r, uint64_t ring_dropped,
                             int closed, const drths_error_t *close_err, char *reason, size_t cap,
                             int *exit_code);

/* text becomes the run's reason when the run had not failed (exit_code 0) or had no reason,
 * else it is appended after "; " (truncated to cap). */
void drths_site_append_reason(char *reason, size_t cap, int exit_code, const char *text);

/* The rows of r's record that are not on disk: dropped by its ring and not written. After
 * drths_recorder_close. */
uint64_t drths_site_rows_lost(drths_recorder_t *r);

/* prov->real_time: the control thread's measures (drths_site_rt_summary of rep, which may be
 * NULL when no real-time thread ran) and each recorder's writer thread. */
void drths_site_provenance_rt(const drths_site_t *s, const drths_rt_report_t *rep,
                              drths_provenance_t *prov);

#endif
