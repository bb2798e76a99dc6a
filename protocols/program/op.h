/* op.h — the MPC op program: what secure work one transformer step does.
 *
 * The op program is the spine shared by the simulator and the real backend. The lowering
 * (models/lower.c) and the policies emit it; the protocol layer expands each op into rounds of
 * messages for the simulator (protocols/program/cost.c), and the backend executes each op on secret
 * shares (protocols/backend/mpc_*.c). Both walk the same ops through the same kernels
 * (protocols/program/kern.c), so predicted and measured bytes and rounds can be compared one to
 * one.
 *
 * This module is the lowest layer: it knows no protocol, policy or model.
 *
 * Tensors are named, so the backend's caller can bind weights and inputs by name. Every tensor
 * is (batch, rows, cols) row-major; batch is the vectorized dimension (heads): the kernels run
 * all batch instances in the same rounds (rounds counted once, bytes summed).
 *
 * Operand conventions every executor follows:
 *   - element-wise binary ops (ADD, SUB, MUL, SELECT): an operand with fewer elements than the
 *     output broadcasts — a (1 × n) operand repeats over all rows and batch instances (biases,
 *     norm gains);
 *   - MATMUL/GATHER: an in1 whose batch is smaller than the op's batch is shared — instance b
 *     reads in1 instance b / (batch / in1.batch) (GQA: query heads share a KV head);
 *   - ROPE: batch = sequences, m = tokens, n = features, k = head_dim; row r (of each batch
 *     instance) is at position iarg + r; feature pair (2i, 2i+1) within a head rotates by
 *     position · farg^(-2i/k) (farg = theta), as llama2.c's run.c;
 *   - VIEW copies in0 into out starting at row iarg of out (appending this step's keys to the
 *     cache at row kv_len), or, when out is smaller than in0, takes out's rows from in0 starting
 *     at row iarg of each batch instance (a public slice); with OPF_SPLIT_HEADS or
 *     OPF_MERGE_HEADS it moves heads between the feature and the batch dimension
 *     (batch = sequences·heads, m = tokens, n = head size), appending at row iarg when out is
 *     larger (the KV cache); with OPF_INDEX_ROWS / OPF_INDEX_COLS and in1 a public (b, A, 1)
 *     tensor of raw integer indices it takes, for each instance b of out, the A rows (out
 *     (b, A, cols)) or columns (out (b, rows, A)) of in0 (one instance) those indices name —
 *     a public selection of a weight's neurons (Comet's sparse FFN); with OPF_FIXED_B as well,
 *     in0 is a fixed operand and out's opened mask is in0's restricted likewise (eng
 *     fixed_view); it never communicates. An index equal to 2^64 − 1 names no row: that row
 *     (column) of out is zero, its mask too (the pad of a partial block, below);
 *   - VIEW with OPF_INDEX_BLOCKS: in0 is a public 0/1 indicator (b, NB, 1) over blocks of iarg
 *     consecutive units of k units (the last block may be shorter), out (b, A, 1) the public
 *     indices of the units of the selected blocks in increasing order, then 2^64 − 1 up to A
 *     (cut at A): a sparse FFN's revealed block pattern as the neuron indices its index VIEWs
 *     take (Comet's public pattern). Local, on the plaintext every node holds.
 *   - VIEW with OPF_IN_PLACE: in0 (batch, m, n) written at rows iarg … iarg+m−1 of each instance
 *     of out (batch, ≥ iarg + m, n), out's other rows as they were (zero before its first
 *     write), out updated in place: only in0's batch·m·n elements move, where a plain append
 *     re-lays all of out. L layers each writing their rows into one stack of every layer's
 *     cost L·rows, not L²·rows;
 *
 * Text form (op_write / op_read), one item per line, '#' comments:
 *   mpcsim-op-program 1
 *   model <name>
 *   tensor <id> <name> <role> <dom> <batch> <rows> <cols>
 *   op <idx> <kind> <phase> <cat> <layer> <group> b=<batch> m=<m> k=<k> n=<n> \
 *        in=<t0>,<t1>,<t2> out=<t> flags=<hex> i=<iarg> f=<farg> [w=<bits>]
 * Missing operands are written as '-'.
 */
#ifndef MPCSIM_OP_H
#define MPCSIM_OP_H

#include <stdint.h>
#include <stdio.h>

#include "protocols/base/err.h"

/* Op kinds. X(ENUM, "text", shape convention):
 *   EW  element-wise on b×m×n elements (k unused)
 *   MM  (m×k)·(k×n) per batch instance
 *   ROW row-wise over b×m rows of length n (softmax, max, norms, top-k …) */
#define OP_KINDS(X)                                                                            \
    X(INPUT, "input", EW)           /* secret-share a party's private tensor (out) */          \
    X(ADD, "add", EW)               /* out = in0 + in1 (local) */                              \
    X(SUB, "sub", EW)               /* out = in0 - in1 (local) */                              \
    X(ADD_PUB, "add_pub", EW)       /* out = in0 + farg, or + public tensor in1 (local) */     \
    X(MUL_PUB, "mul_pub", EW)       /* out = in0 * farg or * public in1, then truncation */    \
    X(MUL, "mul", EW)               /* out = in0 * in1, fixed point (mul + trunc) */           \
    X(SQUARE, "square", EW)         /* out = in0^2, fixed point */                             \
    X(MATMUL, "matmul", MM)         /* out = in0 · in1 (+ trunc); OPF_FIXED_B: in1 reused */  \
    X(TRUNC, "trunc", EW)           /* out = in0 >> iarg (probabilistic/local per protocol) */ \
    X(LT, "lt", EW)                 /* out = [in0 < in1] as 0/1 arithmetic share */            \
    X(EQ, "eq", EW)                 /* out = [in0 == in1] as 0/1 arithmetic share */           \
    X(SELECT, "select", EW)         /* out = in0 ? in1 : in2 (in0 a 0/1 share) */              \
    X(A2B, "a2b", EW)               /* arithmetic to boolean share */                          \
    X(B2A, "b2a", EW)               /* boolean bit to arithmetic share */                      \
    X(MAX, "max", ROW)              /* out[b,m] = max over n (tree) */                         \
    X(ARGMAX, "argmax", ROW)        /* out[b,m,n] = one-hot of the row max (tree) */           \
    X(EXP, "exp", EW)               /* out = exp(in0) */                                       \
    X(RECIPROCAL, "reciprocal", EW) /* out = 1/in0 */                                          \
    X(RSQRT, "rsqrt", EW)           /* out = 1/sqrt(in0) */                                    \
    X(SOFTMAX, "softmax", ROW)      /* row softmax; iarg = causal offset or -1 (no mask) */    \
    X(GELU, "gelu", EW)                                                                        \
    X(SILU, "silu", EW)                                                                        \
    X(LAYERNORM, "layernorm", ROW) /* in1 = gain (1×n), in2 = bias (1×n) */                  \
    X(RMSNORM, "rmsnorm", ROW)     /* in1 = gain (1×n); farg = eps */                         \
    X(TOPK, "topk", ROW)           /* out[b,m,k=iarg] one-hot rows (k×n) of the top iarg */   \
    X(SORT, "sort", ROW)           /* rows sorted ascending (iarg = 1: descending) */          \
    X(ONEHOT, "onehot", EW)        /* out[b,m,n] = one-hot of secret index in0[b,m] over n */  \
    X(GATHER, "gather", MM)        /* out = onehot in0 (m×k) · table in1 (k×n) */           \
    X(ROPE, "rope", EW)            /* rotate pairs by public angles, see below */              \
    X(REVEAL, "reveal", EW)        /* open in0 to party iarg (-1 = all) */                     \
    X(VIEW, "view", EW)            /* free re-layout (slice/concat/transpose): local */

typedef enum op_kind {
#define X(e, s, c) OP_##e,
    OP_KINDS(X)
#undef X
        OP_N_KINDS
} op_kind;

typedef enum op_shape_class { OPS_EW, OPS_MM, OPS_ROW } op_shape_class;

/* Categories used by every breakdown (rounds, bytes, time per category). */
#define OP_CATS(X)              \
    X(EMBED, "embed")           \
    X(NORM, "norm")             \
    X(ATTENTION, "attention")   \
    X(SOFTMAX, "softmax")       \
    X(FFN, "ffn")               \
    X(ACTIVATION, "activation") \
    X(LMHEAD, "lmhead")         \
    X(POLICY, "policy")         \
    X(OTHER, "other")

typedef enum op_cat {
#define X(e, s) OPC_##e,
    OP_CATS(X)
#undef X
        OPC_N
} op_cat;

typedef enum op_phase { PHASE_PREFILL, PHASE_DECODE, PHASE_N } op_phase;

/* Who owns a tensor's values. */
typedef enum op_role {
    OPT_TEMP,   /* intermediate secret value */
    OPT_INPUT,  /* the client's private input (tokens) */
    OPT_WEIGHT, /* the model owner's private weights (fixed across steps) */
    OPT_CACHE,  /* secret state carried across steps (KV cache) */
    OPT_PUBLIC, /* public constant known to all parties (RoPE angles, masks) */
    OPT_OUTPUT, /* revealed result */
    OPT_N_ROLES
} op_role;

typedef enum op_dom { DOM_ARITH, DOM_BOOL } op_dom;

#define OP_NONE UINT32_MAX

/* Op flags. */
#define OPF_FIXED_B \
    0x1u /* right operand is fixed across uses (weights): its opened mask is reused */
#define OPF_PUBLIC_B 0x2u       /* right operand is public */
#define OPF_NO_TRUNC 0x4u       /* integer product, no fixed-point truncation (one-hot, masks) */
#define OPF_TRANS_B 0x8u        /* right operand is used transposed (q·Kᵀ) */
#define OPF_SPLIT_HEADS 0x10u   /* VIEW: (seqs·tokens, heads·n) → (seqs·heads, tokens, n) */
#define OPF_MERGE_HEADS 0x20u   /* VIEW: (seqs·heads, tokens, n) → (seqs·tokens, heads·n) */
#define OPF_INDEX_ROWS 0x40u    /* VIEW: in0's rows at the public indices in1 */
#define OPF_INDEX_COLS 0x80u    /* VIEW: in0's columns at the public indices in1 */
#define OPF_INDEX_BLOCKS 0x100u /* VIEW: public block indicator in0 → unit indices (above) */
#define OPF_IN_PLACE 0x200u     /* VIEW: in0 written into out in place (above) */

typedef struct op_tensor {
    char name[48];
    uint8_t role; /* op_role */
    uint8_t dom;  /* op_dom */
    uint32_t batch, rows, cols;
} op_tensor;

typedef struct op {
    uint16_t kind;    /* op_kind */
    uint8_t phase;    /* op_phase */
    uint8_t cat;      /* op_cat */
    int16_t layer;    /* -1 when not in a layer */
    int16_t group;    /* KV head group, -1 when all heads */
    uint32_t batch;   /* vectorized instances (heads) */
    uint32_t m, k, n; /* shapes, see op_kind shape class */
    uint32_t in[3];   /* operand tensor ids, OP_NONE if unused */
    uint32_t out;     /* result tensor id */
    uint32_t flags;   /* OPF_* */
    int32_t iarg;     /* kind-specific integer (top-k k, trunc bits, reveal party, causal offset) */
    double farg;      /* kind-specific real (public scalar, eps) */
    uint8_t bits;     /* public bound on the compared operands' bits (lt, eq, onehot, max,
                       * argmax, topk, sort; kern.c): 0 = the whole ring; text form w= */
} op;

typedef struct op_program {
    char model[64];
    op *ops;
    size_t n_ops, cap_ops;
    op_tensor *tens;
    size_t n_tens, cap_tens;
} op_program;

void op_program_init(op_program *p);
void op_program_free(op_program *p);
void op_program_clear(op_program *p); /* keeps capacity */

/* Adds a tensor and returns its id, or OP_NONE on allocation failure. */
uint32_t op_tensor_add(op_program *p, const char *name, op_role role, op_dom dom, uint32_t batch,
                       uint32_t rows, uint32_t cols);
/* Finds a tensor by name; OP_NONE if absent. */
uint32_t op_tensor_find(const op_program *p, const char *name);
/* The one spelling of a layer's tensor names, shared by the lowering, the policies' ops and
 * the secure session's binders: "L<layer>.<name>", or name alone for layer < 0, cut to 47
 * characters as snprintf would. */
void op_layer_name(char full[48], int layer, const char *name);
/* op_tensor_find of op_layer_name(layer, name). */
uint32_t op_layer_find(const op_program *p, int layer, const char *name);
/* The party an INPUT op o's tensor comes from among n_parties: the client's input from P0,
 * the weights from P1, any other from o->iarg (P0 when out of range). */
int op_input_owner(const op_program *p, const op *o, int n_parties);
/* The layer of a name "L<layer>.<rest>" and where its rest starts (rest may be NULL); -1 for a
 * name of no layer. */
int op_layer_of(const char *full, const char **rest);
/* Appends an op (copied) and returns its index, or -1 on allocation failure. */
long op_emit(op_program *p, const op *o);

/* Elements an op produces (b·m·n, or b·m·n for MM), and the MACs of a matmul/gather. */
uint64_t op_out_elems(const op *o);
uint64_t op_macs(const op *o);

const char *op_kind_name(int kind);
const char *op_cat_name(int cat);
const char *op_phase_name(int phase);
const char *op_role_name(int role);
op_shape_class op_kind_shape(int kind);
int op_kind_from_name(const char *s); /* -1 if unknown */
int op_cat_from_name(const char *s);
int op_phase_from_name(const char *s);

/* Writes / reads the text form documented above. op_read reports "path:line: error: …". */
int op_write(const op_program *p, FILE *f);
int op_read(op_program *p, FILE *f, const char *path, errbuf *e);

/* Invariant checker for asserts: every operand id in range, shapes consistent. */
int op_program_is_sane(const op_program *p);

#endif
