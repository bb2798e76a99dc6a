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
    if (rc)
        return rc;
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

/* ---- the selection ops (secpol.h), shared by the cost path and the secure session ---------- */

typedef struct h2o_em {
    op_program *p;
    int phase, failed;
    uint32_t layer;
} h2o_em;

static uint32_t h2o_tensor(h2o_em *w, const char *nm, op_role role, uint32_t b, uint32_t r,
                           uint32_t c)
{
    char full[48], tail[48];
    snprintf(tail, sizeof tail, "h2o.%s", nm);
    /* UINT32_MAX: the selection of every layer at once */
    op_layer_name(full, w->layer == UINT32_MAX ? -1 : (int)w->layer, tail);
    uint32_t id = op_tensor_add(w->p, full, role, DOM_ARITH, b, r, c);
    w->failed |= id == OP_NONE;
    return id;
}

static void h2o_op(h2o_em *w, int kind, uint32_t b, uint32_t m, uint32_t k, uint32_t n,
                   uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags,
                   int32_t iarg, double farg)
{
    op o = {.kind = (uint16_t)kind,
            .phase = (uint8_t)w->phase,
            .cat = OPC_POLICY,
            .layer = w->layer == UINT32_MAX ? -1 : (int16_t)w->layer,
            .group = -1,
            .batch = b,
            .m = m,
            .k = k,
            .n = n,
            .in = {in0, in1, in2},
            .out = out,
            .flags = flags,
            .iarg = iarg,
            .farg = farg};
    if (w->failed || out == OP_NONE || op_emit(w->p, &o) < 0)
        w->failed = 1;
}

int h2o_selects(const h2o_shape *s, int phase, uint32_t c, uint32_t t)
{
    if (s->heavy == 0)
        return 0; /* only the public recent window: nothing secret to choose */
    if (phase == PHASE_PREFILL)
        return (uint64_t)t > (uint64_t)s->heavy + s->recent;
    return (uint64_t)c + t > (uint64_t)s->heavy + s->recent;
}

/* Score accumulation: probs (H, t, n) → Σ over the KV head's G query heads and the t query
 * rows, added to score (Hkv, n, 1). */
static uint32_t h2o_accumulate(h2o_em *w, const h2o_shape *s, uint32_t t, uint32_t n,
                               uint32_t probs)
{
    uint32_t H = s->n_heads, Hkv = s->n_kv_heads, G = H / Hkv;
    /* (H, t, n) → (H, n, t): a transposition of each head (VIEW, local) */
    uint32_t pt = h2o_tensor(w, "probs_t", OPT_TEMP, 1, H * n, t);
    h2o_op(w, OP_VIEW, H * t, n, 0, 1, probs, OP_NONE, OP_NONE, pt, OPF_MERGE_HEADS, 0, 0);
    /* (Hkv·G, n, t) → (Hkv, n, G·t): a KV head's query heads side by side (VIEW, local) */
    uint32_t pg = h2o_tensor(w, "probs_g", OPT_TEMP, 1, Hkv * n, G * t);
    h2o_op(w, OP_VIEW, H, n, 0, t, pt, OP_NONE, OP_NONE, pg, OPF_MERGE_HEADS, 0, 0);
    /* COST: the column sums H2O accumulates, G·t adds per cached entry (policies.md §1.12
     * H2O "T·w adds"): a product with a public ones vector, local (kern.c k_matmul_pub) */
    uint32_t ones = h2o_tensor(w, "ones", OPT_PUBLIC, 1, G * t, 1);
    uint32_t cs = h2o_tensor(w, "colsum", OPT_TEMP, Hkv, n, 1);
    h2o_op(w, OP_MATMUL, 1, Hkv * n, G * t, 1, pg, ones, OP_NONE, cs, OPF_PUBLIC_B | OPF_NO_TRUNC,
           0, 0);
    /* the carried scores (row 0 of a decode step: the new entry's 0), bound by the session */
    uint32_t score = h2o_tensor(w, "score", OPT_CACHE, Hkv, n, 1);
    uint32_t acc = h2o_tensor(w, "acc", OPT_TEMP, Hkv, n, 1);
    h2o_op(w, OP_ADD, Hkv, n, 0, 1, score, cs, OP_NONE, acc, 0, 0, 0);
    return acc;
}

/* The table (Hkv, n, 2d+1) = [K | V | score] of the n attended rows: slices and transpositions
 * (VIEW, local). */
static uint32_t h2o_table(h2o_em *w, const h2o_shape *s, uint32_t n, uint32_t kc, uint32_t vc,
                          uint32_t score)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, F = 2 * d + 1;
    uint32_t stack = h2o_tensor(w, "stack", OPT_TEMP, Hkv, F, n);
    const uint32_t src[2] = {kc, vc};
    const char *nm[2][2] = {{"k_rows", "k_t"}, {"v_rows", "v_t"}};
    for (int i = 0; i < 2; i++) {
        uint32_t rows = h2o_tensor(w, nm[i][0], OPT_TEMP, Hkv, n, d);
        h2o_op(w, OP_VIEW, Hkv, n, 0, d, src[i], OP_NONE, OP_NONE, rows, 0, 0, 0);
        uint32_t tr = h2o_tensor(w, nm[i][1], OPT_TEMP, Hkv, d, n);
        h2o_op(w, OP_VIEW, Hkv * n, d, 0, 1, rows, OP_NONE, OP_NONE, tr, OPF_MERGE_HEADS, 0, 0);
        h2o_op(w, OP_VIEW, Hkv, d, 0, n, tr, OP_NONE, OP_NONE, stack, 0, (int32_t)(i * d), 0);
    }
    uint32_t srow = h2o_tensor(w, "score_row", OPT_TEMP, Hkv, 1, n);
    h2o_op(w, OP_VIEW, Hkv, 1, 0, n, score, OP_NONE, OP_NONE, srow, 0, 0, 0);
    h2o_op(w, OP_VIEW, Hkv, 1, 0, n, srow, OP_NONE, OP_NONE, stack, 0, (int32_t)(2 * d), 0);
    uint32_t table = h2o_tensor(w, "table", OPT_TEMP, Hkv, n, F);
    h2o_op(w, OP_VIEW, Hkv * F, n, 0, 1, stack, OP_NONE, OP_NONE, table, OPF_MERGE_HEADS, 0, 0);
    return table;
}

/* Rows [first] then [1, 1+rest) of src (Hkv, ≥, cols) as a (Hkv, 1+rest, cols) tensor (VIEWs). */
static uint32_t h2o_rows_first(h2o_em *w, uint32_t src, uint32_t Hkv, uint32_t first, uint32_t rest,
                               uint32_t cols, const char *nm)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%s_first", nm);
    snprintf(b, sizeof b, "%s_rest", nm);
    uint32_t one = h2o_tensor(w, a, OPT_TEMP, Hkv, 1, cols),
             more = h2o_tensor(w, b, OPT_TEMP, Hkv, rest, cols);
    uint32_t out = h2o_tensor(w, nm, OPT_TEMP, Hkv, rest + 1, cols);
    h2o_op(w, OP_VIEW, Hkv, 1, 0, cols, src, OP_NONE, OP_NONE, one, 0, (int32_t)first, 0);
    h2o_op(w, OP_VIEW, Hkv, rest, 0, cols, src, OP_NONE, OP_NONE, more, 0, 1, 0);
    h2o_op(w, OP_VIEW, Hkv, 1, 0, cols, one, OP_NONE, OP_NONE, out, 0, 0, 0);
    h2o_op(w, OP_VIEW, Hkv, rest, 0, cols, more, OP_NONE, OP_NONE, out, 0, 1, 0);
    return out;
}

/* A layer's part of the selection: the candidates' scores (prefill rows [0, P − R); decode the
 * latest position first — the entry leaving the recent window, row HH+1, or without a window
 * the new entry, row 0 — then the heavy rows 1 … HH) and the rows they come from (prefill: the
 * table's first P − R rows; decode: the candidates before and after each compacted slot). All
 * VIEWs: local. The latest candidate at slot 0 wins the arg-min's exact ties (kern.c k_rowmax:
 * the lower slot), as the plaintext rule evicts the later position. */
static void h2o_stage(h2o_em *w, const h2o_shape *s, int phase, uint32_t n, h2o_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1, hh = s->heavy;
    if (phase == PHASE_PREFILL) {
        uint32_t nc = n - s->recent;
        ids->cand = h2o_tensor(w, "cand", OPT_TEMP, Hkv, nc, 1);
        h2o_op(w, OP_VIEW, Hkv, nc, 0, 1, ids->score, OP_NONE, OP_NONE, ids->cand, 0, 0, 0);
        ids->cur = h2o_tensor(w, "cand_rows", OPT_TEMP, Hkv, nc, F);
        h2o_op(w, OP_VIEW, Hkv, nc, 0, F, ids->table, OP_NONE, OP_NONE, ids->cur, 0, 0, 0);
        return;
    }
    uint32_t first = s->recent ? hh + 1 : 0;
    ids->cand = h2o_rows_first(w, ids->score, Hkv, first, hh, 1, "cand");
    uint32_t rows = h2o_rows_first(w, ids->table, Hkv, first, hh, F, "cand_rows");
    ids->cur = h2o_tensor(w, "cur", OPT_TEMP, Hkv, hh, F);
    ids->next = h2o_tensor(w, "next", OPT_TEMP, Hkv, hh, F);
    h2o_op(w, OP_VIEW, Hkv, hh, 0, F, rows, OP_NONE, OP_NONE, ids->cur, 0, 0, 0);
    h2o_op(w, OP_VIEW, Hkv, hh, 0, F, rows, OP_NONE, OP_NONE, ids->next, 0, 1, 0);
}

int h2o_emit_ops(op_program *p, const h2o_shape *s, int phase, uint32_t layer, uint32_t c,
                 uint32_t t, uint32_t probs, uint32_t kc, uint32_t vc, h2o_ids *ids, errbuf *e)
{
    h2o_em w = {.p = p, .phase = phase, .layer = layer};
    h2o_ids tmp;
    ids = ids ? ids : &tmp;
    *ids = (h2o_ids){OP_NONE, OP_NONE, OP_NONE, OP_NONE, OP_NONE};
    uint32_t H = s->n_heads, Hkv = s->n_kv_heads, d = s->head_dim, n = c + t;
    if (!Hkv || H % Hkv || !t)
        return err_set(e, MS_ERR_INPUT, "policy h2o: %u heads over %u KV heads, %u new tokens", H,
                       Hkv, t);
    /* placeholders of the operands' shapes (the cost path, before the step is lowered) */
    if (probs == OP_NONE)
        probs = h2o_tensor(&w, "in_probs", OPT_CACHE, H, t, n);
    if (kc == OP_NONE)
        kc = h2o_tensor(&w, "in_k", OPT_CACHE, Hkv, n, d);
    if (vc == OP_NONE)
        vc = h2o_tensor(&w, "in_v", OPT_CACHE, Hkv, n, d);
    ids->score = h2o_accumulate(&w, s, t, n, probs);
    ids->table = h2o_table(&w, s, n, kc, vc, ids->score);
    if (h2o_selects(s, phase, c, t))
        h2o_stage(&w, s, phase, n, ids);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory emitting its ops")
                    : MS_OK;
}

/* Stacks the layers' (Hkv, rows, cols) tensors src[l] as rows l·rows … of (Hkv, L·rows, cols). */
static uint32_t h2o_stack(h2o_em *w, const h2o_ids *lay, uint32_t L, size_t field, const char *nm,
                          uint32_t Hkv, uint32_t rows, uint32_t cols)
{
    uint32_t all = h2o_tensor(w, nm, OPT_TEMP, Hkv, L * rows, cols);
    for (uint32_t l = 0; l < L; l++) {
        uint32_t src;
        memcpy(&src, (const char *)&lay[l] + field, sizeof src);
        h2o_op(w, OP_VIEW, Hkv, rows, 0, cols, src, OP_NONE, OP_NONE, all, 0, (int32_t)(l * rows),
               0);
    }
    return all;
}

/* Prefill: top-heavy of every layer's candidate scores at once, gathered. */
static void h2o_prefill_sel(h2o_em *w, const h2o_shape *s, uint32_t L, uint32_t P,
                            const h2o_ids *lay, h2o_sel *out)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1, nc = P - s->recent, hh = s->heavy;
    out->cand = h2o_stack(w, lay, L, offsetof(h2o_ids, cand), "cand", Hkv, nc, 1);
    uint32_t rows = h2o_stack(w, lay, L, offsetof(h2o_ids, cur), "cand_rows", Hkv, nc, F);
    /* the same values as (Hkv·L) instances of nc rows: the gather's batch */
    uint32_t tab = h2o_tensor(w, "gather_table", OPT_TEMP, Hkv * L, nc, F);
    h2o_op(w, OP_VIEW, Hkv * L, nc, 0, F, rows, OP_NONE, OP_NONE, tab, 0, 0, 0);
    /* COST: topk(P−R, HH) per layer and KV head, then gather(HH, P−R, 2d+1) of K|V|score
     * (policies.md §1.12 H2O: top-k + one-hot gather); every layer in the same rounds */
    out->onehot = h2o_tensor(w, "topk", OPT_TEMP, Hkv, L * hh, nc);
    h2o_op(w, OP_TOPK, Hkv, L, 0, nc, out->cand, OP_NONE, OP_NONE, out->onehot, 0, (int32_t)hh, 0);
    out->heavy = h2o_tensor(w, "heavy", OPT_TEMP, Hkv, L * hh, F);
    h2o_op(w, OP_GATHER, Hkv * L, hh, nc, F, out->onehot, tab, OP_NONE, out->heavy, OPF_NO_TRUNC, 0,
           0);
}

/* The first `keep` entries of the prefix sums of B vectors of n (x: B·n values): ⌈log2 n⌉
 * Hillis–Steele levels, each a shift (a slice appended at row s of a zero tensor: VIEWs) and an
 * ADD, all local: O(B·n·log n) element operations instead of a triangular product's O(B·n²). */
static uint32_t h2o_prefix(h2o_em *w, uint32_t x, uint32_t B, uint32_t n, uint32_t keep)
{
    uint32_t cur = h2o_tensor(w, "prefix0", OPT_TEMP, B, n, 1);
    h2o_op(w, OP_VIEW, B, n, 0, 1, x, OP_NONE, OP_NONE, cur, 0, 0, 0);
    for (uint32_t sh = 1; sh < n; sh *= 2) {
        uint32_t sl = h2o_tensor(w, "prefix_head", OPT_TEMP, B, n - sh, 1);
        h2o_op(w, OP_VIEW, B, n - sh, 0, 1, cur, OP_NONE, OP_NONE, sl, 0, 0, 0);
        uint32_t shifted = h2o_tensor(w, "prefix_shift", OPT_TEMP, B, n, 1);
        h2o_op(w, OP_VIEW, B, n - sh, 0, 1, sl, OP_NONE, OP_NONE, shifted, 0, (int32_t)sh, 0);
        uint32_t nxt = h2o_tensor(w, "prefix", OPT_TEMP, B, n, 1);
        h2o_op(w, OP_ADD, B, n, 0, 1, cur, shifted, OP_NONE, nxt, 0, 0, 0);
        cur = nxt;
    }
    uint32_t out = h2o_tensor(w, "prefix_kept", OPT_TEMP, B, keep, 1);
    h2o_op(w, OP_VIEW, B, keep, 0, 1, cur, OP_NONE, OP_NONE, out, 0, 0, 0);
    return out;
}

/* Decode: every layer's minimum of its HH+1 candidates evicted, the candidates compacted to HH
 * rows. */
static void h2o_decode_sel(h2o_em *w, const h2o_shape *s, uint32_t L, const h2o_ids *lay,
                           h2o_sel *out)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1, hh = s->heavy;
    out->cand = h2o_stack(w, lay, L, offsetof(h2o_ids, cand), "cand", Hkv, hh + 1, 1);
    uint32_t neg = h2o_tensor(w, "neg", OPT_TEMP, Hkv, L * (hh + 1), 1);
    /* the minimum as the maximum of −score: a public factor, no truncation (local) */
    h2o_op(w, OP_MUL_PUB, Hkv, L * (hh + 1), 0, 1, out->cand, OP_NONE, OP_NONE, neg, OPF_NO_TRUNC,
           0, -1.0);
    /* COST: arg-min over the HH+1 candidates of every layer and KV head, a one-hot from a tree
     * of comparisons (policies.md §1.12 H2O: the step's eviction is a top-k of one) */
    out->onehot = h2o_tensor(w, "argmin", OPT_TEMP, Hkv, L, hh + 1);
    h2o_op(w, OP_ARGMAX, Hkv, L, 0, hh + 1, neg, OP_NONE, OP_NONE, out->onehot, 0, 0, 0);
    /* the prefix sum of the one-hot (1 at and after the evicted candidate), then broadcast over
     * the row's 2d+1 columns (local) */
    uint32_t pre = h2o_prefix(w, out->onehot, Hkv * L, hh + 1, hh);
    uint32_t bc = h2o_tensor(w, "bcast", OPT_PUBLIC, 1, 1, F);
    uint32_t mask = h2o_tensor(w, "mask", OPT_TEMP, Hkv, L * hh, F);
    h2o_op(w, OP_MATMUL, 1, Hkv * L * hh, 1, F, pre, bc, OP_NONE, mask, OPF_PUBLIC_B | OPF_NO_TRUNC,
           0, 0);
    uint32_t cur = h2o_stack(w, lay, L, offsetof(h2o_ids, cur), "cur", Hkv, hh, F);
    uint32_t nxt = h2o_stack(w, lay, L, offsetof(h2o_ids, next), "next", Hkv, hh, F);
    /* COST: the oblivious compaction, one select (a multiplication) per element of the HH
     * compacted rows (policies.md §1.12 H2O gather) */
    out->heavy = h2o_tensor(w, "heavy", OPT_TEMP, Hkv, L * hh, F);
    h2o_op(w, OP_SELECT, Hkv, L * hh, 0, F, mask, nxt, cur, out->heavy, 0, 0, 0);
}

int h2o_emit_select(op_program *p, const h2o_shape *s, int phase, uint32_t n_layers, uint32_t c,
                    uint32_t t, const h2o_ids *lay, h2o_sel *out, errbuf *e)
{
    h2o_em w = {.p = p, .phase = phase, .layer = UINT32_MAX};
    h2o_sel tmp;
    out = out ? out : &tmp;
    *out = (h2o_sel){OP_NONE, OP_NONE, OP_NONE};
    if (!h2o_selects(s, phase, c, t))
        return MS_OK;
    if (phase == PHASE_PREFILL)
        h2o_prefill_sel(&w, s, n_layers, c + t, lay, out);
    else
        h2o_decode_sel(&w, s, n_layers, lay, out);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory emitting its ops")
                    : MS_OK;
}

int h2o_public(const op_tensor *t, uint64_t *out, size_t n)
{
    const char *dot = strstr(t->name, ".h2o.");
    const char *nm = dot ? dot + 5 : !strncmp(t->name, "h2o.", 4) ? t->name + 4 : NULL;
    if (!nm || t->role != OPT_PUBLIC)
        return 0;
    if (strcmp(nm, "ones") && strcmp(nm, "bcast"))
        return 0;
    for (size_t i = 0; i < n; i++) /* raw ring integers: the products are not truncated */
        out[i] = 1u;
    return 1;
}

static int h2o_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                    op_program *prog, errbuf *e)
{
    h2o_state *s = st;
    const policy_env *v = &s->env;
    h2o_shape sh = {v->n_heads, v->n_kv_heads, v->head_dim, s->hh, s->recent};
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
    .layer_local = 1,
    .emit_cost = h2o_emit,
    .secure = &policy_h2o_secure,
    .metric_stride = "16",
};
