/* serve.c — the serving simulation: event queue, scheduler, iterations, metrics, and the coster
 * that puts stepcost behind it. */
#include "serve.h"

#include "protocols/base/invariant.h"
#include "sim/engine/des.h"
#include "sim/engine/simulate.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- events: the project's engine (des.h), payload = kind | request << 1 -------------- */

enum { EV_ARRIVE, EV_STEP_DONE };
#define EV_KIND(d) ((uint32_t)((d)&1))
#define EV_ARG(d) ((uint32_t)((d) >> 1))

/* ---- parameters ------------------------------------------------------------------------- */

void serve_params_default(serve_params *p)
{
    memset(p, 0, sizeof *p);
    p->batch_limit = 8;
    p->chunk = 0;
    p->scheduler = SRV_FCFS;
    p->cost_bucket = 16;
    kvs_params_default(&p->share);
}

static const char *const sched_names[] = {"fcfs", "lpm"};
const char *serve_sched_name(int s) { return s == SRV_LPM ? "lpm" : "fcfs"; }
int serve_sched_from_name(const char *s)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(s, sched_names[i]))
            return i;
    return -1;
}

/* ---- server state ----------------------------------------------------------------------- */

typedef struct sreq {
    uint32_t prefill_left; /* uncached prompt tokens still to prefill */
    uint32_t kv;           /* tokens with KV (reused + computed + generated) */
    uint32_t decode_left;  /* output tokens still to produce after the first */
    uint32_t chunk_now;    /* tokens this request prefills in the current iteration */
    uint8_t decoding_now, rotated, running;
    kvs_match m;
    kvs_hold hold;
} sreq;

typedef struct srv {
    const serve_params *p;
    const workload *w;
    const serve_coster *c;
    kvs *cache;
    sreq *r;
    uint32_t *wait; /* waiting requests, arrival order */
    size_t wait_head, wait_n;
    uint32_t *run; /* running requests, admission order */
    size_t n_run;
    des *q;
    int busy;
    uint32_t next_order;
    serve_result *res;
} srv;

static kvs_prompt prompt_of(const srv *s, uint32_t i)
{
    const wl_request *q = &s->w->req[i];
    return (kvs_prompt){.tok = wl_tok(s->w, i),
                        .sens = wl_sens(s->w, i),
                        .n = q->n_tokens,
                        .tenant = q->tenant,
                        .user = q->user};
}

static uint32_t bucket_up(uint32_t x, uint32_t b) { return x == 0 ? 0 : (x + b - 1) / b * b; }

static int cost_step(srv *s, int phase, uint32_t n, uint32_t kv, uint32_t batch, step_figures *f,
                     errbuf *e)
{
    uint32_t b = s->p->cost_bucket;
    s->res->cost_calls++;
    return s->c->step(s->c->ctx, phase, phase == PHASE_DECODE ? 1 : bucket_up(n, b),
                      bucket_up(kv, b), batch, f, e);
}

static void fig_add(step_figures *a, const step_figures *b)
{
    a->latency_ns += b->latency_ns;
    a->rounds += b->rounds;
    a->bytes += b->bytes;
    a->offline_bytes += b->offline_bytes;
}

/* MPC work sharing saves for this request's prefill (unchunked costing, both sides). */
static int account_savings(srv *s, uint32_t i, errbuf *e)
{
    const sreq *r = &s->r[i];
    uint32_t P = s->w->req[i].n_tokens, hit = r->m.hit_tokens;
    if (!hit)
        return MS_OK;
    step_figures full, part, rot = {0};
    int rc = cost_step(s, PHASE_PREFILL, P, 0, 1, &full, e);
    if (!rc)
        rc = cost_step(s, PHASE_PREFILL, P - hit, hit, 1, &part, e);
    if (!rc && r->m.shifted_tokens)
        rc = s->c->rerotate(s->c->ctx, bucket_up(r->m.shifted_tokens, s->p->cost_bucket), &rot, e);
    if (rc)
        return rc;
    fig_add(&part, &rot);
    s->res->bytes_saved += (int64_t)full.bytes - (int64_t)part.bytes;
    s->res->rounds_saved += (int64_t)full.rounds - (int64_t)part.rounds;
    return MS_OK;
}

/* Index in the waiting queue of the next request to admit. */
static size_t pick_waiting(srv *s, errbuf *e)
{
    if (s->p->scheduler != SRV_LPM)
        return s->wait_head;
    size_t best = s->wait_head;
    uint32_t best_hit = 0;
    for (size_t k = s->wait_head; k < s->wait_head + s->wait_n; k++) {
        kvs_prompt pr = prompt_of(s, s->wait[k]);
        kvs_match m;
        if (kvs_lookup(s->cache, &pr, &m, NULL, e))
            continue;
        if (m.hit_tokens > best_hit) {
            best_hit = m.hit_tokens;
            best = k;
        }
    }
    return best;
}

static int admit(srv *s, uint64_t now, errbuf *e)
{
    while (s->n_run < s->p->batch_limit && s->wait_n) {
        size_t k = pick_waiting(s, e);
        uint32_t i = s->wait[k];
        if (k == s->wait_head)
            s->wait_head++;
        else
            memmove(s->wait + k, s->wait + k + 1,
                    (s->wait_head + s->wait_n - k - 1) * sizeof *s->wait);
        s->wait_n--;
        sreq *r = &s->r[i];
        kvs_prompt pr = prompt_of(s, i);
        int rc = kvs_lookup(s->cache, &pr, &r->m, &r->hold, e);
        if (rc)
            return rc;
        r->prefill_left = pr.n - r->m.hit_tokens;
        r->kv = r->m.hit_tokens;
        r->running = 1;
        s->res->req[i].admit_ns = now;
        s->res->req[i].hit = r->m.hit_tokens;
        s->res->req[i].shifted = r->m.shifted_tokens;
        if ((rc = account_savings(s, i, e)))
            return rc;
        s->run[s->n_run++] = i;
    }
    return MS_OK;
}

/* Plans and costs one iteration starting at now, and schedules its end. */
static int iterate(srv *s, uint64_t now, errbuf *e)
{
    int rc = admit(s, now, e);
    if (rc)
        return rc;
    if (!s->n_run) {
        s->busy = 0;
        return MS_OK;
    }
    step_figures tot = {0}, f;
    uint32_t budget = s->p->chunk ? s->p->chunk : UINT32_MAX;
    int any_prefill = 0;
    for (size_t k = 0; k < s->n_run && budget; k++) {
        sreq *r = &s->r[s->run[k]];
        if (!r->prefill_left)
            continue;
        uint32_t n = r->prefill_left < budget ? r->prefill_left : budget;
        if ((rc = cost_step(s, PHASE_PREFILL, n, r->kv, 1, &f, e)))
            return rc;
        fig_add(&tot, &f);
        if (!r->rotated && r->m.shifted_tokens) {
            uint32_t rt = bucket_up(r->m.shifted_tokens, s->p->cost_bucket);
            if ((rc = s->c->rerotate(s->c->ctx, rt, &f, e)))
                return rc;
            fig_add(&tot, &f);
            s->res->rerotate_bytes += f.bytes;
            s->res->rerotate_rounds += f.rounds;
            s->res->rerotate_tokens += r->m.shifted_tokens;
            r->rotated = 1;
        }
        r->chunk_now = n;
        budget -= n;
        any_prefill = 1;
        if (!s->p->chunk)
            break; /* unchunked: one prompt per iteration */
    }
    if (s->p->chunk || !any_prefill) {
        uint32_t batch = 0, kv = 0;
        for (size_t k = 0; k < s->n_run; k++) {
            sreq *r = &s->r[s->run[k]];
            if (r->prefill_left || !r->decode_left)
                continue;
            r->decoding_now = 1;
            batch++;
            kv = r->kv > kv ? r->kv : kv;
        }
        if (batch) {
            if ((rc = cost_step(s, PHASE_DECODE, 1, kv, batch, &f, e)))
                return rc;
            fig_add(&tot, &f);
        }
    }
    s->res->bytes += tot.bytes;
    s->res->rounds += tot.rounds;
    s->res->offline_bytes += tot.offline_bytes;
    s->res->steps++;
    s->busy = 1;
    uint64_t lat = tot.latency_ns ? tot.latency_ns : 1; /* a step takes time */
    return des_schedule(s->q, now + lat, EV_STEP_DONE) ? MS_ERR_NOMEM : MS_OK;
}

static void finish(srv *s, uint32_t i, uint64_t now)
{
    s->res->req[i].finish_ns = now;
    s->r[i].running = 0;
    kvs_release(s->cache, &s->r[i].hold);
}

static int step_done(srv *s, uint64_t now, errbuf *e)
{
    for (size_t k = 0; k < s->n_run; k++) {
        uint32_t i = s->run[k];
        sreq *r = &s->r[i];
        if (r->chunk_now) {
            r->prefill_left -= r->chunk_now;
            r->kv += r->chunk_now;
            r->chunk_now = 0;
            if (!r->prefill_left) { /* the prefill's logits give the first token */
                s->res->req[i].first_ns = now;
                s->res->req[i].order = s->next_order++;
                kvs_prompt pr = prompt_of(s, i);
                int rc = kvs_insert(s->cache, &pr, &r->m, &r->hold, e);
                if (rc)
                    return rc;
                r->decode_left = s->w->req[i].decode_len - 1;
                if (!r->decode_left)
                    finish(s, i, now);
            }
        } else if (r->decoding_now) {
            r->decoding_now = 0;
            r->kv++;
            if (--r->decode_left == 0)
                finish(s, i, now);
        }
    }
    size_t m = 0;
    for (size_t k = 0; k < s->n_run; k++)
        if (s->r[s->run[k]].running)
            s->run[m++] = s->run[k];
    s->n_run = m;
    return iterate(s, now, e);
}

/* ---- metrics ---------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[n]. */
static double pct(const double *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
}

static int summarize(const serve_params *p, const workload *w, serve_result *res, kvs *cache)
{
    size_t n = res->n, nt = 0;
    double *ttft = malloc((n + 1) * sizeof *ttft), *tpot = malloc((n + 1) * sizeof *tpot);
    if (!ttft || !tpot) {
        free(ttft);
        free(tpot);
        return MS_ERR_NOMEM;
    }
    uint64_t t0 = w->req[0].arrival_ns, t1 = 0, prompt = 0, hit = 0, out = 0, hit_req = 0;
    double sum = 0, tsum = 0;
    for (size_t i = 0; i < n; i++) {
        const serve_req_out *q = &res->req[i];
        ttft[i] = (double)(q->first_ns - q->arrival_ns) / 1e6;
        sum += ttft[i];
        if (q->decode > 1) {
            tpot[nt] = (double)(q->finish_ns - q->first_ns) / 1e6 / (q->decode - 1);
            tsum += tpot[nt++];
        }
        t1 = q->finish_ns > t1 ? q->finish_ns : t1;
        prompt += q->prompt;
        hit += q->hit;
        hit_req += q->hit > 0;
        out += q->decode;
    }
    qsort(ttft, n, sizeof *ttft, cmp_double);
    qsort(tpot, nt, sizeof *tpot, cmp_double);
    res->ttft_ms[0] = pct(ttft, n, 50);
    res->ttft_ms[1] = pct(ttft, n, 90);
    res->ttft_ms[2] = pct(ttft, n, 99);
    res->ttft_ms[3] = sum / (double)n;
    res->tpot_ms[0] = nt ? tsum / (double)nt : 0;
    res->tpot_ms[1] = pct(tpot, nt, 50);
    res->makespan_ns = t1 - t0;
    double span_s = res->makespan_ns ? (double)res->makespan_ns / 1e9 : 1e-9;
    res->throughput_tok_s = (double)out / span_s;
    res->throughput_req_s = (double)n / span_s;
    res->token_hit_rate = prompt ? (double)hit / (double)prompt : 0;
    res->request_hit_rate = (double)hit_req / (double)n;
    const kvs_stats *st = kvs_get_stats(cache);
    res->cache_peak_tokens = st->peak_tokens;
    res->evicted_tokens = st->evicted_tokens;
    res->cache_peak_bytes = (double)st->peak_tokens * (double)p->kv_bytes_per_token;
    free(ttft);
    free(tpot);
    return MS_OK;
}

/* ---- the run ---------------------------------------------------------------------------- */

static int check_params(const serve_params *p, const workload *w, errbuf *e)
{
    if (!w->n)
        return err_set(e, MS_ERR_INPUT, "serve: the workload has no requests");
    if (w->n > UINT32_MAX - 1)
        return err_set(e, MS_ERR_RANGE, "serve: too many requests");
    if (p->batch_limit == 0)
        return err_set(e, MS_ERR_RANGE, "serve: batch must be >= 1");
    if (p->cost_bucket == 0)
        return err_set(e, MS_ERR_RANGE, "serve: cost_bucket must be >= 1");
    if (p->scheduler != SRV_FCFS && p->scheduler != SRV_LPM)
        return err_set(e, MS_ERR_RANGE, "serve: unknown scheduler");
    return MS_OK;
}

static int run_events(srv *s, errbuf *e)
{
    int rc = MS_OK;
    for (size_t i = 0; i < s->w->n && !rc; i++)
        if (des_schedule(s->q, s->w->req[i].arrival_ns, EV_ARRIVE | (uint64_t)i << 1))
            rc = err_set(e, MS_ERR_NOMEM, "serve: out of memory for events");
    des_event ev;
    while (!rc && des_pop(s->q, &ev)) {
        s->res->events++;
        if (EV_KIND(ev.data) == EV_ARRIVE) {
            s->wait[s->wait_head + s->wait_n++] = EV_ARG(ev.data);
            if (!s->busy)
                rc = iterate(s, ev.time, e);
        } else {
            rc = step_done(s, ev.time, e);
            MPCSIM_ASSERT(rc || kvs_is_sane(s->cache));
        }
    }
    assert(rc || kvs_is_sane(s->cache));
    return rc;
}

int serve_run(const serve_params *p, const workload *w, const serve_coster *c, serve_result *res,
              errbuf *e)
{
    memset(res, 0, sizeof *res);
    int rc = check_params(p, w, e);
    if (rc)
        return rc;
    srv s = {.p = p, .w = w, .c = c, .res = res};
    res->n = w->n;
    res->req = calloc(w->n, sizeof *res->req);
    s.r = calloc(w->n, sizeof *s.r);
    s.wait = malloc(w->n * sizeof *s.wait);
    s.run = malloc(((size_t)p->batch_limit + 1) * sizeof *s.run);
    if (!res->req || !s.r || !s.wait || !s.run) {
        rc = err_set(e, MS_ERR_NOMEM, "serve: out of memory for %zu requests", w->n);
        goto out;
    }
    if (!(s.q = des_new(w->n + 16))) {
        rc = err_set(e, MS_ERR_NOMEM, "serve: out of memory for the event queue");
        goto out;
    }
    if ((rc = kvs_open(&p->share, &s.cache, e)))
        goto out;
    for (size_t i = 0; i < w->n; i++) {
        const wl_request *q = &w->req[i];
        res->req[i] = (serve_req_out){.arrival_ns = q->arrival_ns,
                                      .tenant = q->tenant,
                                      .user = q->user,
                                      .prompt = q->n_tokens,
                                      .decode = q->decode_len};
    }
    if (!(rc = run_events(&s, e)))
        rc = summarize(p, w, res, s.cache) ? err_set(e, MS_ERR_NOMEM, "serve: out of memory") : 0;
out:
    if (s.r)
        for (size_t i = 0; i < w->n; i++)
            kvs_hold_free(&s.r[i].hold);
    kvs_close(s.cache);
    free(s.r);
    free(s.wait);
    free(s.run);
    des_free(s.q);
    if (rc)
        serve_result_free(res);
    return rc;
}

void serve_result_free(serve_result *r)
{
    free(r->req);
    memset(r, 0, sizeof *r);
}

/* ---- the coster over stepcost ----------------------------------------------------------- */

#define ROT_MEMO 1024
typedef struct rot_memo {
    uint32_t n; /* tokens; 0 = empty */
    step_figures fig;
} rot_memo;

struct serve_stepcoster {
    rot_memo rot[ROT_MEMO]; /* direct-mapped memo of re-rotation costs */
    run_cfg cfg;            /* shallow copy; work.batch varies per handle */
    stepcost **by_batch;    /* [max_batch + 1], opened on first use */
    uint32_t max_batch;
};

static int sc_step(void *ctx, int phase, uint32_t n, uint32_t kv, uint32_t batch, step_figures *out,
                   errbuf *e)
{
    serve_stepcoster *s = ctx;
    if (batch == 0 || batch > s->max_batch)
        return err_set(e, MS_ERR_RANGE, "serve: batch %u outside 1..%u", batch, s->max_batch);
    if (!s->by_batch[batch]) {
        run_cfg c = s->cfg;
        c.work.batch = batch;
        int rc = stepcost_open(&c, &s->by_batch[batch], e);
        if (rc)
            return rc;
    }
    return stepcost_get(s->by_batch[batch], phase, n, kv, out, e);
}

static int sc_rerotate(void *ctx, uint32_t n, step_figures *out, errbuf *e)
{
    serve_stepcoster *s = ctx;
    rot_memo *slot = &s->rot[n % ROT_MEMO];
    if (slot->n != n) {
        int rc = serve_rerotate_cost(&s->cfg, n, &slot->fig, e);
        if (rc)
            return rc;
        slot->n = n;
    }
    *out = slot->fig;
    return MS_OK;
}

int serve_stepcoster_open(const run_cfg *cfg, uint32_t max_batch, serve_stepcoster **out,
                          serve_coster *coster, errbuf *e)
{
    serve_stepcoster *s = calloc(1, sizeof *s);
    if (!s || !(s->by_batch = calloc((size_t)max_batch + 1, sizeof *s->by_batch))) {
        free(s);
        return err_set(e, MS_ERR_NOMEM, "serve: out of memory for the step costs");
    }
    s->cfg = *cfg;
    s->max_batch = max_batch;
    *out = s;
    *coster = (serve_coster){.ctx = s, .step = sc_step, .rerotate = sc_rerotate};
    return MS_OK;
}

void serve_stepcoster_close(serve_stepcoster *s)
{
    if (!s)
        return;
    for (uint32_t b = 0; b <= s->max_batch; b++)
        if (s->by_batch[b])
            stepcost_close(s->by_batch[b]);
    free(s->by_batch);
    free(s);
}

/* Re-rotating reused keys to new positions is one ROPE op over the moved keys of every layer
 * (rows = tokens × layers, n = KV heads × head_dim; values carry no position), vectorized into
 * the same rounds, costed by the protocol's kernels and simulated on the run's network like
 * any step. ROPE multiplies by public cos/sin and truncates (protocols/program/kern.c k_rope). */
int serve_rerotate_cost(const run_cfg *cfg, uint32_t n_tokens, step_figures *out, errbuf *e)
{
    *out = (step_figures){0};
    const model_cfg *m = &cfg->model;
    uint64_t rows = (uint64_t)n_tokens * m->n_layers;
    if (!rows)
        return MS_OK;
    if (rows > UINT32_MAX)
        return err_set(e, MS_ERR_RANGE, "serve: re-rotation of %u tokens is too large", n_tokens);
    const char *pname = cfg->proto.name[0] ? cfg->proto.name : cfg->proto_ref;
    const proto *pr = proto_find(pname);
    if (!pr)
        return err_set(e, MS_ERR_NOTFOUND, "serve: unknown protocol '%s'", pname);
    machine_profile mach = cfg->machine;
    if (!(mach.rate[WK_MAC] > 0))
        machine_default(&mach);
    uint32_t kd = m->n_kv_heads * m->head_dim;
    op_program prog;
    op_program_init(&prog);
    cost_log log;
    cost_log_init(&log, pr->n_parties);
    int rc = MS_OK;
    uint32_t k = op_tensor_add(&prog, "kreuse", OPT_CACHE, DOM_ARITH, 1, (uint32_t)rows, kd);
    op o = {.kind = OP_ROPE,
            .phase = PHASE_PREFILL,
            .cat = OPC_ATTENTION,
            .layer = -1,
            .group = -1,
            .batch = 1,
            .m = (uint32_t)rows,
            .k = m->head_dim,
            .n = kd,
            .in = {k, OP_NONE, OP_NONE},
            .out = k,
            .iarg = 0,
            .farg = m->rope_theta};
    if (k == OP_NONE || op_emit(&prog, &o) < 0)
        rc = err_set(e, MS_ERR_NOMEM, "serve: out of memory for the re-rotation program");
    if (!rc)
        rc = proto_cost_program(pr, &cfg->proto, &prog, &log, e);
    if (!rc) {
        sim_opts so = {0};
        sim_result r;
        rc = sim_run(&cfg->net, &mach, &prog, &log, &so, &r, e);
        if (!rc) {
            out->latency_ns = r.latency_ns;
            out->rounds = r.total.rounds;
            for (int p = 0; p < MPC_PARTIES_MAX; p++) {
                out->bytes += r.total.bytes_sent[p];
                out->offline_bytes += r.total.offline_bytes[p];
            }
            sim_result_free(&r);
        }
    }
    cost_log_free(&log);
    op_program_free(&prog);
    return rc;
}

uint64_t serve_kv_bytes_per_token(const run_cfg *cfg)
{
    const model_cfg *m = &cfg->model;
    const proto *pr = proto_find(cfg->proto.name);
    uint64_t shares = pr ? (uint64_t)pr->shares_per_party : 1; /* replicated: 2 per party */
    uint64_t ring = cfg->proto.ring_bits > 0 ? (uint64_t)cfg->proto.ring_bits / 8 : 8;
    return 2ull * m->n_layers * m->n_kv_heads * m->head_dim * ring * shares;
}
