/* trace_impl.h — inside the trace handle: the source table and the handle's common buffers,
 * used by trace.c (directories, common access) and by every source (synth.c). A source
 * depends on the handle, never the other way round: what trace.c asks of a source goes through
 * the table. Not for other modules: they use trace.h. */
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
    /* Optional (NULL: TRACE_SPAN_MAX when att_span is set): the longest span the source computes
     * now (0: one row at a time). */
    uint32_t (*span_max)(const trace *t);
    /* Optional (NULL: nothing to keep): trace_keep_key_words for this source. */
    void (*keep_words)(trace *t);
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

/* ---- trace directories (tracefmt.c), for the reader (tracedir.c) */
#define REGEN_HINT "hint: regenerate the trace with 'mpcsim trace record' or scripts/dump_trace.py"
extern const char *const array_names[TRACE_N_ARRAYS];
/* Expected shape of an array for a trace shape; returns ndim. */
uint32_t array_shape(const trace_shape *s, trace_array a, uint64_t sh[4]);
/* Opens a file of a trace folder for reading: a symlink, FIFO or device is refused (opening
 * does not block on a FIFO). NULL with errno set (ELOOP for a link, EINVAL for not a file). */
FILE *open_member(const char *path);
/* Why open_member failed, for messages. */
const char *member_why(int err);

#endif
