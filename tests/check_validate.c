/* check_validate.c — the simulator against the real backend on stories260K.
 *
 * - a secure session (prefill of 4 tokens, one decode step) in semi2k and aby3: every op's
 *   measured rounds, bytes per party and offline bytes equal the cost engine's prediction for
 *   the same program (valid_step);
 * - teacher-forced secure inference over 100 positions of real text against the float
 *   reference: top-1 agreement >= 99 % (a disagreement only at a near tie), logit error
 *   within the stated tolerance;
 * - streamingllm applied to the secret KV cache matches its plaintext replay (same top-1 at
 *   every position, logits within tolerance), while the policy itself moves the logits by more
 *   than that tolerance (the match is not trivial); mpcache, whose KV heads keep different
 *   numbers of entries (attention padded and masked), likewise, with exact bytes and rounds;
 * - `mpcsim validate` stores predicted = measured rows in the validation table, also with the
 *   links shaped by tbf between network namespaces (where root and iproute2 are available);
 * - the sigmoid SiLU's error bound on the clear-text engine, and PUMA's offset at 0 that made it
 *   necessary. */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sqlfix.h"
#include "protocols/program/eng_plain.h"
#include "protocols/program/kern.h"
#include "sim/secure/secinf.h"
#include "stories.h"
#include "sim/secure/valid.h"

/* Logit tolerance of the secure run against its float reference (f = 18, approx sigmoid):
 * measured max 0.10 over 100 positions, 0.12 over 256 (BENCHMARKS.md). */
#define LOGIT_TOL 0.3

/* ---- exact bytes and rounds ------------------------------------------------------------- */

STORIES(128)

START_TEST(test_programs_exact)
{
    errbuf e = {{0}};
    secinf_opts o = {
        .model = &sf.m, .weights = sf.L, .tokens = sf.ids, .n_tokens = 5, .prefill = 4};
    fixture_cfg(_i ? "aby3" : "semi2k", &o.cfg);
    secinf_result r;
    ck_assert_msg(secinf_run(&o, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(r.n_steps, 2);
    net_cfg net;
    net_uniform(&net, (int)r.n_parties, 1000000, 1e9);
    machine_profile mach;
    machine_default(&mach);
    for (uint32_t s = 0; s < r.n_steps; s++) {
        valid_row row;
        ck_assert_msg(valid_step(&o, &r, s, &net, &mach, &row, &e) == MS_OK, "%s", e.msg);
        ck_assert_msg(row.ops_mismatched == 0, "%s %s: %u of %u ops differ: %s", o.cfg.name,
                      row.item, row.ops_mismatched, row.ops, row.first_mismatch);
        ck_assert_uint_gt(row.meas.rounds, 100);
        ck_assert_uint_eq(row.pred.rounds, row.meas.rounds);
        for (int i = 0; i < RDB_PARTIES; i++)
            ck_assert_uint_eq(row.pred.bytes[i], row.meas.bytes[i]);
        ck_assert_uint_eq(row.pred_offline, row.meas_offline);
        ck_assert_uint_gt(row.meas.bytes[0], 0);
        ck_assert_int_eq(row.phase, s ? PHASE_DECODE : PHASE_PREFILL);
        /* the simulator's latency includes at least one link latency per round */
        ck_assert_uint_ge(row.pred_ns, row.pred.rounds * 1000000ull / 2);
    }
    /* the prefill's logits (position 3) and the decode step's (position 4) are the model's */
    float ref[5][512];
    llama_reset(sf.L);
    for (int p = 0; p < 5; p++)
        llama_forward(sf.L, sf.ids[p], (uint32_t)p, NULL, ref[p]);
    llama_acc a;
    llama_compare(r.logits, ref[3], 2, sf.m.vocab, &a);
    ck_assert_uint_eq(a.top1_agree, 2);
    ck_assert_msg(a.max_abs < LOGIT_TOL, "logit error %.4f", a.max_abs);
    secinf_result_free(&r);
}
END_TEST

/* ---- accuracy ----------------------------------------------------------------------------- */

START_TEST(test_accuracy_teacher_forced)
{
    errbuf e = {{0}};
    const uint32_t N = 100, V = sf.m.vocab;
    float *ref = malloc((size_t)N * V * sizeof *ref);
    llama_reset(sf.L);
    for (uint32_t p = 0; p < N; p++)
        ck_assert_int_eq(llama_forward(sf.L, sf.ids[p], p, NULL, ref + (size_t)p * V), MS_OK);
    secinf_opts o = {
        .model = &sf.m, .weights = sf.L, .tokens = sf.ids, .n_tokens = N, .prefill = 1};
    fixture_cfg("semi2k", &o.cfg);
    secinf_result r;
    ck_assert_msg(secinf_run(&o, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(r.n_steps, N);
    llama_acc a;
    llama_compare(r.logits, ref, N, V, &a);
    /* >= 99 %: one disagreement allowed, and only at a near tie of the reference (its top-2
     * margin within twice the logit tolerance; the text's closest is 0.012, at position 65) */
    ck_assert_msg(a.top1_agree * 100 >= 99 * N, "top-1 agreement %u/%u", a.top1_agree, N);
    ck_assert_msg(a.miss_gap < 2 * LOGIT_TOL, "a disagreement where the reference's margin is %.4f",
                  a.miss_gap);
    ck_assert_msg(a.max_abs < LOGIT_TOL && a.mean_abs < 0.05, "logit error max %.4f mean %.5f",
                  a.max_abs, a.mean_abs);
    /* the client's greedy choices are the argmax of its revealed logits */
    for (uint32_t s = 0; s < N; s++) {
        uint32_t b = 0;
        for (uint32_t i = 1; i < V; i++)
            b = r.logits[(size_t)s * V + i] > r.logits[(size_t)s * V + b] ? i : b;
        ck_assert_int_eq(r.next[s], (int)b);
        ck_assert_int_eq(r.tokens[s], sf.ids[s]);
    }
    secinf_result_free(&r);
    free(ref);
}
END_TEST

/* ---- a policy inside MPC ------------------------------------------------------------------- */

START_TEST(test_streamingllm_in_mpc)
{
    errbuf e = {{0}};
    const uint32_t N = 40, P = 8, V = sf.m.vocab;
    const char *params[] = {"sink=2", "recent=6"};
    float *pol, *full;
    secpol_keep k;
    fixture_replay(&sf, "streamingllm", params, 2, N, P, &k, &pol, &full);
    /* the masks are streamingllm's: sinks and the recent window */
    uint32_t pos = N - 1;
    for (uint32_t j = 0; j < pos; j++)
        ck_assert_int_eq(k.keep[((size_t)pos * sf.m.n_layers * sf.m.n_kv_heads) * k.max_len + j],
                         j < 2 || j + 6 >= pos);
    secinf_opts o = {
        .model = &sf.m, .weights = sf.L, .tokens = sf.ids, .n_tokens = N, .prefill = P, .keep = &k};
    fixture_cfg("aby3", &o.cfg);
    secinf_result r;
    ck_assert_msg(secinf_run(&o, &r, &e) == MS_OK, "%s", e.msg);
    /* the same top-1 at every position but a near tie of the replay (its closest margin here
     * is 0.07, at position 16); the secure run follows the policy, not the full cache */
    fixture_assert_follows(r.logits, pol, full, P, r.n_steps, V, LOGIT_TOL);
    /* the kept counts the simulator uses shape the program: the last step attends 8 + 1 */
    op_program p;
    op_program_init(&p);
    ck_assert_int_eq(secinf_step_program(&o, r.n_steps - 1, &p, &e), MS_OK);
    int seen = 0;
    for (size_t i = 0; i < p.n_ops; i++)
        if (p.ops[i].kind == OP_SOFTMAX && p.ops[i].cat == OPC_SOFTMAX) {
            ck_assert_uint_eq(p.ops[i].n, 2 + 6 + 1);
            seen++;
        }
    ck_assert_int_eq(seen, (int)sf.m.n_layers);
    op_program_free(&p);
    secinf_result_free(&r);
    fixture_replay_free(&k, pol, full);
}
END_TEST

/* MPCache keeps different numbers of entries per KV head: the layer's vectorized attention is
 * padded to the largest count (lower.c) and the shorter heads' padding masked (a public mask
 * added to the scores, local); the result matches the replay and every op's bytes and rounds
 * the prediction. */
START_TEST(test_mpcache_padded_in_mpc)
{
    errbuf e = {{0}};
    const uint32_t N = 28, P = 16, V = sf.m.vocab;
    const char *params[] = {"s1=8", "s2=4"};
    float *pol;
    secpol_keep k;
    fixture_replay(&sf, "mpcache", params, 2, N, P, &k, &pol, NULL);
    secinf_opts o = {
        .model = &sf.m, .weights = sf.L, .tokens = sf.ids, .n_tokens = N, .prefill = P, .keep = &k};
    fixture_cfg("semi2k", &o.cfg);
    int padded = 0;
    op_program p;
    op_program_init(&p);
    for (uint32_t s = 1; s < secinf_n_steps(&o); s++) {
        ck_assert_int_eq(secinf_step_program(&o, s, &p, &e), MS_OK);
        for (size_t i = 0; i < p.n_ops; i++)
            padded |= p.ops[i].kind == OP_ADD_PUB && p.ops[i].in[1] != OP_NONE &&
                      strstr(p.tens[p.ops[i].in[1]].name, "pad_mask") != NULL;
    }
    op_program_free(&p);
    ck_assert_msg(padded, "no step with per-KV-head kept counts: the test lost its point");
    secinf_result r;
    ck_assert_msg(secinf_run(&o, &r, &e) == MS_OK, "%s", e.msg);
    llama_acc a;
    llama_compare(r.logits, pol + (size_t)(P - 1) * V, r.n_steps, V, &a);
    ck_assert_uint_eq(a.top1_agree, r.n_steps);
    ck_assert_msg(a.max_abs < LOGIT_TOL, "logit error vs the replay %.4f", a.max_abs);
    for (uint32_t s = 0; s < r.n_steps; s++)
        fixture_step_costed(&o, &r, s, 0, NULL);
    secinf_result_free(&r);
    fixture_replay_free(&k, pol, NULL);
}
END_TEST

/* ---- the CLI and the results database ------------------------------------------------------- */

TESTDIR("check_validate")

/* Runs mpcsim ARGS, stdout and stderr to the test folder's out.txt. */
static int run_cli(const char *const *args)
{
    return th_run(NULL, testdir_path(&td, "out.txt"), NULL, args);
}

START_TEST(test_cli_rows_in_db)
{
    const char *db = testdir_path(&td, "v.db");
    const char *args[] = {"validate", "--prompt",     "3", "--decode", "1", "-n",
                          "16",       "--latency-ms", "0", "--db",     db,  NULL};
    int st = run_cli(args);
    const char *out = testdir_path(&td, "out.txt");
    ck_assert_msg(st == 0, "mpcsim validate exited %d (see %s)", st, out);
    /* 80 columns by default (× and ÷ one column each), every table saying what it checks */
    char *text = th_slurp(out, NULL);
    for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0')) {
        size_t w = 0;
        for (const char *c = l; *c && *c != '\n'; c++)
            w += ((unsigned char)*c & 0xc0) != 0x80;
        ck_assert_msg(w <= 80 || !strncmp(l, "# rows stored in ", 17), /* a long path */
                      "over 80 columns: %.*s", (int)strcspn(l, "\n"), l);
    }
    ck_assert_int_eq(th_count(text, "check: bytes and rounds, exactly"), 1);
    ck_assert_int_eq(th_count(text, "check: the bytes and rounds of every op"), 1);
    ck_assert_int_eq(th_count(text, " wire "), 4); /* prefill and decode, both protocols */
    free(text);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    ck_assert_int_eq(sqlfix_int(h, "PRAGMA user_version"), RDB_SCHEMA_VERSION);
    /* 15 primitives (cmd_validate.c vprims), both protocols */
    ck_assert_int_eq(sqlfix_int(h, "SELECT count(*) FROM validation WHERE phase = '-'"), 30);
    ck_assert_int_eq(
        sqlfix_int(h,
                   "SELECT count(*) FROM validation WHERE item = 'stories260K:prefill' AND n = 3"),
        2);
    ck_assert_int_eq(
        sqlfix_int(
            h, "SELECT count(*) FROM validation WHERE item = 'stories260K:decode' AND kv_len = 3"),
        2);
    ck_assert_int_eq(sqlfix_int(h, "SELECT count(*) FROM validation WHERE exact = 0"), 0);
    ck_assert_int_eq(
        sqlfix_int(h, "SELECT count(*) FROM validation WHERE pred_rounds != meas_rounds OR "
                      "pred_bytes_p0 != meas_bytes_p0 OR pred_bytes_p1 != meas_bytes_p1 OR "
                      "pred_bytes_p2 != meas_bytes_p2 OR pred_offline != meas_offline"),
        0);
    ck_assert_int_eq(
        sqlfix_int(h,
                   "SELECT count(*) FROM validation WHERE phase != '-' AND (meas_bytes_p0 = 0 OR "
                   "meas_ns = 0 OR pred_ns = 0)"),
        0);
    ck_assert_int_eq(
        sqlfix_int(h,
                   "SELECT count(*) FROM validation WHERE protocol = 'aby3' AND phase != '-' AND "
                   "meas_bytes_p2 > 0"),
        2);
    ck_assert_int_eq(sqlfix_int(h, "SELECT count(DISTINCT session) FROM validation"), 1);
    sqlite3_close(h);
}
END_TEST

/* --basic-ops: SecretFlow's basic-op task runs in both sizes for every op of its script, and
 * the online bytes of these element-wise tasks scale with n (n/4 and n elements: exactly 4
 * times); by default the table fits 80 columns, bytes in report's units, the marginal per
 * element on the second size's row. The script's three-party task is two ops on three inputs
 * (add and multiply, no comparison), its two-party task one op on two: the multiply task
 * sends, beyond the add task (the same inputs and reveal), two products and truncations in
 * aby3 (2·(24 + 43) B per element, PRIMITIVES.md mul and trunc rows) and one in semi2k
 * (32 + 16 B). */
START_TEST(test_cli_basic_ops)
{
    const char *out = testdir_path(&td, "out.txt");
    const char *narrow[] = {"validate", "--basic-ops", "--n",  "256", "--latency-ms",
                            "0",        "-p",          "aby3", NULL};
    ck_assert_int_eq(run_cli(narrow), 0);
    char *text = th_slurp(out, NULL);
    int marg = 0;
    for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0')) {
        size_t w = strcspn(l, "\n");
        ck_assert_msg(w <= 80, "over 80 columns: %.*s", (int)w, l);
        char row[128];
        snprintf(row, sizeof row, "%.*s", (int)w, l);
        marg += !strncmp(row, "aby3 ", 5) && strstr(row, " us ") && strstr(row, "B ");
    }
    ck_assert_msg(marg == 2, "%s", text); /* add, mul */
    ck_assert_ptr_nonnull(strstr(text, "--wide"));
    free(text);
    static const char *const prs[] = {"aby3", "semi2k"};
    static const unsigned long long extra[] = {2 * (24 + 43), 32 + 16};
    for (int q = 0; q < 2; q++) {
        const char *args[] = {"validate", "--basic-ops", "--n",  "256",    "--latency-ms",
                              "0",        "-p",          prs[q], "--wide", NULL};
        int st = run_cli(args);
        ck_assert_msg(st == 0, "mpcsim validate --basic-ops exited %d (see %s)", st, out);
        FILE *f = fopen(out, "r");
        ck_assert_ptr_nonnull(f);
        char line[512], pn[16], opn[16];
        unsigned long long n, bytes, small[3] = {0}, big[3] = {0};
        int rows = 0, nk = q == 0 ? 2 : 3;
        static const char *const ops[] = {"add", "mul", "lt"};
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "%15s %15s %llu | %llu", pn, opn, &n, &bytes) == 4 &&
                !strcmp(pn, prs[q]))
                for (int k = 0; k < 3; k++)
                    if (!strcmp(opn, ops[k])) {
                        *(n == 64 ? &small[k] : &big[k]) = bytes;
                        rows++;
                    }
        fclose(f);
        ck_assert_int_eq(rows, 2 * nk);
        for (int k = 0; k < nk; k++)
            ck_assert_msg(small[k] > 0 && big[k] == 4 * small[k],
                          "%s %s: %llu bytes at 64, %llu at 256", prs[q], ops[k], small[k], big[k]);
        ck_assert_msg(big[1] - big[0] == 256 * extra[q], "%s: mul %llu B, add %llu B", prs[q],
                      big[1], big[0]);
    }
}
END_TEST

/* Shaped links (root and iproute2 only; skipped with a message elsewhere): the same exact
 * counts through veth pairs with tbf, rows marked 'tbf', no namespace left behind. */
START_TEST(test_cli_shaped)
{
    if (geteuid() != 0 || system("ip netns list >/dev/null 2>&1") != 0) {
        fprintf(stderr, "check_validate: shaped-link test skipped (needs root and iproute2)\n");
        return;
    }
    const char *db = testdir_path(&td, "s.db"), *out = testdir_path(&td, "out.txt");
    const char *args[] = {
        "validate",     "--model", "stories260K", "--shape", "--bandwidth", "1Gbps",
        "--latency-ms", "0",       "--prompt",    "2",       "--decode",    "1",
        "-p",           "semi2k",  "--db",        db,        NULL};
    int st = run_cli(args);
    ck_assert_msg(st == 0, "mpcsim validate --shape exited %d (see %s)", st, out);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    ck_assert_int_eq(
        sqlfix_int(h, "SELECT count(*) FROM validation WHERE shaping = 'tbf' AND exact = 1 AND "
                      "bandwidth_bps = 1e9"),
        2);
    sqlite3_close(h);
    FILE *p = popen("ip netns list", "r");
    char line[256];
    while (p && fgets(line, sizeof line, p))
        ck_assert_msg(strncmp(line, "mv", 2) != 0, "namespace left behind: %s", line);
    if (p)
        pclose(p);
}
END_TEST

/* ---- the SiLU approximations ---------------------------------------------------------------- */

static void silu_plain(const char *approx, const double *x, double *y, size_t n)
{
    proto_cfg cfg;
    errbuf e = {{0}};
    ck_assert_int_eq(proto_cfg_default("semi2k", &cfg, &e), MS_OK);
    ck_assert_int_eq(proto_cfg_set(&cfg, "approx", approx, &e), MS_OK);
    eng *E;
    ck_assert_int_eq(eng_plain_new(&cfg, 2, 5, 0, &E), MS_OK);
    op_program p;
    op_program_init(&p);
    uint32_t a = op_tensor_add(&p, "a", OPT_INPUT, DOM_ARITH, 1, 1, (uint32_t)n);
    uint32_t z = op_tensor_add(&p, "z", OPT_TEMP, DOM_ARITH, 1, 1, (uint32_t)n);
    op o = {.kind = OP_SILU,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = 1,
            .n = (uint32_t)n,
            .in = {a, OP_NONE, OP_NONE},
            .out = z};
    ck_assert_int_ge(op_emit(&p, &o), 0);
    mpc_val vals[2] = {{0}};
    ck_assert_int_eq(E->vt->alloc(E, &vals[a], n, DOM_ARITH), MS_OK);
    for (size_t i = 0; i < n; i++)
        vals[a].s[0][i] = fx_encode(x[i], cfg.frac_bits);
    vals[z].n = n;
    ck_assert_msg(kern_exec(E, &p, 0, vals, &e) == MS_OK, "%s", e.msg);
    for (size_t i = 0; i < n; i++)
        y[i] = fx_decode(vals[z].s[0][i], cfg.frac_bits);
    E->vt->release(E, &vals[a]);
    E->vt->release(E, &vals[z]);
    eng_free(E);
    op_program_free(&p);
}

START_TEST(test_silu_sigmoid_bound)
{
    enum { N = 1201 };
    static double x[N], ys[N], yp[N];
    for (int i = 0; i < N; i++)
        x[i] = -6.0 + 12.0 * i / (N - 1);
    silu_plain("sigmoid", x, ys, N);
    silu_plain("puma", x, yp, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double ex = x[i] / (1 + exp(-x[i]));
        if (fabs(x[i]) <= 5)
            worst = fmax(worst, fabs(ys[i] - ex));
        if (fabs(x[i]) < 1e-9) {
            ck_assert_msg(fabs(ys[i]) < 1e-4, "sigmoid silu(0) = %g", ys[i]);
            ck_assert_msg(fabs(yp[i]) > 8e-3, "PUMA silu(0) = %g", yp[i]); /* its constant term */
        }
    }
    ck_assert_msg(worst <= 1e-2, "sigmoid SiLU error %.4g above 1e-2 on [-5, 5]", worst);
}
END_TEST

Suite *validate_suite(void)
{
    Suite *s = suite_create("validate");
    TCase *tc = th_case(s, "validate", 300);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_cli_rows_in_db, test_cli_shaped, test_cli_basic_ops, test_silu_sigmoid_bound);
    TCase *model = th_case(s, "model", 300);
    TESTDIR_USE(model);
    STORIES_USE(model);
    TH_LOOPS(model, 2, test_programs_exact);
    TH_TESTS(model, test_accuracy_teacher_forced, test_streamingllm_in_mpc,
             test_mpcache_padded_in_mpc);
    return s;
}
