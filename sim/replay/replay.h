/* replay.h — policy replay: the trace under an eviction/sparsity policy, step by step.
 *
 * The runner asks, for the prefill and for each decode step, which KV counts each layer and
 * KV head attends to (public), and lets the policy append the MPC ops it costs itself (scores,
 * comparisons, top-k, one-hot gathers) to the step's op program. At the end the replay reports
 * accuracy metrics (attention-mass recall, top-k recall, output error; logit KL, top-1
 * agreement, perplexity delta where the model runs). */
#ifndef MPCSIM_REPLAY_H
#define MPCSIM_REPLAY_H

#include "protocols/program/op.h"
#include "protocols/base/metric.h"
#include "sim/engine/runcfg.h"

typedef struct replay replay;

int replay_open(const run_cfg *cfg, replay **out, errbuf *e);
/* 1 when the run's replay reads its trace (a trace source, and not the full cache on a
 * synthetic trace, whose metrics hold by construction). */
int replay_reads_trace(const run_cfg *cfg);

/* The attention the replay of cfg computes, counted without running it: the policy is made
 * (init, no trace) and asked what it needs at every position, prompt_rows applied as the replay
 * applies it. att_rows: positions whose attention rows are read (each one a row per layer and
 * query head); att_macs: the multiply-adds of those rows (q·k over the positions before them,
 * head_dim each); prompt_att_rows: how many of the rows are prompt positions; prompt_rows: the
 * run's cap (0: none). Zeros for a run without a trace. For `run --dry-run`'s estimate. */
typedef struct replay_work {
    double att_rows, att_macs, prompt_att_rows;
    uint32_t prompt_rows;
} replay_work;
int replay_estimate(const run_cfg *cfg, replay_work *out, errbuf *e);
/* What the runs of a sweep that read the same trace share (sim/scenario/group.h): the trace,
 * its attention rows computed once per position (trace_share_rows), and of each measured row
 * what the metrics read that is a function of the trace alone (the full row's top-k, the full
 * cache's attention output), computed by the first run that asks. */
typedef struct replay_share replay_share;
int replay_share_open(const run_cfg *cfg, replay_share **out, errbuf *e);
void replay_share_close(replay_share *sh);
/* replay_open on a share the caller opened for cfg (replay_share_open, cfg run_same_trace as
 * the share's) and closes after the replay; NULL: the replay opens its own. */
int replay_open_shared(const run_cfg *cfg, replay_share *shared, replay **out, errbuf *e);
/* Observes the prompt up to position pos (inclusive), as replay_prefill would before its
 * selection; lets several replays of one shared trace walk the prompt together. */
int replay_prompt_upto(replay *r, uint32_t pos, errbuf *e);
/* A group's span (replays rs[0..n) of one share, NULL entries finished): how many prompt
 * positions from p0 its replays can observe together, the share's trace computing each KV
 * head's rows at all of them in one pass (trace_span_att): every replay there either reads
 * rows and is layer-local (policy_ops.layer_local) or reads neither rows nor queries, the same
 * at every position of the span; 1: position by position (replay_prompt_upto). */
uint32_t replay_group_span(replay *const *rs, size_t n, uint32_t p0);
/* Begins the span on the share (once, before its replays' heads). */
int replay_group_span_begin(replay_share *sh, uint32_t p0, uint32_t cnt, errbuf *e);
/* Observes KV head g of layer l at the span's positions, for a replay that reads its rows
 * (heads in order, layers in order); the other replays observe the span with
 * replay_prompt_upto(r, p0 + cnt − 1). */
int replay_group_span_head(replay *r, uint32_t p0, uint32_t cnt, uint32_t l, uint32_t g, errbuf *e);
/* Prefill: appends policy ops for the prefill phase (e.g. SnapKV's scoring) to prog. */
int replay_prefill(replay *r, op_program *prog, errbuf *e);
/* Decode step `step` (0-based) with kv_len entries cached: fills kept[n_layers·n_kv_heads]
 * with the KV entries each layer and KV head attends in MPC (the selection's counts, or the
 * public bound the policy's secure algorithm pads them to: policy_ops.attend) and appends the
 * policy's own ops to prog. */
int replay_step(replay *r, uint32_t step, uint32_t kv_len, uint32_t *kept, op_program *prog,
                errbuf *e);
/* Decode step `step` as replay_step, for a step nobody costs (its kept counts and ops are not
 * read): a stateless selection (policy_ops.stateless_select) is then skipped where no metric
 * reads it, the policy's observation kept. The next replay_step's results are the same. */
int replay_step_idle(replay *r, uint32_t step, uint32_t kv_len, errbuf *e);
/* 1 when replay_step_idle can skip anything at decode step `step` for this policy (a
 * stateless selection, and no one-time work at the step, which the runner must see). */
int replay_idle_ok(const replay *r, uint32_t step);
/* Nonzero: replay_idle_ok is 0 (tests compare the runs with and without idle steps). */
extern int replay_idle_off;
/* Nonzero: prompt positions are observed one at a time even where spans apply (tests compare
 * the two). */
extern int replay_span_off;
/* 1 when the newest step's ops hold one-time work (policy_ops.one_time): it stands for itself
 * only under decode_stride. */
int replay_step_once(const replay *r);
/* 1 when the policy gathers the attended rows into the attention's cache tensors
 * (policy_ops.attend): the lowering sizes the cache by them (lower_opts.attended_cache). */
int replay_attended_cache(const replay *r);
/* The FFN neurons per layer of the step just replayed (prefill or decode; policy_ops.ffn_active)
 * and in *secret whether their pattern is secret; NULL (dense FFN) when the policy has none. */
const uint32_t *replay_ffn_active(const replay *r, int *secret);
/* Reports the accuracy metrics, and the policy's own, to out. */
int replay_metrics(replay *r, const metric_sink *out, errbuf *e);
void replay_close(replay *r);

#endif
