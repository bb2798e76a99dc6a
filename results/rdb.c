/* rdb.c — the results database: open + migrate, prepared statements, one transaction per run,
 * merge of shard databases. Schema and example queries: results/SCHEMA.md. */
#include "rdb.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/base/metric_def.h"
#include "protocols/base/yamlx.h"
#include "rdb_bind.h"
#include "rdb_int.h"

/* ---- schema: one migration per version, each in its own transaction -------------------- */

/* The common metrics as columns, one row per run. */
#define WIDE_METRIC(name) ", max(CASE m.name WHEN '" name "' THEN m.value END) AS " name
#define RUNS_WIDE_VIEW(protocol_label)                                                             \
    "CREATE VIEW runs_wide AS SELECT r.id, r.scenario, r.grid_index, r.config_hash, "              \
    "r.status, r.model, r.protocol, " protocol_label "r.network, r.latency_ms, "                   \
    "r.bandwidth_mbps, r.machine, "                                                                \
    "r.threads, r.policy, r.policy_label, r.prompt_len, r.decode_len, r.batch, "                   \
    "r.seed" WIDE_METRIC("latency_prefill_s") WIDE_METRIC("latency_decode_s")                      \
        WIDE_METRIC("latency_total_s") WIDE_METRIC("latency_per_token_s") WIDE_METRIC("ttft_s")    \
            WIDE_METRIC("bytes_online") WIDE_METRIC("bytes_offline") WIDE_METRIC("rounds_prefill") \
                WIDE_METRIC("rounds_decode") WIDE_METRIC("compute_s") WIDE_METRIC("comm_s")        \
                    WIDE_METRIC("attn_mass_recall") WIDE_METRIC("topk_recall")                     \
                        WIDE_METRIC("kept_frac") WIDE_METRIC("attn_out_rel_err")                   \
                            WIDE_METRIC("logit_kl") WIDE_METRIC("top1_agreement")                  \
                                WIDE_METRIC("ppl_delta") " FROM runs r LEFT JOIN metrics m ON "    \
                                                         "m.run_id = r.id GROUP BY r.id;"

typedef struct migration {
    const char *sql;
    int (*fill)(rdb *db, errbuf *e); /* after sql, in the same transaction (may be NULL) */
} migration;

static const migration migrations[] = {
    /* 0 → 1 */ {
        "CREATE TABLE scenarios ("
        "  name TEXT PRIMARY KEY,"
        "  path TEXT NOT NULL,"
        "  yaml TEXT NOT NULL);"
        "CREATE TABLE runs ("
        "  id INTEGER PRIMARY KEY,"
        "  scenario TEXT NOT NULL,"
        "  grid_index INTEGER NOT NULL,"
        "  config_hash TEXT NOT NULL UNIQUE,"
        "  config_yaml TEXT NOT NULL,"
        "  seed INTEGER NOT NULL,"
        "  status TEXT NOT NULL CHECK (status IN ('ok','failed')),"
        "  error TEXT,"
        "  started TEXT NOT NULL,"
        "  finished TEXT NOT NULL,"
        "  wall_s REAL NOT NULL,"
        "  tool_version TEXT NOT NULL,"
        "  model TEXT NOT NULL,"
        "  protocol TEXT NOT NULL,"
        "  network TEXT NOT NULL,"
        "  policy TEXT NOT NULL,"
        "  prompt_len INTEGER NOT NULL,"
        "  decode_len INTEGER NOT NULL,"
        "  batch INTEGER NOT NULL);"
        "CREATE INDEX runs_scenario ON runs(scenario);"
        "CREATE INDEX runs_query ON runs(model, protocol, network, policy);"
        "CREATE TABLE metrics ("
        "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        "  name TEXT NOT NULL,"
        "  value REAL NOT NULL,"
        "  unit TEXT NOT NULL,"
        "  PRIMARY KEY (run_id, name));"
        "CREATE TABLE phases ("
        "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        "  phase TEXT NOT NULL,"
        "  latency_ns INTEGER NOT NULL,"
        "  events INTEGER NOT NULL,"
        "  PRIMARY KEY (run_id, phase));"
        "CREATE TABLE breakdown ("
        "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        "  phase TEXT NOT NULL,"
        "  category TEXT NOT NULL,"
        "  rounds INTEGER NOT NULL,"
        "  bytes_p0 INTEGER NOT NULL, bytes_p1 INTEGER NOT NULL, bytes_p2 INTEGER NOT NULL,"
        "  offline_p0 INTEGER NOT NULL, offline_p1 INTEGER NOT NULL, offline_p2 INTEGER NOT NULL,"
        "  compute_ns INTEGER NOT NULL,"
        "  comm_ns INTEGER NOT NULL,"
        "  PRIMARY KEY (run_id, phase, category));"
        "CREATE TABLE layer_breakdown ("
        "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
        "  phase TEXT NOT NULL,"
        "  layer INTEGER NOT NULL,"
        "  rounds INTEGER NOT NULL,"
        "  bytes_p0 INTEGER NOT NULL, bytes_p1 INTEGER NOT NULL, bytes_p2 INTEGER NOT NULL,"
        "  offline_p0 INTEGER NOT NULL, offline_p1 INTEGER NOT NULL, offline_p2 INTEGER NOT NULL,"
        "  compute_ns INTEGER NOT NULL,"
        "  comm_ns INTEGER NOT NULL,"
        "  PRIMARY KEY (run_id, phase, layer));",
        NULL},
    /* 1 → 2: `mpcsim validate` — the simulator's prediction against the real backend's
     * measurement of the same op program (one row per program or primitive and protocol) */
    {"CREATE TABLE validation ("
     "  id INTEGER PRIMARY KEY,"
     "  session TEXT NOT NULL,"
     "  created TEXT NOT NULL,"
     "  tool_version TEXT NOT NULL,"
     "  protocol TEXT NOT NULL,"
     "  item TEXT NOT NULL,"
     "  phase TEXT NOT NULL,"
     "  n INTEGER NOT NULL,"
     "  kv_len INTEGER NOT NULL,"
     "  latency_ns INTEGER NOT NULL,"
     "  bandwidth_bps REAL NOT NULL,"
     "  shaping TEXT NOT NULL,"
     "  pred_rounds INTEGER NOT NULL, meas_rounds INTEGER NOT NULL,"
     "  pred_bytes_p0 INTEGER NOT NULL, meas_bytes_p0 INTEGER NOT NULL,"
     "  pred_bytes_p1 INTEGER NOT NULL, meas_bytes_p1 INTEGER NOT NULL,"
     "  pred_bytes_p2 INTEGER NOT NULL, meas_bytes_p2 INTEGER NOT NULL,"
     "  pred_offline INTEGER NOT NULL, meas_offline INTEGER NOT NULL,"
     "  pred_ns INTEGER NOT NULL, meas_ns INTEGER NOT NULL,"
     "  exact INTEGER NOT NULL CHECK (exact IN (0, 1)));"
     "CREATE INDEX validation_item ON validation(protocol, item);",
     NULL},
    /* 2 → 3: configurations told apart and queryable — the policy's label with the parameters
     * that differ from its defaults, the network's label, latency and bandwidth, the machine
     * profile and threads as columns; the resolved config as JSON; the runs_wide view. The
     * new columns of stored runs are derived from their config_yaml (migrate_labels). */
    {"ALTER TABLE runs ADD COLUMN policy_label TEXT NOT NULL DEFAULT '';"
     "ALTER TABLE runs ADD COLUMN latency_ms REAL;"
     "ALTER TABLE runs ADD COLUMN bandwidth_mbps REAL;"
     "ALTER TABLE runs ADD COLUMN machine TEXT;"
     "ALTER TABLE runs ADD COLUMN threads INTEGER;"
     "ALTER TABLE runs ADD COLUMN config_json TEXT;"
     "CREATE INDEX runs_label ON runs(policy_label);" RUNS_WIDE_VIEW(""),
     rdb_migrate_labels},
    /* 3 → 4: the protocol's label with the options that differ from its defaults
     * (aby3(topk=quickselect)), so runs that differ in a protocol option are told apart like
     * policy configurations; filled from the stored configs (migrate_protocol_labels), which
     * also label again a shipped model with keys replaced (stories260K(layers=2)) and a
     * network's framing (lan tcp) */
    {"ALTER TABLE runs ADD COLUMN protocol_label TEXT NOT NULL DEFAULT '';"
     "CREATE INDEX runs_protocol_label ON runs(protocol_label);"
     "DROP VIEW runs_wide;" RUNS_WIDE_VIEW("r.protocol_label, "),
     rdb_migrate_protocol_labels},
    /* 4 → 5: labels spell out a policy's budget at its defaults and a network's rate as
     * "300 Mbit/s": every stored run labelled again from its config (migrate_relabel), so that
     * a database of older labels merged with a newer one gives one label per configuration */
    {"", rdb_migrate_relabel},
    /* 5 → 6: how far the MPC cost of the run's policy is known to compute its selection, as
     * the writer saw it (a composition or a plug-in is loaded where the run ran, not where a
     * report reads it); '' for the runs stored before: a reader judges them by name */
    {"", rdb_migrate_policy_cost},
};
#define N_MIGRATIONS (sizeof migrations / sizeof migrations[0])
_Static_assert(N_MIGRATIONS == RDB_SCHEMA_VERSION, "one migration per schema version");

/* ---- prepared statements, indexed by an enum ------------------------------------------- */

#define STATS_COLS                                                               \
    "rounds, bytes_p0, bytes_p1, bytes_p2, offline_p0, offline_p1, offline_p2, " \
    "compute_ns, comm_ns"
#define STMTS(X)                                                                                 \
    X(BEGIN, "BEGIN IMMEDIATE")                                                                  \
    X(COMMIT, "COMMIT")                                                                          \
    X(ROLLBACK, "ROLLBACK")                                                                      \
    X(SCN_PUT, "INSERT INTO scenarios(name, path, yaml) VALUES (?1, ?2, ?3) "                    \
               "ON CONFLICT(name) DO UPDATE SET path = excluded.path, yaml = excluded.yaml")     \
    X(SCN_RUNS, "SELECT count(*) FROM runs WHERE scenario = ?1")                                 \
    X(RUN_DONE, "SELECT count(*) FROM runs WHERE config_hash = ?1 AND status = 'ok'")            \
    X(RUN_DEL_FAILED, "DELETE FROM runs WHERE config_hash = ?1 AND status = 'failed'")           \
    X(RUN_PUT, "INSERT INTO runs(scenario, grid_index, config_hash, config_yaml, seed, status, " \
               "error, started, finished, wall_s, tool_version, model, protocol, network, "      \
               "policy, prompt_len, decode_len, batch, policy_label, latency_ms, "               \
               "bandwidth_mbps, machine, threads, config_json, protocol_label, policy_cost) "    \
               "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20," \
               "?21,?22,?23,?24,?25,?26)")                                                       \
    X(METRIC_PUT, "INSERT INTO metrics(run_id, name, value, unit) VALUES (?1, ?2, ?3, ?4)")      \
    X(PHASE_PUT, "INSERT INTO phases(run_id, phase, latency_ns, events) VALUES (?1,?2,?3,?4)")   \
    X(BD_PUT, "INSERT INTO breakdown(run_id, phase, category, " STATS_COLS ") VALUES "           \
              "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)")                                        \
    X(LAYER_PUT, "INSERT INTO layer_breakdown(run_id, phase, layer, " STATS_COLS ") VALUES "     \
                 "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)")                                     \
    X(COUNT_RUNS, "SELECT count(*) FROM runs")

enum {
#define X(name, sql) Q_##name,
    STMTS(X)
#undef X
        Q_N
};
static const char *const stmt_sql[] = {
#define X(name, sql) sql,
    STMTS(X)
#undef X
};
_Static_assert(Q_N <= 32, "statement table size");

static sqlite3_stmt *stmt(rdb *db, int q)
{
    sqlite3_stmt *s = db->st[q];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* Steps a statement that returns no row (or whose row is ignored). */
static int step_done(rdb *db, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return (rc == SQLITE_DONE || rc == SQLITE_ROW) ? 0 : -1;
}

static int exec_q(rdb *db, int q, errbuf *e)
{
    if (step_done(db, stmt(db, q)))
        return DB_ERR(db, e, stmt_sql[q]);
    return MS_OK;
}

/* ---- open, migrate, close -------------------------------------------------------------- */

static int get_version(rdb *db, int *v, errbuf *e)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db->h, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK)
        return DB_ERR(db, e, "reading the schema version");
    int rc = sqlite3_step(s);
    *v = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return DB_ERR(db, e, "reading the schema version");
    return MS_OK;
}

/* An existing database with user_version 0 but tables of its own is not ours. */
static int is_foreign(rdb *db)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db->h, "SELECT count(*) FROM sqlite_master", -1, &s, NULL))
        return 1;
    int n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : 1;
    sqlite3_finalize(s);
    return n > 0;
}

/* Brings the schema to RDB_SCHEMA_VERSION, one migration per transaction. The version is read
 * again inside each write transaction, so two processes opening a new database at once
 * migrate it once. */
static int migrate(rdb *db, errbuf *e)
{
    for (;;) {
        int v, rc;
        if (sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
            return DB_ERR(db, e, "starting a migration");
        if ((rc = get_version(db, &v, e)) == MS_OK) {
            if (v < 0)
                rc = err_set(e, MS_ERR_FORMAT,
                             "%s: results schema version %d is not one mpcsim writes (0 to %d)\n"
                             "---> HINT: the file is damaged or not an mpcsim results database",
                             db->path, v, RDB_SCHEMA_VERSION);
            else if (v > RDB_SCHEMA_VERSION)
                rc = err_set(e, MS_ERR_FORMAT,
                             "%s: results schema version %d is newer than this mpcsim's (%d)\n"
                             "---> HINT: use a newer mpcsim, or write to another database "
                             "with -o",
                             db->path, v, RDB_SCHEMA_VERSION);
            else if (v == 0 && is_foreign(db))
                rc = err_set(e, MS_ERR_FORMAT,
                             "%s: not an mpcsim results database (tables without a schema "
                             "version)\n---> HINT: choose another output path with -o",
                             db->path);
        }
        if (rc == MS_OK && v < RDB_SCHEMA_VERSION) {
            char pragma[64];
            snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d;", v + 1);
            if (sqlite3_exec(db->h, migrations[v].sql, NULL, NULL, NULL) != SQLITE_OK ||
                sqlite3_exec(db->h, pragma, NULL, NULL, NULL) != SQLITE_OK)
                rc = DB_ERR(db, e, "migrating the schema");
            else if (migrations[v].fill)
                rc = migrations[v].fill(db, e);
        }
        if (rc) {
            sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
            return rc;
        }
        if (sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
            return DB_ERR(db, e, "committing a migration");
        if (v >= RDB_SCHEMA_VERSION)
            return MS_OK;
    }
}

/* runs_wide as this mpcsim's metric registry has it: the identity columns of RUNS_WIDE_VIEW,
 * then a column per registered metric of a run (cost, accuracy, policy; not the per-party
 * bytes nor the serving metrics, which have tables of their own). sqlite3_free it. */
static char *wide_view_sql(void)
{
    size_t n;
    const metric_def *d = metric_defs(&n);
    char *sql =
        sqlite3_mprintf("%s", "CREATE VIEW runs_wide AS SELECT r.id, r.scenario, "
                              "r.grid_index, r.config_hash, r.status, r.model, "
                              "r.protocol, r.protocol_label, r.network, r.latency_ms, "
                              "r.bandwidth_mbps, r.machine, r.threads, r.policy, "
                              "r.policy_label, r.prompt_len, r.decode_len, r.batch, r.seed");
    for (size_t i = 0; sql && i < n; i++) {
        if (d[i].per_party || d[i].kind == MK_SERVING)
            continue;
        char *more = sqlite3_mprintf("%s, max(CASE m.name WHEN %Q THEN m.value END) AS \"%w\"", sql,
                                     d[i].name, d[i].name);
        sqlite3_free(sql);
        sql = more;
    }
    char *all = sql ? sqlite3_mprintf("%s FROM runs r LEFT JOIN metrics m ON m.run_id = r.id "
                                      "GROUP BY r.id",
                                      sql)
                    : NULL;
    sqlite3_free(sql);
    return all;
}

/* A writer brings runs_wide up to the registry (a metric added since the database was
 * written gets its column), in one transaction; nothing when it is already so. */
static int wide_view_sync(rdb *db, errbuf *e)
{
    char *want = wide_view_sql();
    if (!want)
        return err_set(e, MS_ERR_NOMEM, "%s: out of memory", db->path);
    sqlite3_stmt *s = NULL;
    int rc = MS_OK, same = 0;
    if (sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        rc = DB_ERR(db, e, "starting to update runs_wide");
    else if (sqlite3_prepare_v2(db->h,
                                "SELECT sql FROM sqlite_master WHERE type = 'view' AND "
                                "name = 'runs_wide'",
                                -1, &s, NULL) != SQLITE_OK)
        rc = DB_ERR(db, e, "reading runs_wide");
    else {
        same = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) &&
               !strcmp((const char *)sqlite3_column_text(s, 0), want);
        sqlite3_finalize(s);
        if (!same &&
            (sqlite3_exec(db->h, "DROP VIEW IF EXISTS runs_wide", NULL, NULL, NULL) != SQLITE_OK ||
             sqlite3_exec(db->h, want, NULL, NULL, NULL) != SQLITE_OK))
            rc = DB_ERR(db, e, "updating runs_wide");
    }
    sqlite3_free(want);
    if (sqlite3_exec(db->h, rc ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL) != SQLITE_OK && !rc)
        rc = DB_ERR(db, e, "updating runs_wide");
    return rc;
}

/* Opens a database file for reading only, never creating it: PRAGMA query_only refuses every
 * change, so a foreign or empty file is left as it is. The file is opened for writing where it
 * can be, only so that SQLite, as the last connection of a WAL database, folds the log back and
 * removes its -wal and -shm files at close (a connection without write access leaves them
 * behind). A WAL database in a folder this process cannot write (a read-only mount) cannot get
 * its -shm file: it is then read as immutable, which is what such a folder guarantees. */
static int open_ro(const char *path, sqlite3 **h, errbuf *e)
{
    for (int immutable = 0; immutable < 2; immutable++) {
        char uri[3200] = "file:";
        size_t k = strlen(uri);
        for (const unsigned char *c = (const unsigned char *)path; *c && k + 4 < 3000; c++)
            k += (size_t)(*c == '%' || *c == '?' || *c == '#'
                              ? snprintf(uri + k, sizeof uri - k, "%%%02X", *c)
                              : snprintf(uri + k, sizeof uri - k, "%c", *c));
        if (immutable)
            snprintf(uri + k, sizeof uri - k, "?mode=ro&immutable=1");
        *h = NULL;
        int rc = sqlite3_open_v2(
            uri, h, (immutable ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_URI,
            NULL);
        if (rc == SQLITE_OK) {
            sqlite3_busy_timeout(*h, 10000);
            sqlite3_extended_result_codes(*h, 1);
            rc = sqlite3_exec(*h, "PRAGMA query_only = ON; SELECT count(*) FROM sqlite_master",
                              NULL, NULL, NULL);
            if (rc == SQLITE_OK)
                return MS_OK;
            if (!immutable && ((rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY)) {
                sqlite3_close(*h);
                continue;
            }
        }
        int code = !*h                              ? MS_ERR_NOMEM
                   : (rc & 0xff) == SQLITE_NOTADB   ? MS_ERR_FORMAT
                   : (rc & 0xff) == SQLITE_CANTOPEN ? MS_ERR_NOTFOUND
                                                    : MS_ERR_DB;
        err_set(e, code, "%s: cannot open: %s", path,
                code == MS_ERR_FORMAT ? "not an SQLite database"
                : *h                  ? sqlite3_errmsg(*h)
                                      : "out of memory");
        sqlite3_close(*h);
        *h = NULL;
        return code;
    }
    return err_set(e, MS_ERR_DB, "%s: cannot open", path);
}

static int prepare_all(rdb *db, errbuf *e)
{
    for (int q = 0; q < Q_N; q++)
        if (sqlite3_prepare_v3(db->h, stmt_sql[q], -1, SQLITE_PREPARE_PERSISTENT, &db->st[q],
                               NULL) != SQLITE_OK)
            return DB_ERR(db, e, stmt_sql[q]);
    return MS_OK;
}

int rdb_open_ro(const char *path, rdb **out, errbuf *e)
{
    *out = NULL;
    rdb *db = calloc(1, sizeof *db);
    if (!db)
        return err_set(e, MS_ERR_NOMEM, "out of memory opening %s", path);
    snprintf(db->path, sizeof db->path, "%s", path);
    int v = 0, rc = open_ro(path, &db->h, e);
    if (!rc)
        rc = get_version(db, &v, e);
    if (!rc && v == 0)
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: not an mpcsim results database (%s)\n"
                     "---> HINT: name a database that `mpcsim run` wrote",
                     path, is_foreign(db) ? "tables without a schema version" : "empty");
    else if (!rc && (v < 0 || v > RDB_SCHEMA_VERSION))
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: results schema version %d is not one this mpcsim reads (1 to %d)\n"
                     "---> HINT: %s",
                     path, v, RDB_SCHEMA_VERSION,
                     v > 0 ? "use a newer mpcsim" : "the file is damaged");
    if (!rc && v < RDB_SCHEMA_VERSION) { /* an older schema: migrate a copy in memory */
        sqlite3 *mem = NULL;
        sqlite3_backup *bk = NULL;
        if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
            !(bk = sqlite3_backup_init(mem, "main", db->h, "main")) ||
            sqlite3_backup_step(bk, -1) != SQLITE_DONE)
            rc = DB_ERR(db, e, "reading an older schema into memory");
        sqlite3_backup_finish(bk);
        sqlite3_close(db->h);
        db->h = mem;
        if (!rc)
            rc = migrate(db, e);
    }
    if (!rc && sqlite3_exec(db->h, "PRAGMA foreign_keys = ON; PRAGMA query_only = ON;", NULL, NULL,
                            NULL) != SQLITE_OK)
        rc = DB_ERR(db, e, "opening read-only");
    if (!rc)
        rc = prepare_all(db, e);
    if (rc) {
        rdb_close(db);
        return rc;
    }
    *out = db;
    return MS_OK;
}

int rdb_copy(const char *src, const char *dst, errbuf *e)
{
    sqlite3 *from = NULL, *to = NULL;
    int rc = open_ro(src, &from, e);
    if (rc)
        return rc;
    sqlite3_backup *bk = NULL;
    if (sqlite3_open_v2(dst, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK ||
        !(bk = sqlite3_backup_init(to, "main", from, "main")) ||
        sqlite3_backup_step(bk, -1) != SQLITE_DONE)
        rc = err_set(e, MS_ERR_DB, "copying %s to %s: %s", src, dst,
                     to ? sqlite3_errmsg(to) : "out of memory");
    if (sqlite3_backup_finish(bk) != SQLITE_OK && !rc)
        rc = err_set(e, MS_ERR_DB, "copying %s to %s: %s", src, dst, sqlite3_errmsg(to));
    if (sqlite3_close(to) != SQLITE_OK && !rc)
        rc = err_set(e, MS_ERR_DB, "%s: cannot close", dst);
    sqlite3_close(from);
    return rc;
}

int rdb_open(const char *path, int create, rdb **out, errbuf *e)
{
    *out = NULL;
    rdb *db = calloc(1, sizeof *db);
    if (!db)
        return err_set(e, MS_ERR_NOMEM, "out of memory opening %s", path);
    snprintf(db->path, sizeof db->path, "%s", path);
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    int rc;
    if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
        rc = err_set(e, create ? MS_ERR_DB : MS_ERR_NOTFOUND, "%s: cannot open: %s", path,
                     db->h ? sqlite3_errmsg(db->h) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(db->h, 10000);
    sqlite3_extended_result_codes(db->h, 1);
    /* Switching a new database to WAL takes an exclusive lock, and SQLite does not call the
     * busy handler for it: two processes creating one database at once (shards) retry. */
    int jrc = SQLITE_BUSY;
    for (int tries = 0; tries < 400 && (jrc & 0xff) == SQLITE_BUSY; tries++) {
        jrc = sqlite3_exec(db->h, "PRAGMA journal_mode = WAL;", NULL, NULL, NULL);
        if ((jrc & 0xff) == SQLITE_BUSY)
            sqlite3_sleep(25);
    }
    if (jrc != SQLITE_OK ||
        sqlite3_exec(db->h, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;", NULL, NULL,
                     NULL) != SQLITE_OK) {
        rc = DB_ERR(db, e, "setting WAL mode");
        if (sqlite3_errcode(db->h) == SQLITE_NOTADB)
            rc = MS_ERR_FORMAT;
        goto fail;
    }
    if ((rc = migrate(db, e)) || (rc = wide_view_sync(db, e)) || (rc = prepare_all(db, e)))
        goto fail;
    *out = db;
    return MS_OK;
fail:
    rdb_close(db);
    return rc;
}

int rdb_close(rdb *db)
{
    if (!db)
        return MS_OK;
    for (int q = 0; q < Q_N; q++)
        sqlite3_finalize(db->st[q]);
    int rc = sqlite3_close(db->h) == SQLITE_OK ? MS_OK : MS_ERR_DB;
    free(db);
    return rc;
}

const char *rdb_path(const rdb *db) { return db->path; }
void *rdb_handle(rdb *db) { return db->h; }

int rdb_file_version(const char *path, int *version, errbuf *e)
{
    sqlite3 *h = NULL;
    int orc = open_ro(path, &h, e);
    if (orc)
        return orc;
    rdb tmp = {.h = h};
    snprintf(tmp.path, sizeof tmp.path, "%s", path);
    int rc = get_version(&tmp, version, e);
    if (rc && sqlite3_errcode(h) == SQLITE_NOTADB)
        rc = err_set(e, MS_ERR_FORMAT, "%s: not an SQLite database", path);
    sqlite3_close(h);
    return rc;
}

/* ---- queries --------------------------------------------------------------------------- */

static int count_q(rdb *db, int q, const char *arg, int64_t *n, errbuf *e)
{
    sqlite3_stmt *s = stmt(db, q);
    if (arg)
        sqlite3_bind_text(s, 1, arg, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(s);
        return DB_ERR(db, e, stmt_sql[q]);
    }
    *n = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return MS_OK;
}

int rdb_scenario_runs(rdb *db, const char *name, int64_t *n, errbuf *e)
{
    return count_q(db, Q_SCN_RUNS, name, n, e);
}

int rdb_count_runs(rdb *db, int64_t *n, errbuf *e) { return count_q(db, Q_COUNT_RUNS, NULL, n, e); }

int rdb_run_done(rdb *db, const char *hash, int *done, errbuf *e)
{
    int64_t n = 0;
    int rc = count_q(db, Q_RUN_DONE, hash, &n, e);
    *done = n > 0;
    return rc;
}

int rdb_scenario_put(rdb *db, const char *name, const char *path, const char *yaml, errbuf *e)
{
    sqlite3_stmt *s = stmt(db, Q_SCN_PUT);
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, path ? path : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, yaml ? yaml : "", -1, SQLITE_STATIC);
    if (step_done(db, s))
        return DB_ERR(db, e, "storing the scenario");
    return MS_OK;
}

/* ---- one run, one transaction ---------------------------------------------------------- */

/* Binds v to the cached statement q and steps it: 0, or -1. */
static int put_row(rdb *db, int q, const rdb_val *v, size_t n)
{
    return rdb_step_row(stmt(db, q), v, n);
}

/* The text, or another when it is NULL or empty. */
static const char *or_else(const char *s, const char *other) { return s && s[0] ? s : other; }

static int put_run_row(rdb *db, const rdb_run *r, int64_t *id, errbuf *e)
{
    char *json = r->config_json ? NULL : rdb_yaml_to_json(r->config_yaml);
    int links = r->latency_ms > 0 || r->bandwidth_mbps > 0;
    const rdb_val v[] = {/* Q_RUN_PUT's columns, in order */
                         RV_TEXT(r->scenario),
                         RV_INT(r->grid_index),
                         RV_TEXT(r->config_hash),
                         RV_TEXT(r->config_yaml),
                         RV_INT(r->seed),
                         RV_TEXT(r->status),
                         RV_TEXT(r->error),
                         RV_TEXT(r->started),
                         RV_TEXT(r->finished),
                         RV_REAL(r->wall_s),
                         RV_TEXT(r->tool_version),
                         RV_TEXT(r->model),
                         RV_TEXT(r->protocol),
                         RV_TEXT(r->network),
                         RV_TEXT(r->policy),
                         RV_INT(r->prompt_len),
                         RV_INT(r->decode_len),
                         RV_INT(r->batch),
                         RV_TEXT(or_else(r->policy_label, r->policy)),
                         links ? RV_REAL(r->latency_ms) : RV_NULL,
                         links ? RV_REAL(r->bandwidth_mbps) : RV_NULL,
                         RV_TEXT(r->machine),
                         r->threads > 0 ? RV_INT(r->threads) : RV_NULL,
                         RV_TEXT(r->config_json ? r->config_json : json),
                         RV_TEXT(or_else(r->protocol_label, r->protocol)),
                         RV_TEXT(r->policy_cost ? r->policy_cost : "")};
    int bad = put_row(db, Q_RUN_PUT, v, RV_N(v));
    free(json);
    if (bad)
        return DB_ERR(db, e, "storing a run");
    *id = sqlite3_last_insert_rowid(db->h);
    return MS_OK;
}

/* ---- a run's child rows: each kind's columns after run_id, from its i-th record ---------- */

/* The stats columns (STATS_COLS) into v; how many. */
static size_t stats_vals(const rdb_stats *st, rdb_val *v)
{
    size_t k = 0;
    v[k++] = RV_INT(st->rounds);
    for (int p = 0; p < RDB_PARTIES; p++)
        v[k++] = RV_INT(st->bytes[p]);
    for (int p = 0; p < RDB_PARTIES; p++)
        v[k++] = RV_INT(st->offline[p]);
    v[k++] = RV_INT(st->compute_ns);
    v[k++] = RV_INT(st->comm_ns);
    return k;
}

static size_t metric_vals(const rdb_run *r, size_t i, rdb_val *v)
{
    const rdb_metric *m = &r->metric[i];
    v[0] = RV_TEXT(m->name);
    v[1] = RV_REAL(m->value);
    v[2] = RV_TEXT(m->unit ? m->unit : "");
    return 3;
}

static size_t phase_vals(const rdb_run *r, size_t i, rdb_val *v)
{
    const rdb_phase *p = &r->phase[i];
    v[0] = RV_TEXT(p->phase);
    v[1] = RV_INT(p->latency_ns);
    v[2] = RV_INT(p->events);
    return 3;
}

static size_t breakdown_vals(const rdb_run *r, size_t i, rdb_val *v)
{
    const rdb_breakdown *b = &r->breakdown[i];
    v[0] = RV_TEXT(b->phase);
    v[1] = RV_TEXT(b->category);
    return 2 + stats_vals(&b->s, v + 2);
}

static size_t layer_vals(const rdb_run *r, size_t i, rdb_val *v)
{
    const rdb_layer *l = &r->layer[i];
    v[0] = RV_TEXT(l->phase);
    v[1] = RV_INT(l->layer);
    return 2 + stats_vals(&l->s, v + 2);
}

typedef struct child_kind {
    int q;
    size_t n; /* the run's records of this kind */
    size_t (*vals)(const rdb_run *r, size_t i, rdb_val *v);
    const char *what; /* "storing …" */
} child_kind;

static int put_children(rdb *db, const rdb_run *r, int64_t id, errbuf *e)
{
    const child_kind kinds[] = {
        {Q_METRIC_PUT, r->n_metric, metric_vals, "storing a metric"},
        {Q_PHASE_PUT, r->n_phase, phase_vals, "storing a phase"},
        {Q_BD_PUT, r->n_breakdown, breakdown_vals, "storing a breakdown row"},
        {Q_LAYER_PUT, r->n_layer, layer_vals, "storing a layer breakdown row"}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t i = 0; i < kinds[k].n; i++) {
            rdb_val v[16] = {RV_INT(id)};
            size_t n = 1 + kinds[k].vals(r, i, v + 1);
            if (put_row(db, kinds[k].q, v, n))
                return DB_ERR(db, e, kinds[k].what);
        }
    return MS_OK;
}

int rdb_run_put(rdb *db, const rdb_run *r, int64_t *id_out, errbuf *e)
{
    int rc = rdb_metrics_check(r->metric, r->n_metric, e);
    if (!rc)
        rc = exec_q(db, Q_BEGIN, e);
    if (rc)
        return rc;
    int64_t id = 0;
    /* under the write lock: another process (a concurrent run or resume of the same sweep)
     * may have stored this run since we checked it; its result stands and ours is dropped */
    sqlite3_stmt *s = stmt(db, Q_RUN_DONE);
    sqlite3_bind_text(s, 1, r->config_hash, -1, SQLITE_STATIC);
    int step = sqlite3_step(s);
    int have = step == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_reset(s);
    if (step != SQLITE_ROW)
        rc = DB_ERR(db, e, "looking up a run");
    if (!rc && have) {
        rc = exec_q(db, Q_COMMIT, e);
        if (!rc && id_out)
            *id_out = 0;
        if (!rc)
            return MS_OK;
    }
    s = stmt(db, Q_RUN_DEL_FAILED);
    sqlite3_bind_text(s, 1, r->config_hash, -1, SQLITE_STATIC);
    if (!rc && step_done(db, s))
        rc = DB_ERR(db, e, "replacing a failed run");
    if (!rc)
        rc = put_run_row(db, r, &id, e);
    if (!rc)
        rc = put_children(db, r, id, e);
    if (!rc)
        rc = exec_q(db, Q_COMMIT, e);
    if (rc) {
        errbuf ignore;
        exec_q(db, Q_ROLLBACK, &ignore);
        return rc;
    }
    if (id_out)
        *id_out = id;
    return MS_OK;
}

/* ---- merge: rows copied column by column from each shard (an older one migrated first) --- */

static const char *const child_tables[] = {"metrics", "phases", "breakdown", "layer_breakdown"};
#define N_CHILD (sizeof child_tables / sizeof child_tables[0])

typedef struct merge_ctx {
    rdb *db, *src_db; /* src_db: the input, an older schema migrated in memory */
    sqlite3 *src;
    const char *src_path;
    sqlite3_stmt *sel_run, *ins_run, *status, *del_failed;
    sqlite3_stmt *sel_child[N_CHILD], *ins_child[N_CHILD];
} merge_ctx;

int rdb_prep(sqlite3 *h, const char *sql, sqlite3_stmt **s)
{
    return sqlite3_prepare_v2(h, sql, -1, s, NULL) == SQLITE_OK ? 0 : -1;
}

/* INSERT INTO t VALUES (?1, …, ?n) for a table of n columns. */
static int prep_insert(sqlite3 *h, const char *table, int ncol, sqlite3_stmt **s)
{
    char sql[512];
    int k = snprintf(sql, sizeof sql, "INSERT INTO %s VALUES (", table);
    for (int i = 0; i < ncol; i++)
        k += snprintf(sql + k, sizeof sql - (size_t)k, "%s?%d", i ? "," : "", i + 1);
    snprintf(sql + k, sizeof sql - (size_t)k, ")");
    return rdb_prep(h, sql, s);
}

static void merge_ctx_free(merge_ctx *m)
{
    sqlite3_finalize(m->sel_run);
    sqlite3_finalize(m->ins_run);
    sqlite3_finalize(m->status);
    sqlite3_finalize(m->del_failed);
    for (size_t t = 0; t < N_CHILD; t++) {
        sqlite3_finalize(m->sel_child[t]);
        sqlite3_finalize(m->ins_child[t]);
    }
    rdb_close(m->src_db);
}

static int merge_prepare(merge_ctx *m, errbuf *e)
{
    rdb *db = m->db;
    char sql[256];
    int orc = rdb_open_ro(m->src_path, &m->src_db, e);
    if (orc)
        return orc;
    m->src = m->src_db->h;
    if (rdb_prep(m->src, "SELECT * FROM runs ORDER BY id", &m->sel_run))
        return err_set(e, MS_ERR_DB, "%s: %s", m->src_path, sqlite3_errmsg(m->src));
    if (prep_insert(db->h, "runs", sqlite3_column_count(m->sel_run), &m->ins_run) ||
        rdb_prep(db->h, "SELECT status FROM runs WHERE config_hash = ?1", &m->status) ||
        rdb_prep(db->h, "DELETE FROM runs WHERE config_hash = ?1", &m->del_failed))
        return DB_ERR(db, e, "preparing the merge");
    for (size_t t = 0; t < N_CHILD; t++) {
        snprintf(sql, sizeof sql, "SELECT * FROM %s WHERE run_id = ?1", child_tables[t]);
        if (rdb_prep(m->src, sql, &m->sel_child[t]))
            return err_set(e, MS_ERR_DB, "%s: %s", m->src_path, sqlite3_errmsg(m->src));
        if (prep_insert(db->h, child_tables[t], sqlite3_column_count(m->sel_child[t]),
                        &m->ins_child[t]))
            return DB_ERR(db, e, "preparing the merge");
    }
    return MS_OK;
}

/* Copies the child rows of source run src_id under the new run id. */
static int merge_children(merge_ctx *m, int64_t src_id, int64_t id, errbuf *e)
{
    for (size_t t = 0; t < N_CHILD; t++) {
        sqlite3_stmt *sel = m->sel_child[t], *ins = m->ins_child[t];
        sqlite3_reset(sel);
        sqlite3_bind_int64(sel, 1, src_id);
        int rc;
        while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
            sqlite3_reset(ins);
            sqlite3_bind_int64(ins, 1, id); /* run_id is every child table's first column */
            for (int c = 1; c < sqlite3_column_count(sel); c++)
                sqlite3_bind_value(ins, c + 1, sqlite3_column_value(sel, c));
            if (sqlite3_step(ins) != SQLITE_DONE)
                return DB_ERR(m->db, e, "merging a child row");
        }
        if (rc != SQLITE_DONE)
            return err_set(e, MS_ERR_DB, "%s: %s", m->src_path, sqlite3_errmsg(m->src));
    }
    return MS_OK;
}

/* 1: the destination already holds this hash in a state the source run must not replace. */
static int merge_keep_existing(merge_ctx *m, const char *hash, const char *src_status)
{
    sqlite3_reset(m->status);
    sqlite3_bind_text(m->status, 1, hash, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(m->status) != SQLITE_ROW)
        return 0;
    int have_ok = !strcmp((const char *)sqlite3_column_text(m->status, 0), "ok");
    sqlite3_reset(m->status);
    if (have_ok || strcmp(src_status, "ok"))
        return 1;
    sqlite3_reset(m->del_failed); /* an ok run replaces a failed one */
    sqlite3_bind_text(m->del_failed, 1, hash, -1, SQLITE_TRANSIENT);
    sqlite3_step(m->del_failed);
    return 0;
}

static int merge_one(rdb *db, const char *path, size_t *added, size_t *skipped, errbuf *e)
{
    merge_ctx m = {.db = db, .src_path = path};
    int rc = merge_prepare(&m, e);
    sqlite3_stmt *sel = m.sel_run;
    int ncol = sel ? sqlite3_column_count(sel) : 0, hash_col = -1, status_col = -1;
    for (int c = 0; c < ncol; c++) {
        if (!strcmp(sqlite3_column_name(sel, c), "config_hash"))
            hash_col = c;
        if (!strcmp(sqlite3_column_name(sel, c), "status"))
            status_col = c;
    }
    int st = SQLITE_DONE;
    while (!rc && (st = sqlite3_step(sel)) == SQLITE_ROW) {
        const char *hash = (const char *)sqlite3_column_text(sel, hash_col);
        const char *status = (const char *)sqlite3_column_text(sel, status_col);
        if (merge_keep_existing(&m, hash, status)) {
            ++*skipped;
            continue;
        }
        sqlite3_reset(m.ins_run);
        sqlite3_bind_null(m.ins_run, 1); /* id: a fresh one */
        for (int c = 1; c < ncol; c++)
            sqlite3_bind_value(m.ins_run, c + 1, sqlite3_column_value(sel, c));
        if (sqlite3_step(m.ins_run) != SQLITE_DONE) {
            rc = DB_ERR(db, e, "merging a run");
            break;
        }
        rc = merge_children(&m, sqlite3_column_int64(sel, 0), sqlite3_last_insert_rowid(db->h), e);
        ++*added;
    }
    if (!rc && st != SQLITE_DONE)
        rc = err_set(e, MS_ERR_DB, "%s: %s", path, sqlite3_errmsg(m.src));
    if (!rc) { /* the scenarios the runs came from */
        sqlite3_stmt *ss = NULL;
        if (rdb_prep(m.src, "SELECT name, path, yaml FROM scenarios", &ss))
            rc = err_set(e, MS_ERR_DB, "%s: %s", path, sqlite3_errmsg(m.src));
        sqlite3_stmt *ins = NULL;
        if (!rc && rdb_prep(db->h, "INSERT OR IGNORE INTO scenarios VALUES (?1, ?2, ?3)", &ins))
            rc = DB_ERR(db, e, "merging scenarios");
        while (!rc && sqlite3_step(ss) == SQLITE_ROW) {
            sqlite3_reset(ins);
            for (int c = 0; c < 3; c++)
                sqlite3_bind_value(ins, c + 1, sqlite3_column_value(ss, c));
            if (sqlite3_step(ins) != SQLITE_DONE)
                rc = DB_ERR(db, e, "merging scenarios");
        }
        sqlite3_finalize(ss);
        sqlite3_finalize(ins);
    }
    merge_ctx_free(&m);
    return rc;
}

int rdb_merge_check(const char *src, errbuf *e)
{
    int v = 0;
    int rc = rdb_file_version(src, &v, e);
    if (rc)
        return rc;
    if (v == 0)
        return err_set(e, MS_ERR_FORMAT,
                       "%s: not an mpcsim results database (schema "
                       "version 0)",
                       src);
    if (v < 0)
        return err_set(e, MS_ERR_FORMAT,
                       "%s: results schema version %d is not one mpcsim writes\n"
                       "---> HINT: the file is damaged or not an mpcsim results database",
                       src, v);
    if (v > RDB_SCHEMA_VERSION)
        return err_set(e, MS_ERR_FORMAT,
                       "%s: results schema version %d, newer than this mpcsim's (%d)\n"
                       "---> HINT: merge with the newer mpcsim that wrote it",
                       src, v, RDB_SCHEMA_VERSION);
    /* an older schema is migrated in memory as it is read (rdb_open_ro): its runs come in
     * labelled as this mpcsim labels them */
    return MS_OK;
}

int rdb_merge(rdb *db, const char *const *srcs, size_t n, size_t *added, size_t *skipped, errbuf *e)
{
    *added = *skipped = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = rdb_merge_check(srcs[i], e);
        if (rc)
            return rc;
    }
    int rc = exec_q(db, Q_BEGIN, e);
    for (size_t i = 0; !rc && i < n; i++)
        rc = merge_one(db, srcs[i], added, skipped, e);
    if (!rc)
        return exec_q(db, Q_COMMIT, e);
    errbuf ignore;
    exec_q(db, Q_ROLLBACK, &ignore);
    *added = 0;
    return rc;
}

/* ---- metric naming --------------------------------------------------------------------- */

int rdb_metric_is_accuracy(const char *name)
{
    const metric_def *d = metric_def_find(name);
    return d && d->kind == MK_ACCURACY;
}

int rdb_metric_lower_is_better(const char *name)
{
    const metric_def *d = metric_def_find(name);
    return d && d->dir == MD_LOWER;
}

int rdb_metrics_check(const rdb_metric *m, size_t n, errbuf *e)
{
    for (size_t i = 0; i < n; i++) {
        const char *unit = m[i].unit ? m[i].unit : "";
        const metric_def *d = metric_def_find(m[i].name);
        if (!d)
            return err_set(e, MS_ERR_INTERNAL,
                           "metric '%s' is not in the metric registry\n  hint: add it to "
                           "protocols/base/metric_def.c",
                           m[i].name);
        if (strcmp(unit, d->unit))
            return err_set(e, MS_ERR_INTERNAL,
                           "metric '%s' carries unit '%s'; the metric registry says '%s'",
                           m[i].name, unit, d->unit);
    }
    return MS_OK;
}

/* ---- validation rows ----------------------------------------------------------------------- */

int rdb_validation_put(rdb *db, const rdb_validation *v, errbuf *e)
{
    static const char sql[] =
        "INSERT INTO validation(session, created, tool_version, protocol, item, phase, n, kv_len, "
        "latency_ns, bandwidth_bps, shaping, pred_rounds, meas_rounds, pred_bytes_p0, "
        "meas_bytes_p0, pred_bytes_p1, meas_bytes_p1, pred_bytes_p2, meas_bytes_p2, "
        "pred_offline, meas_offline, pred_ns, meas_ns, exact) VALUES "
        "(?1,datetime('now'),?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,"
        "?20,?21,?22,?23)";
    int exact = v->pred.rounds == v->meas.rounds && v->pred_offline == v->meas_offline;
    for (int i = 0; i < RDB_PARTIES; i++)
        exact &= v->pred.bytes[i] == v->meas.bytes[i];
    const rdb_val row[] = {RV_TEXT(v->session),
                           RV_TEXT(v->tool_version),
                           RV_TEXT(v->protocol),
                           RV_TEXT(v->item),
                           RV_TEXT(v->phase),
                           RV_INT(v->n),
                           RV_INT(v->kv_len),
                           RV_INT(v->latency_ns),
                           RV_REAL(v->bandwidth_bps),
                           RV_TEXT(v->shaping),
                           RV_INT(v->pred.rounds),
                           RV_INT(v->meas.rounds),
                           RV_INT(v->pred.bytes[0]),
                           RV_INT(v->meas.bytes[0]),
                           RV_INT(v->pred.bytes[1]),
                           RV_INT(v->meas.bytes[1]),
                           RV_INT(v->pred.bytes[2]),
                           RV_INT(v->meas.bytes[2]),
                           RV_INT(v->pred_offline),
                           RV_INT(v->meas_offline),
                           RV_INT(v->pred_ns),
                           RV_INT(v->meas_ns),
                           RV_INT(exact)};
    _Static_assert(RDB_PARTIES == 3, "the validation table has columns for three parties");
    int rc = rdb_exec_row(db->h, sql, row, RV_N(row));
    if (rc)
        return DB_ERR(db, e, rc == -1 ? "preparing a validation row" : "storing a validation row");
    return MS_OK;
}
