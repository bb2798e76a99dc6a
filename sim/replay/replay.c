/* replay.c — the trace under a policy, step by step (replay.h; driving order in policy.h).
 *
 * Streaming: the trace is read position by position (trace_seek), keys/values by random access
 * (trace_kv, trace_gather); the replay holds O(layers · KV heads · T) bytes of masks plus what
 * the policy itself keeps (e.g. H2O's scores), never O(T²). Accuracy metrics are computed every
 * metric_stride-th decode step; for a model with weights (stories260K) the model is also run
 * with the policy applied through llama_hooks.attend_mask (teacher-forced on the trace's
 * tokens) for logit KL, top-1 agreement and perplexity. */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

#include "models/llama.h"
#include "metrics.h"
#include "sim/policy/policy.h"
#include "sim/trace/trace.h"

_Static_assert(TRACE_SPAN_MAX <= POLICY_SPAN_MAX, "a trace span is longer than a policy takes");

struct replay {
    const run_cfg *cfg;
    const policy_ops *pol;
    void *st;
    policy_env env;
    policy_args args;
    trace *tr; /* sh->tr */
    replay_share *sh;
    int sh_own; /* sh is this replay's own (not replay_open_shared's) */
    uint32_t P, next_step, stride, err_heads, prompt_rows;
    uint32_t prompt_next; /* the next prompt position to observe */
    int prompt_done, live;
    int once;       /* the newest step holds one-time work (policy_ops.one_time) */
    int exact;      /* the full cache on a synthetic trace: its metrics hold by construction,
                     * so the trace is never generated */
    uint8_t *keep;  /* Hkv × max_len */
    uint32_t *kept; /* L × Hkv of the newest step: the rows the lowering attends */
    uint32_t *ffn;  /* L: FFN neurons of the newest step (policy_ops.ffn_active), or NULL */
    int ffn_secret;
    uint32_t *sel; /* Hkv: one layer's selection counts */
    float *att;    /* H × max_len: attention renormalized over the kept entries */
    float *vbuf;
    uint32_t *idx;
    uint32_t *kidx; /* max_len: one KV head's kept positions (layer_rows) */
    metrics m;
};

/* ---- opening --------------------------------------------------------------------------- */

static int gather_k(void *ctx, uint32_t layer, uint32_t g, const uint32_t *idx, size_t n, float *k)
{
    return trace_gather(ctx, layer, g, idx, n, k, NULL);
}

static int get_k(void *ctx, uint32_t layer, uint32_t pos, float *k)
{
    return trace_kv(ctx, layer, pos, k, NULL);
}

/* ---- what the runs of one trace share ------------------------------------------------- */

#define SHARE_TOPK 64 /* top-k positions kept per row; a larger recall_k is computed per run */

struct replay_share {
    trace *tr;
    uint32_t L, H, d;
    uint32_t *top_at; /* L × H: position + 1 whose top-k `top` holds, 0 none */
    uint32_t *top_k;  /* L × H: the recall_k it was computed for */
    uint32_t *top_n;  /* L × H: positions found */
    uint32_t *top;    /* L × H × SHARE_TOPK */
    uint32_t *out_at; /* L × H: position + 1 whose full-cache output `out` holds, 0 none */
    double *out; /* L × H × (d + 2): o*, ‖o*‖², ‖W_o^h o*‖₁ (metrics_output_ref) */
    uint32_t *k_at, *v_at; /* L: position + 1 whose keys / values kbuf / vbuf hold, 0 none */
    float *kbuf, *vbuf;    /* L × Hkv × d: every layer's keys and values at one position */
    uint32_t Hkv;
};

void replay_share_close(replay_share *sh)
{
    if (!sh)
        return;
    if (sh->tr)
        trace_close(sh->tr);
    free(sh->top_at);
    free(sh->top_k);
    free(sh->top_n);
    free(sh->top);
    free(sh->out_at);
    free(sh->out);
    free(sh->k_at);
    free(sh->v_at);
    free(sh->kbuf);
    free(sh->vbuf);
    free(sh);
}

/* rows: the attention rows kept per layer for every reader (a group), or computed on demand
 * (one run, which asks for each row once). */
static int share_open(const run_cfg *cfg, int rows, replay_share **out, errbuf *e)
{
    *out = NULL;
    replay_share *sh = calloc(1, sizeof *sh);
    if (!sh)
        return err_set(e, MS_ERR_NOMEM, "replay: out of memory");
    int rc = trace_open_run(cfg, &sh->tr, e);
    if (rc) {
        free(sh);
        return rc;
    }
    const trace_shape *ts = trace_get_shape(sh->tr);
    size_t LH = (size_t)ts->n_layers * ts->n_heads;
    sh->L = ts->n_layers;
    sh->H = ts->n_heads;
    sh->d = ts->head_dim;
    sh->top_at = calloc(LH, sizeof *sh->top_at);
    sh->top_k = calloc(LH, sizeof *sh->top_k);
    sh->top_n = calloc(LH, sizeof *sh->top_n);
    sh->top = malloc(LH * SHARE_TOPK * sizeof *sh->top);
    sh->out_at = calloc(LH, sizeof *sh->out_at);
    sh->out = malloc(LH * (sh->d + 2) * sizeof *sh->out);
    sh->Hkv = ts->n_kv_heads;
    size_t kv = (size_t)ts->n_layers * ts->n_kv_heads * ts->head_dim;
    sh->k_at = calloc(sh->L, sizeof *sh->k_at);
    sh->v_at = calloc(sh->L, sizeof *sh->v_at);
    sh->kbuf = malloc(kv * sizeof *sh->kbuf);
    sh->vbuf = malloc(kv * sizeof *sh->vbuf);
    if (!sh->top_at || !sh->top_k || !sh->top_n || !sh->top || !sh->out_at || !sh->out ||
        !sh->k_at || !sh->v_at || !sh->kbuf || !sh->vbuf ||
        (rows && trace_share_rows(sh->tr) != MS_OK)) {
        replay_share_close(sh);
        return err_set(e, MS_ERR_NOMEM, "replay: out of memory for shared rows");
    }
    *out = sh;
    return MS_OK;
}

int replay_share_open(const run_cfg *cfg, replay_share **out, errbuf *e)
{
    return share_open(cfg, 1, out, e);
}

/* The top-k positions of the full row a (query head h of layer l at position n-1), from the
 * share when a run already found them. */
static const uint32_t *share_topk(replay *r, uint32_t l, uint32_t h, const float *a, uint32_t n,
                                  size_t *got)
{
    replay_share *sh = r->sh;
    size_t i = (size_t)l * sh->H + h;
    uint32_t *top = sh->top + i * SHARE_TOPK;
    if (r->m.recall_k > SHARE_TOPK) {
        *got = metrics_topk(&r->m, a, n, r->m.sel);
        return r->m.sel;
    }
    if (sh->top_at[i] != n || sh->top_k[i] != r->m.recall_k) {
        size_t k = metrics_topk(&r->m, a, n, r->m.sel);
        memcpy(top, r->m.sel, k * sizeof *top);
        sh->top_at[i] = n;
        sh->top_k[i] = r->m.recall_k;
        sh->top_n[i] = (uint32_t)k;
    }
    *got = sh->top_n[i];
    return top;
}

/* The keys (want_v 0) or values of layer l at pos, from the share when a run read them. */
static const float *share_kv(replay *r, uint32_t l, uint32_t pos, int want_v)
{
    replay_share *sh = r->sh;
    uint32_t *at = want_v ? sh->v_at : sh->k_at;
    float *buf = (want_v ? sh->vbuf : sh->kbuf) + (size_t)l * sh->Hkv * sh->d;
    if (at[l] != pos + 1) {
        if (trace_kv(r->tr, l, pos, want_v ? NULL : buf, want_v ? buf : NULL))
            return NULL;
        at[l] = pos + 1;
    }
    return buf;
}

/* The full cache's output of row a from the share (NULL: not there yet). */
static double *share_out(const replay *r, uint32_t l, uint32_t h, uint32_t n, int *have)
{
    replay_share *sh = r->sh;
    size_t i = (size_t)l * sh->H + h;
    *have = sh->out_at[i] == n;
    sh->out_at[i] = n;
    return sh->out + i * (sh->d + 2);
}

static int read_params(replay *r, errbuf *e)
{
    static const policy_ops none = {.name = "replay"};
    const policy_ops *p = r->pol ? r->pol : &none;
    uint32_t k;
    double live;
    int rc = policy_arg_u32(p, &r->args, "metric_stride", &r->stride, e);
    if (!rc)
        rc = policy_arg_u32(p, &r->args, "recall_k", &k, e);
    if (!rc)
        rc = policy_arg_u32(p, &r->args, "err_kv_heads", &r->err_heads, e);
    if (!rc)
        rc = policy_arg_u32(p, &r->args, "prompt_rows", &r->prompt_rows, e);
    if (!rc)
        rc = policy_arg_double(p, &r->args, "live", &live, e);
    if (rc)
        return rc;
    r->live = live != 0;
    return metrics_init(&r->m, k, r->env.max_len)
               ? err_set(e, MS_ERR_NOMEM, "replay: out of memory")
               : MS_OK;
}

int replay_reads_trace(const run_cfg *cfg)
{
    const char *name = cfg->policy.name[0] ? cfg->policy.name : "full";
    int has_trace = cfg->trace.source[0] && strcmp(cfg->trace.source, "none") != 0;
    return has_trace && !(!strcmp(name, "full") && !strcmp(cfg->trace.source, "synth"));
}

static unsigned needs_at(replay *r, uint32_t pos);

int replay_estimate(const run_cfg *cfg, replay_work *out, errbuf *e)
{
    memset(out, 0, sizeof *out);
    if (!replay_reads_trace(cfg))
        return MS_OK;
    const char *name = cfg->policy.name[0] ? cfg->policy.name : "full";
    const policy_ops *p = policy_find(name);
    if (!p)
        return err_set(e, MS_ERR_NOTFOUND, "unknown policy '%s'", name);
    replay r = {.cfg = cfg, .pol = p, .P = cfg->work.prompt_len};
    int rc = policy_args_load(p, cfg->policy.params, cfg->policy.n_params, cfg->scenario_path,
                              &r.args, e);
    if (!rc)
        rc = policy_arg_u32(p, &r.args, "prompt_rows", &r.prompt_rows, e);
    if (rc)
        return rc;
    out->prompt_rows = r.prompt_rows;
    if (!p->needs)
        return MS_OK;
    const model_cfg *mc = &cfg->model;
    r.env = (policy_env){.n_layers = mc->n_layers,
                         .n_heads = mc->n_heads,
                         .n_kv_heads = mc->n_kv_heads,
                         .head_dim = mc->head_dim,
                         .dim = mc->dim,
                         .ffn_dim = mc->ffn_dim,
                         .prompt_len = r.P,
                         .max_len = r.P + cfg->work.decode_len,
                         .rereads_k = 1,
                         .trace_dir = !strcmp(cfg->trace.source, "npy") ? cfg->trace.path : NULL};
    if ((rc = p->init(&r.env, &r.args, &r.st, e)))
        return rc;
    double per = (double)mc->n_layers * mc->n_heads * mc->head_dim;
    for (uint32_t pos = 0; pos < r.env.max_len; pos++)
        if (needs_at(&r, pos) & POLICY_NEED_ATT) {
            out->att_rows += 1;
            out->att_macs += per * (pos + 1.0);
            out->prompt_att_rows += pos < r.P;
        }
    if (p->fini)
        p->fini(r.st);
    return MS_OK;
}

int replay_open(const run_cfg *cfg, replay **out, errbuf *e)
{
    return replay_open_shared(cfg, NULL, out, e);
}

int replay_open_shared(const run_cfg *cfg, replay_share *shared, replay **out, errbuf *e)
{
    *out = NULL;
    const char *name = cfg->policy.name[0] ? cfg->policy.name : "full";
    const policy_ops *p = policy_find(name);
    if (!p)
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: unknown policy '%s'\n  hint: `mpcsim list policies`",
                       cfg->scenario_path[0] ? cfg->scenario_path : "<run>", name);
    policy_args args; /* parsed and checked once: what the replay and the policy read */
    int rc =
        policy_args_load(p, cfg->policy.params, cfg->policy.n_params, cfg->scenario_path, &args, e);
    if (rc)
        return rc;
    replay *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(e, MS_ERR_NOMEM, "replay: out of memory");
    r->cfg = cfg;
    r->pol = p;
    r->P = cfg->work.prompt_len;
    r->args = args;
    const model_cfg *mc = &cfg->model;
    r->env = (policy_env){mc->n_layers, mc->n_heads, mc->n_kv_heads, mc->head_dim,
                          mc->dim,      mc->ffn_dim, r->P,           r->P + cfg->work.decode_len,
                          NULL,         NULL,        NULL,           0,
                          NULL};
    int has_trace = cfg->trace.source[0] && strcmp(cfg->trace.source, "none") != 0;
    r->exact = !strcmp(p->name, "full") && !strcmp(cfg->trace.source, "synth");
    if (has_trace && !r->exact) {
        r->sh_own = shared == NULL;
        if (shared)
            r->sh = shared;
        else
            rc = share_open(cfg, 0, &r->sh, e);
        r->tr = r->sh ? r->sh->tr : NULL;
        if (!rc && trace_get_shape(r->tr)->n_tokens < r->env.max_len)
            rc = err_set(e, MS_ERR_INPUT,
                         "trace has %u positions, the run needs prompt %u + decode %u\n"
                         "  hint: shorten the run or record a longer trace",
                         trace_get_shape(r->tr)->n_tokens, r->P, cfg->work.decode_len);
        r->env.gather_k = gather_k;
        r->env.get_k = get_k;
        r->env.kv_ctx = r->tr;
        r->env.rereads_k = 1; /* observe() gets these very keys (trace_kv) */
        if (!strcmp(cfg->trace.source, "npy"))
            r->env.trace_dir = cfg->trace.path;
    } else if (p->observe) {
        rc = err_set(e, MS_ERR_INPUT,
                     "%s: error: policy '%s' reads attention/keys and needs a trace\n"
                     "  hint: set trace: {source: synth} (or record / npy)",
                     cfg->scenario_path[0] ? cfg->scenario_path : "<run>", name);
    }
    if (!rc)
        rc = read_params(r, e);
    size_t L = mc->n_layers, Hkv = mc->n_kv_heads, T = r->env.max_len + 1;
    if (!rc) {
        r->keep = malloc(Hkv * T);
        r->kept = calloc(L * Hkv, sizeof *r->kept);
        r->sel = calloc(Hkv, sizeof *r->sel);
        r->att = malloc((size_t)mc->n_heads * T * sizeof *r->att);
        r->vbuf = malloc(T * mc->head_dim * sizeof *r->vbuf);
        r->idx = malloc(T * sizeof *r->idx);
        r->kidx = malloc(T * sizeof *r->kidx);
        if (!r->keep || !r->kept || !r->sel || !r->att || !r->vbuf || !r->idx || !r->kidx)
            rc = err_set(e, MS_ERR_NOMEM, "replay: out of memory");
    }
    if (!rc)
        rc = p->init(&r->env, &r->args, &r->st, e);
    /* a layer-local policy that reads the rows of every decode step as well as the prompt's
     * spans (H2O) keeps O(L·Hkv·T) state: it can afford the keys' words (trace_keep_key_words);
     * one that reads rows of the prompt only (SnapKV, MPCache) need not */
    if (!rc && r->tr && r->sh_own && p->layer_local && p->needs &&
        (p->needs(r->st, r->P) & POLICY_NEED_ATT))
        trace_keep_key_words(r->tr);
    if (rc) {
        replay_close(r);
        return rc;
    }
    for (size_t i = 0; i < T - 1; i++)
        r->idx[i] = (uint32_t)i;
    *out = r;
    return MS_OK;
}

void replay_close(replay *r)
{
    if (!r)
        return;
    if (r->st)
        r->pol->fini(r->st);
    if (r->sh_own)
        replay_share_close(r->sh);
    metrics_free(&r->m);
    free(r->keep);
    free(r->kept);
    free(r->ffn);
    free(r->sel);
    free(r->att);
    free(r->vbuf);
    free(r->idx);
    free(r->kidx);
    free(r);
}

/* ---- observation ------------------------------------------------------------------------ */

/* W_o of a layer. A synthetic trace generates an i.i.d. Gaussian W_o per layer (16M normals
 * for a 7B layer), so the replay uses layer 0's draw for every layer: the same distribution,
 * a different (fixed) sample per layer would not change any expectation. The trace keeps the
 * draw (synth_wo caches layer 0 whatever the model's size), so it is read in place, not
 * copied (64 MiB at 7B shapes). */
static const float *layer_wo(replay *r, uint32_t layer, uint32_t *rows, uint32_t *cols)
{
    return trace_wo(r->tr, trace_is_synthetic(r->tr) ? 0 : layer, rows, cols);
}

/* Fills and passes one (pos, layer) observation; att_used is the attention the model computed
 * (NULL: the full row from the trace). */
static unsigned prompt_mask(const replay *r, uint32_t pos, unsigned need)
{
    if (pos < r->P && r->prompt_rows && pos + r->prompt_rows < r->P)
        need &= ~POLICY_NEED_ATT; /* prompt_rows: only the last rows of the prompt */
    return need;
}

/* What policy state st wants at pos, over all layers (layer UINT32_MAX) or at one layer. */
static unsigned needs_of(const replay *r, void *st, uint32_t layer, uint32_t pos)
{
    const policy_ops *p = r->pol;
    unsigned need = layer != UINT32_MAX && p->layer_needs ? p->layer_needs(st, layer, pos)
                    : p->needs                            ? p->needs(st, pos)
                                                          : 0;
    return prompt_mask(r, pos, need);
}

static unsigned needs_at(replay *r, uint32_t pos) { return needs_of(r, r->st, UINT32_MAX, pos); }

static int observe_at(replay *r, uint32_t pos, uint32_t layer, uint32_t g, const float *q_at,
                      const float *att_used, errbuf *e)
{
    if (!r->pol->observe)
        return MS_OK;
    unsigned need = needs_of(r, r->st, layer, pos);
    policy_obs o = {.layer = layer, .pos = pos};
    if (g != UINT32_MAX) { /* one KV head (a span: policy_ops.layer_local) */
        o.kv_lo = g;
        o.kv_hi = g + 1;
    }
    if (need & (POLICY_NEED_Q | POLICY_NEED_ATT))
        o.q = q_at ? q_at : trace_q(r->tr, layer);
    if (need & POLICY_NEED_ATT)
        o.att = att_used ? att_used : trace_att(r->tr, layer);
    /* every run of a group observes the same keys and values: read once (replay_share) */
    if (((need & POLICY_NEED_K) && !(o.k = share_kv(r, layer, pos, 0))) ||
        ((need & POLICY_NEED_V) && !(o.v = share_kv(r, layer, pos, 1))))
        return err_set(e, MS_ERR_INPUT, "replay: trace has no keys/values at %u", pos);
    if (need & POLICY_NEED_FFN)
        o.ffn = trace_ffn(r->tr, layer);
    if (need & POLICY_NEED_WO) {
        uint32_t rows, cols;
        o.wo = layer_wo(r, layer, &rows, &cols);
    }
    return r->pol->observe(r->st, &o, e);
}

static int observe(replay *r, uint32_t pos, uint32_t layer, const float *att_used, errbuf *e)
{
    return observe_at(r, pos, layer, UINT32_MAX, NULL, att_used, e);
}

/* Observes one prompt position (dense causal attention) at every layer. */
static int prompt_pos(replay *r, uint32_t pos, errbuf *e)
{
    /* a position the policy reads nothing from is not generated (synthetic traces) */
    unsigned need = needs_at(r, pos);
    int stream = need & (POLICY_NEED_Q | POLICY_NEED_ATT | POLICY_NEED_FFN);
    int rc = stream ? trace_seek(r->tr, pos, e) : MS_OK;
    for (uint32_t l = 0; !rc && l < r->env.n_layers; l++)
        rc = observe(r, pos, l, NULL, e);
    return rc;
}

int replay_span_off;

/* 1: r observes prompt position pos in a span (its rows, layer by layer and KV head by KV
 * head); 0: position by position, reading no row and no query (so in any order with a group's
 * span); -1: neither. */
static int span_role(replay *r, uint32_t pos)
{
    if (!r->tr || !r->pol->observe || r->prompt_done || pos < r->prompt_next || pos >= r->P)
        return 0; /* observes nothing there */
    unsigned need = needs_at(r, pos);
    if (need == POLICY_NEED_ATT && r->pol->layer_local)
        return 1;
    return need & (POLICY_NEED_Q | POLICY_NEED_ATT | POLICY_NEED_FFN) ? -1 : 0;
}

/* How many prompt positions from p0 (up to pos) to observe as one span: consecutive positions
 * that read attention rows and nothing else, for a policy whose observations are layer-local;
 * 1: observe p0 alone. */
static uint32_t span_len(replay *r, uint32_t p0, uint32_t pos)
{
    if (replay_span_off)
        return 1;
    uint32_t max = trace_span_max(r->tr), c = 0;
    while (c < max && p0 + c <= pos && span_role(r, p0 + c) == 1)
        c++;
    return c ? c : 1;
}

/* Observes KV head g of layer l at the cnt positions of the trace's span from p0, in order. */
static int span_head(replay *r, uint32_t p0, uint32_t cnt, uint32_t l, uint32_t g, errbuf *e)
{
    int rc = MS_OK;
    for (uint32_t i = 0; !rc && i < cnt; i++) {
        /* rows only for the layers that read them (policy_ops.layer_needs) */
        int att = needs_of(r, r->st, l, p0 + i) & POLICY_NEED_ATT;
        rc = observe_at(r, p0 + i, l, g, trace_span_q(r->tr, l, i),
                        att ? trace_span_att(r->tr, l, g, i) : NULL, e);
    }
    return rc;
}

/* Observes cnt prompt positions from p0 layer by layer and KV head by KV head
 * (policy_ops.layer_local): the trace computes a head's rows at all of them in one pass over
 * the keys (trace_span_att) and the policy reads them while they are in cache; each head's
 * observations still come in position order. */
static int prompt_span(replay *r, uint32_t p0, uint32_t cnt, errbuf *e)
{
    int rc = trace_span_begin(r->tr, p0, cnt, e);
    for (uint32_t l = 0; !rc && l < r->env.n_layers; l++)
        for (uint32_t g = 0; !rc && g < r->env.n_kv_heads; g++)
            rc = span_head(r, p0, cnt, l, g, e);
    return rc;
}

int replay_prompt_upto(replay *r, uint32_t pos, errbuf *e)
{
    int rc = MS_OK;
    if (!r->tr || !r->pol->observe)
        return rc;
    while (!rc && !r->prompt_done && r->prompt_next <= pos && r->prompt_next < r->P) {
        uint32_t cnt = span_len(r, r->prompt_next, pos);
        rc = cnt > 1 ? prompt_span(r, r->prompt_next, cnt, e) : prompt_pos(r, r->prompt_next, e);
        r->prompt_next += cnt;
    }
    return rc;
}

/* ---- a group's prompt ---------------------------------------------------------------------- */

uint32_t replay_group_span(replay *const *rs, size_t n, uint32_t p0)
{
    const trace *t = NULL;
    int rows = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rs[i])
            continue;
        int role = span_role(rs[i], p0);
        if (role < 0 || (t && rs[i]->tr != t))
            return 1;
        t = rs[i]->tr;
        rows |= role == 1;
    }
    if (replay_span_off || !rows || !t)
        return 1;
    /* every replay in the same role at each position of the span (a replay that reads rows
     * ends it at the prompt's end, where it observes nothing) */
    uint32_t c = 1, max = trace_span_max(t);
    for (; c < max; c++) {
        int same = 1;
        for (size_t i = 0; same && i < n; i++)
            same = !rs[i] || span_role(rs[i], p0 + c) == span_role(rs[i], p0);
        if (!same)
            break;
    }
    return c;
}

int replay_group_span_begin(replay_share *sh, uint32_t p0, uint32_t cnt, errbuf *e)
{
    return trace_span_begin(sh->tr, p0, cnt, e);
}

int replay_group_span_head(replay *r, uint32_t p0, uint32_t cnt, uint32_t l, uint32_t g, errbuf *e)
{
    if (span_role(r, p0) != 1)
        return MS_OK;
    int rc = span_head(r, p0, cnt, l, g, e);
    if (!rc && l + 1 == r->env.n_layers && g + 1 == r->env.n_kv_heads)
        r->prompt_next = p0 + cnt;
    return rc;
}

/* Feeds the rest of the prompt and runs the prefill selection, once. */
static int ensure_prompt(replay *r, errbuf *e)
{
    if (r->prompt_done)
        return MS_OK;
    int rc = r->P ? replay_prompt_upto(r, r->P - 1, e) : MS_OK;
    r->prompt_done = 1;
    if (rc)
        return rc;
    return r->pol->prefill ? r->pol->prefill(r->st, e) : MS_OK;
}

/* The newest step's FFN widths per layer, when the policy has them. */
static int take_ffn(replay *r, errbuf *e)
{
    if (!r->pol->ffn_active)
        return MS_OK;
    if (!r->ffn && !(r->ffn = calloc(r->env.n_layers + 1, sizeof *r->ffn)))
        return err_set(e, MS_ERR_NOMEM, "replay: out of memory");
    for (uint32_t l = 0; l < r->env.n_layers; l++)
        r->ffn[l] = r->pol->ffn_active(r->st, l, &r->ffn_secret);
    return MS_OK;
}

const uint32_t *replay_ffn_active(const replay *r, int *secret)
{
    *secret = r->ffn_secret;
    return r->ffn;
}

int replay_attended_cache(const replay *r) { return r->pol->attend != NULL; }

int replay_prefill(replay *r, op_program *prog, errbuf *e)
{
    int rc = ensure_prompt(r, e);
    for (uint32_t l = 0; !rc && r->pol->emit_cost && l < r->env.n_layers; l++)
        rc = r->pol->emit_cost(r->st, PHASE_PREFILL, l, r->P, NULL, prog, e);
    return rc ? rc : take_ffn(r, e);
}

/* ---- decode steps ------------------------------------------------------------------------ */

/* The values of the kept positions (n-1 among them) or, when fewer, of the evicted ones into
 * r->vbuf, in order; 1 in *evicted for the latter (metrics_output_kept). */
static int gather_kept(replay *r, uint32_t l, uint32_t g, const uint8_t *keep, uint32_t n,
                       int *evicted)
{
    uint32_t kept = 1;
    for (uint32_t j = 0; j + 1 < n; j++)
        kept += keep[j] != 0;
    *evicted = n - kept < kept;
    uint32_t c = 0;
    for (uint32_t j = 0; j < n; j++)
        if ((j + 1 == n || keep[j]) != *evicted)
            r->idx[c++] = j;
    int rc = trace_gather(r->tr, l, g, r->idx, c, NULL, r->vbuf);
    for (uint32_t i = 0; i < c; i++) /* idx is the identity again (replay_open) */
        r->idx[i] = i;
    return rc;
}

/* The kept positions of a row of n entries in order (keep[j] for j < n − 1, and n − 1 itself),
 * into idx; returns their count. Eight mask bytes at a time: a policy's cache is mostly a
 * small part of the row. */
static uint32_t kept_list(const uint8_t *keep, uint32_t n, uint32_t *idx)
{
    uint32_t c = 0, j = 0;
    for (; j + 8 < n; j += 8) {
        uint64_t w;
        memcpy(&w, keep + j, sizeof w);
        for (uint32_t b = 0; w && b < 8; b++) {
            idx[c] = j + b;
            c += keep[j + b] != 0;
        }
    }
    for (; j + 1 < n; j++) {
        idx[c] = j;
        c += keep[j] != 0;
    }
    idx[c++] = n - 1;
    return c;
}

/* A row renormalized over its kept entries (kidx, c of them): a[j]/R there, 0 elsewhere, R the
 * sum of the kept entries in position order in double — the entries left out would add +0 to
 * it, so it is the sum over the whole row with the evicted ones zeroed. */
static void renorm_row(const float *a, uint32_t n, const uint32_t *kidx, uint32_t c, float *out)
{
    double R = 0;
    for (uint32_t i = 0; i < c; i++)
        R += a[kidx[i]];
    memset(out, 0, n * sizeof *out);
    for (uint32_t i = 0; i < c; i++)
        out[kidx[i]] = (float)(a[kidx[i]] / R);
}

/* Metrics of one layer against the full row (measure); the rows renormalized over the kept
 * entries into r->att (renorm: the policy observes them). What is a function of the full row
 * alone (its top-k, the full cache's output) comes from the share (replay_share). */
static int layer_rows(replay *r, uint32_t pos, uint32_t l, const float *full, int measure,
                      int renorm, errbuf *e)
{
    uint32_t step = pos - r->P;
    const policy_env *v = &r->env;
    uint32_t n = pos + 1, G = v->n_heads / v->n_kv_heads, d = v->head_dim;
    uint32_t rows = 0, cols = 0;
    const float *wo = measure ? layer_wo(r, l, &rows, &cols) : NULL;
    for (uint32_t g = 0; g < v->n_kv_heads; g++) {
        const uint8_t *keep = r->keep + (size_t)g * pos;
        /* output error on err_heads KV heads per layer, rotating with the step */
        uint32_t slot = (g + v->n_kv_heads -
                         (uint32_t)(((uint64_t)step / (r->stride ? r->stride : 1) * r->err_heads) %
                                    v->n_kv_heads)) %
                        v->n_kv_heads;
        int out_err = measure && slot < r->err_heads && d <= METRICS_MAX_D;
        double *ref[64];
        int have_all = 1, have;
        for (uint32_t h = g * G; out_err && h < (g + 1) * G; h++) {
            ref[h - g * G] = share_out(r, l, h, n, &have);
            have_all &= have;
        }
        if (out_err && G > 64)
            return err_set(e, MS_ERR_INTERNAL, "replay: %u query heads per KV head", G);
        if (out_err && !have_all) { /* the full cache's outputs: every value of the head */
            if (trace_gather(r->tr, l, g, r->idx, n, NULL, r->vbuf))
                return err_set(e, MS_ERR_INPUT, "replay: trace has no values");
            for (uint32_t h = g * G; h < (g + 1) * G; h++) {
                double *o = ref[h - g * G];
                metrics_output_ref(full + (size_t)h * n, n, r->vbuf, d,
                                   wo ? wo + (size_t)h * d : NULL, cols, rows, o, o + d, o + d + 1);
            }
        }
        int evicted = 0;
        if (out_err && gather_kept(r, l, g, keep, n, &evicted))
            return err_set(e, MS_ERR_INPUT, "replay: trace has no values");
        uint32_t c = renorm ? kept_list(keep, n, r->kidx) : 0;
        for (uint32_t h = g * G; h < (g + 1) * G; h++) {
            const float *a = full + (size_t)h * n;
            if (renorm)
                renorm_row(a, n, r->kidx, c, r->att + (size_t)h * n);
            if (!measure)
                continue;
            size_t got;
            const uint32_t *top = share_topk(r, l, h, a, n, &got);
            double R = metrics_row_top(&r->m, a, keep, n, top, got);
            if (out_err) {
                const double *o = ref[h - g * G];
                metrics_output_kept(&r->m, a, keep, n, R, r->vbuf, evicted, d,
                                    wo ? wo + (size_t)h * d : NULL, cols, rows, o, o[d], o[d + 1]);
            }
        }
    }
    return MS_OK;
}

/* layer_rows for the full cache on a synthetic trace: the same rows and output-error heads,
 * counted by construction (metrics_exact). */
static void exact_rows(replay *r, uint32_t pos, uint32_t step)
{
    const policy_env *v = &r->env;
    uint32_t G = v->n_heads / v->n_kv_heads;
    uint32_t rot =
        (uint32_t)(((uint64_t)step / (r->stride ? r->stride : 1) * r->err_heads) % v->n_kv_heads);
    for (uint32_t g = 0; g < v->n_kv_heads; g++) {
        uint32_t slot = (g + v->n_kv_heads - rot) % v->n_kv_heads;
        int out_err = slot < r->err_heads && v->head_dim <= METRICS_MAX_D; /* as layer_rows */
        for (uint32_t h = 0; h < G; h++)
            metrics_exact(&r->m, pos + 1, out_err, v->dim > 0);
    }
}

/* The largest count of kept positions over the KV heads of a keep mask (Hkv × pos). */
static uint32_t keep_max(const uint8_t *keep, uint32_t Hkv, uint32_t pos)
{
    uint32_t cmax = 0;
    for (uint32_t g = 0; g < Hkv; g++) {
        uint32_t c = 0;
        const uint8_t *kp = keep + (size_t)g * pos;
        for (uint32_t j = 0; j < pos; j++)
            c += kp[j];
        cmax = c > cmax ? c : cmax;
    }
    return cmax;
}

/* One decode position: select, measure, observe and (if prog) emit, for every layer. idle:
 * nobody costs the step (no prog), so a stateless selection (policy_ops.stateless_select)
 * runs only where a metric or the policy's own observation reads it. */
static int decode_pos(replay *r, uint32_t step, op_program *prog, int idle, errbuf *e)
{
    const policy_env *v = &r->env;
    uint32_t pos = r->P + step, Hkv = v->n_kv_heads;
    int measure = (r->tr || r->exact) && r->stride && step % r->stride == 0;
    unsigned need = r->pol->needs ? r->pol->needs(r->st, pos) : 0;
    /* positional policies without metrics never touch the trace */
    int read = r->tr && (measure || r->pol->observe || (need & POLICY_NEED_Q));
    int rc = read ? trace_seek(r->tr, pos, e) : MS_OK;
    for (uint32_t l = 0; !rc && l < v->n_layers; l++) {
        const float *q = read ? trace_q(r->tr, l) : NULL;
        /* The public shape of a layer is its largest head selection: heads run vectorized in
         * the same ops, and a shorter selection (a partial last page or cluster chosen by
         * some heads only) is padded with masked slots. Metrics use the true sets. */
        uint32_t cmax = 0;
        int att = needs_of(r, r->st, l, pos) & POLICY_NEED_ATT;
        if (idle && !prog && !measure && !att && r->pol->stateless_select) {
            if (read)
                rc = observe(r, pos, l, NULL, e);
            continue;
        }
        if (!read && !need && r->pol->count) {
            cmax = r->pol->count(r->st, l, pos); /* positional: no mask to build */
        } else {
            rc = r->pol->select(r->st, l, pos, q, r->keep, e);
            if (rc)
                break;
            cmax = keep_max(r->keep, Hkv, pos);
        }
        uint32_t *kept = r->kept + (size_t)l * Hkv;
        for (uint32_t g = 0; g < Hkv; g++)
            r->sel[g] = kept[g] = cmax;
        const float *used = NULL;
        if (measure && r->exact) {
            exact_rows(r, pos, step);
        } else if (measure || att) {
            rc = layer_rows(r, pos, l, trace_att(r->tr, l), measure, att, e);
            used = att ? r->att : NULL;
        }
        if (!rc && read)
            rc = observe(r, pos, l, used, e);
        if (!rc && prog && r->pol->emit_cost)
            rc = r->pol->emit_cost(r->st, PHASE_DECODE, l, pos, r->sel, prog, e);
        /* the rows the MPC step attends, when the secure algorithm pads the selection to a
         * public bound (the lowering only: the metrics above used the selection itself) */
        if (!rc && r->pol->attend)
            r->pol->attend(r->st, l, pos, r->sel, kept);
    }
    r->once = r->pol->one_time ? r->pol->one_time(r->st, pos) : 0;
    return rc || !prog ? rc : take_ffn(r, e);
}

int replay_step_once(const replay *r) { return r->once; }

int replay_idle_off;

int replay_idle_ok(const replay *r, uint32_t step)
{
    return !replay_idle_off && r->pol->stateless_select &&
           !(r->pol->one_time && r->pol->one_time(r->st, r->P + step));
}

int replay_step_idle(replay *r, uint32_t step, uint32_t kv_len, errbuf *e)
{
    if (!replay_idle_ok(r, step))
        return replay_step(r, step, kv_len, r->kept, NULL, e);
    if (kv_len != r->P + step || step >= r->cfg->work.decode_len || step != r->next_step)
        return err_set(e, MS_ERR_INTERNAL, "replay: idle step %u at kv_len %u out of order", step,
                       kv_len);
    int rc = ensure_prompt(r, e);
    return rc ? rc : decode_pos(r, r->next_step++, NULL, 1, e);
}

int replay_step(replay *r, uint32_t step, uint32_t kv_len, uint32_t *kept, op_program *prog,
                errbuf *e)
{
    if (kv_len != r->P + step || step >= r->cfg->work.decode_len || step < r->next_step)
        return err_set(e, MS_ERR_INTERNAL,
                       "replay: step %u at kv_len %u out of order (prompt %u, next step %u)", step,
                       kv_len, r->P, r->next_step);
    int rc = ensure_prompt(r, e);
    while (!rc && r->next_step < step) /* skipped steps still move the policy's state */
        rc = decode_pos(r, r->next_step++, NULL, 0, e);
    if (!rc)
        rc = decode_pos(r, r->next_step++, prog, 0, e);
    if (!rc && kept != r->kept)
        memcpy(kept, r->kept, (size_t)r->env.n_layers * r->env.n_kv_heads * sizeof *kept);
    return rc;
}

/* ---- the model run with the policy applied ------------------------------------------------ */

typedef struct live_ctx {
    replay *r;
    void *st;      /* a second instance of the policy, driven by the live model */
    uint8_t *keep; /* Hkv × max_len for the current (pos, layer) */
    uint32_t keep_layer, keep_pos;
    int prefilled, err;
    errbuf *e;
} live_ctx;

static int live_mask(void *ctx, uint32_t layer, uint32_t g, uint32_t pos, uint8_t *mask)
{
    live_ctx *c = ctx;
    replay *r = c->r;
    if (pos < r->P || c->err)
        return 0;
    if (!c->prefilled) {
        c->prefilled = 1;
        if (r->pol->prefill && r->pol->prefill(c->st, c->e))
            c->err = 1;
    }
    if (c->keep_layer != layer || c->keep_pos != pos) {
        /* query-aware policies see the full-cache trace's query at this position and layer */
        if (r->pol->select(c->st, layer, pos, trace_q(r->tr, layer), c->keep, c->e))
            c->err = 1;
        c->keep_layer = layer;
        c->keep_pos = pos;
    }
    memcpy(mask, c->keep + (size_t)g * pos, pos);
    mask[pos] = 1;
    return 1;
}

static void live_layer(void *ctx, const llama_layer_view *lv)
{
    live_ctx *c = ctx;
    replay *r = c->r;
    if (c->err || !r->pol->observe)
        return;
    /* the same contract as the trace replay: only the arrays the policy asked for */
    uint32_t rows, cols, pos = lv->pos;
    unsigned need = needs_of(r, c->st, lv->layer, pos);
    policy_obs o = {.layer = lv->layer, .pos = pos};
    if (need & (POLICY_NEED_Q | POLICY_NEED_ATT))
        o.q = lv->q;
    if (need & POLICY_NEED_ATT)
        o.att = lv->att;
    if (need & POLICY_NEED_K)
        o.k = lv->k;
    if (need & POLICY_NEED_V)
        o.v = lv->v;
    if (need & POLICY_NEED_FFN)
        o.ffn = lv->ffn_pre;
    if (need & POLICY_NEED_WO)
        o.wo = layer_wo(r, lv->layer, &rows, &cols);
    if (r->pol->observe(c->st, &o, c->e))
        c->err = 1;
}

/* The full-cache model's own q and k against the trace's, at every layer and position: the
 * policy reads the trace's queries and keys while the model attends with its own, so a trace
 * of another model, tokenizer or channel order would silently mix the two. */
typedef struct agree_ctx {
    replay *r;
    int rc;
    errbuf *e;
} agree_ctx;

#define LIVE_AGREE_TOL 1e-3 /* relative; a float32 dump of the same weights agrees to ~1e-6 */

static void agree_layer(void *ctx, const llama_layer_view *lv)
{
    agree_ctx *a = ctx;
    if (a->rc == MS_OK)
        a->rc = trace_agrees_with_model(a->r->tr, a->r->cfg->model.name, lv->layer, lv->pos, lv->q,
                                        lv->k, LIVE_AGREE_TOL, a->e);
}

static int live_run(replay *r, errbuf *e)
{
    const model_cfg *mc = &r->cfg->model;
    const int32_t *tok = trace_tokens(r->tr);
    char wpath[1024];
    if (!tok || !mc->weights[0] || model_file_path(mc->weights, wpath, sizeof wpath))
        return MS_OK; /* no model to run: attention-level metrics only */
    llama *full = NULL, *pol = NULL;
    int rc = llama_load(mc, wpath, &full, e);
    if (!rc)
        rc = llama_load(mc, wpath, &pol, e);
    live_ctx c = {.r = r, .keep_layer = UINT32_MAX, .e = e};
    float *lf = malloc((size_t)mc->vocab * sizeof *lf),
          *lp = malloc((size_t)mc->vocab * sizeof *lp);
    c.keep = malloc((size_t)mc->n_kv_heads * (r->env.max_len + 1));
    if (!rc && (!lf || !lp || !c.keep))
        rc = err_set(e, MS_ERR_NOMEM, "replay: out of memory");
    policy_env lenv = r->env;
    lenv.rereads_k = 0; /* this instance observes the model's own keys, not the trace's */
    if (!rc)
        rc = r->pol->init(&lenv, &r->args, &c.st, e);
    llama_hooks hk = {.ctx = &c, .on_layer = live_layer, .attend_mask = live_mask};
    agree_ctx ag = {r, MS_OK, e};
    llama_hooks hf = {.ctx = &ag, .on_layer = agree_layer};
    uint32_t T = r->env.max_len;
    for (uint32_t pos = 0; !rc && pos < T; pos++) {
        rc = trace_seek(r->tr, pos, e);
        if (!rc)
            rc = llama_forward(full, tok[pos], pos, &hf, lf);
        if (!rc)
            rc = ag.rc;
        if (!rc)
            rc = llama_forward(pol, tok[pos], pos, &hk, lp);
        if (!rc && c.err)
            rc = MS_ERR_INPUT;
        /* the next token must lie inside the run's window [0, prompt + decode): the same
         * positions are scored whatever the trace's length or source */
        if (!rc && pos >= r->P && pos + 1 < T)
            metrics_logits(&r->m, lf, lp, mc->vocab, tok[pos + 1]);
    }
    if (c.st)
        r->pol->fini(c.st);
    free(c.keep);
    free(lf);
    free(lp);
    llama_free(full);
    llama_free(pol);
    return rc;
}

int replay_metrics(replay *r, const metric_sink *out, errbuf *e)
{
    int rc = MS_OK;
    if (r->tr && r->live)
        rc = live_run(r, e);
    if (!rc && metrics_report(&r->m, out))
        rc = err_set(e, MS_ERR_NOMEM, "replay: out of memory for metrics");
    if (!rc && r->pol->metrics) {
        run_metric pm[16];
        size_t n = r->pol->metrics(r->st, pm, 16);
        for (size_t i = 0; !rc && i < n; i++)
            if (out->add(out->ctx, pm[i].name, pm[i].value, pm[i].unit))
                rc = err_set(e, MS_ERR_NOMEM, "replay: out of memory for metrics");
    }
    return rc;
}
