/* mpc_local.c — common engine state, local share arithmetic and the uint64 matrix kernels. */
#include "mpc_local.h"

#include "mpc_eng.h"
#include "protocols/base/invariant.h"
#include "protocols/base/simd.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Element loops two words at a time in SSE2 vector types: at -O2 GCC vectorizes only loops
 * whose trip count is a known multiple of the vector width, which these are not. Each vector
 * is loaded before its store, so z may be x or y (an exact alias), as in the scalar tail. */
typedef uint64_t v2u64 __attribute__((vector_size(16)));

/* zz[i] = EXPR of u = a[i] (and v = b[i]) */
#define EW1(zz, a, n, EXPR)                  \
    do {                                     \
        size_t i_ = 0;                       \
        for (; i_ + 2 <= (n); i_ += 2) {     \
            v2u64 u;                         \
            memcpy(&u, (a) + i_, sizeof u);  \
            u = (EXPR);                      \
            memcpy((zz) + i_, &u, sizeof u); \
        }                                    \
        for (; i_ < (n); i_++) {             \
            uint64_t u = (a)[i_];            \
            (zz)[i_] = (EXPR);               \
        }                                    \
    } while (0)
#define EW2(zz, a, b, n, EXPR)                 \
    do {                                       \
        size_t i_ = 0;                         \
        for (; i_ + 2 <= (n); i_ += 2) {       \
            v2u64 u, v;                        \
            memcpy(&u, (a) + i_, sizeof u);    \
            memcpy(&v, (b) + i_, sizeof v);    \
            u = (EXPR);                        \
            memcpy((zz) + i_, &u, sizeof u);   \
        }                                      \
        for (; i_ < (n); i_++) {               \
            uint64_t u = (a)[i_], v = (b)[i_]; \
            (zz)[i_] = (EXPR);                 \
        }                                      \
    } while (0)

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
    if (c->tmp_n[slot] < n) { /* its contents need not survive: freed, not copied */
        size_t want = n < 1024 ? 1024 : n;
        free(c->tmp[slot]);
        c->tmp[slot] = NULL;
        c->tmp_n[slot] = 0;
        uint64_t *p = want <= SIZE_MAX / 8 ? malloc(want * sizeof *p) : NULL;
        if (!p) {
            mpc_fail(c, MS_ERR_NOMEM, "mpc: out of memory for %zu scratch elements", n);
            return NULL;
        }
        c->tmp[slot] = p;
        c->tmp_n[slot] = want;
    }
    return c->tmp[slot];
}

uint8_t *mpc_tmp_bytes(mpc_core *c, int slot, size_t len)
{
    uint64_t *w = mpc_tmp(c, slot, len / 8 + 1);
    if (w)
        memset(w, 0, (len / 8 + 1) * 8);
    return (uint8_t *)w;
}

uint8_t *mpc_tmp_bytes_w(mpc_core *c, int slot, size_t len)
{
    return (uint8_t *)mpc_tmp(c, slot, len / 8 + 1);
}

void mpc_core_free(mpc_core *c)
{
    for (int i = 0; i < 6; i++)
        free(c->tmp[i]);
    mpc_prg_free(&c->priv);
}

static mpc_core *core(eng *e) { return (mpc_core *)e->impl; }

int mpc_val_is_sane(const mpc_core *c, const mpc_val *v)
{
    if (v->dom != DOM_ARITH && v->dom != DOM_BOOL)
        return 0;
    for (int t = 0; t < 2; t++)
        if ((t < c->ns) != (v->s[t] != NULL)) /* a slot per share, none beyond */
            return 0;
    return 1;
}

/* mpc_ensure; new storage zeroed only when zero (a caller that writes every element first
 * does not pay for it). */
static int ensure(mpc_core *c, mpc_val *z, size_t n, int dom, int zero)
{
    z->dom = (uint8_t)dom;
    if (z->n == n && (c->ns == 0 || z->s[0])) {
        MPCSIM_ASSERT(mpc_val_is_sane(c, z));
        return MS_OK;
    }
    for (int t = 0; t < 2; t++) {
        free(z->s[t]);
        z->s[t] = NULL;
    }
    z->n = n;
    for (int t = 0; t < c->ns; t++) {
        size_t m = n ? n : 1;
        z->s[t] = zero                ? calloc(m, sizeof(uint64_t))
                  : m <= SIZE_MAX / 8 ? malloc(m * sizeof(uint64_t))
                                      : NULL;
        if (!z->s[t])
            return mpc_fail(c, MS_ERR_NOMEM, "mpc: out of memory for a value of %zu elements", n);
    }
    MPCSIM_ASSERT(mpc_val_is_sane(c, z));
    return MS_OK;
}

int mpc_ensure(mpc_core *c, mpc_val *z, size_t n, int dom) { return ensure(c, z, n, dom, 1); }

int mpc_l_alloc(eng *e, mpc_val *v, size_t n, int dom)
{
    v->n = (size_t)-1; /* force a fresh allocation */
    v->s[0] = v->s[1] = NULL;
    return mpc_ensure(core(e), v, n, dom);
}

int mpc_l_alloc_w(eng *e, mpc_val *v, size_t n, int dom)
{
    v->n = (size_t)-1;
    v->s[0] = v->s[1] = NULL;
    return ensure(core(e), v, n, dom, 0); /* the caller writes every element first */
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
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc %s: operands of %zu and %zu elements", what, x->n,
                        y->n);
    return MS_OK;
}

/* The dealer holds no data: a local op only gives the result its shape. */
#define DEALER_SHAPE(c, z, n, dom)                   \
    do {                                             \
        if ((c)->ns == 0)                            \
            return mpc_ensure((c), (z), (n), (dom)); \
    } while (0)

/* z = x + y, or x − y when sub (XOR either way on boolean shares). */
static int add_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int sub)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    int dom = x->dom, rc = same_len(c, x, y, sub ? "sub" : "add");
    if (rc || (rc = ensure(c, z, x->n, dom, 0))) /* every element written below */
        return rc;
    for (int t = 0; t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        const uint64_t *a = x->s[t], *b = y->s[t];
        if (dom == DOM_BOOL)
            EW2(zz, a, b, x->n, u ^ v);
        else if (sub)
            EW2(zz, a, b, x->n, u - v);
        else
            EW2(zz, a, b, x->n, u + v);
    }
    return MS_OK;
}

int mpc_l_add(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return add_sub(e, z, x, y, 0);
}

int mpc_l_sub(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return add_sub(e, z, x, y, 1);
}

/* z takes x's length and domain (its storage kept if it fits); z may be x. The element loops
 * below then read x and write z in one pass, with no copy first. */
static int like(mpc_core *c, mpc_val *z, const mpc_val *x)
{
    int dom = x->dom;
    return z == x ? MS_OK : ensure(c, z, x->n, dom, 0);
}

int mpc_l_add_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *cst, size_t nc)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    if (nc != 1 && nc != x->n)
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc add_pub: %zu constants for %zu elements", nc,
                        x->n);
    int rc = like(c, z, x);
    size_t n = x->n;
    uint64_t k = nc == 1 ? cst[0] : 0;
    for (int t = 0; !rc && t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        const uint64_t *xx = x->s[t];
        if (t != c->pub_slot) {
            if (zz != xx)
                memcpy(zz, xx, n * sizeof *zz);
        } else if (nc == 1 && z->dom == DOM_BOOL) {
            for (size_t i = 0; i < n; i++)
                zz[i] = xx[i] ^ k;
        } else if (nc == 1) {
            for (size_t i = 0; i < n; i++)
                zz[i] = xx[i] + k;
        } else if (z->dom == DOM_BOOL) {
            for (size_t i = 0; i < n; i++)
                zz[i] = xx[i] ^ cst[i];
        } else {
            for (size_t i = 0; i < n; i++)
                zz[i] = xx[i] + cst[i];
        }
    }
    return rc;
}

/* nc == 1 (a public constant word, as every AND with a bit mask is) has its own loops: no
 * n-word buffer of the constant, and the word held in a register. */
int mpc_l_mul_pub(eng *e, mpc_val *z, const mpc_val *x, const uint64_t *cst, size_t nc)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    if (nc != 1 && nc != x->n)
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc mul_pub: %zu constants for %zu elements", nc,
                        x->n);
    int rc = like(c, z, x);
    size_t n = x->n;
    uint64_t k = nc == 1 ? cst[0] : 0;
    for (int t = 0; !rc && t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        const uint64_t *xx = x->s[t];
        if (nc == 1 && z->dom == DOM_BOOL)
            EW1(zz, xx, n, u & k);
        else if (nc == 1)
            for (size_t i = 0; i < n; i++)
                zz[i] = xx[i] * k;
        else if (z->dom == DOM_BOOL)
            for (size_t i = 0; i < n; i++)
                zz[i] = xx[i] & cst[i];
        else
            for (size_t i = 0; i < n; i++)
                zz[i] = xx[i] * cst[i];
    }
    return rc;
}

int mpc_l_shift(eng *e, mpc_val *z, const mpc_val *x, int s)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, x->dom);
    int rc = like(c, z, x);
    size_t n = x->n;
    for (int t = 0; !rc && t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        const uint64_t *xx = x->s[t];
        if (s <= -64 || s >= 64)
            memset(zz, 0, n * sizeof *zz);
        else if (s > 0)
            EW1(zz, xx, n, u >> s);
        else if (s < 0)
            EW1(zz, xx, n, u << -s);
        else if (zz != xx)
            memcpy(zz, xx, n * sizeof *zz);
    }
    return rc;
}

/* The left and right shift counts of a signed shift (left when positive), one of them 0; the
 * mask cleared when the word shifts out entirely. */
static void split_shift(int s, unsigned *lft, unsigned *rgt, uint64_t *mask)
{
    *lft = *rgt = 0;
    if (s <= -64 || s >= 64)
        *mask = 0;
    else if (s > 0)
        *lft = (unsigned)s;
    else
        *rgt = (unsigned)-s;
}

/* z = (x << l) & ml ^ (y << r) & mr: the carry tree's placing of two words (kern_cmp.c) in one
 * pass. Each element is read before it is written, so z may be x or y. */
int mpc_l_place2(eng *e, mpc_val *z, const mpc_val *x, int l, uint64_t ml, const mpc_val *y, int r,
                 uint64_t mr)
{
    mpc_core *c = core(e);
    DEALER_SHAPE(c, z, x->n, DOM_BOOL);
    int rc = same_len(c, x, y, "place2");
    if (rc || (rc = ensure(c, z, x->n, DOM_BOOL, 0))) /* every element written below */
        return rc;
    unsigned xl, xr, yl, yr;
    split_shift(l, &xl, &xr, &ml);
    split_shift(r, &yl, &yr, &mr);
    size_t n = x->n;
    for (int t = 0; t < c->ns; t++) {
        uint64_t *zz = z->s[t];
        const uint64_t *a = x->s[t], *b = y->s[t];
        EW2(zz, a, b, n, ((u << xl >> xr) & ml) ^ ((v << yl >> yr) & mr));
    }
    return MS_OK;
}

void mpc_l_and_placed(uint64_t *al, const eng_placed *a, const eng_placed *b, uint64_t mask,
                      size_t n)
{
    unsigned sh[4][2]; /* left, right shift of a.x, a.y, b.x, b.y */
    uint64_t m[4] = {a->ml, a->mr, b->ml, b->mr};
    int cnt[4] = {a->l, a->r, b->l, b->r};
    for (int q = 0; q < 4; q++)
        split_shift(cnt[q], &sh[q][0], &sh[q][1], &m[q]);
    const uint64_t *ax0 = a->x->s[0], *ax1 = a->x->s[1], *ay0 = a->y->s[0], *ay1 = a->y->s[1];
    const uint64_t *bx0 = b->x->s[0], *bx1 = b->x->s[1], *by0 = b->y->s[0], *by1 = b->y->s[1];
#define PL(v, q) (((v) << sh[q][0] >> sh[q][1]) & m[q])
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        v2u64 z, p0, p1, q0, q1, t0, t1;
        memcpy(&z, al + i, sizeof z);
        memcpy(&t0, ax0 + i, sizeof t0), memcpy(&t1, ay0 + i, sizeof t1);
        p0 = PL(t0, 0) ^ PL(t1, 1);
        memcpy(&t0, ax1 + i, sizeof t0), memcpy(&t1, ay1 + i, sizeof t1);
        p1 = PL(t0, 0) ^ PL(t1, 1);
        memcpy(&t0, bx0 + i, sizeof t0), memcpy(&t1, by0 + i, sizeof t1);
        q0 = PL(t0, 2) ^ PL(t1, 3);
        memcpy(&t0, bx1 + i, sizeof t0), memcpy(&t1, by1 + i, sizeof t1);
        q1 = PL(t0, 2) ^ PL(t1, 3);
        z = (z ^ (p0 & q0) ^ (p0 & q1) ^ (p1 & q0)) & mask;
        memcpy(al + i, &z, sizeof z);
    }
    for (; i < n; i++) {
        uint64_t p0 = PL(ax0[i], 0) ^ PL(ay0[i], 1), p1 = PL(ax1[i], 0) ^ PL(ay1[i], 1);
        uint64_t q0 = PL(bx0[i], 2) ^ PL(by0[i], 3), q1 = PL(bx1[i], 2) ^ PL(by1[i], 3);
        al[i] = (al[i] ^ (p0 & q0) ^ (p0 & q1) ^ (p1 & q0)) & mask;
    }
#undef PL
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
            return mpc_fail(c, MS_ERR_INTERNAL, "mpc permute: index %u beyond %zu elements", idx[i],
                            x->n);
    mpc_val t = {.n = (size_t)-1};
    int rc = ensure(c, &t, n, x->dom, 0); /* every element written below */
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

int mpc_l_concat(eng *e, mpc_val *z, const mpc_val *parts, int np)
{
    mpc_core *c = core(e);
    size_t tot = 0;
    for (int i = 0; i < np; i++)
        tot += parts[i].n;
    if (tot != z->n)
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc concat: parts of %zu elements into %zu", tot,
                        z->n);
    for (int s = 0; s < c->ns; s++) {
        size_t off = 0;
        for (int i = 0; i < np; i++) {
            memcpy(z->s[s] + off, parts[i].s[s], parts[i].n * sizeof(uint64_t));
            off += parts[i].n;
        }
    }
    return MS_OK;
}

int mpc_l_scatter(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, size_t n)
{
    mpc_core *c = core(e);
    if (c->ns == 0)
        return MS_OK;
    if (n > x->n || z == x || z->dom != x->dom)
        return mpc_fail(c, MS_ERR_INTERNAL, "mpc scatter: %zu elements of %zu into another value",
                        n, x->n);
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= z->n)
            return mpc_fail(c, MS_ERR_INTERNAL, "mpc scatter: index %u beyond %zu elements", idx[i],
                            z->n);
    for (int s = 0; s < c->ns; s++)
        for (size_t i = 0; i < n; i++)
            z->s[s][idx[i]] = x->s[s][i];
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
        mpc_mm_acc(Z + (size_t)b * m * n, X + (size_t)b * m * k, Y + (size_t)(b / share) * k * n, m,
                   k, n, trans_b);
}

/* ---------------------------------------------------------------- packed bits */

/* Every element of a packed message starts on a byte: its pc bits under the mask (or the 2pc
 * bits of a pair) are gathered into one value, stored as ⌈pc/8⌉ (⌈2pc/8⌉) little-endian bytes
 * and read back the same way. Gathering is a shift for a contiguous mask; otherwise PEXT/PDEP
 * where the CPU has BMI2 (chosen at run time, the build targets plain x86-64-v2), else the
 * six-step compress/expand of Hacker's Delight (Warren, 2nd ed., §7-4 and §7-5), whose move
 * masks depend on the mask only and are computed once per call. */
typedef struct pack_plan {
    uint64_t mask, low; /* the mask; the pc low bits */
    uint64_t mv[6];     /* compress/expand move masks (non-contiguous masks) */
    int pc, sh, contig; /* popcount, lowest set bit, mask == low << sh */
    size_t bytes;       /* per element */
} pack_plan;

static void plan_make(pack_plan *pl, uint64_t mask, int pair)
{
    memset(pl, 0, sizeof *pl);
    pl->mask = mask;
    pl->pc = __builtin_popcountll(mask);
    if (!pl->pc)
        return;
    pl->sh = __builtin_ctzll(mask);
    pl->low = pl->pc == 64 ? ~0ull : (1ull << pl->pc) - 1;
    pl->contig = (mask >> pl->sh) == pl->low;
    pl->bytes = ((size_t)(pair ? 2 : 1) * (size_t)pl->pc + 7) / 8;
    /* §7-4: at step i the mask bits with an odd number of zeros of weight 2^i to their right
     * (a parallel suffix of mk) move right by 2^i */
    uint64_t m = mask, mk = ~mask << 1;
    for (int i = 0; i < 6; i++) {
        uint64_t mp = mk ^ (mk << 1);
        mp ^= mp << 2;
        mp ^= mp << 4;
        mp ^= mp << 8;
        mp ^= mp << 16;
        mp ^= mp << 32;
        uint64_t mv = mp & m;
        pl->mv[i] = mv;
        m = (m ^ mv) | (mv >> (1 << i));
        mk &= ~mp;
    }
}

static inline uint64_t sw_compress(const pack_plan *pl, uint64_t x)
{
    x &= pl->mask;
    for (int i = 0; i < 6; i++) {
        uint64_t t = x & pl->mv[i];
        x = (x ^ t) | (t >> (1 << i));
    }
    return x;
}

static inline uint64_t sw_expand(const pack_plan *pl, uint64_t x)
{
    for (int i = 5; i >= 0; i--) {
        uint64_t t = x << (1 << i);
        x = (x & ~pl->mv[i]) | (t & pl->mv[i]);
    }
    return x & pl->mask;
}

/* B (1…16) bytes of the 128-bit value (lo, hi), little-endian */
static inline void put_le(uint8_t *p, uint64_t lo, uint64_t hi, size_t B)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (B == 8) {
        memcpy(p, &lo, 8);
        return;
    }
    if (B < 8) {
        memcpy(p, &lo, B);
        return;
    }
    memcpy(p, &lo, 8);
    memcpy(p + 8, &hi, B - 8);
#else
    for (size_t k = 0; k < B; k++)
        p[k] = (uint8_t)(k < 8 ? lo >> (8 * k) : hi >> (8 * (k - 8)));
#endif
}

static inline void get_le(const uint8_t *p, size_t B, uint64_t *lo, uint64_t *hi)
{
    uint64_t a = 0, b = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&a, p, B < 8 ? B : 8);
    if (B > 8)
        memcpy(&b, p + 8, B - 8);
#else
    for (size_t k = 0; k < B; k++) {
        if (k < 8)
            a |= (uint64_t)p[k] << (8 * k);
        else
            b |= (uint64_t)p[k] << (8 * (k - 8));
    }
#endif
    *lo = a, *hi = b;
}

/* The element loops, instantiated per gather/scatter method and, for 1 to 8 bytes an element,
 * per width: with the width a constant the byte copies of put_le/get_le compile to a load or
 * store or two instead of a call to memcpy per element (the unpacking of the carry tree's AND
 * messages spent most of its time in those calls). A pair is v1 | v2 << pc. */
#define PACK_LOOP_B(GATHER, BYTES)                             \
    do {                                                       \
        int pc_ = pl->pc;                                      \
        size_t b_n_ = (BYTES);                                 \
        for (size_t i = 0; i < n; i++, p += b_n_) {            \
            uint64_t a_ = GATHER(w1[i]), lo_ = a_, hi_ = 0;    \
            if (w2) {                                          \
                uint64_t b_ = GATHER(w2[i]);                   \
                if (pc_ == 64)                                 \
                    hi_ = b_;                                  \
                else {                                         \
                    lo_ |= b_ << pc_;                          \
                    hi_ = 2 * pc_ > 64 ? b_ >> (64 - pc_) : 0; \
                }                                              \
            }                                                  \
            put_le(p, lo_, hi_, b_n_);                         \
        }                                                      \
    } while (0)

#define UNPACK_LOOP_B(SCATTER, BYTES)                                                              \
    do {                                                                                           \
        int pc_ = pl->pc;                                                                          \
        size_t b_n_ = (BYTES);                                                                     \
        for (size_t i = 0; i < n; i++, p += b_n_) {                                                \
            uint64_t lo_, hi_;                                                                     \
            get_le(p, b_n_, &lo_, &hi_);                                                           \
            w1[i] = SCATTER(lo_ & pl->low);                                                        \
            if (w2) {                                                                              \
                uint64_t b_ =                                                                      \
                    pc_ == 64 ? hi_                                                                \
                              : ((lo_ >> pc_) | (2 * pc_ > 64 ? hi_ << (64 - pc_) : 0)) & pl->low; \
                w2[i] = SCATTER(b_);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define BY_WIDTH(LOOP, M)                   \
    do {                                    \
        switch (pl->bytes) {                \
        case 1: LOOP(M, 1); break;          \
        case 2: LOOP(M, 2); break;          \
        case 3: LOOP(M, 3); break;          \
        case 4: LOOP(M, 4); break;          \
        case 5: LOOP(M, 5); break;          \
        case 6: LOOP(M, 6); break;          \
        case 7: LOOP(M, 7); break;          \
        case 8: LOOP(M, 8); break;          \
        default: LOOP(M, pl->bytes); break; \
        }                                   \
    } while (0)
#define PACK_LOOP(GATHER) BY_WIDTH(PACK_LOOP_B, GATHER)
#define UNPACK_LOOP(SCATTER) BY_WIDTH(UNPACK_LOOP_B, SCATTER)

#define G_SHIFT(x) (((x) >> pl->sh) & pl->low)
#define S_SHIFT(v) ((v) << pl->sh)
#define G_SW(x) sw_compress(pl, (x))
#define S_SW(v) sw_expand(pl, (v))

static void pack_shift(const pack_plan *pl, uint8_t *p, const uint64_t *w1, const uint64_t *w2,
                       size_t n)
{
    PACK_LOOP(G_SHIFT);
}
static void unpack_shift(const pack_plan *pl, const uint8_t *p, uint64_t *w1, uint64_t *w2,
                         size_t n)
{
    UNPACK_LOOP(S_SHIFT);
}
static void pack_sw(const pack_plan *pl, uint8_t *p, const uint64_t *w1, const uint64_t *w2,
                    size_t n)
{
    PACK_LOOP(G_SW);
}
static void unpack_sw(const pack_plan *pl, const uint8_t *p, uint64_t *w1, uint64_t *w2, size_t n)
{
    UNPACK_LOOP(S_SW);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_BMI2_PATH 1
#define G_PEXT(x) _pext_u64((x), pl->mask)
#define S_PDEP(v) _pdep_u64((v), pl->mask)
__attribute__((target("bmi2"))) static void pack_bmi2(const pack_plan *pl, uint8_t *p,
                                                      const uint64_t *w1, const uint64_t *w2,
                                                      size_t n)
{
    PACK_LOOP(G_PEXT);
}
__attribute__((target("bmi2"))) static void unpack_bmi2(const pack_plan *pl, const uint8_t *p,
                                                        uint64_t *w1, uint64_t *w2, size_t n)
{
    UNPACK_LOOP(S_PDEP);
}
#endif

static int force_sw; /* mpc_pack_force_software */

void mpc_pack_force_software(int on) { force_sw = on; }

/* 1: PEXT/PDEP, 0: the software compress/expand */
static int use_bmi2(void)
{
#ifdef HAVE_BMI2_PATH
    return ms_cpu_has(MS_CPU_BMI2) && !force_sw;
#else
    return 0;
#endif
}

/* Each element's bits of w1 (then of w2), padded to a whole byte: a message's length is linear
 * in its element count (n·⌈pc/8⌉, n·⌈2pc/8⌉), as every other primitive's. */
static void pack_n(uint8_t *buf, size_t *pos, const uint64_t *w1, const uint64_t *w2, size_t n,
                   uint64_t mask)
{
    pack_plan pl;
    plan_make(&pl, mask, w2 != NULL);
    if (!pl.pc)
        return;
    size_t at = (*pos + 7) / 8;
    uint8_t *p = buf + at;
    if (pl.contig)
        pack_shift(&pl, p, w1, w2, n);
#ifdef HAVE_BMI2_PATH
    else if (use_bmi2())
        pack_bmi2(&pl, p, w1, w2, n);
#endif
    else
        pack_sw(&pl, p, w1, w2, n);
    *pos = 8 * (at + n * pl.bytes);
}

static void unpack_n(uint64_t *w1, uint64_t *w2, size_t n, uint64_t mask, const uint8_t *buf,
                     size_t *pos)
{
    pack_plan pl;
    plan_make(&pl, mask, w2 != NULL);
    if (!pl.pc) {
        memset(w1, 0, n * sizeof *w1);
        if (w2)
            memset(w2, 0, n * sizeof *w2);
        return;
    }
    size_t at = (*pos + 7) / 8;
    const uint8_t *p = buf + at;
    if (pl.contig)
        unpack_shift(&pl, p, w1, w2, n);
#ifdef HAVE_BMI2_PATH
    else if (use_bmi2())
        unpack_bmi2(&pl, p, w1, w2, n);
#endif
    else
        unpack_sw(&pl, p, w1, w2, n);
    *pos = 8 * (at + n * pl.bytes);
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

/* The permutation of each run of seg elements drawn from M words (Fisher–Yates, word r+i for
 * step i of the run starting at r); the same words give the same permutation at every node
 * that holds them. Its modulo bias is below M/2^64. */
void mpc_perm_from(uint32_t *pi, const uint64_t *w, size_t M, size_t seg)
{
    for (size_t r = 0; r < M; r += seg) {
        for (size_t i = 0; i < seg; i++)
            pi[r + i] = (uint32_t)(r + i);
        for (size_t i = seg - 1; i > 0; i--) {
            size_t j = w[r + i] % (i + 1);
            uint32_t t = pi[r + i];
            pi[r + i] = pi[r + j], pi[r + j] = t;
        }
    }
}

/* out[p·M + i] = v[p·M + π(i)] over the parts (out must not alias v). */
void mpc_perm_apply(uint64_t *out, const uint64_t *v, const uint32_t *pi, size_t M, size_t parts)
{
    for (size_t p = 0; p < parts; p++)
        for (size_t i = 0; i < M; i++)
            out[p * M + i] = v[p * M + pi[i]];
}
