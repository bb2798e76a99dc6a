/* net.h — the network model: parties, directed links with latency and bandwidth.
 * A message's arrival = max(link free, send time) + bytes·8/bandwidth + latency; on a link
 * with a token bucket (burst_bytes > 0) the last byte leaves burst·8/bandwidth earlier, but
 * never before the send (sim/SIMULATION.md, "Token-bucket links"). */
#ifndef MPCSIM_NET_H
#define MPCSIM_NET_H

#include <stdint.h>

#include "err.h"
#include "proto.h"

typedef struct net_link {
    uint64_t latency_ns;   /* one-way propagation delay */
    double bandwidth_bps;  /* bits per second */
    uint64_t burst_bytes;  /* token bucket depth (Linux tbf "burst"); 0: serializing link */
} net_link;

typedef struct net_cfg {
    char name[32];
    int n_parties;
    net_link link[MPC_PARTIES_MAX][MPC_PARTIES_MAX]; /* [src][dst] */
    net_link dealer;                                 /* dealer→party (offline channel) */
} net_cfg;

/* Presets: "lan", "wan", "wan-spu" (values and sources in sim/net.c and sim/SIMULATION.md). */
int net_preset(const char *name, int n_parties, net_cfg *out, errbuf *e);
const char *const *net_preset_names(size_t *n);
/* Sets every link to the same values. */
void net_uniform(net_cfg *n, int n_parties, uint64_t latency_ns, double bandwidth_bps);

/* A preset name, or a custom uniform network "LATENCY/BANDWIDTH" ("20ms/300Mbps"; latency
 * units ns|us|ms|s, default ms; bandwidth bps|kbps|Mbps|Gbps, default Mbps). */
int net_parse(const char *spec, int n_parties, net_cfg *out, errbuf *e);
/* "50ms" → ns, "300Mbps" → bit/s; 0 on success, -1 if malformed. */
int net_time_ns(const char *s, uint64_t *out);
int net_rate_bps(const char *s, double *out);
/* Serialization time of a message on a link: round(bytes·8·1e9 / bandwidth) ns. */
uint64_t net_transfer_ns(const net_link *l, uint64_t bytes);
/* Sets burst_bytes on every link and the dealer channel. */
void net_set_burst(net_cfg *n, uint64_t burst_bytes);
/* Largest accepted burst_bytes (1 GiB) and the smallest nonzero one (one 1500-byte frame). */
#define NET_BURST_MAX (1ull << 30)
#define NET_BURST_MIN 1500u
/* The tbf burst `mpcsim validate --shape` gives a link of rate_bps: 1 ms of traffic, at least
 * 3100 bytes (two full frames); shared by sim/netshape.c and the simulated links. */
uint64_t net_tbf_burst_bytes(double rate_bps);

#endif
