/* cluster.h — what MPCache (policy_mpcache.c) and a composition's cluster blocks
 * (compose_cluster.c) compute alike: the static look-once vote of the prompt and its kept set,
 * the clusters' α-bound score, the two-level choice of clusters and the kept rows, and the ops
 * both emit (mpcache_ops.h) from the kept counts. Each keeps its own K' and cluster bounds. */
#ifndef MPCSIM_CLUSTER_H
#define MPCSIM_CLUSTER_H

#include <stdint.h>

#include "mpcache_ops.h"
#include "policy.h"

/* mpcache_shape.static_mode's values */
enum { CLUSTER_THRESHOLD, CLUSTER_TOPK, CLUSTER_NONE };

/* The static vote of a prompt row o (a row of the window, its attention o->att) at layer
 * o->layer: `threshold` adds each column's head sum into colsum (POLICY_SPAN_MAX × (P + 1),
 * slot pos % POLICY_SPAN_MAX; terms in head order) and, once the last KV head's rows are in,
 * marks pass ([L][P]) where the head mean reaches thr; `topk` adds the rows into vote
 * ([L][Hkv][P]); `none` votes nothing. */
void cluster_vote(int mode, double thr, uint8_t *pass, double *colsum, float *vote,
                  const policy_env *v, const policy_obs *o);
/* The static set of (layer l, KV head g) into work (sorted positions): the whole prompt when
 * all, else the positions that passed, or the topk of ratio·P votes. Its count; UINT32_MAX:
 * out of memory. */
uint32_t cluster_static_set(int mode, int all, double ratio, const uint8_t *pass, const float *vote,
                            const policy_env *v, uint32_t l, uint32_t g, uint32_t *work);
/* The keys of prompt position j (kbuf: n_kv_heads × head_dim) for the KV heads whose static set
 * holds it (in[g·P + j]); nonzero when the trace cannot give them. */
int cluster_read_keys(const policy_env *v, uint32_t l, uint32_t j, const uint8_t *in, float *kbuf);

/* The summed queries of KV head g's G query heads (q: n_heads × d) into qs (d). */
void cluster_group_query(const float *q, uint32_t g, uint32_t G, uint32_t d, float *qs);
/* The α-bound score Σ_i qs_i·(α·max_i + (1−α)·min_i) of bounds (mx, mn), merged with (mx2, mn2)
 * when given; channels in order, in float. */
float cluster_bound_score(double alpha, uint32_t d, const float *qs, const float *mx,
                          const float *mn, const float *mx2, const float *mn2);
/* Level 1: of the G1 parents scored c1, the top floor(G1·ratio1), the first and, when partial,
 * the last; their clusters (2c, 2c + 1 < G2) into cand, in order. mark: G1 bytes of scratch,
 * work: G1 uint32. Returns the candidates' count. */
uint32_t cluster_parents(const float *c1, uint32_t G1, uint32_t G2, double ratio1, int partial,
                         uint32_t *cand, uint32_t *work, uint8_t *mark);
/* Level 2: of the nc candidate clusters (cand) scored c2, the top floor(G2·ratio2), then the
 * first and, when partial, the last; marks in row the positions idx[t] of their entries (n in
 * K', clusters of s2). sel: G2 + 2 uint32, work: G2 uint32. */
void cluster_keep(const float *c2, const uint32_t *cand, uint32_t nc, uint32_t G2, double ratio2,
                  int partial, uint32_t s2, const uint32_t *idx, uint32_t n, uint32_t *sel,
                  uint32_t *work, uint8_t *row);
/* The entries of a K' (positions idx, n of them) before kv_len. */
uint32_t cluster_entries(const uint32_t *idx, uint32_t n, uint32_t kv_len);

/* The ops of (phase, layer) for a K' of n entries (decode) or of the static counts stat
 * (prefill: [Hkv] of this layer): at the prompt the static block's (`threshold` on shares, or
 * `topk`'s estimate: window vote sums, the top-k, the compaction) and the cluster bounds; at a
 * decode step the upkeep, the two top-k, the gather and the mask (after a threshold prompt the
 * first step begins with the compaction). ids: [L] the step's ops per layer; name: the policy's,
 * for errors. */
int cluster_emit(op_program *prog, const mpcache_shape *sh, int phase, uint32_t layer,
                 uint32_t kv_len, uint32_t prompt_len, const uint32_t *stat, uint32_t n,
                 mpcache_ids *ids, const char *name, errbuf *e);
/* Whether decode position pos begins with the compaction of a threshold prompt. */
int cluster_one_time(const mpcache_shape *sh, uint32_t n_layers, uint32_t prompt_len, uint32_t pos);

#endif
