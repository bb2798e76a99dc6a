/* stepcost.c — one step through lowering, protocol costing and simulation; memoized per
 * (phase, tokens, kv_len) for the serving simulation. */
#include "stepcost.h"

#include <stdlib.h>
#include <string.h>

/* ---- one step ---------------------------------------------------------------------------- */

int step_simulate(const step_env *env, const lower_opts *lo, op_program *prog, cost_log *log,
                  sim_result *out, errbuf *e)
{
    return step_simulate_memo(env, NULL, lo, prog, log, out, e);
}

int step_simulate_memo(const step_env *env, cost_memo *memo, const lower_opts *lo, op_program *prog,
                       cost_log *log, sim_result *out, errbuf *e)
{
    int rc = lower_step(env->model, lo, prog, e);
    if (rc != MS_OK)
        return rc;
    rc = proto_cost_program_memo(env->pr, env->pcfg, prog, log, memo, e);
    if (rc != MS_OK)
        return rc;
    return sim_run(env->net, env->mach, prog, log, &env->sim, out, e);
}

/* ---- memo -------------------------------------------------------------------------------- */

typedef struct sc_entry {
    uint64_t key; /* phase | tokens | kv_len, 0 = empty slot */
    step_figures fig;
} sc_entry;

struct stepcost {
    model_cfg model;
    proto_cfg pcfg;
    net_cfg net;
    machine_profile mach;
    const proto *pr;
    uint32_t batch;
    step_env env;
    op_program prog;
    cost_log log;
    sim_ws *ws;
    cost_memo *memo;
    sc_entry *tab;
    size_t n, cap; /* open addressing, cap a power of two */
};

int stepcost_open(const run_cfg *cfg, stepcost **out, errbuf *e)
{
    const char *pname = cfg->proto.name[0] ? cfg->proto.name : cfg->proto_ref;
    const proto *pr = proto_find(pname);
    if (!pr)
        return err_set(e, MS_ERR_NOTFOUND, "stepcost: unknown protocol '%s'", pname);
    if (cfg->net.n_parties != pr->n_parties)
        return err_set(e, MS_ERR_INPUT, "stepcost: network '%s' has %d parties, %s needs %d",
                       cfg->net.name, cfg->net.n_parties, pr->name, pr->n_parties);
    stepcost *s = calloc(1, sizeof *s);
    if (!s || !(s->tab = calloc(64, sizeof *s->tab)) || !(s->ws = sim_ws_new()) ||
        !(s->memo = cost_memo_new())) {
        if (s) {
            free(s->tab);
            sim_ws_free(s->ws);
        }
        free(s);
        return err_set(e, MS_ERR_NOMEM, "stepcost: out of memory");
    }
    s->cap = 64;
    s->model = cfg->model;
    s->pcfg = cfg->proto;
    s->net = cfg->net;
    s->mach = cfg->machine;
    if (!(s->mach.rate[WK_MAC] > 0))
        machine_default(&s->mach);
    s->pr = pr;
    s->batch = cfg->work.batch ? cfg->work.batch : 1;
    s->env = (step_env){&s->model, pr,       &s->pcfg,
                        &s->net,   &s->mach, {.overlap = cfg->overlap, .ws = s->ws}};
    op_program_init(&s->prog);
    cost_log_init(&s->log, pr->n_parties);
    *out = s;
    return MS_OK;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static sc_entry *find_slot(stepcost *s, uint64_t key)
{
    size_t i = mix(key) & (s->cap - 1);
    while (s->tab[i].key && s->tab[i].key != key)
        i = (i + 1) & (s->cap - 1);
    return &s->tab[i];
}

static int grow(stepcost *s)
{
    sc_entry *old = s->tab;
    size_t oc = s->cap;
    s->tab = calloc(oc * 2, sizeof *s->tab);
    if (!s->tab) {
        s->tab = old;
        return -1;
    }
    s->cap = oc * 2;
    for (size_t i = 0; i < oc; i++)
        if (old[i].key)
            *find_slot(s, old[i].key) = old[i];
    free(old);
    return 0;
}

int stepcost_get(stepcost *s, int phase, uint32_t n_tokens, uint32_t kv_len, step_figures *out,
                 errbuf *e)
{
    if (phase != PHASE_PREFILL && phase != PHASE_DECODE)
        return err_set(e, MS_ERR_INPUT, "stepcost: bad phase %d", phase);
    uint64_t key = ((uint64_t)(phase + 1) << 62) | ((uint64_t)n_tokens << 31) | kv_len;
    if (n_tokens >= (1u << 31) || kv_len >= (1u << 31))
        return err_set(e, MS_ERR_RANGE, "stepcost: step too large");
    sc_entry *slot = find_slot(s, key);
    if (slot->key) {
        *out = slot->fig;
        return MS_OK;
    }
    lower_opts lo;
    lower_opts_default(&lo);
    lo.phase = phase;
    lo.n_tokens = n_tokens;
    lo.kv_len = kv_len;
    lo.n_seqs = s->batch;
    op_program_clear(&s->prog);
    sim_result r;
    int rc = step_simulate_memo(&s->env, s->memo, &lo, &s->prog, &s->log, &r, e);
    if (rc != MS_OK)
        return rc;
    step_figures f = {.latency_ns = r.latency_ns, .rounds = r.total.rounds};
    for (int p = 0; p < MPC_PARTIES_MAX; p++) {
        f.bytes += r.total.bytes_sent[p];
        f.offline_bytes += r.total.offline_bytes[p];
    }
    sim_result_free(&r);
    if (2 * (s->n + 1) > s->cap) {
        if (grow(s))
            return err_set(e, MS_ERR_NOMEM, "stepcost: out of memory");
        slot = find_slot(s, key);
    }
    slot->key = key;
    slot->fig = f;
    s->n++;
    *out = f;
    return MS_OK;
}

void stepcost_close(stepcost *s)
{
    if (!s)
        return;
    op_program_free(&s->prog);
    cost_log_free(&s->log);
    free(s->tab);
    sim_ws_free(s->ws);
    cost_memo_free(s->memo);
    free(s);
}
