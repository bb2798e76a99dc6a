/* policy_tova.c — Token Omission Via Attention (schwartz-lab-NLP/TOVA, src/tova_cache.py).
 *
 * One index set per layer, shared by all heads. Whenever the layer's cache holds more than
 * cache_size entries, keep the top cache_size by s[j] = mean over heads of the newest query's
 * attention. At the end of the prompt that is one top-k over the prompt (the last prompt query's
 * row); during decoding the cache grows by one per step, so each step evicts exactly its
 * arg-min (possibly the new token itself; ties: the later position goes first). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static const policy_param tova_params[] = {
    {"cache_size", "512",
     "entries kept per layer (TOVA's only hyper-parameter; 512 is our default, matching "
     "StreamingLLM's recent window)",
     NULL, 1, 1e9, 1},
};

typedef struct tova_state {
    policy_env env;
    uint32_t cap;
    uint8_t *alive;  /* [L][max_len] */
    uint32_t *count; /* [L] */
    float *s;        /* max_len scratch: head-mean attention */
    uint32_t *work, *sel;
} tova_state;

static void tova_fini(void *st)
{
    tova_state *s = st;
    if (!s)
        return;
    free(s->alive);
    free(s->count);
    free(s->s);
    free(s->work);
    free(s->sel);
    free(s);
}

static int tova_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    uint32_t cap;
    int rc = policy_arg_u32(&policy_tova, a, "cache_size", &cap, e);
    double f = 0;
    if (!rc)
        rc = policy_kv_budget(&policy_tova, a, &f, e);
    if (rc)
        return rc;
    if (f > 0) /* kv_budget: round(F·P) entries per layer */
        cap = policy_budget_entries(f, env->prompt_len);
    tova_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy tova: out of memory");
    s->env = *env;
    s->cap = cap;
    s->alive = calloc((size_t)env->n_layers * env->max_len, 1);
    s->count = calloc(env->n_layers, sizeof *s->count);
    s->s = malloc((size_t)env->max_len * sizeof *s->s);
    s->work = malloc((size_t)env->max_len * sizeof *s->work);
    s->sel = malloc((size_t)env->max_len * sizeof *s->sel);
    if (!s->alive || !s->count || !s->s || !s->work || !s->sel) {
        tova_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy tova: out of memory");
    }
    *st = s;
    return MS_OK;
}

static unsigned tova_needs(void *st, uint32_t pos)
{
    tova_state *s = st;
    return pos + 1 >= s->env.prompt_len ? POLICY_NEED_ATT : 0;
}

static void head_mean(const tova_state *s, const float *att, uint32_t n)
{
    uint32_t H = s->env.n_heads;
    for (uint32_t j = 0; j < n; j++)
        s->s[j] = 0;
    for (uint32_t h = 0; h < H; h++)
        for (uint32_t j = 0; j < n; j++)
            s->s[j] += att[(size_t)h * n + j];
    for (uint32_t j = 0; j < n; j++)
        s->s[j] /= (float)H;
}

static int tova_observe(void *st, const policy_obs *o, errbuf *e)
{
    tova_state *s = st;
    uint8_t *alive = s->alive + (size_t)o->layer * s->env.max_len;
    alive[o->pos] = 1;
    s->count[o->layer]++;
    if (!o->att || s->count[o->layer] <= s->cap)
        return MS_OK;
    uint32_t n = o->pos + 1;
    head_mean(s, o->att, n);
    if (o->pos + 1 == s->env.prompt_len) {
        /* end of prompt: keep topk(s, cache_size) of the whole prompt */
        size_t k = policy_topk(s->s, NULL, n, s->cap, s->sel, s->work);
        memset(alive, 0, n);
        for (size_t i = 0; i < k; i++)
            alive[s->sel[i]] = 1;
        s->count[o->layer] = (uint32_t)k;
        return MS_OK;
    }
    while (s->count[o->layer] > s->cap) {
        uint32_t victim = UINT32_MAX;
        float best = INFINITY;
        for (uint32_t j = 0; j < n; j++)
            if (alive[j] && s->s[j] <= best) {
                best = s->s[j];
                victim = j;
            }
        if (victim == UINT32_MAX)
            break;
        alive[victim] = 0;
        s->count[o->layer]--;
    }
    return MS_OK;
}

static int tova_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                       errbuf *e)
{
    tova_state *s = st;
    const uint8_t *alive = s->alive + (size_t)layer * s->env.max_len;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++)
        memcpy(keep + (size_t)g * pos, alive, pos);
    return MS_OK;
}

static int tova_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                     op_program *prog, errbuf *e)
{
    tova_state *s = st;
    const policy_env *v = &s->env;
    policy_emitter pe;
    opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t d = v->head_dim, Hkv = v->n_kv_heads;
    if (phase == PHASE_PREFILL) {
        if (kv_len <= s->cap)
            return MS_OK;
        /* COST: head mean of the last prompt row (local adds), topk(T, B) and a gather of the
         * B kept rows of every KV head (policies.md §1.12 TOVA "topk(T, B) at prompt end") */
        uint32_t m = policy_emit(&pe, OP_ADD, 1, v->n_heads, 0, kv_len, OP_NONE, OP_NONE, 0, 0, 0,
                                 "tova.mean");
        uint32_t oh = policy_emit(&pe, OP_TOPK, 1, 1, 0, kv_len, m, OP_NONE, 0, (int32_t)s->cap, 0,
                                  "tova.topk");
        policy_emit(&pe, OP_GATHER, Hkv, s->cap, kv_len, 2 * d, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                    "tova.gather");
        return policy_emit_done(&pe, "tova", e);
    }
    uint32_t n = kept[0] + 1;
    if (n <= s->cap)
        return MS_OK;
    /* COST: head mean (H·n local adds), arg-min over the n entries (n-1 comparisons,
     * ⌈log2 n⌉ rounds), oblivious compaction of the remaining rows of every KV head
     * (§1.5: "In MPC the steady-state step is an arg-min over T") */
    uint32_t m =
        policy_emit(&pe, OP_ADD, 1, v->n_heads, 0, n, OP_NONE, OP_NONE, 0, 0, 0, "tova.mean");
    uint32_t oh = policy_emit(&pe, OP_ARGMAX, 1, 1, 0, n, m, OP_NONE, 0, 0, 0, "tova.argmin");
    (void)oh; /* the row mask is its prefix sum, broadcast over the row: local */
    policy_emit(&pe, OP_SELECT, Hkv, n - 1, 0, 2 * d, OP_NONE, OP_NONE, 0, 0, 0, "tova.compact");
    return policy_emit_done(&pe, "tova", e);
}

const policy_ops policy_tova = {
    .name = "tova",
    .summary = "per-layer top cache_size by head-averaged attention of the newest query",
    .params = tova_params,
    .n_params = sizeof tova_params / sizeof tova_params[0],
    .init = tova_init,
    .fini = tova_fini,
    .needs = tova_needs,
    .observe = tova_observe,
    .select = tova_select,
    .emit_cost = tova_emit,
    .budget_keys = "cache_size",
};
