/* A kernel socket filter for drths datagrams (classic BPF, SO_ATTACH_FILTER): the checks of
 * PROTOCOL.md section 6 that need no key (size, magic, version, a type this role receives, zero
 * flags and reserved bytes, and once the run has started the session id) run in the kernel,
 * in the sender's context, so a flood of junk at the actuator site's port costs the RT thread
 * nothing. Datagrams that fail are not counted by reason (the kernel only counts them, see
 * drths_udp_kernel_drops); everything that passes is still checked in full by drths_wire_open.
 *
 * The program is built into a caller-owned struct (no allocation) and attached with
 * drths_udp_attach_filter.
 */
#ifndef DRTHS_WIRE_FILTER_H
#define DRTHS_WIRE_FILTER_H

#include <linux/filter.h>
#include <stdint.h>

#include "protocol/wire.h"

#define DRTHS_WIRE_FILTER_MAX_INSNS 32

typedef struct drths_wire_filter {
    struct sock_filter insns[DRTHS_WIRE_FILTER_MAX_INSNS];
    unsigned short len;
} drths_wire_filter_t;

/* Builds the filter for a socket of role self (the types its peer may send it). session_id 0
 * accepts any session (before the run: a HELLO of a new session must get through); otherwise
 * only that session's datagrams pass. RT-safe (it only fills f). */
void drths_wire_filter_build(drths_wire_filter_t *f, drths_role_t self, uint64_t session_id);

#endif
