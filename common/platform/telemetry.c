#include "common/platform/telemetry.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#define CONTROL_MAGIC "drths-control 2 "
#define TLM_MAGIC "drths-telemetry 2 "
#define CONTROL_DOMAIN "drths control v2"
#define TLM_DOMAIN "drths telemetry v2"
#define MAC_BYTES 32

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
    for (int i = 0; i < DRTHS_TELEMETRY_MAX_LINKS; i++)
        f->link[i].rtt_ms = f->link[i].meas_force_N = NAN;
    for (int k = 0; k < DRTHS_TELEMETRY_MAX_CHANNELS; k++)
        f->ch[k].cmd_disp_m = f->ch[k].used_force_N = f->ch[k].damper_cmd = NAN;
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

/* ,"key":"s" (first: without the comma), s escaped. */
static void put_str_at(out_t *o, int first, const char *key, const char *s)
{
    put(o, "%s\"%s\":\"", first ? "" : ",", key);
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

static void put_str(out_t *o, const char *key, const char *s)
{
    put_str_at(o, 0, key, s);
}

/* A number in an array (null when not finite), after sep. */
static void put_val(out_t *o, const char *sep, double v)
{
    if (isfinite(v))
        put(o, "%s%.6g", sep, v);
    else
        put(o, "%snull", sep);
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
    put_u64(&o, "ctl_refused", f->control_refused);
    put_u64(&o, "event_seq", f->event_seq);
    put_str(&o, "event", f->event);
    /* "links":[{"site":..,"rtt":..,"fmeas":..,"late":..,"concealed":..,"rejected":..,
     *           "ch":[[cmd,fused,damper],...]},...] */
    const int nl = f->n_links < DRTHS_TELEMETRY_MAX_LINKS ? f->n_links : DRTHS_TELEMETRY_MAX_LINKS;
    if (nl > 0)
        put(&o, ",\"links\":[");
    for (int i = 0; i < nl; i++) {
        const drths_telemetry_link_t *l = &f->link[i];
        put(&o, "%s{", i ? "," : "");
        put_str_at(&o, 1, "site", l->site);
        put_num(&o, "rtt", l->rtt_ms);
        put_num(&o, "fmeas", l->meas_force_N);
        put_u64(&o, "late", l->late);
        put_u64(&o, "concealed", l->concealed);
        put_u64(&o, "rejected", l->rejected);
        put(&o, ",\"ch\":[");
        for (int k = l->first; k >= 0 && k < l->first + l->n_channels &&
                               k < DRTHS_TELEMETRY_MAX_CHANNELS; k++) {
            put_val(&o, k > l->first ? ",[" : "[", f->ch[k].cmd_disp_m);
            put_val(&o, ",", f->ch[k].used_force_N);
            put_val(&o, ",", f->ch[k].damper_cmd);
            put(&o, "]");
        }
        put(&o, "]}");
    }
    if (nl > 0)
        put(&o, "]");
    put(&o, "}\n");
    if (o.full)
        return -ENOSPC;
    return (int)o.n;
}

void drths_telemetry_key_derive(uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const uint8_t *psk,
                                size_t psk_len)
{
    static const char label[] = "drths monitor v1";
    crypto_generichash(key, DRTHS_TELEMETRY_KEY_BYTES, (const unsigned char *)label,
                       sizeof label - 1, psk, psk_len);
}

const char *drths_telemetry_cmd_name(drths_telemetry_cmd_t cmd)
{
    switch (cmd) {
    case DRTHS_TELEM_CMD_START: return "start";
    case DRTHS_TELEM_CMD_STOP: return "stop";
    case DRTHS_TELEM_CMD_ABORT: return "abort";
    default: return NULL;
    }
}

drths_telemetry_cmd_t drths_telemetry_cmd_parse(const char *name)
{
    for (int c = DRTHS_TELEM_CMD_START; c <= DRTHS_TELEM_CMD_ABORT; c++)
        if (strcmp(name, drths_telemetry_cmd_name((drths_telemetry_cmd_t)c)) == 0)
            return (drths_telemetry_cmd_t)c;
    return DRTHS_TELEM_CMD_NONE;
}

/* The MAC of a header (up to the space before its MAC) and an optional body, under a domain. */
static void mac_of(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const char *domain,
                   const char *head, size_t head_len, const char *body, size_t body_len,
                   uint8_t mac[MAC_BYTES])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, DRTHS_TELEMETRY_KEY_BYTES, MAC_BYTES);
    crypto_generichash_update(&st, (const unsigned char *)domain, strlen(domain) + 1);
    crypto_generichash_update(&st, (const unsigned char *)head, head_len);
    if (body_len)
        crypto_generichash_update(&st, (const unsigned char *)body, body_len);
    crypto_generichash_final(&st, mac, MAC_BYTES);
}

static int site_name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= DRTHS_TELEMETRY_SITE_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-' || s[i] == '.'))
            return 0;
    return 1;
}

/* Appends the MAC in hex and a newline after the head (head_len bytes in buf). */
static int put_mac(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const char *domain, char *buf,
                   size_t head_len, size_t cap, const char *body, size_t body_len)
{
    if (head_len + 2 * MAC_BYTES + 2 + body_len > cap)
        return -ENOSPC;
    uint8_t mac[MAC_BYTES];
    mac_of(key, domain, buf, head_len, body, body_len, mac);
    sodium_bin2hex(buf + head_len, 2 * MAC_BYTES + 1, mac, MAC_BYTES);
    buf[head_len + 2 * MAC_BYTES] = '\n';
    return (int)(head_len + 2 * MAC_BYTES + 1);
}

int drths_telemetry_frame_seal(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const char *site,
                               uint64_t epoch, uint64_t seq, uint64_t ack, const char *json,
                               size_t json_len, char *buf, size_t cap)
{
    if (!site_name_ok(site, strlen(site)))
        return -EINVAL;
    int k = snprintf(buf, cap, TLM_MAGIC "%s %llu %llu %llu ", site, (unsigned long long)epoch,
                     (unsigned long long)seq, (unsigned long long)ack);
    if (k < 0 || (size_t)k >= cap)
        return -ENOSPC;
    int n = put_mac(key, TLM_DOMAIN, buf, (size_t)k, cap, json, json_len);
    if (n < 0)
        return n;
    memmove(buf + n, json, json_len);
    return n + (int)json_len;
}

/* Splits a header line into at most max fields separated by single spaces. Returns the count,
 * or -1 for an empty field. */
static int split(const char *p, size_t len, const char *f[], size_t fl[], int max)
{
    int n = 0;
    size_t s = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && p[i] != ' ')
            continue;
        if (i == s || n == max)
            return -1;
        f[n] = p + s;
        fl[n++] = i - s;
        s = i + 1;
    }
    return n;
}

static int u64_field(const char *p, size_t n, uint64_t *v)
{
    if (n == 0 || n > 20)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

/* Checks a header line's MAC field (macf, macl) against the line up to it and the body. */
static int check_mac(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const char *domain,
                     const char *line, const char *macf, size_t macl, const char *body,
                     size_t body_len)
{
    uint8_t got[MAC_BYTES], want[MAC_BYTES];
    size_t bl = 0;
    if (macl != 2 * MAC_BYTES ||
        sodium_hex2bin(got, sizeof got, macf, macl, NULL, &bl, NULL) != 0 || bl != MAC_BYTES)
        return -EINVAL;
    mac_of(key, domain, line, (size_t)(macf - line), body, body_len, want);
    return crypto_verify_32(got, want) == 0 ? 0 : -EACCES;
}

int drths_telemetry_frame_open(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const void *buf,
                               size_t len, drths_telemetry_header_t *h)
{
    const char *p = buf;
    memset(h, 0, sizeof *h);
    const char *nl = memchr(p, '\n', len < 256 ? len : 256);
    if (!nl)
        return -EINVAL;
    const char *f[8];
    size_t fl[8];
    size_t hl = (size_t)(nl - p);
    if (hl < sizeof TLM_MAGIC - 1 || memcmp(p, TLM_MAGIC, sizeof TLM_MAGIC - 1) != 0 ||
        split(p, hl, f, fl, 8) != 7 || !site_name_ok(f[2], fl[2]) ||
        u64_field(f[3], fl[3], &h->epoch) ||
        u64_field(f[4], fl[4], &h->seq) || u64_field(f[5], fl[5], &h->ack))
        return -EINVAL;
    const char *body = nl + 1;
    size_t bl = len - hl - 1;
    int rc = check_mac(key, TLM_DOMAIN, p, f[6], fl[6], body, bl);
    if (rc)
        return rc;
    /* Authentic: the site built it. Still one JSON object on one line naming the same site,
     * since the monitor streams it to the page as one server-sent event. */
    while (bl > 0 && (body[bl - 1] == '\n' || body[bl - 1] == '\r'))
        bl--;
    char want[64];
    int wl = snprintf(want, sizeof want, "{\"v\":1,\"site\":\"%.*s\",", (int)fl[2], f[2]);
    if (bl < (size_t)wl + 1 || memcmp(body, want, (size_t)wl) != 0 || body[bl - 1] != '}' ||
        memchr(body, '\n', bl) || memchr(body, '\r', bl) || memchr(body, '\0', bl))
        return -EINVAL;
    memcpy(h->site, f[2], fl[2]);
    h->json = body;
    h->json_len = bl;
    return 0;
}

int drths_telemetry_control_seal(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES],
                                 const drths_telemetry_control_t *c, char *buf, size_t cap)
{
    const char *cmd = drths_telemetry_cmd_name(c->cmd);
    if (!cmd || !site_name_ok(c->site, strlen(c->site)))
        return -EINVAL;
    int k = snprintf(buf, cap, CONTROL_MAGIC "%s %llu %llu %s ", c->site,
                     (unsigned long long)c->epoch, (unsigned long long)c->ctr, cmd);
    if (k < 0 || (size_t)k >= cap)
        return -ENOSPC;
    return put_mac(key, CONTROL_DOMAIN, buf, (size_t)k, cap, NULL, 0);
}

int drths_telemetry_control_open(const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const void *buf,
                                 size_t len, drths_telemetry_control_t *c)
{
    const char *p = buf;
    memset(c, 0, sizeof *c);
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
        len--;
    const char *f[8];
    size_t fl[8];
    char cmd[8];
    if (len > DRTHS_TELEMETRY_CONTROL_MAX || memchr(p, '\n', len) ||
        len < sizeof CONTROL_MAGIC - 1 || memcmp(p, CONTROL_MAGIC, sizeof CONTROL_MAGIC - 1) ||
        split(p, len, f, fl, 8) != 7 || !site_name_ok(f[2], fl[2]) ||
        u64_field(f[3], fl[3], &c->epoch) ||
        u64_field(f[4], fl[4], &c->ctr) || fl[5] >= sizeof cmd)
        return -EINVAL;
    memcpy(cmd, f[5], fl[5]);
    cmd[fl[5]] = '\0';
    drths_telemetry_cmd_t k = drths_telemetry_cmd_parse(cmd);
    if (k == DRTHS_TELEM_CMD_NONE)
        return -EINVAL;
    int rc = check_mac(key, CONTROL_DOMAIN, p, f[6], fl[6], NULL, 0);
    if (rc)
        return rc;
    memcpy(c->site, f[2], fl[2]);
    c->cmd = k;
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

int drths_telemetry_open(drths_telemetry_t *t, const char *hostport,
                         const uint8_t key[DRTHS_TELEMETRY_KEY_BYTES], const char *site,
                         double rate_hz, double frame_hz, drths_error_t *err)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
    drths_telemetry_frame_init(&t->f, site);
    if (!site || !site_name_ok(site, strlen(site)))
        return drths_error_set(err, -EINVAL, "telemetry: bad site name");
    if (!(frame_hz > 0) || !(rate_hz > 0))
        return drths_error_set(err, -EINVAL, "telemetry rate must be > 0");
    double d = floor(rate_hz / frame_hz + 0.5);
    t->decimation = d < 1 ? 1 : (d > 1e6 ? 1000000 : (int)d);
    int rc = drths_addr_parse(&t->to, hostport, "--monitor", err);
    if (rc)
        return rc;
    int fd = socket(t->to.ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return drths_error_set(err, -errno, "telemetry socket: %s", strerror(errno));
    if (connect(fd, (const struct sockaddr *)&t->to.ss, t->to.len) != 0) {
        int e = errno;
        close(fd);
        return drths_error_set(err, -e, "--monitor %s: %s", hostport, strerror(e));
    }
    /* The epoch only has to grow from one start of the site to the next: the wall clock does,
     * unless it is set back by more than the time between the two starts. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    t->epoch = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    memcpy(t->key, key, sizeof t->key);
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
    char json[DRTHS_TELEMETRY_MAX_DATAGRAM - 200], buf[DRTHS_TELEMETRY_MAX_DATAGRAM];
    t->f.telemetry_errors = t->send_errors;
    t->f.control_refused = t->control_rejected;
    int n = drths_telemetry_encode(&t->f, json, sizeof json);
    if (n >= 0)
        n = drths_telemetry_frame_seal(t->key, t->f.site, t->epoch, t->f.seq, t->ctl_last, json,
                                       (size_t)n, buf, sizeof buf);
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

/* One received control datagram: 1 new (executed: *cmd), 0 a retransmission of the last one,
 * -1 refused (counted). */
static int take_control(drths_telemetry_t *t, const char *buf, size_t n,
                        drths_telemetry_cmd_t *cmd)
{
    drths_telemetry_control_t c;
    if (drths_telemetry_control_open(t->key, buf, n, &c) != 0) {
        t->control_bad++;
        t->control_rejected++;
        return -1;
    }
    if (strcmp(c.site, t->f.site) != 0 || c.epoch != t->epoch || c.ctr < t->ctl_last ||
        c.ctr == 0) {
        t->control_stale++;
        t->control_rejected++;
        return -1;
    }
    if (c.ctr == t->ctl_last) {
        t->control_duplicates++;
        return 0;
    }
    t->ctl_last = c.ctr;
    if (c.cmd > *cmd) /* abort beats stop beats start */
        *cmd = c.cmd;
    return 1;
}

int drths_telemetry_poll(drths_telemetry_t *t, drths_telemetry_cmd_t *cmd)
{
    *cmd = DRTHS_TELEM_CMD_NONE;
    if (!t->opened)
        return 0;
    int answered = 0;
    for (int i = 0; i < 64; i++) {
        char buf[DRTHS_TELEMETRY_CONTROL_MAX + 1];
        ssize_t n = recv(t->fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break; /* EAGAIN, or a pending ICMP error (ECONNREFUSED): nothing to read */
        }
        if ((size_t)n > sizeof buf) {
            t->control_bad++;
            t->control_rejected++;
            continue;
        }
        if (take_control(t, buf, (size_t)n, cmd) >= 0)
            answered++;
    }
    return answered;
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
    sodium_memzero(t->key, sizeof t->key);
}
