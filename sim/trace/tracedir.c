/* tracedir.c — the directory source: a trace directory's manifest read and checked, its arrays
 * memory-mapped (trace_open). The files' format is tracefmt.c's. */
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

/* ---- manifest reader ------------------------------------------------------------------ */

#define STR_(x) #x
#define STR(x) STR_(x)
#define TRACE_FORMAT_LINE TRACE_FORMAT_NAME " " STR(TRACE_FORMAT_VERSION)
#define REGEN "regenerate the trace with 'mpcsim trace record' or scripts/dump_trace.py"

static const char *const rope_layouts[] = {"interleaved", "half", NULL};

/* Every key mpcsim's writers and scripts/mpcsim_trace_io.py put in a manifest
 * (TRACE_FORMAT.md §manifest.yaml); the shape goes to trace_shape, the rest to the trace. */
/* Shape keys are bounded by their 32-bit fields; the arrays' sizes, products of them, are
 * checked against each .npy header (overflow-safe) and the files' real sizes. */
#define TRACE_DIM_MAX UINT32_MAX
#define SH(f) YS_AT(trace, s.f)
static const ys_field manifest_fields[] = {
    {"format", YS_FIXED, YS_NONE, 0, 0, TRACE_FORMAT_LINE, "file format", NULL, YS_REQ, REGEN,
     NULL},
    {"model", YS_OTHER, YS_NONE, 0, 0, NULL, "the model the trace is of", NULL, 0, NULL, "text"},
    {"source", YS_OTHER, YS_NONE, 0, 0, NULL, "record | synth | pytorch | numpy-fixture | copy",
     NULL, 0, NULL, "text"},
    {"n_layers", YS_U32, SH(n_layers), 1, TRACE_DIM_MAX, NULL, "layers", NULL, YS_REQ, REGEN, NULL},
    {"n_heads", YS_U32, SH(n_heads), 1, TRACE_DIM_MAX, NULL, "query heads", NULL, YS_REQ, REGEN,
     NULL},
    {"n_kv_heads", YS_U32, SH(n_kv_heads), 1, TRACE_DIM_MAX, NULL, "KV heads", NULL, YS_REQ, REGEN,
     NULL},
    {"head_dim", YS_U32, SH(head_dim), 1, TRACE_DIM_MAX, NULL, "per head", NULL, YS_REQ, REGEN,
     NULL},
    {"dim", YS_U32, SH(dim), 0, TRACE_DIM_MAX, "0", "rows of W_o (0 if unknown)", NULL, 0, REGEN,
     NULL},
    {"ffn_dim", YS_U32, SH(ffn_dim), 0, TRACE_DIM_MAX, "0", "0 if no ffn", NULL, 0, REGEN, NULL},
    {"vocab", YS_U32, SH(vocab), 0, TRACE_DIM_MAX, "0", "0 if no logits", NULL, 0, REGEN, NULL},
    {"n_tokens", YS_U32, SH(n_tokens), 1, TRACE_DIM_MAX, NULL, "positions T", NULL, YS_REQ, REGEN,
     NULL},
    {"rope", YS_INFO, YS_NONE, 0, 0, NULL, "applied: q and k are stored after RoPE", NULL, 0, NULL,
     NULL},
    {"rope_layout", YS_ENUM, YS_AT(trace, rope_half), 0, 0, "interleaved",
     "channel pairs of RoPE: 2i,2i+1 (interleaved) or i,i+d/2 (half)", rope_layouts, 0, NULL, NULL},
    {"att_layout", YS_INFO, YS_NONE, 0, 0, NULL, "full: [L][T][H][T]", NULL, 0, NULL, NULL},
    {"tokens", YS_INFO, YS_NONE, 0, 0, NULL, "token ids (also tokens.npy)", NULL, 0, NULL, NULL},
    {"seed", YS_INFO, YS_NONE, 0, 0, NULL, "synthetic traces: the generator's seed", NULL, 0, NULL,
     NULL},
    {"synth", YS_INFO, YS_NONE, 0, 0, NULL, "synthetic traces: the generator's parameters", NULL, 0,
     NULL, NULL},
    {"arrays", YS_OTHER, YS_NONE, 0, 0, NULL, "the .npy arrays present (q, k, v required)", NULL,
     YS_REQ, REGEN, "mapping"},
};
#undef SH
static const ys_schema manifest_schema =
    YS_SCHEMA("trace manifest", manifest_fields, "sim/trace/TRACE_FORMAT.md");

const ys_schema *trace_manifest_schema(void) { return &manifest_schema; }

/* The format line first: a manifest of another version may hold keys this build does not
 * know, and the version is what to report then. */
static int check_format(const ys_ctx *x, const yx_node *root)
{
    const yx_node *n = yx_map_get(root, "format");
    if (!n || n->kind != YX_SCALAR)
        return ys_fail(x, n ? n : root, REGEN,
                       "not an mpcsim trace manifest (no 'format: %s' line)", TRACE_FORMAT_LINE);
    if (strcmp(n->str, TRACE_FORMAT_LINE))
        return ys_fail(x, n, REGEN, "trace format '%s' is not supported (this build reads '%s')",
                       n->str, TRACE_FORMAT_LINE);
    return MS_OK;
}

/* Manifests written before rope_layout existed hold interleaved q/k, except those dumped from
 * Hugging Face models (source: pytorch), whose order cannot be known: those must say. */
static int check_rope_layout(const ys_ctx *x, const yx_node *root, const trace *t)
{
    const yx_node *n = yx_map_get(root, "rope_layout");
    if (!n && !strcmp(t->source, "pytorch"))
        return err_set(x->e, MS_ERR_FORMAT,
                       "%s: error: manifest lacks 'rope_layout' and its source is "
                       "'pytorch', so the channel order of q and k is unknown\n"
                       "  hint: add 'rope_layout: half' for a Hugging Face model "
                       "(rotate_half), 'rope_layout: interleaved' for llama2.c/Meta "
                       "checkpoints, or re-dump with scripts/dump_trace.py",
                       x->path);
    if (t->rope_half && (t->s.head_dim % 2 || t->s.head_dim > TRACE_MAX_HEAD_DIM))
        return ys_fail(x, n, NULL,
                       "rope_layout half needs an even head_dim of at most %u "
                       "(head_dim %u)",
                       TRACE_MAX_HEAD_DIM, t->s.head_dim);
    return MS_OK;
}

static void copy_text(const yx_node *root, const char *key, char *out, size_t cap)
{
    const yx_node *n = yx_map_get(root, key);
    snprintf(out, cap, "%s", n && n->kind == YX_SCALAR ? n->str : "unknown");
}

static int read_manifest(trace *t, const char *dir, errbuf *e)
{
    char path[640];
    snprintf(path, sizeof path, "%s/manifest.yaml", dir);
    FILE *f = open_member(path);
    if (!f)
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: cannot open (%s); is '%s' a trace "
                       "directory? " REGEN_HINT,
                       path, member_why(errno), dir);
    yx_node *root;
    int rc = yx_parse_fp(path, f, &root, e);
    if (rc)
        return rc == MS_ERR_INPUT ? MS_ERR_FORMAT : rc;
    ys_ctx x = {path, e, MS_ERR_FORMAT};
    rc = root->kind == YX_MAP ? check_format(&x, root)
                              : ys_fail(&x, root, REGEN, "a trace manifest is a mapping of keys");
    if (!rc) {
        t->rope_half = 0;
        rc = ys_read(&x, root, &manifest_schema, NULL, 0, t);
    }
    copy_text(root, "model", t->model, sizeof t->model);
    copy_text(root, "source", t->source, sizeof t->source);
    if (!rc && t->s.n_heads % t->s.n_kv_heads)
        rc = ys_fail(&x, yx_map_get(root, "n_kv_heads"), REGEN,
                     "n_heads (%u) must be a multiple of n_kv_heads (%u)", t->s.n_heads,
                     t->s.n_kv_heads);
    if (!rc)
        rc = check_rope_layout(&x, root, t);
    const yx_node *arr = yx_map_get(root, "arrays");
    if (!rc && arr->kind != YX_MAP)
        rc = ys_fail(&x, arr, REGEN, "'arrays' must be a mapping, not %s", yx_kind_name(arr));
    for (int a = 0; rc == MS_OK && a < TRACE_N_ARRAYS; a++)
        if (yx_map_get(arr, array_names[a]))
            t->arrays |= 1u << a;
    if (rc == MS_OK && (~t->arrays & (1u << TRACE_Q | 1u << TRACE_K | 1u << TRACE_V)))
        rc = ys_fail(&x, arr, REGEN, "manifest 'arrays' must list q, k and v");
    yx_free(root);
    return rc;
}

/* ---- directory source (memory-mapped arrays) ------------------------------------------ */

typedef struct dir_src {
    void *map[TRACE_N_ARRAYS];
    size_t len[TRACE_N_ARRAYS];
    const float *data[TRACE_N_ARRAYS];
} dir_src;

static int map_array(trace *t, dir_src *d, const char *dir, trace_array a, errbuf *e)
{
    char path[640];
    snprintf(path, sizeof path, "%s/%s.npy", dir, array_names[a]);
    FILE *f = open_member(path);
    if (!f)
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: listed in the manifest but cannot be "
                       "opened (%s); " REGEN_HINT,
                       path, member_why(errno));
    trace_npy h;
    int rc = trace_npy_read_header(f, path, &h, e);
    uint64_t want[4];
    uint32_t nd = array_shape(&t->s, a, want);
    int same = rc == MS_OK && h.ndim == nd && h.dtype == (a == TRACE_TOKENS ? 'i' : 'f');
    for (uint32_t i = 0; same && i < nd; i++)
        same = h.shape[i] == want[i];
    if (rc == MS_OK && !same) {
        char ws[96] = "", gs[96] = "";
        for (uint32_t i = 0; i < nd; i++)
            snprintf(ws + strlen(ws), sizeof ws - strlen(ws), "%s%llu", i ? "," : "",
                     (unsigned long long)want[i]);
        for (uint32_t i = 0; i < h.ndim; i++)
            snprintf(gs + strlen(gs), sizeof gs - strlen(gs), "%s%llu", i ? "," : "",
                     (unsigned long long)h.shape[i]);
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: error: array has shape (%s) dtype %s but the "
                     "manifest implies (%s) dtype %s; " REGEN_HINT,
                     path, gs, h.dtype == 'i' ? "int32" : "float32", ws,
                     a == TRACE_TOKENS ? "int32" : "float32");
    }
    struct stat st;
    uint64_t bytes = 0;
    if (rc == MS_OK &&
        (fstat(fileno(f), &st) != 0 || st.st_size < 0 || trace_npy_bytes(&h, &bytes) ||
         (uint64_t)st.st_size < h.data_offset || (uint64_t)st.st_size - h.data_offset < bytes))
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: error: file is truncated (%llu bytes of data "
                     "expected); " REGEN_HINT,
                     path, (unsigned long long)bytes);
    if (rc == MS_OK) {
        d->len[a] = (size_t)st.st_size;
        d->map[a] = mmap(NULL, d->len[a], PROT_READ, MAP_SHARED, fileno(f), 0);
        if (d->map[a] == MAP_FAILED) {
            d->map[a] = NULL;
            rc = err_set(e, MS_ERR_IO, "%s: error: cannot map (%s)", path, strerror(errno));
        } else {
            d->data[a] = (const float *)((const char *)d->map[a] + h.data_offset);
        }
    }
    fclose(f);
    return rc;
}

/* Rotate-half order → interleaved, in place, for n heads of d channels: the pair (i, i + d/2)
 * of Hugging Face's rotate_half is the pair (2i, 2i + 1) of llama2.c. A permutation of the
 * channels of q and k alike, so every q·k is unchanged; values are copied exactly. */
static void unhalf(float *x, uint32_t n, uint32_t d)
{
    float tmp[TRACE_MAX_HEAD_DIM];
    for (uint32_t h = 0; h < n; h++, x += d) {
        for (uint32_t i = 0; i < d / 2; i++) {
            tmp[2 * i] = x[i];
            tmp[2 * i + 1] = x[i + d / 2];
        }
        memcpy(x, tmp, d * sizeof *x);
    }
}

static int dir_seek(trace *t, uint32_t pos, errbuf *e)
{
    dir_src *d = t->impl;
    const trace_shape *s = &t->s;
    size_t row = (size_t)s->n_heads * s->head_dim;
    for (uint32_t l = 0; l < s->n_layers; l++)
        memcpy(t->q + l * row, d->data[TRACE_Q] + ((size_t)l * s->n_tokens + pos) * row,
               row * sizeof(float));
    if (t->rope_half)
        unhalf(t->q, s->n_layers * s->n_heads, s->head_dim);
    return MS_OK;
}

static void dir_kv(trace *t, uint32_t layer, uint32_t pos, float *k, float *v)
{
    dir_src *d = t->impl;
    size_t row = (size_t)t->s.n_kv_heads * t->s.head_dim;
    size_t off = ((size_t)layer * t->s.n_tokens + pos) * row;
    if (k) {
        memcpy(k, d->data[TRACE_K] + off, row * sizeof(float));
        if (t->rope_half)
            unhalf(k, t->s.n_kv_heads, t->s.head_dim);
    }
    if (v)
        memcpy(v, d->data[TRACE_V] + off, row * sizeof(float));
}

static void dir_kv1(trace *t, uint32_t layer, uint32_t g, uint32_t pos, float *k, float *v)
{
    dir_src *d = t->impl;
    size_t hd = t->s.head_dim, row = (size_t)t->s.n_kv_heads * hd;
    size_t off = ((size_t)layer * t->s.n_tokens + pos) * row + g * hd;
    if (k) {
        memcpy(k, d->data[TRACE_K] + off, hd * sizeof(float));
        if (t->rope_half)
            unhalf(k, 1, (uint32_t)hd);
    }
    if (v)
        memcpy(v, d->data[TRACE_V] + off, hd * sizeof(float));
}

static int dir_att_row(trace *t, uint32_t layer)
{
    dir_src *d = t->impl;
    if (!d->data[TRACE_ATT])
        return 0;
    const trace_shape *s = &t->s;
    uint32_t T = s->n_tokens, n = t->pos + 1;
    const float *src = d->data[TRACE_ATT] + ((size_t)layer * T + t->pos) * s->n_heads * T;
    for (uint32_t h = 0; h < s->n_heads; h++)
        memcpy(t->att + (size_t)h * n, src + (size_t)h * T, n * sizeof(float));
    return 1;
}

static const float *dir_ffn(trace *t, uint32_t layer)
{
    dir_src *d = t->impl;
    const float *f = d->data[TRACE_FFN];
    return f ? f + ((size_t)layer * t->s.n_tokens + t->pos) * t->s.ffn_dim : NULL;
}

static const float *dir_logits(trace *t)
{
    dir_src *d = t->impl;
    const float *f = d->data[TRACE_LOGITS];
    return f ? f + (size_t)t->pos * t->s.vocab : NULL;
}

static const float *dir_wo(trace *t, uint32_t layer)
{
    dir_src *d = t->impl;
    const float *f = d->data[TRACE_WO];
    return f ? f + (size_t)layer * t->s.dim * t->s.n_heads * t->s.head_dim : NULL;
}

static void dir_close(trace *t)
{
    dir_src *d = t->impl;
    for (int a = 0; d && a < TRACE_N_ARRAYS; a++)
        if (d->map[a])
            munmap(d->map[a], d->len[a]);
    free(d);
}

const float *trace_stored_att(trace *t, uint32_t layer, uint32_t pos, uint32_t h)
{
    if (t->synthetic || !t->impl || t->src->att_row != dir_att_row)
        return NULL;
    dir_src *d = t->impl;
    if (!d->data[TRACE_ATT])
        return NULL;
    const trace_shape *s = &t->s;
    return d->data[TRACE_ATT] +
           (((size_t)layer * s->n_tokens + pos) * s->n_heads + h) * s->n_tokens;
}

static const trace_source dir_source = {dir_seek, dir_kv,     dir_kv1, dir_att_row,
                                        dir_ffn,  dir_logits, dir_wo,  dir_close,
                                        NULL,     NULL,       NULL,    NULL};

int trace_open(const char *dir, trace **out, errbuf *e)
{
    *out = NULL;
    trace *t = calloc(1, sizeof *t);
    dir_src *d = calloc(1, sizeof *d);
    if (!t || !d) {
        free(t);
        free(d);
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    }
    t->src = &dir_source;
    t->impl = d;
    int rc = read_manifest(t, dir, e);
    for (int a = 0; rc == MS_OK && a < TRACE_N_ARRAYS; a++)
        if (t->arrays & 1u << a)
            rc = map_array(t, d, dir, (trace_array)a, e);
    if (rc == MS_OK && (t->arrays & 1u << TRACE_WO) && !t->s.dim)
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s/manifest.yaml: error: wo listed but dim is 0; " REGEN_HINT, dir);
    if (rc == MS_OK && trace_alloc_common(t) != MS_OK)
        rc = err_set(e, MS_ERR_NOMEM, "out of memory opening %s", dir);
    if (rc == MS_OK && d->data[TRACE_TOKENS]) {
        t->tokens = malloc(t->s.n_tokens * sizeof *t->tokens);
        if (t->tokens)
            memcpy(t->tokens, d->data[TRACE_TOKENS], t->s.n_tokens * sizeof *t->tokens);
    }
    if (rc != MS_OK) {
        trace_close(t);
        return rc;
    }
    *out = t;
    return MS_OK;
}
