/* cmd_cost.c — `mpcsim cost`: cost one model / protocol / network / KV point, no scenario. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "dbq.h"
#include "opt.h"
#include "progress.h"
#include "protocols/program/kern.h"
#include "sim/replay/replay.h"
#include "models/lower.h"
#include "sim/engine/simulate.h"
#include "sim/engine/stepcost.h"
#include "sim/policy/compose.h"
#include "sim/policy/plugin.h"
#include "sim/policy/policy.h"
#include "sim/scenario/runner.h"

typedef struct cost_args {
    const char *model, *protocol, *network, *profile, *dump, *timeline;
    int phase;
    uint32_t kv, tokens, batch, threads; /* threads 0: the profile's */
    unsigned long long burst;
    int overlap, json, have_burst, wire; /* wire: 0 none, 1 tcp, 2 tls */
    const char *sets[32];                /* --set KEY=VALUE, protocol parameters */
    int n_sets;
    const char *policy;                        /* --policy: the decode step with the policy's ops */
    const char *policy_params[RUN_MAX_PARAMS]; /* --policy-param KEY=VALUE */
    int n_policy_params;
    unsigned long long seed; /* the synthetic trace's seed (with --policy) */
} cost_args;

static int take_burst(const cli_opt *o, const char *arg, errbuf *e)
{
    cost_args *a = o->dest;
    if (parse_u64(arg, &a->burst) || (a->burst && a->burst < NET_BURST_MIN) ||
        a->burst > NET_BURST_MAX)
        return err_set(e, MS_ERR_USAGE,
                       "--burst wants bytes: 0 (no token bucket) or %u..%llu, not '%s'\n"
                       "---> HINT: a bucket must hold one 1500-byte frame; validate --shape "
                       "gives tbf max(3100, 1 ms of traffic)",
                       NET_BURST_MIN, (unsigned long long)NET_BURST_MAX, arg);
    a->have_burst = 1;
    return MS_OK;
}

static int take_wire(const cli_opt *o, const char *arg, errbuf *e)
{
    if (strcmp(arg, "tcp") != 0 && strcmp(arg, "tls") != 0 && strcmp(arg, "none") != 0)
        return err_set(e, MS_ERR_USAGE,
                       "--wire is tcp or none, or tls (TCP carrying TLS 1.3 records), not '%s'\n"
                       "---> HINT: scenarios set the framing field by field (scenarios/README.md)",
                       arg);
    ((cost_args *)o->dest)->wire = !strcmp(arg, "tcp") ? 1 : !strcmp(arg, "tls") ? 2 : 0;
    return MS_OK;
}

static void usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim cost --model M --protocol P --network N --kv T\n"
               "                   [--phase prefill|decode] [--tokens P] [--batch B] [--overlap]\n"
               "                   [--burst BYTES] [--wire tcp|tls|none] [--dump-program FILE]\n"
               "                   [--timeline FILE] [--profile NAME] [--threads N] [--json]\n"
               "                   [--set K=V]... [--policy NAME|FILE.yaml|PATH.so\n"
               "                   [--policy-param K=V]... [--seed S]]\n\n"
               "Costs one prefill or decode step of model M under MPC protocol P on network N:\n"
               "rounds, online bytes per party, offline (dealer) bytes, simulated latency, and a\n"
               "per-category breakdown with the critical path split into compute and\n"
               "communication. The full KV cache is attended, or with --policy the decode step\n"
               "as a run of that policy costs it: the policy replayed over a prompt of T-1\n"
               "tokens of a synthetic trace (seed S, default 1), then one decode step with its\n"
               "selection ops (the run's bytes_decode_step for prompt_len T-1, decode_len 1).\n"
               "The policy is a registered name, a composition file (a scenario's {compose:\n"
               "FILE.yaml}) or a plug-in (a scenario's {plugin: PATH.so}).\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\nexample:\n"
               "  mpcsim cost --model llama-2-7b --protocol semi2k --network wan --kv 4096\n"
               "  mpcsim cost -m llama-2-7b -p aby3 -n lan -k 4096 --policy h2o \\\n"
               "      --policy-param kv_budget=0.1 --policy-param prompt_rows=256\n");
}

static int parse_args(int argc, char **argv, cost_args *a)
{
    memset(a, 0, sizeof *a);
    a->phase = PHASE_DECODE;
    a->tokens = 128;
    a->batch = 1;
    a->profile = "default";
    a->seed = 1;
    int have_kv = 0, have_tokens = 0, have_seed = 0;
    cli_list sets = {a->sets, 0, 32}, pparams = {a->policy_params, 0, RUN_MAX_PARAMS};
    const cli_opt opts[] = {
        /* in --help's order */
        {.name = "model",
         .short_name = 'm',
         .kind = CLI_STR,
         .dest = &a->model,
         .arg = "M",
         .help = "model name (models/M.yaml) or YAML path"},
        {.name = "protocol",
         .short_name = 'p',
         .kind = CLI_STR,
         .dest = &a->protocol,
         .arg = "P",
         .help = "semi2k | aby3"},
        {.name = "network",
         .short_name = 'n',
         .kind = CLI_STR,
         .dest = &a->network,
         .arg = "N",
         .help =
             "lan | wan | wan-spu, or LATENCY/BANDWIDTH[/BURST]\n(20ms/300Mbps, 1ms/20Mbps/3100)"},
        {.name = "burst",
         .kind = CLI_FN,
         .dest = a,
         .arg = "BYTES",
         .fn = take_burst,
         .help = "every link a token bucket of BYTES (as Linux tbf's\nburst; >= 1500, 0: none, the "
                 "default); "
                 "see\nsim/engine/SIMULATION.md"},
        {.name = "set",
         .kind = CLI_LIST,
         .dest = &sets,
         .arg = "K=V",
         .help = "protocol parameter (frac_bits, approx, msb, …;\nrepeatable)"},
        {.name = "wire",
         .kind = CLI_FN,
         .dest = a,
         .arg = "W",
         .fn = take_wire,
         .help = "tcp: links carry Ethernet/IPv4/TCP frames and ACKs (as\ntbf counts them); none: "
                 "payload only "
                 "(default);\nSIMULATION.md"},
        {.name = "kv",
         .short_name = 'k',
         .kind = CLI_U32,
         .dest = &a->kv,
         .arg = "T",
         .hi = 1e8,
         .want = "an integer in [0, 100000000]",
         .seen = &have_kv,
         .help = "decode: the step attends T keys (T-1 cached + this\ntoken); prefill: entries "
                 "cached before the "
                 "prompt\n(default 0)"},
        {.name = "phase",
         .kind = CLI_CHOICE,
         .dest = &a->phase,
         .arg = "PH",
         .choices = "prefill|decode",
         .help = "decode (default) or prefill"},
        {.name = "tokens",
         .short_name = 't',
         .kind = CLI_U32,
         .dest = &a->tokens,
         .arg = "P",
         .lo = 1,
         .hi = 1u << 24,
         .want = "an integer in [1, 16777216]",
         .seen = &have_tokens,
         .help = "prefill: prompt tokens in this step (default 128)"},
        {.name = "batch",
         .short_name = 'b',
         .kind = CLI_U32,
         .dest = &a->batch,
         .arg = "B",
         .lo = 1,
         .hi = 65536,
         .want = "an integer in [1, 65536]",
         .help = "sequences processed together (default 1)"},
        {.name = "overlap",
         .kind = CLI_FLAG,
         .dest = &a->overlap,
         .help = "let rounds of independent ops overlap (default: in\norder)"},
        {.name = "dump-program",
         .kind = CLI_STR,
         .dest = &a->dump,
         .arg = "F",
         .help = "write the step's op program (text form) to F"},
        {.name = "timeline",
         .kind = CLI_STR,
         .dest = &a->timeline,
         .arg = "F",
         .help = "write a Chrome trace (chrome://tracing, ui.perfetto.dev)"},
        {.name = "profile",
         .kind = CLI_STR,
         .dest = &a->profile,
         .arg = "NAME",
         .help = "machine profile (protocols/machines/NAME.yaml or a path;\ndefault: default, 16 "
                 "cores; `mpcsim list machines`)"},
        {.name = "threads",
         .kind = CLI_U32,
         .dest = &a->threads,
         .arg = "N",
         .lo = 1,
         .hi = 4096,
         .want = "1..4096",
         .help = "cores a party uses (default: the profile's)"},
        {.name = "policy",
         .kind = CLI_STR,
         .dest = &a->policy,
         .arg = "NAME",
         .help = "decode: the step under policy NAME (`mpcsim list\npolicies`), a composition "
                 "FILE.yaml or a plug-in PATH.so,\nits selection ops included"},
        {.name = "policy-param",
         .kind = CLI_LIST,
         .dest = &pparams,
         .arg = "K=V",
         .help = "a parameter of --policy (kv_budget=0.1, heavy=64, …;\nrepeatable)"},
        {.name = "seed",
         .kind = CLI_U64,
         .dest = &a->seed,
         .arg = "S",
         .seen = &have_seed,
         .help = "with --policy: the synthetic trace's seed (default 1)"},
        {.name = "json",
         .kind = CLI_FLAG,
         .dest = &a->json,
         .help = "print one JSON object instead of tables"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"cost", opts, sizeof opts / sizeof opts[0], 24, 0};
    int rc = cli_parse_cmd(&cmd, argc, argv, NULL, NULL, usage);
    a->n_sets = sets.n;
    a->n_policy_params = pparams.n;
    if (rc)
        return rc == CLI_HELP_ASKED ? -1 : rc;
    const char *missing = !a->model                                ? "--model"
                          : !a->protocol                           ? "--protocol"
                          : !a->network                            ? "--network"
                          : (!have_kv && a->phase == PHASE_DECODE) ? "--kv"
                                                                   : NULL;
    if (missing) {
        cli_error("cost", "%s is required (see mpcsim cost --help)", missing);
        return 2;
    }
    if (a->phase == PHASE_DECODE && have_tokens) {
        cli_error("cost", "--tokens applies to --phase prefill (a decode step has one token)");
        return 2;
    }
    const char *needs_policy = a->n_policy_params ? "--policy-param" : have_seed ? "--seed" : NULL;
    if (!a->policy && needs_policy) {
        cli_error("cost", "%s goes with --policy NAME", needs_policy);
        return 2;
    }
    if (a->policy && (a->phase != PHASE_DECODE || a->kv < 2)) {
        cli_error("cost", "--policy costs a decode step after a prompt of T-1 tokens: it wants "
                          "--phase decode and --kv T of at least 2");
        return 2;
    }
    if (a->phase == PHASE_DECODE)
        a->tokens = 1;
    return 0;
}

/* ---- output --------------------------------------------------------------------------- */

static uint64_t sum_p(const uint64_t *v, int n)
{
    uint64_t s = 0;
    for (int p = 0; p < n; p++)
        s += v[p];
    return s;
}

/* Prints the step in 80 columns, in report's units (s/min/h/d, kB/MB/GB/TB; --json has the raw
 * figures). */
/* Under compat: crypten, which has no top-k, the route each of the step's top-k ops takes (the
 * public rule of kern_cr.c: k argmaxes or the odd-even merge sort, by rounds). */
static void print_topk_routes(const step_env *env, const op_program *prog)
{
    if (strcmp(env->pcfg->compat, "crypten"))
        return;
    size_t arg = 0, sort = 0, kmax = 0;
    for (size_t i = 0; i < prog->n_ops; i++) {
        const op *o = &prog->ops[i];
        if (o->kind != OP_TOPK)
            continue;
        size_t k = o->iarg > 0 ? (size_t)o->iarg : 1;
        k = k < o->n ? k : o->n;
        if (kern_topk_cr_argmaxes(o->n, k)) {
            arg++;
            kmax = k > kmax ? k : kmax;
        } else
            sort++;
    }
    if (!arg && !sort)
        return;
    char line[256];
    int n = snprintf(line, sizeof line, "top-k (CrypTen has none): ");
    if (arg)
        n += snprintf(line + n, sizeof line - (size_t)n, "%zu op%s by k argmaxes (k <= %zu)%s",
                      arg, arg == 1 ? "" : "s", kmax, sort ? ", " : "");
    if (sort && n < (int)sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, "%zu op%s by the odd-even merge sort", sort,
                 sort == 1 ? "" : "s");
    dbq_wrap(stdout, line, 80);
}

static void print_text(const cost_args *a, const step_env *env, const op_program *prog,
                       const sim_result *r)
{
    int P = env->pr->n_parties;
    char b[32], c2[32], c3[32];
    const net_link *l = &env->net->link[0][1];
    char extra[64] = "";
    if (l->burst_bytes)
        snprintf(extra, sizeof extra, ", bucket %llu B", (unsigned long long)l->burst_bytes);
    if (env->net->wire.mtu)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", TCP frames (MTU %u)",
                 env->net->wire.mtu);
    char rate[32], line[512];
    net_rate_str(l->bandwidth_bps, rate, sizeof rate);
    /* a framework profile joins the protocol's name, as in the runs' protocol_label */
    const char *cp = env->pcfg->compat;
    int prof = cp[0] && strcmp(cp, "native");
    /* the score-side gather, when chosen (protocol option gather) */
    int sg = !strcmp(env->pcfg->gather, "scores");
    snprintf(line, sizeof line, "model %s, %s%s%s (%d parties%s), network %s (%.3g ms, %s%s)",
             env->model->name, env->pr->name, prof ? "/" : "", prof ? cp : "", P,
             sg ? ", gather: scores" : "", env->net->name, (double)l->latency_ns * 1e-6, rate,
             extra);
    dbq_wrap(stdout, line, 80);
    snprintf(line, sizeof line,
             "machine %s (%d thread%s); %s, %u token%s, kv %u, batch %u, overlap %s",
             env->mach->name, env->mach->threads, env->mach->threads == 1 ? "" : "s",
             op_phase_name(a->phase), a->tokens, a->tokens == 1 ? "" : "s", a->kv, a->batch,
             a->overlap ? "on" : "off");
    dbq_wrap(stdout, line, 80);
    if (a->policy) {
        int k = snprintf(line, sizeof line, "policy %s", a->policy);
        for (int i = 0; i < a->n_policy_params && k < (int)sizeof line; i++)
            k += snprintf(line + k, sizeof line - (size_t)k, "%s%s", i ? ", " : " (",
                          a->policy_params[i]);
        if (a->n_policy_params && k < (int)sizeof line)
            k += snprintf(line + k, sizeof line - (size_t)k, ")");
        if (k < (int)sizeof line)
            snprintf(line + k, sizeof line - (size_t)k,
                     ", replayed over a prompt of %u tokens (synthetic trace, seed %llu)",
                     a->kv - 1, a->seed);
        dbq_wrap(stdout, line, 80);
    }
    print_topk_routes(env, prog);
    dbq_seconds(b, sizeof b, (double)r->latency_ns * 1e-9);
    dbq_seconds(c2, sizeof c2, (double)r->total.compute_ns * 1e-9);
    dbq_seconds(c3, sizeof c3, (double)r->total.comm_ns * 1e-9);
    printf("\nlatency        %s (critical path: compute %s, communication %s)\n", b, c2, c3);
    printf("rounds         %llu\n", (unsigned long long)r->total.rounds);
    dbq_bytes(b, sizeof b, (double)sum_p(r->total.bytes_sent, P));
    int k = snprintf(line, sizeof line, "online bytes   %s (", b);
    for (int p = 0; p < P && k < (int)sizeof line; p++) {
        dbq_bytes(b, sizeof b, (double)r->total.bytes_sent[p]);
        k += snprintf(line + k, sizeof line - (size_t)k, "%sP%d %s", p ? ", " : "", p, b);
    }
    printf("%s)\n", line);
    dbq_bytes(b, sizeof b, (double)sum_p(r->total.offline_bytes, P));
    printf("offline bytes  %s%s\n\n", b,
           env->pr->has_dealer ? " (preprocessing, from the dealer)" : " (no dealer)");
    printf("%-11s %8s %13s %10s %10s %7s\n", "category", "rounds", "online bytes", "compute",
           "comm", "share");
    for (int c = 0; c < OPC_N; c++) {
        const sim_stats *s = &r->cat[c];
        uint64_t bytes = sum_p(s->bytes_sent, P);
        if (!s->rounds && !bytes && !s->compute_ns && !s->comm_ns)
            continue;
        dbq_bytes(b, sizeof b, (double)bytes);
        dbq_seconds(c2, sizeof c2, (double)s->compute_ns * 1e-9);
        dbq_seconds(c3, sizeof c3, (double)s->comm_ns * 1e-9);
        double share = r->latency_ns
                           ? 100.0 * (double)(s->compute_ns + s->comm_ns) / (double)r->latency_ns
                           : 0;
        printf("%-11s %8llu %13s %10s %10s %6.1f%%\n", op_cat_name(c),
               (unsigned long long)s->rounds, b, c2, c3, share);
    }
}

/* JSON through jansson: every string (a model's name may hold quotes or backslashes) is
 * escaped by the library. */
static json_t *json_parties(const uint64_t *v, int P)
{
    json_t *a = json_array();
    for (int p = 0; p < P; p++)
        json_array_append_new(a, json_integer((json_int_t)v[p]));
    return a;
}

static json_t *json_stats(const sim_stats *s, int P)
{
    return json_pack("{s:I, s:o, s:o, s:f, s:f}", "rounds", (json_int_t)s->rounds, "bytes_sent",
                     json_parties(s->bytes_sent, P), "offline_bytes",
                     json_parties(s->offline_bytes, P), "compute_s", (double)s->compute_ns * 1e-9,
                     "comm_s", (double)s->comm_ns * 1e-9);
}

static int print_json(const cost_args *a, const step_env *env, const sim_result *r)
{
    int P = env->pr->n_parties;
    json_t *o = json_object(), *cats = json_object();
    json_object_set_new(o, "model", json_string(env->model->name));
    json_object_set_new(o, "protocol", json_string(env->pr->name));
    if (env->pcfg->compat[0] && strcmp(env->pcfg->compat, "native"))
        json_object_set_new(o, "compat", json_string(env->pcfg->compat));
    if (!strcmp(env->pcfg->gather, "scores"))
        json_object_set_new(o, "gather", json_string(env->pcfg->gather));
    json_object_set_new(o, "parties", json_integer(P));
    json_object_set_new(o, "network", json_string(env->net->name));
    json_object_set_new(o, "burst_bytes",
                        json_integer((json_int_t)env->net->link[0][1].burst_bytes));
    json_object_set_new(o, "wire_mtu", json_integer(env->net->wire.mtu));
    json_object_set_new(o, "profile", json_string(env->mach->name));
    json_object_set_new(o, "threads", json_integer(env->mach->threads));
    json_object_set_new(o, "phase", json_string(op_phase_name(a->phase)));
    json_object_set_new(o, "tokens", json_integer(a->tokens));
    json_object_set_new(o, "kv", json_integer(a->kv));
    json_object_set_new(o, "batch", json_integer(a->batch));
    json_object_set_new(o, "overlap", json_boolean(a->overlap));
    json_object_set_new(o, "latency_s", json_real((double)r->latency_ns * 1e-9));
    json_object_set_new(o, "rounds", json_integer((json_int_t)r->total.rounds));
    json_object_set_new(o, "bytes_online", json_integer((json_int_t)sum_p(r->total.bytes_sent, P)));
    json_object_set_new(o, "bytes_offline",
                        json_integer((json_int_t)sum_p(r->total.offline_bytes, P)));
    json_object_set_new(o, "total", json_stats(&r->total, P));
    for (int k = 0; k < OPC_N; k++)
        json_object_set_new(cats, op_cat_name(k), json_stats(&r->cat[k], P));
    json_object_set_new(o, "categories", cats);
    /* 19 keys, and the profile's and the gather's when not the defaults */
    size_t want = 19 + (size_t)(env->pcfg->compat[0] && strcmp(env->pcfg->compat, "native")) +
                  (size_t)!strcmp(env->pcfg->gather, "scores");
    if (a->policy) {
        json_t *pp = json_object();
        for (int i = 0; i < a->n_policy_params; i++) {
            const char *eq = strchr(a->policy_params[i], '=');
            char key[48];
            snprintf(key, sizeof key, "%.*s", (int)(eq - a->policy_params[i]), a->policy_params[i]);
            json_object_set_new(pp, key, json_string(eq + 1));
        }
        json_object_set_new(o, "policy", json_string(a->policy));
        json_object_set_new(o, "policy_params", pp);
        json_object_set_new(o, "seed", json_integer((json_int_t)a->seed));
        want += 3;
    }
    /* json_string gives NULL on invalid UTF-8: the object then lacks that key, so check */
    int rc = json_object_size(o) == want && json_dumpf(o, stdout, JSON_COMPACT) == 0 ? 0 : -1;
    json_decref(o);
    putchar('\n');
    return rc;
}

/* ---- main ------------------------------------------------------------------------------ */

/* What the step is costed with, as the options name it. */
typedef struct cost_inputs {
    const proto *pr;
    model_cfg model;
    proto_cfg pcfg;
    net_cfg net;
    machine_profile mach;
} cost_inputs;

/* The protocol --protocol names; NULL after the error (with a did-you-mean). */
static const proto *cost_protocol(const char *name)
{
    const proto *pr = proto_find(name);
    if (pr)
        return pr;
    size_t n;
    const proto *const *all = proto_all(&n);
    const char *names[16];
    for (size_t i = 0; i < n && i < 16; i++)
        names[i] = all[i]->name;
    const char *dym = did_you_mean(name, names, n < 16 ? n : 16);
    cli_error("cost", "unknown protocol '%s'%s%s%s", name, dym ? " (did you mean '" : "",
              dym ? dym : "", dym ? "'?)" : "");
    return NULL;
}

/* The model, protocol, network and machine, with the options that change them. 0, or the
 * exit status after the error. */
static int cost_load(const cost_args *a, cost_inputs *in)
{
    errbuf e;
    int rc;
    if (!(in->pr = cost_protocol(a->protocol)))
        return 2;
    if ((rc = model_load(a->model, &in->model, &e)) ||
        (rc = proto_cfg_default(in->pr->name, &in->pcfg, &e)) ||
        (rc = net_parse(a->network, in->pr->n_parties, &in->net, &e)) ||
        (rc = machine_load(a->profile, &in->mach, &e)))
        return cli_fail("cost", rc, e.msg);
    if (a->threads)
        in->mach.threads = (int)a->threads;
    for (int i = 0; i < a->n_sets; i++)
        if (proto_cfg_set_kv(&in->pcfg, a->sets[i], &e)) {
            cli_error("cost", "%s", e.msg);
            return 2;
        }
    if (a->have_burst)
        net_set_burst(&in->net, a->burst);
    if (a->wire)
        in->net.wire = NET_WIRE_TCP;
    if (a->wire == 2) { /* TLS 1.3 records (RFC 8446 §5.2; sim/engine/net.c) */
        in->net.wire.tls_record = NET_WIRE_TLS13_RECORD;
        in->net.wire.tls_overhead = NET_WIRE_TLS13_OVERHEAD;
    }
    return 0;
}

/* The step to lower: the phase, its tokens, the cached entries, the batch. */
static void cost_lower_opts(const cost_args *a, lower_opts *lo)
{
    lower_opts_default(lo);
    lo->phase = a->phase;
    lo->n_tokens = a->tokens;
    /* decode at KV length T: the new token attends T keys, T - 1 of them cached */
    lo->kv_len = (a->phase == PHASE_DECODE && a->kv > 0) ? a->kv - 1 : a->kv;
    lo->n_seqs = a->batch;
}

/* --dump-program, then the figures as JSON or as tables. 0, or 1 (said). */
static int cost_write(const cost_args *a, const step_env *env, const op_program *prog,
                      const sim_result *res)
{
    int status = 0;
    if (a->dump) {
        FILE *f = fopen(a->dump, "w");
        if (!f || op_write(prog, f) != MS_OK || fclose(f) != 0) {
            cli_error("cost", "cannot write %s: %s", a->dump, strerror(errno));
            status = 1;
        }
    }
    if (a->json && print_json(a, env, res)) {
        cli_error("cost", "cannot write the JSON output (a name that is not UTF-8?)");
        status = 1;
    } else if (!a->json)
        print_text(a, env, prog, res);
    return status;
}

/* The step lowered, costed and simulated (its timeline into tl, closed here; NULL: none),
 * then written. The exit status. */
static int cost_step(const cost_args *a, const cost_inputs *in, FILE *tl, op_program *prog,
                     cost_log *log)
{
    step_env env = {&in->model, in->pr,    &in->pcfg,
                    &in->net,   &in->mach, {.overlap = a->overlap, .timeline = tl}};
    lower_opts lo;
    cost_lower_opts(a, &lo);
    if (tl)
        sim_timeline_begin(tl, in->pr->n_parties);
    errbuf e;
    sim_result res;
    int rc = step_simulate(&env, &lo, prog, log, &res, &e), status = 0;
    if (tl) {
        sim_timeline_end(tl);
        if (fclose(tl) != 0 && rc == MS_OK) {
            cli_error("cost", "writing %s failed", a->timeline);
            status = 1;
        }
    }
    if (rc != MS_OK)
        return cli_fail("cost", rc, e.msg);
    status |= cost_write(a, &env, prog, &res);
    sim_result_free(&res);
    return status;
}

/* --policy: the policy's parameters as a scenario's, checked as a scenario's are (unknown keys,
 * ranges, the rules between them); 0 or the exit status after the error. */
static int policy_cfg(const cost_args *a, run_cfg *c)
{
    errbuf e;
    const policy_ops *pol = NULL;
    size_t len = strlen(a->policy);
    int so = len > 3 && !strcmp(a->policy + len - 3, ".so"),
        yaml = (len > 5 && !strcmp(a->policy + len - 5, ".yaml")) ||
               (len > 4 && !strcmp(a->policy + len - 4, ".yml"));
    /* a plug-in or a composition, as a scenario's {plugin: PATH} and {compose: FILE} */
    if ((so && policy_plugin_load(a->policy, &pol, &e)) ||
        (yaml && policy_compose_load(a->policy, &pol, &e))) {
        cli_error("cost", "%s", e.msg);
        return 2;
    }
    if (!so && !yaml)
        pol = policy_find(a->policy);
    if (!pol) {
        size_t n;
        const policy_ops *const *all = policy_all(&n);
        const char *names[32];
        size_t k = 0;
        for (size_t i = 0; i < n && k < 32; i++)
            names[k++] = policy_name(all[i]);
        const char *dym = did_you_mean(a->policy, names, k);
        cli_error("cost", "unknown policy '%s'%s%s%s (mpcsim list policies)", a->policy,
                  dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
        return 2;
    }
    snprintf(c->policy.name, sizeof c->policy.name, "%s", pol->name);
    for (int i = 0; i < a->n_policy_params; i++) {
        const char *s = a->policy_params[i], *eq = strchr(s, '=');
        kv_param *kv = &c->policy.params[i];
        if (!eq || eq == s || (size_t)(eq - s) >= sizeof kv->key ||
            strlen(eq + 1) >= sizeof kv->val) {
            cli_error("cost", "--policy-param wants KEY=VALUE (a parameter of %s), not '%s'",
                      pol->name, s);
            return 2;
        }
        memcpy(kv->key, s, (size_t)(eq - s));
        snprintf(kv->val, sizeof kv->val, "%s", eq + 1);
    }
    c->policy.n_params = (size_t)a->n_policy_params;
    if (policy_check_params(pol, c->policy.params, c->policy.n_params, "--policy-param", &e)) {
        cli_error("cost", "%s", e.msg);
        return 2;
    }
    return 0;
}

/* --policy: a run of the policy over a prompt of T-1 tokens of a synthetic trace and one decode
 * step (run_decode_program: the step a run stores as bytes_decode_step), simulated on the
 * network and machine, then written. The exit status. */
static int cost_policy_step(const cost_args *a, const cost_inputs *in, FILE *tl)
{
    run_cfg *c = calloc(1, sizeof *c);
    if (!c) {
        if (tl)
            fclose(tl);
        cli_error("cost", "out of memory");
        return 1;
    }
    int status = policy_cfg(a, c);
    errbuf e;
    op_program prog;
    cost_log log;
    op_program_init(&prog);
    cost_log_init(&log, in->pr->n_parties);
    sim_result res;
    int rc = MS_OK, simulated = 0;
    if (!status) {
        c->model = in->model;
        snprintf(c->model_ref, sizeof c->model_ref, "%s", in->model.name);
        c->proto = in->pcfg;
        snprintf(c->proto_ref, sizeof c->proto_ref, "%s", in->pr->name);
        c->net = in->net;
        c->machine = in->mach;
        snprintf(c->trace.source, sizeof c->trace.source, "synth");
        snprintf(c->scenario_path, sizeof c->scenario_path, "--policy-param");
        c->work.prompt_len = a->kv - 1;
        c->work.decode_len = 1;
        c->work.batch = a->batch;
        c->work.prefill_in_mpc = 1;
        c->seed = a->seed;
        c->overlap = a->overlap;
        replay_work w; /* reading every row of a long prompt takes minutes: say so first */
        double cpu = replay_estimate(c, &w, &e) ? 0 : progress_cpu_estimate(c, &w);
        if (cpu > 10 && !w.prompt_rows && w.prompt_att_rows > 256) {
            char t[32];
            progress_fmt_dur(t, sizeof t, cpu);
            fprintf(stderr,
                    "mpcsim cost: note: %s reads the attention of %.0f prompt rows (about %s of "
                    "CPU);\n  --policy-param prompt_rows=256 reads the last 256\n",
                    c->policy.name, w.prompt_att_rows, t);
        }
        rc = run_decode_program(c, &prog, &log, &e);
        if (rc == MS_OK) {
            if (tl)
                sim_timeline_begin(tl, in->pr->n_parties);
            sim_opts o = {.overlap = a->overlap, .timeline = tl};
            rc = sim_run(&in->net, &in->mach, &prog, &log, &o, &res, &e);
            simulated = rc == MS_OK;
            if (tl)
                sim_timeline_end(tl);
        }
        if (rc != MS_OK)
            status = cli_fail("cost", rc, e.msg);
    }
    if (tl && fclose(tl) != 0 && !status) {
        cli_error("cost", "writing %s failed", a->timeline);
        status = 1;
    }
    if (simulated) {
        step_env env = {&in->model, in->pr, &in->pcfg, &in->net, &in->mach, {0}};
        status |= cost_write(a, &env, &prog, &res);
        sim_result_free(&res);
    }
    op_program_free(&prog);
    cost_log_free(&log);
    free(c);
    return status;
}

int cmd_cost(int argc, char **argv)
{
    cost_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    cost_inputs in;
    if ((rc = cost_load(&a, &in)))
        return rc;
    FILE *tl = NULL;
    if (a.timeline && !(tl = fopen(a.timeline, "w"))) {
        cli_error("cost", "cannot write %s: %s", a.timeline, strerror(errno));
        return 1;
    }
    if (a.policy)
        return cost_policy_step(&a, &in, tl);
    op_program prog;
    cost_log log;
    op_program_init(&prog);
    cost_log_init(&log, in.pr->n_parties);
    int status = cost_step(&a, &in, tl, &prog, &log);
    op_program_free(&prog);
    cost_log_free(&log);
    return status;
}
