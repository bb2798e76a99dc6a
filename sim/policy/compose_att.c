/* compose_att.c — attention-scored token compositions re-selecting at every step, on real
 * operands: the ops `policy check` runs and the secure session executes on shares
 * (secpol_emit.c), the composition's cost path the same program.
 *
 * select() at decode position T ranks the candidates [0, T − r) (r: the recent window, no sinks)
 * by the scores it observed up to the query T − 1: the attention summed over the KV group's query
 * heads, accumulated over every query so far or the newest query's row alone. So the step's
 * selection is made at the end of the step before, after that step's softmax (or the prompt's),
 * and carried as state: the top k candidates' cached [K | V] rows gathered, then the window's
 * rows (public positions: local copies), which the step attends and names as its selection of
 * every cached entry (no public entries: its attention over those slots is then the step's own,
 * PCHECK_IN_ATT_SLOTS). The scores are carried by position: at a decode step the slots' group
 * sums go back to their positions, the gathered rows' through the transposed one-hot of the top-k
 * that chose them (a GATHER: a product of integer 0/1 rows, exact), the window's and the new
 * entry's to their public positions (local). */
#include <math.h>
#include <string.h>

#include "compose_int.h"
#include "pcheck.h"

int compose_att_shaped(const cspec *sp)
{
    return sp->score == SC_ATT && sp->when == W_STEP && !sp->permanent && sp->sel == K_TOPK &&
           !sp->share_all && !sp->pyramid && !sp->cluster && sp->every <= 1 && sp->page <= 1;
}

static double tie_bound(const compose_att *a, uint32_t T);

/* The top k of the candidates [0, nc) of the scores state sc (Hkv, max_len, 1) for the next
 * step: their one-hot rows transposed into the state oht (Hkv, max_len, k), their cached rows
 * from tab (Hkv, ≥ nc, 2d) into rows 0 … k − 1 of the state sel (Hkv, k + r, 2d). */
static uint32_t next_topk(opb *b, const compose_att *a, uint32_t sc, uint32_t tab, uint32_t oht,
                          uint32_t sel, uint32_t nc)
{
    uint32_t Hkv = a->env->n_kv_heads, k = a->k, d2 = 2 * a->env->head_dim;
    uint32_t cand = opb_rows(b, sc, Hkv, 0, nc, 1, "cmp.next_cand");
    uint32_t row = opb_transpose(b, cand, Hkv, nc, 1, "cmp.next_row");
    uint32_t oh = opb_tensor(b, "cmp.next_topk", OPT_TEMP, Hkv, k, nc);
    opb_op(b, OP_TOPK, Hkv, 1, 0, nc, row, OP_NONE, OP_NONE, oh, 0, (int32_t)k, 0);
    opb_put(b, opb_transpose(b, oh, Hkv, k, nc, "cmp.next_oht"), oht, Hkv, 0, nc, k);
    uint32_t rows = opb_rows(b, tab, Hkv, 0, nc, d2, "cmp.next_cand_kv");
    uint32_t out = opb_tensor(b, "cmp.next_gather", OPT_TEMP, Hkv, k, d2);
    opb_op(b, OP_GATHER, Hkv, k, nc, d2, oh, rows, OP_NONE, out, OPF_NO_TRUNC, 0, 0);
    opb_put(b, out, sel, Hkv, 0, k, d2);
    if (a->group) /* the one-hot rows the later layers of its group gather by */
        compose_lead_put(b, oh, OP_NONE, Hkv, k, nc);
    return oh;
}

/* A later layer of a group (`share: {layers: N}`): no scores; at the prompt and at each decode
 * step its own rows of the next step's selection gathered by its leader's one-hot rows of the
 * same step (compose_shlay.c) and its window's rows copied, into its state "cmp.sel"; a decode
 * step names what that state held as the step began (a copy before the update), with the
 * leader's ranked scores of the step for the ties. */
static int att_follow(const compose_att *a, int phase, uint32_t layer, uint32_t T, op_program *prog,
                      const char *name, errbuf *e)
{
    const policy_env *v = a->env;
    uint32_t Hkv = v->n_kv_heads, d2 = 2 * v->head_dim, k = a->k, r = a->recent, m = k + r;
    int pre = phase == PHASE_PREFILL;
    uint32_t nc = pre ? T - r : T + 1 - r;
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t sel = opb_shared(&b, "cmp.sel", OPT_CACHE, Hkv, m, d2);
    uint32_t kv = pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2);
    uint32_t now = pre ? OP_NONE : opb_rows(&b, sel, Hkv, 0, m, d2, "cmp.sel_now");
    /* COST: its own candidates' rows gathered by the leader's one-hot rows */
    uint32_t oh = compose_lead_state(&b, a->lead, "cmp.lead_oh", Hkv, k, nc);
    uint32_t out = opb_tensor(&b, "cmp.next_gather", OPT_TEMP, Hkv, k, d2);
    opb_op(&b, OP_GATHER, Hkv, k, nc, d2, oh, opb_rows(&b, kv, Hkv, 0, nc, d2, "cmp.next_cand_kv"),
           OP_NONE, out, OPF_NO_TRUNC, 0, 0);
    opb_put(&b, out, sel, Hkv, 0, k, d2);
    uint32_t w = pre ? r : r - 1; /* the window's cached rows (local copies), the new entry's */
    if (w)
        opb_put(&b, opb_rows(&b, kv, Hkv, T - w, w, d2, "cmp.next_win"), sel, Hkv, k, w, d2);
    if (!pre) {
        opb_put(&b, pcheck_input(&b, PCHECK_IN_KV_NEW, Hkv, 1, d2), sel, Hkv, m - 1, 1, d2);
        pcheck_selection(&b, now, m, 0, T,
                         compose_lead_state(&b, a->lead, "cmp.lead_row", Hkv, 1, T),
                         tie_bound(a, T));
    }
    return policy_emit_done(&b, name, e);
}

/* The tie bound of the selection step T attends: the ops' scores are exact sums of
 * A fixed-point probabilities (A: the group's G rows of every query before T, or of the newest
 * one), each within 2⁻ᶠ of its float (`policy check` encodes them; on shares the audit observes the
 * opened values themselves), against select()'s float sums of A terms of at most M (relative 2⁻²⁴
 * each); two candidates' scores, twice. */
static double tie_bound(const compose_att *a, uint32_t T)
{
    const policy_env *v = a->env;
    double M = 0, A = (double)(v->n_heads / v->n_kv_heads) * (a->last ? 1 : T);
    for (uint32_t g = 0; g < v->n_kv_heads; g++)
        for (uint32_t j = 0; j < T; j++)
            M = fmax(M, a->score[(size_t)g * v->max_len + j]);
    return 2 * A * (ldexp(1, -pcheck_frac_bits()) + M * 0x1p-24);
}

int compose_att_choice(const compose_att *a, const uint8_t *alive, uint32_t pos, policy_choice *c)
{
    *c = (policy_choice){pos, a->env->max_len, a->score, alive, tie_bound(a, pos)};
    return 1;
}

void compose_att_adopt(const policy_env *v, uint8_t *alive, uint32_t layer, const uint8_t *kept,
                       uint32_t pos)
{
    for (uint32_t g = 0; g < v->n_kv_heads; g++)
        memcpy(alive + ((size_t)layer * v->n_kv_heads + g) * v->max_len, kept + (size_t)g * pos,
               pos);
}

int compose_att_emit(const compose_att *a, int phase, uint32_t layer, uint32_t kv_len,
                     op_program *prog, const char *name, errbuf *e)
{
    const policy_env *v = a->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, G = H / Hkv, d2 = 2 * v->head_dim, k = a->k;
    uint32_t r = a->recent;
    uint32_t m = k + r, T = kv_len;
    if (a->lead != layer)
        return att_follow(a, phase, layer, kv_len, prog, name, e);
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    uint32_t sc = opb_shared(&b, "cmp.att", OPT_CACHE, Hkv, v->max_len, 1);
    uint32_t oht = opb_shared(&b, "cmp.oht", OPT_CACHE, Hkv, v->max_len, k);
    uint32_t sel = opb_shared(&b, "cmp.sel", OPT_CACHE, Hkv, m, d2);
    uint32_t kv = pcheck_input(&b, PCHECK_IN_KV, Hkv, T, d2);
    if (phase == PHASE_PREFILL) {
        /* COST: the group's prompt rows summed per entry (every row, or the last one): a product
         * with public ones, local */
        uint32_t w = a->last ? 1 : T;
        uint32_t att = pcheck_input(&b, PCHECK_IN_PROMPT_ATT, H, w, T);
        opb_put(&b, opb_colsum(&b, att, Hkv, G * w, T, "cmp.prompt_sum"), sc, Hkv, 0, T, 1);
        /* COST: the first step's selection: a top-k of [0, T − r), the gather of their rows,
         * the window's rows copied (local) */
        next_topk(&b, a, sc, kv, oht, sel, T - r);
        opb_put(&b, opb_rows(&b, kv, Hkv, T - r, r, d2, "cmp.next_win"), sel, Hkv, k, r, d2);
        return policy_emit_done(&b, name, e);
    }
    /* the ranked scores as the step began (the tie check's), a copy before their update; the
     * later layers of its group rank by them too */
    uint32_t rank = opb_rows(&b, sc, Hkv, 0, T, 1, "cmp.rank");
    if (a->group)
        compose_lead_put(&b, OP_NONE, rank, Hkv, 0, T);
    /* COST: the group sums of the step's attention over its slots (a product with public ones:
     * local), in slot order: the k gathered rows, the window's r, the new entry */
    uint32_t att = pcheck_input(&b, PCHECK_IN_ATT_SLOTS, H, 1, m + 1);
    uint32_t gs = opb_colsum(&b, att, Hkv, G, m + 1, "cmp.slot_sum"); /* (Hkv, m + 1, 1) */
    /* COST: the gathered rows' sums back to their positions [0, T − r): the transposed one-hot
     * of the top-k that chose them times the sums (a GATHER of 0/1 rows: no truncation) */
    uint32_t ncp = T - r, row = opb_tensor(&b, "cmp.row", OPT_TEMP, Hkv, T + 1, 1);
    uint32_t sp = opb_tensor(&b, "cmp.scatter", OPT_TEMP, Hkv, ncp, 1);
    opb_op(&b, OP_GATHER, Hkv, ncp, k, 1, opb_rows(&b, oht, Hkv, 0, ncp, k, "cmp.oht_cand"),
           opb_rows(&b, gs, Hkv, 0, k, 1, "cmp.slot_sel"), OP_NONE, sp, OPF_NO_TRUNC, 0, 0);
    opb_put(&b, sp, row, Hkv, 0, ncp, 1);
    opb_put(&b, opb_rows(&b, gs, Hkv, k, r + 1, 1, "cmp.slot_win"), row, Hkv, ncp, r + 1, 1);
    if (a->last) { /* the newest row replaces the scores */
        opb_put(&b, row, sc, Hkv, 0, T + 1, 1);
    } else { /* COST: added to the carried sums (local); the new entry's is its first */
        uint32_t acc =
            opb_op(&b, OP_ADD, Hkv, T, 0, 1, rank, opb_rows(&b, row, Hkv, 0, T, 1, "cmp.row_old"),
                   OP_NONE, opb_tensor(&b, "cmp.acc", OPT_TEMP, Hkv, T, 1), 0, 0, 0);
        opb_put(&b, acc, sc, Hkv, 0, T, 1);
        opb_put(&b, opb_rows(&b, row, Hkv, T, 1, 1, "cmp.row_new"), sc, Hkv, T, 1, 1);
    }
    /* COST: the next step's selection: a top-k of [0, T + 1 − r), the gather of their rows; its
     * window: the cached rows [T + 1 − r, T) and the new entry's (local copies) */
    next_topk(&b, a, sc, kv, oht, sel, T + 1 - r);
    if (r > 1)
        opb_put(&b, opb_rows(&b, kv, Hkv, T + 1 - r, r - 1, d2, "cmp.next_win"), sel, Hkv, k, r - 1,
                d2);
    opb_put(&b, pcheck_input(&b, PCHECK_IN_KV_NEW, Hkv, 1, d2), sel, Hkv, m - 1, 1, d2);
    /* the rows chosen at the step before: every cached entry's candidates are [0, T − r), the
     * window's rows gathered alongside (public positions, kept by both) */
    pcheck_selection(&b, sel, m, 0, T, rank, tie_bound(a, T));
    return policy_emit_done(&b, name, e);
}
