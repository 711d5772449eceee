#include "site-physical/openfresco_app.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/json.h"
#include "common/platform/rtclock.h"
#include "common/platform/tcp.h"

#define IO_BUF_BYTES (8 * DRTHS_OFR_MAX_DATA + 64)
#define TEXT_OF(x) #x
#define TEXT_OF_VALUE(x) TEXT_OF(x)
#define PENDING_TEXT TEXT_OF_VALUE(DRTHS_OFR_PENDING)
#define RING_RECORDS 64
#define POLL_MS 100
#define REPLY_POLL_NS 20000L /* the I/O thread looks for the RT thread's reply this often */
#define START_POLL_NS INT64_C(1000000)
#define DEFAULT_SETUP_TIMEOUT_S 10.0
#define DEFAULT_STEP_TIMEOUT_S 10.0
/* Keepalive: a dead analysis machine fails the connection after 5 + 5 x 1 = 10 s of silence. */
#define KEEPALIVE_IDLE_S 5
#define KEEPALIVE_INTERVAL_S 1
#define KEEPALIVE_COUNT 5

#define REQ_SETUP DRTHS_OFR_REQ_SETUP
#define REQ_TARGET DRTHS_OFR_REQ_TARGET
#define REQ_MEASURE DRTHS_OFR_REQ_MEASURE
#define REQ_DIE DRTHS_OFR_REQ_DIE
#define REQ_LOST DRTHS_OFR_REQ_LOST
#define REQ_NOTE DRTHS_OFR_REQ_NOTE
#define REQ_COMMIT DRTHS_OFR_REQ_COMMIT
#define TGT_STEP DRTHS_OFR_TGT_STEP
#define TGT_ITER DRTHS_OFR_TGT_ITERATION

typedef struct req {
    int kind;
    double disp;       /* SETUP, NOTE: a flag */
    drths_ofr_vec_t v; /* TARGET: the trial displacement, one value per channel */
    double time;       /* TARGET: the trial's analysis time, NaN when the client sends none */
    char text[DRTHS_OFR_TEXT];
} req_t;

/* RT -> I/O. */
typedef struct resp {
    drths_ofr_response_t r;
} resp_t;

/* ---- init / close -------------------------------------------------------------------------- */

/* Opens the listening socket on app->laddr (backlog 1: one client at a time) and, the first
 * time, learns the port the kernel picked for port 0, so that a listener opened again after a
 * dropped client is on the same port. Returns 0 or a negative errno (err says which address). */
static int open_listener(drths_ofr_app_t *app, drths_error_t *err)
{
    int fd = socket(app->laddr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return drths_error_set(err, -errno, "TCP socket: %s", strerror(errno));
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    char text[80];
    drths_addr_format(&app->laddr, text, sizeof text);
    if (bind(fd, (const struct sockaddr *)&app->laddr.ss, app->laddr.len) != 0 ||
        listen(fd, 1) != 0) {
        int e = errno;
        close(fd);
        return drths_error_set(err, -e, "cannot listen on %s: %s", text, strerror(e));
    }
    app->laddr.len = sizeof app->laddr.ss;
    (void)getsockname(fd, (struct sockaddr *)&app->laddr.ss, &app->laddr.len);
    app->listen_fd = fd;
    return 0;
}

/* A timeout option: 0 takes the default; otherwise a positive finite number of seconds. */
static int check_timeout(double *v, double dflt, const char *option, drths_error_t *err)
{
    if (*v == 0.0)
        *v = dflt;
    if (!(*v > 0.0) || !isfinite(*v))
        return drths_error_set(err, -EINVAL, "%s must be a positive number of s", option);
    return 0;
}

int drths_ofr_app_init(drths_ofr_app_t *app, const drths_ofr_app_config_t *cfg, drths_error_t *err)
{
    memset(app, 0, sizeof *app);
    app->cfg = *cfg;
    app->listen_fd = -1;
    atomic_init(&app->conn_fd, -1);
    atomic_init(&app->io_stop, 0);
    atomic_init(&app->io_refuse, 0);
    atomic_init(&app->io_done, 0);
    atomic_init(&app->io_last_ns, 0);
    if (!(cfg->step_duration_s > 0.0) || !isfinite(cfg->step_duration_s))
        return drths_error_set(err, -EINVAL, "--step-duration must be a positive number of s");
    if (drths_precor_check(&cfg->precor) != 0)
        return drths_error_set(err, -EINVAL, "--predict-fraction must be in [0, 1)");
    if (app->cfg.detect_wait_s <= 0.0)
        app->cfg.detect_wait_s = 0.2;
    if (app->cfg.n_channels <= 0)
        app->cfg.n_channels = 1;
    if (app->cfg.n_channels > DRTHS_OFR_MAX_DOF)
        return drths_error_set(err, -EINVAL, "%d actuator channels: at most %d over OpenFresco",
                               app->cfg.n_channels, DRTHS_OFR_MAX_DOF);
    int rc = check_timeout(&app->cfg.setup_timeout_s, DEFAULT_SETUP_TIMEOUT_S,
                           "--openfresco-setup-timeout", err);
    if (rc == 0)
        rc = check_timeout(&app->cfg.step_timeout_s, DEFAULT_STEP_TIMEOUT_S,
                           "--openfresco-step-timeout", err);
    if (app->cfg.iteration_duration_s == 0.0)
        app->cfg.iteration_duration_s = cfg->step_duration_s / 4.0;
    if (app->cfg.max_iterations == 0)
        app->cfg.max_iterations = DRTHS_OFR_DEFAULT_MAX_ITERATIONS;
    if (rc == 0 && app->cfg.max_iterations < 1)
        rc = drths_error_set(err, -EINVAL, "--openfresco-max-iterations must be at least 1");
    if (rc == 0)
        rc = check_timeout(&app->cfg.iteration_duration_s, cfg->step_duration_s / 4.0,
                           "--openfresco-iteration-duration", err);
    if (rc == 0)
        rc = drths_addr_parse(&app->laddr, cfg->listen, "--openfresco", err);
    if (rc)
        return rc;
    rc = drths_ring_init(&app->to_rt, sizeof(req_t), RING_RECORDS);
    if (rc)
        return drths_error_set(err, rc, "out of memory for the OpenFresco rings");
    rc = drths_ring_init(&app->to_io, sizeof(resp_t), RING_RECORDS);
    if (rc) {
        drths_ring_close(&app->to_rt);
        return drths_error_set(err, rc, "out of memory for the OpenFresco rings");
    }
    app->inbuf = malloc(IO_BUF_BYTES);
    app->outbuf = malloc(IO_BUF_BYTES);
    if (!app->inbuf || !app->outbuf) {
        rc = drths_error_set(err, -ENOMEM, "out of memory for the OpenFresco buffers");
        goto fail;
    }
    /* With port 0 the kernel picks one: laddr then holds the real address, for the log, the
     * tests and a listener opened again. */
    rc = open_listener(app, err);
    if (rc)
        goto fail;
    return 0;
fail:
    free(app->inbuf);
    free(app->outbuf);
    app->inbuf = app->outbuf = NULL;
    drths_ring_close(&app->to_rt);
    drths_ring_close(&app->to_io);
    return rc;
}

void drths_ofr_app_close(drths_ofr_app_t *app)
{
    int fd = atomic_exchange(&app->conn_fd, -1);
    if (fd >= 0)
        close(fd);
    if (app->listen_fd >= 0)
        close(app->listen_fd);
    app->listen_fd = -1;
    free(app->inbuf);
    free(app->outbuf);
    app->inbuf = app->outbuf = NULL;
    drths_ring_close(&app->to_rt);
    drths_ring_close(&app->to_io);
}

/* The tracking's RMS, but NaN while no target has been away from 0: the figure is relative to
 * the targets, and before any step there is none. */
static double rms_pct(const drths_tracking_t *t)
{
    if (!(t->sum_d2 > 0.0))
        return NAN;
    return drths_tracking_rms_pct(t);
}

double drths_ofr_app_step_rms_pct(const drths_ofr_app_t *app)
{
    drths_tracking_t all;
    drths_tracking_init(&all);
    for (int i = 0; i < DRTHS_OFR_MAX_DOF; i++) {
        all.n += app->ch_track[i].n;
        all.sum_e2 += app->ch_track[i].sum_e2;
        all.sum_d2 += app->ch_track[i].sum_d2;
    }
    return rms_pct(&all);
}

double drths_ofr_app_channel_rms_pct(const drths_ofr_app_t *app, int i)
{
    if (i < 0 || i >= DRTHS_OFR_MAX_DOF)
        return NAN;
    return rms_pct(&app->ch_track[i]);
}

double drths_ofr_app_step_max_err(const drths_ofr_app_t *app)
{
    double m = 0.0;
    for (int i = 0; i < DRTHS_OFR_MAX_DOF; i++)
        m = fmax(m, drths_tracking_max_err(&app->ch_track[i]));
    return m;
}

double drths_ofr_app_channel_max_err(const drths_ofr_app_t *app, int i)
{
    if (i < 0 || i >= DRTHS_OFR_MAX_DOF)
        return NAN;
    return drths_tracking_max_err(&app->ch_track[i]);
}

/* ---- I/O thread ---------------------------------------------------------------------------- */

static void post(drths_ofr_app_t *app, drths_ofr_req_kind_t kind, double disp, const double *v,
                 int n, double time, const char *text)
{
    req_t r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.disp = disp;
    r.time = time;
    for (int i = 0; v && i < n && i < DRTHS_OFR_MAX_DOF; i++)
        r.v.v[i] = v[i];
    if (text)
        snprintf(r.text, sizeof r.text, "%s", text);
    /* The RT thread pops every tick and the client waits for each answer, so the ring holds a
     * handful at most; retry rather than lose a record if it is ever full. */
    while (drths_ring_push(&app->to_rt, &r) != 0 && !atomic_load(&app->io_stop)) {
        struct timespec ts = {0, REPLY_POLL_NS};
        nanosleep(&ts, NULL);
    }
}

void drths_ofr_app_post(drths_ofr_app_t *app, drths_ofr_req_kind_t kind, double disp,
                        const char *text)
{
    post(app, kind, disp, NULL, 0, NAN, text);
}

void drths_ofr_app_post_trial(drths_ofr_app_t *app, const double *v, int n, double time)
{
    post(app, REQ_TARGET, 0.0, v, n, time, NULL);
}

int drths_ofr_app_take(drths_ofr_app_t *app, drths_ofr_response_t *r)
{
    resp_t rr;
    if (drths_ring_pop(&app->to_io, &rr) != 0)
        return -EAGAIN;
    *r = rr.r;
    return 0;
}

/* Waits for the RT thread's answer to a measurement request. Returns 0, -ECANCELED, or -EPIPE
 * when the site has ended the session (HOLD) and will not answer: the caller answers NaN. */
static int wait_response(drths_ofr_app_t *app, resp_t *out)
{
    while (drths_ring_pop(&app->to_io, out) != 0) {
        if (atomic_load(&app->io_stop))
            return -ECANCELED;
        if (atomic_load(&app->io_refuse))
            return -EPIPE;
        struct timespec ts = {0, REPLY_POLL_NS};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void close_listener(drths_ofr_app_t *app)
{
    if (app->listen_fd >= 0)
        close(app->listen_fd);
    app->listen_fd = -1;
}

/* The connection as the site keeps it: no Nagle, keepalive, and the listener closed, so that a
 * second client is refused while this one is served. */
static void take_client(drths_ofr_app_t *app, int fd, const drths_addr_t *from)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)drths_tcp_keepalive(fd, KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT);
    close_listener(app);
    drths_addr_format(from, app->peer, sizeof app->peer);
    atomic_store(&app->conn_fd, fd);
    char text[DRTHS_OFR_TEXT];
    snprintf(text, sizeof text,
             "OpenFresco client %s connected (no other until it ends); waiting for its set-up "
             "(up to %g s)",
             app->peer, app->cfg.setup_timeout_s);
    drths_ofr_app_post(app, REQ_NOTE, 0.0, text);
}

/* Waits for a client until deadline_ns. Returns its descriptor, -ETIMEDOUT (after posting
 * LOST) or -ECANCELED. */
static int accept_client(drths_ofr_app_t *app, int64_t deadline_ns)
{
    while (!atomic_load(&app->io_stop)) {
        struct pollfd p = {app->listen_fd, POLLIN, 0};
        int r = poll(&p, 1, POLL_MS);
        if (r > 0) {
            drths_addr_t from;
            from.len = sizeof from.ss;
            int fd = accept4(app->listen_fd, (struct sockaddr *)&from.ss, &from.len, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            take_client(app, fd, &from);
            return fd;
        }
        if (drths_now_ns() >= deadline_ns) {
            char text[DRTHS_OFR_TEXT];
            snprintf(text, sizeof text, "no OpenFresco client %s within %g s",
                     app->clients_dropped ? "connected and set up" : "connected",
                     app->cfg.accept_timeout_s);
            drths_ofr_app_post(app, REQ_LOST, 0.0, text);
            return -ETIMEDOUT;
        }
    }
    return -ECANCELED;
}

/* AUTO: reads the first four bytes (by deadline_ns) and decides; leaves them in inbuf. Returns
 * how many bytes of the first message are already in inbuf (4), or a negative errno
 * (-ETIMEDOUT) / 0 on close. */
static ssize_t detect_variant(drths_ofr_app_t *app, int fd, int64_t deadline_ns)
{
    ssize_t k = drths_tcp_recv_until(fd, app->inbuf, 4, DRTHS_TCP_QUICKACK, deadline_ns);
    if (k < 4)
        return k < 0 ? k : 0;
    drths_ofr_variant_t v = drths_ofr_detect(app->inbuf, 4, 0);
    if (v == DRTHS_OFR_AUTO) {
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(app->cfg.detect_wait_s * 1e3));
        v = drths_ofr_detect(app->inbuf, 4, r <= 0);
        if (v == DRTHS_OFR_AUTO)
            v = DRTHS_OFR_GENERIC;
    }
    app->variant = v;
    return 4;
}

static size_t measurement_reply(drths_ofr_app_t *app, int action, const drths_ofr_response_t *r)
{
    switch (action) {
    case DRTHS_OFR_GET_DAQ:
        return drths_ofr_reply_daq(&app->rx, r, app->outbuf, IO_BUF_BYTES);
    case DRTHS_OFR_GET_DISP:
        return drths_ofr_reply_block(&app->rx, r, DRTHS_OFR_DISP, app->outbuf, IO_BUF_BYTES);
    case DRTHS_OFR_GET_VEL:
        return drths_ofr_reply_block(&app->rx, r, DRTHS_OFR_VEL, app->outbuf, IO_BUF_BYTES);
    case DRTHS_OFR_GET_ACCEL:
        return drths_ofr_reply_block(&app->rx, r, DRTHS_OFR_ACCEL, app->outbuf, IO_BUF_BYTES);
    case DRTHS_OFR_GET_FORCE:
        return drths_ofr_reply_block(&app->rx, r, DRTHS_OFR_FORCE, app->outbuf, IO_BUF_BYTES);
    default:
        return drths_ofr_reply_block(&app->rx, r, DRTHS_OFR_TIME, app->outbuf, IO_BUF_BYTES);
    }
}

/* The answer to a measurement request after the site has ended the session: every value NaN,
 * in the layout the client reads, so that its read completes and its analysis fails. */
static size_t nan_measurement_reply(drths_ofr_app_t *app, int action)
{
    drths_ofr_response_t r;
    for (int i = 0; i < DRTHS_OFR_MAX_DOF; i++)
        r.disp[i] = r.vel[i] = r.accel[i] = r.force[i] = NAN;
    r.time = NAN;
    app->after_end_nan_replies++;
    return measurement_reply(app, action, &r);
}

/* A matrix request: the configured matrix, or NaN on the diagonal once the site has ended. */
static size_t matrix_reply(drths_ofr_app_t *app, int action, int refusing)
{
    if (refusing) {
        app->after_end_nan_replies++;
        return drths_ofr_reply_matrix(&app->rx, NAN, app->outbuf, IO_BUF_BYTES);
    }
    if (action == DRTHS_OFR_GET_INITIAL_STIFF || action == DRTHS_OFR_GET_TANGENT_STIFF)
        return drths_ofr_reply_diagonal(&app->rx, app->cfg.stiffness, app->outbuf, IO_BUF_BYTES);
    return drths_ofr_reply_matrix(&app->rx,
                                  action == DRTHS_OFR_GET_DAMP ? app->cfg.damping : app->cfg.mass,
                                  app->outbuf, IO_BUF_BYTES);
}

/* An action: forwarded to the RT thread or answered here (every answer here once the site has
 * ended the session: NaN, trials and commits dropped). Returns the reply's size in outbuf (0:
 * none), or -ECANCELED when the site stopped while a measurement was awaited. Sets *last on
 * DIE or shutdown. */
static ssize_t handle_action(drths_ofr_app_t *app, const drths_ofr_msg_t *m, int *last)
{
    resp_t r;
    int w, refusing = atomic_load(&app->io_refuse);
    switch (m->action) {
    case DRTHS_OFR_SET_TRIAL:
        if (!refusing)
            drths_ofr_app_post_trial(app, m->disp, app->cfg.n_channels, m->time);
        return 0;
    case DRTHS_OFR_GET_DAQ:
    case DRTHS_OFR_GET_DISP:
    case DRTHS_OFR_GET_VEL:
    case DRTHS_OFR_GET_ACCEL:
    case DRTHS_OFR_GET_FORCE:
    case DRTHS_OFR_GET_TIME:
        if (refusing)
            return (ssize_t)nan_measurement_reply(app, m->action);
        drths_ofr_app_post(app, REQ_MEASURE, 0.0, NULL);
        w = wait_response(app, &r);
        if (w == -EPIPE)
            return (ssize_t)nan_measurement_reply(app, m->action);
        if (w != 0)
            return -ECANCELED;
        return (ssize_t)measurement_reply(app, m->action, &r.r);
    case DRTHS_OFR_GET_INITIAL_STIFF:
    case DRTHS_OFR_GET_TANGENT_STIFF:
    case DRTHS_OFR_GET_DAMP:
    case DRTHS_OFR_GET_MASS:
        return (ssize_t)matrix_reply(app, m->action, refusing);
    case DRTHS_OFR_COMMIT:
        if (!refusing)
            drths_ofr_app_post(app, REQ_COMMIT, 0.0, NULL);
        return 0;
    case DRTHS_OFR_EXECUTE:
        return 0;
    case DRTHS_OFR_DIE:
    case DRTHS_OFR_SHUTDOWN:
        *last = 1;
        return (ssize_t)drths_ofr_reply_die(&app->rx, app->outbuf, IO_BUF_BYTES);
    default:
        app->io_unknown_actions++;
        return 0;
    }
}

/* What the session loop does after one message. */
enum { MSG_GO_ON = 0, MSG_LAST = 1, MSG_FAILED = -1 };

/* Acts on one parsed message: forwards it to the RT thread and sends the reply, if any. Sets
 * *setup when it was the set-up. Returns MSG_GO_ON, MSG_LAST (DIE, or a ShadowSite told to
 * exit) or MSG_FAILED (posted or stopping). Once the site has ended the session (io_refuse)
 * nothing is posted and every request is answered here. */
static int handle_message(drths_ofr_app_t *app, int fd, const drths_ofr_msg_t *m, int *setup)
{
    ssize_t out = 0;
    int last = 0, refusing = atomic_load(&app->io_refuse);
    if (m->kind == DRTHS_OFR_MSG_PROBE)
        out = (ssize_t)drths_ofr_reply_probe(app->outbuf, IO_BUF_BYTES);
    else if (m->kind == DRTHS_OFR_MSG_OPEN && refusing) {
        /* The one answer that ends a ShadowSite client: a version it does not accept. */
        out = (ssize_t)drths_ofr_reply_open_refused(app->outbuf, IO_BUF_BYTES);
        app->after_end = DRTHS_OFR_AFTER_EXIT;
        last = 1;
    } else if (m->kind == DRTHS_OFR_MSG_OPEN)
        out = (ssize_t)drths_ofr_reply_open(app->outbuf, IO_BUF_BYTES);
    else if (m->kind == DRTHS_OFR_MSG_SETUP && refusing)
        *setup = 1;
    else if (m->kind == DRTHS_OFR_MSG_SETUP) {
        int n = app->rx.ctrl[DRTHS_OFR_DISP];
        *setup = 1;
        if (n != app->cfg.n_channels) {
            char text[DRTHS_OFR_TEXT];
            snprintf(text, sizeof text,
                     "the OpenFresco client controls %d displacement%s (genericClient -dof, "
                     "expSetup), the experiment file declares %d actuator channel%s "
                     "(physical.channels): they must be equal",
                     n, n == 1 ? "" : "s", app->cfg.n_channels,
                     app->cfg.n_channels == 1 ? "" : "s");
            /* Refused, but kept: the client's set-up is complete, its analysis will ask for
             * measurements, and NaN answers end it rather than a closed connection. */
            atomic_store(&app->io_refuse, 1);
            drths_ofr_app_post(app, REQ_LOST, 0.0, text);
            return MSG_GO_ON;
        }
        /* Steps from the trials' time until the first commit, from the commits after it, for
         * every client: genericClient cannot be told from its sizes (GenericTCP with
         * -ctrlModes 1 1 1 0 1 -daqModes 0 0 0 1 0 announces the same ones, and never
         * commits). */
        drths_ofr_app_post(app, REQ_SETUP, 0.0, NULL);
    } else if (m->kind == DRTHS_OFR_MSG_ACTION)
        out = handle_action(app, m, &last);
    if (out < 0)
        return MSG_FAILED;
    if (out) {
        int rc = drths_tcp_send_all(fd, app->outbuf, (size_t)out);
        if (rc) {
            if (refusing)
                app->after_end = DRTHS_OFR_AFTER_CLOSED;
            else if (!atomic_load(&app->io_stop)) {
                char text[DRTHS_OFR_TEXT];
                snprintf(text, sizeof text, "sending to the OpenFresco client failed: %s",
                         strerror(-rc));
                drths_ofr_app_post(app, REQ_LOST, 0.0, text);
            }
            return MSG_FAILED;
        }
        app->io_replies++;
    }
    return last ? MSG_LAST : MSG_GO_ON;
}

/* A receive that ended short (k < want): posts why, unless the site is stopping. */
static void post_lost(drths_ofr_app_t *app, ssize_t k)
{
    if (atomic_load(&app->io_stop))
        return;
    char text[DRTHS_OFR_TEXT];
    if (k >= 0)
        snprintf(text, sizeof text, "the OpenFresco client (%s) closed the connection without DIE",
                 app->peer);
    else
        snprintf(text, sizeof text, "the OpenFresco connection failed: %s", strerror((int)-k));
    drths_ofr_app_post(app, REQ_LOST, 0.0, text);
}

/* How a session ended: posted to the RT thread, or a client that failed its set-up by
 * silence or by closing (nothing posted: the caller drops it and listens again). */
enum { SESSION_ENDED = 0, SESSION_SETUP_TIMEOUT, SESSION_SETUP_CLOSED };

/* One client, from its first byte to its end. Until its set-up is complete every receive has
 * the deadline setup_deadline_ns; after it, none (the RT thread's step watchdog and keepalive
 * watch the silence). A protocol error ends the session (posted) even before the set-up: it is
 * a real client misconfigured (a wrong variant, two control displacements), whose script must
 * change. */
static int io_session(drths_ofr_app_t *app, int fd, int64_t setup_deadline_ns)
{
    size_t have = 0;
    int setup = 0;
    /* The variant is told from the first bytes even when it is forced: a forced variant the
     * client does not speak would otherwise leave both sides waiting for each other (the
     * ShadowSite client for the probe's answer, the site for the rest of a GenericTCP ID). */
    ssize_t first = detect_variant(app, fd, setup_deadline_ns);
    if (first <= 0)
        return first == -ETIMEDOUT ? SESSION_SETUP_TIMEOUT : SESSION_SETUP_CLOSED;
    have = (size_t)first;
    int32_t first_id;
    memcpy(&first_id, app->inbuf, sizeof first_id);
    /* Certain only for a first int32 of 1: anything else forced to shadow is left to the
     * codec, which names a probe of the other byte order. */
    if (app->cfg.variant != DRTHS_OFR_AUTO && app->variant != app->cfg.variant && first_id == 1) {
        char text[DRTHS_OFR_TEXT];
        snprintf(text, sizeof text,
                 "OpenFresco protocol error: the client speaks the %s variant (%s), but the "
                 "site is set to --openfresco-variant %s",
                 drths_ofr_variant_name(app->variant),
                 app->variant == DRTHS_OFR_SHADOW ? "expSite ShadowSite"
                                                  : "GenericTCP or genericClient",
                 drths_ofr_variant_name(app->cfg.variant));
        /* Refused, but spoken to in its own variant: a closed connection would leave it
         * spinning. ShadowSite is told a version that makes it exit at its open; the generic
         * clients get NaN answers until their DIE. */
        atomic_store(&app->io_refuse, 1);
        drths_ofr_app_post(app, REQ_LOST, 0.0, text);
    } else {
        app->variant = app->cfg.variant == DRTHS_OFR_AUTO ? app->variant : app->cfg.variant;
    }
    drths_ofr_rx_init(&app->rx, app->variant);
    for (;;) {
        size_t need = drths_ofr_rx_need(&app->rx);
        if (need > have) {
            ssize_t k = drths_tcp_recv_until(fd, app->inbuf + have, need - have, DRTHS_TCP_QUICKACK,
                                             setup ? -1 : setup_deadline_ns);
            /* Read after the receive: the site may have ended while the client was computing. */
            if (atomic_load(&app->io_refuse) && (k < 0 || (size_t)k < need - have)) {
                /* After the end: the client closed, or went silent within its set-up. */
                if (app->after_end == DRTHS_OFR_AFTER_NONE)
                    app->after_end =
                        k == -ETIMEDOUT ? DRTHS_OFR_AFTER_SILENT : DRTHS_OFR_AFTER_CLOSED;
                return SESSION_ENDED;
            }
            if (!setup && k < 0)
                return k == -ETIMEDOUT ? SESSION_SETUP_TIMEOUT : SESSION_SETUP_CLOSED;
            if (!setup && (size_t)k < need - have)
                return SESSION_SETUP_CLOSED;
            if (k < 0 || (size_t)k < need - have) {
                post_lost(app, k); /* closed, in the middle of a message or between two */
                return SESSION_ENDED;
            }
        }
        have = 0;
        app->io_messages++;
        int refusing = atomic_load(&app->io_refuse);
        if (refusing) {
            app->after_end_messages++;
            atomic_store(&app->io_last_ns, drths_now_ns());
        }
        double action;
        memcpy(&action, app->inbuf, sizeof action);
        if (refusing && app->rx.state == DRTHS_OFR_ST_ACTIONS &&
            action == (double)DRTHS_OFR_SET_TRIAL)
            continue; /* ignored, NaN displacement included (OpenSees's are, once it has NaN) */
        drths_ofr_msg_t m;
        if (drths_ofr_rx_parse(&app->rx, app->inbuf, need, &m) != 0) {
            if (refusing) {
                app->after_end = DRTHS_OFR_AFTER_UNPARSED;
                return SESSION_ENDED;
            }
            char text[DRTHS_OFR_TEXT];
            snprintf(text, sizeof text, "OpenFresco protocol error: %s", m.text);
            drths_ofr_app_post(app, REQ_LOST, 0.0, text);
            return SESSION_ENDED;
        }
        int rc = handle_message(app, fd, &m, &setup);
        if (rc == MSG_LAST && refusing) {
            if (app->after_end == DRTHS_OFR_AFTER_NONE)
                app->after_end = DRTHS_OFR_AFTER_DIE;
        } else if (rc == MSG_LAST) {
            drths_ofr_app_post(app, REQ_DIE, 0.0, NULL);
        }
        if (rc != MSG_GO_ON)
            return SESSION_ENDED;
    }
}

/* A client that failed its set-up (how: SESSION_SETUP_TIMEOUT or _CLOSED): closed, said so,
 * and the listener opened again. Nothing has moved before a set-up, so a stray connection (a
 * port scan, a health check, a script started too early) must not end the lab's run. Returns 0,
 * or -1 after posting LOST when the address cannot be listened on again. */
static int drop_client(drths_ofr_app_t *app, int fd, int how)
{
    atomic_store(&app->conn_fd, -1);
    close(fd);
    app->clients_dropped++;
    char text[sizeof((drths_error_t *)0)->msg + 64]; /* the post keeps DRTHS_OFR_TEXT of it */
    if (how == SESSION_SETUP_TIMEOUT)
        snprintf(text, sizeof text,
                 "the OpenFresco client %s did not complete its set-up within %g s "
                 "(--openfresco-setup-timeout): dropped; waiting for another client",
                 app->peer, app->cfg.setup_timeout_s);
    else
        snprintf(text, sizeof text,
                 "the OpenFresco client %s closed the connection before completing its set-up; "
                 "waiting for another client",
                 app->peer);
    drths_ofr_app_post(app, REQ_NOTE, 1.0, text);
    drths_error_t err = {{0}};
    if (open_listener(app, &err) != 0) {
        snprintf(text, sizeof text, "after dropping an OpenFresco client: %s", err.msg);
        drths_ofr_app_post(app, REQ_LOST, 0.0, text);
        return -1;
    }
    return 0;
}

static void io_serve(drths_ofr_app_t *app)
{
    int64_t deadline = drths_now_ns() + (int64_t)(app->cfg.accept_timeout_s * 1e9);
    for (;;) {
        int fd = accept_client(app, deadline);
        if (fd < 0)
            return;
        int64_t setup_deadline = drths_now_ns() + (int64_t)(app->cfg.setup_timeout_s * 1e9);
        int how = io_session(app, fd, setup_deadline);
        if (how == SESSION_ENDED || atomic_load(&app->io_stop) || drop_client(app, fd, how) != 0)
            return;
    }
}

static void *io_main(void *arg)
{
    drths_ofr_app_t *app = arg;
    io_serve(app);
    atomic_store(&app->io_done, 1);
    return NULL;
}

int drths_ofr_app_start(drths_ofr_app_t *app, drths_error_t *err)
{
    int rc = pthread_create(&app->io, NULL, io_main, app);
    if (rc != 0)
        return drths_error_set(err, -rc, "cannot start the OpenFresco I/O thread: %s",
                               strerror(rc));
    app->io_started = 1;
    return 0;
}

static void shut_connection(drths_ofr_app_t *app)
{
    atomic_store(&app->io_stop, 1);
    int fd = atomic_load(&app->conn_fd);
    if (fd >= 0)
        (void)shutdown(fd, SHUT_RDWR);
}

/* Ctrl-C or SIGTERM while the site waits for the client after the end (the site shell no
 * longer serves signals then). */
static volatile sig_atomic_t after_end_signal;
static void on_after_end_signal(int signum)
{
    (void)signum;
    after_end_signal = 1;
}

/* After the site ended first: waits while the I/O thread still serves a client (answering it
 * NaN), until the client ends (DIE, close), is silent for DRTHS_OFR_AFTER_END_SILENCE_S (or
 * the step timeout when shorter), DRTHS_OFR_AFTER_END_MAX_S have passed, or the operator
 * presses Ctrl-C (or sends SIGTERM). Returns how it was cut (SILENT, MAX, SIGNAL), or NONE when
 * the I/O thread ended by itself. */
static int wait_after_end(drths_ofr_app_t *app)
{
    if (!app->io_started || !atomic_load(&app->io_refuse) || atomic_load(&app->io_stop))
        return DRTHS_OFR_AFTER_NONE;
    double silence_s = fmin(app->cfg.step_timeout_s, DRTHS_OFR_AFTER_END_SILENCE_S);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_after_end_signal;
    sigemptyset(&sa.sa_mask);
    after_end_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    fprintf(stderr,
            "drths-physical: records written; waiting for the OpenFresco client to end (its "
            "requests answered NaN; at most %g s of silence, %g s in all; Ctrl-C ends the wait)\n",
            silence_s, DRTHS_OFR_AFTER_END_MAX_S);
    int cut = DRTHS_OFR_AFTER_NONE;
    int64_t t0 = drths_now_ns();
    while (!atomic_load(&app->io_done)) {
        int64_t now = drths_now_ns(), last = atomic_load(&app->io_last_ns);
        if (last < t0)
            last = t0;
        if (after_end_signal)
            cut = DRTHS_OFR_AFTER_SIGNAL;
        else if ((double)(now - last) * 1e-9 > silence_s)
            cut = DRTHS_OFR_AFTER_SILENT;
        else if ((double)(now - t0) * 1e-9 > DRTHS_OFR_AFTER_END_MAX_S)
            cut = DRTHS_OFR_AFTER_MAX;
        if (cut != DRTHS_OFR_AFTER_NONE)
            break;
        drths_sleep_until_ns(now + START_POLL_NS);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return cut;
}

void drths_ofr_app_stop(drths_ofr_app_t *app)
{
    int cut = wait_after_end(app);
    shut_connection(app);
    if (app->io_started) {
        pthread_join(app->io, NULL);
        app->io_started = 0;
        if (cut != DRTHS_OFR_AFTER_NONE)
            app->after_end = cut;
    }
}

const char *drths_ofr_app_after_end_text(const drths_ofr_app_t *app)
{
    switch (app->after_end) {
    case DRTHS_OFR_AFTER_DIE:
        return "the client then ended with DIE";
    case DRTHS_OFR_AFTER_CLOSED:
        return "the client then closed the connection";
    case DRTHS_OFR_AFTER_EXIT:
        return "the ShadowSite client was answered OpenFresco version 0 at its open, on which it "
               "exits";
    case DRTHS_OFR_AFTER_SILENT:
        return "the client went silent and the site closed the connection (it may still wait: "
               "stop it)";
    case DRTHS_OFR_AFTER_MAX:
        return "the client was still asking after " TEXT_OF_VALUE(
            DRTHS_OFR_AFTER_END_MAX_S) " s and the site closed the connection (stop it)";
    case DRTHS_OFR_AFTER_UNPARSED:
        return "the client sent a message the site could not parse and the site closed the "
               "connection (stop it)";
    case DRTHS_OFR_AFTER_SIGNAL:
        return "the site was stopped (Ctrl-C or SIGTERM) while answering the client NaN and "
               "closed the connection (stop the client)";
    default:
        return NULL;
    }
}

/* ---- RT thread (the physsite's command source) --------------------------------------------- */

/* Ends the run after command tick `last` (already handed to the actuators). */
static void send_stop(drths_ofr_app_t *app, drths_physsite_t *ps, uint64_t last)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_STOP;
    m.epoch = 1;
    m.tick = last;
    m.u.stop.reason = DRTHS_STOP_END_OF_RECORD;
    int64_t now = drths_now_ns();
    for (int i = 0; i < ps->n_channels; i++)
        drths_actuator_receive(drths_physsite_act(ps, i), &m, now);
    app->stopping = 1;
}

static void handle_end(drths_ofr_app_t *app, drths_physsite_t *ps, const req_t *r)
{
    if (app->end_seen)
        return;
    app->end_seen = 1;
    app->end_ns = drths_now_ns();
    if (r->kind == REQ_DIE) {
        /* The run ends once the command is at rest: at once when it is, else after a smooth
         * stop (before_tick sends the STOP). */
        snprintf(app->end_text, sizeof app->end_text,
                 "the analysis client ended the session (DIE) after %llu steps",
                 (unsigned long long)app->steps_reached);
        app->die_pending = 1;
        return;
    }
    snprintf(app->end_text, sizeof app->end_text, "%s", r->text);
    drths_physsite_hold_text_cause(ps, DRTHS_STOP_PEER_LOST, 0, r->text);
}

/* Checks a trial when it arrives, before any command is made for it: every channel's value
 * finite, within the command limit, and reachable from the current target within one step at
 * the command velocity limit. A trial that is not is refused (HOLD, with a sentence naming the
 * trial, the step and the bound) rather than stretched: the client computed it for a step of
 * step_duration_s, and a jump that large is a diverged or broken analysis, not a fast one.
 * Returns 0, or -ERANGE after entering HOLD. */
static int check_trial(drths_ofr_app_t *app, drths_physsite_t *ps, const drths_ofr_vec_t *x,
                       int kind)
{
    unsigned long long step = app->steps_queued + (kind == TGT_STEP);
    double t = app->cfg.step_duration_s;
    char text[400];
    for (int i = 0; i < app->n; i++) {
        const drths_actuator_t *a = drths_physsite_act(ps, i);
        double d = x->v[i], cur = app->cur_target.v[i];
        char ch[24] = "";
        if (app->n > 1)
            snprintf(ch, sizeof ch, " (channel %d)", i + 1);
        const char *what = kind == TGT_STEP ? "step" : "an iteration of step";
        if (!isfinite(d) || !(fabs(d) <= a->p.limit_displacement_m)) {
            snprintf(text, sizeof text,
                     "OpenFresco target %g m%s for %s %llu refused: %s physical."
                     "limit_displacement_m %g m",
                     d, ch, what, step, isfinite(d) ? "beyond" : "not a number within",
                     a->p.limit_displacement_m);
        } else if (fabs(d - cur) / t > a->p.limit_velocity_m_s) {
            snprintf(text, sizeof text,
                     "OpenFresco target %g m%s for %s %llu is %.3g mm from the current %.3g mm: "
                     "reaching it in one step of %g ms needs %.3g m/s, beyond physical."
                     "limit_velocity_m_s %g m/s",
                     d, ch, what, step, fabs(d - cur) * 1e3, cur * 1e3, t * 1e3, fabs(d - cur) / t,
                     a->p.limit_velocity_m_s);
        } else {
            continue;
        }
        /* The hold text holds 200 bytes; the sentences fit it, this is only the bound. */
        snprintf(app->end_text, sizeof app->end_text, "%.*s", (int)sizeof app->end_text - 1, text);
        app->refused++;
        drths_physsite_hold_text_cause(ps, DRTHS_STOP_LIMIT, 0, app->end_text);
        return -ERANGE;
    }
    return 0;
}

/* Queues a target of the given kind; HOLD when the client runs too far ahead. */
static void queue_target(drths_ofr_app_t *app, drths_physsite_t *ps, const drths_ofr_vec_t *x,
                         int kind)
{
    if (drths_physsite_in_hold(ps) || check_trial(app, ps, x, kind) != 0)
        return;
    if (app->pend_count == DRTHS_OFR_PENDING) {
        drths_physsite_hold_text_cause(ps, DRTHS_STOP_PEER_LOST, 0,
                                       "the OpenFresco client sent " PENDING_TEXT
                                       " trials without waiting for a response");
        return;
    }
    int i = (app->pend_head + app->pend_count) % DRTHS_OFR_PENDING;
    app->pend[i] = *x;
    app->pend_kind[i] = kind;
    app->pend_count++;
    app->queued++;
    app->steps_queued += (kind == TGT_STEP);
    app->cur_target = *x;
}

/* Whether every component of x is within the repeat tolerance of the current target. */
static int is_repeat(const drths_ofr_app_t *app, const drths_ofr_vec_t *x)
{
    for (int i = 0; i < app->n; i++)
        if (!(fabs(x->v[i] - app->cur_target.v[i]) <= DRTHS_OFR_REPEAT_TOL_M))
            return 0;
    return 1;
}

/* A further new trial of the current step: an iteration, at most max_iterations a step. */
static void on_iteration(drths_ofr_app_t *app, drths_physsite_t *ps, const drths_ofr_vec_t *x)
{
    app->iterations++;
    if (++app->iters_in_step > app->max_iters_seen)
        app->max_iters_seen = app->iters_in_step;
    if (app->iters_in_step > app->cfg.max_iterations) {
        if (app->commit_mode)
            snprintf(app->end_text, sizeof app->end_text,
                     "the OpenFresco client sent more than %d iterations in analysis step %llu "
                     "without committing (--openfresco-max-iterations)",
                     app->cfg.max_iterations, (unsigned long long)app->commits + 1);
        else
            snprintf(app->end_text, sizeof app->end_text,
                     "the OpenFresco client sent more than %d iterations in analysis step %llu "
                     "(trials with the same time, %g s; --openfresco-max-iterations)",
                     app->cfg.max_iterations, (unsigned long long)app->time_steps, app->last_time);
        drths_physsite_hold_text_cause(ps, DRTHS_STOP_PEER_LOST, 0, app->end_text);
        return;
    }
    queue_target(app, ps, x, TGT_ITER);
}

/* A trial. With commits (any client once it has committed) a trial
 * equal to the current target (every component) is a repeat (not moved, answered from the last
 * measurement), the first new target after a commit is the step's, and further new targets before
 * the next commit are iterations of that step. Without commits but with the analysis time in the
 * trials (GenericTCP with the time mode of -ctrlModes on) a new time begins a step (even at the
 * current target: a step of wall time, as a commit with no new target; but trials at the rest
 * position before the first step, as GenericTCP sends at its set-up, are repeats), and a further
 * trial with the same time is a repeat or an iteration as above. Without either every trial is a
 * step. */
static void on_trial(drths_ofr_app_t *app, drths_physsite_t *ps, const drths_ofr_vec_t *x,
                     double time, int64_t now_ns)
{
    if (!app->targets)
        app->first_target_ns = now_ns;
    app->targets++;
    if (!app->commit_mode && !isfinite(time)) {
        queue_target(app, ps, x, TGT_STEP);
        return;
    }
    if (!app->commit_mode) {
        app->time_mode = 1;
        /* GenericTCP sends the rest position with time 0 at its set-up, before the analysis:
         * a repeat of the rest position, not a step. The first trial that moves begins the
         * first step whatever its time: an explicit integrator's first trial may carry time 0
         * too. */
        if (app->time_steps == 0 && is_repeat(app, x)) {
            app->repeats++;
            return;
        }
        if (app->time_steps == 0 || time != app->last_time) {
            app->last_time = time;
            app->time_steps++;
            app->iters_in_step = 0;
            queue_target(app, ps, x, TGT_STEP);
            return;
        }
        if (is_repeat(app, x))
            app->repeats++;
        else
            on_iteration(app, ps, x);
        return;
    }
    if (is_repeat(app, x)) {
        app->repeats++;
        return;
    }
    if (app->distinct_since_commit++ == 0) {
        queue_target(app, ps, x, TGT_STEP);
        return;
    }
    on_iteration(app, ps, x);
}

/* commitState: the step is final. A step with no new target (the structure did not move at
 * these DOF, or every trial repeated the last) is still a step of wall time: played in place.
 * The first commit of a client not known to commit switches to steps from commits; until then
 * its steps came from the time in its trials (ShadowSite's first step, iterations included) or
 * from its trials, and a first commit with nothing played before it is the analysis's first
 * step at rest (ShadowSite sends no trial for it): played in place too. */
static void on_commit(drths_ofr_app_t *app, drths_physsite_t *ps)
{
    app->commits++;
    if ((app->commit_mode && app->distinct_since_commit == 0) || app->queued == 0) {
        app->standing_steps++;
        drths_ofr_vec_t x = app->cur_target;
        queue_target(app, ps, &x, TGT_STEP);
    }
    app->commit_mode = 1;
    app->distinct_since_commit = 0;
    app->iters_in_step = 0;
}

static void take_requests(drths_ofr_app_t *app, drths_physsite_t *ps, int64_t now_ns)
{
    req_t r;
    while (drths_ring_pop(&app->to_rt, &r) == 0) {
        switch (r.kind) {
        case REQ_SETUP:
            app->setup_seen = 1;
            app->commit_mode = 0; /* a new client: not known to commit */
            break;
        case REQ_TARGET:
            on_trial(app, ps, &r.v, r.time, now_ns);
            break;
        case REQ_COMMIT:
            on_commit(app, ps);
            break;
        case REQ_MEASURE:
            app->daq_pending++;
            app->daq_requests++;
            break;
        case REQ_NOTE:
            drths_physsite_event(ps, r.disp != 0.0, "%s", r.text);
            break;
        default:
            handle_end(app, ps, &r);
            break;
        }
    }
}

static void record_end(drths_ofr_app_t *app, uint64_t u, const drths_ofr_vec_t *target, int kind)
{
    if (app->ends_count < DRTHS_OFR_ENDS) {
        drths_ofr_step_end_t *e = &app->ends[(app->ends_head + app->ends_count) % DRTHS_OFR_ENDS];
        e->tick = u;
        e->target = *target;
        e->kind = kind;
        app->ends_count++;
    }
}

/* The oldest pending target, taken off the queue (the caller checked pend_count). */
static drths_ofr_vec_t pop_target(drths_ofr_app_t *app)
{
    drths_ofr_vec_t x = app->pend[app->pend_head];
    app->pend_head = (app->pend_head + 1) % DRTHS_OFR_PENDING;
    app->pend_count--;
    return x;
}

/* A step begins: no tick of it played, not late. */
static void begin_step(drths_ofr_app_t *app)
{
    app->j = 0;
    app->step_late = 0;
}

/* hist with the target x appended (the oldest dropped). */
static void shifted(const double hist[4], double x, double out[4])
{
    out[0] = hist[1];
    out[1] = hist[2];
    out[2] = hist[3];
    out[3] = x;
}

/* The end rates (per tick) of a step or iteration whose target makes the history h: the
 * predictor's (drths_precor_end_rates), the acceleration within b_ae and the velocity within
 * b_ve, so that every segment can be planned within the bounds. */
static void end_rates(const drths_ofr_app_t *app, int i, const double h[4], double *v, double *a)
{
    double n = (double)app->step_ticks;
    drths_precor_end_rates(&app->cfg.precor, h, v, a);
    *v = fmax(-app->b_ve[i], fmin(app->b_ve[i], *v / n));
    *a = fmax(-app->b_ae[i], fmin(app->b_ae[i], *a / (n * n)));
}

/* Plans a segment of kind `motion` for every channel from the command's present state (sx,
 * sv, sa): to (seg_x1, seg_v1, seg_a1), or for BRAKE to rest where a smooth stop from that
 * state ends. At least min_len ticks; lengthened (by an eighth at a time) until each channel's
 * largest velocity, acceleration (a brake: half of it) and |position| are within its bounds. A step
 * stretched this way takes more wall time, but its command stays smooth and still ends exactly at
 * the target. Returns 0, or -ERANGE when no length up to 64 steps fits (the caller holds). */
static int plan(drths_ofr_app_t *app, int motion, int64_t min_len)
{
    int64_t len = min_len < 1 ? 1 : min_len;
    int64_t cap = len + 64 * app->step_ticks;
    /* A brake keeps within half the acceleration bound, as a predictor does, so that the
     * correction that may start from any of its ticks has room to turn the motion round. */
    double amax[DRTHS_OFR_MAX_DOF];
    for (int i = 0; i < app->n; i++)
        amax[i] = motion == DRTHS_OFR_BRAKE ? 0.5 * app->b_a[i] : app->b_a[i];
    double peak = 0.0;
    for (;;) {
        int ok = 1;
        peak = 0.0;
        for (int i = 0; i < app->n && ok; i++) {
            double L = (double)len;
            if (motion == DRTHS_OFR_BRAKE) {
                /* The quintic to rest whose velocity falls monotonically from sv when sa = 0. */
                app->seg_x1.v[i] =
                    app->sx.v[i] + app->sv.v[i] * L / 2.0 + app->sa.v[i] * L * L / 12.0;
                app->seg_v1.v[i] = app->seg_a1.v[i] = 0.0;
            }
            drths_precor_seg_init(&app->seg[i], app->sx.v[i], app->sv.v[i], app->sa.v[i],
                                  app->seg_x1.v[i], app->seg_v1.v[i], app->seg_a1.v[i], L);
            double vm, am, xm;
            drths_precor_seg_peaks(&app->seg[i], &vm, &am, &xm);
            ok = vm <= app->b_v[i] && am <= amax[i] && xm <= app->b_x[i];
            peak = fmax(peak, am / app->b_a[i] * app->acc_bound_m_s2);
        }
        if (ok)
            break;
        if (len >= cap)
            return -ERANGE;
        len += len / 8 + 1;
        if (len > cap)
            len = cap;
    }
    if (len > min_len && min_len >= 1) {
        app->stretched++;
        app->stretch_ticks += (uint64_t)(len - min_len);
    }
    app->peak_acc_m_s2 = fmax(app->peak_acc_m_s2, peak);
    app->motion = motion;
    app->seg_t = 0;
    app->seg_len = len;
    return 0;
}

/* HOLD when a segment cannot be planned within the bounds (not expected: the end rates are
 * bounded so that a long enough segment always fits; a target beyond the limits was refused). */
static void plan_or_hold(drths_ofr_app_t *app, drths_physsite_t *ps, int motion, int64_t min_len,
                         const char *what)
{
    if (plan(app, motion, min_len) == 0)
        return;
    snprintf(app->end_text, sizeof app->end_text,
             "OpenFresco: no smooth command for %s within 64 steps at the bounds (acceleration "
             "%g m/s^2, half the command velocity limit)",
             what, app->acc_bound_m_s2);
    drths_physsite_hold_text_cause(ps, DRTHS_STOP_LIMIT, 0, app->end_text);
    app->motion = DRTHS_OFR_REST;
}

/* The predictor of a new step: constant acceleration from the state the last segment ended in. */
static void start_predict(drths_ofr_app_t *app)
{
    for (int i = 0; i < app->n; i++)
        drths_precor_seg_parabola(&app->seg[i], app->sx.v[i], app->sv.v[i], app->sa.v[i], 0.0);
    app->motion = DRTHS_OFR_PREDICT;
    app->seg_t = 0;
    app->seg_len = INT64_MAX;
    begin_step(app);
}

/* The step's target is known: correct towards it over the ticks of the step not played yet
 * (the whole step when it is known from its start), ending with the next step's end rates. */
static void start_correction(drths_ofr_app_t *app, drths_physsite_t *ps)
{
    app->target = pop_target(app);
    for (int i = 0; i < app->n; i++) {
        double h[4];
        shifted(app->hist[i], app->target.v[i], h);
        app->seg_x1.v[i] = app->target.v[i];
        end_rates(app, i, h, &app->seg_v1.v[i], &app->seg_a1.v[i]);
    }
    plan_or_hold(app, ps, DRTHS_OFR_CORRECT, app->step_ticks - app->j, "an analysis step");
}

/* An iteration: the step's target moves to its trial. From where the command is (it may have
 * begun predicting the next step) to the trial, with the end rates of the history whose last
 * target is the trial, in iteration_duration_s or longer when the bounds need it. */
static void start_iteration(drths_ofr_app_t *app, drths_physsite_t *ps)
{
    drths_ofr_vec_t x1 = pop_target(app);
    for (int i = 0; i < app->n; i++) {
        app->hist[i][3] = x1.v[i];
        app->seg_x1.v[i] = x1.v[i];
        end_rates(app, i, app->hist[i], &app->seg_v1.v[i], &app->seg_a1.v[i]);
    }
    plan_or_hold(app, ps, DRTHS_OFR_ITER, app->iter_ticks, "an iteration");
}

/* Events that begin a segment before this tick's command: a target (a step's correction or an
 * iteration), a target missing at the switch (brake), the end of the session (brake). */
static void begin_segments(drths_ofr_app_t *app, drths_physsite_t *ps)
{
    int m = app->motion;
    if (app->die_pending) {
        app->pend_count = 0;
        if (m == DRTHS_OFR_PREDICT || m == DRTHS_OFR_CORRECT || m == DRTHS_OFR_ITER)
            plan_or_hold(app, ps, DRTHS_OFR_BRAKE, app->step_ticks, "the end of the session");
        return;
    }
    if (m == DRTHS_OFR_CORRECT || m == DRTHS_OFR_ITER)
        return;
    if (app->pend_count) {
        if (!app->step_active) {
            /* The first step, from rest: every queued trial is a step's target. */
            app->step_active = 1;
            begin_step(app);
            app->pend_kind[app->pend_head] = TGT_STEP;
        }
        if (app->pend_kind[app->pend_head] == TGT_ITER)
            start_iteration(app, ps);
        else
            start_correction(app, ps);
        return;
    }
    if (m == DRTHS_OFR_PREDICT &&
        (double)(app->j + 1) >= app->cfg.precor.predict_fraction * (double)app->step_ticks) {
        app->step_late = 1;
        app->late_targets++;
        plan_or_hold(app, ps, DRTHS_OFR_BRAKE, app->step_ticks - app->j, "a late target");
    }
}

/* The next command (one tick of command time), every channel. */
static void next_command(drths_ofr_app_t *app, drths_physsite_t *ps, uint64_t u, drths_ofr_vec_t *x)
{
    begin_segments(app, ps);
    int m = app->motion;
    if (m != DRTHS_OFR_PREDICT && app->step_late)
        app->held_ticks += (m == DRTHS_OFR_BRAKE || m == DRTHS_OFR_REST);
    if (m == DRTHS_OFR_REST) {
        *x = app->sx;
        return;
    }
    app->seg_t++;
    if (m == DRTHS_OFR_PREDICT || m == DRTHS_OFR_CORRECT)
        app->j++;
    if (app->seg_t < app->seg_len) {
        for (int i = 0; i < app->n; i++)
            app->sx.v[i] = drths_precor_seg_eval(&app->seg[i], (double)app->seg_t, &app->sv.v[i],
                                                 &app->sa.v[i]);
        *x = app->sx;
        return;
    }
    /* The segment's last tick: its end state exactly, so a target is reached to the bit. */
    app->sx = app->seg_x1;
    app->sv = app->seg_v1;
    app->sa = app->seg_a1;
    *x = app->sx;
    if (m == DRTHS_OFR_BRAKE) {
        app->motion = DRTHS_OFR_REST;
        return;
    }
    if (m == DRTHS_OFR_CORRECT) {
        record_end(app, u, &app->target, TGT_STEP);
        for (int i = 0; i < app->n; i++) {
            double h[4];
            shifted(app->hist[i], app->target.v[i], h);
            memcpy(app->hist[i], h, sizeof h);
        }
    } else {
        record_end(app, u, &app->seg_x1, TGT_ITER);
    }
    start_predict(app);
}

/* How long the client may take for its first target after the set-up: GenericTCP asks its
 * operator to press Enter twice before it (nothing moves meanwhile), so the wait for a client
 * (--wait-timeout) bounds it, not the step watchdog; never less than the step watchdog. */
static double first_target_timeout_s(const drths_ofr_app_t *app)
{
    return fmax(app->cfg.accept_timeout_s, app->cfg.step_timeout_s);
}

/* The step watchdog. While the site owes the client something (a target not yet reached, a
 * measurement not yet answered) the client is waiting, not silent; from the tick the site owes
 * nothing, the client has step_timeout_s to send its next target (first_target_timeout_s for
 * its first). Returns 1 after entering HOLD. */
static int step_watchdog(drths_ofr_app_t *app, drths_physsite_t *ps, int64_t now_ns)
{
    if (!app->quiet_armed || app->daq_pending || app->reached < app->queued || app->pend_count) {
        app->quiet_armed = 1;
        app->quiet_since_ns = now_ns;
        return 0;
    }
    double limit_s = app->targets ? app->cfg.step_timeout_s : first_target_timeout_s(app);
    if ((double)(now_ns - app->quiet_since_ns) * 1e-9 <= limit_s)
        return 0;
    /* The client's address was in the set-up line; the sentence must fit a HOLD text. */
    if (app->targets)
        snprintf(app->end_text, sizeof app->end_text,
                 "the OpenFresco client sent no new target for %g s after step %llu was reached "
                 "and answered (--openfresco-step-timeout)",
                 app->cfg.step_timeout_s, (unsigned long long)app->steps_reached);
    else
        snprintf(app->end_text, sizeof app->end_text,
                 "the OpenFresco client sent no first target within %g s of its set-up "
                 "(--wait-timeout; GenericTCP waits there for its operator to press Enter twice)",
                 limit_s);
    drths_physsite_hold_text_cause(ps, DRTHS_STOP_WATCHDOG, 0, app->end_text);
    return 1;
}

static void before_tick(void *ctx, drths_physsite_t *ps, uint64_t tick, int64_t now_ns)
{
    drths_ofr_app_t *app = ctx;
    take_requests(app, ps, now_ns);
    if (app->stopping || drths_physsite_in_hold(ps) || step_watchdog(app, ps, now_ns))
        return;
    uint64_t u = tick + app->lead_ticks;
    if (app->die_pending && app->motion == DRTHS_OFR_REST) {
        /* At rest: the run ends after the last command handed, tick + D - 1. */
        send_stop(app, ps, u - 1);
        return;
    }
    drths_ofr_vec_t x;
    next_command(app, ps, u, &x);
    if (drths_physsite_in_hold(ps))
        return;
    double rate = ps->act.p.rate_hz;
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_COMMAND;
    m.epoch = 1;
    m.tick = u;
    m.counter = u + 1;
    drths_msg_command_t *c = &m.u.command;
    c->loop_delay_ticks = app->lead_ticks;
    c->n_channels = 1;
    c->r = 1;
    /* Each channel's actuator takes a one-channel COMMAND of its own value, with the
     * segment's velocity and acceleration. */
    for (int i = 0; i < app->n; i++) {
        drths_actuator_t *a = drths_physsite_act(ps, i);
        c->s[0][0].disp_m = x.v[i];
        c->s[0][0].vel_m_s = app->sv.v[i] * rate;
        c->s[0][0].acc_m_s2 = app->sa.v[i] * rate * rate;
        c->s[0][0].damper_cmd = a->p.rest_damper_command;
        app->last_x.v[i] = x.v[i];
        drths_actuator_receive(a, &m, now_ns);
    }
}

/* Every channel's measured displacement and force at this tick. */
static void measure(const drths_ofr_app_t *app, const drths_physsite_t *ps, drths_ofr_response_t *r,
                    double time_s)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < app->n; i++) {
        const drths_actuator_out_t *out = drths_physsite_out(ps, i);
        r->disp[i] = out->row[DRTHS_ACT_COL_MEAS_DISP];
        r->force[i] = out->row[DRTHS_ACT_COL_MEAS_FORCE];
    }
    r->time = time_s;
}

/* The measured response at a step's (or iteration's) end: velocity and acceleration are the
 * backward differences of the displacement measured at the step ends, at the step duration T
 * (what a laboratory without velocity and acceleration sensors reports). An iteration's end
 * re-measures the end of the step it belongs to, so it differs from the previous step's end. */
static void measure_end(drths_ofr_app_t *app, const drths_physsite_t *ps, int kind)
{
    double t = app->cfg.step_duration_s;
    measure(app, ps, &app->last_resp, (double)app->steps_reached * t);
    if (kind == TGT_STEP) {
        app->base_d = app->last_d;
        app->base_v = app->last_v_meas;
    }
    for (int i = 0; i < app->n; i++) {
        double d = app->last_resp.disp[i];
        double v = (d - app->base_d.v[i]) / t;
        app->last_resp.vel[i] = v;
        app->last_resp.accel[i] = (v - app->base_v.v[i]) / t;
        app->last_d.v[i] = d;
        app->last_v_meas.v[i] = v;
    }
    app->have_resp = 1;
}

static void respond(drths_ofr_app_t *app, const drths_ofr_response_t *m)
{
    resp_t r;
    r.r = *m;
    if (drths_ring_push(&app->to_io, &r) == 0)
        app->daq_replies++;
}

static void after_tick(void *ctx, drths_physsite_t *ps, uint64_t tick,
                       const drths_actuator_out_t *out)
{
    drths_ofr_app_t *app = ctx;
    (void)out; /* the first channel's, which drths_physsite_out also gives */
    while (app->ends_count && app->ends[app->ends_head].tick <= tick) {
        const drths_ofr_step_end_t *e = &app->ends[app->ends_head];
        for (int i = 0; i < app->n; i++) {
            drths_tracking_add(&app->ch_track[i], e->target.v[i],
                               drths_physsite_out(ps, i)->row[DRTHS_ACT_COL_MEAS_DISP]);
        }
        if (e->kind == TGT_STEP)
            app->steps_reached++;
        app->reached++;
        measure_end(app, ps, e->kind);
        app->ends_head = (app->ends_head + 1) % DRTHS_OFR_ENDS;
        app->ends_count--;
    }
    /* Answer measurement requests once every target received has been reached (at once before
     * the first trial), and never from HOLD: the I/O thread answers NaN from then on. */
    if (drths_physsite_in_hold(ps)) {
        atomic_store(&app->io_refuse, 1);
        return;
    }
    /* A request after the latest target was reached (a repeat's) gets the measurement taken
     * when it was reached: the actuators may since have moved on, predicting the next step. */
    while (app->daq_pending && app->reached >= app->queued) {
        app->daq_pending--;
        drths_ofr_response_t now;
        if (!app->have_resp)
            measure(app, ps, &now, 0.0);
        respond(app, app->have_resp ? &app->last_resp : &now);
    }
}

static int start(void *ctx, drths_physsite_t *ps, const char **reason)
{
    drths_ofr_app_t *app = ctx;
    drths_physsite_event(ps, 0, "waiting for an OpenFresco client (up to %g s)",
                         app->cfg.accept_timeout_s);
    if (app->cfg.n_channels != ps->n_channels) {
        /* main passes the experiment's count to both; a caller that did not is refused here
         * rather than driving some channels with nothing. */
        snprintf(app->end_text, sizeof app->end_text,
                 "the OpenFresco server was set up for %d actuator channels, the site has %d",
                 app->cfg.n_channels, ps->n_channels);
        *reason = app->end_text;
        shut_connection(app);
        return 1;
    }
    app->n = ps->n_channels;
    /* Every channel's commands run D ticks ahead: D from the longest lookahead of them. */
    int look = 0;
    for (int i = 0; i < ps->n_channels; i++)
        if (drths_physsite_act(ps, i)->lookahead > look)
            look = drths_physsite_act(ps, i)->lookahead;
    app->lead_ticks = (uint32_t)look + 1;
    app->step_ticks = (int64_t)llround(app->cfg.step_duration_s * ps->act.p.rate_hz);
    if (app->step_ticks < 1)
        app->step_ticks = 1;
    app->iter_ticks = (int64_t)llround(app->cfg.iteration_duration_s * ps->act.p.rate_hz);
    if (app->iter_ticks < 1)
        app->iter_ticks = 1;
    /* The bounds of every segment (per tick): half the command velocity limit; half the
     * smaller of the feedforward's acceleration limit and the drive envelope's, so that the
     * compensation's drive (which leads the command) stays within the envelope. */
    double dt = 1.0 / ps->act.p.rate_hz;
    for (int i = 0; i < ps->n_channels; i++) {
        const drths_actuator_params_t *p = &drths_physsite_act(ps, i)->p;
        double acc = INFINITY;
        if (p->ff_max_acc_m_s2 > 0.0)
            acc = p->ff_max_acc_m_s2;
        if (p->limit_drive_acceleration_m_s2 > 0.0)
            acc = fmin(acc, p->limit_drive_acceleration_m_s2);
        if (!isfinite(acc))
            acc = 100.0; /* neither limit set: the drive envelope's default */
        acc *= 0.5;
        if (i == 0)
            app->acc_bound_m_s2 = acc;
        app->b_v[i] = 0.5 * p->limit_velocity_m_s * dt;
        app->b_a[i] = acc * dt * dt;
        app->b_ae[i] = 0.25 * app->b_a[i];
        app->b_ve[i] = 0.9 * app->b_v[i];
        app->b_x[i] = p->limit_displacement_m;
    }
    while (!app->setup_seen) {
        if (atomic_load(&ps->stop_request)) {
            *reason = "stopped by signal before the OpenFresco client set up";
            shut_connection(app);
            return 1;
        }
        req_t r;
        if (drths_ring_pop(&app->to_rt, &r) == 0) {
            if (r.kind == REQ_SETUP) {
                app->setup_seen = 1;
                app->commit_mode = 0;
            } else if (r.kind == REQ_NOTE) {
                drths_physsite_event(ps, r.disp != 0.0, "%s", r.text);
            } else if (r.kind == REQ_DIE || r.kind == REQ_LOST) {
                snprintf(app->end_text, sizeof app->end_text, "%s",
                         r.kind == REQ_DIE ? "the OpenFresco client ended before any step"
                                           : r.text);
                *reason = app->end_text;
                /* A client refused at its set-up is still connected: the I/O thread answers it
                 * (drths_ofr_app_stop waits for that). */
                atomic_store(&app->io_refuse, 1);
                return 1;
            }
            continue;
        }
        drths_sleep_until_ns(drths_now_ns() + START_POLL_NS);
    }
    const drths_ofr_rx_t *rx = &app->rx;
    drths_physsite_event(ps, 0,
                         "OpenFresco client %s, %s variant: control sizes [%d,%d,%d,%d,%d], "
                         "measurement sizes [%d,%d,%d,%d,%d], dataSize %d",
                         app->peer, drths_ofr_variant_name(app->variant), rx->ctrl[0], rx->ctrl[1],
                         rx->ctrl[2], rx->ctrl[3], rx->ctrl[4], rx->meas[0], rx->meas[1],
                         rx->meas[2], rx->meas[3], rx->meas[4], rx->data_size);
    drths_physsite_event(ps, 0,
                         "continuous execution: %g s (%lld ticks) per analysis step, PreCor-%s, "
                         "correcting at the latest from %g %% of each step; commands %u ticks "
                         "ahead, C2-continuous within %g m/s^2 (steps stretched when needed)",
                         app->cfg.step_duration_s, (long long)app->step_ticks,
                         app->cfg.precor.mode == DRTHS_PRECOR_LPD ? "LPD" : "D",
                         app->cfg.precor.predict_fraction * 100.0, app->lead_ticks,
                         app->acc_bound_m_s2);
    drths_physsite_event(ps, 0,
                         "waiting up to %g s for the first target (--wait-timeout; GenericTCP "
                         "first asks its operator to press Enter twice); then the step "
                         "watchdog: HOLD if the client sends no target for %g s once the site "
                         "has answered it (--openfresco-step-timeout)",
                         first_target_timeout_s(app), app->cfg.step_timeout_s);
    drths_physsite_event(ps, 0, "analysis steps counted from %s",
                         app->commit_mode ? "the client's commits"
                         : rx->ctrl[DRTHS_OFR_TIME] > 0
                             ? "the trials' time (a trial with the time of the one before is "
                               "an iteration)"
                             : "the trials (no commits, no time: every new trial is a step)");
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_EPOCH;
    m.epoch = 1;
    m.u.epoch.new_epoch = 1;
    m.u.epoch.loop_delay_ticks = app->lead_ticks;
    m.u.epoch.effective_tick = 0;
    int64_t now = drths_now_ns();
    for (int i = 0; i < ps->n_channels; i++)
        drths_actuator_receive(drths_physsite_act(ps, i), &m, now);
    return 0;
}

static const char *ended(void *ctx, drths_physsite_t *ps)
{
    drths_ofr_app_t *app = ctx;
    /* Closing the connection would leave OpenSees spinning on it: every further request is
     * answered NaN until the client ends (drths_ofr_app_stop waits for it). */
    atomic_store(&app->io_refuse, 1);
    if (drths_physsite_in_hold(ps) && app->setup_seen && !atomic_load(&app->io_done))
        drths_physsite_event(ps, 1,
                             "answering the OpenFresco client's requests with NaN until it sends "
                             "DIE or closes (up to %g s of silence; Ctrl-C ends the wait), so "
                             "that its analysis fails instead of waiting on a closed connection",
                             fmin(app->cfg.step_timeout_s, DRTHS_OFR_AFTER_END_SILENCE_S));
    if (app->late_targets)
        drths_physsite_event(ps, 1,
                             "%llu of %llu analysis steps had their target late (held %llu "
                             "ticks at the switch): the analysis is slower than --step-duration",
                             (unsigned long long)app->late_targets,
                             (unsigned long long)app->steps_reached,
                             (unsigned long long)app->held_ticks);
    return app->end_text[0] ? app->end_text : "the OpenFresco session ended";
}

static void summary(void *ctx, drths_physsite_t *ps, struct drths_json *j)
{
    (void)ps;
    drths_ofr_app_t *app = ctx;
    drths_json_object_begin(j, "openfresco");
    drths_json_string(j, "variant", drths_ofr_variant_name(app->variant));
    if (app->peer[0])
        drths_json_string(j, "client", app->peer);
    drths_json_number(j, "step_duration_s", app->cfg.step_duration_s);
    drths_json_int(j, "step_ticks", app->step_ticks);
    drths_json_int(j, "lead_ticks", app->lead_ticks);
    drths_json_string(j, "precor", drths_precor_mode_name(app->cfg.precor.mode));
    drths_json_number(j, "predict_fraction", app->cfg.precor.predict_fraction);
    drths_json_int(j, "targets", (int64_t)app->targets);
    drths_json_int(j, "steps_reached", (int64_t)app->steps_reached);
    drths_json_int(j, "repeats", (int64_t)app->repeats);
    drths_json_int(j, "iterations", (int64_t)app->iterations);
    drths_json_int(j, "max_iterations_in_a_step", app->max_iters_seen);
    drths_json_int(j, "commits", (int64_t)app->commits);
    drths_json_int(j, "standing_steps", (int64_t)app->standing_steps);
    drths_json_string(j, "steps_from",
                      app->commit_mode ? "commits"
                      : app->time_mode ? "time"
                                       : "trials");
    drths_json_number(j, "iteration_duration_s", app->cfg.iteration_duration_s);
    drths_json_int(j, "late_targets", (int64_t)app->late_targets);
    drths_json_int(j, "held_ticks", (int64_t)app->held_ticks);
    drths_json_number(j, "command_acceleration_bound_m_s2", app->acc_bound_m_s2);
    drths_json_number(j, "command_peak_acceleration_m_s2", app->peak_acc_m_s2);
    drths_json_int(j, "stretched_segments", (int64_t)app->stretched);
    drths_json_int(j, "stretched_ticks", (int64_t)app->stretch_ticks);
    drths_json_int(j, "refused_targets", (int64_t)app->refused);
    drths_json_int(j, "measurement_requests", (int64_t)app->daq_requests);
    drths_json_int(j, "measurement_replies", (int64_t)app->daq_replies);
    drths_json_int(j, "messages", (int64_t)app->io_messages);
    drths_json_int(j, "unknown_actions", (int64_t)app->io_unknown_actions);
    drths_json_number(j, "setup_timeout_s", app->cfg.setup_timeout_s);
    drths_json_number(j, "step_timeout_s", app->cfg.step_timeout_s);
    drths_json_int(j, "clients_dropped", (int64_t)app->clients_dropped);
    drths_json_number(j, "step_end_rms_error_pct", drths_ofr_app_step_rms_pct(app));
    drths_json_number(j, "step_end_max_abs_error_m", drths_ofr_app_step_max_err(app));
    drths_json_int(j, "channels", app->cfg.n_channels);
    drths_json_numbers(j, "stiffness_N_per_m", app->cfg.stiffness, app->cfg.n_channels);
    if (app->cfg.n_channels > 1) {
        double rms[DRTHS_OFR_MAX_DOF], peak[DRTHS_OFR_MAX_DOF];
        for (int i = 0; i < DRTHS_OFR_MAX_DOF; i++) { /* n_channels of them are written */
            rms[i] = drths_ofr_app_channel_rms_pct(app, i);
            peak[i] = drths_ofr_app_channel_max_err(app, i);
        }
        drths_json_numbers(j, "channel_step_end_rms_error_pct", rms, app->cfg.n_channels);
        drths_json_numbers(j, "channel_step_end_max_abs_error_m", peak, app->cfg.n_channels);
    }
    if (app->first_target_ns && app->end_ns > app->first_target_ns)
        drths_json_number(j, "session_wall_time_s",
                          (double)(app->end_ns - app->first_target_ns) * 1e-9);
    drths_json_string(j, "end", app->end_text);
    if (app->after_end != DRTHS_OFR_AFTER_NONE || app->after_end_messages) {
        static const char *const names[] = {"none",   "die",      "closed",   "told_to_exit",
                                            "silent", "max_wait", "unparsed", "signal"};
        drths_json_object_begin(j, "after_end");
        drths_json_string(j, "client", names[app->after_end]);
        drths_json_int(j, "messages", (int64_t)app->after_end_messages);
        drths_json_int(j, "nan_replies", (int64_t)app->after_end_nan_replies);
        drths_json_object_end(j);
    }
    drths_json_object_end(j);
}

static const drths_physsite_source_t source = {
    .start = start,
    .before_tick = before_tick,
    .after_tick = after_tick,
    .ended = ended,
    .summary = summary,
};

const drths_physsite_source_t *drths_ofr_app_source(void)
{
    return &source;
}
