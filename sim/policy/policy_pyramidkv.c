/* policy_pyramidkv.c — PyramidKV (Zefan-Cai/KVCache-Factory, pyramidkv/pyramidkv_utils.py
 * PyramidKVCluster): SnapKV's scoring with a per-layer budget that shrinks linearly with depth.
 *
 *   C = capacity (average per layer, incl. window), w = window, L layers, beta = 20
 *   P <  C           : no compression
 *   P <  2(C - w)    : SnapKV with C for every layer
 *   otherwise        : min = (C-w)/beta, max = 2(C-w) - min; if max >= P-w: max = P-w,
 *                      min = 2(C-w) - max; step = (max-min)/(L-1);
 *                      layer l keeps topk(score, max - l·step) ∪ window
 * Integer divisions as the Python code (`//`). Defaults: KVCache-Factory run_longbench.py
 * (window 8, kernel 7, maxpool); capacity 1024 as snapkv. */
#include <stdlib.h>

#include "policy.h"

static const policy_param pyr_params[] = {
    {"window", "8", "observation window (KVCache-Factory run_longbench.py window_sizes)", NULL, 1,
     1e9, 1},
    {"kernel", "7", "pooling kernel (kernel_sizes)", NULL, 1, 1e6, 0},
    {"pooling", "maxpool", "pooling of the votes", "maxpool|avgpool", 0, 0, 0},
    {"capacity", "1024", "average kept prompt entries per layer incl. the window", NULL, 1, 1e9, 1},
    {"beta", "20", "pyramid steepness: the top layer keeps (C-w)/beta", NULL, 1, 1e6, 1},
};

/* Per-layer budget (non-window entries), UINT32_MAX for no compression. */
static uint32_t pyr_budget(int64_t P, int64_t C, int64_t w, int64_t beta, int64_t L, int64_t l)
{
    if (P < C)
        return UINT32_MAX;
    if (P < 2 * (C - w))
        return C > w ? (uint32_t)(C - w) : 0;
    int64_t min_num = (C - w) / beta;
    int64_t max_num = 2 * (C - w) - min_num;
    if (max_num >= P - w) {
        max_num = P - w;
        min_num = 2 * (C - w) - max_num;
    }
    int64_t steps = L > 1 ? (max_num - min_num) / (L - 1) : 0;
    int64_t b = max_num - l * steps;
    return b < 0 ? 0 : (uint32_t)b;
}

static int pyr_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    uint32_t beta, w, cap;
    int rc = policy_arg_u32(&policy_pyramidkv, a, "beta", &beta, e);
    if (!rc)
        rc = policy_arg_u32(&policy_pyramidkv, a, "window", &w, e);
    if (!rc)
        rc = policy_arg_u32(&policy_pyramidkv, a, "capacity", &cap, e);
    snap_args sa;
    if (!rc) /* kv_budget's capacity (its mean over the layers) */
        rc = snap_args_read(&policy_pyramidkv, a, env->prompt_len, &sa, e);
    if (!rc)
        rc = snapkv_state_new(&policy_pyramidkv, env, a, st, e);
    if (rc)
        return rc;
    cap = sa.capacity;
    if (w > env->prompt_len)
        w = env->prompt_len;
    for (uint32_t l = 0; l < env->n_layers; l++)
        snapkv_set_budget(*st, l, pyr_budget(env->prompt_len, cap, w, beta, env->n_layers, l));
    return MS_OK;
}

const policy_ops policy_pyramidkv = {
    .name = "pyramidkv",
    .summary = "SnapKV scoring with a pyramid of per-layer budgets (more in lower layers)",
    .params = pyr_params,
    .n_params = sizeof pyr_params / sizeof pyr_params[0],
    .init = pyr_init,
    SNAPKV_OPS,
};
