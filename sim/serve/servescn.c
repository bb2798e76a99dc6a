/* servescn.c — the serving scenario reader (servescn.h). */
#include "servescn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/base/yamlx.h"
#include "protocols/program/kern.h"
#include "sim/engine/net.h"

void serve_scn_defaults(serve_scn *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "serve");
    snprintf(s->model, sizeof s->model, "llama-2-7b");
    snprintf(s->protocol, sizeof s->protocol, "semi2k");
    snprintf(s->network, sizeof s->network, "lan");
    snprintf(s->machine, sizeof s->machine, "default");
    s->seed = 1;
    wl_params_default(&s->wl);
    s->rate[0] = s->wl.rate;
    s->n_rate = 1;
    for (int k = 0; k < KVS_N; k++)
        s->policy[k] = k;
    s->n_policy = KVS_N;
    serve_params_default(&s->sp);
    s->attack = 1;
    leak_params_default(&s->lp);
    s->channel[0] = LEAK_TTFT;
    s->n_channel = 1;
    s->bg_load = 0.3;
}

/* ---- scenario file -----------------------------------------------------------------------
 * One schema table per section (protocols/base/yschema.h), all over serve_scn; keys whose
 * value is a list, a range or a name from another module are YS_OTHER and read below. The
 * defaults are serve_scn_defaults()' (the serving modules' own). Keys: scenarios/SERVING.md. */

#define S(member) YS_AT(serve_scn, member)
static const ys_field workload_fields[] = {
    {"requests", YS_U32, S(wl.n_requests), 1, 1e7, NULL, "requests to generate", NULL, 0, NULL,
     NULL},
    {"rate", YS_OTHER, YS_NONE, 0, 0, NULL, "arrivals per second (a list: one point each)", NULL, 0,
     NULL, "number or list"},
    {"tenants", YS_U32, S(wl.n_tenants), 1, 1u << 24, NULL, "tenants (system prompts)", NULL, 0,
     NULL, NULL},
    {"users_per_tenant", YS_U32, S(wl.users_per_tenant), 1, 1u << 24, NULL, "users per tenant",
     NULL, 0, NULL, NULL},
    {"system_prompt", YS_U32, S(wl.sys_len), 0, SERVE_TOKMAX, NULL, "tokens of a system prompt",
     NULL, 0, NULL, NULL},
    {"user_context", YS_U32, S(wl.user_ctx_len), 0, SERVE_TOKMAX, NULL, "private context per user",
     NULL, 0, NULL, NULL},
    {"documents", YS_U32, S(wl.n_docs), 0, 1u << 24, NULL, "shared document pool", NULL, 0, NULL,
     NULL},
    {"document_len", YS_U32, S(wl.doc_len), 1, SERVE_TOKMAX, NULL, "tokens per document", NULL, 0,
     NULL, NULL},
    {"docs_per_request", YS_U32, S(wl.docs_per_req), 0, 4096, NULL, "documents per request", NULL,
     0, NULL, NULL},
    {"doc_zipf", YS_DBL, S(wl.doc_zipf), 0, 10, NULL, "document popularity exponent", NULL, 0, NULL,
     NULL},
    {"turn", YS_OTHER, YS_NONE, 0, 0, NULL, "private user turn length", NULL, 0, NULL,
     "N or [min, max]"},
    {"decode", YS_OTHER, YS_NONE, 0, 0, NULL, "output length", NULL, 0, NULL, "N or [min, max]"},
    {"pii_fraction", YS_DBL, S(wl.pii_fraction), 0, 1, NULL, "sensitive share of turn tokens", NULL,
     0, NULL, NULL},
    {"pii_run", YS_U32, S(wl.pii_run), 1, SERVE_TOKMAX, NULL, "sensitive tokens per run", NULL, 0,
     NULL, NULL},
    {"vocab", YS_U32, S(wl.vocab), 64, 1e8, NULL, "token ids drawn from", NULL, 0, NULL, NULL},
    {"replay", YS_STR, S(replay), 0, 0, NULL, "a recorded workload file instead", NULL, 0, NULL,
     NULL},
};
static const ys_field server_fields[] = {
    {"batch", YS_U32, S(sp.batch_limit), 1, 4096, NULL, "running requests", NULL, 0, NULL, NULL},
    {"chunk", YS_U32, S(sp.chunk), 0, SERVE_TOKMAX, NULL, "chunked prefill tokens; 0 = off", NULL,
     0, NULL, NULL},
    {"scheduler", YS_OTHER, YS_NONE, 0, 0, NULL, "admission order", NULL, 0, NULL, "fcfs|lpm"},
    {"cost_bucket", YS_U32, S(sp.cost_bucket), 1, SERVE_TOKMAX, NULL, "lengths costed together",
     NULL, 0, NULL, NULL},
};
static const ys_field sharing_fields[] = {
    {"policies", YS_OTHER, YS_NONE, 0, 0, NULL, "sharing policies compared", NULL, 0, NULL,
     "none|prefix|salted|span, or a list"},
    {"block", YS_U32, S(sp.share.block), 1, SERVE_TOKMAX, NULL, "prefix/salted block size", NULL, 0,
     NULL, NULL},
    {"capacity_tokens", YS_U64, S(sp.share.capacity_tokens), 1, 1e15, NULL, "shared pool size",
     NULL, 0, NULL, NULL},
    {"min_span", YS_U32, S(sp.share.min_span), 1, SERVE_TOKMAX, NULL, "span: shortest reusable run",
     NULL, 0, NULL, NULL},
    {"position", YS_OTHER, YS_NONE, 0, 0, NULL, "span: moved keys' positions", NULL, 0, NULL,
     "rerotate|recompute"},
};
static const ys_field attack_fields[] = {
    {"enabled", YS_BOOL, S(attack), 0, 0, NULL, "run the timing attack", NULL, 0, NULL, NULL},
    {"trials", YS_U32, S(lp.trials), 1, 1e6, NULL, "attack trials", NULL, 0, NULL, NULL},
    {"candidates", YS_U32, S(lp.candidates), 2, 65536, NULL, "values the secret is one of", NULL, 0,
     NULL, NULL},
    {"channel", YS_OTHER, YS_NONE, 0, 0, NULL, "side channels", NULL, 0, NULL,
     "ttft|order, or a list"},
    {"template_len", YS_U32, S(lp.template_len), 1, SERVE_TOKMAX, NULL, "public tokens before it",
     NULL, 0, NULL, NULL},
    {"background_load", YS_DBL, S(bg_load), 0, 0.95, NULL, "others' load, share of capacity", NULL,
     0, NULL, NULL},
};
static const ys_field root_fields[] = {
    {"name", YS_STR, S(name), 0, 0, NULL, "scenario name (default: the file's)", NULL, 0, NULL,
     NULL},
    {"model", YS_STR, S(model), 0, 0, NULL, "model name or file", NULL, 0, NULL, NULL},
    {"protocol", YS_OTHER, YS_NONE, 0, 0, NULL,
     "semi2k or aby3, or a mapping {name: P, KEY: VALUE, ...} of protocol keys (mpcsim list keys "
     "protocol: compat, gather, ...)",
     NULL, 0, NULL, "a name or a mapping"},
    {"network", YS_STR, S(network), 0, 0, NULL, "network preset or LATENCY/BANDWIDTH", NULL, 0,
     NULL, NULL},
    {"machine", YS_STR, S(machine), 0, 0, NULL, "machine profile", NULL, 0, NULL, NULL},
    {"seed", YS_U64, S(seed), 0, 0, NULL, "workload and attack seed", NULL, 0, NULL, NULL},
    {"output", YS_STR, S(output), 0, 0, NULL, "database", NULL, 0, NULL, NULL},
    {"workload", YS_OTHER, YS_NONE, 0, 0, NULL, "the requests", NULL, 0, NULL, "mapping"},
    {"server", YS_OTHER, YS_NONE, 0, 0, NULL, "the batching server", NULL, 0, NULL, "mapping"},
    {"sharing", YS_OTHER, YS_NONE, 0, 0, NULL, "the shared KV cache", NULL, 0, NULL, "mapping"},
    {"attack", YS_OTHER, YS_NONE, 0, 0, NULL, "the timing attack", NULL, 0, NULL, "mapping"},
};
#undef S
static const ys_schema serve_schemas[] = {
    YS_SCHEMA("serving scenario", root_fields, "scenarios/SERVING.md"),
    YS_SCHEMA("workload", workload_fields, "scenarios/SERVING.md"),
    YS_SCHEMA("server", server_fields, "scenarios/SERVING.md"),
    YS_SCHEMA("sharing", sharing_fields, "scenarios/SERVING.md"),
    YS_SCHEMA("attack", attack_fields, "scenarios/SERVING.md"),
};
enum { SS_ROOT, SS_WORKLOAD, SS_SERVER, SS_SHARING, SS_ATTACK };

const ys_schema *serve_scenario_schemas(size_t *n)
{
    *n = sizeof serve_schemas / sizeof *serve_schemas;
    return serve_schemas;
}

/* A name, or a list of 1..max names, each through from_name; out[] gets the values. */
static int read_names(const ys_ctx *x, const yx_node *v, const char *key, size_t max,
                      int (*from_name)(const char *), const char *const *names, size_t n_names,
                      const char *what, int *out, size_t *n_out)
{
    const yx_node *const *it = v->kind == YX_SEQ ? (const yx_node *const *)v->item : &v;
    size_t n = v->kind == YX_SEQ ? v->n : 1;
    char hint[160] = "";
    for (size_t i = 0; i < n_names; i++)
        snprintf(hint + strlen(hint), sizeof hint - strlen(hint), "%s%s", i ? ", " : "", names[i]);
    if (n == 0 || n > max)
        return ys_fail(x, v, hint, "'%s' needs 1 to %zu names", key, max);
    for (size_t j = 0; j < n; j++) {
        int rc = ys_need_scalar(x, it[j], key, "a name");
        if (rc)
            return rc;
        if ((out[j] = from_name(it[j]->str)) < 0)
            return ys_unknown_name(x, it[j], what, it[j]->str, names, n_names, hint);
    }
    *n_out = n;
    return MS_OK;
}

/* A [min, max] pair or a single value. */
static int read_range(const ys_ctx *x, const yx_node *v, const char *key, uint32_t *lo,
                      uint32_t *hi)
{
    if (v->kind == YX_SCALAR) {
        int rc = ys_u32(x, v, key, 1, SERVE_TOKMAX, lo);
        *hi = *lo;
        return rc;
    }
    if (v->kind != YX_SEQ || v->n != 2)
        return ys_fail(x, v, "write N or [min, max]", "'%s' must be a number or [min, max]", key);
    int rc = ys_u32(x, v->item[0], key, 1, SERVE_TOKMAX, lo);
    if (!rc)
        rc = ys_u32(x, v->item[1], key, 1, SERVE_TOKMAX, hi);
    if (!rc && *hi < *lo)
        rc = ys_fail(x, v, "write [min, max] with min <= max", "'%s': max is below min", key);
    return rc;
}

static int read_workload(const ys_ctx *x, const yx_node *m, serve_scn *s)
{
    int rc = ys_read(x, m, &serve_schemas[SS_WORKLOAD], NULL, 0, s);
    const yx_node *v;
    if (!rc && (v = yx_map_get(m, "rate"))) {
        const yx_node *const *it = v->kind == YX_SEQ ? (const yx_node *const *)v->item : &v;
        size_t n = v->kind == YX_SEQ ? v->n : 1;
        if (n == 0 || n > SERVE_MAX_RATES)
            return ys_fail(x, v, "give 1 to 32 rates", "'rate' needs 1 to %d values",
                           SERVE_MAX_RATES);
        for (size_t j = 0; !rc && j < n; j++)
            rc = ys_double(x, it[j], "rate", 1e-12, 1e9, &s->rate[j]);
        s->n_rate = n;
    }
    if (!rc && (v = yx_map_get(m, "turn")))
        rc = read_range(x, v, "turn", &s->wl.turn_min, &s->wl.turn_max);
    if (!rc && (v = yx_map_get(m, "decode")))
        rc = read_range(x, v, "decode", &s->wl.decode_min, &s->wl.decode_max);
    errbuf we; /* what no single key shows: prompt length and memory caps across keys */
    if (!rc && (rc = wl_params_check(&s->wl, &we)))
        rc = ys_fail_wrap(x, m, "shrink the workload's lengths or counts", "", we.msg);
    return rc;
}

static int read_server(const ys_ctx *x, const yx_node *m, serve_scn *s)
{
    int rc = ys_read(x, m, &serve_schemas[SS_SERVER], NULL, 0, s);
    const yx_node *v = yx_map_get(m, "scheduler");
    static const char *const names[] = {"fcfs", "lpm"};
    size_t one;
    if (!rc && v)
        rc = read_names(x, v, "scheduler", 1, serve_sched_from_name, names, 2, "scheduler",
                        &s->sp.scheduler, &one);
    return rc;
}

static int pos_from_name(const char *n)
{
    return !strcmp(n, "rerotate")    ? KVS_POS_REROTATE
           : !strcmp(n, "recompute") ? KVS_POS_RECOMPUTE
                                     : -1;
}

static int read_sharing(const ys_ctx *x, const yx_node *m, serve_scn *s)
{
    int rc = ys_read(x, m, &serve_schemas[SS_SHARING], NULL, 0, s);
    const yx_node *v;
    size_t nn, one;
    const char *const *names = kvs_kind_names(&nn);
    if (!rc && (v = yx_map_get(m, "policies")))
        rc = read_names(x, v, "policies", KVS_N, kvs_kind_from_name, names, nn, "sharing policy",
                        s->policy, &s->n_policy);
    static const char *const pos[] = {"rerotate", "recompute"};
    if (!rc && (v = yx_map_get(m, "position"))) {
        rc = read_names(x, v, "position", 1, pos_from_name, pos, 2, "position treatment",
                        &s->sp.share.position, &one);
        s->pos_line = v->line;
        s->pos_col = v->col;
    }
    return rc;
}

static int read_attack(const ys_ctx *x, const yx_node *m, serve_scn *s)
{
    int rc = ys_read(x, m, &serve_schemas[SS_ATTACK], NULL, 0, s);
    const yx_node *v = yx_map_get(m, "channel");
    static const char *const names[] = {"ttft", "order"};
    if (!rc && v)
        rc = read_names(x, v, "channel", 2, leak_channel_from_name, names, 2, "channel", s->channel,
                        &s->n_channel);
    return rc;
}

/* A protocol name, or a mapping whose 'name' picks the protocol's defaults and whose other keys
 * replace them, each read with proto_cfg_schema()'s type and range (as a run scenario's). */
static int read_protocol(const ys_ctx *x, const yx_node *v, serve_scn *s)
{
    const yx_node *name = v->kind == YX_MAP ? yx_map_get(v, "name") : v;
    if (!name)
        return ys_fail(x, v, "write e.g. protocol: {name: semi2k, compat: spu}",
                       "missing required key 'name' in 'protocol'");
    int rc = ys_need_scalar(x, name, "protocol", "a protocol name");
    if (rc)
        return rc;
    const proto *pr = proto_find(name->str);
    if (!pr)
        return ys_fail(x, name, "semi2k or aby3", "unknown protocol '%s'", name->str);
    errbuf pe;
    if (proto_cfg_default(pr->name, &s->proto, &pe))
        return ys_fail_wrap(x, name, "see 'mpcsim list protocols'", "", pe.msg);
    snprintf(s->protocol, sizeof s->protocol, "%s", pr->name);
    s->have_proto = 1;
    if (v->kind != YX_MAP)
        return MS_OK;
    const ys_schema *ps = proto_cfg_schema();
    if ((rc = ys_read(x, v, ps, NULL, 0, &s->proto)))
        return rc;
    return proto_cfg_check_node(x, v, &s->proto);
}

int serve_scn_read(const char *path, serve_scn *s, errbuf *e)
{
    yx_node *root;
    int rc = yx_parse_file(path, &root, e);
    if (rc)
        return rc;
    ys_ctx x = {path, e, 0};
    snprintf(s->path, sizeof s->path, "%s", path);
    const char *base = strrchr(path, '/');
    snprintf(s->name, sizeof s->name, "%.*s", (int)strcspn(base ? base + 1 : path, "."),
             base ? base + 1 : path);
    rc = ys_read(&x, root, &serve_schemas[SS_ROOT], NULL, 0, s);
    const yx_node *nv = yx_map_get(root, "network");
    if (!rc && nv) { /* a preset or LATENCY/BANDWIDTH, by the rule of -n (net.h), at its place */
        net_cfg n;
        errbuf ne;
        if (net_parse(s->network, 2, &n, &ne))
            rc = ys_fail_wrap(&x, nv,
                              "a preset (mpcsim list networks) or LATENCY/BANDWIDTH, "
                              "e.g. 20ms/300Mbit/s",
                              "", ne.msg);
    }
    const yx_node *pv = yx_map_get(root, "protocol");
    if (!rc && pv)
        rc = read_protocol(&x, pv, s);
    static const struct {
        const char *key;
        int (*read)(const ys_ctx *, const yx_node *, serve_scn *);
    } sections[] = {{"workload", read_workload},
                    {"server", read_server},
                    {"sharing", read_sharing},
                    {"attack", read_attack}};
    for (size_t i = 0; !rc && i < sizeof sections / sizeof *sections; i++) {
        const yx_node *v = yx_map_get(root, sections[i].key);
        if (v)
            rc = sections[i].read(&x, v, s);
    }
    yx_free(root);
    return rc;
}
