/* check_masks.c — keep masks from outside (sim/policy/policy_replay_masks.c, masks.h): masks
 * made here that encode StreamingLLM's rule replay to StreamingLLM's metrics; cost_as: h2o at
 * H2O's kept count costs what H2O costs, cost_as: none nothing; bad mask files and parameters
 * fail at load with file:line:col and write nothing; a value other than 0/1 fails the run. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "testdir.h"
#include "sim/policy/masks.h"
#include "sim/policy/policy.h"
#include "sim/trace/trace.h"

TESTDIR("check_masks")

static const char *tpath(const char *name) { return testdir_path(&td, name); }

#define ML 5 /* stories260K: layers, KV heads */
#define MH 4
#define MT 64 /* the recorded positions */

/* StreamingLLM's rule with sink 4, recent 8: keep j < 4 or j ≥ t − 8 (j < t). */
static int sl_rule(uint32_t t, uint32_t j) { return j < t && (j < 4 || j + 8 >= t); }

/* Writes tr/keep.npy as int32 [L][T][Hkv][T] by rule, bad (≥ 0) set to 2 at one entry of a
 * replayed row; cut bytes left off the end. */
static void write_masks(uint32_t L, int bad, long cut)
{
    char path[512];
    snprintf(path, sizeof path, "%s/keep.npy", tpath("tr"));
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    trace_npy h = {.dtype = 'i', .ndim = 4, .shape = {L, MT, MH, MT}};
    ck_assert_int_eq(trace_npy_write_header(f, &h), MS_OK);
    int32_t row[MT];
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t t = 0; t < MT; t++)
            for (uint32_t g = 0; g < MH; g++) {
                for (uint32_t j = 0; j < MT; j++)
                    row[j] = sl_rule(t, j);
                if (bad >= 0 && l == 1 && t == 40 && g == 2)
                    row[5] = bad;
                ck_assert_uint_eq(fwrite(row, sizeof row, 1, f), 1);
            }
    long end = ftell(f);
    fclose(f);
    if (cut)
        ck_assert_int_eq(truncate(path, end - cut), 0);
}

static void record_trace(void)
{
    ck_assert_int_eq(th_runl(NULL, tpath("rec.txt"), NULL, "trace", "record", "--model",
                             "stories260K", "--text",
                             th_data_path("tests/data/tinystories_sample.txt"), "--max-tokens",
                             "64", "-o", tpath("tr"), (char *)NULL),
                     0);
}

/* A scenario over the trace in tr with the given policy lines (after "policies:\n"). */
static char *scenario(const char *name, const char *source, const char *pols)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "format: 1\n"
             "name: m\n"
             "protocol: semi2k\n"
             "network: lan\n"
             "cases:\n"
             "  - model: stories260K\n"
             "    workload: {prompt_len: 32, decode_len: 16}\n"
             "    trace: %s\n"
             "    policies:\n"
             "%s",
             source, pols);
    return strdup(th_file(&td, name, yaml));
}

static double q1(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *q;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK, "%s", sql);
    ck_assert_msg(sqlite3_step(q) == SQLITE_ROW, "%s", sql);
    double v = sqlite3_column_double(q, 0);
    sqlite3_finalize(q);
    return v;
}

START_TEST(test_masks_replay)
{
    record_trace();
    write_masks(ML, -1, 0);
    char *scn = scenario("s.yaml", "{source: npy, path: tr}",
                         "      - {name: streamingllm, sink: 4, recent: 8, metric_stride: 1}\n"
                         "      - {name: replay_masks, metric_stride: 1}\n"
                         "      - {name: replay_masks, cost_as: h2o, heavy: 4, recent: 8, "
                         "metric_stride: 1}\n"
                         "      - {name: h2o, heavy: 4, recent: 8, metric_stride: 1}\n");
    char *db = strdup(tpath("s.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("run.txt"), NULL, "run", scn, "-o", db, (char *)NULL), 0);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq((int)q1(h, "SELECT COUNT(*) FROM runs WHERE status = 'ok'"), 4);
    /* the accuracy metrics of the masks are StreamingLLM's, to the last digit */
    static const char *const acc[] = {"attn_mass_recall", "topk_recall", "attn_out_rel_err",
                                      "kept_frac",        "logit_kl",    "top1_agreement"};
    for (size_t i = 0; i < sizeof acc / sizeof acc[0]; i++) {
        char sql[512];
        for (int run = 2; run <= 3; run++) {
            snprintf(sql, sizeof sql,
                     "SELECT (SELECT value FROM metrics WHERE run_id = %d AND name = '%s') - "
                     "(SELECT value FROM metrics WHERE run_id = 1 AND name = '%s')",
                     run, acc[i], acc[i]);
            ck_assert_msg(q1(h, sql) == 0, "%s: run %d differs from streamingllm's", acc[i], run);
        }
    }
    ck_assert_double_gt(q1(h, "SELECT value FROM metrics WHERE run_id = 1 AND "
                              "name = 'attn_mass_recall'"),
                        0);
    /* cost: none costs nothing; cost_as h2o at H2O's count (4 + 8) costs what H2O costs */
    const char *pol = "SELECT COALESCE(SUM(bytes_p0 + rounds), -1) FROM breakdown WHERE "
                      "category = 'policy' AND run_id = ";
    char sql[512];
    snprintf(sql, sizeof sql, "%s2", pol);
    ck_assert_double_eq(q1(h, sql), 0);
    snprintf(sql, sizeof sql, "%s3", pol);
    double as_h2o = q1(h, sql);
    snprintf(sql, sizeof sql, "%s4", pol);
    ck_assert_double_gt(as_h2o, 0);
    ck_assert_double_eq(as_h2o, q1(h, sql));
    sqlite3_close(h);
    free(scn);
    free(db);
}
END_TEST

/* Runs scn into a fresh database: exit 2, the message has want (and at, when not NULL), no
 * database written. */
static void expect_refused(const char *scn, const char *at, const char *want)
{
    char *db = strdup(tpath("bad.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("bad.txt"), NULL, "run", scn, "-o", db, (char *)NULL), 2);
    const char *msg = th_text(tpath("bad.txt"));
    ck_assert_msg(strstr(msg, want) && (!at || strstr(msg, at)), "expected '%s' at %s:\n%s", want,
                  at ? at : "-", msg);
    ck_assert(!th_exists(db));
    free(db);
}

START_TEST(test_masks_errors)
{
    record_trace();
    const char *one = "      - {name: replay_masks, cost_as: h2o, heavy: 4}\n";
    char *scn = scenario("s.yaml", "{source: npy, path: tr}", one);
    /* no keep.npy beside the trace: the policy's place in the scenario */
    expect_refused(scn, "s.yaml:10:16: error: ", "cannot open keep masks");
    /* another model's shape, then a file cut short */
    write_masks(ML - 1, -1, 0);
    expect_refused(scn, "s.yaml:10:16: error: ", "keep masks must be int32 [L][T][Hkv][T]");
    write_masks(ML, -1, 4);
    expect_refused(scn, "s.yaml:10:16: error: ", "keep masks are cut short");
    /* a parameter of another policy than cost_as: at that parameter */
    write_masks(ML, -1, 0);
    char *other = scenario("o.yaml", "{source: npy, path: tr}",
                           "      - {name: replay_masks, cost_as: h2o,\n"
                           "         capacity: 8}\n");
    expect_refused(other, "o.yaml:11:10: error: ", "'capacity' is a parameter of policy snapkv");
    char *tv = scenario("t.yaml", "{source: npy, path: tr}",
                        "      - {name: replay_masks, cost_as: h2o, cache_size: 8}\n");
    expect_refused(tv, "t.yaml:10:44: error: ", "'cache_size' is a parameter of policy tova");
    /* a key two cost policies share (recent: h2o's and tova's) is either's */
    char *both = scenario("b.yaml", "{source: npy, path: tr}",
                          "      - {name: replay_masks, cost_as: tova, cache_size: 8, recent: 4}\n"
                          "      - {name: replay_masks, cost_as: h2o, heavy: 4, recent: 4}\n");
    char *bdb = strdup(tpath("b.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("b.txt"), NULL, "run", both, "-o", bdb, (char *)NULL), 0);
    free(bdb);
    free(both);
    free(tv);
    /* no npy trace */
    char *synth = scenario("y.yaml", "{source: synth}", one);
    expect_refused(synth, "y.yaml:10:16: error: ", "has no npy trace");
    /* a 2 in a replayed row: the run fails, naming the entry */
    write_masks(ML, 2, 0);
    char *db = strdup(tpath("v.db"));
    int rc = th_runl(NULL, tpath("v.txt"), NULL, "run", scn, "-o", db, (char *)NULL);
    ck_assert_int_ne(rc, 0);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT status, error FROM runs", -1, &q, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(q, 0), "failed");
    ck_assert_msg(strstr((const char *)sqlite3_column_text(q, 1), "keep[1][40][2][5] = 2"), "%s",
                  sqlite3_column_text(q, 1));
    sqlite3_finalize(q);
    sqlite3_close(h);
    free(db);
    free(scn);
    free(other);
    free(synth);
}
END_TEST

/* replay_masks' declared parameter count is the table it builds, and no two keys are equal. */
START_TEST(test_masks_params)
{
    size_t n;
    const policy_param *pp = policy_params(&policy_replay_masks, &n);
    ck_assert_uint_eq(n, masks_n_params());
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            ck_assert_msg(strcmp(pp[i].key, pp[j].key), "key '%s' twice", pp[i].key);
    /* a key listed once that two cost policies have reads the same way in both */
    static const policy_ops *const cost[] = {&policy_h2o, &policy_tova, &policy_snapkv,
                                             &policy_quest};
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < sizeof cost / sizeof cost[0]; c++)
            for (size_t k = 0; k < cost[c]->n_params; k++) {
                const policy_param *q = &cost[c]->params[k];
                if (strcmp(q->key, pp[i].key))
                    continue;
                ck_assert_msg(!strcmp(q->def, pp[i].def) && q->lo == pp[i].lo &&
                                  q->hi == pp[i].hi && q->whole == pp[i].whole,
                              "'%s' of %s reads otherwise than replay_masks' '%s'", q->key,
                              cost[c]->name, pp[i].key);
            }
    ck_assert_ptr_eq(policy_find("replay_masks"), &policy_replay_masks);
    ck_assert_ptr_nonnull(policy_schema(&policy_replay_masks));
}
END_TEST

/* scripts/dump_trace.py --keep-masks: a NumPy implementation of StreamingLLM's rule dumped
 * beside a llama2.c trace of stories260K replays to StreamingLLM's metrics; keep.npy holds the
 * rule. Needs /usr/bin/python3 with torch and numpy (as check_trace_import; skipped without,
 * failed under CI). */
START_TEST(test_masks_from_pytorch)
{
    char out[8192], cmd[4096];
    if (th_sh("/usr/bin/python3 -c 'import torch, numpy'", out, sizeof out)) {
        const char *ci = getenv("CI");
        ck_assert_msg(!(ci && *ci && strcmp(ci, "false")), "python3-torch missing under CI: %s",
                      out);
        fprintf(stderr, "test_masks_from_pytorch: SKIPPED: /usr/bin/python3 cannot import torch\n");
        return;
    }
    char *py =
        strdup(th_file(&td, "sl.py",
                       "import numpy as np\n"
                       "def keep_masks(layer, q, k, v, att):\n"
                       "    T, Hk = k.shape[0], k.shape[1]\n"
                       "    t = np.arange(T)[:, None]\n"
                       "    j = np.arange(T)[None, :]\n"
                       "    m = (j < t) & ((j < 4) | (j + 8 >= t))\n"
                       "    return np.repeat(m[:, None, :], Hk, axis=1).astype(np.int32)\n"));
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/dump_trace.py llama2c --checkpoint "
             "%s/models/stories260K/stories260K.bin --tokenizer %s/models/stories260K/tok512.bin "
             "--name stories260K --text %s/tests/data/tinystories_sample.txt --max-tokens 64 "
             "--keep-masks %s -o %s",
             th_data(), th_data(), th_data(), th_data(), py, tpath("tr"));
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s\n%s", cmd, out);
    /* the file holds the rule */
    char path[600];
    snprintf(path, sizeof path, "%s/keep.npy", tpath("tr"));
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    trace_npy h;
    errbuf e;
    ck_assert_msg(trace_npy_read_header(f, path, &h, &e) == MS_OK, "%s", e.msg);
    ck_assert(h.dtype == 'i' && h.ndim == 4 && h.shape[0] == ML && h.shape[1] == MT &&
              h.shape[2] == MH && h.shape[3] == MT);
    ck_assert_int_eq(fseek(f, (long)h.data_offset, SEEK_SET), 0);
    int32_t row[MT];
    for (uint32_t l = 0; l < ML; l++)
        for (uint32_t t = 0; t < MT; t++)
            for (uint32_t g = 0; g < MH; g++) {
                ck_assert_uint_eq(fread(row, sizeof row, 1, f), 1);
                for (uint32_t j = 0; j < MT; j++)
                    ck_assert_int_eq(row[j], sl_rule(t, j));
            }
    fclose(f);
    char *scn = scenario("p.yaml", "{source: npy, path: tr}",
                         "      - {name: streamingllm, sink: 4, recent: 8, metric_stride: 1}\n"
                         "      - {name: replay_masks, metric_stride: 1}\n");
    char *db = strdup(tpath("p.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("run.txt"), NULL, "run", scn, "-o", db, (char *)NULL), 0);
    sqlite3 *hd;
    ck_assert_int_eq(sqlite3_open_v2(db, &hd, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq((int)q1(hd, "SELECT COUNT(*) FROM metrics a JOIN metrics b ON a.name = "
                                 "b.name WHERE a.run_id = 1 AND b.run_id = 2 AND a.value = "
                                 "b.value AND a.name IN ('attn_mass_recall', 'kept_frac', "
                                 "'logit_kl', 'topk_recall')"),
                     4);
    sqlite3_close(hd);
    free(py);
    free(scn);
    free(db);
}
END_TEST

Suite *masks_suite(void)
{
    Suite *s = suite_create("masks");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_masks_replay, test_masks_errors, test_masks_params, test_masks_from_pytorch);
    return s;
}
