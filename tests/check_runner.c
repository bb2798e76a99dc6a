/* check_runner.c — the per-run pipeline (replay → lower → cost → simulate → metrics), the
 * memoized step costs, decode_stride (a step with one-time work counted once), and `mpcsim
 * cost` as a user runs it. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "models/lower.h"
#include "protocols/base/metric_def.h"
#include "sim/replay/replay.h"
#include "sim/scenario/group.h"
#include "sim/scenario/runner.h"
#include "sim/engine/stepcost.h"
#include "sim/policy/policy.h"
#include "sim/trace/synth_impl.h"
#include "stories.h"

/* ---- fixtures ---------------------------------------------------------------------------- */

static run_cfg *tiny_cfg(const char *protocol, const char *network, uint32_t P, uint32_t n_dec)
{
    run_cfg *c = calloc(1, sizeof *c);
    errbuf e;
    ck_assert_msg(model_load("stories260K", &c->model, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(proto_cfg_default(protocol, &c->proto, &e) == MS_OK, "%s", e.msg);
    snprintf(c->proto_ref, sizeof c->proto_ref, "%s", protocol);
    const proto *pr = proto_find(protocol);
    ck_assert_msg(net_parse(network, pr->n_parties, &c->net, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(machine_load("default", &c->machine, &e) == MS_OK, "%s", e.msg);
    snprintf(c->policy.name, sizeof c->policy.name, "full");
    c->work.prompt_len = P;
    c->work.decode_len = n_dec;
    c->work.batch = 1;
    c->work.prefill_in_mpc = 1;
    c->work.decode_stride = 1;
    return c;
}

/* Every metric a run reports is in the metric registry with the unit it carries (the database
 * would refuse it): checked wherever a test reads a run's metric. */
static void registered(const run_result *r)
{
    for (size_t i = 0; i < r->n_metric; i++) {
        const metric_def *d = metric_def_find(r->metric[i].name);
        ck_assert_msg(d, "metric %s is not registered", r->metric[i].name);
        ck_assert_str_eq(r->metric[i].unit, d->unit);
    }
}

static double metric(const run_result *r, const char *name)
{
    registered(r);
    for (size_t i = 0; i < r->n_metric; i++)
        if (!strcmp(r->metric[i].name, name))
            return r->metric[i].value;
    ck_abort_msg("no metric %s", name);
    return NAN;
}

/* One step costed directly, for comparison with the runner. */
static void direct_step(const run_cfg *c, int phase, uint32_t n_tok, uint32_t kv, sim_result *out)
{
    step_env env = {&c->model,   proto_find(c->proto_ref), &c->proto, &c->net,
                    &c->machine, {.overlap = c->overlap}};
    lower_opts lo = fixture_step_opts(phase, n_tok, kv);
    op_program p;
    cost_log l;
    op_program_init(&p);
    cost_log_init(&l, env.pr->n_parties);
    errbuf e;
    int rc = step_simulate(&env, &lo, &p, &l, out, &e);
    ck_assert_msg(rc == MS_OK, "%s", e.msg);
    op_program_free(&p);
    cost_log_free(&l);
}

/* ---- result plumbing --------------------------------------------------------------------- */

START_TEST(test_result_metrics)
{
    run_result r;
    run_result_init(&r);
    for (int i = 0; i < 100; i++) {
        char n[32];
        snprintf(n, sizeof n, "m%d", i);
        ck_assert_int_eq(run_metric_add(&r, n, i * 0.5, "s"), MS_OK);
    }
    ck_assert_uint_eq(r.n_metric, 100);
    ck_assert_str_eq(r.metric[42].name, "m42"); /* any name: the database checks them */
    ck_assert_double_eq(r.metric[42].value, 21.0);
    ck_assert_str_eq(r.metric[7].unit, "s");
    run_result_free(&r);
    ck_assert_uint_eq(r.n_metric, 0);
    run_cfg c = {0};
    c.yaml = strdup("a: 1\n");
    run_cfg_free(&c);
    ck_assert_ptr_null(c.yaml);
}
END_TEST

/* ---- the pipeline ------------------------------------------------------------------------ */

START_TEST(test_run_sums_steps)
{
    /* the run's phases are the sum of its steps, each costed on its own */
    run_cfg *c = tiny_cfg("semi2k", "wan", 12, 5);
    run_result r;
    run_result_init(&r);
    errbuf e;
    ck_assert_msg(run_execute(c, &r, &e) == MS_OK, "%s", e.msg);
    sim_result pf;
    direct_step(c, PHASE_PREFILL, 12, 0, &pf);
    uint64_t dec_ns = 0, dec_rounds = 0, dec_bytes = 0, first = 0;
    for (uint32_t s = 0; s < 5; s++) {
        sim_result d;
        direct_step(c, PHASE_DECODE, 1, 12 + s, &d);
        if (s == 0)
            first = d.latency_ns;
        dec_ns += d.latency_ns;
        dec_rounds += d.total.rounds;
        dec_bytes += d.total.bytes_sent[0] + d.total.bytes_sent[1];
        sim_result_free(&d);
    }
    ck_assert_double_eq_tol(metric(&r, "latency_prefill_s"), pf.latency_ns * 1e-9, 1e-12);
    ck_assert_double_eq_tol(metric(&r, "latency_decode_s"), dec_ns * 1e-9, 1e-12);
    ck_assert_double_eq_tol(metric(&r, "latency_per_token_s"), dec_ns * 1e-9 / 5, 1e-12);
    ck_assert_double_eq_tol(metric(&r, "ttft_s"), pf.latency_ns * 1e-9, 1e-12);
    ck_assert_double_eq(metric(&r, "rounds_prefill"), (double)pf.total.rounds);
    ck_assert_double_eq(metric(&r, "rounds_decode"), (double)dec_rounds);
    ck_assert_double_eq(metric(&r, "bytes_online"),
                        (double)(dec_bytes + pf.total.bytes_sent[0] + pf.total.bytes_sent[1]));
    ck_assert_double_eq(metric(&r, "bytes_online"),
                        metric(&r, "bytes_online_p0") + metric(&r, "bytes_online_p1"));
    ck_assert_double_eq(metric(&r, "steps_simulated"), 6);
    ck_assert_uint_eq(r.phase[PHASE_DECODE].latency_ns, dec_ns);
    ck_assert_uint_gt(r.phase[PHASE_DECODE].n_layers, 0);
    ck_assert(metric(&r, "bytes_offline") > 0);
    ck_assert(r.wall_s > 0);
    run_result_free(&r);

    /* no MPC prefill: the first token is decode step 0's */
    c->work.prefill_in_mpc = 0;
    run_result_init(&r);
    ck_assert_msg(run_execute(c, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq(metric(&r, "latency_prefill_s"), 0);
    ck_assert_double_eq(metric(&r, "rounds_prefill"), 0);
    ck_assert_double_eq_tol(metric(&r, "ttft_s"), first * 1e-9, 1e-12);
    run_result_free(&r);
    sim_result_free(&pf);
    free(c);
}
END_TEST

START_TEST(test_stride_and_memo)
{
    run_cfg *c = tiny_cfg("aby3", "lan", 8, 9);
    c->work.prefill_in_mpc = 0;
    c->work.decode_stride = 4; /* steps 0, 4, 8 costed */
    run_result r;
    run_result_init(&r);
    errbuf e;
    ck_assert_msg(run_execute(c, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq(metric(&r, "steps_simulated"), 3);
    sim_result s0, s4, s8;
    direct_step(c, PHASE_DECODE, 1, 8, &s0);
    direct_step(c, PHASE_DECODE, 1, 12, &s4);
    direct_step(c, PHASE_DECODE, 1, 16, &s8);
    ck_assert_uint_eq(r.phase[PHASE_DECODE].latency_ns,
                      4 * s0.latency_ns + 4 * s4.latency_ns + s8.latency_ns);
    ck_assert_uint_eq(r.phase[PHASE_DECODE].total.rounds,
                      4 * s0.total.rounds + 4 * s4.total.rounds + s8.total.rounds);
    sim_result_free(&s0);
    sim_result_free(&s4);
    sim_result_free(&s8);
    run_result_free(&r);
    free(c);
}
END_TEST

/* mpcache (default: the static threshold) over stories260K's recorded trace, no MPC prefill. */
static run_cfg *mpc_cfg(uint32_t P, uint32_t n_dec)
{
    run_cfg *c = tiny_cfg("semi2k", "wan", P, n_dec);
    fixture_record_cfg(c, "mpcache");
    snprintf(c->policy.params[0].key, sizeof c->policy.params[0].key, "live");
    snprintf(c->policy.params[0].val, sizeof c->policy.params[0].val, "0");
    c->policy.n_params = 1;
    c->work.prefill_in_mpc = 0;
    c->seed = 1;
    return c;
}

/* Its decode steps costed one by one as the runner lowers them (the replay's policy ops and
 * attended rows): out[s], step s's result. Step 0 holds the compaction to the revealed count. */
static void mpc_steps(const run_cfg *c, sim_result *out)
{
    errbuf e;
    step_env env = {&c->model,   proto_find(c->proto_ref), &c->proto, &c->net,
                    &c->machine, {.overlap = c->overlap}};
    replay *rp;
    ck_assert_msg(replay_open(c, &rp, &e) == MS_OK, "%s", e.msg);
    op_program p;
    cost_log l;
    op_program_init(&p);
    cost_log_init(&l, env.pr->n_parties);
    uint32_t *kept = calloc((size_t)c->model.n_layers * c->model.n_kv_heads, sizeof *kept);
    for (uint32_t s = 0; s < c->work.decode_len; s++) {
        op_program_clear(&p);
        ck_assert_msg(replay_step(rp, s, c->work.prompt_len + s, kept, &p, &e) == MS_OK, "%s",
                      e.msg);
        ck_assert_int_eq(replay_step_once(rp), s == 0); /* the compaction: the first step only */
        lower_opts lo;
        lower_opts_default(&lo);
        lo.phase = PHASE_DECODE;
        lo.kv_len = c->work.prompt_len + s;
        lo.kept = kept;
        lo.attended_cache = replay_attended_cache(rp); /* mpcache: its gathered rows */
        ck_assert_int_eq(lo.attended_cache, 1);
        ck_assert_msg(step_simulate(&env, &lo, &p, &l, &out[s], &e) == MS_OK, "%s", e.msg);
    }
    free(kept);
    op_program_free(&p);
    cost_log_free(&l);
    replay_close(rp);
}

START_TEST(test_stride_one_time_once)
{
    /* decode_stride 4 over 9 steps: step 0 (the compaction) stands for itself, step 1 for
     * steps 1 … 3, steps 4 and 8 for their strides */
    enum { P = 32, N = 9, K = 4 };
    run_cfg *c = mpc_cfg(P, N);
    sim_result st[N];
    mpc_steps(c, st);
    uint64_t sum = 0, rsum = 0;
    for (int s = 0; s < N; s++)
        sum += st[s].latency_ns, rsum += st[s].total.rounds;
    errbuf e;
    run_result r1, rk;
    run_result_init(&r1);
    run_result_init(&rk);
    ck_assert_msg(run_execute(c, &r1, &e) == MS_OK, "%s", e.msg);
    c->work.decode_stride = K;
    ck_assert_msg(run_execute(c, &rk, &e) == MS_OK, "%s", e.msg);
    /* stride 1: exactly the steps costed one by one */
    ck_assert_uint_eq(r1.phase[PHASE_DECODE].latency_ns, sum);
    ck_assert_uint_eq(r1.phase[PHASE_DECODE].total.rounds, rsum);
    /* stride K: the compaction's step once, the step after it for the rest of its stride */
    const sim_result *x = &rk.phase[PHASE_DECODE];
    ck_assert_uint_eq(x->latency_ns, st[0].latency_ns + (K - 1) * st[1].latency_ns +
                                         K * st[4].latency_ns + st[8].latency_ns);
    ck_assert_uint_eq(x->total.rounds, st[0].total.rounds + (K - 1) * st[1].total.rounds +
                                           K * st[4].total.rounds + st[8].total.rounds);
    ck_assert_uint_eq(x->cat[OPC_POLICY].rounds,
                      st[0].cat[OPC_POLICY].rounds + (K - 1) * st[1].cat[OPC_POLICY].rounds +
                          K * st[4].cat[OPC_POLICY].rounds + st[8].cat[OPC_POLICY].rounds);
    ck_assert_double_eq(metric(&rk, "steps_simulated"), 4);
    /* the stated bound: each step after the first is costed as a step at most K − 1 away, so
     * the error is at most (N − 1) · the largest difference between two such steps; counting
     * the compaction K times (step 0 standing for steps 1 … K − 1) would exceed it */
    uint64_t dmax = 0;
    for (int a = 1; a < N; a++)
        for (int b = a; b < N && b < a + K; b++) {
            uint64_t d = st[a].latency_ns > st[b].latency_ns ? st[a].latency_ns - st[b].latency_ns
                                                             : st[b].latency_ns - st[a].latency_ns;
            dmax = d > dmax ? d : dmax;
        }
    uint64_t err = x->latency_ns > sum ? x->latency_ns - sum : sum - x->latency_ns;
    ck_assert_uint_le(err, (uint64_t)(N - 1) * dmax);
    ck_assert_uint_gt(st[0].latency_ns, st[1].latency_ns);
    ck_assert_uint_gt((K - 1) * (st[0].latency_ns - st[1].latency_ns), (uint64_t)(N - 1) * dmax);
    for (int s = 0; s < N; s++)
        sim_result_free(&st[s]);
    run_result_free(&r1);
    run_result_free(&rk);
    free(c);
}
END_TEST

START_TEST(test_decode_step_metric)
{
    /* the steady decode step as its own metric, the compaction apart: over 4 steps the last
     * one is the steady step, and the one-time work is step 0's latency minus step 1's */
    enum { P = 32, N = 4 };
    run_cfg *c = mpc_cfg(P, N);
    sim_result st[N];
    mpc_steps(c, st);
    errbuf e;
    run_result r;
    run_result_init(&r);
    ck_assert_msg(run_execute(c, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq_tol(metric(&r, "latency_decode_step_s"), st[N - 1].latency_ns * 1e-9,
                            1e-15);
    ck_assert_double_eq(metric(&r, "rounds_decode_step"), (double)st[N - 1].total.rounds);
    uint64_t b = st[N - 1].total.bytes_sent[0] + st[N - 1].total.bytes_sent[1];
    ck_assert_double_eq(metric(&r, "bytes_decode_step"), (double)b);
    ck_assert_uint_gt(st[0].latency_ns, st[1].latency_ns);
    ck_assert_double_eq_tol(metric(&r, "latency_one_time_s"),
                            (st[0].latency_ns - st[1].latency_ns) * 1e-9, 1e-15);
    /* the per-token mean mixes the compaction in; the steady step does not */
    ck_assert_double_gt(metric(&r, "latency_per_token_s"), metric(&r, "latency_decode_step_s"));
    run_result_free(&r);
    /* a policy without one-time work: no one-time latency, the step is the last one */
    snprintf(c->policy.name, sizeof c->policy.name, "full");
    c->policy.n_params = 0;
    run_result_init(&r);
    ck_assert_msg(run_execute(c, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq(metric(&r, "latency_one_time_s"), 0);
    ck_assert_double_gt(metric(&r, "latency_decode_step_s"), 0);
    for (int s = 0; s < N; s++)
        sim_result_free(&st[s]);
    run_result_free(&r);
    free(c);
}
END_TEST

START_TEST(test_comet_sparse_ffn)
{
    /* comet over stories260K's recorded trace: the FFN category shrinks with the active
     * neurons (a public pattern keeps every fixed weight fixed); a secret pattern gathers the
     * weights and multiplies by them unfixed; the policy's own category holds its predictor */
    run_cfg *c = mpc_cfg(16, 2);
    snprintf(c->policy.name, sizeof c->policy.name, "comet");
    c->policy.n_params = 2;
    snprintf(c->policy.params[1].key, sizeof c->policy.params[1].key, "pattern");
    snprintf(c->policy.params[1].val, sizeof c->policy.params[1].val, "public");
    errbuf e;
    run_result rp, rs, rf;
    run_result_init(&rp);
    run_result_init(&rs);
    run_result_init(&rf);
    ck_assert_msg(run_execute(c, &rp, &e) == MS_OK, "%s", e.msg);
    snprintf(c->policy.params[1].val, sizeof c->policy.params[1].val, "secret");
    ck_assert_msg(run_execute(c, &rs, &e) == MS_OK, "%s", e.msg);
    snprintf(c->policy.name, sizeof c->policy.name, "full");
    c->policy.n_params = 1;
    ck_assert_msg(run_execute(c, &rf, &e) == MS_OK, "%s", e.msg);
    double frac = metric(&rp, "comet_ffn_active_frac");
    ck_assert_double_lt(frac, 1);
    const sim_result *p = &rp.phase[PHASE_DECODE], *s = &rs.phase[PHASE_DECODE],
                     *f = &rf.phase[PHASE_DECODE];
    ck_assert_uint_lt(p->cat[OPC_ACTIVATION].bytes_sent[0], f->cat[OPC_ACTIVATION].bytes_sent[0]);
    ck_assert_uint_lt(p->cat[OPC_FFN].bytes_sent[0], f->cat[OPC_FFN].bytes_sent[0]);
    ck_assert_uint_gt(s->cat[OPC_FFN].bytes_sent[0], p->cat[OPC_FFN].bytes_sent[0]);
    ck_assert_uint_gt(p->cat[OPC_POLICY].rounds, 0);
    ck_assert_uint_eq(f->cat[OPC_POLICY].rounds, 0);
    run_result_free(&rp);
    run_result_free(&rs);
    run_result_free(&rf);
    free(c);
}
END_TEST

START_TEST(test_run_deterministic)
{
    run_cfg *c = tiny_cfg("semi2k", "20ms/300Mbps", 6, 4);
    c->overlap = 1;
    run_result a, b;
    errbuf e;
    run_result_init(&a);
    run_result_init(&b);
    ck_assert_int_eq(run_execute(c, &a, &e), MS_OK);
    ck_assert_int_eq(run_execute(c, &b, &e), MS_OK);
    ck_assert_uint_eq(a.n_metric, b.n_metric);
    for (size_t i = 0; i < a.n_metric; i++) {
        ck_assert_str_eq(a.metric[i].name, b.metric[i].name);
        ck_assert_mem_eq(&a.metric[i].value, &b.metric[i].value, sizeof(double));
    }
    for (int p = 0; p < PHASE_N; p++) {
        ck_assert_mem_eq(&a.phase[p].total, &b.phase[p].total, sizeof a.phase[p].total);
        ck_assert_mem_eq(a.phase[p].cat, b.phase[p].cat, sizeof a.phase[p].cat);
    }
    /* overlap never slower than in-order */
    run_result s;
    run_result_init(&s);
    c->overlap = 0;
    ck_assert_int_eq(run_execute(c, &s, &e), MS_OK);
    ck_assert(metric(&a, "latency_decode_s") <= metric(&s, "latency_decode_s"));
    ck_assert_double_eq(metric(&a, "bytes_online"), metric(&s, "bytes_online"));
    run_result_free(&a);
    run_result_free(&b);
    run_result_free(&s);
    free(c);
}
END_TEST

/* Runs c twice, *toggle 1 in the first run and 0 in the second: the same metrics, bit for bit
 * (those named in loose, a NULL-terminated list: within 1e-5), and the same phase totals and
 * categories. what names the case in messages. */
static void assert_same_runs(const run_cfg *c, int *toggle, const char *what,
                             const char *const *loose)
{
    run_result a, b;
    errbuf e;
    run_result_init(&a);
    run_result_init(&b);
    *toggle = 1;
    int rc = run_execute(c, &a, &e);
    *toggle = 0;
    ck_assert_msg(rc == MS_OK, "%s: %s", what, e.msg);
    ck_assert_msg(run_execute(c, &b, &e) == MS_OK, "%s: %s", what, e.msg);
    ck_assert_uint_eq(a.n_metric, b.n_metric);
    for (size_t i = 0; i < a.n_metric; i++) {
        ck_assert_str_eq(a.metric[i].name, b.metric[i].name);
        int is_loose = 0;
        for (size_t k = 0; loose && loose[k]; k++)
            is_loose |= !strcmp(a.metric[i].name, loose[k]);
        if (is_loose)
            ck_assert_msg(fabs(a.metric[i].value - b.metric[i].value) <= 1e-5,
                          "%s %s: %.9g vs %.9g", what, a.metric[i].name, a.metric[i].value,
                          b.metric[i].value);
        else
            ck_assert_msg(!memcmp(&a.metric[i].value, &b.metric[i].value, sizeof(double)),
                          "%s %s: %.17g vs %.17g", what, a.metric[i].name, a.metric[i].value,
                          b.metric[i].value);
    }
    for (int p = 0; p < PHASE_N; p++) {
        ck_assert_mem_eq(&a.phase[p].total, &b.phase[p].total, sizeof a.phase[p].total);
        ck_assert_mem_eq(a.phase[p].cat, b.phase[p].cat, sizeof a.phase[p].cat);
    }
    run_result_free(&a);
    run_result_free(&b);
}

/* The synthetic attention kernel against its scalar reference: every cost metric and phase
 * total of a policy run is bit-identical, the accuracy metrics agree to float rounding. */
START_TEST(test_synth_kernel_same_costs)
{
    static const char *const pols[] = {"h2o", "snapkv", "quest", "mpcache", "tova"};
    static const char *const acc[] = {"attn_mass_recall", "topk_recall", "attn_out_rel_err",
                                      "attn_out_wo_rel_err", NULL};
    for (size_t pi = 0; pi < sizeof pols / sizeof pols[0]; pi++) {
        run_cfg *c = tiny_cfg("aby3", "20ms/300Mbps", 160, 6);
        c->model.weights[0] = '\0';
        snprintf(c->trace.source, sizeof c->trace.source, "synth");
        snprintf(c->policy.name, sizeof c->policy.name, "%s", pols[pi]);
        c->seed = 3;
        assert_same_runs(c, &trace_synth_reference_kernel, pols[pi], acc);
        free(c);
    }
}
END_TEST

/* The runs of one trace driven together (run_execute_group, their rows computed once, the
 * prompt's in spans read by every layer-local run) give every metric and every phase total
 * bit-identical to each run executed alone, there also one position at a time. */
static kv_param kvp_param(const char *k, const char *v)
{
    kv_param p;
    memset(&p, 0, sizeof p);
    snprintf(p.key, sizeof p.key, "%s", k);
    snprintf(p.val, sizeof p.val, "%s", v);
    return p;
}

typedef struct group_log {
    int rc[8];
    size_t order[8], n;
} group_log;

static void group_done_log(void *ctx, size_t i, int rc, const errbuf *e)
{
    group_log *g = ctx;
    ck_assert_msg(rc == MS_OK, "run %zu: %s", i, e->msg);
    g->rc[i] = rc;
    g->order[g->n++] = i;
}

START_TEST(test_group_same_as_alone)
{
    static const char *const pols[] = {"full",  "streamingllm", "h2o",  "snapkv",
                                       "quest", "mpcache",      "tova", "pyramidkv"};
    enum { N = sizeof pols / sizeof pols[0] };
    for (int stride = 1; stride <= 2; stride++) {
        run_cfg *c[N];
        run_result alone[N], shared[N];
        for (size_t i = 0; i < N; i++) {
            c[i] = tiny_cfg("aby3", "20ms/300Mbps", 96, 5);
            c[i]->model.weights[0] = '\0';
            snprintf(c[i]->trace.source, sizeof c[i]->trace.source, "synth");
            snprintf(c[i]->policy.name, sizeof c[i]->policy.name, "%s", pols[i]);
            c[i]->policy.params[0] = kvp_param("metric_stride", stride == 1 ? "1" : "2");
            c[i]->policy.params[1] = kvp_param("prompt_rows", "24");
            c[i]->policy.n_params = 2;
            c[i]->work.decode_stride = (uint32_t)stride;
            c[i]->seed = 5;
            errbuf e;
            run_result_init(&alone[i]);
            run_result_init(&shared[i]);
            replay_span_off = stride == 1; /* alone: each position by itself, or in spans */
            ck_assert_msg(run_execute(c[i], &alone[i], &e) == MS_OK, "%s: %s", pols[i], e.msg);
            replay_span_off = 0;
        }
        for (size_t i = 1; i < N; i++)
            ck_assert(run_same_trace(c[0], c[i]));
        group_log g = {{0}, {0}, 0};
        run_execute_group((const run_cfg *const *)c, N, shared, group_done_log, &g);
        ck_assert_uint_eq(g.n, N);
        for (size_t i = 0; i < N; i++) {
            const run_result *a = &alone[i], *b = &shared[i];
            ck_assert_uint_eq(a->n_metric, b->n_metric);
            for (size_t k = 0; k < a->n_metric; k++) {
                ck_assert_str_eq(a->metric[k].name, b->metric[k].name);
                ck_assert_msg(!memcmp(&a->metric[k].value, &b->metric[k].value, sizeof(double)),
                              "%s %s: %.17g alone, %.17g shared", pols[i], a->metric[k].name,
                              a->metric[k].value, b->metric[k].value);
            }
            for (int p = 0; p < PHASE_N; p++) {
                ck_assert_mem_eq(&a->phase[p].total, &b->phase[p].total, sizeof a->phase[p].total);
                ck_assert_mem_eq(a->phase[p].cat, b->phase[p].cat, sizeof a->phase[p].cat);
                ck_assert_int_eq(a->phase[p].latency_ns, b->phase[p].latency_ns);
            }
            run_result_free(&alone[i]);
            run_result_free(&shared[i]);
            free(c[i]);
        }
        /* another prompt length is another trace window: not the same group */
        run_cfg *x = tiny_cfg("aby3", "lan", 96, 5), *y = tiny_cfg("aby3", "lan", 97, 5);
        ck_assert(!run_same_trace(x, y));
        free(x);
        free(y);
    }
}
END_TEST

/* Quest's half-precision page bounds (outward rounded, pages near the k-th score re-scored
 * from their keys) select exactly what float bounds select: every metric bit-identical, also
 * where the budget leaves many pages near the threshold. */
START_TEST(test_quest_half_bounds_exact)
{
    static const char *const budgets[] = {"16", "48", "96", "48"};
    for (size_t bi = 0; bi < sizeof budgets / sizeof budgets[0]; bi++) {
        /* the last case widens the half scores' error bound: nearly every page is re-scored
         * and ranked from its keys */
        policy_quest_slack = bi == 3 ? 1e5 : 1.0;
        run_cfg *c = tiny_cfg("aby3", "20ms/300Mbps", 300, 8);
        c->model.weights[0] = '\0';
        snprintf(c->trace.source, sizeof c->trace.source, "synth");
        snprintf(c->policy.name, sizeof c->policy.name, "quest");
        c->policy.params[0] = kvp_param("budget", budgets[bi]);
        c->policy.params[1] = kvp_param("metric_stride", "1");
        c->policy.params[2] = kvp_param("page", bi == 2 ? "4" : "16");
        c->policy.n_params = 3;
        c->seed = 9;
        assert_same_runs(c, &policy_quest_float_bounds, budgets[bi], NULL);
        policy_quest_slack = 1.0;
        free(c);
    }
}
END_TEST

/* Steps nobody costs or measures skip a stateless selection (replay_step_idle): the same
 * metrics, bit for bit, as replaying every step's selection. */
START_TEST(test_idle_steps_same)
{
    static const char *const pols[] = {"quest", "snapkv", "streamingllm", "mpcache"};
    for (size_t pi = 0; pi < sizeof pols / sizeof pols[0]; pi++) {
        run_cfg *c = tiny_cfg("aby3", "20ms/300Mbps", 200, 11);
        c->model.weights[0] = '\0';
        snprintf(c->trace.source, sizeof c->trace.source, "synth");
        snprintf(c->policy.name, sizeof c->policy.name, "%s", pols[pi]);
        static const char *const key[] = {"budget", "capacity", "recent", "ratio2"};
        static const char *const val[] = {"32", "64", "48", "0.1"};
        c->policy.params[0] = kvp_param("metric_stride", "3");
        c->policy.params[1] = kvp_param(key[pi], val[pi]); /* fewer than the cached entries */
        c->policy.n_params = 2;
        c->work.decode_stride = 4;
        c->seed = 4;
        assert_same_runs(c, &replay_idle_off, pols[pi], NULL);
        if (!strcmp(pols[pi], "mpcache")) {
            /* its first step holds the compaction after the threshold prompt: never idle */
            replay *r;
            errbuf e;
            ck_assert_msg(replay_open(c, &r, &e) == MS_OK, "%s", e.msg);
            ck_assert(!replay_idle_ok(r, 0));
            ck_assert(replay_idle_ok(r, 1));
            replay_close(r);
        }
        free(c);
    }
}
END_TEST

START_TEST(test_run_errors)
{
    run_cfg *c = tiny_cfg("semi2k", "lan", 4, 2);
    errbuf e;
    run_result r;
    net_preset("lan", 3, &c->net, &e); /* a 3-party network for a 2-party protocol */
    run_result_init(&r);
    ck_assert_int_eq(run_execute(c, &r, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "parties"));
    run_result_free(&r);
    net_preset("lan", 2, &c->net, &e);
    c->work.prompt_len = 600; /* beyond stories260K's 512 context */
    run_result_init(&r);
    ck_assert_int_eq(run_execute(c, &r, &e), MS_ERR_RANGE);
    run_result_free(&r);
    free(c);
}
END_TEST

START_TEST(test_stepcost)
{
    run_cfg *c = tiny_cfg("aby3", "wan", 8, 1);
    stepcost *sc;
    errbuf e;
    ck_assert_msg(stepcost_open(c, &sc, &e) == MS_OK, "%s", e.msg);
    step_figures a, b, p;
    ck_assert_int_eq(stepcost_get(sc, PHASE_DECODE, 1, 40, &a, &e), MS_OK);
    ck_assert_int_eq(stepcost_get(sc, PHASE_PREFILL, 16, 0, &p, &e), MS_OK);
    ck_assert_int_eq(stepcost_get(sc, PHASE_DECODE, 1, 40, &b, &e), MS_OK);
    ck_assert_mem_eq(&a, &b, sizeof a);
    sim_result d;
    direct_step(c, PHASE_DECODE, 1, 40, &d);
    ck_assert_uint_eq(a.latency_ns, d.latency_ns);
    ck_assert_uint_eq(a.rounds, d.total.rounds);
    ck_assert_uint_eq(a.bytes,
                      d.total.bytes_sent[0] + d.total.bytes_sent[1] + d.total.bytes_sent[2]);
    sim_result_free(&d);
    ck_assert_uint_gt(p.bytes, a.bytes);
    for (uint32_t kv = 0; kv < 200; kv += 7) /* grows the table */
        ck_assert_int_eq(stepcost_get(sc, PHASE_DECODE, 1, kv, &b, &e), MS_OK);
    ck_assert_int_eq(stepcost_get(sc, PHASE_DECODE, 1, 40, &b, &e), MS_OK);
    ck_assert_mem_eq(&a, &b, sizeof a);
    stepcost_close(sc);
    free(c);
}
END_TEST

START_TEST(test_attention_share_grows_with_context)
{
    /* llama-2-7b decode: attention + softmax take a growing share of latency and bytes as the
     * context grows, for both protocols */
    const char *protos[] = {"semi2k", "aby3"};
    for (int pi = 0; pi < 2; pi++) {
        run_cfg *c = tiny_cfg(protos[pi], "wan", 1, 1);
        errbuf e;
        ck_assert_int_eq(model_load("llama-2-7b", &c->model, &e), MS_OK);
        double prev_t = 0, prev_b = 0;
        uint32_t ctx[] = {256, 1024, 4000};
        for (int i = 0; i < 3; i++) {
            sim_result r;
            direct_step(c, PHASE_DECODE, 1, ctx[i], &r);
            const sim_stats *a = &r.cat[OPC_ATTENTION], *s = &r.cat[OPC_SOFTMAX];
            double share_t = (double)(a->compute_ns + a->comm_ns + s->compute_ns + s->comm_ns) /
                             (double)r.latency_ns;
            uint64_t ab = 0, tb = 0;
            for (int p = 0; p < 3; p++) {
                ab += a->bytes_sent[p] + s->bytes_sent[p];
                tb += r.total.bytes_sent[p];
            }
            double share_b = (double)ab / (double)tb;
            ck_assert_msg(share_t > prev_t, "%s T=%u: time share %g after %g", protos[pi], ctx[i],
                          share_t, prev_t);
            ck_assert_msg(share_b > prev_b, "%s T=%u: byte share %g after %g", protos[pi], ctx[i],
                          share_b, prev_b);
            prev_t = share_t;
            prev_b = share_b;
            sim_result_free(&r);
        }
        free(c);
    }
}
END_TEST

START_TEST(test_latency_bound_end_to_end)
{
    /* stories260K decode through the real cost engines on 100 ms links with unlimited
     * bandwidth and an infinitely fast machine. Bounds (sim/engine/SIMULATION.md):
     *   rounds in which every party receives × L  <=  latency  <=  rounds × L (+ 1 ns/round)
     * the lower bound because such a round moves every party's clock past the previous
     * round's earliest finish plus L; semi2k, where nearly every round is an exchange, is
     * within 1% of rounds × L. Bytes and rounds agree with the cost engine's own totals. */
    const char *protos[] = {"semi2k", "aby3"};
    for (int pi = 0; pi < 2; pi++) {
        run_cfg *c = tiny_cfg(protos[pi], "100ms/1000000Gbps", 1, 1);
        for (int k = 0; k < WK_N; k++)
            c->machine.rate[k] = 1e18;
        const proto *pr = proto_find(protos[pi]);
        int P = pr->n_parties;
        step_env env = {&c->model, pr, &c->proto, &c->net, &c->machine, {0}};
        lower_opts lo;
        lower_opts_default(&lo);
        lo.kv_len = 100;
        op_program p;
        cost_log l;
        op_program_init(&p);
        cost_log_init(&l, P);
        sim_result r;
        errbuf e;
        ck_assert_msg(step_simulate(&env, &lo, &p, &l, &r, &e) == MS_OK, "%s", e.msg);
        uint64_t all_recv = 0;
        cost_totals t;
        memset(&t, 0, sizeof t);
        for (size_t i = 0; i < l.n; i++) {
            const cost_round *cr = &l.r[i];
            cost_totals_add_round(&t, cr, P);
            int every = cr->comm;
            for (int d = 0; d < P && every; d++) {
                int got = 0;
                for (int q = 0; q < P; q++)
                    got |= q != d && cr->bytes[q][d] > 0;
                every = got;
            }
            all_recv += every;
        }
        ck_assert_uint_eq(r.total.rounds, t.rounds);
        ck_assert_mem_eq(r.total.bytes_sent, t.bytes_sent, P * sizeof t.bytes_sent[0]);
        ck_assert_mem_eq(r.total.offline_bytes, t.offline_bytes, P * sizeof t.offline_bytes[0]);
        const uint64_t L = 100000000;
        ck_assert_uint_ge(r.latency_ns, all_recv * L);
        ck_assert_uint_le(r.latency_ns, r.total.rounds * (L + 1));
        if (pi == 0)
            ck_assert_double_eq_tol((double)r.latency_ns, (double)(r.total.rounds * L),
                                    0.01 * (double)(r.total.rounds * L));
        sim_result_free(&r);
        op_program_free(&p);
        cost_log_free(&l);
        free(c);
    }
}
END_TEST

/* ---- the command line -------------------------------------------------------------------- */

TESTDIR("check_runner")

START_TEST(test_cli_cost)
{
    const char *dir = td.dir;
    char out[512], tl[512], tl2[512], prog[512], args[2048];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(tl, sizeof tl, "%s/tl.json", dir);
    snprintf(tl2, sizeof tl2, "%s/tl2.json", dir);
    snprintf(prog, sizeof prog, "%s/prog.txt", dir);

    ck_assert_int_eq(th_cli("cost --help", out), 0);
    char *t = th_slurp(out, NULL);
    ck_assert_ptr_nonnull(strstr(t, "usage: mpcsim cost"));
    free(t);

    /* bad usage: exit 2 with a clear message */
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan", out), 2);
    t = th_slurp(out, NULL);
    ck_assert_ptr_nonnull(strstr(t, "--kv is required"));
    free(t);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi3k --network lan --kv 4", out),
                     2);
    t = th_slurp(out, NULL);
    ck_assert_ptr_nonnull(strstr(t, "did you mean"));
    free(t);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lna --kv 4", out),
                     2);
    ck_assert_int_eq(
        th_cli("cost --model stories260K --protocol semi2k --network lan --kv -1", out), 2);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan --kv 4 "
                            "--phase middle",
                            out),
                     2);
    ck_assert_int_eq(th_cli("cost --frobnicate", out), 2);

    /* a decode step: text, then JSON + timeline + program, twice for determinism */
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol aby3 --network wan --kv 100", out),
                     0);
    t = th_slurp(out, NULL);
    ck_assert_ptr_nonnull(strstr(t, "latency"));
    ck_assert_ptr_nonnull(strstr(t, "softmax"));
    free(t);
    /* 80 columns and report's units, on a long framed link name too */
    static const char *const step_args[] = {
        "cost --model llama-2-7b --protocol aby3 --network wan --kv 4096",
        "cost --model llama-2-7b --protocol semi2k --network 1ms/20Mbit/s/3100 --wire tcp "
        "--kv 1024 --phase prefill --tokens 64"};
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(th_cli(step_args[i], out), 0);
        t = th_slurp(out, NULL);
        for (const char *l = t; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0'))
            ck_assert_msg(strcspn(l, "\n") <= 80, "over 80 columns: %.*s", (int)strcspn(l, "\n"),
                          l);
        ck_assert_ptr_null(strstr(t, "e+")); /* no raw exponents */
        ck_assert_ptr_nonnull(strstr(t, i ? " GB (P0 " : " min (critical path: compute "));
        ck_assert_ptr_nonnull(strstr(t, i ? "from the dealer" : "(no dealer)"));
        free(t);
    }
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "cost --model stories260K --protocol semi2k --network wan "
                 "--kv 100 --json --timeline %s --dump-program %s",
                 i ? tl2 : tl, prog);
        ck_assert_int_eq(th_cli(args, out), 0);
    }
    size_t la, lb;
    char *a = th_slurp(tl, &la), *b = th_slurp(tl2, &lb);
    ck_assert_uint_eq(la, lb);
    ck_assert_mem_eq(a, b, la);
    free(a);
    free(b);
    /* the JSON and the timeline parse; the dumped program reads back */
    if (access("/usr/bin/python3", X_OK) == 0) {
        snprintf(args, sizeof args,
                 "/usr/bin/python3 -c 'import json; d=json.load(open(\"%s\")); "
                 "assert d[\"rounds\"] > 0 and d[\"bytes_online\"] == "
                 "sum(d[\"total\"][\"bytes_sent\"]); "
                 "t=json.load(open(\"%s\")); assert len(t[\"traceEvents\"]) > 100'",
                 out, tl);
        ck_assert_int_eq(system(args), 0);
    }
    op_program p;
    op_program_init(&p);
    FILE *f = fopen(prog, "r");
    errbuf e;
    ck_assert_int_eq(op_read(&p, f, prog, &e), MS_OK);
    fclose(f);
    ck_assert_uint_gt(p.n_ops, 10);
    op_program_free(&p);

    /* --burst: token-bucket links, never slower; the same as the short form's third field */
    double lat[3];
    const char *nets[3] = {"1ms/20Mbps", "1ms/20Mbps --burst 3100", "1ms/20Mbps/3100"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args,
                 "cost --model stories260K --protocol semi2k --network %s "
                 "--kv 17 --json",
                 nets[i]);
        ck_assert_int_eq(th_cli(args, out), 0);
        t = th_slurp(out, NULL);
        const char *l = strstr(t, "\"latency_s\":");
        ck_assert_ptr_nonnull(l);
        lat[i] = strtod(l + 12, NULL);
        ck_assert_ptr_nonnull(strstr(t, i ? "\"burst_bytes\":3100," : "\"burst_bytes\":0,"));
        free(t);
    }
    ck_assert(lat[1] < lat[0] && lat[1] > 0);
    ck_assert_double_eq(lat[1], lat[2]);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan --kv 4 "
                            "--burst 100",
                            out),
                     2);
    t = th_slurp(out, NULL);
    ck_assert_ptr_nonnull(strstr(t, "--burst wants bytes"));
    free(t);

    /* --wire tcp: a bandwidth-bound prefill carries every segment's 66 header bytes per 1448
     * of payload (4.6 %) and the reverse direction's ACKs; slower than payload only, and not by
     * more than the headers of full-sized ACK traffic could add */
    double wl[2];
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "cost --model stories260K --protocol semi2k --network "
                 "1ms/20Mbps/3100 --phase prefill --tokens 16 --json --wire %s",
                 i ? "tcp" : "none");
        ck_assert_int_eq(th_cli(args, out), 0);
        t = th_slurp(out, NULL);
        const char *l = strstr(t, "\"latency_s\":");
        ck_assert_ptr_nonnull(l);
        wl[i] = strtod(l + 12, NULL);
        ck_assert_ptr_nonnull(strstr(t, i ? "\"wire_mtu\":1500," : "\"wire_mtu\":0,"));
        free(t);
    }
    ck_assert_msg(wl[1] > wl[0] * (1 + 66.0 / 1448 * 0.9) && wl[1] < wl[0] * 1.15,
                  "prefill %.4f s framed against %.4f s", wl[1], wl[0]);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan --kv 4 "
                            "--wire udp",
                            out),
                     2);
    t = th_slurp(out, NULL);
    ck_assert_ptr_nonnull(strstr(t, "--wire is tcp or none"));
    free(t);

    /* --set: protocol parameters; msb = carry sends fewer bytes than ks in the same rounds,
     * packed (the default) fewer still */
    unsigned long long rb[3][2];
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args,
                 "cost --model stories260K --protocol aby3 --network lan "
                 "--phase prefill --tokens 16 --json%s",
                 i == 0   ? " --set msb=ks"
                 : i == 1 ? " --set msb=carry"
                          : "");
        ck_assert_int_eq(th_cli(args, out), 0);
        t = th_slurp(out, NULL);
        const char *r = strstr(t, "\"rounds\":"), *ob = strstr(t, "\"bytes_online\":");
        ck_assert(r && ob);
        rb[i][0] = strtoull(r + 9, NULL, 10);
        rb[i][1] = strtoull(ob + 15, NULL, 10);
        free(t);
    }
    ck_assert_uint_eq(rb[0][0], rb[1][0]);
    ck_assert_uint_lt(rb[1][1], rb[0][1]);
    ck_assert_uint_lt(rb[2][1], rb[1][1]);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan --kv 4 "
                            "--set msb",
                            out),
                     2);
    t = th_slurp(out, NULL);
    ck_assert_ptr_nonnull(strstr(t, "mpcsim cost: error: --set wants KEY=VALUE"));
    ck_assert_ptr_null(strstr(t, "error: error"));
    free(t);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan --kv 4 "
                            "--set msb=kss",
                            out),
                     2);

    /* prefill with --tokens; --tokens with decode is refused */
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan "
                            "--phase prefill --tokens 32",
                            out),
                     0);
    ck_assert_int_eq(th_cli("cost --model stories260K --protocol semi2k --network lan "
                            "--kv 3 --tokens 32",
                            out),
                     2);
}
END_TEST

START_TEST(test_cli_calibrate)
{
    const char *dir = td.dir;
    char out[512], prof[512], args[1024];
    snprintf(out, sizeof out, "%s/out.txt", dir);
    snprintf(prof, sizeof prof, "%s/box.yaml", dir);
    snprintf(args, sizeof args, "calibrate --seconds 0.3 --name box -o %s", prof);
    ck_assert_int_eq(th_cli(args, out), 0);
    machine_profile m;
    errbuf e;
    ck_assert_msg(machine_load(prof, &m, &e) == MS_OK, "%s", e.msg);
    ck_assert_str_eq(m.name, "box");
    ck_assert(m.rate[WK_MAC] > 1e7 && m.rate[WK_ELEM] > 1e7 && m.rate[WK_PRG] > 1e7);
    /* the written profile drives `mpcsim cost --profile PATH` */
    snprintf(args, sizeof args,
             "cost --model stories260K --protocol semi2k --network lan "
             "--kv 8 --profile %s",
             prof);
    ck_assert_int_eq(th_cli(args, out), 0);
    ck_assert_int_eq(th_cli("calibrate --seconds -1", out), 2);
    ck_assert_int_eq(th_cli("calibrate extra", out), 2);
}
END_TEST

Suite *runner_suite(void)
{
    Suite *s = suite_create("runner");
    TCase *tc = th_case(s, "pipeline", 60);
    TH_TESTS(tc, test_result_metrics, test_run_sums_steps, test_stride_and_memo,
             test_stride_one_time_once, test_decode_step_metric, test_comet_sparse_ffn,
             test_run_deterministic, test_synth_kernel_same_costs, test_group_same_as_alone,
             test_quest_half_bounds_exact, test_idle_steps_same, test_run_errors, test_stepcost,
             test_attention_share_grows_with_context, test_latency_bound_end_to_end);
    tc = th_case(s, "cli", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_cli_cost, test_cli_calibrate);
    return s;
}
