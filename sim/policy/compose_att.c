/* compose_att.c — attention-scored token compositions re-selecting at every step, on real
 * operands: the ops `policy check` runs and the secure session executes on shares
 * (secpol_emit.c), the composition's cost path the same program.
 *
 * select() at decode position T ranks the candidates [s, T − r) (s: the sinks, r: the recent
 * window) by the scores it observed up to the query T − 1: the attention summed over the KV
 * group's query heads, accumulated over every query so far or the newest query's row alone. So
 * the step's selection is made at the end of the step before, after that step's softmax (or the
 * prompt's), and carried as state: the sinks' rows (public positions: local copies), the top k
 * candidates' cached [K | V] rows gathered, then the window's rows (local copies), which the
 * step attends and names as its selection of every cached entry (no public entries: its
 * attention over those slots is then the step's own, PCHECK_IN_ATT_SLOTS). The scores are
 * carried by position: at a decode step the slots' group sums go back to their positions, the
 * sinks' and the window's and the new entry's to their public positions (local), the gathered
 * rows' through the transposed one-hot of the top-k that chose them (a GATHER: a product of
 * integer 0/1 rows, exact). Under a kv_budget fraction the counts s, k, r are select()'s at each
 * cached count (compose.c budget): the step attends the selection sized for its kv_len and makes
 * the next one sized for kv_len + 1, each in a state named by its size. With `when: {every: N}`
 * the steps between selections attend the last one's rows and every entry cached since (their
 * state: the step before's, the new entry's row appended), the scores updated at every step.
 * Without a recent window (r = 0) the new entry is a candidate of the next step's top-k, gathered
 * from a table of the cached rows and the new entry's (local copies), by a group's later layers
 * too.
 * With `share: layer` one score row per layer (every query head's attention summed), one top-k,
 * its one-hot copied to each KV head's gather. Shared across layers (`share: {layers: N}`, per KV
 * head), the leader also puts its one-hot rows and ranked scores into state and each later layer
 * gathers its own rows by them into a selection sized and named as its leader's (att_follow). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compose_int.h"
#include "pcheck.h"

int compose_att_shaped(const cspec *sp)
{
    return sp->score == SC_ATT && sp->when == W_STEP && !sp->permanent && sp->sel == K_TOPK &&
           !sp->cluster && sp->page <= 1;
}

/* The state tensor nm (B, rows, cols), named by its size n where that changes from step to step
 * (a kv_budget fraction, every N: a state keeps its shape from the program writing it to the one
 * reading it). */
static uint32_t att_state(opb *b, const compose_att *a, const char *nm, uint32_t n, uint32_t B,
                          uint32_t rows, uint32_t cols)
{
    char full[32];
    if (a->frac || a->every > 1)
        snprintf(full, sizeof full, "%s%u", nm, n);
    else
        snprintf(full, sizeof full, "%s", nm);
    return opb_shared(b, full, OPT_CACHE, B, rows, cols);
}

/* The top k of the candidates [s, s + nc) of the scores state sc (Hs, max_len, 1) for the next
 * step (u: its budget; Hs: Hkv, or 1 shared): their one-hot rows transposed into the state oht
 * (Hs, max_len, k), row i the candidate s + i; their cached rows from tab (Hkv, ≥ s + nc, 2d)
 * (shared: by the one-hot's Hkv copies, local) into rows s … s + k − 1 of the state sel (Hkv,
 * s + k + r, 2d), after the sinks' rows (local copies). */
static void next_topk(opb *b, const compose_att *a, const compose_att_budget *u, uint32_t sc,
                      uint32_t tab, uint32_t oht, uint32_t sel, uint32_t nc)
{
    uint32_t Hkv = a->env->n_kv_heads, Hs = a->shared ? 1 : Hkv, k = u->k, s = u->sinks;
    uint32_t d2 = 2 * a->env->head_dim;
    uint32_t cand = opb_rows(b, sc, Hs, s, nc, 1, "cmp.next_cand");
    uint32_t row = opb_transpose(b, cand, Hs, nc, 1, "cmp.next_row");
    uint32_t oh = opb_tensor(b, "cmp.next_topk", OPT_TEMP, Hs, k, nc);
    opb_op(b, OP_TOPK, Hs, 1, 0, nc, row, OP_NONE, OP_NONE, oh, 0, (int32_t)k, 0);
    opb_put(b, opb_transpose(b, oh, Hs, k, nc, "cmp.next_oht"), oht, Hs, 0, nc, k);
    if (Hs != Hkv)
        oh = opb_repeat(b, oh, 1, k * nc, Hkv, "cmp.next_topk_heads");
    uint32_t rows = opb_rows(b, tab, Hkv, s, nc, d2, "cmp.next_cand_kv");
    uint32_t out = opb_tensor(b, "cmp.next_gather", OPT_TEMP, Hkv, k, d2);
    opb_op(b, OP_GATHER, Hkv, k, nc, d2, oh, rows, OP_NONE, out, OPF_NO_TRUNC, 0, 0);
    opb_put(b, out, sel, Hkv, s, k, d2);
    if (s)
        opb_put(b, opb_rows(b, tab, Hkv, 0, s, d2, "cmp.next_sinks"), sel, Hkv, 0, s, d2);
    if (a->group) /* the one-hot rows the later layers of its group gather by */
        compose_lead_put(b, oh, OP_NONE, Hkv, k, nc);
}

/* The tie bound of the selection step T attends: the ops' scores are exact sums of
 * A fixed-point probabilities (A: the group's G rows of every query before T, or of the newest
 * one; shared, every head's H rows), each within 2⁻ᶠ of its float (`policy check` encodes them; on
 * shares the audit observes the opened values themselves), against select()'s float sums of A
 * terms of at most M (relative 2⁻²⁴ each); two candidates' scores, twice. In the ops' units (the
 * newest row shared: select() ranks the heads' mean, the ops their sum, scale H). */
static double tie_bound(const compose_att *a, uint32_t T)
{
    const policy_env *v = a->env;
    uint32_t Hs = a->shared ? 1 : v->n_kv_heads, G = v->n_heads / Hs;
    double M = 0, A = (double)G * (a->last ? 1 : T), scale = a->shared && a->last ? G : 1;
    for (uint32_t g = 0; g < Hs; g++)
        for (uint32_t j = 0; j < T; j++)
            M = fmax(M, a->score[(size_t)g * v->max_len + j] * scale);
    return 2 * A * (ldexp(1, -pcheck_frac_bits()) + M * 0x1p-24);
}

/* A later layer of a group (`share: {layers: N}`, per KV head: as compose.c att_real admits
 * it): no scores; its carried selection laid out and sized as its leader's (the same budgets,
 * the same state names), at the prompt and at each selecting step its own rows of the next
 * step's selection gathered by its leader's one-hot rows of the same step (compose_shlay.c), its
 * sinks' and window's rows copied (without a window, the new entry among the candidates); every
 * N, between selections, the same rows and the new entry's. A decode step names what its state
 * held as the step began (a copy before the update), with the leader's ranked scores of the step
 * for the ties. */
static int att_follow(const compose_att *a, int phase, uint32_t layer, uint32_t T, op_program *prog,
                      const char *name, errbuf *e)
{
    const policy_env *v = a->env;
    const compose_att_budget *c = &a->cur, *n = &a->nxt;
    uint32_t Hkv = v->n_kv_heads, d2 = 2 * v->head_dim;
    uint32_t s = c->sinks, k = c->k, m = s + k + (T - (a->at - c->recent));
    uint32_t ns = n->sinks, nk = n->k, nr = n->recent, nm = a->picks ? ns + nk + nr : m + 1;
    int pre = phase == PHASE_PREFILL;
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t nsel = att_state(&b, a, "cmp.sel", nm, Hkv, nm, d2);
    uint32_t kv = pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2);
    uint32_t now = OP_NONE, knew = OP_NONE;
    if (!pre) {
        now =
            opb_rows(&b, att_state(&b, a, "cmp.sel", m, Hkv, m, d2), Hkv, 0, m, d2, "cmp.sel_now");
        knew = pcheck_input(&b, PCHECK_IN_KV_NEW, Hkv, 1, d2);
    }
    if (a->picks) {
        uint32_t end = pre ? T : T + 1, nc = end - nr - ns, tab = kv; /* candidates [ns, ·) */
        if (!pre && !nr) { /* no window: the new entry a candidate, its row after the cached */
            tab = opb_tensor(&b, "cmp.next_tab", OPT_TEMP, Hkv, T + 1, d2);
            opb_put(&b, kv, tab, Hkv, 0, T, d2);
            opb_put(&b, knew, tab, Hkv, T, 1, d2);
        }
        /* COST: its own candidates' rows gathered by the leader's one-hot rows */
        uint32_t oh = compose_lead_state(&b, a->lead, "cmp.lead_oh", Hkv, nk, nc);
        uint32_t out = opb_tensor(&b, "cmp.next_gather", OPT_TEMP, Hkv, nk, d2);
        opb_op(&b, OP_GATHER, Hkv, nk, nc, d2, oh,
               opb_rows(&b, tab, Hkv, ns, nc, d2, "cmp.next_cand_kv"), OP_NONE, out, OPF_NO_TRUNC,
               0, 0);
        opb_put(&b, out, nsel, Hkv, ns, nk, d2);
        if (ns) /* the sinks' rows (local copies) */
            opb_put(&b, opb_rows(&b, kv, Hkv, 0, ns, d2, "cmp.next_sinks"), nsel, Hkv, 0, ns, d2);
        uint32_t w = pre || !nr ? nr : nr - 1; /* the window's cached rows (local copies) */
        if (w)
            opb_put(&b, opb_rows(&b, kv, Hkv, T - w, w, d2, "cmp.next_win"), nsel, Hkv, ns + nk, w,
                    d2);
    } else { /* every N, between selections: the same rows (local) */
        opb_put(&b, now, nsel, Hkv, 0, m, d2);
    }
    if (!pre) {
        if (!a->picks || nr) /* the new entry's row ends the window, or follows the rows kept */
            opb_put(&b, knew, nsel, Hkv, nm - 1, 1, d2);
        pcheck_selection(&b, now, m, 0, T,
                         compose_lead_state(&b, a->lead, "cmp.lead_row", Hkv, 1, T),
                         tie_bound(a, T));
    }
    return policy_emit_done(&b, name, e);
}

int compose_att_choice(const compose_att *a, const uint8_t *alive, uint32_t pos, policy_choice *c)
{
    if (a->at != pos)
        return 0; /* every N: the kept set of an earlier selection (adopted there) */
    /* shared: one row of the layer's scores (select()'s units) */
    double scale = a->shared && a->last ? a->env->n_heads : 1;
    *c = (policy_choice){pos, a->shared ? 0 : a->env->max_len, a->score, alive,
                         tie_bound(a, pos) / scale};
    return 1;
}

void compose_att_adopt(const policy_env *v, uint8_t *alive, uint32_t *sel_at, uint32_t layer,
                       const uint8_t *kept, uint32_t pos)
{
    for (uint32_t g = 0; g < v->n_kv_heads; g++)
        memcpy(alive + ((size_t)layer * v->n_kv_heads + g) * v->max_len, kept + (size_t)g * pos,
               pos);
    sel_at[layer] = pos + 1;
}

int compose_att_setup(compose_att *a, uint32_t T, int pre)
{
    uint32_t P = a->env->prompt_len, N = a->every;
    for (uint32_t n = P; n <= a->env->max_len; n = a->frac ? n + 1 : a->env->max_len + 1) {
        a->budget(a->st, a->layer, n, &a->cur); /* fixed: the prompt's, the fewest candidates */
        if (!a->cur.k || (uint64_t)a->cur.sinks + a->cur.k + a->cur.recent >= n)
            return 0;
    }
    a->at = pre ? T : T - (T - P) % N;
    a->picks = pre || (T + 1 - P) % N == 0;
    a->budget(a->st, a->layer, a->at, &a->cur);
    a->budget(a->st, a->layer, pre ? T : T + 1, &a->nxt);
    return 1;
}

int compose_att_emit(const compose_att *a, int phase, uint32_t layer, uint32_t kv_len,
                     op_program *prog, const char *name, errbuf *e)
{
    const policy_env *v = a->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, d2 = 2 * v->head_dim, T = kv_len;
    uint32_t Hs = a->shared ? 1 : Hkv, G = H / Hs; /* the scores' rows, the query heads of each */
    const compose_att_budget *c = &a->cur, *n = &a->nxt;
    /* the attended table: the s sinks, k gathered rows, then every position from the end of the
     * selection's candidates c1 on (its window; every N: and the entries cached since) */
    uint32_t s = c->sinks, k = c->k, c1 = a->at - c->recent, w = T - c1, m = s + k + w;
    uint32_t ns = n->sinks, nk = n->k, nr = n->recent, nm = a->picks ? ns + nk + nr : m + 1;
    if (a->lead != layer) /* a later layer of a group: by its leader's one-hot rows */
        return att_follow(a, phase, layer, kv_len, prog, name, e);
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t sc = opb_shared(&b, "cmp.att", OPT_CACHE, Hs, v->max_len, 1);
    uint32_t nsel = att_state(&b, a, "cmp.sel", nm, Hkv, nm, d2);
    uint32_t kv = pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2);
    if (phase == PHASE_PREFILL) {
        /* COST: the group's prompt rows summed per entry (every row, or the last one; shared:
         * every head's): a product with public ones, local */
        uint32_t rows = a->last ? 1 : T;
        uint32_t att = pcheck_input(&b, PCHECK_IN_PROMPT_ATT, H, rows, T);
        opb_put(&b, opb_colsum(&b, att, Hs, G * rows, T, "cmp.prompt_sum"), sc, Hs, 0, T, 1);
        /* COST: the first step's selection: a top-k of [s, T − r), the gather of their rows,
         * the sinks' and the window's rows copied (local) */
        uint32_t noht = att_state(&b, a, "cmp.oht", nk, Hs, v->max_len, nk);
        next_topk(&b, a, n, sc, kv, noht, nsel, T - nr - ns);
        if (nr)
            opb_put(&b, opb_rows(&b, kv, Hkv, T - nr, nr, d2, "cmp.next_win"), nsel, Hkv, ns + nk,
                    nr, d2);
        return policy_emit_done(&b, name, e);
    }
    uint32_t oht = att_state(&b, a, "cmp.oht", k, Hs, v->max_len, k);
    uint32_t sel = att_state(&b, a, "cmp.sel", m, Hkv, m, d2);
    /* the ranked scores as the step began (the tie check's), a copy before their update */
    uint32_t rank = opb_rows(&b, sc, Hs, 0, T, 1, "cmp.rank");
    /* COST: the group sums of the step's attention over its slots (a product with public ones:
     * local; shared: every head's, the slots the same entries for each), in slot order: the s
     * sinks, the k gathered rows, the w from c1 on, the new entry */
    uint32_t att = pcheck_input(&b, PCHECK_IN_ATT_SLOTS, H, 1, m + 1);
    uint32_t gs = opb_colsum(&b, att, Hs, G, m + 1, "cmp.slot_sum"); /* (Hs, m + 1, 1) */
    /* COST: the gathered rows' sums back to their positions [s, c1): the transposed one-hot of
     * the top-k that chose them times the sums (a GATHER of 0/1 rows: no truncation) */
    uint32_t ncp = c1 - s, row = opb_tensor(&b, "cmp.row", OPT_TEMP, Hs, T + 1, 1);
    uint32_t sp = opb_tensor(&b, "cmp.scatter", OPT_TEMP, Hs, ncp, 1);
    opb_op(&b, OP_GATHER, Hs, ncp, k, 1, opb_rows(&b, oht, Hs, 0, ncp, k, "cmp.oht_cand"),
           opb_rows(&b, gs, Hs, s, k, 1, "cmp.slot_sel"), OP_NONE, sp, OPF_NO_TRUNC, 0, 0);
    if (s)
        opb_put(&b, opb_rows(&b, gs, Hs, 0, s, 1, "cmp.slot_sinks"), row, Hs, 0, s, 1);
    opb_put(&b, sp, row, Hs, s, ncp, 1);
    opb_put(&b, opb_rows(&b, gs, Hs, s + k, w + 1, 1, "cmp.slot_win"), row, Hs, c1, w + 1, 1);
    if (a->last) { /* the newest row replaces the scores */
        opb_put(&b, row, sc, Hs, 0, T + 1, 1);
    } else { /* COST: added to the carried sums (local); the new entry's is its first */
        uint32_t acc =
            opb_op(&b, OP_ADD, Hs, T, 0, 1, rank, opb_rows(&b, row, Hs, 0, T, 1, "cmp.row_old"),
                   OP_NONE, opb_tensor(&b, "cmp.acc", OPT_TEMP, Hs, T, 1), 0, 0, 0);
        opb_put(&b, acc, sc, Hs, 0, T, 1);
        opb_put(&b, opb_rows(&b, row, Hs, T, 1, 1, "cmp.row_new"), sc, Hs, T, 1, 1);
    }
    uint32_t knew = pcheck_input(&b, PCHECK_IN_KV_NEW, Hkv, 1, d2);
    if (a->picks) {
        /* COST: the next step's selection: a top-k of [s', T + 1 − r'), the gather of their
         * rows; its sinks' rows and its window: the cached rows [T + 1 − r', T) and the new
         * entry's (local copies). Without a window the new entry is a candidate: its row after
         * the cached ones in the table gathered from (local copies) */
        uint32_t noht = att_state(&b, a, "cmp.oht", nk, Hs, v->max_len, nk), tab = kv;
        if (!nr) {
            tab = opb_tensor(&b, "cmp.next_tab", OPT_TEMP, Hkv, T + 1, d2);
            opb_put(&b, kv, tab, Hkv, 0, T, d2);
            opb_put(&b, knew, tab, Hkv, T, 1, d2);
        }
        next_topk(&b, a, n, sc, tab, noht, nsel, T + 1 - nr - ns);
        if (nr > 1)
            opb_put(&b, opb_rows(&b, kv, Hkv, T + 1 - nr, nr - 1, d2, "cmp.next_win"), nsel, Hkv,
                    ns + nk, nr - 1, d2);
    } else { /* every N, between selections: the same rows and the new entry's (local) */
        opb_put(&b, opb_rows(&b, sel, Hkv, 0, m, d2, "cmp.keep"), nsel, Hkv, 0, m, d2);
    }
    if (!a->picks || nr)
        opb_put(&b, knew, nsel, Hkv, nm - 1, 1, d2);
    /* the rows chosen at the selecting step: every cached entry's candidates are [s, c1), the
     * sinks' rows and those from c1 on gathered alongside (public positions, kept by both) */
    if (Hs != Hkv) /* the layer's scores as each KV head's, for the check's ties (local) */
        rank = opb_repeat(&b, rank, 1, T, Hkv, "cmp.rank_heads");
    if (a->group) /* the later layers of its group name their selection with these scores */
        compose_lead_put(&b, OP_NONE, rank, Hkv, 0, T);
    pcheck_selection(&b, sel, m, 0, T, rank, tie_bound(a, T));
    return policy_emit_done(&b, name, e);
}
