/* scoreside.c — the score side of a selection on shares in the secure session (scoreside.h).
 *
 * Per layer whose policy gathers R = m·U rows of its table of C = k·U candidates (units of U
 * rows, each 2d + e wide: K, V and e carried columns) by a secret one-hot (Hkv, m, k):
 * The layer may attend P public entries beside them (a composition's sinks and recent window):
 * the session lays its cache out as [new entry | P public | R gathered] (sim/policy/
 * secpol_emit.c), the public rows filled from the stored cache at public positions; they need
 * no gather, so their scores and values join the candidates' directly.
 *   before the gather's place — K and V of the new entry, the public entries and every
 *     candidate (rows 0 … P + C of (Hkv, P + C + 1, d), re-layouts of the cache's rows 0 … P
 *     and of the table), q·Kᵀ over them (the lowering's own matmul, P + C + 1 columns), the
 *     candidates' scores by unit with their carried columns (Hkv, k, U·(G + e)), GATHER by the
 *     one-hot (the gather's own flags and category), the layer's scores (H, 1, P + R + 1) as
 *     [new entry | public entries | kept entries] and the policy's rows tensor as zeros with
 *     the kept carried columns;
 *   the layer's score biases (MPCache's mask, a page's padding) and softmax stay as spliced;
 *   in place of ·V — the kept probabilities by unit (Hkv, m, U·G), GATHER by the transposed
 *     one-hot (k, m) back to every candidate, [new entry | public | candidates] · V over
 *     P + C + 1 rows.
 * The secret products and their shapes are those models/lower.c attend_scores costs
 * (G·(P+C+1) scores, m·U·(G + e) gathered, (P + R + 1)-wide softmax, k·U·G scattered, ·V over
 * P + C + 1); every re-layout between them is a VIEW (local). The places of the new and the
 * public entries in the rows (first here, around the candidates in the lowering) change no
 * count. */
#include "scoreside.h"

#include <stdlib.h>
#include <string.h>

#include "models/lower.h"
#include "protocols/program/opb.h"

/* Drops op i of p. */
static void drop_op(op_program *p, size_t i)
{
    memmove(&p->ops[i], &p->ops[i + 1], (p->n_ops - 1 - i) * sizeof *p->ops);
    p->n_ops--;
}

/* Moves ops [from, n_ops) to index at (before the op there). */
static int move_ops(op_program *p, size_t at, size_t from)
{
    size_t k = p->n_ops - from;
    if (!k || at >= from)
        return MS_OK;
    op *tmp = malloc(k * sizeof *tmp);
    if (!tmp)
        return MS_ERR_NOMEM;
    memcpy(tmp, &p->ops[from], k * sizeof *tmp);
    memmove(&p->ops[at + k], &p->ops[at], (from - at) * sizeof *tmp);
    memcpy(&p->ops[at], tmp, k * sizeof *tmp);
    free(tmp);
    return MS_OK;
}

static long find_op(const op_program *p, int kind, uint32_t out)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].kind == kind && p->ops[i].out == out)
            return (long)i;
    return -1;
}

/* A same-sized copy of x as a new tensor nm (B, R, C): a reshape (local). */
static uint32_t reshape(opb *w, uint32_t x, uint32_t B, uint32_t R, uint32_t C, const char *nm)
{
    uint32_t y = opb_tensor(w, nm, OPT_TEMP, B, R, C);
    return opb_op(w, OP_VIEW, B, R, 0, C, x, OP_NONE, OP_NONE, y, 0, 0, 0);
}

/* An op like proto with other operands, shapes and result (its kind, flags, category, phase,
 * layer and group kept). */
static uint32_t like(op_program *p, int *failed, const op *proto, uint32_t m, uint32_t k,
                     uint32_t n, uint32_t in0, uint32_t in1, uint32_t out)
{
    op o = *proto;
    o.m = m, o.k = k, o.n = n, o.in[0] = in0, o.in[1] = in1, o.out = out;
    if (in0 == OP_NONE || in1 == OP_NONE || out == OP_NONE || op_emit(p, &o) < 0)
        *failed = 1;
    return out;
}

/* The shapes of one layer's score side. */
typedef struct side {
    uint32_t l, H, Hkv, G, d, w, e, U, m, k, C, R;
    uint32_t P; /* public entries attended beside the gathered rows (cache rows 1 … P) */
    uint32_t kc, vc, sc, ctx;
    op g, qk, pv; /* the row gather, q·Kᵀ, ·V as spliced */
} side;

/* Before the gather's place: K, V of [new | public | candidates], the scores, the kept ones
 * gathered, the layer's scores and the policy's rows tensor. Returns V's tensor (OP_NONE:
 * failed). */
static uint32_t block_scores(op_program *p, const side *s, opb *w, int *failed)
{
    uint32_t Hkv = s->Hkv, H = s->H, G = s->G, d = s->d, C = s->C, R = s->R, e = s->e, U = s->U;
    uint32_t F = 1 + s->P; /* the new entry and the public ones: the cache's first rows */
    uint32_t tv = reshape(w, s->g.in[1], Hkv, C, s->w, "tab_rows");
    uint32_t tt = opb_transpose(w, tv, Hkv, C, s->w, "tab_t");
    uint32_t kv[2];
    for (int j = 0; j < 2; j++) {
        uint32_t part = opb_rows(w, tt, Hkv, j * d, d, C, j ? "v_t" : "k_t");
        uint32_t all = opb_tensor(w, j ? "vall" : "kall", OPT_TEMP, Hkv, F + C, d);
        opb_put(w, opb_rows(w, j ? s->vc : s->kc, Hkv, 0, F, d, j ? "v_new" : "k_new"), all, Hkv, 0,
                F, d);
        opb_put(w, opb_transpose(w, part, Hkv, d, C, j ? "v_cand" : "k_cand"), all, Hkv, F, C, d);
        kv[j] = all;
    }
    /* COST: q·Kᵀ over the new entry, the public ones and every candidate (lower.c
     * attend_scores) */
    uint32_t S = opb_tensor(w, "scores_all", OPT_TEMP, H, 1, F + C);
    like(p, failed, &s->qk, s->qk.m, s->qk.k, F + C, s->qk.in[0], kv[0], S);
    /* the candidates' scores by KV head (Hkv, C, G), their carried columns beside them */
    uint32_t st =
        opb_transpose(w, reshape(w, S, Hkv, G, F + C, "scores_g"), Hkv, G, F + C, "scores_t");
    uint32_t cand = opb_rows(w, st, Hkv, F, C, G, "cand_s");
    if (e) {
        uint32_t a = opb_tensor(w, "cand_t", OPT_TEMP, Hkv, G + e, C);
        opb_put(w, opb_transpose(w, cand, Hkv, C, G, "cand_st"), a, Hkv, 0, G, C);
        opb_put(w, opb_rows(w, tt, Hkv, 2 * d, e, C, "carried"), a, Hkv, G, e, C);
        cand = opb_transpose(w, a, Hkv, G + e, C, "cand_e");
    }
    cand = reshape(w, cand, Hkv, s->k, U * (G + e), "cand");
    /* COST: the kept units' scores, one-hot · scores (the row gather's one-hot) */
    uint32_t kept = opb_tensor(w, "kept", OPT_TEMP, Hkv, s->m, U * (G + e));
    like(p, failed, &s->g, s->m, s->k, U * (G + e), s->g.in[0], cand, kept);
    uint32_t kt =
        opb_transpose(w, reshape(w, kept, Hkv, R, G + e, "kept_r"), Hkv, R, G + e, "kept_t");
    /* the layer's scores (H, 1, F + R): the new and public entries', then the kept entries' */
    uint32_t col = opb_tensor(w, "sc_col", OPT_TEMP, H, F + R, 1);
    opb_put(w, opb_rows(w, reshape(w, S, H, F + C, 1, "scores_col"), H, 0, F, 1, "sc_new"), col, H,
            0, F, 1);
    opb_put(w, reshape(w, opb_rows(w, kt, Hkv, 0, G, R, "kept_s"), H, R, 1, "sc_kept"), col, H, F,
            R, 1);
    opb_op(w, OP_VIEW, H, 1, 0, F + R, col, OP_NONE, OP_NONE, s->sc, 0, 0, 0);
    /* the policy's rows: zero, but for the kept carried columns (a spare row makes the zeros) */
    uint32_t rt = opb_tensor(w, "rows_t", OPT_TEMP, Hkv, s->w + 1, R);
    opb_put(w, opb_rows(w, kt, Hkv, 0, 1, R, "spare"), rt, Hkv, s->w, 1, R);
    if (e)
        opb_put(w, opb_rows(w, kt, Hkv, G, e, R, "kept_e"), rt, Hkv, 2 * d, e, R);
    uint32_t rz =
        opb_transpose(w, opb_rows(w, rt, Hkv, 0, s->w, R, "rows_z"), Hkv, s->w, R, "rows_zt");
    opb_op(w, OP_VIEW, Hkv, s->m, 0, U * s->w, rz, OP_NONE, OP_NONE, s->g.out, 0, 0, 0);
    return kv[1];
}

/* In place of ·V: the kept probabilities scattered back to every candidate, ·V over them, the
 * new and public entries' as they are. */
static void block_values(op_program *p, const side *s, opb *w, uint32_t vall, int *failed)
{
    uint32_t Hkv = s->Hkv, H = s->H, G = s->G, C = s->C, R = s->R, U = s->U, F = 1 + s->P;
    uint32_t pc = reshape(w, s->sc, H, F + R, 1, "probs_col");
    uint32_t pk = reshape(w, opb_rows(w, pc, H, F, R, 1, "probs_k"), Hkv, G, R, "probs_g");
    uint32_t pu =
        reshape(w, opb_transpose(w, pk, Hkv, G, R, "probs_t"), Hkv, s->m, U * G, "probs_units");
    uint32_t oht = opb_transpose(w, s->g.in[0], Hkv, s->m, s->k, "onehot_t");
    /* COST: scattered back to every candidate by the transposed one-hot */
    uint32_t back = opb_tensor(w, "probs_back", OPT_TEMP, Hkv, s->k, U * G);
    like(p, failed, &s->g, s->k, s->m, U * G, oht, pu, back);
    uint32_t bt = opb_transpose(w, reshape(w, back, Hkv, C, G, "back_r"), Hkv, C, G, "back_t");
    uint32_t pa = opb_tensor(w, "probs_all_c", OPT_TEMP, H, F + C, 1);
    opb_put(w, opb_rows(w, pc, H, 0, F, 1, "probs_new"), pa, H, 0, F, 1);
    opb_put(w, reshape(w, bt, H, C, 1, "back_h"), pa, H, F, C, 1);
    pa = reshape(w, pa, H, 1, F + C, "probs_all");
    /* COST: ·V over the new entry, the public ones and every candidate */
    like(p, failed, &s->pv, s->pv.m, F + C, s->pv.n, pa, vall, s->ctx);
}

/* Layer l's shapes and ops, from its row gather at index gi. */
static int side_of(const model_cfg *m, const op_program *p, size_t gi, side *s, errbuf *e)
{
    memset(s, 0, sizeof *s);
    s->g = p->ops[gi];
    s->l = (uint32_t)s->g.layer;
    s->H = m->n_heads, s->Hkv = m->n_kv_heads, s->G = s->H / s->Hkv, s->d = m->head_dim;
    s->w = lower_score_gather_width(m, 1, &s->g);
    s->e = s->w - 2 * s->d, s->U = s->g.n / s->w, s->m = s->g.m, s->k = s->g.k;
    s->C = s->k * s->U, s->R = s->m * s->U;
    s->kc = op_layer_find(p, (int)s->l, "kcache"), s->vc = op_layer_find(p, (int)s->l, "vcache");
    s->sc = op_layer_find(p, (int)s->l, "scores"), s->ctx = op_layer_find(p, (int)s->l, "ctx");
    long qi = s->sc == OP_NONE ? -1 : find_op(p, OP_MATMUL, s->sc);
    long vi = s->ctx == OP_NONE ? -1 : find_op(p, OP_MATMUL, s->ctx);
    if (s->kc == OP_NONE || s->vc == OP_NONE || qi < 0 || vi < 0)
        return err_set(e, MS_ERR_INTERNAL, "secure inference: layer %u has no attention", s->l);
    s->qk = p->ops[qi], s->pv = p->ops[vi];
    const op_tensor *S = &p->tens[s->sc], *T = &p->tens[s->g.in[1]];
    if ((size_t)T->batch * T->rows * T->cols != (size_t)s->Hkv * s->k * s->g.n)
        return err_set(e, MS_ERR_INPUT,
                       "secure inference: gather: scores: layer %u's table %s is not the %u "
                       "units its one-hot spans",
                       s->l, T->name, s->k);
    /* the public entries: the cache's rows 1 … P, between the new entry and the gathered rows */
    const op_tensor *K = &p->tens[s->kc], *V = &p->tens[s->vc];
    s->P = S->cols > s->R + 1 ? S->cols - s->R - 1 : 0;
    if (S->batch != s->H || S->rows != 1 || S->cols != s->P + s->R + 1 || s->g.batch != s->Hkv ||
        K->batch != s->Hkv || K->rows < S->cols || K->cols != s->d || V->batch != s->Hkv ||
        V->rows < S->cols || V->cols != s->d)
        return err_set(e, MS_ERR_INPUT,
                       "secure inference: gather: scores: layer %u attends %u entries, fewer "
                       "than the %u rows its selection gathers (%s) and the new entry, or not "
                       "as its cache (%u x %u x %u) lays them out",
                       s->l, S->cols, s->R, p->tens[s->g.out].name, K->batch, K->rows, K->cols);
    return MS_OK;
}

/* Layer l's rewrite (side_of's s): block_scores at the gather's place, block_values at ·V's. */
static int rewrite(op_program *p, const side *s, size_t gi, errbuf *e)
{
    opb w;
    opb_init(&w, p, PHASE_DECODE, (int)s->l, OPC_ATTENTION, "sc.");
    int failed = 0;
    size_t from = p->n_ops;
    uint32_t vall = block_scores(p, s, &w, &failed);
    drop_op(p, gi);
    from--;
    if (failed || opb_failed(&w) || move_ops(p, gi, from))
        return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory (score side)");
    long qi = find_op(p, OP_MATMUL, s->sc);
    if (qi >= 0)
        drop_op(p, (size_t)qi);
    from = p->n_ops;
    block_values(p, s, &w, vall, &failed);
    long vi = find_op(p, OP_MATMUL, s->ctx);
    if (failed || opb_failed(&w) || vi < 0 || (size_t)vi >= from)
        return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory (score side)");
    drop_op(p, (size_t)vi);
    from--;
    return move_ops(p, (size_t)vi, from)
               ? err_set(e, MS_ERR_NOMEM, "secure inference: out of memory (score side)")
               : MS_OK;
}

int scoreside_apply(const model_cfg *m, op_program *p, scoreside_gather **g, size_t *n_g, errbuf *e)
{
    if (g)
        *g = NULL, *n_g = 0;
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        size_t gi = 0;
        while (gi < p->n_ops &&
               !(p->ops[gi].layer == (int16_t)l && lower_score_gather_width(m, 1, &p->ops[gi])))
            gi++;
        if (gi == p->n_ops)
            continue;
        side s;
        rc = side_of(m, p, gi, &s, e);
        if (!rc)
            rc = rewrite(p, &s, gi, e);
        if (!rc && g) {
            scoreside_gather *ng = realloc(*g, (*n_g + 1) * sizeof *ng);
            if (!ng)
                return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
            *g = ng;
            ng[(*n_g)++] =
                (scoreside_gather){s.g.out, s.g.in[0], s.g.in[1], s.g.batch, s.g.m, s.g.k, s.g.n};
        }
    }
    return rc;
}

void scoreside_rows(const scoreside_gather *g, uint32_t table_batch, const uint64_t *oh,
                    const uint64_t *tab, uint64_t *out)
{
    uint32_t per = table_batch && g->b % table_batch == 0 ? g->b / table_batch : 1;
    for (uint32_t b = 0; b < g->b; b++)
        for (uint32_t i = 0; i < g->m; i++)
            for (uint32_t c = 0; c < g->n; c++) {
                uint64_t acc = 0;
                for (uint32_t j = 0; j < g->k; j++)
                    acc += oh[((size_t)b * g->m + i) * g->k + j] *
                           tab[((size_t)(b / per) * g->k + j) * g->n + c];
                out[((size_t)b * g->m + i) * g->n + c] = acc;
            }
}
