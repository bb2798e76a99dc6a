/* secpol.h — KV-cache eviction policies whose selection runs on secret shares.
 *
 * The secure session (sim/secure/secinf.c) computes a policy's selection inside the step's op
 * program, with the same ops the simulator costs: one emitter per policy builds them, with the
 * step's real operands for the secure session and with placeholder operands of the same shapes for
 * the cost path (the policy's emit_cost). Kept counts are public (they set the program's
 * shapes), which entries are kept stays secret (MPCache's security model,
 * ../shared/reference/policies.md §1.8).
 *
 * H2O on shares. Per layer and KV head the secret state is a table of R rows [K | V | score]
 * (2·head_dim + 1 columns): rows [0, R − recent) the heavy hitters (which positions they hold is
 * secret), the last `recent` rows the newest positions in order (public). A step's program
 * holds the new entry at row 0 of the cache and the carried rows at 1 … c (policy_h2o_secure.c),
 * and per layer, after the lowered attention (the selection proper batched over the layers, after
 * the last one): score accumulation: the step's softmax probabilities summed over the KV head's
 * query heads and (prefill) over the query rows, added to the carried scores (two transposing VIEWs
 * and a matmul with a public ones vector: local); the table [K | V | score] of the attended rows
 * (VIEWs: local); prefill, P > heavy + recent: TOPK(heavy) of the scores of rows [0, P − recent),
 * then a GATHER (one-hot rows · table) of the heavy rows; decode, c = heavy + recent: the
 * candidates are row heavy + 1 (the entry leaving the recent window, the latest: slot 0, which wins
 * exact ties, as the plaintext rule evicts the later position) and rows 1 … heavy (the heavy rows);
 * ARGMAX of their negated scores (one-hot of the minimum), its prefix sum (log-step shifted adds:
 * local) broadcast over the row (a product with a public ones row: local) as a mask, and a SELECT
 * per element: row i of the compacted heavy part is candidate i+1 where the mask is 1 (at or after
 * the evicted one), else candidate i. Without a recent window (recent = 0) the candidates are row 0
 * (the new entry) and the heavy rows, as the plaintext policy's. The next state is then a public
 * re-layout: [selected heavy rows; the recent rows; the new row]. */
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

/* H2O's budgets for a run (heavy_ratio/recent_ratio of the prompt, or absolute sizes), as
 * the policy computes them. */
int h2o_budgets(const policy_env *env, const policy_args *a, uint32_t *heavy, uint32_t *recent,
                errbuf *e);

typedef struct h2o_shape {
    uint32_t n_heads, n_kv_heads, head_dim;
    uint32_t heavy, recent;
} h2o_shape;

/* Tensors of one layer's H2O ops (OP_NONE where the phase has none). */
typedef struct h2o_ids {
    uint32_t score; /* (Hkv, n, 1) accumulated scores of the n attended rows ("L<l>.h2o.acc";
                     * the carried ones are the OPT_CACHE input "L<l>.h2o.score") */
    uint32_t table; /* (Hkv, n, 2d+1) [K | V | score] of the attended rows */
    uint32_t cand;  /* (Hkv, ncand, 1) the candidates' scores */
    uint32_t cur;   /* prefill: (Hkv, P-recent, 2d+1) the candidates' rows; decode: (Hkv,
                     * heavy, 2d+1) candidates 0 … heavy-1 */
    uint32_t next;  /* decode: candidates 1 … heavy */
} h2o_ids;

/* Tensors of the selection of every layer at once ("h2o.<name>"), rows of layer l after those
 * of layers < l: memory order [KV head][layer][…]. */
typedef struct h2o_sel {
    uint32_t cand;   /* (Hkv, L·ncand, 1) the candidates' scores */
    uint32_t onehot; /* prefill: (Hkv, L·heavy, P-recent) TOPK rows; decode: (Hkv, L, heavy+1) */
    uint32_t heavy;  /* (Hkv, L·heavy, 2d+1) the selected heavy rows */
} h2o_sel;

/* Whether a step selects: prefill of t = P tokens, or a decode step over c carried rows. */
int h2o_selects(const h2o_shape *s, int phase, uint32_t c, uint32_t t);

/* Appends layer `layer`'s H2O ops (category policy) for a step attending c carried rows and t
 * new ones (prefill: c = 0, t = P; decode: t = 1, rows: new at 0, carried at 1 … c): the score
 * upkeep, the table and the layer's candidates (all local). probs (H, t, c+t) is the step's
 * softmax output, kc/vc (Hkv, ≥ c+t, d) the step's caches; OP_NONE for each gives a
 * placeholder of that shape (the cost path). ids may be NULL. */
int h2o_emit_ops(op_program *p, const h2o_shape *s, int phase, uint32_t layer, uint32_t c,
                 uint32_t t, uint32_t probs, uint32_t kc, uint32_t vc, h2o_ids *ids, errbuf *e);
/* Appends the selection of every layer at once (layer −1; the layers are independent, so one
 * TOPK/ARGMAX, GATHER/SELECT runs them all in the same rounds), from the layers' ids (lay[l]);
 * nothing when the step does not select. out may be NULL. */
int h2o_emit_select(op_program *p, const h2o_shape *s, int phase, uint32_t n_layers, uint32_t c,
                    uint32_t t, const h2o_ids *lay, h2o_sel *out, errbuf *e);

/* Public constants of the H2O ops, by tensor name ("L<l>.h2o.ones", "h2o.bcast"): fills
 * out[0..n) with raw ring integers; 0 if the name is not one of them. */
int h2o_public(const op_tensor *t, uint64_t *out, size_t n);

/* MPCache on shares (static `none`: K' is the whole cache in position order; `threshold`: below;
 * the static `topk` is not on shares — its kept sets come from the plaintext replay). Per layer
 * the secret state is the token table "L<l>.mpc.kv" (Hkv, Npad, 2d+1) = [K | V | 0] of the n
 * entries of K' in position order, zero rows up to Npad = 16·G2, and the bounds "L<l>.mpc.b16"
 * (Hkv, G2, 2d) and "L<l>.mpc.b32" (Hkv, G1, 2d), row c = [max over the cluster's keys | max of
 * their negation] per channel (G2 = ⌈n/16⌉, G1 = ⌈n/32⌉). The prompt's program ends with the bounds
 * of the P prompt keys (one MAX over each 16-cluster, the pad keys pushed to −BIG by a public add,
 * then one MAX over each pair). A decode step at n entries, per selecting layer, between the
 * lowered layer's query and its attention (policy_mpcache_secure.c splices the ops there): qx =
 * [α·qs | −(1−α)·qs], qs the KV head's summed (1/√d-scaled) queries (a transposing VIEW and a
 * public product: local), so q·(α r_max + (1−α) r_min) = qx·[r_max | −r_min]; level 1, when 0 < k1
 * < G1: scores qx·b32ᵀ, TOPK(k1); its column sums (local) give the secret indicator u over the
 * 32-clusters, u = 1 on the forced ones (public: {0}, {G1−1 if n % 32 ≠ 0}); else u is public (the
 * forced ones for k1 = 0, all for k1 ≥ G1); level 2, when 0 < k2 < G2 (k2 = min(floor(G2·ratio2),
 * G2)): scores qx·b16ᵀ over every 16-cluster, pushed down by BIG where the 32-cluster is not in u
 * (u·BIG − BIG: local), TOPK; a pick of a pushed-down cluster (only when k2 exceeds the candidates,
 * as the plaintext caps) is masked below; the attended rows, three shapes (public functions of n):
 *     gather — slots = k2 + |forced2| < G2: the one-hot rows are the TOPK rows and each forced
 *       16-cluster's e_f·(1 − its column sum) (0 when the top-k already has it: no double
 *       attention); GATHER of the slots' cluster rows of the table to which a secret column
 *       96·u·[token < n] was added (local); R = 16·slots rows, each masked by −96 where that
 *       column is 0 (a pad token, an empty forced slot, a pushed-down pick): a secret additive
 *       mask on the scores (local), so the softmax ignores them exactly;
 *     forced — k2 = 0, |forced2| < G2: the forced clusters' rows by public slices (local), a
 *       public mask for the pad tokens;
 *     full — otherwise (slots ≥ G2): all n rows with the chosen set's indicator w as the mask
 *       (w = forced2 ∪ (top-k column sums · u), one MUL when u is secret).
 *   upkeep: the new key's [k | −k] against the newest 16- and 32-cluster's row (one MAX over
 *     pairs of 2d or 4d channels), or a new cluster from the key itself (n % 16 = 0: none).
 * The gathered K and V rows go to rows 1 … R of the lowered cache tensors (row 0: the new
 * entry), the mask is added to the layer's scores before its softmax. Layer sharing: layers
 * 2k+1 (k ≥ 1) gather their own table with layer 2k's one-hot rows and reuse its mask; dense
 * layers (skip_first2) attend all n rows. Nothing is revealed.
 *
 * Static `threshold` on shares: the prompt's program ends, per selecting layer, with the window
 * rows' head sums of the softmax output compared with H·threshold (LT against a secret constant
 * made locally), the window's OR as [Σ below < w] (a second LT), and the count of kept keys
 * REVEALED to every party (public in MPCache's model; a shared layer reuses layer 2k's). The
 * first decode program is then shaped by the count S: it begins with the order-preserving
 * compaction — prefix sums of the keep bits (local), rank r_j = prefix_j + S·keep_j − (S+1)
 * (negative for a dropped key: local), ONEHOT(r_j) over S slots, transposed, GATHER of the
 * prompt's [K | V | 0] rows — so K' keeps position order, then the bounds of the S kept keys
 * (as the prompt's program does with `none`), then the selection above with n = S. */

typedef struct mpcache_shape {
    uint32_t n_heads, n_kv_heads, head_dim;
    uint32_t s1, s2; /* 32, 16 (s1 = 2·s2) */
    double alpha, ratio1, ratio2;
    int share, skip2;
    int static_mode; /* 0 threshold, 1 topk, 2 none (policy_mpcache.c) */
    double thr;      /* static threshold */
    uint32_t window; /* static window rows (of the prompt) */
} mpcache_shape;

/* MPCache's parameters for a run. */
int mpcache_shape_read(const policy_env *env, const policy_args *a, mpcache_shape *s, errbuf *e);

enum { MPCACHE_LAYER_SELECT, MPCACHE_LAYER_SHARED, MPCACHE_LAYER_DENSE };
int mpcache_layer_kind(const mpcache_shape *s, uint32_t layer);

/* A decode step's public plan over n entries of K'. */
enum { MPCACHE_PATH_GATHER, MPCACHE_PATH_FORCED, MPCACHE_PATH_FULL };
typedef struct mpcache_plan {
    uint32_t n, G1, G2, Npad, k1, k2, nf1, nf2, f1[2], f2[2];
    int lv1, lv2; /* level 1 / level 2 top-k on shares */
    int path;
    uint32_t slots, rows; /* one-hot slots (gather, forced), attended rows R */
    int mask;             /* 0 none, 1 public, 2 secret */
} mpcache_plan;
void mpcache_plan_layer(const mpcache_shape *s, uint32_t layer, uint32_t n, mpcache_plan *pl);
/* The rows a decode step at n entries of K' attends in a layer besides the new entry: the
 * plan's R, a public bound (16 · slots for the gather and forced shapes, n for the full shape
 * and dense layers) that the selection's true count never exceeds. The secure session lowers
 * its steps with it, and so does the simulator's replay (policy_ops.attend). */
uint32_t mpcache_attend_rows(const mpcache_shape *s, uint32_t layer, uint32_t n);

/* Tensors of one layer's MPCache ops. */
typedef struct mpcache_ids {
    uint32_t onehot;           /* (Hkv, slots, G2) the gather's one-hot rows, or OP_NONE */
    uint32_t mcol;             /* (Hkv, G2, 16·(2d+1)) the added mask column, or OP_NONE */
    uint32_t mask;             /* (H, 1, R+1) the scores' mask (secret), or OP_NONE */
    uint32_t t1, t2, sc1, sc2; /* top-k one-hots and their scores (the audit), or OP_NONE */
    uint32_t kn, up;           /* decode: [k | −k] (Hkv, 1, 2d); the MAX (Hkv, 2d, w) */
    uint32_t b16, b32;         /* prefill: the bounds */
    uint32_t keep;             /* threshold, prefill: the keep bits (1, P, 1) */
    uint32_t cmp;              /* threshold, first decode step: the compaction one-hot (1, S, P) */
} mpcache_ids;

/* Threshold static eviction at the prompt of a selecting layer (secpol.h "MPCache on shares",
 * threshold): from the softmax probabilities probs (H, P, P) (OP_NONE: a placeholder) the keep
 * bits "L<l>.mpc.keep" and their count revealed to every party ("L<l>.mpc.count"). */
int mpcache_emit_static(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t P,
                        uint32_t probs, mpcache_ids *ids, errbuf *e);

/* Prefill: the bounds of the P prompt keys of a selecting layer (kc: (Hkv, P, d), OP_NONE: a
 * placeholder). */
int mpcache_emit_prefill(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t P,
                         uint32_t kc, mpcache_ids *ids, errbuf *e);
/* Decode at n entries: the selection, the gathered rows written into kc/vc rows 1 … R and the
 * upkeep (q: (H, 1, d), k: the new key (1, Hkv·d); OP_NONE: placeholders). src: layer 2k's ids
 * for a shared layer. */
int mpcache_emit_decode(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                        uint32_t q, uint32_t k, uint32_t kc, uint32_t vc, const mpcache_ids *src,
                        mpcache_ids *ids, errbuf *e);
/* The same at the first decode step after a threshold prompt of P0 tokens whose revealed count
 * is n: first the order-preserving compaction of the prompt's table "L<l>.mpc.full" (Hkv, P0,
 * 2d+1) with the keep bits "L<l>.mpc.keep_in" (prefix sums, one-hot of each kept row's rank,
 * GATHER; a shared layer with layer 2k's one-hot) and the bounds of the n kept keys. */
int mpcache_emit_decode_first(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                              uint32_t P0, uint32_t q, uint32_t k, uint32_t kc, uint32_t vc,
                              const mpcache_ids *src, mpcache_ids *ids, errbuf *e);
/* The mask added to the layer's scores (H, 1, R+1) before the softmax (OP_NONE: placeholder);
 * nothing when the plan has no mask. */
int mpcache_emit_mask(op_program *p, const mpcache_shape *s, uint32_t layer, uint32_t n,
                      uint32_t scores, const mpcache_ids *own, errbuf *e);
/* The audit: from one selecting layer's opened values at n entries (for each of t1, sc1, t2,
 * sc2 the program holds, all KV heads, in that order; *used: their count), KV head g's chosen
 * 16-clusters (cl[0..G2) = 0/1); returns the smallest top-k margin (INFINITY: none). */
double mpcache_audit_set(const mpcache_shape *s, uint32_t layer, uint32_t n, const double *vals,
                         size_t nvals, uint32_t g, uint8_t *cl, size_t *used);
/* The same layer's opened scores of KV head g: level 1 (G1) and level 2 (G2), NULL when that
 * level did not run on shares. */
void mpcache_audit_scores(const mpcache_shape *s, uint32_t layer, uint32_t n, const double *vals,
                          size_t nvals, uint32_t g, const double **sc1, const double **sc2);
/* The k-th largest of the entries with ok[i] (ok NULL: all) minus the next; INFINITY when k
 * takes them all. */
double mpcache_topk_margin(const double *sc, const uint8_t *ok, uint32_t n, uint32_t k);

/* Public constants of the MPCache ops ("L<l>.mpc.<name>") at n entries (prefill: n = P), with
 * f fraction bits: fills out[0..cnt); 0 if the name is not one of them. */
int mpcache_public(const mpcache_shape *s, uint32_t n, int frac, const op_tensor *t, uint64_t *out,
                   size_t cnt);

/* ---- the two selections on shares: their configurations and audits ---------------------------
 *
 * H2O's configuration is its h2o_shape (policy_h2o_secure.c); MPCache's is below
 * (policy_mpcache_secure.c). */
typedef struct mpcache_sec {
    mpcache_shape mpc; /* static none or threshold */
    uint32_t n_layers;
    uint32_t *static_count; /* threshold: [n_layers] the kept counts the prompt's program
                             * revealed (secpol_ops.revealed); NULL for `none` */
} mpcache_sec;

/* The secure selection against the plaintext replay's keep masks (an audited run, teacher
 * forced); the replay's scores are recomputed on the float model under those masks. */
typedef struct h2o_sec_audit {
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
} h2o_sec_audit;
/* tie_bound < 0: twice the measured score error (a secure margin above it implies the replay's
 * order). */
int h2o_secure_compare(const secpol_run *o, const h2o_shape *cfg, const secpol_opened *r,
                       const secpol_keep *plain, double tie_bound, h2o_sec_audit *out, errbuf *e);

/* MPCache's secure selection against the replay's (an audited run, teacher forced): per decode
 * position, layer and KV head the attended set (the chosen 16-clusters' entries) from the
 * opened one-hots, against the replay's keep mask; each top-k's secure margin (its k-th score
 * minus the next, scores in the session's units: q/√d · bound). */
typedef struct mpcache_sec_audit {
    uint32_t sets, same;    /* kept sets compared, equal */
    uint32_t topks;         /* top-k selections run on shares */
    double min_margin;      /* smallest secure margin of a top-k */
    double max_diff_margin; /* largest smallest-margin of a differing set's top-ks */
    uint32_t first_differ;  /* the first decode position with a differing set (UINT32_MAX:
                             * none) */
    uint32_t first_layer;   /* … its layer, and its top-ks' smallest secure margin */
    double first_margin;
    double score_err;           /* largest |secure − replay| top-k score where the sets agree (the
                                 * replay's scores recomputed on the float model under its keep
                                 * masks, with the policy model's own query) */
    uint32_t differ, near_ties; /* differing sets; of them those whose replay margin (its own k-th
                                 * score minus the next, at either level) is within 2·score_err */
    double rep_margin;          /* the largest replay margin of a differing set */
} mpcache_sec_audit;
int mpcache_secure_compare(const secpol_run *o, const mpcache_sec *cfg, const secpol_opened *r,
                           const secpol_keep *plain, mpcache_sec_audit *out, errbuf *e);

/* Comet on shares (policy_comet.c A6: the top-k predictor; policy_comet_secure.c). Per layer,
 * between the FFN's norm (its output x, (T, dim)) and the FFN, each of the step's T tokens:
 *   the block scores x·Pᵀ, P (blocks × dim) the model owner's fixed matrix of W1's block means
 *     ("L<l>.comet.pred": a MATMUL by a fixed operand);
 *   TOPK(A) over the blocks: one-hot rows (T, A, blocks), A = ⌈active_frac · blocks⌉ public;
 *   pattern secret: one GATHER of those blocks' rows of the fixed table "L<l>.comet.wtab"
 *     (blocks × 3·block·dim: row k = [W1's rows of block k | W3's rows | W2's columns, one
 *     neuron per dim-long run], neurons past ffn_dim zero), then public re-layouts (VIEWs by
 *     the public indices "L<l>.comet.i<w>") into the lowering's "L<l>.w1.gathered",
 *     "w3.gathered" (T, A·block, dim) and "w2.gathered" (T, dim, A·block): the FFN's matmuls
 *     multiply by them (lower_opts.ffn_secret). Nothing is revealed.
 *   pattern public: each token's block indicator (the one-hot rows' column sums: local)
 *     REVEALED to every node ("L<l>.comet.pattern", (T, blocks, 1)) — semi2k's dealer gets it
 *     from P0 outside the rounds (eng.h publish), since its triples for the products by the
 *     weights' active rows are A·B[idx] of the restricted masks — then turned into the active
 *     neurons' indices "L<l>.ffn.idx" (T, min(A·block, ffn_dim), 1; VIEW OPF_INDEX_BLOCKS,
 *     2^64 − 1 past a partial last block's neurons: zero rows), by which the lowering takes
 *     W1's and W3's rows and W2's columns (VIEWs of the fixed operands, their opened masks
 *     restricted likewise: lower_opts.ffn_secret = 0). Every shape is public before the step
 *     runs (A is); only the values of the indices arrive mid-program. Revealed: each token's
 *     set of active blocks per layer (not the top-k's order).
 * The attention is dense; K/V are every token's own (no refill on shares: with the top-k
 * predictor A is the same for every token, so either no token is skipped — A ≥ skip_below ·
 * blocks, the configurations on shares — or every one is, POLICIES.md comet A3/A4). */
typedef struct comet_shape {
    uint32_t dim, ffn_dim, block, nblocks;
    uint32_t active; /* A: active blocks per token */
    int secret;
} comet_shape;
/* ⌈frac · nblocks⌉ in [1, nblocks], or 0 for frac 0 (the oracle rule). */
uint32_t comet_topk_blocks(double frac, uint32_t nblocks);
/* Appends layer `layer`'s ops for T tokens with the FFN input x (OP_NONE: a placeholder). */
int comet_emit_ops(op_program *p, const comet_shape *s, int phase, uint32_t layer, uint32_t T,
                   uint32_t x, errbuf *e);
/* The public index tensors "L<l>.comet.i<w>" for T tokens: 0 if t is not one of them. */
int comet_public(const comet_shape *s, uint32_t T, const op_tensor *t, uint64_t *out, size_t n);

extern const secpol_ops policy_h2o_secure, policy_mpcache_secure, policy_comet_secure;

#endif
