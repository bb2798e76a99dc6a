/* eng_plain.h — a clear-text fixed-point engine: the eng.h table on plain values in Z_2^64.
 *
 * The kernels run on it exactly as on a cost engine or a backend, so it is the numerical
 * reference of every composite (exp, softmax, rsqrt, …) and the plaintext the backend's
 * reconstructed outputs are compared against. Each value holds its clear ring elements in
 * s[0]. Truncation reproduces the protocols' probabilistic rounding: trunc(x, b) is
 * floor(x / 2^b) plus 1 with probability (x mod 2^b) / 2^b (TruncPr; ABY3 Share Truncation I
 * and SecureML have the same ±1 ulp behaviour), drawn from a seeded PRG (exact_trunc = 1
 * gives floor). bool_components splits x into n_parties pseudo-random additive components,
 * so the A2B adders see real carries. The large-error event of aby3 / local truncation
 * (probability <= 2^(l_x+1-64), PRIMITIVES.md) is not reproduced. */
#ifndef MPCSIM_ENG_PLAIN_H
#define MPCSIM_ENG_PLAIN_H

#include "eng.h"

/* Creates a plain engine behaving as an n_parties protocol (2 or 3) with config cfg. */
int eng_plain_new(const proto_cfg *cfg, int n_parties, uint64_t seed, int exact_trunc, eng **out);

/* Number of calls of each primitive so far (communicating and local), for tests. */
const uint64_t *eng_plain_calls(const eng *e);

#endif
