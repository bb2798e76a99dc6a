/* lower.h — lowering a transformer step to an MPC op program.
 *
 * Prefill of P tokens, or one decode step at KV length T. The private token is embedded as a
 * one-hot × table matmul (as SPU does); then per layer: norm, QKV, RoPE, attention (scores,
 * softmax, ·V), output projection, residual, norm, FFN (GeLU or SwiGLU), residual; final norm;
 * LM head. The number of KV entries each layer and KV head attends to comes from the caller (a
 * policy); the full cache by default. Kept counts are public (MPCache's security model): they
 * change the program's shapes, while which entries are kept stays secret. All heads of a layer
 * run in the same vectorized ops, padded to the layer's largest kept count. */
#ifndef MPCSIM_LOWER_H
#define MPCSIM_LOWER_H

#include "model.h"
#include "protocols/program/op.h"

typedef struct lower_opts {
    int phase;         /* PHASE_PREFILL | PHASE_DECODE */
    uint32_t n_tokens; /* prefill: P; decode: 1 */
    uint32_t kv_len;   /* entries already cached before this step (decode: T; prefill:
                        * a reused prefix or earlier chunks, usually 0) */
    /* kept[l * n_kv_heads + g]: KV entries layer l, KV head g attends to (NULL: all). The
     * current token's own entry is always attended in addition. */
    const uint32_t *kept;
    /* 1: each layer's cache tensors hold only the rows it attends (attended_rows below), this
     * step's entries appended after them — a policy that gathers its kept rows into the
     * attention's cache (MPCache, sim/policy/mpcache_ops.h; Quest's and the compositions' whole
     * pages, sim/policy/page_ops.h) and keeps its store apart, so the
     * append touches the kept rows, not the whole kv_len cache. 0: the cache tensors hold all
     * kv_len entries in position order (the append writes at row kv_len). */
    int attended_cache;
    /* ffn_active[l]: FFN neurons layer l computes (public count, clamped to ffn_dim; NULL: all).
     * The gate/up/down matmuls and the activation run on those neurons only (Comet's sparse
     * FFN); which neurons they are is the policy's business (ffn_secret). */
    const uint32_t *ffn_active;
    /* 1: the active neurons are secret (the policy gathers their weight rows/columns by
     * one-hot, so the FFN's matmuls multiply by fresh secret weights: no fixed operand); 0:
     * public (the weights' rows and columns are taken by a public index, the fixed operands
     * and their opened masks restricted to them). */
    int ffn_secret;
    /* 1 (protocol option gather: scores): a decode step's policy gather of kept [K | V] rows
     * inside a layer (a secret one-hot over units of cached rows, lower.c "score side") is
     * replaced by the score side: q·Kᵀ over every cached entry, the kept entries' scores
     * gathered by the same one-hot, softmax over them, the probabilities scattered back by the
     * transposed one-hot and multiplied by every cached V row. 0: the rows (default). */
    int score_gather;
    uint32_t n_seqs;   /* sequences processed together (batch), default 1 */
    int embed_onehot;  /* 1: one-hot × embedding table (default) */
    int lm_head;       /* 1: compute logits (default) */
    int reveal_logits; /* 1: reveal logits to the client (party 0) at the end */
} lower_opts;

void lower_opts_default(lower_opts *o);

/* Appends the step's ops to prog (which may already hold policy ops). Tensor names follow
 * model_params() ("L3.wq", "tok_emb", …) so the backend binds weights by name. */
int lower_step(const model_cfg *m, const lower_opts *o, op_program *prog, errbuf *e);

/* The row width (2d + 1 or 2d) of a gather that gather: scores replaces (a decode step's secret
 * one-hot over units of cached [K | V] rows inside a layer, batched over its n_seqs · n_kv_heads
 * KV heads); 0 for any other op. */
uint32_t lower_score_gather_width(const model_cfg *m, uint32_t n_seqs, const op *o);

#endif
