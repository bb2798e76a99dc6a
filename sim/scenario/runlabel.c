/* runlabel.c — run labels: what tells two runs of a sweep apart, in a few characters. */
#include "runlabel.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

void run_label_policy(const run_cfg *c, char *out, size_t n)
{
    const policy_ops *p = policy_find(c->policy.name);
    size_t np = 0, nr = 0;
    const policy_param *pp = p ? policy_params(p, &np) : NULL, *rp = policy_replay_params(&nr);
    size_t k = (size_t)snprintf(out, n, "%s", c->policy.name);
    int any = 0;
    for (size_t i = 0; i < c->policy.n_params && k < n; i++) {
        const kv_param *kv = &c->policy.params[i];
        const char *def = NULL;
        int replay = 0;
        for (size_t j = 0; j < np; j++)
            if (!strcmp(pp[j].key, kv->key))
                def = pp[j].def ? pp[j].def : "";
        for (size_t j = 0; !def && j < nr; j++)
            if (!strcmp(rp[j].key, kv->key))
                replay = 1;
        /* the replay's own keys (metric_stride, …) say how a run is measured, not which policy
         * configuration it is */
        if (replay || (def && same_value(kv->val, def)))
            continue;
        k += (size_t)snprintf(out + k, n - k, "%s%s=%s", any ? "," : "(", kv->key, kv->val);
        any = 1;
    }
    if (any && k < n)
        snprintf(out + k, n - k, ")");
}

/* "0.1ms", "20ms", "1.5s"; "300Mbps", "10Gbps". */
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
        snprintf(out, n, "%gGbps", mbps / 1000);
    else if (mbps >= 1)
        snprintf(out, n, "%gMbps", mbps);
    else
        snprintf(out, n, "%gkbps", mbps * 1000);
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
    if (c->net_ref[0] && strcmp(c->net_ref, "custom"))
        snprintf(out, n, "%s", c->net_ref);
    else if (uniform)
        snprintf(out, n, "%s/%s", l, b);
    else if (net->name[0] && strcmp(net->name, "custom"))
        snprintf(out, n, "%s", net->name);
    else
        snprintf(out, n, "%s/%s+", l, b);
}

const char *run_label_model(const run_cfg *c)
{
    if (c->model_ref[0] && strcmp(c->model_ref, "inline"))
        return c->model_ref;
    return c->model.name[0] ? c->model.name : "inline";
}

void run_labels(const run_cfg *c, rdb_labels *l)
{
    memset(l, 0, sizeof *l);
    snprintf(l->model, sizeof l->model, "%s", run_label_model(c));
    run_label_network(c, l->network, sizeof l->network, &l->latency_ms, &l->bandwidth_mbps);
    run_label_policy(c, l->policy_label, sizeof l->policy_label);
    snprintf(l->machine, sizeof l->machine, "%s", c->machine.name);
    l->threads = c->machine.threads;
}

int run_labels_from_yaml(const char *config_yaml, rdb_labels *out)
{
    scenario s;
    errbuf e;
    if (scn_load("stored config", config_yaml, &s, &e))
        return -1;
    int rc = s.n_runs == 1 ? 0 : -1;
    if (!rc)
        run_labels(&s.runs[0], out);
    scn_free(&s);
    return rc;
}
