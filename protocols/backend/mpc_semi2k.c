/* mpc_semi2k.c — semi2k on real shares: 2PC additive sharing over Z_2^64 with a trusted dealer.
 *
 * Message patterns are exactly those of PRIMITIVES.md §semi2k (the cost engine predicts them):
 * the dealer shares an AES-CTR seed with each party, P0's part of every correlated value is
 * drawn from P0's seed, P1's from P1's, and the dealer sends P1 only the correction. The draw
 * order of each primitive is the same on the party and on the dealer, which keeps the streams
 * in step without any party→dealer message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpc_eng.h"
#include "mpc_local.h"
#include "protocols/base/grow.h"

typedef struct fixed_ent {
    uint32_t id;   /* tensor id in the current program (UINT32_MAX: not bound) */
    char name[48]; /* the tensor's name: the key across programs (empty: id only) */
    size_t n;
    uint64_t *B; /* party: its share of the mask; dealer: the whole mask B0 + B1 */
    uint64_t *F; /* party: the opened Y − B */
    int derived; /* a fixed view of another entry (s_fixed_view), dropped at unbind */
} fixed_ent;

typedef struct s2k {
    mpc_core c;
    int dealer_node;
    mpc_prg corr;     /* party: seed shared with the dealer */
    mpc_prg dcorr[2]; /* dealer: P0's and P1's seeds */
    fixed_ent *fx;
    size_t n_fx, cap_fx;
} s2k;

#define S(e) ((s2k *)(e)->impl)
#define TOP (1ull << 63)

/* ---------------------------------------------------------------- plumbing */

static int is_dealer(const s2k *s) { return s->c.party < 0; }

/* One round: send sl bytes to the other party and receive rl bytes from it. */
static int x2(s2k *s, const void *sb, size_t sl, void *rb, size_t rl)
{
    const void *send[MPC_NODES_MAX] = {0};
    void *recv[MPC_NODES_MAX] = {0};
    size_t slen[MPC_NODES_MAX] = {0}, rlen[MPC_NODES_MAX] = {0};
    int o = 1 - s->c.party;
    send[o] = sb;
    slen[o] = sl;
    recv[o] = rb;
    rlen[o] = rl;
    return mpc_net_round(s->c.net, send, slen, recv, rlen, 0, &s->c.err);
}

/* P1 receives a correction of n words from the dealer (offline). */
static int from_dealer(s2k *s, uint64_t *buf, size_t n)
{
    return mpc_net_recv_offline(s->c.net, s->dealer_node, buf, n * 8, &s->c.err);
}

static int to_p1(s2k *s, const uint64_t *buf, size_t n)
{
    return mpc_net_send_offline(s->c.net, 1, buf, n * 8, &s->c.err);
}

/* The dealer's end of a primitive: shape the (data-less) result, send P1 its correction. */
static int dealer_done(s2k *s, mpc_val *z, size_t n, int dom, const uint64_t *corr, size_t nc)
{
    int rc = mpc_ensure(&s->c, z, n, dom);
    return rc ? rc : to_p1(s, corr, nc);
}

/* P0 draws its part of a dealer value from its seed; P1 receives the correction. */
static int corr_last(s2k *s, uint64_t *buf, size_t n)
{
    if (s->c.party == 0) {
        mpc_prg_u64(&s->corr, buf, n);
        return MS_OK;
    }
    return from_dealer(s, buf, n);
}

static int want(s2k *s, const mpc_val *x, int dom, const char *what)
{
    if (x->dom != dom)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k %s: operand is %s, %s expected", what,
                        x->dom == DOM_BOOL ? "boolean" : "arithmetic",
                        dom == DOM_BOOL ? "boolean" : "arithmetic");
    return MS_OK;
}

/* ---------------------------------------------------------------- input / open */

static int s_input(eng *e, mpc_val *z, int owner, const uint64_t *plain)
{
    s2k *s = S(e);
    size_t n = z->n;
    int rc = mpc_ensure(&s->c, z, n, z->dom);
    if (rc || is_dealer(s))
        return rc;
    if (owner < 0 || owner > 1)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k input: owner %d is not a party", owner);
    /* COST: input: 1 round, 8n from the owner (x − r, r from the owner's PRG) (PRIMITIVES.md) */
    if (s->c.party == owner) {
        uint64_t *m = mpc_tmp(&s->c, 0, n);
        if (!m)
            return MS_ERR_NOMEM;
        mpc_prg_u64(&s->c.priv, z->s[0], n);
        for (size_t i = 0; i < n; i++)
            m[i] = z->dom == DOM_BOOL ? plain[i] ^ z->s[0][i] : plain[i] - z->s[0][i];
        return x2(s, m, n * 8, NULL, 0);
    }
    return x2(s, NULL, 0, z->s[0], n * 8);
}

static int s_open(eng *e, uint64_t *out, const mpc_val *x, int to)
{
    s2k *s = S(e);
    size_t n = x->n;
    if (is_dealer(s)) {
        if (out)
            memset(out, 0, n * 8);
        return MS_OK;
    }
    int me = s->c.party;
    /* COST: open: 1 round, 8n each way (to all) or from the other party to p (PRIMITIVES.md) */
    uint64_t *r = mpc_tmp(&s->c, 0, n);
    if (!r)
        return MS_ERR_NOMEM;
    int get = to < 0 || to == me, give = to < 0 || to != me;
    int rc = x2(s, give ? x->s[0] : NULL, give ? n * 8 : 0, get ? r : NULL, get ? n * 8 : 0);
    if (rc || !get)
        return rc;
    for (size_t i = 0; i < n; i++)
        out[i] = x->dom == DOM_BOOL ? x->s[0][i] ^ r[i] : x->s[0][i] + r[i];
    return MS_OK;
}

/* Bit 0 of a boolean x opened as SPU's semi2k B2P: the whole word (eng.h open_bit). */
static int s_open_bit(eng *e, uint64_t *out, const mpc_val *x)
{
    int rc = s_open(e, out, x, -1);
    for (size_t i = 0; !rc && out && i < x->n; i++)
        out[i] &= 1;
    return rc;
}

/* ---------------------------------------------------------------- Beaver products */

/* z = x·y (DOM_ARITH) or x & y (DOM_BOOL) with a Beaver triple (a, b, c = a·b): the same
 * draws, messages and dealer correction in both rings, only the ring operations differ. */
static int beaver(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int dom)
{
    s2k *s = S(e);
    size_t n = x->n;
    int bits = dom == DOM_BOOL;
    const char *what = bits ? "and_bb" : "mul";
    int rc = want(s, x, dom, what);
    if (!rc && y->n != n)
        rc = mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k %s: %zu %s %zu elements", what, n,
                      bits ? "&" : "×", y->n);
    uint64_t *a = mpc_tmp(&s->c, 1, n), *b = mpc_tmp(&s->c, 2, n), *c = mpc_tmp(&s->c, 3, n);
    uint64_t *snd = mpc_tmp(&s->c, 4, 2 * n), *rcv = mpc_tmp(&s->c, 5, 2 * n);
    if (rc || !a || !b || !c || !snd || !rcv)
        return rc ? rc : MS_ERR_NOMEM;
    if (is_dealer(s)) { /* COST: mul / and_bb offline: 8n dealer→P1 (c correction) */
        uint64_t *a1 = snd, *b1 = snd + n;
        mpc_prg_u64(&s->dcorr[0], a, n);
        mpc_prg_u64(&s->dcorr[0], b, n);
        mpc_prg_u64(&s->dcorr[0], c, n);
        mpc_prg_u64(&s->dcorr[1], a1, n);
        mpc_prg_u64(&s->dcorr[1], b1, n);
        if (bits)
            for (size_t i = 0; i < n; i++)
                c[i] = ((a[i] ^ a1[i]) & (b[i] ^ b1[i])) ^ c[i];
        else
            for (size_t i = 0; i < n; i++)
                c[i] = (a[i] + a1[i]) * (b[i] + b1[i]) - c[i];
        return dealer_done(s, z, n, dom, c, n);
    }
    mpc_prg_u64(&s->corr, a, n);
    mpc_prg_u64(&s->corr, b, n);
    if (bits)
        for (size_t i = 0; i < n; i++) {
            snd[i] = x->s[0][i] ^ a[i];
            snd[n + i] = y->s[0][i] ^ b[i];
        }
    else
        for (size_t i = 0; i < n; i++) {
            snd[i] = x->s[0][i] - a[i];
            snd[n + i] = y->s[0][i] - b[i];
        }
    /* COST: SPU semi2k mul_aa / and_bb: 1 round, 16n each way (x−a, y−b). c is taken after
     * the round, so P1 never waits for the dealer before sending. */
    if ((rc = x2(s, snd, 16 * n, rcv, 16 * n)) || (rc = corr_last(s, c, n)) ||
        (rc = mpc_ensure(&s->c, z, n, dom)))
        return rc;
    int p0 = s->c.party == 0;
    if (bits) {
        uint64_t m0 = p0 ? ~0ull : 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t ee = snd[i] ^ rcv[i], ff = snd[n + i] ^ rcv[n + i];
            z->s[0][i] = c[i] ^ (ee & b[i]) ^ (ff & a[i]) ^ (ee & ff & m0);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            uint64_t ee = snd[i] + rcv[i], ff = snd[n + i] + rcv[n + i];
            z->s[0][i] = c[i] + ee * b[i] + ff * a[i] + (p0 ? ee * ff : 0);
        }
    }
    return MS_OK;
}

static int s_mul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return beaver(e, z, x, y, DOM_ARITH);
}

/* z = a · bit 0 of b (SPU semi2k MulA1B, secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/semi2k/arithmetic.cc 331-371). With b = b0 ⊕ b1 and party i's y_i = b_i & 1, one
 * Beaver product of X = Σ (1 − 2y_i)·a_i and Y = Σ y_i leaves the cross terms
 * (1 − 2y_0)·a_0·y_1 + (1 − 2y_1)·a_1·y_0 once each party removes its own
 * (1 − 2y_i)·a_i·y_i and adds a_i·y_i: in all a·(y_0 + y_1 − 2y_0·y_1) = a·b. COST: as mul. */
static int s_mul_a1b(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b)
{
    s2k *s = S(e);
    size_t n = a->n;
    mpc_val X = {0}, Y = {0};
    int rc = e->vt->alloc(e, &X, n, DOM_ARITH);
    if (!rc)
        rc = e->vt->alloc(e, &Y, n, DOM_ARITH);
    uint64_t *fix = rc ? NULL : malloc(n * 8 + 8);
    if (!rc && !fix)
        rc = MS_ERR_NOMEM;
    if (!rc && !is_dealer(s)) {
        if (b->n != n || a->dom != DOM_ARITH || b->dom != DOM_BOOL)
            rc = mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k mul_a1b: bad operands");
        for (size_t i = 0; !rc && i < n; i++) {
            uint64_t y = b->s[0][i] & 1, x = a->s[0][i];
            Y.s[0][i] = y;
            X.s[0][i] = (1 - 2 * y) * x;
            fix[i] = 2 * x * y; /* a_i·y_i − (1 − 2y_i)·a_i·y_i */
        }
    }
    if (!rc)
        rc = beaver(e, z, &X, &Y, DOM_ARITH);
    if (!rc && !is_dealer(s))
        for (size_t i = 0; i < n; i++)
            z->s[0][i] += fix[i];
    free(fix);
    e->vt->release(e, &X);
    e->vt->release(e, &Y);
    return rc;
}

static int s_square(eng *e, mpc_val *z, const mpc_val *x)
{
    s2k *s = S(e);
    size_t n = x->n;
    int rc = want(s, x, DOM_ARITH, "square");
    uint64_t *a = mpc_tmp(&s->c, 1, n), *c = mpc_tmp(&s->c, 3, n);
    uint64_t *snd = mpc_tmp(&s->c, 4, n), *rcv = mpc_tmp(&s->c, 5, n);
    if (rc || !a || !c || !snd || !rcv)
        return rc ? rc : MS_ERR_NOMEM;
    if (is_dealer(s)) { /* COST: square offline: 8n dealer→P1 (a² correction) */
        mpc_prg_u64(&s->dcorr[0], a, n);
        mpc_prg_u64(&s->dcorr[0], c, n);
        mpc_prg_u64(&s->dcorr[1], snd, n);
        for (size_t i = 0; i < n; i++)
            c[i] = (a[i] + snd[i]) * (a[i] + snd[i]) - c[i];
        return dealer_done(s, z, n, DOM_ARITH, c, n);
    }
    mpc_prg_u64(&s->corr, a, n);
    for (size_t i = 0; i < n; i++)
        snd[i] = x->s[0][i] - a[i];
    /* COST: SPU semi2k square: 1 round, 8n each way (x−a) */
    if ((rc = x2(s, snd, 8 * n, rcv, 8 * n)) || (rc = corr_last(s, c, n)) ||
        (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    int p0 = s->c.party == 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t ee = snd[i] + rcv[i];
        z->s[0][i] = c[i] + 2 * ee * a[i] + (p0 ? ee * ee : 0);
    }
    return MS_OK;
}

static int s_and(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return beaver(e, z, x, y, DOM_BOOL);
}

/* ---------------------------------------------------------------- matmul with beaver cache */

static fixed_ent *fixed_find(s2k *s, uint32_t id)
{
    for (size_t i = 0; i < s->n_fx; i++)
        if (s->fx[i].id == id)
            return &s->fx[i];
    return NULL;
}

/* Opens Y − B for a fixed operand once (setup round). */
static int fixed_setup(s2k *s, uint32_t id, const char *name, const mpc_val *y, fixed_ent **out)
{
    if (ms_grow(&s->fx, &s->cap_fx, s->n_fx, sizeof *s->fx, 16))
        return mpc_fail(&s->c, MS_ERR_NOMEM, "semi2k: out of memory for the beaver cache");
    size_t n = y->n;
    fixed_ent *f = &s->fx[s->n_fx];
    f->id = id;
    f->derived = 0;
    snprintf(f->name, sizeof f->name, "%s", name ? name : "");
    f->n = n;
    f->B = malloc(n * 8);
    f->F = is_dealer(s) ? NULL : malloc(n * 8);
    uint64_t *r = mpc_tmp(&s->c, 5, n);
    if (!f->B || (!is_dealer(s) && !f->F) || !r) {
        free(f->B);
        free(f->F);
        return mpc_fail(&s->c, MS_ERR_NOMEM, "semi2k: out of memory for the beaver cache");
    }
    int rc = MS_OK;
    if (is_dealer(s)) {
        mpc_prg_u64(&s->dcorr[0], f->B, n);
        mpc_prg_u64(&s->dcorr[1], r, n);
        for (size_t i = 0; i < n; i++)
            f->B[i] += r[i];
    } else {
        mpc_prg_u64(&s->corr, f->B, n);
        for (size_t i = 0; i < n; i++)
            f->F[i] = y->s[0][i] - f->B[i];
        /* COST: SPU semi2k BeaverCache: F = B − mask opened once at setup, 8·rows·cols each way */
        const void *send[MPC_NODES_MAX] = {0};
        void *recv[MPC_NODES_MAX] = {0};
        size_t sl[MPC_NODES_MAX] = {0}, rl[MPC_NODES_MAX] = {0};
        int o = 1 - s->c.party;
        send[o] = f->F;
        sl[o] = rl[o] = n * 8;
        recv[o] = r;
        rc = mpc_net_round(s->c.net, send, sl, recv, rl, 1, &s->c.err);
        for (size_t i = 0; !rc && i < n; i++)
            f->F[i] += r[i];
    }
    if (rc) {
        free(f->B);
        free(f->F);
        return rc;
    }
    s->n_fx++;
    *out = f;
    return MS_OK;
}

/* The shape of one matmul call: batch instances of (m×k)·(k×n); y holds yb instances. */
typedef struct mm_shape {
    uint32_t batch, m, k, n, yb;
    int tb;
    size_t nx, ny, nz;
} mm_shape;

static int oom(s2k *s) { return mpc_fail(&s->c, MS_ERR_NOMEM, "semi2k matmul: out of memory"); }

/* Dealer: A = A0 + A1, B = B0 + B1 (or the cached mask), C1 = A·B − C0 to P1.
 * COST: matmul offline: 8bmn dealer→P1 (C correction). */
static int mm_dealer(s2k *s, mpc_val *z, const mm_shape *sh, const fixed_ent *f)
{
    uint64_t *A = malloc(sh->nx * 8 + 8), *A1 = malloc(sh->nx * 8 + 8), *C = calloc(sh->nz + 1, 8);
    uint64_t *C0 = malloc(sh->nz * 8 + 8), *B = f ? f->B : malloc(sh->ny * 8 + 8);
    uint64_t *B1 = f ? NULL : malloc(sh->ny * 8 + 8);
    int rc = (!A || !A1 || !C || !C0 || !B || (!f && !B1)) ? oom(s) : MS_OK;
    if (!rc) {
        mpc_prg_u64(&s->dcorr[0], A, sh->nx); /* P0's draw order: A, B, C */
        if (!f)
            mpc_prg_u64(&s->dcorr[0], B, sh->ny);
        mpc_prg_u64(&s->dcorr[0], C0, sh->nz);
        mpc_prg_u64(&s->dcorr[1], A1, sh->nx); /* P1's: A, B */
        for (size_t i = 0; i < sh->nx; i++)
            A[i] += A1[i];
        if (!f) {
            mpc_prg_u64(&s->dcorr[1], B1, sh->ny);
            for (size_t i = 0; i < sh->ny; i++)
                B[i] += B1[i];
        }
        mpc_mm_batch(C, A, B, sh->batch, sh->m, sh->k, sh->n, sh->tb, sh->yb);
        for (size_t i = 0; i < sh->nz; i++)
            C[i] -= C0[i];
        rc = dealer_done(s, z, sh->nz, DOM_ARITH, C, sh->nz);
    }
    free(A), free(A1), free(C), free(C0), free(B1);
    if (!f)
        free(B);
    return rc;
}

/* Party: open E = X − A (and F = Y − B unless cached), then
 * Z = C + E·B_i + A_i·F (+ E·F at P0), computed as P0: E·(B0 + F) + A0·F, P1: E·B1 + A1·F.
 * With the beaver cache F is known before the round: A_i·F and B0 + F are done first, so only
 * E·B' is left once E arrives. */
static int mm_party(s2k *s, mpc_val *z, const mpc_val *x, const mpc_val *y, const mm_shape *sh,
                    const fixed_ent *f)
{
    size_t nx = sh->nx, ny = sh->ny, msg = (nx + (f ? 0 : ny)) * 8;
    uint64_t *A = malloc(nx * 8 + 8), *B = f ? f->B : malloc(ny * 8 + 8),
             *C = calloc(sh->nz + 1, 8);
    uint64_t *snd = malloc(msg + 8), *rcv = malloc(msg + 8), *Bp = NULL;
    int rc = (!A || !B || !C || !snd || !rcv) ? oom(s) : MS_OK;
    if (rc)
        goto out;
    mpc_prg_u64(&s->corr, A, nx);
    if (!f)
        mpc_prg_u64(&s->corr, B, ny);
    for (size_t i = 0; i < nx; i++)
        snd[i] = x->s[0][i] - A[i];
    for (size_t i = 0; !f && i < ny; i++)
        snd[nx + i] = y->s[0][i] - B[i];
    if (f)
        mpc_mm_batch(C, A, f->F, sh->batch, sh->m, sh->k, sh->n, sh->tb, sh->yb);
    /* COST: SPU semi2k mmul_aa: 1 round, 8(b·mk + |y|) each way; with the beaver cache 8bmk */
    if ((rc = x2(s, snd, msg, rcv, msg)))
        goto out;
    for (size_t i = 0; i < msg / 8; i++)
        rcv[i] += snd[i]; /* E (then F) opened */
    const uint64_t *E = rcv, *F = f ? f->F : rcv + nx;
    if (!f)
        mpc_mm_batch(C, A, F, sh->batch, sh->m, sh->k, sh->n, sh->tb, sh->yb);
    if (s->c.party == 0) {
        if (!(Bp = malloc(ny * 8 + 8))) {
            rc = oom(s);
            goto out;
        }
        for (size_t i = 0; i < ny; i++)
            Bp[i] = B[i] + F[i];
    }
    mpc_mm_batch(C, E, Bp ? Bp : B, sh->batch, sh->m, sh->k, sh->n, sh->tb, sh->yb);
    /* the triple's C: P0 draws it from its seed, P1 receives the dealer's correction (nothing
     * else is drawn in between, so the stream order is that of the dealer) */
    if ((rc = mpc_ensure(&s->c, z, sh->nz, DOM_ARITH)) || (rc = corr_last(s, z->s[0], sh->nz)))
        goto out;
    for (size_t i = 0; i < sh->nz; i++)
        z->s[0][i] += C[i];
out:
    free(A), free(C), free(snd), free(rcv), free(Bp);
    if (!f)
        free(B);
    return rc;
}

/* Beaver matrix triple (A, B, C = A·B). y holds yb instances shared by consecutive instances of
 * x (op.h); its mask is opened once whatever the sharing: 8(b·mk + |y|) each way, or 8b·mk with
 * the beaver cache (PRIMITIVES.md). */
static int s_matmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t batch,
                    uint32_t m, uint32_t k, uint32_t n, uint32_t flags, uint32_t y_id)
{
    s2k *s = S(e);
    mm_shape sh = {batch,
                   m,
                   k,
                   n,
                   0,
                   (flags & OPF_TRANS_B) != 0,
                   (size_t)batch * m * k,
                   y->n,
                   (size_t)batch * m * n};
    sh.yb = mpc_mm_y_inst(y->n, batch, (size_t)k * n);
    if (x->n < sh.nx || !sh.yb)
        return mpc_fail(&s->c, MS_ERR_INTERNAL,
                        "semi2k matmul: %u×(%u×%u)·(%u×%u) with operands of %zu and %zu elements",
                        batch, m, k, k, n, x->n, y->n);
    fixed_ent *f = NULL;
    int rc;
    if ((flags & OPF_FIXED_B) && e->cfg.beaver_cache && !(f = fixed_find(s, y_id)) &&
        (rc = fixed_setup(s, y_id, NULL, y, &f)))
        return rc;
    if (f && f->n != sh.ny)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k matmul: fixed operand %u changed size",
                        y_id);
    return is_dealer(s) ? mm_dealer(s, z, &sh, f) : mm_party(s, z, x, y, &sh, f);
}

/* ---------------------------------------------------------------- truncation, b2a */

static int s_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    s2k *s = S(e);
    size_t n = x->n;
    if (bits <= 0 || bits >= 62)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k trunc: %d bits out of range", bits);
    if (e->kv.trunc == KV_TRUNC_LOCAL) { /* COST: SecureML local truncation: 0 rounds, 0 bytes */
        int rc = mpc_ensure(&s->c, z, n, DOM_ARITH);
        if (rc || is_dealer(s))
            return rc;
        for (size_t i = 0; i < n; i++)
            z->s[0][i] = s->c.party == 0 ? mpc_sar(x->s[0][i], bits) : -mpc_sar(-x->s[0][i], bits);
        return MS_OK;
    }
    uint64_t *r = mpc_tmp(&s->c, 1, n), *bm = mpc_tmp(&s->c, 2, 2 * n), *rp;
    uint64_t *snd = mpc_tmp(&s->c, 4, n), *rcv = mpc_tmp(&s->c, 5, n);
    if (!r || !bm || !snd || !rcv)
        return MS_ERR_NOMEM;
    rp = bm + n;
    int rc;
    if (is_dealer(s)) { /* COST: TruncPr offline: 16n dealer→P1 (msb(r), r' corrections) */
        mpc_prg_u64(&s->dcorr[0], r, n);
        mpc_prg_u64(&s->dcorr[0], bm, n);
        mpc_prg_u64(&s->dcorr[0], rp, n);
        mpc_prg_u64(&s->dcorr[1], snd, n);
        for (size_t i = 0; i < n; i++) {
            uint64_t rr = r[i] + snd[i];
            bm[i] = (rr >> 63) - bm[i];
            rp[i] = ((rr & ~TOP) >> bits) - rp[i];
        }
        return dealer_done(s, z, n, DOM_ARITH, bm, 2 * n);
    }
    int p0 = s->c.party == 0;
    mpc_prg_u64(&s->corr, r, n);
    for (size_t i = 0; i < n; i++)
        snd[i] = x->s[0][i] + r[i] + (p0 ? 1ull << 62 : 0);
    /* COST: TruncPr (eprint 2020/338 §5.1): 1 round, 8n each way, c = x + 2^(ℓ−2) + r */
    if ((rc = x2(s, snd, 8 * n, rcv, 8 * n)) || (rc = corr_last(s, bm, 2 * n)) ||
        (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    uint64_t off = 1ull << (62 - bits), hi = 1ull << (63 - bits);
    for (size_t i = 0; i < n; i++) {
        uint64_t c = snd[i] + rcv[i], cm = c >> 63;
        uint64_t w = (p0 ? cm : 0) + (1 - 2 * cm) * bm[i];
        z->s[0][i] = (p0 ? ((c & ~TOP) >> bits) - off : 0) - rp[i] + w * hi;
    }
    return MS_OK;
}

static int s_b2a(eng *e, mpc_val *z, const mpc_val *x)
{
    s2k *s = S(e);
    size_t n = x->n;
    int rc = want(s, x, DOM_BOOL, "b2a");
    uint64_t *rb = mpc_tmp(&s->c, 1, n), *ra = mpc_tmp(&s->c, 2, n);
    uint64_t *snd = mpc_tmp(&s->c, 4, n), *rcv = mpc_tmp(&s->c, 5, n);
    if (rc || !rb || !ra || !snd || !rcv)
        return rc ? rc : MS_ERR_NOMEM;
    if (is_dealer(s)) { /* COST: b2a offline: 8n dealer→P1 (arithmetic share of r) */
        mpc_prg_u64(&s->dcorr[0], rb, n);
        mpc_prg_u64(&s->dcorr[0], ra, n);
        mpc_prg_u64(&s->dcorr[1], snd, n);
        for (size_t i = 0; i < n; i++)
            ra[i] = ((rb[i] ^ snd[i]) & 1) - ra[i];
        return dealer_done(s, z, n, DOM_ARITH, ra, n);
    }
    mpc_prg_u64(&s->corr, rb, n);
    for (size_t i = 0; i < n; i++)
        snd[i] = (x->s[0][i] ^ rb[i]) & 1;
    /* COST: SPU semi2k B2A_Randbit: 1 round, 8n each way (c = x ^ r) */
    if ((rc = x2(s, snd, 8 * n, rcv, 8 * n)) || (rc = corr_last(s, ra, n)) ||
        (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    int p0 = s->c.party == 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = (snd[i] ^ rcv[i]) & 1;
        z->s[0][i] = (p0 ? c : 0) + (1 - 2 * c) * ra[i];
    }
    return MS_OK;
}

/* SPU's eqz mask (eng.h eqz_spu): r in both sharings from the dealer (P0's parts from its
 * seed, P1's arithmetic part a correction), c = x + r opened, z = ~(c ^ r) as P0: ~c ^ rb0,
 * P1: rb1. */
static int s_eqz_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    s2k *s = S(e);
    size_t n = x->n;
    int rc = want(s, x, DOM_ARITH, "eqz");
    uint64_t *rb = mpc_tmp(&s->c, 1, n), *ra = mpc_tmp(&s->c, 2, n);
    uint64_t *snd = mpc_tmp(&s->c, 4, n), *rcv = mpc_tmp(&s->c, 5, n);
    if (rc || !rb || !ra || !snd || !rcv)
        return rc ? rc : MS_ERR_NOMEM;
    if (is_dealer(s)) { /* COST: eqz offline: 8n dealer→P1 (P1's arithmetic part of r) */
        mpc_prg_u64(&s->dcorr[0], rb, n);
        mpc_prg_u64(&s->dcorr[0], ra, n);
        mpc_prg_u64(&s->dcorr[1], snd, n);
        for (size_t i = 0; i < n; i++)
            ra[i] = (rb[i] ^ snd[i]) - ra[i];
        return dealer_done(s, z, n, DOM_BOOL, ra, n);
    }
    mpc_prg_u64(&s->corr, rb, n);
    if ((rc = corr_last(s, ra, n)))
        return rc;
    for (size_t i = 0; i < n; i++)
        snd[i] = x->s[0][i] + ra[i];
    /* COST: SPU semi2k eqz: 1 round, 8n each way (c = x + r) */
    if ((rc = x2(s, snd, 8 * n, rcv, 8 * n)) || (rc = mpc_ensure(&s->c, z, n, DOM_BOOL)))
        return rc;
    int p0 = s->c.party == 0;
    for (size_t i = 0; i < n; i++)
        z->s[0][i] = p0 ? ~(snd[i] + rcv[i]) ^ rb[i] : rb[i];
    return MS_OK;
}

/* ---------------------------------------------------------------- packed circuits */

static int from_dealer_bytes(s2k *s, void *buf, size_t len)
{
    return mpc_net_recv_offline(s->c.net, s->dealer_node, buf, len, &s->c.err);
}

/* The scratch of one and_bits: n words, B bytes of one packed word-set, msg of a message; the
 * triple (a, b, c) and the message buffers. */
typedef struct ab_ctx {
    size_t n, B, msg;
    uint64_t mask;
    uint64_t *a, *b, *c;
    uint8_t *snd, *rcv;
} ab_ctx;

/* The dealer's part: the triple from both seeds, c1 = c ^ c0 sent to P1 packed. */
static int and_bits_dealer(s2k *s, mpc_val *z, const ab_ctx *k, int priv)
{
    size_t n = k->n, pos = 0;
    uint64_t *a = k->a, *b = k->b, *c = k->c;
    if (priv) {
        mpc_prg_u64(&s->dcorr[0], a, n);
        mpc_prg_u64(&s->dcorr[1], b, n);
        mpc_prg_u64(&s->dcorr[0], c, n);
        for (size_t i = 0; i < n; i++)
            c[i] ^= a[i] & b[i];
    } else {
        uint64_t *a1 = mpc_tmp(&s->c, 0, 2 * n), *b1;
        if (!a1)
            return MS_ERR_NOMEM;
        b1 = a1 + n;
        mpc_prg_u64(&s->dcorr[0], a, n);
        mpc_prg_u64(&s->dcorr[0], b, n);
        mpc_prg_u64(&s->dcorr[0], c, n);
        mpc_prg_u64(&s->dcorr[1], a1, n);
        mpc_prg_u64(&s->dcorr[1], b1, n);
        for (size_t i = 0; i < n; i++)
            c[i] ^= (a[i] ^ a1[i]) & (b[i] ^ b1[i]);
    }
    mpc_pack_bits(k->snd, &pos, c, n, k->mask);
    int rc = mpc_ensure(&s->c, z, n, DOM_BOOL);
    if (rc)
        return rc;
    return mpc_net_send_offline(s->c.net, 1, k->snd, k->B, &s->c.err);
}

/* P1's share c1 of the triple's product, packed from the dealer, into w (scratch slot 4). */
static int c1_from_dealer(s2k *s, uint64_t *w, const ab_ctx *k)
{
    uint8_t *cb = mpc_tmp_bytes(&s->c, 4, k->B);
    size_t pos = 0;
    int rc;
    if (!cb || (rc = from_dealer_bytes(s, cb, k->B)))
        return cb ? rc : MS_ERR_NOMEM;
    mpc_unpack_bits(w, k->n, k->mask, cb, &pos);
    return MS_OK;
}

/* priv: x is P0's own word, y P1's; P0 opens D = x ^ a, P1 opens E = y ^ b. */
static int and_bits_priv(s2k *s, mpc_val *z, const mpc_val *x, const mpc_val *y, const ab_ctx *k)
{
    size_t n = k->n, pos = 0;
    uint64_t *a = k->a, *b = k->b, *c = k->c, mask = k->mask;
    int p0 = s->c.party == 0, rc;
    /* P0 draws a (then c0 after the round), P1 draws b */
    mpc_prg_u64(&s->corr, p0 ? a : b, n);
    for (size_t i = 0; i < n; i++)
        c[i] = p0 ? x->s[0][i] ^ a[i] : y->s[0][i] ^ b[i]; /* D at P0, E at P1 */
    mpc_pack_bits(k->snd, &pos, c, n, mask);
    /* COST: and_bits priv: 1 round, n·⌈pc/8⌉ each way */
    if ((rc = x2(s, k->snd, k->B, k->rcv, k->B)))
        return rc;
    uint64_t *o = mpc_tmp(&s->c, 0, n); /* the other party's opened word */
    if (!o)
        return MS_ERR_NOMEM;
    pos = 0;
    mpc_unpack_bits(o, n, mask, k->rcv, &pos);
    if ((rc = mpc_ensure(&s->c, z, n, DOM_BOOL)))
        return rc;
    if (p0) {
        mpc_prg_u64(&s->corr, b, n); /* c0 */
        for (size_t i = 0; i < n; i++)
            z->s[0][i] = ((c[i] & o[i]) ^ (a[i] & o[i]) ^ b[i]) & mask;
        return MS_OK;
    }
    if ((rc = c1_from_dealer(s, a, k)))
        return rc;
    for (size_t i = 0; i < n; i++)
        z->s[0][i] = ((o[i] & b[i]) ^ a[i]) & mask;
    return MS_OK;
}

/* Both shared: both parties open D = x ^ a and E = y ^ b, an element's bits together. */
static int and_bits_open(s2k *s, mpc_val *z, const mpc_val *x, const mpc_val *y, const ab_ctx *k)
{
    size_t n = k->n, pos = 0;
    uint64_t *a = k->a, *b = k->b, *c = k->c, mask = k->mask;
    int p0 = s->c.party == 0, rc;
    uint64_t *D = mpc_tmp(&s->c, 0, 2 * n), *E;
    if (!D)
        return MS_ERR_NOMEM;
    E = D + n;
    mpc_prg_u64(&s->corr, a, n);
    mpc_prg_u64(&s->corr, b, n);
    for (size_t i = 0; i < n; i++) {
        c[i] = (x->s[0][i] ^ a[i]) & mask; /* own share of D, then of E */
        E[i] = (y->s[0][i] ^ b[i]) & mask;
    }
    mpc_pack2_bits(k->snd, &pos, c, E, n, mask);
    /* COST: and_bits: 1 round, n·⌈2·pc/8⌉ each way (an element's D and E bits together) */
    if ((rc = x2(s, k->snd, k->msg, k->rcv, k->msg)))
        return rc;
    uint64_t *mine_e = mpc_tmp(&s->c, 4, n); /* snd is no longer needed */
    if (!mine_e)
        return MS_ERR_NOMEM;
    memcpy(mine_e, E, n * 8);
    size_t pr = 0;
    mpc_unpack2_bits(D, E, n, mask, k->rcv, &pr);
    for (size_t i = 0; i < n; i++) {
        D[i] ^= c[i];
        E[i] ^= mine_e[i];
    }
    if ((rc = mpc_ensure(&s->c, z, n, DOM_BOOL)))
        return rc;
    if (p0)
        mpc_prg_u64(&s->corr, c, n);
    else if ((rc = c1_from_dealer(s, c, k)))
        return rc;
    uint64_t all = p0 ? ~0ull : 0;
    for (size_t i = 0; i < n; i++)
        z->s[0][i] = (c[i] ^ (D[i] & b[i]) ^ (E[i] & a[i]) ^ (D[i] & E[i] & all)) & mask;
    return MS_OK;
}

/* Beaver AND on the bits of mask with packed messages (PRIMITIVES.md and_bits).
 * priv: x is P0's own word (P1's share 0), y P1's own; the triple is a at P0, b at P1,
 * c = a & b shared; P0 opens D = x ^ a, P1 opens E = y ^ b; z0 = D&E ^ a&E ^ c0,
 * z1 = D&b ^ c1. Otherwise the usual triple with both D and E opened by both. */
static int s_and_bits(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint64_t mask,
                      int priv)
{
    s2k *s = S(e);
    size_t n = x->n;
    int pc = __builtin_popcountll(mask);
    int rc = want(s, x, DOM_BOOL, "and_bits");
    if (!rc && y->n != n)
        rc = mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k and_bits: %zu & %zu elements", n, y->n);
    ab_ctx k = {.n = n, .B = mpc_packed_bytes(n, pc), .mask = mask};
    k.msg = priv ? k.B : mpc_packed_bytes(n, 2 * pc);
    k.a = mpc_tmp(&s->c, 1, n), k.b = mpc_tmp(&s->c, 2, n), k.c = mpc_tmp(&s->c, 3, n);
    k.snd = mpc_tmp_bytes(&s->c, 4, k.msg), k.rcv = mpc_tmp_bytes(&s->c, 5, k.msg);
    if (rc || !k.a || !k.b || !k.c || !k.snd || !k.rcv)
        return rc ? rc : MS_ERR_NOMEM;
    if (is_dealer(s)) /* COST: and_bits offline: n·⌈pc/8⌉ dealer→P1 (c1, packed) */
        return and_bits_dealer(s, z, &k, priv);
    return priv ? and_bits_priv(s, z, x, y, &k) : and_bits_open(s, z, x, y, &k);
}

/* a = x0, b = x1 as boolean words (each the other party's share 0), masked to bits: local. */
static int s_bool_pair(eng *e, mpc_val *a, mpc_val *b, const mpc_val *x, int bits)
{
    s2k *s = S(e);
    size_t n = x->n;
    int rc = mpc_ensure(&s->c, a, n, DOM_BOOL);
    if (!rc)
        rc = mpc_ensure(&s->c, b, n, DOM_BOOL);
    if (rc || is_dealer(s))
        return rc;
    uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    int p0 = s->c.party == 0;
    for (size_t i = 0; i < n; i++) {
        a->s[0][i] = p0 ? x->s[0][i] & m : 0;
        b->s[0][i] = p0 ? 0 : x->s[0][i] & m;
    }
    return MS_OK;
}

/* daBit b2a (Rotaru–Wood): as s_b2a with the masked bit c = x ^ r opened packed. */
static int s_b2a_bit(eng *e, mpc_val *z, const mpc_val *x)
{
    s2k *s = S(e);
    size_t n = x->n, B = mpc_packed_bytes(n, 1), pos = 0;
    int rc = want(s, x, DOM_BOOL, "b2a_bit");
    uint64_t *rb = mpc_tmp(&s->c, 1, n), *ra = mpc_tmp(&s->c, 2, n), *cw = mpc_tmp(&s->c, 3, n);
    uint8_t *snd = mpc_tmp_bytes(&s->c, 4, B), *rcv = mpc_tmp_bytes(&s->c, 5, B);
    if (rc || !rb || !ra || !cw || !snd || !rcv)
        return rc ? rc : MS_ERR_NOMEM;
    if (is_dealer(s)) { /* COST: b2a_bit offline: 8n dealer→P1 (arithmetic share of r) */
        mpc_prg_u64(&s->dcorr[0], rb, n);
        mpc_prg_u64(&s->dcorr[0], ra, n);
        mpc_prg_u64(&s->dcorr[1], cw, n);
        for (size_t i = 0; i < n; i++)
            ra[i] = ((rb[i] ^ cw[i]) & 1) - ra[i];
        return dealer_done(s, z, n, DOM_ARITH, ra, n);
    }
    mpc_prg_u64(&s->corr, rb, n);
    for (size_t i = 0; i < n; i++)
        cw[i] = (x->s[0][i] ^ rb[i]) & 1;
    mpc_pack_bits(snd, &pos, cw, n, 1);
    /* COST: b2a_bit: 1 round, n each way */
    if ((rc = x2(s, snd, B, rcv, B)) || (rc = corr_last(s, ra, n)) ||
        (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    pos = 0;
    mpc_unpack_bits(rb, n, 1, rcv, &pos);
    int p0 = s->c.party == 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = cw[i] ^ rb[i];
        z->s[0][i] = (p0 ? c : 0) + (1 - 2 * c) * ra[i];
    }
    return MS_OK;
}

/* SPU semi2k B2A_Randbit on the low bits of a word
 * (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87 libspu/mpc/semi2k/conversion.cc
 * 116-200): the dealer's random word r, boolean-shared by the two seeds, with an arithmetic sharing
 * of each of its bits; c = x ^ r opened in the storage type of bits (B bytes, boolean.cc 48-64),
 * then z = Σ 2^j (c_j + (1 − 2c_j)·r_j). */
static int s_b2a_word(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    s2k *s = S(e);
    size_t n = x->n, nb = n * (size_t)bits;
    size_t B = bits <= 8 ? 1 : bits <= 16 ? 2 : bits <= 32 ? 4 : 8;
    uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    int rc = want(s, x, DOM_BOOL, "b2a_word");
    uint64_t *rb = mpc_tmp(&s->c, 1, n), *cw = mpc_tmp(&s->c, 3, n);
    uint8_t *snd = mpc_tmp_bytes(&s->c, 4, n * B), *rcv = mpc_tmp_bytes(&s->c, 5, n * B);
    uint64_t *ra = malloc(nb * 8 + 8);
    if (rc || !rb || !cw || !snd || !rcv || !ra) {
        free(ra);
        return rc ? rc : MS_ERR_NOMEM;
    }
    if (is_dealer(s)) { /* COST: b2a_word offline: 8n·bits dealer→P1 (the bits' shares) */
        mpc_prg_u64(&s->dcorr[0], rb, n);
        mpc_prg_u64(&s->dcorr[0], ra, nb);
        mpc_prg_u64(&s->dcorr[1], cw, n);
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < bits; j++)
                ra[i * bits + j] = (((rb[i] ^ cw[i]) >> j) & 1) - ra[i * bits + j];
        rc = dealer_done(s, z, n, DOM_ARITH, ra, nb);
        free(ra);
        return rc;
    }
    mpc_prg_u64(&s->corr, rb, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t c = (x->s[0][i] ^ rb[i]) & m;
        for (size_t k = 0; k < B; k++)
            snd[i * B + k] = (uint8_t)(c >> (8 * k));
    }
    /* COST: b2a_word: 1 round, n·B each way */
    if ((rc = x2(s, snd, n * B, rcv, n * B)) || (rc = corr_last(s, ra, nb)) ||
        (rc = mpc_ensure(&s->c, z, n, DOM_ARITH))) {
        free(ra);
        return rc;
    }
    int p0 = s->c.party == 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c = 0, v = 0;
        for (size_t k = 0; k < B; k++)
            c |= (uint64_t)(snd[i * B + k] ^ rcv[i * B + k]) << (8 * k);
        for (int j = 0; j < bits; j++) {
            uint64_t cj = (c >> j) & 1;
            v += ((p0 ? cj : 0) + (1 - 2 * cj) * ra[i * bits + j]) << j;
        }
        z->s[0][i] = v;
    }
    free(ra);
    return MS_OK;
}

static int s_bool_components(eng *e, mpc_val comps[3], int *nc, const mpc_val *x)
{
    s2k *s = S(e);
    *nc = 2;
    for (int j = 0; j < 2; j++) {
        int rc = mpc_ensure(&s->c, &comps[j], x->n, DOM_BOOL); /* the caller allocated them */
        if (rc)
            return rc;
        if (!is_dealer(s))
            memset(comps[j].s[0], 0, x->n * 8);
        if (!is_dealer(s) && s->c.party == j)
            memcpy(comps[j].s[0], x->s[0], x->n * 8);
    }
    return MS_OK;
}

/* Shuffle (eng.h), SPU semi2k PermAM: π = π1∘π0, π_o drawn by P_o from the seed it shares
 * with the dealer. Round o applies π_o with the dealer's pair: A = A0 + A1 and C0 from the
 * seeds, C1 = π_o(A) − C0 sent to P1; the other party sends P_o its share of x − A, P_o
 * takes π_o(x − A) + C_o, the other C_u. Draws per round: P0's seed A0, [π_o if o = 0], C0;
 * P1's seed A1, [π_o if o = 1] — the dealer draws the same. */

/* One shuffle's vectors: n elements in parts of M, permuted in runs of seg; A and C the
 * dealer's pair, t and r the messages (the dealer keeps A1 in t), cur this party's running
 * share, w the seed of round o's permutation. */
typedef struct s_shuf {
    size_t n, M, seg, parts;
    uint64_t *A, *C, *t, *r, *cur, *w;
    uint32_t *pi;
} s_shuf;

/* dst = π_o(src), π_o the permutation drawn as seed w, applied to every part. */
static void s_shuf_perm(s_shuf *h, uint64_t *dst, const uint64_t *src)
{
    mpc_perm_from(h->pi, h->w, h->M, h->seg);
    mpc_perm_apply(dst, src, h->pi, h->M, h->parts);
}

/* The dealer's round o: A = A0 + A1 and C0 drawn as the parties draw them, C1 = π_o(A) − C0
 * to P1. COST: shuffle offline: 8n dealer→P1 per round */
static int s_shuf_deal(s2k *s, s_shuf *h, int o)
{
    size_t n = h->n;
    uint64_t *A = h->A, *A1 = h->t;
    mpc_prg_u64(&s->dcorr[0], A, n);
    if (o == 0)
        mpc_prg_u64(&s->dcorr[0], h->w, h->M);
    mpc_prg_u64(&s->dcorr[0], h->C, n);
    mpc_prg_u64(&s->dcorr[1], A1, n);
    if (o == 1)
        mpc_prg_u64(&s->dcorr[1], h->w, h->M);
    for (size_t i = 0; i < n; i++)
        A[i] += A1[i];
    s_shuf_perm(h, h->r, A);
    for (size_t i = 0; i < n; i++)
        h->r[i] -= h->C[i];
    return to_p1(s, h->r, n);
}

/* A party's round o: the other party sends P_o its share minus A; P_o's share becomes
 * π_o(x − A) + C_o, the other's C_u (P1's C from the dealer). */
static int s_shuf_round(s2k *s, s_shuf *h, int o)
{
    size_t n = h->n;
    uint64_t *t = h->t, *r = h->r, *cur = h->cur, *C = h->C;
    int me = s->c.party, own = me == o;
    mpc_prg_u64(&s->corr, h->A, n);
    if (own)
        mpc_prg_u64(&s->corr, h->w, h->M);
    if (me == 0)
        mpc_prg_u64(&s->corr, C, n);
    for (size_t i = 0; i < n; i++)
        t[i] = cur[i] - h->A[i];
    /* COST: SPU semi2k SecureInvPerm: 1 round, 8n from the other party to P_o */
    int rc = x2(s, own ? NULL : t, own ? 0 : 8 * n, own ? r : NULL, own ? 8 * n : 0);
    if (!rc && me == 1)
        rc = from_dealer(s, C, n);
    if (rc)
        return rc;
    if (!own) {
        memcpy(cur, C, n * 8);
        return MS_OK;
    }
    for (size_t i = 0; i < n; i++)
        t[i] += r[i];
    s_shuf_perm(h, cur, t);
    for (size_t i = 0; i < n; i++)
        cur[i] += C[i];
    return MS_OK;
}

static int s_shuffle(eng *e, mpc_val *z, const mpc_val *x, size_t seg, size_t parts)
{
    s2k *s = S(e);
    size_t n = x->n, M = parts ? n / parts : 0;
    if (!seg || !parts || M * parts != n || M % seg)
        return mpc_fail(&s->c, MS_ERR_INTERNAL,
                        "semi2k shuffle: %zu elements in %zu parts of runs of %zu", n, parts, seg);
    int rc = is_dealer(s) ? MS_OK : want(s, x, DOM_ARITH, "shuffle");
    uint64_t *buf = malloc((5 * n + M + 1) * sizeof *buf);
    uint32_t *pi = malloc((M + 1) * sizeof *pi);
    if (rc || !buf || !pi) {
        free(buf), free(pi);
        return rc ? rc : MS_ERR_NOMEM;
    }
    s_shuf h = {n,           M,           seg,         parts,       buf, buf + n,
                buf + 2 * n, buf + 3 * n, buf + 4 * n, buf + 5 * n, pi};
    if (!is_dealer(s))
        memcpy(h.cur, x->s[0], n * 8);
    for (int o = 0; o < 2 && !rc; o++)
        rc = is_dealer(s) ? s_shuf_deal(s, &h, o) : s_shuf_round(s, &h, o);
    if (!rc)
        rc = mpc_ensure(&s->c, z, n, DOM_ARITH);
    if (!rc && !is_dealer(s))
        memcpy(z->s[0], h.cur, n * 8);
    free(buf), free(pi);
    return rc;
}

/* A public count (eng.h): P0 tells the dealer, outside the rounds. */
static int s_sync_public(eng *e, uint64_t *v)
{
    s2k *s = S(e);
    int rc = MS_OK;
    if (is_dealer(s))
        rc = mpc_net_recv_offline(s->c.net, 0, v, sizeof *v, &s->c.err);
    else if (s->c.party == 0)
        rc = mpc_net_send_offline(s->c.net, s->dealer_node, v, sizeof *v, &s->c.err);
    s->c.pub_n++, s->c.pub_sum += *v;
    return rc;
}

/* A value revealed to both parties, for the dealer (eng.h publish): P0 sends it outside the
 * rounds; the dealer keeps it as plaintext in z->s[0], as a public tensor it is bound. */
static int s_publish(eng *e, mpc_val *z)
{
    s2k *s = S(e);
    size_t n = z->n;
    if (is_dealer(s)) {
        if (!z->s[0] && !(z->s[0] = calloc(n ? n : 1, 8)))
            return mpc_fail(&s->c, MS_ERR_NOMEM, "semi2k: out of memory for a revealed value");
        return n ? mpc_net_recv_offline(s->c.net, 0, z->s[0], n * 8, &s->c.err) : MS_OK;
    }
    if (s->c.party == 0 && n)
        return mpc_net_send_offline(s->c.net, s->dealer_node, z->s[0], n * 8, &s->c.err);
    return MS_OK;
}

/* A public re-layout of a fixed operand (eng.h fixed_view): the new tensor's cached mask and
 * opened F are the source's taken at idx — local on every node (the dealer's whole mask too).
 * Such an entry has no name: it is dropped when the program's ids are unbound. */
static int s_fixed_view(eng *e, uint32_t z_id, uint32_t y_id, const uint32_t *idx, size_t n)
{
    s2k *s = S(e);
    fixed_ent *src = e->cfg.beaver_cache ? fixed_find(s, y_id) : NULL;
    if (!src || !idx)
        return MS_OK;
    if (ms_grow(&s->fx, &s->cap_fx, s->n_fx, sizeof *s->fx, 16))
        return mpc_fail(&s->c, MS_ERR_NOMEM, "semi2k: out of memory for the beaver cache");
    src = fixed_find(s, y_id); /* the array may have moved */
    fixed_ent *f = &s->fx[s->n_fx];
    memset(f, 0, sizeof *f);
    f->id = z_id;
    f->n = n;
    f->derived = 1;
    f->B = malloc((n ? n : 1) * 8);
    f->F = src->F ? malloc((n ? n : 1) * 8) : NULL;
    if (!f->B || (src->F && !f->F)) {
        free(f->B), free(f->F);
        return mpc_fail(&s->c, MS_ERR_NOMEM, "semi2k: out of memory for the beaver cache");
    }
    for (size_t i = 0; i < n; i++) {
        if (idx[i] == UINT32_MAX) { /* a pad: zero, and so its mask (kern.c k_view_index) */
            f->B[i] = 0;
            if (f->F)
                f->F[i] = 0;
            continue;
        }
        if (idx[i] >= src->n) {
            free(f->B), free(f->F);
            return mpc_fail(&s->c, MS_ERR_INTERNAL, "semi2k fixed view: index %u beyond %zu",
                            idx[i], src->n);
        }
        f->B[i] = src->B[idx[i]];
        if (f->F)
            f->F[i] = src->F[idx[i]];
    }
    s->n_fx++;
    return MS_OK;
}

static const eng_vt semi2k_vt = {
    .alloc = mpc_l_alloc,
    .alloc_w = mpc_l_alloc_w,
    .release = mpc_l_release,
    .add = mpc_l_add,
    .sub = mpc_l_sub,
    .add_pub = mpc_l_add_pub,
    .mul_pub = mpc_l_mul_pub,
    .shift = mpc_l_shift,
    .place2 = mpc_l_place2,
    .bool_components = s_bool_components,
    .permute = mpc_l_permute,
    .concat = mpc_l_concat,
    .scatter = mpc_l_scatter,
    .input = s_input,
    .open = s_open,
    .mul = s_mul,
    .square = s_square,
    .matmul = s_matmul,
    .and_bb = s_and,
    .trunc = s_trunc,
    .b2a = s_b2a,
    .mul_a1b = s_mul_a1b,
    .and_bits = s_and_bits,
    .bool_pair = s_bool_pair,
    .b2a_bit = s_b2a_bit,
    .b2a_word = s_b2a_word,
    .eqz_spu = s_eqz_spu,
    .open_bit = s_open_bit,
    .shuffle = s_shuffle,
    .sync_public = s_sync_public,
    .fixed_view = s_fixed_view,
    .publish = s_publish,
};

/* ---------------------------------------------------------------- construction */

/* The key across programs is the name: a weight keeps its opened mask from one program (step)
 * to the next under whatever tensor id the new program gives it. Names and shapes are public,
 * so every node (the dealer too) makes the same decision. */
static int mpc_semi2k_setup_fixed(eng *e, uint32_t y_id, const mpc_val *y, const char *name)
{
    s2k *s = S(e);
    fixed_ent *f;
    if (!e->cfg.beaver_cache)
        return MS_OK;
    for (size_t i = 0; name && name[0] && i < s->n_fx; i++)
        if (!strcmp(s->fx[i].name, name) && s->fx[i].n == y->n) {
            s->fx[i].id = y_id;
            return MS_OK;
        }
    if ((f = fixed_find(s, y_id)))
        return MS_OK;
    return fixed_setup(s, y_id, name, y, &f);
}

static void mpc_semi2k_unbind_fixed(eng *e)
{
    s2k *s = S(e);
    size_t k = 0;
    for (size_t i = 0; i < s->n_fx; i++) {
        s->fx[i].id = UINT32_MAX;
        if (!s->fx[i].name[0] && s->fx[i].derived) { /* a fixed view: its program is over */
            free(s->fx[i].B);
            free(s->fx[i].F);
            continue;
        }
        s->fx[k++] = s->fx[i];
    }
    s->n_fx = k;
}

static void mpc_semi2k_free(eng *e)
{
    s2k *s = S(e);
    for (size_t i = 0; i < s->n_fx; i++) {
        free(s->fx[i].B);
        free(s->fx[i].F);
    }
    free(s->fx);
    mpc_prg_free(&s->corr);
    mpc_prg_free(&s->dcorr[0]);
    mpc_prg_free(&s->dcorr[1]);
    mpc_core_free(&s->c);
    free(s);
}

static int mpc_semi2k_new(eng *e, mpc_net *net, errbuf *err)
{
    s2k *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(err, MS_ERR_NOMEM, "semi2k: out of memory");
    e->impl = s;
    e->vt = &semi2k_vt;
    e->n_parties = 2;
    s->c.net = net;
    s->dealer_node = 2;
    int self = mpc_net_self(net);
    s->c.party = self == 2 ? -1 : self;
    e->party = self == 2 ? 0 : self;
    s->c.ns = self == 2 ? 0 : 1;
    s->c.pub_slot = self == 0 ? 0 : -1;
    uint8_t key[MPC_KEY_BYTES];
    int rc = mpc_prg_random_key(key, err);
    if (!rc)
        rc = mpc_prg_init(&s->c.priv, key, 1, err);
    if (rc) {
        mpc_prg_wipe(key, sizeof key);
        return rc;
    }
    if (self == 2) { /* dealer: one fresh seed per party, sent once at setup */
        for (int p = 0; p < 2 && !rc; p++) {
            rc = mpc_prg_random_key(key, err);
            if (!rc)
                rc = mpc_net_send_setup(net, p, key, sizeof key, err);
            if (!rc)
                rc = mpc_prg_init(&s->dcorr[p], key, 2, err);
        }
    } else {
        rc = mpc_net_recv_setup(net, 2, key, sizeof key, err);
        if (!rc)
            rc = mpc_prg_init(&s->corr, key, 2, err);
    }
    mpc_prg_wipe(key, sizeof key);
    return rc;
}

const mpc_backend mpc_backend_semi2k = {
    .name = "semi2k",
    .nodes = "P0, P1 and the dealer",
    .attach = mpc_semi2k_new,
    .detach = mpc_semi2k_free,
    .setup_fixed = mpc_semi2k_setup_fixed,
    .unbind_fixed = mpc_semi2k_unbind_fixed,
};
