/* mpc_run.c — a node's life, op programs on secret shares, and the loopback launcher. */
#include "mpc_run.h"
#include "mpc_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocols/program/kern.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mpc_stat_between(const mpc_net_stats *a, const mpc_net_stats *b, uint64_t ns, mpc_op_stat *o)
{
    memset(o, 0, sizeof *o);
    for (int j = 0; j < MPC_NODES_MAX; j++) {
        o->sent[j] = b->sent[j] - a->sent[j];
        o->recv[j] = b->recv[j] - a->recv[j];
        o->offline_recv += b->offline_recv[j] - a->offline_recv[j];
        o->offline_sent += b->offline_sent[j] - a->offline_sent[j];
        o->wire_sent += b->wire_sent[j] - a->wire_sent[j];
    }
    o->rounds = b->rounds - a->rounds;
    o->ns = ns;
}

/* ---------------------------------------------------------------- op programs */

/* The op that produces tensor t, or -1. */
static long producer(const op_program *p, uint32_t t)
{
    for (size_t i = 0; i < p->n_ops; i++) {
        const op *o = &p->ops[i];
        if (o->out == t) /* an op reading its own output (a REVEAL in place) needs t's value */
            return o->in[0] == t || o->in[1] == t || o->in[2] == t ? -1 : (long)i;
    }
    return -1;
}

/* 1 when tensor t holds the public indices of a VIEW (op.h OPF_INDEX_*): every node needs
 * them, the dealer too (it restricts a fixed operand's mask by them). */
static int view_index(const op_program *p, uint32_t t)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].kind == OP_VIEW && p->ops[i].in[1] == t &&
            (p->ops[i].flags & (OPF_INDEX_ROWS | OPF_INDEX_COLS)))
            return 1;
    return 0;
}

static int engine_err(eng *e, int rc, errbuf *err, const char *what)
{
    const char *m = mpc_engine_error(e);
    if (err && (!err->msg[0] || m[0]))
        err_set(err, rc, "%s: %s", what, m[0] ? m : ms_err_text(rc));
    return rc;
}

/* Asks the binding for tensor t's plaintext; a fresh buffer in *out (NULL when none). */
static int fetch(eng *e, mpc_tensor_fn fn, void *ctx, const op_tensor *T, size_t n, int required,
                 uint64_t **out, errbuf *err)
{
    *out = calloc(n ? n : 1, sizeof **out);
    if (!*out)
        return err_set(err, MS_ERR_NOMEM, "mpc run: out of memory for tensor '%s'", T->name);
    if ((fn && fn(ctx, T, *out, n)) || !required)
        return MS_OK;
    free(*out);
    *out = NULL;
    return err_set(err, MS_ERR_NOTFOUND,
                   "mpc run: no values bound for %s tensor '%s' (%u×%u×%u) at P%d",
                   op_role_name(T->role), T->name, T->batch, T->rows, T->cols, e->party);
}

/* The value prev holds for a tensor named like T, of T's size, or NULL. */
static mpc_val *carried(mpc_program_run *prev, const op_tensor *T, size_t n)
{
    if (!prev || !prev->prog || (T->role != OPT_WEIGHT && T->role != OPT_CACHE))
        return NULL;
    uint32_t u = op_tensor_find(prev->prog, T->name);
    if (u == OP_NONE || prev->vals[u].n != n || prev->vals[u].dom != T->dom)
        return NULL;
    return &prev->vals[u];
}

int mpc_run_setup(eng *e, mpc_net *net, const op_program *p, mpc_tensor_fn fn, void *ctx,
                  mpc_program_run *r, errbuf *err)
{
    return mpc_run_setup_from(e, net, p, fn, ctx, NULL, r, err);
}

/* Tensor t's value before the ops: an op's output carries its length (an INPUT op's owner also
 * the plaintext it shares); a public tensor its plaintext; a weight, input or cache tensor the
 * shares carried over from prev by name, else the owner's input primitive. */
static int setup_tensor(eng *e, const op_program *p, mpc_tensor_fn fn, void *ctx,
                        mpc_program_run *prev, mpc_program_run *r, uint32_t t, errbuf *err)
{
    const op_tensor *T = &p->tens[t];
    size_t n = (size_t)T->batch * T->rows * T->cols;
    mpc_val *v = &r->vals[t];
    int dealer = mpc_engine_is_dealer(e), rc = MS_OK;
    v->n = n; /* every value carries its length, as in cost mode */
    v->dom = T->dom;
    long pi = producer(p, t);
    if (pi >= 0) { /* kern's INPUT reads the owner's plaintext from vals[out].s[0] */
        if (!dealer && p->ops[pi].kind == OP_INPUT &&
            op_input_owner(p, &p->ops[pi], e->n_parties) == e->party &&
            !(rc = fetch(e, fn, ctx, T, n, 1, &r->plain[t], err)))
            v->s[0] = r->plain[t];
        return rc;
    }
    uint64_t *plain = NULL;
    if (T->role == OPT_PUBLIC) { /* plaintext in s[0] on every party (kern.c) */
        if (!dealer && !(rc = fetch(e, fn, ctx, T, n, 1, &plain, err)) &&
            !(rc = e->vt->alloc(e, v, n, T->dom)))
            memcpy(v->s[0], plain, n * sizeof *plain);
        else if (dealer && view_index(p, t) && !(rc = fetch(e, fn, ctx, T, n, 1, &plain, err)))
            v->s[0] = plain, plain = NULL; /* the dealer's own copy (released with the value) */
        free(plain);
        return rc;
    }
    mpc_val *old = carried(prev, T, n);
    if (old) { /* shares from the previous program: no traffic */
        *v = *old;
        memset(old, 0, sizeof *old);
        return MS_OK;
    }
    /* weights: the model owner P1; the client's input and KV cache: P0 (cache: zeros when
     * it binds none). COST: setup, the owner's input primitive (PRIMITIVES.md §Setup). */
    int owner = T->role == OPT_WEIGHT ? 1 : (T->role == OPT_INPUT || T->role == OPT_CACHE) ? 0 : -1;
    if (owner < 0)
        return MS_OK;
    if (!dealer && e->party == owner &&
        (rc = fetch(e, fn, ctx, T, n, T->role != OPT_CACHE, &plain, err)))
        return rc;
    if (!(rc = e->vt->alloc(e, v, n, T->dom)) && (rc = e->vt->input(e, v, owner, plain)))
        rc = engine_err(e, rc, err, T->name);
    free(plain);
    return rc;
}

/* The beaver cache, after the previous program's is unbound: every fixed right operand's mask
 * is opened once, in program order (found again by name when an earlier program opened it). */
static int setup_fixed(eng *e, const op_program *p, mpc_program_run *r, errbuf *err)
{
    int rc = MS_OK;
    for (size_t i = 0; i < p->n_ops && !rc; i++) {
        const op *o = &p->ops[i];
        uint32_t y = o->kind == OP_VIEW ? o->in[0] : o->in[1]; /* a VIEW: a fixed operand's rows */
        if (!(o->flags & OPF_FIXED_B) || (o->flags & OPF_PUBLIC_B) || y == OP_NONE ||
            producer(p, y) >= 0)
            continue;
        if ((rc = mpc_engine_setup_fixed(e, y, &r->vals[y], p->tens[y].name)))
            rc = engine_err(e, rc, err, "beaver cache");
    }
    return rc;
}

int mpc_run_setup_from(eng *e, mpc_net *net, const op_program *p, mpc_tensor_fn fn, void *ctx,
                       mpc_program_run *prev, mpc_program_run *r, errbuf *err)
{
    memset(r, 0, sizeof *r);
    r->prog = p;
    r->vals = calloc(p->n_tens ? p->n_tens : 1, sizeof *r->vals);
    r->plain = calloc(p->n_tens ? p->n_tens : 1, sizeof *r->plain);
    r->ops = calloc(p->n_ops ? p->n_ops : 1, sizeof *r->ops);
    if (!r->vals || !r->ops || !r->plain)
        return err_set(err, MS_ERR_NOMEM, "mpc run: out of memory");
    mpc_net_stats a = *mpc_net_get_stats(net);
    uint64_t t0 = now_ns();
    int rc = MS_OK;
    for (uint32_t t = 0; t < p->n_tens && !rc; t++)
        rc = setup_tensor(e, p, fn, ctx, prev, r, t, err);
    mpc_engine_unbind_fixed(e);
    if (!rc)
        rc = setup_fixed(e, p, r, err);
    mpc_net_stats b = *mpc_net_get_stats(net);
    mpc_stat_between(&a, &b, now_ns() - t0, &r->setup);
    /* setup rounds and bytes are counted apart from online ones */
    r->setup.rounds = b.rounds - a.rounds + b.setup_rounds - a.setup_rounds;
    for (int j = 0; j < MPC_NODES_MAX; j++) {
        r->setup.sent[j] += b.setup_sent[j] - a.setup_sent[j];
        r->setup.recv[j] += b.setup_recv[j] - a.setup_recv[j];
    }
    return rc;
}

int mpc_run_ops(eng *e, mpc_net *net, mpc_program_run *r, size_t from, size_t to, errbuf *err)
{
    const op_program *p = r->prog;
    for (size_t i = from; i < to && i < p->n_ops; i++) {
        mpc_net_set_op(net, (uint32_t)i);
        e->cur_op = (uint32_t)i;
        mpc_net_stats a = *mpc_net_get_stats(net);
        uint64_t t0 = now_ns(), pn0, ps0, pn1, ps1;
        mpc_engine_pub_counts(e, &pn0, &ps0);
        if (err)
            err->msg[0] = 0;
        mpc_val *in = &r->vals[p->ops[i].out];
        if (p->ops[i].kind == OP_INPUT && in->s[0] &&
            !(r->plain && in->s[0] == r->plain[p->ops[i].out])) {
            /* the program runs again (party --repeat, bench_mpc): drop the last run's shares and
             * give the INPUT its plaintext back (kern reads it from s[0] at the owner) */
            size_t n = in->n;
            int dom = in->dom;
            e->vt->release(e, in);
            memset(in, 0, sizeof *in);
            in->n = n, in->dom = (uint8_t)dom;
            if (r->plain)
                in->s[0] = r->plain[p->ops[i].out];
        }
        int rc = kern_exec(e, p, i, r->vals, err);
        if (rc) {
            char m[700];
            snprintf(m, sizeof m, "op %zu (%s)", i, op_kind_name(p->ops[i].kind));
            return engine_err(e, rc, err, m);
        }
        mpc_net_stats b = *mpc_net_get_stats(net);
        mpc_stat_between(&a, &b, now_ns() - t0, &r->ops[i]);
        mpc_engine_pub_counts(e, &pn1, &ps1);
        r->ops[i].pub_n = pn1 - pn0;
        r->ops[i].pub_sum = ps1 - ps0;
    }
    return MS_OK;
}

int mpc_run_open(eng *e, mpc_net *net, mpc_program_run *r, uint32_t tid, uint64_t *out, errbuf *err)
{
    (void)net;
    int rc = e->vt->open(e, out, &r->vals[tid], -1);
    return rc ? engine_err(e, rc, err, "open") : MS_OK;
}

void mpc_program_run_free(eng *e, mpc_program_run *r)
{
    if (r->vals && r->prog)
        for (size_t t = 0; t < r->prog->n_tens; t++) {
            if (r->plain && r->plain[t] && r->vals[t].s[0] == r->plain[t])
                r->vals[t].s[0] = NULL; /* an INPUT op that never ran */
            e->vt->release(e, &r->vals[t]);
        }
    if (r->plain && r->prog)
        for (size_t t = 0; t < r->prog->n_tens; t++)
            free(r->plain[t]);
    free(r->plain);
    free(r->vals);
    free(r->ops);
    memset(r, 0, sizeof *r);
}

static int demo_op(op_program *p, int kind, uint32_t m, uint32_t k, uint32_t n, uint32_t in0,
                   uint32_t in1, uint32_t out, uint32_t flags, int iarg, double farg)
{
    op o = {.kind = (uint16_t)kind,
            .phase = PHASE_DECODE,
            .cat = OPC_OTHER,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = m,
            .k = k,
            .n = n,
            .in = {in0, in1, OP_NONE},
            .out = out,
            .flags = flags,
            .iarg = iarg,
            .farg = farg};
    return op_emit(p, &o) < 0;
}

int mpc_run_demo_program(op_program *p, errbuf *err)
{
    op_program_clear(p);
    snprintf(p->model, sizeof p->model, "demo");
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, 1, 4, 16);
    uint32_t w = op_tensor_add(p, "W", OPT_WEIGHT, DOM_ARITH, 1, 16, 16);
    uint32_t g = op_tensor_add(p, "g", OPT_WEIGHT, DOM_ARITH, 1, 1, 16);
    uint32_t h = op_tensor_add(p, "h", OPT_TEMP, DOM_ARITH, 1, 4, 16);
    uint32_t r = op_tensor_add(p, "r", OPT_TEMP, DOM_ARITH, 1, 4, 16);
    uint32_t s = op_tensor_add(p, "s", OPT_TEMP, DOM_ARITH, 1, 4, 16);
    uint32_t u = op_tensor_add(p, "u", OPT_TEMP, DOM_ARITH, 1, 4, 16);
    uint32_t l = op_tensor_add(p, "lt", OPT_TEMP, DOM_ARITH, 1, 4, 16);
    uint32_t o = op_tensor_add(p, "probs", OPT_OUTPUT, DOM_ARITH, 1, 4, 16);
    if (o == OP_NONE || demo_op(p, OP_INPUT, 4, 0, 16, OP_NONE, OP_NONE, x, 0, 0, 0) ||
        demo_op(p, OP_MATMUL, 4, 16, 16, x, w, h, OPF_FIXED_B, 0, 0) ||
        demo_op(p, OP_RMSNORM, 4, 0, 16, h, g, r, 0, 0, 1e-5) ||
        demo_op(p, OP_SOFTMAX, 4, 0, 16, r, OP_NONE, s, 0, -1, 0) ||
        demo_op(p, OP_GELU, 4, 0, 16, h, OP_NONE, u, 0, 0, 0) ||
        demo_op(p, OP_LT, 4, 0, 16, h, r, l, 0, 0, 0) ||
        demo_op(p, OP_REVEAL, 4, 0, 16, s, OP_NONE, o, 0, -1, 0))
        return err_set(err, MS_ERR_NOMEM, "demo program: out of memory");
    return MS_OK;
}

/* ---------------------------------------------------------------- one node */

int mpc_node_main(const proto_cfg *cfg, const mpc_net_cfg *ncfg, mpc_node_fn fn, void *arg,
                  FILE *out, mpc_net_stats *st, errbuf *err)
{
    return mpc_node_main_at(cfg, ncfg, fn, arg, out, st, NULL, NULL, err);
}

int mpc_node_main_at(const proto_cfg *cfg, const mpc_net_cfg *ncfg, mpc_node_fn fn, void *arg,
                     FILE *out, mpc_net_stats *st, mpc_fail_fn failed, void *fctx, errbuf *err)
{
    mpc_net *net = NULL;
    eng *e = NULL;
    /* Values of up to 32 MiB come from the heap and stay mapped between ops: no page faults
     * for every fresh share vector (glibc's default maps and unmaps anything over 128 KiB). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    int rc = mpc_net_open(ncfg, &net, err);
    if (rc) {
        if (failed)
            failed(fctx, rc, err, NULL);
        return rc;
    }
    rc = mpc_engine_new(cfg, net, &e, err);
    if (!rc && fn) {
        rc = fn(e, net, arg, out, err);
        if (rc && err && !err->msg[0])
            engine_err(e, rc, err, "node");
    }
    if (!rc)
        rc = mpc_net_finish(net, err);
    if (rc && failed) /* before the links close, which the peers then see */
        failed(fctx, rc, err, mpc_net_get_stats(net));
    if (st)
        *st = *mpc_net_get_stats(net);
    mpc_engine_free(e);
    mpc_net_free(net);
    return rc;
}

/* ---------------------------------------------------------------- loopback launcher */

typedef struct wire {
    int rc;
    uint64_t fail_ns; /* when the node knew it failed (CLOCK_MONOTONIC) */
    char err[1024];
    mpc_net_stats st;
    uint64_t out_len;
} wire;

static int write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* ---------------------------------------------------------------- launchers' signals */

static const int guard_sig[3] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction guard_old[3];
static int guard_depth;
static volatile sig_atomic_t guard_caught;

static void guard_on(int sig)
{
    if (!guard_caught)
        guard_caught = sig;
}

void mpc_launch_guard(void)
{
    if (guard_depth++)
        return;
    guard_caught = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = guard_on; /* no SA_RESTART: a wait returns early and looks */
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < 3; k++) {
        sigaction(guard_sig[k], &sa, &guard_old[k]);
        if (guard_old[k].sa_handler == SIG_IGN) /* ignored (nohup, a background job): stays so */
            sigaction(guard_sig[k], &guard_old[k], NULL);
    }
}

int mpc_launch_caught(void) { return guard_caught; }

void mpc_launch_unguard(void)
{
    if (guard_depth <= 0 || --guard_depth)
        return;
    for (int k = 0; k < 3; k++)
        sigaction(guard_sig[k], &guard_old[k], NULL);
    int sig = guard_caught;
    guard_caught = 0;
    if (sig)
        raise(sig);
}

int mpc_launch_node_init(pid_t launcher)
{
    for (int k = 0; guard_depth && k < 3; k++)
        sigaction(guard_sig[k], &guard_old[k], NULL);
    /* a launcher gone before prctl took hold is seen by getppid() */
    return prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher;
}

int mpc_launch_stopped(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    return pid > 0 && waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
           si.si_pid == pid && si.si_code == CLD_STOPPED;
}

int mpc_launch_frozen(int nodes, const pid_t *pid, const int *running, uint64_t *since)
{
    uint64_t now = now_ns();
    for (int i = 0; i < nodes; i++) {
        if (!running[i] || !mpc_launch_stopped(pid[i])) {
            since[i] = 0;
            continue;
        }
        if (!since[i])
            since[i] = now;
        else if (now - since[i] >= (uint64_t)MPC_LIVENESS_MS * 1000000ull)
            return i;
    }
    return -1;
}

/* ---------------------------------------------------------------- how a session ended */

/* How much node i's ending explains the session's failure: 0 frozen, 1 it ended on its own
 * without a report (killed, crashed, exited), 2 it reported a failure of its own, 3 it
 * reported a failure it saw in a peer (a lost link, silence, no progress), 4 the launcher
 * stopped it, 5 it succeeded. */
static int blame_rank(const mpc_ending *x, const mpc_node_result *r, int i)
{
    if (x->frozen[i])
        return 0;
    if (!x->reported[i])
        return x->stopped[i] || x->deadline ? 4 : 1;
    if (r->rc == MS_OK)
        return 5;
    return r->rc == MS_ERR_PEER || r->rc == MS_ERR_NET || r->rc == MS_ERR_TIMEOUT ? 3 : 2;
}

/* When node r knew the session failed: its own account, else when it ended. */
static double failed_at(const mpc_node_result *r) { return r->failed > 0 ? r->failed : r->seconds; }

void mpc_launch_blame(mpc_node_result *res, const mpc_ending *x)
{
    int c = -1, best = 5, seen = -1; /* seen: the first node that reported a peer's failure */
    for (int i = 0; i < x->nodes; i++) {
        int k = blame_rank(x, &res[i], i);
        if (k < best || (k == best && k < 5 && failed_at(&res[i]) < failed_at(&res[c])))
            best = k, c = i;
        if (k == 3 && (seen < 0 || failed_at(&res[i]) < failed_at(&res[seen])))
            seen = i;
    }
    for (int i = 0; i < x->nodes; i++) {
        mpc_node_result *R = &res[i];
        if (x->reported[i])
            continue;
        R->rc = MS_ERR_PEER;
        if (x->frozen[i])
            snprintf(
                R->err, sizeof R->err,
                "frozen: the node was stopped (a signal such as SIGSTOP) and fell silent%s%.900s",
                seen >= 0 ? "; " : "", seen >= 0 ? res[seen].err : "");
        else if (x->sig)
            snprintf(R->err, sizeof R->err, "stopped by the launcher, which received %s",
                     strsignal(x->sig));
        else if (x->stopped[i] && c >= 0 && c != i && best < 4)
            snprintf(R->err, sizeof R->err, "stopped by the launcher after node %d failed", c);
        else if (x->stopped[i] && x->deadline)
            snprintf(R->err, sizeof R->err,
                     "ended without a report: killed by the launcher at its deadline");
        else if (R->sig)
            snprintf(R->err, sizeof R->err, "ended without a report: killed by signal %d (%s)",
                     R->sig, strsignal(R->sig));
        else
            snprintf(R->err, sizeof R->err, "ended without a report (exit status %d)", R->status);
    }
    if (c >= 0 && best < 5 && !x->sig)
        res[c].cause = 1;
}

int mpc_launch_failed(const mpc_node_result *res, int nodes)
{
    for (int i = 0; i < nodes; i++)
        if (res[i].cause && res[i].rc)
            return i;
    for (int i = 0; i < nodes; i++)
        if (res[i].rc)
            return i;
    return -1;
}

/* ---------------------------------------------------------------- loopback launcher */

/* A failed node reports at once, before its links close (its peers then fail too, later) and
 * ends: the launcher names it, not a peer that saw it go. */
static void report_failure(void *ctx, int rc, const errbuf *err, const mpc_net_stats *st)
{
    wire w;
    memset(&w, 0, sizeof w);
    w.rc = rc;
    w.fail_ns = now_ns();
    if (err)
        memcpy(w.err, err->msg, sizeof w.err);
    if (st)
        w.st = *st;
    write_all(*(const int *)ctx, &w, sizeof w);
    _exit(0);
}

static void child(const mpc_launch *l, struct mpc_tls *tls, int self, int nodes, int n_parties,
                  const int *port, int lfd, int wfd, mpc_node_fn fn, void *arg)
{
    mpc_net_cfg nc;
    mpc_net_cfg_init(&nc, self, nodes);
    nc.n_parties = n_parties;
    for (int j = 0; j < nodes; j++) {
        snprintf(nc.host[j], sizeof nc.host[j], "127.0.0.1");
        nc.port[j] = port[j];
    }
    nc.listen_fd = lfd;
    nc.plaintext = l->plaintext;
    nc.tls = tls;
    if (l->timeout_ms)
        nc.timeout_ms = l->timeout_ms;
    nc.latency_ns = l->latency_ns;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    wire w;
    memset(&w, 0, sizeof w);
    errbuf e = {{0}};
    w.rc = mpc_node_main_at(&l->cfg, &nc, fn, arg, out, &w.st, report_failure, &wfd, &e);
    fclose(out);
    memcpy(w.err, e.msg, sizeof w.err);
    w.out_len = len;
    if (write_all(wfd, &w, sizeof w) == 0)
        write_all(wfd, buf, len);
    free(buf);
    _exit(0);
}

/* Whether a closed report pipe holds a complete report of success. */
static int report_ok(const uint8_t *buf, size_t len)
{
    wire w;
    if (len < sizeof w)
        return 0;
    memcpy(&w, buf, sizeof w);
    return w.rc == MS_OK;
}

/* Kills every node still running (rfd open), noting which were stopped (frozen). */
static void end_nodes(int nodes, const pid_t *pid, const int *rfd, mpc_ending *x)
{
    for (int i = 0; i < nodes; i++)
        if (rfd[i] >= 0) {
            x->frozen[i] = mpc_launch_stopped(pid[i]);
            kill(pid[i], SIGKILL);
            x->stopped[i] = 1;
        }
}

/* Reads every node's report until all pipes close. A node that ends without a report or with a
 * failure ends the session: every node still running is killed (SIGKILL) at once, since the
 * session cannot succeed without it (a frozen node never ends; its peers notice the silence
 * within MPC_LIVENESS_MS and fail, which ends it here, and a node stopped that long ends it
 * even when no peer waits on it). A signal the guard caught ends it the same way. Past the deadline
 * every node still running is killed too and given 2 s more. */
static int collect(const mpc_launch *l, int nodes, const pid_t *pid, int *rfd, uint64_t t0,
                   uint8_t **buf, size_t *len, mpc_node_result *res, mpc_ending *x, errbuf *err)
{
    size_t cap[MPC_NODES_MAX] = {0};
    uint64_t since[MPC_NODES_MAX] = {0};
    int open_n = nodes, deadline = l->deadline_ms ? l->deadline_ms : 60000, ending = 0;
    while (open_n > 0) {
        if (!ending && (x->sig = mpc_launch_caught()) != 0)
            ending = 1;
        int running[MPC_NODES_MAX];
        for (int i = 0; i < nodes; i++)
            running[i] = rfd[i] >= 0;
        if (!ending && mpc_launch_frozen(nodes, pid, running, since) >= 0)
            ending = 1; /* stopped, and no peer waits on it to notice */
        if (ending == 1) {
            end_nodes(nodes, pid, rfd, x);
            ending = 2;
        }
        struct pollfd pf[MPC_NODES_MAX];
        int who[MPC_NODES_MAX], np = 0;
        for (int i = 0; i < nodes; i++)
            if (rfd[i] >= 0) {
                pf[np] = (struct pollfd){.fd = rfd[i], .events = POLLIN};
                who[np++] = i;
            }
        int left = deadline - (int)((now_ns() - t0) / 1000000ull);
        if (left <= 0) {
            if (!x->deadline)
                end_nodes(nodes, pid, rfd, x);
            x->deadline = 1;
            left = 2000;
            deadline += 2000;
        }
        /* at most 200 ms at a time: a signal caught just before the poll is seen */
        int pr = poll(pf, (nfds_t)np, left < 200 ? left : 200);
        for (int q = 0; pr > 0 && q < np; q++) {
            int i = who[q];
            if (!pf[q].revents)
                continue;
            if (cap[i] - len[i] < 65536) {
                size_t nc = cap[i] ? 2 * cap[i] : 1 << 17;
                uint8_t *nb = realloc(buf[i], nc);
                if (!nb)
                    return err_set(err, MS_ERR_NOMEM, "launcher: out of memory");
                buf[i] = nb;
                cap[i] = nc;
            }
            ssize_t r = read(rfd[i], buf[i] + len[i], cap[i] - len[i]);
            if (r > 0)
                len[i] += (size_t)r;
            else if (r == 0 || errno != EINTR) {
                close(rfd[i]);
                rfd[i] = -1;
                open_n--;
                res[i].seconds = (double)(now_ns() - t0) * 1e-9;
                x->reported[i] = len[i] >= sizeof(wire);
                if (!ending && !report_ok(buf[i], len[i]))
                    ending = 1;
            }
        }
    }
    return MS_OK;
}

/* Fills res from a node's exit status and report (the message of one without a report is
 * mpc_launch_blame's). */
static void decode(int status, const uint8_t *buf, size_t len, uint64_t t0, mpc_node_result *R)
{
    R->exited = WIFEXITED(status);
    R->status = R->exited ? WEXITSTATUS(status) : 0;
    R->sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (len < sizeof(wire)) {
        R->rc = MS_ERR_PEER;
        return;
    }
    wire w;
    memcpy(&w, buf, sizeof w);
    R->rc = w.rc;
    R->failed = w.rc && w.fail_ns > t0 ? (double)(w.fail_ns - t0) * 1e-9 : 0;
    memcpy(R->err, w.err, sizeof R->err);
    R->err[sizeof R->err - 1] = 0;
    R->st = w.st;
    R->out_len = len - sizeof w < w.out_len ? len - sizeof w : (size_t)w.out_len;
    R->out = malloc(R->out_len + 1);
    if (R->out)
        memcpy(R->out, buf + sizeof w, R->out_len);
}

/* Every node's keys, made in memory: the forked nodes inherit them, and nothing secret is ever
 * on disk. */
int mpc_launch_tls(const mpc_launch *l, int nodes, struct mpc_tls **tls, errbuf *e)
{
    memset(tls, 0, sizeof *tls * (size_t)nodes);
    return l->plaintext ? MS_OK : mpc_tls_make_mem(nodes, tls, e);
}

void mpc_launch_tls_free(int nodes, struct mpc_tls **tls)
{
    for (int i = 0; i < nodes; i++) {
        mpc_tls_free(tls[i]);
        tls[i] = NULL;
    }
}

static int launch(const mpc_launch *l, mpc_node_fn fn, void *arg, mpc_node_result *res, int nodes,
                  int n_parties, errbuf *err)
{
    int lfd[MPC_NODES_MAX], port[MPC_NODES_MAX], rfd[MPC_NODES_MAX];
    pid_t pid[MPC_NODES_MAX];
    struct mpc_tls *tls[MPC_NODES_MAX];
    int rc = mpc_launch_tls(l, nodes, tls, err);
    if (rc)
        return rc;
    /* ports bound to 0 before the fork: no collisions, and every node already listens */
    for (int i = 0; i < nodes; i++) {
        rc = mpc_net_listen("127.0.0.1", 0, &lfd[i], &port[i], err);
        if (rc) {
            while (i--)
                close(lfd[i]);
            mpc_launch_tls_free(nodes, tls);
            return rc;
        }
    }
    fflush(stdout);
    fflush(stderr);
    uint64_t t0 = now_ns();
    int started = 0;
    for (int i = 0; i < nodes && !rc; i++) {
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) != 0) {
            rc = err_set(err, MS_ERR_IO, "pipe: %s", strerror(errno));
            break;
        }
        pid_t parent = getpid();
        pid[i] = fork();
        if (pid[i] == 0) {
            if (mpc_launch_node_init(parent)) /* the node dies with its launcher */
                _exit(1);
            close(pfd[0]);
            for (int j = 0; j < i; j++)
                close(rfd[j]);
            for (int j = 0; j < nodes; j++)
                if (j != i)
                    close(lfd[j]);
            child(l, tls[i], i, nodes, n_parties, port, lfd[i], pfd[1], fn, arg);
        }
        close(pfd[1]);
        rfd[i] = pfd[0];
        if (pid[i] < 0) {
            close(rfd[i]);
            rc = err_set(err, MS_ERR_IO, "fork: %s", strerror(errno));
        } else
            started++;
    }
    mpc_launch_tls_free(nodes, tls);
    for (int i = 0; i < nodes; i++)
        close(lfd[i]);
    if (rc) { /* the session cannot run without every node */
        for (int i = 0; i < started; i++) {
            kill(pid[i], SIGKILL);
            close(rfd[i]);
            waitpid(pid[i], NULL, 0);
        }
        return rc;
    }
    uint8_t *buf[MPC_NODES_MAX] = {0};
    size_t len[MPC_NODES_MAX] = {0};
    mpc_ending x;
    memset(&x, 0, sizeof x);
    x.nodes = nodes;
    rc = collect(l, nodes, pid, rfd, t0, buf, len, res, &x, err);
    for (int i = 0; i < nodes; i++) {
        int status = 0;
        if (rc && rfd[i] >= 0) {
            kill(pid[i], SIGKILL);
            close(rfd[i]);
        }
        waitpid(pid[i], &status, 0);
        decode(status, buf[i], len[i], t0, &res[i]);
        free(buf[i]);
    }
    mpc_launch_blame(res, &x);
    if (!rc && x.sig)
        rc = err_set(err, MS_ERR_INTERRUPTED, "interrupted by %s: the session's nodes were stopped",
                     strsignal(x.sig));
    return rc;
}

int mpc_launch_run(const mpc_launch *l, mpc_node_fn fn, void *arg, mpc_node_result *res,
                   int *n_nodes, errbuf *err)
{
    const proto *pr = proto_find(l->cfg.name);
    int nodes = pr ? pr->nodes : 3, n_parties = pr ? pr->n_parties : 3;
    *n_nodes = nodes;
    memset(res, 0, sizeof *res * (size_t)nodes);
    mpc_launch_guard();
    int rc = mpc_launch_caught() ? err_set(err, MS_ERR_INTERRUPTED, "interrupted by %s",
                                           strsignal(mpc_launch_caught()))
                                 : launch(l, fn, arg, res, nodes, n_parties, err);
    if (rc && mpc_launch_caught() && rc != MS_ERR_INTERRUPTED)
        rc = err_set(err, MS_ERR_INTERRUPTED, "interrupted by %s", strsignal(mpc_launch_caught()));
    mpc_launch_unguard(); /* a signal caught ends the command here, everything cleaned up */
    return rc;
}

void mpc_node_results_free(mpc_node_result *res, int n)
{
    for (int i = 0; i < n; i++) {
        free(res[i].out);
        res[i].out = NULL;
    }
}

/* ---------------------------------------------------------------- a program on loopback */

typedef struct local_job {
    const op_program *p;
    mpc_tensor_fn fn;
    void *ctx;
    int open_results;
} local_job;

static int local_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    const local_job *j = arg;
    const op_program *p = j->p;
    mpc_program_run r;
    int rc = mpc_run_setup(e, net, p, j->fn, j->ctx, &r, err);
    if (!rc)
        rc = mpc_run_ops(e, net, &r, 0, p->n_ops, err);
    if (!rc) {
        fwrite(&r.setup, sizeof r.setup, 1, out);
        fwrite(r.ops, sizeof *r.ops, p->n_ops, out);
    }
    for (size_t i = 0; i < p->n_ops && !rc && j->open_results; i++) {
        const op *o = &p->ops[i];
        size_t n = r.vals[o->out].n;
        uint64_t *v = calloc(n + 1, sizeof *v);
        if (!v) {
            rc = err_set(err, MS_ERR_NOMEM, "mpc run: out of memory");
            break;
        }
        if (o->kind == OP_REVEAL ||
            p->tens[o->out].role == OPT_PUBLIC) { /* plaintext, not shares */
            if (r.vals[o->out].s[0])
                memcpy(v, r.vals[o->out].s[0], n * sizeof *v);
        } else
            rc = mpc_run_open(e, net, &r, o->out, v, err);
        fwrite(&n, sizeof n, 1, out);
        fwrite(v, sizeof *v, n, out);
        free(v);
    }
    mpc_program_run_free(e, &r);
    return rc;
}

int mpc_run_local(const mpc_launch *l, const op_program *p, mpc_tensor_fn fn, void *ctx,
                  int open_results, mpc_local_run *out, errbuf *err)
{
    memset(out, 0, sizeof *out);
    local_job j = {p, fn, ctx, open_results};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes = 0;
    int rc = mpc_launch_run(l, local_node, &j, nr, &nodes, err);
    if (rc)
        return rc;
    out->n_nodes = nodes;
    const proto *pr = proto_find(l->cfg.name);
    out->n_parties = pr ? pr->n_parties : 3;
    int f = mpc_launch_failed(nr, nodes);
    if (f >= 0)
        rc = err_set(err, nr[f].rc, "node %d: %s", f, nr[f].err);
    for (int i = 0; i < nodes && !rc; i++) {
        const uint8_t *b = nr[i].out, *end = nr[i].out + nr[i].out_len;
        size_t need = sizeof(mpc_op_stat) * (1 + p->n_ops);
        out->ops[i] = calloc(p->n_ops + 1, sizeof(mpc_op_stat));
        if (!out->ops[i] || (size_t)(end - b) < need) {
            rc = err_set(err, MS_ERR_INTERNAL, "node %d: short report", i);
            break;
        }
        memcpy(&out->setup[i], b, sizeof(mpc_op_stat));
        memcpy(out->ops[i], b + sizeof(mpc_op_stat), sizeof(mpc_op_stat) * p->n_ops);
        b += need;
        if (!open_results)
            continue;
        size_t total = (size_t)(end - b) / sizeof(uint64_t) + 1;
        out->vals[i] = calloc(total, sizeof(uint64_t));
        uint64_t *dst = out->vals[i];
        for (size_t k = 0; dst && k < p->n_ops && b + sizeof(size_t) <= end; k++) {
            size_t n;
            memcpy(&n, b, sizeof n);
            b += sizeof n;
            if ((size_t)(end - b) < n * sizeof(uint64_t))
                break;
            memcpy(dst, b, n * sizeof(uint64_t));
            dst += n;
            b += n * sizeof(uint64_t);
        }
    }
    mpc_node_results_free(nr, nodes);
    if (rc)
        mpc_local_run_free(out);
    return rc;
}

void mpc_local_run_free(mpc_local_run *r)
{
    for (int i = 0; i < MPC_NODES_MAX; i++) {
        free(r->ops[i]);
        free(r->vals[i]);
        r->ops[i] = NULL;
        r->vals[i] = NULL;
    }
}
