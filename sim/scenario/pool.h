/* pool.h — executing a sweep's runs: in this process, or in N forked worker processes that each
 * take one run at a time from the parent, execute it (run_execute) and send its serialized
 * result back over a pipe. The parent alone consumes the results (the caller stores them: one
 * writer), in the order they finish; a worker that dies fails the run it had. */
#ifndef MPCSIM_POOL_H
#define MPCSIM_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "runner.h"

#define POOL_MAX_JOBS 256

/* One executed run. */
typedef struct pool_result {
    size_t pos; /* the run's position in the caller's selection */
    int rc;
    errbuf err;
    char started[32], finished[32]; /* UTC, ISO 8601 with milliseconds */
    run_result res;
} pool_result;

/* Where the results go, in the parent: done() takes each (r->res is freed after it returns);
 * stop() returning 1 hands out no further run (a database error); begin() (may be NULL) hears
 * of each run as it is handed out, for progress. */
typedef struct pool_sink {
    void (*done)(void *ctx, pool_result *r);
    int (*stop)(void *ctx);
    void *ctx;
    void (*begin)(void *ctx, size_t pos);
    /* Optional (pool_board_new): words 2i and 2i + 1 are run i's positions replayed and
     * positions in all (group.h), written by whichever process executes it. */
    uint32_t *board;
} pool_sink;

/* A board of n runs' positions in memory shared with the workers forked after it; NULL when it
 * cannot be made. pool_board_free releases it. */
uint32_t *pool_board_new(size_t n);
void pool_board_free(uint32_t *board, size_t n);

/* Executes runs[sel[i]] for i < n with `jobs` workers (≤ 1, or none could start: in this
 * process; at most POOL_MAX_JOBS). */
void pool_run(const run_cfg *runs, const size_t *sel, size_t n, long jobs, const pool_sink *sink);
/* The same for runs[i], i < n (the runs of several scenarios). */
void pool_run_list(const run_cfg *const *runs, size_t n, long jobs, const pool_sink *sink);

/* Seconds of the monotonic clock the pool times runs with. */
double pool_now_s(void);

#endif
