/* check_thrsec.c — compositions selecting by a threshold (`select: {threshold: X}`) at every
 * decode step on secret shares (sim/policy/compose_thr.c): key norms of tokens, key norms summed
 * per page, and the query against page bounds. Each candidate's score is compared with the
 * public threshold on shares and a dropped candidate's attention score biased out; no count is
 * opened. `validate --policy` runs the ops on shares (every op's bytes and rounds as predicted,
 * every mask equal to select() over the session's values), `policy check` finds its ops'
 * kept sets select()'s, and `mpcsim run`'s cost path costs each decode step as the session's
 * program. Each kept the replay's kept sets with a NOTE before, its cost "declared". */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "polfix.h"
#include "models/lower.h"
#include "protocols/program/proto.h"
#include "sim/policy/compose.h"
#include "sim/policy/pcheck.h"
#include "sim/replay/replay.h"
#include "sim/secure/secinf.h"
#include "stories.h"
#include "testdir.h"

enum { N = 36, P = 32 };
STORIES(N)
TESTDIR("check_thrsec")

/* A recent window of 4 and the tokens whose squared key norm is at least 200; 4 sinks and the
 * pages of 4 whose candidates' norms sum to 800 or more; the pages of 4 whose bound score (the
 * query against the page's key max and min, Quest's) is at least 2. On stories260K each drops
 * some candidates and keeps others (the policy's own effect on the logits is not nil). */
static const char thr_yaml[] = "name: thr_t\nrecent: 4\nscore: key_norm\n"
                               "select: {threshold: 200}\n";
static const char thrpg_yaml[] = "name: thrpg_t\nsinks: 4\nscore: key_norm\n"
                                 "granularity: {page: 4}\nselect: {threshold: 800}\n";
static const char thrpb_yaml[] = "name: thrpb_t\nscore: page_bounds\ngranularity: {page: 4}\n"
                                 "select: {threshold: 2}\n";

/* The same with one selection per layer (`share: layer`): the KV heads' scores summed, the
 * thresholds scaled to keep some and drop others. */
static const char thrsh_yaml[] = "name: thrsh_t\nrecent: 4\nscore: key_norm\nshare: layer\n"
                                 "select: {threshold: 800}\n";
static const char thrpgsh_yaml[] = "name: thrpgsh_t\nsinks: 4\nscore: key_norm\nshare: layer\n"
                                   "granularity: {page: 4}\nselect: {threshold: 3000}\n";
static const char thrpbsh_yaml[] = "name: thrpbsh_t\nscore: page_bounds\nshare: layer\n"
                                   "granularity: {page: 4}\nselect: {threshold: 8}\n";

/* Once after the prompt (`when: once`: decided at the prompt, its decision kept as state and
 * named by every decode step, the entries cached since public) and every N steps (decided at
 * decode positions 16, 19, 22, …; between them the last decision), tokens and pages. */
static const char thronce_yaml[] = "name: thronce_t\nrecent: 4\nscore: key_norm\nwhen: once\n"
                                   "select: {threshold: 200}\n";
static const char threv_yaml[] = "name: threv_t\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                 "when: {every: 3}\nselect: {threshold: 200}\n";
static const char thrpgonce_yaml[] = "name: thrpgonce_t\nsinks: 4\nscore: key_norm\nwhen: once\n"
                                     "granularity: {page: 4}\nselect: {threshold: 800}\n";
static const char thrpgev_yaml[] = "name: thrpgev_t\nsinks: 4\nscore: key_norm\nshare: layer\n"
                                   "when: {every: 2}\ngranularity: {page: 4}\n"
                                   "select: {threshold: 3000}\n";

/* Attention at every step (accumulated over every query, at least 1; the newest row beside 2
 * sinks, at least 0.05), a window of 4: each step's decision made after the step before's
 * softmax, every cached entry attended. */
static const char thratt_yaml[] = "name: thratt_t\nrecent: 4\nscore: attention\n"
                                  "select: {threshold: 1.0}\n";
static const char thrattl_yaml[] = "name: thrattl_t\nsinks: 2\nrecent: 4\n"
                                   "score: {attention: {accumulate: false}}\n"
                                   "select: {threshold: 0.05}\n";

/* Key norms shared across layers (`share: {layers: N}`): the group's first layer decides, its
 * decision kept as state, and each later layer names its own candidates' rows with its leader's
 * norms and decision: tokens at every step beside 2 sinks (pairs), once with one decision per
 * layer (groups of 3), pages every 2 steps (pairs). */
static const char thrg_yaml[] = "name: thrg_t\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                "share: {heads: kv_head, layers: 2}\nselect: {threshold: 200}\n";
static const char thrgo_yaml[] = "name: thrgo_t\nrecent: 4\nscore: key_norm\nwhen: once\n"
                                 "share: {heads: layer, layers: 3}\nselect: {threshold: 800}\n";
static const char thrgp_yaml[] = "name: thrgp_t\nsinks: 4\nscore: key_norm\n"
                                 "granularity: {page: 4}\nwhen: {every: 2}\n"
                                 "share: {heads: kv_head, layers: 2}\nselect: {threshold: 800}\n";

/* Page bounds shared across layers at every step: the first layer's scores and decision as
 * state, the later layers' own pages named with them (pairs; one per layer beside 4 sinks,
 * groups of 3). */
static const char thrgb_yaml[] = "name: thrgb_t\nscore: page_bounds\ngranularity: {page: 4}\n"
                                 "share: {heads: kv_head, layers: 2}\nselect: {threshold: 2}\n";
static const char thrgbl_yaml[] = "name: thrgbl_t\nsinks: 4\nscore: page_bounds\n"
                                  "granularity: {page: 4}\nshare: {heads: layer, layers: 3}\n"
                                  "select: {threshold: 8}\n";

/* Attention beyond every step per KV head: one selection per layer (`share: layer`: every head's
 * row summed, or the newest row's mean against the threshold), once after the prompt (decided
 * from the prompt's attention, per KV head; the newest row's shared by pairs of layers), every N
 * steps (the decision made at the step before each selecting one, the steps between naming it
 * and the scores it was made from), and shared across layers at every step (pairs) and every 2
 * steps (one per layer, groups of 3): the group's first layer decides, its later layers name
 * their own cached rows with its biases. */
static const char thras_yaml[] = "name: thras_t\nrecent: 4\nscore: attention\nshare: layer\n"
                                 "select: {threshold: 4.0}\n";
static const char thrasl_yaml[] = "name: thrasl_t\nrecent: 4\nshare: layer\n"
                                  "score: {attention: {accumulate: false}}\n"
                                  "select: {threshold: 0.05}\n";
static const char thrao_yaml[] = "name: thrao_t\nrecent: 4\nscore: attention\nwhen: once\n"
                                 "select: {threshold: 1.0}\n";
static const char thraol_yaml[] = "name: thraol_t\nsinks: 2\nrecent: 4\nwhen: once\n"
                                  "score: {attention: {accumulate: false}}\n"
                                  "share: {heads: layer, layers: 2}\n"
                                  "select: {threshold: 0.05}\n";
static const char thrae_yaml[] = "name: thrae_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                 "when: {every: 3}\nselect: {threshold: 1.0}\n";
static const char thrag_yaml[] = "name: thrag_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                 "share: {heads: kv_head, layers: 2}\n"
                                 "select: {threshold: 1.0}\n";
static const char thraeg_yaml[] = "name: thraeg_t\nrecent: 4\nscore: attention\n"
                                  "when: {every: 2}\nshare: {heads: layer, layers: 3}\n"
                                  "select: {threshold: 4.0}\n";

/* Page bounds every N steps: the query against the bounds at each selecting step (decode
 * positions 16, 19, 22, …), the decision and the pages' scores it was made from kept as state for
 * the steps between; beside 4 sinks one per layer by pairs of layers every 2 steps; beside a
 * window of 3 per KV head by groups of 3 every 2 steps. */
static const char thrbe_yaml[] = "name: thrbe_t\nscore: page_bounds\ngranularity: {page: 4}\n"
                                 "when: {every: 3}\nselect: {threshold: 2}\n";
static const char thrbes_yaml[] = "name: thrbes_t\nsinks: 4\nscore: page_bounds\n"
                                  "granularity: {page: 4}\nwhen: {every: 2}\n"
                                  "share: {heads: layer, layers: 2}\nselect: {threshold: 8}\n";
static const char thrbeg_yaml[] = "name: thrbeg_t\nrecent: 3\nscore: page_bounds\n"
                                  "granularity: {page: 4}\nwhen: {every: 2}\n"
                                  "share: {heads: kv_head, layers: 3}\nselect: {threshold: 2}\n";

/* Under `kv_budget: {recent: rest}` (the window the budget's rest, growing with the cached count;
 * run at kv_budget=0.5): key norms every 3 steps beside 2 sinks, attention every 2 and at every
 * step, page bounds every 2 beside 4 sinks — each selection's candidates those of its own step's
 * budget, the steps between naming them. */
static const char thrkr_yaml[] = "name: thrkr_t\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                 "when: {every: 3}\nkv_budget: {recent: rest}\n"
                                 "select: {threshold: 200}\n";
static const char thrar_yaml[] = "name: thrar_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                 "when: {every: 2}\nkv_budget: {recent: rest}\n"
                                 "select: {threshold: 1.0}\n";
static const char thrars_yaml[] = "name: thrars_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                  "kv_budget: {recent: rest}\nselect: {threshold: 1.0}\n";
static const char thrbr_yaml[] = "name: thrbr_t\nsinks: 4\nrecent: 4\nscore: page_bounds\n"
                                 "granularity: {page: 4}\nwhen: {every: 2}\n"
                                 "kv_budget: {recent: rest}\nselect: {threshold: 2}\n";

/* Window votes once after the prompt (SnapKV's score: the last 4 prompt queries' attention,
 * pooled over 3 neighbours, each KV head's query heads' mean): beside a window of 4 with max
 * pooling, at least 0.05; beside 2 sinks and a window of 5 with average pooling, one per layer,
 * at least 0.1; unpooled, shared by pairs of layers, at least 0.05. */
static const char thrwv_yaml[] =
    "name: thrwv_t\nrecent: 4\nwhen: once\n"
    "score: {window_attention: {window: 4, kernel: 3, pooling: maxpool}}\n"
    "select: {threshold: 0.05}\n";
static const char thrwva_yaml[] =
    "name: thrwva_t\nsinks: 2\nrecent: 5\nwhen: once\nshare: layer\n"
    "score: {window_attention: {window: 4, kernel: 3, pooling: avgpool}}\n"
    "select: {threshold: 0.1}\n";
static const char thrwvg_yaml[] = "name: thrwvg_t\nrecent: 4\nwhen: once\n"
                                  "score: {window_attention: {window: 4, kernel: 1}}\n"
                                  "share: {heads: kv_head, layers: 2}\n"
                                  "select: {threshold: 0.05}\n";

/* Key norms evicting for good (`evict: permanent`): a norm never changes, so the entries the
 * threshold keeps are those it keeps at every step — the same ops; beside a window of 4, at least
 * 200; one per layer beside 2 sinks and a window of 3, at least 800. */
static const char thrkp_yaml[] = "name: thrkp_t\nrecent: 4\nscore: key_norm\nevict: permanent\n"
                                 "select: {threshold: 200}\n";
static const char thrkps_yaml[] = "name: thrkps_t\nsinks: 2\nrecent: 3\nscore: key_norm\n"
                                  "evict: permanent\nshare: layer\nselect: {threshold: 800}\n";

/* Accumulated attention evicting for good: a dropped entry is attended by no query (biased
 * out), so its score stays below the threshold, and a kept one's only grows — the every-step
 * threshold's ops; beside a window of 4, at least 1; one per layer beside 2 sinks, at least 4. */
static const char thrap_yaml[] = "name: thrap_t\nrecent: 4\nscore: attention\nevict: permanent\n"
                                 "select: {threshold: 1}\n";
static const char thraps_yaml[] = "name: thraps_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                  "share: layer\nevict: permanent\nselect: {threshold: 4}\n";

/* Attention in pages of 4 (select() scores a page by its candidates' sum), at every step: beside
 * a window of 4, accumulated, at least 2; the newest row one per layer beside 6 sinks (a page
 * holding sinks and candidates) and a window of 3, at least 0.3; every 3 steps beside 2 sinks
 * and a window of 4, shared by pairs of layers, at least 3. */
static const char thrap4_yaml[] = "name: thrap4_t\nrecent: 4\nscore: attention\n"
                                  "granularity: {page: 4}\nselect: {threshold: 2}\n";
static const char thrapl_yaml[] = "name: thrapl_t\nsinks: 6\nrecent: 3\n"
                                  "score: {attention: {accumulate: false}}\n"
                                  "granularity: {page: 4}\nshare: layer\n"
                                  "select: {threshold: 0.3}\n";
static const char thrapg_yaml[] = "name: thrapg_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                  "granularity: {page: 4}\nwhen: {every: 3}\n"
                                  "share: {heads: kv_head, layers: 2}\nselect: {threshold: 3}\n";

/* Evicting for good by scores that move either way (the newest row; a page's sum): the dropped
 * entries carried as state, OR'ed with each decision. The newest row beside a window of 4, at
 * least 0.05; accumulated attention in pages of 4 beside 2 sinks and a window of 4, at least 2;
 * the newest row in pages, one per layer, beside 6 sinks and a window of 3, at least 0.3. */
static const char thrgl_yaml[] = "name: thrgl_t\nrecent: 4\n"
                                 "score: {attention: {accumulate: false}}\nevict: permanent\n"
                                 "select: {threshold: 0.05}\n";
static const char thrgap_yaml[] = "name: thrgap_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                  "granularity: {page: 4}\nevict: permanent\n"
                                  "select: {threshold: 2}\n";
static const char thrgpl_yaml[] = "name: thrgpl_t\nsinks: 6\nrecent: 3\n"
                                  "score: {attention: {accumulate: false}}\n"
                                  "granularity: {page: 4}\nshare: layer\nevict: permanent\n"
                                  "select: {threshold: 0.3}\n";

/* Key norms in pages evicting for good (a page's sum grows as more of it leaves the window): the
 * dropped entries as state; pages of 4 beside 2 sinks and a window of 4, at least 800; one per
 * layer beside 5 sinks and a window of 3, at least 3000. */
static const char thrgk_yaml[] = "name: thrgk_t\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                 "granularity: {page: 4}\nevict: permanent\n"
                                 "select: {threshold: 800}\n";
static const char thrgkl_yaml[] = "name: thrgkl_t\nsinks: 5\nrecent: 3\nscore: key_norm\n"
                                  "granularity: {page: 4}\nshare: layer\nevict: permanent\n"
                                  "select: {threshold: 3000}\n";

/* The same shapes under a kv_budget fraction (`{recent: rest}`: the window what the sinks leave
 * of round(F·P) entries; `{recent: 0.5}`: half of what they leave): evicting for good, the budget
 * is the prompt's, so the sinks and window stay fixed and a dropped candidate stays one. The
 * newest row beside 2 sinks, at least 0.05; accumulated attention in pages of 4, at least 2; the
 * newest row in pages one per layer beside 6 sinks, at least 0.3; key norms in pages beside 2
 * sinks, at least 800. */
static const char thrfl_yaml[] = "name: thrfl_t\nsinks: 2\nrecent: 4\n"
                                 "score: {attention: {accumulate: false}}\nevict: permanent\n"
                                 "kv_budget: {recent: rest}\nselect: {threshold: 0.05}\n";
static const char thrfap_yaml[] = "name: thrfap_t\nsinks: 2\nrecent: 4\nscore: attention\n"
                                  "granularity: {page: 4}\nevict: permanent\n"
                                  "kv_budget: {recent: rest}\nselect: {threshold: 2}\n";
static const char thrfpl_yaml[] = "name: thrfpl_t\nsinks: 6\nrecent: 3\n"
                                  "score: {attention: {accumulate: false}}\n"
                                  "granularity: {page: 4}\nshare: layer\nevict: permanent\n"
                                  "kv_budget: {recent: rest}\nselect: {threshold: 0.3}\n";
static const char thrfk_yaml[] = "name: thrfk_t\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                 "granularity: {page: 4}\nevict: permanent\n"
                                 "kv_budget: {recent: 0.5}\nselect: {threshold: 800}\n";

typedef struct shape {
    const char *file, *text, *name;
    const char *param; /* a policy parameter key=value, or NULL */
} shape;

#define N_SHAPES 50
#define ATT_FROM 17       /* the attention shapes beyond every step per KV head */
#define BOUNDS_FROM 24    /* page bounds every N */
#define BUDGET_FROM 27    /* under a kv_budget fraction */
#define WINDOW_FROM 31    /* window votes */
#define PERM_FROM 34      /* evicting for good */
#define ATT_PAGES_FROM 38 /* attention in pages */
#define GONE_FROM 41      /* evicting for good, the dropped entries as state */
#define GONE_FRAC_FROM 46 /* the same under a kv_budget fraction */
static const shape shapes[N_SHAPES] = {{"thr.yaml", thr_yaml, "thr_t", NULL},
                                       {"thrpg.yaml", thrpg_yaml, "thrpg_t", NULL},
                                       {"thrpb.yaml", thrpb_yaml, "thrpb_t", NULL},
                                       {"thrsh.yaml", thrsh_yaml, "thrsh_t", NULL},
                                       {"thrpgsh.yaml", thrpgsh_yaml, "thrpgsh_t", NULL},
                                       {"thrpbsh.yaml", thrpbsh_yaml, "thrpbsh_t", NULL},
                                       {"thronce.yaml", thronce_yaml, "thronce_t", NULL},
                                       {"threv.yaml", threv_yaml, "threv_t", NULL},
                                       {"thrpgonce.yaml", thrpgonce_yaml, "thrpgonce_t", NULL},
                                       {"thrpgev.yaml", thrpgev_yaml, "thrpgev_t", NULL},
                                       {"thratt.yaml", thratt_yaml, "thratt_t", NULL},
                                       {"thrattl.yaml", thrattl_yaml, "thrattl_t", NULL},
                                       {"thrg.yaml", thrg_yaml, "thrg_t", NULL},
                                       {"thrgo.yaml", thrgo_yaml, "thrgo_t", NULL},
                                       {"thrgp.yaml", thrgp_yaml, "thrgp_t", NULL},
                                       {"thrgb.yaml", thrgb_yaml, "thrgb_t", NULL},
                                       {"thrgbl.yaml", thrgbl_yaml, "thrgbl_t", NULL},
                                       {"thras.yaml", thras_yaml, "thras_t", NULL},
                                       {"thrasl.yaml", thrasl_yaml, "thrasl_t", NULL},
                                       {"thrao.yaml", thrao_yaml, "thrao_t", NULL},
                                       {"thraol.yaml", thraol_yaml, "thraol_t", NULL},
                                       {"thrae.yaml", thrae_yaml, "thrae_t", NULL},
                                       {"thrag.yaml", thrag_yaml, "thrag_t", NULL},
                                       {"thraeg.yaml", thraeg_yaml, "thraeg_t", NULL},
                                       {"thrbe.yaml", thrbe_yaml, "thrbe_t", NULL},
                                       {"thrbes.yaml", thrbes_yaml, "thrbes_t", NULL},
                                       {"thrbeg.yaml", thrbeg_yaml, "thrbeg_t", NULL},
                                       {"thrkr.yaml", thrkr_yaml, "thrkr_t", "kv_budget=0.5"},
                                       {"thrar.yaml", thrar_yaml, "thrar_t", "kv_budget=0.5"},
                                       {"thrars.yaml", thrars_yaml, "thrars_t", "kv_budget=0.5"},
                                       {"thrbr.yaml", thrbr_yaml, "thrbr_t", "kv_budget=0.5"},
                                       {"thrwv.yaml", thrwv_yaml, "thrwv_t", NULL},
                                       {"thrwva.yaml", thrwva_yaml, "thrwva_t", NULL},
                                       {"thrwvg.yaml", thrwvg_yaml, "thrwvg_t", NULL},
                                       {"thrkp.yaml", thrkp_yaml, "thrkp_t", NULL},
                                       {"thrkps.yaml", thrkps_yaml, "thrkps_t", NULL},
                                       {"thrap.yaml", thrap_yaml, "thrap_t", NULL},
                                       {"thraps.yaml", thraps_yaml, "thraps_t", NULL},
                                       {"thrap4.yaml", thrap4_yaml, "thrap4_t", NULL},
                                       {"thrapl.yaml", thrapl_yaml, "thrapl_t", NULL},
                                       {"thrapg.yaml", thrapg_yaml, "thrapg_t", NULL},
                                       {"thrgl.yaml", thrgl_yaml, "thrgl_t", NULL},
                                       {"thrgap.yaml", thrgap_yaml, "thrgap_t", NULL},
                                       {"thrgpl.yaml", thrgpl_yaml, "thrgpl_t", NULL},
                                       {"thrgk.yaml", thrgk_yaml, "thrgk_t", NULL},
                                       {"thrgkl.yaml", thrgkl_yaml, "thrgkl_t", NULL},
                                       {"thrfl.yaml", thrfl_yaml, "thrfl_t", "kv_budget=0.5"},
                                       {"thrfap.yaml", thrfap_yaml, "thrfap_t", "kv_budget=0.5"},
                                       {"thrfpl.yaml", thrfpl_yaml, "thrfpl_t", "kv_budget=0.6"},
                                       {"thrfk.yaml", thrfk_yaml, "thrfk_t", "kv_budget=0.75"}};

/* On shares: 5 layers x 4 KV heads x 8 decode steps = 160 masks, each equal to select() over
 * the session's values (ties at the threshold within the stated bound), every op as
 * predicted, no NOTE, and the policy's selection changes the logits (it drops entries). */
static void thr_on(const char *pn, const shape *s)
{
    char out[1 << 14], own[120];
    char *yaml = strdup(th_file(&td, s->file, s->text));
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'%s%s",
                  pn, yaml, s->param ? " --policy-param " : "", s->param ? s->param : "");
    ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
    snprintf(own, sizeof own, "selection on shares from %s's own emitted ops", s->name);
    ck_assert_msg(strstr(out, own), "%s", out);
    th_own_select(out, 160);
    const char *eff = strstr(out, "the policy's own effect");
    ck_assert_msg(eff && strstr(eff, "logit difference max ") &&
                      atof(strstr(eff, "logit difference max ") + 21) > 0.01,
                  "%s", out);
    free(yaml);
}

START_TEST(test_thr_tokens_semi2k) { thr_on("semi2k", &shapes[0]); }
END_TEST

START_TEST(test_thr_tokens_aby3) { thr_on("aby3", &shapes[0]); }
END_TEST

START_TEST(test_thr_pages_semi2k) { thr_on("semi2k", &shapes[1]); }
END_TEST

START_TEST(test_thr_pages_aby3) { thr_on("aby3", &shapes[1]); }
END_TEST

START_TEST(test_thr_bounds_semi2k) { thr_on("semi2k", &shapes[2]); }
END_TEST

START_TEST(test_thr_bounds_aby3) { thr_on("aby3", &shapes[2]); }
END_TEST

START_TEST(test_thr_shared_semi2k)
{
    for (int i = 3; i < 6; i++)
        thr_on("semi2k", &shapes[i]);
}
END_TEST

START_TEST(test_thr_shared_aby3)
{
    for (int i = 3; i < 6; i++)
        thr_on("aby3", &shapes[i]);
}
END_TEST

START_TEST(test_thr_once_every_semi2k)
{
    for (int i = 6; i < 10; i++)
        thr_on("semi2k", &shapes[i]);
}
END_TEST

START_TEST(test_thr_once_every_aby3)
{
    for (int i = 6; i < 10; i++)
        thr_on("aby3", &shapes[i]);
}
END_TEST

START_TEST(test_thr_att_semi2k)
{
    for (int i = 10; i < 12; i++)
        thr_on("semi2k", &shapes[i]);
}
END_TEST

START_TEST(test_thr_att_aby3)
{
    for (int i = 10; i < 12; i++)
        thr_on("aby3", &shapes[i]);
}
END_TEST

/* thr_on over shapes [from, to) in semi2k (p 0) or aby3 (1): a TH_LOOPS test's _i. */
static void thr_range(int p, int from, int to)
{
    static const char *const pn[] = {"semi2k", "aby3"};
    for (int i = from; i < to; i++)
        thr_on(pn[p], &shapes[i]);
}

/* Shared across layers (shapes 12 to 16): replayed with a NOTE before, "cost declared". */
START_TEST(test_thr_groups) { thr_range(_i, 12, ATT_FROM); }
END_TEST

/* Attention shared per layer, once, every N or across layers (shapes 17 to 23): replayed with a
 * NOTE before, "cost declared". */
START_TEST(test_thr_att_more) { thr_range(_i, ATT_FROM, BOUNDS_FROM); }
END_TEST

/* Page bounds every N steps (shapes 24 to 26): replayed with a NOTE before, "cost declared". */
START_TEST(test_thr_bounds_every) { thr_range(_i, BOUNDS_FROM, BUDGET_FROM); }
END_TEST

/* Under a kv_budget fraction (shapes 27 to 30): every N replayed with a NOTE before, "cost
 * declared"; attention at every step ran on shares and failed its audit (each step's decision
 * made over the candidates of the step before's budget). */
START_TEST(test_thr_budget) { thr_range(_i, BUDGET_FROM, WINDOW_FROM); }
END_TEST

/* Window votes (shapes 31 to 33): replayed with a NOTE before, "cost declared". */
START_TEST(test_thr_window) { thr_range(_i, WINDOW_FROM, PERM_FROM); }
END_TEST

/* Evicting for good by key norms (shapes 34 and 35) and accumulated attention (36 and 37):
 * replayed with a NOTE before, "cost declared". */
START_TEST(test_thr_perm) { thr_range(_i, PERM_FROM, ATT_PAGES_FROM); }
END_TEST

/* Attention in pages (shapes 38 to 40): replayed with a NOTE before, "cost declared". */
START_TEST(test_thr_att_pages) { thr_range(_i, ATT_PAGES_FROM, GONE_FROM); }
END_TEST

/* Evicting for good by the newest row or a page's sum (shapes 41 to 45): replayed with a NOTE
 * before, "cost declared". */
START_TEST(test_thr_gone) { thr_range(_i, GONE_FROM, GONE_FRAC_FROM); }
END_TEST

/* The same under a kv_budget fraction (shapes 46 to 49): replayed with a NOTE before, "cost
 * declared". */
START_TEST(test_thr_gone_frac) { thr_range(_i, GONE_FRAC_FROM, N_SHAPES); }
END_TEST

/* With a window of 2 the candidates reach into the voting queries' own rows (c1 > P − window),
 * to which select() gives no votes: the ops vote 0 for them too (replayed with the NOTE before,
 * "cost declared"): on shares in both protocols, every op as predicted, 160 masks its select()'s
 * over the session's values, and `policy check` a match. */
START_TEST(test_thr_window_reach)
{
    static const char *const pn[2] = {"semi2k", "aby3"};
    char out[1 << 14];
    char *yaml = strdup(th_file(&td, "thrwvn.yaml",
                                "name: thrwvn_t\nrecent: 2\nwhen: once\n"
                                "score: {window_attention: {window: 4, kernel: 3}}\n"
                                "select: {threshold: 0.05}\n"));
    for (int i = 0; i < 2; i++) {
        th_cli_expect(out, sizeof out, 0, "prediction: yes",
                      "validate --model stories260K -p %s --accuracy 24 --prompt 16 --policy '%s'",
                      pn[i], yaml);
        ck_assert_msg(!strstr(out, "has no selection on shares"), "%s", out);
        th_own_select(out, 160);
    }
    th_cli_expect(out, sizeof out, 0, "thrwvn_t: match", "policy check '%s' --prompt 16", yaml);
    ck_assert_uint_eq(th_chosen(out), 640);
    free(yaml);
}
END_TEST

/* policy check: its ops keep what select() keeps, every one of the 640 masks chosen by them
 * (with 6 sinks the first candidate page holds two of them too). */
START_TEST(test_thr_check)
{
    char out[1 << 13], want[80];
    for (int i = 0; i < N_SHAPES; i++) {
        char *yaml = strdup(th_file(&td, shapes[i].file, shapes[i].text));
        snprintf(want, sizeof want, "%s: match", shapes[i].name);
        th_cli_expect(out, sizeof out, 0, want, "policy check '%s' --prompt 16%s%s", yaml,
                      shapes[i].param ? " --param " : "", shapes[i].param ? shapes[i].param : "");
        ck_assert_uint_eq(th_chosen(out), 640);
        if (i == 1) {
            th_cli_expect(out, sizeof out, 0, want, "policy check '%s' --prompt 17 --param sinks=6",
                          yaml);
            ck_assert_uint_eq(th_chosen(out), 640);
        }
        free(yaml);
    }
}
END_TEST

static const policy_ops *load_shape(const shape *s)
{
    errbuf e = {{0}};
    const policy_ops *p = policy_compose_find(s->name);
    if (!p)
        ck_assert_msg(policy_compose_load(th_file(&td, s->file, s->text), &p, &e) == MS_OK, "%s",
                      e.msg);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* A decode step's ops open nothing: no REVEAL (the kept count stays secret), one comparison per
 * candidate unit and KV head, or per unit shared (32 cached entries, a window of 4: 28 tokens;
 * 4 sinks: 7 pages; no sinks: 8 pages), and every candidate's cached row named as the
 * selection. */
START_TEST(test_thr_opens_nothing)
{
    static const uint32_t units[6] = {4 * 28, 4 * 7, 4 * 8, 28, 7, 8};
    static const uint32_t rows[6] = {28, 28, 32, 28, 28, 32};
    for (int i = 0; i < 6; i++) {
        const policy_ops *p = load_shape(&shapes[i]);
        policy_env env = {.n_layers = 2,
                          .n_heads = 8,
                          .n_kv_heads = 4,
                          .head_dim = 8,
                          .prompt_len = 16,
                          .max_len = 48};
        polfix_inst x;
        polfix_open(&x, p, "", &env);
        errbuf e = {{0}};
        op_program prg;
        op_program_init(&prg);
        pcheck_decl io;
        uint32_t kept[4] = {32, 32, 32, 32};
        ck_assert_msg(pcheck_emit(p, x.st, PHASE_DECODE, 1, 32, kept, &prg, &io, &e) == MS_OK, "%s",
                      e.msg);
        size_t lt = 0, reveal = 0;
        for (size_t j = 0; j < prg.n_ops; j++) {
            const op *o = &prg.ops[j];
            reveal += o->kind == OP_REVEAL;
            lt += o->kind == OP_LT ? (size_t)o->batch * o->m * o->n : 0;
        }
        ck_assert_uint_eq(reveal, 0);
        ck_assert_uint_eq(lt, units[i]);
        ck_assert(io.has_sel && io.has_bias && io.has_thr);
        ck_assert_uint_eq(io.sel_m, rows[i]);
        ck_assert_uint_eq(io.sel_r1 - io.sel_r0, rows[i]);
        op_program_free(&prg);
        p->fini(x.st);
    }
}
END_TEST

/* The attention shapes', page bounds' every N and window votes' ops open nothing either, at the
 * step that decides (a prompt of 16, 8 query heads on 4 KV heads): one comparison per candidate
 * and selection (attention, a window of 4, beside 2 sinks or not: 29 or 27 candidates of 33
 * entries, 28 or 30 of 34, 12 or 10 of the prompt; pages of 4: 9 of 34 entries, 7 after 4 sinks
 * of 32, 8 of 29 candidates; votes: 12 of the prompt, 9 between 2 sinks and a window of 5; key
 * norms evicting for good: 28 of 32, 27 between 2 sinks and a window of 3; attention evicting for
 * good: 29 of 33, 27 between 2 sinks and a window of 4; attention in pages of 4: 8 pages of 29
 * candidates, 7 of [6, 30) after 6 sinks, 8 of [2, 30) every 3 steps at 34 entries; the dropped
 * entries as state: 29 of 33 per KV head, 8 pages of [2, 29), 7 of [6, 30), key norms 7 pages of
 * [2, 28) and 7 of [5, 29); per KV head or one per layer; under a kv_budget fraction of 0.5 to
 * 0.75, sinks and window fixed by the prompt: 25 of 33 per KV head, 7 pages of [2, 27), 7 of [6,
 * 29), key norms 7 pages of [2, 27)), none at a
 * step between selections or in a later layer of a group; a decode step names every cached row
 * (once, pages: the candidates of the deciding step, the rest public), biased by the decision. */
START_TEST(test_thr_more_opens_nothing)
{
    static const struct {
        int shape, phase;
        uint32_t layer, kv, lt, sel;
    } c[] = {{17, PHASE_DECODE, 0, 32, 29, 32},  {18, PHASE_DECODE, 0, 32, 29, 32},
             {19, PHASE_PREFILL, 0, 16, 48, 0},  {19, PHASE_DECODE, 0, 32, 0, 12},
             {20, PHASE_PREFILL, 0, 16, 10, 0},  {20, PHASE_DECODE, 1, 32, 0, 10},
             {21, PHASE_DECODE, 0, 33, 112, 33}, {21, PHASE_DECODE, 0, 32, 0, 32},
             {22, PHASE_DECODE, 0, 32, 108, 32}, {22, PHASE_DECODE, 1, 32, 0, 32},
             {23, PHASE_DECODE, 0, 33, 30, 33},  {23, PHASE_DECODE, 1, 33, 0, 33},
             {24, PHASE_DECODE, 0, 34, 36, 34},  {24, PHASE_DECODE, 0, 33, 0, 31},
             {25, PHASE_DECODE, 0, 32, 7, 28},   {25, PHASE_DECODE, 1, 33, 0, 28},
             {26, PHASE_DECODE, 0, 32, 32, 29},  {26, PHASE_DECODE, 0, 33, 0, 29},
             {31, PHASE_PREFILL, 0, 16, 48, 0},  {31, PHASE_DECODE, 0, 32, 0, 12},
             {32, PHASE_PREFILL, 0, 16, 9, 0},   {33, PHASE_DECODE, 1, 32, 0, 12},
             {34, PHASE_DECODE, 0, 32, 112, 28}, {35, PHASE_DECODE, 0, 32, 27, 27},
             {36, PHASE_DECODE, 0, 32, 116, 32}, {37, PHASE_DECODE, 0, 32, 27, 32},
             {38, PHASE_DECODE, 0, 32, 32, 32},  {39, PHASE_DECODE, 0, 32, 7, 32},
             {40, PHASE_DECODE, 0, 33, 32, 33},  {40, PHASE_DECODE, 0, 32, 0, 32},
             {40, PHASE_DECODE, 1, 33, 0, 33},   {41, PHASE_DECODE, 0, 32, 116, 32},
             {42, PHASE_DECODE, 0, 32, 32, 32},  {43, PHASE_DECODE, 0, 32, 7, 32},
             {44, PHASE_DECODE, 0, 32, 28, 26},  {45, PHASE_DECODE, 0, 32, 7, 24},
             {46, PHASE_DECODE, 0, 32, 100, 32}, {47, PHASE_DECODE, 0, 32, 28, 32},
             {48, PHASE_DECODE, 0, 32, 7, 32},   {49, PHASE_DECODE, 0, 32, 28, 25}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        int part = c[i].shape < WINDOW_FROM ? 0 : c[i].shape < GONE_FROM ? 1 : 2;
        if (part != _i)
            continue; /* in three parts: one process loads at most 16 compositions */
        const shape *sh = &shapes[c[i].shape];
        const policy_ops *p = load_shape(sh);
        policy_env env = {.n_layers = 2,
                          .n_heads = 8,
                          .n_kv_heads = 4,
                          .head_dim = 8,
                          .prompt_len = 16,
                          .max_len = 48};
        polfix_inst x;
        polfix_open(&x, p, sh->param ? sh->param : "", &env);
        errbuf e = {{0}};
        op_program prg;
        op_program_init(&prg);
        pcheck_decl io;
        uint32_t kept[4] = {c[i].kv, c[i].kv, c[i].kv, c[i].kv};
        ck_assert_msg(pcheck_emit(p, x.st, c[i].phase, c[i].layer, c[i].kv, kept, &prg, &io, &e) ==
                          MS_OK,
                      "%s", e.msg);
        size_t lt = 0, reveal = 0;
        for (size_t j = 0; j < prg.n_ops; j++) {
            const op *o = &prg.ops[j];
            reveal += o->kind == OP_REVEAL;
            lt += o->kind == OP_LT ? (size_t)o->batch * o->m * o->n : 0;
        }
        ck_assert_uint_eq(reveal, 0);
        ck_assert_msg(lt == c[i].lt, "case %zu (%s): %zu comparisons, %u expected", i,
                      shapes[c[i].shape].name, lt, c[i].lt);
        if (c[i].phase == PHASE_DECODE) {
            ck_assert_msg(io.has_sel && io.has_bias && io.has_thr, "case %zu", i);
            ck_assert_uint_eq(io.sel_m, c[i].sel);
        }
        op_program_free(&prg);
        p->fini(x.st);
    }
}
END_TEST

/* `mpcsim run`'s cost path (the replay's emit_cost at its kept counts, the lowering attending
 * the rows the composition's attend hook states) costs each decode step as the session's
 * program (fixture_same_as_cost_path): every candidate attended, the comparisons its ops. */
static void same_as_cost_path(const shape *s, const char *pn)
{
    fixture_same_as_cost_path(&sf, pn, N, P, s->name, s->param ? &s->param : NULL, s->param ? 1 : 0,
                              "rows", 0, NULL, NULL);
}

/* In four parts: a run loads at most 16 compositions (each test its own process). */
START_TEST(test_thr_cost_path)
{
    const char *pn[2] = {"semi2k", "aby3"};
    int per = (N_SHAPES + 3) / 4, from = _i * per, to = _i == 3 ? N_SHAPES : from + per;
    for (int i = from; i < to; i++) {
        load_shape(&shapes[i]);
        for (int j = 0; j < 2; j++)
            same_as_cost_path(&shapes[i], pn[j]);
    }
}
END_TEST

Suite *thrsec_suite(void)
{
    Suite *s = suite_create("thrsec");
    TCase *tc = th_case(s, "thrsec", 120);
    STORIES_USE(tc);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_thr_tokens_semi2k, test_thr_tokens_aby3, test_thr_pages_semi2k,
             test_thr_pages_aby3, test_thr_bounds_semi2k, test_thr_bounds_aby3,
             test_thr_shared_semi2k, test_thr_shared_aby3, test_thr_once_every_semi2k,
             test_thr_once_every_aby3, test_thr_att_semi2k, test_thr_att_aby3, test_thr_check,
             test_thr_opens_nothing, test_thr_window_reach);
    TH_LOOPS(tc, 4, test_thr_cost_path);
    TH_LOOPS(tc, 2, test_thr_groups);
    TH_LOOPS(tc, 2, test_thr_att_more);
    TH_LOOPS(tc, 2, test_thr_bounds_every);
    TH_LOOPS(tc, 2, test_thr_budget);
    TH_LOOPS(tc, 2, test_thr_window);
    TH_LOOPS(tc, 2, test_thr_perm);
    TH_LOOPS(tc, 2, test_thr_att_pages);
    TH_LOOPS(tc, 2, test_thr_gone);
    TH_LOOPS(tc, 2, test_thr_gone_frac);
    TH_LOOPS(tc, 3, test_thr_more_opens_nothing);
    return s;
}
