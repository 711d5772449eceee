#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <sodium.h>

#include "protocol/crypto.h"
#include "protocol/keyfile.h"

static char dir[64];

static void unhex(const char *h, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void assert_hex(const uint8_t *p, size_t n, const char *want)
{
    char got[129];
    assert_true(2 * n < sizeof got);
    for (size_t i = 0; i < n; i++)
        snprintf(got + 2 * i, 3, "%02x", p[i]);
    assert_string_equal(got, want);
}

static void write_file(const char *path, const void *data, size_t n, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/drths-crypto-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return drths_crypto_init();
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static void test_key_load_forms(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/k", dir);
    uint8_t raw[32], key[32];
    for (int i = 0; i < 32; i++)
        raw[i] = (uint8_t)(0xf0 ^ i);
    drths_error_t err;

    write_file(path, raw, 32, 0600);
    assert_int_equal(drths_key_load(key, path, &err), 0);
    assert_memory_equal(key, raw, 32);

    const char *hex = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeffe0e1e2e3e4e5e6e7e8e9eaebecedeeef";
    const char *suffix[] = {"", "\n", "\r\n"};
    for (int s = 0; s < 3; s++) {
        char text[80];
        snprintf(text, sizeof text, "%s%s", hex, suffix[s]);
        write_file(path, text, strlen(text), 0400);
        memset(key, 0, sizeof key);
        assert_int_equal(drths_key_load(key, path, &err), 0);
        assert_memory_equal(key, raw, 32);
    }
    /* Upper-case hex is the same key. */
    char upper[65];
    for (int i = 0; i < 64; i++)
        upper[i] = (char)(hex[i] >= 'a' ? hex[i] - 32 : hex[i]);
    write_file(path, upper, 64, 0600);
    assert_int_equal(drths_key_load(key, path, &err), 0);
    assert_memory_equal(key, raw, 32);
}

static void test_key_load_refusals(void **state)
{
    (void)state;
    char path[128], want[400];
    snprintf(path, sizeof path, "%s/bad", dir);
    uint8_t raw[40] = {1}, key[32];
    drths_error_t err;

    unlink(path);
    assert_int_equal(drths_key_load(key, path, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "No such file"));

    write_file(path, raw, 32, 0644);
    assert_int_equal(drths_key_load(key, path, &err), -EPERM);
    snprintf(want, sizeof want, "key file %s is readable by others (mode 0644); chmod 600 %s", path,
             path);
    assert_string_equal(err.msg, want);

    write_file(path, raw, 32, 0640);
    assert_int_equal(drths_key_load(key, path, &err), -EPERM);
    assert_non_null(strstr(err.msg, "(mode 0640)"));

    write_file(path, raw, 32, 0602);
    assert_int_equal(drths_key_load(key, path, &err), -EPERM);
    snprintf(want, sizeof want, "key file %s is writable by others (mode 0602); chmod 600 %s", path,
             path);
    assert_string_equal(err.msg, want);

    write_file(path, raw, 31, 0600);
    assert_int_equal(drths_key_load(key, path, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "must be exactly 32 bytes (or 64 hex digits), got 31"));
    write_file(path, raw, 33, 0600);
    assert_int_equal(drths_key_load(key, path, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "got 33"));
    write_file(path, raw, 0, 0600);
    assert_int_equal(drths_key_load(key, path, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "got 0"));
    char big[200];
    memset(big, 'a', sizeof big);
    write_file(path, big, sizeof big, 0600);
    assert_int_equal(drths_key_load(key, path, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "got more than 79"));

    char badhex[66];
    memset(badhex, '0', 64);
    badhex[10] = 'g';
    badhex[64] = '\n';
    write_file(path, badhex, 65, 0600);
    assert_int_equal(drths_key_load(key, path, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "byte 10 is not a hex digit"));

    uint8_t zero[32] = {0};
    write_file(path, zero, 32, 0600);
    assert_int_equal(drths_key_load(key, path, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "all-zero"));

    char sub[140];
    snprintf(sub, sizeof sub, "%s/d", dir);
    mkdir(sub, 0700);
    chmod(sub, 0600);
    assert_int_equal(drths_key_load(key, sub, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not a regular file"));
}

static void test_key_generate(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/gen.key", dir);
    unlink(path);
    drths_error_t err;
    uint8_t k1[32], k2[32], back[32];
    mode_t old = umask(0);
    assert_int_equal(drths_key_generate(path, false, false, k1, &err), 0);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_size, 32);
    assert_int_equal(drths_key_load(back, path, &err), 0);
    assert_memory_equal(back, k1, 32);

    assert_int_equal(drths_key_generate(path, false, false, k2, &err), -EEXIST);
    assert_non_null(strstr(err.msg, "use --force"));
    assert_int_equal(drths_key_load(back, path, &err), 0);
    assert_memory_equal(back, k1, 32); /* untouched */

    chmod(path, 0644);
    assert_int_equal(drths_key_generate(path, true, true, k2, &err), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_size, 65);
    assert_int_equal(drths_key_load(back, path, &err), 0);
    assert_memory_equal(back, k2, 32);
    assert_memory_not_equal(k1, k2, 32);
}

/* Reference values computed independently with Python (hashlib.blake2b and the cryptography
 * package's X25519) from the inputs PROTOCOL.md section 3 gives: PSK 00..1f, ephemeral
 * secrets 40..5f (numerical) and 60..7f (physical), session id 0x0123456789abcdef, and for
 * the transcript a 20-byte HELLO payload 90..a3 and a 9-byte HELLO_ACK payload b0..b8. */
static void test_derivation_vectors(void **state)
{
    (void)state;
    uint8_t psk[32], en[32], ep[32], enp[32], epp[32], dh[32], dh2[32], hk[32], ak[32], th[32];
    uint8_t hp[20], ap[9];
    for (int i = 0; i < 32; i++) {
        psk[i] = (uint8_t)i;
        en[i] = (uint8_t)(0x40 + i);
        ep[i] = (uint8_t)(0x60 + i);
    }
    for (int i = 0; i < 20; i++)
        hp[i] = (uint8_t)(0x90 + i);
    for (int i = 0; i < 9; i++)
        ap[i] = (uint8_t)(0xb0 + i);
    const uint64_t sid = UINT64_C(0x0123456789abcdef);
    drths_crypto_eph_public(enp, en);
    drths_crypto_eph_public(epp, ep);
    assert_hex(enp, 32, "79a631eede1bf9c98f12032cdeadd0e7a079398fc786b88cc846ec89af85a51a");
    assert_hex(epp, 32, "675dd574ed7789310b3d2e7681f3790b466c773b1521fecf36577958371ea52f");
    assert_int_equal(drths_crypto_dh(dh, en, epp), 0);
    assert_int_equal(drths_crypto_dh(dh2, ep, enp), 0);
    assert_memory_equal(dh, dh2, 32);
    assert_hex(dh, 32, "d6fb939511b2381bc8599b4b8edc5968829450dfd7a87aebe78a703cd04cd54e");
    drths_crypto_derive_hello(psk, sid, enp, hk);
    assert_hex(hk, 32, "4405f6623942fc5f2f60cf98b308fabdef9c0317cf427b49f543bbf2e7dc7be8");
    drths_crypto_derive_ack(psk, sid, enp, epp, dh, ak);
    assert_hex(ak, 32, "c67b08a956e42ec4f7adcadbe48c497321d6bce9d35076a2baf7497e372aa292");
    drths_crypto_transcript(th, sid, enp, hp, sizeof hp, epp, ap, sizeof ap);
    assert_hex(th, 32, "1b669ce8c051c5b44c3839fa03df289f709affd656c6077d4f41dd9fbbf9d524");
    drths_session_keys_t k;
    drths_crypto_derive(psk, dh, th, &k);
    assert_hex(k.num_to_phys, 32, "da7ea875e38181cae124c5e0ee7390c6eb36de26cf514bcb17bb9441889619e2");
    assert_hex(k.phys_to_num, 32, "4902389ff045a291a6366f179d7e927a017c34d67979ea1ba74e1d720ecd8641");

    uint8_t rk[32];
    drths_key_rehearsal(rk);
    assert_hex(rk, 32, "307898b8944ab070dde8aebfa18bc1ad64723c192ccc1e6f781f638e2c4943e9");
    char id[17];
    drths_key_id(psk, id);
    assert_string_equal(id, "b684a5c5f76a06f5");

    /* Every input matters: the responder's ephemeral changes the HELLO_ACK key (so a replayed
     * HELLO never gets a HELLO_ACK under a key used before), the transcript and DH the
     * session keys. */
    uint8_t ak2[32], epp2[32];
    epp2[0] = 9;
    memcpy(epp2 + 1, epp + 1, 31);
    drths_crypto_derive_ack(psk, sid, enp, epp2, dh, ak2);
    assert_memory_not_equal(ak, ak2, 32);
    drths_session_keys_t k2;
    th[31] ^= 1;
    drths_crypto_derive(psk, dh, th, &k2);
    assert_memory_not_equal(k.num_to_phys, k2.num_to_phys, 32);
    assert_memory_not_equal(k.phys_to_num, k2.phys_to_num, 32);
    th[31] ^= 1;
    dh[0] ^= 0x80;
    drths_crypto_derive(psk, dh, th, &k2);
    assert_memory_not_equal(k.num_to_phys, k2.num_to_phys, 32);
    drths_crypto_derive_hello(psk, sid ^ 1, enp, rk);
    assert_memory_not_equal(hk, rk, 32);
    /* A low-order point (all zeros) is refused, not turned into a known key. */
    uint8_t zero[32] = {0};
    assert_int_equal(drths_crypto_dh(dh2, en, zero), -EBADMSG);
}

/* RFC 8439 section 2.8.2 AEAD test vector. Its nonce 07 00 00 00 40 41 .. 47 has exactly the
 * drths layout (direction byte, three zero bytes, big-endian counter), so this checks the
 * nonce construction and the AEAD at once. */
static void test_aead_rfc8439(void **state)
{
    (void)state;
    uint8_t key[32], ad[12], tag[16];
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(0x80 + i);
    unhex("50515253c0c1c2c3c4c5c6c7", ad, 12);
    char text[] = "Ladies and Gentlemen of the class of '99: If I could offer you only one tip "
                  "for the future, sunscreen would be it.";
    size_t n = strlen(text);
    uint8_t msg[200], back[200];
    memcpy(msg, text, n);
    uint8_t nonce[12];
    drths_crypto_nonce(nonce, (drths_role_t)7, UINT64_C(0x4041424344454647));
    assert_hex(nonce, 12, "070000004041424344454647");
    drths_crypto_seal(key, (drths_role_t)7, UINT64_C(0x4041424344454647), ad, 12, msg, n, tag);
    assert_hex(msg, 16, "d31a8d34648e60db7b86afbc53ef7ec2");
    assert_hex(tag, 16, "1ae10b594f09e26a7e902ecbd0600691");
    assert_int_equal(drths_crypto_open(key, (drths_role_t)7, UINT64_C(0x4041424344454647), ad, 12,
                                       msg, n, tag, back),
                     0);
    assert_memory_equal(back, text, n);
    /* The other direction byte, the next counter, other associated data: all fail. */
    assert_int_equal(drths_crypto_open(key, DRTHS_ROLE_PHYSICAL, UINT64_C(0x4041424344454647), ad,
                                       12, msg, n, tag, back),
                     -EBADMSG);
    assert_int_equal(drths_crypto_open(key, (drths_role_t)7, UINT64_C(0x4041424344454648), ad, 12,
                                       msg, n, tag, back),
                     -EBADMSG);
    ad[0] ^= 1;
    assert_int_equal(drths_crypto_open(key, (drths_role_t)7, UINT64_C(0x4041424344454647), ad, 12,
                                       msg, n, tag, back),
                     -EBADMSG);
}

/* drths_crypto_seal / _open compose the AEAD from ChaCha20 and Poly1305 (crypto.c): they must give
 * libsodium's crypto_aead_chacha20poly1305_ietf bytes for every message length (each length
 * up to 1200 bytes, across the 448-byte head of the first keystream call, then strides up to the
 * largest payload) and associated-data length (0 to 240: the header's 40, with an ephemeral key
 * 72, and beyond the 128 bytes that crypto.c feeds to Poly1305 from a local copy), and refuse
 * any changed bit. */
static void test_aead_matches_libsodium(void **state)
{
    (void)state;
    enum { MAX = 4864 };
    static uint8_t msg[MAX], c[MAX], ref[MAX], back[MAX];
    uint8_t key[32], ad[256], tag[16], reftag[16], nonce[12];
    randombytes_buf(msg, sizeof msg);
    int checked = 0;
    for (size_t len = 0; len <= MAX; len += len < 1200 ? 1 : 61) {
        randombytes_buf(key, sizeof key);
        randombytes_buf(ad, sizeof ad);
        size_t adlen = len % 3 == 0 ? 40 : len % 3 == 1 ? len % 73 : (len * 37) % 241;
        uint64_t counter = ((uint64_t)len << 40) + len + 1;
        drths_role_t sender = len % 2 ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL;
        memcpy(c, msg, len);
        drths_crypto_seal(key, sender, counter, ad, adlen, c, len, tag);
        drths_crypto_nonce(nonce, sender, counter);
        crypto_aead_chacha20poly1305_ietf_encrypt_detached(ref, reftag, NULL, msg, len, ad, adlen,
                                                           NULL, nonce, key);
        assert_memory_equal(c, ref, len);
        assert_memory_equal(tag, reftag, 16);
        assert_int_equal(drths_crypto_open(key, sender, counter, ad, adlen, c, len, tag, back), 0);
        assert_memory_equal(back, msg, len);
        /* One flipped bit, in the ciphertext, the associated data or the tag: refused, and the
         * output is zeroed, not a partial plaintext. */
        uint8_t *where = len ? c : adlen ? ad : tag;
        size_t at = (len * 7) % (len ? len : adlen ? adlen : 16);
        uint8_t bit = (uint8_t)(1u << (len % 8));
        where[at] ^= bit;
        memset(back, 0xAA, len);
        assert_int_equal(drths_crypto_open(key, sender, counter, ad, adlen, c, len, tag, back),
                         -EBADMSG);
        for (size_t i = 0; i < len; i++)
            assert_int_equal(back[i], 0);
        where[at] ^= bit;
        tag[len % 16] ^= 0x80;
        assert_int_equal(drths_crypto_open(key, sender, counter, ad, adlen, c, len, tag, back),
                         -EBADMSG);
        checked++;
    }
    assert_true(checked > 1200);
}

static void test_random(void **state)
{
    (void)state;
    uint64_t a = drths_crypto_random_session_id(), b = drths_crypto_random_session_id();
    assert_true(a != 0 && b != 0 && a != b);
    uint8_t p1[32], s1[32], p2[32], s2[32];
    drths_crypto_eph_keypair(p1, s1);
    drths_crypto_eph_keypair(p2, s2);
    assert_memory_not_equal(s1, s2, 32);
    assert_memory_not_equal(p1, p2, 32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_load_forms),   cmocka_unit_test(test_key_load_refusals),
        cmocka_unit_test(test_key_generate),     cmocka_unit_test(test_derivation_vectors),
        cmocka_unit_test(test_aead_rfc8439),     cmocka_unit_test(test_aead_matches_libsodium),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
