/* kern_cmp.c — boolean circuits: A2B adder, msb (ks, carry, packed), less-than, equality, select,
 * one-hot, and the bit decomposition the normalisations use (kern_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_int.h"

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
 * over [P; P] & [G << s; P << s] (the last level needs only P & (G << s), unless full: SPU's
 * ppa_kogge_stone computes both at every level). 7 rounds. */
static int k_ks_add_w(eng *e, mpc_val *sum, const mpc_val *a, const mpc_val *b, int full)
{
    size_t n = a->n;
    mpc_val P0, G, P, GP, parts[2];
    TRY(kal(e, &P0, n, DOM_BOOL));
    TRY(VT->add(e, &P0, a, b));
    TRY(kal(e, &G, n, DOM_BOOL));
    TRY(VT->and_bb(e, &G, a, b));
    TRY(k_rep(e, &P, &P0, 1));
    for (int s = 1; s <= 32; s *= 2) {
        if (s == 32 && !full) { /* last level: G ^= P & (G << 32) */
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

static int k_ks_add(eng *e, mpc_val *sum, const mpc_val *a, const mpc_val *b)
{
    return k_ks_add_w(e, sum, a, b, 0);
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
int k_a2b(eng *e, mpc_val *z, const mpc_val *x)
{
    mpc_val a, b;
    TRY(k_two_words(e, &a, &b, x));
    TRY(k_ks_add(e, z, &a, &b));
    krel(e, &a);
    krel(e, &b);
    return MS_OK;
}

/* SPU's A2B (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87 libspu/mpc/semi2k/
 * conversion.cc 65-88, libspu/mpc/aby3/conversion.cc 46-112, both adding by ab_api.cc 314-337
 * ppa_kogge_stone): two boolean words (semi2k: the components, local; aby3: SPU rotates a
 * boolean sharing of x0 + x1, 8 B per link, where k_two_words' carry-save AND sends the same
 * 8 B per link in one round), added by the Kogge–Stone adder with both ANDs at every level on
 * full words: semi2k 1 + 6 rounds, 32 + 6 · 64 = 416 B per element; aby3 1 + 1 + 6 rounds,
 * 24 + 24 + 6 · 48 = 336 B. */
int k_a2b_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    mpc_val a, b;
    TRY(k_two_words(e, &a, &b, x));
    int rc = k_ks_add_w(e, z, &a, &b, 1);
    krel(e, &a), krel(e, &b);
    return rc;
}

/* z = x & mask on every word (public constant word: local, no buffer of it). */
int k_andc(eng *e, mpc_val *z, const mpc_val *x, uint64_t mask)
{
    return VT->mul_pub(e, z, x, &mask, 1);
}

/* z = (x << l) & ml ^ (y << r) & mr (shifts: positive left; local). */
static int k_place2(eng *e, mpc_val *z, const mpc_val *x, int l, uint64_t ml, const mpc_val *y,
                    int r, uint64_t mr)
{
    if (VT->place2)
        return VT->place2(e, z, x, l, ml, y, r, mr);
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

int k_packed(const eng *e) { return e->kv.msb == KV_MSB_PACKED; }

/* Bit W−1 of *G = the carry out of a + b over their low m bits (other bits of G: 0 or garbage
 * below W−1), W = 2^L >= m the window, L = ⌈log2 m⌉ levels. The m bits are moved to the top of
 * the window (the pad = W − m bits below are 0: generate and propagate 0). Level 0: g = a & b
 * on the m bits (priv: a is P0's word, b P1's). Level k combines blocks of 2^(k−1) into blocks
 * of 2^k with G at each block's top t and P one bit below (as k_carry_out), one and_bits over
 * only the bits a later level reads: the G product at t when the block's lower half holds real
 * bits, the P product at t−1 when real bits lie below the block (k < L); the lowest block's P
 * and every all-padding block are never computed. The AND count for m = 63 is 63 + 119. The
 * same tree as SPU's msb_a2b carry (mpc-costs.md §2.3), which packs its words likewise. A
 * backend with and_placed (aby3) places a level's two operands inside the AND's local pass;
 * the cost engine keeps the composed ops: the same rounds and bytes either way. */
static int k_carry_packed(eng *e, mpc_val *G, const mpc_val *a, const mpc_val *b, int m, int priv)
{
    size_t n = a->n;
    int L = 0;
    while ((1 << L) < m)
        L++;
    int W = 1 << L, pad = W - m;
    mpc_val A, B, P, Lw, Rw, T; /* each written in full by its first op: not zeroed (kal_w) */
    memset(&A, 0, sizeof A), memset(&B, 0, sizeof B);
    uint64_t real = lowbits(m) << pad;
    if (VT->and_placed && VT->place2 && !priv) {
        /* A = a << pad and B = b << pad placed inside the passes that read them */
        eng_placed pa = {a, a, pad, 0, real, 0}, pb = {b, b, pad, 0, real, 0};
        TRY(kal_w(e, G, n, DOM_BOOL));
        TRY(VT->and_placed(e, G, &pa, &pb, real));
        TRY(kal_w(e, &P, n, DOM_BOOL));
        TRY(VT->place2(e, &P, a, pad, real, b, pad, real)); /* (A ^ B) & real */
    } else {
        TRY(kal_w(e, &A, n, DOM_BOOL));
        TRY(kal_w(e, &B, n, DOM_BOOL));
        TRY(VT->shift(e, &A, a, -pad));
        TRY(VT->shift(e, &B, b, -pad));
        TRY(kal_w(e, G, n, DOM_BOOL));
        TRY(VT->and_bits(e, G, &A, &B, real, priv));
        TRY(kal_w(e, &P, n, DOM_BOOL));
        if (VT->place2) { /* P = (A ^ B) & real in one pass */
            TRY(VT->place2(e, &P, &A, 0, real, &B, 0, real));
        } else {
            TRY(VT->add(e, &P, &A, &B));
            TRY(k_andc(e, &P, &P, real));
        }
    }
    memset(&Lw, 0, sizeof Lw), memset(&Rw, 0, sizeof Rw);
    if (!VT->and_placed) { /* the placed operands written out */
        TRY(kal_w(e, &Lw, n, DOM_BOOL));
        TRY(kal_w(e, &Rw, n, DOM_BOOL));
    }
    TRY(kal_w(e, &T, n, DOM_BOOL));
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
        /* [P_hi at t | P_hi at t−1] & [G_lo at t | P_lo at t−1] (level 1: P at every bit) */
        eng_placed lw = {&P, &P, k == 1 ? 0 : 1, k == 1 ? -1 : 0, top, slot};
        eng_placed rw = {G, &P, k == 1 ? 1 : h, k == 1 ? 0 : h, top, slot};
        if (VT->and_placed) {
            TRY(VT->and_placed(e, &T, &lw, &rw, want));
        } else {
            TRY(k_place2(e, &Lw, lw.x, lw.l, lw.ml, lw.y, lw.r, lw.mr));
            TRY(k_place2(e, &Rw, rw.x, rw.l, rw.ml, rw.y, rw.r, rw.mr));
            TRY(VT->and_bits(e, &T, &Lw, &Rw, want, 0));
        }
        if (VT->place2) { /* G = (G ^ T) & top in one pass */
            TRY(VT->place2(e, G, G, 0, top, &T, 0, top));
        } else {
            TRY(k_andc(e, G, G, top));
            TRY(VT->add(e, G, G, &T));
            TRY(k_andc(e, G, G, top));
        }
        if (VT->place2) {
            /* P = T as it is: the next level reads P only at its blocks' tops less one
             * (through top' >> 1 and the shifts by 1 and h onto top'), all of them in this
             * level's slot, where T holds P_hi & P_lo; T's other bits (the G products at
             * this level's tops) are never read from P. T takes P's storage for the next
             * level's product. */
            mpc_val t = P;
            P = T, T = t;
        } else {
            TRY(k_andc(e, &P, &T, slot));
        }
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
    TRY(kal_w(e, &a, n, DOM_BOOL)); /* bool_pair writes every element of a and b */
    TRY(kal_w(e, &b, n, DOM_BOOL));
    TRY(VT->bool_pair(e, &a, &b, d, w));
    int m = w - 1, W = 1;
    while (W < m)
        W *= 2;
    TRY(k_carry_packed(e, &G, &a, &b, m, e->n_parties == 2));
    TRY(kal_w(e, &s, n, DOM_BOOL)); /* every element: add (place2) */
    if (VT->place2) { /* s = a_{w−1} ^ b_{w−1} ^ G_{W−1} at bit 0 in two passes */
        TRY(VT->place2(e, &s, &a, -(w - 1), 1, &b, -(w - 1), 1));
        TRY(VT->place2(e, &s, &s, 0, 1, &G, -(W - 1), 1));
    } else {
        TRY(VT->add(e, &s, &a, &b));
        TRY(VT->shift(e, &s, &s, w - 1));
        if (W > 1)
            TRY(VT->shift(e, &G, &G, W - 1));
        TRY(VT->add(e, &s, &s, &G));
    }
    TRY(kal_w(e, z, n, DOM_ARITH)); /* b2a_bit writes every element */
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
/* bit 63 of the boolean b as an arithmetic 0/1 */
static int k_msb_b2a(eng *e, mpc_val *z, mpc_val *b)
{
    TRY(VT->shift(e, b, b, 63));
    TRY(kal(e, z, b->n, DOM_ARITH));
    TRY(VT->b2a(e, z, b));
    krel(e, b);
    return MS_OK;
}

/* msb: ks — the full Kogge–Stone A2B, then bit 63 */
static int k_msb_ks(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    (void)w;
    mpc_val b;
    TRY(k_a2b(e, &b, d));
    return k_msb_b2a(e, z, &b);
}

/* msb: carry — msb(a + b) = a63 ^ b63 ^ (carry into bit 63) = a63 ^ b63 ^ carry_out(a << 1,
 * b << 1) */
static int k_msb_carry(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    (void)w;
    mpc_val a, c, a1, b1, co, b;
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
    return k_msb_b2a(e, z, &b);
}

/* msb: spu — SPU's msb (compat: spu; secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/ab_api.cc 450-482, the carry of a 63-bit addition as a Kogge-Stone tree with each
 * level's halves stored in the narrowest type). The two boolean words a + c = d (aby3: one
 * and_bb, as SPU's one rotate; semi2k: local), shifted up by one so that the carry out of the
 * 64-bit sum a1 + c1 is the carry into d's bit 63. Generate g = a1 & c1 on 63 bits (one
 * and_bits), propagate p = a1 ^ c1; level k (1..6) joins the blocks of 2^(k-1) bits in pairs,
 * each block's (g, p) kept at its top bit: the low block's word shifted up by 2^(k-1), then one
 * and_bits of 2n words on the 64 / 2^k top bits (the two ANDs of the level, p_hi & g_lo and
 * p_hi & p_lo, side by side: SPU's two ANDs on halves of 32, 16, 8, 4, 2, 1 bits, a byte at
 * least each). Per element aby3 24 + 24 + 3·2·(4+2+1+1+1+1) = 108 B in 8 rounds, semi2k
 * 2·16 + 2·4·(4+2+1+1+1+1) = 112 B in 7 (PRIMITIVES.md). z: the msb at bit 63 (boolean). */
static int k_msb_spu_word(eng *e, mpc_val *z, const mpc_val *d)
{
    size_t n = d->n;
    mpc_val a, c, a1, c1, G, P, S[2], X, Y, T, Gl, Pl;
    TRY(k_two_words(e, &a, &c, d));
    TRY(kal(e, &a1, n, DOM_BOOL));
    TRY(VT->shift(e, &a1, &a, -1));
    TRY(kal(e, &c1, n, DOM_BOOL));
    TRY(VT->shift(e, &c1, &c, -1));
    TRY(kal(e, &G, n, DOM_BOOL));
    TRY(VT->and_bits(e, &G, &a1, &c1, ~1ull, 0));
    TRY(kal(e, &P, n, DOM_BOOL));
    TRY(VT->add(e, &P, &a1, &c1));
    for (int k = 1; k <= 6; k++) {
        int s = 1 << (k - 1);
        uint64_t top = 0;
        for (int t = (1 << k) - 1; t < 64; t += 1 << k)
            top |= 1ull << t;
        TRY(kal(e, &Gl, n, DOM_BOOL));
        TRY(VT->shift(e, &Gl, &G, -s));
        TRY(kal(e, &Pl, n, DOM_BOOL));
        TRY(VT->shift(e, &Pl, &P, -s));
        S[0] = P, S[1] = P;
        TRY(k_concat(e, &X, S, 2));
        S[0] = Gl, S[1] = Pl;
        TRY(k_concat(e, &Y, S, 2));
        /* a half narrower than a byte still travels as one (SPU's 8-bit storage): the AND
         * runs on 8 bits, the tops and the lowest others, whose results are dropped */
        uint64_t wide = top;
        for (int b = 0; __builtin_popcountll(wide) < 8; b++)
            wide |= 1ull << b;
        TRY(kal(e, &T, 2 * n, DOM_BOOL));
        TRY(VT->and_bits(e, &T, &X, &Y, wide, 0));
        krel(e, &X), krel(e, &Y), krel(e, &Gl), krel(e, &Pl);
        TRY(k_slice(e, &X, &T, 0, n)); /* p_hi & g_lo */
        TRY(k_slice(e, &Y, &T, n, n)); /* p_hi & p_lo */
        TRY(kal(e, &Gl, n, DOM_BOOL));
        TRY(k_andc(e, &Gl, &X, top));
        TRY(kal(e, &Pl, n, DOM_BOOL));
        TRY(k_andc(e, &Pl, &Y, top));
        krel(e, &X), krel(e, &Y);
        TRY(k_andc(e, &G, &G, top));
        TRY(VT->add(e, &G, &G, &Gl)); /* g_hi and p_hi & g_lo never both 1 */
        krel(e, &P), krel(e, &T), krel(e, &Gl);
        P = Pl;
    }
    TRY(kal(e, z, n, DOM_BOOL));
    TRY(VT->add(e, z, &a, &c));
    TRY(VT->add(e, z, z, &G));
    krel(e, &a), krel(e, &c), krel(e, &a1), krel(e, &c1), krel(e, &G), krel(e, &P);
    return MS_OK;
}

static int k_msb_spu(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    (void)w;
    mpc_val b;
    TRY(k_msb_spu_word(e, &b, d));
    if (!VT->b2a_word)
        return k_msb_b2a(e, z, &b);
    /* the bit as SPU converts it (_prefer_a: semi2k B2A_Randbit, aby3 B2AByOT) */
    TRY(VT->shift(e, &b, &b, 63));
    TRY(kal(e, z, b.n, DOM_ARITH));
    TRY(VT->b2a_word(e, z, &b, 1));
    krel(e, &b);
    return MS_OK;
}

/* The comparison's boolean bit, as SPU keeps it for a select (k_select_bit): msb at bit 0. */
static int k_msb_spu_bool(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    (void)w;
    mpc_val b;
    TRY(k_msb_spu_word(e, &b, d));
    TRY(kal(e, z, d->n, DOM_BOOL));
    TRY(VT->shift(e, z, &b, 63));
    krel(e, &b);
    return MS_OK;
}

/* msb: crypten — CrypTen's _ltz (compat: crypten; facebookresearch/CrypTen@775868a02d6dac50
 * 774ce376a55b01fbd8bd85b6 crypten/mpc/mpc.py 233-242): the value to binary
 * (crypten/mpc/primitives/converters.py 18-38: each party's share a binary sharing of its own,
 * no message, the two added by circuit.py 125-130: S = x & y, then the SPK tree of 6 levels,
 * 50-87, each one AND of the broadcast P0 with the stacked [S1, P1], so two full words a side
 * per element), the sign by a shift of 63, and the one-bit B2A (beaver.py 193-213: x ^ r
 * opened as a 64-bit word). Per element 32 + 6 · 64 + 16 = 432 B in 1 + 6 + 1 rounds
 * (PRIMITIVES.md "CrypTen"). The adder's sum is exact, so is the bit: the Kogge–Stone A2B on
 * full words (k_a2b_spu) sends what the SPK tree sends in the same rounds. */
static int k_msb_crypten(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    (void)w;
    mpc_val b;
    TRY(k_a2b_spu(e, &b, d));
    return k_msb_b2a(e, z, &b);
}

/* msb: packed — the bit-packed carry tree on the bound's w bits */
static int k_msb_pk(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    return k_msb_packed(e, z, d, w > 1 && w < 64 ? w : 64);
}

const kv_msb_row kv_msb_tab[KV_MSB_N] = {
    [KV_MSB_PACKED] = {"packed", k_msb_pk,
                       "bit-packed carry tree on the bound's bits, daBit b2a (PRIMITIVES.md)",
                       NULL},
    [KV_MSB_KS] = {"ks", k_msb_ks, "full Kogge–Stone A2B adder, then bit 63", NULL},
    [KV_MSB_CARRY] = {"carry", k_msb_carry,
                      "carry-out tree of one word per level (SPU's carry_out)", NULL},
    [KV_MSB_SPU] = {"spu", k_msb_spu, "SPU's msb: Kogge-Stone with narrowed levels (compat: spu)",
                    k_msb_spu_bool},
    [KV_MSB_CRYPTEN] = {"crypten", k_msb_crypten,
                        "CrypTen's _ltz: A2B by its SPK adder on full words, one-bit B2A of a "
                        "64-bit word (compat: crypten)",
                        NULL},
};

static int k_msb_w(eng *e, mpc_val *z, const mpc_val *d, int w)
{
    return kv_msb_tab[e->kv.msb].fn(e, z, d, w);
}

int k_msb(eng *e, mpc_val *z, const mpc_val *d) { return k_msb_w(e, z, d, 64); }

int k_lt_bool(const eng *e) { return kv_msb_tab[e->kv.msb].bfn != NULL; }

/* z = [x < y] as a boolean bit (bit 0), for variants that keep it (k_lt_bool). */
int k_lt_b(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w)
{
    mpc_val d;
    TRY(kal(e, &d, x->n, DOM_ARITH));
    TRY(VT->sub(e, &d, x, y));
    int rc = kv_msb_tab[e->kv.msb].bfn(e, z, &d, w);
    krel(e, &d);
    return rc;
}

/* z = c ? a : b with c a boolean bit: b + mul_a1b(a − b, c) (SPU's _mux on a boolean
 * predicate, libspu/kernel/hal/ring.cc 465-470 with libspu/mpc/api.cc 433-450). */
int k_select_bit(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *a, const mpc_val *b)
{
    mpc_val d, t;
    TRY(kal(e, &d, a->n, DOM_ARITH));
    TRY(VT->sub(e, &d, a, b));
    TRY(kal(e, &t, a->n, DOM_ARITH));
    TRY(VT->mul_a1b(e, &t, &d, c));
    TRY(kal(e, z, a->n, DOM_ARITH));
    TRY(VT->add(e, z, b, &t));
    krel(e, &d), krel(e, &t);
    return MS_OK;
}

typedef int (*k_test)(eng *e, mpc_val *z, const mpc_val *d, int w);

/* z = test(x − y) (local difference, then a test of it on w bits: k_msb_w, k_eqz). */
static int k_test_diff(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w, k_test test)
{
    mpc_val d;
    TRY(kal_w(e, &d, x->n, DOM_ARITH)); /* sub writes every element */
    TRY(VT->sub(e, &d, x, y));
    int rc = test(e, z, &d, w);
    krel(e, &d);
    return rc;
}

/* z = [x < y] (0/1 integer), x − y in [−2^(w−1), 2^(w−1)) (w = 64: |x − y| < 2^63). */
int k_lt(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w)
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
/* z = [d == 0] as SPU computes it (compat: spu; PRIMITIVES.md "Equality"): eqz's mask
 * u = ~(c ^ r) (eqz_spu: semi2k one all-reduce, aby3 three messages), then log2(64) = 6
 * levels folding the upper half onto the lower — semi2k and_bb on whole words (its storage
 * is always the ring's), aby3 one and_bits on the half's bits, each at least a byte (SPU's
 * byte vectors: 4, 2, 1, 1, 1, 1 bytes) — and the bit as SPU converts it (b2a_word of one
 * bit: semi2k B2A_Randbit, aby3 B2AByOT). The word width is the ring's whatever the bound. */
static int k_eqz_spu(eng *e, mpc_val *z, const mpc_val *d)
{
    size_t n = d->n;
    mpc_val u, sh, t;
    TRY(kal(e, &u, n, DOM_BOOL));
    TRY(VT->eqz_spu(e, &u, d));
    for (int h = 32; h >= 1; h /= 2) {
        TRY(kal(e, &sh, n, DOM_BOOL));
        TRY(VT->shift(e, &sh, &u, h));
        TRY(kal(e, &t, n, DOM_BOOL));
        if (e->n_parties == 3)
            TRY(VT->and_bits(e, &t, &u, &sh, lowbits(h), 0));
        else
            TRY(VT->and_bb(e, &t, &u, &sh));
        krel(e, &u), krel(e, &sh);
        u = t;
    }
    TRY(kal(e, z, n, DOM_ARITH));
    TRY(VT->b2a_word(e, z, &u, 1));
    krel(e, &u);
    return MS_OK;
}

int k_eqz(eng *e, mpc_val *z, const mpc_val *d, int wb)
{
    if (e->kv.compat == KV_COMPAT_SPU && VT->eqz_spu && VT->b2a_word)
        return k_eqz_spu(e, z, d);
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
int k_eq(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w)
{
    return k_test_diff(e, z, x, y, w, k_eqz);
}

/* z = b + c·(a - b) with c a 0/1 integer share (1 multiplication, no truncation). */
int k_select(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *a, const mpc_val *b)
{
    if (e->kv.compat == KV_COMPAT_CRYPTEN) /* crypten.where: c·a + (1 − c)·b, two products */
        return k_select_cr(e, z, c, a, b);
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

/* z = c ? a : b as CrypTen's where with a secret condition (compat: crypten;
 * facebookresearch/CrypTen@775868a02d6dac50774ce376a55b01fbd8bd85b6 crypten/__init__.py
 * 437-443): c·a + (1 − c)·b, the two products issued one after the other, c an integer 0/1 (no
 * rescale): 64 B in 2 rounds per element on semi2k. */
int k_select_cr(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *a, const mpc_val *b)
{
    mpc_val t, oc, u;
    TRY(k_imul(e, &t, c, a));
    TRY(k_scaled(e, &oc, c, (uint64_t)-1));
    TRY(k_addc(e, &oc, &oc, 1));
    TRY(k_imul(e, &u, &oc, b));
    TRY(kal(e, z, a->n, DOM_ARITH));
    int rc = VT->add(e, z, &t, &u);
    krel(e, &t), krel(e, &oc), krel(e, &u);
    return rc;
}

/* A secret public iota: z[r·n + j] = j (integer), R rows. */
int k_iota(eng *e, mpc_val *z, const mpc_val *like, size_t R, size_t n)
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
int idx_bits(size_t n)
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
int k_onehot_w(eng *e, mpc_val *z, const mpc_val *idx, size_t n, int w)
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
int k_onehot(eng *e, mpc_val *z, const mpc_val *idx, size_t n)
{
    return k_onehot_w(e, z, idx, n, k_packed(e) ? idx_bits(n) : 64);
}

/* ---- normalisation by one bit decomposition (normalize: bitdec) ------------------------ */

/* Positions [lo, hi) of a word. */

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
int k_bitdec(eng *e, mpc_val *sb, mpc_val *zb, const mpc_val *x, int w, int cm, int zlo, int zhi)
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

int k_hibit(eng *e, mpc_val *H, const mpc_val *x, int w)
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
