/* Keeps protocol/PROTOCOL.md and the code from drifting: every ```hex block in the document is
 * a datagram that must open with the example keys the document lists, its ```plain block must
 * be the decrypted payload, its ```fields block must list every decoded field with the value
 * decoded, and re-sealing the example message must give the same bytes. The ```keys block must
 * match the key derivation.
 *
 * DRTHS_PRINT_EXAMPLES=1 ./unit_protocol_doc prints the examples section for the document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "protocol/wire.h"
#include "wire_examples.h"

typedef struct field {
    char key[48];
    char val[128];
    bool is_double;
    double d;
} field_t;

enum { MAX_FIELDS = 160 };

static int nf;
static field_t fields[MAX_FIELDS];

static void add(const char *key, bool is_double, double d, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(const char *key, bool is_double, double d, const char *fmt, ...)
{
    assert_true(nf < MAX_FIELDS);
    field_t *f = &fields[nf++];
    snprintf(f->key, sizeof f->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->val, sizeof f->val, fmt, ap);
    va_end(ap);
    f->is_double = is_double;
    f->d = d;
}

static void add_u(const char *key, uint64_t v) { add(key, false, 0, "%" PRIu64, v); }
static void add_i(const char *key, int64_t v) { add(key, false, 0, "%" PRId64, v); }

/* Shortest decimal that reads back as the same double. */
static void add_d(const char *key, double v)
{
    char s[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            break;
    }
    add(key, true, v, "%s", s);
}

static void add_hex(const char *key, const uint8_t *p, size_t n)
{
    char s[80];
    for (size_t i = 0; i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", p[i]);
    add(key, false, 0, "%s", s);
}

static void list_fields(const drths_msg_t *m)
{
    char k[48];
    nf = 0;
    add("type", false, 0, "%s", drths_msg_type_name(m->type));
    add("session_id", false, 0, "0x%016" PRIx64, m->session_id);
    add_u("counter", m->counter);
    add_u("tick", m->tick);
    add_u("epoch", m->epoch);
    if (m->has_eph)
        add_hex("ephemeral", m->eph, DRTHS_EPH_BYTES);
    switch (m->type) {
    case DRTHS_MSG_HELLO:
    case DRTHS_MSG_HELLO_ACK: {
        const drths_msg_hello_t *h = &m->u.hello;
        add_u("proto_min", h->proto_min);
        add_u("proto_max", h->proto_max);
        add("role", false, 0, "%u (%s)", h->role,
            h->role == DRTHS_ROLE_NUMERICAL ? "numerical" : h->role == DRTHS_ROLE_PHYSICAL ? "physical" : "?");
        add_u("version", h->version);
        add_u("link", h->link);
        add("site", false, 0, "\"%s\"", h->site);
        add_d("rate_hz", h->rate_hz);
        add_u("n_channels", h->n_channels);
        char offs[128] = "";
        for (int i = 0; i < h->r; i++)
            snprintf(offs + strlen(offs), sizeof offs - strlen(offs), "%s%u", i ? "," : "",
                     h->offsets[i]);
        add("offsets", false, 0, "%s", offs);
        add("units", false, 0, "\"%s\"", h->units);
        add_hex("fingerprint", h->fingerprint, sizeof h->fingerprint);
        for (int i = 0; i < h->n_sections; i++) {
            snprintf(k, sizeof k, "section[%d]", i);
            char hx[2 * DRTHS_WIRE_SECTION_HASH + 1];
            for (int b = 0; b < DRTHS_WIRE_SECTION_HASH; b++)
                snprintf(hx + 2 * b, 3, "%02x", h->sections[i].hash[b]);
            add(k, false, 0, "%s %s", h->sections[i].name, hx);
        }
        add("software", false, 0, "\"%s\"", h->software);
        break;
    }
    case DRTHS_MSG_PROBE:
    case DRTHS_MSG_PROBE_ECHO:
        add_u("seq", m->u.probe.seq);
        add_u("send_time_ns", m->u.probe.send_time_ns);
        if (m->type == DRTHS_MSG_PROBE_ECHO)
            add_u("hold_ns", m->u.probe.hold_ns);
        break;
    case DRTHS_MSG_COMMAND: {
        const drths_msg_command_t *c = &m->u.command;
        add_u("loop_delay_ticks", c->loop_delay_ticks);
        add_u("n_channels", c->n_channels);
        add_u("r", c->r);
        add_u("echo_counter", c->echo_counter);
        add_u("echo_hold_ns", c->echo_hold_ns);
        for (int s = 0; s < c->r; s++)
            for (int j = 0; j < c->n_channels; j++) {
                const drths_cmd_channel_t *x = &c->s[s][j];
                snprintf(k, sizeof k, "s[%d].ch[%d].disp_m", s, j);
                add_d(k, x->disp_m);
                snprintf(k, sizeof k, "s[%d].ch[%d].vel_m_s", s, j);
                add_d(k, x->vel_m_s);
                snprintf(k, sizeof k, "s[%d].ch[%d].acc_m_s2", s, j);
                add_d(k, x->acc_m_s2);
                snprintf(k, sizeof k, "s[%d].ch[%d].damper_cmd", s, j);
                add_d(k, x->damper_cmd);
            }
        break;
    }
    case DRTHS_MSG_FEEDBACK: {
        const drths_msg_feedback_t *f = &m->u.feedback;
        add_u("n_channels", f->n_channels);
        add_u("r", f->r);
        add_u("echo_counter", f->echo_counter);
        add_u("echo_hold_ns", f->echo_hold_ns);
        for (int s = 0; s < f->r; s++) {
            snprintf(k, sizeof k, "s[%d].cmd_tick", s);
            add_i(k, f->s[s].cmd_tick);
            snprintf(k, sizeof k, "s[%d].flags", s);
            add_u(k, f->s[s].flags);
            for (int j = 0; j < f->n_channels; j++) {
                snprintf(k, sizeof k, "s[%d].ch[%d].force_n", s, j);
                add_d(k, f->s[s].ch[j].force_n);
                snprintf(k, sizeof k, "s[%d].ch[%d].disp_m", s, j);
                add_d(k, f->s[s].ch[j].disp_m);
            }
        }
        break;
    }
    case DRTHS_MSG_EPOCH:
        add_u("new_epoch", m->u.epoch.new_epoch);
        add_u("loop_delay_ticks", m->u.epoch.loop_delay_ticks);
        add_u("effective_tick", m->u.epoch.effective_tick);
        break;
    case DRTHS_MSG_HEARTBEAT:
        add("state", false, 0, "%u (%s)", m->u.heartbeat.state,
            drths_site_state_name(m->u.heartbeat.state));
        break;
    case DRTHS_MSG_STOP:
    case DRTHS_MSG_ABORT:
        add("reason", false, 0, "%u (%s)", m->u.stop.reason,
            drths_stop_reason_name(m->u.stop.reason));
        add("text", false, 0, "\"%s\"", m->u.stop.text);
        break;
    }
}

/* The keys block: inputs, then every derived value in the order of PROTOCOL.md section 3. */
static const char *const key_names[] = {
    "psk", "eph_num_secret", "eph_num_public", "eph_phys_secret", "eph_phys_public", "dh",
    "hello_key", "hello_ack_key", "transcript", "key_num_to_phys", "key_phys_to_num",
};
#define N_KEY_NAMES (sizeof key_names / sizeof key_names[0])

static const uint8_t *key_value(const ex_keys_t *k, size_t i)
{
    const uint8_t *v[] = {k->psk,  k->en_sk,     k->en_pk,   k->ep_sk,
                          k->ep_pk, k->dh,       k->hello_key, k->ack_key,
                          k->transcript, k->keys.num_to_phys, k->keys.phys_to_num};
    return v[i];
}

static void print_hex_lines(const uint8_t *p, size_t n, const char *indent)
{
    for (size_t i = 0; i < n; i++)
        printf("%s%02x%s", i % 16 == 0 ? indent : "", p[i], (i % 16 == 15 || i + 1 == n) ? "\n" : " ");
}

static const char *direction_text(drths_role_t sender)
{
    return sender == DRTHS_ROLE_NUMERICAL ? "numerical -> physical" : "physical -> numerical";
}

static void print_examples(void)
{
    ex_keys_t k;
    ex_keys(&k);
    printf("```keys\nsession_id = 0x%016" PRIx64 "\n", EX_SESSION_ID);
    for (size_t i = 0; i < N_KEY_NAMES; i++) {
        printf("%s = ", key_names[i]);
        for (int b = 0; b < 32; b++)
            printf("%02x", key_value(&k, i)[b]);
        printf("\n");
    }
    printf("```\n\n");
    for (int i = 0; i < EX_NTYPES; i++) {
        drths_msg_type_t t = ex_types[i];
        uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM];
        size_t len;
        assert_int_equal(ex_seal(t, buf, sizeof buf, &len), 0);
        drths_wire_rx_t rx;
        assert_int_equal(ex_rx(&rx, ex_sender(t) == DRTHS_ROLE_NUMERICAL ? DRTHS_ROLE_PHYSICAL
                                                                          : DRTHS_ROLE_NUMERICAL), 0);
        drths_msg_t m;
        assert_int_equal(drths_wire_open(&rx, buf, len, &m), DRTHS_REJECT_OK);
        size_t plen = rx.plain_len, pre = len - plen - DRTHS_TAG_BYTES;
        printf("### %s (type %d, %s, %zu bytes)\n\n", drths_msg_type_name(t), (int)t,
               direction_text(ex_sender(t)), len);
        printf("```hex\n# header\n");
        print_hex_lines(buf, DRTHS_WIRE_HEADER_BYTES, "");
        if (pre > DRTHS_WIRE_HEADER_BYTES) {
            printf("# ephemeral public key (in clear, authenticated)\n");
            print_hex_lines(buf + DRTHS_WIRE_HEADER_BYTES, DRTHS_EPH_BYTES, "");
        }
        printf("# encrypted payload (%zu bytes)\n", plen);
        print_hex_lines(buf + pre, plen, "");
        printf("# tag\n");
        print_hex_lines(buf + len - DRTHS_TAG_BYTES, DRTHS_TAG_BYTES, "");
        printf("```\n\nPayload before encryption (msgpack):\n\n```plain\n");
        print_hex_lines(rx.plain, plen, "");
        printf("```\n\nDecoded:\n\n```fields\n");
        list_fields(&m);
        for (int f = 0; f < nf; f++)
            printf("%s = %s\n", fields[f].key, fields[f].val);
        printf("```\n\n");
        drths_wire_rx_close(&rx);
    }
}

/* ---- checking the document --------------------------------------------------------------- */

static size_t parse_hex(const char *text, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;
    for (const char *p = text; *p; p++) {
        if (*p == '#') { /* comment to end of line */
            while (*p && *p != '\n')
                p++;
            if (!*p)
                break;
            continue;
        }
        int v = 0;
        if (*p >= '0' && *p <= '9') v = *p - '0';
        else if (*p >= 'a' && *p <= 'f') v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F') v = *p - 'A' + 10;
        else if (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') continue;
        else fail_msg("unexpected character '%c' in hex block", *p);
        if (hi < 0) {
            hi = v;
        } else {
            assert_true(n < cap);
            out[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    assert_int_equal(hi, -1);
    return n;
}

static char *read_doc(void)
{
    const char *src = getenv("DRTHS_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/protocol/PROTOCOL.md", src ? src : ".");
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s (set DRTHS_SOURCE_DIR)", path);
    static char doc[1 << 20];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[n] = '\0';
    return doc;
}


static void check_keys_block(const char *body)
{
    ex_keys_t k;
    ex_keys(&k);
    int found = 0;
    for (size_t i = 0; i < N_KEY_NAMES; i++) {
        char pat[40];
        snprintf(pat, sizeof pat, "\n%s = ", key_names[i]);
        char tmp[8192];
        snprintf(tmp, sizeof tmp, "\n%s", body);
        const char *p = strstr(tmp, pat);
        if (!p)
            fail_msg("keys block lacks %s", key_names[i]);
        uint8_t got[32];
        char hex[65];
        memcpy(hex, p + strlen(pat), 64);
        hex[64] = '\0';
        assert_int_equal(parse_hex(hex, got, 32), 32);
        if (memcmp(got, key_value(&k, i), 32) != 0)
            fail_msg("keys block: %s differs from the derivation", key_names[i]);
        found++;
    }
    char sid[40];
    snprintf(sid, sizeof sid, "session_id = 0x%016" PRIx64, EX_SESSION_ID);
    assert_non_null(strstr(body, sid));
    assert_int_equal(found, (int)N_KEY_NAMES);
}

static void test_document(void **state)
{
    (void)state;
    char *doc = read_doc();
    int n_hex = 0, n_plain = 0, n_fields = 0, n_keys = 0;
    bool seen[DRTHS_MSG_TYPE_MAX + 1] = {false};
    drths_msg_t m;
    bool have_msg = false;
    static uint8_t plain[DRTHS_WIRE_MAX_PAYLOAD];
    size_t plen = 0;
    char *p = doc;
    while ((p = strstr(p, "```")) != NULL) {
        char *lang = p + 3;
        char *body = strchr(lang, '\n');
        assert_non_null(body);
        body++;
        char *end = strstr(body, "\n```");
        assert_non_null(end);
        char langname[16] = "";
        sscanf(lang, "%15[a-z]", langname);
        *end = '\0';
        if (strcmp(langname, "hex") == 0) {
            uint8_t buf[DRTHS_WIRE_MAX_DATAGRAM + 1];
            size_t len = parse_hex(body, buf, sizeof buf);
            drths_wire_header_t h;
            assert_int_equal(drths_wire_peek_header(buf, len, &h), DRTHS_REJECT_OK);
            /* Try both receivers; exactly the right one opens it. */
            int opened = 0;
            for (int role = 1; role <= 2; role++) {
                drths_wire_rx_t rx;
                assert_int_equal(ex_rx(&rx, (drths_role_t)role), 0);
                drths_msg_t tmp;
                if (drths_wire_open(&rx, buf, len, &tmp) == DRTHS_REJECT_OK) {
                    m = tmp;
                    plen = rx.plain_len;
                    memcpy(plain, rx.plain, plen);
                    opened++;
                    /* The example re-seals to exactly these bytes. */
                    uint8_t again[DRTHS_WIRE_MAX_DATAGRAM];
                    size_t alen;
                    assert_int_equal(ex_seal(m.type, again, sizeof again, &alen), 0);
                    assert_int_equal(alen, len);
                    assert_memory_equal(again, buf, len);
                    assert_int_equal((int)ex_sender(m.type), 3 - role);
                }
                drths_wire_rx_close(&rx);
            }
            if (opened != 1)
                fail_msg("hex block %d (type %d): opened by %d receivers", n_hex + 1, h.type,
                         opened);
            assert_false(seen[m.type]);
            seen[m.type] = true;
            have_msg = true;
            n_hex++;
        } else if (strcmp(langname, "plain") == 0) {
            assert_true(have_msg);
            uint8_t want[DRTHS_WIRE_MAX_PAYLOAD];
            size_t n = parse_hex(body, want, sizeof want);
            assert_int_equal(n, plen);
            assert_memory_equal(want, plain, n);
            n_plain++;
        } else if (strcmp(langname, "fields") == 0) {
            assert_true(have_msg);
            list_fields(&m);
            int lines = 0;
            for (char *line = strtok(body, "\n"); line; line = strtok(NULL, "\n")) {
                char *eq = strstr(line, " = ");
                if (!eq)
                    fail_msg("fields line without ' = ': %s", line);
                *eq = '\0';
                const char *val = eq + 3;
                int f;
                for (f = 0; f < nf; f++)
                    if (strcmp(fields[f].key, line) == 0)
                        break;
                if (f == nf)
                    fail_msg("%s: field %s is not in the decoded message", drths_msg_type_name(m.type), line);
                if (fields[f].is_double) {
                    char *e;
                    double d = strtod(val, &e);
                    if (*e != '\0' || d != fields[f].d)
                        fail_msg("%s: %s = %s in the document, decoded %s",
                                 drths_msg_type_name(m.type), line, val, fields[f].val);
                } else if (strcmp(val, fields[f].val) != 0) {
                    fail_msg("%s: %s = %s in the document, decoded %s",
                             drths_msg_type_name(m.type), line, val, fields[f].val);
                }
                lines++;
            }
            if (lines != nf)
                fail_msg("%s: the document lists %d fields, the message has %d",
                         drths_msg_type_name(m.type), lines, nf);
            have_msg = false;
            n_fields++;
        } else if (strcmp(langname, "keys") == 0) {
            check_keys_block(body);
            n_keys++;
        }
        p = end + 4;
    }
    print_message("PROTOCOL.md: %d datagrams, %d payloads, %d field lists, %d key blocks checked\n",
                  n_hex, n_plain, n_fields, n_keys);
    assert_int_equal(n_hex, EX_NTYPES);
    assert_int_equal(n_plain, EX_NTYPES);
    assert_int_equal(n_fields, EX_NTYPES);
    assert_int_equal(n_keys, 1);
    for (int t = 1; t <= DRTHS_MSG_TYPE_MAX; t++)
        if (!seen[t])
            fail_msg("PROTOCOL.md has no example of %s", drths_msg_type_name(t));
}

/* The document states the rehearsal key and the limits; check the numbers it gives. */
static void test_document_constants(void **state)
{
    (void)state;
    const char *doc = read_doc();
    uint8_t rk[32];
    drths_key_rehearsal(rk);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", rk[i]);
    assert_non_null(strstr(doc, hex));
    char s[80];
    snprintf(s, sizeof s, "%d bytes", DRTHS_WIRE_MAX_DATAGRAM);
    assert_non_null(strstr(doc, s));
    snprintf(s, sizeof s, "%u", DRTHS_REPLAY_WINDOW);
    assert_non_null(strstr(doc, s));
}

int main(void)
{
    if (drths_crypto_init() != 0)
        return 1;
    if (getenv("DRTHS_PRINT_EXAMPLES")) {
        print_examples();
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document),
        cmocka_unit_test(test_document_constants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
