/* kern.h — the kernels: every op kind of the op program written once over the primitive layer
 * (eng.h). The cost model and the backend both execute ops through kern_exec, which is what
 * makes the simulator's bytes and rounds equal the backend's, by construction. */
#ifndef MPCSIM_KERN_H
#define MPCSIM_KERN_H

#include "eng.h"
#include "op.h"

/* Executes op p->ops[idx] on engine e. vals[t] is the value bound to tensor t (length
 * batch·rows·cols); the result is written to vals[op.out], allocating it if needed. In cost
 * mode values carry only their length. */
int kern_exec(eng *e, const op_program *p, size_t idx, mpc_val *vals, errbuf *err);

/* Resolves cfg's kernel variant names (msb, topk, exp, normalize, approx; trunc from
 * trunc_local) into kv, once, when an engine is configured. An empty name is the variant the
 * kernels fall back to (msb: ks; the others: their first). A framework profile (cfg->compat
 * other than native; kern_compat.c) then sets every family it names, whatever the family keys
 * say. MS_ERR_INPUT for an unknown name. */
int kern_configure(const proto_cfg *cfg, kern_conf *kv);
/* MS_OK if cfg's compat profile exists for protocol cfg->name; otherwise MS_ERR_INPUT with
 * the reason in err (a framework without that protocol: CrypTen has no three-party one). */
int kern_compat_check(const proto_cfg *cfg, errbuf *err);
/* The framework profiles protocol pname has, as "native, spu, crypten" into buf (cap bytes,
 * truncated); the length the full list takes. */
size_t kern_compat_names(const char *pname, char *buf, size_t cap);
/* The name of variant v of a family's table ("msb", "topk", "exp", "normalize", "approx",
 * "trunc", "compat"), or NULL. */
const char *kern_variant_name(const char *family, int v);

/* Comparators of layer (p, k) of Batcher's odd–even merge sort on n keys (the top-k network,
 * layers p = 1, 2, 4, … < n and k = p, p/2, …, 1); fills lo/hi (may be NULL) and returns the
 * count. */
size_t kern_oem_layer(size_t n, size_t p, size_t k, uint32_t *lo, uint32_t *hi);

/* compat: crypten's top-k (CrypTen has none; kern_cr.c): 1 when k successive argmaxes of a
 * row of n take no more rounds than the odd–even merge sort with the index travelling (the
 * route it takes), 0 for the sort. */
int kern_topk_cr_argmaxes(size_t n, size_t k);

/* Encodes/decodes a real as fixed point with f fraction bits in Z_2^64 (two's complement). */
uint64_t fx_encode(double x, int frac_bits);
double fx_decode(uint64_t v, int frac_bits);

#endif
