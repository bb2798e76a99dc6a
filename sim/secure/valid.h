/* valid.h — the simulator against the real backend on the same op program: prediction (the
 * protocol's cost engine, then the discrete-event simulation on a network) beside what the
 * backend's transport counted and the wall time it took, for one step of a secure session. */
#ifndef MPCSIM_VALID_H
#define MPCSIM_VALID_H

#include <stdint.h>

#include "sim/engine/machine.h"
#include "sim/engine/net.h"
#include "netshape.h"
#include "results/rdb.h"
#include "secinf.h"

typedef struct valid_row {
    char item[80]; /* "stories260K:prefill" … */
    int phase;     /* PHASE_PREFILL | PHASE_DECODE */
    uint32_t n_tokens, kv_len;
    rdb_stats pred, meas; /* rounds (P0's) and online bytes sent by each party */
    uint64_t pred_offline, meas_offline;
    uint64_t pred_ns, meas_ns;    /* simulated latency; wall time until the last party is done */
    uint32_t ops, ops_mismatched; /* ops whose per-party rounds/bytes/offline differ */
    /* what each party wrote into its TCP streams in the ops' rounds: payload, frame headers and
     * TLS records' framing (net_wire_stream_bytes of every message; the measured figure is the
     * backend's mpc_op_stat.wire_sent); wire_mismatched: ops where they differ */
    uint64_t pred_wire[RDB_PARTIES], meas_wire[RDB_PARTIES];
    uint32_t wire_mismatched;
    char first_mismatch[160]; /* the first differing op, for messages */
} valid_row;

/* Predicts step s of session o on net/mach and compares it with the measured result r; the
 * on-wire bytes with net->wire's msg_bytes and TLS records (whatever its mtu). */
int valid_step(const secinf_opts *o, const secinf_result *r, uint32_t s, const net_cfg *net,
               const machine_profile *mach, valid_row *row, errbuf *e);

/* Stores the row (session, protocol, link figures as given). */
int valid_store(rdb *db, const char *session, const char *protocol, const valid_row *row,
                uint64_t latency_ns, double bandwidth_bps, const char *shaping, errbuf *e);

/* The loopback's own time per communication round of this protocol beyond the injected one-way
 * latency (an open of one element, repeated, with latency_ns injected; on the shaped network
 * when shape is not NULL): processing, system calls, scheduling and the injection's timer slack,
 * which the network model counts as link latency (TLS record processing too, unless
 * plaintext). A probe of its own, measured before the programs it helps predict. */
int valid_round_ns(const proto_cfg *cfg, uint64_t latency_ns, const netshape *shape, int plaintext,
                   uint64_t *ns, errbuf *e);

/* Relative error of a prediction, in percent of the measurement. */
double valid_err_pct(uint64_t pred, uint64_t meas);

#endif
