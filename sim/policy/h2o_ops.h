/* h2o_ops.h — H2O's selection as ops (h2o_ops.c) and its audit against the replay
 * (policy_h2o_secure.c).
 *
 * The policy's own interface to its selection on shares, shared by its cost path (the policy's
 * emit_cost) and its secure session (the secpol_ops slot, secpol.h). Nothing outside the policy's
 * files and its tests includes it.
 *
 * H2O on shares. Per layer and KV head the secret state is a table of R rows [K | V | score]
 * (2·head_dim + 1 columns): rows [0, R − recent) the heavy hitters (which positions they hold is
 * secret), the last `recent` rows the newest positions in order (public). A step's program
 * holds the new entry at row 0 of the cache and the carried rows at 1 … c (policy_h2o_secure.c),
 * and per layer, after the lowered attention (the selection proper batched over the layers, after
 * the last one): score accumulation: the step's softmax probabilities summed over the KV head's
 * query heads and (prefill) over the query rows, added to the carried scores (two transposing VIEWs
 * and a matmul with a public ones vector: local); the table [K | V | score] of the attended rows
 * (VIEWs: local); prefill, P > heavy + recent: TOPK(heavy) of the scores of rows [0, P − recent),
 * then a GATHER (one-hot rows · table) of the heavy rows; decode, c = heavy + recent: the
 * candidates are row heavy + 1 (the entry leaving the recent window, the latest: slot 0, which wins
 * exact ties, as the plaintext rule evicts the later position) and rows 1 … heavy (the heavy rows);
 * ARGMAX of their negated scores (one-hot of the minimum), its prefix sum (log-step shifted adds:
 * local) broadcast over the row (a product with a public ones row: local) as a mask, and a SELECT
 * per element: row i of the compacted heavy part is candidate i+1 where the mask is 1 (at or after
 * the evicted one), else candidate i. Without a recent window (recent = 0) the candidates are row 0
 * (the new entry) and the heavy rows, as the plaintext policy's. The next state is then a public
 * re-layout: [selected heavy rows; the recent rows; the new row]. With `sinks` S > 0 the table
 * holds the S sink rows first (public positions 0 … S−1, kept as they are): every row index
 * above is offset by S (prefill candidates rows [S, P − recent), decode heavy rows S+1 … S+heavy,
 * the entry leaving the window row S+heavy+1), and the next state is [sinks; heavy; recent;
 * new]. With `dense` N > 0 layers 0 … N−1 select nothing (h2o_layer_shape): their tables carry
 * every row (the score upkeep and table views are local), and the selection of every layer at
 * once stacks layers N … L−1 only. */
#ifndef MPCSIM_H2O_OPS_H
#define MPCSIM_H2O_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "protocols/program/op.h"
#include "policy.h"
#include "secpol.h"

/* H2O's budgets for a run (heavy_ratio/recent_ratio of the prompt, or absolute sizes), as
 * the policy computes them. */
int h2o_budgets(const policy_env *env, const policy_args *a, uint32_t *heavy, uint32_t *recent,
                errbuf *e);

typedef struct h2o_shape {
    uint32_t n_heads, n_kv_heads, head_dim;
    uint32_t heavy, recent;
    uint32_t sinks; /* public rows [0, sinks) before the heavy ones, always kept (attention
                     * sinks: a composition's `sinks`; 0 for h2o): the candidates start after
                     * them, and the table's rows are [sinks | heavy | recent] */
    uint32_t dense; /* layers [0, dense) keep every entry (a composition's `layers: {dense:
                     * N}`; 0 for h2o): their tables carry every row in position order, and
                     * the selection of every layer at once is of layers dense … L−1 */
    int shared;     /* one selection per layer (a composition's `share: layer`): the KV heads'
                     * summed candidate scores ranked, the one-hot of the layer's TOPK or
                     * ARGMAX repeated for every KV head (local), each head's table holding
                     * its own rows of the same positions; 0 for h2o */
    int last;       /* the newest query row's attention, not accumulated (a composition's
                     * `accumulate: false`): the score is the step's column sums alone (the
                     * prompt's last row), no score carried, the table [K | V] (2d columns);
                     * 0 for h2o */
} h2o_shape;

/* The columns of a table row: [K | V | score], or [K | V] for the newest row (s->last). */
uint32_t h2o_width(const h2o_shape *s);

/* Layer layer's own shape: s itself, or below s->dense a shape that never selects (no heavy
 * rows, no bound on the rows carried: h2o_selects 0, every row carried in position order). */
h2o_shape h2o_layer_shape(const h2o_shape *s, uint32_t layer);

/* Tensors of one layer's H2O ops (OP_NONE where the phase has none). */
typedef struct h2o_ids {
    uint32_t score; /* (Hkv, n, 1) accumulated scores of the n attended rows ("L<l>.h2o.acc";
                     * the carried ones are the OPT_CACHE input "L<l>.h2o.score") */
    uint32_t table; /* (Hkv, n, 2d+1) [K | V | score] of the attended rows */
    uint32_t cand;  /* (Hkv, ncand, 1) the candidates' scores */
    uint32_t cur;   /* prefill: (Hkv, P-S-recent, 2d+1) the candidates' rows; decode: (Hkv,
                     * heavy, 2d+1) candidates 0 … heavy-1 */
    uint32_t next;  /* decode: candidates 1 … heavy */
} h2o_ids;

/* Tensors of the selection of every layer at once ("h2o.<name>"), rows of layer l after those
 * of layers < l: memory order [KV head][layer][…]. */
typedef struct h2o_sel {
    uint32_t cand;   /* (Hkv, L·ncand, 1) the candidates' scores */
    uint32_t onehot; /* prefill: (Hkv, L·heavy, P-S-recent) TOPK rows; decode: (Hkv, L, heavy+1) */
    uint32_t heavy;  /* (Hkv, L·heavy, 2d+1) the selected heavy rows */
} h2o_sel;

/* Whether a step selects: prefill of t = P tokens, or a decode step over c carried rows. */
int h2o_selects(const h2o_shape *s, int phase, uint32_t c, uint32_t t);

/* Appends layer `layer`'s H2O ops (category policy) for a step attending c carried rows and t
 * new ones (prefill: c = 0, t = P; decode: t = 1, rows: new at 0, carried at 1 … c): the score
 * upkeep, the table and the layer's candidates (all local). probs (H, t, c+t) is the step's
 * softmax output, kc/vc (Hkv, ≥ c+t, d) the step's caches; OP_NONE for each gives a
 * placeholder of that shape (the cost path). ids may be NULL. */
int h2o_emit_ops(op_program *p, const h2o_shape *s, int phase, uint32_t layer, uint32_t c,
                 uint32_t t, uint32_t probs, uint32_t kc, uint32_t vc, h2o_ids *ids, errbuf *e);
/* Appends the selection of every layer at once (layer −1; the layers are independent, so one
 * TOPK/ARGMAX, GATHER/SELECT runs them all in the same rounds), from the layers' ids (lay[l]);
 * nothing when the step does not select. out may be NULL. */
int h2o_emit_select(op_program *p, const h2o_shape *s, int phase, uint32_t n_layers, uint32_t c,
                    uint32_t t, const h2o_ids *lay, h2o_sel *out, errbuf *e);

/* Public constants of the H2O ops, by tensor name ("L<l>.h2o.ones", "h2o.bcast", one per layer
 * the sums' and repeats' "h2o.<x>_ones"): fills
 * out[0..n) with raw ring integers; 0 if the name is not one of them. */
int h2o_public(const op_tensor *t, uint64_t *out, size_t n);

/* ---- the selection on shares: its configuration is its h2o_shape; its audit
 * (policy_h2o_secure.c) ---- */

/* The secure selection against the plaintext replay's keep masks (an audited run, teacher
 * forced); the replay's scores are recomputed on the float model under those masks. */
typedef struct h2o_sec_audit {
    uint32_t prefill_sets, prefill_same; /* (layer, KV head) heavy sets chosen at the prompt */
    uint32_t kept_sets, kept_same;       /* (decode position, layer, KV head) kept sets */
    uint32_t evictions, evict_same;      /* decode evictions with a later position to show them */
    uint32_t separated, separated_same;  /* selections (prompt sets, evictions from the same
                                          * candidates) whose secure scores separate the chosen
                                          * from the rest by more than tie_bound, and of them
                                          * those equal to the replay's */
    double score_err;                    /* largest |secure − replay| score of a candidate
                                          * (kept sets equal so far: the same entries) */
    uint32_t differ_same_cand;           /* differing selections from the same candidates */
    uint32_t near_ties;                  /* … of them within 2·score_err on the replay's own
                                          * scores (fixed-point error can swap them) */
    uint32_t diverged;                   /* differing evictions after the kept sets differed */
    double max_margin;                   /* largest replay margin of a differing selection from
                                          * the same candidates */
    uint32_t own, own_same, own_ties;    /* every selection (prompt top-k, eviction) against its
                                          * rule over the session's own opened candidate scores:
                                          * the chosen strictly apart from the rest, or apart
                                          * but for exact ties at the boundary */
} h2o_sec_audit;
/* tie_bound < 0: twice the measured score error (a secure margin above it implies the replay's
 * order). */
int h2o_secure_compare(const secpol_run *o, const h2o_shape *cfg, const secpol_opened *r,
                       const secpol_keep *plain, double tie_bound, h2o_sec_audit *out, errbuf *e);

extern const secpol_ops policy_h2o_secure;

#endif
