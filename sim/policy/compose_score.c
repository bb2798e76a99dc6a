/* compose_score.c — the random block's plain score (compose.c): a number per entry from a
 * public seed; the pyramid's per-layer budgets; the KV heads' sum of a score row on shares. */
#include "compose_int.h"

#include <stdio.h>

/* A uniform number in [0, 1) from (seed, layer, head, position) (splitmix64). */
float compose_rnd(uint64_t seed, uint32_t l, uint32_t g, uint32_t j)
{
    uint64_t z = seed ^ ((uint64_t)l << 48) ^ ((uint64_t)g << 32) ^ j;
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * 0x1p-24f;
}

/* The pyramid's top-k entries of layer l of L (PyramidKV, Zefan-Cai/KVCache-Factory
 * pyramidkv_utils.py PyramidKVCluster, as sim/policy/policy_pyramidkv.c): C the mean capacity,
 * w the kept sinks and window, integer divisions as the Python code; UINT32_MAX: none. */
uint32_t compose_pyramid_k(int64_t P, int64_t C, int64_t w, int64_t beta, int64_t L, int64_t l)
{
    if (P < C)
        return UINT32_MAX;
    if (P < 2 * (C - w))
        return C > w ? (uint32_t)(C - w) : 0;
    int64_t lo = (C - w) / beta, hi = 2 * (C - w) - lo;
    if (hi >= P - w) {
        hi = P - w;
        lo = 2 * (C - w) - hi;
    }
    int64_t step = L > 1 ? (hi - lo) / (L - 1) : 0, b = hi - l * step;
    return b < 0 ? 0 : (uint32_t)b;
}

uint32_t compose_heads_sum(opb *b, uint32_t x, uint32_t Hkv, uint32_t n, const char *nm)
{
    char s[48];
    snprintf(s, sizeof s, "%.40s_sum", nm);
    return opb_transpose(b, opb_colsum(b, x, 1, Hkv, n, s), 1, n, 1, nm);
}
