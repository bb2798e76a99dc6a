/* bench_serve.c — 10,000 requests served end to end (workload generation, scheduling, KV
 * sharing, every step costed through stepcost for llama-2-7b semi2k on LAN), per sharing
 * policy. Prints wall time and rates; the target is under 5 s per policy on one core. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sim/engine/machine.h"
#include "models/model.h"
#include "sim/engine/net.h"
#include "protocols/program/proto.h"
#include "sim/serve/serve.h"
#include "sim/serve/workload.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int build_cfg(run_cfg *c, errbuf *e)
{
    memset(c, 0, sizeof *c);
    const proto *pr = proto_find("semi2k");
    if (!pr)
        return MS_ERR_NOTFOUND;
    int rc;
    if ((rc = model_load("llama-2-7b", &c->model, e)) ||
        (rc = proto_cfg_default("semi2k", &c->proto, e)) ||
        (rc = net_parse("lan", pr->n_parties, &c->net, e)) ||
        (rc = machine_load("default", &c->machine, e)))
        return rc;
    c->work.batch = 1;
    return MS_OK;
}

int main(void)
{
    errbuf e = {{0}};
    run_cfg cfg;
    if (build_cfg(&cfg, &e)) {
        fprintf(stderr, "bench_serve: %s\n", e.msg);
        return 1;
    }
    wl_params wp;
    wl_params_default(&wp);
    wp.seed = 42;
    wp.n_requests = 10000;
    wp.rate = 0.0001;
    wp.n_tenants = 4;
    wp.users_per_tenant = 64;
    wp.sys_len = 512;
    wp.user_ctx_len = 64;
    wp.n_docs = 200;
    wp.doc_len = 256;
    wp.docs_per_req = 2;
    wp.turn_min = 16;
    wp.turn_max = 128;
    wp.decode_min = 16;
    wp.decode_max = 128;
    workload w;
    wl_init(&w);
    double t0 = now_s();
    if (wl_generate(&wp, &w, &e)) {
        fprintf(stderr, "bench_serve: %s\n", e.msg);
        return 1;
    }
    printf("workload: %zu requests, %zu prompt tokens, generated in %.3f s\n", w.n, w.n_tok,
           now_s() - t0);
    printf("%-7s %8s %8s %10s %10s %10s %12s %8s\n", "policy", "wall s", "cpu s", "steps", "events",
           "cost calls", "requests/s", "tok hit");
    for (int k = 0; k < KVS_N; k++) {
        serve_params sp;
        serve_params_default(&sp);
        sp.share.kind = k;
        sp.share.capacity_tokens = 200000;
        serve_stepcoster *sc;
        serve_coster c;
        serve_result r;
        t0 = now_s();
        clock_t c0 = clock();
        if (serve_stepcoster_open(&cfg, sp.batch_limit, &sc, &c, &e) ||
            serve_run(&sp, &w, &c, &r, &e)) {
            fprintf(stderr, "bench_serve: %s\n", e.msg);
            return 1;
        }
        double dt = now_s() - t0, cpu = (double)(clock() - c0) / CLOCKS_PER_SEC;
        printf("%-7s %8.3f %8.3f %10llu %10llu %10llu %12.0f %8.3f\n", kvs_kind_name(k), dt, cpu,
               (unsigned long long)r.steps, (unsigned long long)r.events,
               (unsigned long long)r.cost_calls, (double)w.n / dt, r.token_hit_rate);
        serve_result_free(&r);
        serve_stepcoster_close(sc);
    }
    wl_free(&w);
    return 0;
}
