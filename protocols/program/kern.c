/* kern.c — every op kind of the op program, written once over the primitive layer (eng.h).
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

#include "kern.h"

#define VT (e->vt)
#define TRY(expr)         \
    do {                  \
        int rc_ = (expr); \
        if (rc_)          \
            return rc_;   \
    } while (0)

/* ---- fixed point ------------------------------------------------------------------------- */

uint64_t fx_encode(double x, int frac_bits)
{
    double v = ldexp(x, frac_bits);
    if (!(v < 9.2e18))
        v = 9.2e18;
    if (!(v > -9.2e18))
        v = -9.2e18;
    return (uint64_t)(int64_t)llround(v);
}

double fx_decode(uint64_t v, int frac_bits) { return ldexp((double)(int64_t)v, -frac_bits); }

/* ---- small helpers: storage, public buffers, layout --------------------------------------- */

static int has_data(const mpc_val *v) { return v->s[0] != NULL; }

static int kal(eng *e, mpc_val *v, size_t n, int dom)
{
    memset(v, 0, sizeof *v);
    return VT->alloc(e, v, n, dom);
}

static void krel(eng *e, mpc_val *v)
{
    VT->release(e, v);
    memset(v, 0, sizeof *v);
}

/* Public buffers exist only when values carry data. */
static int pub64(const mpc_val *like, size_t n, uint64_t **out)
{
    *out = NULL;
    if (!has_data(like))
        return MS_OK;
    *out = malloc((n ? n : 1) * sizeof **out);
    return *out ? MS_OK : MS_ERR_NOMEM;
}

static int pub32(const mpc_val *like, size_t n, uint32_t **out)
{
    *out = NULL;
    if (!has_data(like))
        return MS_OK;
    *out = malloc((n ? n : 1) * sizeof **out);
    return *out ? MS_OK : MS_ERR_NOMEM;
}

#define FX(x) fx_encode((x), e->cfg.frac_bits)

/* Index-map permutes: z[i] = x[map(i)] for the maps the kernels use. */
enum { MAP_REP, MAP_BCAST, MAP_SLICE, MAP_ROWS };

typedef struct kmap {
    int kind;
    size_t a, b, c, d; /* REP: n_in; BCAST: per; SLICE: off; ROWS: L, off, len */
} kmap;

static uint32_t kmap_at(const kmap *m, size_t i)
{
    switch (m->kind) {
    case MAP_REP: return (uint32_t)(i % m->a);
    case MAP_BCAST: return (uint32_t)(i / m->a);
    case MAP_SLICE: return (uint32_t)(m->a + i);
    default: return (uint32_t)((i / m->c) * m->a + m->b + i % m->c);
    }
}

/* z = x[idx[i]] for i < n, a fresh value of domain dom (local; idx NULL in cost mode). */
static int k_move(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n, int dom)
{
    int rc = kal(e, z, n, dom);
    return rc ? rc : VT->permute(e, z, x, idx, n);
}

static int kperm(eng *e, mpc_val *z, const mpc_val *x, size_t n, kmap m)
{
    uint32_t *idx;
    TRY(pub32(x, n, &idx));
    if (idx)
        for (size_t i = 0; i < n; i++)
            idx[i] = kmap_at(&m, i);
    int rc = k_move(e, z, x, idx, n, x->dom);
    free(idx);
    return rc;
}

static int k_rep(eng *e, mpc_val *z, const mpc_val *x, size_t reps)
{
    return kperm(e, z, x, x->n * reps, (kmap){MAP_REP, x->n, 0, 0, 0});
}

static int k_bcast(eng *e, mpc_val *z, const mpc_val *x, size_t per)
{
    return kperm(e, z, x, x->n * per, (kmap){MAP_BCAST, per, 0, 0, 0});
}

static int k_slice(eng *e, mpc_val *z, const mpc_val *x, size_t off, size_t len)
{
    return kperm(e, z, x, len, (kmap){MAP_SLICE, off, 0, 0, 0});
}

/* Per row r < R of length L: columns [off, off+len). */
static int k_cols(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t L, size_t off, size_t len)
{
    return kperm(e, z, x, R * len, (kmap){MAP_ROWS, L, off, len, 0});
}

/* z = [p0; p1; …] (local): each part moved into place, masked, and added (xored) in. */
static int k_concat(eng *e, mpc_val *z, const mpc_val *parts, int np)
{
    size_t tot = 0;
    int dom = parts[0].dom;
    for (int i = 0; i < np; i++)
        tot += parts[i].n;
    TRY(kal(e, z, tot, dom));
    size_t off = 0;
    for (int i = 0; i < np; i++) {
        const mpc_val *p = &parts[i];
        uint32_t *idx = NULL;
        uint64_t *mask = NULL;
        int rc = pub32(p, tot, &idx);
        if (!rc)
            rc = pub64(p, tot, &mask);
        if (idx && mask)
            for (size_t j = 0; j < tot; j++) {
                int in = j >= off && j < off + p->n;
                idx[j] = in ? (uint32_t)(j - off) : 0;
                mask[j] = in ? (dom == DOM_BOOL ? ~0ull : 1) : 0;
            }
        mpc_val t = {0};
        mpc_val *dst = i == 0 ? z : &t;
        if (!rc && i > 0)
            rc = kal(e, &t, tot, dom);
        if (!rc)
            rc = VT->permute(e, dst, p, idx, tot);
        if (!rc)
            rc = VT->mul_pub(e, dst, dst, mask, tot);
        if (!rc && i > 0)
            rc = VT->add(e, z, z, &t);
        free(idx);
        free(mask);
        if (i > 0)
            krel(e, &t);
        TRY(rc);
        off += p->n;
    }
    return MS_OK;
}

/* Public constant broadcast helpers for add_pub / mul_pub. */
static int k_addc(eng *e, mpc_val *z, const mpc_val *x, uint64_t c)
{
    return VT->add_pub(e, z, x, &c, 1);
}

static int k_mulc(eng *e, mpc_val *z, const mpc_val *x, uint64_t c)
{
    return VT->mul_pub(e, z, x, &c, 1);
}

/* z = c·x into a fresh arithmetic value (public ring integer c; local). */
static int k_scaled(eng *e, mpc_val *z, const mpc_val *x, uint64_t c)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    return k_mulc(e, z, x, c);
}

/* z += c·x (public ring integer c; local). */
static int k_addmul(eng *e, mpc_val *z, const mpc_val *x, uint64_t c)
{
    mpc_val t;
    TRY(k_scaled(e, &t, x, c));
    int rc = VT->add(e, z, z, &t);
    krel(e, &t);
    return rc;
}

/* z = x + blk[i / N] (public per-block constants over J blocks of N). */
static int k_addblk(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *blk, size_t J, int mul)
{
    uint64_t *c;
    TRY(pub64(x, x->n, &c));
    size_t N = J ? x->n / J : 0;
    if (c)
        for (size_t i = 0; i < x->n; i++)
            c[i] = blk[N ? i / N : 0];
    int rc = mul ? VT->mul_pub(e, z, x, c, x->n) : VT->add_pub(e, z, x, c, x->n);
    free(c);
    return rc;
}

/* A secret value equal to public c (integer ring constant), length n, derived from x. */
static int k_const(eng *e, mpc_val *z, const mpc_val *x, size_t n, uint64_t c)
{
    TRY(kperm(e, z, x, n, (kmap){MAP_REP, x->n ? x->n : 1, 0, 0, 0}));
    TRY(k_mulc(e, z, z, 0));
    return k_addc(e, z, z, c);
}

/* ---- fixed-point arithmetic --------------------------------------------------------------- */

static int k_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    return VT->trunc(e, z, x, bits);
}

/* z = trunc(x·y) — fixed-point product; z must not alias x or y. */
static int k_fmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    mpc_val t;
    TRY(kal(e, &t, x->n, DOM_ARITH));
    TRY(VT->mul(e, &t, x, y));
    int rc = k_trunc(e, z, &t, e->cfg.frac_bits);
    krel(e, &t);
    return rc;
}

static int k_imul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    return VT->mul(e, z, x, y);
}

static int k_fsq(eng *e, mpc_val *z, const mpc_val *x)
{
    mpc_val t;
    TRY(kal(e, &t, x->n, DOM_ARITH));
    TRY(VT->square(e, &t, x));
    int rc = k_trunc(e, z, &t, e->cfg.frac_bits);
    krel(e, &t);
    return rc;
}

/* z = [a_0·b_0; a_1·b_1; …] (np pairs of equal lengths) in one multiplication, truncated by
 * bits (0: the integer product). */
static int k_mul_batch(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b, int np, int bits)
{
    mpc_val A, B, M;
    TRY(k_concat(e, &A, a, np));
    TRY(k_concat(e, &B, b, np));
    TRY(k_imul(e, bits ? &M : z, &A, &B));
    krel(e, &A), krel(e, &B);
    if (!bits)
        return MS_OK;
    int rc = k_trunc(e, z, &M, bits);
    krel(e, &M);
    return rc;
}

/* out[i] = elements [i·n, (i+1)·n) of x, i < cnt (local). */
static int k_unbatch(eng *e, mpc_val *out, const mpc_val *x, int cnt, size_t n)
{
    for (int i = 0; i < cnt; i++)
        TRY(k_slice(e, &out[i], x, (size_t)i * n, n));
    return MS_OK;
}

/* Raw (2f fraction bits) Σ a_i x^i from the powers pw[i] (fixed point, pw[1] = x); a zero
 * coefficient or a missing power is left out. */
static int k_poly_raw(eng *e, mpc_val *z, mpc_val *const pw[7], const double a[7])
{
    int f = e->cfg.frac_bits;
    TRY(k_scaled(e, z, pw[1], FX(a[1])));
    for (int i = 2; i < 7; i++)
        if (a[i] != 0 && pw[i])
            TRY(k_addmul(e, z, pw[i], FX(a[i])));
    return k_addc(e, z, z, FX(a[0]) << f);
}

/* ---- row layout: tree sums, pair splits ------------------------------------------------- */

/* Splits R rows of length L into A = columns [0,h), B = [h,2h), rest = column L-1 if odd. */
static int k_split(eng *e, const mpc_val *x, size_t R, size_t L, mpc_val *A, mpc_val *B,
                   mpc_val *rest)
{
    size_t h = L / 2;
    TRY(k_cols(e, A, x, R, L, 0, h));
    TRY(k_cols(e, B, x, R, L, h, h));
    if (L & 1)
        TRY(k_cols(e, rest, x, R, L, L - 1, 1));
    return MS_OK;
}

/* Rows of S (R×h) followed by the odd column rest (R×1): z is R×(h+odd). Consumes S, rest. */
static int k_join(eng *e, mpc_val *z, mpc_val *S, mpc_val *rest, size_t R, size_t h, int odd)
{
    if (!odd) {
        *z = *S;
        memset(S, 0, sizeof *S);
        return MS_OK;
    }
    mpc_val parts[2] = {*S, *rest}, cat;
    TRY(k_concat(e, &cat, parts, 2));
    uint32_t *idx;
    TRY(pub32(&cat, R * (h + 1), &idx));
    if (idx)
        for (size_t r = 0; r < R; r++) {
            for (size_t i = 0; i < h; i++)
                idx[r * (h + 1) + i] = (uint32_t)(r * h + i);
            idx[r * (h + 1) + h] = (uint32_t)(R * h + r);
        }
    int rc = k_move(e, z, &cat, idx, R * (h + 1), cat.dom);
    free(idx);
    krel(e, &cat);
    krel(e, S);
    krel(e, rest);
    return rc;
}

/* cur = the rows of S joined with the odd column rest (k_join), cur's old value released. */
static int k_rejoin(eng *e, mpc_val *cur, mpc_val *S, mpc_val *rest, size_t R, size_t h, int odd)
{
    mpc_val nxt;
    TRY(k_join(e, &nxt, S, rest, R, h, odd));
    krel(e, cur);
    *cur = nxt;
    return MS_OK;
}

/* z[r] = sum of row r (R rows of L), local tree of ⌈log2 L⌉ levels. */
static int k_rowsum(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t L)
{
    mpc_val cur;
    TRY(k_rep(e, &cur, x, 1));
    while (L > 1) {
        mpc_val A, B, rest = {0};
        size_t h = L / 2;
        TRY(k_split(e, &cur, R, L, &A, &B, &rest));
        TRY(VT->add(e, &A, &A, &B));
        krel(e, &B);
        TRY(k_rejoin(e, &cur, &A, &rest, R, h, (int)(L & 1)));
        L = h + (L & 1);
    }
    *z = cur;
    return MS_OK;
}

/* z[i] = sum over J blocks of N: x[j·N + i]. */
static int k_blocksum(eng *e, mpc_val *z, const mpc_val *x, size_t J, size_t N)
{
    uint32_t *idx; /* transpose to N rows of J, then row sums */
    TRY(pub32(x, J * N, &idx));
    if (idx)
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < J; j++)
                idx[i * J + j] = (uint32_t)(j * N + i);
    mpc_val t;
    int rc = k_move(e, &t, x, idx, J * N, x->dom);
    free(idx);
    if (!rc)
        rc = k_rowsum(e, z, &t, N, J);
    krel(e, &t);
    return rc;
}

/* ---- boolean circuits: A2B adder, msb, equality ------------------------------------------ */

/* Words with the low half (first n of 2n) all ones: [~0; 0]. */
static int k_lowmask(eng *e, mpc_val *z, const mpc_val *x, size_t n)
{
    uint64_t *m;
    TRY(pub64(x, 2 * n, &m));
    if (m)
        for (size_t i = 0; i < 2 * n; i++)
            m[i] = i < n ? ~0ull : 0;
    int rc = VT->mul_pub(e, z, x, m, 2 * n);
    free(m);
    return rc;
}

/* Boolean sharing of a + b (mod 2^64) by a Kogge–Stone prefix adder (ABY3 §5.3, CrypTen
 * __SPK_circuit): one AND for the generate bits, then 6 levels (spans 1..32), each one and_bb
 * over [P; P] & [G << s; P << s] (the last level needs only P & (G << s)). 7 rounds. */
static int k_ks_add(eng *e, mpc_val *sum, const mpc_val *a, const mpc_val *b)
{
    size_t n = a->n;
    mpc_val P0, G, P, GP, parts[2];
    TRY(kal(e, &P0, n, DOM_BOOL));
    TRY(VT->add(e, &P0, a, b));
    TRY(kal(e, &G, n, DOM_BOOL));
    TRY(VT->and_bb(e, &G, a, b));
    TRY(k_rep(e, &P, &P0, 1));
    for (int s = 1; s <= 32; s *= 2) {
        if (s == 32) { /* last level: G ^= P & (G << 32) */
            mpc_val Sh, T;
            TRY(kal(e, &Sh, n, DOM_BOOL));
            TRY(VT->shift(e, &Sh, &G, -s));
            TRY(kal(e, &T, n, DOM_BOOL));
            TRY(VT->and_bb(e, &T, &P, &Sh));
            TRY(VT->add(e, &G, &G, &T));
            krel(e, &Sh);
            krel(e, &T);
            break;
        }
        parts[0] = G;
        parts[1] = P;
        TRY(k_concat(e, &GP, parts, 2));
        mpc_val Sh, PP, T;
        TRY(kal(e, &Sh, 2 * n, DOM_BOOL));
        TRY(VT->shift(e, &Sh, &GP, -s));
        TRY(k_rep(e, &PP, &P, 2));
        TRY(kal(e, &T, 2 * n, DOM_BOOL));
        TRY(VT->and_bb(e, &T, &PP, &Sh)); /* [P & G<<s ; P & P<<s] */
        TRY(k_lowmask(e, &GP, &GP, n));   /* [G; 0] */
        TRY(VT->add(e, &GP, &GP, &T));    /* G and P&G<<s are disjoint: xor = or */
        krel(e, &G);
        krel(e, &P);
        TRY(k_slice(e, &G, &GP, 0, n));
        TRY(k_slice(e, &P, &GP, n, n));
        krel(e, &Sh);
        krel(e, &PP);
        krel(e, &T);
        krel(e, &GP);
    }
    TRY(kal(e, sum, n, DOM_BOOL));
    TRY(VT->shift(e, sum, &G, -1)); /* carries */
    TRY(VT->add(e, sum, sum, &P0));
    krel(e, &P0);
    krel(e, &G);
    krel(e, &P);
    return MS_OK;
}

/* Two boolean words a, b with a + b = x (mod 2^64): bool_components, and for 3 components a
 * carry-save adder (1 round: maj = ((a^c)&(b^c))^c). */
static int k_two_words(eng *e, mpc_val *a, mpc_val *b, const mpc_val *x)
{
    mpc_val c[3];
    int nc = 0;
    for (int i = 0; i < 3; i++)
        TRY(kal(e, &c[i], x->n, DOM_BOOL));
    TRY(VT->bool_components(e, c, &nc, x));
    if (nc == 3) {
        size_t n = x->n;
        mpc_val bc, mj;
        TRY(kal(e, a, n, DOM_BOOL));
        TRY(VT->add(e, a, &c[0], &c[1]));
        TRY(VT->add(e, a, a, &c[2]));
        TRY(kal(e, b, n, DOM_BOOL));
        TRY(VT->add(e, b, &c[0], &c[2]));
        TRY(kal(e, &bc, n, DOM_BOOL));
        TRY(VT->add(e, &bc, &c[1], &c[2]));
        TRY(kal(e, &mj, n, DOM_BOOL));
        TRY(VT->and_bb(e, &mj, b, &bc));
        TRY(VT->add(e, &mj, &mj, &c[2]));
        TRY(VT->shift(e, b, &mj, -1)); /* carry word */
        krel(e, &bc);
        krel(e, &mj);
        for (int i = 0; i < 3; i++)
            krel(e, &c[i]);
    } else {
        *a = c[0];
        *b = c[1];
        krel(e, &c[2]);
    }
    return MS_OK;
}

/* Boolean sharing of the arithmetic value x: two words, then k_ks_add. */
static int k_a2b(eng *e, mpc_val *z, const mpc_val *x)
{
    mpc_val a, b;
    TRY(k_two_words(e, &a, &b, x));
    TRY(k_ks_add(e, z, &a, &b));
    krel(e, &a);
    krel(e, &b);
    return MS_OK;
}

/* z = x & mask on every word (public constant: local). */
static int k_andc(eng *e, mpc_val *z, const mpc_val *x, uint64_t mask)
{
    uint64_t *m;
    TRY(pub64(x, x->n, &m));
    if (m)
        for (size_t i = 0; i < x->n; i++)
            m[i] = mask;
    int rc = VT->mul_pub(e, z, x, m, x->n);
    free(m);
    return rc;
}

/* z = (x << l) & ml ^ (y << r) & mr (shifts: positive left; local). */
static int k_place2(eng *e, mpc_val *z, const mpc_val *x, int l, uint64_t ml, const mpc_val *y,
                    int r, uint64_t mr)
{
    mpc_val t;
    TRY(kal(e, &t, x->n, DOM_BOOL));
    TRY(VT->shift(e, &t, x, -l));
    TRY(k_andc(e, z, &t, ml));
    TRY(VT->shift(e, &t, y, -r));
    TRY(k_andc(e, &t, &t, mr));
    TRY(VT->add(e, z, z, &t));
    krel(e, &t);
    return MS_OK;
}

/* Bit 63 of z = the carry out of a + b (mod 2^64), other bits garbage: a carry-out tree of
 * (generate, propagate) pairs. SPU's msb_a2b likewise computes only the carry, in 7 rounds
 * and 56 B per comparison by packing the shrinking words (mpc-costs.md §2.3); here every
 * level keeps one 64-bit word per element (no packing across elements). Level 0: g = a & b, p = a ^
 * b. Level k = 1 … 6 combines blocks of 2^(k-1) bits into blocks of 2^k: at the top bit t of each
 * block G = G_hi ^ P_hi & G_lo, and P = P_hi & P_lo kept one bit below the top, so both products of
 * a level are one word: [P_hi at t | P_hi at t-1] & [G_lo at t | P_lo at t-1], one and_bb. 7
 * rounds, as k_ks_add, with one word per level where the prefix adder ANDs two. */
static int k_carry_out(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b)
{
    size_t n = a->n;
    mpc_val G, P, L, R, T;
    TRY(kal(e, &G, n, DOM_BOOL));
    TRY(VT->and_bb(e, &G, a, b));
    TRY(kal(e, &P, n, DOM_BOOL));
    TRY(VT->add(e, &P, a, b));
    TRY(kal(e, &L, n, DOM_BOOL));
    TRY(kal(e, &R, n, DOM_BOOL));
    TRY(kal(e, &T, n, DOM_BOOL));
    for (int k = 1; k <= 6; k++) {
        int h = 1 << (k - 1);
        uint64_t top = 0;
        for (int t = (1 << k) - 1; t < 64; t += 1 << k)
            top |= 1ull << t;
        uint64_t slot = top >> 1;
        if (k == 1) { /* P at every bit: P_hi (t) to t and t-1, P_lo (t-1) stays */
            TRY(k_place2(e, &L, &P, 0, top, &P, -1, slot));
            TRY(k_place2(e, &R, &G, 1, top, &P, 0, slot));
        } else { /* P one below each block's top since level 1 */
            TRY(k_place2(e, &L, &P, 1, top, &P, 0, slot));
            TRY(k_place2(e, &R, &G, h, top, &P, h, slot));
        }
        TRY(VT->and_bb(e, &T, &L, &R));
        TRY(k_andc(e, &G, &G, top));
        TRY(VT->add(e, &G, &G, &T));
        TRY(k_andc(e, &G, &G, top));
        TRY(k_andc(e, &P, &T, slot));
    }
    *z = G;
    krel(e, &P);
    krel(e, &L);
    krel(e, &R);
    krel(e, &T);
    return MS_OK;
}

/* ---- bit-packed comparison circuits (msb: packed) --------------------------------------- */

static int k_packed(const eng *e) { return !strcmp(e->cfg.msb, "packed"); }

static uint64_t lowbits(int b) { return b >= 64 ? ~0ull : (1ull << b) - 1; }

/* Bit W−1 of *G = the carry out of a + b over their low m bits (other bits of G: 0 or garbage
 * below W−1), W = 2^L >= m the window, L = ⌈log2 m⌉ levels. The m bits are moved to the top of
 * the window (the pad = W − m bits below are 0: generate and propagate 0). Level 0: g = a & b
 * on the m bits (priv: a is P0's word, b P1's). Level k combines blocks of 2^(k−1) into blocks
 * of 2^k with G at each block's top t and P one bit below (as k_carry_out), one and_bits over
 * only the bits a later level reads: the G product at t when the block's lower half holds real
 * bits, the P product at t−1 when real bits lie below the block (k < L); the lowest block's P
 * and every all-padding block are never computed. The AND count for m = 63 is 63 + 119. The
 * same tree as SPU's msb_a2b carry (mpc-costs.md §2.3), which packs its words likewise. */
static int k_carry_packed(eng *e, mpc_val *G, const mpc_val *a, const mpc_val *b, int m, int priv)
{
    size_t n = a->n;
    int L = 0;
    while ((1 << L) < m)
        L++;
    int W = 1 << L, pad = W - m;
    mpc_val A, B, P, Lw, Rw, T;
    TRY(kal(e, &A, n, DOM_BOOL));
    TRY(kal(e, &B, n, DOM_BOOL));
    TRY(VT->shift(e, &A, a, -pad));
    TRY(VT->shift(e, &B, b, -pad));
    uint64_t real = lowbits(m) << pad;
    TRY(kal(e, G, n, DOM_BOOL));
    TRY(VT->and_bits(e, G, &A, &B, real, priv));
    TRY(kal(e, &P, n, DOM_BOOL));
    TRY(VT->add(e, &P, &A, &B));
    TRY(k_andc(e, &P, &P, real));
    TRY(kal(e, &Lw, n, DOM_BOOL));
    TRY(kal(e, &Rw, n, DOM_BOOL));
    TRY(kal(e, &T, n, DOM_BOOL));
    for (int k = 1; k <= L; k++) {
        int h = 1 << (k - 1);
        uint64_t top = 0, want = 0;
        for (int t = (1 << k) - 1; t < W; t += 1 << k) {
            int lo = t - (1 << k) + 1;
            top |= 1ull << t;
            if (lo + h > pad)
                want |= 1ull << t; /* G_hi ^ P_hi & G_lo */
            if (lo > pad && k < L)
                want |= 1ull << (t - 1); /* P_hi & P_lo */
        }
        uint64_t slot = top >> 1;
        if (k == 1) {
            TRY(k_place2(e, &Lw, &P, 0, top, &P, -1, slot));
            TRY(k_place2(e, &Rw, G, 1, top, &P, 0, slot));
        } else {
            TRY(k_place2(e, &Lw, &P, 1, top, &P, 0, slot));
            TRY(k_place2(e, &Rw, G, h, top, &P, h, slot));
        }
        TRY(VT->and_bits(e, &T, &Lw, &Rw, want, 0));
        TRY(k_andc(e, G, G, top));
        TRY(VT->add(e, G, G, &T));
        TRY(k_andc(e, G, G, top));
        TRY(k_andc(e, &P, &T, slot));
    }
    krel(e, &A), krel(e, &B), krel(e, &P), krel(e, &Lw), krel(e, &Rw), krel(e, &T);
    return MS_OK;
}

/* z = [d < 0] for d in [−2^(w−1), 2^(w−1)): bit w−1 of a + b (mod 2^w), a + b = d from
 * bool_pair, is a_{w−1} ^ b_{w−1} ^ carry of the low w−1 bits; then daBit b2a.
 * Rounds: [1 bool_pair (aby3)] + 1 + ⌈log2(w−1)⌉ + b2a_bit (1 / 2); 8 / 10 at w = 64. */
static int k_msb_packed(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    size_t n = d->n;
    mpc_val a, b, G, s;
    TRY(kal(e, &a, n, DOM_BOOL));
    TRY(kal(e, &b, n, DOM_BOOL));
    TRY(VT->bool_pair(e, &a, &b, d, w));
    int m = w - 1, W = 1;
    while (W < m)
        W *= 2;
    TRY(k_carry_packed(e, &G, &a, &b, m, e->n_parties == 2));
    TRY(kal(e, &s, n, DOM_BOOL));
    TRY(VT->add(e, &s, &a, &b));
    TRY(VT->shift(e, &s, &s, w - 1));
    if (W > 1)
        TRY(VT->shift(e, &G, &G, W - 1));
    TRY(VT->add(e, &s, &s, &G));
    TRY(kal(e, z, n, DOM_ARITH));
    TRY(VT->b2a_bit(e, z, &s));
    krel(e, &a), krel(e, &b), krel(e, &G), krel(e, &s);
    return MS_OK;
}

/* z = [d ≡ 0 mod 2^w] (exact equality when |d| < 2^w): u = ~(a ^ c) on w bits, where a + b = d
 * and c = −b (2 parties: a = d0 and c the P1 component of −d, local; 3 parties: a = x0 + x1
 * from bool_pair, c = −x2 a component of −d), then an AND tree folding the upper half onto
 * the lower, ⌈log2 w⌉ levels of and_bits, and daBit b2a. Rounds: [1] + ⌈log2 w⌉ + 1 / 2. */
static int k_eqz_packed(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    size_t n = d->n;
    mpc_val nd, cn[3], u, t, sh;
    int nc = 0;
    TRY(k_scaled(e, &nd, d, (uint64_t)-1));
    for (int i = 0; i < 3; i++)
        TRY(kal(e, &cn[i], n, DOM_BOOL));
    TRY(VT->bool_components(e, cn, &nc, &nd));
    TRY(kal(e, &u, n, DOM_BOOL));
    if (nc == 2) {
        mpc_val cd[3];
        for (int i = 0; i < 3; i++)
            TRY(kal(e, &cd[i], n, DOM_BOOL));
        TRY(VT->bool_components(e, cd, &nc, d));
        TRY(VT->add(e, &u, &cd[0], &cn[1]));
        for (int i = 0; i < 3; i++)
            krel(e, &cd[i]);
    } else {
        mpc_val a, b;
        TRY(kal(e, &a, n, DOM_BOOL));
        TRY(kal(e, &b, n, DOM_BOOL));
        TRY(VT->bool_pair(e, &a, &b, d, w));
        TRY(VT->add(e, &u, &a, &cn[2]));
        krel(e, &a), krel(e, &b);
    }
    TRY(k_addc(e, &u, &u, ~0ull)); /* bit i = 1 iff bit i of the two sides agree */
    TRY(k_andc(e, &u, &u, lowbits(w)));
    TRY(kal(e, &sh, n, DOM_BOOL));
    TRY(kal(e, &t, n, DOM_BOOL));
    for (int c = w; c > 1;) {
        int h = c / 2, keep = c - h; /* bits [keep, c) fold onto [0, h); bit h stays if c odd */
        TRY(VT->shift(e, &sh, &u, keep));
        TRY(VT->and_bits(e, &t, &u, &sh, lowbits(h), 0));
        TRY(k_andc(e, &u, &u, lowbits(keep) & ~lowbits(h)));
        TRY(VT->add(e, &u, &u, &t));
        c = keep;
    }
    TRY(kal(e, z, n, DOM_ARITH));
    TRY(VT->b2a_bit(e, z, &u));
    krel(e, &nd), krel(e, &u), krel(e, &t), krel(e, &sh);
    for (int i = 0; i < 3; i++)
        krel(e, &cn[i]);
    return MS_OK;
}

/* z = [d < 0] as a 0/1 arithmetic integer, d in [−2^(w−1), 2^(w−1)) (w = 64: any d): with
 * msb packed the bit-packed circuit on w bits; ks / carry take the msb of all 64 bits
 * (they ignore the bound, which only restricts the inputs). */
static int k_msb_w(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    mpc_val b;
    if (k_packed(e))
        return k_msb_packed(e, z, d, w > 1 && w < 64 ? w : 64);
    if (!strcmp(e->cfg.msb, "carry")) {
        /* msb(a + b) = a63 ^ b63 ^ (carry into bit 63) = a63 ^ b63 ^ carry_out(a << 1, b << 1) */
        mpc_val a, c, a1, b1, co;
        TRY(k_two_words(e, &a, &c, d));
        TRY(kal(e, &a1, d->n, DOM_BOOL));
        TRY(VT->shift(e, &a1, &a, -1));
        TRY(kal(e, &b1, d->n, DOM_BOOL));
        TRY(VT->shift(e, &b1, &c, -1));
        TRY(k_carry_out(e, &co, &a1, &b1));
        TRY(kal(e, &b, d->n, DOM_BOOL));
        TRY(VT->add(e, &b, &a, &c));
        TRY(VT->add(e, &b, &b, &co));
        krel(e, &a);
        krel(e, &c);
        krel(e, &a1);
        krel(e, &b1);
        krel(e, &co);
    } else {
        TRY(k_a2b(e, &b, d));
    }
    TRY(VT->shift(e, &b, &b, 63));
    TRY(kal(e, z, d->n, DOM_ARITH));
    TRY(VT->b2a(e, z, &b));
    krel(e, &b);
    return MS_OK;
}

static int k_msb(eng *e, mpc_val *z, const mpc_val *d) { return k_msb_w(e, z, d, 64); }

typedef int (*k_test)(eng *e, mpc_val *z, const mpc_val *d, int w);

/* z = test(x − y) (local difference, then a test of it on w bits: k_msb_w, k_eqz). */
static int k_test_diff(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w, k_test test)
{
    mpc_val d;
    TRY(kal(e, &d, x->n, DOM_ARITH));
    TRY(VT->sub(e, &d, x, y));
    int rc = test(e, z, &d, w);
    krel(e, &d);
    return rc;
}

/* z = [x < y] (0/1 integer), x − y in [−2^(w−1), 2^(w−1)) (w = 64: |x − y| < 2^63). */
static int k_lt(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w)
{
    return k_test_diff(e, z, x, y, w, k_msb_w);
}

/* z = [d == 0] (0/1 integer). Components of d sum to 0 iff the first one(s) equal the
 * negation of the last, read from the components of -d:
 *   2 parties: w = d0 ^ (-d1)  (no round);
 *   3 parties: a + b == c with c = -d2: t = a^b^c, carries reproduce t iff
 *              t == maj(a, b, t) << 1 (1 round), w = t ^ (maj << 1).
 * Then an AND tree over the 64 bits of ~w (6 rounds) and b2a of bit 0. With msb packed the
 * bit-packed circuit on w bits (k_eqz_packed); the word circuits ignore the bound. */
static int k_eqz(eng *e, mpc_val *z, const mpc_val *d, int wb)
{
    if (k_packed(e))
        return k_eqz_packed(e, z, d, wb >= 1 && wb < 64 ? wb : 64);
    size_t n = d->n;
    mpc_val nd, cd[3], cn[3], w;
    int nc = 0;
    TRY(k_scaled(e, &nd, d, (uint64_t)-1));
    for (int i = 0; i < 3; i++) {
        TRY(kal(e, &cd[i], n, DOM_BOOL));
        TRY(kal(e, &cn[i], n, DOM_BOOL));
    }
    TRY(VT->bool_components(e, cd, &nc, d));
    TRY(VT->bool_components(e, cn, &nc, &nd));
    TRY(kal(e, &w, n, DOM_BOOL));
    if (nc == 2) {
        TRY(VT->add(e, &w, &cd[0], &cn[1]));
    } else {
        mpc_val t, at, bt, mj;
        TRY(kal(e, &t, n, DOM_BOOL));
        TRY(VT->add(e, &t, &cd[0], &cd[1]));
        TRY(VT->add(e, &t, &t, &cn[2]));
        TRY(kal(e, &at, n, DOM_BOOL));
        TRY(VT->add(e, &at, &cd[0], &t));
        TRY(kal(e, &bt, n, DOM_BOOL));
        TRY(VT->add(e, &bt, &cd[1], &t));
        TRY(kal(e, &mj, n, DOM_BOOL));
        TRY(VT->and_bb(e, &mj, &at, &bt));
        TRY(VT->add(e, &mj, &mj, &t));
        TRY(VT->shift(e, &mj, &mj, -1));
        TRY(VT->add(e, &w, &t, &mj));
        krel(e, &t);
        krel(e, &at);
        krel(e, &bt);
        krel(e, &mj);
    }
    TRY(k_addc(e, &w, &w, ~0ull)); /* bit i = 1 iff bit i of the difference is 0 */
    for (int s = 32; s >= 1; s /= 2) {
        mpc_val sh, t;
        TRY(kal(e, &sh, n, DOM_BOOL));
        TRY(VT->shift(e, &sh, &w, s));
        TRY(kal(e, &t, n, DOM_BOOL));
        TRY(VT->and_bb(e, &t, &w, &sh));
        krel(e, &w);
        krel(e, &sh);
        w = t;
    }
    TRY(kal(e, z, n, DOM_ARITH));
    TRY(VT->b2a(e, z, &w));
    krel(e, &w);
    krel(e, &nd);
    for (int i = 0; i < 3; i++) {
        krel(e, &cd[i]);
        krel(e, &cn[i]);
    }
    return MS_OK;
}

/* z = [x == y] (0/1 integer), exact for |x − y| < 2^w (w = 64: any x, y). */
static int k_eq(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w)
{
    return k_test_diff(e, z, x, y, w, k_eqz);
}

/* z = b + c·(a - b) with c a 0/1 integer share (1 multiplication, no truncation). */
static int k_select(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *a, const mpc_val *b)
{
    mpc_val d, t;
    TRY(kal(e, &d, a->n, DOM_ARITH));
    TRY(VT->sub(e, &d, a, b));
    TRY(k_imul(e, &t, c, &d));
    TRY(kal(e, z, a->n, DOM_ARITH));
    TRY(VT->add(e, z, b, &t));
    krel(e, &d);
    krel(e, &t);
    return MS_OK;
}

/* A secret public iota: z[r·n + j] = j (integer), R rows. */
static int k_iota(eng *e, mpc_val *z, const mpc_val *like, size_t R, size_t n)
{
    TRY(k_const(e, z, like, R * n, 0));
    uint64_t *c;
    TRY(pub64(like, R * n, &c));
    if (c)
        for (size_t i = 0; i < R * n; i++)
            c[i] = i % n;
    int rc = VT->add_pub(e, z, z, c, R * n);
    free(c);
    return rc;
}

/* Bits that tell apart indices of [0, n): ⌈log2 n⌉ (at least 1). */
static int idx_bits(size_t n)
{
    int b = 1;
    while (b < 64 && ((size_t)1 << b) < n)
        b++;
    return b;
}

/* z (R×n) = one-hot of the integer index idx[r] over n columns: eq against a public iota, on
 * w bits (0: the whole ring, so an index outside [0, n) gives a zero row, which the policies'
 * sentinels rely on). Indices known to lie in [0, n) differ by less than n, so ⌈log2 n⌉ bits
 * tell them apart (MPCache's ΠGather compares ⌈log2 C⌉ bits): an ONEHOT op says so with its
 * bit bound, and the kernels' own one-hots of in-range indices (argmax, top-k) use it. */
static int k_onehot_w(eng *e, mpc_val *z, const mpc_val *idx, size_t n, int w)
{
    size_t R = idx->n;
    mpc_val d;
    TRY(k_bcast(e, &d, idx, n));
    uint64_t *c;
    TRY(pub64(idx, R * n, &c));
    if (c)
        for (size_t i = 0; i < R * n; i++)
            c[i] = (uint64_t) - (int64_t)(i % n);
    int rc = VT->add_pub(e, &d, &d, c, R * n);
    free(c);
    TRY(rc);
    TRY(k_eqz(e, z, &d, w ? w : 64));
    krel(e, &d);
    return MS_OK;
}

/* The one-hot of indices in [0, n) (argmax's and top-k's own). */
static int k_onehot(eng *e, mpc_val *z, const mpc_val *idx, size_t n)
{
    return k_onehot_w(e, z, idx, n, k_packed(e) ? idx_bits(n) : 64);
}

/* ---- max / argmax: tree reduction ------------------------------------------------------ */

/* The index half of a k_rowmax level: Di = Bi − Ai multiplied by the same c as the values'
 * D in one call ([c; c]·[D; Di]), Ai += c·Di, the index rows rejoined; D becomes c·D. */
static int k_max_index(eng *e, mpc_val *curi, mpc_val *D, const mpc_val *c, size_t R, size_t L)
{
    size_t n = D->n;
    mpc_val Ai, Bi, resti = {0}, Di, DD, CC, T;
    TRY(k_split(e, curi, R, L, &Ai, &Bi, &resti));
    TRY(kal(e, &Di, n, DOM_ARITH));
    TRY(VT->sub(e, &Di, &Bi, &Ai));
    mpc_val pd[2] = {*D, Di}, pc[2] = {*c, *c};
    TRY(k_concat(e, &DD, pd, 2));
    TRY(k_concat(e, &CC, pc, 2));
    TRY(k_imul(e, &T, &CC, &DD));
    krel(e, D), krel(e, &Di), krel(e, &DD), krel(e, &CC);
    TRY(k_slice(e, D, &T, 0, n));
    TRY(k_slice(e, &Di, &T, n, n));
    TRY(VT->add(e, &Ai, &Ai, &Di));
    krel(e, &Bi), krel(e, &T), krel(e, &Di);
    return k_rejoin(e, curi, &Ai, &resti, R, L / 2, (int)(L & 1));
}

/* One level of k_rowmax on R rows of L: c = [A < B] for the pairs (A, B) of the rows' halves,
 * A += c·(B − A) (with curi, the indices alike in the same multiplication), rows rejoined. */
static int k_max_level(eng *e, mpc_val *cur, mpc_val *curi, size_t R, size_t L, int w)
{
    size_t h = L / 2;
    mpc_val A, B, rest = {0}, c, D;
    TRY(k_split(e, cur, R, L, &A, &B, &rest));
    TRY(k_lt(e, &c, &A, &B, w)); /* 1 where B wins */
    TRY(kal(e, &D, A.n, DOM_ARITH));
    TRY(VT->sub(e, &D, &B, &A));
    if (curi) {
        TRY(k_max_index(e, curi, &D, &c, R, L));
    } else {
        mpc_val T;
        TRY(k_imul(e, &T, &c, &D));
        krel(e, &D);
        D = T;
    }
    TRY(VT->add(e, &A, &A, &D));
    krel(e, &D), krel(e, &B), krel(e, &c);
    return k_rejoin(e, cur, &A, &rest, R, h, (int)(L & 1));
}

/* Row max of R rows of L: ⌈log2 L⌉ levels, each one batched lt over all pairs and one
 * multiplication that selects the value (and, with idx, the index in the same call). */
static int k_rowmax(eng *e, mpc_val *mx, mpc_val *ix, const mpc_val *x, size_t R, size_t L, int w)
{
    mpc_val cur, curi = {0};
    TRY(k_rep(e, &cur, x, 1));
    if (ix)
        TRY(k_iota(e, &curi, x, R, L));
    for (; L > 1; L = L / 2 + (L & 1))
        TRY(k_max_level(e, &cur, ix ? &curi : NULL, R, L, w));
    *mx = cur;
    if (ix)
        *ix = curi;
    return MS_OK;
}

/* ARGMAX: the row max's index, one-hot over the row's n columns. */
static int k_argmax(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int w)
{
    mpc_val mx, ix;
    TRY(k_rowmax(e, &mx, &ix, x, R, n, w));
    TRY(k_onehot(e, z, &ix, n));
    krel(e, &mx), krel(e, &ix);
    return MS_OK;
}

/* ---- exp, reciprocal, rsqrt -------------------------------------------------------------- */

/* exp(x) ≈ (1 + x/2^t)^(2^t): one truncation by t bits, then t fixed-point squarings
 * (SPU exp_taylor; CrypTen exp). */
static int k_exp_taylor(eng *e, mpc_val *z, const mpc_val *x)
{
    int t = e->cfg.exp_iters;
    mpc_val y;
    TRY(k_trunc(e, &y, x, t));
    TRY(k_addc(e, &y, &y, FX(1.0)));
    for (int i = 0; i < t; i++) {
        mpc_val y2;
        TRY(k_fsq(e, &y2, &y));
        krel(e, &y);
        y = y2;
    }
    *z = y;
    return MS_OK;
}

/* u (J blocks of n) = [x < 2^js[j]]: one batched msb over all thresholds. */
static int k_thresholds(eng *e, mpc_val *u, const mpc_val *x, const int *js, size_t J)
{
    uint64_t blk[128];
    for (size_t j = 0; j < J; j++)
        blk[j] = (uint64_t) - (int64_t)FX(ldexp(1.0, js[j]));
    mpc_val D;
    TRY(k_rep(e, &D, x, J));
    TRY(k_addblk(e, &D, &D, blk, J, 0));
    TRY(k_msb(e, u, &D));
    krel(e, &D);
    return MS_OK;
}

/* z = c0 + Σ_j coef[j]·u_j (public integer coefficients, u J blocks of n). */
static int k_lincomb(eng *e, mpc_val *z, const mpc_val *u, const uint64_t *coef, size_t J,
                     uint64_t c0)
{
    mpc_val t;
    TRY(k_rep(e, &t, u, 1));
    TRY(k_addblk(e, &t, &t, coef, J, 1));
    TRY(k_blocksum(e, z, &t, J, u->n / J));
    TRY(k_addc(e, z, z, c0));
    krel(e, &t);
    return MS_OK;
}

/* 1/x for x in [2^jlo, 2^(f-1)), x > 0. q = ⌊log2 x⌋ from the thresholds j = jlo+1 … f-1,
 * S = 2^-(q+1) (linear in the 0/1 indicators), c = x·S in [0.5, 1), Goldschmidt. */
static int k_recip_cmp(eng *e, mpc_val *z, const mpc_val *x, int jlo)
{
    int f = e->cfg.frac_bits, jhi = f - 1;
    int js[128];
    uint64_t coef[128];
    size_t J = 0;
    for (int j = jlo + 1; j <= jhi && J < 128; j++, J++) {
        js[J] = j;
        coef[J] = 1ull << (f - j - 1); /* w_{j-1} - w_j, w_j = 2^(f-j-1) */
    }
    mpc_val u, S, c, w, ew, r, ee;
    TRY(k_thresholds(e, &u, x, js, J));
    TRY(k_lincomb(e, &S, &u, coef, J, 1ull << (f - jhi - 1)));
    TRY(k_fmul(e, &c, x, &S));
    TRY(k_scaled(e, &w, &c, (uint64_t)-2)); /* w0 = 2.9142 - 2c */
    TRY(k_addc(e, &w, &w, FX(2.9142)));
    TRY(k_fmul(e, &ew, &c, &w)); /* e0 = 1 - c·w0 */
    TRY(k_scaled(e, &ee, &ew, (uint64_t)-1));
    TRY(k_addc(e, &ee, &ee, FX(1.0)));
    r = w;
    for (int it = 0; it < e->cfg.recip_iters; it++) {
        mpc_val onee, nr;
        TRY(kal(e, &onee, c.n, DOM_ARITH));
        TRY(k_addc(e, &onee, &ee, FX(1.0)));
        if (it == e->cfg.recip_iters - 1) { /* r ← r(1+e) */
            TRY(k_fmul(e, &nr, &r, &onee));
        } else { /* [r; e] ← [r(1+e); e²] in one multiplication */
            mpc_val pa[2] = {r, ee}, pb[2] = {onee, ee}, T;
            TRY(k_mul_batch(e, &T, pa, pb, 2, e->cfg.frac_bits));
            krel(e, &ee);
            TRY(k_slice(e, &nr, &T, 0, c.n));
            TRY(k_slice(e, &ee, &T, c.n, c.n));
            krel(e, &T);
        }
        krel(e, &onee);
        krel(e, &r);
        r = nr;
    }
    TRY(k_fmul(e, z, &r, &S));
    krel(e, &u), krel(e, &S), krel(e, &c), krel(e, &ew), krel(e, &ee), krel(e, &r);
    return MS_OK;
}

/* 1/sqrt(x), x in [2^jlo, 2^(jhi+2)) with jlo, jhi the even numbers nearest -f and f. */
static int k_rsqrt_cmp(eng *e, mpc_val *z, const mpc_val *x)
{
    int f = e->cfg.frac_bits, jhi = f & ~1, jlo = -((f + 1) & ~1);
    int js[128];
    uint64_t cs[128], cg[128];
    size_t J = 0;
    for (int j = jlo + 2; j <= jhi && J < 128; j += 2, J++) {
        js[J] = j; /* S = 2^-q: w_j = 2^(f-j); G = 2^(-q/2): g_j = 2^(f-j/2) */
        cs[J] = (1ull << (f - j + 2)) - (1ull << (f - j));
        cg[J] = (1ull << (f - (j - 2) / 2)) - (1ull << (f - j / 2));
    }
    mpc_val u, S, G, c, c2, y, t;
    TRY(k_thresholds(e, &u, x, js, J));
    TRY(k_lincomb(e, &S, &u, cs, J, 1ull << (f - jhi)));
    TRY(k_lincomb(e, &G, &u, cg, J, 1ull << (f - jhi / 2)));
    TRY(k_fmul(e, &c, x, &S)); /* c in [1, 4) */
    TRY(k_fsq(e, &c2, &c));
    /* y0 = 1.3352977 - 0.41059831c + 0.05119674c² (relative error <= 2.41e-2 on [1, 4]) */
    TRY(k_scaled(e, &t, &c2, FX(0.05119674)));
    TRY(k_mulc(e, &c2, &c, FX(-0.41059831)));
    TRY(VT->add(e, &t, &t, &c2));
    TRY(k_addc(e, &t, &t, FX(1.3352977) << f));
    TRY(k_trunc(e, &y, &t, f));
    krel(e, &t);
    for (int it = 0; it < e->cfg.rsqrt_iters; it++) { /* y ← (3y - c·y·y²)/2 */
        mpc_val pa[2] = {c, y}, pb[2] = {y, y}, T, cy[2], u3;
        TRY(k_mul_batch(e, &T, pa, pb, 2, f)); /* [c·y; y²] */
        TRY(k_unbatch(e, cy, &T, 2, c.n));
        TRY(k_imul(e, &t, &cy[0], &cy[1]));
        TRY(k_scaled(e, &u3, &y, FX(3.0)));
        TRY(VT->sub(e, &u3, &u3, &t));
        krel(e, &y);
        TRY(k_trunc(e, &y, &u3, f + 1));
        krel(e, &T), krel(e, &cy[0]), krel(e, &cy[1]), krel(e, &u3), krel(e, &t);
    }
    TRY(k_fmul(e, z, &y, &G));
    krel(e, &u), krel(e, &S), krel(e, &G), krel(e, &c), krel(e, &c2), krel(e, &y);
    return MS_OK;
}

/* ---- normalisation by one bit decomposition (normalize: bitdec) ------------------------ */

/* Positions [lo, hi) of a word. */
static uint64_t bitrange(int lo, int hi) { return lowbits(hi) & ~lowbits(lo < 0 ? 0 : lo); }

/* z = each bit of v (at the positions of src) copied to the len positions above it (up) or
 * below it, len a power of two; local (shifts and xors of disjoint copies). */
static int k_spread(eng *e, mpc_val *z, const mpc_val *v, uint64_t src, int len, int up)
{
    mpc_val t;
    TRY(kal(e, &t, v->n, DOM_BOOL));
    TRY(k_andc(e, &t, v, src));
    TRY(VT->shift(e, z, &t, up ? -1 : 1));
    for (int d = 1; d < len; d *= 2) {
        TRY(VT->shift(e, &t, z, up ? -d : d));
        TRY(VT->add(e, z, z, &t));
    }
    krel(e, &t);
    return MS_OK;
}

/* k_bitdec's working words: t = a ^ b, the carries' generate G and propagate P on [0, m),
 * the suffix ANDs S (S_p for j = p + jlo); Lc, Ls the two networks' levels. */
typedef struct bd_net {
    mpc_val t, G, P, S;
    int m, jlo, ms, Lc, Ls;
} bd_net;

/* The masks of level k (blocks of B = 2^k bits, h = B/2). Carries (Sklansky prefix on
 * [0, m)): up = each block's upper half, toplo = its lower half's top bit, upp = up without
 * the lowest block while a later level reads P (k < Lc). Suffix (on [0, ms)): low = each
 * block's lower half, bot = its upper half's bottom bit. mask: the bits the level's and_bits
 * computes. */
typedef struct bd_level {
    int h, doc, dos; /* doc, dos: the carries', the suffix's network has this level */
    uint64_t up, toplo, upp, low, bot, mask;
} bd_level;

static bd_level bd_masks(const bd_net *st, int k)
{
    bd_level v = {1 << (k - 1), k <= st->Lc, k <= st->Ls, 0, 0, 0, 0, 0, 0};
    int h = v.h, B = 1 << k, m = st->m;
    for (int b0 = 0; b0 < 64; b0 += B) {
        if (v.doc && b0 + h < m) {
            v.toplo |= 1ull << (b0 + h - 1);
            v.up |= bitrange(b0 + h, b0 + B < m ? b0 + B : m);
            if (b0 > 0 && k < st->Lc)
                v.upp |= bitrange(b0 + h, b0 + B < m ? b0 + B : m);
        }
        if (v.dos && b0 + h < st->ms) {
            v.bot |= 1ull << (b0 + h);
            v.low |= bitrange(b0, b0 + h);
        }
    }
    v.mask = v.up | (v.upp >> h) | v.low;
    return v;
}

/* Level 0: X = a + b (bool_pair), g = a & b on the bits either network reads, t = a ^ b;
 * (G, P) = (g, t) on [0, m); e_j = ~(t_j ^ t_(j−1) ^ g_(j−1)) for j in [jlo, w), S starts as
 * e_(p+jlo) on [0, ms) and ones above (the AND's identity). */
static int k_bd_start(eng *e, bd_net *st, const mpc_val *x, int w)
{
    size_t n = x->n;
    int m = st->m;
    mpc_val a, b, g, E;
    TRY(kal(e, &a, n, DOM_BOOL));
    TRY(kal(e, &b, n, DOM_BOOL));
    TRY(VT->bool_pair(e, &a, &b, x, w));
    TRY(kal(e, &g, n, DOM_BOOL));
    TRY(VT->and_bits(e, &g, &a, &b, lowbits(m) | bitrange(st->jlo - 1, w - 1), e->n_parties == 2));
    TRY(kal(e, &st->t, n, DOM_BOOL));
    TRY(VT->add(e, &st->t, &a, &b));
    TRY(k_andc(e, &st->t, &st->t, lowbits(w)));
    TRY(kal(e, &st->G, n, DOM_BOOL));
    TRY(k_andc(e, &st->G, &g, lowbits(m)));
    TRY(kal(e, &st->P, n, DOM_BOOL));
    TRY(k_andc(e, &st->P, &st->t, lowbits(m)));
    TRY(kal(e, &E, n, DOM_BOOL));
    TRY(VT->shift(e, &E, &st->t, -1));
    TRY(VT->add(e, &E, &E, &st->t));
    TRY(kal(e, &st->S, n, DOM_BOOL));
    TRY(VT->shift(e, &st->S, &g, -1));
    TRY(VT->add(e, &E, &E, &st->S));
    TRY(VT->shift(e, &st->S, &E, st->jlo));
    TRY(k_andc(e, &st->S, &st->S, lowbits(st->ms > 0 ? st->ms : 0)));
    uint64_t ones = ~0ull; /* complement on [0, ms), the AND's identity above */
    TRY(VT->add_pub(e, &st->S, &st->S, &ones, 1));
    krel(e, &a), krel(e, &b), krel(e, &g), krel(e, &E);
    return MS_OK;
}

/* The carries' operands: X1 = P on UP | (P >> h) on UPP >> h; Y1 = the lower half's top G
 * spread over UP | its top P spread over UPP, moved down by h. */
static int k_bd_carry_ops(eng *e, mpc_val *X1, mpc_val *Y1, const bd_net *st, const bd_level *v)
{
    size_t n = st->P.n;
    mpc_val u, w;
    TRY(kal(e, X1, n, DOM_BOOL));
    TRY(kal(e, &u, n, DOM_BOOL));
    TRY(kal(e, &w, n, DOM_BOOL));
    TRY(k_andc(e, X1, &st->P, v->up));
    TRY(k_andc(e, &u, &st->P, v->upp));
    TRY(VT->shift(e, &u, &u, v->h));
    TRY(VT->add(e, X1, X1, &u));
    TRY(kal(e, Y1, n, DOM_BOOL));
    TRY(k_spread(e, Y1, &st->G, v->toplo, v->h, 1));
    TRY(k_andc(e, Y1, Y1, v->up));
    TRY(k_spread(e, &w, &st->P, v->toplo, v->h, 1));
    TRY(k_andc(e, &w, &w, v->upp));
    TRY(VT->shift(e, &w, &w, v->h));
    TRY(VT->add(e, Y1, Y1, &w));
    krel(e, &u), krel(e, &w);
    return MS_OK;
}

/* The suffix's operands: X2 = S on LOW; Y2 = S at the upper half's bottom, spread down. */
static int k_bd_suffix_ops(eng *e, mpc_val *X2, mpc_val *Y2, const bd_net *st, const bd_level *v)
{
    size_t n = st->S.n;
    TRY(kal(e, X2, n, DOM_BOOL));
    TRY(k_andc(e, X2, &st->S, v->low));
    TRY(kal(e, Y2, n, DOM_BOOL));
    TRY(k_spread(e, Y2, &st->S, v->bot, v->h, 0));
    return k_andc(e, Y2, Y2, v->low);
}

/* The level's products (Tm: the carries' part first, then the suffix's) applied: G ^= P & G_top
 * on UP, P = P & P_top on UPP; S = S & S_top on LOW. */
static int k_bd_apply(eng *e, bd_net *st, const bd_level *v, const mpc_val *Tm)
{
    size_t n = st->G.n;
    mpc_val u, T;
    TRY(kal(e, &u, n, DOM_BOOL));
    if (v->doc) {
        TRY(k_slice(e, &T, Tm, 0, n));
        TRY(k_andc(e, &u, &T, v->up)); /* G ^= P & G_top */
        TRY(VT->add(e, &st->G, &st->G, &u));
        TRY(k_andc(e, &u, &T, v->upp >> v->h)); /* P = P & P_top on UPP */
        TRY(VT->shift(e, &u, &u, -v->h));
        TRY(k_andc(e, &st->P, &st->P, ~v->upp));
        TRY(VT->add(e, &st->P, &st->P, &u));
        krel(e, &T);
    }
    if (v->dos) {
        TRY(k_slice(e, &T, Tm, Tm->n - n, n));
        TRY(k_andc(e, &u, &T, v->low));
        TRY(k_andc(e, &st->S, &st->S, ~v->low));
        TRY(VT->add(e, &st->S, &st->S, &u));
        krel(e, &T);
    }
    krel(e, &u);
    return MS_OK;
}

/* One level of both networks: their operands side by side (np = 1 or 2 parts of n words) in
 * one and_bits, then applied. */
static int k_bd_level(eng *e, bd_net *st, const bd_level *v)
{
    size_t n = st->G.n;
    int np = v->doc + v->dos;
    mpc_val X[2], Y[2], XX, YY, Tm;
    if (v->doc)
        TRY(k_bd_carry_ops(e, &X[0], &Y[0], st, v));
    if (v->dos)
        TRY(k_bd_suffix_ops(e, &X[np - 1], &Y[np - 1], st, v));
    if (np == 2) {
        TRY(k_concat(e, &XX, X, 2));
        TRY(k_concat(e, &YY, Y, 2));
    } else {
        XX = X[0], YY = Y[0];
    }
    TRY(kal(e, &Tm, np * n, DOM_BOOL));
    TRY(VT->and_bits(e, &Tm, &XX, &YY, v->mask, 0));
    TRY(k_bd_apply(e, st, v, &Tm));
    for (int i = 0; i < np; i++)
        krel(e, &X[i]), krel(e, &Y[i]);
    if (np == 2)
        krel(e, &XX), krel(e, &YY);
    krel(e, &Tm);
    return MS_OK;
}

/* The outputs: s = t ^ (carries << 1) on [0, m] (sb = s), z_i = ~s_i & S_(i+1) on [zlo, zhi). */
static int k_bd_finish(eng *e, mpc_val *sb, mpc_val *zb, const bd_net *st, int zlo, int zhi)
{
    size_t n = st->t.n;
    int m = st->m;
    mpc_val s, Y;
    uint64_t zm = bitrange(zlo, zhi);
    TRY(kal(e, &s, n, DOM_BOOL));
    TRY(VT->shift(e, &s, &st->G, -1));
    TRY(k_andc(e, &s, &s, bitrange(1, m + 1)));
    TRY(VT->add(e, &s, &s, &st->t));
    TRY(k_andc(e, &s, &s, lowbits(m + 1)));
    if (sb)
        TRY(k_rep(e, sb, &s, 1));
    TRY(VT->add_pub(e, &s, &s, &zm, 1));
    TRY(kal(e, &Y, n, DOM_BOOL));
    TRY(VT->shift(e, &Y, &st->S, -zlo)); /* bit i = S_(i+1) = S'_(i+1−jlo) */
    TRY(k_andc(e, &Y, &Y, zm));
    TRY(kal(e, zb, n, DOM_BOOL));
    TRY(VT->and_bits(e, zb, &s, &Y, zm, 0));
    krel(e, &s), krel(e, &Y);
    return MS_OK;
}

/* Boolean word H with bit q set, q = ⌊log2 X⌋, for X in [1, 2^w) (2 <= w <= 64), other bits 0.
 * One bit decomposition, carry-free above the carries: X = a + b (mod 2^w) from bool_pair;
 * the bits of X from position i up are all zero iff t_i = c_i and t_j = o_(j−1) for every
 * j > i (t = a ^ b, o = a | b, c_i the carry into bit i: a sum is zero exactly when every
 * carry equals the propagate bit, the zero-detection of carry-free adders), so
 * z_i = [X < 2^i] = ~(t_i ^ c_i) & S_(i+1) with S_j = AND over j' >= j of
 * e_j' = ~(t_j' ^ o_(j'−1)). The carries (a Sklansky prefix of (g, p) pairs, g = a & b) and
 * the suffix ANDs S (a Sklansky suffix network) are independent, so each level of both is
 * one and_bits call of 2n words; then one and_bits for z. The thermometer T = ~z gives
 * H = T ^ (T >> 1). Rounds: [1 bool_pair (aby3)] + 1 + ⌈log2(w−1)⌉ + 1. The same prefix-OR
 * idea as SPU highestOneBit (libspu/kernel/hal/fxp_base.cc, over a full A2B) and MP-SPDZ
 * Norm (Compiler/floatingpoint.py: BitDec, then PreOR), with the suffix run alongside the
 * carries instead of after them. */
/* The general form: X in [0, 2^w); sum bits *sb of X at positions [0, cm] (carries up to
 * c_cm, cm <= w − 1) and *zb with z_i = [X < 2^i] for i in [zlo, zhi) (1 <= zlo < zhi <= w,
 * zhi − 1 <= cm), other bits 0. The suffix network covers j in [zlo + 1, w). */
static int k_bitdec(eng *e, mpc_val *sb, mpc_val *zb, const mpc_val *x, int w, int cm, int zlo,
                    int zhi)
{
    /* carry positions [0, m); suffix positions p = j − jlo in [0, ms) */
    bd_net st = {.m = cm, .jlo = zlo + 1, .ms = w - zlo - 1};
    while ((1 << st.Lc) < st.m)
        st.Lc++;
    while (st.ms > 1 && (1 << st.Ls) < st.ms)
        st.Ls++;
    TRY(k_bd_start(e, &st, x, w));
    for (int k = 1; k <= st.Lc || k <= st.Ls; k++) {
        bd_level v = bd_masks(&st, k);
        TRY(k_bd_level(e, &st, &v));
    }
    TRY(k_bd_finish(e, sb, zb, &st, zlo, zhi));
    krel(e, &st.t), krel(e, &st.G), krel(e, &st.P), krel(e, &st.S);
    return MS_OK;
}

static int k_hibit(eng *e, mpc_val *H, const mpc_val *x, int w)
{
    mpc_val z;
    TRY(k_bitdec(e, NULL, &z, x, w, w - 1, 1, w));
    uint64_t c = lowbits(w);
    TRY(VT->add_pub(e, &z, &z, &c, 1)); /* T = ~z, T_0 = 1 */
    TRY(kal(e, H, x->n, DOM_BOOL));
    TRY(VT->shift(e, H, &z, 1));
    TRY(VT->add(e, H, H, &z));
    krel(e, &z);
    return MS_OK;
}

/* k_pow2's factors: D(q) in base 4 with up to POW_GROUPS digits; pow_fac[g][v] the factor of
 * digit g = v. */
#define POW_GROUPS 4
typedef uint64_t pow_fac[POW_GROUPS][4];

/* fac[g][v] = 2^(mul·v·4^g) (0 where that reaches 2^63: a digit value D never takes). */
static void pow2_fac(pow_fac fac, int mul)
{
    for (int g = 0; g < POW_GROUPS; g++)
        for (int v = 0; v < 4; v++) {
            int sh = mul * (v << (2 * g));
            fac[g][v] = sh < 63 ? 1ull << sh : 0;
        }
}

/* The base-4 digits of D(q) for q in [lo, w): ng digits reach the largest D; msk[g][v] = the
 * positions whose digit g is v (1 … 3), slot[g][v] its indicator's block (−1: no position). */
typedef struct pow_digits {
    int ng, ni;
    uint64_t msk[POW_GROUPS][4];
    int slot[POW_GROUPS][4];
} pow_digits;

static void pow2_digits(pow_digits *d, const int *D, int lo, int w)
{
    int dmax = 0;
    for (int i = lo; i < w; i++)
        dmax = D[i] > dmax ? D[i] : dmax;
    memset(d, 0, sizeof *d);
    while (d->ng < POW_GROUPS && (dmax >> (2 * d->ng)))
        d->ng++;
    for (int g = 0; g < d->ng; g++)
        for (int v = 1; v < 4; v++) {
            for (int i = lo; i < w; i++)
                if (((D[i] >> (2 * g)) & 3) == v)
                    d->msk[g][v] |= 1ull << i;
            d->slot[g][v] = d->msk[g][v] ? d->ni++ : -1;
        }
}

/* Bit 0 of p = the parity of x's bits on mask (local: shifts and xors). */
static int k_parity(eng *e, mpc_val *p, const mpc_val *x, uint64_t mask)
{
    mpc_val sh;
    TRY(kal(e, p, x->n, DOM_BOOL));
    TRY(k_andc(e, p, x, mask));
    TRY(kal(e, &sh, x->n, DOM_BOOL));
    for (int d = 32; d >= 1; d /= 2) {
        TRY(VT->shift(e, &sh, p, d));
        TRY(VT->add(e, p, p, &sh));
    }
    krel(e, &sh);
    return k_andc(e, p, p, 1);
}

/* A = the indicators [digit g of D(q) == v], one block of n per slot, arithmetic 0/1: each the
 * parity of H's bits on msk[g][v] (H is one-hot), all converted by one b2a_bit. */
static int k_pow2_ind(eng *e, mpc_val *A, const mpc_val *H, const pow_digits *d)
{
    mpc_val ind[POW_GROUPS * 3], cat;
    memset(A, 0, sizeof *A);
    if (!d->ni)
        return MS_OK;
    for (int g = 0; g < d->ng; g++)
        for (int v = 1; v < 4; v++)
            if (d->slot[g][v] >= 0)
                TRY(k_parity(e, &ind[d->slot[g][v]], H, d->msk[g][v]));
    TRY(k_concat(e, &cat, ind, d->ni));
    for (int i = 0; i < d->ni; i++)
        krel(e, &ind[i]);
    TRY(kal(e, A, (size_t)d->ni * H->n, DOM_ARITH));
    TRY(VT->b2a_bit(e, A, &cat));
    krel(e, &cat);
    return MS_OK;
}

/* F[t][g] = fac[t][g][0] + Σ_v [digit g = v]·(fac[t][g][v] − fac[t][g][0]) (local). */
static int k_pow2_factors(eng *e, mpc_val F[][POW_GROUPS], const mpc_val *A, const mpc_val *X,
                          size_t n, const pow_fac *fac, int nt, const pow_digits *d)
{
    for (int tt = 0; tt < nt; tt++)
        for (int g = 0; g < d->ng; g++) {
            TRY(k_const(e, &F[tt][g], X, n, fac[tt][g][0]));
            for (int v = 1; v < 4; v++) {
                if (d->slot[g][v] < 0)
                    continue;
                mpc_val a1;
                TRY(k_slice(e, &a1, A, (size_t)d->slot[g][v] * n, n));
                TRY(k_mulc(e, &a1, &a1, fac[tt][g][v] - fac[tt][g][0]));
                TRY(VT->add(e, &F[tt][g], &F[tt][g], &a1));
                krel(e, &a1);
            }
        }
    return MS_OK;
}

/* Lists of factors multiplied pairwise, a round at a time: list l holds len[l] values and
 * tag[l][i] names value i (a factor, or a product of an earlier round), so that a pair two
 * lists share is multiplied once. */
typedef struct prod_lists {
    mpc_val v[4][POW_GROUPS + 1];
    int len[4], tag[4][POW_GROUPS + 1], nl, ntag;
} prod_lists;

/* The lists [X, F[0][..]] (with_x) and F[t][..] (t >= !need0): F[0]'s list is rotated so its
 * first pair is the X list's second ((F1, F2) with 3 groups); a factor of t > 0 that is 1
 * whatever the digit is left out. Consumes F. */
static int k_pow2_lists(eng *e, prod_lists *pl, mpc_val F[][POW_GROUPS], const mpc_val *X,
                        const pow_fac *fac, int nt, const pow_digits *d, int with_x, int need0)
{
    int ng = d->ng;
    pl->nl = 0, pl->ntag = 1 + 3 * POW_GROUPS;
    if (with_x) {
        TRY(k_rep(e, &pl->v[0][0], X, 1));
        pl->tag[0][0] = 0;
        for (int g = 0; g < ng; g++) {
            TRY(k_rep(e, &pl->v[0][g + 1], &F[0][g], 1));
            pl->tag[0][g + 1] = 1 + g;
        }
        pl->len[pl->nl++] = ng + 1;
    }
    for (int tt = !need0; tt < nt; tt++) {
        int rot = with_x && tt == 0 && ng >= 2 ? 1 : 0, k = 0, l = pl->nl++;
        for (int g = 0; g < ng; g++) {
            int gg = (g + rot) % ng, one = 1;
            for (int v = 0; v < 4; v++)
                one &= fac[tt][gg][v] == 1 || (v && d->slot[gg][v] < 0);
            if (one && tt > 0) {
                krel(e, &F[tt][gg]);
                continue;
            }
            pl->v[l][k] = F[tt][gg];
            pl->tag[l][k++] = 1 + tt * POW_GROUPS + gg;
        }
        pl->len[l] = k;
    }
    if (!need0)
        for (int g = 0; g < ng; g++)
            krel(e, &F[0][g]);
    return MS_OK;
}

/* One round of the product tree: every list's adjacent pairs (a pair of equal tags once) in
 * one batched multiplication, each list shrinking to its products and an odd last value.
 * *np: the pairs multiplied (0: every list is down to one value). */
static int k_prod_round(eng *e, prod_lists *pl, size_t n, int *np_out)
{
    mpc_val pa[4 * POW_GROUPS], pb[4 * POW_GROUPS], P;
    int np = 0, pt[4 * POW_GROUPS][2], at[4][POW_GROUPS + 1];
    for (int l = 0; l < pl->nl; l++)
        for (int i = 0; i + 1 < pl->len[l]; i += 2) {
            int q = 0, t0 = pl->tag[l][i], t1 = pl->tag[l][i + 1];
            while (q < np && !(pt[q][0] == t0 && pt[q][1] == t1))
                q++;
            if (q == np) {
                pt[np][0] = t0, pt[np][1] = t1;
                pa[np] = pl->v[l][i], pb[np++] = pl->v[l][i + 1];
            }
            at[l][i] = q;
        }
    if (!(*np_out = np))
        return MS_OK;
    TRY(k_mul_batch(e, &P, pa, pb, np, 0));
    for (int l = 0; l < pl->nl; l++) {
        int nn = 0;
        for (int i = 0; i < pl->len[l]; i += 2, nn++) {
            if (i + 1 < pl->len[l]) {
                krel(e, &pl->v[l][i]);
                krel(e, &pl->v[l][i + 1]);
                TRY(k_slice(e, &pl->v[l][i], &P, (size_t)at[l][i] * n, n));
                pl->tag[l][i] = pl->ntag + at[l][i];
            }
            pl->tag[l][nn] = pl->tag[l][i];
            pl->v[l][nn] = pl->v[l][i];
        }
        pl->len[l] = nn;
    }
    pl->ntag += np;
    krel(e, &P);
    return MS_OK;
}

/* Public factors selected by the secret position q of H's bit (q in [lo, w)): out[t] is the
 * product over D(q)'s base-4 digits g of fac[t][g][digit_g(D(q))] (ring integers; fac[t][g][0]
 * the factor of digit 0; pow2_fac gives the powers 2^(mul·v·4^g), so out[t] = 2^(mul·D(q))),
 * D(q) >= 0 given per position, every product < 2^62. D(q)'s digits are XORs of H's bits (H is
 * one-hot), so every digit value's indicator is local; one b2a_bit converts all of them, each
 * group's factor is linear in its indicators, and the factors' product is a batched
 * multiplication tree (⌈log2 groups⌉ rounds; with XP given, X·out[0] as well, in the same
 * rounds; need0 = 0: out[0] only inside X·out[0]). Rounds: b2a_bit + ⌈log2(g+1)⌉. */
static int k_pow2(eng *e, mpc_val *out, const mpc_val *H, const mpc_val *X, int lo, int w,
                  const int *D, const pow_fac *fac, int nt, mpc_val *XP, int need0)
{
    size_t n = H->n;
    pow_digits d;
    prod_lists pl;
    mpc_val A, F[3][POW_GROUPS];
    pow2_digits(&d, D, lo, w);
    TRY(k_pow2_ind(e, &A, H, &d));
    TRY(k_pow2_factors(e, F, &A, X, n, fac, nt, &d));
    krel(e, &A);
    TRY(k_pow2_lists(e, &pl, F, X, fac, nt, &d, XP != NULL, need0));
    for (int np = 1; np;)
        TRY(k_prod_round(e, &pl, n, &np));
    int l = 0;
    if (XP)
        *XP = pl.v[l++][0];
    for (int tt = !need0; tt < nt; tt++, l++) {
        if (pl.len[l])
            out[tt] = pl.v[l][0];
        else
            TRY(k_const(e, &out[tt], X, n, 1));
    }
    return MS_OK;
}

/* The bit bound of a reciprocal / rsqrt input: X < 2^w with w = *w (op.bits) or 2f + 4, at
 * most 2f + 4 (the largest that keeps every truncated product below 2^62); *lo, the input's
 * lowest bit, clamped to [0, w). */
static void norm_range(const eng *e, int *lo, int *w)
{
    int f = e->cfg.frac_bits, cap = 2 * f + 4;
    *w = *w >= 2 && *w < cap ? *w : cap;
    if (*lo < 0)
        *lo = 0;
    if (*lo > *w - 1)
        *lo = *w - 1;
}

/* The normalisation both bitdec kernels share: H = the highest bit q of X (k_hibit), out =
 * the factors k_pow2 selects by q, and c = X·2^D(q) / 2^T (2^D(q) the first factor, only
 * inside that product). */
static int k_normalize(eng *e, mpc_val *c, mpc_val *out, const mpc_val *x, int lo, int w,
                       const int *D, const pow_fac *fac, int nt, int need0, int T)
{
    mpc_val H, XP;
    TRY(k_hibit(e, &H, x, w));
    TRY(k_pow2(e, out, &H, x, lo, w, D, fac, nt, &XP, need0));
    krel(e, &H);
    if (T > 0)
        TRY(k_trunc(e, c, &XP, T));
    else
        TRY(k_rep(e, c, &XP, 1));
    krel(e, &XP);
    return MS_OK;
}

/* Goldschmidt's start for 1/c on [0.5, 1): w0 = a − (15/8)·c, the minimax a for that slope
 * (|1 − c·w0| <= 0.05938 at a = 2.81874); w0 kept with 3 more fraction bits, exactly. */
#define GS_A 2.81874
#define GS_E0 0.05938

/* Goldschmidt's first step: w0 = a − 15c/8 (scale f + 3), then [c·w0; P·2^sig·w0] in one
 * product: e0 = 1 − c·w0, and the numerator nn = w0·P·2^sig (P, c consumed). */
static int k_gs_start(eng *e, mpc_val *ee, mpc_val *nn, mpc_val *c, mpc_val *P, int sig)
{
    int f = e->cfg.frac_bits;
    size_t n = c->n;
    mpc_val w0, R;
    TRY(k_scaled(e, &w0, c, (uint64_t)-15));
    TRY(k_addc(e, &w0, &w0, fx_encode(GS_A, f + 3)));
    TRY(k_mulc(e, P, P, 1ull << sig));
    mpc_val pa[2] = {*c, *P}, pb[2] = {w0, w0};
    TRY(k_mul_batch(e, &R, pa, pb, 2, f + 3)); /* [c·w0; n0] */
    krel(e, c), krel(e, &w0), krel(e, P);
    TRY(k_slice(e, ee, &R, 0, n));
    TRY(k_mulc(e, ee, ee, (uint64_t)-1));
    TRY(k_addc(e, ee, ee, FX(1.0))); /* e0 = 1 − c·w0 */
    TRY(k_slice(e, nn, &R, n, n));
    krel(e, &R);
    return MS_OK;
}

/* recip_iters steps [n, e] ← [n(1 + e), e²] in one product each (the last without e²), n
 * kept with s more fraction bits than f until z = its last truncation (ee, nn consumed). */
static int k_gs_steps(eng *e, mpc_val *z, mpc_val *ee, mpc_val *nn, int s)
{
    int f = e->cfg.frac_bits, it = e->cfg.recip_iters;
    size_t n = nn->n;
    int rc = MS_OK;
    if (it == 0)
        rc = k_trunc(e, z, nn, s);
    for (int i = 0; i < it && !rc; i++) {
        mpc_val one, M, R;
        TRY(kal(e, &one, n, DOM_ARITH));
        TRY(k_addc(e, &one, ee, FX(1.0)));
        if (i == it - 1) {
            TRY(k_imul(e, &M, nn, &one));
            rc = k_trunc(e, z, &M, f + s);
            krel(e, &M), krel(e, &one);
            break;
        }
        mpc_val pa[2] = {*nn, *ee}, pb[2] = {one, *ee};
        TRY(k_mul_batch(e, &R, pa, pb, 2, f));
        krel(e, &one), krel(e, nn), krel(e, ee);
        TRY(k_slice(e, nn, &R, 0, n));
        TRY(k_slice(e, ee, &R, n, n));
        krel(e, &R);
    }
    krel(e, nn), krel(e, ee);
    return rc;
}

/* 1/x for X = x·2^f in [2^lo, 2^w) (lo >= 0): H = the highest bit q (k_hibit), P = 2^(K−q)
 * (K = max(w, f) − 1) and X·P from one b2a_bit and a 2-round product tree (k_pow2),
 * c = X·P / 2^(K+1−f) = x·2^(f−q−1) in [0.5, 1), then Goldschmidt with the scale carried
 * along (the numerator starts at w0·P instead of w0, so no final product by the scale):
 * [e0, n0] = [1 − c·w0, w0·P·2^σ], then recip_iters times [n, e] ← [n(1 + e), e²] (the last
 * without e²); n is kept with s = 4 more fraction bits than f until the last truncation.
 * Relative error: |e0|^(2^it) (1.24e-5 at it = 2) plus the truncations' units in the last
 * place, tested in tests/check_kern.c. */
static int k_recip_bits(eng *e, mpc_val *z, const mpc_val *x, int lo, int w)
{
    int f = e->cfg.frac_bits;
    norm_range(e, &lo, &w);
    int K = (w > f ? w : f) - 1, T = K + 1 - f;
    int s = T - f > 4 ? T - f : 4, sig = f + s - T;
    int D[64];
    pow_fac fac[1];
    pow2_fac(fac[0], 1);
    for (int i = 0; i < 64; i++)
        D[i] = i < w ? K - i : 0;
    mpc_val P, c, ee, nn;
    TRY(k_normalize(e, &c, &P, x, lo, w, D, fac, 1, 1, T));
    TRY(k_gs_start(e, &ee, &nn, &c, &P, sig));
    return k_gs_steps(e, z, &ee, &nn, s);
}

/* Minimax (Remez, weighted by sqrt(c)) polynomial for 1/sqrt(c) on [1, 2] in t = c − 1.5:
 * max |p(c)·sqrt(c) − 1| = 7.40e-5 (the degree 2 errs by 3.2e-3, 5 by 1.2e-5). */
static const double rsqrt_poly[5] = {0.8165051305895584, -0.27157262071238925, 0.13544568873015533,
                                     -0.08477698882179033, 0.050815978047211184};
#define RSQRT_SG 4 /* the polynomial's sum keeps f + 4 fraction bits */
#define RSQRT_S 19 /* fraction bits of the scale's √2 */

/* The factors of k_rsqrt_bits' k_pow2: fac[0] = 2^D, fac[1] = the scale S = 2^(D/2)·2^s
 * (digit g > 0 contributes v·4^g / 2; digit 0 G0 = the rounded {1, √2, 2, 2√2}·2^s), and with
 * trunc local S without G0, which is then fac[2]. */
static void rsqrt_fac(pow_fac fac[3], int s, int lm)
{
    pow2_fac(fac[0], 1);
    for (int g = 0; g < POW_GROUPS; g++)
        for (int v = 0; v < 4; v++) {
            int sh = g ? v << (2 * g - 1) : 0;
            uint64_t g0 = (uint64_t)llround(ldexp(pow(2.0, v / 2.0), s));
            fac[1][g][v] = !g ? (lm ? 1 : g0) : sh < 63 ? 1ull << sh : 0;
            fac[2][g][v] = !g ? g0 : 1;
        }
}

/* y = p(c − 1.5) with f + 4 fraction bits, p = rsqrt_poly, c in [1, 2): t² in one product,
 * [t·t², t²·t²] in one more (trunc local: truncated to f), the sum at 3f (2f), one truncation.
 * Consumes c. */
static int k_rsqrt_poly(eng *e, mpc_val *y, mpc_val *c, int lm)
{
    int f = e->cfg.frac_bits;
    size_t n = c->n;
    mpc_val t, t2, M, R;
    TRY(kal(e, &t, n, DOM_ARITH)); /* t = c − 1.5 in [−0.5, 0.5) */
    TRY(k_addc(e, &t, c, (uint64_t) - (int64_t)FX(1.5)));
    krel(e, c);
    TRY(k_fsq(e, &t2, &t));
    mpc_val pa[2] = {t, t2}, pb[2] = {t2, t2};
    TRY(k_mul_batch(e, &M, pa, pb, 2, lm ? f : 0)); /* [t³, t⁴] at 2f (trunc local: f) */
    /* the sum at 3f (2f): a0, a1·t and a2·t² with 2f-bit (f-bit) coefficients, a3·t³ and
     * a4·t⁴ with f-bit ones */
    int sf = lm ? 2 * f : 3 * f, cf = sf - f;
    TRY(k_scaled(e, &R, &t, fx_encode(rsqrt_poly[1], cf)));
    TRY(k_addmul(e, &R, &t2, fx_encode(rsqrt_poly[2], cf)));
    for (int i = 0; i < 2; i++) {
        mpc_val m1;
        TRY(k_slice(e, &m1, &M, (size_t)i * n, n));
        TRY(k_addmul(e, &R, &m1, fx_encode(rsqrt_poly[3 + i], sf - (lm ? f : 2 * f))));
        krel(e, &m1);
    }
    TRY(k_addc(e, &R, &R, fx_encode(rsqrt_poly[0], sf)));
    krel(e, &M), krel(e, &t), krel(e, &t2);
    TRY(k_trunc(e, y, &R, sf - f - RSQRT_SG));
    krel(e, &R);
    return MS_OK;
}

/* 1/sqrt(x) for X = x·2^f in [2^lo, 2^w) (normalize: bitdec), after SPU f_rsqrt
 * (libspu/kernel/hal/fxp_approx.cc: rsqrt_init_guess on u in [0.25, 0.5), rsqrt_comp's
 * 2^(−e/2) with a sqrt(2) chosen by the exponent's parity) and MP-SPDZ InvertSqrt / SqrtComp
 * (Compiler/mpc_math.py, after Lu et al. 2020): a factor-2 interval and the odd exponent's
 * sqrt(2) in the scale, so no Newton step is needed. H = the highest bit q; D = K + δ − q
 * (δ in {0, 1} makes T = K + δ − f even); c = X·2^D / 2^T in [1, 2) and
 * 1/sqrt(x) = c^(−1/2)·2^(D/2)·2^(−T/2). One k_pow2 gives P = 2^D (only inside X·P) and the
 * scale S = 2^(D/2)·2^s, whose digit-0 factor G0 is {1, √2, 2, 2√2}·2^s (rounded; the other
 * digits' factors are powers of two). y = p(c − 1.5), p of degree 4 (rsqrt_poly): t² in one
 * product, [t·t², t²·t²] in one more, the sum truncated to f + 4 bits, then y·S truncated by
 * 4 + s + T/2. With a local truncation (trunc: local, wrong with probability |v|/2^64) every
 * truncated value is kept below 2^43 instead: [t³, t⁴] truncated, the sum at 2f, and the scale
 * applied as y·G0 (truncated by s), then times the rest of S. Error relative to 1/sqrt(x),
 * before the output's last place: the polynomial's 7.40e-5, c's truncation 1.9e-6, the
 * powers' 1.6e-6, the sum's 3.4e-7, √2's rounding 6.7e-7: 7.9e-5; the output's truncation
 * adds one unit 2^−f, so relative <= 9.0e-5 on [2^−f, 8) (where 1/sqrt(x) > 0.354) and
 * <= 7.9e-5·y + 2^−f everywhere (tests/check_kern.c). Magnitudes: X·P < 2^(K+δ+1),
 * y·S < 2^61 (s is chosen so). rsqrt_iters is not used (it is normalize: thresholds' step
 * count). */
static int k_rsqrt_bits(eng *e, mpc_val *z, const mpc_val *x, int lo, int w)
{
    int f = e->cfg.frac_bits, lm = e->cfg.trunc_local;
    norm_range(e, &lo, &w);
    int K = (w > f ? w : f) - 1, dl = (K - f) & 1, T = K + dl - f, dmax = K + dl - lo;
    int s = 61 - f - RSQRT_SG - (dmax + 1) / 2; /* y·S < 2^(f+4)·2^(dmax/2)·2^s <= 2^61 */
    s = s < RSQRT_S ? s : RSQRT_S;
    int D[64];
    for (int i = 0; i < 64; i++)
        D[i] = i >= lo && i < w ? K + dl - i : 0;
    pow_fac fac[3];
    rsqrt_fac(fac, s, lm);
    mpc_val PP[3], c, y, M;
    TRY(k_normalize(e, &c, PP, x, lo, w, D, fac, lm ? 3 : 2, 0, T)); /* 2^D only inside X·2^D */
    TRY(k_rsqrt_poly(e, &y, &c, lm));
    if (lm) { /* y·G0 < 2^(f+4+1.5+s), then the power of two */
        TRY(k_imul(e, &M, &y, &PP[2]));
        krel(e, &y), krel(e, &PP[2]);
        TRY(k_trunc(e, &y, &M, s));
        krel(e, &M);
    }
    TRY(k_imul(e, &M, &y, &PP[1]));
    TRY(k_trunc(e, z, &M, RSQRT_SG + (lm ? 0 : s) + T / 2));
    krel(e, &M), krel(e, &y), krel(e, &PP[1]);
    return MS_OK;
}

/* Degree-4 polynomial for 2^-r on [0, 1]: interpolation at the Chebyshev nodes (within 2e-6
 * of 2^-r), scaled by 2^(2^-f) for the ulp added to y before its truncation. */
static const double exp2_poly[5] = {0.9999980397841521, -0.6930489339094897, 0.23943060364127447,
                                    -0.053213117788767576, 0.006835154726679732};
#define EXP_OFF 8 /* y + 8: x up to 8·ln 2 = 5.545 */
#define EXP_YB 14 /* y + 8 < 2^14: x > −(2^14 − 8)·ln 2 = −11,350 */

/* The integer part's bits of y' as arithmetic 0/1: Bj[0..3] = bits f … f+3, Bj[4] = z4 =
 * [y' < 16], Bj[5] = z5 = [y' < 32], from one k_bitdec and one b2a_bit of all six. */
static int k_exp_bits(eng *e, mpc_val Bj[6], const mpc_val *y)
{
    int f = e->cfg.frac_bits;
    size_t n = y->n;
    mpc_val sb, zb, ind[6], cat, A;
    TRY(k_bitdec(e, &sb, &zb, y, f + EXP_YB, f + 5, f + 4, f + 6));
    for (int j = 0; j < 6; j++) {
        TRY(kal(e, &ind[j], n, DOM_BOOL));
        TRY(VT->shift(e, &ind[j], j < 4 ? &sb : &zb, f + j));
        TRY(k_andc(e, &ind[j], &ind[j], 1));
    }
    TRY(k_concat(e, &cat, ind, 6));
    for (int j = 0; j < 6; j++)
        krel(e, &ind[j]);
    krel(e, &sb), krel(e, &zb);
    TRY(kal(e, &A, 6 * n, DOM_ARITH));
    TRY(VT->b2a_bit(e, &A, &cat));
    krel(e, &cat);
    TRY(k_unbatch(e, Bj, &A, 6, n));
    krel(e, &A);
    return MS_OK;
}

/* r = y' − 2^f·k' (garbage when z5 = 0, where P = 0) and the digit factors of 2^(31−k'):
 * F_j = 2^(2^j) − (2^(2^j) − 1)·b_j (j < 4), F4 = z5 + (2^16 − 1)·z4 (local). */
static int k_exp_split(eng *e, mpc_val *r, mpc_val F[5], const mpc_val *y, const mpc_val Bj[6])
{
    int f = e->cfg.frac_bits;
    TRY(k_rep(e, r, y, 1));
    for (int j = 0; j < 6; j++) {
        int64_t c = j < 4    ? -((int64_t)1 << (f + j))
                    : j == 4 ? (int64_t)1 << (f + 4)
                             : -((int64_t)1 << (f + 4));
        TRY(k_addmul(e, r, &Bj[j], (uint64_t)c));
    }
    for (int j = 0; j < 4; j++) {
        uint64_t pw = 1ull << (1 << j);
        TRY(k_scaled(e, &F[j], &Bj[j], (uint64_t) - (int64_t)(pw - 1)));
        TRY(k_addc(e, &F[j], &F[j], pw));
    }
    TRY(k_scaled(e, &F[4], &Bj[4], (1ull << 16) - 1));
    return VT->add(e, &F[4], &F[4], &Bj[5]);
}

/* r², r34 = [r³, r⁴] (fixed point) and F0123 = F0·F1·F2·F3 in two batched multiplications:
 * [r·r, F0·F1, F2·F3], then [r²·r, r²·r², F01·F23]. */
static int k_exp_powers(eng *e, mpc_val *r2, mpc_val *r34, mpc_val *F0123, const mpc_val *r,
                        const mpc_val F[5])
{
    int f = e->cfg.frac_bits;
    size_t n = r->n;
    mpc_val M, p1[3], R;
    mpc_val pa[3] = {*r, F[0], F[2]}, pb[3] = {*r, F[1], F[3]};
    TRY(k_mul_batch(e, &M, pa, pb, 3, 0));
    TRY(k_unbatch(e, p1, &M, 3, n)); /* r·r, F01, F23 */
    krel(e, &M);
    TRY(k_trunc(e, r2, &p1[0], f));
    krel(e, &p1[0]);
    pa[0] = *r2, pa[1] = *r2, pa[2] = p1[1], pb[0] = *r, pb[1] = *r2, pb[2] = p1[2];
    TRY(k_mul_batch(e, &M, pa, pb, 3, 0));
    krel(e, &p1[1]), krel(e, &p1[2]);
    TRY(k_slice(e, &R, &M, 0, 2 * n));
    TRY(k_slice(e, F0123, &M, 2 * n, n));
    krel(e, &M);
    TRY(k_trunc(e, r34, &R, f));
    krel(e, &R);
    return MS_OK;
}

/* exp(x) = 2^-y, y = −x·log2(e) (exp: pow2, the default). y' = y + 8 (plus one unit in the
 * last place, so a truncation error cannot make it negative) in [0, 2^14); its bits by one
 * decomposition (k_bitdec): the integer part k' of y' from bits f … f+3 and the zero tests
 * z4 = [y' < 16], z5 = [y' < 32] (k' = bits 0-3 + 16·(z5 − z4) when z5); one b2a_bit of
 * those 6 bits; r = y' − k' in [0, 1); 2^-r by a degree-4 polynomial (powers r², [r³, r⁴],
 * batched with the product tree of the digit factors F_j = 2^(2^j) − (2^(2^j) − 1)·b_j and
 * F4 = z5 + (2^16 − 1)·z4), so P = 2^(31−k') and 0 when y' >= 32 (x < −16.6: below the fixed
 * point's last place); exp(x) = P·2^-r / 2^(31−8). Range: x in (−11,350, 5.545]; error
 * |got − e^x| <= 2e-5·e^x + 2^(1−f): the polynomial's 4e-6 relative, y's last place 2.6e-6,
 * the truncations of r², r³, r⁴ and of the sum 1e-5 (tests/check_kern.c). The range reduction of
 * SPU's exp_pade / MP-SPDZ exp2_fx (an integer part from the bits, a polynomial on the fraction),
 * with 2^-k' as a product of digit factors. Rounds: 1 + bitdec + b2a_bit + 8. */
static int k_exp_pow2(eng *e, mpc_val *z, const mpc_val *x)
{
    int f = e->cfg.frac_bits;
    size_t n = x->n;
    mpc_val yr, y, Bj[6], r, F[5], r2, r34, r3[2], F0123, t, q, q4, Pq;
    TRY(k_scaled(e, &yr, x, (uint64_t) - (int64_t)FX(1.4426950408889634)));
    TRY(k_addc(e, &yr, &yr, (((uint64_t)EXP_OFF << f) + 1) << f));
    TRY(k_trunc(e, &y, &yr, f));
    krel(e, &yr);
    TRY(k_exp_bits(e, Bj, &y));
    TRY(k_exp_split(e, &r, F, &y, Bj));
    krel(e, &y);
    for (int j = 0; j < 6; j++)
        krel(e, &Bj[j]);
    TRY(k_exp_powers(e, &r2, &r34, &F0123, &r, F));
    /* q = 2^-r by exp2_poly scaled by 2^(2^-f) (raw 2f), one truncation */
    double comp = exp2(ldexp(1.0, -f)), a[7] = {0};
    for (int i = 0; i < 5; i++)
        a[i] = exp2_poly[i] * comp;
    TRY(k_unbatch(e, r3, &r34, 2, n));
    mpc_val *const pw[7] = {NULL, &r, &r2, &r3[0], &r3[1], NULL, NULL};
    TRY(k_poly_raw(e, &t, pw, a));
    TRY(k_trunc(e, &q, &t, f));
    krel(e, &t), krel(e, &r), krel(e, &r2), krel(e, &r3[0]), krel(e, &r3[1]), krel(e, &r34);
    /* exp = q·F4·F0123 / 2^(31 − 8) */
    TRY(k_imul(e, &q4, &q, &F[4]));
    TRY(k_imul(e, &Pq, &q4, &F0123));
    TRY(k_trunc(e, z, &Pq, 31 - EXP_OFF));
    krel(e, &q), krel(e, &q4), krel(e, &Pq), krel(e, &F0123);
    for (int j = 0; j < 5; j++)
        krel(e, &F[j]);
    return MS_OK;
}

static int k_exp_pw2(const eng *e) { return strcmp(e->cfg.exp, "taylor") != 0; }

static int k_exp(eng *e, mpc_val *z, const mpc_val *x)
{
    return k_exp_pw2(e) ? k_exp_pow2(e, z, x) : k_exp_taylor(e, z, x);
}

static int k_cmp_norm(const eng *e) { return !strcmp(e->cfg.normalize, "thresholds"); }

/* 1/x for x in [2^jlo, 2^(w−f)) (w: X's bit bound, 0 = the default, norm_bits). */
static int k_recip(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    if (k_cmp_norm(e))
        return k_recip_cmp(e, z, x, jlo);
    return k_recip_bits(e, z, x, e->cfg.frac_bits + jlo, w);
}

/* 1/sqrt(x) for x in [2^jlo, 2^(w−f)). */
static int k_rsqrt(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    if (k_cmp_norm(e))
        return k_rsqrt_cmp(e, z, x);
    return k_rsqrt_bits(e, z, x, e->cfg.frac_bits + jlo, w);
}

/* ---- activations: PUMA piecewise polynomials -------------------------------------------- */

typedef struct pw_poly {
    double thr[3]; /* s1 = [x < thr0], s2 = [x < thr1], s3 = [x > thr2] */
    double lo[7];  /* polynomial on [thr0, thr1), coefficients of x^0..x^6 */
    double mid[7]; /* polynomial on [thr1, thr2] */
} pw_poly;

/* PUMA hack_gelu (puma_benchmarks bench_gpt2; MP-SPDZ ml.Gelu), mpc-costs.md §2.4. */
static const pw_poly puma_gelu = {
    {-4.0, -1.95, 3.0},
    {-0.5054031199708174, -0.42226581151983866, -0.11807612951181953, -0.011034134030615728},
    {0.008526321541038084, 0.5, 0.3603292692789629, 0, -0.037688200365904236, 0,
     0.0018067462606141187},
};

/* PUMA/SPU flax_llama7b hack_silu, mpc-costs.md §2.4. */
static const pw_poly puma_silu = {
    {-8.0, -4.0, 4.0},
    {-0.3067541139982155, -0.0819767021525476, -0.0055465625580307},
    {0.0085064025895951, 0.5, 0.2281430841728270, 0, -0.011113046708173, 0, 0.0002743776353465},
};

/* SiLU as x·σ(x) (cfg.approx = "sigmoid"): s = [x < 0], a = |x| = (1 - 2s)·x, σ(|x|) =
 * 1 / (1 + exp(-a)) with exp on non-positive arguments only (its accurate side) and the
 * reciprocal on [1, 2], σ(x) = s + (1 - 2s)·σ(|x|), then x·σ(x). Rounds: msb, an integer
 * product, exp, reciprocal, an integer product, a fixed-point product. Error: exp's absolute
 * error ε (2e-3 at exp_iters 8) moves σ by at most ε and the result by |x|·ε, and nothing at
 * x = 0 (exp(0) is exact): <= 1e-2 for |x| <= 5, against PUMA's 8.5e-3 at 0 and 7.2e-2 at 4. */
static int k_silu_sigmoid(eng *e, mpc_val *z, const mpc_val *x)
{
    size_t n = x->n;
    mpc_val s, u, a, t, r, ur, sg;
    TRY(k_msb(e, &s, x));
    TRY(k_scaled(e, &u, &s, (uint64_t)-2));
    TRY(k_addc(e, &u, &u, 1));            /* 1 - 2s, a plain ±1 */
    TRY(k_imul(e, &a, &u, x));            /* |x| */
    TRY(k_mulc(e, &a, &a, (uint64_t)-1)); /* -|x| */
    TRY(k_exp(e, &t, &a));
    TRY(k_addc(e, &t, &t, FX(1.0)));
    TRY(k_recip(e, &r, &t, -1, e->cfg.frac_bits + 2)); /* 1 + exp(-|x|) in [1, 2] */
    TRY(k_imul(e, &ur, &u, &r));
    TRY(kal(e, &sg, n, DOM_ARITH));
    TRY(k_mulc(e, &s, &s, FX(1.0))); /* s as fixed point */
    TRY(VT->add(e, &sg, &s, &ur));
    TRY(k_fmul(e, z, x, &sg));
    krel(e, &s), krel(e, &u), krel(e, &a), krel(e, &t), krel(e, &r), krel(e, &ur), krel(e, &sg);
    return MS_OK;
}

/* Piecewise: 0 below thr0, lo on [thr0, thr1), mid on [thr1, thr2], x above thr2.
 * Rounds: one batched lt of 3n, powers x², [x³, x⁴], x⁶ (3 fixed-point multiplications),
 * one truncation of both polynomials, one batched selector multiplication of 3n. */
static int k_piecewise(eng *e, mpc_val *z, const mpc_val *x, const pw_poly *pp)
{
    size_t n = x->n;
    mpc_val D, s, x2, x3, x4, x6, pa[2], pb[2], A, T;
    TRY(k_rep(e, &D, x, 3)); /* [x - thr0; x - thr1; thr2 - x] */
    uint64_t sg[3] = {1, 1, (uint64_t)-1};
    uint64_t off[3] = {(uint64_t) - (int64_t)FX(pp->thr[0]), (uint64_t) - (int64_t)FX(pp->thr[1]),
                       FX(pp->thr[2])};
    TRY(k_addblk(e, &D, &D, sg, 3, 1));
    TRY(k_addblk(e, &D, &D, off, 3, 0));
    TRY(k_msb(e, &s, &D));
    TRY(k_fsq(e, &x2, x));
    pa[0] = x2, pa[1] = x2, pb[0] = *x, pb[1] = x2;
    TRY(k_mul_batch(e, &T, pa, pb, 2, e->cfg.frac_bits)); /* [x³; x⁴] */
    TRY(k_slice(e, &x3, &T, 0, n));
    TRY(k_slice(e, &x4, &T, n, n));
    TRY(k_fmul(e, &x6, &x3, &x3));
    krel(e, &T);
    mpc_val *pw[7] = {NULL, (mpc_val *)x, &x2, &x3, &x4, NULL, &x6};
    mpc_val F0r, F1r, F;
    TRY(k_poly_raw(e, &F0r, pw, pp->lo));
    TRY(k_poly_raw(e, &F1r, pw, pp->mid));
    pa[0] = F0r, pa[1] = F1r;
    TRY(k_concat(e, &A, pa, 2));
    TRY(k_trunc(e, &F, &A, e->cfg.frac_bits));
    krel(e, &A);
    /* selectors: [s2 - s1; 1 - s2 - s3; s3] times [F0; F1; x] */
    mpc_val s1, s2, s3, q[3], Sel, Val, P;
    TRY(k_slice(e, &s1, &s, 0, n));
    TRY(k_slice(e, &s2, &s, n, n));
    TRY(k_slice(e, &s3, &s, 2 * n, n));
    TRY(kal(e, &q[0], n, DOM_ARITH));
    TRY(VT->sub(e, &q[0], &s2, &s1));
    TRY(kal(e, &q[1], n, DOM_ARITH));
    TRY(VT->add(e, &q[1], &s2, &s3));
    TRY(k_mulc(e, &q[1], &q[1], (uint64_t)-1));
    TRY(k_addc(e, &q[1], &q[1], 1));
    q[2] = s3;
    TRY(k_concat(e, &Sel, q, 3));
    mpc_val vv[2] = {F, *x};
    TRY(k_concat(e, &Val, vv, 2));
    TRY(k_imul(e, &P, &Sel, &Val));
    TRY(k_blocksum(e, z, &P, 3, n));
    krel(e, &D), krel(e, &s), krel(e, &x2), krel(e, &x3), krel(e, &x4), krel(e, &x6);
    krel(e, &F0r), krel(e, &F1r), krel(e, &F), krel(e, &s1), krel(e, &s2), krel(e, &s3);
    krel(e, &q[0]), krel(e, &q[1]), krel(e, &Sel), krel(e, &Val), krel(e, &P);
    return MS_OK;
}

/* SiLU: PUMA's piecewise polynomial, or x·σ(x) with approx: sigmoid. */
static int k_silu(eng *e, mpc_val *z, const mpc_val *x)
{
    if (!strcmp(e->cfg.approx, "sigmoid"))
        return k_silu_sigmoid(e, z, x);
    return k_piecewise(e, z, x, &puma_silu);
}

/* ---- softmax, norms ---------------------------------------------------------------------- */

/* PUMA softmax over R rows of n: max, x - max, exp masked below clip, one reciprocal per row
 * (x / broadcast(s) → x · broadcast(1/s)). causal >= 0 masks column j > causal + (r mod m). */
static int k_softmax(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t m, size_t n,
                     long causal)
{
    int f = e->cfg.frac_bits;
    mpc_val xm, mx, mb, d, b, ex, exb, sum, rs, rb;
    TRY(k_rep(e, &xm, x, 1));
    if (causal >= 0) { /* masked scores pushed 2^12 below anything real: they never win */
        uint64_t *c;
        TRY(pub64(x, R * n, &c));
        if (c)
            for (size_t i = 0; i < R * n; i++)
                c[i] = (long)(i % n) > causal + (long)((i / n) % m) ? (uint64_t)-1 << (f + 12) : 0;
        int rc = VT->add_pub(e, &xm, &xm, c, R * n);
        free(c);
        TRY(rc);
    }
    TRY(k_rowmax(e, &mx, NULL, &xm, R, n, 64));
    TRY(k_bcast(e, &mb, &mx, n));
    TRY(kal(e, &d, R * n, DOM_ARITH));
    TRY(VT->sub(e, &d, &xm, &mb));
    /* b = [clip < d] = msb(clip - d); exp: pow2 is 0 below -(f+1)·ln 2 already (its last
     * place), so a clip below that needs no mask */
    mpc_val cd = {0};
    int clip = !k_exp_pw2(e) || e->cfg.softmax_clip > -(f + 1) * 0.6931471805599453;
    b = (mpc_val){0};
    if (clip) {
        TRY(k_scaled(e, &cd, &d, (uint64_t)-1));
        TRY(k_addc(e, &cd, &cd, FX(e->cfg.softmax_clip)));
        TRY(k_msb(e, &b, &cd));
    }
    TRY(k_exp(e, &ex, &d));
    if (clip)
        TRY(k_imul(e, &exb, &ex, &b));
    else
        TRY(k_rep(e, &exb, &ex, 1));
    TRY(k_rowsum(e, &sum, &exb, R, n));
    /* the row sum is >= exp(0) = 1 and at most n (each term <= 1) */
    TRY(k_recip(e, &rs, &sum, -1, f + idx_bits(n) + 1));
    TRY(k_bcast(e, &rb, &rs, n));
    TRY(k_fmul(e, z, &exb, &rb));
    krel(e, &xm), krel(e, &mx), krel(e, &mb), krel(e, &d), krel(e, &cd), krel(e, &b);
    krel(e, &ex), krel(e, &exb), krel(e, &sum), krel(e, &rs), krel(e, &rb);
    return MS_OK;
}

/* y = v · g with g a row vector (1×n) broadcast over R rows; g public or secret. */
static int k_gain(eng *e, mpc_val *z, const mpc_val *v, const mpc_val *g, int g_public, size_t R,
                  size_t n)
{
    if (g_public) {
        uint64_t *c;
        TRY(pub64(v, R * n, &c));
        if (c)
            for (size_t i = 0; i < R * n; i++)
                c[i] = g->s[0][i % n];
        mpc_val t;
        TRY(kal(e, &t, R * n, DOM_ARITH));
        int rc = VT->mul_pub(e, &t, v, c, R * n);
        free(c);
        TRY(rc);
        rc = k_trunc(e, z, &t, e->cfg.frac_bits);
        krel(e, &t);
        return rc;
    }
    mpc_val gb;
    TRY(kperm(e, &gb, g, R * n, (kmap){MAP_REP, n, 0, 0, 0}));
    TRY(k_fmul(e, z, v, &gb));
    krel(e, &gb);
    return MS_OK;
}

/* LayerNorm (bias != NULL or centre) / RMSNorm over R rows of n:
 * [mean, x - mean,] square, mean, + eps, rsqrt, multiply, gain[, bias]. */
static int k_norm(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int centre, double eps,
                  const mpc_val *g, int g_pub, const mpc_val *bias, int b_pub)
{
    mpc_val d, sq, ss, var, rs, rb, y, t;
    if (centre) {
        mpc_val s, mu, mb;
        TRY(k_rowsum(e, &s, x, R, n));
        TRY(k_mulc(e, &s, &s, FX(1.0 / (double)n)));
        TRY(k_trunc(e, &mu, &s, e->cfg.frac_bits));
        TRY(k_bcast(e, &mb, &mu, n));
        TRY(kal(e, &d, R * n, DOM_ARITH));
        TRY(VT->sub(e, &d, x, &mb));
        krel(e, &s), krel(e, &mu), krel(e, &mb);
    } else {
        TRY(k_rep(e, &d, x, 1));
    }
    TRY(k_fsq(e, &sq, &d));
    TRY(k_rowsum(e, &ss, &sq, R, n));
    TRY(k_mulc(e, &ss, &ss, FX(1.0 / (double)n)));
    TRY(k_trunc(e, &var, &ss, e->cfg.frac_bits));
    TRY(k_addc(e, &var, &var, FX(eps)));
    TRY(k_rsqrt(e, &rs, &var, (int)floor(log2(eps)), 0)); /* var + eps >= eps */
    TRY(k_bcast(e, &rb, &rs, n));
    TRY(k_fmul(e, &y, &d, &rb));
    if (g) {
        TRY(k_gain(e, &t, &y, g, g_pub, R, n));
        krel(e, &y);
        y = t;
    }
    if (bias) {
        if (b_pub) {
            uint64_t *c;
            TRY(pub64(&y, R * n, &c));
            if (c)
                for (size_t i = 0; i < R * n; i++)
                    c[i] = bias->s[0][i % n];
            int rc = VT->add_pub(e, &y, &y, c, R * n);
            free(c);
            TRY(rc);
        } else {
            mpc_val bb;
            TRY(kperm(e, &bb, bias, R * n, (kmap){MAP_REP, n, 0, 0, 0}));
            TRY(VT->add(e, &y, &y, &bb));
            krel(e, &bb);
        }
    }
    *z = y;
    krel(e, &d), krel(e, &sq), krel(e, &ss), krel(e, &var), krel(e, &rs), krel(e, &rb);
    return MS_OK;
}

/* ---- top-k: Batcher odd–even merge sort ------------------------------------------------- */

/* Comparators (lo, hi) of layer (p, k) of Batcher's odd–even merge sort on n keys (the
 * power-of-two network with every comparator touching a key >= n dropped: those keys act as
 * -inf padding already in place). Fills lo/hi when non-NULL; returns the count. */
size_t kern_oem_layer(size_t n, size_t p, size_t k, uint32_t *lo, uint32_t *hi)
{
    size_t cnt = 0, P2 = 2 * p, keep = 2 * p - k;
    for (size_t j = k % p; j + k < n; j += 2 * k) {
        size_t lim = k < n - j - k ? k : n - j - k;
        if (!lo) { /* t in [j, j+lim) with t mod 2p < 2p - k */
            size_t a = j, b = j + lim;
            size_t cb = (b / P2) * keep + (b % P2 < keep ? b % P2 : keep);
            size_t ca = (a / P2) * keep + (a % P2 < keep ? a % P2 : keep);
            cnt += cb - ca;
            continue;
        }
        for (size_t i = 0; i < lim; i++)
            if ((i + j) / P2 == (i + j + k) / P2) {
                lo[cnt] = (uint32_t)(i + j);
                hi[cnt] = (uint32_t)(i + j + k);
                cnt++;
            }
    }
    return cnt;
}

/* The public maps of one layer (NULL in cost mode): ia, ib the lower and upper key of each of
 * the cnt comparators of every row in each of the nv vectors, map the layer's output over
 * [V; A; B] (a position a comparator touches reads its A or B, the others V). */
static int sort_maps(const mpc_val *V, size_t R, size_t n, int nv, size_t p, size_t k, size_t cnt,
                     uint32_t **ia, uint32_t **ib, uint32_t **map)
{
    size_t N = R * n, P = R * cnt, NV = (size_t)nv;
    *ia = *ib = *map = NULL;
    if (!has_data(V))
        return MS_OK;
    uint32_t *lo = malloc(cnt * sizeof *lo), *hi = malloc(cnt * sizeof *hi);
    uint32_t *a = malloc(NV * P * sizeof *a), *b = malloc(NV * P * sizeof *b);
    uint32_t *mp = malloc(NV * N * sizeof *mp);
    int rc = lo && hi && a && b && mp ? MS_OK : MS_ERR_NOMEM;
    if (!rc) {
        kern_oem_layer(n, p, k, lo, hi);
        for (size_t i = 0; i < NV * N; i++)
            mp[i] = (uint32_t)i;
        for (size_t h = 0; h < NV; h++)
            for (size_t r = 0; r < R; r++)
                for (size_t q = 0; q < cnt; q++) {
                    size_t at = h * P + r * cnt + q;
                    a[at] = (uint32_t)(h * N + r * n + lo[q]);
                    b[at] = (uint32_t)(h * N + r * n + hi[q]);
                    mp[a[at]] = (uint32_t)(NV * N + at);
                    mp[b[at]] = (uint32_t)(NV * N + NV * P + at);
                }
    }
    free(lo), free(hi);
    if (rc) {
        free(a), free(b), free(mp);
        return rc;
    }
    *ia = a, *ib = b, *map = mp;
    return MS_OK;
}

/* Compare-exchange of A and B (nv vectors of P, the keys first): c = [A < B] (desc) or
 * [B < A] on the keys, then A += c·(B − A), B −= c·(B − A) from one multiplication. */
static int k_cmp_exchange(eng *e, mpc_val *A, mpc_val *B, size_t P, size_t nv, int w, int desc)
{
    mpc_val Av, Bv, c, C2, D, T;
    TRY(k_slice(e, &Av, A, 0, P));
    TRY(k_slice(e, &Bv, B, 0, P));
    if (desc)
        TRY(k_lt(e, &c, &Av, &Bv, w)); /* swap when A < B */
    else
        TRY(k_lt(e, &c, &Bv, &Av, w)); /* swap when B < A */
    TRY(k_rep(e, &C2, &c, nv));
    TRY(kal(e, &D, nv * P, DOM_ARITH));
    TRY(VT->sub(e, &D, B, A));
    TRY(k_imul(e, &T, &C2, &D));
    TRY(VT->add(e, A, A, &T));
    TRY(VT->sub(e, B, B, &T));
    krel(e, &Av), krel(e, &Bv), krel(e, &c), krel(e, &C2), krel(e, &D), krel(e, &T);
    return MS_OK;
}

/* One layer on V = nv vectors of N = R·n ([values] or [values; indices]): compare-exchange
 * cnt pairs per row, the larger value to the lower position when desc, else to the higher.
 * One lt of R·cnt, one multiplication of nv·R·cnt. */
static int k_sort_layer(eng *e, mpc_val *V, size_t R, size_t n, int nv, size_t p, size_t k,
                        size_t cnt, int w, int desc)
{
    size_t N = R * n, P = R * cnt, NV = (size_t)nv;
    uint32_t *ia, *ib, *map;
    mpc_val A, B, cat, nw;
    int rc = sort_maps(V, R, n, nv, p, k, cnt, &ia, &ib, &map);
    if (!rc)
        rc = k_move(e, &A, V, ia, NV * P, DOM_ARITH);
    if (!rc)
        rc = k_move(e, &B, V, ib, NV * P, DOM_ARITH);
    free(ia), free(ib);
    if (!rc)
        rc = k_cmp_exchange(e, &A, &B, P, NV, w, desc);
    if (!rc) {
        mpc_val parts[3] = {*V, A, B};
        rc = k_concat(e, &cat, parts, 3);
    }
    if (!rc)
        rc = k_move(e, &nw, &cat, map, NV * N, DOM_ARITH);
    free(map);
    TRY(rc);
    krel(e, V);
    *V = nw;
    krel(e, &A), krel(e, &B), krel(e, &cat);
    return MS_OK;
}

/* Batcher's odd–even merge sort of every row of V (nv vectors of R·n, the first the keys):
 * ⌈log2 n⌉(⌈log2 n⌉+1)/2 layers, each one lt and one multiplication. */
static int k_sort_net(eng *e, mpc_val *V, size_t R, size_t n, int nv, int w, int desc)
{
    for (size_t p = 1; p < n; p *= 2)
        for (size_t kk = p; kk >= 1; kk /= 2) {
            size_t cnt = kern_oem_layer(n, p, kk, NULL, NULL);
            if (cnt)
                TRY(k_sort_layer(e, V, R, n, nv, p, kk, cnt, w, desc));
        }
    return MS_OK;
}

/* SORT: every row sorted by value (ascending; desc = 1: descending), values only — no index
 * travels, so a layer multiplies one word per comparator where top-k's multiplies two. */
static int k_sort(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int w, int desc)
{
    TRY(k_rep(e, z, x, 1));
    return k_sort_net(e, z, R, n, 1, w, desc);
}

/* Top-k by sorting each row descending with its index travelling (odd–even merge network,
 * ⌈log2 n⌉(⌈log2 n⌉+1)/2 layers), then one-hot rows of the first k indices. */
static int k_topk_sort(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    mpc_val io, V, parts[2], ix, top;
    TRY(k_iota(e, &io, x, R, n));
    parts[0] = *x, parts[1] = io;
    TRY(k_concat(e, &V, parts, 2));
    TRY(k_sort_net(e, &V, R, n, 2, w, 1));
    TRY(k_slice(e, &ix, &V, R * n, R * n));
    TRY(k_cols(e, &top, &ix, R, n, 0, k));
    TRY(k_onehot(e, z, &top, n));
    krel(e, &io), krel(e, &V), krel(e, &ix), krel(e, &top);
    return MS_OK;
}

/* Top-k by k extractions: argmax (tree + onehot), then the winner is pushed 2^20 below
 * everything (a local multiplication of the public one-hot weight), k times. */
static int k_topk_tree(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    mpc_val cur, oh[64], cat;
    if (k > 64)
        return MS_ERR_INTERNAL;
    TRY(k_rep(e, &cur, x, 1));
    for (size_t q = 0; q < k; q++) {
        mpc_val mx, ix, pen;
        TRY(k_rowmax(e, &mx, &ix, &cur, R, n, w));
        TRY(k_onehot(e, &oh[q], &ix, n));
        TRY(k_scaled(e, &pen, &oh[q], FX(1048576.0)));
        TRY(VT->sub(e, &cur, &cur, &pen));
        krel(e, &mx), krel(e, &ix), krel(e, &pen);
    }
    TRY(k_concat(e, &cat, oh, (int)k)); /* (q, r, j) → (r, q, j) */
    uint32_t *idx;
    TRY(pub32(x, R * k * n, &idx));
    if (idx)
        for (size_t r = 0; r < R; r++)
            for (size_t q = 0; q < k; q++)
                for (size_t j = 0; j < n; j++)
                    idx[(r * k + q) * n + j] = (uint32_t)((q * R + r) * n + j);
    int rc = k_move(e, z, &cat, idx, R * k * n, DOM_ARITH);
    free(idx);
    for (size_t q = 0; q < k; q++)
        krel(e, &oh[q]);
    krel(e, &cur), krel(e, &cat);
    return rc;
}

static int ceil_log2(int v)
{
    int l = 0;
    while ((1 << l) < v)
        l++;
    return l;
}

/* Rounds of k_lt and k_eqz at width w, from their constructions (for the public choice
 * between top-k's two constructions). */
static uint64_t rounds_lt(const eng *e, int w)
{
    int three = e->n_parties == 3, b2a = three ? 2 : 1;
    if (k_packed(e))
        return (uint64_t)(three + 1 + ceil_log2((w > 1 && w < 64 ? w : 64) - 1) + b2a);
    return (uint64_t)(three + 7 + b2a);
}

static uint64_t rounds_eq(const eng *e, int w)
{
    int three = e->n_parties == 3, b2a = three ? 2 : 1;
    if (k_packed(e))
        return (uint64_t)(three + ceil_log2(w >= 1 && w < 64 ? w : 64) + b2a);
    return (uint64_t)(three + 6 + b2a);
}

/* ---- top-k: shuffle + QuickSelect (SPU topk_1d) ----------------------------------------- */

static uint64_t qs_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One partition of row r's interval [lo[r], hi[r]] around its first element, given g[j] = 1
 * when the element at position lo+1+j is larger than the pivot (SPU TwoWayPartition's two
 * pointers): larger elements to the left, the pivot between; then the interval narrows to the
 * side holding position k−1, and the row is done when the pivot lands there or one element
 * is left. cur maps positions to elements (public). */
static void qs_partition(uint32_t *cur, uint8_t *g, uint32_t *lo, uint32_t *hi, uint8_t *act,
                         size_t k)
{
    uint32_t l = *lo, left = l + 1, right = *hi;
    uint8_t *f = g - (l + 1); /* f[p]: the flag of position p */
    for (;;) {
        while (left <= right && f[left])
            left++;
        while (left <= right && !f[right])
            right--;
        if (left > right)
            break;
        uint32_t t = cur[left];
        cur[left] = cur[right], cur[right] = t;
        uint8_t u = f[left];
        f[left] = f[right], f[right] = u;
        left++, right--;
    }
    uint32_t t = cur[l]; /* the pivot to its place: after the right-most larger element */
    cur[l] = cur[right], cur[right] = t;
    uint32_t p = right;
    if (p == k - 1) {
        *act = 0;
        return;
    }
    if (p > k - 1)
        *hi = p - 1;
    else
        *lo = p + 1;
    *act = *lo < *hi;
}

/* QuickSelect's public state: per row the element at each position (cur), the interval
 * [lo, hi] and whether it is still active; g the partition flags; rank (cost mode) a seeded
 * random order standing in for the revealed comparisons. */
typedef struct qs_state {
    uint32_t *cur, *lo, *hi;
    uint8_t *act, *g;
    uint64_t *rank;
    size_t R, n, k;
} qs_state;

static void qs_free(qs_state *s)
{
    free(s->cur), free(s->lo), free(s->hi), free(s->act), free(s->g), free(s->rank);
}

static int qs_init(qs_state *s, size_t R, size_t n, size_t k, int data)
{
    size_t N = R * n;
    *s = (qs_state){malloc(N * sizeof *s->cur),
                    malloc(R * sizeof *s->lo),
                    malloc(R * sizeof *s->hi),
                    malloc(R),
                    malloc(N),
                    data ? NULL : malloc(N * sizeof *s->rank),
                    R,
                    n,
                    k};
    if (!s->cur || !s->lo || !s->hi || !s->act || !s->g || (!data && !s->rank)) {
        qs_free(s);
        return MS_ERR_NOMEM;
    }
    uint64_t seed = 0x71c5e1ec7ull ^ ((uint64_t)n << 32) ^ ((uint64_t)k << 8) ^ R, *rk = s->rank;
    for (size_t r = 0; r < R; r++) {
        s->lo[r] = 0, s->hi[r] = (uint32_t)(n - 1), s->act[r] = k < n && n > 1;
        for (size_t i = 0; i < n; i++)
            s->cur[r * n + i] = (uint32_t)i;
        for (size_t i = 0; rk && i < n; i++)
            rk[r * n + i] = i;
        for (size_t i = n - 1; rk && i > 0; i--) {
            size_t j = qs_mix(&seed) % (i + 1);
            uint64_t t = rk[r * n + i];
            rk[r * n + i] = rk[r * n + j], rk[r * n + j] = t;
        }
    }
    return MS_OK;
}

/* The step's comparisons: each active row's pivot (ia) against the rest of its interval (ib). */
static void qs_pairs(const qs_state *s, uint32_t *ia, uint32_t *ib)
{
    size_t n = s->n;
    for (size_t r = 0, q = 0; r < s->R; r++)
        for (uint32_t p = s->lo[r] + 1; s->act[r] && p <= s->hi[r]; p++, q++)
            ia[q] = (uint32_t)(r * n + s->cur[r * n + s->lo[r]]),
            ib[q] = (uint32_t)(r * n + s->cur[r * n + p]);
}

/* Every active row partitioned by its revealed flags (bits; cost mode: the rank order). */
static void qs_partitions(qs_state *s, const uint64_t *bits)
{
    size_t n = s->n;
    for (size_t r = 0, q = 0; r < s->R; r++) {
        if (!s->act[r])
            continue;
        uint32_t len = s->hi[r] - s->lo[r], *cur = s->cur + r * n;
        for (uint32_t j = 0; j < len; j++)
            s->g[r * n + j] =
                bits ? (uint8_t)(bits[q + j] & 1)
                     : s->rank[r * n + cur[s->lo[r] + 1 + j]] > s->rank[r * n + cur[s->lo[r]]];
        q += len;
        qs_partition(cur, s->g + r * n, &s->lo[r], &s->hi[r], &s->act[r], s->k);
    }
}

/* [keys; positions] of every row shuffled by one secret permutation per row, the keys
 * x·2^b + (2^b − 1 − j) (b = ⌈log2 n⌉, local). */
static int k_qs_shuffled(eng *e, mpc_val *S, const mpc_val *x, size_t R, size_t n)
{
    size_t N = R * n;
    unsigned b = 0;
    while (((size_t)1 << b) < n)
        b++;
    mpc_val key, io, V, parts[2];
    TRY(k_scaled(e, &key, x, (uint64_t)1 << b));
    uint64_t *c;
    TRY(pub64(x, N, &c));
    if (c)
        for (size_t i = 0; i < N; i++)
            c[i] = ((uint64_t)1 << b) - 1 - i % n;
    int rc = VT->add_pub(e, &key, &key, c, N);
    free(c);
    TRY(rc);
    TRY(k_iota(e, &io, x, R, n));
    parts[0] = key, parts[1] = io;
    TRY(k_concat(e, &V, parts, 2));
    krel(e, &key), krel(e, &io);
    TRY(kal(e, S, 2 * N, DOM_ARITH));
    TRY(VT->shuffle(e, S, &V, n, 2));
    krel(e, &V);
    return MS_OK;
}

/* One QuickSelect step of every active row: its pivot against the rest of its interval, all
 * rows in one lt and one OPEN to all, then the public partitions. *C: the comparisons made
 * known to every node (sync_public; 0: every row is done). */
static int k_qs_step(eng *e, qs_state *s, const mpc_val *S, const mpc_val *x, int w, uint64_t *C)
{
    uint64_t own = 0;
    for (size_t r = 0; r < s->R; r++)
        own += s->act[r] ? s->hi[r] - s->lo[r] : 0;
    *C = own;
    TRY(VT->sync_public(e, C));
    if (!*C)
        return MS_OK;
    int mine = *C == own; /* semi2k's dealer may follow counts its own order did not give */
    uint32_t *ia = NULL, *ib = NULL;
    uint64_t *bits = NULL;
    mpc_val A, B, cb;
    int rc = pub32(x, *C, &ia);
    if (!rc)
        rc = pub32(x, *C, &ib);
    if (!rc)
        rc = pub64(x, *C, &bits);
    if (!rc && ia && mine)
        qs_pairs(s, ia, ib);
    if (!rc && !(rc = k_move(e, &A, S, ia, *C, DOM_ARITH)) &&
        !(rc = k_move(e, &B, S, ib, *C, DOM_ARITH)) && !(rc = k_lt(e, &cb, &A, &B, w)) &&
        !(rc = VT->open(e, bits, &cb, -1))) {
        krel(e, &A), krel(e, &B), krel(e, &cb);
        if (mine)
            qs_partitions(s, bits);
    }
    free(ia), free(ib), free(bits);
    return rc;
}

/* z = the one-hot rows (over n) of the positions payload at positions 0 … k−1 of each row. */
static int k_qs_output(eng *e, mpc_val *z, const mpc_val *S, const qs_state *s, const mpc_val *x)
{
    size_t R = s->R, n = s->n, k = s->k;
    uint32_t *ix;
    mpc_val top;
    TRY(pub32(x, R * k, &ix));
    if (ix)
        for (size_t r = 0; r < R; r++)
            for (size_t q = 0; q < k; q++)
                ix[r * k + q] = (uint32_t)(R * n + r * n + s->cur[r * n + q]);
    int rc = k_move(e, &top, S, ix, R * k, DOM_ARITH);
    free(ix);
    TRY(rc);
    rc = k_onehot(e, z, &top, n);
    krel(e, &top);
    return rc;
}

/* Top-k of R rows of n by a secret shuffle and QuickSelect with revealed comparisons (SPU
 * libspu/kernel/hal/permute.cc topk_1d → PrepareInput, QuickSelectTopk, TwoWayPartition),
 * the rows advancing together (MPCache infer/rank.cc runs the heads concurrently): output
 * (R·k, n) one-hot rows of the k largest, in the order the selection leaves them (the set is
 * exact; not sorted).
 *   keys   x·2^b + (2^b − 1 − j), b = ⌈log2 n⌉ (local): distinct, larger value first and equal
 *          values by smaller position, so the revealed pattern is that of a random order (SPU
 *          adds a secret random tie-breaker instead: `confusion`). Exact while
 *          |x·2^f|·2^b < 2^62.
 *   shuffle [keys; positions] by one secret permutation per row (eng shuffle, 2 rounds).
 *   loop   per active row one comparison of its pivot (first element of its interval) with the
 *          rest, all rows in one LT and one OPEN to all; the partition and the narrowing are
 *          public local work (swaps of shares). A row stops when its pivot lands at position
 *          k−1 or one element is left.
 *   output the positions payload of positions 0 … k−1, one-hot over n.
 * Rounds: 2 + I·(r_lt + 1) + r_eq, I the partitions of the slowest row; bytes follow the
 * interval sizes. Both depend on the data's order after the shuffle — a draw from a
 * distribution that does not depend on the data (keys are distinct): E[I] per row is
 * H_k + H_(n−k+1) − 2 + (a last pivot) ≈ ln k + ln(n − k) (an element j ≠ k-th is ever a
 * pivot with probability 1/(|rank j − k| + 1)). With data the outcomes come from the OPEN; on a
 * cost engine from a seeded random order of the same shape (the security argument's
 * simulator), so a step's cost is one fixed draw; the count of each step is made known to
 * semi2k's dealer (sync_public), which follows the sizes without the outcomes. */
static int k_topk_qs(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    mpc_val S;
    qs_state s;
    uint64_t C = 1;
    TRY(k_qs_shuffled(e, &S, x, R, n));
    TRY(qs_init(&s, R, n, k, has_data(x)));
    int rc = MS_OK;
    while (!rc && C)
        rc = k_qs_step(e, &s, &S, x, w, &C);
    if (!rc)
        rc = k_qs_output(e, z, &S, &s, x);
    qs_free(&s);
    krel(e, &S);
    return rc;
}

/* Top-k of R rows of n, output (R·k, n) one-hot rows in descending order. Whichever of the
 * two constructions has fewer rounds for these public shapes: k extractions cost
 * k(⌈log2 n⌉(r_lt + 1) + r_eq), the sorting network L(r_lt + 1) + r_eq with L its non-empty
 * layers (r_lt, r_eq the rounds of lt at the values' bound w and of the one-hot's eq). */
static int k_topk(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    uint64_t r_lt = rounds_lt(e, w), r_eq = rounds_eq(e, k_packed(e) ? idx_bits(n) : 64);
    uint64_t lv = 0, layers = 0;
    while (((size_t)1 << lv) < n)
        lv++;
    for (size_t p = 1; p < n; p *= 2)
        for (size_t kk = p; kk >= 1; kk /= 2)
            layers += kern_oem_layer(n, p, kk, NULL, NULL) > 0;
    if (!strcmp(e->cfg.topk, "quickselect"))
        return k_topk_qs(e, z, x, R, n, k, w);
    uint64_t tree = k * (lv * (r_lt + 1) + r_eq), sort = layers * (r_lt + 1) + r_eq;
    if (k <= 64 && tree < sort)
        return k_topk_tree(e, z, x, R, n, k, w);
    return k_topk_sort(e, z, x, R, n, k, w);
}

/* ---- rope, matmul ------------------------------------------------------------------------ */

/* Rotates pairs (2i, 2i+1) of each head (hd columns) of each row of n columns (R rows, row r
 * at position pos0 + r mod m) by pos·theta^(-2i/hd), as llama2.c's run.c:
 * out = x·C + swap(x)·S' with public C = cos, S' = (-sin, +sin), then one truncation. */
static int k_rope(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t m, size_t n, size_t hd,
                  long pos0, double theta)
{
    size_t N = R * n;
    uint32_t *sw;
    uint64_t *cc = NULL, *ss = NULL;
    TRY(pub32(x, N, &sw));
    int rc = pub64(x, N, &cc);
    if (!rc)
        rc = pub64(x, N, &ss);
    if (sw && cc && ss)
        for (size_t i = 0; i < N; i++) {
            size_t col = i % n, pair = (col % hd) / 2;
            double pos = (double)(pos0 + (long)((i / n) % m));
            double ang = pos * pow(theta, -2.0 * (double)pair / (double)hd);
            int has_mate = (col ^ 1) < n;
            sw[i] = (uint32_t)(has_mate ? i ^ 1 : i);
            cc[i] = has_mate ? FX(cos(ang)) : FX(1.0);
            ss[i] = has_mate ? FX((col & 1) ? sin(ang) : -sin(ang)) : 0;
        }
    mpc_val xs, a;
    if (!rc)
        rc = k_move(e, &xs, x, sw, N, DOM_ARITH);
    if (!rc)
        rc = kal(e, &a, N, DOM_ARITH);
    if (!rc)
        rc = VT->mul_pub(e, &a, x, cc, N);
    if (!rc)
        rc = VT->mul_pub(e, &xs, &xs, ss, N);
    if (!rc)
        rc = VT->add(e, &a, &a, &xs);
    free(sw), free(cc), free(ss);
    TRY(rc);
    TRY(k_trunc(e, z, &a, e->cfg.frac_bits));
    krel(e, &xs), krel(e, &a);
    return MS_OK;
}

/* Matmul with a public right operand: local. x expanded to (b, m, n, k), multiplied by the
 * public B laid out the same way, summed over k. */
static int k_matmul_pub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t b,
                        uint32_t m, uint32_t k, uint32_t n, int trans)
{
    size_t tot = (size_t)b * m * n * k;
    uint32_t *ix;
    uint64_t *c = NULL;
    TRY(pub32(x, tot, &ix));
    int rc = pub64(x, tot, &c);
    int ybat = y->n >= (size_t)b * k * n && b > 1;
    if (ix && c)
        for (size_t t = 0; t < tot; t++) {
            size_t kk = t % k, j = (t / k) % n, i = (t / ((size_t)k * n)) % m,
                   bb = t / ((size_t)k * n * m);
            size_t yo = ybat ? bb * (size_t)k * n : 0;
            ix[t] = (uint32_t)(bb * (size_t)m * k + i * k + kk);
            c[t] = y->s[0][yo + (trans ? j * k + kk : kk * n + j)];
        }
    mpc_val xe, pr;
    if (!rc)
        rc = k_move(e, &xe, x, ix, tot, DOM_ARITH);
    if (!rc)
        rc = VT->mul_pub(e, &xe, &xe, c, tot);
    free(ix), free(c);
    TRY(rc);
    TRY(k_rowsum(e, &pr, &xe, (size_t)b * m * n, k));
    krel(e, &xe);
    *z = pr;
    return MS_OK;
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

int kern_exec(eng *e, const op_program *p, size_t idx, mpc_val *vals, errbuf *err)
{
    const op *o = &p->ops[idx];
    for (int i = 0; i < 3; i++)
        if (o->in[i] != OP_NONE && o->in[i] >= p->n_tens)
            return bad(err, o, idx, "operand tensor id out of range");
    if (o->out >= p->n_tens)
        return bad(err, o, idx, "result tensor id out of range");
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
        TRY(VT->matmul(e, &t, x, y, o->batch, o->m, o->k, o->n, o->flags, o->in[1]));
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
    if (!strcmp(e->cfg.topk, "quickselect") && (!VT->shuffle || !VT->sync_public))
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
    case OP_GELU: return k_piecewise(e, z, x, &puma_gelu);
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
