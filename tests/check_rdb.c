/* check_rdb.c — the results database: schema version and migration, WAL, one transaction per
 * run (a failing run leaves nothing), failed runs replaced, refusal of foreign and newer
 * databases, and merge (no duplicates, one transaction, schema mismatch refused). */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "protocols/base/metric_def.h"
#include "results/rdb.h"
#include "sqlfix.h"

TESTDIR("check_rdb")
#define tmpdir (td.dir)
static const char *tpath(const char *name) { return testdir_path(&td, name); }

/* An integer from a query on an open database (or -1). */
static long long q1(rdb *db, const char *sql) { return sqlfix_int(rdb_handle(db), sql); }

/* A run with 2 metrics, 2 phases, 3 breakdown rows and 2 layer rows; fig scales the numbers. */
typedef struct fake_run {
    rdb_metric m[2];
    rdb_phase ph[2];
    rdb_breakdown bd[3];
    rdb_layer ly[2];
    char hash[17];
    rdb_run r;
} fake_run;

static void fake(fake_run *f, const char *scenario, int idx, const char *status)
{
    memset(f, 0, sizeof *f);
    snprintf(f->hash, sizeof f->hash, "%016x", 0xabc00 + idx);
    f->m[0] = (rdb_metric){"attn_mass_recall", 0.5 + idx / 100.0, "ratio"};
    f->m[1] = (rdb_metric){"latency_total_s", 1.0 + idx, "s"};
    f->ph[0] = (rdb_phase){"prefill", 1000u * (unsigned)idx, 10};
    f->ph[1] = (rdb_phase){"decode", 2000u * (unsigned)idx, 20};
    f->bd[0] = (rdb_breakdown){"prefill", "total", {.rounds = 7, .bytes = {1, 2, 3}}};
    f->bd[1] = (rdb_breakdown){"prefill", "attention", {.rounds = 3, .comm_ns = 5}};
    f->bd[2] = (rdb_breakdown){"decode", "total", {.rounds = (uint64_t)idx, .offline = {9, 9, 0}}};
    f->ly[0] = (rdb_layer){"prefill", 0, {.rounds = 1}};
    f->ly[1] = (rdb_layer){"prefill", 1, {.rounds = 2}};
    f->r = (rdb_run){.scenario = scenario,
                     .grid_index = (uint64_t)idx,
                     .config_hash = f->hash,
                     .config_yaml = "model: gpt2\n",
                     .seed = 1,
                     .status = status,
                     .started = "2026-01-01T00:00:00.000Z",
                     .finished = "2026-01-01T00:00:01.000Z",
                     .wall_s = 1,
                     .tool_version = "test",
                     .model = "gpt2",
                     .protocol = "semi2k",
                     .network = "lan",
                     .policy = "h2o",
                     .prompt_len = 128,
                     .decode_len = 8,
                     .batch = 1,
                     .metric = f->m,
                     .n_metric = 2,
                     .phase = f->ph,
                     .n_phase = 2,
                     .breakdown = f->bd,
                     .n_breakdown = 3,
                     .layer = f->ly,
                     .n_layer = 2};
}

static rdb *open_new(const char *name) { return sqlfix_rdb_new(tpath(name)); }

/* The tests of one run's rows each get a new a.db (adb), closed after the test. */
static rdb *adb;
static void adb_setup(void) { adb = open_new("a.db"); }
static void adb_teardown(void) { rdb_close(adb); }

START_TEST(test_open_schema)
{
    rdb *db = open_new("a.db");
    ck_assert_int_eq(q1(db, "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(rdb_handle(db), "PRAGMA journal_mode", -1, &s, NULL), 0);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    const char *tables[] = {"scenarios", "runs",      "metrics",
                            "phases",    "breakdown", "layer_breakdown"};
    for (size_t i = 0; i < 6; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE name = '%s'",
                 tables[i]);
        ck_assert_int_eq(q1(db, sql), 1);
    }
    ck_assert_str_eq(rdb_path(db), tpath("a.db"));
    rdb_close(db);
    int v = -1;
    errbuf e;
    ck_assert_int_eq(rdb_file_version(tpath("a.db"), &v, &e), MS_OK);
    ck_assert_int_eq(v, RDB_SCHEMA_VERSION);
    /* reopening an up-to-date database changes nothing */
    db = open_new("a.db");
    ck_assert_int_eq(q1(db, "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    rdb_close(db);
    ck_assert_int_eq(rdb_open(tpath("missing.db"), 0, &db, &e), MS_ERR_NOTFOUND);
    ck_assert_int_ne(access(tpath("missing.db"), F_OK), 0);
}
END_TEST

START_TEST(test_run_put)
{
    errbuf e;
    fake_run f;
    int64_t id = 0, n = -1;
    int done = 1;
    ck_assert_int_eq(rdb_scenario_put(adb, "sc", "sc.yaml", "name: sc\n", &e), MS_OK);
    ck_assert_int_eq(rdb_scenario_put(adb, "sc", "sc2.yaml", "name: sc\n#2\n", &e), MS_OK);
    ck_assert_int_eq(q1(adb, "SELECT count(*) FROM scenarios WHERE path = 'sc2.yaml'"), 1);
    fake(&f, "sc", 1, "ok");
    ck_assert_int_eq(rdb_run_done(adb, f.hash, &done, &e), MS_OK);
    ck_assert_int_eq(done, 0);
    ck_assert_int_eq(rdb_run_put(adb, &f.r, &id, &e), MS_OK);
    ck_assert_int_gt(id, 0);
    ck_assert_int_eq(rdb_run_done(adb, f.hash, &done, &e), MS_OK);
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(rdb_scenario_runs(adb, "sc", &n, &e), MS_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(rdb_scenario_runs(adb, "other", &n, &e), MS_OK);
    ck_assert_int_eq(n, 0);
    sqlfix_counts(rdb_handle(adb), "metrics=2 phases=2 breakdown=3 layer_breakdown=2");
    ck_assert_int_eq(q1(adb, "SELECT bytes_p2 FROM breakdown WHERE category = 'total' AND "
                             "phase = 'prefill'"),
                     3);
    ck_assert_int_eq(q1(adb, "SELECT offline_p1 FROM breakdown WHERE phase = 'decode'"), 9);
    ck_assert_int_eq(q1(adb, "SELECT comm_ns FROM breakdown WHERE category = 'attention'"), 5);
    ck_assert_int_eq(q1(adb, "SELECT latency_ns FROM phases WHERE phase = 'decode'"), 2000);
    /* the same hash again (another process stored it meanwhile): the stored run stands,
     * nothing is added and no error is raised */
    ck_assert_int_eq(rdb_run_put(adb, &f.r, &id, &e), MS_OK);
    ck_assert_int_eq(id, 0);
    sqlfix_counts(rdb_handle(adb), "runs=1 metrics=2");
}
END_TEST

/* A run whose rows cannot all be stored leaves no row at all. */
START_TEST(test_run_atomic)
{
    errbuf e;
    fake_run f;
    fake(&f, "sc", 2, "ok");
    f.bd[2] = f.bd[0]; /* duplicate (run, phase, category): the 3rd breakdown insert fails */
    ck_assert_int_eq(rdb_run_put(adb, &f.r, NULL, &e), MS_ERR_DB);
    sqlfix_counts(rdb_handle(adb), "runs=0 metrics=0 phases=0 breakdown=0");
    /* and the connection is usable afterwards */
    fake(&f, "sc", 2, "ok");
    ck_assert_int_eq(rdb_run_put(adb, &f.r, NULL, &e), MS_OK);
    ck_assert_int_eq(q1(adb, "SELECT count(*) FROM breakdown"), 3);
}
END_TEST

START_TEST(test_failed_replaced)
{
    errbuf e;
    fake_run f;
    int done = 1;
    fake(&f, "sc", 3, "failed");
    f.r.error = "boom";
    f.r.n_metric = f.r.n_phase = f.r.n_breakdown = f.r.n_layer = 0;
    ck_assert_int_eq(rdb_run_put(adb, &f.r, NULL, &e), MS_OK);
    ck_assert_int_eq(rdb_run_done(adb, f.hash, &done, &e), MS_OK);
    ck_assert_int_eq(done, 0);
    fake(&f, "sc", 3, "ok");
    ck_assert_int_eq(rdb_run_put(adb, &f.r, NULL, &e), MS_OK);
    ck_assert_int_eq(q1(adb, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(q1(adb, "SELECT count(*) FROM runs WHERE status = 'ok' AND error IS NULL"), 1);
}
END_TEST

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

START_TEST(test_refuse_foreign_and_newer)
{
    rdb *db;
    errbuf e;
    raw_exec(tpath("foreign.db"), "CREATE TABLE t(x)");
    ck_assert_int_eq(rdb_open(tpath("foreign.db"), 1, &db, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "not an mpcsim results database"));
    db = open_new("new.db");
    rdb_close(db);
    raw_exec(tpath("new.db"), "PRAGMA user_version = 99");
    ck_assert_int_eq(rdb_open(tpath("new.db"), 1, &db, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "newer"));
    th_write(tpath("text.db"),
             "this is not a database, just some text that is long enough to have a header ....");
    ck_assert_int_ne(rdb_open(tpath("text.db"), 1, &db, &e), MS_OK);
}
END_TEST

static void fill(const char *name, int from, int to)
{
    rdb *db = open_new(name);
    errbuf e;
    fake_run f;
    ck_assert_int_eq(rdb_scenario_put(db, "sc", "sc.yaml", "name: sc\n", &e), MS_OK);
    for (int i = from; i < to; i++) {
        fake(&f, "sc", i, "ok");
        ck_assert_int_eq(rdb_run_put(db, &f.r, NULL, &e), MS_OK);
    }
    rdb_close(db);
}

START_TEST(test_merge)
{
    fill("s1.db", 0, 5);
    fill("s2.db", 3, 9); /* runs 3 and 4 in both */
    rdb *db = open_new("out.db");
    errbuf e;
    size_t added, skipped;
    const char *srcs[] = {tpath("s1.db"), tpath("s2.db")};
    ck_assert_int_eq(rdb_merge(db, srcs, 2, &added, &skipped, &e), MS_OK);
    ck_assert_uint_eq(added, 9);
    ck_assert_uint_eq(skipped, 2);
    ck_assert_int_eq(q1(db, "SELECT count(DISTINCT config_hash) FROM runs"), 9);
    sqlfix_counts(rdb_handle(db), "runs=9 metrics=18 phases=18 breakdown=27 layer_breakdown=18 "
                                  "scenarios=1");
    /* child rows follow their run: run with grid_index 7 has decode rounds 7 */
    ck_assert_int_eq(q1(db, "SELECT b.rounds FROM breakdown b JOIN runs r ON r.id = b.run_id "
                            "WHERE r.grid_index = 7 AND b.phase = 'decode'"),
                     7);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM metrics m LEFT JOIN runs r ON r.id = m.run_id "
                            "WHERE r.id IS NULL"),
                     0);
    /* again: nothing new */
    ck_assert_int_eq(rdb_merge(db, srcs, 2, &added, &skipped, &e), MS_OK);
    ck_assert_uint_eq(added, 0);
    ck_assert_uint_eq(skipped, 11);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs"), 9);
    rdb_close(db);
}
END_TEST

/* Schema mismatch is refused up front; a source failing half-way rolls the whole merge back. */
START_TEST(test_merge_refused)
{
    fill("s1.db", 0, 3);
    fill("s3.db", 10, 12);
    raw_exec(tpath("old.db"), "PRAGMA user_version = 0; CREATE TABLE x(a)");
    char bad_sql[256];
    snprintf(bad_sql, sizeof bad_sql,
             "PRAGMA user_version = %d; CREATE TABLE runs(id INTEGER "
             "PRIMARY KEY, config_hash TEXT, status TEXT, junk TEXT); INSERT INTO runs VALUES (1, "
             "'ffff', 'ok', 'x')",
             RDB_SCHEMA_VERSION);
    raw_exec(tpath("bad.db"), bad_sql);
    rdb *db = open_new("out.db");
    errbuf e;
    size_t added, skipped;
    const char *mism[] = {tpath("s1.db"), tpath("old.db")};
    ck_assert_int_eq(rdb_merge(db, mism, 2, &added, &skipped, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "old.db"));
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs"), 0);
    fill("new.db", 20, 21);
    char newer_v[64];
    snprintf(newer_v, sizeof newer_v, "PRAGMA user_version = %d", RDB_SCHEMA_VERSION + 1);
    raw_exec(tpath("new.db"), newer_v);
    const char *newer[] = {tpath("new.db")};
    ck_assert_int_eq(rdb_merge(db, newer, 1, &added, &skipped, &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "newer"));
    const char *half[] = {tpath("s1.db"), tpath("s3.db"), tpath("bad.db")};
    ck_assert_int_ne(rdb_merge(db, half, 3, &added, &skipped, &e), MS_OK);
    sqlfix_counts(rdb_handle(db), "runs=0 metrics=0");
    rdb_close(db);
}
END_TEST

START_TEST(test_metric_names)
{
    ck_assert(rdb_metric_is_accuracy("attn_mass_recall"));
    ck_assert(rdb_metric_is_accuracy("logit_kl"));
    ck_assert(rdb_metric_is_accuracy("attn_out_rel_err"));
    ck_assert(!rdb_metric_is_accuracy("latency_total_s"));
    ck_assert(!rdb_metric_is_accuracy("kept_frac"));
    ck_assert(!rdb_metric_is_accuracy("mass_recall")); /* not registered: no guess */
    ck_assert(rdb_metric_lower_is_better("logit_kl"));
    ck_assert(rdb_metric_lower_is_better("attn_out_rel_err"));
    ck_assert(rdb_metric_lower_is_better("bytes_decode_step"));
    ck_assert(!rdb_metric_lower_is_better("top1_agreement"));
    ck_assert(!rdb_metric_lower_is_better("kl_unknown"));
}
END_TEST

/* Every registered metric has a unit vocabulary word, a meaning and a unique name; the party
 * metrics match only name + digits. */
START_TEST(test_metric_registry)
{
    static const char *const units[] = {"s",     "B",       "ratio", "nats",  "ppl",   "rounds",
                                        "steps", "entries", "ops",   "tok/s", "req/s", ""};
    size_t n;
    const metric_def *d = metric_defs(&n);
    ck_assert_uint_gt(n, 40);
    for (size_t i = 0; i < n; i++) {
        int known = 0;
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
            known |= !strcmp(d[i].unit, units[u]);
        ck_assert_msg(known, "%s: unit '%s'", d[i].name, d[i].unit);
        ck_assert_msg(d[i].meaning && strlen(d[i].meaning) > 10, "%s: no meaning", d[i].name);
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(d[i].name, d[j].name);
        if (!d[i].per_party)
            ck_assert_ptr_eq(metric_def_find(d[i].name), &d[i]);
    }
    ck_assert_ptr_nonnull(metric_def_find("bytes_online_p2"));
    ck_assert_ptr_eq(metric_def_find("bytes_online_p"), NULL);
    ck_assert_ptr_eq(metric_def_find("bytes_online_px"), NULL);
    ck_assert_str_eq(metric_def_find("bytes_online_p0")->unit, "B");
}
END_TEST

/* The database refuses a metric the registry lacks, or one carrying another unit, and writes
 * nothing. */
START_TEST(test_run_unregistered_metric)
{
    fake_run f;
    fake(&f, "s", 1, "ok");
    f.m[1] = (rdb_metric){"latency_made_up_s", 1.0, "s"};
    errbuf e;
    int64_t id = -1;
    ck_assert_int_ne(rdb_run_put(adb, &f.r, &id, &e), MS_OK);
    ck_assert_ptr_nonnull(strstr(e.msg, "latency_made_up_s"));
    fake(&f, "s", 1, "ok");
    f.m[1] = (rdb_metric){"latency_total_s", 1.0, "ms"};
    ck_assert_int_ne(rdb_run_put(adb, &f.r, &id, &e), MS_OK);
    ck_assert_ptr_nonnull(strstr(e.msg, "unit 'ms'"));
    sqlfix_counts(rdb_handle(adb), "runs=0 metrics=0");
}
END_TEST

Suite *rdb_suite(void)
{
    Suite *s = suite_create("rdb");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_open_schema);
    TCase *run = th_case(s, "run", 0);
    TESTDIR_USE(run);
    tcase_add_checked_fixture(run, adb_setup, adb_teardown);
    TH_TESTS(run, test_run_put, test_run_atomic, test_failed_replaced,
             test_run_unregistered_metric);
    TH_TESTS(tc, test_refuse_foreign_and_newer, test_merge, test_merge_refused, test_metric_names,
             test_metric_registry);
    return s;
}
