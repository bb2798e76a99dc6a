/* scn.c — scenario files: parse (yamlx) → expand the sweep → resolve and validate each run →
 * canonical YAML and hash per run.
 *
 * This file holds the messages, the value readers, one run's keys and scn_load; the sweep
 * expansion is scn_sweep.c, the readers of the top-level keys scn_system.c (model, protocol,
 * network, machine, workload) and scn_policy.c (trace, policy, what the run will need), the
 * canonical YAML scn_yaml.c; what they share, scn_int.h. Schema and semantics:
 * scenarios/README.md. */
#include "scn.h"
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
#include "sim/trace/trace.h"
#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"

/* ---- messages ---------------------------------------------------------------------------- */

int fail_wrap(scn_ctx *x, const yx_node *at, const char *hint, const char *what, const char *msg)
{
    return ys_fail_wrap(&x->y, at, hint, what, msg);
}

int check_keys(scn_ctx *x, const yx_node *m, const char *where, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < m->n; i++) {
        size_t k = 0;
        while (k < n && strcmp(m->key[i]->str, keys[k]))
            k++;
        if (k == n)
            return ys_unknown_key(&x->y, m->key[i], where, keys, n);
    }
    return MS_OK;
}

int unknown_name(scn_ctx *x, const yx_node *at, const char *what, const char *name,
                 const char *const *cands, size_t n, const char *hint)
{
    return ys_unknown_name(&x->y, at, what, name, cands, n, hint);
}

/* hint = head, then each of the n names after a space ("protocols: semi2k aby3"). */
void hint_names(char *hint, size_t cap, const char *head, const char *const *names, size_t n)
{
    size_t o = (size_t)snprintf(hint, cap, "%s", head);
    for (size_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(hint + o, cap - o, " %s", names[i]);
}

/* Appends to hint (size cap) the text fmt, … and then the places the data directory was
 * looked for in (mpcsim_datadir_searched): the end of a "not found" hint. */
void hint_searched(char *hint, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void hint_searched(char *hint, size_t cap, const char *fmt, ...)
{
    size_t o = strlen(hint);
    va_list ap;
    va_start(ap, fmt);
    if (o < cap)
        o += (size_t)vsnprintf(hint + o, cap - o, fmt, ap);
    va_end(ap);
    char where[1400];
    mpcsim_datadir_searched(where, sizeof where);
    if (o < cap)
        snprintf(hint + o, cap - o, "%s", where);
}

/* ---- value readers ----------------------------------------------------------------------- */

int need_scalar(scn_ctx *x, const yx_node *v, const char *key, const char *type)
{
    return ys_need_scalar(&x->y, v, key, type);
}

int need_map(scn_ctx *x, const yx_node *v, const char *key, const char *example)
{
    return ys_need_map(&x->y, v, key, example);
}

int read_double(scn_ctx *x, const yx_node *v, const char *key, double lo, double hi, double *out)
{
    return ys_double(&x->y, v, key, lo, hi, out);
}

int bool_text(const char *s) { return ys_bool_text(s); }

/* Shortest text that reads back as the same double. */
void fmt_double(char *buf, size_t cap, double d)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, d);
        double back;
        if (!parse_double(buf, &back) && back == d)
            return;
    }
}

/* Canonical text of a free parameter: numbers and booleans normalized, other text verbatim. */
void norm_value(const yx_node *v, char *out, size_t cap)
{
    long long i;
    double d;
    int b;
    if (v && !v->quoted && (b = bool_text(v->str)) >= 0)
        snprintf(out, cap, "%s", b ? "true" : "false");
    else if (!parse_i64(v->str, &i))
        snprintf(out, cap, "%lld", i);
    else if (!parse_double(v->str, &d))
        fmt_double(out, cap, d);
    else
        snprintf(out, cap, "%s", v->str);
}

/* A path written in the scenario: absolute, or relative to the scenario's folder, or to the
 * data directory. Fills out with the first that exists. */
int resolve_path(scn_ctx *x, const yx_node *v, const char *key, char *out, size_t cap)
{
    struct stat st;
    const char *p = v->str;
    char cand[2][1100];
    int n = 0;
    if (p[0] == '/')
        snprintf(cand[n++], sizeof cand[0], "%s", p);
    else {
        snprintf(cand[n++], sizeof cand[0], "%s/%s", x->dir, p);
        const char *d = mpcsim_datadir();
        if (!strcmp(d, "."))
            snprintf(cand[n++], sizeof cand[0], "%s", p);
        else
            snprintf(cand[n++], sizeof cand[0], "%s/%s", d, p);
    }
    for (int i = 0; i < n; i++) {
        const char *c = cand[i];
        if (!strncmp(c, "./", 2) && c[2])
            c += 2;
        if (stat(c, &st) == 0) {
            if (strlen(c) >= cap)
                return fail(x, v, "move the file to a shorter path", "path for '%s' is too long",
                            key);
            snprintf(out, cap, "%s", c);
            return MS_OK;
        }
    }
    char hint[2400] = "";
    hint_searched(hint, sizeof hint,
                  "relative paths are looked up next to the scenario file "
                  "(%s), then in the data directory: ",
                  x->dir);
    return fail(x, v, hint, "'%s': no such file or folder '%s'", key, p);
}

/* ---- one run ----------------------------------------------------------------------------- */

/* The scenario's own keys (not per run: never lists) go to scn_meta; 'seed' and 'overlap' to
 * the run; the sections are read by their readers above. */
static int is_meta(const char *key);

typedef struct scn_meta {
    uint32_t format;
    char name[64];
    char description[4096];
    char output[512];
    int sweep; /* 0 grid, 1 zip */
} scn_meta;

static const char *const sweep_modes[] = {"grid", "zip", NULL};

#define META(member) YS_AT(scn_meta, member)
static const ys_field root_fields[] = {
    {"format", YS_U32, META(format), 1, 1000, "1", "scenario format; this mpcsim reads 1", NULL, 0,
     NULL, NULL},
    {"name", YS_STR, META(name), 0, 0, NULL, "scenario name (default: the file's)", NULL, 0, NULL,
     NULL},
    {"description", YS_STR, META(description), 0, 0, NULL, "for people; not read", NULL, 0, NULL,
     NULL},
    {"model", YS_OTHER, YS_NONE, 0, 0, NULL,
     "a shipped model, a model file, or a mapping ('mpcsim list keys model')", NULL, YS_REQ, NULL,
     "name|path|mapping"},
    {"protocol", YS_OTHER, YS_NONE, 0, 0, NULL,
     "semi2k or aby3, or a mapping ('mpcsim list keys protocol')", NULL, YS_REQ, NULL,
     "name|mapping"},
    {"network", YS_OTHER, YS_NONE, 0, 0, NULL,
     "a preset, LATENCY/BANDWIDTH (20ms/300Mbps), or a mapping ('mpcsim list keys network')", NULL,
     YS_REQ, NULL, "name|text|mapping"},
    {"machine", YS_OTHER, YS_NONE, 0, 0, NULL,
     "a machine profile, or a mapping with 'base' ('mpcsim list keys machine'); default: "
     "default",
     NULL, 0, NULL, "name|mapping"},
    {"workload", YS_OTHER, YS_NONE, 0, 0, NULL, "prompt and decode ('mpcsim list keys workload')",
     NULL, YS_REQ, NULL, "mapping"},
    {"trace", YS_OTHER, YS_NONE, 0, 0, NULL, "attention source ('mpcsim list keys trace')", NULL, 0,
     NULL, "mapping"},
    {"policies", YS_OTHER, YS_NONE, 0, 0, NULL,
     "policy names or {name: …, PARAM: …} ('mpcsim list keys policy'); default: full", NULL, 0,
     NULL, "name|mapping|list"},
    {"seed", YS_U64, YS_AT(run_cfg, seed), 0, 0, "1", "seed of the synthetic trace and sampling",
     NULL, 0, NULL, NULL},
    {"sweep", YS_ENUM, META(sweep), 0, 0, "grid",
     "lists combine as a cartesian product (grid) or in step (zip)", sweep_modes, 0, NULL, NULL},
    {"output", YS_STR, META(output), 0, 0, NULL, "results database (default: -o or results/)", NULL,
     0, NULL, NULL},
    {"overlap", YS_BOOL, YS_AT(run_cfg, overlap), 0, 0, "false",
     "overlap a step's communication with its compute", NULL, 0, NULL, NULL},
    {"cases", YS_OTHER, YS_NONE, 0, 0, NULL,
     "a list of mappings of run keys; each replaces the file's and is swept on its own", NULL, 0,
     NULL, "list"},
    {"figures", YS_OTHER, YS_NONE, 0, 0, NULL,
     "figures `mpcsim run` draws after the sweep ('mpcsim list keys figures')", NULL, 0, NULL,
     "list"},
};
#undef META
static const ys_schema root_schema = YS_SCHEMA("scenario", root_fields, "scenarios/README.md");

const ys_schema *scn_schema(void) { return &root_schema; }

static int read_run(scn_ctx *x, const yx_node *r, run_cfg *c)
{
    static const char *const required[] = {"model", "protocol", "network", "workload"};
    static const char *const hints[] = {"add e.g. 'model: llama-2-7b' ('mpcsim list models')",
                                        "add e.g. 'protocol: semi2k' ('mpcsim list protocols')",
                                        "add e.g. 'network: lan' ('mpcsim list networks')",
                                        "add e.g. 'workload: {prompt_len: 128, decode_len: 32}'"};
    for (size_t i = 0; i < 4; i++)
        if (!yx_map_get(r, required[i]))
            return fail(x, r, hints[i], "missing required key '%s'", required[i]);
    const yx_node *f;
    int rc;
    if ((rc = read_model(x, yx_map_get(r, "model"), c)) ||
        (rc = read_protocol(x, yx_map_get(r, "protocol"), c)) ||
        (rc = read_network(x, yx_map_get(r, "network"), c)) ||
        (rc = read_machine(x, yx_map_get(r, "machine"), c)) ||
        (rc = read_workload(x, yx_map_get(r, "workload"), c)) ||
        (rc = read_trace(x, yx_map_get(r, "trace"), c)) ||
        (rc = read_policy(x, yx_map_get(r, "policies"), c)) || (rc = check_run_needs(x, r, c)))
        return rc;
    c->seed = 1;
    if ((f = yx_map_get(r, "seed")) &&
        (rc = ys_read_field(&x->y, f, ys_find(&root_schema, "seed"), c)))
        return rc;
    if ((f = yx_map_get(r, "overlap")) &&
        (rc = ys_read_field(&x->y, f, ys_find(&root_schema, "overlap"), c)))
        return rc;
    return scn_resolve_yaml(c, x->e);
}

/* ---- scn_load ---------------------------------------------------------------------------- */

#define SCN_FILE_MAX (64u << 20) /* as yamlx.h bounds a YAML file */

static char *read_text(const char *path, errbuf *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_set(e, MS_ERR_IO,
                "%s: error: cannot open scenario file\n"
                "  hint: check the path ('mpcsim run scenarios/quickstart.yaml')",
                path);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[8192];
    size_t got;
    size_t total = 0;
    while (m && total <= SCN_FILE_MAX && (got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        fwrite(chunk, 1, got, m);
        total += got;
    }
    if (total > SCN_FILE_MAX) { /* /dev/zero, or a file past the YAML layer's own bound */
        fclose(f);
        fclose(m);
        free(buf);
        err_set(e, MS_ERR_INPUT, "%s: error: scenario file larger than %u MiB", path,
                (unsigned)(SCN_FILE_MAX >> 20));
        return NULL;
    }
    int bad = ferror(f) || !m;
    fclose(f);
    if (m)
        fclose(m);
    if (bad) {
        free(buf);
        err_set(e, MS_ERR_IO, "%s: error: cannot read scenario file", path);
        return NULL;
    }
    return buf;
}

/* Keys that describe the scenario rather than a run: never lists. */
static int read_meta(scn_ctx *x, const yx_node *r, scenario *s)
{
    int rc = ys_check_keys(&x->y, r, &root_schema, NULL, 0);
    if (rc)
        return rc;
    scn_meta m;
    memset(&m, 0, sizeof m);
    char base[512];
    snprintf(base, sizeof base, "%s", s->path);
    char *b = basename(base), *dot = strrchr(b, '.');
    if (dot && dot != b)
        *dot = '\0';
    snprintf(m.name, sizeof m.name, "%.63s", b);
    for (size_t i = 0; i < root_schema.n; i++) {
        const ys_field *fd = &root_schema.field[i];
        const yx_node *f = yx_map_get(r, fd->key);
        if (f && is_meta(fd->key) && fd->type != YS_OTHER && (rc = ys_read_field(&x->y, f, fd, &m)))
            return rc;
        if (f && !strcmp(fd->key, "format") && m.format != SCN_FORMAT)
            return fail(x, f, "this mpcsim reads 'format: 1'; upgrade mpcsim for newer files",
                        "unsupported scenario format %llu", (unsigned long long)m.format);
    }
    snprintf(s->name, sizeof s->name, "%s", m.name);
    snprintf(s->db, sizeof s->db, "%s", m.output);
    x->zip = m.sweep;
    return read_figures(x, yx_map_get(r, "figures"), s);
}

static int is_meta(const char *key)
{
    return !strcmp(key, "format") || !strcmp(key, "name") || !strcmp(key, "description") ||
           !strcmp(key, "output") || !strcmp(key, "sweep") || !strcmp(key, "figures");
}

/* The run keys of the file, with a case's keys replacing the file's (keys the file lacks are
 * appended). The body borrows every node; the caller frees only the body itself. */
static yx_node *case_body(const yx_node *root, const yx_node *cs)
{
    const yx_node *at = cs ? cs : root;
    yx_node *body = yx_new(YX_MAP, at->line, at->col);
    int rc = body ? MS_OK : MS_ERR_NOMEM;
    for (size_t i = 0; i < root->n && !rc; i++) {
        const char *k = root->key[i]->str;
        if (is_meta(k) || !strcmp(k, "cases"))
            continue;
        const yx_node *over = cs ? yx_map_get(cs, k) : NULL;
        rc = yx_push(body, root->key[i], (yx_node *)(over ? over : root->item[i]));
    }
    for (size_t i = 0; cs && i < cs->n && !rc; i++)
        if (!yx_map_get(root, cs->key[i]->str))
            rc = yx_push(body, cs->key[i], cs->item[i]);
    if (rc && body) {
        free(body->item);
        free(body->key);
        free(body);
        body = NULL;
    }
    return body;
}

static int check_case(scn_ctx *x, const yx_node *cs)
{
    const char *run_keys[sizeof root_fields / sizeof *root_fields]; /* the root's, per run */
    size_t n_run = 0;
    for (size_t i = 0; i < root_schema.n; i++)
        if (!is_meta(root_fields[i].key) && strcmp(root_fields[i].key, "cases"))
            run_keys[n_run++] = root_fields[i].key;
    int rc = need_map(x, cs, "cases", "each case is a mapping, e.g. - {model: gpt2}");
    for (size_t i = 0; !rc && i < cs->n; i++)
        if (is_meta(cs->key[i]->str) || !strcmp(cs->key[i]->str, "cases"))
            return fail(x, cs->key[i], "set it once, at the top of the file",
                        "'%s' cannot be set per case", cs->key[i]->str);
    return rc ? rc : check_keys(x, cs, "cases", run_keys, n_run);
}

/* Each case (or the file itself, without 'cases') is expanded on its own; runs concatenate. */
static int expand_runs(scn_ctx *x, const yx_node *root, scenario *s)
{
    const yx_node *cases = yx_map_get(root, "cases");
    int rc = MS_OK;
    if (cases && cases->kind != YX_SEQ)
        return fail(x, cases, "write cases: [{model: …}, {model: …}]",
                    "'cases' must be a list of mappings, not %s", yx_kind_name(cases));
    if (cases && cases->n == 0)
        return fail(x, cases, "give at least one case, or remove the key",
                    "empty list: 'cases' has no runs");
    size_t n_cases = cases ? cases->n : 1;
    xset runs = {0};
    for (size_t k = 0; k < n_cases && !rc; k++) {
        const yx_node *cs = cases ? cases->item[k] : NULL;
        if (cs && (rc = check_case(x, cs)))
            break;
        yx_node *body = case_body(root, cs);
        if (!body)
            return MS_ERR_NOMEM;
        xset part = {0};
        rc = expand(x, body, &part);
        for (size_t i = 0; !rc && i < part.n; i++)
            rc = xset_push(&runs, part.v[i]);
        if (!rc && runs.n > SCN_MAX_RUNS)
            rc = fail(x, cs ? cs : root, "split the sweep into several files",
                      "the sweep expands to more than %d runs", SCN_MAX_RUNS);
        free(part.v);
        free(body->item);
        free(body->key);
        free(body);
    }
    if (!rc && !(s->runs = calloc(runs.n, sizeof *s->runs)))
        rc = MS_ERR_NOMEM;
    for (size_t i = 0; i < runs.n && !rc; i++) {
        run_cfg *c = &s->runs[i];
        snprintf(c->scenario, sizeof c->scenario, "%s", s->name);
        snprintf(c->scenario_path, sizeof c->scenario_path, "%s", s->path);
        c->index = i;
        s->n_runs = i + 1;
        rc = read_run(x, runs.v[i], c);
    }
    free(runs.v);
    return rc;
}

int scn_load(const char *path, const char *text, scenario *s, errbuf *e)
{
    memset(s, 0, sizeof *s);
    if (strlen(path) >= sizeof s->path)
        return err_set(e, MS_ERR_INPUT, "%s: error: path too long", path);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->yaml = text ? strdup(text) : read_text(path, e);
    if (!s->yaml)
        return text ? err_set(e, MS_ERR_NOMEM, "out of memory") : MS_ERR_IO;
    scn_ctx x = {.y = {path, e, 0}, .path = path, .e = e};
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(x.dir, sizeof x.dir, "%s", dirname(dir));
    yx_node *root = NULL;
    int rc = yx_parse(path, s->yaml, strlen(s->yaml), &root, e);
    if (!rc && root->kind != YX_MAP)
        rc = fail(&x, root, "a scenario is a mapping: 'name: …', 'model: …', …",
                  "the scenario must be a mapping of keys, not %s", yx_kind_name(root));
    if (!rc)
        rc = read_meta(&x, root, s);
    if (!rc)
        rc = expand_runs(&x, root, s);
    made_free(&x);
    yx_free(root);
    if (rc) {
        if (rc == MS_ERR_NOMEM)
            err_set(e, rc, "%s: out of memory", path);
        scn_free(s);
        return rc;
    }
    return MS_OK;
}

void scn_free(scenario *s)
{
    for (size_t i = 0; i < s->n_runs; i++)
        free(s->runs[i].yaml);
    free(s->runs);
    free(s->yaml);
    s->runs = NULL;
    s->yaml = NULL;
    s->n_runs = 0;
}
