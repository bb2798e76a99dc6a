/* kern_math.c — exp, reciprocal, rsqrt (native and SPU's constructions); activations, softmax
 * and norms are in kern_act.c; error bounds at the top of kern.c (kern_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_int.h"

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
    int f = e->cfg.frac_bits, lm = e->kv.trunc == KV_TRUNC_LOCAL;
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

const kv_exp_row kv_exp_tab[KV_EXP_N] = {
    [KV_EXP_POW2] = {"pow2", k_exp_pow2,
                     "2^-y by range reduction: the integer part's bits and a degree-4 polynomial"},
    [KV_EXP_TAYLOR] = {"taylor", k_exp_taylor, "(1 + x/2^t)^(2^t), t = exp_iters (SPU exp_taylor)"},
    [KV_EXP_PADE] = {"pade", k_exp_pade,
                     "SPU's EXP_PADE: the clamp to ±32 ln 2, then 2^(x log2 e) from the bits of "
                     "its integer part and a degree-5 polynomial of the fraction"},
};

int k_exp(eng *e, mpc_val *z, const mpc_val *x) { return kv_exp_tab[e->kv.exp].fn(e, z, x); }

static int k_recip_thr(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    (void)w;
    return k_recip_cmp(e, z, x, jlo);
}

static int k_recip_bd(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    return k_recip_bits(e, z, x, e->cfg.frac_bits + jlo, w);
}

static int k_rsqrt_thr(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    (void)jlo, (void)w;
    return k_rsqrt_cmp(e, z, x);
}

static int k_rsqrt_bd(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    return k_rsqrt_bits(e, z, x, e->cfg.frac_bits + jlo, w);
}

/* z = the bits [0, nb) of the boolean word x reversed (bit j to nb − 1 − j), the others 0
 * (SPU _bitrev then maskNumberOfBits; local): the 64-bit reversal by six masked swaps, then a
 * shift right by 64 − nb. */
static int k_bitrev(eng *e, mpc_val *z, const mpc_val *x, int nb)
{
    static const uint64_t sw[6] = {0x5555555555555555ull, 0x3333333333333333ull,
                                   0x0f0f0f0f0f0f0f0full, 0x00ff00ff00ff00ffull,
                                   0x0000ffff0000ffffull, 0x00000000ffffffffull};
    size_t n = x->n;
    mpc_val a, b;
    TRY(k_rep(e, z, x, 1));
    TRY(kal(e, &a, n, DOM_BOOL));
    TRY(kal(e, &b, n, DOM_BOOL));
    for (int i = 0; i < 6; i++) { /* z = ((z >> s) & m) ^ ((z & m) << s) */
        int sh = 1 << i;
        TRY(VT->shift(e, &a, z, sh));
        TRY(k_andc(e, &a, &a, sw[i]));
        TRY(k_andc(e, &b, z, sw[i]));
        TRY(VT->shift(e, &b, &b, -sh));
        TRY(VT->add(e, z, &a, &b));
    }
    krel(e, &a), krel(e, &b);
    return nb < 64 ? VT->shift(e, z, z, 64 - nb) : MS_OK;
}

/* The highest set bit of the arithmetic x >= 0 as a boolean one-hot word (SPU highestOneBit,
 * libspu/kernel/hal/fxp_base.cc 81-85, _prefix_or ring.cc 548-559): SPU's A2B, then six levels
 * b0 ← b0 ^ b1 ^ (b0 & b1) with b1 = b0 >> 2^i, the AND of full words but the last (b1 has 32
 * bits: SPU's AndBB opens in the storage type of min(nbits), semi2k boolean.cc 133-190), then
 * y ^ (y >> 1). semi2k: 416 + 5 · 32 + 16 = 592 B in 13 rounds per element. */
static int k_hibit_spu(eng *e, mpc_val *bb, const mpc_val *x)
{
    size_t n = x->n;
    mpc_val b1, t;
    TRY(k_a2b_spu(e, bb, x));
    TRY(kal(e, &b1, n, DOM_BOOL));
    TRY(kal(e, &t, n, DOM_BOOL));
    for (int i = 0; i < 6; i++) {
        TRY(VT->shift(e, &b1, bb, 1 << i));
        if (i < 5)
            TRY(VT->and_bb(e, &t, bb, &b1));
        else
            TRY(VT->and_bits(e, &t, bb, &b1, lowbits(32), 0));
        TRY(VT->add(e, bb, bb, &b1));
        TRY(VT->add(e, bb, bb, &t));
    }
    TRY(VT->shift(e, &b1, bb, 1));
    TRY(VT->add(e, bb, bb, &b1));
    krel(e, &b1), krel(e, &t);
    return MS_OK;
}

/* z = c ? −x : x for an arithmetic 0/1 c: x + c·(−2x), one ring product (SPU _mux, ring.cc
 * 465-470, on the predicate _prefer_a made arithmetic). */
static int k_negate_if(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *x)
{
    mpc_val d, t;
    TRY(k_scaled(e, &d, x, (uint64_t)-2));
    TRY(k_imul(e, &t, c, &d));
    TRY(kal(e, z, x->n, DOM_ARITH));
    int rc = VT->add(e, z, x, &t);
    krel(e, &d), krel(e, &t);
    return rc;
}

/* 1/x as SPU computes it (normalize: spu; secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/kernel/hal/fxp_base.cc 239-264 reciprocal_goldschmidt, 104-140 the normalised
 * Goldschmidt, 81-85 highestOneBit; libspu/kernel/hal/ring.cc 548-559 _prefix_or): the sign by
 * SPU's msb, made arithmetic (_prefer_a: one-bit b2a) and used twice as a ring-product mux;
 * |x| to boolean by SPU's A2B; the prefix OR in six levels of x | (x >> 2^i) (each an AND of
 * full words but the last, whose operand has 32 bits: SPU's AndBB opens in the storage type
 * of min(nbits)); its highest bit h, bit-reversed over [0, 2f) into the factor 2^(2f−1−m)
 * (b2a_word of 2f bits); then c = |x|·factor in [0.5, 1), w = 2.9142 − 2c, e = 1 − c·w and
 * fxp_div_goldschmidt_iters = 2 steps r ← r(1 + e), e ← e² (one squaring, between them), the
 * result times the factor and the sign mux. Each product is sequential as SPU issues it.
 * PRIMITIVES.md derives its counts (semi2k 1,058 B in 36 rounds per element, aby3 1,552 B in
 * 54). A protocol without b2a_word runs normalize: bitdec. Range: |x| < 2^f (2^(2f) in the
 * ring): larger inputs give 0, as in SPU. */
static int k_recip_spu(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    if (!VT->b2a_word)
        return k_recip_bd(e, z, x, jlo, w);
    int f = e->cfg.frac_bits;
    size_t n = x->n;
    mpc_val nb, na, ab, bb, fb, fa;
    TRY(kv_msb_tab[KV_MSB_SPU].bfn(e, &nb, x, 64)); /* is_negative = _msb(x) */
    TRY(kal(e, &na, n, DOM_ARITH));
    TRY(VT->b2a_word(e, &na, &nb, 1)); /* _prefer_a: the B2A of one bit */
    krel(e, &nb);
    TRY(k_negate_if(e, &ab, &na, x)); /* b_abs */
    TRY(k_hibit_spu(e, &bb, &ab));
    TRY(k_bitrev(e, &fb, &bb, 2 * f));
    krel(e, &bb);
    TRY(kal(e, &fa, n, DOM_ARITH));
    TRY(VT->b2a_word(e, &fa, &fb, 2 * f)); /* the factor, _prefer_a */
    krel(e, &fb);
    mpc_val c, wv, ee, r, r2, cw;
    TRY(k_fmul(e, &c, &ab, &fa));
    krel(e, &ab);
    TRY(k_scaled(e, &wv, &c, (uint64_t)-2)); /* w = 2.9142 − 2c */
    TRY(k_addc(e, &wv, &wv, FX((double)2.9142F)));
    TRY(k_fmul(e, &cw, &c, &wv));
    krel(e, &c);
    TRY(k_scaled(e, &ee, &cw, (uint64_t)-1)); /* e = 1 − c·w */
    TRY(k_addc(e, &ee, &ee, FX(1.0)));
    krel(e, &cw);
    TRY(k_rep(e, &r, &wv, 1));
    krel(e, &wv);
    for (int it = 0; it < 2; it++) {
        mpc_val e1;
        TRY(k_rep(e, &e1, &ee, 1));
        TRY(k_addc(e, &e1, &e1, FX(1.0)));
        TRY(k_fmul(e, &r2, &r, &e1));
        krel(e, &e1), krel(e, &r);
        r = r2;
        if (it == 0) {
            mpc_val e2;
            TRY(k_fsq(e, &e2, &ee));
            krel(e, &ee);
            ee = e2;
        }
    }
    krel(e, &ee);
    TRY(k_fmul(e, &r2, &r, &fa));
    krel(e, &r), krel(e, &fa);
    TRY(k_negate_if(e, z, &na, &r2));
    krel(e, &na), krel(e, &r2);
    return MS_OK;
}

/* z = (x ^ (x >> s)) & m, then x ^ z ^ (z << s): one delta swap (local). */
static int k_delta_swap(eng *e, mpc_val *x, int s, uint64_t m)
{
    mpc_val t;
    TRY(kal(e, &t, x->n, DOM_BOOL));
    TRY(VT->shift(e, &t, x, s));
    TRY(VT->add(e, &t, &t, x));
    TRY(k_andc(e, &t, &t, m));
    TRY(VT->add(e, x, x, &t));
    TRY(VT->shift(e, &t, &t, -s));
    TRY(VT->add(e, x, x, &t));
    krel(e, &t);
    return MS_OK;
}

/* 1/sqrt(x) as SPU computes it (normalize: spu;
 * secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87 libspu/kernel/hal/fxp_approx.cc 565-680
 * f_rsqrt, its default path): z = 2·highestOneBit(x) (x > 0, no sign step); u = x·rev36(z) in
 * [0.25, 0.5) (the reversal made arithmetic by a b2a_word of 2f bits); r = the degree-4 polynomial
 * of rsqrt_init_guess (x², then x³ and x⁴ in one product of two, one truncation of the public
 * combination); comp = mux(b, c0, c1)·a_rev where b is the parity of z's even bits (b2a_word of one
 * bit, then public: c = c1 + b·(c0 − c1), SPU's integer constants) and a_rev the reversal over [0,
 * 2⌊f/2⌋) of z's odd and even bits xored (a b2a_word of 2⌊f/2⌋ bits, a ring product); the result
 * trunc(r·comp). The bit moves (SPU's _bitdeintl, _bit_parity, _bitrev) are local. PRIMITIVES.md
 * derives the counts (semi2k 906 B in 26 rounds per element, aby3 1,764 B in 51). */
static int k_rsqrt_spu(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    if (!VT->b2a_word)
        return k_rsqrt_bd(e, z, x, jlo, w);
    int f = e->cfg.frac_bits, h = 2 * (f / 2);
    size_t n = x->n;
    mpc_val zb, zr, za, u;
    TRY(k_hibit_spu(e, &zb, x));
    TRY(VT->shift(e, &zb, &zb, -1)); /* z = 2^(e+f) */
    /* rsqrt_init_guess */
    TRY(k_bitrev(e, &zr, &zb, 2 * f));
    TRY(kal(e, &za, n, DOM_ARITH));
    TRY(VT->b2a_word(e, &za, &zr, 2 * f));
    krel(e, &zr);
    TRY(k_fmul(e, &u, x, &za));
    krel(e, &za);
    static const float co[5] = {0.0F, -15.47994394F, 38.4714796F, -49.86605845F, 26.02942339F};
    mpc_val p[4], A[2], B[2], p34, r;
    p[0] = u;
    TRY(k_fmul(e, &p[1], &u, &u));
    A[0] = u, A[1] = p[1], B[0] = p[1], B[1] = p[1];
    TRY(k_mul_batch(e, &p34, A, B, 2, f));
    TRY(k_slice(e, &p[2], &p34, 0, n));
    TRY(k_slice(e, &p[3], &p34, n, n));
    krel(e, &p34);
    TRY(k_const(e, &r, x, n, 0));
    for (int i = 0; i < 4; i++)
        TRY(k_addmul(e, &r, &p[i], FX((double)co[i + 1])));
    for (int i = 0; i < 4; i++)
        krel(e, &p[i]);
    mpc_val rt;
    TRY(k_trunc(e, &rt, &r, f));
    krel(e, &r);
    TRY(k_addc(e, &rt, &rt, FX((double)4.14285016F)));
    /* rsqrt_comp: even bits of z to the low half, odd bits to the high half */
    static const uint64_t um[5] = {0x2222222222222222ull, 0x0c0c0c0c0c0c0c0cull,
                                   0x00f000f000f000f0ull, 0x0000ff000000ff00ull,
                                   0x00000000ffff0000ull};
    for (int i = 0; i < 5; i++)
        TRY(k_delta_swap(e, &zb, 1 << i, um[i]));
    mpc_val ev, a, bb, t;
    TRY(kal(e, &ev, n, DOM_BOOL));
    TRY(k_andc(e, &ev, &zb, lowbits(32)));
    TRY(kal(e, &a, n, DOM_BOOL));
    TRY(VT->shift(e, &a, &zb, 32));
    TRY(VT->add(e, &a, &a, &ev)); /* a[i] = z[2i] ^ z[2i+1] */
    krel(e, &zb);
    TRY(k_rep(e, &bb, &ev, 1)); /* b = parity of the even bits */
    TRY(kal(e, &t, n, DOM_BOOL));
    for (int s = 16; s >= 1; s /= 2) {
        TRY(VT->shift(e, &t, &bb, s));
        TRY(VT->add(e, &bb, &bb, &t));
    }
    krel(e, &t), krel(e, &ev);
    mpc_val ba, m, ar, aa, comp;
    TRY(kal(e, &ba, n, DOM_ARITH));
    TRY(VT->b2a_word(e, &ba, &bb, 1)); /* bit 0 of bb */
    krel(e, &bb);
    /* c0 (f + e even) and c1, ring integers as SPU's _constant takes them */
    uint64_t c0, c1;
    if (f % 2)
        c0 = 1ull << ((f + 3) / 2), c1 = (uint64_t)((double)(1ull << (f / 2 + 1)) * sqrt(2.0));
    else
        c0 = (uint64_t)((double)(1ull << (f / 2)) * sqrt(2.0)), c1 = 1ull << (f / 2);
    TRY(k_scaled(e, &m, &ba, c0 - c1));
    TRY(k_addc(e, &m, &m, c1));
    krel(e, &ba);
    TRY(k_bitrev(e, &ar, &a, h));
    krel(e, &a);
    TRY(kal(e, &aa, n, DOM_ARITH));
    TRY(VT->b2a_word(e, &aa, &ar, h));
    krel(e, &ar);
    TRY(k_imul(e, &comp, &m, &aa));
    krel(e, &m), krel(e, &aa);
    TRY(k_fmul(e, z, &rt, &comp));
    krel(e, &rt), krel(e, &comp);
    return MS_OK;
}

/* 1/x for x > 0 as CrypTen computes it with reciprocal_all_pos (facebookresearch/CrypTen@
 * 775868a02d6dac50774ce376a55b01fbd8bd85b6 crypten/common/functions/approximations.py 156-169,
 * method NR, reciprocal_nr_iters 10 in configs/default.yaml): y = 3·exp(1 − 2x) + 0.003 (the
 * exp of the profile, public products by integers local), then 10 Newton steps y ← 2y − x·y²,
 * each a squaring and a product, truncated locally. Converges where 0 < x·y0 < 2: x up to
 * about 1/(2·0.003) ≈ 333 (larger x leave 0 < e0 = 1 − x·y0 only while y0 < 2/x; CrypTen's
 * own range), and slowly for small x (y0 ≤ 3e, so x·y0 ≪ 1 below 0.01). */
int k_recip_nr(eng *e, mpc_val *z, const mpc_val *x)
{
    mpc_val t, y;
    TRY(k_scaled(e, &t, x, (uint64_t)-2)); /* 1 − 2x */
    TRY(k_addc(e, &t, &t, FX(1.0)));
    TRY(k_exp(e, &y, &t));
    krel(e, &t);
    TRY(k_scaled(e, &t, &y, 3)); /* 3·exp(1 − 2x) + 0.003 */
    krel(e, &y);
    TRY(k_addc(e, &t, &t, FX(0.003)));
    y = t;
    for (int it = 0; it < 10; it++) {
        mpc_val y2, p;
        TRY(k_fsq(e, &y2, &y));
        TRY(k_fmul(e, &p, &y2, x));
        krel(e, &y2);
        TRY(k_scaled(e, &t, &y, 2));
        TRY(VT->sub(e, &t, &t, &p));
        krel(e, &p), krel(e, &y);
        y = t;
    }
    *z = y;
    return MS_OK;
}

/* 1/x as CrypTen's reciprocal (normalize: crypten; approximations.py 150-154 without
 * reciprocal_all_pos, its default): sgn = 1 − 2·_ltz(x) (logic.py 73-75), |x| = sgn·x and the
 * result sgn·(1/|x|), two ring products of the integer sign; between them k_recip_nr. Per
 * element (semi2k) 432 + 32 + 128 + 10·48 + 32 = 1,104 B in 8 + 1 + 8 + 20 + 1 = 38 rounds
 * (PRIMITIVES.md "CrypTen"). */
static int k_recip_crypten(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    (void)jlo, (void)w;
    mpc_val lt, sg, ax, r;
    TRY(k_msb(e, &lt, x));
    TRY(k_scaled(e, &sg, &lt, (uint64_t)-2));
    krel(e, &lt);
    TRY(k_addc(e, &sg, &sg, 1));
    TRY(k_imul(e, &ax, &sg, x));
    TRY(k_recip_nr(e, &r, &ax));
    krel(e, &ax);
    TRY(k_imul(e, z, &sg, &r));
    krel(e, &sg), krel(e, &r);
    return MS_OK;
}

/* 1/sqrt(x) as CrypTen's inv_sqrt (normalize: crypten; approximations.py 178-204,
 * sqrt_nr_iters 3): y = 2.2·exp(−(x/2 + 0.2)) + 0.2 − x/1024 (divisions by integers and the
 * product by 2.2 truncated locally), then 3 Newton steps y ← y·(3 − x·y²)/2: a squaring and
 * two products each. Per element (semi2k) 128 + 3·(16 + 32 + 32) = 368 B in 8 + 9 = 17 rounds
 * (PRIMITIVES.md "CrypTen"). The first guess is CrypTen's, as is its range: the three steps
 * converge from it on about [0.1, 100] (the accuracy test measures it). */
static int k_rsqrt_crypten(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    (void)jlo, (void)w;
    int f = e->cfg.frac_bits;
    mpc_val t, y, q;
    TRY(k_trunc(e, &t, x, 1)); /* −(x/2 + 0.2) */
    TRY(k_addc(e, &t, &t, FX(0.2)));
    TRY(k_mulc(e, &t, &t, (uint64_t)-1));
    TRY(k_exp(e, &y, &t));
    krel(e, &t);
    TRY(k_scaled(e, &q, &y, FX(2.2))); /* ·2.2, truncated */
    krel(e, &y);
    TRY(k_trunc(e, &y, &q, f));
    krel(e, &q);
    TRY(k_addc(e, &y, &y, FX(0.2)));
    TRY(k_trunc(e, &t, x, 10)); /* − x/1024 */
    TRY(VT->sub(e, &y, &y, &t));
    krel(e, &t);
    for (int it = 0; it < 3; it++) {
        mpc_val y2, p, u;
        TRY(k_fsq(e, &y2, &y));
        TRY(k_fmul(e, &p, x, &y2));
        krel(e, &y2);
        TRY(k_mulc(e, &p, &p, (uint64_t)-1)); /* 3 − x·y² */
        TRY(k_addc(e, &p, &p, FX(3.0)));
        TRY(k_fmul(e, &u, &y, &p));
        krel(e, &p), krel(e, &y);
        TRY(k_trunc(e, &y, &u, 1)); /* / 2 */
        krel(e, &u);
    }
    *z = y;
    return MS_OK;
}

const kv_norm_row kv_norm_tab[KV_NORM_N] = {
    [KV_NORM_BITDEC] = {"bitdec", k_recip_bd, k_rsqrt_bd,
                        "one bit decomposition, the highest bit's power of two (k_hibit)"},
    [KV_NORM_THRESHOLDS] = {"thresholds", k_recip_thr, k_rsqrt_thr,
                            "a batched comparison against every power of two (SPU "
                            "f_reciprocal)"},
    [KV_NORM_SPU] = {"spu", k_recip_spu, k_rsqrt_spu,
                     "SPU's reciprocal: msb, A2B, prefix OR, bit reversal, b2a_word, Goldschmidt "
                     "and its rsqrt (f_rsqrt)"},
    [KV_NORM_CRYPTEN] = {"crypten", k_recip_crypten, k_rsqrt_crypten,
                         "CrypTen's Newton reciprocal (10 steps from 3·exp(1 − 2x) + 0.003, its "
                         "sign by _ltz) and inv_sqrt (3 steps from an exp guess)"},
};

/* 1/x for x in [2^jlo, 2^(w−f)) (w: X's bit bound, 0 = the default, norm_bits). */
int k_recip(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    return kv_norm_tab[e->kv.normalize].recip(e, z, x, jlo, w);
}

/* 1/sqrt(x) for x in [2^jlo, 2^(w−f)). */
int k_rsqrt(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w)
{
    return kv_norm_tab[e->kv.normalize].rsqrt(e, z, x, jlo, w);
}
