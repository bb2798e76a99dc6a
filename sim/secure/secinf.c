/* secinf.c — secure inference of stories260K on the real backend (secinf.h). */
#include "secinf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocols/program/kern.h"
#include "models/lower.h"
#include "sim/policy/policy.h"
#include "sim/policy/secpol.h"

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

/* MPCache: the entries of K' of layer l before a decode step at kv cached entries — the whole
 * cache, or after a threshold prompt the revealed count plus the generated entries. */
static uint32_t mpc_n(const secinf_opts *o, uint32_t l, uint32_t kv)
{
    const mpcache_shape *sh = &o->spol.mpc;
    if (sh->static_mode != 0 || mpcache_layer_kind(sh, l) == MPCACHE_LAYER_DENSE || !o->spol.static_count)
        return kv;
    return o->spol.static_count[l] + (kv - o->prefill);
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

/* H2O on shares: the shapes of its ops, and the carried rows at kv cached entries (public:
 * the prompt keeps min(P, heavy + recent), each step adds one and evicts down to the budget). */
static h2o_shape spol_shape(const secinf_opts *o)
{
    const model_cfg *m = o->model;
    return (h2o_shape){m->n_heads, m->n_kv_heads, m->head_dim, o->spol.heavy, o->spol.recent};
}

static uint32_t spol_rows(const secinf_opts *o, uint32_t kv)
{
    uint64_t b = (uint64_t)o->spol.heavy + o->spol.recent;
    return kv < b ? kv : (uint32_t)b;
}

/* The lowering's `kept` for the decode step at kv cached entries: per layer and KV head. */
static void step_kept(const secinf_opts *o, uint32_t kv, uint32_t *kept)
{
    const model_cfg *m = o->model;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        uint32_t rows = o->spol.kind == SECINF_SPOL_MPCACHE
                            ? mpcache_attend_rows(&o->spol.mpc, l, mpc_n(o, l, kv)) : 0;
        for (uint32_t g = 0; g < m->n_kv_heads; g++)
            kept[l * m->n_kv_heads + g] = o->spol.kind == SECINF_SPOL_MPCACHE ? rows
                                          : o->spol.kind ? spol_rows(o, kv) : kept_of(o->keep, kv, l, g, NULL);
    }
}

/* Under a policy, a decode step's cache tensor holds the new entry at row 0 and head g's kept
 * entries at rows 1 … kept_g; the layer attends to its leading max_g kept_g + 1 rows (lower.c),
 * the rows past a shorter head's own masked (pad_mask). A single query attends to a set: the
 * order does not matter. */
static int policy_layout(const secinf_opts *o, uint32_t s)
{
    return (o->keep || o->spol.kind) && s > 0;
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

/* The policy's selection on shares after the lowered step (secpol.h): each layer's upkeep on
 * its attention's softmax output and caches, then the selection of every layer at once. */
static int spol_emit(const secinf_opts *o, const lower_opts *lo, op_program *p, errbuf *e)
{
    const model_cfg *m = o->model;
    h2o_shape sh = spol_shape(o);
    uint32_t c = lo->phase == PHASE_DECODE ? spol_rows(o, lo->kv_len) : 0;
    h2o_ids *lay = calloc(m->n_layers, sizeof *lay);
    int rc = lay ? MS_OK : err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    char nm[3][48];
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        snprintf(nm[0], sizeof nm[0], "L%u.scores", l);
        snprintf(nm[1], sizeof nm[1], "L%u.kcache", l);
        snprintf(nm[2], sizeof nm[2], "L%u.vcache", l);
        uint32_t pr = op_tensor_find(p, nm[0]), kc = op_tensor_find(p, nm[1]), vc = op_tensor_find(p, nm[2]);
        if (pr == OP_NONE || kc == OP_NONE || vc == OP_NONE)
            rc = err_set(e, MS_ERR_INTERNAL, "secure inference: layer %u has no attention", l);
        else
            rc = h2o_emit_ops(p, &sh, lo->phase, l, c, lo->n_tokens, pr, kc, vc, &lay[l], e);
    }
    if (!rc)
        rc = h2o_emit_select(p, &sh, lo->phase, m->n_layers, c, lo->n_tokens, lay, NULL, e);
    free(lay);
    return rc;
}

/* ---- MPCache on shares: the step's ops -------------------------------------------------------- */

/* Moves ops [from, n_ops) to index at (before the op there). */
static int ops_move(op_program *p, long at, size_t from, errbuf *e)
{
    size_t k = p->n_ops - from;
    if (at < 0)
        return err_set(e, MS_ERR_INTERNAL, "secure inference: no attention op to splice before");
    if (!k || (size_t)at >= from)
        return MS_OK;
    op *tmp = malloc(k * sizeof *tmp);
    if (!tmp)
        return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    memcpy(tmp, &p->ops[from], k * sizeof *tmp);
    memmove(&p->ops[(size_t)at + k], &p->ops[at], (from - (size_t)at) * sizeof *tmp);
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

/* The prompt's program ends with the bounds of every selecting layer; a decode step's selection
 * runs between each layer's query and its attention (spliced before the scores' matmul), its
 * mask right before the softmax (secpol.h). */
static int mpc_sess_emit(const secinf_opts *o, const lower_opts *lo, op_program *p, errbuf *e)
{
    const model_cfg *m = o->model;
    const mpcache_shape *sh = &o->spol.mpc;
    mpcache_ids *ids = calloc(m->n_layers, sizeof *ids);
    int rc = ids ? MS_OK : err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        static const char *const nm[5] = {"kcache", "vcache", "q_heads", "k", "scores"};
        uint32_t id[5];
        for (int i = 0; i < 5; i++) {
            char full[48];
            snprintf(full, sizeof full, "L%u.%s", l, nm[i]);
            id[i] = op_tensor_find(p, full);
            if (id[i] == OP_NONE)
                rc = err_set(e, MS_ERR_INTERNAL, "secure inference: no tensor %s", full);
        }
        if (rc)
            break;
        if (lo->phase == PHASE_PREFILL) {
            if (sh->static_mode == 0) /* threshold: the keep bits, the count revealed */
                rc = mpcache_emit_static(p, sh, l, lo->n_tokens, id[4], &ids[l], e);
            else
                rc = mpcache_emit_prefill(p, sh, l, lo->n_tokens, id[0], &ids[l], e);
            continue;
        }
        size_t n0 = p->n_ops;
        uint32_t n = mpc_n(o, l, lo->kv_len);
        uint32_t P0 = sh->static_mode == 0 && lo->kv_len == o->prefill &&
                      mpcache_layer_kind(sh, l) != MPCACHE_LAYER_DENSE ? o->prefill : 0;
        rc = mpcache_emit_decode_first(p, sh, l, n, P0, id[2], id[3], id[0], id[1], l ? &ids[l - 1] : NULL,
                                       &ids[l], e);
        if (!rc)
            rc = ops_move(p, find_op(p, OP_MATMUL, id[4]), n0, e);
        n0 = p->n_ops;
        if (!rc)
            rc = mpcache_emit_mask(p, sh, l, n, id[4], &ids[l], e);
        if (!rc && p->n_ops > n0)
            rc = ops_move(p, find_op(p, OP_SOFTMAX, id[4]), n0, e);
    }
    free(ids);
    return rc;
}

int secinf_step_program(const secinf_opts *o, uint32_t s, op_program *p, errbuf *e)
{
    const model_cfg *m = o->model;
    lower_opts lo;
    lower_opts_default(&lo);
    step_shape(o, s, &lo.n_tokens, &lo.kv_len);
    lo.phase = s ? PHASE_DECODE : PHASE_PREFILL;
    uint32_t *kept = NULL;
    if ((o->keep || o->spol.kind) && s) {
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
    for (uint32_t l = 0; !rc && kept && o->keep && l < m->n_layers; l++)
        rc = pad_mask(p, m, l, kept + (size_t)l * m->n_kv_heads, e);
    if (!rc && o->spol.kind == SECINF_SPOL_H2O)
        rc = spol_emit(o, &lo, p, e);
    if (!rc && o->spol.kind == SECINF_SPOL_MPCACHE)
        rc = mpc_sess_emit(o, &lo, p, e);
    free(kept);
    return rc;
}

/* ---- one node -------------------------------------------------------------------------------- */

typedef struct node_ctx {
    const secinf_opts *o;
    int frac;
    uint32_t s, t;       /* current step, its token count */
    const int *toks;     /* tokens of the current step */
    double *aud;         /* the step's audit values (P0, opts.audit) */
    uint32_t n_aud, cap_aud;
    mpc_val *b16, *b32;  /* MPCache on shares: each layer's cluster bounds */
    mpc_val *keep;       /* MPCache threshold: each layer's keep bits of the prompt */
} node_ctx;

/* Binding: the model owner's weights by name (fixed point), the client's one-hot rows. */
static int bind(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    node_ctx *c = ctx;
    if (t->role == OPT_PUBLIC && h2o_public(t, out, n))
        return 1;
    unsigned ml;
    if (t->role == OPT_PUBLIC && c->o->spol.kind == SECINF_SPOL_MPCACHE && sscanf(t->name, "L%u.mpc.", &ml) == 1) {
        uint32_t t_, kv;
        step_shape(c->o, c->s, &t_, &kv);
        if (mpcache_public(&c->o->spol.mpc, c->s ? mpc_n(c->o, ml, kv) : t_, c->frac, t, out, n))
            return 1;
    }
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

/* ---- H2O on shares: the carried state ------------------------------------------------------- */

/* The rows a layer carries after a step (secpol.h): row q of the next state is row row[q] of
 * the step's table (src[q] = 0) or of its selected heavy rows (src[q] = 1); returns the count.
 * A public function of the public shapes: the same on every node and in the audit. */
static uint32_t spol_next(const h2o_shape *sh, int phase, uint32_t c, uint32_t t, uint8_t *src,
                          uint32_t *row)
{
    uint32_t n = c + t, hh = sh->heavy, rec = sh->recent, R = 0;
    uint64_t budget = (uint64_t)hh + rec;
    if (h2o_selects(sh, phase, c, t)) {
        for (uint32_t q = 0; q < hh; q++)
            src[R] = 1, row[R++] = q;
        if (phase == PHASE_PREFILL) {
            for (uint32_t j = n - rec; j < n; j++) /* the recent window, in order */
                src[R] = 0, row[R++] = j;
            return R;
        }
        for (uint32_t j = (rec ? 1 : 0) + hh + 1; j <= c; j++)
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
    for (uint32_t j = 1 + ((uint64_t)c + 1 > budget); j <= c; j++) /* heavy 0: the window slides */
        src[R] = 0, row[R++] = j;
    src[R] = 0, row[R++] = 0;
    return R;
}

/* Columns [col, col+ncol) of the carried state (Hkv, R, F) into rows lead … lead+R-1 of a
 * program tensor (Hkv, rows, ncol), the rest zero: a local re-layout. */
static int spol_in(eng *e, const mpc_val *st, uint32_t Hkv, uint32_t R, uint32_t F, uint32_t col,
                   uint32_t ncol, uint32_t rows, uint32_t lead, mpc_val *z)
{
    size_t n = (size_t)Hkv * rows * ncol;
    uint32_t *idx = calloc(n, sizeof *idx);
    uint64_t *sel = calloc(n, sizeof *sel);
    int rc = idx && sel ? MS_OK : MS_ERR_NOMEM;
    for (uint32_t g = 0; !rc && g < Hkv; g++)
        for (uint32_t r = 0; r < R && r + lead < rows; r++)
            for (uint32_t c = 0; c < ncol; c++) {
                size_t i = ((size_t)g * rows + r + lead) * ncol + c;
                idx[i] = (uint32_t)(((size_t)g * R + r) * F + col + c);
                sel[i] = 1;
            }
    if (!rc)
        rc = relayout(e, z, st, idx, sel, n);
    free(idx), free(sel);
    return rc;
}

/* Before decode step s: every layer's kcache, vcache and score tensors take the carried rows
 * behind the new entry's row 0. */
static int spol_bind(eng *e, const secinf_opts *o, const op_program *p, mpc_program_run *r,
                     const mpc_val *st, uint32_t kv, errbuf *err)
{
    const model_cfg *m = o->model;
    uint32_t d = m->head_dim, F = 2 * d + 1, R = spol_rows(o, kv);
    static const char *const nm[3] = {"kcache", "vcache", "h2o.score"};
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < m->n_layers; l++)
        for (int w = 0; w < 3 && !rc; w++) {
            char full[48];
            snprintf(full, sizeof full, "L%u.%s", l, nm[w]);
            uint32_t id = op_tensor_find(p, full);
            if (id == OP_NONE)
                return err_set(err, MS_ERR_INTERNAL, "secure inference: no tensor %s", full);
            e->vt->release(e, &r->vals[id]);
            rc = spol_in(e, &st[l], m->n_kv_heads, R, F, (uint32_t)w * d, w < 2 ? d : 1,
                         p->tens[id].rows, 1, &r->vals[id]);
        }
    return rc;
}

/* After a step: every layer's next state from its table and selected heavy rows. */
static int spol_update(eng *e, const secinf_opts *o, const op_program *p, mpc_program_run *r,
                       mpc_val *st, uint32_t s, errbuf *err)
{
    const model_cfg *m = o->model;
    uint32_t t, kv, Hkv = m->n_kv_heads, F = 2 * m->head_dim + 1;
    step_shape(o, s, &t, &kv);
    uint32_t c = s ? spol_rows(o, kv) : 0, n = c + t;
    h2o_shape sh = spol_shape(o);
    int phase = s ? PHASE_DECODE : PHASE_PREFILL;
    uint8_t *src = malloc(n + sh.heavy + 1);
    uint32_t *row = malloc((n + sh.heavy + 1) * sizeof *row);
    int rc = src && row ? MS_OK : err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
    uint32_t R = rc ? 0 : spol_next(&sh, phase, c, t, src, row);
    size_t N = (size_t)Hkv * R * F;
    uint32_t *idx = calloc(N + 1, sizeof *idx);
    uint64_t *sel = calloc(N + 1, sizeof *sel);
    if (!rc && (!idx || !sel))
        rc = err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
    for (uint32_t l = 0; !rc && l < m->n_layers; l++) {
        char nm[2][48];
        snprintf(nm[0], sizeof nm[0], "L%u.h2o.table", l);
        snprintf(nm[1], sizeof nm[1], "h2o.heavy");
        uint32_t id[2] = {op_tensor_find(p, nm[0]), op_tensor_find(p, nm[1])}, L = m->n_layers;
        mpc_val part[2] = {{0}, {0}}, z = {0};
        for (int w = 0; w < 2 && !rc; w++) {
            if (id[w] == OP_NONE)
                continue;
            for (uint32_t g = 0; g < Hkv; g++)
                for (uint32_t q = 0; q < R; q++)
                    for (uint32_t f = 0; f < F; f++) {
                        size_t i = ((size_t)g * R + q) * F + f;
                        sel[i] = src[q] == w;
                        /* the table (Hkv, n, F); the heavy rows [g][l][q] of every layer */
                        size_t at = w ? ((size_t)g * L + l) * sh.heavy + row[q] : (size_t)g * n + row[q];
                        idx[i] = sel[i] ? (uint32_t)(at * F + f) : 0;
                    }
            rc = relayout(e, &part[w], &r->vals[id[w]], idx, sel, N);
        }
        if (!rc && id[0] == OP_NONE)
            rc = err_set(err, MS_ERR_INTERNAL, "secure inference: no tensor %s", nm[0]);
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

/* Validation instrumentation (opts.audit), outside the protocol: the selection's one-hots and
 * candidate scores (every layer's, secpol.h h2o_sel) opened after the step's program; P0 keeps
 * them. */
static int spol_audit(eng *e, mpc_net *net, node_ctx *c, const op_program *p, mpc_program_run *r,
                      errbuf *err)
{
    c->n_aud = 0;
    const secinf_opts *o = c->o;
    uint32_t L = o->model->n_layers, nn = o->spol.kind == SECINF_SPOL_MPCACHE ? 5 * L : 2;
    for (uint32_t w = 0; w < nn; w++) {
        char nm[48];
        static const char *const mn[5] = {"topk1", "sc1", "topk2", "sc2", "keep"};
        if (o->spol.kind == SECINF_SPOL_MPCACHE)
            snprintf(nm, sizeof nm, "L%u.mpc.%s", w / 5, mn[w % 5]);
        else if (w == 0)
            snprintf(nm, sizeof nm, "h2o.%s", c->s ? "argmin" : "topk");
        else
            snprintf(nm, sizeof nm, "h2o.cand");
        int is_score = o->spol.kind == SECINF_SPOL_MPCACHE ? (w % 5 == 1 || w % 5 == 3) : w == 1;
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
        int rc = mpc_run_open(e, net, r, id, v, err);
        for (size_t i = 0; !rc && i < n; i++)
            c->aud[c->n_aud++] = is_score ? fx_decode(v[i], c->frac) : (double)(int64_t)v[i];
        free(v);
        if (rc)
            return rc;
    }
    return MS_OK;
}

/* ---- MPCache on shares: the carried state ----------------------------------------------------- */

/* z (N) with z[i] = src[which[i]][idx[i]] (which[i] ≥ nsrc: 0): local re-layouts summed. */
static int mpc_pick(eng *e, mpc_val *z, size_t N, const mpc_val *const *src, int nsrc,
                    const uint8_t *which, const uint32_t *idx)
{
    uint32_t *ix = calloc(N + 1, sizeof *ix);
    uint64_t *sel = calloc(N + 1, sizeof *sel);
    int rc = ix && sel ? e->vt->alloc(e, z, N, DOM_ARITH) : MS_ERR_NOMEM;
    for (int k = 0; !rc && k < nsrc; k++) {
        size_t any = 0;
        for (size_t i = 0; i < N; i++) {
            sel[i] = which[i] == k;
            ix[i] = sel[i] ? idx[i] : 0;
            any += sel[i];
        }
        if (!any)
            continue;
        mpc_val part = {0};
        rc = relayout(e, &part, src[k], ix, sel, N);
        if (!rc)
            rc = e->vt->add(e, z, z, &part);
        e->vt->release(e, &part);
    }
    free(ix), free(sel);
    return rc;
}

/* Before decode step s at n entries: each layer's table and bounds into the program. */
static int mpc_bind(eng *e, const secinf_opts *o, const op_program *p, mpc_program_run *r, node_ctx *c,
                    const mpc_val *kf, uint32_t n, errbuf *err)
{
    const model_cfg *m = o->model;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, F = 2 * d + 1, L = m->n_layers;
    int rc = MS_OK;
    for (uint32_t l = 0; !rc && l < L; l++) {
        mpcache_plan pl;
        uint32_t nl = mpc_n(o, l, n);
        mpcache_plan_layer(&o->spol.mpc, l, nl, &pl);
        static const char *const nm[5] = {"kv", "b16", "b32", "full", "keep_in"};
        for (int w = 0; w < 5 && !rc; w++) {
            char full[48];
            snprintf(full, sizeof full, "L%u.mpc.%s", l, nm[w]);
            uint32_t id = op_tensor_find(p, full);
            if (id == OP_NONE)
                continue;
            e->vt->release(e, &r->vals[id]);
            if (w == 0)
                rc = spol_in(e, &kf[l], Hkv, nl, F, 0, F, pl.Npad, 0, &r->vals[id]);
            else if (w == 3) /* the prompt's table before the compaction */
                rc = spol_in(e, &kf[l], Hkv, o->prefill, F, 0, F, o->prefill, 0, &r->vals[id]);
            else if (w == 4)
                rc = spol_in(e, &c->keep[l], 1, o->prefill, 1, 0, 1, o->prefill, 0, &r->vals[id]);
            else
                rc = spol_in(e, w == 1 ? &c->b16[l] : &c->b32[l], Hkv, w == 1 ? pl.G2 : pl.G1, 2 * d, 0,
                             2 * d, w == 1 ? pl.G2 : pl.G1, 0, &r->vals[id]);
        }
    }
    return rc ? err_set(err, rc, "secure inference: binding MPCache's state") : MS_OK;
}

/* After step s: each layer's table gains the new entry (the cache tensors' row 0 at a decode
 * step, the prompt's rows at the prefill), the bounds their upkeep (secpol.h); after a threshold
 * prompt the keep bits are kept, and the first decode step's compaction and bounds replace the
 * prompt's table. Long: two public index maps (table rows, bound rows) built inline, each a
 * case per source. */
static int mpc_update(eng *e, const secinf_opts *o, const op_program *p, mpc_program_run *r, node_ctx *c,
                      mpc_val *kf, uint32_t s, errbuf *err)
{
    const model_cfg *m = o->model;
    const mpcache_shape *sh = &o->spol.mpc;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, F = 2 * d + 1, L = m->n_layers, t, kv;
    step_shape(o, s, &t, &kv);
    uint32_t s2 = sh->s2, s1 = sh->s1;
    size_t N = (size_t)Hkv * (kv + t + 1) * F;
    uint8_t *which = malloc(N + 1);
    uint32_t *idx = malloc((N + 1) * sizeof *idx);
    int rc = which && idx ? MS_OK : MS_ERR_NOMEM;
    for (uint32_t l = 0; !rc && l < L; l++) {
        uint32_t n = s ? mpc_n(o, l, kv) : 0, n1 = n + t;
        char full[4][48];
        snprintf(full[0], 48, "L%u.kcache", l);
        snprintf(full[1], 48, "L%u.vcache", l);
        snprintf(full[2], 48, "L%u.mpc.kv_c", l);
        uint32_t kc = op_tensor_find(p, full[0]), vc = op_tensor_find(p, full[1]), kvc = op_tensor_find(p, full[2]);
        uint32_t T = p->tens[kc].rows, G2 = (n + s2 - 1) / s2, stride = kvc != OP_NONE ? G2 * s2 : n;
        for (uint32_t g = 0; g < Hkv; g++)
            for (uint32_t q = 0; q < n1; q++)
                for (uint32_t f = 0; f < F; f++) {
                    size_t i = ((size_t)g * n1 + q) * F + f;
                    uint32_t row = s ? 0 : q; /* the new entry: row 0 of a decode step */
                    if (q < n)
                        which[i] = 0, idx[i] = (uint32_t)(((size_t)g * stride + q) * F + f);
                    else if (f < 2 * d)
                        which[i] = f < d ? 1 : 2, idx[i] = (uint32_t)(((size_t)g * T + row) * d + f % d);
                    else
                        which[i] = 3, idx[i] = 0;
                }
        const mpc_val *src[3] = {kvc != OP_NONE ? &r->vals[kvc] : &kf[l], &r->vals[kc], &r->vals[vc]};
        mpc_val z = {0};
        rc = mpc_pick(e, &z, (size_t)Hkv * n1 * F, src, 3, which, idx);
        if (rc)
            break;
        e->vt->release(e, &kf[l]);
        kf[l] = z;
        if (mpcache_layer_kind(sh, l) != MPCACHE_LAYER_SELECT)
            continue;
        if (!s && sh->static_mode == 0) { /* threshold: the keep bits for the compaction */
            snprintf(full[3], 48, "L%u.mpc.keep", l);
            uint32_t kp = op_tensor_find(p, full[3]);
            if (kp == OP_NONE) {
                rc = MS_ERR_INTERNAL;
                break;
            }
            e->vt->release(e, &c->keep[l]);
            rc = e->vt->alloc(e, &c->keep[l], r->vals[kp].n, DOM_ARITH);
            if (!rc)
                rc = e->vt->add(e, &c->keep[l], &c->keep[l], &r->vals[kp]);
            continue;
        }
        /* the bounds: the prefill's or the compaction's new ones, or the old rows with the
         * newest cluster's row from the upkeep's MAX (or [k | −k] when the entry starts one) */
        for (int w = 0; w < 2 && !rc; w++) {
            uint32_t sz = w ? s1 : s2, G = (n1 + sz - 1) / sz, Gold = (n + sz - 1) / sz;
            mpc_val *b = w ? &c->b32[l] : &c->b16[l], nb = {0};
            snprintf(full[2], 48, "L%u.mpc.%s", l, s ? "kn" : w ? "b32_new" : "b16_new");
            snprintf(full[3], 48, "L%u.mpc.%s", l, w ? "b32_new" : "b16_new");
            uint32_t kn = op_tensor_find(p, full[2]), bnew = s ? op_tensor_find(p, full[3]) : OP_NONE;
            snprintf(full[3], 48, "L%u.mpc.up", l);
            uint32_t up = op_tensor_find(p, full[3]);
            uint32_t lv = (n % s2 != 0) + (n % s1 != 0);
            size_t M = (size_t)Hkv * G * 2 * d;
            for (uint32_t g = 0; g < Hkv; g++)
                for (uint32_t q = 0; q < G; q++)
                    for (uint32_t ch = 0; ch < 2 * d; ch++) {
                        size_t i = ((size_t)g * G + q) * 2 * d + ch;
                        if (!s)
                            which[i] = 1, idx[i] = (uint32_t)i;
                        else if (q != n / sz)
                            which[i] = 0, idx[i] = (uint32_t)(((size_t)g * Gold + q) * 2 * d + ch);
                        else if (n % sz == 0)
                            which[i] = 1, idx[i] = g * 2 * d + ch;
                        else
                            which[i] = 2, idx[i] = (uint32_t)(((size_t)g * 2 * d + ch) * lv + (w ? lv - 1 : 0));
                    }
            if (kn == OP_NONE || (s && lv && up == OP_NONE)) {
                rc = MS_ERR_INTERNAL;
                break;
            }
            const mpc_val *bs[3] = {bnew != OP_NONE ? &r->vals[bnew] : b, &r->vals[kn], up == OP_NONE ? b : &r->vals[up]};
            rc = mpc_pick(e, &nb, M, bs, 3, which, idx);
            if (!rc) {
                e->vt->release(e, b);
                *b = nb;
            }
        }
    }
    free(which), free(idx);
    return rc ? err_set(err, rc, "secure inference: updating MPCache's state") : MS_OK;
}

/* After a threshold prompt: every party reads the counts its program revealed (a shared layer
 * takes layer 2k's, a dense one keeps the prompt); P0 tells the dealer, which opens nothing (the
 * counts are public, and the dealer needs them for the next programs' shapes: outside every
 * op's counters). Each node writes its own copy of opts.spol.static_count. */
static int mpc_counts(eng *e, mpc_net *net, const secinf_opts *o, const op_program *p, mpc_program_run *r,
                      errbuf *err)
{
    const model_cfg *m = o->model;
    uint32_t L = m->n_layers, *cnt = o->spol.static_count;
    int dealer = mpc_engine_is_dealer(e), nodes = mpc_net_nodes(net);
    for (uint32_t l = 0; !dealer && l < L; l++) {
        int kind = mpcache_layer_kind(&o->spol.mpc, l);
        char nm[48];
        snprintf(nm, sizeof nm, "L%u.mpc.count", l);
        uint32_t id = op_tensor_find(p, nm);
        if (kind == MPCACHE_LAYER_SELECT && (id == OP_NONE || !r->vals[id].s[0]))
            return err_set(err, MS_ERR_INTERNAL, "secure inference: no revealed count of layer %u", l);
        cnt[l] = kind == MPCACHE_LAYER_SELECT ? (uint32_t)r->vals[id].s[0][0] : kind == MPCACHE_LAYER_SHARED ? cnt[l - 1]
                                                                                                  : o->prefill;
        if (cnt[l] > o->prefill)
            return err_set(err, MS_ERR_PEER, "secure inference: revealed count %u of %d prompt rows", cnt[l], o->prefill);
    }
    if (nodes > e->n_parties && (dealer || e->party == 0)) {
        int rc = dealer ? mpc_net_recv_setup(net, 0, cnt, L * sizeof *cnt, err)
                        : mpc_net_send_setup(net, nodes - 1, cnt, L * sizeof *cnt, err);
        if (rc)
            return rc;
    }
    return MS_OK;
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
    if (!rc && o->spol.kind == SECINF_SPOL_H2O && s)
        rc = spol_bind(e, o, p, r, kf, kv, err);
    if (!rc && o->spol.kind == SECINF_SPOL_MPCACHE && s)
        rc = mpc_bind(e, o, p, r, c, kf, kv, err);
    for (uint32_t l = 0; !rc && kv && !o->spol.kind && l < m->n_layers; l++)
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
    if (!rc && o->spol.kind == SECINF_SPOL_H2O)
        rc = spol_update(e, o, p, r, kf, s, err);
    if (!rc && o->spol.kind == SECINF_SPOL_MPCACHE)
        rc = mpc_update(e, o, p, r, c, kf, s, err);
    if (!rc && o->spol.kind == SECINF_SPOL_MPCACHE && !s && o->spol.mpc.static_mode == 0)
        rc = mpc_counts(e, net, o, p, r, err);
    for (uint32_t l = 0; !rc && !o->spol.kind && l < m->n_layers; l++)
        for (int w = 0; w < 2 && !rc; w++) {
            snprintf(nm, sizeof nm, "L%u.%ccache", l, w ? 'v' : 'k');
            uint32_t id = op_tensor_find(p, nm), cnt = policy_layout(o, s) ? 0 : kv; /* the new row */
            rc = cache_out(e, o, w ? &vf[l] : &kf[l], &r->vals[id], kv, t, cnt, p->tens[id].rows);
        }
    uint64_t ns = now_ns() - t0;
    if (!rc && o->audit && o->spol.kind)
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
    node_ctx c = {.o = o, .frac = e->cfg.frac_bits};
    uint32_t S = secinf_n_steps(o);
    op_program p[2];
    op_program_init(&p[0]);
    op_program_init(&p[1]);
    mpc_program_run run[2];
    memset(run, 0, sizeof run);
    mpc_val *kf = calloc(m->n_layers, sizeof *kf), *vf = calloc(m->n_layers, sizeof *vf);
    double *logits = calloc(m->vocab, sizeof *logits);
    c.b16 = calloc(m->n_layers, sizeof *c.b16);
    c.b32 = calloc(m->n_layers, sizeof *c.b32);
    c.keep = calloc(m->n_layers, sizeof *c.keep);
    int rc = kf && vf && logits && c.b16 && c.b32 && c.keep ? MS_OK : err_set(err, MS_ERR_NOMEM, "secure inference: out of memory");
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
            if (!s && o->spol.static_count)
                fwrite(o->spol.static_count, sizeof *o->spol.static_count, m->n_layers, out);
            if (o->audit && o->spol.kind) {
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
    for (uint32_t l = 0; c.b16 && c.b32 && c.keep && l < m->n_layers; l++) {
        e->vt->release(e, &c.b16[l]);
        e->vt->release(e, &c.b32[l]);
        e->vt->release(e, &c.keep[l]);
    }
    free(kf), free(vf), free(logits), free(c.aud), free(c.b16), free(c.b32), free(c.keep);
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
        if (!s && r->static_count) {
            size_t cb = (size_t)r->n_static * sizeof *r->static_count;
            if (b + cb > end)
                return err_set(e, MS_ERR_PEER, "secure inference: P0's revealed counts are short");
            memcpy(r->static_count, b, cb), b += cb;
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
    if (o->spol.kind && (o->keep || o->spol.kind > SECINF_SPOL_MPCACHE))
        return err_set(e, MS_ERR_INPUT, "secure inference: a policy on shares (kind %d) with keep masks", o->spol.kind);
    if (o->spol.kind && o->model->n_heads % o->model->n_kv_heads)
        return err_set(e, MS_ERR_INPUT, "secure inference: %u heads over %u KV heads", o->model->n_heads,
                       o->model->n_kv_heads);
    r->n_steps = secinf_n_steps(o);
    r->n_parties = (uint32_t)pr->n_parties;
    if (o->spol.kind == SECINF_SPOL_MPCACHE && o->spol.mpc.static_mode == 0) {
        if (!o->spol.static_count)
            return err_set(e, MS_ERR_INPUT, "secure inference: mpcache's threshold without its count array");
        r->static_count = o->spol.static_count; /* the caller's: the predictor reads it */
        r->n_static = o->model->n_layers;
    }
    if (o->audit && o->spol.kind) {
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
    int own_q;           /* the policy model's own queries (what a secure session computes) */
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
    /* MPCache selects with the query of the model it runs in (as its selection on shares does);
     * the other query-aware policies see the full-cache model's, as the simulator's replay */
    prep c = {.m = m, .pol = pol, .k = k, .pm = pm, .prompt = prompt, .cur_layer = UINT32_MAX, .e = e,
              .own_q = pol == &policy_mpcache};
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

/* ---- policies inside MPC: which way, public keep masks, the selection's audit ---------------- */

int secinf_public_keep(const model_cfg *m, const char *policy, const char *const *params,
                       size_t n_params, uint32_t n, uint32_t prompt, secinf_keep *k, errbuf *e)
{
    memset(k, 0, sizeof *k);
    const policy_ops *pol = policy_find(policy);
    if (!pol)
        return err_set(e, MS_ERR_INPUT, "unknown policy '%s'", policy);
    if (pol->observe)
        return err_set(e, MS_ERR_INPUT, "policy %s observes the model: its kept set is not public", policy);
    if (!prompt || prompt > n || n_params > RUN_MAX_PARAMS)
        return err_set(e, MS_ERR_INPUT, "policy %s: prompt %u of %u tokens, %zu parameters", policy, prompt, n,
                       n_params);
    kv_param kv[RUN_MAX_PARAMS];
    int rc = prep_args(params, n_params, kv, e);
    if (!rc)
        rc = policy_check_params(pol, kv, n_params, "(command line)", e);
    if (rc)
        return rc;
    policy_env env = {.n_layers = m->n_layers, .n_heads = m->n_heads, .n_kv_heads = m->n_kv_heads,
                      .head_dim = m->head_dim, .dim = m->dim, .ffn_dim = m->ffn_dim, .prompt_len = prompt,
                      .max_len = n};
    policy_args a = {.kv = kv, .n = n_params, .path = "(command line)"};
    void *st = NULL;
    if ((rc = pol->init(&env, &a, &st, e)))
        return rc;
    *k = (secinf_keep){.from = prompt, .max_len = n, .n_layers = m->n_layers, .n_kv_heads = m->n_kv_heads};
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
                memcpy(k->keep + (((size_t)pos * m->n_layers + l) * m->n_kv_heads + g) * n, row + (size_t)g * pos, pos);
        }
    pol->fini(st);
    free(row);
    if (rc)
        secinf_keep_free(k);
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
    if (pol != &policy_h2o && pol != &policy_mpcache)
        return MS_OK;
    if (n_params > RUN_MAX_PARAMS)
        return err_set(e, MS_ERR_INPUT, "policy %s: %zu parameters", policy, n_params);
    kv_param kv[RUN_MAX_PARAMS];
    int rc = prep_args(params, n_params, kv, e);
    if (!rc)
        rc = policy_check_params(pol, kv, n_params, "(command line)", e);
    policy_env env = {.n_layers = m->n_layers, .n_heads = m->n_heads, .n_kv_heads = m->n_kv_heads,
                      .head_dim = m->head_dim, .prompt_len = prompt, .max_len = n};
    policy_args a = {.kv = kv, .n = n_params, .path = "(command line)"};
    if (!rc && pol == &policy_mpcache) {
        /* static eviction on shares is not there yet: `none` only */
        rc = mpcache_shape_read(&env, &a, &sp->mpc, e);
        if (!rc && sp->mpc.static_mode != 1) /* `topk` static eviction: not on shares */
            sp->kind = SECINF_SPOL_MPCACHE;
        if (!rc && sp->kind && sp->mpc.static_mode == 0 &&
            !(sp->static_count = calloc(m->n_layers + 1, sizeof *sp->static_count)))
            rc = err_set(e, MS_ERR_NOMEM, "policy mpcache: out of memory");
        return rc;
    }
    if (!rc)
        rc = h2o_budgets(&env, &a, &sp->heavy, &sp->recent, e);
    if (!rc)
        sp->kind = SECINF_SPOL_H2O;
    return rc;
}

void secinf_spol_free(secinf_spol *sp)
{
    free(sp->static_count);
    sp->static_count = NULL;
}

/* The plaintext keep mask of (pos, l, g), or NULL outside the recorded positions. */
static const uint8_t *plain_mask(const secinf_keep *k, uint32_t pos, uint32_t l, uint32_t g)
{
    if (!k || !k->keep || pos < k->from || pos >= k->max_len)
        return NULL;
    return k->keep + (((size_t)pos * k->n_layers + l) * k->n_kv_heads + g) * k->max_len;
}

/* Whether the positions slot[0..R) are exactly the kept set of mask over [0, pos). */
static int same_set(const uint32_t *slot, uint32_t R, const uint8_t *mask, uint32_t pos)
{
    uint32_t cnt = 0;
    for (uint32_t j = 0; j < pos; j++)
        cnt += mask[j] != 0;
    if (cnt != R)
        return 0;
    for (uint32_t q = 0; q < R; q++)
        if (slot[q] >= pos || !mask[slot[q]])
            return 0;
    return 1;
}

/* H2O's plaintext scores as the replay accumulates them: the float model run under the
 * replay's keep masks, each (layer, KV head)'s column sums of its query heads' attention; sc
 * [pos][l][g][j] after position pos (j ≤ pos). */
typedef struct pscore {
    const secinf_keep *k;
    uint32_t L, Hkv, G, n;
    float *run, *sc;
} pscore;

static int ps_mask(void *ctx, uint32_t layer, uint32_t g, uint32_t pos, uint8_t *mask)
{
    pscore *c = ctx;
    const uint8_t *pm = plain_mask(c->k, pos, layer, g);
    if (!pm)
        return 0;
    memcpy(mask, pm, pos);
    mask[pos] = 1;
    return 1;
}

static void ps_layer(void *ctx, const llama_layer_view *v)
{
    pscore *c = ctx;
    for (uint32_t g = 0; g < c->Hkv; g++) {
        float *run = c->run + ((size_t)v->layer * c->Hkv + g) * c->n;
        for (uint32_t h = g * c->G; h < (g + 1) * c->G; h++)
            for (uint32_t j = 0; j <= v->pos; j++)
                run[j] += v->att[(size_t)h * (v->pos + 1) + j];
        memcpy(c->sc + (((size_t)v->pos * c->L + v->layer) * c->Hkv + g) * c->n, run, c->n * sizeof *run);
    }
}

static int plain_scores(const secinf_opts *o, const secinf_keep *k, float **out, errbuf *e)
{
    const model_cfg *m = o->model;
    uint32_t n = o->n_tokens;
    pscore c = {.k = k, .L = m->n_layers, .Hkv = m->n_kv_heads, .G = m->n_heads / m->n_kv_heads, .n = n};
    c.run = calloc((size_t)c.L * c.Hkv * n, sizeof *c.run);
    c.sc = calloc((size_t)n * c.L * c.Hkv * n, sizeof *c.sc);
    float *lg = malloc(m->vocab * sizeof *lg);
    char wpath[1024];
    llama *pm = NULL;
    int rc = c.run && c.sc && lg ? MS_OK : err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    if (!rc && model_file_path(m->weights, wpath, sizeof wpath))
        rc = err_set(e, MS_ERR_NOTFOUND, "selection audit: no weights for %s", m->name);
    if (!rc)
        rc = llama_load(m, wpath, &pm, e);
    llama_hooks hk = {.ctx = &c, .on_layer = ps_layer, .attend_mask = ps_mask};
    for (uint32_t pos = 0; !rc && pos < n; pos++)
        rc = llama_forward(pm, o->tokens[pos], pos, &hk, lg);
    llama_free(pm);
    free(c.run), free(lg);
    if (rc) {
        free(c.sc);
        return rc;
    }
    *out = c.sc;
    return MS_OK;
}

/* A differing selection from the same candidates: the replay's margin between the two choices
 * (rep: the replay's scores of the candidates), a near tie when within twice the score error. */
static void sel_differ(secinf_sel *out, double margin)
{
    out->max_margin = margin > out->max_margin ? margin : out->max_margin;
    out->near_ties += margin <= 2 * out->score_err;
    out->differ_same_cand++;
}

/* One decode eviction of (l, g) at position pos against the plaintext's: cand[i] positions,
 * sc their secure scores, v the secure victim's index; rep the replay's scores by position. */
static void sel_evict(const secinf_keep *plain, uint32_t pos, uint32_t l, uint32_t g, const uint32_t *cand,
                      const double *sc, uint32_t nc, uint32_t v, double tie, int sets_equal, const float *rep,
                      secinf_sel *out)
{
    const uint8_t *now = plain_mask(plain, pos, l, g), *next = plain_mask(plain, pos + 1, l, g);
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
    sel_differ(out, (double)rep[cand[v]] - (double)rep[pv]);
}

/* The secure scores of the candidates against the replay's (sets equal: the same entries). */
static void sel_err(secinf_sel *out, const uint32_t *cand, const double *sc, uint32_t nc, const float *rep)
{
    for (uint32_t i = 0; i < nc; i++) {
        double d = fabs(sc[i] - (double)rep[cand[i]]);
        out->score_err = d > out->score_err ? d : out->score_err;
    }
}

/* Long: it walks steps × layers × KV heads once, following the secure rows' positions through
 * the public row maps and the opened one-hots, and compares each selection where it happens;
 * two passes, the first for the score error the second classifies near ties with. */
int secinf_sel_compare(const secinf_opts *o, const secinf_result *r, const secinf_keep *plain,
                       double tie_bound, secinf_sel *out, errbuf *e)
{
    memset(out, 0, sizeof *out);
    if (o->spol.kind != SECINF_SPOL_H2O || !r->audit)
        return err_set(e, MS_ERR_INPUT, "selection audit: no H2O run with the audit on");

    const model_cfg *m = o->model;
    uint32_t L = m->n_layers, Hkv = m->n_kv_heads, hh = o->spol.heavy, Nmax = o->n_tokens + o->n_gen + 2;
    h2o_shape sh = spol_shape(o);
    /* the positions each layer's and KV head's rows hold, followed through the public row maps
     * and the opened one-hots */
    uint32_t *slot = calloc((size_t)L * Hkv * Nmax, sizeof *slot), *nslot = calloc(Nmax, sizeof *nslot);
    uint32_t *cand = calloc(Nmax, sizeof *cand), *row = calloc(Nmax + hh, sizeof *row), *heavy = calloc(hh + 1, sizeof *heavy);
    uint8_t *src = calloc(Nmax + hh, 1);
    if (!slot || !nslot || !cand || !row || !heavy || !src) {
        free(slot), free(nslot), free(cand), free(row), free(heavy), free(src);
        return err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    }
    float *ps = NULL;
    int rc = o->n_gen ? err_set(e, MS_ERR_INPUT, "selection audit: teacher-forced runs only")
                      : plain_scores(o, plain, &ps, e);
    uint32_t R = 0, NT = o->n_tokens;
    /* first pass: the score error over the candidates of equal kept sets; second: the rest */
    for (int pass = 0; pass < 2 && !rc; pass++) {
    for (uint32_t s = 0; !rc && s < r->n_steps; s++) {
        uint32_t t, kv;
        step_shape(o, s, &t, &kv);
        uint32_t c = s ? spol_rows(o, kv) : 0, n = c + t, pos = kv;
        if (s == 0 && pass == 1) { /* the counters count once */
            double err = out->score_err;
            memset(out, 0, sizeof *out);
            out->score_err = err;
            tie_bound = tie_bound < 0 ? 2 * err : tie_bound;
        }
        int phase = s ? PHASE_DECODE : PHASE_PREFILL, sel = h2o_selects(&sh, phase, c, t);
        uint32_t first = o->spol.recent ? hh + 1 : 0, nc = s ? hh + 1 : n - o->spol.recent;
        uint32_t per = s ? nc : hh * nc; /* one-hot values per KV head */
        if (sel && r->n_audit[s] != (size_t)L * Hkv * (per + nc)) {
            rc = err_set(e, MS_ERR_INTERNAL, "selection audit: step %u has %u values", s, r->n_audit[s]);
            break;
        }
        uint32_t Rn = spol_next(&sh, phase, c, t, src, row);
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t g = 0; g < Hkv; g++) {
                uint32_t *sl = slot + ((size_t)l * Hkv + g) * Nmax;
                const uint8_t *pm = plain_mask(plain, pos, l, g);
                int eq = 1;
                if (s && pm) {
                    eq = same_set(sl, R, pm, pos);
                    out->kept_sets++;
                    out->kept_same += (uint32_t)eq;
                }
                /* program rows: prefill j = position j; decode 0 = pos, q ≥ 1 = slot q-1 */
                for (uint32_t i = 0; i < n; i++)
                    nslot[i] = s ? (i ? sl[i - 1] : pos) : i;
                if (sel) {
                    /* the one-hots of every layer, then the candidates' scores: [g][l][…] */
                    const double *oh = r->audit[s] + ((size_t)g * L + l) * per;
                    const double *sc = r->audit[s] + (size_t)L * Hkv * per + ((size_t)g * L + l) * nc;
                    /* prefill: rows 0 … nc-1; decode: the latest first (policy_h2o.c h2o_stage) */
                    for (uint32_t i = 0; i < nc; i++)
                        cand[i] = s ? nslot[i ? i : first] : nslot[i];
                    if (s) {
                        uint32_t v = 0;
                        for (uint32_t i = 0; i < nc; i++)
                            v = oh[i] > 0.5 ? i : v;
                        const float *rep = ps + (((size_t)pos * L + l) * Hkv + g) * NT;
                        if (eq)
                            sel_err(out, cand, sc, nc, rep);
                        sel_evict(plain, pos, l, g, cand, sc, nc, v, tie_bound, eq, rep, out);
                        for (uint32_t i = 0, q = 0; i < nc; i++)
                            if (i != v)
                                heavy[q++] = cand[i];
                    } else {
                        for (uint32_t q = 0; q < hh; q++)
                            for (uint32_t i = 0; i < nc; i++)
                                if (oh[(size_t)q * nc + i] > 0.5)
                                    heavy[q] = cand[i];
                        const uint8_t *pm1 = plain_mask(plain, pos + n, l, g);
                        const float *rep = ps + (((size_t)(n - 1) * L + l) * Hkv + g) * NT;
                        sel_err(out, cand, sc, nc, rep);
                        if (pm1) { /* the heavy set against the plaintext's prompt selection */
                            int same = 1;
                            for (uint32_t q = 0; q < hh; q++)
                                same &= heavy[q] < nc && pm1[heavy[q]];
                            uint32_t cnt = 0;
                            for (uint32_t j = 0; j < nc; j++)
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
                            if (!(same && cnt == hh)) { /* the replay's margin between the sets */
                                double mg = 0;
                                for (uint32_t q = 0; q < hh; q++)
                                    for (uint32_t j = 0; j < nc; j++)
                                        if (pm1[j] && (heavy[q] >= nc || !pm1[heavy[q]]) && heavy[q] < nc &&
                                            (double)rep[j] - (double)rep[heavy[q]] > mg)
                                            mg = (double)rep[j] - (double)rep[heavy[q]];
                                sel_differ(out, mg);
                            }
                        }
                    }
                }
                for (uint32_t q = 0; q < Rn; q++)
                    sl[q] = src[q] ? heavy[row[q]] : nslot[row[q]];
            }
        R = Rn;
    }
    }
    free(ps);
    free(slot), free(nslot), free(cand), free(row), free(heavy), free(src);
    return rc;
}

/* ---- MPCache's selection audit -------------------------------------------------------------- */

/* MPCache's plaintext scores as its replay computes them: the float model under the replay's
 * keep masks; at each decode position and selecting layer the policy model's own query against
 * the bounds of K' (the positions pos[l]), in the session's units (q/√d). sc[pos][l][g][lvl][c]. */
typedef struct mscore {
    const secinf_opts *o;
    const secinf_keep *k;
    llama *pm;
    const uint32_t *pos;
    uint32_t Nmax, n, Gmax, cur_l, cur_pos;
    float *keys;          /* [L][n][Hkv·d] */
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
    const mpcache_shape *sh = &c->o->spol.mpc;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, G = m->n_heads / Hkv, n = mpc_n(c->o, l, pos);
    const float *q = llama_query(c->pm);
    const uint32_t *ps = c->pos + (size_t)l * c->Nmax;
    size_t KD = (size_t)Hkv * d;
    for (uint32_t g = 0; g < Hkv; g++)
        for (int lvl = 0; lvl < 2; lvl++) {
            uint32_t sz = lvl ? sh->s2 : sh->s1, Gc = (n + sz - 1) / sz;
            double *out = c->sc + ((((size_t)pos * m->n_layers + l) * Hkv + g) * 2 + (size_t)lvl) * c->Gmax;
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
        mpcache_layer_kind(&c->o->spol.mpc, l) == MPCACHE_LAYER_SELECT) {
        c->cur_l = l, c->cur_pos = pos;
        ms_scores(c, l, pos);
    }
    const uint8_t *pm = plain_mask(c->k, pos, l, g);
    if (!pm)
        return 0;
    memcpy(mask, pm, pos);
    mask[pos] = 1;
    return 1;
}

static int mpc_plain_scores(const secinf_opts *o, const secinf_keep *k, const uint32_t *pos, uint32_t Nmax,
                            mscore *c, errbuf *e)
{
    const model_cfg *m = o->model;
    uint32_t n = o->n_tokens;
    *c = (mscore){.o = o, .k = k, .pos = pos, .Nmax = Nmax, .n = n, .Gmax = n / o->spol.mpc.s2 + 2,
                  .cur_l = UINT32_MAX};
    c->keys = calloc((size_t)m->n_layers * n * m->n_kv_heads * m->head_dim + 1, sizeof *c->keys);
    c->sc = calloc((size_t)n * m->n_layers * m->n_kv_heads * 2 * c->Gmax + 1, sizeof *c->sc);
    float *lg = malloc(m->vocab * sizeof *lg);
    char wpath[1024];
    int rc = c->keys && c->sc && lg ? MS_OK : err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    if (!rc && model_file_path(m->weights, wpath, sizeof wpath))
        rc = err_set(e, MS_ERR_NOTFOUND, "selection audit: no weights for %s", m->name);
    if (!rc)
        rc = llama_load(m, wpath, &c->pm, e);
    llama_hooks hk = {.ctx = c, .on_layer = ms_layer, .attend_mask = ms_mask};
    for (uint32_t p = 0; !rc && p < n; p++)
        rc = llama_forward(c->pm, o->tokens[p], p, &hk, lg);
    llama_free(c->pm);
    free(lg), free(c->keys);
    c->keys = NULL;
    return rc;
}

/* The replay's smallest top-k margin at (pos, l, g): level 1 on its scores, level 2 among the
 * 16-clusters of its level-1 set. */
static double mpc_rep_margin(const secinf_opts *o, const mscore *c, uint32_t pos, uint32_t l, uint32_t g)
{
    const model_cfg *m = o->model;
    mpcache_plan pl;
    mpcache_plan_layer(&o->spol.mpc, l, mpc_n(o, l, pos), &pl);
    const double *s1 = c->sc + ((((size_t)pos * m->n_layers + l) * m->n_kv_heads + g) * 2) * c->Gmax, *s2 = s1 + c->Gmax;
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

/* Long: it follows each layer's K' positions (the opened keep bits, then the generated ones)
 * and compares every (position, layer, KV head) where it happens. */
int secinf_mpc_compare(const secinf_opts *o, const secinf_result *r, const secinf_keep *plain,
                       secinf_mpc_sel *out, errbuf *e)
{
    memset(out, 0, sizeof *out);
    out->min_margin = INFINITY;
    out->first_differ = UINT32_MAX;
    if (o->spol.kind != SECINF_SPOL_MPCACHE || !r->audit)
        return err_set(e, MS_ERR_INPUT, "selection audit: no MPCache run with the audit on");
    const model_cfg *m = o->model;
    const mpcache_shape *sh = &o->spol.mpc;
    uint32_t L = m->n_layers, Hkv = m->n_kv_heads, Nmax = o->n_tokens + o->n_gen + 2;
    uint8_t *cl = calloc((size_t)L * Hkv * Nmax, 1);
    double *mg = calloc((size_t)L * Hkv, sizeof *mg);
    uint32_t *pos = calloc((size_t)L * Nmax, sizeof *pos); /* each layer's K' positions, in order */
    if (!cl || !mg || !pos) {
        free(cl), free(mg), free(pos);
        return err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    }
    /* the static set: the opened keep bits of the prompt (threshold), else every position */
    size_t at0 = 0;
    for (uint32_t l = 0; l < L; l++) {
        uint32_t *ps = pos + (size_t)l * Nmax, c = 0;
        int kind = mpcache_layer_kind(sh, l), thr = sh->static_mode == 0 && kind != MPCACHE_LAYER_DENSE;
        if (thr && kind == MPCACHE_LAYER_SHARED) {
            memcpy(ps, ps - Nmax, Nmax * sizeof *ps);
            continue;
        }
        for (uint32_t j = 0; j < o->prefill; j++)
            if (!thr || (at0 + j < r->n_audit[0] && r->audit[0][at0 + j] > 0.5))
                ps[c++] = j;
        at0 += thr ? o->prefill : 0;
        for (uint32_t j = o->prefill; c < Nmax && j < o->n_tokens + o->n_gen; j++)
            ps[c++] = j;
    }
    mscore msc;
    double *dm = calloc((size_t)r->n_steps * L * Hkv + 1, sizeof *dm); /* differing sets' replay margins */
    int rc = o->n_gen ? err_set(e, MS_ERR_INPUT, "selection audit: teacher-forced runs only")
                      : !dm ? err_set(e, MS_ERR_NOMEM, "selection audit: out of memory")
                            : mpc_plain_scores(o, plain, pos, Nmax, &msc, e);
    if (rc) {
        free(cl), free(mg), free(pos), free(dm), free(msc.sc);
        return rc;
    }
    for (uint32_t s = 1; s < r->n_steps; s++) {
        uint32_t t, kv;
        step_shape(o, s, &t, &kv);
        size_t at = 0;
        for (uint32_t l = 0; l < L; l++) {
            int kind = mpcache_layer_kind(sh, l);
            uint32_t n = mpc_n(o, l, kv);
            size_t used = 0;
            for (uint32_t g = 0; g < Hkv; g++) {
                uint8_t *c = cl + ((size_t)l * Hkv + g) * Nmax;
                if (kind == MPCACHE_LAYER_SHARED) {
                    memcpy(c, cl + ((size_t)(l - 1) * Hkv + g) * Nmax, Nmax);
                    mg[l * Hkv + g] = mg[(l - 1) * Hkv + g];
                } else {
                    mg[l * Hkv + g] = mpcache_audit_set(sh, l, n, r->audit[s] + at, r->n_audit[s] - at, g, c, &used);
                }
                double v = mg[l * Hkv + g];
                if (kind == MPCACHE_LAYER_SELECT && v < out->min_margin)
                    out->min_margin = v;
                const uint8_t *pm = plain_mask(plain, kv, l, g);
                if (!pm)
                    continue;
                const double *ss[2];
                if (kind == MPCACHE_LAYER_SELECT)
                    mpcache_audit_scores(sh, l, n, r->audit[s] + at, r->n_audit[s] - at, g, &ss[0], &ss[1]);
                /* the secure set by position: K' entry i attended when its cluster is chosen */
                uint8_t *mine = calloc(kv + 1, 1);
                if (!mine)
                    break;
                for (uint32_t i = 0; i < n; i++)
                    if (c[i / sh->s2] && pos[(size_t)l * Nmax + i] < kv)
                        mine[pos[(size_t)l * Nmax + i]] = 1;
                int same = 1;
                for (uint32_t j = 0; j < kv; j++)
                    same &= !mine[j] == !pm[j];
                free(mine);
                out->sets++;
                out->same += (uint32_t)same;
                uint32_t src = kind == MPCACHE_LAYER_SHARED ? l - 1 : l;
                const double *rs = msc.sc + ((((size_t)kv * L + src) * Hkv + g) * 2) * msc.Gmax;
                mpcache_plan pl;
                mpcache_plan_layer(sh, l, n, &pl);
                for (int lvl = 0; same && kind == MPCACHE_LAYER_SELECT && lvl < 2; lvl++)
                    for (uint32_t i = 0; ss[lvl] && i < (lvl ? pl.G2 : pl.G1); i++) {
                        double d = fabs(ss[lvl][i] - rs[lvl * msc.Gmax + i]);
                        out->score_err = d > out->score_err ? d : out->score_err;
                    }
                if (!same) {
                    double rm = mpc_rep_margin(o, &msc, kv, src, g);
                    dm[out->differ++] = rm;
                    out->rep_margin = rm > out->rep_margin ? rm : out->rep_margin;
                }
                if (!same && v > out->max_diff_margin)
                    out->max_diff_margin = v;
                if (!same && kv < out->first_differ) {
                    out->first_differ = kv;
                    out->first_layer = l;
                    out->first_margin = v;
                }
            }
            at += used;
        }
        for (uint32_t l = 0; l < L; l++) {
            mpcache_plan pl;
            mpcache_plan_layer(sh, l, mpc_n(o, l, kv), &pl);
            if (mpcache_layer_kind(sh, l) == MPCACHE_LAYER_SELECT)
                out->topks += Hkv * ((uint32_t)pl.lv1 + (uint32_t)pl.lv2);
        }
    }
    for (uint32_t i = 0; i < out->differ; i++)
        out->near_ties += dm[i] <= 2 * out->score_err;
    free(cl), free(mg), free(pos), free(dm), free(msc.sc);
    return MS_OK;
}
