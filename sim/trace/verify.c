/* verify.c — a trace checked against itself and against the model it claims to come from
 * (trace.h §verification; `mpcsim trace info --verify`).
 *
 * Internal consistency catches arrays that do not belong together (q or k from another
 * layer, a different rotary embedding, attention of another run). Channel orders are a
 * permutation of q and k alike, so q·k — and every attention row — is blind to them; only the
 * model's own forward pass tells an interleaved trace from a rotate-half one, hence the second
 * check whenever the model's weights are at hand. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/llama.h"
#include "models/model.h"
#include "trace_impl.h"

static int finite_all(const float *x, size_t n, size_t *bad)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            *bad = i;
            return 0;
        }
    return 1;
}

/* Largest |a − b| over n, relative to max(1, max |b|); *at receives the index of the worst. */
static double rel_err(const float *a, const float *b, size_t n, size_t *at)
{
    double mx = 1.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fabs(b[i]) > mx ? fabs(b[i]) : mx;
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > worst) {
            worst = d;
            *at = i;
        }
    }
    return worst / mx;
}

static const char *layout_hint(const trace *t)
{
    return t->rope_half ? "the manifest says rope_layout: half; is it 'interleaved'?"
                        : "the manifest says rope_layout: interleaved (llama2.c order); a "
                          "Hugging Face dump holds 'half' (rotate_half order)";
}

int trace_agrees_with_model(trace *t, const char *model_name, uint32_t layer, uint32_t pos,
                            const float *q, const float *k, double tol, errbuf *e)
{
    const trace_shape *s = &t->s;
    size_t qn = (size_t)s->n_heads * s->head_dim, kn = (size_t)s->n_kv_heads * s->head_dim, at;
    const float *tq = trace_pos(t) == pos ? trace_q(t, layer) : NULL;
    if (!tq || trace_kv(t, layer, pos, t->kbuf, NULL) != MS_OK)
        return err_set(e, MS_ERR_INTERNAL, "trace check: position %u is not current", pos);
    double eq = rel_err(tq, q, qn, &at);
    const char *what = "query";
    size_t worst = at;
    double ek = rel_err(t->kbuf, k, kn, &at);
    if (ek > eq) {
        eq = ek;
        what = "key";
        worst = at;
    }
    if (eq <= tol)
        return MS_OK;
    return err_set(e, MS_ERR_INPUT,
                   "error: the trace's %ss do not agree with model '%s' at layer %u, position "
                   "%u, channel %zu (relative difference %.3g > %.3g): its q/k come from another "
                   "model, tokenizer or channel order\n  hint: %s; `mpcsim trace info --verify "
                   "DIR` shows the first mismatch",
                   what, model_name, layer, pos, worst, eq, tol, layout_hint(t));
}

/* ---- internal consistency ------------------------------------------------------------- */

static int check_att_row(trace *t, uint32_t l, uint32_t pos, uint32_t h, double tol, trace_check *c,
                         errbuf *e)
{
    const trace_shape *s = &t->s;
    const float *row = trace_stored_att(t, l, pos, h);
    if (!row)
        return MS_OK;
    uint32_t d = s->head_dim, G = s->n_heads / s->n_kv_heads, T = s->n_tokens;
    const float *q = trace_q(t, l) + (size_t)h * d;
    double mx = -INFINITY, sum = 0, stored = 0;
    double *lg = malloc((pos + 1) * sizeof *lg);
    if (!lg)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    for (uint32_t j = 0; j <= pos; j++) {
        t->src->kv1(t, l, h / G, j, t->kbuf, NULL);
        double dot = 0;
        for (uint32_t i = 0; i < d; i++)
            dot += (double)q[i] * t->kbuf[i];
        lg[j] = dot / sqrt((double)d);
        mx = lg[j] > mx ? lg[j] : mx;
    }
    for (uint32_t j = 0; j <= pos; j++)
        sum += (lg[j] = exp(lg[j] - mx));
    int rc = MS_OK;
    for (uint32_t j = 0; j <= pos && rc == MS_OK; j++) {
        double ref = lg[j] / sum, err = fabs(ref - row[j]);
        stored += row[j];
        c->att_err = err > c->att_err ? err : c->att_err;
        if (err > tol)
            rc = err_set(e, MS_ERR_FORMAT,
                         "error: att[layer %u][pos %u][head %u][key %u] is %.6g but "
                         "softmax(q·k/√d) of the trace's own q and k gives %.6g (|diff| %.3g > "
                         "%.3g): q, k and att do not belong together (another rotary "
                         "embedding, layer or run?)",
                         l, pos, h, j, row[j], ref, err, tol);
    }
    free(lg);
    if (rc == MS_OK && fabs(stored - 1.0) > tol * (pos + 1))
        rc = err_set(e, MS_ERR_FORMAT,
                     "error: att[layer %u][pos %u][head %u] sums to %.6g, "
                     "not 1",
                     l, pos, h, stored);
    for (uint32_t j = pos + 1; rc == MS_OK && j < T; j++)
        if (row[j] != 0.0f)
            rc = err_set(e, MS_ERR_FORMAT,
                         "error: att[layer %u][pos %u][head %u][key %u] is "
                         "%.6g above the diagonal (must be 0: causal, full layout)",
                         l, pos, h, j, row[j]);
    c->att_rows++;
    return rc;
}

static int nonfinite(trace *t, const char *arr, uint32_t l, uint32_t pos, size_t i, errbuf *e)
{
    (void)t;
    return err_set(e, MS_ERR_FORMAT, "error: %s[layer %u][pos %u] element %zu is not finite", arr,
                   l, pos, i);
}

static int check_position(trace *t, uint32_t pos, double tol, trace_check *c, errbuf *e)
{
    const trace_shape *s = &t->s;
    size_t bad, qn = (size_t)s->n_heads * s->head_dim, kn = (size_t)s->n_kv_heads * s->head_dim;
    int rc = trace_seek(t, pos, e);
    float *k = malloc(kn * sizeof *k), *v = malloc(kn * sizeof *v);
    if (rc == MS_OK && (!k || !v))
        rc = err_set(e, MS_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; rc == MS_OK && l < s->n_layers; l++) {
        const float *q = trace_q(t, l);
        if (!finite_all(q, qn, &bad))
            rc = nonfinite(t, "q", l, pos, bad, e);
        else if (trace_kv(t, l, pos, k, v) != MS_OK)
            rc = err_set(e, MS_ERR_INTERNAL, "trace check: k/v unreadable");
        else if (!finite_all(k, kn, &bad))
            rc = nonfinite(t, "k", l, pos, bad, e);
        else if (!finite_all(v, kn, &bad))
            rc = nonfinite(t, "v", l, pos, bad, e);
        const float *f = rc == MS_OK ? trace_ffn(t, l) : NULL;
        if (f && !finite_all(f, s->ffn_dim, &bad))
            rc = nonfinite(t, "ffn", l, pos, bad, e);
        c->values += 2 * kn + qn + (f ? s->ffn_dim : 0);
        for (uint32_t h = 0; rc == MS_OK && h < s->n_heads; h++)
            rc = check_att_row(t, l, pos, h, tol, c, e);
    }
    const float *lg = rc == MS_OK ? trace_logits(t) : NULL;
    if (lg && !finite_all(lg, s->vocab, &bad))
        rc = err_set(e, MS_ERR_FORMAT, "error: logits[pos %u] element %zu is not finite", pos, bad);
    c->values += lg ? s->vocab : 0;
    free(k);
    free(v);
    return rc;
}

/* ---- against the model ---------------------------------------------------------------- */

typedef struct model_cmp {
    trace *t;
    double tol, err;
    float *k, *v;
    int rc;
    errbuf *e;
    const char *model;
} model_cmp;

static void cmp_layer(void *ctx, const llama_layer_view *lv)
{
    model_cmp *c = ctx;
    trace *t = c->t;
    const trace_shape *s = &t->s;
    if (c->rc != MS_OK)
        return;
    size_t qn = (size_t)s->n_heads * s->head_dim, kn = (size_t)s->n_kv_heads * s->head_dim, at;
    trace_kv(t, lv->layer, lv->pos, c->k, c->v);
    struct {
        const char *name;
        const float *mine, *model;
        size_t n;
    } arr[] = {{"q", trace_q(t, lv->layer), lv->q, qn},
               {"k", c->k, lv->k, kn},
               {"v", c->v, lv->v, kn},
               {"ffn", trace_ffn(t, lv->layer), lv->ffn_pre, s->ffn_dim}};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0] && c->rc == MS_OK; i++) {
        if (!arr[i].mine)
            continue;
        double err = rel_err(arr[i].mine, arr[i].model, arr[i].n, &at);
        c->err = err > c->err ? err : c->err;
        if (err > c->tol)
            c->rc =
                err_set(c->e, MS_ERR_FORMAT,
                        "error: %s[layer %u][pos %u] element %zu is %.6g but model '%s' "
                        "computes %.6g on the trace's tokens (relative difference %.3g > "
                        "%.3g)\n  hint: %s",
                        arr[i].name, lv->layer, lv->pos, at, arr[i].mine[at], c->model,
                        arr[i].model[at], err, c->tol,
                        i < 2 ? layout_hint(t) : "the trace comes from other weights or tokens");
    }
}

static int check_model(trace *t, double tol, trace_check *c, errbuf *e)
{
    const trace_shape *s = &t->s;
    model_cfg cfg;
    errbuf ign;
    char wpath[1024];
    if (!t->tokens) {
        snprintf(c->model_note, sizeof c->model_note, "no token ids in the trace");
        return MS_OK;
    }
    if (model_load(t->model, &cfg, &ign) != MS_OK || !cfg.weights[0] ||
        model_file_path(cfg.weights, wpath, sizeof wpath)) {
        snprintf(c->model_note, sizeof c->model_note, "no weights for model '%.64s' here",
                 t->model);
        return MS_OK;
    }
    if (cfg.n_layers != s->n_layers || cfg.n_heads != s->n_heads ||
        cfg.n_kv_heads != s->n_kv_heads || cfg.head_dim != s->head_dim ||
        (s->vocab && cfg.vocab != s->vocab))
        return err_set(e, MS_ERR_FORMAT,
                       "error: the trace's shape does not match model '%s' "
                       "it names (layers %u/%u, heads %u/%u, kv_heads %u/%u, head_dim %u/%u)",
                       t->model, s->n_layers, cfg.n_layers, s->n_heads, cfg.n_heads, s->n_kv_heads,
                       cfg.n_kv_heads, s->head_dim, cfg.head_dim);
    if (s->n_tokens > cfg.max_ctx)
        return err_set(e, MS_ERR_FORMAT,
                       "error: the trace has %u positions, more than model "
                       "'%s' runs (%u)",
                       s->n_tokens, t->model, cfg.max_ctx);
    llama *m = NULL;
    int rc = llama_load(&cfg, wpath, &m, e);
    size_t kn = (size_t)s->n_kv_heads * s->head_dim;
    model_cmp mc = {t,     tol, 0,       malloc(kn * sizeof(float)), malloc(kn * sizeof(float)),
                    MS_OK, e,   t->model};
    float *lg = malloc((size_t)cfg.vocab * sizeof *lg);
    if (rc == MS_OK && (!mc.k || !mc.v || !lg))
        rc = err_set(e, MS_ERR_NOMEM, "out of memory");
    llama_hooks hk = {.ctx = &mc, .on_layer = cmp_layer};
    for (uint32_t p = 0; rc == MS_OK && p < s->n_tokens; p++) {
        if (t->tokens[p] < 0 || (uint32_t)t->tokens[p] >= cfg.vocab)
            rc = err_set(e, MS_ERR_FORMAT,
                         "error: token %u is id %d, outside model '%s''s "
                         "vocabulary of %u",
                         p, t->tokens[p], t->model, cfg.vocab);
        if (rc == MS_OK)
            rc = trace_seek(t, p, e);
        if (rc == MS_OK)
            rc = llama_forward(m, t->tokens[p], p, &hk, lg);
        if (rc == MS_OK)
            rc = mc.rc;
        const float *tl = rc == MS_OK ? trace_logits(t) : NULL;
        size_t at;
        double err = tl ? rel_err(tl, lg, cfg.vocab, &at) : 0;
        mc.err = err > mc.err ? err : mc.err;
        if (tl && err > tol)
            rc = err_set(e, MS_ERR_FORMAT,
                         "error: logits[pos %u] element %zu is %.6g but "
                         "model '%s' computes %.6g (relative difference %.3g > %.3g)",
                         p, at, tl[at], t->model, lg[at], err, tol);
        c->model_pos = rc == MS_OK ? p + 1 : c->model_pos;
    }
    c->model_err = mc.err;
    free(mc.k);
    free(mc.v);
    free(lg);
    llama_free(m);
    return rc;
}

int trace_verify(trace *t, const char *dir, double tol, trace_check *out, errbuf *e)
{
    const trace_shape *s = &t->s;
    memset(out, 0, sizeof *out);
    int rc = MS_OK;
    for (uint32_t p = 0; t->tokens && s->vocab && p < s->n_tokens && rc == MS_OK; p++)
        if (t->tokens[p] < 0 || (uint32_t)t->tokens[p] >= s->vocab)
            rc = err_set(e, MS_ERR_FORMAT,
                         "error: tokens[%u] is %d, outside the vocabulary "
                         "of %u",
                         p, t->tokens[p], s->vocab);
    for (uint32_t l = 0; rc == MS_OK && l < s->n_layers; l++) {
        uint32_t rows, cols;
        size_t bad;
        const float *w = trace_wo(t, l, &rows, &cols);
        if (w && !finite_all(w, (size_t)rows * cols, &bad))
            rc = err_set(e, MS_ERR_FORMAT, "error: wo[layer %u] element %zu is not finite", l, bad);
    }
    for (uint32_t p = 0; rc == MS_OK && p < s->n_tokens; p++)
        rc = check_position(t, p, tol, out, e);
    if (rc == MS_OK)
        rc = check_model(t, tol, out, e);
    if (rc != MS_OK && strncmp(e->msg, "error: ", 7) == 0) {
        /* name the trace first, as every input error does */
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        size_t n = strlen(dir) < 512 ? strlen(dir) : 512;
        memcpy(e->msg, dir, n);
        e->msg[n] = ':';
        e->msg[n + 1] = ' ';
        memcpy(e->msg + n + 2, msg, sizeof e->msg - n - 3);
        e->msg[sizeof e->msg - 1] = '\0';
    }
    return rc;
}
