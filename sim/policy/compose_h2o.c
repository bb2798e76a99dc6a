/* compose_h2o.c — a composition of H2O's shape on secret shares: H2O's secure session
 * (policy_h2o_secure.c, h2o_ops.h) fed with the composition's budgets, as the cluster blocks
 * run MPCache's (compose_cluster.c). The blocks of h2o.yaml select what H2O selects: at the
 * prompt the top `heavy` of the candidates before the recent window by their accumulated
 * attention, at each step the one candidate of least score evicted for good; the session
 * runs H2O's own ops on them. Attention sinks are public rows before the candidates
 * (h2o_shape.sinks): kept and attended as they are, outside the selection. Dense layers
 * (h2o_shape.dense) carry every row and select nothing; the other layers' selections run at
 * once, as the composition's cost path batches them (compose.c cs_emit). The same session runs
 * the accumulated attention one per layer (`share: layer`: h2o_shape.shared, the KV heads'
 * summed scores ranked, as select() sums every head's row) and the newest row per KV head
 * (`accumulate: false`: h2o_shape.last, no score carried); the newest row one per layer is
 * TOVA's shape (compose_tova.c). */
#include <stdio.h>
#include <stdlib.h>

#include "compose_int.h"
#include "h2o_ops.h"
#include "secpol.h"

int compose_h2o_shaped(const cspec *sp)
{
    return sp->score == SC_ATT && !(sp->att_last && sp->share_all) && sp->when == W_STEP &&
           sp->permanent && sp->sel == K_TOPK && sp->lshare <= 1 && !sp->pyramid && !sp->cluster &&
           sp->every <= 1 && sp->page <= 1;
}

/* H2O's shape from the composition's budgets at this prompt; no configuration (the replay's
 * kept sets) where its parameters leave that shape. a->loaded is the composition. */
static int ch_config(const policy_env *env, const policy_args *a, void **cfg, errbuf *e)
{
    *cfg = NULL;
    const policy_ops *p = a->loaded;
    if (!p || policy_compose_slot(p) < 0)
        return err_set(e, MS_ERR_INTERNAL,
                       "an H2O-shaped composition's parameters were not "
                       "loaded");
    void *st = NULL;
    uint32_t sinks = 0, heavy = 0, recent = 0, dense = 0;
    char why[120];
    int rc = p->init(env, a, &st, e);
    int ok = !rc && compose_h2o_budgets(st, &sinks, &heavy, &recent, &dense, why, sizeof why);
    if (st)
        p->fini(st);
    if (rc || !ok)
        return rc;
    const cspec *sp = &((const cslot *)p)->sp; /* a composition's ops are its slot's first */
    h2o_shape *sh = calloc(1, sizeof *sh);
    if (!sh)
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory", p->name);
    *sh = (h2o_shape){.n_heads = env->n_heads,
                      .n_kv_heads = env->n_kv_heads,
                      .head_dim = env->head_dim,
                      .heavy = heavy,
                      .recent = recent,
                      .sinks = sinks,
                      .dense = dense,
                      .shared = sp->share_all,
                      .last = sp->att_last};
    *cfg = sh;
    return MS_OK;
}

static secpol_ops ch_secure;

void compose_h2o_ops(policy_ops *ops)
{
    ch_secure = policy_h2o_secure; /* the same session, the composition's budgets */
    ch_secure.config = ch_config;
    ch_secure.which = " with these parameters (H2O's secure session runs: tokens, one budget "
                      "for every\n#       layer, a layer selecting)";
    ops->secure = &ch_secure;
}
