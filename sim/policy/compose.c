/* compose.c — the composition engine (compose.h): a policy read from a YAML file of blocks.
 *
 * The blocks, in the order a selection applies them to the T cached entries of one KV head:
 *   keep      sinks [0, s) and a recent window [T − r, T), always kept (public positions);
 *   score     a number per candidate entry: accumulated attention (H2O), windowed attention
 *             with pooling (SnapKV), squared key norm, the query against page bounds (Quest's
 *             min/max), or a seeded random number;
 *   unit      the granularity: the candidate tokens, or pages of P consecutive positions (a
 *             page's score is its bound score, or the sum of its candidates' scores); clusters
 *             (with a static prefilter and the linearised bound, one or two levels) are run by
 *             compose_cluster.c;
 *   select    top-k of the candidate units (a count, a ratio of the prompt, or a capacity that
 *             counts the kept sinks and window) or a threshold on the score;
 *   when      once after the prompt (later tokens are all kept), every decode step, or every N
 *             steps; with `evict: permanent` an entry once dropped never returns (the candidates
 *             are the entries still cached: H2O's real drop);
 *   layers    every layer the same budget, the first N layers dense, or PyramidKV's pyramid of
 *             per-layer counts; share: one selection per KV head (its G query heads' scores
 *             summed) or one per layer (every head's scores summed), and groups of N layers
 *             using their first layer's selection.
 * The MPC cost is derived from the same blocks (emit_cost): each appends its own ops through
 * the op builder (protocols/program/opb.h), with the shapes of the selection it made. */
#include "compose.h"
#include "compose_cs.h"
#include "page_ops.h"
#include "pcheck.h"
#include "protocols/base/yamlx.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cslot *slots[POLICY_COMPOSE_MAX];
static size_t n_slots;
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;

static void cs_fini(void *st)
{
    cstate *s = st;
    if (!s)
        return;
    free(s->score);
    free(s->vote);
    free(s->mx);
    free(s->mn);
    free(s->alive);
    free(s->sel_at);
    free(s->lk);
    free(s->lrow);
    free(s->us);
    free(s->tmp);
    free(s->acc);
    free(s->cand);
    free(s->sel);
    free(s->work);
    free(s->row);
    free(s->kmax);
    free(s->qmax);
    free(s->qlast);
    free(s->qseen);
    free(s->preal);
    free(s->ppub);
    free(s);
}

static int has_param(const cslot *sl, const char *key)
{
    for (size_t i = 0; i < sl->ops.n_params; i++)
        if (!strcmp(sl->params[i].key, key))
            return 1;
    return 0;
}

/* A whole-number parameter if the composition has it, else dflt. */
static int arg_u32(const cslot *sl, const policy_args *a, const char *key, uint32_t dflt,
                   uint32_t *out, errbuf *e)
{
    *out = dflt;
    return has_param(sl, key) ? policy_arg_u32(&sl->ops, a, key, out, e) : MS_OK;
}

static int arg_dbl(const cslot *sl, const policy_args *a, const char *key, double dflt, double *out,
                   errbuf *e)
{
    *out = dflt;
    return has_param(sl, key) ? policy_arg_double(&sl->ops, a, key, out, e) : MS_OK;
}

static int cs_init_at(size_t slot, const policy_env *env, const policy_args *a, void **st,
                      errbuf *e)
{
    const cslot *sl = slots[slot];
    const cspec *sp = &sl->sp;
    if (sp->cluster)
        return compose_cluster_init(sl, env, a, st, e);
    cstate *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", sl->name);
    s->sl = sl;
    s->sp = sp;
    s->env = *env;
    s->G = env->n_heads / (env->n_kv_heads ? env->n_kv_heads : 1);
    uint32_t P = env->prompt_len, cap = 0, seed = 0;
    double rr = 0, kr = 0;
    int pool = sp->maxpool ? 0 : 1;
    int rc = arg_u32(sl, a, "sinks", 0, &s->sinks, e);
    if (!rc && sp->has_recent)
        rc = arg_u32(sl, a, "recent", 0, &s->recent, e);
    if (!rc && sp->recent_ratio && !s->recent && !(rc = arg_dbl(sl, a, "recent_ratio", 0, &rr, e)))
        s->recent = (uint32_t)(rr * P); /* int(ratio·P), as H2O fixes its budgets */
    if (!rc)
        rc = arg_u32(sl, a, "window", 32, &s->window, e);
    if (!rc)
        rc = arg_u32(sl, a, "kernel", 1, &s->kernel, e);
    if (!rc && has_param(sl, "pooling"))
        rc = policy_arg_choice(&sl->ops, a, "pooling", &pool, e);
    if (!rc)
        rc = arg_u32(sl, a, "seed", 0, &seed, e);
    if (!rc)
        rc = arg_u32(sl, a, "page", 1, &s->page, e);
    if (!rc)
        rc = arg_u32(sl, a, "every", 1, &s->every, e);
    if (!rc)
        rc = arg_u32(sl, a, "min_units", 0, &s->min_units, e);
    if (!rc)
        rc = arg_u32(sl, a, "dense_layers", 0, &s->dense, e);
    if (!rc)
        rc = arg_dbl(sl, a, "threshold", 0, &s->thr, e);
    if (!rc && (sp->ktype == KT_TOKENS || sp->ktype == KT_RATIO))
        rc = arg_u32(sl, a, "topk", 0, &s->ktok, e);
    if (!rc && sp->ktype == KT_RATIO && !s->ktok && !(rc = arg_dbl(sl, a, "topk_ratio", 0, &kr, e)))
        s->ktok = (uint32_t)(kr * P);
    if (!rc && sp->ktype == KT_CAP)
        rc = arg_u32(sl, a, "capacity", 0, &cap, e);
    if (!rc)
        rc = policy_kv_budget(&sl->ops, a, &s->frac, e);
    if (rc) {
        free(s);
        return rc;
    }
    s->maxpool = pool == 0;
    s->seed = seed;
    s->window = s->window < P ? s->window : P;
    if (sp->ktype == KT_CAP) /* a capacity counts the kept sinks and window */
        s->ktok = cap > s->sinks + s->recent ? cap - s->sinks - s->recent : UINT32_MAX;
    if (s->frac > 0) {
        s->dense = 0; /* F counts every layer */
        /* a fixed window and sinks must fit the budget of the prompt */
        uint32_t n = policy_budget_entries(s->frac, P);
        uint32_t w = s->recent < P ? s->recent : P;
        if (sp->sel != K_NONE && sp->rmode == R_FIXED && (sp->when == W_ONCE || sp->permanent) &&
            n < w + (s->sinks < P ? s->sinks : P)) {
            char at[600];
            rc = err_set(e, MS_ERR_INPUT,
                         "%spolicy %s: kv_budget %g of a %u-entry prompt keeps %u entries, "
                         "fewer than the sinks and recent window (%u) it keeps\n"
                         "  hint: a smaller 'recent' or 'sinks', or a larger kv_budget",
                         policy_at(a, "kv_budget", at, sizeof at), sl->name, s->frac, P, n,
                         w + s->sinks);
            free(s);
            return rc;
        }
    }
    const policy_env *v = env;
    size_t lgt = (size_t)v->n_layers * v->n_kv_heads * v->max_len + 1, T1 = v->max_len + 1;
    s->max_pages = (v->max_len + s->page - 1) / s->page;
    int ok = 1;
    if (sp->score == SC_ATT || sp->score == SC_KEYNORM || sp->score == SC_RANDOM)
        ok = ok && (s->score = calloc(lgt, sizeof *s->score));
    if (sp->score == SC_WINDOW)
        ok = ok && (s->vote = calloc((size_t)v->n_layers * v->n_heads * P + 1, sizeof *s->vote));
    if (sp->score == SC_BOUNDS) {
        size_t nb = (size_t)v->n_layers * v->n_kv_heads * s->max_pages * v->head_dim + 1;
        ok = ok && (s->mx = malloc(nb * sizeof *s->mx)) && (s->mn = malloc(nb * sizeof *s->mn));
        ok = ok && (s->kmax = calloc(v->n_layers + 1, sizeof *s->kmax)) &&
             (s->qmax = calloc(v->n_layers + 1, sizeof *s->qmax));
        if (sp->permanent)
            ok = ok &&
                 (s->qlast = calloc((size_t)v->n_layers * v->n_heads * v->head_dim + 1,
                                    sizeof *s->qlast)) &&
                 (s->qseen = calloc(v->n_layers + 1, 1));
    }
    if (sp->when == W_ONCE || sp->permanent || s->every > 1 || compose_att_shaped(sp)) {
        ok = ok && (s->alive = malloc(lgt));
        if (ok)
            memset(s->alive, 1, lgt);
    }
    ok = ok && (s->sel_at = calloc(v->n_layers + 1, sizeof *s->sel_at));
    if (s->page > 1 && (ok = ok && (s->preal = malloc(v->n_layers + 1))))
        memset(s->preal, -1, v->n_layers + 1);
    if ((ok = ok && (s->ppub = malloc(v->n_layers + 1))))
        memset(s->ppub, -1, v->n_layers + 1);
    if (sp->lshare > 1)
        ok = ok && (s->lrow = malloc((size_t)v->n_kv_heads * v->max_len + 1));
    ok = ok && (s->us = calloc(T1, sizeof *s->us)) && (s->tmp = calloc(T1, sizeof *s->tmp)) &&
         (s->acc = calloc(T1, sizeof *s->acc)) && (s->cand = malloc(T1 * sizeof *s->cand)) &&
         (s->sel = malloc(T1 * sizeof *s->sel)) && (s->work = malloc(T1 * sizeof *s->work)) &&
         (s->row = malloc(T1));
    if (ok && sp->pyramid) {
        uint32_t beta = 20, w = (s->recent < P ? s->recent : P) + s->sinks;
        int64_t C = s->frac > 0 ? policy_budget_entries(s->frac, P) : cap;
        if ((rc = arg_u32(sl, a, "beta", 20, &beta, e))) {
            cs_fini(s);
            return rc;
        }
        ok = ok && (s->lk = calloc(v->n_layers + 1, sizeof *s->lk));
        for (uint32_t l = 0; ok && l < v->n_layers; l++)
            s->lk[l] = compose_pyramid_k(P, C, w, beta, v->n_layers, l);
    }
    if (!ok) {
        cs_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory for %zu entries", sl->name, lgt);
    }
    *st = s;
    return MS_OK;
}

/* init receives no ops pointer: one entry per slot names the composition. */
#define CS_INIT(i)                                                                            \
    static int cs_init_##i(const policy_env *env, const policy_args *a, void **st, errbuf *e) \
    {                                                                                         \
        return cs_init_at(i, env, a, st, e);                                                  \
    }                                                                                         \
    static int cs_check_##i(const policy_args *a, errbuf *e)                                  \
    {                                                                                         \
        return compose_cluster_check(slots[i], a, e);                                         \
    }
CS_INIT(0)
CS_INIT(1)
CS_INIT(2)
CS_INIT(3)
CS_INIT(4)
CS_INIT(5)
CS_INIT(6)
CS_INIT(7)
CS_INIT(8)
CS_INIT(9)
CS_INIT(10)
CS_INIT(11)
CS_INIT(12)
CS_INIT(13)
CS_INIT(14)
CS_INIT(15)
static int (*const cs_checks[POLICY_COMPOSE_MAX])(const policy_args *, errbuf *) = {
    cs_check_0,  cs_check_1,  cs_check_2,  cs_check_3,  cs_check_4,  cs_check_5,
    cs_check_6,  cs_check_7,  cs_check_8,  cs_check_9,  cs_check_10, cs_check_11,
    cs_check_12, cs_check_13, cs_check_14, cs_check_15,
};
static int (*const cs_inits[POLICY_COMPOSE_MAX])(const policy_env *, const policy_args *, void **,
                                                 errbuf *) = {
    cs_init_0, cs_init_1, cs_init_2,  cs_init_3,  cs_init_4,  cs_init_5,  cs_init_6,  cs_init_7,
    cs_init_8, cs_init_9, cs_init_10, cs_init_11, cs_init_12, cs_init_13, cs_init_14, cs_init_15,
};

/* ---- scores ------------------------------------------------------------------------------ */

/* Token scores of KV head g over [0, n) into out (window attention: the pooled votes of the
 * group, as SnapKV's; the others: the carried scores). */
static void token_scores(cstate *s, uint32_t layer, uint32_t g, uint32_t n, float *out)
{
    const policy_env *v = &s->env;
    if (s->sp->score == SC_WINDOW) {
        uint32_t P = v->prompt_len, H = v->n_heads, G = s->G;
        for (uint32_t j = 0; j < n; j++)
            out[j] = 0;
        for (uint32_t h = g * G; h < (g + 1) * G; h++) {
            snap_pool1d(s->vote + ((size_t)layer * H + h) * P, s->tmp, n, s->kernel, s->maxpool);
            for (uint32_t j = 0; j < n; j++)
                out[j] += s->tmp[j];
        }
        float scale = 1.0f / ((float)G * (float)(s->window ? s->window : 1));
        for (uint32_t j = 0; j < n; j++)
            out[j] *= scale;
        return;
    }
    memcpy(out, s->score + ((size_t)layer * v->n_kv_heads + g) * v->max_len, n * sizeof *out);
}

/* Unit scores of KV head g (all heads summed when g is UINT32_MAX) into s->us: per candidate
 * unit u (s->cand[0..nc)), us[u]. */
static void unit_scores(cstate *s, uint32_t layer, uint32_t g, uint32_t c0, uint32_t c1,
                        const float *q, size_t nc)
{
    const policy_env *v = &s->env;
    uint32_t g0 = g == UINT32_MAX ? 0 : g, g1 = g == UINT32_MAX ? v->n_kv_heads : g + 1;
    uint32_t d = v->head_dim;
    if (s->sp->score == SC_ATT && g == UINT32_MAX)
        g1 = 1; /* the layer's score, in KV head 0's row (cs_observe) */
    for (size_t i = 0; i < nc; i++)
        s->us[s->cand[i]] = 0;
    for (uint32_t h = g0; h < g1; h++) {
        if (s->sp->score == SC_BOUNDS) {
            for (size_t i = 0; i < nc; i++) {
                uint32_t u = s->cand[i];
                size_t at = (((size_t)layer * v->n_kv_heads + h) * s->max_pages + u) * d;
                float sc = page_bound_score(q, s->mx + at, s->mn + at, h, s->G, d);
                s->us[u] = g1 - g0 == 1 ? sc : s->us[u] + sc;
            }
            continue;
        }
        if (s->sp->score == SC_RANDOM) {
            for (uint32_t j = c0; j < c1; j++)
                s->acc[j] = compose_rnd(s->seed, layer, h, j);
        } else {
            token_scores(s, layer, h, c1, s->acc);
        }
        if (s->page == 1) {
            for (size_t i = 0; i < nc; i++) {
                uint32_t j = s->cand[i];
                s->us[j] = g1 - g0 == 1 ? s->acc[j] : s->us[j] + s->acc[j];
            }
            continue;
        }
        for (size_t i = 0; i < nc; i++) { /* a page's score: its candidates' sum */
            uint32_t u = s->cand[i], a = u * s->page, b = a + s->page;
            a = a < c0 ? c0 : a;
            b = b > c1 ? c1 : b;
            float sum = 0;
            for (uint32_t j = a; j < b; j++)
                sum += s->acc[j];
            s->us[u] += sum;
        }
    }
}

/* The keep row of KV head g (UINT32_MAX: shared by every head) over T entries into row;
 * alive (or NULL) limits the candidates to the entries still cached. */
static void select_row(cstate *s, uint32_t layer, uint32_t g, uint32_t T, const float *q,
                       const uint8_t *alive, uint8_t *row)
{
    uint32_t sinks, recent, k, c0, c1;
    budget(s, layer, T, &sinks, &recent, &k);
    cand_range(T, sinks, recent, &c0, &c1);
    memset(row, 0, T);
    memset(row, 1, c0);
    memset(row + c1, 1, T - c1);
    if (s->sp->sel == K_NONE || c1 == c0)
        return;
    size_t nc = 0;
    if (s->page == 1) {
        for (uint32_t j = c0; j < c1; j++)
            if (!alive || alive[j])
                s->cand[nc++] = j;
    } else {
        for (uint32_t u = c0 / s->page; u * s->page < c1; u++) {
            uint32_t a = u * s->page < c0 ? c0 : u * s->page, live = !alive;
            for (uint32_t j = a; !live && j < a + s->page && j < c1; j++)
                live = alive[j];
            if (live) /* a page with an entry still cached */
                s->cand[nc++] = u;
        }
    }
    size_t m;
    if (s->sp->sel == K_TOPK && k >= nc) {
        memcpy(s->sel, s->cand, nc * sizeof *s->sel);
        m = nc;
    } else {
        unit_scores(s, layer, g, c0, c1, q, nc);
        if (s->sp->sel == K_TOPK) {
            m = policy_topk(s->us, s->cand, nc, k, s->sel, s->work);
        } else {
            m = 0;
            for (size_t i = 0; i < nc; i++)
                if (s->us[s->cand[i]] >= s->thr)
                    s->sel[m++] = s->cand[i];
        }
    }
    for (size_t i = 0; i < m; i++) {
        uint32_t a = s->sel[i] * s->page, b = a + s->page;
        a = a < c0 ? c0 : a;
        b = b > c1 ? c1 : b;
        for (uint32_t j = a; j < b; j++)
            row[j] = !alive || alive[j];
    }
}

/* Runs the selection of every KV head of layer over T entries into the alive rows. */
static void select_alive(cstate *s, uint32_t layer, uint32_t T, const float *q, uint32_t g0,
                         uint32_t g1)
{
    const policy_env *v = &s->env;
    for (uint32_t g = g0; g < g1; g++) {
        uint8_t *al = s->alive + ((size_t)layer * v->n_kv_heads + g) * v->max_len;
        if (s->sp->share_all && g > g0) {
            memcpy(al, s->alive + ((size_t)layer * v->n_kv_heads + g0) * v->max_len, T);
            continue;
        }
        select_row(s, layer, s->sp->share_all ? UINT32_MAX : g, T, q, s->sp->permanent ? al : NULL,
                   s->row);
        memcpy(al, s->row, T);
    }
}

/* ---- the policy callbacks ---------------------------------------------------------------- */

static unsigned cs_needs(void *st, uint32_t pos)
{
    cstate *s = st;
    uint32_t P = s->env.prompt_len;
    switch (s->sp->score) {
    case SC_ATT: /* once after the prompt: the prompt's only */
        return (!s->sp->att_last || pos + 1 >= P) && (s->sp->when != W_ONCE || pos < P)
                   ? POLICY_NEED_ATT
                   : 0;
    case SC_WINDOW: return pos < P && pos + s->window >= P ? POLICY_NEED_ATT : 0;
    case SC_KEYNORM: return POLICY_NEED_K;
    case SC_BOUNDS: /* the query of a selecting step (every N: its first and each N-th);
                     * evicting for good, the prompt's last too (the prompt's decision) */
        return POLICY_NEED_K |
               ((pos >= P && (pos - P) % s->every == 0) || (s->sp->permanent && pos + 1 == P)
                    ? POLICY_NEED_Q
                    : 0);
    default: return 0;
    }
}

static unsigned cs_layer_needs(void *st, uint32_t layer, uint32_t pos)
{
    cstate *s = st;
    return layer < s->dense || leader(s, layer) != layer ? 0 : cs_needs(st, pos);
}

static int cs_observe(void *st, const policy_obs *o, errbuf *e)
{
    cstate *s = st;
    const policy_env *v = &s->env;
    uint32_t l = o->layer, pos = o->pos, n = pos + 1, G = s->G, d = v->head_dim;
    uint32_t g0 = o->kv_lo, g1 = o->kv_hi ? o->kv_hi : v->n_kv_heads, P = v->prompt_len;
    if (l < s->dense || leader(s, l) != l)
        return MS_OK;
    if (s->sp->score == SC_ATT && s->sp->share_all && o->att) {
        /* one score per layer (in KV head 0's row): every head's row summed in head order;
         * the newest row's is their mean (TOVA) */
        float *row = s->score + (size_t)l * v->n_kv_heads * v->max_len;
        if (s->sp->att_last)
            memset(row, 0, n * sizeof *row);
        for (uint32_t h = 0; h < v->n_heads; h++)
            policy_add_row(row, o->att + (size_t)h * n, n);
        for (uint32_t j = 0; s->sp->att_last && j < n; j++)
            row[j] /= (float)v->n_heads;
    }
    uint32_t gs = s->sp->score == SC_ATT && s->sp->share_all ? g0 : g1; /* per-head scores */
    for (uint32_t g = g0; g < gs; g++) {
        size_t lg = (size_t)l * v->n_kv_heads + g;
        switch (s->sp->score) {
        case SC_ATT: /* the group's rows added to the carried column sums (or replacing them) */
            if (o->att && s->sp->att_last)
                memset(s->score + lg * v->max_len, 0, n * sizeof *s->score);
            for (uint32_t h = g * G; o->att && h < (g + 1) * G; h++)
                policy_add_row(s->score + lg * v->max_len, o->att + (size_t)h * n, n);
            break;
        case SC_WINDOW:
            if (o->att && pos < P && pos + s->window >= P)
                for (uint32_t h = g * G; h < (g + 1) * G; h++)
                    policy_add_row(s->vote + ((size_t)l * v->n_heads + h) * P,
                                   o->att + (size_t)h * n, P - s->window);
            break;
        case SC_KEYNORM:
            if (o->k) {
                double sq = 0;
                for (uint32_t i = 0; i < d; i++)
                    sq += (double)o->k[g * d + i] * o->k[g * d + i];
                s->score[lg * v->max_len + pos] = (float)sq;
            }
            break;
        case SC_BOUNDS:
            if (o->k) {
                size_t at = (lg * s->max_pages + pos / s->page) * d;
                for (uint32_t i = 0; i < d; i++) /* the ops' tolerance */
                    s->kmax[l] = fmaxf(s->kmax[l], fabsf(o->k[(size_t)g * d + i]));
                if (pos % s->page == 0) {
                    memcpy(s->mx + at, o->k + (size_t)g * d, d * sizeof *s->mx);
                    memcpy(s->mn + at, o->k + (size_t)g * d, d * sizeof *s->mn);
                } else {
                    policy_bounds_update(s->mx + at, s->mn + at, o->k + (size_t)g * d, d);
                }
            }
            break;
        default: break;
        }
    }
    if (s->qlast && pos + 1 == P && o->q && g0 == 0) { /* the prompt's decision's query */
        size_t hd = (size_t)v->n_heads * d;
        memcpy(s->qlast + l * hd, o->q, hd * sizeof *s->qlast);
        s->qseen[l] = 1;
    }
    /* a permanent eviction: the step's entry joins, the candidates beyond the budget leave */
    if (s->sp->permanent && pos >= P)
        select_alive(s, l, pos + 1, o->q, g0, g1);
    return MS_OK;
}

static int cs_prefill(void *st, errbuf *e)
{
    cstate *s = st;
    const policy_env *v = &s->env;
    if (s->sp->when != W_ONCE && !s->sp->permanent)
        return MS_OK;
    size_t hd = (size_t)v->n_heads * v->head_dim;
    for (uint32_t l = s->dense; l < v->n_layers; l++) {
        if (leader(s, l) != l)
            continue;
        if (s->qlast && !s->qseen[l]) /* page bounds score the prompt's pages with a query */
            return err_set(e, MS_ERR_INPUT,
                           "policy %s: page_bounds evicting for good scores the prompt's pages "
                           "with the prompt's last query, which layer %u did not observe",
                           s->sl->name, l);
        select_alive(s, l, v->prompt_len, s->qlast ? s->qlast + l * hd : NULL, 0, v->n_kv_heads);
    }
    return MS_OK;
}

static int cs_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     errbuf *e)
{
    cstate *s = st;
    const policy_env *v = &s->env;
    uint32_t Hkv = v->n_kv_heads, P = v->prompt_len;
    if (layer < s->dense) {
        memset(keep, 1, (size_t)Hkv * pos);
        return MS_OK;
    }
    uint32_t lead = leader(s, layer);
    if (lead != layer && s->sp->when == W_STEP && s->every == 1 && s->lrow_at == pos &&
        s->lrow_layer == lead + 1) { /* the leader's rows of this step */
        memcpy(keep, s->lrow, (size_t)Hkv * pos);
        return MS_OK;
    }
    int own = lead == layer;
    layer = lead; /* a follower reads its leader's state (its rows: the leader's scores) */
    int now = (pos - P) % s->every == 0 || s->sel_at[layer] == 0; /* a selecting step */
    if (s->sp->when == W_STEP && !s->sp->permanent && s->qmax && q && now && own) {
        s->qmax[layer] = 0; /* the selecting step's, for the page ops' tolerance */
        for (uint32_t i = 0; i < v->n_heads * v->head_dim; i++)
            s->qmax[layer] = fmaxf(s->qmax[layer], fabsf(q[i]));
    }
    if (s->sp->when == W_STEP && !s->sp->permanent && s->every > 1) {
        /* the leader selects (a later layer keeps its positions, not its own query's choice
         * over the leader's scores), unless it adopted a selection here (cs_adopt) */
        if (now && own && s->sel_at[layer] != pos + 1) {
            select_alive(s, layer, pos, q, 0, Hkv);
            s->sel_at[layer] = pos;
        }
    } else if (s->sp->when == W_STEP && !s->sp->permanent) {
        /* alive: the rows returned, or the ones adopted at this position (cs_adopt) */
        uint8_t *al = s->alive ? s->alive + (size_t)layer * Hkv * v->max_len : NULL;
        for (uint32_t g = 0; g < Hkv; g++) {
            uint8_t *row = keep + (size_t)g * pos;
            if (al && s->sel_at[layer] == pos + 1)
                memcpy(row, al + (size_t)g * v->max_len, pos);
            else if (s->sp->share_all && g > 0)
                memcpy(row, keep, pos);
            else
                select_row(s, layer, s->sp->share_all ? UINT32_MAX : g, pos, q, NULL, row);
            if (al)
                memcpy(al + (size_t)g * v->max_len, row, pos);
        }
        if (s->lrow) {
            memcpy(s->lrow, keep, (size_t)Hkv * pos);
            s->lrow_at = pos;
            s->lrow_layer = layer + 1;
        }
        return MS_OK;
    }
    /* random scores evicting for good observe nothing: the evictions of the steps before
     * (cs_observe's at T = P + 1 … pos cached entries) are made here, in order */
    for (uint32_t t = s->sel_at[layer] > P ? s->sel_at[layer] + 1 : P + 1;
         s->sp->permanent && s->sp->score == SC_RANDOM && t <= pos; t++) {
        select_alive(s, layer, t, NULL, 0, Hkv);
        s->sel_at[layer] = t;
    }
    /* the kept set of the last selection, and every entry cached after it */
    uint32_t upto = s->sp->when == W_ONCE ? P : s->sp->permanent ? pos : s->sel_at[layer];
    upto = upto < pos ? upto : pos;
    for (uint32_t g = 0; g < Hkv; g++) {
        uint8_t *row = keep + (size_t)g * pos;
        memcpy(row, s->alive + ((size_t)layer * Hkv + g) * v->max_len, upto);
        memset(row + upto, 1, pos - upto);
    }
    return MS_OK;
}

static uint32_t cs_count(void *st, uint32_t layer, uint32_t pos)
{
    cstate *s = st;
    uint32_t sinks, recent, k, c0, c1;
    if (layer < s->dense)
        return pos;
    budget(s, layer, pos, &sinks, &recent, &k);
    cand_range(pos, sinks, recent, &c0, &c1);
    return c0 + (pos - c1);
}

/* ---- the derived cost -------------------------------------------------------------------- */

/* The ops of one layer and phase: the score block's upkeep of the step's rows or keys, then,
 * when the step selects and the candidates exceed the budget, the score of the candidates, the
 * selection (top-k or threshold) and the gather of the kept rows.
 *
 * A permanent eviction selects after the step's attention (the step's own row is in the
 * scores), so nothing of the step waits for it: the selections of every layer run together,
 * emitted with the last layer (layer -1, batch L·Hkv, one set of rounds). Evicting one of k + 1
 * candidates (every decode step of a full cache) is an arg-min, not a top-k: the candidates
 * negated (local), an ARGMAX, and the k survivors compacted by an oblivious select of each
 * row's element with the next row's, under the prefix sums of the one-hot (local). */
/* Key norms in token units (a top-k at every step, every N or once; per KV head or one per
 * layer) with real operands (compose_keynorm.c), its budget at the last selecting position:
 * the prompt's when once, every N the last step selecting. A selection shared across layers:
 * the leader's budget, the later layers of a group gathering their own rows by the first's
 * one-hot rows (compose_shlay.c). */
static int cs_emit_keynorm(cstate *s, int phase, uint32_t layer, uint32_t kv_len, op_program *prog,
                           errbuf *e)
{
    uint32_t P = s->env.prompt_len, sinks, recent, lead = leader(s, layer);
    compose_kn kn = {.env = &s->env,
                     .shared = s->sp->share_all,
                     .once = s->sp->when == W_ONCE,
                     .every = s->every,
                     .lead = lead,
                     .group = s->sp->lshare > 1};
    kn.at = phase == PHASE_PREFILL || kn.once ? P : kv_len - (kv_len - P) % s->every;
    budget(s, lead, kn.at, &sinks, &recent, &kn.k);
    cand_range(kn.at, sinks, recent, &kn.c0, &kn.c1);
    kn.M = norm_max(s, lead, kn.c0, kn.c1, kn.shared);
    return compose_keynorm_emit(&kn, phase, layer, kv_len, prog, s->sl->name, e);
}

/* Key norms evicting for good per KV head or one per layer (`share: layer`) on tokens on real
 * operands (compose_knperm.c), where every selecting layer's prompt has more candidates than its k
 * > 0 (its table full from the prompt on); kn: layer's budget, fixed by the prompt, and its tie
 * bound's scale at kv_len. */
static int knperm_real(const cstate *s, uint32_t layer, uint32_t kv_len, compose_kn *kn)
{
    const cspec *sp = s->sp;
    uint32_t P = s->env.prompt_len, sinks, recent;
    int ok = sp->score == SC_KEYNORM && sp->sel == K_TOPK && sp->permanent && s->page == 1 &&
             sp->lshare <= 1;
    *kn = (compose_kn){.env = &s->env, .at = P, .shared = sp->share_all};
    for (uint32_t l = s->dense; ok && l <= s->env.n_layers; l++) {
        budget(s, l < s->env.n_layers ? l : layer, P, &sinks, &recent, &kn->k);
        cand_range(P, sinks, recent, &kn->c0, &kn->c1);
        ok = kn->k > 0 && kn->k < kn->c1 - kn->c0;
    }
    kn->M = ok ? norm_max(s, layer, kn->c0, kv_len - (P - kn->c1), sp->share_all) : 0;
    return ok;
}

/* select()'s budget (budget above) as compose_att.c and compose_thr.c read it. */
static void att_budget(const void *st, uint32_t layer, uint32_t T, compose_att_budget *u)
{
    budget(st, layer, T, &u->sinks, &u->recent, &u->k);
}

/* A threshold evicting for good whose scores move either way (the newest row's attention, a
 * page's sum of attention or key norms): its dropped entries carried as state
 * (compose_thr.gone). */
static int thr_gone(const cstate *s)
{
    const cspec *sp = s->sp;
    return sp->sel == K_THRESHOLD && sp->permanent &&
           ((sp->score == SC_ATT && (sp->att_last || s->page > 1)) ||
            (sp->score == SC_KEYNORM && s->page > 1));
}

/* A threshold of key norms, page bounds, attention or window votes on real operands
 * (compose_thr.c). */
static int cs_emit_thr(cstate *s, int phase, uint32_t layer, uint32_t kv_len, op_program *prog,
                       errbuf *e)
{
    uint32_t Hkv = s->env.n_kv_heads, lead = leader(s, layer);
    compose_thr t = {.env = &s->env, .score = s->sp->score, .shared = s->sp->share_all};
    t.st = s, t.budget = att_budget;
    t.S = s->page, t.max_pages = s->max_pages, t.thr = s->thr, t.once = s->sp->when == W_ONCE;
    t.lead = lead, t.group = s->sp->lshare > 1;
    t.norms = s->score ? s->score + (size_t)lead * Hkv * s->env.max_len : NULL;
    t.qmax = s->qmax ? s->qmax[lead] : 0, t.kmax = s->kmax ? s->kmax[lead] : 0;
    t.every = s->every, t.last = s->sp->att_last;
    t.window = s->window, t.kernel = s->kernel, t.maxpool = s->maxpool;
    t.gone = thr_gone(s);
    return compose_thr_emit(&t, phase, layer, kv_len, prog, s->sl->name, e);
}

/* Whether the window votes for any entry (a vote window shorter than the prompt). */
static int votes_fit(const cstate *s) { return s->window < s->env.prompt_len; }

/* Window votes once after the prompt (SnapKV's blocks), on real operands with snapkv's ops
 * (snap_votes_emit, snap_select_emit): the votes of the window's prompt attention pooled and
 * summed over each KV head's query heads, the top k of the candidates [c0, c1) gathered into
 * state at the prompt, those rows the decode steps' selection. Candidates reaching into the
 * voting queries' own rows (c1 > P − window: a recent window shorter than the vote window) get
 * no votes, as in select() (cs_observe adds the columns before P − window only): their votes
 * are zeros beside the voted ones, pooled with them. Per KV head or one per layer
 * (window_layer_select), on tokens; a layer that keeps none (k = 0: a pyramid's top layers)
 * names no rows. Shared across layers, a later layer of
 * a group gathers its own prompt rows by its first layer's one-hot rows (compose_shlay.c).
 * Attention once after the prompt is the same program with every prompt query voting (the
 * newest row: the last one alone), unpooled: select()'s scores are the column sums of the
 * prompt attention it observed (cs_observe), each KV head's query heads summed. */
static int window_real(const cstate *s)
{
    const cspec *sp = s->sp;
    return (sp->score == SC_WINDOW || sp->score == SC_ATT) && sp->sel == K_TOPK &&
           sp->when == W_ONCE && !sp->permanent && s->page == 1 &&
           (sp->score == SC_ATT || votes_fit(s));
}

/* One selection per layer (`share: layer`) of the window votes sc (Hkv, 1, c1) at the prompt: the
 * candidates' votes summed over the KV heads, one top k of them, and each KV head's own
 * candidate rows gathered by its one-hot rows (repeated: local) into snapkv's state, the scores
 * as each KV head's (snap_select_emit's prompt, one per layer); its one-hot rows returned. */
static uint32_t window_layer_select(opb *b, uint32_t sc, uint32_t Hkv, uint32_t d2, uint32_t kv_len,
                                    uint32_t c0, uint32_t c1, uint32_t k)
{
    uint32_t n = c1 - c0;
    sc = snap_cand_scores(b, sc, Hkv, c0, c1);
    /* COST: one top-k of the summed votes per layer (the sum local), its one-hot rows as each
     * KV head's (local), the gather of each KV head's kept rows */
    uint32_t srow = compose_heads_sum(b, sc, Hkv, n, "snap.score_sum");
    uint32_t one = opb_tensor(b, "snap.topk", OPT_TEMP, 1, k, n);
    opb_op(b, OP_TOPK, 1, 1, 0, n, srow, OP_NONE, OP_NONE, one, 0, (int32_t)k, 0);
    uint32_t oh = opb_repeat(b, one, 1, k * n, Hkv, "snap.topk_heads");
    uint32_t kv = pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, d2);
    opb_op(b, OP_GATHER, Hkv, k, n, d2, oh, opb_rows(b, kv, Hkv, c0, n, d2, "snap.cand"), OP_NONE,
           opb_shared(b, "snap.kept", OPT_CACHE, Hkv, k, d2), OPF_NO_TRUNC, 0, 0);
    opb_put(b, opb_repeat(b, srow, 1, n, Hkv, "snap.score_heads"),
            opb_shared(b, "snap.score_kept", OPT_CACHE, Hkv, 1, n), Hkv, 0, 1, n);
    return oh;
}

/* A threshold on real operands (compose_thr.c), window votes where they fit. Evicting for good
 * under a kv_budget fraction too: the budget is then the prompt's (budget above), so the sinks
 * and the window stay as the prompt set them and an entry dropped as a candidate stays one. */
static int thr_real(const cstate *s)
{
    return compose_thr_shaped(s->sp) && (s->sp->score != SC_WINDOW || votes_fit(s));
}

static int cs_emit_window(cstate *s, int phase, uint32_t layer, uint32_t kv_len, op_program *prog,
                          errbuf *e)
{
    const policy_env *v = &s->env;
    uint32_t P = v->prompt_len, Hkv = v->n_kv_heads, sinks, recent, k, c0, c1,
             lead = leader(s, layer);
    budget(s, lead, P, &sinks, &recent, &k);
    cand_range(P, sinks, recent, &c0, &c1);
    /* the voting queries: the window's, or attention's every prompt query (the newest row: the
     * last), unpooled */
    int att = s->sp->score == SC_ATT;
    uint32_t w = !att ? s->window : s->sp->att_last ? 1 : P, K = att ? 1 : s->kernel;
    uint32_t nv = att || P - w >= c1 ? c1 : P - w; /* the entries voted for */
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    if (k >= c1 - c0) { /* every candidate kept: no selection; the prompt attention its select()
                         * observes named (no op) for the audit to replay it */
        if (phase == PHASE_PREFILL && lead == layer && c1 > 0)
            pcheck_input(&b, PCHECK_IN_PROMPT_ATT, v->n_heads, w, nv);
        return policy_emit_done(&b, s->sl->name, e);
    }
    /* shared per layer: a score sums every query head's votes */
    double tol =
        snap_votes_tol(w, s->sp->share_all ? v->n_heads : s->G, K, s->maxpool, pcheck_frac_bits());
    if (lead != layer) { /* its own rows by its leader's one-hot rows (compose_shlay.c) */
        compose_follow_once(&b, phase, lead, Hkv, 2 * v->head_dim, kv_len, c0, c1, k, tol);
        return policy_emit_done(&b, s->sl->name, e);
    }
    uint32_t sc = OP_NONE; /* the votes where a top-k reads them (as snapkv_emit) */
    if (phase == PHASE_PREFILL && k > 0)
        sc = snap_votes_emit(&b, v->n_heads, w, c1, nv, K, s->maxpool, Hkv);
    else if (phase == PHASE_PREFILL)
        pcheck_input(&b, PCHECK_IN_PROMPT_ATT, v->n_heads, w, nv);
    uint32_t oh =
        sc != OP_NONE && s->sp->share_all
            ? window_layer_select(&b, sc, Hkv, 2 * v->head_dim, kv_len, c0, c1, k)
            : snap_select_emit(&b, phase, sc, Hkv, 2 * v->head_dim, kv_len, c0, c1, k, tol);
    if (s->sp->lshare > 1 && oh != OP_NONE)
        compose_lead_put(&b, oh, OP_NONE, Hkv, k, c1 - c0);
    return policy_emit_done(&b, s->sl->name, e);
}

/* Attention re-selected at every step or every N on real operands (compose_att.c). */
static int att_real(const cstate *s, uint32_t layer, uint32_t T, int pre, compose_att *a)
{
    const policy_env *v = &s->env;
    uint32_t lead = leader(s, layer); /* a later layer of a group: its leader's */
    *a = (compose_att){.env = v, .st = s, .layer = lead, .budget = att_budget};
    a->last = s->sp->att_last, a->frac = s->frac > 0, a->every = s->every;
    a->shared = s->sp->share_all;
    a->score = s->score + (size_t)lead * v->n_kv_heads * v->max_len;
    /* shared across layers: its later layers gather by the leader's one-hot rows, the budget of
     * every layer its leader's (a pyramid shares no selection: refused at load) */
    a->lead = lead, a->group = s->sp->lshare > 1;
    return compose_att_shaped(s->sp) && compose_att_setup(a, T, pre);
}

/* policy_ops.choice / adopt of an attention selection on real operands (compose_att.c). */
static int cs_choice(void *st, uint32_t layer, uint32_t pos, uint32_t stage, policy_choice *c)
{
    cstate *s = st;
    compose_att a;
    if (stage || layer < s->dense || pos < s->env.prompt_len || !att_real(s, layer, pos, 0, &a) ||
        a.lead != layer) /* a later layer of a group has its leader's choice */
        return 0;
    return compose_att_choice(&a, s->alive + (a.score - s->score), pos, c);
}

static int cs_adopt(void *st, uint32_t layer, uint32_t pos, uint32_t stage, const uint8_t *kept,
                    errbuf *e)
{
    cstate *s = st;
    compose_att_adopt(&s->env, s->alive, s->sel_at, layer, kept, pos);
    if (s->lrow && s->lrow_at == pos && s->lrow_layer == layer + 1) /* its group's too */
        memcpy(s->lrow, kept, (size_t)s->env.n_kv_heads * pos);
    return MS_OK;
}

/* A layer whose budget leaves no top-k at any count it selects over (a top-k under
 * `kv_budget: {recent: rest}`, or a count below one page, on tokens or pages, at every step,
 * every N or once; not evicting for good): its kept set is the sinks and the window of its last
 * selecting step and every entry cached since, public positions. */
static int public_layer(cstate *s, uint32_t layer)
{
    const cspec *sp = s->sp;
    /* window votes keeping none: snapkv's ops name no rows (cs_emit_window); evicting for good
     * with no top-k, the sinks and the window are what select() keeps of its alive set too,
     * but H2O's and TOVA's shapes run their sessions */
    if (sp->sel != K_TOPK || sp->cluster || sp->score == SC_WINDOW ||
        (sp->permanent && (compose_h2o_shaped(sp) || compose_tova_shaped(sp))))
        return 0;
    if (s->ppub[layer] >= 0) /* every step asks: the counts are the run's */
        return s->ppub[layer];
    uint32_t sinks, recent, k;
    int pub = 1;
    for (uint32_t T = s->env.prompt_len; pub && T <= s->env.max_len; T++) {
        budget(s, leader(s, layer), T, &sinks, &recent, &k);
        pub = k == 0;
        if (sp->when == W_ONCE) /* the prompt's alone */
            break;
    }
    return s->ppub[layer] = (int8_t)pub;
}

/* Its decode step's selection at T cached entries: the sinks' and the window's cached rows of
 * the last selecting step (T, the prompt's end once, or a decode step N apart from it) and the
 * entries cached since (local copies), named as the kept entries of the cache, nothing ranked. */
static int emit_public(const cstate *s, uint32_t layer, uint32_t T, op_program *prog, errbuf *e)
{
    uint32_t Hkv = s->env.n_kv_heads, d2 = 2 * s->env.head_dim, sinks, recent, k, c0, c1;
    uint32_t P = s->env.prompt_len, at = s->sp->when == W_ONCE ? P : T - (T - P) % s->every;
    budget(s, leader(s, layer), at, &sinks, &recent, &k);
    cand_range(at, sinks, recent, &c0, &c1);
    uint32_t m = c0 + (T - c1);
    opb b;
    opb_init(&b, prog, PHASE_DECODE, (int)layer, OPC_POLICY, NULL);
    uint32_t kv = pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2);
    if (c1 > c0) { /* entries dropped: the rest named */
        uint32_t sel = opb_tensor(&b, "cmp.public", OPT_TEMP, Hkv, m, d2);
        if (c0)
            opb_put(&b, opb_rows(&b, kv, Hkv, 0, c0, d2, "cmp.public_sinks"), sel, Hkv, 0, c0, d2);
        if (T > c1)
            opb_put(&b, opb_rows(&b, kv, Hkv, c1, T - c1, d2, "cmp.public_win"), sel, Hkv, c0,
                    T - c1, d2);
        pcheck_selection(&b, sel, m, 0, T, OP_NONE, 0);
    }
    return policy_emit_done(&b, s->sl->name, e);
}

static int cs_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                   op_program *prog, errbuf *e)
{
    cstate *s = st;
    const cspec *sp = s->sp;
    const policy_env *v = &s->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, d = v->head_dim, G = s->G, P = v->prompt_len;
    if (layer < s->dense || sp->sel == K_NONE)
        return MS_OK;
    int follower = leader(s, layer) != layer; /* it gathers by its leader's selection */
    if (public_layer(s, layer))               /* no top-k: the sinks and the window, public */
        return phase == PHASE_DECODE ? emit_public(s, layer, kv_len, prog, e) : MS_OK;
    if (window_real(s))
        return cs_emit_window(s, phase, layer, kv_len, prog, e);
    if (sp->score == SC_KEYNORM && sp->sel == K_TOPK && s->page == 1 && !sp->permanent)
        return cs_emit_keynorm(s, phase, layer, kv_len, prog, e);
    if (thr_real(s)) /* a threshold on shares (compose_thr.c) */
        return cs_emit_thr(s, phase, layer, kv_len, prog, e);
    compose_kn kn;
    if (knperm_real(s, layer, kv_len, &kn))
        return compose_knperm_emit(&kn, phase, layer, kv_len, prog, s->sl->name, e);
    compose_att att;
    if (att_real(s, layer, kv_len, phase == PHASE_PREFILL, &att))
        return compose_att_emit(&att, phase, layer, kv_len, prog, s->sl->name, e);
    if ((sp->score == SC_KEYNORM || sp->score == SC_BOUNDS) && sp->sel == K_TOPK &&
        !sp->permanent && !sp->share_all && compose_pages_real(s, leader(s, layer)))
        return compose_emit_pages(s, phase, layer, kv_len, prog, e);
    policy_emitter pe;
    opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
    int pre = phase == PHASE_PREFILL;
    uint32_t t = pre ? kv_len : 1; /* rows (keys) the step adds */
    /* COST: score upkeep, of the step's rows or keys */
    if (follower)
        ;                         /* no scores of its own */
    else if (sp->score == SC_ATT) /* the group's probability rows summed into the scores: local */
        policy_emit(&pe, OP_ADD, Hkv, G * t, 0, kv_len + (pre ? 0 : 1), OP_NONE, OP_NONE, 0, 0, 0,
                    "cmp.acc");
    else if (sp->score == SC_KEYNORM) { /* squares of the new keys, summed locally */
        uint32_t sq =
            policy_emit(&pe, OP_SQUARE, Hkv, t, 0, d, OP_NONE, OP_NONE, 0, 0, 0, "cmp.sq");
        policy_emit(&pe, OP_ADD, Hkv, t, 0, d, sq, OP_NONE, 0, 0, 0, "cmp.norm");
    } else if (sp->score == SC_BOUNDS) /* page max and min: a pairwise MAX per channel and bound */
        policy_emit(&pe, OP_MAX, Hkv, pre ? 2 * ((kv_len + s->page - 1) / s->page) * d : 2 * d, 0,
                    pre ? s->page : 2, OP_NONE, OP_NONE, 0, 0, 0, "cmp.bounds");
    int rc = policy_emit_done(&pe, s->sl->name, e);
    /* does this step select, over how many candidates? */
    uint32_t T = kv_len, sinks, recent, k, c0, c1, nc;
    int selects = sp->when == W_ONCE ? pre : sp->permanent ? 1 : !pre;
    if (selects && !pre && !sp->permanent && s->every > 1)
        selects = (kv_len - P) % s->every == 0;
    int batched = sp->permanent; /* every layer's selection at the last layer */
    if (rc || !selects || (batched && layer + 1 != v->n_layers))
        return rc;
    budget(s, layer, T, &sinks, &recent, &k);
    if (sp->permanent && !pre) {
        /* the cached entries kept, the step's own entry joins: candidates beyond the window */
        uint32_t c = 0;
        for (uint32_t g = 0; g < Hkv; g++)
            c = kept[g] > c ? kept[g] : c;
        T = kv_len + 1;
        cand_range(T, sinks, recent, &c0, &c1);
        uint32_t fixed = c0 + (T - c1); /* sinks and window (the step's entry in it, if any) */
        nc = c + 1 > fixed ? c + 1 - fixed : 0;
    } else {
        cand_range(T, sinks, recent, &c0, &c1);
        nc = s->page == 1 ? c1 - c0 : c1 > c0 ? (c1 - 1) / s->page - c0 / s->page + 1 : 0;
    }
    if ((sp->sel == K_TOPK && k >= nc) || sp->score == SC_RANDOM) /* random: public positions */
        return MS_OK;
    uint32_t L = batched ? v->n_layers - s->dense : 1;
    opb_init(&pe, prog, phase, batched ? -1 : (int)layer, OPC_POLICY, batched ? "cmp." : NULL);
    /* the rows gathered: K | V of each unit, and the carried score when evicting for good */
    uint32_t width =
        2 * d * s->page + (sp->permanent && sp->score == SC_ATT && !sp->att_last ? 1 : 0);
    uint32_t oh = OP_NONE, m = k;
    if (follower) { /* COST: its own rows gathered by the leader's one-hot rows */
        if (sp->sel == K_THRESHOLD) {
            m = 0;
            for (uint32_t g = 0; g < Hkv; g++)
                m = kept[g] > m ? kept[g] : m;
            m = s->page > 1 ? (m + s->page - 1) / s->page : m;
            m = m < nc ? m : nc;
        }
        if (m > 0)
            policy_emit(&pe, OP_GATHER, Hkv, m, nc, width, OP_NONE, OP_NONE, OPF_NO_TRUNC, 0, 0,
                        "cmp.gather");
        return policy_emit_done(&pe, s->sl->name, e);
    }
    /* COST: the candidates' scores */
    uint32_t sc = OP_NONE;
    if (sp->score == SC_WINDOW) {
        /* window votes: sums of rows the prompt attention computed, local adds; maxpool: a MAX
         * over kernel neighbours per position; the group's mean: local adds */
        sc = policy_emit(&pe, OP_ADD, H, s->window, 0, nc, OP_NONE, OP_NONE, 0, 0, 0, "cmp.vote");
        if (s->maxpool && s->kernel > 1)
            sc = policy_emit(&pe, OP_MAX, H, nc, 0, s->kernel, sc, OP_NONE, 0, 0, 0, "cmp.pool");
        if (Hkv != H)
            sc = policy_emit(&pe, OP_ADD, Hkv, 1, 0, nc, sc, OP_NONE, 0, 0, 0, "cmp.group");
    } else if (sp->score == SC_BOUNDS) {
        /* per page 2d products q_i·m_i, q_i·M_i, d max of the pairs, a local sum */
        uint32_t pr =
            policy_emit(&pe, OP_MUL, H, nc, 0, 2 * d, OP_NONE, OP_NONE, 0, 0, 0, "cmp.prod");
        sc = policy_emit(&pe, OP_MAX, H, nc * d, 0, 2, pr, OP_NONE, 0, 0, 0, "cmp.max");
        if (H != Hkv)
            sc = policy_emit(&pe, OP_ADD, Hkv, 1, 0, nc, sc, OP_NONE, 0, 0, 0, "cmp.group");
    }
    uint32_t B = Hkv;
    if (sp->share_all && Hkv > 1) { /* one selection per layer: the heads' scores summed */
        sc = policy_emit(&pe, OP_ADD, 1, L * Hkv, 0, nc, sc, OP_NONE, 0, 0, 0, "cmp.share");
        B = 1;
    }
    /* the rows gathered: K | V of each unit, and the carried score when evicting for good */
    if (sp->sel == K_TOPK && k > 0 && nc == k + 1) {
        /* COST: one eviction: arg-min of the k + 1 candidates (ARGMAX of the negated scores,
         * the negation local), the prefix sums of the one-hot and their broadcast over the row
         * (local), then one SELECT per element of the k compacted rows */
        uint32_t neg = policy_emit(&pe, OP_MUL_PUB, B, L * nc, 0, 1, sc, OP_NONE, OPF_NO_TRUNC, 0,
                                   -1.0, "cmp.neg");
        oh = policy_emit(&pe, OP_ARGMAX, B, L, 0, nc, neg, OP_NONE, 0, 0, 0, "cmp.argmin");
        uint32_t pre_sum =
            policy_emit(&pe, OP_ADD, B * L, nc, 0, 1, oh, OP_NONE, 0, 0, 0, "cmp.prefix");
        policy_emit(&pe, OP_SELECT, Hkv, L * k, 0, width, pre_sum, OP_NONE, 0, 0, 0, "cmp.compact");
        return policy_emit_done(&pe, s->sl->name, e);
    }
    if (sp->sel == K_TOPK) {
        if (k == 0)
            return policy_emit_done(&pe, s->sl->name, e);
        /* COST: one top-k of the candidate units per KV head and layer (one-hot rows) */
        oh = policy_emit(&pe, OP_TOPK, B, L, 0, nc, sc, OP_NONE, 0, (int32_t)k, 0, "cmp.topk");
    } else {
        /* COST: the threshold comparison, the kept count opened (kept counts are public), the
         * one-hot rows of the kept units from the mask's prefix sums (an EQ per slot) */
        uint32_t lt =
            policy_emit(&pe, OP_LT, B, L, 0, nc, sc, OP_NONE, OPF_PUBLIC_B, 0, s->thr, "cmp.lt");
        policy_emit(&pe, OP_REVEAL, B, L, 0, 1, lt, OP_NONE, 0, -1, 0, "cmp.count");
        m = 0;
        for (uint32_t g = 0; g < Hkv; g++)
            m = kept[g] > m ? kept[g] : m;
        m = s->page > 1 ? (m + s->page - 1) / s->page : m;
        m = m < nc ? m : nc;
        oh = policy_emit(&pe, OP_EQ, B * L, m, 0, nc, lt, OP_NONE, 0, 0, 0, "cmp.onehot");
    }
    /* COST: the gather of the kept units' rows (one-hot · rows) */
    if (m > 0)
        policy_emit(&pe, OP_GATHER, Hkv * L, m, nc, width, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                    "cmp.gather");
    return policy_emit_done(&pe, s->sl->name, e);
}

/* The rows a decode step attends (policy_ops.attend) when it gathers whole pages every step
 * (a top-k of pages): the entries outside the candidates (sinks, recent window) and k pages of
 * `page` rows — what its ops gather (cs_emit, compose_emit_pages: rows not candidates biased out),
 * a public count whichever pages were chosen, not their kept count. Otherwise the kept counts. */
static void cs_attend(void *st, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                      uint32_t *rows)
{
    cstate *s = st;
    const cspec *sp = s->sp;
    uint32_t Hkv = s->env.n_kv_heads, R = 0, sinks, recent, k, c0, c1;
    for (uint32_t g = 0; g < Hkv; g++)
        R = kept[g] > R ? kept[g] : R;
    if (layer >= s->dense && thr_real(s))
        R = kv_len; /* an oblivious threshold attends every entry, the dropped biased out */
    /* once or every N on real operands: the pages of the last selecting step (compose_pages.c) */
    uint32_t P = s->env.prompt_len, at = sp->when == W_ONCE ? P : kv_len - (kv_len - P) % s->every;
    if (layer >= s->dense && s->page > 1 && sp->sel == K_TOPK && !sp->permanent &&
        ((sp->when == W_STEP && s->every == 1) ||
         (compose_pages_real(s, layer) && !sp->share_all && sp->lshare <= 1))) {
        budget(s, layer, at, &sinks, &recent, &k);
        cand_range(at, sinks, recent, &c0, &c1);
        uint32_t nc = c1 > c0 ? (c1 - 1) / s->page - c0 / s->page + 1 : 0;
        if (k > 0 && k < nc) {
            uint64_t n = (uint64_t)c0 + (kv_len - c1) + (uint64_t)k * s->page;
            R = n < kv_len ? (uint32_t)n : kv_len;
        }
    }
    for (uint32_t g = 0; g < Hkv; g++)
        rows[g] = R;
}

/* H2O's budgets of a composition of its shape (compose_int.h), 0 with why set when these
 * parameters leave that shape. */
int compose_h2o_budgets(const void *st, uint32_t *sinks, uint32_t *heavy, uint32_t *recent,
                        uint32_t *dense, char *why, size_t cap)
{
    const cstate *s = st;
    uint32_t k;
    budget(s, 0, s->env.prompt_len, sinks, recent, &k);
    *dense = s->dense;
    const char *no = s->dense >= s->env.n_layers ? "every layer dense"
                     : s->page > 1               ? "pages"
                     : s->lk                     ? "per-layer budgets"
                                                 : NULL;
    if (no) {
        snprintf(why, cap, "%s", no);
        return 0;
    }
    *heavy = k;
    return 1;
}

/* tova's cache_size for a composition of its shape (compose_int.h), 0 with why set when these
 * parameters leave that shape. */
int compose_tova_budget(const void *st, uint32_t *cap, uint32_t *dense, uint32_t *sinks,
                        uint32_t *recent, char *why, size_t n)
{
    const cstate *s = st;
    uint32_t k;
    budget(s, 0, s->env.prompt_len, sinks, recent, &k);
    *dense = s->dense;
    const char *no = s->dense >= s->env.n_layers ? "every layer dense"
                     : s->page > 1               ? "pages"
                     : s->lk                     ? "per-layer budgets"
                     : k == 0 || k == UINT32_MAX ? "no cache size"
                                                 : NULL;
    if (no) {
        snprintf(why, n, "%s", no);
        return 0;
    }
    *cap = k;
    return 1;
}

/* ---- loading ----------------------------------------------------------------------------- */

int policy_compose_load(const char *path, const policy_ops **out, errbuf *e)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return err_set(e, MS_ERR_NOTFOUND, "%s: no such composition file", path);
    pthread_mutex_lock(&slots_mu);
    int rc = MS_OK;
    for (size_t i = 0; i < n_slots; i++)
        if (!strcmp(slots[i]->real, real)) {
            *out = &slots[i]->ops;
            goto done;
        }
    if (n_slots == POLICY_COMPOSE_MAX) {
        rc = err_set(e, MS_ERR_INPUT, "%s: more than %d compositions in one run", path,
                     POLICY_COMPOSE_MAX);
        goto done;
    }
    yx_node *root = NULL;
    if ((rc = yx_parse_file(path, &root, e)))
        goto done;
    cslot *sl = calloc(1, sizeof *sl);
    if (!sl) {
        yx_free(root);
        rc = err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    rd r = {path, e};
    pthread_mutex_unlock(&slots_mu); /* compose_read_spec looks names up (policy_find) */
    rc = compose_read_spec(&r, root, sl);
    pthread_mutex_lock(&slots_mu);
    for (size_t i = 0; !rc && i < n_slots; i++)
        if (!strcmp(slots[i]->name, sl->name))
            rc = compose_rfail(&r, yx_map_get(root, "name"), NULL,
                               "the policy name '%s' is taken by composition %s", sl->name,
                               slots[i]->path);
    yx_free(root);
    if (rc || n_slots == POLICY_COMPOSE_MAX) {
        free(sl);
        if (!rc)
            rc = err_set(e, MS_ERR_INPUT, "%s: more than %d compositions in one run", path,
                         POLICY_COMPOSE_MAX);
        goto done;
    }
    snprintf(sl->path, sizeof sl->path, "%s", path);
    snprintf(sl->real, sizeof sl->real, "%s", real);
    const cspec *sp = &sl->sp;
    size_t np = sl->ops.n_params;
    int stateless = !(sp->when == W_STEP && !sp->permanent && sp->every > 1);
    sl->ops = (policy_ops){
        .name = sl->name,
        .summary = sl->summary,
        .params = sl->params,
        .n_params = np,
        .init = cs_inits[n_slots],
        .fini = cs_fini,
        .needs = cs_needs,
        .layer_needs = cs_layer_needs,
        .observe = sp->score && sp->score != SC_RANDOM ? cs_observe : NULL,
        .prefill = cs_prefill,
        .select = cs_select,
        .count = sp->score ? NULL : cs_count,
        .emit_cost = sp->sel != K_NONE ? cs_emit : NULL,
        .budget_keys = sl->budget_keys[0] ? sl->budget_keys : NULL,
        .stateless_select = stateless,
        .layer_local = (sp->score == SC_ATT || sp->score == SC_WINDOW) && !sp->share_all,
    };
    /* a page-granular top-k at every step gathers whole pages: the lowering attends them */
    if ((has_param(sl, "page") && sp->sel == K_TOPK && !sp->permanent && sp->score != SC_RANDOM &&
         (sp->when == W_STEP || sp->score == SC_KEYNORM)) ||
        compose_thr_shaped(sp))
        sl->ops.attend = cs_attend;
    if (sp->cluster) {
        compose_cluster_ops(&sl->ops);
        sl->ops.check = cs_checks[n_slots];
    }
    if (compose_att_shaped(sp)) {
        sl->ops.choice = cs_choice;
        sl->ops.adopt = cs_adopt;
    }
    if (compose_h2o_shaped(sp))
        compose_h2o_ops(&sl->ops);
    else if (compose_tova_shaped(sp))
        compose_tova_ops(&sl->ops);
    slots[n_slots++] = sl;
    *out = &sl->ops;
done:
    pthread_mutex_unlock(&slots_mu);
    return rc;
}

const policy_ops *policy_compose_find(const char *name)
{
    const policy_ops *r = NULL;
    pthread_mutex_lock(&slots_mu);
    for (size_t i = 0; i < n_slots && !r; i++)
        if (!strcmp(slots[i]->name, name))
            r = &slots[i]->ops;
    pthread_mutex_unlock(&slots_mu);
    return r;
}

int policy_compose_slot(const policy_ops *p)
{
    int r = -1;
    pthread_mutex_lock(&slots_mu);
    for (size_t i = 0; i < n_slots && r < 0; i++)
        if (&slots[i]->ops == p)
            r = (int)i;
    pthread_mutex_unlock(&slots_mu);
    return r;
}

const char *policy_compose_path(const policy_ops *p)
{
    int s = policy_compose_slot(p);
    return s < 0 ? NULL : slots[s]->path;
}
