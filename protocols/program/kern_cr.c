/* kern_cr.c — CrypTen's max, argmax, the max of two and the public rule between its two top-k
 * routes (compat: crypten; facebookresearch/CrypTen@775868a02d6dac50774ce376a55b01fbd8bd85b6,
 * PRIMITIVES.md "CrypTen" derives each count; tests/data/compat-counts.tsv pins them). Every
 * comparison is CrypTen's _ltz (msb: crypten), every select crypten.where (k_select_cr). The
 * sort's compare-exchange and the top-k routes themselves are in kern_sort.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_int.h"

/* z = [a >= b] = 1 − _ltz(a − b), an integer 0/1 (crypten/common/functions/logic.py 33-35). */
static int k_ge_cr(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b)
{
    mpc_val t;
    TRY(k_lt(e, &t, a, b, 64));
    TRY(k_scaled(e, z, &t, (uint64_t)-1));
    krel(e, &t);
    return k_addc(e, z, z, 1);
}

/* z = x with each row of L moved right by s columns, the first s columns 0 (cyclic with
 * cyc: torch.roll); local. */
static int k_shift_cols(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t L, size_t s, int cyc)
{
    uint32_t *idx;
    uint64_t *keep;
    TRY(pub32(x, R * L, &idx));
    TRY(pub64(x, R * L, &keep));
    if (idx)
        for (size_t i = 0; i < R * L; i++) {
            size_t r = i / L, j = i % L;
            idx[i] = (uint32_t)(r * L + (j + L - s % L) % L);
            keep[i] = cyc || j >= s;
        }
    int rc = k_move(e, z, x, idx, R * L, DOM_ARITH);
    if (!rc && !cyc)
        rc = VT->mul_pub(e, z, z, keep, R * L);
    free(idx), free(keep);
    return rc;
}

/* CrypTen's weighted_index along rows of L (crypten/common/functions/sampling.py 60-87): the
 * running sum c of the 0/1 row, a draw r in [0, 1) (crypten/mpc/mpc.py 216-230: 16 random
 * bits made arithmetic by the one-bit B2A, 16 words a row) times the row total, then
 * [c > r] (gt: _ltz of r − c) less itself moved right by one: the one-hot of a tied maximum.
 * The draw here is public zero bits (the first tied index wins); its messages are CrypTen's. */
static int k_windex_cr(eng *e, mpc_val *z, const mpc_val *a, size_t R, size_t L)
{
    int f = e->cfg.frac_bits;
    mpc_val c, t, tot, rb, ra, r, rw, rwb, cs, g, gs;
    TRY(k_rep(e, &c, a, 1));
    for (size_t d = 1; d < L; d *= 2) { /* the running sum, local */
        TRY(k_shift_cols(e, &t, &c, R, L, d, 0));
        TRY(VT->add(e, &c, &c, &t));
        krel(e, &t);
    }
    TRY(k_cols(e, &tot, &c, R, L, L - 1, 1));
    TRY(kal(e, &rb, R * 16, DOM_BOOL));
    uint64_t zero = 0;
    TRY(VT->mul_pub(e, &rb, &rb, &zero, 1));
    TRY(kal(e, &ra, R * 16, DOM_ARITH));
    TRY(VT->b2a(e, &ra, &rb));
    krel(e, &rb);
    uint64_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = f - 16 + i >= 0 ? (uint64_t)1 << (f - 16 + i) : 0;
    TRY(k_addblk(e, &ra, &ra, w, 16, 1)); /* bit i weighs 2^(i − 16) */
    TRY(k_blocksum(e, &r, &ra, 16, R));
    krel(e, &ra);
    TRY(k_imul(e, &rw, &r, &tot)); /* r · total (the total an integer) */
    krel(e, &r), krel(e, &tot);
    TRY(k_bcast(e, &rwb, &rw, L));
    krel(e, &rw);
    TRY(k_scaled(e, &cs, &c, (uint64_t)1 << f));
    krel(e, &c);
    TRY(k_lt(e, &g, &rwb, &cs, 64));
    krel(e, &rwb), krel(e, &cs);
    TRY(k_shift_cols(e, &gs, &g, R, L, 1, 0));
    TRY(kal(e, z, R * L, DOM_ARITH));
    TRY(VT->sub(e, z, &g, &gs));
    krel(e, &g), krel(e, &gs);
    return MS_OK;
}

/* CrypTen's row max (crypten/common/functions/maximum.py 51-83 with max_method log_reduction):
 * floor(ln L) halvings where(a >= b, a, b) of the rows' halves (121-152, the odd column carried),
 * then on the k columns left the pairwise argmax (95-118: every column against every cyclic
 * roll, k(k − 1) comparisons in one, their product over the k − 1 rolls by halving,
 * regular.py 202-225), its ties broken by weighted_index and the max read as the row sum of
 * the columns times it; then the one-hot over the whole row, eq of x and the max (mpc.py
 * 244-274: the 2PC equality, a tree of six one-word ANDs and a one-bit B2A), tie-broken by
 * weighted_index (maximum.py 258-312): *ohx, the argmax's one-hot (NULL: dropped). The
 * softmax keeps only the max; CrypTen computes the rest all the same, and so does this kernel.
 * mx NULL: the max dropped. Per row of 64: 78,592 B in 78 rounds (PRIMITIVES.md). */
int k_rowmax_cr(eng *e, mpc_val *mx, mpc_val *ohx, const mpc_val *x, size_t R, size_t L)
{
    mpc_val cur;
    TRY(k_rep(e, &cur, x, 1));
    size_t k = L;
    for (int st = (int)log((double)L); st > 0 && k > 1; st--) {
        mpc_val A, B, rest, ge, S;
        size_t h = k / 2;
        int odd = (int)(k & 1);
        TRY(k_split(e, &cur, R, k, &A, &B, &rest));
        TRY(k_ge_cr(e, &ge, &A, &B));
        TRY(k_select_cr(e, &S, &ge, &A, &B));
        krel(e, &A), krel(e, &B), krel(e, &ge);
        TRY(k_rejoin(e, &cur, &S, &rest, R, h, odd));
        k = h + (size_t)odd;
    }
    if (k > 1) {
        size_t nb = k - 1, blk = R * k;
        mpc_val Aall, Ball, *rolls = calloc(nb, sizeof *rolls), ge, oh, pm, t;
        if (!rolls)
            return MS_ERR_NOMEM;
        for (size_t i = 0; i < nb; i++)
            TRY(k_shift_cols(e, &rolls[i], &cur, R, k, i + 1, 1));
        TRY(k_rep(e, &Aall, &cur, nb));
        int rc = k_concat(e, &Ball, rolls, (int)nb);
        for (size_t i = 0; i < nb; i++)
            krel(e, &rolls[i]);
        free(rolls);
        TRY(rc);
        TRY(k_ge_cr(e, &ge, &Aall, &Ball));
        krel(e, &Aall), krel(e, &Ball);
        for (size_t s = nb; s > 1; s = s / 2 + (s & 1)) { /* the product over the rolls */
            mpc_val X, Y, P, parts[2];
            TRY(k_slice(e, &X, &ge, 0, (s / 2) * blk));
            TRY(k_slice(e, &Y, &ge, (s / 2) * blk, (s / 2) * blk));
            TRY(k_imul(e, &P, &X, &Y));
            krel(e, &X), krel(e, &Y);
            if (s & 1) {
                TRY(k_slice(e, &parts[1], &ge, (s - 1) * blk, blk));
                parts[0] = P;
                TRY(k_concat(e, &X, parts, 2));
                krel(e, &P), krel(e, &parts[1]);
                P = X;
            }
            krel(e, &ge);
            ge = P;
        }
        TRY(k_windex_cr(e, &oh, &ge, R, k));
        krel(e, &ge);
        TRY(k_imul(e, &t, &cur, &oh));
        krel(e, &oh);
        TRY(k_rowsum(e, &pm, &t, R, k));
        krel(e, &t), krel(e, &cur);
        cur = pm;
    }
    mpc_val mb, eq, oh;
    TRY(k_bcast(e, &mb, &cur, L));
    TRY(k_eq(e, &eq, x, &mb, 64));
    krel(e, &mb);
    TRY(k_windex_cr(e, &oh, &eq, R, L));
    krel(e, &eq);
    if (ohx)
        *ohx = oh;
    else
        krel(e, &oh);
    if (mx)
        *mx = cur;
    else
        krel(e, &cur);
    return MS_OK;
}

/* CrypTen's max over rows of L (compat: crypten). L = 2, the maximum of two values: a CrypTen
 * program writes it as crypten.where(a >= b, a, b), the step its own reductions are built of
 * (crypten/common/functions/maximum.py 130; CrypTen has no element-wise maximum of two
 * tensors): _ltz 432/8 and where 64/2, 496 B in 10 rounds per row. Longer rows: max along the
 * dimension (maximum.py 51-83), k_rowmax_cr. */
int k_max_cr(eng *e, mpc_val *mx, const mpc_val *x, size_t R, size_t L)
{
    if (L != 2)
        return k_rowmax_cr(e, mx, NULL, x, R, L);
    mpc_val A, B, ge;
    TRY(k_cols(e, &A, x, R, 2, 0, 1));
    TRY(k_cols(e, &B, x, R, 2, 1, 1));
    TRY(k_ge_cr(e, &ge, &A, &B));
    int rc = k_select_cr(e, mx, &ge, &A, &B);
    krel(e, &A), krel(e, &B), krel(e, &ge);
    return rc;
}

/* Rounds of k_rowmax_cr on a row of L (its construction, at the profile's constants: _ltz 8,
 * where 2, eq 7, a product 1, weighted_index 1 + 1 + 8). */
static uint64_t rounds_argmax_cr(size_t L)
{
    uint64_t r = 0;
    size_t k = L;
    for (int st = (int)log((double)L); st > 0 && k > 1; st--, k = k / 2 + (k & 1))
        r += 8 + 2;
    if (k > 1) {
        r += 8 + 10 + 1; /* the k(k − 1) ge, weighted_index, the max as a row sum */
        for (size_t s = k - 1; s > 1; s = s / 2 + (s & 1))
            r += 1; /* the product over the rolls */
    }
    return r + 7 + 10; /* eq against the max, weighted_index */
}

/* CrypTen has no top-k (no topk, sort or argsort under crypten/ at the commit above): a program
 * takes either k successive argmaxes, each winner pushed 2^20 below the rest by its one-hot
 * (a public product: local), or a sort of the row with its index travelling (Batcher's
 * odd-even merge network, the compare-exchange _ltz and one where, kern_sort.c) and the one-hot
 * of the first k indices (eq against a public iota). The rule: the route with fewer rounds,
 * k·r_argmax(n) against L·(8 + 2) + 7 for the network's L non-empty layers; on a tie the
 * argmaxes (fewer bytes). Returns 1 for the argmaxes. Rows of 64: k <= 2 (78 rounds each
 * against 217). */
int kern_topk_cr_argmaxes(size_t n, size_t k)
{
    uint64_t layers = 0;
    for (size_t p = 1; p < n; p *= 2)
        for (size_t kk = p; kk >= 1; kk /= 2)
            layers += kern_oem_layer(n, p, kk, NULL, NULL) > 0;
    return (uint64_t)k * rounds_argmax_cr(n) <= layers * (8 + 2) + 7;
}
