/* tracefmt.c — the files of a trace directory (YAML manifest + .npy arrays,
 * sim/trace/TRACE_FORMAT.md): the arrays' names and shapes, the .npy header codec, opening a
 * folder's files (never through a link, never a FIFO or device), and the position-by-position
 * writer. The reader is tracedir.c. */
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

const char *const array_names[TRACE_N_ARRAYS] = {"q",   "k",      "v",  "att",
                                                 "ffn", "logits", "wo", "tokens"};

const char *trace_array_name(trace_array a) { return a < TRACE_N_ARRAYS ? array_names[a] : "?"; }

/* Expected shape of an array for a trace shape; returns ndim. */
uint32_t array_shape(const trace_shape *s, trace_array a, uint64_t sh[4])
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
FILE *open_member(const char *path)
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

const char *member_why(int err)
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
