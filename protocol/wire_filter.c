#include "protocol/wire_filter.h"

#include <string.h>

/* A UDP socket's filter sees the datagram from its UDP header on: the drths header starts 8
 * bytes in, and the length the filter loads includes those 8 bytes. */
#define UDP_HDR 8u
#define DROP 0u
#define ACCEPT 0xffffffffu

/* Classic BPF jumps are relative and forward only: every test that fails jumps to the one DROP
 * at the end, and those offsets are filled in once the program's length is known. */
typedef struct builder {
    drths_wire_filter_t *f;
    unsigned short fail_on_false[DRTHS_WIRE_FILTER_MAX_INSNS];
    unsigned short fail_on_true[DRTHS_WIRE_FILTER_MAX_INSNS];
    int nfalse, ntrue;
} builder_t;

static void put(builder_t *b, uint16_t code, uint32_t k)
{
    b->f->insns[b->f->len++] = (struct sock_filter){code, 0, 0, k};
}

static void load(builder_t *b, uint16_t size, uint32_t offset)
{
    put(b, BPF_LD | size | BPF_ABS, UDP_HDR + offset);
}

/* Drops the datagram unless A == k (jeq) or A >= k (jge). */
static void require(builder_t *b, uint16_t jump, uint32_t k)
{
    b->fail_on_false[b->nfalse++] = b->f->len;
    put(b, BPF_JMP | jump | BPF_K, k);
}

/* Drops the datagram if A > k. */
static void forbid_above(builder_t *b, uint32_t k)
{
    b->fail_on_true[b->ntrue++] = b->f->len;
    put(b, BPF_JMP | BPF_JGT | BPF_K, k);
}

void drths_wire_filter_build(drths_wire_filter_t *f, drths_role_t self, uint64_t session_id)
{
    drths_role_t peer = self == DRTHS_ROLE_NUMERICAL ? DRTHS_ROLE_PHYSICAL : DRTHS_ROLE_NUMERICAL;
    uint32_t types = 0;
    for (int t = 1; t <= DRTHS_MSG_TYPE_MAX; t++)
        if (drths_wire_role_sends(peer, t))
            types |= 1u << t;
    memset(f, 0, sizeof *f);
    builder_t b = {.f = f};

    put(&b, BPF_LD | BPF_W | BPF_LEN, 0);
    require(&b, BPF_JGE, UDP_HDR + DRTHS_WIRE_HEADER_BYTES + 1 + DRTHS_TAG_BYTES);
    forbid_above(&b, UDP_HDR + DRTHS_WIRE_MAX_DATAGRAM);
    load(&b, BPF_W, 0);
    require(&b, BPF_JEQ, 0x44525448u); /* "DRTH" */
    load(&b, BPF_B, 4);
    require(&b, BPF_JEQ, DRTHS_WIRE_VERSION);
    load(&b, BPF_H, 6);
    forbid_above(&b, DRTHS_WIRE_FLAG_EPH); /* flags: 0 or EPH (which types, user space) */
    load(&b, BPF_W, 36);
    require(&b, BPF_JEQ, 0); /* reserved */
    load(&b, BPF_B, 5);      /* type: (types >> type) & 1 */
    forbid_above(&b, 31);
    put(&b, BPF_MISC | BPF_TAX, 0);
    put(&b, BPF_LD | BPF_IMM, types);
    put(&b, BPF_ALU | BPF_RSH | BPF_X, 0);
    put(&b, BPF_ALU | BPF_AND | BPF_K, 1);
    require(&b, BPF_JEQ, 1);
    if (session_id) {
        load(&b, BPF_W, 8);
        require(&b, BPF_JEQ, (uint32_t)(session_id >> 32));
        load(&b, BPF_W, 12);
        require(&b, BPF_JEQ, (uint32_t)session_id);
    }
    put(&b, BPF_RET | BPF_K, ACCEPT);
    unsigned short drop = f->len;
    put(&b, BPF_RET | BPF_K, DROP);
    for (int i = 0; i < b.nfalse; i++)
        f->insns[b.fail_on_false[i]].jf = (uint8_t)(drop - b.fail_on_false[i] - 1);
    for (int i = 0; i < b.ntrue; i++)
        f->insns[b.fail_on_true[i]].jt = (uint8_t)(drop - b.fail_on_true[i] - 1);
}
