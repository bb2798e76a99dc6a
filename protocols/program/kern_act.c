/* kern_act.c — activations (PUMA's piecewise polynomials, SiLU by a sigmoid, SPU's GeLU and
 * SiLU), SPU's Padé exp, softmax and norms; error bounds at the top of kern.c (kern_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_int.h"

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

static int k_gelu_puma(eng *e, mpc_val *z, const mpc_val *x)
{
    return k_piecewise(e, z, x, &puma_gelu);
}

static int k_silu_puma(eng *e, mpc_val *z, const mpc_val *x)
{
    return k_piecewise(e, z, x, &puma_silu);
}

/* The public polynomial Σ c[i]·x^i over the nonzero c[i] (i >= 1), each term one truncated
 * public product as SPU runs `c * xi` (f_mul with a public operand), plus c[0] (local). */
static int k_poly_terms(eng *e, mpc_val *z, mpc_val *const pw[7], const double c[7])
{
    TRY(k_const(e, z, pw[1], pw[1]->n, FX(c[0])));
    for (int i = 1; i < 7; i++) {
        if (c[i] == 0 || !pw[i])
            continue;
        mpc_val t, u;
        TRY(k_scaled(e, &t, pw[i], FX(c[i])));
        TRY(k_trunc(e, &u, &t, e->cfg.frac_bits));
        TRY(VT->add(e, z, z, &u));
        krel(e, &t), krel(e, &u);
    }
    return MS_OK;
}

/* z = [x < t] (lt) or [x > t] (!lt) as a boolean bit: msb(x − t) or msb(t − x) by SPU's msb
 * (less against a public threshold). */
static int k_cmp_pub(eng *e, mpc_val *z, const mpc_val *x, double t, int lt)
{
    mpc_val d;
    TRY(k_scaled(e, &d, x, lt ? 1 : (uint64_t)-1));
    TRY(k_addc(e, &d, &d, lt ? (uint64_t) - (int64_t)FX(t) : FX(t)));
    int rc = kv_msb_tab[KV_MSB_SPU].bfn(e, z, &d, 64);
    krel(e, &d);
    return rc;
}

/* exp(x) as SPU's EXP_PADE computes it (exp: pade under compat: spu;
 * secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87 libspu/kernel/hal/fxp_approx.cc
 * 455-472 the clamp, 474-478 exp_pade, 268-310 exp2_pade, 238-257 exp2_pade_normalized; ring.cc
 * 472-479 _clamp): x clamped to [−32 ln 2, 32 ln 2] by two compare-and-selects (msb, mul_a1b),
 * y = x·log2 e (one truncation), y to boolean (SPU's A2B), its sign bit and integer part
 * (shifts), the fraction y − (int << f) (a b2a_word of the 64-bit shifted integer: SPU negates a
 * boolean through _2a), the degree-5 polynomial of the fraction (x², x³, x⁴, x⁵ one product
 * after another, public coefficients, one truncation), then for each of the integer part's 5
 * low bits a one-bit b2a_word and a ring product by 1 + bit·(2^(2^i) − 1); for a negative y the
 * result divided by 2^32 (a truncation by 32 bits) is selected by the sign bit (mul_a1b).
 * PRIMITIVES.md counts it (semi2k 1,162 B in 46 rounds, aby3 1,936 B in 73). */
int k_exp_pade(eng *e, mpc_val *z, const mpc_val *x)
{
    int f = e->cfg.frac_bits;
    size_t n = x->n;
    const double L = (double)(32.0F / (float)log2(exp(1.0)));
    mpc_val b, c, x1, x2, y, t, yb, sb, xi, xl, xa, fr;
    TRY(k_cmp_pub(e, &b, x, -L, 1)); /* x < −L */
    TRY(k_const(e, &c, x, n, FX(-L)));
    TRY(k_select_bit(e, &x1, &b, &c, x));
    krel(e, &b), krel(e, &c);
    TRY(k_cmp_pub(e, &b, &x1, L, 1)); /* x1 < L */
    TRY(k_const(e, &c, x, n, FX(L)));
    TRY(k_select_bit(e, &x2, &b, &x1, &c));
    krel(e, &b), krel(e, &c), krel(e, &x1);
    TRY(k_scaled(e, &t, &x2, FX((double)(float)log2(exp(1.0)))));
    TRY(k_trunc(e, &y, &t, f));
    krel(e, &t), krel(e, &x2);
    TRY(k_a2b_spu(e, &yb, &y));
    TRY(kal(e, &sb, n, DOM_BOOL));
    TRY(VT->shift(e, &sb, &yb, 63));
    TRY(kal(e, &xi, n, DOM_BOOL));
    TRY(VT->shift(e, &xi, &yb, f));
    krel(e, &yb);
    TRY(kal(e, &xl, n, DOM_BOOL));
    TRY(VT->shift(e, &xl, &xi, -f));
    TRY(kal(e, &xa, n, DOM_ARITH));
    TRY(VT->b2a_word(e, &xa, &xl, 64));
    TRY(kal(e, &fr, n, DOM_ARITH));
    TRY(VT->sub(e, &fr, &y, &xa));
    krel(e, &xl), krel(e, &xa), krel(e, &y);
    /* exp2_pade_normalized on the fraction */
    static const float pc[6] = {0.100000007744302F * 10,  0.693147180426163F,
                                0.240226510710170F,       0.555040686204663F / 10,
                                0.961834122588046F / 100, 0.133273035928143F / 100};
    mpc_val pw[6], acc, ret;
    pw[1] = fr;
    for (int i = 2; i <= 5; i++)
        TRY(k_fmul(e, &pw[i], &fr, &pw[i - 1]));
    TRY(k_scaled(e, &acc, &pw[1], FX((double)pc[1])));
    for (int i = 2; i <= 5; i++)
        TRY(k_addmul(e, &acc, &pw[i], FX((double)pc[i])));
    TRY(k_trunc(e, &ret, &acc, f));
    TRY(k_addc(e, &ret, &ret, FX((double)pc[0])));
    krel(e, &acc);
    for (int i = 1; i <= 5; i++)
        krel(e, &pw[i]);
    for (int i = 0; i < 5; i++) { /* ret ·= 1 + a·(K − 1), a = bit i of the integer part */
        mpc_val ab, aa, m, r2;
        if (i) { /* b2a_word of one bit reads bit 0 only */
            TRY(kal(e, &ab, n, DOM_BOOL));
            TRY(VT->shift(e, &ab, &xi, i));
        } else
            TRY(k_rep(e, &ab, &xi, 1));
        TRY(kal(e, &aa, n, DOM_ARITH));
        TRY(VT->b2a_word(e, &aa, &ab, 1));
        uint64_t K = 1ull << (1 << i);
        TRY(k_scaled(e, &m, &aa, K - 1));
        TRY(k_addc(e, &m, &m, 1));
        TRY(k_imul(e, &r2, &ret, &m));
        krel(e, &ab), krel(e, &aa), krel(e, &m), krel(e, &ret);
        ret = r2;
    }
    krel(e, &xi);
    mpc_val rr, d, s2;
    TRY(k_trunc(e, &rr, &ret, 32)); /* exp2(y − 32) for y < 0: SPU's two's complement trick */
    TRY(kal(e, &d, n, DOM_ARITH));
    TRY(VT->sub(e, &d, &rr, &ret));
    TRY(kal(e, &s2, n, DOM_ARITH));
    TRY(VT->mul_a1b(e, &s2, &d, &sb));
    TRY(kal(e, z, n, DOM_ARITH));
    TRY(VT->add(e, z, &ret, &s2));
    krel(e, &rr), krel(e, &d), krel(e, &s2), krel(e, &sb), krel(e, &ret);
    return MS_OK;
}

/* PUMA's hack_gelu (AntCPLab/puma_benchmarks@df36d1ec5b51e6ee47f8959cef629d0ad7010ea8
 * bench_gpt2/bench_gpt2.py 82-107) and the hack_silu of SPU's LLaMA example
 * (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * examples/python/ml/flax_llama7b/flax_llama7b.py 91-123) as SPU runs them, op by op (approx:
 * spu): b0 = x < t0, b1 = x < t1, b2 = x > t2 (three msb, boolean), b3 = b1 ^ b2 ^ 1,
 * b4 = b0 ^ b1; the powers (GeLU: x², x³ = x·x², x⁴, x⁶ = (x³)²; SiLU: x², x⁴, x⁶ = x²·x⁴); each
 * public coefficient's product truncated on its own; ret = b2·x + b4·seg1 + b3·seg2 by three
 * mul_a1b (lower_mixed_type_op.cc: bool × fxp without a truncation). PRIMITIVES.md counts it. */
static int k_hack_spu(eng *e, mpc_val *z, const mpc_val *x, const pw_poly *pp, int gelu)
{
    size_t n = x->n;
    mpc_val b[5], x2, x3 = {0}, x4, x6, s1, s2, t[3];
    TRY(k_cmp_pub(e, &b[0], x, pp->thr[0], 1));
    TRY(k_cmp_pub(e, &b[1], x, pp->thr[1], 1));
    TRY(k_cmp_pub(e, &b[2], x, pp->thr[2], 0));
    uint64_t one = 1;
    TRY(kal(e, &b[3], n, DOM_BOOL));
    TRY(VT->add(e, &b[3], &b[1], &b[2]));
    TRY(VT->add_pub(e, &b[3], &b[3], &one, 1));
    TRY(kal(e, &b[4], n, DOM_BOOL));
    TRY(VT->add(e, &b[4], &b[0], &b[1]));
    TRY(k_fsq(e, &x2, x));
    if (gelu) {
        TRY(k_fmul(e, &x3, x, &x2));
        TRY(k_fsq(e, &x4, &x2));
        TRY(k_fsq(e, &x6, &x3));
    } else {
        TRY(k_fsq(e, &x4, &x2));
        TRY(k_fmul(e, &x6, &x2, &x4));
    }
    mpc_val *pw[7] = {NULL, (mpc_val *)x, &x2, gelu ? &x3 : NULL, &x4, NULL, &x6};
    TRY(k_poly_terms(e, &s1, pw, pp->lo));
    TRY(k_poly_terms(e, &s2, pw, pp->mid));
    const mpc_val *v[3] = {x, &s1, &s2};
    const mpc_val *c[3] = {&b[2], &b[4], &b[3]};
    for (int i = 0; i < 3; i++) {
        TRY(kal(e, &t[i], n, DOM_ARITH));
        TRY(VT->mul_a1b(e, &t[i], v[i], c[i]));
    }
    TRY(kal(e, z, n, DOM_ARITH));
    TRY(VT->add(e, z, &t[0], &t[1]));
    TRY(VT->add(e, z, z, &t[2]));
    for (int i = 0; i < 5; i++)
        krel(e, &b[i]);
    for (int i = 0; i < 3; i++)
        krel(e, &t[i]);
    krel(e, &x2), krel(e, &x3), krel(e, &x4), krel(e, &x6), krel(e, &s1), krel(e, &s2);
    return MS_OK;
}

static int k_gelu_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    return k_hack_spu(e, z, x, &puma_gelu, 1);
}

static int k_silu_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    return k_hack_spu(e, z, x, &puma_silu, 0);
}

/* GeLU and SiLU: PUMA's piecewise polynomials, or SiLU as x·σ(x) with approx: sigmoid. */
/* ---- CrypTen's sigmoid, SiLU and GeLU (approx: crypten; facebookresearch/CrypTen@
 * 775868a02d6dac50774ce376a55b01fbd8bd85b6) ----------------------------------------------- */

/* σ(x) as CrypTen's sigmoid with sigmoid_tanh_method reciprocal
 * (crypten/common/functions/approximations.py 276-321): ltz = _ltz(x); |x| = (1 − 2·ltz)·x, a
 * product; d = exp(−|x|) + 1; 1/d by the Newton reciprocal from the public 0.75 with 3 steps
 * (the override at 308-315; the first step is all public-by-secret: local), then
 * where(1 − ltz, 1/d, 1 − 1/d) (logic.py 112-130: (1 − c)·b first, then a·c). Per element
 * 432 + 32 + 128 + 2·48 + 64 = 752 B in 8 + 1 + 8 + 4 + 2 = 23 rounds (PRIMITIVES.md). */
static int k_sigmoid_cr(eng *e, mpc_val *z, const mpc_val *x)
{
    int f = e->cfg.frac_bits;
    mpc_val lt, sg, ax, t, ex, y, q;
    TRY(k_msb(e, &lt, x));
    TRY(k_scaled(e, &sg, &lt, (uint64_t)-2));
    TRY(k_addc(e, &sg, &sg, 1));
    TRY(k_imul(e, &ax, &sg, x));
    krel(e, &sg);
    TRY(k_scaled(e, &t, &ax, (uint64_t)-1));
    krel(e, &ax);
    TRY(k_exp(e, &ex, &t));
    krel(e, &t);
    TRY(k_addc(e, &ex, &ex, FX(1.0))); /* d */
    TRY(k_scaled(e, &q, &ex, FX(-0.5625)));
    TRY(k_trunc(e, &y, &q, f)); /* y1 = 2·0.75 − 0.75²·d */
    krel(e, &q);
    TRY(k_addc(e, &y, &y, FX(1.5)));
    for (int it = 1; it < 3; it++) {
        mpc_val y2, p;
        TRY(k_fsq(e, &y2, &y));
        TRY(k_fmul(e, &p, &y2, &ex));
        krel(e, &y2);
        TRY(k_scaled(e, &t, &y, 2));
        TRY(VT->sub(e, &t, &t, &p));
        krel(e, &p), krel(e, &y);
        y = t;
    }
    krel(e, &ex);
    mpc_val om, c, nc, a, b;
    TRY(k_scaled(e, &om, &y, (uint64_t)-1)); /* 1 − 1/d */
    TRY(k_addc(e, &om, &om, FX(1.0)));
    TRY(k_scaled(e, &c, &lt, (uint64_t)-1)); /* c = 1 − ltz */
    TRY(k_addc(e, &c, &c, 1));
    krel(e, &lt);
    TRY(k_scaled(e, &nc, &c, (uint64_t)-1)); /* 1 − c */
    TRY(k_addc(e, &nc, &nc, 1));
    TRY(k_imul(e, &b, &nc, &om));
    TRY(k_imul(e, &a, &y, &c));
    TRY(kal(e, z, x->n, DOM_ARITH));
    int rc = VT->add(e, z, &a, &b);
    krel(e, &om), krel(e, &c), krel(e, &nc), krel(e, &a), krel(e, &b), krel(e, &y);
    return rc;
}

/* SiLU = x·σ(x), as a SiLU exported to ONNX and imported by crypten.nn.from_onnx runs (a
 * Sigmoid module, crypten/nn/module.py, then a Mul): 752 + 32 = 784 B in 24 rounds. */
static int k_silu_cr(eng *e, mpc_val *z, const mpc_val *x)
{
    mpc_val s;
    TRY(k_sigmoid_cr(e, &s, x));
    int rc = k_fmul(e, z, x, &s);
    krel(e, &s);
    return rc;
}

/* x^p for an integer p >= 1 as CrypTen's pow (crypten/common/functions/power.py 16-45): even p
 * squares and recurses on p/2, odd p takes x²·x (a squaring, then a product) and recurses on
 * (p − 1)/2; nothing is shared between calls. */
static int k_pow_cr(eng *e, mpc_val *z, const mpc_val *x, int p)
{
    if (p == 1)
        return k_rep(e, z, x, 1);
    mpc_val s, t;
    TRY(k_fsq(e, &s, x));
    if (p == 2) {
        *z = s;
        return MS_OK;
    }
    if (p % 2 == 0) {
        int rc = k_pow_cr(e, z, &s, p / 2);
        krel(e, &s);
        return rc;
    }
    TRY(k_fmul(e, &t, &s, x));
    krel(e, &s);
    int rc = k_pow_cr(e, z, &t, (p - 1) / 2);
    krel(e, &t);
    return rc;
}

/* GeLU = 0.5·x·(1 + erf(x/√2)), as torch's exact GELU exported to ONNX (Div, Erf, Add, Mul,
 * Mul) runs under crypten.nn.from_onnx; erf is CrypTen's Taylor series with erf_iterations 8
 * (approximations.py 395-405): u + Σ_{n=1..8} (−1)^n u^(2n+1) / (n!(2n + 1)), each power by
 * k_pow_cr from scratch, times 2/√π; the public products truncated locally. Per element
 * 752 + 32 = 784 B in 34 + 1 = 35 rounds (PRIMITIVES.md). The series diverges for |u| above
 * about 2 (|x| above about 3), as CrypTen's does. */
static int k_gelu_cr(eng *e, mpc_val *z, const mpc_val *x)
{
    int f = e->cfg.frac_bits;
    mpc_val q, u, out, g;
    TRY(k_scaled(e, &q, x, FX(0.70710678118654752)));
    TRY(k_trunc(e, &u, &q, f));
    krel(e, &q);
    TRY(k_rep(e, &out, &u, 1));
    double fact = 1;
    for (int n = 1; n <= 8; n++) {
        mpc_val pw, tq, tm;
        fact *= n;
        double mult = (n % 2 ? -1.0 : 1.0) / (fact * (2 * n + 1));
        TRY(k_pow_cr(e, &pw, &u, 2 * n + 1));
        TRY(k_scaled(e, &tq, &pw, FX(mult)));
        krel(e, &pw);
        TRY(k_trunc(e, &tm, &tq, f));
        krel(e, &tq);
        TRY(VT->add(e, &out, &out, &tm));
        krel(e, &tm);
    }
    krel(e, &u);
    TRY(k_scaled(e, &q, &out, FX(1.1283791670955126))); /* 2/√π */
    krel(e, &out);
    TRY(k_trunc(e, &g, &q, f));
    krel(e, &q);
    TRY(k_addc(e, &g, &g, FX(1.0)));
    TRY(k_fmul(e, &q, x, &g));
    krel(e, &g);
    TRY(k_trunc(e, z, &q, 1)); /* · 0.5 */
    krel(e, &q);
    return MS_OK;
}

const kv_approx_row kv_approx_tab[KV_APPROX_N] = {
    [KV_APPROX_PUMA] = {"puma", k_gelu_puma, k_silu_puma,
                        "PUMA piecewise polynomials (mpc-costs.md §2.4)"},
    [KV_APPROX_SIGMOID] = {"sigmoid", k_gelu_puma, k_silu_sigmoid,
                           "GeLU: PUMA's polynomial; SiLU: x·σ(x) by exp and a reciprocal"},
    [KV_APPROX_SPU] = {"spu", k_gelu_spu, k_silu_spu,
                       "PUMA's hack_gelu and SPU's LLaMA hack_silu as SPU runs them: boolean "
                       "segment bits, a truncation per public product, selects by mul_a1b"},
    [KV_APPROX_CRYPTEN] = {"crypten", k_gelu_cr, k_silu_cr,
                           "CrypTen: GeLU by its Taylor erf, SiLU by its sigmoid (a sign, exp, "
                           "three Newton steps from 0.75, a two-product where)"},
};

int k_gelu(eng *e, mpc_val *z, const mpc_val *x)
{
    return kv_approx_tab[e->kv.approx].gelu(e, z, x);
}

int k_silu(eng *e, mpc_val *z, const mpc_val *x)
{
    return kv_approx_tab[e->kv.approx].silu(e, z, x);
}

/* ---- softmax, norms ---------------------------------------------------------------------- */

/* ---- CrypTen's softmax (compat: crypten; facebookresearch/CrypTen@
 * 775868a02d6dac50774ce376a55b01fbd8bd85b6, PRIMITIVES.md "CrypTen" counts it) ------------- */

/* CrypTen's softmax (crypten/common/functions/approximations.py 409-424): x − its row max, exp,
 * the row sum's reciprocal with reciprocal_all_pos (no sign), times the numerators. No clip.
 * A causal mask: the masked scores 2^12 lower for the max (k_softmax), then their exp times a
 * public 0 (the limit exp of a score far below −512 is large, not 0): local, no message.
 * A row of one is 1. Per row of 64 (semi2k): 89,440 B in 115 rounds (PRIMITIVES.md). */
static int k_softmax_cr(eng *e, mpc_val *z, const mpc_val *xm, size_t R, size_t m, size_t n,
                        long causal)
{
    if (n == 1) {
        TRY(k_scaled(e, z, xm, 0));
        return k_addc(e, z, z, FX(1.0));
    }
    mpc_val mx, mb, d, ex, sum, rs, rb;
    TRY(k_rowmax_cr(e, &mx, NULL, xm, R, n));
    TRY(k_bcast(e, &mb, &mx, n));
    TRY(kal(e, &d, R * n, DOM_ARITH));
    TRY(VT->sub(e, &d, xm, &mb));
    TRY(k_exp(e, &ex, &d));
    if (causal >= 0) { /* the limit exp of a masked score (2^12 down) is no 0: zeroed, public */
        uint64_t *c;
        TRY(pub64(xm, R * n, &c));
        if (c)
            for (size_t i = 0; i < R * n; i++)
                c[i] = (long)(i % n) <= causal + (long)((i / n) % m);
        int rc = VT->mul_pub(e, &ex, &ex, c, R * n);
        free(c);
        TRY(rc);
    }
    TRY(k_rowsum(e, &sum, &ex, R, n));
    TRY(k_recip_nr(e, &rs, &sum));
    TRY(k_bcast(e, &rb, &rs, n));
    TRY(k_fmul(e, z, &ex, &rb));
    krel(e, &mx), krel(e, &mb), krel(e, &d), krel(e, &ex), krel(e, &sum), krel(e, &rs);
    krel(e, &rb);
    return MS_OK;
}

/* PUMA softmax over R rows of n: max, x - max, exp masked below clip, one reciprocal per row
 * (x / broadcast(s) → x · broadcast(1/s)). causal >= 0 masks column j > causal + (r mod m).
 * compat: spu runs it as SPU runs hack_softmax of its LLaMA example
 * (examples/python/ml/flax_llama7b/flax_llama7b.py 63-75): the row max by SPU's tree reduction
 * (libspu/kernel/hlo/reduce.cc 31-110, max = select(less(y, x), x, y)), the clip's bit kept
 * boolean and exp·b by mul_a1b (the int·fxp product of lower_mixed_type_op.cc 28-75), the
 * profile's exp, and x / broadcast(s) as x · broadcast(1/s)
 * (libspu/dialect/pphlo/transforms/optimize_denominator_with_broadcast.cc 26-50), all at
 * secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87; PRIMITIVES.md counts it. */
int k_softmax(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t m, size_t n, long causal)
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
    if (e->kv.compat == KV_COMPAT_CRYPTEN) {
        int rc = k_softmax_cr(e, z, &xm, R, m, n, causal);
        krel(e, &xm);
        return rc;
    }
    TRY(k_rowmax(e, &mx, NULL, &xm, R, n, 64));
    TRY(k_bcast(e, &mb, &mx, n));
    TRY(kal(e, &d, R * n, DOM_ARITH));
    TRY(VT->sub(e, &d, &xm, &mb));
    /* b = [clip < d] = msb(clip - d); exp: pow2 is 0 below -(f+1)·ln 2 already (its last
     * place), so a clip below that needs no mask */
    mpc_val cd = {0};
    int clip = e->kv.exp != KV_EXP_POW2 || e->cfg.softmax_clip > -(f + 1) * 0.6931471805599453;
    int spu = e->kv.compat == KV_COMPAT_SPU && k_lt_bool(e);
    b = (mpc_val){0};
    if (clip) {
        TRY(k_scaled(e, &cd, &d, (uint64_t)-1));
        TRY(k_addc(e, &cd, &cd, FX(e->cfg.softmax_clip)));
        if (spu) {
            TRY(kv_msb_tab[e->kv.msb].bfn(e, &b, &cd, 64));
        } else
            TRY(k_msb(e, &b, &cd));
    }
    TRY(k_exp(e, &ex, &d));
    if (clip && spu) {
        TRY(kal(e, &exb, R * n, DOM_ARITH));
        TRY(VT->mul_a1b(e, &exb, &ex, &b));
    } else if (clip)
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

/* The row means of x (R rows of n): the row sum times 1/n, one truncation. */
static int k_rowmean(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n)
{
    mpc_val s;
    TRY(k_rowsum(e, &s, x, R, n));
    TRY(k_mulc(e, &s, &s, FX(1.0 / (double)n)));
    int rc = k_trunc(e, z, &s, e->cfg.frac_bits);
    krel(e, &s);
    return rc;
}

/* flax's LayerNorm statistics as SPU runs them (compat: spu;
 * google/flax@18f8f311c275d57f46d95e41b15aa97b454754c0 flax/linen/normalization.py 60-152,
 * use_fast_variance): mu = mean(x), mu2 = mean(x²) (two truncations), var = max(0, mu2 − mu²)
 * (SPU's max: a compare and mul_a1b), + eps. */
static int k_fast_var(eng *e, mpc_val *var, mpc_val *mu, const mpc_val *x, size_t R, size_t n,
                      double eps)
{
    mpc_val sq, mu2, m2, v, ng, zero, zr;
    TRY(k_fsq(e, &sq, x));
    TRY(k_rowmean(e, mu, x, R, n));
    TRY(k_rowmean(e, &mu2, &sq, R, n));
    TRY(k_fsq(e, &m2, mu));
    TRY(kal(e, &v, R, DOM_ARITH));
    TRY(VT->sub(e, &v, &mu2, &m2));
    TRY(k_const(e, &zero, &v, R, 0));
    TRY(kv_msb_tab[e->kv.msb].bfn(e, &ng, &v, 64)); /* [v < 0] */
    TRY(k_select_bit(e, &zr, &ng, &zero, &v));
    TRY(k_addc(e, &zr, &zr, FX(eps)));
    *var = zr;
    krel(e, &sq), krel(e, &mu2), krel(e, &m2), krel(e, &v), krel(e, &ng), krel(e, &zero);
    return MS_OK;
}

/* LayerNorm (bias != NULL or centre) / RMSNorm over R rows of n:
 * [mean, x - mean,] square, mean, + eps, rsqrt, multiply, gain[, bias]. compat: spu's
 * LayerNorm takes flax's fast variance (k_fast_var) and multiplies the row's rsqrt by the
 * gain before x − mean (flax's mul *= scale; y *= mul); its RMSNorm is EasyLM's
 * (young-geng/EasyLM@fe5b2c354e25d697fce7cd225e23bbbe72570da3
 * EasyLM/models/llama/llama_model.py 266-273), which is this composition. PRIMITIVES.md counts
 * both. */
int k_norm(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int centre, double eps,
           const mpc_val *g, int g_pub, const mpc_val *bias, int b_pub)
{
    mpc_val d, sq, ss, var, rs, rb, y, t;
    int flax = centre && e->kv.compat == KV_COMPAT_SPU && k_lt_bool(e);
    if (flax) {
        mpc_val mu, mb;
        TRY(k_fast_var(e, &var, &mu, x, R, n, eps));
        TRY(k_rsqrt(e, &rs, &var, (int)floor(log2(eps)), 0));
        TRY(k_bcast(e, &rb, &rs, n));
        if (g) {
            TRY(k_gain(e, &t, &rb, g, g_pub, R, n));
            krel(e, &rb);
            rb = t;
        }
        TRY(k_bcast(e, &mb, &mu, n));
        TRY(kal(e, &d, R * n, DOM_ARITH));
        TRY(VT->sub(e, &d, x, &mb));
        TRY(k_fmul(e, &y, &d, &rb));
        krel(e, &mu), krel(e, &mb), krel(e, &var), krel(e, &rs), krel(e, &rb), krel(e, &d);
        g = NULL; /* applied */
        sq = ss = var = rs = rb = d = (mpc_val){0};
    } else if (centre) {
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
    if (!flax) {
        TRY(k_fsq(e, &sq, &d));
        TRY(k_rowsum(e, &ss, &sq, R, n));
        TRY(k_mulc(e, &ss, &ss, FX(1.0 / (double)n)));
        TRY(k_trunc(e, &var, &ss, e->cfg.frac_bits));
        TRY(k_addc(e, &var, &var, FX(eps)));
        TRY(k_rsqrt(e, &rs, &var, (int)floor(log2(eps)), 0)); /* var + eps >= eps */
        TRY(k_bcast(e, &rb, &rs, n));
        TRY(k_fmul(e, &y, &d, &rb));
    }
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
