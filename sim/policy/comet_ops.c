/* comet_ops.c — Comet's top-k predictor as ops (comet_ops.h "Comet on shares"), the cost path's
 * (placeholder operands) and the secure session's (its real ones), and the public index tensors
 * they read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/opb.h"
#include "comet_ops.h"

static const char *const comet_wname[3] = {"w1", "w3", "w2"};

int comet_emit_ops(op_program *p, const comet_shape *s, int phase, uint32_t layer, uint32_t T,
                   uint32_t x, errbuf *e)
{
    opb w;
    opb_init(&w, p, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t D = s->dim, NB = s->nblocks, A = s->active, b = s->block;
    if (x == OP_NONE)
        x = opb_matching(&w, "comet.x", OPT_CACHE, 1, T, D);
    /* COST: the predictor, (T×dim)·(dim×blocks) with the model owner's fixed matrix of W1's
     * block means (A6) */
    uint32_t pred = opb_matching(&w, "comet.pred", OPT_WEIGHT, 1, NB, D);
    uint32_t sc = opb_matching(&w, "comet.score", OPT_TEMP, 1, T, NB);
    opb_op(&w, OP_MATMUL, 1, T, D, NB, x, pred, OP_NONE, sc, OPF_FIXED_B | OPF_TRANS_B, 0, 0);
    if (A >= NB) /* every block: the dense FFN */
        return w.failed ? err_set(e, MS_ERR_NOMEM, "policy comet: out of memory") : MS_OK;
    /* COST: each token's top-A blocks, one-hot rows (T, A, blocks) */
    uint32_t oh = opb_matching(&w, "comet.onehot", OPT_TEMP, T, A, NB);
    opb_op(&w, OP_TOPK, T, 1, 0, NB, sc, OP_NONE, OP_NONE, oh, 0, (int32_t)A, 0);
    if (!s->secret) {
        /* COST: pattern public: each token's block indicator revealed — the one-hot rows'
         * column sums (a transposing VIEW and a product with a public ones vector: local), one
         * element per block as A1's reveal, not the A·blocks one-hot rows (whose order would
         * say more than the set) — to every node (semi2k's dealer too, outside the rounds: its
         * triples for the FFN's products by the weights' active rows depend on which rows, eng.h
         * publish); then the indicator as the active neurons' indices "ffn.idx" (local), by which
         * the lowering takes the weights' rows and columns (VIEWs of the fixed operands: local) */
        uint32_t oht = opb_matching(&w, "comet.onehot_t", OPT_TEMP, T, NB, A);
        opb_op(&w, OP_VIEW, T * A, NB, 0, 1, oh, OP_NONE, OP_NONE, oht, OPF_MERGE_HEADS, 0, 0);
        uint32_t ind = opb_matching(&w, "comet.blocks", OPT_TEMP, T, NB, 1);
        opb_op(&w, OP_MATMUL, T, NB, A, 1, oht, opb_matching(&w, "comet.ones", OPT_PUBLIC, 1, A, 1),
               OP_NONE, ind, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
        uint32_t pat = opb_matching(&w, "comet.pattern", OPT_PUBLIC, T, NB, 1);
        opb_op(&w, OP_REVEAL, T, NB, 0, 1, ind, OP_NONE, OP_NONE, pat, 0, -1, 0);
        uint64_t na = (uint64_t)A * b < s->ffn_dim ? (uint64_t)A * b : s->ffn_dim;
        opb_op(&w, OP_VIEW, T, (uint32_t)na, s->ffn_dim, 1, pat, OP_NONE, OP_NONE,
               opb_matching(&w, "ffn.idx", OPT_PUBLIC, T, (uint32_t)na, 1), OPF_INDEX_BLOCKS,
               (int32_t)b, 0);
    } else {
        /* COST: pattern secret: one GATHER of the active blocks' rows of the table [W1 rows |
         * W3 rows | W2 columns] (fixed), then local re-layouts into the lowering's gathered
         * weights (views by public indices) */
        uint32_t C = 3 * b * D, N = T * A * C;
        uint32_t tab = opb_matching(&w, "comet.wtab", OPT_WEIGHT, 1, NB, C);
        uint32_t g = opb_matching(&w, "comet.wg", OPT_TEMP, T, A, C);
        opb_op(&w, OP_GATHER, T, A, NB, C, oh, tab, OP_NONE, g, OPF_FIXED_B | OPF_NO_TRUNC, 0, 0);
        uint32_t flat = opb_matching(&w, "comet.wflat", OPT_TEMP, 1, N, 1);
        opb_op(&w, OP_VIEW, 1, N, 0, 1, g, OP_NONE, OP_NONE, flat, 0, 0, 0);
        for (int k = 0; k < 3; k++) {
            char nm[48];
            snprintf(nm, sizeof nm, "comet.i%s", comet_wname[k]);
            uint32_t ix = opb_matching(&w, nm, OPT_PUBLIC, T, A * b * D, 1);
            snprintf(nm, sizeof nm, "comet.%s", comet_wname[k]);
            uint32_t pick = opb_matching(&w, nm, OPT_TEMP, T, A * b * D, 1);
            opb_op(&w, OP_VIEW, T, A * b * D, 0, 1, flat, ix, OP_NONE, pick, OPF_INDEX_ROWS, 0, 0);
            snprintf(nm, sizeof nm, "%s.gathered", comet_wname[k]);
            uint32_t gw = k < 2 ? opb_matching(&w, nm, OPT_TEMP, T, A * b, D)
                                : opb_matching(&w, nm, OPT_TEMP, T, D, A * b);
            opb_op(&w, OP_VIEW, T, A * b * D, 0, 1, pick, OP_NONE, OP_NONE, gw, 0, 0, 0);
        }
    }
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy comet: out of memory") : MS_OK;
}

int comet_public(const comet_shape *s, uint32_t T, const op_tensor *t, uint64_t *out, size_t n)
{
    const char *rest;
    int l = op_layer_of(t->name, &rest);
    int k = -1;
    for (int i = 0; l >= 0 && i < 3; i++) {
        char nm[48];
        snprintf(nm, sizeof nm, "comet.i%s", comet_wname[i]);
        if (!strcmp(rest, nm))
            k = i;
    }
    uint32_t A = s->active, b = s->block, D = s->dim, C = 3 * b * D, R = A * b * D;
    if (l >= 0 && !strcmp(rest, "comet.ones") && n == A) { /* integer ones: the column sums */
        for (size_t i = 0; i < n; i++)
            out[i] = 1;
        return 1;
    }
    if (k < 0 || n != (size_t)T * R)
        return 0;
    for (uint32_t t0 = 0; t0 < T; t0++)
        for (uint32_t r = 0; r < R; r++) {
            /* the gathered weight's element r of token t0 (w1, w3: (A·b, D) row-major; w2: (D,
             * A·b)) */
            uint32_t a, i, d;
            if (k < 2)
                a = r / (b * D), i = (r / D) % b, d = r % D;
            else
                d = r / (A * b), a = (r % (A * b)) / b, i = r % b;
            out[(size_t)t0 * R + r] =
                ((uint64_t)t0 * A + a) * C + (uint64_t)k * b * D + (uint64_t)i * D + d;
        }
    return 1;
}
