/* page_ops.h — the ops of a selection in whole pages on mpcsim's operands (pcheck.h), shared by
 * quest (policy_quest.c) and the compositions' page blocks (compose.c): Quest's per-page key
 * bounds as carried state, the query against them, and the top pages' whole-page gather named
 * as the selection (a partial last page's padding rows biased out). Tensor names start with
 * the caller's prefix pfx ("quest", "cmp"). */
#ifndef MPCSIM_PAGE_OPS_H
#define MPCSIM_PAGE_OPS_H

#include <stdint.h>

#include "policy.h"

/* U_p = Σ_h Σ_i max(q_i·m_i, q_i·M_i) over the G query heads h of KV head g, in float (mx, mn:
 * the page's per-channel key max and min): the score quest's and the page blocks' select()
 * rank by. */
float page_bound_score(const float *q, const float *mx, const float *mn, uint32_t g, uint32_t G,
                       uint32_t d);
/* The page bounds state "<pfx>.bounds" (Hkv, max_pages, 2·d): per page the channels' max M,
 * then the negated min −m (so both keep up by a max). */
uint32_t page_bounds_state(opb *b, const char *pfx, uint32_t Hkv, uint32_t max_pages, uint32_t d);
/* The prompt's kv_len keys into the bounds of its pages of S (a partial last page's rows
 * filled with its first key). */
void page_bounds_prompt(opb *b, const char *pfx, uint32_t bst, uint32_t Hkv, uint32_t kv_len,
                        uint32_t S, uint32_t d);
/* U_p = Σ_i max(q_i·M_i, q_i·m_i) of the np pages from u0, summed over the G = H / Hkv query
 * heads of a KV head: (Hkv, 1, np). */
uint32_t page_bounds_score(opb *b, const char *pfx, uint32_t bst, uint32_t H, uint32_t Hkv,
                           uint32_t u0, uint32_t np, uint32_t d);
/* The decode step's new key into the bounds of its page (kv_len / S). */
void page_bounds_upkeep(opb *b, const char *pfx, uint32_t bst, uint32_t Hkv, uint32_t kv_len,
                        uint32_t S, uint32_t d, uint32_t max_pages);
/* The error bound of a page score from the ops against the float one: each of its d·G terms
 * (the larger of q_i·M_i, q_i·m_i) from a rounded query and bound (±u/2 each, u = 2^-frac)
 * and truncated (±u), the float sum's γ_{dG} of its terms (page_ops.c states the derivation);
 * twice that, for the two pages of a swap. qmax, kmax: the largest |query| and |key|
 * element. */
double page_bounds_tol(double qmax, double kmax, uint32_t d, uint32_t G, int frac_bits);
/* The top kp of the np − u0 pages [u0, np) by row (Hkv, 1, np − u0), u0 = ⌊c0 / S⌋, their
 * whole pages of S cached [K | V] rows (of kv_len) gathered and named as the selection of the
 * candidates [c0, r1) (each entry's score its page's; tol; np = ⌈r1 / S⌉), the first page's
 * rows before c0 (sinks) and the last page's past r1 (a partial last page's padding, or a
 * recent window's entries) — the sinks and the window attended as public entries — biased out
 * of the attention (pcheck_selection_bias); returns the one-hot rows (Hkv, kp, np − u0). */
uint32_t page_select(opb *b, const char *pfx, uint32_t row, uint32_t H, uint32_t Hkv, uint32_t c0,
                     uint32_t np, uint32_t kp, uint32_t S, uint32_t d, uint32_t r1, uint32_t kv_len,
                     double tol);
/* page_select after its top-k: the gather of the pages by the one-hot rows oh (Hkv, kp,
 * np − u0), the selection named with row's scores, its rows outside [c0, r1) biased out. oh and
 * row may be another layer's (a selection shared across layers: compose_shlay.c). */
void page_gather(opb *b, const char *pfx, uint32_t oh, uint32_t row, uint32_t H, uint32_t Hkv,
                 uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d, uint32_t r1,
                 uint32_t kv_len, double tol);
/* The same selection carried for the steps until the next one (`when: once`, every N steps):
 * the gathered rows into the state "<pfx>.kept" (Hkv, kp·S, 2d), their entries' scores into
 * "<pfx>.kept_score" (Hkv, max_len, 1) and their biases into "<pfx>.kept_bias"; named as this
 * step's selection where name (a decode step), not at the prompt; returns the one-hot rows.
 * page_gather_carry: the same after the top-k, by the one-hot rows oh and the scores row of
 * another layer (a selection shared across layers). */
uint32_t page_select_carry(opb *b, const char *pfx, uint32_t row, uint32_t H, uint32_t Hkv,
                           uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d,
                           uint32_t r1, uint32_t kv_len, double tol, int name, uint32_t max_len);
void page_gather_carry(opb *b, const char *pfx, uint32_t oh, uint32_t row, uint32_t H,
                       uint32_t Hkv, uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d,
                       uint32_t r1, uint32_t kv_len, double tol, int name, uint32_t max_len);
/* A step between selections: the carried rows named as its selection of the candidates
 * [c0, r1) of the last selecting step (np: their pages' end), with their biases and scores. */
void page_select_kept(opb *b, const char *pfx, uint32_t H, uint32_t Hkv, uint32_t c0, uint32_t np,
                      uint32_t kp, uint32_t S, uint32_t d, uint32_t r1, uint32_t kv_len, double tol,
                      uint32_t max_len);

#endif
