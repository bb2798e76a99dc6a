/* check_secsel.c — `validate --policy` runs the selection of a policy with no secure table of its
 * own on secret shares, from the ops its emit_cost builds (sim/policy/secpol_emit.c): the
 * shipped keynorm plug-in on semi2k and aby3 (its selection equal to its select() over the
 * session's own keys, the plaintext replay's kept sets nearly all equal, every op's bytes and
 * rounds as predicted), the same selection composed from blocks (keynorm.yaml), and a copy
 * whose emit_cost names no selection refused as "cost declared, no secure selection". */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "testdir.h"

TESTDIR("check_secsel")

/* keynorm (2 sinks, the 6 largest key norms) over 16 prompt tokens and 6 decode steps: 5 layers
 * x 4 KV heads x 6 steps = 120 decode masks, each choosing 6 of 14 candidates on shares. */
static void keynorm_on(const char *proto)
{
    char out[1 << 14];
    char *so = strdup(th_data_path("build/plugins/keynorm.so"));
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 7 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 16 --policy '%s' "
                  "--policy-param sink=2 --policy-param keep=6",
                  proto, so);
    ck_assert_msg(strstr(out, "selection on shares from keynorm's own emitted ops"), "%s", out);
    /* on the same values, its ops choose what its select() chooses (ties within its bound) */
    th_own_select(out, 120);
    /* against the float model's replay: the fixed-point model's keys drift (the replay's ties
     * broken the other way, a changed kept set moving the later layers), nearly all equal */
    unsigned rep = th_count_of(out, "#       equal to the plaintext replay's", "equal");
    ck_assert_msg(rep >= 108, "%u of 120 masks equal to the replay's:\n%s", rep, out);
    free(so);
}

/* The same selection composed from blocks (scenarios/policies/keynorm.yaml: sinks, key_norm,
 * top-k at every step): its derived ops run on shares as the plug-in's do. */
static void keynorm_blocks_on(const char *proto)
{
    char out[1 << 14];
    char *yaml = strdup(th_data_path("scenarios/policies/keynorm.yaml"));
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 7 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 16 --policy '%s' "
                  "--policy-param sinks=2 --policy-param topk=6",
                  proto, yaml);
    ck_assert_msg(strstr(out, "selection on shares from keynorm_blocks's own emitted ops"), "%s",
                  out);
    th_own_select(out, 120);
    unsigned rep = th_count_of(out, "#       equal to the plaintext replay's", "equal");
    ck_assert_msg(rep >= 108, "%u of 120 masks equal to the replay's:\n%s", rep, out);
    free(yaml);
}

/* One selection per layer (`share: layer`): every KV head's key norms summed (local), one
 * top-k of the 12 candidates per layer, each KV head's rows gathered by that one-hot. */
static const char knlayer_yaml[] = "name: knlayer_t\nrecent: 4\nscore: key_norm\n"
                                   "share: layer\nselect: {topk: 6}\n";
/* Once after the prompt (`when: once`): per KV head the top 6 of the 12 candidates gathered into
 * state at the prompt, named by every decode step; the entries cached since are public. */
static const char knonce_yaml[] = "name: knonce_t\nrecent: 4\nscore: key_norm\n"
                                  "when: once\nselect: {topk: 6}\n";

/* Every 2 decode steps (`when: {every: 2}`): per KV head the top 6 of the candidates at decode
 * positions 16, 18, …, gathered into state that the step after names; the entries cached since
 * the selection are public. */
static const char knevery_yaml[] = "name: knevery_t\nrecent: 4\nscore: key_norm\n"
                                   "when: {every: 2}\nselect: {topk: 6}\n";

/* One selection per layer (`share: layer`) once after the prompt: the KV heads' norms of the 12
 * candidates summed, one top 6 per layer gathered for each KV head into state at the prompt,
 * named by every decode step. */
static const char knoncesl_yaml[] = "name: knoncesl_t\nrecent: 4\nscore: key_norm\n"
                                    "share: layer\nwhen: once\nselect: {topk: 6}\n";
/* The same every 2 decode steps: one top 6 per layer at decode positions 16, 18, …, its rows
 * in state for the step after. */
static const char kneverysl_yaml[] = "name: kneverysl_t\nrecent: 4\nscore: key_norm\n"
                                     "share: layer\nwhen: {every: 2}\nselect: {topk: 6}\n";

/* Shared across pairs of layers (`share: {heads: kv_head, layers: 2}`): layers 0, 2 and 4 select
 * once after the prompt (key norms, or SnapKV's window votes of the last 4 prompt queries
 * maxpooled over 3, the capacity 10 counting the window: the top 6), or every 2 decode steps;
 * layers 1 and 3 gather their own rows by the one-hot rows of the layer before, at the prompt
 * into state (once) or at the selecting steps (every 2, into state too for the step between).
 * Each kept the replay's kept sets with a NOTE, and policy check said "cost declared". */
static const char knonce_shl_yaml[] = "name: knonce_shl_t\nrecent: 4\nscore: key_norm\n"
                                      "when: once\nshare: {heads: kv_head, layers: 2}\n"
                                      "select: {topk: 6}\n";
static const char knevery_shl_yaml[] = "name: knevery_shl_t\nrecent: 4\nscore: key_norm\n"
                                       "when: {every: 2}\nshare: {heads: kv_head, layers: 2}\n"
                                       "select: {topk: 6}\n";
/* One selection per layer (`heads: layer`) shared across layers, once after the prompt (pairs)
 * or every 2 steps beside 2 sinks (groups of 3). */
static const char knlo_shl_yaml[] = "name: knlo_shl_t\nrecent: 4\nscore: key_norm\n"
                                    "when: once\nshare: {heads: layer, layers: 2}\n"
                                    "select: {topk: 6}\n";
static const char knle_shl_yaml[] = "name: knle_shl_t\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                    "when: {every: 2}\nshare: {heads: layer, layers: 3}\n"
                                    "select: {topk: 6}\n";
static const char wv_shl_yaml[] =
    "name: wv_shl_t\nrecent: 4\n"
    "score: {window_attention: {window: 4, kernel: 3, pooling: maxpool}}\nwhen: once\n"
    "share: {heads: kv_head, layers: 2}\nselect: {topk: {capacity: 10}}\n";
/* SnapKV's window votes with one selection per layer (`share: layer`: every KV head's votes summed,
 * one top-k of the layer, each KV head's own rows gathered by it): beside a window of 4 with max
 * pooling, the top 5; beside 2 sinks with average pooling, shared by pairs of layers, the top 4.
 * Each kept the replay's kept sets with a NOTE, and policy check said "cost declared". */
static const char wv_sl_yaml[] =
    "name: wv_sl_t\nrecent: 4\nshare: layer\nwhen: once\n"
    "score: {window_attention: {window: 4, kernel: 3, pooling: maxpool}}\nselect: {topk: 5}\n";
static const char wv_slg_yaml[] =
    "name: wv_slg_t\nsinks: 2\nrecent: 4\nwhen: once\n"
    "score: {window_attention: {window: 4, kernel: 3, pooling: avgpool}}\n"
    "share: {heads: layer, layers: 2}\nselect: {topk: 4}\n";

/* Window votes whose candidates reach into the voting queries' own rows (a recent window
 * shorter than the vote window: c1 > P − window), which select() gives no votes: a window of 2
 * under 6 votes (max pooling, top 5), no window under 4 (average pooling of 5, one per layer, top
 * 6), and 2 sinks, a window of 1 under 8 shared across pairs of layers (top 10). Replayed before
 * (NOTE, "cost declared"). */
static const char *const wvr_yaml[3] = {
    "name: wvr_t\nrecent: 2\nwhen: once\n"
    "score: {window_attention: {window: 6, kernel: 3, pooling: maxpool}}\nselect: {topk: 5}\n",
    "name: wvrl_t\nwhen: once\nshare: layer\n"
    "score: {window_attention: {window: 4, kernel: 5, pooling: avgpool}}\nselect: {topk: 6}\n",
    "name: wvrg_t\nsinks: 2\nrecent: 1\nwhen: once\n"
    "score: {window_attention: {window: 8, kernel: 3}}\nshare: {heads: kv_head, layers: 2}\n"
    "select: {topk: 10}\n"};
static const char *const wvr_file[3] = {"wvr.yaml", "wvrl.yaml", "wvrg.yaml"};
static const char *const wvr_name[3] = {"wvr_t", "wvrl_t", "wvrg_t"};

/* Attention once after the prompt, top-k (snapkv's top-k over the column sums of the prompt
 * attention, every query voting, unpooled): accumulated per KV head beside a window of 4, the top
 * 6; the newest row one per layer beside 2 sinks, no window, the top 5; accumulated beside 2
 * sinks and a window of 3 over a dense first layer, shared by pairs of layers, the top 6; a
 * pyramid of capacity 12 (its bottom layers keep every candidate). Replayed before (NOTE,
 * "cost declared"). */
static const char *const ato_yaml[4] = {
    "name: ato_t\nrecent: 4\nwhen: once\nscore: attention\nselect: {topk: 6}\n",
    "name: atol_t\nsinks: 2\nwhen: once\nshare: layer\n"
    "score: {attention: {accumulate: false}}\nselect: {topk: 5}\n",
    "name: atog_t\nsinks: 2\nrecent: 3\nwhen: once\nscore: attention\nlayers: {dense: 1}\n"
    "share: {heads: kv_head, layers: 2}\nselect: {topk: 6}\n",
    "name: atop_t\nrecent: 4\nwhen: once\nscore: attention\n"
    "select: {topk: {capacity: 12}}\nlayers: {pyramid: {beta: 4}}\n"};
static const char *const ato_file[4] = {"ato.yaml", "atol.yaml", "atog.yaml", "atop.yaml"};
static const char *const ato_name[4] = {"ato_t", "atol_t", "atog_t", "atop_t"};

/* A key-norm composition on shares: 5 layers x 4 KV heads x 8 steps = 160 masks, each choosing
 * 6, equal to its select() over the session's keys, every op as predicted (each kept the
 * replay's kept sets with a NOTE: "has no selection on shares"). */
static void kncomp_on(const char *proto, const char *file, const char *text, const char *name)
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

/* Its ops gather what its select() keeps (for share: layer, one set for a layer's KV heads),
 * chosen of the 640 masks chosen by them. */
static void kncomp_check_chosen(const char *file, const char *text, const char *name,
                                unsigned chosen)
{
    char out[1 << 13], want[80];
    char *yaml = strdup(th_file(&td, file, text));
    snprintf(want, sizeof want, "%s: match", name);
    th_cli_expect(out, sizeof out, 0, want, "policy check '%s' --prompt 16", yaml);
    ck_assert_uint_eq(th_chosen(out), chosen);
    free(yaml);
}

static void kncomp_check(const char *file, const char *text, const char *name)
{
    kncomp_check_chosen(file, text, name, 640);
}

START_TEST(test_keynorm_layer_semi2k)
{
    kncomp_on("semi2k", "knlayer.yaml", knlayer_yaml, "knlayer_t");
}
END_TEST

START_TEST(test_keynorm_layer_aby3)
{
    kncomp_on("aby3", "knlayer.yaml", knlayer_yaml, "knlayer_t");
}
END_TEST

START_TEST(test_keynorm_layer_check) { kncomp_check("knlayer.yaml", knlayer_yaml, "knlayer_t"); }
END_TEST

START_TEST(test_keynorm_once_semi2k)
{
    kncomp_on("semi2k", "knonce.yaml", knonce_yaml, "knonce_t");
}
END_TEST

START_TEST(test_keynorm_once_aby3) { kncomp_on("aby3", "knonce.yaml", knonce_yaml, "knonce_t"); }
END_TEST

START_TEST(test_keynorm_every_semi2k)
{
    kncomp_on("semi2k", "knevery.yaml", knevery_yaml, "knevery_t");
}
END_TEST

START_TEST(test_keynorm_every_aby3)
{
    kncomp_on("aby3", "knevery.yaml", knevery_yaml, "knevery_t");
}
END_TEST

START_TEST(test_keynorm_every_check) { kncomp_check("knevery.yaml", knevery_yaml, "knevery_t"); }
END_TEST

START_TEST(test_keynorm_once_check) { kncomp_check("knonce.yaml", knonce_yaml, "knonce_t"); }
END_TEST

/* share: layer with when: once and with every 2 steps (each kept the replay's kept sets with a
 * NOTE, and policy check said "cost declared": its ops named no selection). */
START_TEST(test_keynorm_oncesl_semi2k)
{
    kncomp_on("semi2k", "knoncesl.yaml", knoncesl_yaml, "knoncesl_t");
}
END_TEST

START_TEST(test_keynorm_oncesl_aby3)
{
    kncomp_on("aby3", "knoncesl.yaml", knoncesl_yaml, "knoncesl_t");
}
END_TEST

START_TEST(test_keynorm_oncesl_check)
{
    kncomp_check("knoncesl.yaml", knoncesl_yaml, "knoncesl_t");
}
END_TEST

START_TEST(test_keynorm_everysl_semi2k)
{
    kncomp_on("semi2k", "kneverysl.yaml", kneverysl_yaml, "kneverysl_t");
}
END_TEST

START_TEST(test_keynorm_everysl_aby3)
{
    kncomp_on("aby3", "kneverysl.yaml", kneverysl_yaml, "kneverysl_t");
}
END_TEST

START_TEST(test_keynorm_everysl_check)
{
    kncomp_check("kneverysl.yaml", kneverysl_yaml, "kneverysl_t");
}
END_TEST

START_TEST(test_shared_once_semi2k)
{
    kncomp_on("semi2k", "knonce_shl.yaml", knonce_shl_yaml, "knonce_shl_t");
}
END_TEST

START_TEST(test_shared_once_aby3)
{
    kncomp_on("aby3", "knonce_shl.yaml", knonce_shl_yaml, "knonce_shl_t");
}
END_TEST

START_TEST(test_shared_once_check)
{
    kncomp_check("knonce_shl.yaml", knonce_shl_yaml, "knonce_shl_t");
}
END_TEST

START_TEST(test_shared_every_semi2k)
{
    kncomp_on("semi2k", "knevery_shl.yaml", knevery_shl_yaml, "knevery_shl_t");
}
END_TEST

START_TEST(test_shared_every_aby3)
{
    kncomp_on("aby3", "knevery_shl.yaml", knevery_shl_yaml, "knevery_shl_t");
}
END_TEST

START_TEST(test_shared_every_check)
{
    kncomp_check("knevery_shl.yaml", knevery_shl_yaml, "knevery_shl_t");
}
END_TEST

/* `heads: layer`, once and every 2 steps: replayed with a NOTE before, "cost declared". */
START_TEST(test_shared_layer_heads)
{
    static const char *const proto[] = {"semi2k", "aby3"};
    kncomp_on(proto[_i], "knlo_shl.yaml", knlo_shl_yaml, "knlo_shl_t");
    kncomp_on(proto[_i], "knle_shl.yaml", knle_shl_yaml, "knle_shl_t");
}
END_TEST

START_TEST(test_shared_layer_heads_check)
{
    kncomp_check("knlo_shl.yaml", knlo_shl_yaml, "knlo_shl_t");
    kncomp_check("knle_shl.yaml", knle_shl_yaml, "knle_shl_t");
}
END_TEST

/* SnapKV's maxpool makes exact ties among equal neighbours: a later layer's are its leader's,
 * judged by the leader's votes (equal or ties, 160 in all). */
START_TEST(test_shared_window_semi2k)
{
    kncomp_on("semi2k", "wv_shl.yaml", wv_shl_yaml, "wv_shl_t");
}
END_TEST

START_TEST(test_shared_window_aby3) { kncomp_on("aby3", "wv_shl.yaml", wv_shl_yaml, "wv_shl_t"); }
END_TEST

START_TEST(test_shared_window_check) { kncomp_check("wv_shl.yaml", wv_shl_yaml, "wv_shl_t"); }
END_TEST

START_TEST(test_window_layer)
{
    static const char *const proto[] = {"semi2k", "aby3"};
    kncomp_on(proto[_i], "wv_sl.yaml", wv_sl_yaml, "wv_sl_t");
    kncomp_on(proto[_i], "wv_slg.yaml", wv_slg_yaml, "wv_slg_t");
}
END_TEST

/* On shares (the reaching candidates vote 0, pooled with their neighbours' votes), every op as
 * predicted, 160 masks equal to its select() over the session's values (or exact ties: the
 * zeros), in semi2k and aby3. */
START_TEST(test_window_reach)
{
    static const char *const proto[] = {"semi2k", "aby3"};
    for (int i = 0; i < 3; i++)
        kncomp_on(proto[_i], wvr_file[i], wvr_yaml[i], wvr_name[i]);
}
END_TEST

START_TEST(test_window_reach_check)
{
    for (int i = 0; i < 3; i++)
        kncomp_check(wvr_file[i], wvr_yaml[i], wvr_name[i]);
}
END_TEST

START_TEST(test_att_once)
{
    static const char *const proto[] = {"semi2k", "aby3"};
    for (int i = 0; i < 4; i++)
        kncomp_on(proto[_i], ato_file[i], ato_yaml[i], ato_name[i]);
}
END_TEST

/* The same with policy check (with a dense layer, or a pyramid whose bottom layer keeps every
 * candidate: 512 of the 640 masks chosen by its ops, that layer's keep every entry). */
START_TEST(test_att_once_check)
{
    for (int i = 0; i < 4; i++)
        kncomp_check_chosen(ato_file[i], ato_yaml[i], ato_name[i], i >= 2 ? 512 : 640);
}
END_TEST

START_TEST(test_window_layer_check)
{
    kncomp_check("wv_sl.yaml", wv_sl_yaml, "wv_sl_t");
    kncomp_check("wv_slg.yaml", wv_slg_yaml, "wv_slg_t");
}
END_TEST

START_TEST(test_keynorm_blocks) { keynorm_blocks_on("semi2k"); }
END_TEST

START_TEST(test_keynorm_blocks_aby3) { keynorm_blocks_on("aby3"); }
END_TEST

START_TEST(test_keynorm_semi2k) { keynorm_on("semi2k"); }
END_TEST

START_TEST(test_keynorm_aby3) { keynorm_on("aby3"); }
END_TEST

/* A budget that keeps every entry: no selection to choose, all 120 masks equal. */
START_TEST(test_keynorm_keeps_all)
{
    char out[1 << 14];
    char *so = strdup(th_data_path("build/plugins/keynorm.so"));
    th_cli_expect(out, sizeof out, 0,
                  "equal to the plaintext replay's (float model): yes (120 equal",
                  "validate --model stories260K -p semi2k --accuracy 22 --prompt 16 --policy '%s' "
                  "--policy-param sink=2 --policy-param keep=30",
                  so);
    ck_assert_msg(strstr(out, "prediction: yes"), "%s", out);
    free(so);
}
END_TEST

/* A copy whose emit_cost names no selection while its select() drops entries: refused. */
START_TEST(test_unnamed_selection)
{
    char out[1 << 14];
    char *so = th_keynorm_variant(&td, "kn_unnamed", "    api->selection(b,",
                                  "    if (0) api->selection(b,");
    th_cli_expect(out, sizeof out, 1,
                  "policy kn_unnamed: cost declared, no secure selection: its select() drops "
                  "cached entries (layer 0, decode position 16)",
                  "validate --model stories260K -p semi2k --accuracy 18 --prompt 16 --policy '%s' "
                  "--policy-param sink=2 --policy-param keep=6",
                  so);
    free(so);
}
END_TEST

/* quest with a partial last page (page 4 at 14, 15, 17, 18, … cached entries): the cached rows
 * in whole pages, the rows past the cached count padding that the selection may gather; their
 * scores biased out of the attention on shares (a public bias per page times the one-hot rows),
 * 160 masks of which the audit finds no gathered padding attended and every kept set equal to
 * the plaintext replay's. */
static void quest_pages_on(const char *proto)
{
    char out[1 << 14];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 22 --prompt 14 --policy quest "
                  "--policy-param budget=12 --policy-param page=4 --policy-param min_pages=1 "
                  "--policy-param skip_layers=0",
                  proto);
    ck_assert_msg(strstr(out, "selection on shares from quest's own emitted ops"), "%s", out);
    ck_assert_msg(!strstr(out, "NOTE: quest has no selection on shares"), "%s", out);
    ck_assert_msg(!strstr(out, "audit failed"), "%s", out);
    unsigned rep = th_count_of(out, "#       equal to the plaintext replay's", "equal");
    ck_assert_msg(rep == 160, "%u of 160 masks equal to the replay's:\n%s", rep, out);
}

START_TEST(test_quest_pages_semi2k) { quest_pages_on("semi2k"); }
END_TEST

START_TEST(test_quest_pages_aby3) { quest_pages_on("aby3"); }
END_TEST

Suite *secsel_suite(void)
{
    Suite *s = suite_create("secsel");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_keynorm_semi2k, test_keynorm_aby3, test_keynorm_keeps_all,
             test_unnamed_selection, test_keynorm_blocks, test_keynorm_blocks_aby3,
             test_quest_pages_semi2k, test_quest_pages_aby3, test_keynorm_layer_semi2k,
             test_keynorm_layer_aby3, test_keynorm_layer_check, test_keynorm_once_semi2k,
             test_keynorm_once_aby3, test_keynorm_once_check, test_keynorm_every_semi2k,
             test_keynorm_every_aby3, test_keynorm_every_check, test_keynorm_oncesl_semi2k,
             test_keynorm_oncesl_aby3, test_keynorm_oncesl_check, test_keynorm_everysl_semi2k,
             test_keynorm_everysl_aby3, test_keynorm_everysl_check, test_shared_once_semi2k,
             test_shared_once_aby3, test_shared_once_check, test_shared_every_semi2k,
             test_shared_every_aby3, test_shared_every_check, test_shared_window_semi2k,
             test_shared_window_aby3, test_shared_window_check, test_shared_layer_heads_check,
             test_window_layer_check, test_window_reach_check, test_att_once_check);
    TH_LOOPS(tc, 2, test_shared_layer_heads);
    TH_LOOPS(tc, 2, test_window_layer);
    TH_LOOPS(tc, 2, test_window_reach);
    TH_LOOPS(tc, 2, test_att_once);
    return s;
}
