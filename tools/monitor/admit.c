/* Which HTTP connections drths-monitor keeps (admit.h). */
#include "tools/monitor/admit.h"

#include <string.h>

const drths_admit_limits_t drths_admit_default_limits = {
    .per_host = {32, 4},
    .max = {96, 16},
    .request_ns = 3000000000LL,
    .answer_ns = 10000000000LL,
};

void drths_admit_init(drths_admit_t *a, const drths_admit_limits_t *lim)
{
    memset(a, 0, sizeof *a);
    a->lim = *lim;
}

static int same_host(const drths_admit_conn_t *c, const void *host, size_t len)
{
    return c->host_len == len && memcmp(c->host, host, len) == 0;
}

static int counted(const drths_admit_conn_t *c, drths_admit_pool_t pool)
{
    return c->used && !c->dropping && c->pool == pool;
}

unsigned drths_admit_count(const drths_admit_t *a, drths_admit_pool_t pool, const void *host,
                           size_t host_len)
{
    unsigned n = 0;
    for (size_t i = 0; i < DRTHS_ADMIT_SLOTS; i++)
        if (counted(&a->conn[i], pool) && (!host || same_host(&a->conn[i], host, host_len)))
            n++;
    return n;
}

/* Whether x should go before y: not proven first, then the oldest. */
static int before(const drths_admit_conn_t *x, const drths_admit_conn_t *y)
{
    if (x->proven != y->proven)
        return !x->proven;
    return x->order < y->order;
}

/* Whether c may be named: in pool, not `except`, and unproven when only unproven are wanted. */
static int candidate(const drths_admit_conn_t *c, drths_admit_pool_t pool,
                     const drths_admit_conn_t *except, int unproven_only)
{
    return counted(c, pool) && c != except && (!unproven_only || !c->proven);
}

/* The victim of pool among host's connections (host NULL: among all), or NULL; marked
 * dropping. Connections that have not sent a complete request go first, if any. Among them, or
 * among one address's, the oldest goes (in all, whatever its address: the young ones are about
 * to send their request, the operator's among them); in all among connections that all have
 * sent theirs, the oldest of the address holding the most (ties: the one with the oldest). */
static drths_admit_conn_t *pick(drths_admit_t *a, drths_admit_pool_t pool, const void *host,
                                size_t host_len, const drths_admit_conn_t *except)
{
    int unproven_only = 0;
    for (size_t i = 0; i < DRTHS_ADMIT_SLOTS; i++) {
        const drths_admit_conn_t *c = &a->conn[i];
        if (candidate(c, pool, except, 1) && (!host || same_host(c, host, host_len)))
            unproven_only = 1;
    }
    int by_address = !host && !unproven_only;
    drths_admit_conn_t *best = NULL;
    unsigned best_n = 0;
    for (size_t i = 0; i < DRTHS_ADMIT_SLOTS; i++) {
        drths_admit_conn_t *c = &a->conn[i];
        if (!candidate(c, pool, except, unproven_only) || (host && !same_host(c, host, host_len)))
            continue;
        if (!by_address) {
            if (!best || before(c, best))
                best = c;
            continue;
        }
        unsigned n = 0; /* candidates of c's address */
        const drths_admit_conn_t *oldest = c;
        for (size_t j = 0; j < DRTHS_ADMIT_SLOTS; j++) {
            const drths_admit_conn_t *d = &a->conn[j];
            if (candidate(d, pool, except, unproven_only) && same_host(d, c->host, c->host_len)) {
                n++;
                if (before(d, oldest))
                    oldest = d;
            }
        }
        if (oldest != c)
            continue; /* each address is judged by its first candidate */
        if (!best || n > best_n || (n == best_n && before(c, best))) {
            best = c;
            best_n = n;
        }
    }
    if (best)
        best->dropping = 1;
    return best;
}

/* The victim that keeps c's pool within its caps now that c is in it, or NULL. */
static drths_admit_conn_t *over(drths_admit_t *a, const drths_admit_conn_t *c)
{
    drths_admit_pool_t p = c->pool;
    if (drths_admit_count(a, p, c->host, c->host_len) > a->lim.per_host[p])
        return pick(a, p, c->host, c->host_len, c);
    if (drths_admit_count(a, p, NULL, 0) > a->lim.max[p])
        return pick(a, p, NULL, 0, c);
    return NULL;
}

drths_admit_conn_t *drths_admit_open(drths_admit_t *a, const void *host, size_t host_len,
                                     int64_t now, drths_admit_conn_t **victim)
{
    *victim = NULL;
    if (host_len > sizeof a->conn[0].host)
        return NULL;
    for (size_t i = 0; i < DRTHS_ADMIT_SLOTS; i++) {
        drths_admit_conn_t *c = &a->conn[i];
        if (c->used)
            continue;
        memset(c, 0, sizeof *c);
        c->used = 1;
        memcpy(c->host, host, host_len);
        c->host_len = host_len;
        c->pool = DRTHS_ADMIT_OTHER;
        c->deadline_ns = now + a->lim.request_ns;
        c->order = ++a->order;
        c->fd = -1;
        *victim = over(a, c);
        return c;
    }
    return NULL;
}

void drths_admit_headers(drths_admit_conn_t *c, int proven)
{
    c->proven = proven;
}

void drths_admit_answer(drths_admit_t *a, drths_admit_conn_t *c, int64_t now)
{
    c->answering = 1;
    c->deadline_ns = now + a->lim.answer_ns;
}

void drths_admit_stream(drths_admit_t *a, drths_admit_conn_t *c, drths_admit_conn_t **victim)
{
    c->pool = DRTHS_ADMIT_STREAM;
    c->answering = 1;
    c->deadline_ns = 0;
    c->order = ++a->order;
    *victim = c->dropping ? NULL : over(a, c);
}

void drths_admit_done(drths_admit_t *a, drths_admit_conn_t *c, int64_t now)
{
    c->answering = 0;
    if (c->pool == DRTHS_ADMIT_OTHER)
        c->deadline_ns = now + a->lim.request_ns;
}

void drths_admit_close(drths_admit_conn_t *c)
{
    c->used = 0;
    c->dropping = 0;
}

size_t drths_admit_expired(drths_admit_t *a, int64_t now, drths_admit_conn_t **out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < DRTHS_ADMIT_SLOTS && n < cap; i++) {
        drths_admit_conn_t *c = &a->conn[i];
        if (c->used && !c->dropping && c->deadline_ns && now >= c->deadline_ns) {
            c->dropping = 1;
            out[n++] = c;
        }
    }
    return n;
}
