/* synth_kern.c — the synthetic attention row's inner loops (synth_kern.h).
 *
 * A 7B-shaped row costs, per (query head, key): two splitmix64 hashes for the key's 62 content
 * signs, eight byte-table lookups, the base term and one exp. The portable loops do these one
 * key at a time (the exp four lanes at a time); the AVX-512 loops sixteen keys at a time:
 * the hashes with 64-bit vector multiplies (AVX-512 DQ), a byte's table entry as two 16-entry
 * register permutes (the nibble tables, one vpermps each) added in float — the very sum that
 * built the byte table — and the exp on sixteen lanes. Every entry goes through the same float
 * operations in the same order on both paths, so their rows are bit-identical; gcc compiles
 * C11 without contracting a·b + c into an FMA (-ffp-contract=off in ISO C modes), which keeps
 * the exp's polynomial the same on both. */
#include "synth_kern.h"

#include "protocols/base/simd.h"
#include "synth_impl.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SYNTH_X86 1
#include <immintrin.h>
#endif

int trace_synth_portable_kernel;

int synth_kern_wide(void) { return !trace_synth_portable_kernel && ms_cpu_has(MS_CPU_AVX512DQ); }

/* ---- e^x ---------------------------------------------------------------------------------
 * e^x for x ≤ 0, four lanes at a time (GCC/Clang vector extensions: SSE2 on x86-64,
 * NEON elsewhere): x = n·ln2 + r with |r| ≤ ln2/2 (n rounded by the 1.5·2²³ trick,
 * Cody–Waite split of ln2), e^r by its degree-7 Taylor polynomial (truncation r⁸/8! < 5.2e-9,
 * under 0.1 float ulp), 2^n put into the exponent bits: within 2 float ulps of expf
 * (tests/check_trace.c). Below ln FLT_MIN = −87.33654, where expf is subnormal, it gives 0. */
static inline v4f v4f_set(float x) { return (v4f){x, x, x, x}; }

#define EXP_LO (-87.33654f)
#define EXP_LOG2E 1.44269504f
#define EXP_ROUND 12582912.0f
#define EXP_LN2_HI 0.693145752f /* n·hi is exact */
#define EXP_LN2_LO 1.42860677e-6f

static inline v4f exp_neg4(v4f x)
{
    v4i ok = x >= v4f_set(EXP_LO);
    v4f xc = (v4f)(((v4i)x & ok) | ((v4i)v4f_set(EXP_LO) & ~ok));
    v4f n = (xc * v4f_set(EXP_LOG2E) + v4f_set(EXP_ROUND)) - v4f_set(EXP_ROUND);
    v4f r = xc - n * v4f_set(EXP_LN2_HI);
    r = r - n * v4f_set(EXP_LN2_LO);
    v4f p = v4f_set(1.0f / 5040);
    p = p * r + v4f_set(1.0f / 720);
    p = p * r + v4f_set(1.0f / 120);
    p = p * r + v4f_set(1.0f / 24);
    p = p * r + v4f_set(1.0f / 6);
    p = p * r + v4f_set(0.5f);
    p = p * r + v4f_set(1.0f);
    p = p * r + v4f_set(1.0f);
    v4i bits = (__builtin_convertvector(n, v4i) + 127) << 23;
    return (v4f)((v4i)(p * (v4f)bits) & ok);
}

float trace_synth_exp_neg(float x)
{
    v4f v = exp_neg4(v4f_set(x));
    return v[0];
}

/* ---- portable loops ----------------------------------------------------------------------- */

static void words_portable(uint64_t prefix, uint32_t j0, uint32_t nj, uint32_t nw, size_t ws,
                           uint64_t *wb)
{
    for (uint32_t j = 0; j < nj; j++) {
        uint64_t st = synth_mix64(prefix ^ (j0 + j));
        for (uint32_t k = 0; k < nw; k++) {
            st += 0x9E3779B97F4A7C15ull;
            wb[(size_t)k * ws + j] = synth_mix64(st);
        }
    }
}

static float lookup_portable(const synth_base *bs, uint32_t j0, const uint64_t *wb, size_t ws,
                             uint32_t nj, uint32_t nw, uint32_t nb, const float *tab, float *row)
{
    for (uint32_t j = 0; j < nj; j++) {
        uint32_t key = j0 + j;
        float x = bs->loc[key];
        if (bs->hb[key / 64] >> (key % 64) & 1)
            x += bs->heavy;
        if (key < bs->n_sinks)
            x += bs->sink;
        row[j] = x;
    }
    for (uint32_t k = 0; k < nw; k++) {
        const float *tk = tab + (size_t)8 * k * 256;
        const uint64_t *wk = wb + (size_t)k * ws;
        uint32_t bytes = nb - 8 * k < 8 ? nb - 8 * k : 8;
        if (bytes == 8)
            for (uint32_t j = 0; j < nj; j++) {
                uint64_t x = wk[j];
                float a0 = tk[x & 0xff] + tk[256 + (x >> 8 & 0xff)];
                float a1 = tk[512 + (x >> 16 & 0xff)] + tk[768 + (x >> 24 & 0xff)];
                float a2 = tk[1024 + (x >> 32 & 0xff)] + tk[1280 + (x >> 40 & 0xff)];
                float a3 = tk[1536 + (x >> 48 & 0xff)] + tk[1792 + (x >> 56)];
                row[j] += (a0 + a1) + (a2 + a3);
            }
        else
            for (uint32_t j = 0; j < nj; j++) {
                uint64_t x = wk[j];
                float acc = 0;
                for (uint32_t b = 0; b < bytes; b++)
                    acc += tk[256 * b + (x >> (8 * b) & 0xff)];
                row[j] += acc;
            }
    }
    float mx = row[0];
    for (uint32_t j = 1; j < nj; j++)
        mx = row[j] > mx ? row[j] : mx;
    return mx;
}

static void signs_portable(const uint64_t *w, size_t ws, uint32_t dc, float sk, float *kc)
{
    for (uint32_t i0 = 0; i0 < dc; i0 += 64) {
        uint64_t bits = w[(size_t)(i0 / 64) * ws];
        uint32_t n = dc - i0 < 64 ? dc - i0 : 64;
        for (uint32_t i = 0; i < n; i++)
            kc[i0 + i] = sk * (float)((int)(bits >> i & 1) * 2 - 1);
    }
}

static void values_portable(uint64_t st, uint32_t d, float scale, float *v)
{
    for (uint32_t i = 0; i < d; i++) {
        st += 0x9E3779B97F4A7C15ull;
        uint64_t b = synth_mix64(st);
        uint32_t sum = (uint32_t)(b & 0xffff) + (uint32_t)(b >> 16 & 0xffff) +
                       (uint32_t)(b >> 32 & 0xffff) + (uint32_t)(b >> 48);
        v[i] = ((float)sum - 131070.0f) * scale;
    }
}

/* The row's max, four lanes at a time. */
static float max_portable(const float *row, uint32_t n)
{
    uint32_t n4 = n / 4 * 4, j;
    float mx = row[0];
    v4f m4 = v4f_set(row[0]);
    for (j = 0; j < n4; j += 4) {
        v4f x;
        memcpy(&x, row + j, sizeof x);
        v4i gt = x > m4;
        m4 = (v4f)(((v4i)x & gt) | ((v4i)m4 & ~gt));
    }
    for (int i = 0; i < 4; i++)
        mx = m4[i] > mx ? m4[i] : mx;
    for (; j < n; j++)
        mx = row[j] > mx ? row[j] : mx;
    return mx;
}

/* row[j] = e^(row[j] − mx) for j < n4 (a multiple of 4). */
static void exp_portable(float *row, uint32_t n4, float mx)
{
    v4f mv = v4f_set(mx);
    for (uint32_t j = 0; j < n4; j += 4) {
        v4f x;
        memcpy(&x, row + j, sizeof x);
        x = exp_neg4(x - mv);
        memcpy(row + j, &x, sizeof x);
    }
}

/* Σ row[0..n4) as the softmax adds it: per block of 64 entries four float lanes (lane r sums
 * entries ≡ r mod 4 in order), the lanes added in double, the blocks in order. Four blocks at
 * a time, so the dependent float adds of one block overlap with the next three's. */
static double sum_blocks(const float *row, uint32_t n4)
{
    double sum = 0;
    uint32_t j = 0;
    for (; j + 256 <= n4; j += 256) {
        v4f a0 = v4f_set(0), a1 = a0, a2 = a0, a3 = a0;
        for (uint32_t i = 0; i < 64; i += 4) {
            v4f x0, x1, x2, x3;
            memcpy(&x0, row + j + i, sizeof x0);
            memcpy(&x1, row + j + 64 + i, sizeof x1);
            memcpy(&x2, row + j + 128 + i, sizeof x2);
            memcpy(&x3, row + j + 192 + i, sizeof x3);
            a0 += x0;
            a1 += x1;
            a2 += x2;
            a3 += x3;
        }
        sum += (double)a0[0] + a0[1] + a0[2] + a0[3];
        sum += (double)a1[0] + a1[1] + a1[2] + a1[3];
        sum += (double)a2[0] + a2[1] + a2[2] + a2[3];
        sum += (double)a3[0] + a3[1] + a3[2] + a3[3];
    }
    while (j < n4) {
        v4f acc = v4f_set(0);
        for (uint32_t end = j + 64 < n4 ? j + 64 : n4; j < end; j += 4) {
            v4f x;
            memcpy(&x, row + j, sizeof x);
            acc += x;
        }
        sum += (double)acc[0] + acc[1] + acc[2] + acc[3];
    }
    return sum;
}

static void scale_portable(float *row, uint32_t n4, float inv)
{
    v4f iv = v4f_set(inv);
    for (uint32_t j = 0; j < n4; j += 4) {
        v4f x;
        memcpy(&x, row + j, sizeof x);
        x *= iv;
        memcpy(row + j, &x, sizeof x);
    }
}

/* ---- AVX-512 loops -------------------------------------------------------------------------- */

#ifdef SYNTH_X86
#define WIDE __attribute__((target("avx512f,avx512dq")))

WIDE static inline __m512i mix64_8(__m512i z)
{
    z = _mm512_add_epi64(z, _mm512_set1_epi64((long long)0x9E3779B97F4A7C15ull));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                           _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ull));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                           _mm512_set1_epi64((long long)0x94D049BB133111EBull));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* Eight keys per vector; the last vector may run past nj, into the block's own slots. */
WIDE static void words_wide(uint64_t prefix, uint32_t j0, uint32_t nj, uint32_t nw, size_t ws,
                            uint64_t *wb)
{
    const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    const __m512i golden = _mm512_set1_epi64((long long)0x9E3779B97F4A7C15ull);
    const __m512i pre = _mm512_set1_epi64((long long)prefix);
    for (uint32_t j = 0; j < nj; j += 8) {
        __m512i pos = _mm512_add_epi64(_mm512_set1_epi64((long long)(j0 + j)), lane);
        __m512i st = mix64_8(_mm512_xor_si512(pre, pos));
        for (uint32_t k = 0; k < nw; k++) {
            st = _mm512_add_epi64(st, golden);
            _mm512_storeu_si512((void *)(wb + (size_t)k * ws + j), mix64_8(st));
        }
    }
}

/* sk·(±1) is ±sk exactly: a blend of the two by the word's bits, sixteen signs at a time. */
WIDE static void signs_wide(const uint64_t *w, size_t ws, uint32_t dc, float sk, float *kc)
{
    const __m512 pos = _mm512_set1_ps(sk), neg = _mm512_set1_ps(-sk);
    for (uint32_t i0 = 0; i0 < dc; i0 += 64) {
        uint64_t bits = w[(size_t)(i0 / 64) * ws];
        for (uint32_t q = 0; q < 64 && i0 + q < dc; q += 16) {
            uint32_t n = dc - i0 - q;
            __mmask16 m = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
            _mm512_mask_storeu_ps(kc + i0 + q, m,
                                  _mm512_mask_blend_ps((__mmask16)(bits >> q), neg, pos));
        }
    }
}

/* Sixteen values at a time: two vectors of eight hashes, their 16-bit fields summed in 64-bit
 * lanes (under 2^18, so the conversion to float is exact), then values_portable's two float
 * operations. */
WIDE static __m256 value_sums(__m512i b)
{
    const __m512i m16 = _mm512_set1_epi64(0xffff);
    __m512i s =
        _mm512_add_epi64(_mm512_and_si512(b, m16), _mm512_and_si512(_mm512_srli_epi64(b, 16), m16));
    s = _mm512_add_epi64(s, _mm512_and_si512(_mm512_srli_epi64(b, 32), m16));
    s = _mm512_add_epi64(s, _mm512_srli_epi64(b, 48));
    return _mm512_cvtepi64_ps(s);
}

WIDE static void values_wide(uint64_t st, uint32_t d, float scale, float *v)
{
    const uint64_t g = 0x9E3779B97F4A7C15ull;
    __m512i s =
        _mm512_setr_epi64((long long)(st + g), (long long)(st + 2 * g), (long long)(st + 3 * g),
                          (long long)(st + 4 * g), (long long)(st + 5 * g), (long long)(st + 6 * g),
                          (long long)(st + 7 * g), (long long)(st + 8 * g));
    const __m512i step = _mm512_set1_epi64((long long)(8 * g));
    const __m512 mid = _mm512_set1_ps(131070.0f), sc = _mm512_set1_ps(scale);
    for (uint32_t i = 0; i < d; i += 16) {
        __m256 f0 = value_sums(mix64_8(s));
        s = _mm512_add_epi64(s, step);
        __m256 f1 = value_sums(mix64_8(s));
        s = _mm512_add_epi64(s, step);
        __m512 f = _mm512_insertf32x8(_mm512_castps256_ps512(f0), f1, 1);
        __mmask16 m = d - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (d - i)) - 1);
        _mm512_mask_storeu_ps(v + i, m, _mm512_mul_ps(_mm512_sub_ps(f, mid), sc));
    }
}

/* The table entry of byte b (0..3) of each lane's 32-bit half x from the byte's nibble tables
 * t (lo, then hi): hi[x >> (8b+4)] + lo[x >> 8b], the permutes reading the low four bits of
 * each index — the sum that built the portable loop's byte table. */
WIDE static inline __m512 byte_entry(__m512i x, uint32_t b, const float *t)
{
    __m512i sh = _mm512_set1_epi32((int)(8 * b));
    __m512i sh4 = _mm512_set1_epi32((int)(8 * b + 4));
    return _mm512_add_ps(_mm512_permutexvar_ps(_mm512_srlv_epi32(x, sh4), _mm512_loadu_ps(t + 16)),
                         _mm512_permutexvar_ps(_mm512_srlv_epi32(x, sh), _mm512_loadu_ps(t)));
}

WIDE static float lookup_wide(const synth_base *bs, uint32_t j0, const uint64_t *wb, size_t ws,
                              uint32_t nj, uint32_t nw, uint32_t nb, const float *nib, float *row)
{
    const __m512 heavy = _mm512_set1_ps(bs->heavy), sink = _mm512_set1_ps(bs->sink);
    /* the low and the high 32-bit halves of sixteen words, key order kept */
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (uint32_t j = 0; j < nj; j += 16) {
        __mmask16 m = nj - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nj - j)) - 1);
        /* the base: sixteen bits of the heavy bitmap (j0 + j is a multiple of 16) */
        uint32_t key = j0 + j;
        __m512 v = _mm512_maskz_loadu_ps(m, bs->loc + key);
        v = _mm512_mask_add_ps(v, (__mmask16)(bs->hb[key / 64] >> (key % 64)), v, heavy);
        if (key < bs->n_sinks) {
            uint32_t ns = bs->n_sinks - key;
            v = _mm512_mask_add_ps(v, ns >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << ns) - 1), v,
                                   sink);
        }
        for (uint32_t k = 0; k < nw; k++) {
            const uint64_t *wk = wb + (size_t)k * ws + j;
            const float *nk = nib + (size_t)8 * k * 32;
            __m512i w0 = _mm512_loadu_si512((const void *)wk);
            __m512i w1 = _mm512_loadu_si512((const void *)(wk + 8));
            __m512i lo32 = _mm512_permutex2var_epi32(w0, even, w1);
            __m512i hi32 = _mm512_permutex2var_epi32(w0, odd, w1);
            uint32_t bytes = nb - 8 * k < 8 ? nb - 8 * k : 8;
            if (bytes == 8) {
                __m512 b0 = byte_entry(lo32, 0, nk), b1 = byte_entry(lo32, 1, nk + 32);
                __m512 b2 = byte_entry(lo32, 2, nk + 64), b3 = byte_entry(lo32, 3, nk + 96);
                __m512 b4 = byte_entry(hi32, 0, nk + 128), b5 = byte_entry(hi32, 1, nk + 160);
                __m512 b6 = byte_entry(hi32, 2, nk + 192), b7 = byte_entry(hi32, 3, nk + 224);
                __m512 a0 = _mm512_add_ps(b0, b1), a1 = _mm512_add_ps(b2, b3);
                __m512 a2 = _mm512_add_ps(b4, b5), a3 = _mm512_add_ps(b6, b7);
                v = _mm512_add_ps(v, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
            } else {
                __m512 acc = _mm512_setzero_ps();
                for (uint32_t b = 0; b < bytes; b++)
                    acc = _mm512_add_ps(acc, byte_entry(b < 4 ? lo32 : hi32, b & 3, nk + 32 * b));
                v = _mm512_add_ps(v, acc);
            }
        }
        _mm512_mask_storeu_ps(row + j, m, v);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
    }
    return _mm512_reduce_max_ps(vmax);
}

WIDE static float max_wide(const float *row, uint32_t n)
{
    __m512 mv = _mm512_set1_ps(row[0]);
    for (uint32_t j = 0; j < n; j += 16) {
        __mmask16 m = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
        mv = _mm512_mask_max_ps(mv, m, mv, _mm512_maskz_loadu_ps(m, row + j));
    }
    return _mm512_reduce_max_ps(mv);
}

/* exp_neg4's operations on sixteen lanes. */
WIDE static void exp_wide(float *row, uint32_t n4, float mx)
{
    const __m512 lo = _mm512_set1_ps(EXP_LO), mv = _mm512_set1_ps(mx);
    for (uint32_t j = 0; j < n4; j += 16) {
        __mmask16 m = n4 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n4 - j)) - 1);
        __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + j), mv);
        __mmask16 ok = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
        __m512 xc = _mm512_mask_blend_ps(ok, lo, x);
        __m512 nn = _mm512_sub_ps(
            _mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(EXP_LOG2E)), _mm512_set1_ps(EXP_ROUND)),
            _mm512_set1_ps(EXP_ROUND));
        __m512 r = _mm512_sub_ps(xc, _mm512_mul_ps(nn, _mm512_set1_ps(EXP_LN2_HI)));
        r = _mm512_sub_ps(r, _mm512_mul_ps(nn, _mm512_set1_ps(EXP_LN2_LO)));
        __m512 p = _mm512_set1_ps(1.0f / 5040);
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 720));
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120));
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24));
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6));
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
        p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
        __m512i bits = _mm512_slli_epi32(
            _mm512_add_epi32(_mm512_cvttps_epi32(nn), _mm512_set1_epi32(127)), 23);
        __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
        _mm512_mask_storeu_ps(row + j, m, _mm512_maskz_mov_ps(ok, e));
    }
}

WIDE static void scale_wide(float *row, uint32_t n4, float inv)
{
    const __m512 iv = _mm512_set1_ps(inv);
    for (uint32_t j = 0; j < n4; j += 16) {
        __mmask16 m = n4 - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n4 - j)) - 1);
        _mm512_mask_storeu_ps(row + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + j), iv));
    }
}
#endif

/* ---- dispatch ------------------------------------------------------------------------------ */

void synth_kern_words(uint64_t prefix, uint32_t j0, uint32_t nj, uint32_t nw, size_t ws,
                      uint64_t *wb)
{
#ifdef SYNTH_X86
    if (synth_kern_wide()) {
        words_wide(prefix, j0, nj, nw, ws, wb);
        return;
    }
#endif
    words_portable(prefix, j0, nj, nw, ws, wb);
}

void synth_kern_signs(const uint64_t *w, size_t ws, uint32_t dc, float sk, float *kc)
{
#ifdef SYNTH_X86
    if (synth_kern_wide()) {
        signs_wide(w, ws, dc, sk, kc);
        return;
    }
#endif
    signs_portable(w, ws, dc, sk, kc);
}

void synth_kern_values(uint64_t st, uint32_t d, float scale, float *v)
{
#ifdef SYNTH_X86
    if (synth_kern_wide()) {
        values_wide(st, d, scale, v);
        return;
    }
#endif
    values_portable(st, d, scale, v);
}

float synth_kern_lookup(const synth_base *base, uint32_t j0, const uint64_t *wb, size_t ws,
                        uint32_t nj, uint32_t nw, uint32_t nb, const float *nib, const float *tab,
                        float *row)
{
#ifdef SYNTH_X86
    if (synth_kern_wide())
        return lookup_wide(base, j0, wb, ws, nj, nw, nb, nib, row);
#endif
    return lookup_portable(base, j0, wb, ws, nj, nw, nb, tab, row);
}

void synth_kern_softmax(float *row, uint32_t n)
{
#ifdef SYNTH_X86
    if (synth_kern_wide()) {
        synth_kern_softmax_max(row, n, max_wide(row, n));
        return;
    }
#endif
    synth_kern_softmax_max(row, n, max_portable(row, n));
}

void synth_kern_softmax_max(float *row, uint32_t n, float mx)
{
    uint32_t n4 = n / 4 * 4, j;
    int wide = synth_kern_wide();
#ifdef SYNTH_X86
    if (wide)
        exp_wide(row, n4, mx);
    else
#endif
        exp_portable(row, n4, mx);
    double sum = sum_blocks(row, n4);
    for (j = n4; j < n; j++)
        sum += (row[j] = trace_synth_exp_neg(row[j] - mx));
    float inv = (float)(1.0 / sum);
#ifdef SYNTH_X86
    if (wide)
        scale_wide(row, n4, inv);
    else
#endif
        scale_portable(row, n4, inv);
    for (j = n4; j < n; j++)
        row[j] *= inv;
}
