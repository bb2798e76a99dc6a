/* net.h — the network model: parties, directed links with latency and bandwidth.
 * A message's arrival = max(link free, send time) + bytes·8/bandwidth + latency; on a link
 * with a token bucket (burst_bytes > 0) the last byte leaves burst·8/bandwidth earlier, but
 * never before the send (sim/engine/SIMULATION.md, "Token-bucket links"). */
#ifndef MPCSIM_NET_H
#define MPCSIM_NET_H

#include <stdint.h>

#include "protocols/base/err.h"
#include "protocols/program/proto.h"

typedef struct net_link {
    uint64_t latency_ns;  /* one-way propagation delay */
    double bandwidth_bps; /* bits per second */
    uint64_t burst_bytes; /* token bucket depth (Linux tbf "burst"); 0: serializing link */
} net_link;

/* What a link carries besides the payload (sim/engine/SIMULATION.md, "Wire framing"). A message of
 * b payload bytes (plus msg_bytes of the transport's own header) is, with TLS (tls_record > 0),
 * written as ceil((b + msg_bytes) / tls_record) records of tls_overhead bytes more each; the
 * resulting stream is cut into TCP segments of at most mss = mtu − l3l4_bytes bytes, each
 * sent as a frame of l2_bytes + l3l4_bytes more; the receiver answers every ack_every segments
 * with a pure ACK frame (l2_bytes + l3l4_bytes) on the reverse link. mtu 0 (the default): the
 * link carries the payload only (net_wire_stream_bytes still says what the transport writes). */
typedef struct net_wire {
    uint32_t mtu;        /* IP packet size limit in bytes; 0: payload only */
    uint32_t l3l4_bytes; /* IP and TCP header bytes per segment */
    uint32_t l2_bytes;   /* link-layer bytes per frame that the rate counts */
    uint32_t ack_every;  /* data segments per pure ACK; 0: ACKs not counted */
    uint32_t msg_bytes;  /* the transport's header per message */
    uint32_t tls_record; /* TLS: plaintext bytes per record at most (RFC 8446: 16384); 0: no TLS */
    uint32_t tls_overhead; /* TLS: bytes each record adds (TLS 1.3 AEAD: 5 + 1 + 16 = 22) */
} net_wire;

/* Ethernet II, IPv4, TCP with timestamps (sim/engine/net.c gives the sources): mtu 1500, l3l4 52
 * (mss 1448), l2 14, an ACK every 2 segments, msg_bytes 0. */
#define NET_WIRE_TCP ((net_wire){.mtu = 1500, .l3l4_bytes = 52, .l2_bytes = 14, .ack_every = 2})
/* TLS 1.3 records (RFC 8446 §5.1, §5.2; sim/engine/net.c): set on a net_wire to add them. */
#define NET_WIRE_TLS13_RECORD 16384u
#define NET_WIRE_TLS13_OVERHEAD 22u
#define NET_WIRE_MTU_MIN 576u   /* IPv4's smallest datagram every host accepts (RFC 791) */
#define NET_WIRE_MTU_MAX 65535u /* IPv4's largest datagram */
#define NET_WIRE_HDR_MAX 512u   /* bound on l2_bytes, l3l4_bytes and msg_bytes */

typedef struct net_cfg {
    char name[32];
    int n_parties;
    net_link link[MPC_PARTIES_MAX][MPC_PARTIES_MAX]; /* [src][dst] */
    net_link dealer;                                 /* dealer→party (offline channel) */
    net_wire wire;                                   /* framing on every link; mtu 0: none */
} net_cfg;

/* Presets: "lan", "wan", "wan-spu", "lan-5g", "lan-3g", "lan-1g" (values and sources in
 * sim/engine/net.c and sim/engine/SIMULATION.md). */
int net_preset(const char *name, int n_parties, net_cfg *out, errbuf *e);
const char *const *net_preset_names(size_t *n);
/* One line on where a preset's figures come from; NULL for an unknown name. */
const char *net_preset_source(const char *name);
/* Sets every link to the same values. */
void net_uniform(net_cfg *n, int n_parties, uint64_t latency_ns, double bandwidth_bps);

/* A preset name, or a custom uniform network "LATENCY/BANDWIDTH" ("20ms/300Mbps",
 * "50ms/1Gbit/s"; latency units ns|us|ms|s, default ms; bandwidth as net_rate_bps, a unit
 * required). */
int net_parse(const char *spec, int n_parties, net_cfg *out, errbuf *e);
/* "50ms" → ns, "300Mbps" → bit/s; 0 on success, -1 if malformed. */
int net_time_ns(const char *s, uint64_t *out);
int net_rate_bps(const char *s, double *out);
/* Why net_rate_bps refuses s (a bare number, a byte unit, an unknown unit, out of range): a
 * phrase for a message; "" when it accepts s. */
const char *net_rate_why(const char *s);
/* A rate in the report's units: "10 Gbit/s", "300 Mbit/s", "64 kbit/s". */
void net_rate_str(double bps, char *out, size_t n);
/* Serialization time of a message on a link: round(bytes·8·1e9 / bandwidth) ns. */
uint64_t net_transfer_ns(const net_link *l, uint64_t bytes);
/* Wire framing: 0 when w is consistent (mtu 0, or NET_WIRE_MTU_MIN … MAX with l3l4_bytes below
 * it and every header at most NET_WIRE_HDR_MAX), else MS_ERR_INPUT with the reason. */
int net_wire_check(const net_wire *w, errbuf *e);
/* Bytes the transport writes into its TCP stream for a message of payload bytes: payload +
 * msg_bytes, plus tls_overhead per TLS record; 0 for an empty message. Independent of mtu. */
uint64_t net_wire_stream_bytes(const net_wire *w, uint64_t payload);
/* TCP segments of a message of payload bytes: ceil(stream bytes / mss); 0 for an empty message
 * or mtu 0. */
uint64_t net_wire_segments(const net_wire *w, uint64_t payload);
/* Bytes a link carries for a message of payload bytes sent while reverse_payload bytes flow the
 * other way in the same round: the payload, the transport header, TLS records' framing, every
 * segment's headers, and
 * the pure ACKs for the reverse message's segments interleaved with it, one per ack_every of
 * min(own, reverse) segments (the reverse message's other ACKs follow on an idle link). mtu 0:
 * the payload. */
uint64_t net_wire_bytes(const net_wire *w, uint64_t payload, uint64_t reverse_payload);
/* Sets burst_bytes on every link and the dealer channel. */
void net_set_burst(net_cfg *n, uint64_t burst_bytes);
/* Largest accepted burst_bytes (1 GiB) and the smallest nonzero one (one 1500-byte frame). */
#define NET_BURST_MAX (1ull << 30)
/* The bandwidths a link may have: 1 kbps (slower has no use, and makes every message of a
 * large model run for years) to 1 Pbps. */
#define NET_BW_MIN_BPS 1e3
#define NET_BW_MAX_BPS 1e15
/* Simulated times saturate here (2^56 ns, 2.3 years): a sum of a few such terms cannot wrap
 * 64 bits before the simulator sees it past the limit and refuses the program. */
#define NET_NS_MAX (1ull << 56)
#define NET_BURST_MIN 1500u
/* The tbf burst `mpcsim validate --shape` gives a link of rate_bps: 1 ms of traffic, at least
 * 3100 bytes (two full frames); shared by sim/secure/netshape.c and the simulated links. */
uint64_t net_tbf_burst_bytes(double rate_bps);

#endif
