/* opb.h — the op builder: the one way to append tensors and ops to an op program.
 *
 * The lowering (models/lower.c), the policy registry (sim/policy/policy.c) and every policy's
 * selection ops build their part of a step's op program through this interface, so a policy
 * written outside the tree builds its ops as the built-in ones do. It adds nothing to the op
 * program's meaning (op.h documents the ops, their shapes and operand conventions); it names
 * tensors, fills in the fields every op of one builder shares and keeps the first failure.
 *
 * A builder appends to one op_program it does not own (the program must outlive the builder).
 * Its ops all carry the builder's phase and layer and the group -1 (every KV head); their
 * category is the builder's `cat` unless given per op (opb_op_cat).
 *
 * Names. A tensor named `nm` through a builder is "L<layer>.<prefix><nm>" (op_layer_name; the
 * prefix keeps one policy's tensors apart from another's, "" for none), or "<prefix><nm>" for
 * layer -1; opb_tensor_as and opb_find_as take a complete name instead. Names are cut to 47
 * characters as op_layer_name cuts them.
 *
 * Failure. Every function that adds a tensor or an op may fail (out of memory, or an op whose
 * result is OP_NONE because the tensor before it failed): the builder then sets `failed`, adds
 * nothing more, and every later call adds nothing and returns OP_NONE. A caller
 * emits its whole sequence and checks opb_failed once at the end; the program then holds a
 * prefix of the sequence and is to be discarded. Builders never print.
 *
 * Memory. opb_init allocates nothing; opb_index (optional) allocates a name index that
 * opb_release frees. A builder without an index needs no release (it is harmless). */
#ifndef MPCSIM_OPB_H
#define MPCSIM_OPB_H

#include <stdint.h>

#include "op.h"

struct opb_names; /* the name index (private) */

typedef struct opb {
    op_program *prog;        /* the program appended to (not owned) */
    int phase;               /* op_phase of every op */
    int layer;               /* layer of every op and of the names, -1 for none */
    int failed;              /* nonzero after the first failure (sticky) */
    int cat;                 /* op_cat of the ops opb_op emits; callers may change it between ops */
    const char *prefix;      /* prefix of the names (not owned; "" or NULL for none) */
    struct opb_names *names; /* NULL unless opb_index built one */
} opb;

/* A builder for prog's ops of one phase and layer (-1: none), category cat, names prefixed by
 * prefix (NULL: none). Allocates nothing. */
void opb_init(opb *b, op_program *prog, int phase, int layer, int cat, const char *prefix);

/* Builds an index of the program's tensor names (those present and those added through this
 * builder afterwards), so opb_find and the opb_shared family look a name up in O(1) instead of
 * scanning every tensor: for a builder that adds thousands of tensors (the lowering). Tensors
 * added to the program by other means while the index exists are not indexed. Failure sticks. */
void opb_index(opb *b);
/* Frees the index, if any. The builder stays usable (without an index). */
void opb_release(opb *b);

/* Nonzero after a failure (see Failure above). */
int opb_failed(const opb *b);

/* The complete name of nm under this builder (see Names above). */
void opb_name(const opb *b, char full[48], const char *nm);

/* A new tensor nm (role, DOM_ARITH, batch × rows × cols): its id, or OP_NONE. A name already
 * present is added again (lookups find the first). */
uint32_t opb_tensor(opb *b, const char *nm, op_role role, uint32_t batch, uint32_t rows,
                    uint32_t cols);
/* As opb_tensor with the complete name full (no layer, no prefix). */
uint32_t opb_tensor_as(opb *b, const char *full, op_role role, uint32_t batch, uint32_t rows,
                       uint32_t cols);
/* The first tensor named nm (complete name, as opb_name forms it), or OP_NONE when there is
 * none or after a failure. Adds nothing. */
uint32_t opb_find(opb *b, const char *nm);
/* As opb_find with a complete name. */
uint32_t opb_find_as(opb *b, const char *full);
/* The first tensor named nm whatever its role and shape (a weight, state shared by several
 * ops), else a new one as opb_tensor adds it. */
uint32_t opb_shared(opb *b, const char *nm, op_role role, uint32_t batch, uint32_t rows,
                    uint32_t cols);
/* The first tensor named nm if it has this role and batch · rows · cols elements (another
 * module's tensor of that name: the lowering's, a weight), else a new one. */
uint32_t opb_matching(opb *b, const char *nm, op_role role, uint32_t batch, uint32_t rows,
                      uint32_t cols);

/* Appends the op kind (op.h: shapes batch, m, k, n; operands in0..in2, OP_NONE when unused;
 * result out; flags OPF_*; iarg, farg as the kind reads them) with the builder's category.
 * Returns out, or OP_NONE when out is OP_NONE, after a failure, or when the append fails. */
uint32_t opb_op(opb *b, int kind, uint32_t batch, uint32_t m, uint32_t k, uint32_t n, uint32_t in0,
                uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags, int32_t iarg,
                double farg);
/* As opb_op with the category cat (op_cat) for this op only. */
uint32_t opb_op_cat(opb *b, int cat, int kind, uint32_t batch, uint32_t m, uint32_t k, uint32_t n,
                    uint32_t in0, uint32_t in1, uint32_t in2, uint32_t out, uint32_t flags,
                    int32_t iarg, double farg);

/* Views (VIEW ops: local, no communication). Each returns its result (a new tensor nm) or
 * OP_NONE. */
/* x (B, R, C) → (B, C, R): each instance transposed. */
uint32_t opb_transpose(opb *b, uint32_t x, uint32_t B, uint32_t R, uint32_t C, const char *nm);
/* Rows [r0, r0 + n) of each of the B instances of x (B, ≥ r0 + n, C): a public slice. */
uint32_t opb_rows(opb *b, uint32_t x, uint32_t B, uint32_t r0, uint32_t n, uint32_t C,
                  const char *nm);
/* Writes x (B, n, C) at row r0 of each instance of out (B, ≥ r0 + n, C). */
void opb_put(opb *b, uint32_t x, uint32_t out, uint32_t B, uint32_t r0, uint32_t n, uint32_t C);
/* As opb_put, out updated in place (OPF_IN_PLACE): only x's B·n·C elements move, where
 * opb_put re-lays all of out. For a stack that many writes fill (every layer's rows). */
void opb_write(opb *b, uint32_t x, uint32_t out, uint32_t B, uint32_t r0, uint32_t n, uint32_t C);

/* Products with a public right operand (no truncation: integer counts, 0/1 masks). */
/* out (M × n elements) = x (M rows of k) · pub (k × n, public): one MATMUL of batch 1 with
 * OPF_PUBLIC_B | OPF_NO_TRUNC. Returns out, or OP_NONE. */
uint32_t opb_matmul_pub(opb *b, uint32_t x, uint32_t pub, uint32_t M, uint32_t k, uint32_t n,
                        uint32_t out);
/* Column sums of oh (B, k, n) (a one-hot's counts per column): a new tensor nm (B, n, 1),
 * through a transposition "<nm>_t" and a public column of ones "<nm>_ones" (k × 1, shared by
 * name as opb_shared: the binder fills it once). nm is cut to 40 characters in the two derived
 * names. */
uint32_t opb_colsum(opb *b, uint32_t oh, uint32_t B, uint32_t k, uint32_t n, const char *nm);
/* x (B, n) repeated r times: a new tensor nm (B, r, n), row i of each instance a copy of its
 * row, by a product with a public row of ones "<nm>_ones" (1 × r, shared by name) into
 * "<nm>_t" (B, n, r) and a transposition (local, no truncation). nm is cut to 40 characters in
 * the two derived names. */
uint32_t opb_repeat(opb *b, uint32_t x, uint32_t B, uint32_t n, uint32_t r, const char *nm);

#endif
