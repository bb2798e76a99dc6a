/* check_attsec.c — the compositions' attention-score blocks on secret shares: snapkv.yaml's and
 * pyramidkv.yaml's window votes (window_attention, once after the prompt, top-k) emit snapkv's
 * ops on mpcsim's operands (the prompt's attention rows, the prompt's cached [K | V] rows), so
 * `policy check` runs them against select() and `validate --policy` runs them on shares: the
 * prompt's selection gathered into state, the decode steps attending those rows. Per
 * composition and protocol, over stories260K (prompt 16, 8 decode steps: 5 layers x 4 KV heads
 * x 8 steps = 160 decode masks): no fallback note, every op's bytes and rounds as predicted,
 * every kept set its select()'s over the session's own values, and the same bytes, rounds and
 * agreement as the hand-written policy's run on shares. h2o.yaml (accumulated attention, a recent
 * window, evicting for good) runs H2O's own secure session with its budgets: h2o's bytes and
 * rounds, every well-separated selection the replay's; with sinks (public rows before its
 * candidates) h2o's at a window as much longer; with dense layers (which select nothing) the
 * other layers' selections at once. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testdir.h"

TESTDIR("check_attsec")

/* The compositions' ops gather what their select() keeps (prompt 32, 32 decode steps: 640
 * masks), as snapkv's and pyramidkv's do. */
START_TEST(test_check_blocks)
{
    char out[1 << 13];
    th_cli_expect(out, sizeof out, 0, "snapkv_blocks: match",
                  "policy check '%s' --param capacity=16 --param window=4 --param recent=4",
                  th_data_path("scenarios/policies/snapkv.yaml"));
    ck_assert_uint_eq(th_chosen(out), 640);
    th_cli_expect(out, sizeof out, 0, "snapkv_blocks: match",
                  "policy check '%s' --param capacity=20 --param window=8 --param recent=8 "
                  "--param pooling=avgpool --param kernel=4",
                  th_data_path("scenarios/policies/snapkv.yaml"));
    ck_assert_uint_eq(th_chosen(out), 640);
    th_cli_expect(out, sizeof out, 0, "pyramidkv_blocks: match",
                  "policy check '%s' --param capacity=16 --param window=4 --param recent=4 "
                  "--param beta=2",
                  th_data_path("scenarios/policies/pyramidkv.yaml"));
    ck_assert_uint_eq(th_chosen(out), 640);
}
END_TEST

/* Of a validate output's 160 masks, those equal to its select()'s, exactly or by ties within
 * its stated tolerance: all of them (which are ties depends on the fixed point's rounding). */
static void agreement(const char *out)
{
    unsigned eq = th_count_of(out, "#       equal to its select()", "equal"),
             ties = th_count_of(out, "#       equal to its select()", "ties");
    ck_assert_uint_eq(eq + ties, 160);
}

/* validate of policy (its parameters params) on shares: its own ops select, equal to its
 * select() over the session's values at all 160 masks; its bytes and rounds into fig. */
static void on_shares(const char *proto, const char *policy, const char *name, const char *params,
                      char *fig, size_t cap)
{
    char out[1 << 14], want[200];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s' %s",
                  proto, policy, params);
    snprintf(want, sizeof want, "selection on shares from %s's own emitted ops", name);
    ck_assert_msg(strstr(out, want), "%s", out);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    ck_assert_msg(strstr(out, "equal to its select() over the session's own keys and values: yes "),
                  "%s", out);
    agreement(out);
    th_measured(out, fig, cap);
}

/* A composition and its hand-written policy on shares: the same bytes and rounds. */
static void pair_on(const char *proto, const char *yaml, const char *name, const char *policy,
                    const char *params, const char *extra)
{
    char a[400], b[400], both[400];
    snprintf(both, sizeof both, "%s %s", params, extra);
    on_shares(proto, th_data_path(yaml), name, both, a, sizeof a);
    on_shares(proto, policy, policy, params, b, sizeof b);
    ck_assert_str_eq(a, b);
}

static void snapkv_on(const char *proto)
{
    pair_on(proto, "scenarios/policies/snapkv.yaml", "snapkv_blocks", "snapkv",
            "--policy-param capacity=8 --policy-param window=4", "--policy-param recent=4");
}

static void pyramidkv_on(const char *proto)
{
    pair_on(proto, "scenarios/policies/pyramidkv.yaml", "pyramidkv_blocks", "pyramidkv",
            "--policy-param capacity=8 --policy-param window=4 --policy-param beta=2",
            "--policy-param recent=4");
}

START_TEST(test_snapkv_semi2k) { snapkv_on("semi2k"); }
END_TEST

START_TEST(test_snapkv_aby3) { snapkv_on("aby3"); }
END_TEST

START_TEST(test_pyramidkv_semi2k) { pyramidkv_on("semi2k"); }
END_TEST

START_TEST(test_pyramidkv_aby3) { pyramidkv_on("aby3"); }
END_TEST

/* A pyramid whose top layer keeps none of its candidates: capacity 8, window 4, beta 8 at
 * prompt 16 give (PyramidKV's pyramid, policy_pyramidkv.c pyr_budget) min = (8 − 4)/8 = 0,
 * max = 2·(8 − 4) − 0 = 8 < 16 − 4, steps (8 − 0)/4 = 2: layer l keeps 8 − 2l, layer 4 none.
 * Its decode steps name no rows among candidates [0, 12) and attend the window alone, on
 * shares, pyramidkv's and pyramidkv.yaml's alike: every op as predicted, all 160 masks its
 * select()'s (layer 4's among them), the same bytes and rounds. */
static void pyramid_zero_on(const char *proto)
{
    pair_on(proto, "scenarios/policies/pyramidkv.yaml", "pyramidkv_blocks", "pyramidkv",
            "--policy-param capacity=8 --policy-param window=4 --policy-param beta=8",
            "--policy-param recent=4");
}

START_TEST(test_pyramid_zero_semi2k) { pyramid_zero_on("semi2k"); }
END_TEST

START_TEST(test_pyramid_zero_aby3) { pyramid_zero_on("aby3"); }
END_TEST

/* A recent window shorter than the vote window: candidates past the voted entries, to which
 * select() gives no votes; the ops vote 0 for them too (the session kept the replay's kept
 * sets before, with a NOTE): on shares, every op as predicted, the 80 masks (5 layers x 4 KV
 * heads x 4 steps) its select()'s over the session's values or ties within its bound. */
START_TEST(test_short_recent_on_shares)
{
    char out[1 << 14];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 5 steps equal the prediction: yes",
                  "validate --model stories260K -p semi2k --accuracy 20 --prompt 16 --policy '%s' "
                  "--policy-param capacity=8 --policy-param window=4 --policy-param recent=2",
                  th_data_path("scenarios/policies/snapkv.yaml"));
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    ck_assert_msg(strstr(out, "selection on shares from snapkv_blocks's own emitted ops"), "%s",
                  out);
    th_own_select(out, 80);
}
END_TEST

/* The fraction "a/b" after `what` in out, asserted a = b > 0. */
static void all_of(const char *out, const char *what)
{
    const char *w = strstr(out, what);
    ck_assert_msg(w, "no '%s' in:\n%s", what, out);
    unsigned a = 0, b = 0;
    ck_assert_int_eq(sscanf(w + strlen(what), "%u/%u", &a, &b), 2);
    ck_assert_msg(a == b && b > 0, "%s %u/%u in:\n%s", what, a, b, out);
}

/* h2o.yaml (top 4, recent 4) and h2o (heavy 4, recent 4) on shares: H2O's session for both,
 * the same bytes and rounds, every selection whose secure margin exceeds the scores' error the
 * replay's. */
static void h2o_on(const char *proto)
{
    char out[1 << 14], ref[1 << 14], a[400], b[400];
    const char *cmd = "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s' "
                      "--policy-param %s=4 --policy-param recent=4";
    th_cli_expect(out, sizeof out, 0, "prediction: yes", cmd, proto,
                  th_data_path("scenarios/policies/h2o.yaml"), "topk");
    ck_assert_msg(strstr(out, "h2o_blocks selected on shares (heavy 4, recent 4)"), "%s", out);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    all_of(out, "exceeds twice that: ");
    ck_assert_msg(strstr(out, "minimum evicted): yes (180 of 180"), "%s", out);
    th_cli_expect(ref, sizeof ref, 0, "prediction: yes", cmd, proto, "h2o", "heavy");
    th_measured(out, a, sizeof a);
    th_measured(ref, b, sizeof b);
    ck_assert_str_eq(a, b);
}

START_TEST(test_h2o_semi2k) { h2o_on("semi2k"); }
END_TEST

START_TEST(test_h2o_aby3) { h2o_on("aby3"); }
END_TEST

/* H2O's blocks after two sinks (sinks 2, top 4, recent 4) on shares: H2O's session with the
 * sinks as public rows before the candidates. Its shapes are h2o's at heavy 4 and recent 6: the
 * same budget of 10 rows, the same 16 − 2 − 4 = 16 − 6 = 10 prompt candidates for a top 4, the
 * same 5 candidates per eviction, so the same bytes and rounds; every selection whose secure
 * margin exceeds the scores' error is the replay's, and no fallback note. */
static void h2o_sinks_on(const char *proto)
{
    char out[1 << 14], ref[1 << 14], a[400], b[400];
    const char *yaml = th_file(&td, "h2o_sinks.yaml",
                               "name: h2o_sinks_t\n"
                               "summary: sinks, heavy hitters and a recent window\n"
                               "sinks: 2\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "when: step\n"
                               "evict: permanent\n"
                               "select: {topk: 4}\n");
    const char *cmd = "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s' "
                      "%s";
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the prediction: yes", cmd,
                  proto, yaml, "");
    ck_assert_msg(strstr(out, "h2o_sinks_t selected on shares (heavy 4, recent 4, sinks 2)"), "%s",
                  out);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    all_of(out, "exceeds twice that: ");
    ck_assert_msg(strstr(out, "kept sets ") && strstr(strstr(out, "kept sets "), "/160"), "%s",
                  out);
    /* 5 layers x 4 KV heads x (the prompt's top 4 + 8 evictions) on the session's own scores */
    ck_assert_msg(strstr(out, "minimum evicted): yes (180 of 180"), "%s", out);
    th_cli_expect(ref, sizeof ref, 0, "prediction: yes", cmd, proto, "h2o",
                  "--policy-param heavy=4 --policy-param recent=6");
    th_measured(out, a, sizeof a);
    th_measured(ref, b, sizeof b);
    ck_assert_str_eq(a, b);
}

START_TEST(test_h2o_sinks_semi2k) { h2o_sinks_on("semi2k"); }
END_TEST

START_TEST(test_h2o_sinks_aby3) { h2o_sinks_on("aby3"); }
END_TEST

/* H2O's blocks with a dense first layer (`layers: {dense: 1}`, top 4, recent 4) on shares:
 * H2O's session, layer 0 carrying every row and selecting nothing, layers 1 … 4 selecting at
 * once. The audit counts 4 selecting layers x 4 KV heads x (the prompt's top 4 + 8
 * evictions) = 144 selections, each its rule over the session's own scores, and the kept sets
 * of all 5 layers (layer 0's every entry) against the replay's; no fallback note. */
static void h2o_dense_on(const char *proto)
{
    char out[1 << 14];
    const char *yaml = th_file(&td, "h2o_dense.yaml",
                               "name: h2o_dense_t\n"
                               "summary: a dense first layer, then heavy hitters\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "evict: permanent\n"
                               "layers: {dense: 1}\n"
                               "select: {topk: 4}\n");
    th_cli_expect(
        out, sizeof out, 0, "bytes and rounds of every op of the 9 steps equal the prediction: yes",
        "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'", proto, yaml);
    ck_assert_msg(strstr(out, "h2o_dense_t selected on shares (heavy 4, recent 4, dense layers 1)"),
                  "%s", out);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    all_of(out, "exceeds twice that: ");
    ck_assert_msg(strstr(out, "kept sets ") && strstr(strstr(out, "kept sets "), "/160"), "%s",
                  out);
    ck_assert_msg(strstr(out, "minimum evicted): yes (144 of 144"), "%s", out);
}

START_TEST(test_h2o_dense_semi2k) { h2o_dense_on("semi2k"); }
END_TEST

START_TEST(test_h2o_dense_aby3) { h2o_dense_on("aby3"); }
END_TEST

/* The accumulated attention one per layer and the newest row per KV head, evicting for good
 * (replayed before: the session kept the replay's kept sets with a note): H2O's session, the
 * first ranking the KV heads' summed scores, the second each step's column sums with no score
 * carried; every op as predicted, the 180 selections (5 layers x 4 KV heads x the prompt's top 4
 * and 8 evictions) each its rule over the session's own scores, every one differing from the
 * replay's from the same candidates a near tie (the audit's margin took the entries both sides
 * kept too before: "0 of them near ties, largest 19.1826"), in semi2k and aby3. */
START_TEST(test_h2o_more_cli)
{
    static const char *const yaml[2] = {"name: h2o_layer_t\nrecent: 4\nscore: attention\n"
                                        "share: layer\nevict: permanent\nselect: {topk: 4}\n",
                                        "name: h2o_last_t\nrecent: 4\n"
                                        "score: {attention: {accumulate: false}}\n"
                                        "evict: permanent\nselect: {topk: 4}\n"};
    static const char *const file[2] = {"h2o_layer.yaml", "h2o_last.yaml"};
    static const char *const shape[2] = {
        "h2o_layer_t selected on shares (heavy 4, recent 4, one per layer)",
        "h2o_last_t selected on shares (heavy 4, recent 4, the newest row)"};
    static const char *const protos[2] = {"semi2k", "aby3"};
    char out[1 << 14];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            th_cli_expect(out, sizeof out, 0,
                          "bytes and rounds of every op of the 9 steps equal the prediction: yes",
                          "validate --model stories260K -p %s --accuracy 24 --prompt 16 "
                          "--policy '%s'",
                          protos[j], th_file(&td, file[i], yaml[i]));
            ck_assert_msg(strstr(out, shape[i]), "%s", out);
            ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
            ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
            ck_assert_msg(strstr(out, "minimum evicted): yes (180 of 180"), "%s", out);
            /* a selection differing from the replay's from the same candidates is a near tie
             * (one per layer at prompt 16: a prompt set 9.77 against 9.84 summed) */
            const char *d = strstr(out, "differing selections: ");
            unsigned diff = 0, near = 0;
            if (d)
                ck_assert_int_eq(sscanf(d,
                                        "differing selections: %u from the same candidates, "
                                        "%u of them near ties",
                                        &diff, &near),
                                 2);
            ck_assert_msg(near == diff, "%s", out);
        }
}
END_TEST

Suite *attsec_suite(void)
{
    Suite *s = suite_create("attsec");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_check_blocks, test_snapkv_semi2k, test_snapkv_aby3, test_pyramidkv_semi2k,
             test_pyramidkv_aby3, test_short_recent_on_shares, test_h2o_semi2k, test_h2o_aby3,
             test_h2o_sinks_semi2k, test_h2o_sinks_aby3, test_pyramid_zero_semi2k,
             test_pyramid_zero_aby3, test_h2o_dense_semi2k, test_h2o_dense_aby3, test_h2o_more_cli);
    return s;
}
