/* libFuzzer target for the OpenFresco stream decoder (site-physical/openfresco.h): the bytes an
 * analysis client sends over TCP, which the actuator site reads before anything checks them.
 *
 * The first input byte picks the variant (bit 0: SHADOW or GENERIC; bit 1: let
 * drths_ofr_detect choose from the first bytes instead); the rest is the stream, cut into
 * messages exactly as the I/O thread does (drths_ofr_rx_need, then drths_ofr_rx_parse). After
 * every message each reply the site could send is built, as the site would answer.
 * Invariants checked (abort on violation): the length asked for is bounded by the largest
 * dataSize; after an error the decoder is FAILED and asks for nothing more; a message
 * parsed has a known kind; every reply fits the buffer the I/O thread uses and is a whole number
 * of doubles or int32s; a decoded trial displacement is finite.
 *
 * Build: cmake -DDRTHS_FUZZ=ON -DCMAKE_C_COMPILER=clang; run: ./fuzz_openfresco corpus/openfresco
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "site-physical/openfresco.h"

#define OUT_CAP (DRTHS_OFR_MAX_DATA * sizeof(double) + 64)

static uint8_t out[OUT_CAP];

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    drths_ofr_variant_t v = (data[0] & 1) ? DRTHS_OFR_GENERIC : DRTHS_OFR_SHADOW;
    data++;
    size--;
    if (data[-1] & 2) {
        if (size < 4)
            return 0;
        drths_ofr_variant_t d = drths_ofr_detect(data, size, 1);
        check(d == DRTHS_OFR_SHADOW || d == DRTHS_OFR_GENERIC);
        v = d;
    }
    drths_ofr_rx_t rx;
    drths_ofr_rx_init(&rx, v);
    drths_ofr_response_t r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < DRTHS_OFR_MAX_DOF; i++)
        r.disp[i] = r.force[i] = 0.001 * i;
    size_t off = 0;
    for (int msgs = 0; msgs < 10000; msgs++) {
        size_t need = drths_ofr_rx_need(&rx);
        check(need > 0 && need <= DRTHS_OFR_MAX_DATA * sizeof(double) + 64);
        if (need > size - off)
            break;
        drths_ofr_msg_t m;
        int rc = drths_ofr_rx_parse(&rx, data + off, need, &m);
        off += need;
        if (rc != 0) {
            check(m.kind == DRTHS_OFR_MSG_ERROR && rx.state == DRTHS_OFR_ST_FAILED);
            check(memchr(m.text, '\0', sizeof m.text) != NULL);
            check(drths_ofr_rx_need(&rx) == 0);
            break;
        }
        check(m.kind >= DRTHS_OFR_MSG_PROBE && m.kind <= DRTHS_OFR_MSG_ACTION);
        if (m.kind == DRTHS_OFR_MSG_ACTION && m.action == DRTHS_OFR_SET_TRIAL)
            check(isfinite(m.disp[0]));
        size_t n = drths_ofr_reply_daq(&rx, &r, out, sizeof out);
        check(n <= sizeof out && n % sizeof(double) == 0);
        for (int b = DRTHS_OFR_DISP; b < DRTHS_OFR_NSIZES; b++) {
            n = drths_ofr_reply_block(&rx, &r, b, out, sizeof out);
            check(n <= sizeof out && n % sizeof(double) == 0);
        }
        n = drths_ofr_reply_matrix(&rx, 1.0, out, sizeof out);
        check(n <= sizeof out && n % sizeof(double) == 0);
        n = drths_ofr_reply_die(&rx, out, sizeof out);
        check(n <= sizeof out && n % sizeof(double) == 0);
    }
    return 0;
}
