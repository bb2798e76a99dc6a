/* mpc_net_dial.c — connecting to the peers below this node and accepting those above it:
 * non-blocking connect, hellos, the TLS handshake or plaintext acknowledgement (see mpc_net_int.h).
 */
#include "mpc_net_int.h"

#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* ---------------------------------------------------------------- connection setup */

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
int net_dial(mpc_net *n, int j, int chan, uint64_t deadline, int *fd, mpc_tls_conn **tc, errbuf *e)
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

/* A connection accepted but not yet a peer: its hello so far, then (TLS) its handshake. */
typedef struct acc_pending {
    int fd;
    uint64_t until; /* its hello, then its handshake, is due by then */
    size_t got;
    uint8_t h[MPC_FRAME_HDR];
    struct sockaddr_storage from;
    mpc_tls_hs *hs; /* TLS: the handshake under way (NULL: awaiting the hello) */
    int wants;      /* what hs waits for (MPC_TLS_WANT_READ / WRITE) */
    int id, chan;   /* the node and channel its hello claimed */
} acc_pending;

static void acc_drop(mpc_net *n, acc_pending *p, const char *why)
{
    char a[16], addr[INET6_ADDRSTRLEN + 8];
    peer_addr(&p->from, addr, sizeof addr);
    fprintf(stderr, "%s: dropped a connection from %s: %s; still waiting for the peers\n",
            node_name(&n->cfg, n->cfg.self, a), addr, why);
    mpc_tls_hs_free(p->hs);
    p->hs = NULL;
    close(p->fd);
    p->fd = -1;
}

/* The connection p, authenticated (tc: its TLS connection, or NULL), becomes its node's, unless
 * another took that slot meanwhile; 1 if it did, 0 if it was dropped. */
static int acc_keep(mpc_net *n, acc_pending *p, mpc_tls_conn *tc)
{
    int *slot = p->chan ? &n->bfd[p->id] : &n->fd[p->id];
    if (*slot >= 0) {
        char why[80];
        snprintf(why, sizeof why, "a second connection claims to be node %d", p->id);
        mpc_tls_close(tc);
        acc_drop(n, p, why);
        return 0;
    }
    n->st.hdr_recv += MPC_FRAME_HDR;
    *slot = p->fd;
    p->fd = -1;
    if (p->chan)
        n->btc[p->id] = tc;
    else
        n->tc[p->id] = tc;
    return 1;
}

/* Takes p's TLS handshake as far as the socket allows: 1 if it became a peer's, 0 if it was
 * dropped, 2 if it waits (p->wants). */
static int acc_step(mpc_net *n, acc_pending *p)
{
    mpc_tls_conn *tc = NULL;
    errbuf why;
    int hr = mpc_tls_hs_step(p->hs, &p->wants, &tc, &why);
    if (hr) {
        acc_drop(n, p, why.msg);
        return 0;
    }
    if (p->wants)
        return 2;
    mpc_tls_hs_free(p->hs);
    p->hs = NULL;
    return acc_keep(n, p, tc);
}

/* A complete hello on p: the peer's slot, and the plaintext acknowledgement or the start of its
 * TLS handshake, which runs alongside the other connections' (a silent or slow one holds up no
 * other), within timeout_ms as the hello; 1 if it became a peer's, 0 if it was dropped, 2 if
 * its handshake goes on. */
static int acc_take(mpc_net *n, acc_pending *p, uint64_t deadline)
{
    const mpc_net_cfg *cfg = &n->cfg;
    errbuf why;
    int hr =
        mpc_net_hello_parse(p->h, cfg->n_nodes, cfg->self, n->tls != NULL, &p->id, &p->chan, &why);
    if (!hr && *(p->chan ? &n->bfd[p->id] : &n->fd[p->id]) >= 0)
        hr = err_set(&why, MS_ERR_PROTO, "a second connection claims to be node %d", p->id);
    char b[16];
    if (!hr && n->tls) { /* within timeout_ms, as the hello: a silent peer holds no slot */
        uint64_t until = now_ns() + (uint64_t)cfg->timeout_ms * 1000000ull;
        p->until = until < deadline ? until : deadline;
        hr = mpc_tls_hs_begin(n->tls, p->fd, 1, p->id, node_name(cfg, p->id, b), &p->hs, &why);
        if (!hr)
            return acc_step(n, p);
    } else if (!hr) {
        static const uint8_t ack = HELLO_ACK;
        if (send(p->fd, &ack, 1, MSG_NOSIGNAL) != 1)
            hr = err_set(&why, MS_ERR_NET, "cannot acknowledge its hello: %s", strerror(errno));
    }
    if (hr) {
        acc_drop(n, p, why.msg);
        return 0;
    }
    return acc_keep(n, p, NULL);
}

/* Accepts on lfd the two channels of every node above self. */
int net_accept_peers(mpc_net *n, int lfd, errbuf *e)
{
    /* Accept until every node above self has said a valid hello (and, under TLS, proved it is
     * that node). A connection that is not one (a port scan, a stray client, a silent or
     * malformed peer, a second claim to a node, a certificate of another node or session) is
     * dropped and logged, and the wait for the real peer goes on until the deadline. Up to
     * ACCEPT_PENDING_MAX connections wait for their hellos, then their TLS handshakes, at once,
     * each for timeout_ms, so silent connections cannot hold the real peers back; past that
     * many the oldest is dropped. */
    const mpc_net_cfg *cfg = &n->cfg;
    acc_pending p[ACCEPT_PENDING_MAX];
    int np = 0, rc = MS_OK;
    char a[16];
    uint64_t deadline = now_ns() + (uint64_t)cfg->connect_timeout_ms * 1000000ull;
    for (int k = 2 * (cfg->self + 1); k < 2 * cfg->n_nodes && !rc;) {
        uint64_t now = now_ns(), wake = deadline;
        for (int q = 0; q < np;) { /* hellos and handshakes overdue */
            if (now >= p[q].until) {
                errbuf hw;
                if (p[q].hs)
                    mpc_tls_hs_timeout(p[q].hs, &hw);
                else
                    snprintf(hw.msg, sizeof hw.msg, "no hello within %d ms", cfg->timeout_ms);
                acc_drop(n, &p[q], hw.msg);
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
            pf[q + 1] = (struct pollfd){
                .fd = p[q].fd,
                .events = p[q].hs && p[q].wants == MPC_TLS_WANT_WRITE ? POLLOUT : POLLIN};
        int pr = poll(pf, (nfds_t)np + 1, (int)((wake - now + 999999) / 1000000));
        if (pr < 0 && errno != EINTR) {
            rc = err_set(e, MS_ERR_NET, "poll: %s", strerror(errno));
            break;
        }
        if (pr <= 0)
            continue;
        /* hellos and handshakes first (the listening socket may add to p) */
        int taken[ACCEPT_PENDING_MAX] = {0};
        for (int q = 0; q < np; q++) {
            if (!pf[q + 1].revents)
                continue;
            acc_pending *c = &p[q];
            if (c->hs) {
                int r = acc_step(n, c);
                k += r == 1;
                taken[q] = r != 2;
                continue;
            }
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
                int t = acc_take(n, c, deadline);
                k += t == 1;
                taken[q] = t != 2;
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
            acc_drop(n, &p[0], "too many connections without a hello or handshake");
            memmove(&p[0], &p[1], (size_t)(np - 1) * sizeof p[0]);
            np--;
        }
        uint64_t until = now_ns() + (uint64_t)cfg->timeout_ms * 1000000ull;
        p[np++] = (acc_pending){
            .fd = fd, .until = until < deadline ? until : deadline, .got = 0, .from = from};
    }
    for (int q = 0; q < np; q++) {
        mpc_tls_hs_free(p[q].hs);
        close(p[q].fd);
    }
    return rc;
}
