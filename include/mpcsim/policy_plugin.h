/* mpcsim/policy_plugin.h — the public interface of an out-of-tree KV-cache policy plug-in.
 *
 * A plug-in is a shared object (cc -std=c11 -fPIC -shared, this header only: `pkg-config
 * --cflags mpcsim-plugin`) that exports one function, MPCSIM_PLUGIN_ENTRY:
 *
 *     const mpcsim_policy *mpcsim_policy_plugin(const mpcsim_api *api);
 *
 * mpcsim calls it once at load with its function table `api` (keep the pointer: it stays
 * valid for the life of the process) and receives the policy: its name, parameters and
 * callbacks, and the ABI version the plug-in was built against (MPCSIM_PLUGIN_ABI_MAJOR and
 * _MINOR, filled in by MPCSIM_POLICY_HEAD). The load fails, naming the file and both
 * versions, unless the majors are equal and the plug-in's minor is at most mpcsim's: a minor
 * version only appends members at the end of mpcsim_api and mpcsim_policy, a major one changes
 * them. Everything a plug-in calls in mpcsim goes through `api`, so mpcsim need not export its
 * symbols and a plug-in links against nothing of it.
 *
 * The contract is the one the built-in policies follow (sim/policy/policy.h, POLICIES.md):
 * per position pos and layer, in order, the replay calls
 *   prompt positions 0..P-1   observe(pos, layer)
 *   end of the prompt         prefill(), then emit_cost(PREFILL, layer, P) for every layer
 *   decode position pos ≥ P   select(layer, pos, q) → keep mask over the pos cached entries of
 *                             every KV head; emit_cost(DECODE, layer, pos, kept);
 *                             observe(pos, layer) with attention renormalized over the kept
 *                             entries.
 * Kept counts are public; which entries are kept is secret, so the scores, comparisons, top-k
 * and gathers a selection needs are MPC ops the policy appends through the op builder in
 * emit_cost (the ops and their operand conventions: protocols/program/op.h in the source
 * tree). A policy that emits nothing claims its selection is free (public positions).
 *
 * ABI 1.1 adds (a 1.0 plug-in still loads; mpcsim reads none of these from it):
 *   - kv_budget: the plug-in reads it (api->kv_budget; its own budget parameters named in
 *     budget_keys, an error beside it), or names in budget_count one whole parameter that
 *     mpcsim sets to round(F · prompt_len) when the scenario gives kv_budget F;
 *   - check: its rules between parameters, run when the scenario is loaded, errors at the
 *     parameter's file:line:col (api->at);
 *   - inputs and selection: emit_cost takes its operands from mpcsim (api->input: the cached
 *     keys and values, the new keys, the query) and names the rows its selection gathers
 *     (api->selection), so `mpcsim policy check` can run those very ops on the plain engine
 *     over a trace and compare what they gather with select()'s keep mask, and `mpcsim
 *     validate --policy` runs them on secret shares: bound to the secure session's own cached
 *     rows, new keys and query, state tensors (api->shared, MPCSIM_ROLE_CACHE) carried on
 *     shares between steps, the step attending the rows the selection gathers (all 2·head_dim
 *     columns of MPCSIM_IN_KV) and the entries outside its candidates. For that the ops must
 *     depend on public values only (shapes, positions, parameters): the session calls
 *     emit_cost on a state that observed nothing, with every cached entry as kept[g]; a
 *     selection at the prompt, or ops that take no operands, keep the replay's kept sets.
 *
 * ABI 1.2 adds (a 1.0 or 1.1 plug-in still loads):
 *   - selection_bias: a selection in whole pages may take MPCSIM_IN_KV with more rows than are
 *     cached (the rows past kv_len are zero: a partial last page's padding) and gather them;
 *     it names each gathered row's score bias (api->selection_bias: 0 for a cached entry,
 *     −MPCSIM_PAD_BIAS for padding, computed by its own ops), which the secure session adds
 *     to the step's attention scores of those rows before the softmax, so padding gets no
 *     attention, and which `policy check` and the audit of `validate --policy` read to leave
 *     padding out of the kept set. Public tensors (api->shared, MPCSIM_ROLE_PUBLIC) have the
 *     values their names give: "…ones" all ones, "…_pad<K>" 0 for the first K elements of
 *     each instance (rows × cols) and −MPCSIM_PAD_BIAS after (the fixed point's), so the
 *     product of a selection's one-hot rows (n_kv_heads, m, pages) with a public "…_pad<K>"
 *     (1, pages, page), K the cached entries of the pages, is each gathered row's bias
 *     (api->matmul_pub: local), repeated for the G query heads of a KV head.
 *
 * ABI 1.3 adds (a 1.0, 1.1 or 1.2 plug-in still loads):
 *   - choice and adopt: for a choice among near-equal candidates that the policy carries into
 *     later ones (an eviction each step ranking the cache the last one left; a first stage
 *     whose set a second stage ranks around). `mpcsim policy check` runs the ops on the plain
 *     engine, whose fixed point may break such a tie otherwise than select(); where the kept
 *     sets differ, it asks choice for the choice that formed the kept set select() returned
 *     (stage 0) or for the first stage (stage 1, when the decode step named that stage's set
 *     with api->selection_stage): its candidates, the scores it ranked them by, what it kept,
 *     and tol, the error bound of that order on the fixed point. When the ops' choice keeps as
 *     many and the scores of every candidate only one side kept lie within tol of each other,
 *     the check calls adopt with the ops' choice (a second stage reruns around it), select()
 *     again, and compares from there: a tie carried in the policy's state, counted apart.
 *     Without them such a difference is a MISMATCH.
 *
 * Callbacks return 0 on success, or the code api->fail returned after it recorded a message.
 * A plug-in's callbacks may run in several threads at once, each on its own state. */
#ifndef MPCSIM_POLICY_PLUGIN_H
#define MPCSIM_POLICY_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPCSIM_PLUGIN_ABI_MAJOR 1
#define MPCSIM_PLUGIN_ABI_MINOR 3
/* The symbol mpcsim looks up in the shared object. */
#define MPCSIM_PLUGIN_ENTRY "mpcsim_policy_plugin"

/* Opaque handles: mpcsim owns them; a plug-in passes them back through the api. */
typedef struct mpcsim_err mpcsim_err;   /* where a failing callback's message goes */
typedef struct mpcsim_args mpcsim_args; /* a scenario's parameters for this policy */
typedef struct mpcsim_opb mpcsim_opb;   /* an op builder for one phase and layer */

/* A tensor id in the op program under construction; MPCSIM_NONE is none (a failed call). */
#define MPCSIM_NONE UINT32_MAX

/* Op kinds (op.h's OP_*, same numbers; mpcsim checks them at build time). Shapes: EW element-
 * wise on batch × m × n; MM (m × k)·(k × n) per batch instance; ROW row-wise over batch × m rows
 * of n. */
enum mpcsim_op_kind {
    MPCSIM_OP_INPUT,      /* secret-share a party's private tensor (out) */
    MPCSIM_OP_ADD,        /* EW out = in0 + in1 (local) */
    MPCSIM_OP_SUB,        /* EW out = in0 − in1 (local) */
    MPCSIM_OP_ADD_PUB,    /* EW out = in0 + farg, or + public in1 (local) */
    MPCSIM_OP_MUL_PUB,    /* EW out = in0 · farg or · public in1, then truncation */
    MPCSIM_OP_MUL,        /* EW out = in0 · in1, fixed point */
    MPCSIM_OP_SQUARE,     /* EW out = in0², fixed point */
    MPCSIM_OP_MATMUL,     /* MM out = in0 · in1 */
    MPCSIM_OP_TRUNC,      /* EW out = in0 >> iarg */
    MPCSIM_OP_LT,         /* EW out = [in0 < in1] as a 0/1 share */
    MPCSIM_OP_EQ,         /* EW out = [in0 == in1] as a 0/1 share */
    MPCSIM_OP_SELECT,     /* EW out = in0 ? in1 : in2 */
    MPCSIM_OP_A2B,        /* EW arithmetic to boolean share */
    MPCSIM_OP_B2A,        /* EW boolean bit to arithmetic share */
    MPCSIM_OP_MAX,        /* ROW out[b, m] = max over n */
    MPCSIM_OP_ARGMAX,     /* ROW one-hot of the row max */
    MPCSIM_OP_EXP,        /* EW */
    MPCSIM_OP_RECIPROCAL, /* EW */
    MPCSIM_OP_RSQRT,      /* EW */
    MPCSIM_OP_SOFTMAX,    /* ROW; iarg = causal offset or −1 */
    MPCSIM_OP_GELU,       /* EW */
    MPCSIM_OP_SILU,       /* EW */
    MPCSIM_OP_LAYERNORM,  /* ROW; in1 gain, in2 bias */
    MPCSIM_OP_RMSNORM,    /* ROW; in1 gain, farg eps */
    MPCSIM_OP_TOPK,       /* ROW out (batch·m, iarg, n): one-hot rows of the iarg largest */
    MPCSIM_OP_SORT,       /* ROW rows sorted (iarg 1: descending) */
    MPCSIM_OP_ONEHOT,     /* EW one-hot of a secret index in0 over n */
    MPCSIM_OP_GATHER,     /* MM out = one-hot in0 (m × k) · table in1 (k × n) */
    MPCSIM_OP_ROPE,       /* EW rotary embedding */
    MPCSIM_OP_REVEAL,     /* EW open in0 to party iarg (−1: all) */
    MPCSIM_OP_VIEW        /* EW local re-layout (slice, concat, transpose) */
};

/* Op flags (op.h's OPF_*). */
#define MPCSIM_OPF_FIXED_B 0x1u  /* MATMUL: the right operand is reused across steps */
#define MPCSIM_OPF_PUBLIC_B 0x2u /* the right operand is public */
#define MPCSIM_OPF_NO_TRUNC 0x4u /* integer product, no truncation (one-hot, masks) */
#define MPCSIM_OPF_TRANS_B 0x8u  /* the right operand is used transposed */

/* Tensor roles (op.h's op_role). */
enum mpcsim_role {
    MPCSIM_ROLE_TEMP,   /* an intermediate secret value */
    MPCSIM_ROLE_INPUT,  /* the client's private input */
    MPCSIM_ROLE_WEIGHT, /* the model owner's private weights */
    MPCSIM_ROLE_CACHE,  /* secret state carried across steps */
    MPCSIM_ROLE_PUBLIC, /* a public constant */
    MPCSIM_ROLE_OUTPUT  /* a revealed result */
};

/* Operands mpcsim provides to emit_cost (api->input, ABI 1.1), per layer. Shapes: */
enum mpcsim_input {
    MPCSIM_IN_KV,       /* (n_kv_heads, kv_len, 2·head_dim): the cached [K | V] rows 0..kv_len */
    MPCSIM_IN_KEYS_NEW, /* (n_kv_heads, n, head_dim): the keys of the phase's new positions (the
                         * prefill: the prompt's P; a decode step: its own, row kv_len) */
    MPCSIM_IN_QUERY,    /* (n_heads, 1, head_dim): the decode step's query */
    MPCSIM_IN_N
};

/* Phases of emit_cost. */
enum mpcsim_phase { MPCSIM_PHASE_PREFILL, MPCSIM_PHASE_DECODE };

/* What observe() wants at a position (policy.h's POLICY_NEED_*). */
#define MPCSIM_NEED_ATT 0x1u /* the attention rows */
#define MPCSIM_NEED_K 0x2u   /* this position's keys */
#define MPCSIM_NEED_FFN 0x4u /* FFN gate pre-activations */
#define MPCSIM_NEED_WO 0x8u  /* the layer's output projection */
#define MPCSIM_NEED_Q 0x10u  /* the query (and: select() is query-aware) */
#define MPCSIM_NEED_V 0x20u  /* this position's values */

/* Shapes and lengths of the run a policy instance serves. */
typedef struct mpcsim_env {
    uint32_t n_layers, n_heads, n_kv_heads, head_dim, dim, ffn_dim;
    uint32_t prompt_len; /* P */
    uint32_t max_len;    /* P + decode steps */
} mpcsim_env;

/* One (position, layer) as the model computed it; pointers valid during the call only, NULL
 * unless needs() asked for them. */
typedef struct mpcsim_obs {
    uint32_t layer, pos;
    const float *q;   /* n_heads × head_dim */
    const float *k;   /* n_kv_heads × head_dim of this position */
    const float *v;   /* n_kv_heads × head_dim */
    const float *att; /* n_heads × (pos + 1) probabilities (0 on dropped entries) */
    const float *ffn; /* ffn_dim */
    const float *wo;  /* dim × (n_heads · head_dim) */
} mpcsim_obs;

/* A numeric parameter (scenario key) with its default and accepted range. */
typedef struct mpcsim_param {
    const char *key;
    const char *def; /* default as text */
    const char *help;
    double lo, hi;
    int whole; /* 1: a whole number */
} mpcsim_param;

/* A metric of the policy's own, reported at the end of a run. */
typedef struct mpcsim_metric {
    char name[48];
    double value;
    char unit[16];
} mpcsim_metric;

/* mpcsim's functions, for the plug-in (members are only ever appended). */
typedef struct mpcsim_api {
    int abi_major, abi_minor; /* mpcsim's ABI version */
    /* Records a message (printf format) for the failing callback and returns the code it
     * returns. */
    int (*fail)(mpcsim_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    /* A parameter's value (the scenario's, else its default) checked against its range, errors
     * at the scenario's file:line:col. */
    int (*arg_double)(const mpcsim_args *a, const char *key, double *out, mpcsim_err *e);
    int (*arg_u32)(const mpcsim_args *a, const char *key, uint32_t *out, mpcsim_err *e);
    /* The k largest of score[0..n) (ties: the smaller index) written to out in increasing index
     * order; returns the count (min(k, n)). work holds n uint32. */
    size_t (*topk)(const float *score, size_t n, size_t k, uint32_t *out, uint32_t *work);

    /* ---- the op builder (protocols/program/opb.h): each call adds to the program of the
     * emit_cost call it was given; after a failure every call adds nothing and returns
     * MPCSIM_NONE, and emit_cost's caller reports it. Names are per layer and per policy. */
    /* A new tensor nm (batch × rows × cols). */
    uint32_t (*tensor)(mpcsim_opb *b, const char *nm, int role, uint32_t batch, uint32_t rows,
                       uint32_t cols);
    /* The tensor nm if present (state across steps: role MPCSIM_ROLE_CACHE), else a new one. */
    uint32_t (*shared)(mpcsim_opb *b, const char *nm, int role, uint32_t batch, uint32_t rows,
                       uint32_t cols);
    /* Appends op kind (shapes batch, m, k, n; operands in0..in2 or MPCSIM_NONE; result out).
     * Returns out. */
    uint32_t (*op)(mpcsim_opb *b, int kind, uint32_t batch, uint32_t m, uint32_t k, uint32_t n,
                   uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags,
                   int32_t iarg, double farg);
    /* Rows [r0, r0 + n) of each of the B instances of x (B, ≥ r0 + n, C): a public slice. */
    uint32_t (*rows)(mpcsim_opb *b, uint32_t x, uint32_t B, uint32_t r0, uint32_t n, uint32_t C,
                     const char *nm);
    /* Writes x (B, n, C) at row r0 of each instance of out (B, ≥ r0 + n, C). */
    void (*put)(mpcsim_opb *b, uint32_t x, uint32_t out, uint32_t B, uint32_t r0, uint32_t n,
                uint32_t C);
    /* x (B, R, C) → (B, C, R). */
    uint32_t (*transpose)(mpcsim_opb *b, uint32_t x, uint32_t B, uint32_t R, uint32_t C,
                          const char *nm);
    /* out = x (M rows of k) · pub (k × n, public), no truncation. */
    uint32_t (*matmul_pub)(mpcsim_opb *b, uint32_t x, uint32_t pub, uint32_t M, uint32_t k,
                           uint32_t n, uint32_t out);
    /* Column sums of oh (B, k, n): a new tensor nm (B, n, 1). */
    uint32_t (*colsum)(mpcsim_opb *b, uint32_t oh, uint32_t B, uint32_t k, uint32_t n,
                       const char *nm);
    /* Nonzero after a failure. */
    int (*failed)(const mpcsim_opb *b);

    /* ---- ABI 1.1 (read them only when abi_minor ≥ 1) ---- */
    /* The scenario's kv_budget F (0 < F ≤ 1) in *f, or 0 when it gives none. */
    int (*kv_budget)(const mpcsim_args *a, double *f, mpcsim_err *e);
    /* round(F · n), at least 1 and at most n. */
    uint32_t (*budget_entries)(double f, uint32_t n);
    /* The prefix of a message about parameter key: "file:line:col: error: " where the
     * scenario wrote it, else "file: error: ". Returns buf. */
    const char *(*at)(const mpcsim_args *a, const char *key, char *buf, size_t cap);
    /* The operand what (enum mpcsim_input) of this emit_cost call: a tensor of the shape stated
     * there (rows: kv_len or the new positions). */
    uint32_t (*input)(mpcsim_opb *b, int what, uint32_t rows);
    /* Names the decode step's selection: rows (n_kv_heads, m, C) that ops of this call
     * computed as a gather of MPCSIM_IN_KV rows (or a slice of it) of the candidates [r0, r1);
     * the cached entries outside [r0, r1) are attended as public (sinks, a recent window). A
     * decode step that names none keeps every entry. score: the candidates' ranked scores
     * (n_kv_heads × (r1 − r0) values in candidate order), or MPCSIM_NONE; tol: the error bound
     * of a score on the fixed-point engine against select()'s (mpcsim's default fixed point:
     * 18 fractional bits), so that two candidates whose scores differ by at most tol are a tie
     * either side may break its own way. */
    void (*selection)(mpcsim_opb *b, uint32_t rows, uint32_t m, uint32_t r0, uint32_t r1,
                      uint32_t score, double tol);

    /* ---- ABI 1.2 (read it only when abi_minor ≥ 2) ---- */
    /* Names the score biases of the decode step's selection: bias, n_heads × m values (head-
     * major, in the selection's row order), 0 for a cached entry and −MPCSIM_PAD_BIAS for a
     * padding row (a partial page's rows past kv_len), computed by ops of this call. */
    void (*selection_bias)(mpcsim_opb *b, uint32_t bias);

    /* ---- ABI 1.3 (read it only when abi_minor ≥ 3) ---- */
    /* Names the first stage of the decode step's selection, a set its later stage ranks around:
     * mask, n_kv_heads × n values (n: the candidates of the policy's choice of stage 1),
     * nonzero where that stage kept the candidate; state (MPCSIM_ROLE_CACHE) an op of the
     * prompt's program wrote. */
    void (*selection_stage)(mpcsim_opb *b, uint32_t mask);
} mpcsim_api;

/* The score bias of a padding row (api->selection_bias; a public "…_pad<K>" tensor's value). */
#define MPCSIM_PAD_BIAS 4096.0

/* A ranked choice of the policy's selection (mpcsim_policy.choice, ABI 1.3): of the candidates
 * 0..n-1 of every KV head, the ones kept were ranked by score, the larger kept. The rows of
 * score and kept are head_stride apart (0: one row for every KV head); tol: the error bound of
 * a score's order on mpcsim's fixed point (18 fractional bits), both candidates of a swap. */
typedef struct mpcsim_choice {
    uint32_t n;
    size_t head_stride;
    const float *score;
    const uint8_t *kept;
    double tol;
} mpcsim_choice;

/* The policy a plug-in provides. Members the plug-in does not need are NULL / 0. */
typedef struct mpcsim_policy {
    int abi_major, abi_minor; /* what the plug-in was built against: MPCSIM_POLICY_HEAD */
    const char *name;         /* [a-z0-9_]+, at most 31 characters, not a built-in's */
    const char *summary;
    const mpcsim_param *params;
    size_t n_params;
    /* Required: the state of one run from its parameters (read with api->arg_*). */
    int (*init)(const mpcsim_env *env, const mpcsim_args *a, void **state, mpcsim_err *e);
    void (*fini)(void *state);
    /* What observe() wants at pos (MPCSIM_NEED_*); NULL: nothing. */
    unsigned (*needs)(void *state, uint32_t pos);
    int (*observe)(void *state, const mpcsim_obs *o, mpcsim_err *e);
    int (*prefill)(void *state, mpcsim_err *e);
    /* Required: keep[g · pos + j] = 1 if KV head g attends to cached position j < pos. */
    int (*select)(void *state, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                  mpcsim_err *e);
    /* The selection's MPC ops for layer (phase MPCSIM_PHASE_*; kept[g]: the counts chosen per
     * KV head, kv_len cached entries) through the builder b and api. */
    int (*emit_cost)(void *state, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                     mpcsim_opb *b, mpcsim_err *e);
    /* The policy's own metrics at the end of a run: fills out[0..max), returns the count. */
    size_t (*metrics)(void *state, mpcsim_metric *out, size_t max);
    /* Decode steps between accuracy measurements when the scenario sets none (text); NULL: the
     * default every policy shares ("16"), so that a sweep's policies are measured alike. */
    const char *metric_stride;
    /* 1 when select() and emit_cost() change no state another step reads. */
    int stateless_select;

    /* ---- ABI 1.1 (set abi_minor ≥ 1: MPCSIM_POLICY_HEAD does) ---- */
    /* The plug-in's own budget parameters, '|'-separated, that kv_budget replaces (an error
     * when one is set away from its default beside it); the plug-in maps kv_budget itself
     * (api->kv_budget). NULL: none. */
    const char *budget_keys;
    /* Or the common rule: the whole parameter that kv_budget F sets to round(F · prompt_len)
     * (what api->arg_u32 then reads); it joins budget_keys. NULL: none. A plug-in with neither
     * refuses kv_budget. */
    const char *budget_count;
    /* Optional: the rules between parameters (each value alone already in its range), run when
     * the scenario is loaded and before init: an error message starting with api->at(a, key)
     * for the parameter that breaks the rule, returned through api->fail. */
    int (*check)(const mpcsim_args *a, mpcsim_err *e);

    /* ---- ABI 1.3 (set abi_minor ≥ 3) ---- */
    /* Optional, both or neither (`mpcsim policy check`; above): choice writes to *c the choice
     * `stage` (0: the kept set select() returned at layer and decode position pos; 1: its first
     * stage) and returns 1, or 0 when there is none; adopt makes kept (n_kv_heads rows of c->n)
     * that choice's outcome in the state, so that select() and later choices continue from it. */
    int (*choice)(void *state, uint32_t layer, uint32_t pos, uint32_t stage, mpcsim_choice *c);
    int (*adopt)(void *state, uint32_t layer, uint32_t pos, uint32_t stage, const uint8_t *kept,
                 mpcsim_err *e);
} mpcsim_policy;

#define MPCSIM_POLICY_HEAD \
    .abi_major = MPCSIM_PLUGIN_ABI_MAJOR, .abi_minor = MPCSIM_PLUGIN_ABI_MINOR

/* The entry point's type. */
typedef const mpcsim_policy *(*mpcsim_plugin_entry)(const mpcsim_api *api);

#ifdef __cplusplus
}
#endif

#endif
