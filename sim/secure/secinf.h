/* secinf.h — secure inference of a llama-family checkpoint (stories260K) on the real backend.
 *
 * The client (P0) secret-shares its tokens as one-hot rows, the model owner (P1) shares every
 * weight once at setup (semi2k also opens each weight's beaver mask once), every step is the
 * lowering's op program (models/lower.c) executed on secret shares (protocols/backend/mpc_run.c),
 * the logits are revealed to the client only, and the KV cache stays secret state between steps.
 * The client picks greedy tokens from its revealed logits and inputs them; the other parties
 * learn only shapes.
 *
 * A step list: one prefill program of `prefill` tokens, then every further given token as its
 * own decode step (teacher forcing), then `n_gen` greedy decode steps.
 *
 * A policy applied inside MPC, two ways:
 *   - selection on shares (secinf_opts.spol: the policy's slot, sim/policy/secpol.h): the
 *     policy's selection ops are part of each step's program and run on secret shares; the
 *     parties learn the public kept counts only, and the policy's secret state is carried
 *     between steps by the policy's own hooks. The session knows no policy by name.
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

/* A policy whose selection runs on shares: its slot (sim/policy/secpol.h) and configuration. */
typedef struct secinf_spol {
    const secpol_ops *ops; /* NULL: none */
    void *cfg;             /* the slot's configuration (secinf_spol_of); its revealed values
                            * (secpol_ops.revealed) are filled by each node (its own copy)
                            * and by secinf_collect for the caller */
    char why[200];         /* ops NULL from secinf_spol_of: why not on shares ("": not known) */
} secinf_spol;
void secinf_spol_free(secinf_spol *sp);

typedef struct secinf_opts {
    const model_cfg *model;
    const llama *weights; /* the model owner's weights (read at P1 only) */
    proto_cfg cfg;        /* protocol and fixed-point parameters */
    const int *tokens;    /* prompt, then teacher-forced tokens */
    uint32_t n_tokens;
    uint32_t prefill;        /* tokens in the first (prefill) program, 1 ≤ prefill ≤ n_tokens */
    uint32_t n_gen;          /* greedy tokens generated after the given ones */
    const secpol_keep *keep; /* NULL: full cache (or spol) */
    secinf_spol spol;        /* ops NULL: none (zero-initialized) */
    int audit;               /* validation instrumentation, not part of the protocol: after each
                              * step's program (outside every op's counters and the step's time),
                              * the selection one-hots and candidate scores are opened and P0
                              * reports them (secinf_result.audit) */
    uint64_t latency_ns;     /* one-way latency the transport injects */
    int deadline_ms;         /* 0: scaled from the step count */
    int plaintext;           /* 1: no TLS on the loopback session's channels */
} secinf_opts;

/* What one node measured during one step. */
typedef struct secinf_node_step {
    mpc_op_stat setup; /* step 0: weight and input sharing, beaver masks */
    mpc_op_stat *ops;  /* one per op of the step's program */
    uint64_t ns;       /* wall time of the step's ops */
} secinf_node_step;

typedef struct secinf_result {
    uint32_t n_steps, n_nodes, n_parties, vocab;
    double *logits;       /* n_steps × vocab, revealed to P0 (last position of each step) */
    int *tokens;          /* n_steps: the token input at each step (prefill: its last) */
    int *next;            /* n_steps: P0's greedy choice from the step's logits */
    uint32_t *n_ops;      /* per step */
    secinf_node_step *st; /* [step · n_nodes + node] */
    double **audit;       /* per step, with opts.audit: per selecting layer, the one-hot
                           * values then the candidates' scores (shapes: secpol.h) */
    uint32_t *n_audit;    /* per step: values in audit[step] */
    uint32_t *revealed;   /* the selection's revealed values (in opts.spol.cfg), filled from P0 */
    size_t n_revealed;
    double seconds; /* whole session (fork to last node done) */
} secinf_result;

/* The op program of step s (deterministic: every node and the predictor lower the same). */
int secinf_step_program(const secinf_opts *o, uint32_t s, op_program *p, errbuf *e);
uint32_t secinf_n_steps(const secinf_opts *o);
/* The session's public facts as a selection on shares sees them, and what the audit opened. */
secpol_run secinf_public(const secinf_opts *o);
secpol_opened secinf_opened(const secinf_result *r);

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
                         const char *const *params, size_t n_params, const int *tokens, uint32_t n,
                         uint32_t prompt, secpol_keep *k, float *logits, errbuf *e);

/* Keep masks of a policy whose kept set is a public function of positions (no observe():
 * StreamingLLM, full): its select() at every decode position, nothing observed. */
int secinf_public_keep(const model_cfg *m, const char *policy, const char *const *params,
                       size_t n_params, uint32_t n, uint32_t prompt, secpol_keep *k, errbuf *e);

/* How a policy runs inside MPC: its selection on shares (sp->ops, the policy's slot, and its
 * configuration from the parameters), or sp->ops NULL with *is_public = 1 when its kept set is
 * public (secinf_public_keep), 0 when it has no selection on shares for these parameters. */
int secinf_spol_of(const model_cfg *m, const char *policy, const char *const *params,
                   size_t n_params, uint32_t prompt, uint32_t n, secinf_spol *sp, int *is_public,
                   errbuf *e);

#endif
