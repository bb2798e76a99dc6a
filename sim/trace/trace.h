/* trace.h — what the policy replay reads: per (layer, position) queries, keys, values,
 * attention rows, FFN pre-activations and logits of a transformer run.
 *
 * A trace comes from one of three sources, behind one opaque handle:
 *   - a directory in the on-disk format (sim/trace/TRACE_FORMAT.md: YAML manifest + NumPy .npy
 *     arrays), recorded from stories260K by `mpcsim trace record` or dumped from a PyTorch
 *     model by scripts/dump_trace.py;
 *   - a synthetic generator (model shape + seed + structure parameters), which never
 *     materializes O(T²) data: attention rows are computed on the fly from q·k, keys and values
 *     are regenerated on demand from counter-based streams, so memory is O(T) per row;
 *   - a run config (run_cfg.trace: none | record | synth | npy).
 *
 * Access is streaming: trace_seek() makes one position current, then trace_q/att/ffn/logits
 * give that position for any layer. Keys and values of any position are random access
 * (trace_kv, trace_gather) so a policy can keep its own selection and recompute attention on a
 * subset (trace_attend). Positions are 0-based; the row at position pos attends to 0..pos. */
#ifndef MPCSIM_TRACE_H
#define MPCSIM_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "protocols/base/err.h"
#include "models/model.h"
#include "sim/engine/runcfg.h"

#define TRACE_FORMAT_NAME "mpcsim-trace"
#define TRACE_FORMAT_VERSION 1
/* The largest head_dim a rotate-half trace may have (its channels are reordered on read). */
#define TRACE_MAX_HEAD_DIM 1024

typedef struct trace trace;

/* Arrays a trace may hold (file stem in a trace directory in comments). */
typedef enum {
    TRACE_Q,      /* q.npy      float32 [L][T][H][d]      after RoPE */
    TRACE_K,      /* k.npy      float32 [L][T][Hkv][d]    after RoPE */
    TRACE_V,      /* v.npy      float32 [L][T][Hkv][d] */
    TRACE_ATT,    /* att.npy    float32 [L][T][H][T]      softmax rows, zeros above the diagonal */
    TRACE_FFN,    /* ffn.npy    float32 [L][T][F]         gate pre-activation w1·x */
    TRACE_LOGITS, /* logits.npy float32 [T][V] */
    TRACE_WO,     /* wo.npy     float32 [L][dim][H*d]     output projection (y = W_o·att_out) */
    TRACE_TOKENS, /* tokens.npy int32   [T] */
    TRACE_N_ARRAYS
} trace_array;

const char *trace_array_name(trace_array a); /* "q", "k", … (the file stem) */

typedef struct trace_shape {
    uint32_t n_layers;   /* L */
    uint32_t n_heads;    /* H */
    uint32_t n_kv_heads; /* Hkv; query head h reads KV head h / (H / Hkv) */
    uint32_t head_dim;   /* d */
    uint32_t dim;        /* hidden size (rows of W_o) */
    uint32_t ffn_dim;    /* F */
    uint32_t vocab;      /* V (0 if no logits) */
    uint32_t n_tokens;   /* T */
} trace_shape;

/* ---- synthetic generator parameters (construction: sim/trace/TRACE_FORMAT.md §Synthetic) -------
 * All attention knobs are in logit units (added to q·k/√d), so softmax(q·k/√d) shows them. */
typedef struct trace_synth {
    double sink; /* logit bonus of the first n_sinks keys */
    uint32_t n_sinks;
    double local;        /* logit bonus at distance 0 of the local kernel exp(-Δ²/(2W²)) */
    double window;       /* W, in positions */
    double heavy;        /* logit bonus of heavy-hitter keys */
    double heavy_frac;   /* fraction of keys that are heavy hitters (per layer, KV head) */
    double layer_sim;    /* probability a key's heavy status is inherited from layer l-1 */
    double drift;        /* 1 - E[cos(q_t, q_{t+1})] (query drift between positions) */
    double noise;        /* std of the content logit noise */
    double ffn_sparsity; /* fraction of FFN pre-activations ≤ 0 */
    uint32_t generator;  /* 2: counter-based query stream (random access); 1: sequential (old) */
    double group_sim;    /* GQA: correlation of the content queries of two query heads that share
                          * a KV head (no effect when n_kv_heads == n_heads) */
} trace_synth;

void trace_synth_defaults(trace_synth *p);
/* The defaults calibrated for a model family (model_family; TRACE_FORMAT.md §Calibration):
 * what a synthetic trace of that family's shapes uses unless a parameter is given. */
void trace_synth_defaults_for(trace_synth *p, int family);
/* Sets one parameter by name ("sink", "n_sinks", "local", "window", "heavy", "heavy_frac",
 * "layer_sim", "drift", "noise", "ffn_sparsity", "generator", "group_sim"); unknown keys get a
 * did-you-mean hint. */
int trace_synth_set(trace_synth *p, const char *key, const char *val, errbuf *e);
/* Applies scenario parameters; errors carry path:line:col. */
int trace_synth_from_kv(trace_synth *p, const kv_param *kv, size_t n, const char *path, errbuf *e);
int trace_synth_check(const trace_synth *p, errbuf *e);
/* YAML "key: value" lines (what `trace fit -o` writes and `trace synth --params` reads). */
int trace_synth_write_yaml(const trace_synth *p, FILE *f);
int trace_synth_read_yaml(trace_synth *p, const char *path, errbuf *e);
/* The parameters' keys, ranges and defaults (for `mpcsim list keys`). */
const struct ys_schema *trace_synth_schema(void);
/* The keys of a trace's manifest.yaml (for `mpcsim list keys manifest`). */
const struct ys_schema *trace_manifest_schema(void);

/* ---- opening ------------------------------------------------------------------------- */

/* A trace directory (manifest.yaml + .npy files). A missing or wrong `format:` line, or
 * arrays whose shape disagrees with the manifest, give ERR_FORMAT with a regenerate hint. */
int trace_open(const char *dir, trace **out, errbuf *e);
/* A synthetic trace of n_tokens positions for the shape of cfg. */
int trace_open_synth(const model_cfg *cfg, uint32_t n_tokens, uint64_t seed, const trace_synth *p,
                     trace **out, errbuf *e);
/* From a run config: source "npy" opens trace.path; "synth" generates prompt_len +
 * decode_len positions with cfg->seed and trace.params; "record" runs the model (cfg->model
 * must have weights) over the text file trace.path for prompt_len + decode_len tokens into
 * memory. "none" (or "") gives MS_ERR_NOTFOUND. */
int trace_open_run(const run_cfg *cfg, trace **out, errbuf *e);
void trace_close(trace *t);

const trace_shape *trace_get_shape(const trace *t);
int trace_has(const trace *t, trace_array a);
int trace_is_synthetic(const trace *t);
uint64_t trace_seed(const trace *t);                   /* 0 for recorded traces */
const trace_synth *trace_synth_params(const trace *t); /* NULL for recorded traces */
const char *trace_model_name(const trace *t);
const int32_t *trace_tokens(const trace *t); /* T ids, or NULL (synthetic) */
/* The q/k channel order as stored ("interleaved" or "half"); reads always return interleaved. */
const char *trace_rope_layout(const trace *t);
const char *trace_source_name(const trace *t); /* the manifest's source, or "synth" */

/* ---- streaming access (current position) ---------------------------------------------
 * trace_seek makes pos current. Moving forward by one is the cheap path; a synthetic trace
 * reaches any position in O(32·L·H·d) (generator 2; generator 1 walks its query stream from 0
 * on a backward seek). Returned pointers stay valid until the
 * next trace_seek (trace_att: until the next trace_att or trace_seek). */
int trace_seek(trace *t, uint32_t pos, errbuf *e);
uint32_t trace_pos(const trace *t);
const float *trace_q(trace *t, uint32_t layer);   /* H × d */
const float *trace_att(trace *t, uint32_t layer); /* H × (pos+1), rows sum to 1 */
/* A synthetic trace keeps what its rows hash per key (trace_impl.h: 250 MiB at a 7B shape and
 * T = 32000) for a reader that computes rows at many positions and keeps little else. */
void trace_keep_key_words(trace *t);
/* Spans: the attention rows of up to TRACE_SPAN_MAX consecutive positions at once, one KV
 * head at a time (a synthetic trace then reads each key once for all of them, and the rows are
 * still in cache when they are read). trace_span_max() is the largest span the trace computes
 * (0: none; read rows one position at a time). trace_span_begin seeks pos0..pos0+cnt-1 in turn
 * (the last stays current, as after trace_seek) and keeps their queries; trace_span_att is
 * then the row block (H × (pos0+i+1), as trace_att) of position pos0+i at layer in which the
 * rows of KV head g's query heads are valid, every position's rows of (layer, g) computed at
 * its first call. The values are trace_seek(pos0+i) + trace_att(layer)'s (trace_q's for
 * trace_span_q), bit for bit. */
#define TRACE_SPAN_MAX 8
uint32_t trace_span_max(const trace *t);
int trace_span_begin(trace *t, uint32_t pos0, uint32_t cnt, errbuf *e);
const float *trace_span_att(trace *t, uint32_t layer, uint32_t g, uint32_t i);
const float *trace_span_q(trace *t, uint32_t layer, uint32_t i); /* H × d of position pos0+i */
const float *trace_ffn(trace *t, uint32_t layer);                /* F, or NULL if absent */
const float *trace_logits(trace *t);                             /* V, or NULL if absent */
/* For several readers of one trace (the runs of a sweep that replay the same trace, driven
 * position by position together): every layer's attention row at the current position is
 * kept (L × H × T floats) and computed once, whoever asks for it first; trace_att's pointer
 * then stays valid until the next trace_seek to another position. MS_ERR_NOMEM if the rows do
 * not fit. */
int trace_share_rows(trace *t);

/* ---- random access to the cache ----------------------------------------------------- */

/* k and/or v (either may be NULL) of position pos: Hkv × d each. */
int trace_kv(trace *t, uint32_t layer, uint32_t pos, float *k, float *v);
/* Rows idx[0..n) of one KV head: k and/or v receive n × d floats. */
int trace_gather(trace *t, uint32_t layer, uint32_t kv_head, const uint32_t *idx, size_t n,
                 float *k, float *v);
/* Attention of query q (d floats, e.g. trace_q()+h*d) of query head `head` restricted to keys
 * idx[0..n): p[i] = softmax_i(q·k_idx[i]/√d); out (d floats, may be NULL) = Σ p[i]·v_idx[i].
 * With idx = 0..pos it reproduces trace_att. */
int trace_attend(trace *t, uint32_t layer, uint32_t head, const float *q, const uint32_t *idx,
                 size_t n, float *p, float *out);
/* W_o of a layer: dim × (H·d), row-major (y = W_o·o). W_o^h is columns h·d..h·d+d-1.
 * From the model for recorded traces (wo.npy), generated (seeded) for synthetic ones; NULL if
 * the trace has none. Valid until the next trace_wo call. */
const float *trace_wo(trace *t, uint32_t layer, uint32_t *rows, uint32_t *cols);

/* ---- verification (sim/trace/verify.c) --------------------------------------------------- */

typedef struct trace_check {
    uint64_t values;      /* floats checked for finiteness */
    uint64_t att_rows;    /* stored attention rows compared with softmax(q·k/√d) */
    double att_err;       /* largest |stored − recomputed| over those rows */
    uint32_t model_pos;   /* positions compared with the model's own forward pass (0: none) */
    double model_err;     /* largest relative difference to the model: |a − b| / max(1, |b|∞) */
    char model_note[160]; /* why the model was not compared, when it was not */
} trace_check;

/* Checks a trace for consistency: token ids within the vocabulary, every value finite, every
 * stored attention row equal to softmax(q·k/√d) within tol (rows sum to 1, zeros above the
 * diagonal) and, when the trace's model has weights here (stories260K), q, k, v, ffn and
 * logits equal the model's own forward pass over the trace's tokens within tol (relative to
 * each row's largest magnitude). Returns MS_ERR_FORMAT with the first mismatch named. */
int trace_verify(trace *t, const char *dir, double tol, trace_check *out, errbuf *e);

/* For a run that combines a trace with a model's live metrics: the model's own q and k at
 * (layer, pos) against the trace's; MS_ERR_INPUT naming the first mismatch (beyond tol,
 * relative) with a hint about the channel order. */
int trace_agrees_with_model(trace *t, const char *model_name, uint32_t layer, uint32_t pos,
                            const float *q, const float *k, double tol, errbuf *e);

/* ---- recording / writing ------------------------------------------------------------ */

/* The positions trace_record would record from text_path for model cfg (BOS included, at most
 * max_tokens and the model's context), without running the model. */
int trace_count_tokens(const model_cfg *cfg, const char *text_path, uint32_t max_tokens,
                       uint32_t *n, errbuf *e);
/* Records model (name or YAML path, must have weights + tokenizer) over the text in
 * text_path, at most max_tokens tokens (BOS included), into directory out_dir. */
int trace_record(const char *model, const char *text_path, uint32_t max_tokens, const char *out_dir,
                 errbuf *e);

/* Writes a trace directory position by position (files are sized up front, rows land at
 * their offsets, so memory stays O(row)). `arrays` is a bit mask of (1u << trace_array). */
typedef struct trace_writer trace_writer;
int trace_writer_open(const char *dir, const trace_shape *s, const char *model_name,
                      const char *source, unsigned arrays, trace_writer **out, errbuf *e);
int trace_writer_tokens(trace_writer *w, const int32_t *ids, uint32_t n);
/* One (layer, pos): q H×d, k/v Hkv×d, att H×(pos+1) (zero-filled above), ffn F; any NULL is
 * skipped. */
int trace_writer_row(trace_writer *w, uint32_t layer, uint32_t pos, const float *q, const float *k,
                     const float *v, const float *att, const float *ffn);
int trace_writer_logits(trace_writer *w, uint32_t pos, const float *logits);
int trace_writer_wo(trace_writer *w, uint32_t layer, const float *wo);
/* An extra top-level manifest line "key: value" (e.g. the seed and parameters of a synthetic
 * trace); value is written verbatim, so it must be valid YAML. */
int trace_writer_meta(trace_writer *w, const char *key, const char *value);
/* Writes the manifest and closes; frees w in every case. */
int trace_writer_close(trace_writer *w, errbuf *e);

/* ---- .npy (NPY format 1.0, little-endian float32 '<f4' or int32 '<i4', C order) --------- */
typedef struct trace_npy {
    char dtype; /* 'f' (float32) or 'i' (int32) */
    uint32_t ndim;
    uint64_t shape[4];
    uint64_t data_offset; /* bytes from the start of the file to the data */
} trace_npy;

int trace_npy_read_header(FILE *f, const char *path, trace_npy *h, errbuf *e);
int trace_npy_write_header(FILE *f, const trace_npy *h);
uint64_t trace_npy_count(const trace_npy *h);
/* The data's size in bytes, overflow-checked: -1 when it does not fit 64 bits. */
int trace_npy_bytes(const trace_npy *h, uint64_t *bytes);

/* ---- fitting (sim/trace/tracefit.c) -------------------------------------------------------- */

/* Summary statistics of a trace, estimated on rows far enough from the start. */
typedef struct trace_stats {
    double sink_mass;          /* mean attention on the first n_sinks keys */
    double local_mass;         /* mean attention within distance < window (excluding sinks) */
    double heavy_mass;         /* mean attention on detected heavy hitters outside the window */
    double layer_overlap;      /* heavy sets: |H_l ∩ H_l-1| / |H_l|, mean over layers, KV heads */
    double q_cos;              /* mean cos(q_t, q_t+1) */
    double ffn_neg;            /* fraction of FFN pre-activations ≤ 0 (NAN if absent) */
    double sparsity;           /* H2O §3.1: share of a row's entries below 1 % of its largest */
    double sparsity_min_layer; /* the same, the smallest of the per-layer means */
    double top5_mass;          /* attention mass on the top 5 % of a row's entries */
    double sink_top;           /* share of rows whose largest entry is a sink key */
    uint64_t rows;             /* attention rows used */
} trace_stats;

/* Estimates the synthetic parameters that reproduce t's structure (construction-aware,
 * within-row log-ratio estimators; see TRACE_FORMAT.md §Fitting) and its summary stats.
 * n_sinks is taken from `p_in` if non-NULL, else 1. */
int trace_fit(trace *t, const trace_synth *p_in, trace_synth *out, trace_stats *st, errbuf *e);
/* Summary statistics only, measured the same way for any trace and any parameter set. */
int trace_measure(trace *t, const trace_synth *p, trace_stats *st, errbuf *e);

#endif
