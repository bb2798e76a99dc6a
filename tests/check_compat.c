/* check_compat.c — framework cost profiles (protocol key compat): each profile's per-element
 * bytes and rounds against the counts derived from the framework's source
 * (tests/data/compat-counts.tsv, from PRIMITIVES.md), the option's parsing, and that native
 * is the configuration without the key. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/program/eng_plain.h"
#include "protocols/program/kern.h"
#include "protocols/program/proto.h"

enum { N_ELEM = 64 };

typedef struct counted {
    uint64_t bytes, rounds;
} counted;

static int kind_of(const char *name)
{
    static const struct {
        const char *name;
        int kind;
    } k[] = {{"trunc", OP_TRUNC},
             {"exp", OP_EXP},
             {"lt", OP_LT},
             {"eq", OP_EQ},
             {"select", OP_SELECT},
             {"reciprocal", OP_RECIPROCAL},
             {"gelu", OP_GELU},
             {"max2", OP_MAX},
             {"rsqrt", OP_RSQRT},
             {"softmax64", OP_SOFTMAX},
             {"silu", OP_SILU},
             {"layernorm64", OP_LAYERNORM},
             {"rmsnorm64", OP_RMSNORM}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++)
        if (!strcmp(k[i].name, name))
            return k[i].kind;
    return -1;
}

/* One element-wise op of `kind` on N_ELEM elements under protocol pname with compat profile:
 * online bytes summed over every party, and rounds. */
static counted cost_ew(const char *pname, const char *profile, int kind)
{
    op_program p;
    op_program_init(&p);
    int mx = kind == OP_MAX; /* max2: N_ELEM rows of two, one compare-and-select each */
    /* softmax64, layernorm64, rmsnorm64: one row of N_ELEM (the table gives the row's bytes);
     * the norms with a secret gain and bias (weights) */
    int nm = kind == OP_LAYERNORM || kind == OP_RMSNORM;
    uint32_t x = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, mx ? N_ELEM : 1, mx ? 2 : N_ELEM);
    uint32_t o = op_tensor_add(&p, "o", OPT_TEMP, DOM_ARITH, 1, mx ? N_ELEM : 1, mx ? 1 : N_ELEM);
    uint32_t g = op_tensor_add(&p, "g", OPT_WEIGHT, DOM_ARITH, 1, 1, N_ELEM);
    uint32_t b = op_tensor_add(&p, "b", OPT_WEIGHT, DOM_ARITH, 1, 1, N_ELEM);
    op q = {.kind = (uint16_t)kind,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = mx ? N_ELEM : 1,
            .k = 1,
            .n = mx ? 2 : N_ELEM,
            .iarg = kind == OP_SOFTMAX ? -1 : 0, /* softmax: no causal mask */
            .in = {x,
                   nm                                                    ? g
                   : kind == OP_LT || kind == OP_EQ || kind == OP_SELECT ? x
                                                                         : OP_NONE,
                   nm                  ? b
                   : kind == OP_SELECT ? x
                                       : OP_NONE},
            .out = o};
    ck_assert_int_ge(op_emit(&p, &q), 0);
    const proto *pr = proto_find(pname);
    ck_assert_ptr_nonnull(pr);
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(pname, &cfg, &e), 0);
    char prof[16]; /* "spu:pade": the profile, then its exp mode */
    snprintf(prof, sizeof prof, "%s", profile);
    char *mode = strchr(prof, ':');
    if (mode)
        *mode++ = '\0';
    ck_assert_msg(proto_cfg_set(&cfg, "compat", prof, &e) == 0, "%s", e.msg);
    if (mode)
        ck_assert_msg(proto_cfg_set(&cfg, "exp", mode, &e) == 0, "%s", e.msg);
    cost_log lg;
    cost_log_init(&lg, pr->n_parties);
    ck_assert_msg(proto_cost_program(pr, &cfg, &p, &lg, &e) == 0, "%s", e.msg);
    cost_totals t = {0};
    for (size_t i = 0; i < lg.n; i++)
        cost_totals_add_round(&t, &lg.r[i], lg.n_parties);
    counted c = {0, t.rounds};
    for (int s = 0; s < pr->n_parties; s++)
        c.bytes += t.bytes_sent[s];
    cost_log_free(&lg);
    op_program_free(&p);
    return c;
}

/* One op of kind on rows × cols (TOPK: the top k; ONEHOT: rows indices over cols; MAX: one
 * value a row) under pname with the profile: bytes summed over the parties, and rounds. */
static counted cost_rows_k(const char *pname, const char *profile, int kind, uint32_t rows,
                           uint32_t cols, uint32_t k)
{
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, rows, kind == OP_ONEHOT ? 1 : cols);
    uint32_t o = op_tensor_add(&p, "o", OPT_TEMP, DOM_ARITH, 1, kind == OP_TOPK ? rows * k : rows,
                               kind == OP_MAX ? 1 : cols);
    op q = {.kind = (uint16_t)kind,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = rows,
            .k = 1,
            .n = cols,
            .iarg = (int32_t)k,
            .in = {x, OP_NONE, OP_NONE},
            .out = o};
    ck_assert_int_ge(op_emit(&p, &q), 0);
    const proto *pr = proto_find(pname);
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(pname, &cfg, &e), 0);
    ck_assert_msg(proto_cfg_set(&cfg, "compat", profile, &e) == 0, "%s", e.msg);
    cost_log lg;
    cost_log_init(&lg, pr->n_parties);
    ck_assert_msg(proto_cost_program(pr, &cfg, &p, &lg, &e) == 0, "%s", e.msg);
    cost_totals t = {0};
    for (size_t i = 0; i < lg.n; i++)
        cost_totals_add_round(&t, &lg.r[i], lg.n_parties);
    counted c = {0, t.rounds};
    for (int s = 0; s < pr->n_parties; s++)
        c.bytes += t.bytes_sent[s];
    cost_log_free(&lg);
    op_program_free(&p);
    return c;
}

static counted cost_rows(const char *pname, const char *profile, int kind, uint32_t rows,
                         uint32_t cols)
{
    return cost_rows_k(pname, profile, kind, rows, cols, 1);
}

/* qs_cmp: one QuickSelect comparison (the pivot against one element, its bit opened). A top-1
 * of N_ELEM rows of two makes exactly one comparison per row in one step, so it is the top-k
 * less its shuffle of 2·2·N_ELEM words (2 rounds; PRIMITIVES.md shuffle rows: semi2k 8 B a
 * word in each of its two rounds, aby3 4 × 8 B) and its output one-hot of N_ELEM indices over
 * two columns. */
static counted cost_qs_cmp(const char *pname, const char *profile)
{
    counted t = cost_rows(pname, profile, OP_TOPK, N_ELEM, 2);
    counted h = cost_rows(pname, profile, OP_ONEHOT, N_ELEM, 2);
    uint64_t words = 2 * 2 * N_ELEM, shuf = (strcmp(pname, "aby3") ? 16 : 32) * words;
    ck_assert_uint_ge(t.bytes, h.bytes + shuf);
    return (counted){t.bytes - h.bytes - shuf, t.rounds - h.rounds - 2};
}

START_TEST(test_profile_counts)
{
    FILE *f = fopen(th_data_path("tests/data/compat-counts.tsv"), "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        char prof[16], pname[16], opn[16];
        unsigned long long bytes, rounds;
        if (line[0] == '#' ||
            sscanf(line, "%15s %15s %15s %llu %llu", prof, pname, opn, &bytes, &rounds) != 5)
            continue;
        /* qs_cmp: one QuickSelect comparison; sort2: a sort of N_ELEM rows of two, one
         * compare-exchange per row; max64, argmax64: one row of N_ELEM; topkKofN: the top K
         * of one row of N (the row's bytes) */
        int qs = !strcmp(opn, "qs_cmp"), so = !strcmp(opn, "sort2");
        int am = !strcmp(opn, "argmax64"), m64 = !strcmp(opn, "max64");
        unsigned tk = 0, tn = 0;
        int top = sscanf(opn, "topk%uof%u", &tk, &tn) == 2;
        int kind = qs    ? OP_TOPK
                   : so  ? OP_SORT
                   : am  ? OP_ARGMAX
                   : m64 ? OP_MAX
                   : top ? OP_TOPK
                         : kind_of(opn);
        ck_assert_msg(kind >= 0, "compat-counts.tsv: unknown op '%s'", opn);
        counted c = qs          ? cost_qs_cmp(pname, prof)
                    : so        ? cost_rows(pname, prof, OP_SORT, N_ELEM, 2)
                    : am || m64 ? cost_rows(pname, prof, kind, 1, N_ELEM)
                    : top       ? cost_rows_k(pname, prof, OP_TOPK, 1, tn, tk)
                                : cost_ew(pname, prof, kind);
        uint64_t per = kind == OP_SOFTMAX || kind == OP_LAYERNORM || kind == OP_RMSNORM || am ||
                               m64 || top
                           ? 1
                           : N_ELEM; /* a row's bytes */
        ck_assert_msg(c.bytes == bytes * per && c.rounds == rounds,
                      "%s %s %s: %llu B in %llu rounds, derived %llu B in %llu", prof, pname, opn,
                      (unsigned long long)(c.bytes / per), (unsigned long long)c.rounds, bytes,
                      rounds);
        rows++;
    }
    fclose(f);
    ck_assert_int_ge(rows, 4);
}
END_TEST

/* compat: native is the configuration without the key (today's constructions: aby3's
 * truncation pair is 43 B at f = 18, PRIMITIVES.md); an unknown profile is refused with the
 * names; spu resolves to its variants whatever the family keys say. */
START_TEST(test_native_default)
{
    for (int p = 0; p < 2; p++) {
        const char *pname = p ? "aby3" : "semi2k";
        proto_cfg d, n;
        errbuf e;
        ck_assert_int_eq(proto_cfg_default(pname, &d, &e), 0);
        n = d;
        ck_assert_int_eq(proto_cfg_set(&n, "compat", "native", &e), 0);
        ck_assert_int_eq(memcmp(&d, &n, sizeof d), 0);
        ck_assert_int_ne(proto_cfg_set(&n, "compat", "spdz", &e), 0);
        ck_assert_ptr_nonnull(strstr(e.msg, "'native', 'spu' or 'crypten'"));
        kern_conf kv;
        ck_assert_int_eq(kern_configure(&d, &kv), 0);
        ck_assert_int_eq(kv.compat, KV_COMPAT_NATIVE);
        ck_assert_int_eq(kv.trunc, KV_TRUNC_PAIR);
        ck_assert_int_eq(proto_cfg_set(&n, "exp", "pow2", &e), 0);
        ck_assert_int_eq(proto_cfg_set(&n, "compat", "spu", &e), 0);
        ck_assert_int_eq(kern_configure(&n, &kv), 0);
        ck_assert_int_eq(kv.compat, KV_COMPAT_SPU);
        ck_assert_int_eq(kv.trunc, KV_TRUNC_SPU);
        ck_assert_int_eq(kv.exp, KV_EXP_TAYLOR);
    }
    counted t = cost_ew("aby3", "native", OP_TRUNC);
    ck_assert_uint_eq(t.bytes, 43 * N_ELEM);
    ck_assert_uint_eq(t.rounds, 2);
}
END_TEST

/* SPU's msb (msb: spu) is exact: lt against the truth on both sides of 0, at the ends of the
 * range and at random, and max of two (compare, then mul_a1b on the boolean bit), on the
 * clear-text engine that behaves as each protocol (random share components: real carries). */
START_TEST(test_spu_msb_exact)
{
    enum { N = 4096 };
    for (int np = 2; np <= 3; np++) {
        proto_cfg cfg;
        errbuf e;
        ck_assert_int_eq(proto_cfg_default(np == 2 ? "semi2k" : "aby3", &cfg, &e), 0);
        ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "spu", &e), 0);
        op_program p;
        op_program_init(&p);
        uint32_t tx = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, 1, N);
        uint32_t ty = op_tensor_add(&p, "y", OPT_TEMP, DOM_ARITH, 1, 1, N);
        uint32_t tl = op_tensor_add(&p, "l", OPT_TEMP, DOM_ARITH, 1, 1, N);
        uint32_t tp = op_tensor_add(&p, "p", OPT_TEMP, DOM_ARITH, 1, N / 2, 2);
        uint32_t tm = op_tensor_add(&p, "m", OPT_TEMP, DOM_ARITH, 1, N / 2, 1);
        op lt = {.kind = OP_LT,
                 .layer = -1,
                 .group = -1,
                 .batch = 1,
                 .m = 1,
                 .k = 1,
                 .n = N,
                 .in = {tx, ty, OP_NONE},
                 .out = tl};
        op mx = {.kind = OP_MAX,
                 .layer = -1,
                 .group = -1,
                 .batch = 1,
                 .m = N / 2,
                 .k = 1,
                 .n = 2,
                 .in = {tp, OP_NONE, OP_NONE},
                 .out = tm};
        ck_assert_int_ge(op_emit(&p, &lt), 0);
        ck_assert_int_ge(op_emit(&p, &mx), 0);
        eng *pe;
        ck_assert_int_eq(eng_plain_new(&cfg, np, 7, 0, &pe), 0);
        ck_assert_int_eq(pe->kv.msb, KV_MSB_SPU);
        mpc_val v[5] = {{0}};
        for (int t = 0; t < 5; t++)
            ck_assert_int_eq(pe->vt->alloc(pe, &v[t], t == 4 ? N / 2 : N, DOM_ARITH), 0);
        uint64_t s = 12345;
        for (size_t i = 0; i < N; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t r = s ^ (s >> 29), a, b;
            switch (i % 4) {
            case 0: a = r >> 2, b = (r << 7) >> 2; break; /* both in [0, 2^62) */
            case 1: a = (uint64_t) - (int64_t)(r >> 3), b = r >> 3; break;
            case 2: a = r >> 40, b = (r >> 40) + (i & 8 ? 1 : 0); break; /* equal or one apart */
            default:
                a = (uint64_t)(1ll << 62) - 1 - (r & 3), b = (uint64_t) - (1ll << 62) + (r & 3);
            }
            v[0].s[0][i] = a, v[1].s[0][i] = b;
        }
        for (size_t i = 0; i < N; i++) /* pairs (x[i], y[i - 1]) and (x[i + 1], ...) */
            v[3].s[0][i] = i & 1 ? v[1].s[0][i - 1] : v[0].s[0][i];
        for (size_t i = 0; i < p.n_ops; i++)
            ck_assert_msg(kern_exec(pe, &p, i, v, &e) == 0, "%s", e.msg);
        for (size_t i = 0; i < N; i++) {
            int64_t a = (int64_t)v[0].s[0][i], b = (int64_t)v[1].s[0][i];
            ck_assert_msg(v[2].s[0][i] == (uint64_t)(a < b), "np %d: [%lld < %lld] = %llu", np,
                          (long long)a, (long long)b, (unsigned long long)v[2].s[0][i]);
        }
        for (size_t i = 0; i < N / 2; i++) {
            int64_t a = (int64_t)v[3].s[0][2 * i], b = (int64_t)v[3].s[0][2 * i + 1];
            ck_assert_uint_eq(v[4].s[0][i], (uint64_t)(a > b ? a : b));
        }
        for (int t = 0; t < 5; t++)
            pe->vt->release(pe, &v[t]);
        eng_free(pe);
        op_program_free(&p);
    }
}
END_TEST

/* The profile's approximations against float on the clear-text engine that rounds as the
 * protocols do: exp (SPU's Taylor, t = 8) on [-14, 0] within 2e-3 absolute (kern.c: the
 * limit's own error and fixed-point rounding), reciprocal on [2^-4, 2^10] within
 * 1e-4/x + 2^(1-f) (SPU's Goldschmidt, two steps from 2.9142 − 2c: |e0|^4 <= 1.9e-5 relative,
 * plus the truncations), rsqrt on the same range within 5e-4 relative: SPU's polynomial on
 * [0.25, 0.5) errs by 8.2e-5, its integer c0 = 724 for 2^9·√2 by 1.1e-4 when e + f is even,
 * and the fixed-point powers of u (coefficients up to 50 on terms rounded to 2^-f) by about
 * 1.5e-4 (3.3e-4 measured on semi2k; aby3 runs bitdec, 1.6e-4). The largest errors seen are
 * in *worst (absolute exp, relative reciprocal with the unit, relative rsqrt). */
static void spu_errors(int np, double worst[3])
{
    enum { N = 2048 };
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(np == 2 ? "semi2k" : "aby3", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "spu", &e), 0);
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
    ck_assert_int_eq(eng_plain_new(&cfg, np, 11, 0, &pe), 0);
    mpc_val v[6] = {{0}};
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], N, DOM_ARITH), 0);
    for (size_t i = 0; i < N; i++) {
        v[0].s[0][i] = fx_encode(-14.0 * (double)i / (N - 1), cfg.frac_bits);
        v[2].s[0][i] = fx_encode(pow(2.0, -4.0 + 14.0 * (double)i / (N - 1)), cfg.frac_bits);
        v[4].s[0][i] = v[2].s[0][i];
    }
    for (size_t i = 0; i < p.n_ops; i++)
        ck_assert_msg(kern_exec(pe, &p, i, v, &e) == 0, "%s", e.msg);
    worst[0] = worst[1] = worst[2] = 0;
    double ulp = ldexp(1.0, 1 - cfg.frac_bits);
    for (size_t i = 0; i < N; i++) {
        double x = fx_decode(v[0].s[0][i], cfg.frac_bits),
               y = fx_decode(v[2].s[0][i], cfg.frac_bits);
        double de = fabs(fx_decode(v[1].s[0][i], cfg.frac_bits) - exp(x));
        double dr = fabs(fx_decode(v[3].s[0][i], cfg.frac_bits) - 1.0 / y);
        double ds = fabs(fx_decode(v[5].s[0][i], cfg.frac_bits) * sqrt(y) - 1.0);
        ck_assert_msg(de <= 2e-3, "np %d: exp(%g) off by %g", np, x, de);
        ck_assert_msg(dr <= 1e-4 / y + ulp, "np %d: 1/%g off by %g", np, y, dr);
        ck_assert_msg(ds <= 5e-4, "np %d: 1/sqrt(%g) off by %g relative", np, y, ds);
        worst[0] = fmax(worst[0], de);
        worst[1] = fmax(worst[1], dr * y);
        worst[2] = fmax(worst[2], ds);
    }
    for (int i = 0; i < 6; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}

START_TEST(test_spu_accuracy)
{
    double w[3];
    spu_errors(2 + _i, w);
}
END_TEST

/* Softmax under the profile (SPU's hack_softmax) against float on the clear-text engine:
 * 16 rows of 64 scores in [-12, 12], each output within 3e-3 absolute: the Taylor exp's
 * relative error (about x²/2^9 for t = 8 near the top of a row, where the weights are; 2e-3
 * absolute at most, above) divided by a row sum of at least 1 and shared with it, the scores
 * clipped below -14 (at most 63 · e^-14 = 5.2e-5 of the sum), the reciprocal's 1e-4 relative
 * (2.1e-3 measured on both protocols). */
static double spu_softmax_error(int np)
{
    enum { R = 16, L = 64 };
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(np == 2 ? "semi2k" : "aby3", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "spu", &e), 0);
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
    ck_assert_int_eq(eng_plain_new(&cfg, np, 5, 0, &pe), 0);
    mpc_val v[2] = {{0}};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], R * L, DOM_ARITH), 0);
    double xs[R * L];
    uint64_t s = 99;
    for (size_t i = 0; i < R * L; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = -12.0 + 24.0 * (double)(s >> 11) / 9007199254740992.0;
        v[0].s[0][i] = fx_encode(xs[i], cfg.frac_bits);
    }
    ck_assert_msg(kern_exec(pe, &p, 0, v, &e) == 0, "%s", e.msg);
    double worst = 0;
    for (size_t r = 0; r < R; r++) {
        double mx = -1e300, sum = 0;
        for (size_t j = 0; j < L; j++)
            mx = fmax(mx, xs[r * L + j]);
        for (size_t j = 0; j < L; j++)
            sum += exp(xs[r * L + j] - mx);
        for (size_t j = 0; j < L; j++) {
            double want = exp(xs[r * L + j] - mx) / sum;
            double got = fx_decode(v[1].s[0][r * L + j], cfg.frac_bits);
            ck_assert_msg(fabs(got - want) <= 3e-3, "np %d: softmax %g, float %g", np, got, want);
            worst = fmax(worst, fabs(got - want));
        }
    }
    for (int i = 0; i < 2; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
    return worst;
}

START_TEST(test_spu_softmax_accuracy) { ck_assert(spu_softmax_error(2 + _i) > 0); }
END_TEST

/* GeLU and SiLU under the profile (PUMA's hack_gelu, SPU's LLaMA hack_silu) on the clear-text
 * engine, on [-10, 10]: within 1e-3 of the same piecewise polynomials evaluated in double
 * with their coefficients rounded to f fraction bits as SPU encodes them (what is left: the
 * rounding of the powers and of each truncated term), and within the polynomials' own error
 * of the functions (0.0199 for GeLU, erf form, at the segment ends; 0.0719 for SiLU,
 * x/(1 + e^-x), at x = 4 where it jumps to x; both on a 1e-4 grid of [-10, 10]) plus the
 * coefficients' rounding, Σ |x|^i · 2^-(f+1) at the segments' ends (1.4e-3 for GeLU at 3,
 * 8.3e-3 for SiLU at 4), plus that 1e-3. */
static double piece(double x, const double t[3], const double *lo, int nlo, const double *mid,
                    int f)
{
    double r = 0;
    if (x < t[0])
        return 0;
    if (x < t[1]) {
        for (int i = nlo - 1; i >= 0; i--)
            r = r * x + fx_decode(fx_encode(lo[i], f), f);
        return r;
    }
    if (x > t[2])
        return x;
    for (int i = 6; i >= 0; i--)
        r = r * x + fx_decode(fx_encode(mid[i], f), f);
    return r;
}

START_TEST(test_spu_activation_accuracy)
{
    enum { N = 2048 };
    static const double gt[3] = {-4.0, -1.95, 3.0}, st[3] = {-8.0, -4.0, 4.0};
    static const double ga[4] = {-0.5054031199708174, -0.42226581151983866, -0.11807612951181953,
                                 -0.011034134030615728};
    static const double gb[7] = {0.008526321541038084,  0.5, 0.3603292692789629,   0.0,
                                 -0.037688200365904236, 0.0, 0.0018067462606141187};
    static const double sa[3] = {-0.3067541139982155, -0.0819767021525476, -0.0055465625580307};
    static const double sb[7] = {0.0085064025895951, 0.5, 0.2281430841728270, 0,
                                 -0.011113046708173, 0,   0.0002743776353465};
    int np = 2 + _i;
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(np == 2 ? "semi2k" : "aby3", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "spu", &e), 0);
    op_program p;
    op_program_init(&p);
    uint32_t t[3];
    for (int i = 0; i < 3; i++)
        t[i] = op_tensor_add(&p, i == 0 ? "x" : i == 1 ? "g" : "s", OPT_TEMP, DOM_ARITH, 1, 1, N);
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
    sl.kind = OP_SILU, sl.out = t[2];
    ck_assert_int_ge(op_emit(&p, &g), 0);
    ck_assert_int_ge(op_emit(&p, &sl), 0);
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, np, 13, 0, &pe), 0);
    mpc_val v[3] = {{0}};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], N, DOM_ARITH), 0);
    for (size_t i = 0; i < N; i++)
        v[0].s[0][i] = fx_encode(-10.0 + 20.0 * (double)i / (N - 1), cfg.frac_bits);
    for (size_t i = 0; i < p.n_ops; i++)
        ck_assert_msg(kern_exec(pe, &p, i, v, &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < N; i++) {
        double x = fx_decode(v[0].s[0][i], cfg.frac_bits);
        double gv = fx_decode(v[1].s[0][i], cfg.frac_bits);
        double sv = fx_decode(v[2].s[0][i], cfg.frac_bits);
        double gp = piece(x, gt, ga, 4, gb, cfg.frac_bits),
               sp = piece(x, st, sa, 3, sb, cfg.frac_bits);
        ck_assert_msg(fabs(gv - gp) <= 1e-3, "np %d: gelu(%g) = %g, polynomial %g", np, x, gv, gp);
        ck_assert_msg(fabs(sv - sp) <= 1e-3, "np %d: silu(%g) = %g, polynomial %g", np, x, sv, sp);
        ck_assert(fabs(gv - 0.5 * x * (1 + erf(x / sqrt(2.0)))) <= 0.0199 + 3e-3);
        ck_assert(fabs(sv - x / (1 + exp(-x))) <= 0.0719 + 1e-2);
    }
    for (int i = 0; i < 3; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}
END_TEST

/* LayerNorm (flax's fast variance) and RMSNorm under the profile against float on the
 * clear-text engine: 16 rows of 64 values in [-3, 3] plus a row offset in [-2, 2], gain in
 * [0.5, 1.5], bias in [-0.5, 0.5] (public), eps 1e-5; each output within 2e-3 absolute: the
 * rsqrt's 5e-4 relative (above) on normalised values up to about 3 (1.5e-3), plus the mean's
 * and variance's rounding (2^-f on a variance near 3) and mu2 − mu² losing a few bits to the
 * offset (measured: LayerNorm 5.8e-4 and 4.8e-4, RMSNorm 7.5e-4 and 6.4e-4, semi2k and aby3). */
START_TEST(test_spu_norm_accuracy)
{
    enum { R = 16, L = 64 };
    int np = 2 + _i;
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(np == 2 ? "semi2k" : "aby3", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "spu", &e), 0);
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, R, L);
    uint32_t g = op_tensor_add(&p, "g", OPT_PUBLIC, DOM_ARITH, 1, 1, L);
    uint32_t b = op_tensor_add(&p, "b", OPT_PUBLIC, DOM_ARITH, 1, 1, L);
    uint32_t ol = op_tensor_add(&p, "ol", OPT_TEMP, DOM_ARITH, 1, R, L);
    uint32_t orr = op_tensor_add(&p, "or", OPT_TEMP, DOM_ARITH, 1, R, L);
    op ln = {.kind = OP_LAYERNORM,
             .layer = -1,
             .group = -1,
             .batch = 1,
             .m = R,
             .k = 1,
             .n = L,
             .in = {x, g, b},
             .out = ol};
    op rn = ln;
    rn.kind = OP_RMSNORM, rn.in[2] = OP_NONE, rn.out = orr;
    ck_assert_int_ge(op_emit(&p, &ln), 0);
    ck_assert_int_ge(op_emit(&p, &rn), 0);
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, np, 17, 0, &pe), 0);
    mpc_val v[5] = {{0}};
    size_t sz[5] = {R * L, L, L, R * L, R * L};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], sz[i], DOM_ARITH), 0);
    double xs[R * L], gs[L], bs[L];
    uint64_t s = 4242;
#define U01()                                                   \
    ((s = s * 6364136223846793005ull + 1442695040888963407ull), \
     (double)(s >> 11) / 9007199254740992.0)
    for (size_t j = 0; j < L; j++) {
        gs[j] = 0.5 + U01(), bs[j] = U01() - 0.5;
        v[1].s[0][j] = fx_encode(gs[j], cfg.frac_bits);
        v[2].s[0][j] = fx_encode(bs[j], cfg.frac_bits);
    }
    for (size_t r = 0; r < R; r++) {
        double off = 4.0 * U01() - 2.0;
        for (size_t j = 0; j < L; j++) {
            xs[r * L + j] = off + 6.0 * U01() - 3.0;
            v[0].s[0][r * L + j] = fx_encode(xs[r * L + j], cfg.frac_bits);
            xs[r * L + j] = fx_decode(v[0].s[0][r * L + j], cfg.frac_bits);
        }
    }
#undef U01
    for (size_t i = 0; i < p.n_ops; i++)
        ck_assert_msg(kern_exec(pe, &p, i, v, &e) == 0, "%s", e.msg);
    for (size_t r = 0; r < R; r++) {
        double mu = 0, m2 = 0;
        for (size_t j = 0; j < L; j++)
            mu += xs[r * L + j] / L, m2 += xs[r * L + j] * xs[r * L + j] / L;
        double var = m2 - mu * mu;
        for (size_t j = 0; j < L; j++) {
            double xv = xs[r * L + j];
            double wl = (xv - mu) / sqrt(var + 1e-5) * gs[j] + bs[j];
            double wr = xv / sqrt(m2 + 1e-5) * gs[j];
            double gl = fx_decode(v[3].s[0][r * L + j], cfg.frac_bits);
            double gr = fx_decode(v[4].s[0][r * L + j], cfg.frac_bits);
            ck_assert_msg(fabs(gl - wl) <= 2e-3, "np %d: layernorm %g, float %g", np, gl, wl);
            ck_assert_msg(fabs(gr - wr) <= 2e-3, "np %d: rmsnorm %g, float %g", np, gr, wr);
        }
    }
    for (int i = 0; i < 5; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}
END_TEST

/* SPU's Padé exp (exp: pade under the profile) against float on the clear-text engine, x in
 * [-20, 10]: within 1.2e-4 relative plus 2^(2-f) absolute (SPU's degree-5 polynomial for 2^x
 * on [0, 1) errs by 8.6e-5 relative, measured on a 1e-5 grid; the fraction rounded to 2^-f
 * moves 2^x by 2.6e-6 relative; the powers' and the final truncations a few units, and below
 * 2^-f the result is those units). */
START_TEST(test_spu_pade_accuracy)
{
    enum { N = 2048 };
    int np = 2 + _i;
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(np == 2 ? "semi2k" : "aby3", &cfg, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "compat", "spu", &e), 0);
    ck_assert_int_eq(proto_cfg_set(&cfg, "exp", "pade", &e), 0);
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, 1, N);
    uint32_t y = op_tensor_add(&p, "y", OPT_TEMP, DOM_ARITH, 1, 1, N);
    op ex = {.kind = OP_EXP,
             .layer = -1,
             .group = -1,
             .batch = 1,
             .m = 1,
             .k = 1,
             .n = N,
             .in = {x, OP_NONE, OP_NONE},
             .out = y};
    ck_assert_int_ge(op_emit(&p, &ex), 0);
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, np, 19, 0, &pe), 0);
    ck_assert_int_eq(pe->kv.exp, KV_EXP_PADE);
    mpc_val v[2] = {{0}};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pe->vt->alloc(pe, &v[i], N, DOM_ARITH), 0);
    for (size_t i = 0; i < N; i++)
        v[0].s[0][i] = fx_encode(-20.0 + 30.0 * (double)i / (N - 1), cfg.frac_bits);
    ck_assert_msg(kern_exec(pe, &p, 0, v, &e) == 0, "%s", e.msg);
    double ulp = ldexp(1.0, 1 - cfg.frac_bits);
    for (size_t i = 0; i < N; i++) {
        double xv = fx_decode(v[0].s[0][i], cfg.frac_bits), w = exp(xv);
        double got = fx_decode(v[1].s[0][i], cfg.frac_bits);
        ck_assert_msg(fabs(got - w) <= 1.2e-4 * w + 2 * ulp, "np %d: exp(%g) = %g, float %g", np,
                      xv, got, w);
    }
    for (int i = 0; i < 2; i++)
        pe->vt->release(pe, &v[i]);
    eng_free(pe);
    op_program_free(&p);
}
END_TEST

Suite *compat_suite(void)
{
    Suite *s = suite_create("compat");
    TCase *tc = th_case(s, "profiles", 60);
    TH_TESTS(tc, test_profile_counts, test_native_default, test_spu_msb_exact);
    TH_LOOPS(tc, 2, test_spu_accuracy, test_spu_softmax_accuracy, test_spu_activation_accuracy,
             test_spu_norm_accuracy, test_spu_pade_accuracy);
    return s;
}
