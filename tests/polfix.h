/* polfix.h — a policy and its composition side by side: the suites that compare a hand-written
 * policy with the blocks that compose it (check_compose, check_compose_mpc) drive both over
 * stories260K's recorded trace and run both in one scenario. */
#ifndef MPCSIM_TESTS_POLFIX_H
#define MPCSIM_TESTS_POLFIX_H

#include <stddef.h>

#include "harness.h"
#include "testdir.h"
#include "sim/policy/policy.h"

/* "k=v k=v" as a policy's parameters kv[0..8), each at line 3 and a column of its own. */
size_t polfix_parse_kv(const char *text, kv_param *kv);

/* One policy's instance on the trace. */
typedef struct polfix_inst {
    const policy_ops *p;
    kv_param kv[8];
    policy_args a;
    void *st;
} polfix_inst;

/* Loads params into p's arguments and runs its init for env; fails the test otherwise. */
void polfix_open(polfix_inst *x, const policy_ops *p, const char *params, const policy_env *env);

/* stories260K's trace of the test text, 72 tokens, recorded once into td's folder. */
const char *polfix_recorded_trace(const testdir *td);

/* Writes "      - {head, k: v, ..., metric_stride: 1}\n" of params ("k=v k=v") into out. */
void polfix_entry(char *out, size_t cap, const char *head, const char *params);

/* Runs scenario scn into db and asserts every pair of runs (ids 1-2, 3-4, ...; n_pairs of
 * them) has the same metrics (but the compute-time estimates) and the same bytes and rounds
 * per phase and category, that every pair evicted something and, with policy_costs, that the
 * selection costs bytes in every pair. */
void polfix_run_equal(const testdir *td, const char *scn, const char *db, int n_pairs,
                      int policy_costs);

/* A scenario of stories260K recording the test text (prompt 32, decode 8, semi2k on lan) whose
 * one policy entry is "{entry}", into out. */
void polfix_scenario(char *out, size_t cap, const char *entry);

/* Writes the scenario text to <td's folder>/refused.yaml and runs it: exit 2, a message that
 * starts at blame's path (NULL: the scenario's) with c's place and gists (case i), and no
 * database written; fails the test otherwise. */
void polfix_run_refused(const testdir *td, const char *scenario, const char *blame, const th_bad *c,
                        int i);

#endif
