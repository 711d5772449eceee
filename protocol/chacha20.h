/* The first eight blocks of a ChaCha20 IETF keystream (RFC 8439 section 2.3: 32-byte key,
 * 12-byte nonce, 32-bit block counter from 0), for protocol/crypto.c's AEAD: block 0 is the
 * one-time Poly1305 key, blocks 1 to 7 encrypt the first 448 bytes of a datagram's payload,
 * which holds every steady-state COMMAND and FEEDBACK of the examples.
 *
 * Eight blocks are computed side by side, one 32-bit state word of all eight in each 256-bit
 * register: with AVX-512VL (rotations in one instruction), else with AVX2, else through
 * libsodium's crypto_stream_chacha20_ietf. The implementation is chosen per call from the CPU's
 * features (a read of a table the C runtime fills before main), so there is no state to set up.
 * Every implementation gives libsodium's bytes (unit.chacha20 compares them, and the RFC 8439
 * test vectors).
 *
 * Ownership: the caller's buffers only; nothing is kept. The key words live on the stack and in
 * vector registers during the call and are wiped from the stack before it returns.
 */
#ifndef DRTHS_CHACHA20_H
#define DRTHS_CHACHA20_H

#include <stdbool.h>
#include <stdint.h>

#define DRTHS_CHACHA20_BLOCK_BYTES 64
#define DRTHS_CHACHA20_KS_BYTES (8 * DRTHS_CHACHA20_BLOCK_BYTES)

typedef enum drths_chacha20_impl {
    DRTHS_CHACHA20_AUTO = 0,  /* the fastest one this CPU runs */
    DRTHS_CHACHA20_LIBSODIUM, /* crypto_stream_chacha20_ietf; every CPU */
    DRTHS_CHACHA20_AVX2,      /* x86-64 with AVX2 */
    DRTHS_CHACHA20_AVX512VL   /* x86-64 with AVX-512F and AVX-512VL */
} drths_chacha20_impl_t;

/* ks = keystream blocks 0 .. 7 of (key, nonce). RT-safe. */
void drths_chacha20_ks8(uint8_t ks[DRTHS_CHACHA20_KS_BYTES], const uint8_t key[32],
                        const uint8_t nonce[12]);

/* The same with a given implementation, for tests and benchmarks. Returns false, leaving ks
 * untouched, if this CPU or build cannot run it. RT-safe. */
bool drths_chacha20_ks8_with(drths_chacha20_impl_t impl, uint8_t ks[DRTHS_CHACHA20_KS_BYTES],
                             const uint8_t key[32], const uint8_t nonce[12]);

/* The implementation drths_chacha20_ks8 uses on this CPU (never AUTO): the fastest one, or the
 * one drths_chacha20_prefer named. RT-safe. */
drths_chacha20_impl_t drths_chacha20_impl(void);

/* Makes drths_chacha20_ks8 use impl from now on (AUTO: the fastest again), so that a benchmark
 * can show what a CPU without AVX-512VL or AVX2 would do. Returns 0, or -ENOTSUP (nothing
 * changed) if this CPU cannot run impl. init-only: call it before other threads use this
 * module. */
int drths_chacha20_prefer(drths_chacha20_impl_t impl);

/* "libsodium", "avx2", "avx512vl" ("auto" for AUTO). RT-safe. */
const char *drths_chacha20_impl_name(drths_chacha20_impl_t impl);

#endif
