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

#include "protocols/program/opb.h"

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

/* A layer's score-side gather (lower_opts.score_gather): the policy's one-hot (b, m, k) picks m
 * of k units of `unit` cached rows each; `extra` columns ride along with each row (a
 * carried score, MPCache's mask column: w − 2·head_dim of the row gather's width w). */
typedef struct score_side {
    uint32_t b, m, k, unit, extra;
    uint32_t onehot; /* the policy's one-hot tensor (OP_NONE: a placeholder) */
} score_side;

typedef struct lw {
    opb b; /* the program being lowered, the current layer (-1: none), names indexed */
    const model_cfg *m;
    const lower_opts *o;
    uint32_t rows;     /* sequences · new tokens */
    score_side *sside; /* [n_layers] the layers attended by the score side (b = 0: rows) */
} lw;

/* y (rows × out) = x (rows × in) · Wᵀ, W (out × in) a weight. */
static uint32_t linear(lw *w, int cat, uint32_t x, const char *wname, uint32_t in, uint32_t out,
                       const char *yname)
{
    uint32_t W = opb_shared(&w->b, wname, OPT_WEIGHT, 1, out, in);
    uint32_t y = opb_tensor(&w->b, yname, OPT_TEMP, 1, w->rows, out);
    opb_op_cat(&w->b, cat, OP_MATMUL, 1, w->rows, in, out, x, W, OP_NONE, y,
               OPF_FIXED_B | OPF_TRANS_B, 0, 0);
    return y;
}

/* y = x + bias (a 1 × n weight broadcast over rows): local. */
static uint32_t add_bias(lw *w, int cat, uint32_t x, const char *bname, uint32_t n)
{
    uint32_t b = opb_shared(&w->b, bname, OPT_WEIGHT, 1, 1, n);
    opb_op_cat(&w->b, cat, OP_ADD, 1, w->rows, 0, n, x, b, OP_NONE, x, 0, 0, 0);
    return x;
}

static uint32_t norm(lw *w, uint32_t x, uint32_t rows, const char *g, const char *b,
                     const char *yname)
{
    uint32_t D = w->m->dim;
    uint32_t y = opb_tensor(&w->b, yname, OPT_TEMP, 1, rows, D);
    uint32_t G = opb_shared(&w->b, g, OPT_WEIGHT, 1, 1, D);
    if (w->m->norm == NORM_RMS) {
        opb_op_cat(&w->b, OPC_NORM, OP_RMSNORM, 1, rows, 0, D, x, G, OP_NONE, y, 0, 0,
                   w->m->norm_eps);
    } else {
        uint32_t B = opb_shared(&w->b, b, OPT_WEIGHT, 1, 1, D);
        opb_op_cat(&w->b, OPC_NORM, OP_LAYERNORM, 1, rows, 0, D, x, G, B, y, 0, 0, w->m->norm_eps);
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
            uint32_t k = w->o->kept[(size_t)w->b.layer * w->m->n_kv_heads + g];
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
    uint32_t sc = opb_tensor(&w->b, "scores", OPT_TEMP, b, t, tk);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_MATMUL, b, t, d, tk, q, kc, OP_NONE, sc, OPF_TRANS_B, 0, 0);
    /* causal mask inside the new tokens: row i sees tk - t + i + 1 entries (public) */
    int32_t causal = t > 1 ? (int32_t)(tk - t) : -1;
    opb_op_cat(&w->b, OPC_SOFTMAX, OP_SOFTMAX, b, t, 0, tk, sc, OP_NONE, OP_NONE, sc, 0, causal, 0);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_MATMUL, b, t, tk, d, sc, vc, OP_NONE, ctx, 0, 0, 0);
}

/* The public entries a score-side layer attends beside its ta − t kept ones (a composition's
 * sinks and recent window, at public positions: no gather): the kept count's excess over the
 * m·unit gathered entries. */
static uint32_t score_public(const lw *w, const score_side *ss, uint32_t ta)
{
    uint32_t R = ss->m * ss->unit + w->o->n_tokens;
    return ta > R ? ta - R : 0;
}

/* The score side of a layer whose policy picks kept units by a one-hot (lower.h score_gather):
 * q·Kᵀ over every candidate entry the one-hot spans (C = k·unit: the policy's table, the whole
 * cache or its static set), the P public entries attended beside them and the new ones, the
 * kept units' scores gathered by the one-hot (b, m, k) — with each row's extra columns, as the
 * row gather carried them — softmax over the kept, public and new entries, the probabilities
 * scattered back to every candidate by the transposed one-hot, ·V over every entry. Per KV head
 * of G query heads and t new tokens, outputs of a secret product: G·t·(C + P + t) (q·Kᵀ),
 * m·unit·(G·t + extra) (gather), C·G·t (scatter), G·t·d (·V) (sim/policy/POLICIES.md
 * "Score-side attention"). The re-layouts between them are VIEWs (local). */
static void attend_scores(lw *w, const score_side *ss, uint32_t ta, uint32_t q, uint32_t kc,
                          uint32_t vc, uint32_t ctx)
{
    const model_cfg *m = w->m;
    uint32_t S = w->o->n_seqs, t = w->o->n_tokens, d = m->head_dim, H = m->n_heads;
    uint32_t G = H / m->n_kv_heads, b = S * H, Gt = G * t;
    uint32_t U = ss->unit, C = ss->k * U; /* the candidate entries the one-hot spans */
    uint32_t Pu = score_public(w, ss, ta), T = C + Pu + t;
    uint32_t sc = opb_tensor(&w->b, "scores_all", OPT_TEMP, b, t, T);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_MATMUL, b, t, d, T, q, kc, OP_NONE, sc, OPF_TRANS_B, 0, 0);
    /* the candidates' scores by unit: (b, k, unit·(G·t + extra)), the extra columns the
     * policy's state (a re-layout, local) */
    uint32_t cw = U * (Gt + ss->extra);
    uint32_t cand = opb_tensor(&w->b, "scores_units", OPT_TEMP, ss->b, ss->k, cw);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, ss->b, ss->k, 0, cw, sc, OP_NONE, OP_NONE, cand, 0, 0,
               0);
    uint32_t oh = ss->onehot;
    if (oh == OP_NONE || oh >= w->b.prog->n_tens)
        oh = opb_tensor(&w->b, "score_onehot", OPT_CACHE, ss->b, ss->m, ss->k);
    /* COST: the kept units' scores, one-hot · scores (the row gather's one-hot, score side) */
    uint32_t kept = opb_tensor(&w->b, "scores_kept", OPT_TEMP, ss->b, ss->m, cw);
    opb_op_cat(&w->b, OPC_POLICY, OP_GATHER, ss->b, ss->m, ss->k, cw, oh, cand, OP_NONE, kept,
               OPF_NO_TRUNC, 0, 0);
    /* the kept scores and the new tokens' as softmax rows of ta entries (local) */
    uint32_t pr = opb_tensor(&w->b, "probs_kept", OPT_TEMP, b, t, ta);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, b, t, 0, ta, kept, OP_NONE, OP_NONE, pr, 0, 0, 0);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, b, t, 0, Pu + t, sc, OP_NONE, OP_NONE, pr, 0,
               (int32_t)(ta - t - Pu), 0);
    int32_t causal = t > 1 ? (int32_t)(ta - t) : -1;
    opb_op_cat(&w->b, OPC_SOFTMAX, OP_SOFTMAX, b, t, 0, ta, pr, OP_NONE, OP_NONE, pr, 0, causal, 0);
    /* COST: scattered back to every candidate by the transposed one-hot (local transposition) */
    uint32_t pu = opb_tensor(&w->b, "probs_units", OPT_TEMP, ss->b, ss->m, U * Gt);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, ss->b, ss->m, 0, U * Gt, pr, OP_NONE, OP_NONE, pu, 0,
               0, 0);
    uint32_t oht = opb_tensor(&w->b, "score_onehot_t", OPT_TEMP, ss->b, ss->k, ss->m);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, ss->b * ss->m, ss->k, 0, 1, oh, OP_NONE, OP_NONE, oht,
               OPF_MERGE_HEADS, 0, 0);
    uint32_t back = opb_tensor(&w->b, "probs_back", OPT_TEMP, ss->b, ss->k, U * Gt);
    opb_op_cat(&w->b, OPC_POLICY, OP_GATHER, ss->b, ss->k, ss->m, U * Gt, oht, pu, OP_NONE, back,
               OPF_NO_TRUNC, 0, 0);
    /* every candidate's probability (0 where not kept), the public and new entries': ·V over
     * all */
    uint32_t pa = opb_tensor(&w->b, "probs_all", OPT_TEMP, b, t, T);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, b, t, 0, C, back, OP_NONE, OP_NONE, pa, 0, 0, 0);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, b, t, 0, Pu + t, pr, OP_NONE, OP_NONE, pa, 0,
               (int32_t)(T - t - Pu), 0);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_MATMUL, b, t, T, d, pa, vc, OP_NONE, ctx, 0, 0, 0);
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
        opb_op_cat(&w->b, OPC_ATTENTION, OP_ROPE, S, t, d, QD, q, OP_NONE, OP_NONE, q, 0,
                   (int32_t)w->o->kv_len, m->rope_theta);
        opb_op_cat(&w->b, OPC_ATTENTION, OP_ROPE, S, t, d, KD, k, OP_NONE, OP_NONE, k, 0,
                   (int32_t)w->o->kv_len, m->rope_theta);
    }
    /* scale q by 1/sqrt(d) once (cheaper than scaling the T-long score rows) */
    opb_op_cat(&w->b, OPC_ATTENTION, OP_MUL_PUB, 1, w->rows, 0, QD, q, OP_NONE, OP_NONE, q, 0, 0,
               1.0 / sqrt((double)d));
    /* heads to the batch dimension: (S·t, H·d) → (S·H, t, d), a free re-layout */
    uint32_t qh = opb_tensor(&w->b, "q_heads", OPT_TEMP, S * H, t, d);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, S * H, t, 0, d, q, OP_NONE, OP_NONE, qh,
               OPF_SPLIT_HEADS, 0, 0);
    /* the KV cache: secret state across steps; appending this step's k, v is a free re-layout
     * (local work over the whole tensor: with attended_cache the tensor holds the attended rows
     * only, the policy's own store being apart, lower.h) */
    uint32_t ta = attended(w);
    const score_side *ss = w->sside && w->sside[w->b.layer].b ? &w->sside[w->b.layer] : NULL;
    /* the score side attends every candidate its one-hot spans, the policy's table of them, and
     * the public entries beside them */
    uint32_t T = ss                     ? ss->k * ss->unit + score_public(w, ss, ta) + t
                 : w->o->attended_cache ? ta
                                        : w->o->kv_len + t,
             at = T - t;
    uint32_t kc = opb_tensor(&w->b, "kcache", OPT_CACHE, S * Hkv, T, d);
    uint32_t vc = opb_tensor(&w->b, "vcache", OPT_CACHE, S * Hkv, T, d);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, S * Hkv, t, 0, d, k, OP_NONE, OP_NONE, kc,
               OPF_SPLIT_HEADS, (int32_t)at, 0);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, S * Hkv, t, 0, d, v, OP_NONE, OP_NONE, vc,
               OPF_SPLIT_HEADS, (int32_t)at, 0);
    uint32_t ctx = opb_tensor(&w->b, "ctx", OPT_TEMP, S * H, t, d);
    if (ss)
        attend_scores(w, ss, ta, qh, kc, vc, ctx);
    else
        attend_block(w, H, ta, qh, kc, vc, ctx);
    /* heads back to features: (S·H, t, d) → (S·t, H·d) */
    uint32_t cm = opb_tensor(&w->b, "ctx_merged", OPT_TEMP, 1, w->rows, QD);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_VIEW, S * H, t, 0, d, ctx, OP_NONE, OP_NONE, cm,
               OPF_MERGE_HEADS, 0, 0);
    uint32_t ao = linear(w, OPC_ATTENTION, cm, "wo", QD, D, "attn_out");
    if (m->family == FAM_GPT2)
        add_bias(w, OPC_ATTENTION, ao, "bo", D);
    return ao;
}

/* ---- FFN ----------------------------------------------------------------------------------- */

/* The FFN neurons layer w->b.layer computes: ffn_active's count clamped to [1, F], or F. */
static uint32_t ffn_width(const lw *w)
{
    uint32_t F = w->m->ffn_dim;
    if (!w->o->ffn_active)
        return F;
    uint32_t a = w->o->ffn_active[w->b.layer];
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
    uint32_t W = opb_tensor(&w->b, nm, OPT_TEMP, w->rows, n, k);
    if (!w->o->ffn_secret) {
        /* the weight's active rows (n = active: W is F × k) or columns (k = active: W is n × F)
         * at the public indices ix, a local VIEW of the fixed operand (op.h OPF_INDEX_*) */
        uint32_t full = by_rows ? opb_shared(&w->b, wname, OPT_WEIGHT, 1, w->m->ffn_dim, k)
                                : opb_shared(&w->b, wname, OPT_WEIGHT, 1, n, w->m->ffn_dim);
        opb_op_cat(&w->b, cat, OP_VIEW, w->rows, by_rows ? n : k, 0, by_rows ? k : n, full, ix,
                   OP_NONE, W, (by_rows ? OPF_INDEX_ROWS : OPF_INDEX_COLS) | OPF_FIXED_B, 0, 0);
    }
    uint32_t y = opb_tensor(&w->b, yname, OPT_TEMP, 1, w->rows, n);
    opb_op_cat(&w->b, cat, OP_MATMUL, w->rows, 1, k, n, x, W, OP_NONE, y,
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
            ix = opb_find(&w->b, "ffn.idx"); /* the policy's (OP_NONE when none) */
            const op_tensor *t = ix != OP_NONE ? &w->b.prog->tens[ix] : NULL;
            if (!t || t->role != OPT_PUBLIC || t->batch != w->rows ||
                (uint64_t)t->rows * t->cols != A)
                ix = opb_tensor(&w->b, "ffn.idx", OPT_PUBLIC, w->rows, A, 1);
        }
        if (m->act == ACT_SWIGLU) {
            uint32_t h1 = linear_act(w, OPC_FFN, xb, "w1", D, A, 1, ix, "h1");
            uint32_t h3 = linear_act(w, OPC_FFN, xb, "w3", D, A, 1, ix, "h3");
            opb_op_cat(&w->b, OPC_ACTIVATION, OP_SILU, 1, w->rows, 0, A, h1, OP_NONE, OP_NONE, h1,
                       0, 0, 0);
            opb_op_cat(&w->b, OPC_FFN, OP_MUL, 1, w->rows, 0, A, h1, h3, OP_NONE, h1, 0, 0, 0);
            return linear_act(w, OPC_FFN, h1, "w2", A, D, 0, ix, "ffn_out");
        }
        uint32_t h = linear_act(w, OPC_FFN, xb, "w_fc", D, A, 1, ix, "h");
        uint32_t b = opb_tensor(&w->b, w->o->ffn_secret ? "b_fc.gathered" : "b_fc.active", OPT_TEMP,
                                w->rows, 1, A);
        if (!w->o->ffn_secret)
            opb_op_cat(&w->b, OPC_FFN, OP_VIEW, w->rows, 1, 0, A,
                       opb_shared(&w->b, "b_fc", OPT_WEIGHT, 1, 1, F), ix, OP_NONE, b,
                       OPF_INDEX_COLS, 0, 0);
        opb_op_cat(&w->b, OPC_FFN, OP_ADD, 1, w->rows, 0, A, h, b, OP_NONE, h, 0, 0, 0);
        opb_op_cat(&w->b, OPC_ACTIVATION, OP_GELU, 1, w->rows, 0, A, h, OP_NONE, OP_NONE, h, 0, 0,
                   0);
        uint32_t y = linear_act(w, OPC_FFN, h, "w_proj", A, D, 0, ix, "ffn_out");
        return add_bias(w, OPC_FFN, y, "b_proj", D);
    }
    if (m->act == ACT_SWIGLU) {
        uint32_t h1 = linear(w, OPC_FFN, xb, "w1", D, F, "h1");
        uint32_t h3 = linear(w, OPC_FFN, xb, "w3", D, F, "h3");
        opb_op_cat(&w->b, OPC_ACTIVATION, OP_SILU, 1, w->rows, 0, F, h1, OP_NONE, OP_NONE, h1, 0, 0,
                   0);
        opb_op_cat(&w->b, OPC_FFN, OP_MUL, 1, w->rows, 0, F, h1, h3, OP_NONE, h1, 0, 0, 0);
        return linear(w, OPC_FFN, h1, "w2", F, D, "ffn_out");
    }
    uint32_t h = linear(w, OPC_FFN, xb, "w_fc", D, F, "h");
    add_bias(w, OPC_FFN, h, "b_fc", F);
    opb_op_cat(&w->b, OPC_ACTIVATION, OP_GELU, 1, w->rows, 0, F, h, OP_NONE, OP_NONE, h, 0, 0, 0);
    uint32_t y = linear(w, OPC_FFN, h, "w_proj", F, D, "ffn_out");
    return add_bias(w, OPC_FFN, y, "b_proj", D);
}

/* ---- the step -------------------------------------------------------------------------------- */

static uint32_t embed(lw *w)
{
    const model_cfg *m = w->m;
    uint32_t D = m->dim;
    const char *table = m->family == FAM_LLAMA ? "tok_emb" : "wte";
    uint32_t x = opb_tensor(&w->b, "x", OPT_TEMP, w->o->n_seqs, w->o->n_tokens, D);
    if (w->o->embed_onehot) {
        /* the client's tokens as one-hot rows, secret-shared by the client (party 0), times
         * the embedding table: SPU's embedding (mpc-costs.md §3.4) */
        uint32_t oh = opb_tensor(&w->b, "tokens_onehot", OPT_INPUT, 1, w->rows, m->vocab);
        opb_op_cat(&w->b, OPC_EMBED, OP_INPUT, 1, w->rows, 0, m->vocab, OP_NONE, OP_NONE, OP_NONE,
                   oh, 0, 0, 0);
        uint32_t E = opb_shared(&w->b, table, OPT_WEIGHT, 1, m->vocab, D);
        opb_op_cat(&w->b, OPC_EMBED, OP_GATHER, 1, w->rows, m->vocab, D, oh, E, OP_NONE, x,
                   OPF_FIXED_B, 0, 0);
    } else {
        opb_op_cat(&w->b, OPC_EMBED, OP_INPUT, 1, w->rows, 0, D, OP_NONE, OP_NONE, OP_NONE, x, 0, 0,
                   0);
    }
    if (m->pos == POS_LEARNED) {
        /* rows kv_len … kv_len+t−1 of the position table: public positions, a local slice */
        uint32_t P = opb_shared(&w->b, "wpe", OPT_WEIGHT, 1, m->max_ctx, D);
        uint32_t pe = opb_tensor(&w->b, "pos_emb", OPT_TEMP, 1, w->rows, D);
        opb_op_cat(&w->b, OPC_EMBED, OP_VIEW, 1, w->rows, 0, D, P, OP_NONE, OP_NONE, pe, 0,
                   (int32_t)w->o->kv_len, 0);
        opb_op_cat(&w->b, OPC_EMBED, OP_ADD, 1, w->rows, 0, D, x, pe, OP_NONE, x, 0, 0, 0);
    }
    return x;
}

static void layer(lw *w, uint32_t x)
{
    const int llama = w->m->family == FAM_LLAMA;
    uint32_t D = w->m->dim;
    uint32_t xb = norm(w, x, w->rows, llama ? "rms_att" : "ln1_g", "ln1_b", "xn1");
    uint32_t ao = attention(w, xb);
    opb_op_cat(&w->b, OPC_ATTENTION, OP_ADD, 1, w->rows, 0, D, x, ao, OP_NONE, x, 0, 0, 0);
    uint32_t xb2 = norm(w, x, w->rows, llama ? "rms_ffn" : "ln2_g", "ln2_b", "xn2");
    uint32_t fo = ffn(w, xb2);
    opb_op_cat(&w->b, OPC_FFN, OP_ADD, 1, w->rows, 0, D, x, fo, OP_NONE, x, 0, 0, 0);
}

static void head(lw *w, uint32_t x)
{
    const model_cfg *m = w->m;
    uint32_t D = m->dim, S = w->o->n_seqs;
    /* only each sequence's last position produces a token: row t-1 of each sequence */
    uint32_t last = opb_tensor(&w->b, "x_last", OPT_TEMP, S, 1, D);
    opb_op_cat(&w->b, OPC_LMHEAD, OP_VIEW, S, 1, 0, D, x, OP_NONE, OP_NONE, last, 0,
               (int32_t)w->o->n_tokens - 1, 0);
    const int llama = m->family == FAM_LLAMA;
    uint32_t xn = norm(w, last, S, llama ? "rms_final" : "lnf_g", "lnf_b", "xn_final");
    const char *cls = m->tied_embeddings ? (llama ? "tok_emb" : "wte") : "wcls";
    uint32_t W = opb_shared(&w->b, cls, OPT_WEIGHT, 1, m->vocab, D);
    uint32_t lg = opb_tensor(&w->b, "logits", OPT_OUTPUT, 1, S, m->vocab);
    opb_op_cat(&w->b, OPC_LMHEAD, OP_MATMUL, 1, S, D, m->vocab, xn, W, OP_NONE, lg,
               OPF_FIXED_B | OPF_TRANS_B, 0, 0);
    if (w->o->reveal_logits)
        opb_op_cat(&w->b, OPC_LMHEAD, OP_REVEAL, 1, S, 0, m->vocab, lg, OP_NONE, OP_NONE, lg, 0, 0,
                   0);
}

/* gather: scores — takes the policy's decode gathers of kept [K | V] rows out of the program
 * (a secret one-hot times a table of units of rows 2·head_dim (+ extra) wide, batch the layer's
 * KV heads, inside a layer) and notes them per layer for attend_scores. Other gathers (a
 * compaction batched over the layers or over every KV head at once, a weight gather) stay. */
uint32_t lower_score_gather_width(const model_cfg *m, uint32_t n_seqs, const op *o)
{
    uint32_t d2 = 2 * m->head_dim, B = n_seqs * m->n_kv_heads;
    /* rows 2d + 1 wide (a carried column) first: units of 2d + 1 rows are no row width */
    uint32_t wd = o->n % (d2 + 1) == 0 ? d2 + 1 : o->n % d2 == 0 ? d2 : 0;
    int row_gather = o->kind == OP_GATHER && o->cat == OPC_POLICY && o->phase == PHASE_DECODE &&
                     !(o->flags & (OPF_FIXED_B | OPF_PUBLIC_B)) && o->layer >= 0 &&
                     (uint32_t)o->layer < m->n_layers && o->batch == B;
    return row_gather ? wd : 0;
}

static int score_sides(lw *w, op_program *prog)
{
    const model_cfg *m = w->m;
    uint32_t d2 = 2 * m->head_dim;
    if (!(w->sside = calloc(m->n_layers, sizeof *w->sside)))
        return -1;
    size_t keep = 0;
    for (size_t i = 0; i < prog->n_ops; i++) {
        op *o = &prog->ops[i];
        uint32_t wd = lower_score_gather_width(m, w->o->n_seqs, o);
        if (wd && !w->sside[o->layer].b) {
            w->sside[o->layer] = (score_side){o->batch, o->m, o->k, o->n / wd, wd - d2, o->in[0]};
            continue;
        }
        prog->ops[keep++] = *o;
    }
    prog->n_ops = keep;
    return 0;
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
    lw w = {.m = m, .o = o, .rows = o->n_seqs * o->n_tokens};
    opb_init(&w.b, prog, o->phase, -1, OPC_OTHER, NULL);
    if (!prog->model[0])
        snprintf(prog->model, sizeof prog->model, "%s", m->name);
    opb_index(&w.b); /* the tensors the policy made, and the lowering's as they come */
    if (o->score_gather && o->phase == PHASE_DECODE && o->kept && score_sides(&w, prog)) {
        opb_release(&w.b);
        return err_set(e, MS_ERR_NOMEM, "lowering: out of memory");
    }
    uint32_t x = embed(&w);
    for (uint32_t l = 0; l < m->n_layers && !opb_failed(&w.b); l++) {
        w.b.layer = (int)l;
        layer(&w, x);
    }
    w.b.layer = -1;
    if (o->lm_head)
        head(&w, x);
    int failed = opb_failed(&w.b);
    opb_release(&w.b);
    free(w.sside);
    return failed ? err_set(e, MS_ERR_NOMEM, "lowering: out of memory") : MS_OK;
}
