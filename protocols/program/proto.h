/* proto.h — MPC protocols: configuration, registry, and the cost log they produce.
 *
 * A protocol (semi2k, aby3) is a const ops table found by name (proto_find). Its primitive
 * costs — rounds, bytes on each directed link, local work, offline bytes — are formulas citing
 * their source (../shared/reference/mpc-costs.md §2: SPU kernel annotations first).
 *
 * Costing an op program runs each op through the shared kernels (kern.h) on a *cost engine*
 * (eng.h with no data): every primitive the kernel calls appends one cost_round per
 * communication round, so the cost of a composite (softmax, GeLU, top-k) is, by construction,
 * the cost of the primitives the real backend executes for it.
 *
 * "Round": one communication step of one primitive, in which each party sends at most one
 * message to each other party and then waits for the messages addressed to it. Rounds of
 * different primitives never merge. The backend's transport counts rounds the same way.
 */
#ifndef MPCSIM_PROTO_H
#define MPCSIM_PROTO_H

#include <stdint.h>
#include <stdio.h>

#include "protocols/base/err.h"
#include "op.h"

#define MPC_PARTIES_MAX 3 /* compute parties; a dealer, if any, is outside (offline channel) */

/* Fixed-point and approximation parameters: protocol config, defaults documented against the
 * frameworks they mimic (mpc-costs.md §1.1 SPU defaults, §2.4 approximations). */
typedef struct proto_cfg {
    char name[32];       /* "semi2k" | "aby3" */
    int ring_bits;       /* ℓ, 64 */
    int frac_bits;       /* f, SPU FM64 default 18 */
    int exp_iters;       /* Taylor (1+x/2^n)^(2^n): SPU fxp_exp_iters 8; PUMA 5 */
    int recip_iters;     /* Newton/Goldschmidt iterations for 1/x */
    int rsqrt_iters;     /* Newton iterations for 1/sqrt(x) */
    double softmax_clip; /* PUMA: exp masked to 0 below -14 */
    int beaver_cache;    /* 1: a fixed operand's opened mask is reused (SPU BeaverCache) */
    int trunc_local;     /* truncation (key trunc = local | pair, PRIMITIVES.md): 0 = pair,
                          * a dealt r with r >> f and msb(r) (semi2k: TruncPr from the
                          * dealer; aby3: P2 deals to P0, P1), exact for |x| < 2^(l-2);
                          * 1 = local truncation of the shares (semi2k: SecureML, 0
                          * rounds; aby3: Share Truncation I, 1 round), wrong by about
                          * 2^(l-f) with probability |x|/2^l */
    char approx[32];     /* "puma" (piecewise GeLU/SiLU) — selects activation approximations */
    char msb[16];        /* comparisons' msb: "ks" (full Kogge–Stone A2B, then bit 63) or
                          * "carry" (carry-out tree of one word per level, SPU's carry_out) */
    char topk[16];       /* top-k of secret rows: "network" (oblivious: k extractions or an
                          * odd–even merge sort, no leakage) or "quickselect" (SPU topk_1d:
                          * a secret shuffle, then QuickSelect whose pivot comparisons are
                          * revealed — kern_sort.c k_topk_qs, PRIMITIVES.md) */
    char exp[16];        /* exp: "pow2" (2^-y by range reduction, kern_math.c k_exp_pow2) or
                          * "taylor" ((1 + x/2^t)^(2^t), t = exp_iters) */
    char normalize[16];  /* reciprocal / rsqrt normalisation: "bitdec" (one bit
                          * decomposition, the highest bit's power of two; kern_cmp.c
                          * k_hibit) or "thresholds" (a batched comparison against every
                          * power of two) */
    char compat[16];     /* framework cost profile: "native" (mpcsim's constructions, the keys
                          * above) or "spu" (every family as SecretFlow SPU 0.9.x runs it;
                          * kern_compat.c, PRIMITIVES.md "Framework profiles") */
    char gather[8];      /* a secret selection's attention: "rows" (the kept [K | V] rows gathered
                          * by the one-hot, attention over them) or "scores" (q·Kᵀ over every
                          * cached entry, the kept scores gathered, softmax, scattered back, ·V
                          * over every entry; models/lower.c, sim/policy/POLICIES.md) */
} proto_cfg;

/* Kinds of local work, converted to time by the machine profile (sim/engine/machine.h). */
enum { WK_MAC, WK_ELEM, WK_PRG, WK_N };

/* One communication round (or a local-only step when comm == 0). */
typedef struct cost_round {
    uint32_t op;   /* op index in the program */
    uint16_t prim; /* eng_prim that produced it */
    uint8_t comm;  /* 1: a counted communication round */
    uint8_t pad;
    uint64_t bytes[MPC_PARTIES_MAX][MPC_PARTIES_MAX]; /* online payload bytes src→dst */
    uint64_t offline[MPC_PARTIES_MAX];                /* dealer→party preprocessing bytes */
    double work[MPC_PARTIES_MAX][WK_N];               /* local work done before sending */
} cost_round;

typedef struct cost_log {
    cost_round *r;
    size_t n, cap;
    int n_parties;
} cost_log;

void cost_log_init(cost_log *c, int n_parties);
void cost_log_free(cost_log *c);
void cost_log_clear(cost_log *c);
cost_round *cost_log_push(cost_log *c); /* zeroed round, NULL on OOM */
/* 1 when c is a costed program of n_ops ops: n ≤ cap, a party count the rounds fit in, every
 * round an op of the program in program order, no bytes to or from a party beyond n_parties. */
int cost_log_is_sane(const cost_log *c, size_t n_ops);

/* Per-op-category totals of a cost log (for breakdowns, reports and tests). */
typedef struct cost_totals {
    uint64_t rounds;
    uint64_t bytes_sent[MPC_PARTIES_MAX];    /* online, per sending party */
    uint64_t offline_bytes[MPC_PARTIES_MAX]; /* per receiving party */
    double work[MPC_PARTIES_MAX][WK_N];
} cost_totals;
void cost_totals_add_round(cost_totals *t, const cost_round *r, int n_parties);

typedef struct proto proto;
struct eng;

/* A protocol: a name, its properties, defaults, and a cost engine factory. Code outside the
 * protocol modules reads these fields, never the name. */
struct proto {
    const char *name;
    int version;
    int n_parties;          /* compute parties (party ids 0 .. n_parties-1) */
    int has_dealer;         /* 1: a dealer node deals correlated randomness (offline channel) */
    int nodes;              /* processes of a run: the compute parties and the dealer, if any */
    int shares_per_party;   /* ring elements a party holds per secret value (1 additive, 2
                             * replicated) */
    int legacy_trunc_local; /* 1: runs stored before the truncation pair (trunc: pair)
                             * truncated locally whatever trunc_local said (scn.c reads
                             * older databases' configurations by it) */
    const char *summary;
    void (*defaults)(proto_cfg *cfg);
    /* Creates an engine that records costs (no data) into log. */
    int (*cost_engine)(const proto_cfg *cfg, cost_log *log, struct eng **out);
};

const proto *proto_find(const char *name);
const proto *const *proto_all(size_t *n);
int proto_cfg_default(const char *name, proto_cfg *cfg, errbuf *e);

/* Sets one config parameter by name from its text value ("frac_bits", "18"), validated;
 * an unknown key's message suggests the nearest valid one. The message carries no file
 * position: callers reading a file prefix their "file:line:col: ". */
int proto_cfg_set(proto_cfg *cfg, const char *key, const char *value, errbuf *e);
/* The same from one "KEY=VALUE" string (a command line's --set). */
int proto_cfg_set_kv(proto_cfg *cfg, const char *kv, errbuf *e);
/* The keys proto_cfg_set accepts. */
const char *const *proto_cfg_keys(size_t *n);
/* The keys of a scenario's 'protocol' mapping: 'name', then proto_cfg_set's, with types and
 * ranges (protocols/base/yschema.h; `mpcsim list keys protocol`). */
struct ys_schema;
const struct ys_schema *proto_cfg_schema(void);
/* The rules between the keys of a 'protocol' mapping v once read into cfg (1 ≤ frac_bits <
 * ring_bits; a framework profile the protocol has): 0, or ys_fail's code with the message
 * at the offending key. */
struct ys_ctx;
struct yx_node;
int proto_cfg_check_node(const struct ys_ctx *x, const struct yx_node *v, const proto_cfg *cfg);
/* Prints the per-primitive cost table of pr for n elements (rounds, online bytes sent per
 * party, offline bytes per party) and the composite kernels' costs per element / row. */
int proto_print_costs(FILE *f, const proto *pr, const proto_cfg *cfg, uint64_t n);

/* Costs a whole op program: appends its rounds to log (cleared first). */
int proto_cost_program(const proto *pr, const proto_cfg *cfg, const op_program *prog, cost_log *log,
                       errbuf *e);

/* The public control values (eng sync_public) each op's kernels synced when the backend ran
 * it — QuickSelect's comparison count per partition, then 0 — as their count n[op] and sum
 * sum[op] (the backend's mpc_op_stat.pub_n / pub_sum). */
typedef struct cost_tape {
    const uint64_t *n, *sum;
    size_t n_ops;
} cost_tape;
/* proto_cost_program with the op's sync values taken from tape where it has any (n[op] > 0):
 * n[op] − 1 partitions sharing sum[op] comparisons, then the end. Every primitive's bytes and
 * rounds are linear in its element count and a partition's primitives are one LT and one OPEN
 * of its comparisons, so the op's totals equal those of the backend's own sequence exactly;
 * without a tape the cost engine plays its seeded draw (kern_sort.c k_topk_qs). */
int proto_cost_program_tape(const proto *pr, const proto_cfg *cfg, const op_program *prog,
                            const cost_tape *tape, cost_log *log, errbuf *e);

/* Op costs remembered across programs. An op whose kind, shapes, flags, arguments and operands
 * (each operand's tensor shape, role and domain, and the length and domain of its value) match
 * an op costed before gets that op's rounds copied instead of running the kernels again. The
 * records are the same byte for byte: a cost engine keeps no state from one op to the next
 * (every round is a function of the op, its operands and the config, kern.c), and an op's
 * local work never merges into another op's record (cost_local). A memo serves one protocol
 * and config at a time: a call with another one empties it first; it also empties itself
 * when it holds more than 2^16 rounds. */
typedef struct cost_memo cost_memo;
cost_memo *cost_memo_new(void); /* NULL on OOM */
void cost_memo_free(cost_memo *m);
size_t cost_memo_rounds(const cost_memo *m); /* rounds it holds now */
/* proto_cost_program through memo m (NULL: none): the same log, record for record. */
int proto_cost_program_memo(const proto *pr, const proto_cfg *cfg, const op_program *prog,
                            cost_log *log, cost_memo *m, errbuf *e);

#endif
