/* serve_db.h — serving results in the results database (tables serve_runs, serve_metrics,
 * serve_requests, serve_leak; documented in scenarios/SERVING.md). The database is opened with
 * rdb_open, so it is the same file `mpcsim run` writes; these tables sit beside its own and
 * are created when first needed. One transaction per serving run. Plain records only:
 * results/ knows no simulator struct. */
#ifndef MPCSIM_SERVE_DB_H
#define MPCSIM_SERVE_DB_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"
#include "rdb.h"

/* A serving run's metric: the same record as a sweep run's (name, value, unit). */
typedef rdb_metric sdb_metric;

typedef struct sdb_request {
    uint64_t arrival_ns, admit_ns, first_ns, finish_ns;
    uint32_t tenant, user, prompt, hit, shifted, decode;
} sdb_request;

typedef struct sdb_run {
    const char *scenario, *policy, *model, *protocol, *network, *scheduler;
    double rate; /* requests/s (0 for a replayed workload) */
    uint64_t seed;
    uint32_t n_requests, batch, chunk;
    const char *config; /* the run's resolved settings as YAML */
    const sdb_metric *metric;
    size_t n_metric;
    const sdb_request *req; /* may be NULL */
    size_t n_req;
} sdb_run;

typedef struct sdb_leak {
    const char *scenario, *policy, *channel, *scheduler;
    uint32_t trials, correct, candidates;
    double success_rate, chance, p_value, bits, ttft_gap_ms;
} sdb_leak;

/* Creates the serve tables if missing. */
int sdb_init(rdb *db, errbuf *e);
int sdb_put_run(rdb *db, const sdb_run *r, int64_t *id, errbuf *e);
int sdb_put_leak(rdb *db, const sdb_leak *l, errbuf *e);

#endif
