/* serve_db.c — serving tables in the results database. */
#include "serve_db.h"

#include <sqlite3.h>
#include <stdio.h>

#include "rdb_bind.h"

static const char *const schema =
    "CREATE TABLE IF NOT EXISTS serve_runs ("
    " id INTEGER PRIMARY KEY, scenario TEXT NOT NULL, policy TEXT NOT NULL, rate REAL,"
    " seed INTEGER, model TEXT, protocol TEXT, network TEXT, scheduler TEXT,"
    " n_requests INTEGER, batch INTEGER, chunk INTEGER, config TEXT,"
    " created TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));"
    "CREATE INDEX IF NOT EXISTS serve_runs_scn ON serve_runs(scenario, policy);"
    "CREATE TABLE IF NOT EXISTS serve_metrics ("
    " run_id INTEGER NOT NULL REFERENCES serve_runs(id) ON DELETE CASCADE,"
    " name TEXT NOT NULL, value REAL, unit TEXT, PRIMARY KEY (run_id, name));"
    "CREATE TABLE IF NOT EXISTS serve_requests ("
    " run_id INTEGER NOT NULL REFERENCES serve_runs(id) ON DELETE CASCADE,"
    " req INTEGER NOT NULL, tenant INTEGER, user INTEGER, arrival_ns INTEGER,"
    " admit_ns INTEGER, first_ns INTEGER, finish_ns INTEGER, prompt INTEGER, hit INTEGER,"
    " shifted INTEGER, decode INTEGER, PRIMARY KEY (run_id, req));"
    "CREATE TABLE IF NOT EXISTS serve_leak ("
    " id INTEGER PRIMARY KEY, scenario TEXT NOT NULL, policy TEXT NOT NULL, channel TEXT,"
    " scheduler TEXT, trials INTEGER, correct INTEGER, candidates INTEGER,"
    " success_rate REAL, chance REAL, p_value REAL, bits REAL, ttft_gap_ms REAL,"
    " created TEXT DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));";

static int db_fail(rdb *db, errbuf *e)
{
    sqlite3 *h = rdb_handle(db);
    return err_set(e, MS_ERR_DB, "%s: %s", rdb_path(db), sqlite3_errmsg(h));
}
#define FAIL() db_fail(db, e)

int sdb_init(rdb *db, errbuf *e)
{
    return sqlite3_exec(rdb_handle(db), schema, NULL, NULL, NULL) == SQLITE_OK ? MS_OK : FAIL();
}

static int put_children(rdb *db, sqlite3 *h, const sdb_run *r, int64_t id, errbuf *e)
{
    sqlite3_stmt *m = NULL, *q = NULL;
    int rc = MS_OK;
    if (sqlite3_prepare_v2(h, "INSERT INTO serve_metrics VALUES (?,?,?,?)", -1, &m, NULL) ||
        sqlite3_prepare_v2(h, "INSERT INTO serve_requests VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", -1, &q,
                           NULL))
        rc = FAIL();
    for (size_t i = 0; !rc && i < r->n_metric; i++) {
        const sdb_metric *x = &r->metric[i];
        const rdb_val v[] = {RV_INT(id), RV_TEXT(x->name), RV_REAL(x->value), RV_TEXT(x->unit)};
        if (rdb_step_row(m, v, RV_N(v)))
            rc = FAIL();
    }
    for (size_t i = 0; !rc && r->req && i < r->n_req; i++) {
        const sdb_request *x = &r->req[i];
        const rdb_val v[] = {RV_INT(id),
                             RV_INT(i),
                             RV_INT(x->tenant),
                             RV_INT(x->user),
                             RV_INT(x->arrival_ns),
                             RV_INT(x->admit_ns),
                             RV_INT(x->first_ns),
                             RV_INT(x->finish_ns),
                             RV_INT(x->prompt),
                             RV_INT(x->hit),
                             RV_INT(x->shifted),
                             RV_INT(x->decode)};
        if (rdb_step_row(q, v, RV_N(v)))
            rc = FAIL();
    }
    sqlite3_finalize(m);
    sqlite3_finalize(q);
    return rc;
}

int sdb_put_run(rdb *db, const sdb_run *r, int64_t *id, errbuf *e)
{
    sqlite3 *h = rdb_handle(db);
    int rc = rdb_metrics_check(r->metric, r->n_metric, e);
    if (rc)
        return rc;
    if (sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return FAIL();
    const rdb_val v[] = {RV_TEXT(r->scenario), RV_TEXT(r->policy),    RV_REAL(r->rate),
                         RV_INT(r->seed),      RV_TEXT(r->model),     RV_TEXT(r->protocol),
                         RV_TEXT(r->network),  RV_TEXT(r->scheduler), RV_INT(r->n_requests),
                         RV_INT(r->batch),     RV_INT(r->chunk),      RV_TEXT(r->config)};
    if (rdb_exec_row(h,
                     "INSERT INTO serve_runs (scenario, policy, rate, seed, model, protocol, "
                     "network, scheduler, n_requests, batch, chunk, config) "
                     "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                     v, RV_N(v)))
        rc = FAIL();
    int64_t rid = sqlite3_last_insert_rowid(h);
    if (!rc)
        rc = put_children(db, h, r, rid, e);
    if (!rc && sqlite3_exec(h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        rc = FAIL();
    if (rc)
        sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    else if (id)
        *id = rid;
    return rc;
}

int sdb_put_leak(rdb *db, const sdb_leak *l, errbuf *e)
{
    const rdb_val v[] = {RV_TEXT(l->scenario),  RV_TEXT(l->policy),       RV_TEXT(l->channel),
                         RV_TEXT(l->scheduler), RV_INT(l->trials),        RV_INT(l->correct),
                         RV_INT(l->candidates), RV_REAL(l->success_rate), RV_REAL(l->chance),
                         RV_REAL(l->p_value),   RV_REAL(l->bits),         RV_REAL(l->ttft_gap_ms)};
    if (rdb_exec_row(rdb_handle(db),
                     "INSERT INTO serve_leak (scenario, policy, channel, "
                     "scheduler, trials, correct, candidates, success_rate, "
                     "chance, p_value, bits, ttft_gap_ms) VALUES "
                     "(?,?,?,?,?,?,?,?,?,?,?,?)",
                     v, RV_N(v)))
        return FAIL();
    return MS_OK;
}
