/* compose_score.c — the random block's plain score (compose.c): a number per entry from a
 * public seed. */
#include "compose_int.h"

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
