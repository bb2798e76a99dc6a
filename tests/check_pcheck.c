/* check_pcheck.c — `mpcsim policy check` (sim/policy/pcheck.h): the shipped example plug-in's
 * emitted selection ops, run on the plain engine over a recorded stories260K trace, gather what
 * its select() keeps; copies broken on purpose (no gather, a select() that chooses otherwise, no
 * selection named) are caught; the command's verdicts and exit statuses. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sqlfix.h"
#include "stories.h"
#include "testdir.h"
#include "sim/policy/pcheck.h"
#include "sim/policy/plugin.h"
#include "sim/policy/policy.h"
#include "sim/trace/trace.h"

TESTDIR("check_pcheck")

static const char *tpath(const char *name) { return testdir_path(&td, name); }

/* A recorded stories260K trace of 64 tokens in the test folder (once per test). */
static const char *record(void)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s", tpath("tr"));
    ck_assert_int_eq(th_runl(NULL, tpath("rec.txt"), NULL, "trace", "record", "--model",
                             "stories260K", "--text",
                             th_data_path("tests/data/tinystories_sample.txt"), "--max-tokens",
                             "64", "-o", dir, (char *)NULL),
                     0);
    return dir;
}

/* pcheck_run on a loaded plug-in with keep (and sink 4), prompt P, up to T. */
static void run_check(const char *so, const char *keep, const char *dir, uint32_t P, uint32_t T,
                      pcheck_result *r)
{
    errbuf e = {{0}};
    const policy_ops *p = NULL;
    ck_assert_msg(policy_plugin_load(so, &p, &e) == MS_OK, "%s", e.msg);
    kv_param kv[1] = {fixture_kvp("keep", keep, 3, 5)};
    policy_args a;
    ck_assert_msg(policy_args_load(p, kv, 1, "t.yaml", &a, &e) == MS_OK, "%s", e.msg);
    trace *t;
    ck_assert_msg(trace_open(dir, &t, &e) == MS_OK, "%s", e.msg);
    int prc = pcheck_run(p, &a, t, P, T, r, &e);
    ck_assert_msg(prc == MS_OK, "rc %d: %s", prc, e.msg);
    trace_close(t);
}

/* The shipped plug-in: every mask of every layer, KV head and decode step checked, most of them
 * chosen by its ops (the rest kept whole while pos ≤ sink + keep), equal up to ties the policy
 * bounds; the same through the command line, on the default trace and on a scenario. */
START_TEST(test_keynorm_passes)
{
    const char *dir = record();
    char *so = strdup(th_data_path("build/plugins/keynorm.so"));
    ck_assert_msg(th_exists(so), "%s is missing: run `make plugins` (make check does)", so);
    pcheck_result r;
    run_check(so, "12", dir, 24, 64, &r);
    ck_assert_msg(r.ran && r.match, "%s", r.msg);
    trace *t;
    errbuf e;
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_OK);
    const trace_shape *sh = trace_get_shape(t);
    size_t masks = (size_t)(64 - 24) * sh->n_layers * sh->n_kv_heads;
    trace_close(t);
    ck_assert_uint_eq(r.n_checked, masks);
    /* chosen from position sink + keep + 1 = 17 on: every decode step here */
    ck_assert_uint_eq(r.n_chosen, masks);
    ck_assert_uint_gt(r.n_ops, masks);
    ck_assert_uint_lt(r.n_ties, r.n_checked / 4);

    char out[8192];
    th_cli_expect(out, sizeof out, 0, "keynorm (plug-in ", "policy check '%s' --param keep=12", so);
    ck_assert_msg(strstr(out, "keynorm.so): match\n  640 keep masks"), "%s", out);
    th_cli_expect(out, sizeof out, 0, ": match\n", "policy check '%s' --trace '%s' --prompt 40", so,
                  dir);
    ck_assert_msg(strstr(out, "40..63\n"), "%s", out);
    th_cli_expect(out, sizeof out, 1, "keynorm {keep=28} (plug-in ", "policy check '%s'",
                  th_data_path("scenarios/plugin-keynorm.yaml"));
    ck_assert_msg(strstr(out, "full: nothing to check") &&
                      strstr(out, "h2o {heavy=16, recent=16}: not checked here"),
                  "%s", out);
    free(so);
}
END_TEST

/* Copies broken on purpose: each caught, located, exit 1. */
START_TEST(test_broken_caught)
{
    const char *dir = record();
    pcheck_result r;
    /* the ops rank and select but never gather: the named rows are computed by no op */
    char *nogather = th_keynorm_variant(&td, "kn_nogather", "    api->op(b, MPCSIM_OP_GATHER,",
                                        "    if (0) api->op(b, MPCSIM_OP_GATHER,");
    run_check(nogather, "12", dir, 24, 64, &r);
    ck_assert(r.ran && !r.match);
    ck_assert_msg(strstr(r.msg, "layer 0 position 24: its selection L0.kn_nogather.kv_kept is "
                                "computed by none of its ops (no gather)"),
                  "%s", r.msg);
    /* select() scores candidate i by the norm of the position before it */
    char *shifted = th_keynorm_variant(&td, "kn_shifted", "api->topk(norms(s, layer, g) + s->sink,",
                                       "api->topk(norms(s, layer, g) + s->sink - 1,");
    run_check(shifted, "12", dir, 24, 64, &r);
    ck_assert(r.ran && !r.match);
    ck_assert_msg(strstr(r.msg, "layer 0, KV head ") &&
                      strstr(r.msg, "decode position 24: entry ") && strstr(r.msg, " is kept by "),
                  "%s", r.msg);
    /* the ops keep the smallest norms (a top-k of the negated row), select() the largest */
    char *smallest = th_keynorm_variant(
        &td, "kn_smallest", "api->op(b, MPCSIM_OP_TOPK, H, 1, 0, c, row,",
        "api->op(b, MPCSIM_OP_TOPK, H, 1, 0, c, api->op(b, MPCSIM_OP_MUL_PUB, H, 1, 0, c, row, "
        "MPCSIM_NONE, MPCSIM_NONE, api->tensor(b, \"neg\", MPCSIM_ROLE_TEMP, H, 1, c), 0, 0, "
        "-1.0),");
    run_check(smallest, "12", dir, 24, 64, &r);
    ck_assert(r.ran && !r.match);
    ck_assert_msg(strstr(r.msg, "decode position 24: entry ") && strstr(r.msg, "not a tie"), "%s",
                  r.msg);
    free(smallest);
    /* a top-k whose count disagrees with its result's shape: the program itself cannot run */
    char *fewer =
        th_keynorm_variant(&td, "kn_fewer", "(int32_t)s->keep,\n", "(int32_t)s->keep - 1,\n");
    run_check(fewer, "12", dir, 24, 64, &r);
    ck_assert(!r.ran && !r.match);
    ck_assert_msg(strstr(r.msg, "layer 0: its op ") &&
                      strstr(r.msg, "does not run on the plain engine (its shapes disagree)"),
                  "%s", r.msg);
    /* no selection named: its cost stays declared */
    char *unnamed = th_keynorm_variant(&td, "kn_unnamed", "    api->selection(b,",
                                       "    if (0) api->selection(b,");
    run_check(unnamed, "12", dir, 24, 64, &r);
    ck_assert(!r.ran && !r.match);
    ck_assert_msg(strstr(r.msg, "select() drops cached entries, and its emit_cost names no "
                                "selection"),
                  "%s", r.msg);

    char out[8192];
    th_cli_expect(out, sizeof out, 1, "kn_shifted (plug-in ", "policy check '%s' --trace '%s'",
                  shifted, dir);
    ck_assert_msg(strstr(out, ": MISMATCH: layer 0, KV head "), "%s", out);
    th_cli_expect(out, sizeof out, 1,
                  ": cost declared (not checked: ", "policy check '%s' --trace '%s'", unnamed, dir);
    free(nogather);
    free(shifted);
    free(fewer);
    free(unnamed);
}
END_TEST

/* pcheck_run on the test plug-in tests/data/plugin_twostage.c (keep 12, first 8) built as name
 * with swaps, prompt 24 of the trace in dir. */
static void run_twostage(const char *name, const char *const (*swaps)[2], size_t n, const char *dir,
                         pcheck_result *r)
{
    char *so = th_plugin_variant(&td, "tests/data/plugin_twostage.c", name, swaps, n);
    errbuf e = {{0}};
    const policy_ops *p = NULL;
    ck_assert_msg(policy_plugin_load(so, &p, &e) == MS_OK, "%s", e.msg);
    kv_param kv[2] = {fixture_kvp("keep", "12", 3, 5), fixture_kvp("first", "8", 4, 5)};
    policy_args a;
    ck_assert_msg(policy_args_load(p, kv, 2, "t.yaml", &a, &e) == MS_OK, "%s", e.msg);
    trace *t;
    ck_assert_msg(trace_open(dir, &t, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(pcheck_run(p, &a, t, 24, 64, r, &e) == MS_OK, "%s", e.msg);
    trace_close(t);
    free(so);
}

/* A plug-in's choice carried into a later one (ABI 1.3's choice and adopt): the test plug-in's
 * stage 1 ranks a 0/1 score (a negative first key channel), whose plateaus of exact ties the
 * ops' top-k breaks otherwise than select()'s (the smaller position first), and its stage 2
 * ranks around that set. With the hooks the check matches, ties carried at gap 0; built as a
 * 1.2 plug-in (mpcsim reads none of 1.3's members) it is a MISMATCH, and so is a select()
 * whose stage 1 keeps the positive channels instead (a spread of 1 against its tol 0). */
START_TEST(test_plugin_carried)
{
    const char *dir = record();
    pcheck_result r;
    run_twostage("twostage", NULL, 0, dir, &r);
    ck_assert_msg(r.ran && r.match, "%s", r.msg);
    ck_assert_uint_eq(r.n_chosen, r.n_checked);
    ck_assert_uint_gt(r.n_carried, 0);
    ck_assert_double_eq(r.carry_gap, 0);
    static const char *const nohooks[2][2] = {
        {".name = \"twostage\"", ".name = \"ts_nohooks\""},
        {"MPCSIM_POLICY_HEAD,", ".abi_major = 1, .abi_minor = 2,"}};
    run_twostage("ts_nohooks", nohooks, 2, dir, &r);
    ck_assert_msg(r.ran && !r.match && strstr(r.msg, " is kept by "), "%s", r.msg);
    ck_assert_uint_eq(r.n_carried, 0);
    static const char *const positive[2][2] = {
        {".name = \"twostage\"", ".name = \"ts_positive\""},
        {"k[0] < -0x1p-19f ? 1.0f", "k[0] > 0x1p-19f ? 1.0f"}};
    run_twostage("ts_positive", positive, 2, dir, &r);
    ck_assert_msg(r.ran && !r.match && strstr(r.msg, " is kept by "), "%s", r.msg);
    ck_assert_uint_eq(r.n_carried, 0);
}
END_TEST

/* Built-ins: a policy whose kept set is public has nothing to check (exit 0); one whose
 * emit_cost names its selection matches (exit 0; check_pcheck_builtin.c); bad input exits 2. */
START_TEST(test_cli_verdicts)
{
    const char *dir = record();
    char out[8192];
    th_cli_expect(out, sizeof out, 0, "streamingllm: nothing to check",
                  "policy check streamingllm --trace '%s'", dir);
    th_cli_expect(out, sizeof out, 1, "h2o: not checked here (layer 0, decode position ",
                  "policy check h2o --trace '%s'", dir);
    ck_assert_msg(strstr(out, "checked by `mpcsim validate --model stories260K --accuracy N "
                              "--policy h2o`"),
                  "%s", out);
    th_cli_expect(out, sizeof out, 0, "quest: match\n",
                  "policy check quest --trace '%s' --param budget=16", dir);
    th_cli_expect(out, sizeof out, 2, "no policy 'nosuch'", "policy check nosuch");
    th_cli_expect(out, sizeof out, 2, "--param heavy=x: policy h2o parameter 'heavy'",
                  "policy check h2o --param heavy=x");
    th_cli_expect(out, sizeof out, 2, "usage: mpcsim policy check", "policy");
    th_cli_expect(out, sizeof out, 0, "usage: mpcsim policy check NAME|FILE.yaml|PLUGIN.so",
                  "policy check --help");
    th_cli_expect(out, sizeof out, 2, "unknown subcommand 'chek'", "policy chek h2o");
}
END_TEST

/* The marks: `list policies` says "checked" for a built-in whose check the tests run and for a
 * plug-in whose check passes, "cost declared" for a plug-in whose check fails; `report` names
 * the declared policies of its runs. */
START_TEST(test_marks)
{
    char out[1 << 16];
    char *so = strdup(th_data_path("build/plugins/keynorm.so"));
    th_cli_expect(out, sizeof out, 0, "(plug-in ", "list policies --plugin '%s'", so);
    const char *kn = strstr(out, "\nkeynorm ");
    ck_assert_msg(kn && strstr(kn, "    cost: checked (`mpcsim policy check`: its ops, run on the "
                                   "plain engine,"),
                  "%s", out);
    const char *sk = strstr(out, "\nsnapkv ");
    ck_assert_msg(sk && !strncmp(strchr(sk + 1, '\n'), "\n    cost: checked (", 20), "%s", out);
    const char *h2o = strstr(out, "\nh2o ");
    ck_assert_msg(h2o && !strncmp(strchr(h2o + 1, '\n'), "\n    cost: checked on shares", 28), "%s",
                  out);
    char *broken = th_keynorm_variant(&td, "kn_marked", "    api->selection(b,",
                                      "    if (0) api->selection(b,");
    th_cli_expect(out, sizeof out, 0, "(plug-in ", "list policies --plugin '%s'", broken);
    kn = strstr(out, "\nkn_marked ");
    ck_assert_msg(kn && strstr(kn, "    cost declared (its emit_cost ops are not checked against "
                                   "select(): layer 0, decode position "),
                  "%s", out);

    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "format: 1\nname: marks\nprotocol: semi2k\nnetwork: lan\ncases:\n"
             "  - model: stories260K\n"
             "    workload: {prompt_len: 16, decode_len: 2}\n"
             "    trace: {source: record, text: %s}\n"
             "    policies: [full, {name: h2o, heavy: 4, recent: 4}, {name: snapkv, capacity: 8, "
             "window: 4}, {plugin: %s, keep: 6}, {plugin: %s, keep: 6}, {compose: %s, topk: 6}]\n",
             th_data_path("tests/data/tinystories_sample.txt"), so, broken,
             th_data_path("scenarios/policies/keynorm.yaml"));
    char *scn = strdup(th_file(&td, "marks.yaml", yaml));
    char *db = strdup(tpath("marks.db"));
    ck_assert_int_eq(th_runl(NULL, tpath("run.txt"), NULL, "run", scn, "-o", db, (char *)NULL), 0);
    /* each run's policy judged where it ran: the plug-in whose check fails is the one declared
     * (the passing plug-in checked, the composition derived from its blocks) */
    th_cli_expect(out, sizeof out, 0, "6 runs\n", "report '%s'", db);
    ck_assert_msg(strstr(out, "6 runs\ncost declared: kn_marked (the MPC cost of its "), "%s", out);
    static const char *const want[][2] = {{"full", "public"},        {"h2o", "shares"},
                                          {"snapkv", "checked"},     {"keynorm", "checked"},
                                          {"kn_marked", "declared"}, {"keynorm_blocks", "derived"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT policy_cost FROM runs WHERE policy = '%s'", want[i][0]);
        char *got = sqlfix_file_text(db, sql, 0);
        ck_assert_msg(!strcmp(got, want[i][1]), "%s: policy_cost %s, want %s", want[i][0], got,
                      want[i][1]);
        free(got);
    }
    /* runs stored before the column are judged by name where the report runs: the plug-ins and
     * the composition are not loaded there */
    sqlite3 *h = NULL;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "UPDATE runs SET policy_cost = ''", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    th_cli_expect(out, sizeof out, 0, "6 runs\n", "report '%s'", db);
    ck_assert_msg(strstr(out, "6 runs\ncost declared: keynorm, keynorm_blocks, kn_marked (the MPC "
                              "cost of their"),
                  "%s", out);
    free(so);
    free(broken);
    free(scn);
    free(db);
}
END_TEST

Suite *pcheck_suite(void)
{
    Suite *s = suite_create("pcheck");
    TCase *tc = th_case(s, "core", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_keynorm_passes, test_broken_caught, test_plugin_carried, test_cli_verdicts,
             test_marks);
    return s;
}
