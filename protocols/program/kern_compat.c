/* kern_compat.c — framework cost profiles (protocol key compat): for each framework, the
 * variant of every kernel family it runs, so that `compat: spu` costs and executes each op as
 * that framework does. native keeps the family keys (msb, topk, exp, normalize, approx, trunc)
 * as the configuration names them. A new framework is one enum value (kern_var.h), one row
 * here, its name in proto_cfg.c's schema, and the variants it needs in the families' tables.
 * The counts each profile must produce are in PRIMITIVES.md "Framework profiles", derived
 * from the framework's source; tests/check_compat.c pins them. */
#include "kern_int.h"

const kv_compat_row kv_compat_tab[KV_COMPAT_N] = {
    [KV_COMPAT_NATIVE] = {"native", -1, -1, -1, -1, -1, -1, "mpcsim's own constructions"},
    /* SecretFlow SPU 0.9.3b0 (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87):
     * truncation is TruncAPr (libspu/mpc/aby3/protocol.cc 28 and 71-75; semi2k
     * libspu/mpc/semi2k/protocol.cc 72-76), exp is exp_taylor with fxp_exp_iters 8
     * (libspu/core/config.cc 62-63, 77-78) or, with exp: pade, EXP_PADE (kern.c keeps that
     * key: SPU's fxp_exp_mode), the reciprocal and rsqrt SPU's (normalize: spu: Goldschmidt
     * after highestOneBit; f_rsqrt), GeLU and SiLU the PUMA/LLaMA hack functions as SPU runs
     * them (approx: spu), top-k a shuffle and QuickSelect (topk_1d) revealing its comparisons'
     * boolean bits (kern_sort.c k_qs_step), the sort SPU's _cmp_swap (k_cmp_exchange), equality
     * SPU's eqz (kern_cmp.c k_eqz_spu), msb SPU's Kogge-Stone
     * carry with narrowed levels (libspu/mpc/ab_api.cc 450-482), its boolean bit selecting by
     * mul_a1b. Softmax and LayerNorm follow the profile in kern_math.c (compat checks). */
    [KV_COMPAT_SPU] = {"spu", KV_MSB_SPU, KV_TOPK_QUICKSELECT, KV_EXP_TAYLOR, KV_NORM_SPU,
                       KV_APPROX_SPU, KV_TRUNC_SPU,
                       "SecretFlow SPU 0.9.3b0 (libspu, commit a1411c5)"},
};
