/* check_policy.c — every policy on small hand-built traces: the EXACT kept set, derived by hand
 * from the algorithm's definition (the derivation is in the comment above each expectation);
 * parameter validation; top-k ties; the policy ops are well formed. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sim/policy/policy.h"
#include "stories.h"
#include "protocols/program/proto.h"

/* ---- a tiny driver over plain arrays (the replay's order, see policy.h) -------------------- */

#define MAXT 32
#define MAXH 2
#define MAXL 4

typedef struct hand {
    policy_env env;
    float att[MAXL][MAXT][MAXH][MAXT]; /* full causal rows */
    float k[MAXL][MAXT][2];            /* Hkv = 1, d ≤ 2 */
    float v[MAXL][MAXT][2];
    float q[MAXL][MAXT][MAXH][2];
    float ffn[MAXL][MAXT][4];
    float wo[4];
} hand;

static int hand_get_k(void *ctx, uint32_t l, uint32_t pos, float *k)
{
    hand *h = ctx;
    memcpy(k, h->k[l][pos], h->env.head_dim * sizeof(float));
    return 0;
}

static int hand_gather(void *ctx, uint32_t l, uint32_t g, const uint32_t *idx, size_t n, float *k)
{
    hand *h = ctx;
    for (size_t i = 0; i < n; i++)
        memcpy(k + i * h->env.head_dim, h->k[l][idx[i]], h->env.head_dim * sizeof(float));
    return 0;
}

static void hand_init(hand *h, uint32_t L, uint32_t H, uint32_t d, uint32_t P, uint32_t T)
{
    memset(h, 0, sizeof *h);
    h->env = (policy_env){L, H, 1, d, 1, 4, P, T, NULL, h, hand_get_k, 0, NULL};
    h->wo[0] = 2;
}

static void one_hot_row(hand *h, uint32_t l, uint32_t pos, uint32_t head, uint32_t target)
{
    memset(h->att[l][pos][head], 0, sizeof h->att[l][pos][head]);
    h->att[l][pos][head][target] = 1;
}

static void *open_policy(const policy_ops *p, hand *h, const kv_param *kv, size_t n)
{
    policy_args a;
    errbuf e;
    void *st = NULL;
    ck_assert_msg(policy_args_load(p, kv, n, "t.yaml", &a, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(p->init(&h->env, &a, &st, &e) == MS_OK, "%s", e.msg);
    return st;
}

static void obs(const policy_ops *p, void *st, hand *h, uint32_t pos, uint32_t l, const float *att)
{
    errbuf e;
    policy_obs o = {.layer = l,
                    .pos = pos,
                    .q = h->q[l][pos][0],
                    .k = h->k[l][pos],
                    .v = h->v[l][pos],
                    .att = att,
                    .ffn = h->ffn[l][pos],
                    .wo = h->wo};
    unsigned need = p->needs ? p->needs(st, pos) : 0;
    if (!(need & POLICY_NEED_ATT))
        o.att = NULL;
    if (p->observe)
        ck_assert_msg(p->observe(st, &o, &e) == MS_OK, "%s", e.msg);
}

/* Runs the prompt, then decode positions up to `upto` (exclusive); keep receives the
 * selection of layer `layer` at position upto. */
static void run(const policy_ops *p, void *st, hand *h, uint32_t upto, uint32_t layer,
                uint8_t *keep)
{
    errbuf e;
    const policy_env *v = &h->env;
    uint32_t H = v->n_heads;
    for (uint32_t pos = 0; pos < v->prompt_len; pos++)
        for (uint32_t l = 0; l < v->n_layers; l++) {
            float row[MAXH * MAXT];
            for (uint32_t hh = 0; hh < H; hh++)
                memcpy(row + hh * (pos + 1), h->att[l][pos][hh], (pos + 1) * sizeof(float));
            obs(p, st, h, pos, l, row);
        }
    if (p->prefill)
        ck_assert_msg(p->prefill(st, &e) == MS_OK, "%s", e.msg);
    static uint8_t kbuf[MAXT];
    for (uint32_t pos = v->prompt_len; pos <= upto; pos++)
        for (uint32_t l = 0; l < v->n_layers; l++) {
            ck_assert_msg(p->select(st, l, pos, h->q[l][pos][0], kbuf, &e) == MS_OK, "%s", e.msg);
            if (pos == upto) {
                if (l == layer)
                    memcpy(keep, kbuf, pos);
                continue;
            }
            float row[MAXH * MAXT];
            for (uint32_t hh = 0; hh < H; hh++) { /* renormalize over kept ∪ {pos} */
                double R = 0;
                for (uint32_t j = 0; j <= pos; j++)
                    R += (j == pos || kbuf[j]) ? h->att[l][pos][hh][j] : 0;
                for (uint32_t j = 0; j <= pos; j++)
                    row[hh * (pos + 1) + j] =
                        (j == pos || kbuf[j]) && R > 0 ? (float)(h->att[l][pos][hh][j] / R) : 0;
            }
            obs(p, st, h, pos, l, row);
        }
}

/* Asserts keep[0..n) is exactly the listed set (what: the case, for the message). */
static void expect_set(const char *what, const uint8_t *keep, uint32_t n, const int *set, size_t ns)
{
    uint8_t want[MAXT] = {0};
    for (size_t i = 0; i < ns; i++)
        want[set[i]] = 1;
    for (uint32_t j = 0; j < n; j++)
        ck_assert_msg(keep[j] == want[j], "%s: position %u: kept %d, expected %d", what, j, keep[j],
                      want[j]);
}

/* A parameter as a scenario file gives it at 3:5. */
static kv_param kvp(const char *k, const char *v) { return fixture_kvp(k, v, 3, 5); }

/* ---- registry, parameters, top-k --------------------------------------------------------- */

START_TEST(test_registry)
{
    size_t n;
    const policy_ops *const *all = policy_all(&n);
    ck_assert_uint_ge(n, 1); /* every registered policy, however many: names unique */
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_eq(policy_find(all[i]->name), all[i]);
        ck_assert_ptr_nonnull(policy_schema(all[i]));
        ck_assert_ptr_nonnull(all[i]->select);
        ck_assert_ptr_nonnull(all[i]->init);
    }
    ck_assert_ptr_null(policy_find("h2"));
}
END_TEST

START_TEST(test_params)
{
    errbuf e;
    kv_param bad = kvp("recnet", "10");
    ck_assert_int_eq(policy_check_params(&policy_streamingllm, &bad, 1, "s.yaml", &e),
                     MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "s.yaml:3:5: error: unknown parameter 'recnet'"));
    ck_assert_ptr_nonnull(strstr(e.msg, "did you mean 'recent'"));
    kv_param word = kvp("pooling", "minpool");
    ck_assert_int_eq(policy_check_params(&policy_snapkv, &word, 1, "s.yaml", &e), MS_ERR_INPUT);
    ck_assert_ptr_nonnull(strstr(e.msg, "maxpool|avgpool"));
    kv_param range = kvp("alpha", "1.5");
    ck_assert_int_eq(policy_check_params(&policy_mpcache, &range, 1, "s.yaml", &e), MS_ERR_RANGE);
    kv_param nan_ = kvp("sink", "four");
    ck_assert_int_eq(policy_check_params(&policy_streamingllm, &nan_, 1, "s.yaml", &e),
                     MS_ERR_INPUT);
    kv_param ok[2] = {kvp("metric_stride", "4"), kvp("budget", "64")};
    ck_assert_int_eq(policy_check_params(&policy_quest, ok, 2, "s.yaml", &e), MS_OK);
}
END_TEST

/* Loaded arguments (policy_args_load) read as the text does: for every policy and parameter,
 * defaults and a given value, the loaded accessors give what parsing the text at each call
 * gives; a bad value fails the load with policy_check_params's message. */
START_TEST(test_args_loaded)
{
    size_t n_pol, nr;
    const policy_ops *const *all = policy_all(&n_pol);
    const policy_param *rp = policy_replay_params(&nr);
    errbuf e, e2;
    for (size_t pi = 0; pi < n_pol; pi++) {
        const policy_ops *p = all[pi];
        size_t np;
        const policy_param *pp = policy_params(p, &np);
        for (size_t i = 0; i < np + nr; i++) {
            const policy_param *q = i < np ? &pp[i] : &rp[i - np];
            /* given: the default's text, or for a number its upper bound when finite */
            kv_param kv = kvp(q->key, q->def ? q->def : "");
            if (!q->choices && q->hi < 1e9)
                snprintf(kv.val, sizeof kv.val, "%.17g", q->hi);
            for (int given = 0; given < 2; given++) {
                policy_args l, t = {.kv = &kv, .n = (size_t)given, .path = "t.yaml"};
                if (policy_args_load(p, &kv, (size_t)given, "t.yaml", &l, &e) != MS_OK) {
                    /* a rule between parameters (the check hook: MPCache's s1 = 2·s2) refuses
                     * the bound alone: the load says what policy_check_params says */
                    ck_assert_int_ne(policy_check_params(p, &kv, (size_t)given, "t.yaml", &e2),
                                     MS_OK);
                    ck_assert_str_eq(e.msg, e2.msg);
                    continue;
                }
                ck_assert_ptr_eq(l.loaded, p);
                const kv_param *w1, *w2;
                ck_assert_str_eq(policy_arg(p, &l, q->key, &w1), policy_arg(p, &t, q->key, &w2));
                ck_assert_ptr_eq(w1, w2);
                if (q->choices) {
                    int a = -1, b = -2;
                    ck_assert_int_eq(policy_arg_choice(p, &l, q->key, &a, &e),
                                     policy_arg_choice(p, &t, q->key, &b, &e2));
                    ck_assert_int_eq(a, b);
                    continue;
                }
                double a = -1, b = -2;
                int ra = policy_arg_double(p, &l, q->key, &a, &e);
                ck_assert_int_eq(ra, policy_arg_double(p, &t, q->key, &b, &e2));
                if (ra)
                    ck_assert_str_eq(e.msg, e2.msg);
                else
                    ck_assert_msg(a == b, "%s %s: %g vs %g", p->name, q->key, a, b);
                if (q->whole) {
                    uint32_t u = 1, v = 2;
                    ck_assert_int_eq(policy_arg_u32(p, &l, q->key, &u, &e),
                                     policy_arg_u32(p, &t, q->key, &v, &e2));
                    ck_assert_uint_eq(u, v);
                }
            }
        }
    }
    kv_param range = kvp("alpha", "1.5");
    policy_args l;
    ck_assert_int_eq(policy_args_load(&policy_mpcache, &range, 1, "s.yaml", &l, &e), MS_ERR_RANGE);
    ck_assert_int_eq(policy_check_params(&policy_mpcache, &range, 1, "s.yaml", &e2), MS_ERR_RANGE);
    ck_assert_str_eq(e.msg, e2.msg);
    ck_assert_ptr_null(l.loaded);
}
END_TEST

START_TEST(test_topk)
{
    /* scores 3,1,3,2,3: top-2 = the two smallest indices among the 3s = {0, 2};
     * top-4 = {0,2,4,3} sorted {0,2,3,4} */
    float s[5] = {3, 1, 3, 2, 3};
    uint32_t out[5], work[5];
    ck_assert_uint_eq(policy_topk(s, NULL, 5, 2, out, work), 2);
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(out[1], 2);
    ck_assert_uint_eq(policy_topk(s, NULL, 5, 4, out, work), 4);
    ck_assert_uint_eq(out[2], 3);
    ck_assert_uint_eq(out[3], 4);
    uint32_t cand[3] = {1, 3, 4};
    ck_assert_uint_eq(policy_topk(s, cand, 3, 1, out, work), 1);
    ck_assert_uint_eq(out[0], 4);
    /* a larger random case against a full sort */
    enum { N = 1000 };
    float r[N];
    uint32_t o2[N], w2[N];
    for (int i = 0; i < N; i++)
        r[i] = (float)((i * 7919) % 101);
    size_t k = policy_topk(r, NULL, N, 100, o2, w2);
    ck_assert_uint_eq(k, 100);
    /* threshold: the 100th largest; all kept ≥ any dropped */
    float minkept = INFINITY;
    uint8_t in[N] = {0};
    for (size_t i = 0; i < k; i++) {
        minkept = fminf(minkept, r[o2[i]]);
        in[o2[i]] = 1;
    }
    for (int i = 0; i < N; i++)
        if (!in[i])
            ck_assert(r[i] <= minkept);
}
END_TEST

/* ---- policies: one row a policy × case ------------------------------------------------- */

/* "k=v k=v …" → kv (at most cap); the number of parameters. */
static size_t parse_kv(const char *text, kv_param *kv, size_t cap)
{
    size_t n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text ? text : "");
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(w, '=');
        ck_assert_msg(eq != NULL && n < cap, "bad case parameter '%s'", w);
        *eq = '\0';
        kv[n++] = kvp(w, eq + 1);
    }
    return n;
}

/* Prompt rows are one-hot: row i attends to t_i = 0,0,2,0,2,5,5,2, so the column sums are
 * score(0)=3, score(2)=3, score(5)=2, others 0. Decode pos 8 attends to 6 (one-hot). */
static void fx_h2o(hand *h)
{
    int t[9] = {0, 0, 2, 0, 2, 5, 5, 2, 6};
    for (int i = 0; i < 9; i++)
        one_hot_row(h, 0, (uint32_t)i, 0, (uint32_t)t[i]);
}

/* Last prompt row: head0 .1 .4 .1 .2 .2, head1 .3 0 .1 .2 .4; decode pos 5 (both heads)
 * .5 .1 0 0 .1 .3. */
static void fx_tova(hand *h)
{
    float h0[5] = {.1f, .4f, .1f, .2f, .2f}, h1[5] = {.3f, 0, .1f, .2f, .4f};
    memcpy(h->att[0][4][0], h0, sizeof h0);
    memcpy(h->att[0][4][1], h1, sizeof h1);
    float d5[6] = {.5f, .1f, 0, 0, .1f, .3f};
    memcpy(h->att[0][5][0], d5, sizeof d5);
    memcpy(h->att[0][5][1], d5, sizeof d5);
}

/* Window rows 8 and 9 vote .3 .3 0 0 .4 0 0 0 over j < 8. */
static void fx_snapkv(hand *h)
{
    float r8[9] = {.3f, .3f, 0, 0, .4f, 0, 0, 0, 0};
    memcpy(h->att[0][8][0], r8, sizeof r8);
    h->att[0][9][0][8] = .5f;
    h->att[0][9][0][9] = .5f;
}

/* Every layer's window rows 18, 19 vote 5:.5 11:.4 3:.3. */
static void fx_pyramidkv(hand *h)
{
    for (uint32_t l = 0; l < 3; l++) {
        h->att[l][18][0][5] = .5f;
        h->att[l][18][0][18] = .5f;
        h->att[l][19][0][11] = .4f;
        h->att[l][19][0][3] = .3f;
        h->att[l][19][0][19] = .3f;
    }
}

/* Keys p0 = (1,0),(0,1); p1 = (-1,0),(2,2); p2 = (0,-1),(.5,-2) in both layers; q = (-1,1)
 * at pos 6. */
static void fx_quest(hand *h)
{
    float keys[6][2] = {{1, 0}, {0, 1}, {-1, 0}, {2, 2}, {0, -1}, {.5f, -2}};
    for (int l = 0; l < 2; l++) {
        memcpy(h->k[l], keys, sizeof keys);
        h->q[l][6][0][0] = -1;
        h->q[l][6][0][1] = 1;
    }
}

static void set_keys1(hand *h, uint32_t l, const float *k, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        h->k[l][i][0] = k[i];
}

/* d = 1, keys 1 2 | 0 0 | 5 -1 | 3 3 | -2 -2 | 0 4 in layers 0-2, 9 9 9 9 0 … in layer 3;
 * q = 1 at pos 12. */
static void fx_mpcache_keys(hand *h)
{
    float keys[12] = {1, 2, 0, 0, 5, -1, 3, 3, -2, -2, 0, 4};
    float other[12] = {9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0};
    for (uint32_t l = 0; l < 4; l++) {
        set_keys1(h, l, l == 3 ? other : keys, 12);
        h->q[l][12][0][0] = 1;
    }
}

/* The same keys through the per-head key access (callers without get_k). */
static void fx_mpcache_gather(hand *h)
{
    fx_mpcache_keys(h);
    h->env.get_k = NULL;
    h->env.gather_k = hand_gather;
}

/* Window rows 4, 5 of two heads: row 4 means .4 0 .05 .2 .35, row 5 means 0 .1 0 0 0 .9. */
static void fx_mpcache_static(hand *h)
{
    float a0[5] = {.5f, 0, 0, .2f, .3f}, a1[5] = {.3f, 0, .1f, .2f, .4f};
    memcpy(h->att[0][4][0], a0, sizeof a0);
    memcpy(h->att[0][4][1], a1, sizeof a1);
    h->att[0][5][0][5] = 1;
    h->att[0][5][1][1] = .2f;
    h->att[0][5][1][5] = .8f;
}

/* V = 1 3 .5 2 1 1 (d = dim = 1); window row 5: .4 .1 .2 .05 .05 .2. */
static void fx_criticalkv(hand *h)
{
    float vals[6] = {1, 3, .5f, 2, 1, 1};
    for (int i = 0; i < 6; i++)
        h->v[0][i][0] = vals[i];
    float r5[6] = {.4f, .1f, .2f, .05f, .05f, .2f};
    memcpy(h->att[0][5][0], r5, sizeof r5);
}

/* ffn 4. Layer 0: pos 0 gates 1 0 0 0, pos 1 all ≤ 0; layer 1 all on; pos 2 gates 1 0 1 0. */
static void fx_comet(hand *h)
{
    h->ffn[0][0][0] = 1;
    for (int i = 0; i < 4; i++)
        h->ffn[1][0][i] = h->ffn[1][1][i] = 1;
    h->ffn[0][2][0] = h->ffn[1][2][0] = 1;
    h->ffn[0][2][2] = h->ffn[1][2][2] = 1;
}

/* With prefetch the layer-1 miss of pos 1 is refilled at the end of the prefill: one refill op
 * (m = 1) in layer 1's prefill ops; nothing left for decode. */
static void after_comet(void *st, hand *h)
{
    op_program prog;
    op_program_init(&prog);
    errbuf e;
    ck_assert_int_eq(policy_comet.emit_cost(st, PHASE_PREFILL, 1, 2, NULL, &prog, &e), MS_OK);
    size_t refills = 0;
    for (size_t i = 0; i < prog.n_ops; i++)
        if (prog.ops[i].kind == OP_MATMUL && prog.ops[i].n == 2 * h->env.head_dim) {
            refills++;
            ck_assert_uint_eq(prog.ops[i].m, 1);
        }
    ck_assert_uint_eq(refills, 1);
    run_metric m[4];
    ck_assert_uint_eq(policy_comet.metrics(st, m, 4), 3);
    ck_assert_str_eq(m[1].name, "comet_kv_refills");
    ck_assert_double_eq(m[1].value, 1);
    op_program_free(&prog);
}

/* A layer whose pyramid budget is 0 keeps none of its candidates: its prompt computes no
 * votes (no top-k reads them), while the layer below, which keeps 6, does. */
static void after_pyramid_zero(void *st, hand *h)
{
    errbuf e;
    for (uint32_t l = 1; l < 3; l++) {
        op_program prog;
        op_program_init(&prog);
        ck_assert_int_eq(
            policy_pyramidkv.emit_cost(st, PHASE_PREFILL, l, h->env.prompt_len, NULL, &prog, &e),
            MS_OK);
        if (l == 2)
            ck_assert_msg(prog.n_ops == 0, "layer 2 keeps none and emits %zu ops", prog.n_ops);
        else
            ck_assert_msg(prog.n_ops > 0, "layer 1 keeps 6 and emits nothing");
        op_program_free(&prog);
    }
}

/* One row: the trace shape (layers, heads, head dim, prompt P, length T), what the fixture
 * puts in it, the parameters, the position whose selection of `layer` is read, and the EXACT
 * kept set over [0, upto), derived by hand in the comment above the row. */
typedef struct policy_case {
    const char *name;
    const policy_ops *p;
    uint32_t L, H, d, P, T;
    void (*fixture)(hand *h);
    const char *params;
    uint32_t upto, layer;
    int keep[MAXT];
    size_t n_keep;
    void (*after)(void *st, hand *h); /* more checks on the state after the run */
} policy_case;

#define KEEP(...) {__VA_ARGS__}, sizeof((int[]){__VA_ARGS__}) / sizeof(int)

static const policy_case policy_cases[] = {
    {"full", &policy_full, 1, 1, 2, 8, 12, NULL, "", 10, 0, KEEP(0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
     NULL},
    /* sink 2, recent 3, T = 10 cached: {0,1} ∪ {7,8,9} */
    {"streamingllm", &policy_streamingllm, 1, 1, 2, 8, 12, NULL, "sink=2 recent=3", 10, 0,
     KEEP(0, 1, 7, 8, 9), NULL},
    /* heavy=2, recent=2, P=8: candidates [0,6), top-2 = {0,2} → cache {0,2,6,7} */
    {"h2o prompt", &policy_h2o, 1, 1, 2, 8, 12, fx_h2o, "heavy=2 recent=2", 8, 0, KEEP(0, 2, 6, 7),
     NULL},
    /* decode pos 8 attends to 6: scores 0:3 2:3 6:1 7:0 8:0, 5 entries > 4 → evict the
     * smallest non-recent (j < 7) = 6. At pos 9: {0,2,7,8}. */
    {"h2o decode", &policy_h2o, 1, 1, 2, 8, 12, fx_h2o, "heavy=2 recent=2", 9, 0, KEEP(0, 2, 7, 8),
     NULL},
    /* cache_size 3, P = 5: head mean .2 .2 .1 .2 .3 → top-3 = {4} ∪ the two smallest indices
     * among the .2s {0,1} = {0,1,4} */
    {"tova prompt", &policy_tova, 1, 2, 2, 5, 8, fx_tova, "cache_size=3", 5, 0, KEEP(0, 1, 4),
     NULL},
    /* decode pos 5: among {0,1,4,5} the minimum .1 is shared by 1 and 4: the later (4) goes */
    {"tova decode", &policy_tova, 1, 2, 2, 5, 8, fx_tova, "cache_size=3", 6, 0, KEEP(0, 1, 5),
     NULL},
    /* P = 10, window 2, kernel 3, capacity 5 → 3 non-window entries among j < 8.
     * maxpool(3): .3 .3 .3 .4 .4 .4 0 0 → {3,4,5}; generated tokens (pos 10) are kept. */
    {"snapkv maxpool", &policy_snapkv, 1, 1, 2, 10, 12, fx_snapkv,
     "window=2 kernel=3 capacity=5 pooling=maxpool", 11, 0, KEEP(3, 4, 5, 8, 9, 10), NULL},
    /* avgpool(3) sums: .6 .6 .3 .4 .4 .4 0 0 → {0,1} + the smallest index among the .4s = 3 */
    {"snapkv avgpool", &policy_snapkv, 1, 1, 2, 10, 12, fx_snapkv,
     "window=2 kernel=3 capacity=5 pooling=avgpool", 10, 0, KEEP(0, 1, 3, 8, 9), NULL},
    /* L = 3, P = 20, C = 8, w = 2, beta = 2: P ≥ 2(C-w) = 12 → pyramid. min = 6/2 = 3,
     * max = 12 - 3 = 9 (< P-w = 18), step = (9-3)/2 = 3 → budgets 9, 6, 3. kernel 1: votes
     * are the window rows: 5:.5 11:.4 3:.3. Layer 2 keeps {3,5,11} ∪ {18,19}; layer 1 adds
     * the three smallest zero-vote indices {0,1,2}; layer 0 adds {0,1,2,4,6,7}. */
    {"pyramidkv layer 0", &policy_pyramidkv, 3, 1, 2, 20, 22, fx_pyramidkv,
     "window=2 kernel=1 capacity=8 beta=2", 20, 0, KEEP(0, 1, 2, 3, 4, 5, 6, 7, 11, 18, 19), NULL},
    {"pyramidkv layer 1", &policy_pyramidkv, 3, 1, 2, 20, 22, fx_pyramidkv,
     "window=2 kernel=1 capacity=8 beta=2", 20, 1, KEEP(0, 1, 2, 3, 5, 11, 18, 19), NULL},
    {"pyramidkv layer 2", &policy_pyramidkv, 3, 1, 2, 20, 22, fx_pyramidkv,
     "window=2 kernel=1 capacity=8 beta=2", 20, 2, KEEP(3, 5, 11, 18, 19), NULL},
    /* beta = 8: min = 6/8 = 0, max = 12 - 0 = 12 (< 18), step = 6 → budgets 12, 6, 0: layer 2
     * keeps the window alone */
    {"pyramidkv layer 2 keeps none", &policy_pyramidkv, 3, 1, 2, 20, 22, fx_pyramidkv,
     "window=2 kernel=1 capacity=8 beta=8", 20, 2, KEEP(18, 19), after_pyramid_zero},
    /* page 2, budget 2 → max(min_pages 2, 1) = 2 pages. p0: M=(1,1) m=(0,0); p1: M=(2,2)
     * m=(-1,0); p2: M=(.5,-1) m=(0,-2). q = (-1,1): U0 = 0 + 1 = 1, U1 = 1 + 2 = 3,
     * U2 = 0 + -1 = -1 → pages {1,0} → tokens {0,1,2,3} */
    {"quest", &policy_quest, 2, 1, 2, 6, 8, fx_quest, "page=2 budget=2 min_pages=2 skip_layers=1",
     6, 1, KEEP(0, 1, 2, 3), NULL},
    /* the first layer stays dense */
    {"quest skipped layer", &policy_quest, 2, 1, 2, 6, 8, fx_quest,
     "page=2 budget=2 min_pages=2 skip_layers=1", 6, 0, KEEP(0, 1, 2, 3, 4, 5), NULL},
/* static none, d = 1, s2 = 2, s1 = 4, alpha .5, q = 1, n' = 12 keys → 16-cluster
 * (max,min): (2,1) (0,0) (5,-1) (3,3) (-2,-2) (4,0); 32-clusters: (2,0) (5,-1) (4,-2) →
 * sim1 = 1, 2, 1. ratio1 .34: k1 = floor(3·.34) = 1 → {1} ∪ {0}; candidates c0..c3, sim2 =
 * 1.5 0 2 3; ratio2 .34: k2 = floor(6·.34) = 2 → {3,2} ∪ {0} → tokens {0,1,4,5,6,7}.
 * 12 % 4 = 0: no partial cluster. Layer sharing: layer 3 reuses layer 2 even though its
 * keys differ. */
#define MPCACHE_CASE(name, fx, share, layer, ...)          \
    {                                                      \
        name, &policy_mpcache, 4, 1, 1, 12, 14, fx,        \
            "static=none s1=4 s2=2 alpha=0.5 ratio1=0.34 " \
            "ratio2=0.34 layer_share=" share,              \
            12, layer, KEEP(__VA_ARGS__), NULL             \
    }
    MPCACHE_CASE("mpcache layer 0", fx_mpcache_keys, "1", 0, 0, 1, 4, 5, 6, 7),
    MPCACHE_CASE("mpcache layer 1", fx_mpcache_keys, "1", 1, 0, 1, 4, 5, 6, 7),
    MPCACHE_CASE("mpcache layer 2", fx_mpcache_keys, "1", 2, 0, 1, 4, 5, 6, 7),
    MPCACHE_CASE("mpcache shared layer 3", fx_mpcache_keys, "1", 3, 0, 1, 4, 5, 6, 7),
    /* the same through the per-head key access (callers without get_k) */
    MPCACHE_CASE("mpcache gather_k", fx_mpcache_gather, "1", 2, 0, 1, 4, 5, 6, 7),
    /* without sharing, layer 3 ranks its own keys: 16-clusters (9,9)(9,9)(0,0)...: sim1 =
     * 9, 0, 0 → top-1 = {0}; candidates c0, c1 (9, 9), k2 = 2 → {0,1} ∪ {0} → {0,1,2,3} */
    MPCACHE_CASE("mpcache unshared layer 3", fx_mpcache_gather, "0", 3, 0, 1, 2, 3),
#undef MPCACHE_CASE
    /* P = 6, window_frac .34 → w = 2 (rows 4, 5), threshold .15 on the head mean: row 4 →
     * {0,3,4}; row 5 → {5}. Static set {0,3,4,5}; ratios 1 keep all of it at decode. */
    {"mpcache static", &policy_mpcache, 1, 2, 1, 6, 8, fx_mpcache_static,
     "static=threshold static_threshold=0.15 window_frac=0.34 ratio1=1 ratio2=1 s2=16", 6, 0,
     KEEP(0, 3, 4, 5), NULL},
    /* P = 6, window 1, kernel 1, capacity 3, stage 1 = int(3·.5) = 1. W_o = [2] → proj =
     * 2 6 1 4 2 2. Window row 5 → base .4 .1 .2 .05 .05 and the window max+1 = 1.4. Stage 1 =
     * {5}. score = (base+1e-4)·proj: .8002 .6006 .2001 .2004 .1002 → keep {5,0,1}. (SnapKV's
     * top-2 would be {0,2}.) */
    {"criticalkv", &policy_criticalkv, 1, 1, 1, 6, 8, fx_criticalkv, "window=1 kernel=1 capacity=3",
     7, 0, KEEP(0, 1, 5, 6), NULL},
    /* block 2, skip_below .5. Layer 0: pos 0 → blocks {on, off} = .5, not below → no skip;
     * pos 1 → 0 active → its layer-1 K/V are missing. Attention stays dense. */
    {"comet", &policy_comet, 2, 1, 2, 2, 4, fx_comet, "block=2 skip_below=0.5", 2, 1, KEEP(0, 1),
     after_comet},
};

START_TEST(test_policy_case)
{
    const policy_case *c = &policy_cases[_i];
    hand *h = malloc(sizeof *h);
    hand_init(h, c->L, c->H, c->d, c->P, c->T);
    if (c->fixture)
        c->fixture(h);
    kv_param kv[8];
    size_t nk = parse_kv(c->params, kv, 8);
    uint8_t keep[MAXT];
    void *st = open_policy(c->p, h, nk ? kv : NULL, nk);
    run(c->p, st, h, c->upto, c->layer, keep);
    expect_set(c->name, keep, c->upto, c->keep, c->n_keep);
    if (c->after)
        c->after(st, h);
    c->p->fini(st);
    free(h);
}
END_TEST

START_TEST(test_emit_shapes)
{
    /* every policy's ops are category policy, well formed; streamingllm and full cost nothing;
     * mpcache's shared odd layer costs nothing */
    size_t n;
    const policy_ops *const *all = policy_all(&n);
    hand *h = malloc(sizeof *h);
    hand_init(h, 4, 2, 2, 20, 24);
    for (uint32_t l = 0; l < 4; l++)
        for (uint32_t p = 0; p < 24; p++) {
            for (uint32_t hh = 0; hh < 2; hh++)
                for (uint32_t j = 0; j <= p; j++)
                    h->att[l][p][hh][j] = 1.0f / (float)(p + 1);
            h->k[l][p][0] = (float)((p * 7) % 5);
            h->k[l][p][1] = (float)((p * 3) % 4);
            h->v[l][p][0] = 1;
            h->q[l][p][0][0] = h->q[l][p][1][1] = 1;
        }
    for (size_t i = 0; i < n; i++) {
        /* a budget below the cache through the one parameter every policy takes (a policy
         * whose attention stays dense has no budget_keys), and a window that fits it */
        const policy_ops *p = all[i];
        kv_param kv[2];
        size_t nk = 0, np;
        if (p->budget_keys)
            kv[nk++] = kvp("kv_budget", "0.4");
        const policy_param *pp = policy_params(p, &np);
        for (size_t t = 0; t < np; t++)
            if (!strcmp(pp[t].key, "window"))
                kv[nk++] = kvp("window", "4");
        void *st = open_policy(p, h, kv, nk);
        uint8_t keep[MAXT];
        run(p, st, h, 22, 3, keep);
        op_program prog;
        op_program_init(&prog);
        errbuf e;
        uint32_t kept[1] = {8};
        for (uint32_t l = 0; l < 4 && p->emit_cost; l++) {
            ck_assert_int_eq(p->emit_cost(st, PHASE_PREFILL, l, 20, NULL, &prog, &e), MS_OK);
            ck_assert_int_eq(p->emit_cost(st, PHASE_DECODE, l, 22, kept, &prog, &e), MS_OK);
        }
        ck_assert_msg(op_program_is_sane(&prog), "%s", p->name);
        /* the cost engines accept them (operand sizes, public constants) */
        const char *protos[2] = {"semi2k", "aby3"};
        for (int pi = 0; pi < 2; pi++) {
            proto_cfg pc;
            cost_log log;
            ck_assert_int_eq(proto_cfg_default(protos[pi], &pc, &e), MS_OK);
            const proto *pr = proto_find(protos[pi]);
            cost_log_init(&log, pr->n_parties);
            ck_assert_msg(proto_cost_program(pr, &pc, &prog, &log, &e) == MS_OK, "%s: %s", p->name,
                          e.msg);
            cost_log_free(&log);
        }
        for (size_t o = 0; o < prog.n_ops; o++)
            ck_assert_int_eq(prog.ops[o].cat, OPC_POLICY);
        if (!strcmp(p->name, "full") || !strcmp(p->name, "streamingllm"))
            ck_assert_uint_eq(prog.n_ops, 0);
        else
            ck_assert_msg(prog.n_ops > 0, "%s emits nothing", p->name);
        if (!strcmp(p->name,
                    "mpcache")) /* layer 3 reuses layer 2's selection: no top-k, no bounds */
            for (size_t o = 0; o < prog.n_ops; o++)
                ck_assert(prog.ops[o].layer != 3 ||
                          (prog.ops[o].kind != OP_TOPK && prog.ops[o].kind != OP_MAX));
        op_program_free(&prog);
        p->fini(st);
    }
    free(h);
}
END_TEST

/* Quest at a partial last page: the rows its decode step attends on shares (the attend hook,
 * what the replay lowers) and its ops are the same whether the selection chose that page or
 * not. Pages of 2 over 5 cached keys k0 = (1,0), k1 = (0,1) | k2 = (-1,0), k3 = (2,2) | k4 =
 * (0,-1): bounds p0 M = (1,1) m = (0,0), p1 M = (2,2) m = (-1,0), p2 M = m = (0,-1); 2 pages
 * kept. q = (-1,1): U = 1, 3, -1 → pages {0,1}, 4 entries. q = (0,-1): U = 0, 0, 1 → pages
 * {2,0} (the tie to the smaller index), 3 entries. Both attend 2 · 2 = 4 rows. */
START_TEST(test_quest_attend_public)
{
    static const float keys[5][2] = {{1, 0}, {0, 1}, {-1, 0}, {2, 2}, {0, -1}};
    static const float qs[2][2] = {{-1, 1}, {0, -1}};
    static const uint32_t want_kept[2] = {4, 3};
    hand *h = malloc(sizeof *h);
    ck_assert_ptr_nonnull(h);
    op_program prog[2];
    kv_param kv[8];
    size_t nk = parse_kv("page=2 budget=2 min_pages=2 skip_layers=1", kv, 8);
    for (int c = 0; c < 2; c++) {
        hand_init(h, 2, 1, 2, 5, 8);
        for (int l = 0; l < 2; l++) {
            memcpy(h->k[l], keys, sizeof keys);
            memcpy(h->q[l][5][0], qs[c], sizeof qs[c]);
        }
        void *st = open_policy(&policy_quest, h, kv, nk);
        uint8_t keep[MAXT];
        run(&policy_quest, st, h, 5, 1, keep);
        uint32_t kept = 0, rows = 0;
        for (uint32_t j = 0; j < 5; j++)
            kept += keep[j];
        ck_assert_uint_eq(kept, want_kept[c]);
        ck_assert_ptr_nonnull(policy_quest.attend);
        policy_quest.attend(st, 1, 5, &kept, &rows);
        ck_assert_uint_eq(rows, 4);
        /* the dense layer attends every cached entry */
        uint32_t all = 5;
        policy_quest.attend(st, 0, 5, &all, &rows);
        ck_assert_uint_eq(rows, 5);
        errbuf e;
        op_program_init(&prog[c]);
        ck_assert_int_eq(policy_quest.emit_cost(st, PHASE_DECODE, 1, 5, &kept, &prog[c], &e),
                         MS_OK);
        policy_quest.fini(st);
    }
    ck_assert_uint_eq(prog[0].n_ops, prog[1].n_ops);
    for (size_t i = 0; i < prog[0].n_ops; i++) {
        const op *a = &prog[0].ops[i], *b = &prog[1].ops[i];
        ck_assert(a->kind == b->kind && a->batch == b->batch && a->m == b->m && a->k == b->k &&
                  a->n == b->n && a->iarg == b->iarg);
    }
    op_program_free(&prog[0]);
    op_program_free(&prog[1]);
    free(h);
}
END_TEST

/* Half precision rounded outward: up ≥ x ≥ down, each the nearest half on its side; and a
 * Quest page bound from them still bounds every q·k of the page from above. */
START_TEST(test_half_outward)
{
    /* every half's float (bit arithmetic) against its definition (−1)^s·2^(e−15)·(1 + m/2^10),
     * subnormals m·2^−24 */
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t e = h >> 10 & 0x1fu, m = h & 0x3ffu;
        float want = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(1024u + m), (int)e - 25);
        want = h & 0x8000u ? -want : want;
        float got = policy_half_float((uint16_t)h);
        if (e == 31)
            ck_assert(m ? isnan(got) : got == (h & 0x8000u ? -INFINITY : INFINITY));
        else
            ck_assert_msg(memcmp(&got, &want, sizeof got) == 0, "half %#x: %a, not %a", h,
                          (double)got, (double)want);
    }
    uint64_t st = 0x1234567;
    for (int i = 0; i < 200000; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t bits = (uint32_t)(st >> 32);
        float x;
        memcpy(&x, &bits, sizeof x);
        if (i % 4 == 1)
            x = (float)((double)(int32_t)bits * 0x1p-24); /* around ±128 */
        if (i % 4 == 2)
            x = (float)((double)(int32_t)bits * 0x1p-50); /* subnormal halves */
        if (!isfinite(x))
            continue;
        uint16_t u = policy_half_up(x), d = policy_half_down(x);
        float fu = policy_half_float(u), fd = policy_half_float(d);
        ck_assert_msg(fu >= x && fd <= x, "%a: up %a down %a", (double)x, (double)fu, (double)fd);
        if (fabsf(x) < 65504) { /* nearest: stepping further in would cross x */
            if (fu != x && fu > 0)
                ck_assert(policy_half_float((uint16_t)(u - 1)) < x);
            if (fu != x && fu <= 0)
                ck_assert(policy_half_float((uint16_t)(u + 1)) < x || u == 0x8000u);
            if (fd != x && fd < 0)
                ck_assert(policy_half_float((uint16_t)(d - 1)) > x);
        }
    }
    ck_assert(policy_half_float(policy_half_up(70000.0f)) == INFINITY);
    ck_assert(policy_half_float(policy_half_down(70000.0f)) == 65504.0f);
    ck_assert(policy_half_float(policy_half_down(-1e-30f)) < 0);
    ck_assert(policy_half_float(policy_half_up(-1e-30f)) == 0);
    /* Quest's bound with outward half bounds ≥ q·k for each of 16 keys */
    for (int t = 0; t < 200; t++) {
        enum { D = 32, NK = 16 };
        float k[NK][D], q[D], M[D], m[D];
        for (int j = 0; j < NK; j++)
            for (int c = 0; c < D; c++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                k[j][c] = (float)((int32_t)(st >> 32)) * 0x1p-27f * (c == 1 ? 40 : 1);
                M[c] = j ? fmaxf(M[c], k[j][c]) : k[j][c];
                m[c] = j ? fminf(m[c], k[j][c]) : k[j][c];
            }
        for (int c = 0; c < D; c++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            q[c] = (float)((int32_t)(st >> 32)) * 0x1p-30f;
        }
        double U = 0;
        for (int c = 0; c < D; c++) {
            double a = (double)q[c] * policy_half_float(policy_half_up(M[c]));
            double b = (double)q[c] * policy_half_float(policy_half_down(m[c]));
            U += a > b ? a : b;
        }
        for (int j = 0; j < NK; j++) {
            double dot = 0;
            for (int c = 0; c < D; c++)
                dot += (double)q[c] * k[j][c];
            ck_assert_msg(U >= dot, "bound %.9g < q·k %.9g", U, dot);
        }
    }
}
END_TEST

/* H2O's vector victim search against the definition's single pass (the smallest live score,
 * the later position on ties) on lengths 0..70 with few distinct scores (many ties), dead
 * entries and every tail length of the vectors. */
START_TEST(test_h2o_victim)
{
    float sc[70];
    uint8_t alive[70];
    uint64_t x = 88172645463325252ull;
    for (uint32_t trial = 0; trial < 2000; trial++) {
        uint32_t end = trial % 71;
        for (uint32_t j = 0; j < end; j++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            sc[j] = (float)(x % 5) * 0.25f;
            alive[j] = trial % 7 != 0 && (x >> 8) % 4 != 0; /* every 7th: none lives */
            if (trial % 11 == 0)
                sc[j] = INFINITY;
        }
        uint32_t want = UINT32_MAX;
        float best = INFINITY;
        for (uint32_t j = 0; j < end; j++)
            if (alive[j] && sc[j] <= best) {
                best = sc[j];
                want = j;
            }
        ck_assert_msg(policy_h2o_victim(sc, alive, end) == want, "trial %u end %u", trial, end);
    }
}
END_TEST

/* One metric_stride default for every registered policy (the replay's), so that the policies
 * of a sweep are measured on the same decode steps; a scenario's value wins. */
START_TEST(test_metric_stride_default)
{
    size_t n, nr;
    const policy_ops *const *all = policy_all(&n);
    const policy_param *rp = policy_replay_params(&nr);
    ck_assert_str_eq(rp[0].key, "metric_stride");
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!strcmp(policy_arg(all[i], NULL, "metric_stride", NULL), rp[0].def),
                      "%s measures on other steps", all[i]->name);
    ck_assert_str_eq(rp[0].def, "16");
    kv_param kv = {.key = "metric_stride", .val = "3"};
    policy_args a = {.kv = &kv, .n = 1, .path = "t.yaml"};
    ck_assert_str_eq(policy_arg(policy_find("h2o"), &a, "metric_stride", NULL), "3");
}
END_TEST

/* The vector kernels (F16C half bounds, AVX-512 running bounds) give the scalar definitions'
 * bits on random floats with infinities, NaNs, subnormals and halves' overflow, over lengths
 * with vector tails. */
START_TEST(test_bound_kernels)
{
    enum { N = 45 };
    uint64_t st = 0xfeed;
    for (int t = 0; t < 1500; t++) {
        float a[N], b[N], k[N];
        for (int i = 0; i < N; i++) {
            float *x[3] = {&a[i], &b[i], &k[i]};
            for (int j = 0; j < 3; j++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                uint32_t bits = (uint32_t)(st >> 32);
                memcpy(x[j], &bits, sizeof bits);
                int kind = (int)(st >> 8 & 15);
                if (kind < 8)
                    *x[j] = (float)((double)(int32_t)bits * 0x1p-28);
                else if (kind == 8)
                    *x[j] = (float)((double)(int32_t)bits * 0x1p-52);
                else if (kind == 9 && t % 50 == 0)
                    *x[j] = NAN;
                else if (kind == 10)
                    *x[j] = (float)((double)(int32_t)bits * 0x1p-14); /* beyond ±65504 */
                else if (kind == 11)
                    *x[j] = bits & 1 ? INFINITY : -INFINITY;
                else if (!isfinite(*x[j]) && t % 50)
                    *x[j] = 1;
            }
        }
        uint32_t n = (uint32_t)(t % N) + 1;
        uint16_t u0[N], d0[N], u1[N], d1[N];
        float m0[N], n0[N], m1[N], n1[N];
        memcpy(m0, a, sizeof a);
        memcpy(n0, b, sizeof b);
        memcpy(m1, a, sizeof a);
        memcpy(n1, b, sizeof b);
        policy_portable_kernels = 1;
        policy_half_bounds(a, b, n, u0, d0);
        policy_bounds_update(m0, n0, k, n);
        policy_portable_kernels = 0;
        policy_half_bounds(a, b, n, u1, d1);
        policy_bounds_update(m1, n1, k, n);
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_uint_eq(u0[i], policy_half_up(a[i]));
            ck_assert_uint_eq(d0[i], policy_half_down(b[i]));
            ck_assert_msg(u1[i] == u0[i] && d1[i] == d0[i], "%a %a: %#x %#x, not %#x %#x",
                          (double)a[i], (double)b[i], u1[i], d1[i], u0[i], d0[i]);
            float wm = k[i] > a[i] ? k[i] : a[i], wn = k[i] < b[i] ? k[i] : b[i];
            ck_assert(memcmp(&m0[i], &wm, 4) == 0 && memcmp(&n0[i], &wn, 4) == 0);
            ck_assert(memcmp(&m1[i], &wm, 4) == 0 && memcmp(&n1[i], &wn, 4) == 0);
        }
    }
}
END_TEST

/* ---- MPCache against its definition at a length with many clusters ------------------------ */

enum { MX_D = 5, MX_P = 300, MX_T = 341 };
static float mx_keys[MX_T][MX_D];

static int mx_get_k(void *ctx, uint32_t l, uint32_t pos, float *k)
{
    memcpy(k, mx_keys[pos], sizeof mx_keys[pos]);
    return 0;
}

/* Score of bounds (hi, lo) against q, as the definition writes it: Σ_i q_i·(α·hi_i + (1-α)·lo_i)
 * in float, channels in order. */
static float mx_score(const float *q, const float *hi, const float *lo, float a)
{
    float u = 0;
    for (int i = 0; i < MX_D; i++)
        u += q[i] * (a * hi[i] + (1.0f - a) * lo[i]);
    return u;
}

/* Bounds of K' entries [b, e) (K' = positions 0 … n-1 under static none). */
static void mx_bounds(uint32_t b, uint32_t e, float *hi, float *lo)
{
    for (int i = 0; i < MX_D; i++) {
        hi[i] = lo[i] = mx_keys[b][i];
        for (uint32_t t = b + 1; t < e; t++) {
            hi[i] = mx_keys[t][i] > hi[i] ? mx_keys[t][i] : hi[i];
            lo[i] = mx_keys[t][i] < lo[i] ? mx_keys[t][i] : lo[i];
        }
    }
}

/* Static none, s2 = 4, s1 = 8 over 300 prompt keys and 40 decode steps (partial clusters
 * and pairs at most steps): every selection equals the two levels computed from plain
 * bounds of the keys (policy header comment) — the stored mixes and the blocked scoring
 * change nothing. */
START_TEST(test_mpcache_many_clusters)
{
    uint64_t st = 77;
    for (int t = 0; t < MX_T; t++)
        for (int i = 0; i < MX_D; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            mx_keys[t][i] = (float)((int32_t)(st >> 32)) * 0x1p-31f * (i == 1 ? 3 : 1);
        }
    policy_env env = {1, 1, 1, MX_D, MX_D, 4, MX_P, MX_T, NULL, NULL, mx_get_k, 0, NULL};
    kv_param kv[] = {kvp("static", "none"), kvp("s1", "8"),       kvp("s2", "4"),
                     kvp("alpha", "0.6"),   kvp("ratio1", "0.5"), kvp("ratio2", "0.2")};
    policy_args a = {.kv = kv, .n = sizeof kv / sizeof kv[0], .path = "t.yaml"};
    errbuf e;
    void *ps = NULL;
    ck_assert_msg(policy_mpcache.init(&env, &a, &ps, &e) == MS_OK, "%s", e.msg);
    for (uint32_t pos = 0; pos < MX_P; pos++) {
        policy_obs o = {.layer = 0, .pos = pos, .k = mx_keys[pos]};
        ck_assert(policy_mpcache.observe(ps, &o, &e) == MS_OK);
    }
    ck_assert(policy_mpcache.prefill(ps, &e) == MS_OK);
    static uint8_t keep[MX_T], want[MX_T];
    static float c1[MX_T], c2[MX_T];
    static uint32_t sel[MX_T], cand[MX_T], work[MX_T];
    for (uint32_t pos = MX_P; pos < MX_T; pos++) {
        float q[MX_D], hi[MX_D], lo[MX_D];
        for (int i = 0; i < MX_D; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            q[i] = (float)((int32_t)(st >> 32)) * 0x1p-31f;
        }
        ck_assert_msg(policy_mpcache.select(ps, 0, pos, q, keep, &e) == MS_OK, "%s", e.msg);
        uint32_t n = pos, G1 = (n + 7) / 8, G2 = (n + 3) / 4;
        for (uint32_t c = 0; c < G1; c++) {
            mx_bounds(8 * c, 8 * c + 8 < n ? 8 * c + 8 : n, hi, lo);
            c1[c] = mx_score(q, hi, lo, 0.6f);
        }
        for (uint32_t c = 0; c < G2; c++) {
            mx_bounds(4 * c, 4 * c + 4 < n ? 4 * c + 4 : n, hi, lo);
            c2[c] = mx_score(q, hi, lo, 0.6f);
        }
        size_t n1 = policy_topk(c1, NULL, G1, (size_t)floor(G1 * 0.5), sel, work);
        uint8_t in1[MX_T] = {0};
        for (size_t i = 0; i < n1; i++)
            in1[sel[i]] = 1;
        in1[0] = 1;
        in1[G1 - 1] |= n % 8 != 0;
        size_t nc = 0;
        for (uint32_t c = 0; c < G2; c++)
            if (in1[c / 2])
                cand[nc++] = c;
        size_t n2 = policy_topk(c2, cand, nc, (size_t)floor(G2 * 0.2), sel, work);
        sel[n2++] = 0;
        if (n % 8)
            sel[n2++] = G2 - 1;
        memset(want, 0, pos);
        for (size_t i = 0; i < n2; i++)
            for (uint32_t t = 4 * sel[i]; t < 4 * sel[i] + 4 && t < n; t++)
                want[t] = 1;
        for (uint32_t j = 0; j < pos; j++)
            ck_assert_msg(keep[j] == want[j], "pos %u: entry %u kept %d, expected %d", pos, j,
                          keep[j], want[j]);
        policy_obs o = {.layer = 0, .pos = pos, .q = q, .k = mx_keys[pos]};
        ck_assert(policy_mpcache.observe(ps, &o, &e) == MS_OK);
    }
    policy_mpcache.fini(ps);
}
END_TEST

/* The local work (element operations, summed over the parties and the WK_ELEM column of the
 * cost log) of a policy's program at one phase over L layers: every layer's call, then the
 * last layer's selection of every layer. 4 query heads over 2 KV heads of 8 dimensions, a
 * prompt of 24, a decode step with 8 cached (the policy's budget: 8) and the new entry. */
static double stack_work(const policy_ops *p, const kv_param *kv, size_t nk, uint32_t L, int phase,
                         const char *proto_name)
{
    policy_env env = {L, 4, 2, 8, 32, 64, 24, 32, NULL, NULL, NULL, 0, NULL};
    policy_args a;
    errbuf e;
    void *st = NULL;
    ck_assert_msg(policy_args_load(p, kv, nk, "t.yaml", &a, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(p->init(&env, &a, &st, &e) == MS_OK, "%s", e.msg);
    op_program prog;
    op_program_init(&prog);
    uint32_t kept[2] = {8, 8};
    for (uint32_t l = 0; l < L; l++)
        ck_assert_msg(p->emit_cost(st, phase, l, phase == PHASE_PREFILL ? 24 : 25,
                                   phase == PHASE_PREFILL ? NULL : kept, &prog, &e) == MS_OK,
                      "%s: %s", p->name, e.msg);
    ck_assert_msg(prog.n_ops > 0, "%s emits nothing", p->name);
    proto_cfg pc;
    cost_log log;
    const proto *pr = proto_find(proto_name);
    ck_assert_int_eq(proto_cfg_default(proto_name, &pc, &e), MS_OK);
    cost_log_init(&log, pr->n_parties);
    ck_assert_msg(proto_cost_program(pr, &pc, &prog, &log, &e) == MS_OK, "%s", e.msg);
    double w = 0;
    for (size_t r = 0; r < log.n; r++)
        for (int q = 0; q < pr->n_parties; q++)
            w += log.r[r].work[q][WK_ELEM];
    cost_log_free(&log);
    op_program_free(&prog);
    p->fini(st);
    return w;
}

/* tova and h2o write every layer's rows into one stack for the one selection of every layer
 * (the prompt's TOPK + GATHER, a step's ARGMAX + SELECT). Each layer's call emits the same ops
 * on its own rows and the selection's ops take every layer as instances, so every op's element
 * count is proportional to L and the local work at 2L layers is exactly twice that at L. A
 * write that re-lays the whole stack (an append into L·rows rows at each of the L layers)
 * costs L²·rows: more than twice. */
START_TEST(test_stack_linear)
{
    const char *protos[2] = {"semi2k", "aby3"};
    for (int which = 0; which < 2; which++) {
        const policy_ops *p = which ? &policy_h2o : &policy_tova;
        kv_param kv[2] = {kvp("cache_size", "8")};
        size_t nk = 1;
        if (which)
            kv[0] = kvp("heavy", "4"), kv[1] = kvp("recent", "4"), nk = 2;
        for (int ph = 0; ph < 2; ph++)
            for (int pi = 0; pi < 2; pi++) {
                int phase = ph ? PHASE_DECODE : PHASE_PREFILL;
                double w4 = stack_work(p, kv, nk, 4, phase, protos[pi]);
                double w8 = stack_work(p, kv, nk, 8, phase, protos[pi]);
                ck_assert_msg(w4 > 0 && w8 == 2 * w4,
                              "%s %s %s: local work %.0f at 4 layers, %.0f at 8", p->name,
                              ph ? "decode" : "prompt", protos[pi], w4, w8);
            }
    }
}
END_TEST

/* CriticalKV's ‖W_o^h V_j‖₁ over many prompt positions, computed in blocks of positions (and
 * wide or portable): 2 layers observed in turn, P = 75 (blocks of 32, 32 and 11), a width of 5
 * (rows in fours and one more), stage 1 empty and every window row uniform, so each layer's
 * non-window base is one value and the kept set is the window and the top capacity − 4 by the
 * norm as this test computes it, one position at a time; at six capacities. */
START_TEST(test_criticalkv_blocks)
{
    enum { L = 2, H = 4, HKV = 2, D = 8, W = 5, P = 75, CAP = 20, WIN = 4 };
    const uint32_t G = H / HKV;
    static float v[L][P][HKV * D], wo[L][W * H * D], att[H * P];
    static double proj[L][HKV][P];
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (uint32_t l = 0; l < L; l++) {
        for (uint32_t j = 0; j < P; j++)
            for (uint32_t i = 0; i < HKV * D; i++) {
                x = x * 6364136223846793005u + 1442695040888963407u;
                /* the window's values three times as large: it is kept whatever its base */
                v[l][j][i] = ((float)(x >> 40) / (float)(1u << 24) - 0.5f) * (j >= P - WIN ? 6 : 2);
            }
        for (uint32_t i = 0; i < W * H * D; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            wo[l][i] = (float)(x >> 40) / (float)(1u << 24) - 0.5f;
        }
    }
    /* the norm as one position at a time computes it */
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t j = 0; j < P; j++)
            for (uint32_t h = 0; h < H; h++) {
                double l1 = 0;
                for (uint32_t r = 0; r < W; r++) {
                    float y = 0;
                    for (uint32_t i = 0; i < D; i++)
                        y += wo[l][(size_t)r * H * D + h * D + i] * v[l][j][(h / G) * D + i];
                    l1 += fabsf(y);
                }
                proj[l][h / G][j] += l1 / G;
            }
    policy_env env = {.n_layers = L,
                      .n_heads = H,
                      .n_kv_heads = HKV,
                      .head_dim = D,
                      .dim = W,
                      .ffn_dim = 4,
                      .prompt_len = P,
                      .max_len = P + 1};
    static const char *const caps[] = {"8", "14", "20", "31", "47", "62"};
    for (int run = 0; run < 12; run++) {
        int portable = run % 2;
        uint32_t top = (uint32_t)atoi(caps[run / 2]) - WIN;
        kv_param kv[] = {kvp("window", "4"), kvp("kernel", "1"), kvp("capacity", caps[run / 2]),
                         kvp("first_stage_ratio", "0")};
        policy_portable_kernels = portable;
        policy_args a;
        errbuf e;
        void *st = NULL;
        ck_assert_msg(policy_args_load(&policy_criticalkv, kv, 4, "t.yaml", &a, &e) == MS_OK, "%s",
                      e.msg);
        ck_assert_msg(policy_criticalkv.init(&env, &a, &st, &e) == MS_OK, "%s", e.msg);
        for (uint32_t pos = 0; pos < P; pos++) {
            for (uint32_t h = 0; h < H; h++)
                for (uint32_t j = 0; j <= pos; j++)
                    att[h * (pos + 1) + j] = 1.0f / (float)(pos + 1);
            for (uint32_t l = 0; l < L; l++) {
                policy_obs o = {.layer = l, .pos = pos, .v = v[l][pos], .wo = wo[l], .att = att};
                if (!(policy_criticalkv.needs(st, pos) & POLICY_NEED_ATT))
                    o.att = NULL;
                ck_assert_msg(policy_criticalkv.observe(st, &o, &e) == MS_OK, "%s", e.msg);
            }
        }
        ck_assert_msg(policy_criticalkv.prefill(st, &e) == MS_OK, "%s", e.msg);
        uint8_t keep[HKV * P];
        for (uint32_t l = 0; l < L; l++) {
            ck_assert_msg(policy_criticalkv.select(st, l, P, NULL, keep, &e) == MS_OK, "%s", e.msg);
            for (uint32_t g = 0; g < HKV; g++) {
                const double *pj = proj[l][g];
                /* the top-th largest of the non-window norms, and the next */
                double t16 = 0, t17 = 0;
                for (uint32_t j = 0; j < P - WIN; j++) {
                    uint32_t above = 0;
                    for (uint32_t i = 0; i < P - WIN; i++)
                        above += pj[i] > pj[j];
                    t16 = above == top - 1 ? pj[j] : t16;
                    t17 = above == top ? pj[j] : t17;
                }
                ck_assert_msg(t16 > t17 * (1 + 1e-4), "layer %u head %u: %g and %g tie", l, g, t16,
                              t17);
                for (uint32_t j = 0; j < P; j++) {
                    int want = j >= P - WIN || pj[j] >= t16;
                    ck_assert_msg(
                        keep[g * P + j] == want,
                        "%s, top %u: layer %u head %u entry %u (norm %g, last %g): kept %u",
                        portable ? "portable kernels" : "the CPU's kernels", top, l, g, j, pj[j],
                        t16, keep[g * P + j]);
                }
            }
        }
        policy_criticalkv.fini(st);
    }
    policy_portable_kernels = 0;
}
END_TEST

Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = th_case(s, "core", 0);
    TH_TESTS(tc, test_registry, test_params, test_args_loaded, test_topk);
    TH_LOOPS(tc, (int)(sizeof policy_cases / sizeof policy_cases[0]), test_policy_case);
    TH_TESTS(tc, test_emit_shapes, test_quest_attend_public, test_half_outward,
             test_mpcache_many_clusters, test_bound_kernels, test_metric_stride_default,
             test_h2o_victim, test_stack_linear, test_criticalkv_blocks);
    return s;
}
