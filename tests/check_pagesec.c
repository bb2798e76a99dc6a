/* check_pagesec.c — selections in whole pages on mpcsim's operands: the compositions' page
 * blocks (quest.yaml's page_bounds score, key_norm pooled to pages) emit the ops of
 * sim/policy/page_ops.c that quest emits, so `policy check` runs them against select() and
 * `validate --policy` runs them on secret shares, a partial last page's padding rows biased out
 * of the attention; quest.yaml's measured bytes and rounds equal quest's. A plug-in does the
 * same through the public header (ABI 1.2's selection_bias): tests/data/plugin_pagenorm.c,
 * built here, runs on shares, and a copy that names no bias keeps the replay's kept sets. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testdir.h"

TESTDIR("check_pagesec")

/* Sinks of two pages, the pages of 4 entries with the largest summed squared key norms. */
static const char kpages_yaml[] = "name: kpages_t\n"
                                  "summary: sinks and the pages of largest key norms\n"
                                  "sinks: 8\n"
                                  "score: key_norm\n"
                                  "granularity: {page: 4}\n"
                                  "select: {topk: 12}\n";

static char *kpages_path(void) { return strdup(th_file(&td, "kpages.yaml", kpages_yaml)); }

/* Beside a recent window: 4 sinks, the window of the last 3 entries (it starts inside a page at
 * three steps of four), pages of 4 scored by the query against their bounds (Quest's score)
 * or by their summed key norms, the top 8 entries (2 pages) at every step; the bounds beside
 * 2 sinks too (the first candidate page starts before the candidates). */
static const char questsw_yaml[] = "name: questsw_t\n"
                                   "summary: sinks, a window, the top pages by their bounds\n"
                                   "sinks: 4\n"
                                   "recent: 3\n"
                                   "score: page_bounds\n"
                                   "granularity: {page: 4}\n"
                                   "when: step\n"
                                   "select: {topk: 8}\n";
static const char questsu_yaml[] = "name: questsu_t\n"
                                   "summary: 2 sinks, a window, the top pages by their bounds\n"
                                   "sinks: 2\n"
                                   "recent: 3\n"
                                   "score: page_bounds\n"
                                   "granularity: {page: 4}\n"
                                   "when: step\n"
                                   "select: {topk: 8}\n";
static const char kpagesw_yaml[] = "name: kpagesw_t\n"
                                   "summary: sinks, a window, the pages of largest key norms\n"
                                   "sinks: 4\n"
                                   "recent: 3\n"
                                   "score: key_norm\n"
                                   "granularity: {page: 4}\n"
                                   "when: step\n"
                                   "select: {topk: 8}\n";

/* quest.yaml at pages of 4 over prompts of 30 (a partial last page at every other step) and 32:
 * its ops gather what its select() keeps, as quest's do. */
START_TEST(test_check_quest_blocks)
{
    char out[1 << 13];
    const char *yaml = th_data_path("scenarios/policies/quest.yaml");
    for (int P = 30; P <= 32; P += 2) {
        th_cli_expect(out, sizeof out, 0, "quest_blocks: match",
                      "policy check '%s' --param page=4 --param topk=12 --param min_units=1 "
                      "--prompt %d",
                      yaml, P);
        ck_assert_msg(strstr(out, "640 keep masks"), "%s", out);
        ck_assert_uint_ge(th_chosen(out), 300);
    }
}
END_TEST

/* key_norm pooled to pages after sinks of whole pages: match, at a partial last page too. */
START_TEST(test_check_keynorm_pages)
{
    char out[1 << 13];
    char *yaml = kpages_path();
    for (int P = 29; P <= 30; P++) {
        th_cli_expect(out, sizeof out, 0, "kpages_t: match", "policy check '%s' --prompt %d", yaml,
                      P);
        ck_assert_uint_eq(th_chosen(out), 640);
    }
    free(yaml);
}
END_TEST

/* Candidates that do not start at a page boundary (6 sinks: the first candidate page holds two
 * of them, biased out of the gathered rows as the window's are): match, every mask chosen by
 * the ops (placeholders and "cost declared", exit 1, before). With 7 sinks and 6 of the 7
 * candidate pages kept, both end pages partial, the step would attend 7 + 24 rows of its 30:
 * placeholders, the cost declared. */
START_TEST(test_check_unaligned)
{
    char out[1 << 13];
    char *yaml = kpages_path();
    for (int P = 29; P <= 30; P++) {
        th_cli_expect(out, sizeof out, 0, "kpages_t: match",
                      "policy check '%s' --param sinks=6 "
                      "--prompt %d",
                      yaml, P);
        ck_assert_uint_eq(th_chosen(out), 640);
    }
    th_cli_expect(out, sizeof out, 1, "kpages_t: cost declared",
                  "policy check '%s' --param sinks=7 --param topk=24 --prompt 30", yaml);
    free(yaml);
}
END_TEST

/* quest.yaml on shares (pages of 4 at 14, 15, 17, 18, … cached entries: partial last pages):
 * every op's bytes and rounds as predicted, the selection from its own ops, the audit finding
 * no padding attended and every kept set the replay's; the bytes and rounds quest's. */
static void quest_blocks_on(const char *proto)
{
    char out[1 << 14], ref[1 << 14], a[400], b[400];
    const char *yaml = th_data_path("scenarios/policies/quest.yaml");
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 14 --policy '%s' "
                  "--policy-param topk=12 --policy-param page=4 --policy-param min_units=1 "
                  "--policy-param dense_layers=0",
                  proto, yaml);
    ck_assert_msg(strstr(out, "selection on shares from quest_blocks's own emitted ops"), "%s",
                  out);
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    ck_assert_uint_eq(th_count_of(out, "#       equal to the plaintext replay's", "equal"), 160);
    th_cli_expect(ref, sizeof ref, 0, "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 14 --policy quest "
                  "--policy-param budget=12 --policy-param page=4 --policy-param min_pages=1 "
                  "--policy-param skip_layers=0",
                  proto);
    th_measured(out, a, sizeof a);
    th_measured(ref, b, sizeof b);
    ck_assert_str_eq(a, b);
}

START_TEST(test_quest_blocks_semi2k) { quest_blocks_on("semi2k"); }
END_TEST

START_TEST(test_quest_blocks_aby3) { quest_blocks_on("aby3"); }
END_TEST

/* quest on shares at pages of 4 (the top 2 of 4 … 6 pages after a prompt of 16) under both
 * gather layouts: the audit runs its select() over the session's own keys and query (the
 * query operand opened with the selection), so the float model's key drift does not count as
 * a difference; every mask equal to that select(), exactly or by a tie within the page
 * scores' bound, and validate exits 0. */
static void quest_audit_on(const char *proto, const char *layout)
{
    char out[1 << 14];
    th_cli_expect(out, sizeof out, 0, "prediction: yes",
                  "validate --model stories260K -p %s --set gather=%s --accuracy 24 --prompt 16 "
                  "--policy quest --policy-param page=4 --policy-param budget=8",
                  proto, layout);
    th_own_select(out, 160);
}

START_TEST(test_quest_audit)
{
    quest_audit_on("semi2k", "rows");
    quest_audit_on("semi2k", "scores");
    quest_audit_on("aby3", "rows");
    quest_audit_on("aby3", "scores");
}
END_TEST

/* key-norm pages on shares (prompt 14: partial last pages): bytes and rounds as predicted, and
 * on the session's own keys its ops choose what its select() chooses. */
static void kpages_on(const char *proto)
{
    char out[1 << 14];
    char *yaml = kpages_path();
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 14 --policy '%s' "
                  "--policy-param sinks=4 --policy-param topk=4",
                  proto, yaml);
    ck_assert_msg(strstr(out, "selection on shares from kpages_t's own emitted ops"), "%s", out);
    th_own_select(out, 160);
    free(yaml);
}

START_TEST(test_kpages_semi2k) { kpages_on("semi2k"); }
END_TEST

START_TEST(test_kpages_aby3) { kpages_on("aby3"); }
END_TEST

/* Pages beside sinks and a recent window: the last candidate page's rows past the candidates
 * (the window's, attended as public entries) are biased out like a partial page's padding, so
 * the ops gather what select() keeps (every mask chosen by the ops), where before such
 * compositions emitted placeholders ("cost declared", exit 1). */
START_TEST(test_check_window_pages)
{
    char out[1 << 13];
    char *yaml[2] = {strdup(th_file(&td, "questsw.yaml", questsw_yaml)),
                     strdup(th_file(&td, "kpagesw.yaml", kpagesw_yaml))};
    const char *name[2] = {"questsw_t: match", "kpagesw_t: match"};
    for (int i = 0; i < 2; i++) {
        for (int P = 29; P <= 30; P++) {
            th_cli_expect(out, sizeof out, 0, name[i], "policy check '%s' --prompt %d", yaml[i], P);
            ck_assert_uint_eq(th_chosen(out), 640);
        }
        free(yaml[i]);
    }
}
END_TEST

/* The same on shares (prompt 14: the candidates end inside a page, or the cache's last page is
 * partial, at every step): bytes and rounds as predicted, the selection from its own ops, every
 * mask equal to its select() over the session's own keys and query; the page score under both
 * gather layouts. */
static void window_pages_on(const char *proto, const char *layout, const char *file,
                            const char *text, const char *name)
{
    char out[1 << 14], own[80];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --set gather=%s --accuracy 22 --prompt 14 "
                  "--policy '%s'",
                  proto, layout, th_file(&td, file, text));
    snprintf(own, sizeof own, "selection on shares from %s's own emitted ops", name);
    ck_assert_msg(strstr(out, own), "%s", out);
    th_own_select(out, 160);
}

START_TEST(test_window_pages_shares)
{
    window_pages_on("semi2k", "rows", "questsw.yaml", questsw_yaml, "questsw_t");
    window_pages_on("semi2k", "scores", "questsw.yaml", questsw_yaml, "questsw_t");
    window_pages_on("aby3", "rows", "questsw.yaml", questsw_yaml, "questsw_t");
    window_pages_on("semi2k", "rows", "kpagesw.yaml", kpagesw_yaml, "kpagesw_t");
    /* 2 sinks: the first candidate page's two sink rows biased out as well */
    window_pages_on("semi2k", "rows", "questsu.yaml", questsu_yaml, "questsu_t");
    window_pages_on("aby3", "scores", "questsu.yaml", questsu_yaml, "questsu_t");
}
END_TEST

/* 5 sinks (off a page boundary), key-norm pages of 4 under a kv_budget fraction, whose k
 * pages, sinks and window follow the step's cached count: at prompt 16 kv_budget 0.5 keeps 8
 * entries, the 5 sinks and k = round(3/4) = 1 page, at every step at most the candidates
 * (kept the replay's kept sets before, the choice made from a fixed budget only); 0.25 keeps
 * 4 at the prompt, the sinks cut to 4 (a whole page), back to 5 sinks at 18 cached.
 * Each on shares, every op as predicted, 160 of 160 masks its select()'s; `policy check` a
 * match, every mask chosen by the ops. */
static const char pagekv_yaml[] = "name: pagekv_t\n"
                                  "summary: 5 sinks, the key-norm pages of a kv_budget\n"
                                  "sinks: 5\n"
                                  "score: key_norm\n"
                                  "granularity: {page: 4}\n"
                                  "select: {topk: 8}\n"
                                  "kv_budget: {recent: fixed}\n";

START_TEST(test_kv_budget_pages)
{
    char out[1 << 14];
    const char *yaml = th_file(&td, "pagekv.yaml", pagekv_yaml);
    const char *const fr[2] = {"0.5", "0.25"}, *const pn[2] = {"semi2k", "aby3"};
    for (int f = 0; f < 2; f++) {
        for (int i = 0; i < 2; i++) {
            th_cli_expect(out, sizeof out, 0,
                          "bytes and rounds of every op of the 9 steps equal the prediction: yes",
                          "validate --model stories260K -p %s --accuracy 24 --prompt 16 "
                          "--policy '%s' --policy-param kv_budget=%s",
                          pn[i], yaml, fr[f]);
            ck_assert_msg(strstr(out, "selection on shares from pagekv_t's own emitted ops"), "%s",
                          out);
            th_own_select(out, 160);
        }
        th_cli_expect(out, sizeof out, 0, "pagekv_t: match",
                      "policy check '%s' --param kv_budget=%s --prompt 16", yaml, fr[f]);
        ck_assert_uint_eq(th_chosen(out), 640);
    }
}
END_TEST

/* tests/data/plugin_pagenorm.c with `from` replaced by `to` (once, asserted; NULL: as is),
 * built into <test dir>/<name>.so with the public header alone. Returns the .so's path. */
static char *pagenorm(const char *name, const char *from, const char *to)
{
    const char *const swap[1][2] = {{from, to}};
    return th_plugin_variant(&td, "tests/data/plugin_pagenorm.c", name, swap, from ? 1 : 0);
}

/* The plug-in's ops gather what its select() keeps, partial last pages included. */
START_TEST(test_plugin_check)
{
    char out[1 << 13];
    char *so = pagenorm("pn_check", NULL, NULL);
    for (int P = 29; P <= 30; P++) {
        th_cli_expect(out, sizeof out, 0, "pagenorm (plug-in", "policy check '%s' --prompt %d", so,
                      P);
        ck_assert_msg(strstr(out, "): match"), "%s", out);
        ck_assert_uint_eq(th_chosen(out), 640);
    }
    free(so);
}
END_TEST

/* On shares (prompt 14, pages of 4 after 4 sinks: a partial last page at every other step),
 * with the bias: its own selection, equal to its select() on the session's keys; the same
 * bytes and rounds as the composition of the same blocks. */
static void plugin_on(const char *proto)
{
    char out[1 << 14], ref[1 << 14], a[400], b[400];
    char *so = pagenorm("pn_shares", NULL, NULL), *yaml = kpages_path();
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 14 --policy '%s' "
                  "--policy-param sink=4 --policy-param pages=1",
                  proto, so);
    ck_assert_msg(strstr(out, "selection on shares from pagenorm's own emitted ops"), "%s", out);
    th_own_select(out, 160);
    th_cli_expect(ref, sizeof ref, 0, "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 14 --policy '%s' "
                  "--policy-param sinks=4 --policy-param topk=4",
                  proto, yaml);
    th_measured(out, a, sizeof a);
    th_measured(ref, b, sizeof b);
    ck_assert_str_eq(a, b);
    free(so);
    free(yaml);
}

START_TEST(test_plugin_semi2k) { plugin_on("semi2k"); }
END_TEST

START_TEST(test_plugin_aby3) { plugin_on("aby3"); }
END_TEST

/* The same plug-in naming no bias: padding would be attended, so the session keeps the
 * replay's kept sets and says so. */
START_TEST(test_plugin_no_bias)
{
    char out[1 << 14];
    char *so = pagenorm("pn_nobias", "    api->selection_bias(b, bias);", "    (void)bias;");
    th_cli_expect(out, sizeof out, 0, "NOTE: pagenorm has no selection on shares",
                  "validate --model stories260K -p semi2k --accuracy 22 --prompt 14 --policy '%s' "
                  "--policy-param sink=4 --policy-param pages=1",
                  so);
    ck_assert_msg(!strstr(out, "selection on shares from pagenorm's own"), "%s", out);
    free(so);
}
END_TEST

/* A selection shared across layers (`share: {layers: 2}`) at every step, by key norms of tokens
 * (a window of 4, the top 6) and of pages of 4 (4 sinks, the top 2 pages), and by the query
 * against the pages' bounds (Quest's score, the same pages): the first layer of
 * each pair (layers 0, 2, 4 of stories260K's 5) selects on shares and leaves its one-hot rows in
 * state; layers 1 and 3 gather their own cached rows by them in the same step
 * (compose_shlay.c). 5 layers x 4 KV heads x 8 steps = 160 masks, each equal to its select()
 * over the session's keys (the shared ones included: a follower keeps its leader's positions).
 * Before, the session kept the replay's kept sets with a NOTE ("has no selection on shares"). */
/* Pages `once` (key norms, 4 sinks and a window of 4, the top page) and every N steps (the
 * bounds every 2 in groups of 3 beside 4 sinks; key norms every 3 beside a window): a later
 * layer gathers its own pages by its leader's one-hot rows at the selecting steps and carries
 * them, as its leader does, to the steps between (before: a NOTE, "cost declared"; and select()
 * chose a later layer's pages by its own query against its leader's bounds every N steps). */
#define N_SHL 6
static const char *const shl_yaml[N_SHL] = {
    "name: shl_tok\nrecent: 4\nscore: key_norm\nshare: {heads: kv_head, layers: 2}\n"
    "select: {topk: 6}\n",
    "name: shl_pg\nsinks: 4\nscore: key_norm\ngranularity: {page: 4}\n"
    "share: {heads: kv_head, layers: 2}\nselect: {topk: 8}\n",
    "name: shl_pb\nsinks: 4\nscore: page_bounds\ngranularity: {page: 4}\n"
    "share: {heads: kv_head, layers: 2}\nselect: {topk: 8}\n",
    "name: shl_pgo\nsinks: 4\nrecent: 4\nscore: key_norm\ngranularity: {page: 4}\nwhen: once\n"
    "share: {heads: kv_head, layers: 2}\nselect: {topk: 4}\n",
    "name: shl_pbe\nsinks: 4\nscore: page_bounds\ngranularity: {page: 4}\nwhen: {every: 2}\n"
    "share: {heads: kv_head, layers: 3}\nselect: {topk: 8}\n",
    "name: shl_pge\nrecent: 4\nscore: key_norm\ngranularity: {page: 4}\nwhen: {every: 3}\n"
    "share: {heads: kv_head, layers: 2}\nselect: {topk: 8}\n"};
static const char *const shl_file[N_SHL] = {"shl_tok.yaml", "shl_pg.yaml",  "shl_pb.yaml",
                                            "shl_pgo.yaml", "shl_pbe.yaml", "shl_pge.yaml"};
static const char *const shl_name[N_SHL] = {"shl_tok", "shl_pg",  "shl_pb",
                                            "shl_pgo", "shl_pbe", "shl_pge"};

static void shared_layers_on(const char *proto)
{
    char out[1 << 14], own[120];
    for (int i = 0; i < N_SHL; i++) {
        char *f = strdup(th_file(&td, shl_file[i], shl_yaml[i]));
        th_cli_expect(out, sizeof out, 0,
                      "bytes and rounds of every op of the 9 steps equal the prediction: yes",
                      "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'",
                      proto, f);
        ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
        snprintf(own, sizeof own, "selection on shares from %s's own emitted ops", shl_name[i]);
        ck_assert_msg(strstr(out, own), "%s", out);
        th_own_select(out, 160);
        free(f);
    }
}

START_TEST(test_shared_layers_semi2k) { shared_layers_on("semi2k"); }
END_TEST

START_TEST(test_shared_layers_aby3) { shared_layers_on("aby3"); }
END_TEST

/* Their ops gather what select() keeps, a follower's rows by its leader's one-hot: every one of
 * the 640 masks chosen by the ops (before: "cost declared", the ops taking no operands). */
START_TEST(test_shared_layers_check)
{
    char out[1 << 13], want[40];
    for (int i = 0; i < N_SHL; i++) {
        char *f = strdup(th_file(&td, shl_file[i], shl_yaml[i]));
        snprintf(want, sizeof want, "%s: match", shl_name[i]);
        th_cli_expect(out, sizeof out, 0, want, "policy check '%s' --prompt 16", f);
        ck_assert_uint_eq(th_chosen(out), 640);
        free(f);
    }
}
END_TEST

Suite *pagesec_suite(void)
{
    Suite *s = suite_create("pagesec");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_check_quest_blocks, test_check_keynorm_pages, test_check_unaligned,
             test_quest_blocks_semi2k, test_quest_blocks_aby3, test_quest_audit, test_kpages_semi2k,
             test_kpages_aby3, test_plugin_check, test_plugin_semi2k, test_plugin_aby3,
             test_plugin_no_bias, test_check_window_pages, test_window_pages_shares,
             test_shared_layers_semi2k, test_shared_layers_aby3, test_shared_layers_check,
             test_kv_budget_pages);
    return s;
}
