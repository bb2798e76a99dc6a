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
    eng_vt vt;             /* the protocol's communicating primitives and cost.c's local ones */
} cost_impl;

/* Creates a cost engine for pr: its table is comm (the protocol's communicating primitives)
 * with the local primitives, the same for every protocol, filled in (cost.c). */
int cost_engine_new(const proto *pr, const proto_cfg *cfg, cost_log *log, const eng_vt *comm,
                    int comps, eng **out);
/* Appends a round for primitive prim attributed to e->cur_op; NULL on OOM. */
cost_round *cost_push(eng *e, int prim, int comm);
/* Records local work of n elements touched per share component on every party; consecutive
 * local steps of one op merge into one record. */
int cost_local(eng *e, int prim, double elems);

/* Declares `r`, the next round of primitive prim, in a primitive returning int; returns
 * MS_ERR_NOMEM from it when the log cannot grow. */
#define COST_PUSH(prim)                      \
    cost_round *r = cost_push(e, (prim), 1); \
    if (!r)                                  \
    return MS_ERR_NOMEM

/* The settings both protocols share (SPU's FM64 fixed point, PUMA's approximations); the
 * protocol sets its own name and its sharing-specific fields after this. */
void cost_defaults_fm64(proto_cfg *c, const char *name);

/* Bytes of a message of n elements of `bits` packed bits each, every element padded to a whole
 * byte: n·⌈bits/8⌉ (linear in n, as the cost tape's replay needs: proto.h). */
uint64_t cost_packed(uint64_t n, int bits);

#endif
