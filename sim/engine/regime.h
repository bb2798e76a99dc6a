/* regime.h — which resource bounds a step: local compute, the links' bandwidth, or the rounds'
 * latency. Computed from the step's own simulation, not from a rule of thumb: the critical
 * path splits the latency into compute and communication (simulate.h), and running the same
 * costed program once more with every link's latency set to 0 splits the communication into
 * the part the latency adds and the part serialization takes. */
#ifndef MPCSIM_REGIME_H
#define MPCSIM_REGIME_H

#include "stepcost.h"

enum { REGIME_COMPUTE, REGIME_BANDWIDTH, REGIME_ROUNDS, REGIME_N };

typedef struct step_regime {
    double total_s;         /* the step's latency */
    double share[REGIME_N]; /* compute, serialization, latency: fractions of total_s, sum 1 */
    int bound;              /* the largest share */
} step_regime;

/* "compute-bound", "bandwidth-bound", "round-bound" */
const char *regime_name(int bound);

/* The regime of a costed program (prog, log as step_simulate left them) on env's network and
 * machine. */
int regime_of(const step_env *env, const op_program *prog, const cost_log *log, step_regime *out,
              errbuf *e);

/* The reference step `mpcsim list networks` and the docs classify: one llama-2-7b decode step
 * at a 4096-token KV cache, the protocol's defaults, the given network and machine. */
#define REGIME_REF_MODEL "llama-2-7b"
#define REGIME_REF_KV 4096u
int regime_reference(const char *protocol, const net_cfg *net, const machine_profile *mach,
                     step_regime *out, errbuf *e);

#endif
