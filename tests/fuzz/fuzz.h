/* fuzz.h — the fuzz targets: one entry per input surface that reads hostile bytes (scenario and
 * model YAML, trace directories and .npy headers, llama2.c checkpoints and tokenizers, serving
 * workloads, backend frames, op programs, YAML structure, results databases). Each target parses
 * one input and returns; a crash, a sanitizer report or a leak is the finding. tests/fuzz/main.c
 * wraps one target for libFuzzer (make fuzz); tests/check_fuzz.c replays the seed corpora and every
 * regression input under tests/fuzz/ in make check. */
#ifndef MPCSIM_FUZZ_H
#define MPCSIM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

typedef int (*fuzz_fn)(const uint8_t *data, size_t n);

typedef struct fuzz_target {
    const char *name; /* tests/fuzz/corpus/<name>/, tests/fuzz/regress/<name>/ */
    fuzz_fn fn;
} fuzz_target;

int fuzz_scenario(const uint8_t *data, size_t n);
int fuzz_model(const uint8_t *data, size_t n);
int fuzz_trace(const uint8_t *data, size_t n);
int fuzz_npy(const uint8_t *data, size_t n);
int fuzz_checkpoint(const uint8_t *data, size_t n);
int fuzz_tokenizer(const uint8_t *data, size_t n);
int fuzz_workload(const uint8_t *data, size_t n);
int fuzz_frames(const uint8_t *data, size_t n);
int fuzz_program(const uint8_t *data, size_t n);
int fuzz_yaml(const uint8_t *data, size_t n);      /* yx_parse: aliases, anchors, nesting */
int fuzz_resultsdb(const uint8_t *data, size_t n); /* a results database file */

extern const fuzz_target fuzz_targets[];
extern const size_t fuzz_n_targets;

#endif
