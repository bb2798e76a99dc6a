/* check_tovasec.c — TOVA on secret shares: its decode ops read the step's new [K | V] row
 * (PCHECK_IN_KV_NEW) and the step's attention over its slots, then the new entry
 * (PCHECK_IN_ATT_SLOTS), which the session binds as views of the layer's caches after the
 * append and of its probabilities after the softmax; the slots it attends are gathered before
 * the scores, the arg-min and the slots' compaction follow the softmax. Over stories260K
 * (prompt 16 > cache_size 8, 8 decode steps: 5 layers x 4 KV heads x 8 steps = 160 decode
 * masks, every one after the prompt's eviction): no fallback note, every op's bytes and rounds
 * as predicted, and every kept set its select()'s over the session's own values (exactly or by
 * ties). Every layer's eviction runs in the same rounds (one TOPK and GATHER at the prompt, one
 * ARGMAX and SELECT per step, after the last layer): the policy's rounds are one layer's, pinned
 * against protocols/README.md's per-op rounds. scenarios/policies/tova.yaml runs tova's session
 * with its budget as cache_size: the same figures and masks; with `layers: {dense: N}` tova's
 * dense_layers, the first N layers keeping every entry; its sinks and recent window tova's
 * sinks and recent, public rows beside the candidates. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testdir.h"

TESTDIR("check_tovasec")

/* validate under proto of policy (tova, or the composition's file) with param; its output in
 * out, its measured figures in v. */
static void validate_on(char *out, size_t cap, const char *proto, const char *policy,
                        const char *param, unsigned long long v[4])
{
    unsigned steps;
    th_cli_expect(out, cap, 0,
                  "bytes and rounds of every op of the 9 steps equal the prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy %s "
                  "--policy-param %s",
                  proto, policy, param);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    th_measured_nums(out, v, &steps);
    ck_assert_uint_eq(steps, 8);
}

/* validate of tova (cache_size 8) on shares under proto: every op as predicted, its own emitted
 * ops selecting, 160 masks equal to its select(), its measured line read. */
static void tova_on(const char *proto)
{
    char out[1 << 14];
    unsigned long long v[4];
    validate_on(out, sizeof out, proto, "tova", "cache_size=8", v);
    ck_assert_msg(strstr(out, "selection on shares from tova's own emitted ops (the selection "
                              "opened for the audit only), 160 decode masks"),
                  "%s", out);
    th_own_select(out, 160);
}

START_TEST(test_tova_semi2k) { tova_on("semi2k"); }
END_TEST

START_TEST(test_tova_aby3) { tova_on("aby3"); }
END_TEST

/* A prompt within the cache (4 of 8): the first eviction, at 8 cached entries, reads the
 * attention over every cached entry and names no selection (the session attends them all); the
 * next steps attend the slots. 5 layers x 4 KV heads x 12 steps = 240 masks; the prompt's end
 * reads no attention, so the kept sets are compared with the replay's only. */
START_TEST(test_tova_prompt_within_cache)
{
    char out[1 << 14];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 13 steps equal the prediction: yes",
                  "validate --model stories260K -p semi2k --accuracy 16 --prompt 4 --policy tova "
                  "--policy-param cache_size=8");
    ck_assert_msg(!strstr(out, "NOTE: tova has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    ck_assert_msg(strstr(out, "own emitted ops (the selection opened for the audit only), 240 "
                              "decode masks"),
                  "%s", out);
    ck_assert_msg(strstr(out, "equal to the plaintext replay's (float model): yes (240 equal"),
                  "%s", out);
}
END_TEST

/* --accuracy equal to --prompt runs no decode step: the audit says there was nothing to compare
 * (the agreement lines would read a verdict out of no masks) and the run passes. */
START_TEST(test_tova_no_decode)
{
    char out[1 << 14];
    th_cli_expect(out, sizeof out, 0, "0 decode masks",
                  "validate --model stories260K -p semi2k --accuracy 16 --prompt 16 --policy tova "
                  "--policy-param cache_size=8");
    ck_assert_msg(strstr(out, "nothing to compare: no decode step of this run selected"), "%s",
                  out);
    ck_assert_msg(!strstr(out, ": NO (") && !strstr(out, ": no ("), "%s", out);
}
END_TEST

/* tova.yaml at its default budget (512) over 24 positions keeps every entry: validate says it
 * selected nothing, not that its selection is not on shares (which a deployment of it would
 * not need). */
START_TEST(test_blocks_keeps_all)
{
    char out[1 << 14];
    th_cli_expect(out, sizeof out, 0,
                  "tova_blocks keeps every cached entry at every step of this "
                  "run: nothing was selected",
                  "validate --model stories260K -p semi2k --accuracy 24 --prompt 16 --policy %s",
                  th_data_path("scenarios/policies/tova.yaml"));
    ck_assert_msg(!strstr(out, "NOTE:"), "%s", out);
}
END_TEST

/* ---- scenarios/policies/tova.yaml on shares: tova's session with the composition's budget ---- */

/* tova.yaml at param against tova at tparam: no fallback, every op as predicted, 160 masks equal
 * to tova's select() over the session's values, the same measured bytes and rounds. */
static void blocks_on(const char *proto, const char *param, const char *tparam)
{
    char out[1 << 14], ref[1 << 14];
    unsigned long long v[4], w[4];
    validate_on(ref, sizeof ref, proto, "tova", tparam, w);
    validate_on(out, sizeof out, proto, th_data_path("scenarios/policies/tova.yaml"), param, v);
    ck_assert_msg(strstr(out, "selection on shares from tova's own emitted ops with tova_blocks's "
                              "parameters (the selection opened for the audit only), 160 decode "
                              "masks"),
                  "%s", out);
    th_own_select(out, 160);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(v[i] == w[i], "%s %s: measured %llu, tova %s %llu", proto, param, v[i],
                      tparam, w[i]);
}

START_TEST(test_blocks_semi2k)
{
    blocks_on("semi2k", "topk=8", "cache_size=8");
    blocks_on("semi2k", "kv_budget=0.5", "kv_budget=0.5"); /* round(0.5 · 16) = 8 entries */
}
END_TEST

START_TEST(test_blocks_aby3) { blocks_on("aby3", "topk=8", "cache_size=8"); }
END_TEST

/* Sinks beside the selection stay in tova's shape (tova's sinks: public rows before its
 * candidates): tova.yaml with `sinks=2` selects on shares, no NOTE, every op as predicted, all
 * 160 masks tova's select()'s over the session's values. */
START_TEST(test_blocks_sinks)
{
    char out[1 << 14];
    unsigned long long v[4];
    validate_on(out, sizeof out, "semi2k", th_data_path("scenarios/policies/tova.yaml"),
                "topk=8 --policy-param sinks=2", v);
    ck_assert_msg(strstr(out, "selection on shares from tova's own emitted ops with tova_blocks's "
                              "parameters"),
                  "%s", out);
    th_own_select(out, 160);
}
END_TEST

/* TOVA's blocks with a dense first layer (`layers: {dense: 1}`, top 8): tova's emitted ops with
 * dense_layers 1 — layer 0 keeps every entry and emits nothing, layers 1 … 4 evict at once — on
 * shares: no fallback note, every op as predicted, and 160 masks (layer 0's every entry among
 * them) equal to tova's select() over the session's values. */
static void dense_on(const char *proto)
{
    char out[1 << 14];
    unsigned long long v[4];
    const char *yaml = th_file(&td, "tovad.yaml",
                               "name: tovad_t\n"
                               "score: {attention: {accumulate: false}}\n"
                               "share: layer\n"
                               "evict: permanent\n"
                               "layers: {dense: 1}\n"
                               "select: {topk: 8}\n");
    validate_on(out, sizeof out, proto, yaml, "topk=8", v);
    ck_assert_msg(strstr(out, "selection on shares from tova's own emitted ops with tovad_t's "
                              "parameters (the selection opened for the audit only), 160 decode "
                              "masks"),
                  "%s", out);
    th_own_select(out, 160);
}

START_TEST(test_dense_semi2k) { dense_on("semi2k"); }
END_TEST

START_TEST(test_dense_aby3) { dense_on("aby3"); }
END_TEST

/* tova's own dense layers: its ops gather what its select() keeps, layer 0's every entry. */
START_TEST(test_dense_check)
{
    char out[1 << 13];
    th_cli_expect(out, sizeof out, 0, "tova: match\n",
                  "policy check tova --param cache_size=8 --param dense_layers=1");
}
END_TEST

/* TOVA's blocks with two sinks and a window of 4 (top 8 of the 16 − 2 − 4 = 10 prompt
 * candidates, then at each step the arg-min of the 8 chosen and the entry leaving the window):
 * tova's emitted ops with sinks 2, recent 4 on shares, under proto: no fallback note, every op as
 * predicted, 160 masks equal to tova's select() over the session's values. A step's arg-min runs
 * over 9 candidates as tova's at cache_size 8 does: the same policy rounds (derived_rounds'
 * step: ⌈log2 9⌉ = 4 levels). */
static void sinks_window_on(const char *proto)
{
    char out[1 << 14];
    unsigned long long v[4];
    const char *yaml = th_file(&td, "tovasr.yaml",
                               "name: tovasr_t\n"
                               "sinks: 2\n"
                               "recent: 4\n"
                               "score: {attention: {accumulate: false}}\n"
                               "share: layer\n"
                               "evict: permanent\n"
                               "select: {topk: 8}\n");
    validate_on(out, sizeof out, proto, yaml, "topk=8", v);
    ck_assert_msg(strstr(out, "selection on shares from tova's own emitted ops with tovasr_t's "
                              "parameters (the selection opened for the audit only), 160 decode "
                              "masks"),
                  "%s", out);
    th_own_select(out, 160);
}

START_TEST(test_sinks_window_semi2k) { sinks_window_on("semi2k"); }
END_TEST

START_TEST(test_sinks_window_aby3) { sinks_window_on("aby3"); }
END_TEST

/* tova's own sinks and window: its ops gather what its select() keeps, with both, sinks alone
 * (the new entry a candidate) and a window alone. */
START_TEST(test_sinks_window_check)
{
    char out[1 << 13];
    static const char *const p[3] = {"--param sinks=2 --param recent=4", "--param sinks=2",
                                     "--param recent=3"};
    for (int i = 0; i < 3; i++)
        th_cli_expect(out, sizeof out, 0, "tova: match\n",
                      "policy check tova --param cache_size=8 %s", p[i]);
}
END_TEST

/* ---- the policy's rounds: one layer's, not L = 5 layers' one after the other ------------------
 */

/* Rounds of one layer's selection (protocols/README.md "Kernel constructions and their round
 * counts", msb: packed): lt at w = 64 bits r_lt = 1 + ⌈log2 63⌉ + 1 = 8 (semi2k), [1] + 1 + 6
 * + 2 = 10 (aby3: the bool_pair round, a two-round b2a_bit); the one-hot of an arg-max or a
 * top-k over n ≤ 16 columns compares w = ⌈log2 n⌉ = 4 bits: r_eq = ⌈log2 4⌉ + 1 = 3, 1 + 2 + 2
 * = 5; a select and a gather 1 each.
 * The prompt (16 entries, cache 8): top-k by the cheaper of 8 extractions, 8·(4·(r_lt + 1) +
 * r_eq), and Batcher's network on 16 = 2^4 keys, 4·5/2 = 10 layers of (r_lt + 1), + r_eq; then
 * the gather. A decode step (8 kept and the new entry): arg-max of 9, ⌈log2 9⌉ = 4 levels of
 * (r_lt + 1), + r_eq; then the select. */
static void derived_rounds(int aby3, unsigned long long *prompt, unsigned long long *step)
{
    unsigned long long lt = aby3 ? 10 : 8, eq = aby3 ? 5 : 3;
    unsigned long long ext = 8 * (4 * (lt + 1) + eq), sort = 10 * (lt + 1) + eq;
    *prompt = (ext < sort ? ext : sort) + 1;
    *step = 4 * (lt + 1) + eq + 1;
}

static double q1(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *q;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    double v = sqlite3_column_double(q, 0);
    sqlite3_finalize(q);
    return v;
}

/* tova and tova.yaml (cache 8, prompt 16, 8 decode steps) under proto: the policy category's
 * rounds per phase are the derived ones, and the two runs' bytes equal. */
static void rounds_on(const char *proto)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "format: 1\nname: tova_rounds\nprotocol: %s\nnetwork: lan\ncases:\n"
             "  - model: stories260K\n"
             "    workload: {prompt_len: 16, decode_len: 8}\n"
             "    trace: {source: record, text: %s}\n"
             "    policies:\n"
             "      - {name: tova, cache_size: 8}\n"
             "      - {compose: %s, topk: 8}\n",
             proto, th_data_path("tests/data/tinystories_sample.txt"),
             th_data_path("scenarios/policies/tova.yaml"));
    char *scn = strdup(th_file(&td, "rounds.yaml", yaml));
    char *db = strdup(testdir_path(&td, "rounds.db"));
    const char *out = testdir_path(&td, "run.txt");
    int st = th_runl(NULL, out, NULL, "run", scn, "-o", db, (char *)NULL);
    ck_assert_msg(st == 0, "exit %d: %s", st, th_text(out));
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    unsigned long long want[2];
    derived_rounds(!strcmp(proto, "aby3"), &want[0], &want[1]);
    want[1] *= 8;
    const char *phase[2] = {"prefill", "decode"};
    for (int run = 1; run <= 2; run++)
        for (int p = 0; p < 2; p++) {
            char sql[300];
            snprintf(sql, sizeof sql,
                     "SELECT COALESCE(SUM(rounds), -1) FROM breakdown WHERE run_id = %d AND "
                     "phase = '%s' AND category = 'policy'",
                     run, phase[p]);
            double r = q1(h, sql);
            ck_assert_msg(r == (double)want[p], "%s run %d %s: policy rounds %.0f, derived %llu",
                          proto, run, phase[p], r, want[p]);
            snprintf(sql, sizeof sql,
                     "SELECT (SELECT SUM(bytes_p0) FROM breakdown WHERE run_id = 1 AND phase = "
                     "'%s' AND category = 'policy') - (SELECT SUM(bytes_p0) FROM breakdown "
                     "WHERE run_id = 2 AND phase = '%s' AND category = 'policy')",
                     phase[p], phase[p]);
            ck_assert_msg(q1(h, sql) == 0, "%s %s: policy bytes differ", proto, phase[p]);
        }
    sqlite3_close(h);
    free(scn);
    free(db);
}

START_TEST(test_rounds_semi2k) { rounds_on("semi2k"); }
END_TEST

START_TEST(test_rounds_aby3) { rounds_on("aby3"); }
END_TEST

Suite *tovasec_suite(void)
{
    Suite *s = suite_create("tovasec");
    TCase *tc = th_case(s, "core", 0);
    TH_TESTS(tc, test_tova_semi2k, test_tova_aby3, test_tova_prompt_within_cache,
             test_tova_no_decode);
    TCase *tb = th_case(s, "blocks", 0);
    TESTDIR_USE(tb);
    TH_TESTS(tb, test_blocks_semi2k, test_blocks_aby3, test_blocks_sinks, test_rounds_semi2k,
             test_rounds_aby3, test_blocks_keeps_all, test_dense_semi2k, test_dense_aby3,
             test_dense_check, test_sinks_window_semi2k, test_sinks_window_aby3,
             test_sinks_window_check);
    return s;
}
