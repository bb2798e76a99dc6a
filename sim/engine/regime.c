/* regime.c — a step's regime from its own simulation (regime.h).
 *
 * With T the step's latency, C its critical-path compute and M = T − C its communication,
 * and T0 the latency of the same costed program with every link's latency 0 (bandwidths,
 * compute and schedule unchanged), the latency's share is L = min(M, max(0, T − T0)) and
 * serialization's M − L: the three shares tile T. The step is bound by the largest. */
#include "regime.h"

#include <string.h>

#include "models/lower.h"

const char *regime_name(int bound)
{
    static const char *const n[REGIME_N] = {"compute-bound", "bandwidth-bound", "round-bound"};
    return bound >= 0 && bound < REGIME_N ? n[bound] : "?";
}

int regime_of(const step_env *env, const op_program *prog, const cost_log *log, step_regime *out,
              errbuf *e)
{
    sim_result a, b;
    int rc = sim_run(env->net, env->mach, prog, log, &env->sim, &a, e);
    if (rc != MS_OK)
        return rc;
    net_cfg zero = *env->net;
    for (int s = 0; s < zero.n_parties; s++)
        for (int d = 0; d < zero.n_parties; d++)
            zero.link[s][d].latency_ns = 0;
    sim_opts so = env->sim;
    so.timeline = NULL;
    if ((rc = sim_run(&zero, env->mach, prog, log, &so, &b, e)) != MS_OK) {
        sim_result_free(&a);
        return rc;
    }
    double T = (double)a.latency_ns, C = (double)a.total.compute_ns, M = T - C;
    double L = T - (double)b.latency_ns;
    L = L < 0 ? 0 : L > M ? M : L;
    memset(out, 0, sizeof *out);
    out->total_s = T * 1e-9;
    if (T > 0) {
        out->share[REGIME_COMPUTE] = C / T;
        out->share[REGIME_ROUNDS] = L / T;
        out->share[REGIME_BANDWIDTH] = (M - L) / T;
    }
    for (int k = 1; k < REGIME_N; k++)
        if (out->share[k] > out->share[out->bound])
            out->bound = k;
    sim_result_free(&a);
    sim_result_free(&b);
    return MS_OK;
}

int regime_reference(const char *protocol, const net_cfg *net, const machine_profile *mach,
                     step_regime *out, errbuf *e)
{
    model_cfg model;
    proto_cfg pcfg;
    const proto *pr = proto_find(protocol);
    if (!pr)
        return err_set(e, MS_ERR_NOTFOUND, "regime: unknown protocol '%s'", protocol);
    int rc = model_load(REGIME_REF_MODEL, &model, e);
    if (rc == MS_OK)
        rc = proto_cfg_default(pr->name, &pcfg, e);
    if (rc != MS_OK)
        return rc;
    net_cfg n = *net;
    if (n.n_parties != pr->n_parties) { /* a preset for this protocol's party count */
        net_link l = net->link[0][1];
        net_uniform(&n, pr->n_parties, l.latency_ns, l.bandwidth_bps);
        n.wire = net->wire;
    }
    lower_opts lo;
    lower_opts_default(&lo);
    lo.phase = PHASE_DECODE;
    lo.n_tokens = 1;
    lo.kv_len = REGIME_REF_KV - 1; /* the new token attends 4096 keys, as `cost --kv 4096` */
    step_env env = {&model, pr, &pcfg, &n, mach, {0}};
    op_program prog;
    cost_log log;
    sim_result res;
    op_program_init(&prog);
    cost_log_init(&log, pr->n_parties);
    rc = step_simulate(&env, &lo, &prog, &log, &res, e);
    if (rc == MS_OK) {
        sim_result_free(&res);
        rc = regime_of(&env, &prog, &log, out, e);
    }
    op_program_free(&prog);
    cost_log_free(&log);
    return rc;
}
