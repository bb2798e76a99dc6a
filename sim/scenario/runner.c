/* runner.c — one run: replay the policy step by step, lower each step, cost it, simulate it,
 * and add up the prefill and the decode phase.
 *
 * Decode step s (0-based) sees kv_len = prompt_len + s cached entries. Steps with the same
 * kept vector, kv_len and policy ops are the same op program: they are simulated once
 * (memo). With work.decode_stride = k, only steps 0, k, 2k, … are costed; each stands for
 * itself and the k − 1 steps after it (the policy still replays every step). A step whose ops
 * hold one-time work (policy_ops.one_time: MPCache's compaction after its threshold prompt)
 * stands for itself only, and the step after it is costed too, standing for the rest of that
 * stride (so the one-time work is counted once); the steady step and the one-time work are
 * also reported apart (decode_sum). TTFT: the
 * prefill in MPC ends with the LM head, which yields the first token; without an MPC prefill
 * the first token is decode step 0's. */
#include "runner.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/lower.h"
#include "sim/replay/replay.h"
#include "sim/engine/stepcost.h"

/* ---- run result --------------------------------------------------------------------------- */

void run_result_init(run_result *r) { memset(r, 0, sizeof *r); }

void run_result_free(run_result *r)
{
    free(r->metric);
    for (int p = 0; p < PHASE_N; p++)
        sim_result_free(&r->phase[p]);
    memset(r, 0, sizeof *r);
}

int run_metric_add(run_result *r, const char *name, double value, const char *unit)
{
    if (r->n_metric == r->cap_metric) {
        size_t nc = r->cap_metric ? 2 * r->cap_metric : 32;
        run_metric *nm = realloc(r->metric, nc * sizeof *nm);
        if (!nm)
            return MS_ERR_NOMEM;
        r->metric = nm;
        r->cap_metric = nc;
    }
    run_metric *m = &r->metric[r->n_metric++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->unit, sizeof m->unit, "%s", unit ? unit : "");
    m->value = value;
    return MS_OK;
}

static int sink_add(void *ctx, const char *name, double value, const char *unit)
{
    return run_metric_add(ctx, name, value, unit);
}

metric_sink run_result_sink(run_result *r) { return (metric_sink){sink_add, r}; }

/* ---- decode-step memo --------------------------------------------------------------------- */

typedef struct step_key {
    uint32_t kv_len;
    uint64_t hash;  /* of kept[] and the policy's ops */
    uint32_t *kept; /* owned copy, compared on a hash match */
    size_t n_kept;
    sim_result res;
} step_key;

typedef struct runner {
    const run_cfg *cfg;
    step_env env;
    machine_profile mach;
    op_program prog;
    cost_log log;
    uint32_t *kept; /* L·Hkv kept rows, then L FFN widths and the FFN pattern flag (a step's
                     * shape: hashed and compared by the memo) */
    size_t n_kept;
    int attended_cache, has_ffn;
    step_key *memo;
    size_t n_memo, cap_memo;
    uint64_t simulated; /* steps actually simulated */
    sim_ws *ws;
    cost_memo *cmemo; /* op costs across steps */
} runner;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Hash of the kept vector and of the ops the policy emitted (field by field: no padding). */
static uint64_t step_hash(const runner *R, uint32_t kv_len)
{
    uint64_t h = fnv(0xcbf29ce484222325ull, &kv_len, sizeof kv_len);
    h = fnv(h, R->kept, R->n_kept * sizeof *R->kept);
    for (size_t i = 0; i < R->prog.n_ops; i++) {
        const op *o = &R->prog.ops[i];
        uint32_t f[12] = {o->kind, o->phase, o->cat, (uint32_t)o->layer, (uint32_t)o->group,
                          o->batch, o->m, o->k, o->n, o->flags, (uint32_t)o->iarg, o->out};
        h = fnv(h, f, sizeof f);
        h = fnv(h, o->in, sizeof o->in);
        h = fnv(h, &o->farg, sizeof o->farg);
    }
    return h;
}

static step_key *memo_find(runner *R, uint32_t kv_len, uint64_t h)
{
    for (size_t i = 0; i < R->n_memo; i++) {
        step_key *k = &R->memo[i];
        if (k->hash == h && k->kv_len == kv_len &&
            !memcmp(k->kept, R->kept, R->n_kept * sizeof *R->kept))
            return k;
    }
    return NULL;
}

static int memo_add(runner *R, uint32_t kv_len, uint64_t h, sim_result *res)
{
    if (R->n_memo == R->cap_memo) {
        size_t nc = R->cap_memo ? 2 * R->cap_memo : 16;
        step_key *nm = realloc(R->memo, nc * sizeof *nm);
        if (!nm)
            return MS_ERR_NOMEM;
        R->memo = nm;
        R->cap_memo = nc;
    }
    step_key *k = &R->memo[R->n_memo];
    if (!(k->kept = malloc(R->n_kept * sizeof *k->kept + 1)))
        return MS_ERR_NOMEM;
    memcpy(k->kept, R->kept, R->n_kept * sizeof *R->kept);
    k->n_kept = R->n_kept;
    k->kv_len = kv_len;
    k->hash = h;
    k->res = *res; /* takes ownership of res->layer */
    R->n_memo++;
    return MS_OK;
}

static void runner_free(runner *R)
{
    for (size_t i = 0; i < R->n_memo; i++) {
        free(R->memo[i].kept);
        sim_result_free(&R->memo[i].res);
    }
    free(R->memo);
    free(R->kept);
    sim_ws_free(R->ws);
    cost_memo_free(R->cmemo);
    op_program_free(&R->prog);
    cost_log_free(&R->log);
}

/* ---- phases ------------------------------------------------------------------------------- */

/* The FFN widths of the step just replayed into the tail of R->kept (lower_opts.ffn_active). */
static void take_ffn(runner *R, const replay *rp)
{
    const model_cfg *m = &R->cfg->model;
    size_t o = (size_t)m->n_layers * m->n_kv_heads;
    int secret = 0;
    const uint32_t *a = replay_ffn_active(rp, &secret);
    R->has_ffn = a != NULL;
    for (uint32_t l = 0; l < m->n_layers; l++)
        R->kept[o + l] = a ? a[l] : m->ffn_dim;
    R->kept[o + m->n_layers] = (uint32_t)secret;
}

static void base_opts(const runner *R, lower_opts *lo)
{
    const model_cfg *m = &R->cfg->model;
    size_t o = (size_t)m->n_layers * m->n_kv_heads;
    lower_opts_default(lo);
    lo->n_seqs = R->cfg->work.batch ? R->cfg->work.batch : 1;
    lo->attended_cache = R->attended_cache;
    if (R->has_ffn) {
        lo->ffn_active = R->kept + o;
        lo->ffn_secret = R->kept[o + m->n_layers] != 0;
    }
}

static int run_prefill(runner *R, replay *rp, run_result *res, errbuf *e)
{
    const run_cfg *cfg = R->cfg;
    op_program_clear(&R->prog);
    int rc = replay_prefill(rp, &R->prog, e);
    if (rc != MS_OK)
        return rc;
    take_ffn(R, rp);
    lower_opts lo;
    base_opts(R, &lo);
    lo.phase = PHASE_PREFILL;
    lo.n_tokens = cfg->work.prompt_len;
    sim_result s;
    rc = step_simulate_memo(&R->env, R->cmemo, &lo, &R->prog, &R->log, &s, e);
    if (rc != MS_OK)
        return rc;
    R->simulated++;
    rc = sim_result_accumulate(&res->phase[PHASE_PREFILL], &s);
    sim_result_free(&s);
    return rc == MS_OK ? MS_OK : err_set(e, rc, "runner: out of memory");
}

/* Costs decode step `step`; *cost points at its (memoized) result. */
static int cost_decode_step(runner *R, uint32_t kv_len, const sim_result **cost, errbuf *e)
{
    uint64_t h = step_hash(R, kv_len);
    step_key *k = memo_find(R, kv_len, h);
    if (!k) {
        lower_opts lo;
        base_opts(R, &lo);
        lo.phase = PHASE_DECODE;
        lo.n_tokens = 1;
        lo.kv_len = kv_len;
        lo.kept = R->kept;
        sim_result s;
        int rc = step_simulate_memo(&R->env, R->cmemo, &lo, &R->prog, &R->log, &s, e);
        if (rc != MS_OK)
            return rc;
        R->simulated++;
        if (memo_add(R, kv_len, h, &s) != MS_OK) {
            sim_result_free(&s);
            return err_set(e, MS_ERR_NOMEM, "runner: out of memory");
        }
        k = &R->memo[R->n_memo - 1];
    }
    *cost = &k->res;
    return MS_OK;
}

/* What the decode phase says beyond its totals: the first step's latency (TTFT without an MPC
 * prefill), the steady step (the last costed step holding no one-time work) and the one-time
 * work apart: each one-time step's latency minus that of the step after it (the runner costs
 * that step too; the two differ by the one-time work and one cached entry). */
typedef struct decode_sum {
    uint64_t first_ns;
    int steady;          /* a steady step was costed */
    uint64_t step_ns, step_rounds, step_bytes;
    uint64_t once_ns;    /* the pending one-time step's latency, 0 if none */
    uint64_t one_time_ns;
} decode_sum;

static int run_decode(runner *R, replay *rp, run_result *res, decode_sum *ds, errbuf *e)
{
    const run_cfg *cfg = R->cfg;
    uint32_t stride = cfg->work.decode_stride ? cfg->work.decode_stride : 1;
    const sim_result *cost = NULL;
    int once = 0; /* the last costed step held one-time work: it stands for itself only */
    for (uint32_t s = 0; s < cfg->work.decode_len; s++) {
        uint32_t kv_len = cfg->work.prompt_len + s;
        op_program_clear(&R->prog);
        int rc = replay_step(rp, s, kv_len, R->kept, &R->prog, e);
        if (rc != MS_OK)
            return rc;
        take_ffn(R, rp);
        int now = replay_step_once(rp), costed = s % stride == 0 || once || now;
        if (costed && (rc = cost_decode_step(R, kv_len, &cost, e)) != MS_OK)
            return rc;
        if (costed && now) {
            ds->once_ns = cost->latency_ns;
        } else if (costed) {
            if (ds->once_ns) /* the step after a one-time step */
                ds->one_time_ns += ds->once_ns > cost->latency_ns ? ds->once_ns - cost->latency_ns : 0;
            ds->once_ns = 0;
            ds->steady = 1;
            ds->step_ns = cost->latency_ns;
            ds->step_rounds = cost->total.rounds;
            ds->step_bytes = 0;
            for (int p = 0; p < R->env.pr->n_parties; p++)
                ds->step_bytes += cost->total.bytes_sent[p];
        }
        once = now;
        if (s == 0)
            ds->first_ns = cost->latency_ns;
        if (sim_result_accumulate(&res->phase[PHASE_DECODE], cost) != MS_OK)
            return err_set(e, MS_ERR_NOMEM, "runner: out of memory");
    }
    if (!ds->steady && cost) { /* only one-time steps: the step as costed, nothing apart */
        ds->step_ns = cost->latency_ns;
        ds->step_rounds = cost->total.rounds;
        for (int p = 0; p < R->env.pr->n_parties; p++)
            ds->step_bytes += cost->total.bytes_sent[p];
    }
    return MS_OK;
}

/* ---- metrics ------------------------------------------------------------------------------ */

static int add_metrics(runner *R, run_result *res, const decode_sum *ds)
{
    uint64_t first_decode_ns = ds->first_ns;
    const run_cfg *cfg = R->cfg;
    const sim_result *pf = &res->phase[PHASE_PREFILL], *dc = &res->phase[PHASE_DECODE];
    double lp = (double)pf->latency_ns * 1e-9, ld = (double)dc->latency_ns * 1e-9;
    uint32_t n_dec = cfg->work.decode_len;
    int prefilled = cfg->work.prefill_in_mpc && cfg->work.prompt_len > 0;
    int P = R->env.pr->n_parties, rc = 0;
    rc |= run_metric_add(res, "latency_prefill_s", lp, "s");
    rc |= run_metric_add(res, "latency_decode_s", ld, "s");
    rc |= run_metric_add(res, "latency_per_token_s", n_dec ? ld / n_dec : 0, "s");
    rc |= run_metric_add(res, "ttft_s", prefilled ? lp : (double)first_decode_ns * 1e-9, "s");
    rc |= run_metric_add(res, "latency_total_s", lp + ld, "s");
    uint64_t on = 0, off = 0;
    for (int p = 0; p < P; p++) {
        char name[48];
        uint64_t b = pf->total.bytes_sent[p] + dc->total.bytes_sent[p];
        snprintf(name, sizeof name, "bytes_online_p%d", p);
        rc |= run_metric_add(res, name, (double)b, "B");
        on += b;
        off += pf->total.offline_bytes[p] + dc->total.offline_bytes[p];
    }
    rc |= run_metric_add(res, "bytes_online", (double)on, "B");
    rc |= run_metric_add(res, "bytes_offline", (double)off, "B");
    rc |= run_metric_add(res, "rounds_prefill", (double)pf->total.rounds, "rounds");
    rc |= run_metric_add(res, "rounds_decode", (double)dc->total.rounds, "rounds");
    rc |= run_metric_add(res, "compute_s",
                         (double)(pf->total.compute_ns + dc->total.compute_ns) * 1e-9, "s");
    rc |= run_metric_add(res, "comm_s", (double)(pf->total.comm_ns + dc->total.comm_ns) * 1e-9,
                         "s");
    rc |= run_metric_add(res, "steps_simulated", (double)R->simulated, "steps");
    /* the steady decode step and the one-time work apart (decode_sum) */
    rc |= run_metric_add(res, "latency_decode_step_s", (double)ds->step_ns * 1e-9, "s");
    rc |= run_metric_add(res, "rounds_decode_step", (double)ds->step_rounds, "rounds");
    rc |= run_metric_add(res, "bytes_decode_step", (double)ds->step_bytes, "B");
    rc |= run_metric_add(res, "latency_one_time_s", (double)ds->one_time_ns * 1e-9, "s");
    return rc ? MS_ERR_NOMEM : MS_OK;
}

/* ---- entry point -------------------------------------------------------------------------- */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int runner_init(runner *R, const run_cfg *cfg, errbuf *e)
{
    memset(R, 0, sizeof *R);
    R->cfg = cfg;
    const char *pname = cfg->proto.name[0] ? cfg->proto.name : cfg->proto_ref;
    const proto *pr = proto_find(pname);
    if (!pr)
        return err_set(e, MS_ERR_NOTFOUND, "run: unknown protocol '%s'", pname);
    if (cfg->net.n_parties != pr->n_parties)
        return err_set(e, MS_ERR_INPUT, "run: network '%s' has %d parties, %s needs %d",
                       cfg->net.name, cfg->net.n_parties, pr->name, pr->n_parties);
    R->mach = cfg->machine;
    if (!(R->mach.rate[WK_MAC] > 0)) /* a config built without a profile */
        machine_default(&R->mach);
    R->ws = sim_ws_new();
    R->cmemo = cost_memo_new();
    R->env = (step_env){&cfg->model, pr, &cfg->proto, &cfg->net, &R->mach,
                        {.overlap = cfg->overlap, .ws = R->ws}};
    R->n_kept = (size_t)cfg->model.n_layers * (cfg->model.n_kv_heads + 1) + 1;
    op_program_init(&R->prog);
    cost_log_init(&R->log, pr->n_parties);
    if (!R->ws || !R->cmemo || !(R->kept = calloc(R->n_kept + 1, sizeof *R->kept)))
        return err_set(e, MS_ERR_NOMEM, "run: out of memory");
    return MS_OK;
}

int run_execute(const run_cfg *cfg, run_result *res, errbuf *e)
{
    double t0 = wall_now();
    runner R;
    replay *rp = NULL;
    decode_sum ds;
    memset(&ds, 0, sizeof ds);
    int rc = runner_init(&R, cfg, e);
    if (rc == MS_OK)
        rc = replay_open(cfg, &rp, e);
    if (rc == MS_OK)
        R.attended_cache = replay_attended_cache(rp);
    if (rc == MS_OK && cfg->work.prefill_in_mpc && cfg->work.prompt_len > 0)
        rc = run_prefill(&R, rp, res, e);
    if (rc == MS_OK)
        rc = run_decode(&R, rp, res, &ds, e);
    if (rc == MS_OK && add_metrics(&R, res, &ds) != MS_OK)
        rc = err_set(e, MS_ERR_NOMEM, "run: out of memory");
    metric_sink sink = run_result_sink(res);
    if (rc == MS_OK)
        rc = replay_metrics(rp, &sink, e);
    if (rp)
        replay_close(rp);
    runner_free(&R);
    res->wall_s = wall_now() - t0;
    return rc;
}

/* ---- one steady decode step, for sweeps over the machine and the network ------------------ */

int run_decode_program(const run_cfg *cfg, op_program *prog, cost_log *log, errbuf *e)
{
    runner R;
    replay *rp = NULL;
    int rc = runner_init(&R, cfg, e);
    if (rc == MS_OK && !cfg->work.decode_len)
        rc = err_set(e, MS_ERR_INPUT, "run: decode_len is 0: there is no decode step to cost");
    if (rc == MS_OK)
        rc = replay_open(cfg, &rp, e);
    if (rc == MS_OK)
        R.attended_cache = replay_attended_cache(rp);
    if (rc == MS_OK && cfg->work.prefill_in_mpc && cfg->work.prompt_len > 0) {
        op_program_clear(&R.prog); /* the policy's prefill ops: its state, not costed here */
        rc = replay_prefill(rp, &R.prog, e);
    }
    /* every step is replayed (the policy's state follows them all); the last one is costed,
     * so a one-time step (MPCache's compaction) is never the one returned when there are two
     * or more */
    for (uint32_t s = 0; rc == MS_OK && s < cfg->work.decode_len; s++) {
        op_program_clear(&R.prog);
        rc = replay_step(rp, s, cfg->work.prompt_len + s, R.kept, &R.prog, e);
        if (rc == MS_OK)
            take_ffn(&R, rp);
    }
    if (rc == MS_OK) {
        lower_opts lo;
        base_opts(&R, &lo);
        lo.phase = PHASE_DECODE;
        lo.n_tokens = 1;
        lo.kv_len = cfg->work.prompt_len + cfg->work.decode_len - 1;
        lo.kept = R.kept;
        sim_result s;
        rc = step_simulate_memo(&R.env, NULL, &lo, &R.prog, &R.log, &s, e);
        if (rc == MS_OK) {
            sim_result_free(&s);
            /* hand the program and its costs to the caller */
            op_program tp = *prog;
            cost_log tl = *log;
            *prog = R.prog;
            *log = R.log;
            R.prog = tp;
            R.log = tl;
        }
    }
    if (rp)
        replay_close(rp);
    runner_free(&R);
    return rc;
}
