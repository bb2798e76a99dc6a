/* model.h — transformer descriptions (models/NAME.yaml) and the one function that computes every
 * tensor shape from a config. The lowering, the float reference and the backend all call
 * model_params(); nothing else hard-codes a shape. */
#ifndef MPCSIM_MODEL_H
#define MPCSIM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/datadir.h"
#include "protocols/base/err.h"
#include "protocols/base/yschema.h"

typedef enum { FAM_GPT2, FAM_LLAMA } model_family;
typedef enum { ACT_GELU, ACT_SWIGLU } model_act;
typedef enum { NORM_LAYER, NORM_RMS } model_norm;
typedef enum { POS_LEARNED, POS_ROPE } model_pos;

typedef struct model_cfg {
    char name[64];
    int family; /* model_family */
    uint32_t n_layers;
    uint32_t dim; /* hidden size */
    uint32_t n_heads;
    uint32_t n_kv_heads; /* GQA: n_heads / n_kv_heads query heads share a KV head */
    uint32_t head_dim;
    uint32_t ffn_dim;
    uint32_t vocab;
    uint32_t max_ctx;
    int act;  /* model_act */
    int norm; /* model_norm */
    int pos;  /* model_pos */
    double norm_eps;
    double rope_theta;
    double rope_scale;   /* linear RoPE position scaling (condensing ratio); 1 = none */
    int tied_embeddings; /* LM head = token embedding table */
    char weights[256];   /* llama2.c checkpoint, relative to the model file's folder, or "" */
    char tokenizer[256]; /* llama2.c tokenizer, or "" */
} model_cfg;

/* One parameter tensor of a model. Layer-stacked tensors have n_layers > 0 and rows×cols per
 * layer. */
typedef struct model_param {
    const char *name;    /* "wq", "w1", "tok_emb", … */
    uint32_t n_layers;   /* 0 for a global tensor */
    uint32_t rows, cols; /* y = W·x: rows = out, cols = in */
} model_param;

#define MODEL_MAX_PARAMS 24

/* Fills out[] with the parameter tensors of cfg (in checkpoint order for llama2.c models) and
 * returns their count. */
size_t model_params(const model_cfg *cfg, model_param out[MODEL_MAX_PARAMS]);
uint64_t model_param_count(const model_cfg *cfg);

/* Loads a model by name (models/<name>.yaml under the data dir) or by path to a YAML file.
 * Errors are "file:line:col: error: …". */
int model_load(const char *name_or_path, model_cfg *cfg, errbuf *e);
/* The keys of a model description (file or inline), for readers and `mpcsim list keys`. */
const ys_schema *model_schema(void);
/* Reads a model mapping: a model file's root or a scenario's inline model (extra[]: the
 * caller's own keys, e.g. 'base', accepted and skipped). Without a base, every form resolves
 * the same way: the schema's defaults, then the family's activation, norm, positional and
 * tied_embeddings for the keys not given, kv_heads = heads and head_dim = dim / heads when not
 * given. With a base, the base's values stay and the given keys replace them. Errors are
 * "file:line:col: error: …"; the result still wants model_check(). */
int model_read(const ys_ctx *x, const yx_node *m, const model_cfg *base, const char *const *extra,
               size_t n_extra, model_cfg *cfg);
/* Defaults for the optional keys (eps, theta, scale …); required keys zero. */
void model_cfg_init(model_cfg *cfg);
/* Validates a config (from a file or inline in a scenario). */
int model_check(const model_cfg *cfg, errbuf *e);
/* The part of model_check on products of the keys (also for models made outside a file, e.g.
 * from a checkpoint's header): heads × head_dim below 2^32, weights and a full-context KV
 * cache below MODEL_MAX_ELEMS values, each product overflow-checked. */
#define MODEL_MAX_ELEMS (1ull << 50) /* ~1.1e15: 2700 times a 405B model's weights */
int model_check_sizes(const model_cfg *cfg, errbuf *e);
/* Names of the shipped models (models/NAME.yaml), for `mpcsim list models`. */
int model_list(char names[][64], size_t max, size_t *n);
/* Resolves cfg->weights / cfg->tokenizer (relative to the models/ folder) to a path. */
int model_file_path(const char *rel, char *out, size_t cap);

#endif
