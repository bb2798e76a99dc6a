/* check_compose_mpc.c — the cluster blocks of a composition (sim/policy/compose_cluster.c):
 * scenarios/policies/mpcache.yaml keeps the same entries as the hand-written mpcache on a
 * stories260K trace at every decode step, layer and KV head, at its defaults, at the paper's
 * budget, at kv_budget values and with its layer options; one cluster level is the two-level
 * selection with every parent chosen; a scenario run gives the same metrics and the same
 * policy bytes and rounds; `validate` selects on shares; `list policies` lists the shipped
 * compositions; a bad cluster file fails at its file:line:col. */
#include <check.h>
#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "polfix.h"
#include "stories.h"
#include "testdir.h"
#include "sim/policy/compose.h"
#include "sim/policy/policy.h"
#include "sim/trace/trace.h"

TESTDIR("check_compose_mpc")

static const char *tpath(const char *name) { return testdir_path(&td, name); }

/* mpcache's parameters and its composition's ("k=v k=v"); file NULL: mpcache.yaml. */
typedef struct pair {
    const char *params, *cparams, *file;
} pair;

#define ONE_LEVEL                                                                  \
    "name: cluster_one\nstatic: {keep: topk, ratio: 0.6}\nscore: cluster_bounds\n" \
    "granularity: {clusters: {size: 4, levels: 1}}\nselect: {topk: {ratio: 0.4}}\n"

static const pair pairs[] = {
    {"", "", NULL},
    {"s1=8 s2=4", "cluster=4", NULL},
    {"s1=8 s2=4 static=topk static_ratio=0.3 ratio2=0.2", "cluster=4 static=topk static_ratio=0.3",
     NULL},
    {"static=topk static_ratio=0.3 ratio2=0.2", "static=topk static_ratio=0.3", NULL},
    {"s1=8 s2=4 static=none alpha=0.3 ratio1=0.7 ratio2=0.4",
     "cluster=4 static=none alpha=0.3 ratio1=0.7 topk_ratio=0.4", NULL},
    {"s1=8 s2=4 static_threshold=0.02 window_frac=0.3",
     "cluster=4 static_threshold=0.02 window_frac=0.3", NULL},
    {"s1=8 s2=4 kv_budget=0.2", "cluster=4 kv_budget=0.2", NULL},
    {"s1=8 s2=4 static=topk kv_budget=0.25", "cluster=4 static=topk kv_budget=0.25", NULL},
    {"kv_budget=0.5", "kv_budget=0.5", NULL},
    {"s1=8 s2=4 layer_share=0", "cluster=4 share_layers=1", NULL},
    {"s1=8 s2=4 skip_first2=1 static=topk", "cluster=4 dense_layers=2 static=topk", NULL},
    {"s1=8 s2=4 static=topk static_ratio=0.6 ratio1=1 ratio2=0.4 layer_share=0", "", ONE_LEVEL},
};

#define P_LEN 40
#define T_LEN 64

/* The prompt's keys, as the replay gives them to a policy that indexes its static set. */
static int get_k(void *ctx, uint32_t layer, uint32_t pos, float *k)
{
    return trace_kv(ctx, layer, pos, k, NULL);
}

static const char *comp_path(const pair *c)
{
    static char path[600];
    if (c->file)
        return th_file(&td, "one.yaml", c->file);
    snprintf(path, sizeof path, "%s", th_data_path("scenarios/policies/mpcache.yaml"));
    return path;
}

/* Observes o as the replay does: the attention rows only where the policy asks for them. */
static void observe(const polfix_inst *x, const policy_obs *o)
{
    errbuf e;
    policy_obs w = *o;
    if (!(x->p->layer_needs(x->st, o->layer, o->pos) & POLICY_NEED_ATT))
        w.att = NULL;
    ck_assert_msg(x->p->observe(x->st, &w, &e) == MS_OK, "%s", e.msg);
}

/* Drives mpcache and the composition over the trace in lockstep as the replay does and asserts
 * the same keep mask everywhere; returns the decode masks that keep fewer than all entries. */
static size_t lockstep(const pair *c)
{
    errbuf e;
    trace *t;
    ck_assert_msg(trace_open(polfix_recorded_trace(&td), &t, &e) == MS_OK, "%s", e.msg);
    const trace_shape *sh = trace_get_shape(t);
    const uint32_t L = sh->n_layers, H = sh->n_heads, Hkv = sh->n_kv_heads, d = sh->head_dim;
    ck_assert_uint_ge(sh->n_tokens, T_LEN);
    policy_env env = {L, H, Hkv, d, sh->dim, sh->ffn_dim, P_LEN, T_LEN, NULL, t, get_k, 0, NULL};
    const policy_ops *cp = NULL;
    ck_assert_msg(policy_compose_load(comp_path(c), &cp, &e) == MS_OK, "%s", e.msg);
    polfix_inst a, b;
    polfix_open(&a, policy_find("mpcache"), c->params, &env);
    polfix_open(&b, cp, c->cparams, &env);
    uint8_t *ka = malloc((size_t)Hkv * T_LEN), *kb = malloc((size_t)Hkv * T_LEN);
    float *k = malloc((size_t)Hkv * d * sizeof *k), *v = malloc((size_t)Hkv * d * sizeof *v);
    float *att = malloc((size_t)H * (T_LEN + 1) * sizeof *att);
    size_t sparse = 0;
    for (uint32_t pos = 0; pos < T_LEN; pos++) {
        ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
        if (pos == P_LEN) {
            ck_assert_msg(a.p->prefill(a.st, &e) == MS_OK, "%s", e.msg);
            ck_assert_msg(b.p->prefill(b.st, &e) == MS_OK, "%s", e.msg);
        }
        for (uint32_t l = 0; l < L; l++) {
            const float *q = trace_q(t, l);
            memcpy(att, trace_att(t, l), (size_t)H * (pos + 1) * sizeof *att);
            if (pos >= P_LEN) {
                ck_assert_msg(a.p->select(a.st, l, pos, q, ka, &e) == MS_OK, "%s", e.msg);
                ck_assert_msg(b.p->select(b.st, l, pos, q, kb, &e) == MS_OK, "%s", e.msg);
                for (uint32_t g = 0; g < Hkv; g++) {
                    uint32_t kept = 0;
                    for (uint32_t j = 0; j < pos; j++) {
                        ck_assert_msg(ka[(size_t)g * pos + j] == kb[(size_t)g * pos + j],
                                      "mpcache %s vs %s: layer %u head %u pos %u entry %u: "
                                      "%d vs %d",
                                      c->params, c->cparams, l, g, pos, j, ka[(size_t)g * pos + j],
                                      kb[(size_t)g * pos + j]);
                        kept += ka[(size_t)g * pos + j];
                    }
                    sparse += kept < pos;
                }
                /* the attended rows' public bound, as the secure step lowers them */
                uint32_t ra[16], rb[16], kc[16] = {0};
                ck_assert_uint_le(Hkv, 16);
                a.p->attend(a.st, l, pos, kc, ra);
                b.p->attend(b.st, l, pos, kc, rb);
                for (uint32_t g = 0; g < Hkv; g++)
                    ck_assert_uint_eq(ra[g], rb[g]);
            }
            ck_assert_int_eq(trace_kv(t, l, pos, k, v), MS_OK);
            uint32_t hi = l % 2 ? Hkv / 2 : Hkv; /* odd layers observed in two spans of heads */
            policy_obs o = {.layer = l,
                            .pos = pos,
                            .q = q,
                            .k = k,
                            .v = v,
                            .att = att,
                            .kv_lo = 0,
                            .kv_hi = hi};
            observe(&a, &o);
            observe(&b, &o);
            if (hi < Hkv) {
                o.kv_lo = hi;
                o.kv_hi = Hkv;
                observe(&a, &o);
                observe(&b, &o);
            }
        }
        ck_assert_int_eq(a.p->one_time(a.st, pos), b.p->one_time(b.st, pos));
    }
    a.p->fini(a.st);
    b.p->fini(b.st);
    trace_close(t);
    free(ka);
    free(kb);
    free(k);
    free(v);
    free(att);
    return sparse;
}

START_TEST(test_kept_equal)
{
    const pair *c = &pairs[_i];
    size_t sparse = lockstep(c);
    ck_assert_msg(sparse > 0, "mpcache %s: no decode step selected anything", c->params);
}
END_TEST

/* ---- a scenario run: metrics and costs ---------------------------------------------------- */

START_TEST(test_scenario_equal)
{
    char yaml[8192], line[512];
    snprintf(yaml, sizeof yaml,
             "format: 1\nname: cmp\nprotocol: semi2k\nnetwork: lan\ncases:\n"
             "  - model: stories260K\n"
             "    workload: {prompt_len: %d, decode_len: %d}\n"
             "    trace: {source: record, text: %s}\n"
             "    policies:\n",
             P_LEN, T_LEN - P_LEN, th_data_path("tests/data/tinystories_sample.txt"));
    int n = 0;
    for (int i = 0; i < TH_N(pairs); i++) {
        if (pairs[i].file)
            continue;
        polfix_entry(line, sizeof line, "name: mpcache", pairs[i].params);
        strcat(yaml, line);
        char head[600];
        snprintf(head, sizeof head, "compose: %s", th_data_path("scenarios/policies/mpcache.yaml"));
        polfix_entry(line, sizeof line, head, pairs[i].cparams);
        strcat(yaml, line);
        n++;
    }
    char *scn = strdup(th_file(&td, "cmp.yaml", yaml));
    char *db = strdup(tpath("cmp.db"));
    polfix_run_equal(&td, scn, db, n, 1);
    free(scn);
    free(db);
}
END_TEST

/* ---- bad files ---------------------------------------------------------------------------- */

static const th_bad bad_files[] = {
    {"name: c1\nscore: cluster_bounds\nselect: {topk: {ratio: 0.2}}\n",
     ":2:8: error: ", "needs granularity clusters", NULL},
    {"name: c2\nstatic: {keep: topk}\nscore: attention\nselect: {topk: 4}\n",
     ":2:9: error: ", "'static' prefilters the prompt", NULL},
    {"name: c3\nscore: cluster_bounds\ngranularity: {clusters: {size: 8}}\n"
     "select: {topk: 4}\n",
     ":4:9: error: ", "top-k ratio", NULL},
    {"name: c4\nsinks: 4\nscore: cluster_bounds\ngranularity: clusters\n"
     "select: {topk: {ratio: 0.2}}\n",
     ":2:8: error: ", "'sinks' does not go with cluster granularity", NULL},
    {"name: c5\nscore: cluster_bounds\ngranularity: {clusters: {levels: 1, ratio1: 0.5}}\n"
     "select: {topk: {ratio: 0.2}}\n",
     ":3:45: error: ", "two levels", NULL},
    {"name: c6\nstatic: {keep: some}\nscore: cluster_bounds\ngranularity: clusters\n"
     "select: {topk: {ratio: 0.2}}\n",
     ":2:16: error: ", "is not a known static keep", "threshold topk none"},
    {"name: c7\nscore: key_norm\nselect: {topk: 4}\nshare: {layers: 2, from: 2}\n",
     ":4:26: error: ", "'share.from' goes with cluster granularity", NULL},
    {"name: c8\nscore: {cluster_bounds: {alpha: 2}}\ngranularity: clusters\n"
     "select: {topk: {ratio: 0.2}}\n",
     ":2:33: error: ", "'alpha' = '2'", NULL},
};

START_TEST(test_bad_file)
{
    const th_bad *c = &bad_files[_i];
    char *comp = strdup(th_file(&td, "comp.yaml", c->text));
    char yaml[2048];
    polfix_scenario(yaml, sizeof yaml, "compose: comp.yaml");
    polfix_run_refused(&td, yaml, comp, c, _i);
    free(comp);
}
END_TEST

/* Parameters the cluster ops cannot express, and kv_budget against an explicit threshold:
 * the entry's file:line:col, exit 2, no database. */
static const th_bad bad_params[] = {
    {"dense_layers: 1", ":10:", "keeps 0 or 2 first layers dense", NULL},
    {"static: threshold, kv_budget: 0.2", ":10:", "which kv_budget cannot set", NULL},
};

START_TEST(test_bad_params)
{
    const th_bad *c = &bad_params[_i];
    char entry[1024], yaml[2048];
    snprintf(entry, sizeof entry, "compose: %s, %s",
             th_data_path("scenarios/policies/mpcache.yaml"), c->text);
    polfix_scenario(yaml, sizeof yaml, entry);
    polfix_run_refused(&td, yaml, NULL, c, _i);
}
END_TEST

/* `list policies` lists every shipped composition (the .yaml files of scenarios/policies) by
 * name and summary, marked with its file; mpcache_blocks with its cluster parameters and no
 * sinks. */
START_TEST(test_list)
{
    static char out[1 << 17];
    th_cli_expect(out, sizeof out, 0, "mpcache_blocks static look-once eviction", "list policies");
    DIR *d = opendir(th_data_path("scenarios/policies"));
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".yaml"))
            continue;
        char mark[300];
        snprintf(mark, sizeof mark, "    (composition scenarios/policies/%s; ", de->d_name);
        const char *at = strstr(out, mark);
        ck_assert_msg(at, "no '%s' in:\n%s", mark, out);
        /* the line above: "<name>_blocks <summary>" or the file's own name */
        const char *line = at - 1;
        while (line > out && line[-1] != '\n')
            line--;
        ck_assert_msg(line[0] != ' ' && strchr(line, ' ') < at, "%.*s", (int)(at - line), line);
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 8);
    /* mpcache_blocks' entry: up to the next line that is not indented */
    const char *m = strstr(out, "mpcache_blocks "), *end = strchr(m, '\n');
    while (end && end[1] == ' ')
        end = strchr(end + 1, '\n');
    ck_assert_ptr_nonnull(end);
    char block[4096];
    snprintf(block, sizeof block, "%.*s", (int)(end - m), m);
    ck_assert_msg(strstr(block, "\n    cluster            16 "), "%s", block);
    ck_assert_msg(strstr(block, "\n    static             threshold "), "%s", block);
    ck_assert_msg(!strstr(block, "\n    sinks "), "%s", block);
}
END_TEST

/* `validate --policy mpcache.yaml`: the cluster blocks select on shares (MPCache's secure
 * session with the composition's shapes), every op's bytes and rounds as predicted. */
START_TEST(test_validate)
{
    static char out[16384];
    th_cli_expect(out, sizeof out, 0,
                  "bytes and rounds of every op of the 9 steps equal the "
                  "prediction: yes",
                  "validate --model stories260K --accuracy 48 --prompt 40 --protocol semi2k "
                  "--policy '%s' --policy-param cluster=4 --text '%s'",
                  th_data_path("scenarios/policies/mpcache.yaml"),
                  th_data_path("tests/data/tinystories_sample.txt"));
    ck_assert_msg(strstr(out, "mpcache_blocks selected on shares (static threshold: the kept "
                              "counts revealed, two-level clusters, "),
                  "%s", out);
    ck_assert_msg(strstr(out, "attended sets equal to"), "%s", out);
}
END_TEST

/* `policy check FILE.yaml` takes a composition as well as a scenario: mpcache.yaml's selection
 * is the secure session's (checked by `validate`, above), not one the plain-engine check binds;
 * a bad composition fails at its file:line:col. */
START_TEST(test_policy_check)
{
    static char out[16384];
    const char *f = th_data_path("scenarios/policies/mpcache.yaml");
    char want[1200];
    snprintf(want, sizeof want, "validate --model stories260K --accuracy N --policy %s`", f);
    th_cli_expect(out, sizeof out, 1, want,
                  "policy check '%s' --param cluster=4 --prompt 24 "
                  "--decode 8",
                  f);
    ck_assert_msg(strstr(out, "mpcache_blocks: not checked here ("), "%s", out);
    char *bad = strdup(th_file(&td, "pc.yaml",
                               "name: pc\nscore: cluster_bounds\n"
                               "granularity: clusters\nselect: {topk: 4}\n"));
    snprintf(want, sizeof want, "%s:4:9: error: clusters are chosen by a top-k ratio", bad);
    th_cli_expect(out, sizeof out, 2, want, "policy check '%s'", bad);
    free(bad);
}
END_TEST

Suite *compose_mpc_suite(void)
{
    Suite *s = suite_create("compose_mpc");
    TCase *tc = th_case(s, "equal", 120);
    TESTDIR_USE(tc);
    TH_LOOPS(tc, TH_N(pairs), test_kept_equal);
    TH_TESTS(tc, test_scenario_equal);
    tc = th_case(s, "bad", 0);
    TESTDIR_USE(tc);
    TH_LOOPS(tc, TH_N(bad_files), test_bad_file);
    TH_LOOPS(tc, TH_N(bad_params), test_bad_params);
    TH_TESTS(tc, test_list, test_validate, test_policy_check);
    return s;
}
