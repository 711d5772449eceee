/* The actuator site's data plane: the socket, the wire protocol and the real-time thread around
 * the per-tick state machine (site-physical/actuator.h).
 *
 * drths_physsite_run is the body of the one RT thread. In order it:
 *   1. applies the real-time options (SCHED_FIFO, mlockall, ...) to itself and publishes the
 *      report for main to print;
 *   2. waits up to wait_timeout_s for a valid HELLO (everything else is counted and ignored);
 *      answers it with HELLO_ACK and session keys, as a half-open session (several may wait at
 *      once: a replayed HELLO gets its answer too); the first datagram that opens under one's
 *      session keys (the first PROBE) makes it the session. A HELLO whose experiment
 *      fingerprint, rate, channel count, redundancy or units differ is refused with ABORT and
 *      the site waits on;
 *   3. echoes PROBEs, and on EPOCH 1 starts the ticker 5 ms later at tick 0 (with
 *      kernel_filter, the socket is then connected to the numerical site and the kernel filter
 *      narrowed to its session);
 *   4. per tick: waits for the absolute deadline, drains the socket (only the numerical site's
 *      address and session are acted on), runs drths_actuator_tick, sends the FEEDBACK (and any
 *      ABORT), pushes the row to the recorder and wakes main every 256 rows;
 *   5. at the end of the record sends STOP three times 10 ms apart.
 * With a command source in the config (drths_physsite_source_t: the OpenFresco analysis client,
 * site-physical/openfresco_app.h) steps 2, 3 and 5 and the socket are replaced by the source's
 * hooks, which feed the actuator; the tick loop, HOLD, records and summary are the same.
 * Several actuator channels (physical.channels, served over OpenFresco only): each tick runs
 * every channel's actuator on its own specimen or DAQ signals, in the channels' order; a channel
 * that enters HOLD by itself holds the others (one HOLD for the site, its sentence naming the
 * channel), and the run ends when every channel has finished.
 * It never prints: start-up and end lines go to main through an SPSC ring of event records; the
 * tick loop's transitions (HOLD with its cause, the HOLD target, its arrival, epochs) are
 * numbers there, which main turns into lines (drths_physsite_next_event).
 * Whatever ends the run, the thread returns with exit_code and exit_reason set.
 *
 * I/O goes through the DAQ driver (site-physical/daq.h) the experiment names: the virtual back
 * end over the rehearsal specimen, or a comedi board. Whatever ends the thread (end of record,
 * HOLD, an error, a failed start), it writes the DAQ's safe state before it returns. Every
 * transition (connected, run started, first command, epoch, HOLD with its reason, HOLD target
 * reached, end) is an event line for main.
 *
 * Ownership: the caller owns drths_physsite_t, the experiment, the socket and the recorder it
 * borrows (they must outlive it; they need to be open only when drths_physsite_run starts).
 * _init allocates the receive batch, the event ring, the wire receivers' zones, the actuator's
 * buffers and the specimen, and opens the DAQ; _close frees them and closes the DAQ (safe
 * twice).
 * Threads: drths_physsite_run runs on the RT thread; the fields marked "main" are for main;
 * the atomics are shared.
 */
#ifndef DRTHS_PHYSSITE_H
#define DRTHS_PHYSSITE_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/config/config.h"
#include "common/models/specimen.h"
#include "common/platform/error.h"
#include "common/platform/recorder.h"
#include "common/platform/ring.h"
#include "common/platform/rt.h"
#include "common/platform/runfolder.h"
#include "common/platform/udp.h"
#include "protocol/crypto.h"
#include "protocol/fingerprint.h"
#include "protocol/wire.h"
#include "site-physical/actuator.h"
#include "site-physical/daq.h"

#define DRTHS_PHYSSITE_EVENT_TEXT 320

/* One line for main to print. */
typedef struct drths_physsite_event {
    int warning; /* print to stderr as a warning rather than to stdout */
    char text[DRTHS_PHYSSITE_EVENT_TEXT];
} drths_physsite_event_t;

/* What the status line shows (see drths_physsite_t.state). */
typedef enum drths_physsite_state {
    DRTHS_PHYSSITE_WAITING = 0, /* no HELLO yet */
    DRTHS_PHYSSITE_CONNECTED,   /* handshake done, probing, no EPOCH 1 yet */
    DRTHS_PHYSSITE_RUNNING,
    DRTHS_PHYSSITE_HOLD,
    DRTHS_PHYSSITE_DONE
} drths_physsite_state_t;

struct drths_physsite;
struct drths_json;

/* Another source of commands than the numerical site over UDP (the OpenFresco analysis client,
 * site-physical/openfresco_app.h). With a source the RT thread neither drains nor sends
 * datagrams: the source feeds the actuator (drths_actuator_receive) from its hooks. All hooks
 * run on the RT thread.
 *   start:       instead of the handshake: waits for the client and feeds EPOCH 1. Returns 0
 *                when the run can start, else sets *reason (static or in ctx) and returns
 *                nonzero; the run then ends with exit 1.
 *   before_tick: before drths_actuator_tick of `tick`, woken at now_ns.
 *   after_tick:  with what the tick produced: out is the first channel's; the other channels'
 *                are drths_physsite_out.
 *   ended:       after the last tick; returns the sentence of a successful end (the actuator
 *                finished without HOLD). */
typedef struct drths_physsite_source {
    int (*start)(void *ctx, struct drths_physsite *ps, const char **reason);
    void (*before_tick)(void *ctx, struct drths_physsite *ps, uint64_t tick, int64_t now_ns);
    void (*after_tick)(void *ctx, struct drths_physsite *ps, uint64_t tick,
                       const drths_actuator_out_t *out);
    const char *(*ended)(void *ctx, struct drths_physsite *ps);
    /* Optional: writes more members into summary.json's top object. */
    void (*summary)(void *ctx, struct drths_physsite *ps, struct drths_json *j);
} drths_physsite_source_t;

typedef struct drths_physsite_config {
    const drths_experiment_t *exp;
    uint8_t psk[DRTHS_KEY_BYTES];
    uint8_t fingerprint[DRTHS_FINGERPRINT_BYTES];
    double wait_timeout_s;     /* for the first HELLO (--wait-timeout, default 300) */
    double silence_timeout_s;  /* after the handshake, before EPOCH 1 (10) */
    int64_t tick_spin_ns;      /* --tick-spin: drths_ticker_set_spin (0: sleep to the deadline) */
    int kernel_filter;         /* --kernel-filter: protocol/wire_filter.h in the kernel, and the
                                * socket connected to the numerical site once the run starts */
    drths_rt_options_t rt;     /* applied by the RT thread to itself */
    const drths_comedi_api_t *comedi_api; /* NULL = comedilib (tests pass a test double) */
    void (*wake)(void *ctx);   /* wakes main (uv_async_send); called from the RT thread */
    void *wake_ctx;
    const drths_physsite_source_t *source; /* NULL: the numerical site over UDP */
    void *source_ctx;
    /* --probe-only: the session's handshake and probes are answered, a STOP before the run ends
     * it with success, and an EPOCH 1 (a numerical site that wants to run) is refused with an
     * ABORT: nothing is ever driven (the caller opens the virtual back end). */
    int probe_only;
} drths_physsite_config_t;

/* An actuator channel after the first (physical.channels): its own specimen, DAQ, actuator and
 * tick output. The first channel is drths_physsite_t's spec, daq, act and out. */
typedef struct drths_physsite_extra {
    drths_specimen_t spec;
    drths_daq_t daq;
    drths_actuator_t act;
    drths_actuator_out_t out;
} drths_physsite_extra_t;

/* Session ids of authenticated HELLOs remembered, so that a replayed HELLO is refused before
 * decryption; a ring, the oldest forgotten first. Each recorded session can open a half-open
 * session once per this many: the larger, the more recorded sessions a flood needs. */
#define DRTHS_PHYSSITE_SEEN 1024
/* Half-open sessions kept at once (PROTOCOL.md section 7.4): HELLOs answered whose sender has
 * not yet sent a datagram under the session keys. A new one takes the place of the oldest from
 * its own address, else of the oldest from the address that holds the most. */
#define DRTHS_PHYSSITE_PENDING 8

/* A half-open session: an authentic HELLO answered with a HELLO_ACK and the session keys derived
 * (the ephemeral secret already wiped), waiting for the first datagram under those keys, which
 * only the holder of the HELLO's ephemeral secret can seal. A replayed HELLO stays here until
 * it is pushed out: it can never seal that datagram. */
typedef struct drths_physsite_pending {
    int used;
    uint64_t session_id;
    drths_addr_t from;              /* the HELLO's address; the session's datagrams come from it */
    uint8_t e_num[DRTHS_EPH_BYTES]; /* the HELLO's ephemeral: its repeats carry the same */
    drths_wire_tx_t tx;             /* HELLO_ACK key, session key, counters */
    drths_session_keys_t keys;      /* for the receiver, installed when the session proves itself */
    drths_replay_t replay;          /* the session's window (its HELLOs so far) */
    drths_msg_hello_t ack;          /* what its HELLO_ACK says (the link echoed, the version) */
    drths_msg_hello_t peer;         /* the HELLO's fields (for the "connected" line) */
    int64_t opened_ns;              /* arrival of the HELLO that opened it */
} drths_physsite_pending_t;

typedef struct drths_physsite {
    drths_physsite_config_t cfg;
    drths_udp_t *udp;           /* borrowed */
    drths_recorder_t *rec;      /* borrowed */
    drths_specimen_t spec;      /* the virtual back end's specimen (initialised either way) */
    drths_daq_t daq;
    drths_actuator_t act;
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    drths_udp_msg_t *batch;     /* DRTHS_UDP_BATCH receive slots, owned */
    drths_ring_t events;        /* drths_physsite_event_t, RT -> main */
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM]; /* send buffer */
    drths_msg_t msg;            /* the message being opened */
    drths_actuator_out_t out;

    /* Actuator channels (physical.channels; 1 for a file without them). Every tick runs each
     * channel's actuator; a HOLD of one channel holds them all (drths_physsite_hold). The
     * recorder row is the first channel's physical.csv row followed, for each further channel
     * k (2..n), by the same columns named "ch<k>_<column>" (drths_physsite_columns). */
    int n_channels;
    drths_physsite_extra_t *extra; /* n_channels - 1 channels, owned */
    double *row;                   /* n_channels * DRTHS_ACT_NCOLS values, owned (n > 1) */
    char **column_names;           /* n_channels * DRTHS_ACT_NCOLS names, owned (n > 1) */
    /* Channel i's sentences begin with label[i], "channel <i+1> (<name>): ", built once at
     * init so that the RT loop formats nothing for them; "" with one channel. */
    char label[DRTHS_EXPERIMENT_MAX_CHANNELS][DRTHS_CHANNEL_NAME_MAX + 24];
    /* A DAQ error that repeats tick after tick (a board that stopped answering fails every HOLD
     * tick) is printed once and then counted; the count is printed when another error comes
     * and at the end of the run (report_tick in physsite.c). RT thread. */
    struct {
        int active, code, channel;
        const char *op;
        uint64_t first_tick, last_tick, repeats;
    } daq_repeat[DRTHS_EXPERIMENT_MAX_CHANNELS];
    int held_together;             /* HOLD has been given to every channel */
    int hold_channel;              /* the channel whose own HOLD held the others, -1 if none */
    drths_hold_cause_t hold_cause; /* the site's HOLD cause (n > 1): hold_channel's, with its
                                    * channel */

    /* Session (RT thread). */
    int have_session;
    uint64_t session_id;
    drths_addr_t peer;
    double peer_rate_hz;
    drths_msg_hello_t hello;    /* what our HELLO_ACK says (the link is the peer's) */
    int64_t session_seen_ns;    /* last datagram of the session, other than a HELLO, that
                                 * opened under its keys (a HELLO can be replayed by anyone) */
    drths_physsite_pending_t pending[DRTHS_PHYSSITE_PENDING]; /* half-open sessions */
    drths_wire_rx_t pending_rx; /* opens a half-open session's datagrams (its keys loaded) */
    uint64_t pending_opened;    /* half-open sessions opened (HELLO_ACKs to a new session) */
    uint64_t pending_evicted;   /* half-open sessions pushed out by newer ones */
    uint64_t seen_sids[DRTHS_PHYSSITE_SEEN];   /* session ids of HELLOs authenticated so far */
    unsigned n_seen;
    drths_addr_t badtag_from;   /* HELLO-shaped datagrams failing authentication, by address */
    unsigned badtag_count;
    int badtag_reported, v1_reported;

    /* Counters (RT thread; main reads them after the join). */
    uint64_t pre_rejects[DRTHS_REJECT_COUNT]; /* HELLOs dropped before or at authentication,
                                               * and datagrams of half-open sessions */
    uint64_t wrong_source;      /* datagrams from an address other than the numerical site's */
    uint64_t other_session;     /* valid HELLOs of another session once running */
    int probe_refused;          /* --probe-only: an EPOCH 1 was refused */
    char stop_text[DRTHS_WIRE_MAX_TEXT + 1]; /* the text of a STOP before the run */
    uint64_t probes_answered;
    uint64_t send_errors;
    uint64_t feedback_sent;
    uint64_t rows_pushed;
    int64_t kernel_drops;       /* drths_udp_kernel_drops at the end (-1 if unknown) */
    int64_t run_start_ns, run_end_ns;

    /* Recorder figures for the summary, filled by main before it closes the recorder. */
    uint64_t rec_written, rec_dropped;
    const drths_provenance_t *provenance; /* for summary.json, set by main; may be NULL */

    /* Result (main reads after the join). */
    int exit_code;              /* 0 success, 1 run failed */
    char exit_reason[DRTHS_PHYSSITE_EVENT_TEXT]; /* drths_physsite_exit_reason */
    int exit_hold;              /* the run ended in HOLD: the reason is the HOLD's sentence,
                                 * written by main from the cause */
    int rt_rc;                  /* drths_rt_apply_thread's result */
    drths_rt_report_t rt_report;

    /* Shared. */
    atomic_int stop_request; /* main: 1 SIGINT/SIGTERM, 2 the monitor, 3 the records */
    char records_text[DRTHS_WIRE_MAX_TEXT + 1]; /* main, before stop_request 3 */
    atomic_int rt_ready;        /* RT: rt_report is filled */
    atomic_int done;            /* RT: the thread is about to return */
    atomic_int state;           /* drths_physsite_state_t */
    atomic_uint_fast64_t st_tick, st_applied, st_concealed, st_late, st_max_late_ns;
    atomic_uint_fast64_t st_rejected; /* datagrams rejected or from another address */
    atomic_uint_fast32_t st_L;
} drths_physsite_t;

/* Channel i's actuator, output, DAQ and specimen (0 <= i < n_channels). RT-safe. */
static inline drths_actuator_t *drths_physsite_act(drths_physsite_t *ps, int i)
{
    return i ? &ps->extra[i - 1].act : &ps->act;
}
static inline const drths_actuator_out_t *drths_physsite_out(const drths_physsite_t *ps, int i)
{
    return i ? &ps->extra[i - 1].out : &ps->out;
}
static inline drths_daq_t *drths_physsite_daq(drths_physsite_t *ps, int i)
{
    return i ? &ps->extra[i - 1].daq : &ps->daq;
}

/* Enters HOLD on every channel at once (drths_actuator_hold on each; abort_peer for the first
 * only, which speaks to the numerical site): a cause of the whole site (a signal, the monitor,
 * the OpenFresco client). RT-safe. */
void drths_physsite_hold(drths_physsite_t *ps, uint8_t reason, int abort_peer,
                         const drths_hold_cause_t *cause);

/* The same with a sentence that needs no formatting (copied into a DRTHS_HOLD_TEXT cause).
 * RT-safe. */
void drths_physsite_hold_text_cause(drths_physsite_t *ps, uint8_t reason, int abort_peer,
                                    const char *text);

/* Whether the site is in HOLD (any channel). RT-safe. */
int drths_physsite_in_hold(const drths_physsite_t *ps);

/* The HOLD sentence of the site in buf (at most DRTHS_WIRE_MAX_TEXT bytes; "" outside HOLD):
 * the first channel's, or with several channels the one naming the channel whose limit (or
 * DAQ) held them all. Returns buf. Not RT-safe: main formats it from the stored cause. */
const char *drths_physsite_hold_text(const drths_physsite_t *ps, char *buf, size_t cap);

/* Channel i's own HOLD sentence in buf (beginning with the label of the channel that held it
 * when that was another one; "" outside HOLD). Returns buf. Not RT-safe (main). */
const char *drths_physsite_channel_hold_text(const drths_physsite_t *ps, int i, char *buf,
                                             size_t cap);

/* main, after the RT thread has returned: the exit reason. When the run ended in HOLD it is
 * the HOLD's sentence, written into exit_reason here (the RT thread formats nothing). main calls
 * it once, before it adds to the reason (the records) and before the summary and the end lines,
 * which read exit_reason as it then stands. */
const char *drths_physsite_exit_reason(drths_physsite_t *ps);

/* Runs tick `tick` on every actuator channel, in the channels' order, as drths_physsite_run
 * does after the source's (or the socket's) work for the tick: drths_actuator_tick of each, a
 * channel's own HOLD given to every channel at once (drths_physsite_hold_text names it), and
 * with several channels the recorder row (ps->row; a channel already finished records NaN but
 * for its tick and time). Returns 0 while a channel ran, -EALREADY when every channel had
 * finished, else the first other failure of drths_actuator_tick (-EAGAIN: a channel not
 * started; the channels after it are not ticked); *finished is set when every channel finished
 * with this tick. RT-safe. */
int drths_physsite_tick(drths_physsite_t *ps, uint64_t tick, int64_t deadline_ns, int64_t woke_ns,
                        int *finished);

/* The actuator whose HOLD is the site's: the first channel's, unless the first had finished
 * (at the record's end) when another channel's own HOLD came; then that channel's. init-only
 * (for the end lines and summary.json). */
const drths_actuator_t *drths_physsite_hold_act(const drths_physsite_t *ps);

/* The recorder's column names and count for physical.csv: drths_actuator_columns for one
 * channel, else the first channel's columns then "ch<k>_<column>" for channel k = 2..n.
 * Valid until drths_physsite_close. init-only. */
const char *const *drths_physsite_columns(const drths_physsite_t *ps, int *n);

/* Builds the specimen, opens the DAQ (first, so that a missing board is reported before
 * anything else: the error names the device and comedilib's reason), builds the actuator from
 * the experiment (each of these once per channel, from the channel's view of the experiment,
 * drths_experiment_actuator), the wire receiver, the receive batch and the event ring. udp (bound
 * to the listen address) and rec (on physical.csv with drths_physsite_columns) are borrowed and may
 * be opened after init, before run. *daq_failed (may be NULL) is set to 1 when the failure was the
 * DAQ's. A failed init leaves nothing to close. init-only. */
int drths_physsite_init(drths_physsite_t *ps, const drths_physsite_config_t *cfg, drths_udp_t *udp,
                        drths_recorder_t *rec, int *daq_failed, drths_error_t *err);

/* The RT thread's body (see the file comment). Returns exit_code. */
int drths_physsite_run(drths_physsite_t *ps);

/* Asks the RT thread to stop (HOLD with "stopped by signal" once running). Any thread. */
void drths_physsite_request_stop(drths_physsite_t *ps);

/* The same path for Stop / Abort from the live monitor: the HOLD reason (code SIGNAL) says
 * "stopped from the monitor", unless a signal came first. Any thread. */
void drths_physsite_request_stop_monitor(drths_physsite_t *ps);

/* The records could not be written (text: which file, where, why; at most
 * DRTHS_WIRE_MAX_TEXT bytes): the RT thread HOLDs with reason RECORDS and sends ABORT RECORDS
 * with text to the numerical site, unless a stop was requested before. Any thread. */
void drths_physsite_request_records_abort(drths_physsite_t *ps, const char *text);

/* RT thread (a source's hooks): queues a line for main. Formats text (vsnprintf), so call it
 * on transitions only, never every tick; the tick loop's own transitions are records that main
 * formats. */
void drths_physsite_event(drths_physsite_t *ps, int warning, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* main: the next event line, 0; or -EAGAIN when there is none. */
int drths_physsite_next_event(drths_physsite_t *ps, drths_physsite_event_t *ev);

/* Writes summary.json (kind "hybrid-physical", with the software version) after the RT thread
 * has ended and main has set the exit reason (drths_physsite_exit_reason;
 * site-physical/summary.c). init-only. */
int drths_physsite_write_summary(drths_physsite_t *ps, const char *path, drths_error_t *err);

/* Frees what init allocated and releases the real-time report. Safe twice. init-only. */
void drths_physsite_close(drths_physsite_t *ps);

#endif
