/* check_cost_cli.c — `mpcsim cost --policy`: one decode step of a policy, its selection ops
 * included, is the step a run of that policy stores; the policy's parameters are checked as a
 * scenario's are. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sqlfix.h"

TESTDIR("check_cost_cli")

/* The value after "key": in a compact JSON object; fails when absent. */
static double json_num(const char *json, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(json, k);
    ck_assert_msg(p, "no %s in %s", key, json);
    return strtod(p + strlen(k), NULL);
}

/* The policies of a run, as the scenario and --policy-param write them. */
static const struct {
    const char *entry, *name, *params;
} POL[] = {
    {"full", "full", ""},
    {"{name: h2o, kv_budget: 0.25}", "h2o", "--policy-param kv_budget=0.25"},
    {"{name: streamingllm, sink: 4, recent: 16}", "streamingllm",
     "--policy-param sink=4 --policy-param recent=16"},
    {"{name: quest, page: 8, budget: 24}", "quest",
     "--policy-param page=8 --policy-param budget=24"},
};

/* cost --policy at kv T is a run's bytes_decode_step, latency_decode_step_s and
 * rounds_decode_step for prompt_len T-1, decode_len 1, on the same model, protocol, network and
 * synthetic trace: for each policy and both protocols. */
START_TEST(test_policy_step_is_the_runs)
{
    char scn[2048];
    int k = snprintf(scn, sizeof scn,
                     "format: 1\nname: cp\nmodel: stories260K\nprotocol: [semi2k, aby3]\n"
                     "network: wan\ntrace: {source: synth}\nseed: 5\n"
                     "workload: {prompt_len: 63, decode_len: 1}\npolicies:\n");
    for (int i = 0; i < TH_N(POL); i++)
        k += snprintf(scn + k, sizeof scn - (size_t)k, "  - %s\n", POL[i].entry);
    const char *path = th_file(&td, "cp.yaml", scn);
    const char *db = testdir_path(&td, "cp.db");
    char args[1024], out[16384];
    snprintf(args, sizeof args, "run %s -o %s -q", path, db);
    th_cli_expect(out, sizeof out, 0, NULL, "%s", args);
    const char *protos[] = {"semi2k", "aby3"};
    for (int pi = 0; pi < 2; pi++)
        for (int i = 0; i < TH_N(POL); i++) {
            th_cli_expect(out, sizeof out, 0, "\"policy\"",
                          "cost -m stories260K -p %s -n wan -k 64 --seed 5 --json --policy %s %s",
                          protos[pi], POL[i].name, POL[i].params);
            char q[512];
            const char *metric[] = {"bytes_decode_step", "rounds_decode_step",
                                    "latency_decode_step_s"};
            const char *key[] = {"bytes_online", "rounds", "latency_s"};
            for (int m = 0; m < 3; m++) {
                snprintf(q, sizeof q,
                         "SELECT CAST(round(m.value * 1e9) AS INTEGER) FROM metrics m JOIN runs r "
                         "ON r.id = m.run_id WHERE m.name = '%s' AND r.protocol = '%s' AND "
                         "r.policy = '%s'",
                         metric[m], protos[pi], POL[i].name);
                long long run = sqlfix_file_int(db, q);
                long long cost = (long long)(json_num(out, key[m]) * 1e9 + 0.5);
                ck_assert_msg(run == cost, "%s %s %s: run %lld, cost %lld", protos[pi], POL[i].name,
                              metric[m], run, cost);
            }
            /* a selecting policy's step holds its own ops; the full cache's none */
            const char *pol = strstr(out, "\"policy\":{\"rounds\":");
            ck_assert_ptr_nonnull(pol);
            long long prounds = atoll(pol + strlen("\"policy\":{\"rounds\":"));
            if (!strcmp(POL[i].name, "h2o") || !strcmp(POL[i].name, "quest"))
                ck_assert_int_gt(prounds, 0);
            else
                ck_assert_int_eq(prounds, 0);
        }
    /* --policy full is the step without --policy */
    char plain[16384];
    th_cli_expect(plain, sizeof plain, 0, NULL,
                  "cost -m stories260K -p aby3 -n wan -k 64 --json --policy full");
    th_cli_expect(out, sizeof out, 0, NULL, "cost -m stories260K -p aby3 -n wan -k 64 --json");
    ck_assert_double_eq(json_num(plain, "latency_s"), json_num(out, "latency_s"));
    ck_assert_double_eq(json_num(plain, "bytes_online"), json_num(out, "bytes_online"));
}
END_TEST

/* The text output: the policy named with its parameters, in report's units, 80 columns. */
START_TEST(test_policy_text)
{
    char out[8192];
    th_cli_expect(out, sizeof out, 0, "policy h2o (kv_budget=0.25",
                  "cost -m stories260K -p semi2k -n lan -k 64 --policy h2o "
                  "--policy-param kv_budget=0.25");
    ck_assert_ptr_nonnull(strstr(out, "\npolicy "));
    for (const char *l = out; *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        ck_assert_msg(n <= 80, "line over 80 columns: %.*s", (int)n, l);
        l += n + (nl != NULL);
    }
}
END_TEST

/* A policy reading every row of a long prompt: said before the replay starts, with the
 * parameter that caps it (the command is stopped after 10 s: the note comes first). */
START_TEST(test_policy_slow_note)
{
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd,
             "MPCSIM_DATA='%s' timeout -s KILL 10 '%s' cost -m llama-2-7b -p aby3 -n lan -k 4096 "
             "--policy h2o --policy-param kv_budget=0.1 2>&1 >/dev/null",
             th_data(), th_bin());
    th_sh(cmd, out, sizeof out);
    ck_assert_msg(strstr(out, "note: h2o reads the attention of 4095 prompt rows"), "%s", out);
    ck_assert_msg(strstr(out, "--policy-param prompt_rows=256"), "%s", out);
    /* a short prompt: no note */
    th_cli_expect(out, sizeof out, 0, NULL,
                  "cost -m stories260K -p semi2k -n lan -k 64 --policy h2o");
    ck_assert_ptr_null(strstr(out, "note:"));
}
END_TEST

/* Bad policies and parameters: exit 2, the message as a scenario's (the rules between
 * parameters as the policy's check hook words them), nothing on stdout. */
START_TEST(test_policy_errors)
{
    static const struct {
        const char *args, *want;
    } bad[] = {
        {"--policy h2x", "did you mean 'h2o'"},
        {"--policy h2o --policy-param heavy_ratoi=0.1", "heavy_ratio"},
        {"--policy h2o --policy-param kv_budget=2", "kv_budget"},
        {"--policy h2o --policy-param kv_budget", "KEY=VALUE"},
        {"--policy mpcache --policy-param s1=20 --policy-param s2=16",
         "--policy-param s1=20: policy mpcache needs s1 = 2·s2"},
        {"--policy h2o --policy-param kv_budget=0.1 --policy-param heavy_ratio=0.3", "kv_budget"},
        {"--policy-param kv_budget=0.1", "goes with --policy"},
        {"--seed 3", "goes with --policy"},
        {"--policy h2o --phase prefill", "--phase decode"},
    };
    char out[4096];
    for (int i = 0; i < TH_N(bad); i++)
        th_cli_expect(out, sizeof out, 2, bad[i].want, "cost -m stories260K -p semi2k -n lan %s%s",
                      strstr(bad[i].args, "prefill") ? "" : "-k 64 ", bad[i].args);
}
END_TEST

Suite *cost_cli_suite(void)
{
    Suite *s = suite_create("cost_cli");
    TCase *tc = th_case(s, "policy", 120);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_policy_step_is_the_runs, test_policy_text, test_policy_slow_note,
             test_policy_errors);
    return s;
}
