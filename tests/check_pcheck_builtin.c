/* check_pcheck_builtin.c — `mpcsim policy check` on the in-tree policies whose emit_cost takes
 * its operands and names its selection (pcheck_checked_names, marked "cost: checked" by `list
 * policies`): each one's ops, run on the plain engine over a recorded stories260K trace, gather
 * what its select() keeps at every layer, KV head and decode step; copies broken on purpose (a
 * selection that disagrees, ops that never gather) are caught. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stories.h"
#include "testdir.h"
#include "sim/policy/pcheck.h"
#include "sim/policy/policy.h"
#include "sim/trace/trace.h"

/* Parameters at which each checked policy chooses on a prompt of 32 (its defaults keep the
 * whole of so short a prompt). Every name of pcheck_checked_names has a row. */
static const struct {
    const char *name;
    const char *kv[4][2];
} cases[] = {
    {"snapkv", {{"capacity", "16"}, {"window", "8"}}},
    {"snapkv", {{"capacity", "20"}, {"window", "8"}, {"pooling", "avgpool"}, {"kernel", "4"}}},
    {"snapkv", {{"capacity", "12"}, {"window", "4"}, {"kernel", "1"}}},
    {"pyramidkv", {{"capacity", "20"}, {"window", "8"}, {"beta", "2"}}},
    {"quest", {{"budget", "16"}, {"page", "4"}, {"min_pages", "1"}, {"skip_layers", "0"}}},
    /* a partial last page at every step but one in five, the prompt's too */
    {"quest", {{"budget", "10"}, {"page", "5"}, {"min_pages", "1"}, {"skip_layers", "0"}}},
    {"criticalkv", {{"capacity", "16"}, {"window", "8"}}},
    {"criticalkv", {{"capacity", "20"}, {"window", "8"}, {"pooling", "avgpool"}, {"kernel", "4"}}},
    {"criticalkv",
     {{"capacity", "12"}, {"window", "4"}, {"kernel", "1"}, {"first_stage_ratio", "0"}}},
    /* an eviction at every decode step, the slots' order carried from step to step */
    {"tova", {{"cache_size", "8"}}},
    {"tova", {{"cache_size", "10"}}},
    {"tova", {{"kv_budget", "0.125"}}},
};

enum { P = 32, T = 64 };

TESTDIR("check_pcheck_builtin")

static trace *tr;

static void open_trace(void)
{
    char what[200];
    errbuf e = {{0}};
    ck_assert_msg(pcheck_default_trace(T, &tr, what, sizeof what, &e) == MS_OK, "%s", e.msg);
}

static void close_trace(void)
{
    trace_close(tr);
    tr = NULL;
}

/* pcheck_run of p with the case's parameters (kv: up to 4 pairs, NULL-ended) over trace t,
 * prompt p_len, up to t_len. */
static void run_at(const policy_ops *p, const char *const (*kv)[2], trace *t, uint32_t p_len,
                   uint32_t t_len, pcheck_result *r)
{
    kv_param par[4];
    size_t n = 0;
    for (; n < 4 && kv[n][0]; n++)
        par[n] = fixture_kvp(kv[n][0], kv[n][1], (int)n + 3, 5);
    policy_args a;
    errbuf e = {{0}};
    ck_assert_msg(policy_args_load(p, par, n, "t.yaml", &a, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(pcheck_run(p, &a, t, p_len, t_len, r, &e) == MS_OK, "%s", e.msg);
}

static void run(const policy_ops *p, const char *const (*kv)[2], pcheck_result *r)
{
    run_at(p, kv, tr, P, T, r);
}

/* Every checked policy matches, choosing at every mask, ties only within its stated bound;
 * the table above covers every checked name. */
START_TEST(test_checked_match)
{
    const trace_shape *sh = trace_get_shape(tr);
    size_t masks = (size_t)(T - P) * sh->n_layers * sh->n_kv_heads;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const policy_ops *p = policy_find(cases[i].name);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(pcheck_cost_of(p), PCOST_CHECKED);
        pcheck_result r;
        run(p, cases[i].kv, &r);
        ck_assert_msg(r.ran && r.match, "%s case %zu: %s", cases[i].name, i, r.msg);
        ck_assert_uint_eq(r.n_checked, masks);
        ck_assert_uint_eq(r.n_chosen, masks);
        ck_assert_uint_gt(r.n_ops, 0);
    }
    for (size_t k = 0; pcheck_checked_names[k]; k++) {
        int found = 0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            found |= !strcmp(cases[i].name, pcheck_checked_names[k]);
        ck_assert_msg(found, "%s is marked checked and has no case here", pcheck_checked_names[k]);
    }
}
END_TEST

/* ---- copies broken on purpose -------------------------------------------------------------- */

static const policy_ops *orig;
static uint32_t n_cand; /* the candidates [0, n_cand) of the broken select */

/* select() keeps none of the candidates its ops choose among */
static int sel_none(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                    errbuf *e)
{
    int rc = orig->select(st, layer, pos, q, keep, e);
    uint32_t Hkv = trace_get_shape(tr)->n_kv_heads;
    for (uint32_t g = 0; !rc && g < Hkv; g++)
        memset(keep + (size_t)g * pos, 0, n_cand < pos ? n_cand : pos);
    return rc;
}

/* select() keeps as many entries, one of them the wrong one: the first it keeps swapped for the
 * first it drops */
static int sel_swap(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                    errbuf *e)
{
    int rc = orig->select(st, layer, pos, q, keep, e);
    uint32_t Hkv = trace_get_shape(tr)->n_kv_heads;
    for (uint32_t g = 0; !rc && g < Hkv; g++) {
        uint8_t *row = keep + (size_t)g * pos;
        uint32_t a = 0, b = 0;
        while (a < pos && !row[a])
            a++;
        while (b < pos && row[b])
            b++;
        if (a < pos && b < pos)
            row[a] = 0, row[b] = 1;
    }
    return rc;
}

/* emit_cost without its gathers and the ops that lay their results out (tova's last layer
 * gathers every layer's rows at once, then re-lays each layer's into its state): the rows it
 * names are computed by no op */
static int emit_nogather(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                         op_program *prog, errbuf *e)
{
    size_t n0 = prog->n_ops;
    int rc = orig->emit_cost(st, phase, layer, kv_len, kept, prog, e);
    uint8_t *gone = calloc(prog->n_tens + 1, 1);
    ck_assert_ptr_nonnull(gone);
    size_t w = n0;
    for (size_t i = n0; i < prog->n_ops; i++) {
        const op *o = &prog->ops[i];
        int drop = o->kind == OP_GATHER;
        for (int k = 0; k < 3 && !drop; k++)
            drop = o->kind == OP_VIEW && o->in[k] < prog->n_tens && gone[o->in[k]];
        if (drop && o->out < prog->n_tens)
            gone[o->out] = 1;
        if (!drop)
            prog->ops[w++] = prog->ops[i];
    }
    prog->n_ops = w;
    free(gone);
    return rc;
}

START_TEST(test_broken_caught)
{
    static const char *const kv[5][4][2] = {
        {{"capacity", "16"}, {"window", "8"}},
        {{"capacity", "16"}, {"window", "8"}},
        {{"budget", "8"}, {"page", "4"}, {"min_pages", "1"}, {"skip_layers", "0"}},
        {{"capacity", "16"}, {"window", "8"}},
        {{"cache_size", "8"}}};
    const char *names[] = {"snapkv", "pyramidkv", "quest", "criticalkv", "tova"};
    const char *sel[] = {"L0.snap.kept", "L0.snap.kept", "L0.quest.kv_kept", "L0.ckv.kept",
                         "L0.tova.slots"};
    for (size_t i = 0; i < 5; i++) {
        orig = policy_find(names[i]);
        /* quest, tova: every cached entry a candidate; criticalkv: every prompt entry */
        n_cand = i < 2 ? P - 8 : i == 3 ? P : T;
        policy_ops bad = *orig;
        bad.select = i == 4 ? sel_swap : sel_none; /* tova's count decides its ops' shapes */
        pcheck_result r;
        run(&bad, kv[i], &r);
        ck_assert_msg(r.ran && !r.match, "%s: %s", names[i], r.msg);
        ck_assert_msg(
            strstr(r.msg, "layer 0, KV head 0, decode position 32: entry ") &&
                strstr(r.msg, i == 4 ? " is kept by " : " is kept by its ops and not by select()"),
            "%s: %s", names[i], r.msg);
        bad = *orig;
        bad.emit_cost = emit_nogather;
        run(&bad, kv[i], &r);
        ck_assert_msg(r.ran && !r.match, "%s: %s", names[i], r.msg);
        char want[200];
        snprintf(want, sizeof want,
                 "layer 0 position 32: its selection %s is computed by none of its ops (no "
                 "gather)",
                 sel[i]);
        ck_assert_msg(strstr(r.msg, want), "%s: %s", names[i], r.msg);
    }
}
END_TEST

/* criticalkv's score ops once computed something else than its select() (|y| as y·[y < 0], the
 * 0/1 product truncated, stage 1 never raised into the score, no window padding): each of
 * those, put back into its emitted program, is a mismatch. */
static int ckv_bug;

/* The op of prog from n0 on whose result is policy_emit's "pol.<tag>.L<l>", or NULL. */
static op *op_of(op_program *prog, size_t n0, const char *tag)
{
    char want[48];
    snprintf(want, sizeof want, "pol.%s.L", tag);
    for (size_t i = n0; i < prog->n_ops; i++)
        if (!strncmp(prog->tens[prog->ops[i].out].name, want, strlen(want)))
            return &prog->ops[i];
    return NULL;
}

static int emit_ckv_bug(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                        op_program *prog, errbuf *e)
{
    size_t n0 = prog->n_ops;
    int rc = orig->emit_cost(st, phase, layer, kv_len, kept, prog, e);
    if (rc || phase != PHASE_PREFILL)
        return rc;
    op *o;
    switch (ckv_bug) {
    case 0: /* |y| as the negative part alone: −y·[y < 0] */
        ck_assert_ptr_nonnull(o = op_of(prog, n0, "ckv.abs"));
        o->in[0] = op_of(prog, n0, "ckv.neg")->out;
        break;
    case 1: /* the product of y with its 0/1 sign truncated */
        ck_assert_ptr_nonnull(o = op_of(prog, n0, "ckv.neg"));
        o->flags &= ~OPF_NO_TRUNC;
        break;
    case 2: /* stage 1 not raised: score + score */
        ck_assert_ptr_nonnull(o = op_of(prog, n0, "ckv.score_s1"));
        o->in[1] = o->in[0];
        break;
    default: /* no window padding: the window's base 0 */
        ck_assert_ptr_nonnull(o = op_of(prog, n0, "ckv.max1"));
        o->kind = OP_MUL_PUB;
        o->farg = 0;
        break;
    }
    return rc;
}

START_TEST(test_ckv_bugs_caught)
{
    /* stage 1 keeps more than the window, so that it decides some entries (no pooling: its
     * plateaus of equal votes would be ties stage 1's top-k breaks its own way) */
    static const char *const kv[4][2] = {
        {"capacity", "16"}, {"window", "4"}, {"kernel", "1"}, {"first_stage_ratio", "0.75"}};
    orig = policy_find("criticalkv");
    policy_ops bad = *orig;
    bad.emit_cost = emit_ckv_bug;
    pcheck_result r;
    for (ckv_bug = 0; ckv_bug < 4; ckv_bug++) {
        run(&bad, kv, &r);
        ck_assert_msg(r.ran && !r.match && strstr(r.msg, " is kept by "), "bug %d: %s", ckv_bug,
                      r.msg);
    }
    run(orig, kv, &r);
    ck_assert_msg(r.ran && r.match, "%s", r.msg);
}
END_TEST

/* ---- ties carried in a policy's state ------------------------------------------------------ */

/* tova's ops evicting the largest head sum instead of the smallest: each layer's call puts
 * its head sums themselves, not their negation, among the rows the arg-max takes (the SUB whose
 * operands are one tensor is (x − x); the SUB of it and the sums is the negation). */
static int emit_tova_max(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                         op_program *prog, errbuf *e)
{
    size_t n0 = prog->n_ops;
    int rc = orig->emit_cost(st, phase, layer, kv_len, kept, prog, e);
    if (rc || phase != PHASE_DECODE)
        return rc;
    uint32_t sum = OP_NONE, zero = OP_NONE, neg = OP_NONE;
    for (size_t i = n0; i < prog->n_ops; i++) {
        const op *o = &prog->ops[i];
        if (o->kind == OP_SUB && o->in[0] == o->in[1])
            sum = o->in[0], zero = o->out;
        else if (o->kind == OP_SUB && zero != OP_NONE && o->in[0] == zero && o->in[1] == sum)
            neg = o->out;
    }
    ck_assert_uint_ne(neg, OP_NONE);
    int moved = 0;
    for (size_t i = n0; i < prog->n_ops; i++)
        if (prog->ops[i].kind != OP_SUB && prog->ops[i].in[0] == neg)
            prog->ops[i].in[0] = sum, moved++;
    ck_assert_int_gt(moved, 0);
    return rc;
}

/* A choice the plain engine's fixed point breaks otherwise among near-equal candidates, which
 * the policy carries on: TOVA's evictions on a prompt of 96 (head means of ~1e-17 round to the
 * same fixed-point value at the prompt's top-k and the first evictions), CriticalKV's stage 1
 * over max-pooling's plateaus larger than the window. Both mismatched before the check adopted
 * the ops' choice into the policy's state; each is now a match with ties carried, their
 * spread within the bound TOVA states (u = 2^-18 per pair of rounded head means, plus float's
 * (H + 3)·2^-23 with H = 8 heads) and CriticalKV's (gap 0: equal votes). Copies that choose
 * otherwise by more than a tie are still a MISMATCH: tova's ops evicting the largest entry,
 * criticalkv's former score errors at this configuration. */
START_TEST(test_ties_carried)
{
    enum { P2 = 96, T2 = 128 };
    trace *t = NULL;
    char what[200];
    errbuf e = {{0}};
    ck_assert_msg(pcheck_default_trace(T2, &t, what, sizeof what, &e) == MS_OK, "%s", e.msg);
    const trace_shape *sh = trace_get_shape(t);
    ck_assert_uint_eq(sh->n_heads, 8);
    static const char *const tv[2][4][2] = {{{"cache_size", "16"}}, {{"cache_size", "32"}}};
    orig = policy_find("tova");
    pcheck_result r;
    for (int i = 0; i < 2; i++) {
        run_at(orig, tv[i], t, P2, P2 + 16, &r);
        ck_assert_msg(r.ran && r.match, "tova %s: %s", tv[i][0][1], r.msg);
        ck_assert_uint_eq(r.n_checked, (size_t)16 * sh->n_layers * sh->n_kv_heads);
        ck_assert_uint_eq(r.n_chosen, r.n_checked);
        ck_assert_uint_gt(r.n_carried, 0);
        ck_assert_double_le(r.carry_gap, 0x1p-18 + 11 * 0x1p-23);
        policy_ops bad = *orig;
        bad.emit_cost = emit_tova_max;
        run_at(&bad, tv[i], t, P2, P2 + 16, &r);
        ck_assert_msg(r.ran && !r.match && strstr(r.msg, " is kept by "), "tova max %s: %s",
                      tv[i][0][1], r.msg);
        ck_assert_uint_eq(r.n_carried, 0);
    }

    static const char *const ck[4][2] = {{"capacity", "32"}, {"window", "8"}};
    orig = policy_find("criticalkv");
    run_at(orig, ck, t, P2, T2, &r);
    ck_assert_msg(r.ran && r.match, "criticalkv: %s", r.msg);
    ck_assert_uint_eq(r.n_checked, (size_t)(T2 - P2) * sh->n_layers * sh->n_kv_heads);
    ck_assert_uint_gt(r.n_carried, 0);
    ck_assert_double_eq(r.carry_gap, 0);
    policy_ops bad = *orig;
    bad.emit_cost = emit_ckv_bug;
    for (ckv_bug = 0; ckv_bug < 4; ckv_bug++) {
        run_at(&bad, ck, t, P2, T2, &r);
        ck_assert_msg(r.ran && !r.match && strstr(r.msg, " is kept by "), "bug %d: %s", ckv_bug,
                      r.msg);
    }
    trace_close(t);
}
END_TEST

/* The command line: a match (exit 0) and the mark of `list policies`. */
START_TEST(test_cli)
{
    char out[1 << 16];
    th_cli_expect(out, sizeof out, 0, "snapkv: match\n",
                  "policy check snapkv --param capacity=16 --param window=8");
    ck_assert_msg(strstr(out, "640 keep masks"), "%s", out);
    th_cli_expect(out, sizeof out, 0, "criticalkv: match\n",
                  "policy check criticalkv --param capacity=16 --param window=8");
    th_cli_expect(out, sizeof out, 0, "tova: match\n", "policy check tova --param cache_size=8");
    th_cli_expect(out, sizeof out, 0, "tova: match\n",
                  "policy check tova --param cache_size=16 --prompt 96 --decode 16");
    ck_assert_msg(strstr(out, " ties carried in its state ("), "%s", out);
    th_cli_expect(out, sizeof out, 0, "policy ", "list policies");
    for (size_t k = 0; pcheck_checked_names[k]; k++) {
        char want[64];
        snprintf(want, sizeof want, "\n%s ", pcheck_checked_names[k]);
        const char *at = strstr(out, want);
        ck_assert_msg(at && !strncmp(strchr(at + 1, '\n'), "\n    cost: checked (", 20), "%s", out);
    }
}
END_TEST

/* ---- replay_masks: masks from outside, checked against the cost they are declared as ------ */

static int32_t *masks; /* [L][T][Hkv][T] */

static void masks_write(const char *dir, uint32_t L, uint32_t Hkv)
{
    char path[600];
    snprintf(path, sizeof path, "%s/keep.npy", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    trace_npy h = {.dtype = 'i', .ndim = 4, .shape = {L, T, Hkv, T}};
    ck_assert_int_eq(trace_npy_write_header(f, &h), MS_OK);
    size_t n = (size_t)L * T * Hkv * T;
    ck_assert_uint_eq(fwrite(masks, sizeof *masks, n, f), n);
    fclose(f);
}

/* The keep masks snapkv {capacity 16, window 8} selects over trace t, as its replay drives it
 * (decode rows; the prompt's rows are not read). */
static void snapkv_masks(trace *t)
{
    const trace_shape *sh = trace_get_shape(t);
    uint32_t L = sh->n_layers, H = sh->n_heads, Hkv = sh->n_kv_heads;
    policy_env env = {L, H,    Hkv,  sh->head_dim, sh->dim, sh->ffn_dim, P,
                      T, NULL, NULL, NULL,         0,       NULL};
    const policy_ops *p = policy_find("snapkv");
    static const char *const kv[4][2] = {{"capacity", "16"}, {"window", "8"}};
    kv_param par[2] = {fixture_kvp(kv[0][0], kv[0][1], 3, 5),
                       fixture_kvp(kv[1][0], kv[1][1], 4, 5)};
    policy_args a;
    errbuf e = {{0}};
    void *st;
    ck_assert_int_eq(policy_args_load(p, par, 2, "t.yaml", &a, &e), MS_OK);
    ck_assert_msg(p->init(&env, &a, &st, &e) == MS_OK, "%s", e.msg);
    for (uint32_t pos = 0; pos < P; pos++) {
        ck_assert_int_eq(trace_seek(t, pos, &e), MS_OK);
        for (uint32_t l = 0; l < L; l++) {
            policy_obs o = {.layer = l, .pos = pos, .q = trace_q(t, l)};
            if (p->needs(st, pos) & POLICY_NEED_ATT)
                o.att = trace_att(t, l);
            ck_assert_int_eq(p->observe(st, &o, &e), MS_OK);
        }
    }
    ck_assert_int_eq(p->prefill(st, &e), MS_OK);
    uint8_t keep[4 * T];
    ck_assert_uint_le(Hkv, 4);
    for (uint32_t pos = P; pos < T; pos++)
        for (uint32_t l = 0; l < L; l++) {
            ck_assert_int_eq(p->select(st, l, pos, NULL, keep, &e), MS_OK);
            for (uint32_t g = 0; g < Hkv; g++)
                for (uint32_t j = 0; j < pos; j++)
                    masks[(((size_t)l * T + pos) * Hkv + g) * T + j] = keep[(size_t)g * pos + j];
        }
    p->fini(st);
}

/* replay_masks' selection comes from outside; what it declares is its cost: `cost_as` runs that
 * policy's ops beside the masks. The check then tells whether those ops compute the masks:
 * masks dumped from snapkv's own selection match `cost_as: snapkv`; StreamingLLM's masks do
 * not (a MISMATCH, exit 1), and `cost_as: none` (free, public positions) cannot be compared
 * while the masks drop entries (cost declared). */
START_TEST(test_replay_masks)
{
    char *dir = strdup(testdir_path(&td, "tr"));
    ck_assert_int_eq(th_runl(NULL, testdir_path(&td, "rec.txt"), NULL, "trace", "record", "--model",
                             "stories260K", "--text",
                             th_data_path("tests/data/tinystories_sample.txt"), "--max-tokens",
                             "64", "-o", dir, (char *)NULL),
                     0);
    trace *t;
    errbuf e = {{0}};
    ck_assert_int_eq(trace_open(dir, &t, &e), MS_OK);
    const trace_shape *sh = trace_get_shape(t);
    uint32_t L = sh->n_layers, Hkv = sh->n_kv_heads;
    masks = calloc((size_t)L * T * Hkv * T, sizeof *masks);
    snapkv_masks(t);
    masks_write(dir, L, Hkv);
    const policy_ops *rm = policy_find("replay_masks");
    kv_param par[3] = {fixture_kvp("cost_as", "snapkv", 3, 5), fixture_kvp("capacity", "16", 4, 5),
                       fixture_kvp("window", "8", 5, 5)};
    policy_args a;
    ck_assert_int_eq(policy_args_load(rm, par, 3, "t.yaml", &a, &e), MS_OK);
    pcheck_result r;
    ck_assert_msg(pcheck_run_dir(rm, &a, t, dir, P, T, &r, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(r.ran && r.match, "%s", r.msg);
    ck_assert_uint_eq(r.n_chosen, (size_t)(T - P) * L * Hkv);

    char out[8192];
    th_cli_expect(out, sizeof out, 0, "replay_masks: match\n",
                  "policy check replay_masks --trace '%s' --param cost_as=snapkv --param "
                  "capacity=16 --param window=8",
                  dir);
    for (uint32_t l = 0; l < L; l++) /* StreamingLLM: sink 4, recent 8 */
        for (uint32_t pos = P; pos < T; pos++)
            for (uint32_t g = 0; g < Hkv; g++)
                for (uint32_t j = 0; j < pos; j++)
                    masks[(((size_t)l * T + pos) * Hkv + g) * T + j] = j < 4 || j + 8 >= pos;
    masks_write(dir, L, Hkv);
    th_cli_expect(out, sizeof out, 1,
                  "replay_masks: MISMATCH: layer 0, KV head 0, decode position 32: entry ",
                  "policy check replay_masks --trace '%s' --param cost_as=snapkv --param "
                  "capacity=16 --param window=8",
                  dir);
    th_cli_expect(out, sizeof out, 1, "replay_masks: cost declared (not checked: ",
                  "policy check replay_masks --trace '%s' --param cost_as=none", dir);
    free(masks);
    trace_close(t);
    free(dir);
}
END_TEST

Suite *pcheck_builtin_suite(void)
{
    Suite *s = suite_create("pcheck_builtin");
    TCase *tc = th_case(s, "core", 0);
    tcase_add_checked_fixture(tc, open_trace, close_trace);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_checked_match, test_broken_caught, test_ckv_bugs_caught, test_ties_carried,
             test_cli, test_replay_masks);
    return s;
}
