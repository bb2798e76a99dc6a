/* check_pipeline.c — the fast per-step cost pipeline against the straightforward one: the op
 * memo (proto_cost_program_memo) against running every kernel (proto_cost_program), the fused
 * sequential schedule against the event queue, and the lowering's name index against
 * op_tensor_find. Every record, figure and timeline byte must be equal. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/lower.h"
#include "sim/replay/replay.h"
#include "sim/scenario/runner.h"
#include "harness.h"
#include "sim/engine/stepcost.h"

typedef struct pl_case {
    const char *model, *protocol, *network;
    int phase;
    uint32_t n_tokens, kv_len, n_seqs;
    int kept; /* 0: all cached entries; 1: non-uniform kept counts per KV head */
    int overlap;
} pl_case;

typedef struct pl_env {
    model_cfg model;
    proto_cfg pcfg;
    net_cfg net;
    machine_profile mach;
    const proto *pr;
} pl_env;

static void env_load(pl_env *v, const pl_case *c)
{
    errbuf e;
    ck_assert_msg(model_load(c->model, &v->model, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(proto_cfg_default(c->protocol, &v->pcfg, &e) == MS_OK, "%s", e.msg);
    v->pr = proto_find(c->protocol);
    ck_assert_msg(net_parse(c->network, v->pr->n_parties, &v->net, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(machine_load("default", &v->mach, &e) == MS_OK, "%s", e.msg);
    if (v->model.max_ctx < c->kv_len + c->n_tokens + 1)
        v->model.max_ctx = c->kv_len + c->n_tokens + 1;
}

/* The environment of a case written in place. */
static pl_env env_of(pl_case c)
{
    pl_env v;
    env_load(&v, &c);
    return v;
}

/* The memo (its rounds into a) and the plain coster (into b) cost p alike. */
static void memo_agrees(pl_env *v, const op_program *p, cost_memo *memo, cost_log *a, cost_log *b)
{
    errbuf e;
    ck_assert_msg(proto_cost_program_memo(v->pr, &v->pcfg, p, a, memo, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(proto_cost_program(v->pr, &v->pcfg, p, b, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(a->n, b->n);
    ck_assert(!memcmp(a->r, b->r, a->n * sizeof *a->r));
}

/* kept[l·kv_heads + g]: a different count per KV head and per layer, some above kv_len. */
static uint32_t *make_kept(const model_cfg *m, uint32_t kv_len)
{
    size_t n = (size_t)m->n_layers * m->n_kv_heads;
    uint32_t *k = malloc(n * sizeof *k);
    for (size_t i = 0; i < n; i++)
        k[i] = (uint32_t)((kv_len / 3 + 7 * i) % (kv_len + 5));
    return k;
}

static char *program_text(const op_program *p)
{
    char *buf = NULL;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(op_write(p, f), MS_OK);
    fclose(f);
    return buf;
}

static void same_result(const sim_result *a, const sim_result *b, const char *what)
{
    ck_assert_msg(a->latency_ns == b->latency_ns, "%s: latency %llu vs %llu", what,
                  (unsigned long long)a->latency_ns, (unsigned long long)b->latency_ns);
    ck_assert_msg(!memcmp(&a->total, &b->total, sizeof a->total), "%s: totals differ", what);
    ck_assert_msg(!memcmp(a->cat, b->cat, sizeof a->cat), "%s: categories differ", what);
    ck_assert_msg(a->n_layers == b->n_layers, "%s: layer counts differ", what);
    ck_assert_msg(!a->n_layers || !memcmp(a->layer, b->layer, a->n_layers * sizeof *a->layer),
                  "%s: per-layer stats differ", what);
    ck_assert_msg(a->events == b->events, "%s: events differ", what);
}

/* One step the straightforward way: lower, run every kernel, simulate on the event queue. */
static void reference_step(const pl_env *v, const lower_opts *lo, int overlap, op_program *p,
                           cost_log *log, sim_result *res, char **timeline)
{
    errbuf e;
    ck_assert_msg(lower_step(&v->model, lo, p, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(proto_cost_program(v->pr, &v->pcfg, p, log, &e) == MS_OK, "%s", e.msg);
    size_t len;
    FILE *f = open_memstream(timeline, &len);
    sim_timeline_begin(f, log->n_parties);
    sim_opts so = {.overlap = overlap, .event_queue = 1, .timeline = f, .t0_ns = 777};
    ck_assert_msg(sim_run(&v->net, &v->mach, p, log, &so, res, &e) == MS_OK, "%s", e.msg);
    sim_timeline_end(f);
    fclose(f);
}

/* The same step through step_simulate with a shared memo and workspace. */
static void fast_step(const pl_env *v, const lower_opts *lo, int overlap, cost_memo *memo,
                      sim_ws *ws, op_program *p, cost_log *log, sim_result *res, char **timeline)
{
    size_t len;
    FILE *f = open_memstream(timeline, &len);
    sim_timeline_begin(f, v->pr->n_parties);
    step_env env = {&v->model, v->pr,
                    &v->pcfg,  &v->net,
                    &v->mach,  {.overlap = overlap, .timeline = f, .t0_ns = 777, .ws = ws}};
    errbuf e;
    ck_assert_msg(step_simulate_memo(&env, memo, lo, p, log, res, &e) == MS_OK, "%s", e.msg);
    sim_timeline_end(f);
    fclose(f);
}

static void check_case(const pl_case *c, cost_memo *memo, sim_ws *ws)
{
    pl_env v;
    env_load(&v, c);
    lower_opts lo;
    lower_opts_default(&lo);
    lo.phase = c->phase;
    lo.n_tokens = c->n_tokens;
    lo.kv_len = c->kv_len;
    lo.n_seqs = c->n_seqs;
    uint32_t *kept = c->kept ? make_kept(&v.model, c->kv_len) : NULL;
    lo.kept = kept;
    char what[160];
    snprintf(what, sizeof what, "%s %s %s phase %d tokens %u kv %u seqs %u kept %d overlap %d",
             c->model, c->protocol, c->network, c->phase, c->n_tokens, c->kv_len, c->n_seqs,
             c->kept, c->overlap);
    op_program pr, pf;
    cost_log lr, lf;
    op_program_init(&pr);
    op_program_init(&pf);
    cost_log_init(&lr, v.pr->n_parties);
    cost_log_init(&lf, v.pr->n_parties);
    sim_result rr, rf;
    char *tr = NULL, *tf = NULL;
    reference_step(&v, &lo, c->overlap, &pr, &lr, &rr, &tr);
    fast_step(&v, &lo, c->overlap, memo, ws, &pf, &lf, &rf, &tf);

    char *a = program_text(&pr), *b = program_text(&pf);
    ck_assert_msg(!strcmp(a, b), "%s: programs differ", what);
    ck_assert_msg(lr.n == lf.n, "%s: %zu vs %zu cost rounds", what, lr.n, lf.n);
    for (size_t i = 0; i < lr.n; i++)
        ck_assert_msg(!memcmp(&lr.r[i], &lf.r[i], sizeof lr.r[i]),
                      "%s: cost round %zu (op %u) differs", what, i, lr.r[i].op);
    same_result(&rr, &rf, what);
    ck_assert_msg(!strcmp(tr, tf), "%s: timelines differ", what);
    ck_assert_msg(rr.total.rounds > 0 && rr.latency_ns > 0, "%s: an empty step", what);

    free(a);
    free(b);
    free(tr);
    free(tf);
    free(kept);
    sim_result_free(&rr);
    sim_result_free(&rf);
    cost_log_free(&lr);
    cost_log_free(&lf);
    op_program_free(&pr);
    op_program_free(&pf);
}

/* Consecutive steps through one memo: later steps hit what earlier ones costed, across
 * models, phases and kept vectors; switching protocol empties the memo. */
static const pl_case cases[] = {
    {"stories260K", "semi2k", "wan", PHASE_PREFILL, 16, 0, 1, 0, 0},
    {"stories260K", "semi2k", "wan", PHASE_DECODE, 1, 16, 1, 0, 0},
    {"stories260K", "semi2k", "1ms/20Mbps/3100", PHASE_DECODE, 1, 17, 1, 0,
     0},                                                            /* tbf-like bucket */
    {"stories260K", "semi2k", "wan", PHASE_DECODE, 1, 40, 1, 1, 0}, /* GQA, kept per KV head */
    {"stories260K", "semi2k", "50ms/100Mbps/12500", PHASE_DECODE, 1, 41, 1, 1, 1},
    {"stories260K", "semi2k", "lan", PHASE_DECODE, 1, 41, 2, 1, 0}, /* two sequences */
    {"gpt2", "semi2k", "wan", PHASE_DECODE, 1, 100, 1, 0, 0},       /* biases, layernorm */
    {"gpt2", "semi2k", "wan", PHASE_DECODE, 1, 101, 1, 0, 1},
    {"llama-3.1-8b", "semi2k", "wan", PHASE_DECODE, 1, 4000, 1, 1, 0},
    {"llama-2-7b", "semi2k", "wan", PHASE_DECODE, 1, 32768, 1, 0, 0},
    {"llama-2-7b", "semi2k", "wan", PHASE_DECODE, 1, 32769, 1, 0, 0},
    {"stories260K", "aby3", "lan", PHASE_PREFILL, 8, 0, 1, 0, 0},
    {"stories260K", "aby3", "lan", PHASE_DECODE, 1, 8, 1, 1, 0},
    {"stories260K", "aby3", "1ms/100Mbps/12500", PHASE_DECODE, 1, 9, 1, 1, 1},
    {"llama-3.1-8b", "aby3", "wan", PHASE_DECODE, 1, 2048, 1, 1, 0},
    {"stories260K", "semi2k", "wan", PHASE_DECODE, 1, 18, 1, 0, 0}, /* back to semi2k */
};

START_TEST(test_memo_and_fast_schedule_match_reference)
{
    cost_memo *memo = cost_memo_new();
    sim_ws *ws = sim_ws_new();
    ck_assert_ptr_nonnull(memo);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(&cases[i], memo, ws);
    cost_memo_free(memo);
    sim_ws_free(ws);
}
END_TEST

/* The memo keys on everything an op's rounds depend on: a config change (another truncation)
 * must not reuse rounds costed under the old one. */
START_TEST(test_memo_follows_config)
{
    pl_env v = env_of((pl_case){"stories260K", "semi2k", "wan", PHASE_DECODE, 1, 20, 1, 0, 0});
    lower_opts lo;
    lower_opts_default(&lo);
    lo.kv_len = 20;
    op_program p;
    op_program_init(&p);
    errbuf e;
    ck_assert_int_eq(lower_step(&v.model, &lo, &p, &e), MS_OK);
    cost_memo *memo = cost_memo_new();
    cost_log a, b;
    cost_log_init(&a, 2);
    cost_log_init(&b, 2);
    for (int local = 0; local < 2; local++) {
        v.pcfg.trunc_local = local;
        memo_agrees(&v, &p, memo, &a, &b);
    }
    /* a NULL memo is the plain coster */
    memo_agrees(&v, &p, NULL, &a, &b);
    cost_memo_free(memo);
    cost_log_free(&a);
    cost_log_free(&b);
    op_program_free(&p);
}
END_TEST

/* Past its cap the memo empties itself and goes on costing the same rounds: llama-2-7b decode
 * steps at growing kv_len add a few hundred new rounds each (the attention ops). */
START_TEST(test_memo_empties_itself)
{
    pl_env v = env_of((pl_case){"llama-2-7b", "semi2k", "wan", PHASE_DECODE, 1, 4096, 1, 0, 0});
    v.model.max_ctx = 8192;
    cost_memo *memo = cost_memo_new();
    op_program p;
    op_program_init(&p);
    cost_log a, b;
    cost_log_init(&a, 2);
    cost_log_init(&b, 2);
    errbuf e;
    size_t held = 0, resets = 0, after = 0;
    for (uint32_t s = 0; s < 1000 && after < 10; s++) {
        lower_opts lo;
        lower_opts_default(&lo);
        lo.kv_len = 4096 + s;
        op_program_clear(&p);
        ck_assert_int_eq(lower_step(&v.model, &lo, &p, &e), MS_OK);
        memo_agrees(&v, &p, memo, &a, &b);
        size_t now = cost_memo_rounds(memo);
        ck_assert_uint_le(now, (size_t)1 << 16);
        resets += now < held;
        after += resets > 0; /* steps costed since the memo emptied itself */
        held = now;
    }
    ck_assert_uint_eq(resets, 1);
    cost_memo_free(memo);
    cost_log_free(&a);
    cost_log_free(&b);
    op_program_free(&p);
}
END_TEST

/* A bad operand id is reported as without the memo, even when an equal-looking op was seen. */
START_TEST(test_memo_reports_bad_ops)
{
    pl_env v = env_of((pl_case){"stories260K", "semi2k", "wan", PHASE_DECODE, 1, 20, 1, 0, 0});
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_INPUT, DOM_ARITH, 1, 1, 8);
    uint32_t y = op_tensor_add(&p, "y", OPT_TEMP, DOM_ARITH, 1, 1, 8);
    op o = {.kind = OP_MUL, .batch = 1, .m = 1, .n = 8, .in = {x, x, OP_NONE}, .out = y};
    op_emit(&p, &o);
    o.in[1] = 99; /* out of range */
    op_emit(&p, &o);
    cost_memo *memo = cost_memo_new();
    cost_log l;
    cost_log_init(&l, 2);
    errbuf e1, e2;
    int r1 = proto_cost_program_memo(v.pr, &v.pcfg, &p, &l, memo, &e1);
    int r2 = proto_cost_program(v.pr, &v.pcfg, &p, &l, &e2);
    ck_assert_int_ne(r1, MS_OK);
    ck_assert_int_eq(r1, r2);
    ck_assert_str_eq(e1.msg, e2.msg);
    cost_memo_free(memo);
    cost_log_free(&l);
    op_program_free(&p);
}
END_TEST

/* The lowering's name index finds what op_tensor_find finds: the first tensor of a name,
 * including one the policy made before the lowering ran. */
START_TEST(test_lowering_weights_by_name)
{
    const char *models[] = {"stories260K", "gpt2"};
    for (int mi = 0; mi < 2; mi++) {
        model_cfg m;
        errbuf e;
        ck_assert_msg(model_load(models[mi], &m, &e) == MS_OK, "%s", e.msg);
        op_program p;
        op_program_init(&p);
        const char *pre = mi == 0 ? "L1.wq" : "L1.w_fc";
        uint32_t policy_w = op_tensor_add(&p, pre, OPT_WEIGHT, DOM_ARITH, 1, 2, 2);
        lower_opts lo;
        lower_opts_default(&lo);
        lo.kv_len = 5;
        ck_assert_int_eq(lower_step(&m, &lo, &p, &e), MS_OK);
        int used_policy_w = 0, n_weights = 0;
        for (size_t i = 0; i < p.n_ops; i++)
            for (int k = 0; k < 3; k++) {
                uint32_t t = p.ops[i].in[k];
                if (t == OP_NONE || p.tens[t].role != OPT_WEIGHT)
                    continue;
                n_weights++;
                ck_assert_uint_eq(op_tensor_find(&p, p.tens[t].name), t);
                used_policy_w |= t == policy_w;
            }
        ck_assert(used_policy_w);
        ck_assert_int_gt(n_weights, 4 * (int)m.n_layers);
        /* no weight name twice */
        for (size_t t = 0; t < p.n_tens; t++)
            if (p.tens[t].role == OPT_WEIGHT)
                ck_assert_uint_eq(op_tensor_find(&p, p.tens[t].name), t);
        op_program_free(&p);
    }
}
END_TEST

/* ---- whole runs ------------------------------------------------------------------------- */

/* One step of a run the straightforward way, added to acc. */
static void reference_add(const run_cfg *c, const lower_opts *lo, op_program *prog, sim_result *acc)
{
    errbuf e;
    const proto *pr = proto_find(c->proto_ref);
    cost_log log;
    cost_log_init(&log, pr->n_parties);
    ck_assert_msg(lower_step(&c->model, lo, prog, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(proto_cost_program(pr, &c->proto, prog, &log, &e) == MS_OK, "%s", e.msg);
    sim_opts so = {.overlap = c->overlap, .event_queue = 1};
    sim_result r;
    ck_assert_msg(sim_run(&c->net, &c->machine, prog, &log, &so, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(sim_result_accumulate(acc, &r), MS_OK);
    sim_result_free(&r);
    cost_log_free(&log);
}

/* run_execute (memo, fused schedule, step memo) against replaying the policy and costing
 * every step the straightforward way: the phases' figures are equal. */
static void check_run(const char *policy, const char *param, const char *val, const char *protocol,
                      int overlap)
{
    run_cfg *c = calloc(1, sizeof *c);
    errbuf e;
    ck_assert_msg(model_load("stories260K", &c->model, &e) == MS_OK, "%s", e.msg);
    snprintf(c->model_ref, sizeof c->model_ref, "stories260K");
    ck_assert_msg(proto_cfg_default(protocol, &c->proto, &e) == MS_OK, "%s", e.msg);
    snprintf(c->proto_ref, sizeof c->proto_ref, "%s", protocol);
    ck_assert_msg(net_parse("wan", proto_find(protocol)->n_parties, &c->net, &e) == MS_OK, "%s",
                  e.msg);
    ck_assert_msg(machine_load("default", &c->machine, &e) == MS_OK, "%s", e.msg);
    snprintf(c->trace.source, sizeof c->trace.source, "record");
    snprintf(c->trace.path, sizeof c->trace.path, "%s/tests/data/tinystories_sample.txt",
             th_data());
    snprintf(c->policy.name, sizeof c->policy.name, "%s", policy);
    if (param) {
        snprintf(c->policy.params[0].key, sizeof c->policy.params[0].key, "%s", param);
        snprintf(c->policy.params[0].val, sizeof c->policy.params[0].val, "%s", val);
        c->policy.n_params = 1;
    }
    c->work.prompt_len = 48;
    c->work.decode_len = 12;
    c->work.batch = 1;
    c->work.prefill_in_mpc = 1;
    c->work.decode_stride = 1;
    c->seed = 1;
    c->overlap = overlap;

    run_result res;
    run_result_init(&res);
    ck_assert_msg(run_execute(c, &res, &e) == MS_OK, "%s", e.msg);

    sim_result pf, dc;
    memset(&pf, 0, sizeof pf);
    memset(&dc, 0, sizeof dc);
    replay *rp;
    ck_assert_msg(replay_open(c, &rp, &e) == MS_OK, "%s", e.msg);
    op_program prog;
    op_program_init(&prog);
    ck_assert_msg(replay_prefill(rp, &prog, &e) == MS_OK, "%s", e.msg);
    lower_opts lo;
    lower_opts_default(&lo);
    lo.phase = PHASE_PREFILL;
    lo.n_tokens = c->work.prompt_len;
    lo.attended_cache = replay_attended_cache(rp);
    lo.ffn_active = replay_ffn_active(rp, &lo.ffn_secret);
    reference_add(c, &lo, &prog, &pf);
    size_t nk = (size_t)c->model.n_layers * c->model.n_kv_heads;
    uint32_t *kept = calloc(nk + 1, sizeof *kept);
    for (uint32_t s = 0; s < c->work.decode_len; s++) {
        uint32_t kv = c->work.prompt_len + s;
        op_program_clear(&prog);
        ck_assert_msg(replay_step(rp, s, kv, kept, &prog, &e) == MS_OK, "%s", e.msg);
        lower_opts_default(&lo);
        lo.kv_len = kv;
        lo.kept = kept;
        lo.attended_cache = replay_attended_cache(rp); /* as the runner lowers (lower.h) */
        lo.ffn_active = replay_ffn_active(rp, &lo.ffn_secret);
        reference_add(c, &lo, &prog, &dc);
        if (s + 1 == c->work.decode_len && strcmp(policy, "full") != 0)
            for (size_t i = 0; i < nk; i++) /* the policy did evict */
                ck_assert_msg(kept[i] < kv, "%s kept all of layer %zu", policy,
                              i / c->model.n_kv_heads);
    }
    char what[96];
    snprintf(what, sizeof what, "run %s %s overlap %d: prefill", policy, protocol, overlap);
    same_result(&res.phase[PHASE_PREFILL], &pf, what);
    snprintf(what, sizeof what, "run %s %s overlap %d: decode", policy, protocol, overlap);
    same_result(&res.phase[PHASE_DECODE], &dc, what);
    replay_close(rp);
    free(kept);
    op_program_free(&prog);
    sim_result_free(&pf);
    sim_result_free(&dc);
    run_result_free(&res);
    free(c);
}

START_TEST(test_runs_match_reference)
{
    check_run("full", NULL, NULL, "semi2k", 0);
    check_run("h2o", NULL, NULL, "semi2k", 0);
    check_run("pyramidkv", "capacity", "24", "aby3", 0); /* a budget per layer */
    check_run("streamingllm", "recent", "16", "semi2k", 1);
    check_run("mpcache", NULL, NULL, "semi2k", 0); /* clustered selection, policy ops */
}
END_TEST

Suite *pipeline_suite(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = th_case(s, "fast_equals_reference", 60);
    TH_TESTS(tc, test_memo_and_fast_schedule_match_reference, test_memo_follows_config,
             test_memo_reports_bad_ops, test_memo_empties_itself, test_lowering_weights_by_name,
             test_runs_match_reference);
    return s;
}
