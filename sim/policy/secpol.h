/* secpol.h — KV-cache eviction policies whose selection runs on secret shares.
 *
 * The secure session (sim/secure/secinf.c) computes a policy's selection inside the step's op
 * program, with the same ops the simulator costs: one emitter per policy builds them, with the
 * step's real operands for the secure session and with placeholder operands of the same shapes for
 * the cost path (the policy's emit_cost). Kept counts are public (they set the program's
 * shapes), which entries are kept stays secret (MPCache's security model,
 * ../shared/reference/policies.md §1.8).
 *
 * Each policy with a selection on shares has its own <name>_ops.h (h2o_ops.h, mpcache_ops.h,
 * comet_ops.h): the selection as ops, its configuration and its audit; this header holds only
 * the slot (secpol_ops) and what the selections share. */
#ifndef MPCSIM_SECPOL_H
#define MPCSIM_SECPOL_H

#include <stdint.h>

#include <stdio.h>

#include "models/llama.h"
#include "models/lower.h"
#include "models/model.h"
#include "protocols/backend/mpc_run.h"
#include "protocols/base/err.h"
#include "protocols/program/op.h"
#include "policy.h"

/* ---- the slot: selection on shares (policy_ops.secure) ---------------------------------------
 *
 * A policy whose selection can run inside MPC fills this table in its own file
 * (sim/policy/policy_<name>_secure.c): its selection's ops in each step's program, the secret
 * state it carries between steps on every node, and its audit (validation only). The secure
 * session (sim/secure/secinf.c) drives any such policy through it by these hooks alone.
 *
 * The session's step list: step 0 the prompt's prefill of `prefill` tokens, then one decode step
 * per further token (teacher-forced, then generated). */

/* What the secure session tells a selection: public facts only. */
typedef struct secpol_run {
    const model_cfg *model;
    const int *tokens; /* the prompt, then the teacher-forced tokens */
    uint32_t n_tokens, prefill, n_gen;
} secpol_run;

/* One step: its index, new tokens and the entries cached before it. */
typedef struct secpol_step {
    uint32_t s, t, kv;
} secpol_step;
secpol_step secpol_step_of(const secpol_run *r, uint32_t s);

/* Keep masks of a policy run: keep[((pos·L + l)·Hkv + g)·max_len + j] = 1 if layer l, KV head
 * g attends to cached position j < pos at decode position pos (from ≤ pos < max_len); positions
 * before `from` attend to everything. */
typedef struct secpol_keep {
    uint32_t from, max_len;
    uint32_t n_layers, n_kv_heads;
    uint8_t *keep;
} secpol_keep;
void secpol_keep_free(secpol_keep *k);
/* The mask of (pos, l, g), or NULL outside the recorded positions. */
const uint8_t *secpol_keep_mask(const secpol_keep *k, uint32_t pos, uint32_t l, uint32_t g);

/* What the audit opened to P0 after each step (validation only), and the session's logits. */
typedef struct secpol_opened {
    uint32_t n_steps, vocab;
    double *const *vals; /* per step: the audit tensors' values in their order */
    const uint32_t *n_vals;
    const double *logits; /* n_steps × vocab, P0's */
} secpol_opened;

struct secpol_ops {
    /* Which of the policy's parameters select on shares (for the note when others do not), "". */
    const char *which;
    /* 1: the session carries each layer's KV cache in position order and the step attends all
     * of it (the selection is not of KV entries: Comet's FFN blocks); 0: the selection's own
     * state holds the cache (bind/update). */
    int session_cache;
    /* Optional: the step's lowering options (the FFN's active neurons). */
    void (*lower)(const void *cfg, const secpol_run *r, const secpol_step *st, lower_opts *lo);
    /* Optional: weights of the selection's own (OPT_WEIGHT tensors not in the checkpoint), derived
     * from the model owner's weights w: fills out[0..n) as fixed point at frac bits; 0 if t is
     * not one of them. */
    int (*bind_weight)(const void *cfg, const llama *w, int frac, const op_tensor *t, uint64_t *out,
                       size_t n);
    /* 1: the plaintext replay that the selection is checked against selects with the query of
     * the model it runs in, as the selection on shares does; 0: with the full-cache model's. */
    int own_query;
    /* The selection's configuration from the policy's checked parameters, or *cfg = NULL when
     * these parameters select in plaintext only. */
    int (*config)(const policy_env *env, const policy_args *a, void **cfg, errbuf *e);
    void (*config_free)(void *cfg);
    /* Public values the prompt's program reveals (counts), kept in cfg: every node fills its
     * own copy, and the session copies P0's into the caller's; NULL when there are none. */
    uint32_t *(*revealed)(void *cfg, size_t *n);
    /* The rows layer attends in every KV head at the decode step over kv cached entries, besides
     * the new entry (the lowering's kept count). */
    uint32_t (*rows)(const void *cfg, const secpol_run *r, uint32_t layer, uint32_t kv);
    /* Appends the selection's ops to the lowered step's program (lower.c's tensor names). */
    int (*emit)(const void *cfg, const secpol_run *r, const secpol_step *st, op_program *p,
                errbuf *e);
    /* Public constants of the selection's ops: fills out[0..n) (raw ring integers at frac
     * fraction bits); 0 if t is not one of them. */
    int (*bind_public)(const void *cfg, const secpol_run *r, const secpol_step *st, int frac,
                       const op_tensor *t, uint64_t *out, size_t n);
    /* One node's secret state between steps (cfg: the node's own copy, for its revealed
     * values). */
    int (*node_new)(void *cfg, const secpol_run *r, void **state, errbuf *e);
    void (*node_free)(void *state, eng *e);
    /* Before a step's ops: the carried state into the program's tensors. */
    int (*bind)(void *state, eng *e, const op_program *p, mpc_program_run *run,
                const secpol_step *st, errbuf *err);
    /* After the step's ops: the next state (net: for what the step reveals). */
    int (*update)(void *state, eng *e, mpc_net *net, const op_program *p, mpc_program_run *run,
                  const secpol_step *st, errbuf *err);
    /* Validation instrumentation, outside the protocol: the i-th tensor opened after a step's
     * program (name, fixed-point score or integer); 0 past the last. */
    int (*audit_tensor)(const void *cfg, const secpol_run *r, const secpol_step *st, size_t i,
                        char name[48], int *is_score);
    /* Validation: the opened selections against the plaintext replay's keep masks, as '#' note
     * lines on out. ref: the replay's logits of the steps (n_steps × vocab). */
    int (*audit_note)(const void *cfg, const secpol_run *r, const secpol_opened *opened,
                      const secpol_keep *plain, const float *ref, const char *policy, FILE *out,
                      errbuf *e);
};

/* Helpers of the selections on shares (sim/policy/secpol.c). */

/* z[i] = x[idx[i]] where sel[i], else 0: a local re-layout (a permute and a public 0/1 product). */
int secpol_relayout(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, const uint64_t *sel,
                    size_t n);
/* Columns [col, col+ncol) of a carried state (Hkv, R, F) into rows lead … lead+R-1 of a program
 * tensor (Hkv, rows, ncol), the rest zero: a local re-layout. */
int secpol_rows_in(eng *e, const mpc_val *st, uint32_t Hkv, uint32_t R, uint32_t F, uint32_t col,
                   uint32_t ncol, uint32_t rows, uint32_t lead, mpc_val *z);
/* z (N) with z[i] = src[which[i]][idx[i]] (which[i] ≥ nsrc: 0): local re-layouts summed. */
int secpol_pick(eng *e, mpc_val *z, size_t N, const mpc_val *const *src, int nsrc,
                const uint8_t *which, const uint32_t *idx);
/* Moves ops [from, n_ops) to index at (before the op there; at < 0: an error). */
int secpol_ops_move(op_program *p, long at, size_t from, errbuf *e);
/* The index of the first op of kind writing out, or -1. */
long secpol_find_op(const op_program *p, int kind, uint32_t out);
/* The float model of m from its weights file, for a replay or an audit (what: the messages'
 * prefix). */
int secpol_load_model(const model_cfg *m, const char *what, llama **out, errbuf *e);

/* Shared steps of the selection audits (H2O's, MPCache's). The plaintext side: the float
 * model of o run over o's tokens with hk, *pm set before the first position (hk's callbacks
 * may use it) and freed after the last (*pm NULL). */
int secpol_audit_forward(const secpol_run *o, const llama_hooks *hk, llama **pm, errbuf *e);
/* An attend_mask hook's answer from the replay's keep masks: (l, g)'s kept set at pos, and pos
 * itself; 0 (no mask) where k has none. */
int secpol_keep_attend(const secpol_keep *k, uint32_t l, uint32_t g, uint32_t pos, uint8_t *mask);
/* Whether the distinct positions slot[0..R) are exactly mask's kept set over [0, pos). */
int secpol_same_set(const uint32_t *slot, uint32_t R, const uint8_t *mask, uint32_t pos);

/* The selection on shares of a policy with no table of its own, from the ops its emit_cost
 * builds with its operands and its selection named (secpol_emit.c). */
extern const secpol_ops secpol_emit_ops;
/* Its configuration for policy p (name: as the user named it) with parameters a over n
 * positions: *cfg NULL when p's emit_cost takes no operands (a cost, not a computation); an
 * error "cost declared, no secure selection" when it takes them but names no selection. */
int secpol_emit_config(const policy_ops *p, const char *name, const policy_env *env,
                       const policy_args *a, uint32_t n, void **cfg, errbuf *e);
/* Why p does not select on shares through secpol_emit_ops with these parameters (over n
 * positions), as a clause into why ("its ops read …"); 0 (why "") when it does. */
int secpol_emit_why(const policy_ops *p, const policy_env *env, const policy_args *a, uint32_t n,
                    char *why, size_t cap);
/* Whether p selects on shares through secpol_emit_ops with these parameters. */
int secpol_emit_declares(const policy_ops *p, const policy_env *env, const policy_args *a);

#endif
