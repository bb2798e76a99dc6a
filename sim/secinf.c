/* secinf.c — secure inference of stories260K on the real backend (secinf.h). */
#include "secinf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern.h"
#include "lower.h"
#include "policy.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the step list --------------------------------------------------------------------------- */

uint32_t secinf_n_steps(const secinf_opts *o)
{
    return 1 + (o->n_tokens - o->prefill) + o->n_gen;
}

/* Step s: new tokens and cached entries before it. */
static void step_shape(const secinf_opts *o, uint32_t s, uint32_t *t, uint32_t *kv)
{
    *t = s ? 1 : o->prefill;
    *kv = s ? o->prefill + s - 1 : 0;
}

/* Kept count of (layer, KV head) at decode position pos, and the kept positions (may be NULL). */
static uint32_t kept_of(const secinf_keep *k, uint32_t pos, uint32_t l, uint32_t g, uint32_t *idx)
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
    for (uint32_t l = 0; l < m->n_layers; l++)
        for (uint32_t g = 0; g < m->n_kv_heads; g++)
            kept[l * m->n_kv_heads + g] = kept_of(o->keep, kv, l, g, NULL);
}

/* Under a policy, a decode step's cache tensor holds the new entry at row 0 and head g's kept
 * entries at rows 1 … kept_g; the layer attends to its leading max_g kept_g + 1 rows (lower.c),
 * the rows past a shorter head's own masked (pad_mask). A single query attends to a set: the
 * order does not matter. */
static int policy_layout(const secinf_opts *o, uint32_t s)
{
    return o->keep && s > 0;
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
        op add = {.kind = OP_ADD_PUB, .phase = q->phase, .cat = OPC_SOFTMAX, .layer = q->layer,
                  .group = -1, .batch = q->batch, .m = q->m, .n = q->n,
                  .in = {q->in[0], t, OP_NONE}, .out = q->in[0]};
        if (t == OP_NONE || op_emit(p, &add) < 0)
            return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
        memmove(&p->ops[i + 1], &p->ops[i], (p->n_ops - 1 - i) * sizeof *p->ops);
        p->ops[i] = add; /* right before the softmax */
        return MS_OK;
    }
    return err_set(e, MS_ERR_INTERNAL, "secure inference: layer %u has no attention softmax", l);
}

int secinf_step_program(const secinf_opts *o, uint32_t s, op_program *p, errbuf *e)
{
    const model_cfg *m = o->model;
    lower_opts lo;
    lower_opts_default(&lo);
    step_shape(o, s, &lo.n_tokens, &lo.kv_len);
    lo.phase = s ? PHASE_DECODE : PHASE_PREFILL;
    uint32_t *kept = NULL;
    if (o->keep && s) {
        kept = malloc((size_t)m->n_layers * m->n_kv_heads * sizeof *kept);
        if (!kept)
            return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
        step_kept(o, lo.kv_len, kept);
        lo.kept = kept;
    }
    op_program_clear(p);
    int rc = lower_step(m, &lo, p, e);
    /* policy_layout: the cache append writes the new entry at row 0 */
    for (size_t i = 0; !rc && policy_layout(o, s) && i < p->n_ops; i++) {
        op *q = &p->ops[i];
        if (q->kind == OP_VIEW && p->tens[q->out].role == OPT_CACHE && q->layer >= 0)
            q->iarg = 0;
    }
    for (uint32_t l = 0; !rc && kept && l < m->n_layers; l++)
        rc = pad_mask(p, m, l, kept + (size_t)l * m->n_kv_heads, e);
    free(kept);
    return rc;
}

/* ---- one node -------------------------------------------------------------------------------- */

typedef struct node_ctx {
    const secinf_opts *o;
    int frac;
    uint32_t s, t;       /* current step, its token count */
    const int *toks;     /* tokens of the current step */
} node_ctx;

/* Binding: the model owner's weights by name (fixed point), the client's one-hot rows. */
static int bind(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    node_ctx *c = ctx;
    if (t->role == OPT_WEIGHT) {
        uint32_t r, k;
        const float *w = llama_weight(c->o->weights, t->name, &r, &k);
        if (!w || (size_t)r * k != n)
            return 0;
        for (size_t i = 0; i < n; i++)
            out[i] = fx_encode(w[i], c->frac);
        return 1;
    }
    unsigned l;
    if (t->role == OPT_PUBLIC && sscanf(t->name, "L%u.pad_mask", &l) == 1 && c->s > 0) {
        const model_cfg *m = c->o->model;
        uint32_t t_, kv, G = m->n_heads / m->n_kv_heads, n_cols = t->cols;
        step_shape(c->o, c->s, &t_, &kv);
        for (size_t i = 0; i < n; i++) {
            uint32_t h = (uint32_t)(i / ((size_t)t->rows * n_cols)) % m->n_heads, j = (uint32_t)(i % n_cols);
            uint32_t cnt = kept_of(c->o->keep, kv, l, h / G, NULL);
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

/* z[i] = x[idx[i]] masked: z = sel ? x[idx] : 0, all local (permute and a public 0/1 product). */
static int relayout(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, const uint64_t *sel,
                    size_t n)
{
    mpc_val t = {0};
    int rc = e->vt->alloc(e, &t, n, DOM_ARITH);
    if (!rc)
        rc = e->vt->permute(e, &t, x, idx, n);
    if (!rc)
        rc = e->vt->alloc(e, z, n, DOM_ARITH);
    if (!rc)
        rc = e->vt->mul_pub(e, z, &t, sel, n);
    e->vt->release(e, &t);
    return rc;
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
        rc = relayout(e, z, full, idx, sel, n);
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
        rc = relayout(e, &a, full, ia, sa, n);
    if (!rc)
        rc = relayout(e, &b, out, ib, sb, n);
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

static uint32_t argmax_u(const double *x, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* One step on this node: program, setup (step 0: the weights shared by P1 and their beaver
 * masks opened; later steps take the shares and masks over from the previous step's run by
 * name, mpc_run_setup_from), cache binding, ops, logits, cache update. Writes the step's
 * record: n_ops, setup stat, op stats, wall ns. */
static int node_step(eng *e, mpc_net *net, node_ctx *c, op_program *p, mpc_program_run *prev,
                     mpc_program_run *r, mpc_val *kf, mpc_val *vf, double *logits, int *tok, FILE *out,
                     errbuf *err)
{
    const secinf_opts *o = c->o;
    const model_cfg *m = o->model;
    uint32_t t, kv, s = c->s;
    step_shape(o, s, &t, &kv);
    int rc = secinf_step_program(o, s, p, err);
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
    char nm[48];
    for (uint32_t l = 0; !rc && kv && l < m->n_layers; l++)
        for (int w = 0; w < 2 && !rc; w++) {
            snprintf(nm, sizeof nm, "L%u.%ccache", l, w ? 'v' : 'k');
            uint32_t id = op_tensor_find(p, nm);
            if (id == OP_NONE)
                return err_set(err, MS_ERR_INTERNAL, "secure inference: no tensor %s", nm);
            e->vt->release(e, &r->vals[id]);
            rc = cache_in(e, o, w ? &vf[l] : &kf[l], kv, l, p->tens[id].rows, policy_layout(o, s), &r->vals[id]);
        }
    if (!rc)
        rc = mpc_run_ops(e, net, r, 0, p->n_ops, err);
    for (uint32_t l = 0; !rc && l < m->n_layers; l++)
        for (int w = 0; w < 2 && !rc; w++) {
            snprintf(nm, sizeof nm, "L%u.%ccache", l, w ? 'v' : 'k');
            uint32_t id = op_tensor_find(p, nm), cnt = policy_layout(o, s) ? 0 : kv; /* the new row */
            rc = cache_out(e, o, w ? &vf[l] : &kf[l], &r->vals[id], kv, t, cnt, p->tens[id].rows);
        }
    uint64_t ns = now_ns() - t0;
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
    node_ctx c = {.o = o, .frac = e->cfg.frac_bits};
    uint32_t S = secinf_n_steps(o);
    op_program p[2];
    op_program_init(&p[0]);
    op_program_init(&p[1]);
    mpc_program_run run[2];
    memset(run, 0, sizeof run);
    mpc_val *kf = calloc(m->n_layers, sizeof *kf), *vf = calloc(m->n_layers, sizeof *vf);
    double *logits = calloc(m->vocab, sizeof *logits);
    int rc = kf && vf && logits ? MS_OK : err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
    int tok = 0;
    for (uint32_t s = 0; !rc && s < S; s++) {
        c.s = s;
        /* the step's input token: teacher-forced, else the client's greedy choice */
        uint32_t t, kv;
        step_shape(o, s, &t, &kv);
        if (s && kv < o->n_tokens)
            tok = o->tokens[kv];
        rc = node_step(e, net, &c, &p[s & 1], &run[(s + 1) & 1], &run[s & 1], kf, vf, logits, &tok, out, err);
        if (rc)
            break;
        int is_p0 = !mpc_engine_is_dealer(e) && e->party == 0;
        int next = is_p0 ? (int)argmax_u(logits, m->vocab) : 0;
        if (is_p0) {
            int cur = s ? tok : o->tokens[o->prefill - 1];
            fwrite(logits, sizeof *logits, m->vocab, out);
            fwrite(&cur, sizeof cur, 1, out);
            fwrite(&next, sizeof next, 1, out);
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
    free(kf), free(vf), free(logits);
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
            return err_set(e, MS_ERR_PEER, "secure inference: node %u reported %u of %u steps", node, s, r->n_steps);
        memcpy(&n, b, sizeof n), b += sizeof n;
        size_t need = sizeof st->setup + (size_t)n * sizeof *st->ops + sizeof st->ns;
        if (b + need > end)
            return err_set(e, MS_ERR_PEER, "secure inference: node %u's record of step %u is short", node, s);
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
    }
    return MS_OK;
}

int secinf_prepare(const secinf_opts *o, secinf_result *r, errbuf *e)
{
    memset(r, 0, sizeof *r);
    if (!o->n_tokens || !o->prefill || o->prefill > o->n_tokens)
        return err_set(e, MS_ERR_INPUT, "secure inference: prefill %u of %u tokens", o->prefill, o->n_tokens);
    if (o->n_tokens + o->n_gen > o->model->max_ctx)
        return err_set(e, MS_ERR_RANGE, "secure inference: %u tokens exceed the context of %u",
                       o->n_tokens + o->n_gen, o->model->max_ctx);
    const proto *pr = proto_find(o->cfg.name);
    if (!pr)
        return err_set(e, MS_ERR_INPUT, "secure inference: unknown protocol '%s'", o->cfg.name);
    if (o->keep && (o->keep->n_layers != o->model->n_layers || o->keep->n_kv_heads != o->model->n_kv_heads ||
                    o->keep->max_len < o->n_tokens + o->n_gen))
        return err_set(e, MS_ERR_INPUT, "secure inference: keep masks for %u layers × %u KV heads × %u positions",
                       o->keep->n_layers, o->keep->n_kv_heads, o->keep->max_len);
    r->n_steps = secinf_n_steps(o);
    r->n_parties = (uint32_t)pr->n_parties;
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
    int rc = MS_OK;
    /* the root cause first: a node's own failure before the others' lost connections */
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (int i = 0; !rc && i < nodes; i++)
            if (nr[i].rc && (pass || (nr[i].rc != MS_ERR_PEER && nr[i].rc != MS_ERR_NET)))
                rc = err_set(e, nr[i].rc, "secure inference: node %d%s: %s", i,
                             i == nodes - 1 && r->n_parties < (uint32_t)nodes ? " (dealer)" : "",
                             nr[i].err[0] ? nr[i].err : "ended without a message");
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
    mpc_launch l = {.cfg = o->cfg, .latency_ns = o->latency_ns, .timeout_ms = 60000,
                    .deadline_ms = o->deadline_ms ? o->deadline_ms : 60000 + 2000 * (int)r->n_steps};
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
    free(r->logits);
    free(r->tokens);
    free(r->next);
    free(r->n_ops);
    memset(r, 0, sizeof *r);
}

/* ---- accuracy -------------------------------------------------------------------------------- */

void secinf_compare(const double *mpc, const float *ref, uint32_t n, uint32_t vocab, secinf_acc *a)
{
    memset(a, 0, sizeof *a);
    a->n = n;
    double sum = 0;
    for (uint32_t s = 0; s < n; s++) {
        const double *x = mpc + (size_t)s * vocab;
        const float *y = ref + (size_t)s * vocab;
        uint32_t bx = 0, by = 0;
        for (uint32_t i = 0; i < vocab; i++) {
            double d = fabs(x[i] - (double)y[i]);
            sum += d;
            a->max_abs = d > a->max_abs ? d : a->max_abs;
            bx = x[i] > x[bx] ? i : bx;
            by = y[i] > y[by] ? i : by;
        }
        a->top1_agree += bx == by;
        if (bx != by && (double)y[by] - (double)y[bx] > a->miss_gap)
            a->miss_gap = (double)y[by] - (double)y[bx];
    }
    a->mean_abs = n ? sum / ((double)n * vocab) : 0;
}

/* ---- the plaintext replay of a policy -------------------------------------------------------- */

typedef struct prep {
    const model_cfg *m;
    const policy_ops *pol;
    void *st;
    secinf_keep *k;
    const llama *pm;     /* the model the policy runs on (for W_o) */
    uint32_t prompt, cur_layer, cur_pos;
    int prefilled, err;
    uint8_t *keep;       /* Hkv × max_len of the current (pos, layer) */
    float *q;            /* L × H·d: the full-cache model's queries at the current position */
    float *kbuf;         /* L × max_len × Hkv·d: keys the policy model cached */
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
    secinf_keep *k = c->k;
    if (c->cur_layer != layer || c->cur_pos != pos) {
        uint32_t QD = c->m->n_heads * c->m->head_dim;
        if (!c->err && c->pol->select(c->st, layer, pos, c->q + (size_t)layer * QD, c->keep, c->e))
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
    policy_obs o = {.layer = v->layer, .pos = v->pos,
                    .q = need & POLICY_NEED_Q ? v->q : NULL,
                    .k = need & POLICY_NEED_K ? v->k : NULL,
                    .v = need & POLICY_NEED_V ? v->v : NULL,
                    .att = need & POLICY_NEED_ATT ? v->att : NULL,
                    .ffn = need & POLICY_NEED_FFN ? v->ffn_pre : NULL,
                    .wo = need & POLICY_NEED_WO ? llama_weight(c->pm, nm, &r, &cols) : NULL};
    if (c->pol->observe(c->st, &o, c->e))
        c->err = 1;
}

/* "key=value" strings as a policy's scenario parameters. */
static int prep_args(const char *const *params, size_t n, kv_param *kv, errbuf *e)
{
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(params[i], '=');
        if (!eq || eq == params[i] || (size_t)(eq - params[i]) >= sizeof kv[i].key ||
            strlen(eq + 1) >= sizeof kv[i].val)
            return err_set(e, MS_ERR_INPUT, "policy parameter '%s': want key=value", params[i]);
        memset(&kv[i], 0, sizeof kv[i]);
        memcpy(kv[i].key, params[i], (size_t)(eq - params[i]));
        snprintf(kv[i].val, sizeof kv[i].val, "%s", eq + 1);
    }
    return MS_OK;
}

int secinf_policy_replay(const model_cfg *m, llama *ref, const char *policy,
                         const char *const *params, size_t n_params, const int *tokens,
                         uint32_t n, uint32_t prompt, secinf_keep *k, float *logits, errbuf *e)
{
    memset(k, 0, sizeof *k);
    const policy_ops *pol = policy_find(policy);
    if (!pol)
        return err_set(e, MS_ERR_INPUT, "unknown policy '%s'", policy);
    if (!prompt || prompt > n || n_params > RUN_MAX_PARAMS)
        return err_set(e, MS_ERR_INPUT, "policy replay: prompt %u of %u tokens, %zu parameters",
                       prompt, n, n_params);
    kv_param kv[RUN_MAX_PARAMS];
    int rc = prep_args(params, n_params, kv, e);
    if (!rc)
        rc = policy_check_params(pol, kv, n_params, "(command line)", e);
    if (rc)
        return rc;
    char wpath[1024];
    llama *pm = NULL;
    if (model_file_path(m->weights, wpath, sizeof wpath))
        return err_set(e, MS_ERR_NOTFOUND, "policy replay: no weights for %s", m->name);
    if ((rc = llama_load(m, wpath, &pm, e)))
        return rc;
    *k = (secinf_keep){.from = prompt, .max_len = n, .n_layers = m->n_layers, .n_kv_heads = m->n_kv_heads};
    size_t KD = (size_t)m->n_kv_heads * m->head_dim;
    prep c = {.m = m, .pol = pol, .k = k, .pm = pm, .prompt = prompt, .cur_layer = UINT32_MAX, .e = e};
    k->keep = calloc((size_t)n * m->n_layers * m->n_kv_heads * n + 1, 1);
    c.keep = calloc((size_t)m->n_kv_heads * (n + 1), 1);
    c.q = calloc((size_t)m->n_layers * m->n_heads * m->head_dim, sizeof *c.q);
    c.kbuf = calloc((size_t)m->n_layers * n * KD, sizeof *c.kbuf);
    float *lf = malloc((size_t)m->vocab * sizeof *lf);
    if (!k->keep || !c.keep || !c.q || !c.kbuf || !lf)
        rc = err_set(e, MS_ERR_NOMEM, "policy replay: out of memory");
    policy_env env = {.n_layers = m->n_layers, .n_heads = m->n_heads, .n_kv_heads = m->n_kv_heads,
                      .head_dim = m->head_dim, .dim = m->dim, .ffn_dim = m->ffn_dim,
                      .prompt_len = prompt, .max_len = n, .gather_k = prep_gather_k, .kv_ctx = &c};
    policy_args a = {.kv = kv, .n = n_params, .path = "(command line)"};
    if (!rc)
        rc = pol->init(&env, &a, &c.st, e);
    llama_hooks hf = {.ctx = &c, .on_layer = prep_full_layer};
    llama_hooks hp = {.ctx = &c, .on_layer = prep_layer, .attend_mask = prep_mask};
    llama_reset(ref);
    for (uint32_t pos = 0; !rc && pos < n; pos++) {
        rc = llama_forward(ref, tokens[pos], pos, &hf, lf);
        if (!rc)
            rc = llama_forward(pm, tokens[pos], pos, &hp, logits ? logits + (size_t)pos * m->vocab : lf);
        if (!rc && c.err)
            rc = e->msg[0] ? MS_ERR_INPUT : err_set(e, MS_ERR_INPUT, "policy %s failed", policy);
    }
    if (c.st)
        pol->fini(c.st);
    free(c.keep), free(c.q), free(c.kbuf), free(lf);
    llama_free(pm);
    if (rc)
        secinf_keep_free(k);
    return rc;
}

void secinf_keep_free(secinf_keep *k)
{
    free(k->keep);
    memset(k, 0, sizeof *k);
}
