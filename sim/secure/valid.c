/* valid.c — predicted against measured figures of one secure-inference step (valid.h). */
#include "valid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/engine/simulate.h"

double valid_err_pct(uint64_t pred, uint64_t meas)
{
    return meas ? 100.0 * ((double)pred - (double)meas) / (double)meas : 0.0;
}

/* Per op and party: the measured counters against the cost log's rounds of that op. */
static void compare_ops(const op_program *p, const cost_log *log, const secinf_result *r,
                        uint32_t s, const net_wire *w, valid_row *row)
{
    uint32_t np = r->n_parties;
    cost_totals *per = calloc(p->n_ops ? p->n_ops : 1, sizeof *per);
    /* [op][party]: the stream bytes of every message the party sends in the op's rounds */
    uint64_t *wire = calloc((p->n_ops ? p->n_ops : 1) * np, sizeof *wire);
    for (size_t q = 0; per && wire && q < log->n; q++)
        if (log->r[q].op < p->n_ops) {
            cost_totals_add_round(&per[log->r[q].op], &log->r[q], (int)np);
            for (uint32_t i = 0; i < np; i++)
                for (uint32_t d = 0; d < np; d++)
                    wire[log->r[q].op * np + i] += net_wire_stream_bytes(w, log->r[q].bytes[i][d]);
        }
    row->ops = (uint32_t)p->n_ops;
    for (size_t k = 0; per && wire && k < p->n_ops; k++) {
        int bad = 0, wbad = 0;
        for (uint32_t i = 0; i < np; i++) {
            const mpc_op_stat *m = &r->st[(size_t)s * r->n_nodes + i].ops[k];
            uint64_t sent = 0;
            for (int j = 0; j < MPC_NODES_MAX; j++)
                sent += m->sent[j];
            row->meas.bytes[i] += sent;
            row->meas_offline += m->offline_recv;
            if (i < RDB_PARTIES) {
                row->pred_wire[i] += wire[k * np + i];
                row->meas_wire[i] += m->wire_sent;
            }
            wbad |= m->wire_sent != wire[k * np + i];
            if (i == 0)
                row->meas.rounds += m->rounds;
            if (m->rounds != per[k].rounds || sent != per[k].bytes_sent[i] ||
                m->offline_recv != per[k].offline_bytes[i]) {
                if (!bad && !row->ops_mismatched)
                    snprintf(
                        row->first_mismatch, sizeof row->first_mismatch,
                        "op %zu (%s) P%u: measured %llu rounds, %llu bytes, predicted %llu, %llu",
                        k, op_kind_name(p->ops[k].kind), i, (unsigned long long)m->rounds,
                        (unsigned long long)sent, (unsigned long long)per[k].rounds,
                        (unsigned long long)per[k].bytes_sent[i]);
                bad = 1;
            }
        }
        row->ops_mismatched += (uint32_t)bad;
        row->wire_mismatched += (uint32_t)wbad;
    }
    free(per);
    free(wire);
}

int valid_step(const secinf_opts *o, const secinf_result *r, uint32_t s, const net_cfg *net,
               const machine_profile *mach, valid_row *row, errbuf *e)
{
    memset(row, 0, sizeof *row);
    const proto *pr = proto_find(o->cfg.name);
    if (!pr || s >= r->n_steps)
        return err_set(e, MS_ERR_INTERNAL, "validation: step %u of %u", s, r->n_steps);
    op_program p;
    op_program_init(&p);
    cost_log log;
    cost_log_init(&log, pr->n_parties);
    sim_result sr;
    memset(&sr, 0, sizeof sr);
    int rc = secinf_step_program(o, s, &p, e);
    /* the public counts P0 synced (topk quickselect's partitions) replayed: the cost engine
     * then prices the partitions the backend ran (cost_tape, proto.h) */
    uint64_t *tn = NULL, *ts = NULL;
    cost_tape tape = {NULL, NULL, 0};
    if (!rc && p.n_ops == r->n_ops[s]) {
        const mpc_op_stat *st = r->st[(size_t)s * r->n_nodes].ops;
        tn = calloc(p.n_ops + 1, sizeof *tn), ts = calloc(p.n_ops + 1, sizeof *ts);
        if (!tn || !ts)
            rc = err_set(e, MS_ERR_NOMEM, "validation: out of memory");
        for (size_t k = 0; !rc && k < p.n_ops; k++)
            tn[k] = st[k].pub_n, ts[k] = st[k].pub_sum;
        tape = (cost_tape){tn, ts, p.n_ops};
    }
    if (!rc)
        rc = proto_cost_program_tape(pr, &o->cfg, &p, tape.n ? &tape : NULL, &log, e);
    free(tn), free(ts);
    sim_opts so = {0};
    if (!rc)
        rc = sim_run(net, mach, &p, &log, &so, &sr, e);
    if (!rc && p.n_ops != r->n_ops[s])
        rc = err_set(e, MS_ERR_INTERNAL, "validation: step %u has %zu ops here, %u at the backend",
                     s, p.n_ops, r->n_ops[s]);
    if (!rc) {
        row->phase = s ? PHASE_DECODE : PHASE_PREFILL;
        row->n_tokens = s ? 1 : o->prefill;
        row->kv_len = s ? o->prefill + s - 1 : 0;
        snprintf(row->item, sizeof row->item, "%s:%s", o->model->name, op_phase_name(row->phase));
        cost_totals t;
        memset(&t, 0, sizeof t);
        for (size_t q = 0; q < log.n; q++)
            cost_totals_add_round(&t, &log.r[q], pr->n_parties);
        row->pred.rounds = t.rounds;
        for (int i = 0; i < pr->n_parties && i < RDB_PARTIES; i++) {
            row->pred.bytes[i] = t.bytes_sent[i];
            row->pred_offline += t.offline_bytes[i];
        }
        row->pred_ns = sr.latency_ns;
        compare_ops(&p, &log, r, s, &net->wire, row);
        for (uint32_t i = 0; i < r->n_parties; i++) {
            uint64_t ns = r->st[(size_t)s * r->n_nodes + i].ns;
            row->meas_ns = ns > row->meas_ns ? ns : row->meas_ns;
        }
    }
    sim_result_free(&sr);
    cost_log_free(&log);
    op_program_free(&p);
    return rc;
}

int valid_store(rdb *db, const char *session, const char *protocol, const valid_row *row,
                uint64_t latency_ns, double bandwidth_bps, const char *shaping, errbuf *e)
{
    rdb_validation v = {.session = session,
                        .tool_version = MPCSIM_VERSION,
                        .protocol = protocol,
                        .item = row->item,
                        .phase = op_phase_name(row->phase),
                        .n = row->n_tokens,
                        .kv_len = row->kv_len,
                        .latency_ns = latency_ns,
                        .bandwidth_bps = bandwidth_bps,
                        .shaping = shaping,
                        .pred = row->pred,
                        .meas = row->meas,
                        .pred_offline = row->pred_offline,
                        .meas_offline = row->meas_offline,
                        .pred_ns = row->pred_ns,
                        .meas_ns = row->meas_ns};
    return rdb_validation_put(db, &v, e);
}

/* ---- the loopback's own round time ------------------------------------------------------- */

#define PING_ROUNDS 200

static int ping_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    (void)arg;
    (void)net;
    mpc_val x = {0};
    uint64_t one = 1, v;
    int rc = e->vt->alloc(e, &x, 1, DOM_ARITH);
    if (!rc)
        rc = e->vt->input(e, &x, 0, &one);
    if (!rc)
        rc = e->vt->open(e, &v, &x, -1); /* start together */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; !rc && i < PING_ROUNDS; i++)
        rc = e->vt->open(e, &v, &x, -1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ns = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
    if (!rc)
        fwrite(&ns, sizeof ns, 1, out);
    else
        err_set(err, rc, "%s", mpc_engine_error(e));
    e->vt->release(e, &x);
    return rc;
}

int valid_round_ns(const proto_cfg *cfg, uint64_t latency_ns, const netshape *shape, int plaintext,
                   uint64_t *ns, errbuf *e)
{
    mpc_launch l = {.cfg = *cfg,
                    .latency_ns = latency_ns,
                    .deadline_ms = 30000 + (int)(latency_ns / 2000),
                    .plaintext = plaintext};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes = 0;
    int rc = shape ? netshape_launch(shape, &l, ping_node, NULL, nr, &nodes, e)
                   : mpc_launch_run(&l, ping_node, NULL, nr, &nodes, e);
    *ns = 0;
    int f = rc ? -1 : mpc_launch_failed(nr, nodes);
    if (f >= 0)
        rc = err_set(e, nr[f].rc, "round-time probe: node %d: %s", f, nr[f].err);
    for (int i = 0; !rc && i < nodes; i++) {
        uint64_t t;
        if (nr[i].out_len >= sizeof t && (memcpy(&t, nr[i].out, sizeof t), t / PING_ROUNDS > *ns))
            *ns = t / PING_ROUNDS;
    }
    if (nodes)
        mpc_node_results_free(nr, nodes);
    *ns = *ns > latency_ns ? *ns - latency_ns : 0;
    return rc;
}
