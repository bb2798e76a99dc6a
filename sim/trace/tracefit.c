/* tracefit.c — estimating synthetic-generator parameters and summary statistics from a trace
 * (estimators documented in sim/trace/TRACE_FORMAT.md §Fitting).
 *
 * Within one attention row, log p_s − log p_s' equals the logit difference (the partition
 * function cancels), so every attention knob is read as a log-ratio against the row's
 * baseline b = median of log p over "far" keys (past the local profile, not sinks):
 *   sink   = mean over rows of  mean_{s < n_sinks} log p_s − b
 *   local profile P(Δ) = mean of log p_{t−Δ} − b  ≈ local · exp(−Δ²/(2W²)) (+ heavy_frac·heavy)
 *   heavy hitters: column means of log p_s − b over rows where s is far, split in two classes
 *       (Otsu): heavy = difference of class means, heavy_frac = upper-class share
 *   layer_sim from the overlap o = P(heavy in l | heavy in l−1) = ls + (1−ls)·frac
 *   noise  = 1.4826 · median |log p_s − b| over far keys (MAD)
 *   drift  = 1 − mean cos(q_t, q_t+1); ffn_sparsity = share of pre-activations ≤ 0
 *   group_sim (GQA) = 1 − σ_D² / (2·noise²), σ_D = 1.4826 · median |D − median D| with
 *       D_s = log p_h,s − log p_h+1,s over far keys of two query heads h, h+1 of one KV head:
 *       everything the two rows share (sinks, locality, heavy hitters, the partition
 *       function up to a constant) cancels in D, leaving the difference of their content logits,
 *       of variance 2·noise²·(1 − r). */
#include "trace_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIT_MAX_ROWS 192 /* sampled query positions per layer */
#define FIT_MIN_FAR 16   /* far keys a row needs */
#define FIT_MIN_COL 8    /* rows a column mean needs */
#define FIT_MIN_TOKENS 64

typedef struct fit_acc {
    uint32_t n_sinks, dmax, t0, stride;
    double sink_lr, sink_mass, noise_mad;
    double *prof, *mprof; /* dmax: log-ratio and mass profiles */
    double *colsum;       /* L × Hkv × T */
    uint32_t *colcnt;
    uint64_t rows;
    double qcos;
    uint64_t qpairs;
    double gmad; /* Σ MAD of D over adjacent head pairs of a group (GQA) */
    uint64_t gpairs;
    double ffn_neg, ffn_n;
    double sparse, top5, sink_top; /* H2O's sparsity, top-5 % mass, rows led by a sink */
    double *layer_sparse;          /* per layer: Σ sparsity over its rows */
    uint64_t *layer_rows;
    float *prevq, *tmp, *sel, *dif;
} fit_acc;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float median(float *x, size_t n)
{
    qsort(x, n, sizeof *x, cmp_float);
    return n % 2 ? x[n / 2] : 0.5f * (x[n / 2 - 1] + x[n / 2]);
}

/* The k-th largest of x[0..n) (k ≥ 1), partially reordering x (Hoare's selection). */
static float kth_largest(float *x, uint32_t n, uint32_t k)
{
    uint32_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pv = x[lo + (hi - lo) / 2];
        uint32_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] > pv)
                i++;
            while (x[j] < pv)
                j--;
            if (i <= j) {
                float tmp = x[i];
                x[i] = x[j];
                x[j] = tmp;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            break;
    }
    return x[want];
}

/* Concentration of one row: H2O's sparsity (the share of entries below 1 % of the row's
 * largest, H2O §3.1), the mass on the top 5 % of entries, and whether a sink leads it. */
static void row_concentration(fit_acc *a, uint32_t layer, const float *p, uint32_t n)
{
    float mx = 0;
    uint32_t arg = 0, below = 0;
    for (uint32_t s = 0; s < n; s++)
        if (p[s] > mx) {
            mx = p[s];
            arg = s;
        }
    for (uint32_t s = 0; s < n; s++)
        below += p[s] < 0.01f * mx;
    a->sparse += (double)below / n;
    a->layer_sparse[layer] += (double)below / n;
    a->layer_rows[layer]++;
    a->sink_top += arg < a->n_sinks;
    uint32_t k = (n + 19) / 20;
    memcpy(a->sel, p, n * sizeof *p);
    float thr = kth_largest(a->sel, n, k);
    double m = 0, ties = 0;
    uint32_t above = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (p[s] > thr) {
            m += p[s];
            above++;
        } else if (p[s] == thr) {
            ties += p[s];
        }
    }
    /* entries equal to the threshold fill the remaining k − above places */
    a->top5 += m + (ties > 0 ? ties * fmin(1.0, (double)(k - above) / (ties / thr)) : 0);
}

static void fit_row(const trace *t, fit_acc *a, uint32_t layer, uint32_t h, const float *p)
{
    uint32_t pos = t->pos, G = t->s.n_heads / t->s.n_kv_heads, g = h / G;
    row_concentration(a, layer, p, pos + 1);
    uint32_t far_end = pos + 1 - a->dmax, n_far = far_end - a->n_sinks;
    for (uint32_t s = a->n_sinks; s < far_end; s++)
        a->tmp[s - a->n_sinks] = logf(fmaxf(p[s], 1e-30f));
    float b = median(a->tmp, n_far);
    for (uint32_t i = 0; i < n_far; i++)
        a->tmp[i] = fabsf(a->tmp[i] - b);
    a->noise_mad += median(a->tmp, n_far);
    double sl = 0, sm = 0;
    for (uint32_t s = 0; s < a->n_sinks; s++) {
        sl += logf(fmaxf(p[s], 1e-30f)) - b;
        sm += p[s];
    }
    a->sink_lr += a->n_sinks ? sl / a->n_sinks : 0;
    a->sink_mass += sm;
    for (uint32_t dd = 0; dd < a->dmax; dd++) {
        a->prof[dd] += logf(fmaxf(p[pos - dd], 1e-30f)) - b;
        a->mprof[dd] += p[pos - dd];
    }
    size_t base = ((size_t)layer * t->s.n_kv_heads + g) * t->s.n_tokens;
    for (uint32_t s = a->n_sinks; s < far_end; s++) {
        a->colsum[base + s] += logf(fmaxf(p[s], 1e-30f)) - b;
        a->colcnt[base + s]++;
    }
    a->rows++;
}

/* The log-ratio differences of adjacent query heads of one KV head (GQA), over far keys. */
static void fit_group(const trace *t, fit_acc *a, const float *att)
{
    uint32_t pos = t->pos, n = pos + 1, G = t->s.n_heads / t->s.n_kv_heads;
    uint32_t far_end = n - a->dmax, n_far = far_end - a->n_sinks;
    for (uint32_t h = 0; G > 1 && h < t->s.n_heads; h++) {
        if (h % G == G - 1)
            continue;
        const float *p = att + (size_t)h * n, *q = p + n;
        for (uint32_t s = a->n_sinks; s < far_end; s++)
            a->dif[s - a->n_sinks] = logf(fmaxf(p[s], 1e-30f)) - logf(fmaxf(q[s], 1e-30f));
        float m = median(a->dif, n_far);
        for (uint32_t i = 0; i < n_far; i++)
            a->dif[i] = fabsf(a->dif[i] - m);
        a->gmad += median(a->dif, n_far);
        a->gpairs++;
    }
}

static void fit_position(trace *t, fit_acc *a)
{
    const trace_shape *s = &t->s;
    size_t qn = (size_t)s->n_layers * s->n_heads * s->head_dim;
    uint32_t d = s->head_dim;
    if (t->pos > 0) {
        for (size_t r = 0; r < qn / d; r++) {
            const float *x = t->q + r * d, *y = a->prevq + r * d;
            double xy = 0, xx = 0, yy = 0;
            for (uint32_t i = 0; i < d; i++) {
                xy += (double)x[i] * y[i];
                xx += (double)x[i] * x[i];
                yy += (double)y[i] * y[i];
            }
            if (xx > 0 && yy > 0) {
                a->qcos += xy / sqrt(xx * yy);
                a->qpairs++;
            }
        }
    }
    memcpy(a->prevq, t->q, qn * sizeof(float));
    if (t->pos < a->t0 || (t->pos - a->t0) % a->stride)
        return;
    for (uint32_t l = 0; l < s->n_layers; l++) {
        const float *f = trace_ffn(t, l);
        for (uint32_t i = 0; f && i < s->ffn_dim; i++)
            a->ffn_neg += f[i] <= 0;
        a->ffn_n += f ? s->ffn_dim : 0;
    }
    for (uint32_t l = 0; l < s->n_layers; l++) {
        const float *att = trace_att(t, l);
        for (uint32_t h = 0; h < s->n_heads; h++)
            fit_row(t, a, l, h, att + (size_t)h * (t->pos + 1));
        fit_group(t, a, att);
    }
}

/* Otsu split of the pooled column means; marks heavy columns in flag. */
static void fit_heavy(const trace *t, const fit_acc *a, double *heavy, double *frac, uint8_t *flag)
{
    size_t n = (size_t)t->s.n_layers * t->s.n_kv_heads * t->s.n_tokens, m = 0;
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        if (a->colcnt[i] >= FIT_MIN_COL)
            v[m++] = (float)(a->colsum[i] / a->colcnt[i]);
    *heavy = 0;
    *frac = 0;
    memset(flag, 0, n);
    if (!v || m < 4) {
        free(v);
        return;
    }
    qsort(v, m, sizeof *v, cmp_float);
    double tot = 0, best = -1, thr = v[m - 1];
    for (size_t i = 0; i < m; i++)
        tot += v[i];
    double lo = 0;
    for (size_t i = 1; i < m; i++) { /* lower class v[0..i) */
        lo += v[i - 1];
        double m0 = lo / i, m1 = (tot - lo) / (m - i);
        double between = (double)i * (m - i) * (m1 - m0) * (m1 - m0);
        if (between > best) {
            best = between;
            thr = 0.5 * (v[i - 1] + v[i]);
            *heavy = m1 - m0;
            *frac = (double)(m - i) / m;
        }
    }
    free(v);
    for (size_t i = 0; i < n; i++)
        flag[i] = a->colcnt[i] >= FIT_MIN_COL && a->colsum[i] / a->colcnt[i] > thr;
}

/* Mean P(heavy in l | heavy in l-1) over layers ≥ 1 and KV heads. */
static double fit_overlap(const trace *t, const uint8_t *flag, const fit_acc *a)
{
    uint32_t T = t->s.n_tokens, Hk = t->s.n_kv_heads;
    double both = 0, prev = 0;
    for (uint32_t l = 1; l < t->s.n_layers; l++)
        for (uint32_t g = 0; g < Hk; g++) {
            size_t b1 = ((size_t)l * Hk + g) * T, b0 = ((size_t)(l - 1) * Hk + g) * T;
            for (uint32_t s = 0; s < T; s++) {
                if (a->colcnt[b0 + s] < FIT_MIN_COL || a->colcnt[b1 + s] < FIT_MIN_COL)
                    continue;
                prev += flag[b0 + s];
                both += flag[b0 + s] && flag[b1 + s];
            }
        }
    return prev > 0 ? both / prev : NAN;
}

/* Width of the local kernel from the profile (heavy contamination removed). */
static double fit_window(const double *prof, uint32_t dmax, double local)
{
    double num = 0, den = 0;
    for (uint32_t dd = 1; dd < dmax && local > 0; dd++) {
        double r = prof[dd] / local;
        if (r > 0.1 && r < 0.9) {
            double w2 = -(double)dd * dd / (2 * log(r)), wt = r * (1 - r);
            num += sqrt(w2) * wt;
            den += wt;
        }
    }
    return den > 0 ? num / den : 1.0;
}

static void fit_free(fit_acc *a)
{
    free(a->prof);
    free(a->mprof);
    free(a->colsum);
    free(a->colcnt);
    free(a->prevq);
    free(a->tmp);
    free(a->sel);
    free(a->dif);
    free(a->layer_sparse);
    free(a->layer_rows);
}

static int fit_scan(trace *t, fit_acc *a, uint32_t n_sinks, errbuf *e)
{
    const trace_shape *s = &t->s;
    uint32_t T = s->n_tokens;
    memset(a, 0, sizeof *a);
    a->n_sinks = n_sinks;
    a->dmax = T / 4 < 64 ? T / 4 : 64;
    a->t0 = n_sinks + a->dmax + FIT_MIN_FAR;
    if (T < FIT_MIN_TOKENS || a->t0 + FIT_MIN_FAR >= T)
        return err_set(e, MS_ERR_INPUT,
                       "trace too short to fit: %u tokens (need at least %u "
                       "beyond %u sinks)",
                       T, FIT_MIN_TOKENS, n_sinks);
    a->stride = (T - a->t0 + FIT_MAX_ROWS - 1) / FIT_MAX_ROWS;
    size_t nc = (size_t)s->n_layers * s->n_kv_heads * T;
    a->prof = calloc(a->dmax, sizeof *a->prof);
    a->mprof = calloc(a->dmax, sizeof *a->mprof);
    a->colsum = calloc(nc, sizeof *a->colsum);
    a->colcnt = calloc(nc, sizeof *a->colcnt);
    a->prevq = calloc((size_t)s->n_layers * s->n_heads * s->head_dim, sizeof(float));
    a->tmp = calloc(T, sizeof(float));
    a->sel = calloc(T, sizeof(float));
    a->dif = calloc(T, sizeof(float));
    a->layer_sparse = calloc(s->n_layers, sizeof *a->layer_sparse);
    a->layer_rows = calloc(s->n_layers, sizeof *a->layer_rows);
    if (!a->prof || !a->mprof || !a->colsum || !a->colcnt || !a->prevq || !a->tmp || !a->sel ||
        !a->dif || !a->layer_sparse || !a->layer_rows)
        return err_set(e, MS_ERR_NOMEM, "out of memory fitting a %u-token trace", T);
    for (uint32_t p = 0; p < T; p++) {
        int rc = trace_seek(t, p, e);
        if (rc != MS_OK)
            return rc;
        fit_position(t, a);
    }
    return MS_OK;
}

/* Parameters from the accumulated profiles and column means; returns the layer overlap o. */
static double fit_params(const trace *t, fit_acc *a, uint8_t *flag, trace_synth *p)
{
    double n = (double)a->rows;
    for (uint32_t dd = 0; dd < a->dmax; dd++) {
        a->prof[dd] /= n;
        a->mprof[dd] /= n;
    }
    fit_heavy(t, a, &p->heavy, &p->heavy_frac, flag);
    double contam = p->heavy * p->heavy_frac;
    for (uint32_t dd = 0; dd < a->dmax; dd++)
        a->prof[dd] -= contam;
    p->sink = p->n_sinks ? fmax(0, a->sink_lr / n) : 0;
    p->local = fmax(0, a->prof[0]);
    p->window = fmax(0.5, fit_window(a->prof, a->dmax, p->local));
    double o = fit_overlap(t, flag, a);
    p->layer_sim = isnan(o) || p->heavy_frac >= 1
                       ? 0
                       : fmin(1, fmax(0, (o - p->heavy_frac) / (1 - p->heavy_frac)));
    p->noise = 1.4826 * a->noise_mad / n;
    p->drift = a->qpairs ? fmin(1, fmax(0, 1 - a->qcos / a->qpairs)) : 0;
    p->ffn_sparsity = a->ffn_n > 0 ? a->ffn_neg / a->ffn_n : 0.5;
    /* an MHA trace says nothing about group_sim: it keeps its default */
    if (a->gpairs && p->noise > 0) {
        double sd = 1.4826 * a->gmad / a->gpairs;
        p->group_sim = fmin(1, fmax(0, 1 - sd * sd / (2 * p->noise * p->noise)));
    }
    return o;
}

/* Summary statistics; heavy mass needs a second pass over the sampled rows. */
static int fit_stats(trace *t, const fit_acc *a, const trace_synth *p, const uint8_t *flag,
                     double overlap, trace_stats *st, errbuf *e)
{
    const trace_shape *s = &t->s;
    double n = (double)a->rows, hm = 0;
    memset(st, 0, sizeof *st);
    st->sink_mass = a->sink_mass / n;
    uint32_t w = (uint32_t)ceil(p->window);
    for (uint32_t dd = 0; dd < a->dmax && dd < w; dd++)
        st->local_mass += a->mprof[dd];
    st->layer_overlap = overlap;
    st->q_cos = a->qpairs ? a->qcos / a->qpairs : NAN;
    st->ffn_neg = a->ffn_n > 0 ? a->ffn_neg / a->ffn_n : NAN;
    st->rows = a->rows;
    st->sparsity = a->sparse / n;
    st->top5_mass = a->top5 / n;
    st->sink_top = a->sink_top / n;
    st->sparsity_min_layer = 1;
    for (uint32_t l = 0; l < s->n_layers; l++)
        if (a->layer_rows[l])
            st->sparsity_min_layer =
                fmin(st->sparsity_min_layer, a->layer_sparse[l] / a->layer_rows[l]);
    uint32_t G = s->n_heads / s->n_kv_heads;
    int rc = MS_OK;
    for (uint32_t pos = a->t0; pos < s->n_tokens && rc == MS_OK; pos += a->stride) {
        rc = trace_seek(t, pos, e);
        for (uint32_t l = 0; rc == MS_OK && l < s->n_layers; l++) {
            const float *att = trace_att(t, l);
            for (uint32_t h = 0; h < s->n_heads; h++) {
                size_t base = ((size_t)l * s->n_kv_heads + h / G) * s->n_tokens;
                for (uint32_t j = p->n_sinks; j + a->dmax <= pos; j++)
                    hm += flag[base + j] ? att[(size_t)h * (pos + 1) + j] : 0;
            }
        }
    }
    st->heavy_mass = hm / n;
    return rc;
}

static int fit_run(trace *t, const trace_synth *p_in, trace_synth *out, trace_stats *st, errbuf *e)
{
    fit_acc a;
    trace_synth p;
    trace_synth_defaults(&p);
    p.n_sinks = p_in ? p_in->n_sinks : 1;
    int rc = fit_scan(t, &a, p.n_sinks, e);
    uint8_t *flag =
        rc == MS_OK ? malloc((size_t)t->s.n_layers * t->s.n_kv_heads * t->s.n_tokens) : NULL;
    if (rc == MS_OK && !flag)
        rc = err_set(e, MS_ERR_NOMEM, "out of memory");
    if (rc == MS_OK) {
        double o = fit_params(t, &a, flag, &p);
        if (out)
            *out = p;
        if (st)
            rc = fit_stats(t, &a, &p, flag, o, st, e);
    }
    free(flag);
    fit_free(&a);
    return rc;
}

int trace_fit(trace *t, const trace_synth *p_in, trace_synth *out, trace_stats *st, errbuf *e)
{
    return fit_run(t, p_in, out, st, e);
}

int trace_measure(trace *t, const trace_synth *p, trace_stats *st, errbuf *e)
{
    return fit_run(t, p, NULL, st, e);
}
