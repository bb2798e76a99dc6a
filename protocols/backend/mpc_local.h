/* mpc_local.h — what both backend engines share: the common engine state, local share
 * arithmetic, and the uint64 matrix kernels (internal to protocols/backend/mpc_*.c). */
#ifndef MPCSIM_MPC_LOCAL_H
#define MPCSIM_MPC_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/program/eng.h"
#include "mpc_net.h"
#include "mpc_prg.h"

/* The first member of every backend engine's impl. */
typedef struct mpc_core {
    mpc_net *net;
    const struct mpc_backend *be; /* set by the registry after attach */
    int party;                    /* compute party index, or -1 for the dealer */
    int ns;       /* share slots per value: semi2k 1, aby3 2; the dealer holds no data (0) */
    int pub_slot; /* the slot holding component 0 (where public constants are added), or -1 */
    mpc_prg priv; /* this node's private randomness */
    errbuf err;
    uint64_t pub_n, pub_sum; /* public control values synced (eng sync_public): count, sum */
    uint64_t *tmp[6];        /* scratch vectors, grown on demand */
    size_t tmp_n[6];
} mpc_core;

int mpc_fail(mpc_core *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Scratch slot `slot` of at least n words, its contents undefined (a slot that grows is not
 * copied); NULL (and err set) on OOM. */
uint64_t *mpc_tmp(mpc_core *c, int slot, size_t n);
/* A zeroed byte buffer of len in scratch slot k; NULL (and err set) on OOM. */
uint8_t *mpc_tmp_bytes(mpc_core *c, int slot, size_t len);
/* The same buffer not zeroed, for a caller that writes or receives all len bytes before any is
 * read or sent (a packed message, a round's receive buffer). */
uint8_t *mpc_tmp_bytes_w(mpc_core *c, int slot, size_t len);
void mpc_core_free(mpc_core *c);

/* 1 when v has the shape of this node's share of a value: a known domain, a share slot for each
 * of the node's ns shares (semi2k 1, aby3 2, the dealer none) and none beyond. Asserted by
 * mpc_ensure under MPCSIM_CHECKED; that the shares of the nodes reconstruct the value (and that
 * aby3's replicated copies agree) is checked across nodes by the loopback tests. */
int mpc_val_is_sane(const mpc_core *c, const mpc_val *v);
/* (Re)allocates z for n elements in dom, keeping its storage if it already fits. */
int mpc_ensure(mpc_core *c, mpc_val *z, size_t n, int dom);

/* The local half of eng_vt shared by both engines. */
int mpc_l_alloc(eng *e, mpc_val *v, size_t n, int dom);
int mpc_l_alloc_w(eng *e, mpc_val *v, size_t n, int dom);
void mpc_l_release(eng *e, mpc_val *v);
int mpc_l_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y);
int mpc_l_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y);
int mpc_l_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *cst, size_t nc);
int mpc_l_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *cst, size_t nc);
int mpc_l_shift(eng *e, mpc_val *z, const mpc_val *x, int s);
int mpc_l_place2(eng *e, mpc_val *z, const mpc_val *x, int l, uint64_t ml, const mpc_val *y, int r,
                 uint64_t mr);
/* The replicated AND's local part on two placed words (eng_vt.and_placed), one pass:
 * al[i] = (al[i] ^ A0 & B0 ^ A0 & B1 ^ A1 & B0) & mask, A_t and B_t the placed words of
 * share slot t (0, 1) of a and b at element i. al (the zero share) is none of their storage. */
void mpc_l_and_placed(uint64_t *al, const eng_placed *a, const eng_placed *b, uint64_t mask,
                      size_t n);
int mpc_l_permute(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n);
int mpc_l_concat(eng *e, mpc_val *z, const mpc_val *parts, int np);
int mpc_l_scatter(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n);

/* One backend engine, as the engine registry (mpc_eng.c) knows it: attach fills e->vt and
 * e->impl and exchanges the keys; detach frees e->impl; the beaver cache hooks are optional. */
typedef struct mpc_backend {
    const char *name;  /* the protocol (proto_cfg.name) */
    const char *nodes; /* who the three nodes are, for messages */
    int (*attach)(eng *e, mpc_net *net, errbuf *err);
    void (*detach)(eng *e);
    int (*setup_fixed)(eng *e, uint32_t y_id, const mpc_val *y, const char *name);
    void (*unbind_fixed)(eng *e);
} mpc_backend;

extern const mpc_backend mpc_backend_semi2k; /* mpc_semi2k.c */
extern const mpc_backend mpc_backend_aby3;   /* mpc_aby3.c */

/* C (m×n) += A (m×k) · B, B read as k×n, or as n×k when trans_b. Row-major, Z_2^64. */
void mpc_mm_acc(uint64_t *C, const uint64_t *A, const uint64_t *B, size_t m, size_t k, size_t n,
                int trans_b);
/* Batched: Z[b] += X[b]·Y[b / (batch / y_inst)] for b < batch: Y holds y_inst instances, each
 * shared by batch / y_inst consecutive instances of X (op.h: GQA heads, one weight). */
void mpc_mm_batch(uint64_t *Z, const uint64_t *X, const uint64_t *Y, uint32_t batch, size_t m,
                  size_t k, size_t n, int trans_b, uint32_t y_inst);
/* The instances of a matmul's right operand (y_n / kn) if they divide batch, else 0. */
uint32_t mpc_mm_y_inst(size_t y_n, uint32_t batch, size_t kn);

/* Packed messages (PRIMITIVES.md, msb: packed): the bits of mask of each of n words, each
 * element padded to a whole byte, written from byte ⌈*pos/8⌉ of buf (*pos counts bits) / read
 * back into words (other bits 0); the pack2 forms put an element's bits of w1 and w2
 * together (w1's in the low pc bits). *pos advances by n·⌈pc/8⌉ (n·⌈2pc/8⌉) bytes. A
 * non-contiguous mask is gathered with PEXT/PDEP where the CPU has BMI2, else in software. */
void mpc_pack_bits(uint8_t *buf, size_t *pos, const uint64_t *w, size_t n, uint64_t mask);
void mpc_unpack_bits(uint64_t *w, size_t n, uint64_t mask, const uint8_t *buf, size_t *pos);
void mpc_pack2_bits(uint8_t *buf, size_t *pos, const uint64_t *w1, const uint64_t *w2, size_t n,
                    uint64_t mask);
void mpc_unpack2_bits(uint64_t *w1, uint64_t *w2, size_t n, uint64_t mask, const uint8_t *buf,
                      size_t *pos);
/* 1: the software gather/scatter even where BMI2 exists (tests compare both paths). */
void mpc_pack_force_software(int on);
/* n·⌈bits/8⌉: a packed message of n elements of `bits` bits each */
static inline size_t mpc_packed_bytes(size_t n, int bits) { return n * (((size_t)bits + 7) / 8); }

/* Shuffle helpers (eng.h shuffle): pi = the permutation of each run of seg elements drawn
 * from M words w (Fisher–Yates; the same words give the same permutation at every node that
 * holds them; modulo bias below M/2^64); out[p·M + i] = v[p·M + π(i)] over the parts (out
 * must not alias v). */
void mpc_perm_from(uint32_t *pi, const uint64_t *w, size_t M, size_t seg);
void mpc_perm_apply(uint64_t *out, const uint64_t *v, const uint32_t *pi, size_t M, size_t parts);

/* Arithmetic shift right of a two's complement ring element. */
static inline uint64_t mpc_sar(uint64_t x, int s) { return (uint64_t)((int64_t)x >> s); }

#endif
