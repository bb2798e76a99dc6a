/* eng_plain.c — clear-text fixed-point engine (see eng_plain.h). */
#include "eng_plain.h"
#include "kern.h"

#include <stdlib.h>
#include <string.h>

typedef struct plain_impl {
    uint64_t rng;
    int exact_trunc;
    uint64_t calls[PRIM_N];
} plain_impl;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void count(eng *e, int prim) { ((plain_impl *)e->impl)->calls[prim]++; }

/* Every value carries, besides its clear elements s[0], np-1 pseudo-random additive
 * components per element in s[1] (component i of element j at s[1][(i-1)·n + j]; the first
 * component is x minus their sum). Local linear primitives transform them as parties
 * transform shares, so bool_components sees share-linear components as on a real engine
 * (the components of mul_pub(x, -1) are the negated components of x). */
static int ncomp(const eng *e) { return e->n_parties - 1; }

/* z takes over b (its n clear elements) and c (their components), freeing its old arrays. */
static void adopt(mpc_val *z, uint64_t *b, uint64_t *c, size_t n, int dom)
{
    free(z->s[0]);
    free(z->s[1]);
    z->s[0] = b;
    z->s[1] = c;
    z->n = n;
    z->dom = (uint8_t)dom;
}

/* (Re)sizes z to n elements (both arrays). */
static int ensure_n(const eng *e, mpc_val *z, size_t n, int dom)
{
    if (z->s[0] && z->n == n) {
        z->dom = (uint8_t)dom;
        return MS_OK;
    }
    uint64_t *b = calloc(n ? n : 1, sizeof *b);
    uint64_t *c = calloc((n ? n : 1) * (size_t)ncomp(e), sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return MS_ERR_NOMEM;
    }
    adopt(z, b, c, n, dom);
    return MS_OK;
}
#define ensure(z, n, dom) ensure_n(e, (z), (n), (dom))

/* A primitive's start: counts the call of prim and (re)sizes its result z. */
static int begin(eng *e, int prim, mpc_val *z, size_t n, int dom)
{
    count(e, prim);
    return ensure(z, n, dom);
}

/* Fresh random components: the result of a communicating primitive. */
static void fresh(eng *e, mpc_val *z)
{
    plain_impl *im = e->impl;
    for (size_t i = 0; i < z->n * (size_t)ncomp(e); i++)
        z->s[1][i] = splitmix(&im->rng);
}

static int p_alloc(eng *e, mpc_val *v, size_t n, int dom)
{
    (void)e;
    v->s[0] = v->s[1] = NULL;
    return ensure(v, n, dom);
}

static void p_release(eng *e, mpc_val *v)
{
    (void)e;
    free(v->s[0]);
    free(v->s[1]);
    v->s[0] = v->s[1] = NULL;
    v->n = 0;
}

/* z = x + y (XOR on boolean words), or x − y when sub (in the ring in either domain, as the
 * kernels use it), on the plain word and on every component. */
static uint64_t add_or_sub(int dom, int sub, uint64_t a, uint64_t b)
{
    return sub ? a - b : dom == DOM_BOOL ? a ^ b : a + b;
}

static int add_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int sub)
{
    count(e, PRIM_LOCAL);
    if (x->n != y->n)
        return MS_ERR_INTERNAL;
    int rc = ensure(z, x->n, x->dom);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = add_or_sub(x->dom, sub, x->s[0][i], y->s[0][i]);
    for (size_t i = 0; i < x->n * (size_t)ncomp(e); i++)
        z->s[1][i] = add_or_sub(x->dom, sub, x->s[1][i], y->s[1][i]);
    return MS_OK;
}

static int p_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return add_sub(e, z, x, y, 0);
}

static int p_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return add_sub(e, z, x, y, 1);
}

static int p_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    int rc = begin(e, PRIM_LOCAL, z, x->n, x->dom);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t k = c ? c[nc == 1 ? 0 : i] : 0;
        z->s[0][i] = x->dom == DOM_BOOL ? x->s[0][i] ^ k : x->s[0][i] + k;
    }
    if (z != x) /* the public value goes to the first component */
        memcpy(z->s[1], x->s[1], x->n * (size_t)ncomp(e) * sizeof *z->s[1]);
    return MS_OK;
}

static int p_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    int rc = begin(e, PRIM_LOCAL, z, x->n, x->dom);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t k = c[nc == 1 ? 0 : i];
        z->s[0][i] = x->dom == DOM_BOOL ? x->s[0][i] & k : x->s[0][i] * k;
        for (int j = 0; j < ncomp(e); j++) {
            uint64_t *p = &z->s[1][(size_t)j * x->n + i], v = x->s[1][(size_t)j * x->n + i];
            *p = x->dom == DOM_BOOL ? v & k : v * k;
        }
    }
    return MS_OK;
}

static int p_shift(eng *e, mpc_val *z, const mpc_val *x, int s)
{
    int rc = begin(e, PRIM_LOCAL, z, x->n, DOM_BOOL);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t v = x->s[0][i];
        z->s[0][i] = s >= 64 || s <= -64 ? 0 : s > 0 ? v >> s : s < 0 ? v << -s : v;
    }
    memset(z->s[1], 0, x->n * (size_t)ncomp(e) * sizeof *z->s[1]);
    return MS_OK;
}

static int p_bool_components(eng *e, mpc_val comps[3], int *nc, const mpc_val *x)
{
    plain_impl *im = e->impl;
    count(e, PRIM_LOCAL);
    *nc = e->n_parties == 2 ? 2 : 3;
    for (int c = 0; c < *nc; c++) {
        int rc = ensure(&comps[c], x->n, DOM_BOOL);
        if (rc)
            return rc;
    }
    (void)im;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t rest = x->s[0][i];
        for (int c = 1; c < *nc; c++) {
            uint64_t r = x->s[1][(size_t)(c - 1) * x->n + i];
            comps[c].s[0][i] = r;
            rest -= r;
        }
        comps[0].s[0][i] = rest;
    }
    return MS_OK;
}

static int p_permute(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n)
{
    count(e, PRIM_LOCAL);
    int nc = ncomp(e);
    uint64_t *b = malloc((n ? n : 1) * sizeof *b), *c = malloc((n ? n : 1) * nc * sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return MS_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= x->n) {
            free(b);
            free(c);
            return MS_ERR_INTERNAL;
        }
        b[i] = x->s[0][idx[i]];
        for (int k = 0; k < nc; k++)
            c[(size_t)k * n + i] = x->s[1][(size_t)k * x->n + idx[i]];
    }
    adopt(z, b, c, n, x->dom); /* x may be z: its domain is read first */
    return MS_OK;
}

/* Each part's clear elements and each of its components moved into place. */
static int p_concat(eng *e, mpc_val *z, const mpc_val *parts, int np)
{
    count(e, PRIM_LOCAL);
    size_t off = 0, nc = (size_t)ncomp(e);
    for (int i = 0; i < np; i++) {
        const mpc_val *p = &parts[i];
        if (off + p->n > z->n)
            return MS_ERR_INTERNAL;
        memcpy(z->s[0] + off, p->s[0], p->n * sizeof *z->s[0]);
        for (size_t k = 0; k < nc; k++)
            memcpy(z->s[1] + k * z->n + off, p->s[1] + k * p->n, p->n * sizeof *z->s[1]);
        off += p->n;
    }
    return off == z->n ? MS_OK : MS_ERR_INTERNAL;
}

static int p_scatter(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n)
{
    count(e, PRIM_LOCAL);
    size_t nc = (size_t)ncomp(e);
    if (n > x->n || z == x)
        return MS_ERR_INTERNAL;
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= z->n)
            return MS_ERR_INTERNAL;
        z->s[0][idx[i]] = x->s[0][i];
        for (size_t k = 0; k < nc; k++)
            z->s[1][k * z->n + idx[i]] = x->s[1][k * x->n + i];
    }
    return MS_OK;
}

static int p_input(eng *e, mpc_val *z, int owner, const uint64_t *plain)
{
    count(e, PRIM_INPUT);
    for (size_t i = 0; i < z->n; i++)
        z->s[0][i] = plain ? plain[i] : 0;
    z->dom = DOM_ARITH;
    fresh(e, z);
    return MS_OK;
}

static int p_open(eng *e, uint64_t *out, const mpc_val *x, int to)
{
    count(e, PRIM_OPEN);
    if (out)
        memcpy(out, x->s[0], x->n * sizeof *out);
    return MS_OK;
}

/* z = x · y (DOM_ARITH) or x & y & mask (DOM_BOOL), counted as prim: mul, square, and_bb
 * and and_bits alike in the clear. */
static int elementwise(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int prim, int dom,
                       uint64_t mask)
{
    count(e, prim);
    if (x->n != y->n)
        return MS_ERR_INTERNAL;
    int rc = ensure(z, x->n, dom);
    if (rc)
        return rc;
    if (dom == DOM_BOOL)
        for (size_t i = 0; i < x->n; i++)
            z->s[0][i] = x->s[0][i] & y->s[0][i] & mask;
    else
        for (size_t i = 0; i < x->n; i++)
            z->s[0][i] = x->s[0][i] * y->s[0][i];
    fresh(e, z);
    return MS_OK;
}

static int p_mul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return elementwise(e, z, x, y, PRIM_MUL, DOM_ARITH, 0);
}

static int p_square(eng *e, mpc_val *z, const mpc_val *x)
{
    return elementwise(e, z, x, x, PRIM_SQUARE, DOM_ARITH, 0);
}

static int p_matmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t batch,
                    uint32_t m, uint32_t k, uint32_t n, uint32_t flags, uint32_t y_id)
{
    count(e, PRIM_MATMUL);
    size_t kn = (size_t)k * n, mk = (size_t)m * k;
    size_t yb = kn ? y->n / kn : 0; /* shared right operands: instance b reads b / (batch/yb) */
    if (x->n < batch * mk || yb == 0 || yb > batch || batch % yb || y->n != yb * kn)
        return MS_ERR_INTERNAL;
    uint64_t *b = calloc((size_t)batch * m * n + 1, sizeof *b);
    if (!b)
        return MS_ERR_NOMEM;
    for (size_t bb = 0; bb < batch; bb++) {
        const uint64_t *X = x->s[0] + bb * mk, *Y = y->s[0] + (bb / (batch / yb)) * kn;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                uint64_t acc = 0;
                for (size_t t = 0; t < k; t++)
                    acc += X[i * k + t] * ((flags & OPF_TRANS_B) ? Y[j * k + t] : Y[t * n + j]);
                b[bb * m * n + i * n + j] = acc;
            }
    }
    free(z->s[0]);
    z->s[0] = b;
    z->n = (size_t)batch * m * n;
    z->dom = DOM_ARITH;
    free(z->s[1]);
    z->s[1] = calloc(z->n ? z->n * (size_t)ncomp(e) : 1, sizeof *z->s[1]);
    if (!z->s[1])
        return MS_ERR_NOMEM;
    fresh(e, z);
    return MS_OK;
}

static int p_and(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return elementwise(e, z, x, y, PRIM_AND, DOM_BOOL, ~0ull);
}

static int p_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    plain_impl *im = e->impl;
    int rc = begin(e, PRIM_TRUNC, z, x->n, DOM_ARITH);
    if (rc)
        return rc;
    uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t v = x->s[0][i];
        uint64_t q = (uint64_t)((int64_t)v >> bits); /* floor */
        if (!im->exact_trunc && (splitmix(&im->rng) & mask) < (v & mask))
            q += 1;
        z->s[0][i] = q;
    }
    fresh(e, z);
    return MS_OK;
}

/* Bit 0 of a boolean word as an arithmetic value: b2a and b2a_bit alike in the clear (the
 * protocols differ in what they cost, counted as prim). */
static int low_bit(eng *e, mpc_val *z, const mpc_val *x, int prim)
{
    int rc = begin(e, prim, z, x->n, DOM_ARITH);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->s[0][i] & 1;
    fresh(e, z);
    return MS_OK;
}

static int p_b2a(eng *e, mpc_val *z, const mpc_val *x) { return low_bit(e, z, x, PRIM_B2A); }

static int p_mul_a1b(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b)
{
    size_t n = a->n;
    uint64_t *t = malloc(n * 8 + 8);
    if (!t)
        return MS_ERR_NOMEM;
    for (size_t i = 0; i < n; i++)
        t[i] = a->s[0][i] * (b->s[0][i] & 1);
    int rc = begin(e, PRIM_MULA1B, z, n, DOM_ARITH);
    if (!rc) {
        memcpy(z->s[0], t, n * 8);
        fresh(e, z);
    }
    free(t);
    return rc;
}

static int p_and_bits(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint64_t mask,
                      int priv)
{
    (void)priv;
    return elementwise(e, z, x, y, PRIM_ANDBITS, DOM_BOOL, mask);
}

/* The words a protocol's bool_pair makes: the sum of all components but the last, and the
 * last (2 parties: x0 and x1; 3 parties: x0 + x1 and x2), masked to bits. semi2k's is local
 * (counted as local work). */
static int p_bool_pair(eng *e, mpc_val *a, mpc_val *b, const mpc_val *x, int bits)
{
    count(e, e->n_parties == 3 ? PRIM_PAIR : PRIM_LOCAL);
    uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    int rc = ensure(a, x->n, DOM_BOOL);
    if (!rc)
        rc = ensure(b, x->n, DOM_BOOL);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++) { /* a: all components but the last, b: the last */
        uint64_t last = x->s[1][(size_t)(e->n_parties - 2) * x->n + i];
        a->s[0][i] = (x->s[0][i] - last) & m;
        b->s[0][i] = last & m;
    }
    fresh(e, a);
    fresh(e, b);
    return MS_OK;
}

static int p_b2a_bit(eng *e, mpc_val *z, const mpc_val *x) { return low_bit(e, z, x, PRIM_B2ABIT); }

/* The low bits of a boolean word as an arithmetic value (b2a_word). */
static int p_b2a_word(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    int rc = begin(e, PRIM_B2AWORD, z, x->n, DOM_ARITH);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->s[0][i] & (bits >= 64 ? ~0ull : (1ull << bits) - 1);
    fresh(e, z);
    return MS_OK;
}

static int p_open_bit(eng *e, uint64_t *out, const mpc_val *x)
{
    count(e, PRIM_OPEN);
    for (size_t i = 0; out && i < x->n; i++)
        out[i] = x->s[0][i] & 1;
    return MS_OK;
}

/* SPU's eqz mask in the clear: ~x, all ones iff x = 0 (~(c ^ r) with c = x + r). */
static int p_eqz_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    int rc = begin(e, PRIM_OPEN, z, x->n, DOM_BOOL);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = ~x->s[0][i];
    fresh(e, z);
    return MS_OK;
}

/* A fresh random permutation of every run of seg elements, the same for that run in each part
 * (eng.h), then fresh components: what a shuffle's parties hold. */
static int p_shuffle(eng *e, mpc_val *z, const mpc_val *x, size_t seg, size_t parts)
{
    count(e, PRIM_SHUFFLE);
    plain_impl *im = e->impl;
    size_t n = x->n, M = parts ? n / parts : 0;
    if (!seg || !parts || M * parts != n || M % seg)
        return MS_ERR_INTERNAL;
    uint32_t *pi = malloc((M ? M : 1) * sizeof *pi);
    uint64_t *b = malloc((n ? n : 1) * sizeof *b);
    if (!pi || !b) {
        free(pi);
        free(b);
        return MS_ERR_NOMEM;
    }
    for (size_t r = 0; r < M; r += seg) { /* Fisher–Yates within each run */
        for (size_t i = 0; i < seg; i++)
            pi[r + i] = (uint32_t)(r + i);
        for (size_t i = seg - 1; i > 0; i--) {
            size_t j = splitmix(&im->rng) % (i + 1);
            uint32_t t = pi[r + i];
            pi[r + i] = pi[r + j];
            pi[r + j] = t;
        }
    }
    for (size_t p = 0; p < parts; p++)
        for (size_t i = 0; i < M; i++)
            b[p * M + i] = x->s[0][p * M + pi[i]];
    free(pi);
    int rc = ensure(z, n, DOM_ARITH);
    if (!rc) {
        memcpy(z->s[0], b, n * sizeof *b);
        fresh(e, z);
    }
    free(b);
    return rc;
}

static int p_sync_public(eng *e, uint64_t *v)
{
    (void)e, (void)v;
    return MS_OK;
}

static const eng_vt plain_vt = {
    .alloc = p_alloc,
    .release = p_release,
    .add = p_add,
    .sub = p_sub,
    .add_pub = p_add_pub,
    .mul_pub = p_mul_pub,
    .shift = p_shift,
    .bool_components = p_bool_components,
    .permute = p_permute,
    .concat = p_concat,
    .scatter = p_scatter,
    .input = p_input,
    .open = p_open,
    .mul = p_mul,
    .square = p_square,
    .matmul = p_matmul,
    .and_bb = p_and,
    .trunc = p_trunc,
    .b2a = p_b2a,
    .mul_a1b = p_mul_a1b,
    .and_bits = p_and_bits,
    .bool_pair = p_bool_pair,
    .b2a_bit = p_b2a_bit,
    .b2a_word = p_b2a_word,
    .eqz_spu = p_eqz_spu,
    .open_bit = p_open_bit,
    .shuffle = p_shuffle,
    .sync_public = p_sync_public,
};

int eng_plain_new(const proto_cfg *cfg, int n_parties, uint64_t seed, int exact_trunc, eng **out)
{
    if (n_parties != 2 && n_parties != 3)
        return MS_ERR_RANGE;
    eng *e = calloc(1, sizeof *e);
    plain_impl *im = calloc(1, sizeof *im);
    if (!e || !im) {
        free(e);
        free(im);
        return MS_ERR_NOMEM;
    }
    im->rng = seed;
    im->exact_trunc = exact_trunc;
    e->vt = &plain_vt;
    e->pr = NULL;
    e->cfg = *cfg;
    if (kern_configure(cfg, &e->kv)) {
        free(e);
        free(im);
        return MS_ERR_INPUT;
    }
    e->n_parties = n_parties;
    e->impl = im;
    *out = e;
    return MS_OK;
}

const uint64_t *eng_plain_calls(const eng *e) { return ((const plain_impl *)e->impl)->calls; }
