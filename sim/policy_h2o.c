/* policy_h2o.c — Heavy-Hitter Oracle (FMInference/H2O, h2o_hf/utils_real_drop/modify_llama.py).
 *
 * Score: per KV head, the cumulative column sum of the attention its query heads paid to each
 * cached entry, over every query seen so far (prompt and generated). Budgets are fractions of
 * the prompt length fixed at the prompt (heavy_ratio = recent_ratio = 0.1, h2o_hf/run_*.py), or
 * absolute sizes. At the end of the prompt the cache becomes top-heavy(score over [0, P-recent))
 * ∪ the last `recent` prompt tokens (real drop: evicted entries never come back). Each decode
 * step appends its token and, when the cache exceeds heavy+recent, evicts the non-recent entry
 * with the smallest score (ties: the later position goes first).
 *
 * GQA: the score of a KV head sums its G query heads (MHA: G = 1, the paper's setting). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static const policy_param h2o_params[] = {
    {"heavy_ratio", "0.1", "heavy-hitter budget as a fraction of the prompt (--heavy_ratio)",
     NULL, 0, 1},
    {"recent_ratio", "0.1", "recent-window budget as a fraction of the prompt (--recent_ratio)",
     NULL, 0, 1},
    {"heavy", "0", "heavy-hitter budget in tokens (hh_size); 0: use heavy_ratio", NULL, 0, 1e9},
    {"recent", "0", "recent budget in tokens (recent_size); 0: use recent_ratio", NULL, 0, 1e9},
};

typedef struct h2o_state {
    policy_env env;
    uint32_t hh, recent;
    float *score;     /* [L][Hkv][max_len] accumulated attention */
    uint8_t *alive;   /* [L][Hkv][max_len] entry is in the cache */
    uint32_t *count;  /* [L][Hkv] entries in the cache */
    uint32_t *work, *sel;
} h2o_state;

static void h2o_fini(void *st)
{
    h2o_state *s = st;
    if (!s)
        return;
    free(s->score);
    free(s->alive);
    free(s->count);
    free(s->work);
    free(s->sel);
    free(s);
}

static int h2o_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    double hr, rr;
    uint32_t hh, rc_;
    int rc = policy_arg_double(&policy_h2o, a, "heavy_ratio", &hr, e);
    if (!rc)
        rc = policy_arg_double(&policy_h2o, a, "recent_ratio", &rr, e);
    if (!rc)
        rc = policy_arg_u32(&policy_h2o, a, "heavy", &hh, e);
    if (!rc)
        rc = policy_arg_u32(&policy_h2o, a, "recent", &rc_, e);
    if (rc)
        return rc;
    h2o_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory");
    s->env = *env;
    /* heavy_budget = int(heavy_ratio * T0) (modify_llama.py) */
    s->hh = hh ? hh : (uint32_t)(hr * env->prompt_len);
    s->recent = rc_ ? rc_ : (uint32_t)(rr * env->prompt_len);
    size_t n = (size_t)env->n_layers * env->n_kv_heads * env->max_len;
    s->score = calloc(n, sizeof *s->score);
    s->alive = calloc(n, 1);
    s->count = calloc((size_t)env->n_layers * env->n_kv_heads, sizeof *s->count);
    s->work = malloc(((size_t)env->max_len + 1) * sizeof *s->work);
    s->sel = malloc(((size_t)env->max_len + 1) * sizeof *s->sel);
    if (!s->score || !s->alive || !s->count || !s->work || !s->sel) {
        h2o_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory for %zu scores", n);
    }
    *st = s;
    return MS_OK;
}

static unsigned h2o_needs(void *st, uint32_t pos) { return POLICY_NEED_ATT; }

/* Evicts the non-recent entry with the smallest score until the cache fits. */
static void h2o_evict(h2o_state *s, size_t base, uint32_t pos, uint32_t *count)
{
    uint32_t budget = s->hh + s->recent;
    uint32_t first_recent = pos + 1 >= s->recent ? pos + 1 - s->recent : 0;
    while (*count > budget) {
        uint32_t victim = UINT32_MAX;
        float best = INFINITY;
        for (uint32_t j = 0; j < first_recent; j++) {
            if (!s->alive[base + j])
                continue;
            float v = s->score[base + j];
            if (v <= best) { /* later position wins ties: it is evicted first */
                best = v;
                victim = j;
            }
        }
        if (victim == UINT32_MAX)
            return;
        s->alive[base + victim] = 0;
        (*count)--;
    }
}

static int h2o_observe(void *st, const policy_obs *o, errbuf *e)
{
    h2o_state *s = st;
    const policy_env *v = &s->env;
    uint32_t G = v->n_heads / v->n_kv_heads, n = o->pos + 1;
    for (uint32_t g = 0; g < v->n_kv_heads; g++) {
        size_t lg = (size_t)o->layer * v->n_kv_heads + g, base = lg * v->max_len;
        float *sc = s->score + base;
        for (uint32_t h = g * G; o->att && h < (g + 1) * G; h++) {
            const float *row = o->att + (size_t)h * n;
            for (uint32_t j = 0; j < n; j++)
                sc[j] += row[j];
        }
        s->alive[base + o->pos] = 1;
        s->count[lg]++;
        if (o->pos >= v->prompt_len)
            h2o_evict(s, base, o->pos, &s->count[lg]);
    }
    return MS_OK;
}

static int h2o_prefill(void *st, errbuf *e)
{
    h2o_state *s = st;
    const policy_env *v = &s->env;
    uint32_t P = v->prompt_len;
    if ((uint64_t)P <= (uint64_t)s->hh + s->recent)
        return MS_OK;
    uint32_t ncand = P - s->recent;
    for (size_t lg = 0; lg < (size_t)v->n_layers * v->n_kv_heads; lg++) {
        size_t base = lg * v->max_len;
        size_t k = policy_topk(s->score + base, NULL, ncand, s->hh, s->sel, s->work);
        memset(s->alive + base, 0, ncand);
        for (size_t i = 0; i < k; i++)
            s->alive[base + s->sel[i]] = 1;
        s->count[lg] = (uint32_t)k + s->recent;
    }
    return MS_OK;
}

static int h2o_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                      errbuf *e)
{
    h2o_state *s = st;
    const policy_env *v = &s->env;
    for (uint32_t g = 0; g < v->n_kv_heads; g++)
        memcpy(keep + (size_t)g * pos,
               s->alive + ((size_t)layer * v->n_kv_heads + g) * v->max_len, pos);
    return MS_OK;
}

static int h2o_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                    op_program *prog, errbuf *e)
{
    h2o_state *s = st;
    const policy_env *v = &s->env;
    policy_emitter pe = {prog, phase, (int)layer, 0};
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, d = v->head_dim;
    if (phase == PHASE_PREFILL) {
        /* COST: column sums of the prompt's causal attention: P·P local adds per head
         * (policies.md §1.12 H2O "T·w adds") */
        uint32_t acc = policy_emit(&pe, OP_ADD, H, kv_len, 0, kv_len, OP_NONE, OP_NONE, 0, 0, 0,
                                   "h2o.acc");
        if ((uint64_t)kv_len > (uint64_t)s->hh + s->recent && s->hh > 0) {
            uint32_t nc = kv_len - s->recent;
            /* COST: topk(T-R, HH) per KV head, then gather(HH, T-R, 2d) of K|V (§1.12) */
            uint32_t oh = policy_emit(&pe, OP_TOPK, Hkv, 1, 0, nc, acc, OP_NONE, 0,
                                      (int32_t)s->hh, 0, "h2o.topk");
            policy_emit(&pe, OP_GATHER, Hkv, s->hh, nc, 2 * d, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                        "h2o.gather");
        }
        return policy_emit_done(&pe, "h2o", e);
    }
    uint32_t kmax = 0;
    for (uint32_t g = 0; g < Hkv; g++)
        kmax = kept[g] > kmax ? kept[g] : kmax;
    /* COST: the step's attention row added to the scores: (kept+1) local adds per head */
    uint32_t acc = policy_emit(&pe, OP_ADD, H, 1, 0, kmax + 1, OP_NONE, OP_NONE, 0, 0, 0,
                               "h2o.acc");
    if ((uint64_t)kmax + 1 > (uint64_t)s->hh + s->recent) {
        /* COST: steady state evicts one entry: arg-min over the HH+1 non-recent candidates
         * (one-hot, tree of comparisons), then an oblivious compaction of the HH+R remaining
         * rows (K|V|score: 2d+1 per row) by a select per element (§1.12 H2O topk + gather) */
        uint32_t oh = policy_emit(&pe, OP_ARGMAX, Hkv, 1, 0, s->hh + 1, acc, OP_NONE, 0, 0, 0,
                                  "h2o.argmin");
        (void)oh; /* the row mask is its prefix sum, broadcast over the row: local */
        policy_emit(&pe, OP_SELECT, Hkv, s->hh + s->recent, 0, 2 * d + 1, OP_NONE, OP_NONE, 0,
                    0, 0, "h2o.compact");
    }
    return policy_emit_done(&pe, "h2o", e);
}

const policy_ops policy_h2o = {
    .name = "h2o",
    .version = 1,
    .summary = "heavy hitters (accumulated attention) + recent window, evicting every step",
    .params = h2o_params,
    .n_params = sizeof h2o_params / sizeof h2o_params[0],
    .init = h2o_init,
    .fini = h2o_fini,
    .needs = h2o_needs,
    .observe = h2o_observe,
    .prefill = h2o_prefill,
    .select = h2o_select,
    .emit_cost = h2o_emit,
};
