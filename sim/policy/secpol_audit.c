/* secpol_audit.c — the audit of the selection on shares from a policy's emitted ops
 * (secpol_emit.c): which tensors each step opens, and the kept sets they give compared with the
 * plaintext replay's and with the policy's own select() over the session's opened values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "secpol_emit_int.h"

/* Whether an op of the decode step st (any layer's program: a policy may update every layer's
 * state in its last layer's, tova) writes the state tensor name. */
static int step_updates(const ecfg *c, const secpol_step *st, const char *name)
{
    int upd = 0;
    for (uint32_t l = 0; l < c->L && !upd; l++) {
        eprog x;
        errbuf e;
        if (!probe(c, PHASE_DECODE, l, st->kv, &x, &e)) {
            uint32_t t = op_tensor_find(&x.prog, name);
            for (size_t k = 0; t != OP_NONE && k < x.prog.n_ops && !upd; k++)
                upd = x.prog.ops[k].out == t && x.prog.ops[k].kind != OP_INPUT;
        }
        eprog_free(&x);
    }
    return upd;
}

/* The tensors opened after the prompt: each layer's prompt attention operand (what a select()
 * over the session's values observes); after a decode step, per layer that names a selection:
 * its rows, the cached [K | V] rows operand, its candidates' scores (when named), its rows'
 * score biases, its attention over its slots and its query operand (when read: a select() that
 * ranks by the query, Quest's, then selects from the session's own query). */
int secpol_emit_audit_tensor(const void *cfg, const secpol_run *r, const secpol_step *st, size_t i,
                             char name[48], int *is_score)
{
    const ecfg *c = cfg;
    size_t at = 0;
    for (uint32_t l = 0; !st->s && l < c->L; l++) { /* the prompt: its attention operands */
        eprog x;
        errbuf e;
        int rc = probe(c, PHASE_PREFILL, l, st->t, &x, &e);
        for (size_t k = 0; !rc && k < x.io.n_in; k++)
            if (x.io.in_what[k] == PCHECK_IN_PROMPT_ATT && at++ == i) {
                secpol_rename_tensor(name, x.prog.tens[x.io.in_t[k]].name);
                *is_score = 1;
                eprog_free(&x);
                return 1;
            }
        eprog_free(&x);
    }
    if (!st->s)
        return 0;
    for (uint32_t l = 0; l < c->L; l++) {
        eprog x;
        errbuf e;
        if (probe(c, PHASE_DECODE, l, st->kv, &x, &e) || !x.io.has_sel) {
            eprog_free(&x);
            continue;
        }
        uint32_t kvt = OP_NONE, att = OP_NONE, qt = OP_NONE;
        for (size_t k = 0; k < x.io.n_in; k++)
            if (x.io.in_what[k] == PCHECK_IN_KV)
                kvt = x.io.in_t[k];
            else if (x.io.in_what[k] == PCHECK_IN_ATT_SLOTS)
                att = x.io.in_t[k];
            else if (x.io.in_what[k] == PCHECK_IN_QUERY)
                qt = x.io.in_t[k];
        uint32_t bias = x.io.has_bias ? x.io.sel_bias : OP_NONE;
        uint32_t ts[6] = {x.io.sel_t, kvt, x.io.sel_score, bias, att, qt};
        for (int w = 0; w < 6; w++) {
            if (ts[w] >= x.prog.n_tens)
                continue;
            if (at++ == i) {
                /* the rows as the step attended them: when the step's own ops update the
                 * state it names (tova's compaction, after the softmax), its gathered copy;
                 * otherwise the selection itself (a row gather that gather: scores replaces
                 * is formed from its one-hot there: secinf.c) */
                int upd = w == 0 && x.io.sel_m && x.prog.tens[ts[0]].role == OPT_CACHE &&
                          step_updates(c, st, x.prog.tens[ts[0]].name);
                if (upd)
                    snprintf(name, 48, "L%u.s.rows", l);
                else
                    secpol_rename_tensor(name, x.prog.tens[ts[w]].name);
                *is_score = 1; /* decoded: equal rows stay equal */
                eprog_free(&x);
                return 1;
            }
        }
        eprog_free(&x);
    }
    return 0;
}

/* The secure side of one decode mask: the entries kept (public ones and the gathered rows'
 * matches among the opened cached rows), and the candidates' opened scores. */
typedef struct smask {
    int named, has_thr;
    uint32_t r0, r1, nsc;
    double tol, thr;  /* thr: a threshold's (pcheck_selection_threshold) */
    const double *sc; /* Hkv × (r1 − r0), or NULL */
} smask;

/* A kept set got against want: 0 equal, 1 different only by ties within tol (the opened scores
 * of the entries one side only kept within tol of each other; under a threshold, within tol of
 * it, whatever the counts), 2 different. */
static int same_set(const smask *m, uint32_t g, uint32_t Hkv, const uint8_t *want,
                    const uint8_t *got, uint32_t kv, double *gap)
{
    uint32_t n_want = 0, n_got = 0;
    double lo = 0, hi = 0, far = 0;
    int any = 0;
    for (uint32_t j = 0; j < kv; j++) {
        if (!want[j] == !got[j])
            continue;
        if (!m->sc || j < m->r0 || j >= m->r1 || m->nsc != (size_t)Hkv * (m->r1 - m->r0))
            return 2;
        double y = m->sc[(size_t)g * (m->r1 - m->r0) + j - m->r0];
        lo = !any || y < lo ? y : lo;
        hi = !any || y > hi ? y : hi;
        any = 1;
        n_want += want[j] != 0;
        n_got += want[j] == 0;
        far = fabs(y - m->thr) > far ? fabs(y - m->thr) : far;
    }
    if (!any)
        return 0;
    if (m->has_thr)
        n_got = n_want, lo = 0, hi = far;
    if (n_want != n_got || hi - lo > m->tol) {
        *gap = n_want == n_got ? -(hi - lo) : -INFINITY; /* the opened scores' spread */
        return 2;
    }
    *gap = hi - lo > *gap ? hi - lo : *gap;
    return 1;
}

/* The prompt attention the audit opened, per layer: (H, w, n) values of the last w prompt
 * queries over entries [0, n), or NULL. */
typedef struct oatt {
    const double *v;
    uint32_t w, n;
} oatt;

/* The decode attention the audit opened, per step and layer: (H, 1, m + 1) values over the
 * gathered rows, then the new entry (PCHECK_IN_ATT_SLOTS), and the cached position of each
 * gathered row per KV head (pos[g·m + i], UINT32_MAX: none), or a = NULL. */
typedef struct datt {
    const double *a;
    uint32_t m;
    uint32_t *pos;
    const double *q; /* the step's query operand opened (H × head_dim), or NULL */
    int sel;         /* the layer's ops name a selection at the step */
} datt;

/* The opened decode attention of the query at pos ≥ P in layer l, or NULL. */
static const datt *dec_att(const ecfg *c, const secpol_run *r, const datt *da, uint32_t S,
                           uint32_t l, uint32_t pos)
{
    uint32_t s = pos + 1 - r->prefill;
    if (!da || pos < r->prefill || s >= S || !da[(size_t)s * c->L + l].a)
        return NULL;
    return &da[(size_t)s * c->L + l];
}

/* The step's entry of layer l for the decode query at pos ≥ P, or NULL. */
static const datt *dec_step(const ecfg *c, const secpol_run *r, const datt *da, uint32_t S,
                            uint32_t l, uint32_t pos)
{
    uint32_t s = pos + 1 - r->prefill;
    return !da || pos < r->prefill || s >= S ? NULL : &da[(size_t)s * c->L + l];
}

static unsigned needs_at(const ecfg *c, uint32_t l, uint32_t pos)
{
    return c->p->layer_needs ? c->p->layer_needs(c->st_ref, l, pos)
           : c->p->needs     ? c->p->needs(c->st_ref, pos)
                             : ~0u;
}

/* Whether the query of layer l at decode position pos is known: opened where the layer's ops
 * select, not needed where they name no selection. */
static int query_ok(const ecfg *c, const secpol_run *r, const datt *da, uint32_t S, uint32_t l,
                    uint32_t pos)
{
    const datt *st = dec_step(c, r, da, S, l, pos);
    return st && (!st->sel || st->q);
}

/* Whether layer l's observation and selection at pos need nothing but keys, values, opened
 * attention and the opened query: a query where the layer's ops read it (they select), none
 * where they name no selection (every entry kept: a select() that keeps all without reading
 * its query agrees, any other is found to differ). */
static int replayable(const ecfg *c, const secpol_run *r, const oatt *att, const datt *da,
                      uint32_t S, uint32_t l, uint32_t pos)
{
    unsigned need = needs_at(c, l, pos);
    if (need & POLICY_NEED_Q) {
        if (!query_ok(c, r, da, S, l, pos))
            return 0;
        need &= ~(unsigned)POLICY_NEED_Q;
    }
    if (need & ~(POLICY_NEED_K | POLICY_NEED_V | POLICY_NEED_ATT))
        return 0;
    return !(need & POLICY_NEED_ATT) ||
           (pos < r->prefill && att[l].v && pos + att[l].w >= r->prefill) ||
           dec_att(c, r, da, S, l, pos);
}

/* The attention row of every query head at prompt position pos from the opened operand: its
 * columns where opened, NaN past them (a select() that read those would not agree). */
static void att_rows(const ecfg *c, const secpol_run *r, const oatt *a, uint32_t pos, float *out)
{
    uint32_t n = pos + 1, i = pos + a->w - r->prefill;
    for (uint32_t h = 0; h < c->H; h++)
        for (uint32_t j = 0; j < n; j++)
            out[(size_t)h * n + j] =
                j < a->n ? (float)a->v[((size_t)h * a->w + i) * a->n + j] : NAN;
}

/* The policy's own select() over the session's values: a fresh state observes every layer's
 * opened keys and values position by position (the last opened cached rows of the layer) and
 * the prompt attention the audit opened, and selects at every decode position from the opened
 * query (where it reads one); ref[((s·L + l)·Hkv + g)·N + j], and tol[s·L + l] the tie bound
 * its emit_cost states right after that select() (a bound that scales with the values it has
 * seen so far and with the step's query: keynorm's, Quest's). 0: done; 1: its select()
 * observes more than these (not replayable from what the audit opened). */
static int own_select(const ecfg *c, const secpol_run *r, const double *const *rows,
                      const uint32_t *rows_n, const oatt *att, const datt *da, uint32_t S,
                      uint8_t *ref, double *tol, uint32_t N, errbuf *e)
{
    uint32_t P = r->prefill, Hkv = c->Hkv, d = c->d, L = c->L;
    for (uint32_t pos = 0; pos < N; pos++)
        for (uint32_t l = 0; l < L; l++)
            if ((c->p->observe && !replayable(c, r, att, da, S, l, pos)) ||
                (pos >= P && (needs_at(c, l, pos) & POLICY_NEED_Q) &&
                 !query_ok(c, r, da, S, l, pos)))
                return 1;
    float *k = calloc((size_t)Hkv * d + 1, sizeof *k), *v = calloc((size_t)Hkv * d + 1, sizeof *v);
    float *ar = calloc((size_t)c->H * N + 1, sizeof *ar);
    float *qf = calloc((size_t)c->H * d + 1, sizeof *qf);
    uint8_t *keep = calloc((size_t)Hkv * N + 1, 1);
    int rc = k && v && ar && qf && keep
                 ? MS_OK
                 : err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    for (uint32_t pos = 0; !rc && pos < N; pos++) {
        if (pos == P && c->p->prefill)
            rc = c->p->prefill(c->st_ref, e);
        for (uint32_t l = 0; !rc && l < L; l++) {
            if (pos >= P) {
                /* its query: the session's, as the ops read it (zero where they select
                 * nothing: replayable) */
                const datt *st = dec_step(c, r, da, S, l, pos);
                int wants_q = (needs_at(c, l, pos) & POLICY_NEED_Q) != 0;
                for (size_t i = 0; wants_q && i < (size_t)c->H * d; i++)
                    qf[i] = st && st->q ? (float)st->q[i] : 0;
                rc = c->p->select(c->st_ref, l, pos, wants_q ? qf : NULL, keep, e);
                for (uint32_t g = 0; !rc && g < Hkv; g++)
                    memcpy(ref + (((size_t)(pos - P + 1) * L + l) * Hkv + g) * N,
                           keep + (size_t)g * pos, pos);
                eprog x;
                if (!rc && pos + 1 - P < S) {
                    rc = probe_with(c, c->st_ref, PHASE_DECODE, l, pos, &x, e);
                    tol[(size_t)(pos + 1 - P) * L + l] = rc ? 0 : x.io.sel_tol;
                    eprog_free(&x);
                }
            }
            if (rc || !c->p->observe)
                continue;
            for (uint32_t g = 0; g < Hkv; g++)
                for (uint32_t i = 0; i < d; i++) {
                    int have = rows[l] && pos < rows_n[l];
                    const double *row =
                        have ? rows[l] + ((size_t)g * rows_n[l] + pos) * 2 * d : NULL;
                    k[(size_t)g * d + i] = have ? (float)row[i] : 0;
                    v[(size_t)g * d + i] = have ? (float)row[d + i] : 0;
                }
            int has_att = pos < P && att[l].v && pos + att[l].w >= P;
            if (has_att)
                att_rows(c, r, &att[l], pos, ar);
            /* a decode step's: its attention over the gathered rows at their positions (0
             * elsewhere: the entries it did not attend), the new entry's at pos */
            const datt *dt = has_att ? NULL : dec_att(c, r, da, S, l, pos);
            for (uint32_t h = 0; dt && h < c->H; h++) {
                uint32_t g = h / (c->H / Hkv), n = pos + 1;
                float *row = ar + (size_t)h * n;
                for (uint32_t j = 0; j < n; j++)
                    row[j] = 0;
                for (uint32_t i = 0; i < dt->m; i++)
                    if (dt->pos[(size_t)g * dt->m + i] < pos)
                        row[dt->pos[(size_t)g * dt->m + i]] =
                            (float)dt->a[(size_t)h * (dt->m + 1) + i];
                row[pos] = (float)dt->a[(size_t)h * (dt->m + 1) + dt->m];
            }
            has_att |= dt != NULL;
            policy_obs o = {.layer = l, .pos = pos, .k = k, .v = v, .att = has_att ? ar : NULL};
            rc = c->p->observe(c->st_ref, &o, e);
        }
    }
    free(k), free(v), free(ar), free(qf), free(keep);
    return rc ? -rc : 0;
}

/* The session's cached keys (the last opened cached rows of each layer) against the float
 * model's under the replay's keep masks: the largest difference per layer. */
typedef struct kdrift {
    const secpol_keep *k;
    const double *const *rows;
    const uint32_t *rows_n;
    uint32_t Hkv, d;
    double err[16];
} kdrift;
static int kd_mask(void *ctx, uint32_t layer, uint32_t g, uint32_t pos, uint8_t *mask)
{
    kdrift *c = ctx;
    return secpol_keep_attend(c->k, layer, g, pos, mask);
}
static void kd_layer(void *ctx, const llama_layer_view *v)
{
    kdrift *c = ctx;
    if (v->layer >= 16 || !c->rows[v->layer] || v->pos >= c->rows_n[v->layer])
        return;
    for (uint32_t g = 0; g < c->Hkv; g++)
        for (uint32_t i = 0; i < c->d; i++) {
            double a = c->rows[v->layer][((size_t)g * c->rows_n[v->layer] + v->pos) * 2 * c->d + i];
            double x = fabs(a - v->k[g * c->d + i]);
            if (x > c->err[v->layer])
                c->err[v->layer] = x;
        }
}

int secpol_emit_audit_note(const void *cfg, const secpol_run *r, const secpol_opened *opened,
                           const secpol_keep *plain, const float *ref, const char *policy,
                           FILE *out, errbuf *e)
{
    const ecfg *c = cfg;
    uint32_t Hkv = c->Hkv, d = c->d, L = c->L, S = opened->n_steps, N = r->n_tokens + r->n_gen;
    size_t n_masks = (size_t)S * L * Hkv;
    uint8_t *got = calloc(n_masks * N + 1, 1), *own = calloc(n_masks * N + 1, 1);
    smask *sm = calloc(n_masks + 1, sizeof *sm);
    const double **last = calloc(L, sizeof *last);
    uint32_t *last_n = calloc(L, sizeof *last_n);
    eprog *xs = calloc((size_t)S * L + 1, sizeof *xs);
    double **packs = calloc((size_t)S * L + 1, sizeof *packs);
    int rc = got && own && sm && last && last_n && xs && packs
                 ? MS_OK
                 : err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    oatt *att = calloc(L + 1, sizeof *att);
    datt *da = calloc((size_t)S * L + 1, sizeof *da);
    if (!rc && (!att || !da))
        rc = err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    char unnamed[400] = "", stray[300] = "";
    /* the prompt attention operands opened after the prompt */
    const double *av = S && !rc ? opened->vals[0] : NULL;
    size_t a_left = S && !rc ? opened->n_vals[0] : 0;
    for (uint32_t l = 0; av && !rc && l < L; l++) {
        eprog x;
        if ((rc = probe(c, PHASE_PREFILL, l, r->prefill, &x, e)))
            break;
        for (size_t k = 0; k < x.io.n_in; k++) {
            const op_tensor *T = &x.prog.tens[x.io.in_t[k]];
            size_t n = (size_t)T->batch * T->rows * T->cols;
            if (x.io.in_what[k] != PCHECK_IN_PROMPT_ATT)
                continue;
            if (n > a_left) {
                rc = err_set(e, MS_ERR_INTERNAL, "selection audit: the prompt opened %u values",
                             opened->n_vals[0]);
                break;
            }
            att[l] = (oatt){av, T->rows, T->cols};
            av += n, a_left -= n;
        }
        eprog_free(&x);
    }
    /* the secure masks from the opened rows */
    for (uint32_t s = 1; !rc && s < S; s++) {
        uint32_t kv = secpol_step_of(r, s).kv;
        const double *v = opened->vals[s];
        size_t left = opened->n_vals[s];
        for (uint32_t l = 0; !rc && l < L; l++) {
            eprog *x = &xs[(size_t)s * L + l];
            if ((rc = probe(c, PHASE_DECODE, l, kv, x, e)))
                break;
            const pcheck_decl *io = &x->io;
            smask m = {.named = io->has_sel,
                       .has_thr = io->has_thr,
                       .r0 = kv,
                       .r1 = kv,
                       .tol = io->sel_tol,
                       .thr = io->sel_thr};
            da[(size_t)s * L + l].sel = io->has_sel;
            const double *sel = NULL, *kvv = NULL, *bias = NULL;
            if (io->has_sel) {
                const op_tensor *T = &x->prog.tens[io->sel_t];
                uint32_t R = kv; /* the cached rows operand's rows (past kv: padding) */
                for (size_t k = 0; k < io->n_in; k++)
                    if (io->in_what[k] == PCHECK_IN_KV)
                        R = x->prog.tens[io->in_t[k]].rows;
                size_t nsel = (size_t)T->batch * T->rows * T->cols, nkv = (size_t)Hkv * R * 2 * d;
                const op_tensor *U =
                    io->sel_score < x->prog.n_tens ? &x->prog.tens[io->sel_score] : NULL;
                const op_tensor *Bt = io->has_bias ? &x->prog.tens[io->sel_bias] : NULL;
                size_t nb = Bt ? (size_t)Bt->batch * Bt->rows * Bt->cols : 0, na = 0, nq = 0;
                for (size_t k = 0; k < io->n_in; k++)
                    if (io->in_what[k] == PCHECK_IN_ATT_SLOTS)
                        na = (size_t)c->H * (io->sel_m + 1);
                    else if (io->in_what[k] == PCHECK_IN_QUERY)
                        nq = (size_t)c->H * d;
                m.nsc = U ? U->batch * U->rows * U->cols : 0;
                if (nsel + nkv + m.nsc + nb + na + nq > left || R < kv) {
                    rc = err_set(e, MS_ERR_INTERNAL, "selection audit: step %u opened %u values", s,
                                 opened->n_vals[s]);
                    break;
                }
                sel = v, kvv = v + nsel, m.sc = m.nsc ? v + nsel + nkv : NULL;
                bias = nb ? v + nsel + nkv + m.nsc : NULL;
                datt *dt = &da[(size_t)s * L + l];
                dt->pos = na ? malloc(((size_t)Hkv * io->sel_m + 1) * sizeof *dt->pos) : NULL;
                if (na && !dt->pos) {
                    rc = err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
                    break;
                }
                for (size_t k = 0; dt->pos && k < (size_t)Hkv * io->sel_m; k++)
                    dt->pos[k] = UINT32_MAX;
                dt->a = na ? v + nsel + nkv + m.nsc + nb : NULL, dt->m = io->sel_m;
                dt->q = nq ? v + nsel + nkv + m.nsc + nb + na : NULL;
                v += nsel + nkv + m.nsc + nb + na + nq, left -= nsel + nkv + m.nsc + nb + na + nq;
                if (R > kv) { /* the cached rows alone, (Hkv, kv, 2d) */
                    double *pk = malloc((size_t)Hkv * kv * 2 * d * sizeof *pk + 1);
                    if (!pk) {
                        rc = err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
                        break;
                    }
                    for (uint32_t g = 0; g < Hkv; g++)
                        memcpy(pk + (size_t)g * kv * 2 * d, kvv + (size_t)g * R * 2 * d,
                               (size_t)kv * 2 * d * sizeof *pk);
                    packs[(size_t)s * L + l] = pk;
                    kvv = pk;
                }
                m.r0 = io->sel_r0, m.r1 = io->sel_r1 < kv ? io->sel_r1 : kv;
                last[l] = kvv, last_n[l] = kv;
            }
            for (uint32_t g = 0; g < Hkv; g++) {
                size_t at = ((size_t)s * L + l) * Hkv + g;
                uint8_t *gm = got + at * N;
                sm[at] = m;
                for (uint32_t j = 0; j < kv; j++)
                    gm[j] = j < m.r0 || j >= m.r1;
                for (uint32_t i = 0; i < io->sel_m && sel; i++) {
                    const double *row = sel + ((size_t)g * io->sel_m + i) * 2 * d;
                    /* a row of padding: its scores biased out of the attention */
                    if (bias &&
                        bias[(size_t)g * (c->H / Hkv) * io->sel_m + i] < -PCHECK_PAD_BIAS / 2)
                        continue;
                    uint32_t j = m.r0;
                    while (j < m.r1 && (gm[j] || memcmp(row, kvv + ((size_t)g * kv + j) * 2 * d,
                                                        2 * d * sizeof *row)))
                        j++;
                    if (j < m.r1 && da[(size_t)s * L + l].pos)
                        da[(size_t)s * L + l].pos[(size_t)g * io->sel_m + i] = j;
                    if (j < m.r1)
                        gm[j] = 1;
                    else if (!stray[0]) /* the session attends every gathered row */
                        snprintf(stray, sizeof stray,
                                 "policy %s: row %u of its selection at layer %u, KV head %u, "
                                 "decode position %u is none of its candidates' cached rows (an "
                                 "empty slot, a mixture, or one gathered twice), and the session "
                                 "attends it",
                                 policy, i, l, g, kv);
                }
                const uint8_t *want = secpol_keep_mask(plain, kv, l, g);
                for (uint32_t j = 0; want && !io->has_sel && !unnamed[0] && j < kv; j++)
                    if (!want[j])
                        snprintf(unnamed, sizeof unnamed,
                                 "policy %s: cost declared, no secure selection: its select() "
                                 "drops cached entries (layer %u, decode position %u) and its "
                                 "emit_cost names no selection\n  hint: name the rows its decode "
                                 "step gathers (api->selection in a plug-in, pcheck_selection in "
                                 "the tree)",
                                 policy, l, kv);
            }
        }
    }
    /* against the plaintext replay, and against its own select() on the session's values */
    kdrift dk = {.k = plain, .rows = last, .rows_n = last_n, .Hkv = Hkv, .d = d};
    llama_hooks hk = {.ctx = &dk, .on_layer = kd_layer, .attend_mask = kd_mask};
    llama *pm = NULL;
    if (!rc)
        rc = secpol_audit_forward(r, &hk, &pm, e);
    uint32_t worst = 0;
    for (uint32_t l = 1; l < L && l < 16; l++)
        worst = dk.err[l] > dk.err[worst] ? l : worst;
    double *tol = rc ? NULL : calloc((size_t)S * L + 1, sizeof *tol);
    if (!rc && !tol)
        rc = err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    int own_rc = rc ? 0 : own_select(c, r, last, last_n, att, da, S, own, tol, N, e);
    if (own_rc < 0)
        rc = -own_rc;
    /* the tie tolerance its emit_cost states at each step once its state has observed the
     * session's values up to it (a bound that scales with them and with the step's query) */
    for (uint32_t s = 1; !rc && own_rc == 0 && s < S; s++)
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t g = 0; g < Hkv; g++) {
                smask *m = &sm[((size_t)s * L + l) * Hkv + g];
                m->tol = tol[(size_t)s * L + l] > m->tol ? tol[(size_t)s * L + l] : m->tol;
            }
    free(tol);
    size_t rep[3] = {0}, mine[3] = {0}, n = 0;
    double rep_gap = 0, own_gap = 0;
    char first[200] = "", first_own[200] = "";
    for (uint32_t s = 1; !rc && s < S; s++) {
        uint32_t kv = secpol_step_of(r, s).kv;
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t g = 0; g < Hkv; g++) {
                size_t at = ((size_t)s * L + l) * Hkv + g;
                const uint8_t *want = secpol_keep_mask(plain, kv, l, g);
                if (!want)
                    continue;
                n++;
                double gap = rep_gap;
                int x = same_set(&sm[at], g, Hkv, want, got + at * N, kv, &gap);
                rep[x]++;
                if (x == 1)
                    rep_gap = gap;
                if (x == 2 && !first[0] && gap > -INFINITY)
                    snprintf(first, sizeof first,
                             "layer %u, KV head %u, decode position %u, where the swapped entries' "
                             "opened scores are %.3g apart",
                             l, g, kv, -gap);
                else if (x == 2 && !first[0])
                    snprintf(first, sizeof first, "layer %u, KV head %u, decode position %u", l, g,
                             kv);
                if (own_rc == 0) {
                    double og = own_gap;
                    x = same_set(&sm[at], g, Hkv, own + at * N, got + at * N, kv, &og);
                    mine[x]++;
                    own_gap = x == 1 ? og : own_gap;
                    if (x == 2 && !first_own[0])
                        snprintf(first_own, sizeof first_own,
                                 "layer %u, KV head %u, decode position %u", l, g, kv);
                }
            }
    }
    for (size_t i = 0; xs && i < (size_t)S * L; i++)
        eprog_free(&xs[i]);
    int drift = last && last[worst];
    for (size_t i = 0; packs && i < (size_t)S * L; i++)
        free(packs[i]);
    for (size_t i = 0; da && i < (size_t)S * L; i++)
        free(da[i].pos);
    free(got), free(own), free(sm), free(last), free(last_n), free(xs), free(packs), free(att);
    free(da);
    if (rc)
        return rc;
    /* a composition running another policy's ops (compose_tova.c) names both */
    int other = strcmp(c->name, policy) != 0;
    fprintf(out,
            "#       selection on shares from %s's own emitted ops%s%s%s (the selection opened "
            "for the audit only), %zu decode masks (layer x KV head x step):\n",
            c->name, other ? " with " : "", other ? policy : "", other ? "'s parameters" : "", n);
    if (!n) /* --accuracy N counts the prompt; a step selects only past the policy's budget */
        fprintf(out, "#       nothing to compare: no decode step of this run selected (N - P "
                     "decode steps ran for --accuracy N, --prompt P; a step selects once more "
                     "entries are cached than the policy keeps): raise --accuracy\n");
    else if (own_rc == 0)
        fprintf(out,
                "#       equal to its select() over the session's own keys and values: %s (%zu "
                "equal, %zu ties within its stated tolerance, largest gap %.3g, %zu differ%s%s)\n",
                mine[2] ? "NO" : "yes", mine[0], mine[1], own_gap, mine[2],
                first_own[0] ? "; first: " : "", first_own);
    else
        fprintf(out, "#       its select() observes more than keys, values and the prompt "
                     "attention its ops read: compared with the plaintext replay only\n");
    if (n)
        fprintf(out,
                "#       equal to the plaintext replay's (float model): %s (%zu equal, %zu ties "
                "within its stated tolerance, %zu differ%s%s)\n",
                rep[2] ? "no" : "yes", rep[0], rep[1], rep[2], first[0] ? "; first: " : "", first);
    if (drift)
        fprintf(out,
                "#       the session's cached keys differ from the float model's by up to %.3g "
                "(layer %u)%s\n",
                dk.err[worst], worst,
                rep[2] && own_rc == 0 && !mine[2]
                    ? ": the replay's differences are the two models' values, not the selection"
                    : "");
    if (unnamed[0] || stray[0])
        return err_set(e, MS_ERR_INPUT, "%s", unnamed[0] ? unnamed : stray);
    if (own_rc == 0 ? mine[2] != 0 : rep[2] != 0)
        return err_set(e, MS_ERR_INPUT, "the selection on shares differs from its select()'s");
    return MS_OK;
}
