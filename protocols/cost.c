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

void cost_log_clear(cost_log *c)
{
    c->n = 0;
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
        return err_set(e, MS_ERR_NOTFOUND, "error: unknown protocol '%s'%s%s%s (known: semi2k, aby3)",
                       name ? name : "", dym ? " (did you mean '" : "", dym ? dym : "",
                       dym ? "'?)" : "");
    }
    memset(cfg, 0, sizeof *cfg);
    pr->defaults(cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", pr->name);
    return MS_OK;
}

/* ---- program coster ---------------------------------------------------------------------- */

int proto_cost_program(const proto *pr, const proto_cfg *cfg, const op_program *prog,
                       cost_log *log, errbuf *e)
{
    cost_log_clear(log);
    log->n_parties = pr->n_parties;
    eng *en = NULL;
    int rc = pr->cost_engine(cfg, log, &en);
    if (rc)
        return err_set(e, rc, "error: cannot create the %s cost engine: %s", pr->name,
                       ms_err_text(rc));
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
    return rc;
}

/* ---- shared cost-engine machinery -------------------------------------------------------- */

int cost_engine_new(const proto *pr, const proto_cfg *cfg, cost_log *log, const eng_vt *vt,
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
    e->vt = vt;
    e->pr = pr;
    e->cfg = *cfg;
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

int cost_alloc(eng *e, mpc_val *v, size_t n, int dom)
{
    (void)e;
    v->n = n;
    v->dom = (uint8_t)dom;
    v->s[0] = v->s[1] = NULL;
    return MS_OK;
}

void cost_release(eng *e, mpc_val *v)
{
    (void)e;
    v->n = 0;
}

int cost_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    z->n = x->n;
    z->dom = x->dom;
    return cost_local(e, PRIM_LOCAL, (double)x->n);
}

int cost_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return cost_add(e, z, x, y);
}

int cost_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    z->n = x->n;
    z->dom = x->dom;
    return cost_local(e, PRIM_LOCAL, (double)x->n);
}

int cost_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    return cost_add_pub(e, z, x, c, nc);
}

int cost_shift(eng *e, mpc_val *z, const mpc_val *x, int s)
{
    return cost_add_pub(e, z, x, NULL, 0);
}

int cost_bool_components(eng *e, mpc_val comps[3], int *nc, const mpc_val *x)
{
    *nc = e->n_parties == 2 ? 2 : 3;
    for (int i = 0; i < *nc; i++) {
        comps[i].n = x->n;
        comps[i].dom = DOM_BOOL;
        comps[i].s[0] = comps[i].s[1] = NULL;
    }
    return cost_local(e, PRIM_LOCAL, (double)x->n * *nc);
}

int cost_permute(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n)
{
    z->n = n;
    z->dom = x->dom;
    return cost_local(e, PRIM_LOCAL, (double)n);
}
