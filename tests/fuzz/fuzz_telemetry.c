/* libFuzzer target for the monitor's two parsers of untrusted datagrams (common/platform/telemetry.h):
 * drths_telemetry_frame_open (what drths-monitor does with any UDP datagram on its telemetry
 * port) and drths_telemetry_control_open (what a site does with a datagram from the monitor's
 * address).
 *
 * The first input byte (modulo 3) picks the path: 0 the rest is a telemetry datagram, 1 a control
 * datagram, 2 the rest is a JSON line sealed with the right key as site "physical" and then
 * opened (the checks after the MAC, which random bytes never reach). Invariants (abort on violation): a parser returns 0, -EINVAL or
 * -EACCES; an opened frame's JSON lies inside the input, starts with '{' and ends with '}', and
 * names the header's site; an opened control datagram has a known command and a site name.
 *
 * Build: cmake -DDRTHS_FUZZ=ON -DCMAKE_C_COMPILER=clang; run: ./fuzz_telemetry corpus/telemetry
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/platform/telemetry.h"

static const uint8_t KEY[DRTHS_TELEMETRY_KEY_BYTES] = {7};

static void check(int ok)
{
    if (!ok)
        abort();
}

static void frame(const uint8_t *data, size_t size)
{
    drths_telemetry_header_t h;
    int rc = drths_telemetry_frame_open(KEY, data, size, &h);
    check(rc == 0 || rc == -EINVAL || rc == -EACCES);
    if (rc != 0)
        return;
    const char *in = (const char *)data;
    check(h.json >= in && h.json + h.json_len <= in + size && h.json_len >= 2);
    check(h.json[0] == '{' && h.json[h.json_len - 1] == '}');
    check(memchr(h.json, '\n', h.json_len) == NULL);
    check(strlen(h.site) > 0 && strlen(h.site) < sizeof h.site);
}

static void control(const uint8_t *data, size_t size)
{
    drths_telemetry_control_t c;
    int rc = drths_telemetry_control_open(KEY, data, size, &c);
    check(rc == 0 || rc == -EINVAL || rc == -EACCES);
    if (rc == 0)
        check(drths_telemetry_cmd_name(c.cmd) != NULL && c.site[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 3;
    data++;
    size--;
    char buf[DRTHS_TELEMETRY_MAX_DATAGRAM + 64];
    if (mode == 0) {
        frame(data, size);
    } else if (mode == 1) {
        control(data, size);
    } else {
        int n = drths_telemetry_frame_seal(KEY, "physical", 1, 2, 3, (const char *)data, size, buf,
                                           sizeof buf);
        if (n > 0)
            frame((const uint8_t *)buf, (size_t)n);
    }
    return 0;
}
