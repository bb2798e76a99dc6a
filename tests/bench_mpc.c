/* bench_mpc.c — the real backend on loopback (forked parties + dealer, 127.0.0.1): ring
 * multiplications/s, fixed-point multiplications/s, a 128×768·768×768 matmul, comparisons/s
 * and exp/s, for semi2k (2PC + dealer) and aby3 (3PC). Prints figures; never fails on timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/kern.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/program/proto.h"

typedef struct job {
    op_program prog;
    size_t reps;
    const char *msb; /* protocol parameter msb, NULL: the default */
} job;

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int bind(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    (void)ctx;
    uint64_t s = (uint64_t)t->name[0] * 7919;
    for (size_t i = 0; i < n; i++)
        out[i] = fx_encode((double)(mix(&s) >> 11) * 0x1p-52 - 1.0, 18);
    return 1;
}

/* Runs the one-op program reps times; reports the best op time and P0's traffic of one run. */
static int node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    job *j = arg;
    mpc_program_run r;
    int rc = mpc_run_setup(e, net, &j->prog, bind, NULL, &r, err);
    uint64_t best = UINT64_MAX;
    mpc_op_stat st = {0};
    for (size_t q = 0; q < j->reps && !rc; q++) {
        rc = mpc_run_ops(e, net, &r, 0, j->prog.n_ops, err);
        uint64_t ns = 0;
        for (size_t i = 0; i < j->prog.n_ops; i++)
            ns += r.ops[i].ns;
        if (ns < best) {
            best = ns;
            st = r.ops[j->prog.n_ops - 1];
        }
    }
    st.ns = best;
    if (!rc)
        fwrite(&st, sizeof st, 1, out);
    mpc_program_run_free(e, &r);
    return rc;
}

static void one_op(job *j, int kind, uint32_t b, uint32_t m, uint32_t k, uint32_t n, uint32_t flags)
{
    op_program *p = &j->prog;
    op_program_init(p);
    int mm = kind == OP_MATMUL;
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, b, m, mm ? k : n);
    uint32_t y = op_tensor_add(p, "y", mm && (flags & OPF_FIXED_B) ? OPT_WEIGHT : OPT_INPUT, DOM_ARITH,
                               mm ? 1 : b, mm ? k : m, n);
    uint32_t z = op_tensor_add(p, "z", OPT_TEMP, DOM_ARITH, b, m, n);
    op o = {.kind = (uint16_t)kind, .phase = PHASE_DECODE, .cat = OPC_OTHER, .layer = -1, .group = -1,
            .batch = b, .m = m, .k = k, .n = n, .in = {x, y, OP_NONE}, .out = z, .flags = flags};
    op_emit(p, &o);
}

static double run(const char *pname, job *j, mpc_op_stat *st)
{
    mpc_launch l = {.deadline_ms = 600000, .timeout_ms = 60000};
    errbuf e;
    proto_cfg_default(pname, &l.cfg, &e);
    if (j->msb && proto_cfg_set(&l.cfg, "msb", j->msb, &e)) {
        fprintf(stderr, "bench_mpc: %s\n", e.msg);
        exit(1);
    }
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    if (mpc_launch_run(&l, node, j, nr, &nodes, &e)) {
        fprintf(stderr, "bench_mpc: %s\n", e.msg);
        exit(1);
    }
    for (int i = 0; i < nodes; i++)
        if (nr[i].rc) {
            fprintf(stderr, "bench_mpc: %s node %d: %s\n", pname, i, nr[i].err);
            exit(1);
        }
    memcpy(st, nr[0].out, sizeof *st);
    mpc_op_stat p1;
    memcpy(&p1, nr[1].out, sizeof p1);
    st->offline_recv = p1.offline_recv; /* semi2k: every correction goes to P1 */
    mpc_node_results_free(nr, nodes);
    return (double)st->ns * 1e-9;
}

static void line(const char *pname, const char *what, double items, const char *unit, job *j)
{
    mpc_op_stat st;
    double s = run(pname, j, &st);
    uint64_t sent = 0;
    for (int q = 0; q < MPC_NODES_MAX; q++)
        sent += st.sent[q];
    printf("%-7s %-34s %10.3f ms  %12.3g %s/s  rounds %3llu  P0 sent %9.3f MB  offline->P1 %8.3f MB\n", pname, what,
           s * 1e3, items / s, unit, (unsigned long long)st.rounds, (double)sent / 1e6, (double)st.offline_recv / 1e6);
    op_program_free(&j->prog);
}

int main(void)
{
    static const char *const protos[] = {"semi2k", "aby3"};
    printf("# real backend on loopback, best of 5 runs, time at P0 (local compute + transfer)\n");
    for (int q = 0; q < 2; q++) {
        const char *pn = protos[q];
        job j = {.reps = 5};
        size_t n = 1 << 20;
        one_op(&j, OP_MUL, 1, 1, 0, (uint32_t)n, OPF_NO_TRUNC);
        line(pn, "ring mul, 2^20 elements", (double)n, "mul", &j);
        one_op(&j, OP_MUL, 1, 1, 0, (uint32_t)n, 0);
        line(pn, "fixed-point mul (mul+trunc), 2^20", (double)n, "fmul", &j);
        one_op(&j, OP_MATMUL, 1, 128, 768, 768, OPF_FIXED_B | OPF_NO_TRUNC);
        line(pn, "matmul 128x768 . 768x768 (weight)", 128.0 * 768 * 768, "MAC", &j);
        one_op(&j, OP_MATMUL, 1, 128, 768, 768, OPF_NO_TRUNC);
        line(pn, "matmul 128x768 . 768x768 (secret)", 128.0 * 768 * 768, "MAC", &j);
        n = 1 << 16;
        one_op(&j, OP_LT, 1, 1, 0, (uint32_t)n, 0);
        line(pn, "lt (comparison), 2^16", (double)n, "cmp", &j);
        j.msb = "carry";
        one_op(&j, OP_LT, 1, 1, 0, (uint32_t)n, 0);
        line(pn, "lt, msb carry, 2^16", (double)n, "cmp", &j);
        j.msb = NULL;
        one_op(&j, OP_EXP, 1, 1, 0, (uint32_t)n, 0);
        line(pn, "exp, 2^16", (double)n, "exp", &j);
    }
    return 0;
}
