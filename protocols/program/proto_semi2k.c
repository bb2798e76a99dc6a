/* proto_semi2k.c — 2PC additive sharing over Z_2^64 with a trusted dealer (SPU SEMI2K,
 * CrypTen-TTP style): defaults and the cost engine. Every communicating primitive appends one
 * cost_round per round with the exact message pattern of PRIMITIVES.md §semi2k; offline bytes
 * are the dealer's corrections, all sent to P1 (P0 derives its correlated values from a seed). */

#include "proto_cost.h"

static void semi2k_defaults(proto_cfg *c)
{
    cost_defaults_fm64(c, "semi2k");
    c->beaver_cache = 1; /* SPU semi2k BeaverCacheKernel */
    c->trunc_local = 0;  /* SPU 2PC default is a 1-round probabilistic truncation */
}

static void both(cost_round *r, uint64_t b)
{
    r->bytes[0][1] = b;
    r->bytes[1][0] = b;
}

static void work2(cost_round *r, double e0, double e1, double prg0, double prg1)
{
    r->work[0][WK_ELEM] += e0;
    r->work[1][WK_ELEM] += e1;
    r->work[0][WK_PRG] += prg0;
    r->work[1][WK_PRG] += prg1;
}

static int s2_input(eng *e, mpc_val *z, int owner, const uint64_t *plain)
{
    size_t n = z->n;
    COST_PUSH(PRIM_INPUT);
    int o = owner == 1 ? 1 : 0;
    /* COST: SPU make_shares: owner sends x - r, 8n bytes, 1 round (PRIMITIVES.md) */
    r->bytes[o][1 - o] = 8 * (uint64_t)n;
    r->work[o][WK_ELEM] += (double)n;
    r->work[o][WK_PRG] += 8.0 * n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int s2_open(eng *e, uint64_t *out, const mpc_val *x, int to)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_OPEN);
    if (to < 0 || to > 1) {
        both(r, 8 * n); /* COST: SPU semi2k a2p: K(N-1) bits = 8n bytes each way */
        work2(r, (double)n, (double)n, 0, 0);
    } else {
        r->bytes[1 - to][to] = 8 * n; /* COST: open to one party: 8n from the other */
        r->work[to][WK_ELEM] += (double)n;
    }
    return MS_OK;
}

static int s2_mul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_MUL);
    both(r, 16 * n);       /* COST: SPU semi2k mul_aa: K*2*(N-1) bits: (x-a, y-b) */
    r->offline[1] = 8 * n; /* COST: dealer sends P1 the correction c1 = ab - c0 */
    work2(r, 6.0 * n, 5.0 * n, 24.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

/* COST: SPU semi2k MulA1B (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/semi2k/arithmetic.cc 331-371): b_i → (1 − 2b_i)·a_i locally, then one MulOpen of
 * the pair: 1 round, 16n each way, one triple (the dealer's c correction to P1) */
static int s2_mul_a1b(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b)
{
    uint64_t n = a->n;
    (void)b;
    COST_PUSH(PRIM_MULA1B);
    both(r, 16 * n);
    r->offline[1] = 8 * n;
    work2(r, 9.0 * n, 8.0 * n, 24.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int s2_square(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_SQUARE);
    both(r, 8 * n);        /* COST: SPU semi2k square: K(N-1) bits: x - a */
    r->offline[1] = 8 * n; /* COST: dealer correction for a^2 */
    work2(r, 4.0 * n, 3.0 * n, 16.0 * n, 8.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int s2_matmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t batch,
                     uint32_t m, uint32_t k, uint32_t n, uint32_t flags, uint32_t y_id)
{
    uint64_t b = batch, mk = (uint64_t)m * k, mn = (uint64_t)m * n;
    int cached = (flags & OPF_FIXED_B) && e->cfg.beaver_cache;
    COST_PUSH(PRIM_MATMUL);
    /* a right operand shared by several instances (op.h, GQA) is masked and opened once per
     * distinct instance: y->n = b_y·kn (PRIMITIVES.md: 8(b·mk + b_y·kn)) */
    if (cached)
        both(r, 8 * b * mk); /* COST: SPU semi2k BeaverCacheKernel: only X - A is opened */
    else
        both(r, 8 * (b * mk + y->n)); /* COST: SPU semi2k mmul_aa: K(N-1)(m+n)k bits */
    r->offline[1] = 8 * b * mn;       /* COST: dealer correction C1 = AB - C0 */
    double macs = (double)b * m * k * n;
    r->work[0][WK_MAC] += 3.0 * macs; /* E·B, A·F, E·F (PRIMITIVES.md local work) */
    r->work[1][WK_MAC] += 2.0 * macs;
    work2(r, (double)b * (mk + mn) + y->n, (double)b * (mk + mn) + y->n,
          8.0 * (b * (mk + mn) + y->n), 8.0 * (b * mk + y->n));
    z->n = b * mn;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int s2_and(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_AND);
    both(r, 16 * n);       /* COST: SPU semi2k and_bb: K*2*(N-1) bits per word */
    r->offline[1] = 8 * n; /* COST: dealer correction of the boolean triple */
    work2(r, 6.0 * n, 5.0 * n, 24.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_BOOL;
    return MS_OK;
}

static int s2_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    uint64_t n = x->n;
    z->n = n;
    z->dom = DOM_ARITH;
    if (e->kv.trunc == KV_TRUNC_LOCAL) /* COST: SecureML local truncation: 0 rounds, 0 bytes */
        return cost_local(e, PRIM_TRUNC, (double)n);
    COST_PUSH(PRIM_TRUNC);
    both(r, 8 * n);         /* COST: eprint 2020/338 §5.1 TruncPr: open c = x + 2^(l-2) + r */
    r->offline[1] = 16 * n; /* COST: dealer corrections for r and msb(r) / r >> bits */
    work2(r, 4.0 * n, 4.0 * n, 16.0 * n, 0);
    return MS_OK;
}

/* COST: SPU semi2k eqz (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/semi2k/conversion.cc 316-374, EqualAA 376-388): the dealer's r in both sharings
 * (beaver Eqz, offline: 8n to P1), c = x + r opened by one all-reduce (8n each way, 1 round). */
static int s2_eqz_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_OPEN);
    both(r, 8 * n);
    r->offline[1] = 8 * n;
    work2(r, 4.0 * n, 4.0 * n, 16.0 * n, 8.0 * n);
    z->n = n;
    z->dom = DOM_BOOL;
    return MS_OK;
}

/* COST: SPU semi2k B2P (libspu/mpc/semi2k/boolean.cc 90-95): one all-reduce of the share in
 * semi2k's storage, the ring's word: 1 round, 8n each way. */
static int s2_open_bit(eng *e, uint64_t *out, const mpc_val *x) { return s2_open(e, out, x, -1); }

static int s2_b2a(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_B2A);
    both(r, 8 * n);        /* COST: SPU semi2k B2A_Randbit: K(N-1) bits per bit: open x ^ r */
    r->offline[1] = 8 * n; /* COST: dealer sends P1 the arithmetic share of r */
    work2(r, 3.0 * n, 3.0 * n, 16.0 * n, 8.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

/* Beaver AND on the bits of mask, both opened words packed: n·⌈2pc/8⌉ each way, the
 * triple's correction n·⌈pc/8⌉; with priv each party opens its own operand only: n·⌈pc/8⌉
 * each way (PRIMITIVES.md and_bits). */
static int s2_and_bits(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint64_t mask,
                       int priv)
{
    uint64_t n = x->n;
    int pc = __builtin_popcountll(mask);
    COST_PUSH(PRIM_ANDBITS);
    both(r, cost_packed(n, priv ? pc : 2 * pc)); /* COST: SPU msb_a2b packs its AND words */
    r->offline[1] = cost_packed(n, pc);          /* COST: dealer correction c1, packed */
    work2(r, 6.0 * n, 5.0 * n, 24.0 * n, 16.0 * n);
    z->n = n;
    z->dom = DOM_BOOL;
    return MS_OK;
}

/* The two components x0, x1 as boolean words: local (PRIMITIVES.md bool_pair). */
static int s2_bool_pair(eng *e, mpc_val *a, mpc_val *b, const mpc_val *x, int bits)
{
    a->n = b->n = x->n;
    a->dom = b->dom = DOM_BOOL;
    (void)bits;
    return cost_local(e, PRIM_PAIR, 2.0 * (double)x->n);
}

/* daBit b2a: the masked bit opened packed, n each way; the dealer sends P1 the
 * arithmetic share of the random bit, 8n (Rotaru–Wood daBits; SPU semi2k B2A_Randbit with
 * the opened bit packed). */
static int s2_b2a_bit(eng *e, mpc_val *z, const mpc_val *x)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_B2ABIT);
    both(r, cost_packed(n, 1));
    r->offline[1] = 8 * n;
    work2(r, 3.0 * n, 3.0 * n, 16.0 * n, 8.0 * n);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

/* COST: SPU semi2k B2A_Randbit (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/semi2k/conversion.cc 116-200): 1 round, x ^ r opened in the storage type of bits
 * (boolean.cc 48-64: 1, 2, 4 or 8 bytes) each way; the dealer sends P1 the arithmetic share of
 * each of the bits random bits (8n·bits). */
static int s2_b2a_word(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    uint64_t n = x->n;
    COST_PUSH(PRIM_B2AWORD);
    both(r, n * (uint64_t)(bits <= 8 ? 1 : bits <= 16 ? 2 : bits <= 32 ? 4 : 8));
    r->offline[1] = 8 * n * (uint64_t)bits;
    work2(r, (2.0 + 3.0 * bits) * n, (2.0 + 3.0 * bits) * n, 16.0 * n, 8.0 * n * bits);
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int s2_shuffle(eng *e, mpc_val *z, const mpc_val *x, size_t seg, size_t parts)
{
    uint64_t n = x->n;
    /* COST: SPU semi2k PermAM (libspu/mpc/semi2k/permute.cc SecureInvPerm, once per party):
     * the permutation of owner o applied with the dealer's pair (A, π(A) − B): the other party
     * opens x − A to o (8n bytes, one round), the dealer sends P1 its part of π(A) − B (8n
     * offline). Round 1: P0's permutation, round 2: P1's (PRIMITIVES.md). */
    for (int o = 0; o < 2; o++) {
        COST_PUSH(PRIM_SHUFFLE);
        r->bytes[1 - o][o] = 8 * n;
        r->offline[1] = 8 * n;
        r->work[1 - o][WK_ELEM] += (double)n;
        r->work[o][WK_ELEM] += 3.0 * n; /* x − A + received, π, + B */
        r->work[0][WK_PRG] += 8.0 * n * (o == 0 ? 3 : 2);
        r->work[1][WK_PRG] += 8.0 * n * (o == 1 ? 2 : 1);
    }
    (void)seg, (void)parts;
    z->n = n;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static const eng_vt semi2k_cost_vt = {
    .input = s2_input,
    .open = s2_open,
    .mul = s2_mul,
    .mul_a1b = s2_mul_a1b,
    .square = s2_square,
    .matmul = s2_matmul,
    .and_bb = s2_and,
    .trunc = s2_trunc,
    .b2a = s2_b2a,
    .and_bits = s2_and_bits,
    .bool_pair = s2_bool_pair,
    .b2a_bit = s2_b2a_bit,
    .b2a_word = s2_b2a_word,
    .eqz_spu = s2_eqz_spu,
    .open_bit = s2_open_bit,
    .shuffle = s2_shuffle,
};

static int semi2k_cost_engine(const proto_cfg *cfg, cost_log *log, eng **out)
{
    return cost_engine_new(&proto_semi2k, cfg, log, &semi2k_cost_vt, 1, out);
}

const proto proto_semi2k = {
    .name = "semi2k",
    .version = 1,
    .n_parties = 2,
    .has_dealer = 1,
    .nodes = 3,
    .shares_per_party = 1,
    .legacy_trunc_local = 0,
    .summary = "2PC additive sharing over Z_2^64, trusted dealer (SPU SEMI2K, CrypTen TTP)",
    .defaults = semi2k_defaults,
    .cost_engine = semi2k_cost_engine,
};
