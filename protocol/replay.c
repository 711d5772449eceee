#include "protocol/replay.h"

#include <string.h>

void drths_replay_reset(drths_replay_t *w)
{
    memset(w, 0, sizeof *w);
}

drths_replay_result_t drths_replay_check(const drths_replay_t *w, uint64_t counter)
{
    if (counter == 0 || counter > DRTHS_REPLAY_COUNTER_MAX)
        return DRTHS_REPLAY_OUT_OF_RANGE;
    if (counter > w->highest)
        return DRTHS_REPLAY_OK;
    if (w->highest - counter >= DRTHS_REPLAY_WINDOW)
        return DRTHS_REPLAY_TOO_OLD;
    uint64_t block = (counter / 64u) % DRTHS_REPLAY_BLOCKS;
    uint64_t bit = UINT64_C(1) << (counter % 64u);
    return (w->bits[block] & bit) ? DRTHS_REPLAY_DUPLICATE : DRTHS_REPLAY_OK;
}

drths_replay_result_t drths_replay_update(drths_replay_t *w, uint64_t counter)
{
    drths_replay_result_t r = drths_replay_check(w, counter);
    if (r != DRTHS_REPLAY_OK)
        return r;
    if (counter > w->highest) {
        /* Blocks strictly above the old highest block up to the new one held counters that are
         * now more than a window old (or never used); clear them. At most all blocks. */
        uint64_t old_block = w->highest / 64u;
        uint64_t new_block = counter / 64u;
        uint64_t diff = new_block - old_block;
        if (diff >= DRTHS_REPLAY_BLOCKS)
            diff = DRTHS_REPLAY_BLOCKS;
        for (uint64_t i = 1; i <= diff; i++)
            w->bits[(old_block + i) % DRTHS_REPLAY_BLOCKS] = 0;
        w->highest = counter;
    }
    w->bits[(counter / 64u) % DRTHS_REPLAY_BLOCKS] |= UINT64_C(1) << (counter % 64u);
    return DRTHS_REPLAY_OK;
}
