/* proto_aby3.c — 3PC replicated secret sharing over Z_2^64, semi-honest honest majority
 * (ABY3, SPU ABY3): defaults and the cost engine. Party i holds (x_i, x_{i+1}); a
 * reshare sends one element on each link i → i−1 (PRIMITIVES.md §aby3). No dealer. */

#include "proto_cost.h"

static void aby3_defaults(proto_cfg *c)
{
    cost_defaults_fm64(c, "aby3");
    c->beaver_cache = 0; /* no Beaver triples in replicated sharing */
    c->trunc_local = 0;  /* trunc: pair — exact for |x| < 2^62, as SPU's default (its
                          * trunc_allow_msb_error is off: aby3 TruncAPr); 1 = ABY3 Share
                          * Truncation I, 1 round, fails with probability |x|/2^64 */
}

/* One element per secret element on each link i → i−1 (P_i sends to P_{i−1}). */
static void ring_links(cost_round *r, uint64_t b)
{
    r->bytes[1][0] = b;
    r->bytes[2][1] = b;
    r->bytes[0][2] = b;
}

static void work3(cost_round *r, double elem, double prg)
{
    for (int p = 0; p < 3; p++) {
        r->work[p][WK_ELEM] += elem;
        r->work[p][WK_PRG] += prg;
    }
}

static int a3_input(eng *e, mpc_val *z, int owner, const uint64_t *plain)
{
    uint64_t n = z->n;
    int o = (owner >= 0 && owner < 3) ? owner : 0;
    COST_PUSH(PRIM_INPUT);
    /* COST: ABY3 §2.2: owner sends two components (16n bytes) to each other party */
    r->bytes[o][(o + 1) % 3] = 16 * n;
    r->bytes[o][(o + 2) % 3] = 16 * n;
    r->work[o][WK_ELEM] += 3.0 * n;
    r->work[o][WK_PRG] += 16.0 * n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int a3_open(eng *e, uint64_t *out, const mpc_val *x, int to)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_OPEN);
    if (to < 0 || to > 2) {
        ring_links(r, 8 * n); /* COST: SPU aby3 a2p: K bits: P_i sends x_{i+1} to P_{i-1} */
        work3(r, 2.0 * n, 0);
    } else {
        r->bytes[(to + 1) % 3][to] = 8 * n; /* COST: P_{p+1} sends x_{p+2} to p */
        r->work[to][WK_ELEM] += 2.0 * n;
    }
    return MS_OK;
}

static int a3_mul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_MUL);
    ring_links(r, 8 * n); /* COST: SPU aby3 mul_aa: K bits: reshare z_i */
    work3(r, 5.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int a3_square(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_SQUARE);
    ring_links(r, 8 * n); /* COST: as mul_aa (PRIMITIVES.md) */
    work3(r, 4.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int a3_matmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t batch,
                     uint32_t m, uint32_t k, uint32_t n, uint32_t flags, uint32_t y_id)
{
    uint64_t mn = (uint64_t)batch * m * n;
    COST_PUSH(PRIM_MATMUL);
    ring_links(r, 8 * mn); /* COST: SPU aby3 mmul_aa: K*m*n bits, reshare the product */
    /* Z_i = X_i·(Y_i + Y_{i+1}) + X_{i+1}·Y_i: two share matmuls and the additions
     * Y_i + Y_{i+1} (backend mpc_aby3.c a_matmul; SPU aby3 MatMulAA, libspu/mpc/aby3/
     * arithmetic.cc, computes the same sum) */
    double macs = (double)batch * m * k * n;
    for (int p = 0; p < 3; p++)
        r->work[p][WK_MAC] += 2.0 * macs;
    work3(r, 2.0 * mn + (double)y->n, 16.0 * mn);
    z->n = mn;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int a3_and(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_AND);
    ring_links(r, 8 * n); /* COST: SPU aby3 and_bb: K bits per word */
    work3(r, 5.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_BOOL;
    return MS_OK;
}

static int a3_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    uint64_t n = x->n;
    z->n = n;
    z->dom = DOM_ARITH;
    if (e->kv.trunc == KV_TRUNC_LOCAL) {
        COST_PUSH(PRIM_TRUNC);
        r->bytes[0][2] = 8 * n; /* COST: ABY3 §5.1.1 Share Truncation I: P0 sends y0 to P2 */
        work3(r, 3.0 * n, 8.0 * n);
        return MS_OK;
    }
    if (e->kv.trunc == KV_TRUNC_SPU) {
        /* COST: SPU aby3 TruncAPr (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
         * libspu/mpc/aby3/arithmetic.cc 758-940, PRIMITIVES.md): round 1 P0 and P1 open
         * c = x + 2^62 + r to each other (8n each way) while P2 sends each of them two full
         * words (its share of msb(r) and of r's middle bits, 16n each); round 2 P0 and P1
         * exchange one masked word (8n each way): 64n in all */
        {
            COST_PUSH(PRIM_TRUNC);
            r->bytes[0][1] = r->bytes[1][0] = 8 * n;
            r->bytes[2][0] = r->bytes[2][1] = 16 * n;
            work3(r, 5.0 * n, 24.0 * n);
        }
        COST_PUSH(PRIM_TRUNC);
        r->bytes[0][1] = r->bytes[1][0] = 8 * n;
        work3(r, 2.0 * n, 16.0 * n);
        return MS_OK;
    }
    /* COST: trunc pair (PRIMITIVES.md; SPU aby3 TruncAPr, eprint 2020/338 §5.1): round 1 P0
     * and P1 open c = x + 2^(l-2) + r to each other (8n each way) while P2, which knows r,
     * sends P1 its share of r' (8n) and of msb(r) mod 2^(bits+1), packed (n·⌈(bits+1)/8⌉);
     * round 2 P0 and P1 each send P2 one masked component of the result (8n each): 43n in
     * all at bits = 18 */
    {
        COST_PUSH(PRIM_TRUNC);
        r->bytes[0][1] = r->bytes[1][0] = 8 * n;
        r->bytes[2][1] = 8 * n + cost_packed(n, bits + 1);
        work3(r, 5.0 * n, 24.0 * n);
    }
    COST_PUSH(PRIM_TRUNC);
    r->bytes[0][2] = r->bytes[1][2] = 8 * n;
    work3(r, 2.0 * n, 16.0 * n);
    return MS_OK;
}

/* COST: SPU aby3 B2P (libspu/mpc/aby3/boolean.cc 67-90): each party sends its next one the
 * share in SPU's storage for a bit, one byte: 1 round, n on each link i→i−1. */
static int a3_open_bit(eng *e, uint64_t *out, const mpc_val *x)
{
    (void)out;
    uint64_t n = x->n;
    COST_PUSH(PRIM_OPEN);
    ring_links(r, n);
    work3(r, 2.0 * n, 0);
    return MS_OK;
}

/* COST: SPU aby3 eqz (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/aby3/conversion.cc 644-849, EqualAA 851-873; roles at pivot 0): round 1 P0 sends P2
 * its parts of r in both sharings (16n; P1's come from the key P0 and P1 share); round 2 P2 sends
 * P1 its part of c = x + r (8n); round 3 P1 sends P2 the flag's masked component (8n). 32n in all.
 */
static int a3_eqz_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    {
        COST_PUSH(PRIM_OPEN);
        r->bytes[0][2] = 16 * n;
        work3(r, 2.0 * n, 24.0 * n);
    }
    {
        COST_PUSH(PRIM_OPEN);
        r->bytes[2][1] = 8 * n;
        work3(r, 2.0 * n, 0);
    }
    COST_PUSH(PRIM_OPEN);
    r->bytes[1][2] = 8 * n;
    work3(r, 2.0 * n, 0);
    z->n = n;
    z->dom = DOM_BOOL;
    return MS_OK;
}

/* COST: SPU aby3 MulA1B (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/aby3/arithmetic.cc 451-570): two three-party OTs side by side, senders P0
 * (receiver P2, helper P1) and P2 (receiver P1, helper P0). Round 1: each sender sends its
 * receiver two masked words (16n), each helper the receiver one (8n); round 2: each receiver
 * forwards one word to its helper (8n). 64n in all: P0 and P2 send 24n, P1 16n. */
static int a3_mul_a1b(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b)
{
    uint64_t n = a->n;
    (void)b;
    {
        COST_PUSH(PRIM_MULA1B);
        r->bytes[0][2] = r->bytes[2][1] = 16 * n;
        r->bytes[1][2] = r->bytes[0][1] = 8 * n;
        work3(r, 6.0 * n, 48.0 * n);
    }
    COST_PUSH(PRIM_MULA1B);
    r->bytes[2][1] = r->bytes[1][0] = 8 * n;
    work3(r, 3.0 * n, 0);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int a3_b2a(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    /* COST: b = b0^b1^b2 as d = b0+b1-2b0b1, b = d+b2-2d·b2: two multiplications, 2 rounds
     * of K bits per link (PRIMITIVES.md; SPU aby3 B2AByOT also takes 2 rounds) */
    for (int i = 0; i < 2; i++) {
        COST_PUSH(PRIM_B2A);
        ring_links(r, 8 * n);
        work3(r, 5.0 * n, 16.0 * n);
    }
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

/* ABY3 AND on the bits of mask, the reshared word packed: n·⌈pc/8⌉ on each link i→i−1. */
static int a3_and_bits(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint64_t mask,
                       int priv)
{
    uint64_t n = x->n;
    (void)priv;
    COST_PUSH(PRIM_ANDBITS);
    ring_links(r, cost_packed(n, __builtin_popcountll(mask))); /* COST: SPU msb_a2b packing */
    work3(r, 5.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_BOOL;
    return MS_OK;
}

/* a = x0 + x1 (P0's) as a boolean sharing: P0 sends its masked share to P2, n·⌈bits/8⌉;
 * b = x2 (held by P1 and P2) is a sharing already (PRIMITIVES.md bool_pair). */
static int a3_bool_pair(eng *e, mpc_val *a, mpc_val *b, const mpc_val *x, int bits)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_PAIR);
    r->bytes[0][2] = cost_packed(n, bits);
    work3(r, 3.0 * n, 8.0 * n);
    a->n = b->n = n;
    a->dom = b->dom = DOM_BOOL;
    return MS_OK;
}

/* COST: SPU aby3 B2ASelector (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/aby3/conversion.cc 115-127): up to 8 bits B2AByOT (315-455; helper P0, receiver P1,
 * sender P2): round 1 P0→P1 8n·bits, P2→P1 16n·bits, round 2 P1→P0 8n·bits; above, B2AByPPA
 * (143-310): a rotate (8n on each link), the 64-bit Kogge–Stone adder of ab_api.cc 314-337
 * (one AND, then six levels of two: 8n, then 16n six times on each link), P2→P0 8n, a rotate:
 * 368n in 10 rounds. */
static int a3_b2a_word(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    uint64_t n = x->n, b = (uint64_t)bits;
    if (bits <= 8) {
        {
            COST_PUSH(PRIM_B2AWORD);
            r->bytes[0][1] = 8 * n * b;
            r->bytes[2][1] = 16 * n * b;
            work3(r, 4.0 * n * b, 24.0 * n * b);
        }
        COST_PUSH(PRIM_B2AWORD);
        r->bytes[1][0] = 8 * n;
        work3(r, 2.0 * n * b, 0);
    } else {
        for (int k = 0; k < 10; k++) {
            COST_PUSH(PRIM_B2AWORD);
            if (k == 8)
                r->bytes[2][0] = 8 * n;
            else
                ring_links(r, k >= 2 && k <= 7 ? 16 * n : 8 * n);
            work3(r, 6.0 * n, k == 0 ? 32.0 * n : 8.0 * n);
        }
    }
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

/* daBit b2a with P2 as the dealer of P0 and P1: round 1 opens the masked bit between P0 and
 * P1 (n each way) while P2 sends P1 the arithmetic share of the random bit (8n); round 2
 * turns the two-party arithmetic sharing into a replicated one (P0 and P1 each send P2 8n). */
static int a3_b2a_bit(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    {
        COST_PUSH(PRIM_B2ABIT);
        r->bytes[0][1] = r->bytes[1][0] = cost_packed(n, 1);
        r->bytes[2][1] = 8 * n;
        work3(r, 3.0 * n, 16.0 * n);
    }
    COST_PUSH(PRIM_B2ABIT);
    r->bytes[0][2] = r->bytes[1][2] = 8 * n;
    work3(r, 2.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int a3_shuffle(eng *e, mpc_val *z, const mpc_val *x, size_t seg, size_t parts)
{
    uint64_t n = x->n;
    /* COST: SPU aby3 PermAM (libspu/mpc/aby3/permute.cc; eprint 2019/695 Algorithm 9): three
     * permutations, each known to two parties. Round 1: P0 sends P2 its re-masked π0/π1 share
     * and P2 sends P1 its masked π0 share (8n each); round 2: P1 and P2 exchange their masked
     * π2 outputs for the 2-out-of-3 reshare (8n each way) (PRIMITIVES.md). */
    {
        COST_PUSH(PRIM_SHUFFLE);
        r->bytes[0][2] = 8 * n;
        r->bytes[2][1] = 8 * n;
        work3(r, 3.0 * n, 16.0 * n);
    }
    {
        COST_PUSH(PRIM_SHUFFLE);
        r->bytes[1][2] = 8 * n;
        r->bytes[2][1] = 8 * n;
        work3(r, 3.0 * n, 8.0 * n);
    }
    (void)seg, (void)parts;
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static const eng_vt aby3_cost_vt = {
    .input = a3_input,
    .open = a3_open,
    .mul = a3_mul,
    .square = a3_square,
    .matmul = a3_matmul,
    .and_bb = a3_and,
    .trunc = a3_trunc,
    .b2a = a3_b2a,
    .mul_a1b = a3_mul_a1b,
    .and_bits = a3_and_bits,
    .bool_pair = a3_bool_pair,
    .b2a_bit = a3_b2a_bit,
    .b2a_word = a3_b2a_word,
    .eqz_spu = a3_eqz_spu,
    .open_bit = a3_open_bit,
    .shuffle = a3_shuffle,
};

static int aby3_cost_engine(const proto_cfg *cfg, cost_log *log, eng **out)
{
    return cost_engine_new(&proto_aby3, cfg, log, &aby3_cost_vt, 2, out);
}

const proto proto_aby3 = {
    .name = "aby3",
    .version = 1,
    .n_parties = 3,
    .has_dealer = 0,
    .nodes = 3,
    .shares_per_party = 2,
    .legacy_trunc_local = 1,
    .summary = "3PC replicated sharing over Z_2^64, honest majority (ABY3, SPU ABY3)",
    .defaults = aby3_defaults,
    .cost_engine = aby3_cost_engine,
};
