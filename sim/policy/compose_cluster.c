/* compose_cluster.c — the cluster blocks of a composition (compose_int.h): a static look-once
 * prefilter of the prompt, cluster granularity over what it keeps, the linearised α-bound score
 * and a one- or two-level (hierarchical) top-k of the clusters.
 *
 * The blocks, after MPCache (zwxandy/MPCache @55e401b,
 * llama_flash_attn_monkey_patch_compression.py; the hand-written policy_mpcache.c):
 *   static       at the end of the prompt, per layer: the last w = window·P prompt queries
 *                (window/2 above 24000 tokens) vote; `threshold` keeps key j when the head mean of
 *                a window query's attention on j reaches the threshold (one set for all heads),
 *                `topk` keeps the ratio·P keys of largest summed window attention per KV head,
 *                `none` keeps the prompt; K' is that set followed by every generated entry;
 *   clusters     K' cut into clusters of `size` consecutive entries (per channel key max and
 *                min); with two levels a parent is a pair of clusters;
 *   cluster_bounds  a cluster's score q·(α·max + (1−α)·min), q the KV head's summed queries;
 *   select       top-k of floor(G·topk_ratio) of the G clusters; with two levels first
 *                floor(G1·ratio1) of the G1 parents, then the clusters of the chosen parents
 *                compete; the first cluster (and parent) and, when the last parent is unfilled,
 *                the last cluster (and parent) are always kept. One level is two levels with
 *                every parent chosen.
 * Layers: `layers: {dense: 2}` keeps layers 0 and 1 dense, `share: {layers: 2, from: 2}` lets
 * layers 2k+1 (k ≥ 1) use layer 2k's selection. The ops of each block are those of MPCache on
 * shares (mpcache_ops.h), emitted with the composition's shapes: the static vote and its top-k
 * or threshold, the cluster bounds and their upkeep, the level-1 and level-2 top-k, the gather
 * of the chosen clusters' rows and the mask. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "compose_int.h"
#include "mpcache_ops.h"
#include "protocols/program/opb.h"

enum { ST_THRESHOLD = CLUSTER_THRESHOLD, ST_TOPK = CLUSTER_TOPK, ST_NONE = CLUSTER_NONE };

typedef struct cl_head {
    uint32_t *idx;   /* K' positions, in order */
    uint32_t n, cap; /* entries, capacity */
    float *mx, *mn;  /* [cap / s2 + 1][d] per-cluster key bounds */
} cl_head;

typedef struct clstate {
    const cslot *sl;
    policy_env env;
    mpcache_shape sh;
    double sratio, wfrac;
    uint32_t dense, lsh, lfrom;
    uint8_t *pass;  /* [L][P] threshold votes */
    double *colsum; /* POLICY_SPAN_MAX × (P + 1) */
    float *vote;    /* [L][Hkv][P] topk votes */
    cl_head *head;  /* [L][Hkv] */
    uint8_t *prev;  /* the last selecting layer's rows of this step */
    float *c1, *c2, *qs, *kbuf;
    uint32_t *work, *sel1, *sel2, *cand, *stat_count;
    mpcache_ids *ids;
} clstate;

static void cl_fini(void *st)
{
    clstate *s = st;
    if (!s)
        return;
    for (size_t i = 0; s->head && i < (size_t)s->env.n_layers * s->env.n_kv_heads; i++) {
        free(s->head[i].idx);
        free(s->head[i].mx);
        free(s->head[i].mn);
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

static int has(const cslot *sl, const char *key)
{
    for (size_t i = 0; i < sl->ops.n_params; i++)
        if (!strcmp(sl->params[i].key, key))
            return 1;
    return 0;
}

static int dbl(const cslot *sl, const policy_args *a, const char *key, double dflt, double *out,
               errbuf *e)
{
    *out = dflt;
    return has(sl, key) ? policy_arg_double(&sl->ops, a, key, out, e) : MS_OK;
}

static int u32(const cslot *sl, const policy_args *a, const char *key, uint32_t dflt, uint32_t *out,
               errbuf *e)
{
    *out = dflt;
    return has(sl, key) ? policy_arg_u32(&sl->ops, a, key, out, e) : MS_OK;
}

/* The parameters into s (s->sh's shapes, the static step, the layers). */
static int cl_args(clstate *s, const cslot *sl, const policy_args *a, errbuf *e)
{
    const cspec *sp = &sl->sp;
    uint32_t s2 = 16;
    double f = 0;
    int mode = sp->stat_mode, rc;
    char at[600];
    s->sh.alpha = 0.6;
    rc = dbl(sl, a, "alpha", 0.6, &s->sh.alpha, e);
    if (!rc)
        rc = u32(sl, a, "cluster", sp->csize, &s2, e);
    if (!rc)
        rc = dbl(sl, a, "ratio1", 1, &s->sh.ratio1, e);
    if (!rc)
        rc = dbl(sl, a, "topk_ratio", 0, &s->sh.ratio2, e);
    if (!rc && has(sl, "static"))
        rc = policy_arg_choice(&sl->ops, a, "static", &mode, e);
    if (!rc)
        rc = dbl(sl, a, "static_threshold", 1e-4, &s->sh.thr, e);
    if (!rc)
        rc = dbl(sl, a, "static_ratio", 1, &s->sratio, e);
    if (!rc)
        rc = dbl(sl, a, "window_frac", 0.2, &s->wfrac, e);
    if (!rc)
        rc = u32(sl, a, "dense_layers", 0, &s->dense, e);
    if (!rc)
        rc = u32(sl, a, "share_layers", sp->lshare, &s->lsh, e);
    if (!rc)
        rc = u32(sl, a, "share_from", sp->lfrom, &s->lfrom, e);
    if (!rc)
        rc = policy_kv_budget(&sl->ops, a, &f, e);
    if (rc)
        return rc;
    if (sp->levels == 1)
        s->sh.ratio1 = 1; /* every parent: the clusters compete at once */
    /* the layer rules the cluster ops know (mpcache_layer_kind) */
    if (s->dense != 0 && s->dense != 2)
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy %s: cluster granularity keeps 0 or 2 first layers dense, not %u",
                       policy_at(a, "dense_layers", at, sizeof at), sl->name, s->dense);
    if (s->lsh > 1 && (s->lsh != 2 || s->lfrom != 2))
        return err_set(
            e, MS_ERR_INPUT,
            "%spolicy %s: cluster granularity shares a selection between layers 2k "
            "and 2k+1 from layer 2 (share: {layers: 2, from: 2}) or not at all",
            policy_at(a, has(sl, "share_layers") ? "share_layers" : "share_from", at, sizeof at),
            sl->name);
    const kv_param *given = NULL;
    if (has(sl, "static"))
        policy_arg(&sl->ops, a, "static", &given);
    int explicit = given && (given->line > 0 || (a->path && !strcmp(a->path, "--policy-param")));
    if (f > 0 && mode == ST_THRESHOLD && explicit)
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy %s: 'static: threshold' keeps a data-dependent share of the "
                       "prompt, which kv_budget cannot set\n"
                       "  hint: static: topk or static: none (kv_budget's default)",
                       policy_at(a, "static", at, sizeof at), sl->name);
    if (f > 0) {
        /* kv_budget F: the static step keeps s of the prompt (topk: static_ratio; threshold
         * gives way to none: s = 1), the clusters F/s of K', so that F of the cache is
         * attended; level 1 keeps at least what level 2 needs (as policy_mpcache.c) */
        if (mode == ST_THRESHOLD)
            mode = ST_NONE;
        double keep = mode == ST_TOPK ? s->sratio : 1.0;
        if (keep < f)
            keep = s->sratio = f;
        s->sh.ratio2 = f / keep;
        if (sp->levels == 2)
            s->sh.ratio1 = s->sh.ratio2 > 0.5 ? s->sh.ratio2 : 0.5;
    }
    s->sh.s2 = s2;
    s->sh.s1 = 2 * s2;
    s->sh.static_mode = mode;
    s->sh.share = s->lsh == 2;
    s->sh.skip2 = s->dense == 2;
    return MS_OK;
}

int compose_cluster_check(const cslot *sl, const policy_args *a, errbuf *e)
{
    clstate s;
    memset(&s, 0, sizeof s);
    return cl_args(&s, sl, a, e);
}

int compose_cluster_init(const cslot *sl, const policy_env *env, const policy_args *a, void **st,
                         errbuf *e)
{
    clstate *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", sl->name);
    s->sl = sl;
    s->env = *env;
    int rc = cl_args(s, sl, a, e);
    if (rc) {
        free(s);
        return rc;
    }
    uint32_t P = env->prompt_len, L = env->n_layers, Hkv = env->n_kv_heads, d = env->head_dim;
    double wf = P > 24000 ? s->wfrac / 2 : s->wfrac;
    s->sh.n_heads = env->n_heads;
    s->sh.n_kv_heads = Hkv;
    s->sh.head_dim = d;
    s->sh.window = (uint32_t)(wf * P);
    size_t G2max = env->max_len / s->sh.s2 + 4;
    s->head = calloc((size_t)L * Hkv, sizeof *s->head);
    s->prev = malloc((size_t)Hkv * env->max_len + 1);
    s->c1 = malloc(G2max * sizeof *s->c1);
    s->c2 = malloc(G2max * sizeof *s->c2);
    s->qs = malloc((size_t)d * sizeof *s->qs);
    s->kbuf = malloc((size_t)Hkv * d * sizeof *s->kbuf);
    s->work = malloc((env->max_len + 1) * sizeof *s->work);
    s->sel1 = malloc(G2max * sizeof *s->sel1);
    s->sel2 = malloc(G2max * sizeof *s->sel2);
    s->cand = malloc(G2max * sizeof *s->cand);
    s->stat_count = calloc((size_t)L * Hkv, sizeof *s->stat_count);
    s->ids = calloc((size_t)L + 1, sizeof *s->ids);
    int ok = s->head && s->prev && s->c1 && s->c2 && s->qs && s->kbuf && s->work && s->sel1 &&
             s->sel2 && s->cand && s->stat_count && s->ids;
    if (ok && s->sh.static_mode == ST_THRESHOLD) {
        ok = (s->pass = calloc((size_t)L * P + 1, 1)) &&
             (s->colsum = malloc(POLICY_SPAN_MAX * ((size_t)P + 1) * sizeof *s->colsum));
    } else if (ok && s->sh.static_mode == ST_TOPK) {
        ok = !!(s->vote = calloc((size_t)L * Hkv * P + 1, sizeof *s->vote));
    }
    if (!ok) {
        cl_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", sl->name);
    }
    *st = s;
    return MS_OK;
}

static int kind(const clstate *s, uint32_t l) { return mpcache_layer_kind(&s->sh, l); }

static int own_layer(const clstate *s, uint32_t l) { return kind(s, l) == MPCACHE_LAYER_SELECT; }

static unsigned cl_needs(void *st, uint32_t pos)
{
    clstate *s = st;
    uint32_t P = s->env.prompt_len;
    if (pos >= P)
        return POLICY_NEED_K | POLICY_NEED_Q;
    return s->sh.static_mode != ST_NONE && pos + s->sh.window >= P ? POLICY_NEED_ATT : 0;
}

static unsigned cl_layer_needs(void *st, uint32_t layer, uint32_t pos)
{
    return own_layer(st, layer) ? cl_needs(st, pos) : 0;
}

/* Appends position pos with keys k (d floats) to a head's K' and its cluster's bounds. */
static int head_push(cl_head *h, uint32_t s2, uint32_t d, uint32_t pos, const float *k)
{
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? 2 * h->cap : 64;
        size_t nc = (size_t)cap / s2 + 1;
        uint32_t *idx = realloc(h->idx, (size_t)cap * sizeof *idx);
        if (idx)
            h->idx = idx;
        float *mx = idx ? realloc(h->mx, nc * d * sizeof *mx) : NULL;
        if (mx)
            h->mx = mx;
        float *mn = mx ? realloc(h->mn, nc * d * sizeof *mn) : NULL;
        if (!mn)
            return MS_ERR_NOMEM;
        h->mn = mn;
        h->cap = cap;
    }
    size_t at = (size_t)(h->n / s2) * d;
    if (h->n % s2 == 0) {
        memcpy(h->mx + at, k, d * sizeof *k);
        memcpy(h->mn + at, k, d * sizeof *k);
    } else {
        policy_bounds_update(h->mx + at, h->mn + at, k, d);
    }
    h->idx[h->n++] = pos;
    return MS_OK;
}

static int cl_observe(void *st, const policy_obs *o, errbuf *e)
{
    clstate *s = st;
    const policy_env *v = &s->env;
    uint32_t P = v->prompt_len, Hkv = v->n_kv_heads;
    if (!own_layer(s, o->layer))
        return MS_OK;
    uint32_t g0 = o->kv_lo, g1 = o->kv_hi ? o->kv_hi : Hkv;
    if (o->pos >= P) { /* a generated entry joins K' */
        for (uint32_t g = g0; g < g1; g++)
            if (head_push(&s->head[(size_t)o->layer * Hkv + g], s->sh.s2, v->head_dim, o->pos,
                          o->k + (size_t)g * v->head_dim))
                return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", s->sl->name);
        return MS_OK;
    }
    cluster_vote(s->sh.static_mode, s->sh.thr, s->pass, s->colsum, s->vote, v, o);
    return MS_OK;
}

static int cl_prefill(void *st, errbuf *e)
{
    clstate *s = st;
    const policy_env *v = &s->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, P = v->prompt_len;
    uint8_t *in = malloc((size_t)Hkv * P + 1);
    if (!in)
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", s->sl->name);
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < v->n_layers; l++) {
        uint32_t src = kind(s, l) == MPCACHE_LAYER_SHARED ? l - 1 : l;
        memset(in, 0, (size_t)Hkv * P);
        for (uint32_t g = 0; !rc && g < Hkv; g++) {
            uint32_t n = cluster_static_set(s->sh.static_mode, !own_layer(s, src), s->sratio,
                                            s->pass, s->vote, v, src, g, s->work);
            if (n == UINT32_MAX) {
                rc = err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", s->sl->name);
                break;
            }
            s->stat_count[(size_t)l * Hkv + g] = n;
            for (uint32_t i = 0; i < n; i++)
                in[(size_t)g * P + s->work[i]] = 1;
        }
        for (uint32_t j = 0; !rc && own_layer(s, l) && j < P; j++) {
            int any = 0;
            for (uint32_t g = 0; g < Hkv; g++)
                any |= in[(size_t)g * P + j];
            if (!any)
                continue;
            if (cluster_read_keys(v, l, j, in, s->kbuf)) {
                rc = err_set(e, MS_ERR_INPUT, "policy %s: cannot read the prompt's keys",
                             s->sl->name);
                break;
            }
            for (uint32_t g = 0; !rc && g < Hkv; g++)
                if (in[(size_t)g * P + j] && head_push(&s->head[(size_t)l * Hkv + g], s->sh.s2, d,
                                                       j, s->kbuf + (size_t)g * d))
                    rc = err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", s->sl->name);
        }
    }
    free(in);
    return rc;
}

/* The α-bound score of the query s->qs against bounds (mx, mn), merged with (mx2, mn2) when
 * given. */
static float bound_score(const clstate *s, const float *mx, const float *mn, const float *mx2,
                         const float *mn2)
{
    return cluster_bound_score(s->sh.alpha, s->env.head_dim, s->qs, mx, mn, mx2, mn2);
}

/* The clusters' selection of one KV head: marks the kept positions (< pos) in row; 1 when K'
 * holds a position ≥ pos. */
static int cluster_select(clstate *s, const cl_head *h, uint32_t pos, uint8_t *row)
{
    uint32_t d = s->env.head_dim, n = h->n, s1 = s->sh.s1, s2 = s->sh.s2;
    if (n > 0 && h->idx[n - 1] >= pos)
        return 1;
    if (n == 0)
        return 0;
    uint32_t G1 = (n + s1 - 1) / s1, G2 = (n + s2 - 1) / s2;
    int partial = n % s1 != 0;
    /* level 1: the parents (pairs of clusters), their bounds the pair's */
    for (uint32_t c = 0; c < G1; c++) {
        int pair = 2 * c + 1 < G2;
        const float *x0 = h->mx + (size_t)2 * c * d, *n0 = h->mn + (size_t)2 * c * d;
        s->c1[c] = bound_score(s, x0, n0, pair ? x0 + d : NULL, pair ? n0 + d : NULL);
    }
    uint32_t nc =
        cluster_parents(s->c1, G1, G2, s->sh.ratio1, partial, s->sel1, s->work, (uint8_t *)s->cand);
    /* level 2: the clusters of the chosen parents */
    for (uint32_t c = 0; c < G2; c++)
        s->c2[c] = bound_score(s, h->mx + (size_t)c * d, h->mn + (size_t)c * d, NULL, NULL);
    cluster_keep(s->c2, s->sel1, nc, G2, s->sh.ratio2, partial, s2, h->idx, n, s->sel2, s->work,
                 row);
    return 0;
}

static int cl_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     errbuf *e)
{
    clstate *s = st;
    const policy_env *v = &s->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, G = v->n_heads / Hkv;
    size_t sz = (size_t)Hkv * pos;
    int k = kind(s, layer);
    if (k == MPCACHE_LAYER_DENSE) {
        memset(keep, 1, sz);
        return MS_OK;
    }
    if (k == MPCACHE_LAYER_SHARED) {
        memcpy(keep, s->prev, sz);
        return MS_OK;
    }
    memset(keep, 0, sz);
    for (uint32_t g = 0; g < Hkv; g++) {
        cluster_group_query(q, g, G, d, s->qs); /* the group's queries summed */
        if (cluster_select(s, &s->head[(size_t)layer * Hkv + g], pos, keep + (size_t)g * pos))
            return err_set(e, MS_ERR_INTERNAL,
                           "policy %s: layer %u holds a key at or past position %u", s->sl->name,
                           layer, pos);
    }
    memcpy(s->prev, keep, sz);
    return MS_OK;
}

/* The entries of K' a layer holds at kv_len cached entries: the largest over the KV heads. */
static uint32_t entries(const clstate *s, uint32_t layer, uint32_t kv_len)
{
    const policy_env *v = &s->env;
    if (kind(s, layer) == MPCACHE_LAYER_SHARED)
        layer--;
    if (s->sh.static_mode == ST_NONE || kind(s, layer) == MPCACHE_LAYER_DENSE)
        return kv_len;
    uint32_t n = 0;
    for (uint32_t g = 0; g < v->n_kv_heads; g++) {
        const cl_head *h = &s->head[(size_t)layer * v->n_kv_heads + g];
        uint32_t c = cluster_entries(h->idx, h->n, kv_len);
        n = c > n ? c : n;
    }
    return n;
}

/* The blocks' ops: the static block's (its threshold on shares with the count revealed, or
 * its top-k: the window votes, TOPK, the compaction), the cluster bounds at the prompt, and at
 * each decode step the upkeep, the level-1 and level-2 top-k, the gather and the mask. */
static int cl_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                   op_program *prog, errbuf *e)
{
    clstate *s = st;
    (void)kept;
    return cluster_emit(prog, &s->sh, phase, layer, kv_len, s->env.prompt_len,
                        s->stat_count + (size_t)layer * s->env.n_kv_heads,
                        phase == PHASE_PREFILL ? 0 : entries(s, layer, kv_len), s->ids, s->sl->name,
                        e);
}

/* The rows a secure step attends: the selection's public bound (mpcache_attend_rows). */
static void cl_attend(void *st, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                      uint32_t *rows)
{
    clstate *s = st;
    uint32_t R = mpcache_attend_rows(&s->sh, layer, entries(s, layer, kv_len));
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++)
        rows[g] = R;
    (void)kept;
}

/* After a threshold prompt the first decode step begins with the compaction. */
static int cl_one_time(void *st, uint32_t pos)
{
    clstate *s = st;
    return cluster_one_time(&s->sh, s->env.n_layers, s->env.prompt_len, pos);
}

/* ---- the selection on shares ------------------------------------------------------------ */

/* MPCache's secure session (policy_mpcache_secure.c) with the composition's shapes: static
 * `none` and `threshold` run on shares, `topk` takes its kept sets from the replay. a->loaded is
 * the composition (its slot: the ops are the slot's first member). */
static int cl_sec_config(const policy_env *env, const policy_args *a, void **cfg, errbuf *e)
{
    *cfg = NULL;
    int slot = policy_compose_slot(a->loaded);
    if (slot < 0)
        return err_set(e, MS_ERR_INTERNAL, "a cluster composition's parameters were not loaded");
    const cslot *sl = (const cslot *)a->loaded;
    clstate s;
    memset(&s, 0, sizeof s);
    int rc = cl_args(&s, sl, a, e);
    if (rc || s.sh.static_mode == ST_TOPK)
        return rc;
    double wf = env->prompt_len > 24000 ? s.wfrac / 2 : s.wfrac;
    s.sh.n_heads = env->n_heads;
    s.sh.n_kv_heads = env->n_kv_heads;
    s.sh.head_dim = env->head_dim;
    s.sh.window = (uint32_t)(wf * env->prompt_len);
    mpcache_sec *cf = calloc(1, sizeof *cf);
    if (!cf)
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", sl->name);
    cf->mpc = s.sh;
    cf->n_layers = env->n_layers;
    if (s.sh.static_mode == ST_THRESHOLD &&
        !(cf->static_count = calloc(env->n_layers + 1, sizeof *cf->static_count))) {
        free(cf);
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", sl->name);
    }
    *cfg = cf;
    return MS_OK;
}

static secpol_ops cl_secure;

void compose_cluster_ops(policy_ops *ops)
{
    cl_secure = policy_mpcache_secure; /* the same session, the composition's parameters */
    cl_secure.config = cl_sec_config;
    ops->secure = &cl_secure;
    ops->fini = cl_fini;
    ops->needs = cl_needs;
    ops->layer_needs = cl_layer_needs;
    ops->observe = cl_observe;
    ops->prefill = cl_prefill;
    ops->select = cl_select;
    ops->count = NULL;
    ops->emit_cost = cl_emit;
    ops->attend = cl_attend;
    ops->one_time = cl_one_time;
    ops->stateless_select = 1; /* prev and ids: the layer below's, in the same step */
    ops->layer_local = 1;
}
