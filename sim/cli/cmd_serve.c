/* cmd_serve.c — `mpcsim serve`: multi-user serving under cross-user KV sharing policies.
 *
 *   mpcsim serve SCENARIO.yaml [-o DB] [--plot DIR] [overrides…]
 *   mpcsim serve --workload FILE --model M --protocol P --network N [--policy NAME] …
 *
 * Reads a serving scenario (schema: scenarios/SERVING.md), runs every policy × rate, prints
 * the figures, records them in the results database, runs the timing attacker per policy and
 * optionally plots with gnuplot. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "opt.h"
#include "gnuplot.h"
#include "sim/serve/leak.h"
#include "models/model.h"
#include "sim/serve/serve.h"
#include "sim/serve/servescn.h"
#include "sim/scenario/runlabel.h"
#include "results/serve_db.h"
#include "sim/serve/workload.h"
#include "protocols/base/metric_def.h"
#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"

/* ---- command line ------------------------------------------------------------------------ */

typedef struct serve_args {
    const char *scenario, *output, *plot, *workload, *dump;
    const char *model, *protocol, *network;
    uint32_t requests, batch, chunk;
    unsigned long long seed;
    double rate;
    int scheduler, policy, position; /* -1: not given */
    int have_requests, have_seed, have_batch, have_chunk, have_rate;
    int no_attack, quiet;
} serve_args;

static void usage(FILE *f, const cli_cmd *c)
{
    fprintf(f, "usage: mpcsim serve SCENARIO.yaml [-o DB] [--plot DIR] [options]\n"
               "       mpcsim serve --workload FILE [--model M --protocol P --network N]\n"
               "                    [options]\n\n"
               "Simulates MPC parties serving many users' requests, with cross-user KV sharing\n"
               "policies (none, prefix, salted, span), and reports TTFT p50/p90/p99, time per\n"
               "output token, throughput, token and request hit rates, MPC bytes and rounds\n"
               "saved and cache memory; a timing attacker measures what each policy leaks.\n"
               "Scenario schema and replay format: scenarios/SERVING.md.\n\n"
               "options:\n");
    cli_help(c, f);
    fprintf(f, "\nexample:\n"
               "  mpcsim serve scenarios/serve-agent.yaml --plot results/serve-agent-plots\n");
}

static int take_scheduler(const cli_opt *o, const char *arg, errbuf *e)
{
    if ((*(int *)o->dest = serve_sched_from_name(arg)) < 0)
        return err_set(e, MS_ERR_USAGE, "--scheduler is fcfs or lpm, not '%s'", arg);
    return MS_OK;
}

static int take_policy(const cli_opt *o, const char *arg, errbuf *e)
{
    if ((*(int *)o->dest = kvs_kind_from_name(arg)) < 0)
        return err_set(e, MS_ERR_USAGE, "unknown policy '%s' (none, prefix, salted, span)", arg);
    return MS_OK;
}

/* 0 ok, 1 --help printed, 2 usage error (printed). */
static int parse_args(int argc, char **argv, serve_args *a)
{
    memset(a, 0, sizeof *a);
    a->scheduler = a->policy = a->position = -1;
    const cli_opt opts[] = {
        {.name = "output",
         .short_name = 'o',
         .kind = CLI_STR,
         .dest = &a->output,
         .arg = "DB",
         .help = "results database (default: the scenario's output:,\nelse results/<name>.db)"},
        {.name = "plot",
         .kind = CLI_STR,
         .dest = &a->plot,
         .arg = "DIR",
         .help = "write TTFT CDF and load plots (gnuplot) into DIR"},
        {.name = "workload",
         .kind = CLI_STR,
         .dest = &a->workload,
         .arg = "FILE",
         .help = "replay a workload file instead of generating one"},
        {.name = "dump-workload",
         .kind = CLI_STR,
         .dest = &a->dump,
         .arg = "F",
         .help = "write the (first) generated workload to F and continue"},
        {.name = "policy",
         .kind = CLI_FN,
         .dest = &a->policy,
         .arg = "NAME",
         .fn = take_policy,
         .help = "only this sharing policy"},
        {.name = "requests",
         .short_name = 'n',
         .kind = CLI_U32,
         .dest = &a->requests,
         .arg = "N",
         .lo = 1,
         .hi = 1e7,
         .want = "an integer in [1, 10000000]",
         .seen = &a->have_requests,
         .help = "override workload.requests"},
        {.name = "rate",
         .short_name = 'r',
         .kind = CLI_F64,
         .dest = &a->rate,
         .arg = "R",
         .lo = 1e-12,
         .hi = 1e9,
         .want = "a rate in [1e-12, 1e9] requests per second",
         .seen = &a->have_rate,
         .help = "override workload.rate (requests per second)"},
        {.name = "seed",
         .short_name = 's',
         .kind = CLI_U64,
         .dest = &a->seed,
         .arg = "S",
         .want = "an integer in [0, 18446744073709551615]",
         .seen = &a->have_seed,
         .help = "override seed"},
        {.name = "model",
         .short_name = 'm',
         .kind = CLI_STR,
         .dest = &a->model,
         .arg = "M",
         .help = "model (default llama-2-7b)"},
        {.name = "protocol",
         .short_name = 'p',
         .kind = CLI_STR,
         .dest = &a->protocol,
         .arg = "P",
         .help = "semi2k | aby3 (default semi2k)"},
        {.name = "network",
         .kind = CLI_STR,
         .dest = &a->network,
         .arg = "N",
         .help = "lan | wan | LATENCY/BANDWIDTH (default lan)"},
        {.name = "batch",
         .short_name = 'b',
         .kind = CLI_U32,
         .dest = &a->batch,
         .arg = "B",
         .lo = 1,
         .hi = 4096,
         .want = "an integer in [1, 4096]",
         .seen = &a->have_batch,
         .help = "running requests (default 8)"},
        {.name = "chunk",
         .kind = CLI_U32,
         .dest = &a->chunk,
         .arg = "T",
         .hi = SERVE_TOKMAX,
         .want = "an integer in [0, 4194304]",
         .seen = &a->have_chunk,
         .help = "chunked prefill, tokens per iteration (default off)"},
        {.name = "scheduler",
         .kind = CLI_FN,
         .dest = &a->scheduler,
         .arg = "S",
         .fn = take_scheduler,
         .help = "fcfs | lpm"},
        {.name = "position",
         .kind = CLI_CHOICE,
         .dest = &a->position,
         .arg = "P",
         .choices = "rerotate|recompute",
         .help = "span sharing: rerotate | recompute"},
        {.name = "no-attack",
         .kind = CLI_FLAG,
         .dest = &a->no_attack,
         .help = "skip the timing attacker"},
        {.name = "quiet",
         .short_name = 'q',
         .kind = CLI_FLAG,
         .dest = &a->quiet,
         .help = "print only errors"},
        {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "this help"},
    };
    const cli_cmd cmd = {"serve", opts, sizeof opts / sizeof opts[0], 25, 1};
    int n_pos = 0, rc = cli_parse_cmd(&cmd, argc, argv, &a->scenario, &n_pos, usage);
    if (rc)
        return rc;
    if (!a->scenario && !a->workload && !a->have_requests) {
        cli_error("serve", "give a scenario file, --workload FILE or --requests N");
        usage(stderr, &cmd);
        return 2;
    }
    return 0;
}

/* Command-line values override the scenario's. */
static void apply_overrides(const serve_args *a, serve_scn *s)
{
    if (a->model)
        snprintf(s->model, sizeof s->model, "%s", a->model);
    if (a->protocol) { /* another protocol, at its defaults: the scenario's keys were for its own */
        snprintf(s->protocol, sizeof s->protocol, "%s", a->protocol);
        s->have_proto = 0;
    }
    if (a->network)
        snprintf(s->network, sizeof s->network, "%s", a->network);
    if (a->workload)
        snprintf(s->replay, sizeof s->replay, "%s", a->workload);
    if (a->have_requests)
        s->wl.n_requests = a->requests;
    if (a->have_seed)
        s->seed = a->seed;
    if (a->have_batch)
        s->sp.batch_limit = a->batch;
    if (a->have_chunk)
        s->sp.chunk = a->chunk;
    if (a->have_rate) {
        s->rate[0] = a->rate;
        s->n_rate = 1;
    }
    if (a->scheduler >= 0)
        s->sp.scheduler = a->scheduler;
    if (a->policy >= 0) {
        s->policy[0] = a->policy;
        s->n_policy = 1;
    }
    if (a->position >= 0) { /* the choices' order: rerotate, recompute */
        s->sp.share.position = a->position == 0 ? KVS_POS_REROTATE : KVS_POS_RECOMPUTE;
        s->pos_line = 0; /* the command line decided */
    }
    if (a->no_attack)
        s->attack = 0;
}

/* The run configuration the step costs come from. */
static int build_cfg(const serve_scn *s, run_cfg *c, errbuf *e)
{
    memset(c, 0, sizeof *c);
    snprintf(c->scenario, sizeof c->scenario, "%s", s->name);
    snprintf(c->model_ref, sizeof c->model_ref, "%.63s", s->model);
    snprintf(c->proto_ref, sizeof c->proto_ref, "%s", s->protocol);
    snprintf(c->net_ref, sizeof c->net_ref, "%.31s", s->network);
    c->seed = s->seed;
    c->work.batch = 1;
    c->work.prefill_in_mpc = 1;
    const proto *pr = proto_find(s->protocol);
    if (!pr)
        return err_set(e, MS_ERR_NOTFOUND, "unknown protocol '%s'\n  hint: semi2k or aby3",
                       s->protocol);
    int rc;
    if ((rc = model_load(s->model, &c->model, e)) ||
        (rc = s->have_proto ? (c->proto = s->proto, MS_OK)
                            : proto_cfg_default(pr->name, &c->proto, e)) ||
        (rc = net_parse(s->network, pr->n_parties, &c->net, e)) ||
        (rc = machine_load(s->machine, &c->machine, e)))
        return rc;
    int uses_rerotate = 0;
    for (size_t i = 0; i < s->n_policy; i++)
        uses_rerotate |= s->policy[i] == KVS_SPAN && s->sp.share.position == KVS_POS_REROTATE;
    if (uses_rerotate && c->model.pos != POS_ROPE) {
        if (s->pos_line)
            return err_set(e, MS_ERR_INPUT,
                           "%s:%d:%d: error: position 'rerotate' needs a RoPE "
                           "model; %s has learned positions\n  hint: use 'recompute'",
                           s->path, s->pos_line, s->pos_col, c->model.name);
        return err_set(e, MS_ERR_INPUT,
                       "span sharing re-rotates moved spans, which needs a RoPE "
                       "model; %s has learned positions\n  hint: set sharing.position: "
                       "recompute",
                       c->model.name);
    }
    return MS_OK;
}

/* ---- output ------------------------------------------------------------------------------ */

typedef struct point {
    int policy;
    double rate;
    serve_result r;
} point;

static void print_header(const serve_scn *s, const run_cfg *c, size_t n_req)
{
    char plabel[160];
    run_label_protocol(&c->proto, plabel, sizeof plabel);
    printf("%s: %s, %s on %s, %zu requests, batch %u, chunk %u, %s, cache %llu tokens\n", s->name,
           c->model.name, plabel, s->network, n_req, s->sp.batch_limit, s->sp.chunk,
           serve_sched_name(s->sp.scheduler), (unsigned long long)s->sp.share.capacity_tokens);
    printf("%-7s %9s %10s %10s %10s %9s %9s %7s %7s %10s %9s %9s\n", "policy", "rate/s",
           "TTFT p50 s", "p90 s", "p99 s", "TPOT s", "tok/s", "tokhit", "reqhit", "saved GB",
           "saved rnd", "cache GB");
}

static void print_point(const point *p)
{
    const serve_result *r = &p->r;
    printf("%-7s %9.3g %10.4g %10.4g %10.4g %9.4g %9.4g %7.3f %7.3f %10.4g %9lld %9.3g\n",
           kvs_kind_name(p->policy), p->rate, r->ttft_ms[0] / 1e3, r->ttft_ms[1] / 1e3,
           r->ttft_ms[2] / 1e3, r->tpot_ms[0] / 1e3, r->throughput_tok_s, r->token_hit_rate,
           r->request_hit_rate, (double)r->bytes_saved / 1e9, (long long)r->rounds_saved,
           r->cache_peak_bytes / 1e9);
}

/* A serving run's metrics, each with its registered unit (protocols/base/metric_def.h). */
static size_t metrics_of(const serve_result *r, sdb_metric *m)
{
    size_t n = 0;
#define M(nm, v)                                                   \
    do {                                                           \
        const metric_def *d = metric_def_find(nm);                 \
        m[n++] = (sdb_metric){nm, (double)(v), d ? d->unit : "?"}; \
    } while (0)
    M("ttft_p50", r->ttft_ms[0] / 1e3);
    M("ttft_p90", r->ttft_ms[1] / 1e3);
    M("ttft_p99", r->ttft_ms[2] / 1e3);
    M("ttft_mean", r->ttft_ms[3] / 1e3);
    M("tpot_mean", r->tpot_ms[0] / 1e3);
    M("tpot_p50", r->tpot_ms[1] / 1e3);
    M("throughput_tokens", r->throughput_tok_s);
    M("throughput_requests", r->throughput_req_s);
    M("makespan", (double)r->makespan_ns / 1e9);
    M("token_hit_rate", r->token_hit_rate);
    M("request_hit_rate", r->request_hit_rate);
    M("online_bytes", r->bytes);
    M("rounds", r->rounds);
    M("offline_bytes", r->offline_bytes);
    M("bytes_saved", r->bytes_saved);
    M("rounds_saved", r->rounds_saved);
    M("rerotate_tokens", r->rerotate_tokens);
    M("rerotate_bytes", r->rerotate_bytes);
    M("cache_peak_tokens", r->cache_peak_tokens);
    M("cache_peak_bytes_per_party", r->cache_peak_bytes);
    M("evicted_tokens", r->evicted_tokens);
    M("steps", r->steps);
#undef M
    return n;
}

static int store_point(rdb *db, const serve_scn *s, const run_cfg *c, const point *p, errbuf *e)
{
    sdb_metric m[32];
    size_t nm = metrics_of(&p->r, m);
    sdb_request *rq = malloc(p->r.n * sizeof *rq);
    if (!rq)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < p->r.n; i++) {
        const serve_req_out *q = &p->r.req[i];
        rq[i] = (sdb_request){q->arrival_ns, q->admit_ns, q->first_ns, q->finish_ns, q->tenant,
                              q->user,       q->prompt,   q->hit,      q->shifted,   q->decode};
    }
    char plabel[160]; /* the protocol as it ran: a profile or non-default keys distinguish runs */
    run_label_protocol(&c->proto, plabel, sizeof plabel);
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "scenario: %s\nmodel: %s\nprotocol: %s\nnetwork: %s\nseed: %llu\n"
             "workload: {requests: %zu, rate: %.17g, replay: '%s'}\n"
             "server: {batch: %u, chunk: %u, scheduler: %s, cost_bucket: %u}\n"
             "sharing: {policy: %s, block: %u, capacity_tokens: %llu, min_span: %u, "
             "position: %s}\n",
             s->name, c->model.name, plabel, s->network, (unsigned long long)s->seed, p->r.n,
             p->rate, s->replay, s->sp.batch_limit, s->sp.chunk, serve_sched_name(s->sp.scheduler),
             s->sp.cost_bucket, kvs_kind_name(p->policy), s->sp.share.block,
             (unsigned long long)s->sp.share.capacity_tokens, s->sp.share.min_span,
             s->sp.share.position == KVS_POS_REROTATE ? "rerotate" : "recompute");
    sdb_run run = {s->name,
                   kvs_kind_name(p->policy),
                   c->model.name,
                   plabel,
                   s->network,
                   serve_sched_name(s->sp.scheduler),
                   p->rate,
                   s->seed,
                   (uint32_t)p->r.n,
                   s->sp.batch_limit,
                   s->sp.chunk,
                   cfg,
                   m,
                   nm,
                   rq,
                   p->r.n};
    int rc = sdb_put_run(db, &run, NULL, e);
    free(rq);
    return rc;
}

/* ---- plots ------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int write_plot_data(const char *dir, const point *pt, size_t n_pt, size_t n_rate, errbuf *e)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/ttft_cdf.dat", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return err_set(e, MS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    /* one block per policy, at the highest load */
    fprintf(f, "# TTFT CDF per policy at the highest rate: ttft_s cumulative_share\n");
    for (size_t i = n_rate - 1; i < n_pt; i += n_rate) {
        const serve_result *r = &pt[i].r;
        uint64_t *t = malloc(r->n * sizeof *t);
        if (!t) {
            fclose(f);
            return err_set(e, MS_ERR_NOMEM, "out of memory");
        }
        for (size_t j = 0; j < r->n; j++)
            t[j] = r->req[j].first_ns - r->req[j].arrival_ns;
        qsort(t, r->n, sizeof *t, cmp_u64);
        fprintf(f, "# policy %s rate %g\n", kvs_kind_name(pt[i].policy), pt[i].rate);
        for (size_t j = 0; j < r->n; j++)
            fprintf(f, "%.9g %.6f\n", (double)t[j] / 1e9, (double)(j + 1) / (double)r->n);
        fprintf(f, "\n\n");
        free(t);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/load.dat", dir);
    if (!(f = fopen(path, "w")))
        return err_set(e, MS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "# per policy: rate_per_s token_hit request_hit ttft_p50_s ttft_p99_s tok_per_s\n");
    for (size_t i = 0; i < n_pt; i++) {
        const serve_result *r = &pt[i].r;
        if (i % n_rate == 0)
            fprintf(f, "# policy %s\n", kvs_kind_name(pt[i].policy));
        fprintf(f, "%.9g %.6f %.6f %.9g %.9g %.9g\n", pt[i].rate, r->token_hit_rate,
                r->request_hit_rate, r->ttft_ms[0] / 1e3, r->ttft_ms[2] / 1e3, r->throughput_tok_s);
        if (i % n_rate == n_rate - 1)
            fprintf(f, "\n\n");
    }
    fclose(f);
    return MS_OK;
}

static int run_gnuplot(const char *dir, const char *script, const char *titles, errbuf *e)
{
    char expr[4096] = "", path[4096];
    if (gnuplot_var(expr, sizeof expr, "dir", dir) ||
        gnuplot_var(expr, sizeof expr, "titles", titles))
        return err_set(e, MS_ERR_USAGE,
                       "%s: error: the plot folder's path or the series titles are "
                       "too long for gnuplot's command line",
                       dir);
    snprintf(path, sizeof path, "%s/scripts/%s", mpcsim_datadir(), script);
    if (access(path, R_OK)) {
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: no such gnuplot script\n  hint: the data "
                       "folder was looked for in %s",
                       path, where);
    }
    const char *files[] = {path};
    int st = gnuplot_run(expr, files, 1, NULL);
    if (st)
        return err_set(e, MS_ERR_IO,
                       "gnuplot failed on %s/scripts/%s (exit %d)\n  hint: is "
                       "gnuplot installed? (scripts/install-deps.sh)",
                       mpcsim_datadir(), script, st);
    return MS_OK;
}

static int make_plots(const char *dir, const serve_scn *s, const point *pt, size_t n_pt, errbuf *e)
{
    if (mkdir(dir, 0777) && errno != EEXIST)
        return err_set(e, MS_ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
    int rc = write_plot_data(dir, pt, n_pt, s->n_rate, e);
    char titles[128] = "";
    for (size_t i = 0; i < s->n_policy; i++)
        snprintf(titles + strlen(titles), sizeof titles - strlen(titles), "%s%s", i ? " " : "",
                 kvs_kind_name(s->policy[i]));
    if (!rc)
        rc = run_gnuplot(dir, "serve_ttft_cdf.gp", titles, e);
    if (!rc)
        rc = run_gnuplot(dir, "serve_load.gp", titles, e);
    return rc;
}

/* ---- the attacker ------------------------------------------------------------------------ */

/* Times the attacker's probes from the cost of the steps they trigger: probes are spaced by
 * four times a missed probe's service, and background users load the parties to bg_load. */
static int attack_timing(const serve_scn *s, const serve_coster *c, leak_params *lp, errbuf *e)
{
    step_figures miss, victim, dec, bg;
    uint32_t T = lp->template_len;
    int rc;
    if ((rc = c->step(c->ctx, PHASE_PREFILL, T + 2, 0, 1, &miss, e)) ||
        (rc = c->step(c->ctx, PHASE_PREFILL, T + 49, 0, 1, &victim, e)) ||
        (rc = c->step(c->ctx, PHASE_DECODE, 1, T + 128, 1, &dec, e)) ||
        (rc = c->step(c->ctx, PHASE_PREFILL, 80, 0, 1, &bg, e)))
        return rc;
    double svc_bg = (double)(bg.latency_ns + 8 * dec.latency_ns); /* 80 tokens, 8 out */
    lp->probe_gap_ns = 4 * (miss.latency_ns + dec.latency_ns) + 1000000;
    lp->probe_start_ns = 4 * (victim.latency_ns + 4 * dec.latency_ns) + 1000000;
    if (s->bg_load > 0) {
        lp->background_rate = s->bg_load / (svc_bg / 1e9);
        double horizon = (double)(lp->probe_start_ns + lp->candidates * lp->probe_gap_ns) / 1e9;
        double n = ceil(lp->background_rate * horizon);
        lp->background = n > 1e5 ? 100000 : (uint32_t)n;
    } else {
        lp->background = 0;
    }
    lp->seed = s->seed;
    return MS_OK;
}

static int run_attack(const serve_scn *s, const serve_coster *c, rdb *db, int channel, int quiet,
                      errbuf *e)
{
    leak_params lp = s->lp;
    lp.channel = channel;
    int rc = attack_timing(s, c, &lp, e);
    if (rc)
        return rc;
    if (!quiet)
        printf("\ntiming attack (%s channel, %u candidates, %u trials, %u background requests "
               "per trial):\n%-7s %9s %8s %8s %9s %8s %12s\n",
               leak_channel_name(lp.channel), lp.candidates, lp.trials, lp.background, "policy",
               "scheduler", "success", "chance", "p-value", "bits", "TTFT gap s");
    for (size_t i = 0; i < s->n_policy && !rc; i++) {
        serve_params sp = s->sp;
        sp.share.kind = s->policy[i];
        if (lp.channel == LEAK_ORDER)
            sp.scheduler = SRV_LPM; /* the order channel exists under LPM */
        leak_result r;
        if ((rc = leak_run(&lp, &sp, c, &r, e)))
            break;
        if (!quiet)
            printf("%-7s %9s %8.3f %8.3f %9.2g %8.3f %12.4g\n", kvs_kind_name(sp.share.kind),
                   serve_sched_name(sp.scheduler), r.success_rate, r.chance, r.p_value, r.bits,
                   r.ttft_gap_ms / 1e3);
        sdb_leak l = {s->name,
                      kvs_kind_name(sp.share.kind),
                      leak_channel_name(lp.channel),
                      serve_sched_name(sp.scheduler),
                      r.trials,
                      r.correct,
                      lp.candidates,
                      r.success_rate,
                      r.chance,
                      r.p_value,
                      r.bits,
                      r.ttft_gap_ms};
        rc = sdb_put_leak(db, &l, e);
    }
    return rc;
}

/* ---- main -------------------------------------------------------------------------------- */

static int load_or_generate(const serve_scn *s, double rate, workload *w, errbuf *e)
{
    wl_init(w);
    if (s->replay[0])
        return wl_load(w, s->replay, e);
    wl_params p = s->wl;
    p.seed = s->seed;
    p.rate = rate;
    return wl_generate(&p, w, e);
}

static int run_points(const serve_scn *s, const run_cfg *cfg, const serve_coster *coster, rdb *db,
                      const serve_args *a, point *pt, size_t *n_pt, errbuf *e)
{
    size_t n_rate = s->replay[0] ? 1 : s->n_rate;
    int rc = MS_OK;
    for (size_t ri = 0; ri < n_rate && !rc; ri++) {
        workload w;
        if ((rc = load_or_generate(s, s->rate[ri], &w, e)))
            break;
        if (ri == 0 && a->dump) {
            FILE *f = fopen(a->dump, "w");
            if (!f || wl_write(&w, f) || fclose(f))
                rc = err_set(e, MS_ERR_IO, "%s: cannot write the workload", a->dump);
        }
        if (!rc && ri == 0 && !a->quiet)
            print_header(s, cfg, w.n);
        for (size_t pi = 0; pi < s->n_policy && !rc; pi++) {
            point *p = &pt[pi * n_rate + ri];
            serve_params sp = s->sp;
            sp.share.kind = s->policy[pi];
            sp.kv_bytes_per_token = serve_kv_bytes_per_token(cfg);
            p->policy = sp.share.kind;
            p->rate = s->replay[0] ? 0 : s->rate[ri];
            if (!(rc = serve_run(&sp, &w, coster, &p->r, e))) {
                (*n_pt)++;
                rc = store_point(db, s, cfg, p, e);
            }
        }
        wl_free(&w);
    }
    /* print grouped by policy */
    for (size_t i = 0; !rc && !a->quiet && i < s->n_policy * n_rate; i++)
        print_point(&pt[i]);
    return rc;
}

int cmd_serve(int argc, char **argv)
{
    serve_args a;
    int st = parse_args(argc, argv, &a);
    if (st)
        return st == CLI_HELP_ASKED ? 0 : st;
    serve_scn s;
    serve_scn_defaults(&s);
    errbuf e = {{0}};
    int rc = a.scenario ? serve_scn_read(a.scenario, &s, &e) : MS_OK;
    if (rc) {
        fprintf(stderr, "%s\n", e.msg);
        return ms_err_exit_code(rc);
    }
    apply_overrides(&a, &s);
    if (s.replay[0])
        s.n_rate = 1;
    run_cfg cfg;
    serve_stepcoster *sc = NULL;
    serve_coster coster;
    rdb *db = NULL;
    point *pt = calloc(s.n_policy * s.n_rate, sizeof *pt);
    size_t n_pt = 0;
    char dbpath[600];
    snprintf(dbpath, sizeof dbpath, "%s", a.output ? a.output : s.output);
    if (!dbpath[0])
        snprintf(dbpath, sizeof dbpath, "results/%s.db", s.name);
    if (!pt)
        rc = err_set(&e, MS_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = build_cfg(&s, &cfg, &e);
    if (!rc)
        rc = serve_stepcoster_open(&cfg, s.sp.batch_limit, &sc, &coster, &e);
    if (!rc && s.replay[0]) { /* validate the replay file before anything is written */
        workload w;
        rc = load_or_generate(&s, 0, &w, &e);
        wl_free(&w);
    }
    if (!rc && !(rc = rdb_open(dbpath, 1, &db, &e)))
        rc = sdb_init(db, &e);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!rc)
        rc = run_points(&s, &cfg, &coster, db, &a, pt, &n_pt, &e);
    for (size_t i = 0; !rc && s.attack && i < s.n_channel; i++)
        rc = run_attack(&s, &coster, db, s.channel[i], a.quiet, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!rc && a.plot)
        rc = make_plots(a.plot, &s, pt, n_pt, &e);
    if (!rc && !a.quiet)
        printf("\n%zu serving runs in %.2f s; results: %s%s%s\n", n_pt,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, dbpath,
               a.plot ? "  plots: " : "", a.plot ? a.plot : "");
    for (size_t i = 0; pt && i < s.n_policy * s.n_rate; i++)
        serve_result_free(&pt[i].r);
    free(pt);
    if (db)
        rdb_close(db);
    serve_stepcoster_close(sc);
    if (rc) {
        fprintf(stderr, "%s\n", e.msg);
        return ms_err_exit_code(rc);
    }
    return 0;
}
