/* bench_sim.c — figures for the simulation core (printed, never pass/fail):
 *   1. the event engine alone: schedule+pop pairs per second with ~1k and ~100k pending;
 *   2. sim_run on a synthetic cost log: rounds and events per second;
 *   3. llama-2-7b, semi2k, WAN: 1,024 decode steps at a 32K context, every step lowered,
 *      costed (through the op memo, as the runner does) and simulated, with the time of each
 *      stage, and the costing of the same programs without the memo for comparison; then the
 *      same through run_execute (which adds the policy replay of every step), with
 *      decode_stride 16 and 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_rng.h>

#include "sim/engine/des.h"
#include "models/lower.h"
#include "sim/scenario/runner.h"
#include "sim/engine/stepcost.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: robust to a busy machine */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- 1. engine ------------------------------------------------------------------------- */

static void bench_engine(size_t pending, uint64_t n_events)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 1);
    enum { NR = 4096 };
    uint64_t delay[NR];
    for (int i = 0; i < NR; i++)
        delay[i] = gsl_rng_uniform_int(g, 100000);
    des *q = des_new(pending);
    for (size_t i = 0; i < pending; i++)
        des_schedule(q, delay[i % NR], i);
    des_event ev;
    double t0 = now_s();
    for (uint64_t i = 0; i < n_events; i++) {
        des_pop(q, &ev);
        des_schedule(q, ev.time + delay[i % NR], ev.data);
    }
    double t = now_s() - t0;
    printf("engine: %zu pending, %llu pop+schedule pairs in %.3f s: %.1f M events/s\n", pending,
           (unsigned long long)n_events, t, (double)n_events / t * 1e-6);
    des_free(q);
    gsl_rng_free(g);
}

/* ---- 2. sim_run on a synthetic log -------------------------------------------------------- */

static void bench_simrun(int P, size_t n_rounds)
{
    op_program p;
    op_program_init(&p);
    uint32_t x = op_tensor_add(&p, "x", OPT_INPUT, DOM_ARITH, 1, 1, 8);
    size_t n_ops = n_rounds / 8;
    for (size_t i = 0; i < n_ops; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%zu", i);
        uint32_t t = op_tensor_add(&p, name, OPT_TEMP, DOM_ARITH, 1, 1, 8);
        op o = {.kind = OP_MUL,
                .cat = (uint8_t)(i % OPC_N),
                .layer = (int16_t)(i % 32),
                .batch = 1,
                .m = 1,
                .n = 8,
                .in = {i ? t - 1 : x, x, OP_NONE},
                .out = t};
        op_emit(&p, &o);
    }
    cost_log l = {.n_parties = P, .n = n_rounds, .cap = n_rounds};
    l.r = calloc(n_rounds, sizeof *l.r);
    for (size_t r = 0; r < n_rounds; r++) {
        l.r[r].op = (uint32_t)(r / 8);
        l.r[r].comm = 1;
        for (int s = 0; s < P; s++) {
            l.r[r].work[s][WK_ELEM] = 4096;
            for (int d = 0; d < P; d++)
                if (s != d)
                    l.r[r].bytes[s][d] = 8 * 4096;
        }
    }
    net_cfg n;
    errbuf e;
    net_preset("wan", P, &n, &e);
    machine_profile m;
    machine_default(&m);
    for (int ov = 0; ov < 2; ov++) {
        sim_opts o = {.overlap = ov};
        sim_result res;
        double t0 = now_s();
        int rc = sim_run(&n, &m, &p, &l, &o, &res, &e);
        double t = now_s() - t0;
        if (rc) {
            fprintf(stderr, "%s\n", e.msg);
            exit(1);
        }
        printf("sim_run: %d parties, %zu rounds, overlap %d: %.3f s, %.1f M rounds/s, "
               "%.1f M events/s\n",
               P, n_rounds, ov, t, (double)n_rounds / t * 1e-6, (double)res.events / t * 1e-6);
        sim_result_free(&res);
    }
    free(l.r);
    op_program_free(&p);
}

/* ---- 3. llama-2-7b decode ------------------------------------------------------------------ */

static run_cfg *llama_cfg(uint32_t ctx, uint32_t n_dec)
{
    run_cfg *cfg = calloc(1, sizeof *cfg);
    errbuf e;
    if (model_load("llama-2-7b", &cfg->model, &e) || proto_cfg_default("semi2k", &cfg->proto, &e) ||
        net_preset("wan", 2, &cfg->net, &e) || machine_load("default", &cfg->machine, &e)) {
        fprintf(stderr, "bench: %s\n", e.msg);
        exit(1);
    }
    cfg->model.max_ctx = ctx + n_dec + 1; /* llama-2-7b's shapes at a 32K context */
    snprintf(cfg->proto_ref, sizeof cfg->proto_ref, "semi2k");
    snprintf(cfg->policy.name, sizeof cfg->policy.name, "full");
    cfg->work.prompt_len = ctx;
    cfg->work.decode_len = n_dec;
    cfg->work.batch = 1;
    cfg->work.prefill_in_mpc = 0;
    cfg->work.decode_stride = 1;
    return cfg;
}

/* Every decode step through lowering, protocol costing and simulation, timed per stage. */
static void bench_llama_steps(uint32_t ctx, uint32_t n_dec)
{
    run_cfg *cfg = llama_cfg(ctx, n_dec);
    const proto *pr = proto_find("semi2k");
    op_program p;
    cost_log log;
    op_program_init(&p);
    cost_log_init(&log, 2);
    sim_opts so = {.ws = sim_ws_new()};
    cost_memo *memo = cost_memo_new();
    double tl = 0, tc = 0, ts = 0, tr = 0, lat = 0;
    cost_log ref;
    cost_log_init(&ref, 2);
    uint64_t rounds = 0, cost_rounds = 0, events = 0;
    errbuf e;
    for (uint32_t s = 0; s < n_dec; s++) {
        lower_opts lo;
        lower_opts_default(&lo);
        lo.kv_len = ctx + s;
        op_program_clear(&p);
        double t0 = now_s();
        int rc = lower_step(&cfg->model, &lo, &p, &e);
        double t1 = now_s();
        rc = rc ? rc : proto_cost_program_memo(pr, &cfg->proto, &p, &log, memo, &e);
        double t2 = now_s();
        sim_result r;
        rc = rc ? rc : sim_run(&cfg->net, &cfg->machine, &p, &log, &so, &r, &e);
        double t3 = now_s();
        double t4 = now_s();
        rc = rc ? rc : proto_cost_program(pr, &cfg->proto, &p, &ref, &e); /* without the memo */
        tr += now_s() - t4;
        if (rc || ref.n != log.n || memcmp(ref.r, log.r, log.n * sizeof *log.r)) {
            fprintf(stderr, "bench: %s\n", rc ? e.msg : "the memo's log differs");
            exit(1);
        }
        tl += t1 - t0;
        tc += t2 - t1;
        ts += t3 - t2;
        lat += (double)r.latency_ns * 1e-9;
        rounds += r.total.rounds;
        cost_rounds += log.n;
        events += r.events;
        sim_result_free(&r);
    }
    double tot = tl + tc + ts;
    printf("llama-2-7b semi2k wan, %u decode steps at %u context, every step costed: %.3f s CPU\n"
           "  lowering %.3f s (%.0f%%), protocol costing %.3f s (%.0f%%), simulation %.3f s "
           "(%.0f%%: %.1f ns per cost round, %.1f M events/s)\n"
           "  %llu communication rounds in all (%zu ops, %zu cost rounds in the last step); "
           "simulated decode "
           "latency %.0f s\n"
           "  the same programs costed without the op memo: %.3f s (%.1fx the memo's time)\n",
           n_dec, ctx, tot, tl, 100 * tl / tot, tc, 100 * tc / tot, ts, 100 * ts / tot,
           ts / (double)cost_rounds * 1e9, (double)events / ts * 1e-6, (unsigned long long)rounds,
           p.n_ops, log.n, lat, tr, tr / tc);
    sim_ws_free(so.ws);
    cost_memo_free(memo);
    cost_log_free(&ref);
    op_program_free(&p);
    cost_log_free(&log);
    free(cfg);
}

/* The same through run_execute: adds the policy replay of every step and the memo. */
static void bench_llama_run(uint32_t ctx, uint32_t n_dec, uint32_t stride)
{
    run_cfg *cfg = llama_cfg(ctx, n_dec);
    cfg->work.decode_stride = stride;
    run_result res;
    run_result_init(&res);
    errbuf e;
    double c0 = now_s();
    if (run_execute(cfg, &res, &e)) {
        fprintf(stderr, "bench: %s\n", e.msg);
        exit(1);
    }
    double cpu = now_s() - c0, steps = 0;
    for (size_t i = 0; i < res.n_metric; i++)
        if (!strcmp(res.metric[i].name, "steps_simulated"))
            steps = res.metric[i].value;
    printf("run_execute, policy full, stride %u: %.3f s CPU (%.0f steps simulated; the rest is "
           "the policy replay of all %u steps)\n",
           stride, cpu, steps, n_dec);
    run_result_free(&res);
    free(cfg);
}

int main(int argc, char **argv)
{
    int only_llama = argc > 1 && (!strcmp(argv[1], "llama") || !strcmp(argv[1], "steps"));
    if (!only_llama) {
        bench_engine(1000, 20000000);
        bench_engine(100000, 10000000);
        bench_simrun(2, 1u << 20);
        bench_simrun(3, 1u << 20);
    }
    bench_llama_steps(32768, 1024);
    if (argc > 1 && !strcmp(argv[1], "steps"))
        return 0;
    bench_llama_run(32768, 1024, 16);
    bench_llama_run(32768, 1024, 1);
    return 0;
}
