/* mpc_run.h — running the real backend: one node's life (connect, key setup, work, goodbye),
 * an op program executed op by op through the kernels on secret shares with per-op measured
 * bytes/rounds/time, and a local launcher that forks a whole session on loopback.
 *
 * Tensors are bound by name: the model owner (P1) secret-shares every OPT_WEIGHT tensor at setup,
 * the client (P0) every OPT_INPUT tensor not produced by an op and every OPT_CACHE tensor (zeros
 * when it has none), and OPT_PUBLIC tensors are public to all. Running a lowered model is
 * therefore: lower it, give P1 a callback that returns each weight by name, give P0 the input. */
#ifndef MPCSIM_MPC_RUN_H
#define MPCSIM_MPC_RUN_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "protocols/program/eng.h"
#include "mpc_eng.h"
#include "mpc_net.h"
#include "protocols/program/op.h"

/* What one node measured over a span (an op, the setup). */
typedef struct mpc_op_stat {
    uint64_t sent[MPC_NODES_MAX]; /* online payload bytes this node sent to node j */
    uint64_t recv[MPC_NODES_MAX]; /* … received from node j */
    uint64_t offline_recv;        /* dealer→this node */
    uint64_t offline_sent;        /* this node (dealer)→parties */
    uint64_t rounds;
    uint64_t wire_sent;      /* bytes this node wrote on its data links: frames, and under
                              * TLS their records' framing (mpc_net_stats.wire_sent) */
    uint64_t ns;             /* wall time */
    uint64_t pub_n, pub_sum; /* public control values synced (eng sync_public; cost_tape) */
} mpc_op_stat;

void mpc_stat_between(const mpc_net_stats *a, const mpc_net_stats *b, uint64_t ns, mpc_op_stat *o);

/* Plaintext for a tensor (fixed point, n = batch·rows·cols values): returns 1 when it filled
 * out, 0 when this node has no values for it. */
typedef int (*mpc_tensor_fn)(void *ctx, const op_tensor *t, uint64_t *out, size_t n);

typedef struct mpc_program_run {
    const op_program *prog;
    mpc_val *vals;     /* one per tensor */
    uint64_t **plain;  /* per tensor: an INPUT op's plaintext at its owner (caller-owned) */
    mpc_op_stat setup; /* weight/input sharing and beaver-cache openings */
    mpc_op_stat *ops;  /* one per op */
} mpc_program_run;

/* Shares the bound tensors and opens the beaver-cache masks (setup traffic). */
int mpc_run_setup(eng *e, mpc_net *net, const op_program *p, mpc_tensor_fn fn, void *ctx,
                  mpc_program_run *r, errbuf *err);
/* The same for the next program of a session (the next decode step): every OPT_WEIGHT and
 * OPT_CACHE tensor whose name and size match one of prev's takes over prev's shares (moved out
 * of prev, no traffic), and cached weight masks are reused by name; the rest is bound as above.
 * prev may be NULL. */
int mpc_run_setup_from(eng *e, mpc_net *net, const op_program *p, mpc_tensor_fn fn, void *ctx,
                       mpc_program_run *prev, mpc_program_run *r, errbuf *err);
/* Executes ops [from, to) through kern_exec, measuring each. */
int mpc_run_ops(eng *e, mpc_net *net, mpc_program_run *r, size_t from, size_t to, errbuf *err);
/* Opens tensor tid to every party (outside the program: not counted in any op). */
int mpc_run_open(eng *e, mpc_net *net, mpc_program_run *r, uint32_t tid, uint64_t *out,
                 errbuf *err);
void mpc_program_run_free(eng *e, mpc_program_run *r);

/* A small program for demos and checks: x (client input op, 4×16) · W (fixed weight 16×16),
 * rmsnorm (gain g), softmax, gelu, lt, reveal of the softmax to all. */
int mpc_run_demo_program(op_program *p, errbuf *err);

/* ---------------------------------------------------------------- one node */

/* The work of a node once its mesh and engine are up. out collects what the node reports. */
typedef int (*mpc_node_fn)(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err);

/* Connects, creates the engine, runs fn, says goodbye; *st receives the final counters. */
int mpc_node_main(const proto_cfg *cfg, const mpc_net_cfg *ncfg, mpc_node_fn fn, void *arg,
                  FILE *out, mpc_net_stats *st, errbuf *err);
/* The same, calling failed(fctx, rc, err, counters or NULL) as soon as the node has failed,
 * before its links close: a launcher's node reports (and may end) there, so a peer that sees
 * the links close and fails in turn is not taken for the cause. */
typedef void (*mpc_fail_fn)(void *fctx, int rc, const errbuf *err, const mpc_net_stats *st);
int mpc_node_main_at(const proto_cfg *cfg, const mpc_net_cfg *ncfg, mpc_node_fn fn, void *arg,
                     FILE *out, mpc_net_stats *st, mpc_fail_fn failed, void *fctx, errbuf *err);

/* ---------------------------------------------------------------- local launcher */

typedef struct mpc_launch {
    proto_cfg cfg;
    int timeout_ms;      /* per-node no-progress timeout (0 = default 5000) */
    uint64_t latency_ns; /* injected one-way latency */
    int deadline_ms;     /* the launcher kills every node after this (0 = 60000) */
    int plaintext;       /* 1: no TLS on the party channels (else keys made for the session) */
} mpc_launch;

/* The launchers' TLS keys, made in memory (mpc_tls_make_mem; tls[i]: node i's, NULL when
 * l->plaintext). A node forked after it hands tls[i] to mpc_net_cfg.tls: no key file is ever
 * written for the session. mpc_launch_tls_free frees what the launcher holds after the fork. */
int mpc_launch_tls(const mpc_launch *l, int nodes, struct mpc_tls **tls, errbuf *e);
void mpc_launch_tls_free(int nodes, struct mpc_tls **tls);

/* Launchers' signals. Between mpc_launch_guard and mpc_launch_unguard (they nest), SIGINT,
 * SIGTERM and SIGHUP (unless ignored) only note the signal (mpc_launch_caught); a launcher's
 * wait looks every 200 ms, kills its nodes and cleans up, and the outermost unguard raises the
 * signal again under its former disposition, so the command still ends as the signal meant. */
void mpc_launch_guard(void);
int mpc_launch_caught(void);
void mpc_launch_unguard(void);
/* First thing in a forked node: the signals' former dispositions back, and death with the
 * launcher (PR_SET_PDEATHSIG, SIGKILL). Nonzero if the launcher is already gone. */
int mpc_launch_node_init(pid_t launcher);
/* 1 when child pid is stopped (SIGSTOP, SIGTSTP): frozen, as its peers see it. */
int mpc_launch_stopped(pid_t pid);
/* Called at least every 200 ms while the nodes run: the first node (running[i] set) found
 * stopped for MPC_LIVENESS_MS, or -1; since[] (zeroed at first) keeps when each was seen
 * stopped first. Ends a session whose frozen node no peer is waiting on (the dealer between
 * its batches, a party before its next round). */
int mpc_launch_frozen(int nodes, const pid_t *pid, const int *running, uint64_t *since);

typedef struct mpc_node_result {
    int rc;     /* the node's ms_err; MS_ERR_PEER if it died without reporting */
    int exited; /* 1: exited normally with status; 0: killed by signal sig */
    int status, sig;
    double seconds; /* until the node ended */
    double failed;  /* until it knew it failed, by its report (0: unknown) */
    char err[1024];
    mpc_net_stats st;
    uint8_t *out; /* what fn wrote to its FILE */
    size_t out_len;
    int cause; /* 1: the node the session failed from (mpc_launch_blame) */
} mpc_node_result;

/* How a launcher's session ended, node by node. */
typedef struct mpc_ending {
    int nodes;
    int reported[MPC_NODES_MAX]; /* its complete report was read */
    int stopped[MPC_NODES_MAX];  /* the launcher killed it after another node failed */
    int frozen[MPC_NODES_MAX];   /* it was stopped (SIGSTOP) when the launcher killed it */
    int deadline;                /* the launcher's deadline passed */
    int sig;                     /* the signal that interrupted the launcher, or 0 */
} mpc_ending;

/* Names the node a failed session failed from (res[c].cause = 1): a frozen node before one
 * that ended on its own without a report (killed, crashed), before one that reported a failure
 * of its own, before one that reported what it saw of a peer (a lost link, a silent heartbeat,
 * no progress); the earliest among equals. A node without a report gets a message saying how
 * it ended (a frozen one the first peer's account of the silence). */
void mpc_launch_blame(mpc_node_result *res, const mpc_ending *x);
/* The node to report a failed session by: the cause, else the first that failed; -1: none. */
int mpc_launch_failed(const mpc_node_result *res, int nodes);

/* Forks every node of the session (parties + dealer) on 127.0.0.1 with ports bound to 0 before
 * the fork (channels under TLS with keys made for the session unless l->plaintext, handed over
 * in memory: mpc_launch_tls), runs fn in each, and collects their results. The first node that
 * fails or ends without a report ends the session: the others are killed at once (a frozen
 * node is found by its peers' heartbeats or seen stopped by the launcher, within
 * MPC_LIVENESS_MS either way). Nodes die with the launcher
 * (PR_SET_PDEATHSIG). Returns MS_OK when the launch itself worked (look at
 * mpc_launch_failed(res) and res[i].rc); MS_ERR_INTERRUPTED after a signal (mpc_launch_guard),
 * which is then raised again unless an outer guard holds it. */
int mpc_launch_run(const mpc_launch *l, mpc_node_fn fn, void *arg, mpc_node_result *res,
                   int *n_nodes, errbuf *err);
void mpc_node_results_free(mpc_node_result *res, int n);

/* A whole op program on a loopback session: every node binds its tensors through fn (called
 * in the forked nodes), runs setup and every op, and reports. With open_results, every op's
 * result is also opened to all after the program (uncounted) so callers can compare values;
 * REVEAL results are the revealed plaintext at the parties that received them. */
typedef struct mpc_local_run {
    int n_nodes, n_parties;
    mpc_op_stat *ops[MPC_NODES_MAX]; /* [node][op] */
    mpc_op_stat setup[MPC_NODES_MAX];
    uint64_t *vals[MPC_NODES_MAX]; /* [node]: op results in op order, each op_out_elems long
                                    * (NULL unless open_results) */
} mpc_local_run;

int mpc_run_local(const mpc_launch *l, const op_program *p, mpc_tensor_fn fn, void *ctx,
                  int open_results, mpc_local_run *out, errbuf *err);
void mpc_local_run_free(mpc_local_run *r);

#endif
