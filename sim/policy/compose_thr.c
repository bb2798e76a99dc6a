/* compose_thr.c — a composition's threshold selection (`select: {threshold: X}`) on real operands,
 * the ops `policy check` runs and the secure session executes on shares (secpol_emit.c): key
 * norms per token or summed per page (at every decode step, once after the prompt, or every N
 * steps), the query against page bounds (at every step or every N), attention (per token at every
 * step, once or every N, or in pages at every step or every N) or window votes (once), per KV
 * head or per layer, shared across layers or not,
 * compared with the public threshold obliviously. The kept count is not opened: every candidate's
 * [K | V] row stays in the step's attention, and a dropped one's attention score is biased by
 * −PCHECK_PAD_BIAS before the softmax (pcheck_selection_bias), as quest's padding rows are —
 * nothing of the scores is revealed, and no attention is saved (POLICIES.md "A threshold on
 * shares"). */
#include "compose_int.h"
#include "page_ops.h"
#include "pcheck.h"
#include "policy.h"

#include <math.h>
#include <stdio.h>

int compose_thr_shaped(const cspec *sp)
{
    /* evicting for good by key norms of tokens: a norm never changes, so an entry the threshold
     * dropped stays below it and one it kept stays above — select()'s kept set at every step is
     * the threshold over the step's candidates, as without `evict`. So by accumulated attention
     * of tokens at every step: a dropped entry is attended by no query (its score biased out),
     * so its score stays below; a kept one's only grows. The newest row's attention and a page's
     * sum (of norms or attention: it grows as more of the page leaves the window) move either way:
     * the dropped entries are carried as state (compose_thr.gone) */
    int perm_ok =
        (sp->score == SC_KEYNORM && sp->page <= 1) ||
        ((sp->score == SC_ATT || sp->score == SC_KEYNORM) && sp->when == W_STEP && sp->every <= 1);
    return sp->sel == K_THRESHOLD && (!sp->permanent || perm_ok) && !sp->cluster &&
           ((sp->score == SC_BOUNDS && sp->when == W_STEP) ||
            (sp->score == SC_WINDOW && sp->when == W_ONCE && sp->page <= 1) ||
            (sp->score == SC_ATT && (sp->page <= 1 || sp->when == W_STEP)) ||
            sp->score == SC_KEYNORM);
}

/* x (Hkv, nu) of the candidate units [u0, u0 + nu) of S entries as a value per candidate entry
 * [c0, c1): each unit's repeated S times (a product with public ones, local), the entries of
 * its first and last unit outside the candidates cut (a view). */
static uint32_t per_entry(opb *b, uint32_t x, uint32_t Hkv, uint32_t nu, uint32_t S, uint32_t c0,
                          uint32_t c1, const char *nm)
{
    char t[48];
    if (S == 1)
        return x;
    snprintf(t, sizeof t, "%.40s_all", nm);
    uint32_t ones = opb_shared(b, "cmp.entry_ones", OPT_PUBLIC, 1, 1, S);
    uint32_t all =
        opb_matmul_pub(b, x, ones, Hkv * nu, 1, S, opb_tensor(b, t, OPT_TEMP, Hkv, nu * S, 1));
    return opb_rows(b, all, Hkv, c0 - c0 / S * S, c1 - c0, 1, nm);
}

/* The candidate units' scores (B, 1, nu) from the entry scores x (B, ≥ c1, 1): the entries
 * [c0, c1) summed per unit of S, [⌊c0 / S⌋, ⌈c1 / S⌉), the entries outside them none of their
 * unit's (written into zeros: a view; summed by a product with public ones: local), as select()
 * scores a page by its candidates' sum; S = 1 the entries' own. */
static uint32_t unit_row(opb *b, uint32_t x, uint32_t B, uint32_t c0, uint32_t c1, uint32_t S,
                         const char *nm)
{
    char c[48], p[48], u[48];
    uint32_t nc = c1 - c0, u0 = c0 / S, nu = (c1 + S - 1) / S - u0;
    snprintf(c, sizeof c, "%.36s_cand", nm);
    /* per token the names att_next's ops have always had */
    uint32_t cand = opb_rows(b, x, B, c0, nc, 1, S == 1 ? "cmp.next_cand" : c);
    if (S == 1)
        return opb_transpose(b, cand, B, nc, 1, nm);
    snprintf(p, sizeof p, "%.36s_pad", nm);
    snprintf(u, sizeof u, "%.36s_sum", nm);
    uint32_t pad = opb_tensor(b, p, OPT_TEMP, B, nu * S, 1);
    opb_put(b, cand, pad, B, c0 - u0 * S, nc, 1);
    uint32_t ones = opb_shared(b, "cmp.unit_ones", OPT_PUBLIC, 1, S, 1);
    uint32_t sum = opb_matmul_pub(b, pad, ones, B * nu, S, 1, opb_tensor(b, u, OPT_TEMP, B, nu, 1));
    return opb_transpose(b, sum, B, nu, 1, nm);
}

/* [U < thr] of the scores row (B, 1, nu): 0/1 per unit. */
static uint32_t thr_below(opb *b, uint32_t row, uint32_t B, uint32_t nu, double thr)
{
    /* COST: [U < thr] per candidate unit against the threshold as a constant on shares (a value
     * times 0, plus thr: local), one comparison each; the kept count is not opened */
    uint32_t at = opb_rows(b, row, 1, 0, 1, 1, "cmp.thr_at");
    uint32_t thc = opb_tensor(b, "cmp.thr", OPT_TEMP, 1, 1, 1);
    opb_op(b, OP_MUL_PUB, 1, 1, 0, 1, at, OP_NONE, OP_NONE, thc, OPF_NO_TRUNC, 0, 0.0);
    opb_op(b, OP_ADD_PUB, 1, 1, 0, 1, thc, OP_NONE, OP_NONE, thc, 0, 0, thr);
    return opb_op(b, OP_LT, B, 1, 0, nu, row, thc, OP_NONE,
                  opb_tensor(b, "cmp.below", OPT_TEMP, B, 1, nu), 0, 0, 0);
}

/* The threshold on the scores row (B, 1, nu) of the candidate units [⌊c0 / S⌋, ⌈c1 / S⌉), one
 * per KV head (B = Hkv) or one per layer (B = 1, `share: layer`): the score bias of each
 * candidate entry (H, c1 − c0), −PCHECK_PAD_BIAS where its unit is dropped, for each of the
 * H / B query heads it selects for. */
static uint32_t thr_bias(opb *b, uint32_t row, uint32_t B, uint32_t H, uint32_t c0, uint32_t c1,
                         uint32_t S, double thr)
{
    uint32_t nu = (c1 + S - 1) / S - c0 / S, nc = c1 - c0;
    uint32_t lt = thr_below(b, row, B, nu, thr);
    /* a dropped unit's score bias −PCHECK_PAD_BIAS (the 0/1 bit times its fixed point: local),
     * per candidate entry, repeated for the query heads it selects for (local products) */
    uint32_t bu = opb_op(b, OP_MUL_PUB, B, 1, 0, nu, lt, OP_NONE, OP_NONE,
                         opb_tensor(b, "cmp.drop_bias", OPT_TEMP, B, 1, nu), OPF_NO_TRUNC, 0,
                         -PCHECK_PAD_BIAS);
    uint32_t bias = per_entry(b, bu, B, nu, S, c0, c1, "cmp.drop_entries");
    return H > B ? opb_repeat(b, bias, B, nc, H / B, "cmp.drop_heads") : bias;
}

/* The biases (H, nc) of the 0/1 bits (B, nc) of the dropped candidate entries: each bit times
 * −PCHECK_PAD_BIAS's fixed point (local), repeated for the query heads it selects for. */
static uint32_t thr_gone_bias(opb *b, uint32_t bits, uint32_t B, uint32_t H, uint32_t nc)
{
    uint32_t bias = opb_op(b, OP_MUL_PUB, B, nc, 0, 1, bits, OP_NONE, OP_NONE,
                           opb_tensor(b, "cmp.gone_bias", OPT_TEMP, B, 1, nc), OPF_NO_TRUNC, 0,
                           -PCHECK_PAD_BIAS);
    return H > B ? opb_repeat(b, bias, B, nc, H / B, "cmp.drop_heads") : bias;
}

/* As thr_bias, evicting for good: each candidate entry's bit (its unit's) OR'ed into the state
 * "cmp.gone" (B, max_len, 1) of the entries dropped so far, a + b − a·b (COST: one
 * multiplication per candidate entry and selection; first, the prompt's decision: the bits
 * written as they are), the biases from it — an entry once dropped stays out, as select()'s
 * alive set keeps it, whatever its score does after. */
static uint32_t thr_bias_gone(opb *b, const compose_thr *t, uint32_t row, uint32_t B, uint32_t H,
                              uint32_t c0, uint32_t c1, double thr, int first)
{
    uint32_t S = t->S, nu = (c1 + S - 1) / S - c0 / S, nc = c1 - c0;
    uint32_t lt =
        per_entry(b, thr_below(b, row, B, nu, thr), B, nu, S, c0, c1, "cmp.below_entries");
    if (S == 1) /* a column per selection, as the state's rows */
        lt = opb_transpose(b, lt, B, 1, nc, "cmp.below_col");
    uint32_t gone = opb_shared(b, "cmp.gone", OPT_CACHE, B, t->env->max_len, 1);
    if (first) { /* the prompt's decision: none dropped before (the state written, not read) */
        opb_put(b, lt, gone, B, c0, nc, 1);
        return thr_gone_bias(b, lt, B, H, nc);
    }
    uint32_t old = opb_rows(b, gone, B, c0, nc, 1, "cmp.gone_old");
    uint32_t both = opb_op(b, OP_MUL, B, nc, 0, 1, old, lt, OP_NONE,
                           opb_tensor(b, "cmp.gone_both", OPT_TEMP, B, nc, 1), OPF_NO_TRUNC, 0, 0);
    uint32_t sum = opb_op(b, OP_ADD, B, nc, 0, 1, old, lt, OP_NONE,
                          opb_tensor(b, "cmp.gone_sum", OPT_TEMP, B, nc, 1), 0, 0, 0);
    uint32_t now = opb_op(b, OP_SUB, B, nc, 0, 1, sum, both, OP_NONE,
                          opb_tensor(b, "cmp.gone_now", OPT_TEMP, B, nc, 1), 0, 0, 0);
    opb_put(b, now, gone, B, c0, nc, 1);
    return thr_gone_bias(b, now, B, H, nc);
}

/* Names every candidate entry's cached [K | V] row of [c0, c1) (a view: kv_len cached) as the
 * selection, bias (H, c1 − c0) its score biases, row (B, 1, nu) the units' scores (each entry's
 * its unit's, each KV head's its selection's: the check's ties), tol their error bound. */
static void thr_name(opb *b, uint32_t row, uint32_t bias, uint32_t B, uint32_t Hkv, uint32_t d,
                     uint32_t c0, uint32_t c1, uint32_t S, uint32_t kv_len, double thr, double tol)
{
    uint32_t nu = (c1 + S - 1) / S - c0 / S, nc = c1 - c0;
    uint32_t sc = per_entry(b, row, B, nu, S, c0, c1, "cmp.score_entries");
    if (Hkv > B)
        sc = opb_repeat(b, sc, B, nc, Hkv / B, "cmp.score_heads");
    uint32_t kv = pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
    uint32_t sel = opb_rows(b, kv, Hkv, c0, nc, 2 * d, "cmp.kv_cand");
    pcheck_selection(b, sel, nc, c0, c1, sc, tol);
    pcheck_selection_bias(b, bias);
    pcheck_selection_threshold(b, thr);
}

/* The error bound of the ops' key norm of one entry against select()'s float one (as
 * compose_keynorm.c keynorm_tol, one score's): keys on f fractional bits, each square
 * truncated, summed exactly: |ŝ − s| ≤ √d·‖k‖·2⁻ᶠ + 2d·2⁻ᶠ ≤ ((d + s)/2 + 2d)·2⁻ᶠ, the float's
 * relative 2⁻²⁴; M the largest candidate score. A page's sum of S of them: S such errors and the
 * float sum's relative S·2⁻²⁴ (compose_emit_pages). */
static double keynorm_err(uint32_t d, uint32_t S, double M, double u)
{
    return S * (((d + M) / 2 + 2 * d) * u + M * (S + 1) * 0x1p-24);
}

/* The candidates [*c0, *c1) of the selection the step at T cached entries uses (T the prompt's
 * length at the prompt): its own, or once the prompt's, or every N steps the last selecting
 * step's (the prompt's end or a decode step N apart from it), whose position it returns; after
 * that step's sinks, before its window. */
static uint32_t thr_cand(const compose_thr *t, uint32_t T, uint32_t *c0, uint32_t *c1)
{
    uint32_t P = t->env->prompt_len;
    uint32_t at = t->once || T <= P ? P : T - (T - P) % (t->every ? t->every : 1);
    compose_att_budget u;
    t->budget(t->st, t->lead, at, &u);
    *c0 = u.sinks < at ? u.sinks : at;
    *c1 = at - (u.recent < at ? u.recent : at);
    *c1 = *c1 < *c0 ? *c0 : *c1;
    return at;
}

/* The threshold an attention score is compared with on shares: select()'s, or shared per layer
 * over the newest row its H heads' sum against H times it (select() ranks their mean). */
static double att_thr(const compose_thr *t)
{
    return t->shared && t->last ? t->thr * t->env->n_heads : t->thr;
}

/* The error bound of an attention score (the sum of A fixed-point probabilities, each within 2⁻ᶠ
 * of its float, against select()'s float sum of A terms) and the threshold's fixed point within
 * 2⁻ᶠ: the float sum's error at most A·M·2⁻²⁴, M the largest candidate score of the layer's
 * carried ones up to upto, or over the newest row A (each term at most 1: a row carried since
 * may be smaller than the one decided on). A page's: the sum of S such scores, S·A terms of at
 * most S·M summed. */
static double att_tol(const compose_thr *t, uint32_t w, uint32_t upto)
{
    const policy_env *v = t->env;
    double M = 0, u = ldexp(1, -pcheck_frac_bits());
    double A = (double)(t->shared ? v->n_heads : v->n_heads / v->n_kv_heads) * w;
    for (uint32_t g = 0; !t->last && g < v->n_kv_heads; g++)
        for (uint32_t j = 0; j < upto; j++)
            M = fmax(M, t->norms[(size_t)g * v->max_len + j]);
    M = t->last ? A : M;
    return t->S * A * (u + t->S * M * 0x1p-24) + u; /* pages: a sum of S entries' */
}

/* Scores x (B, n), one row per selection, as per-KV-head tie scores (Hkv, n): each selection's
 * repeated for the KV heads it selects for (local). */
static uint32_t per_head(opb *b, uint32_t x, uint32_t B, uint32_t Hkv, uint32_t n, const char *nm)
{
    return Hkv > B ? opb_repeat(b, x, B, n, Hkv / B, nm) : x;
}

/* The decision for the step at T cached entries (attention scores): the state "cmp.rows_<T>"
 * (Hkv, T, 2d), the cached rows it attends, rows (Hkv, T, 2d) from r0 of tab, the new entry's
 * row (or OP_NONE) behind them; the state "cmp.bias_<T>" (H, T, 1), the candidates' biases, 0
 * for the sinks, the window and (every N) the entries cached since the last selecting step.
 * A selecting step's from the scores sc (B, max_len, 1) against the threshold (every N: also
 * kept as the state "cmp.drop" (H, max_len, 1) for the steps until the next); another step's
 * the last selecting step's. */
static void att_next(opb *b, const compose_thr *t, uint32_t sc, uint32_t tab, uint32_t nrow,
                     uint32_t T)
{
    uint32_t H = t->env->n_heads, Hkv = t->env->n_kv_heads, d2 = 2 * t->env->head_dim;
    uint32_t B = t->shared ? 1 : Hkv, c0, c1, at = thr_cand(t, T, &c0, &c1);
    char nm[48];
    snprintf(nm, sizeof nm, "cmp.rows_%u", T);
    uint32_t rows = opb_shared(b, nm, OPT_CACHE, Hkv, T, d2);
    opb_put(b, tab, rows, Hkv, 0, nrow == OP_NONE ? T : T - 1, d2);
    if (nrow != OP_NONE)
        opb_put(b, nrow, rows, Hkv, T - 1, 1, d2);
    if (c1 == c0)
        return; /* no candidates: nothing biased */
    uint32_t col;
    if (at == T) {
        uint32_t row = unit_row(b, sc, B, c0, c1, t->S, "cmp.next_row");
        uint32_t bias =
            t->gone ? thr_bias_gone(b, t, row, B, H, c0, c1, att_thr(t), T <= t->env->prompt_len)
                    : thr_bias(b, row, B, H, c0, c1, t->S, att_thr(t));
        col = opb_op(b, OP_VIEW, H, c1 - c0, 0, 1, bias, OP_NONE, OP_NONE,
                     opb_tensor(b, "cmp.bias_col", OPT_TEMP, H, c1 - c0, 1), 0, 0, 0);
        if (t->every > 1) /* the steps until the next selection name it too */
            opb_put(b, col, opb_shared(b, "cmp.drop", OPT_CACHE, H, t->env->max_len, 1), H, c0,
                    c1 - c0, 1);
    } else {
        col = opb_rows(b, opb_shared(b, "cmp.drop", OPT_CACHE, H, t->env->max_len, 1), H, c0,
                       c1 - c0, 1, "cmp.drop_kept");
    }
    snprintf(nm, sizeof nm, "cmp.bias_%u", T);
    uint32_t bst = opb_shared(b, nm, OPT_CACHE, H, T, 1);
    opb_put(b, col, bst, H, c0, c1 - c0, 1);
    if (c1 - c0 < T) { /* the others': 0 (x − x, local) */
        uint32_t one = opb_rows(b, bst, H, c0, 1, 1, "cmp.bias_one");
        uint32_t zero = opb_op(b, OP_SUB, H, 1, 0, 1, one, one, OP_NONE,
                               opb_tensor(b, "cmp.bias_zero", OPT_TEMP, H, 1, 1), 0, 0, 0);
        for (uint32_t r = 0; r < T; r++)
            if (r < c0 || r >= c1)
                opb_put(b, zero, bst, H, r, 1, 1);
    }
}

/* Attention scores (accumulated, or the newest row's) at every step or every N, per KV head or
 * one per layer (`share: layer`: every head's row summed), per token or summed per page of S
 * (unit_row: a page's score its candidates' sum, as select()'s): the decision for step T is made at
 * the step before, after its softmax (select() at T ranks the attention observed up to query
 * T − 1), and carried as state, as compose_att.c does; the step attends every cached entry (the
 * rows state, none public), so its slots' attention is every entry's in position order, added to
 * the scores by position (a product with public ones: local). Every N, a step between selections
 * names the last selecting step's decision and the scores it was made from (the state
 * "cmp.rank_at"). Shared across layers, the group's first layer puts the scores of its decision
 * into state ("cmp.lead_rank", per KV head), and each later layer names its own cached rows,
 * a view, with its leader's biases (no scores of its own, no ops). */
static int thr_att_emit(const compose_thr *t, int phase, uint32_t layer, uint32_t T,
                        op_program *prog, const char *name, errbuf *e)
{
    const policy_env *v = t->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, B = t->shared ? 1 : Hkv, G = H / B;
    uint32_t d2 = 2 * v->head_dim, c0, c1, at = thr_cand(t, T, &c0, &c1);
    char nm[48];
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    double tol = att_tol(t, t->last ? 1 : T, T);
    if (t->lead != layer) { /* a later layer of a group: its rows, its leader's decision */
        if (phase == PHASE_PREFILL)
            return policy_emit_done(&b, name, e);
        uint32_t kv = pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2);
        pcheck_selection(&b, opb_rows(&b, kv, Hkv, 0, T, d2, "cmp.kv_all"), T, 0, T,
                         compose_lead_state(&b, t->lead, "cmp.lead_rank", Hkv, T, 1), tol);
        snprintf(nm, sizeof nm, "cmp.bias_%u", T);
        if (c1 > c0)
            pcheck_selection_bias(&b, compose_lead_state(&b, t->lead, nm, H, T, 1));
        pcheck_selection_threshold(&b, att_thr(t));
        return policy_emit_done(&b, name, e);
    }
    uint32_t sc = opb_shared(&b, "cmp.att", OPT_CACHE, B, v->max_len, 1);
    if (phase == PHASE_PREFILL) {
        /* COST: the prompt rows of each selection's heads summed per entry (every row, or the
         * last one): a product with public ones, local; the first step's decision */
        uint32_t w = t->last ? 1 : T;
        uint32_t att = pcheck_input(&b, PCHECK_IN_PROMPT_ATT, H, w, T);
        opb_put(&b, opb_colsum(&b, att, B, G * w, T, "cmp.prompt_sum"), sc, B, 0, T, 1);
        att_next(&b, t, sc, pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2), OP_NONE, T);
        return policy_emit_done(&b, name, e);
    }
    pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2); /* what the selection's rows are of */
    snprintf(nm, sizeof nm, "cmp.rows_%u", T);
    uint32_t rows = opb_shared(&b, nm, OPT_CACHE, Hkv, T, d2);
    /* the ranked scores as the step began (the tie check's), a copy before their update; every
     * N, those of the last selecting step */
    uint32_t rank = opb_rows(&b, sc, B, 0, T, 1, "cmp.rank");
    if (t->every > 1) {
        uint32_t kept = opb_shared(&b, "cmp.rank_at", OPT_CACHE, B, v->max_len, 1);
        if (at == T)
            opb_put(&b, rank, kept, B, 0, T, 1);
        rank = opb_rows(&b, kept, B, 0, T, 1, "cmp.rank_kept");
    }
    if (t->S > 1 && c1 > c0) { /* pages: each candidate's its page's, as select() ranks them */
        uint32_t nu = (c1 + t->S - 1) / t->S - c0 / t->S;
        uint32_t ur = unit_row(&b, rank, B, c0, c1, t->S, "cmp.rank_units");
        uint32_t pages = opb_tensor(&b, "cmp.rank_pages", OPT_TEMP, B, T, 1);
        opb_put(&b, rank, pages, B, 0, T, 1);
        opb_put(&b, per_entry(&b, ur, B, nu, t->S, c0, c1, "cmp.rank_entries"), pages, B, c0,
                c1 - c0, 1);
        rank = pages;
    }
    rank = per_head(&b, rank, B, Hkv, T, "cmp.rank_heads");
    if (t->group) /* the scores its later layers name (a view) */
        opb_op(&b, OP_VIEW, Hkv, T, 0, 1, rank, OP_NONE, OP_NONE,
               compose_lead_state(&b, layer, "cmp.lead_rank", Hkv, T, 1), 0, 0, 0);
    /* COST: each selection's heads' sums of the step's attention over every cached entry and the
     * new one (a product with public ones: local), added to the scores or replacing them */
    uint32_t att = pcheck_input(&b, PCHECK_IN_ATT_SLOTS, H, 1, T + 1);
    uint32_t gs = opb_colsum(&b, att, B, G, T + 1, "cmp.slot_sum"); /* (B, T + 1, 1) */
    if (t->last) {
        opb_put(&b, gs, sc, B, 0, T + 1, 1);
    } else {
        uint32_t old = opb_rows(&b, sc, B, 0, T, 1, "cmp.old");
        uint32_t acc =
            opb_op(&b, OP_ADD, B, T, 0, 1, old, opb_rows(&b, gs, B, 0, T, 1, "cmp.slot_old"),
                   OP_NONE, opb_tensor(&b, "cmp.acc", OPT_TEMP, B, T, 1), 0, 0, 0);
        opb_put(&b, acc, sc, B, 0, T, 1);
        opb_put(&b, opb_rows(&b, gs, B, T, 1, 1, "cmp.slot_new"), sc, B, T, 1, 1);
    }
    att_next(&b, t, sc, rows, pcheck_input(&b, PCHECK_IN_KV_NEW, Hkv, 1, d2), T + 1);
    pcheck_selection(&b, rows, T, 0, T, rank, tol);
    if (c1 > c0) {
        snprintf(nm, sizeof nm, "cmp.bias_%u", T);
        pcheck_selection_bias(&b, opb_shared(&b, nm, OPT_CACHE, H, T, 1));
    }
    pcheck_selection_threshold(&b, att_thr(t));
    return policy_emit_done(&b, name, e);
}

/* Attention once after the prompt: its rows of each KV head's query heads (every row, or the
 * last one) summed per entry into the state "cmp.norm" (Hkv, max_len, 1), the scores a
 * decision made at the prompt ranks (local); shared per layer, summed over the KV heads too. */
static uint32_t att_prompt_scores(opb *b, const compose_thr *t, uint32_t P)
{
    uint32_t H = t->env->n_heads, Hkv = t->env->n_kv_heads, w = t->last ? 1 : P;
    uint32_t nst = opb_shared(b, "cmp.norm", OPT_CACHE, Hkv, t->env->max_len, 1);
    uint32_t att = pcheck_input(b, PCHECK_IN_PROMPT_ATT, H, w, P);
    opb_put(b, opb_colsum(b, att, Hkv, H / Hkv * w, P, "cmp.prompt_sum"), nst, Hkv, 0, P, 1);
    return nst;
}

/* Window votes once after the prompt (SnapKV's score, snapkv's ops): at the prompt the votes of the
 * window's queries over the candidates, pooled and summed over each KV head's query heads (and
 * shared per layer over the KV heads), one LT per candidate and selection against the threshold
 * on the votes' scale (select()'s mean vote times G·window, and the kernel for average pooling:
 * snap_votes_emit's sums), the decision and the scores kept as state (views); each decode step
 * names the prompt's candidates with them, the rest public. A later layer of a group names its
 * own candidates with its leader's. Candidates reaching into the voting queries' own rows
 * (c1 > P − window) vote 0, as in select() (snap_votes_emit's nv). */
static int thr_window_emit(const compose_thr *t, int phase, uint32_t layer, uint32_t kv_len,
                           op_program *prog, const char *name, errbuf *e)
{
    const policy_env *v = t->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, G = H / Hkv, B = t->shared ? 1 : Hkv;
    uint32_t P = v->prompt_len, c0, c1;
    thr_cand(t, P, &c0, &c1);
    uint32_t nc = c1 - c0;
    int own = t->lead == layer, pre = phase == PHASE_PREFILL, f = pcheck_frac_bits();
    double thr = t->thr * G * t->window * (t->maxpool ? 1 : t->kernel);
    /* one score's error (snap_votes_tol bounds a swap of two) and thr's fixed point's */
    double tol =
        snap_votes_tol(t->window, t->shared ? H : G, t->kernel, t->maxpool, f) / 2 + ldexp(1, -f);
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    if (!nc || (pre && !own))
        return policy_emit_done(&b, name, e);
    uint32_t rst = own ? opb_shared(&b, "cmp.vote_row", OPT_CACHE, B, 1, nc)
                       : compose_lead_state(&b, t->lead, "cmp.vote_row", B, 1, nc);
    uint32_t dst = own ? opb_shared(&b, "cmp.drop", OPT_CACHE, H, v->max_len, 1)
                       : compose_lead_state(&b, t->lead, "cmp.drop", H, v->max_len, 1);
    if (pre) {
        /* COST: the votes (snapkv's: local sums, the pooling's MAX per neighbour), one LT per
         * candidate and selection; the kept count is not opened */
        uint32_t nv = P - t->window < c1 ? P - t->window : c1; /* entries past it: no votes */
        uint32_t sc = snap_votes_emit(&b, H, t->window, c1, nv, t->kernel, t->maxpool, Hkv);
        uint32_t row = snap_cand_scores(&b, sc, Hkv, c0, c1);
        row = t->shared ? compose_heads_sum(&b, row, Hkv, nc, "cmp.heads_row") : row;
        uint32_t bias = thr_bias(&b, row, B, H, c0, c1, 1, thr);
        opb_put(&b, row, rst, B, 0, 1, nc);
        opb_put(&b,
                opb_op(&b, OP_VIEW, H, nc, 0, 1, bias, OP_NONE, OP_NONE,
                       opb_tensor(&b, "cmp.drop_col", OPT_TEMP, H, nc, 1), 0, 0, 0),
                dst, H, c0, nc, 1);
        return policy_emit_done(&b, name, e);
    }
    thr_name(&b, rst, opb_rows(&b, dst, H, c0, nc, 1, "cmp.drop_kept"), B, Hkv, v->head_dim, c0, c1,
             1, kv_len, thr, tol);
    return policy_emit_done(&b, name, e);
}

int compose_thr_emit(const compose_thr *t, int phase, uint32_t layer, uint32_t kv_len,
                     op_program *prog, const char *name, errbuf *e)
{
    const policy_env *v = t->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, d = v->head_dim, S = t->S;
    uint32_t B = t->shared ? 1 : Hkv; /* selections: one per KV head, or one per layer */
    int pre = phase == PHASE_PREFILL;
    /* the step whose candidates are selected: this one, or (once, every N) the last selecting
     * one, the prompt's end or a decode step N apart from it */
    uint32_t P = v->prompt_len, c0, c1, at = thr_cand(t, pre ? P : kv_len, &c0, &c1);
    uint32_t u0 = c0 / S, nu = c1 > c0 ? (c1 + S - 1) / S - u0 : 0;
    /* a score at tol of thr is compared the other way round than select() where it is within
     * its own error of thr, and thr's fixed point within u of thr */
    double u = ldexp(1, -pcheck_frac_bits());
    if (t->score == SC_WINDOW)
        return thr_window_emit(t, phase, layer, kv_len, prog, name, e);
    if (t->score == SC_ATT && !t->once)
        return thr_att_emit(t, phase, layer, kv_len, prog, name, e);
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    if (t->score == SC_BOUNDS) {
        /* page_bounds_tol: twice one score's error (two pages swapped) */
        double tol =
            page_bounds_tol(t->qmax, t->kmax, d, t->shared ? H : H / Hkv, pcheck_frac_bits());
        if (t->lead != layer) { /* a later layer of a group: its rows, its leader's decision */
            if (!pre && nu)
                thr_name(&b, compose_lead_state(&b, t->lead, "cmp.lead_row", B, 1, nu),
                         compose_lead_state(&b, t->lead, "cmp.lead_bias", H, c1 - c0, 1), B, Hkv, d,
                         c0, c1, S, kv_len, t->thr, tol / 2 + u);
            return policy_emit_done(&b, name, e);
        }
        uint32_t bst = page_bounds_state(&b, "cmp", Hkv, t->max_pages, d), row = OP_NONE,
                 bias = OP_NONE;
        if (pre) {
            page_bounds_prompt(&b, "cmp", bst, Hkv, kv_len, S, d);
        } else {
            if (nu && at == kv_len) { /* a selecting step: the query against the bounds */
                row = page_bounds_score(&b, "cmp", bst, H, Hkv, u0, nu, d);
                row = t->shared ? compose_heads_sum(&b, row, Hkv, nu, "cmp.heads_row") : row;
                bias = thr_bias(&b, row, B, H, c0, c1, S, t->thr);
            }
            if (nu && t->every > 1) {
                /* every N: the decision and the units' scores it was made from kept as state at
                 * a selecting step (views), a step between names them (views) */
                uint32_t rst = opb_shared(&b, "cmp.row_at", OPT_CACHE, B, t->max_pages, 1);
                uint32_t dst = opb_shared(&b, "cmp.drop", OPT_CACHE, H, v->max_len, 1);
                if (at == kv_len) {
                    opb_put(&b,
                            opb_op(&b, OP_VIEW, B, nu, 0, 1, row, OP_NONE, OP_NONE,
                                   opb_tensor(&b, "cmp.row_col", OPT_TEMP, B, nu, 1), 0, 0, 0),
                            rst, B, u0, nu, 1);
                    opb_put(&b,
                            opb_op(&b, OP_VIEW, H, c1 - c0, 0, 1, bias, OP_NONE, OP_NONE,
                                   opb_tensor(&b, "cmp.drop_col", OPT_TEMP, H, c1 - c0, 1), 0, 0,
                                   0),
                            dst, H, c0, c1 - c0, 1);
                } else {
                    row = opb_transpose(&b, opb_rows(&b, rst, B, u0, nu, 1, "cmp.row_kept"), B, nu,
                                        1, "cmp.row_kept_t");
                    bias = opb_rows(&b, dst, H, c0, c1 - c0, 1, "cmp.drop_kept");
                }
            }
            if (nu) {
                if (t->group) { /* the scores and decision its later layers name (views) */
                    compose_lead_put(&b, OP_NONE, row, B, 0, nu);
                    opb_op(&b, OP_VIEW, H, c1 - c0, 0, 1, bias, OP_NONE, OP_NONE,
                           compose_lead_state(&b, layer, "cmp.lead_bias", H, c1 - c0, 1), 0, 0, 0);
                }
                thr_name(&b, row, bias, B, Hkv, d, c0, c1, S, kv_len, t->thr, tol / 2 + u);
            }
            page_bounds_upkeep(&b, "cmp", bst, Hkv, kv_len, S, d, t->max_pages);
        }
        return policy_emit_done(&b, name, e);
    }
    /* COST: the new keys' squares and their sum (a product with public ones: local); once
     * after the prompt, the prompt's only (attention once: its rows of each KV head's query
     * heads summed per entry, every row or the last one, a product with public ones: local,
     * into the same state); a later layer of a group: no norms of its own, its leader's
     * (state) */
    int own = t->lead == layer;
    uint32_t nst = !own                 ? compose_lead_norms(&b, t->lead, Hkv, v->max_len)
                   : t->once && !pre    ? opb_shared(&b, "cmp.norm", OPT_CACHE, Hkv, v->max_len, 1)
                   : t->score == SC_ATT ? att_prompt_scores(&b, t, kv_len)
                                        : compose_key_norms(&b, Hkv, d, v->max_len,
                                                            pre ? kv_len : 1, pre ? 0 : kv_len);
    double thr = t->score == SC_ATT ? att_thr(t) : t->thr;
    /* the decision of the candidates [c0, c1) of the last selecting step, kept as state (H,
     * max_len, 1) at their rows for the steps up to the next one (once: every decode step; the
     * first layer of a group: at every step, for its later layers too) */
    int decides = own && (t->once ? pre : !pre && at == kv_len);
    uint32_t dst = !own ? compose_lead_state(&b, t->lead, "cmp.drop", H, v->max_len, 1)
                   : t->once || t->every > 1 || t->group
                       ? opb_shared(&b, "cmp.drop", OPT_CACHE, H, v->max_len, 1)
                       : OP_NONE;
    if (!nu || (pre && (!decides || !own)))
        return policy_emit_done(&b, name, e);
    double M = 0; /* the largest candidate score */
    for (uint32_t g = 0; g < Hkv; g++)
        for (uint32_t j = c0; j < c1; j++)
            M = fmax(M, t->norms[(size_t)g * v->max_len + j]);
    uint32_t row = S > 1 ? compose_keynorm_pages(&b, nst, Hkv, c0, c1, S)
                         : opb_transpose(&b, opb_rows(&b, nst, Hkv, c0, nu, 1, "cmp.cand"), Hkv, nu,
                                         1, "cmp.cand_row");
    row = t->shared ? compose_heads_sum(&b, row, Hkv, nu, "cmp.heads_row") : row;
    uint32_t bias = OP_NONE;
    if (decides) {
        bias = t->gone ? thr_bias_gone(&b, t, row, B, H, c0, c1, thr, kv_len <= P)
                       : thr_bias(&b, row, B, H, c0, c1, S, thr);
        if (dst != OP_NONE) /* as (H, c1 − c0, 1): a view */
            opb_put(&b,
                    opb_op(&b, OP_VIEW, H, c1 - c0, 0, 1, bias, OP_NONE, OP_NONE,
                           opb_tensor(&b, "cmp.drop_col", OPT_TEMP, H, c1 - c0, 1), 0, 0, 0),
                    dst, H, c0, c1 - c0, 1);
    } else { /* the last selecting step's (a view) */
        bias = opb_rows(&b, dst, H, c0, c1 - c0, 1, "cmp.drop_kept");
    }
    if (!pre) /* shared: the sum of Hkv·S norms */
        thr_name(&b, row, bias, B, Hkv, d, c0, c1, S, kv_len, thr,
                 t->score == SC_ATT ? att_tol(t, t->last ? 1 : P, P)
                                    : keynorm_err(d, t->shared ? Hkv * S : S, M, u) + u);
    return policy_emit_done(&b, name, e);
}
