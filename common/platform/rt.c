#include "common/platform/rt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define DMA_LATENCY_PATH "/dev/cpu_dma_latency"

void drths_rt_options_default(drths_rt_options_t *o)
{
    o->priority = 80;
    o->cpu = -1;
    o->lock_memory = 1;
    o->prefault_stack_bytes = 256 * 1024;
    o->cpu_dma_latency = 1;
    o->require = 0;
}

const char *drths_rt_status_name(drths_rt_status_t s)
{
    switch (s) {
    case DRTHS_RT_NOT_REQUESTED:
        return "not requested";
    case DRTHS_RT_APPLIED:
        return "applied";
    case DRTHS_RT_NOT_PERMITTED:
        return "not permitted";
    case DRTHS_RT_INVALID:
        return "invalid";
    }
    return "?";
}

static void errtext(int err, char *buf, size_t len)
{
    /* _GNU_SOURCE strerror_r may return a static string instead of filling buf. */
    char tmp[96];
    const char *s = strerror_r(-err, tmp, sizeof tmp);
    snprintf(buf, len, "%s", s);
}

/* Records an outcome. Environmental refusals are "not permitted"; anything else the system
 * rejects is treated as a wrong request. */
static void set_item(drths_rt_item_t *it, int err, const char *hint)
{
    it->err = err;
    if (err == 0) {
        it->status = DRTHS_RT_APPLIED;
        it->detail[0] = '\0';
        return;
    }
    it->status = (err == -EPERM || err == -EACCES || err == -ENOMEM || err == -ENOENT ||
                  err == -ENODEV || err == -EROFS || err == -EAGAIN)
                     ? DRTHS_RT_NOT_PERMITTED
                     : DRTHS_RT_INVALID;
    char e[96];
    errtext(err, e, sizeof e);
    if (hint && hint[0])
        snprintf(it->detail, sizeof it->detail, "%s; %s", e, hint);
    else
        snprintf(it->detail, sizeof it->detail, "%s", e);
}

static void set_invalid(drths_rt_item_t *it, const char *reason)
{
    it->status = DRTHS_RT_INVALID;
    it->err = -EINVAL;
    snprintf(it->detail, sizeof it->detail, "%s", reason);
}

/* Touches one byte per page of a stack buffer of the given size. noinline so the buffer is
 * really on the stack below the caller, which is where the RT loop's frames will live. */
static __attribute__((noinline)) void touch_stack(size_t bytes)
{
    unsigned char buf[bytes];
    volatile unsigned char *p = buf; /* volatile stores cannot be optimised away */
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : 4096;
    for (size_t i = 0; i < bytes; i += step)
        p[i] = 0;
    p[bytes - 1] = 0;
}

static int stack_size(size_t *size)
{
    pthread_attr_t attr;
    void *addr;
    int r = pthread_getattr_np(pthread_self(), &attr);
    if (r)
        return -r;
    r = pthread_attr_getstack(&attr, &addr, size);
    pthread_attr_destroy(&attr);
    return -r;
}

int drths_rt_lock_memory(size_t prefault_stack_bytes)
{
    if (prefault_stack_bytes > 0) {
        size_t ss;
        if (stack_size(&ss) < 0 || prefault_stack_bytes > ss / 2)
            return -EINVAL;
    }
    int r = mlockall(MCL_CURRENT | MCL_FUTURE) ? -errno : 0;
    if (prefault_stack_bytes > 0)
        touch_stack(prefault_stack_bytes);
    return r;
}

int drths_rt_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    int r = pthread_attr_init(&attr);
    if (r)
        return -r;
    r = pthread_attr_setstacksize(&attr, DRTHS_RT_STACK_BYTES);
    if (!r)
        r = pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return -r;
}

int drths_rt_thread_create_fifo(pthread_t *t, void *(*fn)(void *), void *arg, int priority,
                                drths_rt_item_t *it)
{
    memset(it, 0, sizeof *it);
    snprintf(it->what, sizeof it->what, "SCHED_FIFO priority %d", priority);
    if (priority == 0)
        return drths_rt_thread_create(t, fn, arg);
    if (priority < sched_get_priority_min(SCHED_FIFO) ||
        priority > sched_get_priority_max(SCHED_FIFO)) {
        set_invalid(it, "priority out of range");
        return -EINVAL;
    }
    pthread_attr_t attr;
    int r = pthread_attr_init(&attr);
    if (r)
        return -r;
    struct sched_param sp = {.sched_priority = priority};
    r = pthread_attr_setstacksize(&attr, DRTHS_RT_STACK_BYTES);
    if (!r)
        r = pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
    if (!r)
        r = pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
    if (!r)
        r = pthread_attr_setschedparam(&attr, &sp);
    if (!r)
        r = pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (r == EPERM) {
        set_item(it, -EPERM, "needs CAP_SYS_NICE or an rtprio limit");
        return drths_rt_thread_create(t, fn, arg);
    }
    if (r == 0)
        set_item(it, 0, NULL);
    return -r;
}

int drths_rt_open_dma_latency(const char *path, int32_t usec)
{
    int fd = open(path ? path : DMA_LATENCY_PATH, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* The device takes a binary 32-bit value. */
    ssize_t n = write(fd, &usec, sizeof usec);
    if (n != (ssize_t)sizeof usec) {
        int e = n < 0 ? -errno : -EIO;
        close(fd);
        return e;
    }
    return fd;
}

static void apply_sched(const drths_rt_options_t *o, drths_rt_item_t *it)
{
    int lo = sched_get_priority_min(SCHED_FIFO), hi = sched_get_priority_max(SCHED_FIFO);
    snprintf(it->what, sizeof it->what, "SCHED_FIFO priority %d", o->priority);
    if (o->priority < lo || o->priority > hi) {
        char why[96];
        snprintf(why, sizeof why, "priority must be %d..%d (0 leaves the policy unchanged)", lo,
                 hi);
        set_invalid(it, why);
        return;
    }
    struct sched_param sp = {.sched_priority = o->priority};
    int r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    set_item(it, -r, r == EPERM ? "needs CAP_SYS_NICE or an rtprio limit" : NULL);
}

static void apply_affinity(const drths_rt_options_t *o, drths_rt_item_t *it)
{
    snprintf(it->what, sizeof it->what, "CPU affinity to CPU %d", o->cpu);
    if (o->cpu < 0 || o->cpu >= CPU_SETSIZE) {
        set_invalid(it, "CPU index out of range (-1 leaves the thread unpinned)");
        return;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((size_t)o->cpu, &set);
    int r = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (r == EINVAL) {
        char why[128];
        snprintf(why, sizeof why, "CPU %d is not online or not in this process's cpuset (%ld "
                 "CPUs online)", o->cpu, sysconf(_SC_NPROCESSORS_ONLN));
        set_invalid(it, why);
        return;
    }
    set_item(it, -r, NULL);
}

static void apply_memory(const drths_rt_options_t *o, drths_rt_report_t *rep)
{
    drths_rt_item_t *it = &rep->item[DRTHS_RT_ITEM_MEMORY];
    if (o->prefault_stack_bytes)
        snprintf(it->what, sizeof it->what, "mlockall + %zu KiB stack prefault",
                 (o->prefault_stack_bytes + 1023) / 1024);
    int r = drths_rt_lock_memory(o->prefault_stack_bytes);
    if (r == -EINVAL) {
        size_t ss = 0;
        stack_size(&ss);
        char why[128];
        snprintf(why, sizeof why, "stack prefault of %zu bytes exceeds half the thread's stack "
                 "(%zu bytes)", o->prefault_stack_bytes, ss);
        set_invalid(it, why);
        return;
    }
    char hint[64] = "";
    if (r == -ENOMEM || r == -EPERM) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(hint, sizeof hint, "RLIMIT_MEMLOCK is %llu KiB",
                     (unsigned long long)rl.rlim_cur / 1024);
    }
    set_item(it, r, hint);
    if (r == 0)
        rep->locked = 1;
}

static void apply_dma(drths_rt_report_t *rep)
{
    drths_rt_item_t *it = &rep->item[DRTHS_RT_ITEM_DMA_LATENCY];
    snprintf(it->what, sizeof it->what, "%s = 0 us", DMA_LATENCY_PATH);
    int fd = drths_rt_open_dma_latency(NULL, 0);
    if (fd >= 0) {
        rep->dma_fd = fd;
        set_item(it, 0, NULL);
    } else {
        set_item(it, fd, NULL);
    }
}

int drths_rt_apply_thread(const drths_rt_options_t *o, drths_rt_report_t *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->dma_fd = -1;
    rep->require = o->require != 0;
    snprintf(rep->item[DRTHS_RT_ITEM_SCHED].what, sizeof rep->item[0].what, "SCHED_FIFO");
    snprintf(rep->item[DRTHS_RT_ITEM_AFFINITY].what, sizeof rep->item[0].what, "CPU affinity");
    snprintf(rep->item[DRTHS_RT_ITEM_MEMORY].what, sizeof rep->item[0].what, "mlockall");
    snprintf(rep->item[DRTHS_RT_ITEM_DMA_LATENCY].what, sizeof rep->item[0].what,
             "%s", DMA_LATENCY_PATH);

    if (o->priority != 0)
        apply_sched(o, &rep->item[DRTHS_RT_ITEM_SCHED]);
    if (o->cpu != -1)
        apply_affinity(o, &rep->item[DRTHS_RT_ITEM_AFFINITY]);
    if (o->lock_memory)
        apply_memory(o, rep);
    if (o->cpu_dma_latency)
        apply_dma(rep);

    for (int i = 0; i < DRTHS_RT_NITEMS; i++) {
        const drths_rt_item_t *it = &rep->item[i];
        if (it->status == DRTHS_RT_INVALID ||
            (it->status == DRTHS_RT_NOT_PERMITTED && rep->require))
            return it->err;
    }
    return 0;
}

int drths_rt_report_line(const drths_rt_report_t *rep, int i, char *buf, size_t len)
{
    if (i < 0 || i >= DRTHS_RT_NITEMS)
        return snprintf(buf, len, "rt: no such item %d", i);
    const drths_rt_item_t *it = &rep->item[i];
    switch (it->status) {
    case DRTHS_RT_NOT_REQUESTED:
    case DRTHS_RT_APPLIED:
        return snprintf(buf, len, "rt: %s: %s", it->what, drths_rt_status_name(it->status));
    case DRTHS_RT_NOT_PERMITTED:
        return snprintf(buf, len, "rt: %s: not permitted (%s); %s", it->what, it->detail,
                        rep->require ? "real time is required, stopping"
                                     : "continuing without it");
    case DRTHS_RT_INVALID:
        break;
    }
    return snprintf(buf, len, "rt: %s: invalid (%s)", it->what, it->detail);
}

void drths_rt_report_close(drths_rt_report_t *rep)
{
    /* A zeroed report has dma_fd 0, which is not ours: a descriptor is owned only when apply
     * marked the item applied. */
    if (rep->dma_fd >= 0 && rep->item[DRTHS_RT_ITEM_DMA_LATENCY].status == DRTHS_RT_APPLIED)
        close(rep->dma_fd);
    rep->dma_fd = -1;
    rep->item[DRTHS_RT_ITEM_DMA_LATENCY].status = DRTHS_RT_NOT_REQUESTED;
    if (rep->locked)
        munlockall();
    rep->locked = 0;
}
