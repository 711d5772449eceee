/* Keys and authenticated encryption for the drths wire protocol (PROTOCOL.md sections 3 and 4).
 *
 * - The pre-shared key (PSK) is 32 bytes in a key file that only its owner may read
 *   (drths_key_load, protocol/keyfile.h), made by drths-keygen, copied to both laboratories out
 *   of band.
 * - HELLO and HELLO_ACK are sealed with the handshake key BLAKE2b-256(key = PSK,
 *   "drths-v1 handshake" || session id), known before any nonce is exchanged.
 * - All other messages are sealed with one key per direction, BLAKE2b-256(key = PSK,
 *   "drths-v1 session" || direction || session id || nonce_num || nonce_phys), so a key is fresh
 *   for every run as long as either side's nonce is fresh.
 * - AEAD: ChaCha20-Poly1305 IETF, detached 16-byte tag, 12-byte nonce
 *   direction || 00 00 00 || counter (big-endian 64 bits). Composed from libsodium's ChaCha20
 *   and Poly1305 for speed on short messages; byte for byte libsodium's AEAD (unit.crypto).
 *
 * Ownership: every key buffer belongs to the caller; nothing here allocates or keeps pointers.
 */
#ifndef DRTHS_CRYPTO_H
#define DRTHS_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/error.h"

#define DRTHS_KEY_BYTES 32
#define DRTHS_HELLO_NONCE_BYTES 32
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

/* Initialises libsodium (idempotent). Returns 0 or -EIO. init-only. */
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

/* Handshake key for session_id (see the file comment). RT-safe. */
void drths_crypto_derive_handshake(const uint8_t psk[DRTHS_KEY_BYTES], uint64_t session_id,
                                   uint8_t key[DRTHS_KEY_BYTES]);

/* Both per-direction session keys. RT-safe. */
void drths_crypto_derive(const uint8_t psk[DRTHS_KEY_BYTES],
                         const uint8_t nonce_num[DRTHS_HELLO_NONCE_BYTES],
                         const uint8_t nonce_phys[DRTHS_HELLO_NONCE_BYTES], uint64_t session_id,
                         drths_session_keys_t *keys);

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

/* Fresh random values for a new run: a nonzero session id and a HELLO nonce (kernel CSPRNG
 * through libsodium). init-only: they are made once per run, before the loop starts. */
uint64_t drths_crypto_random_session_id(void);
void drths_crypto_random_nonce(uint8_t nonce[DRTHS_HELLO_NONCE_BYTES]);

/* Overwrites a key in memory (not optimised away). RT-safe. */
void drths_crypto_wipe(void *p, size_t n);

#endif
