/* lower.c — a transformer step (prefill of P tokens or one decode step at KV length T) as an
 * MPC op program.
 *
 * Layout conventions: activations are (rows = sequences·tokens, cols = features); a weight W of
 * shape (out × in) from model_params() multiplies as x·Wᵀ (OPF_TRANS_B) and is a fixed operand
 * (OPF_FIXED_B) whose opened mask semi2k may reuse. Attention runs batched over heads: scores
 * q·Kᵀ per head (batch = sequences·heads), softmax over each row, ·V. With GQA each query head
 * reads KV head h / (heads / kv_heads). A policy's kept counts set the attention shapes; heads
 * of a layer run in the same vectorized ops, padded to the layer's largest kept count. */
#include "lower.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lower_opts_default(lower_opts *o)
{
    memset(o, 0, sizeof *o);
    o->phase = PHASE_DECODE;
    o->n_tokens = 1;
    o->n_seqs = 1;
    o->embed_onehot = 1;
    o->lm_head = 1;
    o->reveal_logits = 1;
}

/* ---- emission helpers ------------------------------------------------------------------------ */

/* Tensor names → ids of the program being lowered: the first tensor of each name, as
 * op_tensor_find returns it, in O(1) instead of a scan of every tensor (open addressing over
 * id + 1, 0 = empty; cap a power of two, at most half full). */
typedef struct name_index {
    uint32_t *slot;
    size_t n, cap;
} name_index;

typedef struct lw {
    op_program *p;
    const model_cfg *m;
    const lower_opts *o;
    int phase;
    int layer;     /* current layer or -1 */
    uint32_t rows; /* sequences · new tokens */
    int oom;
    name_index ix;
} lw;

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
static uint32_t *ix_slot(const lw *w, const char *name)
{
    size_t mask = w->ix.cap - 1, i = name_hash(name) & mask;
    while (w->ix.slot[i] && strcmp(w->p->tens[w->ix.slot[i] - 1].name, name) != 0)
        i = (i + 1) & mask;
    return &w->ix.slot[i];
}

/* Records tensor id under its (stored) name unless that name is already taken. */
static void ix_add(lw *w, uint32_t id)
{
    if (2 * (w->ix.n + 1) > w->ix.cap) {
        name_index old = w->ix;
        size_t cap = 2 * old.cap;
        if (!(w->ix.slot = calloc(cap, sizeof *w->ix.slot))) {
            w->ix = old;
            w->oom = 1;
            return;
        }
        w->ix.cap = cap;
        for (size_t i = 0; i < old.cap; i++)
            if (old.slot[i])
                *ix_slot(w, w->p->tens[old.slot[i] - 1].name) = old.slot[i];
        free(old.slot);
    }
    uint32_t *s = ix_slot(w, w->p->tens[id].name);
    if (!*s) {
        *s = id + 1;
        w->ix.n++;
    }
}

static uint32_t tens(lw *w, const char *name, op_role role, uint32_t b, uint32_t r, uint32_t c)
{
    char full[48];
    op_layer_name(full, role != OPT_WEIGHT ? w->layer : -1, name);
    uint32_t id = op_tensor_add(w->p, full, role, DOM_ARITH, b, r, c);
    if (id == OP_NONE)
        w->oom = 1;
    else
        ix_add(w, id);
    return id;
}

/* A weight tensor, created once per program and found by name afterwards. */
static uint32_t weight(lw *w, const char *name, uint32_t rows, uint32_t cols)
{
    char full[48];
    op_layer_name(full, w->layer, name);
    if (w->oom)
        return OP_NONE;
    uint32_t id = *ix_slot(w, full);
    if (id)
        return id - 1;
    id = op_tensor_add(w->p, full, OPT_WEIGHT, DOM_ARITH, 1, rows, cols);
    if (id == OP_NONE)
        w->oom = 1;
    else
        ix_add(w, id);
    return id;
}

static void emit(lw *w, int kind, int cat, int group, uint32_t b, uint32_t m, uint32_t k,
                 uint32_t n, uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags,
                 int32_t iarg, double farg)
{
    op o = {.kind = (uint16_t)kind,
            .phase = (uint8_t)w->phase,
            .cat = (uint8_t)cat,
            .layer = (int16_t)w->layer,
            .group = (int16_t)group,
            .batch = b,
            .m = m,
            .k = k,
            .n = n,
            .in = {in0, in1, in2},
            .out = out,
            .flags = flags,
            .iarg = iarg,
            .farg = farg};
    if (op_emit(w->p, &o) < 0)
        w->oom = 1;
}

/* y (rows × out) = x (rows × in) · Wᵀ, W (out × in) a weight. */
static uint32_t linear(lw *w, int cat, uint32_t x, const char *wname, uint32_t in, uint32_t out,
                       const char *yname)
{
    uint32_t W = weight(w, wname, out, in);
    uint32_t y = tens(w, yname, OPT_TEMP, 1, w->rows, out);
    emit(w, OP_MATMUL, cat, -1, 1, w->rows, in, out, x, W, OP_NONE, y, OPF_FIXED_B | OPF_TRANS_B, 0,
         0);
    return y;
}

/* y = x + bias (a 1 × n weight broadcast over rows): local. */
static uint32_t add_bias(lw *w, int cat, uint32_t x, const char *bname, uint32_t n)
{
    uint32_t b = weight(w, bname, 1, n);
    emit(w, OP_ADD, cat, -1, 1, w->rows, 0, n, x, b, OP_NONE, x, 0, 0, 0);
    return x;
}

static uint32_t norm(lw *w, uint32_t x, uint32_t rows, const char *g, const char *b,
                     const char *yname)
{
    uint32_t D = w->m->dim;
    uint32_t y = tens(w, yname, OPT_TEMP, 1, rows, D);
    uint32_t G = weight(w, g, 1, D);
    if (w->m->norm == NORM_RMS) {
        emit(w, OP_RMSNORM, OPC_NORM, -1, 1, rows, 0, D, x, G, OP_NONE, y, 0, 0, w->m->norm_eps);
    } else {
        uint32_t B = weight(w, b, 1, D);
        emit(w, OP_LAYERNORM, OPC_NORM, -1, 1, rows, 0, D, x, G, B, y, 0, 0, w->m->norm_eps);
    }
    return y;
}

/* ---- attention ------------------------------------------------------------------------------- */

/* Attended KV entries in this layer: kept (or all cached) plus this step's new tokens. All heads
 * of a layer run vectorized in the same ops, and a batched op has one shape, so a layer whose
 * KV heads keep different counts is padded to the largest (the shorter selections are padded
 * with masked entries, as a vectorized MPC framework runs them). */
static uint32_t attended(const lw *w)
{
    uint32_t cached = w->o->kv_len;
    if (w->o->kept) {
        uint32_t most = 0;
        for (uint32_t g = 0; g < w->m->n_kv_heads; g++) {
            uint32_t k = w->o->kept[(size_t)w->layer * w->m->n_kv_heads + g];
            most = k > most ? k : most;
        }
        cached = most < cached ? most : cached;
    }
    return cached + w->o->n_tokens;
}

/* Scores, softmax and ·V for `heads` query heads attending to `tk` entries. */
static void attend_block(lw *w, uint32_t heads, uint32_t tk, uint32_t q, uint32_t kc, uint32_t vc,
                         uint32_t ctx)
{
    const model_cfg *m = w->m;
    uint32_t S = w->o->n_seqs, t = w->o->n_tokens, d = m->head_dim;
    uint32_t b = S * heads;
    uint32_t sc = tens(w, "scores", OPT_TEMP, b, t, tk);
    emit(w, OP_MATMUL, OPC_ATTENTION, -1, b, t, d, tk, q, kc, OP_NONE, sc, OPF_TRANS_B, 0, 0);
    /* causal mask inside the new tokens: row i sees tk - t + i + 1 entries (public) */
    int32_t causal = t > 1 ? (int32_t)(tk - t) : -1;
    emit(w, OP_SOFTMAX, OPC_SOFTMAX, -1, b, t, 0, tk, sc, OP_NONE, OP_NONE, sc, 0, causal, 0);
    emit(w, OP_MATMUL, OPC_ATTENTION, -1, b, t, tk, d, sc, vc, OP_NONE, ctx, 0, 0, 0);
}

static uint32_t attention(lw *w, uint32_t xb)
{
    const model_cfg *m = w->m;
    uint32_t D = m->dim, d = m->head_dim, H = m->n_heads, Hkv = m->n_kv_heads;
    uint32_t S = w->o->n_seqs, t = w->o->n_tokens;
    uint32_t QD = H * d, KD = Hkv * d;
    uint32_t q = linear(w, OPC_ATTENTION, xb, "wq", D, QD, "q");
    uint32_t k = linear(w, OPC_ATTENTION, xb, "wk", D, KD, "k");
    uint32_t v = linear(w, OPC_ATTENTION, xb, "wv", D, KD, "v");
    if (m->family == FAM_GPT2) {
        add_bias(w, OPC_ATTENTION, q, "bq", QD);
        add_bias(w, OPC_ATTENTION, k, "bk", KD);
        add_bias(w, OPC_ATTENTION, v, "bv", KD);
    }
    if (m->pos == POS_ROPE) {
        /* public angles (op.h ROPE): batch = sequences, m = new tokens at positions kv_len …,
         * k = head_dim (pairs rotate within each head), farg = theta */
        emit(w, OP_ROPE, OPC_ATTENTION, -1, S, t, d, QD, q, OP_NONE, OP_NONE, q, 0,
             (int32_t)w->o->kv_len, m->rope_theta);
        emit(w, OP_ROPE, OPC_ATTENTION, -1, S, t, d, KD, k, OP_NONE, OP_NONE, k, 0,
             (int32_t)w->o->kv_len, m->rope_theta);
    }
    /* scale q by 1/sqrt(d) once (cheaper than scaling the T-long score rows) */
    emit(w, OP_MUL_PUB, OPC_ATTENTION, -1, 1, w->rows, 0, QD, q, OP_NONE, OP_NONE, q, 0, 0,
         1.0 / sqrt((double)d));
    /* heads to the batch dimension: (S·t, H·d) → (S·H, t, d), a free re-layout */
    uint32_t qh = tens(w, "q_heads", OPT_TEMP, S * H, t, d);
    emit(w, OP_VIEW, OPC_ATTENTION, -1, S * H, t, 0, d, q, OP_NONE, OP_NONE, qh, OPF_SPLIT_HEADS, 0,
         0);
    /* the KV cache: secret state across steps; appending this step's k, v is a free re-layout
     * (local work over the whole tensor: with attended_cache the tensor holds the attended rows
     * only, the policy's own store being apart, lower.h) */
    uint32_t ta = attended(w);
    uint32_t T = w->o->attended_cache ? ta : w->o->kv_len + t, at = T - t;
    uint32_t kc = tens(w, "kcache", OPT_CACHE, S * Hkv, T, d);
    uint32_t vc = tens(w, "vcache", OPT_CACHE, S * Hkv, T, d);
    emit(w, OP_VIEW, OPC_ATTENTION, -1, S * Hkv, t, 0, d, k, OP_NONE, OP_NONE, kc, OPF_SPLIT_HEADS,
         (int32_t)at, 0);
    emit(w, OP_VIEW, OPC_ATTENTION, -1, S * Hkv, t, 0, d, v, OP_NONE, OP_NONE, vc, OPF_SPLIT_HEADS,
         (int32_t)at, 0);
    uint32_t ctx = tens(w, "ctx", OPT_TEMP, S * H, t, d);
    attend_block(w, H, ta, qh, kc, vc, ctx);
    /* heads back to features: (S·H, t, d) → (S·t, H·d) */
    uint32_t cm = tens(w, "ctx_merged", OPT_TEMP, 1, w->rows, QD);
    emit(w, OP_VIEW, OPC_ATTENTION, -1, S * H, t, 0, d, ctx, OP_NONE, OP_NONE, cm, OPF_MERGE_HEADS,
         0, 0);
    uint32_t ao = linear(w, OPC_ATTENTION, cm, "wo", QD, D, "attn_out");
    if (m->family == FAM_GPT2)
        add_bias(w, OPC_ATTENTION, ao, "bo", D);
    return ao;
}

/* ---- FFN ----------------------------------------------------------------------------------- */

/* The FFN neurons layer w->layer computes: ffn_active's count clamped to [1, F], or F. */
static uint32_t ffn_width(const lw *w)
{
    uint32_t F = w->m->ffn_dim;
    if (!w->o->ffn_active)
        return F;
    uint32_t a = w->o->ffn_active[w->layer];
    return a == 0 ? 1 : a < F ? a : F;
}

/* A sparse FFN's matmul y (rows × n) = x (rows × k) · W_actᵀ, one instance per token row (each
 * token has its own active neurons, lower.h ffn_active): W_act (n × k per row) is the weight's
 * active rows (wname, n = active) or columns (k = active). Public pattern: a fixed operand —
 * the weight's rows at public indices, its opened mask restricted to them (semi2k sends only
 * x's mask); secret pattern: the policy's one-hot gather of the active weight blocks, a fresh
 * secret per token and layer (no fixed operand: both masks opened). */
static uint32_t linear_act(lw *w, int cat, uint32_t x, const char *wname, uint32_t k, uint32_t n,
                           int by_rows, uint32_t ix, const char *yname)
{
    char nm[48];
    snprintf(nm, sizeof nm, "%s.%s", wname, w->o->ffn_secret ? "gathered" : "active");
    uint32_t W = tens(w, nm, OPT_TEMP, w->rows, n, k);
    if (!w->o->ffn_secret) {
        /* the weight's active rows (n = active: W is F × k) or columns (k = active: W is n × F)
         * at the public indices ix, a local VIEW of the fixed operand (op.h OPF_INDEX_*) */
        uint32_t full =
            by_rows ? weight(w, wname, w->m->ffn_dim, k) : weight(w, wname, n, w->m->ffn_dim);
        emit(w, OP_VIEW, cat, -1, w->rows, by_rows ? n : k, 0, by_rows ? k : n, full, ix, OP_NONE,
             W, (by_rows ? OPF_INDEX_ROWS : OPF_INDEX_COLS) | OPF_FIXED_B, 0, 0);
    }
    uint32_t y = tens(w, yname, OPT_TEMP, 1, w->rows, n);
    emit(w, OP_MATMUL, cat, -1, w->rows, 1, k, n, x, W, OP_NONE, y,
         (w->o->ffn_secret ? 0u : OPF_FIXED_B) | OPF_TRANS_B, 0, 0);
    return y;
}

static uint32_t ffn(lw *w, uint32_t xb)
{
    const model_cfg *m = w->m;
    uint32_t D = m->dim, F = m->ffn_dim, A = ffn_width(w);
    if (A < F) { /* Comet's sparse FFN: gate/up/down and the activation on the A active neurons */
        /* public pattern: each token row's A active neuron indices — a policy op's output
         * when the program has one (Comet's revealed blocks, op.h OPF_INDEX_BLOCKS), else
         * bound by the caller */
        uint32_t ix = OP_NONE;
        if (!w->o->ffn_secret) {
            char full[48];
            op_layer_name(full, w->layer, "ffn.idx");
            ix = *ix_slot(w, full) - 1; /* the policy's (OP_NONE when none) */
            const op_tensor *t = ix != OP_NONE ? &w->p->tens[ix] : NULL;
            if (!t || t->role != OPT_PUBLIC || t->batch != w->rows ||
                (uint64_t)t->rows * t->cols != A)
                ix = tens(w, "ffn.idx", OPT_PUBLIC, w->rows, A, 1);
        }
        if (m->act == ACT_SWIGLU) {
            uint32_t h1 = linear_act(w, OPC_FFN, xb, "w1", D, A, 1, ix, "h1");
            uint32_t h3 = linear_act(w, OPC_FFN, xb, "w3", D, A, 1, ix, "h3");
            emit(w, OP_SILU, OPC_ACTIVATION, -1, 1, w->rows, 0, A, h1, OP_NONE, OP_NONE, h1, 0, 0,
                 0);
            emit(w, OP_MUL, OPC_FFN, -1, 1, w->rows, 0, A, h1, h3, OP_NONE, h1, 0, 0, 0);
            return linear_act(w, OPC_FFN, h1, "w2", A, D, 0, ix, "ffn_out");
        }
        uint32_t h = linear_act(w, OPC_FFN, xb, "w_fc", D, A, 1, ix, "h");
        uint32_t b =
            tens(w, w->o->ffn_secret ? "b_fc.gathered" : "b_fc.active", OPT_TEMP, w->rows, 1, A);
        if (!w->o->ffn_secret)
            emit(w, OP_VIEW, OPC_FFN, -1, w->rows, 1, 0, A, weight(w, "b_fc", 1, F), ix, OP_NONE, b,
                 OPF_INDEX_COLS, 0, 0);
        emit(w, OP_ADD, OPC_FFN, -1, 1, w->rows, 0, A, h, b, OP_NONE, h, 0, 0, 0);
        emit(w, OP_GELU, OPC_ACTIVATION, -1, 1, w->rows, 0, A, h, OP_NONE, OP_NONE, h, 0, 0, 0);
        uint32_t y = linear_act(w, OPC_FFN, h, "w_proj", A, D, 0, ix, "ffn_out");
        return add_bias(w, OPC_FFN, y, "b_proj", D);
    }
    if (m->act == ACT_SWIGLU) {
        uint32_t h1 = linear(w, OPC_FFN, xb, "w1", D, F, "h1");
        uint32_t h3 = linear(w, OPC_FFN, xb, "w3", D, F, "h3");
        emit(w, OP_SILU, OPC_ACTIVATION, -1, 1, w->rows, 0, F, h1, OP_NONE, OP_NONE, h1, 0, 0, 0);
        emit(w, OP_MUL, OPC_FFN, -1, 1, w->rows, 0, F, h1, h3, OP_NONE, h1, 0, 0, 0);
        return linear(w, OPC_FFN, h1, "w2", F, D, "ffn_out");
    }
    uint32_t h = linear(w, OPC_FFN, xb, "w_fc", D, F, "h");
    add_bias(w, OPC_FFN, h, "b_fc", F);
    emit(w, OP_GELU, OPC_ACTIVATION, -1, 1, w->rows, 0, F, h, OP_NONE, OP_NONE, h, 0, 0, 0);
    uint32_t y = linear(w, OPC_FFN, h, "w_proj", F, D, "ffn_out");
    return add_bias(w, OPC_FFN, y, "b_proj", D);
}

/* ---- the step -------------------------------------------------------------------------------- */

static uint32_t embed(lw *w)
{
    const model_cfg *m = w->m;
    uint32_t D = m->dim;
    const char *table = m->family == FAM_LLAMA ? "tok_emb" : "wte";
    uint32_t x = tens(w, "x", OPT_TEMP, w->o->n_seqs, w->o->n_tokens, D);
    if (w->o->embed_onehot) {
        /* the client's tokens as one-hot rows, secret-shared by the client (party 0), times
         * the embedding table: SPU's embedding (mpc-costs.md §3.4) */
        uint32_t oh = tens(w, "tokens_onehot", OPT_INPUT, 1, w->rows, m->vocab);
        emit(w, OP_INPUT, OPC_EMBED, -1, 1, w->rows, 0, m->vocab, OP_NONE, OP_NONE, OP_NONE, oh, 0,
             0, 0);
        uint32_t E = weight(w, table, m->vocab, D);
        emit(w, OP_GATHER, OPC_EMBED, -1, 1, w->rows, m->vocab, D, oh, E, OP_NONE, x, OPF_FIXED_B,
             0, 0);
    } else {
        emit(w, OP_INPUT, OPC_EMBED, -1, 1, w->rows, 0, D, OP_NONE, OP_NONE, OP_NONE, x, 0, 0, 0);
    }
    if (m->pos == POS_LEARNED) {
        /* rows kv_len … kv_len+t−1 of the position table: public positions, a local slice */
        uint32_t P = weight(w, "wpe", m->max_ctx, D);
        uint32_t pe = tens(w, "pos_emb", OPT_TEMP, 1, w->rows, D);
        emit(w, OP_VIEW, OPC_EMBED, -1, 1, w->rows, 0, D, P, OP_NONE, OP_NONE, pe, 0,
             (int32_t)w->o->kv_len, 0);
        emit(w, OP_ADD, OPC_EMBED, -1, 1, w->rows, 0, D, x, pe, OP_NONE, x, 0, 0, 0);
    }
    return x;
}

static void layer(lw *w, uint32_t x)
{
    const int llama = w->m->family == FAM_LLAMA;
    uint32_t D = w->m->dim;
    uint32_t xb = norm(w, x, w->rows, llama ? "rms_att" : "ln1_g", "ln1_b", "xn1");
    uint32_t ao = attention(w, xb);
    emit(w, OP_ADD, OPC_ATTENTION, -1, 1, w->rows, 0, D, x, ao, OP_NONE, x, 0, 0, 0);
    uint32_t xb2 = norm(w, x, w->rows, llama ? "rms_ffn" : "ln2_g", "ln2_b", "xn2");
    uint32_t fo = ffn(w, xb2);
    emit(w, OP_ADD, OPC_FFN, -1, 1, w->rows, 0, D, x, fo, OP_NONE, x, 0, 0, 0);
}

static void head(lw *w, uint32_t x)
{
    const model_cfg *m = w->m;
    uint32_t D = m->dim, S = w->o->n_seqs;
    /* only each sequence's last position produces a token: row t-1 of each sequence */
    uint32_t last = tens(w, "x_last", OPT_TEMP, S, 1, D);
    emit(w, OP_VIEW, OPC_LMHEAD, -1, S, 1, 0, D, x, OP_NONE, OP_NONE, last, 0,
         (int32_t)w->o->n_tokens - 1, 0);
    const int llama = m->family == FAM_LLAMA;
    uint32_t xn = norm(w, last, S, llama ? "rms_final" : "lnf_g", "lnf_b", "xn_final");
    const char *cls = m->tied_embeddings ? (llama ? "tok_emb" : "wte") : "wcls";
    uint32_t W = weight(w, cls, m->vocab, D);
    uint32_t lg = tens(w, "logits", OPT_OUTPUT, 1, S, m->vocab);
    emit(w, OP_MATMUL, OPC_LMHEAD, -1, 1, S, D, m->vocab, xn, W, OP_NONE, lg,
         OPF_FIXED_B | OPF_TRANS_B, 0, 0);
    if (w->o->reveal_logits)
        emit(w, OP_REVEAL, OPC_LMHEAD, -1, 1, S, 0, m->vocab, lg, OP_NONE, OP_NONE, lg, 0, 0, 0);
}

int lower_step(const model_cfg *m, const lower_opts *o, op_program *prog, errbuf *e)
{
    if (o->n_tokens == 0 || o->n_seqs == 0)
        return err_set(e, MS_ERR_INPUT, "lowering: a step needs at least one token and sequence");
    if (o->phase == PHASE_DECODE && o->n_tokens != 1)
        return err_set(e, MS_ERR_INPUT, "lowering: a decode step has exactly one new token");
    if ((uint64_t)o->kv_len + o->n_tokens > m->max_ctx)
        return err_set(e, MS_ERR_RANGE,
                       "lowering: %u cached + %u new tokens exceed %s's context of %u", o->kv_len,
                       o->n_tokens, m->name, m->max_ctx);
    lw w = {
        .p = prog, .m = m, .o = o, .phase = o->phase, .layer = -1, .rows = o->n_seqs * o->n_tokens};
    if (!prog->model[0])
        snprintf(prog->model, sizeof prog->model, "%s", m->name);
    w.ix.cap = 1024;
    while (w.ix.cap < 4 * (prog->n_tens + 32 * (size_t)m->n_layers + 64))
        w.ix.cap *= 2;
    if (!(w.ix.slot = calloc(w.ix.cap, sizeof *w.ix.slot)))
        return err_set(e, MS_ERR_NOMEM, "lowering: out of memory");
    for (size_t t = 0; t < prog->n_tens && !w.oom; t++) /* tensors the policy made */
        ix_add(&w, (uint32_t)t);
    uint32_t x = embed(&w);
    for (uint32_t l = 0; l < m->n_layers && !w.oom; l++) {
        w.layer = (int)l;
        layer(&w, x);
    }
    w.layer = -1;
    if (o->lm_head)
        head(&w, x);
    free(w.ix.slot);
    return w.oom ? err_set(e, MS_ERR_NOMEM, "lowering: out of memory") : MS_OK;
}
