/* mpcache_ops.c — MPCache's selection as ops (mpcache_ops.h "MPCache on shares"): the public plan
 * of a step, the ops the cost path emits with placeholder operands and the secure session with
 * its real ones, the public constants they read, and the audit of the opened top-k values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/kern.h"
#include "protocols/program/opb.h"
#include "mpcache_ops.h"

/* Scores of clusters outside the level-1 set are pushed down by MPCACHE_BIG (far above any
 * |q·bound|), pad and unchosen rows get MPCACHE_PAD on the scores (far below the softmax's clip, as
 * secinf.c's PAD_MASK); the mask column holds MPCACHE_PAD_OFF for an attended row. */
#define MPCACHE_BIG 4096.0
#define MPCACHE_PAD_OFF 96.0

int mpcache_layer_kind(const mpcache_shape *s, uint32_t l)
{
    if (s->skip2 && l < 2)
        return MPCACHE_LAYER_DENSE;
    if (s->share && l >= 2 && l % 2)
        return MPCACHE_LAYER_SHARED;
    return MPCACHE_LAYER_SELECT;
}

void mpcache_plan_layer(const mpcache_shape *s, uint32_t layer, uint32_t n, mpcache_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->n = n;
    pl->G1 = (n + s->s1 - 1) / s->s1;
    pl->G2 = (n + s->s2 - 1) / s->s2;
    pl->Npad = pl->G2 * s->s2;
    if (n == 0 || mpcache_layer_kind(s, layer) == MPCACHE_LAYER_DENSE) {
        pl->path = MPCACHE_PATH_FULL;
        pl->rows = n;
        return;
    }
    int partial = n % s->s1 != 0;
    pl->k1 = (uint32_t)floor(pl->G1 * s->ratio1);
    pl->k2 = (uint32_t)floor(pl->G2 * s->ratio2);
    pl->k2 = pl->k2 < pl->G2 ? pl->k2 : pl->G2;
    pl->f1[pl->nf1++] = 0;
    if (partial && pl->G1 > 1)
        pl->f1[pl->nf1++] = pl->G1 - 1;
    pl->f2[pl->nf2++] = 0;
    if (partial && pl->G2 > 1)
        pl->f2[pl->nf2++] = pl->G2 - 1;
    pl->lv2 = pl->k2 > 0 && pl->k2 < pl->G2;
    if (pl->k2 == 0 && pl->nf2 < pl->G2)
        pl->path = MPCACHE_PATH_FORCED, pl->slots = pl->nf2;
    else if (pl->lv2 && pl->k2 + pl->nf2 < pl->G2)
        pl->path = MPCACHE_PATH_GATHER, pl->slots = pl->k2 + pl->nf2;
    else
        pl->path = MPCACHE_PATH_FULL;
    pl->rows = pl->path == MPCACHE_PATH_FULL ? n : pl->slots * s->s2;
    int need_u = pl->lv2 || (pl->path == MPCACHE_PATH_FULL && pl->k2 == pl->G2);
    pl->lv1 = need_u && pl->k1 > 0 && pl->k1 < pl->G1;
    /* the mask: secret when it depends on a secret choice, public for pad tokens or a public
     * choice */
    if (pl->path == MPCACHE_PATH_GATHER || (pl->path == MPCACHE_PATH_FULL && (pl->lv1 || pl->lv2)))
        pl->mask = 2;
    else
        pl->mask = 1;
}

uint32_t mpcache_attend_rows(const mpcache_shape *s, uint32_t layer, uint32_t n)
{
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    return pl.rows;
}

/* The public chosen set of the full path (no secret choice): w over the 16-clusters. */
static int plan_w(const mpcache_plan *pl, uint32_t c)
{
    if (pl->k2 == 0)
        return plan_f2(pl, c);
    return plan_u(pl, c / 2); /* k2 = G2: every candidate */
}

/* ⌈log2 n⌉ (at least 1): the bits of the values 0 … n − 1. */
static int mpcache_bits(uint64_t n)
{
    int b = 1;
    while (b < 63 && (1ull << b) < n)
        b++;
    return b;
}

/* The bounds of the P keys kc (Hkv, P, d): b16 (Hkv, G2, 2d), b32 (Hkv, G1, 2d). */
static void mpcache_bounds(opb *w, const mpcache_shape *s, uint32_t P, uint32_t kc,
                           mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, s2 = s->s2;
    uint32_t G2 = (P + s2 - 1) / s2, G1 = (P + s->s1 - 1) / s->s1, Np = G2 * s2;
    /* [k | −k] of every key: a public product (local) */
    uint32_t pm = opb_shared(w, "pm", OPT_PUBLIC, 1, d, 2 * d);
    uint32_t kn = opb_tensor(w, "kn_all", OPT_TEMP, Hkv, Np, 2 * d);
    uint32_t rows = Np > P ? opb_tensor(w, "kn_rows", OPT_TEMP, Hkv, P, 2 * d) : kn;
    opb_op(w, OP_MATMUL, 1, Hkv * P, d, 2 * d, kc, pm, OP_NONE, rows, OPF_PUBLIC_B | OPF_NO_TRUNC,
           0, 0);
    if (Np > P) { /* the pad keys at −BIG: they never win a max */
        opb_put(w, rows, kn, Hkv, 0, P, 2 * d);
        uint32_t pad = opb_shared(w, "padk", OPT_PUBLIC, 1, Np, 2 * d);
        opb_op(w, OP_ADD_PUB, Hkv, Np, 0, 2 * d, kn, pad, OP_NONE, kn, 0, 0, 0);
    }
    /* COST: the 16-cluster bounds, a max over each cluster's 16 keys per channel (a tree of
     * comparisons, mpc-costs.md MAX), then the 32-cluster bounds from pairs (policies.md §1.8:
     * MPCache's per-cluster max/min) */
    uint32_t tr = opb_transpose(w, kn, Hkv * G2, s2, 2 * d, "kn_t");
    ids->b16 = opb_tensor(w, "b16_new", OPT_TEMP, Hkv, G2, 2 * d);
    opb_op(w, OP_MAX, Hkv * G2, 2 * d, 0, s2, tr, OP_NONE, OP_NONE, ids->b16, 0, 0, 0);
    uint32_t pair = ids->b16;
    if (2 * G1 > G2) {
        pair = opb_tensor(w, "b16_even", OPT_TEMP, Hkv, 2 * G1, 2 * d);
        opb_put(w, ids->b16, pair, Hkv, 0, G2, 2 * d);
        uint32_t pad = opb_shared(w, "pad16", OPT_PUBLIC, 1, 2 * G1, 2 * d);
        opb_op(w, OP_ADD_PUB, Hkv, 2 * G1, 0, 2 * d, pair, pad, OP_NONE, pair, 0, 0, 0);
    }
    uint32_t pt = opb_transpose(w, pair, Hkv * G1, 2, 2 * d, "b16_t");
    ids->b32 = opb_tensor(w, "b32_new", OPT_TEMP, Hkv, G1, 2 * d);
    opb_op(w, OP_MAX, Hkv * G1, 2 * d, 0, 2, pt, OP_NONE, OP_NONE, ids->b32, 0, 0, 0);
}

int mpcache_emit_prefill(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t P,
                         uint32_t kc, mpcache_ids *ids, errbuf *e)
{
    opb w;
    opb_init(&w, p, PHASE_PREFILL, (int)layer, OPC_POLICY, "mpc.");
    memset(ids, 0xff, sizeof *ids);
    if (mpcache_layer_kind(s, layer) != MPCACHE_LAYER_SELECT || P == 0)
        return MS_OK;
    if (kc == OP_NONE)
        kc = opb_shared(&w, "in_k", OPT_CACHE, s->n_kv_heads, P, s->head_dim);
    mpcache_bounds(&w, s, P, kc, ids);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

/* A secret constant (1, 1, 1) of x's first element times 0 plus a public value (local): the
 * second operand of a comparison with a public number. pub: a public tensor, else farg. */
static uint32_t mconst(opb *w, uint32_t x, uint32_t pub, double farg, const char *nm)
{
    char a[32];
    snprintf(a, sizeof a, "%s_at", nm);
    uint32_t one = opb_rows(w, x, 1, 0, 1, 1, a);
    uint32_t z = opb_tensor(w, nm, OPT_TEMP, 1, 1, 1);
    opb_op(w, OP_MUL_PUB, 1, 1, 0, 1, one, OP_NONE, OP_NONE, z, OPF_NO_TRUNC, 0, 0.0);
    return opb_op(w, OP_ADD_PUB, 1, 1, 0, 1, z, pub, OP_NONE, z, 0, 0, farg);
}

int mpcache_emit_static(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t P,
                        uint32_t probs, mpcache_ids *ids, errbuf *e)
{
    opb w;
    opb_init(&w, p, PHASE_PREFILL, (int)layer, OPC_POLICY, "mpc.");
    uint32_t H = s->n_heads, W = s->window ? s->window : 1;
    W = W < P ? W : P;
    ids->keep = OP_NONE;
    if (mpcache_layer_kind(s, layer) != MPCACHE_LAYER_SELECT || !P)
        return MS_OK;
    if (probs == OP_NONE)
        probs = opb_shared(&w, "in_probs", OPT_CACHE, H, P, P);
    /* COST: the window rows' head sums (a transposition and a public ones product: local), W·P
     * comparisons with H·threshold (policies.md §1.12 MPCache static) */
    uint32_t win = opb_rows(&w, probs, H, P - W, W, P, "win");
    uint32_t wt = opb_transpose(&w, win, 1, H, W * P, "win_t");
    uint32_t sum = opb_tensor(&w, "hsum", OPT_TEMP, 1, W * P, 1);
    opb_op(&w, OP_MATMUL, 1, W * P, H, 1, wt, opb_shared(&w, "ones_h", OPT_PUBLIC, 1, H, 1),
           OP_NONE, sum, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    uint32_t thr = mconst(&w, sum, OP_NONE, H * s->thr, "thr");
    uint32_t lt = opb_tensor(&w, "below", OPT_TEMP, 1, W * P, 1);
    opb_op(&w, OP_LT, 1, W * P, 0, 1, sum, thr, OP_NONE, lt, 0, 0, 0);
    /* COST: the window's OR as [Σ_rows below < W]: a local sum, P comparisons */
    uint32_t lt_t = opb_transpose(&w, lt, 1, W, P, "below_t");
    uint32_t cnt = opb_tensor(&w, "below_n", OPT_TEMP, 1, P, 1);
    opb_op(&w, OP_MATMUL, 1, P, W, 1, lt_t, opb_shared(&w, "ones_w", OPT_PUBLIC, 1, W, 1), OP_NONE,
           cnt, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    uint32_t wv = mconst(&w, cnt, opb_shared(&w, "wval", OPT_PUBLIC, 1, 1, 1), 0, "wv");
    ids->keep = opb_tensor(&w, "keep", OPT_TEMP, 1, P, 1);
    opb_op(&w, OP_LT, 1, P, 0, 1, cnt, wv, OP_NONE, ids->keep, 0, 0, 0);
    /* an integer count against W: cnt − W in [−W, 0], so ⌈log2 W⌉ + 1 bits (kern.c k_lt: exact
     * for differences in [−2^(w−1), 2^(w−1))) */
    if (!w.failed)
        w.prog->ops[w.prog->n_ops - 1].bits = (uint8_t)(mpcache_bits(W) + 1);
    /* COST: the kept count, a local sum, revealed to every party (public in MPCache's model) */
    uint32_t c = opb_tensor(&w, "count_sh", OPT_TEMP, 1, 1, 1);
    opb_op(&w, OP_MATMUL, 1, 1, P, 1, ids->keep, opb_shared(&w, "ones_p", OPT_PUBLIC, 1, P, 1),
           OP_NONE, c, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    opb_op(&w, OP_REVEAL, 1, 1, 0, 1, c, OP_NONE, OP_NONE,
           opb_tensor(&w, "count", OPT_TEMP, 1, 1, 1), 0, -1, 0);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

/* The order-preserving compaction of the P0 prompt rows to the S kept ones: (Hkv, S, 2d+1). */
static uint32_t mpcache_compact(opb *w, const mpcache_shape *s, uint32_t S, uint32_t P0,
                                const mpcache_ids *src, mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1;
    uint32_t full = opb_shared(w, "full", OPT_CACHE, Hkv, P0, F);
    if (src) {
        ids->cmp = src->cmp;
    } else {
        uint32_t keep = opb_shared(w, "keep_in", OPT_CACHE, 1, P0, 1);
        /* prefix sums: ⌈log2 P0⌉ shifted adds (local) */
        uint32_t cur = keep;
        for (uint32_t sh = 1; sh < P0; sh *= 2) {
            uint32_t hd = opb_rows(w, cur, 1, 0, P0 - sh, 1, "prefix_head");
            uint32_t shifted = opb_tensor(w, "prefix_shift", OPT_TEMP, 1, P0, 1);
            opb_put(w, hd, shifted, 1, sh, P0 - sh, 1);
            uint32_t nx = opb_tensor(w, "prefix", OPT_TEMP, 1, P0, 1);
            cur = opb_op(w, OP_ADD, 1, P0, 0, 1, cur, shifted, OP_NONE, nx, 0, 0, 0);
        }
        /* the rank of each kept row, negative for a dropped one (public integers: local) */
        uint32_t sk = opb_tensor(w, "rank", OPT_TEMP, 1, P0, 1);
        opb_op(w, OP_MUL_PUB, 1, P0, 0, 1, keep, opb_shared(w, "sval", OPT_PUBLIC, 1, 1, 1),
               OP_NONE, sk, OPF_NO_TRUNC, 0, 0);
        opb_op(w, OP_ADD, 1, P0, 0, 1, sk, cur, OP_NONE, sk, 0, 0, 0);
        opb_op(w, OP_ADD_PUB, 1, P0, 0, 1, sk, opb_shared(w, "soff", OPT_PUBLIC, 1, 1, 1), OP_NONE,
               sk, 0, 0, 0);
        /* COST: one-hot of each row's rank over the S slots (P0·S equality tests) on the
         * public bound of the ranks' differences (MPCache's ΠGather compares ⌈log2 C⌉ bits,
         * not the ring's 64): rank − slot lies in [−2S, S) — a dropped row's rank is negative,
         * and no rank formula linear in the keep bits and prefix sums (free to compute) keeps
         * 2S consecutive differences off the multiples of 2^w for a smaller w — so w =
         * ⌈log2(2S + 1)⌉, one bit above ⌈log2 S⌉ for the sign (kern.c k_eqz: exact when
         * |d| < 2^w) */
        uint32_t oh = opb_tensor(w, "rank_oh", OPT_TEMP, 1, P0, S);
        opb_op(w, OP_ONEHOT, 1, P0, 0, S, sk, OP_NONE, OP_NONE, oh, 0, 0, 0);
        if (!w->failed)
            w->prog->ops[w->prog->n_ops - 1].bits = (uint8_t)mpcache_bits(2 * (uint64_t)S + 1);
        ids->cmp = opb_transpose(w, oh, 1, P0, S, "compact_oh");
    }
    uint32_t tm = opb_tensor(w, "full_t", OPT_TEMP, 1, P0, Hkv * F);
    opb_op(w, OP_VIEW, Hkv, P0, 0, F, full, OP_NONE, OP_NONE, tm, OPF_MERGE_HEADS, 0, 0);
    /* COST: the kept rows, one-hot × [K | V] of every KV head (one GATHER) */
    uint32_t g = opb_tensor(w, "compact_t", OPT_TEMP, 1, S, Hkv * F);
    opb_op(w, OP_GATHER, 1, S, P0, Hkv * F, ids->cmp, tm, OP_NONE, g, OPF_NO_TRUNC, 0, 0);
    uint32_t out = opb_tensor(w, "compact", OPT_TEMP, Hkv, S, F);
    return opb_op(w, OP_VIEW, Hkv, S, 0, F, g, OP_NONE, OP_NONE, out, OPF_SPLIT_HEADS, 0, 0);
}

/* Level 1: the secret indicator u (Hkv, G1, 1) of the chosen 32-clusters and its expansion to
 * the 16-clusters (Hkv, 1, G2). */
static uint32_t mpcache_level1(opb *w, const mpcache_shape *s, const mpcache_plan *pl, uint32_t qx,
                               uint32_t b32, mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim;
    /* COST: level 1, one dot product per 32-cluster (the linearized bound), top-k(G1, k1)
     * (policies.md §1.8 dynamic) */
    ids->sc1 = opb_tensor(w, "sc1", OPT_TEMP, Hkv, 1, pl->G1);
    opb_op(w, OP_MATMUL, Hkv, 1, 2 * d, pl->G1, qx, b32, OP_NONE, ids->sc1, OPF_TRANS_B, 0, 0);
    ids->t1 = opb_tensor(w, "topk1", OPT_TEMP, Hkv, pl->k1, pl->G1);
    opb_op(w, OP_TOPK, Hkv, 1, 0, pl->G1, ids->sc1, OP_NONE, OP_NONE, ids->t1, 0, (int32_t)pl->k1,
           0);
    /* u = the column sums, 1 on the forced clusters (public 0/1 vectors: local) */
    uint32_t c1 = opb_colsum(w, ids->t1, Hkv, pl->k1, pl->G1, "cs1");
    uint32_t keep = opb_shared(w, "keep1", OPT_PUBLIC, 1, pl->G1, 1);
    uint32_t u = opb_tensor(w, "u", OPT_TEMP, Hkv, pl->G1, 1);
    opb_op(w, OP_MUL_PUB, Hkv, pl->G1, 0, 1, c1, keep, OP_NONE, u, OPF_NO_TRUNC, 0, 0);
    uint32_t force = opb_shared(w, "force1", OPT_PUBLIC, 1, pl->G1, 1);
    opb_op(w, OP_ADD_PUB, Hkv, pl->G1, 0, 1, u, force, OP_NONE, u, 0, 0, 0);
    uint32_t ex = opb_shared(w, "expand", OPT_PUBLIC, 1, pl->G1, pl->G2);
    uint32_t ue = opb_tensor(w, "u_exp", OPT_TEMP, Hkv, 1, pl->G2);
    return opb_op(w, OP_MATMUL, 1, Hkv, pl->G1, pl->G2, u, ex, OP_NONE, ue,
                  OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
}

/* The mask column added to the table (Hkv, G2, 16·(2d+1)): MPCACHE_PAD_OFF · ind · [token < n],
 * ind (Hkv, 1, G2) a secret 0/1 indicator over the 16-clusters (local). */
static uint32_t mpcache_mcol(opb *w, const mpcache_shape *s, const mpcache_plan *pl, uint32_t ind)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1, C = s->s2 * F;
    uint32_t pat = opb_shared(w, "tokpat", OPT_PUBLIC, 1, 1, C);
    uint32_t bc = opb_tensor(w, "ind_tok", OPT_TEMP, Hkv, pl->G2, C);
    opb_op(w, OP_MATMUL, 1, Hkv * pl->G2, 1, C, ind, pat, OP_NONE, bc, OPF_PUBLIC_B | OPF_NO_TRUNC,
           0, 0);
    uint32_t val = opb_shared(w, "tokval", OPT_PUBLIC, 1, pl->G2, C);
    uint32_t mc = opb_tensor(w, "mcol", OPT_TEMP, Hkv, pl->G2, C);
    return opb_op(w, OP_MUL_PUB, Hkv, pl->G2, 0, C, bc, val, OP_NONE, mc, OPF_NO_TRUNC, 0, 0);
}

/* Level 2 and the one-hot slots or the chosen set; fills ids->onehot (gather) and returns the
 * table to read rows from (the state plus the mask column). Long: the three shapes (gather,
 * forced, full) share the level-2 scores and differ only in the few ops that follow. */
static uint32_t mpcache_level2(opb *w, const mpcache_shape *s, const mpcache_plan *pl, uint32_t qx,
                               uint32_t b16, uint32_t ue, uint32_t kv, mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, F = 2 * d + 1, C = s->s2 * F, G2 = pl->G2;
    uint32_t v = OP_NONE;
    if (pl->lv2) {
        /* COST: level 2, one dot product per 16-cluster, the ones outside the level-1 set
         * pushed below every candidate (local), top-k(G2, k2) (policies.md §1.8 dynamic) */
        ids->sc2 = opb_tensor(w, "sc2", OPT_TEMP, Hkv, 1, G2);
        opb_op(w, OP_MATMUL, Hkv, 1, 2 * d, G2, qx, b16, OP_NONE, ids->sc2, OPF_TRANS_B, 0, 0);
        uint32_t sc = ids->sc2;
        if (ue != OP_NONE) {
            uint32_t pen = opb_tensor(w, "pen", OPT_TEMP, Hkv, 1, G2);
            opb_op(w, OP_MUL_PUB, Hkv, 1, 0, G2, ue, OP_NONE, OP_NONE, pen, OPF_NO_TRUNC, 0,
                   MPCACHE_BIG);
            sc = opb_tensor(w, "sc2m", OPT_TEMP, Hkv, 1, G2);
            opb_op(w, OP_ADD, Hkv, 1, 0, G2, ids->sc2, pen, OP_NONE, sc, 0, 0, 0);
            opb_op(w, OP_ADD_PUB, Hkv, 1, 0, G2, sc, OP_NONE, OP_NONE, sc, 0, 0, -MPCACHE_BIG);
        } else {
            int all = 1;
            for (uint32_t c = 0; c < pl->G1; c++)
                all &= plan_u(pl, c);
            if (!all) {
                uint32_t pen = opb_shared(w, "pen2", OPT_PUBLIC, 1, 1, G2);
                sc = opb_tensor(w, "sc2m", OPT_TEMP, Hkv, 1, G2);
                opb_op(w, OP_ADD_PUB, Hkv, 1, 0, G2, ids->sc2, pen, OP_NONE, sc, 0, 0, 0);
            }
        }
        ids->t2 = opb_tensor(w, "topk2", OPT_TEMP, Hkv, pl->k2, G2);
        opb_op(w, OP_TOPK, Hkv, 1, 0, G2, sc, OP_NONE, OP_NONE, ids->t2, 0, (int32_t)pl->k2, 0);
        v = opb_colsum(w, ids->t2, Hkv, pl->k2, G2, "cs2");
    }
    uint32_t ind = OP_NONE; /* the secret indicator the mask column follows */
    if (pl->path == MPCACHE_PATH_GATHER) {
        /* COST: the forced clusters' one-hot rows, e_f·(1 − column sum f) (local) */
        uint32_t fs = opb_shared(w, "fsel", OPT_PUBLIC, 1, G2, pl->nf2 * G2);
        uint32_t fr = opb_tensor(w, "frows", OPT_TEMP, Hkv, pl->nf2, G2);
        opb_op(w, OP_MATMUL, 1, Hkv, G2, pl->nf2 * G2, v, fs, OP_NONE, fr,
               OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
        uint32_t fe = opb_shared(w, "frow", OPT_PUBLIC, 1, pl->nf2, G2);
        opb_op(w, OP_ADD_PUB, Hkv, pl->nf2, 0, G2, fr, fe, OP_NONE, fr, 0, 0, 0);
        ids->onehot = opb_tensor(w, "onehot", OPT_TEMP, Hkv, pl->slots, G2);
        opb_put(w, ids->t2, ids->onehot, Hkv, 0, pl->k2, G2);
        opb_put(w, fr, ids->onehot, Hkv, pl->k2, pl->nf2, G2);
        ind = ue;
    } else if (pl->path == MPCACHE_PATH_FULL && pl->mask == 2) {
        if (pl->lv2) { /* w = forced2 ∪ (top-k column sums · u) */
            uint32_t wv = opb_tensor(w, "w", OPT_TEMP, Hkv, 1, G2);
            if (ue != OP_NONE)
                opb_op(w, OP_MUL, Hkv, 1, 0, G2, v, ue, OP_NONE, wv, OPF_NO_TRUNC, 0, 0);
            else
                opb_op(w, OP_MUL_PUB, Hkv, 1, 0, G2, v,
                       opb_shared(w, "u_pub", OPT_PUBLIC, 1, 1, G2), OP_NONE, wv, OPF_NO_TRUNC, 0,
                       0);
            opb_op(w, OP_MUL_PUB, Hkv, 1, 0, G2, wv, opb_shared(w, "keep2", OPT_PUBLIC, 1, 1, G2),
                   OP_NONE, wv, OPF_NO_TRUNC, 0, 0);
            opb_op(w, OP_ADD_PUB, Hkv, 1, 0, G2, wv, opb_shared(w, "force2", OPT_PUBLIC, 1, 1, G2),
                   OP_NONE, wv, 0, 0, 0);
            ind = wv;
        } else {
            ind = ue; /* k2 = G2: every candidate */
        }
    }
    if (ind == OP_NONE && pl->path == MPCACHE_PATH_GATHER) { /* u public: a public column */
        uint32_t tab = opb_tensor(w, "table", OPT_TEMP, Hkv, G2, C);
        opb_op(w, OP_ADD_PUB, Hkv, G2, 0, C, kv, opb_shared(w, "mpub", OPT_PUBLIC, 1, G2, C),
               OP_NONE, tab, 0, 0, 0);
        return tab;
    }
    if (ind == OP_NONE)
        return kv;
    ids->mcol = mpcache_mcol(w, s, pl, ind);
    uint32_t tab = opb_tensor(w, "table", OPT_TEMP, Hkv, G2, C);
    return opb_op(w, OP_ADD, Hkv, G2, 0, C, kv, ids->mcol, OP_NONE, tab, 0, 0, 0);
}

/* The attended rows (Hkv, R, 2d+1) of the table (Hkv, G2, 16·(2d+1)). */
static uint32_t mpcache_rows(opb *w, const mpcache_shape *s, const mpcache_plan *pl, uint32_t tab,
                             uint32_t onehot)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1, C = s->s2 * F, G2 = pl->G2;
    uint32_t R = pl->rows;
    uint32_t out = opb_tensor(w, "rows", OPT_TEMP, Hkv, R, F);
    if (pl->path == MPCACHE_PATH_GATHER) {
        /* COST: the chosen 16-clusters' rows, one-hot × table (MPCache's token gather) */
        return opb_op(w, OP_GATHER, Hkv, pl->slots, G2, C, onehot, tab, OP_NONE, out, OPF_NO_TRUNC,
                      0, 0);
    }
    if (pl->path == MPCACHE_PATH_FORCED) {
        for (uint32_t i = 0; i < pl->slots; i++) {
            uint32_t one = opb_rows(w, tab, Hkv, pl->f2[i], 1, C, "forced");
            uint32_t tk =
                opb_tensor(w, "forced_rows", OPT_TEMP, Hkv, s->s2, F); /* its 16 token rows */
            opb_op(w, OP_VIEW, Hkv, s->s2, 0, F, one, OP_NONE, OP_NONE, tk, 0, 0, 0);
            opb_put(w, tk, out, Hkv, i * s->s2, s->s2, F);
        }
        return out;
    }
    uint32_t tok = opb_tensor(w, "tokens", OPT_TEMP, Hkv, pl->Npad, F);
    opb_op(w, OP_VIEW, Hkv, pl->Npad, 0, F, tab, OP_NONE, OP_NONE, tok, 0, 0, 0);
    if (pl->Npad == R)
        return tok;
    return opb_op(w, OP_VIEW, Hkv, R, 0, F, tok, OP_NONE, OP_NONE, out, 0, 0, 0);
}

/* Columns [c0, c0+nc) of x (B, R, F) as (B, R, nc): transpose, slice, transpose (local). */
static uint32_t mcols(opb *w, uint32_t xt, uint32_t B, uint32_t R, uint32_t F, uint32_t c0,
                      uint32_t nc, const char *nm)
{
    char a[32];
    snprintf(a, sizeof a, "%s_t", nm);
    uint32_t sl = opb_rows(w, xt, B, c0, nc, R, a);
    (void)F;
    return opb_transpose(w, sl, B, nc, R, nm);
}

/* The mask (H, 1, R+1) of the scores from the rows' mask column (Hkv, 1, R): 0 for the new
 * entry, column − MPCACHE_PAD_OFF for the others, repeated over the KV head's query heads (local).
 */
static uint32_t mpcache_mask(opb *w, const mpcache_shape *s, uint32_t R, uint32_t mrow)
{
    uint32_t Hkv = s->n_kv_heads, G = s->n_heads / Hkv;
    uint32_t col = opb_tensor(w, "mcol_rows", OPT_TEMP, Hkv, R, 1);
    opb_op(w, OP_VIEW, Hkv, R, 0, 1, mrow, OP_NONE, OP_NONE, col, 0, 0, 0);
    uint32_t full = opb_tensor(w, "mask_kv", OPT_TEMP, Hkv, R + 1, 1);
    opb_put(w, col, full, Hkv, 1, R, 1);
    opb_op(w, OP_ADD_PUB, Hkv, R + 1, 0, 1, full, opb_shared(w, "moff", OPT_PUBLIC, 1, R + 1, 1),
           OP_NONE, full, 0, 0, 0);
    uint32_t rep = opb_tensor(w, "mask_rep", OPT_TEMP, Hkv, R + 1, G);
    opb_op(w, OP_MATMUL, 1, Hkv * (R + 1), 1, G, full, opb_shared(w, "ones_g", OPT_PUBLIC, 1, 1, G),
           OP_NONE, rep, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    return opb_transpose(w, rep, Hkv, R + 1, G, "mask");
}

/* The upkeep of the bounds with the new key: a MAX over pairs of the newest clusters' rows and
 * [k | −k] (none when both start a new cluster). */
static void mpcache_upkeep(opb *w, const mpcache_shape *s, const mpcache_plan *pl, uint32_t k,
                           uint32_t b16, uint32_t b32, mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, n = pl->n;
    uint32_t pm = opb_shared(w, "pm", OPT_PUBLIC, 1, d, 2 * d);
    ids->kn = opb_tensor(w, "kn", OPT_TEMP, Hkv, 1, 2 * d);
    opb_op(w, OP_MATMUL, 1, Hkv, d, 2 * d, k, pm, OP_NONE, ids->kn, OPF_PUBLIC_B | OPF_NO_TRUNC, 0,
           0);
    uint32_t lv = (n % s->s2 != 0) + (n % s->s1 != 0);
    if (!lv)
        return;
    uint32_t st = opb_tensor(w, "up_in", OPT_TEMP, Hkv, 2 * lv, 2 * d);
    if (n % s->s2) {
        opb_put(w, opb_rows(w, b16, Hkv, n / s->s2, 1, 2 * d, "last16"), st, Hkv, 0, 1, 2 * d);
        opb_put(w, ids->kn, st, Hkv, 1, 1, 2 * d);
    }
    opb_put(w, opb_rows(w, b32, Hkv, n / s->s1, 1, 2 * d, "last32"), st, Hkv, 2 * lv - 2, 1, 2 * d);
    opb_put(w, ids->kn, st, Hkv, 2 * lv - 1, 1, 2 * d);
    /* COST: upkeep of the newest 16- and 32-cluster bounds, 2d comparisons each with the new
     * key (policies.md §1.12 MPCache) */
    uint32_t tr = opb_transpose(w, st, Hkv, 2 * lv, 2 * d, "up_t");
    ids->up = opb_tensor(w, "up", OPT_TEMP, Hkv, 2 * d, lv);
    opb_op(w, OP_MAX, Hkv, 2 * d * lv, 0, 2, tr, OP_NONE, OP_NONE, ids->up, 0, 0, 0);
}

/* Long: the state (carried, or the compaction after a threshold prompt), the selection, the
 * rows into the cache tensors and the upkeep, in the order the session runs them. */
static int mpcache_decode(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                          uint32_t P0, uint32_t q, uint32_t k, uint32_t kc, uint32_t vc,
                          const mpcache_ids *src, mpcache_ids *ids, errbuf *e)
{
    opb w;
    opb_init(&w, p, PHASE_DECODE, (int)layer, OPC_POLICY, "mpc.");
    uint32_t H = s->n_heads, Hkv = s->n_kv_heads, d = s->head_dim, G = H / Hkv, F = 2 * d + 1;
    memset(ids, 0xff, sizeof *ids);
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    int kind = mpcache_layer_kind(s, layer);
    if (kind == MPCACHE_LAYER_SHARED && !src)
        return err_set(e, MS_ERR_INTERNAL, "policy mpcache: layer %u shares a missing layer",
                       layer);
    if (q == OP_NONE)
        q = opb_shared(&w, "in_q", OPT_CACHE, H, 1, d);
    if (k == OP_NONE)
        k = opb_shared(&w, "in_knew", OPT_CACHE, 1, 1, Hkv * d);
    if (kc == OP_NONE)
        kc = opb_shared(&w, "in_kc", OPT_CACHE, Hkv, n + 1, d);
    if (vc == OP_NONE)
        vc = opb_shared(&w, "in_vc", OPT_CACHE, Hkv, n + 1, d);
    if (n == 0) { /* nothing cached to select from (a threshold that kept no prompt key) */
        if (kind == MPCACHE_LAYER_SELECT)
            mpcache_upkeep(&w, s, &pl, k, OP_NONE, OP_NONE, ids);
        return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                        : MS_OK;
    }
    /* the carried state, bound by the session; after a threshold prompt, its compaction */
    uint32_t kv, b16 = OP_NONE, b32 = OP_NONE, ue = OP_NONE;
    if (P0 && kind != MPCACHE_LAYER_DENSE) {
        uint32_t comp =
            mpcache_compact(&w, s, n, P0, kind == MPCACHE_LAYER_SHARED ? src : NULL, ids);
        uint32_t rows =
            opb_tensor(&w, "kv_c", OPT_TEMP, Hkv, pl.Npad, F); /* zero rows up to Npad */
        opb_put(&w, comp, rows, Hkv, 0, n, F);
        kv =
            opb_tensor(&w, "kv_cl", OPT_TEMP, Hkv, pl.G2, s->s2 * F); /* the same as cluster rows */
        opb_op(&w, OP_VIEW, Hkv, pl.G2, 0, s->s2 * F, rows, OP_NONE, OP_NONE, kv, 0, 0, 0);
        if (kind == MPCACHE_LAYER_SELECT) {
            uint32_t ct = opb_transpose(&w, comp, Hkv, n, F, "compact_tr");
            mpcache_ids b;
            mpcache_bounds(&w, s, n, mcols(&w, ct, Hkv, n, F, 0, d, "compact_k"), &b);
            b16 = b.b16, b32 = b.b32;
        }
    } else {
        kv = opb_shared(&w, "kv", OPT_CACHE, Hkv, pl.G2, s->s2 * F);
        if (kind == MPCACHE_LAYER_SELECT) {
            b16 = opb_shared(&w, "b16", OPT_CACHE, Hkv, pl.G2, 2 * d);
            b32 = opb_shared(&w, "b32", OPT_CACHE, Hkv, pl.G1, 2 * d);
        }
    }
    uint32_t tab = kv;
    if (kind == MPCACHE_LAYER_SELECT) {
        /* qx = [α·qs | −(1−α)·qs], qs the sum of the KV head's query heads (local) */
        uint32_t qt = opb_transpose(&w, q, Hkv, G, d, "q_t");
        uint32_t qs = opb_tensor(&w, "qs", OPT_TEMP, Hkv, 1, d);
        opb_op(&w, OP_MATMUL, 1, Hkv * d, G, 1, qt, opb_shared(&w, "ones_q", OPT_PUBLIC, 1, G, 1),
               OP_NONE, qs, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
        uint32_t qx = opb_tensor(&w, "qx", OPT_TEMP, Hkv, 1, 2 * d);
        opb_op(&w, OP_MATMUL, 1, Hkv, d, 2 * d, qs, opb_shared(&w, "qw", OPT_PUBLIC, 1, d, 2 * d),
               OP_NONE, qx, OPF_PUBLIC_B, 0, 0);
        if (pl.lv1)
            ue = mpcache_level1(&w, s, &pl, qx, b32, ids);
        tab = mpcache_level2(&w, s, &pl, qx, b16, ue, kv, ids);
        if (pl.path == MPCACHE_PATH_GATHER && ids->onehot == OP_NONE)
            w.failed = 1;
    } else if (kind == MPCACHE_LAYER_SHARED) {
        ids->onehot = src->onehot;
        ids->mask = src->mask;
    }
    uint32_t rows = mpcache_rows(&w, s, &pl, tab, ids->onehot);
    uint32_t R = pl.rows;
    uint32_t rt = opb_transpose(&w, rows, Hkv, R, F, "rows_t");
    opb_put(&w, mcols(&w, rt, Hkv, R, F, 0, d, "k_rows"), kc, Hkv, 1, R, d);
    opb_put(&w, mcols(&w, rt, Hkv, R, F, d, d, "v_rows"), vc, Hkv, 1, R, d);
    if (kind == MPCACHE_LAYER_SELECT && pl.mask == 2)
        ids->mask = mpcache_mask(&w, s, R, opb_rows(&w, rt, Hkv, 2 * d, 1, R, "m_row"));
    if (kind == MPCACHE_LAYER_SELECT)
        mpcache_upkeep(&w, s, &pl, k, b16, b32, ids);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

int mpcache_emit_decode(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                        uint32_t q, uint32_t k, uint32_t kc, uint32_t vc, const mpcache_ids *src,
                        mpcache_ids *ids, errbuf *e)
{
    return mpcache_decode(p, s, layer, n, 0, q, k, kc, vc, src, ids, e);
}

int mpcache_emit_decode_first(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                              uint32_t P0, uint32_t q, uint32_t k, uint32_t kc, uint32_t vc,
                              const mpcache_ids *src, mpcache_ids *ids, errbuf *e)
{
    return mpcache_decode(p, s, layer, n, P0, q, k, kc, vc, src, ids, e);
}

int mpcache_emit_mask(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                      uint32_t scores, const mpcache_ids *own, errbuf *e)
{
    opb w;
    opb_init(&w, p, PHASE_DECODE, (int)layer, OPC_POLICY, "mpc.");
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    uint32_t H = s->n_heads, R = pl.rows;
    if (n == 0 || mpcache_layer_kind(s, layer) == MPCACHE_LAYER_DENSE || pl.mask == 0)
        return MS_OK;
    if (scores == OP_NONE)
        scores = opb_shared(&w, "in_scores", OPT_CACHE, H, 1, R + 1);
    if (pl.mask == 2) {
        if (!own || own->mask == OP_NONE)
            return err_set(e, MS_ERR_INTERNAL, "policy mpcache: layer %u has no mask", layer);
        opb_op(&w, OP_ADD, H, 1, 0, R + 1, scores, own->mask, OP_NONE, scores, 0, 0, 0);
    } else {
        opb_op(&w, OP_ADD_PUB, H, 1, 0, R + 1, scores,
               opb_shared(&w, "pmask", OPT_PUBLIC, 1, 1, R + 1), OP_NONE, scores, 0, 0, 0);
    }
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

/* One public constant by name; v(i) the value of element i (row r, column c of cols). Long: one
 * branch per constant, each a line or two, kept together so the names read as a table. */
int mpcache_public(const mpcache_shape *s, uint32_t n, int frac, const op_tensor *t, uint64_t *out,
                   size_t cnt)
{
    const char *nm;
    int l = op_layer_of(t->name, &nm);
    if (t->role != OPT_PUBLIC || l < 0 || strncmp(nm, "mpc.", 4))
        return 0;
    nm += 4;
    mpcache_plan pl;
    mpcache_plan_layer(s, (uint32_t)l, n, &pl);
    uint32_t d = s->head_dim, F = 2 * d + 1, cols = t->cols ? t->cols : 1;
    uint64_t one = 1, fbig = fx_encode(-MPCACHE_BIG, frac),
             fpad = fx_encode(-MPCACHE_PAD_OFF, frac);
    uint64_t foff = fx_encode(MPCACHE_PAD_OFF, frac);
    memset(out, 0, cnt * sizeof *out);
    for (size_t i = 0; i < cnt; i++) {
        uint32_t r = (uint32_t)((i / cols) % t->rows), c = (uint32_t)(i % cols);
        uint64_t v = 0;
        if (!strcmp(nm, "pm"))
            v = c == r ? one : c == r + d ? (uint64_t)-1 : 0;
        else if (!strcmp(nm, "qw"))
            v = c == r ? fx_encode(s->alpha, frac) : c == r + d ? fx_encode(s->alpha - 1, frac) : 0;
        else if (!strcmp(nm, "padk"))
            v = r >= n ? fbig : 0;
        else if (!strcmp(nm, "pad16"))
            v = r >= pl.G2 ? fbig : 0;
        else if (!strcmp(nm, "cs1_ones") || !strcmp(nm, "cs2_ones") || !strcmp(nm, "ones_g") ||
                 !strcmp(nm, "ones_q") || !strcmp(nm, "ones_h") || !strcmp(nm, "ones_w") ||
                 !strcmp(nm, "ones_p"))
            v = one;
        else if (!strcmp(nm, "wval")) /* the window's rows (n = P at the prompt) */
            v = s->window ? (s->window < n ? s->window : n) : 1;
        else if (!strcmp(nm, "sval")) /* the revealed count S = n at the first decode step */
            v = n;
        else if (!strcmp(nm, "soff"))
            v = (uint64_t) - (int64_t)(n + 1);
        else if (!strcmp(nm, "keep1") || !strcmp(nm, "force1")) {
            int f = r == pl.f1[0] || (pl.nf1 > 1 && r == pl.f1[1]);
            v = (uint64_t)(nm[0] == 'k' ? !f : f);
        } else if (!strcmp(nm, "keep2") || !strcmp(nm, "force2")) {
            int f = plan_f2(&pl, c);
            v = (uint64_t)(nm[0] == 'k' ? !f : f);
        } else if (!strcmp(nm, "expand"))
            v = c / 2 == r;
        else if (!strcmp(nm, "pen2"))
            v = plan_u(&pl, c / 2) ? 0 : fbig;
        else if (!strcmp(nm, "u_pub"))
            v = (uint64_t)plan_u(&pl, c / 2);
        else if (!strcmp(nm, "fsel"))
            v = c % pl.G2 == r && c / pl.G2 < pl.nf2 && pl.f2[c / pl.G2] == r ? (uint64_t)-1 : 0;
        else if (!strcmp(nm, "frow"))
            v = r < pl.nf2 && pl.f2[r] == c;
        else if (!strcmp(nm, "tokpat"))
            v = c % F == 2 * d;
        else if (!strcmp(nm, "tokval") || !strcmp(nm, "mpub")) {
            uint32_t tok = r * s->s2 + c / F;
            int ok = c % F == 2 * d && tok < n && (nm[0] == 't' || plan_u(&pl, r / 2));
            v = ok ? foff : 0;
        } else if (!strcmp(nm, "moff"))
            v = r ? fpad : 0;
        else if (!strcmp(nm, "pmask")) {
            uint32_t row = c - 1;
            int ok = 1;
            if (c && pl.path == MPCACHE_PATH_FORCED)
                ok = pl.f2[row / s->s2] * s->s2 + row % s->s2 < n;
            else if (c)
                ok = plan_w(&pl, row / s->s2);
            v = ok ? 0 : fpad;
        } else
            return 0;
        out[i] = v;
    }
    return 1;
}
