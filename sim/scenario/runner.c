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
#include "group.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/lower.h"
#include "protocols/base/grow.h"
#include "sim/replay/replay.h"
#include "sim/engine/stepcost.h"
#include "sim/trace/trace.h"

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
    if (ms_grow(&r->metric, &r->cap_metric, r->n_metric, sizeof *r->metric, 32))
        return MS_ERR_NOMEM;
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
    uint64_t hash;  /* of kept[], the FFN pattern flag and the policy's ops */
    uint32_t *kept; /* owned copy, compared on a hash match */
    size_t n_kept;
    int ffn_secret;
    sim_result res;
} step_key;

typedef struct runner {
    const run_cfg *cfg;
    step_env env;
    machine_profile mach;
    op_program prog;
    cost_log log;
    uint32_t *kept; /* L·Hkv kept rows, then L FFN widths (a step's shape: hashed and compared
                     * by the memo with ffn_secret) */
    size_t n_kept;
    int attended_cache, has_ffn;
    int ffn_secret; /* the FFN pattern is secret (lower_opts.ffn_secret) */
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
    h = fnv(h, &R->ffn_secret, sizeof R->ffn_secret);
    for (size_t i = 0; i < R->prog.n_ops; i++) {
        const op *o = &R->prog.ops[i];
        uint32_t f[12] = {
            o->kind, o->phase, o->cat, (uint32_t)o->layer, (uint32_t)o->group, o->batch,
            o->m,    o->k,     o->n,   o->flags,           (uint32_t)o->iarg,  o->out};
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
        if (k->hash == h && k->kv_len == kv_len && k->ffn_secret == R->ffn_secret &&
            !memcmp(k->kept, R->kept, R->n_kept * sizeof *R->kept))
            return k;
    }
    return NULL;
}

static int memo_add(runner *R, uint32_t kv_len, uint64_t h, sim_result *res)
{
    if (ms_grow(&R->memo, &R->cap_memo, R->n_memo, sizeof *R->memo, 16))
        return MS_ERR_NOMEM;
    step_key *k = &R->memo[R->n_memo];
    if (!(k->kept = malloc(R->n_kept * sizeof *k->kept + 1)))
        return MS_ERR_NOMEM;
    memcpy(k->kept, R->kept, R->n_kept * sizeof *R->kept);
    k->n_kept = R->n_kept;
    k->ffn_secret = R->ffn_secret;
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

/* The FFN widths of the step just replayed into the tail of R->kept (lower_opts.ffn_active),
 * whether its pattern is secret into R->ffn_secret (lower_opts.ffn_secret). */
static void take_ffn(runner *R, const replay *rp)
{
    const model_cfg *m = &R->cfg->model;
    size_t o = (size_t)m->n_layers * m->n_kv_heads;
    int secret = 0;
    const uint32_t *a = replay_ffn_active(rp, &secret);
    R->has_ffn = a != NULL;
    for (uint32_t l = 0; l < m->n_layers; l++)
        R->kept[o + l] = a ? a[l] : m->ffn_dim;
    R->ffn_secret = secret != 0;
}

static void base_opts(const runner *R, lower_opts *lo)
{
    const model_cfg *m = &R->cfg->model;
    size_t o = (size_t)m->n_layers * m->n_kv_heads;
    lower_opts_default(lo);
    lo->n_seqs = R->cfg->work.batch ? R->cfg->work.batch : 1;
    lo->attended_cache = R->attended_cache;
    lo->score_gather = !strcmp(R->cfg->proto.gather, "scores");
    if (R->has_ffn) {
        lo->ffn_active = R->kept + o;
        lo->ffn_secret = R->ffn_secret;
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
    int steady; /* a steady step was costed */
    uint64_t step_ns, step_rounds, step_bytes;
    uint64_t once_ns; /* the pending one-time step's latency, 0 if none */
    uint64_t one_time_ns;
} decode_sum;

/* Decode step s: replayed, and costed when it stands for steps (decode_stride) or holds
 * one-time work; *cost and *once carry from step to step. */
static int decode_one(runner *R, replay *rp, run_result *res, decode_sum *ds, uint32_t s,
                      const sim_result **cost, int *once, errbuf *e)
{
    const run_cfg *cfg = R->cfg;
    uint32_t stride = cfg->work.decode_stride ? cfg->work.decode_stride : 1;
    uint32_t kv_len = cfg->work.prompt_len + s;
    op_program_clear(&R->prog);
    if (!(s % stride == 0 || *once) && replay_idle_ok(rp, s)) {
        /* a step that stands in its costed step's stride and holds no one-time work */
        int rc = replay_step_idle(rp, s, kv_len, e);
        if (rc == MS_OK && sim_result_accumulate(&res->phase[PHASE_DECODE], *cost) != MS_OK)
            rc = err_set(e, MS_ERR_NOMEM, "runner: out of memory");
        return rc;
    }
    int rc = replay_step(rp, s, kv_len, R->kept, &R->prog, e);
    if (rc != MS_OK)
        return rc;
    take_ffn(R, rp);
    int now = replay_step_once(rp), costed = s % stride == 0 || *once || now;
    if (costed && (rc = cost_decode_step(R, kv_len, cost, e)) != MS_OK)
        return rc;
    const sim_result *c = *cost;
    if (costed && now) {
        ds->once_ns = c->latency_ns;
    } else if (costed) {
        if (ds->once_ns) /* the step after a one-time step */
            ds->one_time_ns += ds->once_ns > c->latency_ns ? ds->once_ns - c->latency_ns : 0;
        ds->once_ns = 0;
        ds->steady = 1;
        ds->step_ns = c->latency_ns;
        ds->step_rounds = c->total.rounds;
        ds->step_bytes = 0;
        for (int p = 0; p < R->env.pr->n_parties; p++)
            ds->step_bytes += c->total.bytes_sent[p];
    }
    *once = now; /* the last costed step held one-time work: it stands for itself only */
    if (s == 0)
        ds->first_ns = c->latency_ns;
    if (sim_result_accumulate(&res->phase[PHASE_DECODE], c) != MS_OK)
        return err_set(e, MS_ERR_NOMEM, "runner: out of memory");
    return MS_OK;
}

/* After the last decode step. */
static void decode_end(runner *R, decode_sum *ds, const sim_result *cost)
{
    if (!ds->steady && cost) { /* only one-time steps: the step as costed, nothing apart */
        ds->step_ns = cost->latency_ns;
        ds->step_rounds = cost->total.rounds;
        for (int p = 0; p < R->env.pr->n_parties; p++)
            ds->step_bytes += cost->total.bytes_sent[p];
    }
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
    rc |=
        run_metric_add(res, "comm_s", (double)(pf->total.comm_ns + dc->total.comm_ns) * 1e-9, "s");
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
    R->env = (step_env){&cfg->model, pr,       &cfg->proto,
                        &cfg->net,   &R->mach, {.overlap = cfg->overlap, .ws = R->ws}};
    R->n_kept = (size_t)cfg->model.n_layers * (cfg->model.n_kv_heads + 1);
    op_program_init(&R->prog);
    cost_log_init(&R->log, pr->n_parties);
    if (!R->ws || !R->cmemo || !(R->kept = calloc(R->n_kept + 1, sizeof *R->kept)))
        return err_set(e, MS_ERR_NOMEM, "run: out of memory");
    return MS_OK;
}

/* ---- groups of runs over one trace (group.h) ------------------------------------------- */

static int same_params(const kv_param *a, size_t na, const kv_param *b, size_t nb)
{
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i].key, b[i].key) || strcmp(a[i].val, b[i].val))
            return 0;
    return 1;
}

int run_same_trace(const run_cfg *a, const run_cfg *b)
{
    const model_cfg *x = &a->model, *y = &b->model;
    return !strcmp(x->name, y->name) && x->n_layers == y->n_layers && x->n_heads == y->n_heads &&
           x->n_kv_heads == y->n_kv_heads && x->head_dim == y->head_dim && x->dim == y->dim &&
           x->ffn_dim == y->ffn_dim && x->vocab == y->vocab && !strcmp(x->weights, y->weights) &&
           !strcmp(a->trace.source, b->trace.source) && !strcmp(a->trace.path, b->trace.path) &&
           same_params(a->trace.params, a->trace.n_params, b->trace.params, b->trace.n_params) &&
           a->seed == b->seed && a->work.prompt_len == b->work.prompt_len &&
           a->work.decode_len == b->work.decode_len;
}

/* One run of a group in flight. */
typedef struct run_slot {
    const run_cfg *cfg;
    run_result *res;
    runner R;
    replay *rp;
    decode_sum ds;
    const sim_result *cost;
    int once, rc, live; /* live: started and not finished */
    double wall;        /* seconds spent in this run's own calls */
    errbuf e;
} run_slot;

static void slot_finish(run_slot *sl, run_group_done done, void *ctx, size_t i)
{
    double t0 = wall_now();
    if (sl->rc == MS_OK && add_metrics(&sl->R, sl->res, &sl->ds) != MS_OK)
        sl->rc = err_set(&sl->e, MS_ERR_NOMEM, "run: out of memory");
    metric_sink sink = run_result_sink(sl->res);
    if (sl->rc == MS_OK)
        sl->rc = replay_metrics(sl->rp, &sink, &sl->e);
    if (sl->rp)
        replay_close(sl->rp);
    sl->rp = NULL;
    runner_free(&sl->R);
    sl->live = 0;
    sl->res->wall_s = sl->wall + (wall_now() - t0);
    if (done)
        done(ctx, i, sl->rc, &sl->e);
}

/* One prompt call of a live run of a group: KV head g of layer l at the span of cnt positions
 * from pos (replay_group_span_head), or (l UINT32_MAX) the prompt up to pos + cnt − 1. */
static void slot_prompt(run_slot *s, size_t i, uint32_t pos, uint32_t cnt, uint32_t l, uint32_t g,
                        run_group_done done, void *ctx)
{
    if (!s->live)
        return;
    double t0 = wall_now();
    s->rc = l == UINT32_MAX ? replay_prompt_upto(s->rp, pos + cnt - 1, &s->e)
                            : replay_group_span_head(s->rp, pos, cnt, l, g, &s->e);
    s->wall += wall_now() - t0;
    if (s->rc != MS_OK)
        slot_finish(s, done, ctx, i);
}

/* The group's prompt from position pos: a span of positions whose rows the share's trace
 * computes together, a KV head at a time, every run that reads rows there reading them while
 * they are in cache (replay_group_span), the others after them; or else one position. rs: n
 * slots of room. Returns the positions done. */
static uint32_t group_prompt(run_slot *sl, size_t n, replay **rs, replay_share *shared,
                             uint32_t pos, run_group_done done, void *ctx)
{
    for (size_t i = 0; i < n; i++)
        rs[i] = sl[i].live ? sl[i].rp : NULL;
    uint32_t cnt = replay_group_span(rs, n, pos);
    errbuf e;
    int rc = cnt > 1 ? replay_group_span_begin(shared, pos, cnt, &e) : MS_OK;
    for (size_t i = 0; rc && i < n; i++)
        if (sl[i].live) {
            sl[i].rc = rc;
            sl[i].e = e;
            slot_finish(&sl[i], done, ctx, i);
        }
    const model_cfg *m = &sl[0].cfg->model;
    for (uint32_t l = 0; cnt > 1 && l < m->n_layers; l++)
        for (uint32_t g = 0; g < m->n_kv_heads; g++)
            for (size_t i = 0; i < n; i++)
                slot_prompt(&sl[i], i, pos, cnt, l, g, done, ctx);
    for (size_t i = 0; i < n; i++)
        slot_prompt(&sl[i], i, pos, cnt, UINT32_MAX, 0, done, ctx);
    return cnt;
}

static uint32_t *const *progress_slot; /* run_group_progress's, for the next group */

void run_group_progress(uint32_t *const *slot) { progress_slot = slot; }

/* Run i of the group has replayed `done` of its `all` positions. */
static void progress_at(size_t i, uint32_t done, uint32_t all)
{
    if (!progress_slot || !progress_slot[i])
        return;
    __atomic_store_n(&progress_slot[i][1], all, __ATOMIC_RELAXED);
    __atomic_store_n(&progress_slot[i][0], done, __ATOMIC_RELAXED);
}

void run_execute_group(const run_cfg *const *cfg, size_t n, run_result *res, run_group_done done,
                       void *ctx)
{
    run_slot *sl = calloc(n ? n : 1, sizeof *sl);
    replay **rs = calloc(n ? n : 1, sizeof *rs); /* group_prompt's */
    replay_share *shared = NULL;
    int shared_rc = MS_OK;
    errbuf shared_e = {0};
    size_t readers = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (replay_reads_trace(cfg[i]) && !readers++)
            first = i;
    if (!sl || !rs) {
        free(sl);
        free(rs);
        errbuf e;
        err_set(&e, MS_ERR_NOMEM, "run: out of memory");
        for (size_t i = 0; i < n; i++)
            if (done)
                done(ctx, i, MS_ERR_NOMEM, &e);
        return;
    }
    /* one trace for the runs that read it, its rows computed once for all of them */
    if (readers > 1)
        shared_rc = replay_share_open(cfg[first], &shared, &shared_e);
    uint32_t P = n ? cfg[0]->work.prompt_len : 0, D = n ? cfg[0]->work.decode_len : 0;
    for (size_t i = 0; i < n; i++) {
        run_slot *s = &sl[i];
        double t0 = wall_now();
        s->cfg = cfg[i];
        s->res = &res[i];
        s->live = 1;
        s->rc = runner_init(&s->R, cfg[i], &s->e);
        int reads = readers > 1 && replay_reads_trace(cfg[i]);
        if (s->rc == MS_OK && reads && shared_rc != MS_OK) {
            s->e = shared_e;
            s->rc = shared_rc;
        }
        if (s->rc == MS_OK)
            s->rc = replay_open_shared(cfg[i], reads ? shared : NULL, &s->rp, &s->e);
        if (s->rc == MS_OK)
            s->R.attended_cache = replay_attended_cache(s->rp);
        s->wall += wall_now() - t0;
        if (s->rc != MS_OK)
            slot_finish(s, done, ctx, i);
    }
    /* the prompt, every run in turn: a row is computed once */
    for (size_t i = 0; i < n; i++)
        progress_at(i, 0, P + D);
    for (uint32_t pos = 0; shared && pos < P;) {
        pos += group_prompt(sl, n, rs, shared, pos, done, ctx);
        for (size_t i = 0; i < n; i++)
            if (sl[i].live)
                progress_at(i, pos, P + D);
    }
    for (size_t i = 0; i < n; i++) {
        run_slot *s = &sl[i];
        if (!s->live || !(s->cfg->work.prefill_in_mpc && P > 0))
            continue;
        double t0 = wall_now();
        s->rc = run_prefill(&s->R, s->rp, s->res, &s->e);
        s->wall += wall_now() - t0;
        if (s->rc != MS_OK)
            slot_finish(s, done, ctx, i);
        progress_at(i, P, P + D);
    }
    /* the decode, run by run: each run is done (and reported) before the next one starts, so
     * a sweep killed inside a group keeps the runs it finished; the trace is a fixed function
     * of the position, so every run reads the rows it would read alone */
    for (size_t i = 0; i < n; i++) {
        run_slot *s = &sl[i];
        for (uint32_t st = 0; s->live && st < D; st++) {
            double t0 = wall_now();
            s->rc = decode_one(&s->R, s->rp, s->res, &s->ds, st, &s->cost, &s->once, &s->e);
            s->wall += wall_now() - t0;
            progress_at(i, P + st + 1, P + D);
            if (s->rc != MS_OK)
                slot_finish(s, done, ctx, i);
        }
        if (s->live) {
            decode_end(&s->R, &s->ds, s->cost);
            slot_finish(s, done, ctx, i);
        }
    }
    replay_share_close(shared);
    free(rs);
    free(sl);
}

typedef struct one_ctx {
    int rc;
    errbuf *e;
} one_ctx;

static void one_done(void *ctx, size_t i, int rc, const errbuf *e)
{
    one_ctx *c = ctx;
    c->rc = rc;
    if (rc != MS_OK)
        *c->e = *e;
}

int run_execute(const run_cfg *cfg, run_result *res, errbuf *e)
{
    one_ctx c = {MS_OK, e};
    run_execute_group(&cfg, 1, res, one_done, &c);
    return c.rc;
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
