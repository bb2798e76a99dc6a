/* check_synth_calib.c — the synthetic generator's per-family defaults reproduce the cited
 * statistics of real attention (sim/trace/TRACE_FORMAT.md §Calibration): H2O's > 95 % sparsity
 * (entries below 1 % of the row's largest) in every layer, and StreamingLLM's attention sink
 * leading the rows. The generic defaults do not, so the statistics do discriminate. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"
#include "sim/trace/trace.h"
#include "harness.h"

TESTDIR("check_synth_calib")

/* A 7B-like head (head_dim 128) in a few layers and heads, so that 2048 positions stay cheap:
 * the generator's logits depend on head_dim and the parameters, not on the layer count. */
static void load_shape(model_cfg *cfg, const char *family)
{
    char text[512];
    snprintf(
        text, sizeof text,
        "format: mpcsim-model 1\nname: calib-%s\nfamily: %s\nlayers: 3\ndim: 512\n"
        "heads: 4\nkv_heads: 4\nhead_dim: 128\nffn_dim: 1024\nvocab: 32000\nmax_context: 4096\n",
        family, family);
    const char *path = th_file(&td, "m.yaml", text);
    errbuf e = {{0}};
    ck_assert_msg(model_load(path, cfg, &e) == MS_OK, "%s", e.msg);
}

/* The statistics of n_tokens synthetic tokens of shape cfg drawn with p from seed. */
static trace_stats synth_stats(const model_cfg *cfg, uint32_t n_tokens, uint64_t seed,
                               const trace_synth *p)
{
    errbuf e = {{0}};
    trace *t = NULL;
    trace_stats st;
    ck_assert_msg(trace_open_synth(cfg, n_tokens, seed, p, &t, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(trace_measure(t, p, &st, &e) == MS_OK, "%s", e.msg);
    trace_close(t);
    return st;
}

static trace_stats measure(const char *family, double sink)
{
    model_cfg cfg;
    load_shape(&cfg, family);
    trace_synth p;
    trace_synth_defaults_for(&p, cfg.family);
    if (sink >= 0)
        p.sink = sink;
    trace_stats st = synth_stats(&cfg, 2048, 1, &p);
    fprintf(stderr,
            "synth %s sink %.1f: sparsity %.4f (smallest layer %.4f), sink leads %.4f "
            "of rows, top-5%% mass %.4f, sink mass %.4f\n",
            family, p.sink, st.sparsity, st.sparsity_min_layer, st.sink_top, st.top5_mass,
            st.sink_mass);
    return st;
}

START_TEST(family_defaults_reproduce_cited_statistics)
{
    static const char *const families[] = {"llama", "gpt2"};
    for (int i = 0; i < 2; i++) {
        trace_stats st = measure(families[i], -1);
        ck_assert_msg(st.sparsity_min_layer > 0.95, "%s: H2O's sparsity not reproduced (%.4f)",
                      families[i], st.sparsity_min_layer);
        ck_assert_msg(st.sink_top >= 0.90, "%s: the sink leads only %.4f of the rows", families[i],
                      st.sink_top);
    }
}
END_TEST

START_TEST(generic_defaults_are_too_diffuse)
{
    trace_synth g;
    trace_synth_defaults(&g);
    trace_stats st = measure("llama", g.sink);
    ck_assert_msg(st.sparsity_min_layer < 0.95 && st.sink_top < 0.90,
                  "the generic defaults already met the statistics: the test cannot tell");
}
END_TEST

/* The estimators: a row whose mass is all on one key is fully sparse except that key, is led
 * by it, and has all its mass in the top 5 %. */
START_TEST(concentration_estimators_on_a_known_row)
{
    model_cfg cfg;
    load_shape(&cfg, "llama");
    trace_synth p;
    trace_synth_defaults_for(&p, cfg.family);
    p.sink = 50; /* the largest the schema allows: every row is the sink's */
    p.noise = 0;
    p.heavy = 0;
    p.local = 0;
    trace_stats st = synth_stats(&cfg, 256, 3, &p);
    ck_assert_double_eq_tol(st.sink_top, 1.0, 1e-12);
    ck_assert_double_eq_tol(st.top5_mass, 1.0, 1e-6);
    ck_assert_msg(st.sparsity > 0.99, "%.6f", st.sparsity);
}
END_TEST

Suite *synth_calib_suite(void)
{
    Suite *s = suite_create("synth_calib");
    TCase *tc = th_case(s, "calibration", 120);
    TESTDIR_USE(tc);
    TH_TESTS(tc, family_defaults_reproduce_cited_statistics, generic_defaults_are_too_diffuse,
             concentration_estimators_on_a_known_row);
    return s;
}
