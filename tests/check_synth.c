/* check_synth.c — the synthetic trace generator: determinism, the kernels against the
 * reference, random access, its knobs and grouped-query attention, fitting to a recorded
 * trace, and the CLI round trips (trace synth, trace fit). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "harness.h"
#include "traceck.h"
#include "models/llama.h"
#include "sim/trace/synth_impl.h"
#include "sim/trace/synth_kern.h"
#include "sim/trace/trace.h"

TESTDIR("check_synth")

static model_cfg toy_cfg(uint32_t head_dim)
{
    model_cfg c;
    model_cfg_init(&c);
    snprintf(c.name, sizeof c.name, "toy");
    c.family = FAM_LLAMA;
    c.n_layers = 4;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = head_dim;
    c.dim = 4 * head_dim;
    c.ffn_dim = 64;
    c.max_ctx = 4096;
    return c;
}

static trace *synth(uint32_t d, uint32_t T, uint64_t seed, const trace_synth *p)
{
    model_cfg c = toy_cfg(d);
    trace *t = NULL;
    errbuf e;
    ck_assert_msg(trace_open_synth(&c, T, seed, p, &t, &e) == MS_OK, "%s", e.msg);
    return t;
}

/* Hash of every value a replay can read, over positions 0..T-1. */
static uint64_t digest(trace *t)
{
    const trace_shape *s = trace_get_shape(t);
    uint64_t h = 1469598103934665603ull;
    float kv[2 * 64 * 4];
    errbuf e;
#define MIX(ptr, n)                                             \
    do {                                                        \
        const unsigned char *b_ = (const unsigned char *)(ptr); \
        for (size_t i_ = 0; i_ < (n); i_++)                     \
            h = (h ^ b_[i_]) * 1099511628211ull;                \
    } while (0)
    for (uint32_t p = 0; p < s->n_tokens; p++) {
        ck_assert_int_eq(trace_seek(t, p, &e), MS_OK);
        for (uint32_t l = 0; l < s->n_layers; l++) {
            MIX(trace_q(t, l), s->n_heads * s->head_dim * sizeof(float));
            MIX(trace_att(t, l), s->n_heads * (p + 1) * sizeof(float));
            MIX(trace_ffn(t, l), s->ffn_dim * sizeof(float));
            trace_kv(t, l, p, kv, kv + s->n_kv_heads * s->head_dim);
            MIX(kv, 2 * s->n_kv_heads * s->head_dim * sizeof(float));
        }
    }
    MIX(trace_wo(t, 1, NULL, NULL), s->dim * s->n_heads * s->head_dim * sizeof(float));
#undef MIX
    return h;
}

START_TEST(test_synth_deterministic)
{
    trace_synth p;
    trace_synth_defaults(&p);
    trace *a = synth(16, 64, 7, &p), *b = synth(16, 64, 7, &p), *c = synth(16, 64, 8, &p);
    uint64_t ha = digest(a);
    ck_assert_uint_eq(ha, digest(b));
    ck_assert_uint_ne(ha, digest(c));
    /* replaying a synthetic trace from the start (backward seek) gives the same values */
    ck_assert_uint_eq(ha, digest(a));
    ck_assert_uint_eq(trace_seed(a), 7);
    /* W_o of a layer is the same whenever it is asked for */
    uint32_t wr, wc;
    const float *w1 = trace_wo(a, 1, &wr, &wc);
    ck_assert_uint_eq(wr, 64);
    ck_assert_uint_eq(wc, 64);
    float *keep = malloc(wr * wc * sizeof *keep);
    memcpy(keep, w1, wr * wc * sizeof *keep);
    ck_assert(memcmp(trace_wo(a, 2, NULL, NULL), keep, wr * wc * sizeof *keep) != 0);
    ck_assert(memcmp(trace_wo(a, 1, NULL, NULL), keep, wr * wc * sizeof *keep) == 0);
    free(keep);
    ck_assert(trace_is_synthetic(a));
    ck_assert_ptr_null(trace_tokens(a));
    ck_assert_ptr_null(trace_logits(a));
    /* attention rows (from the logit model) are softmax(q·k/√d) over the regenerated keys */
    errbuf e;
    for (uint32_t pos = 0; pos < 64; pos += 9) {
        ck_assert_int_eq(trace_seek(a, pos, &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            ck_assert_msg(th_att_vs_attend(a, l) < 1e-5, "pos %u layer %u", pos, l);
    }
    trace_close(a);
    trace_close(b);
    trace_close(c);
}
END_TEST

/* The default generator with n_sinks sinks and heavy_frac of the keys heavy. */
static trace_synth sinks_and_heavy(uint32_t n_sinks, double heavy_frac)
{
    trace_synth p;
    trace_synth_defaults(&p);
    p.n_sinks = n_sinks;
    p.heavy_frac = heavy_frac;
    return p;
}

/* The table kernel gives the reference kernel's rows up to float rounding, for content widths
 * of one byte (d = 16), one sign word (d = 128) and three words with a partial byte (d = 200),
 * and its exp stays within 2 float ulps of expf. */
START_TEST(test_synth_kernel_vs_reference)
{
    static const uint32_t dims[] = {16, 128, 200};
    trace_synth p = sinks_and_heavy(3, 0.2);
    errbuf e;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        uint32_t d = dims[di], T = 150;
        trace *t = synth(d, T, 21, &p);
        float *ref = malloc(4 * T * sizeof *ref);
        for (uint32_t pos = 0; pos < T; pos += 37) {
            ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
            for (uint32_t l = 0; l < 4; l++) {
                trace_synth_reference_kernel = 1;
                memcpy(ref, trace_att(t, l), 4 * (pos + 1) * sizeof *ref);
                trace_synth_reference_kernel = 0;
                const float *att = trace_att(t, l);
                for (uint32_t i = 0; i < 4 * (pos + 1); i++)
                    ck_assert_msg(fabsf(att[i] - ref[i]) <= 1e-6f + 2e-5f * ref[i],
                                  "d %u pos %u layer %u entry %u: %g vs %g", d, pos, l, i, att[i],
                                  ref[i]);
            }
        }
        free(ref);
        trace_close(t);
    }
    for (float x = -90.0f; x <= 0.0f; x += 0.0137f) {
        float a = trace_synth_exp_neg(x), b = expf(x);
        if (b < 1.17549435e-38f)
            ck_assert_float_eq(a, 0.0f);
        else
            ck_assert_msg(fabsf(a - b) <= 2 * (nextafterf(b, 1.0f) - b), "exp(%g)", x);
    }
    ck_assert_float_eq(trace_synth_exp_neg(0.0f), 1.0f);
}
END_TEST

/* The AVX-512 loops give the portable loops' values bit for bit (where the CPU has AVX-512;
 * elsewhere both runs take the portable loops): whole rows for content widths of one byte
 * (d = 16), one word (128), a word and a partial byte (130) and three words (200) at positions
 * whose rows end in every lane of a vector and past a block of keys, with those positions' keys
 * and values; then each loop alone over
 * lengths 1..300, with 1..3 words and partial last words, against its portable twin (the keys'
 * signs and the values too, of every length), and the
 * softmax against a double-precision one within float rounding (the exp's 2 ulps and the
 * float sums of up to 16 terms per lane). */
START_TEST(test_synth_kernel_wide_vs_portable)
{
    static const uint32_t dims[] = {16, 128, 130, 200};
    static const uint32_t poss[] = {0, 1, 14, 15, 16, 17, 63, 64, 255, 256, 257, 300};
    trace_synth p = sinks_and_heavy(2, 0.3);
    errbuf e;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        trace *t = synth(dims[di], 320, 5, &p);
        float *ref = malloc(4 * 320 * sizeof *ref);
        for (size_t pi = 0; pi < sizeof poss / sizeof poss[0]; pi++) {
            uint32_t pos = poss[pi], n = 4 * (pos + 1);
            ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
            for (uint32_t l = 0; l < 4; l += 3) {
                trace_synth_portable_kernel = 1;
                memcpy(ref, trace_att(t, l), n * sizeof *ref);
                trace_synth_portable_kernel = 0;
                ck_assert_msg(!memcmp(trace_att(t, l), ref, n * sizeof *ref),
                              "d %u pos %u layer %u", dims[di], pos, l);
            }
            /* keys and values (every KV head) */
            uint32_t kvn = trace_get_shape(t)->n_kv_heads * dims[di];
            float *kv = calloc(4 * kvn, sizeof *kv);
            trace_synth_portable_kernel = 1;
            ck_assert_int_eq(trace_kv(t, 2, pos, kv, kv + kvn), MS_OK);
            trace_synth_portable_kernel = 0;
            ck_assert_int_eq(trace_kv(t, 2, pos, kv + 2 * kvn, kv + 3 * kvn), MS_OK);
            ck_assert_msg(!memcmp(kv, kv + 2 * kvn, 2 * kvn * sizeof *kv), "kv d %u pos %u",
                          dims[di], pos);
            free(kv);
        }
        free(ref);
        trace_close(t);
    }
    /* the loops alone, on random words, tables and logits */
    enum { N = 300 };
    uint64_t *wa = calloc(3 * SYNTH_BLOCK, sizeof *wa), *wp = calloc(3 * SYNTH_BLOCK, sizeof *wp);
    float *nib = malloc(24 * 32 * sizeof *nib), *tab = malloc(24 * 256 * sizeof *tab);
    enum { NL = 17 * SYNTH_BLOCK };
    float *loc = malloc(NL * sizeof *loc), ra[SYNTH_BLOCK], rp[SYNTH_BLOCK];
    uint64_t hb[NL / 64];
    float *xa = malloc(N * sizeof *xa), *xp = malloc(N * sizeof *xp);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 9);
    for (uint32_t i = 0; i < 24 * 32; i++)
        nib[i] = (float)gsl_ran_gaussian(r, 0.3);
    for (uint32_t b = 0; b < 24; b++)
        for (uint32_t v = 0; v < 256; v++)
            tab[b * 256 + v] = nib[32 * b + 16 + (v >> 4)] + nib[32 * b + (v & 15)];
    for (uint32_t j = 0; j < NL; j++)
        loc[j] = (float)gsl_ran_gaussian(r, 2.0);
    for (uint32_t w = 0; w < NL / 64; w++)
        hb[w] = (uint64_t)gsl_rng_get(r) << 32 ^ gsl_rng_get(r);
    for (uint32_t nj = 1; nj <= SYNTH_BLOCK; nj += nj < 40 ? 1 : 23)
        for (uint32_t nb = 1; nb <= 24; nb += nb < 9 ? 1 : 7) {
            /* keys from j0 (a multiple of 16), sinks up to inside the block or none */
            uint32_t nw = (nb + 7) / 8, j0 = 16 * (nj % 17);
            synth_base bs = {loc, hb, 1.5f, 4.0f, nj % 3 ? j0 + nj % 37 : 0};
            trace_synth_portable_kernel = 1;
            synth_kern_words(0x1234567890abcdefull ^ nb, j0, nj, nw, SYNTH_BLOCK, wp);
            float mp = synth_kern_lookup(&bs, j0, wp, SYNTH_BLOCK, nj, nw, nb, nib, tab, rp);
            trace_synth_portable_kernel = 0;
            synth_kern_words(0x1234567890abcdefull ^ nb, j0, nj, nw, SYNTH_BLOCK, wa);
            float ma = synth_kern_lookup(&bs, j0, wa, SYNTH_BLOCK, nj, nw, nb, nib, tab, ra),
                  mx = rp[0];
            for (uint32_t j = 1; j < nj; j++)
                mx = rp[j] > mx ? rp[j] : mx;
            for (uint32_t k = 0; k < nw; k++)
                ck_assert_msg(!memcmp(wa + k * SYNTH_BLOCK, wp + k * SYNTH_BLOCK, nj * sizeof *wa),
                              "words nj %u nw %u", nj, nw);
            ck_assert_msg(!memcmp(ra, rp, nj * sizeof *ra), "lookup nj %u nb %u", nj, nb);
            ck_assert_msg(ma == mx && mp == mx, "lookup max nj %u nb %u", nj, nb);
        }
    for (uint32_t n = 1; n <= N; n++) {                 /* signs and values of n channels */
        uint64_t st = 0x9e3779b97f4a7c15ull * n, w[12]; /* (N + 63) / 64 words, stride 2 */
        for (uint32_t i = 0; i < 12; i++)
            w[i] = st * (2 * i + 1) ^ st >> (i + 3);
        trace_synth_portable_kernel = 1;
        synth_kern_signs(w + 1, 2, n, 0.75f, xp);
        trace_synth_portable_kernel = 0;
        synth_kern_signs(w + 1, 2, n, 0.75f, xa);
        ck_assert_msg(!memcmp(xa, xp, n * sizeof *xa), "signs n %u", n);
        trace_synth_portable_kernel = 1;
        synth_kern_values(st, n, 1.0f / 37837.0f, xp);
        trace_synth_portable_kernel = 0;
        synth_kern_values(st, n, 1.0f / 37837.0f, xa);
        ck_assert_msg(!memcmp(xa, xp, n * sizeof *xa), "values n %u", n);
    }
    for (uint32_t n = 1; n <= N; n++) {
        for (uint32_t j = 0; j < n; j++)
            xa[j] = xp[j] = (float)gsl_ran_gaussian(r, 8.0);
        double mx = xp[0], sum = 0;
        for (uint32_t j = 1; j < n; j++)
            mx = xp[j] > mx ? xp[j] : mx;
        for (uint32_t j = 0; j < n; j++)
            sum += exp(xp[j] - mx);
        float x7 = xp[n / 2];
        trace_synth_portable_kernel = 1;
        synth_kern_softmax(xp, n);
        trace_synth_portable_kernel = 0;
        synth_kern_softmax(xa, n);
        ck_assert_msg(!memcmp(xa, xp, n * sizeof *xa), "softmax n %u", n);
        double want = exp(x7 - mx) / sum;
        ck_assert_msg(fabs(xp[n / 2] - want) <= 4e-6 * want + 1e-30, "softmax n %u: %g vs %g", n,
                      xp[n / 2], want);
    }
    gsl_rng_free(r);
    free(wa);
    free(wp);
    free(nib);
    free(tab);
    free(loc);
    free(xa);
    free(xp);
}
END_TEST

/* The sign-word cache (trace_keep_key_words, trace_synth_words_cap) changes no value: rows and keys
 * of a trace that keeps every key's words equal those of one that hashes them again per row, bit
 * for bit, at positions that fill the cache forward, then below what it holds, then past it; under
 * both kernels. */
START_TEST(test_synth_words_cache)
{
    static const uint32_t dims[] = {16, 128, 200};
    static const uint32_t poss[] = {40, 3, 17, 299, 120, 300};
    trace_synth p;
    trace_synth_defaults(&p);
    p.heavy_frac = 0.2;
    errbuf e;
    size_t cap = trace_synth_words_cap;
    for (int portable = 0; portable < 2; portable++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            uint32_t d = dims[di];
            trace_synth_portable_kernel = portable;
            trace_synth_words_cap = 0;
            trace *u = synth(d, 320, 5, &p);
            trace_keep_key_words(u);
            trace_synth_words_cap = cap;
            trace *c = synth(d, 320, 5, &p);
            ck_assert_uint_eq(trace_synth_words_bytes(c), 0); /* until asked for */
            trace_keep_key_words(c);
            ck_assert_uint_eq(trace_synth_words_bytes(u), 0);
            ck_assert_uint_gt(trace_synth_words_bytes(c), 0);
            uint32_t kvn = trace_get_shape(c)->n_kv_heads * d;
            float *ka = calloc(2 * kvn, sizeof *ka), *kb = calloc(2 * kvn, sizeof *kb);
            for (size_t pi = 0; pi < sizeof poss / sizeof poss[0]; pi++) {
                uint32_t pos = poss[pi], n = 4 * (pos + 1);
                ck_assert_int_eq(trace_seek(u, pos, &e), MS_OK);
                ck_assert_int_eq(trace_seek(c, pos, &e), MS_OK);
                for (uint32_t l = 0; l < 4; l += 3)
                    ck_assert_msg(!memcmp(trace_att(u, l), trace_att(c, l), n * sizeof(float)),
                                  "rows d %u pos %u layer %u", d, pos, l);
                /* keys below, at and past what the cache holds */
                for (uint32_t j = 0; j < 320; j += 7) {
                    ck_assert_int_eq(trace_kv(u, 3, j, ka, ka + kvn), MS_OK);
                    ck_assert_int_eq(trace_kv(c, 3, j, kb, kb + kvn), MS_OK);
                    ck_assert_msg(!memcmp(ka, kb, 2 * kvn * sizeof *ka), "kv d %u key %u", d, j);
                }
            }
            free(ka);
            free(kb);
            trace_close(u);
            trace_close(c);
        }
    trace_synth_portable_kernel = 0;
}
END_TEST

/* A key's heavy status does not depend on the order the layers are read in (a layer's bitmap
 * reuses the filled bitmap of the layer below): layers read upward, downward and from a
 * position in the middle give the same heavy channel of every key. */
START_TEST(test_synth_heavy_order)
{
    trace_synth p;
    trace_synth_defaults(&p);
    p.heavy_frac = 0.3;
    p.layer_sim = 0.6;
    const uint32_t T = 200, d = 16, L = 4, Hkv = 2;
    float k[2 * 16], *got[3];
    for (int v = 0; v < 3; v++) {
        trace *t = synth(d, T, 17, &p);
        got[v] = malloc((size_t)L * T * Hkv * sizeof **got);
        if (v == 2) /* fill layers 3 and 1 halfway first */
            for (uint32_t l = 3; l < 4; l -= 2)
                ck_assert_int_eq(trace_kv(t, l, T / 2, k, NULL), MS_OK);
        for (uint32_t i = 0; i < L; i++) {
            uint32_t l = v == 1 ? L - 1 - i : i;
            for (uint32_t j = 0; j < T; j++) {
                ck_assert_int_eq(trace_kv(t, l, j, k, NULL), MS_OK);
                for (uint32_t g = 0; g < Hkv; g++)
                    got[v][((size_t)l * T + j) * Hkv + g] = k[g * d + 1];
            }
        }
        trace_close(t);
    }
    size_t n = (size_t)L * T * Hkv, heavy = 0;
    for (size_t i = 0; i < n; i++)
        heavy += got[0][i] != 0;
    ck_assert(heavy > n / 10 && heavy < n / 2);
    ck_assert(!memcmp(got[0], got[1], n * sizeof **got));
    ck_assert(!memcmp(got[0], got[2], n * sizeof **got));
    for (int v = 0; v < 3; v++)
        free(got[v]);
}
END_TEST

/* A span's rows (trace_span_att) are the rows of its positions one at a time, bit for bit, and
 * its queries theirs: spans of 1..TRACE_SPAN_MAX positions crossing a block of keys, with and
 * without the sign-word cache, under both kernels. */
START_TEST(test_synth_span)
{
    trace_synth p;
    trace_synth_defaults(&p);
    p.n_sinks = 2;
    p.heavy_frac = 0.2;
    errbuf e;
    size_t cap = trace_synth_words_cap;
    for (int v = 0; v < 4; v++) {
        trace_synth_portable_kernel = v & 1;
        trace_synth_words_cap = v & 2 ? 0 : cap;
        uint32_t d = v < 2 ? 128 : 200, T = 400;
        trace *a = synth(d, T, 5, &p), *b = synth(d, T, 5, &p);
        trace_keep_key_words(a);
        const trace_shape *sh = trace_get_shape(a);
        ck_assert_uint_eq(trace_span_max(a), TRACE_SPAN_MAX);
        for (uint32_t cnt = 1, p0 = 250; cnt <= TRACE_SPAN_MAX; p0 += 3 * cnt, cnt++) {
            ck_assert_int_eq(trace_span_begin(a, p0, cnt, &e), MS_OK);
            ck_assert_uint_eq(trace_pos(a), p0 + cnt - 1);
            uint32_t G = sh->n_heads / sh->n_kv_heads;
            for (uint32_t l = 0; l < sh->n_layers; l += 3)
                for (uint32_t g = 0; g < sh->n_kv_heads; g++)
                    for (uint32_t i = 0; i < cnt; i++) {
                        size_t n = p0 + i + 1;
                        const float *row = trace_span_att(a, l, g, i) + g * G * n;
                        const float *q = trace_span_q(a, l, i);
                        ck_assert_int_eq(trace_seek(b, p0 + i, &e), MS_OK);
                        ck_assert_msg(
                            !memcmp(row, trace_att(b, l) + g * G * n, G * n * sizeof *row),
                            "v %d span %u+%u layer %u head %u", v, p0, i, l, g);
                        ck_assert(!memcmp(q, trace_q(b, l), sh->n_heads * d * sizeof *q));
                    }
            ck_assert_ptr_null(trace_span_att(a, 0, 0, cnt));
        }
        trace_close(a);
        trace_close(b);
    }
    trace_synth_portable_kernel = 0;
    trace_synth_words_cap = cap;
}
END_TEST

/* Generator 2 reaches any position directly (forward, backward, far jumps) with the values a
 * forward walk gives; generator 1 is the sequential mt19937 AR(1) stream of earlier builds,
 * value for value; both have the drift the parameters ask for. */
START_TEST(test_synth_random_access)
{
    trace_synth p;
    trace_synth_defaults(&p);
    ck_assert_uint_eq(p.generator, 2);
    const uint32_t T = 300, d = 32, nq = 4 * 4 * d;
    trace *t = synth(d, T, 13, &p), *u = synth(d, T, 13, &p);
    float *walk = malloc((size_t)T * nq * sizeof *walk);
    errbuf e;
    for (uint32_t pos = 0; pos < T; pos++) {
        ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            memcpy(walk + ((size_t)pos * 4 + l) * 4 * d, trace_q(t, l), 4 * d * sizeof *walk);
    }
    static const uint32_t jumps[] = {299, 0, 150, 149, 151, 7, 298, 64, 63, 65, 128, 1, 255};
    for (size_t i = 0; i < sizeof jumps / sizeof jumps[0]; i++) {
        ck_assert_int_eq(trace_seek(u, jumps[i], &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            ck_assert_msg(!memcmp(trace_q(u, l), walk + ((size_t)jumps[i] * 4 + l) * 4 * d,
                                  4 * d * sizeof *walk),
                          "position %u", jumps[i]);
    }
    /* generator 1: c_0 = ε_0, c_t = ρ c_{t−1} + √(1−ρ²) ε_t over one mt19937 seeded by seed */
    trace_synth p1 = p;
    p1.generator = 1;
    p1.group_sim = 0; /* the streams as drawn, before the GQA mix */
    trace *o = synth(d, T, 13, &p1);
    uint32_t m = (d - 2) / 4, dc = d - 2 - 2 * m;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 13);
    double c0[16 * 32], c1[16 * 32], q0[16 * 32], q1[16 * 32];
    for (uint32_t i = 0; i < 16 * dc; i++)
        c0[i] = gsl_ran_gaussian_ziggurat(r, 1.0);
    for (uint32_t i = 0; i < 16 * dc; i++)
        c1[i] = gsl_ran_gaussian_ziggurat(r, 1.0);
    gsl_rng_free(r);
    for (uint32_t pos = 0; pos < 2; pos++) {
        ck_assert_int_eq(trace_seek(o, pos, &e), MS_OK);
        for (uint32_t l = 0; l < 4; l++)
            for (uint32_t h = 0; h < 4; h++)
                for (uint32_t i = 0; i < dc; i++)
                    (pos ? q1 : q0)[(l * 4 + h) * dc + i] = trace_q(o, l)[h * d + 2 + 2 * m + i];
    }
    for (uint32_t i = 0; i < 16 * dc; i++)
        ck_assert_float_eq((float)q0[i], (float)c0[i]);
    /* position 1 is α·c_0 + β·ε_1 with α² + β² = 1 (least squares over every channel) */
    double s00 = 0, s01 = 0, s11 = 0, y0 = 0, y1 = 0;
    for (uint32_t i = 0; i < 16 * dc; i++) {
        s00 += c0[i] * c0[i];
        s01 += c0[i] * c1[i];
        s11 += c1[i] * c1[i];
        y0 += c0[i] * q1[i];
        y1 += c1[i] * q1[i];
    }
    double det = s00 * s11 - s01 * s01, al = (y0 * s11 - y1 * s01) / det,
           be = (y1 * s00 - y0 * s01) / det;
    ck_assert_double_eq_tol(al * al + be * be, 1.0, 1e-5);
    for (uint32_t i = 0; i < 16 * dc; i++)
        ck_assert_double_eq_tol(q1[i], al * c0[i] + be * c1[i], 1e-5);
    /* the drift the parameters ask for, whichever generator (same sampling noise) */
    trace_stats a, b;
    ck_assert_int_eq(trace_measure(t, &p, &a, &e), MS_OK);
    ck_assert_int_eq(trace_measure(o, &p1, &b, &e), MS_OK);
    ck_assert_msg(fabs(a.q_cos - b.q_cos) < 0.01, "q_cos %g vs %g", a.q_cos, b.q_cos);
    ck_assert_msg(fabs(a.q_cos - (1 - p.drift)) < 0.03, "q_cos %g", a.q_cos);
    free(walk);
    trace_close(t);
    trace_close(u);
    trace_close(o);
}
END_TEST

START_TEST(test_synth_subset_attend)
{
    trace_synth p;
    trace_synth_defaults(&p);
    trace *t = synth(32, 100, 3, &p);
    errbuf e;
    ck_assert_int_eq(trace_seek(t, 80, &e), MS_OK);
    const float *att = trace_att(t, 1);
    float row[81];
    memcpy(row, att + 3 * 81, sizeof row); /* head 3 */
    uint32_t idx[] = {0, 5, 17, 60, 78, 80};
    float pr[6], out[32], k[6 * 32], v[6 * 32], kk[2 * 32], vv[2 * 32];
    ck_assert_int_eq(trace_attend(t, 1, 3, trace_q(t, 1) + 3 * 32, idx, 6, pr, out), MS_OK);
    double sum = 0;
    for (int i = 0; i < 6; i++)
        sum += row[idx[i]];
    /* restricting the softmax renormalizes the full row over the subset */
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(pr[i], row[idx[i]] / sum, 1e-5);
    /* the output is Σ p v over the gathered values (query head 3 reads KV head 1) */
    ck_assert_int_eq(trace_gather(t, 1, 1, idx, 6, k, v), MS_OK);
    for (int j = 0; j < 32; j++) {
        double o = 0;
        for (int i = 0; i < 6; i++)
            o += pr[i] * v[i * 32 + j];
        ck_assert_double_eq_tol(out[j], o, 1e-5);
    }
    ck_assert_int_eq(trace_kv(t, 1, 17, kk, vv), MS_OK);
    ck_assert(memcmp(kk + 32, k + 2 * 32, 32 * sizeof(float)) == 0);
    ck_assert(memcmp(vv + 32, v + 2 * 32, 32 * sizeof(float)) == 0);
    uint32_t oob = 100;
    ck_assert_int_eq(trace_gather(t, 1, 1, &oob, 1, k, v), MS_ERR_RANGE);
    trace_close(t);
}
END_TEST

static trace_stats measure(const trace_synth *p, uint32_t T)
{
    trace *t = synth(64, T, 11, p);
    trace_stats st;
    errbuf e;
    ck_assert_msg(trace_measure(t, p, &st, &e) == MS_OK, "%s", e.msg);
    trace_close(t);
    return st;
}

START_TEST(test_synth_knobs)
{
    trace_synth base, p;
    trace_synth_defaults(&base);
    trace_stats s0 = measure(&base, 256);
    p = base;
    p.sink = 7;
    ck_assert(measure(&p, 256).sink_mass > 2 * s0.sink_mass);
    p = base;
    p.sink = 0;
    ck_assert(measure(&p, 256).sink_mass < 0.5 * s0.sink_mass);
    p = base;
    p.local = 6;
    ck_assert(measure(&p, 256).local_mass > s0.local_mass + 0.1);
    p = base;
    p.heavy = 6;
    ck_assert(measure(&p, 256).heavy_mass > s0.heavy_mass + 0.1);
    p = base;
    p.drift = 0.5;
    ck_assert(measure(&p, 256).q_cos < s0.q_cos - 0.2);
    p = base;
    p.layer_sim = 1;
    ck_assert(measure(&p, 256).layer_overlap > 0.95);
    p = base;
    p.ffn_sparsity = 0.9;
    ck_assert_double_eq_tol(measure(&p, 256).ffn_neg, 0.9, 0.01);
}
END_TEST

/* Fitting a synthetic trace recovers its parameters within the tolerances stated in
 * TRACE_FORMAT.md §Fitting. */
static void check_recovery(const trace_synth *p, uint32_t d, uint32_t T)
{
    trace *t = synth(d, T, 5, p);
    trace_synth f;
    trace_stats st;
    errbuf e;
    ck_assert_msg(trace_fit(t, p, &f, &st, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq_tol(f.sink, p->sink, 0.3);
    ck_assert_double_eq_tol(f.local, p->local, 0.3);
    ck_assert_double_eq_tol(f.window, p->window, 0.15 * p->window);
    ck_assert_double_eq_tol(f.heavy, p->heavy, 0.3);
    ck_assert_double_eq_tol(f.heavy_frac, p->heavy_frac, 0.015);
    ck_assert_double_eq_tol(f.layer_sim, p->layer_sim, 0.1);
    ck_assert_double_eq_tol(f.drift, p->drift, 0.03);
    ck_assert_double_eq_tol(f.noise, p->noise, 0.2);
    ck_assert_double_eq_tol(f.ffn_sparsity, p->ffn_sparsity, 0.01);
    ck_assert_uint_eq(f.n_sinks, p->n_sinks);
    trace_close(t);
}

START_TEST(test_fit_recovers)
{
    trace_synth p;
    trace_synth_defaults(&p);
    check_recovery(&p, 64, 512);
    p = (trace_synth){.sink = 6,
                      .n_sinks = 4,
                      .local = 1.5,
                      .window = 8,
                      .heavy = 4,
                      .heavy_frac = 0.1,
                      .layer_sim = 0.3,
                      .drift = 0.4,
                      .noise = 0.5,
                      .ffn_sparsity = 0.8,
                      .generator = 2};
    check_recovery(&p, 64, 512);
    p = (trace_synth){.sink = 2,
                      .n_sinks = 1,
                      .local = 4,
                      .window = 32,
                      .heavy = 2.5,
                      .heavy_frac = 0.03,
                      .layer_sim = 0.9,
                      .drift = 0.1,
                      .noise = 1.5,
                      .ffn_sparsity = 0.3,
                      .generator = 2};
    check_recovery(&p, 128, 768);
}
END_TEST

/* Grouped-query attention: the content queries of two query heads of one KV head correlate by
 * group_sim (pooled over positions, layers, groups and channels: within 0.05), `trace fit`
 * reads it back from the attention rows alone within 0.2 (its bias is upward: heavy hitters
 * widen the noise it divides by; TRACE_FORMAT.md §Grouped-query attention), and an MHA shape
 * is the same trace whatever group_sim says. */
static double group_corr(trace *t)
{
    const trace_shape *s = trace_get_shape(t);
    uint32_t G = s->n_heads / s->n_kv_heads, d = s->head_dim, m = (d - 2) / 4, c0 = 2 + 2 * m;
    double xy = 0, xx = 0, yy = 0;
    errbuf e;
    for (uint32_t p = 0; p < s->n_tokens; p++) {
        ck_assert_int_eq(trace_seek(t, p, &e), MS_OK);
        for (uint32_t l = 0; l < s->n_layers; l++) {
            const float *q = trace_q(t, l);
            for (uint32_t h = 0; h + 1 < s->n_heads; h++)
                for (uint32_t i = c0; h % G != G - 1 && i < d; i++) {
                    double a = q[(size_t)h * d + i], b = q[(size_t)(h + 1) * d + i];
                    xy += a * b;
                    xx += a * a;
                    yy += b * b;
                }
        }
    }
    return xy / sqrt(xx * yy);
}

START_TEST(test_synth_gqa)
{
    static const double sims[] = {0, 0.3, 0.7};
    errbuf e;
    for (size_t i = 0; i < sizeof sims / sizeof sims[0]; i++) {
        trace_synth p, f;
        trace_synth_defaults(&p);
        p.group_sim = sims[i];
        trace *t = synth(64, 512, 5, &p);
        ck_assert_double_eq_tol(group_corr(t), sims[i], 0.05);
        trace_stats st;
        ck_assert_msg(trace_fit(t, &p, &f, &st, &e) == MS_OK, "%s", e.msg);
        ck_assert_double_eq_tol(f.group_sim, sims[i], 0.2);
        trace_close(t);
    }
    /* MHA: group_sim changes nothing, and fit keeps the default it cannot measure */
    model_cfg c = toy_cfg(16);
    c.n_kv_heads = c.n_heads;
    trace_synth p0, p1, f;
    trace_synth_defaults(&p0);
    p0.group_sim = 0;
    p1 = p0;
    p1.group_sim = 0.9;
    trace *a, *b;
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p0, &a, &e), MS_OK);
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p1, &b, &e), MS_OK);
    ck_assert_uint_eq(digest(a), digest(b));
    trace_synth_defaults(&p0);
    ck_assert_msg(trace_fit(b, &p1, &f, NULL, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq(f.group_sim, p0.group_sim);
    trace_close(a);
    trace_close(b);
    /* GQA: it is a knob */
    c = toy_cfg(16);
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p1, &a, &e), MS_OK);
    p1.group_sim = 0;
    ck_assert_int_eq(trace_open_synth(&c, 96, 3, &p1, &b, &e), MS_OK);
    ck_assert_uint_ne(digest(a), digest(b));
    trace_close(a);
    trace_close(b);
}
END_TEST

START_TEST(test_synth_params)
{
    trace_synth p;
    trace_synth_defaults(&p);
    errbuf e;
    ck_assert_int_eq(trace_synth_set(&p, "heavy_frac", "0.2", &e), MS_OK);
    ck_assert_double_eq(p.heavy_frac, 0.2);
    ck_assert_int_eq(trace_synth_set(&p, "n_sink", "3", &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "did you mean 'n_sinks'"));
    ck_assert_int_eq(trace_synth_set(&p, "drift", "1.5", &e), MS_ERR_RANGE);
    ck_assert_int_eq(trace_synth_set(&p, "n_sinks", "2.5", &e), MS_ERR_RANGE);
    kv_param kv[2] = {{"window", "8", 4, 5}, {"hevy", "2", 5, 5}};
    ck_assert_int_eq(trace_synth_from_kv(&p, kv, 2, "s.yaml", &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "s.yaml:5:5: error: unknown synthetic trace parameter "
                                        "'hevy' (did you mean 'heavy'?)"));
    ck_assert_double_eq(p.window, 8);
    /* YAML round trip */
    char path[600];
    const char *dir = td.dir;
    snprintf(path, sizeof path, "%s/p.yaml", dir);
    FILE *f = fopen(path, "w");
    trace_synth_write_yaml(&p, f);
    fclose(f);
    trace_synth q;
    trace_synth_defaults(&q);
    ck_assert_msg(trace_synth_read_yaml(&q, path, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq_tol(q.heavy_frac, 0.2, 1e-9);
    ck_assert_double_eq_tol(q.window, 8, 1e-9);
    th_write(path, "sink: 2\nwindw: 3\n");
    ck_assert_int_eq(trace_synth_read_yaml(&q, path, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "p.yaml:2:1: error: unknown"));
}
END_TEST

/* `trace synth -o` writes a directory that NumPy verifies and trace_open reads back equal. */
START_TEST(test_cli_synth_roundtrip)
{
    char cmd[2048], out[8192];
    const char *dir = td.dir;
    th_cli_expect(out, sizeof out, 0, NULL,
                  "trace synth --model stories260K --tokens 40 --seed 9 --set sink=5 -o %s/syn",
                  dir);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/mpcsim_trace_io.py verify %s/syn",
             th_data(), dir);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s", out);
    char syn[600];
    snprintf(syn, sizeof syn, "%s/syn/manifest.yaml", dir);
    char *man = th_slurp(syn, NULL);
    ck_assert_ptr_nonnull(strstr(man, "\nsource: synth\n"));
    ck_assert_ptr_nonnull(strstr(man, "\nseed: 9\n"));
    ck_assert_ptr_nonnull(strstr(man, "\nsynth: {sink: 5, n_sinks: 1, local: 3,"));
    free(man);
    snprintf(syn, sizeof syn, "%s/syn", dir);
    trace *r = NULL, *g = NULL;
    errbuf e;
    ck_assert_msg(trace_open(syn, &r, &e) == MS_OK, "%s", e.msg);
    model_cfg cfg;
    ck_assert_int_eq(model_load("stories260K", &cfg, &e), MS_OK);
    trace_synth p;
    trace_synth_defaults(&p);
    p.sink = 5;
    ck_assert_int_eq(trace_open_synth(&cfg, 40, 9, &p, &g, &e), MS_OK);
    ck_assert_int_eq(trace_seek(r, 39, &e), MS_OK);
    ck_assert_int_eq(trace_seek(g, 39, &e), MS_OK);
    ck_assert(memcmp(trace_q(r, 4), trace_q(g, 4), 64 * sizeof(float)) == 0);
    ck_assert(memcmp(trace_att(r, 4), trace_att(g, 4), 8 * 40 * sizeof(float)) == 0);
    trace_close(r);
    trace_close(g);
    /* --stats streams without writing */
    th_cli_expect(out, sizeof out, 0, "sink_mass:",
                  "trace synth --model llama-2-7b --tokens 64 --stats --set window=4");
    th_cli_expect(out, sizeof out, 2, "did you mean 'heavy'",
                  "trace synth --model stories260K --tokens 10 --stats --set hevy=2");
}
END_TEST

/* fit → params.yaml → synth --params: a fitted parameter file drives the generator */
START_TEST(test_cli_fit_workflow)
{
    char out[8192];
    th_cli_expect(
        out, sizeof out, 0, NULL,
        "trace synth --model stories260K --tokens 160 --seed 3 --set heavy_frac=0.1 --set "
        "window=4 -o %s/s",
        td.dir);
    th_cli_expect(out, sizeof out, 0, "sink_mass:", "trace fit %s/s -o %s/p.yaml", td.dir, td.dir);
    ck_assert_ptr_nonnull(strstr(out, "heavy_frac:"));
    char path[600];
    snprintf(path, sizeof path, "%s/p.yaml", td.dir);
    trace_synth p;
    trace_synth_defaults(&p);
    errbuf e;
    ck_assert_msg(trace_synth_read_yaml(&p, path, &e) == MS_OK, "%s", e.msg);
    ck_assert_double_eq_tol(p.ffn_sparsity, 0.5, 0.02);
    th_cli_expect(out, sizeof out, 0, "# synthetic llama-2-7b, 64 tokens",
                  "trace synth --model llama-2-7b --tokens 64 --params %s --stats", path);
}
END_TEST

Suite *synth_suite(void)
{
    Suite *s = suite_create("synth");
    TCase *tc = th_case(s, "synthetic", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_synth_deterministic, test_synth_subset_attend, test_synth_kernel_vs_reference,
             test_synth_kernel_wide_vs_portable, test_synth_words_cache, test_synth_span,
             test_synth_heavy_order, test_synth_random_access, test_synth_knobs, test_fit_recovers,
             test_synth_gqa, test_synth_params, test_cli_synth_roundtrip, test_cli_fit_workflow);
    return s;
}
