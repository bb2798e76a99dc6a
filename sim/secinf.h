/* secinf.h — secure inference of a llama-family checkpoint (stories260K) on the real backend.
 *
 * The client (P0) secret-shares its tokens as one-hot rows, the model owner (P1) shares every
 * weight once at setup (semi2k also opens each weight's beaver mask once), every step is the
 * lowering's op program (models/lower.c) executed on secret shares (protocols/mpc_run.c), the
 * logits are revealed to the client only, and the KV cache stays secret state between steps.
 * The client picks greedy tokens from its revealed logits and inputs them; the other parties
 * learn only shapes.
 *
 * A step list: one prefill program of `prefill` tokens, then every further given token as its
 * own decode step (teacher forcing), then `n_gen` greedy decode steps.
 *
 * A policy applied inside MPC: keep masks (which cached positions each layer and KV head
 * attends to at each decode position) restrict the secret cache before the step: the kept
 * entries are moved to the front of each head's cache by a local re-layout of the shares, the
 * step is lowered with the public kept counts, and its attention reads exactly those entries
 * plus the new one. For validation the masks come from the plaintext replay of the same policy
 * (secinf_policy_replay); a deployment would compute them on shares with the policy's ops. */
#ifndef MPCSIM_SECINF_H
#define MPCSIM_SECINF_H

#include <stdint.h>

#include "llama.h"
#include "model.h"
#include "mpc_run.h"
#include "op.h"
#include "proto.h"

/* Keep masks of a policy run: keep[((pos·L + l)·Hkv + g)·max_len + j] = 1 if layer l, KV head
 * g attends to cached position j < pos at decode position pos (from ≤ pos < max_len); positions
 * before `from` attend to everything. */
typedef struct secinf_keep {
    uint32_t from, max_len;
    uint32_t n_layers, n_kv_heads;
    uint8_t *keep;
} secinf_keep;

typedef struct secinf_opts {
    const model_cfg *model;
    const llama *weights;   /* the model owner's weights (read at P1 only) */
    proto_cfg cfg;          /* protocol and fixed-point parameters */
    const int *tokens;      /* prompt, then teacher-forced tokens */
    uint32_t n_tokens;
    uint32_t prefill;       /* tokens in the first (prefill) program, 1 ≤ prefill ≤ n_tokens */
    uint32_t n_gen;         /* greedy tokens generated after the given ones */
    const secinf_keep *keep;/* NULL: full cache */
    uint64_t latency_ns;    /* one-way latency the transport injects */
    int deadline_ms;        /* 0: scaled from the step count */
} secinf_opts;

/* What one node measured during one step. */
typedef struct secinf_node_step {
    mpc_op_stat setup;      /* step 0: weight and input sharing, beaver masks */
    mpc_op_stat *ops;       /* one per op of the step's program */
    uint64_t ns;            /* wall time of the step's ops */
} secinf_node_step;

typedef struct secinf_result {
    uint32_t n_steps, n_nodes, n_parties, vocab;
    double *logits;         /* n_steps × vocab, revealed to P0 (last position of each step) */
    int *tokens;            /* n_steps: the token input at each step (prefill: its last) */
    int *next;              /* n_steps: P0's greedy choice from the step's logits */
    uint32_t *n_ops;        /* per step */
    secinf_node_step *st;   /* [step · n_nodes + node] */
    double seconds;         /* whole session (fork to last node done) */
} secinf_result;

/* The op program of step s (deterministic: every node and the predictor lower the same). */
int secinf_step_program(const secinf_opts *o, uint32_t s, op_program *p, errbuf *e);
uint32_t secinf_n_steps(const secinf_opts *o);

/* Runs the session on loopback (parties + dealer forked) and collects the result. */
int secinf_run(const secinf_opts *o, secinf_result *r, errbuf *e);

/* For launchers of one's own (network namespaces, hosts): the node function (arg = the
 * secinf_opts), the result's allocation before the launch, and the nodes' reports after it. */
int secinf_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err);
int secinf_prepare(const secinf_opts *o, secinf_result *r, errbuf *e);
int secinf_collect(secinf_result *r, const mpc_node_result *nr, int nodes, errbuf *e);
void secinf_result_free(secinf_result *r);

/* The plaintext replay of a policy on the float model, teacher-forced on tokens[0..n) with the
 * first `prompt` positions as the prompt: records the keep masks it chose (k->keep, allocated)
 * and the float logits under the policy (logits: n × vocab, may be NULL). params: "key=value"
 * strings (n_params). */
int secinf_policy_replay(const model_cfg *m, llama *ref, const char *policy,
                         const char *const *params, size_t n_params, const int *tokens,
                         uint32_t n, uint32_t prompt, secinf_keep *k, float *logits, errbuf *e);
void secinf_keep_free(secinf_keep *k);

/* Accuracy of secure logits against reference logits over n positions. */
typedef struct secinf_acc {
    uint32_t n, top1_agree;
    double max_abs, mean_abs; /* over all n × vocab logits */
    double miss_gap;          /* largest reference margin of a disagreement: ref[ref's top-1] -
                               * ref[secure top-1] (a near tie when below 2·max_abs) */
} secinf_acc;
void secinf_compare(const double *mpc, const float *ref, uint32_t n, uint32_t vocab, secinf_acc *a);

#endif
