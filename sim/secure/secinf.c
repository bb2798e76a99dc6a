/* secinf.c — secure inference of stories260K on the real backend (secinf.h). */
#include "secinf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/backend/mpc_eng.h"
#include "protocols/program/kern.h"
#include "models/lower.h"
#include "scoreside.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the step list --------------------------------------------------------------------------- */

uint32_t secinf_n_steps(const secinf_opts *o) { return 1 + (o->n_tokens - o->prefill) + o->n_gen; }

secpol_run secinf_public(const secinf_opts *o)
{
    return (secpol_run){.model = o->model,
                        .tokens = o->tokens,
                        .n_tokens = o->n_tokens,
                        .prefill = o->prefill,
                        .n_gen = o->n_gen};
}

secpol_opened secinf_opened(const secinf_result *r)
{
    return (secpol_opened){.n_steps = r->n_steps,
                           .vocab = r->vocab,
                           .vals = r->audit,
                           .n_vals = r->n_audit,
                           .logits = r->logits};
}

/* Step s: new tokens and cached entries before it (the step list: secpol.h). */
static void step_shape(const secinf_opts *o, uint32_t s, uint32_t *t, uint32_t *kv)
{
    secpol_run pub = secinf_public(o);
    secpol_step st = secpol_step_of(&pub, s);
    *t = st.t;
    *kv = st.kv;
}

/* Kept count of (layer, KV head) at decode position pos, and the kept positions (may be NULL). */
static uint32_t kept_of(const secpol_keep *k, uint32_t pos, uint32_t l, uint32_t g, uint32_t *idx)
{
    uint32_t c = 0;
    if (!k || pos < k->from || pos >= k->max_len) {
        for (uint32_t j = 0; j < pos; j++)
            if (idx)
                idx[c++] = j;
            else
                c++;
        return c;
    }
    const uint8_t *m = k->keep + (((size_t)pos * k->n_layers + l) * k->n_kv_heads + g) * k->max_len;
    for (uint32_t j = 0; j < pos; j++)
        if (m[j]) {
            if (idx)
                idx[c] = j;
            c++;
        }
    return c;
}

/* The lowering's `kept` for the decode step at kv cached entries: per layer and KV head. */
static void step_kept(const secinf_opts *o, uint32_t kv, uint32_t *kept)
{
    const model_cfg *m = o->model;
    secpol_run pub = secinf_public(o);
    for (uint32_t l = 0; l < m->n_layers; l++) {
        uint32_t rows = o->spol.ops ? o->spol.ops->rows(o->spol.cfg, &pub, l, kv) : 0;
        for (uint32_t g = 0; g < m->n_kv_heads; g++)
            kept[l * m->n_kv_heads + g] = o->spol.ops ? rows : kept_of(o->keep, kv, l, g, NULL);
    }
}

/* Under a policy, a decode step's cache tensor holds the new entry at row 0 and head g's kept
 * entries at rows 1 … kept_g; the layer attends to its leading max_g kept_g + 1 rows (lower.c),
 * the rows past a shorter head's own masked (pad_mask). A single query attends to a set: the
 * order does not matter. */
static int policy_layout(const secinf_opts *o, uint32_t s)
{
    return (o->keep || o->spol.ops) && s > 0;
}

/* A layer whose KV heads keep different numbers of entries attends in one vectorized block
 * padded to the largest (lower.c); the padding columns of the shorter heads are masked with a
 * public tensor "L<l>.pad_mask" added to the scores before the softmax (ADD_PUB: local, no
 * bytes, no rounds): PAD_MASK is far below the softmax's clip (-14), so exp's result there is
 * masked to 0, and small enough that exp's Taylor base 1 + x/2^t stays within [-1, 1] for real
 * scores below 400 (no ring overflow in its squarings). */
#define PAD_MASK (-96.0)
static int pad_mask(op_program *p, const model_cfg *m, uint32_t l, const uint32_t *kept, errbuf *e)
{
    uint32_t most = 0, least = UINT32_MAX;
    for (uint32_t g = 0; g < m->n_kv_heads; g++) {
        most = kept[g] > most ? kept[g] : most;
        least = kept[g] < least ? kept[g] : least;
    }
    if (most == least)
        return MS_OK;
    for (size_t i = 0; i < p->n_ops; i++) {
        const op *q = &p->ops[i];
        if (q->kind != OP_SOFTMAX || q->layer != (int16_t)l)
            continue;
        char nm[48];
        snprintf(nm, sizeof nm, "L%u.pad_mask", l);
        uint32_t t = op_tensor_add(p, nm, OPT_PUBLIC, DOM_ARITH, q->batch, q->m, q->n);
        op add = {.kind = OP_ADD_PUB,
                  .phase = q->phase,
                  .cat = OPC_SOFTMAX,
                  .layer = q->layer,
                  .group = -1,
                  .batch = q->batch,
                  .m = q->m,
                  .n = q->n,
                  .in = {q->in[0], t, OP_NONE},
                  .out = q->in[0]};
        if (t == OP_NONE || op_emit(p, &add) < 0)
            return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
        memmove(&p->ops[i + 1], &p->ops[i], (p->n_ops - 1 - i) * sizeof *p->ops);
        p->ops[i] = add; /* right before the softmax */
        return MS_OK;
    }
    return err_set(e, MS_ERR_INTERNAL, "secure inference: layer %u has no attention softmax", l);
}

/* gather: scores replaces a decode step's secret row gather of a policy inside a layer
 * (models/lower.c, lower_score_gather_width). A session with no selection on shares (the full
 * cache, or kept sets laid out by public indices) or whose selection has no such gather (one
 * that evicts for good: its compaction stays, as in the simulator) runs the rows' program,
 * which is then the scores' one. A selection on shares that gathers rows per step does so in
 * the policy's spliced ops, after the lowering: scoreside.c rewrites those layers into the
 * score side (rm: the gathers it took out, for the audit). */
static int step_program(const secinf_opts *o, uint32_t s, op_program *p, scoreside_gather **rm,
                        size_t *n_rm, errbuf *e)
{
    const model_cfg *m = o->model;
    lower_opts lo;
    lower_opts_default(&lo);
    step_shape(o, s, &lo.n_tokens, &lo.kv_len);
    lo.phase = s ? PHASE_DECODE : PHASE_PREFILL;
    uint32_t *kept = NULL;
    if ((o->keep || o->spol.ops) && s) {
        kept = malloc((size_t)m->n_layers * m->n_kv_heads * sizeof *kept);
        if (!kept)
            return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
        step_kept(o, lo.kv_len, kept);
        lo.kept = kept;
    }
    if (o->spol.ops && o->spol.ops->lower) {
        secpol_run pub = secinf_public(o);
        secpol_step st = secpol_step_of(&pub, s);
        o->spol.ops->lower(o->spol.cfg, &pub, &st, &lo);
    }
    op_program_clear(p);
    int rc = lower_step(m, &lo, p, e);
    /* policy_layout: the cache append writes the new entry at row 0 */
    for (size_t i = 0; !rc && policy_layout(o, s) && i < p->n_ops; i++) {
        op *q = &p->ops[i];
        if (q->kind == OP_VIEW && p->tens[q->out].role == OPT_CACHE && q->layer >= 0)
            q->iarg = 0;
    }
    for (uint32_t l = 0; !rc && kept && o->keep && l < m->n_layers; l++)
        rc = pad_mask(p, m, l, kept + (size_t)l * m->n_kv_heads, e);
    if (!rc && o->spol.ops) {
        secpol_run pub = secinf_public(o);
        secpol_step st = secpol_step_of(&pub, s);
        rc = o->spol.ops->emit(o->spol.cfg, &pub, &st, p, e);
    }
    free(kept);
    if (!rc && s && o->spol.ops && !strcmp(o->cfg.gather, "scores"))
        rc = scoreside_apply(m, p, rm, n_rm, e);
    return rc;
}

int secinf_step_program(const secinf_opts *o, uint32_t s, op_program *p, errbuf *e)
{
    return step_program(o, s, p, NULL, NULL, e);
}

/* ---- one node -------------------------------------------------------------------------------- */

typedef struct node_ctx {
    const secinf_opts *o;
    int frac;
    uint32_t s, t;   /* current step, its token count */
    const int *toks; /* tokens of the current step */
    double *aud;     /* the step's audit values (P0, opts.audit) */
    uint32_t n_aud, cap_aud;
    secpol_run pub; /* what the policy on shares sees */
    void *pol;      /* its node state (secpol_ops.node_new) */
    scoreside_gather *rm; /* the step's row gathers gather: scores took out (the audit's) */
    size_t n_rm;
} node_ctx;

/* Binding: the model owner's weights by name (fixed point), the client's one-hot rows. */
static int bind(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    node_ctx *c = ctx;
    const secpol_ops *sp = c->o->spol.ops;
    if (t->role == OPT_PUBLIC && sp && sp->bind_public) {
        secpol_step st = secpol_step_of(&c->pub, c->s);
        if (sp->bind_public(c->o->spol.cfg, &c->pub, &st, c->frac, t, out, n))
            return 1;
    }
    if (t->role == OPT_WEIGHT && sp && sp->bind_weight &&
        sp->bind_weight(c->o->spol.cfg, c->o->weights, c->frac, t, out, n))
        return 1;
    if (t->role == OPT_WEIGHT) {
        uint32_t r, k;
        const float *w = llama_weight(c->o->weights, t->name, &r, &k);
        if (!w || (size_t)r * k != n)
            return 0;
        for (size_t i = 0; i < n; i++)
            out[i] = fx_encode(w[i], c->frac);
        return 1;
    }
    const char *rest;
    int l = op_layer_of(t->name, &rest);
    if (t->role == OPT_PUBLIC && l >= 0 && !strcmp(rest, "pad_mask") && c->s > 0) {
        const model_cfg *m = c->o->model;
        uint32_t t_, kv, G = m->n_heads / m->n_kv_heads, n_cols = t->cols;
        step_shape(c->o, c->s, &t_, &kv);
        for (size_t i = 0; i < n; i++) {
            uint32_t h = (uint32_t)(i / ((size_t)t->rows * n_cols)) % m->n_heads,
                     j = (uint32_t)(i % n_cols);
            uint32_t cnt = kept_of(c->o->keep, kv, (uint32_t)l, h / G, NULL);
            out[i] = j > cnt ? fx_encode(PAD_MASK, c->frac) : 0; /* row 0 new, rows 1 … cnt kept */
        }
        return 1;
    }
    if (t->role == OPT_INPUT && !strcmp(t->name, "tokens_onehot")) {
        memset(out, 0, n * sizeof *out);
        for (uint32_t i = 0; i < c->t && (size_t)(i + 1) * t->cols <= n; i++)
            out[(size_t)i * t->cols + (uint32_t)c->toks[i]] = 1; /* integer one-hot (kern.c) */
        return 1;
    }
    return 0;
}

/* The cache each layer carries: (Hkv, kv, d) in position order. Before a step: the program's
 * cache tensor (Hkv, R, d) gets the kept entries at rows 0 … cnt-1 of each head. */
static int cache_in(eng *e, const secinf_opts *o, const mpc_val *full, uint32_t kv, uint32_t l,
                    uint32_t R, uint32_t lead, mpc_val *z)
{
    const model_cfg *m = o->model;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim;
    size_t n = (size_t)Hkv * R * d;
    uint32_t *idx = calloc(n, sizeof *idx), *pos = calloc(kv + 1, sizeof *pos);
    uint64_t *sel = calloc(n, sizeof *sel);
    int rc = idx && pos && sel ? MS_OK : MS_ERR_NOMEM;
    for (uint32_t g = 0; !rc && g < Hkv; g++) {
        uint32_t cnt = kept_of(o->keep, kv, l, g, pos);
        for (uint32_t r = 0; r < cnt && r + lead < R; r++)
            for (uint32_t c = 0; c < d; c++) {
                size_t i = ((size_t)g * R + r + lead) * d + c;
                idx[i] = (uint32_t)(((size_t)g * kv + pos[r]) * d + c);
                sel[i] = 1;
            }
    }
    if (!rc)
        rc = secpol_relayout(e, z, full, idx, sel, n);
    free(idx), free(pos), free(sel);
    return rc;
}

/* After a step: full' (Hkv, kv+t, d) = full's rows, then the step's new rows (at rows cnt … of
 * the program's cache tensor out, (Hkv, R, d)). */
static int cache_out(eng *e, const secinf_opts *o, mpc_val *full, const mpc_val *out, uint32_t kv,
                     uint32_t t, uint32_t cnt, uint32_t R)
{
    const model_cfg *m = o->model;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, T = kv + t;
    size_t n = (size_t)Hkv * T * d;
    uint32_t *ia = calloc(n, sizeof *ia), *ib = calloc(n, sizeof *ib);
    uint64_t *sa = calloc(n, sizeof *sa), *sb = calloc(n, sizeof *sb);
    int rc = ia && ib && sa && sb ? MS_OK : MS_ERR_NOMEM;
    for (uint32_t g = 0; !rc && g < Hkv; g++)
        for (uint32_t r = 0; r < T; r++)
            for (uint32_t c = 0; c < d; c++) {
                size_t i = ((size_t)g * T + r) * d + c;
                if (r < kv)
                    ia[i] = (uint32_t)(((size_t)g * kv + r) * d + c), sa[i] = 1;
                else
                    ib[i] = (uint32_t)(((size_t)g * R + cnt + r - kv) * d + c), sb[i] = 1;
            }
    mpc_val a = {0}, b = {0}, z = {0};
    if (!rc && kv)
        rc = secpol_relayout(e, &a, full, ia, sa, n);
    if (!rc)
        rc = secpol_relayout(e, &b, out, ib, sb, n);
    if (!rc && kv) {
        rc = e->vt->alloc(e, &z, n, DOM_ARITH);
        if (!rc)
            rc = e->vt->add(e, &z, &a, &b);
    } else if (!rc) {
        z = b, b = (mpc_val){0};
    }
    e->vt->release(e, &a);
    e->vt->release(e, &b);
    free(ia), free(ib), free(sa), free(sb);
    if (!rc) {
        e->vt->release(e, full);
        *full = z;
    }
    return rc;
}

/* One audit tensor opened into v: a row gather that gather: scores took out has its rows
 * formed in the clear from its opened one-hot and table (the rows tensor holds zeros). */
static int audit_open(eng *e, mpc_net *net, const node_ctx *c, const op_program *p,
                      mpc_program_run *r, uint32_t id, uint64_t *v, errbuf *err)
{
    const scoreside_gather *g = NULL;
    for (size_t i = 0; i < c->n_rm; i++)
        if (c->rm[i].rows == id)
            g = &c->rm[i];
    if (!g)
        return mpc_run_open(e, net, r, id, v, err);
    size_t noh = r->vals[g->onehot].n, ntab = r->vals[g->table].n;
    uint64_t *oh = calloc(noh + 1, sizeof *oh), *tab = calloc(ntab + 1, sizeof *tab);
    int rc = oh && tab ? MS_OK : err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
    if (!rc)
        rc = mpc_run_open(e, net, r, g->onehot, oh, err);
    if (!rc)
        rc = mpc_run_open(e, net, r, g->table, tab, err);
    if (!rc && (noh != (size_t)g->b * g->m * g->k || r->vals[id].n != (size_t)g->b * g->m * g->n))
        rc = err_set(err, MS_ERR_INTERNAL, "secure inference: the audit's gather %s",
                     p->tens[id].name);
    if (!rc)
        scoreside_rows(g, p->tens[g->table].batch, oh, tab, v);
    free(oh), free(tab);
    return rc;
}

/* Validation instrumentation (opts.audit), outside the protocol: the tensors the selection's
 * audit names (secpol_ops.audit_tensor: its one-hots and candidate scores) opened after the
 * step's program; P0 keeps them. */
static int spol_audit(eng *e, mpc_net *net, node_ctx *c, const op_program *p, mpc_program_run *r,
                      errbuf *err)
{
    c->n_aud = 0;
    const secinf_opts *o = c->o;
    secpol_step st = secpol_step_of(&c->pub, c->s);
    char nm[48];
    int is_score;
    for (size_t w = 0; o->spol.ops->audit_tensor(o->spol.cfg, &c->pub, &st, w, nm, &is_score);
         w++) {
        uint32_t id = op_tensor_find(p, nm);
        if (id == OP_NONE)
            continue;
        size_t n = r->vals[id].n;
        uint64_t *v = calloc(n + 1, sizeof *v);
        if (!v || c->n_aud + n > c->cap_aud) {
            size_t cap = 2 * (c->n_aud + n) + 64;
            double *a = realloc(c->aud, cap * sizeof *a);
            if (!v || !a) {
                free(v);
                if (a)
                    c->aud = a;
                return err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
            }
            c->aud = a, c->cap_aud = (uint32_t)cap;
        }
        int rc = audit_open(e, net, c, p, r, id, v, err);
        for (size_t i = 0; !rc && i < n; i++)
            c->aud[c->n_aud++] = is_score ? fx_decode(v[i], c->frac) : (double)(int64_t)v[i];
        free(v);
        if (rc)
            return rc;
    }
    return MS_OK;
}

/* One step on this node: program, setup (step 0: the weights shared by P1 and their beaver
 * masks opened; later steps take the shares and masks over from the previous step's run by
 * name, mpc_run_setup_from), cache binding, ops, logits, cache update. Writes the step's
 * record: n_ops, setup stat, op stats, wall ns. */
static int node_step(eng *e, mpc_net *net, node_ctx *c, op_program *p, mpc_program_run *prev,
                     mpc_program_run *r, mpc_val *kf, mpc_val *vf, double *logits, int *tok,
                     FILE *out, errbuf *err)
{
    const secinf_opts *o = c->o;
    const model_cfg *m = o->model;
    uint32_t t, kv, s = c->s;
    step_shape(o, s, &t, &kv);
    free(c->rm);
    c->rm = NULL, c->n_rm = 0;
    int rc = step_program(o, s, p, &c->rm, &c->n_rm, err);
    if (rc)
        return rc;
    c->t = t;
    c->toks = s ? tok : o->tokens;
    rc = mpc_run_setup_from(e, net, p, bind, c, s ? prev : NULL, r, err);
    if (s)
        mpc_program_run_free(e, prev);
    /* every party starts the step's clock together, with the setup's traffic delivered (a
     * party's one-way setup sends are done when its socket buffer holds them, not when they
     * have crossed the link), as the simulated step starts on idle links */
    if (!rc)
        rc = mpc_net_sync(net, err);
    uint64_t t0 = now_ns();
    const secpol_ops *sp = o->spol.ops;
    int own_cache = sp && !sp->session_cache; /* else the session carries the KV cache */
    secpol_step st = secpol_step_of(&c->pub, s);
    if (!rc && sp)
        rc = sp->bind(c->pol, e, p, r, &st, err);
    for (uint32_t l = 0; !rc && kv && !own_cache && l < m->n_layers; l++)
        for (int w = 0; w < 2 && !rc; w++) {
            uint32_t id = op_layer_find(p, (int)l, w ? "vcache" : "kcache");
            if (id == OP_NONE)
                return err_set(err, MS_ERR_INTERNAL, "secure inference: no tensor L%u.%ccache", l,
                               w ? 'v' : 'k');
            e->vt->release(e, &r->vals[id]);
            rc = cache_in(e, o, w ? &vf[l] : &kf[l], kv, l, p->tens[id].rows, policy_layout(o, s),
                          &r->vals[id]);
        }
    if (!rc)
        rc = mpc_run_ops(e, net, r, 0, p->n_ops, err);
    if (!rc && sp)
        rc = sp->update(c->pol, e, net, p, r, &st, err);
    for (uint32_t l = 0; !rc && !own_cache && l < m->n_layers; l++)
        for (int w = 0; w < 2 && !rc; w++) {
            uint32_t id = op_layer_find(p, (int)l, w ? "vcache" : "kcache"),
                     cnt = policy_layout(o, s) ? 0 : kv; /* the new row */
            rc = cache_out(e, o, w ? &vf[l] : &kf[l], &r->vals[id], kv, t, cnt, p->tens[id].rows);
        }
    uint64_t ns = now_ns() - t0;
    if (!rc && o->audit && sp)
        rc = spol_audit(e, net, c, p, r, err);
    uint32_t lg = op_tensor_find(p, "logits");
    if (!rc && !mpc_engine_is_dealer(e) && e->party == 0) {
        for (uint32_t i = 0; i < m->vocab; i++)
            logits[i] = fx_decode(r->vals[lg].s[0][i], c->frac);
    }
    if (!rc) {
        uint32_t n = (uint32_t)p->n_ops;
        fwrite(&n, sizeof n, 1, out);
        fwrite(&r->setup, sizeof r->setup, 1, out);
        fwrite(r->ops, sizeof *r->ops, n, out);
        fwrite(&ns, sizeof ns, 1, out);
    }
    return rc;
}

int secinf_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    const secinf_opts *o = arg;
    const model_cfg *m = o->model;
    node_ctx c = {.o = o, .frac = e->cfg.frac_bits, .pub = secinf_public(o)};
    uint32_t S = secinf_n_steps(o);
    op_program p[2];
    op_program_init(&p[0]);
    op_program_init(&p[1]);
    mpc_program_run run[2];
    memset(run, 0, sizeof run);
    mpc_val *kf = calloc(m->n_layers, sizeof *kf), *vf = calloc(m->n_layers, sizeof *vf);
    double *logits = calloc(m->vocab, sizeof *logits);
    int rc =
        kf && vf && logits ? MS_OK : err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
    if (!rc && o->spol.ops)
        rc = o->spol.ops->node_new(o->spol.cfg, &c.pub, &c.pol, err);
    size_t n_rev = 0;
    const uint32_t *rev = !rc && o->spol.ops && o->spol.ops->revealed
                              ? o->spol.ops->revealed(o->spol.cfg, &n_rev)
                              : NULL;
    int tok = 0;
    for (uint32_t s = 0; !rc && s < S; s++) {
        c.s = s;
        /* the step's input token: teacher-forced, else the client's greedy choice */
        uint32_t t, kv;
        step_shape(o, s, &t, &kv);
        if (s && kv < o->n_tokens)
            tok = o->tokens[kv];
        rc = node_step(e, net, &c, &p[s & 1], &run[(s + 1) & 1], &run[s & 1], kf, vf, logits, &tok,
                       out, err);
        if (rc)
            break;
        int is_p0 = !mpc_engine_is_dealer(e) && e->party == 0;
        int next = is_p0 ? (int)llama_argmax(logits, m->vocab) : 0;
        if (is_p0) {
            int cur = s ? tok : o->tokens[o->prefill - 1];
            fwrite(logits, sizeof *logits, m->vocab, out);
            fwrite(&cur, sizeof cur, 1, out);
            fwrite(&next, sizeof next, 1, out);
            if (!s && rev)
                fwrite(rev, sizeof *rev, n_rev, out);
            if (o->audit && o->spol.ops) {
                fwrite(&c.n_aud, sizeof c.n_aud, 1, out);
                if (c.n_aud) /* nothing opened yet: no buffer */
                    fwrite(c.aud, sizeof *c.aud, c.n_aud, out);
            }
        }
        tok = next;
    }
    for (int i = 0; i < 2; i++) {
        mpc_program_run_free(e, &run[i]);
        op_program_free(&p[i]);
    }
    for (uint32_t l = 0; kf && vf && l < m->n_layers; l++) {
        e->vt->release(e, &kf[l]);
        e->vt->release(e, &vf[l]);
    }
    if (c.pol)
        o->spol.ops->node_free(c.pol, e);
    free(kf), free(vf), free(logits), free(c.aud), free(c.rm);
    return rc;
}

/* ---- the session ----------------------------------------------------------------------------- */

static int parse_node(secinf_result *r, const mpc_node_result *nr, uint32_t node, int p0, errbuf *e)
{
    const uint8_t *b = nr->out, *end = nr->out + nr->out_len;
    for (uint32_t s = 0; s < r->n_steps; s++) {
        secinf_node_step *st = &r->st[(size_t)s * r->n_nodes + node];
        uint32_t n;
        if (b + sizeof n > end)
            return err_set(e, MS_ERR_PEER, "secure inference: node %u reported %u of %u steps",
                           node, s, r->n_steps);
        memcpy(&n, b, sizeof n), b += sizeof n;
        size_t need = sizeof st->setup + (size_t)n * sizeof *st->ops + sizeof st->ns;
        if (b + need > end)
            return err_set(e, MS_ERR_PEER, "secure inference: node %u's record of step %u is short",
                           node, s);
        r->n_ops[s] = n;
        memcpy(&st->setup, b, sizeof st->setup), b += sizeof st->setup;
        if (!(st->ops = malloc((size_t)n * sizeof *st->ops + 1)))
            return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
        memcpy(st->ops, b, (size_t)n * sizeof *st->ops), b += (size_t)n * sizeof *st->ops;
        memcpy(&st->ns, b, sizeof st->ns), b += sizeof st->ns;
        if (!p0)
            continue;
        size_t lb = (size_t)r->vocab * sizeof *r->logits;
        if (b + lb + 2 * sizeof(int) > end)
            return err_set(e, MS_ERR_PEER, "secure inference: P0's logits of step %u are short", s);
        memcpy(r->logits + (size_t)s * r->vocab, b, lb), b += lb;
        memcpy(&r->tokens[s], b, sizeof(int)), b += sizeof(int);
        memcpy(&r->next[s], b, sizeof(int)), b += sizeof(int);
        if (!s && r->revealed) {
            size_t cb = r->n_revealed * sizeof *r->revealed;
            if (b + cb > end)
                return err_set(e, MS_ERR_PEER, "secure inference: P0's revealed counts are short");
            memcpy(r->revealed, b, cb), b += cb;
        }
        if (!r->audit)
            continue;
        uint32_t na;
        if (b + sizeof na > end)
            return err_set(e, MS_ERR_PEER, "secure inference: P0's audit of step %u is short", s);
        memcpy(&na, b, sizeof na), b += sizeof na;
        if (b + (size_t)na * sizeof(double) > end)
            return err_set(e, MS_ERR_PEER, "secure inference: P0's audit of step %u is short", s);
        if (!(r->audit[s] = malloc((size_t)na * sizeof(double) + 1)))
            return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
        memcpy(r->audit[s], b, (size_t)na * sizeof(double)), b += (size_t)na * sizeof(double);
        r->n_audit[s] = na;
    }
    return MS_OK;
}

/* gather: scores: every decode step's program built (the score side laid out) before a node
 * starts, when no value revealed during the run shapes them. */
static int scores_steps(const secinf_opts *o, uint32_t n_steps, errbuf *e)
{
    if (strcmp(o->cfg.gather, "scores") || !o->spol.ops)
        return MS_OK;
    size_t n_rev = 0;
    if (o->spol.ops->revealed && o->spol.ops->revealed(o->spol.cfg, &n_rev) && n_rev)
        return MS_OK;
    op_program p;
    op_program_init(&p);
    int rc = MS_OK;
    for (uint32_t s = 1; !rc && s < n_steps; s++)
        rc = secinf_step_program(o, s, &p, e);
    op_program_free(&p);
    return rc;
}

int secinf_prepare(const secinf_opts *o, secinf_result *r, errbuf *e)
{
    memset(r, 0, sizeof *r);
    if (!o->n_tokens || !o->prefill || o->prefill > o->n_tokens)
        return err_set(e, MS_ERR_INPUT, "secure inference: prefill %u of %u tokens", o->prefill,
                       o->n_tokens);
    if (o->n_tokens + o->n_gen > o->model->max_ctx)
        return err_set(e, MS_ERR_RANGE, "secure inference: %u tokens exceed the context of %u",
                       o->n_tokens + o->n_gen, o->model->max_ctx);
    const proto *pr = proto_find(o->cfg.name);
    if (!pr)
        return err_set(e, MS_ERR_INPUT, "secure inference: unknown protocol '%s'", o->cfg.name);
    if (o->keep &&
        (o->keep->n_layers != o->model->n_layers || o->keep->n_kv_heads != o->model->n_kv_heads ||
         o->keep->max_len < o->n_tokens + o->n_gen))
        return err_set(e, MS_ERR_INPUT,
                       "secure inference: keep masks for %u layers × %u KV heads × %u positions",
                       o->keep->n_layers, o->keep->n_kv_heads, o->keep->max_len);
    if (o->spol.ops && (o->keep || !o->spol.cfg))
        return err_set(e, MS_ERR_INPUT, "secure inference: a policy on shares %s",
                       o->keep ? "with keep masks" : "without its configuration");
    if (o->spol.ops && o->model->n_heads % o->model->n_kv_heads)
        return err_set(e, MS_ERR_INPUT, "secure inference: %u heads over %u KV heads",
                       o->model->n_heads, o->model->n_kv_heads);
    r->n_steps = secinf_n_steps(o);
    int refused = scores_steps(o, r->n_steps, e); /* before any node starts */
    if (refused)
        return refused;
    r->n_parties = (uint32_t)pr->n_parties;
    if (o->spol.ops && o->spol.ops->revealed) /* the caller's: the predictor reads them */
        r->revealed = o->spol.ops->revealed(o->spol.cfg, &r->n_revealed);
    if (o->audit && o->spol.ops) {
        r->audit = calloc(r->n_steps, sizeof *r->audit);
        r->n_audit = calloc(r->n_steps, sizeof *r->n_audit);
        if (!r->audit || !r->n_audit)
            return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    }
    r->vocab = o->model->vocab;
    r->logits = calloc((size_t)r->n_steps * r->vocab, sizeof *r->logits);
    r->tokens = calloc(r->n_steps, sizeof *r->tokens);
    r->next = calloc(r->n_steps, sizeof *r->next);
    r->n_ops = calloc(r->n_steps, sizeof *r->n_ops);
    if (!r->logits || !r->tokens || !r->next || !r->n_ops)
        return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    return MS_OK;
}

int secinf_collect(secinf_result *r, const mpc_node_result *nr, int nodes, errbuf *e)
{
    int rc = MS_OK, f = mpc_launch_failed(nr, nodes); /* the root cause (mpc_launch_blame) */
    if (f >= 0)
        rc = err_set(e, nr[f].rc, "secure inference: node %d%s: %s", f,
                     f == nodes - 1 && r->n_parties < (uint32_t)nodes ? " (dealer)" : "",
                     nr[f].err[0] ? nr[f].err : "ended without a message");
    r->n_nodes = (uint32_t)nodes;
    if (!rc && !(r->st = calloc((size_t)r->n_steps * r->n_nodes, sizeof *r->st)))
        rc = err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    for (int i = 0; !rc && i < nodes; i++)
        rc = parse_node(r, &nr[i], (uint32_t)i, i == 0, e);
    return rc;
}

int secinf_run(const secinf_opts *o, secinf_result *r, errbuf *e)
{
    int rc = secinf_prepare(o, r, e);
    if (rc)
        return rc;
    mpc_launch l = {.cfg = o->cfg,
                    .latency_ns = o->latency_ns,
                    .timeout_ms = 60000,
                    .deadline_ms = o->deadline_ms ? o->deadline_ms : 60000 + 2000 * (int)r->n_steps,
                    .plaintext = o->plaintext};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes = 0;
    uint64_t t0 = now_ns();
    rc = mpc_launch_run(&l, secinf_node, (void *)o, nr, &nodes, e);
    r->seconds = (double)(now_ns() - t0) * 1e-9;
    if (!rc)
        rc = secinf_collect(r, nr, nodes, e);
    if (nodes)
        mpc_node_results_free(nr, nodes);
    return rc;
}

void secinf_result_free(secinf_result *r)
{
    if (r->st)
        for (size_t i = 0; i < (size_t)r->n_steps * r->n_nodes; i++)
            free(r->st[i].ops);
    free(r->st);
    for (uint32_t s = 0; r->audit && s < r->n_steps; s++)
        free(r->audit[s]);
    free(r->audit);
    free(r->n_audit);
    free(r->logits);
    free(r->tokens);
    free(r->next);
    free(r->n_ops);
    memset(r, 0, sizeof *r);
}
