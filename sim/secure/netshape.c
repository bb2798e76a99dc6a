/* netshape.c — namespaces, veth pairs, a bridge and tbf for the real backend (netshape.h). */
#include "netshape.h"

#include "sim/engine/net.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS_PORT 7411

/* Runs a command line quietly; 0 on success. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[600];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    int st = system(full);
    return st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

/* Topology: every node's address on its loopback device, and a veth pair per pair of nodes
 * with a host route to the peer's address through it, so each directed link i→j is its own
 * interface (the veth end in i's namespace) with its own tbf: bandwidth per directed link, as
 * the network model has it. */
int netshape_up(netshape *s, int n_nodes, double rate_bps, errbuf *e)
{
    memset(s, 0, sizeof *s);
    if (geteuid() != 0)
        return err_set(e, MS_ERR_NET,
                       "bandwidth shaping needs root (network namespaces, tc)\n"
                       "---> HINT: run as root, or leave out --shape (loopback, latency injected)");
    if (sh("command -v ip") || sh("command -v tc"))
        return err_set(e, MS_ERR_NET, "bandwidth shaping needs iproute2's ip and tc");
    if (rate_bps < 1e5 || rate_bps > 1e11)
        return err_set(e, MS_ERR_RANGE, "tbf rate %.3g bit/s outside 100 kbit/s … 100 Gbit/s",
                       rate_bps);
    s->n_nodes = n_nodes;
    s->rate_bps = rate_bps;
    snprintf(s->tag, sizeof s->tag, "mv%u", (unsigned)getpid() % 100000u);
    s->up = 1;
    int net = (int)(getpid() % 200);
    for (int i = 0; i < n_nodes; i++) {
        snprintf(s->ns[i], sizeof s->ns[i], "%sn%d", s->tag, i);
        snprintf(s->ip[i], sizeof s->ip[i], "10.213.%d.%d", net, i + 1);
        if (sh("ip netns add %s", s->ns[i]) || sh("ip -n %s link set lo up", s->ns[i]) ||
            sh("ip -n %s addr add %s/32 dev lo", s->ns[i], s->ip[i])) {
            netshape_down(s);
            return err_set(e, MS_ERR_NET,
                           "cannot create network namespace %s (ip netns add failed)", s->ns[i]);
        }
    }
    /* tbf: a bucket of 1 ms of traffic (at least two full frames), so a message is serialized
     * at the rate rather than passed as a burst; packets wait at most 1 s */
    unsigned long burst = (unsigned long)net_tbf_burst_bytes(rate_bps);
    for (int i = 0; i < n_nodes; i++)
        for (int j = i + 1; j < n_nodes; j++) {
            int bad = sh(
                "ip link add %sx%d%d netns %s mtu %u type veth peer name %sx%d%d netns %s mtu %u",
                s->tag, i, j, s->ns[i], NETSHAPE_MTU, s->tag, j, i, s->ns[j], NETSHAPE_MTU);
            for (int d = 0; d < 2 && !bad; d++) {
                int a = d ? j : i, b = d ? i : j;
                bad = sh("ip -n %s link set %sx%d%d up", s->ns[a], s->tag, a, b) ||
                      sh("ip -n %s route add %s/32 dev %sx%d%d src %s", s->ns[a], s->ip[b], s->tag,
                         a, b, s->ip[a]) ||
                      sh("ip netns exec %s tc qdisc add dev %sx%d%d root tbf rate %.0fbit burst "
                         "%lu latency 1000ms",
                         s->ns[a], s->tag, a, b, rate_bps, burst);
            }
            if (bad) {
                netshape_down(s);
                return err_set(e, MS_ERR_NET,
                               "cannot set up the veth pair or tbf qdisc between nodes %d and %d "
                               "(kernel without veth or sch_tbf?)",
                               i, j);
            }
        }
    return MS_OK;
}

void netshape_down(netshape *s)
{
    if (!s->up)
        return;
    for (int i = 0; i < s->n_nodes; i++)
        if (s->ns[i][0])
            sh("ip netns del %s", s->ns[i]);
    s->up = 0;
}

static void node_child(const netshape *s, const mpc_launch *l, const char *keys, int i,
                       int n_parties, mpc_node_fn fn, void *arg, const char *outp, const char *stp)
{
    errbuf err = {{0}};
    mpc_net_stats st;
    memset(&st, 0, sizeof st);
    int rc = MS_OK;
    char path[128];
    snprintf(path, sizeof path, "/var/run/netns/%s", s->ns[i]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
        rc = err_set(&err, MS_ERR_NET, "node %d: cannot enter namespace %s: %s", i, s->ns[i],
                     strerror(errno));
    FILE *out = fopen(outp, "wb");
    if (!rc && !out)
        rc = err_set(&err, MS_ERR_IO, "node %d: cannot write %s", i, outp);
    mpc_net_cfg nc = {.self = i,
                      .n_nodes = s->n_nodes,
                      .n_parties = n_parties,
                      .listen_fd = -1,
                      .timeout_ms = l->timeout_ms ? l->timeout_ms : 5000,
                      .connect_timeout_ms = 10000,
                      .latency_ns = l->latency_ns,
                      .plaintext = l->plaintext};
    snprintf(nc.keys, sizeof nc.keys, "%s", keys);
    for (int j = 0; j < s->n_nodes; j++) {
        snprintf(nc.host[j], sizeof nc.host[j], "%s", s->ip[j]);
        nc.port[j] = NS_PORT + j;
    }
    if (!rc)
        rc = mpc_node_main(&l->cfg, &nc, fn, arg, out, &st, &err);
    if (out)
        fclose(out);
    FILE *sf = fopen(stp, "wb");
    if (sf) {
        fwrite(&rc, sizeof rc, 1, sf);
        fwrite(err.msg, sizeof err.msg, 1, sf);
        fwrite(&st, sizeof st, 1, sf);
        fclose(sf);
    }
    _exit(rc ? 1 : 0);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (!f)
        return NULL;
    size_t cap = 1 << 16;
    uint8_t *b = malloc(cap);
    size_t n;
    while (b && (n = fread(b + *len, 1, cap - *len, f)) > 0) {
        *len += n;
        if (*len == cap) {
            uint8_t *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            }
            b = nb;
        }
    }
    fclose(f);
    return b;
}

/* Waits for every node (pid ≤ 0: its fork failed); after deadline_ms since t0 the nodes
 * still running are killed. */
static int wait_nodes(const pid_t *pid, int nodes, int deadline_ms, const struct timespec *t0,
                      int *status, errbuf *e)
{
    int left = nodes, rc = MS_OK, done[MPC_NODES_MAX] = {0};
    while (left) {
        for (int i = 0; i < nodes; i++)
            if (!done[i] && pid[i] > 0 && waitpid(pid[i], &status[i], WNOHANG) == pid[i])
                done[i] = 1, left--;
            else if (!done[i] && pid[i] <= 0)
                done[i] = 1, left--, rc = err_set(e, MS_ERR_IO, "fork failed");
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) * 1e-6;
        if (left && ms > deadline_ms) {
            for (int i = 0; i < nodes; i++)
                if (!done[i]) {
                    kill(pid[i], SIGKILL);
                    waitpid(pid[i], &status[i], 0);
                    done[i] = 1;
                }
            left = 0;
            rc =
                err_set(e, MS_ERR_TIMEOUT, "shaped session: nodes killed after %d ms", deadline_ms);
        }
        if (left) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    return rc;
}

/* Node i's result: how it ended (status), its report (file stp: rc, message, stats) and its
 * output (file outp). */
static void read_result(int i, int status, const char *stp, const char *outp, mpc_node_result *r)
{
    r->exited = WIFEXITED(status);
    r->status = r->exited ? WEXITSTATUS(status) : 0;
    r->sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    size_t n = 0;
    uint8_t *sb = slurp(stp, &n);
    if (sb && n >= sizeof(int) + sizeof r->err + sizeof r->st) {
        memcpy(&r->rc, sb, sizeof(int));
        memcpy(r->err, sb + sizeof(int), sizeof r->err);
        r->err[sizeof r->err - 1] = 0;
        memcpy(&r->st, sb + sizeof(int) + sizeof r->err, sizeof r->st);
    } else {
        r->rc = MS_ERR_PEER;
        snprintf(r->err, sizeof r->err, "node %d ended without a report", i);
    }
    free(sb);
    r->out = slurp(outp, &r->out_len);
}

int netshape_launch(const netshape *s, const mpc_launch *l, mpc_node_fn fn, void *arg,
                    mpc_node_result *res, int *n_nodes, errbuf *e)
{
    const proto *pr = proto_find(l->cfg.name);
    int n_parties = pr ? pr->n_parties : 3, nodes = pr ? pr->nodes : 3;
    if (!s->up || s->n_nodes != nodes)
        return err_set(e, MS_ERR_INTERNAL, "netshape: %d namespaces for %d nodes", s->n_nodes,
                       nodes);
    *n_nodes = nodes;
    memset(res, 0, sizeof *res * (size_t)nodes);
    char dir[] = "/tmp/mpcsim-shape-XXXXXX", outp[MPC_NODES_MAX][64], stp[MPC_NODES_MAX][64];
    if (!mkdtemp(dir))
        return err_set(e, MS_ERR_IO, "mkdtemp: %s", strerror(errno));
    char keys[256];
    int krc = mpc_launch_keys(l, nodes, keys, e);
    if (krc) {
        rmdir(dir);
        return krc;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid[MPC_NODES_MAX];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < nodes; i++) {
        snprintf(outp[i], sizeof outp[i], "%s/out%d", dir, i);
        snprintf(stp[i], sizeof stp[i], "%s/st%d", dir, i);
        pid[i] = fork();
        if (pid[i] == 0)
            node_child(s, l, keys, i, n_parties, fn, arg, outp[i], stp[i]);
    }
    int status[MPC_NODES_MAX] = {0};
    int rc = wait_nodes(pid, nodes, l->deadline_ms ? l->deadline_ms : 60000, &t0, status, e);
    for (int i = 0; i < nodes; i++) {
        read_result(i, status[i], stp[i], outp[i], &res[i]);
        unlink(outp[i]);
        unlink(stp[i]);
    }
    rmdir(dir);
    mpc_launch_keys_drop(nodes, keys);
    return rc;
}
