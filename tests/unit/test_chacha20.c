#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <sodium.h>

#include "protocol/chacha20.h"
#include "protocol/crypto.h"

static const drths_chacha20_impl_t impls[] = {DRTHS_CHACHA20_LIBSODIUM, DRTHS_CHACHA20_AVX2,
                                              DRTHS_CHACHA20_AVX512VL, DRTHS_CHACHA20_AUTO};
#define N_IMPLS (sizeof impls / sizeof impls[0])

static int setup(void **state)
{
    (void)state;
    return sodium_init() < 0 ? -1 : 0;
}

/* RFC 8439 section 2.3.2: key 00 01 .. 1f, nonce 00 00 00 09 00 00 00 4a 00 00 00 00, the
 * serialized block of counter 1, i.e. block 1 of the keystream. */
static void test_rfc8439_block(void **state)
{
    (void)state;
    static const char want[] = "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
                               "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e";
    uint8_t key[32], nonce[12] = {0, 0, 0, 9, 0, 0, 0, 0x4a, 0, 0, 0, 0};
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)i;
    int ran = 0;
    for (size_t i = 0; i < N_IMPLS; i++) {
        uint8_t ks[DRTHS_CHACHA20_KS_BYTES];
        char got[129];
        if (!drths_chacha20_ks8_with(impls[i], ks, key, nonce))
            continue;
        for (int b = 0; b < 64; b++)
            snprintf(got + 2 * b, 3, "%02x", ks[64 + b]);
        assert_string_equal(got, want);
        ran++;
    }
    assert_true(ran >= 2); /* libsodium and AUTO always run */
}

/* Every implementation this CPU runs gives libsodium's eight blocks, for keys and nonces with
 * every bit pattern (random) and for the all-ones ones (carries in the additions). */
static void test_matches_libsodium(void **state)
{
    (void)state;
    uint8_t key[32], nonce[12], ref[DRTHS_CHACHA20_KS_BYTES], ks[DRTHS_CHACHA20_KS_BYTES];
    int ran[N_IMPLS] = {0};
    for (int t = 0; t < 2000; t++) {
        if (t == 0) {
            memset(key, 0xff, sizeof key);
            memset(nonce, 0xff, sizeof nonce);
        } else {
            randombytes_buf(key, sizeof key);
            randombytes_buf(nonce, sizeof nonce);
        }
        crypto_stream_chacha20_ietf(ref, sizeof ref, nonce, key);
        for (size_t i = 0; i < N_IMPLS; i++) {
            memset(ks, 0x5a, sizeof ks);
            if (!drths_chacha20_ks8_with(impls[i], ks, key, nonce))
                continue;
            assert_memory_equal(ks, ref, sizeof ref);
            ran[i]++;
        }
    }
    for (size_t i = 0; i < N_IMPLS; i++)
        print_message("chacha20 %s: %d keystreams checked\n", drths_chacha20_impl_name(impls[i]),
                      ran[i]);
    assert_int_equal(ran[0], 2000);
    assert_int_equal(ran[N_IMPLS - 1], 2000);
}

/* The automatic choice is one of the real implementations, runs, and is what AUTO uses; an
 * implementation the CPU cannot run says so and leaves the output alone. */
static void test_choice(void **state)
{
    (void)state;
    drths_chacha20_impl_t chosen = drths_chacha20_impl();
    assert_int_not_equal(chosen, DRTHS_CHACHA20_AUTO);
    uint8_t key[32] = {7}, nonce[12] = {9}, a[DRTHS_CHACHA20_KS_BYTES], b[DRTHS_CHACHA20_KS_BYTES];
    assert_true(drths_chacha20_ks8_with(chosen, a, key, nonce));
    drths_chacha20_ks8(b, key, nonce);
    assert_memory_equal(a, b, sizeof a);
    for (size_t i = 0; i < N_IMPLS; i++) {
        memset(a, 0x33, sizeof a);
        if (drths_chacha20_ks8_with(impls[i], a, key, nonce))
            continue;
        for (size_t k = 0; k < sizeof a; k++)
            assert_int_equal(a[k], 0x33);
        assert_true(impls[i] != chosen && impls[i] != DRTHS_CHACHA20_LIBSODIUM);
    }
    assert_string_equal(drths_chacha20_impl_name(DRTHS_CHACHA20_AVX512VL), "avx512vl");
    assert_string_equal(drths_chacha20_impl_name((drths_chacha20_impl_t)99), "unknown");
}

/* A preferred implementation is used by drths_chacha20_ks8 until AUTO puts the fastest back;
 * one the CPU cannot run is refused and changes nothing. */
static void test_prefer(void **state)
{
    (void)state;
    drths_chacha20_impl_t fastest = drths_chacha20_impl();
    uint8_t key[32] = {1, 2, 3}, nonce[12] = {4}, a[DRTHS_CHACHA20_KS_BYTES],
            b[DRTHS_CHACHA20_KS_BYTES];
    assert_int_equal(drths_chacha20_prefer(DRTHS_CHACHA20_LIBSODIUM), 0);
    assert_int_equal(drths_chacha20_impl(), DRTHS_CHACHA20_LIBSODIUM);
    drths_chacha20_ks8(a, key, nonce);
    crypto_stream_chacha20_ietf(b, sizeof b, nonce, key);
    assert_memory_equal(a, b, sizeof a);
    for (size_t i = 0; i < N_IMPLS; i++) {
        bool runs = drths_chacha20_ks8_with(impls[i], a, key, nonce);
        assert_int_equal(drths_chacha20_prefer(impls[i]), runs ? 0 : -ENOTSUP);
        if (runs && impls[i] != DRTHS_CHACHA20_AUTO)
            assert_int_equal(drths_chacha20_impl(), impls[i]);
        assert_int_equal(drths_chacha20_prefer(DRTHS_CHACHA20_LIBSODIUM), 0);
    }
    assert_int_equal(drths_chacha20_prefer(DRTHS_CHACHA20_AUTO), 0);
    assert_int_equal(drths_chacha20_impl(), fastest);
}

/* drths_crypto_init's check of the vector code against libsodium passes on this CPU: the
 * fastest code it runs stays in use (a mismatch would have put libsodium's in its place). */
static void test_crypto_init_keeps_the_checked_code(void **state)
{
    (void)state;
    uint8_t key[32] = {5}, nonce[12] = {6}, a[DRTHS_CHACHA20_KS_BYTES];
    drths_chacha20_impl_t fastest = DRTHS_CHACHA20_LIBSODIUM;
    if (drths_chacha20_ks8_with(DRTHS_CHACHA20_AVX512VL, a, key, nonce))
        fastest = DRTHS_CHACHA20_AVX512VL;
    else if (drths_chacha20_ks8_with(DRTHS_CHACHA20_AVX2, a, key, nonce))
        fastest = DRTHS_CHACHA20_AVX2;
    assert_int_equal(drths_crypto_init(), 0);
    assert_int_equal(drths_crypto_init(), 0);
    assert_int_equal(drths_chacha20_impl(), fastest);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc8439_block),
        cmocka_unit_test(test_matches_libsodium),
        cmocka_unit_test(test_choice),
        cmocka_unit_test(test_prefer),
        cmocka_unit_test(test_crypto_init_keeps_the_checked_code),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
