/* policy_quest.c — Quest query-aware page selection (mit-han-lab/Quest,
 * evaluation/quest_attention.py, quest/models/llama.py).
 *
 * Pages of `page` consecutive cached positions keep per-channel key bounds M_p = max, m_p = min
 * (updated on insert). Each decode step scores every page by the upper bound of q·k,
 *   U_p = Σ_i max(q_i·m_p[i], q_i·M_p[i]),
 * keeps the top max(min_pages, budget/page) pages and attends to their tokens. The first
 * skip_layers layers stay dense (`_quest_skip_layer = 2`).
 * GQA: a KV head ranks pages by the sum of its query heads' bounds (MHA: exactly Quest). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static const policy_param quest_params[] = {
    {"page", "16", "page size in tokens (page_size / chunk_size)", NULL, 1, 1e6, 1},
    {"budget", "1024", "token budget per head (--token_budget)", NULL, 1, 1e9, 1},
    {"min_pages", "3", "pages kept at least (evaluation code)", NULL, 0, 1e9, 1},
    {"skip_layers", "2", "first layers kept dense (_quest_skip_layer)", NULL, 0, 1e6, 1},
};

typedef struct quest_state {
    policy_env env;
    uint32_t page, budget, min_pages, skip;
    uint32_t max_pages;
    float *mx, *mn;     /* [L][Hkv][max_pages][d] */
    float *score;       /* max_pages */
    uint32_t *work, *sel;
} quest_state;

static void quest_fini(void *st)
{
    quest_state *s = st;
    if (!s)
        return;
    free(s->mx);
    free(s->mn);
    free(s->score);
    free(s->work);
    free(s->sel);
    free(s);
}

static int quest_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    quest_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy quest: out of memory");
    s->env = *env;
    int rc = policy_arg_u32(&policy_quest, a, "page", &s->page, e);
    if (!rc)
        rc = policy_arg_u32(&policy_quest, a, "budget", &s->budget, e);
    if (!rc)
        rc = policy_arg_u32(&policy_quest, a, "min_pages", &s->min_pages, e);
    if (!rc)
        rc = policy_arg_u32(&policy_quest, a, "skip_layers", &s->skip, e);
    if (rc) {
        free(s);
        return rc;
    }
    s->max_pages = (env->max_len + s->page - 1) / s->page;
    uint32_t Lq = env->n_layers > s->skip ? env->n_layers - s->skip : 0;
    size_t n = (size_t)Lq * env->n_kv_heads * s->max_pages * env->head_dim;
    s->mx = malloc((n ? n : 1) * sizeof *s->mx);
    s->mn = malloc((n ? n : 1) * sizeof *s->mn);
    s->score = malloc((s->max_pages + 1) * sizeof *s->score);
    s->work = malloc((s->max_pages + 1) * sizeof *s->work);
    s->sel = malloc((s->max_pages + 1) * sizeof *s->sel);
    if (!s->mx || !s->mn || !s->score || !s->work || !s->sel) {
        quest_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy quest: out of memory for %zu page bounds", n);
    }
    *st = s;
    return MS_OK;
}

static unsigned quest_needs(void *st, uint32_t pos)
{
    quest_state *s = st;
    return POLICY_NEED_K | (pos >= s->env.prompt_len ? POLICY_NEED_Q : 0);
}

static float *bound(const quest_state *s, float *base, uint32_t layer, uint32_t g, uint32_t p)
{
    size_t i = (((size_t)(layer - s->skip) * s->env.n_kv_heads + g) * s->max_pages + p);
    return base + i * s->env.head_dim;
}

static int quest_observe(void *st, const policy_obs *o, errbuf *e)
{
    quest_state *s = st;
    if (o->layer < s->skip)
        return MS_OK;
    uint32_t d = s->env.head_dim, p = o->pos / s->page, fresh = o->pos % s->page == 0;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        float *mx = bound(s, s->mx, o->layer, g, p), *mn = bound(s, s->mn, o->layer, g, p);
        const float *k = o->k + (size_t)g * d;
        for (uint32_t i = 0; i < d; i++) {
            if (fresh || k[i] > mx[i])
                mx[i] = k[i];
            if (fresh || k[i] < mn[i])
                mn[i] = k[i];
        }
    }
    return MS_OK;
}

static uint32_t pages_kept(const quest_state *s)
{
    uint32_t k = s->budget / s->page;
    return k > s->min_pages ? k : s->min_pages;
}

static int quest_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                        errbuf *e)
{
    quest_state *s = st;
    const policy_env *v = &s->env;
    uint32_t d = v->head_dim, G = v->n_heads / v->n_kv_heads;
    uint32_t np = (pos + s->page - 1) / s->page, kp = pages_kept(s);
    if (layer < s->skip || kp >= np) {
        memset(keep, 1, (size_t)v->n_kv_heads * pos);
        return MS_OK;
    }
    for (uint32_t g = 0; g < v->n_kv_heads; g++) {
        for (uint32_t p = 0; p < np; p++) {
            const float *mx = bound(s, s->mx, layer, g, p), *mn = bound(s, s->mn, layer, g, p);
            float u = 0;
            for (uint32_t h = g * G; h < (g + 1) * G; h++) {
                const float *qh = q + (size_t)h * d;
                for (uint32_t i = 0; i < d; i++) {
                    float a = qh[i] * mx[i], b = qh[i] * mn[i];
                    u += a > b ? a : b;
                }
            }
            s->score[p] = u;
        }
        size_t k = policy_topk(s->score, NULL, np, kp, s->sel, s->work);
        uint8_t *row = keep + (size_t)g * pos;
        memset(row, 0, pos);
        for (size_t i = 0; i < k; i++) {
            uint32_t a = s->sel[i] * s->page, b = a + s->page < pos ? a + s->page : pos;
            memset(row + a, 1, b - a);
        }
    }
    return MS_OK;
}

static int quest_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                      op_program *prog, errbuf *e)
{
    quest_state *s = st;
    const policy_env *v = &s->env;
    if (layer < s->skip)
        return MS_OK;
    uint32_t d = v->head_dim, H = v->n_heads, Hkv = v->n_kv_heads;
    policy_emitter pe = {prog, phase, (int)layer, 0};
    if (phase == PHASE_PREFILL) {
        /* COST: page bounds of the prompt: max and min over each page, (S-1) comparisons per
         * channel each (policies.md §1.12 Quest "bound upkeep 2d cmp per new token") */
        uint32_t np = (kv_len + s->page - 1) / s->page;
        policy_emit(&pe, OP_MAX, Hkv, 2 * np * d, 0, s->page, OP_NONE, OP_NONE, 0, 0, 0,
                    "quest.bounds");
        return policy_emit_done(&pe, "quest", e);
    }
    uint32_t np = (kv_len + s->page - 1) / s->page, kp = pages_kept(s);
    /* COST: bound upkeep for the new key: max(M, k) and max(-m, -k): 2d comparisons (§1.12) */
    uint32_t bnd = policy_emit(&pe, OP_MAX, Hkv, 2 * d, 0, 2, OP_NONE, OP_NONE, 0, 0, 0,
                               "quest.upkeep");
    if (kp >= np)
        return policy_emit_done(&pe, "quest", e);
    /* COST: per page 2d products q_i·m_i, q_i·M_i (secret × secret), d max of the pairs, local
     * sum; topk over the pages; gather of the kept pages' K|V rows (§1.12 Quest) */
    uint32_t prod = policy_emit(&pe, OP_MUL, H, np, 0, 2 * d, bnd, OP_NONE, 0, 0, 0,
                                "quest.prod");
    uint32_t mx = policy_emit(&pe, OP_MAX, H, np * d, 0, 2, prod, OP_NONE, 0, 0, 0, "quest.max");
    if (H != Hkv)
        mx = policy_emit(&pe, OP_ADD, Hkv, 1, 0, np, mx, OP_NONE, 0, 0, 0, "quest.group");
    uint32_t oh = policy_emit(&pe, OP_TOPK, Hkv, 1, 0, np, mx, OP_NONE, 0, (int32_t)kp, 0,
                              "quest.topk");
    policy_emit(&pe, OP_GATHER, Hkv, kp, np, 2 * d * s->page, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                "quest.gather");
    return policy_emit_done(&pe, "quest", e);
}

const policy_ops policy_quest = {
    .name = "quest",
    .version = 1,
    .summary = "query-aware top pages by the min/max key bound (dense first layers)",
    .params = quest_params,
    .n_params = sizeof quest_params / sizeof quest_params[0],
    .init = quest_init,
    .fini = quest_fini,
    .needs = quest_needs,
    .observe = quest_observe,
    .select = quest_select,
    .emit_cost = quest_emit,
};
