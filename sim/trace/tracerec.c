/* tracerec.c — recording a trace from the float reference (models/llama.h) into a trace
 * directory (tracefmt.c's writer). */
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
