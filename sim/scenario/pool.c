/* pool.c — a sweep's runs executed in this process or in forked workers (pool.h). */
#include "pool.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- one run: execute, serialize, deserialize ------------------------------------------- */

static void iso_now(char out[32])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + k, 32 - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

double pool_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void job_execute(const run_cfg *c, size_t pos, pool_result *j)
{
    memset(j, 0, sizeof *j);
    j->pos = pos;
    run_result_init(&j->res);
    iso_now(j->started);
    double t0 = pool_now_s();
    j->rc = run_execute(c, &j->res, &j->err);
    double dt = pool_now_s() - t0;
    if (j->res.wall_s <= 0)
        j->res.wall_s = dt;
    iso_now(j->finished);
}

/* A growable byte buffer; the wire format is this binary's own struct layout (parent and
 * workers are the same executable), framed by a magic and a length. */
typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} wbuf;

#define WIRE_MAGIC 0x4d505252u /* "MPRR" */

static void wput(wbuf *b, const void *src, size_t len)
{
    if (b->oom)
        return;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + len)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, len);
    b->n += len;
}

static void job_serialize(const pool_result *j, wbuf *b)
{
    uint64_t hdr[2] = {WIRE_MAGIC, 0}; /* length patched below */
    wput(b, hdr, sizeof hdr);
    uint64_t sel = j->pos, nm = j->res.n_metric;
    wput(b, &sel, sizeof sel);
    wput(b, &j->rc, sizeof j->rc);
    wput(b, &j->err, sizeof j->err);
    wput(b, j->started, sizeof j->started);
    wput(b, j->finished, sizeof j->finished);
    wput(b, &j->res.wall_s, sizeof j->res.wall_s);
    wput(b, &nm, sizeof nm);
    if (nm)
        wput(b, j->res.metric, nm * sizeof *j->res.metric);
    for (int p = 0; p < PHASE_N; p++) {
        const sim_result *r = &j->res.phase[p];
        uint64_t nl = r->layer ? r->n_layers : 0;
        wput(b, &r->latency_ns, sizeof r->latency_ns);
        wput(b, &r->events, sizeof r->events);
        wput(b, &r->total, sizeof r->total);
        wput(b, r->cat, sizeof r->cat);
        wput(b, &nl, sizeof nl);
        if (nl)
            wput(b, r->layer, nl * sizeof *r->layer);
    }
    if (!b->oom)
        ((uint64_t *)b->p)[1] = b->n - sizeof hdr;
}

typedef struct rcur {
    const unsigned char *p;
    size_t n, at;
    int bad;
} rcur;

static void rget(rcur *c, void *dst, size_t len)
{
    if (c->bad || c->at + len > c->n) {
        c->bad = 1;
        memset(dst, 0, len);
        return;
    }
    memcpy(dst, c->p + c->at, len);
    c->at += len;
}

/* Parses a payload (after the header) into j; -1 if it is malformed. */
static int job_deserialize(const unsigned char *p, size_t n, pool_result *j)
{
    rcur c = {.p = p, .n = n};
    uint64_t sel = 0, nm = 0;
    memset(j, 0, sizeof *j);
    run_result_init(&j->res);
    rget(&c, &sel, sizeof sel);
    j->pos = (size_t)sel;
    rget(&c, &j->rc, sizeof j->rc);
    rget(&c, &j->err, sizeof j->err);
    rget(&c, j->started, sizeof j->started);
    rget(&c, j->finished, sizeof j->finished);
    rget(&c, &j->res.wall_s, sizeof j->res.wall_s);
    rget(&c, &nm, sizeof nm);
    if (c.bad || nm > n / sizeof(run_metric))
        return -1;
    for (uint64_t i = 0; i < nm; i++) {
        run_metric m;
        rget(&c, &m, sizeof m);
        m.name[sizeof m.name - 1] = m.unit[sizeof m.unit - 1] = '\0';
        if (c.bad || run_metric_add(&j->res, m.name, m.value, m.unit))
            return -1;
    }
    for (int ph = 0; ph < PHASE_N; ph++) {
        sim_result *r = &j->res.phase[ph];
        uint64_t nl = 0;
        rget(&c, &r->latency_ns, sizeof r->latency_ns);
        rget(&c, &r->events, sizeof r->events);
        rget(&c, &r->total, sizeof r->total);
        rget(&c, r->cat, sizeof r->cat);
        rget(&c, &nl, sizeof nl);
        if (c.bad || nl > n / sizeof(sim_stats))
            return -1;
        if (nl) {
            if (!(r->layer = calloc((size_t)nl, sizeof *r->layer)))
                return -1;
            r->n_layers = (size_t)nl;
            rget(&c, r->layer, (size_t)nl * sizeof *r->layer);
        }
    }
    j->err.msg[sizeof j->err.msg - 1] = '\0';
    j->started[31] = j->finished[31] = '\0';
    return c.bad || c.at != n ? -1 : 0;
}

/* ---- executing: in-process or in forked workers ---------------------------------------- */

/* What the workers and the parent share. */
typedef struct pool {
    const run_cfg *runs;
    const size_t *sel;
    const run_cfg *const *list; /* or the runs themselves (pool_run_list) */
    size_t n;
    const pool_sink *sink;
} pool;

static const run_cfg *pool_cfg(const pool *pl, size_t i)
{
    return pl->list ? pl->list[i] : &pl->runs[pl->sel[i]];
}

static void pool_begin(const pool *pl, size_t i)
{
    if (pl->sink->begin)
        pl->sink->begin(pl->sink->ctx, i);
}

static int pool_stopped(const pool *pl) { return pl->sink->stop && pl->sink->stop(pl->sink->ctx); }

static void pool_done(const pool *pl, pool_result *j)
{
    pl->sink->done(pl->sink->ctx, j);
    run_result_free(&j->res);
}

static void pool_inprocess(const pool *pl)
{
    for (size_t i = 0; i < pl->n && !pool_stopped(pl); i++) {
        pool_result j;
        pool_begin(pl, i);
        job_execute(pool_cfg(pl, i), i, &j);
        pool_done(pl, &j);
    }
}

typedef struct worker {
    pid_t pid;
    int task_fd, res_fd; /* parent's ends */
    long task;           /* selection position in flight, -1 if idle */
} worker;

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *q = p;
    while (n) {
        ssize_t k = write(fd, q, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        q += k;
        n -= (size_t)k;
    }
    return 0;
}

/* 1 read, 0 EOF at the start, -1 error or short read. */
static int read_all(int fd, void *p, size_t n)
{
    unsigned char *q = p;
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, q + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return got == 0 && k == 0 ? 0 : -1;
        got += (size_t)k;
    }
    return 1;
}

/* A worker: read a selection position, execute it, send the result; until EOF. */
static void worker_main(const pool *pl, int task_fd, int res_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        _exit(1);
    uint64_t pos;
    while (read_all(task_fd, &pos, sizeof pos) == 1) {
        pool_result j;
        wbuf b = {0};
        if (pos >= pl->n)
            _exit(1);
        job_execute(pool_cfg(pl, (size_t)pos), (size_t)pos, &j);
        job_serialize(&j, &b);
        if (b.oom || write_all(res_fd, b.p, b.n))
            _exit(1);
        free(b.p);
        run_result_free(&j.res);
    }
    _exit(0);
}

static int worker_spawn(const pool *pl, worker *ws, int k)
{
    int tp[2], rp[2];
    if (pipe(tp))
        return -1;
    if (pipe(rp)) {
        close(tp[0]);
        close(tp[1]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        for (int i = 0; i < k; i++) { /* siblings' pipes */
            close(ws[i].task_fd);
            close(ws[i].res_fd);
        }
        close(tp[1]);
        close(rp[0]);
        worker_main(pl, tp[0], rp[1]);
    }
    close(tp[0]);
    close(rp[1]);
    ws[k] = (worker){.pid = pid, .task_fd = tp[1], .res_fd = rp[0], .task = -1};
    return 0;
}

/* Gives worker w the next position, or closes its task pipe when none is left. */
static void worker_feed(const pool *pl, worker *w, size_t *next, size_t n)
{
    if (*next < n) {
        uint64_t pos = *next;
        if (write_all(w->task_fd, &pos, sizeof pos) == 0) {
            w->task = (long)(*next)++;
            pool_begin(pl, (size_t)pos);
            return;
        }
    }
    if (w->task_fd >= 0)
        close(w->task_fd);
    w->task_fd = -1;
    w->task = -1;
}

/* Reads one framed result from a worker; on EOF or garbage, the run in flight fails. */
static int worker_collect(const pool *pl, worker *w)
{
    uint64_t hdr[2];
    pool_result j;
    memset(&j, 0, sizeof j);
    run_result_init(&j.res);
    int got = read_all(w->res_fd, hdr, sizeof hdr);
    unsigned char *p = NULL;
    if (got == 1 && hdr[0] == WIRE_MAGIC && hdr[1] < ((uint64_t)1 << 34) &&
        (p = malloc(hdr[1] ? hdr[1] : 1)) && read_all(w->res_fd, p, hdr[1]) == 1 &&
        job_deserialize(p, hdr[1], &j) == 0 && (long)j.pos == w->task) {
        free(p);
        pool_done(pl, &j);
        return 0;
    }
    free(p);
    run_result_free(&j.res);
    close(w->res_fd);
    w->res_fd = -1;
    if (w->task_fd >= 0)
        close(w->task_fd);
    w->task_fd = -1;
    if (w->task >= 0) { /* the worker died or spoke garbage: its run fails, others go on */
        pool_result f = {.pos = (size_t)w->task, .rc = MS_ERR_INTERNAL};
        run_result_init(&f.res);
        iso_now(f.started);
        iso_now(f.finished);
        err_set(&f.err, MS_ERR_INTERNAL, "worker process %d died during the run", (int)w->pid);
        pool_done(pl, &f);
    }
    return -1;
}

static void pool_workers(const pool *pl, long jobs)
{
    worker ws[POOL_MAX_JOBS];
    int nw = 0;
    size_t next = 0;
    if ((size_t)jobs > pl->n)
        jobs = (long)pl->n;
    if (jobs > POOL_MAX_JOBS)
        jobs = POOL_MAX_JOBS;
    for (; nw < jobs; nw++)
        if (worker_spawn(pl, ws, nw)) {
            fprintf(stderr, "mpcsim run: warning: could not start worker %d: %s\n", nw + 1,
                    strerror(errno));
            break;
        }
    if (nw == 0) {
        pool_inprocess(pl);
        return;
    }
    for (int i = 0; i < nw; i++)
        worker_feed(pl, &ws[i], &next, pool_stopped(pl) ? 0 : pl->n);
    for (;;) {
        struct pollfd pf[POOL_MAX_JOBS];
        int np = 0, map[POOL_MAX_JOBS];
        for (int i = 0; i < nw; i++)
            if (ws[i].res_fd >= 0 && ws[i].task >= 0) {
                pf[np] = (struct pollfd){.fd = ws[i].res_fd, .events = POLLIN};
                map[np++] = i;
            }
        if (np == 0)
            break;
        if (poll(pf, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int k = 0; k < np; k++) {
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            worker *w = &ws[map[k]];
            if (worker_collect(pl, w) == 0)
                worker_feed(pl, w, &next, pool_stopped(pl) ? 0 : pl->n);
        }
    }
    for (int i = 0; i < nw; i++) {
        if (ws[i].task_fd >= 0)
            close(ws[i].task_fd);
        if (ws[i].res_fd >= 0)
            close(ws[i].res_fd);
        waitpid(ws[i].pid, NULL, 0);
    }
}

static void pool_go(const pool *pl, long jobs)
{
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    if (pl->n > 0 && jobs > 1)
        pool_workers(pl, jobs);
    else if (pl->n > 0)
        pool_inprocess(pl);
    signal(SIGPIPE, old_pipe);
}

void pool_run(const run_cfg *runs, const size_t *sel, size_t n, long jobs, const pool_sink *sink)
{
    pool pl = {.runs = runs, .sel = sel, .n = n, .sink = sink};
    pool_go(&pl, jobs);
}

void pool_run_list(const run_cfg *const *runs, size_t n, long jobs, const pool_sink *sink)
{
    pool pl = {.list = runs, .n = n, .sink = sink};
    pool_go(&pl, jobs);
}
