/* compose_knperm.c — a key-norm composition evicting for good (`evict: permanent`) on real
 * operands: H2O's shape (h2o_ops.h "H2O on shares") with each entry's squared key norm as the
 * carried score, which never changes once the key is cached.
 *
 * Per layer and KV head the state "cmp.heavy" holds k rows [K | V | norm] (2d + 1 columns): the
 * kept candidates, which positions they are being secret. At the prompt the top k of the
 * candidates [c0, c1) by their norms are gathered into it (TOPK, GATHER of the rows with their
 * norm column). At a decode step over T cached entries past the prompt one entry joins the
 * candidates, the one that left the recent window (position c1 − 1, c1 = T − recent: its row of
 * the cached [K | V] and its norm, carried since its key was new); of the k + 1 candidates
 * [joining | heavy] the least norm is evicted: the norms negated (local), an ARGMAX, its
 * prefix sums by a product with a public upper triangle and their broadcast over the row by
 * public ones (local), one SELECT per element compacting the k survivors (row i keeps
 * candidate i before the evicted one, candidate i + 1 from it on). The k rows are the state of
 * the next step and, their K | V columns, the step's selection; the first decode step names the
 * prompt's. The joining entry at slot 0 wins the arg-min's exact ties (kern.c: the lower slot),
 * as H2O's. select() keeps the top k of the entries still cached (compose.c select_alive): with
 * static scores that is the k + 1 candidates' top k, so the two agree up to ties within the
 * per-step path's bound (compose_keynorm_tol). With `share: layer` the decisions are the
 * layer's — one TOPK of the KV heads' summed norms at the prompt, one ARGMAX of the candidates'
 * summed norms at each step, their one-hot rows and masks repeated for every KV head (local) —
 * and each KV head's table holds its own rows of the same positions. */
#include "compose_int.h"
#include "pcheck.h"

#include <stdio.h>

/* [K | V | norm] rows (Hkv, n, 2d + 1) of the [K | V] rows kv (Hkv, n, 2d) and the norms nn
 * (Hkv, n, 1): both transposed, stacked and transposed back (views, local). */
static uint32_t with_norm(opb *b, uint32_t kv, uint32_t nn, uint32_t Hkv, uint32_t n, uint32_t d,
                          const char *nm)
{
    uint32_t F = 2 * d + 1;
    uint32_t st = opb_tensor(b, "cmp.stack", OPT_TEMP, Hkv, F, n);
    opb_put(b, opb_transpose(b, kv, Hkv, n, 2 * d, "cmp.kv_t"), st, Hkv, 0, 2 * d, n);
    opb_put(b, opb_transpose(b, nn, Hkv, n, 1, "cmp.norm_t"), st, Hkv, 2 * d, 1, n);
    return opb_transpose(b, st, Hkv, F, n, nm);
}

/* Column c0 … c0 + n − 1 of x (Hkv, R, F) as (Hkv, R, n) (views, local; their temporaries
 * named after nm: the session maps a program's tensors by name). */
static uint32_t columns(opb *b, uint32_t x, uint32_t Hkv, uint32_t R, uint32_t F, uint32_t c0,
                        uint32_t n, const char *nm)
{
    char t_nm[48], c_nm[48];
    snprintf(t_nm, sizeof t_nm, "%.40s_t", nm);
    snprintf(c_nm, sizeof c_nm, "%.40s_c", nm);
    uint32_t t = opb_transpose(b, x, Hkv, R, F, t_nm);
    return opb_transpose(b, opb_rows(b, t, Hkv, c0, n, R, c_nm), Hkv, n, R, nm);
}

int compose_knperm_emit(const compose_kn *kn, int phase, uint32_t layer, uint32_t kv_len,
                        op_program *prog, const char *name, errbuf *e)
{
    const policy_env *v = kn->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, F = 2 * d + 1, k = kn->k, c0 = kn->c0;
    uint32_t P = v->prompt_len, recent = P - kn->c1, T = kv_len, c1 = T - recent, nc = c1 - c0;
    int pre = phase == PHASE_PREFILL;
    uint32_t B = kn->shared && Hkv > 1 ? 1 : Hkv; /* selections: per KV head, or one per layer */
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    /* COST: the new keys' squares and their sum (a product with public ones: local) */
    uint32_t nst = compose_key_norms(&b, Hkv, d, v->max_len, pre ? T : 1, pre ? 0 : T);
    uint32_t heavy = opb_shared(&b, "cmp.heavy", OPT_CACHE, Hkv, k, F);
    uint32_t kv = pcheck_input(&b, PCHECK_IN_KV, Hkv, T, 2 * d);
    if (pre) {
        /* COST: the prompt's top k of the candidates per KV head, their rows with their norms
         * gathered into state (H2O's prefill selection) */
        uint32_t cn = opb_rows(&b, nst, Hkv, c0, nc, 1, "cmp.cand");
        uint32_t tab = with_norm(&b, opb_rows(&b, kv, Hkv, c0, nc, 2 * d, "cmp.kv_cand"), cn, Hkv,
                                 nc, d, "cmp.table");
        uint32_t row = opb_transpose(&b, cn, Hkv, nc, 1, "cmp.cand_row");
        if (B == 1) /* one per layer: the KV heads' summed norms (local) */
            row = compose_heads_sum(&b, row, Hkv, nc, "cmp.cand_sum");
        uint32_t oh = opb_tensor(&b, "cmp.topk", OPT_TEMP, B, k, nc);
        opb_op(&b, OP_TOPK, B, 1, 0, nc, row, OP_NONE, OP_NONE, oh, 0, (int32_t)k, 0);
        if (B == 1) /* its one-hot rows as each KV head's (local) */
            oh = opb_repeat(&b, oh, 1, k * nc, Hkv, "cmp.topk_heads");
        opb_op(&b, OP_GATHER, Hkv, k, nc, F, oh, tab, OP_NONE, heavy, OPF_NO_TRUNC, 0, 0);
        return policy_emit_done(&b, name, e);
    }
    uint32_t rows = heavy;
    if (T > P) {
        /* the candidates: the entry leaving the window (slot 0), then the kept rows */
        uint32_t cand = opb_tensor(&b, "cmp.evict_cand", OPT_TEMP, Hkv, k + 1, F);
        opb_put(&b,
                with_norm(&b, opb_rows(&b, kv, Hkv, c1 - 1, 1, 2 * d, "cmp.kv_join"),
                          opb_rows(&b, nst, Hkv, c1 - 1, 1, 1, "cmp.join"), Hkv, 1, d,
                          "cmp.join_row"),
                cand, Hkv, 0, 1, F);
        opb_put(&b, heavy, cand, Hkv, 1, k, F);
        /* COST: the arg-min of the k + 1 norms (ARGMAX of the negated ones, the negation local),
         * the prefix sums of its one-hot and their broadcast over the row (local), one SELECT
         * per element of the k compacted rows (cs_emit's permanent eviction) */
        uint32_t sc = opb_transpose(&b, columns(&b, cand, Hkv, k + 1, F, 2 * d, 1, "cmp.evict_sc"),
                                    Hkv, k + 1, 1, "cmp.evict_row");
        if (B == 1) /* one per layer: each candidate's norms summed over the KV heads (local) */
            sc = compose_heads_sum(&b, sc, Hkv, k + 1, "cmp.evict_sum");
        uint32_t neg =
            opb_op(&b, OP_MUL_PUB, B, 1, 0, k + 1, sc, OP_NONE, OP_NONE,
                   opb_tensor(&b, "cmp.evict_neg", OPT_TEMP, B, 1, k + 1), OPF_NO_TRUNC, 0, -1.0);
        uint32_t oh = opb_tensor(&b, "cmp.argmin", OPT_TEMP, B, 1, k + 1);
        opb_op(&b, OP_ARGMAX, B, 1, 0, k + 1, neg, OP_NONE, OP_NONE, oh, 0, 0, 0);
        uint32_t pre_sum =
            opb_matmul_pub(&b, oh, opb_shared(&b, "cmp.evict_tri", OPT_PUBLIC, 1, k + 1, k + 1), B,
                           k + 1, k + 1, opb_tensor(&b, "cmp.evict_prefix", OPT_TEMP, B, k + 1, 1));
        uint32_t mask = opb_matmul_pub(&b, opb_rows(&b, pre_sum, B, 0, k, 1, "cmp.evict_shift"),
                                       opb_shared(&b, "cmp.evict_ones", OPT_PUBLIC, 1, 1, F), B * k,
                                       1, F, opb_tensor(&b, "cmp.evict_mask", OPT_TEMP, B, k, F));
        if (B == 1) /* the layer's mask as each KV head's (local) */
            mask = opb_repeat(&b, mask, 1, k * F, Hkv, "cmp.evict_mask_heads");
        rows = opb_tensor(&b, "cmp.heavy_next", OPT_TEMP, Hkv, k, F);
        opb_op(&b, OP_SELECT, Hkv, k, 0, F, mask,
               opb_rows(&b, cand, Hkv, 1, k, F, "cmp.evict_next"),
               opb_rows(&b, cand, Hkv, 0, k, F, "cmp.evict_cur"), rows, 0, 0, 0);
        opb_put(&b, rows, heavy, Hkv, 0, k, F);
    }
    /* the kept rows' K | V columns, the step's selection of the candidates [c0, c1) (views),
     * ranked by their norms */
    uint32_t row = opb_transpose(&b, opb_rows(&b, nst, Hkv, c0, nc, 1, "cmp.cand"), Hkv, nc, 1,
                                 "cmp.cand_row");
    if (B == 1) /* the layer's sums as each KV head's (local) */
        row = opb_repeat(&b, compose_heads_sum(&b, row, Hkv, nc, "cmp.cand_sum"), 1, nc, Hkv,
                         "cmp.sum_heads");
    pcheck_selection(&b, columns(&b, rows, Hkv, k, F, 0, 2 * d, "cmp.kept_kv"), k, c0, c1, row,
                     compose_keynorm_tol(Hkv, d, B == 1, kn->M));
    return policy_emit_done(&b, name, e);
}
