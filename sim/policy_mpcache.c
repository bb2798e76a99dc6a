/* policy_mpcache.c — MPCache (zwxandy/MPCache @55e401b,
 * llama_flash_attn_monkey_patch_compression.py; layer sharing from the _ls variant).
 *
 * Static (look-once) eviction at the end of the prompt, per layer: the last w = 0.2·P prompt
 * queries (0.1·P if P > 24000) vote; `threshold` keeps key j if the head-mean attention of any
 * window query on j is ≥ static_threshold (one set for all heads, HEAD code); `topk` keeps
 * topk(Σ_window attention, static_ratio·P) per KV head (commit 8b55d74); `none` keeps all.
 * Difference from the code: the window rows are the model's own attention (1/√d scaled, causal),
 * while the code recomputes them unscaled and unmasked.
 *
 * Dynamic selection at every decode step, per KV head, over K' = static set ∪ generated tokens
 * (n' entries in position order): 16-clusters of consecutive K' entries keep per-channel key
 * max/min; a 32-cluster is a pair of 16-clusters. Score = q·(α·r_max + (1-α)·r_min) (the
 * linearized Quest bound). Level 1: topk over the G1 = ⌈n'/32⌉ clusters, floor(G1·ratio1),
 * ∪ {0} ∪ {G1-1 if n' % 32 ≠ 0}. Level 2: the 16-clusters of the chosen 32-clusters compete,
 * topk floor(G2·ratio2) (G2 = ⌈n'/16⌉, capped at the candidates), ∪ {0} ∪ {G2-1 if n' % 32 ≠
 * 0}. The tokens of the chosen 16-clusters are attended.
 *
 * Layer sharing (layer_share = 1): layers 2k+1, k ≥ 1, reuse layer 2k's static set and dynamic
 * selection and cost nothing; layers 0 and 1 select for themselves. skip_first2 = 1 keeps
 * layers 0 and 1 dense. GQA: a KV head scores with the sum of its query heads' queries. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static const policy_param mpc_params[] = {
    {"alpha", "0.6", "weight of r_max in the linearized bound", NULL, 0, 1},
    {"ratio1", "0.5", "fraction of 32-clusters kept at level 1", NULL, 0, 1},
    {"ratio2", "0.2", "fraction of all 16-clusters kept at level 2", NULL, 0, 1},
    {"s1", "32", "level-1 cluster size (must be 2·s2)", NULL, 2, 1e6},
    {"s2", "16", "level-2 cluster size", NULL, 1, 1e6},
    {"static", "threshold", "static eviction at the prompt", "threshold|topk|none", 0, 0},
    {"static_threshold", "1e-4",
     "keep j if a window query's head-mean attention on j reaches this (triviaqa: 1e-4)", NULL,
     0, 1},
    {"static_ratio", "0.5", "static topk: kept fraction of the prompt per KV head", NULL, 0, 1},
    {"window_frac", "0.2", "static window as a fraction of the prompt (0.1 above 24000 tokens)",
     NULL, 0, 1},
    {"layer_share", "1", "1: layers 2k+1 (k ≥ 1) reuse layer 2k's selection", NULL, 0, 1},
    {"skip_first2", "0", "1: layers 0 and 1 stay dense", NULL, 0, 1},
};

enum { ST_THRESHOLD, ST_TOPK, ST_NONE };

typedef struct mpc_head {
    uint32_t *idx;     /* K' positions, in order */
    uint32_t n, cap;   /* entries, capacity */
    float *mx, *mn;    /* [cap/s2 + 1][d] 16-cluster bounds */
} mpc_head;

typedef struct mpc_state {
    policy_env env;
    double alpha, ratio1, ratio2, thr, sratio, wfrac;
    uint32_t s1, s2, window;
    int mode, share, skip2;
    uint8_t *pass;     /* [L][P] threshold votes, or NULL */
    float *vote;       /* [L][Hkv][P] topk votes, or NULL */
    mpc_head *head;    /* [L][Hkv] */
    uint8_t *prev;     /* last selection of the layer below (sharing), Hkv × max_len */
    float *c1, *c2, *qs, *kbuf;
    uint32_t *work, *sel1, *sel2, *cand;
    uint32_t *stat_count; /* [L][Hkv] static kept count, for costs */
} mpc_state;

static void mpc_fini(void *st)
{
    mpc_state *s = st;
    if (!s)
        return;
    if (s->head)
        for (size_t i = 0; i < (size_t)s->env.n_layers * s->env.n_kv_heads; i++) {
            free(s->head[i].idx);
            free(s->head[i].mx);
            free(s->head[i].mn);
        }
    free(s->head);
    free(s->pass);
    free(s->vote);
    free(s->prev);
    free(s->c1);
    free(s->c2);
    free(s->qs);
    free(s->kbuf);
    free(s->work);
    free(s->sel1);
    free(s->sel2);
    free(s->cand);
    free(s->stat_count);
    free(s);
}

static int mpc_args(mpc_state *s, const policy_args *a, errbuf *e)
{
    const policy_ops *p = &policy_mpcache;
    double share, skip2;
    int rc = policy_arg_double(p, a, "alpha", &s->alpha, e);
    if (!rc) rc = policy_arg_double(p, a, "ratio1", &s->ratio1, e);
    if (!rc) rc = policy_arg_double(p, a, "ratio2", &s->ratio2, e);
    if (!rc) rc = policy_arg_u32(p, a, "s1", &s->s1, e);
    if (!rc) rc = policy_arg_u32(p, a, "s2", &s->s2, e);
    if (!rc) rc = policy_arg_choice(p, a, "static", &s->mode, e);
    if (!rc) rc = policy_arg_double(p, a, "static_threshold", &s->thr, e);
    if (!rc) rc = policy_arg_double(p, a, "static_ratio", &s->sratio, e);
    if (!rc) rc = policy_arg_double(p, a, "window_frac", &s->wfrac, e);
    if (!rc) rc = policy_arg_double(p, a, "layer_share", &share, e);
    if (!rc) rc = policy_arg_double(p, a, "skip_first2", &skip2, e);
    if (rc)
        return rc;
    if (s->s1 != 2 * s->s2)
        return err_set(e, MS_ERR_INPUT,
                       "%s: error: policy mpcache needs s1 = 2·s2 (got s1 = %u, s2 = %u)\n"
                       "  hint: each level-1 cluster splits into two level-2 clusters",
                       a && a->path ? a->path : "<scenario>", s->s1, s->s2);
    s->share = share != 0;
    s->skip2 = skip2 != 0;
    return MS_OK;
}

static int mpc_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    mpc_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
    s->env = *env;
    int rc = mpc_args(s, a, e);
    if (rc) {
        free(s);
        return rc;
    }
    uint32_t P = env->prompt_len, L = env->n_layers, Hkv = env->n_kv_heads;
    /* w = 0.2·T0, 0.1·T0 if T0 > LARGE_TOKEN_NUM = 24000 */
    double wf = P > 24000 ? s->wfrac / 2 : s->wfrac;
    s->window = (uint32_t)(wf * P);
    size_t G2max = env->max_len / s->s2 + 4; /* + the forced clusters {0, last} */
    s->head = calloc((size_t)L * Hkv, sizeof *s->head);
    s->prev = malloc((size_t)Hkv * env->max_len + 1);
    s->c1 = malloc(G2max * sizeof *s->c1);
    s->c2 = malloc(G2max * sizeof *s->c2);
    s->qs = malloc((size_t)env->head_dim * sizeof *s->qs);
    s->kbuf = malloc((size_t)Hkv * env->head_dim * sizeof *s->kbuf);
    s->work = malloc((env->max_len + 1) * sizeof *s->work);
    s->sel1 = malloc(G2max * sizeof *s->sel1);
    s->sel2 = malloc(G2max * sizeof *s->sel2);
    s->cand = malloc(G2max * sizeof *s->cand);
    s->stat_count = calloc((size_t)L * Hkv, sizeof *s->stat_count);
    if (s->mode == ST_THRESHOLD)
        s->pass = calloc((size_t)L * P + 1, 1);
    else if (s->mode == ST_TOPK)
        s->vote = calloc((size_t)L * Hkv * P + 1, sizeof *s->vote);
    if (!s->head || !s->prev || !s->c1 || !s->c2 || !s->qs || !s->kbuf || !s->work ||
        !s->sel1 || !s->sel2 || !s->cand || !s->stat_count ||
        (s->mode == ST_THRESHOLD && !s->pass) || (s->mode == ST_TOPK && !s->vote)) {
        mpc_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
    }
    *st = s;
    return MS_OK;
}

static int dense_layer(const mpc_state *s, uint32_t l) { return s->skip2 && l < 2; }
static int shared_layer(const mpc_state *s, uint32_t l) { return s->share && l >= 2 && l % 2; }
static int in_window(const mpc_state *s, uint32_t pos)
{
    return pos < s->env.prompt_len && pos + s->window >= s->env.prompt_len;
}

static unsigned mpc_needs(void *st, uint32_t pos)
{
    mpc_state *s = st;
    if (pos >= s->env.prompt_len)
        return POLICY_NEED_K | POLICY_NEED_Q;
    return s->mode != ST_NONE && in_window(s, pos) ? POLICY_NEED_ATT : 0;
}

/* Appends position pos with key k (d floats) to a head's K' and its 16-cluster bounds. */
static int head_push(mpc_head *h, uint32_t s2, uint32_t d, uint32_t pos, const float *k)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? 2 * h->cap : 64;
        uint32_t *idx = realloc(h->idx, (size_t)cap * sizeof *idx);
        if (!idx)
            return MS_ERR_NOMEM;
        h->idx = idx;
        size_t nb = ((size_t)cap / s2 + 1) * d;
        float *mx = realloc(h->mx, nb * sizeof *mx);
        if (!mx)
            return MS_ERR_NOMEM;
        h->mx = mx;
        float *mn = realloc(h->mn, nb * sizeof *mn);
        if (!mn)
            return MS_ERR_NOMEM;
        h->mn = mn;
        h->cap = cap;
    }
    uint32_t c = h->n / s2;
    float *mx = h->mx + (size_t)c * d, *mn = h->mn + (size_t)c * d;
    int fresh = h->n % s2 == 0;
    for (uint32_t i = 0; i < d; i++) {
        if (fresh || k[i] > mx[i])
            mx[i] = k[i];
        if (fresh || k[i] < mn[i])
            mn[i] = k[i];
    }
    h->idx[h->n++] = pos;
    return MS_OK;
}

static int mpc_observe(void *st, const policy_obs *o, errbuf *e)
{
    mpc_state *s = st;
    const policy_env *v = &s->env;
    uint32_t P = v->prompt_len, H = v->n_heads, Hkv = v->n_kv_heads, n = o->pos + 1;
    if (o->pos >= P) {
        for (uint32_t g = 0; g < Hkv; g++)
            if (head_push(&s->head[(size_t)o->layer * Hkv + g], s->s2, v->head_dim, o->pos,
                          o->k + (size_t)g * v->head_dim))
                return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
        return MS_OK;
    }
    if (!o->att)
        return MS_OK;
    if (s->mode == ST_THRESHOLD) {
        uint8_t *pass = s->pass + (size_t)o->layer * P;
        for (uint32_t j = 0; j < n; j++) {
            double m = 0;
            for (uint32_t h = 0; h < H; h++)
                m += o->att[(size_t)h * n + j];
            if (m / H >= s->thr)
                pass[j] = 1;
        }
    } else {
        uint32_t G = H / Hkv;
        for (uint32_t h = 0; h < H; h++) {
            float *vt = s->vote + ((size_t)o->layer * Hkv + h / G) * P;
            for (uint32_t j = 0; j < n; j++)
                vt[j] += o->att[(size_t)h * n + j];
        }
    }
    return MS_OK;
}

/* Static set of (layer, g) into sel1 (sorted positions); returns the count. */
static uint32_t static_set(mpc_state *s, uint32_t l, uint32_t g)
{
    uint32_t P = s->env.prompt_len, n = 0;
    if (s->mode == ST_NONE || dense_layer(s, l)) {
        for (uint32_t j = 0; j < P; j++)
            s->work[j] = j;
        return P;
    }
    if (s->mode == ST_THRESHOLD) {
        const uint8_t *pass = s->pass + (size_t)l * P;
        for (uint32_t j = 0; j < P; j++)
            if (pass[j])
                s->work[n++] = j;
        return n;
    }
    uint32_t k = (uint32_t)(s->sratio * P);
    uint32_t *tmp = malloc(((size_t)P + 1) * sizeof *tmp);
    if (!tmp)
        return UINT32_MAX;
    n = (uint32_t)policy_topk(s->vote + ((size_t)l * s->env.n_kv_heads + g) * P, NULL, P, k,
                              s->work, tmp);
    free(tmp);
    return n;
}

/* Keys of prompt position j for the KV heads that keep it (kbuf: n_kv_heads × d). */
static int read_keys(const policy_env *v, uint32_t l, uint32_t j, const uint8_t *in, float *kbuf)
{
    if (v->get_k)
        return v->get_k(v->kv_ctx, l, j, kbuf);
    if (!v->gather_k)
        return 1;
    for (uint32_t g = 0; g < v->n_kv_heads; g++)
        if (in[(size_t)g * v->prompt_len + j] &&
            v->gather_k(v->kv_ctx, l, g, &j, 1, kbuf + (size_t)g * v->head_dim))
            return 1;
    return 0;
}

static int mpc_prefill(void *st, errbuf *e)
{
    mpc_state *s = st;
    const policy_env *v = &s->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, P = v->prompt_len;
    uint8_t *in = malloc((size_t)Hkv * P + 1); /* in[g·P + j]: j in head g's static set */
    if (!in)
        return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < v->n_layers; l++) {
        uint32_t src = shared_layer(s, l) ? l - 1 : l; /* odd layers reuse the static set */
        memset(in, 0, (size_t)Hkv * P);
        for (uint32_t g = 0; !rc && g < Hkv; g++) {
            uint32_t n = static_set(s, src, g);
            if (n == UINT32_MAX) {
                rc = err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
                break;
            }
            s->stat_count[(size_t)l * Hkv + g] = n;
            for (uint32_t i = 0; i < n; i++)
                in[(size_t)g * P + s->work[i]] = 1;
        }
        /* keys position by position (one read serves every KV head), in position order */
        for (uint32_t j = 0; !rc && j < P; j++) {
            int any = 0;
            for (uint32_t g = 0; g < Hkv; g++)
                any |= in[(size_t)g * P + j];
            if (!any)
                continue;
            if (read_keys(v, l, j, in, s->kbuf)) {
                rc = err_set(e, MS_ERR_INPUT, "policy mpcache: cannot read the prompt's keys");
                break;
            }
            for (uint32_t g = 0; !rc && g < Hkv; g++)
                if (in[(size_t)g * P + j] &&
                    head_push(&s->head[(size_t)l * Hkv + g], s->s2, d, j, s->kbuf + (size_t)g * d))
                    rc = err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
        }
    }
    free(in);
    return rc;
}

/* Score of a centroid mix α·max + (1-α)·min against the group query qs. */
static float mix_score(const mpc_state *s, const float *mx, const float *mn, const float *mx2,
                       const float *mn2)
{
    float a = (float)s->alpha, b = 1.0f - a, u = 0;
    for (uint32_t i = 0; i < s->env.head_dim; i++) {
        float hi = mx[i], lo = mn[i];
        if (mx2) {
            hi = mx2[i] > hi ? mx2[i] : hi;
            lo = mn2[i] < lo ? mn2[i] : lo;
        }
        u += s->qs[i] * (a * hi + b * lo);
    }
    return u;
}

/* Two-level selection for one KV head: marks the kept positions (< pos) in row. */
static void dynamic_select(mpc_state *s, const mpc_head *h, uint32_t pos, uint8_t *row)
{
    uint32_t d = s->env.head_dim, n = h->n, s2 = s->s2;
    while (n > 0 && h->idx[n - 1] >= pos)
        n--;
    if (n == 0)
        return;
    uint32_t G1 = (n + s->s1 - 1) / s->s1, G2 = (n + s2 - 1) / s2;
    int partial = n % s->s1 != 0;
    for (uint32_t c = 0; c < G1; c++) {
        const float *mx = h->mx + (size_t)2 * c * d, *mn = h->mn + (size_t)2 * c * d;
        int pair = 2 * c + 1 < G2;
        s->c1[c] = mix_score(s, mx, mn, pair ? mx + d : NULL, pair ? mn + d : NULL);
    }
    uint32_t k1 = (uint32_t)floor(G1 * s->ratio1);
    uint32_t n1 = (uint32_t)policy_topk(s->c1, NULL, G1, k1, s->sel1, s->work);
    /* ∪ {0} ∪ {G1-1 if partial}: mark in a small bitmap via cand */
    uint8_t *mark = (uint8_t *)s->cand; /* G1 ≤ G2 bytes fit in cand's storage */
    memset(mark, 0, G1);
    for (uint32_t i = 0; i < n1; i++)
        mark[s->sel1[i]] = 1;
    mark[0] = 1;
    if (partial)
        mark[G1 - 1] = 1;
    uint32_t nc = 0;
    for (uint32_t c = 0; c < G1; c++)
        if (mark[c]) {
            s->sel1[nc++] = 2 * c;
            if (2 * c + 1 < G2)
                s->sel1[nc++] = 2 * c + 1;
        }
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t c = s->sel1[i];
        s->c2[c] = mix_score(s, h->mx + (size_t)c * d, h->mn + (size_t)c * d, NULL, NULL);
    }
    uint32_t k2 = (uint32_t)floor(G2 * s->ratio2);
    uint32_t n2 = (uint32_t)policy_topk(s->c2, s->sel1, nc, k2, s->sel2, s->work);
    s->sel2[n2++] = 0;
    if (partial)
        s->sel2[n2++] = G2 - 1;
    for (uint32_t i = 0; i < n2; i++) {
        uint32_t c = s->sel2[i], end = (c + 1) * s2 < n ? (c + 1) * s2 : n;
        for (uint32_t t = c * s2; t < end; t++)
            row[h->idx[t]] = 1;
    }
}

static int mpc_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                      errbuf *e)
{
    mpc_state *s = st;
    const policy_env *v = &s->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, G = v->n_heads / Hkv;
    size_t sz = (size_t)Hkv * pos;
    if (dense_layer(s, layer)) {
        memset(keep, 1, sz);
        return MS_OK;
    }
    if (shared_layer(s, layer)) {
        memcpy(keep, s->prev, sz);
        return MS_OK;
    }
    memset(keep, 0, sz);
    for (uint32_t g = 0; g < Hkv; g++) {
        for (uint32_t i = 0; i < d; i++) {
            float acc = 0;
            for (uint32_t hq = g * G; hq < (g + 1) * G; hq++)
                acc += q[(size_t)hq * d + i];
            s->qs[i] = acc;
        }
        dynamic_select(s, &s->head[(size_t)layer * Hkv + g], pos, keep + (size_t)g * pos);
    }
    memcpy(s->prev, keep, sz);
    return MS_OK;
}

static int mpc_emit_static(mpc_state *s, policy_emitter *pe, uint32_t layer, uint32_t P)
{
    const policy_env *v = &s->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, w = s->window ? s->window : 1;
    uint32_t S = 0;
    for (uint32_t g = 0; g < Hkv; g++)
        S = s->stat_count[(size_t)layer * Hkv + g] > S ? s->stat_count[(size_t)layer * Hkv + g]
                                                       : S;
    if (s->mode == ST_THRESHOLD) {
        /* COST: head mean of the window rows (local), w·T comparisons with the public
         * threshold, OR-reduce as a local sum and one comparison per key, the count revealed
         * (public by the security model), compaction = one-hot of each kept slot × K|V
         * (policies.md §1.12 MPCache static) */
        uint32_t m = policy_emit(pe, OP_ADD, 1, w, 0, P, OP_NONE, OP_NONE, 0, 0, 0, "mpc.mean");
        uint32_t b = policy_emit(pe, OP_LT, 1, w, 0, P, m, OP_NONE, OPF_PUBLIC_B, 0, s->thr,
                                 "mpc.thr");
        uint32_t any = policy_emit(pe, OP_LT, 1, 1, 0, P, b, OP_NONE, OPF_PUBLIC_B, 0, 0.5,
                                   "mpc.or");
        policy_emit(pe, OP_REVEAL, 1, 1, 0, 1, any, OP_NONE, 0, -1, 0, "mpc.count");
        if (S > 0) {
            uint32_t oh = policy_emit(pe, OP_ONEHOT, 1, S, 0, P, any, OP_NONE, 0, 0, 0,
                                      "mpc.slots");
            policy_emit(pe, OP_GATHER, Hkv, S, P, 2 * d, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                        "mpc.compact");
        }
    } else if (s->mode == ST_TOPK && S > 0) {
        /* COST: window vote sums (local), topk(T, ratio·T) per KV head, gather (§1.8) */
        uint32_t vt = policy_emit(pe, OP_ADD, Hkv, w, 0, P, OP_NONE, OP_NONE, 0, 0, 0,
                                  "mpc.vote");
        uint32_t oh = policy_emit(pe, OP_TOPK, Hkv, 1, 0, P, vt, OP_NONE, 0, (int32_t)S, 0,
                                  "mpc.topk0");
        policy_emit(pe, OP_GATHER, Hkv, S, P, 2 * d, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                    "mpc.compact");
    }
    if (S == 0)
        S = P;
    /* COST: cluster bounds of the static set: max/min per channel over each 16-cluster, the
     * 32-cluster bounds from pairs, centroids α·r_max + (1-α)·r_min by public scalars */
    uint32_t G2 = (S + s->s2 - 1) / s->s2, G1 = (S + s->s1 - 1) / s->s1;
    uint32_t b2 = policy_emit(pe, OP_MAX, Hkv, 2 * G2 * d, 0, s->s2, OP_NONE, OP_NONE, 0, 0, 0,
                              "mpc.bound2");
    uint32_t b1 = policy_emit(pe, OP_MAX, Hkv, 2 * G1 * d, 0, 2, b2, OP_NONE, 0, 0, 0,
                              "mpc.bound1");
    policy_emit(pe, OP_MUL_PUB, Hkv, 2 * (G1 + G2), 0, d, b1, OP_NONE, 0, 0, s->alpha,
                "mpc.centroid");
    return MS_OK;
}

static int mpc_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                    op_program *prog, errbuf *e)
{
    mpc_state *s = st;
    const policy_env *v = &s->env;
    if (dense_layer(s, layer) || shared_layer(s, layer))
        return MS_OK; /* dense, or reusing layer 2k's indices: no policy work */
    policy_emitter pe = {prog, phase, (int)layer, 0};
    if (phase == PHASE_PREFILL) {
        mpc_emit_static(s, &pe, layer, kv_len);
        return policy_emit_done(&pe, "mpcache", e);
    }
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, d = v->head_dim;
    uint32_t n = 0;
    for (uint32_t g = 0; g < Hkv; g++) {
        const mpc_head *h = &s->head[(size_t)layer * Hkv + g];
        uint32_t c = h->n;
        while (c > 0 && h->idx[c - 1] >= kv_len)
            c--;
        n = c > n ? c : n;
    }
    if (n == 0)
        return MS_OK;
    uint32_t G1 = (n + s->s1 - 1) / s->s1, G2 = (n + s->s2 - 1) / s->s2;
    uint32_t k1 = (uint32_t)floor(G1 * s->ratio1), k2 = (uint32_t)floor(G2 * s->ratio2);
    /* COST: upkeep of the newest 16- and 32-cluster bounds (max/min with the new key: 4d
     * comparisons) and their two centroids (public scalars, local + truncation) (§1.12) */
    uint32_t up = policy_emit(&pe, OP_MAX, Hkv, 4 * d, 0, 2, OP_NONE, OP_NONE, 0, 0, 0,
                              "mpc.upkeep");
    uint32_t cen = policy_emit(&pe, OP_MUL_PUB, Hkv, 2, 0, d, up, OP_NONE, 0, 0, s->alpha,
                               "mpc.centroid");
    /* COST: level 1: q·c for every 32-cluster (one dot product, no max: the linearized bound),
     * topk(G1, floor(G1·ratio1)) (§1.8 dynamic) */
    uint32_t sc1 = policy_emit(&pe, OP_MATMUL, H, 1, d, G1, cen, OP_NONE, OPF_TRANS_B, 0, 0,
                               "mpc.sim1");
    if (k1 == 0 || k2 == 0)
        return policy_emit_done(&pe, "mpcache", e); /* only the public clusters {0, last} */
    uint32_t oh1 = policy_emit(&pe, OP_TOPK, Hkv, 1, 0, G1, sc1, OP_NONE, 0, (int32_t)k1, 0,
                               "mpc.topk1");
    /* COST: level 2: gather the two 16-centroids of each chosen 32-cluster (one-hot × table),
     * q·c for the 2·k1 candidates, topk(2·k1, floor(G2·ratio2)) */
    uint32_t cc = policy_emit(&pe, OP_GATHER, Hkv, k1, G1, 2 * d, oh1, cen, OPF_NO_TRUNC, 0, 0,
                              "mpc.cand");
    uint32_t sc2 = policy_emit(&pe, OP_MATMUL, H, 1, d, 2 * k1, cc, OP_NONE, OPF_TRANS_B, 0, 0,
                               "mpc.sim2");
    uint32_t kk = k2 < 2 * k1 ? k2 : 2 * k1;
    uint32_t oh2 = policy_emit(&pe, OP_TOPK, Hkv, 1, 0, 2 * k1, sc2, OP_NONE, 0, (int32_t)kk, 0,
                               "mpc.topk2");
    /* COST: compose the level-2 one-hot with the level-1 one-hot (integer matmul) and gather
     * the chosen 16-clusters' K|V rows (MPCache's onehot_k_gemv / token_gather) */
    uint32_t oh = policy_emit(&pe, OP_MATMUL, Hkv, kk, 2 * k1, G2, oh2, oh1, OPF_NO_TRUNC, 0, 0,
                              "mpc.onehot");
    policy_emit(&pe, OP_GATHER, Hkv, kk, G2, 2 * d * s->s2, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                "mpc.gather");
    return policy_emit_done(&pe, "mpcache", e);
}

const policy_ops policy_mpcache = {
    .name = "mpcache",
    .version = 1,
    .summary = "static look-once eviction + two-level clustered dynamic selection with the "
               "linearized bound; adjacent layers share indices",
    .params = mpc_params,
    .n_params = sizeof mpc_params / sizeof mpc_params[0],
    .init = mpc_init,
    .fini = mpc_fini,
    .needs = mpc_needs,
    .observe = mpc_observe,
    .prefill = mpc_prefill,
    .select = mpc_select,
    .emit_cost = mpc_emit,
};
