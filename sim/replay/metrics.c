/* metrics.c — accuracy metrics of a policy against the full cache (see metrics.h). */
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/policy/policy.h"
#include "protocols/base/simd.h"

int metrics_init(metrics *m, uint32_t recall_k, size_t max_len)
{
    memset(m, 0, sizeof *m);
    m->recall_k = recall_k;
    m->cap = max_len + 1;
    m->work = malloc(m->cap * sizeof *m->work);
    m->sel = malloc(m->cap * sizeof *m->sel);
    if (!m->work || !m->sel) {
        metrics_free(m);
        return MS_ERR_NOMEM;
    }
    return MS_OK;
}

void metrics_free(metrics *m)
{
    free(m->work);
    free(m->sel);
    m->work = m->sel = NULL;
}

static int kept_at(const uint8_t *keep, uint32_t n, uint32_t j) { return j + 1 == n || keep[j]; }

size_t metrics_topk(metrics *m, const float *att, uint32_t n, uint32_t *sel)
{
    size_t k = m->recall_k < n ? m->recall_k : n;
    return policy_topk(att, NULL, n, k, sel, m->work);
}

double metrics_row_top(metrics *m, const float *att, const uint8_t *keep, uint32_t n,
                       const uint32_t *sel, size_t got)
{
    double R = 0;
    uint32_t kept = 0;
    for (uint32_t j = 0; j < n; j++)
        if (kept_at(keep, n, j)) {
            R += att[j];
            kept++;
        }
    uint32_t hit = 0;
    for (size_t i = 0; i < got; i++)
        hit += (uint32_t)kept_at(keep, n, sel[i]);
    m->mass += R;
    m->topk += got ? (double)hit / (double)got : 1.0;
    m->kept += kept - 1;
    m->kept_of += n - 1;
    m->n_rows++;
    return R;
}

double metrics_row(metrics *m, const float *att, const uint8_t *keep, uint32_t n)
{
    size_t got = metrics_topk(m, att, n, m->sel);
    return metrics_row_top(m, att, keep, n, m->sel, got);
}

void metrics_exact(metrics *m, uint32_t n, int out_err, int with_wo)
{
    m->mass += 1.0;
    m->topk += 1.0;
    m->kept += n - 1;
    m->kept_of += n - 1;
    m->n_rows++;
    m->n_err += out_err != 0;
    m->n_err_wo += out_err && with_wo;
}

/* The loops below run elementwise in four-double vectors (v4d, simd.h): the same products and
 * sums per entry, in the same order, as the scalar definition. */

/* x[0..d) += a · v[0..d), elementwise. */
static void axpy(double *x, double a, const float *v, uint32_t d)
{
    uint32_t d4 = d / 4 * 4;
    v4d av = {a, a, a, a};
    for (uint32_t i = 0; i < d4; i += 4) {
        v4d y = {v[i], v[i + 1], v[i + 2], v[i + 3]}, f;
        memcpy(&f, x + i, sizeof f);
        f += av * y;
        memcpy(x + i, &f, sizeof f);
    }
    for (uint32_t i = d4; i < d; i++)
        x[i] += a * v[i];
}

/* ‖W x‖₁ over dim rows of W (row stride `stride`, d columns), x in double: each row summed in
 * column order, four rows at a time so four independent chains of adds overlap. */
static double wo_l1(const float *w, size_t stride, uint32_t dim, const double *x, uint32_t d)
{
    double y = 0;
    uint32_t r = 0;
    for (; r + 4 <= dim; r += 4) {
        const float *w0 = w + (size_t)r * stride, *w1 = w0 + stride, *w2 = w1 + stride,
                    *w3 = w2 + stride;
        v4d a = {0, 0, 0, 0};
        for (uint32_t i = 0; i < d; i++) {
            v4d wv = {w0[i], w1[i], w2[i], w3[i]};
            a += wv * x[i];
        }
        for (int k = 0; k < 4; k++)
            y += fabs(a[k]);
    }
    for (; r < dim; r++) {
        const float *w0 = w + (size_t)r * stride;
        double a = 0;
        for (uint32_t i = 0; i < d; i++)
            a += w0[i] * x[i];
        y += fabs(a);
    }
    return y;
}

void metrics_output_ref(const float *att, uint32_t n, const float *V, uint32_t d, const float *wo_h,
                        size_t stride, uint32_t dim, double *full, double *nf, double *yf)
{
    *nf = *yf = 0;
    if (d > METRICS_MAX_D)
        return;
    for (uint32_t i = 0; i < d; i++)
        full[i] = 0;
    for (uint32_t j = 0; j < n; j++)
        axpy(full, att[j], V + (size_t)j * d, d);
    for (uint32_t i = 0; i < d; i++)
        *nf += full[i] * full[i];
    *yf = wo_h ? wo_l1(wo_h, stride, dim, full, d) : 0;
}

void metrics_output_kept(metrics *m, const float *att, const uint8_t *keep, uint32_t n, double R,
                         const float *Vs, int evicted, uint32_t d, const float *wo_h, size_t stride,
                         uint32_t dim, const double *full, double nf, double yf)
{
    double diff[METRICS_MAX_D];
    if (d > METRICS_MAX_D || R <= 0)
        return;
    /* o* - ô = o* - (1/R) Σ_{j∈S} A*_j V_j, the sum over S read directly (evicted = 0) or as
     * o* - Σ_{j∉S} A*_j V_j: only the smaller of the two sets is read */
    for (uint32_t i = 0; i < d; i++)
        diff[i] = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (kept_at(keep, n, j) == evicted)
            continue;
        axpy(diff, att[j], Vs, d);
        Vs += d;
    }
    if (evicted)
        for (uint32_t i = 0; i < d; i++)
            diff[i] = full[i] - diff[i];
    double nd = 0;
    for (uint32_t i = 0; i < d; i++) {
        diff[i] = full[i] - diff[i] / R;
        nd += diff[i] * diff[i];
    }
    if (nf > 0) {
        m->err += sqrt(nd / nf);
        m->n_err++;
    }
    if (!wo_h)
        return;
    double yd = wo_l1(wo_h, stride, dim, diff, d);
    if (yf > 0) {
        m->err_wo += yd / yf;
        m->n_err_wo++;
    }
}

void metrics_output(metrics *m, const float *att, const uint8_t *keep, uint32_t n, double R,
                    const float *V, uint32_t d, const float *wo_h, size_t stride, uint32_t dim)
{
    double full[METRICS_MAX_D], nf, yf;
    if (d > METRICS_MAX_D || R <= 0)
        return;
    metrics_output_ref(att, n, V, d, wo_h, stride, dim, full, &nf, &yf);
    /* the kept rows of V in order, as metrics_output_kept reads them */
    float *Vk = malloc(((size_t)n * d + 1) * sizeof *Vk);
    if (!Vk)
        return;
    size_t c = 0;
    for (uint32_t j = 0; j < n; j++)
        if (kept_at(keep, n, j))
            memcpy(Vk + c++ * d, V + (size_t)j * d, d * sizeof *Vk);
    metrics_output_kept(m, att, keep, n, R, Vk, 0, d, wo_h, stride, dim, full, nf, yf);
    free(Vk);
}

/* log-softmax of x at i, computed stably. */
static void log_softmax(const float *x, uint32_t n, double *out)
{
    double mx = -INFINITY, s = 0;
    for (uint32_t i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    for (uint32_t i = 0; i < n; i++)
        s += exp(x[i] - mx);
    double ls = mx + log(s);
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] - ls;
}

void metrics_logits(metrics *m, const float *full, const float *pol, uint32_t vocab, int next)
{
    double *lf = malloc(2 * (size_t)vocab * sizeof *lf);
    if (!lf)
        return;
    double *lp = lf + vocab, kl = 0;
    log_softmax(full, vocab, lf);
    log_softmax(pol, vocab, lp);
    uint32_t af = 0, ap = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        kl += exp(lf[i]) * (lf[i] - lp[i]);
        if (full[i] > full[af])
            af = i;
        if (pol[i] > pol[ap])
            ap = i;
    }
    m->kl += kl > 0 ? kl : 0;
    m->top1 += af == ap;
    if (next >= 0 && (uint32_t)next < vocab) {
        m->nll_full -= lf[next];
        m->nll_pol -= lp[next];
    }
    m->n_tok++;
    free(lf);
}

int metrics_report(const metrics *m, const metric_sink *out)
{
    int rc = 0;
    if (m->n_rows) {
        double n = (double)m->n_rows;
        rc |= out->add(out->ctx, "attn_mass_recall", m->mass / n, "ratio");
        rc |= out->add(out->ctx, "topk_recall", m->topk / n, "ratio");
        rc |= out->add(out->ctx, "kept_frac", m->kept_of > 0 ? m->kept / m->kept_of : 1.0, "ratio");
    }
    if (m->n_err)
        rc |= out->add(out->ctx, "attn_out_rel_err", m->err / (double)m->n_err, "ratio");
    if (m->n_err_wo)
        rc |= out->add(out->ctx, "attn_out_wo_rel_err", m->err_wo / (double)m->n_err_wo, "ratio");
    if (m->n_tok) {
        double n = (double)m->n_tok;
        double pf = exp(m->nll_full / n), pp = exp(m->nll_pol / n);
        rc |= out->add(out->ctx, "logit_kl", m->kl / n, "nats");
        rc |= out->add(out->ctx, "top1_agreement", m->top1 / n, "ratio");
        rc |= out->add(out->ctx, "ppl_full", pf, "ppl");
        rc |= out->add(out->ctx, "ppl_policy", pp, "ppl");
        rc |= out->add(out->ctx, "ppl_delta", pp - pf, "ppl");
    }
    return rc ? MS_ERR_NOMEM : MS_OK;
}
