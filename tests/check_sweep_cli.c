/* check_sweep_cli.c — `mpcsim run` on long sweeps: `--dry-run`'s CPU-time estimate and its
 * warning about settings that make runs slow. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sqlfix.h"

TESTDIR("check_sweep_cli")

/* Seconds of a duration as progress prints it: "45s", "3:07", "1:02:03", "2d 03:04". */
static double dur_s(const char *t)
{
    int a, b, c, d;
    if (sscanf(t, "%dd %d:%d", &a, &b, &c) == 3)
        return a * 86400.0 + b * 3600.0 + c * 60.0;
    if (sscanf(t, "%d:%d:%d", &a, &b, &c) == 3)
        return a * 3600.0 + b * 60.0 + c;
    if (sscanf(t, "%d:%d", &a, &b) == 2)
        return a * 60.0 + b;
    ck_assert_msg(sscanf(t, "%ds", &d) == 1, "not a duration: %s", t);
    return d;
}

/* The estimate a dry run of the scenario text prints (seconds); its output into out. */
static double dry_estimate(const char *text, char *out, size_t cap)
{
    const char *path = th_file(&td, "s.yaml", text);
    th_cli_expect(out, cap, 0, "estimated CPU time ", "run %s --dry-run", path);
    const char *p = strstr(out, "estimated CPU time ") + strlen("estimated CPU time ");
    ck_assert_ptr_null(strstr(p + 1, "estimated CPU time "));
    return dur_s(p);
}

/* A sweep at a long prompt: H2O reading every prompt row is estimated above the cap's
 * estimate and warned about with the key to set; prompt_rows set (or a policy reading no
 * prompt rows, or a short prompt) gives no warning. */
START_TEST(test_dry_run_estimate)
{
    char out[16384];
    const char *head = "format: 1\nname: d\nmodel: longchat-7b-32k\nprotocol: [semi2k, aby3]\n"
                       "network: lan\ntrace: {source: synth}\n";
    char text[1024];
    snprintf(text, sizeof text,
             "%sworkload: {prompt_len: 8192, decode_len: 8}\n"
             "policies:\n  - {name: h2o, kv_budget: [0.05, 0.1]}\n",
             head);
    double slow = dry_estimate(text, out, sizeof out);
    ck_assert_msg(strstr(out, "4 runs\n"), "%s", out);
    ck_assert_msg(strstr(out, "warning: 4 runs (the first: #0 h2o@5%, prompt_len 8192) read "
                              "the attention of every prompt row"),
                  "%s", out);
    ck_assert_msg(strstr(out, "add 'prompt_rows: 256' to the policy entry"), "%s", out);
    /* the hint's figure is what the capped sweep is estimated at */
    const char *about = strstr(out, "prompt rows; sim/policy/POLICIES.md): about ");
    ck_assert_ptr_nonnull(about);
    double hinted = dur_s(about + strlen("prompt rows; sim/policy/POLICIES.md): about "));
    snprintf(text, sizeof text,
             "%sworkload: {prompt_len: 8192, decode_len: 8}\n"
             "policies:\n  - {name: h2o, kv_budget: [0.05, 0.1], "
             "prompt_rows: 256}\n",
             head);
    double capped = dry_estimate(text, out, sizeof out);
    ck_assert_msg(!strstr(out, "warning"), "%s", out);
    ck_assert_double_eq_tol(hinted, capped, 1.0);
    /* every prompt row of a run at 8K: q·k over 32 layers × 32 heads × 128 dimensions,
     * 4.4e12 multiply-adds a run, a minute or more on a CPU; the last 256 rows: 32 times
     * fewer */
    ck_assert_double_gt(slow, 4 * 60);
    ck_assert_double_gt(slow, 10 * capped);
    /* the full cache reads no rows; a prompt of 1024 is not long context */
    snprintf(text, sizeof text,
             "%sworkload: {prompt_len: 8192, decode_len: 8}\n"
             "policies: [full, {name: streamingllm, sink: 4, recent: 64}]\n",
             head);
    double full = dry_estimate(text, out, sizeof out);
    ck_assert_msg(!strstr(out, "warning"), "%s", out);
    ck_assert_double_lt(full, capped);
    snprintf(text, sizeof text,
             "%sworkload: {prompt_len: 1024, decode_len: 8}\n"
             "policies:\n  - {name: h2o, kv_budget: 0.1}\n",
             head);
    dry_estimate(text, out, sizeof out);
    ck_assert_msg(!strstr(out, "warning"), "%s", out);
}
END_TEST

Suite *sweep_cli_suite(void)
{
    Suite *s = suite_create("sweep_cli");
    TCase *tc = th_case(s, "sweep", 120);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_dry_run_estimate);
    return s;
}
