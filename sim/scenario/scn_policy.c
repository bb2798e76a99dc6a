/* scn_policy.c — a run's trace and policy keys, and the checks of what the run will need.
 * Part of the scenario reader (scn.c; shared declarations in scn_int.h). */
#include "scn_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>

#include "sim/policy/policy.h"
#include "sim/policy/plugin.h"
#include "sim/policy/compose.h"
#include "sim/policy/masks.h"
#include "sim/replay/replay.h"
#include "sim/trace/trace.h"
#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"

/* ---- trace ------------------------------------------------------------------------------- */

static const char *const trace_sources[] = {"none", "record", "synth", "npy", NULL};
enum { TS_NONE, TS_RECORD, TS_SYNTH, TS_NPY };

/* The trace mapping; 'source' is read into an int, the paths and parameters below. */
static const ys_field trace_fields[] = {
    {"source", YS_ENUM, 0, sizeof(int), 0, 0, "none",
     "where attention and keys come from: none, record (the model reads a text), synth "
     "(generated), npy (an exported trace)",
     trace_sources, 0, NULL, NULL},
    {"text", YS_OTHER, YS_NONE, 0, 0, NULL, "record: the text file the model reads", NULL, 0, NULL,
     "path"},
    {"path", YS_OTHER, YS_NONE, 0, 0, NULL, "npy: the trace's folder", NULL, 0, NULL, "path"},
    {"params", YS_OTHER, YS_NONE, 0, 0, NULL,
     "synth: generator parameters ('mpcsim list keys synth')", NULL, 0, NULL, "mapping"},
};
static const ys_schema trace_schema = YS_SCHEMA("trace", trace_fields, "scenarios/README.md");

const ys_schema *scn_trace_schema(void) { return &trace_schema; }

static int read_free_params(scn_ctx *x, const yx_node *v, const char *where, kv_param *kv,
                            size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < v->n; i++) {
        const yx_node *k = v->key[i], *val = v->item[i];
        int rc = need_scalar(x, val, k->str, "a value");
        if (rc)
            return rc;
        if (*n == RUN_MAX_PARAMS)
            return fail(x, k, "use fewer parameters", "more than %d parameters in '%s'",
                        RUN_MAX_PARAMS, where);
        if (strlen(k->str) >= sizeof kv->key)
            return fail(x, k, "use a shorter name", "parameter name longer than %zu characters",
                        sizeof kv->key - 1);
        if (strlen(val->str) >= sizeof kv->val)
            return fail(x, val, "use a shorter value", "value longer than %zu characters",
                        sizeof kv->val - 1);
        kv_param *p = &kv[(*n)++];
        snprintf(p->key, sizeof p->key, "%s", k->str);
        norm_value(val, p->val, sizeof p->val);
        p->line = k->line;
        p->col = k->col;
    }
    return MS_OK;
}

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const kv_param *)a)->key, ((const kv_param *)b)->key);
}

int read_trace(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    snprintf(c->trace.source, sizeof c->trace.source, "none");
    if (!v)
        return MS_OK;
    int s = TS_NONE;
    int rc = need_map(x, v, "trace", "write e.g. trace: {source: synth, params: {sinks: 4}}");
    if (!rc)
        rc = ys_read(&x->y, v, &trace_schema, NULL, 0, &s);
    if (rc)
        return rc;
    const yx_node *src = yx_map_get(v, "source"), *text = yx_map_get(v, "text"),
                  *path = yx_map_get(v, "path"), *params = yx_map_get(v, "params");
    snprintf(c->trace.source, sizeof c->trace.source, "%s", trace_sources[s]);
    const yx_node *file = s == TS_RECORD ? text : s == TS_NPY ? path : NULL;
    const yx_node *stray = s != TS_RECORD && text ? text : s != TS_NPY && path ? path : NULL;
    if (stray)
        return fail(x, stray, "'text' goes with source: record, 'path' with source: npy",
                    "'%s' does not apply to trace source '%s'", stray == text ? "text" : "path",
                    trace_sources[s]);
    if ((s == TS_RECORD || s == TS_NPY) && !file)
        return fail(x, v,
                    s == TS_RECORD ? "add 'text: FILE' (the text the model reads)"
                                   : "add 'path: DIR' (a trace exported as .npy files)",
                    "missing required key '%s' in 'trace' (source %s)",
                    s == TS_RECORD ? "text" : "path", trace_sources[s]);
    if (s == TS_RECORD && !c->model.weights[0])
        return fail(x, src,
                    "record needs a model with weights (stories260K); use source: synth "
                    "for the others",
                    "trace source 'record' needs model weights, and model '%s' has none",
                    c->model.name);
    if (file && ((rc = need_scalar(x, file, s == TS_RECORD ? "text" : "path", "a path")) ||
                 (rc = resolve_path(x, file, file == text ? "text" : "path", c->trace.path,
                                    sizeof c->trace.path))))
        return rc;
    if (params) {
        if (s != TS_SYNTH)
            return fail(x, params, "'params' goes with source: synth",
                        "'params' does not apply to trace source '%s'", trace_sources[s]);
        if ((rc = need_map(x, params, "params", "write e.g. params: {sinks: 4, window: 64}")) ||
            (rc = read_free_params(x, params, "trace.params", c->trace.params, &c->trace.n_params)))
            return rc;
        qsort(c->trace.params, c->trace.n_params, sizeof *c->trace.params, kv_cmp);
    }
    return MS_OK;
}

/* ---- policy ------------------------------------------------------------------------------ */

static int policy_by_name(scn_ctx *x, const yx_node *v, const policy_ops **out)
{
    int rc = need_scalar(x, v, "name", "a policy name");
    if (rc)
        return rc;
    if ((*out = policy_find(v->str)))
        return MS_OK;
    size_t n;
    const policy_ops *const *all = policy_all(&n);
    const char *cands[64];
    char hint[512];
    n = n < 64 ? n : 64;
    for (size_t i = 0; i < n; i++)
        cands[i] = policy_name(all[i]);
    hint_names(hint, sizeof hint, "policies:", cands, n);
    return unknown_name(x, v, "policy", v->str, cands, n, hint);
}

/* {plugin: PATH.so}: the shared object at PATH (relative to the scenario file), loaded once per
 * process (sim/policy/plugin.h); the run names the policy the plug-in declares. */
static int policy_by_plugin(scn_ctx *x, const yx_node *v, const policy_ops **out)
{
    char path[1024];
    errbuf le;
    int rc = need_scalar(x, v, "plugin", "a shared object, e.g. plugins/keynorm.so");
    if (!rc)
        rc = resolve_path(x, v, "plugin", path, sizeof path);
    if (!rc && policy_plugin_load(path, out, &le))
        rc = fail(x, v,
                  strstr(le.msg, "hint: ") ? NULL
                                           : "build it with `make plugins` (POLICIES.md, "
                                             "\"Writing a policy\")",
                  "%s", le.msg);
    return rc;
}

/* {compose: FILE.yaml}: the composition at FILE (relative to the scenario file), read once per
 * process (sim/policy/compose.h); its errors keep their file:line:col in FILE. */
static int policy_by_compose(scn_ctx *x, const yx_node *v, const policy_ops **out)
{
    char path[1024];
    errbuf le;
    int rc = need_scalar(x, v, "compose", "a composition file, e.g. policies/h2o.yaml");
    if (!rc)
        rc = resolve_path(x, v, "compose", path, sizeof path);
    if (!rc && policy_compose_load(path, out, &le))
        rc = strstr(le.msg, ": error: ") ? err_set(x->e, MS_ERR_INPUT, "%s", le.msg)
                                         : fail(x, v,
                                                "write the blocks as POLICIES.md \"Composing a "
                                                "policy\" says",
                                                "%s", le.msg);
    return rc;
}

/* Appends declared parameters to the run, each as given or else its default (the replay's
 * keys, pol non-NULL: that policy's default for them, policy_replay_default). */
static int fill_declared(scn_ctx *x, const policy_param *pp, size_t n, const kv_param *given,
                         size_t n_given, const policy_ops *pol, run_cfg *c)
{
    for (size_t i = 0; i < n; i++) {
        if (c->policy.n_params == RUN_MAX_PARAMS)
            return err_set(x->e, MS_ERR_INTERNAL, "policy '%s' has more than %d parameters",
                           c->policy.name, RUN_MAX_PARAMS);
        kv_param *o = &c->policy.params[c->policy.n_params++];
        memset(o, 0, sizeof *o);
        snprintf(o->key, sizeof o->key, "%s", pp[i].key);
        const char *dv = pol ? policy_replay_default(pol, &pp[i]) : pp[i].def;
        yx_node def = {.kind = YX_SCALAR, .str = (char *)(dv ? dv : "")};
        norm_value(&def, o->val, sizeof o->val);
        for (size_t g = 0; g < n_given; g++)
            if (!strcmp(given[g].key, pp[i].key))
                *o = given[g];
    }
    return MS_OK;
}

/* The policy's parameters in declared order, then the replay's own (every policy takes them),
 * each as given or else its default, so that the canonical YAML names every value. */
static int fill_policy_params(scn_ctx *x, const policy_ops *p, const kv_param *given,
                              size_t n_given, run_cfg *c)
{
    size_t n, nr;
    const policy_param *pp = policy_params(p, &n), *rp = policy_replay_params(&nr);
    c->policy.n_params = 0;
    int rc = fill_declared(x, pp, n, given, n_given, NULL, c);
    if (!rc)
        rc = fill_declared(x, rp, nr, given, n_given, p, c);
    for (size_t g = 0; !rc && g < n_given; g++) { /* policy_check_params accepted it */
        size_t k = 0;
        while (k < c->policy.n_params && strcmp(given[g].key, c->policy.params[k].key))
            k++;
        if (k < c->policy.n_params)
            continue;
        if (c->policy.n_params == RUN_MAX_PARAMS) {
            yx_node at = {.kind = YX_SCALAR, .line = given[g].line, .col = given[g].col};
            return fail(x, &at, "use fewer parameters", "more than %d policy parameters",
                        RUN_MAX_PARAMS);
        }
        c->policy.params[c->policy.n_params++] = given[g];
    }
    return rc;
}

int read_policy(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    const policy_ops *p;
    kv_param given[RUN_MAX_PARAMS];
    size_t n_given = 0;
    int rc;
    if (!v) {
        static const yx_node full = {.kind = YX_SCALAR, .line = 1, .col = 1, .str = "full"};
        v = &full;
    }
    if (v->kind == YX_MAP) {
        const yx_node *name = yx_map_get(v, "name"), *plugin = yx_map_get(v, "plugin");
        const yx_node *compose = yx_map_get(v, "compose");
        static const char *const plugin_key[] = {"plugin"}, *const compose_key[] = {"compose"};
        if (name && plugin)
            return fail(x, plugin, "name the policy by one of them",
                        "a policy entry has 'name' or 'plugin', not both");
        if (compose && (name || plugin))
            return fail(x, compose, "name the policy by one of them",
                        "a policy entry has 'compose' or '%s', not both", name ? "name" : "plugin");
        if (!name && !plugin && !compose)
            return fail(x, v, "write e.g. - {name: h2o, heavy_ratio: 0.1}",
                        "missing required key 'name' in policy entry");
        if ((rc = plugin    ? policy_by_plugin(x, plugin, &p)
                  : compose ? policy_by_compose(x, compose, &p)
                            : policy_by_name(x, name, &p)))
            return rc;
        /* keys and values through the policy's schema; the text is kept (kv_param) */
        const ys_schema *ps = policy_schema(p);
        if ((rc = ys_check_keys(&x->y, v, ps, compose ? compose_key : plugin_key,
                                plugin || compose ? 1 : 0)))
            return rc;
        for (size_t i = 0; i < v->n; i++) {
            const ys_field *f = ys_find(ps, v->key[i]->str);
            char scratch[POLICY_VALUE_MAX] __attribute__((aligned(8)));
            if (f && f->type != YS_OTHER && (rc = ys_read_field(&x->y, v->item[i], f, scratch)))
                return rc;
        }
        yx_node rest = {.kind = YX_MAP, .line = v->line, .col = v->col};
        yx_node *keys[RUN_MAX_PARAMS + 1], *items[RUN_MAX_PARAMS + 1];
        rest.key = keys;
        rest.item = items;
        for (size_t i = 0; i < v->n; i++) {
            if (!strcmp(v->key[i]->str, "name") || !strcmp(v->key[i]->str, "plugin") ||
                !strcmp(v->key[i]->str, "compose"))
                continue;
            if (rest.n == RUN_MAX_PARAMS)
                return fail(x, v->key[i], "use fewer parameters",
                            "more than %d parameters in policy entry", RUN_MAX_PARAMS);
            keys[rest.n] = v->key[i];
            items[rest.n++] = v->item[i];
        }
        if ((rc = read_free_params(x, &rest, "policy", given, &n_given)))
            return rc;
    } else if ((rc = policy_by_name(x, v, &p))) {
        return rc;
    }
    /* the rules between its parameters (kv_budget's, the policy's check hook) */
    if ((rc = policy_check(p, given, n_given, x->path, x->e)))
        return rc;
    snprintf(c->policy.name, sizeof c->policy.name, "%s", policy_name(p));
    return fill_policy_params(x, p, given, n_given, c);
}

/* ---- what the run will need --------------------------------------------------------------
 * Checked while loading, so that a run that would fail writes nothing: a trace for a policy that
 * reads one, synthetic-trace parameters in range, and a trace as long as prompt + decode. */

static const yx_node *policy_node(const yx_node *r)
{
    const yx_node *p = yx_map_get(r, "policies");
    const yx_node *name = p && p->kind == YX_MAP ? yx_map_get(p, "name") : NULL;
    return name ? name : p ? p : r;
}

static int check_trace_length(scn_ctx *x, const yx_node *at, const run_cfg *c, uint32_t have,
                              const char *what)
{
    uint32_t need = c->work.prompt_len + c->work.decode_len;
    if (have >= need)
        return MS_OK;
    return fail(x, at, "shorten the workload, or give a longer trace",
                "%s gives %u positions, and the run needs prompt_len + decode_len = %u + %u", what,
                have, c->work.prompt_len, c->work.decode_len);
}

/* replay_masks: no parameter of another policy than its cost_as, and keep.npy beside the npy
 * trace, of the model's shape and long enough (sim/policy/masks.h). */
static int check_masks(scn_ctx *x, const yx_node *r, const run_cfg *c)
{
    errbuf me;
    uint64_t T, off;
    char path[1100];
    if (masks_check_params(c->policy.params, c->policy.n_params, x->path, &me))
        return err_set(x->e, MS_ERR_INPUT, "%s", me.msg);
    if (masks_open(strcmp(c->trace.source, "npy") ? NULL : c->trace.path, c->model.n_layers,
                   c->model.n_kv_heads, c->work.prompt_len + c->work.decode_len, NULL, &T, &off,
                   path, sizeof path, &me))
        return fail_wrap(x, policy_node(r), NULL, "", me.msg);
    return MS_OK;
}

/* The policy's own rules against this run's shapes and workload (its init, as the replay makes
 * it: a budget smaller than the window it keeps at this prompt length), at load rather than as
 * a failed run. The message keeps the parameter's file:line:col when the policy gives one. */
static int check_policy_init(scn_ctx *x, const yx_node *r, const run_cfg *c)
{
    replay_work w;
    errbuf pe;
    if (!replay_estimate(c, &w, &pe))
        return MS_OK;
    size_t pl = strlen(x->path);
    if (!strncmp(pe.msg, x->path, pl) && pe.msg[pl] == ':' && pe.msg[pl + 1] >= '0' &&
        pe.msg[pl + 1] <= '9')
        return err_set(x->e, MS_ERR_INPUT, "%s", pe.msg);
    return fail_wrap(x, policy_node(r), NULL, "", pe.msg);
}

static int check_run_trace(scn_ctx *x, const yx_node *r, const run_cfg *c);

int check_run_needs(scn_ctx *x, const yx_node *r, const run_cfg *c)
{
    int rc = check_run_trace(x, r, c);
    return rc ? rc : check_policy_init(x, r, c);
}

static int check_run_trace(scn_ctx *x, const yx_node *r, const run_cfg *c)
{
    const policy_ops *p = policy_find(c->policy.name);
    if (p == &policy_replay_masks) {
        int rc = check_masks(x, r, c);
        if (rc)
            return rc;
    }
    const yx_node *tv = yx_map_get(r, "trace");
    const char *src = c->trace.source;
    errbuf te;
    if (!strcmp(src, "none"))
        return p && p->observe
                   ? fail(x, policy_node(r), "add e.g. 'trace: {source: synth}' (or record, npy)",
                          "policy '%s' reads attention or keys and needs a trace, and this run "
                          "has none",
                          c->policy.name)
                   : MS_OK;
    if (!strcmp(src, "synth")) {
        trace_synth sp;
        trace_synth_defaults_for(&sp, c->model.family);
        if (trace_synth_from_kv(&sp, c->trace.params, c->trace.n_params, x->path, &te))
            return err_set(x->e, MS_ERR_INPUT, "%s", te.msg);
        if (c->model.head_dim < 2)
            return fail(x, yx_map_get(tv, "source"), "use a model with head_dim >= 2",
                        "a synthetic trace needs head_dim >= 2 (model '%s' has %u)", c->model.name,
                        c->model.head_dim);
        return MS_OK; /* generated as long as the run needs */
    }
    const yx_node *at = yx_map_get(tv, !strcmp(src, "npy") ? "path" : "text");
    uint32_t have = 0;
    char what[600];
    if (!strcmp(src, "npy")) {
        trace *t;
        if (trace_open(c->trace.path, &t, &te))
            return fail_wrap(x, at, "regenerate the trace, or point 'path' at another one",
                             "cannot open the trace: ", te.msg);
        have = trace_get_shape(t)->n_tokens;
        trace_close(t);
        snprintf(what, sizeof what, "trace '%.500s'", at->str);
    } else { /* record: the text's tokens, BOS included */
        uint32_t cap = c->work.prompt_len + c->work.decode_len;
        if (trace_count_tokens(&c->model, c->trace.path, cap, &have, &te))
            return fail_wrap(x, at, "give a text file the model's tokenizer reads",
                             "cannot read the text: ", te.msg);
        snprintf(what, sizeof what, "text '%.500s' (model '%s')", at->str, c->model.name);
    }
    return check_trace_length(x, at, c, have, what);
}
