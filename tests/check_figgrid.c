/* check_figgrid.c — the faceted figure's grid and series (sim/figure/relplot.h): panels nothing
 * lands in are not drawn (each row keeps its panels with points, every title names its facets);
 * a configuration on another family's points is drawn as a larger hollow ring and says so in the
 * legend; points of different groups (models) are never joined by one line; and `mpcsim plot`
 * on a sweep whose models have their own prompt lengths. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sim/figure/relplot.h"

TESTDIR("check_figgrid")
#define tmpdir (td.dir)
static const char *tpath(const char *name) { return testdir_path(&td, name); }

#define MPCSIM(...) \
    th_runl(tmpdir, tpath("out.txt"), tpath("err.txt"), __VA_ARGS__, (const char *)NULL)

static void gp_str(FILE *f, const char *s) { fprintf(f, "\"%s\"", s); }

static char *script_of(const relplot *P)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(rp_write(P, f, "pngcairo", "out.png", gp_str), 0);
    fclose(f);
    return buf;
}

/* The plot clause of series `name` (e.g. "$s0_0_1 using 1:2 with points") in script: its
 * marker and size. */
static void marker_of(const char *script, const char *name, int *pt, double *ps)
{
    const char *t = strstr(script, name);
    ck_assert_msg(t != NULL, "no %s", name);
    const char *p = strstr(t, " pt "), *z = strstr(t, " ps ");
    ck_assert(p && z);
    *pt = atoi(p + 4);
    *ps = atof(z + 4);
}

/* Two models, each at its own two prompt lengths, as rows × columns: of the 2 × 4 panels the
 * four with runs are drawn, two per row, each titled with its model and prompt. */
START_TEST(test_empty_panels_dropped)
{
    static relplot P;
    memset(&P, 0, sizeof P);
    snprintf(P.x.label, sizeof P.x.label, "kept fraction");
    P.x.log = -1;
    P.y[0] = (rp_axis){.label = "bytes", .kind = 'B', .log = -1, .zero = 1};
    int h = rp_index(&P, 'h', "h2o", 0), s = rp_index(&P, 's', "h2o a", h);
    static const char *const model[] = {"7b", "8b"}, *const prompt[] = {"1024", "2048", "4088",
                                                                        "8192"};
    for (int m = 0; m < 2; m++)
        rp_index(&P, 'r', model[m], 0);
    for (int c = 0; c < 4; c++)
        rp_index(&P, 'c', prompt[c], 0);
    for (int m = 0; m < 2; m++)
        for (int c = 2 * m; c < 2 * m + 2; c++) /* 7b at 1024, 2048; 8b at 4088, 8192 */
            for (int k = 1; k <= 2; k++)
                rp_add(&P, m, c, h, s, 0.1 * k, 1e6 * k * (c + 1));
    char *buf = script_of(&P);
    ck_assert_int_eq(th_count(buf, "# panel "), 4);
    ck_assert_ptr_null(strstr(buf, "no runs here"));
    ck_assert(strstr(buf, "# panel 1, 1") && strstr(buf, "# panel 1, 2"));
    ck_assert(strstr(buf, "# panel 2, 3") && strstr(buf, "# panel 2, 4"));
    ck_assert_ptr_null(strstr(buf, "# panel 1, 3"));
    ck_assert_ptr_null(strstr(buf, "# panel 2, 1"));
    ck_assert_ptr_nonnull(strstr(buf, "set title \"8b · 4088\""));
    ck_assert_ptr_nonnull(strstr(buf, "set title \"7b · 2048\""));
    /* two columns: the 8b row's first panel at the left edge, as the 7b row's */
    int W, H;
    const char *t = strstr(buf, "size ");
    ck_assert(t && sscanf(t, "size %d,%d", &W, &H) == 2);
    ck_assert_int_eq(W, 2 * 440);
    const char *p1 = strstr(buf, "# panel 1, 1"), *p3 = strstr(buf, "# panel 2, 3");
    double l1, l3;
    ck_assert(sscanf(strstr(p1, "set lmargin at screen "), "set lmargin at screen %lf", &l1) == 1);
    ck_assert(sscanf(strstr(p3, "set lmargin at screen "), "set lmargin at screen %lf", &l3) == 1);
    ck_assert_double_eq_tol(l1, l3, 1e-9);
    free(buf);
}
END_TEST

/* snapkv and streamingllm at the same cost, quest within 1 % of mpcache, h2o 30 % apart: the
 * later of each coinciding pair is a larger hollow ring of its shape named in the legend; h2o, the
 * earlier ones and a configuration with only some points on another's are filled and unchanged. */
START_TEST(test_coinciding_series)
{
    static relplot P;
    memset(&P, 0, sizeof P);
    snprintf(P.x.label, sizeof P.x.label, "kept fraction");
    P.x.log = -1;
    P.y[0] = (rp_axis){.label = "bytes", .kind = 'B', .log = -1, .zero = 1};
    static const char *const fam[] = {"snapkv", "streamingllm", "mpcache", "quest", "h2o"};
    static const double scale[] = {1, 1, 3, 3.02, 1.3};
    int sty[5][2];
    for (int f = 0; f < 5; f++) {
        int h = rp_index(&P, 'h', fam[f], 0);
        for (int b = 0; b < 2; b++) {
            char name[32];
            snprintf(name, sizeof name, "%s %d", fam[f], b);
            sty[f][b] = rp_index(&P, 's', name, h);
            rp_add(&P, 0, 0, h, sty[f][b], 0.1 * (b + 1), 1e6 * scale[f] * (b + 1));
        }
    }
    /* a configuration with one of its two points on snapkv's: not on it */
    int hp = rp_index(&P, 'h', "pyramidkv", 0), sp = rp_index(&P, 's', "pyramidkv", hp);
    rp_add(&P, 0, 0, hp, sp, 0.1, 1e6);
    rp_add(&P, 0, 0, hp, sp, 0.3, 5e6);
    char *buf = script_of(&P);
    int ptp;
    double psp;
    char pname[64];
    snprintf(pname, sizeof pname, "$s0_0_%d using 1:2 with points", sp);
    marker_of(buf, pname, &ptp, &psp);
    ck_assert_int_eq(ptp, 7);
    ck_assert_double_eq_tol(psp, 1.3, 1e-9);
    ck_assert_ptr_nonnull(strstr(buf, "title \"pyramidkv\""));
    int pt[5][2];
    double ps[5][2];
    for (int f = 0; f < 5; f++)
        for (int b = 0; b < 2; b++) {
            char name[64];
            snprintf(name, sizeof name, "$s0_0_%d using 1:2 with points", sty[f][b]);
            marker_of(buf, name, &pt[f][b], &ps[f][b]);
        }
    for (int b = 0; b < 2; b++) {
        /* the filled circle or square (7, 5) of the first, the hollow one (6, 4) of the second */
        ck_assert_int_eq(pt[0][b], b ? 5 : 7);
        ck_assert_int_eq(pt[1][b], pt[0][b] - 1);
        ck_assert_double_gt(ps[1][b], ps[0][b]);
        ck_assert_int_eq(pt[3][b], pt[2][b] - 1);
        ck_assert_double_gt(ps[3][b], ps[2][b]);
        ck_assert_int_eq(pt[4][b], pt[0][b]); /* h2o: apart, filled */
        ck_assert_double_eq(ps[4][b], ps[0][b]);
    }
    ck_assert_ptr_nonnull(strstr(buf, "title \"streamingllm 0 (on snapkv 0)\""));
    ck_assert_ptr_nonnull(strstr(buf, "title \"quest 1 (on mpcache 1)\""));
    ck_assert_ptr_nonnull(strstr(buf, "title \"snapkv 0\""));
    ck_assert_ptr_nonnull(strstr(buf, "title \"h2o 1\""));
    /* the ringed families' lines dashed, the others solid */
    ck_assert_ptr_nonnull(strstr(buf, "$h0_0_1 using 1:2 with lines lc rgb '#D55E00' dt 2"));
    ck_assert_ptr_nonnull(strstr(buf, "$h0_0_0 using 1:2 with lines lc rgb '#0072B2' dt 1"));
    ck_assert_ptr_nonnull(strstr(buf, "a ring marker"));
    free(buf);
}
END_TEST

/* Two models' points of two budgets each, x a cost: a line per model joins its two budgets; no
 * line joins the models. */
START_TEST(test_groups_not_joined)
{
    static relplot P;
    memset(&P, 0, sizeof P);
    snprintf(P.x.label, sizeof P.x.label, "bytes");
    P.x = (rp_axis){.label = "bytes", .kind = 'B', .log = 0, .zero = 1};
    P.y[0] = (rp_axis){.label = "recall", .log = 0};
    int h = rp_index(&P, 'h', "h2o", 0);
    int s0 = rp_index(&P, 's', "h2o 10%", h), s1 = rp_index(&P, 's', "h2o 20%", h);
    /* model 0 costs 1 and 2 MB, model 1 costs 1.5 and 3 MB: by x the budgets interleave */
    rp_add_grp(&P, 0, 0, h, s0, 0, 1e6, 0.5);
    rp_add_grp(&P, 0, 0, h, s1, 0, 2e6, 0.7);
    rp_add_grp(&P, 0, 0, h, s0, 1, 1.5e6, 0.2);
    rp_add_grp(&P, 0, 0, h, s1, 1, 3e6, 0.4);
    char *buf = script_of(&P);
    ck_assert_ptr_nonnull(strstr(buf, "$h0_0_0_0 << EOD\n1 0.5\n2 0.7\nEOD"));
    ck_assert_ptr_nonnull(strstr(buf, "$h0_0_0_1 << EOD\n1.5 0.2\n3 0.4\nEOD"));
    ck_assert_int_eq(th_count(buf, "with lines lc"), 2);
    ck_assert_ptr_nonnull(strstr(buf, "$h0_0_0_0 using 1:2 with lines"));
    ck_assert_ptr_nonnull(strstr(buf, "$h0_0_0_1 using 1:2 with lines"));
    /* the markers: each budget's two points */
    ck_assert_ptr_nonnull(strstr(buf, "$s0_0_0 << EOD\n1 0.5\n1.5 0.2\nEOD"));
    free(buf);
}
END_TEST

/* Two tiny models, each at its own prompt length, two protocols. */
static const char scn[] =
    "format: 1\nname: %s\nseed: 1\nprotocol: [semi2k, aby3]\nnetwork: lan\n"
    "model: {name: %s, family: llama, layers: 2, dim: 64, heads: 4, ffn_dim: 128, vocab: 256, "
    "max_context: 512}\n"
    "workload: {prompt_len: %d, decode_len: 2}\ntrace: {source: synth}\n"
    "policies:\n  - full\n  - {name: h2o, kv_budget: [0.1, 0.2]}\n"
    "  - {name: streamingllm, kv_budget: [0.1, 0.2]}\n";

START_TEST(test_plot_models_own_contexts)
{
    char buf[1024];
    snprintf(buf, sizeof buf, scn, "a", "tinya", 64);
    th_write(tpath("a.yaml"), buf);
    snprintf(buf, sizeof buf, scn, "b", "tinyb", 96);
    th_write(tpath("b.yaml"), buf);
    ck_assert_int_eq(MPCSIM("run", "a.yaml", "b.yaml", "-o", "s.db", "-q"), 0);
    /* rows × columns cross to four panels, two with runs */
    ck_assert_int_eq(MPCSIM("plot", "s.db", "--y", "bytes_decode_step", "--row", "model", "--col",
                            "prompt_len", "--where", "protocol=semi2k", "-o", "o", "--data", "d"),
                     0);
    char *gp = th_slurp(tpath("d/bytes_decode_step-vs-kept_frac.gp"), NULL);
    ck_assert_int_eq(th_count(gp, "# panel "), 2);
    ck_assert_ptr_null(strstr(gp, "no runs here"));
    ck_assert_ptr_nonnull(strstr(gp, "set title \"tinyb · prompt 96\""));
    free(gp);
    ck_assert(th_exists(tpath("o/bytes_decode_step-vs-kept_frac.png")));
    /* the Pareto figure by protocol: a family's line per model and prompt, none across them */
    ck_assert_int_eq(
        MPCSIM("plot", "s.db", "--figure", "pareto", "--row", "protocol", "-o", "o", "--data", "d"),
        0);
    gp = th_slurp(tpath("d/pareto-step.gp"), NULL);
    ck_assert_ptr_nonnull(strstr(gp, "a line per model,prompt_len"));
    ck_assert_int_eq(th_count(gp, "# panel "), 2);
    /* h2o (hue 1) and streamingllm (2): one line per model in each panel; no configuration's
     * points joined (they are one per model) */
    ck_assert_int_eq(th_count(gp, "with lines lc"), 2 * 2 * 2);
    ck_assert_int_eq(th_count(gp, "$h0_0_1_0 using 1:2 with lines"), 1);
    ck_assert_int_eq(th_count(gp, "$h0_0_1_1 using 1:2 with lines"), 1);
    for (const char *p = gp; (p = strstr(p, "with lines lc")); p++) {
        const char *l = p;
        while (l > gp && l[-1] != '$')
            l--;
        ck_assert_msg(*l == 'h', "a configuration's points joined: %.40s", l - 1);
    }
    free(gp);
}
END_TEST

Suite *figgrid_suite(void)
{
    Suite *s = suite_create("figgrid");
    TCase *tc = th_case(s, "core", 60);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_empty_panels_dropped, test_coinciding_series, test_groups_not_joined,
             test_plot_models_own_contexts);
    return s;
}
