/* trace.c — trace directories (YAML manifest + .npy arrays, sim/trace/TRACE_FORMAT.md): the .npy
 * header codec, the position-by-position writer, the memory-mapped reader, recording from the
 * float reference, and the access functions every source shares. */
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

#include "models/llama.h"

#define REGEN_HINT "hint: regenerate the trace with 'mpcsim trace record' or scripts/dump_trace.py"

static const char *const array_names[TRACE_N_ARRAYS] = {"q",   "k",      "v",  "att",
                                                        "ffn", "logits", "wo", "tokens"};

const char *trace_array_name(trace_array a) { return a < TRACE_N_ARRAYS ? array_names[a] : "?"; }

/* Expected shape of an array for a trace shape; returns ndim. */
static uint32_t array_shape(const trace_shape *s, trace_array a, uint64_t sh[4])
{
    uint64_t L = s->n_layers, T = s->n_tokens, H = s->n_heads, Hk = s->n_kv_heads, d = s->head_dim;
    switch (a) {
    case TRACE_Q: sh[0] = L, sh[1] = T, sh[2] = H, sh[3] = d; return 4;
    case TRACE_K:
    case TRACE_V: sh[0] = L, sh[1] = T, sh[2] = Hk, sh[3] = d; return 4;
    case TRACE_ATT: sh[0] = L, sh[1] = T, sh[2] = H, sh[3] = T; return 4;
    case TRACE_FFN: sh[0] = L, sh[1] = T, sh[2] = s->ffn_dim; return 3;
    case TRACE_LOGITS: sh[0] = T, sh[1] = s->vocab; return 2;
    case TRACE_WO: sh[0] = L, sh[1] = s->dim, sh[2] = H * d; return 3;
    case TRACE_TOKENS: sh[0] = T; return 1;
    default: return 0;
    }
}

/* ---- .npy header ---------------------------------------------------------------------- */

uint64_t trace_npy_count(const trace_npy *h)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < h->ndim; i++)
        n *= h->shape[i];
    return n;
}

int trace_npy_bytes(const trace_npy *h, uint64_t *bytes)
{
    uint64_t n = 4; /* both dtypes are 4 bytes wide */
    for (uint32_t i = 0; i < h->ndim; i++)
        if (__builtin_mul_overflow(n, h->shape[i], &n))
            return -1;
    *bytes = n;
    return 0;
}

int trace_npy_write_header(FILE *f, const trace_npy *h)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     h->dtype == 'i' ? "<i4" : "<f4");
    for (uint32_t i = 0; i < h->ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%llu%s", (unsigned long long)h->shape[i],
                      h->ndim == 1 || i + 1 < h->ndim ? ", " : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* pad with spaces and a final newline so that the data starts at a multiple of 64 */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    uint16_t hlen = (uint16_t)(n + pad + 1);
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)n, f) != (size_t)n)
        return MS_ERR_IO;
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    return ferror(f) ? MS_ERR_IO : MS_OK;
}

static const char *dict_value(const char *dict, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(dict, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
}

int trace_npy_read_header(FILE *f, const char *path, trace_npy *h, errbuf *e)
{
    unsigned char pre[12];
    memset(h, 0, sizeof *h);
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6))
        return err_set(e, MS_ERR_FORMAT, "%s: error: not a .npy file (bad magic); " REGEN_HINT,
                       path);
    size_t hlen, off;
    if (pre[6] == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
        off = 10;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2)
            return err_set(e, MS_ERR_FORMAT, "%s: error: truncated .npy header", path);
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        off = 12;
    } else {
        return err_set(e, MS_ERR_FORMAT, "%s: error: unsupported .npy version %d.%d; " REGEN_HINT,
                       path, pre[6], pre[7]);
    }
    if (hlen > 65536)
        return err_set(e, MS_ERR_FORMAT, "%s: error: .npy header too long", path);
    char *dict = malloc(hlen + 1);
    if (!dict || fread(dict, 1, hlen, f) != hlen) {
        free(dict);
        return err_set(e, MS_ERR_FORMAT, "%s: error: truncated .npy header", path);
    }
    dict[hlen] = '\0';
    int rc = MS_OK;
    const char *d = dict_value(dict, "descr"), *fo = dict_value(dict, "fortran_order"),
               *sh = dict_value(dict, "shape");
    if (d && !strncmp(d, "'<f4'", 5))
        h->dtype = 'f';
    else if (d && !strncmp(d, "'<i4'", 5))
        h->dtype = 'i';
    else
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: error: .npy dtype must be little-endian float32 '<f4' or int32 "
                     "'<i4'; " REGEN_HINT,
                     path);
    if (rc == MS_OK && (!fo || strncmp(fo, "False", 5)))
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: error: .npy array must be C order "
                     "(fortran_order False); " REGEN_HINT,
                     path);
    if (rc == MS_OK && (!sh || *sh != '('))
        rc = err_set(e, MS_ERR_FORMAT, "%s: error: .npy header has no shape", path);
    for (const char *p = sh ? sh + 1 : NULL; rc == MS_OK && p && *p != ')';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        errno = 0;
        unsigned long long v = *p >= '0' && *p <= '9' ? strtoull(p, &end, 10) : 0;
        if (*p < '0' || *p > '9' || errno == ERANGE || h->ndim == 4) {
            rc = err_set(e, MS_ERR_FORMAT,
                         "%s: error: bad .npy shape (at most 4 dims of "
                         "non-negative 64-bit sizes)",
                         path);
            break;
        }
        h->shape[h->ndim++] = v;
        p = end;
    }
    uint64_t bytes;
    if (rc == MS_OK && trace_npy_bytes(h, &bytes))
        rc = err_set(e, MS_ERR_FORMAT, "%s: error: .npy shape's size overflows 64 bits", path);
    free(dict);
    h->data_offset = off + hlen;
    /* NumPy pads the header so that the data starts at a multiple of 64 (16 before 1.14):
     * any other offset is not NumPy's, and would give misaligned float loads from the map */
    if (rc == MS_OK && h->data_offset % 16)
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: error: .npy data offset %llu is not a multiple of "
                     "16 as NumPy writes it; " REGEN_HINT,
                     path, (unsigned long long)h->data_offset);
    return rc;
}

/* ---- writer --------------------------------------------------------------------------- */

struct trace_writer {
    char dir[512];
    char model[64], source[32];
    trace_shape s;
    unsigned arrays;
    int fd[TRACE_N_ARRAYS];
    uint64_t data_off[TRACE_N_ARRAYS];
    int32_t *tokens;
    char meta[2048]; /* extra manifest lines */
    int failed;
};

/* ---- files of a trace folder: never through a link, never a FIFO or device ------------- */

/* Opens a file of a trace folder for reading: a symlink, FIFO or device is refused (opening
 * does not block on a FIFO). NULL with errno set (ELOOP for a link, EINVAL for not a file). */
static FILE *open_member(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f)
        close(fd);
    return f;
}

static const char *member_why(int err)
{
    return err == EINVAL  ? "not a regular file"
           : err == ELOOP ? "a symbolic link, which is not followed"
                          : strerror(err);
}

/* Creates (or truncates) a file of a trace folder without following a link planted there. */
static int create_member(const char *path, int flags)
{
    return open(path, flags | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
}

static int open_array(trace_writer *w, trace_array a, errbuf *e)
{
    char path[640];
    trace_npy h = {.dtype = a == TRACE_TOKENS ? 'i' : 'f'};
    h.ndim = array_shape(&w->s, a, h.shape);
    snprintf(path, sizeof path, "%s/%s.npy", w->dir, array_names[a]);
    w->fd[a] = create_member(path, O_RDWR);
    int dfd = w->fd[a] >= 0 ? dup(w->fd[a]) : -1;
    FILE *f = dfd >= 0 ? fdopen(dfd, "wb") : NULL;
    if (!f && dfd >= 0)
        close(dfd);
    if (!f || trace_npy_write_header(f, &h) != MS_OK) {
        if (f)
            fclose(f);
        return err_set(e, MS_ERR_IO, "%s: error: cannot write (%s)", path, member_why(errno));
    }
    long off = ftell(f);
    if (fclose(f) != 0 || off < 0)
        return err_set(e, MS_ERR_IO, "%s: error: cannot write (%s)", path, strerror(errno));
    w->data_off[a] = (uint64_t)off;
    if (w->fd[a] < 0 || ftruncate(w->fd[a], off + (off_t)(trace_npy_count(&h) * 4)) != 0)
        return err_set(e, MS_ERR_IO, "%s: error: cannot size file (%s)", path, strerror(errno));
    return MS_OK;
}

int trace_writer_open(const char *dir, const trace_shape *s, const char *model_name,
                      const char *source, unsigned arrays, trace_writer **out, errbuf *e)
{
    *out = NULL;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return err_set(e, MS_ERR_IO, "%s: error: cannot create directory (%s)", dir,
                       strerror(errno));
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(e, MS_ERR_IO,
                       "%s: error: not a directory (a symbolic link or a file is not followed)",
                       dir);
    trace_writer *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    snprintf(w->model, sizeof w->model, "%s", model_name);
    snprintf(w->source, sizeof w->source, "%s", source);
    w->s = *s;
    w->arrays = arrays | 1u << TRACE_TOKENS;
    if (!s->vocab)
        w->arrays &= ~(1u << TRACE_LOGITS);
    for (int a = 0; a < TRACE_N_ARRAYS; a++)
        w->fd[a] = -1;
    w->tokens = calloc(s->n_tokens ? s->n_tokens : 1, sizeof *w->tokens);
    int rc = w->tokens ? MS_OK : err_set(e, MS_ERR_NOMEM, "out of memory");
    for (int a = 0; a < TRACE_N_ARRAYS && rc == MS_OK; a++)
        if (w->arrays & 1u << a)
            rc = open_array(w, (trace_array)a, e);
    if (rc != MS_OK) {
        errbuf ignore;
        w->failed = 1;
        trace_writer_close(w, &ignore);
        return rc;
    }
    *out = w;
    return MS_OK;
}

static void put(trace_writer *w, trace_array a, uint64_t elem, const void *src, size_t n)
{
    if (w->fd[a] < 0 || !src)
        return;
    off_t off = (off_t)(w->data_off[a] + elem * 4);
    if (pwrite(w->fd[a], src, n * 4, off) != (ssize_t)(n * 4))
        w->failed = 1;
}

int trace_writer_tokens(trace_writer *w, const int32_t *ids, uint32_t n)
{
    if (n > w->s.n_tokens)
        return MS_ERR_RANGE;
    memcpy(w->tokens, ids, n * sizeof *ids);
    put(w, TRACE_TOKENS, 0, ids, n);
    return w->failed ? MS_ERR_IO : MS_OK;
}

int trace_writer_row(trace_writer *w, uint32_t layer, uint32_t pos, const float *q, const float *k,
                     const float *v, const float *att, const float *ffn)
{
    const trace_shape *s = &w->s;
    if (layer >= s->n_layers || pos >= s->n_tokens)
        return MS_ERR_RANGE;
    uint64_t lt = (uint64_t)layer * s->n_tokens + pos;
    put(w, TRACE_Q, lt * s->n_heads * s->head_dim, q, (size_t)s->n_heads * s->head_dim);
    put(w, TRACE_K, lt * s->n_kv_heads * s->head_dim, k, (size_t)s->n_kv_heads * s->head_dim);
    put(w, TRACE_V, lt * s->n_kv_heads * s->head_dim, v, (size_t)s->n_kv_heads * s->head_dim);
    for (uint32_t h = 0; att && h < s->n_heads; h++)
        put(w, TRACE_ATT, (lt * s->n_heads + h) * s->n_tokens, att + (size_t)h * (pos + 1),
            pos + 1);
    put(w, TRACE_FFN, lt * s->ffn_dim, ffn, s->ffn_dim);
    return w->failed ? MS_ERR_IO : MS_OK;
}

int trace_writer_logits(trace_writer *w, uint32_t pos, const float *logits)
{
    if (pos >= w->s.n_tokens)
        return MS_ERR_RANGE;
    put(w, TRACE_LOGITS, (uint64_t)pos * w->s.vocab, logits, w->s.vocab);
    return w->failed ? MS_ERR_IO : MS_OK;
}

int trace_writer_wo(trace_writer *w, uint32_t layer, const float *wo)
{
    if (layer >= w->s.n_layers)
        return MS_ERR_RANGE;
    uint64_t n = (uint64_t)w->s.dim * w->s.n_heads * w->s.head_dim;
    put(w, TRACE_WO, layer * n, wo, n);
    return w->failed ? MS_ERR_IO : MS_OK;
}

int trace_writer_meta(trace_writer *w, const char *key, const char *value)
{
    size_t n = strlen(w->meta);
    int k = snprintf(w->meta + n, sizeof w->meta - n, "%s: %s\n", key, value);
    if (k < 0 || (size_t)k >= sizeof w->meta - n) {
        w->meta[n] = '\0';
        return MS_ERR_RANGE;
    }
    return MS_OK;
}

static void write_manifest(const trace_writer *w, FILE *f)
{
    const trace_shape *s = &w->s;
    fprintf(f, "# mpcsim trace manifest (sim/trace/TRACE_FORMAT.md)\n");
    fprintf(f, "format: %s %d\n", TRACE_FORMAT_NAME, TRACE_FORMAT_VERSION);
    fprintf(f, "model: %s\nsource: %s\n", w->model, w->source);
    fprintf(f, "n_layers: %u\nn_heads: %u\nn_kv_heads: %u\nhead_dim: %u\ndim: %u\n", s->n_layers,
            s->n_heads, s->n_kv_heads, s->head_dim, s->dim);
    fprintf(f, "ffn_dim: %u\nvocab: %u\nn_tokens: %u\n", s->ffn_dim, s->vocab, s->n_tokens);
    /* mpcsim's writers hold q and k in llama2.c's interleaved channel order (TRACE_FORMAT.md
     * §RoPE channel layout); a trace read in another order is converted before it is copied */
    fprintf(f, "rope: applied\nrope_layout: interleaved\natt_layout: full\n%s", w->meta);
    fprintf(f, "tokens: [");
    for (uint32_t i = 0; i < s->n_tokens; i++)
        fprintf(f, "%s%d", i ? ", " : "", w->tokens[i]);
    fprintf(f, "]\narrays:\n");
    for (int a = 0; a < TRACE_N_ARRAYS; a++) {
        if (!(w->arrays & 1u << a))
            continue;
        uint64_t sh[4];
        uint32_t nd = array_shape(s, (trace_array)a, sh);
        fprintf(f, "  %s: {file: %s.npy, dtype: %s, shape: [", array_names[a], array_names[a],
                a == TRACE_TOKENS ? "int32" : "float32");
        for (uint32_t i = 0; i < nd; i++)
            fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)sh[i]);
        fprintf(f, "]}\n");
    }
}

int trace_writer_close(trace_writer *w, errbuf *e)
{
    int rc =
        w->failed ? err_set(e, MS_ERR_IO, "%s: error: writing the trace failed", w->dir) : MS_OK;
    for (int a = 0; a < TRACE_N_ARRAYS; a++)
        if (w->fd[a] >= 0 && close(w->fd[a]) != 0 && rc == MS_OK)
            rc = err_set(e, MS_ERR_IO, "%s/%s.npy: error: %s", w->dir, array_names[a],
                         strerror(errno));
    if (rc == MS_OK) {
        char path[640];
        snprintf(path, sizeof path, "%s/manifest.yaml", w->dir);
        int fd = create_member(path, O_WRONLY);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f && fd >= 0)
            close(fd);
        if (f)
            write_manifest(w, f);
        if (!f || fclose(f) != 0)
            rc = err_set(e, MS_ERR_IO, "%s: error: cannot write manifest", path);
    }
    free(w->tokens);
    free(w);
    return rc;
}

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

static const trace_source dir_source = {dir_seek,   dir_kv, dir_kv1,   dir_att_row, dir_ffn,
                                        dir_logits, dir_wo, dir_close, NULL,        NULL};

int trace_alloc_common(trace *t)
{
    const trace_shape *s = &t->s;
    t->q = calloc((size_t)s->n_layers * s->n_heads * s->head_dim, sizeof(float));
    t->att = calloc((size_t)s->n_heads * s->n_tokens, sizeof(float));
    t->kbuf = calloc((size_t)s->n_kv_heads * s->head_dim, sizeof(float));
    t->vbuf = calloc((size_t)s->n_kv_heads * s->head_dim, sizeof(float));
    return t->q && t->att && t->kbuf && t->vbuf ? MS_OK : MS_ERR_NOMEM;
}

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
    if (t->synthetic && t->impl)
        trace_synth_keep_words(t);
}

/* ---- spans of positions --------------------------------------------------------------- */

uint32_t trace_span_max(const trace *t)
{
    /* the reference kernel computes one row at a time */
    return t->src->att_span && !trace_synth_reference_kernel ? TRACE_SPAN_MAX : 0;
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

/* ---- recording from the float reference ----------------------------------------------- */

typedef struct rec_ctx {
    trace_writer *w;
    int rc;
} rec_ctx;

static void rec_layer(void *ctx, const llama_layer_view *v)
{
    rec_ctx *r = ctx;
    if (r->rc == MS_OK)
        r->rc = trace_writer_row(r->w, v->layer, v->pos, v->q, v->k, v->v, v->att, v->ffn_pre);
}

#define TRACE_TEXT_MAX (64u << 20) /* a text to record a trace of: far more than any context */

static int read_text(const char *path, char **out, errbuf *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, MS_ERR_NOTFOUND, "%s: error: cannot open text (%s)", path,
                       strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            if (cap >= TRACE_TEXT_MAX) { /* /dev/zero, or a file past the bound */
                free(buf);
                fclose(f);
                return err_set(e, MS_ERR_INPUT, "%s: error: text larger than %u MiB", path,
                               (unsigned)(TRACE_TEXT_MAX >> 20));
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return err_set(e, MS_ERR_NOMEM, "out of memory reading %s", path);
    buf[n] = '\0';
    *out = buf;
    return MS_OK;
}

/* Encodes the shortest prefix of text that yields cap tokens plus a margin of 8 (BPE merges
 * are local, so the first cap ids equal those of the whole text; merging is quadratic in the
 * length, hence the prefix). Keeps at most cap ids. */
static int tokenize_prefix(const llama_tok *tok, char *text, uint32_t cap, int **ids, int *n_ids,
                           errbuf *e)
{
    size_t tl = strlen(text);
    for (size_t need = (size_t)cap * 4 + 64;; need *= 2) {
        size_t len = tl < need ? tl : need;
        char saved = text[len];
        text[len] = '\0';
        free(*ids);
        *ids = malloc((len + 3) * sizeof(int));
        *n_ids = *ids ? llama_tok_encode(tok, text, *ids, (int)len + 3) : 0;
        text[len] = saved;
        if (!*ids)
            return err_set(e, MS_ERR_NOMEM, "out of memory");
        if (len == tl || *n_ids >= (int)cap + 8)
            break;
    }
    if (*n_ids > (int)cap)
        *n_ids = (int)cap;
    return MS_OK;
}

/* Loads model weights and tokenizer, tokenizes the text (at most max_tokens ids). */
static int record_setup(const char *model, const char *text_path, uint32_t max_tokens,
                        model_cfg *cfg, llama **m, int **ids, int *n_ids, errbuf *e)
{
    char wpath[1024], tpath[1024];
    int rc = model_load(model, cfg, e);
    if (rc != MS_OK)
        return rc;
    if (!cfg->weights[0] || !cfg->tokenizer[0])
        return err_set(e, MS_ERR_INPUT,
                       "model '%s' has no weights/tokenizer to record from "
                       "(use 'mpcsim trace synth' for shapes without weights)",
                       cfg->name);
    if (model_file_path(cfg->weights, wpath, sizeof wpath) ||
        model_file_path(cfg->tokenizer, tpath, sizeof tpath))
        return err_set(e, MS_ERR_INPUT, "model '%s': weight path too long", cfg->name);
    if (access(wpath, R_OK) || access(tpath, R_OK)) {
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: model '%s''s weights or tokenizer not "
                       "found\n  hint: the data folder was looked for in %s",
                       access(wpath, R_OK) ? wpath : tpath, cfg->name, where);
    }
    char *text = NULL;
    llama_tok *tok = NULL;
    if ((rc = read_text(text_path, &text, e)) != MS_OK)
        return rc;
    rc = llama_tok_load(tpath, cfg->vocab, &tok, e);
    uint32_t cap = max_tokens < cfg->max_ctx ? max_tokens : cfg->max_ctx;
    if (rc == MS_OK)
        rc = tokenize_prefix(tok, text, cap, ids, n_ids, e);
    if (rc == MS_OK && *n_ids < 1)
        rc = err_set(e, MS_ERR_INPUT, "%s: error: no tokens", text_path);
    llama_tok_free(tok);
    free(text);
    if (rc == MS_OK)
        rc = llama_load(cfg, wpath, m, e);
    if (rc != MS_OK) {
        free(*ids);
        *ids = NULL;
    }
    return rc;
}

int trace_count_tokens(const model_cfg *cfg, const char *text_path, uint32_t max_tokens,
                       uint32_t *n, errbuf *e)
{
    char tpath[1024];
    *n = 0;
    if (!cfg->tokenizer[0])
        return err_set(e, MS_ERR_INPUT, "model '%s' has no tokenizer to record from", cfg->name);
    if (model_file_path(cfg->tokenizer, tpath, sizeof tpath))
        return err_set(e, MS_ERR_INPUT, "model '%s': tokenizer path too long", cfg->name);
    if (access(tpath, R_OK)) {
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: model '%s''s tokenizer not found\n"
                       "  hint: the data folder was looked for in %s",
                       tpath, cfg->name, where);
    }
    char *text = NULL;
    llama_tok *tok = NULL;
    int *ids = NULL, n_ids = 0;
    int rc = read_text(text_path, &text, e);
    if (rc == MS_OK)
        rc = llama_tok_load(tpath, cfg->vocab, &tok, e);
    uint32_t cap = max_tokens < cfg->max_ctx ? max_tokens : cfg->max_ctx;
    if (rc == MS_OK)
        rc = tokenize_prefix(tok, text, cap, &ids, &n_ids, e);
    llama_tok_free(tok);
    free(text);
    free(ids);
    if (rc == MS_OK)
        *n = (uint32_t)n_ids;
    return rc;
}

int trace_record(const char *model, const char *text_path, uint32_t max_tokens, const char *out_dir,
                 errbuf *e)
{
    model_cfg cfg;
    llama *m = NULL;
    int *ids = NULL, n = 0;
    int rc = record_setup(model, text_path, max_tokens, &cfg, &m, &ids, &n, e);
    if (rc != MS_OK)
        return rc;
    trace_shape s = {cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                     cfg.dim,      cfg.ffn_dim, cfg.vocab,      (uint32_t)n};
    unsigned all = (1u << TRACE_N_ARRAYS) - 1;
    trace_writer *w = NULL;
    float *logits = malloc(cfg.vocab * sizeof(float));
    rc = logits ? trace_writer_open(out_dir, &s, cfg.name, "record", all, &w, e)
                : err_set(e, MS_ERR_NOMEM, "out of memory");
    rec_ctx rc_ctx = {w, MS_OK};
    llama_hooks hk = {.ctx = &rc_ctx, .on_layer = rec_layer};
    int32_t *tok32 = malloc((size_t)n * sizeof *tok32);
    for (int i = 0; tok32 && i < n; i++)
        tok32[i] = ids[i];
    if (rc == MS_OK)
        rc = tok32 ? trace_writer_tokens(w, tok32, (uint32_t)n) : MS_ERR_NOMEM;
    for (uint32_t l = 0; rc == MS_OK && l < cfg.n_layers; l++) {
        char name[48];
        op_layer_name(name, (int)l, "wo");
        rc = trace_writer_wo(w, l, llama_weight(m, name, NULL, NULL));
    }
    for (int p = 0; rc == MS_OK && p < n; p++) {
        rc = llama_forward(m, ids[p], (uint32_t)p, &hk, logits);
        if (rc == MS_OK)
            rc = rc_ctx.rc;
        if (rc == MS_OK)
            rc = trace_writer_logits(w, (uint32_t)p, logits);
    }
    if (w) {
        errbuf we;
        int wrc = trace_writer_close(w, &we);
        if (rc == MS_OK && wrc != MS_OK)
            rc = err_set(e, wrc, "%s", we.msg);
    }
    if (rc != MS_OK && !e->msg[0])
        err_set(e, rc, "%s: error: recording failed (%s)", out_dir, ms_err_text(rc));
    free(tok32);
    free(logits);
    free(ids);
    llama_free(m);
    return rc;
}
