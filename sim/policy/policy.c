/* policy.c — the policy registry, parameter validation and the helpers policies share
 * (argument parsing, deterministic top-k, op emission). */
#include "policy.h"
#include "plugin.h"
#include "compose.h"
#include "protocols/base/simd.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- registry ------------------------------------------------------------------------- */

static const policy_ops *const registry[] = {
    &policy_full,  &policy_streamingllm, &policy_h2o,     &policy_snapkv,     &policy_pyramidkv,
    &policy_quest, &policy_tova,         &policy_mpcache, &policy_criticalkv, &policy_comet,
};
#define N_REGISTRY (sizeof registry / sizeof registry[0])
/* Found by name and listed, but left out of policy_all: policies that run only on a file their
 * scenario points at (policy.h). */
static const policy_ops *const unlisted[] = {&policy_replay_masks};
#define N_UNLISTED (sizeof unlisted / sizeof unlisted[0])

/* Keys every policy reads itself (policy_kv_budget). No default: absent, the policy's own
 * budget parameters apply. */
static const policy_param common_params[] = {
    {"kv_budget", NULL,
     "fraction F of the cached entries a decode step attends (0 < F <= 1, sinks and windows "
     "included), mapped to the policy's own budget (sim/policy/POLICIES.md \"kv_budget\")",
     NULL, 0, 1, 0},
};
#define N_COMMON (sizeof common_params / sizeof common_params[0])

/* Keys the replay reads for every policy (sim/replay/replay.c). */
static const policy_param replay_params[] = {
    {"metric_stride", "16",
     "attention metrics every k-th decode step, counted from the first (1: every step, 0: "
     "none, for cost-only sweeps); one default for every policy, so that the policies of a "
     "sweep are measured on the same decode steps",
     NULL, 0, 1e9, 1},
    {"err_kv_heads", "4",
     "KV heads per layer whose output error is measured at a measured step (rotating); the "
     "values of every cached entry are read for each",
     NULL, 1, 1e6, 1},
    {"prompt_rows", "0",
     "prompt attention rows a policy reads: the last N (0: all, exact). A synthetic trace "
     "computes each row from every key, so long prompts need a cap for h2o and mpcache",
     NULL, 0, 1e9, 1},
    {"recall_k", "10", "k of the top-k recall metric (Quest Fig. 4 uses 10)", NULL, 1, 1e6, 1},
    {"live", "1",
     "1: for a model with weights, also run it with the policy applied (logit KL, top-1, "
     "perplexity)",
     NULL, 0, 1, 0},
};

const policy_ops *policy_find(const char *name)
{
    for (size_t i = 0; i < N_REGISTRY; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    for (size_t i = 0; i < N_UNLISTED; i++)
        if (strcmp(unlisted[i]->name, name) == 0)
            return unlisted[i];
    const policy_ops *c = policy_compose_find(name);
    return c ? c : policy_plugin_find(name);
}

const policy_ops *const *policy_all(size_t *n)
{
    *n = N_REGISTRY;
    return registry;
}

const char *policy_name(const policy_ops *p) { return p->name; }
const char *policy_summary(const policy_ops *p) { return p->summary; }

const policy_param *policy_params(const policy_ops *p, size_t *n)
{
    *n = p->n_params;
    return p->params;
}

const policy_param *policy_common_params(size_t *n)
{
    *n = N_COMMON;
    return common_params;
}

const policy_param *policy_replay_params(size_t *n)
{
    *n = sizeof replay_params / sizeof replay_params[0];
    return replay_params;
}

const char *policy_replay_default(const policy_ops *p, const policy_param *rp)
{
    if (p && p->metric_stride && !strcmp(rp->key, "metric_stride"))
        return p->metric_stride;
    return rp->def;
}

static const policy_param *find_param(const policy_ops *p, const char *key)
{
    for (size_t i = 0; i < p->n_params; i++)
        if (strcmp(p->params[i].key, key) == 0)
            return &p->params[i];
    for (size_t i = 0; i < N_COMMON; i++)
        if (strcmp(common_params[i].key, key) == 0)
            return &common_params[i];
    for (size_t i = 0; i < sizeof replay_params / sizeof replay_params[0]; i++)
        if (strcmp(replay_params[i].key, key) == 0)
            return &replay_params[i];
    return NULL;
}

/* ---- schema tables -----------------------------------------------------------------------
 * Each policy's parameter table (its policy_param rows, the common ones, then the replay's) as a
 * field schema (protocols/base/yschema.h), built once: what a scenario's policy entry is read with,
 * what `mpcsim list keys policy` prints, and where run labels find the defaults. Numbers are YS_DBL
 * over [lo, hi]; words are YS_STR limited to their choices. Every field stores at offset 0 of a
 * scratch value: the scenario keeps the text (kv_param), the policy parses it. */

#define SCHEMA_MAX_FIELDS 64
#define SCHEMA_MAX_CHOICES 8
/* built-ins, then plug-ins, then compositions */
#define N_SCHEMAS (N_REGISTRY + N_UNLISTED + POLICY_PLUGIN_MAX + POLICY_COMPOSE_MAX)

static struct {
    ys_field field[N_SCHEMAS][SCHEMA_MAX_FIELDS];
    ys_schema schema[N_SCHEMAS];
    char name[N_SCHEMAS][48];
    char choice_text[N_SCHEMAS][SCHEMA_MAX_FIELDS][128];
    const char *choice[N_SCHEMAS][SCHEMA_MAX_FIELDS][SCHEMA_MAX_CHOICES + 1];
    int built[POLICY_PLUGIN_MAX + POLICY_COMPOSE_MAX]; /* a plug-in's schema, built on first use */
} schemas;
static pthread_once_t schemas_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t schemas_mu = PTHREAD_MUTEX_INITIALIZER;

static void param_field(size_t r, size_t i, const policy_param *pp)
{
    ys_field *f = &schemas.field[r][i];
    *f = (ys_field){.key = pp->key,
                    .type = YS_DBL,
                    .off = 0,
                    .size = POLICY_VALUE_MAX,
                    .lo = pp->lo,
                    .hi = pp->hi,
                    .def = pp->def,
                    .doc = pp->help,
                    .flags = pp->whole ? YS_WHOLE : 0};
    if (!pp->choices)
        return;
    /* "a|b|c" → {"a", "b", "c", NULL} */
    char *t = schemas.choice_text[r][i];
    snprintf(t, sizeof schemas.choice_text[r][i], "%s", pp->choices);
    size_t n = 0;
    for (char *c = t; c && n < SCHEMA_MAX_CHOICES; n++) {
        schemas.choice[r][i][n] = c;
        if ((c = strchr(c, '|')))
            *c++ = '\0';
    }
    schemas.choice[r][i][n] = NULL;
    f->type = YS_STR;
    f->lo = f->hi = 0;
    f->names = schemas.choice[r][i];
}

static void build_schema(size_t r, const policy_ops *p)
{
    const size_t nr = sizeof replay_params / sizeof replay_params[0];
    size_t n = 0;
    schemas.field[r][n++] = (ys_field){.key = "name",
                                       .type = YS_OTHER,
                                       .doc = p->summary,
                                       .flags = YS_REQ,
                                       .type_doc = "policy name"};
    for (size_t i = 0; i < p->n_params && n < SCHEMA_MAX_FIELDS; i++, n++)
        param_field(r, n, &p->params[i]);
    for (size_t i = 0; i < N_COMMON && n < SCHEMA_MAX_FIELDS; i++, n++)
        param_field(r, n, &common_params[i]);
    for (size_t i = 0; i < nr && n < SCHEMA_MAX_FIELDS; i++, n++) {
        param_field(r, n, &replay_params[i]);
        schemas.field[r][n].def = policy_replay_default(p, &replay_params[i]);
    }
    snprintf(schemas.name[r], sizeof schemas.name[r], "policy %s", p->name);
    schemas.schema[r] = (ys_schema){schemas.name[r], schemas.field[r], n, "sim/policy/POLICIES.md"};
}

static void build_schemas(void)
{
    for (size_t r = 0; r < N_REGISTRY; r++)
        build_schema(r, registry[r]);
    for (size_t r = 0; r < N_UNLISTED; r++)
        build_schema(N_REGISTRY + r, unlisted[r]);
}

const ys_schema *policy_schema(const policy_ops *p)
{
    pthread_once(&schemas_once, build_schemas);
    for (size_t r = 0; r < N_REGISTRY; r++)
        if (registry[r] == p)
            return &schemas.schema[r];
    for (size_t r = 0; r < N_UNLISTED; r++)
        if (unlisted[r] == p)
            return &schemas.schema[N_REGISTRY + r];
    int s = policy_plugin_slot(p);
    if (s < 0 && (s = policy_compose_slot(p)) >= 0)
        s += POLICY_PLUGIN_MAX;
    if (s < 0)
        return NULL;
    pthread_mutex_lock(&schemas_mu);
    if (!schemas.built[s]) {
        build_schema(N_REGISTRY + N_UNLISTED + (size_t)s, p);
        schemas.built[s] = 1;
    }
    pthread_mutex_unlock(&schemas_mu);
    return &schemas.schema[N_REGISTRY + N_UNLISTED + (size_t)s];
}

/* ---- value checks --------------------------------------------------------------------- */

static int choice_index(const char *choices, const char *val)
{
    size_t len = strlen(val);
    int idx = 0;
    for (const char *c = choices; *c;) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && strncmp(c, val, n) == 0)
            return idx;
        idx++;
        c += n + (bar ? 1 : 0);
    }
    return -1;
}

/* Where a message about kv starts: "file:line:col: error: " for a scenario's parameter, or
 * "--option key=value: " for one given on the command line (line 0; path is then the option,
 * and the command's own "error:" comes before it). */
static int where_prefix(char *buf, size_t cap, const char *path, const kv_param *kv)
{
    if (kv && kv->line <= 0)
        return snprintf(buf, cap, "%s %s=%s: ", path ? path : "<command line>", kv->key, kv->val);
    if (kv)
        return snprintf(buf, cap, "%s:%d:%d: error: ", path ? path : "<scenario>", kv->line,
                        kv->col);
    return snprintf(buf, cap, "%s", path ? path : "<scenario>");
}

/* Checks one value against its parameter; sets *out (number) or *idx (choice). */
static int check_value(const policy_ops *p, const policy_param *pp, const char *val,
                       const kv_param *kv, const char *path, double *out, int *idx, errbuf *e)
{
    char at[600];
    where_prefix(at, sizeof at, path, kv);
    if (pp->choices) {
        int i = choice_index(pp->choices, val);
        if (i < 0)
            return err_set(e, MS_ERR_INPUT,
                           "%sbad value '%s' for policy %s parameter '%s'\n"
                           "  hint: one of %s",
                           at, val, p->name, pp->key, pp->choices);
        if (idx)
            *idx = i;
        return MS_OK;
    }
    double d;
    if (parse_double(val, &d) != 0 || !isfinite(d))
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy %s parameter '%s' wants a number, got '%s'\n"
                       "  hint: default is %s (%s)",
                       at, p->name, pp->key, val, pp->def, pp->help);
    if (d < pp->lo || d > pp->hi)
        return err_set(e, MS_ERR_RANGE,
                       "%spolicy %s parameter '%s' = %g is out of range [%g, %g]\n"
                       "  hint: %s",
                       at, p->name, pp->key, d, pp->lo, pp->hi, pp->help);
    if (pp->whole && d != floor(d))
        return err_set(e, MS_ERR_INPUT, "%spolicy %s parameter '%s' wants a whole number, got '%s'",
                       at, p->name, pp->key, val);
    if (out)
        *out = d;
    return MS_OK;
}

int policy_check_params(const policy_ops *p, const kv_param *kv, size_t n, const char *path,
                        errbuf *e)
{
    for (size_t i = 0; i < n; i++) {
        const policy_param *pp = find_param(p, kv[i].key);
        if (!pp) {
            const char *cands[64];
            size_t nc = 0;
            for (size_t j = 0; j < p->n_params && nc < 56; j++)
                cands[nc++] = p->params[j].key;
            for (size_t j = 0; j < N_COMMON; j++)
                cands[nc++] = common_params[j].key;
            for (size_t j = 0; j < sizeof replay_params / sizeof replay_params[0]; j++)
                cands[nc++] = replay_params[j].key;
            const char *dym = did_you_mean(kv[i].key, cands, nc);
            char at[600];
            where_prefix(at, sizeof at, path, &kv[i]);
            if (dym)
                return err_set(e, MS_ERR_INPUT,
                               "%sunknown parameter '%s' for policy %s (did you mean "
                               "'%s'?)",
                               at, kv[i].key, p->name, dym);
            return err_set(e, MS_ERR_INPUT,
                           "%sunknown parameter '%s' for policy %s\n"
                           "  hint: `mpcsim list policies` shows each policy's parameters",
                           at, kv[i].key, p->name);
        }
        int rc = check_value(p, pp, kv[i].val, &kv[i], path, NULL, NULL, e);
        if (rc)
            return rc;
    }
    return policy_check(p, kv, n, path, e);
}

/* ---- loaded arguments ------------------------------------------------------------------ */

/* The text of key among kv[0..n) (the last one written wins), else the default of pp. */
static const char *arg_text(const policy_ops *p, const kv_param *kv, size_t n,
                            const policy_param *pp, const char *key, const kv_param **where)
{
    if (where)
        *where = NULL;
    for (size_t i = n; i-- > 0;)
        if (strcmp(kv[i].key, key) == 0) {
            if (where)
                *where = &kv[i];
            return kv[i].val;
        }
    size_t nr = sizeof replay_params / sizeof replay_params[0];
    if (pp && pp >= replay_params && pp < replay_params + nr)
        return policy_replay_default(p, pp);
    return pp ? pp->def : NULL;
}

int policy_args_load(const policy_ops *p, const kv_param *kv, size_t n, const char *path,
                     policy_args *a, errbuf *e)
{
    memset(a, 0, sizeof *a);
    a->kv = kv;
    a->n = n;
    a->path = path;
    int rc = policy_check_params(p, kv, n, path, e);
    if (rc)
        return rc;
    size_t nr = sizeof replay_params / sizeof replay_params[0];
    if (p->n_params + nr > POLICY_MAX_VALUES)
        return MS_OK; /* not loaded: the accessors parse the text */
    for (size_t i = 0; i < p->n_params + nr; i++) {
        const policy_param *pp = i < p->n_params ? &p->params[i] : &replay_params[i - p->n_params];
        policy_value *v = &a->val[i];
        v->param = pp;
        v->text = arg_text(p, kv, n, pp, pp->key, &v->given);
        errbuf ve;
        /* a value that does not parse (only a default can: a given one was checked above) is
         * reported by the accessor that reads it, as before loading */
        v->ok = v->text &&
                check_value(p, pp, v->text, v->given, path, &v->num, &v->choice, &ve) == MS_OK;
    }
    a->n_val = p->n_params + nr;
    a->loaded = p;
    return MS_OK;
}

/* The loaded value of key, or NULL when a was not loaded for p. */
static const policy_value *loaded_value(const policy_ops *p, const policy_args *a, const char *key)
{
    if (!a || a->loaded != p)
        return NULL;
    for (size_t i = 0; i < a->n_val; i++)
        if (strcmp(a->val[i].param->key, key) == 0)
            return &a->val[i];
    return NULL;
}

/* ---- argument helpers ----------------------------------------------------------------- */

const char *policy_arg(const policy_ops *p, const policy_args *a, const char *key,
                       const kv_param **where)
{
    const policy_value *v = loaded_value(p, a, key);
    if (v) {
        if (where)
            *where = v->given;
        return v->text;
    }
    return arg_text(p, a ? a->kv : NULL, a ? a->n : 0, find_param(p, key), key, where);
}

int policy_arg_double(const policy_ops *p, const policy_args *a, const char *key, double *out,
                      errbuf *e)
{
    const policy_param *pp = find_param(p, key);
    if (!pp || pp->choices)
        return err_set(e, MS_ERR_INTERNAL, "policy %s has no numeric parameter '%s'", p->name, key);
    const policy_value *v = loaded_value(p, a, key);
    if (v && v->ok) {
        *out = v->num;
        return MS_OK;
    }
    const kv_param *kv;
    const char *val = policy_arg(p, a, key, &kv);
    return check_value(p, pp, val, kv, a ? a->path : NULL, out, NULL, e);
}

int policy_arg_u32(const policy_ops *p, const policy_args *a, const char *key, uint32_t *out,
                   errbuf *e)
{
    double d;
    int rc = policy_arg_double(p, a, key, &d, e);
    if (rc)
        return rc;
    if (d != floor(d) || d < 0 || d > 4294967295.0) {
        const kv_param *kv;
        const char *val = policy_arg(p, a, key, &kv);
        char at[600];
        where_prefix(at, sizeof at, a ? a->path : NULL, kv);
        return err_set(e, MS_ERR_INPUT, "%spolicy %s parameter '%s' wants a whole number, got '%s'",
                       at, p->name, key, val);
    }
    *out = (uint32_t)d;
    return MS_OK;
}

int policy_arg_choice(const policy_ops *p, const policy_args *a, const char *key, int *out,
                      errbuf *e)
{
    const policy_param *pp = find_param(p, key);
    if (!pp || !pp->choices)
        return err_set(e, MS_ERR_INTERNAL, "policy %s has no word parameter '%s'", p->name, key);
    const policy_value *v = loaded_value(p, a, key);
    if (v && v->ok) {
        *out = v->choice;
        return MS_OK;
    }
    const kv_param *kv;
    const char *val = policy_arg(p, a, key, &kv);
    return check_value(p, pp, val, kv, a ? a->path : NULL, NULL, out, e);
}

/* ---- top-k ------------------------------------------------------------------------------ */

/* Strict total order: a before b if its score is larger, or equal and its index smaller.
 * NaN scores rank last. */
static inline int before(const float *s, uint32_t a, uint32_t b)
{
    float x = s[a], y = s[b];
    if (isnan(x))
        x = -INFINITY;
    if (isnan(y))
        y = -INFINITY;
    return x > y || (x == y && a < b);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void policy_add_row(float *acc, const float *row, uint32_t n)
{
    uint32_t j = 0;
    for (; j + 4 <= n; j += 4) {
        v4f a, b;
        memcpy(&a, acc + j, sizeof a);
        memcpy(&b, row + j, sizeof b);
        a += b;
        memcpy(acc + j, &a, sizeof a);
    }
    for (; j < n; j++)
        acc[j] += row[j];
}

void policy_add_row_d(double *acc, const float *row, uint32_t n)
{
    uint32_t j = 0;
    for (; j + 2 <= n; j += 2) {
        v2d a;
        memcpy(&a, acc + j, sizeof a);
        a += (v2d){row[j], row[j + 1]};
        memcpy(acc + j, &a, sizeof a);
    }
    for (; j < n; j++)
        acc[j] += row[j];
}

/* Quickselect (median of three, Hoare-style) so that w[0..k) hold the k first in `before`
 * order. Expected O(n). */
static void select_first_k(const float *s, uint32_t *w, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* the boundary k lies in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t a = w[lo], b = w[mid], c = w[hi - 1], piv;
        if (before(s, a, b))
            piv = before(s, b, c) ? b : (before(s, a, c) ? c : a);
        else
            piv = before(s, a, c) ? a : (before(s, b, c) ? c : b);
        /* three-way partition: [lo, i) before piv, [i, j) == piv, [j, hi) after */
        size_t i = lo, j = lo, t = hi;
        while (j < t) {
            if (w[j] == piv) {
                j++;
            } else if (before(s, w[j], piv)) {
                uint32_t tmp = w[i];
                w[i] = w[j];
                w[j] = tmp;
                i++;
                j++;
            } else {
                t--;
                uint32_t tmp = w[j];
                w[j] = w[t];
                w[t] = tmp;
            }
        }
        if (k <= i)
            hi = i;
        else if (k >= j)
            lo = j;
        else
            return;
    }
}

size_t policy_topk(const float *score, const uint32_t *cand, size_t n, size_t k, uint32_t *out,
                   uint32_t *work)
{
    if (k > n)
        k = n;
    for (size_t i = 0; i < n; i++)
        work[i] = cand ? cand[i] : (uint32_t)i;
    if (k > 0 && k < n)
        select_first_k(score, work, n, k);
    memcpy(out, work, k * sizeof *out);
    qsort(out, k, sizeof *out, cmp_u32);
    return k;
}

/* ---- op emission ------------------------------------------------------------------------ */

static uint64_t tensor_len(const op_program *p, uint32_t id)
{
    const op_tensor *t = &p->tens[id];
    return (uint64_t)t->batch * t->rows * t->cols;
}

/* An operand of exactly b·r·c elements: `id` if it has that size, else secret state of the
 * right size (the cost engines and the backend read operand sizes; the data flow between a
 * policy's ops is implicit: scores accumulated across steps, this step's rows). */
static uint32_t operand(policy_emitter *pe, uint32_t id, uint32_t b, uint32_t r, uint32_t c,
                        const char *tag, int slot)
{
    if (id != OP_NONE && id < pe->prog->n_tens && tensor_len(pe->prog, id) == (uint64_t)b * r * c)
        return id;
    char name[48];
    snprintf(name, sizeof name, "pol.%s.L%d.in%d", tag, pe->layer, slot);
    uint32_t t = opb_find_as(pe, name);
    if (t != OP_NONE && tensor_len(pe->prog, t) == (uint64_t)b * r * c)
        return t;
    return opb_tensor_as(pe, name, OPT_CACHE, b, r, c);
}

uint32_t policy_emit(policy_emitter *pe, int kind, uint32_t batch, uint32_t m, uint32_t k,
                     uint32_t n, uint32_t in0, uint32_t in1, uint32_t flags, int32_t iarg,
                     double farg, const char *tag)
{
    if (opb_failed(pe))
        return OP_NONE;
    uint32_t in[3] = {OP_NONE, OP_NONE, OP_NONE};
    if (op_kind_shape(kind) == OPS_MM) {
        /* left b×m×k, right b×k×n (n×k used transposed) (kern.c MATMUL/GATHER) */
        in[0] = operand(pe, in0, batch, m, k, tag, 0);
        in[1] = (flags & OPF_TRANS_B) ? operand(pe, in1, batch, n, k, tag, 1)
                                      : operand(pe, in1, batch, k, n, tag, 1);
    } else if (kind == OP_ONEHOT) {
        in[0] = operand(pe, in0, batch, m, 1, tag, 0); /* secret indices */
    } else {
        in[0] = operand(pe, in0, batch, m, n, tag, 0);
        int binary = kind == OP_ADD || kind == OP_SUB || kind == OP_MUL || kind == OP_LT ||
                     kind == OP_EQ || kind == OP_SELECT;
        if (binary && (flags & OPF_PUBLIC_B))
            in[1] = operand(pe, OP_NONE, 1, 1, 1, tag, 1); /* the threshold, broadcast */
        else if (binary)
            in[1] = operand(pe, in1, batch, m, n, tag, 1);
        if (kind == OP_SELECT)
            in[2] = operand(pe, OP_NONE, batch, m, n, tag, 2);
    }
    char name[48];
    snprintf(name, sizeof name, "pol.%s.L%d", tag, pe->layer);
    uint32_t rows = m, cols = n;
    if (kind == OP_TOPK)
        rows = m * (uint32_t)iarg; /* k one-hot rows of length n per input row */
    else if (kind == OP_MAX)
        cols = 1;
    uint32_t out = opb_tensor_as(pe, name, OPT_TEMP, batch, rows, cols);
    uint32_t fl = op_kind_shape(kind) == OPS_MM ? flags : flags & ~OPF_PUBLIC_B;
    return opb_op_cat(pe, OPC_POLICY, kind, batch, m, k, n, in[0], in[1], in[2], out, fl, iarg,
                      farg);
}

int policy_emit_done(const policy_emitter *pe, const char *policy, errbuf *e)
{
    if (opb_failed(pe))
        return err_set(e, MS_ERR_NOMEM, "policy %s: out of memory emitting its ops", policy);
    return MS_OK;
}

uint32_t policy_state_tensor(op_program *prog, const char *name, uint32_t batch, uint32_t rows,
                             uint32_t cols)
{
    uint32_t id = op_tensor_find(prog, name);
    if (id == OP_NONE)
        id = op_tensor_add(prog, name, OPT_CACHE, DOM_ARITH, batch, rows, cols);
    return id;
}

/* ---- half precision with directed rounding -------------------------------------------- */

/* x rounded toward zero to binary16 (NaN stays NaN; beyond the largest finite half, 65504). */
static uint16_t half_trunc(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    uint16_t sign = (uint16_t)(b >> 16 & 0x8000u);
    uint32_t ab = b & 0x7fffffffu;
    if (ab > 0x7f800000u)
        return sign | 0x7e00u;
    if (ab == 0x7f800000u)
        return sign | 0x7c00u;
    int e = (int)(ab >> 23) - 127;
    if (e >= 16)
        return sign | 0x7bffu;
    if (e >= -14)
        return sign | (uint16_t)((uint32_t)(e + 15) << 10 | (ab >> 13 & 0x3ffu));
    if (e >= -25) /* subnormal: units of 2^-24 */
        return sign | (uint16_t)(((ab & 0x7fffffu) | 0x800000u) >> (-(e + 1)));
    return sign;
}

/* Exact without libm: a normal half's exponent and mantissa moved into a float's fields; a
 * subnormal's m·2^-24 is one exact float product (m < 2^10). */
float policy_half_float(uint16_t h)
{
    uint32_t e = h >> 10 & 0x1fu, m = h & 0x3ffu;
    float v;
    if (e == 0) {
        v = (float)m * 0x1p-24f;
    } else if (e == 31) {
        v = m ? NAN : INFINITY;
    } else {
        uint32_t b = (e + 112u) << 23 | m << 13; /* bias 15 → 127 */
        memcpy(&v, &b, sizeof v);
    }
    return h & 0x8000u ? -v : v;
}

uint16_t policy_half_up(float x)
{
    uint16_t h = half_trunc(x);
    return x > 0 && policy_half_float(h) < x ? (uint16_t)(h + 1) : h; /* magnitude up */
}

uint16_t policy_half_down(float x)
{
    uint16_t h = half_trunc(x);
    return x < 0 && policy_half_float(h) > x ? (uint16_t)(h + 1) : h;
}

/* ---- vector kernels of the bound-keeping policies ----------------------------------------- */

int policy_portable_kernels;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define POLICY_X86 1
#include <immintrin.h>

__attribute__((target("avx,f16c"))) static int half_bounds_f16c(const float *mx, const float *mn,
                                                                uint32_t n, uint16_t *up,
                                                                uint16_t *dn)
{
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(mx + i), b = _mm256_loadu_ps(mn + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q)) ||
            _mm256_movemask_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q)) ||
            _mm256_movemask_ps(_mm256_cmp_ps(b, b, _CMP_UNORD_Q)))
            return 0;
        _mm_storeu_si128((__m128i *)(up + i),
                         _mm256_cvtps_ph(a, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC));
        _mm_storeu_si128((__m128i *)(dn + i),
                         _mm256_cvtps_ph(b, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) {
        up[i] = policy_half_up(mx[i]);
        dn[i] = policy_half_down(mn[i]);
    }
    return 1;
}
#endif

void policy_half_bounds(const float *mx, const float *mn, uint32_t n, uint16_t *up, uint16_t *dn)
{
#ifdef POLICY_X86
    if (!policy_portable_kernels && ms_cpu_has(MS_CPU_F16C) && half_bounds_f16c(mx, mn, n, up, dn))
        return;
#endif
    for (uint32_t i = 0; i < n; i++) {
        up[i] = policy_half_up(mx[i]);
        dn[i] = policy_half_down(mn[i]);
    }
}

/* The selects on W lanes: the same value per entry as the scalar ternary (NaN included). */
#define BOUNDS_BODY(V, VI, W)                    \
    uint32_t i = 0;                              \
    for (; i + (W) <= d; i += (W)) {             \
        V a, M, m;                               \
        memcpy(&a, k + i, sizeof a);             \
        memcpy(&M, mx + i, sizeof M);            \
        memcpy(&m, mn + i, sizeof m);            \
        VI upm = a > M, dnm = a < m;             \
        M = (V)(((VI)a & upm) | ((VI)M & ~upm)); \
        m = (V)(((VI)a & dnm) | ((VI)m & ~dnm)); \
        memcpy(mx + i, &M, sizeof M);            \
        memcpy(mn + i, &m, sizeof m);            \
    }                                            \
    for (; i < d; i++) {                         \
        mx[i] = k[i] > mx[i] ? k[i] : mx[i];     \
        mn[i] = k[i] < mn[i] ? k[i] : mn[i];     \
    }

static void bounds_portable(float *mx, float *mn, const float *k, uint32_t d)
{
    BOUNDS_BODY(v4f, v4i, 4)
}

#ifdef POLICY_X86
__attribute__((target("avx512f"))) static void bounds_wide(float *mx, float *mn, const float *k,
                                                           uint32_t d)
{
    BOUNDS_BODY(v16f, v16i, 16)
}
#endif

void policy_bounds_update(float *mx, float *mn, const float *k, uint32_t d)
{
#ifdef POLICY_X86
    if (!policy_portable_kernels && ms_cpu_has(MS_CPU_AVX512F)) {
        bounds_wide(mx, mn, k, d);
        return;
    }
#endif
    bounds_portable(mx, mn, k, d);
}

/* ---- rules between parameters -------------------------------------------------------- */

/* Two parameter values are equal when both are the same number, or the same text. */
static int same_value(const char *a, const char *b)
{
    double x, y;
    if (!parse_double(a, &x) && !parse_double(b, &y))
        return x == y;
    return !strcmp(a, b);
}

/* key is one of the '|'-separated words of list. */
static int key_in(const char *list, const char *key)
{
    size_t len = strlen(key);
    for (const char *c = list; c && *c;) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && !strncmp(c, key, n))
            return 1;
        c = bar ? bar + 1 : NULL;
    }
    return 0;
}

static const kv_param *given(const policy_args *a, const char *key)
{
    for (size_t i = a ? a->n : 0; i-- > 0;)
        if (!strcmp(a->kv[i].key, key))
            return &a->kv[i];
    return NULL;
}

const char *policy_at(const policy_args *a, const char *key, char *buf, size_t cap)
{
    const kv_param *kv = key ? given(a, key) : NULL;
    const char *path = a && a->path ? a->path : NULL;
    if (kv)
        where_prefix(buf, cap, path, kv);
    else
        snprintf(buf, cap, "%s: error: ", path ? path : "<scenario>");
    return buf;
}

int policy_kv_budget(const policy_ops *p, const policy_args *a, double *f, errbuf *e)
{
    *f = 0;
    const kv_param *kv = given(a, "kv_budget");
    if (!kv || !kv->val[0])
        return MS_OK;
    double d;
    int rc = check_value(p, &common_params[0], kv->val, kv, a->path, &d, NULL, e);
    if (rc)
        return rc;
    if (d <= 0) {
        char at[600];
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy %s parameter 'kv_budget' = %s must be above 0\n"
                       "  hint: the fraction of cached entries a decode step attends, 0 < F <= 1",
                       policy_at(a, "kv_budget", at, sizeof at), p->name, kv->val);
    }
    *f = d;
    return MS_OK;
}

uint32_t policy_budget_entries(double f, uint32_t n)
{
    double k = floor(f * n + 0.5);
    return k < 1 ? 1 : k > n ? n : (uint32_t)k;
}

int policy_check_dense(const policy_args *a, errbuf *e)
{
    const kv_param *kv = given(a, "kv_budget");
    double f;
    if (!kv || parse_double(kv->val, &f) || f == 1)
        return MS_OK;
    char at[600];
    return err_set(e, MS_ERR_INPUT,
                   "%sthis policy attends every cached entry: kv_budget %s cannot apply\n"
                   "  hint: kv_budget: 1, or leave it out",
                   policy_at(a, "kv_budget", at, sizeof at), kv->val);
}

int policy_check(const policy_ops *p, const kv_param *kv, size_t n, const char *path, errbuf *e)
{
    policy_args a = {.kv = kv, .n = n, .path = path};
    double f;
    int rc = policy_kv_budget(p, &a, &f, e);
    if (rc)
        return rc;
    if (f > 0 && !p->budget_keys && p->check != policy_check_dense) {
        char at[600];
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy %s does not map kv_budget to a budget of its own\n"
                       "  hint: set its own budget parameters (`mpcsim list policies`)",
                       policy_at(&a, "kv_budget", at, sizeof at), p->name);
    }
    for (size_t i = 0; f > 0 && p->budget_keys && i < n; i++) {
        const policy_param *pp = find_param(p, kv[i].key);
        if (!pp || !key_in(p->budget_keys, kv[i].key) ||
            (pp->def && same_value(kv[i].val, pp->def)))
            continue;
        char at[600];
        where_prefix(at, sizeof at, path, &kv[i]);
        return err_set(e, MS_ERR_INPUT,
                       "%spolicy %s: '%s' and 'kv_budget' both set the budget\n"
                       "  hint: give one of them; kv_budget sets %s (sim/policy/POLICIES.md "
                       "\"kv_budget\")",
                       at, p->name, kv[i].key, p->budget_keys);
    }
    return p->check ? p->check(&a, e) : MS_OK;
}
