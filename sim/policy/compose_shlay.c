/* compose_shlay.c — a selection shared across layers (`share: {layers: N}`) on real operands:
 * the first layer of a group of N (its leader, compose_cs.h leader()) selects as a layer of its own
 * would, and puts its top-k's one-hot rows and the candidates' scores they ranked into state
 * named by its layer ("L<lead>.cmp.lead_oh", "L<lead>.cmp.lead_row"). Each later layer of the
 * group, in the same step, names that state and gathers its own cached [K | V] rows of the same
 * candidates by those one-hot rows: the entries select() keeps for it, which are its leader's
 * (cs_select). At every step (key norms on tokens or pages, page bounds) it names the rows as
 * the step's selection; selected once after the prompt (key norms, window votes) it gathers
 * its prompt rows into state that its decode steps name; every N steps it also keeps them in
 * state for the steps between; by attention (compose_att.c) it gathers the next step's rows
 * into its carried selection. The leader's programs run before its followers' within a step
 * (`policy check` runs the layers' programs in order, carrying state by name; the secure session
 * splices each layer's before its attention, in layer order, the state one tensor of the step), so
 * a follower reads the rows of this step's selection. Its cost is the follower's of the declared
 * model (cs_emit): one GATHER of its rows per KV head by the leader's one-hot, no score and no
 * top-k; the state is written by views (local). */
#include "compose_int.h"
#include "page_ops.h"
#include "pcheck.h"

/* The leader's state nm (B, R, C) in this program: the one its ops wrote, or, in a follower's
 * program, the same name bound to it. */
uint32_t compose_lead_state(opb *b, uint32_t lead, const char *nm, uint32_t B, uint32_t R,
                            uint32_t C)
{
    char full[48];
    op_layer_name(full, (int)lead, nm);
    uint32_t id = opb_find_as(b, full);
    return id != OP_NONE ? id : opb_tensor_as(b, full, OPT_CACHE, B, R, C);
}

void compose_lead_put(opb *b, uint32_t oh, uint32_t row, uint32_t Hkv, uint32_t k, uint32_t nu)
{
    uint32_t lead = (uint32_t)b->layer;
    if (oh != OP_NONE)
        opb_op(b, OP_VIEW, Hkv, k, 0, nu, oh, OP_NONE, OP_NONE,
               compose_lead_state(b, lead, "cmp.lead_oh", Hkv, k, nu), 0, 0, 0);
    if (row != OP_NONE)
        opb_op(b, OP_VIEW, Hkv, 1, 0, nu, row, OP_NONE, OP_NONE,
               compose_lead_state(b, lead, "cmp.lead_row", Hkv, 1, nu), 0, 0, 0);
}

uint32_t compose_lead_norms(opb *b, uint32_t lead, uint32_t Hkv, uint32_t max_len)
{
    return compose_lead_state(b, lead, "cmp.norm", Hkv, max_len, 1);
}

void compose_follow_rows(opb *b, uint32_t lead, uint32_t Hkv, uint32_t d, uint32_t kv_len,
                         uint32_t c0, uint32_t c1, uint32_t k, int carry, double tol)
{
    uint32_t nc = c1 - c0;
    uint32_t oh = compose_lead_state(b, lead, "cmp.lead_oh", Hkv, k, nc);
    uint32_t row = compose_lead_state(b, lead, "cmp.lead_row", Hkv, 1, nc);
    /* COST: its own candidates' [K | V] rows gathered by the leader's one-hot rows */
    uint32_t kv = pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, 2 * d);
    uint32_t tab = opb_rows(b, kv, Hkv, c0, nc, 2 * d, "cmp.kv_cand");
    uint32_t out = opb_tensor(b, "cmp.gather", OPT_TEMP, Hkv, k, 2 * d);
    opb_op(b, OP_GATHER, Hkv, k, nc, 2 * d, oh, tab, OP_NONE, out, OPF_NO_TRUNC, 0, 0);
    if (carry) /* every N steps: the rows the steps until the next selection name (a view) */
        opb_put(b, out, opb_shared(b, "cmp.kept", OPT_CACHE, Hkv, k, 2 * d), Hkv, 0, k, 2 * d);
    pcheck_selection(b, out, k, c0, c1, row, tol);
}

void compose_follow_once(opb *b, int phase, uint32_t lead, uint32_t Hkv, uint32_t d2,
                         uint32_t kv_len, uint32_t c0, uint32_t c1, uint32_t k, double tol)
{
    uint32_t n = c1 - c0;
    if (phase == PHASE_DECODE) {
        /* no ops: the step attends the rows its prompt gathered, named with the leader's
         * scores of the candidates (snap_select_emit's decode step, those scores another
         * layer's state) */
        pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, d2);
        uint32_t sc = k ? compose_lead_state(b, lead, "snap.score_kept", Hkv, 1, n) : OP_NONE;
        pcheck_selection(b, opb_shared(b, "snap.kept", OPT_CACHE, Hkv, k, d2), k, c0, c1, sc, tol);
        return;
    }
    if (k == 0) /* its leader kept none of the candidates: nothing to gather */
        return;
    /* COST: its own prompt rows of the candidates gathered by the leader's one-hot rows into
     * state */
    uint32_t kv = pcheck_input(b, PCHECK_IN_KV, Hkv, kv_len, d2);
    uint32_t tab = opb_rows(b, kv, Hkv, c0, n, d2, "snap.cand");
    opb_op(b, OP_GATHER, Hkv, k, n, d2, compose_lead_state(b, lead, "cmp.lead_oh", Hkv, k, n), tab,
           OP_NONE, opb_shared(b, "snap.kept", OPT_CACHE, Hkv, k, d2), OPF_NO_TRUNC, 0, 0);
}

void compose_page_select(opb *b, uint32_t lead, int group, uint32_t row, uint32_t H, uint32_t Hkv,
                         uint32_t c0, uint32_t u1, uint32_t k, uint32_t S, uint32_t d, uint32_t c1,
                         uint32_t kv_len, double tol)
{
    uint32_t nu = u1 - c0 / S;
    if ((int)lead != b->layer) {
        /* COST: its own pages' [K | V] rows gathered by the leader's one-hot rows, the rows
         * outside the candidates biased out by them (local) */
        page_gather(b, "cmp", compose_lead_state(b, lead, "cmp.lead_oh", Hkv, k, nu),
                    compose_lead_state(b, lead, "cmp.lead_row", Hkv, 1, nu), H, Hkv, c0, u1, k, S,
                    d, c1, kv_len, tol);
        return;
    }
    uint32_t oh = page_select(b, "cmp", row, H, Hkv, c0, u1, k, S, d, c1, kv_len, tol);
    if (group)
        compose_lead_put(b, oh, row, Hkv, k, nu);
}
