/* llama.c — float reference inference of llama2.c version-0 checkpoints and the llama2.c
 * tokenizer, following models/stories260K/README.md (the math of llama2.c's run.c, in float32
 * with the same operation order, so greedy decoding reproduces the published samples). */
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- weights and run state ------------------------------------------------------------ */

struct llama {
    model_cfg cfg;
    float *data; /* the whole checkpoint after the header */
    size_t n_floats;
    model_param params[MODEL_MAX_PARAMS];
    const float *ptr[MODEL_MAX_PARAMS]; /* start of each tensor in data */
    size_t n_params;
    /* weights by role (views into data) */
    const float *tok_emb;   /* (vocab, dim) */
    const float *rms_att;   /* (layer, dim) */
    const float *wq;        /* (layer, n_heads*head_dim, dim) */
    const float *wk;        /* (layer, kv_dim, dim) */
    const float *wv;        /* (layer, kv_dim, dim) */
    const float *wo;        /* (layer, dim, n_heads*head_dim) */
    const float *rms_ffn;   /* (layer, dim) */
    const float *w1;        /* (layer, ffn_dim, dim) */
    const float *w2;        /* (layer, dim, ffn_dim) */
    const float *w3;        /* (layer, ffn_dim, dim) */
    const float *rms_final; /* (dim) */
    const float *wcls;      /* (vocab, dim) */
    /* run state */
    float *x, *xb, *xb2;       /* dim */
    float *q;                  /* n_heads*head_dim */
    float *att_out;            /* n_heads*head_dim */
    float *att;                /* n_heads*max_ctx, stored with stride pos+1 for the view */
    float *hb, *hb2, *ffn_pre; /* ffn_dim */
    uint8_t *fmask;            /* ffn_dim: the sparse FFN's neurons (llama_hooks.ffn_mask) */
    float *key_cache;          /* (layer, max_ctx, kv_dim) */
    float *value_cache;        /* (layer, max_ctx, kv_dim) */
    uint8_t *mask;             /* max_ctx */
};

/* A file read whole, at most max bytes, and a regular file (a device such as /dev/zero, a FIFO
 * or a sparse file past max is refused before anything is allocated). */
static int read_file(const char *path, uint64_t max, char **buf, size_t *len, errbuf *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, MS_ERR_NOTFOUND, "%s: error: cannot open file", path);
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        int reg = S_ISREG(st.st_mode);
        fclose(f);
        if (!reg)
            return err_set(e, MS_ERR_FORMAT, "%s: error: not a regular file", path);
        return err_set(e, MS_ERR_FORMAT,
                       "%s: error: file of %llu bytes, larger than the %llu bytes this reader "
                       "takes",
                       path, (unsigned long long)st.st_size, (unsigned long long)max);
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return err_set(e, MS_ERR_IO, "%s: error: cannot seek", path);
    }
    long n = ftell(f);
    rewind(f);
    *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (n <= 0 || !*buf || fread(*buf, 1, (size_t)n, f) != (size_t)n) {
        free(*buf);
        *buf = NULL;
        fclose(f);
        return err_set(e, n <= 0 ? MS_ERR_FORMAT : MS_ERR_IO, "%s: error: cannot read file", path);
    }
    fclose(f);
    *len = (size_t)n;
    return MS_OK;
}

/* Checks the 7-int header against the config. A binary file's errors give line 1 and the
 * 1-based byte offset as the column: the header field's, here. */
static int check_header(const model_cfg *c, const int32_t h[7], const char *path, errbuf *e)
{
    const char *names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                            "n_kv_heads", "vocab_size", "seq_len"};
    int64_t want[7] = {c->dim,        c->ffn_dim, c->n_layers, c->n_heads,
                       c->n_kv_heads, c->vocab,   c->max_ctx};
    for (int i = 0; i < 7; i++) {
        int64_t got = i == 5 ? llabs((long long)h[i]) : h[i];
        if (got != want[i])
            return err_set(e, MS_ERR_FORMAT,
                           "%s:1:%d: error: checkpoint header %s = %lld but model '%s' says "
                           "%lld (hint: the model YAML and the checkpoint must describe the "
                           "same network)",
                           path, 4 * i + 1, names[i], (long long)got, c->name, (long long)want[i]);
    }
    if ((h[5] > 0) != (c->tied_embeddings != 0))
        return err_set(e, MS_ERR_FORMAT,
                       "%s:1:21: error: checkpoint %s classifier (the sign of vocab_size) "
                       "but model '%s' says tied_embeddings: %s",
                       path, h[5] > 0 ? "has no separate" : "has a separate", c->name,
                       c->tied_embeddings ? "true" : "false");
    return MS_OK;
}

static const float *param_ptr(const llama *m, const char *name)
{
    for (size_t i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name))
            return m->ptr[i];
    return NULL;
}

/* a·b·c, or -1 when it does not fit a size_t (sizes come from the file and the model YAML). */
static int mul3(size_t a, size_t b, size_t c, size_t *out)
{
    return __builtin_mul_overflow(a, b, out) || __builtin_mul_overflow(*out, c, out) ? -1 : 0;
}

/* Points every tensor into the data, in model_params() order; freq_cis tables (seq_len ×
 * head_dim/2, twice) sit between rms_final and an untied classifier and are skipped. */
static int map_tensors(llama *m, const char *path, errbuf *e)
{
    const model_cfg *c = &m->cfg;
    m->n_params = model_params(c, m->params);
    size_t off = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        const model_param *p = &m->params[i];
        size_t n = 0, fc = 0;
        int bad = 0;
        if (!strcmp(p->name, "wcls")) /* freq_cis_real + freq_cis_imag */
            bad = mul3(c->max_ctx, c->head_dim, 1, &fc) || __builtin_add_overflow(off, fc, &off);
        bad = bad || mul3(p->n_layers ? p->n_layers : 1, p->rows, p->cols, &n);
        if (bad || off > m->n_floats || n > m->n_floats - off)
            return err_set(e, MS_ERR_FORMAT,
                           "%s: error: checkpoint too short for tensor '%s' (hint: is it a "
                           "llama2.c version-0 checkpoint of this model?)",
                           path, p->name);
        m->ptr[i] = m->data + off;
        off += n;
    }
    /* llama2.c writes the freq_cis tables with tied embeddings too (they end the file): the
     * context length, which sizes the KV cache, is then bounded by the file's size */
    size_t fc;
    if (c->tied_embeddings &&
        (mul3(c->max_ctx, c->head_dim, 1, &fc) || off > m->n_floats || fc > m->n_floats - off))
        return err_set(e, MS_ERR_FORMAT,
                       "%s: error: checkpoint too short for the freq_cis tables of seq_len %u "
                       "(hint: is it a llama2.c version-0 checkpoint of this model?)",
                       path, c->max_ctx);
    m->tok_emb = param_ptr(m, "tok_emb");
    m->rms_att = param_ptr(m, "rms_att");
    m->wq = param_ptr(m, "wq");
    m->wk = param_ptr(m, "wk");
    m->wv = param_ptr(m, "wv");
    m->wo = param_ptr(m, "wo");
    m->rms_ffn = param_ptr(m, "rms_ffn");
    m->w1 = param_ptr(m, "w1");
    m->w2 = param_ptr(m, "w2");
    m->w3 = param_ptr(m, "w3");
    m->rms_final = param_ptr(m, "rms_final");
    m->wcls = c->tied_embeddings ? m->tok_emb : param_ptr(m, "wcls");
    if (!m->tok_emb || !m->wq || !m->w3 || !m->rms_final || !m->wcls)
        return err_set(e, MS_ERR_INPUT, "model '%s' is not a llama-family model", c->name);
    return MS_OK;
}

static int alloc_state(llama *m)
{
    const model_cfg *c = &m->cfg;
    size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t cache, att;
    if (mul3(c->n_layers, c->max_ctx, kvd, &cache) || mul3(c->n_heads, c->max_ctx, 1, &att) ||
        cache > SIZE_MAX / sizeof(float))
        return MS_ERR_NOMEM;
    m->x = calloc(c->dim, sizeof(float));
    m->xb = calloc(c->dim, sizeof(float));
    m->xb2 = calloc(c->dim, sizeof(float));
    m->q = calloc(qd, sizeof(float));
    m->att_out = calloc(qd, sizeof(float));
    m->att = calloc(att, sizeof(float));
    m->hb = calloc(c->ffn_dim, sizeof(float));
    m->hb2 = calloc(c->ffn_dim, sizeof(float));
    m->ffn_pre = calloc(c->ffn_dim, sizeof(float));
    m->fmask = calloc(c->ffn_dim, 1);
    m->key_cache = calloc(cache, sizeof(float));
    m->value_cache = calloc(cache, sizeof(float));
    m->mask = calloc(c->max_ctx, 1);
    return (m->x && m->xb && m->xb2 && m->q && m->att_out && m->att && m->hb && m->hb2 &&
            m->ffn_pre && m->fmask && m->key_cache && m->value_cache && m->mask)
               ? MS_OK
               : MS_ERR_NOMEM;
}

int llama_load(const model_cfg *cfg, const char *checkpoint_path, llama **out, errbuf *e)
{
    *out = NULL;
    if (cfg->family != FAM_LLAMA || cfg->dim != (uint64_t)cfg->n_heads * cfg->head_dim ||
        (uint64_t)cfg->n_kv_heads * cfg->head_dim > UINT32_MAX || cfg->n_kv_heads == 0 ||
        cfg->n_heads % cfg->n_kv_heads || cfg->head_dim % 2)
        return err_set(e, MS_ERR_INPUT,
                       "model '%s' cannot run in the float reference (needs a llama family "
                       "model with dim = heads × head_dim and heads divisible by kv_heads)",
                       cfg->name);
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(checkpoint_path, LLAMA_CKPT_MAX, &buf, &len, e);
    if (rc != MS_OK)
        return rc;
    if (len < 28 || (len - 28) % 4) {
        free(buf);
        return err_set(e, MS_ERR_FORMAT,
                       "%s:1:1: error: not a llama2.c checkpoint (size %zu: a 28-byte header "
                       "and whole floats)",
                       checkpoint_path, len);
    }
    int32_t h[7];
    memcpy(h, buf, sizeof h);
    rc = check_header(cfg, h, checkpoint_path, e);
    llama *m = calloc(1, sizeof *m);
    if (rc != MS_OK || !m) {
        free(buf);
        free(m);
        return rc != MS_OK ? rc : err_set(e, MS_ERR_NOMEM, "out of memory");
    }
    m->cfg = *cfg;
    m->n_floats = (len - 28) / 4;
    m->data = malloc(m->n_floats * sizeof(float));
    if (m->data)
        memcpy(m->data, buf + 28, m->n_floats * sizeof(float));
    free(buf);
    if (!m->data) {
        llama_free(m);
        return err_set(e, MS_ERR_NOMEM, "out of memory loading %s", checkpoint_path);
    }
    /* the tensors are checked against the file's size before any size from the header
     * allocates run state */
    rc = map_tensors(m, checkpoint_path, e);
    if (rc == MS_OK && alloc_state(m) != MS_OK)
        rc = err_set(e, MS_ERR_NOMEM, "out of memory loading %s", checkpoint_path);
    if (rc != MS_OK) {
        llama_free(m);
        return rc;
    }
    *out = m;
    return MS_OK;
}

void llama_free(llama *m)
{
    if (!m)
        return;
    free(m->data);
    free(m->x);
    free(m->xb);
    free(m->xb2);
    free(m->q);
    free(m->att_out);
    free(m->att);
    free(m->hb);
    free(m->hb2);
    free(m->ffn_pre);
    free(m->fmask);
    free(m->key_cache);
    free(m->value_cache);
    free(m->mask);
    free(m);
}

const model_cfg *llama_cfg(const llama *m) { return &m->cfg; }

const float *llama_weight(const llama *m, const char *name, uint32_t *rows, uint32_t *cols)
{
    unsigned layer = 0;
    const char *base = name;
    int layered = 0;
    if (name[0] == 'L') {
        char *end;
        unsigned long l = strtoul(name + 1, &end, 10);
        if (end == name + 1 || *end != '.')
            return NULL;
        layer = (unsigned)l;
        base = end + 1;
        layered = 1;
    }
    for (size_t i = 0; i < m->n_params; i++) {
        const model_param *p = &m->params[i];
        if (strcmp(p->name, base) || layered != (p->n_layers > 0))
            continue;
        if (layered && layer >= p->n_layers)
            return NULL;
        if (rows)
            *rows = p->rows;
        if (cols)
            *cols = p->cols;
        return m->ptr[i] + (size_t)layer * p->rows * p->cols;
    }
    return NULL;
}

const float *llama_query(const llama *m) { return m->q; }

void llama_reset(llama *m)
{
    const model_cfg *c = &m->cfg;
    size_t cache = (size_t)c->n_layers * c->max_ctx * c->n_kv_heads * c->head_dim;
    memset(m->key_cache, 0, cache * sizeof(float));
    memset(m->value_cache, 0, cache * sizeof(float));
}

/* ---- kernels (run.c's float order) ---------------------------------------------------- */

static void rmsnorm(float *o, const float *x, const float *w, uint32_t n, float eps)
{
    float ss = 0.0f;
    for (uint32_t j = 0; j < n; j++)
        ss += x[j] * x[j];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (uint32_t j = 0; j < n; j++)
        o[j] = w[j] * (ss * x[j]);
}

static void softmax(float *x, uint32_t n)
{
    float max = x[0];
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > max)
            max = x[i];
    float sum = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (uint32_t i = 0; i < n; i++)
        x[i] /= sum;
}

/* out (d) = W (d, n) · x (n) */
static void matmul(float *out, const float *x, const float *w, uint32_t n, uint32_t d)
{
    for (uint32_t i = 0; i < d; i++) {
        float val = 0.0f;
        const float *row = w + (size_t)i * n;
        for (uint32_t j = 0; j < n; j++)
            val += row[j] * x[j];
        out[i] = val;
    }
}

/* RoPE on interleaved pairs of q (qd floats) and k (kvd floats), as run.c. */
static void rope(const model_cfg *c, float *q, float *k, uint32_t pos)
{
    uint32_t qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    float p = (float)pos / (float)(c->rope_scale > 0 ? c->rope_scale : 1.0);
    for (uint32_t i = 0; i < qd; i += 2) {
        uint32_t hd = i % c->head_dim;
        float freq = 1.0f / powf((float)c->rope_theta, (float)hd / (float)c->head_dim);
        float val = p * freq;
        float fcr = cosf(val), fci = sinf(val);
        int rotn = i < kvd ? 2 : 1;
        for (int v = 0; v < rotn; v++) {
            float *vec = v == 0 ? q : k;
            float v0 = vec[i], v1 = vec[i + 1];
            vec[i] = v0 * fcr - v1 * fci;
            vec[i + 1] = v0 * fci + v1 * fcr;
        }
    }
}

/* Multi-head attention of layer l at pos into m->att_out; attention rows land in m->att with
 * stride pos+1. */
static void attention(llama *m, uint32_t l, uint32_t pos, const llama_hooks *hk)
{
    const model_cfg *c = &m->cfg;
    uint32_t hs = c->head_dim, kvd = c->n_kv_heads * hs, kv_mul = c->n_heads / c->n_kv_heads;
    size_t loff = (size_t)l * c->max_ctx * kvd;
    float scale = sqrtf((float)hs);
    for (uint32_t g = 0; g < c->n_kv_heads; g++) {
        int masked = hk && hk->attend_mask &&
                     hk->attend_mask(hk->ctx, l, g, pos, memset(m->mask, 1, pos + 1));
        m->mask[pos] = 1; /* a token always attends to itself */
        for (uint32_t h = g * kv_mul; h < (g + 1) * kv_mul; h++) {
            const float *q = m->q + h * hs;
            float *att = m->att + (size_t)h * (pos + 1);
            for (uint32_t t = 0; t <= pos; t++) {
                const float *k = m->key_cache + loff + (size_t)t * kvd + g * hs;
                float score = 0.0f;
                for (uint32_t i = 0; i < hs; i++)
                    score += q[i] * k[i];
                att[t] = masked && !m->mask[t] ? -INFINITY : score / scale;
            }
            softmax(att, pos + 1);
            float *xb = m->att_out + h * hs;
            memset(xb, 0, hs * sizeof(float));
            for (uint32_t t = 0; t <= pos; t++) {
                const float *v = m->value_cache + loff + (size_t)t * kvd + g * hs;
                float a = att[t];
                for (uint32_t i = 0; i < hs; i++)
                    xb[i] += a * v[i];
            }
        }
    }
}

static void ffn(llama *m, uint32_t l, uint32_t pos, const llama_hooks *hk)
{
    const model_cfg *c = &m->cfg;
    uint32_t D = c->dim, F = c->ffn_dim;
    rmsnorm(m->xb, m->x, m->rms_ffn + (size_t)l * D, D, (float)c->norm_eps);
    matmul(m->hb, m->xb, m->w1 + (size_t)l * F * D, D, F);
    matmul(m->hb2, m->xb, m->w3 + (size_t)l * F * D, D, F);
    memcpy(m->ffn_pre, m->hb, F * sizeof(float));
    for (uint32_t i = 0; i < F; i++) {
        float val = m->hb[i];
        val *= (1.0f / (1.0f + expf(-val)));
        m->hb[i] = val * m->hb2[i];
    }
    if (hk && hk->ffn_mask && hk->ffn_mask(hk->ctx, l, pos, m->ffn_pre, memset(m->fmask, 1, F)))
        for (uint32_t i = 0; i < F; i++)
            if (!m->fmask[i])
                m->hb[i] = 0.0f;
    matmul(m->xb, m->hb, m->w2 + (size_t)l * D * F, F, D);
    for (uint32_t i = 0; i < D; i++)
        m->x[i] += m->xb[i];
}

int llama_forward(llama *m, int token, uint32_t pos, const llama_hooks *h, float *logits)
{
    const model_cfg *c = &m->cfg;
    uint32_t D = c->dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    if (token < 0 || (uint32_t)token >= c->vocab || pos >= c->max_ctx)
        return MS_ERR_RANGE;
    memcpy(m->x, m->tok_emb + (size_t)token * D, D * sizeof(float));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        rmsnorm(m->xb, m->x, m->rms_att + (size_t)l * D, D, (float)c->norm_eps);
        size_t loff = (size_t)l * c->max_ctx * kvd;
        float *k = m->key_cache + loff + (size_t)pos * kvd;
        float *v = m->value_cache + loff + (size_t)pos * kvd;
        matmul(m->q, m->xb, m->wq + (size_t)l * qd * D, D, qd);
        matmul(k, m->xb, m->wk + (size_t)l * kvd * D, D, kvd);
        matmul(v, m->xb, m->wv + (size_t)l * kvd * D, D, kvd);
        rope(c, m->q, k, pos);
        attention(m, l, pos, h);
        matmul(m->xb2, m->att_out, m->wo + (size_t)l * D * qd, qd, D);
        for (uint32_t i = 0; i < D; i++)
            m->x[i] += m->xb2[i];
        ffn(m, l, pos, h);
        if (h && h->on_layer) {
            llama_layer_view lv = {.layer = l,
                                   .pos = pos,
                                   .q = m->q,
                                   .k = k,
                                   .v = v,
                                   .att = m->att,
                                   .att_out = m->att_out,
                                   .ffn_pre = m->ffn_pre};
            h->on_layer(h->ctx, &lv);
        }
    }
    rmsnorm(m->x, m->x, m->rms_final, D, (float)c->norm_eps);
    if (logits)
        matmul(logits, m->x, m->wcls, D, c->vocab);
    return MS_OK;
}

/* ---- tokenizer (run.c's encode/decode) ------------------------------------------------ */

typedef struct tok_index {
    const char *str;
    int id;
} tok_index;

struct llama_tok {
    uint32_t vocab;
    char **pieces;
    float *scores;
    tok_index *sorted;
    uint32_t max_len;
    unsigned char byte_pieces[512]; /* each byte as a 1-char string */
    char *buf;                      /* merge candidate buffer */
};

static int cmp_tok(const void *a, const void *b)
{
    return strcmp(((const tok_index *)a)->str, ((const tok_index *)b)->str);
}

void llama_tok_free(llama_tok *t)
{
    if (!t)
        return;
    if (t->pieces)
        for (uint32_t i = 0; i < t->vocab; i++)
            free(t->pieces[i]);
    free(t->pieces);
    free(t->scores);
    free(t->sorted);
    free(t->buf);
    free(t);
}

int llama_tok_load(const char *path, uint32_t vocab, llama_tok **out, errbuf *e)
{
    *out = NULL;
    /* llama2.c's byte fallback encodes byte b as piece b + 3 (after <unk>, <s>, </s>): a
     * vocabulary without the 256 byte pieces cannot encode arbitrary text */
    if (vocab < LLAMA_TOK_MIN_VOCAB)
        return err_set(e, MS_ERR_FORMAT,
                       "%s: error: a llama2.c tokenizer needs at least %d "
                       "pieces (<unk>, <s>, </s> and 256 byte pieces), the model's vocab is %u",
                       path, LLAMA_TOK_MIN_VOCAB, vocab);
    char *buf = NULL;
    size_t len = 0, off = 4;
    int rc = read_file(path, LLAMA_TOK_FILE_MAX, &buf, &len, e);
    if (rc != MS_OK)
        return rc;
    llama_tok *t = calloc(1, sizeof *t);
    if (!t) {
        free(buf);
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    }
    t->vocab = vocab;
    t->pieces = calloc(vocab, sizeof *t->pieces);
    t->scores = calloc(vocab, sizeof *t->scores);
    t->sorted = calloc(vocab, sizeof *t->sorted);
    int32_t max_len = 0;
    if (len >= 4)
        memcpy(&max_len, buf, 4);
    rc = (t->pieces && t->scores && t->sorted && max_len > 0 && max_len < 1024) ? MS_OK
                                                                                : MS_ERR_FORMAT;
    for (uint32_t i = 0; i < vocab && rc == MS_OK; i++) {
        int32_t n = -1;
        if (off + 8 <= len) {
            memcpy(&t->scores[i], buf + off, 4);
            memcpy(&n, buf + off + 4, 4);
            off += 8;
        }
        if (n < 0 || n > max_len || off + (size_t)n > len || !(t->pieces[i] = malloc(n + 1))) {
            rc = MS_ERR_FORMAT;
            break;
        }
        memcpy(t->pieces[i], buf + off, (size_t)n);
        t->pieces[i][n] = '\0';
        off += (size_t)n;
        t->sorted[i] = (tok_index){t->pieces[i], (int)i};
    }
    free(buf);
    t->max_len = (uint32_t)max_len;
    if (rc == MS_OK && !(t->buf = malloc(2 * t->max_len + 3)))
        rc = MS_ERR_NOMEM;
    if (rc != MS_OK) {
        llama_tok_free(t);
        return err_set(e, rc,
                       "%s: error: not a llama2.c tokenizer for %u pieces (hint: "
                       "the tokenizer must match the model's vocab)",
                       path, vocab);
    }
    for (int i = 0; i < 256; i++) {
        t->byte_pieces[i * 2] = (unsigned char)i;
        t->byte_pieces[i * 2 + 1] = '\0';
    }
    qsort(t->sorted, vocab, sizeof *t->sorted, cmp_tok);
    *out = t;
    return MS_OK;
}

static int tok_lookup(const llama_tok *t, const char *s)
{
    tok_index key = {s, 0};
    const tok_index *r = bsearch(&key, t->sorted, t->vocab, sizeof *t->sorted, cmp_tok);
    return r ? r->id : -1;
}

/* Greedy BPE: merge the best-scoring adjacent pair until none merges. */
static int tok_merge(const llama_tok *t, int *ids, int n)
{
    for (;;) {
        float best = -1e10f;
        int best_id = -1, best_i = -1;
        for (int i = 0; i + 1 < n; i++) {
            snprintf(t->buf, 2 * t->max_len + 3, "%s%s", t->pieces[ids[i]], t->pieces[ids[i + 1]]);
            int id = tok_lookup(t, t->buf);
            if (id != -1 && t->scores[id] > best) {
                best = t->scores[id];
                best_id = id;
                best_i = i;
            }
        }
        if (best_i == -1)
            return n;
        ids[best_i] = best_id;
        memmove(ids + best_i + 1, ids + best_i + 2, (size_t)(n - best_i - 2) * sizeof *ids);
        n--;
    }
}

int llama_tok_encode(const llama_tok *t, const char *text, int *ids, int max_ids)
{
    size_t tl = strlen(text);
    int *tmp = malloc((tl + 3) * sizeof *tmp);
    if (!tmp || max_ids < 1) {
        free(tmp);
        return -1;
    }
    int n = 0;
    tmp[n++] = 1; /* BOS */
    if (text[0]) {
        int sp = tok_lookup(t, " ");
        if (sp >= 0)
            tmp[n++] = sp;
    }
    char cp[8];
    size_t cl = 0;
    for (const char *c = text; *c; c++) {
        if ((*c & 0xC0) != 0x80)
            cl = 0;
        cp[cl++] = *c;
        cp[cl] = '\0';
        if ((*(c + 1) & 0xC0) == 0x80 && cl < 4)
            continue;
        int id = tok_lookup(t, cp);
        if (id != -1) {
            tmp[n++] = id;
        } else {
            for (size_t i = 0; i < cl; i++) /* < vocab: llama_tok_load checked its size */
                tmp[n++] = (unsigned char)cp[i] + 3;
        }
        cl = 0;
    }
    n = tok_merge(t, tmp, n);
    if (n > max_ids)
        n = max_ids;
    memcpy(ids, tmp, (size_t)n * sizeof *ids);
    free(tmp);
    return n;
}

const char *llama_tok_piece(const llama_tok *t, int prev, int id)
{
    if (id < 0 || (uint32_t)id >= t->vocab)
        return "";
    const char *piece = t->pieces[id];
    if (prev == 1 && piece[0] == ' ')
        piece++;
    unsigned char byte;
    if (sscanf(piece, "<0x%02hhX>", &byte) == 1)
        piece = (const char *)t->byte_pieces + byte * 2;
    return piece;
}

/* One body for both element types (llama.h). */
#define LLAMA_ARGMAX(name, T)             \
    uint32_t name(const T *x, uint32_t n) \
    {                                     \
        uint32_t b = 0;                   \
        for (uint32_t i = 1; i < n; i++)  \
            if (x[i] > x[b])              \
                b = i;                    \
        return b;                         \
    }
LLAMA_ARGMAX(llama_argmaxf, float)
LLAMA_ARGMAX(llama_argmax, double)
#undef LLAMA_ARGMAX

void llama_compare(const double *mpc, const float *ref, uint32_t n, uint32_t vocab, llama_acc *a)
{
    memset(a, 0, sizeof *a);
    a->n = n;
    double sum = 0;
    for (uint32_t s = 0; s < n; s++) {
        const double *x = mpc + (size_t)s * vocab;
        const float *y = ref + (size_t)s * vocab;
        uint32_t bx = 0, by = 0;
        for (uint32_t i = 0; i < vocab; i++) {
            double d = fabs(x[i] - (double)y[i]);
            sum += d;
            a->max_abs = d > a->max_abs ? d : a->max_abs;
            bx = x[i] > x[bx] ? i : bx;
            by = y[i] > y[by] ? i : by;
        }
        a->top1_agree += bx == by;
        if (bx != by && (double)y[by] - (double)y[bx] > a->miss_gap)
            a->miss_gap = (double)y[by] - (double)y[bx];
    }
    a->mean_abs = n ? sum / ((double)n * vocab) : 0;
}
