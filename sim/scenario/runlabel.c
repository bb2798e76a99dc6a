/* runlabel.c — run labels: what tells two runs of a sweep apart, in a few characters. */
#include "runlabel.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"
#include "scn.h"
#include "sim/policy/policy.h"

/* Two parameter values are equal when both are the same number, or the same text. */
static int same_value(const char *a, const char *b)
{
    double x, y;
    if (!parse_double(a, &x) && !parse_double(b, &y))
        return x == y;
    return !strcmp(a, b);
}

/* key is one of the '|'-separated names in list. */
static int key_in(const char *list, const char *key)
{
    size_t len = strlen(key);
    for (const char *s = list; s && *s;) {
        const char *bar = strchr(s, '|');
        size_t k = bar ? (size_t)(bar - s) : strlen(s);
        if (k == len && !strncmp(s, key, k))
            return 1;
        s = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* The value of the run's parameter key, or NULL. */
static const char *param_val(const run_cfg *c, const char *key)
{
    for (size_t i = 0; i < c->policy.n_params; i++)
        if (!strcmp(c->policy.params[i].key, key))
            return c->policy.params[i].val;
    return NULL;
}

/* A budget parameter of the policy (policy_ops.budget_keys) that sizes the run's cache: a
 * non-zero value, and not a fraction X_ratio whose count X is set (H2O's heavy over
 * heavy_ratio). Such a parameter is named at its default too, so that a label tells the
 * budget the run had ("h2o(heavy_ratio=0.1,recent_ratio=0.1)", not a bare "h2o"). */
static int budget_in_force(const policy_ops *p, const run_cfg *c, const kv_param *kv)
{
    double v;
    if (!p || !p->budget_keys || !key_in(p->budget_keys, kv->key) ||
        (!parse_double(kv->val, &v) && v == 0))
        return 0;
    size_t len = strlen(kv->key);
    if (len > 6 && !strcmp(kv->key + len - 6, "_ratio")) {
        char count[64];
        snprintf(count, sizeof count, "%.*s", (int)(len - 6), kv->key);
        const char *cv = key_in(p->budget_keys, count) ? param_val(c, count) : NULL;
        if (cv && !(!parse_double(cv, &v) && v == 0))
            return 0;
    }
    return 1;
}

/* The policy's name, then open, the parameters set away from their defaults as key=value
 * separated by sep, and close (nothing after the name when there are none). The budget is
 * always spelled out: kv_budget F as "@F%" after the name, else the policy's budget
 * parameters in force even at their defaults (budget_in_force). */
static void policy_label(const run_cfg *c, char *out, size_t n, const char *open, const char *sep,
                         const char *close)
{
    const policy_ops *p = policy_find(c->policy.name);
    /* the schema the scenario was read with: 'name', the policy's own parameters, then the
     * replay's */
    const ys_schema *ps = p ? policy_schema(p) : NULL;
    size_t np = 0, nc;
    if (p)
        policy_params(p, &np);
    policy_common_params(&nc);
    size_t k = (size_t)snprintf(out, n, "%s", c->policy.name);
    int any = 0, has_budget = 0;
    /* kv_budget F as "@F%" after the name: "h2o@10%" */
    for (size_t i = 0; i < c->policy.n_params && k < n; i++) {
        double f;
        if (!strcmp(c->policy.params[i].key, "kv_budget") &&
            !parse_double(c->policy.params[i].val, &f)) {
            k += (size_t)snprintf(out + k, n - k, "@%g%%", f * 100);
            has_budget = 1;
        }
    }
    for (size_t i = 0; i < c->policy.n_params && k < n; i++) {
        const kv_param *kv = &c->policy.params[i];
        const ys_field *f = ps ? ys_find(ps, kv->key) : NULL;
        int replay = f && (size_t)(f - ps->field) > np + nc;
        if (!strcmp(kv->key, "kv_budget"))
            continue;
        const char *def = f && !replay ? (f->def ? f->def : "") : NULL;
        /* the replay's own keys (metric_stride, …) say how a run is measured, not which policy
         * configuration it is */
        if (replay ||
            (def && same_value(kv->val, def) && (has_budget || !budget_in_force(p, c, kv))))
            continue;
        k += (size_t)snprintf(out + k, n - k, "%s%s=%s", any ? sep : open, kv->key, kv->val);
        any = 1;
    }
    if (any && k < n)
        snprintf(out + k, n - k, "%s", close);
}

void run_label_policy(const run_cfg *c, char *out, size_t n)
{
    policy_label(c, out, n, "(", ",", ")");
}

void run_label_policy_words(const run_cfg *c, char *out, size_t n)
{
    policy_label(c, out, n, " ", " ", "");
}

/* A field's value as the scenario file writes it. */
static void field_text(const ys_field *f, const void *obj, char *out, size_t n)
{
    const char *v = (const char *)obj + f->off;
    int k = 0, nn = 0;
    switch (f->type) {
    case YS_INT: snprintf(out, n, "%d", *(const int *)v); break;
    case YS_U32: snprintf(out, n, "%u", *(const uint32_t *)v); break;
    case YS_U64: snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)v); break;
    case YS_BOOL: snprintf(out, n, "%s", *(const int *)v ? "true" : "false"); break;
    case YS_DBL: snprintf(out, n, "%g", *(const double *)v); break;
    case YS_STR: snprintf(out, n, "%s", v); break;
    case YS_ENUM:
        k = *(const int *)v;
        while (f->names[nn])
            nn++;
        snprintf(out, n, "%s", k >= 0 && k < nn ? f->names[k] : "?");
        break;
    default: snprintf(out, n, "?"); break;
    }
}

/* A field that another, later field of the schema also stores (trunc_local, read as 'trunc'
 * too): the later one names it. */
static int aliased(const ys_schema *s, size_t i)
{
    for (size_t j = i + 1; j < s->n; j++)
        if (s->field[j].off == s->field[i].off && s->field[j].size == s->field[i].size &&
            s->field[j].type != YS_OTHER)
            return 1;
    return 0;
}

void run_label_protocol(const proto_cfg *p, char *out, size_t n)
{
    proto_cfg def;
    errbuf e;
    /* a framework profile joins the name ("aby3/spu"); its keys are not listed again */
    int prof = p->compat[0] && strcmp(p->compat, "native");
    size_t k = (size_t)snprintf(out, n, "%s%s%s", p->name, prof ? "/" : "", prof ? p->compat : "");
    if (proto_cfg_default(p->name, &def, &e))
        return;
    const ys_schema *s = proto_cfg_schema();
    int any = 0;
    for (size_t i = 0; i < s->n && k < n; i++) {
        const ys_field *f = &s->field[i];
        if (f->type == YS_OTHER || aliased(s, i) || ys_field_equal(f, p, &def) ||
            !strcmp(f->key, "compat"))
            continue;
        char v[64];
        field_text(f, p, v, sizeof v);
        k += (size_t)snprintf(out + k, n - k, "%s%s=%s", any ? "," : "(", f->key, v);
        any = 1;
    }
    if (any && k < n)
        snprintf(out + k, n - k, ")");
}

/* "0.1ms", "20ms", "1.5s"; "300 Mbit/s", "10 Gbit/s" (the units every output writes a rate
 * in, as net_rate_str). */
static void fmt_latency(char *out, size_t n, double ms)
{
    if (ms >= 1000)
        snprintf(out, n, "%gs", ms / 1000);
    else if (ms >= 0.01 || ms == 0)
        snprintf(out, n, "%gms", ms);
    else
        snprintf(out, n, "%gus", ms * 1000);
}

static void fmt_bandwidth(char *out, size_t n, double mbps)
{
    if (mbps >= 1000)
        snprintf(out, n, "%g Gbit/s", mbps / 1000);
    else if (mbps >= 1)
        snprintf(out, n, "%g Mbit/s", mbps);
    else
        snprintf(out, n, "%g kbit/s", mbps * 1000);
}

void run_label_network(const run_cfg *c, char *out, size_t n, double *lat_ms, double *bw_mbps)
{
    const net_cfg *net = &c->net;
    int P = net->n_parties, uniform = 1;
    double lat = 0, bw = INFINITY;
    const net_link *first = NULL;
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
            if (i == j)
                continue;
            const net_link *l = &net->link[i][j];
            if (!first)
                first = l;
            else if (l->latency_ns != first->latency_ns || l->bandwidth_bps != first->bandwidth_bps)
                uniform = 0;
            lat = fmax(lat, (double)l->latency_ns / 1e6); /* 100000 ns: 0.1 exactly */
            bw = fmin(bw, l->bandwidth_bps / 1e6);
        }
    if (!first)
        bw = 0;
    *lat_ms = lat;
    *bw_mbps = bw;
    char l[32], b[32];
    fmt_latency(l, sizeof l, lat);
    fmt_bandwidth(b, sizeof b, bw);
    size_t k;
    if (c->net_ref[0] && strcmp(c->net_ref, "custom"))
        k = (size_t)snprintf(out, n, "%s", c->net_ref);
    else if (uniform)
        k = (size_t)snprintf(out, n, "%s/%s", l, b);
    else if (net->name[0] && strcmp(net->name, "custom"))
        k = (size_t)snprintf(out, n, "%s", net->name);
    else
        k = (size_t)snprintf(out, n, "%s/%s+", l, b);
    /* the framing the links carry: the same links cost more bytes under TCP or TLS */
    const net_wire *w = &net->wire, tcp = NET_WIRE_TCP;
    net_wire bare = *w;
    bare.tls_record = bare.tls_overhead = 0;
    if (w->mtu && k < n)
        snprintf(out + k, n - k, " %s%s", w->tls_record ? "tls" : "tcp",
                 memcmp(&bare, &tcp, sizeof tcp) ||
                         (w->tls_record && (w->tls_record != NET_WIRE_TLS13_RECORD ||
                                            w->tls_overhead != NET_WIRE_TLS13_OVERHEAD))
                     ? "*"
                     : "");
}

void run_label_model(const run_cfg *c, char *out, size_t n)
{
    if (c->model_ref[0] && strcmp(c->model_ref, "inline")) {
        snprintf(out, n, "%s", c->model_ref);
        return;
    }
    const char *name = c->model.name[0] ? c->model.name : "inline";
    size_t k = (size_t)snprintf(out, n, "%s", name);
    /* a shipped model with keys replaced keeps its name: the keys join it, as a policy's
     * parameters do */
    model_cfg base;
    errbuf e;
    if (strchr(name, '/') || strstr(name, ".yaml") || model_load(name, &base, &e))
        return;
    const ys_schema *ms = model_schema();
    int any = 0;
    for (size_t i = 0; i < ms->n && k < n; i++) {
        const ys_field *f = &ms->field[i];
        if (f->type == YS_FIXED || f->type == YS_OTHER || f->type == YS_INFO ||
            !strcmp(f->key, "name") || ys_field_equal(f, &c->model, &base))
            continue;
        char v[64];
        field_text(f, &c->model, v, sizeof v);
        k += (size_t)snprintf(out + k, n - k, "%s%s=%s", any ? "," : "(", f->key, v);
        any = 1;
    }
    if (any && k < n)
        snprintf(out + k, n - k, ")");
}

void run_labels(const run_cfg *c, rdb_labels *l)
{
    memset(l, 0, sizeof *l);
    run_label_model(c, l->model, sizeof l->model);
    run_label_network(c, l->network, sizeof l->network, &l->latency_ms, &l->bandwidth_mbps);
    run_label_policy(c, l->policy_label, sizeof l->policy_label);
    run_label_protocol(&c->proto, l->protocol_label, sizeof l->protocol_label);
    snprintf(l->machine, sizeof l->machine, "%s", c->machine.name);
    l->threads = c->machine.threads;
}

static const char *scalar(const yx_node *m, const char *key)
{
    const yx_node *v = yx_map_get(m, key);
    return v && v->kind == YX_SCALAR ? v->str : NULL;
}

/* A stored config that no longer loads (a run a newer mpcsim refuses at load time, e.g. a
 * policy that needs a trace without one): its labels read off the canonical YAML itself —
 * the model's name, the policy and its parameters against the defaults, the network's preset
 * or values. */
static int labels_from_tree(const yx_node *root, rdb_labels *l)
{
    const yx_node *model = yx_map_get(root, "model"), *net = yx_map_get(root, "network"),
                  *mach = yx_map_get(root, "machine"), *pols = yx_map_get(root, "policies");
    const yx_node *pol = pols && pols->kind == YX_SEQ && pols->n ? pols->item[0] : NULL;
    const char *name = pol ? scalar(pol, "name") : NULL;
    if (!model || !net || !name)
        return -1;
    memset(l, 0, sizeof *l);
    const char *mn = scalar(model, "name"), *base = scalar(model, "base");
    snprintf(l->model, sizeof l->model, "%s", mn ? mn : base ? base : "inline");
    run_cfg c;
    memset(&c, 0, sizeof c);
    snprintf(c.policy.name, sizeof c.policy.name, "%s", name);
    for (size_t i = 0; i < pol->n && c.policy.n_params < RUN_MAX_PARAMS; i++)
        if (strcmp(pol->key[i]->str, "name") && pol->item[i]->kind == YX_SCALAR) {
            kv_param *kv = &c.policy.params[c.policy.n_params++];
            snprintf(kv->key, sizeof kv->key, "%s", pol->key[i]->str);
            snprintf(kv->val, sizeof kv->val, "%s", pol->item[i]->str);
        }
    run_label_policy(&c, l->policy_label, sizeof l->policy_label);
    /* the protocol: its defaults, the stored keys over them (one it no longer knows is left
     * out), then what the absent keys meant */
    const yx_node *pm = yx_map_get(root, "protocol");
    const char *pn = !pm                     ? NULL
                     : pm->kind == YX_MAP    ? scalar(pm, "name")
                     : pm->kind == YX_SCALAR ? pm->str
                                             : NULL;
    proto_cfg pc;
    errbuf pe;
    if (!pn || proto_cfg_default(pn, &pc, &pe))
        snprintf(l->protocol_label, sizeof l->protocol_label, "%s", pn ? pn : "?");
    else {
        for (size_t i = 0; pm->kind == YX_MAP && i < pm->n; i++)
            if (strcmp(pm->key[i]->str, "name") && pm->item[i]->kind == YX_SCALAR)
                (void)proto_cfg_set(&pc, pm->key[i]->str, pm->item[i]->str, &pe);
        scn_stored_protocol(root, &pc);
        run_label_protocol(&pc, l->protocol_label, sizeof l->protocol_label);
    }
    const char *lat = scalar(net, "latency_ns"), *bw = scalar(net, "bandwidth_bps"),
               *preset = scalar(net, "preset"), *nn = scalar(net, "name");
    double ns = 0, bps = 0;
    if (!lat || !bw || parse_double(lat, &ns) || parse_double(bw, &bps))
        return -1;
    l->latency_ms = ns / 1e6;
    l->bandwidth_mbps = bps / 1e6;
    const yx_node *links = yx_map_get(net, "links");
    if (preset && nn && !strcmp(preset, nn) && !links)
        snprintf(l->network, sizeof l->network, "%s", preset);
    else if (links && nn && strcmp(nn, "custom"))
        snprintf(l->network, sizeof l->network, "%s", nn);
    else {
        char a[24], b[24];
        fmt_latency(a, sizeof a, l->latency_ms);
        fmt_bandwidth(b, sizeof b, l->bandwidth_mbps);
        snprintf(l->network, sizeof l->network, "%s/%s%s", a, b, links ? "+" : "");
    }
    const char *mname = mach ? scalar(mach, "name") : NULL,
               *th = mach ? scalar(mach, "threads") : NULL;
    double t = 1;
    snprintf(l->machine, sizeof l->machine, "%s", mname ? mname : "default");
    l->threads = th && !parse_double(th, &t) ? (int)t : 1;
    return 0;
}

int run_labels_from_yaml(const char *config_yaml, rdb_labels *out)
{
    scenario s;
    errbuf e;
    yx_node *root = NULL;
    if (!config_yaml || yx_parse("stored config", config_yaml, strlen(config_yaml), &root, &e))
        return -1;
    int rc = -1;
    if (scn_load("stored config", config_yaml, &s, &e) == MS_OK) {
        if (s.n_runs == 1) {
            /* the protocol as it ran: the keys the canonical YAML leaves out */
            scn_stored_protocol(root, &s.runs[0].proto);
            run_labels(&s.runs[0], out);
            rc = 0;
        }
        scn_free(&s);
    }
    if (rc)
        rc = labels_from_tree(root, out);
    yx_free(root);
    return rc;
}
