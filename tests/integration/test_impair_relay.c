/* Integration test of drths-impair on 127.0.0.1.
 *
 * The test starts the real relay (random ports, a fixed seed), an echo peer (the "target") and a
 * sender (the "client") that sends datagrams at a fixed rate. Because the relay's decisions
 * depend only on its seed, its specs and the arrival order, the test runs replicas of both
 * models and knows, for every datagram, whether it must be lost and the delay it must get.
 * It asserts:
 * - exactly the datagrams the model drops are missing, in both directions;
 * - no datagram arrives earlier than its model delay (so none below 20 ms - 2 ms), and the median
 *   excess (relay lateness plus loopback) is below 1 ms;
 * - the loss fraction is within four standard errors of the spec's;
 * - the relay's printed counters equal what the test observed (received, forwarded, dropped,
 *   reordered), and --stats wrote the same numbers.
 * Every wait is a poll() with a timeout; the relay is killed if it does not stop.
 *
 * For measurements (not part of ctest) the environment can override the load:
 * DRTHS_IMPAIR_TEST_RATE (Hz, default 1000), DRTHS_IMPAIR_TEST_COUNT (default 2000),
 * DRTHS_IMPAIR_TEST_FORWARD / _BACKWARD (netem options), DRTHS_IMPAIR_TEST_RELAY_ARGS (more
 * relay options, e.g. "--rt-priority 50"). The measured delay errors and the relay's CPU use
 * are printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/impair.h"

#define MAGIC 0x44525448u
#define SEED 12345u

typedef struct msg {
    uint32_t magic;
    uint32_t seq;        /* client's sequence number */
    uint32_t echo_index; /* order in which the echo sent its reply */
    uint32_t pad0;
    int64_t client_tx_ns;
    int64_t echo_rx_ns;
    int64_t echo_tx_ns;
    uint8_t pad[24];
} msg_t;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CLOCK_MONOTONIC - CLOCK_REALTIME from the narrowest of a few real/mono/real windows, so that a
 * preemption between reads cannot shift the converted stamps (same method as the relay). */
static int64_t mono_minus_real(void)
{
    int64_t best_w = INT64_MAX, off = 0;
    for (int i = 0; i < 20 && best_w > 2000; i++) {
        int64_t r1 = real_ns(), m = mono_ns(), r2 = real_ns();
        if (r2 - r1 < best_w) {
            best_w = r2 - r1;
            off = m - (r1 + (r2 - r1) / 2);
        }
    }
    return off;
}

/* Receives one datagram with its kernel timestamp (CLOCK_MONOTONIC). Returns the length or -1. */
static ssize_t recv_stamped(int fd, void *buf, size_t len, struct sockaddr_storage *from,
                            socklen_t *fromlen, int64_t *rx_ns)
{
    union {
        char b[CMSG_SPACE(sizeof(struct timespec)) + 64];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, len};
    struct msghdr mh = {.msg_name = from, .msg_namelen = from ? sizeof *from : 0,
                        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                        .msg_controllen = sizeof ctl.b};
    ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);
    if (n < 0)
        return -1;
    if (fromlen)
        *fromlen = mh.msg_namelen;
    int64_t now = mono_ns();
    *rx_ns = now;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            int64_t t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + mono_minus_real();
            *rx_ns = t < now ? t : now;
        }
    }
    return n;
}

static int udp_socket(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    *port = ntohs(a.sin_port);
    int on = 1, sz = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
    return fd;
}

typedef struct shared {
    int n;               /* datagrams the client sends */
    int echo_fd, client_fd;
    atomic_bool stop_echo, stop_client;
    /* echo side */
    atomic_int echo_count; /* datagrams received = replies sent; published after the arrays */
    uint32_t *echo_order;   /* seq by echo arrival order */
    int64_t *echo_rx;       /* by seq, -1 if never */
    int64_t *echo_tx;       /* by echo index */
    int echo_dupes;
    /* client side */
    atomic_int client_count;
    uint32_t *client_order; /* echo index by client arrival order */
    int64_t *client_rx;     /* by echo index */
    int client_dupes;
} shared_t;

static void *echo_main(void *arg)
{
    shared_t *s = arg;
    while (!atomic_load(&s->stop_echo)) {
        struct pollfd pf = {.fd = s->echo_fd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        for (int k = 0; k < 256; k++) {
            msg_t m;
            struct sockaddr_storage from;
            socklen_t fl;
            int64_t rx;
            ssize_t r = recv_stamped(s->echo_fd, &m, sizeof m, &from, &fl, &rx);
            if (r < 0)
                break;
            if (r != sizeof m || m.magic != MAGIC || m.seq >= (uint32_t)s->n)
                continue;
            if (s->echo_rx[m.seq] >= 0) {
                s->echo_dupes++;
                continue;
            }
            int idx = atomic_load_explicit(&s->echo_count, memory_order_relaxed);
            s->echo_rx[m.seq] = rx;
            s->echo_order[idx] = m.seq;
            m.echo_index = (uint32_t)idx;
            m.echo_rx_ns = rx;
            m.echo_tx_ns = mono_ns();
            s->echo_tx[idx] = m.echo_tx_ns;
            atomic_store_explicit(&s->echo_count, idx + 1, memory_order_release);
            if (sendto(s->echo_fd, &m, sizeof m, 0, (struct sockaddr *)&from, fl) != sizeof m)
                fprintf(stderr, "echo: sendto: %s\n", strerror(errno));
        }
    }
    return NULL;
}

static void *client_rx_main(void *arg)
{
    shared_t *s = arg;
    while (!atomic_load(&s->stop_client)) {
        struct pollfd pf = {.fd = s->client_fd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        for (int k = 0; k < 256; k++) {
            msg_t m;
            int64_t rx;
            ssize_t r = recv_stamped(s->client_fd, &m, sizeof m, NULL, NULL, &rx);
            if (r < 0)
                break;
            if (r != sizeof m || m.magic != MAGIC || m.echo_index >= (uint32_t)s->n)
                continue;
            if (s->client_rx[m.echo_index] >= 0) {
                s->client_dupes++;
                continue;
            }
            s->client_rx[m.echo_index] = rx;
            int c = atomic_load(&s->client_count);
            s->client_order[c] = m.echo_index;
            atomic_store(&s->client_count, c + 1);
        }
    }
    return NULL;
}

/* Packets that were sent while an earlier-received one was still queued, seen from the order in
 * which they arrived downstream (ids are the upstream arrival order). */
static long overtakers(const uint32_t *order, int n)
{
    long count = 0;
    uint32_t min_after = UINT32_MAX;
    for (int i = n - 1; i >= 0; i--) {
        if (min_after < order[i])
            count++;
        if (order[i] < min_after)
            min_after = order[i];
    }
    return count;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Reads the relay's stdout until a line containing `want` (or EOF / timeout). Appends all text
 * to log. */
static bool read_until(int fd, char *log, size_t loglen, const char *want, int timeout_ms)
{
    int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        if (want && strstr(log, want))
            return true;
        int64_t left = (deadline - mono_ns()) / 1000000;
        if (left <= 0)
            return false;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, (int)left) <= 0)
            continue;
        size_t used = strlen(log);
        if (used + 1 >= loglen)
            return false;
        ssize_t r = read(fd, log + used, loglen - used - 1);
        if (r <= 0)
            return want == NULL; /* EOF */
        log[used + (size_t)r] = '\0';
    }
}

static uint64_t counter(const char *log, const char *dir, const char *key)
{
    /* The final report is the last "drths-impair DIR: received=..." line. */
    char head[64];
    snprintf(head, sizeof head, "drths-impair %s: received=", dir);
    const char *line = NULL;
    for (const char *p = strstr(log, head); p; p = strstr(p + 1, head))
        line = p;
    if (!line)
        fail_msg("no report line for %s in relay output:\n%s", dir, log);
    const char *eol = strchr(line, '\n');
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *at = strstr(line, k);
    if (!at || (eol && at > eol)) {
        snprintf(k, sizeof k, ": %s=", key);
        at = strstr(line, k);
    }
    if (!at || (eol && at > eol))
        fail_msg("no %s for %s in relay output", key, dir);
    return strtoull(at + strlen(k), NULL, 10);
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

typedef struct direction_check {
    double median_err_ms, p99_err_ms, max_err_ms, min_delay_ms;
    long lost, delivered, reordered;
} direction_check_t;

static void test_relay(void **state)
{
    (void)state;
    const char *bdir = getenv("DRTHS_BUILD_DIR");
    char exe[4096], stats[4096];
    snprintf(exe, sizeof exe, "%s/drths-impair", bdir ? bdir : ".");
    snprintf(stats, sizeof stats, "%s/test_impair_relay_stats.json", bdir ? bdir : ".");
    unlink(stats);
    const double rate = atof(env_or("DRTHS_IMPAIR_TEST_RATE", "1000"));
    const int n = atoi(env_or("DRTHS_IMPAIR_TEST_COUNT", "2000"));
    const char *fwd_text = env_or("DRTHS_IMPAIR_TEST_FORWARD", "delay 20ms 2ms loss 5%");
    const char *bwd_text = env_or("DRTHS_IMPAIR_TEST_BACKWARD", "delay 10ms 1ms loss 2%");
    assert_true(rate > 0 && rate <= 100000 && n > 0 && n <= 10000000);

    drths_impair_spec_t fspec, bspec;
    drths_error_t err;
    assert_int_equal(drths_impair_spec_parse(&fspec, fwd_text, &err), 0);
    assert_int_equal(drths_impair_spec_parse(&bspec, bwd_text, &err), 0);
    assert_true(fspec.duplicate == 0 && bspec.duplicate == 0); /* the checks assume no clones */
    assert_true(fspec.rate_bit_s == 0 && bspec.rate_bit_s == 0);

    shared_t s = {.n = n};
    uint16_t eport, cport;
    s.echo_fd = udp_socket(&eport);
    s.client_fd = udp_socket(&cport);
    s.echo_order = calloc((size_t)n, sizeof *s.echo_order);
    s.echo_rx = malloc((size_t)n * sizeof *s.echo_rx);
    s.echo_tx = calloc((size_t)n, sizeof *s.echo_tx);
    s.client_order = calloc((size_t)n, sizeof *s.client_order);
    s.client_rx = malloc((size_t)n * sizeof *s.client_rx);
    int64_t *client_tx = calloc((size_t)n, sizeof *client_tx);
    assert_non_null(s.echo_order && s.echo_rx && s.echo_tx && s.client_order && s.client_rx &&
                    client_tx);
    for (int i = 0; i < n; i++)
        s.echo_rx[i] = s.client_rx[i] = -1;

    /* Start the relay with its stdout on a pipe. */
    int out[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    char target[64], seed[32];
    snprintf(target, sizeof target, "127.0.0.1:%u", eport);
    snprintf(seed, sizeof seed, "%u", SEED);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        char *args[32] = {exe, "--listen", "127.0.0.1:0", "--target", target, "--forward",
                          (char *)fwd_text, "--backward", (char *)bwd_text, "--seed", seed,
                          "--stats", stats, "--duration", "600"};
        int na = 15;
        char *extra = getenv("DRTHS_IMPAIR_TEST_RELAY_ARGS"); /* e.g. "--rt-priority 50" */
        for (char *save = NULL, *t = extra ? strtok_r(extra, " ", &save) : NULL; t && na < 31;
             t = strtok_r(NULL, " ", &save))
            args[na++] = t;
        args[na] = NULL;
        execv(exe, args);
        fprintf(stderr, "cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    close(out[1]);
    static char log[1 << 16];
    log[0] = '\0';
    if (!read_until(out[0], log, sizeof log, "\n", 5000) || !strstr(log, "listening on ")) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("relay did not start: %s", log);
    }
    unsigned lport = 0;
    const char *at = strstr(log, "listening on 127.0.0.1:");
    assert_non_null(at);
    lport = (unsigned)atoi(at + strlen("listening on 127.0.0.1:"));
    assert_true(lport > 0);

    pthread_t echo_thr, rx_thr;
    assert_int_equal(pthread_create(&echo_thr, NULL, echo_main, &s), 0);
    assert_int_equal(pthread_create(&rx_thr, NULL, client_rx_main, &s), 0);

    /* Send n datagrams at the given rate (absolute schedule). */
    struct sockaddr_in relay = {.sin_family = AF_INET, .sin_port = htons((uint16_t)lport),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int64_t period = (int64_t)(1e9 / rate);
    int64_t t0 = mono_ns() + 10000000;
    for (int i = 0; i < n; i++) {
        int64_t t = t0 + (int64_t)i * period;
        struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        msg_t m = {.magic = MAGIC, .seq = (uint32_t)i};
        m.client_tx_ns = client_tx[i] = mono_ns();
        ssize_t r = sendto(s.client_fd, &m, sizeof m, 0, (struct sockaddr *)&relay, sizeof relay);
        assert_int_equal(r, sizeof m);
    }

    /* Replicas of the relay's models give the expected outcome of every datagram. */
    drths_impair_t fm, bm;
    assert_int_equal(drths_impair_init(&fm, &fspec, SEED), 0);
    assert_int_equal(drths_impair_init(&bm, &bspec, SEED + 1), 0);
    int64_t *fdelay = malloc((size_t)n * sizeof *fdelay);
    int64_t *bdelay = malloc((size_t)n * sizeof *bdelay);
    assert_non_null(fdelay && bdelay);
    long fwd_expect = 0;
    for (int i = 0; i < n; i++) {
        drths_impair_decision_t d;
        fdelay[i] = drths_impair_decide(&fm, 0, sizeof(msg_t), &d) ? d.send_ns[0] : -1;
        fwd_expect += fdelay[i] >= 0;
    }

    /* Wait (bounded) until the echo has everything the model lets through, then until the
     * client has everything the backward model lets through. */
    int64_t slack = 2000000000;
    int64_t deadline = mono_ns() + fspec.delay_ns + 4 * fspec.jitter_ns + slack;
    while (atomic_load(&s.echo_count) < fwd_expect && mono_ns() < deadline) {
        struct pollfd none;
        poll(&none, 0, 5); /* bounded wait; the echo thread does the work */
    }
    long bwd_expect = 0;
    int echoed = atomic_load(&s.echo_count);
    for (int i = 0; i < echoed; i++) {
        drths_impair_decision_t d;
        bdelay[i] = drths_impair_decide(&bm, 0, sizeof(msg_t), &d) ? d.send_ns[0] : -1;
        bwd_expect += bdelay[i] >= 0;
    }
    deadline = mono_ns() + bspec.delay_ns + 4 * bspec.jitter_ns + slack;
    while (atomic_load(&s.client_count) < bwd_expect && mono_ns() < deadline) {
        struct pollfd none;
        poll(&none, 0, 5);
    }
    /* A short grace period shows up anything extra that should not have come. */
    struct pollfd none;
    poll(&none, 0, 50);
    atomic_store(&s.stop_echo, true);
    atomic_store(&s.stop_client, true);
    pthread_join(echo_thr, NULL);
    pthread_join(rx_thr, NULL);

    /* Stop the relay and collect its report. */
    kill(pid, SIGTERM);
    read_until(out[0], log, sizeof log, NULL, 5000);
    int status = 0;
    pid_t w = 0;
    for (int i = 0; i < 500 && (w = waitpid(pid, &status, WNOHANG)) == 0; i++)
        poll(&none, 0, 10);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("relay did not stop on SIGTERM");
    }
    close(out[0]);
    if (getenv("DRTHS_IMPAIR_TEST_VERBOSE"))
        fputs(log, stdout);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Forward direction: exactly the model's survivors, none early. */
    direction_check_t fc = {0}, bc = {0};
    double *errs = malloc((size_t)n * sizeof *errs);
    assert_non_null(errs);
    int ne = 0;
    fc.min_delay_ms = INFINITY;
    for (int i = 0; i < n; i++) {
        if (fdelay[i] < 0) {
            fc.lost++;
            if (s.echo_rx[i] >= 0)
                fail_msg("forward datagram %d arrived but the model drops it", i);
            continue;
        }
        if (s.echo_rx[i] < 0)
            fail_msg("forward datagram %d lost but the model keeps it", i);
        fc.delivered++;
        double measured = (double)(s.echo_rx[i] - client_tx[i]) / 1e6;
        fc.min_delay_ms = fmin(fc.min_delay_ms, measured);
        errs[ne++] = measured - (double)fdelay[i] / 1e6;
    }
    qsort(errs, (size_t)ne, sizeof *errs, cmp_double);
    fc.median_err_ms = errs[ne / 2];
    fc.p99_err_ms = errs[(int)(0.99 * (ne - 1))];
    fc.max_err_ms = errs[ne - 1];
    if (errs[0] <= -0.05)
        fail_msg("forward: a datagram arrived %.3f ms before its model delay", -errs[0]);
    fc.reordered = overtakers(s.echo_order, s.echo_count);

    /* Backward direction, indexed by the order in which the echo replied. */
    ne = 0;
    bc.min_delay_ms = INFINITY;
    for (int i = 0; i < echoed; i++) {
        if (bdelay[i] < 0) {
            bc.lost++;
            if (s.client_rx[i] >= 0)
                fail_msg("backward datagram %d arrived but the model drops it", i);
            continue;
        }
        if (s.client_rx[i] < 0)
            fail_msg("backward datagram %d lost but the model keeps it", i);
        bc.delivered++;
        double measured = (double)(s.client_rx[i] - s.echo_tx[i]) / 1e6;
        bc.min_delay_ms = fmin(bc.min_delay_ms, measured);
        errs[ne++] = measured - (double)bdelay[i] / 1e6;
    }
    qsort(errs, (size_t)ne, sizeof *errs, cmp_double);
    bc.median_err_ms = errs[ne / 2];
    bc.p99_err_ms = errs[(int)(0.99 * (ne - 1))];
    bc.max_err_ms = errs[ne - 1];
    if (errs[0] <= -0.05)
        fail_msg("backward: a datagram arrived %.3f ms before its model delay", -errs[0]);
    bc.reordered = overtakers(s.client_order, atomic_load(&s.client_count));
    assert_int_equal(s.echo_dupes, 0);
    assert_int_equal(s.client_dupes, 0);

    printf("forward  (%s): sent %d, delivered %ld, lost %ld (%.2f %%), reordered %ld, "
           "min delay %.3f ms, error vs model: median %.3f ms, p99 %.3f ms, max %.3f ms\n",
           fwd_text, n, fc.delivered, fc.lost, 100.0 * fc.lost / n, fc.reordered,
           fc.min_delay_ms, fc.median_err_ms, fc.p99_err_ms, fc.max_err_ms);
    printf("backward (%s): sent %d, delivered %ld, lost %ld (%.2f %%), reordered %ld, "
           "min delay %.3f ms, error vs model: median %.3f ms, p99 %.3f ms, max %.3f ms\n",
           bwd_text, echoed, bc.delivered, bc.lost, 100.0 * bc.lost / (echoed ? echoed : 1),
           bc.reordered, bc.min_delay_ms, bc.median_err_ms, bc.p99_err_ms, bc.max_err_ms);
    const char *cpu = strstr(log, "process_cpu_s=");
    if (cpu)
        printf("relay: %.*s\n", (int)strcspn(cpu, "\n"), cpu);

    /* Timing: never below the smallest model delay, median excess under 1 ms. */
    assert_true(fc.min_delay_ms >= (double)(fspec.delay_ns - fspec.jitter_ns) / 1e6 - 0.05);
    assert_true(bc.min_delay_ms >= (double)(bspec.delay_ns - bspec.jitter_ns) / 1e6 - 0.05);
    assert_true(fc.median_err_ms < 1.0);
    assert_true(bc.median_err_ms < 1.0);

    /* Loss fraction within four standard errors of the spec. */
    double p = drths_impair_spec_mean_loss(&fspec);
    assert_true(fabs((double)fc.lost / n - p) <= 4 * sqrt(p * (1 - p) / n) + 1e-12);
    p = drths_impair_spec_mean_loss(&bspec);
    assert_true(fabs((double)bc.lost / echoed - p) <= 4 * sqrt(p * (1 - p) / echoed) + 1e-12);

    /* The relay's counters are what the test saw. */
    assert_int_equal(counter(log, "forward", "received"), n);
    assert_int_equal(counter(log, "forward", "forwarded"), fc.delivered);
    assert_int_equal(counter(log, "forward", "dropped_random"), fc.lost);
    assert_int_equal(counter(log, "forward", "dropped_overflow"), 0);
    assert_int_equal(counter(log, "forward", "duplicated"), 0);
    assert_int_equal(counter(log, "forward", "pending"), 0);
    assert_int_equal(counter(log, "forward", "reordered"), fc.reordered);
    assert_int_equal(counter(log, "backward", "received"), echoed);
    assert_int_equal(counter(log, "backward", "forwarded"), bc.delivered);
    assert_int_equal(counter(log, "backward", "dropped_random"), bc.lost);
    assert_int_equal(counter(log, "backward", "reordered"), bc.reordered);
    assert_int_equal(counter(log, "backward", "dropped_no_client"), 0);

    /* --stats has the same numbers. */
    FILE *f = fopen(stats, "r");
    assert_non_null(f);
    static char json[1 << 14];
    size_t jl = fread(json, 1, sizeof json - 1, f);
    json[jl] = '\0';
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "\"received\": %d,", n);
    assert_non_null(strstr(json, want));
    snprintf(want, sizeof want, "\"forwarded\": %ld,", fc.delivered);
    assert_non_null(strstr(json, want));
    snprintf(want, sizeof want, "\"seed\": %u,", SEED);
    assert_non_null(strstr(json, want));

    free(errs);
    free(fdelay);
    free(bdelay);
    free(client_tx);
    free(s.echo_order);
    free(s.echo_rx);
    free(s.echo_tx);
    free(s.client_order);
    free(s.client_rx);
    close(s.echo_fd);
    close(s.client_fd);
}

/* --change steps the forward delay mid-run (a 40 -> 70 ms route change, scaled down). */
static void test_change(void **state)
{
    (void)state;
    const char *bdir = getenv("DRTHS_BUILD_DIR");
    char exe[4096];
    snprintf(exe, sizeof exe, "%s/drths-impair", bdir ? bdir : ".");
    uint16_t eport, cport;
    int efd = udp_socket(&eport), cfd = udp_socket(&cport);
    int out[2];
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%u", eport);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], 1);
        execl(exe, exe, "--listen", "127.0.0.1:0", "--target", target, "--forward",
              "delay 10ms", "--change", "0.3:forward:delay 30ms", "--seed", "1", "--duration",
              "60", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    static char log[1 << 14];
    log[0] = '\0';
    assert_true(read_until(out[0], log, sizeof log, "\n", 5000));
    const char *at = strstr(log, "listening on 127.0.0.1:");
    assert_non_null(at);
    struct sockaddr_in relay = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)atoi(at + 23)),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int64_t start = mono_ns();
    double before = 0, after = 0;
    int nb = 0, na = 0;
    /* One datagram every 50 ms for 0.7 s; each waits for its own arrival at the echo. */
    for (int i = 0; i < 14; i++) {
        msg_t m = {.magic = MAGIC, .seq = (uint32_t)i};
        m.client_tx_ns = mono_ns();
        assert_int_equal(sendto(cfd, &m, sizeof m, 0, (struct sockaddr *)&relay, sizeof relay),
                         sizeof m);
        struct pollfd pf = {.fd = efd, .events = POLLIN};
        assert_int_equal(poll(&pf, 1, 2000), 1);
        msg_t r;
        int64_t rx;
        assert_int_equal(recv_stamped(efd, &r, sizeof r, NULL, NULL, &rx), sizeof r);
        double ms = (double)(rx - m.client_tx_ns) / 1e6;
        double since = (double)(m.client_tx_ns - start) / 1e9;
        if (since < 0.25) {
            before += ms;
            nb++;
        } else if (since > 0.40) {
            after += ms;
            na++;
        }
        struct pollfd none;
        poll(&none, 0, 50 - (int)ms > 0 ? 50 - (int)ms : 0);
    }
    kill(pid, SIGTERM);
    read_until(out[0], log, sizeof log, NULL, 5000);
    int status;
    waitpid(pid, &status, 0);
    close(out[0]);
    assert_true(nb >= 3 && na >= 3);
    assert_true(fabs(before / nb - 10.0) < 1.0);
    assert_true(fabs(after / na - 30.0) < 1.0);
    assert_non_null(strstr(log, "spec_changes=1"));
    assert_non_null(strstr(log, "spec \"delay 30ms\""));
    close(efd);
    close(cfd);
}

/* Bad options are refused with a message naming the token, before anything is opened. */
static void test_bad_options(void **state)
{
    (void)state;
    const char *bdir = getenv("DRTHS_BUILD_DIR");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s/drths-impair' --listen 127.0.0.1:0 --target 127.0.0.1:9 "
             "--forward 'delay 40ms 5xs' 2>&1",
             bdir ? bdir : ".");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char buf[1024] = "";
    size_t got = fread(buf, 1, sizeof buf - 1, p);
    buf[got] = '\0';
    int st = pclose(p);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    assert_non_null(strstr(buf, "token 3 \"5xs\" (delay jitter)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay),
        cmocka_unit_test(test_change),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
