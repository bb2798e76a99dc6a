/* bench_sim.c — figures for the simulation core (printed, never pass/fail):
 *   1. the event engine alone: schedule+pop pairs per second with ~1k and ~100k pending;
 *   2. sim_run on a synthetic cost log: rounds and events per second;
 *   3. llama-2-7b, semi2k, WAN: 1,024 decode steps at a 32K context through run_execute (full
 *      cache), and where the time goes (lowering, protocol costing, simulation per step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_rng.h>

#include "des.h"
#include "lower.h"
#include "runcfg.h"
#include "stepcost.h"

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
        op o = {.kind = OP_MUL, .cat = (uint8_t)(i % OPC_N), .layer = (int16_t)(i % 32),
                .batch = 1, .m = 1, .n = 8, .in = {i ? t - 1 : x, x, OP_NONE}, .out = t};
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
               "%.1f M events/s\n", P, n_rounds, ov, t, (double)n_rounds / t * 1e-6,
               (double)res.events / t * 1e-6);
        sim_result_free(&res);
    }
    free(l.r);
    op_program_free(&p);
}

/* ---- 3. llama-2-7b decode ------------------------------------------------------------------ */

static int bench_llama(uint32_t ctx, uint32_t n_dec, uint32_t stride)
{
    run_cfg *cfg = calloc(1, sizeof *cfg);
    errbuf e;
    if (model_load("llama-2-7b", &cfg->model, &e) || proto_cfg_default("semi2k", &cfg->proto, &e) ||
        net_preset("wan", 2, &cfg->net, &e) || machine_load("default", &cfg->machine, &e)) {
        fprintf(stderr, "bench: %s\n", e.msg);
        free(cfg);
        return 1;
    }
    cfg->model.max_ctx = ctx + n_dec + 1; /* llama-2-7b's shapes at a 32K context */
    snprintf(cfg->proto_ref, sizeof cfg->proto_ref, "semi2k");
    snprintf(cfg->policy.name, sizeof cfg->policy.name, "full");
    cfg->work.prompt_len = ctx;
    cfg->work.decode_len = n_dec;
    cfg->work.batch = 1;
    cfg->work.prefill_in_mpc = 0;
    cfg->work.decode_stride = stride;
    run_result res;
    run_result_init(&res);
    double c0 = now_s();
    int rc = run_execute(cfg, &res, &e);
    double cpu = now_s() - c0;
    if (rc) {
        fprintf(stderr, "bench: %s\n", e.msg);
        free(cfg);
        return 1;
    }
    double lat = 0, steps = 0;
    for (size_t i = 0; i < res.n_metric; i++) {
        if (!strcmp(res.metric[i].name, "latency_decode_s"))
            lat = res.metric[i].value;
        if (!strcmp(res.metric[i].name, "steps_simulated"))
            steps = res.metric[i].value;
    }
    printf("llama-2-7b semi2k wan: %u decode steps at %u context, stride %u: %.3f s wall "
           "(%.3f s CPU; %.0f steps simulated, %llu events; simulated decode latency %.1f s)\n",
           n_dec, ctx, stride, res.wall_s, cpu, steps,
           (unsigned long long)res.phase[PHASE_DECODE].events, lat);
    run_result_free(&res);

    /* where the time of one step goes */
    const proto *pr = proto_find("semi2k");
    op_program p;
    cost_log log;
    op_program_init(&p);
    cost_log_init(&log, 2);
    lower_opts lo;
    lower_opts_default(&lo);
    lo.kv_len = ctx;
    const int reps = 8;
    double tl = 0, tc = 0, ts = 0;
    sim_opts so = {.ws = sim_ws_new()};
    for (int i = 0; i < reps; i++) {
        op_program_clear(&p);
        double t0 = now_s();
        lower_step(&cfg->model, &lo, &p, &e);
        double t1 = now_s();
        proto_cost_program(pr, &cfg->proto, &p, &log, &e);
        double t2 = now_s();
        sim_result r;
        sim_run(&cfg->net, &cfg->machine, &p, &log, &so, &r, &e);
        double t3 = now_s();
        sim_result_free(&r);
        tl += t1 - t0;
        tc += t2 - t1;
        ts += t3 - t2;
    }
    double tot = tl + tc + ts;
    printf("  one step (%zu ops, %zu rounds): lowering %.2f ms (%.0f%%), protocol costing "
           "%.2f ms (%.0f%%), simulation %.2f ms (%.0f%%)\n", p.n_ops, log.n, tl / reps * 1e3,
           100 * tl / tot, tc / reps * 1e3, 100 * tc / tot, ts / reps * 1e3, 100 * ts / tot);
    sim_ws_free(so.ws);
    op_program_free(&p);
    cost_log_free(&log);
    free(cfg);
    return 0;
}

int main(int argc, char **argv)
{
    int only_llama = argc > 1 && !strcmp(argv[1], "llama");
    if (!only_llama) {
        bench_engine(1000, 20000000);
        bench_engine(100000, 10000000);
        bench_simrun(2, 1u << 20);
        bench_simrun(3, 1u << 20);
    }
    if (bench_llama(32768, 1024, 1))
        return 1;
    if (bench_llama(32768, 1024, 16))
        return 1;
    return 0;
}
