/* check_compose.c — policies composed from blocks (sim/policy/compose.h): each shipped
 * composition (scenarios/policies/<name>.yaml) keeps the same entries as the hand-written
 * policy on a stories260K trace, at every decode step, layer and KV head, for several budgets;
 * a scenario run gives the same metrics and the same policy bytes and rounds; a block no
 * shipped file uses keeps what its definition says; and a bad file fails at its
 * file:line:col with exit 2 and no database. */
#include <check.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "polfix.h"
#include "stories.h"
#include "testdir.h"
#include "sim/policy/compose.h"
#include "sim/policy/policy.h"
#include "sim/trace/trace.h"

TESTDIR("check_compose")

static const char *tpath(const char *name) { return testdir_path(&td, name); }

/* A hand-written policy and its composition, with their parameters ("k=v k=v", "" none). */
typedef struct pair {
    const char *name, *params;
    const char *file, *cparams;
} pair;

static const pair pairs[] = {
    {"streamingllm", "sink=4 recent=12", "streamingllm.yaml", "sinks=4 recent=12"},
    {"streamingllm", "sink=2 recent=30", "streamingllm.yaml", "sinks=2 recent=30"},
    {"streamingllm", "kv_budget=0.1", "streamingllm.yaml", "kv_budget=0.1"},
    {"streamingllm", "kv_budget=0.25", "streamingllm.yaml", "kv_budget=0.25"},
    {"h2o", "", "h2o.yaml", ""},
    {"h2o", "heavy=6 recent=3", "h2o.yaml", "topk=6 recent=3"},
    {"h2o", "heavy_ratio=0.2 recent_ratio=0.05", "h2o.yaml", "topk_ratio=0.2 recent_ratio=0.05"},
    {"h2o", "kv_budget=0.15", "h2o.yaml", "kv_budget=0.15"},
    {"snapkv", "window=8 capacity=20", "snapkv.yaml", "window=8 recent=8 capacity=20"},
    {"snapkv", "window=4 kernel=3 pooling=avgpool capacity=16", "snapkv.yaml",
     "window=4 recent=4 kernel=3 pooling=avgpool capacity=16"},
    {"snapkv", "window=8 kv_budget=0.3", "snapkv.yaml", "window=8 recent=8 kv_budget=0.3"},
    {"pyramidkv", "capacity=24", "pyramidkv.yaml", "capacity=24"},
    {"pyramidkv", "window=4 capacity=14 beta=4", "pyramidkv.yaml",
     "window=4 recent=4 capacity=14 beta=4"},
    {"pyramidkv", "kv_budget=0.4", "pyramidkv.yaml", "kv_budget=0.4"},
    {"tova", "cache_size=20", "tova.yaml", "topk=20"},
    {"tova", "cache_size=7", "tova.yaml", "topk=7"},
    {"tova", "kv_budget=0.3", "tova.yaml", "kv_budget=0.3"},
    {"quest", "page=4 budget=16", "quest.yaml", "page=4 topk=16"},
    {"quest", "page=8 budget=8 min_pages=2 skip_layers=1", "quest.yaml",
     "page=8 topk=8 min_units=2 dense_layers=1"},
    {"quest", "page=4 kv_budget=0.2", "quest.yaml", "page=4 kv_budget=0.2"},
};

#define P_LEN 40
#define T_LEN 64

/* Drives the two policies over the trace in lockstep as the replay does (observe every
 * position and layer, prefill at the prompt's end, select at every decode step, the rows then
 * renormalized over the kept entries) and asserts the same keep mask everywhere; returns the
 * decode masks compared that keep fewer than all entries. */
static size_t lockstep(const pair *c)
{
    errbuf e;
    trace *t;
    ck_assert_msg(trace_open(polfix_recorded_trace(&td), &t, &e) == MS_OK, "%s", e.msg);
    const trace_shape *sh = trace_get_shape(t);
    const uint32_t L = sh->n_layers, H = sh->n_heads, Hkv = sh->n_kv_heads, d = sh->head_dim;
    ck_assert_uint_ge(sh->n_tokens, T_LEN);
    policy_env env = {L, H, Hkv, d, sh->dim, sh->ffn_dim, P_LEN, T_LEN, NULL, NULL, NULL, 0, NULL};
    char path[600];
    snprintf(path, sizeof path, "%s", th_data_path("scenarios/policies"));
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", c->file);
    const policy_ops *cp = NULL;
    ck_assert_msg(policy_compose_load(path, &cp, &e) == MS_OK, "%s", e.msg);
    ck_assert_ptr_eq(policy_find(cp->name), cp);
    ck_assert_ptr_nonnull(policy_schema(cp));
    polfix_inst a, b;
    polfix_open(&a, policy_find(c->name), c->params, &env);
    polfix_open(&b, cp, c->cparams, &env);
    uint8_t *ka = malloc((size_t)Hkv * T_LEN), *kb = malloc((size_t)Hkv * T_LEN);
    float *k = malloc((size_t)Hkv * d * sizeof *k), *v = malloc((size_t)Hkv * d * sizeof *v);
    float *att = malloc((size_t)H * (T_LEN + 1) * sizeof *att);
    size_t sparse = 0;
    for (uint32_t pos = 0; pos < T_LEN; pos++) {
        ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
        if (pos == P_LEN) {
            ck_assert(!a.p->prefill || a.p->prefill(a.st, &e) == MS_OK);
            ck_assert(!b.p->prefill || b.p->prefill(b.st, &e) == MS_OK);
        }
        for (uint32_t l = 0; l < L; l++) {
            const float *q = trace_q(t, l);
            memcpy(att, trace_att(t, l), (size_t)H * (pos + 1) * sizeof *att);
            if (pos >= P_LEN) {
                ck_assert_msg(a.p->select(a.st, l, pos, q, ka, &e) == MS_OK, "%s", e.msg);
                ck_assert_msg(b.p->select(b.st, l, pos, q, kb, &e) == MS_OK, "%s", e.msg);
                for (uint32_t g = 0; g < Hkv; g++) {
                    uint32_t kept = 0;
                    for (uint32_t j = 0; j < pos; j++) {
                        ck_assert_msg(ka[(size_t)g * pos + j] == kb[(size_t)g * pos + j],
                                      "%s %s vs %s %s: layer %u head %u pos %u entry %u: %d vs %d",
                                      c->name, c->params, c->file, c->cparams, l, g, pos, j,
                                      ka[(size_t)g * pos + j], kb[(size_t)g * pos + j]);
                        kept += ka[(size_t)g * pos + j];
                    }
                    sparse += kept < pos;
                    /* the rows of the group renormalized over the kept entries and pos */
                    for (uint32_t h = g * (H / Hkv); h < (g + 1) * (H / Hkv); h++) {
                        float *row = att + (size_t)h * (pos + 1);
                        double s = row[pos];
                        for (uint32_t j = 0; j < pos; j++)
                            s += ka[(size_t)g * pos + j] ? row[j] : 0;
                        for (uint32_t j = 0; j < pos; j++)
                            row[j] = ka[(size_t)g * pos + j] ? (float)(row[j] / s) : 0;
                        row[pos] = (float)(row[pos] / s);
                    }
                }
            }
            ck_assert_int_eq(trace_kv(t, l, pos, k, v), MS_OK);
            policy_obs o = {.layer = l, .pos = pos, .q = q, .k = k, .v = v, .att = att};
            ck_assert(!a.p->observe || a.p->observe(a.st, &o, &e) == MS_OK);
            ck_assert(!b.p->observe || b.p->observe(b.st, &o, &e) == MS_OK);
        }
    }
    a.p->fini(a.st);
    b.p->fini(b.st);
    trace_close(t);
    free(ka);
    free(kb);
    free(k);
    free(v);
    free(att);
    return sparse;
}

START_TEST(test_kept_equal)
{
    const pair *c = &pairs[_i];
    size_t sparse = lockstep(c);
    ck_assert_msg(sparse > 0, "%s %s: no decode step selected anything", c->name, c->params);
}
END_TEST

/* ---- a scenario run: metrics and costs ---------------------------------------------------- */

START_TEST(test_scenario_equal)
{
    char yaml[8192], line[512];
    snprintf(yaml, sizeof yaml,
             "format: 1\nname: cmp\nprotocol: semi2k\nnetwork: lan\ncases:\n"
             "  - model: stories260K\n"
             "    workload: {prompt_len: %d, decode_len: %d}\n"
             "    trace: {source: record, text: %s}\n"
             "    policies:\n",
             P_LEN, T_LEN - P_LEN, th_data_path("tests/data/tinystories_sample.txt"));
    for (int i = 0; i < TH_N(pairs); i++) {
        char head[600];
        snprintf(head, sizeof head, "name: %s", pairs[i].name);
        polfix_entry(line, sizeof line, head, pairs[i].params);
        strcat(yaml, line);
        snprintf(head, sizeof head, "compose: %s/%s", th_data_path("scenarios/policies"),
                 pairs[i].file);
        polfix_entry(line, sizeof line, head, pairs[i].cparams);
        strcat(yaml, line);
    }
    char *scn = strdup(th_file(&td, "cmp.yaml", yaml));
    char *db = strdup(tpath("cmp.db"));
    polfix_run_equal(&td, scn, db, TH_N(pairs), 0);
    free(scn);
    free(db);
}
END_TEST

/* The shipped scenarios/compose-blocks.yaml: each pair equal. */
START_TEST(test_shipped_scenario)
{
    char *db = strdup(tpath("blocks.db"));
    polfix_run_equal(&td, th_data_path("scenarios/compose-blocks.yaml"), db, 7, 0);
    free(db);
}
END_TEST

/* The keynorm plug-in (scenarios/plugins/keynorm.c, built here with the public header alone)
 * and scenarios/policies/keynorm.yaml: the same metrics, bytes and rounds. */
START_TEST(test_keynorm_plugin)
{
    char cmd[2048], out[4096];
    char *so = strdup(tpath("keynorm.so"));
    snprintf(cmd, sizeof cmd, "${CC:-cc} -std=c11 -fPIC -shared -I'%s/include' '%s' -o '%s' -lm",
             th_data(), th_data_path("scenarios/plugins/keynorm.c"), so);
    ck_assert_msg(th_sh(cmd, out, sizeof out) == 0, "%s\n%s", cmd, out);
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "format: 1\nname: kn\nprotocol: semi2k\nnetwork: lan\ncases:\n"
             "  - model: stories260K\n"
             "    workload: {prompt_len: %d, decode_len: %d}\n"
             "    trace: {source: record, text: %s}\n"
             "    policies:\n"
             "      - {plugin: keynorm.so, sink: 4, keep: 12, metric_stride: 1}\n"
             "      - {compose: %s, sinks: 4, topk: 12, metric_stride: 1}\n"
             "      - {plugin: keynorm.so, sink: 2, keep: 20, metric_stride: 1}\n"
             "      - {compose: %s, sinks: 2, topk: 20, metric_stride: 1}\n",
             P_LEN, T_LEN - P_LEN, th_data_path("tests/data/tinystories_sample.txt"),
             th_data_path("scenarios/policies/keynorm.yaml"),
             th_data_path("scenarios/policies/keynorm.yaml"));
    char *scn = strdup(th_file(&td, "kn.yaml", yaml));
    char *db = strdup(tpath("kn.db"));
    polfix_run_equal(&td, scn, db, 2, 0);
    free(so);
    free(scn);
    free(db);
}
END_TEST

/* ---- blocks no shipped file uses, against their definitions ------------------------------ */

enum { B_TOPK, B_THR, B_EVERY, B_SHARE, B_PAGE, B_LAYERS };

/* A composition of sinks 4, a recent window of 4 and the squared key norm, its selection. */
typedef struct blk {
    const char *text;
    int mode;
} blk;

static const blk blks[] = {
    {"name: kn_topk\nsinks: 4\nrecent: 4\nscore: key_norm\nselect: {topk: 10}\n", B_TOPK},
    {"name: kn_thr\nsinks: 4\nrecent: 4\nscore: key_norm\nselect: {threshold: 0}\n", B_THR},
    {"name: kn_every\nsinks: 4\nrecent: 4\nscore: key_norm\nwhen: {every: 4}\n"
     "select: {topk: 10}\n",
     B_EVERY},
    {"name: kn_share\nsinks: 4\nrecent: 4\nscore: key_norm\nshare: layer\nselect: {topk: 10}\n",
     B_SHARE},
    {"name: kn_page\nsinks: 4\nrecent: 4\nscore: key_norm\ngranularity: {page: 4}\n"
     "select: {topk: 12}\n",
     B_PAGE},
    {"name: kn_layers\nsinks: 4\nrecent: 4\nscore: key_norm\nshare: {layers: 2}\n"
     "select: {topk: 10}\n",
     B_LAYERS},
};

#define BK 10

/* The entries of [4, end − 4) of largest score sc (ties: the earlier), k of them, into row
 * (row[0..end) preset to the sinks and the window). */
static void want_top(const float *sc, uint32_t end, uint32_t k, uint8_t *row)
{
    for (uint32_t n = 0; n < k; n++) {
        int best = -1;
        for (uint32_t j = 4; j + 4 < end; j++)
            if (!row[j] && (best < 0 || sc[j] > sc[best]))
                best = (int)j;
        if (best < 0)
            return;
        row[best] = 1;
    }
}

static void preset(uint8_t *row, uint32_t end)
{
    memset(row, 0, end);
    for (uint32_t j = 0; j < end; j++)
        row[j] = j < 4 || j + 4 >= end;
}

/* The kept row of a head whose squared key norms are sc (sum: every head's summed), at pos. */
static void want_row(int mode, const float *sc, uint32_t pos, double thr, uint8_t *row)
{
    uint32_t s0 = mode == B_EVERY ? P_LEN + (pos - P_LEN) / 4 * 4 : pos;
    preset(row, s0);
    if (mode == B_THR) {
        for (uint32_t j = 4; j + 4 < pos; j++)
            row[j] = sc[j] >= thr;
    } else if (mode == B_PAGE) { /* pages of 4 over [4, pos − 4), scored by their sums */
        float ps[T_LEN / 4 + 1];
        uint32_t c1 = pos - 4, np = (c1 + 3) / 4;
        uint8_t in[T_LEN / 4 + 1] = {0};
        for (uint32_t u = 1; u < np; u++) {
            ps[u] = 0;
            for (uint32_t j = u * 4; j < u * 4 + 4 && j < c1; j++)
                ps[u] += sc[j];
        }
        for (uint32_t n = 0; n < 3 && n + 1 < np; n++) {
            int best = -1;
            for (uint32_t u = 1; u < np; u++)
                if (!in[u] && (best < 0 || ps[u] > ps[best]))
                    best = (int)u;
            in[best] = 1;
        }
        for (uint32_t j = 4; j < c1; j++)
            row[j] = in[j / 4];
    } else {
        want_top(sc, s0, BK, row);
    }
    memset(row + s0, 1, pos - s0);
}

START_TEST(test_blocks)
{
    const blk *c = &blks[_i];
    errbuf e;
    trace *t;
    ck_assert_msg(trace_open(polfix_recorded_trace(&td), &t, &e) == MS_OK, "%s", e.msg);
    const trace_shape *sh = trace_get_shape(t);
    const uint32_t L = sh->n_layers, H = sh->n_heads, Hkv = sh->n_kv_heads, d = sh->head_dim;
    policy_env env = {L, H, Hkv, d, sh->dim, sh->ffn_dim, P_LEN, T_LEN, NULL, NULL, NULL, 0, NULL};
    const policy_ops *p = NULL;
    ck_assert_msg(policy_compose_load(th_file(&td, "blk.yaml", c->text), &p, &e) == MS_OK, "%s",
                  e.msg);
    float *norm = calloc((size_t)L * Hkv * T_LEN, sizeof *norm), *sum = calloc(T_LEN, 4);
    float *k = malloc((size_t)Hkv * d * sizeof *k);
    /* the threshold: the mean squared norm of the prompt's keys (about half of them pass) */
    double mean = 0;
    for (uint32_t pos = 0; pos < T_LEN; pos++)
        for (uint32_t l = 0; l < L; l++) {
            ck_assert_int_eq(trace_kv(t, l, pos, k, NULL), MS_OK);
            for (uint32_t g = 0; g < Hkv; g++) {
                double sq = 0;
                for (uint32_t i = 0; i < d; i++)
                    sq += (double)k[g * d + i] * k[g * d + i];
                norm[((size_t)l * Hkv + g) * T_LEN + pos] = (float)sq;
                mean += pos < P_LEN ? sq / ((double)P_LEN * L * Hkv) : 0;
            }
        }
    char thr[64];
    snprintf(thr, sizeof thr, "threshold=%.9g", mean);
    polfix_inst x;
    polfix_open(&x, p, c->mode == B_THR ? thr : "", &env);
    uint8_t *keep = malloc((size_t)Hkv * T_LEN), *want = malloc(T_LEN);
    size_t differs = 0;
    for (uint32_t pos = 0; pos < T_LEN; pos++) {
        if (pos == P_LEN)
            ck_assert_int_eq(p->prefill(x.st, &e), MS_OK);
        for (uint32_t l = 0; l < L; l++) {
            if (pos >= P_LEN) {
                ck_assert_msg(p->select(x.st, l, pos, NULL, keep, &e) == MS_OK, "%s", e.msg);
                for (uint32_t j = 0; j < pos; j++) { /* every head's norms summed in order */
                    sum[j] = norm[((size_t)l * Hkv) * T_LEN + j];
                    for (uint32_t g = 1; g < Hkv; g++)
                        sum[j] += norm[((size_t)l * Hkv + g) * T_LEN + j];
                }
                uint32_t lead = c->mode == B_LAYERS ? l - l % 2 : l; /* pairs of layers */
                for (uint32_t g = 0; g < Hkv; g++) {
                    const float *sc =
                        c->mode == B_SHARE ? sum : norm + ((size_t)lead * Hkv + g) * T_LEN;
                    want_row(c->mode, sc, pos, mean, want);
                    for (uint32_t j = 0; j < pos; j++)
                        ck_assert_msg(keep[(size_t)g * pos + j] == want[j],
                                      "%s layer %u head %u pos %u: entry %u kept %d, expected %d",
                                      c->text, l, g, pos, j, keep[(size_t)g * pos + j], want[j]);
                    for (uint32_t j = 4; j + 4 < pos; j++)
                        differs += want[j] != (j < 4 + BK);
                }
            }
            ck_assert_int_eq(trace_kv(t, l, pos, k, NULL), MS_OK);
            policy_obs o = {.layer = l, .pos = pos, .k = k};
            ck_assert_int_eq(p->observe(x.st, &o, &e), MS_OK);
        }
    }
    ck_assert_uint_gt(differs, 0); /* the scores chose, not the positions */
    /* the derived ops of decode step 8 (an every-4 step selects too): the new key's square,
     * the selection, the gather (a threshold's: every candidate's row, a view, no count
     * opened: compose_thr.c) */
    op_program prg;
    op_program_init(&prg);
    uint32_t kept[8] = {18, 18, 18, 18, 18, 18, 18, 18};
    ck_assert_msg(p->emit_cost(x.st, PHASE_DECODE, 1, 48, kept, &prg, &e) == MS_OK, "%s", e.msg);
    int square = 0, sel = 0, gather = 0, reveal = 0;
    for (size_t i = 0; i < prg.n_ops; i++) {
        square += prg.ops[i].kind == OP_SQUARE;
        sel += prg.ops[i].kind == OP_TOPK || prg.ops[i].kind == OP_LT;
        gather += prg.ops[i].kind == OP_GATHER;
        reveal += prg.ops[i].kind == OP_REVEAL;
    }
    ck_assert_int_eq(square, c->mode != B_LAYERS); /* layer 1 follows layer 0: a gather only */
    ck_assert_int_eq(sel, c->mode != B_LAYERS);
    ck_assert_int_eq(gather, c->mode != B_THR);
    ck_assert_int_eq(reveal, 0);
    op_program_free(&prg);
    p->fini(x.st);
    trace_close(t);
    free(norm);
    free(sum);
    free(k);
    free(keep);
    free(want);
}
END_TEST

/* Page bounds evicting for good (sinks 2, a window of 4, the top 8 entries: 2 pages of 4): the
 * prompt's decision scores the prompt's candidate pages with the prompt's last query, each
 * page by Σ over the KV group's query heads and channels of max(q·max, q·min) of its keys
 * (every entry of the page: the sinks' too), and keeps the 2 best pages' candidates (it
 * crashed: the prompt's decision had no query). Without that query observed, the prefill
 * fails with a clear error; `validate` replays a threshold's kept sets. */
START_TEST(test_bounds_permanent)
{
    errbuf e;
    trace *t;
    ck_assert_msg(trace_open(polfix_recorded_trace(&td), &t, &e) == MS_OK, "%s", e.msg);
    const trace_shape *sh = trace_get_shape(t);
    const uint32_t L = sh->n_layers, H = sh->n_heads, Hkv = sh->n_kv_heads, d = sh->head_dim;
    const uint32_t G = H / Hkv, npg = P_LEN / 4;
    policy_env env = {L, H, Hkv, d, sh->dim, sh->ffn_dim, P_LEN, T_LEN, NULL, NULL, NULL, 0, NULL};
    const policy_ops *p = NULL;
    ck_assert_msg(policy_compose_load(th_file(&td, "bperm.yaml",
                                              "name: bperm_t\nsinks: 2\nrecent: 4\n"
                                              "score: page_bounds\ngranularity: {page: 4}\n"
                                              "evict: permanent\nselect: {topk: 8}\n"),
                                      &p, &e) == MS_OK,
                  "%s", e.msg);
    float *keys = malloc((size_t)L * P_LEN * Hkv * d * sizeof *keys);
    float *q = malloc((size_t)H * d * sizeof *q);
    uint8_t *keep = malloc((size_t)Hkv * P_LEN);
    for (uint32_t pos = 0; pos < P_LEN; pos++)
        for (uint32_t l = 0; l < L; l++)
            ck_assert_int_eq(trace_kv(t, l, pos, keys + ((size_t)l * P_LEN + pos) * Hkv * d, NULL),
                             MS_OK);
    for (int with_q = 0; with_q < 2; with_q++) {
        polfix_inst x;
        polfix_open(&x, p, "", &env);
        for (uint32_t pos = 0; pos < P_LEN; pos++)
            for (uint32_t l = 0; l < L; l++) {
                for (uint32_t i = 0; i < H * d; i++) /* a query of its own per layer */
                    q[i] = (float)sin(0.37 * i + 1.3 * l + 0.05 * pos);
                policy_obs o = {.layer = l,
                                .pos = pos,
                                .k = keys + ((size_t)l * P_LEN + pos) * Hkv * d,
                                .q = with_q ? q : NULL};
                ck_assert_int_eq(p->observe(x.st, &o, &e), MS_OK);
            }
        if (!with_q) {
            ck_assert_int_ne(p->prefill(x.st, &e), MS_OK);
            ck_assert_msg(strstr(e.msg, "prompt's last query"), "%s", e.msg);
            p->fini(x.st);
            continue;
        }
        ck_assert_msg(p->prefill(x.st, &e) == MS_OK, "%s", e.msg);
        uint32_t firsts = 0;
        for (uint32_t l = 0; l < L; l++) {
            for (uint32_t i = 0; i < H * d; i++) /* the last prompt query this layer saw */
                q[i] = (float)sin(0.37 * i + 1.3 * l + 0.05 * (P_LEN - 1));
            ck_assert_msg(p->select(x.st, l, P_LEN, NULL, keep, &e) == MS_OK, "%s", e.msg);
            for (uint32_t g = 0; g < Hkv; g++) {
                float sc[P_LEN / 4];
                for (uint32_t u = 0; u < npg; u++) {
                    sc[u] = 0;
                    for (uint32_t h = g * G; h < (g + 1) * G; h++)
                        for (uint32_t i = 0; i < d; i++) {
                            float mx = -INFINITY, mn = INFINITY;
                            for (uint32_t j = 4 * u; j < 4 * u + 4; j++) {
                                float kv = keys[(((size_t)l * P_LEN + j) * Hkv + g) * d + i];
                                mx = kv > mx ? kv : mx;
                                mn = kv < mn ? kv : mn;
                            }
                            float a = q[h * d + i] * mx, b = q[h * d + i] * mn;
                            sc[u] += a > b ? a : b;
                        }
                }
                /* candidates [2, P − 4): pages 0 to npg − 2; the best two (ties: the earlier) */
                int b0 = -1, b1 = -1;
                for (int u = 0; u < (int)npg - 1; u++)
                    if (b0 < 0 || sc[u] > sc[b0])
                        b0 = u;
                for (int u = 0; u < (int)npg - 1; u++)
                    if (u != b0 && (b1 < 0 || sc[u] > sc[b1]))
                        b1 = u;
                firsts += b0 == 0 || b1 == 0;
                for (uint32_t j = 0; j < P_LEN; j++) {
                    int want = j < 2 || j >= P_LEN - 4 || (int)j / 4 == b0 || (int)j / 4 == b1;
                    ck_assert_msg(keep[(size_t)g * P_LEN + j] == want,
                                  "layer %u head %u: entry %u kept %d, expected %d (pages %d, %d)",
                                  l, g, j, keep[(size_t)g * P_LEN + j], want, b0, b1);
                }
            }
        }
        ck_assert_uint_lt(firsts, L * Hkv); /* the query chose, not the positions */
        p->fini(x.st);
    }
    /* a run: validate replays its kept sets (NOTE), a threshold's too */
    char out[16384];
    char *thr = strdup(th_file(&td, "bpermt.yaml",
                               "name: bpermt_t\nsinks: 2\nrecent: 4\nscore: page_bounds\n"
                               "granularity: {page: 4}\nevict: permanent\n"
                               "select: {threshold: 0.5}\n"));
    th_cli_expect(out, sizeof out, 0, "NOTE: bpermt_t has no selection on shares",
                  "validate --model stories260K -p semi2k --accuracy 12 --prompt 8 --policy '%s' "
                  "--text '%s'",
                  thr, th_data_path("tests/data/tinystories_sample.txt"));
    ck_assert_msg(strstr(out, "equal the prediction: yes"), "%s", out);
    free(thr);
    trace_close(t);
    free(keys);
    free(q);
    free(keep);
}
END_TEST

/* Random scores evicting for good (2 sinks, a window of 4, the top 6: a 12-entry cache) observe
 * nothing, so their evictions are made when a step selects: every decode step keeps 12 of its
 * cached entries, each kept one of the step before or the entry it added, none returning once
 * dropped (before, the prompt's selection was the only one: the cache grew by an entry a step).
 * Its kept set is a public function of positions: `policy check` has nothing to check (it said
 * "cost declared", and under `kv_budget: {recent: rest}` its sinks and window differed from the
 * old select(): "MISMATCH"), as `validate` lays it out by public indices. */
START_TEST(test_random_permanent)
{
    errbuf e;
    const uint32_t L = 2, Hkv = 2, T = 30, P = 16;
    policy_env env = {L, 4, Hkv, 8, 32, 64, P, T, NULL, NULL, NULL, 0, NULL};
    const policy_ops *p = NULL;
    ck_assert_msg(policy_compose_load(th_file(&td, "rndperm.yaml",
                                              "name: rndperm_t\nsinks: 2\nrecent: 4\n"
                                              "score: {random: {seed: 3}}\nevict: permanent\n"
                                              "select: {topk: 6}\n"),
                                      &p, &e) == MS_OK,
                  "%s", e.msg);
    ck_assert_ptr_null(p->observe);
    polfix_inst x;
    polfix_open(&x, p, "", &env);
    ck_assert_int_eq(p->prefill(x.st, &e), MS_OK);
    uint8_t keep[2 * 30], prev[2 * 30];
    for (uint32_t pos = P; pos < T; pos++)
        for (uint32_t l = 0; l < L; l++) {
            ck_assert_msg(p->select(x.st, l, pos, NULL, keep, &e) == MS_OK, "%s", e.msg);
            for (uint32_t g = 0; g < Hkv; g++) {
                const uint8_t *row = keep + (size_t)g * pos;
                uint32_t n = 0;
                for (uint32_t j = 0; j < pos; j++) {
                    n += row[j];
                    if (j < 2 || j + 4 >= pos) /* the sinks and the window */
                        ck_assert(row[j]);
                    if (pos > P && l == 1 && j + 1 < pos && row[j]) /* kept before */
                        ck_assert_msg(prev[(size_t)g * (pos - 1) + j],
                                      "head %u, step %u: entry %u returned", g, pos, j);
                }
                ck_assert_msg(n == 12, "layer %u head %u, step %u: %u kept", l, g, pos, n);
            }
            if (l == 1)
                memcpy(prev, keep, (size_t)Hkv * pos);
        }
    p->fini(x.st);
    char out[8192];
    char *rest = strdup(th_file(&td, "rndrest.yaml",
                                "name: rndrest_t\nsinks: 2\nrecent: 4\n"
                                "score: {random: {seed: 3}}\nevict: permanent\n"
                                "kv_budget: {recent: rest}\nselect: {topk: 6}\n"));
    th_cli_expect(out, sizeof out, 0,
                  "rndrest_t: nothing to check (its kept set is a public "
                  "function of positions; it observes nothing)",
                  "policy check '%s' --prompt 16 --param kv_budget=0.5", rest);
    free(rest);
    char *own = strdup(testdir_path(&td, "rndperm.yaml"));
    th_cli_expect(out, sizeof out, 0, "rndperm_t: nothing to check",
                  "policy check '%s' --prompt 16", own);
    free(own);
}
END_TEST

/* ---- bad files ---------------------------------------------------------------------------- */

static const th_bad bad_files[] = {
    {"name: b1\nscore: attention\n", ":2:8: error: ", "needs a 'select' block", NULL},
    {"name: b2\nscore: {window_attention: {window: 8}}\nselect: {topk: 4}\n",
     ":2:8: error: ", "selects once", NULL},
    {"name: b3\nscore: page_bounds\nselect: {topk: 4}\n", ":2:8: error: ", "granularity page",
     NULL},
    {"name: b4\nscore: keynorm\nselect: {topk: 4}\n", ":2:8: error: ", "not a known score",
     "key_norm"},
    {"name: b5\nrecent: 4\nwindow: 8\n", ":3:1: error: ", "unknown key 'window'", "keys:"},
    {"name: b6\nrecent: -1\n", ":2:9: error: ", "'recent' = '-1'", NULL},
    {"name: h2o\nrecent: 4\n", ":1:7: error: ", "'h2o' is taken", NULL},
    {"name: b8\nscore: attention\nselect: {topk: 4, threshold: 1}\n",
     ":3:9: error: ", "one of 'topk' and 'threshold'", NULL},
    {"name: b9\nwhen: once\nevict: permanent\nscore: attention\nselect: {topk: 4}\n",
     ":3:8: error: ", "every step", NULL},
    {"recent: 4\n", ":1:1: error: ", "missing required key 'name'", NULL},
    {"name: b11\nrecent: [4\n", ":", "error: ", NULL},
    {"name: b15\nscore: attention\nevict: permanent\nselect: {topk: 4}\nshare: {layers: 2}\n",
     ":5:17: error: ", "share no selection", NULL},
    {"name: b12\nsummary: [a, b]\n", ":2:10: error: ", "'summary' must be text", NULL},
    {"name: b13\ngranularity: {page: 0}\n", ":2:21: error: ", "'page' = '0'", NULL},
    {"name: b14\nlayers: {pyramid: {beta: 4}}\nscore: attention\nselect: {topk: 4}\n",
     ":2:19: error: ", "spreads a capacity", NULL},
};

START_TEST(test_bad_file)
{
    const th_bad *c = &bad_files[_i];
    char *comp = strdup(th_file(&td, "comp.yaml", c->text));
    char yaml[2048];
    polfix_scenario(yaml, sizeof yaml, "compose: comp.yaml");
    polfix_run_refused(&td, yaml, comp, c, _i);
    free(comp);
}
END_TEST

/* `validate --policy FILE.yaml`: the composition inside MPC (h2o.yaml: H2O's secure session),
 * every op's bytes and rounds as predicted; a bad file: its line:col, exit 2. */
START_TEST(test_validate)
{
    char out[16384];
    th_cli_expect(out, sizeof out, 0, "bytes and rounds of every op of the 5 steps equal",
                  "validate --model stories260K --accuracy 12 --prompt 8 --protocol semi2k "
                  "--policy '%s' --policy-param topk=3 --policy-param recent=2 --text '%s'",
                  th_data_path("scenarios/policies/h2o.yaml"),
                  th_data_path("tests/data/tinystories_sample.txt"));
    ck_assert_msg(strstr(out, "under h2o_blocks"), "%s", out);
    char *bad = strdup(th_file(&td, "bad.yaml", "name: vb\nscore: attention\n"));
    th_cli_expect(out, sizeof out, 2, ":2:8: error: a score needs a 'select' block",
                  "validate --model stories260K --accuracy 12 --prompt 8 --policy '%s'", bad);
    free(bad);
}
END_TEST

Suite *compose_suite(void)
{
    Suite *s = suite_create("compose");
    TCase *tc = th_case(s, "equal", 120);
    TESTDIR_USE(tc);
    TH_LOOPS(tc, TH_N(pairs), test_kept_equal);
    TH_TESTS(tc, test_scenario_equal, test_keynorm_plugin, test_shipped_scenario);
    tc = th_case(s, "blocks", 0);
    TESTDIR_USE(tc);
    TH_LOOPS(tc, TH_N(blks), test_blocks);
    TH_LOOPS(tc, TH_N(bad_files), test_bad_file);
    TH_TESTS(tc, test_validate, test_bounds_permanent, test_random_permanent);
    return s;
}
