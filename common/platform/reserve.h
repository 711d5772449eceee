/* Disk space held for a run (docs/design.md#records-and-reports).
 *
 * A run's records must not be lost to a disk that fills while it runs (another program's
 * files, a second run in the same filesystem). Before the handshake a site knows how much it
 * will write: the binary record (its row size, the rate and the record's length), the CSV it is
 * converted into at the end, and the summary and report. drths_reserve_open takes all of it at
 * once in one file of the run folder (RESERVE_NAME, allocated with fallocate, holding no data)
 * or refuses with a sentence naming the folder, the space needed and the space free. When a
 * recorder opens, its share moves from that file to its .bin (drths_reserve_take, then
 * drths_recorder_preallocate); at the end the rest is given back (drths_reserve_release) just
 * before the CSV and the summary are written, so they find their room.
 *
 * A filesystem without fallocate (some network and FUSE filesystems, ramfs) gets the check of
 * the free space only: nothing is held, and the run says so; one that reports no size at all
 * (ramfs) is not refused either.
 *
 * A site killed before the end leaves the file behind; it holds nothing and may be removed.
 *
 * Ownership: the caller owns drths_reserve_t; it owns the file's descriptor. init-only.
 */
#ifndef DRTHS_RESERVE_H
#define DRTHS_RESERVE_H

#include <stdint.h>

#include "common/platform/error.h"

#define DRTHS_RESERVE_NAME ".drths-reserved-space"

/* What the summary, the report and the other files written at the end may take (summary.json
 * with its histograms is tens of kB; the physical site's report figures a few hundred). */
#define DRTHS_RESERVE_END_BYTES ((uint64_t)4 << 20)

typedef struct drths_reserve {
    int fd; /* the reserve file, -1 when none */
    char path[4200];
    uint64_t bytes; /* held now */
    int held;       /* 1: fallocate holds the bytes; 0: the free space was only checked */
} drths_reserve_t;

/* Holds bytes in dir (what is a sentence for the refusal, e.g. "physical.bin 1.6 MB, its CSV
 * 3.4 MB and 4.2 MB for the summary and report"). Returns 0, or -ENOSPC with "not enough space
 * in DIR for this run's records: it needs N MB (WHAT), the filesystem has M MB free; ..." in
 * err, or another negative errno. r is zeroed first; nothing is left open on failure. */
int drths_reserve_open(drths_reserve_t *r, const char *dir, uint64_t bytes, const char *what,
                       drths_error_t *err);

/* Gives bytes of the reserve back to the filesystem (the caller allocates them to its own file
 * next). Returns 0 or a negative errno. */
int drths_reserve_take(drths_reserve_t *r, uint64_t bytes);

/* Gives everything back and removes the file. Safe twice and on a zeroed r with fd -1. */
void drths_reserve_release(drths_reserve_t *r);

/* The bytes free for an unprivileged writer in the filesystem of path, or 0 when unknown. */
uint64_t drths_reserve_free_bytes(const char *path);

#endif
