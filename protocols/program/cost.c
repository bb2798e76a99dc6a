/* cost.c — the cost log, per-category totals, the protocol registry and the program coster.
 *
 * A cost engine (proto_semi2k.c, proto_aby3.c) appends one cost_round per communication round
 * of every primitive the kernels call; proto_cost_program walks an op program through the
 * kernels on such an engine, so a program's cost is the sum of its primitives' costs. */
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "kern.h"
#include "proto.h"
#include "proto_cost.h"
#include "protocols/base/invariant.h"

/* ---- cost log ---------------------------------------------------------------------------- */

void cost_log_init(cost_log *c, int n_parties)
{
    memset(c, 0, sizeof *c);
    c->n_parties = n_parties;
}

void cost_log_free(cost_log *c)
{
    free(c->r);
    memset(c, 0, sizeof *c);
}

void cost_log_clear(cost_log *c) { c->n = 0; }

int cost_log_is_sane(const cost_log *c, size_t n_ops)
{
    if (c->n > c->cap || c->n_parties < 1 || c->n_parties > MPC_PARTIES_MAX)
        return 0;
    for (size_t i = 0; i < c->n; i++) {
        const cost_round *r = &c->r[i];
        if (r->op >= n_ops || (i && r->op < c->r[i - 1].op) || r->comm > 1)
            return 0;
        for (int s = 0; s < MPC_PARTIES_MAX; s++)
            for (int d = 0; d < MPC_PARTIES_MAX; d++)
                if ((s >= c->n_parties || d >= c->n_parties) && r->bytes[s][d])
                    return 0;
    }
    return 1;
}

cost_round *cost_log_push(cost_log *c)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        cost_round *r = realloc(c->r, cap * sizeof *r);
        if (!r)
            return NULL;
        c->r = r;
        c->cap = cap;
    }
    cost_round *r = &c->r[c->n++];
    memset(r, 0, sizeof *r);
    return r;
}

void cost_totals_add_round(cost_totals *t, const cost_round *r, int n_parties)
{
    t->rounds += r->comm;
    for (int p = 0; p < n_parties; p++) {
        for (int q = 0; q < n_parties; q++)
            t->bytes_sent[p] += r->bytes[p][q];
        t->offline_bytes[p] += r->offline[p];
        for (int w = 0; w < WK_N; w++)
            t->work[p][w] += r->work[p][w];
    }
}

/* ---- primitive names, engine release ----------------------------------------------------- */

const char *eng_prim_name(int p)
{
    static const char *const names[] = {
#define X(e, s) s,
        ENG_PRIMS(X)
#undef X
    };
    return (p >= 0 && p < PRIM_N) ? names[p] : "?";
}

/* Engines keep their private state in one heap block (impl); an engine whose state owns other
 * resources (sockets, files) releases them before calling eng_free. */
void eng_free(eng *e)
{
    if (!e)
        return;
    free(e->impl);
    free(e);
}

/* ---- registry ---------------------------------------------------------------------------- */

static const proto *const registry[] = {&proto_semi2k, &proto_aby3};

const proto *proto_find(const char *name)
{
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
        if (name && strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

const proto *const *proto_all(size_t *n)
{
    *n = sizeof registry / sizeof *registry;
    return registry;
}

int proto_cfg_default(const char *name, proto_cfg *cfg, errbuf *e)
{
    const proto *pr = proto_find(name);
    if (!pr) {
        const char *names[sizeof registry / sizeof *registry];
        for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
            names[i] = registry[i]->name;
        const char *dym = did_you_mean(name ? name : "", names, sizeof names / sizeof *names);
        return err_set(e, MS_ERR_NOTFOUND,
                       "error: unknown protocol '%s'%s%s%s (known: semi2k, aby3)", name ? name : "",
                       dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
    }
    memset(cfg, 0, sizeof *cfg);
    pr->defaults(cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", pr->name);
    return MS_OK;
}

/* ---- program coster ---------------------------------------------------------------------- */

int proto_cost_program(const proto *pr, const proto_cfg *cfg, const op_program *prog, cost_log *log,
                       errbuf *e)
{
    return proto_cost_program_tape(pr, cfg, prog, NULL, log, e);
}

int proto_cost_program_tape(const proto *pr, const proto_cfg *cfg, const op_program *prog,
                            const cost_tape *tape, cost_log *log, errbuf *e)
{
    cost_log_clear(log);
    log->n_parties = pr->n_parties;
    eng *en = NULL;
    int rc = pr->cost_engine(cfg, log, &en);
    if (rc)
        return err_set(e, rc, "error: cannot create the %s cost engine: %s", pr->name,
                       ms_err_text(rc));
    ((cost_impl *)en->impl)->tape = tape;
    mpc_val *vals = calloc(prog->n_tens ? prog->n_tens : 1, sizeof *vals);
    if (!vals) {
        eng_free(en);
        return err_set(e, MS_ERR_NOMEM, "error: out of memory costing %zu tensors", prog->n_tens);
    }
    /* COST: values carry only their length in cost mode (eng.h). */
    for (size_t t = 0; t < prog->n_tens; t++) {
        const op_tensor *ts = &prog->tens[t];
        vals[t].n = (size_t)ts->batch * ts->rows * ts->cols;
        vals[t].dom = ts->dom;
    }
    for (size_t i = 0; i < prog->n_ops && rc == MS_OK; i++) {
        en->cur_op = (uint32_t)i;
        rc = kern_exec(en, prog, i, vals, e);
    }
    free(vals);
    eng_free(en);
    MPCSIM_ASSERT(rc || cost_log_is_sane(log, prog->n_ops));
    return rc;
}

/* ---- shared cost-engine machinery -------------------------------------------------------- */

void cost_defaults_fm64(proto_cfg *c, const char *name)
{
    memset(c, 0, sizeof *c);
    strcpy(c->name, name);   /* "semi2k" | "aby3": fits name[32] */
    c->ring_bits = 64;       /* SPU FM64 */
    c->frac_bits = 18;       /* SPU fxp_fraction_bits for FM64 */
    c->exp_iters = 8;        /* SPU fxp_exp_iters (PUMA runs use 5) */
    c->recip_iters = 2;      /* SPU fxp_div_goldschmidt_iters */
    c->rsqrt_iters = 2;      /* normalize: thresholds' Newton steps (kern.c) */
    c->softmax_clip = -14.0; /* PUMA hack_softmax / BumbleBee */
    strcpy(c->approx, "puma");
    strcpy(c->msb, "packed"); /* SPU msb_a2b packs its carry tree too */
    strcpy(c->topk, "network");
    strcpy(c->exp, "pow2");         /* range reduction: 2^-k from the bits */
    strcpy(c->normalize, "bitdec"); /* SPU f_reciprocal / MP-SPDZ Norm: one bit decomposition */
    strcpy(c->compat, "native");    /* mpcsim's own constructions (kern_compat.c) */
    strcpy(c->gather, "rows");      /* the kept rows gathered, as the policies' papers do */
}

static void cost_fill_local(eng_vt *vt);

int cost_engine_new(const proto *pr, const proto_cfg *cfg, cost_log *log, const eng_vt *comm,
                    int comps, eng **out)
{
    eng *e = calloc(1, sizeof *e);
    cost_impl *im = calloc(1, sizeof *im);
    if (!e || !im) {
        free(e);
        free(im);
        return MS_ERR_NOMEM;
    }
    im->log = log;
    im->comps = comps;
    im->vt = *comm;
    cost_fill_local(&im->vt);
    e->vt = &im->vt;
    e->pr = pr;
    e->cfg = *cfg;
    if (kern_configure(cfg, &e->kv)) {
        free(e);
        free(im);
        return MS_ERR_INPUT;
    }
    e->n_parties = pr->n_parties;
    e->impl = im;
    log->n_parties = pr->n_parties;
    *out = e;
    return MS_OK;
}

cost_round *cost_push(eng *e, int prim, int comm)
{
    cost_impl *im = e->impl;
    cost_round *r = cost_log_push(im->log);
    if (r) {
        r->op = e->cur_op;
        r->prim = (uint16_t)prim;
        r->comm = (uint8_t)comm;
    }
    return r;
}

int cost_local(eng *e, int prim, double elems)
{
    cost_impl *im = e->impl;
    cost_log *lg = im->log;
    cost_round *r = lg->n ? &lg->r[lg->n - 1] : NULL;
    if (!r || r->comm || r->op != e->cur_op || r->prim != PRIM_LOCAL) {
        r = cost_push(e, PRIM_LOCAL, 0);
        if (!r)
            return MS_ERR_NOMEM;
    }
    (void)prim;
    /* COST: local work, one element op per share component touched (PRIMITIVES.md). */
    for (int p = 0; p < e->n_parties; p++)
        r->work[p][WK_ELEM] += elems * im->comps;
    return MS_OK;
}

static int cost_alloc(eng *e, mpc_val *v, size_t n, int dom)
{
    (void)e;
    v->n = n;
    v->dom = (uint8_t)dom;
    v->s[0] = v->s[1] = NULL;
    return MS_OK;
}

static void cost_release(eng *e, mpc_val *v)
{
    (void)e;
    v->n = 0;
}

static int cost_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    z->n = x->n;
    z->dom = x->dom;
    return cost_local(e, PRIM_LOCAL, (double)x->n);
}

static int cost_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return cost_add(e, z, x, y);
}

static int cost_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    z->n = x->n;
    z->dom = x->dom;
    return cost_local(e, PRIM_LOCAL, (double)x->n);
}

static int cost_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    return cost_add_pub(e, z, x, c, nc);
}

static int cost_shift(eng *e, mpc_val *z, const mpc_val *x, int s)
{
    return cost_add_pub(e, z, x, NULL, 0);
}

/* COST: one pass over both placed words, as the backends' place2 (mpc_local.c; PRIMITIVES.md
 * "Local work") */
static int cost_place2(eng *e, mpc_val *z, const mpc_val *x, int l, uint64_t ml, const mpc_val *y,
                       int r, uint64_t mr)
{
    z->n = x->n;
    z->dom = DOM_BOOL;
    return cost_local(e, PRIM_LOCAL, (double)x->n);
}

static int cost_bool_components(eng *e, mpc_val comps[3], int *nc, const mpc_val *x)
{
    *nc = e->n_parties == 2 ? 2 : 3;
    for (int i = 0; i < *nc; i++) {
        comps[i].n = x->n;
        comps[i].dom = DOM_BOOL;
        comps[i].s[0] = comps[i].s[1] = NULL;
    }
    return cost_local(e, PRIM_LOCAL, (double)x->n * *nc);
}

uint64_t cost_packed(uint64_t n, int bits) { return n * (((uint64_t)bits + 7) / 8); }

static int cost_permute(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n)
{
    z->n = n;
    z->dom = x->dom;
    return cost_local(e, PRIM_LOCAL, (double)n);
}

/* COST: every element of the result written once (PRIMITIVES.md "Local work"). */
static int cost_concat(eng *e, mpc_val *z, const mpc_val *parts, int np)
{
    size_t tot = 0;
    for (int i = 0; i < np; i++)
        tot += parts[i].n;
    z->n = tot;
    z->dom = parts[0].dom;
    return cost_local(e, PRIM_LOCAL, (double)tot);
}

/* COST: only the n elements written (PRIMITIVES.md "Local work"): z is updated in place. */
static int cost_scatter(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n)
{
    (void)z, (void)x, (void)idx;
    return cost_local(e, PRIM_LOCAL, (double)n);
}

/* COST: a public count the kernel computed: nothing moves in the rounds (semi2k's dealer gets
 * 8 bytes from P0 outside them, eng.h). */
static int cost_sync_public(eng *e, uint64_t *v)
{
    cost_impl *im = e->impl;
    const cost_tape *t = im->tape;
    uint32_t oi = e->cur_op;
    if (!t || oi >= t->n_ops || !t->n[oi])
        return MS_OK; /* the kernel's own value */
    if (im->tape_op != oi || !im->tape_k)
        im->tape_op = oi, im->tape_k = 0;
    uint64_t I = t->n[oi] - 1, k = im->tape_k++; /* I partitions, then the end */
    *v = k < I ? t->sum[oi] / I + (k < t->sum[oi] % I) : 0;
    if (k >= I)
        im->tape_k = 0;
    return MS_OK;
}

/* The local rows of every cost engine's table. */
static void cost_fill_local(eng_vt *vt)
{
    vt->alloc = cost_alloc;
    vt->release = cost_release;
    vt->add = cost_add;
    vt->sub = cost_sub;
    vt->add_pub = cost_add_pub;
    vt->mul_pub = cost_mul_pub;
    vt->shift = cost_shift;
    vt->place2 = cost_place2;
    vt->bool_components = cost_bool_components;
    vt->permute = cost_permute;
    vt->concat = cost_concat;
    vt->scatter = cost_scatter;
    vt->sync_public = cost_sync_public;
}

/* ---- op memo ----------------------------------------------------------------------------- */

/* What an op's rounds are a function of (kern.c): the op's own fields but its attribution
 * (phase, category, layer, group), and for each operand slot (in0, in1, in2, out) the tensor's
 * shape, role and domain and the value's length and domain. Zeroed before filling, so the
 * padding compares equal. */
typedef struct cm_opnd {
    uint64_t vn;
    uint32_t tb, tr, tc;
    uint8_t used, vdom, role, tdom;
} cm_opnd;

typedef struct cm_key {
    uint32_t kind, flags, batch, m, k, n;
    int32_t iarg;
    uint32_t pad;
    uint64_t farg; /* the double's bits */
    cm_opnd o[4];
} cm_key;

typedef struct cm_entry {
    cm_key key;
    uint64_t zn; /* the result value's length and domain */
    uint8_t zdom;
    size_t off, n; /* its rounds: pool[off, off + n) */
} cm_entry;

struct cost_memo {
    const proto *pr;
    proto_cfg cfg;
    cm_entry *ent;
    size_t n_ent, cap_ent;
    uint32_t *slot;  /* open addressing over entry index + 1, 0 = empty */
    size_t cap_slot; /* a power of two, at most half full */
    cost_round *pool;
    size_t n_pool, cap_pool;
    mpc_val *vals;
    size_t cap_vals;
};

#define CM_POOL_MAX ((size_t)1 << 16) /* 11.5 MB of rounds */

cost_memo *cost_memo_new(void) { return calloc(1, sizeof(cost_memo)); }

void cost_memo_free(cost_memo *m)
{
    if (!m)
        return;
    free(m->ent);
    free(m->slot);
    free(m->pool);
    free(m->vals);
    free(m);
}

size_t cost_memo_rounds(const cost_memo *m) { return m ? m->n_pool : 0; }

static void cm_reset(cost_memo *m, const proto *pr, const proto_cfg *cfg)
{
    m->pr = pr;
    m->cfg = *cfg;
    m->n_ent = 0;
    m->n_pool = 0;
    if (m->slot)
        memset(m->slot, 0, m->cap_slot * sizeof *m->slot);
}

static uint64_t cm_hash(const cm_key *k)
{
    uint64_t w[sizeof *k / 8], h = 0x9e3779b97f4a7c15ull;
    memcpy(w, k, sizeof w);
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        h = (h ^ w[i]) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

static void cm_key_of(cm_key *k, const op_program *p, const op *o, const mpc_val *vals)
{
    memset(k, 0, sizeof *k);
    k->kind = o->kind;
    k->flags = o->flags;
    k->batch = o->batch;
    k->m = o->m;
    k->k = o->k;
    k->n = o->n;
    k->iarg = o->iarg;
    k->pad = o->bits;
    memcpy(&k->farg, &o->farg, sizeof k->farg);
    uint32_t ids[4] = {o->in[0], o->in[1], o->in[2], o->out};
    for (int i = 0; i < 4; i++) {
        if (ids[i] == OP_NONE || ids[i] >= p->n_tens)
            continue;
        const op_tensor *t = &p->tens[ids[i]];
        cm_opnd *d = &k->o[i];
        d->used = 1;
        d->vn = vals[ids[i]].n;
        d->vdom = vals[ids[i]].dom;
        d->tb = t->batch;
        d->tr = t->rows;
        d->tc = t->cols;
        d->role = t->role;
        d->tdom = t->dom;
    }
}

/* The entry slot of key k (hash h): its entry, or the empty slot where it belongs. */
static uint32_t *cm_slot(cost_memo *m, const cm_key *k, uint64_t h)
{
    size_t mask = m->cap_slot - 1, i = h & mask;
    while (m->slot[i] && memcmp(&m->ent[m->slot[i] - 1].key, k, sizeof *k) != 0)
        i = (i + 1) & mask;
    return &m->slot[i];
}

static int cm_grow_slots(cost_memo *m)
{
    size_t cap = m->cap_slot ? 2 * m->cap_slot : 1024;
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s)
        return MS_ERR_NOMEM;
    free(m->slot);
    m->slot = s;
    m->cap_slot = cap;
    for (size_t i = 0; i < m->n_ent; i++)
        *cm_slot(m, &m->ent[i].key, cm_hash(&m->ent[i].key)) = (uint32_t)i + 1;
    return MS_OK;
}

static int grow_to(void **buf, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return MS_OK;
    size_t nc = *cap ? *cap : first;
    while (nc < need)
        nc *= 2;
    void *nb = realloc(*buf, nc * elem);
    if (!nb)
        return MS_ERR_NOMEM;
    *buf = nb;
    *cap = nc;
    return MS_OK;
}

/* Remembers the rounds log[from, log->n) of an op with key k and result z. */
static int cm_add(cost_memo *m, const cm_key *k, uint64_t h, const mpc_val *z, const cost_log *log,
                  size_t from)
{
    size_t n = log->n - from;
    if (m->n_pool + n > CM_POOL_MAX) {
        cm_reset(m, m->pr, &m->cfg);
    }
    if (2 * (m->n_ent + 1) > m->cap_slot && cm_grow_slots(m) != MS_OK)
        return MS_ERR_NOMEM;
    if (grow_to((void **)&m->ent, &m->cap_ent, m->n_ent + 1, sizeof *m->ent, 256) ||
        grow_to((void **)&m->pool, &m->cap_pool, m->n_pool + n, sizeof *m->pool, 4096))
        return MS_ERR_NOMEM;
    cm_entry *en = &m->ent[m->n_ent];
    en->key = *k;
    en->zn = z->n;
    en->zdom = z->dom;
    en->off = m->n_pool;
    en->n = n;
    memcpy(m->pool + m->n_pool, log->r + from, n * sizeof *log->r);
    m->n_pool += n;
    *cm_slot(m, k, h) = (uint32_t)++m->n_ent;
    return MS_OK;
}

/* Appends a remembered op's rounds to the log as op idx's. */
static int cm_replay(cost_log *log, const cost_memo *m, const cm_entry *en, uint32_t idx)
{
    if (grow_to((void **)&log->r, &log->cap, log->n + en->n, sizeof *log->r, 1024))
        return MS_ERR_NOMEM;
    cost_round *dst = log->r + log->n;
    memcpy(dst, m->pool + en->off, en->n * sizeof *dst);
    for (size_t i = 0; i < en->n; i++)
        dst[i].op = idx;
    log->n += en->n;
    return MS_OK;
}

int proto_cost_program_memo(const proto *pr, const proto_cfg *cfg, const op_program *prog,
                            cost_log *log, cost_memo *m, errbuf *e)
{
    if (!m)
        return proto_cost_program(pr, cfg, prog, log, e);
    if (m->pr != pr || memcmp(&m->cfg, cfg, sizeof *cfg) != 0)
        cm_reset(m, pr, cfg);
    if ((!m->cap_slot && cm_grow_slots(m) != MS_OK) ||
        grow_to((void **)&m->vals, &m->cap_vals, prog->n_tens + 1, sizeof *m->vals, 1024))
        return err_set(e, MS_ERR_NOMEM, "error: out of memory costing %zu tensors", prog->n_tens);
    cost_log_clear(log);
    log->n_parties = pr->n_parties;
    mpc_val *vals = m->vals;
    memset(vals, 0, (prog->n_tens + 1) * sizeof *vals);
    /* COST: values carry only their length in cost mode (eng.h). */
    for (size_t t = 0; t < prog->n_tens; t++) {
        const op_tensor *ts = &prog->tens[t];
        vals[t].n = (size_t)ts->batch * ts->rows * ts->cols;
        vals[t].dom = ts->dom;
    }
    eng *en = NULL;
    int rc = MS_OK;
    for (size_t i = 0; i < prog->n_ops && rc == MS_OK; i++) {
        const op *o = &prog->ops[i];
        cm_key k;
        cm_key_of(&k, prog, o, vals);
        uint64_t h = cm_hash(&k);
        int bad = o->out >= prog->n_tens; /* kern_exec reports bad ids */
        for (int j = 0; j < 3; j++)
            bad |= o->in[j] != OP_NONE && o->in[j] >= prog->n_tens;
        uint32_t s = bad ? 0 : *cm_slot(m, &k, h);
        if (s) {
            const cm_entry *ce = &m->ent[s - 1];
            if ((rc = cm_replay(log, m, ce, (uint32_t)i)) != MS_OK)
                rc = err_set(e, rc, "error: out of memory costing %zu ops", prog->n_ops);
            if (rc != MS_OK)
                break;
            mpc_val *out = &vals[o->out];
            memset(out, 0, sizeof *out);
            out->n = ce->zn;
            out->dom = ce->zdom;
            continue;
        }
        if (!en && (rc = pr->cost_engine(cfg, log, &en)) != MS_OK) {
            eng_free(en);
            return err_set(e, rc, "error: cannot create the %s cost engine: %s", pr->name,
                           ms_err_text(rc));
        }
        size_t from = log->n;
        en->cur_op = (uint32_t)i;
        rc = kern_exec(en, prog, i, vals, e);
        if (rc == MS_OK && !bad && cm_add(m, &k, h, &vals[o->out], log, from) != MS_OK)
            rc = err_set(e, MS_ERR_NOMEM, "error: out of memory costing %zu ops", prog->n_ops);
    }
    eng_free(en);
    return rc;
}
