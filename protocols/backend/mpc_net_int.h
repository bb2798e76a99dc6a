/* mpc_net_int.h — what the channel layer's files share: the session object, a link's
 * transfer state, small helpers; not part of the interface (see mpc_net.h). mpc_net.c holds
 * set-up, framing and the transfer loop, mpc_net_dial.c connecting and accepting,
 * mpc_net_beat.c the heartbeat thread and the liveness check. */
#ifndef MPCSIM_MPC_NET_INT_H
#define MPCSIM_MPC_NET_INT_H

#include "mpc_net.h"
#include "mpc_tls.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define BEAT_MS 200 /* heartbeat period */
/* A heartbeat connection closed while its data link stays open this long is an error: a peer
 * that died closes both, and its data link's error (which names the cause) comes first. */
#define BEAT_GONE_GRACE_MS 1000
#define ACCEPT_PENDING_MAX 16 /* connections awaiting their hello or handshake at once */
#define BEAT_COUNT 0x80u      /* a beat's first byte: this bit, and the progress count */
#define HELLO_ACK 0xa5u       /* plaintext: the acceptor took the hello (TLS confirms instead) */

struct mpc_net {
    mpc_net_cfg cfg;
    int fd[MPC_NODES_MAX];
    /* heartbeats: a second connection per peer, served by a thread of its own so that a node
     * busy computing still beats, and a stopped or frozen one does not */
    int bfd[MPC_NODES_MAX];
    pthread_t beat;
    int beat_on;
    _Atomic int beat_stop;
    _Atomic uint64_t seen[MPC_NODES_MAX];    /* last byte from peer j's heartbeat (now_ns) */
    _Atomic int beat_gone[MPC_NODES_MAX];    /* its heartbeat connection closed */
    _Atomic uint64_t gone_at[MPC_NODES_MAX]; /* when (now_ns) */
    /* progress: every beat is two bytes, BEAT_COUNT | the low 7 bits of this node's count of
     * transfer passes that moved bytes, then the set of nodes this node's transfer awaits (bit
     * j: node j; 0 when it waits in none). A peer waiting on this node sees it busy with
     * another link (a slow one) rather than hung (prog_seen[j]: when peer j's count last
     * changed), and a no-progress error follows the awaited sets to the node that holds the
     * others up (peer_awaits[j]: peer j's set, from its last beat) */
    _Atomic uint32_t moved;
    _Atomic uint64_t prog_seen[MPC_NODES_MAX];
    _Atomic uint32_t awaits;
    _Atomic uint32_t peer_awaits[MPC_NODES_MAX];
    uint8_t beat_last[MPC_NODES_MAX], beat_out[MPC_NODES_MAX][2];
    uint32_t seq_out[MPC_NODES_MAX], seq_in[MPC_NODES_MAX];
    int closed_ok[MPC_NODES_MAX]; /* peer said goodbye: its EOF is expected */
    /* TLS (NULL: plaintext): one connection object per socket, and per peer the plaintext of
     * the record being written (a frame's bytes, one record at a time) */
    mpc_tls *tls;
    mpc_tls_conn *tc[MPC_NODES_MAX], *btc[MPC_NODES_MAX];
    uint8_t *stage[MPC_NODES_MAX];
    uint64_t wire0_sent[MPC_NODES_MAX], wire0_recv[MPC_NODES_MAX]; /* tc's counters after set-up */
    uint32_t op;
    mpc_net_stats st;
    mpc_net_tap tap;
    void *tap_ctx;
};

/* ---------------------------------------------------------------- time, names, headers */

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void sleep_until(uint64_t t)
{
    uint64_t now = now_ns();
    if (t <= now)
        return;
    struct timespec ts = {(time_t)((t - now) / 1000000000ull), (long)((t - now) % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static inline const char *node_name(const mpc_net_cfg *c, int j, char buf[16])
{
    if (j >= c->n_parties)
        snprintf(buf, 16, "dealer");
    else
        snprintf(buf, 16, "P%d", j);
    return buf;
}

static inline void put_hdr(uint8_t h[MPC_FRAME_HDR], int type, uint32_t op, uint32_t seq,
                           uint64_t len)
{
    uint32_t magic = MPC_FRAME_MAGIC;
    uint16_t ver = MPC_FRAME_VERSION, ty = (uint16_t)type;
    memcpy(h, &magic, 4);
    memcpy(h + 4, &ver, 2);
    memcpy(h + 6, &ty, 2);
    memcpy(h + 8, &op, 4);
    memcpy(h + 12, &seq, 4);
    memcpy(h + 16, &len, 8);
    uint64_t sent = now_ns(); /* for injected latency: delivery at send time + latency */
    memcpy(h + 24, &sent, 8);
}

static inline int wait_fd(int fd, short ev, int ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r;
}

typedef struct link_io {
    int out, in; /* a frame to send / to receive on this link */
    uint8_t ohdr[MPC_FRAME_HDR];
    const uint8_t *obuf;
    size_t olen, ooff; /* ooff counts header + payload */
    uint8_t ihdr[MPC_FRAME_HDR];
    uint8_t *ibuf;
    size_t ilen, ioff;
    int itype;
    uint64_t sent_ns; /* the sender's send time (frame header) */
    uint64_t rx_ns;   /* when the kernel received the bytes read last (0: unknown) */
    uint64_t done_ns;
    size_t stage_len; /* TLS: bytes of the record being written (0: none) */
    int wr_wants_rd;  /* TLS: the write waits for the socket to become readable */
} link_io;

/* mpc_net_beat.c */
void *net_beat_main(void *arg);
int net_xfer_beats(mpc_net *n, const link_io *io, uint64_t now, errbuf *e);

/* mpc_net_dial.c */
int net_dial(mpc_net *n, int j, int chan, uint64_t deadline, int *fd, mpc_tls_conn **tc, errbuf *e);
int net_accept_peers(mpc_net *n, int lfd, errbuf *e);

#endif
