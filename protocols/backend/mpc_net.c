/* mpc_net.c — TCP mesh, framing, counters, timeouts (see mpc_net.h). */
#include "mpc_net.h"
#include "mpc_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BEAT_MS 200 /* heartbeat period */
/* A heartbeat connection closed while its data link stays open this long is an error: a peer
 * that died closes both, and its data link's error (which names the cause) comes first. */
#define BEAT_GONE_GRACE_MS 1000
#define ACCEPT_PENDING_MAX 16 /* connections awaiting their hello at once */
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
    /* progress: every beat carries the low byte of this node's count of transfer passes that
     * moved bytes, so a peer waiting on this node sees it busy with another link (a slow one)
     * rather than hung; prog_seen[j] is when peer j's count last changed */
    _Atomic uint32_t moved;
    _Atomic uint64_t prog_seen[MPC_NODES_MAX];
    uint8_t beat_last[MPC_NODES_MAX], beat_out[MPC_NODES_MAX];
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

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
    uint64_t now = now_ns();
    if (t <= now)
        return;
    struct timespec ts = {(time_t)((t - now) / 1000000000ull), (long)((t - now) % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static const char *node_name(const mpc_net_cfg *c, int j, char buf[16])
{
    if (j >= c->n_parties)
        snprintf(buf, 16, "dealer");
    else
        snprintf(buf, 16, "P%d", j);
    return buf;
}

static const char *type_name(int t)
{
    switch (t) {
    case MPC_FR_HELLO: return "hello";
    case MPC_FR_DATA: return "round data";
    case MPC_FR_OFFLINE: return "offline data";
    case MPC_FR_SETUP: return "setup data";
    case MPC_FR_BYE: return "goodbye";
    default: return "unknown";
    }
}

static void put_hdr(uint8_t h[MPC_FRAME_HDR], int type, uint32_t op, uint32_t seq, uint64_t len)
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

void mpc_net_cfg_init(mpc_net_cfg *c, int self, int n_nodes)
{
    memset(c, 0, sizeof *c);
    c->self = self;
    c->n_nodes = n_nodes;
    c->n_parties = n_nodes;
    c->listen_fd = -1;
    c->timeout_ms = 5000;
    c->connect_timeout_ms = 10000;
}

int mpc_net_parse_peers(mpc_net_cfg *c, const char *list, int n, errbuf *e)
{
    const char *p = list;
    for (int i = 0; i < n; i++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[128];
        if (len == 0 || len >= sizeof item)
            return err_set(e, MS_ERR_USAGE,
                           "--peers: entry %d is empty or too long (want host:port)", i + 1);
        memcpy(item, p, len);
        item[len] = 0;
        char *colon = strrchr(item, ':');
        unsigned long long port;
        if (!colon || colon == item || parse_u64(colon + 1, &port) || port > 65535)
            return err_set(e, MS_ERR_USAGE, "--peers: entry %d '%s' is not host:port", i + 1, item);
        *colon = 0;
        snprintf(c->host[i], sizeof c->host[i], "%s", item);
        c->port[i] = (int)port;
        if (!end) {
            if (i + 1 != n)
                return err_set(
                    e, MS_ERR_USAGE,
                    "--peers: %d entries given, %d needed (parties, then the dealer if any)", i + 1,
                    n);
            return MS_OK;
        }
        p = end + 1;
    }
    return err_set(e, MS_ERR_USAGE, "--peers: more than the %d entries needed", n);
}

static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len,
                   errbuf *e)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc || !res)
        return err_set(e, MS_ERR_NET, "cannot resolve '%s': %s", host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return MS_OK;
}

int mpc_net_listen(const char *host, int port, int *fd_out, int *actual_port, errbuf *e)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = resolve(host, port, &ss, &sl, e);
    if (rc)
        return rc;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return err_set(e, MS_ERR_NET, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0) {
        int err = errno;
        close(fd);
        if (err == EADDRINUSE)
            return err_set(e, MS_ERR_NET,
                           "cannot listen on %s:%d: port already in use (another party or program "
                           "holds it; pick a free port in --peers)",
                           host, port);
        return err_set(e, MS_ERR_NET, "cannot listen on %s:%d: %s", host, port, strerror(err));
    }
    if (listen(fd, 8) != 0) {
        int err = errno;
        close(fd);
        return err_set(e, MS_ERR_NET, "listen on %s:%d: %s", host, port, strerror(err));
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    getsockname(fd, (struct sockaddr *)&got, &gl);
    if (actual_port)
        *actual_port = got.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&got)->sin6_port)
                                                 : ntohs(((struct sockaddr_in *)&got)->sin_port);
    *fd_out = fd;
    return MS_OK;
}

static void tune(int fd)
{
    int one = 1, big = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one,
               sizeof one); /* receive times: injected latency */
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* ---------------------------------------------------------------- the transfer loop */

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
    size_t stage_len; /* TLS: bytes of the record in n->stage[j] being written (0: none) */
    int wr_wants_rd;  /* TLS: the write waits for the socket to become readable */
} link_io;

static int lost(mpc_net *n, int j, const char *why, errbuf *e)
{
    char a[16], b[16];
    return err_set(e, MS_ERR_PEER,
                   "%s: connection to %s lost during op %u (%s): the peer crashed, was killed or "
                   "dropped the link",
                   node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), n->op, why);
}

static int tls_broken(mpc_net *n, int j, const char *why, errbuf *e)
{
    char a[16], b[16];
    return err_set(e, MS_ERR_PEER,
                   "%s: TLS failure on the link to %s during op %u (%s): the stream was altered or "
                   "the peer aborted",
                   node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), n->op, why);
}

/* A receive time on CLOCK_REALTIME (SO_TIMESTAMPNS) as our CLOCK_MONOTONIC, 0 if unusable. */
static uint64_t rx_mono(uint64_t rx)
{
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t mono = now_ns(), real = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    return rx && rx <= real && real - rx < mono ? mono - (real - rx) : 0;
}

void mpc_frame_decode(const uint8_t h[MPC_FRAME_HDR], mpc_frame *f)
{
    memcpy(&f->magic, h, 4);
    memcpy(&f->ver, h + 4, 2);
    memcpy(&f->type, h + 6, 2);
    memcpy(&f->op, h + 8, 4);
    memcpy(&f->seq, h + 12, 4);
    memcpy(&f->len, h + 16, 8);
    memcpy(&f->sent_ns, h + 24, 8);
}

int mpc_frame_check(const mpc_frame *f, int type, uint32_t seq, uint64_t len, errbuf *e)
{
    if (f->magic != MPC_FRAME_MAGIC)
        return err_set(e, MS_ERR_PROTO, "bad magic 0x%08x", f->magic);
    if (f->ver != MPC_FRAME_VERSION)
        return err_set(e, MS_ERR_PROTO, "version %u, this build speaks %d", f->ver,
                       MPC_FRAME_VERSION);
    if (f->type != type)
        return err_set(e, MS_ERR_PROTO, "a %s frame, %s expected", type_name(f->type),
                       type_name(type));
    if (f->seq != seq)
        return err_set(e, MS_ERR_PROTO, "frame %u, %u expected", f->seq, seq);
    if (f->len != len)
        return err_set(e, MS_ERR_PROTO, "payload of %llu bytes, %llu expected",
                       (unsigned long long)f->len, (unsigned long long)len);
    return MS_OK;
}

static int check_hdr(mpc_net *n, int j, link_io *l, errbuf *e)
{
    mpc_frame f;
    mpc_frame_decode(l->ihdr, &f);
    uint32_t magic = f.magic, op = f.op, seq = f.seq;
    uint16_t ver = f.ver, ty = f.type;
    uint64_t len = f.len;
    l->sent_ns = f.sent_ns;
    char a[16], b[16];
    const char *me = node_name(&n->cfg, n->cfg.self, a), *peer = node_name(&n->cfg, j, b);
    if (magic != MPC_FRAME_MAGIC)
        return err_set(e, MS_ERR_PROTO,
                       "%s: malformed frame from %s: bad magic 0x%08x (not an mpcsim party?)", me,
                       peer, magic);
    if (ver != MPC_FRAME_VERSION)
        return err_set(e, MS_ERR_PROTO,
                       "%s: frame from %s has version %u, this build speaks %d (run the same "
                       "mpcsim on every host)",
                       me, peer, ver, MPC_FRAME_VERSION);
    if (ty != l->itype)
        return err_set(e, MS_ERR_PROTO,
                       "%s: expected %s from %s during op %u, got a %s frame (peers out of step: "
                       "same program and protocol on every party?)",
                       me, type_name(l->itype), peer, n->op, type_name(ty));
    if (seq != n->seq_in[j])
        return err_set(
            e, MS_ERR_PROTO,
            "%s: frame %u from %s arrived when frame %u was expected (peers out of step)", me, seq,
            peer, n->seq_in[j]);
    if (len != l->ilen)
        return err_set(e, MS_ERR_PROTO,
                       "%s: malformed frame from %s during op %u (peer op %u): payload of %llu "
                       "bytes, %zu expected (peers running different programs?)",
                       me, peer, n->op, op, (unsigned long long)len, l->ilen);
    return MS_OK;
}

/* Under TLS: the frame's bytes in records of at most MPC_TLS_RECORD, each staged whole (so a
 * record never mixes two frames and the header shares the first record with the payload). */
static int do_send_tls(mpc_net *n, int j, link_io *l, errbuf *e)
{
    size_t total = MPC_FRAME_HDR + l->olen;
    uint8_t *st = n->stage[j];
    l->wr_wants_rd = 0;
    while (l->ooff < total) {
        if (!l->stage_len) {
            size_t k = total - l->ooff < MPC_TLS_RECORD ? total - l->ooff : MPC_TLS_RECORD, put = 0;
            if (l->ooff < MPC_FRAME_HDR) {
                put = MPC_FRAME_HDR - l->ooff < k ? MPC_FRAME_HDR - l->ooff : k;
                memcpy(st, l->ohdr + l->ooff, put);
            }
            if (put < k)
                memcpy(st + put, l->obuf + (l->ooff + put - MPC_FRAME_HDR), k - put);
            l->stage_len = k;
        }
        size_t w = 0;
        char why[300];
        int s = mpc_tls_write(n->tc[j], st, l->stage_len, &w, why, sizeof why);
        if (s == 0) {
            l->ooff += l->stage_len;
            l->stage_len = 0;
            continue;
        }
        if (s == MPC_TLS_WANT_WRITE)
            return -1;
        if (s == MPC_TLS_WANT_READ) {
            l->wr_wants_rd = 1;
            return -1;
        }
        return s == MPC_TLS_EOF ? lost(n, j, "end of stream", e) : tls_broken(n, j, why, e);
    }
    l->out = 0;
    return MS_OK;
}

static int do_send(mpc_net *n, int j, link_io *l, errbuf *e)
{
    if (n->tc[j])
        return do_send_tls(n, j, l, e);
    size_t total = MPC_FRAME_HDR + l->olen;
    while (l->ooff < total) {
        struct iovec iov[2];
        int k = 0;
        if (l->ooff < MPC_FRAME_HDR) {
            iov[k].iov_base = l->ohdr + l->ooff;
            iov[k++].iov_len = MPC_FRAME_HDR - l->ooff;
            if (l->olen) {
                iov[k].iov_base = (void *)l->obuf;
                iov[k++].iov_len = l->olen;
            }
        } else {
            iov[k].iov_base = (void *)(l->obuf + (l->ooff - MPC_FRAME_HDR));
            iov[k++].iov_len = total - l->ooff;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)k};
        ssize_t w = sendmsg(n->fd[j], &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return -1; /* would block */
            if (errno == EINTR)
                continue;
            return lost(n, j, strerror(errno), e);
        }
        l->ooff += (size_t)w;
        n->st.wire_sent[j] += (uint64_t)w;
    }
    l->out = 0;
    return MS_OK;
}

static int do_recv(mpc_net *n, int j, link_io *l, errbuf *e)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (l->ioff < MPC_FRAME_HDR) {
            dst = l->ihdr + l->ioff;
            want = MPC_FRAME_HDR - l->ioff;
        } else {
            size_t p = l->ioff - MPC_FRAME_HDR;
            if (p >= l->ilen)
                break;
            dst = l->ibuf + p;
            want = l->ilen - p;
        }
        /* the kernel's receive time of the data read (SO_TIMESTAMPNS, CLOCK_REALTIME) */
        union {
            char buf[CMSG_SPACE(sizeof(struct timespec))];
            struct cmsghdr align;
        } cm;
        ssize_t r;
        if (n->tc[j]) {
            size_t got = 0;
            char why[300];
            int s = mpc_tls_read(n->tc[j], dst, want, &got, why, sizeof why);
            if (s == MPC_TLS_WANT_READ || s == MPC_TLS_WANT_WRITE)
                return -1;
            if (s == MPC_TLS_FAIL)
                return tls_broken(n, j, why, e);
            uint64_t rx = mpc_tls_take_rx_realtime(n->tc[j]);
            if (rx) /* records decrypted from bytes already buffered keep the time they came with */
                l->rx_ns = rx_mono(rx);
            r = s == MPC_TLS_EOF ? 0 : (ssize_t)got;
        } else {
            struct iovec iov = {.iov_base = dst, .iov_len = want};
            struct msghdr mh = {.msg_iov = &iov,
                                .msg_iovlen = 1,
                                .msg_control = cm.buf,
                                .msg_controllen = sizeof cm.buf};
            r = recvmsg(n->fd[j], &mh, 0);
            for (struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    l->rx_ns = rx_mono((uint64_t)ts.tv_sec * 1000000000ull +
                                       (uint64_t)ts.tv_nsec); /* on our clock */
                }
            if (r > 0)
                n->st.wire_recv[j] += (uint64_t)r;
        }
        if (r == 0)
            return lost(n, j, "end of stream", e);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return -1; /* would block */
            if (errno == EINTR)
                continue;
            return lost(n, j, strerror(errno), e);
        }
        size_t before = l->ioff;
        l->ioff += (size_t)r;
        if (before < MPC_FRAME_HDR && l->ioff == MPC_FRAME_HDR) {
            int rc = check_hdr(n, j, l, e);
            if (rc)
                return rc;
        }
        if (l->ioff == MPC_FRAME_HDR + l->ilen)
            break;
    }
    l->in = 0;
    l->done_ns = now_ns();
    if (l->itype == MPC_FR_BYE)
        n->closed_ok[j] = 1; /* its EOF from now on is the orderly close */
    return MS_OK;
}

/* The links xfer waits on: what poll watches on each, and whose link it is. */
typedef struct xfer_poll {
    struct pollfd pf[MPC_NODES_MAX];
    int who[MPC_NODES_MAX], np;
} xfer_poll;

/* One pass over the links: every send or receive that can proceed moves now (opportunistic
 * I/O needs no poll), and each link still open goes into w. *pending: some frame is not done;
 * *progressed: some bytes moved. Returns a link's error (> 0) or 0. */
static int xfer_pass(mpc_net *n, link_io *io, xfer_poll *w, int *pending, int *progressed,
                     errbuf *e)
{
    int N = n->cfg.n_nodes, self = n->cfg.self;
    w->np = *pending = *progressed = 0;
    for (int j = 0; j < N; j++) {
        if (j == self || n->fd[j] < 0)
            continue;
        link_io *l = &io[j];
        if (l->out) {
            size_t before = l->ooff;
            int rc = do_send(n, j, l, e);
            if (rc > 0)
                return rc;
            *progressed |= l->ooff != before;
        }
        if (l->in) {
            size_t before = l->ioff;
            int rc = do_recv(n, j, l, e);
            if (rc > 0)
                return rc;
            *progressed |= l->ioff != before;
        }
        short ev = POLLRDHUP;
        if (l->out)
            ev |= POLLOUT;
        if (l->in || (l->out && l->wr_wants_rd))
            ev |= POLLIN;
        *pending += l->out || l->in;
        if (n->closed_ok[j] && !l->in && !l->out)
            continue;
        w->pf[w->np] = (struct pollfd){.fd = n->fd[j], .events = ev};
        w->who[w->np++] = j;
    }
    return 0;
}

/* The TLS connections' byte counts, past set-up, into the stats. */
static void xfer_wire(mpc_net *n)
{
    for (int q = 0; q < n->cfg.n_nodes; q++)
        if (n->tc[q]) {
            uint64_t s_, r_;
            mpc_tls_wire(n->tc[q], &s_, &r_);
            n->st.wire_sent[q] = s_ - n->wire0_sent[q];
            n->st.wire_recv[q] = r_ - n->wire0_recv[q];
        }
}

/* No progress for timeout_ms: the error names the first peer still owing or owed a frame. */
static int xfer_timeout(mpc_net *n, const link_io *io, int timeout_ms, errbuf *e)
{
    char a[16], b[16];
    int N = n->cfg.n_nodes, j = 0;
    while (j < N && !(io[j].in || io[j].out))
        j++;
    return err_set(e, MS_ERR_TIMEOUT,
                   "%s: no progress from %s for %d ms during op %u (peer hung or too slow; raise "
                   "--timeout-ms if it is computing)",
                   node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), timeout_ms, n->op);
}

/* A peer with a frame pending whose heartbeats stopped for the liveness period is frozen. */
static int xfer_beats(mpc_net *n, const link_io *io, uint64_t now, errbuf *e)
{
    int live_ms = n->cfg.liveness_ms > 0 ? n->cfg.liveness_ms : MPC_LIVENESS_MS;
    for (int j = 0; j < n->cfg.n_nodes; j++) {
        if (j == n->cfg.self || !(io[j].in || io[j].out) || n->bfd[j] < 0 || n->closed_ok[j])
            continue;
        uint64_t gone = n->gone_at[j];
        if (n->beat_gone[j] && now > gone && now - gone > BEAT_GONE_GRACE_MS * 1000000ull) {
            char a[16], b[16];
            return err_set(e, MS_ERR_PEER,
                           "%s: the heartbeat connection to %s closed during op %u while its data "
                           "link stayed open: %s can no longer be watched for a freeze (a "
                           "middlebox or the peer dropped it)",
                           node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), n->op, b);
        }
        if (n->beat_gone[j])
            continue; /* within the grace: the data link's own error comes first */
        uint64_t seen = n->seen[j];
        if (now > seen && now - seen > (uint64_t)live_ms * 1000000ull) {
            char a[16], b[16];
            return err_set(e, MS_ERR_PEER,
                           "%s: no heartbeat from %s for %d ms during op %u: the peer is frozen "
                           "(stopped, swapped out, or its host is down)",
                           node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), live_ms,
                           n->op);
        }
    }
    return MS_OK;
}

/* Polls w until the deadline (waking each heartbeat period); a link closed or broken while it
 * still owes a frame is lost. */
static int xfer_wait(mpc_net *n, const link_io *io, xfer_poll *w, uint64_t deadline, uint64_t now,
                     errbuf *e)
{
    int wait_ms = (int)((deadline - now) / 1000000ull) + 1;
    if (wait_ms > BEAT_MS)
        wait_ms = BEAT_MS; /* wake to look at the heartbeats */
    int pr = poll(w->pf, (nfds_t)w->np, wait_ms);
    if (pr < 0 && errno != EINTR)
        return err_set(e, MS_ERR_NET, "poll: %s", strerror(errno));
    for (int q = 0; pr > 0 && q < w->np; q++) {
        int j = w->who[q];
        short rv = w->pf[q].revents;
        if (!rv)
            continue;
        if ((rv & (POLLERR | POLLHUP | POLLRDHUP)) && !io[j].in) {
            if (n->closed_ok[j] && !io[j].out)
                continue;
            return lost(n, j, (rv & POLLERR) ? "socket error" : "peer closed", e);
        }
    }
    return MS_OK;
}

/* Moves every pending frame of io[] (sends and receives at once) or fails. */
static int xfer(mpc_net *n, link_io *io, int timeout_ms, errbuf *e)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        xfer_poll w;
        int pending, progressed;
        int rc = xfer_pass(n, io, &w, &pending, &progressed, e);
        if (rc)
            return rc;
        if (!pending) {
            xfer_wire(n);
            return MS_OK;
        }
        uint64_t now = now_ns();
        if (progressed) {
            deadline = now + (uint64_t)timeout_ms * 1000000ull;
            n->moved++;
        }
        /* a peer owing or owed a frame whose heartbeat shows it moving bytes with another node
         * is not hung: its link there is slow */
        for (int j = 0; j < n->cfg.n_nodes; j++) {
            uint64_t seen = n->prog_seen[j];
            if ((io[j].in || io[j].out) && seen + (uint64_t)timeout_ms * 1000000ull > deadline)
                deadline = seen + (uint64_t)timeout_ms * 1000000ull;
        }
        if (now >= deadline)
            return xfer_timeout(n, io, timeout_ms, e);
        if ((rc = xfer_beats(n, io, now, e)) || (rc = xfer_wait(n, io, &w, deadline, now, e)))
            return rc;
    }
}

/* ---------------------------------------------------------------- connection setup */

static int wait_fd(int fd, short ev, int ms)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r;
}

/* Connects to node j before deadline, retrying while it is not up yet. Each attempt is a
 * non-blocking connect polled until the deadline, so a peer whose host drops the SYNs costs
 * the connect timeout, not the kernel's minutes of SYN retries. */
static int connect_peer(mpc_net *n, int j, uint64_t deadline, int *out, errbuf *e)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = resolve(n->cfg.host[j], n->cfg.port[j], &ss, &sl, e);
    if (rc)
        return rc;
    for (;;) {
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return err_set(e, MS_ERR_NET, "socket: %s", strerror(errno));
        int err = connect(fd, (struct sockaddr *)&ss, sl) == 0 ? 0 : errno;
        if (err == EINPROGRESS || err == EINTR) {
            uint64_t now = now_ns();
            int ms = now < deadline ? (int)((deadline - now + 999999) / 1000000) : 0;
            socklen_t el = sizeof err;
            if (ms <= 0 || wait_fd(fd, POLLOUT, ms) <= 0)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                err = errno;
        }
        if (!err) {
            *out = fd;
            return MS_OK;
        }
        close(fd);
        uint64_t now = now_ns();
        if (now >= deadline) {
            char a[16], b[16];
            return err_set(
                e, MS_ERR_NET,
                "%s: cannot connect to %s at %s:%d within %d ms: %s (is that party running?)",
                node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), n->cfg.host[j],
                n->cfg.port[j], n->cfg.connect_timeout_ms, strerror(err));
        }
        sleep_until(now + 20000000ull < deadline ? now + 20000000ull : deadline);
    }
}

int mpc_net_hello_parse(const uint8_t h[MPC_FRAME_HDR], int n_nodes, int self, int tls, int *id,
                        int *chan, errbuf *e)
{
    mpc_frame f;
    mpc_frame_decode(h, &f);
    if (f.magic != MPC_FRAME_MAGIC || f.type != MPC_FR_HELLO)
        return err_set(e, MS_ERR_PROTO,
                       "malformed hello from a connecting peer (not an mpcsim party?)");
    if (f.ver != MPC_FRAME_VERSION)
        return err_set(
            e, MS_ERR_PROTO,
            "peer speaks frame version %u, this build %d (run the same mpcsim everywhere)", f.ver,
            MPC_FRAME_VERSION);
    if (f.len != (uint64_t)n_nodes || f.op >= (uint32_t)n_nodes || (int)f.op <= self)
        return err_set(e, MS_ERR_PROTO,
                       "hello from node %u of a %llu-node session does not fit this %d-node "
                       "session as node %d (check --peers, --id and --protocol on every party)",
                       f.op, (unsigned long long)f.len, n_nodes, self);
    uint32_t ch = f.seq & ~MPC_HELLO_TLS;
    int peer_tls = (f.seq & MPC_HELLO_TLS) != 0;
    if (ch > 1)
        return err_set(e, MS_ERR_PROTO, "hello for channel %u (0 data, 1 heartbeat)", ch);
    if (peer_tls != tls)
        return err_set(e, MS_ERR_PROTO, "node %u runs %s and this node %s (start every node alike)",
                       f.op, peer_tls ? "with TLS" : "with --insecure-plaintext",
                       tls ? "with TLS" : "with --insecure-plaintext");
    *id = (int)f.op;
    *chan = (int)ch;
    return MS_OK;
}

/* HELLO: op = sender id, seq = the channel (0 data, 1 heartbeat), len = n_nodes (checked). */
static int hello_send(mpc_net *n, int fd, int chan, errbuf *e)
{
    uint8_t h[MPC_FRAME_HDR];
    put_hdr(h, MPC_FR_HELLO, (uint32_t)n->cfg.self, (uint32_t)chan | (n->tls ? MPC_HELLO_TLS : 0),
            (uint64_t)n->cfg.n_nodes);
    if (wait_fd(fd, POLLOUT, n->cfg.timeout_ms) <= 0 ||
        send(fd, h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h)
        return err_set(e, MS_ERR_NET, "sending hello: %s", strerror(errno));
    n->st.hdr_sent += MPC_FRAME_HDR;
    return MS_OK;
}

/* Peer j's heartbeat connection closed or failed. */
static void beat_lost(mpc_net *n, int j)
{
    if (!n->beat_gone[j]) {
        n->gone_at[j] = now_ns();
        n->beat_gone[j] = 1;
    }
}

/* A beat from peer j (its progress count's low byte, the last of the bytes read). */
static void beat_heard(mpc_net *n, int j, uint8_t last)
{
    uint64_t now = now_ns();
    n->seen[j] = now;
    if (last != n->beat_last[j]) {
        n->beat_last[j] = last;
        n->prog_seen[j] = now;
    }
}

/* The heartbeat thread: one byte to every peer each BEAT_MS (the low byte of this node's
 * progress count), and whatever the peers sent drained; the time of the last byte from each
 * peer, and of the last change of its count, are what xfer checks. */
static void *beat_main(void *arg)
{
    mpc_net *n = arg;
    uint64_t next = 0;
    uint8_t wants[MPC_NODES_MAX] = {0}; /* TLS: a beat to repeat with the same buffer */
    while (!n->beat_stop) {
        struct pollfd pf[MPC_NODES_MAX];
        int who[MPC_NODES_MAX], np = 0;
        uint64_t now = now_ns();
        for (int j = 0; j < n->cfg.n_nodes; j++) {
            if (n->bfd[j] < 0 || n->beat_gone[j])
                continue;
            if (now >= next || wants[j]) {
                char why[300];
                size_t w;
                if (!wants[j])
                    n->beat_out[j] = (uint8_t)n->moved;
                if (n->btc[j]) { /* a beat still pending in the record layer goes first */
                    int s = mpc_tls_write(n->btc[j], &n->beat_out[j], 1, &w, why, sizeof why);
                    wants[j] = s == MPC_TLS_WANT_READ || s == MPC_TLS_WANT_WRITE;
                    if (s == MPC_TLS_EOF || s == MPC_TLS_FAIL)
                        beat_lost(n, j);
                } else if (send(n->bfd[j], &n->beat_out[j], 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
                           errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    beat_lost(n, j);
            }
            pf[np] = (struct pollfd){.fd = n->bfd[j], .events = POLLIN | POLLRDHUP};
            who[np++] = j;
        }
        if (now >= next)
            next = now + BEAT_MS * 1000000ull;
        int pr = poll(pf, (nfds_t)np, BEAT_MS / 2);
        for (int q = 0; pr > 0 && q < np; q++) {
            if (!pf[q].revents)
                continue;
            int j = who[q];
            uint8_t buf[256];
            mpc_tls_conn *c = n->btc[j];
            if (c) { /* every record the socket holds, until the record layer wants more */
                int s;
                size_t got;
                char why[300];
                while ((s = mpc_tls_read(c, buf, sizeof buf, &got, why, sizeof why)) == 0)
                    if (got)
                        beat_heard(n, j, buf[got - 1]);
                if (s == MPC_TLS_EOF || s == MPC_TLS_FAIL)
                    beat_lost(n, j);
                continue;
            }
            ssize_t r = recv(pf[q].fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r > 0)
                beat_heard(n, j, buf[r - 1]);
            else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                beat_lost(n, j); /* closed: an error once the grace is over (xfer_beats) */
        }
    }
    return NULL;
}

/* Address of an accepted peer, for the log. */
static void peer_addr(const struct sockaddr_storage *from, char *addr, size_t len)
{
    snprintf(addr, len, "?");
    if (from->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)from)->sin_addr, addr, (socklen_t)len);
    else if (from->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)from)->sin6_addr, addr, (socklen_t)len);
}

/* Plaintext: the acceptor's one-byte acknowledgement that it took the hello, awaited until
 * deadline. MS_ERR_NET if the acceptor closed instead (it dropped the hello). */
static int ack_recv(mpc_net *n, int j, int fd, uint64_t deadline, errbuf *e)
{
    char a[16], b[16];
    for (;;) {
        uint64_t now = now_ns();
        int ms = now < deadline ? (int)((deadline - now + 999999) / 1000000) : 0;
        if (ms <= 0 || wait_fd(fd, POLLIN, ms) <= 0)
            return err_set(e, MS_ERR_TIMEOUT,
                           "%s: %s did not acknowledge this node's hello in time",
                           node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b));
        uint8_t got;
        ssize_t r = recv(fd, &got, 1, 0);
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r == 1 && got == HELLO_ACK)
            return MS_OK;
        if (r == 1)
            return err_set(e, MS_ERR_PROTO, "%s: %s answered the hello with 0x%02x",
                           node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), got);
        return err_set(e, MS_ERR_NET,
                       "%s: %s closed the connection after this node's hello (see its log)",
                       node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b));
    }
}

/* The dialled side of one connection to node j: connect, hello, and the acceptor's answer (the
 * TLS handshake, or the plaintext acknowledgement), all before the connect deadline. An
 * acceptor that closes the connection instead (it dropped a hello damaged on the way) is
 * dialled again until the deadline; a refusal (a certificate, a mode or version of another
 * session) is final. */
static int dial(mpc_net *n, int j, int chan, uint64_t deadline, int *fd, mpc_tls_conn **tc,
                errbuf *e)
{
    for (;;) {
        int rc = connect_peer(n, j, deadline, fd, e);
        if (rc)
            return rc;
        rc = hello_send(n, *fd, chan, e);
        if (!rc && n->tls) {
            char a[16], b[16], who[200];
            snprintf(who, sizeof who, "%s at %s:%d", node_name(&n->cfg, j, b), n->cfg.host[j],
                     n->cfg.port[j]);
            errbuf why;
            rc = mpc_tls_handshake(n->tls, *fd, 0, j, who, deadline, tc, &why);
            if (rc)
                rc = err_set(e, rc, "%s: %s", node_name(&n->cfg, n->cfg.self, a), why.msg);
        } else if (!rc)
            rc = ack_recv(n, j, *fd, deadline, e);
        if (!rc)
            return MS_OK;
        close(*fd);
        *fd = -1;
        uint64_t now = now_ns();
        if (rc != MS_ERR_NET || now >= deadline)
            return rc;
        sleep_until(now + 20000000ull < deadline ? now + 20000000ull : deadline);
    }
}

/* A connection accepted but not yet a peer: its hello so far. */
typedef struct acc_pending {
    int fd;
    uint64_t until; /* its hello is due by then */
    size_t got;
    uint8_t h[MPC_FRAME_HDR];
    struct sockaddr_storage from;
} acc_pending;

static void acc_drop(mpc_net *n, acc_pending *p, const char *why)
{
    char a[16], addr[INET6_ADDRSTRLEN + 8];
    peer_addr(&p->from, addr, sizeof addr);
    fprintf(stderr, "%s: dropped a connection from %s: %s; still waiting for the peers\n",
            node_name(&n->cfg, n->cfg.self, a), addr, why);
    close(p->fd);
    p->fd = -1;
}

/* A complete hello on p: the peer's slot, its TLS handshake (or the plaintext acknowledgement),
 * and the connection kept; 1 if it became a peer's, 0 if it was dropped. */
static int acc_take(mpc_net *n, acc_pending *p, uint64_t deadline)
{
    const mpc_net_cfg *cfg = &n->cfg;
    int id = -1, chan = 0;
    errbuf why;
    int hr = mpc_net_hello_parse(p->h, cfg->n_nodes, cfg->self, n->tls != NULL, &id, &chan, &why);
    int *slot = hr ? NULL : chan ? &n->bfd[id] : &n->fd[id];
    if (!hr && *slot >= 0)
        hr = err_set(&why, MS_ERR_PROTO, "a second connection claims to be node %d", id);
    mpc_tls_conn *tc = NULL;
    char b[16];
    if (!hr && n->tls) { /* within timeout_ms, as the hello: a silent peer holds no slot */
        uint64_t until = now_ns() + (uint64_t)cfg->timeout_ms * 1000000ull;
        hr = mpc_tls_handshake(n->tls, p->fd, 1, id, node_name(cfg, id, b),
                               until < deadline ? until : deadline, &tc, &why);
    } else if (!hr) {
        static const uint8_t ack = HELLO_ACK;
        if (send(p->fd, &ack, 1, MSG_NOSIGNAL) != 1)
            hr = err_set(&why, MS_ERR_NET, "cannot acknowledge its hello: %s", strerror(errno));
    }
    if (hr) {
        acc_drop(n, p, why.msg);
        return 0;
    }
    n->st.hdr_recv += MPC_FRAME_HDR;
    *slot = p->fd;
    p->fd = -1;
    if (chan)
        n->btc[id] = tc;
    else
        n->tc[id] = tc;
    return 1;
}

/* Accepts on lfd the two channels of every node above self. */
static int accept_peers(mpc_net *n, int lfd, errbuf *e)
{
    /* Accept until every node above self has said a valid hello (and, under TLS, proved it is
     * that node). A connection that is not one (a port scan, a stray client, a silent or
     * malformed peer, a second claim to a node, a certificate of another node or session) is
     * dropped and logged, and the wait for the real peer goes on until the deadline. Up to
     * ACCEPT_PENDING_MAX connections wait for their hellos at once, each for timeout_ms, so
     * silent connections cannot hold the real peers back; past that many the oldest is
     * dropped. */
    const mpc_net_cfg *cfg = &n->cfg;
    acc_pending p[ACCEPT_PENDING_MAX];
    int np = 0, rc = MS_OK;
    char a[16], why[64];
    uint64_t deadline = now_ns() + (uint64_t)cfg->connect_timeout_ms * 1000000ull;
    for (int k = 2 * (cfg->self + 1); k < 2 * cfg->n_nodes && !rc;) {
        uint64_t now = now_ns(), wake = deadline;
        for (int q = 0; q < np;) { /* hellos overdue */
            if (now >= p[q].until) {
                snprintf(why, sizeof why, "no hello within %d ms", cfg->timeout_ms);
                acc_drop(n, &p[q], why);
                p[q] = p[--np];
                continue;
            }
            wake = p[q].until < wake ? p[q].until : wake;
            q++;
        }
        if (now >= deadline) {
            rc = err_set(e, MS_ERR_TIMEOUT,
                         "%s: not every peer connected within %d ms (are all parties started with "
                         "the same --peers?)",
                         node_name(cfg, cfg->self, a), cfg->connect_timeout_ms);
            break;
        }
        struct pollfd pf[ACCEPT_PENDING_MAX + 1];
        pf[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int q = 0; q < np; q++)
            pf[q + 1] = (struct pollfd){.fd = p[q].fd, .events = POLLIN};
        int pr = poll(pf, (nfds_t)np + 1, (int)((wake - now + 999999) / 1000000));
        if (pr < 0 && errno != EINTR) {
            rc = err_set(e, MS_ERR_NET, "poll: %s", strerror(errno));
            break;
        }
        if (pr <= 0)
            continue;
        /* hellos first (the listening socket may add to p) */
        int taken[ACCEPT_PENDING_MAX] = {0};
        for (int q = 0; q < np; q++) {
            if (!pf[q + 1].revents)
                continue;
            acc_pending *c = &p[q];
            ssize_t r = recv(c->fd, c->h + c->got, sizeof c->h - c->got, 0);
            if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
                continue;
            if (r <= 0) {
                acc_drop(n, c, "connecting peer closed before its hello");
                taken[q] = 1;
                continue;
            }
            c->got += (size_t)r;
            if (c->got == sizeof c->h) {
                k += acc_take(n, c, deadline);
                taken[q] = 1;
            }
        }
        for (int q = np - 1; q >= 0; q--) /* remove the finished, keeping the order */
            if (taken[q]) {
                memmove(&p[q], &p[q + 1], (size_t)(np - q - 1) * sizeof p[0]);
                np--;
            }
        if (!(pf[0].revents & POLLIN))
            continue;
        struct sockaddr_storage from;
        socklen_t fl = sizeof from;
        int fd = accept4(lfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
                continue;
            rc = err_set(e, MS_ERR_NET, "accept: %s", strerror(errno));
            break;
        }
        if (np == ACCEPT_PENDING_MAX) { /* the oldest goes */
            acc_drop(n, &p[0], "too many connections without a hello");
            memmove(&p[0], &p[1], (size_t)(np - 1) * sizeof p[0]);
            np--;
        }
        uint64_t until = now_ns() + (uint64_t)cfg->timeout_ms * 1000000ull;
        p[np++] = (acc_pending){
            .fd = fd, .until = until < deadline ? until : deadline, .got = 0, .from = from};
    }
    for (int q = 0; q < np; q++)
        close(p[q].fd);
    return rc;
}

/* Tunes the sockets and counts the TLS handshakes' bytes (the first channel's also per peer). */
static void count_handshakes(mpc_net *n)
{
    for (int j = 0; j < n->cfg.n_nodes; j++) {
        if (n->fd[j] >= 0)
            tune(n->fd[j]);
        mpc_tls_conn *cs[2] = {n->tc[j], n->btc[j]};
        for (int q = 0; q < 2; q++)
            if (cs[q]) {
                uint64_t s_, r_;
                mpc_tls_wire(cs[q], &s_, &r_);
                n->st.tls_hs_sent += s_;
                n->st.tls_hs_recv += r_;
                n->st.tls_conns++;
                if (!q)
                    n->wire0_sent[j] = s_, n->wire0_recv[j] = r_;
            }
    }
}

int mpc_net_open(const mpc_net_cfg *cfg, mpc_net **out, errbuf *e)
{
    if (cfg->n_nodes < 2 || cfg->n_nodes > MPC_NODES_MAX || cfg->self < 0 ||
        cfg->self >= cfg->n_nodes)
        return err_set(e, MS_ERR_USAGE, "mpc net: node %d of %d is out of range", cfg->self,
                       cfg->n_nodes);
    if (!cfg->plaintext && !cfg->keys[0] && !cfg->tls)
        return err_set(
            e, MS_ERR_USAGE,
            "party channels run TLS: give the key folder (--keys DIR, made by `mpcsim party "
            "keys --out DIR`), or --insecure-plaintext for a loopback experiment");
    mpc_net *n = calloc(1, sizeof *n);
    if (!n)
        return err_set(e, MS_ERR_NOMEM, "mpc net: out of memory");
    n->cfg = *cfg;
    for (int j = 0; j < MPC_NODES_MAX; j++)
        n->fd[j] = n->bfd[j] = -1;
    int lfd = cfg->listen_fd, rc = MS_OK;
    if (!cfg->plaintext) {
        rc = cfg->tls ? (n->tls = cfg->tls, MS_OK) : mpc_tls_load(cfg->keys, cfg->self, &n->tls, e);
        for (int j = 0; !rc && j < cfg->n_nodes; j++)
            if (j != cfg->self && !(n->stage[j] = malloc(MPC_TLS_RECORD)))
                rc = err_set(e, MS_ERR_NOMEM, "mpc net: out of memory");
    }
    if (!rc && lfd < 0 && cfg->self < cfg->n_nodes - 1)
        rc = mpc_net_listen(cfg->host[cfg->self], cfg->port[cfg->self], &lfd, NULL, e);
    if (rc) {
        if (lfd >= 0)
            close(lfd);
        mpc_net_free(n);
        return rc;
    }
    for (int j = 0; j < cfg->self && !rc; j++) {
        uint64_t dl = now_ns() + (uint64_t)cfg->connect_timeout_ms * 1000000ull;
        rc = dial(n, j, 0, dl, &n->fd[j], &n->tc[j], e);
        dl = now_ns() + (uint64_t)cfg->connect_timeout_ms * 1000000ull;
        if (!rc)
            rc = dial(n, j, 1, dl, &n->bfd[j], &n->btc[j], e);
    }
    if (!rc)
        rc = accept_peers(n, lfd, e);
    if (lfd >= 0)
        close(lfd);
    if (rc) {
        mpc_net_free(n);
        return rc;
    }
    count_handshakes(n);
    uint64_t t0 = now_ns();
    for (int j = 0; j < cfg->n_nodes; j++) {
        n->seen[j] = t0;
        if (n->bfd[j] >= 0)
            fcntl(n->bfd[j], F_SETFL, fcntl(n->bfd[j], F_GETFL) | O_NONBLOCK);
    }
    if (pthread_create(&n->beat, NULL, beat_main, n) != 0) {
        mpc_net_free(n);
        return err_set(e, MS_ERR_INTERNAL, "mpc net: cannot start the heartbeat thread");
    }
    n->beat_on = 1;
    *out = n;
    return MS_OK;
}

/* ---------------------------------------------------------------- rounds and channels */

static void arm_out(mpc_net *n, link_io *l, int j, int type, const void *buf, size_t len)
{
    l->out = 1;
    l->obuf = buf;
    l->olen = len;
    l->ooff = 0;
    put_hdr(l->ohdr, type, n->op, n->seq_out[j]++, len);
}

static void arm_in(link_io *l, int type, void *buf, size_t len)
{
    l->in = 1;
    l->itype = type;
    l->ibuf = buf;
    l->ilen = len;
    l->ioff = 0;
}

int mpc_net_round(mpc_net *n, const void *const *send, const size_t *slen, void *const *recv,
                  const size_t *rlen, int setup, errbuf *e)
{
    link_io io[MPC_NODES_MAX];
    memset(io, 0, sizeof io);
    int type = setup ? MPC_FR_SETUP : MPC_FR_DATA, any_in = 0;
    for (int j = 0; j < n->cfg.n_nodes; j++) {
        if (j == n->cfg.self)
            continue;
        if ((slen && slen[j]) || (rlen && rlen[j])) {
            if (n->fd[j] < 0)
                return err_set(e, MS_ERR_INTERNAL, "mpc net: no connection to node %d", j);
        }
        if (slen && slen[j])
            arm_out(n, &io[j], j, type, send[j], slen[j]);
        if (rlen && rlen[j]) {
            arm_in(&io[j], type, recv[j], rlen[j]);
            any_in = 1;
        }
    }
    int rc = xfer(n, io, n->cfg.timeout_ms, e);
    if (rc)
        return rc;
    uint64_t last = 0;
    for (int j = 0; j < n->cfg.n_nodes; j++) {
        if (slen && slen[j]) {
            (setup ? n->st.setup_sent : n->st.sent)[j] += slen[j];
            n->st.hdr_sent += MPC_FRAME_HDR;
            n->st.msgs_sent++;
        }
        if (rlen && rlen[j]) {
            if (n->tap)
                n->tap(n->tap_ctx, j, type, recv[j], rlen[j]);
            (setup ? n->st.setup_recv : n->st.recv)[j] += rlen[j];
            n->st.hdr_recv += MPC_FRAME_HDR;
            n->seq_in[j]++;
            /* a message arrives one latency after its last byte came off the link (the kernel's
             * receive time of the last bytes read), as a link delivers: propagation follows
             * serialization. Without a receive time: one latency after it was sent, capped at
             * one latency after its bytes were read (a sender clock that is not ours). Never
             * before its bytes were read. */
            uint64_t at = io[j].sent_ns + n->cfg.latency_ns;
            uint64_t cap = io[j].done_ns + n->cfg.latency_ns;
            at = at > cap ? cap : at;
            if (io[j].rx_ns)
                at =
                    (io[j].rx_ns > io[j].sent_ns ? io[j].rx_ns : io[j].sent_ns) + n->cfg.latency_ns;
            at = at < io[j].done_ns ? io[j].done_ns : at;
            if (at > last)
                last = at;
        }
    }
    if (setup)
        n->st.setup_rounds++;
    else
        n->st.rounds++;
    /* Injected one-way latency: the round ends when its last message has arrived, each one
     * latency_ns after its sender sent it (as a link delivers; the sender's clock is this
     * host's CLOCK_MONOTONIC when the nodes share a host, the setting latency injection is
     * for). */
    if (n->cfg.latency_ns && any_in && !setup)
        sleep_until(last);
    return MS_OK;
}

int mpc_net_sync(mpc_net *n, errbuf *e)
{
    int self = n->cfg.self, P = n->cfg.n_parties;
    if (self >= P)
        return MS_OK;
    link_io io[MPC_NODES_MAX];
    memset(io, 0, sizeof io);
    static const uint8_t none[1] = {0};
    for (int j = 0; j < P; j++) {
        if (j == self)
            continue;
        if (n->fd[j] < 0)
            return err_set(e, MS_ERR_INTERNAL, "mpc net: no connection to node %d", j);
        arm_out(n, &io[j], j, MPC_FR_SETUP, none, 0);
        arm_in(&io[j], MPC_FR_SETUP, NULL, 0);
    }
    int rc = xfer(n, io, n->cfg.timeout_ms, e);
    if (rc)
        return rc;
    for (int j = 0; j < P; j++)
        if (j != self) {
            n->st.hdr_sent += MPC_FRAME_HDR;
            n->st.hdr_recv += MPC_FRAME_HDR;
            n->st.msgs_sent++;
            n->seq_in[j]++;
        }
    n->st.setup_rounds++;
    return MS_OK;
}

static int one_way(mpc_net *n, int peer, int type, const void *sbuf, void *rbuf, size_t len,
                   int timeout_ms, errbuf *e)
{
    if (peer < 0 || peer >= n->cfg.n_nodes || peer == n->cfg.self || n->fd[peer] < 0)
        return err_set(e, MS_ERR_INTERNAL, "mpc net: no connection to node %d", peer);
    link_io io[MPC_NODES_MAX];
    memset(io, 0, sizeof io);
    if (sbuf)
        arm_out(n, &io[peer], peer, type, sbuf, len);
    else
        arm_in(&io[peer], type, rbuf, len);
    int rc = xfer(n, io, timeout_ms, e);
    if (rc)
        return rc;
    if (sbuf) {
        n->st.hdr_sent += MPC_FRAME_HDR;
        n->st.msgs_sent++;
    } else {
        n->st.hdr_recv += MPC_FRAME_HDR;
        n->seq_in[peer]++;
        if (n->tap)
            n->tap(n->tap_ctx, peer, type, rbuf, len);
    }
    return MS_OK;
}

/* A one-way message outside the online rounds, its payload added to *count. */
static int one_way_counted(mpc_net *n, int peer, int type, const void *sbuf, void *rbuf, size_t len,
                           uint64_t *count, errbuf *e)
{
    int rc = one_way(n, peer, type, sbuf, rbuf, len, n->cfg.timeout_ms, e);
    if (!rc)
        *count += len;
    return rc;
}

int mpc_net_send_offline(mpc_net *n, int to, const void *buf, size_t len, errbuf *e)
{
    return one_way_counted(n, to, MPC_FR_OFFLINE, buf, NULL, len, &n->st.offline_sent[to], e);
}

int mpc_net_recv_offline(mpc_net *n, int from, void *buf, size_t len, errbuf *e)
{
    /* the dealer runs ahead of the parties: waiting for it long means it hung */
    return one_way_counted(n, from, MPC_FR_OFFLINE, NULL, buf, len, &n->st.offline_recv[from], e);
}

int mpc_net_send_setup(mpc_net *n, int to, const void *buf, size_t len, errbuf *e)
{
    return one_way_counted(n, to, MPC_FR_SETUP, buf, NULL, len, &n->st.setup_sent[to], e);
}

int mpc_net_recv_setup(mpc_net *n, int from, void *buf, size_t len, errbuf *e)
{
    return one_way_counted(n, from, MPC_FR_SETUP, NULL, buf, len, &n->st.setup_recv[from], e);
}

int mpc_net_finish(mpc_net *n, errbuf *e)
{
    link_io io[MPC_NODES_MAX];
    memset(io, 0, sizeof io);
    static const uint8_t none[1] = {0};
    for (int j = 0; j < n->cfg.n_nodes; j++) {
        if (j == n->cfg.self || n->fd[j] < 0)
            continue;
        arm_out(n, &io[j], j, MPC_FR_BYE, none, 0);
        arm_in(&io[j], MPC_FR_BYE, NULL, 0);
    }
    int rc = xfer(n, io, n->cfg.timeout_ms, e);
    for (int j = 0; j < n->cfg.n_nodes; j++)
        if (n->fd[j] >= 0 && j != n->cfg.self) {
            n->closed_ok[j] = 1;
            n->st.hdr_sent += MPC_FRAME_HDR;
            n->st.hdr_recv += MPC_FRAME_HDR;
        }
    return rc;
}

void mpc_net_free(mpc_net *n)
{
    if (!n)
        return;
    if (n->beat_on) {
        n->beat_stop = 1;
        pthread_join(n->beat, NULL);
    }
    for (int j = 0; j < MPC_NODES_MAX; j++) {
        mpc_tls_close(n->tc[j]);
        mpc_tls_close(n->btc[j]);
        if (n->fd[j] >= 0)
            close(n->fd[j]);
        if (n->bfd[j] >= 0)
            close(n->bfd[j]);
        free(n->stage[j]);
    }
    mpc_tls_free(n->tls);
    free(n);
}

void mpc_net_set_tap(mpc_net *n, mpc_net_tap tap, void *ctx)
{
    n->tap = tap;
    n->tap_ctx = ctx;
}

void mpc_net_set_op(mpc_net *n, uint32_t op) { n->op = op; }
const mpc_net_stats *mpc_net_get_stats(const mpc_net *n) { return &n->st; }
int mpc_net_self(const mpc_net *n) { return n->cfg.self; }
int mpc_net_nodes(const mpc_net *n) { return n->cfg.n_nodes; }
int mpc_net_fd(const mpc_net *n, int j) { return (j >= 0 && j < MPC_NODES_MAX) ? n->fd[j] : -1; }
int mpc_net_is_tls(const mpc_net *n) { return n->tls != NULL; }
int mpc_net_beat_fd(const mpc_net *n, int j)
{
    return (j >= 0 && j < MPC_NODES_MAX) ? n->bfd[j] : -1;
}

int mpc_net_send_raw(mpc_net *n, int j, const void *buf, size_t len, errbuf *e)
{
    if (j < 0 || j >= n->cfg.n_nodes || n->fd[j] < 0)
        return err_set(e, MS_ERR_INTERNAL, "mpc net: no connection to node %d", j);
    const uint8_t *p = buf;
    uint64_t deadline = now_ns() + (uint64_t)n->cfg.timeout_ms * 1000000ull;
    while (len) {
        size_t w = 0;
        char why[300];
        int s;
        if (n->tc[j])
            s = mpc_tls_write(n->tc[j], p, len < MPC_TLS_RECORD ? len : MPC_TLS_RECORD, &w, why,
                              sizeof why);
        else {
            ssize_t r = send(n->fd[j], p, len, MSG_NOSIGNAL);
            s = r >= 0                                                        ? 0
                : (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? MPC_TLS_WANT_WRITE
                                                                              : MPC_TLS_FAIL;
            w = r > 0 ? (size_t)r : 0;
        }
        if (s == 0) {
            p += w;
            len -= w;
        } else if ((s == MPC_TLS_WANT_WRITE || s == MPC_TLS_WANT_READ) && now_ns() < deadline)
            wait_fd(n->fd[j], s == MPC_TLS_WANT_WRITE ? POLLOUT : POLLIN, 10);
        else
            return err_set(e, MS_ERR_NET, "mpc net: raw write to node %d failed", j);
    }
    return MS_OK;
}
