/* check_cost_files.c — `mpcsim cost --policy` on a policy that is not registered: a composition
 * file (a scenario's {compose: FILE.yaml}) and a plug-in (a scenario's {plugin: PATH.so}); one
 * decode step is the step a run of the same policy stores. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sqlfix.h"

TESTDIR("check_cost_files")

/* The value after "key": in a compact JSON object; fails when absent. */
static double json_num(const char *json, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(json, k);
    ck_assert_msg(p, "no %s in %s", key, json);
    return strtod(p + strlen(k), NULL);
}

/* cost --policy FILE|PATH at kv 64 equals a run's bytes_decode_step, rounds_decode_step and
 * latency_decode_step_s for prompt_len 63, decode_len 1, for both protocols. */
START_TEST(test_policy_files_are_the_runs)
{
    char comp[1024], so[1024], scn[4096];
    snprintf(comp, sizeof comp, "%s", th_data_path("scenarios/policies/h2o.yaml"));
    snprintf(so, sizeof so, "%s", th_data_path("build/plugins/keynorm.so"));
    ck_assert_msg(th_exists(so), "%s is missing: run `make plugins` (make check does)", so);
    snprintf(scn, sizeof scn,
             "format: 1\nname: cf\nmodel: stories260K\nprotocol: [semi2k, aby3]\n"
             "network: wan\ntrace: {source: synth}\nseed: 5\n"
             "workload: {prompt_len: 63, decode_len: 1}\npolicies:\n"
             "  - {compose: %s}\n"
             "  - {compose: %s, kv_budget: 0.25}\n"
             "  - {plugin: %s, keep: 12}\n",
             comp, comp, so);
    const char *path = th_file(&td, "cf.yaml", scn);
    const char *db = testdir_path(&td, "cf.db");
    char out[16384];
    th_cli_expect(out, sizeof out, 0, NULL, "run %s -o %s -q", path, db);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 6);
    static const struct {
        const char *policy, *params, *where;
    } cases[] = {
        {"h2o_blocks", "", "policy_label = 'h2o_blocks(recent_ratio=0.1,topk_ratio=0.1)'"},
        {"h2o_blocks", "--policy-param kv_budget=0.25", "policy_label = 'h2o_blocks@25%'"},
        {"keynorm", "--policy-param keep=12", "policy = 'keynorm'"},
    };
    const char *protos[] = {"semi2k", "aby3"};
    for (int pi = 0; pi < 2; pi++)
        for (int i = 0; i < TH_N(cases); i++) {
            const char *file = strcmp(cases[i].policy, "keynorm") ? comp : so;
            th_cli_expect(out, sizeof out, 0, "\"policy\"",
                          "cost -m stories260K -p %s -n wan -k 64 --seed 5 --json --policy %s %s",
                          protos[pi], file, cases[i].params);
            const char *metric[] = {"bytes_decode_step", "rounds_decode_step",
                                    "latency_decode_step_s"};
            const char *key[] = {"bytes_online", "rounds", "latency_s"};
            for (int m = 0; m < 3; m++) {
                char q[512];
                snprintf(q, sizeof q,
                         "SELECT CAST(round(m.value * 1e9) AS INTEGER) FROM metrics m JOIN runs r "
                         "ON r.id = m.run_id WHERE m.name = '%s' AND r.protocol = '%s' AND "
                         "r.policy = '%s' AND %s",
                         metric[m], protos[pi], cases[i].policy, cases[i].where);
                long long run = sqlfix_file_int(db, q);
                long long cost = (long long)(json_num(out, key[m]) * 1e9 + 0.5);
                ck_assert_int_gt(run, 0);
                ck_assert_msg(run == cost, "%s %s %s %s: run %lld, cost %lld", protos[pi],
                              cases[i].policy, cases[i].params, metric[m], run, cost);
            }
            /* the policy's own selection ops are in the step */
            const char *pol = strstr(out, "\"policy\":{\"rounds\":");
            ck_assert_ptr_nonnull(pol);
            ck_assert_int_gt(atoll(pol + strlen("\"policy\":{\"rounds\":")), 0);
        }
}
END_TEST

/* A file that is missing or not a policy: exit 2, the file named, nothing on stdout. */
START_TEST(test_policy_file_errors)
{
    char out[4096];
    const char *bad = th_file(&td, "bad.yaml", "name: bad\nscore: nonsense\n");
    th_cli_expect(out, sizeof out, 2, "no such composition file",
                  "cost -m stories260K -p semi2k -n lan -k 64 --policy %s",
                  testdir_path(&td, "none.yaml"));
    th_cli_expect(out, sizeof out, 2, "no such plug-in file",
                  "cost -m stories260K -p semi2k -n lan -k 64 --policy %s",
                  testdir_path(&td, "none.so"));
    th_cli_expect(out, sizeof out, 2,
                  "bad.yaml:2:", "cost -m stories260K -p semi2k -n lan -k 64 --policy %s", bad);
    /* a composition's parameters are checked as a scenario's */
    th_cli_expect(out, sizeof out, 2, "kv_budget",
                  "cost -m stories260K -p semi2k -n lan -k 64 --policy %s "
                  "--policy-param kv_budget=2",
                  th_data_path("scenarios/policies/h2o.yaml"));
}
END_TEST

Suite *cost_files_suite(void)
{
    Suite *s = suite_create("cost_files");
    TCase *tc = th_case(s, "files", 120);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_policy_files_are_the_runs, test_policy_file_errors);
    return s;
}
