/* scn.c — scenario files: parse (yamlx) → expand the sweep → resolve and validate each run →
 * canonical YAML and hash per run.
 *
 * Sections follow the data: messages, sweep expansion, value readers, one reader per top-level
 * key (model, protocol, network, machine, workload, trace, policy), canonical YAML, scn_load.
 * Schema and semantics: scenarios/README.md. */
#include "scn.h"

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

#define SCN_MAX_RUNS 10000 /* a bigger sweep is almost surely a mistake; split the file */
#define SCN_FORMAT 1

/* ---- messages ---------------------------------------------------------------------------- */

typedef struct scn_ctx {
    ys_ctx y;         /* messages and value readers (protocols/base/yschema.h) */
    const char *path; /* scenario file, for messages */
    char dir[512];    /* its folder, for relative paths */
    int zip;          /* sweep: zip */
    errbuf *e;
    yx_node **made; /* nodes built by the expansion (shallow: children are borrowed) */
    size_t n_made, cap_made;
} scn_ctx;

/* The scenario's messages and value readers are the schema layer's (yschema.h), so every
 * input file reads the same way; these names keep the readers below short. */
#define fail(x, at, ...) ys_fail(&(x)->y, at, __VA_ARGS__)

static int fail_wrap(scn_ctx *x, const yx_node *at, const char *hint, const char *what,
                     const char *msg)
{
    return ys_fail_wrap(&x->y, at, hint, what, msg);
}

static int check_keys(scn_ctx *x, const yx_node *m, const char *where, const char *const *keys,
                      size_t n)
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

static int unknown_name(scn_ctx *x, const yx_node *at, const char *what, const char *name,
                        const char *const *cands, size_t n, const char *hint)
{
    return ys_unknown_name(&x->y, at, what, name, cands, n, hint);
}

/* hint = head, then each of the n names after a space ("protocols: semi2k aby3"). */
static void hint_names(char *hint, size_t cap, const char *head, const char *const *names, size_t n)
{
    size_t o = (size_t)snprintf(hint, cap, "%s", head);
    for (size_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(hint + o, cap - o, " %s", names[i]);
}

/* Appends to hint (size cap) the text fmt, … and then the places the data directory was
 * looked for in (mpcsim_datadir_searched): the end of a "not found" hint. */
static void hint_searched(char *hint, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void hint_searched(char *hint, size_t cap, const char *fmt, ...)
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

/* ---- sweep expansion ----------------------------------------------------------------------
 * Every list is a set of alternatives. expand() turns a node into its variants: trees without
 * lists. A mapping combines its children's variants: grid = cartesian product (first key
 * slowest), zip = lock-step (counts equal, or 1). A list concatenates its items' variants. */

typedef struct xset {
    const yx_node **v;
    size_t n;
    const yx_node *src; /* the list that set n (for zip messages), NULL when n == 1 */
} xset;

static yx_node *made_map(scn_ctx *x, const yx_node *like)
{
    if (x->n_made == x->cap_made) {
        size_t cap = x->cap_made ? x->cap_made * 2 : 64;
        yx_node **m = realloc(x->made, cap * sizeof *m);
        if (!m)
            return NULL;
        x->made = m;
        x->cap_made = cap;
    }
    yx_node *n = yx_new(YX_MAP, like->line, like->col);
    if (n)
        x->made[x->n_made++] = n;
    return n;
}

static void made_free(scn_ctx *x)
{
    for (size_t i = 0; i < x->n_made; i++) {
        free(x->made[i]->item);
        free(x->made[i]->key);
        free(x->made[i]);
    }
    free(x->made);
    x->made = NULL;
    x->n_made = x->cap_made = 0;
}

static int xset_push(xset *s, const yx_node *n)
{
    if ((s->n & (s->n - 1)) == 0) {
        const yx_node **v = realloc(s->v, (s->n ? s->n * 2 : 4) * sizeof *v);
        if (!v)
            return MS_ERR_NOMEM;
        s->v = v;
    }
    s->v[s->n++] = n;
    return MS_OK;
}

static int expand(scn_ctx *x, const yx_node *n, xset *out);

static int expand_seq(scn_ctx *x, const yx_node *n, xset *out)
{
    if (n->n == 0)
        return fail(x, n, "give at least one value, or remove the key",
                    "empty list: a sweep over no values has no runs");
    for (size_t i = 0; i < n->n; i++) {
        if (n->item[i]->kind == YX_SEQ)
            return fail(x, n->item[i], "write the values in one flat list", "a list inside a list");
        xset sub = {0};
        int rc = expand(x, n->item[i], &sub);
        for (size_t j = 0; !rc && j < sub.n; j++)
            rc = xset_push(out, sub.v[j]);
        free(sub.v);
        if (rc)
            return rc;
        if (out->n > SCN_MAX_RUNS)
            return fail(x, n, "split the sweep into several files",
                        "the sweep expands to more than %d runs", SCN_MAX_RUNS);
    }
    out->src = out->n > 1 ? n : NULL;
    return MS_OK;
}

/* Number of variants a mapping with these children has, after the zip/grid rule. */
static int combine_count(scn_ctx *x, const xset *ch, size_t n_ch, size_t *count,
                         const yx_node **src)
{
    size_t total = 1;
    *src = NULL;
    for (size_t i = 0; i < n_ch; i++) {
        if (ch[i].n == 1)
            continue;
        if (!x->zip) {
            if (total > SCN_MAX_RUNS / ch[i].n)
                return fail(x, ch[i].src, "split the sweep into several files",
                            "the sweep expands to more than %d runs", SCN_MAX_RUNS);
            total *= ch[i].n;
            if (!*src)
                *src = ch[i].src;
        } else if (!*src) {
            total = ch[i].n;
            *src = ch[i].src;
        } else if (ch[i].n != total) {
            char ref[64];
            snprintf(ref, sizeof ref, "%d:%d", (*src)->line, (*src)->col);
            return fail(x, ch[i].src,
                        "give every list the same number of values, or use 'sweep: grid'",
                        "this list gives %zu values but the list at %s gives %zu "
                        "('sweep: zip' walks all lists in step)",
                        ch[i].n, ref, total);
        }
    }
    *count = total;
    return MS_OK;
}

static int expand_map(scn_ctx *x, const yx_node *n, xset *out)
{
    xset *ch = calloc(n->n ? n->n : 1, sizeof *ch);
    if (!ch)
        return MS_ERR_NOMEM;
    int rc = MS_OK;
    size_t count = 1;
    for (size_t i = 0; i < n->n && !rc; i++)
        rc = expand(x, n->item[i], &ch[i]);
    if (!rc)
        rc = combine_count(x, ch, n->n, &count, &out->src);
    for (size_t v = 0; v < count && !rc; v++) {
        yx_node *m = made_map(x, n);
        if (!m) {
            rc = MS_ERR_NOMEM;
            break;
        }
        size_t rest = v; /* grid: mixed radix, the last key varies fastest */
        for (size_t i = n->n; i-- > 0 && !rc;) {
            size_t k = ch[i].n == 1 ? 0 : x->zip ? v : rest % ch[i].n;
            if (!x->zip && ch[i].n > 1)
                rest /= ch[i].n;
            rc = yx_push(m, n->key[i], (yx_node *)ch[i].v[k]);
        }
        if (!rc) { /* pushed in reverse: restore document order */
            for (size_t a = 0, b = m->n - 1; m->n && a < b; a++, b--) {
                yx_node *t = m->item[a];
                m->item[a] = m->item[b];
                m->item[b] = t;
                t = m->key[a];
                m->key[a] = m->key[b];
                m->key[b] = t;
            }
            rc = xset_push(out, m);
        }
    }
    for (size_t i = 0; i < n->n; i++)
        free(ch[i].v);
    free(ch);
    return rc;
}

static int expand(scn_ctx *x, const yx_node *n, xset *out)
{
    if (n->kind == YX_SEQ)
        return expand_seq(x, n, out);
    if (n->kind == YX_MAP)
        return expand_map(x, n, out);
    out->src = NULL;
    return xset_push(out, n);
}

/* ---- value readers ----------------------------------------------------------------------- */

static int need_scalar(scn_ctx *x, const yx_node *v, const char *key, const char *type)
{
    return ys_need_scalar(&x->y, v, key, type);
}

static int need_map(scn_ctx *x, const yx_node *v, const char *key, const char *example)
{
    return ys_need_map(&x->y, v, key, example);
}

static int read_double(scn_ctx *x, const yx_node *v, const char *key, double lo, double hi,
                       double *out)
{
    return ys_double(&x->y, v, key, lo, hi, out);
}

static int bool_text(const char *s) { return ys_bool_text(s); }

/* Shortest text that reads back as the same double. */
static void fmt_double(char *buf, size_t cap, double d)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, d);
        double back;
        if (!parse_double(buf, &back) && back == d)
            return;
    }
}

/* Canonical text of a free parameter: numbers and booleans normalized, other text verbatim. */
static void norm_value(const yx_node *v, char *out, size_t cap)
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
static int resolve_path(scn_ctx *x, const yx_node *v, const char *key, char *out, size_t cap)
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

/* ---- model ------------------------------------------------------------------------------- */

/* The model's keys (models/model.c's schema, canonical order) are equal in a and b. */
static int models_equal(const model_cfg *a, const model_cfg *b)
{
    const ys_schema *ms = model_schema();
    for (size_t i = 0; i < ms->n; i++)
        if (!ys_field_equal(&ms->field[i], a, b))
            return 0;
    return 1;
}

static int model_names(char (**names)[64], size_t *n)
{
    *names = calloc(256, sizeof **names);
    if (!*names)
        return MS_ERR_NOMEM;
    if (model_list(*names, 256, n))
        *n = 0;
    return MS_OK;
}

/* A model by name (models/<name>.yaml) or by path to a YAML file. */
static int load_named_model(scn_ctx *x, const yx_node *v, model_cfg *m, char *ref)
{
    int rc = need_scalar(x, v, "model", "a model name");
    if (rc)
        return rc;
    int is_path = strchr(v->str, '/') || strstr(v->str, ".yaml") || strstr(v->str, ".yml");
    char(*names)[64];
    size_t n;
    if ((rc = model_names(&names, &n)))
        return rc;
    size_t i = 0;
    while (i < n && strcmp(names[i], v->str))
        i++;
    if (!is_path && i == n) {
        const char *cands[256];
        for (size_t k = 0; k < n; k++)
            cands[k] = names[k];
        char hint[1700] = "";
        hint_searched(hint, sizeof hint,
                      "'mpcsim list models' shows the shipped models; a path "
                      "to a model YAML or an inline mapping also works; models/%s.yaml was "
                      "looked for in ",
                      v->str);
        rc = unknown_name(x, v, "model", v->str, cands, n, hint);
        free(names);
        return rc;
    }
    free(names);
    char path[1100];
    if (is_path && (rc = resolve_path(x, v, "model", path, sizeof path)))
        return rc;
    errbuf me;
    memset(m, 0, sizeof *m);
    if (model_load(is_path ? path : v->str, m, &me))
        return fail_wrap(x, v, "fix the model file, or describe the model inline",
                         "cannot load model: ", me.msg);
    snprintf(ref, 64, "%.63s", is_path ? (strlen(path) < 64 ? path : "inline") : v->str);
    return MS_OK;
}

/* An inline model: from a base (a shipped name or a path) with keys replaced, or described
 * in full, resolved as a model file is (model_read). */
static int read_model_map(scn_ctx *x, const yx_node *v, model_cfg *m, char *ref)
{
    static const char *const extra[] = {"base"};
    int rc = ys_check_keys(&x->y, v, model_schema(), extra, 1);
    if (rc)
        return rc;
    const yx_node *base = yx_map_get(v, "base");
    model_cfg b;
    memset(&b, 0, sizeof b);
    if (base && (rc = load_named_model(x, base, &b, ref)))
        return rc;
    if ((rc = model_read(&x->y, v, base ? &b : NULL, extra, 1, m)))
        return rc;
    if (!base && !yx_map_get(v, "name"))
        snprintf(m->name, sizeof m->name, "inline");
    if (!base || !models_equal(m, &b))
        snprintf(ref, 64, "inline");
    return MS_OK;
}

static int read_model(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    int rc = v->kind == YX_MAP ? read_model_map(x, v, &c->model, c->model_ref)
                               : load_named_model(x, v, &c->model, c->model_ref);
    if (rc)
        return rc;
    errbuf me;
    if (model_check(&c->model, &me))
        return fail_wrap(x, v, "fix the model's shape", "", me.msg);
    return MS_OK;
}

/* ---- protocol ---------------------------------------------------------------------------- */

static int read_proto_name(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    int rc = need_scalar(x, v, "protocol", "a protocol name");
    if (rc)
        return rc;
    if (!proto_find(v->str)) {
        size_t n;
        const proto *const *all = proto_all(&n);
        const char *cands[16];
        char hint[256];
        n = n < 16 ? n : 16;
        for (size_t i = 0; i < n; i++)
            cands[i] = all[i]->name;
        hint_names(hint, sizeof hint, "protocols:", cands, n);
        return unknown_name(x, v, "protocol", v->str, cands, n, hint);
    }
    errbuf pe;
    if (proto_cfg_default(v->str, &c->proto, &pe))
        return fail_wrap(x, v, "see 'mpcsim list protocols'", "", pe.msg);
    snprintf(c->proto_ref, sizeof c->proto_ref, "%s", v->str);
    return MS_OK;
}

/* A mapping: 'name' picks the protocol's defaults, the other keys replace them, each read
 * with proto_cfg_schema()'s type and range. */
static int read_protocol(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    if (v->kind != YX_MAP)
        return read_proto_name(x, v, c);
    const ys_schema *ps = proto_cfg_schema();
    int rc = ys_check_keys(&x->y, v, ps, NULL, 0);
    if (rc)
        return rc;
    const yx_node *name = yx_map_get(v, "name");
    if (!name)
        return fail(x, v, "write e.g. protocol: {name: aby3, frac_bits: 16}",
                    "missing required key 'name' in 'protocol'");
    if ((rc = read_proto_name(x, name, c)) || (rc = ys_read(&x->y, v, ps, NULL, 0, &c->proto)))
        return rc;
    if (c->proto.frac_bits >= c->proto.ring_bits || c->proto.frac_bits < 1) {
        const yx_node *at = yx_map_get(v, "frac_bits");
        at = at ? at : yx_map_get(v, "ring_bits");
        return fail(x, at ? at : v, "fixed point needs 1 <= frac_bits < ring_bits",
                    "frac_bits (%d) must be less than ring_bits (%d)", c->proto.frac_bits,
                    c->proto.ring_bits);
    }
    return MS_OK;
}

/* ---- network ----------------------------------------------------------------------------- */

/* A link's keys: latency and bandwidth in one of three units each (ranges in that unit: up to
 * 10^15 ns = 11.6 days of latency; bandwidth as net.h bounds it), and the token bucket. The
 * unit variants store nothing themselves (read_unit converts); 'burst_bytes' stores. */
#define LINK_FIELDS                                                                             \
    {"latency_ms", YS_DBL, YS_NONE, 0,   1e9, NULL, "one-way latency, milliseconds",            \
     NULL,         0,      NULL,    NULL},                                                      \
        {"latency_us", YS_DBL, YS_NONE, 0,   1e12, NULL, "the same in microseconds",            \
         NULL,         0,      NULL,    NULL},                                                  \
        {"latency_ns", YS_DBL, YS_NONE, 0,   1e15, NULL, "the same in nanoseconds",             \
         NULL,         0,      NULL,    NULL},                                                  \
        {"bandwidth_mbps",                                                                      \
         YS_DBL,                                                                                \
         YS_NONE,                                                                               \
         NET_BW_MIN_BPS / 1e6,                                                                  \
         NET_BW_MAX_BPS / 1e6,                                                                  \
         NULL,                                                                                  \
         "bandwidth, megabits per second",                                                      \
         NULL,                                                                                  \
         0,                                                                                     \
         NULL,                                                                                  \
         NULL},                                                                                 \
        {"bandwidth_gbps",                                                                      \
         YS_DBL,                                                                                \
         YS_NONE,                                                                               \
         NET_BW_MIN_BPS / 1e9,                                                                  \
         NET_BW_MAX_BPS / 1e9,                                                                  \
         NULL,                                                                                  \
         "the same in gigabits per second",                                                     \
         NULL,                                                                                  \
         0,                                                                                     \
         NULL,                                                                                  \
         NULL},                                                                                 \
        {"bandwidth_bps",                                                                       \
         YS_DBL,                                                                                \
         YS_NONE,                                                                               \
         NET_BW_MIN_BPS,                                                                        \
         NET_BW_MAX_BPS,                                                                        \
         NULL,                                                                                  \
         "the same in bits per second",                                                         \
         NULL,                                                                                  \
         0,                                                                                     \
         NULL,                                                                                  \
         NULL},                                                                                 \
    {                                                                                           \
        "burst_bytes", YS_U64, YS_AT(net_link, burst_bytes), 0, (double)NET_BURST_MAX, "0",     \
            "token bucket depth: 0 (none) or at least one 1500-byte frame (validate --shape's " \
            "tbf)",                                                                             \
            NULL, 0, NULL, NULL                                                                 \
    }

static const ys_field link_fields[] = {LINK_FIELDS};
static const ys_schema link_schema = YS_SCHEMA("link", link_fields, "scenarios/README.md");

static const ys_field network_fields[] = {
    {"preset", YS_OTHER, YS_NONE, 0, 0, NULL, "start from a preset ('mpcsim list networks')", NULL,
     0, NULL, "preset name"},
    {"name", YS_STR, YS_AT(net_cfg, name), 0, 0, NULL,
     "the network's name in labels (default: the preset's, or custom)", NULL, 0, NULL, NULL},
    LINK_FIELDS,
    {"links", YS_OTHER, YS_NONE, 0, 0, NULL,
     "per-link values: {A->B: {…}} one direction, {A-B: {…}} both (keys of 'link')", NULL, 0, NULL,
     "mapping"},
    {"dealer", YS_OTHER, YS_NONE, 0, 0, NULL, "the dealer's offline link (keys of 'link')", NULL, 0,
     NULL, "mapping"},
    {"wire", YS_OTHER, YS_NONE, 0, 0, NULL,
     "framing: tcp, tls (tcp carrying TLS 1.3 records), none, or a mapping of 'wire' keys over "
     "tcp's",
     NULL, 0, NULL, "tcp|tls|none|mapping"},
};
#undef LINK_FIELDS
static const ys_schema network_schema = YS_SCHEMA("network", network_fields, "scenarios/README.md");

#define WF(member) YS_AT(net_wire, member)
static const ys_field wire_fields[] = {
    {"mtu", YS_U32, WF(mtu), NET_WIRE_MTU_MIN, NET_WIRE_MTU_MAX, "1500",
     "IP packet size limit in bytes", NULL, 0, NULL, NULL},
    {"l2_bytes", YS_U32, WF(l2_bytes), 0, NET_WIRE_HDR_MAX, "14",
     "link-layer bytes per frame the rate counts", NULL, 0, NULL, NULL},
    {"l3l4_bytes", YS_U32, WF(l3l4_bytes), 0, NET_WIRE_HDR_MAX, "52",
     "IP and TCP header bytes per segment", NULL, 0, NULL, NULL},
    {"ack_every", YS_U32, WF(ack_every), 0, 1024, "2",
     "data segments per pure ACK (0: ACKs not counted)", NULL, 0, NULL, NULL},
    {"msg_bytes", YS_U32, WF(msg_bytes), 0, NET_WIRE_HDR_MAX, "0",
     "the transport's header per message", NULL, 0, NULL, NULL},
    {"tls_record", YS_U32, WF(tls_record), 0, 65536, "0",
     "TLS: plaintext bytes per record at most (0: no TLS; TLS 1.3: 16384)", NULL, 0, NULL, NULL},
    {"tls_overhead", YS_U32, WF(tls_overhead), 0, NET_WIRE_HDR_MAX, "0",
     "TLS: bytes each record adds (TLS 1.3: 22)", NULL, 0, NULL, NULL},
};
#undef WF
static const ys_schema wire_schema = YS_SCHEMA("wire", wire_fields, "sim/engine/SIMULATION.md");

const ys_schema *scn_network_schemas(size_t *n)
{
    static const ys_schema all[] = {
        YS_SCHEMA("network", network_fields, "scenarios/README.md"),
        YS_SCHEMA("link", link_fields, "scenarios/README.md"),
        YS_SCHEMA("wire", wire_fields, "sim/engine/SIMULATION.md"),
    };
    *n = sizeof all / sizeof *all;
    return all;
}

static const char *const lat_keys[] = {"latency_ms", "latency_us", "latency_ns"};
static const double lat_scale[] = {1e6, 1e3, 1};
static const char *const bw_keys[] = {"bandwidth_mbps", "bandwidth_gbps", "bandwidth_bps"};
static const double bw_scale[] = {1e6, 1e9, 1};

/* Reads at most one of the unit variants, each within its field's range, into the base unit
 * (ns, bps); *given = 0 when none is present. */
static int read_unit(scn_ctx *x, const yx_node *m, const char *const *keys, const double *scale,
                     double *out, int *given)
{
    const yx_node *at = NULL;
    size_t which = 0;
    *given = 0;
    for (size_t i = 0; i < 3; i++) {
        const yx_node *v = yx_map_get(m, keys[i]);
        if (v && at)
            return fail(x, v, "give the value once, in one unit", "'%s' and '%s' both given",
                        keys[which], keys[i]);
        if (v) {
            at = v;
            which = i;
        }
    }
    if (!at)
        return MS_OK;
    const ys_field *f = ys_find(&link_schema, keys[which]);
    double d;
    int rc = read_double(x, at, f->key, f->lo, f->hi, &d);
    if (rc)
        return rc;
    *out = d * scale[which];
    *given = 1;
    return MS_OK;
}

/* burst_bytes: 0 (no token bucket) or one frame .. NET_BURST_MAX. */
static int read_burst(scn_ctx *x, const yx_node *v, uint64_t *out)
{
    net_link l = {0};
    int rc = ys_read_field(&x->y, v, ys_find(&link_schema, "burst_bytes"), &l);
    if (rc)
        return rc;
    if (l.burst_bytes && l.burst_bytes < NET_BURST_MIN)
        return fail(x, v,
                    "a token bucket must hold one 1500-byte frame: write 0 (no bucket) or "
                    "at least 1500, e.g. 3100 as validate --shape gives tbf",
                    "'burst_bytes' = %s is below one frame", v->str);
    *out = l.burst_bytes;
    return MS_OK;
}

/* Latency, bandwidth and burst of a link, from a mapping that may hold other keys too. */
static int read_link_values(scn_ctx *x, const yx_node *v, net_link *l)
{
    double lat, bw;
    int gl = 0, gb = 0;
    int rc = read_unit(x, v, lat_keys, lat_scale, &lat, &gl);
    if (!rc)
        rc = read_unit(x, v, bw_keys, bw_scale, &bw, &gb);
    const yx_node *bu = yx_map_get(v, "burst_bytes");
    if (!rc && bu)
        rc = read_burst(x, bu, &l->burst_bytes);
    if (rc)
        return rc;
    if (gl)
        l->latency_ns = (uint64_t)llround(lat);
    if (gb)
        l->bandwidth_bps = bw;
    return MS_OK;
}

/* A link's mapping (a 'links' entry or the dealer's): its keys are named after it in
 * messages ("unknown key 'x' in '0->1'"). */
static int read_link(scn_ctx *x, const yx_node *v, const char *where, net_link *l)
{
    ys_schema named = link_schema;
    named.name = where;
    int rc = need_map(x, v, where, "write e.g. {latency_ms: 20, bandwidth_mbps: 100}");
    if (!rc)
        rc = ys_check_keys(&x->y, v, &named, NULL, 0);
    return rc ? rc : read_link_values(x, v, l);
}

/* wire: "tcp" (NET_WIRE_TCP), "tls" (the same carrying TLS 1.3 records), "none", or a mapping
 * of NET_WIRE_TCP's fields to override. */
static int read_wire(scn_ctx *x, const yx_node *v, net_wire *w)
{
    static const char *const names[] = {"tcp", "tls", "none"};
    const char *ex =
        "write 'wire: tcp' (Ethernet/IPv4/TCP framing), 'wire: tls' (TCP carrying TLS 1.3 "
        "records), 'wire: none', or e.g. 'wire: {mtu: 9000, msg_bytes: 32}'";
    *w = NET_WIRE_TCP;
    if (v->kind == YX_SCALAR) {
        if (!strcmp(v->str, "none"))
            *w = (net_wire){0};
        else if (!strcmp(v->str, "tls")) {
            w->tls_record = NET_WIRE_TLS13_RECORD;
            w->tls_overhead = NET_WIRE_TLS13_OVERHEAD;
        } else if (strcmp(v->str, "tcp"))
            return unknown_name(x, v, "wire framing", v->str, names, 3, ex);
        return MS_OK;
    }
    int rc = need_map(x, v, "wire", ex);
    if (!rc)
        rc = ys_read(&x->y, v, &wire_schema, NULL, 0, w);
    errbuf ne;
    if (!rc && net_wire_check(w, &ne))
        return fail_wrap(x, v, "the IP and TCP headers must leave room for payload in the mtu", "",
                         ne.msg);
    return rc;
}

/* "0->1" (one direction) or "0-1" (both). */
static int read_links(scn_ctx *x, const yx_node *v, net_cfg *n)
{
    int rc = need_map(x, v, "links", "write e.g. links: {0->1: {latency_ms: 40}}");
    for (size_t i = 0; !rc && i < v->n; i++) {
        const char *k = v->key[i]->str;
        int a, b, len = 0;
        char arrow[3] = "";
        if (sscanf(k, "%d%2[->]%d%n", &a, arrow, &b, &len) != 3 || k[len] ||
            (strcmp(arrow, "->") && strcmp(arrow, "-")) || a < 0 || b < 0 || a >= n->n_parties ||
            b >= n->n_parties || a == b) {
            char hint[160];
            snprintf(hint, sizeof hint,
                     "links are named 'A->B' (one direction) or 'A-B' (both), with parties "
                     "0..%d",
                     n->n_parties - 1);
            return fail(x, v->key[i], hint, "bad link name '%s'", k);
        }
        if ((rc = read_link(x, v->item[i], k, &n->link[a][b])))
            return rc;
        if (!strcmp(arrow, "-"))
            n->link[b][a] = n->link[a][b];
    }
    return rc;
}

static int links_equal(const net_cfg *a, const net_cfg *b)
{
    if (strcmp(a->name, b->name) || a->n_parties != b->n_parties ||
        a->dealer.latency_ns != b->dealer.latency_ns ||
        a->dealer.bandwidth_bps != b->dealer.bandwidth_bps ||
        a->dealer.burst_bytes != b->dealer.burst_bytes ||
        memcmp(&a->wire, &b->wire, sizeof a->wire))
        return 0;
    for (int i = 0; i < a->n_parties; i++)
        for (int j = 0; j < a->n_parties; j++)
            if (i != j && (a->link[i][j].latency_ns != b->link[i][j].latency_ns ||
                           a->link[i][j].bandwidth_bps != b->link[i][j].bandwidth_bps ||
                           a->link[i][j].burst_bytes != b->link[i][j].burst_bytes))
                return 0;
    return 1;
}

static int read_preset(scn_ctx *x, const yx_node *v, int parties, net_cfg *n)
{
    int rc = need_scalar(x, v, "network", "a network preset name");
    if (rc)
        return rc;
    size_t np;
    const char *const *names = net_preset_names(&np);
    size_t i = 0;
    while (i < np && strcmp(names[i], v->str))
        i++;
    errbuf ne;
    if (i == np || net_preset(v->str, parties, n, &ne)) {
        char hint[256];
        size_t o = (size_t)snprintf(hint, sizeof hint, "presets:");
        for (size_t k = 0; k < np && o < sizeof hint; k++)
            o += (size_t)snprintf(hint + o, sizeof hint - o, " %s", names[k]);
        snprintf(hint + o, o < sizeof hint ? sizeof hint - o : 0,
                 "; or 'LATENCY/BANDWIDTH' (20ms/300Mbps), or a mapping {latency_ms: …, "
                 "bandwidth_mbps: …}");
        return unknown_name(x, v, "network", v->str, names, np, hint);
    }
    return MS_OK;
}

static int read_network(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    const proto *pr = proto_find(c->proto.name);
    int parties = pr ? pr->n_parties : 2, rc;
    if (v->kind == YX_SCALAR && strchr(v->str, '/')) { /* "20ms/300Mbps" */
        errbuf ne;
        if (net_parse(v->str, parties, &c->net, &ne))
            return fail_wrap(x, v, "write LATENCY/BANDWIDTH, e.g. 20ms/300Mbps", "", ne.msg);
        snprintf(c->net_ref, sizeof c->net_ref, "custom");
        return MS_OK;
    }
    if (v->kind != YX_MAP) {
        if ((rc = read_preset(x, v, parties, &c->net)))
            return rc;
        snprintf(c->net_ref, sizeof c->net_ref, "%s", v->str);
        return MS_OK;
    }
    if ((rc = ys_check_keys(&x->y, v, &network_schema, NULL, 0)))
        return rc;
    const yx_node *preset = yx_map_get(v, "preset"), *name = yx_map_get(v, "name");
    net_cfg base;
    net_link all = {0};
    memset(&base, 0, sizeof base);
    if (preset && (rc = read_preset(x, preset, parties, &base)))
        return rc;
    if ((rc = read_link_values(x, v, &all)))
        return rc;
    int gl =
        yx_map_get(v, "latency_ms") || yx_map_get(v, "latency_us") || yx_map_get(v, "latency_ns");
    int gb = yx_map_get(v, "bandwidth_mbps") || yx_map_get(v, "bandwidth_gbps") ||
             yx_map_get(v, "bandwidth_bps");
    if (!preset && (!gl || !gb))
        return fail(x, v, "give both, or start from a preset with 'preset: lan'",
                    "missing required key '%s' in 'network'", gl ? "bandwidth_mbps" : "latency_ms");
    net_cfg *n = &c->net;
    if (preset)
        *n = base;
    else
        net_uniform(n, parties, all.latency_ns, all.bandwidth_bps);
    for (int i = 0; i < parties; i++)
        for (int j = 0; j < parties; j++) {
            if (i != j && gl)
                n->link[i][j].latency_ns = all.latency_ns;
            if (i != j && gb)
                n->link[i][j].bandwidth_bps = all.bandwidth_bps;
        }
    if (yx_map_get(v, "burst_bytes")) /* every link and the dealer's, as net_uniform */
        net_set_burst(n, all.burst_bytes);
    const yx_node *links = yx_map_get(v, "links"), *dealer = yx_map_get(v, "dealer");
    if (links && (rc = read_links(x, links, n)))
        return rc;
    if (dealer && (rc = read_link(x, dealer, "dealer", &n->dealer)))
        return rc;
    const yx_node *wire = yx_map_get(v, "wire");
    if (wire && (rc = read_wire(x, wire, &n->wire)))
        return rc;
    snprintf(n->name, sizeof n->name, "%s", preset ? preset->str : "custom");
    if (preset && !links_equal(n, &base))
        snprintf(n->name, sizeof n->name, "custom");
    if (name && (rc = ys_read_field(&x->y, name, ys_find(&network_schema, "name"), n)))
        return rc;
    snprintf(c->net_ref, sizeof c->net_ref, "%s",
             preset && links_equal(n, &base) ? preset->str : "custom");
    return MS_OK;
}

/* ---- machine ----------------------------------------------------------------------------- */

static const char *const mach_keys[] = {
    "base",    "name",        "mac_per_s",    "elem_per_s",  "prg_bytes_per_s",
    "threads", "mac_par_eff", "elem_par_eff", "prg_par_eff", "grain"};

int scn_machine_names(char names[][64], size_t max, size_t *n)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/protocols/machines", mpcsim_datadir());
    DIR *d = opendir(dir);
    *n = 0;
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)) && *n < max) {
        size_t l = strlen(de->d_name);
        if (l > 5 && l < 64 + 5 && !strcmp(de->d_name + l - 5, ".yaml"))
            snprintf(names[(*n)++], 64, "%.*s", (int)(l - 5), de->d_name);
    }
    closedir(d);
    return 0;
}

static int load_machine(scn_ctx *x, const yx_node *v, machine_profile *m)
{
    int rc = need_scalar(x, v, "machine", "a machine profile name");
    if (rc)
        return rc;
    errbuf me;
    int lrc = machine_load(v->str, m, &me);
    if (lrc == MS_OK)
        return MS_OK;
    if (lrc == MS_ERR_NOTFOUND) { /* no such profile: say which, and what exists */
        const char *cands[32];
        char store[32][64];
        size_t n;
        scn_machine_names(store, 32, &n); /* none listed when the folder cannot be read */
        for (size_t i = 0; i < n; i++)
            cands[i] = store[i];
        char hint[2048];
        hint_names(hint, sizeof hint, "profiles in protocols/machines/:", cands, n);
        hint_searched(hint, sizeof hint, "; 'mpcsim calibrate -o FILE' writes one; looked in ");
        return unknown_name(x, v, "machine profile", v->str, cands, n, hint);
    }
    return fail_wrap(x, v, NULL, "machine profile: ", me.msg); /* a broken profile file */
}

static int read_machine(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    machine_profile *m = &c->machine;
    errbuf me;
    if (!v) { /* the shipped default profile, or the built-in rates if it is missing */
        if (machine_load("default", m, &me))
            machine_default(m);
        return MS_OK;
    }
    if (v->kind != YX_MAP)
        return load_machine(x, v, m);
    int rc = check_keys(x, v, "machine", mach_keys, sizeof mach_keys / sizeof *mach_keys);
    if (rc)
        return rc;
    const yx_node *base = yx_map_get(v, "base"), *f;
    if (base && (rc = load_machine(x, base, m)))
        return rc;
    if (!base)
        machine_default(m);
    /* the keys after 'base' are a profile file's, read with its schema's types and ranges */
    for (size_t i = 1; i < sizeof mach_keys / sizeof *mach_keys; i++)
        if ((f = yx_map_get(v, mach_keys[i])) &&
            (rc = ys_read_field(&x->y, f, ys_find(machine_schema(), mach_keys[i]), m)))
            return rc;
    return MS_OK;
}

/* ---- workload ---------------------------------------------------------------------------- */

#define W(member) YS_AT(run_cfg, work.member)
static const ys_field workload_fields[] = {
    {"prompt_len", YS_U32, W(prompt_len), 1, 1u << 24, NULL, "private prompt tokens P", NULL,
     YS_REQ, NULL, NULL},
    {"decode_len", YS_U32, W(decode_len), 0, 1u << 24, NULL, "generated tokens (0: prefill only)",
     NULL, YS_REQ, NULL, NULL},
    {"batch", YS_U32, W(batch), 1, 65536, "1", "sequences decoded together", NULL, 0, NULL, NULL},
    {"prefill_in_mpc", YS_BOOL, W(prefill_in_mpc), 0, 0, "true",
     "the prompt is private, so its prefill runs in MPC", NULL, 0, NULL, NULL},
    {"decode_stride", YS_U32, W(decode_stride), 1, 1u << 24, "1",
     "cost every k-th decode step exactly; the others share its cost", NULL, 0, NULL, NULL},
};
#undef W
static const ys_schema workload_schema =
    YS_SCHEMA("workload", workload_fields, "scenarios/README.md");

const ys_schema *scn_workload_schema(void) { return &workload_schema; }

static int read_workload(scn_ctx *x, const yx_node *v, run_cfg *c)
{
    int rc = need_map(x, v, "workload", "write e.g. workload: {prompt_len: 128, decode_len: 32}");
    if (!rc && (rc = ys_defaults(&workload_schema, c)) == MS_OK)
        rc = ys_read(&x->y, v, &workload_schema, NULL, 0, c);
    if (rc)
        return rc;
    uint64_t total = (uint64_t)c->work.prompt_len + c->work.decode_len;
    if (total > c->model.max_ctx)
        return fail(x, yx_map_get(v, "prompt_len"),
                    "shorten the workload, or pick a model with a longer context",
                    "prompt_len + decode_len = %llu exceeds the context of model '%s' "
                    "(max_context %u)",
                    (unsigned long long)total, c->model.name, c->model.max_ctx);
    return MS_OK;
}

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

static int read_trace(scn_ctx *x, const yx_node *v, run_cfg *c)
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

static int read_policy(scn_ctx *x, const yx_node *v, run_cfg *c)
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
        const yx_node *name = yx_map_get(v, "name");
        if (!name)
            return fail(x, v, "write e.g. - {name: h2o, heavy_ratio: 0.1}",
                        "missing required key 'name' in policy entry");
        if ((rc = policy_by_name(x, name, &p)))
            return rc;
        /* keys and values through the policy's schema; the text is kept (kv_param) */
        const ys_schema *ps = policy_schema(p);
        if ((rc = ys_check_keys(&x->y, v, ps, NULL, 0)))
            return rc;
        for (size_t i = 0; i < v->n; i++) {
            const ys_field *f = ys_find(ps, v->key[i]->str);
            char scratch[POLICY_VALUE_MAX] __attribute__((aligned(8)));
            if (f->type != YS_OTHER && (rc = ys_read_field(&x->y, v->item[i], f, scratch)))
                return rc;
        }
        yx_node rest = {.kind = YX_MAP, .line = v->line, .col = v->col};
        yx_node *keys[RUN_MAX_PARAMS + 1], *items[RUN_MAX_PARAMS + 1];
        rest.key = keys;
        rest.item = items;
        for (size_t i = 0; i < v->n; i++) {
            if (!strcmp(v->key[i]->str, "name"))
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

static int check_run_needs(scn_ctx *x, const yx_node *r, const run_cfg *c)
{
    const policy_ops *p = policy_find(c->policy.name);
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

/* ---- canonical YAML ---------------------------------------------------------------------- */

static int plain_ok(const char *s)
{
    if (!*s || yx_is_null(&(yx_node){.kind = YX_SCALAR, .str = (char *)s}) || bool_text(s) >= 0 ||
        !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789_./",
                s[0]))
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-") ==
           strlen(s);
}

static void put_str(FILE *f, const char *s)
{
    if (plain_ok(s)) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A free parameter value: numbers and booleans as written (already normalized), text quoted
 * when it needs to be. */
static void put_val(FILE *f, const char *s)
{
    double d;
    if (!parse_double(s, &d) || !strcmp(s, "true") || !strcmp(s, "false"))
        fputs(s, f);
    else
        put_str(f, s);
}

static void put_dbl(FILE *f, double d)
{
    char b[40];
    fmt_double(b, sizeof b, d);
    fputs(b, f);
}

static void put_field(FILE *f, const ys_field *fd, const void *base)
{
    const char *p = (const char *)base + fd->off;
    fprintf(f, "  %s: ", fd->key);
    if (fd->type == YS_U32)
        fprintf(f, "%u", *(const uint32_t *)p);
    else if (fd->type == YS_DBL)
        put_dbl(f, *(const double *)p);
    else if (fd->type == YS_BOOL)
        fputs(*(const int *)p ? "true" : "false", f);
    else if (fd->type == YS_ENUM) {
        int k = *(const int *)p, n = 0;
        while (fd->names[n])
            n++;
        fputs(k >= 0 && k < n ? fd->names[k] : "unknown", f);
    } else
        put_str(f, p);
    fputc('\n', f);
}

/* burst_bytes is written when set, or when the network's is (a link without a bucket under a
 * network-wide one): scenarios without buckets dump as before. */
static void put_link(FILE *f, const char *indent, const char *name, const net_link *l,
                     uint64_t net_burst)
{
    fprintf(f, "%s%s: {latency_ns: %llu, bandwidth_bps: ", indent, name,
            (unsigned long long)l->latency_ns);
    put_dbl(f, l->bandwidth_bps);
    if (l->burst_bytes || net_burst)
        fprintf(f, ", burst_bytes: %llu", (unsigned long long)l->burst_bytes);
    fputs("}\n", f);
}

static void put_network(FILE *f, const run_cfg *c)
{
    const net_cfg *n = &c->net;
    const net_link *b = &n->link[0][1];
    fputs("network:\n", f);
    if (strcmp(c->net_ref, "custom")) {
        fputs("  preset: ", f);
        put_str(f, c->net_ref);
        fputc('\n', f);
    }
    fputs("  name: ", f);
    put_str(f, n->name);
    fprintf(f, "\n  latency_ns: %llu\n  bandwidth_bps: ", (unsigned long long)b->latency_ns);
    put_dbl(f, b->bandwidth_bps);
    fputc('\n', f);
    if (b->burst_bytes)
        fprintf(f, "  burst_bytes: %llu\n", (unsigned long long)b->burst_bytes);
    put_link(f, "  ", "dealer", &n->dealer, b->burst_bytes);
    if (n->wire.mtu &&
        n->wire.tls_record) /* TLS keys only when set: plain framings keep their text */
        fprintf(f,
                "  wire: {mtu: %u, l2_bytes: %u, l3l4_bytes: %u, ack_every: %u, msg_bytes: %u, "
                "tls_record: %u, "
                "tls_overhead: %u}\n",
                n->wire.mtu, n->wire.l2_bytes, n->wire.l3l4_bytes, n->wire.ack_every,
                n->wire.msg_bytes, n->wire.tls_record, n->wire.tls_overhead);
    else if (n->wire.mtu)
        fprintf(f,
                "  wire: {mtu: %u, l2_bytes: %u, l3l4_bytes: %u, ack_every: %u, msg_bytes: %u}\n",
                n->wire.mtu, n->wire.l2_bytes, n->wire.l3l4_bytes, n->wire.ack_every,
                n->wire.msg_bytes);
    int any = 0;
    for (int i = 0; i < n->n_parties; i++)
        for (int j = 0; j < n->n_parties; j++) {
            const net_link *l = &n->link[i][j];
            if (i == j || (l->latency_ns == b->latency_ns && l->bandwidth_bps == b->bandwidth_bps &&
                           l->burst_bytes == b->burst_bytes))
                continue;
            if (!any++)
                fputs("  links:\n", f);
            char name[32];
            snprintf(name, sizeof name, "%d->%d", i, j);
            put_link(f, "    ", name, l, b->burst_bytes);
        }
}

/* Protocol keys the canonical YAML writes only away from the value they had before the key
 * existed, so runs resolved before then keep their hash: in a stored config, an absent key
 * means that value (scn_stored_protocol). */
static const struct {
    const char *key;
    size_t off, size;
    const char *was;
} absent_keys[] = {
    {"msb", YS_AT(proto_cfg, msb), "ks"},
    {"topk", YS_AT(proto_cfg, topk), "network"},
    {"exp", YS_AT(proto_cfg, exp), "taylor"},
    {"normalize", YS_AT(proto_cfg, normalize), "thresholds"},
};
#define N_ABSENT_KEYS (sizeof absent_keys / sizeof absent_keys[0])

static void put_protocol(FILE *f, const proto_cfg *p)
{
    fputs("protocol:\n  name: ", f);
    put_str(f, p->name);
    fprintf(f,
            "\n  ring_bits: %d\n  frac_bits: %d\n  exp_iters: %d\n  recip_iters: %d\n"
            "  rsqrt_iters: %d\n  softmax_clip: ",
            p->ring_bits, p->frac_bits, p->exp_iters, p->recip_iters, p->rsqrt_iters);
    put_dbl(f, p->softmax_clip);
    fprintf(f, "\n  beaver_cache: %s\n  trunc_local: %s\n  approx: ",
            p->beaver_cache ? "true" : "false", p->trunc_local ? "true" : "false");
    put_str(f, p->approx);
    fputc('\n', f);
    for (size_t i = 0; i < N_ABSENT_KEYS; i++) {
        const char *v = (const char *)p + absent_keys[i].off;
        if (v[0] && strcmp(v, absent_keys[i].was)) {
            fprintf(f, "  %s: ", absent_keys[i].key);
            put_str(f, v);
            fputc('\n', f);
        }
    }
    /* aby3 with trunc_local off ran Share Truncation I before the truncation pair existed:
     * naming the pair keeps those runs' hashes from matching runs that use it */
    const proto *pr = proto_find(p->name);
    if (pr && pr->legacy_trunc_local && !p->trunc_local)
        fputs("  trunc: pair\n", f);
}

void scn_stored_protocol(const yx_node *root, proto_cfg *p)
{
    const yx_node *m = root ? yx_map_get(root, "protocol") : NULL;
    if (!m || m->kind != YX_MAP)
        return;
    for (size_t i = 0; i < N_ABSENT_KEYS; i++)
        if (!yx_map_get(m, absent_keys[i].key))
            snprintf((char *)p + absent_keys[i].off, absent_keys[i].size, "%s", absent_keys[i].was);
    /* before the pair, aby3 truncated by Share Truncation I whatever trunc_local said */
    const proto *pr = proto_find(p->name);
    if (pr && pr->legacy_trunc_local && !yx_map_get(m, "trunc"))
        p->trunc_local = 1;
}

static void put_params(FILE *f, const char *indent, const kv_param *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s%s: ", indent, kv[i].key);
        put_val(f, kv[i].val);
        fputc('\n', f);
    }
}

static void put_run(FILE *f, const run_cfg *c)
{
    fprintf(f, "format: %d\nmodel:\n", SCN_FORMAT);
    if (strcmp(c->model_ref, "inline")) {
        fputs("  base: ", f);
        put_str(f, c->model_ref);
        fputc('\n', f);
    }
    const ys_schema *ms = model_schema();
    for (size_t i = 0; i < ms->n; i++)
        if (ms->field[i].type != YS_FIXED) /* 'format' belongs to model files */
            put_field(f, &ms->field[i], &c->model);
    put_protocol(f, &c->proto);
    put_network(f, c);
    fputs("machine:\n  name: ", f);
    put_str(f, c->machine.name);
    for (int k = 0; k < WK_N; k++) {
        fprintf(f, "\n  %s: ", mach_keys[2 + k]);
        put_dbl(f, c->machine.rate[k]);
    }
    fprintf(f, "\n  threads: %d", c->machine.threads);
    for (int k = 0; k < WK_N; k++) {
        fprintf(f, "\n  %s: ", mach_keys[6 + k]);
        put_dbl(f, c->machine.par_eff[k]);
    }
    fputs("\n  grain: ", f);
    put_dbl(f, c->machine.grain);
    fputc('\n', f);
    fprintf(f,
            "workload:\n  prompt_len: %u\n  decode_len: %u\n  batch: %u\n"
            "  prefill_in_mpc: %s\n  decode_stride: %u\n",
            c->work.prompt_len, c->work.decode_len, c->work.batch,
            c->work.prefill_in_mpc ? "true" : "false", c->work.decode_stride);
    fprintf(f, "trace:\n  source: %s\n", c->trace.source);
    if (!strcmp(c->trace.source, "record") || !strcmp(c->trace.source, "npy")) {
        fputs(!strcmp(c->trace.source, "record") ? "  text: " : "  path: ", f);
        put_str(f, c->trace.path);
        fputc('\n', f);
    }
    if (!strcmp(c->trace.source, "synth")) {
        /* a GQA shape's trace depends on group_sim (added after these runs were first keyed):
         * its value is part of the run, so results of older builds are not taken for these */
        int gqa = c->model.n_kv_heads && c->model.n_kv_heads < c->model.n_heads, given = 0;
        for (size_t i = 0; i < c->trace.n_params; i++)
            given |= !strcmp(c->trace.params[i].key, "group_sim");
        fputs(c->trace.n_params || (gqa && !given) ? "  params:\n" : "  params: {}\n", f);
        /* in key order, as a scenario that names it reads back */
        size_t at = 0;
        while (at < c->trace.n_params && strcmp(c->trace.params[at].key, "group_sim") < 0)
            at++;
        put_params(f, "    ", c->trace.params, at);
        if (gqa && !given) {
            trace_synth sp;
            trace_synth_defaults_for(&sp, c->model.family);
            fprintf(f, "    group_sim: %.9g\n", sp.group_sim);
        }
        put_params(f, "    ", c->trace.params + at, c->trace.n_params - at);
    }
    fputs("policies:\n  - name: ", f);
    put_str(f, c->policy.name);
    fputc('\n', f);
    put_params(f, "    ", c->policy.params, c->policy.n_params);
    fprintf(f, "seed: %llu\noverlap: %s\n", (unsigned long long)c->seed,
            c->overlap ? "true" : "false");
}

/* FNV-1a, 64 bit. */
static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int scn_resolve_yaml(run_cfg *c, errbuf *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    put_run(f, c);
    if (fclose(f) || !buf) {
        free(buf);
        return err_set(e, MS_ERR_NOMEM, "out of memory");
    }
    free(c->yaml);
    c->yaml = buf;
    snprintf(c->hash, sizeof c->hash, "%016llx", (unsigned long long)fnv1a(buf, len));
    return MS_OK;
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
        if (f && is_meta(fd->key) && (rc = ys_read_field(&x->y, f, fd, &m)))
            return rc;
        if (f && !strcmp(fd->key, "format") && m.format != SCN_FORMAT)
            return fail(x, f, "this mpcsim reads 'format: 1'; upgrade mpcsim for newer files",
                        "unsupported scenario format %llu", (unsigned long long)m.format);
    }
    snprintf(s->name, sizeof s->name, "%s", m.name);
    snprintf(s->db, sizeof s->db, "%s", m.output);
    x->zip = m.sweep;
    return MS_OK;
}

static int is_meta(const char *key)
{
    return !strcmp(key, "format") || !strcmp(key, "name") || !strcmp(key, "description") ||
           !strcmp(key, "output") || !strcmp(key, "sweep");
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
