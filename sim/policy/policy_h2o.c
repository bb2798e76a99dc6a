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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "h2o_ops.h"
#include "protocols/base/simd.h"
#include "secpol.h"

static const policy_param h2o_params[] = {
    {"heavy_ratio", "0.1", "heavy-hitter budget as a fraction of the prompt (--heavy_ratio)", NULL,
     0, 1, 0},
    {"recent_ratio", "0.1", "recent-window budget as a fraction of the prompt (--recent_ratio)",
     NULL, 0, 1, 0},
    {"heavy", "0", "heavy-hitter budget in tokens (hh_size); 0: use heavy_ratio", NULL, 0, 1e9, 1},
    {"recent", "0", "recent budget in tokens (recent_size); 0: use recent_ratio", NULL, 0, 1e9, 1},
};

typedef struct h2o_state {
    policy_env env;
    uint32_t hh, recent;
    float *score;    /* [L][Hkv][max_len] accumulated attention */
    uint8_t *alive;  /* [L][Hkv][max_len] entry is in the cache */
    uint32_t *count; /* [L][Hkv] entries in the cache */
    uint32_t *work, *sel;
    h2o_ids *lay; /* [phase][L] the current step's per-layer tensors (emit_cost) */
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
    free(s->lay);
    free(s);
}

int h2o_budgets(const policy_env *env, const policy_args *a, uint32_t *heavy, uint32_t *recent,
                errbuf *e)
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
    double f = 0;
    if (!rc)
        rc = policy_kv_budget(&policy_h2o, a, &f, e);
    if (rc)
        return rc;
    if (f > 0) { /* kv_budget: round(F·P) entries, split evenly as the paper's 10 % + 10 % */
        uint32_t n = policy_budget_entries(f, env->prompt_len);
        *heavy = n / 2;
        *recent = n - n / 2;
        return MS_OK;
    }
    /* heavy_budget = int(heavy_ratio * T0) (modify_llama.py) */
    *heavy = hh ? hh : (uint32_t)(hr * env->prompt_len);
    *recent = rc_ ? rc_ : (uint32_t)(rr * env->prompt_len);
    return MS_OK;
}

static int h2o_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    uint32_t hh, rc_;
    int rc = h2o_budgets(env, a, &hh, &rc_, e);
    if (rc)
        return rc;
    h2o_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory");
    s->env = *env;
    s->hh = hh;
    s->recent = rc_;
    size_t n = (size_t)env->n_layers * env->n_kv_heads * env->max_len;
    s->score = calloc(n, sizeof *s->score);
    s->alive = calloc(n, 1);
    s->count = calloc((size_t)env->n_layers * env->n_kv_heads, sizeof *s->count);
    s->work = malloc(((size_t)env->max_len + 1) * sizeof *s->work);
    s->sel = malloc(((size_t)env->max_len + 1) * sizeof *s->sel);
    s->lay = calloc(2 * (size_t)env->n_layers + 1, sizeof *s->lay);
    if (!s->score || !s->alive || !s->count || !s->work || !s->sel || !s->lay) {
        h2o_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory for %zu scores", n);
    }
    *st = s;
    return MS_OK;
}

static unsigned h2o_needs(void *st, uint32_t pos) { return POLICY_NEED_ATT; }

/* The one branchy pass of the definition (policy.h) as two vector passes with the same
 * answer: the live minimum (dead entries read as +inf), then the last live entry holding it. */
uint32_t policy_h2o_victim(const float *sc, const uint8_t *alive, uint32_t end)
{
    uint32_t e4 = end / 4 * 4, j;
    const v4f inf = {INFINITY, INFINITY, INFINITY, INFINITY};
    v4f m = inf;
    for (j = 0; j < e4; j += 4) {
        v4f x;
        memcpy(&x, sc + j, sizeof x);
        v4i live = (v4i){alive[j], alive[j + 1], alive[j + 2], alive[j + 3]} != 0;
        x = (v4f)(((v4i)x & live) | ((v4i)inf & ~live));
        v4i lt = x < m;
        m = (v4f)(((v4i)x & lt) | ((v4i)m & ~lt));
    }
    float best = INFINITY;
    for (int i = 0; i < 4; i++)
        best = m[i] < best ? m[i] : best;
    for (; j < end; j++)
        best = alive[j] && sc[j] < best ? sc[j] : best;
    for (j = end; j > e4; j--)
        if (alive[j - 1] && sc[j - 1] == best)
            return j - 1;
    const v4f b4 = {best, best, best, best};
    for (j = e4; j > 0; j -= 4) {
        v4f x;
        memcpy(&x, sc + j - 4, sizeof x);
        v4i hit = (x == b4) & ((v4i){alive[j - 4], alive[j - 3], alive[j - 2], alive[j - 1]} != 0);
        if (hit[0] | hit[1] | hit[2] | hit[3])
            return hit[3] ? j - 1 : hit[2] ? j - 2 : hit[1] ? j - 3 : j - 4;
    }
    return UINT32_MAX;
}

/* Evicts the non-recent entry with the smallest score until the cache fits. */
static void h2o_evict(h2o_state *s, size_t base, uint32_t pos, uint32_t *count)
{
    uint32_t budget = s->hh + s->recent;
    uint32_t first_recent = pos + 1 >= s->recent ? pos + 1 - s->recent : 0;
    while (*count > budget) {
        uint32_t victim = policy_h2o_victim(s->score + base, s->alive + base, first_recent);
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
    uint32_t g1 = o->kv_hi ? o->kv_hi : v->n_kv_heads;
    for (uint32_t g = o->kv_lo; g < g1; g++) {
        size_t lg = (size_t)o->layer * v->n_kv_heads + g, base = lg * v->max_len;
        float *sc = s->score + base;
        for (uint32_t h = g * G; o->att && h < (g + 1) * G; h++)
            policy_add_row(sc, o->att + (size_t)h * n, n);
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
        memcpy(keep + (size_t)g * pos, s->alive + ((size_t)layer * v->n_kv_heads + g) * v->max_len,
               pos);
    return MS_OK;
}

static int h2o_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                    op_program *prog, errbuf *e)
{
    h2o_state *s = st;
    const policy_env *v = &s->env;
    h2o_shape sh = {v->n_heads, v->n_kv_heads, v->head_dim, s->hh, s->recent, 0, 0, 0, 0};
    /* the ops the secure session runs (secpol.h): every KV head keeps the same count */
    uint32_t c = 0, t = kv_len;
    if (phase == PHASE_DECODE) {
        t = 1;
        for (uint32_t g = 0; g < v->n_kv_heads; g++)
            c = kept[g] > c ? kept[g] : c;
    }
    h2o_ids *lay = s->lay + (phase == PHASE_DECODE ? v->n_layers : 0);
    int rc = h2o_emit_ops(prog, &sh, phase, layer, c, t, OP_NONE, OP_NONE, OP_NONE, &lay[layer], e);
    /* the layers' selections run together, after the last layer (the secure session's order) */
    if (!rc && layer + 1 == v->n_layers)
        rc = h2o_emit_select(prog, &sh, phase, v->n_layers, c, t, lay, NULL, e);
    return rc;
}

const policy_ops policy_h2o = {
    .name = "h2o",
    .summary = "heavy hitters (accumulated attention) + recent window, evicting every step",
    .params = h2o_params,
    .n_params = sizeof h2o_params / sizeof h2o_params[0],
    .init = h2o_init,
    .fini = h2o_fini,
    .needs = h2o_needs,
    .observe = h2o_observe,
    .prefill = h2o_prefill,
    .select = h2o_select,
    .layer_local = 1,
    .emit_cost = h2o_emit,
    .secure = &policy_h2o_secure,
    .budget_keys = "heavy_ratio|recent_ratio|heavy|recent",
};
