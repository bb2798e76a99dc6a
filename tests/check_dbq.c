/* check_dbq.c — what `report` and `plot` share about reading results (sim/cli/dbq.h): --where
 * filters run as SQL over a small runs table (columns, config paths, lists, numbers against
 * numbers, quotes), their refusals, human units at every unit boundary, the output width. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sim/cli/dbq.h"

/* Four runs: ids 1..4. */
static sqlite3 *runs_db(void)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(":memory:", &h), SQLITE_OK);
    const char *sql =
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, model TEXT, protocol TEXT, network TEXT, "
        " policy TEXT, policy_label TEXT, prompt_len INTEGER, decode_len INTEGER, batch INTEGER,"
        " latency_ms REAL, bandwidth_mbps REAL, machine TEXT, threads INTEGER, scenario TEXT,"
        " status TEXT, seed INTEGER, grid_index INTEGER, config_hash TEXT, config_json TEXT);"
        "INSERT INTO runs VALUES (1, 'gpt2', 'semi2k', 'lan', 'full', 'full', 64, 4, 1, 0.1,"
        " 10000, 'default', 1, 's', 'ok', 1, 0, 'a', '{\"workload\":{\"decode_stride\":2},"
        " \"policies\":[{\"recent\":8}]}');"
        "INSERT INTO runs VALUES (2, 'gpt2', 'aby3', 'wan', 'h2o', 'h2o(heavy=4)', 128, 4, 1,"
        " 20, 300, 'default', 4, 's', 'ok', 2, 1, 'b', '{\"workload\":{\"decode_stride\":4},"
        " \"policies\":[{\"recent\":16}]}');"
        "INSERT INTO runs VALUES (3, 'llama-2-7b', 'semi2k', 'wan', 'h2o', 'h2o', 64, 8, 2, 20,"
        " 300, 'box', 4, 't', 'failed', 3, 2, 'c', '{\"overlap\":true}');"
        "INSERT INTO runs VALUES (4, 'it''s', 'semi2k', 'lan', 'full', 'full', 1e3, 4, 1, 0.1,"
        " 10000, 'default', 1, 't', 'ok', 4, 3, 'd', '{}');";
    char *err = NULL;
    ck_assert_msg(sqlite3_exec(h, sql, NULL, NULL, &err) == SQLITE_OK, "%s", err);
    return h;
}

/* The ids --where args select, as "1,3" ("" for none); -1 when dbq_where refuses. */
static const char *select_ids(sqlite3 *h, const char *const *args, int n, char *out, size_t cap)
{
    char *where = NULL;
    int rc = dbq_where("report", args, n, &where);
    if (rc) {
        ck_assert_int_eq(rc, 2);
        snprintf(out, cap, "-1");
        return out;
    }
    char sql[2048];
    snprintf(sql, sizeof sql, "SELECT id FROM runs r WHERE 1%s ORDER BY id", where);
    free(where);
    sqlite3_stmt *s;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(h));
    out[0] = '\0';
    while (sqlite3_step(s) == SQLITE_ROW)
        snprintf(out + strlen(out), cap - strlen(out), "%s%lld", out[0] ? "," : "",
                 (long long)sqlite3_column_int64(s, 0));
    sqlite3_finalize(s);
    return out;
}

static const struct {
    const char *args[3];
    const char *ids;
} where_cases[] = {
    {{NULL}, "1,2,3,4"},
    {{"network=wan"}, "2,3"},
    {{"network=wan,lan"}, "1,2,3,4"},
    {{"network=wan", "protocol=semi2k"}, "3"},
    {{"policy_label=h2o(heavy=4)"}, "2"},
    {{"prompt_len=64"}, "1,3"},
    {{"prompt_len=1000"}, "4"}, /* numbers compare as numbers: 1e3 */
    {{"prompt_len=64.0,1e3"}, "1,3,4"},
    {{"latency_ms=0.1"}, "1,4"},
    {{"model=it's"}, "4"},        /* a quote stays a value */
    {{"model=x' OR '1'='1"}, ""}, /* and cannot widen the query */
    {{"status=failed"}, "3"},
    {{"workload.decode_stride=4"}, "2"},
    {{"policies[0].recent=8,16"}, "1,2"},
    {{"overlap=1"}, "3"}, /* JSON true reads as 1 */
    {{"network="}, ""},
    {{"network"}, "-1"}, /* not KEY=VALUE */
    {{"=wan"}, "-1"},
    {{"netwrk=wan"}, "-1"}, /* neither a column nor a path */
    {{"network=wan", "bogus=1"}, "-1"},
    {{"work load.x=1"}, "-1"},
};

START_TEST(test_where)
{
    sqlite3 *h = runs_db();
    int n = 0;
    while (n < 3 && where_cases[_i].args[n])
        n++;
    char got[64];
    select_ids(h, where_cases[_i].args, n, got, sizeof got);
    ck_assert_msg(!strcmp(got, where_cases[_i].ids), "--where %s%s%s: got '%s', want '%s'",
                  n ? where_cases[_i].args[0] : "(none)", n > 1 ? " " : "",
                  n > 1 ? where_cases[_i].args[1] : "", got, where_cases[_i].ids);
    sqlite3_close(h);
}
END_TEST

START_TEST(test_units)
{
    static const struct {
        double v;
        const char *s, *b;
    } c[] = {
        {0, "0 s", "0 B"},
        {5e-7, "0.5 us", "0 B"},
        {0.000999, "999 us", "0 B"},
        {0.001, "1 ms", "0 B"},
        {0.95, "950 ms", "1 B"},
        {1, "1 s", "1 B"},
        {59.9, "59.9 s", "60 B"},
        {60, "1 min", "60 B"},
        {252, "4.2 min", "252 B"},
        {3600, "1 h", "3.6 kB"},
        {11160, "3.1 h", "11.2 kB"},
        {86400, "1 d", "86.4 kB"},
        {999, "16.6 min", "999 B"},
        {1000, "16.7 min", "1 kB"},
        {1.2e9, "1.39e+04 d", "1.2 GB"},
        {4.5e12, "5.21e+07 d", "4.5 TB"},
        {7e18, "8.1e+13 d", "7e+03 PB"},
    };
    char s[64], b[64];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        dbq_seconds(s, sizeof s, c[i].v);
        dbq_bytes(b, sizeof b, c[i].v);
        ck_assert_msg(!strcmp(s, c[i].s), "%g s: '%s', want '%s'", c[i].v, s, c[i].s);
        ck_assert_msg(!strcmp(b, c[i].b), "%g B: '%s', want '%s'", c[i].v, b, c[i].b);
    }
    /* a short buffer is cut, never overrun */
    char tiny[4];
    dbq_bytes(tiny, sizeof tiny, 3.4e3);
    ck_assert_str_eq(tiny, "3.4");
}
END_TEST

START_TEST(test_columns)
{
    ck_assert_int_eq(dbq_columns(132), 132);
    /* on a terminal $COLUMNS; to a file or a pipe 80, whatever $COLUMNS says */
    setenv("COLUMNS", "200", 1);
    int want = isatty(STDOUT_FILENO) ? 200 : 80;
    ck_assert_int_eq(dbq_columns(0), want);
    ck_assert_int_eq(dbq_columns(-5), want);
}
END_TEST

Suite *dbq_suite(void)
{
    Suite *s = suite_create("dbq");
    TCase *tc = th_case(s, "dbq", 0);
    TH_LOOPS(tc, (int)(sizeof where_cases / sizeof where_cases[0]), test_where);
    TH_TESTS(tc, test_units, test_columns);
    return s;
}
