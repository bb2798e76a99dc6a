/* check_attcomp.c — attention-scored token compositions that re-select at every step (no `evict:
 * permanent`) on mpcsim's operands (sim/policy/compose_att.c): the accumulated attention and the
 * newest query's row, a recent window of 4 and the top 6 of the other cached entries, beside 2
 * attention sinks, and under a kv_budget fraction (the top-k the rest of round(F·T) entries at T
 * cached), with PyramidKV's per-layer counts, with a dense first layer and selecting every N
 * steps (the steps between attend the last selection and every entry cached since). `policy check`
 * runs their ops against select(), `validate --policy` on secret shares (semi2k, aby3): no replayed
 * kept sets, every op's bytes and rounds as predicted, every decode mask equal to select() over the
 * session's own values. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
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

static const char sink_yaml[] = "name: attsink_t\n"
                                "summary: sinks, a window and the top entries by attention\n"
                                "sinks: 2\n"
                                "recent: 4\n"
                                "score: attention\n"
                                "select: {topk: 6}\n";
static const char sinklast_yaml[] = "name: attsinklast_t\n"
                                    "summary: sinks, a window and the top entries by the newest "
                                    "row\n"
                                    "sinks: 2\n"
                                    "recent: 4\n"
                                    "score: {attention: {accumulate: false}}\n"
                                    "select: {topk: 6}\n";
/* kv_budget 0.5 keeps n = round(T/2) of T cached entries (8 at the prompt of 16, 12 at 24): the 2
 * sinks, the window of 4 and a top-k of n − 6 (2 … 6 over the validate's 9 steps, to 18 over the
 * check's 32): its state changes size from step to step. */
static const char kvb_yaml[] = "name: attkvb_t\n"
                               "summary: sinks, a window and the top of half the cache\n"
                               "sinks: 2\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "select: {topk: 6}\n"
                               "kv_budget: {recent: fixed}\n";
/* The same with the window a share of the budget: ⌈n'/2⌉ of the n' = n − 2 entries beside the
 * sinks, the top-k the rest (both grow with T). */
static const char kvs_yaml[] = "name: attkvs_t\n"
                               "summary: sinks, a window and the top-k sharing a budget\n"
                               "sinks: 2\n"
                               "recent: 4\n"
                               "score: {attention: {accumulate: false}}\n"
                               "select: {topk: 6}\n"
                               "kv_budget: {recent: 0.5}\n";

/* A pyramid (PyramidKV's counts of a capacity 10 beside the window of 4, β 2, over 5 layers at
 * prompt 16: top-k 9, 8, 7, 6, 5 from layer 0 to 4, each below the 12 candidates). */
static const char pyr_yaml[] = "name: attpyr_t\n"
                               "summary: a window and a pyramid of top-k counts\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "layers: {pyramid: {beta: 2}}\n"
                               "select: {topk: {capacity: 10}}\n";
/* The same counts with 2 sinks under kv_budget 0.75 (capacity round(0.75·16) = 12 of which the
 * sinks and window take 6), the newest row's scores. */
static const char pyrs_yaml[] = "name: attpyrs_t\n"
                                "summary: sinks, a window and a pyramid by the newest row\n"
                                "sinks: 2\n"
                                "recent: 4\n"
                                "score: {attention: {accumulate: false}}\n"
                                "layers: {pyramid: {beta: 2}}\n"
                                "select: {topk: {capacity: 10}}\n"
                                "kv_budget: {recent: fixed}\n";
/* Layer 0 dense (every entry kept, no ops), the other 4 re-selecting. */
static const char dense_yaml[] = "name: attdense_t\n"
                                 "summary: a dense layer, then a window and the top entries\n"
                                 "recent: 4\n"
                                 "score: {attention: {accumulate: false}}\n"
                                 "layers: {dense: 1}\n"
                                 "select: {topk: 6}\n";

/* Every 2 steps: the steps between attend the last selection's rows and the entries cached since
 * (the scores still updated at every step). */
static const char every_yaml[] = "name: attevery_t\n"
                                 "summary: a window and the top entries, every 2 steps\n"
                                 "recent: 4\n"
                                 "score: attention\n"
                                 "when: {every: 2}\n"
                                 "select: {topk: 6}\n";
/* Every 3 steps beside 2 sinks under kv_budget 0.5 (the top-k of round(T0/2) − 6 at the selecting
 * step T0), the newest row's scores. */
static const char everys_yaml[] = "name: atteverys_t\n"
                                  "summary: sinks, a window and half the cache, every 3 steps\n"
                                  "sinks: 2\n"
                                  "recent: 4\n"
                                  "score: {attention: {accumulate: false}}\n"
                                  "when: {every: 3}\n"
                                  "select: {topk: 6}\n"
                                  "kv_budget: {recent: fixed}\n";

/* One selection per layer: the top 6 of every head's accumulated attention summed. */
static const char shl_yaml[] = "name: attshl_t\n"
                               "summary: a window and the layer's top entries\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "share: layer\n"
                               "select: {topk: 6}\n";
/* The same from the heads' newest rows (select() ranks their mean, the ops their sum), beside 2
 * sinks, every 2 steps, under kv_budget 0.5. */
static const char shls_yaml[] = "name: attshls_t\n"
                                "summary: sinks, a window and the layer's top entries\n"
                                "sinks: 2\n"
                                "recent: 4\n"
                                "score: {attention: {accumulate: false}}\n"
                                "share: layer\n"
                                "when: {every: 2}\n"
                                "select: {topk: 6}\n"
                                "kv_budget: {recent: fixed}\n";

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

/* Shared across layers beside sinks: 2 sinks, pairs of layers, accumulated; 3 sinks, groups of 3
 * layers, the newest row (the last group one layer). */
static const char shs_yaml[] = "name: attshs_t\n"
                               "summary: sinks, a window and the top entries, pairs of layers\n"
                               "sinks: 2\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "share: {heads: kv_head, layers: 2}\n"
                               "select: {topk: 6}\n";
static const char shsl_yaml[] = "name: attshsl_t\n"
                                "summary: sinks, a window and the top by the newest row\n"
                                "sinks: 3\n"
                                "recent: 4\n"
                                "score: {attention: {accumulate: false}}\n"
                                "share: {heads: kv_head, layers: 3}\n"
                                "select: {topk: 5}\n";

/* Shared across layers without a window (pairs of layers; 2 sinks, the newest row, groups of 3). */
static const char shnw_yaml[] = "name: attshnw_t\n"
                                "summary: the top entries, no window, pairs of layers\n"
                                "score: attention\n"
                                "share: {heads: kv_head, layers: 2}\n"
                                "select: {topk: 8}\n";
static const char shnws_yaml[] = "name: attshnws_t\n"
                                 "summary: sinks and the top by the newest row, no window\n"
                                 "sinks: 2\n"
                                 "score: {attention: {accumulate: false}}\n"
                                 "share: {heads: kv_head, layers: 3}\n"
                                 "select: {topk: 8}\n";

/* Shared across layers every N steps (2 sinks, a window, every 3, pairs; no window, every 2,
 * groups of 3) and under a kv_budget fraction (2 sinks, a window, the newest row, pairs): the
 * later layers' selections sized and named as their leader's. */
static const char she_yaml[] = "name: attshe_t\n"
                               "summary: every 3 steps, pairs of layers\n"
                               "sinks: 2\n"
                               "recent: 4\n"
                               "score: attention\n"
                               "when: {every: 3}\n"
                               "share: {heads: kv_head, layers: 2}\n"
                               "select: {topk: 6}\n";
static const char shen_yaml[] = "name: attshen_t\n"
                                "summary: every 2 steps, no window, groups of 3\n"
                                "score: attention\n"
                                "when: {every: 2}\n"
                                "share: {heads: kv_head, layers: 3}\n"
                                "select: {topk: 8}\n";
static const char shf_yaml[] = "name: attshf_t\n"
                               "summary: a kv_budget fraction, pairs of layers\n"
                               "sinks: 2\n"
                               "recent: 4\n"
                               "score: {attention: {accumulate: false}}\n"
                               "share: {heads: kv_head, layers: 2}\n"
                               "select: {topk: 6}\n"
                               "kv_budget: {recent: fixed}\n";

/* One selection per layer shared across layers (`heads: layer`): pairs, accumulated; 2 sinks,
 * the newest row, every 2 steps, groups of 3. */
static const char shl2_yaml[] = "name: attshl2_t\n"
                                "summary: one selection per layer, pairs of layers\n"
                                "recent: 4\n"
                                "score: attention\n"
                                "share: {heads: layer, layers: 2}\n"
                                "select: {topk: 6}\n";
static const char shl3_yaml[] = "name: attshl3_t\n"
                                "summary: one selection per layer, every 2 steps, groups of 3\n"
                                "sinks: 2\n"
                                "recent: 4\n"
                                "score: {attention: {accumulate: false}}\n"
                                "when: {every: 2}\n"
                                "share: {heads: layer, layers: 3}\n"
                                "select: {topk: 6}\n";

/* `kv_budget: {recent: rest}`: the window takes what the sinks leave, no top-k at any count;
 * the kept set is public (the sinks and the window), by attention or by key norms alike. */
static const char rest_yaml[] = "name: attrest_t\n"
                                "summary: sinks and the rest of the budget a window\n"
                                "sinks: 2\n"
                                "recent: 4\n"
                                "score: attention\n"
                                "select: {topk: 6}\n"
                                "kv_budget: {recent: rest}\n";
static const char knrest_yaml[] = "name: knrest_t\n"
                                  "summary: sinks and the rest of the budget a window\n"
                                  "sinks: 2\n"
                                  "recent: 4\n"
                                  "score: key_norm\n"
                                  "select: {topk: 6}\n"
                                  "kv_budget: {recent: rest}\n";

/* No recent window: the new entry is a candidate of the next step's top-k (accumulated; 2
 * sinks and the newest row; every 3 steps). */
static const char nowin_yaml[] = "name: attnowin_t\n"
                                 "summary: the top entries by accumulated attention, no window\n"
                                 "score: attention\n"
                                 "select: {topk: 8}\n";
static const char nowins_yaml[] = "name: attnowins_t\n"
                                  "summary: sinks and the top entries by the newest row\n"
                                  "sinks: 2\n"
                                  "score: {attention: {accumulate: false}}\n"
                                  "select: {topk: 8}\n";
static const char nowine_yaml[] = "name: attnowine_t\n"
                                  "summary: the top entries by accumulated attention, every 3\n"
                                  "score: attention\n"
                                  "when: {every: 3}\n"
                                  "select: {topk: 8}\n";

/* Every mask of the check's 32 decode steps chosen by the ops: stories260K's 5 layers × 4 KV
 * heads × 32 steps (every step has more candidates beyond the sinks and window than its top-k);
 * param: a --param of the check, or "". */
static void check_layers(const char *file, const char *text, const char *name, const char *param,
                         unsigned layers)
{
    char out[1 << 13], want[64];
    snprintf(want, sizeof want, "%s: match", name);
    th_cli_expect(out, sizeof out, 0, want, "policy check '%s' %s", th_file(&td, file, text),
                  param);
    ck_assert_uint_eq(th_chosen(out), layers * 4 * 32);
}

static void check_on(const char *file, const char *text, const char *name, const char *param)
{
    check_layers(file, text, name, param, 5);
}

START_TEST(test_check_att_blocks)
{
    check_on("acc.yaml", acc_yaml, "attacc_t", "");
    check_on("last.yaml", last_yaml, "attlast_t", "");
}
END_TEST

START_TEST(test_check_att_sinks)
{
    check_on("sink.yaml", sink_yaml, "attsink_t", "");
    check_on("sinklast.yaml", sinklast_yaml, "attsinklast_t", "");
}
END_TEST

START_TEST(test_check_att_kv_budget)
{
    check_on("kvb.yaml", kvb_yaml, "attkvb_t", "--param kv_budget=0.5");
    check_on("kvs.yaml", kvs_yaml, "attkvs_t", "--param kv_budget=0.75");
}
END_TEST

START_TEST(test_check_att_shared_layers)
{
    check_on("accshl.yaml", accshl_yaml, "attaccshl_t", "");
    check_on("lastshl.yaml", lastshl_yaml, "attlastshl_t", "");
}
END_TEST

/* On shares, prompt 16 (12 candidates at the first step): its own selection, no NOTE, 160
 * masks (5 layers × 4 KV heads × 8 decode steps) equal to select() over the session's values. */
static void shares_with(const char *proto, const char *file, const char *text, const char *name,
                        const char *param)
{
    char out[1 << 14], own[80];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s' %s",
                  proto, th_file(&td, file, text), param);
    ck_assert_msg(!strstr(out, "NOTE"), "%s", out);
    snprintf(own, sizeof own, "selection on shares from %s's own emitted ops", name);
    ck_assert_msg(strstr(out, own), "%s", out);
    th_own_select(out, 5 * 4 * 8);
}

static void shares_on(const char *proto, const char *file, const char *text, const char *name)
{
    shares_with(proto, file, text, name, "");
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

/* Beside 2 sinks (prompt 16: 10 candidates at the first step): the attended table is the
 * sinks' rows, the gathered ones and the window's. */
START_TEST(test_att_sinks_shares)
{
    shares_on("semi2k", "sink.yaml", sink_yaml, "attsink_t");
    shares_on("aby3", "sink.yaml", sink_yaml, "attsink_t");
    shares_on("semi2k", "sinklast.yaml", sinklast_yaml, "attsinklast_t");
    shares_on("aby3", "sinklast.yaml", sinklast_yaml, "attsinklast_t");
}
END_TEST

/* Under a kv_budget fraction: each step attends the selection sized for its cached count. */
START_TEST(test_att_kv_budget_shares)
{
    const char *kb = "--policy-param kv_budget=0.5", *ks = "--policy-param kv_budget=0.75";
    shares_with("semi2k", "kvb.yaml", kvb_yaml, "attkvb_t", kb);
    shares_with("aby3", "kvb.yaml", kvb_yaml, "attkvb_t", kb);
    shares_with("semi2k", "kvs.yaml", kvs_yaml, "attkvs_t", ks);
    shares_with("aby3", "kvs.yaml", kvs_yaml, "attkvs_t", ks);
}
END_TEST

/* Per-layer budgets: the dense layer's masks keep every entry (4 selecting layers chosen). */
START_TEST(test_check_att_layers)
{
    check_on("pyr.yaml", pyr_yaml, "attpyr_t", "");
    check_on("pyrs.yaml", pyrs_yaml, "attpyrs_t", "--param kv_budget=0.75");
    check_layers("dense.yaml", dense_yaml, "attdense_t", "", 4);
}
END_TEST

START_TEST(test_att_layers_shares)
{
    const char *kb = "--policy-param kv_budget=0.75";
    shares_on("semi2k", "pyr.yaml", pyr_yaml, "attpyr_t");
    shares_on("aby3", "pyr.yaml", pyr_yaml, "attpyr_t");
    shares_with("semi2k", "pyrs.yaml", pyrs_yaml, "attpyrs_t", kb);
    shares_with("aby3", "pyrs.yaml", pyrs_yaml, "attpyrs_t", kb);
    shares_on("semi2k", "dense.yaml", dense_yaml, "attdense_t");
    shares_on("aby3", "dense.yaml", dense_yaml, "attdense_t");
}
END_TEST

START_TEST(test_check_att_every)
{
    check_on("every.yaml", every_yaml, "attevery_t", "");
    check_on("everys.yaml", everys_yaml, "atteverys_t", "--param kv_budget=0.5");
}
END_TEST

START_TEST(test_att_every_shares)
{
    const char *kb = "--policy-param kv_budget=0.5";
    shares_on("semi2k", "every.yaml", every_yaml, "attevery_t");
    shares_on("aby3", "every.yaml", every_yaml, "attevery_t");
    shares_with("semi2k", "everys.yaml", everys_yaml, "atteverys_t", kb);
    shares_with("aby3", "everys.yaml", everys_yaml, "atteverys_t", kb);
}
END_TEST

START_TEST(test_check_att_share_layer)
{
    check_on("shl.yaml", shl_yaml, "attshl_t", "");
    check_on("shls.yaml", shls_yaml, "attshls_t", "--param kv_budget=0.5");
}
END_TEST

START_TEST(test_att_share_layer_shares)
{
    const char *kb = "--policy-param kv_budget=0.5";
    shares_on("semi2k", "shl.yaml", shl_yaml, "attshl_t");
    shares_on("aby3", "shl.yaml", shl_yaml, "attshl_t");
    shares_with("semi2k", "shls.yaml", shls_yaml, "attshls_t", kb);
    shares_with("aby3", "shls.yaml", shls_yaml, "attshls_t", kb);
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

START_TEST(test_check_att_shared_sinks)
{
    check_on("shs.yaml", shs_yaml, "attshs_t", "");
    check_on("shsl.yaml", shsl_yaml, "attshsl_t", "");
    check_on("shnw.yaml", shnw_yaml, "attshnw_t", "");
    check_on("shnws.yaml", shnws_yaml, "attshnws_t", "");
}
END_TEST

START_TEST(test_att_shared_sinks_shares)
{
    static const char *const proto[] = {"semi2k", "aby3"};
    shares_on(proto[_i], "shs.yaml", shs_yaml, "attshs_t");
    shares_on(proto[_i], "shsl.yaml", shsl_yaml, "attshsl_t");
    shares_on(proto[_i], "shnw.yaml", shnw_yaml, "attshnw_t");
    shares_on(proto[_i], "shnws.yaml", shnws_yaml, "attshnws_t");
}
END_TEST

START_TEST(test_check_att_shared_every)
{
    check_on("she.yaml", she_yaml, "attshe_t", "");
    check_on("shen.yaml", shen_yaml, "attshen_t", "");
    check_on("shf.yaml", shf_yaml, "attshf_t", "--param kv_budget=0.5");
    check_on("shl2.yaml", shl2_yaml, "attshl2_t", "");
    check_on("shl3.yaml", shl3_yaml, "attshl3_t", "");
}
END_TEST

START_TEST(test_att_shared_every_shares)
{
    static const char *const proto[] = {"semi2k", "aby3"};
    shares_on(proto[_i], "she.yaml", she_yaml, "attshe_t");
    shares_on(proto[_i], "shen.yaml", shen_yaml, "attshen_t");
    shares_with(proto[_i], "shf.yaml", shf_yaml, "attshf_t", "--policy-param kv_budget=0.5");
    shares_on(proto[_i], "shl2.yaml", shl2_yaml, "attshl2_t");
    shares_on(proto[_i], "shl3.yaml", shl3_yaml, "attshl3_t");
}
END_TEST

/* Its decode steps name the sinks' and the window's rows (local copies): `policy check` a match,
 * and on shares 160 masks equal to the replay's (before: a NOTE for attention; for key norms
 * the audit failed, "cost declared", its cost path paying for norms it never ranked). */
START_TEST(test_att_rest_public)
{
    static const char *const pn[] = {"semi2k", "aby3"};
    const char *const yaml[2] = {rest_yaml, knrest_yaml}, *file[2] = {"rest.yaml", "knrest.yaml"};
    const char *const name[2] = {"attrest_t", "knrest_t"};
    for (int i = 0; i < 2; i++) {
        char out[1 << 14], want[80];
        char *f = strdup(th_file(&td, file[i], yaml[i]));
        snprintf(want, sizeof want, "%s: match", name[i]);
        th_cli_expect(out, sizeof out, 0, want, "policy check '%s' --param kv_budget=0.5", f);
        ck_assert_uint_eq(th_chosen(out), 5 * 4 * 32);
        th_cli_expect(out, sizeof out, 0,
                      "bytes and rounds of every op of the 9 steps equal the prediction: yes",
                      "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s' "
                      "--policy-param kv_budget=0.5",
                      pn[_i], f);
        ck_assert_msg(!strstr(out, "NOTE") && !strstr(out, "audit failed"), "%s", out);
        ck_assert_msg(strstr(out, "equal to the plaintext replay's (float model): yes (160 equal"),
                      "%s", out);
        free(f);
    }
}
END_TEST

START_TEST(test_check_att_nowin)
{
    check_on("nowin.yaml", nowin_yaml, "attnowin_t", "");
    check_on("nowins.yaml", nowins_yaml, "attnowins_t", "");
}
END_TEST

START_TEST(test_check_att_nowin_every) { check_on("nowine.yaml", nowine_yaml, "attnowine_t", ""); }
END_TEST

START_TEST(test_att_nowin_shares)
{
    static const char *const proto[] = {"semi2k", "aby3"};
    shares_on(proto[_i], "nowin.yaml", nowin_yaml, "attnowin_t");
    shares_on(proto[_i], "nowins.yaml", nowins_yaml, "attnowins_t");
    shares_on(proto[_i], "nowine.yaml", nowine_yaml, "attnowine_t");
}
END_TEST

Suite *attcomp_suite(void)
{
    Suite *s = suite_create("attcomp");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_check_att_blocks, test_att_last_shares, test_att_acc_shares,
             test_check_att_sinks, test_check_att_kv_budget, test_att_sinks_shares,
             test_att_kv_budget_shares, test_check_att_layers, test_att_layers_shares,
             test_check_att_every, test_att_every_shares, test_check_att_share_layer,
             test_att_share_layer_shares, test_check_att_shared_layers,
             test_att_shared_layers_shares, test_check_att_nowin, test_check_att_nowin_every);
    TH_LOOPS(tc, 2, test_att_nowin_shares);
    TH_LOOPS(tc, 2, test_att_rest_public);
    TH_TESTS(tc, test_check_att_shared_sinks);
    TH_LOOPS(tc, 2, test_att_shared_sinks_shares);
    TH_TESTS(tc, test_check_att_shared_every);
    TH_LOOPS(tc, 2, test_att_shared_every_shares);
    return s;
}
