/* bench_validate.c — secure stories260K on the real backend (parties forked on 127.0.0.1):
 * 64-token greedy generation time in 2PC (semi2k + dealer) and 3PC (aby3); teacher-forced
 * accuracy over 256 positions of tests/data/tinystories_sample.txt against the float reference
 * (PUMA's SiLU and the sigmoid SiLU); and the simulator's predicted latency of a prefill and a
 * decode step against the measured one with 1 ms injected one-way latency. Prints figures;
 * never fails on timing. MPCSIM_BENCH_QUICK=1 shortens every run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/secure/secinf.h"
#include "sim/secure/valid.h"

static model_cfg M;
static llama *L;
static int ids[4096];
static int n_ids;

static int setup(void)
{
    errbuf e = {{0}};
    char wp[1024], tp[1024], txt[1024];
    if (model_load("stories260K", &M, &e) || model_file_path(M.weights, wp, sizeof wp) ||
        model_file_path(M.tokenizer, tp, sizeof tp) || llama_load(&M, wp, &L, &e)) {
        fprintf(stderr, "bench_validate: %s\n", e.msg);
        return 1;
    }
    llama_tok *T;
    if (llama_tok_load(tp, M.vocab, &T, &e)) {
        fprintf(stderr, "bench_validate: %s\n", e.msg);
        return 1;
    }
    const char *data = getenv("MPCSIM_DATA");
    snprintf(txt, sizeof txt, "%s/tests/data/tinystories_sample.txt", data ? data : ".");
    FILE *f = fopen(txt, "r");
    if (!f) {
        fprintf(stderr, "bench_validate: cannot open %s\n", txt);
        return 1;
    }
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    n_ids = llama_tok_encode(T, text, ids, 4096);
    llama_tok_free(T);
    return 0;
}

static void generation(const char *pn, uint32_t prompt, uint32_t n)
{
    errbuf e = {{0}};
    secinf_opts o = {.model = &M,
                     .weights = L,
                     .tokens = ids,
                     .n_tokens = prompt,
                     .prefill = prompt,
                     .n_gen = n - 1};
    proto_cfg_default(pn, &o.cfg, &e);
    proto_cfg_set(&o.cfg, "approx", "sigmoid", &e);
    secinf_result r;
    if (secinf_run(&o, &r, &e)) {
        fprintf(stderr, "bench_validate: %s\n", e.msg);
        return;
    }
    uint64_t pre = 0, dec = 0;
    for (uint32_t s = 0; s < r.n_steps; s++) {
        uint64_t ns = 0;
        for (uint32_t i = 0; i < r.n_parties; i++)
            ns = r.st[(size_t)s * r.n_nodes + i].ns > ns ? r.st[(size_t)s * r.n_nodes + i].ns : ns;
        *(s ? &dec : &pre) += ns;
    }
    printf(
        "generation %-6s prompt %3u, %3u tokens: prefill %6.3f s, decode %6.3f s (%5.1f ms/token), "
        "whole session %6.2f s (incl. weight sharing)\n",
        pn, prompt, n, pre * 1e-9, dec * 1e-9, dec * 1e-6 / (n - 1), r.seconds);
    secinf_result_free(&r);
}

static void accuracy(const char *pn, const char *approx, uint32_t N)
{
    errbuf e = {{0}};
    uint32_t V = M.vocab;
    float *ref = malloc((size_t)N * V * sizeof *ref);
    llama_reset(L);
    for (uint32_t p = 0; p < N; p++)
        llama_forward(L, ids[p], p, NULL, ref + (size_t)p * V);
    secinf_opts o = {.model = &M, .weights = L, .tokens = ids, .n_tokens = N, .prefill = 1};
    proto_cfg_default(pn, &o.cfg, &e);
    proto_cfg_set(&o.cfg, "approx", approx, &e);
    secinf_result r;
    if (secinf_run(&o, &r, &e)) {
        fprintf(stderr, "bench_validate: %s\n", e.msg);
        free(ref);
        return;
    }
    llama_acc a;
    llama_compare(r.logits, ref, N, V, &a);
    printf("accuracy   %-6s approx %-7s %u positions: top-1 %u/%u (%.2f %%), logit error max %.4f "
           "mean %.5f "
           "(%.1f s); largest reference margin of a disagreement %.4f\n",
           pn, approx, N, a.top1_agree, N, 100.0 * a.top1_agree / N, a.max_abs, a.mean_abs,
           r.seconds, a.miss_gap);
    secinf_result_free(&r);
    free(ref);
}

static void latency(const char *pn, double lat_ms, uint32_t prompt)
{
    errbuf e = {{0}};
    secinf_opts o = {.model = &M,
                     .weights = L,
                     .tokens = ids,
                     .n_tokens = prompt + 1,
                     .prefill = prompt,
                     .latency_ns = (uint64_t)(lat_ms * 1e6)};
    proto_cfg_default(pn, &o.cfg, &e);
    uint64_t over = 0;
    secinf_result r;
    if (valid_round_ns(&o.cfg, o.latency_ns, NULL, 0, &over, &e) || secinf_run(&o, &r, &e)) {
        fprintf(stderr, "bench_validate: %s\n", e.msg);
        return;
    }
    net_cfg net;
    net_uniform(&net, (int)r.n_parties, o.latency_ns + over, 10e9);
    machine_profile mach;
    machine_default(&mach);
    for (uint32_t s = 0; s < r.n_steps; s++) {
        valid_row row;
        if (valid_step(&o, &r, s, &net, &mach, &row, &e)) {
            fprintf(stderr, "bench_validate: %s\n", e.msg);
            break;
        }
        printf("latency    %-6s %4.1f ms link %-20s rounds %4llu (%s), predicted %8.1f ms, "
               "measured %8.1f ms, "
               "error %+6.1f %%\n",
               pn, lat_ms, row.item, (unsigned long long)row.meas.rounds,
               row.ops_mismatched ? "MISMATCH" : "bytes+rounds exact", row.pred_ns * 1e-6,
               row.meas_ns * 1e-6, valid_err_pct(row.pred_ns, row.meas_ns));
    }
    printf("latency    %-6s probe: %.1f us per round beyond the injected latency\n", pn,
           over * 1e-3);
    secinf_result_free(&r);
}

int main(void)
{
    if (setup())
        return 1;
    int quick = getenv("MPCSIM_BENCH_QUICK") != NULL;
    uint32_t gen = quick ? 8 : 64, acc = quick ? 16 : 256;
    printf("# stories260K on the real backend, parties forked on 127.0.0.1 (2 cores)\n");
    generation("semi2k", 16, gen);
    generation("aby3", 16, gen);
    accuracy("semi2k", "puma", acc);
    accuracy("semi2k", "sigmoid", acc);
    accuracy("aby3", "sigmoid", acc);
    latency("semi2k", 1.0, 16);
    latency("aby3", 1.0, 16);
    llama_free(L);
    return 0;
}
