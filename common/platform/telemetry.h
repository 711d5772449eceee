/* Telemetry for the live monitor (docs/monitor.md): each site's libuv thread (never the RT thread)
 * publishes a decimated stream of fixed-size frames to drths-monitor, one UDP datagram each: an
 * authenticated header line, then the frame as one JSON line:
 *
 *     drths-telemetry 2 SITE EPOCH SEQ ACK MAC\n{"v":1,"site":...}\n
 *
 * The monitor answers on the same socket with authenticated control datagrams:
 *
 *     drths-control 2 SITE EPOCH CTR start|stop|abort MAC\n
 *
 * MAC is 64 hex digits: keyed BLAKE2b-256 (crypto_generichash) with the monitor key over a
 * domain label ("drths telemetry v2" or "drths control v2", then a zero byte), the header up to
 * and including the space before MAC, and (telemetry) the JSON line. The monitor key is derived
 * from the link's pre-shared key (drths_telemetry_key_derive), so no secret travels and the
 * monitor key cannot be turned back into the link key.
 *
 * Freshness. EPOCH is the site's start (CLOCK_REALTIME in ns when its telemetry opened), SEQ
 * counts its frames: the monitor takes a frame only when (EPOCH, SEQ) is above the last one of
 * that site, so a replayed frame is refused. A control datagram names the EPOCH of the site it
 * is for (a datagram of an earlier run of the site is refused) and carries the monitor's
 * counter CTR, which only grows; the site executes a datagram only when CTR is above the last
 * one it executed, answers a retransmission of that last one again without executing it, and
 * refuses anything older. ACK in every frame is the CTR of the last control the site executed
 * (0: none): that is the monitor's acknowledgement, and the site sends a frame at once after
 * each control datagram it accepts.
 *
 * Telemetry never affects the test: a send that fails (no monitor listening, full buffer) is
 * dropped and counted, and nothing here blocks. The socket is connected to the monitor's
 * address, so the kernel delivers control datagrams from that address only.
 *
 * Ownership: the caller owns drths_telemetry_t; _open creates its socket, _close closes it
 * (safe twice, and safe on a zeroed struct that was never opened). Threads: main (libuv) only.
 */
#ifndef DRTHS_TELEMETRY_H
#define DRTHS_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"
#include "common/platform/udp.h"

#define DRTHS_TELEMETRY_EVENT_TEXT 200
/* A numerical site with 8 links and 16 channels fits (unit.telemetry); one with one link sends
 * about 600 bytes. */
#define DRTHS_TELEMETRY_MAX_DATAGRAM 4096
#define DRTHS_TELEMETRY_TOKEN_MAX 128
#define DRTHS_TELEMETRY_DEFAULT_HZ 50.0
#define DRTHS_TELEMETRY_KEY_BYTES 32
/* Site names: 1 to 31 of [A-Za-z0-9_.-] ("numerical", "physical", or an actuator site's name in
 * a file with several: the experiment file's names take the same characters). */
#define DRTHS_TELEMETRY_SITE_MAX 32
#define DRTHS_TELEMETRY_CONTROL_MAX 192
/* A numerical site with several links reports each link and each of its channels. */
#define DRTHS_TELEMETRY_MAX_LINKS 8
#define DRTHS_TELEMETRY_MAX_CHANNELS 16

/* What a site is doing, as the page shows it. */
typedef enum drths_telemetry_state {
    DRTHS_TELEM_WAITING = 0, /* waiting for the peer (handshake, probes) */
    DRTHS_TELEM_READY,       /* --wait-start: waiting for Start from the monitor */
    DRTHS_TELEM_RUN,
    DRTHS_TELEM_HOLD,
    DRTHS_TELEM_DONE
} drths_telemetry_state_t;

typedef enum drths_telemetry_cmd {
    DRTHS_TELEM_CMD_NONE = 0,
    DRTHS_TELEM_CMD_START,
    DRTHS_TELEM_CMD_STOP,  /* graceful: the SIGTERM path */
    DRTHS_TELEM_CMD_ABORT  /* HOLD now: the operator-HOLD path */
} drths_telemetry_cmd_t;

/* One link of a numerical site with several (its actuator site's name, its round trip and
 * counters, and its channels first .. first + n_channels - 1 of the frame's channels). */
typedef struct drths_telemetry_link {
    char site[DRTHS_TELEMETRY_SITE_MAX];
    double rtt_ms;           /* last round trip */
    double meas_force_N;     /* the feedback force of the link's first channel */
    uint64_t late, concealed, rejected;
    int first, n_channels;
} drths_telemetry_link_t;

/* One damper of the numerical site's structure. */
typedef struct drths_telemetry_channel {
    double cmd_disp_m;       /* commanded displacement */
    double used_force_N;     /* force the integrator used */
    double damper_cmd;       /* damper command */
} drths_telemetry_channel_t;

/* One frame. Signals a site does not have are NaN and encode as null. */
typedef struct drths_telemetry_frame {
    char site[DRTHS_TELEMETRY_SITE_MAX]; /* "numerical", "physical" or the actuator site's name */
    uint64_t seq;            /* frames sent so far by this site */
    int state;               /* drths_telemetry_state_t */
    int64_t tick;            /* step / tick of the signals (-1 before the run) */
    double time_s;           /* run time of the signals */
    double cmd_disp_m;       /* commanded damper displacement */
    double meas_disp_m;      /* measured displacement (actuator site) */
    double meas_force_N;     /* measured force */
    double used_force_N;     /* force the integrator used (numerical site) */
    double damper_cmd;       /* damper command (current, normalised) */
    double smith_N;          /* Smith predictor correction: used - measured force */
    double L_ticks;          /* loop delay */
    double rtt_ms;           /* last round trip */
    double lateness_us;      /* tick wake-up lateness of this tick (actuator site) */
    uint64_t late, concealed, rejected;
    uint64_t telemetry_errors; /* telemetry datagrams that could not be sent */
    uint64_t control_refused;  /* control datagrams refused (forged, replayed, stale) */
    uint64_t event_seq;      /* increments with each new event text */
    char event[DRTHS_TELEMETRY_EVENT_TEXT]; /* the last event line */
    /* A numerical site with several links: each link and each channel ("links" in the JSON;
     * absent when n_links is 0, and the fields above are then the only ones). */
    int n_links;
    drths_telemetry_link_t link[DRTHS_TELEMETRY_MAX_LINKS];
    drths_telemetry_channel_t ch[DRTHS_TELEMETRY_MAX_CHANNELS];
} drths_telemetry_frame_t;

/* The authenticated header of a telemetry datagram, as drths_telemetry_frame_open found it. */
typedef struct drths_telemetry_header {
    char site[DRTHS_TELEMETRY_SITE_MAX];
    uint64_t epoch, seq, ack;
    const char *json;        /* the JSON line inside the datagram (not NUL-terminated) */
    size_t json_len;         /* without its newline */
} drths_telemetry_header_t;

/* An authenticated control datagram. */
typedef struct drths_telemetry_control {
    char site[DRTHS_TELEMETRY_SITE_MAX];
    uint64_t epoch, ctr;
    drths_telemetry_cmd_t cmd;
} drths_telemetry_control_t;

typedef struct drths_telemetry {
    int opened;              /* 0: never opened or closed (fd is then not ours) */
    int fd;
    drths_addr_t to;
    uint8_t key[DRTHS_TELEMETRY_KEY_BYTES]; /* the monitor key */
    uint64_t epoch;          /* this site's start, the EPOCH of its frames */
    uint64_t ctl_last;       /* CTR of the last control executed (0: none), the frames' ACK */
    uint64_t sent, send_errors;
    /* Control datagrams refused, by reason: malformed or a wrong MAC (not the monitor's key);
     * stale (a CTR below the last executed, or another EPOCH or site: a replay). The total is
     * control_rejected. A retransmission of the last one is control_duplicates (answered). */
    uint64_t control_rejected, control_bad, control_stale, control_duplicates;
    int decimation;          /* rows per frame (>= 1) */
    uint64_t rows;           /* rows seen by drths_telemetry_row_due */
    unsigned beat_calls;     /* drths_telemetry_beat_due's state */
    uint64_t frames_at_beat;
    drths_telemetry_frame_t f; /* the frame being filled; main fills the fields */
} drths_telemetry_t;

/* Resets a frame: site name, state WAITING, tick -1, every signal NaN, counters 0. RT-safe. */
void drths_telemetry_frame_init(drths_telemetry_frame_t *f, const char *site);

/* Sets the frame's event text (truncated) and increments event_seq. RT-safe. */
void drths_telemetry_frame_event(drths_telemetry_frame_t *f, const char *text);

/* One JSON object on one line ending in '\n' (no allocation). Returns its length, or -ENOSPC
 * when cap is too small. RT-safe. */
int drths_telemetry_encode(const drths_telemetry_frame_t *f, char *buf, size_t cap);

/* The monitor key: keyed BLAKE2b-256 of the label "drths monitor v1" with the link's
 * pre-shared key as the key. RT-safe. */
void drths_telemetry_key_derive(uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const uint8_t *psk,
                                size_t psk_len);

/* "start", "stop", "abort" (NULL for anything else) and back (DRTHS_TELEM_CMD_NONE). RT-safe. */
const char *drths_telemetry_cmd_name(drths_telemetry_cmd_t cmd);
drths_telemetry_cmd_t drths_telemetry_cmd_parse(const char *name);

/* Builds a telemetry datagram: the authenticated header, then the JSON line json (json_len
 * bytes, its newline included). Returns the length, -EINVAL for a bad site name, -ENOSPC when
 * cap is too small. RT-safe. */
int drths_telemetry_frame_seal(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const char *site,
                               uint64_t epoch, uint64_t seq, uint64_t ack, const char *json,
                               size_t json_len, char *buf, size_t cap);

/* Checks a telemetry datagram. Returns 0 and *h; -EINVAL malformed (header, or the JSON line
 * is not one object on one line naming the header's site); -EACCES the MAC does not match.
 * RT-safe. */
int drths_telemetry_frame_open(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const void *buf,
                               size_t len, drths_telemetry_header_t *h);

/* Builds a control datagram. Returns its length, -EINVAL (site name or command), -ENOSPC.
 * RT-safe. */
int drths_telemetry_control_seal(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES],
                                 const drths_telemetry_control_t *c, char *buf, size_t cap);

/* Checks a control datagram (a trailing newline allowed). Returns 0 and *c; -EINVAL
 * malformed or unknown command; -EACCES the MAC does not match. Freshness is the caller's
 * (drths_telemetry_poll). RT-safe. */
int drths_telemetry_control_open(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const void *buf,
                                 size_t len, drths_telemetry_control_t *c);

/* Reads a token file: its first line without surrounding white space, 1 to
 * DRTHS_TELEMETRY_TOKEN_MAX - 1 characters. Returns 0 or a negative errno with err set.
 * init-only. */
int drths_telemetry_token_load(char *token, size_t *len, const char *path, drths_error_t *err);

/* Opens a UDP socket connected to the monitor at hostport ("--monitor" in errors) with the
 * monitor key (copied), sets the epoch (now) and the decimation to rate_hz / frame_hz rows.
 * init-only. */
int drths_telemetry_open(drths_telemetry_t *t, const char *hostport,
                         const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const char *site,
                         double rate_hz, double frame_hz, drths_error_t *err);

/* Counts one record row; 1 when this row should become a frame (every decimation rows, the
 * first included). Main thread. */
int drths_telemetry_row_due(drths_telemetry_t *t);

/* Encodes t->f and sends it; a failure is counted in send_errors and returned, never fatal.
 * Main thread, non-blocking. */
int drths_telemetry_send(drths_telemetry_t *t);

/* Called at 50 Hz: 1 on every tenth call when no frame went since the last one (the site is
 * waiting, ready or done, so no rows make frames), and the caller sends one then, so the monitor
 * sees the site alive 5 times a second. RT-safe. */
int drths_telemetry_beat_due(drths_telemetry_t *t);

/* Reads waiting control datagrams without blocking. *cmd is the strongest new command among
 * them (abort beats stop beats start; DRTHS_TELEM_CMD_NONE if none): authenticated, for this
 * site and epoch, with a CTR above the last executed. A retransmission of the last executed
 * one is counted, not executed; anything else is refused and counted by reason. Returns how
 * many were new or retransmissions: the caller then sends a frame at once, whose ACK answers
 * them. Main thread. */
int drths_telemetry_poll(drths_telemetry_t *t, drths_telemetry_cmd_t *cmd);

/* The file descriptor (for uv_poll), or -1. */
int drths_telemetry_fd(const drths_telemetry_t *t);

void drths_telemetry_close(drths_telemetry_t *t);

const char *drths_telemetry_state_name(int state);

#endif
