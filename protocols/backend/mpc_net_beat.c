/* mpc_net_beat.c — the heartbeat thread and the liveness check of the links a transfer waits on
 * (see mpc_net_int.h). */
#include "mpc_net_int.h"

#include <sys/socket.h>

/* Peer j's heartbeat connection closed or failed. */
static void beat_lost(mpc_net *n, int j)
{
    if (!n->beat_gone[j]) {
        n->gone_at[j] = now_ns();
        n->beat_gone[j] = 1;
    }
}

/* Bytes of peer j's beats: a count byte (BEAT_COUNT set) or an awaited set (clear); each byte
 * says which it is, however the stream was cut into reads. */
static void beat_heard(mpc_net *n, int j, const uint8_t *b, size_t len)
{
    uint64_t now = now_ns();
    n->seen[j] = now;
    for (size_t i = 0; i < len; i++) {
        if (!(b[i] & BEAT_COUNT)) {
            n->peer_awaits[j] = b[i];
            continue;
        }
        if ((b[i] ^ n->beat_last[j]) & ~BEAT_COUNT & 0xffu)
            n->prog_seen[j] = now;
        n->beat_last[j] = b[i];
    }
}

/* The heartbeat thread: a beat to every peer each BEAT_MS (this node's progress count and the
 * set of nodes it awaits), and whatever the peers sent drained; the time of the last byte from
 * each peer, the last change of its count and its awaited set are what xfer checks. */
void *net_beat_main(void *arg)
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
                if (!wants[j]) {
                    n->beat_out[j][0] = (uint8_t)(BEAT_COUNT | (n->moved & ~BEAT_COUNT & 0xffu));
                    n->beat_out[j][1] = (uint8_t)(n->awaits & ~BEAT_COUNT & 0xffu);
                }
                if (n->btc[j]) { /* a beat still pending in the record layer goes first */
                    int s = mpc_tls_write(n->btc[j], n->beat_out[j], 2, &w, why, sizeof why);
                    wants[j] = s == MPC_TLS_WANT_READ || s == MPC_TLS_WANT_WRITE;
                    if (s == MPC_TLS_EOF || s == MPC_TLS_FAIL)
                        beat_lost(n, j);
                } else if (send(n->bfd[j], n->beat_out[j], 2, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
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
                        beat_heard(n, j, buf, got);
                if (s == MPC_TLS_EOF || s == MPC_TLS_FAIL)
                    beat_lost(n, j);
                continue;
            }
            ssize_t r = recv(pf[q].fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r > 0)
                beat_heard(n, j, buf, (size_t)r);
            else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                beat_lost(n, j); /* closed: an error once the grace is over (xfer_beats) */
        }
    }
    return NULL;
}

/* A peer with a frame pending whose heartbeats stopped for the liveness period is frozen. */
int net_xfer_beats(mpc_net *n, const link_io *io, uint64_t now, errbuf *e)
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
