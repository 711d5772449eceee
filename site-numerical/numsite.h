/* The numerical site's network glue: the socket and the wire protocol around the hybrid loop
 * (site-numerical/hybrid.h), the handshake, the start-up probes and the choice of L.
 * summary.json is written by site-numerical/summary.h.
 *
 * Threads: drths_numsite_handshake and drths_numsite_probe run on the main thread before the run
 * (they call `idle` at least every 50 ms so main can serve its signals); drths_numsite_run is
 * the body of the RT thread, which owns the socket from then on; the atomics are for main's
 * status line. Nothing here prints: errors come back as sentences in drths_error_t.
 *
 * Ownership: the caller owns drths_numsite_t and the experiment, hybrid loop and recorder it
 * borrows. _init opens the socket and allocates the receive batch, the wire receiver's zone and
 * the probe statistics; _close frees them (safe twice).
 */
#ifndef DRTHS_NUMSITE_H
#define DRTHS_NUMSITE_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/platform/error.h"
#include "common/platform/recorder.h"
#include "common/platform/udp.h"
#include "protocol/crypto.h"
#include "protocol/estimator.h"
#include "protocol/fingerprint.h"
#include "protocol/wire.h"
#include "site-numerical/hybrid.h"
#include "site-numerical/steptime.h"

/* Only pointers to the experiment are taken here; common/config/config.h defines it. */
typedef struct drths_experiment drths_experiment_t;

/* One link: the socket, session and probes towards one actuator site. A numerical site with
 * several sites holds one per site (drths_numsite_run_links). */
typedef struct drths_numsite {
    const drths_experiment_t *exp; /* borrowed */
    char name[32];                 /* the site's name, "" for a file without sites */
    drths_addr_t peer;
    char peer_text[80];
    drths_udp_t udp;
    uint8_t psk[DRTHS_KEY_BYTES];
    uint8_t fingerprint[DRTHS_FINGERPRINT_BYTES];
    char fingerprint_hex[65];
    char peer_fingerprint_hex[65];
    uint64_t session_id;
    uint8_t eph_pk[DRTHS_EPH_BYTES]; /* our ephemeral public key (the secret is in rx only) */
    drths_msg_hello_t hello;         /* what our HELLO says */
    drths_wire_tx_t tx;
    drths_wire_rx_t rx;
    drths_udp_msg_t *batch; /* DRTHS_UDP_BATCH slots, owned */
    uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
    int64_t dt_ns;
    int64_t wait_spin_ns; /* --wait: busy-poll this long before sleeping (drths_udp_wait_spin) */
    int kernel_filter;    /* --kernel-filter: drths_numsite_filter applied */
    /* start-up probes (or the --probe-only test's) */
    drths_probe_stats_t probes;
    uint64_t probe_count; /* probes to send: link.probes, or drths_numsite_set_probes */
    int probe_only;       /* drths_numsite_set_probes was called: a --probe-only test, whose
                           * end (STOP or ABORT) is sent in spaced copies */
    uint64_t probes_sent, probes_answered;
    /* Their losses as the link lost them: runs of consecutive unanswered probes (bursts), the
     * longest, and echoes that came back after a later probe's echo (reordered). */
    uint64_t probe_loss_bursts, probe_loss_longest, probes_reordered;
    int have_probe_summary;
    drths_rtt_summary_t probe_summary;
    int64_t rtt_q_ns; /* the probes' round trip at link.quantile */
    drths_lchoice_t lchoice;
    /* counters */
    uint64_t hellos_sent, wrong_source, send_errors, seal_errors;
    int v1_peer; /* a datagram of protocol v1 arrived from the peer */
    /* shared with main during the run */
    _Atomic long pub_step;
    _Atomic uint64_t pub_concealed;
    _Atomic int64_t pub_rtt_ns;
    _Atomic uint64_t pub_late;     /* late feedback */
    _Atomic uint64_t pub_rejected; /* datagrams rejected or from another address */
    /* With several links (drths_numsite_run_links): this link's concealed feedback, stored
     * with release each step beside pub_rtt_ns, this link's newest round trip. */
    _Atomic uint64_t pub_link_concealed;
    /* ... and its late feedback and rejected datagrams (the monitor's per-link counters). */
    _Atomic uint64_t pub_link_late, pub_link_rejected;
    /* The loop thread: the records cannot be written (drths_numsite_records_abort). */
    atomic_int records_abort;
    char records_text[DRTHS_WIRE_MAX_TEXT + 1];
    int64_t first_hello_ns; /* when the first HELLO was sent (0: none yet) */
    int64_t run_start_ns, run_end_ns;
    /* The loop's step timing (drths_numsite_run_links measures it into links[0]'s): borrowed,
     * NULL when not measured. */
    drths_steptime_t *steptime;
} drths_numsite_t;

/* Opens a UDP socket towards peer_text ("--peer" in errors), prepares the sender and receiver
 * with psk, draws the session id and the ephemeral key pair, and computes the experiment
 * fingerprint. init-only. */
int drths_numsite_init(drths_numsite_t *s, const drths_experiment_t *exp, const char *peer_text,
                       const uint8_t psk[DRTHS_KEY_BYTES], drths_error_t *err);

/* --kernel-filter: connects the socket to the peer and attaches the kernel filter of
 * protocol/wire_filter.h for this run's session, so datagrams from other addresses, of other
 * sessions or malformed are dropped in the kernel (counted only as kernel_drops in
 * summary.json, not by reason). The session id is this site's own, so the filter is narrow
 * from the first HELLO on. Returns 0 or a negative errno (err says which step). init-only. */
int drths_numsite_filter(drths_numsite_t *s, drths_error_t *err);

/* Frees everything and wipes the keys. Safe twice. init-only. */
void drths_numsite_close(drths_numsite_t *s);

/* Returns nonzero when main wants to give up (a signal). Called at least every 50 ms. */
typedef int (*drths_numsite_idle_fn)(void *ctx);

/* HELLO every 200 ms until a HELLO_ACK, for at most timeout_s. Then installs the session keys
 * and checks the actuator site's fingerprint, rate, channels and redundancy; on a difference it
 * sends ABORT (FINGERPRINT_MISMATCH or CONFIG_MISMATCH) and fails. Returns 0, -ETIMEDOUT (no
 * answer: err says where it looked), -EPROTO (mismatch), -ECANCELED (idle said stop) or a socket
 * error. init-only. */
int drths_numsite_handshake(drths_numsite_t *s, double timeout_s, drths_numsite_idle_fn idle,
                            void *ctx, drths_error_t *err);

/* Sends probe_count PROBEs paced max(dt, 0.5 ms), collects the echoes until all are answered or
 * 2 s after the last one, counts the loss bursts and reordering, and chooses L (s->lchoice).
 * Returns 0, -EPROTO when fewer than 10 % came back or the actuator site aborted, -ECANCELED.
 * A --probe-only test (drths_numsite_set_probes) that fails or is cancelled here sends ABORT in
 * spaced copies, as drths_numsite_farewell does STOP. init-only. */
int drths_numsite_probe(drths_numsite_t *s, drths_numsite_idle_fn idle, void *ctx,
                        drths_error_t *err);

/* --probe-only: n probes instead of link.probes (room for their statistics). Returns 0 or
 * -ENOMEM / -EINVAL (err says which). init-only. */
int drths_numsite_set_probes(drths_numsite_t *s, uint64_t n, drths_error_t *err);

/* The probe interval: max(dt, 0.5 ms). RT-safe. */
int64_t drths_numsite_probe_interval_ns(const drths_numsite_t *s);

/* Ends a session that will not run: STOP (USER_STOP) with text, three times; for a
 * --probe-only test (drths_numsite_set_probes) 20 copies 10 ms apart, so that the actuator site
 * hears the end through a burst of loss (PROTOCOL.md section 7.5). Blocks for their 190 ms.
 * init-only. */
void drths_numsite_farewell(drths_numsite_t *s, const char *text);

/* The records cannot be written (text: which file, where, why; at most DRTHS_WIRE_MAX_TEXT
 * bytes): the run ends with ABORT RECORDS and text to the actuator site, unless it is ending
 * already. Any thread (the loop's, while drths_numsite_run runs). */
void drths_numsite_records_abort(drths_numsite_t *s, const char *text);

/* The run: polls the hybrid loop, seals and sends what it asks, pushes its rows to rec, feeds it
 * every valid datagram from the peer. stop is polled each iteration (a signal: ABORT SIGNAL;
 * the value 2 means the live monitor asked, which the ABORT's text says).
 * wake(ctx) is called every 256 rows and at the end. Returns when the loop is done. Runs on the
 * RT thread; RT-safe in steady state. */
void drths_numsite_run(drths_numsite_t *s, drths_hybrid_t *h, drths_recorder_t *rec,
                       atomic_int *stop, void (*wake)(void *ctx), void *ctx);

/* The same with n links (s[0 .. n-1], link i the hybrid loop's link i, n == h->n_links): every
 * socket is drained into the loop with its link's index and each action is sent on its link.
 * The stop request, the records' abort and the published counters are s[0]'s, and so is the
 * step timing (s[0].steptime, when set: each step's start and its last COMMAND's send). RT
 * thread; RT-safe in steady state. */
void drths_numsite_run_links(drths_numsite_t *s, int n, drths_hybrid_t *h, drths_recorder_t *rec,
                             atomic_int *stop, void (*wake)(void *ctx), void *ctx);

#endif
