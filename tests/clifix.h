/* clifix.h — scenario files the CLI suites write. */
#ifndef MPCSIM_TESTS_CLIFIX_H
#define MPCSIM_TESTS_CLIFIX_H

/* Writes to path a sweep named name of n_prompts prompt lengths (at most 8) × semi2k, aby3 ×
 * lan, wan: gpt2 with 4 generated tokens, or (slow) llama-2-7b with 256, each simulated. */
void clifix_write_sweep(const char *path, const char *name, int n_prompts, int slow);

#endif
