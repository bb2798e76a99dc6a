/* check_results.c — results a researcher reads and queries: run labels and the schema-3
 * columns (policy_label, network values, machine, config_json, runs_wide), the migration of a
 * database written at schema version 2 (tests/data/results-v2.db), `report` (width, units,
 * --failed, --json, serve tables, exit codes), JSON written through jansson (cost --json and
 * the timeline with a model name holding quotes and backslashes). */
#include <check.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results/rdb.h"
#include "results/serve_db.h"
#include "sim/cli/progress.h"
#include "sim/scenario/runlabel.h"
#include "harness.h"
#include "sqlfix.h"

TESTDIR("check_results")
#define tmpdir (td.dir)
static const char *tpath(const char *name) { return testdir_path(&td, name); }

#define MPCSIM(...) \
    th_runl(tmpdir, tpath("out.txt"), tpath("err.txt"), __VA_ARGS__, (const char *)NULL)

static char *q1s(const char *db, const char *sql) { return sqlfix_file_text(db, sql, 0); }
static long long q1(const char *db, const char *sql) { return sqlfix_file_int(db, sql); }

/* Writes yaml to the scenario file name, runs it into the database db (quietly, exit status
 * 0) and returns the database's path. */
static const char *run_into(const char *name, const char *yaml, const char *db)
{
    th_write(tpath(name), yaml);
    ck_assert_int_eq(MPCSIM("run", name, "-o", db, "-q"), 0);
    return tpath(db);
}

static void expect(const char *db, const char *sql, const char *want)
{
    char *v = q1s(db, sql);
    ck_assert_msg(!strcmp(v, want), "%s: got '%s', want '%s'", sql, v, want);
    free(v);
}

/* The model name the tests carry through YAML, SQLite, text and JSON. */
#define ODD_NAME "tiny\"q\\b-mha"

/* 3 networks × 3 policy configurations of a small inline model (2 layers, 4 decode steps) in
 * 2PC, and one 3PC run on a network whose links differ. */
static const char labels_yaml[] =
    "format: 1\n"
    "name: labels\n"
    "seed: 1\n"
    "model: {name: 'tiny\"q\\b-mha', family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128,"
    " vocab: 256, max_context: 512}\n"
    "workload: {prompt_len: 32, decode_len: 4}\n"
    "cases:\n"
    "  - protocol: semi2k\n"
    "    network: [lan, 20ms/300Mbps, {name: grid, latency_ms: 1, bandwidth_mbps: 1000,\n"
    "              links: {0-1: {latency_ms: 30, bandwidth_mbps: 50}}}]\n"
    "    policies:\n"
    "      - full\n"
    "      - {name: streamingllm, sink: 4, recent: [8, 16]}\n"
    "  - protocol: aby3\n"
    "    network: {name: lopsided, latency_ms: 1, bandwidth_mbps: 1000,\n"
    "              links: {0-2: {latency_ms: 75, bandwidth_mbps: 200}}}\n"
    "    policies: [full]\n";

/* ---- labels and the schema-3 columns --------------------------------------------------- */

START_TEST(test_labels_and_columns)
{
    const char *db = run_into("labels.yaml", labels_yaml, "l.db");
    ck_assert_int_eq(q1(db, "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs"), 10);
    /* three policy configurations told apart; the defaults (sink: 4) left out */
    ck_assert_int_eq(q1(db, "SELECT count(DISTINCT policy_label) FROM runs"), 3);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE policy_label = "
                            "'streamingllm(recent=8)'"),
                     3);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE policy_label = "
                            "'streamingllm(recent=16)'"),
                     3);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE policy_label = 'full'"), 4);
    /* networks by preset or by value, never 'custom'; the lopsided one by its own name */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE network = 'custom'"), 0);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE network = '20ms/300 Mbit/s' AND "
                            "latency_ms = 20 AND bandwidth_mbps = 300"),
                     3);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE network = 'lan' AND "
                            "latency_ms = 0.1 AND bandwidth_mbps = 10000"),
                     3);
    /* every link the same: by value, whatever the name; links that differ: the name, and the
     * slowest link's latency and the smallest bandwidth as the columns */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE network = '30ms/50 Mbit/s' AND "
                            "latency_ms = 30 AND bandwidth_mbps = 50"),
                     3);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE network = 'lopsided' AND "
                            "latency_ms = 75 AND bandwidth_mbps = 200 AND protocol = 'aby3'"),
                     1);
    /* the user's model name, quotes and backslash included */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE model = 'tiny\"q\\b-mha'"), 10);
    /* the machine profile as resolved (its name as the config holds it) and its threads */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE machine <> '' AND machine = "
                            "json_extract(config_json, '$.machine.name') AND threads = "
                            "json_extract(config_json, '$.machine.threads') AND threads >= 1"),
                     10);
    /* config_json: the resolved config, queryable */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE json_valid(config_json)"), 10);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE "
                            "json_extract(config_json, '$.policies[0].recent') = 16"),
                     3);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE "
                            "json_extract(config_json, '$.workload.prompt_len') = 32 AND "
                            "json_extract(config_json, '$.overlap') = 0 AND "
                            "json_type(config_json, '$.overlap') = 'false'"),
                     10);
    expect(db, "SELECT DISTINCT json_extract(config_json, '$.model.name') FROM runs", ODD_NAME);
    /* runs_wide: one row per run, the metrics as columns, equal to the metrics table */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs_wide"), 10);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs_wide w JOIN metrics m ON m.run_id = w.id "
                            "AND m.name = 'latency_total_s' WHERE w.latency_total_s = m.value "
                            "AND w.latency_total_s > 0"),
                     10);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs_wide w JOIN metrics m ON m.run_id = w.id "
                            "AND m.name = 'bytes_online' WHERE w.bytes_online = m.value"),
                     10);
    /* the dry run speaks the same labels */
    ck_assert_int_eq(MPCSIM("run", "labels.yaml", "--dry-run"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "20ms/300 Mbit/s streamingllm(recent=16)"));
    ck_assert_ptr_null(strstr(out, "custom"));
    free(out);
}
END_TEST

/* ---- migration of a version-2 database -------------------------------------------------- */

/* A reader leaves an older database as it is (it migrates a copy in memory); a writer
 * migrates the file: here `merge`, which migrates its output, given an empty database. */
static void migrate_by_writer(const char *name, int old_version)
{
    ck_assert_int_eq(q1(tpath(name), "PRAGMA user_version"), old_version);
    rdb *db;
    errbuf e;
    ck_assert_msg(rdb_open(tpath("none.db"), 1, &db, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(rdb_close(db), MS_OK);
    ck_assert_int_eq(MPCSIM("merge", name, "none.db", "-q"), 0);
}

static void v2_copy(const char *name)
{
    th_copy(th_data_path("tests/data/results-v2.db"), tpath(name));
    ck_assert_int_eq(q1(tpath(name), "PRAGMA user_version"), 2);
}

START_TEST(test_migrate_v2)
{
    /* by the CLI, which re-reads each stored config for its labels */
    v2_copy("v2.db");
    const char *db = tpath("v2.db");
    long long metrics = q1(db, "SELECT count(*) FROM metrics"),
              layers = q1(db, "SELECT count(*) FROM layer_breakdown");
    ck_assert_int_gt(metrics, 0);
    expect(db, "SELECT count(*) FROM runs WHERE model = 'inline'", "8");
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--json"), 0);
    migrate_by_writer("v2.db", 2);
    ck_assert_int_eq(q1(db, "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs"), 8);
    /* these runs predate the msb, exp and normalize keys: they ran the former defaults */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE protocol_label = "
                            "'semi2k(msb=ks,exp=taylor,normalize=thresholds)'"),
                     8);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM metrics"), metrics);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM layer_breakdown"), layers);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE model = 'tiny\"q\\b-mha'"), 8);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE policy_label = "
                            "'streamingllm(recent=8)' AND network = '20ms/300 Mbit/s' AND "
                            "latency_ms = 20 AND bandwidth_mbps = 300"),
                     1);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE policy_label = 'snapkv(capacity=16)'"
                            " AND status = 'failed' AND error LIKE '%needs a trace%'"),
                     2);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE json_valid(config_json) AND "
                            "machine = 'default' AND threads = 1"),
                     8);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs_wide WHERE latency_total_s > 0"), 6);
    /* the migrated database merges into a new one */
    ck_assert_int_eq(MPCSIM("merge", "m.db", "v2.db"), 0);
    ck_assert_int_eq(q1(tpath("m.db"), "SELECT count(*) FROM runs WHERE policy_label = "
                                       "'streamingllm(recent=16)'"),
                     2);

    /* without a labeler (results/ alone): the JSON's values, the network by its values */
    v2_copy("bare.db");
    rdb *h;
    errbuf e;
    rdb_set_labeler(NULL);
    ck_assert_int_eq(rdb_open(tpath("bare.db"), 0, &h, &e), MS_OK);
    rdb_close(h);
    db = tpath("bare.db");
    ck_assert_int_eq(q1(db, "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE protocol_label = protocol"), 8);
    /* results/ alone (its SQL) spells the rate as the labeler does */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE network = '20ms/300 Mbit/s' AND "
                            "latency_ms = 20 AND bandwidth_mbps = 300"),
                     4);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE policy_label = policy"), 8);
}
END_TEST

/* ---- protocol labels and the migration of a version-3 database --------------------------- */

static void check_width(const char *text, size_t width);
static void legend_entries(const char *gp, char *out, size_t n);
static void gp_set(const char *gp, const char *what, int k, char *out, size_t n);

/* One model, one network, one policy: the runs differ only in protocol options. */
static const char protos_yaml[] =
    "format: 1\n"
    "name: protos\n"
    "seed: 1\n"
    "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, vocab: 256,"
    " max_context: 512}\n"
    "workload: {prompt_len: [16, 32], decode_len: 2}\n"
    "network: lan\n"
    "policies: [full]\n"
    "protocol: [aby3, {name: aby3, topk: quickselect}, {name: aby3, trunc: local, topk: "
    "quickselect}, {name: semi2k, beaver_cache: false}]\n";

static const char *const proto_labels[] = {"aby3", "aby3(topk=quickselect)",
                                           "aby3(trunc=local,topk=quickselect)",
                                           "semi2k(beaver_cache=false)"};

/* Each of the four labels on two runs (the two prompt lengths). */
static void expect_proto_labels(const char *db)
{
    ck_assert_int_eq(q1(db, "SELECT count(DISTINCT protocol_label) FROM runs"), 4);
    for (int i = 0; i < 4; i++) {
        char *sql =
            sqlite3_mprintf("SELECT count(*) FROM runs WHERE protocol_label = %Q", proto_labels[i]);
        ck_assert_msg(q1(db, sql) == 2, "%s", sql);
        sqlite3_free(sql);
    }
}

/* A database as schema version 3 wrote it: no protocol_label, the view without it. */
static void downgrade_to_v3(const char *path)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    char *view = q1s(path, "SELECT sql FROM sqlite_master WHERE name = 'runs_wide'");
    char *at = strstr(view, "r.protocol_label, ");
    ck_assert_ptr_nonnull(at);
    memmove(at, at + strlen("r.protocol_label, "), strlen(at + strlen("r.protocol_label, ")) + 1);
    char *sql = sqlite3_mprintf("DROP VIEW runs_wide; DROP INDEX runs_protocol_label; "
                                "ALTER TABLE runs DROP COLUMN protocol_label; %s; "
                                "PRAGMA user_version = 3;",
                                view);
    ck_assert_msg(sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    sqlite3_free(sql);
    free(view);
    sqlite3_close(h);
    ck_assert_int_eq(q1(path, "SELECT count(*) FROM pragma_table_info('runs') WHERE name = "
                              "'protocol_label'"),
                     0);
}

START_TEST(test_protocol_labels)
{
    const char *db = run_into("protos.yaml", protos_yaml, "pr.db");
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 8);
    expect_proto_labels(db);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs_wide WHERE protocol_label = "
                            "'aby3(topk=quickselect)'"),
                     2);
    ck_assert_int_eq(MPCSIM("run", "protos.yaml", "--dry-run"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, " tiny aby3(trunc=local,topk=quickselect) lan full "));
    free(out);
    /* report: a row per configuration, each named; 80 columns */
    ck_assert_int_eq(MPCSIM("report", "pr.db"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    check_width(out, 80);
    for (int i = 0; i < 4; i++) {
        char cell[64];
        snprintf(cell, sizeof cell, "  %s  ", proto_labels[i]);
        ck_assert_msg(strstr(out, cell), "no '%s' in\n%s", cell, out);
    }
    free(out);
    ck_assert_int_eq(
        MPCSIM("report", "pr.db", "--csv", "--where", "protocol_label=aby3(topk=quickselect)"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, ",aby3(topk=quickselect),"));
    ck_assert_ptr_null(strstr(out, ",aby3,"));
    free(out);
    /* plot: a line per protocol configuration */
    ck_assert_int_eq(MPCSIM("plot", "pr.db", "-o", "prp", "--data", "prd"), 0);
    char t[512];
    legend_entries(tpath("prd/latency.gp"), t, sizeof t);
    ck_assert_str_eq(t, "full aby3|full aby3(topk=quickselect)|"
                        "full aby3(trunc=local,topk=quickselect)|full semi2k(beaver_cache=false)");

    /* a version-3 database migrates in place: the labels from the stored configs */
    ck_assert_int_eq(MPCSIM("merge", "v3.db", "pr.db"), 0);
    downgrade_to_v3(tpath("v3.db"));
    long long metrics = q1(tpath("v3.db"), "SELECT count(*) FROM metrics");
    ck_assert_int_eq(MPCSIM("report", "v3.db"), 0);
    db = tpath("v3.db");
    migrate_by_writer("v3.db", 3);
    ck_assert_int_eq(q1(db, "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    expect_proto_labels(db);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM metrics"), metrics);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs_wide WHERE protocol_label = "
                            "'semi2k(beaver_cache=false)'"),
                     2);
    /* without a labeler: the bare names */
    ck_assert_int_eq(MPCSIM("merge", "v3b.db", "pr.db"), 0);
    downgrade_to_v3(tpath("v3b.db"));
    rdb *h;
    errbuf e;
    rdb_set_labeler(NULL);
    ck_assert_int_eq(rdb_open(tpath("v3b.db"), 0, &h, &e), MS_OK);
    rdb_close(h);
    ck_assert_int_eq(q1(tpath("v3b.db"), "SELECT count(*) FROM runs WHERE protocol_label = "
                                         "protocol"),
                     8);
}
END_TEST

/* ---- runs the labels would merge ------------------------------------------------------------ */

/* Pairs of runs whose labels (before schema 4) were the same: a trace seed, a machine's rate,
 * a shipped model with a key replaced, a network's framing, the threads on the plot. */
static const char hidden_yaml[] =
    "format: 1\n"
    "name: hidden\n"
    "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, vocab: 256,"
    " max_context: 512}\n"
    "protocol: semi2k\n"
    "network: lan\n"
    "workload: {prompt_len: 32, decode_len: 2}\n"
    "policies: [full]\n"
    "cases:\n"
    "  - seed: [1, 2]\n"
    "    trace: {source: synth}\n"
    "    policies: [{name: h2o, heavy_ratio: 0.1, recent_ratio: 0.1}]\n"
    "  - network: {preset: lan, wire: [none, tcp]}\n"
    "  - machine: {base: default, mac_per_s: [1e9, 2e9]}\n"
    "  - model: [stories260K, {base: stories260K, layers: 2}]\n"
    "  - {machine: {base: default, threads: [1, 4]}, network: wan}\n";

START_TEST(test_hidden_differences)
{
    const char *db = run_into("hidden.yaml", hidden_yaml, "h.db");
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 10);
    /* the model and the network say what was changed */
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE model = 'stories260K'"), 1);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE model = 'stories260K(layers=2)'"), 1);
    ck_assert_int_eq(q1(db, "SELECT count(*) FROM runs WHERE network LIKE '% tcp' AND "
                            "json_extract(config_json, '$.network.wire.mtu') = 1500"),
                     1);
    /* report: the config keys that still tell rows apart, in 80 columns */
    ck_assert_int_eq(MPCSIM("report", "h.db"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    check_width(out, 80);
    ck_assert_msg(strstr(out, "seed=1") && strstr(out, "seed=2"), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "mac_per_s=1000000000"));
    ck_assert_ptr_nonnull(strstr(out, "mac_per_s=2000000000"));
    ck_assert_ptr_null(strstr(out, "variant ,"));
    ck_assert_ptr_null(strstr(out, "machine.mac_per_s")); /* a key by its last part */
    ck_assert_ptr_nonnull(strstr(out, "== model stories260K(layers=2) (1 run)"));
    free(out);
    ck_assert_int_eq(MPCSIM("report", "h.db", "--csv"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, ",variant\n"));
    ck_assert_ptr_nonnull(strstr(out, ",seed=2\n"));
    free(out);
    /* plot: a line each; the threads as a series key when they vary */
    char t[512];
    ck_assert_int_eq(MPCSIM("plot", "h.db", "-o", "hp", "--data", "hw", "--where", "network=wan"),
                     0);
    legend_entries(tpath("hw/latency.gp"), t, sizeof t);
    ck_assert_str_eq(t, "full default 1t|full default 4t");
    ck_assert_int_eq(MPCSIM("plot", "h.db", "-o", "hp", "--data", "hs", "--where", "policy=h2o"),
                     0);
    legend_entries(tpath("hs/latency.gp"), t, sizeof t);
    ck_assert_str_eq(t, "h2o(heavy_ratio=0.1,recent_ratio=0.1) seed=1|"
                        "h2o(heavy_ratio=0.1,recent_ratio=0.1) seed=2");
    char *gp = th_slurp(tpath("hs/latency.gp"), NULL); /* the legend says what a line is */
    ck_assert_ptr_nonnull(strstr(gp, "a marker per policy, seed\""));
    free(gp);
    char v[256];
    ck_assert_int_eq(MPCSIM("plot", "h.db", "-o", "hp", "--data", "hm", "--by", "machine",
                            "--where", "network=wan"),
                     0);
    gp_set(tpath("hm/latency.gp"), "title", 1, v, sizeof v);
    ck_assert_ptr_nonnull(strstr(v, "default 1t"));
    /* the network's values on x: the framing stays in the line's name; only the lines that
     * would merge name a key */
    ck_assert_int_eq(MPCSIM("plot", "h.db", "-o", "hp", "--data", "hx", "--x", "latency_ms",
                            "--where", "model=tiny", "--where", "policy=full"),
                     0);
    legend_entries(tpath("hx/latency.gp"), t, sizeof t);
    ck_assert_str_eq(t, "full 10 Gbit/s default 16t mac_per_s=1000000000|"
                        "full 10 Gbit/s default 16t mac_per_s=2000000000|"
                        "full 10 Gbit/s default 16t mac_per_s=2886000000|"
                        "full 10 Gbit/s tcp default 16t|full 100 Mbit/s default 1t|"
                        "full 100 Mbit/s default 4t");
    /* a version-3 database: the model labelled again from its stored config */
    ck_assert_int_eq(MPCSIM("merge", "h3.db", "h.db"), 0);
    downgrade_to_v3(tpath("h3.db"));
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(tpath("h3.db"), &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h,
                                  "UPDATE runs SET model = 'stories260K' WHERE model LIKE "
                                  "'stories260K%'; UPDATE runs SET network = '0.1ms/10Gbps' "
                                  "WHERE network LIKE '% tcp'",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    ck_assert_int_eq(MPCSIM("report", "h3.db"), 0);
    migrate_by_writer("h3.db", 3);
    ck_assert_int_eq(q1(tpath("h3.db"), "SELECT count(*) FROM runs WHERE model = "
                                        "'stories260K(layers=2)'"),
                     1);
    ck_assert_int_eq(q1(tpath("h3.db"), "SELECT count(*) FROM runs WHERE network = "
                                        "'0.1ms/10 Gbit/s tcp'"),
                     1);
}
END_TEST

/* ---- report ------------------------------------------------------------------------------ */

static void check_width(const char *text, size_t width)
{
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n"), w = 0;
        for (size_t i = 0; i < n; i++)
            w += ((unsigned char)p[i] & 0xc0) != 0x80;
        ck_assert_msg(w <= width, "line of %zu columns (> %zu): %.*s", w, width, (int)n, p);
        p += n + (p[n] == '\n');
    }
}

START_TEST(test_report)
{
    v2_copy("v2.db");
    /* not a terminal: 80 columns; human units; no exponent; the failure pointed at */
    ck_assert_int_eq(MPCSIM("report", "v2.db"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    check_width(out, 80);
    ck_assert_ptr_null(strstr(out, "e+"));
    ck_assert_ptr_nonnull(strstr(out, "streamingllm(recent=16)"));
    ck_assert_ptr_nonnull(strstr(out, "20ms/300 Mbit/s"));
    ck_assert_ptr_nonnull(strstr(out, " ms") ? strstr(out, " ms") : strstr(out, " s "));
    ck_assert_ptr_nonnull(strstr(out, "kB") ? strstr(out, "kB") : strstr(out, "MB"));
    ck_assert_ptr_nonnull(strstr(out, "2 failed (why: mpcsim report v2.db --failed)"));
    ck_assert_ptr_null(strstr(out, "SELECT"));
    free(out);
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--columns", "50"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    check_width(out, 50);
    ck_assert_ptr_nonnull(strstr(out, "not shown for the width"));
    free(out);
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--columns", "250"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_null(strstr(out, "not shown for the width"));
    ck_assert_ptr_nonnull(strstr(out, "rounds"));
    ck_assert_ptr_nonnull(strstr(out, "offline"));
    free(out);
    /* --failed: the error text itself, wrapped */
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--failed", "--columns", "60"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    check_width(out, 60);
    ck_assert_ptr_nonnull(strstr(out, "needs a trace"));
    ck_assert_ptr_nonnull(strstr(out, "snapkv(capacity=16)"));
    ck_assert_ptr_nonnull(strstr(out, "2 failed runs"));
    free(out);
    /* --where narrows; a bad key is refused with a hint */
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--csv", "--where", "network=lan", "--where",
                            "policy_label=full,streamingllm(recent=8)"),
                     0);
    out = th_slurp(tpath("out.txt"), NULL);
    int lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 1 + 2);
    free(out);
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--where", "netwrk=lan"), 2);
    out = th_slurp(tpath("err.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "did you mean 'network'"));
    free(out);
    /* exit codes as --help says; no source location in any message */
    ck_assert_int_eq(MPCSIM("report", "missing.db"), 2);
    out = th_slurp(tpath("err.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "missing.db"));
    ck_assert_ptr_null(strstr(out, ".c:"));
    free(out);
    th_write(tpath("junk.db"), "not a database at all, but long enough to be read as one......\n");
    ck_assert_int_eq(MPCSIM("report", "junk.db"), 2);
    out = th_slurp(tpath("err.txt"), NULL);
    ck_assert_ptr_null(strstr(out, ".c:"));
    free(out);
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--metrics", "attn_mass_recal"), 2);
    ck_assert_int_eq(MPCSIM("report"), 2);
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--columns", "x"), 2);
    ck_assert_int_eq(MPCSIM("report", "--help"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "exit status: 0 ok; 1"));
    check_width(out, 80);
    free(out);
}
END_TEST

START_TEST(test_report_json_and_serve)
{
    v2_copy("v2.db");
    /* a serving run beside the sweep's runs (opening migrates, with the CLI's labeler) */
    rdb *db;
    errbuf e;
    rdb_set_labeler(run_labels_from_yaml);
    ck_assert_int_eq(rdb_open(tpath("v2.db"), 0, &db, &e), MS_OK);
    ck_assert_int_eq(sdb_init(db, &e), MS_OK);
    sdb_metric m[3] = {
        {"ttft_p50", 12.5, "s"}, {"ttft_p99", 4000, "s"}, {"token_hit_rate", 0.42, ""}};
    sdb_run r = {.scenario = "rag",
                 .policy = "prefix",
                 .model = ODD_NAME,
                 .protocol = "semi2k",
                 .network = "wan",
                 .scheduler = "fcfs",
                 .rate = 0.01,
                 .seed = 1,
                 .n_requests = 20,
                 .batch = 4,
                 .chunk = 0,
                 .config = "x: 1\n",
                 .metric = m,
                 .n_metric = 3};
    ck_assert_int_eq(sdb_put_run(db, &r, NULL, &e), MS_OK);
    sdb_leak l = {.scenario = "rag",
                  .policy = "prefix",
                  .channel = "ttft",
                  .scheduler = "fcfs",
                  .trials = 100,
                  .correct = 90,
                  .candidates = 2,
                  .success_rate = 0.9,
                  .chance = 0.5,
                  .p_value = 1e-9,
                  .bits = 0.5};
    ck_assert_int_eq(sdb_put_leak(db, &l, &e), MS_OK);
    rdb_close(db);
    ck_assert_int_eq(MPCSIM("report", "v2.db"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    check_width(out, 80);
    ck_assert_ptr_nonnull(strstr(out, "serving runs"));
    ck_assert_ptr_nonnull(strstr(out, "1.11 h")); /* the p99 TTFT, 4000 s */
    ck_assert_ptr_nonnull(strstr(out, "36/h"));   /* 0.01 requests/s */
    ck_assert_ptr_nonnull(strstr(out, "timing attacks"));
    free(out);
    /* --json parses back, with the odd name intact everywhere */
    ck_assert_int_eq(MPCSIM("report", "v2.db", "--json"), 0);
    json_error_t je;
    json_t *j = json_load_file(tpath("out.txt"), 0, &je);
    ck_assert_msg(j != NULL, "report --json: %s at line %d", je.text, je.line);
    json_t *runs = json_object_get(j, "runs");
    ck_assert_uint_eq(json_array_size(runs), 8);
    size_t i;
    json_t *run;
    int failed = 0;
    json_array_foreach(runs, i, run)
    {
        ck_assert_str_eq(json_string_value(json_object_get(run, "model")), ODD_NAME);
        json_t *cfg = json_object_get(json_object_get(run, "config"), "model");
        ck_assert_ptr_nonnull(cfg);
        ck_assert_str_eq(json_string_value(json_object_get(cfg, "name")), ODD_NAME);
        if (!strcmp(json_string_value(json_object_get(run, "status")), "failed")) {
            failed++;
            ck_assert_ptr_nonnull(
                strstr(json_string_value(json_object_get(run, "error")), "needs a trace"));
        } else {
            ck_assert(json_real_value(
                          json_object_get(json_object_get(run, "metrics"), "latency_total_s")) > 0);
        }
    }
    ck_assert_int_eq(failed, 2);
    json_t *sr = json_object_get(j, "serve_runs");
    ck_assert_uint_eq(json_array_size(sr), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sr, 0), "model")), ODD_NAME);
    ck_assert(json_real_value(json_object_get(json_object_get(json_array_get(sr, 0), "metrics"),
                                              "ttft_p99")) == 4000);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "serve_leak")), 1);
    json_decref(j);
}
END_TEST

/* ---- JSON through a JSON library --------------------------------------------------------- */

/* A finished run of scenario for the plot tests: grid index idx, 8 decode steps of batch 1,
 * two phases, nb breakdown rows; the caller sets the policy and what else it varies. */
static rdb_run fixture_run(const char *scenario, int idx, const char *hash, const char *model,
                           const char *protocol, const char *network, double latency_ms,
                           double bandwidth_mbps, uint32_t prompt_len, rdb_phase *ph,
                           rdb_breakdown *bd, size_t nb)
{
    return (rdb_run){.scenario = scenario,
                     .grid_index = (uint64_t)idx,
                     .config_hash = hash,
                     .config_yaml = "x: 1\n",
                     .seed = 1,
                     .status = "ok",
                     .started = "t",
                     .finished = "t",
                     .tool_version = "test",
                     .model = model,
                     .protocol = protocol,
                     .network = network,
                     .latency_ms = latency_ms,
                     .bandwidth_mbps = bandwidth_mbps,
                     .prompt_len = prompt_len,
                     .decode_len = 8,
                     .batch = 1,
                     .phase = ph,
                     .n_phase = 2,
                     .breakdown = bd,
                     .n_breakdown = nb};
}

START_TEST(test_cost_json_odd_name)
{
    th_write(tpath("odd.yaml"),
             "format: mpcsim-model 1\n"
             "name: 'tiny\"q\\b-mha'\n"
             "family: llama\nlayers: 2\ndim: 64\nheads: 4\nkv_heads: 2\nhead_dim: 16\n"
             "ffn_dim: 128\nactivation: swiglu\nnorm: rmsnorm\npositional: rope\n"
             "vocab: 256\nmax_context: 512\n");
    ck_assert_int_eq(MPCSIM("cost", "--model", "odd.yaml", "--protocol", "aby3", "--network",
                            "20ms/300Mbps", "--kv", "64", "--json", "--timeline", "tl.json"),
                     0);
    json_error_t je;
    json_t *j = json_load_file(tpath("out.txt"), 0, &je);
    ck_assert_msg(j != NULL, "cost --json: %s at line %d", je.text, je.line);
    ck_assert_str_eq(json_string_value(json_object_get(j, "model")), ODD_NAME);
    json_t *bytes = json_object_get(json_object_get(j, "total"), "bytes_sent");
    ck_assert_uint_eq(json_array_size(bytes), 3);
    json_int_t sum = 0;
    for (size_t i = 0; i < 3; i++)
        sum += json_integer_value(json_array_get(bytes, i));
    ck_assert_int_eq(sum, json_integer_value(json_object_get(j, "bytes_online")));
    ck_assert_int_gt(sum, 0);
    ck_assert(json_is_true(json_object_get(j, "overlap")) ||
              json_is_false(json_object_get(j, "overlap")));
    json_decref(j);
    /* the timeline: Chrome's trace format, times in µs that read back exactly to the ns */
    j = json_load_file(tpath("tl.json"), 0, &je);
    ck_assert_msg(j != NULL, "timeline: %s at line %d", je.text, je.line);
    json_t *ev = json_object_get(j, "traceEvents"), *x;
    ck_assert_uint_gt(json_array_size(ev), 100);
    size_t i, sends = 0;
    json_array_foreach(ev, i, x)
    {
        const char *ph = json_string_value(json_object_get(x, "ph"));
        ck_assert_ptr_nonnull(ph);
        if (strcmp(ph, "X"))
            continue;
        double ts = json_number_value(json_object_get(x, "ts"));
        double ns = ts * 1000;
        ck_assert_msg(ns - (double)(long long)(ns + 0.5) < 1e-3 * (1 + ns * 1e-12) &&
                          (double)(long long)(ns + 0.5) - ns < 1e-3 * (1 + ns * 1e-12),
                      "ts %.17g µs is not a whole number of ns", ts);
        sends += !strncmp(json_string_value(json_object_get(x, "name")), "send ", 5);
    }
    ck_assert_uint_gt(sends, 0);
    json_decref(j);
}
END_TEST

/* ---- plots ---------------------------------------------------------------------------- */

/* 2 models × 2 networks × 3 policy configurations × 3 prompt lengths; llama's runs take hours,
 * stories' seconds; accuracy falls with the capacity. */
static void build_plot_db(const char *path)
{
    static const char *const models[] = {"llama-2-7b", "stories260K"},
                             *const nets[] = {"lan", "wan"},
                             *const labels[] = {"full", "snapkv(capacity=1024)",
                                                "snapkv(capacity=4096)"},
                             *const cats[] = {"attention", "ffn", "softmax", "policy"};
    static const double lat_ms[] = {0.1, 50}, bw[] = {10000, 100};
    rdb *db = sqlfix_rdb_new(path);
    errbuf e;
    int idx = 0;
    for (int mo = 0; mo < 2; mo++)
        for (int n = 0; n < 2; n++)
            for (int p = 0; p < 3; p++)
                for (uint32_t len = 512; len <= 2048; len *= 2, idx++) {
                    char hash[17];
                    snprintf(hash, sizeof hash, "%016x", 0x2000 + idx);
                    double keep = p == 0 ? 1.0 : p == 1 ? 0.4 : 0.7;
                    double sec = (mo ? 2.0 : 3600.0) * (n ? 20 : 1) * len / 512.0;
                    uint64_t dec = (uint64_t)(sec * keep * 1e9), pre = (uint64_t)(sec * 1e9);
                    rdb_metric m[2] = {
                        {"attn_mass_recall", p == 0 ? 1.0 : 0.6 + 0.3 * keep, "ratio"},
                        {"latency_total_s", (double)(pre + dec) * 1e-9, "s"}};
                    rdb_phase ph[2] = {{"prefill", pre, 1}, {"decode", dec, 1}};
                    rdb_breakdown bd[5] = {{"decode",
                                            "total",
                                            {.rounds = 100,
                                             .bytes = {len * 1000000ull, len * 900000ull, 0},
                                             .offline = {len * 10000ull, 0, 0}}}};
                    for (int c = 0; c < 4; c++)
                        bd[c + 1] = (rdb_breakdown){"decode",
                                                    cats[c],
                                                    {.rounds = 10,
                                                     .bytes = {len * 100000ull * (uint64_t)(c + 1)},
                                                     .compute_ns = dec / 10,
                                                     .comm_ns = dec / (uint64_t)(c + 2)}};
                    rdb_run r = fixture_run("plots", idx, hash, models[mo], "semi2k", nets[n],
                                            lat_ms[n], bw[n], len, ph, bd, 5);
                    r.policy = p ? "snapkv" : "full";
                    r.policy_label = labels[p];
                    r.machine = "default";
                    r.threads = 1;
                    r.metric = m;
                    r.n_metric = 2;
                    ck_assert_int_eq(rdb_run_put(db, &r, NULL, &e), MS_OK);
                }
    rdb_close(db);
}

/* A rendered image: the format's magic and more than an empty canvas. */
static void check_image(const char *path, const char *format)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "missing %s", path);
    ck_assert_msg(st.st_size > 5000, "%s: only %lld bytes", path, (long long)st.st_size);
    char *s = th_slurp(path, NULL);
    if (!strcmp(format, "png"))
        ck_assert_msg(!memcmp(s, "\x89PNG\r\n\x1a\n", 8) && !memcmp(s + 12, "IHDR", 4),
                      "%s: not a PNG", path);
    else if (!strcmp(format, "pdf"))
        ck_assert_msg(!memcmp(s, "%PDF-", 5), "%s: not a PDF", path);
    else
        ck_assert_msg(strstr(s, "<svg") && strstr(s, "</svg>"), "%s: not an SVG", path);
    free(s);
}

/* The block titles of a gnuplot data file, '|'-joined ("full|snapkv(capacity=1024)|…"). */
static void legend_entries(const char *gp, char *out, size_t n)
{
    char *s = th_slurp(gp, NULL);
    const char *p = strstr(s, "\n# legend\n");
    size_t k = 0;
    out[0] = '\0';
    ck_assert_msg(p != NULL, "%s: no legend", gp);
    while ((p = strstr(p, " title \""))) {
        p += strlen(" title \"");
        size_t len = strcspn(p, "\"");
        k += (size_t)snprintf(out + k, k < n ? n - k : 0, "%s%.*s", k ? "|" : "", (int)len, p);
    }
    free(s);
}

/* The k-th (1-based, in panel order) `set WHAT "…"` of a figure's script: its text. */
static void gp_set(const char *gp, const char *what, int k, char *out, size_t n)
{
    char *s = th_slurp(gp, NULL), key[64];
    snprintf(key, sizeof key, "\nset %s \"", what);
    const char *p = s;
    for (int i = 0; i < k && p; i++)
        if ((p = strstr(p, key)))
            p += strlen(key);
    ck_assert_msg(p != NULL, "%s: no set %s number %d", gp, what, k);
    snprintf(out, n, "%.*s", (int)strcspn(p, "\""), p);
    free(s);
}

/* The text of `set WHAT` number k of the figure's script is want. */
static void expect_gp(const char *gp, const char *what, int k, const char *want)
{
    char v[256];
    gp_set(gp, what, k, v, sizeof v);
    ck_assert_msg(!strcmp(v, want), "%s: set %s #%d = '%s', want '%s'", gp, what, k, v, want);
}

/* The number of panels a figure's script draws. */
static int gp_panels(const char *gp)
{
    char *s = th_slurp(gp, NULL);
    int n = th_count(s, "\n# panel ");
    free(s);
    return n;
}

START_TEST(test_plots)
{
    build_plot_db(tpath("p.db"));
    static const char *const plots[] = {"latency", "comm", "breakdown", "pareto"};
    static const char *const formats[] = {"png", "svg", "pdf"};
    for (int f = 0; f < 3; f++) {
        char dir[32], file[64];
        snprintf(dir, sizeof dir, "out-%s", formats[f]);
        ck_assert_int_eq(MPCSIM("plot", "p.db", "-o", dir, "--format", formats[f], "--data", "d"),
                         0);
        char *err = th_slurp(tpath("err.txt"), NULL);
        ck_assert_msg(err[0] == '\0', "plot wrote to stderr: %s", err);
        free(err);
        for (int i = 0; i < 4; i++) {
            snprintf(file, sizeof file, "%s/%s.%s", dir, plots[i], formats[f]);
            check_image(tpath(file), formats[f]);
        }
    }
    /* a panel per model and network: 4 panels × (whole run, per token); no panel mixes models */
    char v[256], t[512];
    ck_assert_int_eq(gp_panels(tpath("d/latency.gp")), 8);
    for (int i = 1; i <= 8; i++) {
        gp_set(tpath("d/latency.gp"), "title", i, v, sizeof v);
        ck_assert_msg(!strstr(v, "llama-2-7b") != !strstr(v, "stories260K"), "panel %s", v);
    }
    expect_gp(tpath("d/latency.gp"), "title", 1, "llama-2-7b · lan (0.1 ms, 10 Gbit/s)");
    /* one legend for the figure: an entry per policy configuration, drawn in every panel */
    legend_entries(tpath("d/latency.gp"), t, sizeof t);
    ck_assert_str_eq(t, "full|snapkv(capacity=1024)|snapkv(capacity=4096)");
    char *dat = th_slurp(tpath("d/latency.gp"), NULL);
    for (int k = 0; k < 3; k++) {
        char blk[32];
        snprintf(blk, sizeof blk, "$s3_1_%d << EOD", k); /* row 4, column 2 */
        ck_assert_msg(strstr(dat, blk), "no %s", blk);
    }
    /* the values are in that unit: full at 512 tokens on the LAN, 1 h prefill + 1 h decode */
    ck_assert_ptr_nonnull(strstr(dat, "$s0_0_0 << EOD\n512 2\n"));
    free(dat);
    /* units rescaled: llama's whole run in hours (1 h .. 40 h on the WAN: days), stories' in s */
    expect_gp(tpath("d/latency.gp"), "ylabel", 1, "online latency, whole run (h)");
    expect_gp(tpath("d/latency.gp"), "ylabel", 3, "online latency, whole run (d)");
    expect_gp(tpath("d/latency.gp"), "ylabel", 5, "online latency, whole run (s)");
    expect_gp(tpath("d/comm.gp"), "ylabel", 1, "online bytes (GB)");
    /* Pareto: a marker per configuration against per-token latency and against bytes */
    ck_assert_int_eq(gp_panels(tpath("d/pareto.gp")), 8);
    expect_gp(tpath("d/pareto.gp"), "xlabel", 1, "online latency, decode per token (min)");
    expect_gp(tpath("d/pareto.gp"), "xlabel", 2, "online bytes, whole run (GB)");
    legend_entries(tpath("d/pareto.gp"), t, sizeof t);
    ck_assert_str_eq(t, "full|snapkv(capacity=1024)|snapkv(capacity=4096)");
    /* breakdown: a bar per configuration, categories in the op order's colours */
    dat = th_slurp(tpath("d/breakdown.gp"), NULL);
    ck_assert_ptr_nonnull(strstr(dat, "set ytics (\"full\" 0, \"snapkv(capacity=1024)\" 1, "
                                      "\"snapkv(capacity=4096)\" 2) nomirror font"));
    free(dat);
    legend_entries(tpath("d/breakdown.gp"), t, sizeof t);
    ck_assert_str_eq(t, "attention|ffn|softmax|policy");

    /* --where, --by, --x, --latency, --metric */
    ck_assert_int_eq(MPCSIM("plot", "p.db", "-o", "w", "--data", "dw", "--where",
                            "model=stories260K", "--latency", "decode-per-token", "--metric",
                            "latency_total_s"),
                     0);
    ck_assert_int_eq(gp_panels(tpath("dw/latency.gp")), 2);
    expect_gp(tpath("dw/latency.gp"), "ylabel", 1, "online latency, decode per token (s)");
    check_image(tpath("w/metric-latency_total_s.png"), "png");
    ck_assert_int_eq(
        MPCSIM("plot", "p.db", "-o", "b", "--data", "db", "--by", "model", "--x", "latency_ms"), 0);
    ck_assert_int_eq(gp_panels(tpath("db/latency.gp")), 4);
    expect_gp(tpath("db/latency.gp"), "xlabel", 1, "one-way link latency (ms), log");
    /* the network is on x: lines by the other value (bandwidth); snapkv, whose capacity holds
     * the whole prompt, lies on the full cache at 10 Gbit/s and says so */
    legend_entries(tpath("db/latency.gp"), t, sizeof t);
    ck_assert_str_eq(t, "full 10 Gbit/s|full 100 Mbit/s|snapkv(capacity=1024) 10 Gbit/s (on full "
                        "10 Gbit/s)|snapkv(capacity=1024) 100 Mbit/s|snapkv(capacity=4096) 10 "
                        "Gbit/s (on full 10 Gbit/s)|snapkv(capacity=4096) 100 Mbit/s");
    static const th_argv usage[] = {
        {"plot", "p.db", "--x", "prompt"},
        {"plot", "p.db", "--by", "modle"},
        {"plot", "p.db", "--format", "gif"},
        {"plot", "p.db", "--latency", "prefill"},
        {"plot", "p.db", "--metric", "no_such"},
        {"plot", "p.db", "--where", "model=gpt9"},
        {"plot", "missing.db"},
    };
    th_run_each(tmpdir, tpath("out.txt"), tpath("err.txt"), 2, usage, TH_N(usage));
}
END_TEST

/* The x axis chosen by default is the one that varies: a network grid at one prompt length. */
START_TEST(test_plot_default_axis)
{
    rdb *db;
    errbuf e;
    ck_assert_int_eq(rdb_open(tpath("g.db"), 1, &db, &e), MS_OK);
    static const double lat[] = {0.1, 1, 10, 40}, bw[] = {100, 1000};
    int idx = 0;
    for (int l = 0; l < 4; l++)
        for (int b = 0; b < 2; b++, idx++) {
            char hash[17], net[32];
            snprintf(hash, sizeof hash, "%016x", 0x3000 + idx);
            snprintf(net, sizeof net, "%gms/%gMbps", lat[l], bw[b]);
            rdb_phase ph[2] = {{"prefill", (uint64_t)(lat[l] * 1e9), 1},
                               {"decode", (uint64_t)(lat[l] * 1e8 * (b + 1)), 1}};
            rdb_breakdown bd[2] = {{"decode", "total", {.rounds = 10, .bytes = {1000000, 0, 0}}},
                                   {"decode", "ffn", {.rounds = 10, .comm_ns = 5}}};
            rdb_run r = fixture_run("grid", idx, hash, "llama-2-7b", "aby3", net, lat[l], bw[b],
                                    1024, ph, bd, 2);
            r.policy = "full";
            ck_assert_int_eq(rdb_run_put(db, &r, NULL, &e), MS_OK);
        }
    rdb_close(db);
    ck_assert_int_eq(MPCSIM("plot", "g.db", "-o", "g", "--data", "dg"), 0);
    char t[256];
    expect_gp(tpath("dg/latency.gp"), "xlabel", 1, "one-way link latency (ms), log");
    ck_assert_int_eq(gp_panels(tpath("dg/latency.gp")), 2); /* one panel row (the model) */
    legend_entries(tpath("dg/latency.gp"), t, sizeof t);
    ck_assert_str_eq(t, "full 1 Gbit/s|full 100 Mbit/s");
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "skipping the Pareto plot"));
    free(out);
    check_image(tpath("g/latency.png"), "png");
}
END_TEST

/* ---- run: several scenarios, progress, interruption; man page and completion ------------ */

/* A sweep of llama-2-7b decode steps each simulated exactly: ~0.3 s of CPU a run. */
static void write_slow(const char *file, const char *name, const char *prompts)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "format: 1\nname: %s\nseed: 11\nmodel: llama-2-7b\nprotocol: [semi2k, aby3]\n"
             "network: [lan, wan]\npolicies: [full]\n"
             "workload: {prompt_len: [%s], decode_len: 256, decode_stride: 1}\n",
             name, prompts);
    th_write(tpath(file), buf);
}

static void write_fast(const char *file, const char *name, const char *prompts, const char *out)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "format: 1\nname: %s\nseed: 3\nmodel: gpt2\nprotocol: semi2k\nnetwork: lan\n"
             "policies: [full]\nworkload: {prompt_len: [%s], decode_len: 2}\n%s%s%s",
             name, prompts, out ? "output: " : "", out ? out : "", out ? "\n" : "");
    th_write(tpath(file), buf);
}

START_TEST(test_run_many)
{
    ck_assert_int_eq(mkdir(tpath("scn"), 0777), 0);
    write_fast("scn/a.yaml", "a", "16, 32", NULL);
    write_fast("scn/b.yaml", "b", "32, 48", NULL); /* 32 is a's config too: runs once */
    th_write(tpath("scn/notes.txt"), "not a scenario\n");
    /* a folder and a file into one database */
    write_fast("c.yaml", "c", "64", NULL);
    ck_assert_int_eq(MPCSIM("run", "scn", "--dry-run"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "# scn/a.yaml (scenario a)"));
    ck_assert_ptr_nonnull(strstr(out, "3 runs in 2 scenarios"));
    free(out);
    ck_assert_int_eq(MPCSIM("run", "scn", "c.yaml", "-o", "all.db", "-q"), 0);
    ck_assert_int_eq(q1(tpath("all.db"), "SELECT count(*) FROM runs"), 4);
    ck_assert_int_eq(q1(tpath("all.db"), "SELECT count(*) FROM scenarios"), 3);
    ck_assert_int_eq(q1(tpath("all.db"), "SELECT count(*) FROM runs WHERE scenario = 'b'"), 1);
    /* again: refused without --resume, nothing to do with it */
    ck_assert_int_eq(MPCSIM("run", "scn", "c.yaml", "-o", "all.db", "-q"), 2);
    ck_assert_int_eq(MPCSIM("run", "scn", "c.yaml", "-o", "all.db", "--resume"), 0);
    ck_assert_int_eq(q1(tpath("all.db"), "SELECT count(*) FROM runs"), 4);
    /* scenarios naming different databases need -o; nothing is written */
    write_fast("d.yaml", "d", "16", "d.db");
    write_fast("e.yaml", "e", "16", "e.db");
    ck_assert_int_eq(MPCSIM("run", "d.yaml", "e.yaml", "-q"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(err, "-o"));
    free(err);
    ck_assert_int_ne(access(tpath("d.db"), F_OK), 0);
    /* one bad scenario among several: the error at its line, nothing written */
    th_write(tpath("bad.yaml"),
             "format: 1\nname: bad\nmodel: gpt2\nprotocol: semi2k\n"
             "network: lan\npolicies: [ful]\nworkload: {prompt_len: 8, decode_len: 2}\n");
    ck_assert_int_eq(MPCSIM("run", "c.yaml", "bad.yaml", "-o", "bad.db", "-q"), 2);
    err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(err, "bad.yaml:6:"));
    free(err);
    ck_assert_int_ne(access(tpath("bad.db"), F_OK), 0);
    /* two files of one scenario name are refused */
    write_fast("a2.yaml", "a", "8", NULL);
    ck_assert_int_eq(MPCSIM("run", "scn/a.yaml", "a2.yaml", "-o", "x.db", "-q"), 2);
    ck_assert_int_eq(MPCSIM("run", "empty-folder-that-is-missing.yaml", "-q"), 2);
}
END_TEST

START_TEST(test_progress_lines)
{
    /* stderr is a file here: one line every period, the runs in flight counted */
    write_slow("s.yaml", "s", "64");
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "s.db", "-j", "2", "--progress-every", "0.2"),
                     0);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "progress: ") != NULL, "no progress line in: %s", err);
    ck_assert_ptr_nonnull(strstr(err, "/4 runs, elapsed "));
    ck_assert_ptr_nonnull(strstr(err, " in flight, the oldest #"));
    ck_assert_ptr_nonnull(strstr(err, "llama-2-7b"));
    /* one short line per tick, naming the protocol and the network of a run in flight */
    for (const char *l = err; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0'))
        if (!strncmp(l, "progress: ", 10))
            ck_assert_msg(strcspn(l, "\n") <= 200, "a long progress line: %.*s",
                          (int)strcspn(l, "\n"), l);
    const char *fl = strstr(err, " in flight, the oldest #");
    ck_assert(fl && (strstr(fl, " lan ") || strstr(fl, " wan ")) &&
              (strstr(fl, " semi2k ") || strstr(fl, " aby3 ")));
    /* inside a run: its positions replayed of all (prompt, then decode steps) */
    const char *at = strstr(fl, ", positions ");
    ck_assert_msg(at && strchr(at, '/') && strchr(at, '/') < strchr(at, '\n'), "%.200s", fl);
    ck_assert_ptr_null(strstr(err, "\033[")); /* no terminal codes in a log */
    /* before a run has finished: the cost model's estimate, marked as one (or "--" past it) */
    const char *first = strstr(err, "progress: 0/4");
    if (first) {
        const char *eta = strstr(first, "ETA ");
        ck_assert_msg(eta && (eta[4] == '~' || !strncmp(eta + 4, "--", 2)), "%.80s", first);
    }
    free(err);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--progress-every", "0"), 2);
}
END_TEST

/* The ETA from the first second: the runs' estimated CPU seconds over the workers, marked as an
 * estimate; once runs finish, the measured rate of the finished weight. */
START_TEST(test_progress_eta)
{
    const double w[3] = {120, 60, 60}; /* 240 estimated CPU seconds */
    progress *p = progress_start(3, w, 2, 0, 1, 60, "");
    ck_assert_ptr_nonnull(p);
    char st[256];
    progress_status(p, st, sizeof st);
    ck_assert_msg(strstr(st, "0/3 runs") && strstr(st, "ETA ~2:00"), "%s", st);
    progress_stop(p);
    /* more workers than runs: the runs in flight are the runs */
    p = progress_start(3, w, 8, 0, 1, 60, "");
    progress_status(p, st, sizeof st);
    ck_assert_msg(strstr(st, "ETA ~1:20"), "%s", st);
    progress_begin(p, 1, "b");
    progress_end(p, 1, 0);
    progress_status(p, st, sizeof st); /* a rate now: a measured ETA, no "~" */
    ck_assert_msg(strstr(st, "1/3 runs") && !strstr(st, "~"), "%s", st);
    progress_stop(p);
}
END_TEST

START_TEST(test_sigterm_resume)
{
    write_slow("k.yaml", "k", "64, 96");
    pid_t pid = th_spawnl(tmpdir, tpath("out.txt"), tpath("err.txt"), "run", "k.yaml", "-o", "k.db",
                          (const char *)NULL);
    /* wait for the first recorded run, then terminate the sweep */
    long long n = 0;
    for (int i = 0; i < 6000 && n < 1; i++) {
        usleep(20000);
        if (access(tpath("k.db"), F_OK) == 0) {
            sqlite3 *h;
            if (sqlite3_open_v2(tpath("k.db"), &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
                sqlite3_stmt *s;
                if (sqlite3_prepare_v2(h, "SELECT count(*) FROM runs", -1, &s, NULL) == SQLITE_OK) {
                    if (sqlite3_step(s) == SQLITE_ROW)
                        n = sqlite3_column_int64(s, 0);
                    sqlite3_finalize(s);
                }
                sqlite3_close(h);
            }
        }
    }
    ck_assert_int_ge(n, 1);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status %d", st);
    char *err = th_slurp(tpath("err.txt"), NULL);
    const char *line = strstr(err, "interrupted by SIGTERM: ");
    ck_assert_msg(line != NULL, "no interrupt line in: %s", err);
    long long said = atoll(line + strlen("interrupted by SIGTERM: "));
    long long kept = q1(tpath("k.db"), "SELECT count(*) FROM runs WHERE status = 'ok'");
    /* a run committed in the instant before the signal may not be counted yet */
    ck_assert_msg(kept == said || kept == said + 1, "said %lld, kept %lld", said, kept);
    ck_assert_int_lt(said, 8);
    ck_assert_ptr_nonnull(strstr(line, " of 8 runs are kept"));
    ck_assert_ptr_nonnull(strstr(line, "mpcsim run k.yaml -o k.db --resume"));
    free(err);
    ck_assert_int_eq(MPCSIM("run", "k.yaml", "-o", "k.db", "--resume", "-q"), 0);
    ck_assert_int_eq(q1(tpath("k.db"), "SELECT count(*) FROM runs WHERE status = 'ok'"), 8);
}
END_TEST

START_TEST(test_man_and_completion)
{
    const char *src = th_data();
    char cmd[2048];
    /* the man page renders without warnings and names every subcommand of --help */
    snprintf(cmd, sizeof cmd, "cd '%s' && groff -man -ww -z sim/cli/mpcsim.1 2> '%s'", src,
             tpath("groff.txt"));
    ck_assert_int_eq(system(cmd), 0);
    char *w = th_slurp(tpath("groff.txt"), NULL);
    ck_assert_msg(w[0] == '\0', "groff: %s", w);
    free(w);
    char *man = th_slurp(th_data_path("sim/cli/mpcsim.1"), NULL);
    ck_assert_int_eq(MPCSIM("--help"), 0);
    char *help = th_slurp(tpath("out.txt"), NULL), *p = strstr(help, "commands:");
    ck_assert_ptr_nonnull(p);
    int n = 0;
    for (p = strchr(p, '\n') + 1; p[0] == ' ' && p[1] == ' ' && p[2] != ' '; n++) {
        char name[32], want[48];
        sscanf(p, " %31s", name);
        snprintf(want, sizeof want, ".B %s\n", name);
        ck_assert_msg(strstr(man, want) != NULL, "the man page lacks %s", name);
        p = strchr(p, '\n') + 1;
    }
    ck_assert_int_ge(n, 10);
    free(help);
    free(man);
    /* make install puts both where man and bash-completion look */
    snprintf(cmd, sizeof cmd, "make -s -n -C '%s' install PREFIX=/opt/x DESTDIR=/tmp/none > '%s'",
             src, tpath("make.txt"));
    ck_assert_int_eq(system(cmd), 0);
    char *mk = th_slurp(tpath("make.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(mk, "/tmp/none/opt/x/share/man/man1/mpcsim.1"));
    ck_assert_ptr_nonnull(strstr(mk, "/tmp/none/opt/x/share/bash-completion/completions/mpcsim"));
    free(mk);
    /* completion: subcommands, a subcommand's options (from its --help), names from list */
    static const char *const cases[][3] = {
        {"rep", "1", "report"},
        {"plot --fo", "2", "--format"},
        {"run --res", "2", "--resume"},
        {"cost --model stories", "3", "stories260K"},
        {"plot db --format p", "4", "pdf"},
        {"list pol", "2", "policies"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && bash -c 'source \"%s/scripts/completion/mpcsim.bash\"; "
                 "COMP_WORDS=(\"%s\" %s); COMP_CWORD=%s; _mpcsim 2>/dev/null; "
                 "echo \"${COMPREPLY[*]}\"' > '%s'",
                 tmpdir, src, th_bin(), cases[i][0], cases[i][1], tpath("comp.txt"));
        ck_assert_int_eq(system(cmd), 0);
        char *got = th_slurp(tpath("comp.txt"), NULL);
        got[strcspn(got, "\n")] = '\0';
        ck_assert_msg(strstr(got, cases[i][2]) != NULL, "'%s': got '%s', want '%s'", cases[i][0],
                      got, cases[i][2]);
        free(got);
    }
}
END_TEST

Suite *results_suite(void)
{
    Suite *s = suite_create("results");
    TCase *tc = th_case(s, "results", 120);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_labels_and_columns, test_migrate_v2, test_protocol_labels,
             test_hidden_differences, test_report, test_report_json_and_serve,
             test_cost_json_odd_name, test_plots, test_plot_default_axis, test_run_many,
             test_progress_lines, test_progress_eta, test_sigterm_resume, test_man_and_completion);
    return s;
}
