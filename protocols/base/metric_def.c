/* metric_def.c — the metric registry (see metric_def.h). */
#include "metric_def.h"

#include <string.h>

#define COST(n, u, d, m)       \
    {                          \
        n, u, MK_COST, d, 0, m \
    }
#define ACC(n, u, d, m)            \
    {                              \
        n, u, MK_ACCURACY, d, 0, m \
    }
#define POL(n, u, d, m)          \
    {                            \
        n, u, MK_POLICY, d, 0, m \
    }
#define SRV(n, u, d, m)           \
    {                             \
        n, u, MK_SERVING, d, 0, m \
    }

static const metric_def defs[] = {
    /* a run's cost (sim/scenario/runner.c) */
    COST("latency_prefill_s", "s", MD_LOWER, "simulated wall time of the prefill phase"),
    COST("latency_decode_s", "s", MD_LOWER, "simulated wall time of all decode steps"),
    COST("latency_per_token_s", "s", MD_LOWER, "decode time divided by the decoded tokens"),
    COST("ttft_s", "s", MD_LOWER, "time to the first token: the prefill, or the first decode step"),
    COST("latency_total_s", "s", MD_LOWER, "prefill plus decode time"),
    {"bytes_online_p", "B", MK_COST, MD_LOWER, 1,
     "bytes party N sends online, prefill and decode together"},
    COST("bytes_online", "B", MD_LOWER, "bytes all parties send online, prefill and decode"),
    COST("bytes_offline", "B", MD_LOWER, "preprocessing bytes of all parties, prefill and decode"),
    COST("rounds_prefill", "rounds", MD_LOWER, "communication rounds of the prefill"),
    COST("rounds_decode", "rounds", MD_LOWER, "communication rounds of all decode steps"),
    COST("compute_s", "s", MD_LOWER, "local compute time, prefill and decode"),
    COST("comm_s", "s", MD_LOWER, "communication time, prefill and decode"),
    COST("steps_simulated", "steps", MD_NONE, "decode steps costed one by one (the rest scaled)"),
    COST("latency_decode_step_s", "s", MD_LOWER, "time of one steady decode step"),
    COST("rounds_decode_step", "rounds", MD_LOWER,
         "communication rounds of one steady decode step"),
    COST("bytes_decode_step", "B", MD_LOWER, "bytes all parties send in one steady decode step"),
    COST("latency_one_time_s", "s", MD_LOWER,
         "time of the one-time decode work, apart from the steady steps"),
    /* accuracy against the full cache (sim/replay/metrics.c) */
    ACC("attn_mass_recall", "ratio", MD_HIGHER,
        "share of the full cache's attention mass on the kept entries"),
    ACC("topk_recall", "ratio", MD_HIGHER, "share of the full cache's top-k entries kept"),
    {"kept_frac", "ratio", MK_POLICY, MD_NONE, 0,
     "kept cache entries over the entries a full cache holds"},
    ACC("attn_out_rel_err", "ratio", MD_LOWER,
        "relative error of the attention output against the full cache"),
    ACC("attn_out_wo_rel_err", "ratio", MD_LOWER,
        "relative error of the attention output after the output projection"),
    ACC("logit_kl", "nats", MD_LOWER, "KL divergence of the next-token distribution from the full"),
    ACC("top1_agreement", "ratio", MD_HIGHER, "share of steps whose top token matches the full"),
    ACC("ppl_full", "ppl", MD_LOWER, "perplexity of the trace's tokens under the full cache"),
    ACC("ppl_policy", "ppl", MD_LOWER, "perplexity of the trace's tokens under the policy"),
    ACC("ppl_delta", "ppl", MD_LOWER, "perplexity under the policy minus under the full cache"),
    /* a policy's own counters (sim/policy) */
    POL("comet_ffn_active_frac", "ratio", MD_NONE, "Comet: FFN blocks computed over blocks seen"),
    POL("comet_kv_refills", "entries", MD_NONE, "Comet: skipped tokens' KV entries refilled"),
    POL("comet_refill_ops", "ops", MD_NONE, "Comet: ops of the KV refills"),
    /* a serving run (sim/cli/cmd_serve.c, table serve_metrics) */
    SRV("ttft_p50", "s", MD_LOWER, "median time to first token over the requests"),
    SRV("ttft_p90", "s", MD_LOWER, "90th percentile time to first token"),
    SRV("ttft_p99", "s", MD_LOWER, "99th percentile time to first token"),
    SRV("ttft_mean", "s", MD_LOWER, "mean time to first token"),
    SRV("tpot_mean", "s", MD_LOWER, "mean time per output token after the first"),
    SRV("tpot_p50", "s", MD_LOWER, "median time per output token after the first"),
    SRV("throughput_tokens", "tok/s", MD_HIGHER, "output tokens per second of the makespan"),
    SRV("throughput_requests", "req/s", MD_HIGHER, "finished requests per second of the makespan"),
    SRV("makespan", "s", MD_LOWER, "first arrival to last finish"),
    SRV("token_hit_rate", "", MD_HIGHER, "fraction of prompt tokens served from shared spans"),
    SRV("request_hit_rate", "", MD_HIGHER, "fraction of requests with a shared-span hit"),
    SRV("online_bytes", "B", MD_LOWER, "bytes all parties send online over the run"),
    SRV("rounds", "", MD_LOWER, "communication rounds over the run (count)"),
    SRV("offline_bytes", "B", MD_LOWER, "preprocessing bytes over the run"),
    SRV("bytes_saved", "B", MD_HIGHER, "online bytes the shared spans saved"),
    SRV("rounds_saved", "", MD_HIGHER, "communication rounds the shared spans saved (count)"),
    SRV("rerotate_tokens", "", MD_NONE, "tokens of moved spans re-rotated (count)"),
    SRV("rerotate_bytes", "B", MD_LOWER, "bytes sent to re-rotate moved spans"),
    SRV("cache_peak_tokens", "", MD_NONE, "peak tokens in the shared-span cache (count)"),
    SRV("cache_peak_bytes_per_party", "B", MD_NONE, "peak shared-span cache bytes per party"),
    SRV("evicted_tokens", "", MD_NONE, "tokens evicted from the shared-span cache (count)"),
    SRV("steps", "", MD_NONE, "server steps (batches) over the run (count)"),
};

/* name is base followed by a party index: base, then digits only */
static int party_name(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) || !name[n])
        return 0;
    for (const char *c = name + n; *c; c++)
        if (*c < '0' || *c > '9')
            return 0;
    return 1;
}

const metric_def *metric_def_find(const char *name)
{
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (defs[i].per_party ? party_name(name, defs[i].name) : !strcmp(name, defs[i].name))
            return &defs[i];
    return NULL;
}

const metric_def *metric_defs(size_t *n)
{
    *n = sizeof defs / sizeof defs[0];
    return defs;
}

const char *metric_kind_name(metric_kind k)
{
    static const char *const nm[] = {"cost", "accuracy", "policy", "serving"};
    return (unsigned)k < sizeof nm / sizeof nm[0] ? nm[k] : "?";
}

const char *metric_dir_name(metric_dir d)
{
    static const char *const nm[] = {"none", "lower", "higher"};
    return (unsigned)d < sizeof nm / sizeof nm[0] ? nm[d] : "?";
}
