/* mpc_local.c — common engine state, local share arithmetic and the uint64 matrix kernels. */
#include "mpc_local.h"

#include "mpc_eng.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- state */

int mpc_fail(mpc_core *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(&c->err, code, fmt, ap);
    va_end(ap);
    return code;
}

uint64_t *mpc_tmp(mpc_core *c, int slot, size_t n)
{
    if (c->tmp_n[slot] < n) {
        size_t want = n < 1024 ? 1024 : n;
        uint64_t *p = realloc(c->tmp[slot], want * sizeof *p);
        if (!p) {
            mpc_fail(c, MS_ERR_NOMEM, "mpc: out of memory for %zu scratch elements", n);
            return NULL;
        }
        c->tmp[slot] = p;
        c->tmp_n[slot] = want;
    }
    return c->tmp[slot];
}

void mpc_core_free(mpc_core *c)
{
    for (int i = 0; i < 6; i++)
        free(c->tmp[i]);
    mpc_prg_free(&c->priv);
}

static mpc_core *core(eng *e) { return (mpc_core *)e->impl; }

int mpc_ensure(mpc_core *c, mpc_val *z, size_t n, int dom)
{
    z->dom = (uint8_t)dom;
    if (z->n == n && (c->ns == 0 || z->s[0]))
        return MS_OK;
    for (int t = 0; t < 2; t++) {
        free(z->s[t]);
        z->s[t] = NULL;
    }
    z->n = n;
    for (int t = 0; t < c->ns; t++) {
        z->s[t] = calloc(n ? n : 1, sizeof(uint64_t));
        if (!z->s[t])
            return mpc_fail(c, MS_ERR_NOMEM, "mpc: out of memory for a value of %zu elements", n);
    }
    return MS_OK;
}

int mpc_l_alloc(eng *e, mpc_val *v, size_t n, int dom)
{
    v->n = (size_t)-1; /* force a fresh allocation */
    v->s[0] = v->s[1] = NULL;
    return mpc_ensure(core(e), v, n, dom);
}

void mpc_l_release(eng *e, mpc_val *v)
{
    (void)e;
    free(v->s[0]);
    free(v->s[1]);
    v->s[0] = v->s[1] = NULL;
    v->n = 0;
}

/* ---------------------------------------------------------------- local share arithmetic */

static int same_len(mpc_core *c, const mpc_val *x, const mpc_val *y, const char *what)
{
    if (x->n != y->n)
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc %s: operands of %zu and %zu elements", what, x->n, y->n);
    return MS_OK;
}

/* The dealer holds no data: a local op only gives the result its shape. */
#define DEALER_SHAPE(c, z, n, dom)                   \
    do {                                             \
        if ((c)->ns == 0)                            \
            return mpc_ensure((c), (z), (n), (dom)); \
    } while (0)

int mpc_l_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    int dom = x->dom, rc = same_len(c, x, y, "add");
    if (rc || (rc = mpc_ensure(c, z, x->n, dom)))
        return rc;
    for (int t = 0; t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        const uint64_t *a = x->s[t], *b = y->s[t];
        if (dom == DOM_BOOL)
            for (size_t i = 0; i < x->n; i++)
                zz[i] = a[i] ^ b[i];
        else
            for (size_t i = 0; i < x->n; i++)
                zz[i] = a[i] + b[i];
    }
    return MS_OK;
}

int mpc_l_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    int dom = x->dom, rc = same_len(c, x, y, "sub");
    if (rc || (rc = mpc_ensure(c, z, x->n, dom)))
        return rc;
    for (int t = 0; t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        const uint64_t *a = x->s[t], *b = y->s[t];
        if (dom == DOM_BOOL)
            for (size_t i = 0; i < x->n; i++)
                zz[i] = a[i] ^ b[i];
        else
            for (size_t i = 0; i < x->n; i++)
                zz[i] = a[i] - b[i];
    }
    return MS_OK;
}

static int copy_into(mpc_core *c, mpc_val *z, const mpc_val *x)
{
    int dom = x->dom;
    if (z == x)
        return MS_OK;
    int rc = mpc_ensure(c, z, x->n, dom);
    for (int t = 0; !rc && t < c->ns; t++)
        memcpy(z->s[t], x->s[t], x->n * sizeof(uint64_t));
    return rc;
}

int mpc_l_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *cst, size_t nc)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    if (nc != 1 && nc != x->n)
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc add_pub: %zu constants for %zu elements", nc, x->n);
    int rc = copy_into(c, z, x);
    if (rc || c->pub_slot < 0 || c->ns == 0)
        return rc;
    uint64_t *zz = z->s[c->pub_slot];
    if (z->dom == DOM_BOOL)
        for (size_t i = 0; i < x->n; i++)
            zz[i] ^= cst[nc == 1 ? 0 : i];
    else
        for (size_t i = 0; i < x->n; i++)
            zz[i] += cst[nc == 1 ? 0 : i];
    return MS_OK;
}

int mpc_l_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *cst, size_t nc)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    if (nc != 1 && nc != x->n)
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc mul_pub: %zu constants for %zu elements", nc, x->n);
    int rc = copy_into(c, z, x);
    for (int t = 0; !rc && t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        if (z->dom == DOM_BOOL)
            for (size_t i = 0; i < x->n; i++)
                zz[i] &= cst[nc == 1 ? 0 : i];
        else
            for (size_t i = 0; i < x->n; i++)
                zz[i] *= cst[nc == 1 ? 0 : i];
    }
    return rc;
}

int mpc_l_shift(eng *e, mpc_val *z, const mpc_val *x, int s)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    int rc = copy_into(c, z, x);
    if (s <= -64 || s >= 64) {
        for (int t = 0; !rc && t < c->ns; t++)
            memset(z->s[t], 0, x->n * sizeof(uint64_t));
        return rc;
    }
    for (int t = 0; !rc && t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        if (s > 0)
            for (size_t i = 0; i < x->n; i++)
                zz[i] >>= s;
        else if (s < 0)
            for (size_t i = 0; i < x->n; i++)
                zz[i] <<= -s;
    }
    return rc;
}

int mpc_l_permute(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n)
{
    mpc_core *c = core(e);
    if (c->ns == 0) {
        int dom = x->dom;
        return mpc_ensure(c, z, n, dom);
    }
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= x->n)
            return mpc_fail(c, MS_ERR_INTERNAL, "mpc permute: index %u beyond %zu elements", idx[i], x->n);
    mpc_val t = {0};
    int rc = mpc_l_alloc(e, &t, n, x->dom);
    for (int s = 0; !rc && s < c->ns; s++)
        for (size_t i = 0; i < n; i++)
            t.s[s][i] = x->s[s][idx[i]];
    if (rc)
        return rc;
    if (z == x || z->s[0] || z->s[1])
        mpc_l_release(e, z);
    *z = t;
    return MS_OK;
}

/* ---------------------------------------------------------------- matrix kernels */

/* 2×4 register block over a k-range: 8 accumulators, 2 values of A and 4 of B in registers
 * (x86-64 has 16 general registers; a 4×4 block spills its accumulators to the stack). Scalar
 * imul: SSE has no 64-bit lane multiply. */
static void mm_block(uint64_t *C, const uint64_t *A, const uint64_t *B, size_t k, size_t n,
                     size_t i0, size_t i1, size_t j0, size_t j1, size_t k0, size_t k1)
{
    size_t i = i0;
    for (; i + 2 <= i1; i += 2) {
        const uint64_t *a0 = A + i * k, *a1 = a0 + k;
        size_t j = j0;
        for (; j + 4 <= j1; j += 4) {
            uint64_t c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
            const uint64_t *b = B + k0 * n + j;
            for (size_t kk = k0; kk < k1; kk++, b += n) {
                uint64_t b0 = b[0], b1 = b[1], b2 = b[2], b3 = b[3], x = a0[kk], y = a1[kk];
                c00 += x * b0;
                c01 += x * b1;
                c02 += x * b2;
                c03 += x * b3;
                c10 += y * b0;
                c11 += y * b1;
                c12 += y * b2;
                c13 += y * b3;
            }
            uint64_t *c0 = C + i * n + j, *c1 = c0 + n;
            c0[0] += c00, c0[1] += c01, c0[2] += c02, c0[3] += c03;
            c1[0] += c10, c1[1] += c11, c1[2] += c12, c1[3] += c13;
        }
        for (; j < j1; j++)
            for (size_t r = i; r < i + 2; r++) {
                uint64_t acc = 0;
                for (size_t kk = k0; kk < k1; kk++)
                    acc += A[r * k + kk] * B[kk * n + j];
                C[r * n + j] += acc;
            }
    }
    for (; i < i1; i++)
        for (size_t kk = k0; kk < k1; kk++) {
            uint64_t a = A[i * k + kk];
            const uint64_t *b = B + kk * n;
            uint64_t *c = C + i * n;
            for (size_t j = j0; j < j1; j++)
                c[j] += a * b[j];
        }
}

void mpc_mm_acc(uint64_t *C, const uint64_t *A, const uint64_t *B, size_t m, size_t k, size_t n,
                int trans_b)
{
    uint64_t *T = NULL;
    if (trans_b) { /* B is n×k: transpose once so the kernel streams rows of B */
        T = malloc(k * n * sizeof *T);
        if (!T) { /* fall back to the dot-product form */
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    uint64_t s = 0;
                    for (size_t kk = 0; kk < k; kk++)
                        s += A[i * k + kk] * B[j * k + kk];
                    C[i * n + j] += s;
                }
            return;
        }
        for (size_t j = 0; j < n; j++)
            for (size_t kk = 0; kk < k; kk++)
                T[kk * n + j] = B[j * k + kk];
        B = T;
    }
    const size_t KB = 128, JB = 512, IB = 64; /* B tile 128×512×8 = 512 KiB: L2-sized */
    for (size_t j0 = 0; j0 < n; j0 += JB)
        for (size_t k0 = 0; k0 < k; k0 += KB)
            for (size_t i0 = 0; i0 < m; i0 += IB)
                mm_block(C, A, B, k, n, i0, i0 + IB < m ? i0 + IB : m, j0,
                         j0 + JB < n ? j0 + JB : n, k0, k0 + KB < k ? k0 + KB : k);
    free(T);
}

uint32_t mpc_mm_y_inst(size_t y_n, uint32_t batch, size_t kn)
{
    size_t yb = kn ? y_n / kn : 0;
    if (yb == 0 || yb > batch || batch % yb || y_n != yb * kn)
        return 0;
    return (uint32_t)yb;
}

void mpc_mm_batch(uint64_t *Z, const uint64_t *X, const uint64_t *Y, uint32_t batch, size_t m,
                  size_t k, size_t n, int trans_b, uint32_t y_inst)
{
    uint32_t share = y_inst ? batch / y_inst : 1; /* instances per right operand (op.h) */
    for (uint32_t b = 0; b < batch; b++)
        mpc_mm_acc(Z + (size_t)b * m * n, X + (size_t)b * m * k, Y + (size_t)(b / share) * k * n,
                   m, k, n, trans_b);
}

/* ---------------------------------------------------------------- packed bits */

/* The bits of x under mask, gathered to the low end (software PEXT). */
static uint64_t gather_bits(uint64_t x, uint64_t mask)
{
    uint64_t r = 0;
    for (int k = 0; mask; mask &= mask - 1, k++)
        if (x & mask & (~mask + 1))
            r |= 1ull << k;
    return r;
}

static uint64_t scatter_bits(uint64_t v, uint64_t mask)
{
    uint64_t r = 0;
    for (int k = 0; mask; mask &= mask - 1, k++)
        if ((v >> k) & 1)
            r |= mask & (~mask + 1);
    return r;
}

/* The pc bits of v at bit *bit of buf. */
static void put_bits(uint8_t *buf, size_t *bit, uint64_t v, int pc)
{
    for (int nb = pc; nb > 0;) {
        int off = (int)(*bit & 7), take = 8 - off < nb ? 8 - off : nb;
        buf[*bit >> 3] |= (uint8_t)((v & ((1u << take) - 1)) << off);
        v >>= take, *bit += (size_t)take, nb -= take;
    }
}

static uint64_t get_bits(const uint8_t *buf, size_t *bit, int pc)
{
    uint64_t v = 0;
    for (int got = 0; got < pc;) {
        int off = (int)(*bit & 7), take = 8 - off < pc - got ? 8 - off : pc - got;
        v |= (uint64_t)((buf[*bit >> 3] >> off) & ((1u << take) - 1)) << got;
        got += take, *bit += (size_t)take;
    }
    return v;
}

static uint64_t pack_of(uint64_t x, uint64_t mask, int sh, uint64_t low, int contig)
{
    return contig ? (x >> sh) & low : gather_bits(x, mask);
}

static uint64_t unpack_of(uint64_t v, uint64_t mask, int sh, int contig)
{
    return contig ? v << sh : scatter_bits(v, mask);
}

/* Each element's bits of w1 (then of w2), padded to a whole byte: a message's length is linear
 * in its element count (n·⌈pc/8⌉, n·⌈2pc/8⌉), as every other primitive's. */
static void pack_n(uint8_t *buf, size_t *pos, const uint64_t *w1, const uint64_t *w2, size_t n,
                   uint64_t mask)
{
    int pc = __builtin_popcountll(mask);
    if (!pc)
        return;
    int sh = __builtin_ctzll(mask);
    uint64_t low = pc == 64 ? ~0ull : (1ull << pc) - 1;
    int contig = (mask >> sh) == low;
    size_t bit = *pos;
    for (size_t i = 0; i < n; i++) {
        put_bits(buf, &bit, pack_of(w1[i], mask, sh, low, contig), pc);
        if (w2)
            put_bits(buf, &bit, pack_of(w2[i], mask, sh, low, contig), pc);
        bit = (bit + 7) & ~(size_t)7;
    }
    *pos = bit;
}

static void unpack_n(uint64_t *w1, uint64_t *w2, size_t n, uint64_t mask, const uint8_t *buf,
                     size_t *pos)
{
    int pc = __builtin_popcountll(mask);
    if (!pc) {
        memset(w1, 0, n * sizeof *w1);
        if (w2)
            memset(w2, 0, n * sizeof *w2);
        return;
    }
    int sh = __builtin_ctzll(mask);
    uint64_t low = pc == 64 ? ~0ull : (1ull << pc) - 1;
    int contig = (mask >> sh) == low;
    size_t bit = *pos;
    for (size_t i = 0; i < n; i++) {
        w1[i] = unpack_of(get_bits(buf, &bit, pc), mask, sh, contig);
        if (w2)
            w2[i] = unpack_of(get_bits(buf, &bit, pc), mask, sh, contig);
        bit = (bit + 7) & ~(size_t)7;
    }
    *pos = bit;
}

void mpc_pack_bits(uint8_t *buf, size_t *pos, const uint64_t *w, size_t n, uint64_t mask)
{
    pack_n(buf, pos, w, NULL, n, mask);
}

void mpc_unpack_bits(uint64_t *w, size_t n, uint64_t mask, const uint8_t *buf, size_t *pos)
{
    unpack_n(w, NULL, n, mask, buf, pos);
}

void mpc_pack2_bits(uint8_t *buf, size_t *pos, const uint64_t *w1, const uint64_t *w2, size_t n,
                    uint64_t mask)
{
    pack_n(buf, pos, w1, w2, n, mask);
}

void mpc_unpack2_bits(uint64_t *w1, uint64_t *w2, size_t n, uint64_t mask, const uint8_t *buf,
                      size_t *pos)
{
    unpack_n(w1, w2, n, mask, buf, pos);
}
