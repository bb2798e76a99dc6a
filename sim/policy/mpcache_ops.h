/* mpcache_ops.h — MPCache's selection as ops (mpcache_ops.c) and its audit against the replay
 * (policy_mpcache_secure.c).
 *
 * The policy's own interface to its selection on shares, shared by its cost path (the policy's
 * emit_cost) and its secure session (the secpol_ops slot, secpol.h). Nothing outside the policy's
 * files and its tests includes it. */
#ifndef MPCSIM_MPCACHE_OPS_H
#define MPCSIM_MPCACHE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "protocols/program/op.h"
#include "policy.h"
#include "secpol.h"

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
/* u over the 32-clusters when public (level 1 not on shares): all, or the forced ones. */
static inline int plan_u(const mpcache_plan *pl, uint32_t c)
{
    if (pl->k1 >= pl->G1)
        return 1;
    for (uint32_t i = 0; i < pl->nf1; i++)
        if (pl->f1[i] == c)
            return 1;
    return 0;
}

static inline int plan_f2(const mpcache_plan *pl, uint32_t c)
{
    for (uint32_t i = 0; i < pl->nf2; i++)
        if (pl->f2[i] == c)
            return 1;
    return 0;
}
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

/* Threshold static eviction at the prompt of a selecting layer (mpcache_ops.h "MPCache on shares",
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
/* Public constants of the MPCache ops ("L<l>.mpc.<name>") at n entries (prefill: n = P), with
 * f fraction bits: fills out[0..cnt); 0 if the name is not one of them. */
int mpcache_public(const mpcache_shape *s, uint32_t n, int frac, const op_tensor *t, uint64_t *out,
                   size_t cnt);

/* ---- the selection on shares: its configuration and audit (policy_mpcache_secure.c) ---- */

typedef struct mpcache_sec {
    mpcache_shape mpc; /* static none or threshold */
    uint32_t n_layers;
    uint32_t *static_count; /* threshold: [n_layers] the kept counts the prompt's program
                             * revealed (secpol_ops.revealed); NULL for `none` */
} mpcache_sec;

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

extern const secpol_ops policy_mpcache_secure;

#endif
