/* stepcost.h — the cost of one prefill or decode step, memoized: what the serving simulation
 * asks for every scheduled step. Keyed by (phase, tokens, kv_len, batch); the cost engine and
 * the network simulation run once per distinct key. */
#ifndef MPCSIM_STEPCOST_H
#define MPCSIM_STEPCOST_H

#include <stdint.h>

#include "models/lower.h"
#include "runcfg.h"
#include "simulate.h"

typedef struct stepcost stepcost;

typedef struct step_figures {
    uint64_t latency_ns; /* online latency of the step */
    uint64_t rounds;
    uint64_t bytes;         /* online bytes, all parties */
    uint64_t offline_bytes; /* dealer traffic */
} step_figures;

int stepcost_open(const run_cfg *cfg, stepcost **out, errbuf *e);
/* phase PHASE_PREFILL: n_tokens new tokens on top of kv_len cached ones (chunked prefill or a
 * prefix-cache hit); PHASE_DECODE: n_tokens = 1. */
int stepcost_get(stepcost *s, int phase, uint32_t n_tokens, uint32_t kv_len, step_figures *out,
                 errbuf *e);
void stepcost_close(stepcost *s);

/* What one step is costed and simulated with. */
typedef struct step_env {
    const model_cfg *model;
    const proto *pr;
    const proto_cfg *pcfg;
    const net_cfg *net;
    const machine_profile *mach;
    sim_opts sim;
} step_env;

/* Lowers one step (appending to prog, which may already hold the policy's ops), costs the
 * whole program into log and simulates it into *out (caller frees with sim_result_free). The
 * pipeline every cost figure of the runner, the serving simulation and `mpcsim cost` goes
 * through. */
int step_simulate(const step_env *env, const lower_opts *lo, op_program *prog, cost_log *log,
                  sim_result *out, errbuf *e);
/* step_simulate costing through memo (op costs remembered across steps, proto.h; NULL: none):
 * the same result, faster when the steps share ops. */
int step_simulate_memo(const step_env *env, cost_memo *memo, const lower_opts *lo, op_program *prog,
                       cost_log *log, sim_result *out, errbuf *e);

#endif
