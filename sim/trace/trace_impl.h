/* trace_impl.h — inside the trace handle: shared by trace.c (directories, common access) and
 * synth.c (the synthetic source). Not for other modules: they use trace.h. */
#ifndef MPCSIM_TRACE_IMPL_H
#define MPCSIM_TRACE_IMPL_H

#include "trace.h"

/* What a source provides; trace.c builds attention rows, gathers and trace_attend on top. */
typedef struct trace_source {
    /* Makes pos current: fills t->q (L × H × d) and whatever ffn/logits it has. */
    int (*seek)(trace *t, uint32_t pos, errbuf *e);
    /* k and/or v of (layer, pos): Hkv × d each. */
    void (*kv)(trace *t, uint32_t layer, uint32_t pos, float *k, float *v);
    /* k and/or v of one KV head g at (layer, pos): d each. */
    void (*kv1)(trace *t, uint32_t layer, uint32_t g, uint32_t pos, float *k, float *v);
    /* Attention row of the current position read from storage into t->att (H × (pos+1)),
     * or NULL when rows are computed from q·k. */
    int (*att_row)(trace *t, uint32_t layer);
    const float *(*ffn)(trace *t, uint32_t layer);
    const float *(*logits)(trace *t);
    const float *(*wo)(trace *t, uint32_t layer);
    void (*close)(trace *t);
    /* Optional (NULL: no spans): keeps what the rows of the current position need as the i-th
     * position of a span (trace_span_begin), and computes the rows of KV head g's query heads
     * at a span's cnt positions from pos0 and layer, into position i's H × (pos0 + i + 1) row
     * block at out + i·H·T (the other heads' rows untouched). */
    int (*span_keep)(trace *t, uint32_t i);
    void (*att_span)(trace *t, uint32_t layer, uint32_t g, uint32_t pos0, uint32_t cnt, float *out);
} trace_source;

struct trace {
    trace_shape s;
    char model[64];
    unsigned arrays; /* bit mask of (1u << trace_array) */
    uint32_t pos;
    int have_pos;
    int32_t *tokens;    /* T, or NULL */
    float *q;           /* L × H × d at the current position */
    float *att;         /* H × T (rows stored with stride pos+1) */
    float *kbuf, *vbuf; /* Hkv × d scratch */
    const trace_source *src;
    void *impl;
    int synthetic;
    int rope_half;   /* stored q/k are in rotate-half order: converted on every read */
    char source[32]; /* the manifest's source: record, synth, pytorch, … */
    uint64_t seed;
    trace_synth synth;
    float *rows;       /* trace_share_rows: L × H × T, every layer's row at row_pos */
    uint32_t *row_pos; /* L: position + 1 whose row rows holds, 0 none */
    float *span;       /* TRACE_SPAN_MAX × H × T: a span's rows at span_layer, span_g */
    float *span_q;     /* TRACE_SPAN_MAX × L × H × d: a span's queries */
    uint32_t span_pos0, span_cnt, span_layer, span_g;
};

/* A stored attention row of T floats (the whole row, zeros above the diagonal included), or
 * NULL when the source stores none. */
const float *trace_stored_att(trace *t, uint32_t layer, uint32_t pos, uint32_t h);
/* Softmax in place of each of rows rows of n logits (att: rows × n), the max subtracted first:
 * the recorded and the synthetic sources normalise alike. */
void trace_softmax_rows(float *att, uint32_t rows, uint32_t n);
/* Allocates the common buffers for t->s; 0 on success. */
int trace_alloc_common(trace *t);
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
