/* check_scores.c — the protocol option gather: rows|scores (models/lower.c, score side): the
 * simulator's bytes of both layouts against the per-head formulas written apart from the code
 * (sim/policy/POLICIES.md "Score-side attention"), what the option leaves alone, its spelling
 * and its label. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/lower.h"
#include "models/model.h"
#include "protocols/program/opb.h"
#include "protocols/program/proto.h"
#include "sim/scenario/runlabel.h"
#include "stories.h"
#include "testdir.h"

TESTDIR("check_scores")

static model_cfg load(const char *name)
{
    model_cfg m;
    errbuf e;
    int rc = model_load(name, &m, &e);
    ck_assert_msg(rc == MS_OK, "%s", e.msg);
    return m;
}

/* A decode step at C cached entries whose layer `sel` holds a policy's row gather: a secret
 * one-hot (Hkv, mu, ku) picking mu of ku units of U rows, each row 2d + e wide (phase, layer
 * and batch as given); the other layers attend all. */
typedef struct step_case {
    uint32_t mu, ku, U, e;
    int phase, layer, batch; /* the gather's; batch 0: the model's KV heads */
} step_case;

/* The step's online bytes (every party's, summed) and rounds under the layout. */
static void step_cost(const model_cfg *m, const char *pn, const step_case *c, int scores,
                      uint64_t *bytes, uint64_t *rounds)
{
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, C = c->ku * c->U, R = c->mu * c->U;
    uint32_t B = c->batch ? (uint32_t)c->batch : Hkv;
    op_program p;
    op_program_init(&p);
    opb w;
    opb_init(&w, &p, c->phase, c->layer, OPC_POLICY, "pol.");
    uint32_t oh = opb_tensor(&w, "onehot", OPT_CACHE, B, c->mu, c->ku);
    uint32_t tab = opb_tensor(&w, "table", OPT_CACHE, B, c->ku, c->U * (2 * d + c->e));
    uint32_t out = opb_tensor(&w, "rows", OPT_TEMP, B, c->mu, c->U * (2 * d + c->e));
    opb_op(&w, OP_GATHER, B, c->mu, c->ku, c->U * (2 * d + c->e), oh, tab, OP_NONE, out,
           OPF_NO_TRUNC, 0, 0);
    ck_assert(!opb_failed(&w));
    uint32_t *kept = malloc((size_t)m->n_layers * Hkv * sizeof *kept);
    ck_assert_ptr_nonnull(kept);
    for (uint32_t l = 0; l < m->n_layers; l++)
        for (uint32_t g = 0; g < Hkv; g++)
            kept[(size_t)l * Hkv + g] = (int)l == c->layer ? R : C;
    lower_opts o;
    lower_opts_default(&o);
    o.kv_len = C;
    o.kept = kept;
    o.score_gather = scores;
    errbuf e;
    ck_assert_msg(lower_step(m, &o, &p, &e) == MS_OK, "%s", e.msg);
    proto_cfg cfg;
    ck_assert_int_eq(proto_cfg_default(pn, &cfg, &e), MS_OK);
    fixture_program_cost(pn, &cfg, &p, bytes, rounds);
    op_program_free(&p);
    free(kept);
}

/* Written from PRIMITIVES.md's tables, per KV head of G query heads, one new token (t = 1),
 * R = mu·U kept rows of C = ku·U: the score side minus the rows.
 *   aby3: every secret product reshares its output, 24 B per entry (SPU mmul_aa); the fixed-
 *   point products (q·Kᵀ, ·V) are truncated, pair truncation 40 + ⌈(f+1)/8⌉ B per entry.
 *   Outputs: rows R(2d+e) + G(R+1) + Gd; scores G(C+1) + R(G+e) + GC + Gd. Difference
 *   24·(2GC − 2dR) + τ·G(C − R).
 *   semi2k: a secret product opens both operands, 16 B per entry (SPU mmul_aa, MulOpen); pair
 *   truncation 16 B per entry. Difference 16·(mu·ku − 2dR + 3GC − GR). */
static int64_t formula(const model_cfg *m, const char *pn, const step_case *c)
{
    int64_t Hkv = m->n_kv_heads, G = m->n_heads / m->n_kv_heads, d = m->head_dim;
    int64_t C = (int64_t)c->ku * c->U, R = (int64_t)c->mu * c->U;
    if (!strcmp(pn, "aby3")) {
        int64_t tau = 40 + (18 + 1 + 7) / 8; /* frac_bits 18 */
        return Hkv * (24 * (2 * G * C - 2 * d * R) + tau * G * (C - R));
    }
    return Hkv * 16 * ((int64_t)c->mu * c->ku - 2 * d * R + 3 * G * C - G * R);
}

START_TEST(test_scores_formula)
{
    /* GQA (stories260K: 8 heads over 4 KV heads, d 8) and MHA (gpt2: d 64); rows of one token
     * (Quest-like units of 1, no extra column) and MPCache's 16-clusters with its mask column */
    const char *models[] = {"stories260K", "gpt2"};
    const step_case cases[] = {{40, 200, 1, 0, PHASE_DECODE, 1, 0},
                               {6, 25, 16, 1, PHASE_DECODE, 2, 0}};
    const char *protos[] = {"semi2k", "aby3"};
    for (size_t mi = 0; mi < 2; mi++) {
        model_cfg m = load(models[mi]);
        for (size_t ci = 0; ci < 2; ci++)
            for (size_t pi = 0; pi < 2; pi++) {
                uint64_t br, bs, rr, rs;
                step_cost(&m, protos[pi], &cases[ci], 0, &br, &rr);
                step_cost(&m, protos[pi], &cases[ci], 1, &bs, &rs);
                int64_t want = formula(&m, protos[pi], &cases[ci]);
                ck_assert_msg((int64_t)bs - (int64_t)br == want,
                              "%s %s case %zu: scores − rows = %lld B, formula %lld B", models[mi],
                              protos[pi], ci, (long long)((int64_t)bs - (int64_t)br),
                              (long long)want);
                /* the gather's round becomes the gather's and the scatter's */
                ck_assert_uint_eq(rs, rr + 1);
            }
    }
}
END_TEST

START_TEST(test_scores_leaves_others)
{
    /* a compaction over the layers (layer −1), a prefill selection, a gather over every KV head
     * at once (batch 1): the same program under either layout */
    model_cfg m = load("stories260K");
    const step_case cases[] = {{40, 200, 1, 1, PHASE_DECODE, -1, 0},
                               {40, 200, 1, 1, PHASE_PREFILL, 1, 0},
                               {40, 200, 1, 0, PHASE_DECODE, 1, 1}};
    for (size_t ci = 0; ci < 3; ci++) {
        uint64_t br, bs, rr, rs;
        step_cost(&m, "aby3", &cases[ci], 0, &br, &rr);
        step_cost(&m, "aby3", &cases[ci], 1, &bs, &rs);
        ck_assert_msg(br == bs && rr == rs, "case %zu: %llu/%llu B, %llu/%llu rounds", ci,
                      (unsigned long long)br, (unsigned long long)bs, (unsigned long long)rr,
                      (unsigned long long)rs);
    }
}
END_TEST

START_TEST(test_scores_option)
{
    proto_cfg c;
    errbuf e;
    char lab[256];
    ck_assert_int_eq(proto_cfg_default("aby3", &c, &e), MS_OK);
    ck_assert_str_eq(c.gather, "rows");
    run_label_protocol(&c, lab, sizeof lab);
    ck_assert_msg(!strstr(lab, "gather"), "%s", lab);
    ck_assert_int_eq(proto_cfg_set_kv(&c, "gather=scores", &e), MS_OK);
    run_label_protocol(&c, lab, sizeof lab);
    ck_assert_msg(strstr(lab, "gather=scores"), "%s", lab);
    ck_assert_int_ne(proto_cfg_set_kv(&c, "gather=cols", &e), MS_OK);
    ck_assert_msg(strstr(e.msg, "'rows' or 'scores'"), "%s", e.msg);
    ck_assert_str_eq(c.gather, "scores"); /* nothing half-set */
}
END_TEST

/* The CLI: cost --policy mpcache prints the option and costs the score side (other bytes: on
 * stories260K, d = 8 and 2 query heads per KV head, the score side's 2·G·C outputs exceed the
 * 2·d·R it saves unless more than a quarter of the entries are kept: it is dearer here);
 * a policy without a per-step gather (h2o) costs the same; the backend runs the score side of
 * a selection on shares that gathers rows per step. */
START_TEST(test_scores_cli)
{
    const char *out = testdir_path(&td, "out.json"), *err = testdir_path(&td, "err.txt");
    unsigned long long b[2][2];
    const char *pol[2] = {"mpcache", "h2o"}, *lay[2] = {"gather=rows", "gather=scores"};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            ck_assert_int_eq(th_runl(NULL, out, err, "cost", "-m", "stories260K", "-p", "aby3",
                                     "-n", "lan", "-k", "400", "--policy", pol[i], "--set", lay[j],
                                     "--json", NULL),
                             0);
            const char *t = th_text(out);
            ck_assert_int_eq(th_count(t, "\"gather\":\"scores\""), j);
            const char *k = strstr(t, "\"bytes_online\":");
            ck_assert_ptr_nonnull(k);
            b[i][j] = strtoull(k + 15, NULL, 10);
        }
    ck_assert_msg(b[0][1] > b[0][0], "mpcache %llu B scores, %llu B rows", b[0][1], b[0][0]);
    ck_assert_uint_eq(b[1][1], b[1][0]);
    ck_assert_int_eq(th_runl(NULL, out, err, "cost", "-m", "stories260K", "-p", "aby3", "-n", "lan",
                             "-k", "400", "--policy", "mpcache", "--set", "gather=scores", NULL),
                     0);
    ck_assert_msg(strstr(th_text(out), "(3 parties, gather: scores)"), "%s", th_text(out));
    /* MPCache selecting on shares (clusters of 4 of 32 prompt entries, 30 % kept): the backend
     * runs its score side (sim/secure/scoreside.c), every op as predicted, with other decode
     * bytes than the rows' and one more round per replaced gather; the prompt is the same */
    unsigned long long v[2][4];
    for (int j = 0; j < 2; j++) {
        ck_assert_int_eq(th_runl(NULL, out, err, "validate", "--model", "stories260K", "--accuracy",
                                 "40", "--prompt", "32", "--protocol", "aby3", "--policy",
                                 "mpcache", "--policy-param", "static=none", "--policy-param",
                                 "s1=8", "--policy-param", "s2=4", "--policy-param", "ratio2=0.3",
                                 "--set", lay[j], NULL),
                         0);
        const char *t = th_text(out);
        ck_assert_msg(strstr(t, "bytes and rounds of every op of the 9 steps equal the "
                                "prediction: yes"),
                      "%s", t);
        unsigned steps;
        th_measured_nums(t, v[j], &steps);
    }
    ck_assert_uint_eq(v[1][0], v[0][0]);
    ck_assert_uint_eq(v[1][1], v[0][1]);
    ck_assert_uint_ne(v[1][2], v[0][2]);
    ck_assert_uint_gt(v[1][3], v[0][3]);
}
END_TEST

/* The backend under gather: scores where no secret row gather is replaced: no selection on
 * shares (StreamingLLM's kept set, a public function of positions, laid out by public indices)
 * or one that evicts for good (H2O on shares: its compaction stays, as the simulator costs it).
 * The session runs, every op as predicted, with the rows' measured bytes and rounds. */
START_TEST(test_scores_public_keep)
{
    const char *out = testdir_path(&td, "out.txt"), *err = testdir_path(&td, "err.txt");
    unsigned long long v[2][4];
    for (int j = 0; j < 4; j++) {
        ck_assert_int_eq(th_runl(NULL, out, err, "validate", "--model", "stories260K", "--accuracy",
                                 "20", "--protocol", "aby3", "--policy",
                                 j < 2 ? "streamingllm" : "h2o", "--set",
                                 j % 2 ? "gather=scores" : "gather=rows", NULL),
                         0);
        const char *t = th_text(out);
        ck_assert_msg(strstr(t, "bytes and rounds of every op of the 5 steps equal the prediction: "
                                "yes"),
                      "%s", t);
        unsigned steps;
        th_measured_nums(t, v[j % 2], &steps);
        ck_assert_uint_eq(steps, 4);
        for (int i = 0; j % 2 && i < 4; i++)
            ck_assert_uint_eq(v[1][i], v[0][i]);
    }
}
END_TEST

Suite *scores_suite(void)
{
    Suite *s = suite_create("scores");
    TCase *tc = th_case(s, "gather", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_scores_formula, test_scores_leaves_others, test_scores_option,
             test_scores_cli, test_scores_public_keep);
    return s;
}
