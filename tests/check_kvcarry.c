/* check_kvcarry.c — compositions whose selection is carried in state from step to step, on
 * mpcsim's operands: pages selected once after the prompt or every N decode steps
 * (page_ops.c page_select_carry, page_select_kept: the gathered pages, their entries' scores
 * and their biases carried in state), by summed key norms or by the query against the pages'
 * bounds; and key norms evicting for good (compose_knperm.c: H2O's table of kept rows with
 * their norm, an arg-min eviction and a compaction at every step). `validate --policy` runs them on
 * secret shares in semi2k and aby3 (every op as predicted, each decode mask equal to its select()
 * over the session's own values), and `policy check` finds their ops' kept sets equal to
 * select()'s. Each of them kept the plaintext replay's kept sets with a NOTE before, and policy
 * check said "cost declared". */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testdir.h"

TESTDIR("check_kvcarry")

/* The pages of 4 with the largest summed key norms, the top 8 entries (2 of the prompt's 4
 * pages) chosen once after the prompt (notes' pgonce shape). */
static const char pgonce_yaml[] = "name: pgonce_t\nscore: key_norm\ngranularity: {page: 4}\n"
                                  "when: once\nselect: {topk: 8}\n";
/* The same re-chosen every 2 decode steps (at 18 and 20 cached entries the last candidate page
 * is partial: its rows past the cached ones padding, biased out, carried to the step after). */
static const char pgevery_yaml[] = "name: pgevery_t\nscore: key_norm\ngranularity: {page: 4}\n"
                                   "when: {every: 2}\nselect: {topk: 8}\n";
/* Once beside 4 sinks and a window of 2 that ends inside the last candidate page (its window
 * rows gathered with it, biased out). */
static const char pgoncew_yaml[] = "name: pgoncew_t\nsinks: 4\nrecent: 2\nscore: key_norm\n"
                                   "granularity: {page: 4}\nwhen: once\nselect: {topk: 8}\n";
/* Quest's bound score every 2 decode steps beside 4 sinks and a window of 3: the selecting
 * step's query against the pages' bounds, the carried scores those of that query. */
static const char pgbevery_yaml[] = "name: pgbevery_t\nsinks: 4\nrecent: 3\nscore: page_bounds\n"
                                    "granularity: {page: 4}\nwhen: {every: 2}\n"
                                    "select: {topk: 8}\n";

/* Key norms evicting for good beside a window of 4 (notes' knperm shape): the prompt's top 6 of
 * its 12 candidates, then at every step the least norm of the 6 kept and the entry leaving the
 * window evicted. */
static const char knperm_yaml[] = "name: knperm_t\nrecent: 4\nscore: key_norm\n"
                                  "evict: permanent\nselect: {topk: 6}\n";
/* The same beside 2 sinks, a window of 3, the top 5. */
static const char knperms_yaml[] = "name: knperms_t\nsinks: 2\nrecent: 3\nscore: key_norm\n"
                                   "evict: permanent\nselect: {topk: 5}\n";
/* One selection per layer (`share: layer`): the KV heads' norms summed, one top-k at the prompt
 * and one arg-min per step for the layer, each KV head's own rows gathered and compacted by
 * them; beside 2 sinks and a window of 4, the top 6. */
static const char knpermsh_yaml[] = "name: knpermsh_t\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                    "evict: permanent\nshare: layer\nselect: {topk: 6}\n";

/* Prompt 16, 8 decode steps: 5 layers x 4 KV heads x 8 steps = 160 masks, each equal to its
 * select() over the session's values, every op as predicted, no NOTE. */
static void carry_on(const char *proto, const char *file, const char *text, const char *name)
{
    char out[1 << 14], own[120];
    char *yaml = strdup(th_file(&td, file, text));
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'",
                  proto, yaml);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    snprintf(own, sizeof own, "selection on shares from %s's own emitted ops", name);
    ck_assert_msg(strstr(out, own), "%s", out);
    th_own_select(out, 160);
    free(yaml);
}

/* policy check over 32 decode steps: 5 x 4 x 32 = 640 masks, every one chosen by the ops. */
static void carry_check(const char *file, const char *text, const char *name)
{
    char out[1 << 13], want[80];
    char *yaml = strdup(th_file(&td, file, text));
    snprintf(want, sizeof want, "%s: match", name);
    th_cli_expect(out, sizeof out, 0, want, "policy check '%s' --prompt 16", yaml);
    ck_assert_uint_eq(th_chosen(out), 640);
    free(yaml);
}

START_TEST(test_pgonce_semi2k) { carry_on("semi2k", "pgonce.yaml", pgonce_yaml, "pgonce_t"); }
END_TEST

START_TEST(test_pgonce_aby3) { carry_on("aby3", "pgonce.yaml", pgonce_yaml, "pgonce_t"); }
END_TEST

START_TEST(test_pgevery_semi2k) { carry_on("semi2k", "pgevery.yaml", pgevery_yaml, "pgevery_t"); }
END_TEST

START_TEST(test_pgevery_aby3) { carry_on("aby3", "pgevery.yaml", pgevery_yaml, "pgevery_t"); }
END_TEST

START_TEST(test_pgoncew_semi2k) { carry_on("semi2k", "pgoncew.yaml", pgoncew_yaml, "pgoncew_t"); }
END_TEST

START_TEST(test_pgoncew_aby3) { carry_on("aby3", "pgoncew.yaml", pgoncew_yaml, "pgoncew_t"); }
END_TEST

START_TEST(test_pgbevery_semi2k)
{
    carry_on("semi2k", "pgbevery.yaml", pgbevery_yaml, "pgbevery_t");
}
END_TEST

START_TEST(test_pgbevery_aby3) { carry_on("aby3", "pgbevery.yaml", pgbevery_yaml, "pgbevery_t"); }
END_TEST

START_TEST(test_pages_carried_check)
{
    carry_check("pgonce.yaml", pgonce_yaml, "pgonce_t");
    carry_check("pgevery.yaml", pgevery_yaml, "pgevery_t");
    carry_check("pgoncew.yaml", pgoncew_yaml, "pgoncew_t");
    carry_check("pgbevery.yaml", pgbevery_yaml, "pgbevery_t");
}
END_TEST

START_TEST(test_knperm_semi2k) { carry_on("semi2k", "knperm.yaml", knperm_yaml, "knperm_t"); }
END_TEST

START_TEST(test_knperm_aby3) { carry_on("aby3", "knperm.yaml", knperm_yaml, "knperm_t"); }
END_TEST

START_TEST(test_knperms_semi2k) { carry_on("semi2k", "knperms.yaml", knperms_yaml, "knperms_t"); }
END_TEST

START_TEST(test_knperms_aby3) { carry_on("aby3", "knperms.yaml", knperms_yaml, "knperms_t"); }
END_TEST

START_TEST(test_knpermsh_semi2k)
{
    carry_on("semi2k", "knpermsh.yaml", knpermsh_yaml, "knpermsh_t");
}
END_TEST

START_TEST(test_knpermsh_aby3) { carry_on("aby3", "knpermsh.yaml", knpermsh_yaml, "knpermsh_t"); }
END_TEST

START_TEST(test_knperm_check)
{
    carry_check("knperm.yaml", knperm_yaml, "knperm_t");
    carry_check("knperms.yaml", knperms_yaml, "knperms_t");
    carry_check("knpermsh.yaml", knpermsh_yaml, "knpermsh_t");
    /* under a kv_budget of half the prompt: 8 entries, the sinks, the window and the top 2 */
    char out[1 << 13];
    char *yaml = strdup(th_file(&td, "knpermsh.yaml", knpermsh_yaml));
    th_cli_expect(out, sizeof out, 0, "knpermsh_t: match",
                  "policy check '%s' --prompt 16 --param kv_budget=0.5", yaml);
    ck_assert_uint_eq(th_chosen(out), 640);
    free(yaml);
}
END_TEST

/* Once, candidate pages that reach past a prompt of 14 (pages 0 … 3, the last holding 12 and 13
 * and two entries not yet cached): gathered at the prompt with zero rows for them, biased out,
 * the entries cached later attended as public ones. 11 steps: 5 x 4 x 10 = 200 masks, each
 * equal to its select(); policy check a match. It kept the replay's kept sets with the NOTE
 * before (its ops would have read rows the prompt does not have). */
START_TEST(test_pgonce_partial_prompt)
{
    static const char *const pn[] = {"semi2k", "aby3"};
    char out[1 << 14];
    char *yaml = strdup(th_file(&td, "pgonce.yaml", pgonce_yaml));
    th_cli_expect(out, sizeof out, 0, "bytes and rounds of every op of the 11 steps equal",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 14 --policy '%s'",
                  pn[_i], yaml);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    ck_assert_msg(strstr(out, "selection on shares from pgonce_t's own emitted ops"), "%s", out);
    th_own_select(out, 200);
    th_cli_expect(out, sizeof out, 0, "pgonce_t: match", "policy check '%s' --prompt 14", yaml);
    ck_assert_uint_eq(th_chosen(out), 640);
    free(yaml);
}
END_TEST

/* A page top-k whose count is below one page (`topk: 1` or 2 with pages of 4: k = 0 pages) keeps
 * the sinks and the window (of its last selecting step, with every entry cached since): public
 * positions, named by each decode step with no score. Before, key-norm pages attended every
 * cached entry on shares (the audit failed, "cost declared") and page bounds stopped the session
 * ("op 37 (view): bad input": a top-0 of the pages). At every step it costs what sinks and a
 * window alone cost (sw_yaml). */
static const char *const nok_yaml[4] = {
    "name: nok_t\nsinks: 2\nrecent: 4\nscore: key_norm\ngranularity: {page: 4}\n"
    "select: {topk: 1}\n",
    "name: nokb_t\nsinks: 2\nrecent: 4\nscore: page_bounds\ngranularity: {page: 4}\n"
    "select: {topk: 2}\n",
    "name: noko_t\nsinks: 2\nrecent: 4\nscore: key_norm\ngranularity: {page: 4}\n"
    "when: once\nselect: {topk: 2}\n",
    "name: nokbe_t\nsinks: 2\nrecent: 4\nscore: page_bounds\ngranularity: {page: 4}\n"
    "when: {every: 3}\nselect: {topk: 2}\n"};
static const char *const nok_name[4] = {"nok_t", "nokb_t", "noko_t", "nokbe_t"};
static const char sw_yaml[] = "name: sw_t\nsinks: 2\nrecent: 4\n";

START_TEST(test_no_topk_public)
{
    static const char *const pn[] = {"semi2k", "aby3"};
    char out[1 << 14], f[32], want[80];
    unsigned long long v[4], w[4];
    unsigned steps;
    char *sw = strdup(th_file(&td, "sw.yaml", sw_yaml));
    th_cli_expect(out, sizeof out, 0, "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'",
                  pn[_i], sw);
    th_measured_nums(out, w, &steps);
    for (int i = 0; i < 4; i++) {
        snprintf(f, sizeof f, "nok%d.yaml", i);
        char *yaml = strdup(th_file(&td, f, nok_yaml[i]));
        th_cli_expect(out, sizeof out, 0, "prediction: yes",
                      "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'",
                      pn[_i], yaml);
        ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
        ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
        /* page bounds' select() reads the query its public selection does not: compared with
         * the replay's kept sets */
        ck_assert_msg(strstr(out, "equal to its select() over the session's own keys and values: "
                                  "yes (160 equal") ||
                          strstr(out, "equal to the plaintext replay's (float model): yes (160 "
                                      "equal"),
                      "%s", out);
        th_measured_nums(out, v, &steps);
        if (i < 2) /* at every step: the sinks' and the window's cost */
            ck_assert_msg(v[2] == w[2] && v[3] == w[3], "decode %llu B / %llu rounds, %llu / %llu",
                          v[2], v[3], w[2], w[3]);
        snprintf(want, sizeof want, "%s: match", nok_name[i]);
        th_cli_expect(out, sizeof out, 0, want, "policy check '%s' --prompt 16", yaml);
        ck_assert_uint_eq(th_chosen(out), 640);
        free(yaml);
    }
    free(sw);
}
END_TEST

/* Evicting for good with no top-k left (`kv_budget: {recent: rest}`: the window what the sinks
 * leave of round(F·P) entries, k = 0 at every step): select() keeps the sinks and the window of
 * its alive set, public positions, named by each decode step with no score; per KV head, and one
 * per layer over a dense first layer. At kv_budget 0.5 of a 16-entry prompt (2 sinks, a window
 * of 6) each costs what 2 sinks and a window of 6 alone cost. Replayed before (NOTE, "cost
 * declared"). */
static const char *const nokp_yaml[2] = {
    "name: nokp_t\nsinks: 2\nrecent: 4\nscore: key_norm\nevict: permanent\n"
    "kv_budget: {recent: rest}\nselect: {topk: 6}\n",
    "name: nokpl_t\nsinks: 2\nrecent: 4\nscore: key_norm\nevict: permanent\nshare: layer\n"
    "layers: {dense: 1}\nkv_budget: {recent: rest}\nselect: {topk: 6}\n"};
static const char *const nokp_name[2] = {"nokp_t", "nokpl_t"};

START_TEST(test_no_topk_permanent)
{
    static const char *const pn[] = {"semi2k", "aby3"};
    char out[1 << 14], f[32], want[80], own[96];
    unsigned long long v[4], w[4];
    unsigned steps;
    char *sw = strdup(th_file(&td, "sw6.yaml", "name: sw6_t\nsinks: 2\nrecent: 6\n"));
    th_cli_expect(out, sizeof out, 0, "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'",
                  pn[_i], sw);
    th_measured_nums(out, w, &steps);
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "nokp%d.yaml", i);
        char *yaml = strdup(th_file(&td, f, nokp_yaml[i]));
        th_cli_expect(out, sizeof out, 0, "prediction: yes",
                      "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s' "
                      "--policy-param kv_budget=0.5",
                      pn[_i], yaml);
        ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
        snprintf(own, sizeof own, "selection on shares from %s's own emitted ops", nokp_name[i]);
        ck_assert_msg(strstr(out, own), "%s", out);
        th_own_select(out, 160);
        th_measured_nums(out, v, &steps);
        ck_assert_msg(v[2] == w[2] && v[3] == w[3], "decode %llu B / %llu rounds, %llu / %llu",
                      v[2], v[3], w[2], w[3]);
        snprintf(want, sizeof want, "%s: match", nokp_name[i]);
        th_cli_expect(out, sizeof out, 0, want,
                      "policy check '%s' --prompt 16 --param kv_budget=0.5", yaml);
        ck_assert_uint_eq(th_chosen(out), 640);
        free(yaml);
    }
    free(sw);
}
END_TEST

Suite *kvcarry_suite(void)
{
    Suite *s = suite_create("kvcarry");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_pgonce_semi2k, test_pgonce_aby3, test_pgevery_semi2k, test_pgevery_aby3,
             test_pgoncew_semi2k, test_pgoncew_aby3, test_pgbevery_semi2k, test_pgbevery_aby3,
             test_pages_carried_check, test_knperm_semi2k, test_knperm_aby3, test_knperms_semi2k,
             test_knperms_aby3, test_knpermsh_semi2k, test_knpermsh_aby3, test_knperm_check);
    TH_LOOPS(tc, 2, test_pgonce_partial_prompt);
    TH_LOOPS(tc, 2, test_no_topk_public);
    TH_LOOPS(tc, 2, test_no_topk_permanent);
    return s;
}
