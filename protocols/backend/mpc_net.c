/* mpc_net.c — TCP mesh, framing, counters, timeouts (see mpc_net.h). */
#include "mpc_net_int.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---------------------------------------------------------------- names, headers */

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

/* Under TLS: the frame's bytes in records of at most MPC_TLS_RECORD (so a record never mixes
 * two frames and the header shares the first record with the payload): the record holding the
 * header staged whole, the others written from the payload where it lies (no copy; a retry
 * after WANT_* repeats the same bytes, which stay in place until the round ends). */
static int do_send_tls(mpc_net *n, int j, link_io *l, errbuf *e)
{
    size_t total = MPC_FRAME_HDR + l->olen;
    uint8_t *st = n->stage[j];
    l->wr_wants_rd = 0;
    while (l->ooff < total) {
        int staged = l->ooff < MPC_FRAME_HDR;
        if (!l->stage_len) {
            size_t k = total - l->ooff < MPC_TLS_RECORD ? total - l->ooff : MPC_TLS_RECORD, put = 0;
            if (staged) {
                put = MPC_FRAME_HDR - l->ooff < k ? MPC_FRAME_HDR - l->ooff : k;
                memcpy(st, l->ohdr + l->ooff, put);
                if (put < k)
                    memcpy(st + put, l->obuf + (l->ooff + put - MPC_FRAME_HDR), k - put);
            }
            l->stage_len = k;
        }
        const uint8_t *src = staged ? st : l->obuf + (l->ooff - MPC_FRAME_HDR);
        size_t w = 0;
        char why[300];
        int s = mpc_tls_write(n->tc[j], src, l->stage_len, &w, why, sizeof why);
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

/* Whether peer j's heartbeat has been silent past three beats (stopped, or cut off). */
static int beat_silent(const mpc_net *n, int j, uint64_t now)
{
    uint64_t seen = n->seen[j];
    return n->bfd[j] >= 0 && now > seen && now - seen > 3 * BEAT_MS * 1000000ull;
}

/* The node holding up peer j, following the sets of nodes the peers' beats say they await
 * (never to this node or one visited): the first whose heartbeat is silent (*rank 3), else one
 * awaiting nothing, which computes or is stuck (2), else j itself (1: all wait on each other). */
static int holder(const mpc_net *n, int j, uint32_t visited, uint64_t now, int *rank)
{
    uint32_t aw = n->peer_awaits[j];
    *rank = beat_silent(n, j, now) ? 3 : !aw ? 2 : 1;
    if (*rank > 1)
        return j;
    int best = j;
    for (int k = 0; k < n->cfg.n_nodes; k++)
        if ((aw & ~visited) & (1u << k)) {
            int r, h = holder(n, k, visited | 1u << k, now, &r);
            if (r > *rank)
                best = h, *rank = r;
        }
    return best;
}

/* The node to blame when no frame moved for a timeout, and the awaited peer it holds up (*via):
 * among the peers still owing or owed a frame, the holder of highest rank, ties to the one
 * silent or still longest, then to the lowest id; a holder awaited directly is named so. */
static int xfer_hung(const mpc_net *n, const link_io *io, uint64_t now, int *via)
{
    int best = -1, best_rank = 0, self = n->cfg.self;
    uint64_t best_t = 0;
    *via = 0;
    for (int j = 0; j < n->cfg.n_nodes; j++) {
        if (j == self || !(io[j].in || io[j].out))
            continue;
        int r, h = holder(n, j, 1u << self | 1u << j, now, &r);
        uint64_t t = r == 3 ? n->seen[h] : n->prog_seen[h];
        if (best < 0 || r > best_rank || (r == best_rank && t < best_t) ||
            (h == best && h == j)) /* the holder awaited directly, rather than through another */
            best = h, best_rank = r, best_t = t, *via = j;
    }
    return best < 0 ? 0 : best;
}

/* No progress for timeout_ms: the error names the node that holds the transfer up, and the
 * awaited peer it holds up when that is another. */
static int xfer_timeout(mpc_net *n, const link_io *io, int timeout_ms, errbuf *e)
{
    char a[16], b[16], c[16];
    int via, j = xfer_hung(n, io, now_ns(), &via);
    char through[48] = "";
    if (via != j)
        snprintf(through, sizeof through, ", awaited through %s", node_name(&n->cfg, via, c));
    return err_set(e, MS_ERR_TIMEOUT,
                   "%s: no progress from %s for %d ms during op %u%s (peer hung or too slow; raise "
                   "--timeout-ms if it is computing)",
                   node_name(&n->cfg, n->cfg.self, a), node_name(&n->cfg, j, b), timeout_ms, n->op,
                   through);
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
static int xfer_run(mpc_net *n, link_io *io, int timeout_ms, errbuf *e)
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
        uint32_t aw = 0; /* what this node's beats say it awaits */
        for (int j = 0; j < n->cfg.n_nodes; j++)
            if (io[j].in || io[j].out)
                aw |= 1u << j;
        n->awaits = aw;
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
        if ((rc = net_xfer_beats(n, io, now, e)) || (rc = xfer_wait(n, io, &w, deadline, now, e)))
            return rc;
    }
}

/* xfer_run; this node's beats say what it awaits meanwhile, and nothing after. */
static int xfer(mpc_net *n, link_io *io, int timeout_ms, errbuf *e)
{
    int rc = xfer_run(n, io, timeout_ms, e);
    n->awaits = 0;
    return rc;
}

/* ---------------------------------------------------------------- opening a session */

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
        rc = net_dial(n, j, 0, dl, &n->fd[j], &n->tc[j], e);
        dl = now_ns() + (uint64_t)cfg->connect_timeout_ms * 1000000ull;
        if (!rc)
            rc = net_dial(n, j, 1, dl, &n->bfd[j], &n->btc[j], e);
    }
    if (!rc)
        rc = net_accept_peers(n, lfd, e);
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
    if (pthread_create(&n->beat, NULL, net_beat_main, n) != 0) {
        mpc_net_free(n);
        return err_set(e, MS_ERR_INTERNAL, "mpc net: cannot start the heartbeat thread");
    }
    n->beat_on = 1;
    *out = n;
    return MS_OK;
}

/* ---------------------------------------------------------------- round trace */

/* MPCSIM_NET_TRACE=1: one line per round on stderr as it ends, to see where a node's time goes
 * (scripts/net_trace.py sums them): when the round began and ended (CLOCK_MONOTONIC, shared by
 * the nodes of one host), this thread's CPU time (CLOCK_THREAD_CPUTIME_ID) and its time runnable
 * but not running (run_delay, the second field of Linux's /proc/thread-self/schedstat; 0 where
 * there is none) at both ends, and the payload bytes sent and received. Between two rounds a
 * node computes; in a round it moves bytes or waits, blocked or for a CPU. The messages are the
 * same either way. */
typedef struct net_mark {
    uint64_t t, cpu, runq;
} net_mark;

static int trace_on(void)
{
    static int on = -1; /* each node a process of its own; only the node's thread asks */
    if (on < 0) {
        const char *v = getenv("MPCSIM_NET_TRACE");
        on = v && !strcmp(v, "1");
    }
    return on;
}

static void trace_mark(net_mark *m)
{
    unsigned long long run = 0, delay = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &delay) != 2)
            delay = 0;
        fclose(f);
    }
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    m->cpu = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    m->runq = delay;
    m->t = now_ns();
}

static void trace_round(const mpc_net *n, const net_mark *a, const size_t *slen, const size_t *rlen,
                        int setup)
{
    net_mark b;
    trace_mark(&b);
    uint64_t sent = 0, recv = 0;
    for (int j = 0; j < n->cfg.n_nodes; j++) {
        sent += slen ? slen[j] : 0;
        recv += rlen ? rlen[j] : 0;
    }
    fprintf(stderr,
            "mpc net trace: node %d op %u round %llu%s t %llu %llu cpu %llu %llu runq %llu %llu "
            "sent %llu recv %llu\n",
            n->cfg.self, n->op, (unsigned long long)(n->st.rounds + n->st.setup_rounds),
            setup ? " setup" : "", (unsigned long long)a->t, (unsigned long long)b.t,
            (unsigned long long)a->cpu, (unsigned long long)b.cpu, (unsigned long long)a->runq,
            (unsigned long long)b.runq, (unsigned long long)sent, (unsigned long long)recv);
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
    net_mark m0 = {0};
    if (trace_on())
        trace_mark(&m0);
    int rc = xfer(n, io, n->cfg.timeout_ms, e);
    if (rc)
        return rc;
    if (trace_on())
        trace_round(n, &m0, slen, rlen, setup);
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
