#include "platform/telemetry.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#define CONTROL_MAGIC "drths-control "

const char *drths_telemetry_state_name(int state)
{
    switch (state) {
    case DRTHS_TELEM_WAITING: return "WAITING";
    case DRTHS_TELEM_READY: return "READY";
    case DRTHS_TELEM_RUN: return "RUN";
    case DRTHS_TELEM_HOLD: return "HOLD";
    case DRTHS_TELEM_DONE: return "DONE";
    default: return "UNKNOWN";
    }
}

void drths_telemetry_frame_init(drths_telemetry_frame_t *f, const char *site)
{
    memset(f, 0, sizeof *f);
    snprintf(f->site, sizeof f->site, "%s", site ? site : "");
    f->state = DRTHS_TELEM_WAITING;
    f->tick = -1;
    f->time_s = f->cmd_disp_m = f->meas_disp_m = f->meas_force_N = f->used_force_N = NAN;
    f->damper_cmd = f->smith_N = f->L_ticks = f->rtt_ms = f->lateness_us = NAN;
}

void drths_telemetry_frame_event(drths_telemetry_frame_t *f, const char *text)
{
    snprintf(f->event, sizeof f->event, "%s", text ? text : "");
    f->event_seq++;
}

/* A small bounded writer: once out of room it stays failed. */
typedef struct out {
    char *buf;
    size_t cap, n;
    int full;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(out_t *o, const char *fmt, ...)
{
    if (o->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->buf + o->n, o->cap - o->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= o->cap - o->n)
        o->full = 1;
    else
        o->n += (size_t)k;
}

static void put_str(out_t *o, const char *key, const char *s)
{
    put(o, ",\"%s\":\"", key);
    for (const unsigned char *p = (const unsigned char *)s; *p && !o->full; p++) {
        if (*p == '"' || *p == '\\')
            put(o, "\\%c", *p);
        else if (*p < 0x20)
            put(o, "\\u%04x", *p);
        else
            put(o, "%c", *p);
    }
    put(o, "\"");
}

static void put_num(out_t *o, const char *key, double v)
{
    if (isfinite(v))
        put(o, ",\"%s\":%.9g", key, v);
    else
        put(o, ",\"%s\":null", key);
}

static void put_u64(out_t *o, const char *key, uint64_t v)
{
    put(o, ",\"%s\":%llu", key, (unsigned long long)v);
}

int drths_telemetry_encode(const drths_telemetry_frame_t *f, char *buf, size_t cap)
{
    out_t o = {buf, cap, 0, cap == 0};
    put(&o, "{\"v\":1");
    put_str(&o, "site", f->site);
    put_u64(&o, "seq", f->seq);
    put_str(&o, "state", drths_telemetry_state_name(f->state));
    put(&o, ",\"tick\":%lld", (long long)f->tick);
    put_num(&o, "t", f->time_s);
    put_num(&o, "cmd", f->cmd_disp_m);
    put_num(&o, "meas", f->meas_disp_m);
    put_num(&o, "fmeas", f->meas_force_N);
    put_num(&o, "fused", f->used_force_N);
    put_num(&o, "damper", f->damper_cmd);
    put_num(&o, "smith", f->smith_N);
    put_num(&o, "L", f->L_ticks);
    put_num(&o, "rtt", f->rtt_ms);
    put_num(&o, "lateness", f->lateness_us);
    put_u64(&o, "late", f->late);
    put_u64(&o, "concealed", f->concealed);
    put_u64(&o, "rejected", f->rejected);
    put_u64(&o, "tlm_errors", f->telemetry_errors);
    put_u64(&o, "event_seq", f->event_seq);
    put_str(&o, "event", f->event);
    put(&o, "}\n");
    if (o.full)
        return -ENOSPC;
    return (int)o.n;
}

int drths_telemetry_control_parse(const void *buf, size_t len, const char *token,
                                  size_t token_len, drths_telemetry_cmd_t *cmd)
{
    const char *p = buf;
    *cmd = DRTHS_TELEM_CMD_NONE;
    size_t ml = sizeof CONTROL_MAGIC - 1;
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
        len--;
    if (len < ml || memcmp(p, CONTROL_MAGIC, ml) != 0)
        return -EINVAL;
    p += ml;
    len -= ml;
    size_t wl = 0;
    while (wl < len && p[wl] != ' ')
        wl++;
    drths_telemetry_cmd_t c;
    if (wl == 5 && memcmp(p, "start", 5) == 0)
        c = DRTHS_TELEM_CMD_START;
    else if (wl == 4 && memcmp(p, "stop", 4) == 0)
        c = DRTHS_TELEM_CMD_STOP;
    else if (wl == 5 && memcmp(p, "abort", 5) == 0)
        c = DRTHS_TELEM_CMD_ABORT;
    else
        return -EINVAL;
    const char *tok = NULL;
    size_t tl = 0;
    if (wl < len) {
        tok = p + wl + 1;
        tl = len - wl - 1;
        for (size_t i = 0; i < tl; i++)
            if (!isgraph((unsigned char)tok[i]))
                return -EINVAL;
    }
    if (token_len > 0) {
        /* The length is not secret; the bytes are compared in constant time. */
        if (!tok || tl != token_len || sodium_memcmp(tok, token, token_len) != 0)
            return -EACCES;
    }
    *cmd = c;
    return 0;
}

int drths_telemetry_token_load(char *token, size_t *len, const char *path, drths_error_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return drths_error_set(err, -errno, "cannot open the token file %s: %s", path,
                               strerror(errno));
    char line[DRTHS_TELEMETRY_TOKEN_MAX + 2];
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (!got)
        return drths_error_set(err, -EINVAL, "token file %s is empty", path);
    size_t n = strlen(line);
    while (n > 0 && isspace((unsigned char)line[n - 1]))
        line[--n] = '\0';
    size_t s = 0;
    while (s < n && isspace((unsigned char)line[s]))
        s++;
    size_t tl = n - s;
    if (tl == 0 || tl >= DRTHS_TELEMETRY_TOKEN_MAX)
        return drths_error_set(err, -EINVAL,
                               "token file %s: the first line must hold 1 to %d characters", path,
                               DRTHS_TELEMETRY_TOKEN_MAX - 1);
    for (size_t i = s; i < n; i++)
        if (!isgraph((unsigned char)line[i]))
            return drths_error_set(err, -EINVAL, "token file %s: the token has a space or a "
                                   "control character", path);
    memcpy(token, line + s, tl);
    token[tl] = '\0';
    *len = tl;
    sodium_memzero(line, sizeof line);
    return 0;
}

int drths_telemetry_open(drths_telemetry_t *t, const char *hostport, const char *token_path,
                         const char *site, double rate_hz, double frame_hz, drths_error_t *err)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
    drths_telemetry_frame_init(&t->f, site);
    if (!(frame_hz > 0) || !(rate_hz > 0))
        return drths_error_set(err, -EINVAL, "telemetry rate must be > 0");
    double d = floor(rate_hz / frame_hz + 0.5);
    t->decimation = d < 1 ? 1 : (d > 1e6 ? 1000000 : (int)d);
    int rc = drths_addr_parse(&t->to, hostport, "--monitor", err);
    if (rc)
        return rc;
    if (token_path) {
        rc = drths_telemetry_token_load(t->token, &t->token_len, token_path, err);
        if (rc)
            return rc;
    }
    int fd = socket(t->to.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return drths_error_set(err, -errno, "telemetry socket: %s", strerror(errno));
    if (connect(fd, (const struct sockaddr *)&t->to.ss, t->to.len) != 0) {
        int e = errno;
        close(fd);
        sodium_memzero(t->token, sizeof t->token);
        return drths_error_set(err, -e, "--monitor %s: %s", hostport, strerror(e));
    }
    t->fd = fd;
    t->opened = 1;
    return 0;
}

int drths_telemetry_row_due(drths_telemetry_t *t)
{
    int due = t->rows % (uint64_t)t->decimation == 0;
    t->rows++;
    return due;
}

int drths_telemetry_beat_due(drths_telemetry_t *t)
{
    if (++t->beat_calls % 10 != 0)
        return 0;
    uint64_t frames = t->sent + t->send_errors;
    int due = frames == t->frames_at_beat;
    t->frames_at_beat = frames + (uint64_t)due; /* the frame the caller is about to send */
    return due;
}

int drths_telemetry_send(drths_telemetry_t *t)
{
    if (!t->opened)
        return -EBADF;
    char buf[DRTHS_TELEMETRY_MAX_DATAGRAM];
    t->f.telemetry_errors = t->send_errors;
    int n = drths_telemetry_encode(&t->f, buf, sizeof buf);
    if (n < 0) {
        t->send_errors++;
        return n;
    }
    t->f.seq++;
    /* A refused datagram (no monitor yet) or a full buffer loses this frame only. */
    if (send(t->fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n) {
        t->send_errors++;
        return -errno;
    }
    t->sent++;
    return 0;
}

void drths_telemetry_poll(drths_telemetry_t *t, drths_telemetry_cmd_t *cmd)
{
    *cmd = DRTHS_TELEM_CMD_NONE;
    if (!t->opened)
        return;
    for (int i = 0; i < 64; i++) {
        char buf[512];
        ssize_t n = recv(t->fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* EAGAIN, or a pending ICMP error (ECONNREFUSED): nothing to read */
        }
        drths_telemetry_cmd_t c;
        if ((size_t)n > sizeof buf ||
            drths_telemetry_control_parse(buf, (size_t)n, t->token, t->token_len, &c) != 0) {
            t->control_rejected++;
            continue;
        }
        if (c > *cmd) /* abort beats stop beats start */
            *cmd = c;
    }
}

int drths_telemetry_fd(const drths_telemetry_t *t)
{
    return t->opened ? t->fd : -1;
}

void drths_telemetry_close(drths_telemetry_t *t)
{
    if (t->opened)
        close(t->fd);
    t->opened = 0;
    t->fd = -1;
    sodium_memzero(t->token, sizeof t->token);
    t->token_len = 0;
}
