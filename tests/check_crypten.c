/* check_crypten.c — the CrypTen profile (compat: crypten): which variants it resolves to, that
 * aby3 is refused with the reason, and its exp, reciprocal and rsqrt on the clear-text engine
 * that rounds as semi2k does (local truncation) against CrypTen's own iterations computed in
 * double (the fixed-point rounding, bounded below) and against float on the ranges where
 * CrypTen's iterations converge (the algorithms' own error, bounded below). The per-element
 * bytes and rounds are pinned in tests/data/compat-counts.tsv (check_compat.c). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testdir.h"
#include "protocols/program/eng_plain.h"
#include "protocols/program/kern.h"
#include "protocols/program/proto.h"

TESTDIR("check_crypten")

START_TEST(test_crypten_profile)
{
    proto_cfg c;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default("semi2k", &c, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&c, "exp", "pade", &e), 0);
    ck_assert_int_eq(proto_cfg_set(&c, "compat", "crypten", &e), 0);
    kern_conf kv;
    ck_assert_int_eq(kern_configure(&c, &kv), 0);
    ck_assert_int_eq(kv.compat, KV_COMPAT_CRYPTEN);
    ck_assert_int_eq(kv.trunc, KV_TRUNC_LOCAL);
    ck_assert_int_eq(kv.msb, KV_MSB_CRYPTEN);
    ck_assert_int_eq(kv.exp, KV_EXP_TAYLOR); /* exp: pade is SPU's mode, not CrypTen's */
    ck_assert_int_eq(kv.normalize, KV_NORM_CRYPTEN);
    ck_assert_int_eq(kv.approx, KV_APPROX_CRYPTEN);
    ck_assert_str_eq(kern_variant_name("compat", kv.compat), "crypten");
    /* aby3: refused when the key is set, whatever the order, and by the engines */
    ck_assert_int_eq(proto_cfg_default("aby3", &c, &e), 0);
    ck_assert_int_ne(proto_cfg_set(&c, "compat", "crypten", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "compat: crypten has no aby3 profile"));
    ck_assert_ptr_nonnull(strstr(e.msg, "semi2k"));
    ck_assert_str_eq(c.compat, "native"); /* nothing half-set */
    snprintf(c.compat, sizeof c.compat, "crypten");
    ck_assert_int_ne(kern_configure(&c, &kv), 0);
    ck_assert_int_ne(kern_compat_check(&c, &e), 0);
}
END_TEST

static double ex_lim(double x, int t)
{
    double r = 1 + x / ldexp(1.0, t);
    for (int i = 0; i < t; i++)
        r *= r;
    return r;
}

/* CrypTen's iterations in double (approximations.py 34-52, 156-169, 178-204). */
static double cr_recip(double x)
{
    double y = 3 * ex_lim(1 - 2 * x, 8) + 0.003;
    for (int i = 0; i < 10; i++)
        y = 2 * y - x * y * y;
    return y;
}

static double cr_rsqrt(double x)
{
    double y = ex_lim(-(x / 2 + 0.2), 8) * 2.2 + 0.2 - x / 1024;
    for (int i = 0; i < 3; i++)
        y = y * (3 - x * y * y) / 2;
    return y;
}

/* exp on [-14, 0], reciprocal on ±[2^-4, 2^6], rsqrt on [2^-2, 2^6], N points each, on the
 * semi2k clear-text engine under the profile. Bounds (u = 2^-f, each local truncation off by
 * at most 2u, the two shares each rounded toward zero):
 *   exp: the limit's own error x²e^x/2^9 <= 4e^-2/2^9 = 1.06e-3; rounding: each squaring
 *        doubles the error so far (y <= 1) and adds 2u: at most 2^9·u = 2^(9-f) absolute.
 *   reciprocal: Newton's step is flat at its fixed point, so only the last step's roundings
 *        stay: y² (2u) times x, and the product's (2u): (2x + 2)·u absolute from CrypTen's
 *        iteration in double, which equals 1/x within 4e-8 relative on this range.
 *   rsqrt: CrypTen's three steps are not converged: 3.05e-3 relative at worst on this range
 *        (the double iteration on a 4,000-point grid); rounding in the last step ((x·y + y)·2u
 *        + 4u) plus the earlier steps' carried through a contraction of at most 1.5:
 *        (√x + 1/√x + 4)·3u absolute from the double iteration.
 * The largest errors against float go to worst[] (exp absolute, the others relative). */
static void crypten_errors(double worst[3])
{
    enum { N = 2048 };
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default("semi2k", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "crypten", &e), 0);
    op_program p;
    op_program_init(&p);
    static const char *const names[6] = {"x", "ex", "y", "ry", "s", "rs"};
    uint32_t t[6];
    for (int i = 0; i < 6; i++)
        t[i] = op_tensor_add(&p, names[i], OPT_TEMP, DOM_ARITH, 1, 1, N);
    op ex = {.kind = OP_EXP,
             .layer = -1,
             .group = -1,
             .batch = 1,
             .m = 1,
             .k = 1,
             .n = N,
             .in = {t[0], OP_NONE, OP_NONE},
             .out = t[1]};
    op rc = ex;
    rc.kind = OP_RECIPROCAL, rc.in[0] = t[2], rc.out = t[3];
    op rs = ex;
    rs.kind = OP_RSQRT, rs.in[0] = t[4], rs.out = t[5];
    ck_assert_int_ge(op_emit(&p, &ex), 0);
    ck_assert_int_ge(op_emit(&p, &rc), 0);
    ck_assert_int_ge(op_emit(&p, &rs), 0);
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, 2, 23, 0, &pe), 0);
    mpc_val v[6] = {{0}};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], N, DOM_ARITH), 0);
    int f = cfg.frac_bits;
    for (size_t i = 0; i < N; i++) {
        double r = (double)i / (N - 1);
        v[0].s[0][i] = fx_encode(-14.0 * r, f);
        double y = pow(2.0, -4.0 + 10.0 * r);
        v[2].s[0][i] = fx_encode(i % 2 ? -y : y, f);
        v[4].s[0][i] = fx_encode(pow(2.0, -2.0 + 8.0 * r), f);
    }
    for (size_t i = 0; i < p.n_ops; i++)
        ck_assert_msg(kern_exec(pe, &p, i, v, &e) == 0, "%s", e.msg);
    worst[0] = worst[1] = worst[2] = 0;
    double u = ldexp(1.0, -f);
    for (size_t i = 0; i < N; i++) {
        double x = fx_decode(v[0].s[0][i], f), y = fx_decode(v[2].s[0][i], f),
               s = fx_decode(v[4].s[0][i], f);
        double ge = fx_decode(v[1].s[0][i], f), gr = fx_decode(v[3].s[0][i], f),
               gs = fx_decode(v[5].s[0][i], f);
        double ay = fabs(y), cr = copysign(cr_recip(ay), y), cs = cr_rsqrt(s);
        ck_assert_msg(fabs(ge - ex_lim(x, 8)) <= ldexp(1.0, 9 - f), "exp(%g) = %g, CrypTen %g", x,
                      ge, ex_lim(x, 8));
        ck_assert_msg(fabs(ge - exp(x)) <= 1.06e-3 + ldexp(1.0, 9 - f), "exp(%g) = %g", x, ge);
        ck_assert_msg(fabs(cr * y - 1) <= 4e-8, "CrypTen's 1/%g = %g", y, cr);
        ck_assert_msg(fabs(gr - cr) <= (2 * ay + 2) * u, "1/%g = %g, CrypTen %g", y, gr, cr);
        ck_assert_msg(fabs(cs * sqrt(s) - 1) <= 3.05e-3, "CrypTen's 1/sqrt(%g) = %g", s, cs);
        ck_assert_msg(fabs(gs - cs) <= (sqrt(s) + 1 / sqrt(s) + 4) * 3 * u,
                      "1/sqrt(%g) = %g, CrypTen %g", s, gs, cs);
        worst[0] = fmax(worst[0], fabs(ge - exp(x)));
        worst[1] = fmax(worst[1], fabs(gr * y - 1));
        worst[2] = fmax(worst[2], fabs(gs * sqrt(s) - 1));
    }
    for (int i = 0; i < 6; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}

START_TEST(test_crypten_accuracy)
{
    double w[3];
    crypten_errors(w);
    /* reciprocal relative: (2x + 2)·u·x at x = 64 is 6.3e-2 at f = 18: fixed point, not the
     * iteration, limits CrypTen's 1/x for large x */
    ck_assert(w[0] <= 1.06e-3 + ldexp(1.0, -9));
    ck_assert(w[2] <= 3.05e-3 + 1e-3);
    if (getenv("CK_VERBOSE_ERRORS"))
        printf("crypten: exp %.3g abs, reciprocal %.3g rel, rsqrt %.3g rel\n", w[0], w[1], w[2]);
}
END_TEST

/* Softmax under the profile (CrypTen's: the row max by its tree and pairwise argmax, exp, the
 * Newton reciprocal of the row sum) on 16 rows of 64 scores in [-12, 12], against CrypTen's
 * algorithm in double (the limit exp, an exact reciprocal: the Newton steps converge on row sums
 * in [1, 64]) within 3e-3: each exp within 2^(9-f) = 1.95e-3 of its iteration (above), the sum's
 * error shared by the row, the reciprocal's rounding (2s + 2)·u absolute; and against float
 * within 4e-3 (the limit exp's 1.06e-3 at most, divided by a row sum >= 1, added). */
START_TEST(test_crypten_softmax_accuracy)
{
    enum { R = 16, L = 64 };
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default("semi2k", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "crypten", &e), 0);
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, R, L);
    uint32_t z = op_tensor_add(&p, "z", OPT_TEMP, DOM_ARITH, 1, R, L);
    op sm = {.kind = OP_SOFTMAX,
             .layer = -1,
             .group = -1,
             .batch = 1,
             .m = R,
             .k = 1,
             .n = L,
             .iarg = -1,
             .in = {x, OP_NONE, OP_NONE},
             .out = z};
    ck_assert_int_ge(op_emit(&p, &sm), 0);
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, 2, 5, 0, &pe), 0);
    mpc_val v[2] = {{0}};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], R * L, DOM_ARITH), 0);
    double xs[R * L];
    uint64_t s = 99;
    for (size_t i = 0; i < R * L; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = -12.0 + 24.0 * (double)(s >> 11) / 9007199254740992.0;
        v[0].s[0][i] = fx_encode(xs[i], cfg.frac_bits);
        xs[i] = fx_decode(v[0].s[0][i], cfg.frac_bits);
    }
    ck_assert_msg(kern_exec(pe, &p, 0, v, &e) == 0, "%s", e.msg);
    double worst[2] = {0, 0};
    for (size_t r = 0; r < R; r++) {
        double mx = -1e300, sum = 0, csum = 0;
        for (size_t j = 0; j < L; j++)
            mx = fmax(mx, xs[r * L + j]);
        for (size_t j = 0; j < L; j++) {
            sum += exp(xs[r * L + j] - mx);
            csum += ex_lim(xs[r * L + j] - mx, 8);
        }
        for (size_t j = 0; j < L; j++) {
            double want = exp(xs[r * L + j] - mx) / sum;
            double cr = ex_lim(xs[r * L + j] - mx, 8) / csum;
            double got = fx_decode(v[1].s[0][r * L + j], cfg.frac_bits);
            ck_assert_msg(fabs(got - cr) <= 3e-3, "softmax %g, CrypTen %g", got, cr);
            ck_assert_msg(fabs(got - want) <= 4e-3, "softmax %g, float %g", got, want);
            worst[0] = fmax(worst[0], fabs(got - cr));
            worst[1] = fmax(worst[1], fabs(got - want));
        }
    }
    if (getenv("CK_VERBOSE_ERRORS"))
        printf("crypten softmax: %.3g from CrypTen's algorithm, %.3g from float\n", worst[0],
               worst[1]);
    for (int i = 0; i < 2; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}
END_TEST

static double cr_sigmoid(double x)
{
    double d = ex_lim(-fabs(x), 8) + 1, y = 0.75;
    for (int i = 0; i < 3; i++)
        y = 2 * y - y * y * d;
    return x >= 0 ? y : 1 - y;
}

/* CrypTen's pow (power.py 16-45) in double with a first-order bound *err on its fixed-point
 * error (inputs off by ex; each truncated product off by at most 2u more): odd p takes
 * (x²·x)^((p − 1)/2), which is x^p only for p = 3 (x^6 for p = 5, x^9 for 7, ...). */
static double cr_pow(double x, double ex, int p, double u, double *err)
{
    if (p == 1) {
        *err = ex;
        return x;
    }
    double s = x * x, es = 2 * fabs(x) * ex + 2 * u;
    if (p % 2 == 0)
        return cr_pow(s, es, p / 2, u, err);
    return cr_pow(s * x, fabs(s) * ex + fabs(x) * es + 2 * u, (p - 1) / 2, u, err);
}

/* GeLU as CrypTen computes it (its erf series with its pow), and a bound *err on the fixed-point
 * error of k_gelu_cr: each public product's constant encoded within u/2, each truncation 2u. */
static double cr_gelu(double x, double u, double *err)
{
    double r = 0.70710678118654752, uu = x * r, eu = fabs(x) * u / 2 + 2 * u, o = uu, eo = eu;
    double fact = 1;
    for (int n = 1; n <= 8; n++) {
        double ep, mult;
        fact *= n;
        mult = (n % 2 ? -1.0 : 1.0) / (fact * (2 * n + 1));
        double pw = cr_pow(uu, eu, 2 * n + 1, u, &ep);
        o += mult * pw;
        eo += fabs(mult) * ep + fabs(pw) * u / 2 + 2 * u;
    }
    double c = 2 / sqrt(M_PI), g = 1 + o * c;
    double eg = c * eo + fabs(o) * u / 2 + 2 * u;
    *err = 0.5 * (fabs(x) * eg + 2 * u) + 2 * u;
    return 0.5 * x * g;
}

/* GeLU on [-2, 2] and SiLU on [-8, 8] under the profile on the semi2k clear-text engine,
 * against CrypTen's functions in double and against float. GeLU: CrypTen's erf series uses its
 * pow, whose odd powers above 3 are not x^p (cr_pow), so CrypTen's GeLU is GeLU only near 0:
 * within 2.1e-4 of float on [-0.5, 0.5] (1.7e-2 on [-1, 1], 2.07 at ±2: the series in double on
 * a 4,000-point grid); the kernel is within cr_gelu's first-order fixed-point bound of it.
 * SiLU: CrypTen's sigmoid is within 1.96e-3 of σ (three Newton steps from 0.75), SiLU within
 * 2.4e-3 on [-8, 8] (the same grid); fixed point: the exp within 2^9·u (above), each Newton
 * step damping what comes in (|∂y'/∂y| = |2 − 2yd| <= 1) and adding 2u + 2·2u·2, the where
 * products exact, x times it: (|x| + 1)·(2^9 + 24)·u. */
START_TEST(test_crypten_activation_accuracy)
{
    enum { N = 2048 };
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default("semi2k", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "crypten", &e), 0);
    op_program p;
    op_program_init(&p);
    uint32_t t[4];
    static const char *const names[4] = {"x", "g", "y", "s"};
    for (int i = 0; i < 4; i++)
        t[i] = op_tensor_add(&p, names[i], OPT_TEMP, DOM_ARITH, 1, 1, N);
    op g = {.kind = OP_GELU,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = 1,
            .k = 1,
            .n = N,
            .in = {t[0], OP_NONE, OP_NONE},
            .out = t[1]};
    op sl = g;
    sl.kind = OP_SILU, sl.in[0] = t[2], sl.out = t[3];
    ck_assert_int_ge(op_emit(&p, &g), 0);
    ck_assert_int_ge(op_emit(&p, &sl), 0);
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, 2, 29, 0, &pe), 0);
    mpc_val v[4] = {{0}};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], N, DOM_ARITH), 0);
    int f = cfg.frac_bits;
    for (size_t i = 0; i < N; i++) {
        double r = (double)i / (N - 1);
        v[0].s[0][i] = fx_encode(-2.0 + 4.0 * r, f);
        v[2].s[0][i] = fx_encode(-8.0 + 16.0 * r, f);
    }
    for (size_t i = 0; i < p.n_ops; i++)
        ck_assert_msg(kern_exec(pe, &p, i, v, &e) == 0, "%s", e.msg);
    double u = ldexp(1.0, -f), worst[4] = {0};
    for (size_t i = 0; i < N; i++) {
        double x = fx_decode(v[0].s[0][i], f), y = fx_decode(v[2].s[0][i], f);
        double gg = fx_decode(v[1].s[0][i], f), gs = fx_decode(v[3].s[0][i], f);
        double fg = 0.5 * x * (1 + erf(x / sqrt(2.0))), fs = y / (1 + exp(-y));
        double sil_rnd = (fabs(y) + 1) * (512 + 24) * u, ge, cg = cr_gelu(x, u, &ge);
        ck_assert_msg(fabs(gg - cg) <= ge, "gelu(%g) = %g, CrypTen %g", x, gg, cg);
        if (fabs(x) <= 0.5)
            ck_assert_msg(fabs(gg - fg) <= 2.1e-4 + ge, "gelu(%g) = %g, float %g", x, gg, fg);
        ck_assert_msg(fabs(gs - y * cr_sigmoid(y)) <= sil_rnd, "silu(%g) = %g, CrypTen %g", y, gs,
                      y * cr_sigmoid(y));
        ck_assert_msg(fabs(gs - fs) <= 2.4e-3 + sil_rnd, "silu(%g) = %g, float %g", y, gs, fs);
        worst[0] = fmax(worst[0], fabs(gg - cg));
        if (fabs(x) <= 0.5)
            worst[1] = fmax(worst[1], fabs(gg - fg));
        worst[2] = fmax(worst[2], fabs(gs - y * cr_sigmoid(y)));
        worst[3] = fmax(worst[3], fabs(gs - fs));
    }
    if (getenv("CK_VERBOSE_ERRORS"))
        printf("crypten gelu: %.3g from CrypTen's, %.3g from float on [-0.5, 0.5]; silu: %.3g, "
               "%.3g\n",
               worst[0], worst[1], worst[2], worst[3]);
    for (int i = 0; i < 4; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}
END_TEST

/* Equality, the max of two, max and argmax along rows, sort and top-k under the profile on the
 * semi2k clear-text engine (random share components: real carries), on small integers with many
 * ties: eq, the maxima and the sort exact; the argmax one-hot on a maximum, the first of tied
 * maxima (CrypTen's weighted_index draws the tied one at random; the kernel's draw is public
 * zero bits with CrypTen's messages); each top-k row one-hot, the k distinct and their values
 * the k largest. The top-k rule (kern_topk_cr_argmaxes) at its boundaries: rows of 64 take two
 * argmaxes (2 · 78 rounds) but sort for three (217 rounds), rows of 16 one (58 against 107). */
enum { SR = 8, SL = 16 };

static double sel_val(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)((*s >> 33) % 7) - 3.0;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

START_TEST(test_crypten_select_exact)
{
    ck_assert_int_eq(kern_topk_cr_argmaxes(64, 2), 1);
    ck_assert_int_eq(kern_topk_cr_argmaxes(64, 3), 0);
    ck_assert_int_eq(kern_topk_cr_argmaxes(16, 1), 1);
    ck_assert_int_eq(kern_topk_cr_argmaxes(16, 2), 0);
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default("semi2k", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "crypten", &e), 0);
    int f = cfg.frac_bits;
    op_program p;
    op_program_init(&p);
    /* x, y: SR rows of SL; outputs: eq, max2 (rows of two), max, argmax, sort, top-1, top-3 */
    uint32_t tx = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, SR, SL);
    uint32_t ty = op_tensor_add(&p, "y", OPT_TEMP, DOM_ARITH, 1, SR, SL);
    uint32_t to[7];
    static const char *const nm[7] = {"eq", "m2", "mx", "am", "so", "t1", "t3"};
    static const uint32_t rows[7] = {SR, SR * SL / 2, SR, SR, SR, SR, 3 * SR};
    static const uint32_t cols[7] = {SL, 1, 1, SL, SL, SL, SL};
    for (int i = 0; i < 7; i++)
        to[i] = op_tensor_add(&p, nm[i], OPT_TEMP, DOM_ARITH, 1, rows[i], cols[i]);
    op base = {.layer = -1, .group = -1, .batch = 1, .m = SR, .k = 1, .n = SL,
               .in = {tx, OP_NONE, OP_NONE}};
    op q[7];
    for (int i = 0; i < 7; i++)
        q[i] = base, q[i].out = to[i];
    q[0].kind = OP_EQ, q[0].in[1] = ty;
    q[1].kind = OP_MAX, q[1].m = SR * SL / 2, q[1].n = 2;
    q[2].kind = OP_MAX;
    q[3].kind = OP_ARGMAX;
    q[4].kind = OP_SORT, q[4].iarg = 1;
    q[5].kind = OP_TOPK, q[5].iarg = 1;
    q[6].kind = OP_TOPK, q[6].iarg = 3;
    for (int i = 0; i < 7; i++)
        ck_assert_int_ge(op_emit(&p, &q[i]), 0);
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, 2, 41, 0, &pe), 0);
    mpc_val v[9] = {{0}};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], SR * SL, DOM_ARITH), 0);
    double xs[SR * SL], ys[SR * SL];
    uint64_t s = 7;
    for (size_t i = 0; i < SR * SL; i++) {
        xs[i] = sel_val(&s), ys[i] = sel_val(&s);
        v[0].s[0][i] = fx_encode(xs[i], f), v[1].s[0][i] = fx_encode(ys[i], f);
    }
    for (size_t i = 0; i < p.n_ops; i++)
        ck_assert_msg(kern_exec(pe, &p, i, v, &e) == 0, "%s", e.msg);
    const uint64_t *eq = v[2].s[0], *m2 = v[3].s[0], *mx = v[4].s[0], *am = v[5].s[0];
    const uint64_t *so = v[6].s[0], *t1 = v[7].s[0], *t3 = v[8].s[0];
    for (size_t i = 0; i < SR * SL; i++)
        ck_assert_uint_eq(eq[i], xs[i] == ys[i]);
    for (size_t i = 0; i < SR * SL / 2; i++)
        ck_assert_uint_eq(m2[i], fx_encode(fmax(xs[2 * i], xs[2 * i + 1]), f));
    for (size_t r = 0; r < SR; r++) {
        const double *x = xs + r * SL;
        double srt[SL], best = x[0];
        size_t first = 0;
        for (size_t j = 0; j < SL; j++) {
            srt[j] = x[j];
            if (x[j] > best)
                best = x[j], first = j;
        }
        qsort(srt, SL, sizeof *srt, cmp_desc);
        ck_assert_uint_eq(mx[r], fx_encode(best, f));
        for (size_t j = 0; j < SL; j++) {
            ck_assert_uint_eq(am[r * SL + j], j == first);
            ck_assert_uint_eq(so[r * SL + j], fx_encode(srt[j], f));
            ck_assert_uint_eq(t1[r * SL + j], j == first);
        }
        int seen[SL] = {0};
        double got[3];
        for (size_t q3 = 0; q3 < 3; q3++) {
            int ones = 0;
            for (size_t j = 0; j < SL; j++) {
                uint64_t b = t3[(r * 3 + q3) * SL + j];
                ck_assert(b <= 1);
                if (b)
                    ones++, seen[j]++, got[q3] = x[j];
            }
            ck_assert_int_eq(ones, 1);
        }
        for (size_t j = 0; j < SL; j++)
            ck_assert_int_le(seen[j], 1);
        qsort(got, 3, sizeof *got, cmp_desc);
        for (int q3 = 0; q3 < 3; q3++)
            ck_assert(got[q3] == srt[q3]);
    }
    for (int i = 0; i < 9; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}
END_TEST

/* The profile where results are: list protocols --costs --compat crypten prints semi2k/crypten
 * and says why aby3 has none; cost's header names it, cost refuses aby3 under it, and a scenario
 * that asks for it on aby3 is refused at the key with its file:line:col and nothing written. */
START_TEST(test_crypten_cli)
{
    char out[65536];
    th_cli_expect(out, sizeof out, 0, "semi2k/crypten (2 parties + dealer)",
                  "list protocols --costs --compat crypten -n 64");
    ck_assert_ptr_nonnull(strstr(out, "compat: crypten has no aby3 profile"));
    ck_assert_ptr_null(strstr(out, "aby3/crypten"));
    /* lt: 432 B per element in 8 rounds, 216 B a party */
    ck_assert_ptr_nonnull(strstr(out, "| lt                       |      8 |        13824 |"));
    th_cli_expect(out, sizeof out, 0, "semi2k/crypten",
                  "cost -m stories260K -p semi2k -n lan -k 64 --set compat=crypten");
    th_cli_expect(out, sizeof out, 2, "compat: crypten has no aby3 profile",
                  "cost -m stories260K -p aby3 -n lan -k 64 --set compat=crypten");
    /* the route CrypTen's missing top-k takes, said in the header: mpcache's two levels, the
     * top 4 of 8 and 3 of 16 clusters in each of four layers, both by the sort (4 · 56 > 67
     * and 3 · 58 > 107 rounds, kern_topk_cr_argmaxes) */
    th_cli_expect(out, sizeof out, 0, "top-k (CrypTen has none): 8 ops by the odd-even merge sort",
                  "cost -m stories260K -p semi2k -n lan -k 256 --policy mpcache --set compat=crypten");
    const char *scn = testdir_path(&td, "s.yaml");
    FILE *f = fopen(scn, "w");
    ck_assert_ptr_nonnull(f);
    fputs("format: 1\nname: t\nmodel: stories260K\nprotocol: {name: aby3, compat: crypten}\n"
          "network: lan\ntrace: {source: synth}\n"
          "workload: {prompt_len: 8, decode_len: 2, prefill_in_mpc: false}\npolicies:\n  - full\n",
          f);
    fclose(f);
    char want[600];
    snprintf(want, sizeof want, "%s:4:32: error: compat: crypten has no aby3 profile", scn);
    const char *odir = testdir_path(&td, "out");
    th_cli_expect(out, sizeof out, 2, want, "run %s -o %s", scn, odir);
    /* the hint lists the profiles aby3 has (kv_compat_tab: crypten's names semi2k alone) */
    ck_assert_msg(strstr(out, "hint: compat: one of native, spu (aby3's profiles)"), "%s", out);
    char ls[256];
    snprintf(ls, sizeof ls, "test -e %s", odir);
    ck_assert_int_ne(th_sh(ls, NULL, 0), 0);
}
END_TEST

Suite *crypten_suite(void)
{
    Suite *s = suite_create("crypten");
    TCase *tc = th_case(s, "profile", 60);
    TH_TESTS(tc, test_crypten_profile, test_crypten_accuracy, test_crypten_softmax_accuracy,
             test_crypten_activation_accuracy, test_crypten_select_exact);
    TCase *cli = th_case(s, "cli", 60);
    TESTDIR_USE(cli);
    TH_TESTS(cli, test_crypten_cli);
    return s;
}
