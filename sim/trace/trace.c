/* trace.c — the trace handle: the buffers and the access functions every source shares (rows,
 * shared rows, spans of positions, gathers, trace_attend). The sources are tracedir.c (trace
 * directories) and synth.c (synthetic); recording is tracerec.c. */
#include "trace_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "protocols/base/yschema.h"

int trace_alloc_common(trace *t)
{
    const trace_shape *s = &t->s;
    t->q = calloc((size_t)s->n_layers * s->n_heads * s->head_dim, sizeof(float));
    t->att = calloc((size_t)s->n_heads * s->n_tokens, sizeof(float));
    t->kbuf = calloc((size_t)s->n_kv_heads * s->head_dim, sizeof(float));
    t->vbuf = calloc((size_t)s->n_kv_heads * s->head_dim, sizeof(float));
    return t->q && t->att && t->kbuf && t->vbuf ? MS_OK : MS_ERR_NOMEM;
}

void trace_close(trace *t)
{
    if (!t)
        return;
    if (t->src && t->src->close)
        t->src->close(t);
    free(t->tokens);
    free(t->q);
    free(t->att);
    free(t->span);
    free(t->span_q);
    free(t->kbuf);
    free(t->vbuf);
    free(t->rows);
    free(t->row_pos);
    free(t);
}

/* ---- common access -------------------------------------------------------------------- */

const trace_shape *trace_get_shape(const trace *t) { return &t->s; }
int trace_has(const trace *t, trace_array a) { return a < TRACE_N_ARRAYS && (t->arrays >> a & 1); }
int trace_is_synthetic(const trace *t) { return t->synthetic; }
uint64_t trace_seed(const trace *t) { return t->synthetic ? t->seed : 0; }
const trace_synth *trace_synth_params(const trace *t) { return t->synthetic ? &t->synth : NULL; }
const char *trace_model_name(const trace *t) { return t->model; }
const int32_t *trace_tokens(const trace *t) { return t->tokens; }
const char *trace_rope_layout(const trace *t) { return t->rope_half ? "half" : "interleaved"; }
const char *trace_source_name(const trace *t)
{
    return t->synthetic ? "synth" : t->source[0] ? t->source : "unknown";
}
uint32_t trace_pos(const trace *t) { return t->pos; }

int trace_seek(trace *t, uint32_t pos, errbuf *e)
{
    if (pos >= t->s.n_tokens)
        return err_set(e, MS_ERR_RANGE, "trace position %u out of range (the trace has %u)", pos,
                       t->s.n_tokens);
    if (t->have_pos && pos == t->pos) /* a trace is a fixed function of the position */
        return MS_OK;
    int rc = t->src->seek(t, pos, e);
    if (rc == MS_OK) {
        t->pos = pos;
        t->have_pos = 1;
    }
    return rc;
}

const float *trace_q(trace *t, uint32_t layer)
{
    if (!t->have_pos || layer >= t->s.n_layers)
        return NULL;
    return t->q + (size_t)layer * t->s.n_heads * t->s.head_dim;
}

void trace_softmax_rows(float *att, uint32_t rows, uint32_t n)
{
    for (uint32_t h = 0; h < rows; h++) {
        float *row = att + (size_t)h * n, mx = row[0];
        for (uint32_t j = 1; j < n; j++)
            mx = row[j] > mx ? row[j] : mx;
        double sum = 0;
        for (uint32_t j = 0; j < n; j++)
            sum += (row[j] = expf(row[j] - mx));
        for (uint32_t j = 0; j < n; j++)
            row[j] = (float)(row[j] / sum);
    }
}

/* Row of query head h over keys 0..pos from q·k/√d, into t->att (stride pos+1). */
static void compute_att(trace *t, uint32_t layer)
{
    const trace_shape *s = &t->s;
    uint32_t d = s->head_dim, n = t->pos + 1, G = s->n_heads / s->n_kv_heads;
    const float *q = trace_q(t, layer);
    float scale = 1.0f / sqrtf((float)d);
    for (uint32_t j = 0; j < n; j++) {
        t->src->kv(t, layer, j, t->kbuf, NULL);
        for (uint32_t h = 0; h < s->n_heads; h++) {
            const float *k = t->kbuf + (h / G) * d, *qh = q + (size_t)h * d;
            float dot = 0.0f;
            for (uint32_t i = 0; i < d; i++)
                dot += qh[i] * k[i];
            t->att[(size_t)h * n + j] = dot * scale;
        }
    }
    trace_softmax_rows(t->att, s->n_heads, n);
}

static void fill_att(trace *t, uint32_t layer)
{
    if (!(t->src->att_row && t->src->att_row(t, layer)))
        compute_att(t, layer);
}

const float *trace_att(trace *t, uint32_t layer)
{
    if (!t->have_pos || layer >= t->s.n_layers)
        return NULL;
    if (!t->rows) {
        fill_att(t, layer);
        return t->att;
    }
    /* shared: the row is computed into its layer's slot once per position, whoever asks */
    float *slot = t->rows + (size_t)layer * t->s.n_heads * t->s.n_tokens, *own = t->att;
    if (t->row_pos[layer] != t->pos + 1) {
        t->att = slot;
        fill_att(t, layer);
        t->att = own;
        t->row_pos[layer] = t->pos + 1;
    }
    return slot;
}

int trace_share_rows(trace *t)
{
    const trace_shape *s = &t->s;
    if (t->rows)
        return MS_OK;
    t->rows = malloc((size_t)s->n_layers * s->n_heads * s->n_tokens * sizeof *t->rows);
    t->row_pos = calloc(s->n_layers, sizeof *t->row_pos);
    if (t->rows && t->row_pos)
        return MS_OK;
    free(t->rows);
    free(t->row_pos);
    t->rows = NULL;
    t->row_pos = NULL;
    return MS_ERR_NOMEM;
}

void trace_keep_key_words(trace *t)
{
    if (t->impl && t->src->keep_words)
        t->src->keep_words(t);
}

/* ---- spans of positions --------------------------------------------------------------- */

uint32_t trace_span_max(const trace *t)
{
    if (!t->src->att_span)
        return 0;
    return t->src->span_max ? t->src->span_max(t) : TRACE_SPAN_MAX;
}

int trace_span_begin(trace *t, uint32_t pos0, uint32_t cnt, errbuf *e)
{
    const trace_shape *s = &t->s;
    if (!cnt || cnt > trace_span_max(t))
        return err_set(e, MS_ERR_INTERNAL, "trace: a span of %u positions (at most %u)", cnt,
                       trace_span_max(t));
    t->span_cnt = 0;
    size_t nq = (size_t)s->n_layers * s->n_heads * s->head_dim;
    if (!t->span &&
        !(t->span = malloc((size_t)TRACE_SPAN_MAX * s->n_heads * s->n_tokens * sizeof *t->span)))
        return err_set(e, MS_ERR_NOMEM, "trace: out of memory for a span of rows");
    if (!t->span_q && !(t->span_q = malloc(TRACE_SPAN_MAX * nq * sizeof *t->span_q)))
        return err_set(e, MS_ERR_NOMEM, "trace: out of memory for a span of rows");
    for (uint32_t i = 0; i < cnt; i++) {
        int rc = trace_seek(t, pos0 + i, e);
        if (!rc && t->src->span_keep(t, i))
            rc = err_set(e, MS_ERR_NOMEM, "trace: out of memory for a span of rows");
        if (rc)
            return rc;
        memcpy(t->span_q + i * nq, t->q, nq * sizeof *t->span_q);
    }
    t->span_pos0 = pos0;
    t->span_cnt = cnt;
    t->span_layer = UINT32_MAX;
    return MS_OK;
}

const float *trace_span_att(trace *t, uint32_t layer, uint32_t g, uint32_t i)
{
    if (i >= t->span_cnt || layer >= t->s.n_layers || g >= t->s.n_kv_heads)
        return NULL;
    if (t->span_layer != layer || t->span_g != g) {
        t->src->att_span(t, layer, g, t->span_pos0, t->span_cnt, t->span);
        t->span_layer = layer;
        t->span_g = g;
    }
    return t->span + (size_t)i * t->s.n_heads * t->s.n_tokens;
}

const float *trace_span_q(trace *t, uint32_t layer, uint32_t i)
{
    if (i >= t->span_cnt || layer >= t->s.n_layers)
        return NULL;
    size_t hd = (size_t)t->s.n_heads * t->s.head_dim;
    return t->span_q + ((size_t)i * t->s.n_layers + layer) * hd;
}

const float *trace_ffn(trace *t, uint32_t layer)
{
    if (!t->have_pos || layer >= t->s.n_layers || !trace_has(t, TRACE_FFN))
        return NULL;
    return t->src->ffn(t, layer);
}

const float *trace_logits(trace *t)
{
    if (!t->have_pos || !trace_has(t, TRACE_LOGITS))
        return NULL;
    return t->src->logits(t);
}

int trace_kv(trace *t, uint32_t layer, uint32_t pos, float *k, float *v)
{
    if (layer >= t->s.n_layers || pos >= t->s.n_tokens)
        return MS_ERR_RANGE;
    t->src->kv(t, layer, pos, k, v);
    return MS_OK;
}

int trace_gather(trace *t, uint32_t layer, uint32_t kv_head, const uint32_t *idx, size_t n,
                 float *k, float *v)
{
    const trace_shape *s = &t->s;
    uint32_t d = s->head_dim;
    if (layer >= s->n_layers || kv_head >= s->n_kv_heads)
        return MS_ERR_RANGE;
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= s->n_tokens)
            return MS_ERR_RANGE;
        t->src->kv1(t, layer, kv_head, idx[i], k ? k + i * d : NULL, v ? v + i * d : NULL);
    }
    return MS_OK;
}

int trace_attend(trace *t, uint32_t layer, uint32_t head, const float *q, const uint32_t *idx,
                 size_t n, float *p, float *out)
{
    const trace_shape *s = &t->s;
    uint32_t d = s->head_dim, g = head / (s->n_heads / s->n_kv_heads);
    if (layer >= s->n_layers || head >= s->n_heads || n == 0)
        return MS_ERR_RANGE;
    float scale = 1.0f / sqrtf((float)d), mx = -INFINITY;
    if (out)
        memset(out, 0, d * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= s->n_tokens)
            return MS_ERR_RANGE;
        t->src->kv1(t, layer, g, idx[i], t->kbuf, NULL);
        const float *k = t->kbuf;
        float dot = 0.0f;
        for (uint32_t j = 0; j < d; j++)
            dot += q[j] * k[j];
        p[i] = dot * scale;
        mx = p[i] > mx ? p[i] : mx;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (p[i] = expf(p[i] - mx));
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)(p[i] / sum);
        if (out) {
            t->src->kv1(t, layer, g, idx[i], NULL, t->vbuf);
            const float *v = t->vbuf;
            for (uint32_t j = 0; j < d; j++)
                out[j] += p[i] * v[j];
        }
    }
    return MS_OK;
}

const float *trace_wo(trace *t, uint32_t layer, uint32_t *rows, uint32_t *cols)
{
    if (layer >= t->s.n_layers || !trace_has(t, TRACE_WO))
        return NULL;
    if (rows)
        *rows = t->s.dim;
    if (cols)
        *cols = t->s.n_heads * t->s.head_dim;
    return t->src->wo(t, layer);
}
