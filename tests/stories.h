/* stories.h — the stories260K model, its weights and a tokenized excerpt of the TinyStories
 * sample, for the suites that run the model (secure inference, policies inside MPC). */
#ifndef MPCSIM_TESTS_STORIES_H
#define MPCSIM_TESTS_STORIES_H

#include "models/llama.h"
#include "models/lower.h"
#include "models/model.h"
#include "protocols/program/op.h"
#include "sim/policy/policy.h"
#include "sim/policy/secpol.h"
#include "sim/secure/secinf.h"
#include "sim/engine/runcfg.h"

typedef struct fixture {
    model_cfg m;
    llama *L;
    int ids[1024];
    int n;
} fixture;

/* Loads the model and tokenizes tests/data/tinystories_sample.txt (under MPCSIM_DATA);
 * asserts at least min_tokens tokens. */
void fixture_open(fixture *f, int min_tokens);

/* Frees what fixture_open loaded. */
void fixture_close(fixture *f);

/* STORIES(min_tokens) at file scope defines sf, a fixture opened (at least min_tokens tokens)
 * before each test of a case given STORIES_USE(tc) and closed after it (a test may change the
 * model's weights: the next one loads them again). */
#define STORIES(min_tokens)                                         \
    static fixture sf;                                              \
    static void sf_setup(void) { fixture_open(&sf, (min_tokens)); } \
    static void sf_teardown(void) { fixture_close(&sf); }
#define STORIES_USE(tc) tcase_add_checked_fixture(tc, sf_setup, sf_teardown)

/* A secure run's logits (n steps of vocab V) follow the policy: against its float replay pol
 * (rows from position P - 1 on) the same top-1 at every step but at most one, a disagreement
 * only where the replay's margin is below 2·tol, no logit off by tol or more; against the full
 * cache's full, some logit moved by more than 3·tol. */
void fixture_assert_follows(const double *logits, const float *pol, const float *full, uint32_t P,
                            uint32_t n, uint32_t V, double tol);

/* policy's float replay (with its "key=value" params) over the fixture's first n tokens, P
 * of them the prompt: its keep masks into k, its logits (n × vocab, malloc'd) into *pol; full
 * (may be NULL): the full cache's logits, malloc'd. fixture_replay_free frees all three. */
void fixture_replay(fixture *f, const char *policy, const char *const *params, int n_params,
                    uint32_t n, uint32_t P, secpol_keep *k, float **pol, float **full);
void fixture_replay_free(secpol_keep *k, float *pol, float *full);

/* The named protocol's defaults with the sigmoid approximations (the tolerances the suites
 * state are for them). */
void fixture_cfg(const char *pname, proto_cfg *c);

/* The online bytes (summed over the parties) and rounds of program p on protocol pname's cost
 * engine at cfg. */
void fixture_program_cost(const char *pname, const proto_cfg *cfg, const op_program *p,
                          uint64_t *bytes, uint64_t *rounds);

/* A secure session over the fixture's first n tokens, P of them the prompt, in pname (its
 * fixture_cfg); with policy (NULL: none) and its "key=value" params, whose selection must run on
 * shares (secinf_spol_of reports no public selection). */
void fixture_opts(fixture *f, const char *pname, uint32_t n, uint32_t P, const char *policy,
                  const char *const *params, int n_params, secinf_opts *o);

/* Step st of the secure run r costs what the engine predicts, op by op (valid_step over a
 * uniform network of latency_ns and 1 GB/s, the default machine); p (may be NULL) gets the
 * step's program. */
void fixture_step_costed(const secinf_opts *o, const secinf_result *r, uint32_t st,
                         uint64_t latency_ns, op_program *p);

/* The ops of kind in p, of category cat (< 0: any). */
uint32_t fixture_count_ops(const op_program *p, int kind, int cat);
/* The policy ops (category policy) of one layer and phase in p, in order, into out (at most
 * max); their number. */
size_t fixture_layer_ops(const op_program *p, int layer, int phase, const op **out, size_t max);

enum {
    SAME_ROLES = 1,    /* an operand is public in one program where it is in the other, and
                        * a weight where it is in the other */
    SAME_NO_VIEWS = 2, /* a VIEW's operands are not compared (its source may be the session's
                        * longer cache) */
};
/* The session's ops a[0..n) (program run) are the cost model's b[0..n) (program cost): the same
 * kinds, shapes, flags and arguments, operands of the same sizes; flags: SAME_*. */
void fixture_assert_same_ops(const op_program *run, const op *const *a, const op_program *cost,
                             const op *const *b, size_t n, int flags);

/* The policy ops of one layer and phase are the same in run and in cost (as many, and
 * fixture_assert_same_ops with flags); their number. */
size_t fixture_same_layer(const op_program *run, const op_program *cost, int layer, int phase,
                          int flags);

/* Step step of the session o as it runs, into run, and the policy ops pol (its state st) costs
 * for it in each of n_layers layers (emit_cost's phase, kv_len and kept), into cost; both
 * programs initialised here. */
void fixture_step_pair(const secinf_opts *o, uint32_t step, const policy_ops *pol, void *st,
                       int phase, uint32_t kv_len, const uint32_t *kept, uint32_t n_layers,
                       op_program *run, op_program *cost);

/* The environment a policy sees for this model with a P-token prompt and N tokens at most. */
policy_env fixture_env(const fixture *f, uint32_t P, uint32_t N);
/* c runs stories260K (as "t.yaml" names it) over the trace recorded from the test text, with
 * policy (its parameters left to the caller). */
void fixture_record_cfg(run_cfg *c, const char *policy);

/* The default lowering options of one step: phase, n_tokens new tokens, kv_len cached. */
lower_opts fixture_step_opts(int phase, uint32_t n_tokens, uint32_t kv_len);

/* `mpcsim run`'s cost path (the replay's policy ops, its kept counts, the lowering attending
 * the rows the policy's attend hook states and laying out the score side under gather: scores)
 * costs each step of the session fixture_opts(f, pn, n, P, policy, params, n_params) opens as
 * the session's program under the same layout (layout: rows or scores): the same bytes and
 * rounds in protocol pn, from the prompt (from_prompt) or the first decode step on. each (may
 * be NULL) sees each step's session program. */
typedef void (*fixture_step_fn)(const secinf_opts *o, uint32_t st, const op_program *sess,
                                void *arg);
void fixture_same_as_cost_path(fixture *f, const char *pn, uint32_t n, uint32_t P,
                               const char *policy, const char *const *params, int n_params,
                               const char *layout, int from_prompt, fixture_step_fn each,
                               void *arg);

/* The policy parameter key: val as a scenario file gives it at line:col. */
kv_param fixture_kvp(const char *key, const char *val, int line, int col);
/* "key=value" params as the policy's parameters kv[0..n). */
void fixture_kv(const char *const *params, int n, kv_param *kv);

#endif
