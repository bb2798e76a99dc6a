/* model.c — model descriptions: YAML files under models/, validation, and the shape function
 * every other module uses. */
#include "model.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* ---- data directory ----------------------------------------------------------------------- */

#ifndef MPCSIM_DATADIR
#define MPCSIM_DATADIR "/usr/local/share/mpcsim"
#endif

/* <dir of the executable>/../share/mpcsim, where `make install PREFIX=…` puts the data. */
static const char *installed_datadir(void)
{
    static char dir[4096 + 32];
    char exe[4096];
    struct stat st;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = '\0';
    snprintf(dir, sizeof dir, "%s/../share/mpcsim", exe);
    char models[4096 + 64];
    snprintf(models, sizeof models, "%s/models", dir);
    return stat(models, &st) == 0 && S_ISDIR(st.st_mode) ? dir : NULL;
}

const char *mpcsim_datadir(void)
{
    static const char *cached;
    const char *env = getenv("MPCSIM_DATA");
    struct stat st;
    if (env && *env)
        return env;
    if (stat("models", &st) == 0 && S_ISDIR(st.st_mode) && stat("protocols", &st) == 0)
        return ".";
    if (!cached)
        cached = installed_datadir();
    if (cached)
        return cached;
    return MPCSIM_DATADIR[0] ? MPCSIM_DATADIR : ".";
}

int model_file_path(const char *rel, char *out, size_t cap)
{
    int n = rel[0] == '/' ? snprintf(out, cap, "%s", rel)
                          : snprintf(out, cap, "%s/models/%s", mpcsim_datadir(), rel);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

/* ---- keys ----------------------------------------------------------------------------------- */

static const char *const keys[] = {
    "format", "name", "family", "layers", "dim", "heads", "kv_heads", "head_dim", "ffn_dim",
    "activation", "norm", "positional", "vocab", "max_context", "norm_eps", "rope_theta",
    "rope_scale", "tied_embeddings", "weights", "tokenizer",
};
#define N_KEYS (sizeof keys / sizeof keys[0])

const char *const *model_keys(size_t *n)
{
    *n = N_KEYS;
    return keys;
}

void model_cfg_init(model_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->rope_scale = 1.0;
}

static int set_u32(uint32_t *dst, const char *key, const char *val, errbuf *e)
{
    unsigned long long v;
    if (parse_u64(val, &v) || v == 0 || v > 100000000ULL)
        return err_set(e, MS_ERR_INPUT, "'%s' must be a positive integer, got '%s'", key, val);
    *dst = (uint32_t)v;
    return MS_OK;
}

static int set_enum(int *dst, const char *key, const char *val, const char *const *names,
                    int n, errbuf *e)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(val, names[i])) {
            *dst = i;
            return MS_OK;
        }
    char opts[160] = "";
    for (int i = 0; i < n; i++) {
        strncat(opts, i ? ", " : "", sizeof opts - strlen(opts) - 1);
        strncat(opts, names[i], sizeof opts - strlen(opts) - 1);
    }
    return err_set(e, MS_ERR_INPUT, "'%s' must be one of %s, got '%s'", key, opts, val);
}

static int set_pos_double(double *dst, const char *key, const char *val, errbuf *e)
{
    if (parse_double(val, dst) || *dst <= 0)
        return err_set(e, MS_ERR_INPUT, "'%s' must be a positive number, got '%s'", key, val);
    return MS_OK;
}

static int set_str(char *dst, size_t cap, const char *key, const char *val, errbuf *e)
{
    if (strlen(val) >= cap)
        return err_set(e, MS_ERR_INPUT, "'%s' is too long (at most %zu characters)", key, cap - 1);
    memcpy(dst, val, strlen(val) + 1);
    return MS_OK;
}

int model_set(model_cfg *c, const char *key, const char *val, errbuf *e)
{
    static const char *const fams[] = {"gpt2", "llama"}, *const acts[] = {"gelu", "swiglu"},
                             *const norms[] = {"layernorm", "rmsnorm"},
                             *const poss[] = {"learned", "rope"},
                             *const bools[] = {"false", "true"};
    if (!strcmp(key, "format"))
        return strcmp(val, "mpcsim-model 1")
                   ? err_set(e, MS_ERR_INPUT,
                             "unsupported model format '%s' (this mpcsim reads 'mpcsim-model 1')",
                             val)
                   : MS_OK;
    if (!strcmp(key, "name"))
        return set_str(c->name, sizeof c->name, key, val, e);
    if (!strcmp(key, "family"))
        return set_enum(&c->family, key, val, fams, 2, e);
    if (!strcmp(key, "layers"))
        return set_u32(&c->n_layers, key, val, e);
    if (!strcmp(key, "dim"))
        return set_u32(&c->dim, key, val, e);
    if (!strcmp(key, "heads"))
        return set_u32(&c->n_heads, key, val, e);
    if (!strcmp(key, "kv_heads"))
        return set_u32(&c->n_kv_heads, key, val, e);
    if (!strcmp(key, "head_dim"))
        return set_u32(&c->head_dim, key, val, e);
    if (!strcmp(key, "ffn_dim"))
        return set_u32(&c->ffn_dim, key, val, e);
    if (!strcmp(key, "vocab"))
        return set_u32(&c->vocab, key, val, e);
    if (!strcmp(key, "max_context"))
        return set_u32(&c->max_ctx, key, val, e);
    if (!strcmp(key, "activation"))
        return set_enum(&c->act, key, val, acts, 2, e);
    if (!strcmp(key, "norm"))
        return set_enum(&c->norm, key, val, norms, 2, e);
    if (!strcmp(key, "positional"))
        return set_enum(&c->pos, key, val, poss, 2, e);
    if (!strcmp(key, "norm_eps"))
        return set_pos_double(&c->norm_eps, key, val, e);
    if (!strcmp(key, "rope_theta"))
        return set_pos_double(&c->rope_theta, key, val, e);
    if (!strcmp(key, "rope_scale"))
        return set_pos_double(&c->rope_scale, key, val, e);
    if (!strcmp(key, "tied_embeddings"))
        return set_enum(&c->tied_embeddings, key, val, bools, 2, e);
    if (!strcmp(key, "weights"))
        return set_str(c->weights, sizeof c->weights, key, val, e);
    if (!strcmp(key, "tokenizer"))
        return set_str(c->tokenizer, sizeof c->tokenizer, key, val, e);
    return MS_ERR_NOTFOUND;
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
                       "model '%s': heads (%u) must be a multiple of kv_heads (%u)", n,
                       c->n_heads, c->n_kv_heads);
    if (c->pos == POS_ROPE && c->head_dim % 2)
        return err_set(e, MS_ERR_INPUT, "model '%s': RoPE needs an even head_dim (got %u)", n,
                       c->head_dim);
    if (c->family == FAM_GPT2 && (c->pos != POS_LEARNED || c->norm != NORM_LAYER))
        return err_set(e, MS_ERR_INPUT,
                       "model '%s': family gpt2 uses positional: learned and norm: layernorm", n);
    return MS_OK;
}

/* ---- the shape function ------------------------------------------------------------------- */

size_t model_params(const model_cfg *c, model_param out[MODEL_MAX_PARAMS])
{
    uint32_t L = c->n_layers, D = c->dim, F = c->ffn_dim;
    uint32_t QD = c->n_heads * c->head_dim, KD = c->n_kv_heads * c->head_dim;
    size_t n = 0;
#define P(nm, l, r, cl) out[n++] = (model_param){nm, l, r, cl}
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

/* Reads a flat mapping of scalars; each key goes through model_set. */
static int parse_model(yaml_parser_t *ps, const char *path, model_cfg *c, errbuf *e)
{
    yaml_event_t ev;
    char key[64] = "";
    int depth = 0, have_key = 0, rc = MS_OK;
    unsigned seen = 0;
    for (;;) {
        if (!yaml_parser_parse(ps, &ev))
            return err_set(e, MS_ERR_INPUT, "%s:%zu:%zu: error: %s", path,
                           ps->problem_mark.line + 1, ps->problem_mark.column + 1,
                           ps->problem ? ps->problem : "YAML syntax error");
        size_t line = ev.start_mark.line + 1, col = ev.start_mark.column + 1;
        if (ev.type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (ev.type == YAML_MAPPING_START_EVENT && ++depth > 1)
            rc = err_set(e, MS_ERR_INPUT, "%s:%zu:%zu: error: '%s' must be a scalar", path, line,
                         col, key);
        else if (ev.type == YAML_SEQUENCE_START_EVENT)
            rc = err_set(e, MS_ERR_INPUT, "%s:%zu:%zu: error: %s must be a scalar, not a list",
                         path, line, col, have_key ? key : "a model file");
        else if (ev.type == YAML_MAPPING_END_EVENT)
            depth--;
        else if (ev.type == YAML_SCALAR_EVENT && depth == 1 && !have_key) {
            snprintf(key, sizeof key, "%s", (const char *)ev.data.scalar.value);
            have_key = 1;
            size_t nk;
            const char *const *ks = model_keys(&nk);
            for (size_t i = 0; i < nk; i++)
                if (!strcmp(ks[i], key)) {
                    if (seen & (1u << i))
                        rc = err_set(e, MS_ERR_INPUT, "%s:%zu:%zu: error: duplicate key '%s'",
                                     path, line, col, key);
                    seen |= 1u << i;
                }
            if (rc == MS_OK && model_set(c, key, "", NULL) == MS_ERR_NOTFOUND) {
                const char *dym = did_you_mean(key, ks, nk);
                rc = err_set(e, MS_ERR_INPUT, "%s:%zu:%zu: error: unknown key '%s' in model%s%s%s",
                             path, line, col, key, dym ? " (did you mean '" : "",
                             dym ? dym : "", dym ? "'?)" : "");
            }
        } else if (ev.type == YAML_SCALAR_EVENT && depth == 1) {
            errbuf ve;
            int r = model_set(c, key, (const char *)ev.data.scalar.value, &ve);
            if (r != MS_OK)
                rc = err_set(e, MS_ERR_INPUT, "%s:%zu:%zu: error: %s", path, line, col, ve.msg);
            have_key = 0;
        }
        yaml_event_delete(&ev);
        if (rc != MS_OK)
            return rc;
    }
    return MS_OK;
}

int model_load(const char *name_or_path, model_cfg *c, errbuf *e)
{
    char path[1024];
    int is_path = strchr(name_or_path, '/') || strstr(name_or_path, ".yaml");
    if (is_path)
        snprintf(path, sizeof path, "%s", name_or_path);
    else
        snprintf(path, sizeof path, "%s/models/%s.yaml", mpcsim_datadir(), name_or_path);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (is_path)
            return err_set(e, MS_ERR_NOTFOUND, "%s: error: cannot open model file", path);
        char names[64][64];
        size_t n = 0;
        model_list(names, 64, &n);
        const char *cands[64];
        for (size_t i = 0; i < n; i++)
            cands[i] = names[i];
        const char *dym = did_you_mean(name_or_path, cands, n);
        return err_set(e, MS_ERR_NOTFOUND, "unknown model '%s'%s%s%s (see 'mpcsim list models')",
                       name_or_path, dym ? " (did you mean '" : "", dym ? dym : "",
                       dym ? "'?)" : "");
    }
    yaml_parser_t ps;
    yaml_parser_initialize(&ps);
    yaml_parser_set_input_file(&ps, f);
    model_cfg_init(c);
    int rc = parse_model(&ps, path, c, e);
    yaml_parser_delete(&ps);
    fclose(f);
    if (rc != MS_OK)
        return rc;
    errbuf ce;
    if (model_check(c, &ce) != MS_OK)
        return err_set(e, MS_ERR_INPUT, "%s: error: %s", path, ce.msg);
    return MS_OK;
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
