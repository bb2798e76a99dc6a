/* check_mpc_prog.c — op programs on the real backend: every op kind's kernel run on secret
 * shares (both protocols) matches the clear-text engine within the fixed-point bound, and the
 * bytes and rounds each party measured for each op equal proto_cost_program's prediction, for
 * single-op programs, a composite one (matmul, rmsnorm, softmax, gelu, lt) and a lowered
 * stories260K decode step. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/program/opb.h"
#include "protocols/program/eng_plain.h"
#include "models/lower.h"
#include "models/model.h"
#include "protocols/program/kern.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/program/proto.h"

/* ---------------------------------------------------------------- bindings */

enum { V_REAL, V_POS, V_INT, V_BIT, V_WORD, V_IDX, V_BLOCKS };

typedef struct tbind {
    const char *name;
    int kind;      /* V_* */
    double lo, hi; /* V_REAL/V_POS range; V_INT: 0..hi-1; V_IDX: per instance (rows) distinct
                    * indices below hi, increasing; V_BLOCKS: per instance b of (B, NB, 1) a
                    * 0/1 indicator of blocks b % (NB − 1) and NB − 1 */
} tbind;

typedef struct prog_case {
    const char *pname;
    op_program prog;
    tbind binds[8];
    double tol;   /* absolute tolerance on decoded outputs (relative above 1) */
    int any_name; /* unbound tensors get reals in [-0.1, 0.1) (counts-only runs) */
    int counts_only;
    const char *msb;    /* protocol parameter msb, or NULL for the default */
    const char *norm;   /* protocol parameter normalize, or NULL for the default */
    const char *topk;   /* protocol parameter topk, or NULL for the default */
    const char *compat; /* protocol parameter compat, or NULL for the default */
    const char *exp;    /* protocol parameter exp, or NULL for the default */
    uint32_t idx_hi;    /* any_name: tensors named "….ffn.idx" get V_IDX indices below this */
} prog_case;

/* An empty case in pname (every other field zero); its program, initialised. */
static op_program *case_open(prog_case *c, const char *pname)
{
    memset(c, 0, sizeof *c);
    c->pname = pname;
    op_program_init(&c->prog);
    return &c->prog;
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const prog_case *cur;

/* V_IDX: for each of the t->batch instances, t->rows distinct increasing indices below hi. */
static void fill_idx(const op_tensor *t, uint64_t *out, uint32_t hi, uint64_t s)
{
    uint32_t *pool = malloc((hi ? hi : 1) * sizeof *pool);
    for (uint32_t b = 0; pool && b < t->batch; b++) {
        for (uint32_t i = 0; i < hi; i++)
            pool[i] = i;
        for (uint32_t i = 0; i < t->rows && i < hi; i++) { /* a partial Fisher–Yates */
            uint32_t j = i + (uint32_t)(mix(&s) % (hi - i)), v = pool[i];
            pool[i] = pool[j], pool[j] = v;
        }
        for (uint32_t i = 1; i < t->rows; i++) /* increasing (insertion sort) */
            for (uint32_t j = i; j > 0 && pool[j - 1] > pool[j]; j--) {
                uint32_t v = pool[j];
                pool[j] = pool[j - 1], pool[j - 1] = v;
            }
        for (uint32_t i = 0; i < t->rows; i++)
            out[(size_t)b * t->rows + i] = pool[i];
    }
    free(pool);
}

/* Deterministic values per tensor name (test data, the same in every process). */
static int bind_fn(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    const prog_case *c = ctx;
    for (const tbind *b = c->binds; b->name; b++) {
        if (strcmp(b->name, t->name))
            continue;
        uint64_t s = 1234;
        for (const char *p = t->name; *p; p++)
            s = s * 131 + (uint8_t)*p;
        if (b->kind == V_IDX) {
            fill_idx(t, out, (uint32_t)b->hi, s);
            return 1;
        }
        if (b->kind == V_BLOCKS) {
            size_t nb = n / t->batch;
            memset(out, 0, n * sizeof *out);
            for (size_t i = 0; nb > 1 && i < t->batch; i++)
                out[i * nb + i % (nb - 1)] = out[i * nb + nb - 1] = 1;
            return 1;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t r = mix(&s);
            double u = (double)(r >> 11) * 0x1p-53;
            switch (b->kind) {
            case V_REAL:
            case V_POS: out[i] = fx_encode(b->lo + (b->hi - b->lo) * u, 18); break;
            case V_INT: out[i] = r % (uint64_t)b->hi; break;
            case V_BIT: out[i] = r & 1; break;
            default: out[i] = r; break;
            }
        }
        return 1;
    }
    if (!c->any_name)
        return 0;
    uint64_t s = 99;
    for (const char *p = t->name; *p; p++)
        s = s * 131 + (uint8_t)*p;
    size_t nl = strlen(t->name);
    if (c->idx_hi && nl > 8 && !strcmp(t->name + nl - 8, ".ffn.idx")) {
        fill_idx(t, out, c->idx_hi, s);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = fx_encode((double)(mix(&s) >> 11) * 0x1p-53 * 0.2 - 0.1, 18);
    return 1;
}

/* The clear-text reference: the same kernels on eng_plain. */
static int plain_run(const prog_case *c, const proto_cfg *cfg, int np, mpc_val **vals_out, eng **pe)
{
    const op_program *p = &c->prog;
    eng *e;
    ck_assert_int_eq(eng_plain_new(cfg, np, 77, 0, &e), MS_OK);
    mpc_val *vals = calloc(p->n_tens, sizeof *vals);
    mpc_val *inbuf = calloc(p->n_tens, sizeof *inbuf); /* INPUT ops' plaintext: ours to free */
    for (size_t t = 0; t < p->n_tens; t++) {
        const op_tensor *T = &p->tens[t];
        size_t n = (size_t)T->batch * T->rows * T->cols;
        vals[t].n = n;
        vals[t].dom = T->dom;
        int produced = 0, by_input = 0;
        for (size_t i = 0; i < p->n_ops; i++) {
            produced |= p->ops[i].out == t && p->ops[i].kind != OP_INPUT;
            by_input |= p->ops[i].out == t && p->ops[i].kind == OP_INPUT;
        }
        if (produced || T->role == OPT_TEMP || T->role == OPT_OUTPUT)
            continue;
        uint64_t *plain = calloc(n + 1, 8);
        bind_fn((void *)c, T, plain, n);
        ck_assert_int_eq(e->vt->alloc(e, &vals[t], n, T->dom), MS_OK);
        memcpy(vals[t].s[0], plain, n * 8);
        free(plain);
        if (by_input)
            inbuf[t] = vals[t];
    }
    errbuf err = {{0}};
    for (size_t i = 0; i < p->n_ops; i++) {
        int rc = kern_exec(e, p, i, vals, &err);
        ck_assert_msg(rc == MS_OK, "plain op %zu: %s", i, err.msg);
    }
    for (size_t t = 0; t < p->n_tens; t++)
        e->vt->release(e, &inbuf[t]);
    free(inbuf);
    *vals_out = vals;
    *pe = e;
    return MS_OK;
}

static int int_valued(const op *o)
{
    switch (o->kind) {
    case OP_LT:
    case OP_EQ:
    case OP_A2B:
    case OP_B2A:
    case OP_ARGMAX:
    case OP_TOPK:
    case OP_ONEHOT:
    case OP_SORT: return 1;
    default: return (o->flags & OPF_NO_TRUNC) != 0;
    }
}

/* eq, onehot, argmax, top-k: the exact integer result computed here from the operands'
 * plaintext (a stronger reference than another engine running the same kernel). */
static uint64_t *exact_ref(const op *o, const mpc_val *pv, size_t n)
{
    if (o->kind != OP_EQ && o->kind != OP_ONEHOT && o->kind != OP_ARGMAX && o->kind != OP_TOPK &&
        o->kind != OP_LT)
        return NULL;
    uint64_t *r = calloc(n + 1, 8);
    const uint64_t *a = pv[o->in[0]].s[0];
    if (o->kind == OP_ARGMAX || o->kind == OP_TOPK) { /* one-hot rows, descending order */
        size_t rows = (size_t)o->batch * o->m, k = o->kind == OP_TOPK ? (size_t)o->iarg : 1;
        for (size_t i = 0; i < rows; i++) {
            const int64_t *x = (const int64_t *)a + i * o->n;
            uint64_t used = 0;
            for (size_t t = 0; t < k; t++) {
                size_t best = 0;
                int have = 0;
                for (size_t j = 0; j < o->n; j++)
                    if (!(used >> j & 1) && (!have || x[j] > x[best]))
                        best = j, have = 1;
                used |= 1ull << best;
                r[(i * k + t) * o->n + best] = 1;
            }
        }
        return r;
    }
    for (size_t q = 0; q < n; q++)
        r[q] = o->kind == OP_EQ   ? a[q] == pv[o->in[1]].s[0][q]
               : o->kind == OP_LT ? (int64_t)a[q] < (int64_t)pv[o->in[1]].s[0][q]
                                  : a[q / o->n] == q % o->n;
    return r;
}

/* The case's protocol configuration: pname's defaults with its msb, normalize and topk. */
static proto_cfg case_cfg(const prog_case *c)
{
    proto_cfg cfg;
    errbuf err = {{0}};
    ck_assert_int_eq(proto_cfg_default(c->pname, &cfg, &err), MS_OK);
    if (c->msb)
        ck_assert_int_eq(proto_cfg_set(&cfg, "msb", c->msb, &err), MS_OK);
    if (c->norm)
        ck_assert_int_eq(proto_cfg_set(&cfg, "normalize", c->norm, &err), MS_OK);
    if (c->compat)
        ck_assert_int_eq(proto_cfg_set(&cfg, "compat", c->compat, &err), MS_OK);
    if (c->exp)
        ck_assert_int_eq(proto_cfg_set(&cfg, "exp", c->exp, &err), MS_OK);
    if (c->topk)
        ck_assert_int_eq(proto_cfg_set(&cfg, "topk", c->topk, &err), MS_OK);
    return cfg;
}

/* Checks a measured run of c->prog: per-op counts against the cost engine, values against the
 * clear-text engine (unless counts_only). */
static void check_run(const prog_case *c, mpc_local_run *lr_in)
{
    mpc_local_run lr = *lr_in;
    proto_cfg cfg = case_cfg(c);
    errbuf err = {{0}};
    const op_program *p = &c->prog;
    ck_assert(op_program_is_sane(p));
    /* prediction, with the public counts P0 synced (QuickSelect's partitions: cost_tape) */
    uint64_t *tn = calloc(p->n_ops + 1, 8), *ts = calloc(p->n_ops + 1, 8);
    for (size_t k = 0; k < p->n_ops; k++)
        tn[k] = lr.ops[0][k].pub_n, ts[k] = lr.ops[0][k].pub_sum;
    cost_tape tape = {tn, ts, p->n_ops};
    cost_log log;
    cost_log_init(&log, 3);
    ck_assert_msg(proto_cost_program_tape(proto_find(c->pname), &cfg, p, &tape, &log, &err) ==
                      MS_OK,
                  "%s", err.msg);
    free(tn), free(ts);
    int np = proto_find(c->pname)->n_parties;
    mpc_val *pv = NULL;
    eng *pe = NULL;
    if (!c->counts_only)
        plain_run(c, &cfg, np, &pv, &pe);
    for (int i = 0; i < np; i++) {
        const mpc_op_stat *st = lr.ops[i];
        const uint64_t *val = lr.vals[i];
        for (size_t k = 0; k < p->n_ops; k++) {
            const op *o = &p->ops[k];
            uint64_t rounds = 0, bytes[3] = {0}, off = 0;
            for (size_t q = 0; q < log.n; q++)
                if (log.r[q].op == k) {
                    rounds += log.r[q].comm;
                    for (int j = 0; j < np; j++)
                        bytes[j] += log.r[q].bytes[i][j];
                    off += log.r[q].offline[i];
                }
            const char *kn = op_kind_name(o->kind);
            if (c->topk && !strcmp(c->topk, "quickselect") &&
                o->kind == OP_TOPK) /* partitions ran */
                ck_assert_uint_ge(st[k].pub_n, o->iarg < (int)o->n ? 2 : 1);
            ck_assert_msg(st[k].rounds == rounds,
                          "%s op %zu %s P%d: measured %llu rounds, predicted %llu", c->pname, k, kn,
                          i, (unsigned long long)st[k].rounds, (unsigned long long)rounds);
            for (int j = 0; j < np; j++)
                ck_assert_msg(st[k].sent[j] == bytes[j],
                              "%s op %zu %s P%d→P%d: measured %llu bytes, predicted %llu", c->pname,
                              k, kn, i, j, (unsigned long long)st[k].sent[j],
                              (unsigned long long)bytes[j]);
            ck_assert_msg(st[k].offline_recv == off,
                          "%s op %zu %s P%d: offline %llu, predicted %llu", c->pname, k, kn, i,
                          (unsigned long long)st[k].offline_recv, (unsigned long long)off);
            if (c->counts_only)
                continue;
            /* values vs the clear-text engine */
            size_t n = pv[o->out].n;
            const uint64_t *ref = pv[o->out].s[0];
            uint64_t *own = exact_ref(o, pv, n);
            if (own)
                ref = own;
            if (own && o->kind == OP_TOPK && c->topk && !strcmp(c->topk, "quickselect")) {
                /* the k rows in selection order: the set of each row is the reference's */
                size_t rows = (size_t)o->batch * o->m, kk = (size_t)o->iarg;
                for (size_t r = 0; r < rows; r++)
                    for (size_t j = 0; j < o->n; j++) {
                        uint64_t a = 0, b = 0;
                        for (size_t t = 0; t < kk; t++) {
                            a += val[(r * kk + t) * o->n + j];
                            b += ref[(r * kk + t) * o->n + j];
                        }
                        ck_assert_msg(a == b, "%s op %zu topk row %zu position %zu: %llu vs %llu",
                                      c->pname, k, r, j, (unsigned long long)a,
                                      (unsigned long long)b);
                    }
                free(own);
                val += n;
                continue;
            }
            int iv = int_valued(o);
            double worst = 0;
            for (size_t q = 0; q < n; q++) {
                if (o->kind == OP_REVEAL && o->iarg >= 0 && o->iarg != i)
                    break;
                if (iv || p->tens[o->out].dom == DOM_BOOL) {
                    ck_assert_msg(val[q] == ref[q],
                                  "%s op %zu %s P%d element %zu: %llx, plain %llx", c->pname, k, kn,
                                  i, q, (unsigned long long)val[q], (unsigned long long)ref[q]);
                    continue;
                }
                double a = fx_decode(val[q], 18), b = fx_decode(ref[q], 18);
                double d = fabs(a - b) / (fabs(b) > 1 ? fabs(b) : 1);
                if (d > worst)
                    worst = d;
            }
            free(own);
            ck_assert_msg(worst <= c->tol, "%s op %zu %s: error %.3g vs clear text above %.3g",
                          c->pname, k, kn, worst, c->tol);
            val += n;
        }
    }
    for (size_t t = 0; pv && t < p->n_tens; t++)
        pe->vt->release(pe, &pv[t]);
    free(pv);
    if (pe)
        eng_free(pe);
    cost_log_free(&log);
}

static void run_case(const prog_case *c)
{
    proto_cfg cfg = case_cfg(c);
    errbuf err = {{0}};
    mpc_launch l = {.cfg = cfg, .deadline_ms = 30000};
    mpc_local_run lr;
    ck_assert_msg(mpc_run_local(&l, &c->prog, bind_fn, (void *)c, !c->counts_only, &lr, &err) ==
                      MS_OK,
                  "%s: %s", c->pname, err.msg);
    check_run(c, &lr);
    mpc_local_run_free(&lr);
}

/* ---------------------------------------------------------------- programs */

/* Tolerances. The backend and eng_plain run the same kernels; they differ only in the ±1-ulp
 * rounding of each probabilistic truncation (1 ulp = 2^-18 ≈ 3.8e-6 here), amplified by what
 * follows it: a few ulp for products and the piecewise polynomials (GeLU, SiLU), the Newton
 * and Goldschmidt iterations (reciprocal, rsqrt, norms) stay within 1e-4, softmax within 5e-4,
 * and exp, whose 8 squarings each double a relative error, within 3e-3 (relative above 1).
 * Measured worst cases: 3.8e-6, 7.6e-6, 1.9e-5, 1.7e-4, 1.25e-3. */
#define T_ULP 3.1e-5 /* 8 ulp */
#define T_ITER 1e-4
#define T_SOFTMAX 5e-4
#define T_EXP 3e-3

static void emit(op_program *p, int kind, uint32_t b, uint32_t m, uint32_t k, uint32_t n,
                 uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags, int iarg,
                 double farg)
{
    opb w; /* a decode op of no layer, through the one builder */
    opb_init(&w, p, PHASE_DECODE, -1, OPC_OTHER, NULL);
    ck_assert_uint_ne(opb_op(&w, kind, b, m, k, n, in0, in1, in2, out, flags, iarg, farg), OP_NONE);
    opb_release(&w);
}

/* The composite: the program `mpcsim party --demo` runs: x (client input op) · W (fixed
 * weight), rmsnorm, softmax, gelu, lt, reveal. */
static void composite(prog_case *c, const char *pname)
{
    memset(c, 0, sizeof *c);
    c->pname = pname;
    op_program_init(&c->prog);
    errbuf err;
    ck_assert_msg(mpc_run_demo_program(&c->prog, &err) == MS_OK, "%s", err.msg);
    c->binds[0] = (tbind){"x", V_REAL, -1, 1};
    c->binds[1] = (tbind){"W", V_REAL, -0.5, 0.5};
    c->binds[2] = (tbind){"g", V_REAL, 0.5, 1.5};
    c->tol = T_SOFTMAX; /* the revealed softmax; rmsnorm, gelu within T_ITER */
}

START_TEST(test_composite)
{
    prog_case c;
    composite(&c, _i ? "aby3" : "semi2k");
    run_case(&c);
    op_program_free(&c.prog);
}
END_TEST

/* One op of each kind on small shapes; in1/in2 bound as the kind needs. */
typedef struct single {
    int kind;
    uint32_t b, m, k, n;
    int in_kind[3]; /* V_* of in0..in2, -1 none */
    int in_dom[3];
    uint32_t flags;
    int iarg;
    double farg;
    double tol;
} single;

static const single singles[] = {
    {OP_ADD, 1, 3, 0, 5, {V_REAL, V_REAL, -1}, {0}, 0, 0, 0, 1e-9},
    {OP_ADD_PUB, 1, 3, 0, 5, {V_REAL, -1, -1}, {0}, 0, 0, 0.75, 1e-9},
    {OP_MUL_PUB, 1, 3, 0, 5, {V_REAL, -1, -1}, {0}, 0, 0, -1.5, T_ULP},
    {OP_MUL, 2, 3, 0, 5, {V_REAL, V_REAL, -1}, {0}, 0, 0, 0, T_ULP},
    {OP_SQUARE, 1, 4, 0, 5, {V_REAL, -1, -1}, {0}, 0, 0, 0, T_ULP},
    {OP_MATMUL, 2, 3, 6, 4, {V_REAL, V_REAL, -1}, {0}, OPF_TRANS_B, 0, 0, T_ULP},
    {OP_TRUNC, 1, 2, 0, 8, {V_REAL, -1, -1}, {0}, 0, 4, 0, T_ULP},
    {OP_LT, 1, 4, 0, 8, {V_REAL, V_REAL, -1}, {0}, 0, 0, 0, 0},
    {OP_EQ, 1, 4, 0, 8, {V_INT, V_INT, -1}, {0}, 0, 0, 0, 0},
    {OP_SELECT, 1, 2, 0, 8, {V_BIT, V_REAL, V_REAL}, {0}, 0, 0, 0, T_ULP},
    {OP_A2B, 1, 2, 0, 8, {V_WORD, -1, -1}, {0}, 0, 0, 0, 0},
    {OP_B2A, 1, 2, 0, 8, {V_WORD, -1, -1}, {DOM_BOOL}, 0, 0, 0, 0},
    {OP_MAX, 2, 3, 0, 7, {V_REAL, -1, -1}, {0}, 0, 0, 0, T_ULP},
    {OP_ARGMAX, 1, 3, 0, 6, {V_REAL, -1, -1}, {0}, 0, 0, 0, 0},
    {OP_EXP, 1, 2, 0, 8, {V_REAL, -1, -1}, {0}, 0, 0, 0, T_EXP},
    {OP_RECIPROCAL, 1, 2, 0, 8, {V_POS, -1, -1}, {0}, 0, 0, 0, T_ITER},
    {OP_RSQRT, 1, 2, 0, 8, {V_POS, -1, -1}, {0}, 0, 0, 0, T_ITER},
    {OP_SOFTMAX, 2, 3, 0, 6, {V_REAL, -1, -1}, {0}, 0, 1, 0, T_SOFTMAX},
    {OP_SILU, 1, 2, 0, 8, {V_REAL, -1, -1}, {0}, 0, 0, 0, T_ULP},
    {OP_LAYERNORM, 1, 3, 0, 8, {V_REAL, V_REAL, V_REAL}, {0}, 0, 0, 1e-5, T_ITER},
    {OP_TOPK, 1, 2, 0, 6, {V_REAL, -1, -1}, {0}, 0, 2, 0, 0},
    {OP_ONEHOT, 1, 3, 0, 5, {V_INT, -1, -1}, {0}, 0, 0, 0, 0},
    {OP_GATHER, 1, 2, 5, 4, {V_BIT, V_REAL, -1}, {0}, OPF_FIXED_B, 0, 0, T_ULP},
    {OP_ROPE, 1, 2, 0, 8, {V_REAL, -1, -1}, {0}, 0, 3, 0, T_ULP},
    {OP_VIEW, 1, 2, 0, 8, {V_REAL, -1, -1}, {0}, 0, 0, 0, 1e-9},
    /* public right operands (OPT_PUBLIC: plaintext on every party) */
    {OP_MATMUL, 1, 3, 4, 5, {V_REAL, V_REAL, -1}, {0}, OPF_PUBLIC_B, 0, 0, T_ULP},
    {OP_ADD_PUB, 1, 3, 0, 5, {V_REAL, V_REAL, -1}, {0}, OPF_PUBLIC_B, 0, 0, 1e-9},
    {OP_MUL_PUB, 1, 3, 0, 5, {V_REAL, V_REAL, -1}, {0}, OPF_PUBLIC_B, 0, 0, T_ULP},
    {OP_RMSNORM, 1, 3, 0, 8, {V_REAL, V_POS, -1}, {0}, OPF_PUBLIC_B, 0, 1e-5, T_ITER},
};

static void single_case(prog_case *c, const char *pname, const single *s)
{
    op_program *p = case_open(c, pname);
    static const char *names[3] = {"a", "b", "c"};
    uint32_t in[3] = {OP_NONE, OP_NONE, OP_NONE};
    int shape = op_kind_shape(s->kind);
    for (int i = 0; i < 3; i++) {
        if (s->in_kind[i] < 0)
            continue;
        uint32_t b = s->b, r = s->m, cols = s->n;
        if (shape == OPS_MM) {
            r = i == 0 ? s->m : s->k;
            cols = i == 0 ? s->k : s->n;
            if (i == 1 && (s->flags & OPF_TRANS_B))
                r = s->n, cols = s->k;
        }
        if (s->kind == OP_ONEHOT)
            cols = 1;
        if ((s->kind == OP_LAYERNORM) && i > 0)
            b = 1, r = 1;
        int role = (s->flags & OPF_FIXED_B) && i == 1 ? OPT_WEIGHT : OPT_INPUT;
        if ((s->flags & OPF_PUBLIC_B) && i == 1)
            role = OPT_PUBLIC;
        if ((s->kind == OP_RMSNORM || s->kind == OP_ADD_PUB || s->kind == OP_MUL_PUB) && i == 1)
            b = 1, r = s->kind == OP_RMSNORM ? 1 : r;
        in[i] = op_tensor_add(p, names[i], role, (op_dom)s->in_dom[i], b, r, cols);
        c->binds[i] = (tbind){names[i], s->in_kind[i], -2, 2};
        if (s->in_kind[i] == V_POS)
            c->binds[i].lo = 0.05, c->binds[i].hi = 8;
        if (s->in_kind[i] == V_INT)
            c->binds[i].hi = s->kind == OP_ONEHOT ? s->n : 3;
    }
    uint32_t rows = s->m, cols = s->n;
    if (s->kind == OP_MAX)
        cols = 1;
    if (s->kind == OP_TOPK)
        rows = s->m * (uint32_t)s->iarg;
    int odom = s->kind == OP_A2B ? DOM_BOOL : DOM_ARITH;
    uint32_t out = op_tensor_add(p, "z", OPT_TEMP, (op_dom)odom, s->b, rows, cols);
    uint32_t fl = s->kind == OP_MATMUL ? s->flags : s->flags & ~OPF_PUBLIC_B;
    emit(p, s->kind, s->b, s->m, s->k, s->n, in[0], in[1], in[2], out, fl, s->iarg, s->farg);
    c->tol = s->tol;
}

/* Every single-op case whose kind is one of kinds[0..nk) (kinds NULL: all) in pname, with the
 * protocol parameters msb, normalize and topk of with (NULL: the defaults) and, with.bits > 0,
 * that bit bound on the op. */
typedef struct single_with {
    const char *msb, *norm, *topk, *compat, *exp;
    uint8_t bits;
    double tol; /* 0: each single's own */
} single_with;

static void run_singles(const char *pname, const int *kinds, size_t nk, single_with with)
{
    size_t ran = 0;
    for (size_t q = 0; q < sizeof singles / sizeof *singles; q++) {
        int in = kinds == NULL;
        for (size_t i = 0; i < nk; i++)
            in |= singles[q].kind == kinds[i];
        if (!in)
            continue;
        prog_case c;
        single_case(&c, pname, &singles[q]);
        c.msb = with.msb;
        c.norm = with.norm;
        if (with.tol > 0)
            c.tol = with.tol;
        c.topk = with.topk;
        c.compat = with.compat;
        c.exp = with.exp;
        if (with.bits)
            c.prog.ops[c.prog.n_ops - 1].bits = with.bits;
        run_case(&c);
        op_program_free(&c.prog);
        ran++;
    }
    ck_assert_uint_gt(ran, 0);
}

START_TEST(test_single_ops) { run_singles(_i ? "aby3" : "semi2k", NULL, 0, (single_with){0}); }
END_TEST

/* msb = carry (the carry-out tree) on the real backend: the ops built on comparisons, values
 * against the clear-text engine and counts against the cost engine, as above. */
START_TEST(test_carry_msb_ops)
{
    static const int kinds[] = {OP_LT, OP_MAX, OP_ARGMAX, OP_SOFTMAX, OP_TOPK, OP_SILU};
    run_singles(_i ? "aby3" : "semi2k", kinds, TH_N(kinds), (single_with){.msb = "carry"});
}
END_TEST

/* msb = spu (SPU's narrowed Kogge-Stone; max and sort select with the comparison's boolean bit
 * by mul_a1b) on the real backend: values against the clear-text engine, counts against the cost
 * engine. */
START_TEST(test_spu_msb_ops)
{
    static const int kinds[] = {OP_LT, OP_MAX, OP_ARGMAX, OP_SOFTMAX, OP_SILU, OP_SORT};
    run_singles(_i ? "aby3" : "semi2k", kinds, TH_N(kinds), (single_with){.msb = "spu"});
}
END_TEST

/* normalize = spu (SPU's reciprocal: msb, A2B, prefix OR, b2a_word, Goldschmidt; its rsqrt:
 * the prefix OR, two b2a_words, a polynomial; semi2k, aby3 as bitdec), then the whole compat:
 * spu profile (softmax, GeLU and SiLU as SPU runs them; exp and softmax with the Padé exp),
 * on the real backend: values against the
 * clear-text engine within 5e-4 (SPU's rsqrt polynomial has coefficients up to 50 on powers of u
 * rounded to 2^-f, so one unit of a truncation moves it by up to about 1e-4; the two engines'
 * truncations round differently), counts against the cost engine. */
START_TEST(test_spu_norm_ops)
{
    static const int kinds[] = {OP_RECIPROCAL, OP_RSQRT, OP_SOFTMAX, OP_LAYERNORM,
                                OP_RMSNORM,    OP_GELU,  OP_SILU};
    const char *pname = _i ? "aby3" : "semi2k";
    run_singles(pname, kinds, 5, (single_with){.norm = "spu", .tol = 5e-4});
    run_singles(pname, kinds, TH_N(kinds), (single_with){.compat = "spu", .tol = 5e-4});
    static const int pade[] = {OP_EXP, OP_SOFTMAX}; /* SPU's fxp_exp_mode EXP_PADE */
    run_singles(pname, pade, TH_N(pade), (single_with){.compat = "spu", .exp = "pade"});
}
END_TEST

/* compat = spu's equality (SPU's eqz: c = x + r opened, the AND tree over the word, the bit's
 * B2A) on the real backend, alone, in a one-hot and in the argmax's one-hot, the top-k that
 * opens its comparisons' boolean bits (b2p), and the sort whose compare-exchanges make the bit
 * arithmetic and multiply (SPU's _cmp_swap): values against the clear-text engine, counts
 * against the cost engine. */
START_TEST(test_spu_eq_ops)
{
    static const int kinds[] = {OP_EQ, OP_ONEHOT, OP_ARGMAX, OP_TOPK, OP_SORT};
    run_singles(_i ? "aby3" : "semi2k", kinds, TH_N(kinds), (single_with){.compat = "spu"});
}
END_TEST

/* normalize = thresholds (the earlier normalisation) on the real backend, and the default
 * bit decomposition with an op's bit bound (reciprocal and rsqrt of x < 2^(w−f)): values against
 * the clear-text engine, counts against the cost engine. */
START_TEST(test_normalize_ops)
{
    const char *pname = _i ? "aby3" : "semi2k";
    static const int kinds[] = {OP_RECIPROCAL, OP_RSQRT,   OP_SOFTMAX,
                                OP_LAYERNORM,  OP_RMSNORM, OP_SILU};
    run_singles(pname, kinds, TH_N(kinds), (single_with){.norm = "thresholds"});
    run_singles(pname, kinds, 2, (single_with){.bits = 21}); /* x < 8 at f = 18 */
}
END_TEST

/* Operands with a public bit bound (op.bits) on the real backend, at several widths: lt, eq,
 * max, sort of integers whose differences fit (V_INT in [0, 2^(w−1))), a one-hot over 50
 * classes with the bound ⌈log2 50⌉ = 6 bits: values against the clear-text engine and the exact
 * reference, counts against the cost engine. */
START_TEST(test_bit_bound_ops)
{
    const char *pname = _i ? "aby3" : "semi2k";
    static const int ws[] = {3, 9, 20, 64};
    static const int kinds[] = {OP_LT, OP_EQ, OP_MAX, OP_SORT, OP_ONEHOT};
    for (size_t wi = 0; wi < sizeof ws / sizeof *ws; wi++)
        for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++) {
            int k = kinds[ki], w = ws[wi];
            single sg = {k, 1, 3, 0, k == OP_ONEHOT ? 50 : 7, {V_INT, -1, -1}, {0}, 0, 0, 0, 0};
            if (k == OP_LT || k == OP_EQ)
                sg.in_kind[1] = V_INT;
            prog_case c;
            single_case(&c, pname, &sg);
            for (int q = 0; q < 2 && k != OP_ONEHOT; q++)
                c.binds[q].hi = ldexp(1.0, w - 1);
            c.prog.ops[c.prog.n_ops - 1].bits = k == OP_ONEHOT ? 6 : (uint8_t)w;
            run_case(&c);
            op_program_free(&c.prog);
        }
}
END_TEST

/* topk = quickselect on the real backend: the shuffle (semi2k with the dealer's permutation
 * pairs, aby3's pairwise permutations) and the revealed partitions; each row's set against the
 * exact reference, and every op's measured bytes and rounds against the cost engine replaying
 * the partitions P0 synced (cost_tape). Rows of distinct values and one of equal values, top 1,
 * 5 and 13 of 24, batched over 2 × 2 rows; then the single-op TOPK case. */
START_TEST(test_topk_quickselect_ops)
{
    const char *pname = _i ? "aby3" : "semi2k";
    prog_case c;
    op_program *p = case_open(&c, pname);
    c.topk = "quickselect";
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, 2, 2, 24);
    uint32_t e = op_tensor_add(p, "e", OPT_INPUT, DOM_ARITH, 1, 1, 24);
    emit(p, OP_INPUT, 2, 2, 0, 24, OP_NONE, OP_NONE, OP_NONE, x, 0, 0, 0);
    emit(p, OP_INPUT, 1, 1, 0, 24, OP_NONE, OP_NONE, OP_NONE, e, 0, 0, 0);
    static const int ks[3] = {1, 5, 13};
    for (int q = 0; q < 3; q++) {
        char nm[16];
        snprintf(nm, sizeof nm, "t%d", q);
        uint32_t t = op_tensor_add(p, nm, OPT_TEMP, DOM_ARITH, 2, 2 * (uint32_t)ks[q], 24);
        emit(p, OP_TOPK, 2, 2, 0, 24, x, OP_NONE, OP_NONE, t, 0, ks[q], 0);
    }
    uint32_t te = op_tensor_add(p, "te", OPT_TEMP, DOM_ARITH, 1, 5, 24);
    emit(p, OP_TOPK, 1, 1, 0, 24, e, OP_NONE, OP_NONE, te, 0, 5, 0);
    c.binds[0] = (tbind){"x", V_REAL, -4, 4};
    c.binds[1] = (tbind){"e", V_REAL, 1, 1}; /* all equal: ties by the smaller position */
    c.tol = 0;
    run_case(&c);
    op_program_free(&c.prog);
    static const int topk[] = {OP_TOPK};
    run_singles(pname, topk, 1, (single_with){.topk = "quickselect"});
}
END_TEST

/* A lowered stories260K decode step and prefill (the lowering's tensor names, weights bound by name
 * with stand-in values): every op's measured bytes and rounds equal the cost engine's. */
/* A lowered stories260K decode step (5 cached rows), then a 4-token prefill, in pname, with
 * ffn_active (NULL: the dense FFN); stand-in weights bound by name; every op's measured bytes
 * and rounds against the cost engine's. */
static void run_stories_steps(const char *pname, int sparse)
{
    prog_case c;
    memset(&c, 0, sizeof c);
    c.pname = pname;
    c.any_name = 1;
    c.counts_only = 1;
    model_cfg m;
    errbuf e = {{0}};
    ck_assert_msg(model_load("stories260K", &m, &e) == MS_OK, "%s", e.msg);
    uint32_t act[16]; /* a quarter of every layer's FFN */
    for (uint32_t l = 0; l < m.n_layers && l < 16; l++)
        act[l] = m.ffn_dim / 4 + l;
    if (sparse)
        c.idx_hi = m.ffn_dim;
    for (int phase = 0; phase < 2; phase++) {
        lower_opts lo;
        lower_opts_default(&lo);
        lo.phase = phase ? PHASE_PREFILL : PHASE_DECODE;
        lo.n_tokens = phase ? 4 : 1;
        lo.kv_len = phase ? 0 : 5;
        lo.ffn_active = sparse ? act : NULL;
        op_program_init(&c.prog);
        ck_assert_msg(lower_step(&m, &lo, &c.prog, &e) == MS_OK, "%s", e.msg);
        run_case(&c);
        op_program_free(&c.prog);
    }
}

/* A lowered stories260K decode step and prefill (the lowering's tensor names, weights bound by name
 * with stand-in values): every op's measured bytes and rounds equal the cost engine's. */
START_TEST(test_stories260k_step) { run_stories_steps(_i ? "aby3" : "semi2k", 0); }
END_TEST

/* The FFN at public neuron indices ix (T rows of A of them): the weights' rows of w1 and columns
 * of w2 taken by index (fixed operands), x (T × D) through both matmuls into y; x and the
 * weights bound to reals (binds 0–2). */
typedef struct ffn_tensors {
    uint32_t x, w1, w2, ix, a1, a2, h, y;
} ffn_tensors;

static void indexed_ffn(prog_case *c, uint32_t T, uint32_t D, uint32_t A, ffn_tensors t)
{
    op_program *p = &c->prog;
    emit(p, OP_VIEW, T, A, 0, D, t.w1, t.ix, OP_NONE, t.a1, OPF_INDEX_ROWS | OPF_FIXED_B, 0, 0);
    emit(p, OP_MATMUL, T, 1, D, A, t.x, t.a1, OP_NONE, t.h, OPF_FIXED_B | OPF_TRANS_B, 0, 0);
    emit(p, OP_VIEW, T, D, 0, A, t.w2, t.ix, OP_NONE, t.a2, OPF_INDEX_COLS | OPF_FIXED_B, 0, 0);
    emit(p, OP_MATMUL, T, 1, A, D, t.h, t.a2, OP_NONE, t.y, OPF_FIXED_B | OPF_TRANS_B, 0, 0);
    c->binds[0] = (tbind){"x", V_REAL, -1, 1};
    c->binds[1] = (tbind){"w1", V_REAL, -0.5, 0.5};
    c->binds[2] = (tbind){"w2", V_REAL, -0.5, 0.5};
}

/* Comet's sparse FFN on shares (lower_opts.ffn_active, public pattern): the weights' active
 * rows and columns taken by public index (VIEW, OPF_INDEX_*), the matmuls by them with the
 * fixed operands' masks restricted (semi2k: no opening in the step). A small FFN checked
 * against the clear-text engine value by value, then lowered stories260K steps with 1/4 of the
 * FFN active: every op's bytes and rounds equal the cost engine's. */
START_TEST(test_sparse_ffn_ops)
{
    const char *pname = _i ? "aby3" : "semi2k";
    prog_case c;
    op_program *p = case_open(&c, pname);
    enum { T = 3, D = 16, F = 40, A = 9 };
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, 1, T, D);
    uint32_t w1 = op_tensor_add(p, "w1", OPT_WEIGHT, DOM_ARITH, 1, F, D);
    uint32_t w2 = op_tensor_add(p, "w2", OPT_WEIGHT, DOM_ARITH, 1, D, F);
    uint32_t ix = op_tensor_add(p, "ix", OPT_PUBLIC, DOM_ARITH, T, A, 1);
    uint32_t a1 = op_tensor_add(p, "w1a", OPT_TEMP, DOM_ARITH, T, A, D);
    uint32_t a2 = op_tensor_add(p, "w2a", OPT_TEMP, DOM_ARITH, T, D, A);
    uint32_t h = op_tensor_add(p, "h", OPT_TEMP, DOM_ARITH, 1, T, A);
    uint32_t y = op_tensor_add(p, "y", OPT_OUTPUT, DOM_ARITH, 1, T, D);
    emit(p, OP_INPUT, 1, T, 0, D, OP_NONE, OP_NONE, OP_NONE, x, 0, 0, 0);
    indexed_ffn(&c, T, D, A, (const ffn_tensors){x, w1, w2, ix, a1, a2, h, y});
    c.binds[3] = (tbind){"ix", V_IDX, 0, F};
    c.tol = T_ULP;
    run_case(&c);
    op_program_free(p);
    /* lowered stories260K steps, stand-in weights, a quarter of every layer's FFN */
    run_stories_steps(pname, 1);
}
END_TEST

/* Comet's public pattern (policy_comet.c A5/A6): a secret block indicator REVEALED to every
 * node mid-program (semi2k's dealer gets it from P0: eng publish), turned into neuron indices
 * (VIEW OPF_INDEX_BLOCKS) with a partial last block, so each row pads with zero neurons; then
 * the weights' rows and columns at them (fixed operands) and the matmuls. Every op's bytes and
 * rounds equal the prediction, every value the clear-text engine's, and the output equals
 * x · W1[S]ᵀ · W2[:, S]ᵀ computed here in double from the bound values (S: each row's
 * selected neurons, the pads contributing nothing). */
START_TEST(test_revealed_blocks)
{
    prog_case c;
    op_program *p = case_open(&c, _i ? "aby3" : "semi2k");
    enum { T = 3, D = 8, F = 20, BS = 6, NB = 4, A = 2 * BS };
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, 1, T, D);
    uint32_t ind = op_tensor_add(p, "ind", OPT_INPUT, DOM_ARITH, T, NB, 1);
    uint32_t pat = op_tensor_add(p, "pat", OPT_PUBLIC, DOM_ARITH, T, NB, 1);
    uint32_t ix = op_tensor_add(p, "ix", OPT_PUBLIC, DOM_ARITH, T, A, 1);
    uint32_t w1 = op_tensor_add(p, "w1", OPT_WEIGHT, DOM_ARITH, 1, F, D);
    uint32_t w2 = op_tensor_add(p, "w2", OPT_WEIGHT, DOM_ARITH, 1, D, F);
    uint32_t a1 = op_tensor_add(p, "w1a", OPT_TEMP, DOM_ARITH, T, A, D);
    uint32_t a2 = op_tensor_add(p, "w2a", OPT_TEMP, DOM_ARITH, T, D, A);
    uint32_t h = op_tensor_add(p, "h", OPT_TEMP, DOM_ARITH, 1, T, A);
    uint32_t y = op_tensor_add(p, "y", OPT_OUTPUT, DOM_ARITH, 1, T, D);
    emit(p, OP_INPUT, 1, T, 0, D, OP_NONE, OP_NONE, OP_NONE, x, 0, 0, 0);
    emit(p, OP_INPUT, T, NB, 0, 1, OP_NONE, OP_NONE, OP_NONE, ind, 0, 0, 0);
    emit(p, OP_REVEAL, T, NB, 0, 1, ind, OP_NONE, OP_NONE, pat, 0, -1, 0);
    emit(p, OP_VIEW, T, A, F, 1, pat, OP_NONE, OP_NONE, ix, OPF_INDEX_BLOCKS, BS, 0);
    indexed_ffn(&c, T, D, A, (const ffn_tensors){x, w1, w2, ix, a1, a2, h, y});
    c.binds[3] = (tbind){"ind", V_BLOCKS, 0, 0};
    c.tol = T_ULP;
    errbuf err = {{0}};
    mpc_launch l = {.cfg = case_cfg(&c), .deadline_ms = 30000};
    mpc_local_run lr;
    ck_assert_msg(mpc_run_local(&l, p, bind_fn, &c, 1, &lr, &err) == MS_OK, "%s: %s", c.pname,
                  err.msg);
    check_run(&c, &lr);
    /* the bound values, and P0's opened output (the last op's) */
    uint64_t bx[T * D], b1[F * D], b2[D * F], bi[T * NB];
    bind_fn(&c, &p->tens[x], bx, T * D);
    bind_fn(&c, &p->tens[w1], b1, F * D);
    bind_fn(&c, &p->tens[w2], b2, D * F);
    bind_fn(&c, &p->tens[ind], bi, T * NB);
    const uint64_t *got = lr.vals[0];
    for (size_t k = 0; k + 1 < p->n_ops; k++)
        got += p->tens[p->ops[k].out].batch * p->tens[p->ops[k].out].rows *
               p->tens[p->ops[k].out].cols;
    uint32_t pads = 0;
    for (int t = 0; t < T; t++) {
        double hh[F] = {0}, yy;
        int sel[F] = {0}, ns = 0;
        for (int k = 0; k < NB; k++)
            for (int u = k * BS; bi[t * NB + k] && u < (k + 1) * BS && u < F; u++)
                sel[u] = 1, ns++;
        ck_assert_int_le(ns, A);
        pads += (uint32_t)(A - ns);
        for (int u = 0; u < F; u++)
            for (int d = 0; sel[u] && d < D; d++)
                hh[u] += fx_decode(bx[t * D + d], 18) * fx_decode(b1[u * D + d], 18);
        for (int d = 0; d < D; d++) {
            yy = 0;
            for (int u = 0; u < F; u++)
                yy += sel[u] ? hh[u] * fx_decode(b2[d * F + u], 18) : 0;
            ck_assert_msg(fabs(fx_decode(got[t * D + d], 18) - yy) < 1e-3,
                          "%s y[%d][%d] = %g, expected %g", c.pname, t, d,
                          fx_decode(got[t * D + d], 18), yy);
        }
    }
    ck_assert_uint_eq(pads, T * (BS - (F - (NB - 1) * BS))); /* every row took the partial block */
    mpc_local_run_free(&lr);
    op_program_free(p);
}
END_TEST

/* Two programs in one session (two steps): the second numbers its tensors differently (a
 * tensor added first shifts every id), takes the weights over from the first by name (no
 * setup traffic from P1: no weight input, no beaver-cache opening) and still computes the
 * right values with the right counts. */
typedef struct two_job {
    const prog_case *a, *b;
} two_job;

static int two_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    const two_job *j = arg;
    mpc_program_run ra, rb;
    int rc = mpc_run_setup(e, net, &j->a->prog, bind_fn, (void *)j->a, &ra, err);
    if (!rc)
        rc = mpc_run_ops(e, net, &ra, 0, j->a->prog.n_ops, err);
    if (!rc)
        rc = mpc_run_setup_from(e, net, &j->b->prog, bind_fn, (void *)j->b, &ra, &rb, err);
    if (!rc)
        rc = mpc_run_ops(e, net, &rb, 0, j->b->prog.n_ops, err);
    if (!rc) {
        fwrite(&rb.setup, sizeof rb.setup, 1, out);
        fwrite(rb.ops, sizeof *rb.ops, j->b->prog.n_ops, out);
    }
    for (size_t i = 0; i < j->b->prog.n_ops && !rc; i++) {
        const op *o = &j->b->prog.ops[i];
        size_t n = rb.vals[o->out].n;
        uint64_t *v = calloc(n + 1, 8);
        if (o->kind == OP_REVEAL)
            memcpy(v, rb.vals[o->out].s[0] ? rb.vals[o->out].s[0] : v,
                   rb.vals[o->out].s[0] ? n * 8 : 0);
        else
            rc = mpc_run_open(e, net, &rb, o->out, v, err);
        fwrite(v, 8, n, out);
        free(v);
    }
    if (ra.prog)
        mpc_program_run_free(e, &ra);
    if (rb.prog)
        mpc_program_run_free(e, &rb);
    return rc;
}

START_TEST(test_two_programs)
{
    prog_case a, b;
    const char *pname = _i ? "aby3" : "semi2k";
    composite(&a, pname);
    memset(&b, 0, sizeof b);
    b.pname = pname;
    op_program_init(&b.prog);
    op_tensor_add(&b.prog, "unused", OPT_TEMP, DOM_ARITH, 1, 1, 1);
    for (size_t t = 0; t < a.prog.n_tens; t++) { /* same tensors, every id + 1 */
        const op_tensor *T = &a.prog.tens[t];
        op_tensor_add(&b.prog, T->name, (op_role)T->role, (op_dom)T->dom, T->batch, T->rows,
                      T->cols);
    }
    for (size_t i = 0; i < a.prog.n_ops; i++) {
        op o = a.prog.ops[i];
        for (int q = 0; q < 3; q++)
            o.in[q] = o.in[q] == OP_NONE ? OP_NONE : o.in[q] + 1;
        o.out++;
        op_emit(&b.prog, &o);
    }
    memcpy(b.binds, a.binds, sizeof a.binds);
    b.tol = a.tol;
    proto_cfg cfg;
    errbuf err = {{0}};
    ck_assert_int_eq(proto_cfg_default(pname, &cfg, &err), MS_OK);
    mpc_launch l = {.cfg = cfg, .deadline_ms = 30000};
    two_job j = {&a, &b};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    ck_assert_int_eq(mpc_launch_run(&l, two_node, &j, nr, &nodes, &err), MS_OK);
    mpc_local_run lr;
    memset(&lr, 0, sizeof lr);
    for (int i = 0; i < nodes; i++) {
        ck_assert_msg(nr[i].rc == MS_OK, "%s node %d: %s", pname, i, nr[i].err);
        memcpy(&lr.setup[i], nr[i].out, sizeof lr.setup[i]);
        lr.ops[i] = (mpc_op_stat *)(nr[i].out + sizeof(mpc_op_stat));
        lr.vals[i] = (uint64_t *)(nr[i].out + sizeof(mpc_op_stat) * (1 + b.prog.n_ops));
    }
    /* the second setup: only the client's x, nothing from the model owner */
    for (int d = 0; d < MPC_NODES_MAX; d++)
        ck_assert_msg(lr.setup[1].sent[d] == 0,
                      "%s: P1 sent %llu setup bytes to node %d in the second program", pname,
                      (unsigned long long)lr.setup[1].sent[d], d);
    check_run(&b, &lr);
    mpc_node_results_free(nr, nodes);
    op_program_free(&a.prog);
    op_program_free(&b.prog);
}
END_TEST

/* A REVEAL whose output is its own input-role tensor (x revealed in place, to all and to one
 * party): the tensor still gets its shares at setup, and the opened values equal the bound
 * input. */
START_TEST(test_reveal_in_place)
{
    prog_case c;
    op_program *p = case_open(&c, _i ? "aby3" : "semi2k");
    enum { T = 4, D = 8 };
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, 1, T, D);
    uint32_t y = op_tensor_add(p, "y", OPT_INPUT, DOM_ARITH, 1, T, D);
    emit(p, OP_REVEAL, 1, T, 0, D, x, OP_NONE, OP_NONE, x, 0, -1, 0);
    emit(p, OP_REVEAL, 1, T, 0, D, y, OP_NONE, OP_NONE, y, 0, 0, 0);
    c.binds[0] = (tbind){"x", V_REAL, -1, 1};
    c.binds[1] = (tbind){"y", V_REAL, -1, 1};
    errbuf err = {{0}};
    mpc_launch l = {.cfg = case_cfg(&c), .deadline_ms = 30000};
    mpc_local_run lr;
    ck_assert_msg(mpc_run_local(&l, p, bind_fn, &c, 1, &lr, &err) == MS_OK, "%s: %s", c.pname,
                  err.msg);
    uint64_t bx[T * D], by[T * D];
    bind_fn(&c, &p->tens[x], bx, T * D);
    bind_fn(&c, &p->tens[y], by, T * D);
    const uint64_t *got = lr.vals[0]; /* P0: the two reveals' plaintexts */
    ck_assert_mem_eq(got, bx, sizeof bx);
    ck_assert_mem_eq(got + T * D, by, sizeof by);
    mpc_local_run_free(&lr);
    op_program_free(p);
}
END_TEST

/* compat: crypten (CrypTen's _ltz, limit exp, Newton reciprocal and inv_sqrt, local
 * truncation, its _eqz_2PC, its max and argmax with the one-hot and weighted_index, the sort
 * and top-k on its comparison and where; semi2k only) on the real backend: values against the
 * clear-text engine within
 * 2^(10-f) (each engine's local truncations round its own random shares; the exp's eight
 * squarings carry each within 2^(9-f) of the exact iteration, tests/check_crypten.c), counts
 * against the cost engine. */
START_TEST(test_crypten_ops)
{
    static const int kinds[] = {OP_LT,      OP_SELECT,  OP_MAX,   OP_EXP,    OP_RECIPROCAL,
                                OP_RSQRT,   OP_SOFTMAX, OP_GELU,  OP_SILU,   OP_LAYERNORM,
                                OP_RMSNORM, OP_EQ,      OP_ARGMAX, OP_TOPK,  OP_SORT,
                                OP_ONEHOT};
    run_singles("semi2k", kinds, TH_N(kinds), (single_with){.compat = "crypten", .tol = 4e-3});
}
END_TEST

Suite *mpc_prog_suite(void)
{
    Suite *s = suite_create("mpc_prog");
    TCase *tc = th_case(s, "programs", 120);
    TH_LOOPS(tc, 2, test_composite, test_single_ops, test_carry_msb_ops, test_spu_msb_ops,
             test_spu_norm_ops, test_spu_eq_ops, test_normalize_ops, test_bit_bound_ops,
             test_topk_quickselect_ops, test_sparse_ffn_ops, test_revealed_blocks,
             test_reveal_in_place, test_stories260k_step, test_two_programs);
    TH_TESTS(tc, test_crypten_ops);
    (void)cur;
    return s;
}
