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
#include <sys/stat.h>
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
/* The cleaner: a grandchild of the launcher, deaf to the terminal's signals, that waits for
 * the launcher's end of the life pipe to close (netshape_down, or the launcher's death in any
 * way) and then deletes every namespace of the session; it ends, closing done_w, after. */
static void start_cleaner(netshape *s)
{
    int life[2], done[2];
    s->life_fd = s->done_fd = -1;
    if (pipe2(life, O_CLOEXEC) != 0)
        return;
    if (pipe2(done, O_CLOEXEC) != 0) {
        close(life[0]);
        close(life[1]);
        return;
    }
    fflush(NULL);
    pid_t mid = fork();
    if (mid == 0) {
        if (fork() == 0) {
            signal(SIGINT, SIG_IGN);
            signal(SIGTERM, SIG_IGN);
            signal(SIGHUP, SIG_IGN);
            setsid();                            /* out of the terminal's process group */
            int nul = open("/dev/null", O_RDWR); /* holds no pipe of the caller open */
            for (int fd = 0; nul >= 0 && fd < 3; fd++)
                dup2(nul, fd);
            close(life[1]);
            close(done[0]);
            char c;
            while (read(life[0], &c, 1) < 0 && errno == EINTR)
                ;
            char f[300];
            for (int i = 0; i < s->n_nodes; i++) {
                /* a deletion that fails (the name busy for a moment) is tried again, 2 s in all */
                char ns[300];
                snprintf(ns, sizeof ns, "/var/run/netns/%s", s->ns[i]);
                for (int t = 0; t < 40 && access(ns, F_OK) == 0; t++)
                    if (sh("ip netns del %s", s->ns[i]) && access(ns, F_OK) == 0)
                        usleep(50000);
                for (int k = 0; s->dir[0] && k < 2; k++) {
                    snprintf(f, sizeof f, "%s/%s%d", s->dir, k ? "st" : "out", i);
                    unlink(f);
                }
            }
            if (s->dir[0])
                rmdir(s->dir);
            _exit(0);
        }
        _exit(0);
    }
    close(life[0]);
    close(done[1]);
    if (mid > 0)
        waitpid(mid, NULL, 0);
    s->life_fd = life[1];
    s->done_fd = done[0];
}

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
    /* until netshape_down, SIGINT, SIGTERM and SIGHUP end the launches and come back there,
     * after the namespaces are gone */
    mpc_launch_guard();
    for (int i = 0; i < n_nodes; i++)
        snprintf(s->ns[i], sizeof s->ns[i], "%sn%d", s->tag, i);
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/mpcsim-shape-XXXXXX",
             tmp && *tmp && strlen(tmp) < 200 ? tmp : "/tmp");
    if (!mkdtemp(s->dir)) {
        int rc = err_set(e, MS_ERR_IO, "%s: cannot make the session's folder: %s", s->dir,
                         strerror(errno));
        s->dir[0] = 0;
        s->life_fd = -1;
        netshape_down(s);
        return rc;
    }
    start_cleaner(s);
    int net = (int)(getpid() % 200);
    for (int i = 0; i < n_nodes; i++) {
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
    for (int i = 0; i < s->n_nodes; i++) /* a namespace's veth ends go with it */
        if (s->ns[i][0])
            sh("ip netns del %s", s->ns[i]);
    s->up = 0;
    if (s->dir[0])
        rmdir(s->dir);
    if (s->life_fd >= 0) { /* the cleaner finds nothing left, and ends */
        close(s->life_fd);
        char c;
        while (read(s->done_fd, &c, 1) < 0 && errno == EINTR)
            ;
        close(s->done_fd);
        s->life_fd = s->done_fd = -1;
    }
    mpc_launch_unguard(); /* a signal caught meanwhile ends the command now */
}

/* Node i's report (file stp): rc, message, counters, when it failed (CLOCK_MONOTONIC). */
static void write_report(const char *stp, int rc, const errbuf *err, const mpc_net_stats *st,
                         uint64_t fail_ns)
{
    FILE *sf = fopen(stp, "wb");
    if (sf) {
        fwrite(&rc, sizeof rc, 1, sf);
        fwrite(err->msg, sizeof err->msg, 1, sf);
        fwrite(st, sizeof *st, 1, sf);
        fwrite(&fail_ns, sizeof fail_ns, 1, sf);
        fclose(sf);
    }
}

/* A failed node reports at once, before its links close, and ends (status 1). */
static void report_failure(void *ctx, int rc, const errbuf *err, const mpc_net_stats *st)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    mpc_net_stats z;
    memset(&z, 0, sizeof z);
    write_report(ctx, rc, err, st ? st : &z,
                 (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec);
    _exit(1);
}

static void node_child(const netshape *s, const mpc_launch *l, struct mpc_tls *tls, int i,
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
    nc.tls = tls;
    for (int j = 0; j < s->n_nodes; j++) {
        snprintf(nc.host[j], sizeof nc.host[j], "%s", s->ip[j]);
        nc.port[j] = NS_PORT + j;
    }
    if (!rc)
        rc = mpc_node_main_at(&l->cfg, &nc, fn, arg, out, &st, report_failure, (void *)stp, &err);
    if (out)
        fclose(out);
    if (rc)
        report_failure((void *)stp, rc, &err, &st);
    write_report(stp, rc, &err, &st, 0);
    _exit(0);
}

int netshape_read_file(const char *path, size_t max, uint8_t **buf, size_t *len, errbuf *e)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return err_set(e, errno == ENOENT ? MS_ERR_NOTFOUND : MS_ERR_IO, "%s: cannot open: %s",
                       path,
                       errno == ELOOP ? "a symbolic link, which is not followed" : strerror(errno));
    struct stat st;
    int rc = MS_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = err_set(e, MS_ERR_IO, "%s: error: not a regular file", path);
    else if ((uint64_t)st.st_size > max)
        rc = err_set(e, MS_ERR_IO,
                     "%s: error: file of %llu bytes, larger than the %llu bytes this reader takes",
                     path, (unsigned long long)st.st_size, (unsigned long long)max);
    else if (!(*buf = malloc((size_t)st.st_size + 1)))
        rc = err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
    while (!rc && *len < (size_t)st.st_size) { /* a file that shrinks ends the read early */
        ssize_t r = read(fd, *buf + *len, (size_t)st.st_size - *len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = err_set(e, MS_ERR_IO, "%s: read error: %s", path, strerror(errno));
        if (r <= 0)
            break;
        *len += (size_t)r;
    }
    close(fd);
    if (rc) {
        free(*buf);
        *buf = NULL;
        *len = 0;
        return rc;
    }
    (*buf)[*len] = 0;
    return MS_OK;
}

/* Waits for every node (pid ≤ 0: its fork failed). The first node that fails (a non-zero exit
 * status, a signal) ends the session: the others are killed at once, noting which were stopped
 * (frozen). A signal the launchers' guard caught ends it the same way, and after deadline_ms
 * since t0 the nodes still running are killed. */
static int wait_nodes(const pid_t *pid, int nodes, int deadline_ms, const struct timespec *t0,
                      int *status, double *secs, mpc_ending *x, errbuf *e)
{
    int left = nodes, rc = MS_OK, done[MPC_NODES_MAX] = {0}, ending = 0;
    uint64_t since[MPC_NODES_MAX] = {0};
    while (left) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) * 1e-6;
        for (int i = 0; i < nodes; i++)
            if (!done[i] && pid[i] > 0 && waitpid(pid[i], &status[i], WNOHANG) == pid[i]) {
                done[i] = 1, left--, secs[i] = ms * 1e-3;
                ending |= !WIFEXITED(status[i]) || WEXITSTATUS(status[i]) != 0;
            } else if (!done[i] && pid[i] <= 0)
                done[i] = 1, left--, ending = 1, rc = err_set(e, MS_ERR_IO, "fork failed");
        if ((x->sig = mpc_launch_caught()) != 0)
            ending = 1;
        int running[MPC_NODES_MAX];
        for (int i = 0; i < nodes; i++)
            running[i] = !done[i] && pid[i] > 0;
        if (mpc_launch_frozen(nodes, pid, running, since) >= 0)
            ending = 1;
        if (left && ms > deadline_ms) {
            ending = 1;
            x->deadline = 1;
            rc =
                err_set(e, MS_ERR_TIMEOUT, "shaped session: nodes killed after %d ms", deadline_ms);
        }
        if (left && ending) {
            for (int i = 0; i < nodes; i++)
                if (!done[i]) {
                    x->frozen[i] = mpc_launch_stopped(pid[i]);
                    x->stopped[i] = 1;
                    kill(pid[i], SIGKILL);
                    waitpid(pid[i], &status[i], 0);
                    done[i] = 1;
                    secs[i] = ms * 1e-3;
                }
            left = 0;
        }
        if (left) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    if (x->sig && !rc)
        rc = err_set(e, MS_ERR_INTERRUPTED, "interrupted by %s: the session's nodes were stopped",
                     strsignal(x->sig));
    return rc;
}

/* Node i's result: how it ended (status), its report (file stp: rc, message, stats) and its
 * output (file outp). */
static int read_result(int status, const char *stp, const char *outp, uint64_t t0_ns,
                       mpc_node_result *r)
{
    int reported = 0;
    r->exited = WIFEXITED(status);
    r->status = r->exited ? WEXITSTATUS(status) : 0;
    r->sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    size_t n = 0;
    uint8_t *sb = NULL;
    uint64_t fail_ns = 0;
    size_t want = sizeof(int) + sizeof r->err + sizeof r->st + sizeof fail_ns;
    errbuf why;
    netshape_read_file(stp, want, &sb, &n, &why); /* missing or bad: no report */
    if (sb && n >= want) {
        memcpy(&r->rc, sb, sizeof(int));
        memcpy(r->err, sb + sizeof(int), sizeof r->err);
        r->err[sizeof r->err - 1] = 0;
        memcpy(&r->st, sb + sizeof(int) + sizeof r->err, sizeof r->st);
        memcpy(&fail_ns, sb + sizeof(int) + sizeof r->err + sizeof r->st, sizeof fail_ns);
        r->failed = r->rc && fail_ns > t0_ns ? (double)(fail_ns - t0_ns) * 1e-9 : 0;
        reported = 1;
    } else
        r->rc = MS_ERR_PEER; /* the message is mpc_launch_blame's */
    free(sb);
    if (netshape_read_file(outp, NETSHAPE_OUT_MAX, &r->out, &r->out_len, &why) && reported &&
        !r->rc) {
        r->rc = MS_ERR_IO;
        snprintf(r->err, sizeof r->err, "%s", why.msg);
    }
    return reported;
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
    if (mpc_launch_caught())
        return err_set(e, MS_ERR_INTERRUPTED, "interrupted by %s", strsignal(mpc_launch_caught()));
    const char *dir = s->dir;
    char outp[MPC_NODES_MAX][300], stp[MPC_NODES_MAX][300];
    struct mpc_tls *tls[MPC_NODES_MAX];
    int krc = mpc_launch_tls(l, nodes, tls, e);
    if (krc)
        return krc;
    fflush(stdout);
    fflush(stderr);
    pid_t pid[MPC_NODES_MAX];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < nodes; i++) {
        snprintf(outp[i], sizeof outp[i], "%s/out%d", dir, i);
        snprintf(stp[i], sizeof stp[i], "%s/st%d", dir, i);
        pid_t parent = getpid();
        pid[i] = fork();
        if (pid[i] == 0) {
            if (mpc_launch_node_init(parent)) /* the node dies with its launcher */
                _exit(1);
            node_child(s, l, tls[i], i, n_parties, fn, arg, outp[i], stp[i]);
        }
    }
    mpc_launch_tls_free(nodes, tls);
    int status[MPC_NODES_MAX] = {0};
    double secs[MPC_NODES_MAX] = {0};
    mpc_ending x;
    memset(&x, 0, sizeof x);
    x.nodes = nodes;
    int rc =
        wait_nodes(pid, nodes, l->deadline_ms ? l->deadline_ms : 60000, &t0, status, secs, &x, e);
    for (int i = 0; i < nodes; i++) {
        x.reported[i] =
            read_result(status[i], stp[i], outp[i],
                        (uint64_t)t0.tv_sec * 1000000000ull + (uint64_t)t0.tv_nsec, &res[i]);
        res[i].seconds = secs[i];
        unlink(outp[i]);
        unlink(stp[i]);
    }
    mpc_launch_blame(res, &x);
    return rc;
}
