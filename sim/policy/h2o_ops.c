/* h2o_ops.c — H2O's selection as ops (h2o_ops.h "H2O on shares"), the same for the cost path
 * (placeholder operands) and the secure session (its real ones): the score upkeep, the table,
 * the candidates, the selection of every layer at once, and the public constants they read. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/kern.h"
#include "protocols/program/opb.h"
#include "h2o_ops.h"

int h2o_selects(const h2o_shape *s, int phase, uint32_t c, uint32_t t)
{
    if (s->heavy == 0)
        return 0; /* only the public recent window: nothing secret to choose */
    if (phase == PHASE_PREFILL)
        return (uint64_t)t > (uint64_t)s->sinks + s->heavy + s->recent;
    return (uint64_t)c + t > (uint64_t)s->sinks + s->heavy + s->recent;
}

uint32_t h2o_width(const h2o_shape *s) { return 2 * s->head_dim + (s->last ? 0 : 1); }

h2o_shape h2o_layer_shape(const h2o_shape *s, uint32_t layer)
{
    h2o_shape l = *s;
    if (layer < s->dense) /* sinks + heavy + recent above any cache: every row carried */
        l.heavy = 0, l.sinks = 0, l.recent = UINT32_MAX;
    return l;
}

/* Score accumulation: probs (H, t, n) → Σ over the KV head's G query heads and the t query
 * rows, added to score (Hkv, n, 1). The newest row (s->last): Σ over the G heads of the last
 * query row alone, nothing carried. */
static uint32_t h2o_accumulate(opb *w, const h2o_shape *s, uint32_t t, uint32_t n, uint32_t probs)
{
    uint32_t H = s->n_heads, Hkv = s->n_kv_heads, G = H / Hkv;
    if (s->last && t > 1) { /* the prompt's last query row of each head (VIEW, local) */
        probs = opb_rows(w, probs, H, t - 1, 1, n, "probs_last");
        t = 1;
    }
    /* (H, t, n) → (H, n, t): a transposition of each head (VIEW, local) */
    uint32_t pt = opb_tensor(w, "probs_t", OPT_TEMP, 1, H * n, t);
    opb_op(w, OP_VIEW, H * t, n, 0, 1, probs, OP_NONE, OP_NONE, pt, OPF_MERGE_HEADS, 0, 0);
    /* (Hkv·G, n, t) → (Hkv, n, G·t): a KV head's query heads side by side (VIEW, local) */
    uint32_t pg = opb_tensor(w, "probs_g", OPT_TEMP, 1, Hkv * n, G * t);
    opb_op(w, OP_VIEW, H, n, 0, t, pt, OP_NONE, OP_NONE, pg, OPF_MERGE_HEADS, 0, 0);
    /* COST: the column sums H2O accumulates, G·t adds per cached entry (policies.md §1.12
     * H2O "T·w adds"): a product with a public ones vector, local (kern.c k_matmul_pub) */
    uint32_t ones = opb_tensor(w, "ones", OPT_PUBLIC, 1, G * t, 1);
    uint32_t cs = opb_tensor(w, "colsum", OPT_TEMP, Hkv, n, 1);
    opb_op(w, OP_MATMUL, 1, Hkv * n, G * t, 1, pg, ones, OP_NONE, cs, OPF_PUBLIC_B | OPF_NO_TRUNC,
           0, 0);
    if (s->last)
        return cs;
    /* the carried scores (row 0 of a decode step: the new entry's 0), bound by the session */
    uint32_t score = opb_tensor(w, "score", OPT_CACHE, Hkv, n, 1);
    uint32_t acc = opb_tensor(w, "acc", OPT_TEMP, Hkv, n, 1);
    opb_op(w, OP_ADD, Hkv, n, 0, 1, score, cs, OP_NONE, acc, 0, 0, 0);
    return acc;
}

/* The table (Hkv, n, F) = [K | V | score] of the n attended rows ([K | V] for the newest row):
 * slices and transpositions (VIEW, local). */
static uint32_t h2o_table(opb *w, const h2o_shape *s, uint32_t n, uint32_t kc, uint32_t vc,
                          uint32_t score)
{
    uint32_t Hkv = s->n_kv_heads, d = s->head_dim, F = h2o_width(s);
    uint32_t stack = opb_tensor(w, "stack", OPT_TEMP, Hkv, F, n);
    const uint32_t src[2] = {kc, vc};
    const char *nm[2][2] = {{"k_rows", "k_t"}, {"v_rows", "v_t"}};
    for (int i = 0; i < 2; i++) {
        uint32_t rows = opb_tensor(w, nm[i][0], OPT_TEMP, Hkv, n, d);
        opb_op(w, OP_VIEW, Hkv, n, 0, d, src[i], OP_NONE, OP_NONE, rows, 0, 0, 0);
        uint32_t tr = opb_tensor(w, nm[i][1], OPT_TEMP, Hkv, d, n);
        opb_op(w, OP_VIEW, Hkv * n, d, 0, 1, rows, OP_NONE, OP_NONE, tr, OPF_MERGE_HEADS, 0, 0);
        opb_op(w, OP_VIEW, Hkv, d, 0, n, tr, OP_NONE, OP_NONE, stack, 0, (int32_t)(i * d), 0);
    }
    if (!s->last) {
        uint32_t srow = opb_tensor(w, "score_row", OPT_TEMP, Hkv, 1, n);
        opb_op(w, OP_VIEW, Hkv, 1, 0, n, score, OP_NONE, OP_NONE, srow, 0, 0, 0);
        opb_op(w, OP_VIEW, Hkv, 1, 0, n, srow, OP_NONE, OP_NONE, stack, 0, (int32_t)(2 * d), 0);
    }
    uint32_t table = opb_tensor(w, "table", OPT_TEMP, Hkv, n, F);
    opb_op(w, OP_VIEW, Hkv * F, n, 0, 1, stack, OP_NONE, OP_NONE, table, OPF_MERGE_HEADS, 0, 0);
    return table;
}

/* Rows [first] then [from, from+rest) of src (Hkv, ≥, cols) as a (Hkv, 1+rest, cols) tensor
 * (VIEWs). */
static uint32_t h2o_rows_first(opb *w, uint32_t src, uint32_t Hkv, uint32_t first, uint32_t from,
                               uint32_t rest, uint32_t cols, const char *nm)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "%s_first", nm);
    snprintf(b, sizeof b, "%s_rest", nm);
    uint32_t one = opb_tensor(w, a, OPT_TEMP, Hkv, 1, cols),
             more = opb_tensor(w, b, OPT_TEMP, Hkv, rest, cols);
    uint32_t out = opb_tensor(w, nm, OPT_TEMP, Hkv, rest + 1, cols);
    opb_op(w, OP_VIEW, Hkv, 1, 0, cols, src, OP_NONE, OP_NONE, one, 0, (int32_t)first, 0);
    opb_op(w, OP_VIEW, Hkv, rest, 0, cols, src, OP_NONE, OP_NONE, more, 0, (int32_t)from, 0);
    opb_op(w, OP_VIEW, Hkv, 1, 0, cols, one, OP_NONE, OP_NONE, out, 0, 0, 0);
    opb_op(w, OP_VIEW, Hkv, rest, 0, cols, more, OP_NONE, OP_NONE, out, 0, 1, 0);
    return out;
}

/* A layer's part of the selection: the candidates' scores (prefill rows [S, P − R); decode the
 * latest position first — the entry leaving the recent window, row S+HH+1, or without a window
 * the new entry, row 0 — then the heavy rows S+1 … S+HH; the S sink rows are public positions
 * outside the candidates) and the rows they come from (prefill: the table's rows [S, P − R);
 * decode: the candidates before and after each compacted slot). All VIEWs: local. The latest
 * candidate at slot 0 wins the arg-min's exact ties (kern.c k_rowmax: the lower slot), as the
 * plaintext rule evicts the later position. */
static void h2o_stage(opb *w, const h2o_shape *s, int phase, uint32_t n, h2o_ids *ids)
{
    uint32_t Hkv = s->n_kv_heads, F = h2o_width(s), hh = s->heavy, S = s->sinks;
    if (phase == PHASE_PREFILL) {
        uint32_t nc = n - S - s->recent;
        ids->cand = opb_tensor(w, "cand", OPT_TEMP, Hkv, nc, 1);
        opb_op(w, OP_VIEW, Hkv, nc, 0, 1, ids->score, OP_NONE, OP_NONE, ids->cand, 0, (int32_t)S,
               0);
        ids->cur = opb_tensor(w, "cand_rows", OPT_TEMP, Hkv, nc, F);
        opb_op(w, OP_VIEW, Hkv, nc, 0, F, ids->table, OP_NONE, OP_NONE, ids->cur, 0, (int32_t)S, 0);
        return;
    }
    uint32_t first = s->recent ? S + hh + 1 : 0;
    ids->cand = h2o_rows_first(w, ids->score, Hkv, first, S + 1, hh, 1, "cand");
    uint32_t rows = h2o_rows_first(w, ids->table, Hkv, first, S + 1, hh, F, "cand_rows");
    ids->cur = opb_tensor(w, "cur", OPT_TEMP, Hkv, hh, F);
    ids->next = opb_tensor(w, "next", OPT_TEMP, Hkv, hh, F);
    opb_op(w, OP_VIEW, Hkv, hh, 0, F, rows, OP_NONE, OP_NONE, ids->cur, 0, 0, 0);
    opb_op(w, OP_VIEW, Hkv, hh, 0, F, rows, OP_NONE, OP_NONE, ids->next, 0, 1, 0);
}

int h2o_emit_ops(op_program *p, const h2o_shape *s, int phase, uint32_t layer, uint32_t c,
                 uint32_t t, uint32_t probs, uint32_t kc, uint32_t vc, h2o_ids *ids, errbuf *e)
{
    opb w;
    opb_init(&w, p, phase, (int)layer, OPC_POLICY, "h2o.");
    h2o_ids tmp;
    ids = ids ? ids : &tmp;
    *ids = (h2o_ids){OP_NONE, OP_NONE, OP_NONE, OP_NONE, OP_NONE};
    uint32_t H = s->n_heads, Hkv = s->n_kv_heads, d = s->head_dim, n = c + t;
    if (!Hkv || H % Hkv || !t)
        return err_set(e, MS_ERR_INPUT, "policy h2o: %u heads over %u KV heads, %u new tokens", H,
                       Hkv, t);
    /* placeholders of the operands' shapes (the cost path, before the step is lowered) */
    if (probs == OP_NONE)
        probs = opb_tensor(&w, "in_probs", OPT_CACHE, H, t, n);
    if (kc == OP_NONE)
        kc = opb_tensor(&w, "in_k", OPT_CACHE, Hkv, n, d);
    if (vc == OP_NONE)
        vc = opb_tensor(&w, "in_v", OPT_CACHE, Hkv, n, d);
    ids->score = h2o_accumulate(&w, s, t, n, probs);
    ids->table = h2o_table(&w, s, n, kc, vc, ids->score);
    if (h2o_selects(s, phase, c, t))
        h2o_stage(&w, s, phase, n, ids);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory emitting its ops")
                    : MS_OK;
}

/* Stacks the layers' (Hkv, rows, cols) tensors src[l] as rows l·rows … of (Hkv, L·rows, cols),
 * each written in place (OPF_IN_PLACE): L·rows rows move, where appends re-laying the stack at
 * every layer moved L²·rows. */
static uint32_t h2o_stack(opb *w, const h2o_ids *lay, uint32_t L, size_t field, const char *nm,
                          uint32_t Hkv, uint32_t rows, uint32_t cols)
{
    uint32_t all = opb_tensor(w, nm, OPT_TEMP, Hkv, L * rows, cols);
    for (uint32_t l = 0; l < L; l++) {
        uint32_t src;
        memcpy(&src, (const char *)&lay[l] + field, sizeof src);
        opb_write(w, src, all, Hkv, l * rows, rows, cols);
    }
    return all;
}

/* Prefill: top-heavy of every layer's candidate scores at once, gathered. */
static void h2o_prefill_sel(opb *w, const h2o_shape *s, uint32_t L, uint32_t P, const h2o_ids *lay,
                            h2o_sel *out)
{
    uint32_t Hkv = s->n_kv_heads, F = h2o_width(s), nc = P - s->sinks - s->recent;
    uint32_t hh = s->heavy;
    out->cand = h2o_stack(w, lay, L, offsetof(h2o_ids, cand), "cand", Hkv, nc, 1);
    uint32_t rows = h2o_stack(w, lay, L, offsetof(h2o_ids, cur), "cand_rows", Hkv, nc, F);
    /* the same values as (Hkv·L) instances of nc rows: the gather's batch */
    uint32_t tab = opb_tensor(w, "gather_table", OPT_TEMP, Hkv * L, nc, F);
    opb_op(w, OP_VIEW, Hkv * L, nc, 0, F, rows, OP_NONE, OP_NONE, tab, 0, 0, 0);
    /* COST: topk(P−S−R, HH) per layer and KV head, then gather(HH, P−R, 2d+1) of K|V|score
     * (policies.md §1.12 H2O: top-k + one-hot gather); every layer in the same rounds. One per
     * layer: the top-k of the KV heads' sums, its one-hot rows each KV head's (local). */
    if (s->shared && Hkv > 1) {
        uint32_t sum = opb_colsum(w, out->cand, 1, Hkv, L * nc, "cand_sum");
        uint32_t one = opb_tensor(w, "topk_one", OPT_TEMP, 1, L * hh, nc);
        opb_op(w, OP_TOPK, 1, L, 0, nc, sum, OP_NONE, OP_NONE, one, 0, (int32_t)hh, 0);
        out->onehot = opb_repeat(w, one, 1, L * hh * nc, Hkv, "topk");
    } else {
        out->onehot = opb_tensor(w, "topk", OPT_TEMP, Hkv, L * hh, nc);
        opb_op(w, OP_TOPK, Hkv, L, 0, nc, out->cand, OP_NONE, OP_NONE, out->onehot, 0, (int32_t)hh,
               0);
    }
    out->heavy = opb_tensor(w, "heavy", OPT_TEMP, Hkv, L * hh, F);
    opb_op(w, OP_GATHER, Hkv * L, hh, nc, F, out->onehot, tab, OP_NONE, out->heavy, OPF_NO_TRUNC, 0,
           0);
}

/* The first `keep` entries of the prefix sums of B vectors of n (x: B·n values): ⌈log2 n⌉
 * Hillis–Steele levels, each a shift (a slice appended at row s of a zero tensor: VIEWs) and an
 * ADD, all local: O(B·n·log n) element operations instead of a triangular product's O(B·n²). */
static uint32_t h2o_prefix(opb *w, uint32_t x, uint32_t B, uint32_t n, uint32_t keep)
{
    uint32_t cur = opb_tensor(w, "prefix0", OPT_TEMP, B, n, 1);
    opb_op(w, OP_VIEW, B, n, 0, 1, x, OP_NONE, OP_NONE, cur, 0, 0, 0);
    for (uint32_t sh = 1; sh < n; sh *= 2) {
        uint32_t sl = opb_tensor(w, "prefix_head", OPT_TEMP, B, n - sh, 1);
        opb_op(w, OP_VIEW, B, n - sh, 0, 1, cur, OP_NONE, OP_NONE, sl, 0, 0, 0);
        uint32_t shifted = opb_tensor(w, "prefix_shift", OPT_TEMP, B, n, 1);
        opb_op(w, OP_VIEW, B, n - sh, 0, 1, sl, OP_NONE, OP_NONE, shifted, 0, (int32_t)sh, 0);
        uint32_t nxt = opb_tensor(w, "prefix", OPT_TEMP, B, n, 1);
        opb_op(w, OP_ADD, B, n, 0, 1, cur, shifted, OP_NONE, nxt, 0, 0, 0);
        cur = nxt;
    }
    uint32_t out = opb_tensor(w, "prefix_kept", OPT_TEMP, B, keep, 1);
    opb_op(w, OP_VIEW, B, keep, 0, 1, cur, OP_NONE, OP_NONE, out, 0, 0, 0);
    return out;
}

/* Decode: every layer's minimum of its HH+1 candidates evicted, the candidates compacted to HH
 * rows. */
static void h2o_decode_sel(opb *w, const h2o_shape *s, uint32_t L, const h2o_ids *lay, h2o_sel *out)
{
    uint32_t Hkv = s->n_kv_heads, F = h2o_width(s), hh = s->heavy;
    out->cand = h2o_stack(w, lay, L, offsetof(h2o_ids, cand), "cand", Hkv, hh + 1, 1);
    /* one per layer: the KV heads' sums of each candidate's scores (local) */
    int one = s->shared && Hkv > 1;
    uint32_t B = one ? 1 : Hkv;
    uint32_t sc = one ? opb_colsum(w, out->cand, 1, Hkv, L * (hh + 1), "cand_sum") : out->cand;
    uint32_t neg = opb_tensor(w, "neg", OPT_TEMP, B, L * (hh + 1), 1);
    /* the minimum as the maximum of −score: a public factor, no truncation (local) */
    opb_op(w, OP_MUL_PUB, B, L * (hh + 1), 0, 1, sc, OP_NONE, OP_NONE, neg, OPF_NO_TRUNC, 0, -1.0);
    /* COST: arg-min over the HH+1 candidates of every layer and KV head (one per layer: of its
     * sums, the one-hot then each KV head's, local), a one-hot from a tree of comparisons
     * (policies.md §1.12 H2O: the step's eviction is a top-k of one) */
    out->onehot = opb_tensor(w, one ? "argmin_one" : "argmin", OPT_TEMP, B, L, hh + 1);
    opb_op(w, OP_ARGMAX, B, L, 0, hh + 1, neg, OP_NONE, OP_NONE, out->onehot, 0, 0, 0);
    if (one)
        out->onehot = opb_repeat(w, out->onehot, 1, L * (hh + 1), Hkv, "argmin");
    /* the prefix sum of the one-hot (1 at and after the evicted candidate), then broadcast over
     * the row's 2d+1 columns (local) */
    uint32_t pre = h2o_prefix(w, out->onehot, Hkv * L, hh + 1, hh);
    uint32_t bc = opb_tensor(w, "bcast", OPT_PUBLIC, 1, 1, F);
    uint32_t mask = opb_tensor(w, "mask", OPT_TEMP, Hkv, L * hh, F);
    opb_op(w, OP_MATMUL, 1, Hkv * L * hh, 1, F, pre, bc, OP_NONE, mask, OPF_PUBLIC_B | OPF_NO_TRUNC,
           0, 0);
    uint32_t cur = h2o_stack(w, lay, L, offsetof(h2o_ids, cur), "cur", Hkv, hh, F);
    uint32_t nxt = h2o_stack(w, lay, L, offsetof(h2o_ids, next), "next", Hkv, hh, F);
    /* COST: the oblivious compaction, one select (a multiplication) per element of the HH
     * compacted rows (policies.md §1.12 H2O gather) */
    out->heavy = opb_tensor(w, "heavy", OPT_TEMP, Hkv, L * hh, F);
    opb_op(w, OP_SELECT, Hkv, L * hh, 0, F, mask, nxt, cur, out->heavy, 0, 0, 0);
}

int h2o_emit_select(op_program *p, const h2o_shape *s, int phase, uint32_t n_layers, uint32_t c,
                    uint32_t t, const h2o_ids *lay, h2o_sel *out, errbuf *e)
{
    opb w; /* the selection of every layer at once: no layer */
    opb_init(&w, p, phase, -1, OPC_POLICY, "h2o.");
    h2o_sel tmp;
    out = out ? out : &tmp;
    *out = (h2o_sel){OP_NONE, OP_NONE, OP_NONE};
    if (!h2o_selects(s, phase, c, t))
        return MS_OK;
    if (phase == PHASE_PREFILL)
        h2o_prefill_sel(&w, s, n_layers, c + t, lay, out);
    else
        h2o_decode_sel(&w, s, n_layers, lay, out);
    return w.failed ? err_set(e, MS_ERR_NOMEM, "policy h2o: out of memory emitting its ops")
                    : MS_OK;
}

int h2o_public(const op_tensor *t, uint64_t *out, size_t n)
{
    const char *dot = strstr(t->name, ".h2o.");
    const char *nm = dot ? dot + 5 : !strncmp(t->name, "h2o.", 4) ? t->name + 4 : NULL;
    if (!nm || t->role != OPT_PUBLIC)
        return 0;
    size_t len = strlen(nm); /* "ones", "bcast", and the sums' and repeats' "<x>_ones" */
    if (strcmp(nm, "bcast") && (len < 4 || strcmp(nm + len - 4, "ones")))
        return 0;
    for (size_t i = 0; i < n; i++) /* raw ring integers: the products are not truncated */
        out[i] = 1u;
    return 1;
}
