/* policy.h — KV-cache eviction and sparsity policies as registered ops tables.
 *
 * Adding a policy = one file sim/policy/policy_<name>.c defining a `const policy_ops` and one row
 * in the registry (sim/policy/policy.c). Exact algorithms and defaults:
 * ../shared/reference/policies.md; what each one assumes and costs: sim/policy/POLICIES.md.
 *
 * How the replay drives a policy (sim/replay/replay.c), per position pos and layer l in order:
 *   prompt positions 0..P-1:  observe(pos, l)                  (full causal attention)
 *   end of prompt:            prefill()                        (one-shot selections)
 *                             emit_cost(PHASE_PREFILL, l, P)   for every layer
 *   decode position pos ≥ P:  select(l, pos, q) → keep mask over the pos cached entries of
 *                             every KV head (the current token is always attended too);
 *                             emit_cost(PHASE_DECODE, l, pos, kept);
 *                             attend(l, pos, kept) → the rows the lowering attends (optional);
 *                             observe(pos, l) with the attention renormalized over the kept
 *                             entries (what the model computed under the policy).
 * Selections are per KV head (GQA: a KV head's kept set serves its G query heads). Kept
 * counts are public, kept indices are secret (MPCache's security model): a policy's ops
 * compute scores, comparisons, top-k and one-hot gathers on secret shares. */
#ifndef MPCSIM_POLICY_H
#define MPCSIM_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "protocols/base/yschema.h"
#include "models/model.h"
#include "protocols/program/op.h"
#include "protocols/program/opb.h"
#include "protocols/base/kvparam.h"
#include "protocols/base/metric.h"

typedef struct policy_ops policy_ops;
typedef struct secpol_ops secpol_ops; /* selection on secret shares: sim/policy/secpol.h */

/* Parameter names a policy accepts, with defaults, for validation and docs. */
typedef struct policy_param {
    const char *key;
    const char *def; /* default value as text */
    const char *help;
    const char *choices; /* "a|b|c" for a word parameter; NULL for a number */
    double lo, hi;       /* accepted range of a number */
    int whole;           /* 1: a whole number (what policy_arg_u32 reads) */
} policy_param;

/* Shapes and lengths of the run a policy instance serves. */
typedef struct policy_env {
    uint32_t n_layers, n_heads, n_kv_heads, head_dim, dim, ffn_dim;
    uint32_t prompt_len; /* P */
    uint32_t max_len;    /* P + decode steps */
    /* Keys of cached positions idx[0..n) of one KV head (n × head_dim), for policies that
     * index the prompt after choosing it (MPCache's clusters over the static set). */
    int (*gather_k)(void *ctx, uint32_t layer, uint32_t kv_head, const uint32_t *idx, size_t n,
                    float *k);
    void *kv_ctx;
    /* Optional, preferred when set: keys of position pos for every KV head (n_kv_heads ×
     * head_dim) in one read (a synthetic trace generates all heads of a position at once). */
    int (*get_k)(void *ctx, uint32_t layer, uint32_t pos, float *k);
    /* 1 when gather_k returns exactly the keys observe() received (the trace replay): a
     * policy may then keep a compact summary of them and re-read keys where it must be exact
     * (Quest's half-precision page bounds). 0 for a model's own run (the live metrics). */
    int rereads_k;
    /* The folder of an npy trace the run reads (what sits beside it: replay_masks' keep.npy),
     * or NULL. */
    const char *trace_dir;
} policy_env;

/* One parameter of a policy as loaded (policy_args_load): its text parsed and checked once. */
typedef struct policy_value {
    const policy_param *param;
    const kv_param *given; /* where the scenario wrote it; NULL: the default */
    const char *text;      /* the value as text (given, else the default); NULL: none */
    double num;            /* a number parameter's value */
    int choice;            /* a word parameter's index among its choices */
    int ok;                /* 1: parsed and in range; 0: the accessors report the error */
} policy_value;

#define POLICY_MAX_VALUES 64

/* A scenario's policy parameters as the policy reads them (path for messages). kv, n and path
 * may be filled by hand: the accessors then parse the text at every call. policy_args_load
 * fills them and the rest: every parameter of the policy (its own, then the replay's), given or
 * default, parsed and checked once; the accessors read those values. */
typedef struct policy_args {
    const kv_param *kv;
    size_t n;
    const char *path;
    const policy_ops *loaded; /* the policy val was loaded for; NULL: not loaded */
    size_t n_val;
    policy_value val[POLICY_MAX_VALUES];
} policy_args;

/* One (position, layer) as the model computed it. Pointers are valid during the call only. */
typedef struct policy_obs {
    uint32_t layer, pos;
    const float *q;        /* n_heads × head_dim */
    const float *k, *v;    /* n_kv_heads × head_dim of this position (NULL unless asked for) */
    const float *att;      /* n_heads × (pos+1) probabilities used (0 on dropped entries), or
                            * NULL when the policy's needs() did not ask for it */
    const float *ffn;      /* ffn_dim gate pre-activations, or NULL */
    const float *wo;       /* dim × (n_heads·head_dim) output projection, or NULL */
    uint32_t kv_lo, kv_hi; /* the KV heads observed, [kv_lo, kv_hi): kv_hi 0 is all of them
                            * (a part only for a policy with layer_local; att is then valid for
                            * those heads' query heads only) */
} policy_obs;

/* A ranked choice of a policy's selection (policy_ops.choice): of the candidates 0..n-1 of
 * every KV head, the ones kept were ranked by score, the larger kept. Rows of score and kept
 * are head_stride apart (0: one row for every KV head). tol: the error bound of a score's order
 * on the check's fixed point (pcheck_frac_bits): a pair of candidates ranked by at most tol apart
 * is a tie either side may break. */
typedef struct policy_choice {
    uint32_t n;
    size_t head_stride;
    const float *score;
    const uint8_t *kept;
    double tol;
} policy_choice;

/* What observe() needs at a position (bit mask). */
#define POLICY_NEED_ATT 0x1u /* attention row */
#define POLICY_NEED_K 0x2u   /* this position's keys */
#define POLICY_NEED_V 0x20u  /* this position's values */
#define POLICY_NEED_FFN 0x4u /* FFN pre-activations */
#define POLICY_NEED_WO 0x8u  /* W_o of the layer */
#define POLICY_NEED_Q 0x10u  /* the query (also: select() is query-aware) */

struct policy_ops {
    /* ---- core: the policy itself: its name and parameters, its state, the plaintext
     * selection and the cost of the secure one. observe, prefill and emit_cost may be NULL for
     * a policy with nothing to do there (positional policies: no observation, no ops) ---- */
    const char *name;
    const char *summary;
    const policy_param *params;
    size_t n_params;
    /* Allocates the policy's state from its (already checked) parameters. */
    int (*init)(const policy_env *env, const policy_args *a, void **state, errbuf *e);
    void (*fini)(void *state);
    /* Which inputs observe() wants at position pos (observe is called for every position and
     * layer; arrays not asked for are NULL). */
    unsigned (*needs)(void *state, uint32_t pos);
    int (*observe)(void *state, const policy_obs *o, errbuf *e);
    /* End of the prompt: one-shot selections (SnapKV, static eviction, H2O's first drop). */
    int (*prefill)(void *state, errbuf *e);
    /* Decode token at position pos, layer: keep[g·pos + j] = 1 if KV head g attends to cached
     * position j < pos. q is the token's query (n_heads × head_dim). */
    int (*select)(void *state, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                  errbuf *e);
    /* Appends the policy's own MPC ops for layer `layer` of a step: phase PHASE_PREFILL with
     * kv_len = P (kept = per-KV-head counts after the prefill selection), or PHASE_DECODE with
     * kv_len = cached entries and kept[g] the counts select() chose. */
    int (*emit_cost)(void *state, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                     op_program *prog, errbuf *e);
    /* ---- hooks: optional callbacks (NULL: the replay's default, stated at each) ---- */
    /* Optional: the rules between parameters (each value alone is already in its range), run
     * when a scenario is loaded, for `--policy-param` and before init (policy_check): an
     * error "file:line:col: error: ..." at the parameter that breaks the rule (policy_at).
     * a->kv holds the parameters as given, or all of them with their defaults filled in. */
    int (*check)(const policy_args *a, errbuf *e);
    /* Optional, narrower: what observe() wants at (layer, pos), a subset of needs(pos) (which
     * stays the union over layers). A layer that reuses another layer's selection can ask for
     * nothing, and its rows are then never generated. */
    unsigned (*layer_needs)(void *state, uint32_t layer, uint32_t pos);
    /* Optional, for positional policies (the same count for every KV head, no state): how
     * many cached positions layer keeps at pos. When nothing is measured or observed the
     * replay uses it instead of building and counting select()'s mask. */
    uint32_t (*count)(void *state, uint32_t layer, uint32_t pos);
    /* Optional: policy-specific metrics at the end of a run; fills out[0..max), returns the
     * count (may be NULL). */
    size_t (*metrics)(void *state, run_metric *out, size_t max);
    /* Optional: the rows the MPC decode step attends in layer `layer` at kv_len cached
     * entries, per KV head (rows[g], g < n_kv_heads), given the counts select() chose (kept[g]:
     * the layer's largest, what emit_cost received). For a policy whose secure algorithm
     * attends a public bound instead of the selection's exact count (MPCache: 16 · slots
     * gathered rows, the empty ones masked — sim/policy/secpol.h; Quest and the compositions'
     * page blocks: kp whole pages, a partial last page's missing rows biased out — page_ops.h,
     * whichever pages were chosen); the replay lowers the step with
     * these rows, while its accuracy metrics use the selection itself. Absent: the lowering
     * attends the kept counts. Called after emit_cost, for every decode step. */
    void (*attend)(void *state, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                   uint32_t *rows);
    /* (A policy with attend gathers those rows into the attention's cache tensors and keeps
     * its store apart: the lowering sizes the cache tensors, and the append of the step's
     * entries, by them — lower_opts.attended_cache.) */
    /* Optional: 1 when the ops of the decode step at position pos hold one-time work that the
     * steps after it do not repeat (MPCache's compaction after its threshold prompt). The
     * runner costs such a step for itself only: under decode_stride it never stands for the
     * steps after it (sim/scenario/runner.c). Asked before the step as well (replay_idle_ok):
     * it reads what the prompt built, not what the step's own selection does. */
    int (*one_time)(void *state, uint32_t pos);
    /* Optional, for FFN sparsity (Comet): the FFN neurons each token of the step just emitted
     * (prefill: the prompt's mean; decode: the newest token) computes in layer `layer` — a public
     * count the lowering shrinks the FFN to (lower_opts.ffn_active) — and *secret = 1 when which
     * neurons stays secret (lower_opts.ffn_secret). Called after emit_cost. */
    uint32_t (*ffn_active)(void *state, uint32_t layer, int *secret);
    /* Optional, for FFN sparsity on a model with weights: which of the ffn_dim neurons a token
     * computes in layer (active[i] = 1), from its gate pre-activations w1·x; returns 1 when the
     * pattern applies (the float replay then zeroes the other neurons before W2). */
    int (*ffn_pattern)(void *state, uint32_t layer, const float *ffn_pre, uint8_t *active);
    /* Optional, for `mpcsim policy check` (sim/policy/pcheck.c): a choice among near-equal
     * candidates that the plain engine's fixed point may break otherwise than select() and that
     * the policy carries into later choices (TOVA's evictions, each step ranking the cache the
     * last one left; CriticalKV's stage 1, whose set its stage 2 ranks around). choice
     * describes in *c the choice `stage` of the kept set select() returned at (layer, pos):
     * stage 0 the kept set itself (the last choice that formed it), 1 the first stage of a
     * two-stage selection (the set pcheck_selection_stage names); returns 1, or 0 when there is
     * none (the kept set was not ranked there: no tie to accept). adopt makes kept (n_kv_heads
     * rows of c->n, the ops' choice, which the check accepted as a tie) that choice's outcome
     * in the state, so that select() and every later choice continue from it; stage 1 reruns
     * the later stage on it. Both or neither. */
    int (*choice)(void *state, uint32_t layer, uint32_t pos, uint32_t stage, policy_choice *c);
    int (*adopt)(void *state, uint32_t layer, uint32_t pos, uint32_t stage, const uint8_t *kept,
                 errbuf *e);
    /* Optional: the policy's selection run inside MPC on secret shares, for the secure session
     * (sim/policy/secpol.h; the policy's own policy_<name>_secure.c). Absent: a secure run
     * applies the policy's kept sets from its plaintext replay, or its public ones. */
    const secpol_ops *secure;
    /* ---- hints: data the replay and the runner read to skip or split work (0 / NULL:
     * none) ---- */
    /* The policy's own default for the replay's `metric_stride` (decode steps between accuracy
     * measurements) when the scenario sets none, as text like a parameter default; NULL: the
     * replay's, one value for every policy (policy_replay_params), so that the policies of a
     * sweep are measured on the same decode steps. No shipped policy sets it. */
    const char *metric_stride;
    /* The policy's own budget parameters, '|'-separated ("heavy_ratio|recent_ratio|heavy|
     * recent"), which `kv_budget` replaces: setting one away from its default beside kv_budget
     * is an error (policy_check). NULL: none (the policy reads kv_budget itself, or only 1). */
    const char *budget_keys;
    /* 1 when select() and emit_cost() only read the state observe() and prefill() built and
     * change none that another step reads (MPCache's copy of a layer's selection for the layer
     * above is that step's own): a decode step nobody measures or costs (decode_stride,
     * metric_stride) need not run them — the replay still observes it (Quest's page bounds of
     * the new key, MPCache's clusters). */
    int stateless_select;
    /* 1 when observe() at a prompt position reads and changes only the state of its layer and
     * of the KV heads it covers (policy_obs.kv_lo/kv_hi): the replay may then observe a span
     * of prompt positions layer by layer and KV head by KV head (each head's positions in
     * order), their rows computed together (trace_span_att), in spans of at most
     * POLICY_SPAN_MAX consecutive positions. */
    int layer_local;
};

/* The most consecutive prompt positions a span interleaves (policy_ops.layer_local). */
#define POLICY_SPAN_MAX 8

const policy_ops *policy_find(const char *name);
const policy_ops *const *policy_all(size_t *n);
const char *policy_name(const policy_ops *p);
const char *policy_summary(const policy_ops *p);
const policy_param *policy_params(const policy_ops *p, size_t *n);
/* Validates a scenario's parameters for a policy: unknown keys (with did-you-mean, reported at
 * the key's file:line:col), bad values, then the rules between them (policy_check). path is
 * the scenario file for messages. The replay's own keys (policy_replay_params) are accepted for
 * every policy. */
int policy_check_params(const policy_ops *p, const kv_param *kv, size_t n, const char *path,
                        errbuf *e);
/* Checks a scenario's parameters for p as policy_check_params does and loads them into *a
 * (kv must outlive a): every parameter parsed once, what policy_arg_double, policy_arg_u32,
 * policy_arg_choice and policy_arg then read. */
int policy_args_load(const policy_ops *p, const kv_param *kv, size_t n, const char *path,
                     policy_args *a, errbuf *e);
/* Keys every policy accepts because the replay reads them (metric_stride, recall_k, live). */
const policy_param *policy_replay_params(size_t *n);
/* The default of a replay key for policy p: the policy's own (policy_ops.metric_stride) or the
 * replay's (rp->def). */
const char *policy_replay_default(const policy_ops *p, const policy_param *rp);
/* A policy's entry in a scenario as a field schema: 'name', its parameters, then the replay's,
 * with ranges, choices and defaults (`mpcsim list keys policy`). Every field reads its value
 * into a scratch buffer of POLICY_VALUE_MAX bytes at offset 0. NULL for an unregistered p. */
#define POLICY_VALUE_MAX 256
const ys_schema *policy_schema(const policy_ops *p);

/* Runs a policy entry's rules between parameters: kv_budget's (F > 0; not beside one of the
 * policy's budget_keys set away from its default), then the policy's check hook (also the end
 * of policy_check_params). kv[0..n) are the parameters given (or all, defaults filled in);
 * path: the file, or "--policy-param" for the command line's. */
int policy_check(const policy_ops *p, const kv_param *kv, size_t n, const char *path, errbuf *e);
/* The prefix of a message about parameter key of the entry: "file:line:col: error: " at the
 * key as given, "--policy-param key=value: " for the command line's, else "file: error: ".
 * Returns buf. */
const char *policy_at(const policy_args *a, const char *key, char *buf, size_t cap);
/* The entry's kv_budget F (0 < F ≤ 1) in *f, or 0 when it sets none. */
int policy_kv_budget(const policy_ops *p, const policy_args *a, double *f, errbuf *e);
/* round(F·n) entries, at least 1: a kv_budget F of n cached entries (policy_kv_budget). */
uint32_t policy_budget_entries(double f, uint32_t n);
/* The check hook of a policy whose attention stays dense (full, comet): kv_budget 1 only. */
int policy_check_dense(const policy_args *a, errbuf *e);
/* Keys every policy accepts (kv_budget): a policy's parameters as far as a scenario, a label
 * and `list keys policy` are concerned, read by each policy itself (policy_kv_budget). */
const policy_param *policy_common_params(size_t *n);

/* ---- helpers for policy implementations ------------------------------------------------ */

/* The value of key from the scenario, else the policy's default; NULL if neither. */
const char *policy_arg(const policy_ops *p, const policy_args *a, const char *key,
                       const kv_param **where);
/* Parsed numbers in the parameter's [lo, hi] (u32: also integral); errors name the
 * parameter's file:line:col. */
int policy_arg_double(const policy_ops *p, const policy_args *a, const char *key, double *out,
                      errbuf *e);
int policy_arg_u32(const policy_ops *p, const policy_args *a, const char *key, uint32_t *out,
                   errbuf *e);
/* Index of the value among the parameter's '|'-separated choices. */
int policy_arg_choice(const policy_ops *p, const policy_args *a, const char *key, int *out,
                      errbuf *e);

/* Top-k: writes to out the k entries of cand[0..n) with the largest score[cand[i]], ties broken
 * by the smaller index, in increasing index order. cand may be NULL (cand[i] = i). k ≥ n copies
 * all. Returns the count written. work must hold n uint32. */
size_t policy_topk(const float *score, const uint32_t *cand, size_t n, size_t k, uint32_t *out,
                   uint32_t *work);

/* acc[j] += row[j] for j < n, in float (score and vote accumulation), four lanes at a time:
 * the same sum per entry as the scalar loop. */
void policy_add_row(float *acc, const float *row, uint32_t n);
/* acc[j] += row[j] for j < n, the float entries added in double (a column sum over rows
 * taken row by row, each column's terms in row order). */
void policy_add_row_d(double *acc, const float *row, uint32_t n);

/* H2O's eviction victim among the live entries j < end (alive[j] != 0) by accumulated score
 * sc: the smallest score, the latest position on ties; UINT32_MAX when none lives. */
uint32_t policy_h2o_victim(const float *sc, const uint8_t *alive, uint32_t end);

/* IEEE half precision (binary16) bits of x rounded toward +inf (up) or −inf (down), and
 * back to float (exact). Outward rounding keeps a max an upper bound and a min a lower bound:
 * policy_half_float(policy_half_up(x)) ≥ x and policy_half_float(policy_half_down(x)) ≤ x for
 * every finite x (beyond ±65504 the bound is ±inf). */
uint16_t policy_half_up(float x);
uint16_t policy_half_down(float x);
float policy_half_float(uint16_t h);
/* up[i] = policy_half_up(mx[i]) and dn[i] = policy_half_down(mn[i]) for i < n: F16C's
 * directed-rounding conversions where the CPU has them, the same bits (pages holding a NaN
 * go the scalar way, whose NaN payload F16C does not keep). */
void policy_half_bounds(const float *mx, const float *mn, uint32_t n, uint16_t *up, uint16_t *dn);
/* A running max and min with key k: mx[i] = k[i] > mx[i] ? k[i] : mx[i], mn[i] likewise, for
 * i < d, in vector selects (AVX-512 where the CPU has it): the same values. */
void policy_bounds_update(float *mx, float *mn, const float *k, uint32_t d);
/* Nonzero: the portable paths of the two above (tests compare them). */
extern int policy_portable_kernels;
/* Nonzero: Quest keeps its page bounds in float even where keys can be re-read (the tests
 * compare the two selections). */
extern int policy_quest_float_bounds;
/* A factor (≥ 1) on the error bound of Quest's half-precision scores: wider, more pages are
 * re-scored from their keys (tests; 1 in runs). */
extern double policy_quest_slack;
/* Nonzero: Quest's select() (float bounds) ranks its best page last — a selection its ops do
 * not make, which validate's audit must find (tests). */
extern int policy_quest_drop_best;

/* Emits a policy's ops (category OPC_POLICY) for one phase and layer: an op builder
 * (protocols/program/opb.h) made by opb_init(&pe, prog, phase, layer, OPC_POLICY, NULL); the
 * first failure sticks. */
typedef opb policy_emitter;

/* Appends one op whose result is a fresh temporary "pol.<tag>.L<layer>"; in0/in1 are tensor
 * ids or OP_NONE. Returns the result id (OP_NONE after a failure). */
uint32_t policy_emit(policy_emitter *pe, int kind, uint32_t batch, uint32_t m, uint32_t k,
                     uint32_t n, uint32_t in0, uint32_t in1, uint32_t flags, int32_t iarg,
                     double farg, const char *tag);
/* MS_OK, or MS_ERR_NOMEM with a message if an emission failed. */
int policy_emit_done(const policy_emitter *pe, const char *policy, errbuf *e);
/* A named state tensor of the policy (role OPT_CACHE), created on first use. */
uint32_t policy_state_tensor(op_program *prog, const char *name, uint32_t batch, uint32_t rows,
                             uint32_t cols);

/* SnapKV's observation-window scorer (sim/policy/policy_snapkv.c), shared by snapkv, pyramidkv and
 * criticalkv: votes of the last `window` prompt queries, 1-D pooling, GQA group mean. */
typedef struct snap_core {
    policy_env env;
    uint32_t window, kernel;
    int maxpool; /* 1 maxpool, 0 avgpool (count_include_pad) */
    float *vote; /* [L][H][P]: summed window attention per query head */
    float *tmp;  /* P scratch */
} snap_core;

/* The scorer's arguments and the kept entries, read from policy p's parameters window,
 * kernel, pooling and capacity (the names SnapKV's policies share). */
typedef struct snap_args {
    uint32_t window, kernel, capacity;
    int maxpool;
} snap_args;
/* kv_budget F sets the capacity to round(F·prompt_len) (an error below the window). */
int snap_args_read(const policy_ops *p, const policy_args *a, uint32_t prompt_len, snap_args *out,
                   errbuf *e);
int snap_core_init(snap_core *c, const policy_env *env, uint32_t window, uint32_t kernel,
                   int maxpool, errbuf *e);
void snap_core_free(snap_core *c);
/* Window rows wanted at pos? */
int snap_core_wants(const snap_core *c, uint32_t pos);
void snap_core_observe(snap_core *c, const policy_obs *o);
/* out[j], j < P - window: mean over the window and the group of the pooled votes of KV head g. */
void snap_core_score(snap_core *c, uint32_t layer, uint32_t g, float *out);
/* COST of the scoring: votes are sums of rows the prefill attention already computed (local
 * adds); maxpool needs (kernel-1) comparisons per position (a MAX over kernel), avgpool is local.
 * Returns the score tensor id. */
uint32_t snap_core_emit(const snap_core *c, policy_emitter *pe, uint32_t batch);
/* The same ops for H query heads, a window of w queries voting for entries [0, nv), entries
 * [nv, n) voting 0 (nv ≤ n: a composition's candidates reaching into the voting queries' own
 * rows, which select() gives no votes), pooled over K neighbours (maxpool, else avgpool) across
 * all n, summed over the query heads of each of batch groups: the scores (batch, 1, n) on the
 * operand PCHECK_IN_PROMPT_ATT (H, w, nv). */
uint32_t snap_votes_emit(policy_emitter *pe, uint32_t H, uint32_t w, uint32_t n, uint32_t nv,
                         uint32_t K, int maxpool, uint32_t batch);
/* The error bound of snap_core_emit's scores on a fixed point of frac_bits (policy_snapkv.c),
 * and of snap_votes_emit's with G query heads a group. */
double snap_core_tol(const snap_core *c, uint32_t batch, int frac_bits);
double snap_votes_tol(uint32_t w, uint32_t G, uint32_t K, int maxpool, int frac_bits);
/* SnapKV's 1-D pooling of n votes, stride 1, padding kernel/2: max pads with -inf, avg counts
 * the pad as zeros (PyTorch max_pool1d / avg_pool1d with count_include_pad=True); plain float,
 * shared with the compositions' window votes (compose.c). */
void snap_pool1d(const float *in, float *out, uint32_t n, uint32_t kernel, int maxpool);
/* The candidates' columns [c0, c1) of the score row sc (Hkv, 1, c1): (Hkv, 1, c1 − c0), views
 * ("snap.score_*"); sc itself where c0 is 0. */
uint32_t snap_cand_scores(policy_emitter *pe, uint32_t sc, uint32_t Hkv, uint32_t c0, uint32_t c1);
/* The prompt's top k of candidates [c0, c1) by the scores sc (Hkv, 1, c1), their cached
 * [K | V] rows (d2 = 2·head_dim columns) gathered into the state "snap.kept" (PHASE_PREFILL),
 * or those rows named as a decode step's selection with the tie bound tol (PHASE_DECODE; sc
 * unused). k = 0: no ops at the prompt; the decode steps name no rows (none of the
 * candidates attended). Returns the prompt's top-k one-hot rows (Hkv, k, c1 − c0), or OP_NONE. */
uint32_t snap_select_emit(policy_emitter *pe, int phase, uint32_t sc, uint32_t Hkv, uint32_t d2,
                          uint32_t kv_len, uint32_t c0, uint32_t c1, uint32_t k, double tol);
/* The keep rows (n_kv_heads × pos) of a layer at pos whose prompt entries the prefill kept
 * in alive ([L][Hkv][P]): the kept prompt entries, then every later one. */
void snap_keep_rows(const policy_env *v, const uint8_t *alive, uint32_t layer, uint32_t pos,
                    uint8_t *keep);

/* SnapKV's state and callbacks, reused by pyramidkv with per-layer budgets. */
int snapkv_state_new(const policy_ops *p, const policy_env *env, const policy_args *a, void **st,
                     errbuf *e);
/* Kept non-window prompt entries of a layer (UINT32_MAX: no compression). */
void snapkv_set_budget(void *st, uint32_t layer, uint32_t budget);
void snapkv_fini(void *st);
unsigned snapkv_needs(void *st, uint32_t pos);
int snapkv_observe(void *st, const policy_obs *o, errbuf *e);
int snapkv_prefill(void *st, errbuf *e);
int snapkv_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep, errbuf *e);
int snapkv_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                op_program *prog, errbuf *e);
/* The rows of a policy_ops run on SnapKV's state, after its name, summary, params and init. */
#define SNAPKV_OPS                                                                \
    .fini = snapkv_fini, .needs = snapkv_needs, .observe = snapkv_observe,        \
    .prefill = snapkv_prefill, .select = snapkv_select, .emit_cost = snapkv_emit, \
    .stateless_select = 1, .layer_local = 1, .budget_keys = "capacity"

/* A policy policy_find knows that policy_all leaves out: it runs only on a file its scenario
 * points at (sim/policy/policy_replay_masks.c). */
extern const policy_ops policy_replay_masks;

/* The registered policies (sim/policy/policy_<name>.c). */
extern const policy_ops policy_full, policy_streamingllm, policy_h2o, policy_snapkv,
    policy_pyramidkv, policy_quest, policy_tova, policy_mpcache, policy_criticalkv, policy_comet;

#endif
