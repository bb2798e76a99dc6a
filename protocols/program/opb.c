/* opb.c — the op builder (opb.h). */
#include "opb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tensor names → ids: the first tensor of each name, as op_tensor_find returns it (open
 * addressing over id + 1, 0 = empty; cap a power of two, at most half full). */
struct opb_names {
    uint32_t *slot;
    size_t n, cap;
};

void opb_init(opb *b, op_program *prog, int phase, int layer, int cat, const char *prefix)
{
    *b = (opb){.prog = prog, .phase = phase, .layer = layer, .cat = cat, .prefix = prefix};
}

int opb_failed(const opb *b) { return b->failed; }

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

/* Slot of name: its entry, or the empty slot where it belongs. */
static uint32_t *names_slot(const opb *b, const char *name)
{
    const struct opb_names *x = b->names;
    size_t mask = x->cap - 1, i = name_hash(name) & mask;
    while (x->slot[i] && strcmp(b->prog->tens[x->slot[i] - 1].name, name) != 0)
        i = (i + 1) & mask;
    return &x->slot[i];
}

/* Records tensor id under its name unless that name is already taken. */
static void names_add(opb *b, uint32_t id)
{
    struct opb_names *x = b->names;
    if (2 * (x->n + 1) > x->cap) {
        struct opb_names old = *x;
        size_t cap = 2 * old.cap;
        if (!(x->slot = calloc(cap, sizeof *x->slot))) {
            *x = old;
            b->failed = 1;
            return;
        }
        x->cap = cap;
        for (size_t i = 0; i < old.cap; i++)
            if (old.slot[i])
                *names_slot(b, b->prog->tens[old.slot[i] - 1].name) = old.slot[i];
        free(old.slot);
    }
    uint32_t *s = names_slot(b, b->prog->tens[id].name);
    if (!*s) {
        *s = id + 1;
        x->n++;
    }
}

void opb_index(opb *b)
{
    if (b->failed || b->names)
        return;
    struct opb_names *x = calloc(1, sizeof *x);
    size_t cap = 1024;
    while (cap < 4 * (b->prog->n_tens + 64))
        cap *= 2;
    if (!x || !(x->slot = calloc(cap, sizeof *x->slot))) {
        free(x);
        b->failed = 1;
        return;
    }
    x->cap = cap;
    b->names = x;
    for (size_t t = 0; t < b->prog->n_tens && !b->failed; t++)
        names_add(b, (uint32_t)t);
}

void opb_release(opb *b)
{
    if (b->names) {
        free(b->names->slot);
        free(b->names);
        b->names = NULL;
    }
}

void opb_name(const opb *b, char full[48], const char *nm)
{
    if (b->prefix && b->prefix[0]) {
        char tail[48];
        snprintf(tail, sizeof tail, "%s%s", b->prefix, nm);
        op_layer_name(full, b->layer, tail);
    } else {
        op_layer_name(full, b->layer, nm);
    }
}

uint32_t opb_tensor_as(opb *b, const char *full, op_role role, uint32_t batch, uint32_t rows,
                       uint32_t cols)
{
    if (b->failed)
        return OP_NONE;
    uint32_t id = op_tensor_add(b->prog, full, role, DOM_ARITH, batch, rows, cols);
    if (id == OP_NONE)
        b->failed = 1;
    else if (b->names)
        names_add(b, id);
    return b->failed ? OP_NONE : id;
}

uint32_t opb_tensor(opb *b, const char *nm, op_role role, uint32_t batch, uint32_t rows,
                    uint32_t cols)
{
    char full[48];
    opb_name(b, full, nm);
    return opb_tensor_as(b, full, role, batch, rows, cols);
}

uint32_t opb_find_as(opb *b, const char *full)
{
    if (b->failed)
        return OP_NONE;
    if (b->names)
        return *names_slot(b, full) - 1; /* 0 (empty) → OP_NONE */
    return op_tensor_find(b->prog, full);
}

uint32_t opb_find(opb *b, const char *nm)
{
    char full[48];
    opb_name(b, full, nm);
    return opb_find_as(b, full);
}

uint32_t opb_shared(opb *b, const char *nm, op_role role, uint32_t batch, uint32_t rows,
                    uint32_t cols)
{
    char full[48];
    opb_name(b, full, nm);
    uint32_t id = opb_find_as(b, full);
    return id != OP_NONE ? id : opb_tensor_as(b, full, role, batch, rows, cols);
}

uint32_t opb_matching(opb *b, const char *nm, op_role role, uint32_t batch, uint32_t rows,
                      uint32_t cols)
{
    char full[48];
    opb_name(b, full, nm);
    uint32_t id = opb_find_as(b, full);
    if (id != OP_NONE) {
        const op_tensor *t = &b->prog->tens[id];
        if (t->role == role &&
            (uint64_t)t->batch * t->rows * t->cols == (uint64_t)batch * rows * cols)
            return id;
    }
    return opb_tensor_as(b, full, role, batch, rows, cols);
}

uint32_t opb_op_cat(opb *b, int cat, int kind, uint32_t batch, uint32_t m, uint32_t k, uint32_t n,
                    uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags,
                    int32_t iarg, double farg)
{
    op o = {.kind = (uint16_t)kind,
            .phase = (uint8_t)b->phase,
            .cat = (uint8_t)cat,
            .layer = (int16_t)b->layer,
            .group = -1,
            .batch = batch,
            .m = m,
            .k = k,
            .n = n,
            .in = {in0, in1, in2},
            .out = out,
            .flags = flags,
            .iarg = iarg,
            .farg = farg};
    if (b->failed || out == OP_NONE || op_emit(b->prog, &o) < 0) {
        b->failed = 1;
        return OP_NONE;
    }
    return out;
}

uint32_t opb_op(opb *b, int kind, uint32_t batch, uint32_t m, uint32_t k, uint32_t n, uint32_t in0,
                uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags, int32_t iarg, double farg)
{
    return opb_op_cat(b, b->cat, kind, batch, m, k, n, in0, in1, in2, out, flags, iarg, farg);
}

uint32_t opb_transpose(opb *b, uint32_t x, uint32_t B, uint32_t R, uint32_t C, const char *nm)
{
    uint32_t out = opb_tensor(b, nm, OPT_TEMP, B, C, R);
    return opb_op(b, OP_VIEW, B * R, C, 0, 1, x, OP_NONE, OP_NONE, out, OPF_MERGE_HEADS, 0, 0);
}

uint32_t opb_rows(opb *b, uint32_t x, uint32_t B, uint32_t r0, uint32_t n, uint32_t C,
                  const char *nm)
{
    uint32_t out = opb_tensor(b, nm, OPT_TEMP, B, n, C);
    return opb_op(b, OP_VIEW, B, n, 0, C, x, OP_NONE, OP_NONE, out, 0, (int32_t)r0, 0);
}

void opb_put(opb *b, uint32_t x, uint32_t out, uint32_t B, uint32_t r0, uint32_t n, uint32_t C)
{
    opb_op(b, OP_VIEW, B, n, 0, C, x, OP_NONE, OP_NONE, out, 0, (int32_t)r0, 0);
}

void opb_write(opb *b, uint32_t x, uint32_t out, uint32_t B, uint32_t r0, uint32_t n, uint32_t C)
{
    opb_op(b, OP_VIEW, B, n, 0, C, x, OP_NONE, OP_NONE, out, OPF_IN_PLACE, (int32_t)r0, 0);
}

uint32_t opb_matmul_pub(opb *b, uint32_t x, uint32_t pub, uint32_t M, uint32_t k, uint32_t n,
                        uint32_t out)
{
    return opb_op(b, OP_MATMUL, 1, M, k, n, x, pub, OP_NONE, out, OPF_PUBLIC_B | OPF_NO_TRUNC, 0,
                  0);
}

uint32_t opb_colsum(opb *b, uint32_t oh, uint32_t B, uint32_t k, uint32_t n, const char *nm)
{
    char a[48], o[48];
    snprintf(a, sizeof a, "%.40s_t", nm);
    snprintf(o, sizeof o, "%.40s_ones", nm);
    uint32_t t = opb_transpose(b, oh, B, k, n, a);
    uint32_t ones = opb_shared(b, o, OPT_PUBLIC, 1, k, 1);
    uint32_t out = opb_tensor(b, nm, OPT_TEMP, B, n, 1);
    return opb_matmul_pub(b, t, ones, B * n, k, 1, out);
}

uint32_t opb_repeat(opb *b, uint32_t x, uint32_t B, uint32_t n, uint32_t r, const char *nm)
{
    char o[48], t[48];
    snprintf(o, sizeof o, "%.40s_ones", nm);
    snprintf(t, sizeof t, "%.40s_t", nm);
    uint32_t ones = opb_shared(b, o, OPT_PUBLIC, 1, 1, r);
    uint32_t y = opb_matmul_pub(b, x, ones, B * n, 1, r, opb_tensor(b, t, OPT_TEMP, B, n, r));
    return opb_transpose(b, y, B, n, r, nm);
}
