/* compose_tova.c — a composition of TOVA's shape on secret shares: tova's own emitted ops run
 * in the session (secpol_emit.c) with the composition's budget as tova's cache_size, as
 * compose_h2o.c runs H2O's session for H2O-shaped compositions. The blocks of tova.yaml select
 * what tova selects: one index set per layer from the newest query's attention summed over
 * the heads (the head mean's order), the top k of the prompt at its end, then at every step the
 * one entry of least score among the k kept and the new one evicted for good; the composition's
 * cost runs every layer's eviction in the same rounds, as tova's emit_cost does. Dense layers
 * (`layers: {dense: N}`) are tova's dense_layers: no ops, every entry kept, the other layers'
 * evictions batched, as the composition's cost path batches them (compose.c cs_emit). Sinks
 * and a recent window are tova's sinks and recent: public rows kept beside the chosen ones,
 * the prompt's top-k and each step's arg-min over the candidates between them. */
#include <stdio.h>
#include <stdlib.h>

#include "compose_int.h"
#include "secpol.h"

int compose_tova_shaped(const cspec *sp)
{
    return sp->score == SC_ATT && sp->att_last && sp->when == W_STEP && sp->permanent &&
           sp->sel == K_TOPK && sp->share_all && sp->lshare <= 1 && !sp->pyramid && !sp->cluster &&
           sp->every <= 1 && sp->page <= 1;
}

/* tova's selection on shares with cache_size = the composition's top-k at this prompt; no
 * configuration (the replay's kept sets) where its parameters leave that shape. a->loaded is
 * the composition. */
static int ct_config(const policy_env *env, const policy_args *a, void **cfg, errbuf *e)
{
    *cfg = NULL;
    const policy_ops *p = a->loaded;
    if (!p || policy_compose_slot(p) < 0)
        return err_set(e, MS_ERR_INTERNAL,
                       "a TOVA-shaped composition's parameters were not loaded");
    void *st = NULL;
    uint32_t val[4] = {0};
    char why[120];
    int rc = p->init(env, a, &st, e);
    int ok = !rc && compose_tova_budget(st, &val[0], &val[1], &val[2], &val[3], why, sizeof why);
    if (st)
        p->fini(st);
    if (rc || !ok)
        return rc;
    kv_param kv[4] = {
        {.key = "cache_size"}, {.key = "dense_layers"}, {.key = "sinks"}, {.key = "recent"}};
    for (int i = 0; i < 4; i++)
        snprintf(kv[i].val, sizeof kv[i].val, "%u", val[i]);
    policy_args ta;
    rc = policy_args_load(&policy_tova, kv, 4, NULL, &ta, e);
    return rc ? rc : secpol_emit_config(&policy_tova, "tova", env, &ta, env->max_len, cfg, e);
}

static secpol_ops ct_secure;

void compose_tova_ops(policy_ops *ops)
{
    ct_secure = secpol_emit_ops; /* tova's emitted ops, the composition's budget */
    ct_secure.config = ct_config;
    ct_secure.which = " with these parameters (tova's selection on shares runs: tokens, one "
                      "budget for every\n#       layer, a layer selecting)";
    ops->secure = &ct_secure;
}
