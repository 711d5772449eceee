/* drths-physical --openfresco against clients that stall it (docs/openfresco.md, "Time-outs"),
 * on 127.0.0.1, the site a child process:
 *  - a client that connects and sends nothing is dropped after --openfresco-setup-timeout with a
 *    warning, and the site goes on waiting: a proper client then runs a session to its DIE
 *    (exit 0, clients_dropped 1 in summary.json);
 *  - while a client is connected the listening socket is closed: a second client gets
 *    ECONNREFUSED at once instead of waiting in the backlog;
 *  - a client that trickles its set-up one byte at a time is dropped too (the deadline is on the
 *    whole set-up, not on each receive), and so is one that connects and closes at once;
 *  - a client that goes silent after two answered steps puts the site in HOLD after
 *    --openfresco-step-timeout, with a sentence saying what it waited for (exit 1), and the
 *    connection is closed after as long again of silence (the site would have answered NaN);
 *  - the accepted socket has TCP keepalive (its keepalive timer shows in /proc/net/tcp).
 * Every wait is bounded (poll deadlines, SO_RCVTIMEO, alarm), so a site without these time-outs
 * fails the test instead of hanging it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/rtclock.h"
#include "common/platform/tcp.h"
#include "site-physical/openfresco.h"

#define DS 256
#define ALARM_S 60 /* the whole test program, far above the few seconds it needs */

typedef struct site {
    pid_t pid;
    int out; /* the child's stdout and stderr */
    int port;
    char dir[256];   /* run folder */
    char log[32768]; /* everything it printed */
    size_t log_len;
    int exit_code;
} site_t;

static uint8_t buf[8 * DS + 64];

/* Reads what the site printed until pattern appears in the log or timeout_s passes. Returns 1
 * if it appeared. */
static int wait_for(site_t *s, const char *pattern, double timeout_s)
{
    int64_t deadline = drths_now_ns() + (int64_t)(timeout_s * 1e9);
    while (!strstr(s->log, pattern)) {
        int64_t left_ms = (deadline - drths_now_ns()) / 1000000;
        if (left_ms <= 0)
            return 0;
        struct pollfd p = {s->out, POLLIN, 0};
        if (poll(&p, 1, (int)left_ms) <= 0)
            continue;
        ssize_t k = read(s->out, s->log + s->log_len, sizeof s->log - 1 - s->log_len);
        if (k <= 0)
            return strstr(s->log, pattern) != NULL; /* the site ended */
        s->log_len += (size_t)k;
        s->log[s->log_len] = '\0';
    }
    return 1;
}

static void site_start(site_t *s, const char *variant, const char *setup_timeout,
                       const char *step_timeout)
{
    memset(s, 0, sizeof *s);
    const char *src = getenv("DRTHS_SOURCE_DIR");
    const char *bld = getenv("DRTHS_BUILD_DIR");
    char exe[512], exp[512], tmp[] = "/tmp/drths-test-ofrt-XXXXXX";
    snprintf(exe, sizeof exe, "%s/drths-physical", bld ? bld : ".");
    snprintf(exp, sizeof exp, "%s/tests/data/openfresco/elastic.yaml", src ? src : "..");
    assert_non_null(mkdtemp(tmp));
    snprintf(s->dir, sizeof s->dir, "%s/run", tmp);
    int p[2];
    assert_int_equal(pipe(p), 0);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a test killed by its alarm */
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(exe, exe, "--experiment", exp, "--openfresco", "127.0.0.1:0", "--openfresco-variant",
              variant, "--step-duration", "0.004", "--openfresco-setup-timeout", setup_timeout,
              "--openfresco-step-timeout", step_timeout, "--wait-timeout", "20", "--out", s->dir,
              "--quiet", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    s->out = p[0];
    assert_true(wait_for(s, "listening on TCP 127.0.0.1:", 10));
    s->port = atoi(strstr(s->log, "listening on TCP 127.0.0.1:") + 27);
    assert_true(s->port > 0);
}

/* Waits for the site's end and requires its exit status (the log goes to the output if not). */
static void site_end(site_t *s, int exit_code)
{
    wait_for(s, "\n\n-never printed-", 20); /* reads to the end of its output */
    close(s->out);
    int st = 0;
    assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
    assert_true(WIFEXITED(st));
    s->exit_code = WEXITSTATUS(st);
    if (s->exit_code != exit_code)
        print_error("%s", s->log);
    assert_int_equal(s->exit_code, exit_code);
}

/* Connects to the site; returns the descriptor, or -errno when the connection is refused. */
static int connect_site(const site_t *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct timeval tv = {20, 0}; /* a site that never answers fails the test, not hangs it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_vec(int fd, const double *v, size_t nv)
{
    size_t n = drths_ofr_build_vector(v, nv, DS, buf, sizeof buf);
    assert_int_equal(drths_tcp_send_all(fd, buf, n), 0);
}

/* GenericTCP set-up: the sizes (one displacement; displacement and force measured). */
static void generic_setup(int fd)
{
    const int32_t id[11] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, DS};
    size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
    assert_int_equal(drths_tcp_send_all(fd, buf, n), 0);
}

/* One GenericTCP step: trial d, then getDaqResponse, answered [d, f]. */
static void generic_step(int fd, double d)
{
    const double trial[2] = {3.0, d};
    send_vec(fd, trial, 2);
    const double daq[1] = {6.0};
    send_vec(fd, daq, 1);
    assert_int_equal(drths_tcp_recv(fd, buf, 8 * DS, 0), 8 * DS);
    double got;
    memcpy(&got, buf, sizeof got);
    assert_true(got == d);
}

/* 1 when the connection the site holds towards client_port has its keepalive timer running
 * (/proc/net/tcp's "tr" field 2 on an ESTABLISHED socket). */
static int site_keepalive_timer(int site_port, int client_port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return -1;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned lp, rp, st, tr;
        if (sscanf(line, " %*d: %*8X:%4X %*8X:%4X %2X %*8X:%*8X %2X:", &lp, &rp, &st, &tr) == 4 &&
            (int)lp == site_port && (int)rp == client_port && st == 1)
            found = tr == 2 ? 1 : found;
    }
    fclose(f);
    return found;
}

static int local_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.sin_port);
}

static void test_silent_client_dropped(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "auto", "0.5", "10");
    int silent = connect_site(&s);
    assert_true(silent >= 0);
    assert_true(wait_for(&s, "connected (no other until it ends)", 10));
    /* The listener is closed while a client is served: refused at once, not queued. */
    assert_int_equal(connect_site(&s), -ECONNREFUSED);
    assert_true(wait_for(&s,
                         "did not complete its set-up within 0.5 s "
                         "(--openfresco-setup-timeout): dropped; waiting for another client",
                         10));
    /* The silent client sees its connection closed. */
    assert_int_equal(drths_tcp_recv(silent, buf, 1, 0), 0);
    close(silent);
    /* A trickling client: one byte of its set-up every 0.1 s, never complete in 0.5 s. */
    int slow = -ECONNREFUSED;
    for (int i = 0; i < 100 && slow == -ECONNREFUSED; i++) { /* the listener is reopened */
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        slow = connect_site(&s);
    }
    assert_true(slow >= 0);
    const int32_t id[11] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, DS};
    size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
    int sent = 0;
    for (size_t i = 0; i < n && i < 10; i++) {
        struct timespec ts = {0, 100000000};
        if (send(slow, buf + i, 1, MSG_NOSIGNAL) != 1)
            break;
        sent++;
        nanosleep(&ts, NULL);
    }
    assert_true(wait_for(&s, "dropped; waiting for another client\n", 10));
    assert_true(sent < 10); /* dropped before it could finish trickling */
    close(slow);
    /* A client that connects and closes at once (a port scan, a health check): dropped too. */
    int quick = -ECONNREFUSED;
    for (int i = 0; i < 100 && quick == -ECONNREFUSED; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        quick = connect_site(&s);
    }
    assert_true(quick >= 0);
    close(quick);
    assert_true(wait_for(&s,
                         "closed the connection before completing its set-up; waiting for "
                         "another client",
                         10));
    /* A proper client after the two: a session to its DIE. */
    int fd = -ECONNREFUSED;
    for (int i = 0; i < 100 && fd == -ECONNREFUSED; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        fd = connect_site(&s);
    }
    assert_true(fd >= 0);
    generic_setup(fd);
    for (int k = 1; k <= 3; k++)
        generic_step(fd, 0.001 * k);
    const double die[1] = {99.0};
    send_vec(fd, die, 1);
    close(fd);
    site_end(&s, 0);
    assert_non_null(strstr(s.log, "ended the session (DIE) after 3 steps"));
}

static void test_silence_after_setup_holds(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "generic", "10", "0.5");
    int fd = connect_site(&s);
    assert_true(fd >= 0);
    generic_setup(fd);
    generic_step(fd, 0.001);
    generic_step(fd, 0.002);
    /* Keepalive on the accepted socket: its timer runs while the link is idle (a loopback ACK
     * may still be outstanding right after the reply: look a few times). */
    int ka = 0;
    for (int i = 0; i < 50 && ka == 0; i++) {
        ka = site_keepalive_timer(s.port, local_port(fd));
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (ka < 0)
        print_message("no /proc/net/tcp: keepalive not checked\n");
    else
        assert_int_equal(ka, 1);
    /* Then silence: HOLD after 0.5 s; the site would answer further requests with NaN, but the
     * client stays silent, so after another 0.5 s (the step timeout, below the 10 s cap) the
     * connection is closed; exit 1. */
    assert_true(wait_for(&s,
                         "sent no new target for 0.5 s after step 2 was reached and "
                         "answered (--openfresco-step-timeout)",
                         10));
    assert_int_equal(drths_tcp_recv(fd, buf, 1, 0), 0);
    close(fd);
    site_end(&s, 1);
    assert_non_null(strstr(s.log, "HOLD"));
    assert_non_null(strstr(s.log, "answering the OpenFresco client's requests with NaN until it "
                                  "sends DIE or closes (up to 0.5 s of silence; Ctrl-C ends the wait)"));
    assert_non_null(strstr(s.log, "0 requests answered with NaN; the client went silent and the "
                                  "site closed the connection"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(ALARM_S);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_client_dropped),
        cmocka_unit_test(test_silence_after_setup_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
