/* check_mpc_fault.c — the real backend's faults end cleanly: a killed peer, a dropped link,
 * malformed frames, a frozen or busy node, a port in use, a silent peer; and the user's command
 * (validate) ending at the first failure or signal with nothing left behind. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "protocols/backend/mpc_local.h"
#include "protocols/backend/mpc_run.h"
#include "harness.h"
#include "mpcfix.h"
#include "testdir.h"

static uint64_t X[256]; /* plaintext operand, visible to the forked nodes */
static const char *const protos[2] = {"semi2k", "aby3"};

/* ---------------------------------------------------------------- tests: faults */

typedef struct fault {
    int kind; /* 0 kill P1, 1 P1 drops its link to P0, 2 P0 sends garbage, 3 P0 sends a short
               * frame, 4 P1 hangs, 5 truncated payload, 6 kill the semi2k dealer, 7 a frame
               * of another protocol version (2, 3, 5, 7 inside TLS), 8 P0 writes garbage under
               * TLS (an altered record) */
} fault;

/* A node that squares 256 shared values (X) iters times, calling hook before each round; a
 * nonzero hook ends the run with its code (its message in err). */
typedef int (*round_hook)(eng *e, mpc_net *net, const void *arg, int it, errbuf *err);
static int squaring_node(eng *e, mpc_net *net, const void *arg, int iters, round_hook hook,
                         errbuf *err)
{
    mpc_val x = {0}, z = {0};
    int rc = e->vt->alloc(e, &x, 256, DOM_ARITH);
    if (!rc)
        rc = e->vt->input(e, &x, 0, X);
    for (int it = 0; it < iters && !rc; it++) {
        rc = hook(e, net, arg, it, err);
        if (!rc)
            rc = e->vt->mul(e, &z, &x, &x);
    }
    if (rc && !err->msg[0])
        err_set(err, rc, "%s", mpc_engine_error(e));
    e->vt->release(e, &x);
    e->vt->release(e, &z);
    return rc;
}

static int fault_hook(eng *e, mpc_net *net, const void *arg, int it, errbuf *err)
{
    const fault *f = arg;
    size_t n = 256;
    int me = mpc_engine_is_dealer(e) ? -1 : e->party;
    if (it == 3 && me == 1 && f->kind == 0)
        raise(SIGKILL);
    if (it == 3 && me == 1 && f->kind == 1)
        shutdown(mpc_net_fd(net, 0), SHUT_RDWR);
    if (it == 3 && me == 1 && f->kind == 4)
        sleep(2);
    if (it == 3 && me == -1 && f->kind == 6)
        raise(SIGKILL); /* the dealer dies: P1 waits on its corrections */
    if (it == 3 && me == 0 && f->kind == 8) {
        static const uint8_t junk[64] = {23, 3, 3, 0, 40};
        if (write(mpc_net_fd(net, 1), junk, sizeof junk) < 0)
            return err_set(err, MS_ERR_IO, "write");
        sleep(1);
        return err_set(err, MS_ERR_PEER, "rogue sender done");
    }
    if (it == 3 && me == 0 && (f->kind == 2 || f->kind == 3 || f->kind == 5 || f->kind == 7)) {
        uint8_t h[MPC_FRAME_HDR + 16];
        memset(h, 0x41, sizeof h);
        if (f->kind != 2) /* a well-formed header claiming 3 payload bytes / a cut payload */
            mpcfix_frame(h, f->kind == 7 ? 99 : MPC_FRAME_VERSION, MPC_FR_DATA, 0, 4,
                         f->kind == 3 ? 3 : 16 * n);
        if (mpc_net_send_raw(net, 1, h, sizeof h, err))
            return MS_ERR_IO;
        if (f->kind == 5)
            _exit(0); /* the frame is cut short and the sender is gone */
        sleep(1);     /* keep the link open until P1 has read the frame */
        return err_set(err, MS_ERR_PEER, "rogue sender done");
    }
    return 0;
}

static int fault_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    (void)out;
    return squaring_node(e, net, arg, 200, fault_hook, err);
}

/* Runs fault `kind`: the session must end promptly, the launcher naming node `culprit` (-1:
 * any, when two nodes see the same broken link) with a message holding `want`. */
static void run_fault(const char *pr, int kind, int culprit, const char *want, int timeout_ms)
{
    fault f = {kind};
    mpc_launch l = {.cfg = mpcfix_cfg(pr), .deadline_ms = 20000, .timeout_ms = timeout_ms};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    errbuf e;
    mpcfix_fill(X, 256, 3, 20);
    ck_assert_msg(mpc_launch_run(&l, fault_node, &f, nr, &nodes, &e) == MS_OK, "%s", e.msg);
    int c = mpc_launch_failed(nr, nodes);
    ck_assert_msg(c >= 0 && nr[c].cause, "%s fault %d: no node named as the cause", pr, kind);
    if (getenv("FAULT_TIMES"))
        for (int i = 0; i < nodes; i++)
            fprintf(stderr, "%s fault %d node %d: failed %.4f ended %.4f: %s\n", pr, kind, i,
                    nr[i].failed, nr[i].seconds, nr[i].err);
    double first = 1e9, last = 0;
    for (int i = 0; i < nodes; i++) {
        ck_assert_msg(nr[i].rc != MS_OK, "%s fault %d: node %d succeeded", pr, kind, i);
        ck_assert_msg(nr[i].err[0], "%s fault %d: node %d failed without a message", pr, kind, i);
        first = nr[i].seconds < first ? nr[i].seconds : first;
        last = nr[i].seconds > last ? nr[i].seconds : last;
    }
    /* the first failure ends the session: the others are killed, not waited for */
    ck_assert_msg(last - first < 1.5, "%s fault %d: nodes ended %.2f s after the first", pr, kind,
                  last - first);
    ck_assert_msg(last < 7.5, "%s fault %d: the session took %.1f s", pr, kind, last);
    ck_assert_msg((culprit < 0 || c == culprit) && strstr(nr[c].err, want),
                  "%s fault %d: node %d named (want %d, '%s'): %s", pr, kind, c, culprit, want,
                  nr[c].err);
    mpc_node_results_free(nr, nodes);
}

/* Node `victim` stops itself (SIGSTOP) after a few rounds, or sleeps 6.5 s when `pause`. */
typedef struct freeze {
    int victim, pause;
} freeze;

static int freeze_hook(eng *e, mpc_net *net, const void *arg, int it, errbuf *err)
{
    const freeze *f = arg;
    if (it == 20 && mpc_net_self(net) == f->victim) {
        if (f->pause)
            usleep(6500000); /* computing, as far as the peers can tell: still beating */
        else
            raise(SIGSTOP);
    }
    return 0;
}

static int freeze_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    (void)out;
    return squaring_node(e, net, arg, 60, freeze_hook, err);
}

/* Each node in turn is frozen (SIGSTOP) mid-run while the no-progress timeout is a minute, as
 * validate sets it: the heartbeats (or the launcher, seeing it stopped) find it within
 * MPC_LIVENESS_MS, and the launcher ends the session at once, naming the frozen node as the
 * cause (the deadline, 7 s, is not waited for). */
START_TEST(test_fault_frozen)
{
    const char *pr = protos[_i];
    mpcfix_fill(X, 256, 3, 20);
    int nodes = 3;
    for (int v = 0; v < nodes; v++) {
        freeze f = {v, 0};
        mpc_launch l = {.cfg = mpcfix_cfg(pr), .deadline_ms = 7000, .timeout_ms = 60000};
        mpc_node_result nr[MPC_NODES_MAX];
        errbuf e;
        ck_assert_msg(mpc_launch_run(&l, freeze_node, &f, nr, &nodes, &e) == MS_OK, "%s", e.msg);
        int c = mpc_launch_failed(nr, nodes);
        ck_assert_msg(c == v && nr[v].cause, "%s frozen %d: node %d named: %s", pr, v, c,
                      c >= 0 ? nr[c].err : "");
        ck_assert_msg(!nr[v].exited && nr[v].sig == SIGKILL, "%s: frozen node %d not killed", pr,
                      v);
        /* a peer's heartbeat account, or the launcher's own look when it came first */
        ck_assert_msg(strstr(nr[v].err, "frozen: the node was stopped"), "%s frozen %d: %s", pr, v,
                      nr[v].err);
        for (int i = 0; i < nodes; i++) {
            ck_assert_msg(nr[i].rc != MS_OK, "%s: node %d ran on beside frozen node %d", pr, i, v);
            ck_assert_msg(nr[i].seconds < 6.5, "%s: node %d ended after %.2f s, node %d frozen", pr,
                          i, nr[i].seconds, v);
            if (getenv("FROZEN_TIMES"))
                fprintf(stderr, "%s frozen %d: node %d ended after %.2f s: %s\n", pr, v, i,
                        nr[i].seconds, nr[i].err);
        }
        mpc_node_results_free(nr, nodes);
    }
}
END_TEST

/* A node busy for longer than MPC_LIVENESS_MS (here 6.5 s asleep in its main thread) is not
 * frozen: its heartbeat thread beats on and the session completes. */
START_TEST(test_busy_not_frozen)
{
    mpcfix_fill(X, 256, 3, 20);
    freeze f = {1, 1};
    mpc_launch l = {.cfg = mpcfix_cfg("semi2k"), .deadline_ms = 30000, .timeout_ms = 60000};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    errbuf e;
    ck_assert_msg(mpc_launch_run(&l, freeze_node, &f, nr, &nodes, &e) == MS_OK, "%s", e.msg);
    for (int i = 0; i < nodes; i++)
        ck_assert_msg(nr[i].rc == MS_OK, "node %d: %s", i, nr[i].err);
    ck_assert(nr[0].seconds > 6.0);
    mpc_node_results_free(nr, nodes);
}
END_TEST

/* Each fault (fault.kind) in the protocols it concerns, the no-progress timeout (0: the
 * default), the node the launcher must name as the cause (-1: either end of a link both ends
 * see broken) and what its message must say. A node that received a malformed frame is named,
 * its message naming the sender. */
static const struct fault_case {
    const char *proto;
    int kind, timeout_ms, culprit;
    const char *want;
} fault_cases[] = {
    {"semi2k", 0, 0, 1, "ended without a report: killed by signal 9"},
    {"aby3", 0, 0, 1, "ended without a report: killed by signal 9"},
    {"semi2k", 1, 0, -1, "lost"},
    {"aby3", 1, 0, -1, "lost"},
    {"semi2k", 2, 0, 1, "from P0: bad magic"},
    {"semi2k", 3, 0, 1, "payload of 3 bytes"},
    {"aby3", 5, 0, 0, "ended without a report (exit status 0)"},
    {"semi2k", 7, 0, 1, "version 99"},
    {"semi2k", 8, 0, 1, "TLS failure on the link to P0"},
    {"semi2k", 6, 0, 2, "ended without a report: killed by signal 9"},
    {"aby3", 4, 500, -1, "no progress from P1"}, /* P1 asleep: named, whoever reports */
};

START_TEST(test_fault)
{
    const struct fault_case *c = &fault_cases[_i];
    run_fault(c->proto, c->kind, c->culprit, c->want, c->timeout_ms);
}
END_TEST

/* ---------------------------------------------------------------- tests: the user's command */

TESTDIR("check_mpc_fault")

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Starts `mpcsim validate --basic-ops` (200 ms of latency: a minute of rounds) in protocol pr
 * with $TMPDIR the test's folder "tmp", output to "out"; waits until its n nodes run (their pids
 * in pid, from /proc: the launcher's children) and 0.5 s more, so the fault lands mid-session. */
static pid_t start_validate(const char *pr, int n, pid_t *pid, int shape)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s", testdir_path(&td, "tmp"));
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    setenv("TMPDIR", tmp, 1);
    const char *args[] = {"validate",
                          "--basic-ops",
                          "--n",
                          "256",
                          "--latency-ms",
                          "200",
                          "-p",
                          pr,
                          shape ? "--shape" : NULL,
                          NULL};
    pid_t l = th_spawn(th_bin(), args, NULL, testdir_path(&td, "out"), NULL);
    unsetenv("TMPDIR");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)l, (int)l);
    int got = 0;
    for (double t0 = mono_s(); got < n && mono_s() - t0 < 20;) {
        usleep(20000);
        FILE *f = fopen(path, "r");
        got = 0;
        long v;
        while (f && got < n && fscanf(f, "%ld", &v) == 1)
            pid[got++] = (pid_t)v;
        if (f)
            fclose(f);
    }
    ck_assert_msg(got == n, "the launcher did not start %d nodes (%d)", n, got);
    usleep(500000);
    return l;
}

/* How many files the test's folder "tmp" (the session's $TMPDIR) holds. */
static int tmp_left(void)
{
    DIR *d = opendir(testdir_path(&td, "tmp"));
    ck_assert_ptr_nonnull(d);
    int left = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        left += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return left;
}

/* The command ended: its folder "tmp" holds no key folder and none of its nodes runs. */
static void assert_nothing_left(const pid_t *pid, int n)
{
    int left = tmp_left();
    ck_assert_msg(left == 0, "%d files left in $TMPDIR", left);
    usleep(100000);
    for (int i = 0; i < n; i++) { /* gone, or a zombie (an orphan init has not reaped yet) */
        char path[64], st[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid[i]);
        FILE *f = fopen(path, "r");
        if (f && !fgets(st, sizeof st, f))
            st[0] = 0;
        if (f)
            fclose(f);
        const char *r = strrchr(st, ')');
        ck_assert_msg(!f || (r && r[1] == ' ' && r[2] == 'Z'), "node %d (pid %d) still runs", i,
                      (int)pid[i]);
    }
}

/* A node killed (SIGKILL) or frozen (SIGSTOP) mid-session: the user's command ends within 6 s
 * of the fault, non-zero, naming that node and how it ended, with nothing left behind. */
static const struct user_fault {
    const char *proto;
    int nodes, victim, sig;
    const char *want;
} user_faults[] = {
    {"aby3", 3, 1, SIGKILL, "node 1: ended without a report: killed by signal 9"},
    {"semi2k", 3, 2, SIGSTOP, "node 2: frozen"},
};

START_TEST(test_user_fault)
{
    const struct user_fault *c = &user_faults[_i];
    pid_t pid[MPC_NODES_MAX];
    pid_t l = start_validate(c->proto, c->nodes, pid, 0);
    double t0 = mono_s();
    ck_assert_int_eq(kill(pid[c->victim], c->sig), 0);
    int st = th_wait(l);
    double took = mono_s() - t0;
    const char *out = th_text(testdir_path(&td, "out"));
    ck_assert_msg(took < 6.0, "%s: ended %.2f s after the fault", c->proto, took);
    ck_assert_msg(st != 0 && st < 128, "%s: exit status %d: %s", c->proto, st, out);
    ck_assert_msg(strstr(out, c->want), "%s: no '%s' in: %s", c->proto, c->want, out);
    assert_nothing_left(pid, c->nodes);
}
END_TEST

/* SIGINT or SIGTERM to the launcher: it ends by that signal at once, its nodes and keys gone. */
START_TEST(test_user_signal)
{
    int sig = _i ? SIGTERM : SIGINT;
    pid_t pid[MPC_NODES_MAX];
    pid_t l = start_validate("aby3", 3, pid, 0);
    double t0 = mono_s();
    ck_assert_int_eq(kill(l, sig), 0);
    int st = th_wait(l);
    ck_assert_msg(mono_s() - t0 < 2.0, "ended %.2f s after the signal", mono_s() - t0);
    ck_assert_int_eq(st, 128 + sig);
    assert_nothing_left(pid, 3);
}
END_TEST

/* The network namespaces of the --shape launcher pid: how many exist, read from the folder
 * `ip netns` keeps them in (no shell, so no message of a command read as a count). */
static int shape_namespaces(pid_t l)
{
    char tag[32];
    int n = snprintf(tag, sizeof tag, "mv%un", (unsigned)l % 100000u), count = 0;
    DIR *d = opendir("/var/run/netns");
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        count += strncmp(e->d_name, tag, (size_t)n) == 0;
    if (d)
        closedir(d);
    return count;
}

/* With --shape (root, iproute2, network namespaces; skipped otherwise, saying why): a node
 * killed ends the command within 6 s naming it, SIGTERM to the launcher ends it at once, and
 * after a SIGKILL of the launcher its cleaner removes what it made within 5 s; either way no
 * namespace, key or session folder, nor node, is left. */
START_TEST(test_user_shape)
{
    char out[256];
    if (geteuid() != 0 ||
        th_sh("ip netns add mpcsim-probe && ip netns del mpcsim-probe", out, sizeof out) != 0) {
        fprintf(stderr, "check_mpc: --shape not tested: %s\n",
                geteuid() ? "not root" : "cannot make a network namespace here");
        return;
    }
    pid_t pid[MPC_NODES_MAX];
    pid_t l = start_validate("aby3", 3, pid, 1);
    ck_assert_msg(shape_namespaces(l) == 3, "no namespaces for the shaped session");
    double t0 = mono_s();
    ck_assert_int_eq(kill(_i ? l : pid[1], _i == 1 ? SIGTERM : SIGKILL), 0);
    int st = th_wait(l);
    double took = mono_s() - t0;
    const char *txt = th_text(testdir_path(&td, "out"));
    ck_assert_msg(took < 6.0, "ended %.2f s after the fault", took);
    if (_i)
        ck_assert_int_eq(st, 128 + (_i == 1 ? SIGTERM : SIGKILL));
    else
        ck_assert_msg(st != 0 && st < 128 && strstr(txt, "node 1: ended without a report"),
                      "exit %d: %s", st, txt);
    double t1 = mono_s();
    while (_i == 2 && (shape_namespaces(l) || tmp_left()) && mono_s() - t1 < 5.0)
        usleep(20000); /* the cleaner's turn: the namespaces, then the session's folder */
    ck_assert_msg(shape_namespaces(l) == 0, "%d namespaces left %.2f s after the launcher ended",
                  shape_namespaces(l), mono_s() - t1);
    assert_nothing_left(pid, 3);
}
END_TEST

START_TEST(test_port_in_use)
{
    int fd, port, fd2;
    errbuf e;
    ck_assert_int_eq(mpc_net_listen("127.0.0.1", 0, &fd, &port, &e), MS_OK);
    ck_assert_int_eq(mpc_net_listen("127.0.0.1", port, &fd2, NULL, &e), MS_ERR_NET);
    ck_assert_ptr_nonnull(strstr(e.msg, "already in use"));
    close(fd);
}
END_TEST

START_TEST(test_peers_parse)
{
    mpc_net_cfg c;
    errbuf e;
    mpc_net_cfg_init(&c, 0, 3);
    ck_assert_int_eq(mpc_net_parse_peers(&c, "a:1,b:2,c:65535", 3, &e), MS_OK);
    ck_assert_str_eq(c.host[1], "b");
    ck_assert_int_eq(c.port[2], 65535);
    ck_assert_int_eq(mpc_net_parse_peers(&c, "a:1,b:2", 3, &e), MS_ERR_USAGE);
    ck_assert_int_eq(mpc_net_parse_peers(&c, "a:1,b:x,c:3", 3, &e), MS_ERR_USAGE);
    ck_assert_int_eq(mpc_net_parse_peers(&c, "a:1,b:2,c:3,d:4", 3, &e), MS_ERR_USAGE);
}
END_TEST

Suite *mpc_fault_suite(void)
{
    Suite *s = suite_create("mpc_fault");
    TCase *tf = th_case(s, "faults", 60);
    TH_LOOPS(tf, TH_N(fault_cases), test_fault);
    TH_LOOPS(tf, 2, test_fault_frozen);
    TH_TESTS(tf, test_busy_not_frozen, test_port_in_use, test_peers_parse);
    TCase *tu = th_case(s, "user_command", 60);
    TESTDIR_USE(tu);
    TH_LOOPS(tu, TH_N(user_faults), test_user_fault);
    TH_LOOPS(tu, 2, test_user_signal);
    TH_LOOPS(tu, 3, test_user_shape);
    return s;
}
