/* synth_kern.h — the inner loops of the synthetic attention row (synth_kern.c), used by
 * synth.c: the keys' content sign words, the content logits from per-byte tables, and the
 * softmax. Each has a portable version and an AVX-512 one picked at run time; the two give
 * bit-identical results (the same float operations in the same order on every entry), so a
 * trace does not depend on the machine that generates it (tests/check_trace.c compares). */
#ifndef MPCSIM_SYNTH_KERN_H
#define MPCSIM_SYNTH_KERN_H

#include <stddef.h>
#include <stdint.h>

/* Keys whose sign words are hashed together before the lookups. */
#define SYNTH_BLOCK 256

/* splitmix64's finaliser: the counter-based streams of the synthetic source. */
static inline uint64_t synth_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Nonzero: the portable loops even where AVX-512 runs (tests compare the two). */
extern int trace_synth_portable_kernel;
/* 1 when the AVX-512 loops are in use (the CPU has AVX-512 F and DQ and
 * trace_synth_portable_kernel is 0). */
int synth_kern_wide(void);

/* Sign words of keys j0..j0+nj of one KV head's key stream: word k of key j,
 * wb[k·ws + j − j0], is mix64(mix64(prefix ^ j) + (k + 1)·golden), k < nw. The wide loop also
 * writes the words of the keys up to the next multiple of 8 past nj (each key's own words), so
 * ws ≥ nj rounded up to 8. */
void synth_kern_words(uint64_t prefix, uint32_t j0, uint32_t nj, uint32_t nw, size_t ws,
                      uint64_t *wb);

/* The base logits of one KV head's row: key j's is loc[j], plus heavy when bit j of hb is set,
 * plus sink when j < n_sinks, added in that order in float. */
typedef struct synth_base {
    const float *loc;   /* the locality logit of each key (at the row's distance) */
    const uint64_t *hb; /* heavy-hitter bitmap, bit j of word j/64 */
    float heavy, sink;
    uint32_t n_sinks;
} synth_base;

/* Logits of keys j0..j0+nj for one query head: row[j − j0] = base(j) + Σ_k S_k(j), the words
 * (wb[k·ws + j − j0]) added one by one, S_k the sum of the byte tables' entries of word k's
 * bytes (nb bytes in all, the last word's may be fewer than 8). nib holds per byte the two
 * nibble tables (16 floats for bits 0–3, then 16 for bits 4–7); a byte's table entry is
 * hi[v >> 4] + lo[v & 15] in float. tab (the byte tables built from them, 256 floats per byte)
 * is read by the portable loop only and may be NULL when synth_kern_wide(). j0 is a multiple of
 * 16; the wide loop reads words up to the next multiple of 16 past nj (and ignores them).
 * Returns the largest of the nj logits. */
float synth_kern_lookup(const synth_base *base, uint32_t j0, const uint64_t *wb, size_t ws,
                        uint32_t nj, uint32_t nw, uint32_t nb, const float *nib, const float *tab,
                        float *row);

/* One key's content signs: kc[i] = ±sk, + where bit i mod 64 of word i/64 (w[(i/64)·ws]) is
 * set, i < dc. */
void synth_kern_signs(const uint64_t *w, size_t ws, uint32_t dc, float sk, float *kc);

/* One position's values of a KV head: v[i] = (Σ of the four 16-bit fields of
 * mix64(st + (i + 1)·golden) − 131070) · scale in float, i < d (Irwin–Hall(4) draws). */
void synth_kern_values(uint64_t st, uint32_t d, float scale, float *v);

/* Softmax of a row in place: max, e^(x − max) (trace_synth_exp_neg), a float sum per block
 * of 64 entries in four lanes added up in double, one reciprocal. */
void synth_kern_softmax(float *row, uint32_t n);
/* The same with the row's max already known (mx: the largest of row[0..n)). */
void synth_kern_softmax_max(float *row, uint32_t n, float mx);

#endif
