/* kern_compat.c — framework cost profiles (protocol key compat): for each framework, the
 * variant of every kernel family it runs, so that `compat: spu` costs and executes each op as
 * that framework does. native keeps the family keys (msb, topk, exp, normalize, approx, trunc)
 * as the configuration names them. A new framework is one enum value (kern_var.h), one row
 * here (with the protocols it has), its name in proto_cfg.c's schema, and the variants it
 * needs in the families' tables.
 * The counts each profile must produce are in PRIMITIVES.md "Framework profiles", derived
 * from the framework's source; tests/check_compat.c pins them. */
#include <stdio.h>
#include <string.h>

#include "kern_int.h"

const kv_compat_row kv_compat_tab[KV_COMPAT_N] = {
    [KV_COMPAT_NATIVE] = {"native", -1, -1, -1, -1, -1, -1, "mpcsim's own constructions", NULL,
                          NULL},
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
                       "SecretFlow SPU 0.9.3b0 (libspu, commit a1411c5)", NULL, NULL},
    /* CrypTen (facebookresearch/CrypTen@775868a02d6dac50774ce376a55b01fbd8bd85b6, configs/
     * default.yaml for the defaults): two parties with a trusted third party dealing Beaver
     * triples (mpc.provider TFP/TTP), semi2k's dealer. Division by a public integer is local
     * on two parties (crypten/mpc/primitives/arithmetic.py 462-466: each share divided,
     * truncation toward zero), every comparison is _ltz (crypten/mpc/mpc.py 233-242): A2B by
     * the SPK adder on full words, bit 63, a one-bit B2A opening a 64-bit word; exp is the
     * limit (1 + x/2^8)^(2^8) (crypten/common/functions/approximations.py 34-52,
     * exp_iterations 8); the reciprocal and inv_sqrt CrypTen's Newton iterations from its
     * exp-based first guesses (normalize: crypten), GeLU and SiLU as CrypTen's erf and
     * sigmoid compute them (approx: crypten), its softmax with its row max (kern_act.c,
     * compat checks), equality its _eqz_2PC (mpc.py 244-274, the word circuit of kern_cmp.c
     * k_eqz), max and argmax along a row its _argmax_helper with max_method log_reduction
     * (crypten/common/functions/maximum.py, kern_cr.c), the max of two where(a >= b, a, b);
     * CrypTen has no sort or top-k: Batcher's network on its comparison and where, and k of
     * its argmaxes or that sort, whichever has fewer rounds (topk: crypten). aby3 is refused:
     * CrypTen's default (mpc.protocol: beaver) is additive sharing with the dealer; its three-party
     * replicated option (crypten/mpc/primitives/replicated.py, mul, square, truncate and
     * AND only, its conversions still dealt) is not modelled. PRIMITIVES.md "CrypTen"
     * derives each count. */
    [KV_COMPAT_CRYPTEN] = {"crypten", KV_MSB_CRYPTEN, KV_TOPK_CRYPTEN, KV_EXP_TAYLOR,
                           KV_NORM_CRYPTEN, KV_APPROX_CRYPTEN, KV_TRUNC_LOCAL,
                           "CrypTen (facebookresearch/CrypTen, commit 775868a)", "semi2k",
                           "the profile is CrypTen's default protocol, two parties with a "
                           "trusted third party (semi2k); its three-party replicated option "
                           "is not modelled"},
};

/* 1 when profile row r runs under protocol name (its protocol list names it, or it has none). */
static int compat_has(const kv_compat_row *r, const char *name)
{
    if (!r->protocols)
        return 1;
    size_t n = strlen(name);
    for (const char *p = strstr(r->protocols, name); p; p = strstr(p + 1, name))
        if ((p == r->protocols || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
            return 1;
    return 0;
}

size_t kern_compat_names(const char *pname, char *buf, size_t cap)
{
    size_t len = 0, k = 0;
    if (cap)
        buf[0] = 0;
    for (int v = 0; v < KV_COMPAT_N; v++)
        if (compat_has(&kv_compat_tab[v], pname)) {
            int w = snprintf(buf + len, cap > len ? cap - len : 0, "%s%s", k++ ? ", " : "",
                             kv_compat_tab[v].name);
            len += w > 0 ? (size_t)w : 0;
        }
    return len;
}

int kern_compat_check(const proto_cfg *cfg, errbuf *err)
{
    for (int v = 0; v < KV_COMPAT_N; v++) {
        const kv_compat_row *r = &kv_compat_tab[v];
        if (strcmp(r->name, cfg->compat) || compat_has(r, cfg->name))
            continue;
        return err_set(err, MS_ERR_INPUT, "error: compat: %s has no %s profile: %s", r->name,
                       cfg->name, r->why);
    }
    return MS_OK;
}
