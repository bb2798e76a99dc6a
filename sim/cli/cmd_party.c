/* cmd_party.c — `mpcsim party`: one party (or the dealer) of the real MPC backend.
 *
 * Every node of a session is started with the same --protocol, --peers list and program; each
 * gets its own --id (or --dealer). Parties may run on different hosts. The node prints what its
 * transport measured per op (rounds, payload bytes sent to each peer, offline bytes, time); it
 * prints revealed outputs only with --print-outputs and never prints a share or an input.
 *
 * The channels run TLS 1.3 with per-node certificates (protocols/backend/mpc_tls.h): `mpcsim
 * party keys --out DIR` makes a session's key folder, each node gets --keys DIR (it needs
 * ca.pem and its own node<i>.pem and node<i>.key only). --insecure-plaintext turns TLS off for
 * loopback experiments and says so on stderr every run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "opt.h"
#include "protocols/program/kern.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/backend/mpc_tls.h"
#include "protocols/program/proto.h"

typedef struct bind_file {
    char name[48];
    double *v;
    size_t n;
} bind_file;

typedef struct party_args {
    const char *protocol, *peers, *program, *keys;
    int id, dealer, demo, print_outputs, have_seed, plaintext;
    unsigned long long seed;
    int timeout_ms, connect_ms;
    int repeat, warmup; /* timed runs of the program (default 1) and untimed ones before */
    double latency_ms;
    bind_file binds[32];
    int n_binds;
    proto_cfg cfg;
} party_args;

static void usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim party -p semi2k|aby3 (--id I | --dealer) --peers H:P,H:P,H:P\n"
               "         (--keys DIR | --insecure-plaintext) (--program FILE | --demo)\n"
               "         [--bind NAME=FILE]... [--random-inputs SEED] [--set KEY=VALUE]...\n"
               "         [--timeout-ms N] [--latency-ms X] [--print-outputs]\n"
               "         [--repeat N [--warmup W]]\n"
               "       mpcsim party keys --out DIR [--nodes N]\n\n"
               "Runs one node of the real MPC backend: the op program on secret shares over\n"
               "TCP, with every byte and round counted by the transport, printed per op. The\n"
               "channels run TLS 1.3, each node authenticated by its certificate from the key\n"
               "folder `mpcsim party keys` makes (ca.pem, node<i>.pem, node<i>.key of mode\n"
               "0600; node i is party i, the semi2k dealer node 2). Give each host ca.pem and\n"
               "its own node's two files.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\n"
               "example (three terminals or hosts):\n"
               "  mpcsim party keys --out k\n"
               "  mpcsim party -p semi2k --id 0  --peers a:7000,b:7000,c:7000 --keys k --demo\n"
               "  mpcsim party -p semi2k --id 1  --peers a:7000,b:7000,c:7000 --keys k --demo\n"
               "  mpcsim party -p semi2k --dealer --peers a:7000,b:7000,c:7000 --keys k --demo\n"
               "  (with --random-inputs 1 on P0 and P1)\n");
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
            return err_set(e, MS_ERR_INPUT, "%s:%d:1: error: '%s' is not a real number", path, line,
                           tok);
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
            fprintf(
                stderr,
                "mpcsim party: error: --bind %s gives %zu values, the tensor has %zu (%u×%u×%u)\n",
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

static void print_stat_row(FILE *f, const char *label, const char *kind, const mpc_op_stat *s,
                           int nodes)
{
    fprintf(f, "%-6s %-11s %6llu", label, kind, (unsigned long long)s->rounds);
    for (int j = 0; j < nodes; j++)
        fprintf(f, " %12llu", (unsigned long long)s->sent[j]);
    fprintf(f, " %12llu %10.3f\n", (unsigned long long)(s->offline_recv + s->offline_sent),
            (double)s->ns * 1e-6);
}

/* One run's totals over every op. */
static mpc_op_stat run_total(const mpc_program_run *r, size_t n_ops, int nodes)
{
    mpc_op_stat tot = {0};
    for (size_t i = 0; i < n_ops; i++) {
        tot.rounds += r->ops[i].rounds;
        for (int q = 0; q < nodes; q++)
            tot.sent[q] += r->ops[i].sent[q];
        tot.offline_recv += r->ops[i].offline_recv;
        tot.offline_sent += r->ops[i].offline_sent;
        tot.ns += r->ops[i].ns;
    }
    return tot;
}

static int cmp_ns(const void *x, const void *y)
{
    uint64_t a = ((const mpc_op_stat *)x)->ns, b = ((const mpc_op_stat *)y)->ns;
    return a < b ? -1 : a > b;
}

/* --repeat: every timed run's totals, then the minimum and median time per run. */
static void print_repeats(FILE *out, mpc_op_stat *runs, int n, int warmup, int nodes)
{
    fprintf(out, "# repeat: %d timed runs of the program after %d warm-up run%s\n", n, warmup,
            warmup == 1 ? "" : "s");
    for (int k = 0; k < n; k++) {
        char lab[24];
        snprintf(lab, sizeof lab, "run%d", k + 1);
        print_stat_row(out, lab, "", &runs[k], nodes);
    }
    qsort(runs, (size_t)n, sizeof *runs, cmp_ns);
    double med =
        n & 1 ? (double)runs[n / 2].ns : 0.5 * (double)(runs[n / 2 - 1].ns + runs[n / 2].ns);
    fprintf(out, "# time per run: min %.3f ms, median %.3f ms (%d runs)\n",
            (double)runs[0].ns * 1e-6, med * 1e-6, n);
}

static int party_work(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    party_job *j = arg;
    const op_program *p = j->p;
    int nodes = mpc_net_nodes(net), self = mpc_net_self(net);
    int reps = j->a->repeat > 0 ? j->a->repeat : 1, warm = j->a->warmup;
    mpc_op_stat *runs = calloc((size_t)reps, sizeof *runs);
    mpc_program_run r;
    int rc = mpc_run_setup(e, net, p, bind_fn, j->a, &r, err);
    if (!runs && !rc)
        rc = err_set(err, MS_ERR_NOMEM, "out of memory");
    /* every run executes the whole program on the same shares; the table below is the last */
    for (int k = 0; k < warm + reps && !rc; k++)
        if (!(rc = mpc_run_ops(e, net, &r, 0, p->n_ops, err)) && k >= warm)
            runs[k - warm] = run_total(&r, p->n_ops, nodes);
    if (rc) {
        free(runs);
        mpc_program_run_free(e, &r);
        return rc;
    }
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
    for (size_t i = 0; i < p->n_ops; i++) {
        char lab[24];
        snprintf(lab, sizeof lab, "%zu", i);
        print_stat_row(out, lab, op_kind_name(p->ops[i].kind), &r.ops[i], nodes);
    }
    mpc_op_stat tot = run_total(&r, p->n_ops, nodes);
    print_stat_row(out, "total", "", &tot, nodes);
    print_stat_row(out, "setup", "", &r.setup, nodes);
    if (j->a->repeat > 0)
        print_repeats(out, runs, reps, warm, nodes);
    free(runs);
    const mpc_net_stats *st = mpc_net_get_stats(net);
    fprintf(out, "# frame headers: %llu B sent, %llu B received (overhead, not counted above)\n",
            (unsigned long long)st->hdr_sent, (unsigned long long)st->hdr_recv);
    uint64_t ws = 0, wr = 0;
    for (int q = 0; q < nodes; q++)
        ws += st->wire_sent[q], wr += st->wire_recv[q];
    if (mpc_net_is_tls(net))
        fprintf(out,
                "# TLS 1.3: %d connections, handshakes %llu B sent, %llu B received; data links "
                "after them: "
                "%llu B sent, %llu B received on the wire\n",
                st->tls_conns, (unsigned long long)st->tls_hs_sent,
                (unsigned long long)st->tls_hs_recv, (unsigned long long)ws,
                (unsigned long long)wr);
    else
        fprintf(out,
                "# plaintext channels (--insecure-plaintext): %llu B sent, %llu B received on the "
                "wire\n",
                (unsigned long long)ws, (unsigned long long)wr);
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

static int take_bind(const cli_opt *o, const char *arg, errbuf *e)
{
    party_args *a = o->dest;
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof a->binds[0].name || a->n_binds == 32)
        return err_set(e, MS_ERR_USAGE, "--bind wants NAME=FILE, not '%s'", arg);
    bind_file *b = &a->binds[a->n_binds++];
    snprintf(b->name, sizeof b->name, "%.*s", (int)(eq - arg), arg);
    return read_values(eq + 1, b, e);
}

/* The parsed options' protocol configuration (its --set values applied), and the checks
 * between options. */
static int party_check(party_args *a, const char *const *sets, int n_sets, errbuf *e)
{
    if (!a->protocol)
        return err_set(e, MS_ERR_USAGE, "--protocol is required (semi2k or aby3)");
    int rc = proto_cfg_default(a->protocol, &a->cfg, e);
    if (rc)
        return rc;
    for (int i = 0; i < n_sets; i++)
        if ((rc = proto_cfg_set_kv(&a->cfg, sets[i], e)))
            return rc;
    const proto *pr = proto_find(a->cfg.name);
    if (a->dealer == (a->id >= 0))
        return err_set(e, MS_ERR_USAGE, "give exactly one of --id and --dealer");
    if (a->dealer && !pr->has_dealer)
        return err_set(e, MS_ERR_USAGE, "--dealer: %s has no dealer", a->cfg.name);
    if (pr->has_dealer && a->id >= pr->n_parties)
        return err_set(e, MS_ERR_USAGE, "--id %d: %s has parties 0 and %d (and --dealer)", a->id,
                       a->cfg.name, pr->n_parties - 1);
    if (!a->peers)
        return err_set(e, MS_ERR_USAGE, "--peers is required: host:port of every node (3 entries)");
    if (a->warmup && !a->repeat)
        return err_set(e, MS_ERR_USAGE, "--warmup %d needs --repeat N (the timed runs)", a->warmup);
    if (!!a->program == a->demo)
        return err_set(e, MS_ERR_USAGE, "give exactly one of --program FILE and --demo");
    if (!!a->keys == a->plaintext)
        return err_set(
            e, MS_ERR_USAGE,
            a->keys ? "--keys and --insecure-plaintext exclude each other"
                    : "give --keys DIR (a key folder made by `mpcsim party keys --out DIR`): "
                      "channels run TLS; --insecure-plaintext turns that off");
    if (a->keys && strlen(a->keys) >= sizeof((mpc_net_cfg *)0)->keys)
        return err_set(e, MS_ERR_USAGE, "--keys: folder name too long");
    return MS_OK;
}

static int parse_args(int argc, char **argv, party_args *a, errbuf *e)
{
    const char *sets[32];
    cli_list set_list = {sets, 0, 32};
    a->id = -1;
    a->timeout_ms = 5000;
    const cli_opt opts[] = {
        /* in --help's order */
        {.name = "protocol",
         .short_name = 'p',
         .kind = CLI_STR,
         .dest = &a->protocol,
         .arg = "P",
         .help = "semi2k (P0, P1 and a dealer) or aby3 (P0, P1, P2)"},
        {.name = "id",
         .short_name = 'i',
         .kind = CLI_INT,
         .dest = &a->id,
         .arg = "I",
         .hi = 2,
         .want = "0, 1 or 2",
         .help = "this party's index"},
        {.name = "dealer",
         .kind = CLI_FLAG,
         .dest = &a->dealer,
         .help = "this node is the semi2k dealer (the third --peers entry)"},
        {.name = "peers",
         .kind = CLI_STR,
         .dest = &a->peers,
         .arg = "LIST",
         .help = "host:port of every node: parties in order, then the dealer"},
        {.name = "keys",
         .kind = CLI_STR,
         .dest = &a->keys,
         .arg = "DIR",
         .help = "the session's key folder (`mpcsim party keys`): TLS 1.3\n"
                 "channels, every peer authenticated as the node it claims"},
        {.name = "insecure-plaintext",
         .kind = CLI_FLAG,
         .dest = &a->plaintext,
         .help = "no TLS: channels unauthenticated and\n"
                 "unencrypted (loopback experiments only; warns)"},
        {.name = "program",
         .kind = CLI_STR,
         .dest = &a->program,
         .arg = "FILE",
         .help = "op program (text form; `mpcsim cost --dump-program` writes one)"},
        {.name = "demo",
         .kind = CLI_FLAG,
         .dest = &a->demo,
         .help = "a built-in program: x·W, rmsnorm, softmax, gelu, lt, reveal"},
        {.name = "bind",
         .kind = CLI_FN,
         .dest = a,
         .arg = "NAME=FILE",
         .fn = take_bind,
         .help = "values of tensor NAME (whitespace-separated reals) — weights at\n"
                 "P1, the client's inputs at P0, public tensors at every party"},
        {.name = "random-inputs",
         .kind = CLI_U64,
         .dest = &a->seed,
         .arg = "S",
         .want = "an integer seed",
         .seen = &a->have_seed,
         .help = "fill every tensor this node must provide and no --bind gives\n"
                 "with reals in [-1, 1) drawn from seed S (demos, benchmarks)"},
        {.name = "set",
         .kind = CLI_LIST,
         .dest = &set_list,
         .arg = "KEY=VALUE",
         .help = "protocol parameter (frac_bits, trunc_local, beaver_cache, …)"},
        {.name = "timeout-ms",
         .kind = CLI_INT,
         .dest = &a->timeout_ms,
         .arg = "N",
         .lo = 1,
         .hi = 3600000,
         .want = "1..3600000",
         .help = "a peer silent for N ms is an error (default 5000)"},
        {.name = "connect-timeout-ms",
         .kind = CLI_INT,
         .dest = &a->connect_ms,
         .arg = "N",
         .lo = 1,
         .hi = 3600000,
         .want = "1..3600000",
         .help = "how long to wait for every peer to start (default 10000)"},
        {.name = "latency-ms",
         .kind = CLI_F64,
         .dest = &a->latency_ms,
         .arg = "X",
         .hi = 60000,
         .want = "0..60000",
         .help = "inject X ms one-way latency per round message"},
        {.name = "print-outputs",
         .kind = CLI_FLAG,
         .dest = &a->print_outputs,
         .help = "print the values revealed to this party"},
        {.name = "repeat",
         .kind = CLI_INT,
         .dest = &a->repeat,
         .arg = "N",
         .lo = 1,
         .hi = 10000,
         .want = "1..10000",
         .help = "run the program N times on the same shares (every node the same N)\n"
                 "and print each run's rounds, bytes and time, then the min and\n"
                 "median time per run; the per-op table is the last run's"},
        {.name = "warmup",
         .kind = CLI_INT,
         .dest = &a->warmup,
         .arg = "W",
         .hi = 10000,
         .want = "0..10000",
         .help = "untimed runs before the --repeat ones (default 0)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"party", opts, sizeof opts / sizeof opts[0], 24, 0};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL, e);
    if (rc == CLI_HELP_ASKED) {
        usage(stdout, &cmd);
        return -1;
    }
    return rc ? rc : party_check(a, sets, set_list.n, e);
}

/* `mpcsim party keys`: a session's key folder. */
static int cmd_party_keys(int argc, char **argv)
{
    const char *out = NULL;
    int nodes = 3;
    const cli_opt opts[] = {
        {.name = "out",
         .short_name = 'o',
         .kind = CLI_STR,
         .dest = &out,
         .arg = "DIR",
         .help = "the folder to write (made with mode 0700; existing key files are\n"
                 "never overwritten)"},
        {.name = "nodes",
         .kind = CLI_INT,
         .dest = &nodes,
         .arg = "N",
         .lo = 2,
         .hi = MPC_NODES_MAX,
         .want = "2..4",
         .help = "nodes of the session (default 3: semi2k's P0, P1, dealer or aby3's\n"
                 "P0, P1, P2)"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"party keys", opts, sizeof opts / sizeof opts[0], 16, 0};
    errbuf e = {{0}};
    int rc = cli_parse(&cmd, argc, argv, NULL, NULL, &e);
    if (rc == CLI_HELP_ASKED) {
        printf(
            "usage: mpcsim party keys --out DIR [--nodes N]\n\n"
            "Makes a session's TLS key folder: ca.pem (the session CA's certificate; its key is\n"
            "never written, so no node can be added later), and per node i node<i>.pem (its\n"
            "certificate, naming node i) and node<i>.key (its Ed25519 key, mode 0600).\n\n"
            "options:\n");
        cli_help(&cmd, stdout);
        return 0;
    }
    if (!rc && !out)
        rc = err_set(&e, MS_ERR_USAGE, "--out DIR is required");
    if (!rc)
        rc = mpc_tls_make_keys(out, nodes, &e);
    if (rc) {
        cli_error("party keys", "%s", e.msg);
        return ms_err_exit_code(rc);
    }
    printf("wrote %s/ca.pem and node0..node%d .pem/.key (keys mode 0600): give each node's host "
           "ca.pem and its own "
           "two files\n",
           out, nodes - 1);
    return 0;
}

int cmd_party(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "keys"))
        return cmd_party_keys(argc - 1, argv + 1);
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
        nc.n_parties = proto_find(a.cfg.name)->n_parties;
        nc.timeout_ms = a.timeout_ms;
        if (a.connect_ms)
            nc.connect_timeout_ms = a.connect_ms;
        nc.latency_ns = (uint64_t)llround(a.latency_ms * 1e6);
        nc.plaintext = a.plaintext;
        if (a.keys)
            snprintf(nc.keys, sizeof nc.keys, "%s", a.keys);
        if (!rc && a.plaintext)
            fprintf(stderr,
                    "mpcsim party: WARNING: --insecure-plaintext: this node's channels are neither "
                    "authenticated nor encrypted; anyone on the network can read the shares and "
                    "seeds or pose "
                    "as a party. Use it for loopback experiments only.\n");
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
