/* polfix.c — a policy and its composition side by side (polfix.h). */
#include "polfix.h"

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stories.h"

size_t polfix_parse_kv(const char *text, kv_param *kv)
{
    size_t n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *tok = strtok(buf, " "); tok && n < 8; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        ck_assert_ptr_nonnull(eq);
        *eq = '\0';
        kv[n] = fixture_kvp(tok, eq + 1, 3, 5 + 10 * (int)n);
        n++;
    }
    return n;
}

void polfix_open(polfix_inst *x, const policy_ops *p, const char *params, const policy_env *env)
{
    errbuf e;
    memset(x, 0, sizeof *x);
    x->p = p;
    size_t n = polfix_parse_kv(params, x->kv);
    ck_assert_msg(policy_args_load(p, x->kv, n, "t.yaml", &x->a, &e) == MS_OK, "%s: %s", p->name,
                  e.msg);
    ck_assert_msg(p->init(env, &x->a, &x->st, &e) == MS_OK, "%s: %s", p->name, e.msg);
}

const char *polfix_recorded_trace(const testdir *td)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s", testdir_path(td, "tr"));
    if (th_exists(dir))
        return dir;
    ck_assert_int_eq(th_runl(NULL, testdir_path(td, "rec.txt"), NULL, "trace", "record", "--model",
                             "stories260K", "--text",
                             th_data_path("tests/data/tinystories_sample.txt"), "--max-tokens",
                             "72", "-o", dir, (char *)NULL),
                     0);
    return dir;
}

void polfix_entry(char *out, size_t cap, const char *head, const char *params)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", params);
    snprintf(out, cap, "      - {%s", head);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        ck_assert_ptr_nonnull(eq);
        *eq = '\0';
        snprintf(out + strlen(out), cap - strlen(out), ", %s: %s", tok, eq + 1);
    }
    snprintf(out + strlen(out), cap - strlen(out), ", metric_stride: 1}\n");
}

void polfix_run_equal(const testdir *td, const char *scn, const char *db, int n_pairs,
                      int policy_costs)
{
    const char *out = testdir_path(td, "run.txt");
    int st = th_runl(NULL, out, NULL, "run", scn, "-o", db, (char *)NULL);
    ck_assert_msg(st == 0, "exit %d: %s", st, th_text(out));
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *q;
    /* every metric of the hand-written run (ids 1, 3, ...) against its composition's (the
     * next id), but the compute-time estimates: the local ops that build the same values
     * differ (POLICIES.md "Composing a policy") */
    ck_assert_int_eq(
        sqlite3_prepare_v2(h,
                           "SELECT a.run_id, a.name, a.value, b.value FROM metrics a "
                           "JOIN metrics b ON b.run_id = a.run_id + 1 AND b.name = a.name "
                           "WHERE a.run_id % 2 = 1 AND a.name NOT LIKE 'latency%' AND "
                           "a.name NOT IN ('compute_s', 'ttft_s')",
                           -1, &q, NULL),
        SQLITE_OK);
    int rows = 0, recall = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        rows++;
        recall += !strcmp((const char *)sqlite3_column_text(q, 1), "attn_mass_recall") &&
                  sqlite3_column_double(q, 2) < 1;
        ck_assert_msg(sqlite3_column_double(q, 2) == sqlite3_column_double(q, 3),
                      "run %d metric %s: %.17g vs %.17g", sqlite3_column_int(q, 0),
                      sqlite3_column_text(q, 1), sqlite3_column_double(q, 2),
                      sqlite3_column_double(q, 3));
    }
    sqlite3_finalize(q);
    ck_assert_int_gt(rows, 10 * n_pairs);
    ck_assert_int_eq(recall, n_pairs); /* every pair evicted something */
    /* the ops' bytes and rounds, per phase and category (tova too: both run every layer's
     * eviction in the same rounds) */
    ck_assert_int_eq(sqlite3_prepare_v2(h,
                                        "SELECT a.run_id, a.phase, a.category, a.bytes_p0, "
                                        "b.bytes_p0, a.rounds, b.rounds FROM "
                                        "breakdown a JOIN breakdown b ON b.run_id = a.run_id + 1 "
                                        "AND b.phase = a.phase AND b.category = a.category "
                                        "WHERE a.run_id % 2 = 1",
                                        -1, &q, NULL),
                     SQLITE_OK);
    rows = 0;
    int policy = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        rows++;
        policy += !strcmp((const char *)sqlite3_column_text(q, 2), "policy") &&
                  sqlite3_column_int64(q, 3) > 0;
        int64_t ra = sqlite3_column_int64(q, 5), rb = sqlite3_column_int64(q, 6);
        ck_assert_msg(sqlite3_column_int64(q, 3) == sqlite3_column_int64(q, 4) && ra == rb,
                      "run %d %s/%s: bytes %lld vs %lld, rounds %lld vs %lld",
                      sqlite3_column_int(q, 0), sqlite3_column_text(q, 1),
                      sqlite3_column_text(q, 2), (long long)sqlite3_column_int64(q, 3),
                      (long long)sqlite3_column_int64(q, 4), (long long)sqlite3_column_int64(q, 5),
                      (long long)sqlite3_column_int64(q, 6));
    }
    sqlite3_finalize(q);
    ck_assert_int_gt(rows, n_pairs);
    if (policy_costs)
        ck_assert_int_ge(policy, n_pairs); /* the selection costs something in every pair */
    sqlite3_close(h);
}

void polfix_scenario(char *out, size_t cap, const char *entry)
{
    int n = snprintf(out, cap,
                     "format: 1\nname: refused\nprotocol: semi2k\nnetwork: lan\ncases:\n"
                     "  - model: stories260K\n"
                     "    workload: {prompt_len: 32, decode_len: 8}\n"
                     "    trace: {source: record, text: %s}\n"
                     "    policies:\n"
                     "      - {%s}\n",
                     th_data_path("tests/data/tinystories_sample.txt"), entry);
    ck_assert(n > 0 && (size_t)n < cap);
}

void polfix_run_refused(const testdir *td, const char *scenario, const char *blame, const th_bad *c,
                        int i)
{
    char *scn = strdup(th_file(td, "refused.yaml", scenario));
    char *db = strdup(testdir_path(td, "refused.db"));
    char *out = strdup(testdir_path(td, "refused.txt"));
    ck_assert_int_eq(th_runl(NULL, out, NULL, "run", scn, "-o", db, (char *)NULL), 2);
    const char *msg = th_text(out);
    const char *who = blame ? blame : scn;
    const char *at = strstr(msg, who);
    ck_assert_msg(at, "case %d: no '%s' in: %s", i, who, msg);
    th_bad_msg(who, c, at, i);
    ck_assert(!th_exists(db));
    free(scn);
    free(db);
    free(out);
}
