/* serve.h — the serving simulation: MPC parties serving a multi-user request workload.
 *
 * Requests arrive (workload.h) and wait in a queue; the scheduler admits them, up to a batch
 * limit of running requests, FCFS or longest-prefix-match first (LPM, SGLang's earlier
 * default, the ordering PROMPTPEEK exploits). At admission the KV sharing policy
 * (kvshare.h) says how much of the prompt's KV is reused. The parties then run iterations
 * (Orca/vLLM iteration-level batching):
 *   - without chunked prefill, an iteration prefills one admitted request's uncached tokens
 *     (prefill first, as vLLM), or, when no prefill is pending, decodes one token for every
 *     running request as one batch;
 *   - with chunked prefill (Sarathi), an iteration decodes the running batch and prefills up
 *     to `chunk` tokens of the admitted requests, in admission order; the two run one after
 *     the other (independent MPC work is serialized unless the protocol overlaps it).
 * The prefill produces the first output token (TTFT = first token − arrival); a request
 * finishes after decode_len tokens and releases the cache units it holds.
 *
 * Every step is costed through a serve_coster (stepcost_get behind it, memoized), with token
 * counts and KV lengths rounded up to cost_bucket tokens: MPC shapes are public, so a server
 * pads them to buckets anyway, and the bucket bounds the error: a step is costed for at most
 * bucket−1 more new tokens and bucket−1 more cached tokens than it has. A decode batch is
 * costed at its longest KV length (padded). Time is integer nanoseconds; events are ordered by
 * (time, seq), so a run is bit-for-bit reproducible. */
#ifndef MPCSIM_SERVE_H
#define MPCSIM_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "kvshare.h"
#include "sim/engine/runcfg.h"
#include "sim/engine/stepcost.h"
#include "workload.h"

/* What one step costs. */
typedef struct serve_coster {
    void *ctx;
    /* PHASE_PREFILL: n_tokens new tokens of one sequence on top of kv_len cached ones;
     * PHASE_DECODE: one token for each of batch sequences, the longest with kv_len cached. */
    int (*step)(void *ctx, int phase, uint32_t n_tokens, uint32_t kv_len, uint32_t batch,
                step_figures *out, errbuf *e);
    /* RoPE re-rotation of the keys of n_tokens reused tokens moved to another position. */
    int (*rerotate)(void *ctx, uint32_t n_tokens, step_figures *out, errbuf *e);
} serve_coster;

/* The coster of a resolved run: stepcost_get per batch size (one stepcost per size, opened
 * when first used), re-rotation from the run's model, protocol, network and machine. */
typedef struct serve_stepcoster serve_stepcoster;
int serve_stepcoster_open(const run_cfg *cfg, uint32_t max_batch, serve_stepcoster **out,
                          serve_coster *coster, errbuf *e);
void serve_stepcoster_close(serve_stepcoster *s);
/* The cost of re-rotating n_tokens reused keys (all layers) to new positions: one ROPE op
 * costed by the run's protocol and simulated on its network. */
int serve_rerotate_cost(const run_cfg *cfg, uint32_t n_tokens, step_figures *out, errbuf *e);
/* KV cache bytes one party holds per cached token (K and V, every layer, its shares). */
uint64_t serve_kv_bytes_per_token(const run_cfg *cfg);

typedef enum { SRV_FCFS, SRV_LPM } serve_sched;

typedef struct serve_params {
    uint32_t batch_limit; /* running requests (8) */
    uint32_t chunk;       /* chunked prefill: tokens per iteration; 0 = off */
    int scheduler;        /* serve_sched */
    uint32_t cost_bucket; /* >= 1; 16 */
    kvs_params share;
    uint64_t kv_bytes_per_token; /* per party, for the cache memory figure */
} serve_params;

void serve_params_default(serve_params *p);
const char *serve_sched_name(int s);
int serve_sched_from_name(const char *s);

/* One request's outcome. */
typedef struct serve_req_out {
    uint64_t arrival_ns, admit_ns, first_ns, finish_ns;
    uint32_t tenant, user;
    uint32_t prompt, hit, shifted, decode;
    uint32_t order; /* rank of its first token among all requests (0 = first) */
} serve_req_out;

typedef struct serve_result {
    serve_req_out *req; /* (n) in workload order */
    size_t n;
    double ttft_ms[4]; /* p50, p90, p99 (nearest rank), mean */
    double tpot_ms[2]; /* mean, p50 over requests with decode_len > 1 */
    double throughput_tok_s, throughput_req_s;
    uint64_t makespan_ns;                  /* first arrival to last finish */
    double token_hit_rate;                 /* reused prompt tokens / prompt tokens */
    double request_hit_rate;               /* requests that reused any token / requests */
    uint64_t bytes, rounds, offline_bytes; /* every step, online bytes summed over parties */
    int64_t bytes_saved, rounds_saved;     /* prefill without sharing − prefill with it */
    uint64_t rerotate_bytes, rerotate_rounds, rerotate_tokens;
    uint64_t cache_peak_tokens, evicted_tokens;
    double cache_peak_bytes; /* per party */
    uint64_t steps, cost_calls, events;
} serve_result;

int serve_run(const serve_params *p, const workload *w, const serve_coster *c, serve_result *res,
              errbuf *e);
void serve_result_free(serve_result *r);

#endif
