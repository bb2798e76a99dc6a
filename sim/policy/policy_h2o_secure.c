/* policy_h2o_secure.c — H2O's selection on secret shares (the policy's secpol_ops slot): its ops
 * in each step's program (policy_h2o.c's emitters), the table each node carries between steps,
 * and the audit against the plaintext replay (h2o_ops.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/kern.h"
#include "policy.h"
#include "h2o_ops.h"
#include "secpol.h"

/* The rows carried into a decode step at kv cached entries (public: the prompt keeps
 * min(P, sinks + heavy + recent), each step adds one and evicts down to the budget). */
static uint32_t h2o_carried(const h2o_shape *sh, uint32_t kv)
{
    uint64_t b = (uint64_t)sh->sinks + sh->heavy + sh->recent;
    return kv < b ? kv : (uint32_t)b;
}

static int h2o_sec_config(const policy_env *env, const policy_args *a, void **cfg, errbuf *e)
{
    h2o_shape *sh = calloc(1, sizeof *sh);
    if (!sh)
        return err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory");
    *sh = (h2o_shape){env->n_heads, env->n_kv_heads, env->head_dim, 0, 0, 0, 0, 0, 0};
    int rc = h2o_budgets(env, a, &sh->heavy, &sh->recent, e);
    if (rc) {
        free(sh);
        return rc;
    }
    *cfg = sh;
    return MS_OK;
}

static uint32_t h2o_sec_rows(const void *cfg, const secpol_run *o, uint32_t layer, uint32_t kv)
{
    h2o_shape sh = h2o_layer_shape(cfg, layer);
    return h2o_carried(&sh, kv);
}

static int h2o_sec_public(const void *cfg, const secpol_run *o, const secpol_step *st, int frac,
                          const op_tensor *t, uint64_t *out, size_t n)
{
    return h2o_public(t, out, n);
}

/* One node's state: per layer the table (Hkv, R, 2d+1) = [K | V | score] of its carried rows. */
typedef struct h2o_node {
    secpol_run o;
    h2o_shape sh;
    mpc_val *st;
} h2o_node;

static int h2o_sec_node_new(void *cfg, const secpol_run *o, void **state, errbuf *e)
{
    h2o_node *nd = calloc(1, sizeof *nd);
    if (nd)
        nd->st = calloc(o->model->n_layers, sizeof *nd->st);
    if (!nd || !nd->st) {
        free(nd);
        return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    }
    nd->o = *o;
    nd->sh = *(const h2o_shape *)cfg;
    *state = nd;
    return MS_OK;
}

static void h2o_sec_node_free(void *state, eng *e)
{
    h2o_node *nd = state;
    for (uint32_t l = 0; l < nd->o.model->n_layers; l++)
        e->vt->release(e, &nd->st[l]);
    free(nd->st);
    free(nd);
}

/* Opened after each step: every layer's one-hots (TOPK at the prompt, the eviction's ARGMAX at
 * a decode step), then the candidates' scores (secpol.h h2o_sel). */
static int h2o_sec_audit_tensor(const void *cfg, const secpol_run *o, const secpol_step *st,
                                size_t i, char name[48], int *is_score)
{
    if (i > 1)
        return 0;
    snprintf(name, 48, "h2o.%s", i ? "cand" : st->s ? "argmin" : "topk");
    *is_score = i == 1;
    return 1;
}

/* The policy's selection on shares after the lowered step (secpol.h): each layer's upkeep on
 * its attention's softmax output and caches, then the selection of every layer at once (the
 * dense layers' none: they carry every row). */
static int h2o_sec_emit(const void *cfg, const secpol_run *o, const secpol_step *st, op_program *p,
                        errbuf *e)
{
    const model_cfg *m = o->model;
    const h2o_shape *sh = cfg;
    int phase = st->s ? PHASE_DECODE : PHASE_PREFILL;
    uint32_t c = st->s ? h2o_carried(sh, st->kv) : 0;
    uint32_t D = sh->dense < m->n_layers ? sh->dense : m->n_layers; /* layers selecting nothing */
    h2o_ids *lay = calloc(m->n_layers, sizeof *lay);
    int rc = lay ? MS_OK : err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        uint32_t pr = op_layer_find(p, (int)l, "scores"), kc = op_layer_find(p, (int)l, "kcache"),
                 vc = op_layer_find(p, (int)l, "vcache");
        if (pr == OP_NONE || kc == OP_NONE || vc == OP_NONE)
            rc = err_set(e, MS_ERR_INTERNAL, "secure inference: layer %u has no attention", l);
        else {
            h2o_shape ls = h2o_layer_shape(sh, l);
            uint32_t lc = st->s ? h2o_carried(&ls, st->kv) : 0;
            rc = h2o_emit_ops(p, &ls, phase, l, lc, st->t, pr, kc, vc, &lay[l], e);
        }
    }
    if (!rc && D < m->n_layers)
        rc = h2o_emit_select(p, sh, phase, m->n_layers - D, c, st->t, lay + D, NULL, e);
    free(lay);
    return rc;
}

/* ---- H2O on shares: the carried state ------------------------------------------------------- */

/* The rows a layer carries after a step (secpol.h): row q of the next state is row row[q] of
 * the step's table (src[q] = 0) or of its selected heavy rows (src[q] = 1); returns the count.
 * A public function of the public shapes: the same on every node and in the audit. The sinks
 * (prefill rows 0 … S−1, decode rows 1 … S) stay first. */
static uint32_t h2o_next(const h2o_shape *sh, int phase, uint32_t c, uint32_t t, uint8_t *src,
                         uint32_t *row)
{
    uint32_t n = c + t, hh = sh->heavy, rec = sh->recent, S = sh->sinks, R = 0;
    uint64_t budget = (uint64_t)S + hh + rec;
    if (h2o_selects(sh, phase, c, t)) {
        for (uint32_t j = 0; j < S; j++)
            src[R] = 0, row[R++] = phase == PHASE_PREFILL ? j : j + 1;
        for (uint32_t q = 0; q < hh; q++)
            src[R] = 1, row[R++] = q;
        if (phase == PHASE_PREFILL) {
            for (uint32_t j = n - rec; j < n; j++) /* the recent window, in order */
                src[R] = 0, row[R++] = j;
            return R;
        }
        for (uint32_t j = (rec ? 1 : 0) + S + hh + 1; j <= c; j++)
            src[R] = 0, row[R++] = j;
        if (rec) /* the new entry joins the window */
            src[R] = 0, row[R++] = 0;
        return R;
    }
    if (phase == PHASE_PREFILL) {
        uint32_t keep = n < budget ? n : (uint32_t)budget;
        for (uint32_t j = n - keep; j < n; j++)
            src[R] = 0, row[R++] = j;
        return R;
    }
    /* heavy 0: the window's oldest row (S+1) leaves, or with no window the new entry */
    int over = (uint64_t)c + 1 > budget;
    uint32_t drop = over ? S + 1 : 0;
    for (uint32_t j = 1; j <= c; j++)
        if (j != drop)
            src[R] = 0, row[R++] = j;
    if (!over || c > S)
        src[R] = 0, row[R++] = 0;
    return R;
}

/* Before decode step s: every layer's kcache, vcache and score tensors take the carried rows
 * behind the new entry's row 0. */
static int h2o_sec_bind(void *state, eng *e, const op_program *p, mpc_program_run *r,
                        const secpol_step *at, errbuf *err)
{
    h2o_node *nd = state;
    const model_cfg *m = nd->o.model;
    const mpc_val *st = nd->st;
    if (!at->s)
        return MS_OK; /* the prompt carries nothing in */
    uint32_t d = m->head_dim, F = h2o_width(&nd->sh);
    static const char *const nm[3] = {"kcache", "vcache", "h2o.score"};
    int rc = MS_OK, W = nd->sh.last ? 2 : 3; /* the newest row carries no score */
    for (uint32_t l = 0; !rc && l < m->n_layers; l++)
        for (int w = 0; w < W && !rc; w++) {
            h2o_shape ls = h2o_layer_shape(&nd->sh, l);
            uint32_t R = h2o_carried(&ls, at->kv);
            uint32_t id = op_layer_find(p, (int)l, nm[w]);
            if (id == OP_NONE)
                return err_set(err, MS_ERR_INTERNAL, "secure inference: no tensor L%u.%s", l,
                               nm[w]);
            e->vt->release(e, &r->vals[id]);
            rc = secpol_rows_in(e, &st[l], m->n_kv_heads, R, F, (uint32_t)w * d, w < 2 ? d : 1,
                                p->tens[id].rows, 1, &r->vals[id]);
        }
    return rc;
}

/* After a step: every layer's next state from its table and selected heavy rows (a dense
 * layer's: its table's rows in position order). */
static int h2o_sec_update(void *state, eng *e, mpc_net *net, const op_program *p,
                          mpc_program_run *r, const secpol_step *step, errbuf *err)
{
    h2o_node *nd = state;
    const model_cfg *m = nd->o.model;
    mpc_val *st = nd->st;
    uint32_t s = step->s, t = step->t, kv = step->kv, Hkv = m->n_kv_heads, F = h2o_width(&nd->sh);
    uint32_t D = nd->sh.dense < m->n_layers ? nd->sh.dense : m->n_layers, L = m->n_layers - D;
    int phase = s ? PHASE_DECODE : PHASE_PREFILL;
    /* the most rows a layer's maps hold: a dense layer's kv + t, or a selecting one's */
    size_t most = (size_t)kv + t + nd->sh.heavy + nd->sh.sinks + 1;
    uint8_t *src = malloc(most);
    uint32_t *row = malloc(most * sizeof *row);
    uint32_t *idx = calloc((size_t)Hkv * most * F, sizeof *idx);
    uint64_t *sel = calloc((size_t)Hkv * most * F, sizeof *sel);
    int rc = src && row && idx && sel
                 ? MS_OK
                 : err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        h2o_shape sh = h2o_layer_shape(&nd->sh, l);
        uint32_t c = s ? h2o_carried(&sh, kv) : 0, n = c + t;
        uint32_t R = h2o_next(&sh, phase, c, t, src, row);
        size_t N = (size_t)Hkv * R * F;
        uint32_t id[2] = {op_layer_find(p, (int)l, "h2o.table"),
                          l < D ? OP_NONE : op_layer_find(p, -1, "h2o.heavy")};
        mpc_val part[2] = {{0}, {0}}, z = {0};
        for (int w = 0; w < 2 && !rc; w++) {
            if (id[w] == OP_NONE)
                continue;
            for (uint32_t g = 0; g < Hkv; g++)
                for (uint32_t q = 0; q < R; q++)
                    for (uint32_t f = 0; f < F; f++) {
                        size_t i = ((size_t)g * R + q) * F + f;
                        sel[i] = src[q] == w;
                        /* the table (Hkv, n, F); the heavy rows [g][l−D][q] of every
                         * selecting layer */
                        size_t at = w ? ((size_t)g * L + l - D) * sh.heavy + row[q]
                                      : (size_t)g * n + row[q];
                        idx[i] = sel[i] ? (uint32_t)(at * F + f) : 0;
                    }
            rc = secpol_relayout(e, &part[w], &r->vals[id[w]], idx, sel, N);
        }
        if (!rc && id[0] == OP_NONE)
            rc = err_set(err, MS_ERR_INTERNAL, "secure inference: no tensor L%u.h2o.table", l);
        if (!rc && id[1] != OP_NONE) {
            rc = e->vt->alloc(e, &z, N, DOM_ARITH);
            if (!rc)
                rc = e->vt->add(e, &z, &part[0], &part[1]);
        } else if (!rc) {
            z = part[0], part[0] = (mpc_val){0};
        }
        e->vt->release(e, &part[0]);
        e->vt->release(e, &part[1]);
        if (!rc) {
            e->vt->release(e, &st[l]);
            st[l] = z;
        }
    }
    free(src), free(row), free(idx), free(sel);
    return rc;
}

/* H2O's plaintext scores as the replay accumulates them: the float model run under the
 * replay's keep masks, each (layer, KV head)'s column sums of its query heads' attention (the
 * newest row: position pos's own row alone); sc [pos][l][g][j] after position pos (j ≤ pos). */
typedef struct pscore {
    const secpol_keep *k;
    uint32_t L, Hkv, G, n;
    int last;
    float *run, *sc;
} pscore;

static int ps_mask(void *ctx, uint32_t layer, uint32_t g, uint32_t pos, uint8_t *mask)
{
    pscore *c = ctx;
    return secpol_keep_attend(c->k, layer, g, pos, mask);
}

static void ps_layer(void *ctx, const llama_layer_view *v)
{
    pscore *c = ctx;
    for (uint32_t g = 0; g < c->Hkv; g++) {
        float *run = c->run + ((size_t)v->layer * c->Hkv + g) * c->n;
        if (c->last)
            memset(run, 0, c->n * sizeof *run);
        for (uint32_t h = g * c->G; h < (g + 1) * c->G; h++)
            for (uint32_t j = 0; j <= v->pos; j++)
                run[j] += v->att[(size_t)h * (v->pos + 1) + j];
        memcpy(c->sc + (((size_t)v->pos * c->L + v->layer) * c->Hkv + g) * c->n, run,
               c->n * sizeof *run);
    }
}

static int plain_scores(const secpol_run *o, const secpol_keep *k, int last, float **out, errbuf *e)
{
    const model_cfg *m = o->model;
    uint32_t n = o->n_tokens;
    pscore c = {.k = k,
                .L = m->n_layers,
                .Hkv = m->n_kv_heads,
                .G = m->n_heads / m->n_kv_heads,
                .n = n,
                .last = last};
    c.run = calloc((size_t)c.L * c.Hkv * n, sizeof *c.run);
    c.sc = calloc((size_t)n * c.L * c.Hkv * n, sizeof *c.sc);
    llama *pm = NULL;
    int rc = c.run && c.sc ? MS_OK : err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    llama_hooks hk = {.ctx = &c, .on_layer = ps_layer, .attend_mask = ps_mask};
    if (!rc)
        rc = secpol_audit_forward(o, &hk, &pm, e);
    free(c.run);
    if (rc) {
        free(c.sc);
        return rc;
    }
    *out = c.sc;
    return MS_OK;
}

/* A differing selection from the same candidates: the replay's margin between the two choices
 * (rep: the replay's scores of the candidates), a near tie when within twice the score error
 * of the k scores summed (one per KV head; one selection per layer ranks their sums). */
static void sel_differ(h2o_sec_audit *out, double margin, double k)
{
    out->max_margin = margin > out->max_margin ? margin : out->max_margin;
    out->near_ties += margin <= 2 * k * out->score_err;
    out->differ_same_cand++;
}

/* One decode eviction of (l, g) at position pos against the plaintext's: cand[i] positions,
 * sc their secure scores, v the secure victim's index; rep the replay's scores by position. */
static void sel_evict(const secpol_keep *plain, uint32_t pos, uint32_t l, uint32_t g,
                      const uint32_t *cand, const double *sc, uint32_t nc, uint32_t v, double tie,
                      double k, int sets_equal, const float *rep, h2o_sec_audit *out)
{
    const uint8_t *now = secpol_keep_mask(plain, pos, l, g),
                  *next = secpol_keep_mask(plain, pos + 1, l, g);
    if (!now || !next)
        return;
    uint32_t pv = UINT32_MAX;
    for (uint32_t j = 0; j <= pos && pv == UINT32_MAX; j++)
        if ((j == pos || now[j]) && !next[j])
            pv = j;
    out->evictions++;
    double gap = INFINITY; /* the secure victim's lead over the next lowest score */
    for (uint32_t i = 0; i < nc; i++)
        if (i != v && sc[i] - sc[v] < gap)
            gap = sc[i] - sc[v];
    if (sets_equal) { /* the same candidates on both sides */
        out->separated += gap > tie;
        out->separated_same += gap > tie && pv == cand[v];
    }
    if (pv == cand[v]) {
        out->evict_same++;
        return;
    }
    if (!sets_equal || pv > pos) {
        out->diverged++;
        return;
    }
    sel_differ(out, (double)rep[cand[v]] - (double)rep[pv], k);
}

/* A selection against its rule over the session's own candidate scores sc[0..nc): chosen[i]
 * marks the kept candidates (prompt: the top-k; decode: all but the evicted). Kept, the lowest
 * kept score is above the highest dropped (the same, an exact tie at the boundary: either
 * choice is the rule's). */
static void sel_own(h2o_sec_audit *out, const double *sc, const uint8_t *chosen, uint32_t nc)
{
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t i = 0; i < nc; i++) {
        if (chosen[i])
            lo = sc[i] < lo ? sc[i] : lo;
        else
            hi = sc[i] > hi ? sc[i] : hi;
    }
    out->own++;
    out->own_same += lo > hi;
    out->own_ties += lo == hi;
}

/* The secure scores of the candidates against the replay's (sets equal: the same entries). */
static void sel_err(h2o_sec_audit *out, const uint32_t *cand, const double *sc, uint32_t nc,
                    const float *rep)
{
    for (uint32_t i = 0; i < nc; i++) {
        double d = fabs(sc[i] - (double)rep[cand[i]]);
        out->score_err = d > out->score_err ? d : out->score_err;
    }
}

/* The prompt's heavy set heavy[0..hh) chosen from the candidates cand[0..nc) (secure scores
 * sc) against the plaintext's prompt selection pm1 (rep: the replay's scores by position). */
static void sel_prefill(const uint8_t *pm1, const uint32_t *heavy, uint32_t hh,
                        const uint32_t *cand, const double *sc, uint32_t c0, uint32_t nc,
                        double tie_bound, double k, const float *rep, h2o_sec_audit *out)
{
    /* the candidates are positions [c0, c0 + nc): after the sinks, before the window */
    uint32_t c1 = c0 + nc;
    int same = 1;
    for (uint32_t q = 0; q < hh; q++)
        same &= heavy[q] >= c0 && heavy[q] < c1 && pm1[heavy[q]];
    uint32_t cnt = 0;
    for (uint32_t j = c0; j < c1; j++)
        cnt += pm1[j] != 0;
    out->prefill_sets++;
    out->prefill_same += (uint32_t)(same && cnt == hh);
    /* separation: the lowest chosen score above the highest other */
    double lo = INFINITY, hi = -INFINITY;
    for (uint32_t i = 0; i < nc; i++) {
        int chosen = 0;
        for (uint32_t q = 0; q < hh; q++)
            chosen |= heavy[q] == cand[i];
        if (chosen)
            lo = sc[i] < lo ? sc[i] : lo;
        else
            hi = sc[i] > hi ? sc[i] : hi;
    }
    out->separated += lo - hi > tie_bound;
    out->separated_same += lo - hi > tie_bound && same && cnt == hh;
    if (!(same && cnt == hh)) {
        /* the replay's margin between the sets: its largest lead of an entry it kept and the
         * session did not over one the session kept and it did not (an exact ranking within
         * the score error keeps every such lead below twice it) */
        double mg = 0;
        for (uint32_t j = c0; j < c1; j++) {
            int both = 0;
            for (uint32_t q = 0; q < hh; q++)
                both |= heavy[q] == j;
            for (uint32_t q = 0; pm1[j] && !both && q < hh; q++)
                if (heavy[q] >= c0 && heavy[q] < c1 && !pm1[heavy[q]] &&
                    (double)rep[j] - (double)rep[heavy[q]] > mg)
                    mg = (double)rep[j] - (double)rep[heavy[q]];
        }
        sel_differ(out, mg, k);
    }
}

/* The audit's walk over steps × layers × KV heads: the positions each layer's and KV head's
 * rows hold, followed through the public row maps and the opened one-hots. */
typedef struct h2o_walk {
    const secpol_run *o;
    const h2o_shape *cfg;
    const secpol_opened *r;
    const secpol_keep *plain;
    h2o_sec_audit *out;
    double tie_bound;
    uint32_t L, D, Hkv, hh, Nmax, NT; /* D: the dense layers, which select nothing */
    double k;        /* the scores a selection ranks summed: 1, or Hkv one per layer */
    double *ssum;    /* one per layer: the candidates' secure scores summed over the KV heads */
    float *rsum;     /* … and the replay's, by position */
    uint32_t R[2];   /* rows each table holds before the step: [0] a selecting layer's, [1] a
                      * dense layer's */
    uint32_t *slot;  /* (L, Hkv, Nmax): the position of each carried row */
    uint32_t *nslot; /* the step's program rows' positions */
    uint32_t *cand, *heavy, *row;
    uint8_t *src;    /* row maps of h2o_next */
    uint8_t *chosen; /* a selection's kept candidates (sel_own) */
    float *ps;       /* the replay's scores (plain_scores) */
} h2o_walk;

/* One step of the walk: its shapes, and what it opened per KV head. */
typedef struct h2o_wstep {
    uint32_t s, t, pos, n;   /* step, new tokens, cached entries, program rows */
    uint32_t first, nc, per; /* decode: the latest candidate's row; candidates; one-hot values */
    uint32_t Rn;             /* rows carried out of the step */
    int sel;                 /* the step selects */
} h2o_wstep;

static int walk_new(h2o_walk *w, const secpol_run *o, const h2o_shape *cfg, const secpol_opened *r,
                    const secpol_keep *plain, double tie_bound, h2o_sec_audit *out, errbuf *e)
{
    const model_cfg *m = o->model;
    uint32_t hh = cfg->heavy, Nmax = o->n_tokens + o->n_gen + 2;
    *w = (h2o_walk){.o = o,
                    .cfg = cfg,
                    .r = r,
                    .plain = plain,
                    .out = out,
                    .tie_bound = tie_bound,
                    .L = m->n_layers,
                    .D = cfg->dense < m->n_layers ? cfg->dense : m->n_layers,
                    .Hkv = m->n_kv_heads,
                    .hh = hh,
                    .Nmax = Nmax,
                    .NT = o->n_tokens,
                    .k = cfg->shared ? m->n_kv_heads : 1};
    w->slot = calloc((size_t)w->L * w->Hkv * Nmax, sizeof *w->slot);
    w->nslot = calloc(Nmax, sizeof *w->nslot);
    w->cand = calloc(Nmax, sizeof *w->cand);
    w->row = calloc(Nmax + hh + cfg->sinks, sizeof *w->row);
    w->heavy = calloc(hh + 1, sizeof *w->heavy);
    w->src = calloc(Nmax + hh + cfg->sinks, 1);
    w->chosen = calloc(Nmax, 1);
    w->ssum = calloc(Nmax, sizeof *w->ssum);
    w->rsum = calloc(o->n_tokens, sizeof *w->rsum);
    if (!w->slot || !w->nslot || !w->cand || !w->row || !w->heavy || !w->src || !w->chosen ||
        !w->ssum || !w->rsum)
        return err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    return MS_OK;
}

static void walk_free(h2o_walk *w)
{
    free(w->ps);
    free(w->slot), free(w->nslot), free(w->cand), free(w->row), free(w->heavy), free(w->src);
    free(w->chosen), free(w->ssum), free(w->rsum);
}

/* The scores a selection of (l, g) ranks at replay position rpos: the candidates' secure scores
 * sc and the replay's rep, or one per layer their sums over the KV heads (the sums of the
 * opened candidates' columns: every KV head holds the same positions). */
static void walk_rank(h2o_walk *w, const h2o_wstep *st, uint32_t l, uint32_t g, uint32_t rpos,
                      const double **sc, const float **rep)
{
    size_t Ls = w->L - w->D;
    const double *all = w->r->vals[st->s] + Ls * w->Hkv * st->per;
    const float *rp = w->ps + ((size_t)rpos * w->L + l) * w->Hkv * w->NT;
    if (!w->cfg->shared) {
        *sc = all + ((size_t)g * Ls + l - w->D) * st->nc;
        *rep = rp + (size_t)g * w->NT;
        return;
    }
    memset(w->ssum, 0, st->nc * sizeof *w->ssum);
    memset(w->rsum, 0, w->NT * sizeof *w->rsum);
    for (uint32_t h = 0; h < w->Hkv; h++) {
        for (uint32_t i = 0; i < st->nc; i++)
            w->ssum[i] += all[((size_t)h * Ls + l - w->D) * st->nc + i];
        for (uint32_t j = 0; j < w->NT; j++)
            w->rsum[j] += rp[(size_t)h * w->NT + j];
    }
    *sc = w->ssum;
    *rep = w->rsum;
}

/* A decode step's eviction: the opened one-hot's row v leaves, the other candidates stay. sc:
 * the KV head's secure scores; rank, rrank: the scores the selection ranks (walk_rank). */
static void walk_evict(h2o_walk *w, const h2o_wstep *st, uint32_t l, uint32_t g, const double *oh,
                       const double *sc, int eq)
{
    uint32_t v = 0;
    for (uint32_t i = 0; i < st->nc; i++)
        v = oh[i] > 0.5 ? i : v;
    const float *rep = w->ps + (((size_t)st->pos * w->L + l) * w->Hkv + g) * w->NT, *rrank;
    const double *rank;
    walk_rank(w, st, l, g, st->pos, &rank, &rrank);
    for (uint32_t i = 0; i < st->nc; i++)
        w->chosen[i] = i != v;
    sel_own(w->out, rank, w->chosen, st->nc);
    if (eq)
        sel_err(w->out, w->cand, sc, st->nc, rep);
    sel_evict(w->plain, st->pos, l, g, w->cand, rank, st->nc, v, w->tie_bound * w->k, w->k, eq,
              rrank, w->out);
    for (uint32_t i = 0, q = 0; i < st->nc; i++)
        if (i != v)
            w->heavy[q++] = w->cand[i];
}

/* The prompt's heavy set (row q of the opened TOPK one-hots picks heavy[q]) against the
 * plaintext's prompt selection. */
static void walk_prompt(h2o_walk *w, const h2o_wstep *st, uint32_t l, uint32_t g, const double *oh,
                        const double *sc)
{
    memset(w->chosen, 0, st->nc);
    for (uint32_t q = 0; q < w->hh; q++)
        for (uint32_t i = 0; i < st->nc; i++)
            if (oh[(size_t)q * st->nc + i] > 0.5)
                w->heavy[q] = w->cand[i], w->chosen[i] = 1;
    const float *rep = w->ps + (((size_t)(st->n - 1) * w->L + l) * w->Hkv + g) * w->NT, *rrank;
    const double *rank;
    walk_rank(w, st, l, g, st->n - 1, &rank, &rrank);
    sel_own(w->out, rank, w->chosen, st->nc);
    const uint8_t *pm1 = secpol_keep_mask(w->plain, st->pos + st->n, l, g);
    sel_err(w->out, w->cand, sc, st->nc, rep);
    if (pm1)
        sel_prefill(pm1, w->heavy, w->hh, w->cand, rank, w->cfg->sinks, st->nc, w->tie_bound * w->k,
                    w->k, rrank, w->out);
}

/* One layer's and KV head's table through a step: its kept set against the plaintext's, its
 * selection where the step has one, then the positions its carried rows hold. */
static void walk_head(h2o_walk *w, const h2o_wstep *st, uint32_t l, uint32_t g)
{
    uint32_t *sl = w->slot + ((size_t)l * w->Hkv + g) * w->Nmax;
    const uint8_t *pm = secpol_keep_mask(w->plain, st->pos, l, g);
    int eq = 1;
    if (st->s && pm) {
        eq = secpol_same_set(sl, w->R[l < w->D], pm, st->pos);
        w->out->kept_sets++;
        w->out->kept_same += (uint32_t)eq;
    }
    /* program rows: prefill j = position j; decode 0 = pos, q ≥ 1 = slot q-1 */
    for (uint32_t i = 0; i < st->n; i++)
        w->nslot[i] = st->s ? (i ? sl[i - 1] : st->pos) : i;
    if (st->sel) {
        /* the one-hots of every selecting layer, then the candidates' scores: [g][l−D][…] */
        size_t Ls = w->L - w->D, at = (size_t)g * Ls + l - w->D;
        const double *oh = w->r->vals[st->s] + at * st->per;
        const double *sc = w->r->vals[st->s] + Ls * w->Hkv * st->per + at * st->nc;
        /* prefill: rows S … S+nc-1; decode: the latest first, then rows S+1 … S+hh
         * (h2o_ops.c h2o_stage) */
        uint32_t S = w->cfg->sinks;
        for (uint32_t i = 0; i < st->nc; i++)
            w->cand[i] = st->s ? w->nslot[i ? S + i : st->first] : w->nslot[S + i];
        if (st->s)
            walk_evict(w, st, l, g, oh, sc, eq);
        else
            walk_prompt(w, st, l, g, oh, sc);
    }
    for (uint32_t q = 0; q < st->Rn; q++)
        sl[q] = w->src[q] ? w->heavy[w->row[q]] : w->nslot[w->row[q]];
}

/* The dense layers [0, D) through a step: every row carried in position order. */
static void walk_dense(h2o_walk *w, uint32_t s)
{
    h2o_shape ds = h2o_layer_shape(w->cfg, 0);
    secpol_step at = secpol_step_of(w->o, s);
    uint32_t c = s ? h2o_carried(&ds, at.kv) : 0;
    h2o_wstep st = {.s = s, .t = at.t, .pos = at.kv, .n = c + at.t};
    st.Rn = h2o_next(&ds, s ? PHASE_DECODE : PHASE_PREFILL, c, at.t, w->src, w->row);
    for (uint32_t l = 0; l < w->D; l++)
        for (uint32_t g = 0; g < w->Hkv; g++)
            walk_head(w, &st, l, g);
    w->R[1] = st.Rn;
}

static int walk_step(h2o_walk *w, uint32_t s, errbuf *e)
{
    const h2o_shape *cfg = w->cfg;
    walk_dense(w, s);
    secpol_step at = secpol_step_of(w->o, s);
    uint32_t c = s ? h2o_carried(cfg, at.kv) : 0;
    int phase = s ? PHASE_DECODE : PHASE_PREFILL;
    h2o_wstep st = {
        .s = s, .t = at.t, .pos = at.kv, .n = c + at.t, .sel = h2o_selects(cfg, phase, c, at.t)};
    st.first = cfg->recent ? cfg->sinks + w->hh + 1 : 0;
    st.nc = s ? w->hh + 1 : st.n - cfg->sinks - cfg->recent;
    st.per = s ? st.nc : w->hh * st.nc; /* one-hot values per KV head */
    if (st.sel && w->r->n_vals[s] != (size_t)(w->L - w->D) * w->Hkv * (st.per + st.nc))
        return err_set(e, MS_ERR_INTERNAL, "selection audit: step %u has %u values", s,
                       w->r->n_vals[s]);
    st.Rn = h2o_next(cfg, phase, c, at.t, w->src, w->row);
    for (uint32_t l = w->D; l < w->L; l++)
        for (uint32_t g = 0; g < w->Hkv; g++)
            walk_head(w, &st, l, g);
    w->R[0] = st.Rn;
    return MS_OK;
}

/* Walks steps × layers × KV heads twice, comparing each selection where it happens: the first
 * pass measures the score error over the candidates of equal kept sets, the second classifies
 * near ties with it. */
int h2o_secure_compare(const secpol_run *o, const h2o_shape *cfg, const secpol_opened *r,
                       const secpol_keep *plain, double tie_bound, h2o_sec_audit *out, errbuf *e)
{
    memset(out, 0, sizeof *out);
    if (!cfg || !r->vals)
        return err_set(e, MS_ERR_INPUT, "selection audit: no H2O run with the audit on");
    h2o_walk w;
    int rc = walk_new(&w, o, cfg, r, plain, tie_bound, out, e);
    if (!rc)
        rc = o->n_gen ? err_set(e, MS_ERR_INPUT, "selection audit: teacher-forced runs only")
                      : plain_scores(o, plain, cfg->last, &w.ps, e);
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (uint32_t s = 0; !rc && s < r->n_steps; s++) {
            if (s == 0 && pass == 1) { /* the counters count once */
                double err = out->score_err;
                memset(out, 0, sizeof *out);
                out->score_err = err;
                w.tie_bound = w.tie_bound < 0 ? 2 * err : w.tie_bound;
            }
            rc = walk_step(&w, s, e);
        }
    walk_free(&w);
    return rc;
}

static int h2o_sec_note(const void *cfg, const secpol_run *o, const secpol_opened *opened,
                        const secpol_keep *plain, const float *ref, const char *policy, FILE *out,
                        errbuf *e)
{
    const h2o_shape *sh = cfg;
    h2o_sec_audit sel;
    int rc = h2o_secure_compare(o, sh, opened, plain, -1, &sel, e);
    if (rc)
        return rc;
    char sinks[64] = "", kv[16] = ""; /* one per layer: the KV heads' scores summed */
    if (sh->shared)
        snprintf(kv, sizeof kv, "%u x ", o->model->n_kv_heads);
    if (sh->sinks)
        snprintf(sinks, sizeof sinks, ", sinks %u", sh->sinks);
    if (sh->dense)
        snprintf(sinks + strlen(sinks), sizeof sinks - strlen(sinks), ", dense layers %u",
                 sh->dense);
    if (sh->shared || sh->last)
        snprintf(sinks + strlen(sinks), sizeof sinks - strlen(sinks), "%s%s",
                 sh->last ? ", the newest row" : "", sh->shared ? ", one per layer" : "");
    fprintf(out,
            "#       %s selected on shares (heavy %u, recent %u%s); against the replay: prompt "
            "heavy sets %u/%u, "
            "evictions %u/%u, kept sets %u/%u\n",
            policy, sh->heavy, sh->recent, sinks, sel.prefill_same, sel.prefill_sets,
            sel.evict_same, sel.evictions, sel.kept_same, sel.kept_sets);
    fprintf(out,
            "#       secure scores within %.4f of the replay's; selections whose secure margin "
            "exceeds twice that: "
            "%u/%u equal to the replay's\n",
            sel.score_err, sel.separated_same, sel.separated);
    if (sel.differ_same_cand || sel.diverged)
        fprintf(out,
                "#       differing selections: %u from the same candidates, %u of them near ties "
                "(the replay's margin "
                "<= 2 x %s%.4f; largest %.4f); %u evictions after the kept sets differed\n",
                sel.differ_same_cand, sel.near_ties, kv, sel.score_err, sel.max_margin,
                sel.diverged);
    uint32_t bad = sel.own - sel.own_same - sel.own_ties;
    fprintf(out,
            "#       selections equal to their rule over the session's own scores (the prompt's "
            "top %u, each step's\n"
            "#       minimum evicted): %s (%u of %u: %u apart, %u exact ties at the boundary)\n",
            sh->heavy, bad ? "NO" : "yes", sel.own_same + sel.own_ties, sel.own, sel.own_same,
            sel.own_ties);
    return bad ? err_set(e, MS_ERR_INTERNAL,
                         "%u selections not their rule over the session's own scores", bad)
               : MS_OK;
}

const secpol_ops policy_h2o_secure = {
    .which = "",
    .own_query = 0,
    .config = h2o_sec_config,
    .config_free = free,
    .rows = h2o_sec_rows,
    .emit = h2o_sec_emit,
    .bind_public = h2o_sec_public,
    .node_new = h2o_sec_node_new,
    .node_free = h2o_sec_node_free,
    .bind = h2o_sec_bind,
    .update = h2o_sec_update,
    .audit_tensor = h2o_sec_audit_tensor,
    .audit_note = h2o_sec_note,
};
