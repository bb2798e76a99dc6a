/* policy_streamingllm.c — attention sinks + recent window (mit-han-lab/streaming-llm,
 * streaming_llm/kv_cache.py StartRecentKVCache): keep [0, sink) ∪ [T-recent, T) of the T cached
 * entries, the same positions for every layer and head. Positions are public, so the policy
 * costs no MPC work: the kept rows are a public slice of the cache. */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static const policy_param sl_params[] = {
    {"sink", "4", "attention-sink tokens kept at the start (start_size)", NULL, 0, 1e9, 1},
    {"recent", "512", "most recent tokens kept (recent_size; class default 512, CLI 2000)", NULL, 0,
     1e9, 1},
};

typedef struct sl_state {
    uint32_t n_kv, sink, recent;
    double frac; /* kv_budget F, or 0: sink + recent = round(F·T) of the T cached entries */
} sl_state;

static int sl_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    sl_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy streamingllm: out of memory");
    s->n_kv = env->n_kv_heads;
    int rc = policy_arg_u32(&policy_streamingllm, a, "sink", &s->sink, e);
    if (!rc)
        rc = policy_arg_u32(&policy_streamingllm, a, "recent", &s->recent, e);
    if (!rc)
        rc = policy_kv_budget(&policy_streamingllm, a, &s->frac, e);
    if (rc) {
        free(s);
        return rc;
    }
    *st = s;
    return MS_OK;
}

static void sl_fini(void *st) { free(st); }

static unsigned sl_needs(void *st, uint32_t pos) { return 0; }

/* The sink and recent counts at pos cached entries: the parameters, or under kv_budget F the
 * round(F·pos) entries, sinks first. */
static void sl_split(const sl_state *s, uint32_t pos, uint32_t *sink, uint32_t *recent)
{
    *sink = s->sink;
    *recent = s->recent;
    if (s->frac > 0) {
        uint32_t n = policy_budget_entries(s->frac, pos);
        *sink = n < s->sink ? n : s->sink;
        *recent = n - *sink;
    }
}

static int sl_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     errbuf *e)
{
    const sl_state *s = st;
    uint8_t *row = keep;
    uint32_t sink, recent;
    sl_split(s, pos, &sink, &recent);
    if ((uint64_t)pos <= (uint64_t)sink + recent) {
        memset(row, 1, pos);
    } else {
        memset(row, 0, pos);
        memset(row, 1, sink);
        memset(row + pos - recent, 1, recent);
    }
    for (uint32_t g = 1; g < s->n_kv; g++)
        memcpy(keep + (size_t)g * pos, row, pos);
    return MS_OK;
}

static uint32_t sl_count(void *st, uint32_t layer, uint32_t pos)
{
    uint32_t sink, recent;
    sl_split(st, pos, &sink, &recent);
    return (uint64_t)pos <= (uint64_t)sink + recent ? pos : sink + recent;
}

const policy_ops policy_streamingllm = {
    .name = "streamingllm",
    .summary = "attention sinks + recent window (public positions, no selection cost)",
    .params = sl_params,
    .n_params = sizeof sl_params / sizeof sl_params[0],
    .init = sl_init,
    .fini = sl_fini,
    .needs = sl_needs,
    .select = sl_select,
    .count = sl_count,
    .stateless_select = 1,
    .budget_keys = "recent",
};
