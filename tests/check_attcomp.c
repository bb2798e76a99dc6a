/* check_attcomp.c — attention-scored token compositions that re-select at every step (no `evict:
 * permanent`) on mpcsim's operands (sim/policy/compose_att.c): the accumulated attention and the
 * newest query's row, a recent window of 4 and the top 6 of the other cached entries. `policy
 * check` runs their ops against select(), `validate --policy` on secret shares (semi2k, aby3):
 * no replayed kept sets, every op's bytes and rounds as predicted, every decode mask equal to
 * select() over the session's own values. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "testdir.h"

TESTDIR("check_attcomp")

static const char acc_yaml[] = "name: attacc_t\n"
                               "summary: a window and the top entries by accumulated attention\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "select: {topk: 6}\n";
static const char last_yaml[] = "name: attlast_t\n"
                                "summary: a window and the top entries by the newest row\n"
                                "recent: 4\n"
                                "score: {attention: {accumulate: false}}\n"
                                "select: {topk: 6}\n";

/* The same shared across pairs of layers (`share: {heads: kv_head, layers: 2}`): layers 0, 2
 * and 4 rank and select; 1 and 3 gather their own rows by the one-hot rows of the layer before
 * (compose_shlay.c), the ties their leader's. Each kept the replay's kept sets with a NOTE, and
 * policy check said "cost declared". */
static const char accshl_yaml[] = "name: attaccshl_t\n"
                                  "summary: the top entries by accumulated attention per 2 layers\n"
                                  "recent: 4\n"
                                  "score: attention\n"
                                  "share: {heads: kv_head, layers: 2}\n"
                                  "select: {topk: 6}\n";
static const char lastshl_yaml[] = "name: attlastshl_t\n"
                                   "summary: the top entries by the newest row per 2 layers\n"
                                   "recent: 4\n"
                                   "score: {attention: {accumulate: false}}\n"
                                   "share: {heads: kv_head, layers: 2}\n"
                                   "select: {topk: 6}\n";

/* Every mask of the check's 32 decode steps chosen by the ops: stories260K's 5 layers × 4 KV
 * heads × 32 steps (every step has 28 or more candidates beyond the window, above 6). */
static void check_on(const char *file, const char *text, const char *name)
{
    char out[1 << 13], want[64];
    snprintf(want, sizeof want, "%s: match", name);
    th_cli_expect(out, sizeof out, 0, want, "policy check '%s'", th_file(&td, file, text));
    ck_assert_uint_eq(th_chosen(out), 5 * 4 * 32);
}

START_TEST(test_check_att_blocks)
{
    check_on("acc.yaml", acc_yaml, "attacc_t");
    check_on("last.yaml", last_yaml, "attlast_t");
}
END_TEST

START_TEST(test_check_att_shared_layers)
{
    check_on("accshl.yaml", accshl_yaml, "attaccshl_t");
    check_on("lastshl.yaml", lastshl_yaml, "attlastshl_t");
}
END_TEST

/* On shares, prompt 16 (12 candidates at the first step): its own selection, no NOTE, 160
 * masks (5 layers × 4 KV heads × 8 decode steps) equal to select() over the session's values. */
static void shares_on(const char *proto, const char *file, const char *text, const char *name)
{
    char out[1 << 14], own[80];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'",
                  proto, th_file(&td, file, text));
    ck_assert_msg(!strstr(out, "NOTE"), "%s", out);
    snprintf(own, sizeof own, "selection on shares from %s's own emitted ops", name);
    ck_assert_msg(strstr(out, own), "%s", out);
    th_own_select(out, 5 * 4 * 8);
}

START_TEST(test_att_last_shares)
{
    shares_on("semi2k", "last.yaml", last_yaml, "attlast_t");
    shares_on("aby3", "last.yaml", last_yaml, "attlast_t");
}
END_TEST

START_TEST(test_att_acc_shares)
{
    shares_on("semi2k", "acc.yaml", acc_yaml, "attacc_t");
    shares_on("aby3", "acc.yaml", acc_yaml, "attacc_t");
}
END_TEST

START_TEST(test_att_shared_layers_shares)
{
    shares_on("semi2k", "accshl.yaml", accshl_yaml, "attaccshl_t");
    shares_on("aby3", "accshl.yaml", accshl_yaml, "attaccshl_t");
    shares_on("semi2k", "lastshl.yaml", lastshl_yaml, "attlastshl_t");
    shares_on("aby3", "lastshl.yaml", lastshl_yaml, "attlastshl_t");
}
END_TEST

Suite *attcomp_suite(void)
{
    Suite *s = suite_create("attcomp");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_check_att_blocks, test_att_last_shares, test_att_acc_shares,
             test_check_att_shared_layers, test_att_shared_layers_shares);
    return s;
}
