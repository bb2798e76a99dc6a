/* llama.h — float reference inference of llama2.c-format checkpoints (stories260K), and its
 * tokenizer. Shapes come from model_params(); the forward pass follows
 * models/stories260K/README.md. Hooks let a trace recorder observe every layer, and let a
 * policy restrict which cached positions each layer/KV head attends to (teacher-forced
 * accuracy of a policy with the policy actually applied). */
#ifndef MPCSIM_LLAMA_H
#define MPCSIM_LLAMA_H

#include <stdint.h>

#include "protocols/base/err.h"
#include "model.h"

typedef struct llama llama; /* weights + run state (KV cache), opaque */
typedef struct llama_tok llama_tok;

int llama_load(const model_cfg *cfg, const char *checkpoint_path, llama **out, errbuf *e);
void llama_free(llama *m);
const model_cfg *llama_cfg(const llama *m);
/* Named weight tensor (model_params() names, "L3.wq" for layer 3), row-major float. */
const float *llama_weight(const llama *m, const char *name, uint32_t *rows, uint32_t *cols);

/* What a forward step exposes to an observer (all pointers valid during the callback only). */
typedef struct llama_layer_view {
    uint32_t layer, pos;
    const float *q;       /* n_heads × head_dim, after RoPE */
    const float *k;       /* n_kv_heads × head_dim, after RoPE (this position) */
    const float *v;       /* n_kv_heads × head_dim */
    const float *att;     /* n_heads × (pos+1): softmax probabilities (0 where masked) */
    const float *att_out; /* n_heads × head_dim: attention output before W_o */
    const float *ffn_pre; /* ffn_dim: gate pre-activation (w1·x) */
} llama_layer_view;

typedef struct llama_hooks {
    void *ctx;
    void (*on_layer)(void *ctx, const llama_layer_view *v);
    /* If set: mask[t] for t ≤ pos says whether (layer, kv_head) attends to cached position t.
     * Return 0 to attend to everything. */
    int (*attend_mask)(void *ctx, uint32_t layer, uint32_t kv_head, uint32_t pos, uint8_t *mask);
    /* If set: active[i] for i < ffn_dim says whether the FFN of (layer, pos) computes neuron i,
     * given its gate pre-activations (w1·x); the others are zeroed before W2 (a sparse FFN).
     * Return 0 to compute every neuron. */
    int (*ffn_mask)(void *ctx, uint32_t layer, uint32_t pos, const float *ffn_pre, uint8_t *active);
} llama_hooks;

/* Runs one token at position pos (positions must be fed in order from 0); logits receive
 * vocab floats. */
int llama_forward(llama *m, int token, uint32_t pos, const llama_hooks *h, float *logits);
void llama_reset(llama *m);
/* The queries (n_heads × head_dim, after RoPE) of the layer being run, valid inside the hooks
 * of llama_forward (attend_mask: the layer asking). */
const float *llama_query(const llama *m);

/* Greedy decoding's choice: the index of the first largest of x[0..n) (0 when n is 0), for
 * the float model's logits and for revealed (decoded fixed-point) ones. */
uint32_t llama_argmaxf(const float *x, uint32_t n);
uint32_t llama_argmax(const double *x, uint32_t n);

/* Agreement of logits x (n positions × vocab, e.g. revealed by a secure run) with a reference's
 * (the float model's). */
typedef struct llama_acc {
    uint32_t n, top1_agree;
    double max_abs, mean_abs; /* over all n × vocab logits */
    double miss_gap;          /* largest reference margin of a disagreement: ref[ref's top-1] -
                               * ref[x's top-1] (a near tie when below 2·max_abs) */
} llama_acc;
void llama_compare(const double *x, const float *ref, uint32_t n, uint32_t vocab, llama_acc *a);

/* <unk>, <s>, </s> and the 256 byte-fallback pieces <0x00>..<0xFF> (ids 3..258). */
#define LLAMA_TOK_MIN_VOCAB 259
/* Largest files the readers take (the whole file is held in memory, a checkpoint twice while
 * it loads): 8 GiB of checkpoint (a 2B-parameter model in float32), 64 MiB of tokenizer
 * (llama2.c's 32000-piece one is 424 kB). */
#define LLAMA_CKPT_MAX (8ull << 30)
#define LLAMA_TOK_FILE_MAX (64ull << 20)
int llama_tok_load(const char *path, uint32_t vocab, llama_tok **out, errbuf *e);
void llama_tok_free(llama_tok *t);
/* Encodes text as run.c does (BOS first, dummy-prefix space); returns the count. */
int llama_tok_encode(const llama_tok *t, const char *text, int *ids, int max_ids);
const char *llama_tok_piece(const llama_tok *t, int prev, int id); /* decoded piece */

#endif
