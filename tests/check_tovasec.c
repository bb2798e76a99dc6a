/* check_tovasec.c — TOVA on secret shares: its decode ops read the step's new [K | V] row
 * (PCHECK_IN_KV_NEW) and the step's attention over its slots, then the new entry
 * (PCHECK_IN_ATT_SLOTS), which the session binds as views of the layer's caches after the
 * append and of its probabilities after the softmax; the slots it attends are gathered before
 * the scores, the arg-min and the slots' compaction follow the softmax. Over stories260K
 * (prompt 16 > cache_size 8, 8 decode steps: 5 layers x 4 KV heads x 8 steps = 160 decode
 * masks, every one after the prompt's eviction): no fallback note, every op's bytes and rounds
 * as predicted, and every kept set its select()'s over the session's own values (exactly or by
 * ties). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* validate of tova (cache_size 8) on shares under proto, its measured line read. */
static void tova_on(const char *proto)
{
    char out[1 << 14], fig[400];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy tova "
                  "--policy-param cache_size=8",
                  proto);
    ck_assert_msg(!strstr(out, "NOTE: tova has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    ck_assert_msg(strstr(out, "selection on shares from tova's own emitted ops (the selection "
                              "opened for the audit only), 160 decode masks"),
                  "%s", out);
    ck_assert_msg(strstr(out, "equal to its select() over the session's own keys and values: yes "),
                  "%s", out);
    unsigned eq = th_count_of(out, "#       equal to its select()", "equal"),
             ties = th_count_of(out, "#       equal to its select()", "ties");
    ck_assert_uint_eq(eq + ties, 160);
    th_measured(out, fig, sizeof fig);
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

Suite *tovasec_suite(void)
{
    Suite *s = suite_create("tovasec");
    TCase *tc = th_case(s, "core", 0);
    TH_TESTS(tc, test_tova_semi2k, test_tova_aby3, test_tova_prompt_within_cache);
    return s;
}
