/* compose_score.c — the plain score functions of the composition's blocks (compose.c): SnapKV's
 * pooling of window votes, the seeded random score, Quest's page bound. */
#include <math.h>

#include "compose_int.h"

/* 1-D pooling, stride 1, padding kernel/2: max pads with -inf, avg counts the pad as zeros (as
 * SnapKV's max_pool1d / avg_pool1d with count_include_pad). */
void compose_pool1d(const float *in, float *out, uint32_t n, uint32_t kernel, int maxpool)
{
    int half = (int)kernel / 2;
    for (int j = 0; j < (int)n; j++) {
        float acc = maxpool ? -INFINITY : 0.0f;
        for (int t = j - half; t <= j + half && t < j - half + (int)kernel; t++) {
            if (t < 0 || t >= (int)n)
                continue;
            if (maxpool)
                acc = in[t] > acc ? in[t] : acc;
            else
                acc += in[t];
        }
        out[j] = maxpool ? acc : acc / (float)kernel;
    }
}

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

/* Quest's page score U_p = Σ_h Σ_i max(q_i·m_p[i], q_i·M_p[i]) over the query heads of g. */
float compose_bound_score(const float *q, const float *mx, const float *mn, uint32_t g, uint32_t G,
                          uint32_t d)
{
    float u = 0;
    for (uint32_t h = g * G; h < (g + 1) * G; h++) {
        const float *qh = q + (size_t)h * d;
        for (uint32_t i = 0; i < d; i++) {
            float a = qh[i] * mx[i], b = qh[i] * mn[i];
            u += a > b ? a : b;
        }
    }
    return u;
}
