/* proto_cfg.c — protocol parameters by name (scenario files, CLI) and the printed cost table
 * of `mpcsim list protocols --costs`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/base/yschema.h"
#include "eng.h"
#include "kern.h"
#include "proto.h"

/* ---- parameters by name ------------------------------------------------------------------
 * One schema table (protocols/base/yschema.h) for the scenario's 'protocol' mapping, the
 * command lines' --set KEY=VALUE and `mpcsim list keys protocol`. The defaults are each
 * protocol's own (its defaults() hook), so the table gives none. */

static const char *const approx_names[] = {"puma", "sigmoid", "spu", "crypten", NULL};
static const char *const msb_names[] = {"packed", "ks", "carry", "spu", "crypten", NULL};
static const char *const topk_names[] = {"network", "quickselect", "crypten", NULL};
static const char *const normalize_names[] = {"bitdec", "thresholds", "spu", "crypten", NULL};
static const char *const exp_names[] = {"pow2", "taylor", "pade", NULL};
static const char *const trunc_names[] = {"pair", "local", NULL}; /* trunc_local = the index */
static const char *const compat_names[] = {"native", "spu", "crypten",
                                           NULL}; /* kern_compat.c's rows */
static const char *const gather_names[] = {"rows", "scores", NULL};

#define C(member) YS_AT(proto_cfg, member)
static const ys_field cfg_fields[] = {
    {"name", YS_OTHER, YS_NONE, 0, 0, NULL, "the protocol ('mpcsim list protocols')", NULL, YS_REQ,
     NULL, "semi2k|aby3"},
    {"ring_bits", YS_INT, C(ring_bits), 64, 64, NULL, "ring width; only 64", NULL, 0, NULL, NULL},
    {"frac_bits", YS_INT, C(frac_bits), 8, 24, NULL, "fixed-point fraction bits (SPU FM64: 18)",
     NULL, 0, NULL, NULL},
    {"exp_iters", YS_INT, C(exp_iters), 1, 16, NULL, "Taylor exp iterations (SPU 8, PUMA 5)", NULL,
     0, NULL, NULL},
    {"recip_iters", YS_INT, C(recip_iters), 0, 8, NULL, "Goldschmidt iterations for 1/x (SPU 2)",
     NULL, 0, NULL, NULL},
    {"rsqrt_iters", YS_INT, C(rsqrt_iters), 0, 8, NULL,
     "Newton iterations for 1/sqrt(x) with normalize: thresholds", NULL, 0, NULL, NULL},
    {"softmax_clip", YS_DBL, C(softmax_clip), -64, -1, NULL,
     "softmax: exp masked to 0 below this (PUMA -14)", NULL, 0, NULL, NULL},
    {"beaver_cache", YS_BOOL, C(beaver_cache), 0, 0, NULL,
     "semi2k: reuse a fixed operand's opened mask", NULL, 0, NULL, NULL},
    {"trunc_local", YS_BOOL, C(trunc_local), 0, 0, NULL,
     "local truncation (semi2k SecureML, aby3 Share Truncation I): trunc=local", NULL, 0, NULL,
     NULL},
    {"trunc", YS_ENUM, C(trunc_local), 0, 0, NULL,
     "truncation: pair (a dealt pair, exact for |x| < 2^62) or local (wrong with probability "
     "|x|/2^64)",
     trunc_names, 0, NULL, NULL},
    {"approx", YS_STR, C(approx), 0, 0, NULL,
     "activation approximations: puma, sigmoid (SiLU as x·σ(x)), spu (PUMA's polynomials "
     "as SPU runs them; compat: spu) or crypten (GeLU by CrypTen's Taylor erf, SiLU by its "
     "sigmoid; compat: crypten)",
     approx_names, 0, NULL, NULL},
    {"msb", YS_STR, C(msb), 0, 0, NULL,
     "comparisons: packed (bit-packed carry tree, daBit b2a), ks (full A2B adder), carry "
     "(carry-out tree of words), spu (SPU's narrowed Kogge-Stone, its bit selecting by "
     "mul_a1b) or crypten (CrypTen's _ltz: full-word A2B, a one-bit B2A)",
     msb_names, 0, NULL, NULL},
    {"topk", YS_STR, C(topk), 0, 0, NULL,
     "top-k: network (oblivious), quickselect (shuffle, revealed pivot comparisons: SPU) or "
     "crypten (k of CrypTen's argmaxes or an odd-even merge sort on its comparison and where, "
     "whichever has fewer rounds; compat: crypten)",
     topk_names, 0, NULL, NULL},
    {"exp", YS_STR, C(exp), 0, 0, NULL,
     "exp: pow2 (range reduction: the integer part's bits and a polynomial, x in (-11350, "
     "5.5]), taylor ((1 + x/2^t)^(2^t), t = exp_iters, x in [-14, 0]) or pade (SPU's "
     "EXP_PADE, x clamped to 32 ln 2; under compat: spu the one choice kept: SPU's "
     "fxp_exp_mode, taylor otherwise)",
     exp_names, 0, NULL, NULL},
    {"normalize", YS_STR, C(normalize), 0, 0, NULL,
     "reciprocal/rsqrt normalisation: bitdec (one bit decomposition), thresholds (a "
     "comparison per power of two), spu (SPU's reciprocal, two parties; compat: spu) or crypten "
     "(CrypTen's Newton iterations from its exp-based guesses; compat: crypten)",
     normalize_names, 0, NULL, NULL},
    {"compat", YS_STR, C(compat), 0, 0, NULL,
     "framework cost profile: native (the keys above), spu (every kernel family as SecretFlow "
     "SPU 0.9.x runs it, whatever msb, topk, exp, normalize, approx and trunc say) or crypten "
     "(CrypTen's two parties with a trusted third party: semi2k only; its comparisons, "
     "equality, max and argmax, and sort and top-k, which it lacks, on its primitives)",
     compat_names, 0, NULL, NULL},
    {"gather", YS_STR, C(gather), 0, 0, NULL,
     "a secret selection's attention: rows (the kept [K | V] rows gathered by the one-hot) or "
     "scores (q.K^T over every cached entry, the kept scores gathered, scattered back, .V over "
     "every entry; sim/policy/POLICIES.md)",
     gather_names, 0, NULL, NULL},
};
#undef C
#define N_KEYS (sizeof cfg_fields / sizeof *cfg_fields)
static const ys_schema cfg_schema =
    YS_SCHEMA("protocol", cfg_fields, "protocols/program/PRIMITIVES.md");

const ys_schema *proto_cfg_schema(void) { return &cfg_schema; }

int proto_cfg_check_node(const ys_ctx *x, const yx_node *v, const proto_cfg *cfg)
{
    if (cfg->frac_bits >= cfg->ring_bits || cfg->frac_bits < 1) {
        const yx_node *at = yx_map_get(v, "frac_bits");
        at = at ? at : yx_map_get(v, "ring_bits");
        return ys_fail(x, at ? at : v, "fixed point needs 1 <= frac_bits < ring_bits",
                       "frac_bits (%d) must be less than ring_bits (%d)", cfg->frac_bits,
                       cfg->ring_bits);
    }
    errbuf ce;
    if (kern_compat_check(cfg, &ce)) { /* a framework profile the protocol lacks */
        const yx_node *at = yx_map_get(v, "compat");
        char has[96], want[160];
        kern_compat_names(cfg->name, has, sizeof has);
        snprintf(want, sizeof want, "compat: one of %s (%s's profiles)", has, cfg->name);
        return ys_fail(x, at ? at : v, want, "%s",
                       ce.msg + (strncmp(ce.msg, "error: ", 7) ? 0 : 7));
    }
    return MS_OK;
}

/* The settable keys: every field but 'name' (a protocol's name picks its defaults). */
const char *const *proto_cfg_keys(size_t *n)
{
    static const char *names[N_KEYS];
    for (size_t i = 1; i < N_KEYS; i++)
        names[i - 1] = cfg_fields[i].key;
    *n = N_KEYS - 1;
    return names;
}

int proto_cfg_set(proto_cfg *cfg, const char *key, const char *value, errbuf *e)
{
    const ys_field *f = ys_find(&cfg_schema, key);
    if (!f || f->type == YS_OTHER) {
        size_t n;
        const char *const *names = proto_cfg_keys(&n);
        const char *dym = did_you_mean(key, names, n);
        char list[256] = "";
        for (size_t i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     names[i]);
        if (dym)
            return err_set(e, MS_ERR_INPUT,
                           "error: unknown protocol parameter '%s' (did you mean '%s'?)", key, dym);
        return err_set(e, MS_ERR_INPUT, "error: unknown protocol parameter '%s' (valid: %s)", key,
                       list);
    }
    proto_cfg t = *cfg; /* nothing half-set */
    errbuf ye;
    int rc = ys_set_text(f, value, &t, &ye);
    if (rc && f->names) { /* a word: name them all ("'ks' or 'carry'"), the key being known */
        char list[96] = "";
        size_t nv = 0;
        while (f->names[nv])
            nv++;
        for (size_t j = 0; j < nv; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'",
                     j == 0        ? ""
                     : j == nv - 1 ? " or "
                                   : ", ",
                     f->names[j]);
        return err_set(e, rc, "error: protocol parameter '%s' must be %s, got '%s'", key, list,
                       value);
    }
    if (rc)
        return err_set(e, rc, "error: protocol parameter %s", ye.msg);
    if (kern_compat_check(&t, e)) /* a profile for another protocol */
        return MS_ERR_INPUT;
    *cfg = t;
    return MS_OK;
}

int proto_cfg_set_kv(proto_cfg *cfg, const char *kv, errbuf *e)
{
    const char *eq = strchr(kv, '=');
    char key[64];
    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key)
        return err_set(e, MS_ERR_USAGE,
                       "error: --set wants KEY=VALUE (a protocol parameter), not '%s'", kv);
    memcpy(key, kv, (size_t)(eq - kv));
    key[eq - kv] = 0;
    return proto_cfg_set(cfg, key, eq + 1, e);
}

/* ---- printed cost table ------------------------------------------------------------------ */

typedef struct tot {
    uint64_t rounds, sent[MPC_PARTIES_MAX], off[MPC_PARTIES_MAX];
} tot;

static tot sum_log(const cost_log *lg)
{
    tot t = {0};
    cost_totals ct = {0};
    for (size_t i = 0; i < lg->n; i++)
        cost_totals_add_round(&ct, &lg->r[i], lg->n_parties);
    t.rounds = ct.rounds;
    memcpy(t.sent, ct.bytes_sent, sizeof t.sent);
    memcpy(t.off, ct.offline_bytes, sizeof t.off);
    return t;
}

static void print_row(FILE *f, const char *name, const tot *t, int np)
{
    fprintf(f, "| %-24s | %6llu |", name, (unsigned long long)t->rounds);
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < MPC_PARTIES_MAX; p++) {
            if (p < np)
                fprintf(f, " %12llu |", (unsigned long long)(k ? t->off[p] : t->sent[p]));
            else
                fprintf(f, " %12s |", "-");
        }
    fputc('\n', f);
}

/* One call of a primitive on n elements. */
static int prim_once(eng *en, int prim, uint64_t n, int variant)
{
    mpc_val x = {n, DOM_ARITH, {0}}, y = x, z = x, b = {n, DOM_BOOL, {0}};
    size_t mk = (size_t)n;
    switch (prim) {
    case PRIM_INPUT: return en->vt->input(en, &z, 0, NULL);
    case PRIM_OPEN: return en->vt->open(en, NULL, &x, variant ? 0 : -1);
    case PRIM_MUL: return en->vt->mul(en, &z, &x, &y);
    case PRIM_SQUARE: return en->vt->square(en, &z, &x);
    case PRIM_MATMUL:
        x.n = mk;
        y.n = mk * mk;
        return en->vt->matmul(en, &z, &x, &y, 1, 1, (uint32_t)n, (uint32_t)n,
                              variant ? OPF_FIXED_B : 0, 0);
    case PRIM_TRUNC: return en->vt->trunc(en, &z, &x, en->cfg.frac_bits);
    case PRIM_AND: return en->vt->and_bb(en, &z, &b, &b);
    case PRIM_B2A: return en->vt->b2a(en, &z, &b);
    case PRIM_ANDBITS: return en->vt->and_bits(en, &z, &b, &b, ~0ull >> 1, variant);
    case PRIM_PAIR: {
        mpc_val b2 = b;
        return en->vt->bool_pair(en, &z, &b2, &x, 64);
    }
    case PRIM_B2ABIT: return en->vt->b2a_bit(en, &z, &b);
    default: return MS_OK;
    }
}

/* Costs a one-op program of the given kind on shape (1, m, k, n). */
static int kernel_once(const proto *pr, const proto_cfg *cfg, cost_log *lg, int kind, uint32_t m,
                       uint32_t k, uint32_t n, int32_t iarg, int bits, tot *out)
{
    op_program p;
    op_program_init(&p);
    int rc = MS_ERR_NOMEM;
    uint32_t a = op_tensor_add(&p, "a", OPT_TEMP, DOM_ARITH, 1, m,
                               kind == OP_ONEHOT               ? 1
                               : op_kind_shape(kind) == OPS_MM ? k
                                                               : n);
    uint32_t b =
        op_tensor_add(&p, "b", OPT_WEIGHT, DOM_ARITH, 1, op_kind_shape(kind) == OPS_MM ? k : m, n);
    uint32_t c = op_tensor_add(&p, "c", OPT_WEIGHT, DOM_ARITH, 1, 1, n);
    uint32_t oo = op_tensor_add(&p, "o", OPT_TEMP, DOM_ARITH, 1,
                                kind == OP_TOPK ? m * (uint32_t)iarg : m, kind == OP_MAX ? 1 : n);
    op o = {.kind = (uint16_t)kind,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = m,
            .k = k,
            .n = n,
            .in = {a, b, c},
            .out = oo,
            .iarg = iarg,
            .bits = (uint8_t)bits};
    if (kind == OP_SELECT)
        o.in[0] = a, o.in[1] = a, o.in[2] = a;
    errbuf e;
    if (a != OP_NONE && b != OP_NONE && c != OP_NONE && oo != OP_NONE && op_emit(&p, &o) >= 0)
        rc = proto_cost_program(pr, cfg, &p, lg, &e);
    if (!rc)
        *out = sum_log(lg);
    op_program_free(&p);
    return rc;
}

/* A cost table's header: its first column's title, rounds, bytes sent and offline per party. */
static void print_header(FILE *f, const char *what)
{
    fprintf(f, "| %-24s | %6s | %12s | %12s | %12s | %12s | %12s | %12s |\n", what, "rounds",
            "sent P0", "sent P1", "sent P2", "offline P0", "offline P1", "offline P2");
    fprintf(f, "|%s|%s|%s|%s|%s|%s|%s|%s|\n", "--------------------------", "--------",
            "--------------", "--------------", "--------------", "--------------",
            "--------------", "--------------");
}

/* One row per communicating primitive (and variant) on n elements, costed by en into lg. */
static int print_prims(FILE *f, eng *en, cost_log *lg, uint64_t n)
{
    static const struct {
        int prim, variant;
        const char *label;
    } rows[] = {
        {PRIM_INPUT, 0, "input (owner P0)"},
        {PRIM_OPEN, 0, "open (all)"},
        {PRIM_OPEN, 1, "open (to P0)"},
        {PRIM_MUL, 0, "mul"},
        {PRIM_SQUARE, 0, "square"},
        {PRIM_MATMUL, 0, "matmul 1xn.nxn"},
        {PRIM_MATMUL, 1, "matmul 1xn.nxn fixed B"},
        {PRIM_TRUNC, 0, "trunc"},
        {PRIM_AND, 0, "and_bb"},
        {PRIM_B2A, 0, "b2a"},
        {PRIM_ANDBITS, 0, "and_bits (63 bits)"},
        {PRIM_ANDBITS, 1, "and_bits priv (63 bits)"},
        {PRIM_PAIR, 0, "bool_pair (64 bits)"},
        {PRIM_B2ABIT, 0, "b2a_bit"},
    };
    int rc = MS_OK;
    for (size_t i = 0; i < sizeof rows / sizeof *rows && !rc; i++) {
        cost_log_clear(lg);
        rc = prim_once(en, rows[i].prim, n, rows[i].variant);
        tot t = sum_log(lg);
        print_row(f, rows[i].label, &t, en->n_parties);
    }
    return rc;
}

/* One row per composite kernel on n elements, or on one row of n. */
static int print_kernels(FILE *f, const proto *pr, const proto_cfg *cfg, cost_log *lg, uint64_t n)
{
    static const struct {
        int kind;
        const char *label;
        int row, bits;
    } ks[] = {
        {OP_LT, "lt", 0, 0},
        {OP_EQ, "eq", 0, 0},
        {OP_SELECT, "select", 0, 0},
        {OP_A2B, "a2b", 0, 0},
        {OP_EXP, "exp", 0, 0},
        {OP_RECIPROCAL, "reciprocal", 0, 0},
        {OP_RSQRT, "rsqrt", 0, 0},
        {OP_GELU, "gelu", 0, 0},
        {OP_SILU, "silu", 0, 0},
        {OP_MAX, "max (1 row)", 1, 0},
        {OP_ARGMAX, "argmax (1 row)", 1, 0},
        {OP_SOFTMAX, "softmax (1 row)", 1, 0},
        {OP_LAYERNORM, "layernorm (1 row)", 1, 0},
        {OP_RMSNORM, "rmsnorm (1 row)", 1, 0},
        {OP_TOPK, "topk k=8 (1 row)", 1, 0},
        {OP_ONEHOT, "onehot (1 index)", 1, 0},
        {OP_ONEHOT, "onehot, log2 n bits", 1, -1},
        {OP_SORT, "sort (1 row)", 1, 0},
    };
    int rc = MS_OK;
    for (size_t i = 0; i < sizeof ks / sizeof *ks && !rc; i++) {
        tot t;
        uint32_t m = ks[i].row ? 1 : (uint32_t)n, nn = ks[i].row ? (uint32_t)n : 1;
        if (ks[i].kind == OP_ONEHOT)
            m = 1;
        int bits = 0; /* -1: the index bound ⌈log2 n⌉ */
        while (ks[i].bits < 0 && bits < 64 && (1ull << bits) < n)
            bits++;
        rc = kernel_once(pr, cfg, lg, ks[i].kind, m, 1, nn, ks[i].kind == OP_TOPK ? 8 : -1,
                         ks[i].bits < 0 && !bits ? 1 : bits, &t);
        if (!rc)
            print_row(f, ks[i].label, &t, pr->n_parties);
    }
    return rc;
}

int proto_print_costs(FILE *f, const proto *pr, const proto_cfg *cfg, uint64_t n)
{
    cost_log lg;
    cost_log_init(&lg, pr->n_parties);
    eng *en = NULL;
    int rc = pr->cost_engine(cfg, &lg, &en);
    if (rc)
        return rc;
    int prof = cfg->compat[0] && strcmp(cfg->compat, "native");
    fprintf(f, "%s%s%s (%d parties%s), ring %d, f = %d: costs for n = %llu elements\n", pr->name,
            prof ? "/" : "", prof ? cfg->compat : "", pr->n_parties,
            pr->has_dealer ? " + dealer" : "", cfg->ring_bits, cfg->frac_bits,
            (unsigned long long)n);
    fprintf(f, "bytes sent: online bytes each party sends; offline: dealer bytes each party "
               "receives\n\n");
    print_header(f, "primitive");
    rc = print_prims(f, en, &lg, n);
    eng_free(en);
    fprintf(f, "\nkernels (kern.c) on n = %llu elements, or one row of n:\n\n",
            (unsigned long long)n);
    print_header(f, "kernel");
    if (!rc)
        rc = print_kernels(f, pr, cfg, &lg, n);
    cost_log_free(&lg);
    return rc;
}
