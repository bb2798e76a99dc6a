/* replay.h — policy replay: the trace under an eviction/sparsity policy, step by step.
 *
 * The runner asks, for the prefill and for each decode step, which KV counts each layer and
 * KV head attends to (public), and lets the policy append the MPC ops it costs itself (scores,
 * comparisons, top-k, one-hot gathers) to the step's op program. At the end the replay reports
 * accuracy metrics (attention-mass recall, top-k recall, output error; logit KL, top-1
 * agreement, perplexity delta where the model runs). */
#ifndef MPCSIM_REPLAY_H
#define MPCSIM_REPLAY_H

#include "op.h"
#include "runcfg.h"

typedef struct replay replay;

int replay_open(const run_cfg *cfg, replay **out, errbuf *e);
/* Prefill: appends policy ops for the prefill phase (e.g. SnapKV's scoring) to prog. */
int replay_prefill(replay *r, op_program *prog, errbuf *e);
/* Decode step `step` (0-based) with kv_len entries cached: fills kept[n_layers·n_kv_heads]
 * and appends the policy's own ops to prog. */
int replay_step(replay *r, uint32_t step, uint32_t kv_len, uint32_t *kept, op_program *prog,
                errbuf *e);
/* Adds accuracy metrics to res. */
int replay_metrics(replay *r, run_result *res, errbuf *e);
void replay_close(replay *r);

#endif
