/* check_serve_db.c — the serving tables of the results database (results/serve_db.h): the
 * columns scenarios/SERVING.md documents, a run with its metrics and requests and a leak row
 * read back field by field, the tables added beside an older `mpcsim run` database, and errors
 * that leave nothing half-written. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sqlfix.h"
#include "results/rdb.h"
#include "results/serve_db.h"

TESTDIR("check_serve_db")

static rdb *open_new(const char *name) { return sqlfix_rdb_new(testdir_path(&td, name)); }

/* The tests of the serving tables' rows each get a new serve.db with the tables (tdb). */
static rdb *tdb;
static void tdb_setup(void)
{
    errbuf e;
    tdb = open_new("serve.db");
    ck_assert_msg(sdb_init(tdb, &e) == MS_OK, "%s", e.msg);
}
static void tdb_teardown(void) { rdb_close(tdb); }

static long long q1(rdb *db, const char *sql) { return sqlfix_int(rdb_handle(db), sql); }

/* Column c of the first row of sql as text ("NULL" for a NULL), into out. */
static const char *qtext(rdb *db, const char *sql, int c, char *out, size_t cap)
{
    char *t = sqlfix_text(rdb_handle(db), sql, c);
    snprintf(out, cap, "%s", t);
    free(t);
    return out;
}

static const sdb_metric METRICS[3] = {
    {"ttft_p50", 0.25, "s"}, {"token_hit_rate", 0.5, ""}, {"throughput_tokens", 1234.5, "tok/s"}};
static const sdb_request REQS[2] = {{.arrival_ns = 1,
                                     .admit_ns = 2,
                                     .first_ns = 3,
                                     .finish_ns = 4,
                                     .tenant = 5,
                                     .user = 6,
                                     .prompt = 7,
                                     .hit = 8,
                                     .shifted = 9,
                                     .decode = 10},
                                    {.arrival_ns = 1ull << 40,
                                     .admit_ns = (1ull << 40) + 1,
                                     .first_ns = (1ull << 41),
                                     .finish_ns = (1ull << 42),
                                     .tenant = 0,
                                     .user = 4000000000u,
                                     .prompt = 4096,
                                     .hit = 0,
                                     .shifted = 0,
                                     .decode = 1}};

static sdb_run a_run(void)
{
    return (sdb_run){.scenario = "rag",
                     .policy = "span",
                     .model = "stories260K",
                     .protocol = "semi2k",
                     .network = "lan",
                     .scheduler = "fcfs",
                     .rate = 12.5,
                     .seed = 42,
                     .n_requests = 2,
                     .batch = 4,
                     .chunk = 256,
                     .config = "name: rag\n",
                     .metric = METRICS,
                     .n_metric = 3,
                     .req = REQS,
                     .n_req = 2};
}

/* ---- schema ------------------------------------------------------------------------------ */

/* The columns of the SERVING.md row that starts with "| `table` |": the list after the
 * cell's first ": " ("one per (policy, rate): scenario, policy, …"), or else the first
 * parenthesized list ("(run_id, name, value, unit), names as above"), with asides in
 * parentheses left out. */
static int doc_columns(const char *doc, const char *table, char cols[][32], int max)
{
    char head[64], cell[1024];
    snprintf(head, sizeof head, "| `%s` | ", table);
    const char *row = strstr(doc, head);
    ck_assert_msg(row != NULL, "SERVING.md has no row for %s", table);
    row += strlen(head);
    snprintf(cell, sizeof cell, "%.*s", (int)strcspn(row, "|\n"), row);
    char *list = strstr(cell, ": ");
    if (list)
        list += 2;
    else {
        list = strchr(cell, '(');
        ck_assert_ptr_nonnull(list);
        list++;
        *strchr(list, ')') = '\0';
    }
    int n = 0, depth = 0;
    size_t w = 0;
    for (const char *p = list;; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')')
            depth--;
        else if (depth == 0 && *p != ',' && *p != ' ' && *p != '\0') {
            if (w == 0 && n < max)
                n++;
            if (w + 1 < 32)
                cols[n - 1][w++] = *p, cols[n - 1][w] = '\0';
            continue;
        }
        if (depth == 0)
            w = 0;
        if (*p == '\0')
            break;
    }
    return n;
}

static int has(char cols[][32], int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(cols[i], name))
            return 1;
    return 0;
}

START_TEST(test_schema_as_documented)
{
    errbuf e;
    const char *doc = th_text(th_data_path("scenarios/SERVING.md"));
    static const char *const tables[] = {"serve_runs", "serve_metrics", "serve_requests",
                                         "serve_leak"};
    for (size_t t = 0; t < 4; t++) {
        char want[32][32];
        int nw = doc_columns(doc, tables[t], want, 32);
        ck_assert_int_gt(nw, 3);
        char sql[128], got[32][32];
        int ng = 0;
        snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", tables[t]);
        sqlite3_stmt *s;
        ck_assert_int_eq(sqlite3_prepare_v2(rdb_handle(tdb), sql, -1, &s, NULL), SQLITE_OK);
        while (sqlite3_step(s) == SQLITE_ROW && ng < 32)
            snprintf(got[ng++], 32, "%s", (const char *)sqlite3_column_text(s, 1));
        sqlite3_finalize(s);
        /* every documented column is there; every column but the row id and the creation
         * time is documented */
        for (int i = 0; i < nw; i++)
            ck_assert_msg(has(got, ng, want[i]), "%s: documented column '%s' missing", tables[t],
                          want[i]);
        for (int i = 0; i < ng; i++)
            ck_assert_msg(has(want, nw, got[i]) || !strcmp(got[i], "id") ||
                              !strcmp(got[i], "created"),
                          "%s: column '%s' is not in SERVING.md", tables[t], got[i]);
    }
    /* creating them again is harmless */
    ck_assert_msg(sdb_init(tdb, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(q1(tdb, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'serve_%' AND "
                             "type = 'table'"),
                     4);
}
END_TEST

/* ---- insert and read back ------------------------------------------------------------------ */

START_TEST(test_run_read_back)
{
    errbuf e;
    sdb_run r = a_run();
    int64_t id1 = -1, id2 = -1;
    ck_assert_msg(sdb_put_run(tdb, &r, &id1, &e) == MS_OK, "%s", e.msg);
    r.policy = "prefix";
    r.model = NULL; /* a missing text is NULL, not "" */
    r.req = NULL;
    r.n_req = 5; /* ignored without requests */
    ck_assert_msg(sdb_put_run(tdb, &r, &id2, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_gt(id1, 0);
    ck_assert_int_gt(id2, id1);
    char sql[256], t[256];
    snprintf(sql, sizeof sql,
             "SELECT scenario, policy, rate, seed, model, protocol, network, "
             "scheduler, n_requests, batch, chunk, config, created FROM serve_runs WHERE id = %lld",
             (long long)id1);
    static const char *const want[] = {"rag", "span", "12.5", "42", "stories260K", "semi2k",
                                       "lan", "fcfs", "2",    "4",  "256",         "name: rag\n"};
    for (int c = 0; c < 12; c++)
        ck_assert_str_eq(qtext(tdb, sql, c, t, sizeof t), want[c]);
    ck_assert_int_eq(strlen(qtext(tdb, sql, 12, t, sizeof t)), strlen("2026-01-01T00:00:00.000Z"));
    snprintf(sql, sizeof sql, "SELECT model FROM serve_runs WHERE id = %lld", (long long)id2);
    ck_assert_str_eq(qtext(tdb, sql, 0, t, sizeof t), "NULL");
    /* the metrics, each with its unit */
    for (int i = 0; i < 3; i++) {
        snprintf(sql, sizeof sql,
                 "SELECT value, unit FROM serve_metrics WHERE run_id = %lld AND "
                 "name = '%s'",
                 (long long)id1, METRICS[i].name);
        sqlite3_stmt *s;
        ck_assert_int_eq(sqlite3_prepare_v2(rdb_handle(tdb), sql, -1, &s, NULL), SQLITE_OK);
        ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
        ck_assert_double_eq(sqlite3_column_double(s, 0), METRICS[i].value);
        ck_assert_str_eq((const char *)sqlite3_column_text(s, 1), METRICS[i].unit);
        sqlite3_finalize(s);
    }
    snprintf(sql, sizeof sql, "SELECT count(*) FROM serve_metrics WHERE run_id = %lld",
             (long long)id2);
    ck_assert_int_eq(q1(tdb, sql), 3);
    /* the requests, numbered in order, 64-bit times intact */
    snprintf(sql, sizeof sql,
             "SELECT req, tenant, user, arrival_ns, admit_ns, first_ns, "
             "finish_ns, prompt, hit, shifted, decode FROM serve_requests WHERE run_id = %lld "
             "ORDER BY req",
             (long long)id1);
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(rdb_handle(tdb), sql, -1, &s, NULL), SQLITE_OK);
    for (int i = 0; i < 2; i++) {
        const sdb_request *x = &REQS[i];
        ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
        const int64_t got[11] = {
            sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2),
            sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4), sqlite3_column_int64(s, 5),
            sqlite3_column_int64(s, 6), sqlite3_column_int64(s, 7), sqlite3_column_int64(s, 8),
            sqlite3_column_int64(s, 9), sqlite3_column_int64(s, 10)};
        const int64_t exp[11] = {i,
                                 x->tenant,
                                 x->user,
                                 (int64_t)x->arrival_ns,
                                 (int64_t)x->admit_ns,
                                 (int64_t)x->first_ns,
                                 (int64_t)x->finish_ns,
                                 x->prompt,
                                 x->hit,
                                 x->shifted,
                                 x->decode};
        for (int c = 0; c < 11; c++)
            ck_assert_msg(got[c] == exp[c], "request %d column %d: %lld, want %lld", i, c,
                          (long long)got[c], (long long)exp[c]);
    }
    ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
    sqlite3_finalize(s);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM serve_requests WHERE run_id = %lld",
             (long long)id2);
    ck_assert_int_eq(q1(tdb, sql), 0);
    /* deleting a run deletes its rows (foreign keys are on) */
    snprintf(sql, sizeof sql, "DELETE FROM serve_runs WHERE id = %lld", (long long)id1);
    ck_assert_int_eq(sqlite3_exec(rdb_handle(tdb), sql, NULL, NULL, NULL), SQLITE_OK);
    sqlfix_counts(rdb_handle(tdb), "serve_requests=0 serve_metrics=3");
}
END_TEST

START_TEST(test_leak_read_back)
{
    errbuf e;
    sdb_leak l = {.scenario = "rag",
                  .policy = "prefix",
                  .channel = "ttft",
                  .scheduler = NULL,
                  .trials = 40,
                  .correct = 31,
                  .candidates = 8,
                  .success_rate = 0.775,
                  .chance = 0.125,
                  .p_value = 1e-20,
                  .bits = 1.5,
                  .ttft_gap_ms = -3.25};
    ck_assert_msg(sdb_put_leak(tdb, &l, &e) == MS_OK, "%s", e.msg);
    l.policy = "salted";
    ck_assert_msg(sdb_put_leak(tdb, &l, &e) == MS_OK, "%s", e.msg);
    const char *sql = "SELECT scenario, policy, channel, scheduler, trials, correct, candidates, "
                      "success_rate, chance, p_value, bits, ttft_gap_ms FROM serve_leak "
                      "ORDER BY id LIMIT 1";
    static const char *const want[] = {"rag", "prefix", "ttft",  "NULL",    "40",  "31",
                                       "8",   "0.775",  "0.125", "1.0e-20", "1.5", "-3.25"};
    char t[64];
    for (int c = 0; c < 12; c++)
        ck_assert_str_eq(qtext(tdb, sql, c, t, sizeof t), want[c]);
    ck_assert_int_eq(q1(tdb, "SELECT count(*) FROM serve_leak WHERE policy = 'salted'"), 1);
}
END_TEST

/* ---- beside an older database ------------------------------------------------------------ */

/* A database `mpcsim run` wrote at schema version 2: opening it migrates it, the serve tables
 * join its own, its runs stay, and serving rows survive a reopen. */
START_TEST(test_beside_migrated_runs)
{
    const char *path = testdir_path(&td, "v2.db");
    th_copy(th_data_path("tests/data/results-v2.db"), path);
    errbuf e;
    int v = -1;
    ck_assert_msg(rdb_file_version(path, &v, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(v, 2);
    rdb *db;
    ck_assert_msg(rdb_open(path, 0, &db, &e) == MS_OK, "%s", e.msg);
    long long runs = q1(db, "SELECT count(*) FROM runs");
    ck_assert_int_gt(runs, 0);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM sqlite_master WHERE name = 'serve_runs'"), 0);
    ck_assert_msg(sdb_init(db, &e) == MS_OK, "%s", e.msg);
    sdb_run r = a_run();
    ck_assert_msg(sdb_put_run(db, &r, NULL, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(rdb_close(db), MS_OK);
    ck_assert_msg(rdb_file_version(path, &v, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(v, RDB_SCHEMA_VERSION);
    ck_assert_msg(rdb_open(path, 0, &db, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(sdb_init(db, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs"), runs);
    sqlfix_counts(rdb_handle(db), "serve_runs=1 serve_requests=2");
    rdb_close(db);
}
END_TEST

/* ---- errors --------------------------------------------------------------------------------- */

START_TEST(test_errors_leave_nothing)
{
    rdb *db = open_new("e.db");
    errbuf e;
    sdb_run r = a_run();
    /* before the tables exist: the database's message, with the file */
    ck_assert_int_eq(sdb_put_run(db, &r, NULL, &e), MS_ERR_DB);
    ck_assert_msg(strstr(e.msg, "e.db: ") && strstr(e.msg, "no such table"), "%s", e.msg);
    sdb_leak l = {.scenario = "rag", .policy = "prefix"};
    ck_assert_int_eq(sdb_put_leak(db, &l, &e), MS_ERR_DB);
    ck_assert_msg(strstr(e.msg, "no such table: serve_leak"), "%s", e.msg);
    ck_assert_msg(sdb_init(db, &e) == MS_OK, "%s", e.msg);
    /* a run without its scenario: refused, no row */
    int64_t id = -7;
    r.scenario = NULL;
    ck_assert_int_eq(sdb_put_run(db, &r, &id, &e), MS_ERR_DB);
    ck_assert_msg(strstr(e.msg, "NOT NULL") && strstr(e.msg, "serve_runs.scenario"), "%s", e.msg);
    ck_assert_int_eq(id, -7);
    /* a metric named twice fails in the child rows: the run row goes with them */
    sdb_metric twice[2] = {{"ttft_p50", 1, "s"}, {"ttft_p50", 2, "s"}};
    r = a_run();
    r.metric = twice;
    r.n_metric = 2;
    ck_assert_int_eq(sdb_put_run(db, &r, &id, &e), MS_ERR_DB);
    ck_assert_msg(strstr(e.msg, "UNIQUE"), "%s", e.msg);
    ck_assert_int_eq(id, -7);
    sqlfix_counts(rdb_handle(db), "serve_runs=0 serve_metrics=0 serve_requests=0");
    /* the connection is usable afterwards (the transaction was rolled back) */
    r = a_run();
    ck_assert_msg(sdb_put_run(db, &r, &id, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM serve_runs"), 1);
    /* a leak row without its policy */
    l.policy = NULL;
    ck_assert_int_eq(sdb_put_leak(db, &l, &e), MS_ERR_DB);
    ck_assert_msg(strstr(e.msg, "serve_leak.policy"), "%s", e.msg);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM serve_leak"), 0);
    rdb_close(db);
}
END_TEST

Suite *serve_db_suite(void)
{
    Suite *s = suite_create("serve_db");
    TCase *rows = th_case(s, "rows", 0);
    TESTDIR_USE(rows);
    tcase_add_checked_fixture(rows, tdb_setup, tdb_teardown);
    TH_TESTS(rows, test_schema_as_documented, test_run_read_back, test_leak_read_back);
    TCase *tc = th_case(s, "serve_db", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_beside_migrated_runs, test_errors_leave_nothing);
    return s;
}
