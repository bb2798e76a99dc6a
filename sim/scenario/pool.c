/* pool.c — a sweep's runs executed in this process or in forked workers (pool.h). */
#include "pool.h"
#include "group.h"
#include "sim/replay/replay.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

/* A group of the selection: runs that read the same trace (run_same_trace), executed
 * together (run_execute_group). */
typedef struct pgroup {
    size_t *pos; /* selection positions, in selection order */
    size_t n;
    double weight; /* for handing out the largest first */
} pgroup;

/* What a group's runs report through, as each finishes. */
typedef struct gctx {
    const size_t *pos;
    run_result *res;
    char started[32];
    double t0;
    void (*emit)(void *ctx, pool_result *j); /* takes j; j->res is freed after it returns */
    void *ctx;
} gctx;

static void group_done(void *ctx, size_t i, int rc, const errbuf *e)
{
    gctx *g = ctx;
    pool_result j;
    memset(&j, 0, sizeof j);
    j.pos = g->pos[i];
    j.rc = rc;
    if (rc != MS_OK)
        j.err = *e;
    memcpy(j.started, g->started, sizeof j.started);
    iso_now(j.finished);
    j.res = g->res[i];
    if (j.res.wall_s <= 0)
        j.res.wall_s = pool_now_s() - g->t0;
    run_result_init(&g->res[i]);
    g->emit(g->ctx, &j);
    run_result_free(&j.res);
}

/* The configs of a group; NULL when out of memory. */
typedef struct pool pool;
static const run_cfg **group_cfgs(const pool *pl, const pgroup *gr);
static uint32_t *pool_board(const pool *pl);

static const run_cfg *pool_cfg(const pool *pl, size_t i);

static double cpu_s(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + 1e-6 * (double)ru->ru_utime.tv_usec +
           (double)ru->ru_stime.tv_sec + 1e-6 * (double)ru->ru_stime.tv_usec;
}

/* MPCSIM_GROUP_TIMES=1: one line per group on stderr, as it ends: its runs, prompt length,
 * CPU seconds of the process that executed it and that process's peak memory so far (a
 * worker's peak is its largest group's, groups being handed out largest first). Benchmarks
 * read it (tests/bench_eviction.c); the results are the same either way. */
static void group_times(const pool *pl, const pgroup *gr, const struct rusage *r0, double t0)
{
    const char *v = getenv("MPCSIM_GROUP_TIMES");
    struct rusage r1;
    if (!v || strcmp(v, "1") || getrusage(RUSAGE_SELF, &r1))
        return;
    fprintf(stderr,
            "mpcsim run: group of %zu run%s at prompt %u: %.2f CPU s, %.1f s wall, peak %.0f "
            "MiB, process %ld\n",
            gr->n, gr->n == 1 ? "" : "s", gr->n ? pool_cfg(pl, gr->pos[0])->work.prompt_len : 0,
            cpu_s(&r1) - cpu_s(r0), pool_now_s() - t0, (double)r1.ru_maxrss / 1024.0,
            (long)getpid());
}

static void group_execute(const pool *pl, const pgroup *gr, void (*emit)(void *ctx, pool_result *j),
                          void *ctx)
{
    struct rusage r0;
    double t0 = pool_now_s();
    if (getrusage(RUSAGE_SELF, &r0))
        memset(&r0, 0, sizeof r0);
    const run_cfg **cf = group_cfgs(pl, gr);
    run_result *res = calloc(gr->n ? gr->n : 1, sizeof *res);
    gctx g = {.pos = gr->pos, .res = res, .t0 = pool_now_s(), .emit = emit, .ctx = ctx};
    iso_now(g.started);
    for (size_t i = 0; res && i < gr->n; i++)
        run_result_init(&res[i]);
    uint32_t *board = pool_board(pl);
    uint32_t **slot = board ? calloc(gr->n ? gr->n : 1, sizeof *slot) : NULL;
    for (size_t i = 0; slot && i < gr->n; i++)
        slot[i] = board + 2 * gr->pos[i];
    run_group_progress(slot);
    if (cf && res) {
        run_execute_group(cf, gr->n, res, group_done, &g);
    } else { /* every run of the group fails */
        for (size_t i = 0; i < gr->n; i++) {
            pool_result j;
            memset(&j, 0, sizeof j);
            run_result_init(&j.res);
            j.pos = gr->pos[i];
            j.rc = err_set(&j.err, MS_ERR_NOMEM, "run: out of memory");
            memcpy(j.started, g.started, sizeof j.started);
            iso_now(j.finished);
            emit(ctx, &j);
        }
    }
    run_group_progress(NULL);
    free(slot);
    free(cf);
    free(res);
    group_times(pl, gr, &r0, t0);
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

uint32_t *pool_board_new(size_t n)
{
    void *b = mmap(NULL, (2 * n + 2) * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return b == MAP_FAILED ? NULL : b;
}

void pool_board_free(uint32_t *board, size_t n)
{
    if (board)
        munmap(board, (2 * n + 2) * sizeof(uint32_t));
}

/* ---- executing: in-process or in forked workers ---------------------------------------- */

/* What the workers and the parent share. */
struct pool {
    const run_cfg *runs;
    const size_t *sel;
    const run_cfg *const *list; /* or the runs themselves (pool_run_list) */
    size_t n;
    const pool_sink *sink;
};

static uint32_t *pool_board(const pool *pl) { return pl->sink->board; }

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

static const run_cfg **group_cfgs(const pool *pl, const pgroup *gr)
{
    const run_cfg **cf = malloc((gr->n ? gr->n : 1) * sizeof *cf);
    for (size_t i = 0; cf && i < gr->n; i++)
        cf[i] = pool_cfg(pl, gr->pos[i]);
    return cf;
}

static void groups_free(pgroup *g, size_t n)
{
    for (size_t i = 0; g && i < n; i++)
        free(g[i].pos);
    free(g);
}

static int by_weight(const void *a, const void *b)
{
    const pgroup *x = a, *y = b;
    return x->weight < y->weight ? 1 : x->weight > y->weight ? -1 : x->pos[0] < y->pos[0] ? -1 : 1;
}

/* The selection's groups, the largest first (the prompt length times the runs: a group's
 * shared rows and each run's own work both grow with the prompt). Runs that read no trace are
 * groups of one. NULL when out of memory. */
static pgroup *make_groups(const pool *pl, size_t *ng)
{
    pgroup *g = calloc(pl->n ? pl->n : 1, sizeof *g);
    size_t n = 0;
    for (size_t i = 0; g && i < pl->n; i++) {
        const run_cfg *c = pool_cfg(pl, i);
        size_t k = 0;
        if (replay_reads_trace(c))
            while (k < n && !(replay_reads_trace(pool_cfg(pl, g[k].pos[0])) &&
                              run_same_trace(pool_cfg(pl, g[k].pos[0]), c)))
                k++;
        else
            k = n;
        if (k == n && !(g[n++].pos = malloc(pl->n * sizeof *g[k].pos))) {
            groups_free(g, n);
            return NULL;
        }
        g[k].pos[g[k].n++] = i;
        g[k].weight += (double)c->work.prompt_len + c->work.decode_len + 1;
    }
    if (g)
        qsort(g, n, sizeof *g, by_weight);
    *ng = n;
    return g;
}

static void emit_done(void *ctx, pool_result *j)
{
    const pool *pl = ctx;
    pl->sink->done(pl->sink->ctx, j);
}

static void pool_inprocess(const pool *pl, const pgroup *g, size_t ng)
{
    for (size_t k = 0; k < ng && !pool_stopped(pl); k++) {
        for (size_t i = 0; i < g[k].n; i++)
            pool_begin(pl, g[k].pos[i]);
        group_execute(pl, &g[k], emit_done, (void *)pl);
    }
}

typedef struct worker {
    pid_t pid;
    int task_fd, res_fd; /* parent's ends */
    long task;           /* group in flight, -1 if idle */
    size_t left;         /* its runs not yet reported */
    unsigned char *got;  /* pl->n flags: reported (of the group in flight) */
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

/* A worker sends each run's result as the run finishes. */
typedef struct wemit {
    int res_fd;
} wemit;

static void worker_emit(void *ctx, pool_result *j)
{
    wemit *w = ctx;
    wbuf b = {0};
    job_serialize(j, &b);
    if (b.oom || write_all(w->res_fd, b.p, b.n))
        _exit(1);
    free(b.p);
}

/* A worker: read a group, execute it, send its results; until EOF. */
static void worker_main(const pool *pl, const pgroup *g, size_t ng, int task_fd, int res_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        _exit(1);
    uint64_t k;
    wemit w = {res_fd};
    while (read_all(task_fd, &k, sizeof k) == 1) {
        if (k >= ng)
            _exit(1);
        group_execute(pl, &g[k], worker_emit, &w);
    }
    _exit(0);
}

static int worker_spawn(const pool *pl, const pgroup *g, size_t ng, worker *ws, int k)
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
        worker_main(pl, g, ng, tp[0], rp[1]);
    }
    close(tp[0]);
    close(rp[1]);
    ws[k] = (worker){.pid = pid,
                     .task_fd = tp[1],
                     .res_fd = rp[0],
                     .task = -1,
                     .got = calloc(pl->n ? pl->n : 1, 1)};
    return 0;
}

/* Gives worker w the next group, or closes its task pipe when none is left. */
static void worker_feed(const pool *pl, const pgroup *g, worker *w, size_t *next, size_t ng)
{
    if (*next < ng) {
        uint64_t k = *next;
        if (write_all(w->task_fd, &k, sizeof k) == 0) {
            w->task = (long)(*next)++;
            w->left = g[k].n;
            for (size_t i = 0; i < g[k].n; i++) {
                w->got[g[k].pos[i]] = 0;
                pool_begin(pl, g[k].pos[i]);
            }
            return;
        }
    }
    if (w->task_fd >= 0)
        close(w->task_fd);
    w->task_fd = -1;
    w->task = -1;
}

/* 1 when selection position pos is a run of w's group not yet reported. */
static int worker_owes(const pgroup *g, const worker *w, size_t pos)
{
    if (w->task < 0)
        return 0;
    const pgroup *gr = &g[w->task];
    for (size_t i = 0; i < gr->n; i++)
        if (gr->pos[i] == pos)
            return !w->got[pos];
    return 0;
}

/* Reads one framed result from a worker: 1 when its group is complete, 0 when more are due;
 * on EOF or garbage the group's unreported runs fail (-1). */
static int worker_collect(const pool *pl, const pgroup *g, worker *w)
{
    uint64_t hdr[2];
    pool_result j;
    memset(&j, 0, sizeof j);
    run_result_init(&j.res);
    int got = read_all(w->res_fd, hdr, sizeof hdr);
    unsigned char *p = NULL;
    if (got == 1 && hdr[0] == WIRE_MAGIC && hdr[1] < ((uint64_t)1 << 34) &&
        (p = malloc(hdr[1] ? hdr[1] : 1)) && read_all(w->res_fd, p, hdr[1]) == 1 &&
        job_deserialize(p, hdr[1], &j) == 0 && worker_owes(g, w, j.pos)) {
        free(p);
        w->got[j.pos] = 1;
        w->left--;
        pool_done(pl, &j);
        return w->left == 0;
    }
    free(p);
    run_result_free(&j.res);
    close(w->res_fd);
    w->res_fd = -1;
    if (w->task_fd >= 0)
        close(w->task_fd);
    w->task_fd = -1;
    if (w->task >= 0) { /* the worker died or spoke garbage: its unreported runs fail */
        const pgroup *gr = &g[w->task];
        for (size_t i = 0; i < gr->n; i++) {
            if (w->got[gr->pos[i]])
                continue;
            pool_result f = {.pos = gr->pos[i], .rc = MS_ERR_INTERNAL};
            run_result_init(&f.res);
            iso_now(f.started);
            iso_now(f.finished);
            err_set(&f.err, MS_ERR_INTERNAL, "worker process %d died during the run", (int)w->pid);
            pool_done(pl, &f);
        }
    }
    return -1;
}

static void pool_workers(const pool *pl, const pgroup *g, size_t ng, long jobs)
{
    worker ws[POOL_MAX_JOBS];
    int nw = 0;
    size_t next = 0;
    if ((size_t)jobs > ng)
        jobs = (long)ng;
    if (jobs > POOL_MAX_JOBS)
        jobs = POOL_MAX_JOBS;
    for (; nw < jobs; nw++)
        if (worker_spawn(pl, g, ng, ws, nw)) {
            fprintf(stderr, "mpcsim run: warning: could not start worker %d: %s\n", nw + 1,
                    strerror(errno));
            break;
        }
    if (nw == 0) {
        pool_inprocess(pl, g, ng);
        return;
    }
    for (int i = 0; i < nw; i++)
        worker_feed(pl, g, &ws[i], &next, pool_stopped(pl) ? 0 : ng);
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
            if (worker_collect(pl, g, w) == 1)
                worker_feed(pl, g, w, &next, pool_stopped(pl) ? 0 : ng);
        }
    }
    for (int i = 0; i < nw; i++) {
        if (ws[i].task_fd >= 0)
            close(ws[i].task_fd);
        if (ws[i].res_fd >= 0)
            close(ws[i].res_fd);
        waitpid(ws[i].pid, NULL, 0);
        free(ws[i].got);
    }
}

static void pool_go(const pool *pl, long jobs)
{
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    size_t ng = 0;
    pgroup *g = pl->n > 0 ? make_groups(pl, &ng) : NULL;
    if (pl->n > 0 && !g) { /* out of memory: every run fails */
        for (size_t i = 0; i < pl->n; i++) {
            pool_result f = {.pos = i, .rc = MS_ERR_NOMEM};
            run_result_init(&f.res);
            iso_now(f.started);
            iso_now(f.finished);
            err_set(&f.err, MS_ERR_NOMEM, "run: out of memory");
            pool_done(pl, &f);
        }
    } else if (ng > 1 && jobs > 1) {
        pool_workers(pl, g, ng, jobs);
    } else if (ng > 0) {
        pool_inprocess(pl, g, ng);
    }
    groups_free(g, ng);
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
