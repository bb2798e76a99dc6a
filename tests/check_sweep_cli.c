/* check_sweep_cli.c — `mpcsim run` on long sweeps: `--dry-run`'s CPU-time estimate and its
 * warning about settings that make runs slow; a kill inside a group of runs keeps the runs it
 * finished. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <sqlite3.h>

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

/* Runs stored with status ok in the database at path (0 while it does not exist). */
static long long ok_runs(const char *path)
{
    long long have = 0;
    sqlite3 *h = NULL;
    sqlite3_stmt *s;
    if (th_exists(path) && sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, "SELECT count(*) FROM runs WHERE status = 'ok'", -1, &s, NULL) ==
            SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW)
            have = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_close(h);
    return have;
}

/* Every metric of every run, by policy label, as text. */
static char *metrics_dump(const char *path)
{
    sqlite3 *h = sqlfix_open_ro(path);
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(h,
                                        "SELECT r.config_hash, m.name, printf('%.17g', m.value) "
                                        "FROM metrics m JOIN runs r ON r.id = m.run_id "
                                        "ORDER BY 1, 2",
                                        -1, &s, NULL),
                     SQLITE_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    while (sqlite3_step(s) == SQLITE_ROW)
        fprintf(f, "%s|%s|%s\n", sqlite3_column_text(s, 0), sqlite3_column_text(s, 1),
                sqlite3_column_text(s, 2));
    sqlite3_finalize(s);
    sqlite3_close(h);
    fclose(f);
    return buf;
}

/* Five policies on one synthetic trace: one group (sim/scenario/group.h), its runs stored as
 * each finishes (each decodes 48 steps of llama-2-7b, each one simulated, after the shared
 * prompt), so they finish one after another. SIGKILL once the
 * first is stored: the finished runs are kept, whole; --resume does the rest, and the database
 * then holds the metrics of an uninterrupted sweep. -j 1 (in this process) and -j 2 (a
 * worker). */
START_TEST(test_kill_inside_group)
{
    const char *scn =
        th_file(&td, "g.yaml",
                "format: 1\nname: grp\nmodel: llama-2-7b\nprotocol: semi2k\nnetwork: lan\n"
                "trace: {source: synth}\nseed: 3\nworkload: {prompt_len: 128, decode_len: 48}\n"
                "policies:\n  - {name: h2o, kv_budget: 0.25}\n  - {name: snapkv, window: 8, "
                "capacity: 32}\n  - {name: tova, kv_budget: 0.25}\n  - {name: quest, page: 8}\n"
                "  - {name: streamingllm, sink: 4, recent: 28}\n");
    const char *db = testdir_path(&td, "k.db"), *ref = testdir_path(&td, "ref.db");
    const char *log = testdir_path(&td, "log.txt");
    const char *jobs = _i ? "2" : "1";
    pid_t pid =
        th_spawnl(NULL, log, NULL, "run", scn, "-o", db, "-j", jobs, "-q", (const char *)NULL);
    struct timespec ts = {0, 5 * 1000000};
    long long seen = 0;
    for (int t = 0; t < 60 * 200 && !(seen = ok_runs(db)); t++)
        nanosleep(&ts, NULL);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the sweep ended before the kill");
    ck_assert_int_ge(seen, 1);
    long long kept = ok_runs(db);
    ck_assert_int_ge(kept, 1);
    ck_assert_int_lt(kept, 5);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM runs WHERE status <> 'ok'"), 0);
    ck_assert_int_eq(sqlfix_file_int(db, "SELECT count(*) FROM runs r WHERE (SELECT count(*) "
                                         "FROM metrics m WHERE m.run_id = r.id) = 0"),
                     0);
    char out[4096], want[64];
    th_cli_expect(out, sizeof out, 0, NULL, "run %s -o %s -j %s --resume", scn, db, jobs);
    snprintf(want, sizeof want, "%lld already there", kept);
    ck_assert_msg(strstr(out, want), "resume summary: %s", out);
    ck_assert_int_eq(ok_runs(db), 5);
    th_cli_expect(out, sizeof out, 0, NULL, "run %s -o %s -j %s -q", scn, ref, jobs);
    /* the runs of the uninterrupted sweep finished one after another, over most of the group's
     * time (lockstep runs all finish at its end, within milliseconds of one another) */
    long long spread = sqlfix_file_int(
        ref, "SELECT CAST(1000 * (julianday(max(finished)) - julianday(min(finished))) / "
             "(julianday(max(finished)) - julianday(min(started))) AS INTEGER) FROM runs");
    ck_assert_msg(spread > 300, "the runs finished within %.1f%% of the group's time",
                  spread / 10.0);
    char *a = metrics_dump(db), *b = metrics_dump(ref);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
}
END_TEST

Suite *sweep_cli_suite(void)
{
    Suite *s = suite_create("sweep_cli");
    TCase *tc = th_case(s, "sweep", 120);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_dry_run_estimate);
    TH_LOOPS(tc, 2, test_kill_inside_group);
    return s;
}
