/* Telemetry for the live monitor (docs/monitor.md): each site's libuv thread (never the RT thread)
 * publishes a decimated stream of fixed-size frames, one JSON line per UDP datagram, to
 * drths-monitor; the monitor answers on the same socket with small control datagrams
 * ("drths-control start|stop|abort [TOKEN]").
 *
 * Telemetry never affects the test: a send that fails (no monitor listening, full buffer) is
 * dropped and counted, and nothing here blocks. The socket is connected to the monitor's
 * address, so the kernel delivers control datagrams from that address only; with a token file
 * the datagram must also carry the token (compared in constant time).
 *
 * Ownership: the caller owns drths_telemetry_t; _open creates its socket, _close closes it
 * (safe twice, and safe on a zeroed struct that was never opened). Threads: main (libuv) only.
 */
#ifndef DRTHS_TELEMETRY_H
#define DRTHS_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "platform/error.h"
#include "platform/udp.h"

#define DRTHS_TELEMETRY_EVENT_TEXT 200
#define DRTHS_TELEMETRY_MAX_DATAGRAM 1400
#define DRTHS_TELEMETRY_TOKEN_MAX 128
#define DRTHS_TELEMETRY_DEFAULT_HZ 50.0

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

/* One frame. Signals a site does not have are NaN and encode as null. */
typedef struct drths_telemetry_frame {
    char site[16];           /* "numerical" / "physical" */
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
    uint64_t event_seq;      /* increments with each new event text */
    char event[DRTHS_TELEMETRY_EVENT_TEXT]; /* the last event line */
} drths_telemetry_frame_t;

typedef struct drths_telemetry {
    int opened;              /* 0: never opened or closed (fd is then not ours) */
    int fd;
    drths_addr_t to;
    char token[DRTHS_TELEMETRY_TOKEN_MAX];
    size_t token_len;        /* 0: control datagrams need no token */
    uint64_t sent, send_errors, control_rejected;
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

/* Parses a control datagram "drths-control CMD[ TOKEN]" (trailing newline allowed). With
 * token_len > 0 the token must match. Returns 0 and *cmd; -EINVAL malformed or unknown command;
 * -EACCES wrong or missing token. RT-safe. */
int drths_telemetry_control_parse(const void *buf, size_t len, const char *token,
                                  size_t token_len, drths_telemetry_cmd_t *cmd);

/* Reads a token file: its first line without surrounding white space, 1 to
 * DRTHS_TELEMETRY_TOKEN_MAX - 1 characters. Returns 0 or a negative errno with err set.
 * init-only. */
int drths_telemetry_token_load(char *token, size_t *len, const char *path, drths_error_t *err);

/* Opens a UDP socket connected to the monitor at hostport ("--monitor" in errors), loads the
 * token file when token_path is not NULL and sets the decimation to rate_hz / frame_hz rows.
 * init-only. */
int drths_telemetry_open(drths_telemetry_t *t, const char *hostport, const char *token_path,
                         const char *site, double rate_hz, double frame_hz, drths_error_t *err);

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

/* Reads waiting control datagrams without blocking; returns the last valid command in *cmd
 * (DRTHS_TELEM_CMD_NONE if none). Invalid ones are counted in control_rejected. Main thread. */
void drths_telemetry_poll(drths_telemetry_t *t, drths_telemetry_cmd_t *cmd);

/* The file descriptor (for uv_poll), or -1. */
int drths_telemetry_fd(const drths_telemetry_t *t);

void drths_telemetry_close(drths_telemetry_t *t);

const char *drths_telemetry_state_name(int state);

#endif
