/* check_replay.c — the replay end to end: stories260K recorded over real text (the model runs
 * with the policy applied), a synthetic llama trace, metric definitions on hand-made rows,
 * step order and skipped steps. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay/metrics.h"
#include "sim/policy/policy.h"
#include "stories.h"
#include "harness.h"
#include "sim/replay/replay.h"
#include "sim/scenario/runner.h"

/* A parameter as a scenario file gives it at 7:3. */
static kv_param kvp(const char *k, const char *v) { return fixture_kvp(k, v, 7, 3); }

/* stories260K over tests/data/tinystories_sample.txt: prompt P, decode N. */
static run_cfg *stories_cfg(const char *policy, uint32_t P, uint32_t N)
{
    run_cfg *c = calloc(1, sizeof *c);
    errbuf e;
    ck_assert_msg(model_load("stories260K", &c->model, &e) == MS_OK, "%s", e.msg);
    snprintf(c->model_ref, sizeof c->model_ref, "stories260K");
    snprintf(c->scenario_path, sizeof c->scenario_path, "t.yaml");
    snprintf(c->trace.source, sizeof c->trace.source, "record");
    snprintf(c->trace.path, sizeof c->trace.path, "%s/tests/data/tinystories_sample.txt",
             th_data());
    snprintf(c->policy.name, sizeof c->policy.name, "%s", policy);
    c->work.prompt_len = P;
    c->work.decode_len = N;
    c->seed = 1;
    return c;
}

static double metric(const run_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_metric; i++)
        if (!strcmp(r->metric[i].name, name))
            return r->metric[i].value;
    return NAN;
}

/* Runs the whole replay; kept_out (L·Hkv) receives the last step's counts. */
static void drive(run_cfg *c, run_result *res, uint32_t *kept_out, size_t *n_ops_out)
{
    errbuf e;
    replay *r;
    ck_assert_msg(replay_open(c, &r, &e) == MS_OK, "%s", e.msg);
    op_program prog;
    op_program_init(&prog);
    ck_assert_msg(replay_prefill(r, &prog, &e) == MS_OK, "%s", e.msg);
    size_t nk = (size_t)c->model.n_layers * c->model.n_kv_heads;
    uint32_t *kept = calloc(nk, sizeof *kept);
    for (uint32_t s = 0; s < c->work.decode_len; s++) {
        ck_assert_msg(replay_step(r, s, c->work.prompt_len + s, kept, &prog, &e) == MS_OK, "%s",
                      e.msg);
        for (size_t i = 0; i < nk; i++)
            ck_assert_uint_le(kept[i], c->work.prompt_len + s);
    }
    ck_assert(op_program_is_sane(&prog));
    if (n_ops_out)
        *n_ops_out = prog.n_ops;
    if (kept_out)
        memcpy(kept_out, kept, nk * sizeof *kept);
    run_result_init(res);
    metric_sink sink = run_result_sink(res);
    ck_assert_msg(replay_metrics(r, &sink, &e) == MS_OK, "%s", e.msg);
    free(kept);
    op_program_free(&prog);
    replay_close(r);
}

START_TEST(test_full_is_exact)
{
    /* the full cache: every metric at its ideal value, the model run identical */
    run_cfg *c = stories_cfg("full", 48, 16);
    run_result res;
    uint32_t kept[20];
    size_t nops;
    drive(c, &res, kept, &nops);
    ck_assert_uint_eq(kept[0], 48 + 15);
    ck_assert_uint_eq(nops, 0);
    ck_assert_double_eq_tol(metric(&res, "attn_mass_recall"), 1.0, 1e-6);
    ck_assert_double_eq_tol(metric(&res, "topk_recall"), 1.0, 1e-12);
    ck_assert_double_eq_tol(metric(&res, "attn_out_rel_err"), 0.0, 1e-5);
    ck_assert_double_eq_tol(metric(&res, "logit_kl"), 0.0, 1e-9);
    ck_assert_double_eq_tol(metric(&res, "top1_agreement"), 1.0, 1e-12);
    ck_assert_double_eq_tol(metric(&res, "ppl_delta"), 0.0, 1e-9);
    ck_assert(metric(&res, "ppl_full") > 1.0);
    run_result_free(&res);
    free(c);
}
END_TEST

START_TEST(test_streaming_degrades)
{
    /* sink 2 + recent 8 of ≥ 48 entries: counts exact, recall < 1, the model run diverges */
    run_cfg *c = stories_cfg("streamingllm", 48, 16);
    c->policy.params[0] = kvp("sink", "2");
    c->policy.params[1] = kvp("recent", "8");
    c->policy.params[2] = kvp("metric_stride", "1"); /* kept_frac: the mean over every step */
    c->policy.n_params = 3;
    run_result res;
    uint32_t kept[20];
    drive(c, &res, kept, NULL);
    for (int i = 0; i < 20; i++)
        ck_assert_uint_eq(kept[i], 10);
    double R = metric(&res, "attn_mass_recall");
    ck_assert(R > 0.2 && R < 0.999);
    ck_assert(metric(&res, "attn_out_rel_err") > 1e-3);
    ck_assert(metric(&res, "attn_out_wo_rel_err") > 1e-3);
    ck_assert(metric(&res, "logit_kl") > 1e-4);
    ck_assert(metric(&res, "top1_agreement") <= 1.0);
    ck_assert_double_eq_tol(metric(&res, "kept_frac"), 10.0 / (48 + 7.5), 1e-9);
    run_result_free(&res);
    free(c);
}
END_TEST

/* The default metric_stride (16, the same for every policy) measures decode steps 0, 16 and 32
 * of 40: sink 2 + recent 8 of 48, 64 and 80 cached entries. */
START_TEST(test_default_measured_steps)
{
    run_cfg *c = stories_cfg("streamingllm", 48, 40);
    c->policy.params[0] = kvp("sink", "2");
    c->policy.params[1] = kvp("recent", "8");
    c->policy.params[2] = kvp("live", "0");
    c->policy.n_params = 3;
    run_result res;
    drive(c, &res, NULL, NULL);
    ck_assert_double_eq_tol(metric(&res, "kept_frac"), 30.0 / (48 + 64 + 80), 1e-12);
    run_result_free(&res);
    free(c);
}
END_TEST

START_TEST(test_policies_on_stories)
{
    /* every policy runs on the real model; budgets below the context make them evict */
    size_t n;
    const policy_ops *const *all = policy_all(&n);
    for (size_t i = 0; i < n; i++) {
        /* the one budget every policy takes (none for a dense one), a window that fits */
        run_cfg *c = stories_cfg(all[i]->name, 64, 12);
        if (all[i]->budget_keys)
            c->policy.params[c->policy.n_params++] = kvp("kv_budget", "0.3");
        size_t np;
        const policy_param *pp = policy_params(all[i], &np);
        for (size_t t = 0; t < np; t++)
            if (!strcmp(pp[t].key, "window"))
                c->policy.params[c->policy.n_params++] = kvp("window", "8");
        run_result res;
        size_t nops;
        uint32_t kept[20];
        drive(c, &res, kept, &nops);
        for (int l = 0; l < 5; l++) /* one public shape per layer (padded head selections) */
            for (int g = 1; g < 4; g++)
                ck_assert_uint_eq(kept[l * 4 + g], kept[l * 4]);
        double R = metric(&res, "attn_mass_recall");
        ck_assert_msg(R > 0 && R <= 1.0 + 1e-6, "%s: recall %g", all[i]->name, R);
        ck_assert_msg(!isnan(metric(&res, "logit_kl")), "%s: no KL", all[i]->name);
        if (strcmp(all[i]->name, "full") && strcmp(all[i]->name, "comet"))
            ck_assert_msg(metric(&res, "kept_frac") < 1.0, "%s keeps all", all[i]->name);
        run_result_free(&res);
        free(c);
    }
}
END_TEST

START_TEST(test_synthetic_and_stride)
{
    /* a synthetic llama-shaped trace; metric_stride 4 and skipped steps (the runner's
     * decode_stride) still advance the policy's state */
    run_cfg *c = calloc(1, sizeof *c);
    errbuf e;
    ck_assert_msg(model_load("stories260K", &c->model, &e) == MS_OK, "%s", e.msg);
    c->model.weights[0] = '\0';
    snprintf(c->trace.source, sizeof c->trace.source, "synth");
    snprintf(c->policy.name, sizeof c->policy.name, "h2o");
    c->policy.params[0] = kvp("metric_stride", "4");
    c->policy.n_params = 1;
    c->work.prompt_len = 100;
    c->work.decode_len = 12;
    c->seed = 7;
    replay *r;
    ck_assert_msg(replay_open(c, &r, &e) == MS_OK, "%s", e.msg);
    uint32_t kept[20];
    op_program prog;
    op_program_init(&prog);
    ck_assert_int_eq(replay_step(r, 3, 103, kept, &prog, &e), MS_OK);
    /* h2o: heavy 10 + recent 10 of the prompt, one eviction per step once full */
    for (int i = 0; i < 20; i++)
        ck_assert_uint_eq(kept[i], 20);
    ck_assert_int_eq(replay_step(r, 2, 102, kept, &prog, &e), MS_ERR_INTERNAL);
    ck_assert_int_eq(replay_step(r, 4, 104, kept, &prog, &e), MS_OK);
    run_result res;
    run_result_init(&res);
    metric_sink sink = run_result_sink(&res);
    ck_assert_int_eq(replay_metrics(r, &sink, &e), MS_OK);
    ck_assert(metric(&res, "attn_mass_recall") < 1.0);
    ck_assert(isnan(metric(&res, "logit_kl"))); /* no weights: no model run */
    run_result_free(&res);
    op_program_free(&prog);
    replay_close(r);
    /* a policy that reads the trace cannot run without one */
    snprintf(c->trace.source, sizeof c->trace.source, "none");
    ck_assert_int_eq(replay_open(c, &r, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "needs a trace"));
    /* unknown parameters are reported at their place */
    snprintf(c->trace.source, sizeof c->trace.source, "synth");
    snprintf(c->scenario_path, sizeof c->scenario_path, "sweep.yaml");
    c->policy.params[0] = kvp("heavy_ration", "0.2");
    ck_assert_int_eq(replay_open(c, &r, &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "sweep.yaml:7:3"));
    ck_assert_ptr_nonnull(strstr(e.msg, "heavy_ratio"));
    free(c);
}
END_TEST

/* A layer-local policy's prompt (policy_ops.layer_local: H2O, SnapKV, PyramidKV, MPCache with
 * either static eviction) observed in spans of positions layer by layer and KV head by KV head
 * gives the replay of one position at a time: the same kept counts and the same metrics, bit
 * for bit (stories260K's shape: two query heads per KV head). */
START_TEST(test_prompt_spans)
{
    static const char *const pols[][3] = {{"h2o", "prompt_rows", "21"}, /* spans of 8, 8, 5 */
                                          {"snapkv", "window", "13"},
                                          {"pyramidkv", "window", "13"},
                                          {"mpcache", "static", "threshold"},
                                          {"mpcache", "static", "topk"}};
    static const char *names[4] = {"attn_mass_recall", "topk_recall", "attn_out_rel_err",
                                   "kept_frac"};
    for (size_t pi = 0; pi < sizeof pols / sizeof pols[0]; pi++) {
        double m[2][4];
        uint32_t kept[2][20];
        for (int off = 0; off < 2; off++) {
            ck_assert(policy_find(pols[pi][0])->layer_local);
            run_cfg *c = calloc(1, sizeof *c);
            errbuf e;
            ck_assert_msg(model_load("stories260K", &c->model, &e) == MS_OK, "%s", e.msg);
            c->model.weights[0] = '\0';
            snprintf(c->trace.source, sizeof c->trace.source, "synth");
            snprintf(c->policy.name, sizeof c->policy.name, "%s", pols[pi][0]);
            c->policy.params[0] = kvp("metric_stride", "2");
            c->policy.params[1] = kvp(pols[pi][1], pols[pi][2]);
            c->policy.params[2] = kvp("prompt_rows", "21");
            c->policy.params[3] = kvp("capacity", "40"); /* SnapKV, PyramidKV: evict */
            int snap = strstr(pols[pi][0], "kv") != NULL;
            c->policy.n_params = !strcmp(pols[pi][1], "prompt_rows") ? 2 : snap ? 4 : 3;
            c->work.prompt_len = 90;
            c->work.decode_len = 6;
            c->seed = 3;
            replay_span_off = off;
            run_result res;
            drive(c, &res, kept[off], NULL);
            replay_span_off = 0;
            for (int i = 0; i < 4; i++) {
                m[off][i] = metric(&res, names[i]);
                ck_assert(!isnan(m[off][i]));
            }
            run_result_free(&res);
            free(c);
        }
        ck_assert_msg(!memcmp(kept[0], kept[1], sizeof kept[0]), "%s %s: kept counts", pols[pi][0],
                      pols[pi][2]);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(m[0][i] == m[1][i], "%s %s %s: %.17g vs %.17g", pols[pi][0], pols[pi][2],
                          names[i], m[0][i], m[1][i]);
    }
}
END_TEST

/* The full cache on a synthetic trace never generates it: its metrics (by construction) equal
 * what the replay measures for a policy that happens to keep everything. */
START_TEST(test_full_synthetic_by_construction)
{
    run_result a, b;
    for (int which = 0; which < 2; which++) {
        run_cfg *c = calloc(1, sizeof *c);
        errbuf e;
        ck_assert_msg(model_load("stories260K", &c->model, &e) == MS_OK, "%s", e.msg);
        c->model.weights[0] = '\0';
        snprintf(c->trace.source, sizeof c->trace.source, "synth");
        snprintf(c->policy.name, sizeof c->policy.name, "%s", which ? "streamingllm" : "full");
        c->policy.params[0] = kvp("metric_stride", "3");
        c->policy.params[1] = kvp("sink", "4");
        c->policy.params[2] = kvp("recent", "1000");
        c->policy.n_params = which ? 3 : 1;
        c->work.prompt_len = 90;
        c->work.decode_len = 10;
        c->seed = 5;
        drive(c, which ? &b : &a, NULL, NULL);
        free(c);
    }
    ck_assert_uint_eq(a.n_metric, b.n_metric);
    for (size_t i = 0; i < a.n_metric; i++) {
        ck_assert_str_eq(a.metric[i].name, b.metric[i].name);
        ck_assert_msg(fabs(a.metric[i].value - b.metric[i].value) < 1e-6, "%s: %.9g vs %.9g",
                      a.metric[i].name, a.metric[i].value, b.metric[i].value);
    }
    ck_assert(!isnan(metric(&a, "attn_out_wo_rel_err")));
    ck_assert_double_eq(metric(&a, "attn_mass_recall"), 1.0);
    run_result_free(&a);
    run_result_free(&b);
}
END_TEST

START_TEST(test_prompt_rows)
{
    /* prompt_rows = P reads every prompt row: identical to the exact default; a cap of 4 rows
     * changes H2O's scores (only the last prompt queries vote) but keeps its budget */
    double recall[3];
    const char *rows[3] = {"0", "48", "4"};
    for (int i = 0; i < 3; i++) {
        run_cfg *c = stories_cfg("h2o", 48, 8);
        c->policy.params[0] = kvp("prompt_rows", rows[i]);
        c->policy.params[1] = kvp("live", "0");
        c->policy.n_params = 2;
        run_result res;
        uint32_t kept[20];
        drive(c, &res, kept, NULL);
        ck_assert_uint_eq(kept[0], 8); /* int(0.1·48) heavy + 4 recent */
        recall[i] = metric(&res, "attn_mass_recall");
        run_result_free(&res);
        free(c);
    }
    ck_assert_double_eq(recall[0], recall[1]);
    ck_assert(recall[2] != recall[0]);
}
END_TEST

START_TEST(test_metric_definitions)
{
    /* row .5 .2 .2 .1 (last = current token), keep {0}: R = .5 + .1 = .6; top-2 = {0, 1}:
     * recall 1/2. V = 1, 0, 0, 0 (d = 1): o* = .5, ô = (.5/.6)·1 = .8333 → rel err .3333/.5.
     * W_o^h = [2; -1] (dim 2): after W_o the L1 ratio is the same (linear, same direction). */
    metrics m;
    ck_assert_int_eq(metrics_init(&m, 2, 8), MS_OK);
    float att[4] = {.5f, .2f, .2f, .1f}, V[4] = {1, 0, 0, 0}, wo[2] = {2, -1};
    uint8_t keep[3] = {1, 0, 0};
    double R = metrics_row(&m, att, keep, 4);
    ck_assert_double_eq_tol(R, 0.6, 1e-6);
    metrics_output(&m, att, keep, 4, R, V, 1, wo, 1, 2);
    ck_assert_double_eq_tol(m.topk, 0.5, 1e-12);
    ck_assert_double_eq_tol(m.err, (0.5 / 0.6 - 0.5) / 0.5, 1e-6);
    ck_assert_double_eq_tol(m.err_wo, (0.5 / 0.6 - 0.5) / 0.5, 1e-6);
    /* KL of [0, ln 2] logits vs [0, 0]: p = (1/3, 2/3), q = (1/2, 1/2) */
    float lf[2] = {0, (float)log(2.0)}, lp[2] = {0, 0};
    metrics_logits(&m, lf, lp, 2, 1);
    double kl = (1.0 / 3) * log((1.0 / 3) / 0.5) + (2.0 / 3) * log((2.0 / 3) / 0.5);
    ck_assert_double_eq_tol(m.kl, kl, 1e-6);
    ck_assert_double_eq_tol(m.top1, 0, 1e-12);
    ck_assert_double_eq_tol(m.nll_full, -log(2.0 / 3), 1e-6);
    metrics_free(&m);
}
END_TEST

/* The output error from the kept values, from the evicted ones, and in one call
 * (metrics_output) agree to float rounding, whichever set is the smaller: rows where a policy
 * keeps a few entries, about half, and all but a few. */
START_TEST(test_output_error_parts)
{
    enum { N = 97, D = 8, DIM = 6 };
    static float att[N], V[N * D], wo[DIM * D], Vs[N * D];
    uint8_t keep[N];
    uint64_t x = 12345;
    double sum = 0;
    for (int j = 0; j < N; j++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        att[j] = (float)((x >> 40) % 1000 + 1);
        sum += att[j];
    }
    for (int j = 0; j < N; j++)
        att[j] = (float)(att[j] / sum);
    for (int i = 0; i < N * D; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        V[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int i = 0; i < DIM * D; i++)
        wo[i] = (float)(((i * 37) % 11) - 5);
    static const int every[] = {9, 2, 1};
    for (size_t c = 0; c < sizeof every / sizeof every[0]; c++) {
        for (int j = 0; j + 1 < N; j++)
            keep[j] = every[c] == 1 ? j % 13 != 0 : j % every[c] == 0;
        metrics a, b[2];
        ck_assert_int_eq(metrics_init(&a, 10, N), MS_OK);
        double R = metrics_row(&a, att, keep, N);
        metrics_output(&a, att, keep, N, R, V, D, wo, D, DIM);
        double full[D], nf, yf;
        metrics_output_ref(att, N, V, D, wo, D, DIM, full, &nf, &yf);
        for (int ev = 0; ev < 2; ev++) {
            ck_assert_int_eq(metrics_init(&b[ev], 10, N), MS_OK);
            int n = 0;
            for (int j = 0; j < N; j++)
                if ((j + 1 == N || keep[j]) != ev)
                    memcpy(Vs + (size_t)n++ * D, V + (size_t)j * D, sizeof(float) * D);
            metrics_output_kept(&b[ev], att, keep, N, R, Vs, ev, D, wo, D, DIM, full, nf, yf);
            ck_assert_uint_eq(b[ev].n_err, 1);
            ck_assert_uint_eq(b[ev].n_err_wo, 1);
            ck_assert_double_eq_tol(b[ev].err, a.err, 1e-12 * a.err);
            ck_assert_double_eq_tol(b[ev].err_wo, a.err_wo, 1e-12 * a.err_wo);
            metrics_free(&b[ev]);
        }
        ck_assert(a.err > 0);
        metrics_free(&a);
    }
}
END_TEST

/* kv_budget F: the kept fraction each shipped policy reaches on stories260K over real text
 * (P = 256), for F = 5, 10, 20 %. At the first decode step (T = P) it is F within the policy's
 * granularity, in entries of the P-entry cache: rounding to whole entries (0.5); pyramidkv's
 * integer per-layer steps (up to 4 entries measured here); Quest's whole pages (page / 2 = 8);
 * MPCache's 16-clusters, the forced first and last among them (2 · 16). Over D decode steps a
 * policy fixed at the prompt drifts by at most (D − 1) / P (H2O and TOVA keep their size as
 * the cache grows, the SnapKV family keeps every generated entry), and Quest may pick the page
 * being filled (one page less). full and comet attend every entry: F = 1 only. */
START_TEST(test_kv_budget)
{
    static const struct {
        const char *name;
        double grain;
    } shipped[] = {{"streamingllm", 0.5}, {"h2o", 0.5},       {"tova", 0.5},  {"snapkv", 0.5},
                   {"criticalkv", 0.5},   {"pyramidkv", 4.0}, {"quest", 8.0}, {"mpcache", 32.0},
                   {"full", 0},           {"comet", 0}};
    const uint32_t P = 256, D = 8;
    const double fs[3] = {0.05, 0.1, 0.2};
    for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
        int dense = shipped[i].grain == 0;
        for (int fi = 0; fi < (dense ? 1 : 3); fi++)
            for (int all_steps = 0; all_steps < 2; all_steps++) {
                double f = dense ? 1.0 : fs[fi];
                char fv[16], sv[16];
                snprintf(fv, sizeof fv, "%g", f);
                snprintf(sv, sizeof sv, "%u", all_steps ? 1 : D);
                run_cfg *c = stories_cfg(shipped[i].name, P, D);
                c->policy.params[c->policy.n_params++] = kvp("kv_budget", fv);
                c->policy.params[c->policy.n_params++] = kvp("metric_stride", sv);
                c->policy.params[c->policy.n_params++] = kvp("live", "0");
                if (!strcmp(shipped[i].name, "snapkv") || !strcmp(shipped[i].name, "criticalkv"))
                    c->policy.params[c->policy.n_params++] = kvp("window", "8");
                run_result res;
                drive(c, &res, NULL, NULL);
                double kf = metric(&res, "kept_frac");
                double tol = shipped[i].grain / P + 1e-9;
                if (all_steps)
                    tol += (double)(D - 1) / P + (!strcmp(shipped[i].name, "quest") ? 16.0 / P : 0);
                ck_assert_msg(fabs(kf - f) <= tol, "%s at kv_budget %g (%s): kept_frac %.4f",
                              shipped[i].name, f, all_steps ? "every step" : "first step", kf);
                run_result_free(&res);
                free(c);
            }
    }
}
END_TEST

Suite *replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = th_case(s, "core", 60);
    TH_TESTS(tc, test_metric_definitions, test_output_error_parts, test_full_is_exact,
             test_streaming_degrades, test_policies_on_stories, test_synthetic_and_stride,
             test_full_synthetic_by_construction, test_prompt_rows, test_prompt_spans,
             test_kv_budget, test_default_measured_steps);
    return s;
}
