/* simulate.h — discrete-event simulation of a costed op program on a network.
 *
 * Each party runs its rounds in program order: it computes the round's local work (time from
 * the machine profile), sends its messages (serialized per directed link: arrival =
 * max(send time, link free) + bytes·8/bandwidth + latency), and waits for the messages
 * addressed to it before its next round. With opts.overlap, rounds of independent ops (no data
 * dependency in the op program) may proceed concurrently. Integer nanoseconds; events ordered
 * by (time, seq), so every run is bit-for-bit reproducible. */
#ifndef MPCSIM_SIMULATE_H
#define MPCSIM_SIMULATE_H

#include <stdint.h>
#include <stdio.h>

#include "machine.h"
#include "net.h"
#include "protocols/program/op.h"
#include "protocols/program/proto.h"

/* Reusable scratch memory for consecutive sim_run calls (optional): saves allocating and
 * page-faulting the per-round arrays for every step. */
typedef struct sim_ws sim_ws;
sim_ws *sim_ws_new(void);
void sim_ws_free(sim_ws *w);

typedef struct sim_opts {
    int overlap;     /* 1: independent ops may overlap (default 0, as SPU) */
    FILE *timeline;  /* if set, Chrome trace JSON events of this simulation are written */
    uint64_t t0_ns;  /* start time offset (for timelines of consecutive steps) */
    int event_queue; /* 1: run on the event queue (des.h) instead of the one-pass
                      * evaluation in program order; the results are identical */
    sim_ws *ws;      /* scratch to reuse across calls, or NULL */
} sim_opts;

/* Aggregates for one op category (or one layer). */
typedef struct sim_stats {
    uint64_t rounds;
    uint64_t bytes_sent[MPC_PARTIES_MAX];    /* online, by sender */
    uint64_t offline_bytes[MPC_PARTIES_MAX]; /* dealer→party */
    uint64_t compute_ns;                     /* critical-path time spent computing */
    uint64_t comm_ns;                        /* critical-path time spent waiting on the network */
} sim_stats;

typedef struct sim_result {
    uint64_t latency_ns; /* online wall time from first round to last arrival */
    sim_stats total;
    sim_stats cat[OPC_N];
    sim_stats *layer; /* [n_layers], allocated by sim_run, freed by sim_result_free */
    size_t n_layers;
    uint64_t events; /* events: one send per party and round, one per message */
} sim_result;

int sim_run(const net_cfg *net, const machine_profile *mach, const op_program *prog,
            const cost_log *log, const sim_opts *opts, sim_result *res, errbuf *e);
void sim_result_free(sim_result *r);

/* A timeline file holds the events of any number of sim_run calls (give each its t0_ns):
 * write sim_timeline_begin first and sim_timeline_end last. Times are in µs as Chrome's trace
 * format (chrome://tracing, ui.perfetto.dev) expects; pid = party, tid 0 = ops, 1 = compute,
 * 2 + d = the link to party d. */
void sim_timeline_begin(FILE *f, int n_parties);
void sim_timeline_end(FILE *f);
/* r += s (latency adds: steps run one after another) */
int sim_result_accumulate(sim_result *r, const sim_result *s);

#endif
