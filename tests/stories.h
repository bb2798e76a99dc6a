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

#endif
