/* check_proto.c — the cost engines against the PRIMITIVES.md formulas (written out here from
 * the document, not taken from the code), composite round/byte counts derived from each
 * kernel's construction, agreement of the cost engines with the clear-text engine on the
 * primitive sequence, the registry and proto_cfg_set. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/eng_plain.h"
#include "protocols/program/kern.h"
#include "harness.h"
#include "protocols/program/proto.h"

typedef struct cost_fx {
    const proto *pr;
    proto_cfg cfg;
    cost_log log;
    eng *e;
} cost_fx;

static void fx_open(cost_fx *c, const char *name)
{
    errbuf err;
    c->pr = proto_find(name);
    ck_assert_ptr_nonnull(c->pr);
    ck_assert_int_eq(proto_cfg_default(name, &c->cfg, &err), 0);
    cost_log_init(&c->log, c->pr->n_parties);
    ck_assert_int_eq(c->pr->cost_engine(&c->cfg, &c->log, &c->e), 0);
}

static void fx_close(cost_fx *c)
{
    eng_free(c->e);
    cost_log_free(&c->log);
}

/* Expected message pattern of one round: bytes[src][dst], offline[p]. */
typedef struct pat {
    uint64_t b[3][3], off[3];
} pat;

static void expect_round(const cost_round *r, const pat *want, int np, int prim, const char *what)
{
    ck_assert_msg(r->comm == 1, "%s: not a communication round", what);
    ck_assert_msg(r->prim == prim, "%s: prim %d, want %d", what, r->prim, prim);
    for (int s = 0; s < 3; s++) {
        for (int d = 0; d < 3; d++) {
            uint64_t got = (s < np && d < np) ? r->bytes[s][d] : 0;
            ck_assert_msg(got == want->b[s][d], "%s: bytes[%d][%d] = %llu, want %llu", what, s, d,
                          (unsigned long long)got, (unsigned long long)want->b[s][d]);
        }
        ck_assert_msg(r->offline[s] == want->off[s], "%s: offline[%d] = %llu, want %llu", what, s,
                      (unsigned long long)r->offline[s], (unsigned long long)want->off[s]);
    }
}

/* semi2k: both directions P0→P1 and P1→P0 carry v; dealer sends o to P1. */
static pat s2(uint64_t v, uint64_t o)
{
    pat p = {{{0}}, {0}};
    p.b[0][1] = p.b[1][0] = v;
    p.off[1] = o;
    return p;
}

/* aby3: each link i → i−1 carries v. */
static pat a3(uint64_t v)
{
    pat p = {{{0}}, {0}};
    p.b[1][0] = p.b[2][1] = p.b[0][2] = v;
    return p;
}

static const uint64_t sizes[] = {1, 7, 1000, 123457};

START_TEST(test_semi2k_primitives)
{
    cost_fx c;
    fx_open(&c, "semi2k");
    eng *e = c.e;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t n = sizes[i];
        mpc_val x = {n, DOM_ARITH, {0}}, z = x, b = {n, DOM_BOOL, {0}};
        cost_log_clear(&c.log);
        e->cur_op = 42;
        ck_assert_int_eq(e->vt->input(e, &z, 1, NULL), 0);
        ck_assert_int_eq(e->vt->open(e, NULL, &x, -1), 0);
        ck_assert_int_eq(e->vt->open(e, NULL, &x, 1), 0);
        ck_assert_int_eq(e->vt->mul(e, &z, &x, &x), 0);
        ck_assert_int_eq(e->vt->square(e, &z, &x), 0);
        ck_assert_int_eq(e->vt->trunc(e, &z, &x, 18), 0);
        ck_assert_int_eq(e->vt->and_bb(e, &z, &b, &b), 0);
        ck_assert_int_eq(e->vt->b2a(e, &z, &b), 0);
        ck_assert_uint_eq(c.log.n, 8);
        pat in = {{{0}}, {0}}, op1 = {{{0}}, {0}};
        in.b[1][0] = 8 * n;  /* owner P1 sends x - r */
        op1.b[0][1] = 8 * n; /* open to P1: P0 sends its share */
        pat mul = s2(16 * n, 8 * n), sq = s2(8 * n, 8 * n), tr = s2(8 * n, 16 * n);
        pat an = s2(16 * n, 8 * n), ba = s2(8 * n, 8 * n), opa = s2(8 * n, 0);
        expect_round(&c.log.r[0], &in, 2, PRIM_INPUT, "input");
        expect_round(&c.log.r[1], &opa, 2, PRIM_OPEN, "open all");
        expect_round(&c.log.r[2], &op1, 2, PRIM_OPEN, "open to P1");
        expect_round(&c.log.r[3], &mul, 2, PRIM_MUL, "mul");
        expect_round(&c.log.r[4], &sq, 2, PRIM_SQUARE, "square");
        expect_round(&c.log.r[5], &tr, 2, PRIM_TRUNC, "trunc");
        expect_round(&c.log.r[6], &an, 2, PRIM_AND, "and_bb");
        expect_round(&c.log.r[7], &ba, 2, PRIM_B2A, "b2a");
        for (size_t k = 0; k < c.log.n; k++)
            ck_assert_uint_eq(c.log.r[k].op, 42);
    }
    /* local truncation: no round at all */
    c.e->cfg.trunc_local = 1;
    c.e->kv.trunc = KV_TRUNC_LOCAL;
    cost_log_clear(&c.log);
    mpc_val x = {100, DOM_ARITH, {0}}, z = x;
    ck_assert_int_eq(e->vt->trunc(e, &z, &x, 18), 0);
    for (size_t k = 0; k < c.log.n; k++)
        ck_assert_uint_eq(c.log.r[k].comm, 0);
    fx_close(&c);
}
END_TEST

START_TEST(test_semi2k_matmul)
{
    static const uint32_t shp[][4] = {{1, 1, 4096, 4096}, {32, 1, 128, 32768}, {3, 5, 7, 11}};
    for (int cache = 0; cache < 2; cache++) {
        cost_fx c;
        fx_open(&c, "semi2k");
        c.e->cfg.beaver_cache = cache;
        for (size_t i = 0; i < 3; i++)
            for (uint32_t fl = 0; fl <= OPF_FIXED_B; fl += OPF_FIXED_B) {
                uint64_t b = shp[i][0], m = shp[i][1], k = shp[i][2], n = shp[i][3];
                mpc_val x = {b * m * k, DOM_ARITH, {0}}, y = {b * k * n, DOM_ARITH, {0}}, z;
                cost_log_clear(&c.log);
                ck_assert_int_eq(c.e->vt->matmul(c.e, &z, &x, &y, (uint32_t)b, (uint32_t)m,
                                                 (uint32_t)k, (uint32_t)n, fl, 7),
                                 0);
                ck_assert_uint_eq(c.log.n, 1);
                /* PRIMITIVES.md: 8b(mk+kn) each way; with a cached fixed B only 8bmk;
                 * dealer sends C: 8bmn */
                uint64_t on = (cache && fl) ? 8 * b * m * k : 8 * b * (m * k + k * n);
                pat want = s2(on, 8 * b * m * n);
                expect_round(&c.log.r[0], &want, 2, PRIM_MATMUL, "matmul");
                ck_assert_double_eq(c.log.r[0].work[0][WK_MAC], 3.0 * b * m * k * n);
                ck_assert_double_eq(c.log.r[0].work[1][WK_MAC], 2.0 * b * m * k * n);
                ck_assert_uint_eq(z.n, b * m * n);
            }
        fx_close(&c);
    }
}
END_TEST

START_TEST(test_aby3_primitives)
{
    cost_fx c;
    fx_open(&c, "aby3");
    eng *e = c.e;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t n = sizes[i];
        mpc_val x = {n, DOM_ARITH, {0}}, z = x, b = {n, DOM_BOOL, {0}};
        for (int owner = 0; owner < 3; owner++) {
            cost_log_clear(&c.log);
            ck_assert_int_eq(e->vt->input(e, &z, owner, NULL), 0);
            pat in = {{{0}}, {0}};
            in.b[owner][(owner + 1) % 3] = in.b[owner][(owner + 2) % 3] = 16 * n;
            expect_round(&c.log.r[0], &in, 3, PRIM_INPUT, "input");
            cost_log_clear(&c.log);
            ck_assert_int_eq(e->vt->open(e, NULL, &x, owner), 0);
            pat op1 = {{{0}}, {0}};
            op1.b[(owner + 1) % 3][owner] = 8 * n;
            expect_round(&c.log.r[0], &op1, 3, PRIM_OPEN, "open to p");
        }
        cost_log_clear(&c.log);
        ck_assert_int_eq(e->vt->open(e, NULL, &x, -1), 0);
        ck_assert_int_eq(e->vt->mul(e, &z, &x, &x), 0);
        ck_assert_int_eq(e->vt->square(e, &z, &x), 0);
        ck_assert_int_eq(e->vt->trunc(e, &z, &x, 18), 0);
        ck_assert_int_eq(e->vt->and_bb(e, &z, &b, &b), 0);
        ck_assert_int_eq(e->vt->b2a(e, &z, &b), 0);
        ck_assert_uint_eq(c.log.n, 8); /* trunc pair and b2a: 2 rounds each */
        pat ring = a3(8 * n), tr1 = {{{0}}, {0}}, tr2 = tr1, tl = tr1;
        tr1.b[0][1] = tr1.b[1][0] = 8 * n; /* pair: P0, P1 open c; P2 sends P1 its shares */
        tr1.b[2][1] = 8 * n + 3 * n;       /* r' and msb(r) mod 2^19, packed in 3 bytes */
        tr2.b[0][2] = tr2.b[1][2] = 8 * n; /* y0 and y2 to P2 */
        tl.b[0][2] = 8 * n;                /* Share Truncation I: P0 sends y0 to P2 */
        expect_round(&c.log.r[0], &ring, 3, PRIM_OPEN, "open all");
        expect_round(&c.log.r[1], &ring, 3, PRIM_MUL, "mul");
        expect_round(&c.log.r[2], &ring, 3, PRIM_SQUARE, "square");
        expect_round(&c.log.r[3], &tr1, 3, PRIM_TRUNC, "trunc round 1");
        expect_round(&c.log.r[4], &tr2, 3, PRIM_TRUNC, "trunc round 2");
        expect_round(&c.log.r[5], &ring, 3, PRIM_AND, "and_bb");
        expect_round(&c.log.r[6], &ring, 3, PRIM_B2A, "b2a round 1");
        expect_round(&c.log.r[7], &ring, 3, PRIM_B2A, "b2a round 2");
        cost_log_clear(&c.log);
        e->cfg.trunc_local = 1;
        e->kv.trunc = KV_TRUNC_LOCAL;
        ck_assert_int_eq(e->vt->trunc(e, &z, &x, 18), 0);
        ck_assert_uint_eq(c.log.n, 1);
        expect_round(&c.log.r[0], &tl, 3, PRIM_TRUNC, "trunc local");
        e->cfg.trunc_local = 0;
        /* compat: spu, SPU's TruncAPr: P0 ↔ P1 open, P2 → P0 and P1 two words; P0 ↔ P1 */
        cost_log_clear(&c.log);
        e->kv.trunc = KV_TRUNC_SPU;
        ck_assert_int_eq(e->vt->trunc(e, &z, &x, 18), 0);
        ck_assert_uint_eq(c.log.n, 2);
        pat sp1, sp2;
        memset(&sp1, 0, sizeof sp1), memset(&sp2, 0, sizeof sp2);
        sp1.b[0][1] = sp1.b[1][0] = 8 * n;
        sp1.b[2][0] = sp1.b[2][1] = 16 * n;
        sp2.b[0][1] = sp2.b[1][0] = 8 * n;
        expect_round(&c.log.r[0], &sp1, 3, PRIM_TRUNC, "trunc spu round 1");
        expect_round(&c.log.r[1], &sp2, 3, PRIM_TRUNC, "trunc spu round 2");
        e->kv.trunc = KV_TRUNC_PAIR;
        uint64_t b3 = 3, m = 5, k = 7, nn = n;
        mpc_val xm = {b3 * m * k, DOM_ARITH, {0}}, ym = {b3 * k * nn, DOM_ARITH, {0}};
        for (uint32_t fl = 0; fl <= OPF_FIXED_B; fl += OPF_FIXED_B) {
            cost_log_clear(&c.log);
            ck_assert_int_eq(e->vt->matmul(e, &z, &xm, &ym, 3, 5, 7, (uint32_t)nn, fl, 0), 0);
            pat mm = a3(8 * b3 * m * nn); /* 8bmn on each link, no cache effect */
            expect_round(&c.log.r[0], &mm, 3, PRIM_MATMUL, "matmul");
            /* Z_i = X_i·(Y_i + Y_{i+1}) + X_{i+1}·Y_i: 2bmkn multiply-adds and the bkn
             * additions Y_i + Y_{i+1} per party (mpc_aby3.c a_matmul; SPU aby3 MatMulAA) */
            for (int p = 0; p < 3; p++) {
                ck_assert_double_eq(c.log.r[0].work[p][WK_MAC], 2.0 * b3 * m * k * nn);
                ck_assert_double_eq(c.log.r[0].work[p][WK_ELEM],
                                    2.0 * b3 * m * nn + (double)(b3 * k * nn));
            }
        }
    }
    fx_close(&c);
}
END_TEST

/* concat: the cost engines charge each element of the result once per share component
 * (PRIMITIVES.md "Local work": semi2k one share, aby3 two), whatever the number of parts; the
 * plain engine puts each part's elements and its additive components in place. */
START_TEST(test_concat)
{
    static const size_t len[3] = {2, 3, 4};
    for (int q = 0; q < 2; q++) {
        cost_fx c;
        fx_open(&c, q ? "aby3" : "semi2k");
        mpc_val parts[3], z;
        for (int i = 0; i < 3; i++)
            parts[i] = (mpc_val){len[i], DOM_BOOL, {0}};
        ck_assert_int_eq(c.e->vt->alloc(c.e, &z, 9, DOM_BOOL), 0);
        cost_log_clear(&c.log);
        ck_assert_int_eq(c.e->vt->concat(c.e, &z, parts, 3), 0);
        ck_assert_uint_eq(z.n, 9);
        ck_assert_uint_eq(c.log.n, 1);
        ck_assert_int_eq(c.log.r[0].comm, 0);
        for (int p = 0; p < c.pr->n_parties; p++)
            ck_assert_double_eq(c.log.r[0].work[p][WK_ELEM], 9.0 * (q ? 2 : 1));
        fx_close(&c);
    }
    for (int np = 2; np <= 3; np++) {
        proto_cfg cfg;
        errbuf err;
        ck_assert_int_eq(proto_cfg_default(np == 2 ? "semi2k" : "aby3", &cfg, &err), 0);
        eng *e;
        ck_assert_int_eq(eng_plain_new(&cfg, np, 3, 0, &e), 0);
        mpc_val parts[3], z, zc[3], pc[3][3];
        uint64_t want[9];
        size_t off = 0;
        for (int i = 0; i < 3; i++) {
            uint64_t v[4];
            for (size_t j = 0; j < len[i]; j++)
                v[j] = want[off + j] = 1000 * (uint64_t)i + j + 1;
            ck_assert_int_eq(e->vt->alloc(e, &parts[i], len[i], DOM_ARITH), 0);
            ck_assert_int_eq(e->vt->input(e, &parts[i], 0, v), 0); /* fresh components */
            off += len[i];
        }
        ck_assert_int_eq(e->vt->alloc(e, &z, 9, DOM_ARITH), 0);
        ck_assert_int_eq(e->vt->concat(e, &z, parts, 3), 0);
        for (int j = 0; j < 9; j++)
            ck_assert_uint_eq(z.s[0][j], want[j]);
        int nc, nci;
        memset(zc, 0, sizeof zc), memset(pc, 0, sizeof pc);
        ck_assert_int_eq(e->vt->bool_components(e, zc, &nc, &z), 0);
        off = 0;
        for (int i = 0; i < 3; i++) {
            ck_assert_int_eq(e->vt->bool_components(e, pc[i], &nci, &parts[i]), 0);
            ck_assert_int_eq(nci, nc);
            for (int k = 0; k < nc; k++)
                for (size_t j = 0; j < len[i]; j++)
                    ck_assert_uint_eq(zc[k].s[0][off + j], pc[i][k].s[0][j]);
            off += len[i];
        }
        for (int k = 0; k < 3; k++) {
            e->vt->release(e, &zc[k]);
            for (int i = 0; i < 3; i++)
                e->vt->release(e, &pc[i][k]);
        }
        for (int i = 0; i < 3; i++)
            e->vt->release(e, &parts[i]);
        e->vt->release(e, &z);
        eng_free(e);
    }
}
END_TEST

/* ---- composites ---------------------------------------------------------------------------- */

typedef struct sums {
    uint64_t rounds, sent0, off1;
    uint64_t all; /* online bytes of every party + offline bytes */
} sums;

static uint8_t op_bits; /* the next cost_op's bit bound (0: none) */

/* Costs one op (out shaped (b, rows_out, cols_out)) and sums its log. */
/* pname's protocol, its default configuration into cfg and an empty cost log for its parties
 * into lg. */
static const proto *proto_default(const char *pname, proto_cfg *cfg, cost_log *lg)
{
    const proto *pr = proto_find(pname);
    ck_assert_ptr_nonnull(pr);
    errbuf e = {{0}};
    ck_assert_msg(proto_cfg_default(pname, cfg, &e) == MS_OK, "%s", e.msg);
    cost_log_init(lg, pr->n_parties);
    return pr;
}

static sums cost_op(const char *proto_name, int kind, uint32_t b, uint32_t m, uint32_t k,
                    uint32_t n, int32_t iarg, uint32_t flags, const proto_cfg *override)
{
    op_program p;
    op_program_init(&p);
    int shape = op_kind_shape(kind);
    uint32_t in_cols = kind == OP_ONEHOT ? 1 : shape == OPS_MM ? k : n;
    uint32_t t0 = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, b, m, in_cols);
    uint32_t t1 = op_tensor_add(&p, "y", OPT_WEIGHT, DOM_ARITH, b, shape == OPS_MM ? k : m, n);
    uint32_t t2 = op_tensor_add(&p, "g", OPT_WEIGHT, DOM_ARITH, 1, 1, n);
    uint32_t rows = kind == OP_TOPK ? m * (uint32_t)iarg : m;
    uint32_t to = op_tensor_add(&p, "o", OPT_TEMP, DOM_ARITH, b, rows, kind == OP_MAX ? 1 : n);
    op o = {.kind = (uint16_t)kind,
            .layer = -1,
            .group = -1,
            .batch = b,
            .m = m,
            .k = k,
            .n = n,
            .in = {t0, t1, t2},
            .out = to,
            .flags = flags,
            .iarg = iarg,
            .farg = 0.5,
            .bits = op_bits};
    if (kind == OP_SELECT)
        o.in[0] = t0, o.in[1] = t0, o.in[2] = t0;
    ck_assert_int_ge(op_emit(&p, &o), 0);
    const proto *pr = proto_find(proto_name);
    proto_cfg cfg;
    errbuf e;
    if (override)
        cfg = *override;
    else
        ck_assert_int_eq(proto_cfg_default(proto_name, &cfg, &e), 0);
    cost_log lg;
    cost_log_init(&lg, pr->n_parties);
    int rc = proto_cost_program(pr, &cfg, &p, &lg, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    cost_totals t = {0};
    for (size_t i = 0; i < lg.n; i++) {
        cost_totals_add_round(&t, &lg.r[i], lg.n_parties);
        ck_assert_uint_eq(lg.r[i].op, 0);
    }
    sums s = {t.rounds, t.bytes_sent[0], t.offline_bytes[1], 0};
    for (int q = 0; q < MPC_PARTIES_MAX; q++)
        s.all += t.bytes_sent[q] + t.offline_bytes[q];
    cost_log_free(&lg);
    op_program_free(&p);
    return s;
}

/* Round depth of the constructions (kern.c), from their definitions (msb packed, the
 * default):
 *   msb at w bits = [bool_pair 1 round if 3 parties] + 1 generate AND + ⌈log2(w−1)⌉ carry
 *                   levels + b2a_bit
 *   eq at w bits  = [bool_pair if 3 parties] + ⌈log2 w⌉ AND levels + b2a_bit
 *   b2a_bit = 1 round (semi2k), 2 (aby3); trunc = 1 (semi2k), 2 (aby3's pair; 1 with
 *   trunc: local, which semi2k makes 0)
 * One-hots over n classes compare ⌈log2 n⌉ bits. */
static int clog2(uint64_t v)
{
    int l = 0;
    while ((1ull << l) < v)
        l++;
    return l;
}
static int R_B2A(int np) { return np == 2 ? 1 : 2; }
static int R_LTW(int np, int w) { return (np == 3) + 1 + clog2((uint64_t)w - 1) + R_B2A(np); }
static int R_EQW(int np, int w) { return (np == 3) + clog2((uint64_t)w) + R_B2A(np); }
static int R_LT(int np) { return R_LTW(np, 64); }
static int R_EQ(int np) { return R_EQW(np, 64); }
static int R_OH(int np, uint64_t n) { return R_EQW(np, n > 1 ? clog2(n) : 1); }
/* normalize: bitdec: the highest bit of X < 2^w = [bool_pair] + generate AND + ⌈log2(w−1)⌉
 * levels (carries and the suffix ANDs together) + the zero test's AND; the power of two
 * 2^D(q) = b2a_bit of the base-4 digit indicators + a product tree over [X, digit factors] */
static int R_HIBIT(int np, int w) { return (np == 3) + 1 + clog2((uint64_t)w - 1) + 1; }
static int R_POW(int np, int dmax)
{
    int g = 0;
    while (dmax >> (2 * g))
        g++;
    return R_B2A(np) + clog2((uint64_t)g + 1);
}
/* rsqrt's largest exponent D = K + δ − lo over X in [2^lo, 2^w), K = w − 1 and δ making
 * K + δ − f even (kern_math.c k_rsqrt_bits) */
static int rsqrt_dmax(int f, int lo, int w)
{
    int K = (w > f ? w : f) - 1;
    return K + ((K - f) & 1) - lo;
}

START_TEST(test_composite_rounds)
{
    const char *nm = _i ? "aby3" : "semi2k";
    int np = _i ? 3 : 2, T = _i ? 2 : 1, FM = 1 + T; /* fixed-point mul = mul + trunc */
    proto_cfg cfg;
    errbuf e;
    proto_cfg_default(nm, &cfg, &e);
    int t = cfg.exp_iters, ri = cfg.recip_iters, si = cfg.rsqrt_iters;
    int EXP_T = T + t * FM; /* exp: taylor */
    /* exp: pow2: y' trunc, the bits of y' < 2^(f+14) up to c_(f+5) with zero tests at f+4,
     * f+5 (⌈log2(f+5)⌉ carry levels, the suffix over 9 bits alongside), b2a_bit, then
     * [r², F0F1, F2F3], trunc, [r³, r⁴, F0123], trunc, the polynomial's trunc, q·F4, ·F0123,
     * trunc */
    int EXP = T + (np == 3) + 1 + clog2((uint64_t)cfg.frac_bits + 5) + 1 + R_B2A(np) + 4 + 4 * T;
    int f = cfg.frac_bits, W = 2 * f + 4; /* the default bound of 1/x and 1/sqrt(x) */
    /* 1/x: hibit, 2^(K−q) and X·2^(K−q), c, [e0; n0], then [n; e] per iteration */
    int RECIP = R_HIBIT(np, W) + R_POW(np, W - 1) + T + FM + ri * FM;
    /* 1/sqrt(x): hibit, 2^D inside X·2^D and the scale 2^(D/2), c, t², [t³, t⁴], the
     * polynomial's sum, y·scale */
    int RSQRT = R_HIBIT(np, W) + R_POW(np, rsqrt_dmax(f, 0, W)) + T + FM + 1 + T + FM;
    int RSQRT_NORM = R_HIBIT(np, W) + R_POW(np, rsqrt_dmax(f, f - 17, W)) + T + FM + 1 + T +
                     FM; /* eps = 1e-5: X >= 2^(f−17) */
    ck_assert_uint_eq(cost_op(nm, OP_LT, 1, 10, 0, 1, 0, 0, NULL).rounds, R_LT(np));
    ck_assert_uint_eq(cost_op(nm, OP_EQ, 1, 10, 0, 1, 0, 0, NULL).rounds, R_EQ(np));
    ck_assert_uint_eq(cost_op(nm, OP_A2B, 1, 10, 0, 1, 0, 0, NULL).rounds, (np == 3) + 7);
    ck_assert_uint_eq(cost_op(nm, OP_SELECT, 1, 10, 0, 1, 0, 0, NULL).rounds, 1);
    ck_assert_uint_eq(cost_op(nm, OP_EXP, 1, 10, 0, 1, 0, 0, NULL).rounds, EXP);
    ck_assert_uint_eq(cost_op(nm, OP_RECIPROCAL, 1, 10, 0, 1, 0, 0, NULL).rounds, RECIP);
    ck_assert_uint_eq(cost_op(nm, OP_RSQRT, 1, 10, 0, 1, 0, 0, NULL).rounds, RSQRT);
    { /* exp: taylor: the clip mask's lt and product come back */
        proto_cfg tl = cfg;
        ck_assert_int_eq(proto_cfg_set(&tl, "exp", "taylor", &e), MS_OK);
        ck_assert_uint_eq(cost_op(nm, OP_EXP, 1, 10, 0, 1, 0, 0, &tl).rounds, EXP_T);
        int ws = cfg.frac_bits + 3 + 1, lv = 3; /* a row of 7 */
        int RS = R_HIBIT(np, ws) + R_POW(np, ws - cfg.frac_bits) + T + FM + ri * FM;
        ck_assert_uint_eq(cost_op(nm, OP_SOFTMAX, 1, 1, 0, 7, -1, 0, &tl).rounds,
                          lv * (R_LT(np) + 1) + R_LT(np) + EXP_T + 1 + RS + FM);
    }
    { /* normalize: thresholds (the earlier construction): one batched lt against the powers */
        proto_cfg th = cfg;
        ck_assert_int_eq(proto_cfg_set(&th, "normalize", "thresholds", &e), MS_OK);
        ck_assert_uint_eq(cost_op(nm, OP_RECIPROCAL, 1, 10, 0, 1, 0, 0, &th).rounds,
                          R_LT(np) + FM /* c = x·S */ + FM /* e0 */ + ri * FM + FM /* r·S */);
        ck_assert_uint_eq(cost_op(nm, OP_RSQRT, 1, 10, 0, 1, 0, 0, &th).rounds,
                          R_LT(np) + FM + FM + T + si * (FM + FM) + FM);
    }
    /* per element, all parties, online + offline: at most the best peer's 1,460 B (semi2k) and
     * 886 B (aby3), with the peer's one-round Share Truncation I (trunc local) and with the
     * default truncation pair (43-45 B per truncation: 1/x 885 B, 1/sqrt(x) 803 B,
     * PRIMITIVES.md) */
    {
        proto_cfg pc = cfg;
        if (np == 3)
            ck_assert_int_eq(proto_cfg_set(&pc, "trunc", "local", &e), MS_OK);
        uint64_t peer = np == 2 ? 1460 : 886;
        ck_assert_uint_le(cost_op(nm, OP_RECIPROCAL, 1, 10, 0, 1, 0, 0, &pc).all, 10 * peer);
        ck_assert_uint_le(cost_op(nm, OP_RSQRT, 1, 10, 0, 1, 0, 0, &pc).all, 10 * peer);
        ck_assert_uint_le(cost_op(nm, OP_RECIPROCAL, 1, 10, 0, 1, 0, 0, NULL).all, 10 * peer);
        ck_assert_uint_le(cost_op(nm, OP_RSQRT, 1, 10, 0, 1, 0, 0, NULL).all, 10 * peer);
    }
    /* gelu/silu: batched lt, powers in 3 fixed-point levels, 1 trunc, 1 selector mul */
    ck_assert_uint_eq(cost_op(nm, OP_GELU, 1, 10, 0, 1, 0, 0, NULL).rounds,
                      R_LT(np) + 3 * FM + T + 1);
    ck_assert_uint_eq(cost_op(nm, OP_SILU, 1, 10, 0, 1, 0, 0, NULL).rounds,
                      R_LT(np) + 3 * FM + T + 1);
    for (uint32_t n = 2; n <= 1000; n = n * 3 + 1) {
        int lv = (int)ceil(log2((double)n));
        int MAX = lv * (R_LT(np) + 1);
        ck_assert_uint_eq(cost_op(nm, OP_MAX, 4, 3, 0, n, 0, 0, NULL).rounds, MAX);
        ck_assert_uint_eq(cost_op(nm, OP_ARGMAX, 4, 3, 0, n, 0, 0, NULL).rounds, MAX + R_OH(np, n));
        /* PUMA softmax: max, clip lt, exp, mask mul, reciprocal of the row sum, final mul */
        int ws = f + (n > 1 ? clog2(n) : 1) + 1; /* the row sum < 2n, >= 1/2 */
        int RS = R_HIBIT(np, ws) + R_POW(np, ws - f) + T + FM + ri * FM;
        int SM = MAX + EXP + RS + FM; /* exp: pow2 underflows to 0 above the clip: no mask */
        ck_assert_uint_eq(cost_op(nm, OP_SOFTMAX, 4, 3, 0, n, -1, 0, NULL).rounds, SM);
        ck_assert_uint_eq(cost_op(nm, OP_SOFTMAX, 1, 1, 0, n, 0, 0, NULL).rounds, SM);
        /* norms: [mean trunc,] square, mean trunc, rsqrt, normalize, gain */
        ck_assert_uint_eq(cost_op(nm, OP_RMSNORM, 1, 3, 0, n, 0, 0, NULL).rounds,
                          FM + T + RSQRT_NORM + FM + FM);
        ck_assert_uint_eq(cost_op(nm, OP_LAYERNORM, 1, 3, 0, n, 0, 0, NULL).rounds,
                          T + FM + T + RSQRT_NORM + FM + FM);
    }
    /* top-k on n = 2^p: odd–even merge sort has p(p+1)/2 layers of (lt + 1 mul), then eq;
     * k extractions cost k(p(lt + 1) + eq); the kernel takes the cheaper */
    for (int p = 1; p <= 9; p++) {
        uint32_t n = 1u << p;
        int L = p * (p + 1) / 2;
        for (int k = 1; k <= 6 && k <= (int)n; k++) {
            int sort = L * (R_LT(np) + 1) + R_OH(np, n);
            int tree = k * (p * (R_LT(np) + 1) + R_OH(np, n));
            ck_assert_uint_eq(cost_op(nm, OP_TOPK, 2, 1, 0, n, k, 0, NULL).rounds,
                              tree < sort ? tree : sort);
        }
    }
    ck_assert_uint_eq(cost_op(nm, OP_ONEHOT, 1, 5, 0, 50, 0, 0, NULL).rounds, R_EQ(np));
    op_bits = 6; /* indices in [0, 50): ⌈log2 50⌉ bits */
    ck_assert_uint_eq(cost_op(nm, OP_ONEHOT, 1, 5, 0, 50, 0, 0, NULL).rounds, R_OH(np, 50));
    op_bits = 0;
    /* a public bit bound on the operands shortens the circuits */
    for (int w = 2; w <= 64; w += 7) {
        op_bits = (uint8_t)w;
        ck_assert_uint_eq(cost_op(nm, OP_LT, 1, 10, 0, 1, 0, 0, NULL).rounds, R_LTW(np, w));
        ck_assert_uint_eq(cost_op(nm, OP_EQ, 1, 10, 0, 1, 0, 0, NULL).rounds, R_EQW(np, w));
        ck_assert_uint_eq(cost_op(nm, OP_ONEHOT, 1, 5, 0, 50, 0, 0, NULL).rounds, R_EQW(np, w));
        ck_assert_uint_eq(cost_op(nm, OP_MAX, 1, 3, 0, 16, 0, 0, NULL).rounds,
                          4 * (R_LTW(np, w) + 1));
        op_bits = 0;
    }
    /* sort: the odd–even merge network of n = 2^p, p(p+1)/2 layers of (lt + 1 mul) */
    for (int p = 1; p <= 10; p++)
        ck_assert_uint_eq(cost_op(nm, OP_SORT, 2, 1, 0, 1u << p, 0, 0, NULL).rounds,
                          (uint64_t)(p * (p + 1) / 2) * (R_LT(np) + 1));
    ck_assert_uint_eq(cost_op(nm, OP_GATHER, 1, 5, 50, 8, 0, 0, NULL).rounds, 1);
    ck_assert_uint_eq(cost_op(nm, OP_MATMUL, 2, 5, 50, 8, 0, 0, NULL).rounds, FM);
    ck_assert_uint_eq(cost_op(nm, OP_MATMUL, 2, 5, 50, 8, 0, OPF_NO_TRUNC, NULL).rounds, 1);
    ck_assert_uint_eq(cost_op(nm, OP_MATMUL, 1, 5, 50, 8, 0, OPF_PUBLIC_B, NULL).rounds, T);
    ck_assert_uint_eq(cost_op(nm, OP_ROPE, 8, 1, 0, 64, 10, 0, NULL).rounds, T);
    ck_assert_uint_eq(cost_op(nm, OP_MUL_PUB, 1, 5, 0, 8, 0, 0, NULL).rounds, T);
    ck_assert_uint_eq(cost_op(nm, OP_ADD_PUB, 1, 5, 0, 8, 0, 0, NULL).rounds, 0);
    ck_assert_uint_eq(cost_op(nm, OP_ADD, 1, 5, 0, 8, 0, 0, NULL).rounds, 0);
    ck_assert_uint_eq(cost_op(nm, OP_VIEW, 1, 5, 0, 8, 0, 0, NULL).rounds, 0);
    ck_assert_uint_eq(cost_op(nm, OP_REVEAL, 1, 5, 0, 8, -1, 0, NULL).rounds, 1);
    /* local truncation removes every truncation round of semi2k (SecureML) and halves
     * aby3's (Share Truncation I) */
    proto_cfg lc = cfg;
    ck_assert_int_eq(proto_cfg_set(&lc, "trunc", "local", &e), 0);
    ck_assert_int_eq(lc.trunc_local, 1);
    int TL = np == 2 ? 0 : 1;
    ck_assert_uint_eq(cost_op(nm, OP_EXP, 1, 10, 0, 1, 0, 0, &lc).rounds,
                      TL + (np == 3) + 1 + clog2((uint64_t)cfg.frac_bits + 5) + 1 + R_B2A(np) + 4 +
                          4 * TL);
    ck_assert_int_eq(proto_cfg_set(&lc, "exp", "taylor", &e), MS_OK);
    ck_assert_uint_eq(cost_op(nm, OP_EXP, 1, 10, 0, 1, 0, 0, &lc).rounds,
                      np == 2 ? t : (1 + t * 2));
}
END_TEST

/* Bytes of the comparison circuits per element, from the constructions (payload words of 8
 * bytes per AND / b2a input): semi2k AND and b2a send 2 and 1 words each way, aby3 1 and 1
 * per link (per b2a round). */
START_TEST(test_composite_bytes)
{
    proto_cfg k2, k3, c2, c3;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default("semi2k", &k2, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&k2, "msb", "ks", &e), 0);
    ck_assert_int_eq(proto_cfg_default("aby3", &k3, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&k3, "msb", "ks", &e), 0);
    ck_assert_int_eq(proto_cfg_default("semi2k", &c2, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&c2, "msb", "carry", &e), 0);
    ck_assert_int_eq(proto_cfg_default("aby3", &c3, &e), 0);
    ck_assert_int_eq(proto_cfg_set(&c3, "msb", "carry", &e), 0);
    for (uint32_t n = 1; n <= 10000; n *= 10) {
        /* msb = ks. semi2k lt: generate AND n, 5 levels of 2n, last level n, b2a n:
         * 16n + 5·32n + 16n + 8n = 200n each way; offline 8n + 5·16n + 8n + 8n = 104n */
        sums s = cost_op("semi2k", OP_LT, 1, n, 0, 1, 0, 0, &k2);
        ck_assert_uint_eq(s.sent0, 200ull * n);
        ck_assert_uint_eq(s.off1, 104ull * n);
        /* aby3 lt: CSA n, generate n, 5 levels 2n, last n, b2a 2 rounds of n: 8·15n = 120n */
        ck_assert_uint_eq(cost_op("aby3", OP_LT, 1, n, 0, 1, 0, 0, &k3).sent0, 120ull * n);
        /* msb = carry: the carry-out tree ANDs one word per level instead of two:
         * semi2k 16n (generate) + 6·16n + 8n (b2a) = 120n each way, offline 8n + 6·8n + 8n;
         * aby3 CSA n, generate n, 6 levels n, b2a 2 rounds of n: 8·10n = 80n; rounds as ks */
        sums sc = cost_op("semi2k", OP_LT, 1, n, 0, 1, 0, 0, &c2);
        ck_assert_uint_eq(sc.sent0, 120ull * n);
        ck_assert_uint_eq(sc.off1, 64ull * n);
        ck_assert_uint_eq(sc.rounds, s.rounds);
        sums s3 = cost_op("aby3", OP_LT, 1, n, 0, 1, 0, 0, &c3);
        ck_assert_uint_eq(s3.sent0, 80ull * n);
        ck_assert_uint_eq(s3.rounds, cost_op("aby3", OP_LT, 1, n, 0, 1, 0, 0, &k3).rounds);
        /* eq: AND tree of 6 levels of n, b2a: semi2k 6·16n + 8n; aby3 (1+6)·8n + 16n */
        ck_assert_uint_eq(cost_op("semi2k", OP_EQ, 1, n, 0, 1, 0, 0, &k2).sent0, 104ull * n);
        ck_assert_uint_eq(cost_op("aby3", OP_EQ, 1, n, 0, 1, 0, 0, &k3).sent0, 72ull * n);
    }
    /* msb = packed (default), bits per element of each round of a 64-bit lt (kern.c
     * k_carry_packed): generate 63, then the carry levels 62, 31, 15, 7, 3, 1 ANDs; semi2k
     * opens 1 bit per generate AND each way (priv) and 2 per level AND, the dealer sends 1 per
     * AND; b2a_bit opens 1 bit each way, offline 8 bytes. Every element's bits are padded to a
     * whole byte: B(b) = ⌈b/8⌉ bytes per element. aby3: bool_pair 64 bits P0→P2, every AND 1
     * bit per link, b2a_bit round 1 1 bit P0↔P1 + 8 B P2→P1, round 2 8 B P0→P2 and P1→P2. */
#define B(b) (((uint64_t)(b) + 7) / 8)
    static const int lv[] = {62, 31, 15, 7, 3, 1};
    uint64_t s0 = B(63) + B(1), off = B(63) + 8, a0 = B(64) + B(63) + B(1) + 8;
    for (int i = 0; i < 6; i++)
        s0 += B(2 * lv[i]), off += B(lv[i]), a0 += B(lv[i]);
    uint64_t e0 = B(1), e3 = B(64) + B(1) + 8;
    for (int h = 32; h >= 1; h /= 2)
        e0 += B(2 * h), e3 += B(h);
    for (uint32_t n = 1; n <= 4096; n = n * 5 + 3) {
        sums s = cost_op("semi2k", OP_LT, 1, n, 0, 1, 0, 0, NULL);
        ck_assert_uint_eq(s.sent0, s0 * n);
        ck_assert_uint_eq(s.off1, off * n);
        ck_assert_uint_eq(cost_op("aby3", OP_LT, 1, n, 0, 1, 0, 0, NULL).sent0, a0 * n);
        /* eq at 64 bits: AND levels 32, 16, 8, 4, 2, 1 (2 bits each way per AND in semi2k) */
        ck_assert_uint_eq(cost_op("semi2k", OP_EQ, 1, n, 0, 1, 0, 0, NULL).sent0, e0 * n);
        ck_assert_uint_eq(cost_op("aby3", OP_EQ, 1, n, 0, 1, 0, 0, NULL).sent0, e3 * n);
    }
#undef B
    /* the per-element targets at n = 1, all parties, online + offline: lt ≤ 123 B (semi2k),
     * ≤ 117 B (aby3) */
    ck_assert_uint_le(cost_op("semi2k", OP_LT, 1, 1, 0, 1, 0, 0, NULL).all, 123);
    ck_assert_uint_le(cost_op("aby3", OP_LT, 1, 1, 0, 1, 0, 0, NULL).all, 117);
    /* a narrower bound costs fewer bytes: a one-hot over 50 classes compares 6 bits */
    sums oh64 = cost_op("semi2k", OP_ONEHOT, 1, 1, 0, 50, 0, 0, NULL);
    op_bits = 6;
    sums oh = cost_op("semi2k", OP_ONEHOT, 1, 1, 0, 50, 0, 0, NULL);
    op_bits = 0;
    ck_assert_uint_lt(oh.all, oh64.all / 2);
    /* top-k 6 of 16 keys with msb ks (sort: 10·9 + 7 rounds < extractions 6·(4·9 + 7)): 63
     * comparators (odd–even merge sort), each an lt and a 2-word select mul; then eq of k·n:
     * semi2k bytes per row = 63·(200 + 32) + 6·16·104 */
    sums s = cost_op("semi2k", OP_TOPK, 5, 1, 0, 16, 6, 0, &k2);
    ck_assert_uint_eq(s.sent0, 5ull * (63 * (200 + 32) + 6 * 16 * 104));
    /* top-1 of 16 by one extraction: 8 + 4 + 2 + 1 = 15 compare-selects (lt 200 + mul 32 for
     * value and index), then eq of 16 */
    s = cost_op("semi2k", OP_TOPK, 5, 1, 0, 16, 1, 0, &k2);
    ck_assert_uint_eq(s.sent0, 5ull * (15 * (200 + 32) + 16 * 104));
    /* sort of 16 keys: the same 63 comparators, each an lt and a 1-word select mul */
    s = cost_op("semi2k", OP_SORT, 5, 1, 0, 16, 0, 0, &k2);
    ck_assert_uint_eq(s.sent0, 5ull * 63 * (200 + 16));
    /* vectorization: rounds of a softmax do not depend on the number of rows */
    ck_assert_uint_eq(cost_op("aby3", OP_SOFTMAX, 32, 7, 0, 100, -1, 0, NULL).rounds,
                      cost_op("aby3", OP_SOFTMAX, 1, 1, 0, 100, -1, 0, NULL).rounds);
}
END_TEST

/* A right operand shared by several instances (GQA, op.h) is opened once per distinct
 * instance (PRIMITIVES.md 8(b·mk + b_y·kn)); an operand longer than the op's k×n instances
 * (a KV cache) is costed at the attended length. */
START_TEST(test_matmul_operand_sharing)
{
    op_program p;
    op_program_init(&p);
    uint32_t q = op_tensor_add(&p, "q", OPT_TEMP, DOM_ARITH, 32, 1, 128);
    uint32_t kc = op_tensor_add(&p, "kc", OPT_CACHE, DOM_ARITH, 8, 4096, 128);
    uint32_t s = op_tensor_add(&p, "s", OPT_TEMP, DOM_ARITH, 32, 1, 1000);
    op o = {.kind = OP_MATMUL,
            .layer = -1,
            .group = -1,
            .batch = 32,
            .m = 1,
            .k = 128,
            .n = 1000,
            .in = {q, kc, OP_NONE},
            .out = s,
            .flags = OPF_TRANS_B | OPF_NO_TRUNC};
    op_emit(&p, &o);
    proto_cfg cfg;
    cost_log lg;
    const proto *pr = proto_default("semi2k", &cfg, &lg);
    errbuf e;
    ck_assert_int_eq(proto_cost_program(pr, &cfg, &p, &lg, &e), 0);
    cost_totals t = {0};
    for (size_t i = 0; i < lg.n; i++)
        cost_totals_add_round(&t, &lg.r[i], 2);
    ck_assert_uint_eq(t.rounds, 1);
    /* 8·(b·m·k + b_y·k·n) = 8·(32·128 + 8·128·1000), not the 4096-row cache; dealer C:
     * 8·b·m·n */
    ck_assert_uint_eq(t.bytes_sent[0], 8ull * (32 * 128 + 8 * 128 * 1000));
    ck_assert_uint_eq(t.offline_bytes[1], 8ull * 32 * 1000);
    cost_log_free(&lg);
    op_program_free(&p);
}
END_TEST

/* A malformed op is reported with its index and kind, not executed. */
START_TEST(test_bad_op_reported)
{
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, 2, 8);
    uint32_t y = op_tensor_add(&p, "y", OPT_TEMP, DOM_ARITH, 1, 4, 8);
    op o = {.kind = OP_SOFTMAX,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = 4,
            .n = 8,
            .in = {x, OP_NONE, OP_NONE},
            .out = y,
            .iarg = -1};
    op_emit(&p, &o);
    op o2 = o;
    o2.kind = OP_MUL; /* missing second operand */
    o2.in[0] = y;
    op_emit(&p, &o2);
    proto_cfg cfg;
    cost_log lg;
    const proto *pr = proto_default("aby3", &cfg, &lg);
    errbuf e;
    ck_assert_int_eq(proto_cost_program(pr, &cfg, &p, &lg, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "op 0 (softmax)"));
    p.n_ops = 0;
    op_emit(&p, &o2);
    ck_assert_int_eq(proto_cost_program(pr, &cfg, &p, &lg, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "op 0 (mul): missing operand"));
    cost_log_free(&lg);
    op_program_free(&p);
}
END_TEST

START_TEST(test_oem_counts)
{
    for (size_t n = 2; n <= 300; n += 7) {
        uint32_t lo[512], hi[512];
        size_t tot = 0;
        for (size_t p = 1; p < n; p *= 2)
            for (size_t k = p; k >= 1; k /= 2) {
                size_t c = kern_oem_layer(n, p, k, NULL, NULL);
                ck_assert_uint_eq(c, kern_oem_layer(n, p, k, lo, hi));
                tot += c;
            }
        if ((n & (n - 1)) == 0) { /* (p² − p + 4)·2^(p−2) − 1 for n = 2^p (mpc-costs.md §2.5) */
            size_t p = (size_t)log2((double)n);
            ck_assert_uint_eq(tot, (p * p - p + 4) * (1u << p) / 4 - 1);
            if (n == 128)
                ck_assert_uint_eq(tot, 1471); /* the table in mpc-costs.md §2.5 */
        }
    }
}
END_TEST

/* ---- cost engines agree with the clear-text engine on the primitive sequence --------------- */

static void build_mixed(op_program *p)
{
    op_program_init(p);
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, 2, 3, 16);
    uint32_t w = op_tensor_add(p, "w", OPT_WEIGHT, DOM_ARITH, 1, 16, 16);
    uint32_t g = op_tensor_add(p, "g", OPT_WEIGHT, DOM_ARITH, 1, 1, 16);
    uint32_t y = op_tensor_add(p, "y", OPT_TEMP, DOM_ARITH, 2, 3, 16);
    uint32_t r = op_tensor_add(p, "r", OPT_TEMP, DOM_ARITH, 2, 3, 1);
    uint32_t k = op_tensor_add(p, "k", OPT_TEMP, DOM_ARITH, 2, 6, 16);
    uint32_t o = op_tensor_add(p, "o", OPT_OUTPUT, DOM_ARITH, 2, 3, 16);
    static const struct {
        int kind;
        uint32_t m, k, n;
        int iarg;
        uint32_t fl;
    } ops[] = {
        {OP_INPUT, 3, 0, 16, 0, 0},
        {OP_INPUT, 3, 0, 16, 0, 0},
        {OP_MATMUL, 3, 16, 16, 0, OPF_FIXED_B},
        {OP_RMSNORM, 3, 0, 16, 0, 0},
        {OP_LAYERNORM, 3, 0, 16, 0, 0},
        {OP_SOFTMAX, 3, 0, 16, 1, 0},
        {OP_GELU, 3, 0, 16, 0, 0},
        {OP_SILU, 3, 0, 16, 0, 0},
        {OP_EXP, 3, 0, 16, 0, 0},
        {OP_MAX, 3, 0, 16, 0, 0},
        {OP_ARGMAX, 3, 0, 16, 0, 0},
        {OP_TOPK, 3, 0, 16, 2, 0},
        {OP_ROPE, 3, 0, 16, 4, 0},
        {OP_MUL, 3, 0, 16, 0, 0},
        {OP_LT, 3, 0, 16, 0, 0},
        {OP_EQ, 3, 0, 16, 0, 0},
        {OP_REVEAL, 3, 0, 16, -1, 0},
    };
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        op q = {.kind = (uint16_t)ops[i].kind,
                .layer = 0,
                .group = -1,
                .batch = 2,
                .m = ops[i].m,
                .k = ops[i].k,
                .n = ops[i].n,
                .in = {y, y, OP_NONE},
                .out = y,
                .flags = ops[i].fl,
                .iarg = ops[i].iarg,
                .farg = 1e-5};
        switch (ops[i].kind) {
        case OP_INPUT: q.in[0] = q.in[1] = OP_NONE, q.out = i ? w : x; break;
        case OP_MATMUL: q.batch = 1, q.m = 6, q.in[0] = x, q.in[1] = w; break;
        case OP_RMSNORM:
        case OP_LAYERNORM: q.in[1] = g, q.in[2] = ops[i].kind == OP_LAYERNORM ? g : OP_NONE; break;
        case OP_MAX: q.out = r; break;
        case OP_TOPK: q.out = k; break;
        case OP_REVEAL: q.out = o; break;
        default: break;
        }
        ck_assert_int_ge(op_emit(p, &q), 0);
    }
}

START_TEST(test_cost_matches_plain)
{
    const char *nm = _i ? "aby3" : "semi2k";
    op_program p;
    build_mixed(&p);
    proto_cfg cfg;
    cost_log lg;
    const proto *pr = proto_default(nm, &cfg, &lg);
    errbuf e;
    ck_assert_msg(proto_cost_program(pr, &cfg, &p, &lg, &e) == 0, "%s", e.msg);
    uint64_t rounds[PRIM_N] = {0};
    for (size_t i = 0; i < lg.n; i++)
        rounds[lg.r[i].prim] += lg.r[i].comm;
    eng *pe;
    ck_assert_int_eq(eng_plain_new(&cfg, pr->n_parties, 5, 0, &pe), 0);
    mpc_val *vals = calloc(p.n_tens, sizeof *vals);
    for (size_t t = 0; t < p.n_tens; t++) {
        size_t n = (size_t)p.tens[t].batch * p.tens[t].rows * p.tens[t].cols;
        ck_assert_int_eq(pe->vt->alloc(pe, &vals[t], n, DOM_ARITH), 0);
        for (size_t i = 0; i < n; i++)
            vals[t].s[0][i] = fx_encode(0.25 + 0.01 * (double)(i % 37), cfg.frac_bits);
    }
    /* INPUT reads the plaintext bound to its output and leaves it to the caller (kern.c) */
    mpc_val plain[2] = {vals[0], vals[1]};
    for (size_t i = 0; i < p.n_ops; i++)
        ck_assert_msg(kern_exec(pe, &p, i, vals, &e) == 0, "op %zu: %s", i, e.msg);
    pe->vt->release(pe, &plain[0]);
    pe->vt->release(pe, &plain[1]);
    const uint64_t *calls = eng_plain_calls(pe);
    for (int q = 0; q < PRIM_N; q++) {
        if (q == PRIM_LOCAL)
            continue;
        /* aby3 b2a, b2a_bit and the truncation pair: 2 rounds */
        uint64_t per =
            ((q == PRIM_B2A || q == PRIM_B2ABIT || (q == PRIM_TRUNC && !cfg.trunc_local)) &&
             pr->n_parties == 3)
                ? 2
                : 1;
        ck_assert_msg(rounds[q] == calls[q] * per, "%s %s: %llu rounds, %llu calls", nm,
                      eng_prim_name(q), (unsigned long long)rounds[q],
                      (unsigned long long)calls[q]);
    }
    for (size_t t = 0; t < p.n_tens; t++)
        pe->vt->release(pe, &vals[t]);
    free(vals);
    eng_free(pe);
    cost_log_free(&lg);
    op_program_free(&p);
}
END_TEST

/* Costs depend on the program and the protocol config only: two runs are identical, and
 * config fields that change no message leave every round unchanged. */
START_TEST(test_cost_deterministic)
{
    op_program p;
    build_mixed(&p);
    const proto *pr = proto_find("semi2k");
    proto_cfg a, b;
    errbuf e;
    proto_cfg_default("semi2k", &a, &e);
    ck_assert_int_eq(proto_cfg_set(&a, "exp", "taylor", &e), MS_OK); /* exp_iters counts there */
    b = a;
    b.softmax_clip = -20;
    cost_log la, lb;
    cost_log_init(&la, 2);
    cost_log_init(&lb, 2);
    ck_assert_int_eq(proto_cost_program(pr, &a, &p, &la, &e), 0);
    ck_assert_int_eq(proto_cost_program(pr, &b, &p, &lb, &e), 0);
    ck_assert_uint_eq(la.n, lb.n);
    ck_assert_int_eq(memcmp(la.r, lb.r, la.n * sizeof *la.r), 0);
    b.exp_iters = 5; /* PUMA: fewer squarings, fewer rounds */
    ck_assert_int_eq(proto_cost_program(pr, &b, &p, &lb, &e), 0);
    ck_assert_uint_lt(lb.n, la.n);
    cost_log_free(&la);
    cost_log_free(&lb);
    op_program_free(&p);
}
END_TEST

/* ---- registry and config ------------------------------------------------------------------ */

START_TEST(test_registry_cfg)
{
    size_t n;
    const proto *const *all = proto_all(&n);
    ck_assert_uint_eq(n, 2);
    ck_assert_ptr_eq(proto_find("semi2k"), all[0]);
    ck_assert_ptr_eq(proto_find("aby3"), all[1]);
    ck_assert_ptr_null(proto_find("aby4"));
    ck_assert_int_eq(proto_find("semi2k")->n_parties, 2);
    ck_assert_int_eq(proto_find("aby3")->n_parties, 3);
    errbuf e;
    proto_cfg c;
    ck_assert_int_ne(proto_cfg_default("semi2", &c, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "did you mean 'semi2k'"));
    ck_assert_int_eq(proto_cfg_default("semi2k", &c, &e), 0);
    ck_assert_str_eq(c.name, "semi2k");
    ck_assert_int_eq(c.frac_bits, 18); /* SPU FM64 */
    ck_assert_int_eq(c.exp_iters, 8);  /* SPU fxp_exp_iters */
    ck_assert_int_eq(c.beaver_cache, 1);
    ck_assert_double_eq(c.softmax_clip, -14.0);
    ck_assert_int_eq(proto_cfg_set(&c, "exp_iters", "5", &e), 0);
    ck_assert_int_eq(c.exp_iters, 5);
    ck_assert_int_eq(proto_cfg_set(&c, "beaver_cache", "false", &e), 0);
    ck_assert_int_eq(c.beaver_cache, 0);
    ck_assert_int_eq(proto_cfg_set(&c, "softmax_clip", "-10.5", &e), 0);
    ck_assert_double_eq(c.softmax_clip, -10.5);
    ck_assert_int_ne(proto_cfg_set(&c, "exp_iter", "5", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "did you mean 'exp_iters'"));
    ck_assert_int_ne(proto_cfg_set(&c, "frac_bits", "40", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "frac_bits"));
    ck_assert_int_ne(proto_cfg_set(&c, "frac_bits", "1x", &e), 0);
    ck_assert_int_ne(proto_cfg_set(&c, "beaver_cache", "maybe", &e), 0);
    ck_assert_int_ne(proto_cfg_set(&c, "approx", "bumblebee", &e), 0);
    ck_assert_int_eq(c.frac_bits, 18);
    size_t nk;
    const char *const *keys = proto_cfg_keys(&nk);
    ck_assert_uint_ge(nk, 9);
    for (size_t i = 0; i < nk; i++) { /* every advertised key is known: bad values only */
        ck_assert_int_ne(proto_cfg_set(&c, keys[i], "nonsense", &e), 0);
        ck_assert_ptr_null(strstr(e.msg, "unknown"));
    }
    ck_assert_str_eq(eng_prim_name(PRIM_AND), "and_bb");
    ck_assert_str_eq(eng_prim_name(PRIM_N), "?");
}
END_TEST

START_TEST(test_print_costs)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    proto_cfg c;
    errbuf e;
    proto_cfg_default("aby3", &c, &e);
    ck_assert_int_eq(proto_print_costs(f, proto_find("aby3"), &c, 1000), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "|      2 |        16000 |        16000 |        16000 |"));
    ck_assert_ptr_nonnull(strstr(buf, "softmax"));
    free(buf);
}
END_TEST

/* protocols/README.md carries the tables proto_print_costs prints (regenerate with
 * `mpcsim list protocols --costs -n 1` and `-n 1024` when a cost changes). */
START_TEST(test_readme_tables_current)
{
    size_t len;
    char *readme = th_slurp(th_data_path("protocols/README.md"), &len);
    ck_assert_uint_gt(len, 0);
    static const uint64_t ns[] = {1, 1024};
    for (size_t k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++) {
            const char *nm = i ? "aby3" : "semi2k";
            char *buf = NULL;
            size_t blen = 0;
            FILE *m = open_memstream(&buf, &blen);
            proto_cfg c;
            errbuf e;
            proto_cfg_default(nm, &c, &e);
            ck_assert_int_eq(proto_print_costs(m, proto_find(nm), &c, ns[k]), 0);
            fclose(m);
            ck_assert_msg(strstr(readme, buf) != NULL,
                          "protocols/README.md: the %s table for n = %llu is out of date", nm,
                          (unsigned long long)ns[k]);
            free(buf);
        }
    free(readme);
}
END_TEST

Suite *proto_suite(void)
{
    Suite *s = suite_create("proto");
    TCase *t = th_case(s, "costs", 60);
    TH_TESTS(t, test_semi2k_primitives, test_semi2k_matmul, test_aby3_primitives, test_concat);
    TH_LOOPS(t, 2, test_composite_rounds);
    TH_TESTS(t, test_composite_bytes, test_oem_counts, test_matmul_operand_sharing,
             test_bad_op_reported);
    TH_LOOPS(t, 2, test_cost_matches_plain);
    TH_TESTS(t, test_cost_deterministic, test_registry_cfg, test_print_costs,
             test_readme_tables_current);
    return s;
}
