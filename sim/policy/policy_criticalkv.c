/* policy_criticalkv.c — CriticalKV (FFY0/AdaKV-in-NVIDIA-kvpress, branch criticalkv,
 * kvpress/presses/criticalkv_press.py; arXiv 2502.03805): output-perturbation-aware selection
 * wrapped around SnapKV's window score, once at the end of the prompt.
 *
 *   base[j]  = SnapKV score (window mean, pooled, GQA group mean); the window itself is padded
 *              with max(base)+1 so it is never evicted (kvpress snapkv_press.py)
 *   n_keep   = capacity (per KV head, incl. the window), only if P > capacity
 *   S1       = topk(base, int(n_keep · first_stage_ratio))
 *   proj[j]  = mean over the group's query heads h of ‖W_o^h · V_j‖₁
 *   score[j] = (base[j] + eps) · proj[j];  score[S1] = +inf;  keep = topk(score, n_keep)
 * The budget is given as a capacity (as snapkv) instead of kvpress's compression_ratio, so the
 * two are comparable at equal kept counts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pcheck.h"
#include "policy.h"
#include "protocols/base/simd.h"

/* Positions whose ‖W_o^h V_j‖₁ are computed together: their sums y_j in registers (eight of
 * four lanes, or four of eight under AVX2). Each lane adds its products in the head_dim order a
 * position's own sum takes, a product then a sum (ISO C: gcc contracts nothing into an FMA), so
 * every figure is the one-position-at-a-time one to the bit. */
#define CKV_BLK 32
typedef float ckv_v4 __attribute__((vector_size(16), aligned(4))); /* loads at any float */
typedef float ckv_v8 __attribute__((vector_size(32), aligned(4)));

static const policy_param ckv_params[] = {
    {"window", "32", "SnapKV observation window of the base score", NULL, 1, 1e9, 1},
    {"kernel", "7", "SnapKV pooling kernel", NULL, 1, 1e6, 1},
    {"pooling", "maxpool", "pooling of the votes", "maxpool|avgpool", 0, 0, 0},
    {"capacity", "1024", "kept prompt entries per KV head incl. the window", NULL, 1, 1e9, 1},
    {"first_stage_ratio", "0.5", "budget share chosen on attention alone (stage 1)", NULL, 0, 1, 0},
    {"eps", "1e-4", "added to the base score before weighting by the value norm", NULL, 0, 1e3, 0},
};

typedef struct ckv_state {
    snap_core core;
    uint32_t capacity;
    double fsr, eps;
    float *proj;    /* [L][Hkv][P] mean ‖W_o^h V_j‖₁ */
    uint8_t *alive; /* [L][Hkv][P] */
    float *base, *score;
    uint32_t *work, *sel;
    float *mag;      /* [L][4]: the largest |V|, |W_o|, proj · G and base (window pad included) */
    float *base_all; /* [L][Hkv][P]: the base, the window padded (stage 1's scores) */
    uint8_t *s1;     /* [L][Hkv][P]: stage 1's set */
    /* proj is computed CKV_BLK positions at a time, W_o read once per block instead of once
     * per position (at 7B shapes it is 64 MB a layer): each layer's pending rows */
    float *vbuf;    /* [L][CKV_BLK][Hkv·d] the pending positions' values */
    uint32_t *vpos; /* [L][CKV_BLK] their positions */
    uint32_t *vn;   /* [L] how many are pending */
    float *vt;      /* [d][CKV_BLK] one KV head's pending values transposed */
} ckv_state;

static void ckv_fini(void *st)
{
    ckv_state *s = st;
    if (!s)
        return;
    snap_core_free(&s->core);
    free(s->proj);
    free(s->alive);
    free(s->base);
    free(s->score);
    free(s->work);
    free(s->sel);
    free(s->mag);
    free(s->base_all);
    free(s->s1);
    free(s->vbuf);
    free(s->vpos);
    free(s->vn);
    free(s->vt);
    free(s);
}

static int ckv_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    const policy_ops *p = &policy_criticalkv;
    snap_args sa;
    double fsr, eps;
    int rc = snap_args_read(p, a, env->prompt_len, &sa, e);
    if (!rc)
        rc = policy_arg_double(p, a, "first_stage_ratio", &fsr, e);
    if (!rc)
        rc = policy_arg_double(p, a, "eps", &eps, e);
    if (rc)
        return rc;
    ckv_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy criticalkv: out of memory");
    rc = snap_core_init(&s->core, env, sa.window, sa.kernel, sa.maxpool, e);
    if (rc) {
        free(s);
        return rc;
    }
    s->capacity = sa.capacity;
    s->fsr = fsr;
    s->eps = eps;
    size_t P = env->prompt_len, n = (size_t)env->n_layers * env->n_kv_heads * P + 1;
    s->proj = calloc(n, sizeof *s->proj);
    s->alive = malloc(n);
    s->base = malloc((P + 1) * sizeof *s->base);
    s->score = malloc((P + 1) * sizeof *s->score);
    s->work = malloc((P + 1) * sizeof *s->work);
    s->sel = malloc((P + 1) * sizeof *s->sel);
    s->mag = calloc((size_t)env->n_layers * 4, sizeof *s->mag);
    s->base_all = calloc(n, sizeof *s->base_all);
    s->s1 = calloc(n, 1);
    size_t L = env->n_layers, row = (size_t)env->n_kv_heads * env->head_dim;
    s->vbuf = malloc(L * CKV_BLK * row * sizeof *s->vbuf);
    s->vpos = malloc(L * CKV_BLK * sizeof *s->vpos);
    s->vn = calloc(L, sizeof *s->vn);
    s->vt = malloc((size_t)env->head_dim * CKV_BLK * sizeof *s->vt);
    if (!s->proj || !s->alive || !s->base || !s->score || !s->work || !s->sel || !s->mag ||
        !s->base_all || !s->s1 || !s->vbuf || !s->vpos || !s->vn || !s->vt) {
        ckv_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy criticalkv: out of memory");
    }
    memset(s->alive, 1, n);
    *st = s;
    return MS_OK;
}

static int compresses(const ckv_state *s) { return s->core.env.prompt_len > s->capacity; }

static unsigned ckv_needs(void *st, uint32_t pos)
{
    ckv_state *s = st;
    if (pos >= s->core.env.prompt_len || !compresses(s))
        return 0;
    return POLICY_NEED_V | POLICY_NEED_WO | (snap_core_wants(&s->core, pos) ? POLICY_NEED_ATT : 0);
}

/* l1[j] += |y_j| for the block's positions j. */
static void ckv_l1_add(double *l1, const float *y)
{
    for (uint32_t j = 0; j < CKV_BLK; j++)
        l1[j] += fabsf(y[j]);
}

/* l1[j] += ‖W_o^h V_j‖₁ for the block's positions j: rows r of W_o^h (stride apart, d wide)
 * against vt (d × CKV_BLK, the positions' values transposed), |y| summed in row order. */
static void ckv_rows_portable(const float *w0, size_t stride, uint32_t D, uint32_t d,
                              const float *vt, double *l1)
{
    for (uint32_t r = 0; r < D; r++) {
        const float *w = w0 + r * stride;
        v4f a[8] = {{0}};
        for (uint32_t i = 0; i < d; i++) {
            const ckv_v4 *x = (const ckv_v4 *)(vt + (size_t)i * CKV_BLK);
            float wi = w[i];
            a[0] += wi * x[0];
            a[1] += wi * x[1];
            a[2] += wi * x[2];
            a[3] += wi * x[3];
            a[4] += wi * x[4];
            a[5] += wi * x[5];
            a[6] += wi * x[6];
            a[7] += wi * x[7];
        }
        float y[CKV_BLK];
        memcpy(y, a, sizeof y);
        ckv_l1_add(l1, y);
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* Two rows at once (eight AVX2 sums, each value row loaded once for the two), then the last
 * one alone; the l1 sums in row order as above. */
__attribute__((target("avx2"))) static void ckv_rows_wide(const float *w0, size_t stride,
                                                          uint32_t D, uint32_t d, const float *vt,
                                                          double *l1)
{
    uint32_t r = 0;
    for (; r < D; r += 2) {
        const float *w = w0 + r * stride, *w1 = r + 1 < D ? w + stride : w;
        ckv_v8 a[4] = {{0}}, b[4] = {{0}};
        for (uint32_t i = 0; i < d; i++) {
            const ckv_v8 *x = (const ckv_v8 *)(vt + (size_t)i * CKV_BLK);
            float u = w[i], t = w1[i];
            a[0] += u * x[0];
            a[1] += u * x[1];
            a[2] += u * x[2];
            a[3] += u * x[3];
            b[0] += t * x[0];
            b[1] += t * x[1];
            b[2] += t * x[2];
            b[3] += t * x[3];
        }
        float y[CKV_BLK];
        memcpy(y, a, sizeof y);
        ckv_l1_add(l1, y);
        if (r + 1 < D) {
            memcpy(y, b, sizeof y);
            ckv_l1_add(l1, y);
        }
    }
}
#endif

/* proj of layer l's pending positions: for each query head h, y = W_o^h·V_j summed over its
 * head_dim in order, ‖y‖₁ over the model's width in double, proj += ‖y‖₁ / G, h in order (each
 * position's figures as one position at a time gives them, to the bit). */
static void ckv_proj_flush(ckv_state *s, uint32_t l, const float *wo)
{
    const policy_env *v = &s->core.env;
    uint32_t d = v->head_dim, H = v->n_heads, Hkv = v->n_kv_heads, G = H / Hkv, D = v->dim;
    uint32_t n = s->vn[l];
    size_t row = (size_t)Hkv * d, stride = (size_t)H * d;
    const float *vb = s->vbuf + (size_t)l * CKV_BLK * row;
    const uint32_t *pos = s->vpos + (size_t)l * CKV_BLK;
    float *vt = s->vt;
    double l1[CKV_BLK];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    int wide = !policy_portable_kernels && ms_cpu_has(MS_CPU_AVX2);
#endif
    for (uint32_t g = 0; g < Hkv; g++) {
        for (uint32_t i = 0; i < d; i++)
            for (uint32_t j = 0; j < CKV_BLK; j++)
                vt[(size_t)i * CKV_BLK + j] = j < n ? vb[j * row + (size_t)g * d + i] : 0;
        for (uint32_t h = g * G; h < (g + 1) * G; h++) {
            for (uint32_t j = 0; j < CKV_BLK; j++)
                l1[j] = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
            if (wide)
                ckv_rows_wide(wo + (size_t)h * d, stride, D, d, vt, l1);
            else
#endif
                ckv_rows_portable(wo + (size_t)h * d, stride, D, d, vt, l1);
            for (uint32_t j = 0; j < n; j++)
                s->proj[((size_t)l * Hkv + g) * v->prompt_len + pos[j]] += (float)(l1[j] / G);
        }
    }
    s->vn[l] = 0;
}

static int ckv_observe(void *st, const policy_obs *o, errbuf *e)
{
    ckv_state *s = st;
    const policy_env *v = &s->core.env;
    if (o->pos >= v->prompt_len || !compresses(s))
        return MS_OK;
    snap_core_observe(&s->core, o);
    if (!o->v || !o->wo)
        return err_set(e, MS_ERR_INPUT, "policy criticalkv: the trace has no values or no W_o");
    uint32_t d = v->head_dim, H = v->n_heads, Hkv = v->n_kv_heads, D = v->dim;
    float *mag = s->mag + (size_t)o->layer * 4;
    for (uint32_t i = 0; i < Hkv * d; i++)
        mag[0] = fabsf(o->v[i]) > mag[0] ? fabsf(o->v[i]) : mag[0];
    for (size_t i = 0; o->pos == 0 && i < (size_t)D * H * d; i++)
        mag[1] = fabsf(o->wo[i]) > mag[1] ? fabsf(o->wo[i]) : mag[1];
    uint32_t *n = &s->vn[o->layer];
    size_t row = (size_t)Hkv * d;
    memcpy(s->vbuf + ((size_t)o->layer * CKV_BLK + *n) * row, o->v, row * sizeof *o->v);
    s->vpos[(size_t)o->layer * CKV_BLK + *n] = o->pos;
    if (++*n == CKV_BLK || o->pos + 1 == v->prompt_len)
        ckv_proj_flush(s, o->layer, o->wo);
    return MS_OK;
}

/* Stage 2 of KV head g of layer l around stage 1's set s->s1: score = (base + eps)·proj, stage
 * 1's entries first, the top capacity kept. */
static void ckv_stage2(ckv_state *s, uint32_t l, uint32_t g)
{
    const policy_env *v = &s->core.env;
    uint32_t P = v->prompt_len;
    size_t off = ((size_t)l * v->n_kv_heads + g) * P;
    for (uint32_t j = 0; j < P; j++)
        s->score[j] =
            s->s1[off + j] ? INFINITY : (float)((s->base_all[off + j] + s->eps) * s->proj[off + j]);
    size_t c = policy_topk(s->score, NULL, P, s->capacity, s->sel, s->work);
    memset(s->alive + off, 0, P);
    for (size_t i = 0; i < c; i++)
        s->alive[off + s->sel[i]] = 1;
}

static int ckv_prefill(void *st, errbuf *e)
{
    ckv_state *s = st;
    const policy_env *v = &s->core.env;
    uint32_t P = v->prompt_len, w = s->core.window, n = P - w;
    if (!compresses(s))
        return MS_OK;
    uint32_t k1 = (uint32_t)(s->capacity * s->fsr);
    for (uint32_t l = 0; l < v->n_layers; l++)
        if (s->vn[l]) /* the last prompt position flushes each layer's */
            return err_set(e, MS_ERR_INTERNAL,
                           "policy criticalkv: layer %u's prompt was not observed to its end", l);
    for (uint32_t l = 0; l < v->n_layers; l++)
        for (uint32_t g = 0; g < v->n_kv_heads; g++) {
            size_t off = ((size_t)l * v->n_kv_heads + g) * P;
            snap_core_score(&s->core, l, g, s->base);
            float mx = -INFINITY;
            for (uint32_t j = 0; j < n; j++)
                mx = s->base[j] > mx ? s->base[j] : mx;
            for (uint32_t j = n; j < P; j++)
                s->base[j] = (n ? mx : 0.0f) + 1.0f;
            float *mag = s->mag + (size_t)l * 4;
            for (uint32_t j = 0; j < P; j++) {
                float pg = s->proj[off + j] * (float)(v->n_heads / v->n_kv_heads);
                mag[2] = pg > mag[2] ? pg : mag[2];
                mag[3] = s->base[j] > mag[3] ? s->base[j] : mag[3];
            }
            memcpy(s->base_all + off, s->base, (size_t)P * sizeof *s->base);
            size_t c1 = policy_topk(s->base, NULL, P, k1, s->sel, s->work);
            memset(s->s1 + off, 0, P);
            for (size_t i = 0; i < c1; i++)
                s->s1[off + s->sel[i]] = 1;
            ckv_stage2(s, l, g);
        }
    return MS_OK;
}

static int ckv_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                      errbuf *e)
{
    ckv_state *s = st;
    snap_keep_rows(&s->core.env, s->alive, layer, pos, keep);
    return MS_OK;
}

/* The scale of snap_core_emit's scores against snap_core_score's: the window's sum, the
 * group's sum, and average pooling's neighbour sum. */
static double base_scale(const ckv_state *s)
{
    const snap_core *c = &s->core;
    return (double)c->window * (c->env.n_heads / c->env.n_kv_heads) * (c->maxpool ? 1 : c->kernel);
}

/* The error bound of the ops' final scores (base_scale · G times ckv_prefill's) at layer: the
 * base within snap_core_tol's bound and eps rounded (±u/2); each y = V_j·W_o^h from a rounded
 * V and W_o (±u/2 each, d terms) truncated (±u), summed as |y| over dim and G heads, plus the
 * float sums' relative 2^-22; the product of the two truncated (±u). Twice that, for the two
 * candidates of a swap. */
static double ckv_tol(const ckv_state *s, uint32_t layer, int frac_bits)
{
    const policy_env *v = &s->core.env;
    const float *mag = s->mag + (size_t)layer * 4;
    double u = ldexp(1, -frac_bits), c = base_scale(s), G = v->n_heads / v->n_kv_heads;
    double d = v->head_dim, vm = mag[0], wm = mag[1], pm = mag[2], bm = mag[3];
    double eb = snap_core_tol(&s->core, v->n_kv_heads, frac_bits) / 2 + u / 2;
    double ep = G * v->dim * (d * (vm + wm) * u / 2 + u + d * vm * wm * 0x1p-22) + pm * 0x1p-22;
    double sc = c * (bm + s->eps) * pm;
    return 2 * (eb * (pm + ep) + c * (bm + s->eps) * ep + u + sc * 0x1p-22);
}

/* policy_ops.choice: stage 1, the top k1 of the padded base, which stage 2 ranks around. Its
 * bound: snap_core_tol's (the ops' base against snap_core_score's, both candidates of a swap),
 * on the mean's scale (÷ base_scale); the window's pad is its row max plus 1 on both sides. */
static int ckv_choice(void *st, uint32_t layer, uint32_t pos, uint32_t stage, policy_choice *c)
{
    ckv_state *s = st;
    const policy_env *v = &s->core.env;
    if (stage != 1 || !compresses(s) || (uint32_t)(s->capacity * s->fsr) == 0)
        return 0;
    size_t off = (size_t)layer * v->n_kv_heads * v->prompt_len;
    *c = (policy_choice){.n = v->prompt_len,
                         .head_stride = v->prompt_len,
                         .score = s->base_all + off,
                         .kept = s->s1 + off,
                         .tol = snap_core_tol(&s->core, v->n_kv_heads, pcheck_frac_bits()) /
                                base_scale(s)};
    return 1;
}

/* policy_ops.adopt: stage 1's set of every KV head of the layer, stage 2 rerun around it. */
static int ckv_adopt(void *st, uint32_t layer, uint32_t pos, uint32_t stage, const uint8_t *kept,
                     errbuf *e)
{
    ckv_state *s = st;
    const policy_env *v = &s->core.env;
    if (stage != 1 || !compresses(s))
        return err_set(e, MS_ERR_INPUT, "policy criticalkv: no choice of stage %u", stage);
    size_t off = (size_t)layer * v->n_kv_heads * v->prompt_len;
    for (size_t i = 0; i < (size_t)v->n_kv_heads * v->prompt_len; i++)
        s->s1[off + i] = kept[i] != 0;
    for (uint32_t g = 0; g < v->n_kv_heads; g++)
        ckv_stage2(s, layer, g);
    return MS_OK;
}

static int ckv_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                    op_program *prog, errbuf *e)
{
    ckv_state *s = st;
    const policy_env *v = &s->core.env;
    if (!compresses(s))
        return MS_OK;
    uint32_t P = v->prompt_len, H = v->n_heads, Hkv = v->n_kv_heads, d = v->head_dim, D = v->dim;
    uint32_t k1 = (uint32_t)(s->capacity * s->fsr), B = s->capacity;
    policy_emitter pe;
    opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
    if (phase == PHASE_DECODE) {
        /* no ops: the decode step attends the rows the prefill gathered (its state); the
         * generated entries are public positions. Named for the check, with the cache it
         * compares them with */
        pcheck_input(&pe, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
        uint32_t kept_st = opb_shared(&pe, "ckv.kept", OPT_CACHE, Hkv, B, 2 * d);
        uint32_t sc_st = opb_shared(&pe, "ckv.score_kept", OPT_CACHE, Hkv, 1, P);
        pcheck_selection(&pe, kept_st, B, 0, P, sc_st, ckv_tol(s, layer, pcheck_frac_bits()));
        if (k1 > 0) /* stage 1's set, which stage 2 ranks around */
            pcheck_selection_stage(&pe, opb_shared(&pe, "ckv.s1_kept", OPT_CACHE, Hkv, 1, P));
        return policy_emit_done(&pe, "criticalkv", e);
    }
    uint32_t w = s->core.window, n = P - w, G = H / Hkv;
    double c = base_scale(s);
    uint32_t base = snap_core_emit(&s->core, &pe, Hkv); /* (Hkv, 1, n), c times the mean */
    /* COST: the window padded with max(base) + 1 so stage 1 keeps it (kvpress snapkv_press.py
     * in FFY0/AdaKV@criticalkv): a row max per KV head, local adds and views */
    uint32_t mx = policy_emit(&pe, OP_MAX, Hkv, 1, 0, n, base, OP_NONE, 0, 0, 0, "ckv.max");
    uint32_t mx1 = policy_emit(&pe, OP_ADD_PUB, 1, Hkv, 0, 1, mx, OP_NONE, 0, 0, c, "ckv.max1");
    uint32_t pad = opb_matmul_pub(&pe, mx1, opb_shared(&pe, "ckv.pad_ones", OPT_PUBLIC, 1, 1, w),
                                  Hkv, 1, w, opb_tensor(&pe, "ckv.pad", OPT_TEMP, Hkv, 1, w));
    uint32_t bt = opb_tensor(&pe, "ckv.base_t", OPT_TEMP, Hkv, P, 1);
    opb_put(&pe, opb_transpose(&pe, base, Hkv, 1, n, "ckv.base_c"), bt, Hkv, 0, n, 1);
    opb_put(&pe, opb_transpose(&pe, pad, Hkv, 1, w, "ckv.pad_c"), bt, Hkv, n, w, 1);
    uint32_t bp = opb_transpose(&pe, bt, Hkv, P, 1, "ckv.base_p"); /* (Hkv, 1, P) */
    /* the prompt's values V (the cached rows' last d columns, views), repeated for the G query
     * heads of a KV head (a local product by public ones): (H, P, d) */
    uint32_t kv = pcheck_input(&pe, PCHECK_IN_KV, Hkv, P, 2 * d);
    uint32_t vt =
        opb_rows(&pe, opb_transpose(&pe, kv, Hkv, P, 2 * d, "ckv.kv_t"), Hkv, d, d, P, "ckv.v_t");
    uint32_t vv = opb_transpose(&pe, vt, Hkv, d, P, "ckv.v");
    if (G > 1) {
        uint32_t r = opb_matmul_pub(
            &pe, vv, opb_shared(&pe, "ckv.v_heads_ones", OPT_PUBLIC, 1, 1, G), Hkv * P * d, 1, G,
            opb_tensor(&pe, "ckv.v_heads_t", OPT_TEMP, Hkv, P * d, G));
        vv = opb_transpose(&pe, r, Hkv, P * d, G, "ckv.v_heads"); /* (Hkv, G, P·d) = (H, P, d) */
    }
    /* COST: y = V_j·W_o^h for every prompt token and head: a T×d by d×D matmul per head with
     * the server's fixed W_o (§1.9 "as expensive as one o_proj over the whole prompt") */
    uint32_t wo = pcheck_input(&pe, PCHECK_IN_WO, H, d, D);
    uint32_t y = policy_emit(&pe, OP_MATMUL, H, P, d, D, vv, wo, OPF_FIXED_B, 0, 0, "ckv.vwo");
    /* COST: |y| = y − 2·y·[y < 0]: T·D sign tests and secret products per head, the rest local
     * (§1.12) */
    uint32_t sg = policy_emit(&pe, OP_LT, H, P, 0, D, y,
                              opb_shared(&pe, "ckv.sign_zero", OPT_PUBLIC, 1, 1, 1), OPF_PUBLIC_B,
                              0, 0, "ckv.sign");
    uint32_t neg = policy_emit(&pe, OP_MUL, H, P, 0, D, y, sg, OPF_NO_TRUNC, 0, 0, "ckv.neg");
    /* 2·y·[y < 0] as a sum (local; a public factor would scale the fixed point untruncated) */
    uint32_t neg2 = policy_emit(&pe, OP_ADD, H, P, 0, D, neg, neg, 0, 0, 0, "ckv.neg2");
    uint32_t ab = policy_emit(&pe, OP_SUB, H, P, 0, D, y, neg2, 0, 0, 0, "ckv.abs");
    /* COST: ‖·‖₁ over D and the sum over the G query heads of a KV head: local; the group mean's
     * 1/G is left out (a positive factor of every score of the KV head: the same top-k) */
    uint32_t l1 = opb_matmul_pub(&pe, ab, opb_shared(&pe, "ckv.l1_ones", OPT_PUBLIC, 1, D, 1),
                                 H * P, D, 1, opb_tensor(&pe, "ckv.l1", OPT_TEMP, H, P, 1));
    uint32_t proj = opb_colsum(&pe, l1, Hkv, G, P, "ckv.proj"); /* l1 as (Hkv, G, P): (Hkv, P, 1) */
    uint32_t pr = opb_transpose(&pe, proj, Hkv, P, 1, "ckv.proj_r");
    /* COST: (base + eps)·proj per key: a local add and one secret product per key and KV head
     * (eps on the base's scale c, so that the ranking is ckv_prefill's) */
    uint32_t be =
        policy_emit(&pe, OP_ADD_PUB, Hkv, 1, 0, P, bp, OP_NONE, 0, 0, c * s->eps, "ckv.base_eps");
    uint32_t sc = policy_emit(&pe, OP_MUL, Hkv, 1, 0, P, be, pr, 0, 0, 0, "ckv.score");
    if (k1 > 0) {
        /* COST: stage 1 topk(T, k1) on base; its entries' score raised above every other by a
         * public bound (score + big·[j ∈ S1]): the one-hot's column sums and adds, local */
        uint32_t oh1 =
            policy_emit(&pe, OP_TOPK, Hkv, 1, 0, P, bp, OP_NONE, 0, (int32_t)k1, 0, "ckv.topk1");
        uint32_t s1 = opb_colsum(&pe, oh1, Hkv, k1, P, "ckv.s1");
        uint32_t s1r = opb_transpose(&pe, s1, Hkv, P, 1, "ckv.s1_r");
        uint32_t big = policy_emit(&pe, OP_MUL_PUB, Hkv, 1, 0, P, s1r, OP_NONE, OPF_NO_TRUNC, 0,
                                   (double)(1u << 20), "ckv.s1_big");
        sc = policy_emit(&pe, OP_ADD, Hkv, 1, 0, P, sc, big, 0, 0, 0, "ckv.score_s1");
        /* stage 1's set, for the check's ties carried into stage 2 (a view) */
        opb_put(&pe, s1r, opb_shared(&pe, "ckv.s1_kept", OPT_CACHE, Hkv, 1, P), Hkv, 0, 1, P);
    }
    /* COST: stage 2 topk(T, B) and the gather of the kept K|V rows into the state the decode
     * steps attend */
    uint32_t oh =
        policy_emit(&pe, OP_TOPK, Hkv, 1, 0, P, sc, OP_NONE, 0, (int32_t)B, 0, "ckv.topk2");
    uint32_t kept_st = opb_shared(&pe, "ckv.kept", OPT_CACHE, Hkv, B, 2 * d);
    opb_op(&pe, OP_GATHER, Hkv, B, P, 2 * d, oh, kv, OP_NONE, kept_st, OPF_NO_TRUNC, 0, 0);
    /* the scores, for the check's ties (a view) */
    opb_put(&pe, sc, opb_shared(&pe, "ckv.score_kept", OPT_CACHE, Hkv, 1, P), Hkv, 0, 1, P);
    return policy_emit_done(&pe, "criticalkv", e);
}

const policy_ops policy_criticalkv = {
    .name = "criticalkv",
    .summary = "two-stage prompt selection: SnapKV score, then score × ‖V·W_o‖₁",
    .params = ckv_params,
    .n_params = sizeof ckv_params / sizeof ckv_params[0],
    .init = ckv_init,
    .fini = ckv_fini,
    .needs = ckv_needs,
    .observe = ckv_observe,
    .prefill = ckv_prefill,
    .select = ckv_select,
    .emit_cost = ckv_emit,
    .choice = ckv_choice,
    .adopt = ckv_adopt,
    .budget_keys = "capacity",
};
