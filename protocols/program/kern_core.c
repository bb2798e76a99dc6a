/* kern_core.c — storage helpers, public buffers, layout moves and fixed-point products: the
 * pieces every kernel family builds on (kern_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_int.h"

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

int kal(eng *e, mpc_val *v, size_t n, int dom)
{
    memset(v, 0, sizeof *v);
    return VT->alloc(e, v, n, dom);
}

/* As kal for a value whose every element the next op writes before anything reads it: no
 * zeroing in the backends (VT->alloc_w). */
int kal_w(eng *e, mpc_val *v, size_t n, int dom)
{
    memset(v, 0, sizeof *v);
    return VT->alloc_w ? VT->alloc_w(e, v, n, dom) : VT->alloc(e, v, n, dom);
}

void krel(eng *e, mpc_val *v)
{
    VT->release(e, v);
    memset(v, 0, sizeof *v);
}

/* Public buffers exist only when values carry data. */
int pub64(const mpc_val *like, size_t n, uint64_t **out)
{
    *out = NULL;
    if (!has_data(like))
        return MS_OK;
    *out = malloc((n ? n : 1) * sizeof **out);
    return *out ? MS_OK : MS_ERR_NOMEM;
}

int pub32(const mpc_val *like, size_t n, uint32_t **out)
{
    *out = NULL;
    if (!has_data(like))
        return MS_OK;
    *out = malloc((n ? n : 1) * sizeof **out);
    return *out ? MS_OK : MS_ERR_NOMEM;
}

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
int k_move(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n, int dom)
{
    int rc = kal(e, z, n, dom);
    return rc ? rc : VT->permute(e, z, x, idx, n);
}

int kperm(eng *e, mpc_val *z, const mpc_val *x, size_t n, kmap m)
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

int k_rep(eng *e, mpc_val *z, const mpc_val *x, size_t reps)
{
    return kperm(e, z, x, x->n * reps, (kmap){MAP_REP, x->n, 0, 0, 0});
}

int k_bcast(eng *e, mpc_val *z, const mpc_val *x, size_t per)
{
    return kperm(e, z, x, x->n * per, (kmap){MAP_BCAST, per, 0, 0, 0});
}

int k_slice(eng *e, mpc_val *z, const mpc_val *x, size_t off, size_t len)
{
    return kperm(e, z, x, len, (kmap){MAP_SLICE, off, 0, 0, 0});
}

/* Per row r < R of length L: columns [off, off+len). */
int k_cols(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t L, size_t off, size_t len)
{
    return kperm(e, z, x, R * len, (kmap){MAP_ROWS, L, off, len, 0});
}

/* z = [p0; p1; …] (local): a fresh value of the parts' total length, filled by the engine in
 * one pass (eng.h concat). */
int k_concat(eng *e, mpc_val *z, const mpc_val *parts, int np)
{
    size_t tot = 0;
    for (int i = 0; i < np; i++)
        tot += parts[i].n;
    TRY(kal(e, z, tot, parts[0].dom));
    return VT->concat(e, z, parts, np);
}

/* Public constant broadcast helpers for add_pub / mul_pub. */
int k_addc(eng *e, mpc_val *z, const mpc_val *x, uint64_t c) { return VT->add_pub(e, z, x, &c, 1); }

int k_mulc(eng *e, mpc_val *z, const mpc_val *x, uint64_t c) { return VT->mul_pub(e, z, x, &c, 1); }

/* z = c·x into a fresh arithmetic value (public ring integer c; local). */
int k_scaled(eng *e, mpc_val *z, const mpc_val *x, uint64_t c)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    return k_mulc(e, z, x, c);
}

/* z += c·x (public ring integer c; local). */
int k_addmul(eng *e, mpc_val *z, const mpc_val *x, uint64_t c)
{
    mpc_val t;
    TRY(k_scaled(e, &t, x, c));
    int rc = VT->add(e, z, z, &t);
    krel(e, &t);
    return rc;
}

/* z = x + blk[i / N] (public per-block constants over J blocks of N). */
int k_addblk(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *blk, size_t J, int mul)
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
int k_const(eng *e, mpc_val *z, const mpc_val *x, size_t n, uint64_t c)
{
    TRY(kperm(e, z, x, n, (kmap){MAP_REP, x->n ? x->n : 1, 0, 0, 0}));
    TRY(k_mulc(e, z, z, 0));
    return k_addc(e, z, z, c);
}

/* ---- fixed-point arithmetic --------------------------------------------------------------- */

int k_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    return VT->trunc(e, z, x, bits);
}

/* z = trunc(x·y) — fixed-point product; z must not alias x or y. */
int k_fmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    mpc_val t;
    TRY(kal(e, &t, x->n, DOM_ARITH));
    TRY(VT->mul(e, &t, x, y));
    int rc = k_trunc(e, z, &t, e->cfg.frac_bits);
    krel(e, &t);
    return rc;
}

int k_imul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    TRY(kal(e, z, x->n, DOM_ARITH));
    return VT->mul(e, z, x, y);
}

int k_fsq(eng *e, mpc_val *z, const mpc_val *x)
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
int k_mul_batch(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b, int np, int bits)
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
int k_unbatch(eng *e, mpc_val *out, const mpc_val *x, int cnt, size_t n)
{
    for (int i = 0; i < cnt; i++)
        TRY(k_slice(e, &out[i], x, (size_t)i * n, n));
    return MS_OK;
}

/* Raw (2f fraction bits) Σ a_i x^i from the powers pw[i] (fixed point, pw[1] = x); a zero
 * coefficient or a missing power is left out. */
int k_poly_raw(eng *e, mpc_val *z, mpc_val *const pw[7], const double a[7])
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
int k_split(eng *e, const mpc_val *x, size_t R, size_t L, mpc_val *A, mpc_val *B, mpc_val *rest)
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
int k_rejoin(eng *e, mpc_val *cur, mpc_val *S, mpc_val *rest, size_t R, size_t h, int odd)
{
    mpc_val nxt;
    TRY(k_join(e, &nxt, S, rest, R, h, odd));
    krel(e, cur);
    *cur = nxt;
    return MS_OK;
}

/* z[r] = sum of row r (R rows of L), local tree of ⌈log2 L⌉ levels. */
int k_rowsum(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t L)
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
int k_blocksum(eng *e, mpc_val *z, const mpc_val *x, size_t J, size_t N)
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

/* ---- rope, matmul ------------------------------------------------------------------------ */

/* Rotates pairs (2i, 2i+1) of each head (hd columns) of each row of n columns (R rows, row r
 * at position pos0 + r mod m) by pos·theta^(-2i/hd), as llama2.c's run.c:
 * out = x·C + swap(x)·S' with public C = cos, S' = (-sin, +sin), then one truncation. */
int k_rope(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t m, size_t n, size_t hd, long pos0,
           double theta)
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
int k_matmul_pub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t b, uint32_t m,
                 uint32_t k, uint32_t n, int trans)
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
