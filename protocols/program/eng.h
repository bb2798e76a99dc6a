/* eng.h — the primitive layer both the cost model and the real backend implement.
 *
 * The kernels (kern.c) are written once against this table: with a cost engine each primitive
 * appends its rounds/bytes/work to a cost_log and touches no data; with a backend engine
 * (mpc_*.c) it computes on this party's shares and exchanges real messages. The kernels branch
 * only on eng->n_parties / eng->cfg, never on which engine they run on.
 *
 * Values are vectors of n ring elements (Z_2^64). Arithmetic values are fixed point with
 * cfg->frac_bits fraction bits unless a kernel says otherwise. Boolean values hold 64 shared
 * bits per element (XOR sharing). A party's share layout is the engine's business: semi2k
 * parties hold one share per element (s[0]); aby3 parties hold two (s[0], s[1]). In cost mode
 * both are NULL.
 */
#ifndef MPCSIM_ENG_H
#define MPCSIM_ENG_H

#include <stddef.h>
#include <stdint.h>

#include "kern_var.h"
#include "proto.h"

typedef struct mpc_val {
    size_t n;       /* elements */
    uint8_t dom;    /* DOM_ARITH | DOM_BOOL */
    uint64_t *s[2]; /* this party's share(s); NULL in cost mode */
} mpc_val;

/* Primitives, for cost attribution (cost_round.prim) and the per-primitive cost table. */
#define ENG_PRIMS(X)       \
    X(INPUT, "input")      \
    X(OPEN, "open")        \
    X(LOCAL, "local")      \
    X(MUL, "mul")          \
    X(SQUARE, "square")    \
    X(MATMUL, "matmul")    \
    X(TRUNC, "trunc")      \
    X(AND, "and_bb")       \
    X(B2A, "b2a")          \
    X(RESHARE, "reshare")  \
    X(ANDBITS, "and_bits") \
    X(PAIR, "bool_pair")   \
    X(B2ABIT, "b2a_bit")   \
    X(SHUFFLE, "shuffle")  \
    X(MULA1B, "mul_a1b")   \
    X(B2AWORD, "b2a_word")

typedef enum eng_prim {
#define X(e, s) PRIM_##e,
    ENG_PRIMS(X)
#undef X
        PRIM_N
} eng_prim;
const char *eng_prim_name(int p);

typedef struct eng eng;

/* A word placed from two (eng_vt.place2): (x << l) & ml ^ (y << r) & mr. */
typedef struct eng_placed {
    const mpc_val *x, *y;
    int l, r;
    uint64_t ml, mr;
} eng_placed;

typedef struct eng_vt {
    /* storage */
    int (*alloc)(eng *e, mpc_val *v, size_t n, int dom);
    /* Optional (NULL: alloc): storage the caller writes in full before reading any of it, so
     * not zeroed (kern_core.c kal_w). */
    int (*alloc_w)(eng *e, mpc_val *v, size_t n, int dom);
    void (*release)(eng *e, mpc_val *v);

    /* local (no communication); z may alias x or y */
    int (*add)(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y); /* arith +, bool ^ */
    int (*sub)(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y); /* arith only */
    /* z = x + c (c public, nc == 1 broadcasts; arith: ring add; bool: xor) */
    int (*add_pub)(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc);
    /* z = x * c in the ring, no truncation (arith); bool: z = x & c */
    int (*mul_pub)(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc);
    /* bool: z = x >> s (logical, s > 0) or x << -s, per element word */
    int (*shift)(eng *e, mpc_val *z, const mpc_val *x, int s);
    /* Local conversion for A2B: boolean sharings of the additive components of x
     * (2 for semi2k: x0, x1; 3 for aby3: x1, x2, x3). Returns the count in *nc. */
    int (*bool_components)(eng *e, mpc_val comps[3], int *nc, const mpc_val *x);
    /* Moves a value to a layout slice: z[i] = x[idx[i]] (public index), local */
    int (*permute)(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n);
    /* z = [parts[0]; parts[1]; …] (local, one pass over the result): z is allocated by the
     * caller for the parts' total length in parts[0]'s domain and is none of the parts. */
    int (*concat)(eng *e, mpc_val *z, const mpc_val *parts, int np);
    /* Optional (NULL: the kernel re-lays z whole): z[idx[i]] = x[i] for i < n, z's other
     * elements as they were — z (allocated, its own length) is updated in place and is not x.
     * idx is NULL where values carry no shares (cost mode, the dealer). Local, n elements
     * written. */
    int (*scatter)(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n);
    /* Optional (NULL: composed of shift, mul_pub and add): bool z = (x << l) & ml ^
     * (y << r) & mr per element word (negative l, r shift right; |l|, |r| >= 64 give 0), one
     * pass with no temporary; z may alias x or y. Local. */
    int (*place2)(eng *e, mpc_val *z, const mpc_val *x, int l, uint64_t ml, const mpc_val *y, int r,
                  uint64_t mr);

    /* communicating */
    int (*input)(eng *e, mpc_val *z, int owner, const uint64_t *plain); /* owner shares plain */
    int (*open)(eng *e, uint64_t *out, const mpc_val *x, int to);       /* to = party or -1 all */
    int (*mul)(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y); /* ring product */
    int (*square)(eng *e, mpc_val *z, const mpc_val *x);
    /* z[b] = x[b] (m×k) · y[b] (k×n) for b < batch, ring product; flags OPF_FIXED_B reuses
     * y's opened mask across calls (SPU beaver cache), OPF_TRANS_B reads y as n×k. y_id names
     * the fixed operand for the cache (tensor id) and is ignored otherwise. */
    int (*matmul)(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t batch,
                  uint32_t m, uint32_t k, uint32_t n, uint32_t flags, uint32_t y_id);
    int (*and_bb)(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y);
    int (*trunc)(eng *e, mpc_val *z, const mpc_val *x, int bits);
    int (*b2a)(eng *e, mpc_val *z, const mpc_val *x); /* bit 0 of x → arithmetic 0/1 */
    /* z = a · bit 0 of the boolean b, arithmetic (SPU mul_a1b, compat: spu selects; semi2k:
     * one Beaver product of ((1 − 2b_i)·a_i, b_i); aby3: two three-party OTs, PRIMITIVES.md) */
    int (*mul_a1b)(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b);

    /* Bit-packed boolean circuits (msb: packed; PRIMITIVES.md). Messages carry only the bits
     * that matter, each element padded to a whole byte (n·⌈bits/8⌉ bytes). */
    /* z = x & y on the bits of the public word mask (the other bits of z are 0); the opened
     * and reshared words carry popcount(mask) bits per element. priv (semi2k): x is P0's own
     * word and y P1's own (the other party's share is 0, as bool_pair makes them), so each
     * party opens only its operand. */
    int (*and_bits)(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint64_t mask,
                    int priv);
    /* Optional (NULL: place2 twice, then and_bits): z = and_bits(place2(a), place2(b), mask,
     * 0), the operands placed inside the AND's local pass instead of written out first (the
     * carry tree's levels); the same round and message as and_bits. z is none of the four
     * placed values. */
    int (*and_placed)(eng *e, mpc_val *z, const eng_placed *a, const eng_placed *b, uint64_t mask);
    /* Two boolean words a, b with a + b = x (mod 2^bits), bits >= bits zero: semi2k: x0 and
     * x1 (local); aby3: a = x0 + x1 reshared by P0 (1 round, bits per element to P2), b = x2. */
    int (*bool_pair)(eng *e, mpc_val *a, mpc_val *b, const mpc_val *x, int bits);
    /* Bit 0 of x → arithmetic 0/1 with a daBit (a random bit shared both ways by the dealer;
     * aby3: P2 deals it to P0 and P1), the masked bit opened packed. */
    int (*b2a_bit)(eng *e, mpc_val *z, const mpc_val *x);
    /* Optional (NULL: the protocol has none): z = Σ_{j<bits} 2^j·x_j, the low bits of the
     * boolean word x as one arithmetic value, as SPU converts (compat: spu's reciprocal and
     * rsqrt): semi2k B2A_Randbit (the dealer's random bits shared both ways, x ^ r opened in
     * SPU's storage type for bits: 1, 2, 4 or 8 bytes); aby3 B2ASelector (B2AByOT up to 8
     * bits, B2AByPPA above; PRIMITIVES.md). */
    int (*b2a_word)(eng *e, mpc_val *z, const mpc_val *x, int bits);
    /* Optional (NULL: the protocol has none): SPU's eqz before its AND tree (compat: spu's
     * equality): z (boolean word) = ~(c ^ r), all 64 bits 1 iff x = 0, with r a random word
     * shared both ways and c = x + r opened: semi2k to both parties (the dealer deals r; 1
     * round, 8n each way); aby3 to P1 (P0 deals r to P2, 16n; P2 sends P1 its part of c, 8n;
     * P1 returns P2 the flag's third component, 8n: 3 rounds). PRIMITIVES.md. */
    int (*eqz_spu)(eng *e, mpc_val *z, const mpc_val *x);
    /* Optional (NULL: the protocol has none): bit 0 of the boolean x opened to all as SPU's
     * b2p reveals a comparison's bit, in SPU's storage for it (compat: spu's QuickSelect):
     * semi2k the ring's word (8n each way), aby3 one byte per element on each link i→i−1. */
    int (*open_bit)(eng *e, uint64_t *out, const mpc_val *x);

    /* Secret shuffle (arithmetic): x holds `parts` equal parts of M elements, M a multiple of
     * seg; each run of seg consecutive elements of a part is permuted by a fresh secret
     * permutation that no party knows, the same one for that run in every part (a key and its
     * payloads travel together). semi2k: P0's then P1's permutation, each with a dealer
     * permutation correlation; aby3: three pairwise permutations (PRIMITIVES.md). */
    int (*shuffle)(eng *e, mpc_val *z, const mpc_val *x, size_t seg, size_t parts);
    /* A public control value every compute party already agrees on (a count derived from
     * revealed values) made known to the nodes that cannot derive it: semi2k's dealer receives
     * it from P0 (8 bytes, party→dealer, outside the rounds) and returns it in *v. No-op
     * elsewhere and in cost mode. */
    int (*sync_public)(eng *e, uint64_t *v);
    /* Optional (NULL: nothing to do): tensor z_id is elements idx[0..n) of the fixed operand
     * y_id (a public re-layout, VIEW with OPF_FIXED_B); z_id's cached opened mask is y_id's
     * restricted to them, so a matmul by z_id opens nothing more (semi2k beaver cache). No
     * communication. idx is NULL in cost mode; idx[i] = UINT32_MAX is a zero element (its
     * mask and opened value 0: a pad row of a public selection, kern.c k_view_index). */
    int (*fixed_view)(eng *e, uint32_t z_id, uint32_t y_id, const uint32_t *idx, size_t n);
    /* Optional (NULL: nothing to do): z, just REVEALed to every compute party (plaintext in
     * z->s[0]), made known to the nodes that hold no shares — semi2k's dealer receives it from
     * P0 (8 bytes an element, party→dealer, outside the rounds) — because a later op's
     * correlated randomness may depend on it: a fixed operand's rows at revealed indices (the
     * dealer's C = A·B[idx] of the restricted mask). No-op in cost mode. */
    int (*publish)(eng *e, mpc_val *z);
} eng_vt;

struct eng {
    const eng_vt *vt;
    const proto *pr;
    proto_cfg cfg;
    kern_conf kv; /* cfg's kernel variants, resolved by kern_configure */
    int n_parties;
    int party;       /* this party's index (backend); 0 in cost mode */
    uint32_t cur_op; /* op index being executed, for cost attribution */
    void *impl;      /* engine-private state */
};

void eng_free(eng *e);

#endif
