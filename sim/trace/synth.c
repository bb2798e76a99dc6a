/* synth.c — synthetic traces for model shapes without weights (construction documented in
 * sim/trace/TRACE_FORMAT.md §Synthetic).
 *
 * Per layer and KV head, a key's head_dim channels are laid out as
 *   [0] sink channel   k = sink·√d for the first n_sinks keys, q = 1   → +sink logits
 *   [1] heavy channel  k = heavy·√d for heavy hitters, q = 1          → +heavy logits
 *   [2, 2+2m) RoPE-like locality: q = a(cos ω_i t, sin ω_i t), k = a(cos ω_i s, sin ω_i s),
 *       so q·k/√d = local · (1/m) Σ cos(ω_i (t−s)) ≈ local · exp(−(t−s)²/(2W²)) with ω_i the
 *       quantiles of a half-normal of scale 1/W (random Fourier features of a Gaussian kernel)
 *   [2+2m, d) content: q is an AR(1) Gaussian stream (drift), k is ±σ_k Rademacher noise, so
 *       the content logit is ≈ N(0, noise²).
 * The query stream comes from a GSL mt19937 seeded with the trace seed (sequential in
 * position); keys, values, heavy-hitter membership and FFN rows come from counter-based
 * splitmix64 streams keyed by (seed, what, layer, head, position), so any key can be
 * regenerated at any time and nothing O(T²) — or even O(T) per layer — is stored. */
#include "synth_impl.h"
#include "synth_kern.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include "protocols/base/yschema.h"

/* ---- parameters ----------------------------------------------------------------------- */

/* group_sim: see TRACE_FORMAT.md §Grouped-query attention for its calibration. */
#define GROUP_SIM_DEFAULT "0.3"

#define P(f) YS_AT(trace_synth, f)
static const ys_field synth_fields[] = {
    {"sink", YS_DBL, P(sink), 0, 50, "4", "logit bonus of the sink keys", NULL, 0, NULL, NULL},
    {"n_sinks", YS_U32, P(n_sinks), 0, 1024, "1", "number of sink keys at the start", NULL, 0, NULL,
     NULL},
    {"local", YS_DBL, P(local), 0, 50, "3", "logit bonus of the local kernel at distance 0", NULL,
     0, NULL, NULL},
    {"window", YS_DBL, P(window), 0.5, 1e6, "16", "width W of the local kernel, in positions", NULL,
     0, NULL, NULL},
    {"heavy", YS_DBL, P(heavy), 0, 50, "3", "logit bonus of heavy-hitter keys", NULL, 0, NULL,
     NULL},
    {"heavy_frac", YS_DBL, P(heavy_frac), 0, 1, "0.05", "fraction of keys that are heavy hitters",
     NULL, 0, NULL, NULL},
    {"layer_sim", YS_DBL, P(layer_sim), 0, 1, "0.7",
     "probability a heavy status is kept from layer l-1", NULL, 0, NULL, NULL},
    {"drift", YS_DBL, P(drift), 0, 1, "0.2", "1 - E[cos(q_t, q_t+1)]", NULL, 0, NULL, NULL},
    {"noise", YS_DBL, P(noise), 0, 20, "1", "std of the content logit noise", NULL, 0, NULL, NULL},
    {"ffn_sparsity", YS_DBL, P(ffn_sparsity), 0, 1, "0.5", "fraction of FFN pre-activations <= 0",
     NULL, 0, NULL, NULL},
    {"generator", YS_U32, P(generator), 1, 2, "2",
     "query stream: 2 counter-based (random access), 1 sequential mt19937 (earlier builds)", NULL,
     0, NULL, NULL},
    {"group_sim", YS_DBL, P(group_sim), 0, 1, GROUP_SIM_DEFAULT,
     "GQA: correlation of the content queries of two query heads sharing a KV head", NULL, 0, NULL,
     NULL},
};
#undef P
static const ys_schema synth_schema =
    YS_SCHEMA("synthetic trace parameters", synth_fields, "sim/trace/TRACE_FORMAT.md");

const ys_schema *trace_synth_schema(void) { return &synth_schema; }

void trace_synth_defaults(trace_synth *p)
{
    memset(p, 0, sizeof *p);
    ys_defaults(&synth_schema, p);
}

/* Calibrated defaults per model family (TRACE_FORMAT.md §Calibration). Only the sink bonus
 * differs from the schema's generic defaults: it is the smallest whole logit bonus for which a
 * synthetic trace at T = 2048 reproduces both cited statistics of real attention (the
 * calibration test in tests/check_trace.c measures them):
 *   - H2O (Zhang et al., NeurIPS 2023, §3.1 and Fig. 2): attention is over 95 % sparse in
 *     almost all layers, an entry counting as sparse when it is below 1 % of its row's
 *     largest — measured on OPT, LLaMA and GPT-NeoX;
 *   - StreamingLLM (Xiao et al., ICLR 2024, §3.1 and Fig. 2): beyond the bottom two layers of
 *     Llama-2-7B, every head attends most to the initial token (the attention sink); read here
 *     as: the sink leads at least 90 % of the rows. The sink is one token (n_sinks 1): the first
 *     token is the dominant sink across GPT-2, Llama and Mistral (arXiv 2410.10781, Gu et al.,
 *     ICLR 2025).
 * gpt2's row rests on H2O's OPT measurements (learned absolute positions, as GPT-2) and on
 * StreamingLLM's findings for MPT, Falcon and Pythia; llama's on H2O's LLaMA and StreamingLLM's
 * Llama-2. With the generic sink of 4, the same trace is 76 % sparse with the sink leading 8 %
 * of the rows: attention far more diffuse than any of these models'. */
static const struct {
    int family;
    double sink;
} family_defaults[] = {{FAM_LLAMA, 8.0}, {FAM_GPT2, 8.0}};

void trace_synth_defaults_for(trace_synth *p, int family)
{
    trace_synth_defaults(p);
    for (size_t i = 0; i < sizeof family_defaults / sizeof family_defaults[0]; i++)
        if (family_defaults[i].family == family)
            p->sink = family_defaults[i].sink;
}

int trace_synth_set(trace_synth *p, const char *key, const char *val, errbuf *e)
{
    const ys_field *f = ys_find(&synth_schema, key);
    if (f) {
        errbuf ve;
        if (ys_set_text(f, val, p, &ve) == MS_OK)
            return MS_OK;
        return err_set(e, MS_ERR_RANGE, "bad value for synthetic trace parameter '%s' (%s): %s",
                       key, f->doc, ve.msg);
    }
    const char *names[16];
    for (size_t i = 0; i < synth_schema.n && i < 16; i++)
        names[i] = synth_fields[i].key;
    const char *dym = did_you_mean(key, names, synth_schema.n);
    return err_set(e, MS_ERR_INPUT, "unknown synthetic trace parameter '%s'%s%s%s", key,
                   dym ? " (did you mean '" : "", dym ? dym : "", dym ? "'?)" : "");
}

int trace_synth_from_kv(trace_synth *p, const kv_param *kv, size_t n, const char *path, errbuf *e)
{
    for (size_t i = 0; i < n; i++) {
        errbuf ke;
        int rc = trace_synth_set(p, kv[i].key, kv[i].val, &ke);
        if (rc != MS_OK)
            return err_set(e, rc, "%s:%d:%d: error: %s", path ? path : "<scenario>", kv[i].line,
                           kv[i].col, ke.msg);
    }
    return trace_synth_check(p, e);
}

int trace_synth_check(const trace_synth *p, errbuf *e)
{
    for (size_t i = 0; i < synth_schema.n; i++) {
        const ys_field *k = &synth_fields[i];
        const char *at = (const char *)p + k->off;
        double v = k->type == YS_U32 ? *(const uint32_t *)at : *(const double *)at;
        if (!(v >= k->lo && v <= k->hi))
            return err_set(e, MS_ERR_RANGE,
                           "synthetic trace parameter %s = %g is outside "
                           "%g..%g",
                           k->key, v, k->lo, k->hi);
    }
    return MS_OK;
}

int trace_synth_write_yaml(const trace_synth *p, FILE *f)
{
    fprintf(f, "# synthetic trace parameters (sim/trace/TRACE_FORMAT.md)\n");
    for (size_t i = 0; i < synth_schema.n; i++) {
        const ys_field *k = &synth_fields[i];
        const char *at = (const char *)p + k->off;
        if (k->type == YS_U32)
            fprintf(f, "%s: %u\n", k->key, *(const uint32_t *)at);
        else
            fprintf(f, "%s: %.6g\n", k->key, *(const double *)at);
    }
    return ferror(f) ? MS_ERR_IO : MS_OK;
}

/* A flat "key: value" YAML mapping (comments allowed) of synthetic parameters. */
int trace_synth_read_yaml(trace_synth *p, const char *path, errbuf *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, MS_ERR_NOTFOUND, "%s: error: cannot open parameter file", path);
    fclose(f);
    yx_node *root;
    int rc = yx_parse_file(path, &root, e);
    if (rc)
        return rc;
    ys_ctx x = {path, e, 0};
    trace_synth q = *p; /* nothing changes on error */
    rc = ys_read(&x, root, &synth_schema, NULL, 0, &q);
    yx_free(root);
    if (rc == MS_OK && (rc = trace_synth_check(&q, e)) == MS_OK)
        *p = q;
    return rc;
}

/* ---- counter-based streams ------------------------------------------------------------ */

static uint64_t mix64(uint64_t z) { return synth_mix64(z); }

enum { ST_KEY = 1, ST_VAL, ST_HEAVY, ST_COPY, ST_FFN, ST_WO, ST_QUERY };

static uint64_t stream_prefix(uint64_t seed, int what, uint32_t layer, uint32_t head)
{
    return mix64(mix64(mix64(seed ^ (uint64_t)what) ^ layer) ^ head);
}

static uint64_t stream_key(uint64_t seed, int what, uint32_t layer, uint32_t head, uint32_t pos)
{
    return mix64(stream_prefix(seed, what, layer, head) ^ pos);
}

static double unit(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    return (double)(mix64(*s) >> 11) * 0x1.0p-53;
}

/* Standard normal pair by Box–Muller from a counter stream. */
static void normal2(uint64_t *s, double *a, double *b)
{
    double u1 = unit(s), u2 = unit(s);
    double r = sqrt(-2.0 * log(u1 > 0 ? u1 : 0x1.0p-53));
    *a = r * cos(2 * M_PI * u2);
    *b = r * sin(2 * M_PI * u2);
}

static void fill_normal(uint64_t *s, float *x, size_t n, double mu, double sd)
{
    for (size_t i = 0; i < n; i += 2) {
        double a, b;
        normal2(s, &a, &b);
        x[i] = (float)(mu + sd * a);
        if (i + 1 < n)
            x[i + 1] = (float)(mu + sd * b);
    }
}

/* ---- the synthetic source ------------------------------------------------------------- */

int trace_synth_reference_kernel;

/* Levels of the bridge over positions 0..2^32 (generator 2). */
#define BRIDGE_LEVELS 32

typedef struct synth_src {
    gsl_rng *rng;     /* query stream */
    gsl_rng *wo_rng;  /* W_o, reseeded per layer */
    uint32_t m;       /* locality frequency pairs */
    uint32_t dc;      /* content channels d - 2 - 2m */
    double *omega;    /* m */
    float *rff;       /* T × 2m: a·(cos ω_i s, sin ω_i s), shared by queries and keys */
    double *loc;      /* T: locality logit a²Σ cos(ω_i Δ)/√d at distance Δ */
    float *signs;     /* dc: one key's content signs (scratch, reference kernel) */
    float *nib;       /* S × G × ceil(dc/8) × 32: per byte, the nibble tables of bits 0–3,
                       * 4–7, per row of a group at the S = TRACE_SPAN_MAX positions of a span */
    float *tab;       /* S × G × ceil(dc/8) × 256: per-byte partial content logits */
    float *rowmax;    /* S × G: the largest logit of each row of a group so far */
    float *locr;      /* T: loc in float, reversed: locr[T − 1 − Δ] = loc[Δ] */
    uint64_t *words;  /* ceil(dc/64) × SYNTH_BLOCK: sign words of a block of keys */
    uint64_t *wcache; /* L × Hkv × ceil(dc/64) × ws: every key's sign words, filled on demand
                       * like the heavy bitmap (NULL: over trace_synth_words_cap) */
    uint32_t *wcache_done; /* L × Hkv: keys whose words wcache holds */
    size_t ws;             /* wcache's stride per word: T rounded up to 16, plus 16 */
    uint64_t *kvw;         /* ceil(dc/64): one key's sign words (synth_kv1) */
    float *span_cq;        /* TRACE_SPAN_MAX × L × H × dc: a span's content queries, or NULL */
    uint64_t *heavy;       /* L × Hkv × ceil(T/64) bits: heavy status, filled on demand */
    uint32_t *heavy_done;  /* L × Hkv: positions whose status is filled */
    uint64_t *prefix;  /* 4 × L × Hkv: stream_prefix of ST_KEY..ST_COPY per (layer, KV head) */
    double amp;        /* a */
    double rho;        /* AR(1) coefficient of the content query */
    double sigma_k;    /* Rademacher key amplitude */
    float *content;    /* L × H × dc: current content query (generator 1) */
    gsl_rng *node_rng; /* generator 2: splitmix64 behind GSL's ziggurat, seeded per node */
    float *node;       /* generator 2: BRIDGE_LEVELS + 2 node values, L × H × dc each */
    const float *lo[BRIDGE_LEVELS + 1], *hi[BRIDGE_LEVELS + 1]; /* bracket values per level */
    uint64_t lo_pos[BRIDGE_LEVELS + 1], hi_pos[BRIDGE_LEVELS + 1];
    uint32_t depth; /* levels of the bracket path that are valid */
    float *gq;      /* L × H × dc: the content queries mixed within KV groups (GQA), or NULL */
    double g_own, g_sum; /* the mix: own·c_h + sum·Σ_{h' in the group} c_h' (group_mix) */
    const float *cq;     /* content query of the current position (either generator) */
    uint32_t cur;        /* position of content (valid if started) */
    int started;
    float *ffn;        /* F */
    float **wo;        /* per layer (or one slot): dim × H·d */
    uint32_t wo_layer; /* layer held by the single slot */
} synth_src;

/* stream_prefix(seed, what, layer, g) of the per-(layer, KV head) streams, what in
 * ST_KEY..ST_COPY, from the table filled at open: a key's stream key is then one hash. */
static uint64_t head_prefix(const trace *t, int what, uint32_t layer, uint32_t g)
{
    const synth_src *s = t->impl;
    return s->prefix[((size_t)(what - ST_KEY) * t->s.n_layers + layer) * t->s.n_kv_heads + g];
}

/* Heavy status of a key: drawn at layer 0; at each later layer kept from the layer below
 * with probability layer_sim, else redrawn. Walking down from `layer` to the last redraw gives
 * the same value in expected 1/(1 − layer_sim) steps, or fewer where the bitmap of a layer
 * below already holds it. */
static int heavy_draw(const trace *t, uint32_t layer, uint32_t g, uint32_t pos)
{
    const trace_synth *p = &t->synth;
    if (pos < p->n_sinks)
        return 0;
    const synth_src *s = t->impl;
    size_t words = (t->s.n_tokens + 63) / 64;
    uint32_t l = layer;
    for (; l > 0; l--) {
        uint64_t sc = mix64(head_prefix(t, ST_COPY, l, g) ^ pos);
        if (unit(&sc) >= p->layer_sim)
            break;
        /* kept from layer l − 1: its bitmap holds the answer when filled that far (the
         * replay reads the layers in order, so it mostly is) */
        size_t lg = (size_t)(l - 1) * t->s.n_kv_heads + g;
        if (s->heavy_done[lg] > pos)
            return (int)(s->heavy[lg * words + pos / 64] >> (pos % 64) & 1);
    }
    uint64_t sh = mix64(head_prefix(t, ST_HEAVY, l, g) ^ pos);
    return unit(&sh) < p->heavy_frac;
}

/* Cached heavy status (a bitmap per layer and KV head, filled up to the largest position
 * asked for: T/8 bytes each). */
static int is_heavy(const trace *t, uint32_t layer, uint32_t g, uint32_t pos)
{
    synth_src *s = t->impl;
    size_t lg = (size_t)layer * t->s.n_kv_heads + g, words = (t->s.n_tokens + 63) / 64;
    uint64_t *bits = s->heavy + lg * words;
    for (uint32_t j = s->heavy_done[lg]; j <= pos; j++)
        if (heavy_draw(t, layer, g, j))
            bits[j / 64] |= 1ull << (j % 64);
    if (s->heavy_done[lg] <= pos)
        s->heavy_done[lg] = pos + 1;
    return (int)(bits[pos / 64] >> (pos % 64) & 1);
}

size_t trace_synth_words_cap = SYNTH_WORDS_CAP;

/* The sign words of keys 0..n-1 of (layer, KV head g) in the cache, filled up to n (word k of
 * key j at [k·ws + j]), or NULL when the trace keeps no cache. */
static const uint64_t *key_words(trace *t, uint32_t layer, uint32_t g, uint32_t n)
{
    synth_src *s = t->impl;
    if (!s->wcache)
        return NULL;
    size_t lg = (size_t)layer * t->s.n_kv_heads + g, nw = (s->dc + 63) / 64;
    uint64_t *w = s->wcache + lg * nw * s->ws;
    uint32_t done = s->wcache_done[lg];
    if (done < n) {
        synth_kern_words(head_prefix(t, ST_KEY, layer, g), done, n - done, (uint32_t)nw, s->ws,
                         w + done);
        s->wcache_done[lg] = n;
    }
    return w;
}

void trace_synth_keep_words(trace *t)
{
    synth_src *s = t->impl;
    size_t lg = (size_t)t->s.n_layers * t->s.n_kv_heads, nw = (s->dc + 63) / 64;
    if (s->wcache || !s->dc ||
        (double)lg * nw * s->ws * sizeof(uint64_t) > (double)trace_synth_words_cap)
        return;
    /* untouched pages cost nothing: memory grows with the keys whose rows are computed */
    s->wcache = calloc(lg * nw * s->ws, sizeof *s->wcache);
    s->wcache_done = calloc(lg, sizeof *s->wcache_done);
    if (!s->wcache || !s->wcache_done) { /* no room: each row hashes its keys */
        free(s->wcache);
        free(s->wcache_done);
        s->wcache = NULL;
        s->wcache_done = NULL;
    }
}

size_t trace_synth_words_bytes(const trace *t)
{
    const synth_src *s = t->synthetic ? t->impl : NULL;
    if (!s || !s->wcache)
        return 0;
    return (size_t)t->s.n_layers * t->s.n_kv_heads * ((s->dc + 63) / 64) * s->ws *
           sizeof *s->wcache;
}

/* Key and/or value of KV head g at (layer, pos). Values are Irwin–Hall(4) draws scaled to
 * unit variance (near-Gaussian, |v| ≤ √12): one 64-bit counter draw per value, so a policy
 * gathering thousands of values per step stays cheap. */
static void synth_kv1(trace *t, uint32_t layer, uint32_t g, uint32_t pos, float *k, float *v)
{
    synth_src *s = t->impl;
    uint32_t d = t->s.head_dim;
    if (k) {
        float rt = sqrtf((float)d);
        k[0] = pos < t->synth.n_sinks ? (float)(t->synth.sink * rt) : 0.0f;
        k[1] = is_heavy(t, layer, g, pos) ? (float)(t->synth.heavy * rt) : 0.0f;
        memcpy(k + 2, s->rff + (size_t)pos * 2 * s->m, 2 * s->m * sizeof(float));
        size_t lg = (size_t)layer * t->s.n_kv_heads + g, nw = (s->dc + 63) / 64;
        if (s->wcache && pos < s->wcache_done[lg]) {
            synth_kern_signs(s->wcache + lg * nw * s->ws + pos, s->ws, s->dc, (float)s->sigma_k,
                             k + 2 + 2 * s->m);
        } else {
            uint64_t st = mix64(head_prefix(t, ST_KEY, layer, g) ^ pos);
            for (size_t w = 0; w < nw; w++) {
                st += 0x9E3779B97F4A7C15ull;
                s->kvw[w] = mix64(st);
            }
            synth_kern_signs(s->kvw, 1, s->dc, (float)s->sigma_k, k + 2 + 2 * s->m);
        }
    }
    if (v) {
        /* sum of 4 uniforms on [0, 65536): mean 131070, variance 4·(65536² − 1)/12 */
        const float scale = (float)(1.0 / sqrt(4.0 * (65536.0 * 65536.0 - 1) / 12.0));
        synth_kern_values(mix64(head_prefix(t, ST_VAL, layer, g) ^ pos), d, scale, v);
    }
}

static void synth_kv(trace *t, uint32_t layer, uint32_t pos, float *k, float *v)
{
    uint32_t d = t->s.head_dim;
    for (uint32_t g = 0; g < t->s.n_kv_heads; g++)
        synth_kv1(t, layer, g, pos, k ? k + (size_t)g * d : NULL, v ? v + (size_t)g * d : NULL);
}

/* The reference kernel (kept for the tests: trace_synth_reference_kernel): the same logit
 * model with every key's content signs expanded to floats and a scalar expf softmax. */
static int synth_att_row_ref(trace *t, uint32_t layer)
{
    synth_src *s = t->impl;
    const trace_shape *sh = &t->s;
    uint32_t pos = t->pos, n = pos + 1, G = sh->n_heads / sh->n_kv_heads;
    double rt = sqrt((double)sh->head_dim), sk = s->sigma_k / rt;
    for (uint32_t g = 0; g < sh->n_kv_heads; g++) {
        uint64_t prefix = stream_prefix(t->seed, ST_KEY, layer, g);
        is_heavy(t, layer, g, pos); /* fills the bitmap up to pos */
        for (uint32_t j = 0; j < n; j++) {
            double base = s->loc[pos - j] + (j < t->synth.n_sinks ? t->synth.sink : 0) +
                          (is_heavy(t, layer, g, j) ? t->synth.heavy : 0);
            uint64_t st = mix64(prefix ^ j);
            for (uint32_t i0 = 0; i0 < s->dc; i0 += 64) {
                st += 0x9E3779B97F4A7C15ull;
                uint64_t bits = mix64(st);
                uint32_t m = s->dc - i0 < 64 ? s->dc - i0 : 64;
                for (uint32_t i = 0; i < m; i++)
                    s->signs[i0 + i] = (float)((int)(bits >> i & 1) * 2 - 1);
            }
            for (uint32_t h = g * G; h < (g + 1) * G; h++) {
                const float *c = s->cq + ((size_t)layer * sh->n_heads + h) * s->dc;
                float acc[4] = {0, 0, 0, 0};
                uint32_t i = 0;
                for (; i + 4 <= s->dc; i += 4)
                    for (int r = 0; r < 4; r++)
                        acc[r] += c[i + r] * s->signs[i + r];
                for (; i < s->dc; i++)
                    acc[0] += c[i] * s->signs[i];
                float dot = (acc[0] + acc[1]) + (acc[2] + acc[3]);
                t->att[(size_t)h * n + j] = (float)(base + sk * dot);
            }
        }
    }
    trace_softmax_rows(t->att, sh->n_heads, n);
    return 1;
}

/* Attention rows of the current position straight from the logit model (same values as
 * softmax(q·k/√d) over synth_kv's keys up to float rounding, without building the keys):
 * logit = sink·[j < n_sinks] + heavy·[heavy] + loc[pos − j] + σ_k·(c_h · signs_j)/√d.
 * The content dot product never expands a key's sign bits: per query head, a table of 256
 * partial sums per byte of the 64-bit sign word gives σ_k·Σ c_i·(±1)/√d over those 8
 * channels, so a key costs one lookup per 8 (its sign words are hashed once per trace,
 * key_words). The base terms are added in the lookups; the hashes, lookups and softmax are
 * synth_kern.c's loops (AVX-512 where the CPU has it, bit-identical to the portable ones). */
static void att_rows(trace *t, uint32_t layer, uint32_t g0, uint32_t g1, uint32_t pos0,
                     uint32_t cnt, const float *const *cq, float *const *out)
{
    synth_src *s = t->impl;
    const trace_shape *sh = &t->s;
    uint32_t G = sh->n_heads / sh->n_kv_heads, last = pos0 + cnt - 1, nl = last + 1;
    uint32_t nw = (s->dc + 63) / 64, nb = (s->dc + 7) / 8;
    size_t words = (sh->n_tokens + 63) / 64;
    double rt = sqrt((double)sh->head_dim), sk = s->sigma_k / rt;
    float sink = (float)t->synth.sink, heavy = (float)t->synth.heavy;
    uint32_t ns = t->synth.n_sinks;
    int wide = synth_kern_wide();
    for (uint32_t g = g0; g < g1; g++) {
        uint64_t prefix = head_prefix(t, ST_KEY, layer, g);
        is_heavy(t, layer, g, last); /* fills the bitmap up to the last position */
        const uint64_t *hb = s->heavy + ((size_t)layer * sh->n_kv_heads + g) * words;
        /* per position and query head of the group: byte tables of σ_k/√d · Σ c_i·(2·bit_i − 1),
         * each the pairwise float sums of two nibble tables (in double, then rounded) */
        for (uint32_t r = 0; r < cnt * G; r++) {
            const float *c = cq[r / G] + ((size_t)layer * sh->n_heads + g * G + r % G) * s->dc;
            float *nib = s->nib + (size_t)r * nb * 32;
            for (uint32_t b = 0; b < nb; b++)
                for (int half = 0; half < 2; half++) {
                    float *o = nib + 32 * b + 16 * half;
                    uint32_t i0 = b * 8 + 4 * (uint32_t)half;
                    for (uint32_t v = 0; v < 16; v++) {
                        double sum = 0;
                        for (uint32_t i = 0; i < 4 && i0 + i < s->dc; i++)
                            sum += v >> i & 1 ? c[i0 + i] : -(double)c[i0 + i];
                        o[v] = (float)(sk * sum);
                    }
                }
            s->rowmax[r] = -INFINITY;
            if (wide)
                continue; /* the wide lookup permutes the nibble tables themselves */
            for (uint32_t b = 0; b < nb; b++) {
                const float *lo = nib + 32 * b, *hi = lo + 16;
                float *tb = s->tab + ((size_t)r * nb + b) * 256;
                for (uint32_t vh = 0; vh < 16; vh++)
                    for (uint32_t vl = 0; vl < 16; vl++)
                        tb[vh * 16 + vl] = hi[vh] + lo[vl];
            }
        }
        /* keys in blocks: their sign words first (from the cache, or hashed once for every
         * position of the span), then every row's lookups over the block */
        const uint64_t *wc = key_words(t, layer, g, nl);
        for (uint32_t j0 = 0; j0 < nl; j0 += SYNTH_BLOCK) {
            const uint64_t *wb = wc ? wc + j0 : s->words;
            size_t ws = wc ? s->ws : SYNTH_BLOCK;
            if (!wc)
                synth_kern_words(prefix, j0, nl - j0 < SYNTH_BLOCK ? nl - j0 : SYNTH_BLOCK, nw,
                                 SYNTH_BLOCK, s->words);
            for (uint32_t i = 0; i < cnt; i++) {
                uint32_t n = pos0 + i + 1;
                if (j0 >= n)
                    continue;
                uint32_t nj = n - j0 < SYNTH_BLOCK ? n - j0 : SYNTH_BLOCK;
                /* the base terms, the same for every head of the group (added in the lookups) */
                synth_base bs = {s->locr + (t->s.n_tokens - 1 - (pos0 + i)), hb, heavy, sink, ns};
                for (uint32_t hh = 0; hh < G; hh++) {
                    uint32_t r = i * G + hh;
                    float mx = synth_kern_lookup(
                        &bs, j0, wb, ws, nj, nw, nb, s->nib + (size_t)r * nb * 32,
                        s->tab + (size_t)r * nb * 256, out[i] + (size_t)(g * G + hh) * n + j0);
                    s->rowmax[r] = mx > s->rowmax[r] ? mx : s->rowmax[r];
                }
            }
        }
        /* the group's rows while they are still in cache, from the maxima of their lookups */
        for (uint32_t r = 0; r < cnt * G; r++) {
            uint32_t n = pos0 + r / G + 1;
            synth_kern_softmax_max(out[r / G] + (size_t)(g * G + r % G) * n, n, s->rowmax[r]);
        }
    }
}

static int synth_att_row(trace *t, uint32_t layer)
{
    synth_src *s = t->impl;
    if (trace_synth_reference_kernel)
        return synth_att_row_ref(t, layer);
    att_rows(t, layer, 0, t->s.n_kv_heads, t->pos, 1, &s->cq, &t->att);
    return 1;
}

/* A span's queries: the content query of its i-th position, kept as the position is sought. */
static int synth_span_keep(trace *t, uint32_t i)
{
    synth_src *s = t->impl;
    size_t n = (size_t)t->s.n_layers * t->s.n_heads * s->dc;
    if (!s->span_cq && !(s->span_cq = malloc(TRACE_SPAN_MAX * n * sizeof *s->span_cq + 1)))
        return MS_ERR_NOMEM;
    memcpy(s->span_cq + i * n, s->cq, n * sizeof *s->span_cq);
    return MS_OK;
}

/* The rows of KV head g's query heads at positions pos0..pos0+cnt-1 (kept by synth_span_keep)
 * and layer, position i's at out + i·H·T (as trace_att's block): one pass over the keys for
 * all of them. */
static void synth_att_span(trace *t, uint32_t layer, uint32_t g, uint32_t pos0, uint32_t cnt,
                           float *out)
{
    synth_src *s = t->impl;
    size_t n = (size_t)t->s.n_layers * t->s.n_heads * s->dc;
    const float *cq[TRACE_SPAN_MAX];
    float *o[TRACE_SPAN_MAX];
    for (uint32_t i = 0; i < cnt; i++) {
        cq[i] = s->span_cq + i * n;
        o[i] = out + (size_t)i * t->s.n_heads * t->s.n_tokens;
    }
    att_rows(t, layer, g, g + 1, pos0, cnt, cq, o);
}

/* ---- generator 1: the sequential query stream of earlier builds ------------------------ */

/* Advances the content queries from position cur to cur+1 (or starts them at 0). */
static void content_step(trace *t, synth_src *s)
{
    size_t n = (size_t)t->s.n_layers * t->s.n_heads * s->dc;
    double a = s->started ? s->rho : 0.0, b = sqrt(1.0 - a * a);
    for (size_t i = 0; i < n; i++)
        s->content[i] = (float)(a * s->content[i] + b * gsl_ran_gaussian_ziggurat(s->rng, 1.0));
    s->cur = s->started ? s->cur + 1 : 0;
    s->started = 1;
}

static void stream_seek(trace *t, synth_src *s, uint32_t pos)
{
    if (!s->started || pos < s->cur) {
        gsl_rng_set(s->rng, (unsigned long)t->seed);
        s->started = 0;
        content_step(t, s);
    }
    while (s->cur < pos)
        content_step(t, s);
    s->cq = s->content;
}

/* ---- generator 2: the content query stream as a Gaussian bridge -----------------------
 * The content queries c_t (AR(1) with coefficient ρ and unit variance, per channel) are
 * defined on positions 0..2^32 by dyadic refinement: c_0 ~ N(0, 1) and
 * c_{2^32} | c_0 ~ N(ρ^{2^32} c_0, 1 − ρ^{2^33}) first, then the midpoint m of each bracket
 * [a, b] with b − a = 2h from its law given the two ends (AR(1) is Markov, so the ends are all
 * it depends on):
 *   c_m | c_a, c_b ~ N(ρ^h/(1 + ρ^{2h}) · (c_a + c_b), (1 − ρ^{2h})/(1 + ρ^{2h})),
 * with its normals drawn from a counter stream keyed by (seed, m). The joint law of the stream
 * is exactly the AR(1)'s, every value is a fixed function of (seed, position), and a position
 * is reached in at most 32 refinements of L·H·dc values each, from anywhere: the path of
 * brackets is cached, so moving forward by one costs about one refinement. */

/* splitmix64 as a GSL generator (32-bit outputs), so GSL's ziggurat draws the normals of a
 * node from a stream seeded by the node's key. */
static void sm_set(void *st, unsigned long seed) { *(uint64_t *)st = seed; }
static unsigned long sm_get(void *st)
{
    uint64_t *x = st;
    *x += 0x9E3779B97F4A7C15ull;
    return (unsigned long)(mix64(*x) >> 32);
}
static double sm_get_double(void *st) { return (double)sm_get(st) * 0x1.0p-32; }
static const gsl_rng_type splitmix_type = {
    "mpcsim-splitmix64", 0xffffffffUL, 0, sizeof(uint64_t), sm_set, sm_get, sm_get_double};

/* ρ^k and 1 − ρ^{2k} without cancellation. */
static void rho_pow(double rho, double k, double *rk, double *one_minus_r2k)
{
    if (rho >= 1) {
        *rk = 1;
        *one_minus_r2k = 0;
    } else if (rho <= 0) {
        *rk = 0;
        *one_minus_r2k = 1;
    } else {
        double lr = log(rho);
        *rk = exp(k * lr);
        *one_minus_r2k = -expm1(2 * k * lr);
    }
}

/* out = ca·(a + b) + sd·z (a, b may be NULL: 0), z the node's normals. */
static void bridge_node(trace *t, synth_src *s, uint64_t m, const float *a, const float *b,
                        double ca, double cb, double sd, float *out)
{
    size_t n = (size_t)t->s.n_layers * t->s.n_heads * s->dc;
    gsl_rng_set(s->node_rng, (unsigned long)mix64(stream_prefix(t->seed, ST_QUERY, 0, 0) ^ m));
    for (size_t i = 0; i < n; i++) {
        double v = sd * gsl_ran_gaussian_ziggurat(s->node_rng, 1.0);
        if (a)
            v += ca * a[i];
        if (b)
            v += cb * b[i];
        out[i] = (float)v;
    }
}

static void bridge_seek(trace *t, synth_src *s, uint32_t pos)
{
    size_t n = (size_t)t->s.n_layers * t->s.n_heads * s->dc;
    const uint64_t end = 1ull << BRIDGE_LEVELS;
    uint32_t old = s->depth, k;
    if (!old) {
        double rk, e2;
        rho_pow(s->rho, (double)end, &rk, &e2);
        bridge_node(t, s, 0, NULL, NULL, 0, 0, 1, s->node);
        bridge_node(t, s, end, s->node, NULL, rk, 0, sqrt(e2), s->node + n);
        s->lo[0] = s->node;
        s->hi[0] = s->node + n;
        s->lo_pos[0] = 0;
        s->hi_pos[0] = end;
        old = 1;
    }
    /* the deepest cached bracket that holds pos */
    for (k = old - 1; k > 0 && !(s->lo_pos[k] <= pos && pos <= s->hi_pos[k]); k--)
        ;
    int reuse = k + 1 < old; /* the cached path went below level k: its midpoint is there */
    for (;;) {
        if (pos == s->lo_pos[k] || pos == s->hi_pos[k]) {
            s->cq = pos == s->lo_pos[k] ? s->lo[k] : s->hi[k];
            break;
        }
        uint64_t h = (s->hi_pos[k] - s->lo_pos[k]) / 2, mp = s->lo_pos[k] + h;
        float *mv = s->node + (size_t)(2 + k) * n;
        if (!reuse) {
            double rh, e2;
            rho_pow(s->rho, (double)h, &rh, &e2);
            double r2h = 1 - e2, c = rh / (1 + r2h);
            bridge_node(t, s, mp, s->lo[k], s->hi[k], c, c, sqrt(e2 / (1 + r2h)), mv);
        }
        reuse = 0;
        s->lo[k + 1] = pos < mp ? s->lo[k] : mv;
        s->lo_pos[k + 1] = pos < mp ? s->lo_pos[k] : mp;
        s->hi[k + 1] = pos < mp ? mv : s->hi[k];
        s->hi_pos[k + 1] = pos < mp ? mp : s->hi_pos[k];
        k++;
    }
    s->depth = k + 1;
}

/* ---- grouped-query attention ----------------------------------------------------------
 * The streams above give every query head an independent content query c_h (unit variance
 * per channel). With G query heads per KV head, head h of group g reads instead
 *   c'_h = own·c_h + sum·Σ_{h' in g} c_h',
 * with own = √(1 − r) and sum the root ≥ 0 of G·sum² + 2·own·sum − r = 0, so that every c'_h
 * keeps unit variance and two heads of a group correlate by exactly r = group_sim (channel by
 * channel, at every position). A fixed linear map of independent AR(1) streams of the same
 * coefficient is again such a stream, so the drift is unchanged. The keys, sinks, heavy hitters
 * and locality are already shared by a group; their content logits σ_k·(c'_h · signs_j)/√d
 * then correlate by r across the keys of a row. */
static void group_mix_init(trace *t, synth_src *s)
{
    double r = t->synth.group_sim, G = (double)(t->s.n_heads / t->s.n_kv_heads);
    s->g_own = sqrt(1 - r);
    s->g_sum = (-s->g_own + sqrt(s->g_own * s->g_own + G * r)) / G;
}

static void group_mix(trace *t, synth_src *s)
{
    uint32_t G = t->s.n_heads / t->s.n_kv_heads, dc = s->dc;
    for (uint32_t l = 0; l < t->s.n_layers; l++)
        for (uint32_t g = 0; g < t->s.n_kv_heads; g++) {
            size_t h0 = ((size_t)l * t->s.n_heads + (size_t)g * G) * dc;
            for (uint32_t i = 0; i < dc; i++) {
                double sum = 0;
                for (uint32_t h = 0; h < G; h++)
                    sum += s->cq[h0 + (size_t)h * dc + i];
                for (uint32_t h = 0; h < G; h++) {
                    size_t at = h0 + (size_t)h * dc + i;
                    s->gq[at] = (float)(s->g_own * s->cq[at] + s->g_sum * sum);
                }
            }
        }
    s->cq = s->gq;
}

static int synth_seek(trace *t, uint32_t pos, errbuf *e)
{
    synth_src *s = t->impl;
    if (t->synth.generator == 1)
        stream_seek(t, s, pos);
    else
        bridge_seek(t, s, pos);
    if (s->gq)
        group_mix(t, s);
    uint32_t d = t->s.head_dim;
    for (uint32_t l = 0; l < t->s.n_layers; l++)
        for (uint32_t h = 0; h < t->s.n_heads; h++) {
            float *q = t->q + ((size_t)l * t->s.n_heads + h) * d;
            q[0] = 1.0f;
            q[1] = 1.0f;
            memcpy(q + 2, s->rff + (size_t)pos * 2 * s->m, 2 * s->m * sizeof(float));
            memcpy(q + 2 + 2 * s->m, s->cq + ((size_t)l * t->s.n_heads + h) * s->dc,
                   s->dc * sizeof(float));
        }
    return MS_OK;
}

static const float *synth_ffn(trace *t, uint32_t layer)
{
    synth_src *s = t->impl;
    /* P(pre ≤ 0) = Φ(−μ) = ffn_sparsity */
    double sp = t->synth.ffn_sparsity, mu;
    if (sp <= 0)
        mu = 40;
    else if (sp >= 1)
        mu = -40;
    else
        mu = -gsl_cdf_ugaussian_Pinv(sp);
    uint64_t st = stream_key(t->seed, ST_FFN, layer, 0, t->pos);
    fill_normal(&st, s->ffn, t->s.ffn_dim, mu, 1.0);
    return s->ffn;
}

/* W_o of every layer is cached when all of them fit in SYNTH_WO_CACHE bytes (up to 7B/8B
 * shapes: llama-2-7b takes 64 MiB per layer, 2 GiB in all, generated once in ~5 s); larger
 * models keep one layer and regenerate it when another layer is asked for. */
#define SYNTH_WO_CACHE (4ull << 30)

static const float *synth_wo(trace *t, uint32_t layer)
{
    synth_src *s = t->impl;
    size_t cols = (size_t)t->s.n_heads * t->s.head_dim, n = (size_t)t->s.dim * cols;
    int all = (uint64_t)n * t->s.n_layers * sizeof(float) <= SYNTH_WO_CACHE;
    uint32_t slot = all ? layer : 0;
    if (!s->wo && !(s->wo = calloc(all ? t->s.n_layers : 1, sizeof *s->wo)))
        return NULL;
    if (s->wo[slot] && (all || s->wo_layer == layer))
        return s->wo[slot];
    if (!s->wo[slot] && !(s->wo[slot] = malloc(n * sizeof(float))))
        return NULL;
    /* a GSL mt19937 per layer, seeded from the trace seed and the layer */
    gsl_rng_set(s->wo_rng, (unsigned long)stream_key(t->seed, ST_WO, layer, 0, 0));
    double sd = 1.0 / sqrt((double)cols);
    float *w = s->wo[slot];
    for (size_t i = 0; i < n; i++)
        w[i] = (float)gsl_ran_gaussian_ziggurat(s->wo_rng, sd);
    s->wo_layer = layer;
    return w;
}

static const float *synth_logits(trace *t) { return NULL; }

static void synth_close(trace *t)
{
    synth_src *s = t->impl;
    if (!s)
        return;
    if (s->rng)
        gsl_rng_free(s->rng);
    if (s->wo_rng)
        gsl_rng_free(s->wo_rng);
    if (s->node_rng)
        gsl_rng_free(s->node_rng);
    free(s->node);
    free(s->omega);
    free(s->rff);
    free(s->loc);
    free(s->signs);
    free(s->nib);
    free(s->tab);
    free(s->rowmax);
    free(s->locr);
    free(s->words);
    free(s->wcache);
    free(s->wcache_done);
    free(s->kvw);
    free(s->span_cq);
    free(s->heavy);
    free(s->heavy_done);
    free(s->prefix);
    free(s->content);
    free(s->gq);
    if (s->wo) {
        size_t cols = (size_t)t->s.n_heads * t->s.head_dim, n = (size_t)t->s.dim * cols;
        int all = (uint64_t)n * t->s.n_layers * sizeof(float) <= SYNTH_WO_CACHE;
        for (uint32_t l = 0; l < (all ? t->s.n_layers : 1); l++)
            free(s->wo[l]);
        free(s->wo);
    }
    free(s->ffn);
    free(s);
}

/* the reference kernel computes one row at a time */
static uint32_t synth_span_max(const trace *t)
{
    (void)t;
    return trace_synth_reference_kernel ? 0 : TRACE_SPAN_MAX;
}

static const trace_source synth_source = {synth_seek,     synth_kv,       synth_kv1,
                                          synth_att_row,  synth_ffn,      synth_logits,
                                          synth_wo,       synth_close,    synth_span_keep,
                                          synth_att_span, synth_span_max, trace_synth_keep_words};

/* Locality frequencies, amplitude and the AR(1) coefficient that gives the requested drift. */
static void synth_layout(trace *t, synth_src *s)
{
    const trace_synth *p = &t->synth;
    uint32_t d = t->s.head_dim;
    s->m = d >= 6 ? (d - 2) / 4 : 0;
    if (s->m > 32)
        s->m = 32;
    s->dc = d - 2 - 2 * s->m;
    double csum = 0;
    for (uint32_t i = 0; i < s->m; i++) {
        s->omega[i] = gsl_cdf_ugaussian_Pinv(0.5 + 0.5 * (i + 0.5) / s->m) / p->window;
        csum += cos(s->omega[i]);
    }
    /* local · κ(Δ) = a² Σ cos(ω_i Δ) / √d with κ(0) = 1 */
    s->amp = s->m ? sqrt(p->local * sqrt((double)d) / s->m) : 0.0;
    s->sigma_k = s->dc ? p->noise * sqrt((double)d / s->dc) : 0.0;
    /* E cos(q_t, q_t+1) ≈ (2 + a² Σ cos ω_i + ρ dc) / (2 + a² m + dc) */
    double a2 = s->amp * s->amp, norm = 2 + a2 * s->m + s->dc;
    double rho = s->dc ? ((1 - p->drift) * norm - 2 - a2 * csum) / s->dc : 1.0;
    s->rho = rho < 0 ? 0 : rho > 1 ? 1 : rho;
}

int trace_synth_attach(trace *t, const model_cfg *cfg, errbuf *e)
{
    synth_src *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    t->impl = s;
    t->src = &synth_source;
    s->rng = gsl_rng_alloc(gsl_rng_mt19937);
    s->wo_rng = gsl_rng_alloc(gsl_rng_mt19937);
    s->omega = calloc(32, sizeof *s->omega);
    s->ffn = calloc(t->s.ffn_dim ? t->s.ffn_dim : 1, sizeof(float));
    if (!s->rng || !s->wo_rng || !s->omega || !s->ffn)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    synth_layout(t, s);
    size_t nc = (size_t)t->s.n_layers * t->s.n_heads * (s->dc ? s->dc : 1);
    if (t->synth.generator == 1)
        s->content = calloc(nc, sizeof(float));
    else if ((s->node_rng = gsl_rng_alloc(&splitmix_type)))
        s->node = malloc((BRIDGE_LEVELS + 2) * nc * sizeof(float));
    s->rff = malloc(((size_t)t->s.n_tokens * 2 * s->m + 1) * sizeof(float));
    s->loc = calloc(t->s.n_tokens, sizeof *s->loc);
    s->signs = calloc(s->dc ? s->dc : 1, sizeof *s->signs);
    size_t rows = (size_t)TRACE_SPAN_MAX * (t->s.n_heads / t->s.n_kv_heads);
    s->tab = malloc((rows * ((s->dc + 7) / 8) * 256 + 1) * sizeof *s->tab);
    s->locr = malloc(((size_t)t->s.n_tokens + 1) * sizeof *s->locr);
    s->rowmax = malloc(rows * sizeof *s->rowmax);
    s->nib = malloc((rows * ((s->dc + 7) / 8) * 32 + 1) * sizeof *s->nib);
    /* zeroed: the wide loops read a block's slots past its last key (and ignore them) */
    s->words = calloc(((size_t)(s->dc + 63) / 64 + 1) * SYNTH_BLOCK, sizeof *s->words);
    size_t lg = (size_t)t->s.n_layers * t->s.n_kv_heads, nw = (s->dc + 63) / 64;
    s->ws = ((size_t)t->s.n_tokens + 15) / 16 * 16 + 16;
    s->kvw = calloc(nw + 1, sizeof *s->kvw);
    s->heavy = calloc(lg * ((t->s.n_tokens + 63) / 64), sizeof *s->heavy);
    s->heavy_done = calloc(lg, sizeof *s->heavy_done);
    if ((s->prefix = malloc(4 * lg * sizeof *s->prefix)))
        for (int w = ST_KEY; w <= ST_COPY; w++)
            for (uint32_t l = 0; l < t->s.n_layers; l++)
                for (uint32_t g = 0; g < t->s.n_kv_heads; g++)
                    s->prefix[((size_t)(w - ST_KEY) * t->s.n_layers + l) * t->s.n_kv_heads + g] =
                        stream_prefix(t->seed, w, l, g);
    void *cbuf = t->synth.generator == 1 ? (void *)s->content : (void *)s->node;
    /* an MHA shape (or group_sim 0) reads the streams as they are: its traces do not change */
    int mix = t->s.n_heads > t->s.n_kv_heads && t->synth.group_sim > 0 && s->dc;
    if (mix) {
        group_mix_init(t, s);
        if (!(s->gq = malloc(nc * sizeof *s->gq)))
            return err_set(e, MS_ERR_NOMEM, "out of memory");
    }
    if (!cbuf || !s->rff || !s->loc || !s->signs || !s->rowmax || !s->nib || !s->tab || !s->locr ||
        !s->words || !s->kvw || !s->heavy || !s->heavy_done || !s->prefix)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    for (uint32_t dd = 0; dd < t->s.n_tokens; dd++) {
        double c = 0;
        for (uint32_t i = 0; i < s->m; i++)
            c += cos(s->omega[i] * dd);
        s->loc[dd] = s->amp * s->amp * c / sqrt((double)t->s.head_dim);
        s->locr[t->s.n_tokens - 1 - dd] = (float)s->loc[dd];
    }
    for (uint32_t pos = 0; pos < t->s.n_tokens; pos++)
        for (uint32_t i = 0; i < s->m; i++) {
            s->rff[((size_t)pos * s->m + i) * 2] = (float)(s->amp * cos(s->omega[i] * pos));
            s->rff[((size_t)pos * s->m + i) * 2 + 1] = (float)(s->amp * sin(s->omega[i] * pos));
        }
    return MS_OK;
}

int trace_open_synth(const model_cfg *cfg, uint32_t n_tokens, uint64_t seed, const trace_synth *p,
                     trace **out, errbuf *e)
{
    *out = NULL;
    int rc = trace_synth_check(p, e);
    if (rc != MS_OK)
        return rc;
    if (!n_tokens || !cfg->n_layers || !cfg->n_heads || !cfg->n_kv_heads ||
        cfg->n_heads % cfg->n_kv_heads || cfg->head_dim < 2)
        return err_set(e, MS_ERR_INPUT,
                       "model '%s': a synthetic trace needs tokens > 0, "
                       "heads divisible by kv_heads and head_dim >= 2",
                       cfg->name);
    trace *t = calloc(1, sizeof *t);
    if (!t)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    t->s = (trace_shape){
        cfg->n_layers, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim, cfg->dim, cfg->ffn_dim, 0,
        n_tokens};
    snprintf(t->model, sizeof t->model, "%s", cfg->name);
    t->synthetic = 1;
    t->seed = seed;
    t->synth = *p;
    t->arrays = 1u << TRACE_Q | 1u << TRACE_K | 1u << TRACE_V | 1u << TRACE_ATT;
    if (cfg->ffn_dim)
        t->arrays |= 1u << TRACE_FFN;
    if (cfg->dim)
        t->arrays |= 1u << TRACE_WO;
    rc = trace_alloc_common(t);
    if (rc != MS_OK)
        rc = err_set(e, MS_ERR_NOMEM, "out of memory for a %u-token synthetic trace", n_tokens);
    else
        rc = trace_synth_attach(t, cfg, e);
    if (rc != MS_OK) {
        trace_close(t);
        return rc;
    }
    *out = t;
    return MS_OK;
}
