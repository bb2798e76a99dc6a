/* compose_keynorm.c — the ops of a key-norm composition's selection on real operands (token
 * units), the ones `policy check` runs and the secure session executes on shares
 * (secpol_emit.c): a top-k at every step per KV head, or one per layer (`share: layer`: every KV
 * head's norms summed, one top-k, each KV head's rows gathered by that one-hot); every N steps
 * (the kept rows carried in state between selections); or once after the prompt (`when: once`:
 * the top-k gathered into state, named by every decode step), per KV head or one per layer.
 * Also the page blocks' key-norm score (each candidate page's summed norms) and its tie bound;
 * a key-norm eviction for good is compose_knperm.c's. */
#include "compose_int.h"
#include "pcheck.h"

#include <math.h>

uint32_t compose_key_norms(opb *b, uint32_t Hkv, uint32_t d, uint32_t max_len, uint32_t t,
                           uint32_t r0)
{
    uint32_t nst = opb_shared(b, "cmp.norm", OPT_CACHE, Hkv, max_len, 1);
    uint32_t kn = pcheck_input(b, PCHECK_IN_KEYS_NEW, Hkv, t, d);
    uint32_t sq = opb_tensor(b, "cmp.sq", OPT_TEMP, Hkv, t, d);
    opb_op(b, OP_SQUARE, Hkv, t, 0, d, kn, OP_NONE, OP_NONE, sq, 0, 0, 0);
    uint32_t ones = opb_shared(b, "cmp.ones", OPT_PUBLIC, 1, d, 1);
    uint32_t nn = opb_tensor(b, "cmp.knorm", OPT_TEMP, Hkv, t, 1);
    opb_matmul_pub(b, sq, ones, Hkv * t, d, 1, nn);
    opb_put(b, nn, nst, Hkv, r0, t, 1);
    return nst;
}

/* The tie bound of a selection by key norms (M: the largest candidate score). Keys on f
 * fractional bits, each square truncated, summed exactly, against float norms: |ŝ − s| ≤
 * √d·‖k‖·2⁻ᶠ + 2d·2⁻ᶠ ≤ ((d + s)/2 + 2d)·2⁻ᶠ (+ float's relative 2⁻²⁴), twice; of a run's own
 * keys (two runs' keys round apart: POLICIES.md "Score-side attention"). Shared: the sum of Hkv
 * such norms, n = Hkv·d terms of each kind, the float sum's relative Hkv·2⁻²⁴. */
double compose_keynorm_tol(uint32_t Hkv, uint32_t d, int shared, double M)
{
    double u = ldexp(1, -pcheck_frac_bits()), n = shared ? (double)Hkv * d : d;
    double rel = shared ? (double)Hkv * 0x1p-24 : 0x1p-24;
    return 2 * (((n + M) / 2 + 2 * n) * u + M * rel);
}

/* The candidates' norms of the state nst (Hkv, max_len, 1) as a row per KV head, or shared the
 * layer's sum as each KV head's (views and local products): the scores a selection ranks. */
static uint32_t cand_row(opb *b, uint32_t nst, uint32_t Hkv, uint32_t c0, uint32_t nc, int shared)
{
    uint32_t cand = opb_rows(b, nst, Hkv, c0, nc, 1, "cmp.cand");
    if (!shared || Hkv == 1)
        return opb_transpose(b, cand, Hkv, nc, 1, "cmp.cand_row");
    return opb_repeat(b, compose_heads_sum(b, cand, Hkv, nc, "cmp.sum_row"), 1, nc, Hkv,
                      "cmp.sum_heads");
}

/* The top k of the candidates [c0, c1) of the norms nst, per KV head or (shared) one per layer,
 * and the gather of their cached [K | V] rows (Hkv, k, 2d); *row: the scores ranked, *ohp: the
 * one-hot rows (Hkv, k, c1 − c0). */
static uint32_t topk_gather(opb *b, uint32_t nst, uint32_t Hkv, uint32_t d, uint32_t kv_len,
                            uint32_t c0, uint32_t c1, uint32_t k, int shared, uint32_t out,
                            uint32_t *row, uint32_t *ohp)
{
    uint32_t nc = c1 - c0;
    uint32_t cand = opb_rows(b, nst, Hkv, c0, nc, 1, "cmp.cand");
    uint32_t oh;
    if (shared && Hkv > 1) {
        /* COST: one top-k per layer of the KV heads' summed norms, its one-hot as each KV
         * head's (local) */
        uint32_t srow = compose_heads_sum(b, cand, Hkv, nc, "cmp.sum_row"),
                 one = opb_tensor(b, "cmp.topk", OPT_TEMP, 1, k, nc);
        opb_op(b, OP_TOPK, 1, 1, 0, nc, srow, OP_NONE, OP_NONE, one, 0, (int32_t)k, 0);
        oh = opb_repeat(b, one, 1, k * nc, Hkv, "cmp.topk_heads");
        /* the layer's score as each KV head's, for the check's ties (local) */
        *row = opb_repeat(b, srow, 1, nc, Hkv, "cmp.sum_heads");
    } else {
        /* COST: one top-k of the candidates per KV head */
        *row = opb_transpose(b, cand, Hkv, nc, 1, "cmp.cand_row");
        oh = opb_tensor(b, "cmp.topk", OPT_TEMP, Hkv, k, nc);
        opb_op(b, OP_TOPK, Hkv, 1, 0, nc, *row, OP_NONE, OP_NONE, oh, 0, (int32_t)k, 0);
    }
    /* COST: the gather of the kept candidates' [K | V] rows, per KV head */
    uint32_t kv = pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
    uint32_t tab = opb_rows(b, kv, Hkv, c0, nc, 2 * d, "cmp.kv_cand");
    if (out == OP_NONE)
        out = opb_tensor(b, "cmp.gather", OPT_TEMP, Hkv, k, 2 * d);
    opb_op(b, OP_GATHER, Hkv, k, nc, 2 * d, oh, tab, OP_NONE, out, OPF_NO_TRUNC, 0, 0);
    *ohp = oh;
    return out;
}

void compose_keynorm_select(opb *b, uint32_t nst, uint32_t Hkv, uint32_t d, uint32_t kv_len,
                            uint32_t c0, uint32_t c1, uint32_t k, int shared, int carry, double M,
                            int lead)
{
    uint32_t row, oh;
    uint32_t out = topk_gather(b, nst, Hkv, d, kv_len, c0, c1, k, shared, OP_NONE, &row, &oh);
    if (carry) /* the kept rows, the selection of the steps until the next one (a view) */
        opb_put(b, out, opb_shared(b, "cmp.kept", OPT_CACHE, Hkv, k, 2 * d), Hkv, 0, k, 2 * d);
    if (lead) /* the one-hot rows the later layers of its group gather by */
        compose_lead_put(b, oh, row, Hkv, k, c1 - c0);
    pcheck_selection(b, out, k, c0, c1, row, compose_keynorm_tol(Hkv, d, shared, M));
}

void compose_keynorm_kept(opb *b, uint32_t nst, uint32_t Hkv, uint32_t d, uint32_t kv_len,
                          uint32_t c0, uint32_t c1, uint32_t k, int shared, double M)
{
    /* no ops: the step attends the rows the last selection gathered (its state); the entries
     * cached since, like its window, are public positions. Named for the check with the
     * candidates' norms (views of the carried norms, shared their sum: local) */
    pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
    uint32_t kept = opb_shared(b, "cmp.kept", OPT_CACHE, Hkv, k, 2 * d);
    uint32_t row = cand_row(b, nst, Hkv, c0, c1 - c0, shared);
    pcheck_selection(b, kept, k, c0, c1, row, compose_keynorm_tol(Hkv, d, shared, M));
}

void compose_keynorm_once_shared(opb *b, int phase, uint32_t Hkv, uint32_t d, uint32_t max_len,
                                 uint32_t kv_len, uint32_t c0, uint32_t c1, uint32_t k, double M,
                                 int lead)
{
    if (phase == PHASE_DECODE) { /* the prompt's norms (state) name the kept rows' scores */
        uint32_t nst = opb_shared(b, "cmp.norm", OPT_CACHE, Hkv, max_len, 1);
        compose_keynorm_kept(b, nst, Hkv, d, kv_len, c0, c1, k, 1, M);
        return;
    }
    /* COST: the prompt keys' squared norms into state (compose_key_norms: local sums), one
     * top-k per layer of the KV heads' sums and each KV head's rows gathered by it into the
     * state the decode steps name */
    uint32_t nst = compose_key_norms(b, Hkv, d, max_len, kv_len, 0);
    uint32_t row, oh, kept = opb_shared(b, "cmp.kept", OPT_CACHE, Hkv, k, 2 * d);
    topk_gather(b, nst, Hkv, d, kv_len, c0, c1, k, 1, kept, &row, &oh);
    if (lead) /* the one-hot rows the later layers of its group gather by */
        compose_lead_put(b, oh, OP_NONE, Hkv, k, c1 - c0);
}

void compose_keynorm_once_follow(opb *b, int phase, uint32_t lead, uint32_t Hkv, uint32_t d,
                                 uint32_t max_len, uint32_t kv_len, uint32_t c0, uint32_t c1,
                                 uint32_t k, double M)
{
    if (phase == PHASE_DECODE) { /* its rows, ranked by the leader's prompt norms (state) */
        compose_keynorm_kept(b, compose_lead_norms(b, lead, Hkv, max_len), Hkv, d, kv_len, c0, c1,
                             k, 1, M);
        return;
    }
    /* COST: its own prompt rows of the candidates gathered by the leader's one-hot rows into
     * the state its decode steps name */
    uint32_t nc = c1 - c0, kv = pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
    opb_op(b, OP_GATHER, Hkv, k, nc, 2 * d, compose_lead_state(b, lead, "cmp.lead_oh", Hkv, k, nc),
           opb_rows(b, kv, Hkv, c0, nc, 2 * d, "cmp.kv_cand"), OP_NONE,
           opb_shared(b, "cmp.kept", OPT_CACHE, Hkv, k, 2 * d), OPF_NO_TRUNC, 0, 0);
}

void compose_keynorm_once(opb *b, int phase, uint32_t Hkv, uint32_t d, uint32_t kv_len, uint32_t c0,
                          uint32_t c1, uint32_t k, double M, int lead)
{
    uint32_t sc = OP_NONE;
    if (phase == PHASE_PREFILL) {
        /* COST: the prompt keys' squares and their sum (a product with public ones: local);
         * the candidates' norms as a row per KV head (views, local) */
        uint32_t kn = pcheck_input(b, PCHECK_IN_KEYS_NEW, Hkv, kv_len, d);
        uint32_t sq = opb_tensor(b, "cmp.sq", OPT_TEMP, Hkv, kv_len, d);
        opb_op(b, OP_SQUARE, Hkv, kv_len, 0, d, kn, OP_NONE, OP_NONE, sq, 0, 0, 0);
        uint32_t nn =
            opb_matmul_pub(b, sq, opb_shared(b, "cmp.ones", OPT_PUBLIC, 1, d, 1), Hkv * kv_len, d,
                           1, opb_tensor(b, "cmp.knorm", OPT_TEMP, Hkv, kv_len, 1));
        sc = opb_transpose(b, opb_rows(b, nn, Hkv, 0, c1, 1, "cmp.norm_c1"), Hkv, c1, 1,
                           "cmp.norm_row");
    }
    /* COST: the prompt's top k of the candidates per KV head and the gather of their [K | V]
     * rows into state, the rows each decode step names (snapkv's: snap_select_emit); the
     * entries cached after the prompt are public positions. Ties: as the per-step path's. */
    uint32_t oh = snap_select_emit(b, phase, sc, Hkv, 2 * d, kv_len, c0, c1, k,
                                   compose_keynorm_tol(Hkv, d, 0, M));
    if (lead && oh != OP_NONE) /* the one-hot rows the later layers of its group gather by */
        compose_lead_put(b, oh, OP_NONE, Hkv, k, c1 - c0);
}

int compose_keynorm_emit(const compose_kn *kn, int phase, uint32_t layer, uint32_t kv_len,
                         op_program *prog, const char *name, errbuf *e)
{
    const policy_env *v = kn->env;
    uint32_t Hkv = v->n_kv_heads, d = v->head_dim, k = kn->k, c0 = kn->c0, c1 = kn->c1;
    int pre = phase == PHASE_PREFILL, own = kn->lead == layer;
    if (kn->once && k >= c1 - c0)
        return MS_OK; /* every candidate kept: no selection */
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    if (kn->once && kn->shared && !own) {
        compose_keynorm_once_follow(&b, phase, kn->lead, Hkv, d, v->max_len, kv_len, c0, c1, k,
                                    kn->M);
    } else if (kn->once && kn->shared) {
        compose_keynorm_once_shared(&b, phase, Hkv, d, v->max_len, kv_len, c0, c1, k, kn->M,
                                    kn->group);
    } else if (kn->once && !own) {
        /* its own rows by its leader's one-hot rows (compose_shlay.c) */
        compose_follow_once(&b, phase, kn->lead, Hkv, 2 * d, kv_len, c0, c1, k,
                            compose_keynorm_tol(Hkv, d, 0, kn->M));
    } else if (kn->once) {
        compose_keynorm_once(&b, phase, Hkv, d, kv_len, c0, c1, k, kn->M, kn->group);
    } else {
        /* COST: the new keys' squares and their sum (a product with public ones: local); a
         * layer sharing its leader's selection has no scores of its own */
        uint32_t nst =
            own ? compose_key_norms(&b, Hkv, d, v->max_len, pre ? kv_len : 1, pre ? 0 : kv_len)
                : OP_NONE;
        /* every N steps, a step between selections attends the rows of the last one's
         * candidates (the state "cmp.kept"; a later layer of a group: ranked by its leader's
         * norms, compose_shlay.c) */
        if (!pre && k > 0 && k < c1 - c0 && kn->at < kv_len)
            compose_keynorm_kept(&b, own ? nst : compose_lead_norms(&b, kn->lead, Hkv, v->max_len),
                                 Hkv, d, kv_len, c0, c1, k, kn->shared, kn->M);
        else if (!pre && k > 0 && k < c1 - c0 && !own) /* by its leader's one-hot rows */
            compose_follow_rows(&b, kn->lead, Hkv, d, kv_len, c0, c1, k, kn->every > 1,
                                compose_keynorm_tol(Hkv, d, kn->shared, kn->M));
        else if (!pre && k > 0 && k < c1 - c0)
            compose_keynorm_select(&b, nst, Hkv, d, kv_len, c0, c1, k, kn->shared, kn->every > 1,
                                   kn->M, kn->group);
    }
    return policy_emit_done(&b, name, e);
}

uint32_t compose_keynorm_pages(opb *b, uint32_t nst, uint32_t Hkv, uint32_t c0, uint32_t c1,
                               uint32_t S)
{
    /* the candidates' norms in whole pages, the rows before c0 and past c1 zero (x − x), each
     * page's sum by a product with public ones (local) */
    uint32_t u0 = c0 / S, nu = (c1 + S - 1) / S - u0, nc = c1 - c0, lead = c0 - u0 * S;
    uint32_t cand = opb_rows(b, nst, Hkv, c0, nc, 1, "cmp.cand");
    uint32_t padded = opb_tensor(b, "cmp.cand_pages", OPT_TEMP, Hkv, nu * S, 1);
    opb_put(b, cand, padded, Hkv, lead, nc, 1);
    if (nc < nu * S) {
        uint32_t one = opb_rows(b, cand, Hkv, 0, 1, 1, "cmp.cand_one");
        uint32_t zero = opb_op(b, OP_SUB, Hkv, 1, 0, 1, one, one, OP_NONE,
                               opb_tensor(b, "cmp.cand_zero", OPT_TEMP, Hkv, 1, 1), 0, 0, 0);
        for (uint32_t r = 0; r < nu * S; r++)
            if (r < lead || r >= lead + nc)
                opb_put(b, zero, padded, Hkv, r, 1, 1);
    }
    uint32_t pones = opb_shared(b, "cmp.page_ones", OPT_PUBLIC, 1, S, 1);
    uint32_t ps = opb_matmul_pub(b, padded, pones, Hkv * nu, S, 1,
                                 opb_tensor(b, "cmp.page_sum", OPT_TEMP, Hkv, nu, 1));
    return opb_transpose(b, ps, Hkv, nu, 1, "cmp.page_row");
}

/* An entry's norm within (√d·‖k‖ + 2d)·2⁻ᶠ + its float's 2⁻²⁴ (as the token path), a page's
 * sum of S of them with the float sum's relative S·2⁻²⁴; twice. */
double compose_keynorm_page_tol(uint32_t d, uint32_t S, double M)
{
    double u = ldexp(1, -pcheck_frac_bits());
    return 2 * S * (((d + M) / 2 + 2 * d) * u + M * (S + 1) * 0x1p-24);
}
