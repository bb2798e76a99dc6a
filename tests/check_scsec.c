/* check_scsec.c — gather: scores on shares (sim/secure/scoreside.c) for the selections that
 * gather rows every decode step, MPCache and Quest, in semi2k and aby3 on stories260K: every op
 * costs what the engine predicts, the kept sets are those of gather: rows, the logits agree
 * within fixed-point error, and the bytes saved or added are the per-head formulas of
 * sim/policy/POLICIES.md "Score-side attention" summed over the gathers the score side
 * replaces. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models/lower.h"
#include "protocols/program/opb.h"
#include "sim/engine/machine.h"
#include "sim/engine/net.h"
#include "protocols/program/proto.h"
#include "sim/policy/compose.h"
#include "sim/policy/secpol.h"
#include "sim/replay/replay.h"
#include "sim/secure/scoreside.h"
#include "sim/secure/secinf.h"
#include "sim/secure/valid.h"
#include "stories.h"

enum { N = 36, P = 32 };
STORIES(N)
TESTDIR("check_scsec")

/* Logit tolerance of a secure run against the float computation with the same kept sets
 * (f = 18, approx sigmoid: tests/check_secpol.c, check_validate.c). Given equal kept sets the
 * two layouts compute the same real function — the scattered probabilities are exact (one-hot
 * products need no truncation) and the entries not kept add exact zeros to ·V — so they differ
 * by their fixed-point rounding only: within twice the tolerance of each other. */
#define LOGIT_TOL 0.3

typedef struct scase {
    const char *policy;
    const char *params[4];
    int n_params;
} scase;

/* MPCache with 4-entry clusters and 30 % of them kept by level 2, Quest with 4-entry pages and
 * 16 of the 32 … 35 cached entries: R/C about 0.4 to 0.5 (aby3 saves bytes above
 * 182/470 ≈ 0.39 on stories260K, below). Quest keeping 8 entries: R/C ≈ 0.23, dearer. */
static const scase cases[3] = {
    {"mpcache", {"static=none", "s1=8", "s2=4", "ratio2=0.3"}, 4},
    {"quest", {"page=4", "budget=16"}, 2},
    {"quest", {"page=4", "budget=8"}, 2},
};

/* The score side minus the rows, in bytes summed over the parties, of one replaced gather (a
 * one-hot (Hkv, m, k) over units of U rows), per KV head of G query heads and head size d
 * (POLICIES.md "Score-side attention"): aby3 24·(2GC − 2dR) + τ·G·(C − R), τ = 40 +
 * ⌈(f + 1)/8⌉ its pair truncation per entry; semi2k 16·(m·k − 2dR + 3GC − GR). */
static int64_t formula(const model_cfg *m, const char *pn, int frac, const op *g)
{
    int64_t Hkv = m->n_kv_heads, G = m->n_heads / m->n_kv_heads, d = m->head_dim;
    int64_t w = lower_score_gather_width(m, 1, g), U = g->n / w;
    int64_t C = (int64_t)g->k * U, R = (int64_t)g->m * U;
    if (!strcmp(pn, "aby3"))
        return Hkv * (24 * (2 * G * C - 2 * d * R) + (40 + (frac + 1 + 7) / 8) * G * (C - R));
    return Hkv * 16 * ((int64_t)g->m * g->k - 2 * d * R + 3 * G * C - G * R);
}

/* One session: its result, and each decode step's measured bytes (all parties) and rounds, with
 * every op as predicted. */
typedef struct run {
    secinf_opts o;
    secinf_result r;
    uint64_t bytes[N], rounds[N];
} run;

static void run_case(const scase *c, const char *pn, const char *layout, run *x)
{
    errbuf e = {{0}};
    fixture_opts(&sf, pn, N, P, c->policy, c->params, c->n_params, &x->o);
    snprintf(x->o.cfg.gather, sizeof x->o.cfg.gather, "%s", layout);
    x->o.audit = 1;
    ck_assert_msg(secinf_run(&x->o, &x->r, &e) == MS_OK, "%s %s %s: %s", c->policy, pn, layout,
                  e.msg);
    net_cfg net;
    net_uniform(&net, (int)x->r.n_parties, 0, 1e9);
    machine_profile mach;
    machine_default(&mach);
    for (uint32_t s = 1; s < x->r.n_steps; s++) {
        valid_row row;
        ck_assert_msg(valid_step(&x->o, &x->r, s, &net, &mach, &row, &e) == MS_OK, "%s", e.msg);
        ck_assert_msg(row.ops_mismatched == 0, "%s %s %s step %u: %s", c->policy, pn, layout, s,
                      row.first_mismatch);
        ck_assert_uint_eq(row.meas.rounds, row.pred.rounds);
        x->bytes[s] = 0;
        for (uint32_t i = 0; i < x->r.n_parties; i++) {
            ck_assert_uint_eq(row.meas.bytes[i], row.pred.bytes[i]);
            x->bytes[s] += row.meas.bytes[i];
        }
        x->rounds[s] = row.meas.rounds;
    }
}

static void run_free(run *x)
{
    secinf_result_free(&x->r);
    secinf_spol_free(&x->o.spol);
}

/* The kept positions of (step s, audit tensor rows, its cached table next) as a mask over the
 * table's rows: each gathered row is some row of the table, exactly (one-hot products). */
static void quest_kept(const double *rows, size_t n_rows, const double *tab, size_t n_tab,
                       uint32_t Hkv, uint32_t w, uint8_t *mask)
{
    size_t R = n_rows / Hkv / w, T = n_tab / Hkv / w;
    for (uint32_t g = 0; g < Hkv; g++)
        for (size_t i = 0; i < R; i++) {
            const double *r = rows + ((size_t)g * R + i) * w;
            int zero = 1;
            for (uint32_t c = 0; c < w; c++)
                zero &= r[c] == 0;
            if (zero) /* a partial page's padding row */
                continue;
            size_t j = 0;
            while (j < T && memcmp(r, tab + ((size_t)g * T + j) * w, w * sizeof *r))
                j++;
            ck_assert_msg(j < T, "head %u: gathered row %zu is no cached row", g, i);
            mask[(size_t)g * T + j] = 1;
        }
}

/* The squared key norm of row r of a cached table (rows [K | V] of 2d). */
static double sq_norm(const double *tab, size_t r, uint32_t d)
{
    double sq = 0;
    for (uint32_t c = 0; c < d; c++)
        sq += tab[r * 2 * d + c] * tab[r * 2 * d + c];
    return sq;
}

/* Kept masks ka, kb of Hkv heads of T cached rows chosen by key norm in two runs (tables ta, tb,
 * rows [K | V] of 2d). The runs draw their randomness afresh (mpc_prg_random_key), so their
 * cached keys differ by fixed-point rounding from the prompt on (on stories260K up to 1.6·10⁻³
 * per element, 0.08 in a squared norm of about 224): each run ranks its own norms n_a, n_b.
 * Each run's ops rank within the bound the composition states against float norms (compose.c:
 * keys on 18 fractional bits, each square truncated, summed exactly, |ŝ − s| ≤ ((d + M)/2 +
 * 2d)·2⁻¹⁸ + M·2⁻²⁴, M the largest squared norm; τ twice that, for the two of a swap). So for
 * an entry j only a kept and an entry i only b kept: n_a(j) ≥ n_a(i) − τ, n_b(i) ≥ n_b(j) − τ,
 * and across the runs |n_a(j) − n_a(i)| ≤ τ + |δ_i| + |δ_j|, δ = n_a − n_b of each entry: per
 * head as many rows in one set as in the other, and every such pair within those bounds. */
static void same_norm_ties(const uint8_t *ka, const uint8_t *kb, const double *ta, const double *tb,
                           uint32_t Hkv, uint32_t T, uint32_t d, uint32_t s, const char *nm)
{
    double M = 0;
    for (size_t r = 0; r < (size_t)Hkv * T; r++)
        M = fmax(M, fmax(sq_norm(ta, r, d), sq_norm(tb, r, d)));
    double tau = 2 * (((d + M) / 2 + 2 * d) * 0x1p-18 + M * 0x1p-24);
    for (uint32_t g = 0; g < Hkv; g++) {
        int bal = 0;
        for (uint32_t j = 0; j < T; j++) {
            size_t rj = (size_t)g * T + j;
            if (ka[rj] == kb[rj])
                continue;
            bal += ka[rj] ? 1 : -1;
            if (!ka[rj])
                continue;
            double aj = sq_norm(ta, rj, d), bj = sq_norm(tb, rj, d);
            for (uint32_t i = 0; i < T; i++) {
                size_t ri = (size_t)g * T + i;
                if (!kb[ri] || ka[ri])
                    continue;
                double ai = sq_norm(ta, ri, d), bi = sq_norm(tb, ri, d);
                double cross = tau + fabs(ai - bi) + fabs(aj - bj);
                ck_assert_msg(aj >= ai - tau && bi >= bj - tau && fabs(aj - ai) <= cross,
                              "step %u %s head %u: rows %u (kept by rows) and %u (by scores) "
                              "swap beyond ties: norms %.6f, %.6f and %.6f, %.6f, τ %.6f, "
                              "bound across the runs %.6f",
                              s, nm, g, j, i, aj, ai, bj, bi, tau, cross);
            }
        }
        ck_assert_msg(bal == 0, "step %u %s head %u: kept sets of different sizes (%d)", s, nm, g,
                      bal);
    }
}

/* The selections the audits opened after each decode step are the same in both runs: the
 * one-hots exactly (MPCache's top-k's), Quest's and a composition's kept rows as positions of
 * its cached rows. */
static void same_kept(const run *a, const run *b, const char *policy)
{
    const model_cfg *m = &sf.m;
    errbuf e = {{0}};
    op_program p;
    op_program_init(&p);
    secpol_run pub = secinf_public(&a->o);
    uint32_t compared = 0;
    for (uint32_t s = 1; s < a->r.n_steps; s++) {
        ck_assert_msg(secinf_step_program(&a->o, s, &p, &e) == MS_OK, "%s", e.msg);
        ck_assert_uint_eq(a->r.n_audit[s], b->r.n_audit[s]);
        secpol_step st = secpol_step_of(&pub, s);
        size_t at = 0, prev_at = 0, prev_n = 0;
        char nm[48];
        int is_score;
        for (size_t w = 0; a->o.spol.ops->audit_tensor(a->o.spol.cfg, &pub, &st, w, nm, &is_score);
             w++) {
            uint32_t id = op_tensor_find(&p, nm);
            if (id == OP_NONE)
                continue;
            const op_tensor *t = &p.tens[id];
            size_t n = (size_t)t->batch * t->rows * t->cols;
            const double *va = a->r.audit[s] + at, *vb = b->r.audit[s] + at;
            if (!is_score) {
                for (size_t i = 0; i < n; i++)
                    ck_assert_msg(va[i] == vb[i], "%s step %u %s[%zu]: %g, %g", policy, s, nm, i,
                                  va[i], vb[i]);
                compared++;
            }
            /* Quest, a composition: the cached rows follow the gathered ones */
            if (prev_n && strstr(nm, ".kv") && t->cols == 2 * m->head_dim &&
                at == prev_at + prev_n) {
                uint32_t Hkv = m->n_kv_heads, d = m->head_dim, W = 2 * d;
                uint8_t *ka = calloc(n, 1), *kb = calloc(n, 1);
                ck_assert(ka && kb);
                quest_kept(a->r.audit[s] + prev_at, prev_n, va, n, Hkv, W, ka);
                quest_kept(b->r.audit[s] + prev_at, prev_n, vb, n, Hkv, W, kb);
                if (!strcmp(policy, "sinkwin_blocks"))
                    same_norm_ties(ka, kb, va, vb, Hkv, (uint32_t)(n / W / Hkv), d, s, nm);
                else
                    ck_assert_msg(!memcmp(ka, kb, n / W), "%s step %u %s: kept sets differ", policy,
                                  s, nm);
                compared++;
                free(ka), free(kb);
            }
            prev_at = at, prev_n = strstr(nm, "kv_kept") || strstr(nm, "cmp.gather") ? n : 0;
            at += n;
        }
        ck_assert_uint_eq(at, a->r.n_audit[s]);
    }
    ck_assert_msg(compared > 0, "%s: no selection compared", policy);
    op_program_free(&p);
}

/* Both layouts for each policy and protocol: every op as predicted, the same kept sets, logits
 * within 2·LOGIT_TOL, and per step the bytes the score side adds (negative: saves) equal to the
 * formula summed over the gathers it replaces, one more round for each. */
static void check_case(const scase *c, const char *pn, int want_sign)
{
    run *x = calloc(2, sizeof *x);
    ck_assert_ptr_nonnull(x);
    run_case(c, pn, "rows", &x[0]);
    run_case(c, pn, "scores", &x[1]);
    same_kept(&x[0], &x[1], c->policy);
    uint32_t V = x[0].r.vocab;
    double worst = 0;
    for (size_t i = 0; i < (size_t)x[0].r.n_steps * V; i++)
        worst = fmax(worst, fabs(x[0].r.logits[i] - x[1].r.logits[i]));
    ck_assert_msg(worst <= 2 * LOGIT_TOL, "%s %s: logits differ by %.4f", c->policy, pn, worst);
    errbuf e = {{0}};
    op_program p;
    op_program_init(&p);
    int64_t total = 0, gathers = 0;
    for (uint32_t s = 1; s < x[0].r.n_steps; s++) {
        ck_assert_msg(secinf_step_program(&x[0].o, s, &p, &e) == MS_OK, "%s", e.msg);
        int64_t want = 0, n = 0;
        for (size_t i = 0; i < p.n_ops; i++)
            if (lower_score_gather_width(&sf.m, 1, &p.ops[i]))
                want += formula(&sf.m, pn, x[0].o.cfg.frac_bits, &p.ops[i]), n++;
        int64_t got = (int64_t)x[1].bytes[s] - (int64_t)x[0].bytes[s];
        ck_assert_msg(got == want, "%s %s step %u: scores - rows = %lld B, formula %lld B",
                      c->policy, pn, s, (long long)got, (long long)want);
        ck_assert_uint_eq(x[1].rounds[s], x[0].rounds[s] + (uint64_t)n);
        total += got, gathers += n;
    }
    op_program_free(&p);
    ck_assert_msg(gathers > 0, "%s %s: no row gather to replace", c->policy, pn);
    ck_assert_msg(want_sign < 0 ? total < 0 : total > 0, "%s %s: scores - rows = %lld B", c->policy,
                  pn, (long long)total);
    run_free(&x[0]);
    run_free(&x[1]);
    free(x);
}

START_TEST(test_scsec_mpcache)
{
    check_case(&cases[0], "semi2k", -1);
    check_case(&cases[0], "aby3", -1);
}
END_TEST

START_TEST(test_scsec_quest)
{
    check_case(&cases[1], "semi2k", -1);
    check_case(&cases[1], "aby3", -1);
}
END_TEST

/* Few kept entries: the score side's scores over every candidate cost more than the rows it
 * no longer gathers (aby3: 182·C > 470·R at R/C ≈ 0.23). */
START_TEST(test_scsec_dearer) { check_case(&cases[2], "aby3", 1); }
END_TEST

/* Quest's audit on shares judges its selection against its own select() over the session's
 * keys and query: equal (ties within the page scores' bound) as run; with select() made to
 * rank its best page last (a selection the ops do not make) the audit finds the difference
 * and fails, as validate then exits 1. */
START_TEST(test_scsec_quest_audit)
{
    run *x = calloc(1, sizeof *x);
    ck_assert_ptr_nonnull(x);
    const scase *c = &cases[2];
    run_case(c, "semi2k", "rows", x);
    secpol_keep k;
    float *pol, *full;
    fixture_replay(&sf, c->policy, c->params, c->n_params, N, P, &k, &pol, &full);
    secpol_run pub = secinf_public(&x->o);
    secpol_opened opened = secinf_opened(&x->r);
    for (int drop = 0; drop < 2; drop++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ck_assert_ptr_nonnull(f);
        errbuf e = {{0}};
        policy_quest_drop_best = drop;
        int rc = x->o.spol.ops->audit_note(x->o.spol.cfg, &pub, &opened, &k,
                                           pol + (size_t)(P - 1) * x->r.vocab, c->policy, f, &e);
        policy_quest_drop_best = 0;
        fclose(f);
        if (!drop) {
            ck_assert_msg(rc == MS_OK, "%s\n%s", e.msg, buf);
            ck_assert_msg(strstr(buf, "session's own keys and values: yes"), "%s", buf);
        } else {
            ck_assert_int_eq(rc, MS_ERR_INPUT);
            ck_assert_msg(strstr(e.msg, "differs from its select()"), "%s", e.msg);
            ck_assert_msg(strstr(buf, "session's own keys and values: NO"), "%s", buf);
        }
        free(buf);
    }
    fixture_replay_free(&k, pol, full);
    run_free(x);
    free(x);
}
END_TEST

/* `mpcsim run`'s cost path costs each decode step of case c as the session's program under
 * the same layout does (fixture_same_as_cost_path), at partial last pages too (32 … 35 cached
 * entries, pages of 4). */
static void same_as_cost_path(const scase *c, const char *pn, const char *layout)
{
    fixture_same_as_cost_path(&sf, pn, N, P, c->policy, c->params, c->n_params, layout, 0, NULL,
                              NULL);
}

/* MPCache and Quest (16 and 8 entries kept) under both layouts. Quest's secure step attends
 * kp whole pages (policy_quest.c quest_attend), whether or not the partial last page is among
 * them: the replay's kept count alone (15 where it is chosen at 35 cached entries) costed
 * semi2k 2,528,970 B and 1,376 rounds against the session's 2,535,306 B and 1,385 rounds. */
START_TEST(test_scsec_cost_path)
{
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&cases[c], pn[i], lay[j]);
}
END_TEST

/* The same for Quest composed from blocks (scenarios/policies/quest.yaml, its page blocks'
 * attend hook: compose.c cs_attend), with Quest's pages and budgets. */
START_TEST(test_scsec_cost_path_blocks)
{
    const policy_ops *p;
    errbuf e = {{0}};
    ck_assert_msg(policy_compose_load(th_data_path("scenarios/policies/quest.yaml"), &p, &e) ==
                      MS_OK,
                  "%s", e.msg);
    ck_assert_ptr_nonnull(p->attend);
    const scase blocks[2] = {{"quest_blocks", {"page=4", "topk=16"}, 2},
                             {"quest_blocks", {"page=4", "topk=8"}, 2}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&blocks[c], pn[i], lay[j]);
}
END_TEST

/* Each composition yaml[c] (written as file[c]) under its parameter param[c] (NULL: none):
 * same_as_cost_path in semi2k and aby3 under both layouts. */
static void composed_cost_paths(int n, const char *const *yaml, const char *const *file,
                                const char *const *param)
{
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int c = 0; c < n; c++) {
        const policy_ops *p;
        errbuf e = {{0}};
        ck_assert_msg(policy_compose_load(th_file(&td, file[c], yaml[c]), &p, &e) == MS_OK, "%s",
                      e.msg);
        const scase att = {p->name, {param ? param[c] : NULL}, param && param[c] ? 1 : 0};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&att, pn[i], lay[j]);
    }
}

/* The attention compositions re-selecting at every step (compose_att.c: the accumulated scores
 * and the newest row, a window of 4 and the top 6; the accumulated ones shared across pairs of
 * layers): the session's program at each decode step costs what the cost path does. */
START_TEST(test_scsec_cost_path_att)
{
    static const char *const yaml[3] = {"name: attacc_s\nrecent: 4\nscore: attention\n"
                                        "select: {topk: 6}\n",
                                        "name: attlast_s\nrecent: 4\n"
                                        "score: {attention: {accumulate: false}}\n"
                                        "select: {topk: 6}\n",
                                        "name: attaccshl_s\nrecent: 4\nscore: attention\n"
                                        "share: {heads: kv_head, layers: 2}\n"
                                        "select: {topk: 6}\n"};
    const char *file[3] = {"attacc_s.yaml", "attlast_s.yaml", "attaccshl_s.yaml"};
    composed_cost_paths(3, yaml, file, NULL);
}
END_TEST

/* The same beside 2 sinks (the attended table [sinks | gathered | window]), under kv_budget 0.5
 * (2 sinks, a window of 4 and the top-k the rest of round(T/2): 10 … 12 at 32 … 35 cached, the
 * state resized at each step), with a pyramid of per-layer counts (capacity 10, β 2: top-k 9 … 5
 * over the 5 layers), with a dense first layer, and every 3 steps beside 2 sinks (the steps at 33
 * and 34 cached attend the selection made for 32 and the entries cached since: no top-k), and one
 * selection per layer from the heads' newest rows (`share: layer`). */
START_TEST(test_scsec_cost_path_att_sinks)
{
    static const char *const yaml[6] = {"name: attsink_s\nsinks: 2\nrecent: 4\n"
                                        "score: attention\nselect: {topk: 6}\n",
                                        "name: attkvb_s\nsinks: 2\nrecent: 4\n"
                                        "score: {attention: {accumulate: false}}\n"
                                        "select: {topk: 6}\nkv_budget: {recent: fixed}\n",
                                        "name: attpyr_s\nrecent: 4\nscore: attention\n"
                                        "layers: {pyramid: {beta: 2}}\n"
                                        "select: {topk: {capacity: 10}}\n",
                                        "name: attdense_s\nrecent: 4\nscore: attention\n"
                                        "layers: {dense: 1}\nselect: {topk: 6}\n",
                                        "name: attevery_s\nsinks: 2\nrecent: 4\n"
                                        "score: attention\nwhen: {every: 3}\n"
                                        "select: {topk: 6}\n",
                                        "name: attshl_s\nrecent: 4\n"
                                        "score: {attention: {accumulate: false}}\n"
                                        "share: layer\nselect: {topk: 6}\n"};
    const char *file[6] = {"attsink_s.yaml",  "attkvb_s.yaml",   "attpyr_s.yaml",
                           "attdense_s.yaml", "attevery_s.yaml", "attshl_s.yaml"};
    const char *param[6] = {NULL, "kv_budget=0.5", NULL, NULL, NULL, NULL};
    composed_cost_paths(6, yaml, file, param);
}
END_TEST

/* Without a recent window (accumulated; beside 2 sinks, the newest row; every 3 steps): the new
 * entry is a candidate of the next selection, its row gathered from after the cached ones. The
 * cost path emitted no selection for these before (policy check: cost declared). */
START_TEST(test_scsec_cost_path_att_nowin)
{
    static const char *const yaml[3] = {"name: attnw_s\nscore: attention\nselect: {topk: 8}\n",
                                        "name: attnws_s\nsinks: 2\n"
                                        "score: {attention: {accumulate: false}}\n"
                                        "select: {topk: 8}\n",
                                        "name: attnwe_s\nscore: attention\nwhen: {every: 3}\n"
                                        "select: {topk: 8}\n"};
    const char *file[3] = {"attnw_s.yaml", "attnws_s.yaml", "attnwe_s.yaml"};
    composed_cost_paths(3, yaml, file, NULL);
}
END_TEST

/* Shared across pairs of layers beside 2 sinks (the followers copy their own sinks' rows
 * before the rows their leader's one-hot gathers), without a window (the followers gather the
 * new entry too), every 3 steps, under kv_budget 0.5 and one per layer (`heads: layer`): the
 * cost path emitted no selection for them before (policy check: cost declared). */
START_TEST(test_scsec_cost_path_att_shared_sinks)
{
    static const char *const yaml[5] = {
        "name: attshs_s\nsinks: 2\nrecent: 4\nscore: attention\n"
        "share: {heads: kv_head, layers: 2}\nselect: {topk: 6}\n",
        "name: attshnw_s\nscore: attention\n"
        "share: {heads: kv_head, layers: 2}\nselect: {topk: 8}\n",
        "name: attshe_s\nsinks: 2\nrecent: 4\nscore: attention\nwhen: {every: 3}\n"
        "share: {heads: kv_head, layers: 2}\nselect: {topk: 6}\n",
        "name: attshf_s\nsinks: 2\nrecent: 4\nscore: {attention: {accumulate: false}}\n"
        "share: {heads: kv_head, layers: 2}\nselect: {topk: 6}\nkv_budget: {recent: fixed}\n",
        "name: attshl2_s\nrecent: 4\nscore: attention\n"
        "share: {heads: layer, layers: 2}\nselect: {topk: 6}\n"};
    const char *file[5] = {"attshs_s.yaml", "attshnw_s.yaml", "attshe_s.yaml", "attshf_s.yaml",
                           "attshl2_s.yaml"};
    const char *param[5] = {NULL, NULL, NULL, "kv_budget=0.5", NULL};
    composed_cost_paths(5, yaml, file, param);
}
END_TEST

/* A decode step lowered at C cached entries with layer 0's policy row gather (a one-hot
 * (Hkv, mu, ku) over units of U rows of 2d + e) spliced as the session splices it, the layer
 * attending `extra` entries besides the gathered rows and the new one (negative: fewer), its
 * cache the C + 1 rows of the lowering without attended_cache, as the session's. */
static void spliced_step(uint32_t mu, uint32_t ku, uint32_t U, uint32_t e, int extra, op_program *p)
{
    const model_cfg *m = &sf.m;
    uint32_t Hkv = m->n_kv_heads, d = m->head_dim, C = ku * U, R = mu * U, w = 2 * d + e;
    uint32_t *kept = malloc(m->n_layers * Hkv * sizeof *kept);
    ck_assert_ptr_nonnull(kept);
    for (uint32_t i = 0; i < m->n_layers * Hkv; i++)
        kept[i] = i < Hkv ? (uint32_t)((int)R + extra) : C;
    lower_opts lo = fixture_step_opts(PHASE_DECODE, 1, C);
    lo.kept = kept;
    errbuf er = {{0}};
    op_program_init(p);
    ck_assert_msg(lower_step(m, &lo, p, &er) == MS_OK, "%s", er.msg);
    free(kept);
    opb b;
    opb_init(&b, p, PHASE_DECODE, 0, OPC_POLICY, "pol.");
    uint32_t oh = opb_tensor(&b, "onehot", OPT_TEMP, Hkv, mu, ku);
    uint32_t tab = opb_tensor(&b, "table", OPT_CACHE, Hkv, ku, U * w);
    uint32_t rows = opb_tensor(&b, "rows", OPT_TEMP, Hkv, mu, U * w);
    size_t from = p->n_ops;
    opb_op(&b, OP_GATHER, Hkv, mu, ku, U * w, oh, tab, OP_NONE, rows, OPF_NO_TRUNC, 0, 0);
    ck_assert(!opb_failed(&b));
    uint32_t sc = op_layer_find(p, 0, "scores");
    ck_assert_int_eq(secpol_ops_move(p, secpol_find_op(p, OP_MATMUL, sc), from, &er), MS_OK);
}

/* The rewrite on a spliced step: the row gather replaced by the score side's two gathers (the
 * kept units' scores with their carried column, the probabilities back by the transposed
 * one-hot) and the layer's products over every candidate, the new entry and the `extra` public
 * entries the layer attends beside the gathered rows (the cache's rows 1 … extra); refused when
 * the layer attends fewer entries than the gathered rows and the new one. */
static void check_rewrite(int extra)
{
    const model_cfg *m = &sf.m;
    uint32_t Hkv = m->n_kv_heads, G = m->n_heads / Hkv, d = m->head_dim;
    uint32_t mu = 3, ku = 8, U = 4, e = 1, C = ku * U, F = 1 + (uint32_t)extra;
    op_program p;
    spliced_step(mu, ku, U, e, extra, &p);
    errbuf er = {{0}};
    scoreside_gather *g = NULL;
    size_t ng = 0;
    ck_assert_msg(scoreside_apply(m, &p, &g, &ng, &er) == MS_OK, "%s", er.msg);
    ck_assert_uint_eq(ng, 1);
    ck_assert_uint_eq(g[0].n, U * (2 * d + e));
    uint32_t gathers = 0, qk = 0, pv = 0;
    for (size_t i = 0; i < p.n_ops; i++) {
        const op *o = &p.ops[i];
        ck_assert_msg(
            !(o->layer == 0 && lower_score_gather_width(m, 1, o) && o->n == U * (2 * d + e)),
            "the row gather stayed");
        if (o->layer == 0 && o->kind == OP_GATHER) {
            int fwd = o->m == mu && o->k == ku && o->n == U * (G + e);
            int back = o->m == ku && o->k == mu && o->n == U * G;
            ck_assert_msg(fwd || back, "gather (%u, %u, %u, %u)", o->batch, o->m, o->k, o->n);
            ck_assert_uint_eq(o->batch, Hkv);
            gathers++;
        }
        if (o->layer == 0 && o->kind == OP_MATMUL && o->cat == OPC_ATTENTION &&
            o->batch == m->n_heads)
            qk += (o->flags & OPF_TRANS_B) && o->n == F + C, pv += o->k == F + C;
        /* the softmax over the new, public and kept entries, as spliced */
        if (o->layer == 0 && o->kind == OP_SOFTMAX)
            ck_assert_uint_eq(o->n, F + mu * U);
    }
    ck_assert_uint_eq(gathers, 2);
    ck_assert_uint_eq(qk, 1);
    ck_assert_uint_eq(pv, 1);
    free(g);
    op_program_free(&p);
}

START_TEST(test_scsec_rewrite)
{
    check_rewrite(0);
    check_rewrite(2); /* two public entries beside the 12 gathered rows */
    /* a layer attending fewer entries than the 12 gathered rows and the new one */
    op_program p;
    errbuf er = {{0}};
    spliced_step(3, 8, 4, 1, -2, &p);
    ck_assert_int_eq(scoreside_apply(&sf.m, &p, NULL, NULL, &er), MS_ERR_INPUT);
    ck_assert_msg(strstr(er.msg, "layer 0 attends 11 entries, fewer than the 12 rows"), "%s",
                  er.msg);
    op_program_free(&p);
}
END_TEST

/* A composition attending public entries beside a per-step secret top-k: 2 attention sinks, a
 * recent window of 4 and the 8 keys of largest norm among the 26 … 29 entries between them
 * (R/C ≈ 0.3: dearer with the score side in both protocols on stories260K, whose break-even is
 * R/C ≈ 0.39 in aby3 and 0.5 in semi2k, POLICIES.md "Score-side attention"). */
static const char sinkwin_yaml[] = "name: sinkwin_blocks\n"
                                   "summary: sinks, a recent window, the keys of largest norm\n"
                                   "sinks: 2\n"
                                   "recent: 4\n"
                                   "score: key_norm\n"
                                   "select: {topk: 8}\n";

/* Pages of 4 beside 4 sinks: the 4 pages (16 entries) of largest key norm among the 7 … 8
 * after them (R/C = 0.5 … 0.57: cheaper with the score side in both protocols). */
static const char pagekn_yaml[] = "name: pagekn_blocks\n"
                                  "summary: sinks and the pages of largest key norm\n"
                                  "sinks: 4\n"
                                  "score: key_norm\n"
                                  "granularity: {page: 4}\n"
                                  "when: step\n"
                                  "select: {topk: 16}\n";

/* Quest's page score beside 4 sinks and a window of the last 3 entries (on shares: the last
 * candidate page's window rows biased out, attended as public entries): the top 4 pages of 4
 * among the 7 after the sinks. */
static const char pagesw_yaml[] = "name: pagesw_blocks\n"
                                  "summary: sinks, a window, the top pages by their bounds\n"
                                  "sinks: 4\n"
                                  "recent: 3\n"
                                  "score: page_bounds\n"
                                  "granularity: {page: 4}\n"
                                  "when: step\n"
                                  "select: {topk: 16}\n";

/* The same beside 2 sinks: the first candidate page holds two of them. */
static const char pagesu_yaml[] = "name: pagesu_blocks\n"
                                  "summary: 2 sinks, a window, the top pages by their bounds\n"
                                  "sinks: 2\n"
                                  "recent: 3\n"
                                  "score: page_bounds\n"
                                  "granularity: {page: 4}\n"
                                  "when: step\n"
                                  "select: {topk: 16}\n";

/* One selection per layer beside a window of 4: every KV head's key norms summed, the 6
 * largest of the 28 … 31 candidates, each KV head's rows gathered by that one top-k. */
static const char knlayer_yaml[] = "name: knlayer_blocks\n"
                                   "summary: a window, one selection per layer by key norm\n"
                                   "recent: 4\n"
                                   "score: key_norm\n"
                                   "share: layer\n"
                                   "select: {topk: 6}\n";

/* Per KV head the 6 largest key norms of the 28 candidates, chosen once after the prompt. */
static const char knonce_yaml[] = "name: knonce_blocks\n"
                                  "summary: a window, the largest key norms once\n"
                                  "recent: 4\n"
                                  "score: key_norm\n"
                                  "when: once\n"
                                  "select: {topk: 6}\n";

/* The same every 2 decode steps: the kept rows carried in state between selections. */
static const char knevery_yaml[] = "name: knevery_blocks\n"
                                   "summary: a window, the largest key norms every 2 steps\n"
                                   "recent: 4\n"
                                   "score: key_norm\n"
                                   "when: {every: 2}\n"
                                   "select: {topk: 6}\n";

/* One selection per layer by the KV heads' summed key norms, once after the prompt and every 2
 * decode steps. */
static const char knoncesl_yaml[] = "name: knoncesl_blocks\n"
                                    "summary: a window, one selection per layer once\n"
                                    "recent: 4\n"
                                    "score: key_norm\n"
                                    "share: layer\n"
                                    "when: once\n"
                                    "select: {topk: 6}\n";
static const char kneverysl_yaml[] = "name: kneverysl_blocks\n"
                                     "summary: a window, one selection per layer every 2 steps\n"
                                     "recent: 4\n"
                                     "score: key_norm\n"
                                     "share: layer\n"
                                     "when: {every: 2}\n"
                                     "select: {topk: 6}\n";

/* Pages of 4 by summed key norms once after the prompt and every 2 decode steps, and by
 * Quest's bound score every 2 steps beside sinks and a window: the selecting step's pages
 * carried in state for the steps between. */
static const char pgonce_yaml[] = "name: pgonce_blocks\nscore: key_norm\n"
                                  "granularity: {page: 4}\nwhen: once\nselect: {topk: 8}\n";
static const char pgevery_yaml[] = "name: pgevery_blocks\nscore: key_norm\n"
                                   "granularity: {page: 4}\nwhen: {every: 2}\n"
                                   "select: {topk: 8}\n";
static const char pgbevery_yaml[] = "name: pgbevery_blocks\nsinks: 4\nrecent: 3\n"
                                    "score: page_bounds\ngranularity: {page: 4}\n"
                                    "when: {every: 2}\nselect: {topk: 8}\n";

/* Key norms evicting for good beside a window of 4: H2O's table with the norm as its score. */
static const char knperm_yaml[] = "name: knperm_blocks\nrecent: 4\nscore: key_norm\n"
                                  "evict: permanent\nselect: {topk: 6}\n";

/* The same with one selection per layer (`share: layer`) beside 2 sinks. */
static const char knpermsh_yaml[] = "name: knpermsh_blocks\nsinks: 2\nrecent: 4\n"
                                    "score: key_norm\nevict: permanent\nshare: layer\n"
                                    "select: {topk: 6}\n";

/* One selection per pair of layers (layers 0, 2, 4 select; 1 and 3 gather their own rows by
 * the one-hot rows of the layer before): by key norms of tokens beside a window of 4 (the top
 * 6), and of pages of 4 beside 4 sinks by their key norms or their bounds against the query (the
 * top 2 pages, a partial last page at 3 steps of 4). */
static const char shltok_yaml[] = "name: shltok_blocks\n"
                                  "summary: a window, one key-norm selection per 2 layers\n"
                                  "recent: 4\n"
                                  "score: key_norm\n"
                                  "share: {heads: kv_head, layers: 2}\n"
                                  "select: {topk: 6}\n";
static const char shlpb_yaml[] = "name: shlpb_blocks\n"
                                 "summary: sinks, the pages of largest bound scores per 2 layers\n"
                                 "sinks: 4\n"
                                 "score: page_bounds\n"
                                 "granularity: {page: 4}\n"
                                 "share: {heads: kv_head, layers: 2}\n"
                                 "select: {topk: 8}\n";
static const char shlpg_yaml[] = "name: shlpg_blocks\n"
                                 "summary: sinks, the pages of largest key norms per 2 layers\n"
                                 "sinks: 4\n"
                                 "score: key_norm\n"
                                 "granularity: {page: 4}\n"
                                 "share: {heads: kv_head, layers: 2}\n"
                                 "select: {topk: 8}\n";

/* The same pairs selecting once after the prompt (key norms; SnapKV's window votes, maxpool over
 * 3, a capacity of 10 beside the window of 4) or every 2 decode steps (key norms). */
static const char shlonce_yaml[] = "name: shlonce_blocks\n"
                                   "summary: a window, key norms once per 2 layers\n"
                                   "recent: 4\n"
                                   "score: key_norm\n"
                                   "when: once\n"
                                   "share: {heads: kv_head, layers: 2}\n"
                                   "select: {topk: 6}\n";
static const char shlevery_yaml[] = "name: shlevery_blocks\n"
                                    "summary: a window, key norms every 2 steps per 2 layers\n"
                                    "recent: 4\n"
                                    "score: key_norm\n"
                                    "when: {every: 2}\n"
                                    "share: {heads: kv_head, layers: 2}\n"
                                    "select: {topk: 6}\n";
static const char shllo_yaml[] = "name: shllo_blocks\n"
                                 "summary: a window, key norms once, one per layer, per 2 layers\n"
                                 "recent: 4\n"
                                 "score: key_norm\n"
                                 "when: once\n"
                                 "share: {heads: layer, layers: 2}\n"
                                 "select: {topk: 6}\n";
static const char shlle_yaml[] = "name: shlle_blocks\n"
                                 "summary: sinks, a window, key norms every 2, one per layer\n"
                                 "sinks: 2\n"
                                 "recent: 4\n"
                                 "score: key_norm\n"
                                 "when: {every: 2}\n"
                                 "share: {heads: layer, layers: 3}\n"
                                 "select: {topk: 6}\n";
static const char shlwv_yaml[] =
    "name: shlwv_blocks\n"
    "summary: window votes once per 2 layers\n"
    "recent: 4\n"
    "score: {window_attention: {window: 4, kernel: 3, pooling: maxpool}}\n"
    "when: once\n"
    "share: {heads: kv_head, layers: 2}\n"
    "select: {topk: {capacity: 10}}\n";

/* Window votes with one selection per layer (`share: layer`), the top 5 beside a window of 4. */
static const char wvsl_yaml[] =
    "name: wvsl_blocks\nrecent: 4\nshare: layer\nwhen: once\n"
    "score: {window_attention: {window: 4, kernel: 3, pooling: maxpool}}\nselect: {topk: 5}\n";

static void load_one(const char *name, const char *file, const char *text)
{
    errbuf e = {{0}};
    const policy_ops *p = policy_compose_find(name);
    if (!p)
        ck_assert_msg(policy_compose_load(th_file(&td, file, text), &p, &e) == MS_OK, "%s", e.msg);
    ck_assert_ptr_nonnull(p);
}

static void load_sinkwin(void)
{
    load_one("sinkwin_blocks", "sinkwin.yaml", sinkwin_yaml);
    load_one("pagekn_blocks", "pagekn.yaml", pagekn_yaml);
    load_one("pagesw_blocks", "pagesw.yaml", pagesw_yaml);
    load_one("pagesu_blocks", "pagesu.yaml", pagesu_yaml);
}

/* The public entries' scores and values join the candidates' directly: every op as predicted,
 * the same top-k one-hots under both layouts, logits within 2·LOGIT_TOL, and each step's extra
 * bytes the per-head formulas over the replaced gathers — the public entries, attended under
 * both layouts and in both products' lengths alike, change no difference. */
START_TEST(test_scsec_public)
{
    load_sinkwin();
    const scase c = {"sinkwin_blocks", {NULL}, 0}, pg = {"pagekn_blocks", {NULL}, 0};
    check_case(&c, "semi2k", 1);
    check_case(&c, "aby3", 1);
    check_case(&pg, "semi2k", -1);
    check_case(&pg, "aby3", -1);
}
END_TEST

/* The cost path of the same compositions, and of pages by their bounds beside sinks (4, 2)
 * and a window, under both layouts: the session's bytes and rounds (the cost path attends the
 * public entries and the k whole pages: compose.c cs_attend). */
START_TEST(test_scsec_public_cost_path)
{
    load_sinkwin();
    const scase c[4] = {{"sinkwin_blocks", {NULL}, 0},
                        {"pagekn_blocks", {NULL}, 0},
                        {"pagesw_blocks", {NULL}, 0},
                        {"pagesu_blocks", {NULL}, 0}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* The cost path of one selection per layer (knlayer_yaml), of one after the prompt
 * (knonce_yaml) and of one every 2 steps (knevery_yaml): the session's bytes and rounds. */
START_TEST(test_scsec_layer_cost_path)
{
    load_one("knlayer_blocks", "knlayer.yaml", knlayer_yaml);
    load_one("knonce_blocks", "knonce.yaml", knonce_yaml);
    load_one("knevery_blocks", "knevery.yaml", knevery_yaml);
    const scase c[3] = {
        {"knlayer_blocks", {NULL}, 0}, {"knonce_blocks", {NULL}, 0}, {"knevery_blocks", {NULL}, 0}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* Key-norm pages after 5 sinks (off a page boundary) under a kv_budget fraction: at prompt 32
 * 0.5 keeps 16 entries, the 5 sinks and k = round(11/4) = 3 pages, 0.125 keeps 4, the sinks cut
 * to a whole page; the cost path attends the sinks and k whole pages as the session does. */
static const char pagekv_yaml[] = "name: pagekv_blocks\n"
                                  "sinks: 5\n"
                                  "score: key_norm\n"
                                  "granularity: {page: 4}\n"
                                  "select: {topk: 8}\n"
                                  "kv_budget: {recent: fixed}\n";

START_TEST(test_scsec_kv_budget_pages_cost_path)
{
    load_one("pagekv_blocks", "pagekv.yaml", pagekv_yaml);
    const scase c[2] = {{"pagekv_blocks", {"kv_budget=0.5"}, 1},
                        {"pagekv_blocks", {"kv_budget=0.125"}, 1}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* TOVA's shape with a dense first layer (tova's emitted ops with dense_layers 1: layer 0 keeps
 * every entry, layers 1 … 4 evict at once) and H2O's with one (H2O's session, layer 0 carrying
 * every row): each decode step's session program costs what `mpcsim run`'s cost path does
 * (the composition's emit_cost batching the eviction over layers 1 … 4, layer 0 lowered at its
 * whole cache). The same for TOVA's shape with sinks 2 and a window of 4, and with sinks
 * alone (tova's sinks and recent: the arg-min over the 9 candidates between them). */
START_TEST(test_scsec_tova_h2o_cost_path)
{
    load_one("tovad_s", "tovad.yaml",
             "name: tovad_s\nscore: {attention: {accumulate: false}}\nshare: layer\n"
             "evict: permanent\nlayers: {dense: 1}\nselect: {topk: 8}\n");
    load_one("h2od_s", "h2od.yaml",
             "name: h2od_s\nrecent: 4\nscore: attention\nevict: permanent\n"
             "layers: {dense: 1}\nselect: {topk: 4}\n");
    load_one("tovasr_s", "tovasr.yaml",
             "name: tovasr_s\nsinks: 2\nrecent: 4\nscore: {attention: {accumulate: false}}\n"
             "share: layer\nevict: permanent\nselect: {topk: 8}\n");
    load_one("tovas_s", "tovas.yaml",
             "name: tovas_s\nsinks: 2\nscore: {attention: {accumulate: false}}\n"
             "share: layer\nevict: permanent\nselect: {topk: 8}\n");
    const scase c[4] = {{"tovad_s", {NULL}, 0},
                        {"h2od_s", {NULL}, 0},
                        {"tovasr_s", {NULL}, 0},
                        {"tovas_s", {NULL}, 0}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* The same for one selection per layer once after the prompt (knoncesl_yaml) and every 2 steps
 * (kneverysl_yaml). */
START_TEST(test_scsec_shared_cost_path)
{
    load_one("knoncesl_blocks", "knoncesl.yaml", knoncesl_yaml);
    load_one("kneverysl_blocks", "kneverysl.yaml", kneverysl_yaml);
    const scase c[2] = {{"knoncesl_blocks", {NULL}, 0}, {"kneverysl_blocks", {NULL}, 0}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* The same for pages selected once or every 2 steps: each step attends the entries outside the
 * last selecting step's candidates and its k whole pages (cs_attend), as the session does. */
START_TEST(test_scsec_pages_carried_cost_path)
{
    load_one("pgonce_blocks", "pgonce.yaml", pgonce_yaml);
    load_one("pgevery_blocks", "pgevery.yaml", pgevery_yaml);
    load_one("pgbevery_blocks", "pgbevery.yaml", pgbevery_yaml);
    const scase c[3] = {{"pgonce_blocks", {NULL}, 0},
                        {"pgevery_blocks", {NULL}, 0},
                        {"pgbevery_blocks", {NULL}, 0}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* Pages once at a prompt of 30, whose last candidate page (28 … 31) reaches past it: gathered at
 * the prompt with zero rows for 30 and 31 (biased out), the entries cached later public; the
 * session kept the replay's kept sets before. */
START_TEST(test_scsec_pages_once_partial_cost_path)
{
    load_one("pgonce_blocks", "pgonce.yaml", pgonce_yaml);
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            fixture_same_as_cost_path(&sf, pn[i], N, 30, "pgonce_blocks", NULL, 0, lay[j], 0, NULL,
                                      NULL);
}
END_TEST

/* A page top-k below one page (k = 0 pages: the sinks and the window public), at every step by
 * key norms and every 3 steps by page bounds; key norms evicting for good with no top-k left
 * (`kv_budget: {recent: rest}` at 0.5). */
START_TEST(test_scsec_no_topk_cost_path)
{
    static const char *const yaml[3] = {"name: nok_blocks\nsinks: 2\nrecent: 4\nscore: key_norm\n"
                                        "granularity: {page: 4}\nselect: {topk: 1}\n",
                                        "name: nokbe_blocks\nsinks: 2\nrecent: 4\n"
                                        "score: page_bounds\ngranularity: {page: 4}\n"
                                        "when: {every: 3}\nselect: {topk: 2}\n",
                                        "name: nokp_blocks\nsinks: 2\nrecent: 4\n"
                                        "score: key_norm\nevict: permanent\n"
                                        "kv_budget: {recent: rest}\nselect: {topk: 6}\n"};
    const char *file[3] = {"nok.yaml", "nokbe.yaml", "nokp.yaml"};
    const char *param[3] = {NULL, NULL, "kv_budget=0.5"};
    composed_cost_paths(3, yaml, file, param);
}
END_TEST

/* The same for key norms evicting for good (knperm_yaml; knpermsh_yaml, one per layer): each
 * step attends the sinks, the window and the k kept rows, its eviction made before the layer's
 * attention. */
START_TEST(test_scsec_knperm_cost_path)
{
    static const char *const yaml[2] = {knperm_yaml, knpermsh_yaml};
    const char *file[2] = {"knperm.yaml", "knpermsh.yaml"};
    composed_cost_paths(2, yaml, file, NULL);
}
END_TEST

/* Pages shared across layers once (key norms) and every 2 steps (bounds, groups of 3). */
static const char shlpgo_yaml[] = "name: shlpgo_blocks\n"
                                  "summary: sinks, a window, key-norm pages once per 2 layers\n"
                                  "sinks: 4\n"
                                  "recent: 4\n"
                                  "score: key_norm\n"
                                  "granularity: {page: 4}\n"
                                  "when: once\n"
                                  "share: {heads: kv_head, layers: 2}\n"
                                  "select: {topk: 4}\n";
static const char shlpbe_yaml[] = "name: shlpbe_blocks\n"
                                  "summary: sinks, page bounds every 2 per 3 layers\n"
                                  "sinks: 4\n"
                                  "score: page_bounds\n"
                                  "granularity: {page: 4}\n"
                                  "when: {every: 2}\n"
                                  "share: {heads: kv_head, layers: 3}\n"
                                  "select: {topk: 8}\n";

/* The cost path of a selection shared across layers (shltok_yaml, shlpg_yaml, shlpb_yaml; pages
 * once or every N: shlpgo_yaml, shlpbe_yaml): each decode step's session program (the
 * followers' gathers by their leader's one-hot rows) costs what `mpcsim run` costs, under both
 * layouts. */
START_TEST(test_scsec_shared_layers_cost_path)
{
    load_one("shltok_blocks", "shltok.yaml", shltok_yaml);
    load_one("shlpg_blocks", "shlpg.yaml", shlpg_yaml);
    load_one("shlpb_blocks", "shlpb.yaml", shlpb_yaml);
    load_one("shlpgo_blocks", "shlpgo.yaml", shlpgo_yaml);
    load_one("shlpbe_blocks", "shlpbe.yaml", shlpbe_yaml);
    const scase c[5] = {{"shltok_blocks", {NULL}, 0},
                        {"shlpg_blocks", {NULL}, 0},
                        {"shlpb_blocks", {NULL}, 0},
                        {"shlpgo_blocks", {NULL}, 0},
                        {"shlpbe_blocks", {NULL}, 0}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* Their cost path selecting once or every 2 steps (shlonce_yaml, shlevery_yaml, shlwv_yaml),
 * and one per layer (shllo_yaml, shlle_yaml; window votes, wvsl_yaml, not shared across
 * layers). */
START_TEST(test_scsec_shared_once_cost_path)
{
    load_one("shlonce_blocks", "shlonce.yaml", shlonce_yaml);
    load_one("shlevery_blocks", "shlevery.yaml", shlevery_yaml);
    load_one("shlwv_blocks", "shlwv.yaml", shlwv_yaml);
    load_one("shllo_blocks", "shllo.yaml", shllo_yaml);
    load_one("shlle_blocks", "shlle.yaml", shlle_yaml);
    load_one("wvsl_blocks", "wvsl.yaml", wvsl_yaml);
    const scase c[6] = {{"shlonce_blocks", {NULL}, 0}, {"shlevery_blocks", {NULL}, 0},
                        {"shlwv_blocks", {NULL}, 0},   {"shllo_blocks", {NULL}, 0},
                        {"shlle_blocks", {NULL}, 0},   {"wvsl_blocks", {NULL}, 0}};
    const char *pn[2] = {"semi2k", "aby3"}, *lay[2] = {"rows", "scores"};
    for (int k = 0; k < 6; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                same_as_cost_path(&c[k], pn[i], lay[j]);
}
END_TEST

/* Window votes reaching into the voting queries' own rows (a window of 2 under 6 votes, max
 * pooling; none under 4, average pooling, one per layer): the reaching candidates vote 0. The
 * cost path named no selection for them before (policy check: cost declared). */
START_TEST(test_scsec_window_reach_cost_path)
{
    static const char *const yaml[2] = {
        "name: wvr_s\nrecent: 2\nwhen: once\n"
        "score: {window_attention: {window: 6, kernel: 3, pooling: maxpool}}\nselect: {topk: 5}\n",
        "name: wvrl_s\nwhen: once\nshare: layer\n"
        "score: {window_attention: {window: 4, kernel: 5, pooling: avgpool}}\n"
        "select: {topk: 6}\n"};
    const char *file[2] = {"wvr_s.yaml", "wvrl_s.yaml"};
    composed_cost_paths(2, yaml, file, NULL);
}
END_TEST

/* Attention once after the prompt, top-k (accumulated per KV head; the newest row one per
 * layer beside sinks; a pyramid): the cost path named no selection before (cost declared). */
START_TEST(test_scsec_att_once_cost_path)
{
    static const char *const yaml[3] = {
        "name: ato_s\nrecent: 4\nwhen: once\nscore: attention\nselect: {topk: 6}\n",
        "name: atol_s\nsinks: 2\nwhen: once\nshare: layer\n"
        "score: {attention: {accumulate: false}}\nselect: {topk: 5}\n",
        "name: atop_s\nrecent: 4\nwhen: once\nscore: attention\n"
        "select: {topk: {capacity: 12}}\nlayers: {pyramid: {beta: 4}}\n"};
    const char *file[3] = {"ato_s.yaml", "atol_s.yaml", "atop_s.yaml"};
    composed_cost_paths(3, yaml, file, NULL);
}
END_TEST

Suite *scsec_suite(void)
{
    Suite *s = suite_create("scsec");
    TCase *tc = th_case(s, "scsec", 120);
    STORIES_USE(tc);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_scsec_mpcache, test_scsec_quest, test_scsec_dearer, test_scsec_quest_audit,
             test_scsec_cost_path, test_scsec_cost_path_blocks, test_scsec_cost_path_att,
             test_scsec_cost_path_att_sinks, test_scsec_cost_path_att_nowin,
             test_scsec_cost_path_att_shared_sinks, test_scsec_rewrite, test_scsec_public,
             test_scsec_public_cost_path, test_scsec_layer_cost_path,
             test_scsec_kv_budget_pages_cost_path, test_scsec_tova_h2o_cost_path,
             test_scsec_shared_cost_path, test_scsec_pages_carried_cost_path,
             test_scsec_knperm_cost_path, test_scsec_pages_once_partial_cost_path,
             test_scsec_no_topk_cost_path, test_scsec_shared_layers_cost_path,
             test_scsec_shared_once_cost_path, test_scsec_window_reach_cost_path,
             test_scsec_att_once_cost_path);
    return s;
}
