/* page_ops.c — the ops of a selection in whole pages (page_ops.h), after Quest
 * (mit-han-lab/Quest, quest/models/llama.py: per-page key min/max, the query's upper bound per
 * page, the top pages attended); costs as policies.md §1.12 Quest. */
#include "page_ops.h"

#include <math.h>
#include <stdio.h>

#include "pcheck.h"

/* "<pfx>.<sfx>" into buf (48 bytes). */
static const char *nm(char *buf, const char *pfx, const char *sfx)
{
    snprintf(buf, 48, "%.16s.%.30s", pfx, sfx);
    return buf;
}

/* −x as (x − x) − x: two local subtractions (a negation needs no product). */
static uint32_t neg(opb *pe, uint32_t x, uint32_t B, uint32_t R, uint32_t C, const char *name)
{
    char z[48];
    snprintf(z, sizeof z, "%.40s_zero", name);
    uint32_t zero = opb_op(pe, OP_SUB, B, R, 0, C, x, x, OP_NONE,
                           opb_tensor(pe, z, OPT_TEMP, B, R, C), 0, 0, 0);
    return opb_op(pe, OP_SUB, B, R, 0, C, zero, x, OP_NONE, opb_tensor(pe, name, OPT_TEMP, B, R, C),
                  0, 0, 0);
}

/* x as (B, R, C), the same elements in order (a view: a put reads its operand's rows by its
 * shape). */
static uint32_t reshape(opb *pe, uint32_t x, uint32_t B, uint32_t R, uint32_t C, const char *name)
{
    return opb_op(pe, OP_VIEW, B, R, 0, C, x, OP_NONE, OP_NONE,
                  opb_tensor(pe, name, OPT_TEMP, B, R, C), 0, 0, 0);
}

uint32_t page_bounds_state(opb *b, const char *pfx, uint32_t Hkv, uint32_t max_pages, uint32_t d)
{
    char n[48];
    return opb_shared(b, nm(n, pfx, "bounds"), OPT_CACHE, Hkv, max_pages, 2 * d);
}

void page_bounds_prompt(opb *pe, const char *pfx, uint32_t bst, uint32_t Hkv, uint32_t kv_len,
                        uint32_t S, uint32_t d)
{
    char n[48];
    uint32_t np = (kv_len + S - 1) / S;
    /* the prompt's keys in whole pages, a partial last page filled with its first key */
    uint32_t k = pcheck_input(pe, PCHECK_IN_KEYS_NEW, Hkv, kv_len, d);
    uint32_t kp = opb_tensor(pe, nm(n, pfx, "pages"), OPT_TEMP, Hkv, np * S, d);
    opb_put(pe, k, kp, Hkv, 0, kv_len, d);
    if (kv_len % S) {
        uint32_t first = opb_rows(pe, k, Hkv, (np - 1) * S, 1, d, nm(n, pfx, "fill"));
        for (uint32_t r = kv_len; r < np * S; r++)
            opb_put(pe, first, kp, Hkv, r, 1, d);
    }
    /* (page, key, channel) → (page, channel, key); the max rows, then the negated ones */
    uint32_t t = opb_transpose(pe, kp, Hkv * np, S, d, nm(n, pfx, "pages_t"));
    uint32_t rows = opb_tensor(pe, nm(n, pfx, "rows"), OPT_TEMP, Hkv, 2 * np * d, S);
    opb_put(pe, t, rows, Hkv, 0, np * d, S);
    opb_put(pe, neg(pe, t, Hkv, np * d, S, nm(n, pfx, "pages_neg")), rows, Hkv, np * d, np * d, S);
    /* COST: page bounds of the prompt: max and min over each page, (S-1) comparisons per
     * channel each (policies.md §1.12 Quest "bound upkeep 2d cmp per new token") */
    uint32_t mx = policy_emit(pe, OP_MAX, Hkv, 2 * np * d, 0, S, rows, OP_NONE, 0, 0, 0,
                              nm(n, pfx, "bounds"));
    /* (M | −m, page, channel) → (page, M | −m, channel): the state's rows (a view) */
    uint32_t bn = opb_tensor(pe, nm(n, pfx, "bounds_new"), OPT_TEMP, Hkv, np, 2 * d);
    opb_op(pe, OP_VIEW, Hkv * 2, np, 0, d, mx, OP_NONE, OP_NONE, bn, OPF_MERGE_HEADS, 0, 0);
    opb_put(pe, bn, bst, Hkv, 0, np, 2 * d);
}

uint32_t page_bounds_score(opb *pe, const char *pfx, uint32_t bst, uint32_t H, uint32_t Hkv,
                           uint32_t u0, uint32_t np, uint32_t d)
{
    char n[48];
    uint32_t G = H / Hkv;
    /* U_p = Σ_i max(q_i·M_i, q_i·m_i): [q | −q] against [M | −m], page-major (pages, H, 2d) so
     * that the query repeats over the pages by the product's broadcast; a KV head's bounds
     * repeated for its G query heads (a local product by public ones) */
    uint32_t q = pcheck_input(pe, PCHECK_IN_QUERY, H, 1, d);
    uint32_t q2 = opb_tensor(pe, nm(n, pfx, "q2"), OPT_TEMP, H, 2, d);
    opb_put(pe, q, q2, H, 0, 1, d);
    opb_put(pe, neg(pe, q, H, 1, d, nm(n, pfx, "q_neg")), q2, H, 1, 1, d);
    uint32_t be = opb_rows(pe, bst, Hkv, u0, np, 2 * d, nm(n, pfx, "cand"));
    if (G > 1)
        be = opb_repeat(pe, be, Hkv, np * 2 * d, G, nm(n, pfx, "cand_heads"));
    uint32_t bp = opb_tensor(pe, nm(n, pfx, "cand_pages"), OPT_TEMP, 1, np, H * 2 * d);
    opb_op(pe, OP_VIEW, H, np, 0, 2 * d, be, OP_NONE, OP_NONE, bp, OPF_MERGE_HEADS, 0, 0);
    /* COST: per page 2d products q_i·m_i, q_i·M_i (secret × secret), d max of the pairs, local
     * sum (§1.12 Quest) */
    uint32_t prod = opb_op(pe, OP_MUL, H, np, 0, 2 * d, bp, q2, OP_NONE,
                           opb_tensor(pe, nm(n, pfx, "prod"), OPT_TEMP, np, H, 2 * d), 0, 0, 0);
    uint32_t pairs = opb_transpose(pe, prod, H * np, 2, d, nm(n, pfx, "pairs"));
    uint32_t mx =
        policy_emit(pe, OP_MAX, H, np * d, 0, 2, pairs, OP_NONE, 0, 0, 0, nm(n, pfx, "max"));
    uint32_t ones = opb_shared(pe, nm(n, pfx, "sum_ones"), OPT_PUBLIC, 1, d, 1);
    uint32_t u = opb_matmul_pub(pe, mx, ones, H * np, d, 1,
                                opb_tensor(pe, nm(n, pfx, "score_pages"), OPT_TEMP, 1, np, H));
    u = opb_transpose(pe, u, 1, np, H, nm(n, pfx, "score_h")); /* (H, np): head-major */
    if (G == 1)
        return u;
    return opb_transpose(pe, opb_colsum(pe, u, Hkv, G, np, nm(n, pfx, "group")), Hkv, np, 1,
                         nm(n, pfx, "score"));
}

void page_bounds_upkeep(opb *pe, const char *pfx, uint32_t bst, uint32_t Hkv, uint32_t kv_len,
                        uint32_t S, uint32_t d, uint32_t max_pages)
{
    char n[48];
    /* COST: bound upkeep for the new key: max(M, k) and max(-m, -k): 2d comparisons (§1.12);
     * a page's first key is its bounds (paired with itself) */
    uint32_t p = kv_len / S;
    uint32_t kn = pcheck_input(pe, PCHECK_IN_KEYS_NEW, Hkv, 1, d);
    uint32_t pair = opb_tensor(pe, nm(n, pfx, "upkeep_in"), OPT_TEMP, Hkv, 2, 2 * d);
    uint32_t k2 = opb_tensor(pe, nm(n, pfx, "k2"), OPT_TEMP, Hkv, 2, d);
    opb_put(pe, kn, k2, Hkv, 0, 1, d);
    opb_put(pe, neg(pe, kn, Hkv, 1, d, nm(n, pfx, "k_neg")), k2, Hkv, 1, 1, d);
    k2 = reshape(pe, k2, Hkv, 1, 2 * d, nm(n, pfx, "k2_row"));
    opb_put(pe, kv_len % S ? opb_rows(pe, bst, Hkv, p, 1, 2 * d, nm(n, pfx, "open")) : k2, pair,
            Hkv, 0, 1, 2 * d);
    opb_put(pe, k2, pair, Hkv, 1, 1, 2 * d);
    uint32_t nb = policy_emit(pe, OP_MAX, Hkv, 2 * d, 0, 2,
                              opb_transpose(pe, pair, Hkv, 2, 2 * d, nm(n, pfx, "upkeep_t")),
                              OP_NONE, 0, 0, 0, nm(n, pfx, "upkeep"));
    if (p < max_pages)
        opb_put(pe, reshape(pe, nb, Hkv, 1, 2 * d, nm(n, pfx, "upkeep_row")), bst, Hkv, p, 1,
                2 * d);
}

/* A page score is n = d·G terms t_i = max(q_i·M_i, q_i·m_i), |t_i| ≤ qmax·kmax. The ops' term
 * from the query and bounds in fixed point (each within u/2 of the float value, u = 2^-f):
 * |q̂b̂ − qb| ≤ (|q| + |b|)·u/2 + u²/4, plus the product's truncation (±u); the max of a pair
 * moves by no more than its operands, and the ring sums exactly: (qmax + kmax)·u/2 + 2u per term
 * (u²/4 ≤ u). The float score (select()) rounds each product and each partial sum: a max of
 * two rounded products is the larger one rounded (rounding is monotone), so the score is a sum
 * of n rounded terms, within γ_n·Σ|t_i| ≤ γ_n·n·qmax·kmax of the exact one (Higham, Accuracy
 * and Stability of Numerical Algorithms, eq. 3.4), γ_n = n·2^-24 / (1 − n·2^-24). Two pages
 * swap only when their scores are within the sum of both errors: twice. */
double page_bounds_tol(double qmax, double kmax, uint32_t d, uint32_t G, int frac_bits)
{
    double u = ldexp(1, -frac_bits), n = (double)d * G;
    double gam = n * 0x1p-24 / (1 - n * 0x1p-24);
    return 2 * n * ((qmax + kmax) * u / 2 + 2 * u + gam * qmax * kmax);
}

/* The biases' shape of a selection of kp pages of S (pcheck_selection_bias): (Hkv, kp, S), or
 * repeated for the G query heads of a KV head (Hkv, G, kp·S). */
static void bias_dims(uint32_t G, uint32_t kp, uint32_t S, uint32_t *rows, uint32_t *cols)
{
    *rows = G > 1 ? G : kp;
    *cols = G > 1 ? kp * S : S;
}

/* page_gather, its selection named (name) and/or carried into state (max_len: the state's
 * rows of entry scores; 0: none carried). */
static void page_gat(opb *pe, const char *pfx, uint32_t oh, uint32_t row, uint32_t H, uint32_t Hkv,
                     uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d, uint32_t r1,
                     uint32_t kv_len, double tol, int name, uint32_t max_len)
{
    char n[48];
    uint32_t u0 = c0 / S, G = H / Hkv, nu = np - u0, r0 = u0 * S, nk = (kv_len + S - 1) / S;
    /* COST: gather of the kept pages' K|V rows (§1.12 Quest) */
    /* the cache, in whole pages where the candidate pages reach a partial last page (its rows
     * past kv_len empty), and the candidate pages' rows of it */
    uint32_t rows = np * S > kv_len ? nk * S : kv_len, tab;
    if (rows > kv_len && pe->phase == PHASE_PREFILL) {
        /* at the prompt the session binds the cached rows alone: the prompt's, then zero rows
         * (a row minus itself: local) up to the last page's end, the padding a later decode
         * step's rows would be */
        uint32_t kv = pcheck_input(pe, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
        tab = opb_tensor(pe, nm(n, pfx, "kv_padded"), OPT_TEMP, Hkv, rows, 2 * d);
        opb_put(pe, kv, tab, Hkv, 0, kv_len, 2 * d);
        uint32_t one = opb_rows(pe, kv, Hkv, 0, 1, 2 * d, nm(n, pfx, "kv_one"));
        uint32_t zero =
            opb_op(pe, OP_SUB, Hkv, 1, 0, 2 * d, one, one, OP_NONE,
                   opb_tensor(pe, nm(n, pfx, "kv_zero"), OPT_TEMP, Hkv, 1, 2 * d), 0, 0, 0);
        for (uint32_t r = kv_len; r < rows; r++)
            opb_put(pe, zero, tab, Hkv, r, 1, 2 * d);
    } else {
        tab = pcheck_input(pe, PCHECK_IN_KV, Hkv, rows, 2 * d);
    }
    if (u0 || np * S < rows)
        tab = opb_rows(pe, tab, Hkv, r0, nu * S, 2 * d, nm(n, pfx, "kv_pages"));
    uint32_t sel = opb_tensor(pe, nm(n, pfx, "kv_kept"), OPT_TEMP, Hkv, kp * S, 2 * d);
    opb_op(pe, OP_GATHER, Hkv, kp, nu, 2 * d * S, oh, tab, OP_NONE, sel, OPF_NO_TRUNC, 0, 0);
    /* each entry's score is its page's (for the check's ties; local) */
    uint32_t ones_s = opb_shared(pe, nm(n, pfx, "entry_ones"), OPT_PUBLIC, 1, 1, S);
    uint32_t ent =
        opb_matmul_pub(pe, row, ones_s, Hkv * nu, 1, S,
                       opb_tensor(pe, nm(n, pfx, "score_entry"), OPT_TEMP, Hkv, nu * S, 1));
    uint32_t sc = opb_rows(pe, ent, Hkv, c0 - r0, r1 - c0, 1, nm(n, pfx, "score_entries"));
    if (max_len) { /* the rows and their scores, the selection of the steps until the next one */
        opb_put(pe, sel, opb_shared(pe, nm(n, pfx, "kept"), OPT_CACHE, Hkv, kp * S, 2 * d), Hkv, 0,
                kp * S, 2 * d);
        opb_put(pe, sc, opb_shared(pe, nm(n, pfx, "kept_score"), OPT_CACHE, Hkv, max_len, 1), Hkv,
                0, r1 - c0, 1);
    }
    if (name)
        pcheck_selection(pe, sel, kp * S, c0, r1, sc, tol);
    if (c0 > r0 || r1 < np * S) {
        /* the first candidate page's rows before c0 (sinks) and the last one's past r1
         * (padding past kv_len, or the recent window's) are no candidates, the sinks and the
         * window attended as public entries: each gathered row's score bias, the one-hot rows
         * against the pages' public biases, repeated for the G query heads of a KV head (local
         * products) */
        char pn[48];
        if (c0 > r0)
            snprintf(pn, sizeof pn, "%.16s.rows_pad%uto%u", pfx, c0 - r0, r1 - r0);
        else
            snprintf(pn, sizeof pn, "%.16s.rows_pad%u", pfx, r1 - r0);
        uint32_t pad = opb_shared(pe, pn, OPT_PUBLIC, 1, nu, S);
        uint32_t bias =
            opb_matmul_pub(pe, oh, pad, Hkv * kp, nu, S,
                           opb_tensor(pe, nm(n, pfx, "pad_bias"), OPT_TEMP, Hkv, kp, S));
        if (G > 1)
            bias = opb_repeat(pe, bias, Hkv, kp * S, G, nm(n, pfx, "pad_heads"));
        uint32_t br, bc;
        bias_dims(G, kp, S, &br, &bc);
        if (max_len)
            opb_put(pe, bias, opb_shared(pe, nm(n, pfx, "kept_bias"), OPT_CACHE, Hkv, br, bc), Hkv,
                    0, br, bc);
        if (name)
            pcheck_selection_bias(pe, bias);
    }
}

/* page_select's top-k, then its gather (page_gat); returns the one-hot rows. */
static uint32_t page_sel(opb *pe, const char *pfx, uint32_t row, uint32_t H, uint32_t Hkv,
                         uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d, uint32_t r1,
                         uint32_t kv_len, double tol, int name, uint32_t max_len)
{
    char n[48];
    /* COST: topk over the pages (§1.12 Quest) */
    uint32_t oh = policy_emit(pe, OP_TOPK, Hkv, 1, 0, np - c0 / S, row, OP_NONE, 0, (int32_t)kp, 0,
                              nm(n, pfx, "topk"));
    page_gat(pe, pfx, oh, row, H, Hkv, c0, np, kp, S, d, r1, kv_len, tol, name, max_len);
    return oh;
}

uint32_t page_select(opb *pe, const char *pfx, uint32_t row, uint32_t H, uint32_t Hkv, uint32_t c0,
                     uint32_t np, uint32_t kp, uint32_t S, uint32_t d, uint32_t r1, uint32_t kv_len,
                     double tol)
{
    return page_sel(pe, pfx, row, H, Hkv, c0, np, kp, S, d, r1, kv_len, tol, 1, 0);
}

void page_gather(opb *pe, const char *pfx, uint32_t oh, uint32_t row, uint32_t H, uint32_t Hkv,
                 uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d, uint32_t r1,
                 uint32_t kv_len, double tol)
{
    page_gat(pe, pfx, oh, row, H, Hkv, c0, np, kp, S, d, r1, kv_len, tol, 1, 0);
}

uint32_t page_select_carry(opb *pe, const char *pfx, uint32_t row, uint32_t H, uint32_t Hkv,
                           uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d,
                           uint32_t r1, uint32_t kv_len, double tol, int name, uint32_t max_len)
{
    return page_sel(pe, pfx, row, H, Hkv, c0, np, kp, S, d, r1, kv_len, tol, name, max_len);
}

void page_gather_carry(opb *pe, const char *pfx, uint32_t oh, uint32_t row, uint32_t H,
                       uint32_t Hkv, uint32_t c0, uint32_t np, uint32_t kp, uint32_t S, uint32_t d,
                       uint32_t r1, uint32_t kv_len, double tol, int name, uint32_t max_len)
{
    page_gat(pe, pfx, oh, row, H, Hkv, c0, np, kp, S, d, r1, kv_len, tol, name, max_len);
}

void page_select_kept(opb *pe, const char *pfx, uint32_t H, uint32_t Hkv, uint32_t c0, uint32_t np,
                      uint32_t kp, uint32_t S, uint32_t d, uint32_t r1, uint32_t kv_len, double tol,
                      uint32_t max_len)
{
    /* no ops: the step attends the rows the last selection gathered (its state) and their
     * biases; the entries cached since are public positions. Named for the check with the
     * selecting step's scores (a view) */
    char n[48];
    uint32_t G = H / Hkv, r0 = c0 / S * S, br, bc;
    pcheck_input(pe, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
    uint32_t kept = opb_shared(pe, nm(n, pfx, "kept"), OPT_CACHE, Hkv, kp * S, 2 * d);
    uint32_t sc = opb_shared(pe, nm(n, pfx, "kept_score"), OPT_CACHE, Hkv, max_len, 1);
    pcheck_selection(pe, kept, kp * S, c0, r1,
                     opb_rows(pe, sc, Hkv, 0, r1 - c0, 1, nm(n, pfx, "score_entries")), tol);
    bias_dims(G, kp, S, &br, &bc);
    if (c0 > r0 || r1 < np * S)
        pcheck_selection_bias(pe, opb_shared(pe, nm(n, pfx, "kept_bias"), OPT_CACHE, Hkv, br, bc));
}

/* U_p = Σ_h Σ_i max(q_i·m_i, q_i·M_i) over the query heads h of KV head g, in float: the
 * score the selection ranks by. */
float page_bound_score(const float *q, const float *mx, const float *mn, uint32_t g, uint32_t G,
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
