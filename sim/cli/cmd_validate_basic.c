/* cmd_validate_basic.c — `mpcsim validate --basic-ops`: SecretFlow's basic-op benchmark task
 * (docs/developer/benchmark/overall_benchmark.md; mpc-costs.md §3) on this backend, as its
 * script defines it (secretflow/secretflow@1b51502 benchmark_examples/sf_basic_ops_test/
 * test.py): with two parties (test_func_2, 349-350) P0 inputs x, P1 inputs y (n elements
 * each), z = x + y, x · y or [x < y]; with three (test_func_3, 271-295; add_3 and multiply_3,
 * 313-318) P2 also inputs w and z = x + (y + w) or x · (y · w), two ops (the script has no
 * three-party comparison, 358). z is revealed to every party. The task's wall time (until the
 * last party is done; the parties start together after a start barrier; the inputs and the
 * reveal are counted, where the three-party script times them apart) is measured at two
 * sizes, so the fixed part (rounds × latency) and the per-element part can be told apart,
 * beside the simulator's prediction of the same program. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd_validate.h"
#include "dbq.h"
#include "protocols/program/kern.h"
#include "protocols/backend/mpc_run.h"
#include "sim/secure/netshape.h"
#include "sim/engine/simulate.h"
#include "sim/secure/valid.h"

typedef struct bo_job {
    op_program p;
    int kind;
} bo_job;

static const int bo_kinds[] = {OP_ADD, OP_MUL, OP_LT};

/* The ops the script runs with np parties: add, multiply, less with two; add, multiply with
 * three. */
static size_t bo_n_kinds(int np) { return np == 3 ? 2 : sizeof bo_kinds / sizeof *bo_kinds; }

/* x (the client's, P0), y (the model owner's role, P1) and w (P2's, three parties): values in
 * [-1, 1), seeded. */
static int bo_bind(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    (void)ctx;
    uint64_t s = t->name[0] == 'x'   ? 0x9e3779b97f4a7c15ull
                 : t->name[0] == 'y' ? 0xc2b2ae3d27d4eb4full
                                     : 0x165667b19e3779f9ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64: test values, not shares */
        out[i] = fx_encode((double)(s >> 11) * 0x1p-52 - 1.0, 18);
    }
    return 1;
}

/* Two parties: z = x op y; three: t = y op w, z = x op t (add_3, multiply_3). */
static int bo_program(bo_job *j, int kind, uint64_t n, int np)
{
    op_program_init(&j->p);
    j->kind = kind;
    uint32_t x = op_tensor_add(&j->p, "x", OPT_INPUT, DOM_ARITH, 1, 1, (uint32_t)n);
    uint32_t y = op_tensor_add(&j->p, "y", OPT_WEIGHT, DOM_ARITH, 1, 1, (uint32_t)n);
    uint32_t w = np == 3 ? op_tensor_add(&j->p, "w", OPT_TEMP, DOM_ARITH, 1, 1, (uint32_t)n) : 0;
    uint32_t t = np == 3 ? op_tensor_add(&j->p, "t", OPT_TEMP, DOM_ARITH, 1, 1, (uint32_t)n) : 0;
    uint32_t z = op_tensor_add(&j->p, "z", OPT_TEMP, DOM_ARITH, 1, 1, (uint32_t)n);
    uint32_t r = op_tensor_add(&j->p, "r", OPT_OUTPUT, DOM_ARITH, 1, 1, (uint32_t)n);
    op in_x = {.kind = OP_INPUT,
               .layer = -1,
               .group = -1,
               .batch = 1,
               .m = 1,
               .n = (uint32_t)n,
               .in = {OP_NONE, OP_NONE, OP_NONE},
               .out = x,
               .iarg = 0};
    op in_y = in_x, in_w = in_x;
    in_y.out = y, in_y.iarg = 1;
    in_w.out = w, in_w.iarg = 2;
    op f = {.kind = kind,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = 1,
            .n = (uint32_t)n,
            .in = {x, y, OP_NONE},
            .out = z};
    op rv = {.kind = OP_REVEAL,
             .layer = -1,
             .group = -1,
             .batch = 1,
             .m = 1,
             .n = (uint32_t)n,
             .in = {z, OP_NONE, OP_NONE},
             .out = r,
             .iarg = -1};
    if (x == OP_NONE || y == OP_NONE || w == OP_NONE || t == OP_NONE || z == OP_NONE ||
        r == OP_NONE || op_emit(&j->p, &in_x) < 0 || op_emit(&j->p, &in_y) < 0)
        return 1;
    if (np == 3) {
        op g = f;
        g.in[0] = y, g.in[1] = w, g.out = t;
        f.in[1] = t;
        if (op_emit(&j->p, &in_w) < 0 || op_emit(&j->p, &g) < 0)
            return 1;
    }
    return op_emit(&j->p, &f) < 0 || op_emit(&j->p, &rv) < 0;
}

/* A node: setup (nothing bound but the inputs' plaintext), the start barrier, the ops. */
static int bo_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    bo_job *j = arg;
    mpc_program_run r;
    int rc = mpc_run_setup(e, net, &j->p, bo_bind, j, &r, err);
    if (!rc)
        rc = mpc_net_sync(net, err);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!rc)
        rc = mpc_run_ops(e, net, &r, 0, j->p.n_ops, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ns = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
    if (!rc)
        fwrite(&ns, sizeof ns, 1, out);
    if (r.prog)
        mpc_program_run_free(e, &r);
    return rc;
}

/* Measured (slowest party) and predicted time of one task. */
static int bo_task(const proto_cfg *cfg, const vm_args *a, const netshape *ns, uint64_t base,
                   int kind, uint64_t n, uint64_t *meas, uint64_t *pred, uint64_t *bytes, errbuf *e)
{
    const proto *pr = proto_find(cfg->name);
    bo_job j;
    if (bo_program(&j, kind, n, pr->n_parties)) {
        op_program_free(&j.p);
        return err_set(e, MS_ERR_NOMEM, "basic ops: out of memory");
    }
    mpc_launch l = {.cfg = *cfg,
                    .latency_ns = a->latency_ns,
                    .timeout_ms = 120000,
                    .deadline_ms = 1200000,
                    .plaintext = a->plaintext};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes = 0;
    int rc = ns ? netshape_launch(ns, &l, bo_node, &j, nr, &nodes, e)
                : mpc_launch_run(&l, bo_node, &j, nr, &nodes, e);
    *meas = 0;
    int f = rc ? -1 : mpc_launch_failed(nr, nodes);
    if (f >= 0)
        rc = err_set(e, nr[f].rc, "basic ops: %s %s node %d: %s", cfg->name, op_kind_name(kind), f,
                     nr[f].err);
    for (int i = 0; !rc && i < pr->n_parties; i++) {
        uint64_t t = 0;
        if (nr[i].out_len >= sizeof t)
            memcpy(&t, nr[i].out, sizeof t);
        *meas = t > *meas ? t : *meas;
    }
    if (nodes)
        mpc_node_results_free(nr, nodes);
    cost_log log;
    cost_log_init(&log, pr->n_parties);
    sim_result sr;
    memset(&sr, 0, sizeof sr);
    if (!rc)
        rc = proto_cost_program(pr, cfg, &j.p, &log, e);
    net_cfg net;
    net_uniform(&net, pr->n_parties, a->latency_ns + base, a->bandwidth_bps);
    if (ns) {
        net_set_burst(&net, net_tbf_burst_bytes(a->bandwidth_bps));
        net.wire = NET_WIRE_TCP;
        net.wire.mtu = NETSHAPE_MTU;
        net.wire.msg_bytes = MPC_FRAME_HDR;
        if (!a->plaintext) { /* TLS 1.3 records (RFC 8446 §5.2; net.h) */
            net.wire.tls_record = NET_WIRE_TLS13_RECORD;
            net.wire.tls_overhead = NET_WIRE_TLS13_OVERHEAD;
        }
    }
    sim_opts so = {0};
    if (!rc)
        rc = sim_run(&net, &a->mach, &j.p, &log, &so, &sr, e);
    *pred = sr.latency_ns;
    *bytes = 0;
    for (int p = 0; p < pr->n_parties; p++)
        *bytes += sr.total.bytes_sent[p];
    sim_result_free(&sr);
    cost_log_free(&log);
    op_program_free(&j.p);
    return rc;
}

/* One row of the table: 80 columns (bytes in report's units, the per-element marginal after
 * the second size), or --wide's (raw bytes, the time for 1e8 elements). */
static void bo_row(const vm_args *a, const char *pname, int kind, const uint64_t *sizes,
                   const uint64_t *meas, const uint64_t *pred, const uint64_t *bytes, int s)
{
    double dn = (double)(sizes[1] - sizes[0]);
    double mm = ((double)meas[1] - (double)meas[0]) * 1e-3 / dn; /* us per element */
    double mp = ((double)pred[1] - (double)pred[0]) * 1e-3 / dn;
    if (a->wide) {
        printf("%-7s %-4s %9llu | %12llu | %10.1f %10.1f %+6.1f%%", pname, op_kind_name(kind),
               (unsigned long long)sizes[s], (unsigned long long)bytes[s], (double)pred[s] * 1e-6,
               (double)meas[s] * 1e-6, valid_err_pct(pred[s], meas[s]));
        if (s == 1)
            printf(" | measured %.3f us, predicted %.3f us; x1e8: %.1f s measured", mm, mp,
                   mm * 1e-6 * 1e8);
        printf("\n");
        return;
    }
    char b[32];
    dbq_bytes(b, sizeof b, (double)bytes[s]);
    printf("%-6s %-3s %7llu %9s %9.1f %9.1f %+6.1f%%", pname, op_kind_name(kind),
           (unsigned long long)sizes[s], b, (double)pred[s] * 1e-6, (double)meas[s] * 1e-6,
           valid_err_pct(pred[s], meas[s]));
    if (s == 1)
        printf(" %8.3f us %8.3f us", mm, mp);
    printf("\n");
}

int validate_basic(const vm_args *a, const proto_cfg *cfgs, int n_cfgs, uint64_t n, errbuf *e)
{
    uint64_t sizes[2] = {n / 4 ? n / 4 : 1, n};
    if (a->wide)
        printf("%-7s %-4s %9s | %12s | %10s %10s %7s | %s\n", "proto", "op", "n", "online bytes",
               "pred ms", "meas ms", "error", "per element (marginal over the two sizes)");
    else
        printf("%-6s %-3s %7s %9s %9s %9s %7s %11s %11s\n", "proto", "op", "n", "bytes", "pred ms",
               "meas ms", "error", "meas/elem", "pred/elem");
    int rc = MS_OK;
    for (int q = 0; !rc && q < n_cfgs; q++) {
        netshape ns = {0};
        if (a->shape)
            rc = netshape_up(&ns, 3, a->bandwidth_bps, e);
        uint64_t base = 0;
        if (!rc)
            rc = valid_round_ns(&cfgs[q], a->latency_ns, a->shape ? &ns : NULL, a->plaintext, &base,
                                e);
        size_t nk = bo_n_kinds(proto_find(cfgs[q].name)->n_parties);
        for (size_t k = 0; !rc && k < nk; k++) {
            uint64_t meas[2], pred[2], bytes[2];
            for (int s = 0; !rc && s < 2; s++) {
                rc = bo_task(&cfgs[q], a, a->shape ? &ns : NULL, base, bo_kinds[k], sizes[s],
                             &meas[s], &pred[s], &bytes[s], e);
                if (!rc)
                    bo_row(a, cfgs[q].name, bo_kinds[k], sizes, meas, pred, bytes, s);
            }
        }
        printf("# %s: round overhead %.1f us (probe)\n", cfgs[q].name, (double)base * 1e-3);
        netshape_down(&ns);
    }
    if (!rc && !a->wide)
        printf("# bytes: online, all parties; per elem: the time per element between the two\n"
               "# sizes (marginal); --wide: raw bytes and the time of 1e8 elements\n");
    return rc;
}
