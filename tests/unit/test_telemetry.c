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

#include "common/platform/telemetry.h"

#define KEY_DERIVE_EXPECTED "3231a30aa38a8a4177092c217694fbb17ef1e9d16e2a87abebc9784d9cb72f1d"

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

/* A numerical site with several links: "links" carries each link's name, round trip, force and
 * counters and its channels' command, force and damper command; absent with one link. The
 * largest frame (8 links with 31-character names, 16 channels, the longest numbers and an
 * event of escaped characters) still seals into one datagram, and opens. */
static void test_encode_links(void **state)
{
    (void)state;
    drths_telemetry_frame_t f;
    drths_telemetry_frame_init(&f, "numerical");
    char buf[DRTHS_TELEMETRY_MAX_DATAGRAM];
    int n = drths_telemetry_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    assert_null(strstr(buf, "\"links\""));
    f.n_links = 2;
    snprintf(f.link[0].site, sizeof f.link[0].site, "labA");
    snprintf(f.link[1].site, sizeof f.link[1].site, "labB");
    f.link[0].rtt_ms = 40.5;
    f.link[1].late = 4;
    f.link[1].concealed = 9;
    f.link[1].rejected = 2;
    f.link[0].first = 0;
    f.link[0].n_channels = 1;
    f.link[1].first = 1;
    f.link[1].n_channels = 1;
    f.ch[0].cmd_disp_m = 0.0125;
    f.ch[0].used_force_N = -1500.5;
    f.ch[0].damper_cmd = 1;
    f.ch[1].cmd_disp_m = -0.002;
    n = drths_telemetry_encode(&f, buf, sizeof buf);
    assert_true(n > 0);
    assert_non_null(strstr(buf, ",\"links\":[{\"site\":\"labA\",\"rtt\":40.5,\"fmeas\":null,"
                                "\"late\":0,\"concealed\":0,\"rejected\":0,"
                                "\"ch\":[[0.0125,-1500.5,1]]},"));
    assert_non_null(strstr(buf, "{\"site\":\"labB\",\"rtt\":null,\"fmeas\":null,\"late\":4,"
                                "\"concealed\":9,\"rejected\":2,\"ch\":[[-0.002,null,null]]}]}\n"));

    /* The largest. */
    drths_telemetry_frame_init(&f, "numerical");
    f.n_links = DRTHS_TELEMETRY_MAX_LINKS;
    for (int i = 0; i < f.n_links; i++) {
        memset(f.link[i].site, 'a' + i, DRTHS_TELEMETRY_SITE_MAX - 1);
        f.link[i].site[DRTHS_TELEMETRY_SITE_MAX - 1] = '\0';
        f.link[i].rtt_ms = f.link[i].meas_force_N = -1.23456789e-100;
        f.link[i].late = f.link[i].concealed = f.link[i].rejected = UINT64_MAX;
        f.link[i].first = 2 * i;
        f.link[i].n_channels = 2;
    }
    for (int k = 0; k < DRTHS_TELEMETRY_MAX_CHANNELS; k++)
        f.ch[k].cmd_disp_m = f.ch[k].used_force_N = f.ch[k].damper_cmd = -1.23456789e-100;
    f.seq = f.late = f.concealed = f.rejected = UINT64_MAX;
    f.telemetry_errors = f.control_refused = f.event_seq = UINT64_MAX;
    f.tick = INT64_MIN;
    char ev[DRTHS_TELEMETRY_EVENT_TEXT];
    memset(ev, '\x01', sizeof ev - 1);
    ev[sizeof ev - 1] = '\0';
    drths_telemetry_frame_event(&f, ev);
    char json[DRTHS_TELEMETRY_MAX_DATAGRAM - 200];
    n = drths_telemetry_encode(&f, json, sizeof json);
    assert_true(n > 0);
    uint8_t key[DRTHS_TELEMETRY_KEY_BYTES] = {7};
    int len = drths_telemetry_frame_seal(key, "numerical", UINT64_MAX, UINT64_MAX, UINT64_MAX,
                                         json, (size_t)n, buf, sizeof buf);
    assert_true(len > 0);
    drths_telemetry_header_t h;
    assert_int_equal(drths_telemetry_frame_open(key, buf, (size_t)len, &h), 0);
    assert_string_equal(h.site, "numerical");
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

static const uint8_t KEY[DRTHS_TELEMETRY_KEY_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

/* The monitor key is keyed BLAKE2b-256 of "drths monitor v1" with the link key (the value below
 * is Python's hashlib.blake2b(b"drths monitor v1", key=bytes(range(32)), digest_size=32)). */
static void test_key_derive(void **state)
{
    (void)state;
    uint8_t psk[32], k[DRTHS_TELEMETRY_KEY_BYTES], k2[DRTHS_TELEMETRY_KEY_BYTES];
    for (int i = 0; i < 32; i++)
        psk[i] = (uint8_t)i;
    drths_telemetry_key_derive(k, psk, sizeof psk);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", k[i]);
    assert_string_equal(hex, KEY_DERIVE_EXPECTED);
    psk[31] ^= 1;
    drths_telemetry_key_derive(k2, psk, sizeof psk);
    assert_memory_not_equal(k, k2, sizeof k);
}

static void test_frame_seal_open(void **state)
{
    (void)state;
    drths_telemetry_frame_t f;
    drths_telemetry_frame_init(&f, "physical");
    char json[1200], buf[DRTHS_TELEMETRY_MAX_DATAGRAM];
    int jl = drths_telemetry_encode(&f, json, sizeof json);
    int n =
        drths_telemetry_frame_seal(KEY, "physical", 77, 5, 9, json, (size_t)jl, buf, sizeof buf);
    assert_true(n > jl);
    assert_memory_equal(buf, "drths-telemetry 2 physical 77 5 9 ", 34);
    drths_telemetry_header_t h;
    assert_int_equal(drths_telemetry_frame_open(KEY, buf, (size_t)n, &h), 0);
    assert_string_equal(h.site, "physical");
    assert_true(h.epoch == 77 && h.seq == 5 && h.ack == 9);
    assert_int_equal(h.json_len, (size_t)jl - 1);
    assert_memory_equal(h.json, json, h.json_len);
    /* Any changed byte (header or JSON), or another key, fails. */
    for (int i = 0; i < n - 1; i += 7) {
        buf[i] ^= 0x01;
        assert_true(drths_telemetry_frame_open(KEY, buf, (size_t)n, &h) < 0);
        buf[i] ^= 0x01;
    }
    uint8_t other[DRTHS_TELEMETRY_KEY_BYTES] = {9};
    assert_int_equal(drths_telemetry_frame_open(other, buf, (size_t)n, &h), -EACCES);
    /* The old unauthenticated frame, and a header naming another site than the JSON. */
    assert_int_equal(drths_telemetry_frame_open(KEY, json, (size_t)jl, &h), -EINVAL);
    n = drths_telemetry_frame_seal(KEY, "numerical", 77, 5, 9, json, (size_t)jl, buf, sizeof buf);
    assert_int_equal(drths_telemetry_frame_open(KEY, buf, (size_t)n, &h), -EINVAL);
    assert_int_equal(drths_telemetry_frame_seal(KEY, "Bad Name", 1, 1, 0, json, (size_t)jl, buf,
                                                sizeof buf),
                     -EINVAL);
    assert_int_equal(drths_telemetry_frame_seal(KEY, "physical", 1, 1, 0, json, (size_t)jl, buf,
                                                (size_t)jl),
                     -ENOSPC);
}

static void test_control_seal_open(void **state)
{
    (void)state;
    drths_telemetry_control_t c = {.site = "physical", .epoch = 12, .ctr = 34,
                                   .cmd = DRTHS_TELEM_CMD_ABORT}, got;
    char buf[DRTHS_TELEMETRY_CONTROL_MAX];
    int n = drths_telemetry_control_seal(KEY, &c, buf, sizeof buf);
    assert_true(n > 0 && n < DRTHS_TELEMETRY_CONTROL_MAX);
    assert_memory_equal(buf, "drths-control 2 physical 12 34 abort ", 37);
    assert_int_equal(buf[n - 1], '\n');
    assert_int_equal(drths_telemetry_control_open(KEY, buf, (size_t)n, &got), 0);
    assert_string_equal(got.site, "physical");
    assert_true(got.epoch == 12 && got.ctr == 34 && got.cmd == DRTHS_TELEM_CMD_ABORT);
    buf[29] = '5'; /* another counter: the MAC no longer matches */
    assert_int_equal(drths_telemetry_control_open(KEY, buf, (size_t)n, &got), -EACCES);
    /* The old token form and garbage are malformed. */
    const char *old = "drths-control abort s3cret\n";
    assert_int_equal(drths_telemetry_control_open(KEY, old, strlen(old), &got), -EINVAL);
    assert_int_equal(drths_telemetry_control_open(KEY, "", 0, &got), -EINVAL);
    c.cmd = DRTHS_TELEM_CMD_NONE;
    assert_int_equal(drths_telemetry_control_seal(KEY, &c, buf, sizeof buf), -EINVAL);
    assert_string_equal(drths_telemetry_cmd_name(DRTHS_TELEM_CMD_STOP), "stop");
    assert_int_equal(drths_telemetry_cmd_parse("start"), DRTHS_TELEM_CMD_START);
    assert_int_equal(drths_telemetry_cmd_parse("halt"), DRTHS_TELEM_CMD_NONE);
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

static void send_control(int mon, const struct sockaddr_in *to, const char *site,
                         uint64_t epoch, uint64_t ctr, drths_telemetry_cmd_t cmd,
                         const uint8_t *key)
{
    drths_telemetry_control_t c = {.epoch = epoch, .ctr = ctr, .cmd = cmd};
    snprintf(c.site, sizeof c.site, "%s", site);
    char buf[DRTHS_TELEMETRY_CONTROL_MAX];
    int n = drths_telemetry_control_seal(key, &c, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(sendto(mon, buf, (size_t)n, 0, (const struct sockaddr *)to, sizeof *to), n);
}

/* Polls until the datagrams sent have all been read (each is counted one way or another). */
static int poll_all(drths_telemetry_t *t, drths_telemetry_cmd_t *cmd, uint64_t want_seen)
{
    int answered = 0;
    *cmd = DRTHS_TELEM_CMD_NONE;
    for (int i = 0; i < 200; i++) {
        drths_telemetry_cmd_t c;
        answered += drths_telemetry_poll(t, &c);
        if (c > *cmd)
            *cmd = c;
        if ((uint64_t)answered + t->control_rejected >= want_seen)
            return answered;
        struct pollfd p = {drths_telemetry_fd(t), POLLIN, 0};
        poll(&p, 1, 10);
    }
    return answered;
}

/* A monitor stand-in on 127.0.0.1: the frames arrive decimated and authenticated; control comes
 * back on the same socket and is executed once: a retransmission is answered but not executed,
 * a replayed older datagram, one of another epoch, another site's or a forged one is refused
 * and counted; the next frame's ACK is the last executed counter; sending with no monitor never
 * fails hard. */
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

    drths_telemetry_t t;
    drths_error_t err;
    assert_int_equal(drths_telemetry_open(&t, hp, KEY, "physical", 5000.0, 50.0, &err), 0);
    assert_int_equal(t.decimation, 100);
    assert_true(t.epoch > 0);
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
    drths_telemetry_header_t h;
    for (int i = 0; i < 10; i++) {
        struct pollfd p = {mon, POLLIN, 0};
        assert_int_equal(poll(&p, 1, 2000), 1);
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(mon, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &fl);
        assert_true(n > 0);
        buf[n] = '\0';
        assert_int_equal(drths_telemetry_frame_open(KEY, buf, (size_t)n, &h), 0);
        assert_true(h.epoch == t.epoch && h.seq == (uint64_t)i && h.ack == 0);
        char want[64];
        snprintf(want, sizeof want, "\"tick\":%d,", i * 100);
        assert_non_null(strstr(buf, want));
    }

    uint8_t wrong[DRTHS_TELEMETRY_KEY_BYTES] = {0};
    drths_telemetry_cmd_t c;
    send_control(mon, &from, "physical", t.epoch, 10, DRTHS_TELEM_CMD_STOP, wrong); /* forged */
    send_control(mon, &from, "physical", t.epoch, 11, DRTHS_TELEM_CMD_START, KEY);
    assert_int_equal(poll_all(&t, &c, 2), 1);
    assert_int_equal(c, DRTHS_TELEM_CMD_START);
    assert_int_equal(t.control_bad, 1);
    assert_int_equal(t.ctl_last, 11);

    /* A retransmission: answered (the caller sends a frame) but not executed again. */
    send_control(mon, &from, "physical", t.epoch, 11, DRTHS_TELEM_CMD_START, KEY);
    assert_int_equal(poll_all(&t, &c, 2), 1);
    assert_int_equal(c, DRTHS_TELEM_CMD_NONE);
    assert_int_equal(t.control_duplicates, 1);

    /* Abort, then a replay of the earlier Start, one of an earlier run (epoch) and one for the
     * other site: only the Abort is executed. */
    send_control(mon, &from, "physical", t.epoch, 20, DRTHS_TELEM_CMD_ABORT, KEY);
    send_control(mon, &from, "physical", t.epoch, 11 - 1, DRTHS_TELEM_CMD_START, KEY);
    send_control(mon, &from, "physical", t.epoch - 1, 30, DRTHS_TELEM_CMD_STOP, KEY);
    send_control(mon, &from, "numerical", t.epoch, 31, DRTHS_TELEM_CMD_STOP, KEY);
    assert_int_equal(poll_all(&t, &c, 5), 1);
    assert_int_equal(c, DRTHS_TELEM_CMD_ABORT);
    assert_int_equal(t.control_stale, 3);
    assert_int_equal(t.control_rejected, 4);
    assert_int_equal(t.ctl_last, 20);

    /* The next frame acknowledges the Abort. */
    assert_int_equal(drths_telemetry_send(&t), 0);
    struct pollfd p = {mon, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 2000), 1);
    ssize_t n = recv(mon, buf, sizeof buf, 0);
    assert_int_equal(drths_telemetry_frame_open(KEY, buf, (size_t)n, &h), 0);
    assert_true(h.ack == 20 && h.seq == 10);
    assert_non_null(memmem(h.json, h.json_len, "\"ctl_refused\":4,", 16));

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
    assert_int_equal(drths_telemetry_open(&t, "nonsense", KEY, "x", 5000, 50, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--monitor"));
    drths_telemetry_close(&t);
    assert_int_equal(drths_telemetry_open(&t, "127.0.0.1:9", KEY, "Bad Name", 5000, 50, &err),
                     -EINVAL);
    drths_telemetry_close(&t);
    assert_int_equal(drths_telemetry_open(&t, "127.0.0.1:9", KEY, "x", 1000, 2000, &err), 0);
    assert_int_equal(t.decimation, 1);
    drths_telemetry_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_fields),   cmocka_unit_test(test_encode_links),
        cmocka_unit_test(test_encode_too_small),
        cmocka_unit_test(test_key_derive),      cmocka_unit_test(test_frame_seal_open),
        cmocka_unit_test(test_control_seal_open), cmocka_unit_test(test_token_file),
        cmocka_unit_test(test_loopback),        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_beat_due),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
