/* check_plotscn.c — the figures a scenario declares (`figures:`): `mpcsim run` draws them into
 * the database's plots folder after the sweep (PNG and SVG, fixed panel widths, a name of their
 * own), from the runs of the database; a bad entry stops the load at its position with
 * nothing written; `mpcsim plot --name` and `--figure breakdown`, which the run uses. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

TESTDIR("check_plotscn")
#define tmpdir (td.dir)
static const char *tpath(const char *name) { return testdir_path(&td, name); }

#define MPCSIM(...) \
    th_runl(tmpdir, tpath("out.txt"), tpath("err.txt"), __VA_ARGS__, (const char *)NULL)

/* A tiny sweep: the full cache and two families at two budgets each, a synthetic trace. */
static const char head_yaml[] =
    "format: 1\nname: %s\nseed: 1\nprotocol: semi2k\nnetwork: lan\n"
    "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, vocab: 256, "
    "max_context: 512}\n"
    "workload: {prompt_len: 64, decode_len: 4}\ntrace: {source: synth}\n"
    "policies:\n"
    "  - full\n"
    "  - {name: h2o, heavy_ratio: [0.05, 0.2], recent_ratio: 0.1}\n"
    "  - {name: streamingllm, sink: 4, recent: [4, 16]}\n";

static void write_scn(const char *file, const char *name, const char *figures)
{
    char buf[4096];
    int n = snprintf(buf, sizeof buf, head_yaml, name);
    snprintf(buf + n, sizeof buf - (size_t)n, "%s", figures);
    th_write(tpath(file), buf);
}

/* A PNG's width (its IHDR chunk). */
static unsigned png_width(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "missing %s", path);
    unsigned char h[24];
    ck_assert_uint_eq(fread(h, 1, 24, f), 24);
    fclose(f);
    ck_assert_msg(!memcmp(h + 1, "PNG", 3) && !memcmp(h + 12, "IHDR", 4), "%s: no PNG", path);
    return (unsigned)h[16] << 24 | h[17] << 16 | h[18] << 8 | h[19];
}

START_TEST(test_run_draws_figures)
{
    write_scn("s.yaml", "study",
              "figures:\n"
              "  - {figure: budget}\n"
              "  - {figure: cost, name: cost.svg}\n"
              "  - {y: [attn_mass_recall, bytes_decode_step], x: kept_frac, name: two.png}\n"
              "  - {figure: breakdown, row: model, name: where-it-goes.png}\n");
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "s.db", "-q"), 0);
    char *out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "s-plots/accuracy-budget.png\n"));
    ck_assert_ptr_nonnull(strstr(out, "s-plots/where-it-goes.png\n"));
    free(out);
    /* a column of fixed-size panels (the canvas may widen for the heading), or two */
    unsigned w = png_width(tpath("s-plots/accuracy-budget.png"));
    ck_assert_uint_ge(w, 440);
    ck_assert_uint_lt(w, 880);
    ck_assert_uint_ge(png_width(tpath("s-plots/two.png")), 880);
    ck_assert_uint_ge(png_width(tpath("s-plots/where-it-goes.png")), 2 * 420);
    char *svg = th_slurp(tpath("s-plots/cost.svg"), NULL);
    ck_assert_ptr_nonnull(strstr(svg, "<svg"));
    ck_assert_ptr_nonnull(strstr(svg, "width=\"880\"")); /* latency and bytes: two columns */
    free(svg);
    ck_assert(!th_exists(tpath("s-plots/cost-budget.png")));
    /* nothing left to run: the figures are drawn again */
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "s.db", "--resume"), 0);
    out = th_slurp(tpath("out.txt"), NULL);
    ck_assert_ptr_nonnull(strstr(out, "nothing to run"));
    ck_assert_int_eq(th_count(out, "s-plots/"), 4);
    free(out);
    /* two scenarios into one database: the figures of both, from its runs */
    write_scn("a.yaml", "a", "figures: [{figure: budget, name: a.png}]\n");
    write_scn("b.yaml", "b", "figures: [{figure: budget, name: b.png}]\n");
    ck_assert_int_eq(MPCSIM("run", "a.yaml", "b.yaml", "-o", "ab.db", "-q"), 0);
    ck_assert(th_exists(tpath("ab-plots/a.png")) && th_exists(tpath("ab-plots/b.png")));
    /* figures that cannot be drawn (no accuracy metric without a trace; a folder that is a
     * file): exit 1 after the sweep, whatever plot's reason, and the runs are kept */
    th_write(tpath("n.yaml"), "format: 1\nname: n\nprotocol: semi2k\nnetwork: lan\n"
                              "model: {name: tiny, family: llama, layers: 2, dim: 64, heads: 4, "
                              "ffn_dim: 128, vocab: 256, max_context: 512}\n"
                              "workload: {prompt_len: 64, decode_len: 4}\npolicies: [full]\n"
                              "figures: [{figure: budget}]\n");
    ck_assert_int_eq(MPCSIM("run", "n.yaml", "-o", "n.db", "-q"), 1);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, "figure 1 of ") && strstr(err, "the runs are recorded"), "%s", err);
    free(err);
    th_write(tpath("f-plots"), "not a folder\n");
    ck_assert_int_eq(MPCSIM("run", "a.yaml", "-o", "f.db", "-q"), 1);
    ck_assert_int_eq(MPCSIM("run", "a.yaml", "-o", "f.db", "--resume", "-q"), 1);
    /* a shard holds part of the runs: it draws nothing */
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "sh.db", "-q", "--shard", "1/2"), 0);
    ck_assert(!th_exists(tpath("sh-plots")));
}
END_TEST

START_TEST(test_plot_name_and_breakdown)
{
    write_scn("p.yaml", "p", "");
    ck_assert_int_eq(MPCSIM("run", "p.yaml", "-o", "p.db", "-q"), 0);
    ck_assert_int_eq(MPCSIM("plot", "p.db", "--figure", "pareto", "--name", "front", "-o", "o"), 0);
    ck_assert_uint_ge(png_width(tpath("o/front.png")), 440);
    ck_assert(!th_exists(tpath("o/pareto-step.png")));
    ck_assert_int_eq(MPCSIM("plot", "p.db", "--figure", "breakdown", "-o", "b"), 0);
    ck_assert_uint_ge(png_width(tpath("b/breakdown.png")), 2 * 420);
    ck_assert(!th_exists(tpath("b/latency.png"))); /* only the breakdown */
    static const struct {
        const char *arg[4], *msg;
    } bad[] = {
        {{"--name", "x"}, "--name names the one figure of --figure or --y"},
        {{"--figure", "study", "--name", "x"}, "--figure study draws three files: no --name"},
        {{"--figure", "budget", "--name", "a/b"}, "--name is a file name in the output folder"},
        {{"--figure", "breakdwn"}, "did you mean 'breakdown'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(MPCSIM("plot", "p.db", "-o", "bad", bad[i].arg[0], bad[i].arg[1],
                                bad[i].arg[2], bad[i].arg[3]),
                         2);
        char *err = th_slurp(tpath("err.txt"), NULL);
        ck_assert_msg(strstr(err, bad[i].msg), "%s: %s", bad[i].msg, err);
        free(err);
    }
}
END_TEST

/* A bad entry: its position, exit 2, no database and no plots folder. */
static const struct {
    const char *figures, *msg;
} bad_figures[] = {
    {"figures:\n  - {figure: budget, colour: red}\n",
     "s.yaml:14:22: error: unknown key 'colour' in 'figures'"},
    {"figures:\n  - {figure: budgte}\n",
     "s.yaml:14:14: error: unknown 'figure' value 'budgte' (did you mean 'budget'?)"},
    {"figures:\n  - {y: attn_mass_recal}\n",
     "s.yaml:14:9: error: unknown metric 'attn_mass_recal' (did you mean 'attn_mass_recall'?)"},
    {"figures:\n  - {figure: cost, row: modle}\n",
     "s.yaml:14:25: error: unknown 'row' key 'modle' (did you mean 'model'?)"},
    {"figures:\n  - {figure: cost, name: c.gif}\n",
     "s.yaml:14:26: error: a figure's name is a file name ending in .png, .svg or .pdf"},
    {"figures:\n  - {figure: cost, name: c.png}\n  - {figure: budget, name: c.png}\n",
     "s.yaml:15:28: error: figure 'c.png' named twice"},
    {"figures:\n  - {figure: study, name: s.png}\n", "s.yaml:14:27: error: 'study' takes no"},
    {"figures:\n  - {x: kept_frac}\n", "s.yaml:14:5: error: a figure needs 'figure' or 'y'"},
    {"figures:\n  - {figure: budget, y: attn_mass_recall}\n",
     "'figure' and 'y' exclude each other"},
    {"figures:\n  - {figure: budget, x: heavy_ratoi}\n",
     "s.yaml:14:25: error: 'heavy_ratoi' is no axis"},
    {"figures:\n  - {figure: breakdown, col: model}\n", "the breakdown takes no 'col'"},
    {"figures:\n  - {figure: budget, metric: bytes_decode_step}\n",
     "'bytes_decode_step' is no accuracy metric"},
    {"figures: {figure: budget}\n", "s.yaml:13:10: error: 'figures' must be a list of mappings"},
    {"cases:\n  - {figures: [{figure: budget}]}\n",
     "s.yaml:14:6: error: 'figures' cannot be set per case"},
};

START_TEST(test_bad_figures)
{
    write_scn("s.yaml", "s", bad_figures[_i].figures);
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "-o", "s.db"), 2);
    char *err = th_slurp(tpath("err.txt"), NULL);
    ck_assert_msg(strstr(err, bad_figures[_i].msg), "want '%s' in:\n%s", bad_figures[_i].msg, err);
    free(err);
    ck_assert(!th_exists(tpath("s.db")));
    ck_assert(!th_exists(tpath("s-plots")));
    /* the same message without running anything */
    ck_assert_int_eq(MPCSIM("run", "s.yaml", "--dry-run"), 2);
}
END_TEST

Suite *plotscn_suite(void)
{
    Suite *s = suite_create("plotscn");
    TCase *tc = th_case(s, "figures", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_run_draws_figures, test_plot_name_and_breakdown);
    TH_LOOPS(tc, sizeof bad_figures / sizeof bad_figures[0], test_bad_figures);
    return s;
}
