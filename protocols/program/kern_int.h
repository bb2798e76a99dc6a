/* kern_int.h — what the kernel families share (private to protocols/program/kern*.c):
 * storage helpers, fixed-point products and layout moves (kern_core.c), comparisons, one-hot and
 * bit decomposition (kern_cmp.c), exp, reciprocal, rsqrt, activations, softmax and norms
 * (kern_math.c), max, sort and top-k (kern_sort.c); kern.c dispatches ops to them. The
 * conventions every kernel follows are at the top of kern.c. */
#ifndef MPCSIM_KERN_INT_H
#define MPCSIM_KERN_INT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kern.h"

#define VT (e->vt)
#define TRY(expr)         \
    do {                  \
        int rc_ = (expr); \
        if (rc_)          \
            return rc_;   \
    } while (0)

#define FX(x) fx_encode((x), e->cfg.frac_bits)

/* Index-map permutes: z[i] = x[map(i)] for the maps the kernels use. */
enum { MAP_REP, MAP_BCAST, MAP_SLICE, MAP_ROWS };

typedef struct kmap {
    int kind;
    size_t a, b, c, d; /* REP: n_in; BCAST: per; SLICE: off; ROWS: L, off, len */
} kmap;

static inline int has_data(const mpc_val *v) { return v->s[0] != NULL; }
static inline uint64_t lowbits(int b) { return b >= 64 ? ~0ull : (1ull << b) - 1; }
static inline uint64_t bitrange(int lo, int hi) { return lowbits(hi) & ~lowbits(lo < 0 ? 0 : lo); }

/* ---- kern_core.c: storage, public buffers, layout moves, fixed-point products, row sums, rope,
 * public matmul */
int kal(eng *e, mpc_val *v, size_t n, int dom);
int kal_w(eng *e, mpc_val *v, size_t n, int dom);
void krel(eng *e, mpc_val *v);
int pub64(const mpc_val *like, size_t n, uint64_t **out);
int pub32(const mpc_val *like, size_t n, uint32_t **out);
int k_move(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n, int dom);
int kperm(eng *e, mpc_val *z, const mpc_val *x, size_t n, kmap m);
int k_rep(eng *e, mpc_val *z, const mpc_val *x, size_t reps);
int k_bcast(eng *e, mpc_val *z, const mpc_val *x, size_t per);
int k_slice(eng *e, mpc_val *z, const mpc_val *x, size_t off, size_t len);
int k_cols(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t L, size_t off, size_t len);
int k_concat(eng *e, mpc_val *z, const mpc_val *parts, int np);
int k_addc(eng *e, mpc_val *z, const mpc_val *x, uint64_t c);
int k_mulc(eng *e, mpc_val *z, const mpc_val *x, uint64_t c);
int k_scaled(eng *e, mpc_val *z, const mpc_val *x, uint64_t c);
int k_addmul(eng *e, mpc_val *z, const mpc_val *x, uint64_t c);
int k_addblk(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *blk, size_t J, int mul);
int k_const(eng *e, mpc_val *z, const mpc_val *x, size_t n, uint64_t c);
int k_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits);
int k_fmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y);
int k_imul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y);
int k_fsq(eng *e, mpc_val *z, const mpc_val *x);
int k_mul_batch(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b, int np, int bits);
int k_unbatch(eng *e, mpc_val *out, const mpc_val *x, int cnt, size_t n);
int k_poly_raw(eng *e, mpc_val *z, mpc_val *const pw[7], const double a[7]);
int k_split(eng *e, const mpc_val *x, size_t R, size_t L, mpc_val *A, mpc_val *B, mpc_val *rest);
int k_rejoin(eng *e, mpc_val *cur, mpc_val *S, mpc_val *rest, size_t R, size_t h, int odd);
int k_rowsum(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t L);
int k_blocksum(eng *e, mpc_val *z, const mpc_val *x, size_t J, size_t N);
int k_rope(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t m, size_t n, size_t hd, long pos0,
           double theta);
int k_matmul_pub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t b, uint32_t m,
                 uint32_t k, uint32_t n, int trans);

/* ---- kern_cmp.c: A2B, msb, comparisons, equality, select, one-hot, bit decomposition */
int k_a2b(eng *e, mpc_val *z, const mpc_val *x);
int k_a2b_spu(eng *e, mpc_val *z, const mpc_val *x);
int k_andc(eng *e, mpc_val *z, const mpc_val *x, uint64_t mask);
int k_packed(const eng *e);
int k_msb(eng *e, mpc_val *z, const mpc_val *d);
int k_lt(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w);
int k_eqz(eng *e, mpc_val *z, const mpc_val *d, int wb);
int k_eq(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w);
int k_select(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *a, const mpc_val *b);
int k_select_cr(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *a, const mpc_val *b);
int k_lt_bool(const eng *e); /* 1: the msb variant keeps comparisons boolean (msb: spu) */
int k_lt_b(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int w);
int k_select_bit(eng *e, mpc_val *z, const mpc_val *c, const mpc_val *a, const mpc_val *b);
int k_iota(eng *e, mpc_val *z, const mpc_val *like, size_t R, size_t n);
int idx_bits(size_t n);
int k_onehot_w(eng *e, mpc_val *z, const mpc_val *idx, size_t n, int w);
int k_onehot(eng *e, mpc_val *z, const mpc_val *idx, size_t n);
int k_bitdec(eng *e, mpc_val *sb, mpc_val *zb, const mpc_val *x, int w, int cm, int zlo, int zhi);
int k_hibit(eng *e, mpc_val *H, const mpc_val *x, int w);

/* ---- kern_math.c: exp, reciprocal, rsqrt, activations, softmax, norms */
int k_exp(eng *e, mpc_val *z, const mpc_val *x);
int k_recip(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w);
int k_rsqrt(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w);
int k_gelu(eng *e, mpc_val *z, const mpc_val *x);
int k_silu(eng *e, mpc_val *z, const mpc_val *x);
int k_softmax(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t m, size_t n, long causal);
int k_norm(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int centre, double eps,
           const mpc_val *g, int g_pub, const mpc_val *bias, int b_pub);

/* ---- kern_sort.c: max, argmax, sort, top-k */
int k_rowmax(eng *e, mpc_val *mx, mpc_val *ix, const mpc_val *x, size_t R, size_t L, int w);
int k_argmax(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int w);
int k_sort(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int w, int desc);
int k_topk(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w);

/* ---- variant tables (kern_var.h): a row per variant, indexed by its enum */
typedef struct kv_msb_row {
    const char *name;
    int (*fn)(eng *e, mpc_val *z, const mpc_val *d, int w); /* z = msb(d), d's bound w */
    const char *source;
    /* optional: msb(d) as a boolean bit (bit 0), kept boolean for k_select_bit */
    int (*bfn)(eng *e, mpc_val *z, const mpc_val *d, int w);
} kv_msb_row;
typedef struct kv_topk_row {
    const char *name;
    int (*fn)(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w);
    int shuffles; /* 1: needs the engine's shuffle and sync_public */
    const char *source;
} kv_topk_row;
typedef struct kv_exp_row {
    const char *name;
    int (*fn)(eng *e, mpc_val *z, const mpc_val *x);
    const char *source;
} kv_exp_row;
typedef struct kv_norm_row {
    const char *name;
    int (*recip)(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w);
    int (*rsqrt)(eng *e, mpc_val *z, const mpc_val *x, int jlo, int w);
    const char *source;
} kv_norm_row;
typedef struct kv_approx_row {
    const char *name;
    int (*gelu)(eng *e, mpc_val *z, const mpc_val *x);
    int (*silu)(eng *e, mpc_val *z, const mpc_val *x);
    const char *source;
} kv_approx_row;
typedef struct kv_trunc_row {
    const char *name;
    const char *source; /* the kernel is each protocol's eng_vt.trunc */
} kv_trunc_row;
/* A framework cost profile: each family's variant, or -1 for what the family's key names. */
typedef struct kv_compat_row {
    const char *name;
    int msb, topk, exp, normalize, approx, trunc;
    const char *source;
    const char *protocols; /* the protocols the framework has ("semi2k"), NULL: every one */
    const char *why;       /* why the others are refused */
} kv_compat_row;
extern const kv_msb_row kv_msb_tab[KV_MSB_N];          /* kern_cmp.c */
extern const kv_topk_row kv_topk_tab[KV_TOPK_N];       /* kern_sort.c */
extern const kv_exp_row kv_exp_tab[KV_EXP_N];          /* kern_math.c */
extern const kv_norm_row kv_norm_tab[KV_NORM_N];       /* kern_math.c */
extern const kv_approx_row kv_approx_tab[KV_APPROX_N]; /* kern_math.c */
extern const kv_trunc_row kv_trunc_tab[KV_TRUNC_N];    /* kern.c */
extern const kv_compat_row kv_compat_tab[KV_COMPAT_N]; /* kern_compat.c */

/* ---- kern_cr.c: CrypTen's max and argmax (compat: crypten) */
/* Its max along rows of L (*mx, NULL: dropped) and argmax one-hot (*oh, NULL: dropped). */
int k_rowmax_cr(eng *e, mpc_val *mx, mpc_val *oh, const mpc_val *x, size_t R, size_t L);
/* The max of rows of L: L = 2 where(a >= b, a, b), else k_rowmax_cr's. */
int k_max_cr(eng *e, mpc_val *mx, const mpc_val *x, size_t R, size_t L);

/* CrypTen's Newton reciprocal of a positive x (kern_math.c; reciprocal_all_pos). */
int k_recip_nr(eng *e, mpc_val *z, const mpc_val *x);
/* SPU's EXP_PADE (kern_act.c), the exp variant "pade" of kern_math.c's table. */
int k_exp_pade(eng *e, mpc_val *z, const mpc_val *x);

#endif
