/* runrow.c — a finished run as a database row (runrow.h). */
#include "runrow.h"

#include <stdlib.h>
#include <string.h>

#include "runlabel.h"
#include "sim/policy/pcheck.h"
#include "sim/policy/policy.h"

static void to_stats(const sim_stats *s, rdb_stats *d)
{
    memset(d, 0, sizeof *d);
    d->rounds = s->rounds;
    for (int p = 0; p < MPC_PARTIES_MAX && p < RDB_PARTIES; p++) {
        d->bytes[p] = s->bytes_sent[p];
        d->offline[p] = s->offline_bytes[p];
    }
    d->compute_ns = s->compute_ns;
    d->comm_ns = s->comm_ns;
}

typedef struct store_rows {
    rdb_metric *m;
    rdb_phase ph[PHASE_N];
    rdb_breakdown bd[PHASE_N * (OPC_N + 1)];
    rdb_layer *ly;
} store_rows;

int run_row_store(rdb *db, const run_cfg *c, const pool_result *j, int *stored, errbuf *e)
{
    const run_result *res = &j->res;
    store_rows w = {0};
    size_t nl = 0, nb = 0;
    for (int p = 0; p < PHASE_N; p++)
        nl += res->phase[p].layer ? res->phase[p].n_layers : 0;
    w.m = calloc(res->n_metric + 1, sizeof *w.m);
    w.ly = calloc(nl + 1, sizeof *w.ly);
    if (!w.m || !w.ly) {
        free(w.m);
        free(w.ly);
        return err_set(e, MS_ERR_NOMEM, "out of memory storing a run");
    }
    for (size_t i = 0; i < res->n_metric; i++)
        w.m[i] = (rdb_metric){res->metric[i].name, res->metric[i].value, res->metric[i].unit};
    nl = 0;
    for (int p = 0; p < PHASE_N; p++) {
        const sim_result *r = &res->phase[p];
        w.ph[p] = (rdb_phase){op_phase_name(p), r->latency_ns, r->events};
        w.bd[nb].phase = op_phase_name(p);
        w.bd[nb].category = "total";
        to_stats(&r->total, &w.bd[nb++].s);
        for (int k = 0; k < OPC_N; k++) {
            w.bd[nb].phase = op_phase_name(p);
            w.bd[nb].category = op_cat_name(k);
            to_stats(&r->cat[k], &w.bd[nb++].s);
        }
        for (size_t l = 0; r->layer && l < r->n_layers; l++) {
            w.ly[nl].phase = op_phase_name(p);
            w.ly[nl].layer = (int)l;
            to_stats(&r->layer[l], &w.ly[nl++].s);
        }
    }
    rdb_labels l;
    run_labels(c, &l);
    rdb_run row = {.policy_label = l.policy_label,
                   .policy_cost = pcheck_cost_word(policy_find(c->policy.name)),
                   .protocol_label = l.protocol_label,
                   .latency_ms = l.latency_ms,
                   .bandwidth_mbps = l.bandwidth_mbps,
                   .machine = l.machine,
                   .threads = l.threads,
                   .scenario = c->scenario,
                   .grid_index = c->index,
                   .config_hash = c->hash,
                   .config_yaml = c->yaml,
                   .seed = c->seed,
                   .status = j->rc ? "failed" : "ok",
                   .error = j->rc ? j->err.msg : NULL,
                   .started = j->started,
                   .finished = j->finished,
                   .wall_s = res->wall_s,
                   .tool_version = MPCSIM_VERSION,
                   .model = l.model,
                   .protocol = c->proto_ref[0] ? c->proto_ref : c->proto.name,
                   .network = l.network,
                   .policy = c->policy.name,
                   .prompt_len = c->work.prompt_len,
                   .decode_len = c->work.decode_len,
                   .batch = c->work.batch,
                   .metric = w.m,
                   .n_metric = res->n_metric,
                   .phase = w.ph,
                   .n_phase = j->rc ? 0 : PHASE_N,
                   .breakdown = w.bd,
                   .n_breakdown = j->rc ? 0 : nb,
                   .layer = w.ly,
                   .n_layer = j->rc ? 0 : nl};
    if (j->rc)
        row.n_metric = 0;
    int64_t id = 0;
    int rc = rdb_run_put(db, &row, &id, e);
    if (rc == MS_OK && stored)
        *stored = id != 0;
    free(w.m);
    free(w.ly);
    return rc;
}
