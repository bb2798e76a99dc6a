/* pcheck.h — `mpcsim policy check`: a policy's MPC cost against its selection.
 *
 * A policy's emit_cost states the ops its selection costs. A policy whose emit_cost takes its
 * operands from mpcsim (pcheck_input: the cached [K | V] rows, the new keys, the query) and
 * names the rows its decode selection gathers (pcheck_selection) can be checked: pcheck_run
 * drives it over a trace as the replay does, runs every program its emit_cost builds on the
 * plain engine (eng_plain.h) with those operands bound to the trace's values and its own state
 * tensors (OPT_CACHE) carried from program to program by name, and compares the cached entries
 * the ops gathered, plus those outside the candidate range, with select()'s keep mask at every
 * layer, KV head and decode step; where the ops broke a tie of a choice the policy carries
 * into later ones otherwise (policy_ops.choice), the policy adopts the ops' choice
 * (policy_ops.adopt) and the comparison continues from it. In a run (no check active) the same
 * calls only add the tensors, so the cost path is the checked program itself. */
#ifndef MPCSIM_PCHECK_H
#define MPCSIM_PCHECK_H

#include <stdint.h>

#include "policy.h"

struct trace;

/* What one emit_cost call declared: its operands (tensor ids and PCHECK_IN_*) and its named
 * selection (pcheck_selection's arguments). */
#define PCHECK_DECL_MAX 16
typedef struct pcheck_decl {
    size_t n_in;
    uint32_t in_t[PCHECK_DECL_MAX];
    int in_what[PCHECK_DECL_MAX];
    int has_sel;
    uint32_t sel_t, sel_m, sel_r0, sel_r1, sel_score;
    double sel_tol;
    int has_bias;       /* pcheck_selection_bias named one */
    uint32_t sel_bias;  /* its tensor */
    int has_stage;      /* pcheck_selection_stage named one */
    uint32_t sel_stage; /* its tensor */
    int has_thr;        /* pcheck_selection_threshold named one */
    double sel_thr;     /* its threshold */
} pcheck_decl;

/* p's emit_cost for (phase, layer, kv_len) into prog, with what it declared in *io (the
 * secure form of a selection from its emitted ops: secpol_emit.c). */
int pcheck_emit(const policy_ops *p, void *st, int phase, uint32_t layer, uint32_t kv_len,
                const uint32_t *kept, op_program *prog, pcheck_decl *io, errbuf *e);
/* The value of a public tensor of a policy's ops, raw ring integers: a column of ones ("ones",
 * "<x>_ones"), zeros ("<x>_zero"), an upper triangle of ones ("<x>_tri": row r, column c
 * is 1 when r ≤ c; a one-hot row times it is its prefix sum), a padding bias ("<x>_pad<K>",
 * "<x>_pad<J>to<K>", pcheck_selection_bias) at the check's fixed point; 0 for any other. */
int pcheck_public_value(const op_tensor *T, uint64_t *x, size_t n);
/* The same at frac fractional bits ("<x>_pad<K>": fixed point). */
int pcheck_public_value_at(const op_tensor *T, int frac, uint64_t *x, size_t n);

/* Operands of emit_cost (the numbers of policy_plugin.h's mpcsim_input). */
enum {
    PCHECK_IN_KV,       /* (Hkv, kv_len, 2·head_dim): the cached [K | V] rows (more rows: the
                         * ones past kv_len empty, a policy's padding to whole pages) */
    PCHECK_IN_KEYS_NEW, /* (Hkv, n, head_dim): the phase's new keys (prefill: 0..P; decode: pos) */
    PCHECK_IN_QUERY,    /* (H, 1, head_dim): the decode step's query */
    PCHECK_IN_N,
    /* Prefill only, for in-tree policies (not a plug-in's mpcsim_input): (H, w, n), the prompt
     * attention the model's prefill computed for its last w queries (positions P − w .. P − 1)
     * over the entries 0..n−1 (0 past a row's causal end) — rows already in secret shares, the
     * attention's own work */
    PCHECK_IN_PROMPT_ATT = PCHECK_IN_N,
    /* (H, head_dim, dim): the layer's output projection W_o, per query head h the transposed
     * block W_o^h (columns h·d .. h·d + d − 1 of the dim × H·d matrix): a weight of the model */
    PCHECK_IN_WO,
    /* Decode only: (Hkv, 1, 2·head_dim), the step's new [K | V] row (position kv_len) */
    PCHECK_IN_KV_NEW,
    /* Decode only: (H, 1, n), the step's attention over the cached entries its selection
     * gathered, in the selection's row order (the slots of a compacted cache), then over the
     * new entry: renormalized over those n, as the attention of the attended rows computes
     * it (a row its score bias takes out, pcheck_selection_bias: none). A step that names no
     * selection attends every cached entry in order. */
    PCHECK_IN_ATT_SLOTS,
    PCHECK_IN_ALL
};

/* The operand what (PCHECK_IN_*) of the emit_cost call b builds for: a tensor "in.<what>"
 * (batch B, rows × cols), bound to the trace's values when a check runs. */
uint32_t pcheck_input(opb *b, int what, uint32_t B, uint32_t rows, uint32_t cols);
/* Names the decode step's selection: rows (Hkv, m, C), computed by ops of this call (or state
 * an op of an earlier call wrote; when this call's ops, or a later call's of the same step,
 * update that state, the rows it held when the step began: the ones the step attends, bound
 * as such to PCHECK_IN_ATT_SLOTS), that gather PCHECK_IN_KV rows (their first C
 * columns) of the candidates [r0, r1); cached entries outside [r0, r1) are attended as public ones.
 * A step that names none keeps every entry. score (OP_NONE: none): the candidates' ranked scores,
 * Hkv × (r1 − r0) values; tol: a score's error bound against select()'s: where the two kept sets
 * differ, the check accepts the difference as ties when the ops' scores of every candidate only one
 * side kept lie within tol of each other (the ops preferred theirs by at most tol). */
void pcheck_selection(opb *b, uint32_t rows, uint32_t m, uint32_t r0, uint32_t r1, uint32_t score,
                      double tol);

/* Names the first stage of the decode step's selection, a set the later stage ranks around
 * (CriticalKV's stage 1): mask, n_kv_heads × n values (n: the candidates 0..n-1 of the
 * policy's choice of stage 1, policy_ops.choice), nonzero where that stage kept the candidate;
 * state an op of an earlier program wrote. Where the kept sets differ, the check accepts the
 * difference when this set is a top-k of stage 1's scores up to ties and the ops' kept set is
 * select()'s after the policy adopted it (policy_ops.adopt). */
void pcheck_selection_stage(opb *b, uint32_t mask);

/* The selection's rows that are padding, not cached entries (a partial page's rows past the
 * cached count), or entries the step attends apart (public ones: sinks, a recent window, in a
 * gathered page): bias, n_heads × m values (head-major, in the selection's row order), is added
 * to the decode step's attention scores of the gathered rows, 0 for a candidate and
 * −PCHECK_PAD_BIAS for the others, so that on shares they are not attended (secpol_emit.c). A
 * public tensor named "<x>_pad<K>" holds that value past its first K elements (per instance),
 * 0 before ("<x>_pad<J>to<K>": 0 for elements [J, K) only), so a product of the selection's
 * one-hot rows with it is the bias (local). */
#define PCHECK_PAD_BIAS 4096.0
void pcheck_selection_bias(opb *b, uint32_t bias);

/* Names the selection a threshold on its scores (kept: a score at least thr): where the two
 * kept sets differ, the check accepts the difference as ties when the ops' score of every
 * candidate only one side kept lies within the selection's tol of thr (the two sides of the
 * comparison rounded apart), whatever the counts. */
void pcheck_selection_threshold(opb *b, double thr);

/* The fractional bits of the fixed point the check in progress runs (a policy's tolerance is
 * in its units); outside a check, the default protocol's. */
int pcheck_frac_bits(void);

typedef struct pcheck_result {
    int ran;          /* 1: every program ran; 0: msg says why not (the cost stays declared) */
    int match;        /* 1: every checked mask equal */
    size_t n_checked; /* (layer, KV head, decode step) masks compared */
    size_t n_chosen;  /* of them, where the ops chose (a selection named, candidates left out) */
    size_t n_ops;     /* ops run on the plain engine */
    size_t n_ties;    /* masks that differed only by ties within the stated tolerance */
    double tie_gap;   /* the largest score gap of those ties */
    size_t n_carried; /* masks whose choice the ops broke otherwise among ties and that the
                       * policy adopted (policy_ops.adopt): ties carried in its state */
    double carry_gap; /* the largest score gap of those, in the choice's units */
    char msg[600];    /* the first mismatch, located, or why the check could not run */
} pcheck_result;

/* Checks policy p with its loaded parameters a over trace t: positions 0..P-1 the prompt,
 * decode steps P..T-1 (T ≤ the trace's tokens). Returns MS_OK with the verdict in *r, or an
 * error (the policy's own callbacks failing, out of memory). */
int pcheck_run(const policy_ops *p, const policy_args *a, struct trace *t, uint32_t P, uint32_t T,
               pcheck_result *r, errbuf *e);
/* pcheck_run over the trace of folder dir (an npy trace: what a policy reads beside it,
 * replay_masks' keep.npy; policy_env.trace_dir), or NULL. */
int pcheck_run_dir(const policy_ops *p, const policy_args *a, struct trace *t, const char *dir,
                   uint32_t P, uint32_t T, pcheck_result *r, errbuf *e);

/* The default trace of a check: stories260K recorded over the data folder's
 * tests/data/tinystories_sample.txt, T tokens, in memory; what: its description. */
int pcheck_default_trace(uint32_t T, struct trace **t, char *what, size_t cap, errbuf *e);
/* pcheck_run of p at its default parameters on the default trace, prompt 32, decode 32. */
int pcheck_default(const policy_ops *p, pcheck_result *r, errbuf *e);

/* How far a policy's MPC cost is known to compute its selection, without running a check:
 * PCOST_PUBLIC, a kept set that is a public function of positions (no observation, no ops);
 * PCOST_SHARES, a selection on secret shares that `validate --policy` compares with select()
 * (policy_ops.secure); PCOST_CHECKED, an in-tree policy whose emit_cost takes its operands and
 * names its selection (pcheck_checked_names; tests/check_pcheck_builtin.c runs pcheck_default
 * on each); PCOST_DECLARED, every other (its emit_cost's ops are stated; only pcheck_run can
 * check them), and a policy not known here (NULL: a plug-in not loaded). */
typedef enum pcheck_cost { PCOST_PUBLIC, PCOST_SHARES, PCOST_DECLARED, PCOST_CHECKED } pcheck_cost;
pcheck_cost pcheck_cost_of(const policy_ops *p);
/* The word a run stores for its policy's cost (results/SCHEMA.md runs.policy_cost): "public",
 * "shares", "checked" (an in-tree PCOST_CHECKED, or a plug-in whose pcheck_default matches:
 * run once per plug-in and process), "derived" (a composition: its blocks' own ops, compared
 * with select() by construction; tests/check_pcheck.c) or "declared". */
const char *pcheck_cost_word(const policy_ops *p);
/* The names of the PCOST_CHECKED in-tree policies, NULL-terminated. */
extern const char *const pcheck_checked_names[];

#endif
