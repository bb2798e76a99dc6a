/* check_breakeven.c — `mpcsim breakeven`: the steady decode step it costs is the runner's, its
 * grid points are separate simulations of that step, and the map, files and errors a user
 * sees. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/engine/simulate.h"
#include "sim/scenario/runner.h"
#include "sim/scenario/scn.h"
#include "harness.h"

TESTDIR("check_breakeven")

/* A tiny llama, a synthetic trace, the full cache and H2O. */
static const char *const SCN =
    "format: 1\nname: be\n"
    "model: {name: tiny, layers: 2, dim: 64, heads: 4, ffn_dim: 128, vocab: 256, "
    "max_context: 256}\n"
    "protocol: semi2k\nnetwork: lan\ntrace: {source: synth}\nseed: 3\n"
    "workload: {prompt_len: 96, decode_len: 3, prefill_in_mpc: false}\n"
    "policies:\n  - full\n  - {name: h2o, heavy: 8, recent: 8, metric_stride: 0}\n";

/* run_decode_program costs the step the runner reports as its steady decode step: simulated
 * on the run's own network and machine, it takes latency_decode_step_s to the ns. */
START_TEST(test_steady_step_is_the_runners)
{
    const char *path = th_file(&td, "be.yaml", SCN);
    scenario s;
    errbuf e;
    ck_assert_msg(scn_load(path, NULL, &s, &e) == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(s.n_runs, 2);
    for (size_t i = 0; i < s.n_runs; i++) {
        const run_cfg *c = &s.runs[i];
        run_result r;
        run_result_init(&r);
        ck_assert_msg(run_execute(c, &r, &e) == MS_OK, "%s", e.msg);
        double want = -1;
        for (size_t k = 0; k < r.n_metric; k++)
            if (!strcmp(r.metric[k].name, "latency_decode_step_s"))
                want = r.metric[k].value;
        run_result_free(&r);
        ck_assert(want > 0);
        op_program p;
        cost_log l;
        op_program_init(&p);
        cost_log_init(&l, c->net.n_parties);
        ck_assert_msg(run_decode_program(c, &p, &l, &e) == MS_OK, "%s", e.msg);
        sim_opts o = {.overlap = c->overlap};
        sim_result res;
        ck_assert_msg(sim_run(&c->net, &c->machine, &p, &l, &o, &res, &e) == MS_OK, "%s", e.msg);
        ck_assert_double_eq_tol((double)res.latency_ns * 1e-9, want, 1e-9);
        sim_result_free(&res);
        op_program_free(&p);
        cost_log_free(&l);
    }
    scn_free(&s);
}
END_TEST

/* A protocol list (compat: native and spu): one reference per protocol, the spu maps exactly
 * those of the spu protocol alone (its own full cache, not the native one), and the
 * side-by-side summary with a column per protocol. */
START_TEST(test_cli_compat_side_by_side)
{
    const char *p = strstr(SCN, "protocol: semi2k\n"), *rest = p + strlen("protocol: semi2k\n");
    ck_assert_ptr_nonnull(p);
    char both[2048], alone[2048];
    snprintf(both, sizeof both, "%.*sprotocol: [semi2k, {name: semi2k, compat: spu}]\n%s",
             (int)(p - SCN), SCN, rest);
    snprintf(alone, sizeof alone, "%.*sprotocol: {name: semi2k, compat: spu}\n%s", (int)(p - SCN),
             SCN, rest);
    const char *s2 = th_file(&td, "both.yaml", both), *s1 = th_file(&td, "alone.yaml", alone);
    char out[512], d2[512], d1[512], args[2048];
    snprintf(out, sizeof out, "%s", testdir_path(&td, "out.txt"));
    snprintf(d2, sizeof d2, "%s", testdir_path(&td, "both"));
    snprintf(d1, sizeof d1, "%s", testdir_path(&td, "alone"));
    const char *grid = "--no-plot --bandwidth 100Mbps,10Gbps --latency 0.01ms,50ms --threads 1";
    snprintf(args, sizeof args, "breakeven %s -o %s %s", s1, d1, grid);
    ck_assert_int_eq(th_cli(args, out), 0);
    snprintf(args, sizeof args, "breakeven %s -o %s %s", s2, d2, grid);
    ck_assert_int_eq(th_cli(args, out), 0);
    const char *buf = th_text(out);
    ck_assert_msg(strstr(buf, "tiny semi2k, decode step") && strstr(buf, "tiny semi2k/spu, decode"),
                  "%s", buf);
    const char *sb = strstr(buf, "side by side:");
    const char *row = sb ? strstr(sb, "\n  h2o heavy=8 recent=8 ") : NULL;
    ck_assert_msg(sb && strstr(sb, "semi2k/spu") && row, "%s", buf);
    int cells = 0; /* one "lo-hi (wins/points)" per protocol */
    for (const char *q = row + 1; *q && *q != '\n'; q++)
        cells += *q == '/';
    ck_assert_msg(cells == 2, "%s", buf);
    char f1[600], f2[600], f0[600];
    snprintf(f1, sizeof f1, "%s/breakeven-0-h2o-spu.dat", d1);
    snprintf(f2, sizeof f2, "%s/breakeven-1-h2o-spu.dat", d2);
    snprintf(f0, sizeof f0, "%s/breakeven-0-h2o.dat", d2);
    char *t1 = th_slurp(f1, NULL), *t2 = th_slurp(f2, NULL);
    ck_assert_str_eq(t1, t2);
    free(t1), free(t2);
    ck_assert_int_eq(access(f0, F_OK), 0);
    unlink(f0), unlink(f1), unlink(f2), unlink(out);
    rmdir(d1), rmdir(d2);
}
END_TEST

START_TEST(test_cli_map)
{
    const char *scn = th_file(&td, "be.yaml", SCN);
    char out[512], dir[512], args[2048];
    snprintf(out, sizeof out, "%s", testdir_path(&td, "out.txt"));
    snprintf(dir, sizeof dir, "%s", testdir_path(&td, "map"));
    snprintf(args, sizeof args,
             "breakeven %s -o %s --no-plot --bandwidth 100Mbps,10Gbps "
             "--latency 0.01ms,50ms --threads 1,4",
             scn, dir);
    ck_assert_int_eq(th_cli(args, out), 0);
    char dat[600];
    snprintf(dat, sizeof dat, "%s/breakeven-0-h2o.dat", dir);
    FILE *f = fopen(dat, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    int rows = 0;
    double bw, lat, l2, sp;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && sscanf(line, "%lf %lf %lf %lf", &bw, &lat, &l2, &sp) == 4) {
            ck_assert(sp > 0);
            ck_assert_double_eq_tol(l2, log2(sp), 1e-5);
            ck_assert(bw == 100 || bw == 10000);
            rows++;
        }
    fclose(f);
    ck_assert_int_eq(rows, 2 * 2 * 2); /* threads × latency × bandwidth */
    /* the printed table: one per thread count */
    const char *buf = th_text(out);
    ck_assert_msg(strstr(buf, "h2o heavy=8 recent=8 vs full: faster on"), "%s", buf);
    ck_assert_int_eq(th_count(buf, "  threads "), 2);
    unlink(dat);
    /* the heatmap, where gnuplot is installed (scripts/install-deps.sh installs it) */
    if (system("gnuplot --version >/dev/null 2>&1") == 0) {
        snprintf(args, sizeof args,
                 "breakeven %s -o %s --bandwidth 100Mbps,1Gbps,10Gbps "
                 "--latency 0.01ms,1ms,50ms --threads 1,4",
                 scn, dir);
        ck_assert_int_eq(th_cli(args, out), 0);
        char png[600];
        snprintf(png, sizeof png, "%s/breakeven-0-h2o.png", dir);
        f = fopen(png, "rb");
        ck_assert_msg(f != NULL, "no %s", png);
        unsigned char sig[8] = {0};
        ck_assert_uint_eq(fread(sig, 1, 8, f), 8);
        fclose(f);
        ck_assert(sig[1] == 'P' && sig[2] == 'N' && sig[3] == 'G');
        unlink(png);
        unlink(dat);
    }
    rmdir(dir);

    /* errors: no reference, two references, a run that differs in more than its policy */
    const char *bad = th_file(&td, "bad.yaml",
                              "format: 1\nname: b\nmodel: stories260K\n"
                              "protocol: semi2k\nnetwork: lan\n"
                              "workload: {prompt_len: 8, decode_len: 2}\n"
                              "policies: [{name: streamingllm}]\n");
    snprintf(args, sizeof args, "breakeven %s -o %s --no-plot", bad, dir);
    ck_assert_int_eq(th_cli(args, out), 2);
    bad = th_file(&td, "bad2.yaml",
                  "format: 1\nname: b\nmodel: stories260K\nprotocol: semi2k\n"
                  "network: lan\nworkload: {prompt_len: [8, 16], decode_len: 2}\n"
                  "policies: [full, streamingllm]\n");
    snprintf(args, sizeof args, "breakeven %s -o %s --no-plot", bad, dir);
    ck_assert_int_eq(th_cli(args, out), 2);
    snprintf(args, sizeof args, "breakeven %s --latency 5xs", scn);
    ck_assert_int_eq(th_cli(args, out), 2);
    snprintf(args, sizeof args, "breakeven %s --threads 0", scn);
    ck_assert_int_eq(th_cli(args, out), 2);
    ck_assert_int_eq(th_cli("breakeven", out), 2);
    unlink(out);
    rmdir(dir);
}
END_TEST

Suite *breakeven_suite(void)
{
    Suite *s = suite_create("breakeven");
    TCase *tc = th_case(s, "map", 120);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_steady_step_is_the_runners, test_cli_map, test_cli_compat_side_by_side);
    return s;
}
