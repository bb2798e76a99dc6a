/* metrics.h — accuracy of a policy against the full cache (policies.md §3).
 *
 * Per (decode step, layer, query head), with A* the full-cache attention row over the n = pos+1
 * entries (the last is the current token, always kept) and S the kept set:
 *   mass recall   R = Σ_{j∈S} A*_j (1 - R bounds the L1 error of the renormalized attention)
 *   top-k recall  |topk(A*) ∩ S| / k (Quest Fig. 4, k = 10)
 *   output error  ‖o* - ô‖₂ / ‖o*‖₂ with o* = Σ A*_j V_j, ô = Σ_{j∈S} (A*_j / R) V_j, and the
 *                 same after W_o in L1 (CriticalKV's criterion): ‖W_o^h(o* - ô)‖₁ / ‖W_o^h o*‖₁
 * Per predicted token of a model that runs (teacher forced on the trace's tokens; decode
 * positions whose next token lies inside the run's prompt + decode window):
 *   KL(p_full ‖ p_policy), top-1 agreement, and the perplexity of the next token under each. */
#ifndef MPCSIM_METRICS_H
#define MPCSIM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/metric.h"

typedef struct metrics {
    uint32_t recall_k;
    double mass, topk, err, err_wo;
    uint64_t n_rows, n_err, n_err_wo;
    double kept, kept_of; /* Σ kept entries, Σ cached entries (kept fraction) */
    double kl, top1, nll_full, nll_pol;
    uint64_t n_tok;
    uint32_t *work, *sel; /* top-k scratch */
    size_t cap;
} metrics;

int metrics_init(metrics *m, uint32_t recall_k, size_t max_len);
void metrics_free(metrics *m);

/* One query head's row: att = n full-cache probabilities, keep = n-1 flags (the current token
 * n-1 is always kept). Adds mass and top-k recall; returns R. */
double metrics_row(metrics *m, const float *att, const uint8_t *keep, uint32_t n);
/* metrics_row in two parts: the full row's top-k positions into sel (n entries of room; a
 * function of the row alone, so the runs of a group compute it once), their count returned;
 * then the row against one policy's keep flags. */
size_t metrics_topk(metrics *m, const float *att, uint32_t n, uint32_t *sel);
double metrics_row_top(metrics *m, const float *att, const uint8_t *keep, uint32_t n,
                       const uint32_t *sel, size_t got);
/* Output error of that row: V = n × d values of the KV head; wo_h = W_o^h with row stride
 * `stride` (dim rows, d columns), or NULL. R from metrics_row. Nothing for d > METRICS_MAX_D. */
#define METRICS_MAX_D 512
void metrics_output(metrics *m, const float *att, const uint8_t *keep, uint32_t n, double R,
                    const float *V, uint32_t d, const float *wo_h, size_t stride, uint32_t dim);
/* metrics_output in two parts. The full cache's side, a function of the trace alone (the runs
 * of a group compute it once): o* = Σ A*_j V_j into full[d], ‖o*‖² into *nf, ‖W_o^h o*‖₁ into
 * *yf (0 without wo_h). Then one policy's side from a subset of the values: Vs holds, in
 * order, the values of the kept positions (evicted = 0; n-1 among them) or of the evicted ones
 * (evicted = 1), and o* - ô = o* - (1/R) Σ_{j∈S} A*_j V_j with Σ_{j∈S} = o* - Σ_{j∉S}. */
void metrics_output_ref(const float *att, uint32_t n, const float *V, uint32_t d, const float *wo_h,
                        size_t stride, uint32_t dim, double *full, double *nf, double *yf);
void metrics_output_kept(metrics *m, const float *att, const uint8_t *keep, uint32_t n, double R,
                         const float *Vs, int evicted, uint32_t d, const float *wo_h, size_t stride,
                         uint32_t dim, const double *full, double nf, double yf);
/* One row of a policy that keeps every entry (the full cache), without reading it: mass and
 * top-k recall 1, n-1 of n-1 kept, and (out_err, with_wo) output errors 0 — what metrics_row
 * and metrics_output give such a row up to float rounding. */
void metrics_exact(metrics *m, uint32_t n, int out_err, int with_wo);
/* One predicted token: full and policy logits (vocab), the true next token (or -1). */
void metrics_logits(metrics *m, const float *full, const float *pol, uint32_t vocab, int next);
/* Reports the averages to out (only the families that saw data). */
int metrics_report(const metrics *m, const metric_sink *out);

#endif
