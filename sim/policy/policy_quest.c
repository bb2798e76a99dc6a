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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "page_ops.h"
#include "pcheck.h"
#include "policy.h"

static const policy_param quest_params[] = {
    {"page", "16", "page size in tokens (page_size / chunk_size)", NULL, 1, 1e6, 1},
    {"budget", "1024", "token budget per head (--token_budget)", NULL, 1, 1e9, 1},
    {"min_pages", "3", "pages kept at least (evaluation code)", NULL, 0, 1e9, 1},
    {"skip_layers", "2", "first layers kept dense (_quest_skip_layer)", NULL, 0, 1e6, 1},
};

/* Page bounds at 7B shapes and 32K tokens are 2 × 30 layers × 32 heads × 2002 pages × 128
 * channels: 1.97 GB in float. When the replay can re-read keys (policy_env.rereads_k) they are
 * kept in half precision rounded outward (the max up, the min down: 0.98 GB), so the half
 * bound U'_p still bounds every q·k of the page from above, and the selection stays exactly
 * the float one: each page's score is known to within a proven error (below), pages that
 * are in or out whatever their exact score are decided on the half bound, and only the pages
 * near the k-th score are re-scored from their keys, as the float code scores them. The page
 * being filled stays in float.
 *
 * The closed pages' halves are stored as changes from the page before (per KV head, in page
 * order): a bitmap of the channels whose (max, min) pair differs, then those pairs. The select
 * reads the pages in order anyway, so it decodes as it scores; the values are the same halves,
 * the selection the same. Where keys keep channels from page to page (a synthetic trace's
 * content channels are ±σ, its sink and heavy channels mostly 0) this halves the bounds (7B
 * at 32K: 0.98 GB → about 0.5 GB); where every channel changes it costs d/8 bytes per page
 * more (3 % at d = 128). */
typedef struct quest_state {
    policy_env env;
    uint32_t page, budget, min_pages, skip;
    double frac; /* kv_budget F, or 0: round(F·T / page) pages of T cached entries, every layer */
    uint32_t max_pages;
    int half;           /* bounds in half precision (rereads_k) */
    float *mx, *mn;     /* float: [L][Hkv][max_pages][d]; half: the open page, [L][Hkv][d] */
    uint8_t **pool;     /* half: [L][Hkv] the closed pages' records, in page order */
    size_t *used, *cap; /* half: [L][Hkv] bytes of each pool written and allocated */
    uint32_t *closed;   /* half: [L][Hkv] pages recorded */
    uint16_t *last;     /* half: [L][Hkv][2d] the newest recorded page's halves (max, min) */
    uint16_t *cur;      /* half: 2d halves of the page being decoded (select) */
    uint8_t *wide;      /* half: [L][Hkv][max_pages] a bound beyond ±65504 (always re-scored) */
    float *score;       /* max_pages */
    float *lo, *hi;     /* half: max_pages score interval */
    float *kbuf;        /* half: page × d keys re-read */
    uint32_t *work, *sel, *cand, *inl, *idx;
    float *kmax, *qmax; /* [L] the largest |key| seen, |query| of the step (the ops' tolerance) */
} quest_state;

/* Every half's float value (policy_half_float), for the scoring loop. */
static float half_table[65536];
static int half_table_done;

/* Nonzero: bounds in float even when keys can be re-read (tests compare the two). */
int policy_quest_float_bounds;
/* A factor on the half scores' error bound (tests widen it so that most pages are re-scored). */
double policy_quest_slack = 1.0;
/* Nonzero: select() ranks its best page last (tests: a selection the ops do not make). */
int policy_quest_drop_best;

static void quest_fini(void *st)
{
    quest_state *s = st;
    if (!s)
        return;
    free(s->mx);
    free(s->mn);
    free(s->kmax);
    free(s->qmax);
    size_t lg =
        (size_t)(s->env.n_layers > s->skip ? s->env.n_layers - s->skip : 0) * s->env.n_kv_heads;
    for (size_t i = 0; s->pool && i < lg; i++)
        free(s->pool[i]);
    free(s->pool);
    free(s->used);
    free(s->cap);
    free(s->closed);
    free(s->last);
    free(s->cur);
    free(s->wide);
    free(s->score);
    free(s->lo);
    free(s->hi);
    free(s->kbuf);
    free(s->work);
    free(s->sel);
    free(s->cand);
    free(s->inl);
    free(s->idx);
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
    if (!rc)
        rc = policy_kv_budget(&policy_quest, a, &s->frac, e);
    if (rc) {
        free(s);
        return rc;
    }
    if (s->frac > 0) /* F counts every layer: dense first layers would exceed it alone */
        s->skip = 0;
    s->max_pages = (env->max_len + s->page - 1) / s->page;
    s->half = env->rereads_k && env->gather_k && !policy_quest_float_bounds;
    for (uint32_t h = 0; s->half && !half_table_done && h < 65536; h++)
        half_table[h] = policy_half_float((uint16_t)h);
    half_table_done |= s->half;
    uint32_t Lq = env->n_layers > s->skip ? env->n_layers - s->skip : 0;
    size_t lg = (size_t)Lq * env->n_kv_heads, n = lg * s->max_pages * env->head_dim;
    size_t nf = s->half ? lg * env->head_dim : n, mp = s->max_pages + 1;
    s->mx = malloc((nf ? nf : 1) * sizeof *s->mx);
    s->mn = malloc((nf ? nf : 1) * sizeof *s->mn);
    s->score = malloc(mp * sizeof *s->score);
    s->work = malloc(mp * sizeof *s->work);
    s->sel = malloc(mp * sizeof *s->sel);
    s->kmax = calloc(env->n_layers + 1, sizeof *s->kmax);
    s->qmax = calloc(env->n_layers + 1, sizeof *s->qmax);
    int ok = s->mx && s->mn && s->score && s->work && s->sel && s->kmax && s->qmax;
    if (s->half) {
        s->pool = calloc(lg + 1, sizeof *s->pool);
        s->used = calloc(lg + 1, sizeof *s->used);
        s->cap = calloc(lg + 1, sizeof *s->cap);
        s->closed = calloc(lg + 1, sizeof *s->closed);
        s->last = malloc((lg * 2 * env->head_dim + 1) * sizeof *s->last);
        s->cur = malloc((2 * (size_t)env->head_dim + 1) * sizeof *s->cur);
        s->wide = calloc(lg * s->max_pages + 1, 1);
        s->lo = malloc(mp * sizeof *s->lo);
        s->hi = malloc(mp * sizeof *s->hi);
        s->cand = malloc(mp * sizeof *s->cand);
        s->inl = malloc(mp * sizeof *s->inl);
        s->idx = malloc((size_t)s->page * sizeof *s->idx);
        s->kbuf = malloc(((size_t)s->page + 2) * env->head_dim * sizeof *s->kbuf);
        ok = ok && s->pool && s->used && s->cap && s->closed && s->last && s->cur && s->wide &&
             s->lo && s->hi && s->cand && s->inl && s->idx && s->kbuf;
    }
    if (!ok) {
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

/* The dense first layers keep no bounds: nothing of theirs is read. */
static unsigned quest_layer_needs(void *st, uint32_t layer, uint32_t pos)
{
    quest_state *s = st;
    return layer < s->skip ? 0 : quest_needs(st, pos);
}

/* Index of (layer, g, page p) among the selecting layers' pages. */
static size_t page_at(const quest_state *s, uint32_t layer, uint32_t g, uint32_t p)
{
    return ((size_t)(layer - s->skip) * s->env.n_kv_heads + g) * s->max_pages + p;
}

/* Float bounds of (layer, g, page p); in half mode the open page's. */
static float *bound(const quest_state *s, float *base, uint32_t layer, uint32_t g, uint32_t p)
{
    if (s->half)
        return base + ((size_t)(layer - s->skip) * s->env.n_kv_heads + g) * s->env.head_dim;
    return base + page_at(s, layer, g, p) * s->env.head_dim;
}

/* The page's running max and min with key k (fresh: the page's first key). */
static void bound_update(float *mx, float *mn, const float *k, uint32_t d, int fresh)
{
    if (fresh) {
        memcpy(mx, k, d * sizeof *mx);
        memcpy(mn, k, d * sizeof *mn);
        return;
    }
    policy_bounds_update(mx, mn, k, d);
}

/* Bytes of one page's record: the changed-channel bitmap, then 2 halves per changed channel. */
static size_t rec_max(uint32_t d) { return (d + 7) / 8 + (size_t)4 * d; }

/* Records closed page p of pool i from its float bounds (halves rounded outward), as changes
 * from the page before; 1 in *wide if a bound is beyond ±65504. */
static int page_close(quest_state *s, size_t i, const float *mx, const float *mn, int *wide)
{
    uint32_t d = s->env.head_dim;
    size_t nb = (d + 7) / 8;
    if (s->used[i] + rec_max(d) > s->cap[i]) { /* grows by half: the pools are most memory */
        size_t cap = s->cap[i] + s->cap[i] / 2, full = (size_t)s->max_pages * rec_max(d);
        cap = cap < 16 * rec_max(d) ? 16 * rec_max(d) : cap > full ? full : cap;
        uint8_t *np = realloc(s->pool[i], cap);
        if (!np)
            return 1;
        s->pool[i] = np;
        s->cap[i] = cap;
    }
    uint8_t *rec = s->pool[i] + s->used[i], *bits = rec, *at = rec + nb;
    uint16_t *last = s->last + i * 2 * d;
    int first = s->closed[i] == 0, w = 0;
    memset(bits, 0, nb);
    uint16_t *up = s->cur, *dn = up + d; /* scratch (select's decoding buffer) */
    policy_half_bounds(mx, mn, d, up, dn);
    for (uint32_t c = 0; c < d; c++) {
        uint16_t pair[2] = {up[c], dn[c]};
        w |= (pair[0] & 0x7c00u) == 0x7c00u || (pair[1] & 0x7c00u) == 0x7c00u;
        if (first || pair[0] != last[2 * c] || pair[1] != last[2 * c + 1]) {
            bits[c / 8] |= (uint8_t)(1u << (c % 8));
            memcpy(at, pair, sizeof pair);
            at += sizeof pair;
            last[2 * c] = pair[0];
            last[2 * c + 1] = pair[1];
        }
    }
    s->used[i] = (size_t)(at - s->pool[i]);
    s->closed[i]++;
    *wide = w;
    return 0;
}

/* Applies the record at *at to the decoded pair array cur (2d halves); returns past it. */
static const uint8_t *page_decode(const uint8_t *at, uint16_t *cur, uint32_t d)
{
    const uint8_t *bits = at;
    at += (d + 7) / 8;
    for (uint32_t c = 0; c < d; c++)
        if (bits[c / 8] >> (c % 8) & 1) {
            memcpy(cur + 2 * c, at, 2 * sizeof *cur);
            at += 2 * sizeof *cur;
        }
    return at;
}

static int quest_observe(void *st, const policy_obs *o, errbuf *e)
{
    quest_state *s = st;
    if (o->layer < s->skip)
        return MS_OK;
    uint32_t d = s->env.head_dim, p = o->pos / s->page, fresh = o->pos % s->page == 0;
    int full = (o->pos + 1) % s->page == 0; /* the page is complete */
    for (uint32_t i = 0; i < s->env.n_kv_heads * d; i++)
        s->kmax[o->layer] = fabsf(o->k[i]) > s->kmax[o->layer] ? fabsf(o->k[i]) : s->kmax[o->layer];
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        float *mx = bound(s, s->mx, o->layer, g, p), *mn = bound(s, s->mn, o->layer, g, p);
        bound_update(mx, mn, o->k + (size_t)g * d, d, fresh);
        if (!s->half || !full)
            continue;
        size_t i = (size_t)(o->layer - s->skip) * s->env.n_kv_heads + g;
        int wide;
        if (s->closed[i] != p)
            return err_set(e, MS_ERR_INTERNAL, "policy quest: page %u closed out of order", p);
        if (page_close(s, i, mx, mn, &wide))
            return err_set(e, MS_ERR_NOMEM, "policy quest: out of memory for page bounds");
        s->wide[page_at(s, o->layer, g, p)] = (uint8_t)wide;
    }
    return MS_OK;
}

/* Pages kept of a cache of n entries: max(min_pages, budget // page), or under kv_budget F
 * the page count nearest F·n / page, at least 1. */
static uint32_t pages_kept(const quest_state *s, uint32_t n)
{
    if (s->frac > 0) {
        double k = floor(s->frac * n / s->page + 0.5);
        return k < 1 ? 1 : k > 4294967295.0 ? UINT32_MAX : (uint32_t)k;
    }
    uint32_t k = s->budget / s->page;
    return k > s->min_pages ? k : s->min_pages;
}

/* The float score of a complete page from its keys (re-read): its bounds are the max and min
 * of the same keys observe() saw, so the score is bit-identical to the float code's. */
static int rescore(quest_state *s, uint32_t layer, uint32_t g, uint32_t p, const float *q, float *u)
{
    const policy_env *v = &s->env;
    uint32_t d = v->head_dim, G = v->n_heads / v->n_kv_heads;
    for (uint32_t i = 0; i < s->page; i++)
        s->idx[i] = p * s->page + i;
    if (v->gather_k(v->kv_ctx, layer, g, s->idx, s->page, s->kbuf))
        return 1;
    float *bx = s->kbuf + (size_t)s->page * d, *bn = bx + d;
    for (uint32_t i = 0; i < s->page; i++)
        bound_update(bx, bn, s->kbuf + (size_t)i * d, d, i == 0);
    *u = page_bound_score(q, bx, bn, g, G, d);
    return 0;
}

/* k-th largest of x[0..n) (1 ≤ k ≤ n), by policy_topk's order. */
static float kth(quest_state *s, const float *x, uint32_t n, uint32_t k)
{
    size_t m = policy_topk(x, NULL, n, k, s->sel, s->work);
    float t = INFINITY;
    for (size_t i = 0; i < m; i++)
        t = x[s->sel[i]] < t ? x[s->sel[i]] : t;
    return t;
}

/* Half mode: the float selection's kept pages of KV head g into s->sel, their count. */
static int select_half(quest_state *s, uint32_t layer, uint32_t g, uint32_t pos, const float *q,
                       uint32_t np, uint32_t kp, size_t *nsel)
{
    const policy_env *v = &s->env;
    uint32_t d = v->head_dim, G = v->n_heads / v->n_kv_heads, closed = pos / s->page;
    /* |U − U'| ≤ Σ|q_i|·(δM_i ∨ δm_i), δ ≤ 2^-10·|bound'| + 2^-24 (a half's spacing), plus the
     * float evaluation of both sums, each ≤ γ_n·Σ|terms| with n = G·d + 1 terms */
    double gam = (double)(G * d + 1) * 0x1p-24 / (1.0 - (double)(G * d + 1) * 0x1p-24);
    size_t pi = (size_t)(layer - s->skip) * v->n_kv_heads + g;
    const uint8_t *rec = s->pool[pi];
    uint16_t *cur = s->cur;
    for (uint32_t p = 0; p < np; p++) {
        if (p >= closed) { /* the open page: its float bounds */
            const float *mx = bound(s, s->mx, layer, g, p), *mn = bound(s, s->mn, layer, g, p);
            s->lo[p] = s->hi[p] = s->score[p] = page_bound_score(q, mx, mn, g, G, d);
            continue;
        }
        size_t at = page_at(s, layer, g, p);
        rec = page_decode(rec, cur, d);
        if (s->wide[at]) {
            s->lo[p] = -INFINITY;
            s->hi[p] = INFINITY;
            continue;
        }
        const float *hf = half_table;
        float u = 0;
        double S = 0, Q = 0;
        for (uint32_t h = g * G; h < (g + 1) * G; h++) {
            const float *qh = q + (size_t)h * d;
            for (uint32_t i = 0; i < d; i++) {
                float M = hf[cur[2 * i]], m = hf[cur[2 * i + 1]];
                float a = qh[i] * M, b = qh[i] * m, aq = fabsf(qh[i]);
                u += a > b ? a : b;
                float am = fabsf(M) > fabsf(m) ? fabsf(M) : fabsf(m); /* no NaN here */
                S += (double)aq * am;
                Q += aq;
            }
        }
        double eps = 0x1p-10 * S + 0x1p-24 * Q;
        eps += 2 * gam * (S + eps);
        eps = eps * 1.01 * policy_quest_slack + 1e-30;
        s->lo[p] = (float)((double)u - eps);
        s->hi[p] = (float)((double)u + eps);
        /* float rounding of lo/hi themselves: one more float ulp outward */
        s->lo[p] = nextafterf(s->lo[p], -INFINITY);
        s->hi[p] = nextafterf(s->hi[p], INFINITY);
    }
    /* in for sure: lo_p above the (kp+1)-th largest hi; out for sure: hi_p below the kp-th
     * largest lo; the rest re-scored exactly and ranked as the float code ranks them */
    float T = kth(s, s->lo, np, kp), H = kp + 1 <= np ? kth(s, s->hi, np, kp + 1) : -INFINITY;
    size_t n_in = 0, n_amb = 0;
    for (uint32_t p = 0; p < np; p++) {
        if (s->lo[p] > H) {
            s->inl[n_in++] = p;
        } else if (!(s->hi[p] < T)) {
            if (s->lo[p] != s->hi[p] && rescore(s, layer, g, p, q, &s->score[p]))
                return 1;
            s->cand[n_amb++] = p;
        }
    }
    size_t want = kp > n_in ? kp - n_in : 0;
    size_t m = policy_topk(s->score, s->cand, n_amb, want, s->sel, s->work);
    for (size_t i = 0; i < n_in; i++)
        s->sel[m + i] = s->inl[i];
    *nsel = m + n_in;
    return 0;
}

static int quest_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                        errbuf *e)
{
    quest_state *s = st;
    const policy_env *v = &s->env;
    uint32_t d = v->head_dim, G = v->n_heads / v->n_kv_heads;
    uint32_t np = (pos + s->page - 1) / s->page, kp = pages_kept(s, pos);
    if (layer < s->skip || kp >= np) {
        memset(keep, 1, (size_t)v->n_kv_heads * pos);
        return MS_OK;
    }
    s->qmax[layer] = 0; /* this step's, for its emit_cost's tolerance */
    for (uint32_t i = 0; i < v->n_heads * d; i++)
        s->qmax[layer] = fabsf(q[i]) > s->qmax[layer] ? fabsf(q[i]) : s->qmax[layer];
    for (uint32_t g = 0; g < v->n_kv_heads; g++) {
        size_t k;
        if (s->half) {
            if (select_half(s, layer, g, pos, q, np, kp, &k))
                return err_set(e, MS_ERR_INPUT, "policy quest: cannot re-read the keys of a page");
        } else {
            uint32_t best = 0;
            for (uint32_t p = 0; p < np; p++) {
                s->score[p] = page_bound_score(q, bound(s, s->mx, layer, g, p),
                                               bound(s, s->mn, layer, g, p), g, G, d);
                best = s->score[p] > s->score[best] ? p : best;
            }
            if (policy_quest_drop_best)
                s->score[best] = -INFINITY;
            k = policy_topk(s->score, NULL, np, kp, s->sel, s->work);
        }
        uint8_t *row = keep + (size_t)g * pos;
        memset(row, 0, pos);
        for (size_t i = 0; i < k; i++) {
            uint32_t a = s->sel[i] * s->page, b = a + s->page < pos ? a + s->page : pos;
            memset(row + a, 1, b - a);
        }
    }
    return MS_OK;
}

/* The ops' error bound against quest_select's float page scores (page_bounds_tol: each of the
 * d·G terms of a score from a rounded query and bound, ±u/2 each, u = 2^-frac, and truncated,
 * ±u; the float sum's γ_{dG} of its terms); twice that, for the two pages of a swap. */
static double quest_tol(const quest_state *s, uint32_t layer, int frac_bits)
{
    return page_bounds_tol(s->qmax[layer], s->kmax[layer], s->env.head_dim,
                           s->env.n_heads / s->env.n_kv_heads, frac_bits);
}

/* The page bounds are secret state "quest.bounds" (n_kv_heads, pages, 2·head_dim): per page the
 * channels' max M, then the negated min −m (so both keep up by a max). */
static int quest_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                      op_program *prog, errbuf *e)
{
    quest_state *s = st;
    const policy_env *v = &s->env;
    if (layer < s->skip)
        return MS_OK;
    uint32_t d = v->head_dim, H = v->n_heads, Hkv = v->n_kv_heads, S = s->page;
    policy_emitter pe;
    opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t bst = page_bounds_state(&pe, "quest", Hkv, s->max_pages, d);
    if (phase == PHASE_PREFILL) {
        page_bounds_prompt(&pe, "quest", bst, Hkv, kv_len, S, d);
        return policy_emit_done(&pe, "quest", e);
    }
    uint32_t np = (kv_len + S - 1) / S, kp = pages_kept(s, kv_len);
    if (kp < np)
        page_select(&pe, "quest", page_bounds_score(&pe, "quest", bst, H, Hkv, 0, np, d), H, Hkv, 0,
                    np, kp, S, d, kv_len, kv_len, quest_tol(s, layer, pcheck_frac_bits()));
    page_bounds_upkeep(&pe, "quest", bst, Hkv, kv_len, S, d, s->max_pages);
    return policy_emit_done(&pe, "quest", e);
}

/* The rows a decode step attends on shares: its ops gather kp whole pages of the cache
 * (page_select, a partial last page's missing rows biased out of the attention), kp·page rows
 * whichever pages the selection chose; a dense layer, or a step that keeps every page, gathers
 * nothing and attends every cached entry. The lowering attends these and the new entry, so
 * the costed shape is public: the same whether the partial last page is chosen or not. */
static void quest_attend(void *st, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                         uint32_t *rows)
{
    quest_state *s = st;
    uint32_t np = (kv_len + s->page - 1) / s->page, kp = pages_kept(s, kv_len);
    uint32_t R = layer < s->skip || kp >= np ? kv_len : kp * s->page;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++)
        rows[g] = R;
    (void)kept;
}

const policy_ops policy_quest = {
    .name = "quest",
    .summary = "query-aware top pages by the min/max key bound (dense first layers)",
    .params = quest_params,
    .n_params = sizeof quest_params / sizeof quest_params[0],
    .init = quest_init,
    .fini = quest_fini,
    .needs = quest_needs,
    .layer_needs = quest_layer_needs,
    .observe = quest_observe,
    .select = quest_select,
    .emit_cost = quest_emit,
    .attend = quest_attend,
    .stateless_select = 1,
    .budget_keys = "budget|min_pages|skip_layers",
};
