/* proto_cfg.c — protocol parameters by name (scenario files, CLI) and the printed cost table
 * of `mpcsim list protocols --costs`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "kern.h"
#include "proto.h"

/* ---- parameters by name ------------------------------------------------------------------ */

enum { K_INT, K_DOUBLE, K_BOOL, K_STR };

static const struct cfg_key {
    const char *name;
    int type;
    size_t off;
    double lo, hi;
    const char *help;
} cfg_keys[] = {
    {"ring_bits", K_INT, offsetof(proto_cfg, ring_bits), 64, 64, "ring width; only 64"},
    {"frac_bits", K_INT, offsetof(proto_cfg, frac_bits), 8, 24,
     "fixed-point fraction bits (SPU FM64: 18)"},
    {"exp_iters", K_INT, offsetof(proto_cfg, exp_iters), 1, 16,
     "Taylor exp iterations (SPU 8, PUMA 5)"},
    {"recip_iters", K_INT, offsetof(proto_cfg, recip_iters), 0, 8,
     "Goldschmidt iterations for 1/x (SPU 2)"},
    {"rsqrt_iters", K_INT, offsetof(proto_cfg, rsqrt_iters), 0, 8,
     "Newton iterations for 1/sqrt(x)"},
    {"softmax_clip", K_DOUBLE, offsetof(proto_cfg, softmax_clip), -64, -1,
     "softmax: exp masked to 0 below this (PUMA -14)"},
    {"beaver_cache", K_BOOL, offsetof(proto_cfg, beaver_cache), 0, 1,
     "semi2k: reuse a fixed operand's opened mask"},
    {"trunc_local", K_BOOL, offsetof(proto_cfg, trunc_local), 0, 1,
     "semi2k: SecureML local truncation (0 rounds)"},
    {"approx", K_STR, offsetof(proto_cfg, approx), 0, 0,
     "activation approximations: puma | sigmoid (SiLU as x·σ(x))"},
    {"msb", K_STR, offsetof(proto_cfg, msb), 0, 0,
     "comparisons: packed (bit-packed carry tree, daBit b2a) | ks (full A2B adder) | "
     "carry (carry-out tree of words)"},
    {"topk", K_STR, offsetof(proto_cfg, topk), 0, 0,
     "top-k: network (oblivious) | quickselect (shuffle, revealed pivot comparisons: SPU)"},
    {"normalize", K_STR, offsetof(proto_cfg, normalize), 0, 0,
     "reciprocal/rsqrt normalisation: bitdec (one bit decomposition) | thresholds (a "
     "comparison per power of two)"},
};
#define N_KEYS (sizeof cfg_keys / sizeof *cfg_keys)

/* The accepted values of the string parameters, and their fields' sizes. */
static const struct str_key {
    const char *name;
    const char *v[4];
    size_t size;
} str_keys[] = {
    {"approx", {"puma", "sigmoid"}, sizeof(((proto_cfg *)0)->approx)},
    {"msb", {"packed", "ks", "carry"}, sizeof(((proto_cfg *)0)->msb)},
    {"topk", {"network", "quickselect"}, sizeof(((proto_cfg *)0)->topk)},
    {"normalize", {"bitdec", "thresholds"}, sizeof(((proto_cfg *)0)->normalize)},
};

const char *const *proto_cfg_keys(size_t *n)
{
    static const char *names[N_KEYS];
    for (size_t i = 0; i < N_KEYS; i++)
        names[i] = cfg_keys[i].name;
    *n = N_KEYS;
    return names;
}

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on"))
        return *out = 1, 0;
    if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off"))
        return *out = 0, 0;
    return -1;
}

int proto_cfg_set(proto_cfg *cfg, const char *key, const char *value, errbuf *e)
{
    const struct cfg_key *k = NULL;
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(cfg_keys[i].name, key))
            k = &cfg_keys[i];
    if (!k) {
        size_t n;
        const char *const *names = proto_cfg_keys(&n);
        const char *dym = did_you_mean(key, names, n);
        if (dym)
            return err_set(e, MS_ERR_INPUT,
                           "error: unknown protocol parameter '%s' (did you mean '%s'?)", key, dym);
        return err_set(e, MS_ERR_INPUT,
                       "error: unknown protocol parameter '%s' (valid: ring_bits, frac_bits, "
                       "exp_iters, recip_iters, rsqrt_iters, softmax_clip, beaver_cache, "
                       "trunc_local, approx, msb, topk, normalize)", key);
    }
    char *field = (char *)cfg + k->off;
    switch (k->type) {
    case K_INT: {
        long long v;
        if (parse_i64(value, &v) || v < (long long)k->lo || v > (long long)k->hi)
            return err_set(e, MS_ERR_RANGE,
                           "error: protocol parameter '%s' must be an integer in [%g, %g] (%s), "
                           "got '%s'", key, k->lo, k->hi, k->help, value);
        *(int *)field = (int)v;
        return MS_OK;
    }
    case K_DOUBLE: {
        double v;
        if (parse_double(value, &v) || v < k->lo || v > k->hi)
            return err_set(e, MS_ERR_RANGE,
                           "error: protocol parameter '%s' must be a number in [%g, %g] (%s), "
                           "got '%s'", key, k->lo, k->hi, k->help, value);
        *(double *)field = v;
        return MS_OK;
    }
    case K_BOOL: {
        int v;
        if (parse_bool(value, &v))
            return err_set(e, MS_ERR_INPUT,
                           "error: protocol parameter '%s' must be true or false (%s), got '%s'",
                           key, k->help, value);
        *(int *)field = v;
        return MS_OK;
    }
    default: {
        const struct str_key *sk = &str_keys[0];
        for (size_t i = 0; i < sizeof str_keys / sizeof *str_keys; i++)
            if (!strcmp(str_keys[i].name, key))
                sk = &str_keys[i];
        int ok = 0, nv = 0;
        char list[96] = "";
        for (; nv < 4 && sk->v[nv]; nv++)
            ok |= !strcmp(value, sk->v[nv]);
        for (int j = 0; j < nv; j++) /* 'a' or 'b'; 'a', 'b' or 'c' */
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'",
                     j == 0 ? "" : j == nv - 1 ? " or " : ", ", sk->v[j]);
        if (!ok)
            return err_set(e, MS_ERR_INPUT,
                           "error: protocol parameter '%s' must be %s, got '%s'", key, list,
                           value);
        snprintf(field, sk->size, "%s", value);
        return MS_OK;
    }
    }
}

int proto_cfg_set_kv(proto_cfg *cfg, const char *kv, errbuf *e)
{
    const char *eq = strchr(kv, '=');
    char key[64];
    if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key)
        return err_set(e, MS_ERR_USAGE, "error: --set wants KEY=VALUE (a protocol parameter), not '%s'", kv);
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
static int kernel_once(const proto *pr, const proto_cfg *cfg, cost_log *lg, int kind,
                       uint32_t m, uint32_t k, uint32_t n, int32_t iarg, int bits, tot *out)
{
    op_program p;
    op_program_init(&p);
    int rc = MS_ERR_NOMEM;
    uint32_t a = op_tensor_add(&p, "a", OPT_TEMP, DOM_ARITH, 1, m,
                               kind == OP_ONEHOT ? 1 : op_kind_shape(kind) == OPS_MM ? k : n);
    uint32_t b = op_tensor_add(&p, "b", OPT_WEIGHT, DOM_ARITH, 1, op_kind_shape(kind) == OPS_MM ? k : m, n);
    uint32_t c = op_tensor_add(&p, "c", OPT_WEIGHT, DOM_ARITH, 1, 1, n);
    uint32_t oo = op_tensor_add(&p, "o", OPT_TEMP, DOM_ARITH, 1, kind == OP_TOPK ? m * (uint32_t)iarg : m,
                                kind == OP_MAX ? 1 : n);
    op o = {.kind = (uint16_t)kind, .layer = -1, .group = -1, .batch = 1, .m = m, .k = k, .n = n,
            .in = {a, b, c}, .out = oo, .iarg = iarg, .bits = (uint8_t)bits};
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

int proto_print_costs(FILE *f, const proto *pr, const proto_cfg *cfg, uint64_t n)
{
    cost_log lg;
    cost_log_init(&lg, pr->n_parties);
    eng *en = NULL;
    int rc = pr->cost_engine(cfg, &lg, &en);
    if (rc)
        return rc;
    int np = pr->n_parties;
    fprintf(f, "%s (%d parties%s), ring %d, f = %d: costs for n = %llu elements\n", pr->name, np,
            pr->has_dealer ? " + dealer" : "", cfg->ring_bits, cfg->frac_bits,
            (unsigned long long)n);
    fprintf(f, "bytes sent: online bytes each party sends; offline: dealer bytes each party "
               "receives\n\n");
    fprintf(f, "| %-24s | %6s | %12s | %12s | %12s | %12s | %12s | %12s |\n", "primitive",
            "rounds", "sent P0", "sent P1", "sent P2", "offline P0", "offline P1", "offline P2");
    fprintf(f, "|%s|%s|%s|%s|%s|%s|%s|%s|\n", "--------------------------", "--------",
            "--------------", "--------------", "--------------", "--------------",
            "--------------", "--------------");
    static const struct { int prim, variant; const char *label; } rows[] = {
        {PRIM_INPUT, 0, "input (owner P0)"},  {PRIM_OPEN, 0, "open (all)"},
        {PRIM_OPEN, 1, "open (to P0)"},       {PRIM_MUL, 0, "mul"},
        {PRIM_SQUARE, 0, "square"},           {PRIM_MATMUL, 0, "matmul 1xn.nxn"},
        {PRIM_MATMUL, 1, "matmul 1xn.nxn fixed B"}, {PRIM_TRUNC, 0, "trunc"},
        {PRIM_AND, 0, "and_bb"},              {PRIM_B2A, 0, "b2a"},
        {PRIM_ANDBITS, 0, "and_bits (63 bits)"}, {PRIM_ANDBITS, 1, "and_bits priv (63 bits)"},
        {PRIM_PAIR, 0, "bool_pair (64 bits)"}, {PRIM_B2ABIT, 0, "b2a_bit"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows && !rc; i++) {
        cost_log_clear(&lg);
        rc = prim_once(en, rows[i].prim, n, rows[i].variant);
        tot t = sum_log(&lg);
        print_row(f, rows[i].label, &t, np);
    }
    eng_free(en);
    static const struct { int kind; const char *label; int row, bits; } ks[] = {
        {OP_LT, "lt", 0, 0},          {OP_EQ, "eq", 0, 0},          {OP_SELECT, "select", 0, 0},
        {OP_A2B, "a2b", 0, 0},      {OP_EXP, "exp", 0, 0},        {OP_RECIPROCAL, "reciprocal", 0, 0},
        {OP_RSQRT, "rsqrt", 0, 0},    {OP_GELU, "gelu", 0, 0},      {OP_SILU, "silu", 0, 0},
        {OP_MAX, "max (1 row)", 1, 0}, {OP_ARGMAX, "argmax (1 row)", 1, 0},
        {OP_SOFTMAX, "softmax (1 row)", 1, 0}, {OP_LAYERNORM, "layernorm (1 row)", 1, 0},
        {OP_RMSNORM, "rmsnorm (1 row)", 1, 0}, {OP_TOPK, "topk k=8 (1 row)", 1, 0},
        {OP_ONEHOT, "onehot (1 index)", 1, 0}, {OP_ONEHOT, "onehot, log2 n bits", 1, -1},
        {OP_SORT, "sort (1 row)", 1, 0},
    };
    fprintf(f, "\nkernels (kern.c) on n = %llu elements, or one row of n:\n\n",
            (unsigned long long)n);
    fprintf(f, "| %-24s | %6s | %12s | %12s | %12s | %12s | %12s | %12s |\n", "kernel", "rounds",
            "sent P0", "sent P1", "sent P2", "offline P0", "offline P1", "offline P2");
    fprintf(f, "|%s|%s|%s|%s|%s|%s|%s|%s|\n", "--------------------------", "--------",
            "--------------", "--------------", "--------------", "--------------",
            "--------------", "--------------");
    for (size_t i = 0; i < sizeof ks / sizeof *ks && !rc; i++) {
        tot t;
        uint32_t m = ks[i].row ? 1 : (uint32_t)n, nn = ks[i].row ? (uint32_t)n : 1;
        if (ks[i].kind == OP_ONEHOT)
            m = 1;
        int bits = 0; /* -1: the index bound ⌈log2 n⌉ */
        while (ks[i].bits < 0 && bits < 64 && (1ull << bits) < n)
            bits++;
        rc = kernel_once(pr, cfg, &lg, ks[i].kind, m, 1, nn, ks[i].kind == OP_TOPK ? 8 : -1,
                         ks[i].bits < 0 && !bits ? 1 : bits, &t);
        if (!rc)
            print_row(f, ks[i].label, &t, np);
    }
    cost_log_free(&lg);
    return rc;
}
