#include "protocol/crypto.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "protocol/chacha20.h"

static const char rehearsal_text[] = "drths rehearsal key v1: public, for localhost rehearsal only";
/* Key-derivation labels (ASCII, no NUL; PROTOCOL.md section 3). */
static const char hello_label[] = "drths-v2 hello";
static const char ack_label[] = "drths-v2 hello_ack";
static const char transcript_label[] = "drths-v2 transcript";
static const char session_label[] = "drths-v2 session";
static const char key_id_label[] = "drths-v1 key id"; /* 15 bytes, no NUL */

/* The vector ChaCha20 code checked once per process against libsodium's on a random key and
 * nonce (a known answer from the library itself): should a compiler or CPU ever make them
 * differ, every keystream comes from libsodium from then on (drths-bench-codec's experiment
 * line then names it). */
static void check_chacha20(void)
{
    if (drths_chacha20_impl() == DRTHS_CHACHA20_LIBSODIUM)
        return;
    uint8_t key[32], nonce[12], ours[DRTHS_CHACHA20_KS_BYTES], theirs[DRTHS_CHACHA20_KS_BYTES];
    randombytes_buf(key, sizeof key);
    randombytes_buf(nonce, sizeof nonce);
    drths_chacha20_ks8(ours, key, nonce);
    drths_chacha20_ks8_with(DRTHS_CHACHA20_LIBSODIUM, theirs, key, nonce);
    if (sodium_memcmp(ours, theirs, sizeof ours) != 0)
        drths_chacha20_prefer(DRTHS_CHACHA20_LIBSODIUM);
    sodium_memzero(ours, sizeof ours);
    sodium_memzero(theirs, sizeof theirs);
}

int drths_crypto_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (sodium_init() < 0)
        return -EIO;
    pthread_once(&once, check_chacha20);
    return 0;
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int drths_key_generate(const char *path, bool hex, bool force, uint8_t key[DRTHS_KEY_BYTES],
                       drths_error_t *err)
{
    if (drths_crypto_init() != 0)
        return drths_error_set(err, -EIO, "libsodium failed to initialise");
    if (!path || !*path)
        return drths_error_set(err, -EINVAL, "no key file given");
    uint8_t k[DRTHS_KEY_BYTES];
    uint8_t out[2 * DRTHS_KEY_BYTES + 1];
    size_t outlen;
    do {
        randombytes_buf(k, sizeof k);
    } while (sodium_is_zero(k, sizeof k));
    if (hex) {
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < sizeof k; i++) {
            out[2 * i] = (uint8_t)digits[k[i] >> 4];
            out[2 * i + 1] = (uint8_t)digits[k[i] & 15];
        }
        out[2 * DRTHS_KEY_BYTES] = '\n';
        outlen = sizeof out;
    } else {
        memcpy(out, k, sizeof k);
        outlen = sizeof k;
    }
    char tmp[PATH_MAX];
    const char *target = path;
    if (force) {
        int m = snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
        if (m < 0 || (size_t)m >= sizeof tmp) {
            sodium_memzero(k, sizeof k);
            sodium_memzero(out, sizeof out);
            return drths_error_set(err, -ENAMETOOLONG, "key file name too long: %s", path);
        }
        target = tmp;
    }
    int fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        sodium_memzero(k, sizeof k);
        sodium_memzero(out, sizeof out);
        if (e == EEXIST && !force)
            return drths_error_set(err, -EEXIST,
                                   "key file %s exists; not overwriting it (use --force to "
                                   "replace it, which breaks sessions with sites holding the "
                                   "old key)",
                                   path);
        return drths_error_set(err, -e, "key file %s: cannot create: %s", target, strerror(e));
    }
    /* The umask may have removed bits but never adds any; fchmod makes 0600 exact anyway. */
    int rc = fchmod(fd, 0600) != 0 ? -errno : 0;
    if (rc == 0)
        rc = write_all(fd, out, outlen);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && force && rename(tmp, path) != 0)
        rc = -errno;
    sodium_memzero(out, sizeof out);
    if (rc != 0) {
        unlink(target);
        sodium_memzero(k, sizeof k);
        return drths_error_set(err, rc, "key file %s: write failed: %s", path, strerror(-rc));
    }
    if (key)
        memcpy(key, k, sizeof k);
    sodium_memzero(k, sizeof k);
    return 0;
}

void drths_key_rehearsal(uint8_t key[DRTHS_KEY_BYTES])
{
    crypto_generichash(key, DRTHS_KEY_BYTES, (const unsigned char *)rehearsal_text,
                       sizeof rehearsal_text - 1, NULL, 0);
}

void drths_key_id(const uint8_t key[DRTHS_KEY_BYTES], char out[17])
{
    uint8_t h[32];
    crypto_generichash(h, sizeof h, (const unsigned char *)key_id_label, sizeof key_id_label - 1,
                       key, DRTHS_KEY_BYTES);
    sodium_bin2hex(out, 17, h, 8);
}

/* BLAKE2b-256 keyed with the PSK over label || the parts, each part as it is (all fixed
 * length, so the concatenation is unambiguous). */
static void kdf(uint8_t out[DRTHS_KEY_BYTES], const uint8_t *psk, const char *label,
                const uint8_t *const parts[], const size_t lens[], int n)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, psk, psk ? DRTHS_KEY_BYTES : 0, DRTHS_KEY_BYTES);
    crypto_generichash_update(&st, (const unsigned char *)label, strlen(label));
    for (int i = 0; i < n; i++)
        crypto_generichash_update(&st, parts[i], lens[i]);
    crypto_generichash_final(&st, out, DRTHS_KEY_BYTES);
    sodium_memzero(&st, sizeof st);
}

void drths_crypto_eph_keypair(uint8_t pk[DRTHS_EPH_BYTES], uint8_t sk[DRTHS_EPH_BYTES])
{
    randombytes_buf(sk, DRTHS_EPH_BYTES);
    crypto_scalarmult_base(pk, sk);
}

void drths_crypto_eph_public(uint8_t pk[DRTHS_EPH_BYTES], const uint8_t sk[DRTHS_EPH_BYTES])
{
    crypto_scalarmult_base(pk, sk);
}

int drths_crypto_dh(uint8_t out[DRTHS_KEY_BYTES], const uint8_t sk[DRTHS_EPH_BYTES],
                    const uint8_t peer_pk[DRTHS_EPH_BYTES])
{
    /* libsodium refuses a low-order point (the result would be all zeros, known to anyone). */
    if (crypto_scalarmult(out, sk, peer_pk) != 0) {
        sodium_memzero(out, DRTHS_KEY_BYTES);
        return -EBADMSG;
    }
    return 0;
}

void drths_crypto_derive_hello(const uint8_t psk[DRTHS_KEY_BYTES], uint64_t session_id,
                               const uint8_t e_num[DRTHS_EPH_BYTES], uint8_t key[DRTHS_KEY_BYTES])
{
    uint8_t sid[8];
    put_be64(sid, session_id);
    const uint8_t *parts[] = {sid, e_num};
    const size_t lens[] = {8, DRTHS_EPH_BYTES};
    kdf(key, psk, hello_label, parts, lens, 2);
}

void drths_crypto_derive_ack(const uint8_t psk[DRTHS_KEY_BYTES], uint64_t session_id,
                             const uint8_t e_num[DRTHS_EPH_BYTES],
                             const uint8_t e_phys[DRTHS_EPH_BYTES],
                             const uint8_t dh[DRTHS_KEY_BYTES], uint8_t key[DRTHS_KEY_BYTES])
{
    uint8_t sid[8];
    put_be64(sid, session_id);
    const uint8_t *parts[] = {sid, e_num, e_phys, dh};
    const size_t lens[] = {8, DRTHS_EPH_BYTES, DRTHS_EPH_BYTES, DRTHS_KEY_BYTES};
    kdf(key, psk, ack_label, parts, lens, 4);
}

void drths_crypto_transcript(uint8_t th[DRTHS_KEY_BYTES], uint64_t session_id,
                             const uint8_t e_num[DRTHS_EPH_BYTES], const uint8_t *hello,
                             size_t hello_len, const uint8_t e_phys[DRTHS_EPH_BYTES],
                             const uint8_t *ack, size_t ack_len)
{
    uint8_t sid[8], lh[2] = {(uint8_t)(hello_len >> 8), (uint8_t)hello_len},
                    la[2] = {(uint8_t)(ack_len >> 8), (uint8_t)ack_len};
    put_be64(sid, session_id);
    const uint8_t *parts[] = {sid, e_num, lh, hello, e_phys, la, ack};
    const size_t lens[] = {8, DRTHS_EPH_BYTES, 2, hello_len, DRTHS_EPH_BYTES, 2, ack_len};
    kdf(th, NULL, transcript_label, parts, lens, 7);
}

void drths_crypto_derive(const uint8_t psk[DRTHS_KEY_BYTES], const uint8_t dh[DRTHS_KEY_BYTES],
                         const uint8_t transcript[DRTHS_KEY_BYTES], drths_session_keys_t *keys)
{
    static const uint8_t d1 = DRTHS_ROLE_NUMERICAL, d2 = DRTHS_ROLE_PHYSICAL;
    const uint8_t *parts[] = {&d1, dh, transcript};
    const size_t lens[] = {1, DRTHS_KEY_BYTES, DRTHS_KEY_BYTES};
    kdf(keys->num_to_phys, psk, session_label, parts, lens, 3);
    parts[0] = &d2;
    kdf(keys->phys_to_num, psk, session_label, parts, lens, 3);
}

void drths_crypto_nonce(uint8_t nonce[DRTHS_AEAD_NONCE_BYTES], drths_role_t sender,
                        uint64_t counter)
{
    nonce[0] = (uint8_t)sender;
    nonce[1] = nonce[2] = nonce[3] = 0;
    put_be64(nonce + 4, counter);
}

/* ChaCha20-Poly1305 IETF (RFC 8439 section 2.8), composed from ChaCha20 and libsodium's
 * Poly1305: one drths_chacha20_ks8 call (protocol/chacha20.h: eight blocks side by side in
 * vector registers, AVX-512VL or AVX2 where the CPU has it, else libsodium's ChaCha20) makes
 * KS_BYTES of keystream, block 0 for the one-time Poly1305 key and the rest for the first
 * MSG_HEAD bytes of the message; only a longer message goes on with
 * crypto_stream_chacha20_ietf_xor_ic from block KS_BYTES / 64. libsodium 1.0.18's own
 * crypto_aead_chacha20poly1305_ietf_*_detached runs a message shorter than 256 bytes through its
 * one-block path, about twice as slow, and its many-block ChaCha20 rotates with shifts where
 * AVX-512VL has one instruction (tools/bench: COMMAND). The bytes are the same: unit.crypto
 * compares both for every length up to 1200 bytes and more beyond. */
#define KS_BYTES DRTHS_CHACHA20_KS_BYTES
#define MSG_HEAD (KS_BYTES - 64)

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* RFC 8439 section 2.8: Poly1305 (key = keystream block 0) over ad, zero padding to 16, the
 * ciphertext, zero padding to 16, then both lengths as little-endian 64-bit integers.
 * libsodium's Poly1305 takes 32 bytes per step and copies, byte by byte, what an update leaves
 * over a multiple of 32 in front of the next one; fed piece by piece (ad, padding, ciphertext,
 * padding, lengths) that copying was a quarter of the tag's cost. A datagram-sized input is
 * therefore laid out whole in a local buffer and authenticated in one crypto_onetimeauth_poly1305
 * call (aead_tag_flat: the copy costs less than the incremental interface's own overhead, about
 * 30 ns a tag on this VM). A longer one goes in three updates: the associated data, its padding
 * and the first bytes of the ciphertext as one multiple of 32 from a local copy, the
 * ciphertext's bulk straight from the caller's buffer, and its last bytes with their padding and
 * the lengths from another local copy, nothing carried from one update to the next. Either way
 * the local copies hold only public bytes. */
#define TAG_FLAT_MAX 1024 /* bytes of Poly1305 input laid out whole (a COMMAND at R = 8: 384) */
#define TAG_AD_MAX 128    /* longer associated data (never in the protocol) goes piece by piece */

static size_t pad16(size_t n)
{
    return (n + 15) / 16 * 16;
}

static void aead_tag_flat(uint8_t tag[DRTHS_TAG_BYTES], const uint8_t ks[KS_BYTES],
                          const uint8_t *ad, size_t adlen, const uint8_t *c, size_t clen)
{
    uint8_t in[TAG_FLAT_MAX];
    size_t n = pad16(adlen);
    /* Fixed-size clearing: a memset of a variable few bytes compiles to rep stos, whose start-up
     * alone cost more than the copies. */
    memset(in + n - 16 * (n > 0), 0, 16);
    if (adlen > 0)
        memcpy(in, ad, adlen);
    size_t m = pad16(clen);
    memset(in + n + m - 16 * (m > 0), 0, 16);
    if (clen > 0)
        memcpy(in + n, c, clen);
    n += m;
    put_le64(in + n, adlen);
    put_le64(in + n + 8, clen);
    crypto_onetimeauth_poly1305(tag, in, n + 16, ks);
}

static void aead_tag(uint8_t tag[DRTHS_TAG_BYTES], const uint8_t ks[KS_BYTES], const uint8_t *ad,
                     size_t adlen, const uint8_t *c, size_t clen)
{
    if (adlen <= TAG_FLAT_MAX && clen <= TAG_FLAT_MAX &&
        pad16(adlen) + pad16(clen) + 16 <= TAG_FLAT_MAX) {
        aead_tag_flat(tag, ks, ad, adlen, c, clen);
        return;
    }
    static const uint8_t zeros[16];
    uint8_t head[TAG_AD_MAX + 16 + 32], tail[32 + 16 + 16];
    crypto_onetimeauth_poly1305_state st;
    crypto_onetimeauth_poly1305_init(&st, ks);
    size_t done = 0; /* ciphertext bytes already fed */
    if (adlen <= TAG_AD_MAX) {
        size_t n = (adlen + 15) / 16 * 16;
        /* Fixed-size clearing: a memset of a variable few bytes compiles to rep stos, whose
         * start-up alone cost more than the copies. */
        memset(head + adlen, 0, 16);
        if (adlen > 0)
            memcpy(head, ad, adlen);
        done = (32 - n % 32) % 32;
        if (done > clen)
            done = clen;
        if (done > 0)
            memcpy(head + n, c, done);
        n += done;
        if (done == clen) { /* the whole ciphertext is here: its padding too */
            memset(head + n, 0, 16);
            n += (16 - clen % 16) % 16;
        }
        crypto_onetimeauth_poly1305_update(&st, head, n);
    } else {
        crypto_onetimeauth_poly1305_update(&st, ad, adlen);
        crypto_onetimeauth_poly1305_update(&st, zeros, (16 - adlen % 16) % 16);
    }
    /* Unless the ciphertext ended inside head (then there is nothing left but the lengths),
     * done is 0 or 16, so the bulk starts on a fresh 32-byte step and rest has the ciphertext's
     * own padding. Both local copies hold only public bytes. */
    size_t bulk = (clen - done) / 32 * 32;
    if (bulk > 0)
        crypto_onetimeauth_poly1305_update(&st, c + done, bulk);
    done += bulk;
    size_t rest = clen - done, n = (rest + 15) / 16 * 16;
    memset(tail, 0, sizeof tail);
    if (rest > 0)
        memcpy(tail, c + done, rest);
    put_le64(tail + n, adlen);
    put_le64(tail + n + 8, clen);
    crypto_onetimeauth_poly1305_update(&st, tail, n + 16);
    crypto_onetimeauth_poly1305_final(&st, tag);
    sodium_memzero(&st, sizeof st);
}

/* out = in XOR ks, 16 bytes at a time through the compiler's vector type (one SSE2 operation on
 * x86-64), then eight, then one: out may equal in, so the compiler cannot vectorise a byte loop
 * by itself (byte by byte this was a seventh of a COMMAND's seal + open, eight bytes at a time
 * still a fiftieth). */
typedef uint64_t xor_vec_t __attribute__((vector_size(16)));

static void xor_bytes(uint8_t *out, const uint8_t *in, const uint8_t *ks, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        xor_vec_t a, b;
        memcpy(&a, in + i, 16);
        memcpy(&b, ks + i, 16);
        a ^= b;
        memcpy(out + i, &a, 16);
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t a, b;
        memcpy(&a, in + i, 8);
        memcpy(&b, ks + i, 8);
        a ^= b;
        memcpy(out + i, &a, 8);
    }
    for (; i < n; i++)
        out[i] = in[i] ^ ks[i];
}

/* out = in XOR the keystream from block 1 on (out may equal in). */
static void aead_xor(uint8_t *out, const uint8_t *in, size_t len, const uint8_t ks[KS_BYTES],
                     const uint8_t key[DRTHS_KEY_BYTES],
                     const uint8_t nonce[DRTHS_AEAD_NONCE_BYTES])
{
    xor_bytes(out, in, ks + 64, len < MSG_HEAD ? len : MSG_HEAD);
    if (len > MSG_HEAD)
        crypto_stream_chacha20_ietf_xor_ic(out + MSG_HEAD, in + MSG_HEAD, len - MSG_HEAD, nonce,
                                           KS_BYTES / 64, key);
}

void drths_crypto_seal(const uint8_t key[DRTHS_KEY_BYTES], drths_role_t sender, uint64_t counter,
                       const uint8_t *ad, size_t adlen, uint8_t *msg, size_t mlen,
                       uint8_t tag[DRTHS_TAG_BYTES])
{
    uint8_t nonce[DRTHS_AEAD_NONCE_BYTES], ks[KS_BYTES];
    drths_crypto_nonce(nonce, sender, counter);
    drths_chacha20_ks8(ks, key, nonce);
    aead_xor(msg, msg, mlen, ks, key, nonce);
    aead_tag(tag, ks, ad, adlen, msg, mlen);
    sodium_memzero(ks, sizeof ks);
}

int drths_crypto_open(const uint8_t key[DRTHS_KEY_BYTES], drths_role_t sender, uint64_t counter,
                      const uint8_t *ad, size_t adlen, const uint8_t *c, size_t clen,
                      const uint8_t tag[DRTHS_TAG_BYTES], uint8_t *out)
{
    uint8_t nonce[DRTHS_AEAD_NONCE_BYTES], ks[KS_BYTES], want[DRTHS_TAG_BYTES];
    drths_crypto_nonce(nonce, sender, counter);
    drths_chacha20_ks8(ks, key, nonce);
    aead_tag(want, ks, ad, adlen, c, clen);
    int rc = 0;
    if (crypto_verify_16(want, tag) != 0) {
        memset(out, 0, clen);
        rc = -EBADMSG;
    } else {
        aead_xor(out, c, clen, ks, key, nonce);
    }
    sodium_memzero(ks, sizeof ks);
    return rc;
}

uint64_t drths_crypto_random_session_id(void)
{
    uint64_t id;
    do {
        randombytes_buf(&id, sizeof id);
    } while (id == 0);
    return id;
}

void drths_crypto_wipe(void *p, size_t n)
{
    sodium_memzero(p, n);
}
