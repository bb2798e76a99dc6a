/* mpc_eng.h — the real backend's engines (eng.h implemented on secret shares over mpc_net).
 *
 * mpc_engine_new makes the engine of one node of a connected mesh: a compute party of semi2k
 * (nodes 0, 1; node 2 is the dealer) or aby3 (nodes 0, 1, 2), and exchanges the PRG keys
 * (semi2k: dealer→party seeds; aby3: pairwise keys for zero sharings), counted as setup traffic.
 *
 * The semi2k dealer runs the same primitive sequence as the parties (same program through the
 * same kernels) on an engine that holds no data: each primitive that needs correlated
 * randomness derives P0's and P1's parts from the two seeds and sends P1 the correction
 * (PRIMITIVES.md), so no request ever goes party→dealer. */
#ifndef MPCSIM_MPC_ENG_H
#define MPCSIM_MPC_ENG_H

#include "protocols/program/eng.h"
#include "mpc_net.h"

/* Creates the engine for node mpc_net_self(net). cfg->name selects the protocol. */
int mpc_engine_new(const proto_cfg *cfg, mpc_net *net, eng **out, errbuf *err);
void mpc_engine_free(eng *e);
/* The sentence of the last failing primitive (empty if none). */
const char *mpc_engine_error(const eng *e);
int mpc_engine_is_dealer(const eng *e);
/* The public control values this node synced so far (eng sync_public): count and sum. */
void mpc_engine_pub_counts(const eng *e, uint64_t *n, uint64_t *sum);

/* semi2k beaver cache: opens y's mask once (setup traffic, one setup round) so later matmuls with
 * OPF_FIXED_B and this y_id send only the left operand's mask. With a name, a mask opened for
 * that name (same size) in an earlier program is reused under the new id, with no traffic: the
 * cached (B_i, Y − B) stand for the weight's value whatever its current shares. No-op for aby3
 * or with cfg.beaver_cache off. Every node calls it at the same point of the program. */
int mpc_engine_setup_fixed(eng *e, uint32_t y_id, const mpc_val *y, const char *name);
/* Forgets which tensor ids the cached masks belong to (a new program numbers its tensors anew);
 * the masks stay, found again by name. */
void mpc_engine_unbind_fixed(eng *e);

/* Public plaintext as a trivial sharing (no communication): party 0 holds it in component 0. */
int mpc_engine_share_public(eng *e, mpc_val *z, const uint64_t *plain, size_t n, int dom);

#endif
