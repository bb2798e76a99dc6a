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
    if (rc) {
        free(s);
        return rc;
    }
    *st = s;
    return MS_OK;
}

static void sl_fini(void *st) { free(st); }

static unsigned sl_needs(void *st, uint32_t pos) { return 0; }

static int sl_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     errbuf *e)
{
    const sl_state *s = st;
    uint8_t *row = keep;
    if ((uint64_t)pos <= (uint64_t)s->sink + s->recent) {
        memset(row, 1, pos);
    } else {
        memset(row, 0, pos);
        memset(row, 1, s->sink);
        memset(row + pos - s->recent, 1, s->recent);
    }
    for (uint32_t g = 1; g < s->n_kv; g++)
        memcpy(keep + (size_t)g * pos, row, pos);
    return MS_OK;
}

static uint32_t sl_count(void *st, uint32_t layer, uint32_t pos)
{
    const sl_state *s = st;
    return (uint64_t)pos <= (uint64_t)s->sink + s->recent ? pos : s->sink + s->recent;
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
    .metric_stride = "16",
    .stateless_select = 1,
};
