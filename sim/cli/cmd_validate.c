/* cmd_validate.c — `mpcsim validate`: the simulator against the real backend.
 *
 * --primitives: every communicating primitive of eng.h run on the real backend (forked parties
 * on loopback) and on the protocol's cost engine, printed side by side: rounds, online bytes
 * sent by each party, offline bytes, and time (the backend's measured wall time against the
 * simulator's latency for the same network). --model: a real model's prefill and decode
 * programs (sim/cli/cmd_validate_model.c). Bytes and rounds must be equal (exit status 1
 * otherwise); time is reported with its error, not judged. --db stores every row in the
 * results database's validation table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "opt.h"
#include "cmd_validate.h"
#include "sim/secure/valid.h"
#include "sim/policy/plugin.h"
#include "sim/policy/compose.h"
#include <unistd.h>
#include "sim/engine/machine.h"
#include "protocols/backend/mpc_run.h"
#include "sim/engine/net.h"
#include "protocols/program/proto.h"
#include "sim/engine/simulate.h"

enum { VP_EQZ = 100, VP_OPENBIT }; /* arg of the optional primitives' rows (eng.h) */

typedef struct vprim {
    const char *label;
    int prim;
    int arg;        /* open: receiving party; input: owner */
    uint32_t flags; /* matmul */
} vprim;

static const vprim vprims[] = {
    {"input(P0)", PRIM_INPUT, 0, 0},
    {"open(all)", PRIM_OPEN, -1, 0},
    {"open(P1)", PRIM_OPEN, 1, 0},
    {"mul", PRIM_MUL, 0, 0},
    {"square", PRIM_SQUARE, 0, 0},
    {"matmul", PRIM_MATMUL, 0, 0},
    {"matmul(cached B)", PRIM_MATMUL, 0, OPF_FIXED_B},
    {"trunc", PRIM_TRUNC, 0, 0},
    {"and_bb", PRIM_AND, 0, 0},
    {"b2a", PRIM_B2A, 0, 0},
    {"mul_a1b", PRIM_MULA1B, 0, 0},
    {"b2a_word(1)", PRIM_B2AWORD, 1, 0},
    {"b2a_word(36)", PRIM_B2AWORD, 36, 0},
    {"eqz_spu", PRIM_OPEN, VP_EQZ, 0},      /* SPU's eqz mask (compat: spu's equality) */
    {"open_bit", PRIM_OPEN, VP_OPENBIT, 0}, /* SPU's b2p of a bit (compat: spu's top-k) */
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
    int dom = j->v->prim == PRIM_AND || j->v->prim == PRIM_B2A || j->v->prim == PRIM_B2AWORD ||
                      j->v->arg == VP_OPENBIT
                  ? DOM_BOOL
                  : DOM_ARITH;
    const vprim *v = j->v;
    int rc = e->vt->alloc(e, z, elems(j, 2), v->prim == PRIM_AND ? DOM_BOOL : DOM_ARITH);
    if (rc)
        return rc;
    switch (v->prim) {
    case PRIM_INPUT: z->dom = (uint8_t)dom; return e->vt->input(e, z, v->arg, j->plain);
    case PRIM_OPEN:
        if (v->arg == VP_EQZ)
            return e->vt->eqz_spu ? e->vt->eqz_spu(e, z, x) : MS_ERR_INTERNAL;
        if (v->arg == VP_OPENBIT)
            return e->vt->open_bit ? e->vt->open_bit(e, out, x) : MS_ERR_INTERNAL;
        return e->vt->open(e, out, x, v->arg);
    case PRIM_MUL: return e->vt->mul(e, z, x, y);
    case PRIM_SQUARE: return e->vt->square(e, z, x);
    case PRIM_MATMUL: return e->vt->matmul(e, z, x, y, 1, j->n, j->n, j->n, v->flags, 1);
    case PRIM_TRUNC: return e->vt->trunc(e, z, x, e->cfg.frac_bits);
    case PRIM_AND: return e->vt->and_bb(e, z, x, y);
    case PRIM_B2A: return e->vt->b2a(e, z, x);
    case PRIM_B2AWORD: return e->vt->b2a_word(e, z, x, v->arg);
    case PRIM_MULA1B: { /* y's shares read as a boolean sharing: its bit 0 is the choice */
        mpc_val yb = *y;
        yb.dom = DOM_BOOL;
        return e->vt->mul_a1b(e, z, x, &yb);
    }
    default: return MS_ERR_INTERNAL;
    }
}

/* Backend node: share x and y, (cache y's mask), then the primitive between two snapshots. */
static int vnode(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    vjob *j = arg;
    int dom = j->v->prim == PRIM_AND || j->v->prim == PRIM_B2A || j->v->prim == PRIM_B2AWORD ||
                      j->v->arg == VP_OPENBIT
                  ? DOM_BOOL
                  : DOM_ARITH;
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
        mpc_stat_between(
            &a, mpc_net_get_stats(net),
            (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec)), &st);
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
    int dom = j->v->prim == PRIM_AND || j->v->prim == PRIM_B2A || j->v->prim == PRIM_B2AWORD ||
                      j->v->arg == VP_OPENBIT
                  ? DOM_BOOL
                  : DOM_ARITH;
    mpc_val x = {.n = elems(j, 0), .dom = (uint8_t)dom},
            y = {.n = elems(j, 1), .dom = (uint8_t)dom}, z = {0};
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
    op o = {.kind = OP_MUL,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = 1,
            .n = j->n,
            .in = {t, t, OP_NONE},
            .out = t};
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

static void usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim validate [--primitives] [--basic-ops] [--model NAME]\n"
               "                       [--protocol P] [--db FILE] [--latency-ms X]\n"
               "                       [--bandwidth RATE] [--profile NAME] [--set K=V]...\n"
               "                       [--prompt N] [--decode N] [--text FILE] [--shape]\n"
               "                       [--generate N]\n"
               "                       [--accuracy N [--policy NAME|PATH.so\n"
               "                       [--policy-param K=V]...]]\n\n"
               "Runs the real MPC backend (parties forked on 127.0.0.1) and the simulator on\n"
               "the same work and prints predicted vs measured rounds, bytes and time. Without\n"
               "a mode flag: the primitives and stories260K's prefill and decode programs, in\n"
               "semi2k and aby3. Exit status 1 if any bytes or rounds differ.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\n"
               "examples:\n"
               "  mpcsim validate --db val.db\n"
               "  mpcsim validate --model stories260K --accuracy 256 \\\n"
               "      --text tests/data/tinystories_sample.txt --set approx=sigmoid\n"
               "  mpcsim validate --model stories260K --generate 64 --latency-ms 0\n");
}

/* The primitives of one protocol on net; rows printed (and stored). */
/* A measured time this many times off the predicted one, either way, is flagged (a note: on
 * loopback, small calls are dominated by fixed costs the simulator does not model). */
#define TIME_TOLERANCE 3.0

/* The check cell: "ok" or "MISMATCH" (bytes and rounds, exact), and "t×R" or "t÷R" when the
 * measured time is more than TIME_TOLERANCE off the predicted ("t×>999" past 999). */
static void check_cell(char *out, size_t n, int ok, double pred_ns, double meas_ns)
{
    double r = pred_ns > 0 && meas_ns > 0 ? meas_ns / pred_ns : 1;
    int k = snprintf(out, n, "%s", ok ? "ok" : "MISMATCH");
    double f = r > 1 ? r : 1 / r;
    if (f >= 999.5) /* a loaded machine: the cell keeps its width */
        snprintf(out + k, n - (size_t)k, " t%s>999", r > 1 ? "×" : "÷");
    else if (r > TIME_TOLERANCE || r < 1 / TIME_TOLERANCE)
        snprintf(out + k, n - (size_t)k, f < 10 ? " t%s%.1f" : " t%s%.0f", r > 1 ? "×" : "÷", f);
}

/* A time in ms with the digits it needs: "0.0012", "0.032", "2.19", "1203". */
static void fmt_ms(char *out, size_t n, double ms)
{
    snprintf(out, n, ms < 0.01 ? "%.4f" : ms < 1 ? "%.3f" : ms < 100 ? "%.2f" : "%.0f", ms);
}

static int validate_prims(const char *pn, const proto_cfg *cfg, unsigned long long n, double lat_ms,
                          double bps, const char *bw, const machine_profile *mach, int plaintext,
                          rdb *db, const char *session, int wide, int *bad, errbuf *e)
{
    const proto *pr = proto_find(pn);
    net_cfg net;
    net_uniform(&net, pr->n_parties, (uint64_t)llround(lat_ms * 1e6), bps);
    (void)bw;
    for (size_t k = 0; k < N_VPRIMS; k++) {
        vjob j = {.v = &vprims[k], .n = (uint32_t)n};
        if (vprims[k].prim == PRIM_MATMUL)
            j.n = (uint32_t)fmax(1, floor(sqrt((double)n)));
        j.plain = calloc(elems(&j, 0) + 1, 8);
        for (size_t i = 0; i < elems(&j, 0); i++)
            j.plain[i] = (i * 0x9e3779b97f4a7c15ull) >> 30;
        cost_totals tot;
        uint64_t pns = 0;
        int rc = predict(pr, cfg, &j, &net, mach, &tot, &pns, e);
        mpc_launch l = {.cfg = *cfg,
                        .latency_ns = (uint64_t)llround(lat_ms * 1e6),
                        .deadline_ms = 120000,
                        .plaintext = plaintext};
        mpc_node_result nr[MPC_NODES_MAX];
        int nodes = 0;
        if (!rc)
            rc = mpc_launch_run(&l, vnode, &j, nr, &nodes, e);
        int f = rc ? -1 : mpc_launch_failed(nr, nodes);
        if (f >= 0)
            rc = err_set(e, nr[f].rc, "node %d: %s", f, nr[f].err);
        free(j.plain);
        if (rc) {
            err_set(e, rc, "%s %s: %s", pn, vprims[k].label, e->msg);
            mpc_node_results_free(nr, nodes);
            return rc;
        }
        rdb_validation v = {.session = session,
                            .tool_version = MPCSIM_VERSION,
                            .protocol = pn,
                            .phase = "-",
                            .n = (int64_t)elems(&j, 0),
                            .latency_ns = (uint64_t)llround(lat_ms * 1e6),
                            .bandwidth_bps = bps,
                            .shaping = "none",
                            .pred_ns = pns};
        char item[64];
        snprintf(item, sizeof item, "primitive:%s", vprims[k].label);
        v.item = item;
        v.pred.rounds = tot.rounds;
        for (int i = 0; i < pr->n_parties;
             i++) { /* every party checked; time until the last is done */
            mpc_op_stat t;
            memcpy(&t, nr[i].out, sizeof t);
            v.meas_ns = t.ns > v.meas_ns ? t.ns : v.meas_ns;
            for (int d = 0; d < MPC_NODES_MAX; d++)
                v.meas.bytes[i] += t.sent[d];
            v.meas_offline += t.offline_recv;
            v.pred.bytes[i] = tot.bytes_sent[i];
            v.pred_offline += tot.offline_bytes[i];
            *bad |= t.rounds != tot.rounds;
            if (i == 0)
                v.meas.rounds = t.rounds;
        }
        int ok = v.pred.rounds == v.meas.rounds && v.pred_offline == v.meas_offline;
        for (int i = 0; i < pr->n_parties; i++)
            ok &= v.pred.bytes[i] == v.meas.bytes[i];
        *bad |= !ok;
        if (!wide) { /* 80 columns: every party's bytes checked, their sum shown */
            uint64_t pb = 0, mb = 0;
            for (int i = 0; i < pr->n_parties; i++)
                pb += v.pred.bytes[i], mb += v.meas.bytes[i];
            char rounds[24], online[32], offline[32], cell[40], tm[32];
            snprintf(rounds, sizeof rounds, v.pred.rounds == v.meas.rounds ? "%llu" : "%llu/%llu",
                     (unsigned long long)v.pred.rounds, (unsigned long long)v.meas.rounds);
            snprintf(online, sizeof online, pb == mb ? "%llu" : "%llu/%llu", (unsigned long long)pb,
                     (unsigned long long)mb);
            snprintf(offline, sizeof offline,
                     v.pred_offline == v.meas_offline ? "%llu" : "%llu/%llu",
                     (unsigned long long)v.pred_offline, (unsigned long long)v.meas_offline);
            char tp[16], tmm[16];
            fmt_ms(tp, sizeof tp, (double)pns * 1e-6);
            fmt_ms(tmm, sizeof tmm, (double)v.meas_ns * 1e-6);
            snprintf(tm, sizeof tm, "%s/%s", tp, tmm);
            check_cell(cell, sizeof cell, ok, (double)pns, (double)v.meas_ns);
            printf("%-6s %-16s %6llu %6s %8s %8s %13s %s\n", pn, vprims[k].label,
                   (unsigned long long)elems(&j, 0), rounds, online, offline, tm, cell);
        } else
            printf("%-7s %-17s %8llu | %4llu/%-4llu%s | %11llu/%-11llu | %11llu/%-11llu | "
                   "%9llu/%-9llu "
                   "| %8.3f/%-8.3f %s\n",
                   pn, vprims[k].label, (unsigned long long)elems(&j, 0),
                   (unsigned long long)v.pred.rounds, (unsigned long long)v.meas.rounds, "  ",
                   (unsigned long long)v.pred.bytes[0], (unsigned long long)v.meas.bytes[0],
                   (unsigned long long)v.pred.bytes[1], (unsigned long long)v.meas.bytes[1],
                   (unsigned long long)v.pred_offline, (unsigned long long)v.meas_offline,
                   (double)pns * 1e-6, (double)v.meas_ns * 1e-6, ok ? "ok" : "MISMATCH");
        mpc_node_results_free(nr, nodes);
        if (db && (rc = rdb_validation_put(db, &v, e)))
            return rc;
    }
    return MS_OK;
}

/* The command line, before its checks. */
typedef struct val_args {
    const char *only, *profile, *bw, *dbpath;
    const char *sets[32];
    int n_sets, prims, basic, wide;
    unsigned long long n;
    double lat_ms;
    vm_args va;
} val_args;

/* 0, 2 (bad usage, said), or -1 (--help printed). */
static int parse_args(int argc, char **argv, val_args *v)
{
    vm_args *va = &v->va;
    cli_list sets = {v->sets, 0, 32}, pparams = {va->policy_params, 0, 16};
    const cli_opt opts[] = {
        /* in --help's order */
        {.name = "primitives",
         .kind = CLI_FLAG,
         .dest = &v->prims,
         .help = "validate every communicating primitive"},
        {.name = "wide",
         .kind = CLI_FLAG,
         .dest = &v->wide,
         .help = "the primitives' and the programs' tables with every\n"
                 "party's bytes, predicted and measured (default: 80\n"
                 "columns, their sums); --basic-ops: raw bytes and\nthe time of 1e8 elements"},
        {.name = "basic-ops",
         .kind = CLI_FLAG,
         .dest = &v->basic,
         .help = "SecretFlow's basic-op task as its script runs it: x from P0, y from P1,\n"
                 "z = x+y, x*y or x<y (3 parties: w from P2, z = x+(y+w) or x*(y*w)),\n"
                 "z revealed; at --n/4 and --n elements, measured and predicted, with the\n"
                 "per-element time (e.g. --shape --bandwidth 100Mbps --latency-ms 50)"},
        {.name = "model",
         .kind = CLI_STR,
         .dest = &va->model,
         .arg = "NAME",
         .help = "validate a real model's programs: a secure session (weights shared by\n"
                 "P1, one-hot tokens by P0, logits revealed to P0, secret KV cache),\n"
                 "a prefill of --prompt tokens then --decode steps, every op compared"},
        {.name = "protocol",
         .short_name = 'p',
         .kind = CLI_STR,
         .dest = &v->only,
         .arg = "P",
         .help = "semi2k or aby3 (default: both)"},
        {.name = "n",
         .short_name = 'n',
         .kind = CLI_U64,
         .dest = &v->n,
         .arg = "N",
         .lo = 1,
         .hi = 1u << 24,
         .want = "1..16777216",
         .help = "primitives: elements per call (matmul: N×N·N×N with N = sqrt) (default 4096)"},
        {.name = "db",
         .kind = CLI_STR,
         .dest = &v->dbpath,
         .arg = "FILE",
         .help = "store the rows in the results database's validation table"},
        {.name = "latency-ms",
         .kind = CLI_F64,
         .dest = &v->lat_ms,
         .arg = "X",
         .hi = 10000,
         .want = "0..10000",
         .help = "one-way latency injected by the backend and simulated (default 1)"},
        {.name = "bandwidth",
         .kind = CLI_STR,
         .dest = &v->bw,
         .arg = "RATE",
         .help = "simulated link bandwidth (default 10Gbps, about loopback); with --shape\n"
                 "also the tbf rate of every node's egress"},
        {.name = "shape",
         .kind = CLI_FLAG,
         .dest = &va->shape,
         .help = "programs and --basic-ops: every node in its own network namespace, a veth\n"
                 "pair (MTU 1500) between every two nodes with tbf at --bandwidth on each\n"
                 "end; simulated as token buckets carrying TCP frames (needs root and\n"
                 "iproute2; says why and exits 3 where not available)"},
        {.name = "insecure-plaintext",
         .kind = CLI_FLAG,
         .dest = &va->plaintext,
         .help = "the backend's loopback sessions without TLS (for comparison; warns)"},
        {.name = "profile",
         .kind = CLI_STR,
         .dest = &v->profile,
         .arg = "NAME",
         .help = "machine profile for simulated compute (default: default)"},
        {.name = "set",
         .kind = CLI_LIST,
         .dest = &sets,
         .arg = "K=V",
         .help = "protocol parameter (frac_bits, approx, beaver_cache, …)"},
        {.name = "prompt",
         .kind = CLI_U32,
         .dest = &va->prompt,
         .arg = "N",
         .lo = 1,
         .hi = 100000,
         .want = "1..100000",
         .help = "prefill tokens (default 16)"},
        {.name = "decode",
         .kind = CLI_U32,
         .dest = &va->decode,
         .arg = "N",
         .hi = 100000,
         .want = "0..100000",
         .help = "decode steps after the prefill (default 2)"},
        {.name = "text",
         .kind = CLI_STR,
         .dest = &va->text,
         .arg = "FILE",
         .help = "the tokens: this text (default: a built-in sentence of 80 tokens)"},
        {.name = "accuracy",
         .kind = CLI_U32,
         .dest = &va->accuracy,
         .arg = "N",
         .lo = 1,
         .hi = 100000,
         .want = "1..100000",
         .help = "teacher-forced secure logits at N positions against the float reference\n"
                 "(the --prompt positions counted: N - P decode steps): top-1 agreement and\n"
                 "logit error"},
        {.name = "policy",
         .kind = CLI_STR,
         .dest = &va->policy,
         .arg = "NAME|PATH.so",
         .help = "with --accuracy: a policy applied inside MPC (prompt = --prompt), compared\n"
                 "with its plaintext replay: h2o, mpcache, quest, snapkv, pyramidkv and tova\n"
                 "select on secret shares, as do compositions (FILE.yaml) of their blocks and\n"
                 "any policy or plug-in (PATH.so) whose ops take mpcsim's operands and name\n"
                 "their selection (POLICIES.md, \"On shares\"); comet (active_frac > 0) runs\n"
                 "its sparse FFN on shares (the agreement printed); streamingllm's kept set is\n"
                 "public; other policies apply the replay's kept entries, and say why"},
        {.name = "policy-param",
         .kind = CLI_LIST,
         .dest = &pparams,
         .arg = "K=V",
         .help = "a policy parameter (repeatable)"},
        {.name = "generate",
         .kind = CLI_U32,
         .dest = &va->generate,
         .arg = "N",
         .lo = 1,
         .hi = 100000,
         .want = "1..100000",
         .help = "greedy generation of N tokens after --prompt: time and tokens"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"validate", opts, sizeof opts / sizeof opts[0], 24, 0};
    int rc = cli_parse_cmd(&cmd, argc, argv, NULL, NULL, usage);
    v->n_sets = sets.n;
    va->n_policy_params = (size_t)pparams.n;
    return rc == CLI_HELP_ASKED ? -1 : rc;
}

/* The modes given together: the default (the primitives and stories260K's programs) filled
 * in; 0, or 2 after the message for a combination that does not go. */
static int check_modes(val_args *v)
{
    vm_args *va = &v->va;
    if (v->basic && (v->prims || va->model || va->accuracy || va->generate)) {
        cli_error(
            "validate",
            "--basic-ops runs alone (not with --primitives, --model, --accuracy, --generate)");
        return 2;
    }
    if (!v->prims && !va->model && !v->basic) { /* the default: both */
        v->prims = !va->accuracy && !va->generate;
        va->model = "stories260K";
    }
    if ((va->accuracy || va->generate || va->policy) && (v->prims || !va->model)) {
        cli_error("validate",
                  "--accuracy, --generate and --policy go with --model (not --primitives)");
        return 2;
    }
    if (va->shape && (v->prims || va->accuracy || va->generate)) {
        cli_error("validate", "--shape applies to --model's programs and --basic-ops only");
        return 2;
    }
    if (va->policy && !va->accuracy) {
        cli_error("validate", "--policy is compared through --accuracy N");
        return 2;
    }
    return 0;
}

/* The protocols to validate (--protocol, else both) with the --set parameters: their count,
 * or -1 after the message. */
static int protocol_cfgs(const val_args *v, proto_cfg cfgs[2], const char *names[2], errbuf *e)
{
    int n_cfgs = 0;
    size_t np;
    const proto *const *all = proto_all(&np);
    for (size_t q = 0; q < np && n_cfgs < 2; q++) {
        const char *pn = all[q]->name;
        if (v->only && strcmp(v->only, pn))
            continue;
        if (proto_cfg_default(pn, &cfgs[n_cfgs], e)) {
            cli_error("validate", "%s", e->msg);
            return -1;
        }
        for (int i = 0; i < v->n_sets; i++)
            if (proto_cfg_set_kv(&cfgs[n_cfgs], v->sets[i], e)) {
                cli_error("validate", "%s", e->msg);
                return -1;
            }
        names[n_cfgs++] = pn;
    }
    if (!n_cfgs) {
        cli_error("validate", "unknown protocol '%s'\n---> HINT: semi2k or aby3", v->only);
        return -1;
    }
    return n_cfgs;
}

/* This invocation's session name in the database: UTC time and the process id. */
static void session_name(char *session, size_t cap)
{
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(session, cap, "%Y%m%dT%H%M%SZ", &tmv);
    snprintf(session + strlen(session), cap - strlen(session), "-%ld", (long)getpid());
}

int cmd_validate(int argc, char **argv)
{
    val_args v = {.bw = "10Gbps", .n = 4096, .lat_ms = 1.0, .va = {.prompt = 16, .decode = 2}};
    int rc = parse_args(argc, argv, &v);
    if (rc)
        return rc < 0 ? 0 : rc;
    if ((rc = check_modes(&v)))
        return rc;
    if (policy_plugin_is_path(v.va.policy)) { /* --policy PATH.so: the plug-in's policy */
        const policy_ops *pp;
        errbuf pe;
        if (policy_plugin_load(v.va.policy, &pp, &pe)) {
            cli_error("validate", "--policy: %s", pe.msg);
            return 2;
        }
        v.va.policy = pp->name;
    }
    size_t pl = v.va.policy ? strlen(v.va.policy) : 0;
    if (pl > 5 && !strcmp(v.va.policy + pl - 5, ".yaml")) { /* --policy FILE.yaml: composed */
        const policy_ops *pp;
        errbuf pe;
        if (policy_compose_load(v.va.policy, &pp, &pe)) {
            cli_error("validate", "--policy: %s", pe.msg);
            return 2;
        }
        v.va.policy = pp->name;
    }
    const char *profile = v.profile, *bw = v.bw, *dbpath = v.dbpath;
    int prims = v.prims, basic = v.basic;
    unsigned long long n = v.n;
    double lat_ms = v.lat_ms;
    vm_args va = v.va;
    va.wide = v.wide;
    errbuf e = {{0}};
    if (va.plaintext)
        fprintf(stderr, "mpcsim validate: WARNING: --insecure-plaintext: the backend's loopback "
                        "sessions run without "
                        "TLS (unauthenticated, unencrypted channels); figures are not those of a "
                        "secure deployment.\n");
    if (net_rate_bps(bw, &va.bandwidth_bps)) {
        cli_error("validate", "--bandwidth: '%s': %s", bw, net_rate_why(bw));
        return 2;
    }
    char bw_text[32]; /* the rate as every output writes it: "10 Gbit/s" */
    net_rate_str(va.bandwidth_bps, bw_text, sizeof bw_text);
    bw = bw_text;
    if (profile ? machine_load(profile, &va.mach, &e) : (machine_default(&va.mach), 0)) {
        cli_error("validate", "%s", e.msg);
        return 2;
    }
    va.latency_ns = (uint64_t)llround(lat_ms * 1e6);
    proto_cfg cfgs[2];
    const char *names[2];
    int n_cfgs = protocol_cfgs(&v, cfgs, names, &e);
    if (n_cfgs < 0)
        return 2;
    char session[64];
    session_name(session, sizeof session);
    va.session = session;
    rdb *db = NULL;
    int orc = dbpath ? rdb_open(dbpath, 1, &db, &e) : MS_OK;
    if (orc) {
        cli_error("validate", "%s", e.msg);
        return ms_err_exit_code(orc);
    }
    int bad = 0;
    rc = MS_OK;
    if (prims && !v.wide)
        printf("%-6s %-16s %6s %6s %8s %8s %13s %s\n", "proto", "primitive", "n", "rounds",
               "online", "offline", "time ms p/m", "check");
    else if (prims)
        printf("%-7s %-17s %8s | %-11s | %-25s | %-25s | %-19s | %s\n", "proto", "primitive", "n",
               "rounds p/m", "online bytes P0 p/m", "online bytes P1 p/m", "offline p/m",
               "time ms p/m");
    if (prims) {
        for (int q = 0; !rc && q < n_cfgs; q++)
            rc = validate_prims(names[q], &cfgs[q], n, lat_ms, va.bandwidth_bps, bw, &va.mach,
                                va.plaintext, db, session, v.wide, &bad, &e);
        if (!rc && v.wide)
            printf("# p = predicted (cost engine + simulator on %.3g ms / %s links), m = measured "
                   "(backend on loopback,\n"
                   "# latency injected by its transport; time until the last party is done). "
                   "Bytes: payload sent by that\n"
                   "# party; offline: dealer->parties.\n",
                   lat_ms, bw);
        else if (!rc)
            printf(
                "# predicted (cost engine + simulator on %.3g ms / %s links) against measured\n"
                "# (backend on loopback, latency injected by its transport): one figure when\n"
                "# they agree, p/m when not. online: bytes, every party's payload, each\n"
                "# compared, summed; offline: bytes, dealer to parties; time: until the last\n"
                "# party is done.\n"
                "# check: bytes and rounds, exactly (a difference fails the command); t×R or\n"
                "# t÷R: the measured time is over %gx off the predicted, a note only (fixed\n"
                "# costs of small loopback calls are not modelled). --wide: each party's bytes.\n",
                lat_ms, bw, TIME_TOLERANCE);
    }
    if (!rc && basic)
        rc = validate_basic(&va, cfgs, n_cfgs, n, &e);
    if (!rc && va.model) {
        if (prims)
            printf("\n");
        rc = validate_model(&va, cfgs, n_cfgs, db, &bad, &e);
    }
    if (db)
        rdb_close(db);
    if (rc) {
        cli_error("validate", "%s", e.msg);
        return ms_err_exit_code(rc);
    }
    if (dbpath)
        printf("# rows stored in %s\n#   (table validation, session %s)\n", dbpath, session);
    return bad ? 1 : 0;
}
