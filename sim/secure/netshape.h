/* netshape.h — a shaped network for the real backend: one network namespace per node (the
 * host's network untouched), a veth pair between every two nodes, and the kernel's tbf qdisc on
 * each end: every directed link has its own rate. Latency is not shaped here
 * (netem is not available): the backend's transport injects it. Needs root and iproute2 (ip,
 * tc); netshape_up says why when it cannot. */
#ifndef MPCSIM_NETSHAPE_H
#define MPCSIM_NETSHAPE_H

#include "protocols/backend/mpc_run.h"

/* The veth pairs' MTU (Ethernet's): the simulated links' wire framing uses the same. */
#define NETSHAPE_MTU 1500u

typedef struct netshape {
    int n_nodes;
    char tag[16];               /* prefix of every namespace and interface name */
    char ns[MPC_NODES_MAX][32]; /* node namespaces */
    char ip[MPC_NODES_MAX][32];
    double rate_bps;
    int up;
    int life_fd, done_fd; /* the cleaner's pipes (netshape_up) */
    char dir[256];        /* the nodes' reports: $TMPDIR/mpcsim-shape-XXXXXX */
} netshape;

/* Creates the namespaces, links and qdiscs. MS_ERR_NET with the reason when not possible.
 * A detached cleaner process removes the namespaces and the session's folder when the
 * launcher ends in any way, a SIGKILL included; netshape_down removes them itself and waits
 * for the cleaner. */
int netshape_up(netshape *s, int n_nodes, double rate_bps, errbuf *e);
void netshape_down(netshape *s);

/* A node's report or output file read whole (O_NOFOLLOW, a regular file of at most max bytes:
 * a link, device or FIFO planted in the session's folder is refused, never followed or read
 * without end). *buf is malloc'd, NUL-terminated past *len. */
#define NETSHAPE_OUT_MAX (1u << 30)
int netshape_read_file(const char *path, size_t max, uint8_t **buf, size_t *len, errbuf *e);

/* As mpc_launch_run, with node i inside namespace i and the peers at their veth addresses. */
int netshape_launch(const netshape *s, const mpc_launch *l, mpc_node_fn fn, void *arg,
                    mpc_node_result *res, int *n_nodes, errbuf *e);

#endif
