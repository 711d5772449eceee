/* The pre-shared key file (protocol/PROTOCOL.md section 3): made by drths-keygen
 * (drths_key_generate, protocol/crypto.h), copied to both laboratories out of band, loaded by
 * both sites, drths-keygen --id and drths-attack.
 *
 * The file is opened without blocking and without following it into a terminal, and every check
 * is made on the descriptor opened (fstat), not on the path, so what is checked is what is read:
 * a FIFO or a device named as the key cannot hold the site forever in open() or read().
 * A symbolic link is followed: the checks apply to the file it leads to, which must be a
 * regular file of the user's own with mode 0600 or 0400, so a link gains an attacker nothing,
 * and a lab may keep its key elsewhere behind a link.
 *
 * Ownership: the key buffer belongs to the caller; nothing here allocates or keeps pointers.
 */
#ifndef DRTHS_KEYFILE_H
#define DRTHS_KEYFILE_H

#include <stdint.h>

#include "common/platform/error.h"
#include "protocol/crypto.h"

/* Loads the pre-shared key from path. Accepted contents: exactly 32 raw bytes, or 64 hex digits
 * optionally followed by "\n" or "\r\n". Refused, with a sentence in err naming the path and
 * saying what to do: a missing or unreadable file (the open's errno); anything but a regular file
 * (-EINVAL, the sentence names its type: FIFO, directory, device, socket); a file readable or
 * writable by group or others (-EPERM); a file owned by another user than the effective one,
 * root included (-EPERM: its owner could read or replace it); a wrong size, bad hex or an
 * all-zero key (-EINVAL). On failure key is zeroed. init-only. */
int drths_key_load(uint8_t key[DRTHS_KEY_BYTES], const char *path, drths_error_t *err);

#endif
