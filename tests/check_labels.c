/* check_labels.c — run labels: a policy's budget always spelled out, one label per
 * configuration, and a database written with older labels labelled again when it is opened or
 * merged, so that older and newer results share their labels. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/rdb.h"
#include "harness.h"
#include "sqlfix.h"

TESTDIR("check_labels")
#define tmpdir (td.dir)
static const char *tpath(const char *name) { return testdir_path(&td, name); }

#define MPCSIM(...) \
    th_runl(tmpdir, tpath("out.txt"), tpath("err.txt"), __VA_ARGS__, (const char *)NULL)

/* A small sweep: a tiny model on a synthetic trace, a preset and a custom network, policies at
 * their default budgets beside ones that set theirs. */
static void write_sweep(const char *file, const char *name, int prompt_len)
{
    char text[2048];
    snprintf(text, sizeof text,
             "format: 1\nname: %s\nseed: 1\nprotocol: semi2k\n"
             "network: [lan, {latency_ms: 20, bandwidth: 300Mbit/s}]\n"
             "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, "
             "vocab: 256, max_context: 512}\n"
             "workload: {prompt_len: %d, decode_len: 2}\ntrace: {source: synth}\n"
             "policies:\n"
             "  - full\n"
             "  - h2o\n"
             "  - {name: h2o, kv_budget: 0.2}\n"
             "  - {name: h2o, heavy: 8}\n"
             "  - quest\n"
             "  - {name: streamingllm, sink: 4}\n",
             name, prompt_len);
    th_write(tpath(file), text);
}

/* How many runs of db have policy_label label. */
static long long with_label(const char *db, const char *label)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE policy_label = '%s'", label);
    return sqlfix_file_int(tpath(db), sql);
}

START_TEST(test_budget_labels)
{
    write_sweep("s.yaml", "lab", 48);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "s.db", "-q"), 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("s.db"), "SELECT count(*) FROM runs"), 12);
    /* a policy without a budget stays bare; every other names the budget it had */
    ck_assert_int_eq(with_label("s.db", "full"), 2);
    ck_assert_int_eq(with_label("s.db", "h2o(heavy_ratio=0.1,recent_ratio=0.1)"), 2);
    ck_assert_int_eq(with_label("s.db", "h2o@20%"), 2);
    /* a token count in force: the fraction it replaces is not named */
    ck_assert_int_eq(with_label("s.db", "h2o(recent_ratio=0.1,heavy=8)"), 2);
    ck_assert_int_eq(with_label("s.db", "quest(budget=1024,min_pages=3,skip_layers=2)"), 2);
    ck_assert_int_eq(with_label("s.db", "streamingllm(recent=512)"), 2);
    ck_assert_int_eq(sqlfix_file_int(tpath("s.db"), "SELECT count(*) FROM runs WHERE policy_label "
                                                    "= policy AND policy != 'full'"),
                     0);
    /* one label per configuration */
    ck_assert_int_eq(sqlfix_file_int(tpath("s.db"),
                                     "SELECT count(*) FROM (SELECT DISTINCT policy_label, "
                                     "network FROM runs)"),
                     12);
    ck_assert_int_eq(sqlfix_file_int(tpath("s.db"), "SELECT count(DISTINCT network) FROM runs "
                                                    "WHERE network IN ('lan', '20ms/300 Mbit/s')"),
                     2);
    /* the report shows them */
    ck_assert_int_eq(MPCSIM("report", "s.db", "--csv"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_int_eq(th_count(out, "h2o(heavy_ratio=0.1,recent_ratio=0.1)"), 2);
    free(out);
    /* at 80 columns the long labels wrap before the first accuracy metric is left out */
    ck_assert_int_eq(MPCSIM("report", "s.db", "--columns", "80"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_msg(strstr(out, "recall") && !strstr(out, "attn_mass_recall;") &&
                      !strstr(out, "attn_mass_recall,"),
                  "%s", out);
    for (const char *l = out; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0'))
        ck_assert_msg(strcspn(l, "\n") <= 80, "over 80 columns: %.*s", (int)strcspn(l, "\n"), l);
    free(out);
}
END_TEST

/* old.db: a sweep as an mpcsim of schema version 4 stored it — a policy at its default budget
 * labelled bare, a custom network's rate written "300Mbps". Built from a run of this mpcsim
 * with the older labels written over (the tables of version 4 are those of version 5). */
static void make_old(const char *db)
{
    write_sweep("old.yaml", "old", 48);
    ck_assert_int_eq(MPCSIM("run", "old.yaml", "-o", db, "-q"), 0);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(tpath(db), &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h,
                                  "UPDATE runs SET network = '20ms/300Mbps' WHERE network = "
                                  "'20ms/300 Mbit/s';"
                                  "UPDATE runs SET policy_label = policy WHERE policy_label IN "
                                  "('h2o(heavy_ratio=0.1,recent_ratio=0.1)', "
                                  "'quest(budget=1024,min_pages=3,skip_layers=2)');"
                                  "UPDATE runs SET policy_label = 'h2o(heavy=8)' WHERE "
                                  "policy_label = 'h2o(recent_ratio=0.1,heavy=8)';"
                                  "UPDATE runs SET policy_label = 'streamingllm(sink=4)' WHERE "
                                  "policy = 'streamingllm';"
                                  "PRAGMA journal_mode = DELETE; PRAGMA user_version = 4;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    ck_assert_int_eq(with_label(db, "h2o"), 2);
    ck_assert_int_eq(sqlfix_file_int(tpath(db), "SELECT count(*) FROM runs WHERE network = "
                                                "'20ms/300Mbps'"),
                     6);
}

/* The labels of db are this mpcsim's: one per network and per policy configuration. */
static void assert_one_label_each(const char *db, int runs)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs");
    ck_assert_int_eq(sqlfix_file_int(tpath(db), sql), runs);
    ck_assert_int_eq(sqlfix_file_int(tpath(db), "SELECT count(DISTINCT network) FROM runs"), 2);
    ck_assert_int_eq(sqlfix_file_int(tpath(db), "SELECT count(*) FROM runs WHERE network = "
                                                "'20ms/300 Mbit/s'"),
                     runs / 2);
    ck_assert_int_eq(sqlfix_file_int(tpath(db), "SELECT count(DISTINCT policy_label) FROM runs"),
                     6);
    ck_assert_int_eq(with_label(db, "h2o"), 0);
    ck_assert_int_eq(with_label(db, "h2o(heavy_ratio=0.1,recent_ratio=0.1)"), runs / 6);
    ck_assert_int_eq(with_label(db, "h2o(recent_ratio=0.1,heavy=8)"), runs / 6);
    ck_assert_int_eq(with_label(db, "quest(budget=1024,min_pages=3,skip_layers=2)"), runs / 6);
    ck_assert_int_eq(with_label(db, "streamingllm(recent=512)"), runs / 6);
}

START_TEST(test_old_labels_merge)
{
    make_old("old.db");
    write_sweep("new.yaml", "new", 64);
    ck_assert_int_eq(MPCSIM("run", "new.yaml", "-o", "new.db", "-q"), 0);
    /* a reader labels a copy in memory; the file keeps its version and labels */
    ck_assert_int_eq(MPCSIM("report", "old.db", "--csv"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_int_eq(th_count(out, "300Mbps"), 0);
    ck_assert_int_eq(th_count(out, "20ms/300 Mbit/s"), 6);
    ck_assert_int_eq(th_count(out, "h2o(heavy_ratio=0.1,recent_ratio=0.1)"), 2);
    free(out);
    ck_assert_int_eq(sqlfix_file_int(tpath("old.db"), "PRAGMA user_version"), 4);
    ck_assert_int_eq(with_label("old.db", "h2o"), 2);
    /* merged as an input: its runs come in labelled again */
    ck_assert_int_eq(MPCSIM("merge", "m.db", "old.db", "new.db"), 0);
    assert_one_label_each("m.db", 24);
    ck_assert_int_eq(sqlfix_file_int(tpath("old.db"), "PRAGMA user_version"), 4);
    /* as the output: migrated in place, then the newer runs merged into it */
    ck_assert_int_eq(MPCSIM("merge", "old.db", "new.db"), 0);
    ck_assert_int_eq(sqlfix_file_int(tpath("old.db"), "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    assert_one_label_each("old.db", 24);
}
END_TEST

/* results/ alone (no labeler to read a config again) still writes the rate as the labels do. */
START_TEST(test_old_labels_bare)
{
    make_old("old.db");
    rdb_set_labeler(NULL);
    rdb *db = sqlfix_rdb_new(tpath("old.db"));
    ck_assert_int_eq(rdb_close(db), MS_OK);
    ck_assert_int_eq(sqlfix_file_int(tpath("old.db"), "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    ck_assert_int_eq(sqlfix_file_int(tpath("old.db"), "SELECT count(*) FROM runs WHERE network = "
                                                      "'20ms/300 Mbit/s'"),
                     6);
    ck_assert_int_eq(sqlfix_file_int(tpath("old.db"), "SELECT count(DISTINCT network) FROM runs"),
                     2);
}
END_TEST

Suite *labels_suite(void)
{
    Suite *s = suite_create("labels");
    TCase *tc = th_case(s, "labels", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_budget_labels, test_old_labels_merge, test_old_labels_bare);
    return s;
}
