/* drths-physical --openfresco against a test client written from docs/openfresco.md (The wire
 * protocol), on 127.0.0.1: both wire variants (ShadowSite/actor, GenericTCP, genericClient), the
 * quirks (a getDaqResponse before any trial, stale values after the action code, DIE with and
 * without a reply, a client gone without DIE), a trial far beyond the displacement limit, and the
 * forces of an elastic specimen (tests/data/openfresco/elastic.yaml: k = 2 MN/m, ideal actuator, no
 * noise), which must be k·d for every trial once the site answers; genericClient's repeats (one
 * step per commit), its Newton iterations and the iteration limit. The site runs as a child
 * process; the assertions are on protocol, values, exit codes and summary.json, not on timing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/platform/tcp.h"
#include "site-physical/openfresco.h"

#define K_N_PER_M 2.0e6
#define DS 256

typedef struct site {
    pid_t pid;
    FILE *out; /* the child's stdout and stderr */
    int port;
    char dir[256];   /* run folder */
    char log[16384]; /* everything it printed */
    size_t log_len;
    int exit_code;
} site_t;

static uint8_t buf[8 * DS + 64];

/* Starts the site; extra_opt and extra_val, when not NULL, are one more option. */
static void site_start_with(site_t *s, const char *variant, const char *step, const char *extra_opt,
                            const char *extra_val)
{
    memset(s, 0, sizeof *s);
    const char *src = getenv("DRTHS_SOURCE_DIR");
    const char *bld = getenv("DRTHS_BUILD_DIR");
    char exe[512], exp[512], tmp[] = "/tmp/drths-test-ofr-XXXXXX";
    snprintf(exe, sizeof exe, "%s/drths-physical", bld ? bld : ".");
    snprintf(exp, sizeof exp, "%s/tests/data/openfresco/elastic.yaml", src ? src : "..");
    assert_non_null(mkdtemp(tmp));
    snprintf(s->dir, sizeof s->dir, "%s/run", tmp);
    int p[2];
    assert_int_equal(pipe(p), 0);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        execl(exe, exe, "--experiment", exp, "--openfresco", "127.0.0.1:0", "--openfresco-variant",
              variant, "--step-duration", step, "--wait-timeout", "20", "--out", s->dir, "--quiet",
              extra_opt, extra_val, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    s->out = fdopen(p[0], "r");
    assert_non_null(s->out);
    char line[512];
    while (fgets(line, sizeof line, s->out)) {
        size_t n = strlen(line);
        if (s->log_len + n < sizeof s->log) {
            memcpy(s->log + s->log_len, line, n + 1);
            s->log_len += n;
        }
        const char *k = strstr(line, "listening on TCP 127.0.0.1:");
        if (k) {
            s->port = atoi(k + strlen("listening on TCP 127.0.0.1:"));
            break;
        }
    }
    assert_true(s->port > 0);
}

static void site_start(site_t *s, const char *variant, const char *step)
{
    site_start_with(s, variant, step, NULL, NULL);
}

/* Reads the rest of the output and the exit status. */
static void site_wait(site_t *s)
{
    char line[512];
    while (fgets(line, sizeof line, s->out)) {
        size_t n = strlen(line);
        if (s->log_len + n < sizeof s->log) {
            memcpy(s->log + s->log_len, line, n + 1);
            s->log_len += n;
        }
    }
    fclose(s->out);
    int st = 0;
    assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
    assert_true(WIFEXITED(st));
    s->exit_code = WEXITSTATUS(st);
}

/* Waits for the site and requires its exit status; the site's log goes to the test output when
 * it differs. */
static void site_end(site_t *s, int exit_code)
{
    site_wait(s);
    if (s->exit_code != exit_code)
        print_error("%s", s->log);
    assert_int_equal(s->exit_code, exit_code);
}

static char summary[65536];

static void read_summary(const site_t *s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/summary.json", s->dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(summary, 1, sizeof summary - 1, f);
    summary[n] = '\0';
    fclose(f);
}

/* The integer value of "key": in summary.json (the first occurrence). */
static long long summary_int(const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(summary, pat);
    if (!p) {
        print_error("summary.json has no %s\n", key);
        fail();
    }
    return strtoll(p + strlen(pat), NULL, 10);
}

static int connect_site(const site_t *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)s->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {20, 0}; /* a site that never answers fails the test, not hangs it */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_bytes(int fd, const uint8_t *b, size_t n)
{
    assert_int_equal(drths_tcp_send_all(fd, b, n), 0);
}

static void send_vec(int fd, const double *v, size_t nv)
{
    size_t n = drths_ofr_build_vector(v, nv, DS, buf, sizeof buf);
    assert_int_equal(n, 8 * DS);
    send_bytes(fd, buf, n);
}

/* Returns the bytes read: n, or fewer when the site closed the connection (0 on an error or
 * after the 20 s receive timeout). */
static size_t recv_bytes(int fd, uint8_t *b, size_t n)
{
    ssize_t k = drths_tcp_recv(fd, b, n, 0);
    return k < 0 ? 0 : (size_t)k;
}

static void recv_vec(int fd, double *v)
{
    assert_int_equal(recv_bytes(fd, buf, 8 * DS), 8 * DS);
    memcpy(v, buf, 8 * DS);
}

/* A vector read as OpenSees's and OpenFresco's TCP_Socket::recvVector reads it: recv() until
 * 8·dataSize bytes, subtracting what each call returned and never looking for 0 (end of file)
 * or -1. On a closed connection that loop never ends (OpenSees spins); here it is bounded, and
 * the test fails when the bound is reached, i.e. when the site closed instead of answering. */
static void opensees_recv_vector(int fd, double *v)
{
    long nleft = 8 * DS, calls = 0;
    uint8_t *p = buf;
    while (nleft > 0 && calls < 100000) {
        ssize_t nread = recv(fd, p, (size_t)nleft, 0);
        nleft -= nread;
        p += nread;
        calls++;
    }
    if (nleft != 0)
        print_error("TCP_Socket::recvVector would spin: %ld recv() calls, %ld bytes left\n", calls,
                    nleft);
    assert_int_equal(nleft, 0);
    memcpy(v, buf, 8 * DS);
}

/* The answer to a request after the site has ended the session: a whole vector, read as
 * OpenSees reads it, its first n values NaN. */
static void recv_nan(int fd, int n)
{
    double v[DS];
    opensees_recv_vector(fd, v);
    for (int i = 0; i < n; i++)
        assert_true(isnan(v[i]));
}

/* After DIE the site closes: an orderly close (0), not the test's 20 s receive timeout. */
static void assert_closed(int fd)
{
    assert_int_equal(drths_tcp_recv(fd, buf, 1, 0), 0);
}

/* The string value of "key": in summary.json (the first occurrence) is `want`. */
static void assert_summary_string(const char *key, const char *want)
{
    char pat[160];
    snprintf(pat, sizeof pat, "\"%s\": \"%s\"", key, want);
    if (!strstr(summary, pat)) {
        print_error("summary.json has no %s\n%s\n", pat, summary);
        fail();
    }
}

static double trial_disp(int k)
{
    return 0.02 * sin(2.0 * M_PI * k / 40.0) * (1.0 - exp(-k / 10.0));
}

static void shadow_handshake(int fd, const int32_t sizes[10])
{
    double v[DS];
    int32_t one = 1, back = 0;
    send_bytes(fd, (const uint8_t *)&one, 4);
    assert_int_equal(recv_bytes(fd, (uint8_t *)&back, 4), 4);
    assert_int_equal(back, 1);
    const double open[3] = {1.0, 5.0, 2.8};
    send_vec(fd, open, 3);
    recv_vec(fd, v);
    assert_true(v[0] == 0.0 && v[2] == 2.8); /* the client exits unless element 2 is 2.8 */
    const double setup[2] = {2.0, DS};
    size_t n = drths_ofr_build_vector(setup, 2, DS, buf, sizeof buf);
    n += drths_ofr_build_ids(sizes, 10, buf + n, sizeof buf - n);
    send_bytes(fd, buf, n);
}

/* ShadowSite session with the quirks; every answer must be the target and k·target. */
static void test_shadow_elastic(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "auto", "0.004");
    int fd = connect_site(&s);
    const int32_t sizes[10] = {1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    shadow_handshake(fd, sizes);
    double v[DS];
    /* Quirk: getDaqResponse before any trial, with stale values after the action code. */
    const double early[4] = {6.0, 0.5, 0.5, 0.5};
    send_vec(fd, early, 4);
    recv_vec(fd, v);
    assert_true(v[0] == 0.0 && v[3] == 0.0);
    const int steps = 150;
    double dprev = 0.0;
    for (int k = 1; k <= steps; k++) {
        double d = trial_disp(k);
        const double trial[5] = {3.0, d, 0.1, -2.0, 0.01 * k};
        send_vec(fd, trial, 5);
        const double daq[4] = {6.0, 9.0, 9.0, 9.0}; /* stale values */
        send_vec(fd, daq, 4);
        recv_vec(fd, v);
        /* [d, v, a, f, t] by the measurement sizes [1,1,1,1,1]. */
        assert_true(fabs(v[0] - d) < 1e-12);
        assert_true(fabs(v[3] - K_N_PER_M * d) < 1e-5);
        /* The measured velocity: the backward difference of the measured displacements. */
        assert_true(fabs(v[1] - (d - dprev) / 0.004) < 1e-9);
        dprev = d;
        assert_true(v[5] == 0.0);
        const double commit[6] = {5.0, 7.0, 7.0, 7.0, 7.0, 0.02 * k}; /* the time is not trusted */
        send_vec(fd, commit, 6);
    }
    const double die[2] = {99.0, 5.0};
    send_vec(fd, die, 2);
    opensees_recv_vector(fd, v); /* ShadowExpSite's destructor reads the answer to DIE */
    assert_true(v[0] == 4.0 && v[1] == 1.0);
    close(fd);
    site_end(&s, 0);
    assert_non_null(strstr(s.log, "shadow variant"));
    assert_non_null(strstr(s.log, "ended the session (DIE) after 150 steps"));
    read_summary(&s);
    assert_int_equal(summary_int("targets"), steps);
    assert_int_equal(summary_int("steps_reached"), steps);
    assert_int_equal(summary_int("measurement_replies"), steps + 1);
    assert_non_null(strstr(summary, "\"active\": false"));
}

/* GenericTCP: ID, [3, d], [6] -> [d, f], no commit, DIE without reply. */
static void test_generic_tcp(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "auto", "0.004");
    int fd = connect_site(&s);
    const int32_t id[11] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0, DS};
    size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
    send_bytes(fd, buf, n);
    double v[DS];
    for (int k = 1; k <= 60; k++) {
        double d = -trial_disp(k);
        const double trial[2] = {3.0, d};
        send_vec(fd, trial, 2);
        const double daq[1] = {6.0};
        send_vec(fd, daq, 1);
        recv_vec(fd, v);
        assert_true(fabs(v[0] - d) < 1e-12);
        assert_true(fabs(v[1] - K_N_PER_M * d) < 1e-5);
        assert_true(v[2] == 0.0);
    }
    const double die[1] = {99.0};
    send_vec(fd, die, 1);
    close(fd); /* no reply expected: the GenericTCP client closes at once */
    site_end(&s, 0);
    assert_non_null(strstr(s.log, "generic variant"));
    read_summary(&s);
    assert_int_equal(summary_int("steps_reached"), 60);
}

/* OpenSees element genericClient with n = 1: [3, d, v, a, t], [10] force, [14]/[15]
 * matrices, [5] commit, [99] without reply. The variant is given, not detected. */
static void test_generic_client_element(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "generic", "0.004");
    int fd = connect_site(&s);
    const int32_t id[11] = {1, 1, 1, 0, 1, 0, 0, 0, 1, 0, DS};
    size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
    send_bytes(fd, buf, n);
    double v[DS];
    const double mass[1] = {15.0};
    send_vec(fd, mass, 1);
    recv_vec(fd, v);
    assert_true(v[0] == 0.0);
    for (int k = 1; k <= 40; k++) {
        double d = trial_disp(k);
        const double trial[5] = {3.0, d, 0.0, 0.0, 0.01 * k};
        send_vec(fd, trial, 5);
        const double force[1] = {10.0};
        send_vec(fd, force, 1);
        recv_vec(fd, v);
        assert_true(fabs(v[0] - K_N_PER_M * d) < 1e-5);
        assert_true(v[1] == 0.0);
        const double damp[1] = {14.0};
        send_vec(fd, damp, 1);
        recv_vec(fd, v);
        assert_true(v[0] == 0.0);
        const double commit[1] = {5.0};
        send_vec(fd, commit, 1);
    }
    const double die[1] = {99.0};
    send_vec(fd, die, 1);
    close(fd);
    site_end(&s, 0);
    read_summary(&s);
    assert_int_equal(summary_int("steps_reached"), 40);
}

/* genericClient sizes; then the initial stiffness must be the elastic specimen's. */
static void generic_client_setup(int fd)
{
    const int32_t id[11] = {1, 1, 1, 0, 1, 0, 0, 0, 1, 0, DS};
    size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
    send_bytes(fd, buf, n);
    double v[DS];
    const double stiff[1] = {12.0};
    send_vec(fd, stiff, 1);
    recv_vec(fd, v);
    assert_true(v[0] == K_N_PER_M);
}

/* A genericClient trial [3, d, v, a, t] and getForce, whose answer must be k·d: the site has
 * reached d (it moved there, or was there for a repeat). */
static void trial_and_force(int fd, double d, double t)
{
    double v[DS];
    const double trial[5] = {3.0, d, 0.0, 0.0, t};
    send_vec(fd, trial, 5);
    const double force[1] = {10.0};
    send_vec(fd, force, 1);
    recv_vec(fd, v);
    assert_true(fabs(v[0] - K_N_PER_M * d) < 1e-5);
}

static void send_trial(int fd, double d, double t)
{
    const double trial[5] = {3.0, d, 0.0, 0.0, t};
    send_vec(fd, trial, 5);
}

static void send_commit(int fd)
{
    const double commit[1] = {5.0};
    send_vec(fd, commit, 1);
}

/* genericClient with an explicit integrator, in OpenSees's order: per step the repeat of the
 * last trial with getForce, the new trial, commitState. A repeat is not a step: the site counts
 * one step per commit (the first step, with no new target, a step in place), not two. */
static void test_generic_client_repeats(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "generic", "0.004");
    int fd = connect_site(&s);
    generic_client_setup(fd);
    const int steps = 40;
    double d[41];
    d[0] = d[1] = 0.0; /* the first step does not move: a step in place */
    for (int k = 2; k <= steps; k++)
        d[k] = trial_disp(k - 1);
    for (int k = 1; k <= steps; k++) {
        trial_and_force(fd, d[k - 1], 0.01 * k);
        send_trial(fd, d[k], 0.01 * k);
        send_commit(fd);
    }
    trial_and_force(fd, d[steps], 0.01 * (steps + 1));
    const double die[1] = {99.0};
    send_vec(fd, die, 1);
    close(fd);
    site_end(&s, 0);
    read_summary(&s);
    assert_int_equal(summary_int("targets"), 2 * steps + 1);
    assert_int_equal(summary_int("repeats"), steps + 2);
    assert_int_equal(summary_int("commits"), steps);
    assert_int_equal(summary_int("standing_steps"), 1);
    assert_int_equal(summary_int("steps_reached"), steps);
    assert_int_equal(summary_int("iterations"), 0);
    assert_non_null(strstr(summary, "\"steps_from\": \"commits\""));
}

/* genericClient with Newton iterations: three new trials per step, each answered with k times
 * itself (the site reached it), one step per commit and two iterations each. Steps of 10 ms
 * keep the motion (0.3 m/s at most) well inside the velocity limit. */
static void test_generic_client_iterations(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "generic", "0.01");
    int fd = connect_site(&s);
    generic_client_setup(fd);
    const int steps = 30;
    double x = 0.0;
    for (int k = 1; k <= steps; k++) {
        double t = 0.01 * k, target = trial_disp(k);
        trial_and_force(fd, x, t); /* the repeat */
        trial_and_force(fd, target + 0.25 * (x - target), t);
        trial_and_force(fd, target - 0.5 * (x - target), t);
        trial_and_force(fd, target, t);
        send_commit(fd);
        x = target;
    }
    trial_and_force(fd, x, 0.01 * (steps + 1));
    const double die[1] = {99.0};
    send_vec(fd, die, 1);
    close(fd);
    site_end(&s, 0);
    read_summary(&s);
    assert_int_equal(summary_int("steps_reached"), steps);
    assert_int_equal(summary_int("iterations"), 2 * steps);
    assert_int_equal(summary_int("max_iterations_in_a_step"), 2);
    assert_int_equal(summary_int("repeats"), steps + 1);
}

/* More iterations in one step than --openfresco-max-iterations: HOLD naming the option, exit
 * 1. The pending getForce and every request after it are answered with NaN, the connection
 * kept until the client's DIE: as OpenSees's Newton goes on, each iteration's force is NaN, so
 * the displacement increment is NaN and CTestNormDispIncr's `norm <= tol` never holds; after
 * its iteration limit (10 here) analyze returns an error, and the script's wipe sends DIE
 * (genericClient: no answer), on which the site closes. */
static void test_too_many_iterations(void **state)
{
    (void)state;
    site_t s;
    site_start_with(&s, "generic", "0.004", "--openfresco-max-iterations", "3");
    int fd = connect_site(&s);
    generic_client_setup(fd);
    trial_and_force(fd, 0.0, 0.01);
    for (int i = 1; i <= 4; i++) /* the step's target and three iterations: allowed */
        trial_and_force(fd, 0.0001 * i, 0.01);
    send_trial(fd, 0.0005, 0.01); /* the fourth iteration */
    const double force[1] = {10.0};
    send_vec(fd, force, 1);
    recv_nan(fd, 1);
    const double tol = 1e-9, k = K_N_PER_M;
    double d = 0.0005;
    int converged = 0;
    for (int it = 0; it < 10 && !converged; it++) {
        double v[DS];
        send_trial(fd, d, 0.01);
        send_vec(fd, force, 1);
        opensees_recv_vector(fd, v);
        double du = (0.0 - v[0]) / k; /* the increment Newton solves for */
        converged = fabs(du) <= tol;
        d += du;
    }
    assert_false(converged);
    assert_true(isnan(d));
    /* The matrices too, as genericClient asks for them. */
    const double stiff[1] = {13.0}, damp[1] = {14.0};
    send_vec(fd, stiff, 1);
    recv_nan(fd, 1);
    send_vec(fd, damp, 1);
    recv_nan(fd, 1);
    const double die[1] = {99.0};
    send_vec(fd, die, 1);
    assert_closed(fd);
    close(fd);
    site_end(&s, 1);
    assert_non_null(strstr(s.log, "more than 3 iterations in analysis step 1"));
    assert_non_null(strstr(s.log, "--openfresco-max-iterations"));
    assert_non_null(strstr(s.log, "13 requests answered with NaN; the client then ended with DIE"));
    read_summary(&s);
    assert_summary_string("client", "die");
    assert_int_equal(summary_int("nan_replies"), 13);
}

/* A client killed mid-run sends nothing: the site holds, writes its records, exits 1. */
static void test_client_killed(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "shadow", "0.004");
    int fd = connect_site(&s);
    const int32_t sizes[10] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0};
    shadow_handshake(fd, sizes);
    double v[DS];
    for (int k = 1; k <= 20; k++) {
        const double trial[2] = {3.0, trial_disp(k)};
        send_vec(fd, trial, 2);
        const double daq[1] = {6.0};
        send_vec(fd, daq, 1);
        recv_vec(fd, v);
    }
    /* The next trial, then gone (as a killed process: the kernel closes the socket). */
    const double trial[2] = {3.0, trial_disp(21)};
    send_vec(fd, trial, 2);
    close(fd);
    site_end(&s, 1);
    assert_non_null(strstr(s.log, "closed the connection without DIE"));
    assert_non_null(strstr(s.log, "HOLD"));
    read_summary(&s);
    assert_non_null(strstr(summary, "\"active\": true"));
    assert_non_null(strstr(summary, "PEER_LOST"));
    assert_true(summary_int("rows") > 0);
}

/* A trial far beyond the displacement limit (0.1 m): refused when it arrives, before any
 * command towards it is made (issue 28): HOLD with a clear line naming the target and the
 * limit, never a jump (the largest drive step in HOLD within the ramp rate), exit 1. The
 * pending getDaqResponse is answered with NaN, and so are the steps an explicit analysis goes on
 * with (it has no convergence test: it runs to its end with NaN), until its DIE, which is
 * answered as usual ([4, actorTag]) before the site closes. */
static void test_limit(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "shadow", "0.02");
    int fd = connect_site(&s);
    const int32_t sizes[10] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 0};
    shadow_handshake(fd, sizes);
    double v[DS];
    for (int k = 1; k <= 5; k++) {
        const double trial[2] = {3.0, 0.001 * k};
        send_vec(fd, trial, 2);
        const double daq[1] = {6.0};
        send_vec(fd, daq, 1);
        recv_vec(fd, v);
        assert_true(fabs(v[0] - 0.001 * k) < 1e-12);
    }
    const double trial[2] = {3.0, 0.25};
    send_vec(fd, trial, 2);
    const double daq[1] = {6.0};
    send_vec(fd, daq, 1);
    recv_nan(fd, 2); /* the displacement and the force */
    for (int k = 0; k < 3; k++) {
        const double nan_trial[2] = {3.0, NAN}, commit[2] = {5.0, 0.1};
        send_vec(fd, commit, 2);
        send_vec(fd, nan_trial, 2);
        send_vec(fd, daq, 1);
        recv_nan(fd, 2);
    }
    const double die[2] = {99.0, 5.0};
    send_vec(fd, die, 2);
    opensees_recv_vector(fd, v); /* ShadowExpSite's destructor reads the answer to DIE */
    assert_true(v[0] == 4.0 && v[1] == 1.0);
    assert_closed(fd);
    close(fd);
    site_end(&s, 1);
    assert_non_null(strstr(s.log, "HOLD at tick"));
    assert_non_null(strstr(s.log, "4 requests answered with NaN; the client then ended with DIE"));
    assert_non_null(strstr(s.log, "OpenFresco target 0.25 m"));
    assert_non_null(strstr(s.log, "physical.limit_"));
    read_summary(&s);
    assert_non_null(strstr(summary, "LIMIT"));
    const char *p = strstr(summary, "\"max_drive_step_m\":");
    const char *q = strstr(summary, "\"max_drive_step_allowed_m\":");
    assert_non_null(p);
    assert_non_null(q);
    double step = strtod(p + strlen("\"max_drive_step_m\":"), NULL);
    double allowed = strtod(q + strlen("\"max_drive_step_allowed_m\":"), NULL);
    assert_true(step <= allowed * (1.0 + 1e-9));
    assert_summary_string("client", "die");
    assert_int_equal(summary_int("nan_replies"), 4);
}

/* A protocol error (a big-endian probe) ends the session with the reason. */
static void test_protocol_error(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "shadow", "0.004");
    int fd = connect_site(&s);
    const uint8_t be[4] = {0, 0, 0, 1};
    send_bytes(fd, be, 4);
    assert_int_equal(recv_bytes(fd, buf, 4), 0);
    close(fd);
    site_end(&s, 1);
    assert_non_null(strstr(s.log, "endianness probe"));
}

/* A forced variant the client does not speak: the site names both at once, never a deadlock,
 * and ends the client rather than closing on it (OpenSees would spin on the closed connection):
 * ShadowSite's probe is answered and its open gets a version other than 2.8, on which
 * ShadowExpSite exits; a generic client gets NaN for its requests until its DIE. */
static void test_variant_mismatch(void **state)
{
    (void)state;
    site_t s;
    site_start(&s, "generic", "0.004");
    int fd = connect_site(&s);
    int32_t one = 1, back = 0;
    send_bytes(fd, (const uint8_t *)&one, 4); /* ShadowSite's probe; it waits for the answer */
    assert_int_equal(recv_bytes(fd, (uint8_t *)&back, 4), 4);
    assert_int_equal(back, 1);
    const double open[3] = {1.0, 5.0, 2.8};
    send_vec(fd, open, 3);
    double v[DS];
    opensees_recv_vector(fd, v);
    assert_true(v[0] == 0.0 && v[2] != 2.8); /* ShadowExpSite: "Version mismatch", exit */
    assert_closed(fd);
    close(fd);
    site_end(&s, 1);
    assert_non_null(strstr(s.log, "the client speaks the shadow variant (expSite ShadowSite), "
                                  "but the site is set to --openfresco-variant generic"));
    read_summary(&s);
    assert_summary_string("client", "told_to_exit");

    site_start(&s, "shadow", "0.004");
    fd = connect_site(&s);
    const int32_t id[11] = {1, 1, 1, 0, 1, 0, 0, 0, 1, 0, DS};
    size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
    send_bytes(fd, buf, n);
    const double trial[5] = {3.0, 0.001, 0.0, 0.0, 0.01}, force[1] = {10.0}, die[1] = {99.0};
    send_vec(fd, trial, 5);
    send_vec(fd, force, 1);
    recv_nan(fd, 1);
    send_vec(fd, die, 1);
    assert_closed(fd);
    close(fd);
    site_end(&s, 1);
    assert_non_null(strstr(s.log, "the client speaks the generic variant (GenericTCP or "
                                  "genericClient), but the site is set to --openfresco-variant "
                                  "shadow"));
    read_summary(&s);
    assert_summary_string("client", "die");
    assert_int_equal(summary_int("nan_replies"), 1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shadow_elastic),
        cmocka_unit_test(test_generic_tcp),
        cmocka_unit_test(test_generic_client_element),
        cmocka_unit_test(test_generic_client_repeats),
        cmocka_unit_test(test_generic_client_iterations),
        cmocka_unit_test(test_too_many_iterations),
        cmocka_unit_test(test_variant_mismatch),
        cmocka_unit_test(test_client_killed),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_protocol_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
