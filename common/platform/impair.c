#include "common/platform/impair.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- distribution tables (iproute2's maketable programs, computed once per process) ---- */

#define DIST_SIZE 4096
#define DIST_SCALE 8192 /* NETEM_DIST_SCALE */
#define GEN_SIZE 16384  /* TABLESIZE in iproute2's generators */

static int16_t t_normal[DIST_SIZE];
static int16_t t_pareto[DIST_SIZE];
static int16_t t_paretonormal[DIST_SIZE];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static int16_t clip16(double v)
{
    if (v < SHRT_MIN)
        return SHRT_MIN;
    if (v > SHRT_MAX)
        return SHRT_MAX;
    return (int16_t)v;
}

/* iproute2 pareto.c/paretonormal.c: a Pareto distribution with a = 3, shifted to zero mean. */
static double pareto_value(int i)
{
    double d = (double)i / 65536.0;
    d = 1.0 / pow(d, 1.0 / 3.0);
    d -= 1.5;
    d *= (4.0 / 3.0) * (double)DIST_SCALE;
    return d;
}

static void build_tables(void)
{
    /* normal.c: invert the normal CDF by scanning x; each CDF bin keeps the last x that lands in
     * it. The same scan, rounded to integers, is paretonormal.c's normal part. */
    static double inv[GEN_SIZE + 1];
    for (double x = -10.0; x < 10.05; x += .00005) {
        int i = (int)rint(GEN_SIZE * (.5 + .5 * erf(x / sqrt(2.0))));
        inv[i] = x;
    }
    for (int i = 0; i < GEN_SIZE; i += 4)
        t_normal[i / 4] = clip16(rint(inv[i] * DIST_SCALE));

    int n = 0;
    for (int i = 65536; i > 0 && n < DIST_SIZE; i -= 16) {
        double d = pareto_value(i);
        if (d > 32767)
            d = 32767;
        t_pareto[n++] = clip16(rint(d));
    }

    for (int i = 0; i < GEN_SIZE; i += 4) {
        int normvalue = (int)rint(inv[i] * DIST_SCALE);
        int parvalue = (int)rint(pareto_value(65536 - 4 * i));
        t_paretonormal[i / 4] = clip16((normvalue + 3 * parvalue) / 4);
    }
}

/* ---- random numbers ---- */

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t next64(uint64_t s[4])
{
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static uint32_t next32(drths_impair_t *im)
{
    return (uint32_t)(next64(im->prng) >> 32);
}

/* netem's get_crandom(): an exponentially weighted average of uniform 32-bit draws. */
static uint32_t crandom(drths_impair_t *im, drths_impair_crnd_t *c)
{
    uint64_t value = next32(im);
    if (c->rho == 0)
        return (uint32_t)value;
    uint64_t answer = (value * ((1ull << 32) - c->rho) + c->last * c->rho) >> 32;
    c->last = answer;
    return (uint32_t)answer;
}

static uint64_t scale32(double p)
{
    return (uint64_t)llround(p * 4294967296.0);
}

/* ---- spec validation ---- */

#define MAX_TIME_NS (3600LL * 1000000000LL)

static int check_prob(double p)
{
    return p >= 0.0 && p <= 1.0;
}

static int check_spec(const drths_impair_spec_t *s)
{
    if (s->delay_ns < 0 || s->delay_ns > MAX_TIME_NS || s->jitter_ns < 0 ||
        s->jitter_ns > MAX_TIME_NS)
        return -EINVAL;
    if ((unsigned)s->dist > DRTHS_IMPAIR_DIST_PARETONORMAL ||
        (unsigned)s->loss_model > DRTHS_IMPAIR_LOSS_GE)
        return -EINVAL;
    const double probs[] = {s->delay_corr, s->loss,      s->loss_corr,      s->ge_p,
                            s->ge_r,       s->ge_1h,     s->ge_1k,          s->duplicate,
                            s->duplicate_corr, s->reorder, s->reorder_corr, s->corrupt,
                            s->corrupt_corr};
    for (size_t i = 0; i < sizeof probs / sizeof probs[0]; i++)
        if (!check_prob(probs[i]))
            return -EINVAL;
    if (s->reorder > 0 && s->delay_ns == 0)
        return -EINVAL;
    if (s->reorder > 0 && s->gap == 0)
        return -EINVAL;
    if (s->rate_bit_s == 0 && (s->packet_overhead || s->cell_size || s->cell_overhead))
        return -EINVAL;
    return 0;
}

/* A correlated event with mean probability p and lag-1 correlation c: after an event the next
 * one happens with p + c (1 - p), otherwise with p (1 - c). */
static void set_event(drths_impair_cevent_t *e, double p, double c)
{
    e->after_event = scale32(p + c * (1.0 - p));
    e->after_none = scale32(p * (1.0 - c));
}

static bool cevent(drths_impair_t *im, drths_impair_cevent_t *e)
{
    uint64_t thr = e->last ? e->after_event : e->after_none;
    if (thr == 0) {
        e->last = false;
        return false;
    }
    e->last = next32(im) < thr;
    return e->last;
}

static void apply_spec(drths_impair_t *im, const drths_impair_spec_t *s)
{
    im->spec = *s;
    set_event(&im->e_loss, s->loss_model == DRTHS_IMPAIR_LOSS_RANDOM ? s->loss : 0.0,
              s->loss_corr);
    set_event(&im->e_dup, s->duplicate, s->duplicate_corr);
    set_event(&im->e_reorder, s->reorder, s->reorder_corr);
    set_event(&im->e_corrupt, s->corrupt, s->corrupt_corr);
    im->p_ge_p = scale32(s->ge_p);
    im->p_ge_r = scale32(s->ge_r);
    im->p_ge_1h = scale32(s->ge_1h);
    im->p_ge_1k = scale32(s->ge_1k);
    im->c_delay.rho = scale32(s->delay_corr);
    switch (s->dist) {
    case DRTHS_IMPAIR_DIST_NORMAL: im->table = t_normal; break;
    case DRTHS_IMPAIR_DIST_PARETO: im->table = t_pareto; break;
    case DRTHS_IMPAIR_DIST_PARETONORMAL: im->table = t_paretonormal; break;
    default: im->table = NULL; break;
    }
}

int drths_impair_init(drths_impair_t *im, const drths_impair_spec_t *spec, uint64_t seed)
{
    memset(im, 0, sizeof *im);
    if (check_spec(spec) != 0)
        return -EINVAL;
    pthread_once(&tables_once, build_tables);
    /* splitmix64 expands the seed so that nearby seeds give unrelated streams. */
    uint64_t z = seed;
    for (int i = 0; i < 4; i++) {
        z += 0x9e3779b97f4a7c15ull;
        uint64_t x = z;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        im->prng[i] = x ^ (x >> 31);
    }
    apply_spec(im, spec);
    im->last_send_ns = INT64_MIN;
    im->initialised = true;
    return 0;
}

int drths_impair_set_spec(drths_impair_t *im, const drths_impair_spec_t *spec)
{
    if (!im->initialised || check_spec(spec) != 0)
        return -EINVAL;
    apply_spec(im, spec);
    return 0;
}

void drths_impair_close(drths_impair_t *im)
{
    im->initialised = false;
    im->table = NULL;
}

double drths_impair_spec_mean_loss(const drths_impair_spec_t *s)
{
    if (s->loss_model == DRTHS_IMPAIR_LOSS_RANDOM)
        return s->loss;
    if (s->loss_model == DRTHS_IMPAIR_LOSS_GE) {
        if (s->ge_p + s->ge_r <= 0)
            return s->ge_1k; /* never leaves Good */
        return (s->ge_p * s->ge_1h + s->ge_r * s->ge_1k) / (s->ge_p + s->ge_r);
    }
    return 0.0;
}

/* ---- decisions ---- */

/* netem's tabledist(): mu + a draw of scale sigma. */
static int64_t tabledist(drths_impair_t *im, int64_t mu, int64_t sigma)
{
    if (sigma == 0)
        return mu;
    uint32_t rnd = crandom(im, &im->c_delay);
    if (im->table == NULL) {
        /* Uniform on [mu - sigma, mu + sigma): multiply-shift instead of netem's modulo, which
         * has no bias and no 32-bit limit on sigma. */
        uint64_t off = (uint64_t)(((unsigned __int128)rnd * (uint64_t)(2 * sigma)) >> 32);
        return mu - sigma + (int64_t)off;
    }
    int64_t t = im->table[rnd >> 20]; /* high 12 bits: see the header on correlation */
    int64_t x = (sigma % DIST_SCALE) * t;
    if (x >= 0)
        x += DIST_SCALE / 2;
    else
        x -= DIST_SCALE / 2;
    return x / DIST_SCALE + (sigma / DIST_SCALE) * t + mu;
}

static drths_impair_loss_kind_t loss_event(drths_impair_t *im)
{
    switch (im->spec.loss_model) {
    case DRTHS_IMPAIR_LOSS_RANDOM:
        return cevent(im, &im->e_loss) ? DRTHS_IMPAIR_LOST_RANDOM : DRTHS_IMPAIR_LOST_NONE;
    case DRTHS_IMPAIR_LOSS_GE: {
        bool lost;
        if (!im->ge_bad) {
            if (next32(im) < im->p_ge_p)
                im->ge_bad = true;
            lost = next32(im) < im->p_ge_1k;
        } else {
            if (next32(im) < im->p_ge_r)
                im->ge_bad = false;
            lost = next32(im) < im->p_ge_1h;
        }
        return lost ? DRTHS_IMPAIR_LOST_GE : DRTHS_IMPAIR_LOST_NONE;
    }
    default:
        return DRTHS_IMPAIR_LOST_NONE;
    }
}

static int64_t packet_time_ns(const drths_impair_spec_t *s, size_t size)
{
    int64_t len = (int64_t)size + s->packet_overhead;
    if (s->cell_size) {
        int64_t cells = len / s->cell_size;
        if (len > cells * (int64_t)s->cell_size)
            cells++;
        len = cells * ((int64_t)s->cell_size + s->cell_overhead);
    }
    if (len <= 0)
        return 0;
    return (int64_t)(((unsigned __int128)len * 8u * 1000000000u) / s->rate_bit_s);
}

/* One pass of netem_enqueue(); the clone of a duplicated packet takes a second pass. */
static void enqueue(drths_impair_t *im, int64_t now, size_t size, drths_impair_decision_t *d,
                    bool may_duplicate)
{
    int count = 1;
    if (may_duplicate && cevent(im, &im->e_dup)) {
        count++;
        d->duplicated = 1;
    }
    drths_impair_loss_kind_t lost = loss_event(im);
    if (lost == DRTHS_IMPAIR_LOST_RANDOM) {
        d->lost_random++;
        count--;
    } else if (lost == DRTHS_IMPAIR_LOST_GE) {
        d->lost_ge++;
        count--;
    }
    if (count == 0)
        return;

    unsigned c = d->copies;
    d->corrupt_bit[c] = -1;
    if (cevent(im, &im->e_corrupt) && size > 0)
        d->corrupt_bit[c] = (int64_t)(((uint64_t)next32(im) * (uint64_t)(size * 8)) >> 32);

    const drths_impair_spec_t *s = &im->spec;
    if (s->gap == 0 || im->counter < s->gap - 1 || !cevent(im, &im->e_reorder)) {
        int64_t delay = tabledist(im, s->delay_ns, s->jitter_ns);
        int64_t t = now;
        if (s->rate_bit_s) {
            if (im->last_send_ns > now) {
                /* The queue's tail leaves later: this packet waits for it, and the time it
                 * waits counts towards its own delay (netem's "time bonus"). */
                delay -= im->last_send_ns - now;
                if (delay < 0)
                    delay = 0;
                t = im->last_send_ns;
            }
            delay += packet_time_ns(s, size);
        }
        d->send_ns[c] = t + delay;
        d->reordered[c] = false;
        if (s->rate_bit_s && d->send_ns[c] > im->last_send_ns)
            im->last_send_ns = d->send_ns[c];
        im->counter++;
    } else {
        d->send_ns[c] = now;
        d->reordered[c] = true;
        im->counter = 0;
    }
    d->copies = c + 1;

    if (count == 2)
        enqueue(im, now, size, d, false);
}

unsigned drths_impair_decide(drths_impair_t *im, int64_t now_ns, size_t size_bytes,
                             drths_impair_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->corrupt_bit[0] = d->corrupt_bit[1] = -1;
    enqueue(im, now_ns, size_bytes, d, true);
    return d->copies;
}

/* ---- parsing ---- */

#define MAX_TOKENS 64

typedef struct parser {
    char *tok[MAX_TOKENS];
    int n;
    int i; /* next token */
    drths_error_t *err;
} parser_t;

static int bad(parser_t *p, int at, const char *what, const char *why)
{
    if (at >= p->n)
        return drths_error_set(p->err, -EINVAL, "after token %d \"%s\": missing %s", p->n,
                               p->n ? p->tok[p->n - 1] : "", what);
    return drths_error_set(p->err, -EINVAL, "token %d \"%s\" (%s): %s", at + 1, p->tok[at], what,
                           why);
}

static bool next_is_number(const parser_t *p)
{
    if (p->i >= p->n)
        return false;
    const char *t = p->tok[p->i];
    return isdigit((unsigned char)t[0]) || (t[0] == '.' && isdigit((unsigned char)t[1]));
}

static bool next_is_signed_number(const parser_t *p)
{
    if (next_is_number(p))
        return true;
    if (p->i >= p->n)
        return false;
    const char *t = p->tok[p->i];
    return t[0] == '-' && isdigit((unsigned char)t[1]);
}

static int parse_time(parser_t *p, const char *what, int64_t *out)
{
    int at = p->i;
    if (at >= p->n)
        return bad(p, at, what, "");
    p->i++;
    const char *t = p->tok[at];
    char *end;
    double v = strtod(t, &end);
    if (end == t || !isfinite(v) || t[0] == '-' || t[0] == '+')
        return bad(p, at, what, "not a time; give a number and a unit, e.g. 40ms");
    static const struct {
        const char *u;
        double ns;
    } units[] = {{"ns", 1},      {"nsec", 1},     {"nsecs", 1},    {"us", 1e3},
                 {"usec", 1e3},  {"usecs", 1e3},  {"ms", 1e6},     {"msec", 1e6},
                 {"msecs", 1e6}, {"s", 1e9},      {"sec", 1e9},    {"secs", 1e9}};
    if (*end == '\0')
        return bad(p, at, what, "a time needs a unit (ns, us, ms or s), e.g. 40ms");
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++) {
        if (strcasecmp(end, units[k].u) == 0) {
            double ns = v * units[k].ns;
            if (ns > (double)MAX_TIME_NS)
                return bad(p, at, what, "longer than one hour");
            *out = (int64_t)llround(ns);
            return 0;
        }
    }
    return bad(p, at, what, "unknown time unit; use ns, us, ms or s");
}

static int parse_percent(parser_t *p, const char *what, double *out)
{
    int at = p->i;
    if (at >= p->n)
        return bad(p, at, what, "");
    p->i++;
    const char *t = p->tok[at];
    char *end;
    double v = strtod(t, &end);
    if (end == t || !isfinite(v) || (*end != '\0' && strcmp(end, "%") != 0))
        return bad(p, at, what, "not a percentage; write e.g. 1% or 0.5%");
    if (v < 0 || v > 100)
        return bad(p, at, what, "must be between 0% and 100%");
    *out = v / 100.0;
    return 0;
}

static int parse_uint(parser_t *p, const char *what, uint32_t lo, uint32_t hi, uint32_t *out)
{
    int at = p->i;
    if (at >= p->n)
        return bad(p, at, what, "");
    p->i++;
    const char *t = p->tok[at];
    char *end;
    errno = 0;
    unsigned long long v = strtoull(t, &end, 10);
    if (end == t || *end != '\0' || errno || t[0] == '-' || v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be an integer from %" PRIu32 " to %" PRIu32, lo, hi);
        return bad(p, at, what, why);
    }
    *out = (uint32_t)v;
    return 0;
}

static int parse_int(parser_t *p, const char *what, int32_t lo, int32_t hi, int32_t *out)
{
    int at = p->i;
    p->i++;
    const char *t = p->tok[at];
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (end == t || *end != '\0' || errno || v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be an integer from %" PRId32 " to %" PRId32, lo, hi);
        return bad(p, at, what, why);
    }
    *out = (int32_t)v;
    return 0;
}

static int parse_rate(parser_t *p, uint64_t *out)
{
    const char *what = "rate";
    int at = p->i;
    if (at >= p->n)
        return bad(p, at, what, "");
    p->i++;
    const char *t = p->tok[at];
    char *end;
    double v = strtod(t, &end);
    if (end == t || !isfinite(v) || v <= 0)
        return bad(p, at, what, "not a positive rate; write e.g. 10mbit");
    static const struct {
        const char *u;
        double bit_s;
    } units[] = {{"bit", 1},          {"kbit", 1e3},         {"mbit", 1e6},
                 {"gbit", 1e9},       {"tbit", 1e12},        {"kibit", 1024.0},
                 {"mibit", 1048576.0}, {"gibit", 1073741824.0}, {"tibit", 1099511627776.0},
                 {"bps", 8},          {"kbps", 8e3},         {"mbps", 8e6},
                 {"gbps", 8e9},       {"tbps", 8e12},        {"kibps", 8 * 1024.0},
                 {"mibps", 8 * 1048576.0}, {"gibps", 8 * 1073741824.0}};
    if (*end == '\0')
        return bad(p, at, what,
                   "a rate needs a unit: bit, kbit, mbit, gbit (bits/s) or bps, kbps, mbps "
                   "(bytes/s)");
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++) {
        if (strcasecmp(end, units[k].u) == 0) {
            double r = v * units[k].bit_s;
            if (r < 1 || r > 1e15)
                return bad(p, at, what, "out of range (1 bit/s to 1 Pbit/s)");
            *out = (uint64_t)llround(r);
            return 0;
        }
    }
    return bad(p, at, what, "unknown rate unit; use e.g. kbit, mbit, gbit or kbps, mbps");
}

/* Marks a keyword as seen; netem options given twice are almost always a typing mistake. */
static int once(parser_t *p, int at, unsigned *seen, unsigned bit)
{
    if (*seen & bit)
        return bad(p, at, "keyword", "given twice");
    *seen |= bit;
    return 0;
}

/* "PCT [CORR]", as duplicate, reorder and corrupt take. */
static int pct_corr(parser_t *p, const char *what, double *pct, double *corr)
{
    char name[48];
    snprintf(name, sizeof name, "%s percentage", what);
    int r = parse_percent(p, name, pct);
    if (r || !next_is_number(p))
        return r;
    snprintf(name, sizeof name, "%s correlation", what);
    return parse_percent(p, name, corr);
}

/* "delay TIME [JITTER [CORR]]" after the keyword. */
static int kw_delay(parser_t *p, drths_impair_spec_t *s)
{
    int r = parse_time(p, "delay time", &s->delay_ns);
    if (r || !next_is_number(p))
        return r;
    if ((r = parse_time(p, "delay jitter", &s->jitter_ns)) || !next_is_number(p))
        return r;
    return parse_percent(p, "delay correlation", &s->delay_corr);
}

/* "distribution NAME" after the keyword. */
static int kw_distribution(parser_t *p, drths_impair_spec_t *s)
{
    static const struct {
        const char *name;
        drths_impair_dist_t dist;
    } dists[] = {{"uniform", DRTHS_IMPAIR_DIST_UNIFORM},
                 {"normal", DRTHS_IMPAIR_DIST_NORMAL},
                 {"pareto", DRTHS_IMPAIR_DIST_PARETO},
                 {"paretonormal", DRTHS_IMPAIR_DIST_PARETONORMAL}};
    if (p->i >= p->n)
        return bad(p, p->i, "distribution name", "");
    int at = p->i++;
    for (size_t i = 0; i < sizeof dists / sizeof dists[0]; i++)
        if (!strcmp(p->tok[at], dists[i].name)) {
            s->dist = dists[i].dist;
            return 0;
        }
    return bad(p, at, "distribution name", "unknown; use uniform, normal, pareto or paretonormal");
}

/* "loss [random] PCT [CORR]" or "loss gemodel P [R [1-H [1-K]]]" after the keyword. */
static int kw_loss(parser_t *p, drths_impair_spec_t *s)
{
    if (p->i >= p->n)
        return bad(p, p->i, "loss model or percentage", "");
    const char *m = p->tok[p->i];
    int r;
    if (!strcmp(m, "random") || next_is_number(p)) {
        if (!strcmp(m, "random"))
            p->i++;
        s->loss_model = DRTHS_IMPAIR_LOSS_RANDOM;
        if ((r = parse_percent(p, "loss percentage", &s->loss)) || !next_is_number(p))
            return r;
        return parse_percent(p, "loss correlation", &s->loss_corr);
    }
    if (!strcmp(m, "gemodel")) {
        p->i++;
        s->loss_model = DRTHS_IMPAIR_LOSS_GE;
        if ((r = parse_percent(p, "gemodel p", &s->ge_p)))
            return r;
        s->ge_r = 1.0 - s->ge_p;
        s->ge_1h = 1.0;
        s->ge_1k = 0.0;
        if (!next_is_number(p) || (r = parse_percent(p, "gemodel r", &s->ge_r)))
            return r;
        if (!next_is_number(p) || (r = parse_percent(p, "gemodel 1-h", &s->ge_1h)))
            return r;
        if (!next_is_number(p))
            return 0;
        return parse_percent(p, "gemodel 1-k", &s->ge_1k);
    }
    if (!strcmp(m, "state"))
        return bad(p, p->i, "loss model", "the 4-state model is not supported; use gemodel");
    return bad(p, p->i, "loss model or percentage", "expected random, gemodel or a percentage");
}

/* "rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]" after the keyword. */
static int kw_rate(parser_t *p, drths_impair_spec_t *s)
{
    int r = parse_rate(p, &s->rate_bit_s);
    if (r || !next_is_signed_number(p))
        return r;
    if ((r = parse_int(p, "rate packet overhead", -65535, 65535, &s->packet_overhead)) ||
        !next_is_number(p))
        return r;
    if ((r = parse_uint(p, "rate cell size", 1, 65535, &s->cell_size)) || !next_is_signed_number(p))
        return r;
    return parse_int(p, "rate cell overhead", -65535, 65535, &s->cell_overhead);
}

/* The token positions of the keywords whose consistency is checked after the whole spec. */
typedef struct {
    int gap, dist, reorder;
} spec_at_t;

/* The keywords, in the order of their bits in `seen` (each may be given once). */
enum {
    KW_DELAY,
    KW_DISTRIBUTION,
    KW_LOSS,
    KW_DUPLICATE,
    KW_REORDER,
    KW_GAP,
    KW_CORRUPT,
    KW_RATE,
    KW_LIMIT,
    KW_COUNT
};
static const char *const keyword_names[KW_COUNT] = {
    "delay", "distribution", "loss", "duplicate", "reorder", "gap", "corrupt", "rate", "limit"};

static int keyword_index(const char *k)
{
    if (!strcmp(k, "latency"))
        return KW_DELAY; /* tc's synonyms */
    if (!strcmp(k, "drop"))
        return KW_LOSS;
    for (int i = 0; i < KW_COUNT; i++)
        if (!strcmp(k, keyword_names[i]))
            return i;
    return -1;
}

/* One keyword at p->tok[at] (p->i is past it) with its arguments. */
static int keyword(parser_t *p, int at, unsigned *seen, drths_impair_spec_t *s, spec_at_t *pos)
{
    const char *k = p->tok[at];
    if (!strcmp(k, "none"))
        return 0; /* what drths_impair_spec_format writes for the zero spec */
    if (!strcmp(k, "ecn") || !strcmp(k, "slot") || !strcmp(k, "seed"))
        return bad(p, at, "keyword",
                   "not supported by drths-impair (seed: use the relay's --seed option)");
    int kw = keyword_index(k);
    if (kw < 0)
        return bad(p, at, "keyword",
                   "unknown; expected delay, distribution, loss, duplicate, reorder, gap, "
                   "corrupt, rate or limit");
    int r = once(p, at, seen, 1u << kw);
    if (r)
        return r;
    switch (kw) {
    case KW_DELAY:
        return kw_delay(p, s);
    case KW_DISTRIBUTION:
        pos->dist = p->i;
        return kw_distribution(p, s);
    case KW_LOSS:
        return kw_loss(p, s);
    case KW_DUPLICATE:
        return pct_corr(p, "duplicate", &s->duplicate, &s->duplicate_corr);
    case KW_REORDER:
        pos->reorder = at;
        return pct_corr(p, "reorder", &s->reorder, &s->reorder_corr);
    case KW_GAP:
        pos->gap = at;
        return parse_uint(p, "reorder gap", 1, UINT32_MAX, &s->gap);
    case KW_CORRUPT:
        return pct_corr(p, "corrupt", &s->corrupt, &s->corrupt_corr);
    case KW_RATE:
        return kw_rate(p, s);
    default:
        return parse_uint(p, "limit", 1, UINT32_MAX, &s->limit);
    }
}

int drths_impair_spec_parse(drths_impair_spec_t *spec, const char *text, drths_error_t *err)
{
    memset(spec, 0, sizeof *spec);
    drths_error_clear(err);
    if (text == NULL)
        return 0;
    char buf[1024];
    if (strlen(text) >= sizeof buf)
        return drths_error_set(err, -EINVAL, "option string longer than %zu characters",
                               sizeof buf - 1);
    strcpy(buf, text);
    parser_t p = {.n = 0, .i = 0, .err = err};
    for (char *save = NULL, *t = strtok_r(buf, " \t\n\r", &save); t;
         t = strtok_r(NULL, " \t\n\r", &save)) {
        if (p.n == MAX_TOKENS)
            return drths_error_set(err, -EINVAL, "more than %d tokens", MAX_TOKENS);
        p.tok[p.n++] = t;
    }

    drths_impair_spec_t s = {0};
    unsigned seen = 0;
    spec_at_t pos = {-1, -1, -1};
    while (p.i < p.n) {
        int at = p.i++;
        int r = keyword(&p, at, &seen, &s, &pos);
        if (r)
            return r;
    }

    if (s.reorder > 0 && s.delay_ns == 0)
        return bad(&p, pos.reorder, "keyword", "reordering needs a delay (as in tc)");
    if (pos.gap >= 0 && s.reorder == 0)
        return bad(&p, pos.gap, "keyword", "gap given without a reorder percentage");
    if (s.reorder > 0 && s.gap == 0)
        s.gap = 1;
    if (pos.dist >= 0 && (s.delay_ns == 0 || s.jitter_ns == 0))
        return bad(&p, pos.dist, "distribution name",
                   "a distribution needs a delay and a jitter, e.g. delay 40ms 5ms");
    if (check_spec(&s) != 0)
        return drths_error_set(err, -EINVAL, "inconsistent options");
    *spec = s;
    return 0;
}

static void fmt_time(char *b, size_t n, int64_t ns)
{
    if (ns % 1000000000 == 0 && ns != 0)
        snprintf(b, n, "%" PRId64 "s", ns / 1000000000);
    else if (ns % 1000000 == 0)
        snprintf(b, n, "%" PRId64 "ms", ns / 1000000);
    else if (ns % 1000 == 0)
        snprintf(b, n, "%" PRId64 "us", ns / 1000);
    else
        snprintf(b, n, "%" PRId64 "ns", ns);
}

typedef struct outbuf {
    char *buf;
    size_t len;
    size_t used;
} outbuf_t;

static void out(outbuf_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out(outbuf_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->used < o->len ? o->len - o->used : 0;
    int k = vsnprintf(room ? o->buf + o->used : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0)
        o->used += (size_t)k;
}

int drths_impair_spec_format(const drths_impair_spec_t *s, char *buf, size_t len)
{
    outbuf_t o = {buf, len, 0};
    if (len)
        buf[0] = '\0';
    char a[32], b[32];
    const char *sep = "";
    if (s->delay_ns || s->jitter_ns) {
        fmt_time(a, sizeof a, s->delay_ns);
        out(&o, "delay %s", a);
        if (s->jitter_ns) {
            fmt_time(b, sizeof b, s->jitter_ns);
            out(&o, " %s", b);
            if (s->delay_corr)
                out(&o, " %g%%", s->delay_corr * 100);
            static const char *names[] = {"uniform", "normal", "pareto", "paretonormal"};
            out(&o, " distribution %s", names[s->dist]);
        }
        sep = " ";
    }
    if (s->loss_model == DRTHS_IMPAIR_LOSS_RANDOM) {
        out(&o, "%sloss random %g%%", sep, s->loss * 100);
        if (s->loss_corr)
            out(&o, " %g%%", s->loss_corr * 100);
        sep = " ";
    } else if (s->loss_model == DRTHS_IMPAIR_LOSS_GE) {
        out(&o, "%sloss gemodel %g%% %g%% %g%% %g%%", sep, s->ge_p * 100, s->ge_r * 100,
            s->ge_1h * 100, s->ge_1k * 100);
        sep = " ";
    }
    if (s->duplicate) {
        out(&o, "%sduplicate %g%%", sep, s->duplicate * 100);
        if (s->duplicate_corr)
            out(&o, " %g%%", s->duplicate_corr * 100);
        sep = " ";
    }
    if (s->reorder) {
        out(&o, "%sreorder %g%%", sep, s->reorder * 100);
        if (s->reorder_corr)
            out(&o, " %g%%", s->reorder_corr * 100);
        out(&o, " gap %" PRIu32, s->gap);
        sep = " ";
    }
    if (s->corrupt) {
        out(&o, "%scorrupt %g%%", sep, s->corrupt * 100);
        if (s->corrupt_corr)
            out(&o, " %g%%", s->corrupt_corr * 100);
        sep = " ";
    }
    if (s->rate_bit_s) {
        out(&o, "%srate %" PRIu64 "bit", sep, s->rate_bit_s);
        if (s->packet_overhead || s->cell_size || s->cell_overhead)
            out(&o, " %" PRId32, s->packet_overhead);
        if (s->cell_size || s->cell_overhead)
            out(&o, " %" PRIu32 " %" PRId32, s->cell_size, s->cell_overhead);
        sep = " ";
    }
    if (s->limit) {
        out(&o, "%slimit %" PRIu32, sep, s->limit);
        sep = " ";
    }
    if (!*sep)
        out(&o, "none");
    return (int)o.used;
}
