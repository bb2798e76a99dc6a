/* secinf.h — secure inference of a llama-family checkpoint (stories260K) on the real backend.
 *
 * The client (P0) secret-shares its tokens as one-hot rows, the model owner (P1) shares every
 * weight once at setup (semi2k also opens each weight's beaver mask once), every step is the
 * lowering's op program (models/lower.c) executed on secret shares (protocols/backend/mpc_run.c), the
 * logits are revealed to the client only, and the KV cache stays secret state between steps.
 * The client picks greedy tokens from its revealed logits and inputs them; the other parties
 * learn only shapes.
 *
 * A step list: one prefill program of `prefill` tokens, then every further given token as its
 * own decode step (teacher forcing), then `n_gen` greedy decode steps.
 *
 * A policy applied inside MPC, two ways:
 *   - selection on shares (secinf_opts.spol, sim/policy/secpol.h): the policy's selection ops are part
 *     of each step's program and run on secret shares; the parties learn the public kept counts
 *     only, and the secret cache is carried between steps in the selected (secret) order. H2O;
 *     MPCache with static `threshold` (the prompt reveals each layer's kept count) or `none`
 *     (its tables and cluster bounds carried, its selection spliced between each layer's query
 *     and attention).
 *   - keep masks (secinf_opts.keep: which cached positions each layer and KV head attends to at
 *     each decode position), public: the kept entries are moved to the front of each head's
 *     cache by a local re-layout of the shares. Right for a policy whose kept set is a public
 *     function of positions (StreamingLLM: secinf_public_keep); for any other policy the masks
 *     come from its plaintext replay (secinf_policy_replay), which a deployment cannot do.
 * Either way the step is lowered with the public kept counts and its attention reads exactly
 * the kept entries plus the new one. */
#ifndef MPCSIM_SECINF_H
#define MPCSIM_SECINF_H

#include <stdint.h>

#include "models/llama.h"
#include "models/model.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/program/op.h"
#include "protocols/program/proto.h"
#include "sim/policy/secpol.h"

/* Keep masks of a policy run: keep[((pos·L + l)·Hkv + g)·max_len + j] = 1 if layer l, KV head
 * g attends to cached position j < pos at decode position pos (from ≤ pos < max_len); positions
 * before `from` attend to everything. */
typedef struct secinf_keep {
    uint32_t from, max_len;
    uint32_t n_layers, n_kv_heads;
    uint8_t *keep;
} secinf_keep;

/* A policy whose selection runs on shares (sim/policy/secpol.h). */
typedef enum secinf_spol_kind { SECINF_SPOL_NONE, SECINF_SPOL_H2O, SECINF_SPOL_MPCACHE } secinf_spol_kind;
typedef struct secinf_spol {
    int kind;                /* secinf_spol_kind */
    uint32_t heavy, recent;  /* H2O's budgets */
    mpcache_shape mpc;           /* MPCache's parameters (static none or threshold) */
    uint32_t *static_count;  /* MPCache threshold: [n_layers] the kept counts the prompt's
                              * program revealed, filled by each node (its own copy) and by
                              * secinf_collect for the caller; allocated by secinf_spol_of,
                              * freed by secinf_spol_free */
} secinf_spol;
void secinf_spol_free(secinf_spol *sp);

typedef struct secinf_opts {
    const model_cfg *model;
    const llama *weights;   /* the model owner's weights (read at P1 only) */
    proto_cfg cfg;          /* protocol and fixed-point parameters */
    const int *tokens;      /* prompt, then teacher-forced tokens */
    uint32_t n_tokens;
    uint32_t prefill;       /* tokens in the first (prefill) program, 1 ≤ prefill ≤ n_tokens */
    uint32_t n_gen;         /* greedy tokens generated after the given ones */
    const secinf_keep *keep;/* NULL: full cache (or spol) */
    secinf_spol spol;       /* kind SECINF_SPOL_NONE: none (zero-initialized) */
    int audit;              /* validation instrumentation, not part of the protocol: after each
                             * step's program (outside every op's counters and the step's time),
                             * the selection one-hots and candidate scores are opened and P0
                             * reports them (secinf_result.audit) */
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
    double **audit;         /* per step, with opts.audit: per selecting layer, the one-hot
                             * values then the candidates' scores (shapes: secpol.h) */
    uint32_t *n_audit;      /* per step: values in audit[step] */
    uint32_t *static_count; /* MPCache threshold: opts.spol.static_count, filled from P0 */
    uint32_t n_static;
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

/* Keep masks of a policy whose kept set is a public function of positions (no observe():
 * StreamingLLM, full): its select() at every decode position, nothing observed. */
int secinf_public_keep(const model_cfg *m, const char *policy, const char *const *params,
                       size_t n_params, uint32_t n, uint32_t prompt, secinf_keep *k, errbuf *e);

/* How a policy runs inside MPC: SECINF_SPOL_H2O or SECINF_SPOL_MPCACHE (static threshold or
 * none)
 * (selection on shares; budgets or parameters filled), or
 * SECINF_SPOL_NONE with *is_public = 1 when its kept set is public (secinf_public_keep), 0 when
 * it has no selection on shares. */
int secinf_spol_of(const model_cfg *m, const char *policy, const char *const *params,
                   size_t n_params, uint32_t prompt, uint32_t n, secinf_spol *sp, int *is_public,
                   errbuf *e);

/* The secure selection against the plaintext replay's keep masks (opts.audit run, teacher
 * forced); the replay's scores are recomputed on the float model under those masks. */
typedef struct secinf_sel {
    uint32_t prefill_sets, prefill_same; /* (layer, KV head) heavy sets chosen at the prompt */
    uint32_t kept_sets, kept_same;       /* (decode position, layer, KV head) kept sets */
    uint32_t evictions, evict_same;      /* decode evictions with a later position to show them */
    uint32_t separated, separated_same;  /* selections (prompt sets, evictions from the same
                                          * candidates) whose secure scores separate the chosen
                                          * from the rest by more than tie_bound, and of them
                                          * those equal to the replay's */
    double score_err;                    /* largest |secure − replay| score of a candidate
                                          * (kept sets equal so far: the same entries) */
    uint32_t differ_same_cand;           /* differing selections from the same candidates */
    uint32_t near_ties;                  /* … of them within 2·score_err on the replay's own
                                          * scores (fixed-point error can swap them) */
    uint32_t diverged;                   /* differing evictions after the kept sets differed */
    double max_margin;                   /* largest replay margin of a differing selection from
                                          * the same candidates */
} secinf_sel;
/* tie_bound < 0: twice the measured score error (a secure margin above it implies the replay's
 * order). */
int secinf_sel_compare(const secinf_opts *o, const secinf_result *r, const secinf_keep *plain,
                       double tie_bound, secinf_sel *out, errbuf *e);

/* MPCache's secure selection against the replay's (opts.audit run, teacher forced): per decode
 * position, layer and KV head the attended set (the chosen 16-clusters' entries) from the
 * opened one-hots, against the replay's keep mask; each top-k's secure margin (its k-th score
 * minus the next, scores in the session's units: q/√d · bound). */
typedef struct secinf_mpc_sel {
    uint32_t sets, same;        /* kept sets compared, equal */
    uint32_t topks;             /* top-k selections run on shares */
    double min_margin;          /* smallest secure margin of a top-k */
    double max_diff_margin;     /* largest smallest-margin of a differing set's top-ks */
    uint32_t first_differ;      /* the first decode position with a differing set (UINT32_MAX:
                                 * none) */
    uint32_t first_layer;       /* … its layer, and its top-ks' smallest secure margin */
    double first_margin;
    double score_err;           /* largest |secure − replay| top-k score where the sets agree (the
                                 * replay's scores recomputed on the float model under its keep
                                 * masks, with the policy model's own query) */
    uint32_t differ, near_ties; /* differing sets; of them those whose replay margin (its own k-th
                                 * score minus the next, at either level) is within 2·score_err */
    double rep_margin;          /* the largest replay margin of a differing set */
} secinf_mpc_sel;
int secinf_mpc_compare(const secinf_opts *o, const secinf_result *r, const secinf_keep *plain,
                       secinf_mpc_sel *out, errbuf *e);

/* Accuracy of secure logits against reference logits over n positions. */
typedef struct secinf_acc {
    uint32_t n, top1_agree;
    double max_abs, mean_abs; /* over all n × vocab logits */
    double miss_gap;          /* largest reference margin of a disagreement: ref[ref's top-1] -
                               * ref[secure top-1] (a near tie when below 2·max_abs) */
} secinf_acc;
void secinf_compare(const double *mpc, const float *ref, uint32_t n, uint32_t vocab, secinf_acc *a);

#endif
