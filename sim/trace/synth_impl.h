/* synth_impl.h — inside the synthetic source (synth.c, synth_kern.c): what its kernels and the
 * tests reach beyond trace.h. Not for other modules. */
#ifndef MPCSIM_SYNTH_IMPL_H
#define MPCSIM_SYNTH_IMPL_H

#include "trace_impl.h"

/* Nonzero: synthetic attention rows come from the reference kernel (the scalar code the
 * table kernel replaced), for the tests that compare the two. */
extern int trace_synth_reference_kernel;
/* After trace_keep_key_words, the synthetic source keeps every key's content sign words (8
 * bytes per key, KV head, layer and 64 content channels: 250 MiB for a 7B shape at T = 32000)
 * when they fit in trace_synth_words_cap bytes (SYNTH_WORDS_CAP by default; 0: never, each row
 * hashes its keys again). The rows are the same either way. */
#define SYNTH_WORDS_CAP (320ull << 20)
extern size_t trace_synth_words_cap;
void trace_synth_keep_words(trace *t);
/* Bytes of the sign-word cache of t (0: none). */
size_t trace_synth_words_bytes(const trace *t);
/* e^x for x <= 0 as the synthetic softmax computes it (within 2 float ulps of expf). */
float trace_synth_exp_neg(float x);
/* Opens the synthetic source into t (synth.c). */
int trace_synth_attach(trace *t, const model_cfg *cfg, errbuf *e);

#endif
