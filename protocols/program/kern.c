/* kern.c — every op kind of the op program, written once over the primitive layer (eng.h): the
 * dispatcher (kern_exec), views and the variant tables' resolution; the kernels by family in
 * kern_core.c, kern_cmp.c, kern_math.c and kern_sort.c (kern_int.h).
 *
 * Conventions every kernel follows:
 *   - Arithmetic values are fixed point with f = cfg.frac_bits fraction bits, except the 0/1
 *     results of comparisons (lt, eq, the masks inside kernels), one-hot rows (onehot, argmax,
 *     topk) and secret indices (onehot's input), which are plain ring integers. A product of a
 *     0/1 integer and a fixed-point value therefore needs no truncation (OPF_NO_TRUNC).
 *   - Public constants (masks, index maps, coefficients) are built only when the values carry
 *     data (v->s[0] != NULL); a cost engine ignores them. The sequence of primitive calls
 *     never depends on that: it is a function of the op's shapes and e->n_parties / e->cfg.
 *   - Independent work of one op is batched into one primitive call (one round): all rows of
 *     a softmax, all pairs of a tree level, the three thresholds of GeLU, value and index of an
 *     argmax.
 *   - Temporaries are released on success; on an error return the engine may hold some until
 *     it is freed.
 *
 * Operand binding (data engines): kern_exec reads vals[in*] and replaces vals[out] with a value
 * allocated by the engine (the previous vals[out], if it holds data, is released — except for
 * INPUT, where vals[out].s[0] is the owner's plaintext, owned by the caller). Public tensors
 * (OPT_PUBLIC operands of add_pub / mul_pub / matmul with OPF_PUBLIC_B) hold their fixed-point
 * plaintext in s[0] on every party. REVEAL leaves the opened plaintext in vals[out].s[0] on the
 * receiving party (every party when iarg = -1).
 *
 * Kernel-specific arguments:
 *   INPUT     owner: P0 for OPT_INPUT (the client), P1 for OPT_WEIGHT (the model owner), else
 *             iarg if it names a party, else P0.
 *   TRUNC     iarg bits (f when iarg <= 0).
 *   SOFTMAX   iarg >= 0: causal, row r (0 <= r < m) sees columns j <= iarg + r.
 *   LAYERNORM, RMSNORM  farg = eps (1e-5 when farg <= 0).
 *   TOPK      iarg = k (clamped to n); output (b, m·k, n) one-hot rows in descending order;
 *             k max extractions or an odd–even merge sort, whichever has fewer rounds
 *             (cfg.topk network); with cfg.topk quickselect a secret shuffle and QuickSelect
 *             with revealed pivot comparisons, the k rows in selection order (k_topk_qs).
 *   SORT      rows sorted by value, ascending (iarg = 1: descending), odd–even merge sort.
 *   bits      LT, EQ, MAX, ARGMAX, TOPK, SORT, ONEHOT: the operands' public bit bound (op.h);
 *             the packed circuits (msb: packed) run on that many bits. ONEHOT: indices in
 *             [0, 2^bits) (⌈log2 n⌉ for n classes); 0: any index, out of range → zero row.
 *   ROPE      op.h: batch = sequences, m = tokens, n = features, k = head_dim (n when 0); row
 *             r of m sits at position iarg + r; pair (2i, 2i+1) within a head rotates by
 *             pos·theta^(-2i/k), theta = farg (10000 when farg <= 0).
 *   REVEAL    iarg = receiving party, -1 = all.
 *   VIEW      op.h: out smaller than in0: out's rows from in0 starting at row iarg (public
 *             slice); out larger: in0 written into out at row iarg of each instance, the other
 *             rows keep out's previous value (KV-cache append; in0's rows may hold the
 *             instances side by side: (tokens, heads·n) → (heads, rows, n)); same size: copy,
 *             or with out's batch H times in0's and cols n a head split (S, rows, H·n) →
 *             (S·H, rows, n), and with in0's batch H times out's the head merge back.
 *   ADD, SUB, MUL, SELECT, LT, EQ: a smaller operand repeats cyclically (op.h broadcast).
 *   MATMUL, GATHER: in1 with a smaller batch is shared across instances; each instance reads
 *             the leading k·n elements of in1's instance (op.h).
 *
 * Approximations and their error bounds (checked by tests/check_kern.c on eng_plain):
 *   exp        exp: pow2 (default): 2^-y, y = −x·log2 e, the integer part's bits by one bit
 *              decomposition and 2^-r on the fraction by a degree-4 polynomial (k_exp_pow2).
 *              x in (−11,350, 5.545]; 0 below −16.6 (under the last place from −(f+1)·ln 2 =
 *              −13.2 on); |err| <= 2e-5·e^x + 2^(1-f), tested on both sides of 0, at the
 *              underflow edge and the clamp, far below and at the top.
 *              exp: taylor: (1 + x/2^t)^(2^t), t = cfg.exp_iters (SPU exp_taylor). For x in
 *              [-14, 0] and t = 8, f = 18: |err| <= 2e-3 absolute (the limit's own error
 *              e^x·x²/2^(t+1) and fixed-point rounding); t = 5 (PUMA): <= 1e-2. Inputs below
 *              -2^t make 1 + x/2^t negative: the result is garbage (softmax masks those).
 *   reciprocal normalize: bitdec (default): x in [2^-f, 2^(w-f)), w = op.bits or 2f + 4
 *              (x < 2^22 = 4.2e6 at f = 18; softmax passes its row sum's bound f + ⌈log2 n⌉ + 1).
 *              |y − 1/x| <= 1e-4/x + 2^(1-f): Goldschmidt's |e0|^4 = 1.24e-5 (it = 2) plus
 *              units in the last place; relative error <= 1e-4 on [2^-f, 8] (measured 2.9e-5),
 *              beyond that the output's own quantum 2^-f dominates. Tested on both sides of
 *              every power of two of the range.
 *              normalize: thresholds: x in [2^-f, 2^(f-1)). Normalization by a batched
 *              comparison against the public powers 2^j (one lt of J·n elements),
 *              c = x·2^-(q+1) in [0.5, 1), then Goldschmidt from w0 = 2.9142 - 2c (SPU
 *              f_reciprocal): |1 - c·w0| <= 0.0858, relative error <= 0.0858^(2^(it+1)) +
 *              fixed point; it = 2: tested at 2e-4·(1/x) + 2^(1-f) absolute.
 *   rsqrt      normalize: bitdec: x in [2^-f, 2^(w-f)) as reciprocal; c = x·2^(f−q) in
 *              [1, 2), a degree-4 polynomial (7.40e-5), the scale 2^((f−q)/2) with its √2;
 *              |y − x^-1/2| <= 7.9e-5·x^-1/2 + 2^-f over the range, relative <= 9.0e-5 on
 *              [2^-f, 8) (k_rsqrt_bits).
 *              normalize: thresholds: x > 0 in [2^-f, 2^(2⌊f/2⌋+2)) (1e-3 … 1e4 well inside).
 *              Even powers: c = x·2^-q in [1, 4), quadratic start 1.3353 - 0.41060c +
 *              0.051197c² (relative error <= 2.41e-2), then cfg.rsqrt_iters Newton steps
 *              y(3 - c·y²)/2, each squaring the relative error ×1.5: 2 steps: <= 1.2e-6 + fixed
 *              point; tested at 1e-4·y + 2^(1-f).
 *   gelu, silu PUMA piecewise polynomials (mpc-costs.md §2.4); error vs the exact functions:
 *              gelu <= 2.1e-2 (0.0199 at x = 3+), silu <= 7.5e-2 (0.0719 at x = 4+:
 *              PUMA puts x above 4 where silu(4) = 3.928) absolute: the polynomials' own error.
 *   softmax    PUMA: row max, exp(x - max) masked to 0 below cfg.softmax_clip (with exp: pow2
 *              only when the clip lies above −(f+1)·ln 2, where that exp is not already 0),
 *              one reciprocal per row; error is that of exp plus the reciprocal's.
 *   lt         exact for |x - y| < 2^63 (msb of x - y); eq exact. With an op's bit bound w
 *              (op.bits): lt, max, sort exact for x − y in [−2^(w−1), 2^(w−1)), eq for
 *              |x − y| < 2^w; one-hot indices in [0, n) need only ⌈log2 n⌉ bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_int.h"

/* ---- variants: names resolved once per engine ------------------------------------------- */

const kv_trunc_row kv_trunc_tab[KV_TRUNC_N] = {
    [KV_TRUNC_PAIR] = {"pair", "a dealt pair r, r >> f and msb(r): exact for |x| < 2^62"},
    [KV_TRUNC_LOCAL] = {"local", "the shares truncated locally: wrong with probability |x|/2^64"},
    [KV_TRUNC_SPU] = {"spu", "SPU's TruncAPr message pattern (aby3: full words from P2 to both; "
                             "semi2k: the pair)"},
};

/* Row v's name in a table of rows of size `stride` whose first member is the name. */
#define KV_NAME(tab, v) (*(const char *const *)((const char *)(tab) + (size_t)(v) * sizeof *(tab)))

static int kv_find(const void *tab, size_t stride, int n, const char *name, int unset, int *out)
{
    if (!name[0]) {
        *out = unset;
        return MS_OK;
    }
    for (int v = 0; v < n; v++)
        if (!strcmp(*(const char *const *)((const char *)tab + (size_t)v * stride), name)) {
            *out = v;
            return MS_OK;
        }
    return MS_ERR_INPUT;
}

#define KV_FIND(tab, n, name, unset, field)                           \
    do {                                                              \
        int v_;                                                       \
        if (kv_find((tab), sizeof *(tab), (n), (name), (unset), &v_)) \
            return MS_ERR_INPUT;                                      \
        field = v_;                                                   \
    } while (0)

int kern_configure(const proto_cfg *cfg, kern_conf *kv)
{
    kern_conf t;
    KV_FIND(kv_msb_tab, KV_MSB_N, cfg->msb, KV_MSB_KS, t.msb);
    KV_FIND(kv_topk_tab, KV_TOPK_N, cfg->topk, KV_TOPK_NETWORK, t.topk);
    KV_FIND(kv_exp_tab, KV_EXP_N, cfg->exp, KV_EXP_POW2, t.exp);
    KV_FIND(kv_norm_tab, KV_NORM_N, cfg->normalize, KV_NORM_BITDEC, t.normalize);
    KV_FIND(kv_approx_tab, KV_APPROX_N, cfg->approx, KV_APPROX_PUMA, t.approx);
    t.trunc = cfg->trunc_local ? KV_TRUNC_LOCAL : KV_TRUNC_PAIR;
    KV_FIND(kv_compat_tab, KV_COMPAT_N, cfg->compat, KV_COMPAT_NATIVE, t.compat);
    errbuf ce;
    if (kern_compat_check(cfg, &ce))
        return MS_ERR_INPUT;
    const kv_compat_row *pf = &kv_compat_tab[t.compat]; /* the profile's choices win */
    if (pf->msb >= 0)
        t.msb = (kv_msb)pf->msb;
    if (pf->topk >= 0)
        t.topk = (kv_topk)pf->topk;
    /* exp: pade is SPU's fxp_exp_mode EXP_PADE, kept under compat: spu */
    if (pf->exp >= 0 && (t.exp != KV_EXP_PADE || t.compat != KV_COMPAT_SPU))
        t.exp = (kv_exp)pf->exp;
    if (pf->normalize >= 0)
        t.normalize = (kv_norm)pf->normalize;
    if (pf->approx >= 0)
        t.approx = (kv_approx)pf->approx;
    if (pf->trunc >= 0)
        t.trunc = (kv_trunc)pf->trunc;
    *kv = t;
    return MS_OK;
}

const char *kern_variant_name(const char *family, int v)
{
    if (v < 0)
        return NULL;
    if (!strcmp(family, "msb"))
        return v < KV_MSB_N ? KV_NAME(kv_msb_tab, v) : NULL;
    if (!strcmp(family, "topk"))
        return v < KV_TOPK_N ? KV_NAME(kv_topk_tab, v) : NULL;
    if (!strcmp(family, "exp"))
        return v < KV_EXP_N ? KV_NAME(kv_exp_tab, v) : NULL;
    if (!strcmp(family, "normalize"))
        return v < KV_NORM_N ? KV_NAME(kv_norm_tab, v) : NULL;
    if (!strcmp(family, "approx"))
        return v < KV_APPROX_N ? KV_NAME(kv_approx_tab, v) : NULL;
    if (!strcmp(family, "trunc"))
        return v < KV_TRUNC_N ? KV_NAME(kv_trunc_tab, v) : NULL;
    if (!strcmp(family, "compat"))
        return v < KV_COMPAT_N ? KV_NAME(kv_compat_tab, v) : NULL;
    return NULL;
}

/* ---- dispatcher -------------------------------------------------------------------------- */

static int bad(errbuf *err, const op *o, size_t idx, const char *why)
{
    return err_set(err, MS_ERR_INPUT, "error: op %zu (%s): %s", idx, op_kind_name(o->kind), why);
}

/* The public operand of add_pub / mul_pub: tensor in1 (cycled to n) or the scalar farg. */
static int pub_operand(eng *e, const op *o, const mpc_val *vals, const mpc_val *x, int as_mul,
                       uint64_t **buf, const uint64_t **c, size_t *nc, uint64_t *scalar)
{
    *buf = NULL;
    if (o->in[1] == OP_NONE) {
        *scalar = FX(o->farg);
        *c = scalar;
        *nc = 1;
        return MS_OK;
    }
    const mpc_val *pv = &vals[o->in[1]];
    *c = pv->s[0];
    *nc = pv->n;
    if (pv->s[0] && pv->n != x->n && pv->n != 1) {
        TRY(pub64(x, x->n, buf));
        for (size_t i = 0; i < x->n; i++)
            (*buf)[i] = pv->s[0][i % pv->n];
        *c = *buf;
        *nc = x->n;
    }
    (void)as_mul;
    return MS_OK;
}

static int k_exec_ew(eng *e, const op_program *p, const op *o, mpc_val *vals, mpc_val *z,
                     size_t idx, errbuf *err);
static int k_view(eng *e, const op_program *p, const op *o, mpc_val *vals, mpc_val *z);

static int k_view_in_place(eng *e, const op_program *p, const op *o, mpc_val *vals, size_t idx,
                           errbuf *err);

int kern_exec(eng *e, const op_program *p, size_t idx, mpc_val *vals, errbuf *err)
{
    const op *o = &p->ops[idx];
    for (int i = 0; i < 3; i++)
        if (o->in[i] != OP_NONE && o->in[i] >= p->n_tens)
            return bad(err, o, idx, "operand tensor id out of range");
    if (o->out >= p->n_tens)
        return bad(err, o, idx, "result tensor id out of range");
    if (o->kind == OP_VIEW && (o->flags & OPF_IN_PLACE) && VT->scatter)
        return k_view_in_place(e, p, o, vals, idx, err);
    mpc_val z = {0};
    int rc = k_exec_ew(e, p, o, vals, &z, idx, err);
    if (rc)
        return rc;
    mpc_val *out = &vals[o->out];
    if (o->kind != OP_INPUT && has_data(out))
        VT->release(e, out);
    *out = z;
    return MS_OK;
}

static const mpc_val *operand(const op *o, const mpc_val *vals, int i)
{
    return o->in[i] == OP_NONE ? NULL : &vals[o->in[i]];
}

static int k_dispatch(eng *e, const op_program *p, const op *o, mpc_val *vals, const mpc_val *x,
                      const mpc_val *y, const mpc_val *w, mpc_val *z, size_t idx, errbuf *err);

/* The right operand of a matmul as the engine sees it: yb instances of k·n elements, yb the
 * operand's own batch when it divides the op's (shared across instances, op.h: GQA), each
 * instance the leading k·n elements of the tensor's instance (a KV cache longer than the
 * attended length). */
static int k_mm_operand(eng *e, const op_program *p, const op *o, const mpc_val *y, mpc_val *view,
                        int *owned, errbuf *err, size_t idx)
{
    const op_tensor *t = &p->tens[o->in[1]];
    size_t kn = (size_t)o->k * o->n, stride = (size_t)t->rows * t->cols;
    size_t yb =
        (t->batch && t->batch <= o->batch && o->batch % t->batch == 0) ? t->batch : o->batch;
    *owned = 0;
    if (y->n == yb * kn || (o->flags & OPF_PUBLIC_B)) {
        *view = *y;
        return MS_OK;
    }
    if (stride < kn || y->n < yb * stride)
        return bad(err, o, idx, "right operand smaller than the op's k×n instances");
    *owned = 1;
    return kperm(e, view, y, yb * kn, (kmap){MAP_ROWS, stride, 0, kn, 0});
}

/* Element-wise binary ops broadcast a smaller operand cyclically (op.h: a 1×n bias or gain
 * repeats over rows and batch instances); matmuls get their right-operand view. */
static int k_exec_ew(eng *e, const op_program *p, const op *o, mpc_val *vals, mpc_val *z,
                     size_t idx, errbuf *err)
{
    const mpc_val *in[3] = {operand(o, vals, 0), operand(o, vals, 1), operand(o, vals, 2)};
    mpc_val tmp[3];
    int own[3] = {0, 0, 0}, rc = MS_OK;
    int k = o->kind;
    if (k == OP_ADD || k == OP_SUB || k == OP_MUL || k == OP_SELECT || k == OP_LT || k == OP_EQ) {
        size_t N = 0;
        for (int i = 0; i < 3; i++)
            if (in[i] && in[i]->n > N)
                N = in[i]->n;
        for (int i = 0; i < 3 && !rc; i++)
            if (in[i] && in[i]->n < N) {
                if (in[i]->n == 0 || N % in[i]->n)
                    return bad(err, o, idx, "operand sizes do not broadcast");
                rc = kperm(e, &tmp[i], in[i], N, (kmap){MAP_REP, in[i]->n, 0, 0, 0});
                own[i] = !rc;
                in[i] = &tmp[i];
            }
    } else if ((k == OP_MATMUL || k == OP_GATHER) && in[0] && in[1]) {
        rc = k_mm_operand(e, p, o, in[1], &tmp[1], &own[1], err, idx);
        in[1] = &tmp[1];
    }
    if (!rc)
        rc = k == OP_VIEW && in[0] ? k_view(e, p, o, vals, z)
                                   : k_dispatch(e, p, o, vals, in[0], in[1], in[2], z, idx, err);
    for (int i = 0; i < 3; i++)
        if (own[i])
            krel(e, &tmp[i]);
    return rc;
}

/* ---- op kernels: an op's operands and arguments to a kernel ------------------------------ */

/* The checks every op passes before its kernel: the bit bound, the operands its kind needs,
 * a row op's and a one-hot's operand size. */
static int kop_check(const op *o, const mpc_val *x, const mpc_val *y, const mpc_val *w, size_t idx,
                     errbuf *err)
{
    size_t R = (size_t)o->batch * o->m;
    if (o->bits > 64 || (o->bits == 1 && o->kind != OP_EQ && o->kind != OP_ONEHOT))
        return bad(err, o, idx, "bit bound out of range (lt, max, sort: 2 … 64; eq: 1 … 64)");
    int need1 = o->kind != OP_INPUT;
    int need2 = o->kind == OP_ADD || o->kind == OP_SUB || o->kind == OP_MUL ||
                o->kind == OP_MATMUL || o->kind == OP_LT || o->kind == OP_EQ ||
                o->kind == OP_SELECT || o->kind == OP_GATHER;
    if ((need1 && !x) || (need2 && !y) || (o->kind == OP_SELECT && !w))
        return bad(err, o, idx, "missing operand");
    if (op_kind_shape(o->kind) == OPS_ROW && x->n < R * o->n)
        return bad(err, o, idx, "operand smaller than batch × m × n");
    if (o->kind == OP_ONEHOT && x->n < R)
        return bad(err, o, idx, "index operand smaller than batch × m");
    return MS_OK;
}

/* z = t truncated by f (trunc) or t itself; consumes t. */
static int k_settle(eng *e, mpc_val *z, mpc_val *t, int trunc)
{
    if (!trunc) {
        *z = *t;
        return MS_OK;
    }
    int rc = k_trunc(e, z, t, e->cfg.frac_bits);
    krel(e, t);
    return rc;
}

/* INPUT: the owner shares the plaintext bound to the op's output (vals[out].s[0]). */
static int kop_input(eng *e, const op_program *p, const op *o, const mpc_val *vals, mpc_val *z)
{
    const mpc_val *dst = &vals[o->out];
    TRY(kal(e, z, dst->n, DOM_ARITH));
    return VT->input(e, z, op_input_owner(p, o, e->n_parties), dst->s[0]);
}

static int kop_addsub(eng *e, const op *o, const mpc_val *x, const mpc_val *y, mpc_val *z)
{
    TRY(kal(e, z, x->n, x->dom));
    return o->kind == OP_ADD ? VT->add(e, z, x, y) : VT->sub(e, z, x, y);
}

/* ADD_PUB, MUL_PUB: x with the public operand (pub_operand); an arithmetic product is
 * truncated unless OPF_NO_TRUNC. */
static int kop_pub(eng *e, const op *o, const mpc_val *vals, const mpc_val *x, mpc_val *z)
{
    uint64_t *buf, scalar;
    const uint64_t *c;
    size_t nc;
    int add = o->kind == OP_ADD_PUB;
    TRY(pub_operand(e, o, vals, x, !add, &buf, &c, &nc, &scalar));
    mpc_val t;
    int rc = kal(e, &t, x->n, x->dom);
    if (!rc)
        rc = add ? VT->add_pub(e, &t, x, c, nc) : VT->mul_pub(e, &t, x, c, nc);
    free(buf);
    TRY(rc);
    return k_settle(e, z, &t, !add && !(o->flags & OPF_NO_TRUNC) && x->dom != DOM_BOOL);
}

static int kop_square(eng *e, const op *o, const mpc_val *x, mpc_val *z)
{
    if (!(o->flags & OPF_NO_TRUNC))
        return k_fsq(e, z, x);
    TRY(kal(e, z, x->n, DOM_ARITH));
    return VT->square(e, z, x);
}

/* MATMUL, GATHER: local by a public B (k_matmul_pub), else the engine's matmul; a fixed-point
 * product is truncated (GATHER's one-hot rows need none). */
static int kop_matmul(eng *e, const op *o, const mpc_val *x, const mpc_val *y, mpc_val *z)
{
    mpc_val t;
    if (o->flags & OPF_PUBLIC_B) {
        TRY(k_matmul_pub(e, &t, x, y, o->batch, o->m, o->k, o->n, (o->flags & OPF_TRANS_B) != 0));
    } else {
        TRY(kal(e, &t, (size_t)o->batch * o->m * o->n, DOM_ARITH));
        int rc = VT->matmul(e, &t, x, y, o->batch, o->m, o->k, o->n, o->flags, o->in[1]);
        if (rc) { /* operands of the wrong size: nothing kept */
            krel(e, &t);
            return rc;
        }
    }
    return k_settle(e, z, &t, o->kind != OP_GATHER && !(o->flags & OPF_NO_TRUNC));
}

static int kop_b2a(eng *e, const mpc_val *x, mpc_val *z)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    return VT->b2a(e, z, x);
}

/* LAYERNORM (gain in1, bias in2), RMSNORM (gain in1); each public or secret. */
static int kop_norm(eng *e, const op_program *p, const op *o, const mpc_val *x, const mpc_val *y,
                    const mpc_val *w, mpc_val *z)
{
    int ln = o->kind == OP_LAYERNORM;
    int gp = y && p->tens[o->in[1]].role == OPT_PUBLIC;
    int bp = w && p->tens[o->in[2]].role == OPT_PUBLIC;
    return k_norm(e, z, x, (size_t)o->batch * o->m, o->n, ln, o->farg > 0 ? o->farg : 1e-5, y, gp,
                  ln ? w : NULL, bp);
}

static int kop_topk(eng *e, const op *o, const mpc_val *x, int wb, mpc_val *z, size_t idx,
                    errbuf *err)
{
    size_t k = o->iarg > 0 ? (size_t)o->iarg : 1, n = o->n;
    if (kv_topk_tab[e->kv.topk].shuffles && (!VT->shuffle || !VT->sync_public))
        return bad(err, o, idx,
                   "topk quickselect needs a secret shuffle, which this engine "
                   "does not have (use topk=network)");
    return k_topk(e, z, x, (size_t)o->batch * o->m, n, k < n ? k : n, wb);
}

static int kop_reveal(eng *e, const op *o, const mpc_val *x, mpc_val *z)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    TRY(VT->open(e, z->s[0], x, o->iarg));
    /* to all: public at every node, semi2k's dealer included (eng publish) */
    return o->iarg < 0 && VT->publish ? VT->publish(e, z) : MS_OK;
}

static int k_dispatch(eng *e, const op_program *p, const op *o, mpc_val *vals, const mpc_val *x,
                      const mpc_val *y, const mpc_val *w, mpc_val *z, size_t idx, errbuf *err)
{
    size_t R = (size_t)o->batch * o->m, n = o->n, m = o->m ? o->m : 1;
    int f = e->cfg.frac_bits, notrunc = (o->flags & OPF_NO_TRUNC) != 0;
    int wb = o->bits ? o->bits : 64; /* the compared operands' public bit bound (op.h) */
    TRY(kop_check(o, x, y, w, idx, err));
    switch ((op_kind)o->kind) {
    case OP_INPUT: return kop_input(e, p, o, vals, z);
    case OP_ADD:
    case OP_SUB: return kop_addsub(e, o, x, y, z);
    case OP_ADD_PUB:
    case OP_MUL_PUB: return kop_pub(e, o, vals, x, z);
    case OP_MUL: return notrunc ? k_imul(e, z, x, y) : k_fmul(e, z, x, y);
    case OP_SQUARE: return kop_square(e, o, x, z);
    case OP_MATMUL:
    case OP_GATHER: return kop_matmul(e, o, x, y, z);
    case OP_TRUNC: return k_trunc(e, z, x, o->iarg > 0 ? o->iarg : f);
    case OP_LT: return k_lt(e, z, x, y, wb);
    case OP_EQ: return k_eq(e, z, x, y, wb);
    case OP_SELECT: return k_select(e, z, x, y, w);
    case OP_A2B: return k_a2b(e, z, x);
    case OP_B2A: return kop_b2a(e, x, z);
    case OP_MAX: return k_rowmax(e, z, NULL, x, R, n, wb);
    case OP_ARGMAX: return k_argmax(e, z, x, R, n, wb);
    case OP_EXP: return k_exp(e, z, x);
    case OP_RECIPROCAL: return k_recip(e, z, x, -f, o->bits);
    case OP_RSQRT: return k_rsqrt(e, z, x, -f, o->bits);
    case OP_SOFTMAX: return k_softmax(e, z, x, R, m, n, o->iarg);
    case OP_GELU: return k_gelu(e, z, x);
    case OP_SILU: return k_silu(e, z, x);
    case OP_LAYERNORM:
    case OP_RMSNORM: return kop_norm(e, p, o, x, y, w, z);
    case OP_TOPK: return kop_topk(e, o, x, wb, z, idx, err);
    case OP_SORT: return k_sort(e, z, x, R, n, wb, o->iarg == 1);
    case OP_ONEHOT: return k_onehot_w(e, z, x, n, o->bits);
    case OP_ROPE:
        return k_rope(e, z, x, R, m, n, o->k ? o->k : n, o->iarg, o->farg > 0 ? o->farg : 10000.0);
    case OP_REVEAL: return kop_reveal(e, o, x, z);
    case OP_VIEW: return k_view(e, p, o, vals, z);
    case OP_N_KINDS: break;
    }
    return bad(err, o, idx, "unknown op kind");
}

/* VIEW with OPF_SPLIT_HEADS / OPF_MERGE_HEADS (op.h): a public transposition between
 * (seqs·tokens, heads·n) and (seqs·heads, tokens, n); op.batch = seqs·heads, m = tokens,
 * n = head size; heads = the token-major tensor's columns / n. */
static int k_view_heads(eng *e, const op_program *p, const op *o, const mpc_val *x, mpc_val *z)
{
    int split = (o->flags & OPF_SPLIT_HEADS) != 0;
    const op_tensor *tm = &p->tens[split ? o->in[0] : o->out]; /* token-major side */
    size_t m = o->m, hk = o->n ? o->n : 1, heads = tm->cols / hk, nout = x->n;
    size_t seqs = heads ? o->batch / heads : 0;
    if (!heads || !seqs || seqs * heads * m * hk != nout)
        return MS_ERR_INPUT;
    uint32_t *idx;
    TRY(pub32(x, nout, &idx));
    if (idx)
        for (size_t s = 0; s < seqs; s++)
            for (size_t h = 0; h < heads; h++)
                for (size_t r = 0; r < m; r++)
                    for (size_t c = 0; c < hk; c++) {
                        size_t tok = ((s * m + r) * heads + h) * hk + c; /* token-major */
                        size_t hd = ((s * heads + h) * m + r) * hk + c;  /* head-major */
                        if (split)
                            idx[hd] = (uint32_t)tok;
                        else
                            idx[tok] = (uint32_t)hd;
                    }
    int rc = k_move(e, z, x, idx, nout, x->dom);
    free(idx);
    return rc;
}

/* VIEW with OPF_INDEX_ROWS / OPF_INDEX_COLS (op.h): the rows or columns of in0 named by the
 * public index tensor in1, per instance of out; a fixed operand's mask follows (fixed_view).
 * An index 2^64 − 1 is a zero row (column): element 0 permuted there, then multiplied by a
 * public 0 (local; only when a pad occurs, which the indices alone decide — the cost engine,
 * without them, charges the permute only). */
static int k_view_index(eng *e, const op_program *p, const op *o, mpc_val *vals, mpc_val *z)
{
    const mpc_val *x = &vals[o->in[0]], *iv = &vals[o->in[1]];
    const op_tensor *ti = &p->tens[o->in[0]], *to = &p->tens[o->out], *tx = &p->tens[o->in[1]];
    int rows = (o->flags & OPF_INDEX_ROWS) != 0;
    size_t B = to->batch, R = to->rows, C = to->cols, nout = B * R * C, A = tx->rows;
    if ((rows ? R : C) != A || tx->batch != B || (rows ? C != ti->cols : R != ti->rows))
        return MS_ERR_INPUT;
    uint32_t *idx = NULL, *src = NULL;
    uint64_t *keep = NULL;
    size_t pads = 0;
    TRY(pub32(iv, nout, &idx)); /* the indices are public: known wherever they are bound */
    for (size_t i = 0; idx && i < nout; i++) {
        size_t b = i / (R * C), r = (i / C) % R, c = i % C;
        uint64_t j = iv->s[0][b * A + (rows ? r : c)];
        if (j == UINT64_MAX) {
            idx[i] = UINT32_MAX, pads++;
            continue;
        }
        if (j >= (rows ? ti->rows : ti->cols)) {
            free(idx);
            return MS_ERR_INPUT;
        }
        idx[i] = (uint32_t)(rows ? j * ti->cols + c : r * ti->cols + j);
    }
    if (pads) {
        src = malloc(nout * sizeof *src), keep = malloc(nout * sizeof *keep);
        for (size_t i = 0; src && keep && i < nout; i++)
            src[i] = idx[i] == UINT32_MAX ? 0 : idx[i], keep[i] = idx[i] != UINT32_MAX;
    }
    int rc =
        pads && (!src || !keep) ? MS_ERR_NOMEM : k_move(e, z, x, pads ? src : idx, nout, x->dom);
    if (!rc && pads)
        rc = VT->mul_pub(e, z, z, keep, nout);
    if (!rc && (o->flags & OPF_FIXED_B) && VT->fixed_view)
        rc = VT->fixed_view(e, o->out, o->in[0], idx, nout);
    free(idx), free(src), free(keep);
    return rc;
}

/* VIEW with OPF_INDEX_BLOCKS (op.h): from a public 0/1 block indicator (b, NB, 1), the indices
 * of the selected blocks' units (iarg units a block, k in all) in increasing order, 2^64 − 1
 * past them. Plaintext wherever the indicator is (every compute party after a REVEAL to all,
 * semi2k's dealer by eng publish); a shape alone in cost mode. */
static int k_view_blocks(eng *e, const op_program *p, const op *o, const mpc_val *x, mpc_val *z)
{
    const op_tensor *ti = &p->tens[o->in[0]], *to = &p->tens[o->out];
    size_t B = ti->batch, NB = (size_t)ti->rows * ti->cols, A = (size_t)to->rows * to->cols;
    size_t bs = o->iarg > 0 ? (size_t)o->iarg : 0, U = o->k;
    if (!bs || to->batch != B || NB != (U + bs - 1) / bs)
        return MS_ERR_INPUT;
    TRY(kal(e, z, B * A, DOM_ARITH));
    if (!has_data(x))
        return MS_OK;
    if (!z->s[0] && !(z->s[0] = calloc(B * A + 1, sizeof *z->s[0]))) /* semi2k's dealer */
        return MS_ERR_NOMEM;
    for (size_t b = 0; b < B; b++) {
        uint64_t *out = z->s[0] + b * A;
        size_t a = 0;
        for (size_t k = 0; k < NB; k++)
            for (size_t u = k * bs; x->s[0][b * NB + k] && u < (k + 1) * bs && u < U && a < A; u++)
                out[a++] = u;
        for (; a < A; a++)
            out[a] = UINT64_MAX;
    }
    return MS_OK;
}

/* VIEW as a public slice: rows r0… of each instance of in0 (out smaller), or a copy (same
 * size); a source element past in0's value reads element i mod its length. */
static int k_view_slice(eng *e, const op_tensor *ti, const op_tensor *to, const mpc_val *x,
                        size_t r0, mpc_val *z)
{
    size_t nin = (size_t)ti->batch * ti->rows * ti->cols;
    size_t nout = (size_t)to->batch * to->rows * to->cols;
    uint32_t *idx;
    TRY(pub32(x, nout, &idx));
    if (idx)
        for (size_t i = 0; i < nout; i++) {
            size_t b = i / ((size_t)to->rows * to->cols), r = (i / to->cols) % to->rows,
                   c = i % to->cols;
            size_t src = nout == nin ? i : (b * ti->rows + r0 + r) * ti->cols + c;
            idx[i] = (uint32_t)(src < x->n ? src : i % (x->n ? x->n : 1));
        }
    int rc = k_move(e, z, x, idx, nout, x->dom);
    free(idx);
    return rc;
}

/* VIEW as an append: [old out; in0] permuted so that rows r0 … r0+m−1 of each instance of out
 * come from in0 (whose rows may hold the instances side by side: (tokens, heads·n)). */
static int k_view_append(eng *e, const op *o, const op_tensor *ti, const op_tensor *to,
                         const mpc_val *x, const mpc_val *prev, size_t r0, mpc_val *z)
{
    size_t nout = (size_t)to->batch * to->rows * to->cols;
    mpc_val old, parts[2], cat;
    if (has_data(prev) && prev->n == nout)
        TRY(k_rep(e, &old, prev, 1));
    else
        TRY(k_const(e, &old, x, nout, 0));
    parts[0] = old, parts[1] = *x;
    TRY(k_concat(e, &cat, parts, 2));
    uint32_t *idx;
    TRY(pub32(x, nout, &idx));
    if (idx) {
        size_t n = o->n ? o->n : to->cols, m = o->m, heads = ti->cols / (n ? n : 1);
        heads = heads ? heads : 1;
        for (size_t i = 0; i < nout; i++)
            idx[i] = (uint32_t)i;
        for (size_t b = 0; b < to->batch; b++)
            for (size_t r = 0; r < m && r0 + r < to->rows; r++)
                for (size_t c = 0; c < n && c < to->cols; c++) {
                    size_t s = b / heads, h = b % heads;
                    size_t src = (s * m + r) * ti->cols + h * n + c;
                    if (src < x->n)
                        idx[(b * to->rows + r0 + r) * to->cols + c] = (uint32_t)(nout + src);
                }
    }
    int rc = k_move(e, z, &cat, idx, nout, x->dom);
    free(idx);
    krel(e, &old);
    krel(e, &cat);
    return rc;
}

/* VIEW with OPF_IN_PLACE (op.h): in0 (B, m, n) into rows iarg … of each instance of out, out
 * updated where it is (allocated, zero, at its first write): B·m·n elements move. Without an
 * engine scatter the flag is ignored and the append re-lays out (the same values). */
static int k_view_in_place(eng *e, const op_program *p, const op *o, mpc_val *vals, size_t idx,
                           errbuf *err)
{
    const op_tensor *to = &p->tens[o->out];
    size_t B = o->batch, m = o->m, C = o->n, r0 = o->iarg > 0 ? (size_t)o->iarg : 0;
    size_t nin = B * m * C, nout = (size_t)to->batch * to->rows * to->cols;
    if (o->in[0] == OP_NONE || o->in[0] == o->out || to->batch != B || to->cols != C ||
        r0 + m > to->rows || (o->flags & ~(uint32_t)OPF_IN_PLACE))
        return bad(err, o, idx,
                   "an in-place view writes (batch, m, n) at row iarg of a distinct result of "
                   "that batch and n columns");
    const mpc_val *x = &vals[o->in[0]];
    mpc_val *z = &vals[o->out];
    if (x->n < nin)
        return bad(err, o, idx, "operand smaller than batch × m × n");
    if (z->n != nout || z->dom != x->dom || (has_data(x) && !has_data(z))) {
        if (has_data(z))
            VT->release(e, z);
        TRY(kal(e, z, nout, x->dom));
    }
    uint32_t *at;
    TRY(pub32(x, nin, &at));
    for (size_t i = 0; at && i < nin; i++) {
        size_t b = i / (m * C), r = (i / C) % m, c = i % C;
        at[i] = (uint32_t)((b * to->rows + r0 + r) * C + c);
    }
    int rc = VT->scatter(e, z, x, at, nin);
    free(at);
    return rc;
}

/* VIEW (op.h), local: a slice, an append into a larger tensor at row iarg, or a copy. */
static int k_view(eng *e, const op_program *p, const op *o, mpc_val *vals, mpc_val *z)
{
    if (o->flags & OPF_INDEX_BLOCKS)
        return k_view_blocks(e, p, o, &vals[o->in[0]], z);
    if ((o->flags & (OPF_INDEX_ROWS | OPF_INDEX_COLS)) && o->in[1] != OP_NONE)
        return k_view_index(e, p, o, vals, z);
    const mpc_val *x = &vals[o->in[0]];
    const op_tensor *ti = &p->tens[o->in[0]], *to = &p->tens[o->out];
    size_t nin = (size_t)ti->batch * ti->rows * ti->cols;
    size_t nout = (size_t)to->batch * to->rows * to->cols;
    size_t r0 = o->iarg > 0 ? (size_t)o->iarg : 0;
    if ((o->flags & (OPF_SPLIT_HEADS | OPF_MERGE_HEADS)) && nout == nin)
        return k_view_heads(e, p, o, x, z);
    if (nout <= nin || x->n < nin)
        return k_view_slice(e, ti, to, x, r0, z);
    return k_view_append(e, o, ti, to, x, &vals[o->out], r0, z);
}
