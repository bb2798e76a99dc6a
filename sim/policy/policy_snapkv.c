/* policy_snapkv.c — SnapKV (FasterDecoding/SnapKV, snapkv/monkeypatch/snapkv_utils.py), plus
 * the observation-window scorer that pyramidkv and criticalkv reuse.
 *
 * Once, at the end of the prompt (only if P >= capacity): the last `window` prompt queries vote
 * for earlier keys with their attention (Σ over the window), the votes are pooled over `kernel`
 * neighbours (maxpool or avgpool, stride 1, pad kernel/2) and each KV head keeps
 * topk(score, capacity - window) ∪ the window itself. Generated tokens are all kept.
 * Defaults: the paper's LongBench configs ablation_c1024_w32_k7_maxpool.json.
 * GQA: pooled votes are averaged over the query heads of a group (kvpress snapkv_press.py,
 * citing SnapKV issue #22); with MHA this is the original per-head score. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pcheck.h"
#include "policy.h"

/* ---- the scorer ------------------------------------------------------------------------- */

int snap_args_read(const policy_ops *p, const policy_args *a, uint32_t prompt_len, snap_args *out,
                   errbuf *e)
{
    int pool = 0;
    double f = 0;
    int rc = policy_arg_u32(p, a, "window", &out->window, e);
    if (!rc)
        rc = policy_arg_u32(p, a, "kernel", &out->kernel, e);
    if (!rc)
        rc = policy_arg_choice(p, a, "pooling", &pool, e);
    if (!rc)
        rc = policy_arg_u32(p, a, "capacity", &out->capacity, e);
    if (!rc)
        rc = policy_kv_budget(p, a, &f, e);
    out->maxpool = !rc && pool == 0;
    if (rc || f <= 0)
        return rc;
    /* kv_budget: the capacity is round(F·P) of the P prompt entries, the window included */
    out->capacity = policy_budget_entries(f, prompt_len);
    uint32_t w = out->window < prompt_len ? out->window : prompt_len;
    if (out->capacity < w) {
        char at[600];
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy %s: kv_budget %g of a %u-entry prompt keeps %u entries, fewer "
                       "than the observation window %u it keeps\n"
                       "  hint: a smaller 'window', or a larger kv_budget",
                       policy_at(a, "kv_budget", at, sizeof at), p->name, f, prompt_len,
                       out->capacity, w);
    }
    return MS_OK;
}

int snap_core_init(snap_core *c, const policy_env *env, uint32_t window, uint32_t kernel,
                   int maxpool, errbuf *e)
{
    memset(c, 0, sizeof *c);
    c->env = *env;
    c->window = window < env->prompt_len ? window : env->prompt_len;
    c->kernel = kernel;
    c->maxpool = maxpool;
    size_t n = (size_t)env->n_layers * env->n_heads * env->prompt_len;
    c->vote = calloc(n ? n : 1, sizeof *c->vote);
    c->tmp = calloc(env->prompt_len + 1, sizeof *c->tmp);
    if (!c->vote || !c->tmp) {
        snap_core_free(c);
        return err_set(e, MS_ERR_NOMEM, "snapkv scorer: out of memory for %zu votes", n);
    }
    return MS_OK;
}

void snap_core_free(snap_core *c)
{
    free(c->vote);
    free(c->tmp);
    c->vote = c->tmp = NULL;
}

int snap_core_wants(const snap_core *c, uint32_t pos)
{
    uint32_t P = c->env.prompt_len;
    return pos < P && pos + c->window >= P;
}

void snap_core_observe(snap_core *c, const policy_obs *o)
{
    if (!snap_core_wants(c, o->pos) || !o->att)
        return;
    uint32_t P = c->env.prompt_len, H = c->env.n_heads, n = o->pos + 1;
    uint32_t G = H / c->env.n_kv_heads, g1 = o->kv_hi ? o->kv_hi : c->env.n_kv_heads;
    uint32_t nvote = P - c->window; /* keys outside the window */
    for (uint32_t h = o->kv_lo * G; h < g1 * G; h++)
        policy_add_row(c->vote + ((size_t)o->layer * H + h) * P, o->att + (size_t)h * n, nvote);
}

/* 1-D pooling, stride 1, padding kernel/2: max pads with -inf, avg counts the pad as zeros
 * (PyTorch max_pool1d / avg_pool1d with count_include_pad=True). */
void snap_pool1d(const float *in, float *out, uint32_t n, uint32_t kernel, int maxpool)
{
    int half = (int)kernel / 2;
    for (int j = 0; j < (int)n; j++) {
        float acc = maxpool ? -INFINITY : 0.0f;
        for (int t = j - half; t <= j + half && t < j - half + (int)kernel; t++) {
            if (t < 0 || t >= (int)n)
                continue;
            if (maxpool)
                acc = in[t] > acc ? in[t] : acc;
            else
                acc += in[t];
        }
        out[j] = maxpool ? acc : acc / (float)kernel;
    }
}

void snap_core_score(snap_core *c, uint32_t layer, uint32_t g, float *out)
{
    uint32_t P = c->env.prompt_len, H = c->env.n_heads, G = H / c->env.n_kv_heads;
    uint32_t n = P - c->window;
    for (uint32_t j = 0; j < n; j++)
        out[j] = 0;
    for (uint32_t h = g * G; h < (g + 1) * G; h++) {
        const float *v = c->vote + ((size_t)layer * H + h) * P;
        snap_pool1d(v, c->tmp, n, c->kernel, c->maxpool);
        for (uint32_t j = 0; j < n; j++)
            out[j] += c->tmp[j];
    }
    float scale = 1.0f / ((float)G * (float)(c->window ? c->window : 1));
    for (uint32_t j = 0; j < n; j++)
        out[j] *= scale;
}

uint32_t snap_votes_emit(policy_emitter *pe, uint32_t H, uint32_t w, uint32_t n, uint32_t nv,
                         uint32_t K, int maxpool, uint32_t batch)
{
    /* the prompt attention of the window's queries over the nv voted entries: the model's own
     * rows, in shares since the prefill attention */
    uint32_t att = pcheck_input(pe, PCHECK_IN_PROMPT_ATT, H, w, nv);
    /* COST: window votes Σ_i P[i][j] over rows the prefill attention computed: w·T local adds
     * per head (policies.md §1.3; no extra products: the rows are the model's own), a column
     * sum by a public ones vector (local, no truncation) */
    uint32_t vote = opb_colsum(pe, att, H, w, nv, "snap.vote");
    if (nv < n) { /* entries [nv, n) vote 0: the votes written into zeros (a view, local) */
        uint32_t all = opb_tensor(pe, "snap.vote_all", OPT_TEMP, H, n, 1);
        opb_put(pe, vote, all, H, 0, nv, 1);
        vote = all;
    }
    if (K > 1) {
        /* the K neighbours of every entry side by side (views, local): row t of nb holds the
         * votes shifted by t − K/2, zero past the ends (max pooling pads with −inf, but the
         * votes are ≥ 0 and every window holds its own entry; average pooling counts the pad
         * as zeros) */
        uint32_t pad = opb_tensor(pe, "snap.pad", OPT_TEMP, H, n + K - 1, 1);
        opb_put(pe, vote, pad, H, K / 2, n, 1);
        uint32_t nb = opb_tensor(pe, "snap.nb", OPT_TEMP, H, K, n);
        for (uint32_t t = 0; t < K; t++) {
            uint32_t sh = opb_rows(pe, pad, H, t, n, 1, "snap.shift");
            opb_put(pe, opb_transpose(pe, sh, H, n, 1, "snap.shift_t"), nb, H, t, 1, n);
        }
        if (maxpool)
            /* COST: maxpool = max over `kernel` neighbours per position: (k-1)·T comparisons
             * per head (§1.12 SnapKV "pooling (k-1)·T cmp (max)") */
            vote = policy_emit(pe, OP_MAX, H, n, 0, K, opb_transpose(pe, nb, H, K, n, "snap.nb_t"),
                               OP_NONE, 0, 0, 0, "snap.pool");
        else /* avgpool: the neighbours' sum (the mean's order), local */
            vote = opb_colsum(pe, nb, H, K, n, "snap.pool_sum");
    }
    if (batch != H) /* group sum over the G query heads of a KV head (the mean's order): local */
        vote = opb_colsum(pe, vote, batch, H / batch, n, "snap.group");
    return opb_transpose(pe, vote, batch, n, 1, "snap.score");
}

uint32_t snap_core_emit(const snap_core *c, policy_emitter *pe, uint32_t batch)
{
    uint32_t n = c->env.prompt_len - c->window;
    return snap_votes_emit(pe, c->env.n_heads, c->window, n, n, c->kernel, c->maxpool, batch);
}

/* The prompt's selection (PHASE_PREFILL: the top k of the scores sc (Hkv, 1, c1) of candidates
 * [c0, c1) per KV head, the gather of their cached [K | V] rows into the state "snap.kept" and
 * the candidates' scores into "snap.score_kept"), or the decode step's declaration of those
 * rows as its selection (they are the cache it attends besides the entries outside the
 * candidates). */
uint32_t snap_cand_scores(policy_emitter *pe, uint32_t sc, uint32_t Hkv, uint32_t c0, uint32_t c1)
{
    if (c0 == 0)
        return sc;
    uint32_t n = c1 - c0;
    return opb_transpose(pe,
                         opb_rows(pe, opb_transpose(pe, sc, Hkv, 1, c1, "snap.score_col"), Hkv, c0,
                                  n, 1, "snap.score_cand"),
                         Hkv, n, 1, "snap.score_row");
}

uint32_t snap_select_emit(policy_emitter *pe, int phase, uint32_t sc, uint32_t Hkv, uint32_t d2,
                          uint32_t kv_len, uint32_t c0, uint32_t c1, uint32_t k, double tol)
{
    uint32_t n = c1 - c0;
    if (phase == PHASE_DECODE) {
        /* no ops: the decode step attends the rows the prefill gathered (its state); the
         * window and the generated entries are public positions. Named for the check, with
         * the cache it compares them with */
        pcheck_input(pe, PCHECK_IN_KV, Hkv, kv_len, d2);
        uint32_t kept_st = opb_shared(pe, "snap.kept", OPT_CACHE, Hkv, k, d2);
        uint32_t sc_st = k ? opb_shared(pe, "snap.score_kept", OPT_CACHE, Hkv, 1, n) : OP_NONE;
        pcheck_selection(pe, kept_st, k, c0, c1, sc_st, tol);
        return OP_NONE;
    }
    if (k == 0) /* none of the candidates kept (a pyramid's top layers): no top-k, no gather;
                 * the decode steps name no rows, so they attend the entries outside the
                 * candidates alone */
        return OP_NONE;
    sc = snap_cand_scores(pe, sc, Hkv, c0, c1);
    /* COST: one topk(T-w, B-w) per KV head and a gather of the kept K|V rows (§1.12) */
    uint32_t oh =
        policy_emit(pe, OP_TOPK, Hkv, 1, 0, n, sc, OP_NONE, 0, (int32_t)k, 0, "snap.topk");
    uint32_t kv = pcheck_input(pe, PCHECK_IN_KV, Hkv, kv_len, d2);
    uint32_t tab = opb_rows(pe, kv, Hkv, c0, n, d2, "snap.cand");
    uint32_t kept_st = opb_shared(pe, "snap.kept", OPT_CACHE, Hkv, k, d2);
    opb_op(pe, OP_GATHER, Hkv, k, n, d2, oh, tab, OP_NONE, kept_st, OPF_NO_TRUNC, 0, 0);
    /* the scores, for the check's ties (a view) */
    opb_put(pe, sc, opb_shared(pe, "snap.score_kept", OPT_CACHE, Hkv, 1, n), Hkv, 0, 1, n);
    return oh;
}

/* The error bound of snap_core_emit's scores against snap_core_score's, on the scale of the
 * ops (snap_core_score's times G · window): each attention probability rounded to the fixed
 * point's u = 2^-frac (±u/2), summed over the window, the kernel (average pooling) and the
 * query heads of a group; the float sums add a relative 2^-20 of their value (≤ one vote per
 * summand). Twice that, for the two candidates of a swap. */
double snap_votes_tol(uint32_t w, uint32_t G, uint32_t K, int maxpool, int frac_bits)
{
    double terms = (double)w * G * (maxpool ? 1 : K);
    return 2 * terms * (ldexp(1, -frac_bits - 1) + 0x1p-20);
}

double snap_core_tol(const snap_core *c, uint32_t batch, int frac_bits)
{
    return snap_votes_tol(c->window, c->env.n_heads / batch, c->kernel, c->maxpool, frac_bits);
}

void snap_keep_rows(const policy_env *v, const uint8_t *alive, uint32_t layer, uint32_t pos,
                    uint8_t *keep)
{
    uint32_t P = v->prompt_len, np = pos < P ? pos : P;
    for (uint32_t g = 0; g < v->n_kv_heads; g++) {
        uint8_t *row = keep + (size_t)g * pos;
        memcpy(row, alive + ((size_t)layer * v->n_kv_heads + g) * P, np);
        memset(row + np, 1, pos - np);
    }
}

/* ---- the policy ------------------------------------------------------------------------- */

static const policy_param snap_params[] = {
    {"window", "32", "observation window: last prompt queries that vote (window_size)", NULL, 1,
     1e9, 1},
    {"kernel", "7", "pooling kernel (kernel_size)", NULL, 1, 1e6, 1},
    {"pooling", "maxpool", "pooling of the votes", "maxpool|avgpool", 0, 0, 0},
    {"capacity", "1024", "kept prompt entries per KV head incl. the window (max_capacity_prompt)",
     NULL, 1, 1e9, 1},
};

typedef struct snap_state {
    snap_core core;
    uint32_t capacity;
    uint32_t *budget; /* [L] kept non-window prompt entries (pyramidkv varies it) */
    uint8_t *alive;   /* [L][Hkv][P] */
    float *score;
    uint32_t *work, *sel;
} snap_state;

void snapkv_fini(void *st)
{
    snap_state *s = st;
    if (!s)
        return;
    snap_core_free(&s->core);
    free(s->budget);
    free(s->alive);
    free(s->score);
    free(s->work);
    free(s->sel);
    free(s);
}

int snapkv_state_new(const policy_ops *p, const policy_env *env, const policy_args *a, void **st,
                     errbuf *e)
{
    snap_args sa;
    int rc = snap_args_read(p, a, env->prompt_len, &sa, e);
    if (rc)
        return rc;
    uint32_t cap = sa.capacity;
    snap_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", p->name);
    rc = snap_core_init(&s->core, env, sa.window, sa.kernel, sa.maxpool, e);
    if (rc) {
        free(s);
        return rc;
    }
    s->capacity = cap;
    size_t P = env->prompt_len;
    s->budget = calloc(env->n_layers, sizeof *s->budget);
    s->alive = malloc((size_t)env->n_layers * env->n_kv_heads * P + 1);
    s->score = malloc((P + 1) * sizeof *s->score);
    s->work = malloc((P + 1) * sizeof *s->work);
    s->sel = malloc((P + 1) * sizeof *s->sel);
    if (!s->budget || !s->alive || !s->score || !s->work || !s->sel) {
        snapkv_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", p->name);
    }
    memset(s->alive, 1, (size_t)env->n_layers * env->n_kv_heads * P + 1);
    /* SnapKV compresses only if q_len >= max_capacity_prompt */
    uint32_t b = env->prompt_len >= cap && cap > s->core.window ? cap - s->core.window : UINT32_MAX;
    for (uint32_t l = 0; l < env->n_layers; l++)
        s->budget[l] = b;
    *st = s;
    return MS_OK;
}

void snapkv_set_budget(void *st, uint32_t layer, uint32_t budget)
{
    ((snap_state *)st)->budget[layer] = budget;
}

static int snap_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    return snapkv_state_new(&policy_snapkv, env, a, st, e);
}

unsigned snapkv_needs(void *st, uint32_t pos)
{
    snap_state *s = st;
    return snap_core_wants(&s->core, pos) ? POLICY_NEED_ATT : 0;
}

int snapkv_observe(void *st, const policy_obs *o, errbuf *e)
{
    snap_state *s = st;
    snap_core_observe(&s->core, o);
    return MS_OK;
}

int snapkv_prefill(void *st, errbuf *e)
{
    snap_state *s = st;
    const policy_env *v = &s->core.env;
    uint32_t P = v->prompt_len, n = P - s->core.window;
    for (uint32_t l = 0; l < v->n_layers; l++) {
        if (s->budget[l] >= n)
            continue; /* nothing to evict */
        for (uint32_t g = 0; g < v->n_kv_heads; g++) {
            uint8_t *alive = s->alive + ((size_t)l * v->n_kv_heads + g) * P;
            snap_core_score(&s->core, l, g, s->score);
            size_t k = policy_topk(s->score, NULL, n, s->budget[l], s->sel, s->work);
            memset(alive, 0, n);
            for (size_t i = 0; i < k; i++)
                alive[s->sel[i]] = 1;
        }
    }
    return MS_OK;
}

int snapkv_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep, errbuf *e)
{
    snap_state *s = st;
    snap_keep_rows(&s->core.env, s->alive, layer, pos, keep);
    return MS_OK;
}

int snapkv_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                op_program *prog, errbuf *e)
{
    snap_state *s = st;
    const policy_env *v = &s->core.env;
    uint32_t n = v->prompt_len - s->core.window, b = s->budget[layer];
    if (b >= n)
        return MS_OK;
    uint32_t Hkv = v->n_kv_heads, d2 = 2 * v->head_dim;
    policy_emitter pe;
    opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
    double tol = snap_core_tol(&s->core, Hkv, pcheck_frac_bits());
    /* the votes only where a top-k reads them; a layer that keeps none (a pyramid's top layers)
     * computes none and names the prompt attention they would read (a view, no op) for the
     * audit, whose select() observes it */
    uint32_t sc = OP_NONE;
    if (phase == PHASE_PREFILL && b > 0)
        sc = snap_core_emit(&s->core, &pe, Hkv);
    else if (phase == PHASE_PREFILL)
        pcheck_input(&pe, PCHECK_IN_PROMPT_ATT, v->n_heads, s->core.window, n);
    snap_select_emit(&pe, phase, sc, Hkv, d2, kv_len, 0, n, b, tol);
    return policy_emit_done(&pe, "snapkv", e);
}

const policy_ops policy_snapkv = {
    .name = "snapkv",
    .summary = "one-shot prompt compression by observation-window votes with pooling",
    .params = snap_params,
    .n_params = sizeof snap_params / sizeof snap_params[0],
    .init = snap_init,
    SNAPKV_OPS,
};
