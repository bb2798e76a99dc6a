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
#include "protocols/program/opb.h"
#include "policy.h"
#include "cluster.h"
#include "mpcache_ops.h"
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

enum { ST_THRESHOLD = CLUSTER_THRESHOLD, ST_TOPK = CLUSTER_TOPK, ST_NONE = CLUSTER_NONE };

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

/* Rules between parameters: s1 = 2·s2; under kv_budget no explicit static threshold. */
static int mpcache_check(const policy_args *a, errbuf *e)
{
    const policy_ops *p = &policy_mpcache;
    uint32_t s1, s2;
    char at[600];
    int rc = policy_arg_u32(p, a, "s1", &s1, e);
    if (!rc)
        rc = policy_arg_u32(p, a, "s2", &s2, e);
    if (rc)
        return rc;
    const kv_param *w1;
    policy_arg(p, a, "s1", &w1);
    if (s1 != 2 * s2)
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy mpcache needs s1 = 2·s2 (got s1 = %u, s2 = %u)\n"
                       "  hint: each level-1 cluster splits into two level-2 clusters",
                       policy_at(a, w1 ? "s1" : "s2", at, sizeof at), s1, s2);
    const kv_param *st;
    const char *mode = policy_arg(p, a, "static", &st);
    /* given: at a scenario's line, or on the command line (whose list holds only those) */
    int given = st && (st->line > 0 || (a->path && !strcmp(a->path, "--policy-param")));
    if (given && mode && !strcmp(mode, "threshold") && policy_arg(p, a, "kv_budget", NULL))
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy mpcache: 'static: threshold' keeps a data-dependent share of the "
                       "prompt, which kv_budget cannot set\n"
                       "  hint: static: topk or static: none (kv_budget's default)",
                       policy_at(a, "static", at, sizeof at));
    return MS_OK;
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
    double f = 0;
    if (!rc)
        rc = policy_kv_budget(p, a, &f, e);
    if (!rc)
        rc = mpcache_check(a, e);
    if (rc)
        return rc;
    s->share = share != 0;
    s->skip2 = skip2 != 0;
    if (f > 0) {
        /* kv_budget F: the static step keeps s of the prompt (topk: static_ratio; threshold, a
         * data-dependent share, gives way to none: s = 1), the dynamic step F/s of those, so
         * that F of the cache is attended; level 1 keeps at least what level 2 needs */
        if (s->mode == ST_THRESHOLD)
            s->mode = ST_NONE;
        double keep = s->mode == ST_TOPK ? s->sratio : 1.0;
        if (keep < f)
            keep = s->sratio = f;
        s->ratio2 = f / keep;
        s->ratio1 = s->ratio2 > 0.5 ? s->ratio2 : 0.5;
    }
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
    uint32_t P = v->prompt_len, Hkv = v->n_kv_heads;
    if (!own_layer(s, o->layer))
        return MS_OK;
    uint32_t g0 = o->kv_lo, g1 = o->kv_hi ? o->kv_hi : Hkv;
    if (o->pos >= P) {
        for (uint32_t g = g0; g < g1; g++)
            if (head_push(&s->head[(size_t)o->layer * Hkv + g], s->s2, v->head_dim, o->pos,
                          o->k + (size_t)g * v->head_dim, (float)s->alpha))
                return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
        return MS_OK;
    }
    cluster_vote(s->mode, s->thr, s->pass, s->colsum, s->vote, v, o);
    return MS_OK;
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
            uint32_t n = cluster_static_set(s->mode, dense_layer(s, src), s->sratio, s->pass,
                                            s->vote, v, src, g, s->work);
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
            if (cluster_read_keys(v, l, j, in, s->kbuf)) {
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
    return cluster_bound_score(s->alpha, s->env.head_dim, s->qs, mx, mn, mx2, mn2);
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
    /* ∪ {0} ∪ {G1-1 if partial} (a bitmap in cand's storage: G1 ≤ G2 bytes fit) */
    uint32_t nc =
        cluster_parents(s->c1, G1, G2, s->ratio1, partial, s->sel1, s->work, (uint8_t *)s->cand);
    /* every closed 16-cluster at once (most are candidates: a pair of them per level-1
     * choice); the open ones from their running bounds */
    uint32_t done2 = h->n / s2 < G2 ? h->n / s2 : G2;
    mix_scores(h->mix2, done2, s->qs, d, s->c2);
    for (uint32_t c = done2; c < G2; c++)
        s->c2[c] = mix_score(s, h->run + (size_t)(c % 2) * d, h->run + (size_t)(2 + c % 2) * d,
                             NULL, NULL);
    cluster_keep(s->c2, s->sel1, nc, G2, s->ratio2, partial, s2, h->idx, n, s->sel2, s->work, row);
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
        cluster_group_query(q, g, G, d, s->qs);
        if (dynamic_select(s, &s->head[(size_t)layer * Hkv + g], pos, keep + (size_t)g * pos))
            return err_set(e, MS_ERR_INTERNAL,
                           "policy mpcache: layer %u holds a key at or past position %u", layer,
                           pos);
    }
    memcpy(s->prev, keep, sz);
    return MS_OK;
}

/* ---- the selection on shares: its parameters (mpcache_ops.h; the ops in mpcache_ops.c) ---- */

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
        uint32_t c = cluster_entries(h->idx, h->n, kv_len);
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
    mpcache_shape sh = mpcache_shape_of(s);
    (void)kept;
    return cluster_emit(prog, &sh, phase, layer, kv_len, s->env.prompt_len,
                        s->stat_count + (size_t)layer * s->env.n_kv_heads,
                        phase == PHASE_PREFILL ? 0 : mpcache_entries(s, layer, kv_len), s->ids,
                        "mpcache", e);
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
    return cluster_one_time(&sh, s->env.n_layers, s->env.prompt_len, pos);
}

const policy_ops policy_mpcache = {
    .name = "mpcache",
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
    .stateless_select = 1, /* prev and ids: the layer below's, in the same step */
    .layer_local = 1,
    .check = mpcache_check,
    .budget_keys = "ratio1|ratio2|static_ratio|static_threshold",
};
