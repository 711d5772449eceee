#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "platform/telemetry.h"

static void test_encode_fields(void **state)
{
    (void)state;
    drths_telemetry_frame_t f;
    drths_telemetry_frame_init(&f, "physical");
    f.state = DRTHS_TELEM_RUN;
    f.tick = 12345;
    f.time_s = 2.469;
    f.cmd_disp_m = 0.0125;
    f.meas_force_N = -1500.5;
    f.late = 3;
    f.concealed = 7;
    f.rejected = 1;
    drths_telemetry_frame_event(&f, "HOLD at tick 5: \"limit\"\n\\x");
    char buf[DRTHS_TELEMETRY_MAX_DATAGRAM];
    int n = drths_telemetry_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    assert_int_equal(buf[n - 1], '\n');
    assert_null(memchr(buf, '\n', (size_t)n - 1)); /* one line */
    assert_non_null(strstr(buf, "\"site\":\"physical\""));
    assert_non_null(strstr(buf, "\"state\":\"RUN\""));
    assert_non_null(strstr(buf, "\"tick\":12345,"));
    assert_non_null(strstr(buf, "\"t\":2.469,"));
    assert_non_null(strstr(buf, "\"cmd\":0.0125,"));
    assert_non_null(strstr(buf, "\"fmeas\":-1500.5,"));
    assert_non_null(strstr(buf, "\"meas\":null,")); /* NaN is null */
    assert_non_null(strstr(buf, "\"late\":3,\"concealed\":7,\"rejected\":1,"));
    assert_non_null(strstr(buf, "\"event_seq\":1,"));
    assert_non_null(strstr(buf, "\"event\":\"HOLD at tick 5: \\\"limit\\\"\\u000a\\\\x\"}"));
}

static void test_encode_too_small(void **state)
{
    (void)state;
    drths_telemetry_frame_t f;
    drths_telemetry_frame_init(&f, "numerical");
    char buf[DRTHS_TELEMETRY_MAX_DATAGRAM];
    int full = drths_telemetry_encode(&f, buf, sizeof buf);
    assert_true(full > 0);
    assert_int_equal(drths_telemetry_encode(&f, buf, (size_t)full), -ENOSPC); /* no room for NUL */
    assert_int_equal(drths_telemetry_encode(&f, buf, (size_t)full + 1), full);
    assert_int_equal(drths_telemetry_encode(&f, buf, 0), -ENOSPC);
    /* The longest event of quotes (each escaped to two characters) still fits a datagram. */
    memset(f.event, '"', sizeof f.event - 1);
    f.event[sizeof f.event - 1] = '\0';
    assert_true(drths_telemetry_encode(&f, buf, sizeof buf) > 0);
}

static int parse(const char *s, const char *tok, drths_telemetry_cmd_t *c)
{
    return drths_telemetry_control_parse(s, strlen(s), tok, tok ? strlen(tok) : 0, c);
}

static void test_control_parse(void **state)
{
    (void)state;
    drths_telemetry_cmd_t c;
#define P(s, tok) parse(s, tok, &c)
    assert_int_equal(P("drths-control start", NULL), 0);
    assert_int_equal(c, DRTHS_TELEM_CMD_START);
    assert_int_equal(P("drths-control stop\n", NULL), 0);
    assert_int_equal(c, DRTHS_TELEM_CMD_STOP);
    assert_int_equal(P("drths-control abort anything", NULL), 0);
    assert_int_equal(c, DRTHS_TELEM_CMD_ABORT);
    assert_int_equal(P("drths-control halt", NULL), -EINVAL);
    assert_int_equal(c, DRTHS_TELEM_CMD_NONE);
    assert_int_equal(P("drths-control stopx", NULL), -EINVAL);
    assert_int_equal(P("drths-contro stop", NULL), -EINVAL);
    assert_int_equal(P("", NULL), -EINVAL);
    assert_int_equal(P("drths-control stop s3cret", "s3cret"), 0);
    assert_int_equal(c, DRTHS_TELEM_CMD_STOP);
    assert_int_equal(P("drths-control stop s3cre", "s3cret"), -EACCES);
    assert_int_equal(P("drths-control stop s3cretX", "s3cret"), -EACCES);
    assert_int_equal(P("drths-control stop", "s3cret"), -EACCES);
    assert_int_equal(c, DRTHS_TELEM_CMD_NONE);
#undef P
}

static void test_token_file(void **state)
{
    (void)state;
    char path[] = "/tmp/drths-token-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "  abc123 \nsecond\n", 17), 17);
    close(fd);
    char tok[DRTHS_TELEMETRY_TOKEN_MAX];
    size_t len = 0;
    drths_error_t err;
    assert_int_equal(drths_telemetry_token_load(tok, &len, path, &err), 0);
    assert_string_equal(tok, "abc123");
    assert_int_equal(len, 6);
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "a b\n", 4), 4);
    close(fd);
    assert_int_equal(drths_telemetry_token_load(tok, &len, path, &err), -EINVAL);
    unlink(path);
    assert_true(drths_telemetry_token_load(tok, &len, path, &err) < 0);
    assert_non_null(strstr(err.msg, path));
}

/* A monitor stand-in on 127.0.0.1: the frames arrive decimated, control comes back on the same
 * socket, a wrong token is counted and ignored, and sending with no monitor never fails hard. */
static void test_loopback(void **state)
{
    (void)state;
    int mon = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(mon >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(mon, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(mon, (struct sockaddr *)&a, &al), 0);
    char hp[64];
    snprintf(hp, sizeof hp, "127.0.0.1:%u", ntohs(a.sin_port));

    char tpath[] = "/tmp/drths-token-XXXXXX";
    int tfd = mkstemp(tpath);
    assert_int_equal(write(tfd, "tok\n", 4), 4);
    close(tfd);

    drths_telemetry_t t;
    drths_error_t err;
    assert_int_equal(drths_telemetry_open(&t, hp, tpath, "physical", 5000.0, 50.0, &err), 0);
    unlink(tpath);
    assert_int_equal(t.decimation, 100);
    int frames = 0;
    for (int row = 0; row < 1000; row++) {
        if (drths_telemetry_row_due(&t)) {
            t.f.tick = row;
            assert_int_equal(drths_telemetry_send(&t), 0);
            frames++;
        }
    }
    assert_int_equal(frames, 10);
    char buf[2048];
    struct sockaddr_in from;
    for (int i = 0; i < 10; i++) {
        struct pollfd p = {mon, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 2000), 1);
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(mon, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &fl);
        assert_true(n > 0);
        buf[n] = '\0';
        char want[64];
        snprintf(want, sizeof want, "\"tick\":%d,", i * 100);
        assert_non_null(strstr(buf, want));
    }

    const char *bad = "drths-control stop nottok", *good = "drths-control abort tok";
    assert_int_equal(sendto(mon, bad, strlen(bad), 0, (struct sockaddr *)&from, sizeof from),
                     (ssize_t)strlen(bad));
    assert_int_equal(sendto(mon, good, strlen(good), 0, (struct sockaddr *)&from, sizeof from),
                     (ssize_t)strlen(good));
    struct pollfd p = {drths_telemetry_fd(&t), POLLIN, 0};
    assert_int_equal(poll(&p, 1, 2000), 1);
    drths_telemetry_cmd_t c = DRTHS_TELEM_CMD_NONE;
    for (int i = 0; i < 100 && c == DRTHS_TELEM_CMD_NONE; i++) {
        poll(&p, 1, 20);
        drths_telemetry_poll(&t, &c);
    }
    assert_int_equal(c, DRTHS_TELEM_CMD_ABORT);
    assert_int_equal(t.control_rejected, 1);

    /* The monitor goes away: sends fail (refused) or vanish, are counted, never block. */
    close(mon);
    uint64_t sent = t.sent;
    for (int i = 0; i < 5; i++)
        drths_telemetry_send(&t);
    assert_int_equal(t.sent + t.send_errors, sent + 5);
    drths_telemetry_close(&t);
    drths_telemetry_close(&t);
    assert_int_equal(drths_telemetry_send(&t), -EBADF);

    drths_telemetry_t z;
    memset(&z, 0, sizeof z);
    drths_telemetry_close(&z); /* never opened: must not close fd 0 */
}

/* The heartbeat: due on every tenth call only when no frame went since the last one. Sending is
 * simulated by the counters drths_telemetry_send moves. */
static void test_beat_due(void **state)
{
    (void)state;
    drths_telemetry_t t;
    memset(&t, 0, sizeof t);
    int due = 0;
    for (int i = 1; i <= 30; i++) {
        int d = drths_telemetry_beat_due(&t);
        assert_int_equal(d, i % 10 == 0);
        if (d) {
            t.sent++; /* the caller sends the beat */
            due++;
        }
    }
    assert_int_equal(due, 3); /* an idle site: 5 beats a second at 50 calls a second */
    for (int i = 1; i <= 30; i++) {
        if (i % 3 == 0)
            t.send_errors++; /* rows made frames (some lost): no beat needed */
        assert_int_equal(drths_telemetry_beat_due(&t), 0);
    }
    for (int i = 1; i <= 10; i++)
        assert_int_equal(drths_telemetry_beat_due(&t), i == 10); /* idle again */
}

static void test_open_errors(void **state)
{
    (void)state;
    drths_telemetry_t t;
    drths_error_t err;
    assert_int_equal(drths_telemetry_open(&t, "nonsense", NULL, "x", 5000, 50, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--monitor"));
    drths_telemetry_close(&t);
    assert_true(drths_telemetry_open(&t, "127.0.0.1:9", "/nonexistent/token", "x", 5000, 50,
                                     &err) < 0);
    drths_telemetry_close(&t);
    assert_int_equal(drths_telemetry_open(&t, "127.0.0.1:9", NULL, "x", 1000, 2000, &err), 0);
    assert_int_equal(t.decimation, 1);
    drths_telemetry_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_fields),   cmocka_unit_test(test_encode_too_small),
        cmocka_unit_test(test_control_parse),   cmocka_unit_test(test_token_file),
        cmocka_unit_test(test_loopback),        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_beat_due),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
