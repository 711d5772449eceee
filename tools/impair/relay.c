#include "relay.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define PEND_RING (1u << 20)

static uint64_t ld(_Atomic uint64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

/* Single writer: load + store is enough and cheaper than an atomic add. */
static void add(_Atomic uint64_t *a, uint64_t v)
{
    atomic_store_explicit(a, ld(a) + v, memory_order_relaxed);
}

static void set_i64(_Atomic int64_t *a, int64_t v)
{
    atomic_store_explicit(a, v, memory_order_relaxed);
}

static int64_t get_i64(_Atomic int64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

int64_t relay_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC minus CLOCK_REALTIME, to convert kernel receive stamps. The two clocks are
 * read real / mono / real and only a narrow window is trusted: a thread preempted between two
 * reads would otherwise shift every stamp of the batch by the preemption, and the relay would
 * send early. A wide window keeps the previous estimate. */
static int64_t mono_minus_real(relay_dir_t *d)
{
    int64_t best_w = INT64_MAX, off = 0;
    for (int i = 0; i < 3 && best_w > 2000; i++) {
        int64_t r1 = realtime_ns(), m = relay_now_ns(), r2 = realtime_ns();
        if (r2 - r1 < best_w) {
            best_w = r2 - r1;
            off = m - (r1 + (r2 - r1) / 2);
        }
    }
    if (best_w < 20000 || !d->clock_off_known) {
        d->clock_off_ns = off;
        d->clock_off_known = true;
    }
    return d->clock_off_ns;
}

int relay_dir_init(relay_dir_t *d, const char *name, uint32_t pool_n, size_t slot_size)
{
    memset(d, 0, sizeof *d);
    d->name = name;
    d->timer_fd = d->wake_fd = -1;
    d->pool_n = pool_n;
    d->slot_size = slot_size;
    /* The pool is reserved, not committed: only slots that are used get pages, and the free
     * stack hands out recently freed slots first, so resident memory follows queue depth. */
    size_t bytes = (size_t)pool_n * slot_size;
    void *b = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (b == MAP_FAILED)
        return -errno;
    d->buf = b;
    d->slots = calloc(pool_n, sizeof *d->slots);
    d->free_stack = calloc(pool_n, sizeof *d->free_stack);
    d->heap = calloc(pool_n, sizeof *d->heap);
    d->pend = calloc(PEND_RING, 1);
    d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    d->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!d->slots || !d->free_stack || !d->heap || !d->pend || d->timer_fd < 0 || d->wake_fd < 0) {
        int e = errno ? -errno : -ENOMEM;
        relay_dir_close(d);
        return e;
    }
    for (uint32_t i = 0; i < pool_n; i++)
        d->free_stack[i] = pool_n - 1 - i;
    d->free_top = pool_n;
    d->pend_mask = PEND_RING - 1;
    d->armed_ns = -1;
    set_i64(&d->c.delay_min_ns, INT64_MAX);
    return 0;
}

void relay_dir_close(relay_dir_t *d)
{
    if (d->buf)
        munmap(d->buf, (size_t)d->pool_n * d->slot_size);
    d->buf = NULL;
    free(d->slots);
    free(d->free_stack);
    free(d->heap);
    free(d->pend);
    d->slots = NULL;
    d->free_stack = d->heap = NULL;
    d->pend = NULL;
    if (d->timer_fd >= 0)
        close(d->timer_fd);
    if (d->wake_fd >= 0)
        close(d->wake_fd);
    d->timer_fd = d->wake_fd = -1;
    drths_impair_close(&d->model);
}

/* ---- heap keyed by (send time, arrival seq) ---- */

static bool before(const relay_dir_t *d, uint32_t a, uint32_t b)
{
    const relay_slot_t *x = &d->slots[a], *y = &d->slots[b];
    if (x->send_ns != y->send_ns)
        return x->send_ns < y->send_ns;
    return x->seq < y->seq;
}

static void heap_push(relay_dir_t *d, uint32_t s)
{
    uint32_t i = d->heap_n++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!before(d, s, d->heap[p]))
            break;
        d->heap[i] = d->heap[p];
        i = p;
    }
    d->heap[i] = s;
}

static uint32_t heap_pop(relay_dir_t *d)
{
    uint32_t top = d->heap[0];
    uint32_t last = d->heap[--d->heap_n];
    uint32_t i = 0, n = d->heap_n;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        uint32_t mv = last;
        if (l < n && before(d, d->heap[l], mv)) {
            m = l;
            mv = d->heap[l];
        }
        if (r < n && before(d, d->heap[r], mv))
            m = r;
        if (m == i)
            break;
        d->heap[i] = d->heap[m];
        i = m;
    }
    if (n)
        d->heap[i] = last;
    return top;
}

/* ---- peer address ---- */

static void peer_write(relay_peer_t *p, const struct sockaddr_storage *a, socklen_t len)
{
    pthread_mutex_lock(&p->lock);
    if (!atomic_load_explicit(&p->known, memory_order_relaxed) || p->len != len ||
        memcmp(&p->addr, a, len) != 0) {
        memcpy(&p->addr, a, len);
        p->len = len;
        atomic_store_explicit(&p->known, true, memory_order_release);
    }
    pthread_mutex_unlock(&p->lock);
}

static bool peer_read(relay_peer_t *p, struct sockaddr_storage *a, socklen_t *len)
{
    if (!atomic_load_explicit(&p->known, memory_order_acquire))
        return false;
    pthread_mutex_lock(&p->lock);
    memcpy(a, &p->addr, sizeof *a);
    *len = p->len;
    pthread_mutex_unlock(&p->lock);
    return true;
}

/* ---- reorder accounting: "sent while an earlier-received packet is still queued" ---- */

static void pend_add(relay_dir_t *d, relay_slot_t *s)
{
    /* Move lo past packets that were dropped or sent (amortised O(1): lo only grows). */
    if (d->heap_n == 0)
        d->lo_seq = s->seq;
    while (d->lo_seq < s->seq && d->pend[d->lo_seq & d->pend_mask] == 0)
        d->lo_seq++;
    if (s->seq - d->lo_seq >= PEND_RING) {
        /* An old packet has been queued for more than 2^20 arrivals; this one cannot be placed
         * in the ring and is not classified. */
        s->tracked = false;
        add(&d->c.reorder_untracked, 1);
        return;
    }
    s->tracked = true;
    d->pend[s->seq & d->pend_mask]++;
}

static void pend_sent(relay_dir_t *d, const relay_slot_t *s)
{
    if (!s->tracked)
        return;
    d->pend[s->seq & d->pend_mask]--;
    while (d->lo_seq < d->next_seq && d->pend[d->lo_seq & d->pend_mask] == 0)
        d->lo_seq++;
    if (d->lo_seq < s->seq)
        add(&d->c.reordered, 1);
}

/* ---- receive ---- */

static void apply_changes(relay_dir_t *d, int64_t now)
{
    while (d->next_change < d->n_changes && d->t0_ns + d->changes[d->next_change].at_ns <= now) {
        const relay_change_t *ch = &d->changes[d->next_change++];
        if (drths_impair_set_spec(&d->model, &ch->spec) == 0) {
            d->limit = ch->spec.limit ? ch->spec.limit : d->limit_default;
            if (d->limit > d->pool_n)
                d->limit = d->pool_n;
            add(&d->c.spec_changes, 1);
        }
    }
}

static void schedule(relay_dir_t *d, uint32_t slot, int64_t arrival, uint32_t len, uint64_t seq)
{
    drths_impair_decision_t dec;
    unsigned copies = drths_impair_decide(&d->model, arrival, len, &dec);
    add(&d->c.duplicated, dec.duplicated);
    add(&d->c.dropped_random, dec.lost_random);
    add(&d->c.dropped_ge, dec.lost_ge);
    uint32_t slots[DRTHS_IMPAIR_MAX_COPIES] = {slot, UINT32_MAX};
    for (unsigned k = 0; k < copies; k++) {
        if (k > 0) {
            if (d->free_top == 0 || d->heap_n + 1 >= d->limit) {
                add(&d->c.dropped_overflow, 1);
                continue;
            }
            slots[k] = d->free_stack[--d->free_top];
            memcpy(d->buf + (size_t)slots[k] * d->slot_size, d->buf + (size_t)slot * d->slot_size,
                   len);
        } else if (d->heap_n >= d->limit) {
            add(&d->c.dropped_overflow, 1);
            slots[0] = UINT32_MAX;
            continue;
        }
        uint8_t *data = d->buf + (size_t)slots[k] * d->slot_size;
        if (dec.corrupt_bit[k] >= 0) {
            data[dec.corrupt_bit[k] / 8] ^= (uint8_t)(1u << (dec.corrupt_bit[k] % 8));
            add(&d->c.corrupted, 1);
        }
        relay_slot_t *s = &d->slots[slots[k]];
        s->send_ns = dec.send_ns[k];
        s->arrival_ns = arrival;
        s->seq = seq;
        s->len = len;
        add(&d->c.sent_at_once, dec.reordered[k]);
        pend_add(d, s);
        heap_push(d, slots[k]);
    }
    if (slots[0] == UINT32_MAX || copies == 0)
        d->free_stack[d->free_top++] = slot; /* the received slot was not queued */
}

static int64_t cmsg_arrival(struct msghdr *mh, int64_t mono_minus_real, int64_t now)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            int64_t t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + mono_minus_real;
            return t < now ? t : now;
        }
    }
    return now;
}

/* Reads whatever is waiting, a few batches at most so that sending is never starved. */
static int receive(relay_dir_t *d)
{
    static _Thread_local uint8_t scratch[BATCH][64];
    static _Thread_local union {
        char buf[CMSG_SPACE(sizeof(struct timespec)) + 64];
        struct cmsghdr align;
    } ctl[BATCH];
    struct mmsghdr mm[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_storage from[BATCH];
    uint32_t taken[BATCH];

    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < BATCH; i++) {
            if (d->free_top > 0) {
                taken[i] = d->free_stack[--d->free_top];
                iov[i].iov_base = d->buf + (size_t)taken[i] * d->slot_size;
                iov[i].iov_len = d->slot_size;
            } else {
                /* No slot: read into scratch to count and drop it as overflow. */
                taken[i] = UINT32_MAX;
                iov[i].iov_base = scratch[i];
                iov[i].iov_len = sizeof scratch[i];
            }
            memset(&mm[i].msg_hdr, 0, sizeof mm[i].msg_hdr);
            mm[i].msg_hdr.msg_name = &from[i];
            mm[i].msg_hdr.msg_namelen = sizeof from[i];
            mm[i].msg_hdr.msg_iov = &iov[i];
            mm[i].msg_hdr.msg_iovlen = 1;
            mm[i].msg_hdr.msg_control = ctl[i].buf;
            mm[i].msg_hdr.msg_controllen = sizeof ctl[i].buf;
        }
        int n = recvmmsg(d->in_fd, mm, BATCH, MSG_DONTWAIT, NULL);
        int err = n < 0 ? errno : 0;
        int64_t off = mono_minus_real(d);
        int64_t now = relay_now_ns();
        for (int i = 0; i < (n > 0 ? n : 0); i++) {
            uint32_t len = mm[i].msg_len;
            int64_t arrival = cmsg_arrival(&mm[i].msg_hdr, off, now);
            add(&d->c.received, 1);
            add(&d->c.bytes_in, len);
            if (d->record_peer)
                peer_write(d->peer, &from[i], mm[i].msg_hdr.msg_namelen);
            uint64_t seq = d->next_seq++;
            if (taken[i] == UINT32_MAX) {
                add(&d->c.dropped_overflow, 1);
                continue;
            }
            if (mm[i].msg_hdr.msg_flags & MSG_TRUNC) {
                add(&d->c.dropped_oversize, 1);
                d->free_stack[d->free_top++] = taken[i];
                continue;
            }
            schedule(d, taken[i], arrival, len, seq);
        }
        /* Give back the slots the batch did not use, in reverse to keep the stack order. */
        for (int i = BATCH - 1; i >= (n > 0 ? n : 0); i--)
            if (taken[i] != UINT32_MAX)
                d->free_stack[d->free_top++] = taken[i];
        if (n < 0) {
            if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
                return 0;
            if (err == ECONNREFUSED)
                continue; /* an ICMP error from an earlier send; not fatal */
            return -err;
        }
        if (n < BATCH)
            return 0;
    }
    return 0;
}

/* ---- send ---- */

static void account_sent(relay_dir_t *d, const relay_slot_t *s, int64_t now)
{
    add(&d->c.forwarded, 1);
    add(&d->c.bytes_out, s->len);
    int64_t delay = now - s->arrival_ns;
    int64_t sched = s->send_ns > s->arrival_ns ? s->send_ns : s->arrival_ns;
    int64_t late = now - sched;
    if (late < 0)
        late = 0;
    add(&d->c.delay_n, 1);
    set_i64(&d->c.delay_sum_ns, get_i64(&d->c.delay_sum_ns) + delay);
    if (delay < get_i64(&d->c.delay_min_ns))
        set_i64(&d->c.delay_min_ns, delay);
    if (delay > get_i64(&d->c.delay_max_ns))
        set_i64(&d->c.delay_max_ns, delay);
    set_i64(&d->c.late_sum_ns, get_i64(&d->c.late_sum_ns) + late);
    if (late > get_i64(&d->c.late_max_ns))
        set_i64(&d->c.late_max_ns, late);
    int64_t bin = late / 1000;
    if (bin > RELAY_LATE_HIST)
        bin = RELAY_LATE_HIST;
    atomic_store_explicit(&d->c.late_hist[bin],
                          atomic_load_explicit(&d->c.late_hist[bin], memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Sends every due packet. Returns true if the socket is full and the thread should wait for
 * POLLOUT. */
static bool send_due(relay_dir_t *d, int64_t now)
{
    struct mmsghdr mm[BATCH];
    struct iovec iov[BATCH];
    uint32_t idx[BATCH];
    struct sockaddr_storage to;
    socklen_t tolen = 0;
    bool have_to = d->out_connected;

    for (int guard = 0; guard < 1000 && d->heap_n > 0 && d->slots[d->heap[0]].send_ns <= now;
         guard++) {
        if (!d->out_connected && !have_to) {
            have_to = peer_read(d->peer, &to, &tolen);
            if (!have_to) {
                /* Nowhere to send: no client has spoken yet. */
                while (d->heap_n > 0 && d->slots[d->heap[0]].send_ns <= now) {
                    uint32_t s = heap_pop(d);
                    pend_sent(d, &d->slots[s]);
                    add(&d->c.dropped_no_client, 1);
                    d->free_stack[d->free_top++] = s;
                }
                return false;
            }
        }
        int n = 0;
        while (n < BATCH && d->heap_n > 0 && d->slots[d->heap[0]].send_ns <= now) {
            uint32_t s = heap_pop(d);
            idx[n] = s;
            iov[n].iov_base = d->buf + (size_t)s * d->slot_size;
            iov[n].iov_len = d->slots[s].len;
            memset(&mm[n].msg_hdr, 0, sizeof mm[n].msg_hdr);
            mm[n].msg_hdr.msg_iov = &iov[n];
            mm[n].msg_hdr.msg_iovlen = 1;
            if (!d->out_connected) {
                mm[n].msg_hdr.msg_name = &to;
                mm[n].msg_hdr.msg_namelen = tolen;
            }
            n++;
        }
        int done = 0;
        bool blocked = false;
        while (done < n) {
            int k = sendmmsg(d->out_fd, mm + done, (unsigned)(n - done), MSG_DONTWAIT);
            int64_t t = relay_now_ns();
            if (k > 0) {
                for (int j = done; j < done + k; j++) {
                    pend_sent(d, &d->slots[idx[j]]);
                    account_sent(d, &d->slots[idx[j]], t);
                    d->free_stack[d->free_top++] = idx[j];
                }
                done += k;
                continue;
            }
            int e = k < 0 ? errno : EIO;
            if (e == EINTR)
                continue;
            if (e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS) {
                blocked = true;
                break;
            }
            /* This datagram cannot be sent (e.g. an ICMP error reported now): drop it. */
            pend_sent(d, &d->slots[idx[done]]);
            add(&d->c.send_errors, 1);
            d->free_stack[d->free_top++] = idx[done];
            done++;
        }
        if (blocked) {
            for (int j = done; j < n; j++)
                heap_push(d, idx[j]); /* same keys: they go back where they were */
            return true;
        }
    }
    return false;
}

/* ---- thread ---- */

static void arm(relay_dir_t *d, int64_t when)
{
    if (when == d->armed_ns)
        return;
    struct itimerspec its = {0};
    if (when >= 0) {
        if (when == 0)
            when = 1; /* 0 would disarm */
        its.it_value.tv_sec = when / 1000000000;
        its.it_value.tv_nsec = when % 1000000000;
    }
    timerfd_settime(d->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
    d->armed_ns = when;
}

static void *thread_main(void *arg)
{
    relay_dir_t *d = arg;
    bool blocked = false;
    while (!atomic_load_explicit(&d->stop, memory_order_acquire)) {
        int64_t now = relay_now_ns();
        apply_changes(d, now);
        if (!blocked)
            blocked = send_due(d, now);
        atomic_store_explicit(&d->c.pending, d->heap_n, memory_order_relaxed);
        if (d->heap_n > ld(&d->c.pending_max))
            atomic_store_explicit(&d->c.pending_max, d->heap_n, memory_order_relaxed);

        int64_t next = -1;
        if (d->heap_n > 0 && !blocked)
            next = d->slots[d->heap[0]].send_ns;
        if (d->next_change < d->n_changes) {
            int64_t c = d->t0_ns + d->changes[d->next_change].at_ns;
            if (next < 0 || c < next)
                next = c;
        }
        if (next >= 0 && next <= now)
            next = now; /* fires at once */
        arm(d, next);

        struct pollfd pf[4] = {
            {.fd = d->in_fd, .events = POLLIN},
            {.fd = d->timer_fd, .events = POLLIN},
            {.fd = d->wake_fd, .events = POLLIN},
            {.fd = d->out_fd, .events = POLLOUT},
        };
        int r = poll(pf, blocked ? 4 : 3, -1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            d->thread_error = -errno;
            break;
        }
        if (pf[1].revents & POLLIN)
            d->armed_ns = -2; /* fired: the next arm() re-arms or disarms, which also clears
                               * the expiry count, so no read() is needed */
        if (blocked && (pf[3].revents & (POLLOUT | POLLERR)))
            blocked = false;
        if (pf[0].revents & (POLLIN | POLLERR)) {
            int e = receive(d);
            if (e < 0) {
                d->thread_error = e;
                break;
            }
        }
    }
    atomic_store_explicit(&d->c.pending, d->heap_n, memory_order_relaxed);
    return NULL;
}

int relay_dir_start(relay_dir_t *d, int64_t t0_ns)
{
    d->t0_ns = t0_ns;
    d->limit = d->model.spec.limit ? d->model.spec.limit : d->limit_default;
    if (d->limit == 0 || d->limit > d->pool_n)
        d->limit = d->pool_n;
    atomic_store(&d->stop, false);
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (d->rt_priority > 0) {
        struct sched_param sp = {.sched_priority = d->rt_priority};
        pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&at, SCHED_FIFO);
        pthread_attr_setschedparam(&at, &sp);
    }
    int r = pthread_create(&d->thread, &at, thread_main, d);
    pthread_attr_destroy(&at);
    if (r == EPERM && d->rt_priority > 0) {
        d->rt_refused = true; /* not permitted: run at normal priority, main warns */
        r = pthread_create(&d->thread, NULL, thread_main, d);
    }
    if (r != 0)
        return -r;
    d->started = true;
    return 0;
}

void relay_dir_stop(relay_dir_t *d)
{
    if (!d->started)
        return;
    atomic_store_explicit(&d->stop, true, memory_order_release);
    uint64_t one = 1;
    if (write(d->wake_fd, &one, sizeof one) < 0) {
        /* The counter can only overflow after 2^64 - 1 writes; ignore. */
    }
    pthread_join(d->thread, NULL);
    d->started = false;
}

double relay_dir_cpu_s(relay_dir_t *d)
{
    if (!d->started)
        return -1;
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(d->thread, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return -1;
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double relay_dir_late_us_quantile(relay_dir_t *d, double q)
{
    uint64_t total = 0;
    for (int i = 0; i <= RELAY_LATE_HIST; i++)
        total += atomic_load_explicit(&d->c.late_hist[i], memory_order_relaxed);
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total);
    if (want >= total)
        want = total - 1;
    uint64_t acc = 0;
    for (int i = 0; i <= RELAY_LATE_HIST; i++) {
        acc += atomic_load_explicit(&d->c.late_hist[i], memory_order_relaxed);
        if (acc > want)
            return i + 0.5; /* bin centre, in us */
    }
    return RELAY_LATE_HIST;
}
