/* cmd_validate.c — `mpcsim validate --primitives`: every communicating primitive of eng.h run on
 * the real backend (forked parties on loopback) and on the protocol's cost engine, printed side
 * by side: rounds, online bytes sent by each party, offline bytes, and time (the backend's
 * measured wall time at P0 against the simulator's latency for the same network). Bytes and
 * rounds must be equal (exit status 1 otherwise); time is reported, not judged. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "machine.h"
#include "mpc_run.h"
#include "net.h"
#include "proto.h"
#include "simulate.h"

typedef struct vprim {
    const char *label;
    int prim;
    int arg;        /* open: receiving party; input: owner */
    uint32_t flags; /* matmul */
} vprim;

static const vprim vprims[] = {
    {"input(P0)", PRIM_INPUT, 0, 0},  {"open(all)", PRIM_OPEN, -1, 0}, {"open(P1)", PRIM_OPEN, 1, 0},
    {"mul", PRIM_MUL, 0, 0},          {"square", PRIM_SQUARE, 0, 0},   {"matmul", PRIM_MATMUL, 0, 0},
    {"matmul(cached B)", PRIM_MATMUL, 0, OPF_FIXED_B},                  {"trunc", PRIM_TRUNC, 0, 0},
    {"and_bb", PRIM_AND, 0, 0},       {"b2a", PRIM_B2A, 0, 0},
};
#define N_VPRIMS (sizeof vprims / sizeof vprims[0])

typedef struct vjob {
    const vprim *v;
    uint32_t n; /* elements; matmul: n×n·n×n */
    uint64_t *plain;
} vjob;

static size_t elems(const vjob *j, int which) /* 0: x, 1: y, 2: z */
{
    (void)which;
    return j->v->prim == PRIM_MATMUL ? (size_t)j->n * j->n : j->n;
}

/* Calls the primitive on e (cost or backend engine) with x owned by P0 and y by P1. */
static int call_prim(eng *e, const vjob *j, mpc_val *x, mpc_val *y, mpc_val *z, uint64_t *out)
{
    int dom = j->v->prim == PRIM_AND || j->v->prim == PRIM_B2A ? DOM_BOOL : DOM_ARITH;
    const vprim *v = j->v;
    int rc = e->vt->alloc(e, z, elems(j, 2), v->prim == PRIM_AND ? DOM_BOOL : DOM_ARITH);
    if (rc)
        return rc;
    switch (v->prim) {
    case PRIM_INPUT: z->dom = (uint8_t)dom; return e->vt->input(e, z, v->arg, j->plain);
    case PRIM_OPEN: return e->vt->open(e, out, x, v->arg);
    case PRIM_MUL: return e->vt->mul(e, z, x, y);
    case PRIM_SQUARE: return e->vt->square(e, z, x);
    case PRIM_MATMUL: return e->vt->matmul(e, z, x, y, 1, j->n, j->n, j->n, v->flags, 1);
    case PRIM_TRUNC: return e->vt->trunc(e, z, x, e->cfg.frac_bits);
    case PRIM_AND: return e->vt->and_bb(e, z, x, y);
    case PRIM_B2A: return e->vt->b2a(e, z, x);
    default: return MS_ERR_INTERNAL;
    }
}

/* Backend node: share x and y, (cache y's mask), then the primitive between two snapshots. */
static int vnode(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    vjob *j = arg;
    int dom = j->v->prim == PRIM_AND || j->v->prim == PRIM_B2A ? DOM_BOOL : DOM_ARITH;
    mpc_val x = {0}, y = {0}, z = {0};
    uint64_t *res = calloc(elems(j, 0) + 1, 8);
    int rc = e->vt->alloc(e, &x, elems(j, 0), dom);
    if (!rc)
        rc = e->vt->input(e, &x, 0, j->plain);
    if (!rc)
        rc = e->vt->alloc(e, &y, elems(j, 1), dom);
    if (!rc)
        rc = e->vt->input(e, &y, 1, j->plain);
    if (!rc && (j->v->flags & OPF_FIXED_B))
        rc = mpc_engine_setup_fixed(e, 1, &y, NULL);
    uint64_t one[1];
    mpc_val x1 = x;
    x1.n = 1;
    if (!rc) /* a symmetric round so every party starts the timed call together */
        rc = e->vt->open(e, one, &x1, -1);
    mpc_net_stats a = *mpc_net_get_stats(net);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!rc)
        rc = call_prim(e, j, &x, &y, &z, res);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!rc) {
        mpc_op_stat st;
        mpc_stat_between(&a, mpc_net_get_stats(net), (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec)), &st);
        fwrite(&st, sizeof st, 1, out);
    } else
        err_set(err, rc, "%s", mpc_engine_error(e));
    e->vt->release(e, &x);
    e->vt->release(e, &y);
    e->vt->release(e, &z);
    free(res);
    return rc;
}

/* Prediction: the same call on the cost engine; time from the simulator on net/mach. */
static int predict(const proto *pr, const proto_cfg *cfg, const vjob *j, const net_cfg *net,
                   const machine_profile *mach, cost_totals *tot, uint64_t *ns, errbuf *err)
{
    cost_log log;
    cost_log_init(&log, pr->n_parties);
    eng *e = NULL;
    int rc = pr->cost_engine(cfg, &log, &e);
    if (rc) {
        cost_log_free(&log);
        return err_set(err, rc, "cannot create the %s cost engine", pr->name);
    }
    int dom = j->v->prim == PRIM_AND || j->v->prim == PRIM_B2A ? DOM_BOOL : DOM_ARITH;
    mpc_val x = {.n = elems(j, 0), .dom = (uint8_t)dom}, y = {.n = elems(j, 1), .dom = (uint8_t)dom}, z = {0};
    rc = call_prim(e, j, &x, &y, &z, NULL);
    eng_free(e);
    memset(tot, 0, sizeof *tot);
    for (size_t i = 0; i < log.n; i++) {
        log.r[i].op = 0;
        cost_totals_add_round(tot, &log.r[i], pr->n_parties);
    }
    /* a one-op program to hang the rounds on */
    op_program p;
    op_program_init(&p);
    uint32_t t = op_tensor_add(&p, "x", OPT_TEMP, DOM_ARITH, 1, 1, j->n);
    op o = {.kind = OP_MUL, .layer = -1, .group = -1, .batch = 1, .m = 1, .n = j->n, .in = {t, t, OP_NONE}, .out = t};
    op_emit(&p, &o);
    sim_opts so = {0};
    sim_result sr;
    memset(&sr, 0, sizeof sr);
    if (!rc)
        rc = sim_run(net, mach, &p, &log, &so, &sr, err);
    *ns = sr.latency_ns;
    sim_result_free(&sr);
    op_program_free(&p);
    cost_log_free(&log);
    return rc;
}

/* One primitive: predicted and measured, printed as a row; *bad |= any count differs. */
static int validate_row(const proto *pr, const proto_cfg *cfg, const vprim *v, uint32_t n,
                        const net_cfg *net, const machine_profile *mach, double lat_ms, int *bad,
                        errbuf *e)
{
    vjob j = {.v = v, .n = n};
    if (v->prim == PRIM_MATMUL)
        j.n = (uint32_t)fmax(1, floor(sqrt((double)n)));
    j.plain = calloc(elems(&j, 0) + 1, 8);
    if (!j.plain)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < elems(&j, 0); i++)
        j.plain[i] = (i * 0x9e3779b97f4a7c15ull) >> 30;
    cost_totals tot;
    uint64_t pns = 0;
    int rc = predict(pr, cfg, &j, net, mach, &tot, &pns, e);
    mpc_launch l = {.cfg = *cfg, .latency_ns = (uint64_t)llround(lat_ms * 1e6), .deadline_ms = 120000};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes = 0;
    if (!rc)
        rc = mpc_launch_run(&l, vnode, &j, nr, &nodes, e);
    for (int i = 0; !rc && i < nodes; i++)
        if (nr[i].rc || nr[i].out_len < sizeof(mpc_op_stat))
            rc = err_set(e, nr[i].rc ? nr[i].rc : MS_ERR_INTERNAL, "node %d: %s", i, nr[i].err);
    free(j.plain);
    if (rc) {
        mpc_node_results_free(nr, nodes);
        return rc;
    }
    /* per party: rounds and bytes sent must equal the prediction; time until the last is done */
    uint64_t sent[MPC_PARTIES_MAX] = {0}, moff = 0, mns = 0, poff = 0, rounds[MPC_PARTIES_MAX];
    int ok = 1;
    for (int i = 0; i < pr->n_parties; i++) {
        mpc_op_stat t;
        memcpy(&t, nr[i].out, sizeof t);
        for (int d = 0; d < MPC_NODES_MAX; d++)
            sent[i] += t.sent[d];
        moff += t.offline_recv;
        mns = t.ns > mns ? t.ns : mns;
        rounds[i] = t.rounds;
        poff += tot.offline_bytes[i];
        ok &= t.rounds == tot.rounds && sent[i] == tot.bytes_sent[i];
    }
    ok &= moff == poff;
    *bad |= !ok;
    printf("%-7s %-17s %8llu | %4llu/%-4llu%s | %11llu/%-11llu | %11llu/%-11llu | %9llu/%-9llu | %8.3f/%-8.3f %s\n",
           pr->name, v->label, (unsigned long long)elems(&j, 0), (unsigned long long)tot.rounds,
           (unsigned long long)rounds[0], "  ", (unsigned long long)tot.bytes_sent[0], (unsigned long long)sent[0],
           (unsigned long long)tot.bytes_sent[1], (unsigned long long)sent[1], (unsigned long long)poff,
           (unsigned long long)moff, (double)pns * 1e-6, (double)mns * 1e-6, ok ? "ok" : "MISMATCH");
    mpc_node_results_free(nr, nodes);
    return MS_OK;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim validate --primitives [--protocol P] [--n N] [--latency-ms X]\n"
            "                       [--bandwidth RATE] [--profile NAME]\n\n"
            "Runs every communicating primitive on the real backend (parties forked on 127.0.0.1)\n"
            "and on the cost engine, and prints predicted vs measured rounds, bytes and time.\n"
            "Exit status 1 if any bytes or rounds differ.\n\n"
            "options:\n"
            "      --primitives      validate the primitive layer (the only mode of this build)\n"
            "  -p, --protocol P      semi2k or aby3 (default: both)\n"
            "  -n, --n N             elements per call (matmul: N×N·N×N with N = sqrt) (default 4096)\n"
            "      --latency-ms X    one-way latency injected by the backend and simulated (default 1)\n"
            "      --bandwidth RATE  simulated link bandwidth (default 10Gbps, about loopback)\n"
            "      --profile NAME    machine profile for simulated compute (default: default)\n"
            "  -h, --help            this help\n");
}

int cmd_validate(int argc, char **argv)
{
    static const struct option opts[] = {{"primitives", no_argument, 0, 'P'}, {"protocol", required_argument, 0, 'p'},
                                         {"n", required_argument, 0, 'n'}, {"latency-ms", required_argument, 0, 'L'},
                                         {"bandwidth", required_argument, 0, 'B'}, {"profile", required_argument, 0, 'M'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *only = NULL, *profile = NULL, *bw = "10Gbps";
    int prims = 0, c;
    unsigned long long n = 4096;
    double lat_ms = 1.0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'P': prims = 1; break;
        case 'p': only = optarg; break;
        case 'n':
            if (parse_u64(optarg, &n) || n < 1 || n > (1u << 24)) {
                cli_error("validate", "--n wants 1..16777216, not '%s'", optarg);
                return 2;
            }
            break;
        case 'L':
            if (parse_double(optarg, &lat_ms) || lat_ms < 0 || lat_ms > 10000) {
                cli_error("validate", "--latency-ms wants 0..10000, not '%s'", optarg);
                return 2;
            }
            break;
        case 'B': bw = optarg; break;
        case 'M': profile = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!prims) {
        cli_error("validate", "this build validates the primitive layer only: use --primitives");
        return 2;
    }
    errbuf e = {{0}};
    machine_profile mach;
    double bps;
    if (net_rate_bps(bw, &bps)) {
        cli_error("validate", "--bandwidth: '%s' is not a rate (e.g. 10Gbps)", bw);
        return 2;
    }
    if (profile ? machine_load(profile, &mach, &e) : (machine_default(&mach), 0)) {
        cli_error("validate", "%s", e.msg);
        return 2;
    }
    int bad = 0;
    printf("%-7s %-17s %8s | %-11s | %-25s | %-25s | %-19s | %s\n", "proto", "primitive", "n", "rounds p/m",
           "online bytes P0 p/m", "online bytes P1 p/m", "offline p/m", "time ms p/m");
    for (size_t q = 0; q < 2; q++) {
        const char *pn = q ? "aby3" : "semi2k";
        if (only && strcmp(only, pn))
            continue;
        const proto *pr = proto_find(pn);
        proto_cfg cfg;
        if (!pr || proto_cfg_default(pn, &cfg, &e)) {
            cli_error("validate", "unknown protocol '%s'", pn);
            return 2;
        }
        net_cfg net;
        net_uniform(&net, pr->n_parties, (uint64_t)llround(lat_ms * 1e6), bps);
        for (size_t k = 0; k < N_VPRIMS; k++) {
            int rc = validate_row(pr, &cfg, &vprims[k], (uint32_t)n, &net, &mach, lat_ms, &bad, &e);
            if (rc) {
                cli_error("validate", "%s %s: %s", pn, vprims[k].label, e.msg);
                return ms_err_exit_code(rc);
            }
        }
    }
    printf("# p = predicted (cost engine + simulator on %.3g ms / %s links), m = measured (backend on loopback,\n"
           "# latency injected by its transport; time until the last party is done). Bytes: payload sent by that\n"
           "# party; offline: dealer->parties.\n",
           lat_ms, bw);
    return bad ? 1 : 0;
}
