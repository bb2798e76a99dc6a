/* bench_replay.c — policy replay throughput and memory.
 *
 * Each configuration runs in its own child process so its peak resident memory is its own:
 *   stories260K recorded over tests/data/tinystories_sample.txt (P = 192, 64 decode steps),
 *     every policy, attention metrics every step plus the model run with the policy applied;
 *   a synthetic llama-2-7b trace at 4K and 32K context, the policies whose selection streams
 *     (no O(T²) prompt attention), metric_stride 0 (the replay's own cost) and, at 4K, one
 *     configuration with attention metrics every 4th step.
 * steps/s counts the steps after the first (the first also moves a synthetic trace's query
 * stream to the prompt's end). Prints figures; never fails on timing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/policy/policy.h"
#include "sim/replay/replay.h"
#include "sim/scenario/runner.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct bench {
    const char *model, *source, *policy;
    uint32_t ctx, steps;
    const char *params[8]; /* key, value pairs, NULL-terminated */
} bench;

static int run_one(const bench *b)
{
    run_cfg *c = calloc(1, sizeof *c);
    errbuf e;
    if (!c || model_load(b->model, &c->model, &e) != MS_OK) {
        fprintf(stderr, "%s\n", c ? e.msg : "out of memory");
        return 1;
    }
    snprintf(c->model_ref, sizeof c->model_ref, "%s", b->model);
    snprintf(c->trace.source, sizeof c->trace.source, "%s", b->source);
    const char *d = getenv("MPCSIM_DATA");
    snprintf(c->trace.path, sizeof c->trace.path, "%s/tests/data/tinystories_sample.txt",
             d ? d : ".");
    snprintf(c->policy.name, sizeof c->policy.name, "%s", b->policy);
    for (int i = 0; b->params[i]; i += 2) {
        kv_param *p = &c->policy.params[c->policy.n_params++];
        snprintf(p->key, sizeof p->key, "%s", b->params[i]);
        snprintf(p->val, sizeof p->val, "%s", b->params[i + 1]);
    }
    c->work.prompt_len = b->ctx - b->steps;
    c->work.decode_len = b->steps;
    c->seed = 1;
    double t0 = now();
    replay *r;
    op_program prog;
    op_program_init(&prog);
    size_t nk = (size_t)c->model.n_layers * c->model.n_kv_heads;
    uint32_t *kept = calloc(nk, sizeof *kept);
    int rc = replay_open(c, &r, &e);
    if (!rc)
        rc = replay_prefill(r, &prog, &e);
    double t1 = now(), t1b = t1;
    size_t ops = 0;
    uint64_t kept_sum = 0;
    for (uint32_t s = 0; !rc && s < b->steps; s++) {
        op_program_clear(&prog);
        rc = replay_step(r, s, c->work.prompt_len + s, kept, &prog, &e);
        ops += prog.n_ops;
        if (s == 0)
            t1b = now(); /* the first step also moves a synthetic query stream to P */
    }
    double t2 = now();
    run_result res;
    run_result_init(&res);
    metric_sink sink = run_result_sink(&res);
    if (!rc)
        rc = replay_metrics(r, &sink, &e);
    double t3 = now();
    if (rc) {
        fprintf(stderr, "%s: %s\n", b->policy, e.msg);
        return 1;
    }
    for (size_t i = 0; i < nk; i++)
        kept_sum += kept[i];
    double recall = -1;
    for (size_t i = 0; i < res.n_metric; i++)
        if (!strcmp(res.metric[i].name, "attn_mass_recall"))
            recall = res.metric[i].value;
    printf("%-11s %-13s ctx %6u  open+prompt %7.2f s  first step %6.2f s  %8.2f steps/s  "
           "end metrics %6.2f s  kept/head %7.1f  policy ops/step %5.1f  recall %s%.4f\n",
           b->model, b->policy, b->ctx, t1 - t0, t1b - t1,
           b->steps > 1 ? (b->steps - 1) / (t2 - t1b) : 1.0 / (t2 - t1), t3 - t2,
           (double)kept_sum / (double)nk, (double)ops / b->steps, recall < 0 ? "n/a " : "",
           recall < 0 ? 0.0 : recall);
    fflush(stdout);
    run_result_free(&res);
    op_program_free(&prog);
    free(kept);
    replay_close(r);
    free(c);
    return 0;
}

int main(void)
{
    static const bench list[] = {
        {"stories260K", "record", "full", 256, 64, {NULL}},
        {"stories260K", "record", "streamingllm", 256, 64, {"recent", "60", NULL}},
        {"stories260K", "record", "h2o", 256, 64, {NULL}},
        {"stories260K", "record", "tova", 256, 64, {"cache_size", "64", NULL}},
        {"stories260K", "record", "snapkv", 256, 64, {"capacity", "64", NULL}},
        {"stories260K", "record", "pyramidkv", 256, 64, {"capacity", "64", NULL}},
        {"stories260K", "record", "quest", 256, 64, {"budget", "64", NULL}},
        {"stories260K", "record", "mpcache", 256, 64, {NULL}},
        {"stories260K", "record", "criticalkv", 256, 64, {"capacity", "64", NULL}},
        {"stories260K", "record", "comet", 256, 64, {NULL}},
        {"llama-2-7b", "synth", "streamingllm", 4096, 32, {"metric_stride", "0", NULL}},
        {"llama-2-7b", "synth", "quest", 4096, 32, {"metric_stride", "0", NULL}},
        {"llama-2-7b",
         "synth",
         "mpcache",
         4096,
         32,
         {"static", "none", "metric_stride", "0", NULL}},
        {"llama-2-7b", "synth", "snapkv", 4096, 32, {"metric_stride", "0", NULL}},
        {"llama-2-7b", "synth", "quest", 4096, 8, {"metric_stride", "4", NULL}},
        {"llama-2-7b", "synth", "streamingllm", 32768, 4, {"metric_stride", "0", NULL}},
        {"llama-2-7b", "synth", "quest", 32768, 4, {"budget", "4096", "metric_stride", "0", NULL}},
        {"llama-2-7b",
         "synth",
         "mpcache",
         32768,
         4,
         {"static", "none", "metric_stride", "0", NULL}},
    };
    printf("policy replay: steps/s = decode steps replayed per second (all layers and heads), "
           "peak = the configuration's own peak RSS\n");
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            _exit(run_one(&list[i]));
        int status;
        struct rusage ru;
        if (pid < 0 || wait4(pid, &status, 0, &ru) < 0)
            return 1;
        printf("%*s peak %ld MB%s\n", 12, "", ru.ru_maxrss / 1024,
               WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "" : "  (failed)");
    }
    return 0;
}
