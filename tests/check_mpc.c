/* check_mpc.c — the real backend: shares reconstruct, every primitive of eng.h opened and
 * compared with plaintext in both protocols, measured bytes/rounds equal to the PRIMITIVES.md
 * formulas (computed here independently), what P1 receives independent of the secrets; faults
 * are in check_mpc_fault.c. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "protocols/backend/mpc_local.h"
#include "protocols/backend/mpc_run.h"
#include "harness.h"
#include "mpcfix.h"
#include "testdir.h"

/* ---------------------------------------------------------------- fixtures */

#define NMAX 8192
static uint64_t X[NMAX], Y[NMAX]; /* plaintext operands, visible to the forked nodes */

typedef struct pcase {
    int prim;  /* PRIM_* */
    size_t n;  /* elements (EW) */
    int to;    /* open: party or -1 */
    int owner; /* input: owner */
    uint32_t b, m, k, nn, flags;
    int bits; /* trunc */
    int trunc_local;
    int trunc_spu; /* SPU's TruncAPr message pattern (compat: spu) */
    int tap;       /* P1 records a byte histogram of what it receives */
} pcase;

static uint64_t hist[256];
static int tap_on;
static void tap(void *ctx, int from, int type, const void *buf, size_t len)
{
    (void)ctx;
    (void)from;
    (void)type;
    if (!tap_on)
        return;
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        hist[p[i]]++;
}

static int dom_of(int prim) { return prim == PRIM_AND || prim == PRIM_B2A ? DOM_BOOL : DOM_ARITH; }

/* Right-operand instances: 0x100 one for all, 0x200 one per pair of instances (GQA), else b. */
static uint32_t y_inst(const pcase *c)
{
    return c->flags & 0x100 ? 1 : c->flags & 0x200 ? c->b / 2 : c->b;
}

static void sizes(const pcase *c, size_t *nx, size_t *ny, size_t *nz)
{
    if (c->prim == PRIM_MATMUL) {
        *nx = (size_t)c->b * c->m * c->k;
        *ny = (size_t)y_inst(c) * c->k * c->nn;
        *nz = (size_t)c->b * c->m * c->nn;
    } else
        *nx = *ny = *nz = c->n;
}

/* Every node: share X (P0) and Y (P1), run the primitive between two counter snapshots, then
 * open the result to all (uncounted). Reports mpc_op_stat, the opened values, P1's histogram. */
static int prim_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    const pcase *c = arg;
    size_t nx, ny, nz;
    sizes(c, &nx, &ny, &nz);
    int dom = dom_of(c->prim), rc;
    mpc_val x = {0}, y = {0}, z = {0};
    uint64_t *res = calloc(nz + 1, 8);
    e->cfg.trunc_local = c->trunc_local;
    e->kv.trunc = c->trunc_local ? KV_TRUNC_LOCAL : c->trunc_spu ? KV_TRUNC_SPU : KV_TRUNC_PAIR;
    if ((rc = e->vt->alloc(e, &x, nx, dom)) || (rc = e->vt->input(e, &x, 0, X)) ||
        (rc = e->vt->alloc(e, &y, ny, c->prim == PRIM_MULA1B ? DOM_BOOL : dom)) ||
        (rc = e->vt->input(e, &y, 1, Y)))
        goto out;
    if (c->prim == PRIM_MATMUL && (c->flags & OPF_FIXED_B) &&
        (rc = mpc_engine_setup_fixed(e, 7, &y, NULL)))
        goto out;
    if (c->tap && e->party == 1 && !mpc_engine_is_dealer(e)) {
        memset(hist, 0, sizeof hist);
        mpc_net_set_tap(net, tap, NULL);
        tap_on = 1;
    }
    mpc_net_stats a = *mpc_net_get_stats(net);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int opened = 0;
    switch (c->prim) {
    case PRIM_INPUT:
        rc = e->vt->alloc(e, &z, nz, DOM_ARITH);
        if (!rc)
            rc = e->vt->input(e, &z, c->owner, c->owner == 0 ? X : Y);
        break;
    case PRIM_OPEN:
        rc = e->vt->open(e, res, &x, c->to);
        opened = 1;
        break;
    case PRIM_MUL: rc = e->vt->mul(e, &z, &x, &y); break;
    case PRIM_SQUARE: rc = e->vt->square(e, &z, &x); break;
    case PRIM_MATMUL:
        rc = e->vt->matmul(e, &z, &x, &y, c->b, c->m, c->k, c->nn, c->flags & 0xff, 7);
        break;
    case PRIM_TRUNC: rc = e->vt->trunc(e, &z, &x, c->bits); break;
    case PRIM_AND: rc = e->vt->and_bb(e, &z, &x, &y); break;
    case PRIM_B2A: rc = e->vt->b2a(e, &z, &x); break;
    case PRIM_MULA1B: rc = e->vt->mul_a1b(e, &z, &x, &y); break;
    default: rc = MS_ERR_INTERNAL;
    }
    tap_on = 0;
    if (rc)
        goto out;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    mpc_net_stats b = *mpc_net_get_stats(net);
    mpc_op_stat st;
    mpc_stat_between(&a, &b,
                     (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec)),
                     &st);
    if (!opened)
        rc = e->vt->open(e, res, &z, -1);
    if (rc)
        goto out;
    fwrite(&st, sizeof st, 1, out);
    fwrite(res, 8, nz, out);
    fwrite(hist, sizeof hist, 1, out);
    /* this node's shares of the result (the operand for an open): party, domain, both slots */
    const mpc_val *v = opened ? &x : &z;
    int64_t who[2] = {mpc_engine_is_dealer(e) ? -1 : e->party, v->dom};
    fwrite(who, sizeof who, 1, out);
    for (int t = 0; t < 2; t++)
        if (v->s[t])
            fwrite(v->s[t], 8, nz, out);
        else
            for (size_t k = 0; k < nz; k++)
                fwrite(&(uint64_t){0}, 8, 1, out);
out:
    if (rc)
        err_set(err, rc, "%s", mpc_engine_error(e));
    e->vt->release(e, &x);
    e->vt->release(e, &y);
    e->vt->release(e, &z);
    free(res);
    return rc;
}

typedef struct pres {
    mpc_op_stat st[MPC_NODES_MAX];
    uint64_t *val[MPC_NODES_MAX];
    int64_t party[MPC_NODES_MAX], dom;
    uint64_t *sh[MPC_NODES_MAX][2]; /* each node's share slots of the result */
    uint64_t hist[256];
    mpc_net_stats net[MPC_NODES_MAX];
} pres;

/* The result's shares reconstruct what was opened: the compute parties' first slots sum
 * (arithmetic) or XOR (boolean) to the value, and in aby3's replicated sharing party i's second
 * slot is party i+1's first (the copy two parties hold of one share agrees). */
static void check_shares(const char *pname, const pcase *c, const pres *r, int nodes, size_t nz)
{
    int at[3] = {-1, -1, -1}, np = 0, aby3 = !strcmp(pname, "aby3");
    for (int i = 0; i < nodes; i++)
        if (r->party[i] >= 0 && r->party[i] < 3) {
            at[r->party[i]] = i;
            np++;
        }
    ck_assert_int_eq(np, aby3 ? 3 : 2);
    int open_all = c->prim != PRIM_OPEN || c->to < 0;
    for (size_t k = 0; k < nz; k++) {
        uint64_t v = 0;
        for (int p = 0; p < np; p++)
            v = r->dom == DOM_BOOL ? v ^ r->sh[at[p]][0][k] : v + r->sh[at[p]][0][k];
        if (open_all)
            ck_assert_msg(v == r->val[at[0]][k], "%s %s: entry %zu: shares give %llx, opened %llx",
                          pname, eng_prim_name(c->prim), k, (unsigned long long)v,
                          (unsigned long long)r->val[at[0]][k]);
        for (int p = 0; aby3 && p < 3; p++)
            ck_assert_msg(r->sh[at[p]][1][k] == r->sh[at[(p + 1) % 3]][0][k],
                          "aby3 %s: entry %zu: P%d's copy of x%d differs from P%d's",
                          eng_prim_name(c->prim), k, p, (p + 1) % 3, (p + 1) % 3);
    }
}

static uint64_t latency_ns; /* injected by the transport in test_latency */

static void run_prim(const char *pname, const pcase *c, pres *r)
{
    mpc_launch l = {.cfg = mpcfix_cfg(pname), .deadline_ms = 30000, .latency_ns = latency_ns};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    errbuf e;
    ck_assert_msg(mpc_launch_run(&l, prim_node, (void *)c, nr, &nodes, &e) == MS_OK, "%s", e.msg);
    size_t nx, ny, nz;
    sizes(c, &nx, &ny, &nz);
    memset(r, 0, sizeof *r);
    for (int i = 0; i < nodes; i++) {
        ck_assert_msg(nr[i].rc == MS_OK, "%s prim %s node %d: %s", pname, eng_prim_name(c->prim), i,
                      nr[i].err);
        size_t at = sizeof(mpc_op_stat) + 8 * nz + sizeof hist;
        ck_assert_uint_eq(nr[i].out_len, at + 16 + 16 * nz);
        memcpy(&r->st[i], nr[i].out, sizeof(mpc_op_stat));
        r->val[i] = malloc(8 * nz + 8);
        memcpy(r->val[i], nr[i].out + sizeof(mpc_op_stat), 8 * nz);
        if (i == 1)
            memcpy(r->hist, nr[i].out + sizeof(mpc_op_stat) + 8 * nz, sizeof hist);
        int64_t who[2];
        memcpy(who, nr[i].out + at, sizeof who);
        r->party[i] = who[0];
        r->dom = who[1];
        for (int t = 0; t < 2; t++) {
            r->sh[i][t] = malloc(8 * nz + 8);
            memcpy(r->sh[i][t], nr[i].out + at + 16 + 8 * nz * (size_t)t, 8 * nz);
        }
        r->net[i] = nr[i].st;
    }
    mpc_node_results_free(nr, nodes);
    check_shares(pname, c, r, nodes, nz);
}

static void pres_free(pres *r)
{
    for (int i = 0; i < MPC_NODES_MAX; i++) {
        free(r->val[i]);
        free(r->sh[i][0]);
        free(r->sh[i][1]);
    }
}

/* ---------------------------------------------------------------- expected traffic */

/* Expected online bytes on link i→j, rounds and offline bytes at P1, written from PRIMITIVES.md
 * (independently of the engines). */
typedef struct expect {
    uint64_t link[3][3];
    uint64_t rounds;
    uint64_t offline_p1;
} expect;

static void expect_semi2k(const pcase *c, expect *x)
{
    memset(x, 0, sizeof *x);
    uint64_t n = c->n;
    x->rounds = 1;
    switch (c->prim) {
    case PRIM_INPUT: x->link[c->owner][1 - c->owner] = 8 * n; break;
    case PRIM_OPEN:
        if (c->to < 0)
            x->link[0][1] = x->link[1][0] = 8 * n;
        else
            x->link[1 - c->to][c->to] = 8 * n;
        break;
    case PRIM_MUL:
    case PRIM_AND:
    case PRIM_MULA1B: /* SPU semi2k MulA1B: one Beaver open of two values */
        x->link[0][1] = x->link[1][0] = 16 * n;
        x->offline_p1 = 8 * n;
        break;
    case PRIM_SQUARE:
    case PRIM_B2A:
        x->link[0][1] = x->link[1][0] = 8 * n;
        x->offline_p1 = 8 * n;
        break;
    case PRIM_TRUNC:
        if (c->trunc_local) {
            x->rounds = 0;
            break;
        }
        x->link[0][1] = x->link[1][0] = 8 * n;
        x->offline_p1 = 16 * n;
        break;
    case PRIM_MATMUL: {
        uint64_t b = c->b, m = c->m, k = c->k, nn = c->nn;
        /* a y shared by all instances (op.h) is masked and opened once */
        uint64_t yk = (uint64_t)y_inst(c) * k * nn;
        x->link[0][1] = x->link[1][0] = 8 * (b * m * k + ((c->flags & OPF_FIXED_B) ? 0 : yk));
        x->offline_p1 = 8 * b * m * nn;
        break;
    }
    }
}

static void expect_aby3(const pcase *c, expect *x)
{
    memset(x, 0, sizeof *x);
    uint64_t n = c->n;
    x->rounds = 1;
    switch (c->prim) {
    case PRIM_INPUT:
        for (int j = 0; j < 3; j++)
            if (j != c->owner)
                x->link[c->owner][j] = 16 * n;
        break;
    case PRIM_OPEN:
        if (c->to < 0)
            for (int i = 0; i < 3; i++)
                x->link[i][(i + 2) % 3] = 8 * n;
        else
            x->link[(c->to + 1) % 3][c->to] = 8 * n;
        break;
    case PRIM_MUL:
    case PRIM_SQUARE:
    case PRIM_AND:
        for (int i = 0; i < 3; i++)
            x->link[i][(i + 2) % 3] = 8 * n;
        break;
    case PRIM_MATMUL:
        for (int i = 0; i < 3; i++)
            x->link[i][(i + 2) % 3] = 8ull * c->b * c->m * c->nn;
        break;
    case PRIM_TRUNC:
        if (c->trunc_local) { /* Share Truncation I */
            x->link[0][2] = 8 * n;
            break;
        }
        x->rounds = 2;
        if (c->trunc_spu) { /* SPU TruncAPr: P0 ↔ P1 open c, P2 → P0 and P1 two words each,
                             * then P0 ↔ P1 one word (PRIMITIVES.md, 64 B in all) */
            x->link[0][1] = x->link[1][0] = 16 * n;
            x->link[2][0] = x->link[2][1] = 16 * n;
            break;
        }
        /* the pair: P0 ↔ P1 open c, P2 → P1 the (r', msb(r)) shares, then P0, P1 → P2 */
        x->link[0][1] = x->link[1][0] = 8 * n;
        x->link[2][1] =
            8 * n + n * (((uint64_t)c->bits + 1 + 7) / 8); /* r' and msb(r) mod 2^(f+1) */
        x->link[0][2] = x->link[1][2] = 8 * n;
        break;
    case PRIM_MULA1B: /* SPU aby3 MulA1B: two three-party OTs (PRIMITIVES.md, 64 B in all) */
        x->rounds = 2;
        x->link[0][2] = x->link[2][1] = 16 * n; /* the senders' two words */
        x->link[1][2] = x->link[0][1] = 8 * n;  /* the helpers' word */
        x->link[2][1] += 8 * n;                 /* round 2: the receivers forward m */
        x->link[1][0] = 8 * n;
        break;
    case PRIM_B2A:
        x->rounds = 2;
        for (int i = 0; i < 3; i++)
            x->link[i][(i + 2) % 3] = 16 * n;
        break;
    }
}

static void check_traffic(const char *pname, const pcase *c, const pres *r)
{
    expect x;
    int semi = !strcmp(pname, "semi2k"), np = semi ? 2 : 3;
    if (semi)
        expect_semi2k(c, &x);
    else
        expect_aby3(c, &x);
    for (int i = 0; i < np; i++) {
        ck_assert_msg(r->st[i].rounds == x.rounds,
                      "%s %s n=%zu: P%d counted %llu rounds, %llu expected", pname,
                      eng_prim_name(c->prim), c->n, i, (unsigned long long)r->st[i].rounds,
                      (unsigned long long)x.rounds);
        for (int j = 0; j < np; j++) {
            if (i == j)
                continue;
            ck_assert_msg(r->st[i].sent[j] == x.link[i][j],
                          "%s %s n=%zu: P%d→P%d %llu bytes, %llu expected", pname,
                          eng_prim_name(c->prim), c->n, i, j, (unsigned long long)r->st[i].sent[j],
                          (unsigned long long)x.link[i][j]);
            ck_assert_uint_eq(r->st[j].recv[i], x.link[i][j]);
        }
        ck_assert_uint_eq(r->st[i].offline_recv, i == 1 ? x.offline_p1 : 0);
    }
    if (semi) /* the dealer sent the corrections and nothing online */
        ck_assert_uint_eq(r->st[2].offline_sent, x.offline_p1);
}

/* ---------------------------------------------------------------- plaintext references */

static void check_values(const char *pname, const pcase *c, const pres *r)
{
    size_t nx, ny, nz;
    sizes(c, &nx, &ny, &nz);
    int np = strcmp(pname, "semi2k") ? 3 : 2;
    uint64_t *ref = calloc(nz + 1, 8);
    for (size_t i = 0; i < nz; i++) {
        switch (c->prim) {
        case PRIM_INPUT: ref[i] = c->owner == 0 ? X[i] : Y[i]; break;
        case PRIM_OPEN: ref[i] = X[i]; break;
        case PRIM_MUL: ref[i] = X[i] * Y[i]; break;
        case PRIM_SQUARE: ref[i] = X[i] * X[i]; break;
        case PRIM_TRUNC: ref[i] = (uint64_t)((int64_t)X[i] >> c->bits); break;
        case PRIM_AND: ref[i] = X[i] & Y[i]; break;
        case PRIM_B2A: ref[i] = X[i] & 1; break;
        case PRIM_MULA1B: ref[i] = X[i] * (Y[i] & 1); break;
        default: break;
        }
    }
    if (c->prim == PRIM_MATMUL) {
        int tb = (c->flags & OPF_TRANS_B) != 0;
        uint32_t share = c->b / y_inst(c);
        for (uint32_t b = 0; b < c->b; b++)
            for (uint32_t i = 0; i < c->m; i++)
                for (uint32_t j = 0; j < c->nn; j++) {
                    uint64_t s = 0;
                    const uint64_t *Yb = Y + (size_t)(b / share) * c->k * c->nn;
                    for (uint32_t q = 0; q < c->k; q++)
                        s += X[((size_t)b * c->m + i) * c->k + q] *
                             (tb ? Yb[(size_t)j * c->k + q] : Yb[(size_t)q * c->nn + j]);
                    ref[((size_t)b * c->m + i) * c->nn + j] = s;
                }
    }
    for (int p = 0; p < np; p++) {
        if (c->prim == PRIM_OPEN && c->to >= 0 && p != c->to)
            continue;
        for (size_t i = 0; i < nz; i++) {
            int64_t d = (int64_t)(r->val[p][i] - ref[i]);
            int64_t tol = c->prim == PRIM_TRUNC ? 1 : 0; /* probabilistic truncation: ±1 ulp */
            ck_assert_msg(d >= -tol && d <= tol, "%s %s: P%d element %zu = %llx, plaintext %llx",
                          pname, eng_prim_name(c->prim), p, i, (unsigned long long)r->val[p][i],
                          (unsigned long long)ref[i]);
        }
    }
    free(ref);
}

static void prim_roundtrip(const char *pname, pcase c)
{
    size_t nx, ny, nz;
    sizes(&c, &nx, &ny, &nz);
    int bound = dom_of(c.prim) == DOM_BOOL ? 64 : (c.prim == PRIM_TRUNC ? 40 : 64);
    mpcfix_fill(X, nx, 11 + c.n + c.prim, bound);
    mpcfix_fill(Y, ny, 97 + c.n, bound);
    pres r;
    run_prim(pname, &c, &r);
    check_values(pname, &c, &r);
    check_traffic(pname, &c, &r);
    pres_free(&r);
}

/* ---------------------------------------------------------------- tests: primitives */

static const char *const protos[2] = {"semi2k", "aby3"};

START_TEST(test_elementwise)
{
    const char *pr = protos[_i];
    static const size_t ns[] = {1, 7, 1000};
    static const int prims[] = {PRIM_MUL, PRIM_SQUARE, PRIM_AND, PRIM_B2A, PRIM_TRUNC, PRIM_MULA1B};
    for (size_t a = 0; a < 3; a++)
        for (size_t q = 0; q < sizeof prims / sizeof *prims; q++) {
            pcase c = {.prim = prims[q], .n = ns[a], .bits = 18};
            prim_roundtrip(pr, c);
        }
    pcase lt = {.prim = PRIM_TRUNC, .n = 100, .bits = 12, .trunc_local = 1};
    prim_roundtrip(pr, lt);
}
END_TEST

/* Truncation at the edges of its failure model (PRIMITIVES.md): the pair (the default) is
 * within one unit for every |x| < 2^62, including both ends of the range, and its rounding
 * goes up with probability (x mod 2^f)/2^f; past 2^62 it fails at once, x = 2^62 + d with
 * probability d/2^63 — the range is sharp. Local truncation (semi2k SecureML, aby3 Share
 * Truncation I) fails with probability |x|/2^64: at |x| = 2^60, 1/16 of the elements. */
static int64_t trunc_err(uint64_t got, uint64_t x, int f)
{
    return (int64_t)(got - (uint64_t)((int64_t)x >> f));
}

START_TEST(test_trunc_edges)
{
    const char *pr = protos[_i];
    const int f = 18;
    const size_t n = 4096;
    uint64_t s = 77;
    pres r;
    /* pair: the range's ends, values next to them, and x = k·2^f + 2^f/4 (round up 1 in 4) */
    for (size_t i = 0; i < n; i++) {
        uint64_t m = mpcfix_mix(&s) & 0xffff;
        switch (i % 4) {
        case 0: X[i] = (1ull << 62) - 1 - m; break;
        case 1: X[i] = (uint64_t)(-(1ll << 62)) + m; break;
        case 2: X[i] = ((mpcfix_mix(&s) >> 20) << f) + (1ull << (f - 2)); break;
        default: X[i] = -(((mpcfix_mix(&s) >> 20) << f) + (3ull << (f - 2))); break;
        }
    }
    pcase c = {.prim = PRIM_TRUNC, .n = n, .bits = f};
    run_prim(pr, &c, &r);
    size_t up2 = 0, up3 = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t d = trunc_err(r.val[0][i], X[i], f);
        ck_assert_msg(d == 0 || d == 1, "%s pair: x = %llx is off by %lld", pr,
                      (unsigned long long)X[i], (long long)d);
        up2 += i % 4 == 2 && d, up3 += i % 4 == 3 && d;
    }
    /* 1024 draws each: up with probability 1/4 (x mod 2^f = 2^f/4) and 1/4 ((−x) mod 2^f =
     * 3/4·2^f, so x mod 2^f = 2^f/4); ±6 standard deviations (13.9) */
    ck_assert_msg(up2 > 173 && up2 < 339, "%s pair: %zu of 1024 rounded up", pr, up2);
    ck_assert_msg(up3 > 173 && up3 < 339, "%s pair: %zu of 1024 rounded up", pr, up3);
    check_traffic(pr, &c, &r);
    pres_free(&r);
    /* compat: spu's truncation (aby3: SPU's TruncAPr pattern; semi2k: the pair) on the same
     * inputs: within one unit, rounding up about 1 in 4 where x mod 2^f = 2^f/4 */
    pcase cs = c;
    cs.trunc_spu = 1;
    run_prim(pr, &cs, &r);
    up2 = up3 = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t d = trunc_err(r.val[0][i], X[i], f);
        ck_assert_msg(d == 0 || d == 1, "%s spu: x = %llx is off by %lld", pr,
                      (unsigned long long)X[i], (long long)d);
        up2 += i % 4 == 2 && d, up3 += i % 4 == 3 && d;
    }
    ck_assert_msg(up2 > 173 && up2 < 339, "%s spu: %zu of 1024 rounded up", pr, up2);
    ck_assert_msg(up3 > 173 && up3 < 339, "%s spu: %zu of 1024 rounded up", pr, up3);
    check_traffic(pr, &cs, &r);
    pres_free(&r);
    /* past the range, x = 2^62 + d fails (by 2^(64−f)) with probability d/2^63: 1/4 at
     * d = 2^61, 1024 of 4096 expected (σ 27.7) */
    for (size_t i = 0; i < n; i++)
        X[i] = (1ull << 62) + (1ull << 61) + (mpcfix_mix(&s) & 0xffffff);
    run_prim(pr, &c, &r);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t d = trunc_err(r.val[0][i], X[i], f);
        if (d != 0 && d != 1) {
            ck_assert_msg(d == -(1ll << (64 - f)) || d == -(1ll << (64 - f)) + 1,
                          "%s pair past 2^62: off by %lld", pr, (long long)d);
            bad++;
        }
    }
    ck_assert_msg(bad > 858 && bad < 1190, "%s pair past 2^62: %zu of %zu wrong", pr, bad, n);
    pres_free(&r);
    /* local: |x| = 2^60 ± 2^20 fails with probability 1/16: 256 of 4096 expected (σ 15.5) */
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (1ull << 60) + (mpcfix_mix(&s) & 0xfffff);
        X[i] = i & 1 ? -v : v;
    }
    c.trunc_local = 1;
    run_prim(pr, &c, &r);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t d = trunc_err(r.val[0][i], X[i], f);
        if (d != 0 && d != 1) {
            int64_t big = d < 0 ? -d : d;
            ck_assert_msg(big >= (1ll << (64 - f)) - 1 && big <= (1ll << (64 - f)) + 1,
                          "%s local: off by %lld", pr, (long long)d);
            bad++;
        }
    }
    ck_assert_msg(bad > 163 && bad < 349, "%s local at 2^60: %zu of %zu wrong", pr, bad, n);
    check_traffic(pr, &c, &r);
    pres_free(&r);
}
END_TEST

START_TEST(test_input_open)
{
    const char *pr = protos[_i];
    int np = strcmp(pr, "semi2k") ? 3 : 2;
    for (int o = 0; o < 2; o++) {
        pcase c = {.prim = PRIM_INPUT, .n = 33, .owner = o};
        prim_roundtrip(pr, c);
    }
    for (int to = -1; to < np; to++) {
        pcase c = {.prim = PRIM_OPEN, .n = 65, .to = to};
        prim_roundtrip(pr, c);
    }
}
END_TEST

START_TEST(test_matmul)
{
    const char *pr = protos[_i];
    pcase cs[] = {
        {.prim = PRIM_MATMUL, .b = 1, .m = 3, .k = 5, .nn = 4},
        {.prim = PRIM_MATMUL, .b = 2, .m = 4, .k = 9, .nn = 3},
        {.prim = PRIM_MATMUL, .b = 3, .m = 5, .k = 6, .nn = 7, .flags = OPF_TRANS_B},
        {.prim = PRIM_MATMUL, .b = 1, .m = 17, .k = 33, .nn = 19, .flags = OPF_FIXED_B},
        {.prim = PRIM_MATMUL,
         .b = 2,
         .m = 3,
         .k = 8,
         .nn = 5,
         .flags = OPF_FIXED_B | OPF_TRANS_B | 0x100},
        {.prim = PRIM_MATMUL, .b = 4, .m = 2, .k = 7, .nn = 3, .flags = 0x100},
        {.prim = PRIM_MATMUL, .b = 6, .m = 1, .k = 5, .nn = 4, .flags = 0x200 | OPF_TRANS_B},
        {.prim = PRIM_MATMUL, .b = 4, .m = 3, .k = 4, .nn = 5, .flags = 0x200 | OPF_FIXED_B},
    };
    for (size_t q = 0; q < sizeof cs / sizeof *cs; q++) {
        cs[q].n = (size_t)cs[q].b * cs[q].m * cs[q].nn;
        prim_roundtrip(pr, cs[q]);
    }
}
END_TEST

/* The blocked local kernel against the textbook triple loop, across tile edges (k > 128,
 * n > 512, odd m), plain and transposed. */
/* The local public-constant primitives of the backend engines, on one node's shares (no
 * peers): a constant word (nc = 1) and an n-word vector give the same result, written in
 * place or into another value; add_pub touches only the slot holding component 0; shifts as
 * C's. Expected values written from eng.h's definitions, share by share. */
START_TEST(test_local_pub_ops)
{
    enum { N = 37 };
    for (int slot = -1; slot < 2; slot++) {
        mpc_core c;
        memset(&c, 0, sizeof c);
        c.party = 0, c.ns = 2, c.pub_slot = slot;
        eng e;
        memset(&e, 0, sizeof e);
        e.impl = &c;
        uint64_t s = 77, k = 0x00ff00ff0f0f3333ull, kv[N];
        for (int i = 0; i < N; i++)
            kv[i] = k;
        for (int dom = DOM_ARITH; dom <= DOM_BOOL; dom++)
            for (int pr = 0; pr < 4; pr++) /* add_pub, mul_pub, shift right 5, shift left 7 */
                for (int form = 0; form < 3; form++) { /* in place; into z; nc = N into z */
                    mpc_val x = {0}, z = {0};
                    ck_assert_int_eq(mpc_l_alloc(&e, &x, N, dom), 0);
                    uint64_t want[2][N];
                    for (int t = 0; t < 2; t++)
                        for (int i = 0; i < N; i++) {
                            uint64_t v = x.s[t][i] = (s = s * 6364136223846793005ull + 1);
                            uint64_t w = pr == 2 ? v >> 5 : pr == 3 ? v << 7 : v;
                            if (pr == 0 && t == slot)
                                w = dom == DOM_BOOL ? v ^ k : v + k;
                            if (pr == 1)
                                w = dom == DOM_BOOL ? v & k : v * k;
                            want[t][i] = w;
                        }
                    mpc_val *dst = form ? &z : &x;
                    const uint64_t *cst = form == 2 ? kv : &k;
                    size_t nc = form == 2 ? N : 1;
                    int rc = pr == 0   ? mpc_l_add_pub(&e, dst, &x, cst, nc)
                             : pr == 1 ? mpc_l_mul_pub(&e, dst, &x, cst, nc)
                                       : mpc_l_shift(&e, dst, &x, pr == 2 ? 5 : -7);
                    ck_assert_int_eq(rc, 0);
                    ck_assert_uint_eq(dst->n, N);
                    ck_assert_int_eq(dst->dom, dom);
                    for (int t = 0; t < 2; t++)
                        for (int i = 0; i < N; i++)
                            ck_assert_msg(dst->s[t][i] == want[t][i],
                                          "slot %d dom %d pr %d form %d share %d elem %d", slot,
                                          dom, pr, form, t, i);
                    mpc_l_release(&e, &x);
                    mpc_l_release(&e, &z);
                }
    }
}
END_TEST

/* place2 (eng.h: z = (x << l) & ml ^ (y << r) & mr, negative counts shifting right, counts of
 * 64 or more giving 0) on one node's two shares: into another value, in place of x and of y,
 * with both shift directions, no shift and out-of-range counts. Expected values from C's
 * shifts, element by element. */
static uint64_t place_ref(uint64_t v, int l)
{
    return l >= 64 || l <= -64 ? 0 : l >= 0 ? v << l : v >> -l;
}

START_TEST(test_local_place2)
{
    enum { N = 29 };
    static const int sh[][2] = {{0, -1}, {1, 0}, {16, 16}, {-5, 7}, {64, 3}, {-2, -64}, {70, -70}};
    mpc_core c;
    memset(&c, 0, sizeof c);
    c.party = 1, c.ns = 2, c.pub_slot = -1;
    eng e;
    memset(&e, 0, sizeof e);
    e.impl = &c;
    uint64_t s = 5, ml = 0x8888888888888888ull, mr = 0x4444444444444444ull;
    for (size_t q = 0; q < sizeof sh / sizeof sh[0]; q++)
        for (int form = 0; form < 3; form++) { /* into z; z = x; z = y */
            mpc_val x = {0}, y = {0}, z = {0};
            ck_assert_int_eq(mpc_l_alloc(&e, &x, N, DOM_BOOL), 0);
            ck_assert_int_eq(mpc_l_alloc(&e, &y, N, DOM_BOOL), 0);
            uint64_t want[2][N];
            for (int t = 0; t < 2; t++)
                for (int i = 0; i < N; i++) {
                    x.s[t][i] = (s = s * 6364136223846793005ull + 1442695040888963407ull);
                    y.s[t][i] = (s = s * 6364136223846793005ull + 1442695040888963407ull);
                    want[t][i] = (place_ref(x.s[t][i], sh[q][0]) & ml) ^
                                 (place_ref(y.s[t][i], sh[q][1]) & mr);
                }
            mpc_val *dst = form == 0 ? &z : form == 1 ? &x : &y;
            ck_assert_int_eq(mpc_l_place2(&e, dst, &x, sh[q][0], ml, &y, sh[q][1], mr), 0);
            ck_assert_uint_eq(dst->n, N);
            ck_assert_int_eq(dst->dom, DOM_BOOL);
            for (int t = 0; t < 2; t++)
                for (int i = 0; i < N; i++)
                    ck_assert_msg(dst->s[t][i] == want[t][i],
                                  "shifts %d %d form %d share %d elem %d", sh[q][0], sh[q][1], form,
                                  t, i);
            mpc_l_release(&e, &x), mpc_l_release(&e, &y), mpc_l_release(&e, &z);
        }
}
END_TEST

/* and_placed's local pass (mpc_local.h) on one node's two shares: the zero share in al, then
 * (al ^ A0 & B0 ^ A0 & B1 ^ A1 & B0) & mask with A_t, B_t placed from share slot t by C's
 * shifts (place_ref) as the carry tree places them (level 1 and a later level, the same value
 * as both words of a placing) and with out-of-range counts; odd n for the scalar tail. */
START_TEST(test_local_and_placed)
{
    enum { N = 31 };
    static const int sh[][4] = {{0, -1, 1, 0}, {1, 0, 8, 8}, {-3, 5, 64, -2}, {-70, 2, 0, 63}};
    mpc_core c;
    memset(&c, 0, sizeof c);
    c.party = 2, c.ns = 2, c.pub_slot = -1;
    eng e;
    memset(&e, 0, sizeof e);
    e.impl = &c;
    uint64_t s = 11, top = 0xaaaaaaaaaaaaaaaaull, slot = top >> 1, mask = 0xf0f0f0f0f0f0f0f5ull;
    for (size_t q = 0; q < sizeof sh / sizeof sh[0]; q++)
        for (int same = 0; same < 2; same++) { /* a's two words one value (P, P) or two */
            mpc_val P = {0}, G = {0}, Q = {0};
            ck_assert_int_eq(mpc_l_alloc(&e, &P, N, DOM_BOOL), 0);
            ck_assert_int_eq(mpc_l_alloc(&e, &G, N, DOM_BOOL), 0);
            ck_assert_int_eq(mpc_l_alloc(&e, &Q, N, DOM_BOOL), 0);
            uint64_t al[N], want[N];
            for (int i = 0; i < N; i++) {
                for (int t = 0; t < 2; t++) {
                    P.s[t][i] = (s = s * 6364136223846793005ull + 1442695040888963407ull);
                    G.s[t][i] = (s = s * 6364136223846793005ull + 1442695040888963407ull);
                    Q.s[t][i] = (s = s * 6364136223846793005ull + 1442695040888963407ull);
                }
                al[i] = (s = s * 6364136223846793005ull + 1442695040888963407ull);
                const mpc_val *ay = same ? &P : &Q;
                uint64_t A[2], B[2];
                for (int t = 0; t < 2; t++) {
                    A[t] = (place_ref(P.s[t][i], sh[q][0]) & top) ^
                           (place_ref(ay->s[t][i], sh[q][1]) & slot);
                    B[t] = (place_ref(G.s[t][i], sh[q][2]) & top) ^
                           (place_ref(P.s[t][i], sh[q][3]) & slot);
                }
                want[i] = (al[i] ^ (A[0] & B[0]) ^ (A[0] & B[1]) ^ (A[1] & B[0])) & mask;
            }
            eng_placed a = {&P, same ? &P : &Q, sh[q][0], sh[q][1], top, slot};
            eng_placed b = {&G, &P, sh[q][2], sh[q][3], top, slot};
            mpc_l_and_placed(al, &a, &b, mask, N);
            for (int i = 0; i < N; i++)
                ck_assert_msg(al[i] == want[i], "shifts %d %d %d %d same %d elem %d", sh[q][0],
                              sh[q][1], sh[q][2], sh[q][3], same, i);
            mpc_l_release(&e, &P), mpc_l_release(&e, &G), mpc_l_release(&e, &Q);
        }
}
END_TEST

START_TEST(test_local_matmul_tiles)
{
    size_t m = 7, k = 300, n = 530;
    uint64_t *A = malloc(m * k * 8), *B = malloc(k * n * 8), *C = calloc(m * n, 8),
             *R = calloc(m * n, 8);
    mpcfix_fill(A, m * k, 1, 64);
    mpcfix_fill(B, k * n, 2, 64);
    for (int tb = 0; tb < 2; tb++) {
        memset(C, 0, m * n * 8);
        for (size_t i = 0; i < m * n; i++)
            C[i] = R[i] = i; /* accumulates into C */
        mpc_mm_acc(C, A, B, m, k, n, tb);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                uint64_t acc = R[i * n + j];
                for (size_t q = 0; q < k; q++)
                    acc += A[i * k + q] * (tb ? B[j * k + q] : B[q * n + j]);
                ck_assert_msg(C[i * n + j] == acc, "trans %d: (%zu,%zu)", tb, i, j);
            }
    }
    free(A), free(B), free(C), free(R);
}
END_TEST

/* Packed messages against a bit-by-bit reference (each element's bits of the mask in order,
 * then the second word's, padded to a byte), for contiguous, sparse, dense, single-bit and
 * full masks, on the PEXT path (where the CPU has it) and the software one; every popcount
 * 1 … 64 once contiguous (shifted up from bit 0 where it fits) and once scattered, so that each
 * width of an element, 1 … 8 bytes (1 … 16 for a pair), is met on every path. */
static size_t ref_pack(uint8_t *buf, const uint64_t *w1, const uint64_t *w2, size_t n,
                       uint64_t mask)
{
    size_t bit = 0;
    for (size_t i = 0; i < n; i++) {
        for (int t = 0; t < (w2 ? 2 : 1); t++)
            for (int b = 0; b < 64; b++)
                if ((mask >> b) & 1) {
                    if (((t ? w2 : w1)[i] >> b) & 1)
                        buf[bit / 8] |= (uint8_t)(1u << (bit % 8));
                    bit++;
                }
        bit = (bit + 7) & ~(size_t)7;
    }
    return bit / 8;
}

START_TEST(test_pack_bits)
{
    uint64_t s = 5;
    uint64_t masks[40 + 128] = {1,
                                1ull << 63,
                                ~0ull,
                                ~0ull >> 1,
                                0x5555555555555555ull,
                                0xaaaaaaaaaaaaaaaaull,
                                0xff00ff00ff00ff00ull,
                                0x00000000fffffff0ull,
                                0x8000000000000001ull,
                                0x7fffffff00000000ull};
    for (int i = 10; i < 40; i++) {
        uint64_t a = mpcfix_mix(&s), b = mpcfix_mix(&s);
        masks[i] = i % 3 == 0 ? a & b : i % 3 == 1 ? a | b : a; /* sparse, dense, half */
    }
    for (int pc = 1; pc <= 64; pc++) {
        uint64_t low = pc == 64 ? ~0ull : (1ull << pc) - 1, r = mpcfix_mix(&s) | 1;
        masks[40 + 2 * (pc - 1)] = pc <= 61 ? low << 3 : low;
        uint64_t sc = 0; /* pc positions drawn by an LCG's top 6 bits: scattered */
        for (uint64_t k = r; __builtin_popcountll(sc) < pc;
             k = k * 6364136223846793005ull + 1442695040888963407ull)
            sc |= 1ull << (k >> 58);
        masks[40 + 2 * (pc - 1) + 1] = sc;
    }
    enum { N = 37 };
    uint64_t w1[N], w2[N], o1[N], o2[N];
    uint8_t got[N * 16 + 8], want[N * 16 + 8];
    for (int sw = 0; sw < 2; sw++) {
        mpc_pack_force_software(sw);
        for (int m = 0; m < 40 + 128; m++)
            for (int two = 0; two < 2; two++)
                for (size_t n = 1; n <= N; n += 12) {
                    for (size_t i = 0; i < n; i++)
                        w1[i] = mpcfix_mix(&s), w2[i] = mpcfix_mix(&s);
                    memset(got, 0, sizeof got);
                    memset(want, 0, sizeof want);
                    size_t pos = 0, len = ref_pack(want, w1, two ? w2 : NULL, n, masks[m]);
                    if (two)
                        mpc_pack2_bits(got, &pos, w1, w2, n, masks[m]);
                    else
                        mpc_pack_bits(got, &pos, w1, n, masks[m]);
                    ck_assert_uint_eq(pos, 8 * len);
                    ck_assert_uint_eq(
                        len, mpc_packed_bytes(n, (two ? 2 : 1) * __builtin_popcountll(masks[m])));
                    ck_assert_msg(!memcmp(got, want, sizeof got),
                                  "sw %d mask %016llx pair %d n %zu", sw,
                                  (unsigned long long)masks[m], two, n);
                    pos = 0;
                    if (two)
                        mpc_unpack2_bits(o1, o2, n, masks[m], got, &pos);
                    else
                        mpc_unpack_bits(o1, n, masks[m], got, &pos);
                    ck_assert_uint_eq(pos, 8 * len);
                    for (size_t i = 0; i < n; i++) {
                        ck_assert_uint_eq(o1[i], w1[i] & masks[m]);
                        if (two)
                            ck_assert_uint_eq(o2[i], w2[i] & masks[m]);
                    }
                }
    }
    mpc_pack_force_software(0);
}
END_TEST

/* Setup traffic of the beaver cache: one setup round, 8·rows·cols each way (semi2k). */
START_TEST(test_beaver_cache_setup)
{
    pcase c = {.prim = PRIM_MATMUL, .b = 1, .m = 2, .k = 6, .nn = 5, .flags = OPF_FIXED_B, .n = 10};
    mpcfix_fill(X, 12, 5, 64);
    mpcfix_fill(Y, 30, 6, 64);
    pres r;
    run_prim("semi2k", &c, &r);
    for (int i = 0; i < 2; i++) {
        /* setup = key (dealer→party, 16 B) + the opened mask of Y: 8·6·5 each way */
        ck_assert_uint_eq(r.net[i].setup_sent[1 - i], 8 * 30);
        ck_assert_uint_eq(r.net[i].setup_rounds, 1);
    }
    pres_free(&r);
}
END_TEST

/* Injected latency: every round's messages arrive latency after their last byte, so a 2-round
 * b2a (aby3) takes at least 2 latencies at every party, and the counts do not change. */
START_TEST(test_latency)
{
    pcase c = {.prim = PRIM_B2A, .n = 64};
    mpcfix_fill(X, 64, 1, 64);
    latency_ns = 40000000;
    pres r;
    run_prim("aby3", &c, &r);
    latency_ns = 0;
    check_values("aby3", &c, &r);
    check_traffic("aby3", &c, &r);
    /* Messages arrive one latency after they were sent: two dependent rounds take at least
     * two latencies for the party that starts first. A party that starts late finds its first
     * round's messages already there, as on a real link, and the start barrier's release
     * itself crosses a link, so a party may start up to one latency after another: each party
     * still waits at least about one latency (5 % slack for where its clock starts). */
    uint64_t longest = 0;
    for (int i = 0; i < 3; i++) {
        longest = r.st[i].ns > longest ? r.st[i].ns : longest;
        ck_assert_msg(r.st[i].ns >= 38000000ull, "P%d: %.1f ms for 2 rounds at 40 ms", i,
                      (double)r.st[i].ns * 1e-6);
        ck_assert_msg(r.st[i].ns < 400000000ull, "P%d: %.1f ms for 2 rounds at 40 ms", i,
                      (double)r.st[i].ns * 1e-6);
    }
    ck_assert_msg(longest >= 80000000ull, "%.1f ms for 2 rounds at 40 ms", (double)longest * 1e-6);
    pres_free(&r);
}
END_TEST

/* The start barrier and the latency rule: P1 sends 2 MB one way (a setup send, done once its
 * socket buffer holds it), then every party passes mpc_net_sync, which returns at P0 only with
 * those bytes read; then P0 sends P1 one message of a round while P1 sleeps 3 latencies before
 * entering it: the message came off the link long ago, so P1 waits for nothing (not one latency
 * after reading it), while a party that is there waits one latency. */
#define SYNC_LAT 20000000ull
static int sync_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    (void)e, (void)arg;
    int self = mpc_net_self(net), rc = MS_OK;
    size_t big = 2u << 20;
    uint8_t *buf = calloc(big, 1);
    if (self == 1)
        rc = mpc_net_send_setup(net, 0, buf, big, err);
    else if (self == 0)
        rc = mpc_net_recv_setup(net, 1, buf, big, err);
    uint64_t setup_rounds = mpc_net_get_stats(net)->setup_rounds;
    if (!rc)
        rc = mpc_net_sync(net, err);
    uint64_t synced = mpc_net_get_stats(net)->setup_rounds - setup_rounds;
    struct timespec t0, t1;
    if (self == 1) {
        struct timespec d = {0, 3 * SYNC_LAT};
        nanosleep(&d, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const void *snd[MPC_NODES_MAX] = {0};
    void *rcv[MPC_NODES_MAX] = {0};
    size_t sl[MPC_NODES_MAX] = {0}, rl[MPC_NODES_MAX] = {0};
    if (self == 0)
        snd[1] = buf, sl[1] = 1000;
    if (self == 1)
        rcv[0] = buf, rl[0] = 1000;
    if (!rc && self < 2)
        rc = mpc_net_round(net, snd, sl, rcv, rl, 0, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t ns = (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
    fwrite(&synced, sizeof synced, 1, out);
    fwrite(&ns, sizeof ns, 1, out);
    free(buf);
    return rc;
}

START_TEST(test_sync_and_late_receiver)
{
    mpc_launch l = {.cfg = mpcfix_cfg("semi2k"), .deadline_ms = 30000, .latency_ns = SYNC_LAT};
    mpc_node_result nr[MPC_NODES_MAX];
    int nodes;
    errbuf e;
    ck_assert_msg(mpc_launch_run(&l, sync_node, NULL, nr, &nodes, &e) == MS_OK, "%s", e.msg);
    ck_assert_int_eq(nodes, 3);
    uint64_t synced[3], ns[3];
    for (int i = 0; i < nodes; i++) {
        ck_assert_msg(nr[i].rc == MS_OK, "node %d: %s", i, nr[i].err);
        ck_assert_uint_eq(nr[i].out_len, 2 * sizeof(uint64_t));
        memcpy(&synced[i], nr[i].out, 8);
        memcpy(&ns[i], nr[i].out + 8, 8);
    }
    ck_assert_uint_eq(synced[0], 1); /* a setup round at the parties */
    ck_assert_uint_eq(synced[1], 1);
    ck_assert_uint_eq(synced[2], 0); /* the dealer returns at once */
    ck_assert_msg(ns[1] < SYNC_LAT / 2, "P1, late to the round: waited %.1f ms",
                  (double)ns[1] * 1e-6);
    mpc_node_results_free(nr, nodes);
}
END_TEST

/* ---------------------------------------------------------------- tests: security */

/* Chi-square homogeneity of two byte histograms; 1 if consistent with one distribution at
 * p = 1e-4 (Wilson–Hilferty quantile). */
static int same_distribution(const uint64_t *h1, const uint64_t *h2, double *stat_out)
{
    double n1 = 0, n2 = 0, stat = 0;
    int bins = 0;
    for (int i = 0; i < 256; i++) {
        n1 += (double)h1[i];
        n2 += (double)h2[i];
    }
    for (int i = 0; i < 256; i++) {
        double a = (double)h1[i], b = (double)h2[i];
        if (a + b == 0)
            continue;
        bins++;
        double d = a * sqrt(n2 / n1) - b * sqrt(n1 / n2);
        stat += d * d / (a + b);
    }
    double df = bins - 1 > 0 ? bins - 1 : 1, z = 3.72;
    double crit = df * pow(1 - 2 / (9 * df) + z * sqrt(2 / (9 * df)), 3);
    *stat_out = stat;
    return stat < crit;
}

START_TEST(test_p1_view_independent)
{
    const char *pr = protos[_i];
    static const int prims[] = {PRIM_INPUT, PRIM_MUL, PRIM_TRUNC, PRIM_AND, PRIM_B2A, PRIM_MATMUL};
    for (size_t q = 0; q < sizeof prims / sizeof *prims; q++) {
        pcase c = {
            .prim = prims[q], .n = 4096, .bits = 18, .tap = 1, .b = 1, .m = 64, .k = 64, .nn = 64};
        uint64_t h[2][256];
        for (int s = 0; s < 2; s++) {
            size_t nx, ny, nz;
            sizes(&c, &nx, &ny, &nz);
            /* secret 0: all zero; secret 1: a fixed pattern with high bits set */
            for (size_t i = 0; i < nx; i++)
                X[i] = s ? (c.prim == PRIM_TRUNC ? 0x123456789ull : 0x5ec12e75ec12e7ull) : 0;
            for (size_t i = 0; i < ny; i++)
                Y[i] = s ? 0xfedcba9876543210ull : 0;
            pres r;
            run_prim(pr, &c, &r);
            memcpy(h[s], r.hist, sizeof h[s]);
            pres_free(&r);
        }
        double stat;
        ck_assert_msg(same_distribution(h[0], h[1], &stat),
                      "%s %s: P1's view depends on the secret (chi2 = %.1f)", pr,
                      eng_prim_name(c.prim), stat);
        if (c.prim == PRIM_MUL ||
            c.prim == PRIM_INPUT) { /* masked values: all bytes equally likely */
            uint64_t u[256];
            uint64_t tot = 0;
            for (int i = 0; i < 256; i++)
                tot += h[1][i];
            for (int i = 0; i < 256; i++)
                u[i] = tot / 256;
            ck_assert_msg(same_distribution(h[1], u, &stat),
                          "%s mul: P1's view is not uniform (chi2 = %.1f)", pr, stat);
        }
    }
}
END_TEST

/* Every node: 32 bytes of its private PRG stream, then its shares of x (P0's input X) and of
 * x·x (dealer triples in semi2k, the pairwise PRG keys in aby3). */
#define KEY_N 64
static int keys_node(eng *e, mpc_net *net, void *arg, FILE *out, errbuf *err)
{
    (void)net;
    (void)arg;
    mpc_core *c = e->impl; /* every engine's impl starts with its mpc_core */
    uint8_t draw[32];
    mpc_prg_bytes(&c->priv, draw, sizeof draw);
    fwrite(draw, 1, sizeof draw, out);
    mpc_val x = {0}, z = {0};
    int rc;
    if ((rc = e->vt->alloc(e, &x, KEY_N, DOM_ARITH)) || (rc = e->vt->input(e, &x, 0, X)) ||
        (rc = e->vt->mul(e, &z, &x, &x)))
        err_set(err, rc, "%s", mpc_engine_error(e));
    for (int k = 0; !rc && k < c->ns; k++) {
        fwrite(x.s[k], 8, KEY_N, out);
        fwrite(z.s[k], 8, KEY_N, out);
    }
    e->vt->release(e, &x);
    e->vt->release(e, &z);
    return rc;
}

/* A constant or repeated key would pass every value test: here shares of the same secret must
 * differ from one session to the next, and no two nodes (nor two sessions) may draw the same
 * private stream. */
START_TEST(test_keys_fresh)
{
    const char *pr = protos[_i];
    for (int i = 0; i < KEY_N; i++)
        X[i] = 0x5ec12e7ull + (uint64_t)i;
    mpc_node_result nr[2][MPC_NODES_MAX];
    int nodes = 0;
    for (int s = 0; s < 2; s++) {
        mpc_launch l = {.cfg = mpcfix_cfg(pr), .deadline_ms = 30000};
        errbuf e;
        ck_assert_msg(mpc_launch_run(&l, keys_node, NULL, nr[s], &nodes, &e) == MS_OK, "%s", e.msg);
        for (int i = 0; i < nodes; i++)
            ck_assert_msg(nr[s][i].rc == MS_OK, "%s node %d: %s", pr, i, nr[s][i].err);
    }
    for (int i = 0; i < nodes; i++) {
        ck_assert_uint_ge(nr[0][i].out_len, 32);
        ck_assert_uint_eq(nr[0][i].out_len, nr[1][i].out_len);
        ck_assert_msg(memcmp(nr[0][i].out, nr[1][i].out, 32),
                      "%s node %d: the same private "
                      "stream in two sessions",
                      pr, i);
        for (int j = 0; j < i; j++)
            for (int s = 0; s < 2; s++)
                ck_assert_msg(memcmp(nr[s][i].out, nr[s][j].out, 32),
                              "%s nodes %d and %d "
                              "draw the same private stream",
                              pr, j, i);
        /* every share slot of x and x·x differs between the sessions in every element */
        const uint64_t *a = (const uint64_t *)(nr[0][i].out + 32),
                       *b = (const uint64_t *)(nr[1][i].out + 32);
        size_t n = (nr[0][i].out_len - 32) / 8, same = 0;
        for (size_t k = 0; k < n; k++)
            same += a[k] == b[k];
        ck_assert_msg(same == 0, "%s node %d: %zu of %zu share words repeat across sessions", pr, i,
                      same, n);
    }
    for (int s = 0; s < 2; s++)
        mpc_node_results_free(nr[s], nodes);
}
END_TEST

/* ---------------------------------------------------------------- suite */

Suite *mpc_suite(void)
{
    Suite *s = suite_create("mpc");
    TCase *tp = th_case(s, "primitives", 60);
    TH_LOOPS(tp, 2, test_elementwise, test_input_open, test_matmul, test_trunc_edges);
    TH_TESTS(tp, test_beaver_cache_setup, test_local_pub_ops, test_local_place2,
             test_local_and_placed, test_local_matmul_tiles, test_pack_bits, test_latency,
             test_sync_and_late_receiver);
    TCase *ts = th_case(s, "security", 60);
    TH_LOOPS(ts, 2, test_p1_view_independent, test_keys_fresh);
    return s;
}
