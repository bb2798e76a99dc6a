/* cmd_party.c — `mpcsim party`: one party (or the dealer) of the real MPC backend.
 *
 * Every node of a session is started with the same --protocol, --peers list and program; each
 * gets its own --id (or --dealer). Parties may run on different hosts. The node prints what its
 * transport measured per op (rounds, payload bytes sent to each peer, offline bytes, time); it
 * prints revealed outputs only with --print-outputs and never prints a share or an input. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "protocols/program/kern.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/program/proto.h"

typedef struct bind_file {
    char name[48];
    double *v;
    size_t n;
} bind_file;

typedef struct party_args {
    const char *protocol, *peers, *program;
    int id, dealer, demo, print_outputs, have_seed;
    unsigned long long seed;
    int timeout_ms, connect_ms;
    double latency_ms;
    bind_file binds[32];
    int n_binds;
    proto_cfg cfg;
} party_args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpcsim party --protocol semi2k|aby3 (--id I | --dealer) --peers H:P,H:P,H:P\n"
            "                    (--program FILE | --demo) [--bind NAME=FILE]... [--random-inputs SEED]\n"
            "                    [--set KEY=VALUE]... [--timeout-ms N] [--latency-ms X] [--print-outputs]\n\n"
            "Runs one node of the real MPC backend: the op program on secret shares over TCP, with\n"
            "every byte and round counted by the transport, printed per op.\n\n"
            "options:\n"
            "  -p, --protocol P      semi2k (P0, P1 and a dealer) or aby3 (P0, P1, P2)\n"
            "  -i, --id I            this party's index\n"
            "      --dealer          this node is the semi2k dealer (the third --peers entry)\n"
            "      --peers LIST      host:port of every node: parties in order, then the dealer\n"
            "      --program FILE    op program (text form; `mpcsim cost --dump-program` writes one)\n"
            "      --demo            a built-in program: x·W, rmsnorm, softmax, gelu, lt, reveal\n"
            "      --bind NAME=FILE  values of tensor NAME (whitespace-separated reals) — weights at\n"
            "                        P1, the client's inputs at P0, public tensors at every party\n"
            "      --random-inputs S fill every tensor this node must provide and no --bind gives\n"
            "                        with reals in [-1, 1) drawn from seed S (demos, benchmarks)\n"
            "      --set KEY=VALUE   protocol parameter (frac_bits, trunc_local, beaver_cache, …)\n"
            "      --timeout-ms N    a peer silent for N ms is an error (default 5000)\n"
            "      --connect-timeout-ms N  how long to wait for every peer to start (default 10000)\n"
            "      --latency-ms X    inject X ms one-way latency per round message\n"
            "      --print-outputs   print the values revealed to this party\n"
            "  -h, --help            this help\n\n"
            "example (three terminals or hosts):\n"
            "  mpcsim party -p semi2k --id 0  --peers a:7000,b:7000,c:7000 --demo --random-inputs 1\n"
            "  mpcsim party -p semi2k --id 1  --peers a:7000,b:7000,c:7000 --demo --random-inputs 1\n"
            "  mpcsim party -p semi2k --dealer --peers a:7000,b:7000,c:7000 --demo\n");
}

/* ---------------------------------------------------------------- bindings */

static int read_values(const char *path, bind_file *b, errbuf *e)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return err_set(e, MS_ERR_IO, "%s: cannot open: %m", path);
    size_t cap = 1024;
    b->v = malloc(cap * sizeof *b->v);
    b->n = 0;
    char tok[64];
    int line = 1, c;
    while (b->v && fscanf(f, "%63s", tok) == 1) {
        while ((c = fgetc(f)) == '\n')
            line++;
        if (c != EOF)
            ungetc(c, f);
        double d;
        if (parse_double(tok, &d) || !isfinite(d)) {
            fclose(f);
            return err_set(e, MS_ERR_INPUT, "%s:%d:1: error: '%s' is not a real number", path, line, tok);
        }
        if (b->n == cap) {
            double *nv = realloc(b->v, 2 * cap * sizeof *nv);
            if (!nv)
                break;
            b->v = nv;
            cap *= 2;
        }
        b->v[b->n++] = d;
    }
    fclose(f);
    return b->v ? MS_OK : err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int bind_fn(void *ctx, const op_tensor *t, uint64_t *out, size_t n)
{
    party_args *a = ctx;
    int f = a->cfg.frac_bits;
    for (int i = 0; i < a->n_binds; i++) {
        bind_file *b = &a->binds[i];
        if (strcmp(b->name, t->name))
            continue;
        if (b->n != n) {
            fprintf(stderr, "mpcsim party: error: --bind %s gives %zu values, the tensor has %zu (%u×%u×%u)\n",
                    b->name, b->n, n, t->batch, t->rows, t->cols);
            return 0;
        }
        for (size_t q = 0; q < n; q++)
            out[q] = fx_encode(b->v[q], f);
        return 1;
    }
    if (!a->have_seed)
        return 0;
    uint64_t s = a->seed;
    for (const char *p = t->name; *p; p++)
        s = s * 131 + (uint8_t)*p;
    for (size_t q = 0; q < n; q++) {
        uint64_t r = mix(&s);
        out[q] = t->dom == DOM_BOOL ? r : fx_encode((double)(r >> 11) * 0x1p-52 - 1.0, f);
    }
    return 1;
}

/* ---------------------------------------------------------------- the node's work */

typedef struct party_job {
    party_args *a;
    const op_program *p;
} party_job;

static void print_stat_row(FILE *f, const char *label, const char *kind, const mpc_op_stat *s, int nodes)
{
    fprintf(f, "%-6s %-11s %6llu", label, kind, (unsigned long long)s->rounds);
    for (int j = 0; j < nodes; j++)
        fprintf(f, " %12llu", (unsigned long long)s->sent[j]);
    fprintf(f, " %12llu %10.3f\n", (unsigned long long)(s->offline_recv + s->offline_sent), (double)s->ns * 1e-6);
}

static int party_work(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    party_job *j = arg;
    const op_program *p = j->p;
    mpc_program_run r;
    int rc = mpc_run_setup(e, net, p, bind_fn, j->a, &r, err);
    if (!rc)
        rc = mpc_run_ops(e, net, &r, 0, p->n_ops, err);
    if (rc) {
        mpc_program_run_free(e, &r);
        return rc;
    }
    int nodes = mpc_net_nodes(net), self = mpc_net_self(net);
    fprintf(out, "# mpcsim party: %s node %d (%s), %zu ops\n", e->cfg.name, self,
            mpc_engine_is_dealer(e) ? "dealer" : "party", p->n_ops);
    fprintf(out, "%-6s %-11s %6s", "op", "kind", "rounds");
    for (int q = 0; q < nodes; q++) {
        char h[24];
        if (q >= e->n_parties)
            snprintf(h, sizeof h, "sent->dealer");
        else
            snprintf(h, sizeof h, "sent->P%d", q);
        fprintf(out, " %12s", h);
    }
    fprintf(out, " %12s %10s\n", "offline", "ms");
    mpc_op_stat tot = {0};
    for (size_t i = 0; i < p->n_ops; i++) {
        char lab[24];
        snprintf(lab, sizeof lab, "%zu", i);
        print_stat_row(out, lab, op_kind_name(p->ops[i].kind), &r.ops[i], nodes);
        tot.rounds += r.ops[i].rounds;
        for (int q = 0; q < nodes; q++)
            tot.sent[q] += r.ops[i].sent[q];
        tot.offline_recv += r.ops[i].offline_recv;
        tot.offline_sent += r.ops[i].offline_sent;
        tot.ns += r.ops[i].ns;
    }
    print_stat_row(out, "total", "", &tot, nodes);
    print_stat_row(out, "setup", "", &r.setup, nodes);
    const mpc_net_stats *st = mpc_net_get_stats(net);
    fprintf(out, "# frame headers: %llu B sent, %llu B received (overhead, not counted above)\n",
            (unsigned long long)st->hdr_sent, (unsigned long long)st->hdr_recv);
    for (size_t i = 0; j->a->print_outputs && i < p->n_ops; i++) {
        const op *o = &p->ops[i];
        if (o->kind != OP_REVEAL || (o->iarg >= 0 && o->iarg != self) || mpc_engine_is_dealer(e))
            continue;
        fprintf(out, "output %s:", p->tens[o->out].name);
        for (size_t q = 0; q < r.vals[o->out].n; q++)
            fprintf(out, " %.6g", fx_decode(r.vals[o->out].s[0][q], e->cfg.frac_bits));
        fputc('\n', out);
    }
    mpc_program_run_free(e, &r);
    return MS_OK;
}

/* ---------------------------------------------------------------- options */

enum { O_DEALER = 256, O_PEERS, O_PROGRAM, O_DEMO, O_BIND, O_RANDOM, O_SET, O_TIMEOUT, O_LATENCY, O_PRINT, O_CONNECT };

static int parse_args(int argc, char **argv, party_args *a, errbuf *e)
{
    static const struct option opts[] = {
        {"protocol", required_argument, 0, 'p'}, {"id", required_argument, 0, 'i'},
        {"dealer", no_argument, 0, O_DEALER}, {"peers", required_argument, 0, O_PEERS},
        {"program", required_argument, 0, O_PROGRAM}, {"demo", no_argument, 0, O_DEMO},
        {"bind", required_argument, 0, O_BIND}, {"random-inputs", required_argument, 0, O_RANDOM},
        {"set", required_argument, 0, O_SET}, {"timeout-ms", required_argument, 0, O_TIMEOUT},
        {"latency-ms", required_argument, 0, O_LATENCY},
        {"connect-timeout-ms", required_argument, 0, O_CONNECT}, {"print-outputs", no_argument, 0, O_PRINT},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    char *sets[32];
    int n_sets = 0, c;
    a->id = -1;
    a->timeout_ms = 5000;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:i:h", opts, NULL)) != -1) {
        long long v;
        switch (c) {
        case 'p': a->protocol = optarg; break;
        case 'i':
            if (parse_i64(optarg, &v) || v < 0 || v > 2)
                return err_set(e, MS_ERR_USAGE, "--id wants 0, 1 or 2, not '%s'", optarg);
            a->id = (int)v;
            break;
        case O_DEALER: a->dealer = 1; break;
        case O_PEERS: a->peers = optarg; break;
        case O_PROGRAM: a->program = optarg; break;
        case O_DEMO: a->demo = 1; break;
        case O_BIND: {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof a->binds[0].name || a->n_binds == 32)
                return err_set(e, MS_ERR_USAGE, "--bind wants NAME=FILE, not '%s'", optarg);
            bind_file *b = &a->binds[a->n_binds++];
            snprintf(b->name, sizeof b->name, "%.*s", (int)(eq - optarg), optarg);
            int rc = read_values(eq + 1, b, e);
            if (rc)
                return rc;
            break;
        }
        case O_RANDOM:
            if (parse_u64(optarg, &a->seed))
                return err_set(e, MS_ERR_USAGE, "--random-inputs wants an integer seed, not '%s'", optarg);
            a->have_seed = 1;
            break;
        case O_SET:
            if (n_sets == 32)
                return err_set(e, MS_ERR_USAGE, "too many --set options");
            sets[n_sets++] = optarg;
            break;
        case O_TIMEOUT:
            if (parse_i64(optarg, &v) || v < 1 || v > 3600000)
                return err_set(e, MS_ERR_USAGE, "--timeout-ms wants 1..3600000, not '%s'", optarg);
            a->timeout_ms = (int)v;
            break;
        case O_CONNECT:
            if (parse_i64(optarg, &v) || v < 1 || v > 3600000)
                return err_set(e, MS_ERR_USAGE, "--connect-timeout-ms wants 1..3600000, not '%s'", optarg);
            a->connect_ms = (int)v;
            break;
        case O_LATENCY:
            if (parse_double(optarg, &a->latency_ms) || a->latency_ms < 0 || a->latency_ms > 60000)
                return err_set(e, MS_ERR_USAGE, "--latency-ms wants 0..60000, not '%s'", optarg);
            break;
        case O_PRINT: a->print_outputs = 1; break;
        case 'h': usage(stdout); return -1;
        default: return err_set(e, MS_ERR_USAGE, "see 'mpcsim party --help'");
        }
    }
    if (!a->protocol)
        return err_set(e, MS_ERR_USAGE, "--protocol is required (semi2k or aby3)");
    int rc = proto_cfg_default(a->protocol, &a->cfg, e);
    if (rc)
        return rc;
    for (int i = 0; i < n_sets; i++)
        if ((rc = proto_cfg_set_kv(&a->cfg, sets[i], e)))
            return rc;
    int semi = !strcmp(a->cfg.name, "semi2k");
    if (a->dealer == (a->id >= 0))
        return err_set(e, MS_ERR_USAGE, "give exactly one of --id and --dealer");
    if (a->dealer && !semi)
        return err_set(e, MS_ERR_USAGE, "--dealer: %s has no dealer", a->cfg.name);
    if (semi && a->id > 1)
        return err_set(e, MS_ERR_USAGE, "--id %d: semi2k has parties 0 and 1 (and --dealer)", a->id);
    if (!a->peers)
        return err_set(e, MS_ERR_USAGE, "--peers is required: host:port of every node (3 entries)");
    if (!!a->program == a->demo)
        return err_set(e, MS_ERR_USAGE, "give exactly one of --program FILE and --demo");
    return MS_OK;
}

int cmd_party(int argc, char **argv)
{
    party_args a;
    memset(&a, 0, sizeof a);
    errbuf e = {{0}};
    int rc = parse_args(argc, argv, &a, &e);
    op_program p;
    op_program_init(&p);
    if (rc == -1)
        rc = 0;
    else if (rc) {
        cli_error("party", "%s", e.msg);
    } else {
        if (a.demo)
            rc = mpc_run_demo_program(&p, &e);
        else {
            FILE *f = fopen(a.program, "r");
            if (!f)
                rc = err_set(&e, MS_ERR_IO, "%s: cannot open: %m", a.program);
            else {
                rc = op_read(&p, f, a.program, &e);
                fclose(f);
            }
        }
        mpc_net_cfg nc;
        mpc_net_cfg_init(&nc, a.dealer ? 2 : a.id, 3);
        nc.n_parties = !strcmp(a.cfg.name, "semi2k") ? 2 : 3;
        nc.timeout_ms = a.timeout_ms;
        if (a.connect_ms)
            nc.connect_timeout_ms = a.connect_ms;
        nc.latency_ns = (uint64_t)llround(a.latency_ms * 1e6);
        if (!rc)
            rc = mpc_net_parse_peers(&nc, a.peers, 3, &e);
        party_job job = {&a, &p};
        if (!rc)
            rc = mpc_node_main(&a.cfg, &nc, party_work, &job, stdout, NULL, &e);
        if (rc)
            cli_error("party", "%s", e.msg);
    }
    for (int i = 0; i < a.n_binds; i++)
        free(a.binds[i].v);
    op_program_free(&p);
    return rc ? ms_err_exit_code(rc) : 0;
}
