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
    char item[80];            /* "stories260K:prefill" … */
    int phase;                /* PHASE_PREFILL | PHASE_DECODE */
    uint32_t n_tokens, kv_len;
    rdb_stats pred, meas;     /* rounds (P0's) and online bytes sent by each party */
    uint64_t pred_offline, meas_offline;
    uint64_t pred_ns, meas_ns;/* simulated latency; wall time until the last party is done */
    uint32_t ops, ops_mismatched; /* ops whose per-party rounds/bytes/offline differ */
    char first_mismatch[160]; /* the first differing op, for messages */
} valid_row;

/* Predicts step s of session o on net/mach and compares it with the measured result r. */
int valid_step(const secinf_opts *o, const secinf_result *r, uint32_t s, const net_cfg *net,
               const machine_profile *mach, valid_row *row, errbuf *e);

/* Stores the row (session, protocol, link figures as given). */
int valid_store(rdb *db, const char *session, const char *protocol, const valid_row *row,
                uint64_t latency_ns, double bandwidth_bps, const char *shaping, errbuf *e);

/* The loopback's own time per communication round of this protocol beyond the injected one-way
 * latency (an open of one element, repeated, with latency_ns injected; on the shaped network
 * when shape is not NULL): processing, system calls, scheduling and the injection's timer slack,
 * which the network model counts as link latency. A probe of its own, measured before the
 * programs it helps predict. */
int valid_round_ns(const proto_cfg *cfg, uint64_t latency_ns, const netshape *shape, uint64_t *ns,
                   errbuf *e);

/* Relative error of a prediction, in percent of the measurement. */
double valid_err_pct(uint64_t pred, uint64_t meas);

#endif
