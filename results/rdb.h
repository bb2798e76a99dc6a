/* rdb.h — the results database (SQLite). Schema in results/SCHEMA.md, versioned with
 * PRAGMA user_version; WAL; one transaction per run, so a killed sweep keeps every finished
 * run and no half one; runs keyed by the hash of their resolved config (resume, merge).
 *
 * results/ is a leaf: this header knows nothing of run configs or simulator structs; callers
 * fill the plain records below. */
#ifndef MPCSIM_RDB_H
#define MPCSIM_RDB_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"

#define RDB_SCHEMA_VERSION 6
#define RDB_PARTIES 3 /* bytes columns p0, p1, p2 */

typedef struct rdb rdb;

/* Opens (create = 1: creates if missing) and migrates to RDB_SCHEMA_VERSION. A database newer
 * than this build, or not an mpcsim database, is MS_ERR_FORMAT. */
int rdb_open(const char *path, int create, rdb **out, errbuf *e);
/* Opens an existing database read-only for a reader: nothing is written to the file (an older
 * schema is migrated in a copy in memory), it works on a read-only mount, and an empty file,
 * a foreign database or a schema version outside 1..RDB_SCHEMA_VERSION is MS_ERR_FORMAT. */
int rdb_open_ro(const char *path, rdb **out, errbuf *e);
/* Copies database src (read-only) into a new database file dst. */
int rdb_copy(const char *src, const char *dst, errbuf *e);
int rdb_close(rdb *db);
const char *rdb_path(const rdb *db);
void *rdb_handle(rdb *db); /* the sqlite3 * */
/* PRAGMA user_version of a database file, without migrating it (0: empty or new). */
int rdb_file_version(const char *path, int *version, errbuf *e);

/* Figures for one op category, one layer or one phase total. */
typedef struct rdb_stats {
    uint64_t rounds;
    uint64_t bytes[RDB_PARTIES];   /* online bytes sent, by party */
    uint64_t offline[RDB_PARTIES]; /* dealer→party preprocessing bytes */
    uint64_t compute_ns;
    uint64_t comm_ns;
} rdb_stats;

typedef struct rdb_metric {
    const char *name;
    double value;
    const char *unit;
} rdb_metric;

typedef struct rdb_breakdown { /* category "total" holds the phase total */
    const char *phase;
    const char *category;
    rdb_stats s;
} rdb_breakdown;

typedef struct rdb_layer {
    const char *phase;
    int layer;
    rdb_stats s;
} rdb_layer;

typedef struct rdb_phase {
    const char *phase;
    uint64_t latency_ns;
    uint64_t events;
} rdb_phase;

/* One finished run, as stored. */
typedef struct rdb_run {
    const char *scenario;
    uint64_t grid_index;
    const char *config_hash; /* 16 hex digits */
    const char *config_yaml;
    uint64_t seed;
    const char *status;  /* "ok" | "failed" */
    const char *error;   /* failure message, or NULL */
    const char *started; /* ISO-8601 UTC */
    const char *finished;
    double wall_s;
    const char *tool_version;
    const char *model, *protocol, *network, *policy; /* network: its label (lan, 20ms/300Mbps) */
    const char *policy_label;          /* policy(params that differ from the defaults), e.g.
                                        * snapkv(capacity=1024); NULL: the policy's name */
    const char *protocol_label;        /* protocol(options that differ from its defaults), e.g.
                                        * aby3(topk=quickselect); NULL: the protocol's name */
    double latency_ms, bandwidth_mbps; /* slowest party-to-party link's one-way latency and
                                        * smallest bandwidth (the values of a uniform network) */
    const char *machine;               /* machine profile name */
    int threads;
    const char *config_json; /* NULL: derived from config_yaml (rdb_yaml_to_json) */
    const char *policy_cost; /* how far the policy's MPC cost is known to compute its selection
                              * (public, shares, checked, derived, declared); NULL: not known */
    uint32_t prompt_len, decode_len, batch;
    const rdb_metric *metric;
    size_t n_metric;
    const rdb_phase *phase;
    size_t n_phase;
    const rdb_breakdown *breakdown;
    size_t n_breakdown;
    const rdb_layer *layer;
    size_t n_layer;
} rdb_run;

/* Records (or updates) a scenario's name, path and text. */
int rdb_scenario_put(rdb *db, const char *name, const char *path, const char *yaml, errbuf *e);
/* Runs of a scenario already stored (any status). */
int rdb_scenario_runs(rdb *db, const char *name, int64_t *n, errbuf *e);
/* 1 if a run with this config hash is stored with status "ok". */
int rdb_run_done(rdb *db, const char *hash, int *done, errbuf *e);
/* Stores one run and all its rows in one transaction; a failed run with the same hash is
 * replaced. When a run with the same hash is already stored "ok" (another process stored it
 * since rdb_run_done said no), nothing is written and *id is 0. *id receives the new run id
 * (may be NULL). */
int rdb_run_put(rdb *db, const rdb_run *r, int64_t *id, errbuf *e);
/* Runs stored (any status). */
int rdb_count_runs(rdb *db, int64_t *n, errbuf *e);

/* One `mpcsim validate` row: predicted (cost engine + simulator) against measured (backend)
 * figures of one op program or primitive. exact is derived: rounds, bytes and offline equal. */
typedef struct rdb_validation {
    const char *session; /* one invocation, e.g. "20261129T141500-1234" */
    const char *tool_version;
    const char *protocol;
    const char *item;     /* "primitive:mul", "stories260K:prefill", … */
    const char *phase;    /* "prefill" | "decode" | "-" */
    int64_t n;            /* elements (primitive) or new tokens (program) */
    int64_t kv_len;       /* cached entries before the step (programs) */
    uint64_t latency_ns;  /* one-way latency injected and simulated */
    double bandwidth_bps; /* link bandwidth simulated (and shaped when shaping = "tbf") */
    const char *shaping;  /* "none" | "tbf" */
    rdb_stats pred, meas; /* rounds and bytes (compute/comm unused) */
    uint64_t pred_offline, meas_offline;
    uint64_t pred_ns, meas_ns;
} rdb_validation;

int rdb_validation_put(rdb *db, const rdb_validation *v, errbuf *e);

/* Folds the runs of the databases srcs[0..n) into db, all in one transaction, skipping config
 * hashes already present (an ok run replaces a failed one, never the reverse). A source of an
 * older schema version is migrated in memory first (rdb_open_ro); one of a newer version is
 * MS_ERR_FORMAT and nothing is written. */
int rdb_merge(rdb *db, const char *const *srcs, size_t n, size_t *added, size_t *skipped,
              errbuf *e);
/* Whether a database can be merged into this version's: exists, schema version 1 to ours. */
int rdb_merge_check(const char *src, errbuf *e);

/* The labels of a run that a database of schema version 2 lacks, derived from its stored
 * config_yaml when the database is migrated (results/ knows no run config: the command line
 * registers the function that re-reads the configuration). 0 on success. */
typedef struct rdb_labels {
    char model[192], network[64], policy_label[256], machine[64];
    char protocol_label[256]; /* schema 4 */
    double latency_ms, bandwidth_mbps;
    int threads;
} rdb_labels;
typedef int (*rdb_labeler)(const char *config_yaml, rdb_labels *out);
/* Registers the labeler migrations use (process-wide; NULL: labels from the stored columns and
 * the configuration's JSON only: policy_label = policy, the network's first link). */
void rdb_set_labeler(rdb_labeler fn);

/* A YAML document as JSON text (malloc'd): mappings → objects in document order, sequences →
 * arrays, unquoted true/false → booleans, null/~ → null, numbers → numbers, anything else (and
 * every quoted scalar) → strings. NULL if the text does not parse or on out of memory. */
char *rdb_yaml_to_json(const char *yaml);

/* A stored metric's meaning, from the metric registry (protocols/base/metric_def.h): accuracy
 * metrics are what reports and the Pareto plot show; lower_is_better follows the registered
 * direction. An unregistered name (a database from an older version) is neither. */
int rdb_metric_is_accuracy(const char *name);
int rdb_metric_lower_is_better(const char *name);
/* MS_OK when every metric is registered with the unit it carries; otherwise an error naming
 * the first that is not. rdb_run_put and sdb_put_run check before writing anything. */
int rdb_metrics_check(const rdb_metric *m, size_t n, errbuf *e);

#endif
