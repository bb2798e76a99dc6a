/* policy_comet.c — Comet (arXiv 2505.07239, S&P 2025): predicted FFN activation sparsity at
 * block granularity, plus the KV-cache refill that skipped computation forces.
 *
 * Only Comet's abstract is public (policies.md §1.10); every rule below that is not in it is
 * OUR ASSUMPTION, listed in sim/policy/POLICIES.md:
 *   A1 predictor: an oracle on the trace's FFN gate pre-activations — neuron i is active iff
 *      w1·x > act_threshold; its MPC cost is Deja Vu's low-rank predictor shape (dim×rank,
 *      rank×blocks; FMInference/DejaVu sparse_predictor, rank 1000), evaluated per block.
 *   A2 block granularity ("spatial locality"): blocks of `block` consecutive neurons; a block
 *      is computed iff one of its neurons is active. The active count per token is public (as
 *      kept counts are), the pattern secret: computing a block = one-hot gather of its rows of
 *      W1, W3 and columns of W2.
 *   A3 skipped computation and the KV cache: a token whose active-block fraction at layer l is
 *      below skip_below is treated as skipped from layer l+1 on for its K/V: its layer-(l+1)
 *      K/V entry is missing until refilled (recomputed: one k/v projection of that token).
 *   A4 refill: the attention of a decode step needs every cached entry, so each missing entry
 *      is refilled the first time a step needs it. merge = 1 batches all misses of a layer and
 *      step into one projection (one round); merge = 0 refills them one by one (a round each).
 *      prefetch = 1 refills the prompt's misses at the end of the prefill (phase prefill)
 *      instead of at the first decode step.
 *   A5 pattern: `public` reveals each token's active blocks (the lowering takes the weights'
 *      active rows/columns by public index: the fixed operands stay fixed); `secret` reveals
 *      only their count and gathers the blocks' weights by one-hot (the FFN then multiplies by
 *      fresh secret weights). What each leaks and costs: sim/policy/POLICIES.md.
 *   A6 top-k predictor (active_frac > 0): instead of the oracle, a linear predictor — block
 *      b's score is the mean gate pre-activation of its neurons, (mean of W1's rows of b)·x, one
 *      fixed (blocks × dim) matrix — and each token computes the ⌈active_frac · blocks⌉ blocks
 *      of highest score (a top-k, as Deja Vu's predictor selects neurons: FMInference/DejaVu).
 *      The count is then a public parameter, not data: nothing about the pattern is revealed
 *      with `secret`, and every program's shape is known before it runs, so the secure session
 *      runs it on shares (policy_comet_secure.c; the emitter below builds both).
 * Attention itself stays dense (kept = the full cache); the lowering shrinks gate/up/down and
 * the activation to the active neurons (policy_ops.ffn_active → lower_opts.ffn_active). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "comet_ops.h"
#include "secpol.h"

static const policy_param comet_params[] = {
    {"block", "8", "FFN neurons per block (ASSUMED; not public)", NULL, 1, 1e6, 1},
    {"act_threshold", "0", "neuron active iff gate pre-activation > this (ASSUMED)", NULL, -1e6,
     1e6, 0},
    {"rank", "1000", "predictor rank (Deja Vu --D 1000, used as the cost template)", NULL, 1, 1e6,
     1},
    {"skip_below", "0.5",
     "active-block fraction under which the token's next-layer K/V are skipped (ASSUMED)", NULL, 0,
     1, 0},
    {"merge", "1", "1: merge a step's misses of a layer into one refill (ASSUMED rule)", NULL, 0, 1,
     0},
    {"prefetch", "1", "1: refill the prompt's misses at the end of the prefill (ASSUMED rule)",
     NULL, 0, 1, 0},
    {"pattern", "secret",
     "which neuron blocks are active: public (revealed, weights sliced locally) or secret "
     "(count revealed, weights gathered by one-hot)",
     "public|secret", 0, 0, 0},
    {"active_frac", "0",
     "0: a block is active iff a neuron's gate pre-activation > act_threshold (oracle); > 0: "
     "the ceil(frac*blocks) blocks of highest mean gate pre-activation (linear predictor, "
     "top-k; ASSUMED)",
     NULL, 0, 1, 0},
};

typedef struct comet_state {
    policy_env env;
    uint32_t block, nblocks, rank;
    double thr, skip_below;
    int merge, prefetch, secret;
    uint32_t topk; /* A6: active blocks per token (0: the oracle rule) */
    float *score;  /* [nblocks] block scores (A6) */
    uint32_t *pick, *work;
    uint32_t *emitted;       /* [L] active blocks per token of the step last emitted */
    uint8_t *miss;           /* [L][max_len] 1 missing, 2 refilled */
    uint32_t *active;        /* [L] active blocks of the newest token */
    uint64_t *prompt_active; /* [L] Σ active blocks over the prompt */
    uint32_t *pending;       /* [L] misses refilled at the current step */
    uint64_t blocks_seen, blocks_active, refills, refill_ops;
} comet_state;

static void comet_fini(void *st)
{
    comet_state *s = st;
    if (!s)
        return;
    free(s->miss);
    free(s->active);
    free(s->prompt_active);
    free(s->pending);
    free(s->emitted);
    free(s->score);
    free(s->pick);
    free(s->work);
    free(s);
}

static int comet_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    const policy_ops *p = &policy_comet;
    comet_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy comet: out of memory");
    s->env = *env;
    double merge, prefetch;
    int rc = policy_arg_u32(p, a, "block", &s->block, e);
    if (!rc)
        rc = policy_arg_double(p, a, "act_threshold", &s->thr, e);
    if (!rc)
        rc = policy_arg_u32(p, a, "rank", &s->rank, e);
    if (!rc)
        rc = policy_arg_double(p, a, "skip_below", &s->skip_below, e);
    if (!rc)
        rc = policy_arg_double(p, a, "merge", &merge, e);
    if (!rc)
        rc = policy_arg_double(p, a, "prefetch", &prefetch, e);
    int pat = 1;
    if (!rc)
        rc = policy_arg_choice(p, a, "pattern", &pat, e);
    s->secret = pat == 1;
    double frac = 0;
    if (!rc)
        rc = policy_arg_double(p, a, "active_frac", &frac, e);
    if (rc) {
        free(s);
        return rc;
    }
    s->merge = merge != 0;
    s->prefetch = prefetch != 0;
    s->nblocks = (env->ffn_dim + s->block - 1) / s->block;
    s->miss = calloc((size_t)env->n_layers * env->max_len + 1, 1);
    s->active = calloc(env->n_layers, sizeof *s->active);
    s->prompt_active = calloc(env->n_layers, sizeof *s->prompt_active);
    s->pending = calloc(env->n_layers, sizeof *s->pending);
    s->emitted = calloc(env->n_layers, sizeof *s->emitted);
    s->topk = comet_topk_blocks(frac, s->nblocks);
    s->score = calloc(s->nblocks + 1, sizeof *s->score);
    s->pick = calloc(s->nblocks + 1, sizeof *s->pick);
    s->work = calloc(s->nblocks + 1, sizeof *s->work);
    if (!s->miss || !s->active || !s->prompt_active || !s->pending || !s->emitted || !s->score ||
        !s->pick || !s->work) {
        comet_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy comet: out of memory");
    }
    *st = s;
    return MS_OK;
}

static unsigned comet_needs(void *st, uint32_t pos) { return POLICY_NEED_FFN; }

static int comet_observe(void *st, const policy_obs *o, errbuf *e)
{
    comet_state *s = st;
    const policy_env *v = &s->env;
    if (!o->ffn)
        return err_set(e, MS_ERR_INPUT, "policy comet: the trace has no FFN activations");
    uint32_t act = 0;
    for (uint32_t b = 0; !s->topk && b < s->nblocks; b++) {
        uint32_t lo = b * s->block, hi = lo + s->block < v->ffn_dim ? lo + s->block : v->ffn_dim;
        for (uint32_t i = lo; i < hi; i++)
            if (o->ffn[i] > s->thr) {
                act++;
                break;
            }
    }
    if (s->topk)
        act = s->topk; /* A6: a public count, whatever the scores */
    s->active[o->layer] = act;
    if (o->pos < v->prompt_len)
        s->prompt_active[o->layer] += act;
    s->blocks_seen += s->nblocks;
    s->blocks_active += act;
    if ((double)act < s->skip_below * s->nblocks && o->layer + 1 < v->n_layers)
        s->miss[(size_t)(o->layer + 1) * v->max_len + o->pos] = 1; /* A3 */
    return MS_OK;
}

/* Marks the misses of layer l before pos as refilled; returns their count. */
static uint32_t take_misses(comet_state *s, uint32_t l, uint32_t pos)
{
    uint8_t *m = s->miss + (size_t)l * s->env.max_len;
    uint32_t n = 0;
    for (uint32_t j = 0; j < pos; j++)
        if (m[j] == 1) {
            m[j] = 2;
            n++;
        }
    return n;
}

static int comet_prefill(void *st, errbuf *e)
{
    comet_state *s = st;
    for (uint32_t l = 0; l < s->env.n_layers; l++)
        if (s->prefetch)
            s->pending[l] += take_misses(s, l, s->env.prompt_len);
    return MS_OK;
}

static int comet_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                        errbuf *e)
{
    comet_state *s = st;
    memset(keep, 1, (size_t)s->env.n_kv_heads * pos);
    s->pending[layer] += take_misses(s, layer, pos); /* A4: refilled when first needed */
    return MS_OK;
}

uint32_t comet_topk_blocks(double frac, uint32_t nblocks)
{
    if (frac <= 0)
        return 0;
    double a = ceil(frac * nblocks - 1e-9);
    return a < 1 ? 1 : a > nblocks ? nblocks : (uint32_t)a;
}

/* The neurons a token computes (active[i] = 1), from its gate pre-activations: the active blocks'
 * neurons, by the oracle rule (A1) or the top-k predictor (A6, the same scores the secure session
 * computes: the block means of w1·x). */
static int comet_ffn_pattern(void *st, uint32_t layer, const float *ffn_pre, uint8_t *active)
{
    comet_state *s = st;
    uint32_t F = s->env.ffn_dim, b = s->block;
    memset(active, 0, F);
    if (s->topk) {
        for (uint32_t k = 0; k < s->nblocks; k++) {
            uint32_t lo = k * b, hi = lo + b < F ? lo + b : F;
            double sum = 0;
            for (uint32_t i = lo; i < hi; i++)
                sum += ffn_pre[i];
            s->score[k] = (float)(sum / (hi - lo));
        }
        size_t n = policy_topk(s->score, NULL, s->nblocks, s->topk, s->pick, s->work);
        for (size_t j = 0; j < n; j++)
            for (uint32_t i = s->pick[j] * b; i < (s->pick[j] + 1) * b && i < F; i++)
                active[i] = 1;
        return 1;
    }
    for (uint32_t k = 0; k < s->nblocks; k++) {
        uint32_t lo = k * b, hi = lo + b < F ? lo + b : F, on = 0;
        for (uint32_t i = lo; i < hi; i++)
            on |= ffn_pre[i] > s->thr;
        for (uint32_t i = lo; on && i < hi; i++)
            active[i] = 1;
    }
    return 1;
}

static void emit_refill(comet_state *s, policy_emitter *pe, uint32_t misses)
{
    const policy_env *v = &s->env;
    uint32_t n = 2 * v->n_kv_heads * v->head_dim;
    if (misses == 0)
        return;
    s->refills += misses;
    /* COST: refill = k/v projection of the missing tokens' layer inputs with the fixed
     * W_k|W_v (ASSUMED A4): merged, one (misses×dim)·(dim×2·Hkv·d) matmul; else one each */
    if (s->merge) {
        policy_emit(pe, OP_MATMUL, 1, misses, v->dim, n, OP_NONE, OP_NONE, OPF_FIXED_B, 0, 0,
                    "comet.refill");
        s->refill_ops++;
    } else {
        for (uint32_t i = 0; i < misses; i++)
            policy_emit(pe, OP_MATMUL, 1, 1, v->dim, n, OP_NONE, OP_NONE, OPF_FIXED_B, 0, 0,
                        "comet.refill");
        s->refill_ops += misses;
    }
}

static int comet_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                      op_program *prog, errbuf *e)
{
    comet_state *s = st;
    const policy_env *v = &s->env;
    policy_emitter pe;
    opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t T = phase == PHASE_PREFILL ? kv_len : 1;
    if (s->topk) { /* A6: the ops the secure session runs (comet_ops.h "Comet on shares") */
        comet_shape sh = {v->dim, v->ffn_dim, s->block, s->nblocks, s->topk, s->secret};
        s->emitted[layer] = s->topk;
        int rc = comet_emit_ops(prog, &sh, phase, layer, T, OP_NONE, e);
        emit_refill(s, &pe, s->pending[layer]);
        s->pending[layer] = 0;
        return rc ? rc : policy_emit_done(&pe, "comet", e);
    }
    uint32_t act = phase == PHASE_PREFILL
                       ? (uint32_t)((s->prompt_active[layer] + kv_len - 1) / (kv_len ? kv_len : 1))
                       : s->active[layer];
    /* COST: Deja Vu-shaped predictor per token: (1×dim)·(dim×rank) and (1×rank)·(rank×blocks)
     * with fixed weights, a threshold comparison per block (ASSUMED A1; policies.md §1.11) */
    uint32_t h = policy_emit(&pe, OP_MATMUL, 1, T, v->dim, s->rank, OP_NONE, OP_NONE, OPF_FIXED_B,
                             0, 0, "comet.pred1");
    uint32_t lg = policy_emit(&pe, OP_MATMUL, 1, T, s->rank, s->nblocks, h, OP_NONE, OPF_FIXED_B, 0,
                              0, "comet.pred2");
    uint32_t on = policy_emit(&pe, OP_LT, 1, T, 0, s->nblocks, lg, OP_NONE, OPF_PUBLIC_B, 0, s->thr,
                              "comet.active");
    s->emitted[layer] = act;
    if (!s->secret) {
        /* COST: pattern public (A5): every block's bit revealed; the lowering then takes the
         * active rows of W1|W3 and columns of W2 by public index (local) */
        policy_emit(&pe, OP_REVEAL, 1, T, 0, s->nblocks, on, OP_NONE, 0, -1, 0, "comet.pattern");
    } else {
        /* COST: pattern secret, count public (A2): reveal the count, then gather the active
         * blocks' rows of W1|W3 and columns of W2 by one-hot (3·block·dim per block, fixed
         * operand); the lowering's FFN multiplies by these gathered (non-fixed) weights */
        policy_emit(&pe, OP_REVEAL, 1, T, 0, 1, on, OP_NONE, 0, -1, 0, "comet.count");
        if (act > 0)
            policy_emit(&pe, OP_GATHER, T, act, s->nblocks, 3 * s->block * v->dim, on, OP_NONE,
                        OPF_FIXED_B | OPF_NO_TRUNC, 0, 0, "comet.wgather");
    }
    emit_refill(s, &pe, s->pending[layer]);
    s->pending[layer] = 0;
    return policy_emit_done(&pe, "comet", e);
}

/* The neurons per token the lowering computes in layer: the active blocks' (A2, A5). */
static uint32_t comet_ffn_active(void *st, uint32_t layer, int *secret)
{
    comet_state *s = st;
    uint64_t n = (uint64_t)s->emitted[layer] * s->block;
    *secret = s->secret;
    return n < s->env.ffn_dim ? (uint32_t)n : s->env.ffn_dim;
}

static void put(run_metric *m, const char *name, double v, const char *unit)
{
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->unit, sizeof m->unit, "%s", unit);
    m->value = v;
}

static size_t comet_metrics(void *st, run_metric *out, size_t max)
{
    comet_state *s = st;
    if (max < 3)
        return 0;
    double frac = s->blocks_seen ? (double)s->blocks_active / (double)s->blocks_seen : 1.0;
    put(&out[0], "comet_ffn_active_frac", frac, "ratio");
    put(&out[1], "comet_kv_refills", (double)s->refills, "entries");
    put(&out[2], "comet_refill_ops", (double)s->refill_ops, "ops");
    return 3;
}

const policy_ops policy_comet = {
    .name = "comet",
    .summary = "predicted FFN block sparsity with KV refill of skipped tokens (details assumed)",
    .params = comet_params,
    .n_params = sizeof comet_params / sizeof comet_params[0],
    .init = comet_init,
    .fini = comet_fini,
    .needs = comet_needs,
    .observe = comet_observe,
    .prefill = comet_prefill,
    .select = comet_select,
    .emit_cost = comet_emit,
    .metrics = comet_metrics,
    .ffn_active = comet_ffn_active,
    .ffn_pattern = comet_ffn_pattern,
    .secure = &policy_comet_secure,
    .check = policy_check_dense,
};
