/* policy_mpcache_secure.c — MPCache's selection on secret shares (the policy's secpol_ops slot):
 * its ops in each step's program (policy_mpcache.c's emitters, spliced into the lowered layers),
 * the token tables and cluster bounds each node carries between steps, the counts a threshold
 * prompt reveals, and the audit against the plaintext replay (mpcache_ops.h "MPCache on shares").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/backend/mpc_eng.h"
#include "protocols/program/kern.h"
#include "policy.h"
#include "mpcache_ops.h"
#include "secpol.h"

/* The entries of K' of layer l before a decode step at kv cached entries: the whole cache, or
 * after a threshold prompt the revealed count plus the generated entries. */
static uint32_t sec_n(const mpcache_sec *cf, const secpol_run *o, uint32_t l, uint32_t kv)
{
    const mpcache_shape *sh = &cf->mpc;
    if (sh->static_mode != 0 || mpcache_layer_kind(sh, l) == MPCACHE_LAYER_DENSE ||
        !cf->static_count)
        return kv;
    return cf->static_count[l] + (kv - o->prefill);
}

static void mpcache_sec_free(void *cfg)
{
    mpcache_sec *cf = cfg;
    if (cf)
        free(cf->static_count);
    free(cf);
}

/* Static `none` and `threshold` run on shares; the static `topk` does not (its kept sets come
 * from the plaintext replay). */
static int mpcache_sec_config(const policy_env *env, const policy_args *a, void **cfg, errbuf *e)
{
    *cfg = NULL;
    mpcache_shape sh;
    int rc = mpcache_shape_read(env, a, &sh, e);
    if (rc || sh.static_mode == 1)
        return rc;
    mpcache_sec *cf = calloc(1, sizeof *cf);
    if (!cf)
        return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
    cf->mpc = sh;
    cf->n_layers = env->n_layers;
    if (sh.static_mode == 0 &&
        !(cf->static_count = calloc(env->n_layers + 1, sizeof *cf->static_count))) {
        free(cf);
        return err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
    }
    *cfg = cf;
    return MS_OK;
}

static uint32_t *mpcache_sec_revealed(void *cfg, size_t *n)
{
    mpcache_sec *cf = cfg;
    *n = cf->static_count ? cf->n_layers : 0;
    return cf->static_count;
}

static uint32_t mpcache_sec_rows(const void *cfg, const secpol_run *o, uint32_t layer, uint32_t kv)
{
    const mpcache_sec *cf = cfg;
    return mpcache_attend_rows(&cf->mpc, layer, sec_n(cf, o, layer, kv));
}

static int mpcache_sec_public(const void *cfg, const secpol_run *o, const secpol_step *st, int frac,
                              const op_tensor *t, uint64_t *out, size_t n)
{
    const mpcache_sec *cf = cfg;
    const char *rest;
    int l = op_layer_of(t->name, &rest);
    if (t->role != OPT_PUBLIC || l < 0 || strncmp(rest, "mpc.", 4))
        return 0;
    return mpcache_public(&cf->mpc, st->s ? sec_n(cf, o, (uint32_t)l, st->kv) : st->t, frac, t, out,
                          n);
}

/* One node's state, per layer: the token table of K', the cluster bounds, and after a threshold
 * prompt its keep bits (for the first decode step's compaction). */
typedef struct mpcache_node {
    secpol_run o;
    mpcache_sec *cf; /* the node's own copy: its revealed counts are filled here */
    mpc_val *kf, *b16, *b32, *keep;
} mpcache_node;

static int mpcache_sec_node_new(void *cfg, const secpol_run *o, void **state, errbuf *e)
{
    uint32_t L = o->model->n_layers;
    mpcache_node *c = calloc(1, sizeof *c);
    if (c) {
        c->kf = calloc(L, sizeof *c->kf);
        c->b16 = calloc(L, sizeof *c->b16);
        c->b32 = calloc(L, sizeof *c->b32);
        c->keep = calloc(L, sizeof *c->keep);
    }
    if (!c || !c->kf || !c->b16 || !c->b32 || !c->keep) {
        if (c)
            free(c->kf), free(c->b16), free(c->b32), free(c->keep);
        free(c);
        return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    }
    c->o = *o;
    c->cf = cfg;
    *state = c;
    return MS_OK;
}

static void mpcache_sec_node_free(void *state, eng *e)
{
    mpcache_node *c = state;
    for (uint32_t l = 0; l < c->o.model->n_layers; l++) {
        e->vt->release(e, &c->kf[l]);
        e->vt->release(e, &c->b16[l]);
        e->vt->release(e, &c->b32[l]);
        e->vt->release(e, &c->keep[l]);
    }
    free(c->kf), free(c->b16), free(c->b32), free(c->keep);
    free(c);
}

/* Opened after each step: per layer the top-k one-hots and scores of both levels and the
 * threshold's keep bits, those the program holds. */
static int mpcache_sec_audit_tensor(const void *cfg, const secpol_run *o, const secpol_step *st,
                                    size_t i, char name[48], int *is_score)
{
    static const char *const mn[5] = {"mpc.topk1", "mpc.sc1", "mpc.topk2", "mpc.sc2", "mpc.keep"};
    if (i >= 5 * (size_t)o->model->n_layers)
        return 0;
    op_layer_name(name, (int)(i / 5), mn[i % 5]);
    *is_score = i % 5 == 1 || i % 5 == 3;
    return 1;
}

/* The prompt's program ends with the bounds of every selecting layer; a decode step's selection
 * runs between each layer's query and its attention (spliced before the scores' matmul), its
 * mask right before the softmax (secpol.h). */
static int mpcache_sec_emit(const void *cfg, const secpol_run *o, const secpol_step *st,
                            op_program *p, errbuf *e)
{
    const mpcache_sec *cf = cfg;
    const model_cfg *m = o->model;
    const mpcache_shape *sh = &cf->mpc;
    mpcache_ids *ids = calloc(m->n_layers, sizeof *ids);
    int rc = ids ? MS_OK : err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        static const char *const nm[5] = {"kcache", "vcache", "q_heads", "k", "scores"};
        uint32_t id[5];
        for (int i = 0; i < 5; i++) {
            id[i] = op_layer_find(p, (int)l, nm[i]);
            if (id[i] == OP_NONE)
                rc = err_set(e, MS_ERR_INTERNAL, "secure inference: no tensor L%u.%s", l, nm[i]);
        }
        if (rc)
            break;
        if (!st->s) {
            if (sh->static_mode == 0) /* threshold: the keep bits, the count revealed */
                rc = mpcache_emit_static(p, sh, l, st->t, id[4], &ids[l], e);
            else
                rc = mpcache_emit_prefill(p, sh, l, st->t, id[0], &ids[l], e);
            continue;
        }
        size_t n0 = p->n_ops;
        uint32_t n = sec_n(cf, o, l, st->kv);
        uint32_t P0 = sh->static_mode == 0 && st->kv == o->prefill &&
                              mpcache_layer_kind(sh, l) != MPCACHE_LAYER_DENSE
                          ? o->prefill
                          : 0;
        rc = mpcache_emit_decode_first(p, sh, l, n, P0, id[2], id[3], id[0], id[1],
                                       l ? &ids[l - 1] : NULL, &ids[l], e);
        if (!rc)
            rc = secpol_ops_move(p, secpol_find_op(p, OP_MATMUL, id[4]), n0, e);
        n0 = p->n_ops;
        if (!rc)
            rc = mpcache_emit_mask(p, sh, l, n, id[4], &ids[l], e);
        if (!rc && p->n_ops > n0)
            rc = secpol_ops_move(p, secpol_find_op(p, OP_SOFTMAX, id[4]), n0, e);
    }
    free(ids);
    return rc;
}

/* Before decode step s at n entries: each layer's table and bounds into the program. */
static int mpcache_sec_bind(void *state, eng *e, const op_program *p, mpc_program_run *r,
                            const secpol_step *at, errbuf *err)
{
    mpcache_node *c = state;
    const secpol_run *o = &c->o;
    const mpcache_sec *cf = c->cf;
    const mpc_val *kf = c->kf;
    uint32_t n = at->kv;
    if (!at->s)
        return MS_OK; /* the prompt carries nothing in */
    const model_cfg *m = o->model;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, F = 2 * d + 1, L = m->n_layers;
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < L; l++) {
        mpcache_plan pl;
        uint32_t nl = sec_n(cf, o, l, n);
        mpcache_plan_layer(&cf->mpc, l, nl, &pl);
        static const char *const nm[5] = {"kv", "b16", "b32", "full", "keep_in"};
        for (int w = 0; w < 5 && !rc; w++) {
            char full[48];
            snprintf(full, sizeof full, "mpc.%s", nm[w]);
            uint32_t id = op_layer_find(p, (int)l, full);
            if (id == OP_NONE)
                continue;
            e->vt->release(e, &r->vals[id]);
            if (w == 0)
                rc = secpol_rows_in(e, &kf[l], Hkv, nl, F, 0, F, pl.Npad, 0, &r->vals[id]);
            else if (w == 3) /* the prompt's table before the compaction */
                rc = secpol_rows_in(e, &kf[l], Hkv, o->prefill, F, 0, F, o->prefill, 0,
                                    &r->vals[id]);
            else if (w == 4)
                rc = secpol_rows_in(e, &c->keep[l], 1, o->prefill, 1, 0, 1, o->prefill, 0,
                                    &r->vals[id]);
            else
                rc =
                    secpol_rows_in(e, w == 1 ? &c->b16[l] : &c->b32[l], Hkv, w == 1 ? pl.G2 : pl.G1,
                                   2 * d, 0, 2 * d, w == 1 ? pl.G2 : pl.G1, 0, &r->vals[id]);
        }
    }
    return rc ? err_set(err, rc, "secure inference: binding MPCache's state") : MS_OK;
}

/* One step's update of every layer's state (mpcache_tables): the step, the shapes, and the
 * public index map (which source, which element) secpol_pick gathers by. */
typedef struct mc_update {
    mpcache_node *c;
    eng *e;
    const op_program *p;
    mpc_program_run *r;
    uint32_t Hkv, d, F, s, t;
    uint8_t *which;
    uint32_t *idx;
} mc_update;

/* Layer l's table after the step: its n old rows (the compaction's kv_c where there is one),
 * then each new entry's [k | v | 0] from the cache tensors (row 0 at a decode step). */
static int mc_table(mc_update *u, uint32_t l, uint32_t n)
{
    const op_program *p = u->p;
    uint32_t Hkv = u->Hkv, d = u->d, F = u->F, n1 = n + u->t, s2 = u->c->cf->mpc.s2;
    uint32_t kc = op_layer_find(p, (int)l, "kcache"), vc = op_layer_find(p, (int)l, "vcache"),
             kvc = op_layer_find(p, (int)l, "mpc.kv_c");
    uint32_t T = p->tens[kc].rows, G2 = (n + s2 - 1) / s2, stride = kvc != OP_NONE ? G2 * s2 : n;
    for (uint32_t g = 0; g < Hkv; g++)
        for (uint32_t q = 0; q < n1; q++)
            for (uint32_t f = 0; f < F; f++) {
                size_t i = ((size_t)g * n1 + q) * F + f;
                uint32_t row = u->s ? 0 : q; /* the new entry: row 0 of a decode step */
                if (q < n)
                    u->which[i] = 0, u->idx[i] = (uint32_t)(((size_t)g * stride + q) * F + f);
                else if (f < 2 * d)
                    u->which[i] = f < d ? 1 : 2,
                    u->idx[i] = (uint32_t)(((size_t)g * T + row) * d + f % d);
                else
                    u->which[i] = 3, u->idx[i] = 0;
            }
    mpc_val *kf = u->c->kf, *vals = u->r->vals, z = {0};
    const mpc_val *src[3] = {kvc != OP_NONE ? &vals[kvc] : &kf[l], &vals[kc], &vals[vc]};
    int rc = secpol_pick(u->e, &z, (size_t)Hkv * n1 * F, src, 3, u->which, u->idx);
    if (rc)
        return rc;
    u->e->vt->release(u->e, &kf[l]);
    kf[l] = z;
    return MS_OK;
}

/* After a threshold prompt: layer l's keep bits, kept for the first decode step's compaction. */
static int mc_keep_bits(mc_update *u, uint32_t l)
{
    eng *e = u->e;
    mpc_val *keep = &u->c->keep[l];
    uint32_t kp = op_layer_find(u->p, (int)l, "mpc.keep");
    if (kp == OP_NONE)
        return MS_ERR_INTERNAL;
    e->vt->release(e, keep);
    int rc = e->vt->alloc(e, keep, u->r->vals[kp].n, DOM_ARITH);
    return rc ? rc : e->vt->add(e, keep, keep, &u->r->vals[kp]);
}

/* The map of layer l's bounds of clusters of sz rows (G of them after the step, Gold before),
 * from the old rows (0), the new ones (1) or the upkeep's MAX (2, lv levels). */
static void mc_bound_map(mc_update *u, uint32_t n, uint32_t sz, uint32_t G, uint32_t lv, int w)
{
    uint32_t d2 = 2 * u->d, Gold = (n + sz - 1) / sz;
    for (uint32_t g = 0; g < u->Hkv; g++)
        for (uint32_t q = 0; q < G; q++)
            for (uint32_t ch = 0; ch < d2; ch++) {
                size_t i = ((size_t)g * G + q) * d2 + ch;
                if (!u->s)
                    u->which[i] = 1, u->idx[i] = (uint32_t)i;
                else if (q != n / sz)
                    u->which[i] = 0, u->idx[i] = (uint32_t)(((size_t)g * Gold + q) * d2 + ch);
                else if (n % sz == 0)
                    u->which[i] = 1, u->idx[i] = g * d2 + ch;
                else
                    u->which[i] = 2,
                    u->idx[i] = (uint32_t)(((size_t)g * d2 + ch) * lv + (w ? lv - 1 : 0));
            }
}

/* Layer l's bounds (b16, then b32): the prefill's or the compaction's new ones, or the old rows
 * with the newest cluster's row from the upkeep's MAX (or [k | −k] when the entry starts one). */
static int mc_bounds(mc_update *u, uint32_t l, uint32_t n)
{
    const op_program *p = u->p;
    const mpcache_shape *sh = &u->c->cf->mpc;
    uint32_t n1 = n + u->t, s = u->s;
    int rc = MS_OK;
    for (int w = 0; w < 2 && !rc; w++) {
        uint32_t sz = w ? sh->s1 : sh->s2, G = (n1 + sz - 1) / sz;
        mpc_val *b = w ? &u->c->b32[l] : &u->c->b16[l], nb = {0};
        uint32_t kn = op_layer_find(p, (int)l, s ? "mpc.kn" : w ? "mpc.b32_new" : "mpc.b16_new");
        uint32_t bnew = s ? op_layer_find(p, (int)l, w ? "mpc.b32_new" : "mpc.b16_new") : OP_NONE;
        uint32_t up = op_layer_find(p, (int)l, "mpc.up");
        uint32_t lv = (n % sh->s2 != 0) + (n % sh->s1 != 0);
        mc_bound_map(u, n, sz, G, lv, w);
        if (kn == OP_NONE || (s && lv && up == OP_NONE))
            return MS_ERR_INTERNAL;
        mpc_val *vals = u->r->vals;
        const mpc_val *bs[3] = {bnew != OP_NONE ? &vals[bnew] : b, &vals[kn],
                                up == OP_NONE ? b : &vals[up]};
        rc = secpol_pick(u->e, &nb, (size_t)u->Hkv * G * 2 * u->d, bs, 3, u->which, u->idx);
        if (!rc) {
            u->e->vt->release(u->e, b);
            *b = nb;
        }
    }
    return rc;
}

/* After step s: each layer's table gains the new entry (the cache tensors' row 0 at a decode
 * step, the prompt's rows at the prefill), the bounds their upkeep (secpol.h); after a threshold
 * prompt the keep bits are kept, and the first decode step's compaction and bounds replace the
 * prompt's table. */
static int mpcache_tables(mpcache_node *c, eng *e, const op_program *p, mpc_program_run *r,
                          const secpol_step *at, errbuf *err)
{
    const secpol_run *o = &c->o;
    const mpcache_sec *cf = c->cf;
    const model_cfg *m = o->model;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, F = 2 * d + 1;
    size_t N = (size_t)Hkv * (at->kv + at->t + 1) * F;
    mc_update u = {
        c, e, p, r, Hkv, d, F, at->s, at->t, malloc(N + 1), malloc((N + 1) * sizeof *u.idx)};
    int rc = u.which && u.idx ? MS_OK : MS_ERR_NOMEM;
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        uint32_t n = at->s ? sec_n(cf, o, l, at->kv) : 0;
        rc = mc_table(&u, l, n);
        if (rc || mpcache_layer_kind(&cf->mpc, l) != MPCACHE_LAYER_SELECT)
            continue;
        if (!at->s && cf->mpc.static_mode == 0) /* threshold: the keep bits for the compaction */
            rc = mc_keep_bits(&u, l);
        else
            rc = mc_bounds(&u, l, n);
    }
    free(u.which), free(u.idx);
    return rc ? err_set(err, rc, "secure inference: updating MPCache's state") : MS_OK;
}

/* After a threshold prompt: every party reads the counts its program revealed (a shared layer
 * takes layer 2k's, a dense one keeps the prompt); P0 tells the dealer, which opens nothing (the
 * counts are public, and the dealer needs them for the next programs' shapes: outside every
 * op's counters). Each node writes its own copy of the configuration's static_count. */
static int mpcache_counts(mpcache_node *c, eng *e, mpc_net *net, const op_program *p,
                          mpc_program_run *r, errbuf *err)
{
    const secpol_run *o = &c->o;
    const model_cfg *m = o->model;
    uint32_t L = m->n_layers, *cnt = c->cf->static_count;
    int dealer = mpc_engine_is_dealer(e), nodes = mpc_net_nodes(net);
    for (uint32_t l = 0; !dealer && l < L; l++) {
        int kind = mpcache_layer_kind(&c->cf->mpc, l);
        uint32_t id = op_layer_find(p, (int)l, "mpc.count");
        if (kind == MPCACHE_LAYER_SELECT && (id == OP_NONE || !r->vals[id].s[0]))
            return err_set(err, MS_ERR_INTERNAL, "secure inference: no revealed count of layer %u",
                           l);
        cnt[l] = kind == MPCACHE_LAYER_SELECT   ? (uint32_t)r->vals[id].s[0][0]
                 : kind == MPCACHE_LAYER_SHARED ? cnt[l - 1]
                                                : o->prefill;
        if (cnt[l] > o->prefill)
            return err_set(err, MS_ERR_PEER,
                           "secure inference: revealed count %u of %d prompt rows", cnt[l],
                           o->prefill);
    }
    if (nodes > e->n_parties && (dealer || e->party == 0)) {
        int rc = dealer ? mpc_net_recv_setup(net, 0, cnt, L * sizeof *cnt, err)
                        : mpc_net_send_setup(net, nodes - 1, cnt, L * sizeof *cnt, err);
        if (rc)
            return rc;
    }
    return MS_OK;
}

/* After step s: each layer's table and bounds (mpcache_tables), and after a threshold prompt
 * the counts it revealed. */
static int mpcache_sec_update(void *state, eng *e, mpc_net *net, const op_program *p,
                              mpc_program_run *r, const secpol_step *at, errbuf *err)
{
    mpcache_node *c = state;
    int rc = mpcache_tables(c, e, p, r, at, err);
    if (!rc && !at->s && c->cf->mpc.static_mode == 0)
        rc = mpcache_counts(c, e, net, p, r, err);
    return rc;
}

/* ---- MPCache's selection audit -------------------------------------------------------------- */

/* The audit: from one selecting layer's opened values at n entries (for each of t1, sc1, t2,
 * sc2 the program holds, all KV heads, in that order; *used: their count), KV head g's chosen
 * 16-clusters (cl[0..G2) = 0/1); returns the smallest top-k margin (INFINITY: none). */
static double mpcache_audit_set(const mpcache_shape *s, uint32_t layer, uint32_t n,
                                const double *vals, size_t nvals, uint32_t g, uint8_t *cl,
                                size_t *used);
/* The same layer's opened scores of KV head g: level 1 (G1) and level 2 (G2), NULL when that
 * level did not run on shares. */
static void mpcache_audit_scores(const mpcache_shape *s, uint32_t layer, uint32_t n,
                                 const double *vals, size_t nvals, uint32_t g, const double **sc1,
                                 const double **sc2);
/* The k-th largest of the entries with ok[i] (ok NULL: all) minus the next; INFINITY when k
 * takes them all. */
static double mpcache_topk_margin(const double *sc, const uint8_t *ok, uint32_t n, uint32_t k);

static double mpcache_topk_margin(const double *sc, const uint8_t *ok, uint32_t n, uint32_t k)
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

static double mpcache_audit_set(const mpcache_shape *s, uint32_t layer, uint32_t n,
                                const double *vals, size_t nvals, uint32_t g, uint8_t *cl,
                                size_t *used)
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

static void mpcache_audit_scores(const mpcache_shape *s, uint32_t layer, uint32_t n,
                                 const double *vals, size_t nvals, uint32_t g, const double **sc1,
                                 const double **sc2)
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

/* MPCache's plaintext scores as its replay computes them: the float model under the replay's
 * keep masks; at each decode position and selecting layer the policy model's own query against
 * the bounds of K' (the positions pos[l]), in the session's units (q/√d). sc[pos][l][g][lvl][c]. */
typedef struct mscore {
    const secpol_run *o;
    const mpcache_sec *cf;
    const secpol_keep *k;
    llama *pm;
    const uint32_t *pos;
    uint32_t Nmax, n, Gmax, cur_l, cur_pos;
    float *keys; /* [L][n][Hkv·d] */
    double *sc;
} mscore;

static void ms_layer(void *ctx, const llama_layer_view *v)
{
    mscore *c = ctx;
    const model_cfg *m = c->o->model;
    size_t KD = (size_t)m->n_kv_heads * m->head_dim;
    memcpy(c->keys + ((size_t)v->layer * c->n + v->pos) * KD, v->k, KD * sizeof *c->keys);
}

static void ms_scores(mscore *c, uint32_t l, uint32_t pos)
{
    const model_cfg *m = c->o->model;
    const mpcache_shape *sh = &c->cf->mpc;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, G = m->n_heads / Hkv,
             n = sec_n(c->cf, c->o, l, pos);
    const float *q = llama_query(c->pm);
    const uint32_t *ps = c->pos + (size_t)l * c->Nmax;
    size_t KD = (size_t)Hkv * d;
    for (uint32_t g = 0; g < Hkv; g++)
        for (int lvl = 0; lvl < 2; lvl++) {
            uint32_t sz = lvl ? sh->s2 : sh->s1, Gc = (n + sz - 1) / sz;
            double *out =
                c->sc + ((((size_t)pos * m->n_layers + l) * Hkv + g) * 2 + (size_t)lvl) * c->Gmax;
            for (uint32_t cl = 0; cl < Gc && cl < c->Gmax; cl++) {
                double u = 0;
                for (uint32_t ch = 0; ch < d; ch++) {
                    double mx = -INFINITY, mn = INFINITY, qs = 0;
                    for (uint32_t i = cl * sz; i < (cl + 1) * sz && i < n; i++) {
                        double kv = c->keys[((size_t)l * c->n + ps[i]) * KD + g * d + ch];
                        mx = kv > mx ? kv : mx;
                        mn = kv < mn ? kv : mn;
                    }
                    for (uint32_t h = g * G; h < (g + 1) * G; h++)
                        qs += q[(size_t)h * d + ch];
                    u += qs / sqrt((double)d) * (sh->alpha * mx + (1 - sh->alpha) * mn);
                }
                out[cl] = u;
            }
        }
}

static int ms_mask(void *ctx, uint32_t l, uint32_t g, uint32_t pos, uint8_t *mask)
{
    mscore *c = ctx;
    if (pos >= c->o->prefill && (l != c->cur_l || pos != c->cur_pos) &&
        mpcache_layer_kind(&c->cf->mpc, l) == MPCACHE_LAYER_SELECT) {
        c->cur_l = l, c->cur_pos = pos;
        ms_scores(c, l, pos);
    }
    return secpol_keep_attend(c->k, l, g, pos, mask);
}

static int mpcache_plain_scores(const secpol_run *o, const mpcache_sec *cf, const secpol_keep *k,
                                const uint32_t *pos, uint32_t Nmax, mscore *c, errbuf *e)
{
    const model_cfg *m = o->model;
    uint32_t n = o->n_tokens;
    *c = (mscore){.o = o,
                  .cf = cf,
                  .k = k,
                  .pos = pos,
                  .Nmax = Nmax,
                  .n = n,
                  .Gmax = n / cf->mpc.s2 + 2,
                  .cur_l = UINT32_MAX};
    c->keys = calloc((size_t)m->n_layers * n * m->n_kv_heads * m->head_dim + 1, sizeof *c->keys);
    c->sc = calloc((size_t)n * m->n_layers * m->n_kv_heads * 2 * c->Gmax + 1, sizeof *c->sc);
    int rc = c->keys && c->sc ? MS_OK : err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    llama_hooks hk = {.ctx = c, .on_layer = ms_layer, .attend_mask = ms_mask};
    if (!rc)
        rc = secpol_audit_forward(o, &hk, &c->pm, e);
    free(c->keys);
    c->keys = NULL;
    return rc;
}

/* The replay's smallest top-k margin at (pos, l, g): level 1 on its scores, level 2 among the
 * 16-clusters of its level-1 set. */
static double mpcache_rep_margin(const secpol_run *o, const mscore *c, uint32_t pos, uint32_t l,
                                 uint32_t g)
{
    const model_cfg *m = o->model;
    mpcache_plan pl;
    mpcache_plan_layer(&c->cf->mpc, l, sec_n(c->cf, o, l, pos), &pl);
    const double *s1 =
                     c->sc + ((((size_t)pos * m->n_layers + l) * m->n_kv_heads + g) * 2) * c->Gmax,
                 *s2 = s1 + c->Gmax;
    double mg = INFINITY;
    uint8_t u[64] = {0}, ok[128] = {0};
    if (pl.G1 > 64 || pl.G2 > 128)
        return NAN;
    for (uint32_t i = 0; i < pl.nf1; i++)
        u[pl.f1[i]] = 1;
    if (pl.k1 >= pl.G1)
        memset(u, 1, pl.G1);
    if (pl.lv1) {
        mg = mpcache_topk_margin(s1, NULL, pl.G1, pl.k1);
        uint8_t taken[64] = {0};
        for (uint32_t r = 0; r < pl.k1; r++) { /* the replay's top-k1 (ties: the lower index) */
            uint32_t b = UINT32_MAX;
            for (uint32_t i = 0; i < pl.G1; i++)
                if (!taken[i] && (b == UINT32_MAX || s1[i] > s1[b]))
                    b = i;
            taken[b] = u[b] = 1;
        }
    }
    if (pl.lv2) {
        for (uint32_t i = 0; i < pl.G2; i++)
            ok[i] = u[i / 2];
        double m2 = mpcache_topk_margin(s2, ok, pl.G2, pl.k2);
        mg = m2 < mg ? m2 : mg;
    }
    return mg;
}

/* What one comparison of a kept set needs besides the head: the run, its replay scores, the
 * layers' K' positions, a scratch set and the differing sets' replay margins (dm). */
typedef struct ms_audit {
    const secpol_run *o;
    const mpcache_shape *sh;
    const secpol_keep *plain;
    const mscore *msc;
    const uint32_t *pos; /* (L, Nmax) */
    uint32_t Nmax;
    uint8_t *mine; /* Nmax */
    double *dm;
    mpcache_sec_audit *out;
} ms_audit;

/* Decode position kv, layer l, KV head g: the secure attended set (clusters c, the opened
 * values vals of the layer) against the replay's keep mask; v the head's smallest secure
 * top-k margin. */
static void ms_audit_head(ms_audit *a, const double *vals, size_t nv, uint32_t l, uint32_t g,
                          uint32_t kv, const uint8_t *c, double v)
{
    const mpcache_shape *sh = a->sh;
    const mscore *msc = a->msc;
    mpcache_sec_audit *out = a->out;
    uint32_t L = a->o->model->n_layers, Hkv = a->o->model->n_kv_heads, Nmax = a->Nmax;
    int kind = mpcache_layer_kind(sh, l);
    uint32_t n = sec_n(msc->cf, a->o, l, kv);
    const uint8_t *pm = secpol_keep_mask(a->plain, kv, l, g);
    if (!pm)
        return;
    const double *ss[2];
    if (kind == MPCACHE_LAYER_SELECT)
        mpcache_audit_scores(sh, l, n, vals, nv, g, &ss[0], &ss[1]);
    /* the secure set by position: K' entry i attended when its cluster is chosen */
    uint8_t *mine = a->mine;
    memset(mine, 0, kv + 1);
    for (uint32_t i = 0; i < n; i++)
        if (c[i / sh->s2] && a->pos[(size_t)l * Nmax + i] < kv)
            mine[a->pos[(size_t)l * Nmax + i]] = 1;
    int same = 1;
    for (uint32_t j = 0; j < kv; j++)
        same &= !mine[j] == !pm[j];
    out->sets++;
    out->same += (uint32_t)same;
    uint32_t src = kind == MPCACHE_LAYER_SHARED ? l - 1 : l;
    const double *rs = msc->sc + ((((size_t)kv * L + src) * Hkv + g) * 2) * msc->Gmax;
    mpcache_plan pl;
    mpcache_plan_layer(sh, l, n, &pl);
    for (int lvl = 0; same && kind == MPCACHE_LAYER_SELECT && lvl < 2; lvl++)
        for (uint32_t i = 0; ss[lvl] && i < (lvl ? pl.G2 : pl.G1); i++) {
            double d = fabs(ss[lvl][i] - rs[lvl * msc->Gmax + i]);
            out->score_err = d > out->score_err ? d : out->score_err;
        }
    if (same)
        return;
    double rm = mpcache_rep_margin(a->o, msc, kv, src, g);
    a->dm[out->differ++] = rm;
    out->rep_margin = rm > out->rep_margin ? rm : out->rep_margin;
    if (v > out->max_diff_margin)
        out->max_diff_margin = v;
    if (kv < out->first_differ) {
        out->first_differ = kv;
        out->first_layer = l;
        out->first_margin = v;
    }
}

/* Each layer's K' positions (pos: L × Nmax, in order): the prompt's static set (under a
 * threshold its opened keep bits, a shared layer the layer below's; else every position),
 * then every generated position. */
static void ms_positions(const secpol_run *o, const mpcache_shape *sh, const secpol_opened *r,
                         uint32_t *pos, uint32_t Nmax)
{
    size_t at0 = 0;
    for (uint32_t l = 0; l < o->model->n_layers; l++) {
        uint32_t *ps = pos + (size_t)l * Nmax, c = 0;
        int kind = mpcache_layer_kind(sh, l),
            thr = sh->static_mode == 0 && kind != MPCACHE_LAYER_DENSE;
        if (thr && kind == MPCACHE_LAYER_SHARED) {
            memcpy(ps, ps - Nmax, Nmax * sizeof *ps);
            continue;
        }
        for (uint32_t j = 0; j < o->prefill; j++)
            if (!thr || (at0 + j < r->n_vals[0] && r->vals[0][at0 + j] > 0.5))
                ps[c++] = j;
        at0 += thr ? o->prefill : 0;
        for (uint32_t j = o->prefill; c < Nmax && j < o->n_tokens + o->n_gen; j++)
            ps[c++] = j;
    }
}

/* Decode step s: every layer's and KV head's opened clusters cl (a shared layer copies the
 * layer below's) and secure margin mg against the replay, then the step's top-k count. */
static void ms_step(ms_audit *a, const mpcache_sec *cf, const secpol_opened *r, uint8_t *cl,
                    double *mg, uint32_t s)
{
    const secpol_run *o = a->o;
    const mpcache_shape *sh = a->sh;
    mpcache_sec_audit *out = a->out;
    uint32_t L = o->model->n_layers, Hkv = o->model->n_kv_heads, Nmax = a->Nmax,
             kv = secpol_step_of(o, s).kv;
    size_t at = 0;
    for (uint32_t l = 0; l < L; l++) {
        int kind = mpcache_layer_kind(sh, l);
        uint32_t n = sec_n(cf, o, l, kv);
        size_t used = 0;
        for (uint32_t g = 0; g < Hkv; g++) {
            uint8_t *c = cl + ((size_t)l * Hkv + g) * Nmax;
            if (kind == MPCACHE_LAYER_SHARED) {
                memcpy(c, cl + ((size_t)(l - 1) * Hkv + g) * Nmax, Nmax);
                mg[l * Hkv + g] = mg[(l - 1) * Hkv + g];
            } else {
                mg[l * Hkv + g] =
                    mpcache_audit_set(sh, l, n, r->vals[s] + at, r->n_vals[s] - at, g, c, &used);
            }
            double v = mg[l * Hkv + g];
            if (kind == MPCACHE_LAYER_SELECT && v < out->min_margin)
                out->min_margin = v;
            ms_audit_head(a, r->vals[s] + at, r->n_vals[s] - at, l, g, kv, c, v);
        }
        at += used;
    }
    for (uint32_t l = 0; l < L; l++) {
        mpcache_plan pl;
        mpcache_plan_layer(sh, l, sec_n(cf, o, l, kv), &pl);
        if (mpcache_layer_kind(sh, l) == MPCACHE_LAYER_SELECT)
            out->topks += Hkv * ((uint32_t)pl.lv1 + (uint32_t)pl.lv2);
    }
}

/* Follows each layer's K' positions (the opened keep bits, then the generated ones) and
 * compares every (position, layer, KV head) where it happens. */
int mpcache_secure_compare(const secpol_run *o, const mpcache_sec *cf, const secpol_opened *r,
                           const secpol_keep *plain, mpcache_sec_audit *out, errbuf *e)
{
    memset(out, 0, sizeof *out);
    out->min_margin = INFINITY;
    out->first_differ = UINT32_MAX;
    if (!cf || !r->vals)
        return err_set(e, MS_ERR_INPUT, "selection audit: no MPCache run with the audit on");
    const model_cfg *m = o->model;
    uint32_t L = m->n_layers, Hkv = m->n_kv_heads, Nmax = o->n_tokens + o->n_gen + 2;
    uint8_t *cl = calloc((size_t)L * Hkv * Nmax, 1);
    double *mg = calloc((size_t)L * Hkv, sizeof *mg);
    uint32_t *pos = calloc((size_t)L * Nmax, sizeof *pos);
    if (!cl || !mg || !pos) {
        free(cl), free(mg), free(pos);
        return err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    }
    ms_positions(o, &cf->mpc, r, pos, Nmax);
    mscore msc = {0}; /* its sc is freed on every path, also before it is filled */
    double *dm =
        calloc((size_t)r->n_steps * L * Hkv + 1, sizeof *dm); /* differing sets' replay margins */
    uint8_t *mine = malloc(Nmax + 1);
    int rc = o->n_gen       ? err_set(e, MS_ERR_INPUT, "selection audit: teacher-forced runs only")
             : !dm || !mine ? err_set(e, MS_ERR_NOMEM, "selection audit: out of memory")
                            : mpcache_plain_scores(o, cf, plain, pos, Nmax, &msc, e);
    if (rc) {
        free(cl), free(mg), free(pos), free(dm), free(mine), free(msc.sc);
        return rc;
    }
    ms_audit a = {.o = o,
                  .sh = &cf->mpc,
                  .plain = plain,
                  .msc = &msc,
                  .pos = pos,
                  .Nmax = Nmax,
                  .mine = mine,
                  .dm = dm,
                  .out = out};
    for (uint32_t s = 1; s < r->n_steps; s++)
        ms_step(&a, cf, r, cl, mg, s);
    for (uint32_t i = 0; i < out->differ; i++)
        out->near_ties += dm[i] <= 2 * out->score_err;
    free(cl), free(mg), free(pos), free(dm), free(mine), free(msc.sc);
    return MS_OK;
}

static int mpcache_sec_note(const void *cfg, const secpol_run *o, const secpol_opened *r,
                            const secpol_keep *plain, const float *ref, const char *policy,
                            FILE *out, errbuf *e)
{
    const mpcache_sec *cf = cfg;
    mpcache_sec_audit ms;
    int rc = mpcache_secure_compare(o, cf, r, plain, &ms, e);
    if (rc)
        return rc;
    fprintf(out,
            "#       %s selected on shares (static %s, two-level clusters, %u secret top-k); "
            "attended sets equal to\n"
            "#       the replay's: %u/%u (decode position x layer x KV head)\n",
            policy, cf->mpc.static_mode ? "none" : "threshold: the kept counts revealed", ms.topks,
            ms.same, ms.sets);
    if (cf->static_count) {
        fprintf(out, "#       revealed static counts per layer (of %u prompt rows):", o->prefill);
        for (uint32_t l = 0; l < o->model->n_layers; l++)
            fprintf(out, " %u", cf->static_count[l]);
        fprintf(out, "\n");
    }
    fprintf(out, "#       secure top-k scores within %.5f of the replay's (where the sets agree)",
            ms.score_err);
    if (ms.differ)
        fprintf(out,
                "; differing sets: %u, %u of them near ties of the replay itself (its own top-k "
                "margin <= 2 x %.5f;\n"
                "#       largest %.5f)",
                ms.differ, ms.near_ties, ms.score_err, ms.rep_margin);
    fprintf(out, "\n");
    fprintf(out, "#       smallest secure top-k margin %.5f%s", ms.min_margin,
            ms.same < ms.sets ? "" : "\n");
    if (ms.same < ms.sets) {
        fprintf(out,
                "; differing sets' top-ks have margins <= %.5f (near ties of the q.bound scores:\n"
                "#       fixed-point queries and bounds swap them)\n",
                ms.max_diff_margin);
        /* the logits before the first differing set: the fixed-point error alone */
        uint32_t upto =
            ms.first_differ - o->prefill + 1; /* steps: the prefill, then one per position */
        llama_acc before;
        llama_compare(r->logits, ref, upto < r->n_steps ? upto : r->n_steps, r->vocab, &before);
        fprintf(out,
                "#       first differing set at position %u, layer %u (its secure top-k margin "
                "%.5f); the logits\n"
                "#       before it: top-1 %u/%u, error max %.4f mean %.5f\n",
                ms.first_differ, ms.first_layer, ms.first_margin, before.top1_agree, before.n,
                before.max_abs, before.mean_abs);
    }
    return MS_OK;
}

const secpol_ops policy_mpcache_secure = {
    .which = " with the static `topk` (on shares: static threshold or none)",
    .own_query = 1,
    .config = mpcache_sec_config,
    .config_free = mpcache_sec_free,
    .revealed = mpcache_sec_revealed,
    .rows = mpcache_sec_rows,
    .emit = mpcache_sec_emit,
    .bind_public = mpcache_sec_public,
    .node_new = mpcache_sec_node_new,
    .node_free = mpcache_sec_node_free,
    .bind = mpcache_sec_bind,
    .update = mpcache_sec_update,
    .audit_tensor = mpcache_sec_audit_tensor,
    .audit_note = mpcache_sec_note,
};
