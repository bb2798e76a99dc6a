/* check_serve.c — serving simulation: hit rates of each sharing policy on hand-built
 * workloads, LRU eviction, TTFT of hits, the timing attacker, determinism, workload files and
 * the serve command. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sqlfix.h"
#include "sim/serve/kvshare.h"
#include "sim/serve/leak.h"
#include "sim/engine/machine.h"
#include "models/model.h"
#include "sim/engine/net.h"
#include "protocols/program/proto.h"
#include "sim/serve/serve.h"
#include "sim/serve/workload.h"

TESTDIR("check_serve")

/* ---- a hand-checkable coster: cost grows with new tokens, cached tokens and batch ------- */

static int t_step(void *ctx, int phase, uint32_t n, uint32_t kv, uint32_t batch, step_figures *o,
                  errbuf *e)
{
    (void)ctx;
    (void)e;
    (void)phase;
    o->rounds = 10;
    o->bytes = 100ull * n * batch + (uint64_t)n * kv;
    o->offline_bytes = 0;
    o->latency_ns = 1000000ull + 10000ull * n * batch + 10ull * n * kv;
    return 0;
}

static int t_rerot(void *ctx, uint32_t n, step_figures *o, errbuf *e)
{
    (void)ctx;
    (void)e;
    *o = (step_figures){.latency_ns = 100ull * n, .rounds = 1, .bytes = 8ull * n};
    return 0;
}

static const serve_coster T_COST = {NULL, t_step, t_rerot};

static serve_params params_for(int kind, uint32_t min_span, int position)
{
    serve_params p;
    serve_params_default(&p);
    p.cost_bucket = 1;
    p.share.kind = kind;
    p.share.min_span = min_span;
    p.share.position = position;
    return p;
}

/* Adds a request of n tokens base+0 .. base+n-1, with sens[] ranges from a string mask
 * ('s' = sensitive) or all insensitive when mask is NULL. */
static void add_seq(workload *w, uint64_t t, uint32_t user, const uint32_t *tok, uint32_t n,
                    const char *mask)
{
    uint8_t sens[256];
    for (uint32_t i = 0; i < n; i++)
        sens[i] = mask && mask[i] == 's';
    errbuf e;
    ck_assert_int_eq(wl_add(w, t, user / 10, user, 2, tok, sens, n, &e), 0);
}

static void seq(uint32_t *t, uint32_t n, uint32_t base)
{
    for (uint32_t i = 0; i < n; i++)
        t[i] = base + i;
}

#define GAP 1000000000ull /* 1 s apart: every request runs alone */

static void run_ok(const serve_params *p, const workload *w, serve_result *r)
{
    errbuf e;
    int rc = serve_run(p, w, &T_COST, r, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
}

/* User 1 sends the first n1 tokens of base, base+1, …; gap later user 2 the first n2. */
static void twice_wl(workload *w, uint32_t base, uint32_t n1, uint32_t n2, uint64_t gap)
{
    uint32_t a[256];
    ck_assert_uint_le(n1, 256);
    ck_assert_uint_le(n2, 256);
    seq(a, 256, base);
    wl_init(w);
    add_seq(w, 0, 1, a, n1, NULL);
    add_seq(w, gap, 2, a, n2, NULL);
}

/* twice_wl's two requests served under prefix sharing (16-token blocks, re-rotated) by the
 * test coster. */
static void prefix_twice(uint32_t base, uint32_t n1, uint32_t n2, serve_result *r)
{
    workload w;
    twice_wl(&w, base, n1, n2, GAP);
    serve_params p = params_for(KVS_PREFIX, 16, KVS_POS_REROTATE);
    run_ok(&p, &w, r);
    wl_free(&w);
}

/* ---- hit rates, hand computed --------------------------------------------------------- */

/* A: 40 tokens; B: shares A's first 35 tokens (blocks 0,1 hit = 32); C: shares 20 (block 0
 * = 16); D: differs at token 3 (0). Prefix: hits 0, 32, 16, 0 of 160 tokens. */
static void build_prefix_wl(workload *w, int same_user)
{
    uint32_t a[40], b[40], c[40], d[40];
    seq(a, 40, 1000);
    memcpy(b, a, sizeof a);
    seq(b + 35, 5, 5000);
    memcpy(c, a, sizeof a);
    seq(c + 20, 20, 6000);
    memcpy(d, a, sizeof a);
    d[3] = 9;
    wl_init(w);
    add_seq(w, 0, 11, a, 40, NULL);
    add_seq(w, GAP, same_user ? 11 : 12, b, 40, NULL);
    add_seq(w, 2 * GAP, same_user ? 11 : 13, c, 40, NULL);
    add_seq(w, 3 * GAP, same_user ? 11 : 14, d, 40, NULL);
}

/* Request i of r reused hits[i] tokens (hits[i] < 0: not checked), for i < n. */
static void expect_hits(const serve_result *r, int n, const int *hits)
{
    for (int i = 0; i < n; i++)
        if (hits[i] >= 0)
            ck_assert_msg(r->req[i].hit == (uint32_t)hits[i],
                          "request %d: %u tokens reused, want %d", i, r->req[i].hit, hits[i]);
}

START_TEST(test_prefix_hits)
{
    workload w;
    build_prefix_wl(&w, 0);
    serve_params p = params_for(KVS_PREFIX, 16, KVS_POS_REROTATE);
    serve_result r;
    run_ok(&p, &w, &r);
    expect_hits(&r, 4, (const int[]){0, 32, 16, 0});
    ck_assert_double_eq_tol(r.token_hit_rate, 48.0 / 160.0, 1e-12);
    ck_assert_double_eq_tol(r.request_hit_rate, 0.5, 1e-12);
    serve_result_free(&r);
    /* no sharing: nothing */
    p.share.kind = KVS_NONE;
    run_ok(&p, &w, &r);
    ck_assert_double_eq(r.token_hit_rate, 0);
    ck_assert_uint_eq(r.cache_peak_tokens, 0);
    serve_result_free(&r);
    wl_free(&w);
}
END_TEST

/* The last token is always computed: a 32-token prompt seen twice reuses 1 block, not 2. */
START_TEST(test_prefix_last_token)
{
    serve_result r;
    prefix_twice(100, 32, 32, &r);
    ck_assert_uint_eq(r.req[1].hit, 16);
    serve_result_free(&r);
}
END_TEST

START_TEST(test_salted_hits)
{
    workload w;
    build_prefix_wl(&w, 0); /* four different users: salting never hits */
    serve_params p = params_for(KVS_SALTED, 16, KVS_POS_REROTATE);
    serve_result r;
    run_ok(&p, &w, &r);
    ck_assert_double_eq(r.token_hit_rate, 0);
    ck_assert_double_eq(r.request_hit_rate, 0);
    serve_result_free(&r);
    wl_free(&w);
    build_prefix_wl(&w, 1); /* one user: the same hits as unsalted prefix sharing */
    run_ok(&p, &w, &r);
    expect_hits(&r, 3, (const int[]){-1, 32, 16});
    ck_assert_double_eq_tol(r.token_hit_rate, 48.0 / 160.0, 1e-12);
    serve_result_free(&r);
    wl_free(&w);
}
END_TEST

/* Span sharing, min_span 8. A = sys(20) | secret(4, s) | doc(24) | q(5, s).
 * B = doc(24) | x(3, s) | sys(20) | q'(5, s): both runs reused, both moved (44 shifted).
 * C = A's tokens by another user: 44 reused, never the secret.
 * D = A's tokens with everything marked insensitive: still 44 (the secret was never cached). */
static void build_span_wl(workload *w, uint32_t *a, uint32_t *b)
{
    seq(a, 20, 100);
    seq(a + 20, 4, 900);
    seq(a + 24, 24, 200);
    seq(a + 48, 5, 950);
    memcpy(b, a + 24, 24 * sizeof *b);
    seq(b + 24, 3, 960);
    memcpy(b + 27, a, 20 * sizeof *b);
    seq(b + 47, 5, 970);
    const char *ma = "iiiiiiiiiiiiiiiiiiiissssiiiiiiiiiiiiiiiiiiiiiiiisssss";
    const char *mb = "iiiiiiiiiiiiiiiiiiiiiiiisssiiiiiiiiiiiiiiiiiiiisssss";
    wl_init(w);
    add_seq(w, 0, 11, a, 53, ma);
    add_seq(w, GAP, 12, b, 52, mb);
    add_seq(w, 2 * GAP, 13, a, 53, ma);
    add_seq(w, 3 * GAP, 14, a, 53, NULL);
}

START_TEST(test_span_hits)
{
    uint32_t a[64], b[64];
    workload w;
    build_span_wl(&w, a, b);
    serve_params p = params_for(KVS_SPAN, 8, KVS_POS_REROTATE);
    serve_result r;
    run_ok(&p, &w, &r);
    expect_hits(&r, 4, (const int[]){0, 44, 44, 44});
    ck_assert_uint_eq(r.req[1].shifted, 44);
    ck_assert_uint_eq(r.req[2].shifted, 0);
    ck_assert_double_eq_tol(r.token_hit_rate, 132.0 / 211.0, 1e-12);
    ck_assert_uint_eq(r.rerotate_tokens, 44);
    serve_result_free(&r);
    /* recompute: runs are reused only where they were computed; B's moved runs miss */
    p.share.position = KVS_POS_RECOMPUTE;
    run_ok(&p, &w, &r);
    expect_hits(&r, 3, (const int[]){-1, 0, 44});
    ck_assert_uint_eq(r.rerotate_tokens, 0);
    serve_result_free(&r);
    /* prefix sharing on the same workload: B shares no prefix with A; C and D repeat A's
     * tokens, so they reuse floor(52/16) = 3 blocks = 48 tokens, the secret included */
    p.share.kind = KVS_PREFIX;
    run_ok(&p, &w, &r);
    expect_hits(&r, 4, (const int[]){-1, 0, 48, 48});
    serve_result_free(&r);
    wl_free(&w);
}
END_TEST

/* ---- the cache alone ------------------------------------------------------------------ */

/* A cache of kind (its min_span and capacity in tokens; 0: the default). */
static kvs *cache_open(int kind, uint32_t min_span, uint32_t capacity)
{
    kvs_params kp;
    kvs_params_default(&kp);
    kp.kind = kind;
    if (min_span)
        kp.min_span = min_span;
    if (capacity)
        kp.capacity_tokens = capacity;
    kvs *c;
    errbuf e;
    ck_assert_msg(kvs_open(&kp, &c, &e) == 0, "%s", e.msg);
    return c;
}

/* One request's prompt through the cache: looked up, inserted, released; the cache stays
 * sane. Its hit tokens. */
static uint32_t put_prompt(kvs *c, const kvs_prompt *pr)
{
    errbuf e;
    kvs_match m;
    kvs_hold h = {0};
    ck_assert_int_eq(kvs_lookup(c, pr, &m, &h, &e), 0);
    ck_assert_int_eq(kvs_insert(c, pr, &m, &h, &e), 0);
    kvs_release(c, &h);
    kvs_hold_free(&h);
    ck_assert(kvs_is_sane(c));
    return m.hit_tokens;
}

static uint32_t put(kvs *c, const uint32_t *t, uint32_t n, uint32_t user)
{
    kvs_prompt pr = {t, NULL, n, 0, user};
    return put_prompt(c, &pr);
}

/* Property: after caching random prompts with random masks, looking any of them up with
 * every token marked insensitive never reuses a position that was sensitive. */
START_TEST(test_span_never_sensitive)
{
    kvs *c = cache_open(KVS_SPAN, 4, 1u << 16);
    errbuf e;
    enum { N = 60, L = 120 };
    static uint32_t tok[N][L];
    static uint8_t sens[N][L];
    uint64_t x = 12345;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < L; j++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            /* a small shared vocabulary of phrases so that runs repeat across prompts */
            tok[i][j] = (uint32_t)((x >> 33) % 6) * 1000 + (uint32_t)j % 40;
            sens[i][j] = ((x >> 20) & 7) == 0;
        }
    static const uint8_t zero[L];
    uint64_t hits = 0;
    for (int i = 0; i < N; i++) {
        kvs_prompt pr = {tok[i], sens[i], L, 0, (uint32_t)i};
        put_prompt(c, &pr);
    }
    /* every cached token must be insensitive where it came from: look each prompt up as an
     * attacker would (all insensitive) and check every reused token also appears insensitive
     * at the same spot in some cached prompt's run — here simply: a reused token's position
     * in its own prompt was insensitive, or the same tokens occur insensitive elsewhere. */
    for (int i = 0; i < N; i++) {
        kvs_prompt pr = {tok[i], zero, L, 0, 999};
        kvs_match m;
        ck_assert_int_eq(kvs_lookup(c, &pr, &m, NULL, &e), 0);
        hits += m.hit_tokens;
        for (uint32_t q = 0; q < m.n_pieces; q++)
            for (uint32_t j = m.piece_start[q]; j < m.piece_start[q] + m.piece_len[q]; j++) {
                int found = 0; /* token tok[i][j] occurs insensitive somewhere */
                for (int i2 = 0; i2 < N && !found; i2++)
                    for (int j2 = 0; j2 < L && !found; j2++)
                        found = tok[i2][j2] == tok[i][j] && !sens[i2][j2];
                ck_assert_msg(found, "reused token %u at %d:%u was only ever sensitive", tok[i][j],
                              i, j);
            }
    }
    ck_assert_uint_gt(hits, 0);
    kvs_close(c);
}
END_TEST

/* A secret token that only ever appears sensitive is never reused, whatever the probe says. */
START_TEST(test_span_secret_never_hit)
{
    uint32_t a[64], b[64];
    workload w;
    build_span_wl(&w, a, b);
    kvs *c = cache_open(KVS_SPAN, 8, 0);
    errbuf e;
    kvs_prompt pa = {a, wl_sens(&w, 0), 53, 0, 11};
    put_prompt(c, &pa);
    kvs_match m;
    static const uint8_t zero[64];
    kvs_prompt probe = {a, zero, 53, 1, 99};
    ck_assert_int_eq(kvs_lookup(c, &probe, &m, NULL, &e), 0);
    for (uint32_t q = 0; q < m.n_pieces; q++) {
        uint32_t s = m.piece_start[q], end = s + m.piece_len[q];
        ck_assert_msg(end <= 20 || s >= 24, "piece [%u,%u) covers the secret [20,24)", s, end);
    }
    ck_assert_uint_eq(m.hit_tokens, 44);
    kvs_close(c);
    wl_free(&w);
}
END_TEST

/* ---- LRU eviction ---------------------------------------------------------------------- */

static uint32_t peek(kvs *c, const uint32_t *t, uint32_t n)
{
    errbuf e;
    kvs_prompt pr = {t, NULL, n, 0, 0};
    kvs_match m;
    ck_assert_int_eq(kvs_lookup(c, &pr, &m, NULL, &e), 0);
    return m.hit_tokens;
}

START_TEST(test_lru_eviction)
{
    kvs *c = cache_open(KVS_PREFIX, 0, 48); /* 3 blocks */
    errbuf e;
    uint32_t A[17], B[17], C[17], D[17];
    seq(A, 17, 100);
    seq(B, 17, 200);
    seq(C, 17, 300);
    seq(D, 17, 400);
    put(c, A, 17, 1);
    put(c, B, 17, 1);
    put(c, C, 17, 1);                        /* pool: A B C (LRU first) */
    ck_assert_uint_eq(put(c, A, 17, 1), 16); /* A used again: B C A */
    put(c, D, 17, 1);                        /* full: evicts B → C A D */
    ck_assert_uint_eq(peek(c, B, 17), 0);
    ck_assert_uint_eq(peek(c, A, 17), 16);
    ck_assert_uint_eq(peek(c, C, 17), 16);
    ck_assert_uint_eq(peek(c, D, 17), 16);
    ck_assert_uint_eq(kvs_get_stats(c)->evicted_tokens, 16);
    ck_assert_uint_eq(kvs_get_stats(c)->used_tokens, 48);
    kvs_close(c);

    /* vLLM frees a request's blocks in reverse: its last block is evicted first */
    c = cache_open(KVS_PREFIX, 0, 32);
    uint32_t E[33];
    seq(E, 33, 500);
    put(c, E, 33, 1); /* blocks e0 e1 */
    put(c, A, 17, 1); /* evicts e1, keeps e0 */
    ck_assert_uint_eq(peek(c, E, 33), 16);
    kvs_close(c);

    /* units held by a running request are never evicted: the new block is dropped */
    c = cache_open(KVS_PREFIX, 0, 16);
    kvs_prompt pa = {A, NULL, 17, 0, 1}, pb = {B, NULL, 17, 0, 1};
    kvs_match ma, mb;
    kvs_hold ha = {0}, hb = {0};
    ck_assert_int_eq(kvs_lookup(c, &pa, &ma, &ha, &e), 0);
    ck_assert_int_eq(kvs_insert(c, &pa, &ma, &ha, &e), 0);
    ck_assert_int_eq(kvs_lookup(c, &pb, &mb, &hb, &e), 0);
    ck_assert_int_eq(kvs_insert(c, &pb, &mb, &hb, &e), 0);
    ck_assert_uint_eq(peek(c, A, 17), 16);
    ck_assert_uint_eq(peek(c, B, 17), 0);
    ck_assert_uint_eq(kvs_get_stats(c)->dropped_tokens, 16);
    kvs_release(c, &ha);
    kvs_release(c, &hb);
    ck_assert(kvs_is_sane(c));
    kvs_hold_free(&ha);
    kvs_hold_free(&hb);
    kvs_close(c);
}
END_TEST

/* Span units are evicted LRU too, and their anchors go with them. */
START_TEST(test_span_eviction)
{
    kvs *c = cache_open(KVS_SPAN, 8, 45); /* two 21-token runs fit, a third evicts the oldest */
    errbuf e;
    uint32_t A[21], B[21], C[21];
    uint8_t z[21] = {0};
    seq(A, 21, 100);
    seq(B, 21, 200);
    seq(C, 21, 300);
    kvs_prompt p[3] = {{A, z, 21, 0, 1}, {B, z, 21, 0, 2}, {C, z, 21, 0, 3}};
    for (int i = 0; i < 3; i++)
        put_prompt(c, &p[i]);
    kvs_match m;
    ck_assert_int_eq(kvs_lookup(c, &p[0], &m, NULL, &e), 0);
    ck_assert_uint_eq(m.hit_tokens, 0); /* A (21 tokens) was evicted for C */
    ck_assert_int_eq(kvs_lookup(c, &p[1], &m, NULL, &e), 0);
    ck_assert_uint_eq(m.hit_tokens, 20);
    ck_assert_int_eq(kvs_lookup(c, &p[2], &m, NULL, &e), 0);
    ck_assert_uint_eq(m.hit_tokens, 20);
    ck_assert_uint_eq(kvs_get_stats(c)->evicted_tokens, 21);
    kvs_close(c);
}
END_TEST

/* ---- serving: TTFT, batching, savings ------------------------------------------------- */

START_TEST(test_ttft_hit_faster)
{
    serve_result r;
    prefix_twice(1000, 200, 200, &r);
    uint64_t miss = r.req[0].first_ns - r.req[0].arrival_ns;
    uint64_t hit = r.req[1].first_ns - r.req[1].arrival_ns;
    ck_assert_uint_eq(r.req[1].hit, 192);
    /* hand: miss = 1e6 + 1e4*200; hit = 1e6 + 1e4*8 + 10*8*192 */
    ck_assert_uint_eq(miss, 1000000ull + 2000000ull);
    ck_assert_uint_eq(hit, 1000000ull + 80000ull + 15360ull);
    ck_assert_uint_lt(hit, miss);
    /* bytes saved = (100*200) - (100*8 + 8*192) */
    ck_assert_int_eq(r.bytes_saved, 20000 - (800 + 1536));
    serve_result_free(&r);
}
END_TEST

/* Two requests at once, batch limit 2, no chunking: prefill A, prefill B, then decode both
 * together; TTFT and finish times by hand. */
START_TEST(test_schedule_by_hand)
{
    uint32_t a[10], b[20];
    seq(a, 10, 100);
    seq(b, 20, 200);
    workload w;
    wl_init(&w);
    errbuf e;
    ck_assert_int_eq(wl_add(&w, 0, 0, 1, 3, a, NULL, 10, &e), 0);
    ck_assert_int_eq(wl_add(&w, 0, 0, 2, 2, b, NULL, 20, &e), 0);
    serve_params p = params_for(KVS_NONE, 16, 0);
    p.batch_limit = 2;
    serve_result r;
    run_ok(&p, &w, &r);
    uint64_t pa = 1000000 + 10000 * 10, pb = 1000000 + 10000 * 20;
    uint64_t d2 = 1000000 + 10000 * 2 + 10 * 20; /* decode batch 2, longest kv 20 */
    uint64_t d1 = 1000000 + 10000 * 1 + 10 * 11; /* A alone, kv 11 */
    ck_assert_uint_eq(r.req[0].first_ns, pa);
    ck_assert_uint_eq(r.req[1].first_ns, pa + pb);
    ck_assert_uint_eq(r.req[1].finish_ns, pa + pb + d2);
    ck_assert_uint_eq(r.req[0].finish_ns, pa + pb + d2 + d1);
    ck_assert_uint_eq(r.steps, 4);
    serve_result_free(&r);
    /* chunked prefill of 16 tokens. A's arrival starts an iteration before B has arrived:
     * step 1 prefills A (10); step 2 prefills 16 of B and decodes A (kv 10); step 3 prefills
     * B's last 4 on 16 cached and decodes A (kv 11), which then finishes. */
    p.chunk = 16;
    run_ok(&p, &w, &r);
    uint64_t s1 = 1000000 + 10000 * 10;
    uint64_t s2 = (1000000 + 10000 * 16) + (1000000 + 10000 + 10 * 10);
    uint64_t s3 = (1000000 + 10000 * 4 + 10 * 4 * 16) + (1000000 + 10000 + 10 * 11);
    ck_assert_uint_eq(r.req[0].first_ns, s1);
    ck_assert_uint_eq(r.req[1].first_ns, s1 + s2 + s3);
    ck_assert_uint_eq(r.req[0].finish_ns, s1 + s2 + s3);
    serve_result_free(&r);
    wl_free(&w);
}
END_TEST

/* ---- the attacker ---------------------------------------------------------------------- */

static leak_params small_leak(int channel)
{
    leak_params lp;
    leak_params_default(&lp);
    lp.trials = 12;
    lp.candidates = 8;
    lp.channel = channel;
    lp.background = 6;
    lp.background_rate = 2.0;
    lp.probe_start_ns = 5000000000ull;
    lp.probe_gap_ns = 1000000000ull;
    return lp;
}

START_TEST(test_leak_prefix_recovers)
{
    leak_params lp = small_leak(LEAK_TTFT);
    serve_params p = params_for(KVS_PREFIX, 16, KVS_POS_REROTATE);
    leak_result r;
    errbuf e;
    ck_assert_msg(leak_run(&lp, &p, &T_COST, &r, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(r.correct, r.trials);
    ck_assert_double_eq_tol(r.bits, 3.0, 1e-9);
    ck_assert_double_gt(r.ttft_gap_ms, 0);
    /* the scheduling-order channel under LPM recovers it too; under FCFS it does not */
    lp.channel = LEAK_ORDER;
    p.scheduler = SRV_LPM;
    ck_assert_msg(leak_run(&lp, &p, &T_COST, &r, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(r.correct, r.trials);
    p.scheduler = SRV_FCFS;
    ck_assert_msg(leak_run(&lp, &p, &T_COST, &r, &e) == 0, "%s", e.msg);
    ck_assert_uint_le(r.correct, 6); /* chance 1.5 of 12; P(X >= 7) < 1e-4 */
}
END_TEST

/* Under salting and sensitivity-masked sharing the attacker's observations do not depend on
 * the secret at all, so its success is chance. */
static void check_no_leak(int kind, int channel)
{
    leak_params lp = small_leak(channel);
    serve_params p = params_for(kind, 16, KVS_POS_REROTATE);
    p.scheduler = channel == LEAK_ORDER ? SRV_LPM : SRV_FCFS;
    double o1[8], o2[8];
    uint32_t g1, g2;
    errbuf e;
    for (uint32_t t = 0; t < 4; t++) {
        ck_assert_msg(leak_trial(&lp, &p, &T_COST, t, 1, o1, &g1, &e) == 0, "%s", e.msg);
        ck_assert_msg(leak_trial(&lp, &p, &T_COST, t, 6, o2, &g2, &e) == 0, "%s", e.msg);
        for (int j = 0; j < 8; j++)
            ck_assert_msg(o1[j] == o2[j], "%s: observation %d depends on the secret",
                          kvs_kind_name(kind), j);
    }
    leak_result r;
    ck_assert_msg(leak_run(&lp, &p, &T_COST, &r, &e) == 0, "%s", e.msg);
    ck_assert_uint_le(r.correct, 6);
    ck_assert_double_eq(r.chance, 0.125);
}

START_TEST(test_leak_salted_nothing) { check_no_leak(KVS_SALTED, LEAK_TTFT); }
END_TEST
START_TEST(test_leak_span_nothing)
{
    check_no_leak(KVS_SPAN, LEAK_TTFT);
    check_no_leak(KVS_SPAN, LEAK_ORDER);
}
END_TEST

START_TEST(test_leak_bits)
{
    ck_assert_double_eq_tol(leak_bits(1.0, 16), 4.0, 1e-12);
    ck_assert_double_eq(leak_bits(1.0 / 16, 16), 0);
    /* p = 0.5, V = 2: binary symmetric channel at p=0.5 carries nothing */
    ck_assert_double_eq(leak_bits(0.5, 2), 0);
    /* V = 2, p = 0.9: 1 − H(0.1) */
    ck_assert_double_eq_tol(leak_bits(0.9, 2), 1 - 0.4689955935892812, 1e-12);
}
END_TEST

/* ---- workloads: determinism, replay files ---------------------------------------------- */

static void gen(uint64_t seed, workload *w)
{
    wl_params wp;
    wl_params_default(&wp);
    wp.seed = seed;
    wp.n_requests = 300;
    wp.rate = 4;
    wp.n_docs = 20;
    wp.docs_per_req = 2;
    wp.user_ctx_len = 32;
    wp.pii_fraction = 0.5;
    errbuf e;
    wl_init(w);
    ck_assert_msg(wl_generate(&wp, w, &e) == 0, "%s", e.msg);
}

START_TEST(test_determinism)
{
    workload w1, w2, w3;
    gen(5, &w1);
    gen(5, &w2);
    gen(6, &w3);
    ck_assert_uint_eq(w1.n_tok, w2.n_tok);
    ck_assert(!memcmp(w1.tok, w2.tok, w1.n_tok * sizeof *w1.tok));
    ck_assert(!memcmp(w1.sens, w2.sens, w1.n_tok));
    ck_assert(!memcmp(w1.req, w2.req, w1.n * sizeof *w1.req));
    ck_assert(w3.n_tok != w1.n_tok || memcmp(w1.tok, w3.tok, w1.n_tok * sizeof *w1.tok));
    for (int k = 0; k < KVS_N; k++) {
        serve_params p = params_for(k, 16, KVS_POS_REROTATE);
        p.share.capacity_tokens = 20000;
        p.chunk = k == KVS_SPAN ? 256 : 0;
        serve_result a, b;
        run_ok(&p, &w1, &a);
        run_ok(&p, &w2, &b);
        ck_assert(!memcmp(a.req, b.req, a.n * sizeof *a.req));
        ck_assert(!memcmp(a.ttft_ms, b.ttft_ms, sizeof a.ttft_ms));
        ck_assert_uint_eq(a.bytes, b.bytes);
        if (k != KVS_NONE)
            ck_assert_double_gt(a.token_hit_rate, 0);
        serve_result_free(&a);
        serve_result_free(&b);
    }
    wl_free(&w1);
    wl_free(&w2);
    wl_free(&w3);
}
END_TEST

/* A pool smaller than the working set evicts (LRU) and hits less, and never holds more than
 * its capacity. */
START_TEST(test_capacity_eviction)
{
    workload w;
    gen(11, &w);
    for (int k = KVS_PREFIX; k < KVS_N; k++) {
        serve_params p = params_for(k, 16, KVS_POS_REROTATE);
        serve_result big, small;
        run_ok(&p, &w, &big);
        p.share.capacity_tokens = 3000;
        run_ok(&p, &w, &small);
        ck_assert_uint_eq(big.evicted_tokens, 0);
        ck_assert_uint_gt(small.evicted_tokens, 0);
        ck_assert_uint_le(small.cache_peak_tokens, 3000);
        ck_assert_double_lt(small.token_hit_rate, big.token_hit_rate);
        serve_result_free(&big);
        serve_result_free(&small);
    }
    wl_free(&w);
}
END_TEST

/* Span sharing reuses at least what prefix sharing does on a RAG workload where documents
 * follow private user context. */
START_TEST(test_policy_ordering)
{
    workload w;
    gen(9, &w);
    double rate[KVS_N];
    for (int k = 0; k < KVS_N; k++) {
        serve_params p = params_for(k, 16, KVS_POS_REROTATE);
        serve_result r;
        run_ok(&p, &w, &r);
        rate[k] = r.token_hit_rate;
        serve_result_free(&r);
    }
    ck_assert_double_eq(rate[KVS_NONE], 0);
    ck_assert_double_lt(rate[KVS_SALTED], rate[KVS_PREFIX]);
    ck_assert_double_gt(rate[KVS_SPAN], rate[KVS_PREFIX]);
    wl_free(&w);
}
END_TEST

START_TEST(test_workload_file)
{
    const char *path = testdir_path(&td, "w.txt");
    workload w, r;
    gen(3, &w);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(wl_write(&w, f), 0);
    fclose(f);
    wl_init(&r);
    errbuf e;
    ck_assert_msg(wl_load(&r, path, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(r.n, w.n);
    ck_assert(!memcmp(r.tok, w.tok, w.n_tok * sizeof *w.tok));
    ck_assert(!memcmp(r.sens, w.sens, w.n_tok));
    wl_free(&r);
    wl_free(&w);
    /* errors name file:line:col (the first with the file's path before them) */
    static const struct {
        const char *text;
        int with_path;
        const char *want;
    } bad[] = {
        {"mpcsim-serve-workload 1\nreq 5 0 1 2 : 1 2 3\nreq 7 0 1 x : 4\n", 1,
         ":3:11: error: expected decode_len"},
        {"mpcsim-serve-workload 1\nreq 5 0 1 2 : 1 2 3\nreq 4 0 1 2 : 4\n", 0,
         ":3:5: error: arrival 4 is before"},
    };
    for (int i = 0; i < TH_N(bad); i++) {
        th_write(path, bad[i].text);
        wl_init(&r);
        ck_assert_int_eq(wl_load(&r, path, &e), MS_ERR_FORMAT);
        char want[300];
        snprintf(want, sizeof want, "%s%s", bad[i].with_path ? path : "", bad[i].want);
        ck_assert_msg(strstr(e.msg, want), "got: %s", e.msg);
        wl_free(&r);
    }
}
END_TEST

/* ---- cost buckets: the stated error bound ----------------------------------------------- */

/* A step costed with bucket b lies between the exact cost and the cost of b-1 more new and
 * b-1 more cached tokens (serve.h). One request of 37 tokens after a 16-token prefix hit. */
START_TEST(test_bucket_bound)
{
    workload w;
    twice_wl(&w, 100, 33, 37,
             GAP); /* the first caches 2 blocks; the second hits 32, prefills 5 on 32 */
    serve_params p = params_for(KVS_PREFIX, 16, KVS_POS_REROTATE);
    serve_result r1, r16;
    run_ok(&p, &w, &r1);
    p.cost_bucket = 16;
    run_ok(&p, &w, &r16);
    uint64_t t1 = r1.req[1].first_ns - r1.req[1].arrival_ns;
    uint64_t t16 = r16.req[1].first_ns - r16.req[1].arrival_ns;
    step_figures hi;
    errbuf e;
    t_step(NULL, PHASE_PREFILL, 5 + 15, 32 + 15, 1, &hi, &e);
    ck_assert_uint_eq(t1, 1000000ull + 10000ull * 5 + 10ull * 5 * 32);
    ck_assert_uint_ge(t16, t1);
    ck_assert_uint_le(t16, hi.latency_ns);
    serve_result_free(&r1);
    serve_result_free(&r16);
    wl_free(&w);
}
END_TEST

/* ---- the real coster: stepcost and the re-rotation program ------------------------------ */

static int real_cfg(const char *model, run_cfg *c, errbuf *e)
{
    memset(c, 0, sizeof *c);
    const proto *pr = proto_find("semi2k");
    ck_assert_ptr_nonnull(pr);
    int rc;
    if ((rc = model_load(model, &c->model, e)) ||
        (rc = proto_cfg_default("semi2k", &c->proto, e)) ||
        (rc = net_parse("lan", pr->n_parties, &c->net, e)) ||
        (rc = machine_load("default", &c->machine, e)))
        return rc;
    c->work.batch = 1;
    return 0;
}

START_TEST(test_real_coster)
{
    run_cfg cfg;
    errbuf e;
    ck_assert_msg(real_cfg("stories260K", &cfg, &e) == 0, "%s", e.msg);
    step_figures r1, r2;
    ck_assert_int_eq(serve_rerotate_cost(&cfg, 16, &r1, &e), 0);
    ck_assert_int_eq(serve_rerotate_cost(&cfg, 64, &r2, &e), 0);
    ck_assert_uint_gt(r1.latency_ns, 0);
    ck_assert_uint_eq(r1.rounds, r2.rounds); /* vectorized: rounds do not grow with tokens */
    ck_assert_uint_ge(r2.bytes, r1.bytes);
    ck_assert_uint_gt(r2.latency_ns, r1.latency_ns);
    /* serving through stepcost: a prefix hit costs fewer bytes and less time than a miss */
    serve_stepcoster *sc;
    serve_coster c;
    ck_assert_int_eq(serve_stepcoster_open(&cfg, 4, &sc, &c, &e), 0);
    workload w;
    twice_wl(&w, 10, 200, 200, 100 * GAP);
    serve_params p = params_for(KVS_PREFIX, 16, KVS_POS_REROTATE);
    serve_result r;
    ck_assert_msg(serve_run(&p, &w, &c, &r, &e) == 0, "%s", e.msg);
    ck_assert_uint_lt(r.req[1].first_ns - r.req[1].arrival_ns,
                      r.req[0].first_ns - r.req[0].arrival_ns);
    ck_assert_int_gt(r.bytes_saved, 0);
    serve_result_free(&r);
    serve_stepcoster_close(sc);
    wl_free(&w);
}
END_TEST

/* ---- the serve command ------------------------------------------------------------------ */

/* Runs `mpcsim serve ARGS` in dir, its stderr into err (cap bytes); its exit status. */
static int sh(const char *dir, const char *args, char *err, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' serve %s >/dev/null", dir, th_bin(), args);
    return th_sh(cmd, err, cap);
}

static const char *const TINY =
    "name: tiny\nmodel: stories260K\nprotocol: semi2k\nnetwork: lan\nseed: 3\n"
    "workload:\n  requests: 30\n  rate: [50, 200]\n  tenants: 2\n  users_per_tenant: 3\n"
    "  system_prompt: 64\n  documents: 4\n  document_len: 32\n  docs_per_request: 1\n"
    "  turn: [4, 12]\n  decode: [2, 6]\n"
    "sharing:\n  policies: [prefix, span]\n  capacity_tokens: 4096\n"
    "attack:\n  trials: 4\n  candidates: 4\n  background_load: 0\n";

static int64_t count(const char *db, const char *table)
{
    char q[128];
    snprintf(q, sizeof q, "SELECT count(*) FROM %s", table);
    return sqlfix_file_int(db, q);
}

START_TEST(test_cli)
{
    const char *dir = td.dir;
    char err[4096], path[600];
    th_file(&td, "s.yaml", TINY);
    int rc = sh(dir, "s.yaml -o out.db --dump-workload w.txt -q", err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    snprintf(path, sizeof path, "%s/out.db", dir);
    ck_assert_int_eq(count(path, "serve_runs"), 4);
    ck_assert_int_eq(count(path, "serve_requests"), 4 * 30);
    ck_assert_int_eq(count(path, "serve_leak"), 2);
    /* the dumped workload replays */
    rc = sh(dir, "--workload w.txt -m stories260K --policy salted --no-attack -o r.db -q", err,
            sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    snprintf(path, sizeof path, "%s/r.db", dir);
    ck_assert_int_eq(count(path, "serve_runs"), 1);
    /* input errors: file:line:col, a hint, exit 2, no database */
    char bad[2048];
    snprintf(bad, sizeof bad, "%s", TINY);
    char *pol = strstr(bad, "  policies:");
    memcpy(pol, "  polices: ", 11);
    th_file(&td, "bad.yaml", bad);
    rc = sh(dir, "bad.yaml -o bad.db", err, sizeof err);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "bad.yaml:18:3: error: unknown key 'polices' in 'sharing'"), "%s",
                  err);
    ck_assert_msg(strstr(err, "did you mean 'policies'?"), "%s", err);
    snprintf(path, sizeof path, "%s/bad.db", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    /* re-rotation needs RoPE: gpt2 has learned positions */
    th_file(&td, "g.yaml",
            "model: gpt2\nworkload:\n  requests: 5\nsharing:\n  policies: span\n"
            "  position: rerotate\n");
    rc = sh(dir, "g.yaml -o g.db", err, sizeof err);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "g.yaml:6:13: error: position 'rerotate' needs a RoPE model"), "%s",
                  err);
}
END_TEST

/* A protocol entry as a mapping of protocol keys (compat, gather, ...), as in run scenarios: the
 * runs cost with that profile, are stored under its label, and a bad key or value is refused at
 * its place. */
START_TEST(test_cli_protocol_keys)
{
    const char *dir = td.dir;
    char err[4096], path[600], text[2048];
    static const char *const protos[] = {"semi2k", "{name: semi2k, compat: spu}"};
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text, "%s", TINY);
        char *p = strstr(text, "protocol: semi2k\n"), rest[2048];
        snprintf(rest, sizeof rest, "%s", p + strlen("protocol: semi2k\n"));
        snprintf(p, sizeof text - (size_t)(p - text), "protocol: %s\n%s", protos[i], rest);
        char name[32];
        snprintf(name, sizeof name, "p%d.yaml", i);
        th_file(&td, name, text);
        char args[128];
        snprintf(args, sizeof args, "%s -o out.db --policy prefix --rate 50 --no-attack -q", name);
        int rc = sh(dir, args, err, sizeof err);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    }
    snprintf(path, sizeof path, "%s/out.db", dir);
    ck_assert_int_eq(count(path, "serve_runs"), 2);
    ck_assert_int_eq(
        sqlfix_file_int(path, "SELECT count(*) FROM serve_runs WHERE protocol = 'semi2k/spu' "
                              "AND config LIKE '%protocol: semi2k/spu%'"),
        1);
    /* SPU's kernels cost the same prefills other bytes than the native ones */
    ck_assert_int_eq(sqlfix_file_int(path, "SELECT count(DISTINCT value) FROM serve_metrics "
                                           "WHERE name = 'online_bytes'"),
                     2);
    /* a value the key does not take, and a profile the protocol lacks: at their place */
    snprintf(text, sizeof text,
             "model: stories260K\nprotocol: {name: semi2k, compat: spv}\n"
             "workload:\n  requests: 5\n");
    th_file(&td, "bad.yaml", text);
    int rc = sh(dir, "bad.yaml -o bad.db", err, sizeof err);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "bad.yaml:2:"), "%s", err);
    ck_assert_msg(strstr(err, "compat"), "%s", err);
    th_file(&td, "bad2.yaml",
            "model: stories260K\nprotocol: {name: aby3, compat: crypten}\n"
            "workload:\n  requests: 5\n");
    rc = sh(dir, "bad2.yaml -o bad.db", err, sizeof err);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "bad2.yaml:2:"), "%s", err);
    snprintf(path, sizeof path, "%s/bad.db", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
}
END_TEST

Suite *serve_suite(void)
{
    Suite *s = suite_create("serve");
    TCase *t = th_case(s, "core", 60);
    TESTDIR_USE(t);
    TH_TESTS(t, test_prefix_hits, test_prefix_last_token, test_salted_hits, test_span_hits,
             test_span_never_sensitive, test_span_secret_never_hit, test_lru_eviction,
             test_span_eviction, test_ttft_hit_faster, test_schedule_by_hand,
             test_leak_prefix_recovers, test_leak_salted_nothing, test_leak_span_nothing,
             test_leak_bits, test_determinism, test_policy_ordering, test_capacity_eviction,
             test_workload_file, test_bucket_bound, test_real_coster, test_cli,
             test_cli_protocol_keys);
    return s;
}
