/* proto_cost.h — internals shared by the cost engines (proto_semi2k.c, proto_aby3.c) and the
 * registry (cost.c). Not a public interface. */
#ifndef MPCSIM_PROTO_COST_H
#define MPCSIM_PROTO_COST_H

#include "eng.h"
#include "proto.h"

extern const proto proto_semi2k;
extern const proto proto_aby3;

/* Cost engine state: where rounds go, and how many share components a party holds. */
typedef struct cost_impl {
    cost_log *log;
    int comps; /* ring elements each party holds per secret element (1 semi2k, 2 aby3) */
    const cost_tape *tape; /* sync values replayed from a backend run, or NULL (proto.h) */
    uint32_t tape_op;      /* the op the next tape value belongs to */
    uint64_t tape_k;       /* values of that op given so far */
} cost_impl;

/* Creates a cost engine for pr with the given table (communicating primitives filled in by
 * the protocol, local ones by COST_LOCAL_VT). */
int cost_engine_new(const proto *pr, const proto_cfg *cfg, cost_log *log, const eng_vt *vt,
                    int comps, eng **out);
/* Appends a round for primitive prim attributed to e->cur_op; NULL on OOM. */
cost_round *cost_push(eng *e, int prim, int comm);
/* Records local work of n elements touched per share component on every party; consecutive
 * local steps of one op merge into one record. */
int cost_local(eng *e, int prim, double elems);

/* Local primitives shared by both cost engines (no communication, no data). */
int cost_alloc(eng *e, mpc_val *v, size_t n, int dom);
void cost_release(eng *e, mpc_val *v);
int cost_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y);
int cost_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y);
int cost_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc);
int cost_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc);
int cost_shift(eng *e, mpc_val *z, const mpc_val *x, int s);
int cost_bool_components(eng *e, mpc_val comps[3], int *nc, const mpc_val *x);
int cost_permute(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n);
int cost_sync_public(eng *e, uint64_t *v);

/* The local rows of a cost engine's eng_vt, the same for every protocol: put first in the
 * table's initialiser, the protocol's communicating primitives after them. */
#define COST_LOCAL_VT                            \
    .alloc = cost_alloc,                         \
    .release = cost_release,                     \
    .add = cost_add,                             \
    .sub = cost_sub,                             \
    .add_pub = cost_add_pub,                     \
    .mul_pub = cost_mul_pub,                     \
    .shift = cost_shift,                         \
    .bool_components = cost_bool_components,     \
    .permute = cost_permute,                     \
    .sync_public = cost_sync_public

/* Declares `r`, the next round of primitive prim, in a primitive returning int; returns
 * MS_ERR_NOMEM from it when the log cannot grow. */
#define COST_PUSH(prim)                             \
    cost_round *r = cost_push(e, (prim), 1);        \
    if (!r)                                         \
        return MS_ERR_NOMEM

/* The settings both protocols share (SPU's FM64 fixed point, PUMA's approximations); the
 * protocol sets its own name and its sharing-specific fields after this. */
void cost_defaults_fm64(proto_cfg *c, const char *name);

/* Bytes of a message of n elements of `bits` packed bits each, every element padded to a whole
 * byte: n·⌈bits/8⌉ (linear in n, as the cost tape's replay needs: proto.h). */
uint64_t cost_packed(uint64_t n, int bits);

#endif
