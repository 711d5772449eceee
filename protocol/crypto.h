/* Keys and authenticated encryption for the drths wire protocol (PROTOCOL.md sections 3 and 4).
 *
 * - The pre-shared key (PSK) is 32 bytes in a key file that only its owner may read
 *   (drths_key_load, protocol/keyfile.h), made by drths-keygen, copied to both laboratories out
 *   of band.
 * - Each site draws a fresh X25519 ephemeral key pair per session (Noise / WireGuard style,
 *   mixed with the PSK). HELLO is sealed under a key from PSK, session id and the numerical
 *   site's ephemeral; HELLO_ACK under one that also mixes the actuator site's ephemeral and the
 *   Diffie-Hellman result, so no two HELLO_ACKs share a key even for a replayed HELLO.
 * - All other messages are sealed with one key per direction derived from PSK, the DH result
 *   and the transcript hash of both HELLOs. The ephemeral secrets are wiped once the keys
 *   exist, so a PSK that leaks later does not open recorded sessions.
 * - AEAD: ChaCha20-Poly1305 IETF, detached 16-byte tag, 12-byte nonce
 *   direction || 00 00 00 || counter (big-endian 64 bits). Composed for speed on short
 *   messages from eight ChaCha20 blocks computed side by side (protocol/chacha20.h: AVX-512VL,
 *   AVX2 or libsodium's code, whichever the CPU runs fastest) and libsodium's Poly1305; byte for
 *   byte libsodium's AEAD (unit.crypto).
 *
 * Ownership: every key buffer belongs to the caller; nothing here allocates or keeps pointers.
 */
#ifndef DRTHS_CRYPTO_H
#define DRTHS_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/platform/error.h"

#define DRTHS_KEY_BYTES 32
#define DRTHS_EPH_BYTES 32 /* X25519 public or secret key */
#define DRTHS_AEAD_NONCE_BYTES 12
#define DRTHS_TAG_BYTES 16

/* A site's role. The value is also the direction byte of everything that role sends. */
typedef enum drths_role {
    DRTHS_ROLE_NUMERICAL = 1,
    DRTHS_ROLE_PHYSICAL = 2
} drths_role_t;

/* Per-session keys, one per direction, named by sender -> receiver. */
typedef struct drths_session_keys {
    uint8_t num_to_phys[DRTHS_KEY_BYTES];
    uint8_t phys_to_num[DRTHS_KEY_BYTES];
} drths_session_keys_t;

/* Initialises libsodium (idempotent) and, the first time, checks protocol/chacha20's vector
 * code against libsodium's keystream (libsodium's own from then on if they differ). Returns 0
 * or -EIO. init-only. */
int drths_crypto_init(void);

/* Creates path with mode 0600 holding 32 random bytes (raw, or 64 hex digits + "\n" when hex is
 * true). Refuses an existing path unless force is true; with force the file is replaced
 * atomically (temporary file + rename), so the old file's mode does not carry over. If key is
 * not NULL it receives the key written. init-only. */
int drths_key_generate(const char *path, bool hex, bool force, uint8_t key[DRTHS_KEY_BYTES],
                       drths_error_t *err);

/* The well-known rehearsal key: BLAKE2b-256 of the ASCII string
 * "drths rehearsal key v1: public, for localhost rehearsal only". It protects against nothing;
 * sites use it only when no key file is configured, and print a warning. RT-safe. */
void drths_key_rehearsal(uint8_t key[DRTHS_KEY_BYTES]);

/* Writes a 16-hex-digit key id (first 8 bytes of BLAKE2b-256(key = PSK, "drths-v1 key id"))
 * plus NUL into out, so two labs can check over the phone that they hold the same key without
 * revealing it. RT-safe. */
void drths_key_id(const uint8_t key[DRTHS_KEY_BYTES], char out[17]);

/* Fresh X25519 ephemeral key pair (kernel CSPRNG through libsodium), made once per session
 * before the handshake. init-only. */
void drths_crypto_eph_keypair(uint8_t pk[DRTHS_EPH_BYTES], uint8_t sk[DRTHS_EPH_BYTES]);
/* The public key of a secret (for fixed test vectors). RT-safe. */
void drths_crypto_eph_public(uint8_t pk[DRTHS_EPH_BYTES], const uint8_t sk[DRTHS_EPH_BYTES]);
/* X25519(sk, peer_pk). Returns 0, or -EBADMSG when peer_pk is a low-order point (the result
 * would be all zeros); out is then zeroed. Costs ~50 us: never on the tick path. RT-safe. */
int drths_crypto_dh(uint8_t out[DRTHS_KEY_BYTES], const uint8_t sk[DRTHS_EPH_BYTES],
                    const uint8_t peer_pk[DRTHS_EPH_BYTES]);

/* HELLO key: BLAKE2b-256(key = PSK, "drths-v2 hello" || u64be(session_id) || e_num). RT-safe. */
void drths_crypto_derive_hello(const uint8_t psk[DRTHS_KEY_BYTES], uint64_t session_id,
                               const uint8_t e_num[DRTHS_EPH_BYTES], uint8_t key[DRTHS_KEY_BYTES]);
/* HELLO_ACK key (also the key of an ABORT refusing a HELLO): BLAKE2b-256(key = PSK,
 * "drths-v2 hello_ack" || u64be(session_id) || e_num || e_phys || dh). RT-safe. */
void drths_crypto_derive_ack(const uint8_t psk[DRTHS_KEY_BYTES], uint64_t session_id,
                             const uint8_t e_num[DRTHS_EPH_BYTES],
                             const uint8_t e_phys[DRTHS_EPH_BYTES],
                             const uint8_t dh[DRTHS_KEY_BYTES], uint8_t key[DRTHS_KEY_BYTES]);
/* Transcript hash: BLAKE2b-256 (no key) of "drths-v2 transcript" || u64be(session_id) || e_num ||
 * u16be(len) || HELLO payload || e_phys || u16be(len) || HELLO_ACK payload (the plaintext
 * msgpack bytes as sent). RT-safe. */
void drths_crypto_transcript(uint8_t th[DRTHS_KEY_BYTES], uint64_t session_id,
                             const uint8_t e_num[DRTHS_EPH_BYTES], const uint8_t *hello,
                             size_t hello_len, const uint8_t e_phys[DRTHS_EPH_BYTES],
                             const uint8_t *ack, size_t ack_len);
/* Both per-direction session keys: BLAKE2b-256(key = PSK, "drths-v2 session" || direction ||
 * dh || transcript). RT-safe. */
void drths_crypto_derive(const uint8_t psk[DRTHS_KEY_BYTES], const uint8_t dh[DRTHS_KEY_BYTES],
                         const uint8_t transcript[DRTHS_KEY_BYTES], drths_session_keys_t *keys);

/* The 12-byte AEAD nonce of the datagram numbered counter sent by sender. RT-safe. */
void drths_crypto_nonce(uint8_t nonce[DRTHS_AEAD_NONCE_BYTES], drths_role_t sender,
                        uint64_t counter);

/* Encrypts msg in place and writes the tag; ad is authenticated, not encrypted. RT-safe. */
void drths_crypto_seal(const uint8_t key[DRTHS_KEY_BYTES], drths_role_t sender, uint64_t counter,
                       const uint8_t *ad, size_t adlen, uint8_t *msg, size_t mlen,
                       uint8_t tag[DRTHS_TAG_BYTES]);

/* Verifies the tag and, only if it is right, decrypts c into out (which may equal c).
 * Returns 0, or -EBADMSG when the tag does not verify (out is then zeroed). RT-safe. */
int drths_crypto_open(const uint8_t key[DRTHS_KEY_BYTES], drths_role_t sender, uint64_t counter,
                      const uint8_t *ad, size_t adlen, const uint8_t *c, size_t clen,
                      const uint8_t tag[DRTHS_TAG_BYTES], uint8_t *out);

/* A fresh nonzero session id (kernel CSPRNG through libsodium). init-only. */
uint64_t drths_crypto_random_session_id(void);

/* Overwrites a key in memory (not optimised away). RT-safe. */
void drths_crypto_wipe(void *p, size_t n);

#endif
