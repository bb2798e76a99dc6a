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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/base/simd.h"
#include "protocols/program/kern.h"
#include "policy.h"
#include "secpol.h"

static const policy_param mpcache_params[] = {
    {"alpha", "0.6", "weight of r_max in the linearized bound", NULL, 0, 1, 0},
    {"ratio1", "0.5", "fraction of 32-clusters kept at level 1", NULL, 0, 1, 0},
    {"ratio2", "0.2", "fraction of all 16-clusters kept at level 2", NULL, 0, 1, 0},
    {"s1", "32", "level-1 cluster size (must be 2·s2)", NULL, 2, 1e6, 1},
    {"s2", "16", "level-2 cluster size", NULL, 1, 1e6, 1},
    {"static", "threshold", "static eviction at the prompt", "threshold|topk|none", 0, 0, 0},
    {"static_threshold", "1e-4",
     "keep j if a window query's head-mean attention on j reaches this (triviaqa: 1e-4)", NULL, 0,
     1, 0},
    {"static_ratio", "0.5", "static topk: kept fraction of the prompt per KV head", NULL, 0, 1, 0},
    {"window_frac", "0.2", "static window as a fraction of the prompt (0.1 above 24000 tokens)",
     NULL, 0, 1, 0},
    {"layer_share", "1", "1: layers 2k+1 (k ≥ 1) reuse layer 2k's selection", NULL, 0, 1, 0},
    {"skip_first2", "0", "1: layers 0 and 1 stay dense", NULL, 0, 1, 0},
};

enum { ST_THRESHOLD, ST_TOPK, ST_NONE };

/* A closed cluster is scored only through its mix α·max + (1-α)·min (mix_score), so that is
 * what is kept of it: d floats per 16-cluster and per 32-cluster instead of a max and a min
 * per 16-cluster (a quarter less), the running bounds only for the pair being filled. Mixes
 * are stored MIX_W clusters to a block, channel-major ([block][d][MIX_W]), so that a select
 * scores MIX_W clusters at once (one AVX-512 register, or four SSE ones), each lane summing
 * its channels in order as mix_score does: the same float score on either path. */
#define MIX_W 16

typedef struct mpcache_head {
    uint32_t *idx;   /* K' positions, in order */
    uint32_t n, cap; /* entries, capacity */
    float *mix2;     /* blocks of the closed 16-clusters' mixes (room for cap/s2 + 1) */
    float *mix1;     /* blocks of the closed 32-clusters' mixes (room for cap/s1 + 1) */
    float *run;      /* [4][d]: max and min of the open 32-cluster's halves (mx0 mx1 mn0 mn1) */
} mpcache_head;

typedef struct mpcache_state {
    policy_env env;
    double alpha, ratio1, ratio2, thr, sratio, wfrac;
    uint32_t s1, s2, window;
    int mode, share, skip2;
    uint8_t *pass;      /* [L][P] threshold votes, or NULL */
    double *colsum;     /* POLICY_SPAN_MAX × (P + 1): threshold mode, the head sums of a prompt
                         * row, at slot pos % POLICY_SPAN_MAX (a span observes its rows KV head
                         * by KV head) */
    float *vote;        /* [L][Hkv][P] topk votes, or NULL */
    mpcache_head *head; /* [L][Hkv] */
    uint8_t *prev;      /* last selection of the layer below (sharing), Hkv × max_len */
    float *c1, *c2, *qs, *kbuf;
    uint32_t *work, *sel1, *sel2, *cand;
    uint32_t *stat_count; /* [L][Hkv] static kept count, for costs */
    mpcache_ids *ids;     /* [L] the current decode step's ops per layer (emit_cost) */
} mpcache_state;

static void mpcache_fini(void *st)
{
    mpcache_state *s = st;
    if (!s)
        return;
    if (s->head)
        for (size_t i = 0; i < (size_t)s->env.n_layers * s->env.n_kv_heads; i++) {
            free(s->head[i].idx);
            free(s->head[i].mix2);
            free(s->head[i].mix1);
            free(s->head[i].run);
        }
    free(s->head);
    free(s->pass);
    free(s->colsum);
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
    free(s->ids);
    free(s);
}

static int mpcache_args(mpcache_state *s, const policy_args *a, errbuf *e)
{
    const policy_ops *p = &policy_mpcache;
    double share, skip2;
    int rc = policy_arg_double(p, a, "alpha", &s->alpha, e);
    if (!rc)
        rc = policy_arg_double(p, a, "ratio1", &s->ratio1, e);
    if (!rc)
        rc = policy_arg_double(p, a, "ratio2", &s->ratio2, e);
    if (!rc)
        rc = policy_arg_u32(p, a, "s1", &s->s1, e);
    if (!rc)
        rc = policy_arg_u32(p, a, "s2", &s->s2, e);
    if (!rc)
        rc = policy_arg_choice(p, a, "static", &s->mode, e);
    if (!rc)
        rc = policy_arg_double(p, a, "static_threshold", &s->thr, e);
    if (!rc)
        rc = policy_arg_double(p, a, "static_ratio", &s->sratio, e);
    if (!rc)
        rc = policy_arg_double(p, a, "window_frac", &s->wfrac, e);
    if (!rc)
        rc = policy_arg_double(p, a, "layer_share", &share, e);
    if (!rc)
        rc = policy_arg_double(p, a, "skip_first2", &skip2, e);
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

static int mpcache_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    mpcache_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
    s->env = *env;
    int rc = mpcache_args(s, a, e);
    if (rc) {
        free(s);
        return rc;
    }
    uint32_t P = env->prompt_len, L = env->n_layers, Hkv = env->n_kv_heads;
    /* w = 0.2·T0, 0.1·T0 if T0 > LARGE_TOKEN_NUM = 24000 */
    double wf = P > 24000 ? s->wfrac / 2 : s->wfrac;
    s->window = (uint32_t)(wf * P);
    size_t G2max = env->max_len / s->s2 + 4 + MIX_W; /* + the forced clusters {0, last}, and
                                                      * a whole block of scores */
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
    s->ids = calloc((size_t)L + 1, sizeof *s->ids);
    if (s->mode == ST_THRESHOLD) {
        s->pass = calloc((size_t)L * P + 1, 1);
        s->colsum = malloc(POLICY_SPAN_MAX * ((size_t)P + 1) * sizeof *s->colsum);
    } else if (s->mode == ST_TOPK)
        s->vote = calloc((size_t)L * Hkv * P + 1, sizeof *s->vote);
    if (!s->head || !s->prev || !s->c1 || !s->c2 || !s->qs || !s->kbuf || !s->work || !s->sel1 ||
        !s->sel2 || !s->cand || !s->stat_count || !s->ids ||
        (s->mode == ST_THRESHOLD && (!s->pass || !s->colsum)) || (s->mode == ST_TOPK && !s->vote)) {
        mpcache_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
    }
    *st = s;
    return MS_OK;
}

static int dense_layer(const mpcache_state *s, uint32_t l) { return s->skip2 && l < 2; }
static int shared_layer(const mpcache_state *s, uint32_t l) { return s->share && l >= 2 && l % 2; }
static int in_window(const mpcache_state *s, uint32_t pos)
{
    return pos < s->env.prompt_len && pos + s->window >= s->env.prompt_len;
}

static unsigned mpcache_needs(void *st, uint32_t pos)
{
    mpcache_state *s = st;
    if (pos >= s->env.prompt_len)
        return POLICY_NEED_K | POLICY_NEED_Q;
    return s->mode != ST_NONE && in_window(s, pos) ? POLICY_NEED_ATT : 0;
}

/* Layers that select nothing of their own (dense, or reusing layer l-1's selection) keep no K'
 * and read nothing from the trace. */
static int own_layer(const mpcache_state *s, uint32_t l)
{
    return !dense_layer(s, l) && !shared_layer(s, l);
}

static unsigned mpcache_layer_needs(void *st, uint32_t layer, uint32_t pos)
{
    return own_layer(st, layer) ? mpcache_needs(st, pos) : 0;
}

/* Floats of the mix blocks holding clusters 0 … n-1. */
static size_t mix_len(size_t n, uint32_t d) { return (n + MIX_W - 1) / MIX_W * MIX_W * d; }

/* Grows *p from the blocks of n0 clusters to those of n (the new ones zero). */
static int mix_grow(float **p, size_t n0, size_t n, uint32_t d)
{
    size_t a = mix_len(n0, d), b = mix_len(n, d);
    if (b <= a && *p)
        return MS_OK;
    float *q = realloc(*p, (b ? b : 1) * sizeof *q);
    if (!q)
        return MS_ERR_NOMEM;
    memset(q + a, 0, (b - a) * sizeof *q);
    *p = q;
    return MS_OK;
}

/* Room for cap entries of a head's K' and their clusters' mixes. */
static int head_reserve(mpcache_head *h, uint32_t s2, uint32_t d, uint32_t cap)
{
    if (cap > h->cap) {
        uint32_t *idx = realloc(h->idx, (size_t)cap * sizeof *idx);
        if (!idx)
            return MS_ERR_NOMEM;
        h->idx = idx;
        if (!h->run && !(h->run = malloc(4 * (size_t)d * sizeof *h->run)))
            return MS_ERR_NOMEM;
        size_t c0 = h->cap ? (size_t)h->cap / s2 + 1 : 0;
        size_t p0 = h->cap ? (size_t)h->cap / (2 * s2) + 1 : 0;
        if (mix_grow(&h->mix2, c0, (size_t)cap / s2 + 1, d) ||
            mix_grow(&h->mix1, p0, (size_t)cap / (2 * s2) + 1, d))
            return MS_ERR_NOMEM;
        h->cap = cap;
    }
    return MS_OK;
}

/* Where cluster c's channel 0 lies in blocks m (channel i: + i·MIX_W). */
static float *mix_at(float *m, uint32_t c, uint32_t d)
{
    return m + (size_t)c / MIX_W * MIX_W * d + c % MIX_W;
}

/* Appends position pos with key k (d floats) to a head's K': the running bounds of its
 * 16-cluster, and the mixes of the clusters it closes (the prefill reserves the static set
 * and the decode steps exactly: no doubling slack). */
static int head_push(mpcache_head *h, uint32_t s2, uint32_t d, uint32_t pos, const float *k,
                     float a)
{
    if (h->n == h->cap && head_reserve(h, s2, d, h->cap ? 2 * h->cap : 64))
        return MS_ERR_NOMEM;
    uint32_t c = h->n / s2, half = c % 2;
    float *mx = h->run + (size_t)half * d, *mn = h->run + (size_t)(2 + half) * d;
    if (h->n % s2 == 0) { /* the cluster's first key */
        memcpy(mx, k, d * sizeof *mx);
        memcpy(mn, k, d * sizeof *mn);
    } else {
        policy_bounds_update(mx, mn, k, d);
    }
    h->idx[h->n++] = pos;
    if (h->n % s2)
        return MS_OK;
    /* a 16-cluster closed: its mix, in mix_score's float operations */
    float b = 1.0f - a, *m2 = mix_at(h->mix2, c, d);
    for (uint32_t i = 0; i < d; i++)
        m2[(size_t)i * MIX_W] = a * mx[i] + b * mn[i];
    if (!half)
        return MS_OK;
    /* and its pair: the bounds over both halves, as mix_score takes them */
    const float *x0 = h->run, *x1 = x0 + d, *n0 = x1 + d, *n1 = n0 + d;
    float *m1 = mix_at(h->mix1, c / 2, d);
    for (uint32_t i = 0; i < d; i++) {
        float hi = x1[i] > x0[i] ? x1[i] : x0[i], lo = n1[i] < n0[i] ? n1[i] : n0[i];
        m1[(size_t)i * MIX_W] = a * hi + b * lo;
    }
    return MS_OK;
}

typedef float mix_v __attribute__((vector_size(4 * MIX_W)));
#define MIX_NB 4 /* blocks scored together */

/* out[c] = Σ_i qs[i]·mix[c][i] (channels in order) for the n clusters of blocks m. A product
 * then a sum per lane (ISO C: gcc contracts nothing into an FMA), on every path. */
#define MIX_SCORES_BODY                                                                 \
    uint32_t nb = (n + MIX_W - 1) / MIX_W, b0 = 0;                                      \
    /* MIX_NB blocks in flight: independent sums, each lane's still in channel order */ \
    for (; b0 + MIX_NB <= nb; b0 += MIX_NB) {                                           \
        mix_v u[MIX_NB] = {{0}};                                                        \
        const float *blk = m + (size_t)b0 * MIX_W * d;                                  \
        for (uint32_t i = 0; i < d; i++) {                                              \
            mix_v q;                                                                    \
            for (int l = 0; l < MIX_W; l++)                                             \
                q[l] = qs[i];                                                           \
            for (uint32_t j = 0; j < MIX_NB; j++) {                                     \
                mix_v x;                                                                \
                memcpy(&x, blk + ((size_t)j * d + i) * MIX_W, sizeof x);                \
                u[j] += q * x;                                                          \
            }                                                                           \
        }                                                                               \
        for (uint32_t j = 0; j < MIX_NB; j++) {                                         \
            uint32_t c = (b0 + j) * MIX_W, k = n - c < MIX_W ? n - c : MIX_W;           \
            memcpy(out + c, &u[j], k * sizeof *out);                                    \
        }                                                                               \
    }                                                                                   \
    for (; b0 < nb; b0++) {                                                             \
        const float *blk = m + (size_t)b0 * MIX_W * d;                                  \
        mix_v u = {0};                                                                  \
        for (uint32_t i = 0; i < d; i++) {                                              \
            mix_v x, q;                                                                 \
            memcpy(&x, blk + (size_t)i * MIX_W, sizeof x);                              \
            for (int l = 0; l < MIX_W; l++)                                             \
                q[l] = qs[i];                                                           \
            u += q * x;                                                                 \
        }                                                                               \
        uint32_t c = b0 * MIX_W, k = n - c < MIX_W ? n - c : MIX_W;                     \
        memcpy(out + c, &u, k * sizeof *out);                                           \
    }

static void mix_scores_portable(const float *m, uint32_t n, const float *qs, uint32_t d, float *out)
{
    MIX_SCORES_BODY
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f"))) static void mix_scores_wide(const float *m, uint32_t n,
                                                               const float *qs, uint32_t d,
                                                               float *out)
{
    MIX_SCORES_BODY
}

static int mix_wide(void) { return ms_cpu_has(MS_CPU_AVX512F); }
#endif

static void mix_scores(const float *m, uint32_t n, const float *qs, uint32_t d, float *out)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (mix_wide()) {
        mix_scores_wide(m, n, qs, d, out);
        return;
    }
#endif
    mix_scores_portable(m, n, qs, d, out);
}

static int mpcache_observe(void *st, const policy_obs *o, errbuf *e)
{
    mpcache_state *s = st;
    const policy_env *v = &s->env;
    uint32_t P = v->prompt_len, H = v->n_heads, Hkv = v->n_kv_heads, n = o->pos + 1;
    if (!own_layer(s, o->layer))
        return MS_OK;
    uint32_t g0 = o->kv_lo, g1 = o->kv_hi ? o->kv_hi : Hkv, G = H / Hkv;
    if (o->pos >= P) {
        for (uint32_t g = g0; g < g1; g++)
            if (head_push(&s->head[(size_t)o->layer * Hkv + g], s->s2, v->head_dim, o->pos,
                          o->k + (size_t)g * v->head_dim, (float)s->alpha))
                return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
        return MS_OK;
    }
    if (!o->att)
        return MS_OK;
    if (s->mode == ST_THRESHOLD) {
        /* the head sum of each column, taken row by row (each column's terms in head order),
         * tested once the last KV head's rows are in */
        uint8_t *pass = s->pass + (size_t)o->layer * P;
        double *cs = s->colsum + (size_t)(o->pos % POLICY_SPAN_MAX) * (P + 1);
        if (g0 == 0)
            memset(cs, 0, n * sizeof *cs);
        for (uint32_t h = g0 * G; h < g1 * G; h++)
            policy_add_row_d(cs, o->att + (size_t)h * n, n);
        for (uint32_t j = 0; g1 == Hkv && j < n; j++)
            if (cs[j] / H >= s->thr)
                pass[j] = 1;
    } else {
        for (uint32_t h = g0 * G; h < g1 * G; h++)
            policy_add_row(s->vote + ((size_t)o->layer * Hkv + h / G) * P, o->att + (size_t)h * n,
                           n);
    }
    return MS_OK;
}

/* Static set of (layer, g) into sel1 (sorted positions); returns the count. */
static uint32_t static_set(mpcache_state *s, uint32_t l, uint32_t g)
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

static int mpcache_prefill(void *st, errbuf *e)
{
    mpcache_state *s = st;
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
            if (own_layer(s, l) &&
                head_reserve(&s->head[(size_t)l * Hkv + g], s->s2, d, n + (v->max_len - P)))
                rc = err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
            for (uint32_t i = 0; i < n; i++)
                in[(size_t)g * P + s->work[i]] = 1;
        }
        /* keys position by position (one read serves every KV head), in position order */
        for (uint32_t j = 0; !rc && own_layer(s, l) && j < P; j++) {
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
                if (in[(size_t)g * P + j] && head_push(&s->head[(size_t)l * Hkv + g], s->s2, d, j,
                                                       s->kbuf + (size_t)g * d, (float)s->alpha))
                    rc = err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
        }
    }
    free(in);
    return rc;
}

/* Score of a centroid mix α·max + (1-α)·min against the group query qs. */
static float mix_score(const mpcache_state *s, const float *mx, const float *mn, const float *mx2,
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

/* Two-level selection for one KV head: marks the kept positions (< pos) in row. 1 when K'
 * holds a position ≥ pos (observe(pos) before select(pos): not the replay's order, and the
 * closed clusters' mixes are those of the whole K'). */
static int dynamic_select(mpcache_state *s, const mpcache_head *h, uint32_t pos, uint8_t *row)
{
    uint32_t d = s->env.head_dim, n = h->n, s2 = s->s2;
    if (n > 0 && h->idx[n - 1] >= pos)
        return 1;
    if (n == 0)
        return 0;
    uint32_t G1 = (n + s->s1 - 1) / s->s1, G2 = (n + s2 - 1) / s2;
    int partial = n % s->s1 != 0;
    /* closed clusters from their mixes; the open pair (at most one, the last) from its
     * running bounds */
    uint32_t done1 = h->n / s->s1 < G1 ? h->n / s->s1 : G1;
    mix_scores(h->mix1, done1, s->qs, d, s->c1);
    for (uint32_t c = done1; c < G1; c++) {
        int pair = 2 * c + 1 < G2;
        const float *r = h->run;
        s->c1[c] = mix_score(s, r, r + 2 * d, pair ? r + d : NULL, pair ? r + 3 * d : NULL);
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
    /* every closed 16-cluster at once (most are candidates: a pair of them per level-1
     * choice); the open ones from their running bounds */
    uint32_t done2 = h->n / s2 < G2 ? h->n / s2 : G2;
    mix_scores(h->mix2, done2, s->qs, d, s->c2);
    for (uint32_t c = done2; c < G2; c++)
        s->c2[c] = mix_score(s, h->run + (size_t)(c % 2) * d, h->run + (size_t)(2 + c % 2) * d,
                             NULL, NULL);
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
    return 0;
}

static int mpcache_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                          errbuf *e)
{
    mpcache_state *s = st;
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
        if (dynamic_select(s, &s->head[(size_t)layer * Hkv + g], pos, keep + (size_t)g * pos))
            return err_set(e, MS_ERR_INTERNAL,
                           "policy mpcache: layer %u holds a key at or past position %u", layer,
                           pos);
    }
    memcpy(s->prev, keep, sz);
    return MS_OK;
}

/* The static `topk` (not on shares): an estimate of its ops. */
static int mpcache_cost_static(mpcache_state *s, policy_emitter *pe, uint32_t layer, uint32_t P)
{
    const policy_env *v = &s->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, w = s->window ? s->window : 1;
    uint32_t S = 0;
    for (uint32_t g = 0; g < Hkv; g++)
        S = s->stat_count[(size_t)layer * Hkv + g] > S ? s->stat_count[(size_t)layer * Hkv + g] : S;
    if (S > 0) {
        /* COST: window vote sums (local), topk(T, ratio·T) per KV head, gather (§1.8) */
        uint32_t vt = policy_emit(pe, OP_ADD, Hkv, w, 0, P, OP_NONE, OP_NONE, 0, 0, 0, "mpc.vote");
        uint32_t oh =
            policy_emit(pe, OP_TOPK, Hkv, 1, 0, P, vt, OP_NONE, 0, (int32_t)S, 0, "mpc.topk0");
        policy_emit(pe, OP_GATHER, Hkv, S, P, 2 * d, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                    "mpc.compact");
    }
    return MS_OK;
}

/* ---- the selection on shares (secpol.h), shared by the cost path and the secure session ---- */

/* Scores of clusters outside the level-1 set are pushed down by MPCACHE_BIG (far above any
 * |q·bound|), pad and unchosen rows get MPCACHE_PAD on the scores (far below the softmax's clip, as
 * secinf.c's PAD_MASK); the mask column holds MPCACHE_PAD_OFF for an attended row. */
#define MPCACHE_BIG 4096.0
#define MPCACHE_PAD_OFF 96.0

int mpcache_shape_read(const policy_env *env, const policy_args *a, mpcache_shape *sh, errbuf *e)
{
    mpcache_state s;
    memset(&s, 0, sizeof s);
    int rc = mpcache_args(&s, a, e);
    if (rc)
        return rc;
    *sh = (mpcache_shape){
        env->n_heads, env->n_kv_heads, env->head_dim, s.s1,   s.s2,  s.alpha, s.ratio1,
        s.ratio2,     s.share,         s.skip2,       s.mode, s.thr, 0};
    double wf = env->prompt_len > 24000 ? s.wfrac / 2 : s.wfrac;
    sh->window = (uint32_t)(wf * env->prompt_len);
    return MS_OK;
}

int mpcache_layer_kind(const mpcache_shape *s, uint32_t l)
{
    if (s->skip2 && l < 2)
        return MPCACHE_LAYER_DENSE;
    if (s->share && l >= 2 && l % 2)
        return MPCACHE_LAYER_SHARED;
    return MPCACHE_LAYER_SELECT;
}

void mpcache_plan_layer(const mpcache_shape *s, uint32_t layer, uint32_t n, mpcache_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->n = n;
    pl->G1 = (n + s->s1 - 1) / s->s1;
    pl->G2 = (n + s->s2 - 1) / s->s2;
    pl->Npad = pl->G2 * s->s2;
    if (n == 0 || mpcache_layer_kind(s, layer) == MPCACHE_LAYER_DENSE) {
        pl->path = MPCACHE_PATH_FULL;
        pl->rows = n;
        return;
    }
    int partial = n % s->s1 != 0;
    pl->k1 = (uint32_t)floor(pl->G1 * s->ratio1);
    pl->k2 = (uint32_t)floor(pl->G2 * s->ratio2);
    pl->k2 = pl->k2 < pl->G2 ? pl->k2 : pl->G2;
    pl->f1[pl->nf1++] = 0;
    if (partial && pl->G1 > 1)
        pl->f1[pl->nf1++] = pl->G1 - 1;
    pl->f2[pl->nf2++] = 0;
    if (partial && pl->G2 > 1)
        pl->f2[pl->nf2++] = pl->G2 - 1;
    pl->lv2 = pl->k2 > 0 && pl->k2 < pl->G2;
    if (pl->k2 == 0 && pl->nf2 < pl->G2)
        pl->path = MPCACHE_PATH_FORCED, pl->slots = pl->nf2;
    else if (pl->lv2 && pl->k2 + pl->nf2 < pl->G2)
        pl->path = MPCACHE_PATH_GATHER, pl->slots = pl->k2 + pl->nf2;
    else
        pl->path = MPCACHE_PATH_FULL;
    pl->rows = pl->path == MPCACHE_PATH_FULL ? n : pl->slots * s->s2;
    int need_u = pl->lv2 || (pl->path == MPCACHE_PATH_FULL && pl->k2 == pl->G2);
    pl->lv1 = need_u && pl->k1 > 0 && pl->k1 < pl->G1;
    /* the mask: secret when it depends on a secret choice, public for pad tokens or a public
     * choice */
    if (pl->path == MPCACHE_PATH_GATHER || (pl->path == MPCACHE_PATH_FULL && (pl->lv1 || pl->lv2)))
        pl->mask = 2;
    else
        pl->mask = 1;
}

uint32_t mpcache_attend_rows(const mpcache_shape *s, uint32_t layer, uint32_t n)
{
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    return pl.rows;
}

/* u over the 32-clusters when public (level 1 not on shares): all, or the forced ones. */
static int plan_u(const mpcache_plan *pl, uint32_t c)
{
    if (pl->k1 >= pl->G1)
        return 1;
    for (uint32_t i = 0; i < pl->nf1; i++)
        if (pl->f1[i] == c)
            return 1;
    return 0;
}

static int plan_f2(const mpcache_plan *pl, uint32_t c)
{
    for (uint32_t i = 0; i < pl->nf2; i++)
        if (pl->f2[i] == c)
            return 1;
    return 0;
}

/* The public chosen set of the full path (no secret choice): w over the 16-clusters. */
static int plan_w(const mpcache_plan *pl, uint32_t c)
{
    if (pl->k2 == 0)
        return plan_f2(pl, c);
    return plan_u(pl, c / 2); /* k2 = G2: every candidate */
}

typedef struct mpcache_em {
    op_program *p;
    int phase, failed;
    uint32_t layer;
} mpcache_em;

static uint32_t mt(mpcache_em *w, const char *nm, op_role role, uint32_t b, uint32_t r, uint32_t c)
{
    char full[48], tail[48];
    snprintf(tail, sizeof tail, "mpc.%s", nm);
    op_layer_name(full, (int)w->layer, tail);
    uint32_t id = role == OPT_TEMP ? OP_NONE : op_tensor_find(w->p, full);
    if (id == OP_NONE)
        id = op_tensor_add(w->p, full, role, DOM_ARITH, b, r, c);
    w->failed |= id == OP_NONE;
    return id;
}

/* ⌈log2 n⌉ (at least 1): the bits of the values 0 … n − 1. */
static int mpcache_bits(uint64_t n)
{
    int b = 1;
    while (b < 63 && (1ull << b) < n)
        b++;
    return b;
}

static uint32_t mo(mpcache_em *w, int kind, uint32_t b, uint32_t m, uint32_t k, uint32_t n,
                   uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags,
                   int32_t iarg, double farg)
{
    op o = {.kind = (uint16_t)kind,
            .phase = (uint8_t)w->phase,
            .cat = OPC_POLICY,
            .layer = (int16_t)w->layer,
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
    return out;
}

/* (B, R, C) → (B, C, R): a transposing VIEW (local). */
static uint32_t mtr(mpcache_em *w, uint32_t x, uint32_t B, uint32_t R, uint32_t C, const char *nm)
{
    uint32_t out = mt(w, nm, OPT_TEMP, B, C, R);
    return mo(w, OP_VIEW, B * R, C, 0, 1, x, OP_NONE, OP_NONE, out, OPF_MERGE_HEADS, 0, 0);
}

/* Rows [r0, r0+n) of each of B instances of x (…, C): a slice (VIEW, local). */
static uint32_t mrows(mpcache_em *w, uint32_t x, uint32_t B, uint32_t r0, uint32_t n, uint32_t C,
                      const char *nm)
{
    uint32_t out = mt(w, nm, OPT_TEMP, B, n, C);
    return mo(w, OP_VIEW, B, n, 0, C, x, OP_NONE, OP_NONE, out, 0, (int32_t)r0, 0);
}

/* x (B, n, C) written at row r0 of each instance of out (B, ≥, C) (VIEW, local). */
static void mput(mpcache_em *w, uint32_t x, uint32_t out, uint32_t B, uint32_t r0, uint32_t n,
                 uint32_t C)
{
    mo(w, OP_VIEW, B, n, 0, C, x, OP_NONE, OP_NONE, out, 0, (int32_t)r0, 0);
}

/* Column sums of a (B, k, n) one-hot: (B, n, 1) (a transposition and a public ones product). */
static uint32_t mcolsum(mpcache_em *w, uint32_t oh, uint32_t B, uint32_t k, uint32_t n,
                        const char *nm)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%s_t", nm);
    snprintf(b, sizeof b, "%s_ones", nm);
    uint32_t t = mtr(w, oh, B, k, n, a);
    uint32_t ones = mt(w, b, OPT_PUBLIC, 1, k, 1);
    uint32_t out = mt(w, nm, OPT_TEMP, B, n, 1);
    return mo(w, OP_MATMUL, 1, B * n, k, 1, t, ones, OP_NONE, out, OPF_PUBLIC_B | OPF_NO_TRUNC, 0,
              0);
}

static uint32_t mph(mpcache_em *w, const char *nm, op_role role, uint32_t b, uint32_t r, uint32_t c)
{
    return mt(w, nm, role, b, r, c);
}

/* The bounds of the P keys kc (Hkv, P, d): b16 (Hkv, G2, 2d), b32 (Hkv, G1, 2d). */
static void mpcache_bounds(mpcache_em *w, const mpcache_shape *s, uint32_t P, uint32_t kc,
                           mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, s2 = s->s2;
    uint32_t G2 = (P + s2 - 1) / s2, G1 = (P + s->s1 - 1) / s->s1, Np = G2 * s2;
    /* [k | −k] of every key: a public product (local) */
    uint32_t pm = mt(w, "pm", OPT_PUBLIC, 1, d, 2 * d);
    uint32_t kn = mt(w, "kn_all", OPT_TEMP, Hkv, Np, 2 * d);
    uint32_t rows = Np > P ? mt(w, "kn_rows", OPT_TEMP, Hkv, P, 2 * d) : kn;
    mo(w, OP_MATMUL, 1, Hkv * P, d, 2 * d, kc, pm, OP_NONE, rows, OPF_PUBLIC_B | OPF_NO_TRUNC, 0,
       0);
    if (Np > P) { /* the pad keys at −BIG: they never win a max */
        mput(w, rows, kn, Hkv, 0, P, 2 * d);
        uint32_t pad = mt(w, "padk", OPT_PUBLIC, 1, Np, 2 * d);
        mo(w, OP_ADD_PUB, Hkv, Np, 0, 2 * d, kn, pad, OP_NONE, kn, 0, 0, 0);
    }
    /* COST: the 16-cluster bounds, a max over each cluster's 16 keys per channel (a tree of
     * comparisons, mpc-costs.md MAX), then the 32-cluster bounds from pairs (policies.md §1.8:
     * MPCache's per-cluster max/min) */
    uint32_t tr = mtr(w, kn, Hkv * G2, s2, 2 * d, "kn_t");
    ids->b16 = mt(w, "b16_new", OPT_TEMP, Hkv, G2, 2 * d);
    mo(w, OP_MAX, Hkv * G2, 2 * d, 0, s2, tr, OP_NONE, OP_NONE, ids->b16, 0, 0, 0);
    uint32_t pair = ids->b16;
    if (2 * G1 > G2) {
        pair = mt(w, "b16_even", OPT_TEMP, Hkv, 2 * G1, 2 * d);
        mput(w, ids->b16, pair, Hkv, 0, G2, 2 * d);
        uint32_t pad = mt(w, "pad16", OPT_PUBLIC, 1, 2 * G1, 2 * d);
        mo(w, OP_ADD_PUB, Hkv, 2 * G1, 0, 2 * d, pair, pad, OP_NONE, pair, 0, 0, 0);
    }
    uint32_t pt = mtr(w, pair, Hkv * G1, 2, 2 * d, "b16_t");
    ids->b32 = mt(w, "b32_new", OPT_TEMP, Hkv, G1, 2 * d);
    mo(w, OP_MAX, Hkv * G1, 2 * d, 0, 2, pt, OP_NONE, OP_NONE, ids->b32, 0, 0, 0);
}

int mpcache_emit_prefill(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t P,
                         uint32_t kc, mpcache_ids *ids, errbuf *e)
{
    mpcache_em w = {.p = p, .phase = PHASE_PREFILL, .layer = layer};
    memset(ids, 0xff, sizeof *ids);
    if (mpcache_layer_kind(s, layer) != MPCACHE_LAYER_SELECT || P == 0)
        return MS_OK;
    if (kc == OP_NONE)
        kc = mph(&w, "in_k", OPT_CACHE, s->n_kv_heads, P, s->head_dim);
    mpcache_bounds(&w, s, P, kc, ids);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

/* A secret constant (1, 1, 1) of x's first element times 0 plus a public value (local): the
 * second operand of a comparison with a public number. pub: a public tensor, else farg. */
static uint32_t mconst(mpcache_em *w, uint32_t x, uint32_t pub, double farg, const char *nm)
{
    char a[32];
    snprintf(a, sizeof a, "%s_at", nm);
    uint32_t one = mrows(w, x, 1, 0, 1, 1, a);
    uint32_t z = mt(w, nm, OPT_TEMP, 1, 1, 1);
    mo(w, OP_MUL_PUB, 1, 1, 0, 1, one, OP_NONE, OP_NONE, z, OPF_NO_TRUNC, 0, 0.0);
    return mo(w, OP_ADD_PUB, 1, 1, 0, 1, z, pub, OP_NONE, z, 0, 0, farg);
}

int mpcache_emit_static(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t P,
                        uint32_t probs, mpcache_ids *ids, errbuf *e)
{
    mpcache_em w = {.p = p, .phase = PHASE_PREFILL, .layer = layer};
    uint32_t H = s->n_heads, W = s->window ? s->window : 1;
    W = W < P ? W : P;
    ids->keep = OP_NONE;
    if (mpcache_layer_kind(s, layer) != MPCACHE_LAYER_SELECT || !P)
        return MS_OK;
    if (probs == OP_NONE)
        probs = mph(&w, "in_probs", OPT_CACHE, H, P, P);
    /* COST: the window rows' head sums (a transposition and a public ones product: local), W·P
     * comparisons with H·threshold (policies.md §1.12 MPCache static) */
    uint32_t win = mrows(&w, probs, H, P - W, W, P, "win");
    uint32_t wt = mtr(&w, win, 1, H, W * P, "win_t");
    uint32_t sum = mt(&w, "hsum", OPT_TEMP, 1, W * P, 1);
    mo(&w, OP_MATMUL, 1, W * P, H, 1, wt, mt(&w, "ones_h", OPT_PUBLIC, 1, H, 1), OP_NONE, sum,
       OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    uint32_t thr = mconst(&w, sum, OP_NONE, H * s->thr, "thr");
    uint32_t lt = mt(&w, "below", OPT_TEMP, 1, W * P, 1);
    mo(&w, OP_LT, 1, W * P, 0, 1, sum, thr, OP_NONE, lt, 0, 0, 0);
    /* COST: the window's OR as [Σ_rows below < W]: a local sum, P comparisons */
    uint32_t lt_t = mtr(&w, lt, 1, W, P, "below_t");
    uint32_t cnt = mt(&w, "below_n", OPT_TEMP, 1, P, 1);
    mo(&w, OP_MATMUL, 1, P, W, 1, lt_t, mt(&w, "ones_w", OPT_PUBLIC, 1, W, 1), OP_NONE, cnt,
       OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    uint32_t wv = mconst(&w, cnt, mt(&w, "wval", OPT_PUBLIC, 1, 1, 1), 0, "wv");
    ids->keep = mt(&w, "keep", OPT_TEMP, 1, P, 1);
    mo(&w, OP_LT, 1, P, 0, 1, cnt, wv, OP_NONE, ids->keep, 0, 0, 0);
    /* an integer count against W: cnt − W in [−W, 0], so ⌈log2 W⌉ + 1 bits (kern.c k_lt: exact
     * for differences in [−2^(w−1), 2^(w−1))) */
    if (!w.failed)
        w.p->ops[w.p->n_ops - 1].bits = (uint8_t)(mpcache_bits(W) + 1);
    /* COST: the kept count, a local sum, revealed to every party (public in MPCache's model) */
    uint32_t c = mt(&w, "count_sh", OPT_TEMP, 1, 1, 1);
    mo(&w, OP_MATMUL, 1, 1, P, 1, ids->keep, mt(&w, "ones_p", OPT_PUBLIC, 1, P, 1), OP_NONE, c,
       OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    mo(&w, OP_REVEAL, 1, 1, 0, 1, c, OP_NONE, OP_NONE, mt(&w, "count", OPT_TEMP, 1, 1, 1), 0, -1,
       0);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

/* The order-preserving compaction of the P0 prompt rows to the S kept ones: (Hkv, S, 2d+1). */
static uint32_t mpcache_compact(mpcache_em *w, const mpcache_shape *s, uint32_t S, uint32_t P0,
                                const mpcache_ids *src, mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1;
    uint32_t full = mt(w, "full", OPT_CACHE, Hkv, P0, F);
    if (src) {
        ids->cmp = src->cmp;
    } else {
        uint32_t keep = mt(w, "keep_in", OPT_CACHE, 1, P0, 1);
        /* prefix sums: ⌈log2 P0⌉ shifted adds (local) */
        uint32_t cur = keep;
        for (uint32_t sh = 1; sh < P0; sh *= 2) {
            uint32_t hd = mrows(w, cur, 1, 0, P0 - sh, 1, "prefix_head");
            uint32_t shifted = mt(w, "prefix_shift", OPT_TEMP, 1, P0, 1);
            mput(w, hd, shifted, 1, sh, P0 - sh, 1);
            uint32_t nx = mt(w, "prefix", OPT_TEMP, 1, P0, 1);
            cur = mo(w, OP_ADD, 1, P0, 0, 1, cur, shifted, OP_NONE, nx, 0, 0, 0);
        }
        /* the rank of each kept row, negative for a dropped one (public integers: local) */
        uint32_t sk = mt(w, "rank", OPT_TEMP, 1, P0, 1);
        mo(w, OP_MUL_PUB, 1, P0, 0, 1, keep, mt(w, "sval", OPT_PUBLIC, 1, 1, 1), OP_NONE, sk,
           OPF_NO_TRUNC, 0, 0);
        mo(w, OP_ADD, 1, P0, 0, 1, sk, cur, OP_NONE, sk, 0, 0, 0);
        mo(w, OP_ADD_PUB, 1, P0, 0, 1, sk, mt(w, "soff", OPT_PUBLIC, 1, 1, 1), OP_NONE, sk, 0, 0,
           0);
        /* COST: one-hot of each row's rank over the S slots (P0·S equality tests) on the
         * public bound of the ranks' differences (MPCache's ΠGather compares ⌈log2 C⌉ bits,
         * not the ring's 64): rank − slot lies in [−2S, S) — a dropped row's rank is negative,
         * and no rank formula linear in the keep bits and prefix sums (free to compute) keeps
         * 2S consecutive differences off the multiples of 2^w for a smaller w — so w =
         * ⌈log2(2S + 1)⌉, one bit above ⌈log2 S⌉ for the sign (kern.c k_eqz: exact when
         * |d| < 2^w) */
        uint32_t oh = mt(w, "rank_oh", OPT_TEMP, 1, P0, S);
        mo(w, OP_ONEHOT, 1, P0, 0, S, sk, OP_NONE, OP_NONE, oh, 0, 0, 0);
        if (!w->failed)
            w->p->ops[w->p->n_ops - 1].bits = (uint8_t)mpcache_bits(2 * (uint64_t)S + 1);
        ids->cmp = mtr(w, oh, 1, P0, S, "compact_oh");
    }
    uint32_t tm = mt(w, "full_t", OPT_TEMP, 1, P0, Hkv * F);
    mo(w, OP_VIEW, Hkv, P0, 0, F, full, OP_NONE, OP_NONE, tm, OPF_MERGE_HEADS, 0, 0);
    /* COST: the kept rows, one-hot × [K | V] of every KV head (one GATHER) */
    uint32_t g = mt(w, "compact_t", OPT_TEMP, 1, S, Hkv * F);
    mo(w, OP_GATHER, 1, S, P0, Hkv * F, ids->cmp, tm, OP_NONE, g, OPF_NO_TRUNC, 0, 0);
    uint32_t out = mt(w, "compact", OPT_TEMP, Hkv, S, F);
    return mo(w, OP_VIEW, Hkv, S, 0, F, g, OP_NONE, OP_NONE, out, OPF_SPLIT_HEADS, 0, 0);
}

/* Level 1: the secret indicator u (Hkv, G1, 1) of the chosen 32-clusters and its expansion to
 * the 16-clusters (Hkv, 1, G2). */
static uint32_t mpcache_level1(mpcache_em *w, const mpcache_shape *s, const mpcache_plan *pl,
                               uint32_t qx, uint32_t b32, mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim;
    /* COST: level 1, one dot product per 32-cluster (the linearized bound), top-k(G1, k1)
     * (policies.md §1.8 dynamic) */
    ids->sc1 = mt(w, "sc1", OPT_TEMP, Hkv, 1, pl->G1);
    mo(w, OP_MATMUL, Hkv, 1, 2 * d, pl->G1, qx, b32, OP_NONE, ids->sc1, OPF_TRANS_B, 0, 0);
    ids->t1 = mt(w, "topk1", OPT_TEMP, Hkv, pl->k1, pl->G1);
    mo(w, OP_TOPK, Hkv, 1, 0, pl->G1, ids->sc1, OP_NONE, OP_NONE, ids->t1, 0, (int32_t)pl->k1, 0);
    /* u = the column sums, 1 on the forced clusters (public 0/1 vectors: local) */
    uint32_t c1 = mcolsum(w, ids->t1, Hkv, pl->k1, pl->G1, "cs1");
    uint32_t keep = mt(w, "keep1", OPT_PUBLIC, 1, pl->G1, 1);
    uint32_t u = mt(w, "u", OPT_TEMP, Hkv, pl->G1, 1);
    mo(w, OP_MUL_PUB, Hkv, pl->G1, 0, 1, c1, keep, OP_NONE, u, OPF_NO_TRUNC, 0, 0);
    uint32_t force = mt(w, "force1", OPT_PUBLIC, 1, pl->G1, 1);
    mo(w, OP_ADD_PUB, Hkv, pl->G1, 0, 1, u, force, OP_NONE, u, 0, 0, 0);
    uint32_t ex = mt(w, "expand", OPT_PUBLIC, 1, pl->G1, pl->G2);
    uint32_t ue = mt(w, "u_exp", OPT_TEMP, Hkv, 1, pl->G2);
    return mo(w, OP_MATMUL, 1, Hkv, pl->G1, pl->G2, u, ex, OP_NONE, ue, OPF_PUBLIC_B | OPF_NO_TRUNC,
              0, 0);
}

/* The mask column added to the table (Hkv, G2, 16·(2d+1)): MPCACHE_PAD_OFF · ind · [token < n],
 * ind (Hkv, 1, G2) a secret 0/1 indicator over the 16-clusters (local). */
static uint32_t mpcache_mcol(mpcache_em *w, const mpcache_shape *s, const mpcache_plan *pl,
                             uint32_t ind)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1, C = s->s2 * F;
    uint32_t pat = mt(w, "tokpat", OPT_PUBLIC, 1, 1, C);
    uint32_t bc = mt(w, "ind_tok", OPT_TEMP, Hkv, pl->G2, C);
    mo(w, OP_MATMUL, 1, Hkv * pl->G2, 1, C, ind, pat, OP_NONE, bc, OPF_PUBLIC_B | OPF_NO_TRUNC, 0,
       0);
    uint32_t val = mt(w, "tokval", OPT_PUBLIC, 1, pl->G2, C);
    uint32_t mc = mt(w, "mcol", OPT_TEMP, Hkv, pl->G2, C);
    return mo(w, OP_MUL_PUB, Hkv, pl->G2, 0, C, bc, val, OP_NONE, mc, OPF_NO_TRUNC, 0, 0);
}

/* Level 2 and the one-hot slots or the chosen set; fills ids->onehot (gather) and returns the
 * table to read rows from (the state plus the mask column). Long: the three shapes (gather,
 * forced, full) share the level-2 scores and differ only in the few ops that follow. */
static uint32_t mpcache_level2(mpcache_em *w, const mpcache_shape *s, const mpcache_plan *pl,
                               uint32_t qx, uint32_t b16, uint32_t ue, uint32_t kv,
                               mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, F = 2 * d + 1, C = s->s2 * F, G2 = pl->G2;
    uint32_t v = OP_NONE;
    if (pl->lv2) {
        /* COST: level 2, one dot product per 16-cluster, the ones outside the level-1 set
         * pushed below every candidate (local), top-k(G2, k2) (policies.md §1.8 dynamic) */
        ids->sc2 = mt(w, "sc2", OPT_TEMP, Hkv, 1, G2);
        mo(w, OP_MATMUL, Hkv, 1, 2 * d, G2, qx, b16, OP_NONE, ids->sc2, OPF_TRANS_B, 0, 0);
        uint32_t sc = ids->sc2;
        if (ue != OP_NONE) {
            uint32_t pen = mt(w, "pen", OPT_TEMP, Hkv, 1, G2);
            mo(w, OP_MUL_PUB, Hkv, 1, 0, G2, ue, OP_NONE, OP_NONE, pen, OPF_NO_TRUNC, 0,
               MPCACHE_BIG);
            sc = mt(w, "sc2m", OPT_TEMP, Hkv, 1, G2);
            mo(w, OP_ADD, Hkv, 1, 0, G2, ids->sc2, pen, OP_NONE, sc, 0, 0, 0);
            mo(w, OP_ADD_PUB, Hkv, 1, 0, G2, sc, OP_NONE, OP_NONE, sc, 0, 0, -MPCACHE_BIG);
        } else {
            int all = 1;
            for (uint32_t c = 0; c < pl->G1; c++)
                all &= plan_u(pl, c);
            if (!all) {
                uint32_t pen = mt(w, "pen2", OPT_PUBLIC, 1, 1, G2);
                sc = mt(w, "sc2m", OPT_TEMP, Hkv, 1, G2);
                mo(w, OP_ADD_PUB, Hkv, 1, 0, G2, ids->sc2, pen, OP_NONE, sc, 0, 0, 0);
            }
        }
        ids->t2 = mt(w, "topk2", OPT_TEMP, Hkv, pl->k2, G2);
        mo(w, OP_TOPK, Hkv, 1, 0, G2, sc, OP_NONE, OP_NONE, ids->t2, 0, (int32_t)pl->k2, 0);
        v = mcolsum(w, ids->t2, Hkv, pl->k2, G2, "cs2");
    }
    uint32_t ind = OP_NONE; /* the secret indicator the mask column follows */
    if (pl->path == MPCACHE_PATH_GATHER) {
        /* COST: the forced clusters' one-hot rows, e_f·(1 − column sum f) (local) */
        uint32_t fs = mt(w, "fsel", OPT_PUBLIC, 1, G2, pl->nf2 * G2);
        uint32_t fr = mt(w, "frows", OPT_TEMP, Hkv, pl->nf2, G2);
        mo(w, OP_MATMUL, 1, Hkv, G2, pl->nf2 * G2, v, fs, OP_NONE, fr, OPF_PUBLIC_B | OPF_NO_TRUNC,
           0, 0);
        uint32_t fe = mt(w, "frow", OPT_PUBLIC, 1, pl->nf2, G2);
        mo(w, OP_ADD_PUB, Hkv, pl->nf2, 0, G2, fr, fe, OP_NONE, fr, 0, 0, 0);
        ids->onehot = mt(w, "onehot", OPT_TEMP, Hkv, pl->slots, G2);
        mput(w, ids->t2, ids->onehot, Hkv, 0, pl->k2, G2);
        mput(w, fr, ids->onehot, Hkv, pl->k2, pl->nf2, G2);
        ind = ue;
    } else if (pl->path == MPCACHE_PATH_FULL && pl->mask == 2) {
        if (pl->lv2) { /* w = forced2 ∪ (top-k column sums · u) */
            uint32_t wv = mt(w, "w", OPT_TEMP, Hkv, 1, G2);
            if (ue != OP_NONE)
                mo(w, OP_MUL, Hkv, 1, 0, G2, v, ue, OP_NONE, wv, OPF_NO_TRUNC, 0, 0);
            else
                mo(w, OP_MUL_PUB, Hkv, 1, 0, G2, v, mt(w, "u_pub", OPT_PUBLIC, 1, 1, G2), OP_NONE,
                   wv, OPF_NO_TRUNC, 0, 0);
            mo(w, OP_MUL_PUB, Hkv, 1, 0, G2, wv, mt(w, "keep2", OPT_PUBLIC, 1, 1, G2), OP_NONE, wv,
               OPF_NO_TRUNC, 0, 0);
            mo(w, OP_ADD_PUB, Hkv, 1, 0, G2, wv, mt(w, "force2", OPT_PUBLIC, 1, 1, G2), OP_NONE, wv,
               0, 0, 0);
            ind = wv;
        } else {
            ind = ue; /* k2 = G2: every candidate */
        }
    }
    if (ind == OP_NONE && pl->path == MPCACHE_PATH_GATHER) { /* u public: a public column */
        uint32_t tab = mt(w, "table", OPT_TEMP, Hkv, G2, C);
        mo(w, OP_ADD_PUB, Hkv, G2, 0, C, kv, mt(w, "mpub", OPT_PUBLIC, 1, G2, C), OP_NONE, tab, 0,
           0, 0);
        return tab;
    }
    if (ind == OP_NONE)
        return kv;
    ids->mcol = mpcache_mcol(w, s, pl, ind);
    uint32_t tab = mt(w, "table", OPT_TEMP, Hkv, G2, C);
    return mo(w, OP_ADD, Hkv, G2, 0, C, kv, ids->mcol, OP_NONE, tab, 0, 0, 0);
}

/* The attended rows (Hkv, R, 2d+1) of the table (Hkv, G2, 16·(2d+1)). */
static uint32_t mpcache_rows(mpcache_em *w, const mpcache_shape *s, const mpcache_plan *pl,
                             uint32_t tab, uint32_t onehot)
{
    uint32_t Hkv = s->n_kv_heads, F = 2 * s->head_dim + 1, C = s->s2 * F, G2 = pl->G2;
    uint32_t R = pl->rows;
    uint32_t out = mt(w, "rows", OPT_TEMP, Hkv, R, F);
    if (pl->path == MPCACHE_PATH_GATHER) {
        /* COST: the chosen 16-clusters' rows, one-hot × table (MPCache's token gather) */
        return mo(w, OP_GATHER, Hkv, pl->slots, G2, C, onehot, tab, OP_NONE, out, OPF_NO_TRUNC, 0,
                  0);
    }
    if (pl->path == MPCACHE_PATH_FORCED) {
        for (uint32_t i = 0; i < pl->slots; i++) {
            uint32_t one = mrows(w, tab, Hkv, pl->f2[i], 1, C, "forced");
            uint32_t tk = mt(w, "forced_rows", OPT_TEMP, Hkv, s->s2, F); /* its 16 token rows */
            mo(w, OP_VIEW, Hkv, s->s2, 0, F, one, OP_NONE, OP_NONE, tk, 0, 0, 0);
            mput(w, tk, out, Hkv, i * s->s2, s->s2, F);
        }
        return out;
    }
    uint32_t tok = mt(w, "tokens", OPT_TEMP, Hkv, pl->Npad, F);
    mo(w, OP_VIEW, Hkv, pl->Npad, 0, F, tab, OP_NONE, OP_NONE, tok, 0, 0, 0);
    if (pl->Npad == R)
        return tok;
    return mo(w, OP_VIEW, Hkv, R, 0, F, tok, OP_NONE, OP_NONE, out, 0, 0, 0);
}

/* Columns [c0, c0+nc) of x (B, R, F) as (B, R, nc): transpose, slice, transpose (local). */
static uint32_t mcols(mpcache_em *w, uint32_t xt, uint32_t B, uint32_t R, uint32_t F, uint32_t c0,
                      uint32_t nc, const char *nm)
{
    char a[32];
    snprintf(a, sizeof a, "%s_t", nm);
    uint32_t sl = mrows(w, xt, B, c0, nc, R, a);
    (void)F;
    return mtr(w, sl, B, nc, R, nm);
}

/* The mask (H, 1, R+1) of the scores from the rows' mask column (Hkv, 1, R): 0 for the new
 * entry, column − MPCACHE_PAD_OFF for the others, repeated over the KV head's query heads (local).
 */
static uint32_t mpcache_mask(mpcache_em *w, const mpcache_shape *s, uint32_t R, uint32_t mrow)
{
    uint32_t Hkv = s->n_kv_heads, G = s->n_heads / Hkv;
    uint32_t col = mt(w, "mcol_rows", OPT_TEMP, Hkv, R, 1);
    mo(w, OP_VIEW, Hkv, R, 0, 1, mrow, OP_NONE, OP_NONE, col, 0, 0, 0);
    uint32_t full = mt(w, "mask_kv", OPT_TEMP, Hkv, R + 1, 1);
    mput(w, col, full, Hkv, 1, R, 1);
    mo(w, OP_ADD_PUB, Hkv, R + 1, 0, 1, full, mt(w, "moff", OPT_PUBLIC, 1, R + 1, 1), OP_NONE, full,
       0, 0, 0);
    uint32_t rep = mt(w, "mask_rep", OPT_TEMP, Hkv, R + 1, G);
    mo(w, OP_MATMUL, 1, Hkv * (R + 1), 1, G, full, mt(w, "ones_g", OPT_PUBLIC, 1, 1, G), OP_NONE,
       rep, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    return mtr(w, rep, Hkv, R + 1, G, "mask");
}

/* The upkeep of the bounds with the new key: a MAX over pairs of the newest clusters' rows and
 * [k | −k] (none when both start a new cluster). */
static void mpcache_upkeep(mpcache_em *w, const mpcache_shape *s, const mpcache_plan *pl,
                           uint32_t k, uint32_t b16, uint32_t b32, mpcache_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, n = pl->n;
    uint32_t pm = mt(w, "pm", OPT_PUBLIC, 1, d, 2 * d);
    ids->kn = mt(w, "kn", OPT_TEMP, Hkv, 1, 2 * d);
    mo(w, OP_MATMUL, 1, Hkv, d, 2 * d, k, pm, OP_NONE, ids->kn, OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
    uint32_t lv = (n % s->s2 != 0) + (n % s->s1 != 0);
    if (!lv)
        return;
    uint32_t st = mt(w, "up_in", OPT_TEMP, Hkv, 2 * lv, 2 * d);
    if (n % s->s2) {
        mput(w, mrows(w, b16, Hkv, n / s->s2, 1, 2 * d, "last16"), st, Hkv, 0, 1, 2 * d);
        mput(w, ids->kn, st, Hkv, 1, 1, 2 * d);
    }
    mput(w, mrows(w, b32, Hkv, n / s->s1, 1, 2 * d, "last32"), st, Hkv, 2 * lv - 2, 1, 2 * d);
    mput(w, ids->kn, st, Hkv, 2 * lv - 1, 1, 2 * d);
    /* COST: upkeep of the newest 16- and 32-cluster bounds, 2d comparisons each with the new
     * key (policies.md §1.12 MPCache) */
    uint32_t tr = mtr(w, st, Hkv, 2 * lv, 2 * d, "up_t");
    ids->up = mt(w, "up", OPT_TEMP, Hkv, 2 * d, lv);
    mo(w, OP_MAX, Hkv, 2 * d * lv, 0, 2, tr, OP_NONE, OP_NONE, ids->up, 0, 0, 0);
}

/* Long: the state (carried, or the compaction after a threshold prompt), the selection, the
 * rows into the cache tensors and the upkeep, in the order the session runs them. */
static int mpcache_decode(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                          uint32_t P0, uint32_t q, uint32_t k, uint32_t kc, uint32_t vc,
                          const mpcache_ids *src, mpcache_ids *ids, errbuf *e)
{
    mpcache_em w = {.p = p, .phase = PHASE_DECODE, .layer = layer};
    uint32_t H = s->n_heads, Hkv = s->n_kv_heads, d = s->head_dim, G = H / Hkv, F = 2 * d + 1;
    memset(ids, 0xff, sizeof *ids);
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    int kind = mpcache_layer_kind(s, layer);
    if (kind == MPCACHE_LAYER_SHARED && !src)
        return err_set(e, MS_ERR_INTERNAL, "policy mpcache: layer %u shares a missing layer",
                       layer);
    if (q == OP_NONE)
        q = mph(&w, "in_q", OPT_CACHE, H, 1, d);
    if (k == OP_NONE)
        k = mph(&w, "in_knew", OPT_CACHE, 1, 1, Hkv * d);
    if (kc == OP_NONE)
        kc = mph(&w, "in_kc", OPT_CACHE, Hkv, n + 1, d);
    if (vc == OP_NONE)
        vc = mph(&w, "in_vc", OPT_CACHE, Hkv, n + 1, d);
    if (n == 0) { /* nothing cached to select from (a threshold that kept no prompt key) */
        if (kind == MPCACHE_LAYER_SELECT)
            mpcache_upkeep(&w, s, &pl, k, OP_NONE, OP_NONE, ids);
        return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                        : MS_OK;
    }
    /* the carried state, bound by the session; after a threshold prompt, its compaction */
    uint32_t kv, b16 = OP_NONE, b32 = OP_NONE, ue = OP_NONE;
    if (P0 && kind != MPCACHE_LAYER_DENSE) {
        uint32_t comp =
            mpcache_compact(&w, s, n, P0, kind == MPCACHE_LAYER_SHARED ? src : NULL, ids);
        uint32_t rows = mt(&w, "kv_c", OPT_TEMP, Hkv, pl.Npad, F); /* zero rows up to Npad */
        mput(&w, comp, rows, Hkv, 0, n, F);
        kv = mt(&w, "kv_cl", OPT_TEMP, Hkv, pl.G2, s->s2 * F); /* the same as cluster rows */
        mo(&w, OP_VIEW, Hkv, pl.G2, 0, s->s2 * F, rows, OP_NONE, OP_NONE, kv, 0, 0, 0);
        if (kind == MPCACHE_LAYER_SELECT) {
            uint32_t ct = mtr(&w, comp, Hkv, n, F, "compact_tr");
            mpcache_ids b;
            mpcache_bounds(&w, s, n, mcols(&w, ct, Hkv, n, F, 0, d, "compact_k"), &b);
            b16 = b.b16, b32 = b.b32;
        }
    } else {
        kv = mt(&w, "kv", OPT_CACHE, Hkv, pl.G2, s->s2 * F);
        if (kind == MPCACHE_LAYER_SELECT) {
            b16 = mt(&w, "b16", OPT_CACHE, Hkv, pl.G2, 2 * d);
            b32 = mt(&w, "b32", OPT_CACHE, Hkv, pl.G1, 2 * d);
        }
    }
    uint32_t tab = kv;
    if (kind == MPCACHE_LAYER_SELECT) {
        /* qx = [α·qs | −(1−α)·qs], qs the sum of the KV head's query heads (local) */
        uint32_t qt = mtr(&w, q, Hkv, G, d, "q_t");
        uint32_t qs = mt(&w, "qs", OPT_TEMP, Hkv, 1, d);
        mo(&w, OP_MATMUL, 1, Hkv * d, G, 1, qt, mt(&w, "ones_q", OPT_PUBLIC, 1, G, 1), OP_NONE, qs,
           OPF_PUBLIC_B | OPF_NO_TRUNC, 0, 0);
        uint32_t qx = mt(&w, "qx", OPT_TEMP, Hkv, 1, 2 * d);
        mo(&w, OP_MATMUL, 1, Hkv, d, 2 * d, qs, mt(&w, "qw", OPT_PUBLIC, 1, d, 2 * d), OP_NONE, qx,
           OPF_PUBLIC_B, 0, 0);
        if (pl.lv1)
            ue = mpcache_level1(&w, s, &pl, qx, b32, ids);
        tab = mpcache_level2(&w, s, &pl, qx, b16, ue, kv, ids);
        if (pl.path == MPCACHE_PATH_GATHER && ids->onehot == OP_NONE)
            w.failed = 1;
    } else if (kind == MPCACHE_LAYER_SHARED) {
        ids->onehot = src->onehot;
        ids->mask = src->mask;
    }
    uint32_t rows = mpcache_rows(&w, s, &pl, tab, ids->onehot);
    uint32_t R = pl.rows;
    uint32_t rt = mtr(&w, rows, Hkv, R, F, "rows_t");
    mput(&w, mcols(&w, rt, Hkv, R, F, 0, d, "k_rows"), kc, Hkv, 1, R, d);
    mput(&w, mcols(&w, rt, Hkv, R, F, d, d, "v_rows"), vc, Hkv, 1, R, d);
    if (kind == MPCACHE_LAYER_SELECT && pl.mask == 2)
        ids->mask = mpcache_mask(&w, s, R, mrows(&w, rt, Hkv, 2 * d, 1, R, "m_row"));
    if (kind == MPCACHE_LAYER_SELECT)
        mpcache_upkeep(&w, s, &pl, k, b16, b32, ids);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

int mpcache_emit_decode(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                        uint32_t q, uint32_t k, uint32_t kc, uint32_t vc, const mpcache_ids *src,
                        mpcache_ids *ids, errbuf *e)
{
    return mpcache_decode(p, s, layer, n, 0, q, k, kc, vc, src, ids, e);
}

int mpcache_emit_decode_first(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                              uint32_t P0, uint32_t q, uint32_t k, uint32_t kc, uint32_t vc,
                              const mpcache_ids *src, mpcache_ids *ids, errbuf *e)
{
    return mpcache_decode(p, s, layer, n, P0, q, k, kc, vc, src, ids, e);
}

int mpcache_emit_mask(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                      uint32_t scores, const mpcache_ids *own, errbuf *e)
{
    mpcache_em w = {.p = p, .phase = PHASE_DECODE, .layer = layer};
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    uint32_t H = s->n_heads, R = pl.rows;
    if (n == 0 || mpcache_layer_kind(s, layer) == MPCACHE_LAYER_DENSE || pl.mask == 0)
        return MS_OK;
    if (scores == OP_NONE)
        scores = mph(&w, "in_scores", OPT_CACHE, H, 1, R + 1);
    if (pl.mask == 2) {
        if (!own || own->mask == OP_NONE)
            return err_set(e, MS_ERR_INTERNAL, "policy mpcache: layer %u has no mask", layer);
        mo(&w, OP_ADD, H, 1, 0, R + 1, scores, own->mask, OP_NONE, scores, 0, 0, 0);
    } else {
        mo(&w, OP_ADD_PUB, H, 1, 0, R + 1, scores, mt(&w, "pmask", OPT_PUBLIC, 1, 1, R + 1),
           OP_NONE, scores, 0, 0, 0);
    }
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory emitting its ops")
                    : MS_OK;
}

/* One public constant by name; v(i) the value of element i (row r, column c of cols). Long: one
 * branch per constant, each a line or two, kept together so the names read as a table. */
int mpcache_public(const mpcache_shape *s, uint32_t n, int frac, const op_tensor *t, uint64_t *out,
                   size_t cnt)
{
    const char *nm;
    int l = op_layer_of(t->name, &nm);
    if (t->role != OPT_PUBLIC || l < 0 || strncmp(nm, "mpc.", 4))
        return 0;
    nm += 4;
    mpcache_plan pl;
    mpcache_plan_layer(s, (uint32_t)l, n, &pl);
    uint32_t d = s->head_dim, F = 2 * d + 1, cols = t->cols ? t->cols : 1;
    uint64_t one = 1, fbig = fx_encode(-MPCACHE_BIG, frac),
             fpad = fx_encode(-MPCACHE_PAD_OFF, frac);
    uint64_t foff = fx_encode(MPCACHE_PAD_OFF, frac);
    memset(out, 0, cnt * sizeof *out);
    for (size_t i = 0; i < cnt; i++) {
        uint32_t r = (uint32_t)((i / cols) % t->rows), c = (uint32_t)(i % cols);
        uint64_t v = 0;
        if (!strcmp(nm, "pm"))
            v = c == r ? one : c == r + d ? (uint64_t)-1 : 0;
        else if (!strcmp(nm, "qw"))
            v = c == r ? fx_encode(s->alpha, frac) : c == r + d ? fx_encode(s->alpha - 1, frac) : 0;
        else if (!strcmp(nm, "padk"))
            v = r >= n ? fbig : 0;
        else if (!strcmp(nm, "pad16"))
            v = r >= pl.G2 ? fbig : 0;
        else if (!strcmp(nm, "cs1_ones") || !strcmp(nm, "cs2_ones") || !strcmp(nm, "ones_g") ||
                 !strcmp(nm, "ones_q") || !strcmp(nm, "ones_h") || !strcmp(nm, "ones_w") ||
                 !strcmp(nm, "ones_p"))
            v = one;
        else if (!strcmp(nm, "wval")) /* the window's rows (n = P at the prompt) */
            v = s->window ? (s->window < n ? s->window : n) : 1;
        else if (!strcmp(nm, "sval")) /* the revealed count S = n at the first decode step */
            v = n;
        else if (!strcmp(nm, "soff"))
            v = (uint64_t) - (int64_t)(n + 1);
        else if (!strcmp(nm, "keep1") || !strcmp(nm, "force1")) {
            int f = r == pl.f1[0] || (pl.nf1 > 1 && r == pl.f1[1]);
            v = (uint64_t)(nm[0] == 'k' ? !f : f);
        } else if (!strcmp(nm, "keep2") || !strcmp(nm, "force2")) {
            int f = plan_f2(&pl, c);
            v = (uint64_t)(nm[0] == 'k' ? !f : f);
        } else if (!strcmp(nm, "expand"))
            v = c / 2 == r;
        else if (!strcmp(nm, "pen2"))
            v = plan_u(&pl, c / 2) ? 0 : fbig;
        else if (!strcmp(nm, "u_pub"))
            v = (uint64_t)plan_u(&pl, c / 2);
        else if (!strcmp(nm, "fsel"))
            v = c % pl.G2 == r && c / pl.G2 < pl.nf2 && pl.f2[c / pl.G2] == r ? (uint64_t)-1 : 0;
        else if (!strcmp(nm, "frow"))
            v = r < pl.nf2 && pl.f2[r] == c;
        else if (!strcmp(nm, "tokpat"))
            v = c % F == 2 * d;
        else if (!strcmp(nm, "tokval") || !strcmp(nm, "mpub")) {
            uint32_t tok = r * s->s2 + c / F;
            int ok = c % F == 2 * d && tok < n && (nm[0] == 't' || plan_u(&pl, r / 2));
            v = ok ? foff : 0;
        } else if (!strcmp(nm, "moff"))
            v = r ? fpad : 0;
        else if (!strcmp(nm, "pmask")) {
            uint32_t row = c - 1;
            int ok = 1;
            if (c && pl.path == MPCACHE_PATH_FORCED)
                ok = pl.f2[row / s->s2] * s->s2 + row % s->s2 < n;
            else if (c)
                ok = plan_w(&pl, row / s->s2);
            v = ok ? 0 : fpad;
        } else
            return 0;
        out[i] = v;
    }
    return 1;
}

double mpcache_topk_margin(const double *sc, const uint8_t *ok, uint32_t n, uint32_t k)
{
    double best[2] = {INFINITY, INFINITY};
    uint8_t *used = calloc(n + 1, 1);
    uint32_t got = 0;
    for (uint32_t r = 0; used && r <= k; r++) {
        uint32_t at = UINT32_MAX;
        for (uint32_t i = 0; i < n; i++)
            if ((!ok || ok[i]) && !used[i] && (at == UINT32_MAX || sc[i] > sc[at]))
                at = i;
        if (at == UINT32_MAX)
            break;
        used[at] = 1;
        if (r + 1 >= k)
            best[got++] = sc[at];
    }
    free(used);
    return got == 2 ? best[0] - best[1] : INFINITY;
}

double mpcache_audit_set(const mpcache_shape *s, uint32_t layer, uint32_t n, const double *vals,
                         size_t nvals, uint32_t g, uint8_t *cl, size_t *used)
{
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    uint32_t Hkv = s->n_kv_heads, G1 = pl.G1, G2 = pl.G2;
    size_t at = 0;
    double mg = INFINITY;
    uint8_t *u = calloc(G1 + 1, 1), *ok = calloc(G2 + 1, 1);
    *used = 0;
    if (!u || !ok) {
        free(u), free(ok);
        return NAN;
    }
    for (uint32_t c = 0; c < G1; c++)
        u[c] = (uint8_t)plan_u(&pl, c);
    if (pl.lv1 && at + (size_t)Hkv * (pl.k1 + 1) * G1 <= nvals) {
        const double *t1 = vals + at, *sc1 = vals + at + (size_t)Hkv * pl.k1 * G1;
        at += (size_t)Hkv * (pl.k1 + 1) * G1;
        for (uint32_t c = 0; c < G1; c++) {
            u[c] = (uint8_t)(pl.f1[0] == c || (pl.nf1 > 1 && pl.f1[1] == c));
            for (uint32_t q = 0; q < pl.k1; q++)
                u[c] |= t1[((size_t)g * pl.k1 + q) * G1 + c] > 0.5;
        }
        double m = mpcache_topk_margin(sc1 + (size_t)g * G1, NULL, G1, pl.k1);
        mg = m < mg ? m : mg;
    }
    memset(cl, 0, G2);
    for (uint32_t c = 0; c < G2; c++)
        ok[c] = u[c / 2];
    if (pl.lv2 && at + (size_t)Hkv * (pl.k2 + 1) * G2 <= nvals) {
        const double *t2 = vals + at, *sc2 = vals + at + (size_t)Hkv * pl.k2 * G2;
        at += (size_t)Hkv * (pl.k2 + 1) * G2;
        for (uint32_t q = 0; q < pl.k2; q++)
            for (uint32_t c = 0; c < G2; c++)
                cl[c] |= t2[((size_t)g * pl.k2 + q) * G2 + c] > 0.5 && ok[c];
        double m = mpcache_topk_margin(sc2 + (size_t)g * G2, ok, G2, pl.k2);
        mg = m < mg ? m : mg;
    } else if (pl.k2 == G2 && mpcache_layer_kind(s, layer) != MPCACHE_LAYER_DENSE) {
        memcpy(cl, ok, G2);
    }
    for (uint32_t c = 0; c < G2; c++)
        cl[c] |= (uint8_t)plan_f2(&pl, c);
    if (mpcache_layer_kind(s, layer) == MPCACHE_LAYER_DENSE)
        memset(cl, 1, G2);
    free(u), free(ok);
    *used = at;
    return mg;
}

void mpcache_audit_scores(const mpcache_shape *s, uint32_t layer, uint32_t n, const double *vals,
                          size_t nvals, uint32_t g, const double **sc1, const double **sc2)
{
    mpcache_plan pl;
    mpcache_plan_layer(s, layer, n, &pl);
    uint32_t Hkv = s->n_kv_heads;
    size_t at = 0;
    *sc1 = *sc2 = NULL;
    if (pl.lv1 && at + (size_t)Hkv * (pl.k1 + 1) * pl.G1 <= nvals) {
        *sc1 = vals + at + (size_t)Hkv * pl.k1 * pl.G1 + (size_t)g * pl.G1;
        at += (size_t)Hkv * (pl.k1 + 1) * pl.G1;
    }
    if (pl.lv2 && at + (size_t)Hkv * (pl.k2 + 1) * pl.G2 <= nvals)
        *sc2 = vals + at + (size_t)Hkv * pl.k2 * pl.G2 + (size_t)g * pl.G2;
}

static mpcache_shape mpcache_shape_of(const mpcache_state *s)
{
    const policy_env *v = &s->env;
    return (mpcache_shape){v->n_heads, v->n_kv_heads, v->head_dim, s->s1,    s->s2,
                           s->alpha,   s->ratio1,     s->ratio2,   s->share, s->skip2,
                           s->mode,    s->thr,        s->window};
}

/* The entries of K' a layer holds before a decode step at kv_len cached entries: the largest
 * over the KV heads (static none: the whole cache). */
static uint32_t mpcache_entries(const mpcache_state *s, uint32_t layer, uint32_t kv_len)
{
    const policy_env *v = &s->env;
    if (shared_layer(s, layer)) /* the same K' as layer - 1's, which it was not given */
        layer--;
    /* a dense layer's K' is the whole prompt plus every decode position: the whole cache */
    uint32_t n = s->mode == ST_NONE || dense_layer(s, layer) ? kv_len : 0;
    for (uint32_t g = 0; s->mode != ST_NONE && !dense_layer(s, layer) && g < v->n_kv_heads; g++) {
        const mpcache_head *h = &s->head[(size_t)layer * v->n_kv_heads + g];
        uint32_t c = h->n;
        while (c > 0 && h->idx[c - 1] >= kv_len)
            c--;
        n = c > n ? c : n;
    }
    return n;
}

/* The ops the secure session runs (secpol.h), with placeholder operands; the static eviction
 * of `threshold` / `topk` is costed as before (it is not run on shares). */
static int mpcache_cost(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                        op_program *prog, errbuf *e)
{
    mpcache_state *s = st;
    const policy_env *v = &s->env;
    mpcache_shape sh = mpcache_shape_of(s);
    int kind = mpcache_layer_kind(&sh, layer);
    if (phase == PHASE_PREFILL) {
        mpcache_ids ids;
        if (s->mode == ST_THRESHOLD) /* on shares: the keep bits and their revealed count */
            return mpcache_emit_static(prog, &sh, layer, kv_len, OP_NONE, &ids, e);
        uint32_t S = 0;
        if (kind == MPCACHE_LAYER_SELECT && s->mode == ST_TOPK) { /* not on shares: an estimate */
            policy_emitter pe = {prog, phase, (int)layer, 0};
            mpcache_cost_static(s, &pe, layer, kv_len);
            int rc = policy_emit_done(&pe, "mpcache", e);
            if (rc)
                return rc;
        }
        for (uint32_t g = 0; g < v->n_kv_heads; g++)
            S = s->stat_count[(size_t)layer * v->n_kv_heads + g] > S
                    ? s->stat_count[(size_t)layer * v->n_kv_heads + g]
                    : S;
        if (s->mode == ST_NONE || S == 0)
            S = kv_len;
        return mpcache_emit_prefill(prog, &sh, layer, S, OP_NONE, &ids, e);
    }
    uint32_t n = mpcache_entries(s, layer, kv_len);
    (void)kept;
    const mpcache_ids *src = kind == MPCACHE_LAYER_SHARED ? &s->ids[layer - 1] : NULL;
    /* after a threshold prompt the first step begins with the compaction to the revealed count */
    uint32_t P0 = s->mode == ST_THRESHOLD && kind != MPCACHE_LAYER_DENSE && kv_len == v->prompt_len
                      ? v->prompt_len
                      : 0;
    int rc = mpcache_emit_decode_first(prog, &sh, layer, n, P0, OP_NONE, OP_NONE, OP_NONE, OP_NONE,
                                       src, &s->ids[layer], e);
    if (!rc)
        rc = mpcache_emit_mask(prog, &sh, layer, n, OP_NONE, &s->ids[layer], e);
    return rc;
}

/* The secure step attends the plan's public bound of rows (secpol.h), not the selection's
 * count: the same function the secure session lowers its steps with. */
static void mpcache_attend(void *st, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                           uint32_t *rows)
{
    mpcache_state *s = st;
    mpcache_shape sh = mpcache_shape_of(s);
    uint32_t R = mpcache_attend_rows(&sh, layer, mpcache_entries(s, layer, kv_len));
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++)
        rows[g] = R;
    (void)kept;
}

/* The first decode step after a threshold prompt begins with the compaction (mpcache_cost's P0). */
static int mpcache_one_time(void *st, uint32_t pos)
{
    mpcache_state *s = st;
    mpcache_shape sh = mpcache_shape_of(s);
    int any = 0;
    for (uint32_t l = 0; l < s->env.n_layers; l++)
        any |= mpcache_layer_kind(&sh, l) != MPCACHE_LAYER_DENSE;
    return s->mode == ST_THRESHOLD && s->env.prompt_len > 0 && pos == s->env.prompt_len && any;
}

const policy_ops policy_mpcache = {
    .name = "mpcache",
    .version = 1,
    .summary = "static look-once eviction + two-level clustered dynamic selection with the "
               "linearized bound; adjacent layers share indices",
    .params = mpcache_params,
    .n_params = sizeof mpcache_params / sizeof mpcache_params[0],
    .init = mpcache_init,
    .fini = mpcache_fini,
    .needs = mpcache_needs,
    .layer_needs = mpcache_layer_needs,
    .observe = mpcache_observe,
    .prefill = mpcache_prefill,
    .select = mpcache_select,
    .emit_cost = mpcache_cost,
    .attend = mpcache_attend,
    .one_time = mpcache_one_time,
    .secure = &policy_mpcache_secure,
    .metric_stride = "16",
    .stateless_select = 1, /* prev and ids: the layer below's, in the same step */
    .layer_local = 1,
};
