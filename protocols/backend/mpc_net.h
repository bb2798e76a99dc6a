/* mpc_net.h — the backend's transport: a full TCP mesh between the parties (and the dealer),
 * framed messages, and the counters the validation compares with the cost engine.
 *
 * Nodes are numbered 0..n_nodes-1: the compute parties first, then the dealer (if any). Node i
 * connects to every node j < i and accepts every node j > i; each connection starts with a
 * plaintext HELLO frame naming the node, its frame version and whether TLS follows (so a peer of
 * another version or security mode gets a clear error, not a handshake failure); the accepting
 * side answers with the TLS handshake, or without TLS with one acknowledgement byte, and a
 * dialler whose hello was dropped (the connection closed instead) dials again.
 *
 * Security: by default every connection (data and heartbeat) then runs TLS 1.3 with mutual
 * authentication by per-node certificates (mpc_tls.h): the connecting side accepts only the
 * node it dialled, the accepting side only the node the hello claimed, each by a certificate
 * of the session's CA. cfg.plaintext (`--insecure-plaintext`) turns this off for loopback
 * experiments. Under TLS every frame is written as its own run of records of at most
 * MPC_TLS_RECORD plaintext bytes, the first one starting with the frame header, so a frame of m
 * bytes costs ceil(m / MPC_TLS_RECORD) · MPC_TLS_OVERHEAD bytes more on the wire (the cost
 * model's net_wire.tls_*); the payload counters below are the same with or without TLS.
 *
 * Every message is one frame: a 32-byte header (magic "MPCF", version, type, op index, sequence
 * number, payload length, the sender's send time) followed by the payload. Payload bytes are
 * counted per directed link; header bytes are counted apart, as overhead.
 *
 * A "round" (PRIMITIVES.md) is one call of mpc_net_round: this node issues all its sends of the
 * round, then receives the messages addressed to it, with non-blocking sockets polled together
 * so a large message can never deadlock. Every compute party calls mpc_net_round for every round
 * of a primitive, even when it has nothing to send or receive in it, so all parties count the
 * same rounds. Dealer→party traffic (correlated randomness) is not a round: it goes through
 * mpc_net_send_offline / mpc_net_recv_offline and is counted as offline bytes.
 *
 * Failure: a peer that dies or drops its connection is seen at once (EOF/RST on any link, polled
 * in every wait); a heartbeat connection that closes while the data link stays open is an error
 * after a second; a silent peer times out after timeout_ms without progress, where a peer whose
 * heartbeat shows it moving bytes with another node (its link there is slow) is not silent;
 * a frame whose
 * header, type, sequence or length is not the expected one is rejected. All of these return an
 * error with the full sentence in the errbuf; nothing here exits or hangs. */
#ifndef MPCSIM_MPC_NET_H
#define MPCSIM_MPC_NET_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"

#define MPC_NODES_MAX 4             /* 3 compute parties + a dealer */
#define MPC_FRAME_MAGIC 0x4643504du /* "MPCF" little endian */
#define MPC_FRAME_VERSION                                                                  \
    5 /* 3: the hello says whether TLS follows; 4: a plaintext hello is acknowledged; 5: a \
       * heartbeat is two bytes, the progress count and the set of nodes the sender awaits */
#define MPC_HELLO_TLS 0x100u /* hello seq flag: a TLS handshake follows the hello */
#define MPC_FRAME_HDR 32
#define MPC_LIVENESS_MS 5000 /* heartbeat silence that makes a peer frozen */

enum { MPC_FR_HELLO = 1, MPC_FR_DATA = 2, MPC_FR_OFFLINE = 3, MPC_FR_SETUP = 4, MPC_FR_BYE = 5 };

/* A frame header as read from the wire, before any check. */
typedef struct mpc_frame {
    uint32_t magic, op, seq;
    uint16_t ver, type;
    uint64_t len, sent_ns;
} mpc_frame;

void mpc_frame_decode(const uint8_t h[MPC_FRAME_HDR], mpc_frame *f);
/* MS_OK if the header is this build's frame of the expected type, sequence number and payload
 * length; else MS_ERR_PROTO saying what differs. */
int mpc_frame_check(const mpc_frame *f, int type, uint32_t seq, uint64_t len, errbuf *e);
/* A connecting peer's first frame: its node id if it is a HELLO of this frame version that fits
 * node self of an n_nodes session (only nodes above self connect to it) and announces the same
 * security mode (tls: a TLS handshake follows), and its channel (0 data, 1 heartbeat); else
 * MS_ERR_PROTO saying what differs. */
int mpc_net_hello_parse(const uint8_t h[MPC_FRAME_HDR], int n_nodes, int self, int tls, int *id,
                        int *chan, errbuf *e);

typedef struct mpc_net_cfg {
    int self;                      /* this node's id */
    int n_nodes;                   /* parties + dealer */
    int n_parties;                 /* compute parties; node n_parties is the dealer */
    char host[MPC_NODES_MAX][128]; /* every node's address */
    int port[MPC_NODES_MAX];
    int listen_fd;          /* already-listening socket for self, or -1 to bind */
    int timeout_ms;         /* no-progress timeout of every wait once connected:
                             * rounds, dealer backpressure, set-up messages, the
                             * goodbye, a hello, a TLS handshake (default 5000) */
    int liveness_ms;        /* a peer waited on whose heartbeat is silent this
                             * long is frozen (0 = MPC_LIVENESS_MS) */
    int connect_timeout_ms; /* how long to wait for every peer to start: connect
                             * retries, and the dialled peer's TLS handshake,
                             * which waits until it accepts (default 10000) */
    int plaintext;          /* 1: no TLS (--insecure-plaintext) */
    char keys[512];         /* the key folder (mpc_tls.h) unless plaintext */
    struct mpc_tls *tls;    /* or its keys already loaded (a launcher's forked node: no
                             * folder on disk), taken over by mpc_net_open */
    uint64_t latency_ns;    /* injected one-way latency per round message: a
                             * message arrives this long after the kernel received
                             * its last bytes (SO_TIMESTAMPNS), as on a link;
                             * without a receive time, after its send time */
} mpc_net_cfg;

/* Counters. sent[j]/recv[j]: online payload bytes this node sent to / received from node j in
 * rounds; offline_*: dealer channel; setup_*: setup exchanges (weight sharing, key exchange). */
typedef struct mpc_net_stats {
    uint64_t sent[MPC_NODES_MAX], recv[MPC_NODES_MAX];
    uint64_t offline_sent[MPC_NODES_MAX], offline_recv[MPC_NODES_MAX];
    uint64_t setup_sent[MPC_NODES_MAX], setup_recv[MPC_NODES_MAX];
    uint64_t hdr_sent, hdr_recv; /* frame header overhead, all kinds */
    /* bytes on the data connection to / from node j after its set-up: frames, and under TLS
     * their records' framing (the heartbeat connections are not counted) */
    uint64_t wire_sent[MPC_NODES_MAX], wire_recv[MPC_NODES_MAX];
    uint64_t tls_hs_sent, tls_hs_recv; /* TLS handshakes, every connection (0: plaintext) */
    int tls_conns;                     /* connections that ran a TLS handshake */
    uint64_t rounds;                   /* online rounds (PRIMITIVES.md) */
    uint64_t setup_rounds;
    uint64_t msgs_sent;
} mpc_net_stats;

typedef struct mpc_net mpc_net;

void mpc_net_cfg_init(mpc_net_cfg *c, int self, int n_nodes);
/* Parses "host:port,host:port,…" (n entries) into c->host/c->port. */
int mpc_net_parse_peers(mpc_net_cfg *c, const char *list, int n, errbuf *e);

/* Binds and listens on host:port (port 0 = any); *actual_port receives the bound port. A port
 * in use is ERR_NET with a sentence saying so. */
int mpc_net_listen(const char *host, int port, int *fd, int *actual_port, errbuf *e);

/* Connects the mesh (takes ownership of cfg->listen_fd). */
int mpc_net_open(const mpc_net_cfg *cfg, mpc_net **out, errbuf *e);
/* Goodbye barrier: tells every peer this node is done and waits until every peer is done, so no
 * connection closes while a peer still uses it. Then closes. */
int mpc_net_finish(mpc_net *n, errbuf *e);
void mpc_net_free(mpc_net *n);

/* One round. send[j]/slen[j]: the message to node j (slen 0 = none); recv[j]/rlen[j]: the
 * message expected from node j (rlen 0 = none). setup != 0 counts it as setup traffic. */
int mpc_net_round(mpc_net *n, const void *const *send, const size_t *slen, void *const *recv,
                  const size_t *rlen, int setup, errbuf *e);
/* Start barrier among the compute parties (the dealer returns at once): a header-only setup
 * frame to every other party, then each party's frame awaited. TCP delivers in order, so on
 * return every earlier message from every party has been read here: traffic still queued on
 * the links (one-way setup sends complete once the socket buffer holds them) is drained before
 * a timed span starts. Counted as a setup round; no latency injected. */
int mpc_net_sync(mpc_net *n, errbuf *e);
/* Dealer channel (no round). */
int mpc_net_send_offline(mpc_net *n, int to, const void *buf, size_t len, errbuf *e);
int mpc_net_recv_offline(mpc_net *n, int from, void *buf, size_t len, errbuf *e);
/* Setup-time key exchange etc.: one message to / from one node, counted as setup. */
int mpc_net_send_setup(mpc_net *n, int to, const void *buf, size_t len, errbuf *e);
int mpc_net_recv_setup(mpc_net *n, int from, void *buf, size_t len, errbuf *e);

void mpc_net_set_op(mpc_net *n, uint32_t op); /* op index written into frame headers */
const mpc_net_stats *mpc_net_get_stats(const mpc_net *n);
int mpc_net_self(const mpc_net *n);
int mpc_net_nodes(const mpc_net *n);
/* Tests: every received payload (rounds and offline) is passed to tap after it arrives. */
typedef void (*mpc_net_tap)(void *ctx, int from, int type, const void *buf, size_t len);
void mpc_net_set_tap(mpc_net *n, mpc_net_tap tap, void *ctx);
/* The socket to node j (tests use it to drop a connection or write under TLS); -1 if none. */
int mpc_net_fd(const mpc_net *n, int j);
/* The heartbeat connection's socket to node j (tests close it under a running session); -1 if
 * none. */
int mpc_net_beat_fd(const mpc_net *n, int j);
/* Tests: writes len bytes as they are into the data channel to node j (inside TLS when on). */
int mpc_net_send_raw(mpc_net *n, int j, const void *buf, size_t len, errbuf *e);
int mpc_net_is_tls(const mpc_net *n);

#endif
