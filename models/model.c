/* model.c — model descriptions: YAML files under models/, validation, and the shape function
 * every other module uses. */
#include "model.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int model_file_path(const char *rel, char *out, size_t cap)
{
    int n = rel[0] == '/' ? snprintf(out, cap, "%s", rel)
                          : snprintf(out, cap, "%s/models/%s", mpcsim_datadir(), rel);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

/* ---- keys ----------------------------------------------------------------------------------- */

static const char *const fam_names[] = {"gpt2", "llama", NULL};
static const char *const act_names[] = {"gelu", "swiglu", NULL};
static const char *const norm_names[] = {"layernorm", "rmsnorm", NULL};
static const char *const pos_names[] = {"learned", "rope", NULL};

/* The keys of a model file and of a scenario's inline model, in canonical order. Keys whose
 * default depends on the family (activation, norm, positional, tied_embeddings) or on other
 * keys (kv_heads, head_dim) have none here: model_read() resolves them. */
#define M(member) YS_AT(model_cfg, member)
static const ys_field model_fields[] = {
    {"format", YS_FIXED, YS_NONE, 0, 0, "mpcsim-model 1", "file format", NULL, 0, NULL, NULL},
    {"name", YS_STR, M(name), 0, 0, NULL, "model name (required in a model file)", NULL, 0, NULL,
     NULL},
    {"family", YS_ENUM, M(family), 0, 0, "llama", "architecture; sets the defaults below",
     fam_names, 0, NULL, NULL},
    {"layers", YS_U32, M(n_layers), 1, 1e8, NULL, "transformer blocks", NULL, YS_REQ, NULL, NULL},
    {"dim", YS_U32, M(dim), 1, 1e8, NULL, "hidden size", NULL, YS_REQ, NULL, NULL},
    {"heads", YS_U32, M(n_heads), 1, 1e8, NULL, "query heads", NULL, YS_REQ, NULL, NULL},
    {"kv_heads", YS_U32, M(n_kv_heads), 1, 1e8, NULL, "KV heads (GQA); default: heads", NULL, 0,
     NULL, NULL},
    {"head_dim", YS_U32, M(head_dim), 1, 1e8, NULL, "per head; default: dim / heads", NULL, 0, NULL,
     NULL},
    {"ffn_dim", YS_U32, M(ffn_dim), 1, 1e8, NULL, "FFN hidden size", NULL, YS_REQ, NULL, NULL},
    {"activation", YS_ENUM, M(act), 0, 0, NULL, "default: swiglu (llama), gelu (gpt2)", act_names,
     0, NULL, NULL},
    {"norm", YS_ENUM, M(norm), 0, 0, NULL, "default: rmsnorm (llama), layernorm (gpt2)", norm_names,
     0, NULL, NULL},
    {"positional", YS_ENUM, M(pos), 0, 0, NULL, "default: rope (llama), learned (gpt2)", pos_names,
     0, NULL, NULL},
    {"vocab", YS_U32, M(vocab), 1, 1e8, NULL, "vocabulary size", NULL, YS_REQ, NULL, NULL},
    {"max_context", YS_U32, M(max_ctx), 1, 1e8, NULL, "longest sequence", NULL, YS_REQ, NULL, NULL},
    {"norm_eps", YS_DBL, M(norm_eps), 1e-30, 1, "1e-5", "normalization epsilon", NULL, 0, NULL,
     NULL},
    {"rope_theta", YS_DBL, M(rope_theta), 1e-30, 1e30, "10000", "RoPE base", NULL, 0, NULL, NULL},
    {"rope_scale", YS_DBL, M(rope_scale), 1e-30, 1e30, "1", "linear RoPE position scaling", NULL, 0,
     NULL, NULL},
    {"tied_embeddings", YS_BOOL, M(tied_embeddings), 0, 0, NULL,
     "LM head = embeddings; default: true (gpt2), false (llama)", NULL, 0, NULL, NULL},
    {"weights", YS_STR, M(weights), 0, 0, NULL, "llama2.c checkpoint, relative to models/", NULL, 0,
     NULL, NULL},
    {"tokenizer", YS_STR, M(tokenizer), 0, 0, NULL, "llama2.c tokenizer, relative to models/", NULL,
     0, NULL, NULL},
};
#undef M
static const ys_schema schema = YS_SCHEMA("model", model_fields, "models/README.md");

const ys_schema *model_schema(void) { return &schema; }

void model_cfg_init(model_cfg *c)
{
    memset(c, 0, sizeof *c);
    ys_defaults(&schema, c);
}

/* The family's usual choices for the keys a description left out, and the derived shapes. */
static void resolve_defaults(const yx_node *m, model_cfg *c)
{
    int gpt2 = c->family == FAM_GPT2;
    if (!yx_map_get(m, "activation"))
        c->act = gpt2 ? ACT_GELU : ACT_SWIGLU;
    if (!yx_map_get(m, "norm"))
        c->norm = gpt2 ? NORM_LAYER : NORM_RMS;
    if (!yx_map_get(m, "positional"))
        c->pos = gpt2 ? POS_LEARNED : POS_ROPE;
    if (!yx_map_get(m, "tied_embeddings"))
        c->tied_embeddings = gpt2;
    if (!yx_map_get(m, "kv_heads"))
        c->n_kv_heads = c->n_heads;
    if (!yx_map_get(m, "head_dim") && c->n_heads)
        c->head_dim = c->dim / c->n_heads;
}

int model_read(const ys_ctx *x, const yx_node *m, const model_cfg *base, const char *const *extra,
               size_t n_extra, model_cfg *c)
{
    if (!base) {
        model_cfg_init(c);
        int rc = ys_read(x, m, &schema, extra, n_extra, c);
        if (!rc)
            resolve_defaults(m, c);
        return rc;
    }
    *c = *base; /* a base's values stay; the given keys replace them */
    int rc = ys_need_map(x, m, "model", "write e.g. model: {base: llama-2-7b, layers: 8}");
    if (!rc)
        rc = ys_check_keys(x, m, &schema, extra, n_extra);
    for (size_t i = 0; !rc && i < m->n; i++) {
        const ys_field *f = ys_find(&schema, m->key[i]->str);
        if (f)
            rc = ys_read_field(x, m->item[i], f, c);
    }
    return rc;
}

int model_check(const model_cfg *c, errbuf *e)
{
    const char *n = c->name[0] ? c->name : "model";
    static const struct {
        size_t off;
        const char *key;
    } req[] = {
        {offsetof(model_cfg, n_layers), "layers"},   {offsetof(model_cfg, dim), "dim"},
        {offsetof(model_cfg, n_heads), "heads"},     {offsetof(model_cfg, n_kv_heads), "kv_heads"},
        {offsetof(model_cfg, head_dim), "head_dim"}, {offsetof(model_cfg, ffn_dim), "ffn_dim"},
        {offsetof(model_cfg, vocab), "vocab"},       {offsetof(model_cfg, max_ctx), "max_context"},
    };
    if (!c->name[0])
        return err_set(e, MS_ERR_INPUT, "model: missing required key 'name'");
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        if (*(const uint32_t *)((const char *)c + req[i].off) == 0)
            return err_set(e, MS_ERR_INPUT, "model '%s': missing required key '%s'", n, req[i].key);
    if (c->n_heads % c->n_kv_heads)
        return err_set(e, MS_ERR_INPUT,
                       "model '%s': heads (%u) must be a multiple of kv_heads (%u)", n, c->n_heads,
                       c->n_kv_heads);
    if (c->pos == POS_ROPE && c->head_dim % 2)
        return err_set(e, MS_ERR_INPUT, "model '%s': RoPE needs an even head_dim (got %u)", n,
                       c->head_dim);
    if (c->family == FAM_GPT2 && (c->pos != POS_LEARNED || c->norm != NORM_LAYER))
        return err_set(e, MS_ERR_INPUT,
                       "model '%s': family gpt2 uses positional: learned and norm: layernorm", n);
    return model_check_sizes(c, e);
}

/* Each key is at most 1e8, but their products are what the shapes, the lowering and the
 * checkpoint reader use: heads × head_dim is a 32-bit width (model_params), and the weights
 * and a full-context KV cache must count below MODEL_MAX_ELEMS. Every product is checked for
 * overflow before it is compared. */
int model_check_sizes(const model_cfg *c, errbuf *e)
{
    const char *n = c->name[0] ? c->name : "model";
    uint64_t qd, kd;
    if (__builtin_mul_overflow((uint64_t)c->n_heads, c->head_dim, &qd) || qd > UINT32_MAX ||
        __builtin_mul_overflow((uint64_t)c->n_kv_heads, c->head_dim, &kd) || kd > UINT32_MAX)
        return err_set(e, MS_ERR_INPUT,
                       "model '%s': heads × head_dim (%u × %u) must stay below 2^32", n, c->n_heads,
                       c->head_dim);
    uint64_t wide = c->dim > qd ? c->dim : qd, total = 0, t;
    wide = wide > c->ffn_dim ? wide : c->ffn_dim;
    /* weights: (layers · (4 or more) · wide · wide) plus the embeddings, bounded generously
     * by layers · 8 · wide² + 2 · (vocab + max_context) · dim; the KV cache by
     * 2 · layers · max_context · kv_heads · head_dim */
    int bad = __builtin_mul_overflow(wide, wide, &t) || __builtin_mul_overflow(t, 8, &t) ||
              __builtin_mul_overflow(t, (uint64_t)c->n_layers, &total);
    bad = bad || __builtin_mul_overflow((uint64_t)c->vocab + c->max_ctx, 2ull * c->dim, &t) ||
          __builtin_add_overflow(total, t, &total) || total > MODEL_MAX_ELEMS;
    if (bad)
        return err_set(e, MS_ERR_INPUT,
                       "model '%s': layers %u × width %llu and vocab %u × dim %u give more "
                       "than %llu weights",
                       n, c->n_layers, (unsigned long long)wide, c->vocab, c->dim,
                       (unsigned long long)MODEL_MAX_ELEMS);
    if (__builtin_mul_overflow(2ull * c->n_layers, (uint64_t)c->max_ctx, &t) ||
        __builtin_mul_overflow(t, kd, &t) || t > MODEL_MAX_ELEMS)
        return err_set(e, MS_ERR_INPUT,
                       "model '%s': a KV cache of 2 × layers %u × max_context %u × %llu holds "
                       "more than %llu values",
                       n, c->n_layers, c->max_ctx, (unsigned long long)kd,
                       (unsigned long long)MODEL_MAX_ELEMS);
    return MS_OK;
}

/* ---- the shape function ------------------------------------------------------------------- */

size_t model_params(const model_cfg *c, model_param out[MODEL_MAX_PARAMS])
{
    uint32_t L = c->n_layers, D = c->dim, F = c->ffn_dim;
    uint32_t QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    size_t n = 0;
#define P(nm, l, r, cl) \
    out[n++] = (model_param) { nm, l, r, cl }
    if (c->family == FAM_LLAMA) {
        /* llama2.c checkpoint order (models/stories260K/README.md) */
        P("tok_emb", 0, c->vocab, D);
        P("rms_att", L, 1, D);
        P("wq", L, QD, D);
        P("wk", L, KD, D);
        P("wv", L, KD, D);
        P("wo", L, D, QD);
        P("rms_ffn", L, 1, D);
        P("w1", L, F, D);
        P("w2", L, D, F);
        P("w3", L, F, D);
        P("rms_final", 0, 1, D);
        if (!c->tied_embeddings)
            P("wcls", 0, c->vocab, D);
    } else {
        /* GPT-2: Hugging Face parameter set, QKV kept as three matrices */
        P("wte", 0, c->vocab, D);
        P("wpe", 0, c->max_ctx, D);
        P("ln1_g", L, 1, D);
        P("ln1_b", L, 1, D);
        P("wq", L, QD, D);
        P("bq", L, 1, QD);
        P("wk", L, KD, D);
        P("bk", L, 1, KD);
        P("wv", L, KD, D);
        P("bv", L, 1, KD);
        P("wo", L, D, QD);
        P("bo", L, 1, D);
        P("ln2_g", L, 1, D);
        P("ln2_b", L, 1, D);
        P("w_fc", L, F, D);
        P("b_fc", L, 1, F);
        P("w_proj", L, D, F);
        P("b_proj", L, 1, D);
        P("lnf_g", 0, 1, D);
        P("lnf_b", 0, 1, D);
        if (!c->tied_embeddings)
            P("wcls", 0, c->vocab, D);
    }
#undef P
    return n;
}

uint64_t model_param_count(const model_cfg *c)
{
    model_param p[MODEL_MAX_PARAMS];
    size_t n = model_params(c, p);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (uint64_t)(p[i].n_layers ? p[i].n_layers : 1) * p[i].rows * p[i].cols;
    return total;
}

/* ---- loading -------------------------------------------------------------------------------- */

int model_load(const char *name_or_path, model_cfg *c, errbuf *e)
{
    char path[1024];
    int is_path = strchr(name_or_path, '/') || strstr(name_or_path, ".yaml");
    if (is_path)
        snprintf(path, sizeof path, "%s", name_or_path);
    else
        snprintf(path, sizeof path, "%s/models/%s.yaml", mpcsim_datadir(), name_or_path);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (is_path)
            return err_set(e, MS_ERR_NOTFOUND, "%s: error: cannot open model file", path);
        char names[64][64];
        size_t n = 0;
        model_list(names, 64, &n);
        const char *cands[64];
        for (size_t i = 0; i < n; i++)
            cands[i] = names[i];
        const char *dym = did_you_mean(name_or_path, cands, n);
        char where[1400];
        mpcsim_datadir_searched(where, sizeof where);
        return err_set(e, MS_ERR_NOTFOUND,
                       "unknown model '%s'%s%s%s (see 'mpcsim list models')\n"
                       "  hint: looked for models/%s.yaml in %s",
                       name_or_path, dym ? " (did you mean '" : "", dym ? dym : "",
                       dym ? "'?)" : "", name_or_path, where);
    }
    yx_node *root;
    int rc = yx_parse_file(path, &root, e);
    if (rc)
        return rc;
    ys_ctx x = {path, e, 0};
    rc = model_read(&x, root, NULL, NULL, 0, c);
    errbuf ce;
    if (!rc && model_check(c, &ce) != MS_OK)
        rc = err_set(e, MS_ERR_INPUT, "%s:%d:%d: error: %s", path, root->line, root->col, ce.msg);
    yx_free(root);
    return rc;
}

static int cmp_names(const void *a, const void *b) { return strcmp(a, b); }

int model_list(char names[][64], size_t max, size_t *n)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", mpcsim_datadir());
    DIR *d = opendir(dir);
    *n = 0;
    if (!d)
        return MS_ERR_NOTFOUND;
    struct dirent *de;
    while ((de = readdir(d)) && *n < max) {
        size_t len = strlen(de->d_name);
        if (len > 5 && len < 64 + 5 && !strcmp(de->d_name + len - 5, ".yaml")) {
            memcpy(names[*n], de->d_name, len - 5);
            names[*n][len - 5] = '\0';
            (*n)++;
        }
    }
    closedir(d);
    qsort(names, *n, sizeof names[0], cmp_names);
    return MS_OK;
}
