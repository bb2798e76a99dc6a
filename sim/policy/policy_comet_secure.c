/* policy_comet_secure.c — Comet's sparse FFN on secret shares (the policy's secpol_ops slot): the
 * top-k predictor's ops in each step's program (policy_comet.c's emitter), the model owner's
 * predictor matrix and weight table derived from the checkpoint, and the audit against the
 * plaintext replay (comet_ops.h "Comet on shares"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/kern.h"
#include "policy.h"
#include "comet_ops.h"
#include "secpol.h"

typedef struct comet_sec {
    comet_shape sh;
    uint32_t n_layers;
    uint32_t *active; /* [n_layers] the lowering's FFN neurons (A·block) */
} comet_sec;

/* Selects on shares with the top-k predictor (active_frac > 0), either pattern, and no refill:
 * every token's K/V are computed at its own step, so a token may not count as skipped
 * (A/blocks ≥ skip_below). Anything else stays in plaintext (*cfg = NULL). */
static int comet_sec_config(const policy_env *env, const policy_args *a, void **cfg, errbuf *e)
{
    const policy_ops *p = &policy_comet;
    uint32_t block;
    double frac, skip;
    int pat = 1;
    int rc = policy_arg_u32(p, a, "block", &block, e);
    if (!rc)
        rc = policy_arg_double(p, a, "active_frac", &frac, e);
    if (!rc)
        rc = policy_arg_double(p, a, "skip_below", &skip, e);
    if (!rc)
        rc = policy_arg_choice(p, a, "pattern", &pat, e);
    *cfg = NULL;
    if (rc)
        return rc;
    uint32_t NB = (env->ffn_dim + block - 1) / block, A = comet_topk_blocks(frac, NB);
    if (!A || (double)A < skip * NB)
        return MS_OK;
    comet_sec *c = calloc(1, sizeof *c);
    if (c)
        c->active = calloc(env->n_layers, sizeof *c->active);
    if (!c || !c->active) {
        free(c);
        return err_set(e, MS_ERR_NOMEM, "policy comet: out of memory");
    }
    c->sh = (comet_shape){env->dim, env->ffn_dim, block, NB, A, pat == 1};
    c->n_layers = env->n_layers;
    uint64_t n = (uint64_t)A * block;
    for (uint32_t l = 0; l < env->n_layers; l++)
        c->active[l] = n < env->ffn_dim ? (uint32_t)n : env->ffn_dim;
    *cfg = c;
    return MS_OK;
}

static void comet_sec_config_free(void *cfg)
{
    comet_sec *c = cfg;
    if (c)
        free(c->active);
    free(c);
}

/* Attention is dense: every cached entry. */
static uint32_t comet_sec_rows(const void *cfg, const secpol_run *r, uint32_t layer, uint32_t kv)
{
    return kv;
}

static void comet_sec_lower(const void *cfg, const secpol_run *r, const secpol_step *st,
                            lower_opts *lo)
{
    const comet_sec *c = cfg;
    lo->ffn_active = c->active;
    lo->ffn_secret = c->sh.secret;
}

/* Each layer's ops, right after the FFN's norm (its output L<l>.xn2). */
static int comet_sec_emit(const void *cfg, const secpol_run *r, const secpol_step *st,
                          op_program *p, errbuf *e)
{
    const comet_sec *c = cfg;
    int phase = st->s ? PHASE_DECODE : PHASE_PREFILL;
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < c->n_layers; l++) {
        uint32_t x = op_layer_find(p, (int)l, "xn2");
        if (x == OP_NONE)
            return err_set(e, MS_ERR_INTERNAL, "secure inference: layer %u has no FFN input", l);
        long at = secpol_find_op(p, OP_RMSNORM, x);
        size_t from = p->n_ops;
        rc = comet_emit_ops(p, &c->sh, phase, l, st->t, x, e);
        if (!rc)
            rc = secpol_ops_move(p, at < 0 ? -1 : at + 1, from, e);
    }
    return rc;
}

static int comet_sec_public(const void *cfg, const secpol_run *r, const secpol_step *st, int frac,
                            const op_tensor *t, uint64_t *out, size_t n)
{
    const comet_sec *c = cfg;
    return comet_public(&c->sh, st->t, t, out, n);
}

/* The model owner's derived weights: "L<l>.comet.pred" (blocks × dim), row k the mean of W1's rows
 * of block k; "L<l>.comet.wtab" (blocks × 3·block·dim), row k = [W1's rows of block k | W3's rows
 * | W2's columns as rows], neurons past ffn_dim zero. */
static int comet_sec_weight(const void *cfg, const llama *w, int frac, const op_tensor *t,
                            uint64_t *out, size_t n)
{
    const comet_sec *c = cfg;
    const char *rest;
    int l = op_layer_of(t->name, &rest);
    int pred = l >= 0 && !strcmp(rest, "comet.pred"), tab = l >= 0 && !strcmp(rest, "comet.wtab");
    if (!pred && !tab)
        return 0;
    uint32_t D = c->sh.dim, F = c->sh.ffn_dim, b = c->sh.block, NB = c->sh.nblocks, r1, k1, r3, k3,
             r2, k2;
    char nm[48];
    snprintf(nm, sizeof nm, "L%d.w1", l);
    const float *w1 = llama_weight(w, nm, &r1, &k1);
    snprintf(nm, sizeof nm, "L%d.w3", l);
    const float *w3 = llama_weight(w, nm, &r3, &k3);
    snprintf(nm, sizeof nm, "L%d.w2", l);
    const float *w2 = llama_weight(w, nm, &r2, &k2);
    if (!w1 || !w3 || !w2 || r1 != F || k1 != D || r3 != F || k3 != D || r2 != D || k2 != F)
        return 0;
    if (n != (size_t)NB * (pred ? D : 3 * b * D))
        return 0;
    memset(out, 0, n * sizeof *out);
    for (uint32_t k = 0; k < NB; k++) {
        uint32_t lo = k * b, hi = lo + b < F ? lo + b : F;
        if (pred) {
            for (uint32_t d = 0; d < D; d++) {
                double s = 0;
                for (uint32_t i = lo; i < hi; i++)
                    s += w1[(size_t)i * D + d];
                out[(size_t)k * D + d] = fx_encode(s / (hi - lo), frac);
            }
            continue;
        }
        uint64_t *row = out + (size_t)k * 3 * b * D;
        for (uint32_t i = lo; i < hi; i++)
            for (uint32_t d = 0; d < D; d++) {
                size_t at = (size_t)(i - lo) * D + d;
                row[at] = fx_encode(w1[(size_t)i * D + d], frac);
                row[(size_t)b * D + at] = fx_encode(w3[(size_t)i * D + d], frac);
                row[(size_t)2 * b * D + at] = fx_encode(w2[(size_t)d * F + i], frac);
            }
    }
    return 1;
}

/* Nothing is carried between steps: the session holds the KV cache. */
static int comet_sec_node_new(void *cfg, const secpol_run *r, void **state, errbuf *e)
{
    *state = cfg;
    return MS_OK;
}

static void comet_sec_node_free(void *state, eng *e) {}

static int comet_sec_bind(void *state, eng *e, const op_program *p, mpc_program_run *run,
                          const secpol_step *st, errbuf *err)
{
    return MS_OK;
}

static int comet_sec_update(void *state, eng *e, mpc_net *net, const op_program *p,
                            mpc_program_run *run, const secpol_step *st, errbuf *err)
{
    return MS_OK;
}

/* Opened after each step (validation only): every layer's block scores, then its one-hot rows. */
static int comet_sec_audit_tensor(const void *cfg, const secpol_run *r, const secpol_step *st,
                                  size_t i, char name[48], int *is_score)
{
    const comet_sec *c = cfg;
    if (i >= 2 * (size_t)c->n_layers)
        return 0;
    snprintf(name, 48, "L%zu.comet.%s", i / 2, i % 2 ? "onehot" : "score");
    *is_score = i % 2 == 0;
    return 1;
}

/* The replay's block scores (the float model under the policy, teacher forced), per position and
 * layer: [pos][layer][block]. */
typedef struct comet_rep {
    const comet_sec *c;
    float *score;
} comet_rep;

static int comet_rep_ffn(void *ctx, uint32_t layer, uint32_t pos, const float *pre, uint8_t *active)
{
    comet_rep *r = ctx;
    const comet_shape *s = &r->c->sh;
    float *sc = r->score + ((size_t)pos * r->c->n_layers + layer) * s->nblocks;
    memset(active, 0, s->ffn_dim);
    for (uint32_t k = 0; k < s->nblocks; k++) {
        uint32_t lo = k * s->block, hi = lo + s->block < s->ffn_dim ? lo + s->block : s->ffn_dim;
        double sum = 0;
        for (uint32_t i = lo; i < hi; i++)
            sum += pre[i];
        sc[k] = (float)(sum / (hi - lo));
    }
    uint32_t pick[4096], work[4096];
    if (s->nblocks > 4096)
        return 0;
    size_t n = policy_topk(sc, NULL, s->nblocks, s->active, pick, work);
    for (size_t j = 0; j < n; j++)
        for (uint32_t i = pick[j] * s->block; i < (pick[j] + 1) * s->block && i < s->ffn_dim; i++)
            active[i] = 1;
    return 1;
}

/* The audit's tally over (position, layer) patterns, and its scratch. */
typedef struct comet_tally {
    uint32_t sets, same, differ;
    double err;          /* largest block score error where the patterns agree */
    double worst;        /* largest replay margin where they differ */
    uint8_t *sel, *rsel; /* nblocks each: the secure and the replay's pattern */
    uint32_t pick[4096], work[4096];
} comet_tally;

/* One (position, layer): the opened one-hots oh (active × nblocks) against the replay's top-A
 * of its block scores rs; sc the secure scores. */
static void comet_cmp(comet_tally *y, const comet_shape *s, const double *sc, const double *oh,
                      const float *rs)
{
    uint32_t NB = s->nblocks, A = s->active;
    memset(y->sel, 0, NB), memset(y->rsel, 0, NB);
    for (uint32_t a = 0; a < A; a++)
        for (uint32_t k = 0; k < NB; k++)
            y->sel[k] |= oh[(size_t)a * NB + k] != 0;
    size_t n = policy_topk(rs, NULL, NB, A, y->pick, y->work);
    for (size_t j = 0; j < n; j++)
        y->rsel[y->pick[j]] = 1;
    y->sets++;
    if (!memcmp(y->sel, y->rsel, NB)) {
        y->same++;
        for (uint32_t k = 0; k < NB; k++)
            y->err = fmax(y->err, fabs(sc[k] - rs[k]));
        return;
    }
    y->differ++;
    /* the replay's margin: its A-th score minus the (A+1)-th */
    float kth = INFINITY, next = -INFINITY;
    for (uint32_t k = 0; k < NB; k++)
        if (y->rsel[k])
            kth = fminf(kth, rs[k]);
        else
            next = fmaxf(next, rs[k]);
    y->worst = fmax(y->worst, kth - next);
}

/* Step st: every layer's opened scores and one-hots ([l][scores t × NB | one-hots t × A × NB])
 * against the replay's block scores score ([pos][l][NB]). */
static int comet_step(comet_tally *y, const comet_sec *c, const secpol_run *r,
                      const secpol_opened *o, const float *score, uint32_t st, errbuf *e)
{
    const comet_shape *s = &c->sh;
    uint32_t L = c->n_layers, NB = s->nblocks, A = s->active;
    secpol_step ss = secpol_step_of(r, st);
    size_t per = (size_t)ss.t * NB * (1 + A), need = per * L;
    if (o->n_vals[st] < need)
        return err_set(e, MS_ERR_INTERNAL, "comet audit: step %u opened %u of %zu values", st,
                       o->n_vals[st], need);
    for (uint32_t l = 0; l < L; l++) {
        const double *sc = o->vals[st] + l * per, *oh = sc + (size_t)ss.t * NB;
        for (uint32_t t = 0; t < ss.t; t++)
            comet_cmp(y, s, sc + (size_t)t * NB, oh + (size_t)t * A * NB,
                      score + ((size_t)(ss.kv + t) * L + l) * NB);
    }
    return MS_OK;
}

static void comet_note_print(FILE *out, const comet_shape *s, const comet_tally *y)
{
    int ties = y->differ && y->worst < 2 * y->err;
    fprintf(
        out,
        "#       comet on shares: %u of %u blocks per token and layer (public); the patterns of %u "
        "(position, layer) equal to the replay's: %u",
        s->active, s->nblocks, y->sets, y->same);
    if (y->differ)
        fprintf(out,
                "; %u differ, the replay's largest margin there %.4f (%s twice the score error)",
                y->differ, y->worst, ties ? "within" : "NOT within");
    fprintf(out, "; block scores off by at most %.4f where they agree; pattern %s\n", y->err,
            s->secret ? "secret (nothing revealed)"
                      : "public (each token's active blocks revealed)");
}

/* The secure patterns against the replay's: per (position, layer) the opened one-hots' blocks
 * against the float replay's top-A; the largest score error where they agree; a differing
 * pattern is a near tie when the replay's own A-th score minus the next is within twice it. */
static int comet_sec_audit_note(const void *cfg, const secpol_run *r, const secpol_opened *o,
                                const secpol_keep *plain, const float *ref, const char *policy,
                                FILE *out, errbuf *e)
{
    const comet_sec *c = cfg;
    uint32_t L = c->n_layers, NB = c->sh.nblocks, N = r->n_tokens;
    llama *m = NULL;
    int rc = secpol_load_model(r->model, "comet audit", &m, e);
    comet_rep rep = {c, calloc((size_t)N * L * NB + 1, sizeof(float))};
    float *lg = malloc((size_t)r->model->vocab * sizeof *lg);
    if (!rc && (!rep.score || !lg))
        rc = err_set(e, MS_ERR_NOMEM, "comet audit: out of memory");
    llama_hooks h = {.ctx = &rep, .ffn_mask = comet_rep_ffn};
    for (uint32_t p = 0; !rc && p < N; p++)
        rc = llama_forward(m, r->tokens[p], p, &h, lg);
    comet_tally y = {.sel = calloc(NB + 1, 1), .rsel = calloc(NB + 1, 1)};
    if (!rc && (!y.sel || !y.rsel || NB > 4096))
        rc = err_set(e, MS_ERR_NOMEM, "comet audit: out of memory");
    for (uint32_t st = 0; !rc && st < o->n_steps; st++)
        rc = comet_step(&y, c, r, o, rep.score, st, e);
    if (!rc)
        comet_note_print(out, &c->sh, &y);
    free(y.sel), free(y.rsel), free(rep.score), free(lg);
    llama_free(m);
    return rc;
}

const secpol_ops policy_comet_secure = {
    .which = " with these parameters (it needs active_frac > 0 and >= skip_below; this\n"
             "#       run's FFN is dense)",
    .own_query = 0,
    .session_cache = 1,
    .config = comet_sec_config,
    .config_free = comet_sec_config_free,
    .rows = comet_sec_rows,
    .lower = comet_sec_lower,
    .emit = comet_sec_emit,
    .bind_public = comet_sec_public,
    .bind_weight = comet_sec_weight,
    .node_new = comet_sec_node_new,
    .node_free = comet_sec_node_free,
    .bind = comet_sec_bind,
    .update = comet_sec_update,
    .audit_tensor = comet_sec_audit_tensor,
    .audit_note = comet_sec_audit_note,
};
