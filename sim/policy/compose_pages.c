/* compose_pages.c — a page composition's selection (page_bounds, or key_norm summed per page)
 * with a top-k at every step, once or every N steps, on real operands (compose.c cs_emit
 * dispatches here): the ops `policy check` runs and the secure session executes on shares. */
#include "compose_cs.h"
#include "page_ops.h"
#include "pcheck.h"

/* Pages (page_bounds, or key_norm summed per page) with a top-k at every step, on real operands
 * (page_ops.h, as quest): the bounds or squared norms carried as state, the candidate pages
 * [⌊c0 / S⌋, ⌈c1 / S⌉) scored, the top k pages' [K | V] rows gathered as the selection of
 * [c0, c1), their rows outside it biased out (sinks, padding, the window: attended as public;
 * select_row keeps a page's candidates only). A step of T cached entries attends
 * c0 + (T − c1) + k·S ≤ T entries where c0 is a page boundary (k ≤ pages − 1, one page
 * partial), otherwise where k·S ≤ c1 − c0; every step of the run is checked once per layer
 * (under kv_budget the sinks, window and k follow T: sinks cut to a prompt's small budget grow
 * back, possibly off a page boundary). Once or every N steps, a selecting step's pages also go
 * into state (page_select_carry) that the steps between name; once, a last candidate page
 * reaching past the prompt is gathered with zero rows for the entries not yet cached (page_ops.c,
 * biased out as a decode step's padding; the entries cached later are public). Shared across
 * layers, the later layers of a group gather their own pages by the first's one-hot rows
 * (compose_page_select; once or every N carried as the first's are: page_gather_carry). */
int compose_pages_real(cstate *s, uint32_t layer)
{
    uint32_t P = s->env.prompt_len, S = s->page, sinks, recent, k, c0, c1;
    if (S <= 1 || (s->sp->score != SC_BOUNDS && s->sp->score != SC_KEYNORM))
        return 0;
    if (s->preal[layer] >= 0)
        return s->preal[layer];
    int ok = 1;
    for (uint32_t T = P; ok && T <= s->env.max_len; T++) {
        budget(s, layer, T, &sinks, &recent, &k);
        cand_range(T, sinks, recent, &c0, &c1);
        uint32_t nu = c1 > c0 ? (c1 - 1) / S - c0 / S + 1 : 0; /* candidate pages */
        ok = sinks % S == 0 || k == 0 || k >= nu || (uint64_t)k * S <= c1 - c0;
    }
    return s->preal[layer] = (int8_t)ok;
}

int compose_emit_pages(cstate *s, int phase, uint32_t layer, uint32_t kv_len, op_program *prog,
                       errbuf *e)
{
    const policy_env *v = &s->env;
    uint32_t H = v->n_heads, Hkv = v->n_kv_heads, d = v->head_dim, S = s->page, P = v->prompt_len;
    uint32_t sinks, recent, k, c0, c1, row = OP_NONE, lead = leader(s, layer);
    int pre = phase == PHASE_PREFILL, once = s->sp->when == W_ONCE, carry = once || s->every > 1;
    int own = lead == layer, group = s->sp->lshare > 1;
    /* once or every N: the budget of the last selecting step (the prompt when once), whose
     * pages the steps between selections name (page_select_kept); a layer sharing its leader's
     * selection keeps no scores: it gathers its own rows by the leader's one-hot rows of the
     * step (compose_page_select) */
    uint32_t at = pre || once ? P : kv_len - (kv_len - P) % s->every, ml = carry ? v->max_len : 0;
    budget(s, lead, at, &sinks, &recent, &k);
    cand_range(at, sinks, recent, &c0, &c1);
    uint32_t u0 = c0 / S, u1 = (c1 + S - 1) / S, nu = c1 > c0 ? u1 - u0 : 0, bst = OP_NONE;
    int sel = k > 0 && k < nu; /* no top-k (k = 0): public positions (compose.c emit_public) */
    int now = sel && (pre ? once : !once && at == kv_len);
    double tol;
    opb b;
    opb_init(&b, prog, phase, (int)layer, OPC_POLICY, NULL);
    if (s->sp->score == SC_BOUNDS) {
        bst = own ? page_bounds_state(&b, "cmp", Hkv, s->max_pages, d) : OP_NONE;
        if (pre && own)
            page_bounds_prompt(&b, "cmp", bst, Hkv, kv_len, S, d);
        tol = page_bounds_tol(s->qmax[lead], s->kmax[lead], d, s->G, pcheck_frac_bits());
        if (now && own)
            row = page_bounds_score(&b, "cmp", bst, H, Hkv, u0, nu, d);
    } else {
        /* COST: the new keys' squares and their sum (a product with public ones: local); once,
         * the prompt's alone */
        uint32_t nst = !own           ? OP_NONE
                       : once && !pre ? opb_shared(&b, "cmp.norm", OPT_CACHE, Hkv, v->max_len, 1)
                                      : compose_key_norms(&b, Hkv, d, v->max_len, pre ? kv_len : 1,
                                                          pre ? 0 : kv_len);
        tol = compose_keynorm_page_tol(d, S, norm_max(s, lead, c0, c1, 0));
        if (now && own)
            row = compose_keynorm_pages(&b, nst, Hkv, c0, c1, S);
    }
    if (now && carry && !own) /* its own pages by its leader's one-hot rows, carried */
        page_gather_carry(&b, "cmp", compose_lead_state(&b, lead, "cmp.lead_oh", Hkv, k, nu),
                          compose_lead_state(&b, lead, "cmp.lead_row", Hkv, 1, nu), H, Hkv, c0, u1,
                          k, S, d, c1, kv_len, tol, !pre, ml);
    else if (now && carry) { /* at the prompt the decode steps name it */
        uint32_t oh =
            page_select_carry(&b, "cmp", row, H, Hkv, c0, u1, k, S, d, c1, kv_len, tol, !pre, ml);
        if (group)
            compose_lead_put(&b, oh, row, Hkv, k, nu);
    } else if (now)
        compose_page_select(&b, lead, group, row, H, Hkv, c0, u1, k, S, d, c1, kv_len, tol);
    else if (sel && !pre)
        page_select_kept(&b, "cmp", H, Hkv, c0, u1, k, S, d, c1, kv_len, tol, ml);
    if (bst != OP_NONE && !pre)
        page_bounds_upkeep(&b, "cmp", bst, Hkv, kv_len, S, d, s->max_pages);
    return policy_emit_done(&b, s->sl->name, e);
}
