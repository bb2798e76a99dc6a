/* keep.c — how a policy runs inside a secure session (secinf.h): which way (its selection on
 * shares, a public kept set, or the kept sets of its plaintext replay), and the keep masks of the
 * last two: the policy's select() by position, or its replay on the float model. */
#include "secinf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/runcfg.h"
#include "sim/policy/policy.h"

/* ---- the plaintext replay of a policy -------------------------------------------------------- */

typedef struct prep {
    const model_cfg *m;
    const policy_ops *pol;
    void *st;
    secpol_keep *k;
    const llama *pm; /* the model the policy runs on (for W_o) */
    uint32_t prompt, cur_layer, cur_pos;
    int prefilled, err;
    uint8_t *keep; /* Hkv × max_len of the current (pos, layer) */
    float *q;      /* L × H·d: the full-cache model's queries at the current position */
    float *kbuf;   /* L × max_len × Hkv·d: keys the policy model cached */
    int own_q;     /* the policy model's own queries (what a secure session computes) */
    errbuf *e;
} prep;

static int prep_gather_k(void *ctx, uint32_t layer, uint32_t g, const uint32_t *idx, size_t n,
                         float *k)
{
    prep *c = ctx;
    uint32_t d = c->m->head_dim, KD = c->m->n_kv_heads * d;
    for (size_t i = 0; i < n; i++)
        memcpy(k + i * d, c->kbuf + ((size_t)layer * c->k->max_len + idx[i]) * KD + g * d,
               d * sizeof *k);
    return MS_OK;
}

static void prep_full_layer(void *ctx, const llama_layer_view *v)
{
    prep *c = ctx;
    uint32_t QD = c->m->n_heads * c->m->head_dim;
    memcpy(c->q + (size_t)v->layer * QD, v->q, QD * sizeof *c->q);
}

static int prep_mask(void *ctx, uint32_t layer, uint32_t g, uint32_t pos, uint8_t *mask)
{
    prep *c = ctx;
    if (pos < c->prompt || c->err)
        return 0;
    if (!c->prefilled) {
        c->prefilled = 1;
        if (c->pol->prefill && c->pol->prefill(c->st, c->e))
            c->err = 1;
    }
    secpol_keep *k = c->k;
    if (c->cur_layer != layer || c->cur_pos != pos) {
        uint32_t QD = c->m->n_heads * c->m->head_dim;
        const float *q = c->own_q ? llama_query(c->pm) : c->q + (size_t)layer * QD;
        if (!c->err && c->pol->select(c->st, layer, pos, q, c->keep, c->e))
            c->err = 1;
        c->cur_layer = layer;
        c->cur_pos = pos;
        for (uint32_t h = 0; h < k->n_kv_heads; h++)
            memcpy(k->keep + (((size_t)pos * k->n_layers + layer) * k->n_kv_heads + h) * k->max_len,
                   c->keep + (size_t)h * pos, pos);
    }
    memcpy(mask, c->keep + (size_t)g * pos, pos);
    mask[pos] = 1;
    return 1;
}

static void prep_layer(void *ctx, const llama_layer_view *v)
{
    prep *c = ctx;
    uint32_t KD = c->m->n_kv_heads * c->m->head_dim;
    memcpy(c->kbuf + ((size_t)v->layer * c->k->max_len + v->pos) * KD, v->k, KD * sizeof *c->kbuf);
    if (c->err || !c->pol->observe)
        return;
    char nm[32];
    uint32_t r, cols;
    snprintf(nm, sizeof nm, "L%u.wo", v->layer);
    /* only what the policy asked for (policy.h: arrays not asked for are NULL) */
    unsigned need = c->pol->needs ? c->pol->needs(c->st, v->pos) : ~0u;
    policy_obs o = {.layer = v->layer,
                    .pos = v->pos,
                    .q = need & POLICY_NEED_Q ? v->q : NULL,
                    .k = need & POLICY_NEED_K ? v->k : NULL,
                    .v = need & POLICY_NEED_V ? v->v : NULL,
                    .att = need & POLICY_NEED_ATT ? v->att : NULL,
                    .ffn = need & POLICY_NEED_FFN ? v->ffn_pre : NULL,
                    .wo = need & POLICY_NEED_WO ? llama_weight(c->pm, nm, &r, &cols) : NULL};
    if (c->pol->observe(c->st, &o, c->e))
        c->err = 1;
}

/* A sparse FFN (Comet): the neurons the policy computes, from the policy model's own gate
 * pre-activations (what a secure session's predictor reads). */
static int prep_ffn(void *ctx, uint32_t layer, uint32_t pos, const float *ffn_pre, uint8_t *active)
{
    prep *c = ctx;
    return !c->err && c->pol->ffn_pattern ? c->pol->ffn_pattern(c->st, layer, ffn_pre, active) : 0;
}

/* The policy environment of model m over n positions after a prompt of prompt. */
static policy_env prep_env(const model_cfg *m, uint32_t prompt, uint32_t n)
{
    return (policy_env){.n_layers = m->n_layers,
                        .n_heads = m->n_heads,
                        .n_kv_heads = m->n_kv_heads,
                        .head_dim = m->head_dim,
                        .dim = m->dim,
                        .ffn_dim = m->ffn_dim,
                        .prompt_len = prompt,
                        .max_len = n};
}

/* "key=value" strings as a policy's scenario parameters, checked as a scenario's are and loaded
 * into *a (which points into kv). */
static int prep_args(const policy_ops *pol, const char *const *params, size_t n, kv_param *kv,
                     policy_args *a, errbuf *e)
{
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(params[i], '=');
        if (!eq || eq == params[i] || (size_t)(eq - params[i]) >= sizeof kv[i].key ||
            strlen(eq + 1) >= sizeof kv[i].val)
            return err_set(e, MS_ERR_INPUT,
                           "--policy-param wants KEY=VALUE (a policy parameter), "
                           "not '%s'",
                           params[i]);
        memset(&kv[i], 0, sizeof kv[i]);
        memcpy(kv[i].key, params[i], (size_t)(eq - params[i]));
        snprintf(kv[i].val, sizeof kv[i].val, "%s", eq + 1);
    }
    return policy_args_load(pol, kv, n, "--policy-param", a, e);
}

int secinf_policy_replay(const model_cfg *m, llama *ref, const char *policy,
                         const char *const *params, size_t n_params, const int *tokens, uint32_t n,
                         uint32_t prompt, secpol_keep *k, float *logits, errbuf *e)
{
    memset(k, 0, sizeof *k);
    const policy_ops *pol = policy_find(policy);
    if (!pol)
        return err_set(e, MS_ERR_INPUT, "unknown policy '%s'", policy);
    if (!prompt || prompt > n || n_params > RUN_MAX_PARAMS)
        return err_set(e, MS_ERR_INPUT, "policy replay: prompt %u of %u tokens, %zu parameters",
                       prompt, n, n_params);
    kv_param kv[RUN_MAX_PARAMS];
    policy_args a;
    int rc = prep_args(pol, params, n_params, kv, &a, e);
    if (rc)
        return rc;
    llama *pm = NULL;
    if ((rc = secpol_load_model(m, "policy replay", &pm, e)))
        return rc;
    *k = (secpol_keep){
        .from = prompt, .max_len = n, .n_layers = m->n_layers, .n_kv_heads = m->n_kv_heads};
    size_t KD = (size_t)m->n_kv_heads * m->head_dim;
    /* a policy whose selection on shares asks for it selects with the query of the model it runs
     * in (as that selection does); the others see the full-cache model's, as the simulator's
     * replay */
    prep c = {.m = m,
              .pol = pol,
              .k = k,
              .pm = pm,
              .prompt = prompt,
              .cur_layer = UINT32_MAX,
              .e = e,
              .own_q = pol->secure ? pol->secure->own_query : 0};
    k->keep = calloc((size_t)n * m->n_layers * m->n_kv_heads * n + 1, 1);
    c.keep = calloc((size_t)m->n_kv_heads * (n + 1), 1);
    c.q = calloc((size_t)m->n_layers * m->n_heads * m->head_dim, sizeof *c.q);
    c.kbuf = calloc((size_t)m->n_layers * n * KD, sizeof *c.kbuf);
    float *lf = malloc((size_t)m->vocab * sizeof *lf);
    if (!k->keep || !c.keep || !c.q || !c.kbuf || !lf)
        rc = err_set(e, MS_ERR_NOMEM, "policy replay: out of memory");
    policy_env env = prep_env(m, prompt, n);
    env.gather_k = prep_gather_k;
    env.kv_ctx = &c;
    /* a selection on shares from its emitted ops selects with the session's own query */
    if (!rc && !pol->secure && pol->emit_cost)
        c.own_q = secpol_emit_declares(pol, &env, &a);
    if (!rc)
        rc = pol->init(&env, &a, &c.st, e);
    llama_hooks hf = {.ctx = &c, .on_layer = prep_full_layer};
    llama_hooks hp = {
        .ctx = &c, .on_layer = prep_layer, .attend_mask = prep_mask, .ffn_mask = prep_ffn};
    llama_reset(ref);
    for (uint32_t pos = 0; !rc && pos < n; pos++) {
        rc = llama_forward(ref, tokens[pos], pos, &hf, lf);
        if (!rc)
            rc = llama_forward(pm, tokens[pos], pos, &hp,
                               logits ? logits + (size_t)pos * m->vocab : lf);
        if (!rc && c.err)
            rc = e->msg[0] ? MS_ERR_INPUT : err_set(e, MS_ERR_INPUT, "policy %s failed", policy);
    }
    if (c.st)
        pol->fini(c.st);
    free(c.keep), free(c.q), free(c.kbuf), free(lf);
    llama_free(pm);
    if (rc)
        secpol_keep_free(k);
    return rc;
}

/* ---- policies inside MPC: which way, public keep masks -----------------------------------------
 */

int secinf_public_keep(const model_cfg *m, const char *policy, const char *const *params,
                       size_t n_params, uint32_t n, uint32_t prompt, secpol_keep *k, errbuf *e)
{
    memset(k, 0, sizeof *k);
    const policy_ops *pol = policy_find(policy);
    if (!pol)
        return err_set(e, MS_ERR_INPUT, "unknown policy '%s'", policy);
    if (pol->observe)
        return err_set(e, MS_ERR_INPUT, "policy %s observes the model: its kept set is not public",
                       policy);
    if (!prompt || prompt > n || n_params > RUN_MAX_PARAMS)
        return err_set(e, MS_ERR_INPUT, "policy %s: prompt %u of %u tokens, %zu parameters", policy,
                       prompt, n, n_params);
    kv_param kv[RUN_MAX_PARAMS];
    policy_args a;
    int rc = prep_args(pol, params, n_params, kv, &a, e);
    if (rc)
        return rc;
    policy_env env = prep_env(m, prompt, n);
    void *st = NULL;
    if ((rc = pol->init(&env, &a, &st, e)))
        return rc;
    *k = (secpol_keep){
        .from = prompt, .max_len = n, .n_layers = m->n_layers, .n_kv_heads = m->n_kv_heads};
    k->keep = calloc((size_t)n * m->n_layers * m->n_kv_heads * n + 1, 1);
    uint8_t *row = calloc((size_t)m->n_kv_heads * (n + 1), 1);
    if (!k->keep || !row)
        rc = err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", policy);
    if (!rc && pol->prefill)
        rc = pol->prefill(st, e);
    /* positions only: no query, nothing observed */
    for (uint32_t pos = prompt; !rc && pos < n; pos++)
        for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
            rc = pol->select(st, l, pos, NULL, row, e);
            for (uint32_t g = 0; !rc && g < m->n_kv_heads; g++)
                memcpy(k->keep + (((size_t)pos * m->n_layers + l) * m->n_kv_heads + g) * n,
                       row + (size_t)g * pos, pos);
        }
    pol->fini(st);
    free(row);
    if (rc)
        secpol_keep_free(k);
    return rc;
}

int secinf_spol_of(const model_cfg *m, const char *policy, const char *const *params,
                   size_t n_params, uint32_t prompt, uint32_t n, secinf_spol *sp, int *is_public,
                   errbuf *e)
{
    memset(sp, 0, sizeof *sp);
    *is_public = 0;
    const policy_ops *pol = policy_find(policy);
    if (!pol)
        return err_set(e, MS_ERR_INPUT, "unknown policy '%s'", policy);
    if (!pol->observe) {
        *is_public = 1;
        return MS_OK;
    }
    if (!pol->secure && !pol->emit_cost) {
        snprintf(sp->why, sizeof sp->why, "it states no ops of its selection");
        return MS_OK;
    }
    if (n_params > RUN_MAX_PARAMS)
        return err_set(e, MS_ERR_INPUT, "policy %s: %zu parameters", policy, n_params);
    kv_param kv[RUN_MAX_PARAMS];
    policy_args a;
    int rc = prep_args(pol, params, n_params, kv, &a, e);
    policy_env env = prep_env(m, prompt, n);
    if (!rc && pol->secure)
        rc = pol->secure->config(&env, &a, &sp->cfg, e);
    else if (!rc) /* no table of its own: its emitted ops, when they compute its selection */
        rc = secpol_emit_config(pol, policy, &env, &a, n, &sp->cfg, e);
    if (!rc && sp->cfg)
        sp->ops = pol->secure ? pol->secure : &secpol_emit_ops;
    else if (!rc && !pol->secure)
        secpol_emit_why(pol, &env, &a, n, sp->why, sizeof sp->why);
    return rc;
}

void secinf_spol_free(secinf_spol *sp)
{
    if (sp->ops && sp->cfg)
        sp->ops->config_free(sp->cfg);
    memset(sp, 0, sizeof *sp);
}
