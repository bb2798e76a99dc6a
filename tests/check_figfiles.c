/* check_figfiles.c — two `figures:` entries of one scenario that would write the same file into
 * the plots folder (their own default names, or a name given to one of them) are refused when
 * the scenario loads: the second entry's file:line:col, exit 2, nothing run or written; so is a
 * column facet on a figure whose columns are its metrics. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TESTDIR("check_figfiles")
#define tmpdir (td.dir)
static const char *tpath(const char *name) { return testdir_path(&td, name); }

#define MPCSIM(...) \
    th_runl(tmpdir, tpath("out.txt"), tpath("err.txt"), __VA_ARGS__, (const char *)NULL)

/* A tiny sweep on a synthetic trace; the figures follow from line 13. */
static const char head_yaml[] =
    "format: 1\nname: f\nseed: 1\nprotocol: semi2k\nnetwork: lan\n"
    "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, vocab: 256, "
    "max_context: 512}\n"
    "workload: {prompt_len: 64, decode_len: 2}\ntrace: {source: synth}\n"
    "policies:\n"
    "  - full\n"
    "  - {name: h2o, heavy_ratio: [0.05, 0.2], recent_ratio: 0.1}\n"
    "  - {name: streamingllm, sink: 4, recent: [4, 16]}\n";

static void write_scn(const char *figures)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s", head_yaml, figures);
    th_write(tpath("s.yaml"), buf);
}

static const struct {
    const char *figures, *msg;
} clashes[] = {
    /* the figure's own names */
    {"figures:\n  - {figure: study}\n  - {figure: budget, col: prompt_len}\n",
     "s.yaml:15:5: error: this figure writes accuracy-budget.png, as figure 1 does"},
    {"figures:\n  - {figure: cost}\n  - {figure: study}\n",
     "s.yaml:15:5: error: this figure writes cost-budget.png, as figure 1 does"},
    {"figures:\n  - {figure: breakdown}\n  - {figure: breakdown, row: model}\n",
     "s.yaml:15:5: error: this figure writes breakdown.png, as figure 1 does"},
    {"figures:\n  - {y: attn_mass_recall, x: kept_frac}\n"
     "  - {y: [attn_mass_recall, top1_agreement], x: kept_frac, row: model}\n",
     "s.yaml:15:5: error: this figure writes attn_mass_recall-vs-kept_frac.png, as figure 1"},
    {"figures:\n  - {y: attn_mass_recall}\n  - {y: attn_mass_recall, row: model}\n",
     "s.yaml:15:5: error: this figure draws attn_mass_recall against the data's default x, as "
     "figure 1 does"},
    /* a name given to one that another writes by default: at the name */
    {"figures:\n  - {figure: pareto}\n  - {figure: cost, name: pareto-step.png}\n",
     "s.yaml:15:26: error: this figure writes pareto-step.png, as figure 1 does"},
    {"figures:\n  - {figure: budget, name: cost-budget.png}\n  - {figure: study}\n",
     "s.yaml:15:5: error: this figure writes cost-budget.png, as figure 1 does"},
};

/* What `mpcsim plot` would refuse after the sweep is refused at load: a figure of several metrics
 * (cost: latency and bytes) has them as its columns. */
static const struct {
    const char *figures, *msg;
} no_col[] = {
    {"figures:\n  - {figure: cost, row: protocol, col: network}\n",
     "s.yaml:14:40: error: 'cost' draws a column per metric: no 'col'"},
    {"figures:\n  - {figure: study, col: network}\n",
     "s.yaml:14:26: error: 'study' (its cost figure) draws a column per metric: no 'col'"},
    {"figures:\n  - {y: [attn_mass_recall, kept_frac], col: network}\n",
     "error: a figure of several metrics draws a column per metric: no 'col'"},
};

START_TEST(test_no_col)
{
    write_scn(no_col[_i].figures);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "s.db"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, no_col[_i].msg), "want '%s' in:\n%s", no_col[_i].msg, err);
    free(err);
    ck_assert(!th_exists(tpath("s.db")));
}
END_TEST

START_TEST(test_clash)
{
    write_scn(clashes[_i].figures);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "s.db"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, clashes[_i].msg), "want '%s' in:\n%s", clashes[_i].msg, err);
    free(err);
    ck_assert(!th_exists(tpath("s.db")));
    ck_assert(!th_exists(tpath("s-plots")));
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run"), 2);
}
END_TEST

/* Figures that write files of their own load: other names, another x, another format. */
START_TEST(test_no_clash)
{
    write_scn("figures:\n  - {figure: study}\n  - {figure: budget, col: prompt_len, name: a.png}\n"
              "  - {figure: budget, name: accuracy-budget.svg}\n"
              "  - {y: attn_mass_recall, x: kept_frac}\n  - {y: attn_mass_recall, x: heavy_ratio}\n"
              "  - {y: attn_mass_recall}\n  - {y: top1_agreement}\n  - {figure: breakdown}\n");
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run"), 0);
}
END_TEST

/* A bar's label with a percent sign (kv_budget: h2o@10%) is drawn as it reads: gnuplot takes a
 * tic label for a format. */
START_TEST(test_breakdown_percent)
{
    th_write(tpath("p.yaml"),
             "format: 1\nname: p\nseed: 1\nprotocol: semi2k\nnetwork: lan\n"
             "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, "
             "vocab: 256, max_context: 512}\n"
             "workload: {prompt_len: 64, decode_len: 2}\ntrace: {source: synth}\n"
             "policies:\n  - full\n  - {name: h2o, kv_budget: [0.1, 0.2]}\n");
    ck_assert_int_eq(MPCSIM("run", "p.yaml", "-o", "p.db", "-q"), 0);
    ck_assert_int_eq(MPCSIM("plot", "p.db", "--figure", "breakdown", "--data", "gp"), 0);
    ck_assert(th_exists(tpath("p-plots/breakdown.png")));
    char *gp = th_slurp(tpath("gp/breakdown.gp"), NULL);
    ck_assert_msg(strstr(gp, "\"h2o@10%%\" 1"), "%s", gp);
    free(gp);
}
END_TEST

Suite *figfiles_suite(void)
{
    Suite *s = suite_create("figfiles");
    TCase *tc = th_case(s, "figures", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_no_clash, test_breakdown_percent);
    TH_LOOPS(tc, sizeof clashes / sizeof clashes[0], test_clash);
    TH_LOOPS(tc, sizeof no_col / sizeof no_col[0], test_no_col);
    return s;
}
