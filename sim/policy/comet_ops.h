/* comet_ops.h — Comet's top-k predictor as ops (comet_ops.c), the cost path's and the secure
 * session's.
 *
 * The policy's own interface to its selection on shares, shared by its cost path (the policy's
 * emit_cost) and its secure session (the secpol_ops slot, secpol.h). Nothing outside the policy's
 * files and its tests includes it. */
#ifndef MPCSIM_COMET_OPS_H
#define MPCSIM_COMET_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "protocols/program/op.h"
#include "policy.h"
#include "secpol.h"

/* Comet on shares (policy_comet.c A6: the top-k predictor; policy_comet_secure.c). Per layer,
 * between the FFN's norm (its output x, (T, dim)) and the FFN, each of the step's T tokens:
 *   the block scores x·Pᵀ, P (blocks × dim) the model owner's fixed matrix of W1's block means
 *     ("L<l>.comet.pred": a MATMUL by a fixed operand);
 *   TOPK(A) over the blocks: one-hot rows (T, A, blocks), A = ⌈active_frac · blocks⌉ public;
 *   pattern secret: one GATHER of those blocks' rows of the fixed table "L<l>.comet.wtab"
 *     (blocks × 3·block·dim: row k = [W1's rows of block k | W3's rows | W2's columns, one
 *     neuron per dim-long run], neurons past ffn_dim zero), then public re-layouts (VIEWs by
 *     the public indices "L<l>.comet.i<w>") into the lowering's "L<l>.w1.gathered",
 *     "w3.gathered" (T, A·block, dim) and "w2.gathered" (T, dim, A·block): the FFN's matmuls
 *     multiply by them (lower_opts.ffn_secret). Nothing is revealed.
 *   pattern public: each token's block indicator (the one-hot rows' column sums: local)
 *     REVEALED to every node ("L<l>.comet.pattern", (T, blocks, 1)) — semi2k's dealer gets it
 *     from P0 outside the rounds (eng.h publish), since its triples for the products by the
 *     weights' active rows are A·B[idx] of the restricted masks — then turned into the active
 *     neurons' indices "L<l>.ffn.idx" (T, min(A·block, ffn_dim), 1; VIEW OPF_INDEX_BLOCKS,
 *     2^64 − 1 past a partial last block's neurons: zero rows), by which the lowering takes
 *     W1's and W3's rows and W2's columns (VIEWs of the fixed operands, their opened masks
 *     restricted likewise: lower_opts.ffn_secret = 0). Every shape is public before the step
 *     runs (A is); only the values of the indices arrive mid-program. Revealed: each token's
 *     set of active blocks per layer (not the top-k's order).
 * The attention is dense; K/V are every token's own (no refill on shares: with the top-k
 * predictor A is the same for every token, so either no token is skipped — A ≥ skip_below ·
 * blocks, the configurations on shares — or every one is, POLICIES.md comet A3/A4). */
typedef struct comet_shape {
    uint32_t dim, ffn_dim, block, nblocks;
    uint32_t active; /* A: active blocks per token */
    int secret;
} comet_shape;
/* ⌈frac · nblocks⌉ in [1, nblocks], or 0 for frac 0 (the oracle rule). */
uint32_t comet_topk_blocks(double frac, uint32_t nblocks);
/* Appends layer `layer`'s ops for T tokens with the FFN input x (OP_NONE: a placeholder). */
int comet_emit_ops(op_program *p, const comet_shape *s, int phase, uint32_t layer, uint32_t T,
                   uint32_t x, errbuf *e);
/* The public index tensors "L<l>.comet.i<w>" for T tokens: 0 if t is not one of them. */
int comet_public(const comet_shape *s, uint32_t T, const op_tensor *t, uint64_t *out, size_t n);

extern const secpol_ops policy_comet_secure;

#endif
