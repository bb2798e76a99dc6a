/* bench_mpc.c — one op of the real backend on loopback (forked parties + dealer, 127.0.0.1):
 * time per repetition (min and median after warm-up runs), rounds, online bytes of all
 * parties and the dealer's offline bytes, for semi2k (2PC + dealer) and aby3 (3PC); and the
 * CPU time and minor page faults of all nodes (getrusage) in the first run of the op in fresh
 * processes ("cold": the first warm-up run, or the first timed one without warm-up) and as the
 * median of the timed runs ("warm"), with the first run's time at P0 ("cold ms").
 *
 *   bench_mpc [--op NAME] [--n N] [--protocol semi2k|aby3] [--reps R] [--warmup W]
 *             [--bits W] [--set KEY=VALUE]... [--insecure-plaintext]
 *
 * The party channels run TLS 1.3 as `mpcsim party` does; --insecure-plaintext times the
 * protocol alone (as builds before TLS did). --bits W gives lt and eq the public bound w=W
 * on their operands' difference (op.h; default 0: the whole ring), e.g. 32 for MP-SPDZ's
 * sfix comparison at k = 31, LTZ on k + 1 bits (scripts/bench_mpspdz.sh). The inputs, in
 * [−1, 1) at f = 18, differ by less than 2^19, inside any bound from 21 up.
 *
 * Without --op it runs the standard list (make bench): mul, fmul, matmul 128×768·768×768,
 * lt, exp, reciprocal, rsqrt, softmax over 1,024, sort of 1,024, top-k 8 of 1,024, in both
 * protocols (or the one given). Prints figures; never fails on timing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "protocols/program/kern.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/program/proto.h"

#define REPS_MAX 1000

typedef struct bop {
    const char *name;
    int kind;
    uint32_t flags;
    size_t n_default; /* elements, or the row length of row ops */
    int pos;          /* 1: positive inputs (reciprocal, rsqrt) */
    const char *what;
} bop;

static const bop bops[] = {
    {"mul", OP_MUL, OPF_NO_TRUNC, 1 << 20, 0, "ring multiplication"},
    {"fmul", OP_MUL, 0, 1 << 20, 0, "fixed-point multiplication (mul + trunc)"},
    {"matmul", OP_MATMUL, OPF_FIXED_B | OPF_NO_TRUNC, 128, 0, "matmul 128x768 . 768x768 (weight)"},
    {"lt", OP_LT, 0, 1 << 16, 0, "less-than"},
    {"eq", OP_EQ, 0, 1 << 16, 0, "equality"},
    {"exp", OP_EXP, 0, 1 << 16, 0, "exp"},
    {"recip", OP_RECIPROCAL, 0, 1 << 16, 1, "reciprocal"},
    {"rsqrt", OP_RSQRT, 0, 1 << 16, 1, "rsqrt"},
    {"softmax", OP_SOFTMAX, 0, 1024, 0, "softmax, one row"},
    {"sort", -1, 0, 1024, 0, "sort, one row"},
    {"topk8", OP_TOPK, 0, 1024, 0, "top-8, one row"},
};

typedef struct job {
    op_program prog;
    int reps, warmup, pos;
    int bits; /* --bits: lt's and eq's bound (0: the whole ring) */
} job;

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Inputs in [-1, 1), or in [0.5, 8.5) for the positive-domain ops. */
static int bind(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    const job *j = ctx;
    uint64_t s = (uint64_t)t->name[0] * 7919;
    for (size_t i = 0; i < n; i++) {
        double u = (double)(mix(&s) >> 11) * 0x1p-53;
        out[i] = fx_encode(j->pos ? 0.5 + 8.0 * u : 2.0 * u - 1.0, 18);
    }
    return 1;
}

/* What a node writes: its traffic over one repetition, then (P0) every repetition's time; its
 * CPU time and minor faults in the first run (cold) and in every timed one. */
typedef struct node_out {
    mpc_op_stat st;
    int reps;
    uint64_t ns[REPS_MAX];
    uint64_t cold_ns; /* the first run's time (P0's is printed) */
    uint64_t cold_cpu_ns, cold_flt;
    uint64_t cpu_ns[REPS_MAX], flt[REPS_MAX];
} node_out;

/* This process's user + system CPU time (every thread: the heartbeat's too) and minor faults. */
static void usage_now(uint64_t *cpu_ns, uint64_t *flt)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
              (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
    *flt = (uint64_t)ru.ru_minflt;
}

static int node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    job *j = arg;
    mpc_program_run r = {0};
    node_out *no = calloc(1, sizeof *no);
    if (!no)
        return MS_ERR_NOMEM;
    int rc = mpc_run_setup(e, net, &j->prog, bind, j, &r, err);
    for (int q = 0; q < j->warmup + j->reps && !rc; q++) {
        uint64_t c0, f0, c1, f1;
        usage_now(&c0, &f0);
        rc = mpc_run_ops(e, net, &r, 0, j->prog.n_ops, err);
        usage_now(&c1, &f1);
        if (rc)
            continue;
        mpc_op_stat s = {0};
        for (size_t i = 0; i < j->prog.n_ops; i++) {
            const mpc_op_stat *o = &r.ops[i];
            for (int k = 0; k < MPC_NODES_MAX; k++)
                s.sent[k] += o->sent[k];
            s.offline_recv += o->offline_recv;
            s.offline_sent += o->offline_sent;
            s.rounds += o->rounds;
            s.ns += o->ns;
        }
        if (q == 0)
            no->cold_cpu_ns = c1 - c0, no->cold_flt = f1 - f0, no->cold_ns = s.ns;
        if (q < j->warmup)
            continue;
        no->cpu_ns[no->reps] = c1 - c0;
        no->flt[no->reps] = f1 - f0;
        no->st = s;
        no->ns[no->reps++] = s.ns;
    }
    if (!rc)
        fwrite(no, sizeof *no, 1, out);
    free(no);
    if (!rc)
        mpc_program_run_free(e, &r);
    return rc;
}

/* The one-op program of b for n (row length for row ops). */
static int build(job *j, const bop *b, size_t n)
{
    op_program *p = &j->prog;
    op_program_init(p);
    int kind = b->kind;
    uint32_t bt = 1, m = 1, k = 0, nn = (uint32_t)n;
    int32_t iarg = 0;
    if (kind == OP_MATMUL)
        m = (uint32_t)n, k = 768, nn = 768;
    if (kind == OP_SOFTMAX)
        iarg = -1;
    if (kind == OP_TOPK)
        iarg = 8;
    if (kind < 0) { /* sort: an op the build may not have */
        kind = op_kind_from_name("sort");
        if (kind < 0)
            return -1;
    }
    int mm = kind == OP_MATMUL;
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, bt, m, mm ? k : nn);
    uint32_t y = op_tensor_add(p, "y", mm ? OPT_WEIGHT : OPT_INPUT, DOM_ARITH, bt, mm ? k : m, nn);
    uint32_t zr = kind == OP_TOPK ? (uint32_t)iarg : m;
    uint32_t z = op_tensor_add(p, "z", OPT_TEMP, DOM_ARITH, bt, zr, nn);
    int two = kind == OP_MUL || kind == OP_MATMUL || kind == OP_LT || kind == OP_EQ;
    op o = {.kind = (uint16_t)kind,
            .phase = PHASE_DECODE,
            .cat = OPC_OTHER,
            .layer = -1,
            .group = -1,
            .batch = bt,
            .m = m,
            .k = k,
            .n = nn,
            .in = {x, two ? y : OP_NONE, OP_NONE},
            .out = z,
            .flags = b->flags,
            .iarg = iarg};
    if (kind == OP_LT || kind == OP_EQ)
        o.bits = (uint8_t)j->bits;
    op_emit(p, &o);
    j->pos = b->pos;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static double median(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    return n & 1 ? (double)v[n / 2] : 0.5 * (double)(v[n / 2 - 1] + v[n / 2]);
}

static int plaintext; /* --insecure-plaintext */

static void bench(const char *pname, const bop *b, size_t n, job *j, char **sets, int n_sets)
{
    if (build(j, b, n)) {
        printf("%-7s %-8s %8zu  (op not in this build)\n", pname, b->name, n);
        return;
    }
    mpc_launch l = {.deadline_ms = 900000, .timeout_ms = 120000, .plaintext = plaintext};
    errbuf e;
    proto_cfg_default(pname, &l.cfg, &e);
    for (int i = 0; i < n_sets; i++)
        if (proto_cfg_set_kv(&l.cfg, sets[i], &e)) {
            fprintf(stderr, "bench_mpc: --set %s: %s\n", sets[i], e.msg);
            exit(2);
        }
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    if (mpc_launch_run(&l, node, j, nr, &nodes, &e)) {
        fprintf(stderr, "bench_mpc: %s\n", e.msg);
        exit(1);
    }
    uint64_t online = 0, offline = 0, rounds = 0, ns[REPS_MAX];
    uint64_t cpu[REPS_MAX] = {0}, flt[REPS_MAX] = {0}, cold_cpu = 0, cold_flt = 0, cold_ns = 0;
    int reps = 0;
    for (int i = 0; i < nodes; i++) {
        if (nr[i].rc || nr[i].out_len < sizeof(node_out)) {
            fprintf(stderr, "bench_mpc: %s %s node %d: %s\n", pname, b->name, i, nr[i].err);
            exit(1);
        }
        const node_out *no = (const node_out *)nr[i].out;
        for (int k = 0; k < MPC_NODES_MAX; k++)
            online += no->st.sent[k];
        offline += no->st.offline_recv;
        cold_cpu += no->cold_cpu_ns;
        cold_flt += no->cold_flt;
        for (int q = 0; q < no->reps; q++)
            cpu[q] += no->cpu_ns[q], flt[q] += no->flt[q];
        if (i == 0) {
            rounds = no->st.rounds;
            reps = no->reps;
            cold_ns = no->cold_ns;
            memcpy(ns, no->ns, (size_t)reps * sizeof *ns);
        }
    }
    mpc_node_results_free(nr, nodes);
    op_program_free(&j->prog);
    double med = median(ns, reps) * 1e-6, mn = (double)ns[0] * 1e-6;
    double cpu_med = median(cpu, reps) * 1e-6, flt_med = median(flt, reps);
    size_t elems = b->kind == OP_MATMUL ? n * 768 : n;
    printf("%-7s %-8s %8zu %10.3f %10.3f %6llu %14llu %12llu %10.1f %10.1f %8llu %10.1f %8.0f "
           "%9.3f\n",
           pname, b->name, n, mn, med, (unsigned long long)rounds, (unsigned long long)online,
           (unsigned long long)offline, (double)(online + offline) / (double)elems,
           (double)cold_cpu * 1e-6, (unsigned long long)cold_flt, cpu_med, flt_med,
           (double)cold_ns * 1e-6);
    fflush(stdout);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_mpc [--op NAME] [--n N] [--protocol semi2k|aby3] [--reps R] "
               "[--warmup W] [--bits W] [--set KEY=VALUE]... [--insecure-plaintext]\nops:");
    for (size_t i = 0; i < sizeof bops / sizeof *bops; i++)
        fprintf(f, " %s", bops[i].name);
    fprintf(f, "\n");
}

static long num(const char *flag, const char *v, long lo, long hi)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > hi) {
        fprintf(stderr, "bench_mpc: %s wants an integer in [%ld, %ld], not '%s'\n", flag, lo, hi,
                v ? v : "");
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    const char *opname = NULL, *proto_name = NULL;
    long n = 0, reps = 5, warmup = 1, bits = 0;
    char *sets[32];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--op") && v)
            opname = v, i++;
        else if (!strcmp(a, "--protocol") && v)
            proto_name = v, i++;
        else if (!strcmp(a, "--n"))
            n = num(a, v, 1, 1L << 26), i++;
        else if (!strcmp(a, "--reps"))
            reps = num(a, v, 1, REPS_MAX), i++;
        else if (!strcmp(a, "--warmup"))
            warmup = num(a, v, 0, 1000), i++;
        else if (!strcmp(a, "--bits"))
            bits = num(a, v, 21, 64), i++;
        else if (!strcmp(a, "--insecure-plaintext"))
            plaintext = 1;
        else if (!strcmp(a, "--set") && v && n_sets < 32)
            sets[n_sets++] = argv[++i];
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "bench_mpc: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    const bop *only = NULL;
    if (opname) {
        for (size_t i = 0; i < sizeof bops / sizeof *bops; i++)
            if (!strcmp(bops[i].name, opname))
                only = &bops[i];
        if (!only) {
            fprintf(stderr, "bench_mpc: unknown op '%s'\n", opname);
            usage(stderr);
            return 2;
        }
    }
    if (proto_name && !proto_find(proto_name)) {
        fprintf(stderr, "bench_mpc: unknown protocol '%s' (semi2k, aby3)\n", proto_name);
        return 2;
    }
    static const char *const protos[] = {"semi2k", "aby3"};
    printf("# real backend on loopback, %s; time at P0 per repetition (local\n"
           "# compute + transfer), %ld warm-up + %ld timed repetitions; bytes: online sent by\n"
           "# all parties, offline dealer->parties, per repetition;\n"
           "# B/elem = (online + offline) / elements; CPU ms and minor page faults of all nodes\n"
           "# together: cold = the first run in fresh processes, warm = median of the timed runs;\n"
           "# cold ms: the first run's time at P0\n",
           plaintext ? "plaintext channels" : "TLS 1.3 channels", warmup, reps);
    printf("%-7s %-8s %8s %10s %10s %6s %14s %12s %10s %10s %8s %10s %8s %9s\n", "proto", "op", "n",
           "min ms", "median ms", "rounds", "online B", "offline B", "B/elem", "cold cpu",
           "cold flt", "warm cpu", "warm flt", "cold ms");
    job j = {.reps = (int)reps, .warmup = (int)warmup, .bits = bits < 64 ? (int)bits : 0};
    for (int q = 0; q < 2; q++) {
        if (proto_name && strcmp(proto_name, protos[q]))
            continue;
        for (size_t i = 0; i < sizeof bops / sizeof *bops; i++) {
            const bop *b = &bops[i];
            if (only ? b != only : !strcmp(b->name, "eq"))
                continue;
            bench(protos[q], b, n ? (size_t)n : b->n_default, &j, sets, n_sets);
        }
    }
    return 0;
}
