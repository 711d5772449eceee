/* Canonical shared text and fingerprint of an experiment (protocol/fingerprint.h). */
#include "protocol/fingerprint.h"

#include <sodium.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config/config.h"
#include "common/platform/cli.h"

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} sb_t;

static void sb_printf(sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sb_t *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->buf ? b->buf + b->len : NULL, b->buf ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->buf && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap <= b->len + (size_t)n)
            cap *= 2;
        char *p = realloc(b->buf, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->buf = p;
        b->cap = cap;
    }
}

/* Strings are written with backslash escapes so that every field stays on one line. */
static void sb_string(sb_t *b, const char *key, const char *s)
{
    sb_printf(b, "%s=", key);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\')
            sb_printf(b, "\\\\");
        else if (*p < 0x20 || *p == 0x7f)
            sb_printf(b, "\\x%02x", *p);
        else
            sb_printf(b, "%c", *p);
    }
    sb_printf(b, "\n");
}

static void sb_doubles(sb_t *b, const char *key, const double *v, size_t n)
{
    sb_printf(b, "%s=", key);
    for (size_t i = 0; i < n; i++)
        sb_printf(b, "%s%.17g", i ? "," : "", v[i]);
    sb_printf(b, "\n");
}

static int hash_file(const char *path, uint8_t out[32], drths_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return drths_error_set(err, -e, "ground_motion.file: cannot open \"%s\": %s", path, strerror(e));
    }
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    unsigned char buf[65536];
    for (;;) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            close(fd);
            return drths_error_set(err, -e, "ground_motion.file: cannot read \"%s\": %s", path,
                                   strerror(e));
        }
        if (k == 0)
            break;
        crypto_generichash_update(&st, buf, (unsigned long long)k);
    }
    close(fd);
    crypto_generichash_final(&st, out, 32);
    return 0;
}

/* The specimen lines of x, each key after prefix. */
static void sb_specimen(sb_t *b, const char *prefix, const drths_experiment_t *x)
{
    sb_printf(b, "%sspecimen.floor=%d\n", prefix, x->specimen.floor);
    sb_printf(b, "%sspecimen.damper.model=%s\n", prefix,
              drths_damper_model_name(x->specimen.damper.model));
    sb_printf(b, "%sspecimen.damper.stiffness_N_per_m=%.17g\n", prefix,
              x->specimen.damper.stiffness_N_per_m);
    sb_printf(b, "%sspecimen.damper.substeps=%d\n", prefix, x->specimen.damper.substeps);
    sb_printf(b, "%sspecimen.true_scale=%.17g,%.17g,%.17g,%.17g,%.17g\n", prefix,
              x->specimen.true_scale.alpha, x->specimen.true_scale.c0, x->specimen.true_scale.c1,
              x->specimen.true_scale.gamma_beta, x->specimen.true_scale.A);
    /* Printed only when it differs from 1, so that the files written before n could be scaled
     * keep their fingerprints. */
    if (x->specimen.true_scale.n != 1.0)
        sb_printf(b, "%sspecimen.true_scale.n=%.17g\n", prefix, x->specimen.true_scale.n);
}

int drths_experiment_shared_text(const drths_experiment_t *x, char **text, size_t *len,
                                 drths_error_t *err)
{
    *text = NULL;
    if (len)
        *len = 0;
    if (sodium_init() < 0)
        return drths_error_set(err, -EIO, "libsodium failed to initialise");
    sb_t b = {0};
    int n = x->n_dof;
    size_t nn = (size_t)n * (size_t)n;
    sb_printf(&b, "drths-experiment-shared v1\n");
    sb_string(&b, "name", x->name);
    sb_printf(&b, "rate_hz=%.17g\n", x->rate_hz);
    sb_printf(&b, "structure.model=%s\n", drths_structure_model_name(x->structure.model));
    sb_printf(&b, "structure.n_dof=%d\n", n);
    if (x->structure.model == DRTHS_STRUCTURE_SHEAR_BUILDING) {
        sb_doubles(&b, "structure.floor_mass_kg", x->structure.floor_mass_kg, (size_t)n);
        sb_doubles(&b, "structure.storey_stiffness_N_per_m", x->structure.storey_stiffness_N_per_m,
                   (size_t)n);
    } else {
        sb_doubles(&b, "structure.mass_kg", x->structure.mass_kg, nn);
        sb_doubles(&b, "structure.stiffness_N_per_m", x->structure.stiffness_N_per_m, nn);
        if (x->structure.damping_N_s_per_m)
            sb_doubles(&b, "structure.damping_N_s_per_m", x->structure.damping_N_s_per_m, nn);
    }
    sb_printf(&b, "structure.damping.kind=%s\n", drths_damping_kind_name(x->structure.damping.kind));
    if (x->structure.damping.n_ratio > 0)
        sb_doubles(&b, "structure.damping.ratio", x->structure.damping.ratio,
                   (size_t)x->structure.damping.n_ratio);
    if (x->structure.damping.kind == DRTHS_DAMPING_RAYLEIGH)
        sb_printf(&b, "structure.damping.modes=%d,%d\n", x->structure.damping.modes[0],
                  x->structure.damping.modes[1]);
    sb_printf(&b, "structure.integrator=%s\n", drths_integrator_kind_name(x->structure.integrator));
    sb_printf(&b, "ground_motion.kind=%s\n", drths_ground_motion_kind_name(x->ground_motion.kind));
    if (x->ground_motion.kind == DRTHS_GROUND_MOTION_RECORD) {
        sb_printf(&b, "ground_motion.format=%s\n", drths_record_format_name(x->ground_motion.format));
        sb_printf(&b, "ground_motion.units=%s\n", drths_accel_units_name(x->ground_motion.units));
        sb_printf(&b, "ground_motion.column=%d\n", x->ground_motion.column);
        sb_printf(&b, "ground_motion.scale=%.17g\n", x->ground_motion.scale);
        sb_printf(&b, "ground_motion.time_compression=%.17g\n", x->ground_motion.time_compression);
        /* Only when given, so that the text of every file without it is unchanged. */
        if (x->ground_motion.dt_s > 0)
            sb_printf(&b, "ground_motion.dt_s=%.17g\n", x->ground_motion.dt_s);
    } else {
        sb_doubles(&b, "ground_motion.band_hz", x->ground_motion.band_hz, 2);
        sb_printf(&b, "ground_motion.rms_m_s2=%.17g\n", x->ground_motion.rms_m_s2);
        sb_printf(&b, "ground_motion.seed=%llu\n", (unsigned long long)x->ground_motion.seed);
    }
    sb_printf(&b, "ground_motion.duration_s=%.17g\n", x->ground_motion.duration_s);
    sb_printf(&b, "ground_motion.tail_s=%.17g\n", x->ground_motion.tail_s);
    /* With sites, the specimens are the channels' (the top-level section holds only their
     * defaults, and an actuator site that selected its entry has its channel's there): one
     * "sites.<site>.<channel>." block per damper, in the file's order. Addresses and key files
     * are each lab's own and stay out. */
    if (x->n_sites == 0) {
        sb_specimen(&b, "", x);
    } else {
        for (int k = 0; k < x->n_dampers; k++) {
            char prefix[2 * DRTHS_SITE_NAME_MAX + 16];
            snprintf(prefix, sizeof prefix, "sites.%s.%s.", x->sites[x->dampers[k].site].name,
                     x->dampers[k].name);
            sb_specimen(&b, prefix, &x->dampers[k].exp);
        }
    }
    sb_printf(&b, "control.mode=%s\n", drths_control_mode_name(x->control.mode));
    sb_printf(&b, "control.command=%.17g\n", x->control.command);
    if (x->control.mode == DRTHS_CONTROL_CLIPPED_OPTIMAL)
        sb_printf(&b, "control.weights=%.17g,%.17g,%.17g\n", x->control.q_disp, x->control.q_acc,
                  x->control.r);
    sb_printf(&b, "link.redundancy=%d\n", x->link.redundancy);
    sb_printf(&b, "link.probes=%d\n", x->link.probes);
    sb_printf(&b, "link.quantile=%.17g\n", x->link.quantile);
    sb_printf(&b, "link.safety_margin_ticks=%d\n", x->link.safety_margin_ticks);
    sb_printf(&b, "link.loop_delay_ticks=%d\n", x->link.loop_delay_ticks);
    if (x->ground_motion.kind == DRTHS_GROUND_MOTION_RECORD) {
        uint8_t h[32];
        int r = hash_file(x->ground_motion.record_path, h, err);
        if (r) {
            free(b.buf);
            return r;
        }
        char hex[65];
        drths_experiment_fingerprint_hex(h, hex);
        sb_printf(&b, "ground_motion.record_blake2b256=%s\n", hex);
    }
    if (b.oom || !b.buf) {
        free(b.buf);
        return drths_error_set(err, -ENOMEM, "out of memory");
    }
    *text = b.buf;
    if (len)
        *len = b.len;
    return 0;
}

int drths_experiment_fingerprint(const drths_experiment_t *exp,
                                 uint8_t out[DRTHS_FINGERPRINT_BYTES], drths_error_t *err)
{
    char *text;
    size_t len;
    int r = drths_experiment_shared_text(exp, &text, &len, err);
    if (r)
        return r;
    crypto_generichash(out, DRTHS_FINGERPRINT_BYTES, (const unsigned char *)text, len, NULL, 0);
    free(text);
    return 0;
}

void drths_experiment_fingerprint_hex(const uint8_t fp[DRTHS_FINGERPRINT_BYTES], char out[65])
{
    static const char hexd[] = "0123456789abcdef";
    for (int i = 0; i < DRTHS_FINGERPRINT_BYTES; i++) {
        out[2 * i] = hexd[fp[i] >> 4];
        out[2 * i + 1] = hexd[fp[i] & 15];
    }
    out[64] = '\0';
}

/* Length of the section name of a "key=value" line (the key up to its first '.' or '='), or 0
 * for a line without '=' (the format line). */
static size_t section_of(const char *line, size_t len)
{
    const char *eq = memchr(line, '=', len);
    if (!eq)
        return 0;
    size_t k = (size_t)(eq - line);
    const char *dot = memchr(line, '.', k);
    return dot ? (size_t)(dot - line) : k;
}

static int section_index(drths_hello_section_t *out, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(out[i].name) == len && memcmp(out[i].name, name, len) == 0)
            return i;
    return -1;
}

int drths_experiment_sections(const drths_experiment_t *exp, drths_hello_section_t *out, int *n,
                              drths_error_t *err)
{
    char *text;
    size_t len;
    *n = 0;
    int r = drths_experiment_shared_text(exp, &text, &len, err);
    if (r)
        return r;
    crypto_generichash_state st[DRTHS_WIRE_MAX_SECTIONS];
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        size_t sl = section_of(p, ll);
        if (sl > 0 && sl <= DRTHS_WIRE_MAX_NAME) {
            int i = section_index(out, *n, p, sl);
            if (i < 0 && *n < DRTHS_WIRE_MAX_SECTIONS) {
                i = (*n)++;
                memcpy(out[i].name, p, sl);
                out[i].name[sl] = '\0';
                crypto_generichash_init(&st[i], NULL, 0, DRTHS_WIRE_SECTION_HASH);
            }
            if (i >= 0)
                crypto_generichash_update(&st[i], (const unsigned char *)p, ll);
        }
        p += ll;
    }
    for (int i = 0; i < *n; i++)
        crypto_generichash_final(&st[i], out[i].hash, DRTHS_WIRE_SECTION_HASH);
    free(text);
    return 0;
}

static void append_name(char *out, size_t cap, size_t *used, const char *name)
{
    int k = snprintf(out + *used, cap - *used, "%s%s", *used ? ", " : "", name);
    if (k > 0 && (size_t)k < cap - *used)
        *used += (size_t)k;
}

/* Sections of a missing from b or with another hash (each named once). */
static int diff_one_way(const drths_msg_hello_t *a, const drths_msg_hello_t *b, bool hashes,
                        char *out, size_t cap, size_t *used)
{
    int count = 0;
    for (int i = 0; i < a->n_sections; i++) {
        int j = -1;
        for (int k = 0; k < b->n_sections; k++)
            if (strcmp(a->sections[i].name, b->sections[k].name) == 0)
                j = k;
        bool differs = j < 0 || (hashes && memcmp(a->sections[i].hash, b->sections[j].hash,
                                                  DRTHS_WIRE_SECTION_HASH) != 0);
        if (differs) {
            append_name(out, cap, used, a->sections[i].name);
            count++;
        }
    }
    return count;
}

int drths_hello_section_diff(const drths_msg_hello_t *a, const drths_msg_hello_t *b, char *out,
                             size_t cap)
{
    size_t used = 0;
    if (cap)
        out[0] = '\0';
    if (!cap || a->n_sections == 0 || b->n_sections == 0)
        return 0;
    int n = diff_one_way(a, b, true, out, cap, &used);
    return n + diff_one_way(b, a, false, out, cap, &used);
}

/* The first 16 hex digits of a fingerprint: enough to tell two apart in a sentence. */
static void short_hex(const uint8_t fp[DRTHS_FINGERPRINT_BYTES], char out[17])
{
    char hex[65];
    drths_experiment_fingerprint_hex(fp, hex);
    memcpy(out, hex, 16);
    out[16] = '\0';
}

/* The versions, as each side's check words them: a HELLO offers a range, a HELLO_ACK names
 * the version chosen from ours. */
static int version_mismatch(const drths_msg_hello_t *o, const drths_msg_hello_t *t, bool actuator,
                            char *text, size_t cap)
{
    if (actuator) {
        if (drths_wire_pick_version(t->proto_min, t->proto_max, o->proto_min, o->proto_max) != 0)
            return 0;
        snprintf(text, cap, "no common protocol version: numerical site speaks %u..%u, actuator "
                 "site %u..%u", t->proto_min, t->proto_max, o->proto_min, o->proto_max);
        return 1;
    }
    if (t->version >= o->proto_min && t->version <= o->proto_max)
        return 0;
    snprintf(text, cap, "protocol version differs: numerical site speaks %u..%u, actuator site "
             "chose %u", o->proto_min, o->proto_max, t->version);
    return 1;
}

/* The set-up the actuator site checks in a HELLO: the first field that differs, alone. */
static int hello_config_mismatch(const drths_msg_hello_t *o, const drths_msg_hello_t *t,
                                 char *text, size_t cap)
{
    if (t->rate_hz != o->rate_hz) {
        snprintf(text, cap, "tick rate differs: actuator site %g Hz, numerical site %g Hz",
                 o->rate_hz, t->rate_hz);
        return 1;
    }
    if (t->n_channels != o->n_channels) {
        snprintf(text, cap, "channel count differs: actuator site %u, numerical site %u",
                 o->n_channels, t->n_channels);
        return 1;
    }
    if (t->r != o->r || memcmp(t->offsets, o->offsets, o->r * sizeof o->offsets[0]) != 0) {
        snprintf(text, cap, "redundancy differs: actuator site R %u, numerical site R %u (or "
                 "other offsets)", o->r, t->r);
        return 1;
    }
    if (strcmp(t->units, o->units) != 0) {
        snprintf(text, cap, "units differ: actuator site %s, numerical site %s", o->units,
                 t->units);
        return 1;
    }
    return 0;
}

/* The set-up the numerical site checks in a HELLO_ACK (the link index echoed too): all of it
 * in one sentence, both sides' values side by side. */
static int ack_config_mismatch(const drths_msg_hello_t *o, const drths_msg_hello_t *t, char *text,
                               size_t cap)
{
    bool same_offsets =
        t->r == o->r && memcmp(t->offsets, o->offsets, o->r * sizeof o->offsets[0]) == 0;
    if (t->rate_hz == o->rate_hz && t->n_channels == o->n_channels && same_offsets &&
        strcmp(t->units, o->units) == 0 && t->link == o->link)
        return 0;
    snprintf(text, cap,
             "configuration differs: numerical site %g Hz, %u channel(s), R %u, %s, link %u; "
             "actuator site %g Hz, %u channel(s), R %u, %s, link %u",
             o->rate_hz, o->n_channels, o->r, o->units, o->link, t->rate_hz, t->n_channels, t->r,
             t->units, t->link);
    return 1;
}

int drths_hello_mismatch(const drths_msg_hello_t *ours, const drths_msg_hello_t *theirs, char *text,
                         size_t cap)
{
    bool actuator = ours->role == DRTHS_ROLE_PHYSICAL;
    if (cap)
        text[0] = '\0';
    if (version_mismatch(ours, theirs, actuator, text, cap))
        return DRTHS_STOP_VERSION_MISMATCH;
    if (memcmp(ours->fingerprint, theirs->fingerprint, DRTHS_FINGERPRINT_BYTES) != 0) {
        char a[17], b[17], diff[96];
        short_hex(ours->fingerprint, a);
        short_hex(theirs->fingerprint, b);
        drths_hello_section_diff(ours, theirs, diff, sizeof diff);
        snprintf(text, cap, "experiment differs in %s: %s %s.. %s %s..",
                 diff[0] ? diff : "(sections unknown)", actuator ? "actuator" : "numerical", a,
                 actuator ? "numerical" : "actuator", b);
        return DRTHS_STOP_FINGERPRINT_MISMATCH;
    }
    if (actuator ? hello_config_mismatch(ours, theirs, text, cap)
                 : ack_config_mismatch(ours, theirs, text, cap))
        return DRTHS_STOP_CONFIG_MISMATCH;
    return 0;
}

int drths_hello_init(drths_msg_hello_t *h, const drths_experiment_t *exp, drths_role_t role,
                     uint8_t link, drths_error_t *err)
{
    memset(h, 0, sizeof *h);
    h->proto_min = DRTHS_WIRE_VERSION_MIN;
    h->proto_max = DRTHS_WIRE_VERSION_MAX;
    h->role = (uint8_t)role;
    h->link = link;
    if (gethostname(h->site, sizeof h->site - 1) != 0)
        snprintf(h->site, sizeof h->site, "unknown");
    h->site[sizeof h->site - 1] = '\0';
    h->rate_hz = exp->rate_hz;
    h->n_channels = 1;
    h->r = (uint8_t)exp->link.redundancy;
    for (int k = 0; k < h->r && k < DRTHS_WIRE_MAX_R; k++)
        h->offsets[k] = (uint16_t)drths_wire_offset(k);
    snprintf(h->units, sizeof h->units, "SI");
    snprintf(h->software, sizeof h->software, "drths %s", drths_version());
    int rc = drths_experiment_fingerprint(exp, h->fingerprint, err);
    if (!rc) {
        int n = 0;
        rc = drths_experiment_sections(exp, h->sections, &n, err);
        h->n_sections = (uint8_t)n;
    }
    return rc;
}
