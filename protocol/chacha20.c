#include "protocol/chacha20.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include <sodium.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_VECTORS 1
#include <immintrin.h>
#else
#define HAVE_X86_VECTORS 0
#endif

#if HAVE_X86_VECTORS

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The initial state of block 0 (RFC 8439 section 2.3): constants, key, counter 0, nonce. */
static void state_init(uint32_t s[16], const uint8_t key[32], const uint8_t nonce[12])
{
    s[0] = 0x61707865;
    s[1] = 0x3320646e;
    s[2] = 0x79622d32;
    s[3] = 0x6b206574;
    for (int i = 0; i < 8; i++)
        s[4 + i] = get_le32(key + 4 * i);
    s[12] = 0;
    for (int i = 0; i < 3; i++)
        s[13 + i] = get_le32(nonce + 4 * i);
}

/* One quarter round on eight blocks at once; ROTL(v, n) rotates each 32-bit lane left. */
#define QR(a, b, c, d)                                                                             \
    do {                                                                                           \
        a = _mm256_add_epi32(a, b);                                                                \
        d = ROTL(_mm256_xor_si256(d, a), 16);                                                      \
        c = _mm256_add_epi32(c, d);                                                                \
        b = ROTL(_mm256_xor_si256(b, c), 12);                                                      \
        a = _mm256_add_epi32(a, b);                                                                \
        d = ROTL(_mm256_xor_si256(d, a), 8);                                                       \
        c = _mm256_add_epi32(c, d);                                                                \
        b = ROTL(_mm256_xor_si256(b, c), 7);                                                       \
    } while (0)

/* Eight 32-bit words of eight blocks (v0: word w of blocks 0..7, v1: word w+1, ...) transposed
 * and stored as words w .. w+7 of each block, block b at ks + 64 b. */
#define STORE8(ks, w, v0, v1, v2, v3, v4, v5, v6, v7)                                              \
    do {                                                                                           \
        __m256i t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1);            \
        __m256i t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3);            \
        __m256i t4 = _mm256_unpacklo_epi32(v4, v5), t5 = _mm256_unpackhi_epi32(v4, v5);            \
        __m256i t6 = _mm256_unpacklo_epi32(v6, v7), t7 = _mm256_unpackhi_epi32(v6, v7);            \
        __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);            \
        __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);            \
        __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);            \
        __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);            \
        uint8_t *q = (ks) + 4 * (w);                                                               \
        _mm256_storeu_si256((__m256i *)(q + 0 * 64), _mm256_permute2x128_si256(u0, u4, 0x20));     \
        _mm256_storeu_si256((__m256i *)(q + 1 * 64), _mm256_permute2x128_si256(u1, u5, 0x20));     \
        _mm256_storeu_si256((__m256i *)(q + 2 * 64), _mm256_permute2x128_si256(u2, u6, 0x20));     \
        _mm256_storeu_si256((__m256i *)(q + 3 * 64), _mm256_permute2x128_si256(u3, u7, 0x20));     \
        _mm256_storeu_si256((__m256i *)(q + 4 * 64), _mm256_permute2x128_si256(u0, u4, 0x31));     \
        _mm256_storeu_si256((__m256i *)(q + 5 * 64), _mm256_permute2x128_si256(u1, u5, 0x31));     \
        _mm256_storeu_si256((__m256i *)(q + 6 * 64), _mm256_permute2x128_si256(u2, u6, 0x31));     \
        _mm256_storeu_si256((__m256i *)(q + 7 * 64), _mm256_permute2x128_si256(u3, u7, 0x31));     \
    } while (0)

/* The whole computation: lane b of every register is block b (counter b), 20 rounds, the
 * input added back, then transposed into eight consecutive blocks. */
#define KS8_BODY(ks, s)                                                                            \
    do {                                                                                           \
        const __m256i ctr = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                             \
        __m256i x0 = _mm256_set1_epi32((int)s[0]), x1 = _mm256_set1_epi32((int)s[1]);              \
        __m256i x2 = _mm256_set1_epi32((int)s[2]), x3 = _mm256_set1_epi32((int)s[3]);              \
        __m256i x4 = _mm256_set1_epi32((int)s[4]), x5 = _mm256_set1_epi32((int)s[5]);              \
        __m256i x6 = _mm256_set1_epi32((int)s[6]), x7 = _mm256_set1_epi32((int)s[7]);              \
        __m256i x8 = _mm256_set1_epi32((int)s[8]), x9 = _mm256_set1_epi32((int)s[9]);              \
        __m256i x10 = _mm256_set1_epi32((int)s[10]), x11 = _mm256_set1_epi32((int)s[11]);          \
        __m256i x12 = _mm256_add_epi32(_mm256_set1_epi32((int)s[12]), ctr);                        \
        __m256i x13 = _mm256_set1_epi32((int)s[13]), x14 = _mm256_set1_epi32((int)s[14]);          \
        __m256i x15 = _mm256_set1_epi32((int)s[15]);                                               \
        for (int i = 0; i < 10; i++) {                                                             \
            QR(x0, x4, x8, x12);                                                                   \
            QR(x1, x5, x9, x13);                                                                   \
            QR(x2, x6, x10, x14);                                                                  \
            QR(x3, x7, x11, x15);                                                                  \
            QR(x0, x5, x10, x15);                                                                  \
            QR(x1, x6, x11, x12);                                                                  \
            QR(x2, x7, x8, x13);                                                                   \
            QR(x3, x4, x9, x14);                                                                   \
        }                                                                                          \
        x0 = _mm256_add_epi32(x0, _mm256_set1_epi32((int)s[0]));                                   \
        x1 = _mm256_add_epi32(x1, _mm256_set1_epi32((int)s[1]));                                   \
        x2 = _mm256_add_epi32(x2, _mm256_set1_epi32((int)s[2]));                                   \
        x3 = _mm256_add_epi32(x3, _mm256_set1_epi32((int)s[3]));                                   \
        x4 = _mm256_add_epi32(x4, _mm256_set1_epi32((int)s[4]));                                   \
        x5 = _mm256_add_epi32(x5, _mm256_set1_epi32((int)s[5]));                                   \
        x6 = _mm256_add_epi32(x6, _mm256_set1_epi32((int)s[6]));                                   \
        x7 = _mm256_add_epi32(x7, _mm256_set1_epi32((int)s[7]));                                   \
        x8 = _mm256_add_epi32(x8, _mm256_set1_epi32((int)s[8]));                                   \
        x9 = _mm256_add_epi32(x9, _mm256_set1_epi32((int)s[9]));                                   \
        x10 = _mm256_add_epi32(x10, _mm256_set1_epi32((int)s[10]));                                \
        x11 = _mm256_add_epi32(x11, _mm256_set1_epi32((int)s[11]));                                \
        x12 = _mm256_add_epi32(x12, _mm256_add_epi32(_mm256_set1_epi32((int)s[12]), ctr));         \
        x13 = _mm256_add_epi32(x13, _mm256_set1_epi32((int)s[13]));                                \
        x14 = _mm256_add_epi32(x14, _mm256_set1_epi32((int)s[14]));                                \
        x15 = _mm256_add_epi32(x15, _mm256_set1_epi32((int)s[15]));                                \
        STORE8(ks, 0, x0, x1, x2, x3, x4, x5, x6, x7);                                             \
        STORE8(ks, 8, x8, x9, x10, x11, x12, x13, x14, x15);                                       \
    } while (0)

/* AVX2: rotations by 16 and 8 as byte shuffles, by 12 and 7 as two shifts and an OR. */
#define ROTL(v, n)                                                                                 \
    ((n) == 16  ? _mm256_shuffle_epi8(v, rot16)                                                    \
     : (n) == 8 ? _mm256_shuffle_epi8(v, rot8)                                                     \
                : _mm256_or_si256(_mm256_slli_epi32(v, n), _mm256_srli_epi32(v, 32 - (n))))

__attribute__((target("avx2"))) static void ks8_avx2(uint8_t *ks, const uint32_t s[16])
{
    const __m256i rot16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2,
                                           3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    const __m256i rot8 = _mm256_setr_epi8(3, 0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14, 3,
                                          0, 1, 2, 7, 4, 5, 6, 11, 8, 9, 10, 15, 12, 13, 14);
    KS8_BODY(ks, s);
}
#undef ROTL

/* AVX-512VL: one rotate instruction each, and 32 vector registers, so nothing spills. */
#define ROTL(v, n) _mm256_rol_epi32(v, n)

__attribute__((target("avx2,avx512f,avx512vl"))) static void ks8_avx512vl(uint8_t *ks,
                                                                          const uint32_t s[16])
{
    KS8_BODY(ks, s);
}
#undef ROTL

static bool cpu_has(drths_chacha20_impl_t impl)
{
    switch (impl) {
    case DRTHS_CHACHA20_AVX2:
        return __builtin_cpu_supports("avx2");
    case DRTHS_CHACHA20_AVX512VL:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512vl");
    default:
        return false;
    }
}

#else

static bool cpu_has(drths_chacha20_impl_t impl)
{
    (void)impl;
    return false;
}

#endif

/* AUTO, or what drths_chacha20_prefer chose (written before the threads start; atomic all the
 * same, so no reader can ever see it torn). */
static _Atomic int preferred = DRTHS_CHACHA20_AUTO;

int drths_chacha20_prefer(drths_chacha20_impl_t impl)
{
    if (impl != DRTHS_CHACHA20_AUTO && impl != DRTHS_CHACHA20_LIBSODIUM && !cpu_has(impl))
        return -ENOTSUP;
    atomic_store_explicit(&preferred, (int)impl, memory_order_release);
    return 0;
}

drths_chacha20_impl_t drths_chacha20_impl(void)
{
    int p = atomic_load_explicit(&preferred, memory_order_acquire);
    if (p != DRTHS_CHACHA20_AUTO)
        return (drths_chacha20_impl_t)p;
    if (cpu_has(DRTHS_CHACHA20_AVX512VL))
        return DRTHS_CHACHA20_AVX512VL;
    if (cpu_has(DRTHS_CHACHA20_AVX2))
        return DRTHS_CHACHA20_AVX2;
    return DRTHS_CHACHA20_LIBSODIUM;
}

const char *drths_chacha20_impl_name(drths_chacha20_impl_t impl)
{
    switch (impl) {
    case DRTHS_CHACHA20_AUTO:
        return "auto";
    case DRTHS_CHACHA20_LIBSODIUM:
        return "libsodium";
    case DRTHS_CHACHA20_AVX2:
        return "avx2";
    case DRTHS_CHACHA20_AVX512VL:
        return "avx512vl";
    default:
        return "unknown";
    }
}

bool drths_chacha20_ks8_with(drths_chacha20_impl_t impl, uint8_t ks[DRTHS_CHACHA20_KS_BYTES],
                             const uint8_t key[32], const uint8_t nonce[12])
{
    if (impl == DRTHS_CHACHA20_AUTO)
        impl = drths_chacha20_impl();
    if (impl == DRTHS_CHACHA20_LIBSODIUM) {
        crypto_stream_chacha20_ietf(ks, DRTHS_CHACHA20_KS_BYTES, nonce, key);
        return true;
    }
    if (!cpu_has(impl))
        return false;
#if HAVE_X86_VECTORS
    uint32_t s[16];
    state_init(s, key, nonce);
    if (impl == DRTHS_CHACHA20_AVX512VL)
        ks8_avx512vl(ks, s);
    else
        ks8_avx2(ks, s);
    sodium_memzero(s, sizeof s);
    return true;
#else
    return false;
#endif
}

void drths_chacha20_ks8(uint8_t ks[DRTHS_CHACHA20_KS_BYTES], const uint8_t key[32],
                        const uint8_t nonce[12])
{
    drths_chacha20_ks8_with(DRTHS_CHACHA20_AUTO, ks, key, nonce);
}
