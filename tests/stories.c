/* stories.c — the stories260K fixture (stories.h). */
#include "stories.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/engine/machine.h"
#include "sim/engine/net.h"
#include "sim/replay/replay.h"
#include "sim/secure/valid.h"

#include "harness.h"

void fixture_open(fixture *f, int min_tokens)
{
    errbuf e = {{0}};
    ck_assert_msg(model_load("stories260K", &f->m, &e) == MS_OK, "%s", e.msg);
    char wp[1024], tp[1024];
    ck_assert_int_eq(model_file_path(f->m.weights, wp, sizeof wp), 0);
    ck_assert_int_eq(model_file_path(f->m.tokenizer, tp, sizeof tp), 0);
    ck_assert_msg(llama_load(&f->m, wp, &f->L, &e) == MS_OK, "%s", e.msg);
    llama_tok *T;
    ck_assert_msg(llama_tok_load(tp, f->m.vocab, &T, &e) == MS_OK, "%s", e.msg);
    char *text = th_slurp(th_data_path("tests/data/tinystories_sample.txt"), NULL);
    f->n = llama_tok_encode(T, text, f->ids, 1024);
    free(text);
    ck_assert_int_ge(f->n, min_tokens);
    llama_tok_free(T);
}

void fixture_close(fixture *f)
{
    llama_free(f->L);
    f->L = NULL;
}

void fixture_assert_follows(const double *logits, const float *pol, const float *full, uint32_t P,
                            uint32_t n, uint32_t V, double tol)
{
    llama_acc a, moved;
    llama_compare(logits, pol + (size_t)(P - 1) * V, n, V, &a);
    ck_assert_uint_ge(a.top1_agree + 1, n);
    ck_assert_msg(a.miss_gap < 2 * tol, "a disagreement where the replay's margin is %.4f",
                  a.miss_gap);
    ck_assert_msg(a.max_abs < tol, "logit error vs the replay %.4f", a.max_abs);
    llama_compare(logits, full + (size_t)(P - 1) * V, n, V, &moved);
    ck_assert_msg(moved.max_abs > 3 * tol, "the policy moved the logits by only %.4f",
                  moved.max_abs);
}

void fixture_replay(fixture *f, const char *policy, const char *const *params, int n_params,
                    uint32_t n, uint32_t P, secpol_keep *k, float **pol, float **full)
{
    errbuf e = {{0}};
    uint32_t V = f->m.vocab;
    *pol = malloc((size_t)n * V * sizeof **pol);
    ck_assert_ptr_nonnull(*pol);
    ck_assert_msg(secinf_policy_replay(&f->m, f->L, policy, params, n_params, f->ids, n, P, k, *pol,
                                       &e) == MS_OK,
                  "%s", e.msg);
    if (!full)
        return;
    *full = malloc((size_t)n * V * sizeof **full);
    ck_assert_ptr_nonnull(*full);
    llama_reset(f->L);
    for (uint32_t p = 0; p < n; p++)
        ck_assert_int_eq(llama_forward(f->L, f->ids[p], p, NULL, *full + (size_t)p * V), MS_OK);
}

void fixture_replay_free(secpol_keep *k, float *pol, float *full)
{
    secpol_keep_free(k);
    free(pol);
    free(full);
}

void fixture_cfg(const char *pname, proto_cfg *c)
{
    errbuf e = {{0}};
    ck_assert_msg(proto_cfg_default(pname, c, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(proto_cfg_set(c, "approx", "sigmoid", &e) == MS_OK, "%s", e.msg);
}

void fixture_program_cost(const char *pname, const proto_cfg *cfg, const op_program *p,
                          uint64_t *bytes, uint64_t *rounds)
{
    errbuf e = {{0}};
    const proto *pr = proto_find(pname);
    ck_assert_ptr_nonnull(pr);
    cost_log log;
    cost_log_init(&log, pr->n_parties);
    ck_assert_msg(proto_cost_program(pr, cfg, p, &log, &e) == MS_OK, "%s", e.msg);
    cost_totals t;
    memset(&t, 0, sizeof t);
    for (size_t i = 0; i < log.n; i++)
        cost_totals_add_round(&t, &log.r[i], pr->n_parties);
    *bytes = 0;
    for (int i = 0; i < pr->n_parties; i++)
        *bytes += t.bytes_sent[i];
    *rounds = t.rounds;
    cost_log_free(&log);
}

void fixture_opts(fixture *f, const char *pname, uint32_t n, uint32_t P, const char *policy,
                  const char *const *params, int n_params, secinf_opts *o)
{
    errbuf e = {{0}};
    *o = (secinf_opts){
        .model = &f->m, .weights = f->L, .tokens = f->ids, .n_tokens = n, .prefill = P};
    fixture_cfg(pname, &o->cfg);
    if (!policy)
        return;
    int pub = 1;
    ck_assert_msg(secinf_spol_of(&f->m, policy, params, n_params, P, n, &o->spol, &pub, &e) ==
                      MS_OK,
                  "%s", e.msg);
    ck_assert_msg(pub == 0, "%s: no selection on shares", policy);
}

void fixture_step_costed(const secinf_opts *o, const secinf_result *r, uint32_t st,
                         uint64_t latency_ns, op_program *p)
{
    errbuf e = {{0}};
    net_cfg net;
    net_uniform(&net, (int)r->n_parties, latency_ns, 1e9);
    machine_profile mach;
    machine_default(&mach);
    valid_row row;
    ck_assert_msg(valid_step(o, r, st, &net, &mach, &row, &e) == MS_OK, "%s", e.msg);
    ck_assert_msg(row.ops_mismatched == 0, "step %u: %s", st, row.first_mismatch);
    if (p)
        ck_assert_msg(secinf_step_program(o, st, p, &e) == MS_OK, "%s", e.msg);
}

uint32_t fixture_count_ops(const op_program *p, int kind, int cat)
{
    uint32_t c = 0;
    for (size_t i = 0; i < p->n_ops; i++)
        c += p->ops[i].kind == kind && (cat < 0 || p->ops[i].cat == cat);
    return c;
}

size_t fixture_layer_ops(const op_program *p, int layer, int phase, const op **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].cat == OPC_POLICY && p->ops[i].layer == layer && p->ops[i].phase == phase &&
            n < max)
            out[n++] = &p->ops[i];
    return n;
}

size_t fixture_same_layer(const op_program *run, const op_program *cost, int layer, int phase,
                          int flags)
{
    const op *a[256], *b[256];
    size_t na = fixture_layer_ops(run, layer, phase, a, 256);
    size_t nb = fixture_layer_ops(cost, layer, phase, b, 256);
    ck_assert_msg(na == nb, "layer %d: %zu policy ops run, %zu costed", layer, na, nb);
    fixture_assert_same_ops(run, a, cost, b, na, flags);
    return na;
}

void fixture_step_pair(const secinf_opts *o, uint32_t step, const policy_ops *pol, void *st,
                       int phase, uint32_t kv_len, const uint32_t *kept, uint32_t n_layers,
                       op_program *run, op_program *cost)
{
    errbuf e = {{0}};
    op_program_init(run);
    op_program_init(cost);
    ck_assert_msg(secinf_step_program(o, step, run, &e) == MS_OK, "%s", e.msg);
    for (uint32_t l = 0; l < n_layers; l++)
        ck_assert_msg(pol->emit_cost(st, phase, l, kv_len, kept, cost, &e) == MS_OK, "%s", e.msg);
}

void fixture_assert_same_ops(const op_program *run, const op *const *a, const op_program *cost,
                             const op *const *b, size_t n, int flags)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(a[i]->kind, b[i]->kind);
        ck_assert_uint_eq(a[i]->batch, b[i]->batch);
        ck_assert_uint_eq(a[i]->m, b[i]->m);
        ck_assert_uint_eq(a[i]->k, b[i]->k);
        ck_assert_uint_eq(a[i]->n, b[i]->n);
        ck_assert_uint_eq(a[i]->flags, b[i]->flags);
        ck_assert_int_eq(a[i]->iarg, b[i]->iarg);
        ck_assert(a[i]->farg == b[i]->farg);
        for (int j = 0; j < 3 && !(a[i]->kind == OP_VIEW && (flags & SAME_NO_VIEWS)); j++) {
            ck_assert_int_eq(a[i]->in[j] == OP_NONE, b[i]->in[j] == OP_NONE);
            if (a[i]->in[j] == OP_NONE)
                continue;
            const op_tensor *ta = &run->tens[a[i]->in[j]], *tb = &cost->tens[b[i]->in[j]];
            ck_assert_uint_eq((uint64_t)ta->batch * ta->rows * ta->cols,
                              (uint64_t)tb->batch * tb->rows * tb->cols);
            if (flags & SAME_ROLES) {
                ck_assert_int_eq(ta->role == OPT_PUBLIC, tb->role == OPT_PUBLIC);
                ck_assert_int_eq(ta->role == OPT_WEIGHT, tb->role == OPT_WEIGHT);
            }
        }
    }
}

policy_env fixture_env(const fixture *f, uint32_t P, uint32_t N)
{
    return (policy_env){.n_layers = f->m.n_layers,
                        .n_heads = f->m.n_heads,
                        .n_kv_heads = f->m.n_kv_heads,
                        .head_dim = f->m.head_dim,
                        .dim = f->m.dim,
                        .ffn_dim = f->m.ffn_dim,
                        .prompt_len = P,
                        .max_len = N};
}

void fixture_record_cfg(run_cfg *c, const char *policy)
{
    snprintf(c->model_ref, sizeof c->model_ref, "stories260K");
    snprintf(c->scenario_path, sizeof c->scenario_path, "t.yaml");
    snprintf(c->trace.source, sizeof c->trace.source, "record");
    snprintf(c->trace.path, sizeof c->trace.path, "%s",
             th_data_path("tests/data/tinystories_sample.txt"));
    snprintf(c->policy.name, sizeof c->policy.name, "%s", policy);
}

lower_opts fixture_step_opts(int phase, uint32_t n_tokens, uint32_t kv_len)
{
    lower_opts o;
    lower_opts_default(&o);
    o.phase = phase;
    o.n_tokens = n_tokens;
    o.kv_len = kv_len;
    return o;
}

kv_param fixture_kvp(const char *key, const char *val, int line, int col)
{
    kv_param p;
    memset(&p, 0, sizeof p);
    ck_assert_uint_lt(strlen(key), sizeof p.key);
    ck_assert_uint_lt(strlen(val), sizeof p.val);
    snprintf(p.key, sizeof p.key, "%s", key);
    snprintf(p.val, sizeof p.val, "%s", val);
    p.line = line;
    p.col = col;
    return p;
}

void fixture_kv(const char *const *params, int n, kv_param *kv)
{
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(params[i], '=');
        ck_assert_msg(eq != NULL, "%s: not key=value", params[i]);
        memset(&kv[i], 0, sizeof kv[i]);
        ck_assert_uint_lt((size_t)(eq - params[i]), sizeof kv[i].key);
        memcpy(kv[i].key, params[i], (size_t)(eq - params[i]));
        snprintf(kv[i].val, sizeof kv[i].val, "%s", eq + 1);
    }
}

void fixture_same_as_cost_path(fixture *f, const char *pn, uint32_t n, uint32_t P,
                               const char *policy, const char *const *params, int n_params,
                               const char *layout, int from_prompt, fixture_step_fn each,
                               void *arg)
{
    errbuf e = {{0}};
    secinf_opts o;
    fixture_opts(f, pn, n, P, policy, params, n_params, &o);
    snprintf(o.cfg.gather, sizeof o.cfg.gather, "%s", layout);
    run_cfg *rc = calloc(1, sizeof *rc);
    ck_assert_ptr_nonnull(rc);
    ck_assert_msg(model_load("stories260K", &rc->model, &e) == MS_OK, "%s", e.msg);
    fixture_record_cfg(rc, policy);
    fixture_kv(params, n_params, rc->policy.params);
    rc->policy.n_params = (uint32_t)n_params;
    rc->work.prompt_len = P;
    rc->work.decode_len = n - P;
    rc->seed = 1;
    replay *r;
    ck_assert_msg(replay_open(rc, &r, &e) == MS_OK, "%s", e.msg);
    op_program sess, cost;
    op_program_init(&sess);
    op_program_init(&cost);
    proto_cfg pc;
    fixture_cfg(pn, &pc);
    uint32_t kept[1024];
    ck_assert_uint_le(n, 1024);
    for (uint32_t st = 0; st <= n - P; st++) {
        op_program_clear(&cost);
        lower_opts lo;
        if (st == 0) {
            ck_assert_msg(replay_prefill(r, &cost, &e) == MS_OK, "%s", e.msg);
            if (!from_prompt)
                continue;
            lower_opts_default(&lo);
            lo.phase = PHASE_PREFILL;
            lo.n_tokens = P;
        } else {
            ck_assert_msg(replay_step(r, st - 1, P + st - 1, kept, &cost, &e) == MS_OK, "%s",
                          e.msg);
            ck_assert_int_eq(replay_step_once(r), 0);
            lo = fixture_step_opts(PHASE_DECODE, 1, P + st - 1);
            lo.kept = kept;
            lo.attended_cache = replay_attended_cache(r); /* as the runner lowers */
        }
        lo.score_gather = !strcmp(layout, "scores");
        ck_assert_msg(lower_step(&f->m, &lo, &cost, &e) == MS_OK, "%s", e.msg);
        ck_assert_int_eq(secinf_step_program(&o, st, &sess, &e), MS_OK);
        uint64_t b[2], rd[2];
        fixture_program_cost(pn, &pc, &sess, &b[0], &rd[0]);
        fixture_program_cost(pn, &pc, &cost, &b[1], &rd[1]);
        ck_assert_msg(b[0] == b[1] && rd[0] == rd[1],
                      "%s %s %s step %u: the session %llu B, %llu rounds; the cost path %llu B, "
                      "%llu rounds",
                      policy, pn, layout, st, (unsigned long long)b[0], (unsigned long long)rd[0],
                      (unsigned long long)b[1], (unsigned long long)rd[1]);
        if (each)
            each(&o, st, &sess, arg);
    }
    replay_close(r);
    free(rc);
    secinf_spol_free(&o.spol);
    op_program_free(&sess);
    op_program_free(&cost);
}
