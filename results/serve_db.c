/* serve_db.c — serving tables in the results database. */
#include "serve_db.h"

#include <sqlite3.h>
#include <stdio.h>

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

static int bind_text(sqlite3_stmt *s, int i, const char *v)
{
    return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(s, i);
}

static int put_children(rdb *db, sqlite3 *h, const sdb_run *r, int64_t id, errbuf *e)
{
    sqlite3_stmt *m = NULL, *q = NULL;
    int rc = MS_OK;
    if (sqlite3_prepare_v2(h, "INSERT INTO serve_metrics VALUES (?,?,?,?)", -1, &m, NULL) ||
        sqlite3_prepare_v2(h, "INSERT INTO serve_requests VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", -1,
                           &q, NULL))
        rc = FAIL();
    for (size_t i = 0; !rc && i < r->n_metric; i++) {
        sqlite3_bind_int64(m, 1, id);
        bind_text(m, 2, r->metric[i].name);
        sqlite3_bind_double(m, 3, r->metric[i].value);
        bind_text(m, 4, r->metric[i].unit);
        if (sqlite3_step(m) != SQLITE_DONE)
            rc = FAIL();
        sqlite3_reset(m);
    }
    for (size_t i = 0; !rc && r->req && i < r->n_req; i++) {
        const sdb_request *x = &r->req[i];
        sqlite3_bind_int64(q, 1, id);
        sqlite3_bind_int64(q, 2, (int64_t)i);
        sqlite3_bind_int64(q, 3, x->tenant);
        sqlite3_bind_int64(q, 4, x->user);
        sqlite3_bind_int64(q, 5, (int64_t)x->arrival_ns);
        sqlite3_bind_int64(q, 6, (int64_t)x->admit_ns);
        sqlite3_bind_int64(q, 7, (int64_t)x->first_ns);
        sqlite3_bind_int64(q, 8, (int64_t)x->finish_ns);
        sqlite3_bind_int64(q, 9, x->prompt);
        sqlite3_bind_int64(q, 10, x->hit);
        sqlite3_bind_int64(q, 11, x->shifted);
        sqlite3_bind_int64(q, 12, x->decode);
        if (sqlite3_step(q) != SQLITE_DONE)
            rc = FAIL();
        sqlite3_reset(q);
    }
    sqlite3_finalize(m);
    sqlite3_finalize(q);
    return rc;
}

int sdb_put_run(rdb *db, const sdb_run *r, int64_t *id, errbuf *e)
{
    sqlite3 *h = rdb_handle(db);
    if (sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return FAIL();
    sqlite3_stmt *s = NULL;
    int rc = MS_OK;
    if (sqlite3_prepare_v2(h, "INSERT INTO serve_runs (scenario, policy, rate, seed, model, "
                           "protocol, network, scheduler, n_requests, batch, chunk, config) "
                           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", -1, &s, NULL) != SQLITE_OK) {
        rc = FAIL();
    } else {
        bind_text(s, 1, r->scenario);
        bind_text(s, 2, r->policy);
        sqlite3_bind_double(s, 3, r->rate);
        sqlite3_bind_int64(s, 4, (int64_t)r->seed);
        bind_text(s, 5, r->model);
        bind_text(s, 6, r->protocol);
        bind_text(s, 7, r->network);
        bind_text(s, 8, r->scheduler);
        sqlite3_bind_int64(s, 9, r->n_requests);
        sqlite3_bind_int64(s, 10, r->batch);
        sqlite3_bind_int64(s, 11, r->chunk);
        bind_text(s, 12, r->config);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = FAIL();
    }
    sqlite3_finalize(s);
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
    sqlite3 *h = rdb_handle(db);
    sqlite3_stmt *s = NULL;
    int rc = MS_OK;
    if (sqlite3_prepare_v2(h, "INSERT INTO serve_leak (scenario, policy, channel, scheduler, "
                           "trials, correct, candidates, success_rate, chance, p_value, bits, "
                           "ttft_gap_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", -1, &s,
                           NULL) != SQLITE_OK)
        return FAIL();
    bind_text(s, 1, l->scenario);
    bind_text(s, 2, l->policy);
    bind_text(s, 3, l->channel);
    bind_text(s, 4, l->scheduler);
    sqlite3_bind_int64(s, 5, l->trials);
    sqlite3_bind_int64(s, 6, l->correct);
    sqlite3_bind_int64(s, 7, l->candidates);
    sqlite3_bind_double(s, 8, l->success_rate);
    sqlite3_bind_double(s, 9, l->chance);
    sqlite3_bind_double(s, 10, l->p_value);
    sqlite3_bind_double(s, 11, l->bits);
    sqlite3_bind_double(s, 12, l->ttft_gap_ms);
    if (sqlite3_step(s) != SQLITE_DONE)
        rc = FAIL();
    sqlite3_finalize(s);
    return rc;
}
