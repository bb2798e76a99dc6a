/* stories.h — the stories260K model, its weights and a tokenized excerpt of the TinyStories
 * sample, for the suites that run the model (secure inference, policies inside MPC). */
#ifndef MPCSIM_TESTS_STORIES_H
#define MPCSIM_TESTS_STORIES_H

#include "models/llama.h"
#include "models/model.h"

typedef struct fixture {
    model_cfg m;
    llama *L;
    int ids[1024];
    int n;
} fixture;

/* Loads the model and tokenizes tests/data/tinystories_sample.txt (under MPCSIM_DATA);
 * asserts at least min_tokens tokens. */
void fixture_open(fixture *f, int min_tokens);

/* A secure run's logits (n steps of vocab V) follow the policy: against its float replay pol
 * (rows from position P - 1 on) the same top-1 at every step but at most one, a disagreement
 * only where the replay's margin is below 2·tol, no logit off by tol or more; against the full
 * cache's full, some logit moved by more than 3·tol. */
void fixture_assert_follows(const double *logits, const float *pol, const float *full,
                            uint32_t P, uint32_t n, uint32_t V, double tol);

#endif
