/* kern_var.h — kernel variants: for each family of kernels with more than one construction
 * (msb, topk, exp, normalize, approx, trunc) an enum, resolved once from the protocol config's
 * names when an engine is configured (kern_configure) and read by the kernels as e->kv. Each
 * family's table of {name, kernel, source} rows lives beside its kernels (kern_int.h); a new
 * variant is one kernel function, one enum value and one table row (and its name in
 * proto_cfg.c's schema). A framework cost profile is one row of kern_compat.c's table: a
 * variant per family. */
#ifndef MPCSIM_KERN_VAR_H
#define MPCSIM_KERN_VAR_H

typedef enum {
    KV_MSB_PACKED,
    KV_MSB_KS,
    KV_MSB_CARRY,
    KV_MSB_SPU,
    KV_MSB_CRYPTEN,
    KV_MSB_N
} kv_msb;
typedef enum { KV_TOPK_NETWORK, KV_TOPK_QUICKSELECT, KV_TOPK_CRYPTEN, KV_TOPK_N } kv_topk;
typedef enum { KV_EXP_POW2, KV_EXP_TAYLOR, KV_EXP_PADE, KV_EXP_N } kv_exp;
typedef enum {
    KV_NORM_BITDEC,
    KV_NORM_THRESHOLDS,
    KV_NORM_SPU,
    KV_NORM_CRYPTEN,
    KV_NORM_N
} kv_norm;
typedef enum {
    KV_APPROX_PUMA,
    KV_APPROX_SIGMOID,
    KV_APPROX_SPU,
    KV_APPROX_CRYPTEN,
    KV_APPROX_N
} kv_approx;
typedef enum { KV_TRUNC_PAIR, KV_TRUNC_LOCAL, KV_TRUNC_SPU, KV_TRUNC_N } kv_trunc;
/* Framework cost profiles (protocol key compat; kern_compat.c): native is mpcsim's own
 * constructions, named by the family keys; a framework's profile fixes every family's variant
 * to the one that framework runs. */
typedef enum { KV_COMPAT_NATIVE, KV_COMPAT_SPU, KV_COMPAT_CRYPTEN, KV_COMPAT_N } kv_compat;

typedef struct kern_conf {
    kv_msb msb;
    kv_topk topk;
    kv_exp exp;
    kv_norm normalize;
    kv_approx approx;
    kv_trunc trunc;   /* the protocol engines' truncation (proto_cfg.trunc_local) */
    kv_compat compat; /* the profile the variants came from (proto_cfg.compat) */
} kern_conf;

#endif
