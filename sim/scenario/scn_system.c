/* scn_system.c — a run's model, protocol, network, machine and workload keys read into its
 * run_cfg. Part of the scenario reader (scn.c; shared declarations in scn_int.h). */
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
#include "protocols/program/kern.h"

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

int read_model(scn_ctx *x, const yx_node *v, run_cfg *c)
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
int read_protocol(scn_ctx *x, const yx_node *v, run_cfg *c)
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
    return proto_cfg_check_node(&x->y, v, &c->proto);
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
        {"bandwidth",                                                                           \
         YS_OTHER,                                                                              \
         YS_NONE,                                                                               \
         0,                                                                                     \
         0,                                                                                     \
         NULL,                                                                                  \
         "the same as a rate with its unit: 300Mbit/s, 10Gbit/s (byte units refused)",          \
         NULL,                                                                                  \
         0,                                                                                     \
         NULL,                                                                                  \
         "rate"},                                                                               \
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
static const char *const bw_units[] = {"Mbit/s", "Gbit/s", "bit/s"};

/* 'bandwidth: RATE' (net_rate_bps: the rule of every bandwidth given as text, -n's too) into
 * bps; *given = 0 when absent. keys: the unit-named variants it may not be given with. */
static int read_rate(scn_ctx *x, const yx_node *m, const char *const *keys, double *out, int *given)
{
    const yx_node *v = yx_map_get(m, "bandwidth");
    *given = 0;
    if (!v)
        return MS_OK;
    for (size_t i = 0; i < 3; i++)
        if (yx_map_get(m, keys[i]))
            return fail(x, v, "give the value once, in one unit", "'%s' and 'bandwidth' both given",
                        keys[i]);
    if (v->kind != YX_SCALAR)
        return fail(x, v, "write e.g. 'bandwidth: 300Mbit/s'",
                    "'bandwidth' is a rate with its unit");
    if (net_rate_bps(v->str, out))
        return fail(x, v, net_rate_why(v->str), "bad bandwidth '%s'", v->str);
    *given = 1;
    return MS_OK;
}

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
    if (keys == bw_keys && at->kind == YX_SCALAR && parse_double(at->str, &d))
        return fail(x, at,
                    "write 'bandwidth: RATE' for a rate with its unit (300Mbit/s, 10Gbit/s); "
                    "byte units are refused (tc(8) reads MBps and mbps as bytes/s)",
                    "'%s' is a number of %s (the key names the unit), not '%s'", f->key,
                    bw_units[which], at->str);
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
    if (!rc && yx_map_get(v, "bandwidth"))
        rc = read_rate(x, v, bw_keys, &bw, &gb);
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

int read_network(scn_ctx *x, const yx_node *v, run_cfg *c)
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
             yx_map_get(v, "bandwidth_bps") || yx_map_get(v, "bandwidth");
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

const char *const mach_keys[] = {
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

int read_machine(scn_ctx *x, const yx_node *v, run_cfg *c)
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

int read_workload(scn_ctx *x, const yx_node *v, run_cfg *c)
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
