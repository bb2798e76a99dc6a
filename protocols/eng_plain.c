/* eng_plain.c — clear-text fixed-point engine (see eng_plain.h). */
#include "eng_plain.h"

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

static void count(eng *e, int prim)
{
    ((plain_impl *)e->impl)->calls[prim]++;
}

/* (Re)sizes z to n elements; z may alias an input, so inputs are read before resizing. */
static int ensure(mpc_val *z, size_t n, int dom)
{
    if (z->s[0] && z->n == n) {
        z->dom = (uint8_t)dom;
        return MS_OK;
    }
    uint64_t *b = calloc(n ? n : 1, sizeof *b);
    if (!b)
        return MS_ERR_NOMEM;
    free(z->s[0]);
    z->s[0] = b;
    z->s[1] = NULL;
    z->n = n;
    z->dom = (uint8_t)dom;
    return MS_OK;
}

static int p_alloc(eng *e, mpc_val *v, size_t n, int dom)
{
    (void)e;
    v->s[0] = NULL;
    return ensure(v, n, dom);
}

static void p_release(eng *e, mpc_val *v)
{
    (void)e;
    free(v->s[0]);
    v->s[0] = NULL;
    v->n = 0;
}

static int p_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    count(e, PRIM_LOCAL);
    if (x->n != y->n)
        return MS_ERR_INTERNAL;
    int rc = ensure(z, x->n, x->dom);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->dom == DOM_BOOL ? x->s[0][i] ^ y->s[0][i] : x->s[0][i] + y->s[0][i];
    return MS_OK;
}

static int p_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    count(e, PRIM_LOCAL);
    if (x->n != y->n)
        return MS_ERR_INTERNAL;
    int rc = ensure(z, x->n, x->dom);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->s[0][i] - y->s[0][i];
    return MS_OK;
}

static int p_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    count(e, PRIM_LOCAL);
    int rc = ensure(z, x->n, x->dom);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t k = c ? c[nc == 1 ? 0 : i] : 0;
        z->s[0][i] = x->dom == DOM_BOOL ? x->s[0][i] ^ k : x->s[0][i] + k;
    }
    return MS_OK;
}

static int p_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *c, size_t nc)
{
    count(e, PRIM_LOCAL);
    int rc = ensure(z, x->n, x->dom);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t k = c[nc == 1 ? 0 : i];
        z->s[0][i] = x->dom == DOM_BOOL ? x->s[0][i] & k : x->s[0][i] * k;
    }
    return MS_OK;
}

static int p_shift(eng *e, mpc_val *z, const mpc_val *x, int s)
{
    count(e, PRIM_LOCAL);
    int rc = ensure(z, x->n, DOM_BOOL);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++) {
        uint64_t v = x->s[0][i];
        z->s[0][i] = s >= 64 || s <= -64 ? 0 : s > 0 ? v >> s : s < 0 ? v << -s : v;
    }
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
    for (size_t i = 0; i < x->n; i++) {
        uint64_t rest = x->s[0][i];
        for (int c = 1; c < *nc; c++) {
            uint64_t r = splitmix(&im->rng);
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
    uint64_t *b = malloc((n ? n : 1) * sizeof *b);
    if (!b)
        return MS_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= x->n) {
            free(b);
            return MS_ERR_INTERNAL;
        }
        b[i] = x->s[0][idx[i]];
    }
    int dom = x->dom;
    if (z->s[0] != x->s[0] || z == x) {
        free(z->s[0]);
    }
    z->s[0] = b;
    z->n = n;
    z->dom = (uint8_t)dom;
    return MS_OK;
}

static int p_input(eng *e, mpc_val *z, int owner, const uint64_t *plain)
{
    count(e, PRIM_INPUT);
    for (size_t i = 0; i < z->n; i++)
        z->s[0][i] = plain ? plain[i] : 0;
    z->dom = DOM_ARITH;
    return MS_OK;
}

static int p_open(eng *e, uint64_t *out, const mpc_val *x, int to)
{
    count(e, PRIM_OPEN);
    if (out)
        memcpy(out, x->s[0], x->n * sizeof *out);
    return MS_OK;
}

static int p_mul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    count(e, PRIM_MUL);
    if (x->n != y->n)
        return MS_ERR_INTERNAL;
    int rc = ensure(z, x->n, DOM_ARITH);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->s[0][i] * y->s[0][i];
    return MS_OK;
}

static int p_square(eng *e, mpc_val *z, const mpc_val *x)
{
    count(e, PRIM_SQUARE);
    int rc = ensure(z, x->n, DOM_ARITH);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->s[0][i] * x->s[0][i];
    return MS_OK;
}

static int p_matmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t batch,
                    uint32_t m, uint32_t k, uint32_t n, uint32_t flags, uint32_t y_id)
{
    count(e, PRIM_MATMUL);
    size_t kn = (size_t)k * n, mk = (size_t)m * k;
    int ybat = y->n >= batch * kn && batch > 1;
    if (x->n < batch * mk || y->n < kn)
        return MS_ERR_INTERNAL;
    uint64_t *b = calloc((size_t)batch * m * n + 1, sizeof *b);
    if (!b)
        return MS_ERR_NOMEM;
    for (size_t bb = 0; bb < batch; bb++) {
        const uint64_t *X = x->s[0] + bb * mk, *Y = y->s[0] + (ybat ? bb * kn : 0);
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
    return MS_OK;
}

static int p_and(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    count(e, PRIM_AND);
    if (x->n != y->n)
        return MS_ERR_INTERNAL;
    int rc = ensure(z, x->n, DOM_BOOL);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->s[0][i] & y->s[0][i];
    return MS_OK;
}

static int p_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    plain_impl *im = e->impl;
    count(e, PRIM_TRUNC);
    int rc = ensure(z, x->n, DOM_ARITH);
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
    return MS_OK;
}

static int p_b2a(eng *e, mpc_val *z, const mpc_val *x)
{
    count(e, PRIM_B2A);
    int rc = ensure(z, x->n, DOM_ARITH);
    if (rc)
        return rc;
    for (size_t i = 0; i < x->n; i++)
        z->s[0][i] = x->s[0][i] & 1;
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
    .input = p_input,
    .open = p_open,
    .mul = p_mul,
    .square = p_square,
    .matmul = p_matmul,
    .and_bb = p_and,
    .trunc = p_trunc,
    .b2a = p_b2a,
};

int eng_plain_new(const proto_cfg *cfg, int n_parties, uint64_t seed, int exact_trunc,
                  eng **out)
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
    e->n_parties = n_parties;
    e->impl = im;
    *out = e;
    return MS_OK;
}

const uint64_t *eng_plain_calls(const eng *e)
{
    return ((const plain_impl *)e->impl)->calls;
}
