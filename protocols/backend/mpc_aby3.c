/* mpc_aby3.c — aby3 on real shares: 3PC replicated sharing over Z_2^64 (semi-honest, honest
 * majority). Party i holds (x_i, x_{i+1}) in slots (s[0], s[1]); x = x0 + x1 + x2.
 *
 * Keys: party j draws K_j and gives it to P_{j−1} at setup, so party i holds K_i and K_{i+1};
 * α_i = F(K_i) − F(K_{i+1}) is a zero sharing at no communication cost. Message patterns are
 * exactly those of PRIMITIVES.md §aby3. */
#include <stdlib.h>
#include <string.h>

#include "mpc_aby3_int.h"
#include "mpc_eng.h"
#include "mpc_local.h"

/* One round: the message to node `to` (len sl) and from node `from` (len rl); -1 = none. */
int a3_x3(a3 *s, int to, const void *sb, size_t sl, int from, void *rb, size_t rl)
{
    const void *send[MPC_NODES_MAX] = {0};
    void *recv[MPC_NODES_MAX] = {0};
    size_t slen[MPC_NODES_MAX] = {0}, rlen[MPC_NODES_MAX] = {0};
    if (to >= 0) {
        send[to] = sb;
        slen[to] = sl;
    }
    if (from >= 0) {
        recv[from] = rb;
        rlen[from] = rl;
    }
    return mpc_net_round(s->c.net, send, slen, recv, rlen, 0, &s->c.err);
}

/* One round with up to two messages out and two in (NULL / 0: none). */
static int x3m(a3 *s, const void *const sb[3], const size_t sl[3], void *const rb[3],
               const size_t rl[3])
{
    const void *send[MPC_NODES_MAX] = {0};
    void *recv[MPC_NODES_MAX] = {0};
    size_t slen[MPC_NODES_MAX] = {0}, rlen[MPC_NODES_MAX] = {0};
    for (int j = 0; j < 3; j++) {
        send[j] = sb[j], slen[j] = sl[j];
        recv[j] = rb[j], rlen[j] = rl[j];
    }
    return mpc_net_round(s->c.net, send, slen, recv, rlen, 0, &s->c.err);
}

/* z_i computed locally (in z->s[0]) → reshare: send it to P_{i−1}, receive z_{i+1} into s[1].
 * COST: SPU aby3 mul_aa/and_bb/mmul_aa: 1 round, 8·(elements) on each link i→i−1 */
int a3_reshare(a3 *s, mpc_val *z)
{
    int i = s->c.party;
    return a3_x3(s, PREV(i), z->s[0], z->n * 8, NEXT(i), z->s[1], z->n * 8);
}

/* α_i into buf: arithmetic (F(K_i) − F(K_{i+1})) or boolean (xor). */
static int zero_share(a3 *s, uint64_t *buf, size_t n, int dom)
{
    uint64_t *t = mpc_tmp(&s->c, 5, n);
    if (!t)
        return MS_ERR_NOMEM;
    mpc_prg_u64(&s->k0, buf, n);
    mpc_prg_u64(&s->k1, t, n);
    for (size_t i = 0; i < n; i++)
        buf[i] = dom == DOM_BOOL ? buf[i] ^ t[i] : buf[i] - t[i];
    return MS_OK;
}

int a3_want(a3 *s, const mpc_val *x, const mpc_val *y, int dom, const char *what)
{
    if (x->dom != dom)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "aby3 %s: operand has the wrong domain", what);
    if (y && y->n != x->n)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "aby3 %s: %zu and %zu elements", what, x->n, y->n);
    return MS_OK;
}

/* ---------------------------------------------------------------- input / open */

static int a_input(eng *e, mpc_val *z, int owner, const uint64_t *plain)
{
    a3 *s = A(e);
    size_t n = z->n;
    int i = s->c.party, rc = mpc_ensure(&s->c, z, n, z->dom);
    if (rc)
        return rc;
    if (owner < 0 || owner > 2)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "aby3 input: owner %d is not a party", owner);
    /* COST: ABY3 §2.2 input: 1 round, 16n from the owner to each of the two others */
    if (i != owner) {
        uint64_t *r = mpc_tmp(&s->c, 0, 2 * n);
        if (!r || (rc = a3_x3(s, -1, NULL, 0, owner, r, 16 * n)))
            return r ? rc : MS_ERR_NOMEM;
        memcpy(z->s[0], r, n * 8);
        memcpy(z->s[1], r + n, n * 8);
        return MS_OK;
    }
    /* owner o: x_{o+1}, x_{o+2} random, x_o = x − x_{o+1} − x_{o+2} */
    uint64_t *m = mpc_tmp(&s->c, 0, 4 * n);
    if (!m)
        return MS_ERR_NOMEM;
    uint64_t *x1 = m, *x2 = m + n, *x0 = m + 2 * n;
    mpc_prg_u64(&s->c.priv, x1, 2 * n);
    for (size_t k = 0; k < n; k++)
        x0[k] = z->dom == DOM_BOOL ? plain[k] ^ x1[k] ^ x2[k] : plain[k] - x1[k] - x2[k];
    memcpy(z->s[0], x0, n * 8);
    memcpy(z->s[1], x1, n * 8);
    const void *send[MPC_NODES_MAX] = {0};
    void *recv[MPC_NODES_MAX] = {0};
    size_t slen[MPC_NODES_MAX] = {0}, rlen[MPC_NODES_MAX] = {0};
    send[NEXT(i)] = x1; /* P_{o+1} holds (x_{o+1}, x_{o+2}) */
    slen[NEXT(i)] = 16 * n;
    send[PREV(i)] = x2; /* P_{o+2} holds (x_{o+2}, x_o) */
    slen[PREV(i)] = 16 * n;
    return mpc_net_round(s->c.net, send, slen, recv, rlen, 0, &s->c.err);
}

static int a_open(eng *e, uint64_t *out, const mpc_val *x, int to)
{
    a3 *s = A(e);
    size_t n = x->n;
    int i = s->c.party;
    uint64_t *r = mpc_tmp(&s->c, 0, n);
    if (!r)
        return MS_ERR_NOMEM;
    /* COST: SPU aby3 a2p: 1 round, 8n on each link i→i−1 (to all); to p: 8n from P_{p+1} */
    int give = to < 0 || NEXT(to) == i, get = to < 0 || to == i;
    int rc = a3_x3(s, give ? PREV(i) : -1, x->s[1], n * 8, get ? NEXT(i) : -1, r, n * 8);
    if (rc || !get)
        return rc;
    for (size_t k = 0; k < n; k++)
        out[k] =
            x->dom == DOM_BOOL ? x->s[0][k] ^ x->s[1][k] ^ r[k] : x->s[0][k] + x->s[1][k] + r[k];
    return MS_OK;
}

/* Bit 0 of a boolean x opened to all as SPU's aby3 B2P (eng.h open_bit): P_i sends P_{i−1}
 * the bit of x_{i+1} in one byte. */
static int a_open_bit(eng *e, uint64_t *out, const mpc_val *x)
{
    a3 *s = A(e);
    size_t n = x->n;
    int i = s->c.party;
    uint8_t *b = mpc_tmp_bytes_w(&s->c, 0, 2 * n); /* [0, n) written, [n, 2n) received */
    if (!b)
        return MS_ERR_NOMEM;
    for (size_t k = 0; k < n; k++)
        b[k] = (uint8_t)(x->s[1][k] & 1);
    /* COST: SPU aby3 b2p of a bit: 1 round, n on each link i→i−1 */
    int rc = a3_x3(s, PREV(i), b, n, NEXT(i), b + n, n);
    for (size_t k = 0; !rc && out && k < n; k++)
        out[k] = (x->s[0][k] ^ x->s[1][k] ^ b[n + k]) & 1;
    return rc;
}

/* ---------------------------------------------------------------- products */

enum { PROD_MUL, PROD_SQUARE, PROD_AND };

/* Adds party i's local part of the product to al: x_i y_i + x_i y_{i+1} + x_{i+1} y_i (mul),
 * x_i² + 2 x_i x_{i+1} (square), or the same terms with ∧ and ^ (and_bb). */
static void prod_local(uint64_t *al, const mpc_val *x, const mpc_val *y, int kind)
{
    size_t n = x->n;
    if (kind == PROD_MUL)
        for (size_t k = 0; k < n; k++)
            al[k] += x->s[0][k] * y->s[0][k] + x->s[0][k] * y->s[1][k] + x->s[1][k] * y->s[0][k];
    else if (kind == PROD_SQUARE)
        for (size_t k = 0; k < n; k++)
            al[k] += x->s[0][k] * x->s[0][k] + 2 * x->s[0][k] * x->s[1][k];
    else
        for (size_t k = 0; k < n; k++)
            al[k] ^=
                (x->s[0][k] & y->s[0][k]) ^ (x->s[0][k] & y->s[1][k]) ^ (x->s[1][k] & y->s[0][k]);
}

/* A product: its local part al (slot 1) starts as a fresh zero sharing and is computed before
 * z is touched (z may alias x or y); z's first component is al, which the reshare sends on. */
static int prod(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, int kind)
{
    static const char *const what[] = {"mul", "square", "and_bb"};
    a3 *s = A(e);
    size_t n = x->n;
    int dom = kind == PROD_AND ? DOM_BOOL : DOM_ARITH;
    uint64_t *al = mpc_tmp(&s->c, 1, n);
    int rc = a3_want(s, x, y, dom, what[kind]);
    if (rc || !al || (rc = zero_share(s, al, n, dom)))
        return rc ? rc : MS_ERR_NOMEM;
    prod_local(al, x, y, kind);
    if ((rc = mpc_ensure(&s->c, z, n, dom)))
        return rc;
    memcpy(z->s[0], al, n * 8);
    return a3_reshare(s, z);
}

static int a_mul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return prod(e, z, x, y, PROD_MUL);
}

static int a_square(eng *e, mpc_val *z, const mpc_val *x)
{
    return prod(e, z, x, NULL, PROD_SQUARE);
}

static int a_and(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    return prod(e, z, x, y, PROD_AND);
}

static int a_matmul(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint32_t batch,
                    uint32_t m, uint32_t k, uint32_t n, uint32_t flags, uint32_t y_id)
{
    a3 *s = A(e);
    size_t nx = (size_t)batch * m * k, nz = (size_t)batch * m * n, kn = (size_t)k * n;
    /* y holds yb instances, each shared by batch / yb consecutive instances of x (op.h) */
    uint32_t yb = mpc_mm_y_inst(y->n, batch, kn);
    int tb = (flags & OPF_TRANS_B) != 0;
    (void)y_id;
    if (x->n < nx || !yb)
        return mpc_fail(&s->c, MS_ERR_INTERNAL,
                        "aby3 matmul: %u×(%u×%u)·(%u×%u) with operands of %zu and %zu elements",
                        batch, m, k, k, n, x->n, y->n);
    size_t ny = y->n;
    uint64_t *Z = malloc(nz * 8 + 8), *Y01 = malloc(ny * 8 + 8);
    int rc = MS_OK;
    if (!Z || !Y01) {
        rc = mpc_fail(&s->c, MS_ERR_NOMEM, "aby3 matmul: out of memory");
        goto out;
    }
    if ((rc = zero_share(s, Z, nz, DOM_ARITH)))
        goto out;
    /* Z_i = X_i·(Y_i + Y_{i+1}) + X_{i+1}·Y_i + α_i */
    for (size_t q = 0; q < ny; q++)
        Y01[q] = y->s[0][q] + y->s[1][q];
    mpc_mm_batch(Z, x->s[0], Y01, batch, m, k, n, tb, yb);
    mpc_mm_batch(Z, x->s[1], y->s[0], batch, m, k, n, tb, yb);
    if ((rc = mpc_ensure(&s->c, z, nz, DOM_ARITH)))
        goto out;
    memcpy(z->s[0], Z, nz * 8);
    rc = a3_reshare(s, z);
out:
    free(Z);
    free(Y01);
    return rc;
}

/* ---------------------------------------------------------------- truncation, b2a */

/* ABY3 §5.1.1 Share Truncation I (trunc: local): P0 holds a = x0 + x1, P1 and P2 hold x2. New
 * shares y0 = (a >> f) − r, y1 = r (r from K_1, shared by P0 and P1), y2 = −((−x2) >> f); P0
 * sends y0 to P2. COST: SPU aby3 TruncA: 1 round, 8n from P0 to P2 only. */
static int trunc_local(a3 *s, mpc_val *z, const mpc_val *x, int bits)
{
    size_t n = x->n;
    int i = s->c.party;
    uint64_t *t = mpc_tmp(&s->c, 1, n), *r = mpc_tmp(&s->c, 2, n);
    if (!t || !r)
        return MS_ERR_NOMEM;
    int rc;
    if (i == 0) {
        mpc_prg_u64(&s->k1, r, n);
        for (size_t q = 0; q < n; q++)
            t[q] = mpc_sar(x->s[0][q] + x->s[1][q], bits) - r[q];
        if ((rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
            return rc;
        memcpy(z->s[0], t, n * 8);
        memcpy(z->s[1], r, n * 8);
        return a3_x3(s, 2, z->s[0], n * 8, -1, NULL, 0);
    }
    if (i == 1) {
        mpc_prg_u64(&s->k0, r, n);
        for (size_t q = 0; q < n; q++)
            t[q] = -mpc_sar(-x->s[1][q], bits);
        if ((rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
            return rc;
        memcpy(z->s[0], r, n * 8);
        memcpy(z->s[1], t, n * 8);
        return a3_x3(s, -1, NULL, 0, -1, NULL, 0);
    }
    for (size_t q = 0; q < n; q++)
        t[q] = -mpc_sar(-x->s[0][q], bits);
    if ((rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    memcpy(z->s[0], t, n * 8);
    return a3_x3(s, -1, NULL, 0, 0, z->s[1], n * 8);
}

/* Truncation pair dealt by P2 (trunc: pair; PRIMITIVES.md; SPU aby3 TruncAPr, the masking and
 * re-encoding of eprint 2020/338 §5.1). As a 2-of-2 sharing x = a + x2 of P0 (a = x0 + x1) and
 * P1 (x2), masked by r = r0 + r1 with r0 from K_0 (P0, P2) and r1 from K_2 (P1, P2): only P2
 * knows r. It draws P0's shares m0, p0 of msb(r) and of r' = (r mod 2^63) >> f from K_0 and
 * sends P1 p1 = r' − p0 and m1 = msb(r) − m0 mod 2^(f+1), packed: the msb enters y only times
 * 2^(63−f), so its shares matter modulo 2^(f+1). Round 1: P0 and P1 open c = x + 2^62 + r to
 * each other while P2 sends (p1, m1). With x' = x + 2^62 in [0, 2^63) (|x| < 2^62),
 * x' = (c mod 2^63) − (r mod 2^63) + 2^63·(msb(c) ⊕ msb(r)), so
 * y = ((c mod 2^63) >> f) − r' + 2^(63−f)·(msb(c) ⊕ msb(r)) − 2^(62−f) is ⌊x/2^f⌋ or one more
 * (the borrow of the low bits: probabilistic rounding), never wrong by more. z0 (P0) and z1
 * (P1) share y; round 2 makes it replicated with u, t from K_1 (P0, P1): y0 = z0 + u, y1 = t,
 * y2 = z1 − u − t, P0 sending y0 and P1 sending y2 to P2, which sees both masked by u and t.
 * COST: round 1 8n P0↔P1 and 8n + n·⌈(f+1)/8⌉ P2→P1, round 2 8n P0→P2 and 8n P1→P2. */
static int trunc_pair(a3 *s, mpc_val *z, const mpc_val *x, int bits)
{
    size_t n = x->n;
    int i = s->c.party;
    /* mp: m then p (n words each), then the P2 → P1 message: p1 (8n), m1 packed */
    size_t MB = mpc_packed_bytes(n, bits + 1), pos = 8 * 8 * n;
    uint64_t *r = mpc_tmp(&s->c, 0, n), *mp = mpc_tmp(&s->c, 1, 3 * n + MB / 8 + 1);
    uint64_t *snd = mpc_tmp(&s->c, 2, n), *rcv = mpc_tmp(&s->c, 3, n), *u = mpc_tmp(&s->c, 4, n);
    if (!r || !mp || !snd || !rcv || !u)
        return MS_ERR_NOMEM;
    uint64_t *msg = mp + 2 * n, mlow = (1ull << (bits + 1)) - 1;
    const uint64_t top = 1ull << 63;
    const void *sb[3] = {0};
    void *rb[3] = {0};
    size_t sl[3] = {0}, rl[3] = {0};
    int rc;
    if (i == 2) {
        mpc_prg_u64(&s->k1, snd, n); /* K_0: r0, m0, p0 */
        mpc_prg_u64(&s->k1, mp, 2 * n);
        mpc_prg_u64(&s->k0, r, n); /* K_2: r1 */
        for (size_t q = 0; q < n; q++) {
            uint64_t rr = snd[q] + r[q];
            mp[q] = ((rr >> 63) - mp[q]) & mlow;
            msg[q] = ((rr & ~top) >> bits) - mp[n + q];
        }
        mpc_pack_bits((uint8_t *)msg, &pos, mp, n, mlow);
        sb[1] = msg, sl[1] = 8 * n + MB;
        if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
            return rc;
        memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl);
        rb[0] = z->s[1], rl[0] = 8 * n; /* y0 */
        rb[1] = z->s[0], rl[1] = 8 * n; /* y2 */
        return x3m(s, sb, sl, rb, rl);
    }
    int p0 = i == 0, o = 1 - i;
    if (p0) {
        mpc_prg_u64(&s->k0, r, n); /* K_0: r0, m0, p0 */
        mpc_prg_u64(&s->k0, mp, 2 * n);
        for (size_t q = 0; q < n; q++)
            snd[q] = x->s[0][q] + x->s[1][q] + r[q] + (1ull << 62);
    } else {
        mpc_prg_u64(&s->k1, r, n); /* K_2: r1 */
        for (size_t q = 0; q < n; q++)
            snd[q] = x->s[1][q] + r[q];
        rb[2] = msg, rl[2] = 8 * n + MB;
    }
    sb[o] = snd, sl[o] = 8 * n;
    rb[o] = rcv, rl[o] = 8 * n;
    if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    if (!p0) { /* (p1, m1) from P2 into the layout of P0's (m0, p0) */
        mpc_unpack_bits(mp, n, mlow, (const uint8_t *)msg, &pos);
        memcpy(mp + n, msg, 8 * n);
    }
    /* u, then t = y1, from K_1 */
    mpc_prg_u64(p0 ? &s->k1 : &s->k0, u, n);
    mpc_prg_u64(p0 ? &s->k1 : &s->k0, z->s[p0], n);
    uint64_t off = 1ull << (62 - bits), hi = 1ull << (63 - bits);
    for (size_t q = 0; q < n; q++) {
        uint64_t c = snd[q] + rcv[q], cm = c >> 63;
        uint64_t w = (p0 ? cm : 0) + (1 - 2 * cm) * mp[q];
        uint64_t zz = (p0 ? ((c & ~top) >> bits) - off : 0) - mp[n + q] + w * hi;
        z->s[!p0][q] = p0 ? zz + u[q] : zz - u[q] - z->s[0][q];
    }
    memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl);
    memset(rb, 0, sizeof rb), memset(rl, 0, sizeof rl);
    sb[2] = z->s[!p0], sl[2] = 8 * n;
    return x3m(s, sb, sl, rb, rl);
}

/* SPU's TruncAPr (compat: spu; secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87
 * libspu/mpc/aby3/arithmetic.cc 758-940), with its rotating roles fixed at P0, P1 and helper P2.
 * The mask r = ra + rb, ra from K_0 (P0, P2), rb from K_2 (P1, P2), so only P2 knows r. Round
 * 1: P0 and P1 open c = x + 2^62 + r to each other (P0's part x0 + x1 + 2^62 + ra, P1's
 * x2 + rb) while P2 splits msb(r) and r' = (r mod 2^63) >> f into fresh additive pairs and
 * sends one full word of each to P0 and the other to P1. Then, as in trunc_pair, P0's and
 * P1's 2-of-2 shares of y = (c mod 2^63) >> f − r' + 2^(63−f)·(msb(c) ⊕ msb(r)) − 2^(62−f)
 * (⌊x/2^f⌋ or one more). Round 2 makes them replicated: P0 draws y0 from K_0 (with P2), P1
 * draws y2 from K_2 (with P2), they exchange their shares minus those, and y1 is the sum.
 * COST: round 1 8n P0↔P1 and 16n P2→P0, P2→P1; round 2 8n P0↔P1 (64n in all). */
static int trunc_spu(a3 *s, mpc_val *z, const mpc_val *x, int bits)
{
    size_t n = x->n;
    int i = s->c.party, rc;
    uint64_t *r = mpc_tmp(&s->c, 0, n), *cr = mpc_tmp(&s->c, 1, 4 * n);
    uint64_t *snd = mpc_tmp(&s->c, 2, n), *rcv = mpc_tmp(&s->c, 3, n), *u = mpc_tmp(&s->c, 4, n);
    if (!r || !cr || !snd || !rcv || !u)
        return MS_ERR_NOMEM;
    const uint64_t top = 1ull << 63;
    const void *sb[3] = {0};
    void *rb[3] = {0};
    size_t sl[3] = {0}, rl[3] = {0};
    if (i == 2) {
        mpc_prg_u64(&s->k1, snd, n); /* K_0: ra */
        mpc_prg_u64(&s->k0, r, n);   /* K_2: rb */
        mpc_prg_u64(&s->c.priv, cr, 2 * n);
        uint64_t *c1 = cr + 2 * n; /* P0's (m0, p0) in cr[0..2n), P1's (m1, p1) here */
        for (size_t q = 0; q < n; q++) {
            uint64_t rr = snd[q] + r[q];
            c1[q] = (rr >> 63) - cr[q];
            c1[n + q] = ((rr & ~top) >> bits) - cr[n + q];
        }
        sb[0] = cr, sl[0] = 16 * n;
        sb[1] = c1, sl[1] = 16 * n;
        if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
            return rc;
        mpc_prg_u64(&s->k0, z->s[0], n); /* K_2: y2 */
        mpc_prg_u64(&s->k1, z->s[1], n); /* K_0: y0 */
        memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl);
        return x3m(s, sb, sl, rb, rl); /* round 2 is between P0 and P1 */
    }
    int p0 = i == 0, o = 1 - i;
    if (p0) {
        mpc_prg_u64(&s->k0, r, n); /* K_0: ra */
        for (size_t q = 0; q < n; q++)
            snd[q] = x->s[0][q] + x->s[1][q] + r[q] + (1ull << 62);
    } else {
        mpc_prg_u64(&s->k1, r, n); /* K_2: rb */
        for (size_t q = 0; q < n; q++)
            snd[q] = x->s[1][q] + r[q];
    }
    sb[o] = snd, sl[o] = 8 * n;
    rb[o] = rcv, rl[o] = 8 * n;
    rb[2] = cr, rl[2] = 16 * n;
    if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    uint64_t off = 1ull << (62 - bits), hi = 1ull << (63 - bits);
    for (size_t q = 0; q < n; q++) {
        uint64_t c = snd[q] + rcv[q], cm = c >> 63;
        uint64_t w = (p0 ? cm : 0) + (1 - 2 * cm) * cr[q];
        u[q] = (p0 ? ((c & ~top) >> bits) - off : 0) - cr[n + q] + w * hi;
    }
    /* P0 keeps y0 (K_0) in s[0]; P1 keeps y2 (K_2) in s[1]; the exchanged words give y1 */
    uint64_t *mine = p0 ? z->s[0] : z->s[1], *y1 = p0 ? z->s[1] : z->s[0];
    mpc_prg_u64(p0 ? &s->k0 : &s->k1, mine, n);
    for (size_t q = 0; q < n; q++)
        snd[q] = u[q] - mine[q];
    memset(rb, 0, sizeof rb), memset(rl, 0, sizeof rl);
    rb[o] = rcv, rl[o] = 8 * n;
    if ((rc = x3m(s, sb, sl, rb, rl)))
        return rc;
    for (size_t q = 0; q < n; q++)
        y1[q] = snd[q] + rcv[q];
    return MS_OK;
}

/* SPU's eqz mask (eng.h eqz_spu), roles at SPU's pivot 0: P0 draws r and deals it to P1
 * through K_1 (ra1, rb1, and the mask rz) and to P2 by a message (ra2 = r − ra1,
 * rb2 = r ^ rb1); P1 (x1 + x2 + ra1) and P2 (x0 + ra2) hold c = x + r additively, P2 sends
 * P1 its part; P1 sends P2 flag = ~(c ^ rb1) ^ rz. z = (rb2, rz, flag) as (z0, z1, z2):
 * z0 ^ z1 ^ z2 = ~(c ^ r). */
static int a_eqz_spu(eng *e, mpc_val *z, const mpc_val *x)
{
    a3 *s = A(e);
    size_t n = x->n;
    int i = s->c.party, rc = a3_want(s, x, NULL, DOM_ARITH, "eqz");
    uint64_t *m = mpc_tmp(&s->c, 0, 2 * n), *r = mpc_tmp(&s->c, 1, 3 * n);
    uint64_t *c = mpc_tmp(&s->c, 2, n), *f = mpc_tmp(&s->c, 3, n);
    if (rc || !m || !r || !c || !f)
        return rc ? rc : MS_ERR_NOMEM;
    const void *sb[3] = {0};
    void *rb[3] = {0};
    size_t sl[3] = {0}, rl[3] = {0};
    uint64_t *ra1 = r, *rb1 = r + n, *rz = r + 2 * n;
    if (i == 0 || i == 1)
        mpc_prg_u64(i == 0 ? &s->k1 : &s->k0, r, 3 * n); /* K_1: ra1, rb1, rz */
    if (i == 0) {
        mpc_prg_u64(&s->c.priv, c, n); /* r */
        for (size_t q = 0; q < n; q++)
            m[q] = c[q] - ra1[q], m[n + q] = c[q] ^ rb1[q];
        sb[2] = m, sl[2] = 16 * n;
    } else if (i == 2)
        rb[0] = m, rl[0] = 16 * n;
    /* COST: SPU aby3 eqz round 1: P0 → P2 16n (ra2, rb2) */
    if ((rc = x3m(s, sb, sl, rb, rl)))
        return rc;
    memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl), memset(rb, 0, sizeof rb),
        memset(rl, 0, sizeof rl);
    if (i == 2) {
        for (size_t q = 0; q < n; q++)
            c[q] = x->s[1][q] + m[q];
        sb[1] = c, sl[1] = 8 * n;
    } else if (i == 1)
        rb[2] = c, rl[2] = 8 * n;
    /* COST: round 2: P2 → P1 8n (its part of c) */
    if ((rc = x3m(s, sb, sl, rb, rl)))
        return rc;
    memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl), memset(rb, 0, sizeof rb),
        memset(rl, 0, sizeof rl);
    if (i == 1) {
        for (size_t q = 0; q < n; q++)
            f[q] = ~((c[q] + x->s[0][q] + x->s[1][q] + ra1[q]) ^ rb1[q]) ^ rz[q];
        sb[2] = f, sl[2] = 8 * n;
    } else if (i == 2)
        rb[1] = f, rl[1] = 8 * n;
    /* COST: round 3: P1 → P2 8n (the flag's component) */
    if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_BOOL)))
        return rc;
    const uint64_t *z0 = i == 0 ? m + n : i == 1 ? rz : f, *z1 = i == 0 ? rz : i == 1 ? f : m + n;
    memcpy(z->s[0], z0, n * 8);
    memcpy(z->s[1], z1, n * 8);
    return MS_OK;
}

static int a_trunc(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    a3 *s = A(e);
    if (bits <= 0 || bits >= 62)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "aby3 trunc: %d bits out of range", bits);
    if (x->dom != DOM_ARITH)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "aby3 trunc: operand has the wrong domain");
    if (e->kv.trunc == KV_TRUNC_LOCAL)
        return trunc_local(s, z, x, bits);
    return e->kv.trunc == KV_TRUNC_SPU ? trunc_spu(s, z, x, bits) : trunc_pair(s, z, x, bits);
}

/* z = a · bit 0 of b, as SPU's aby3 MulA1B sends it (compat: spu;
 * secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87 libspu/mpc/aby3/arithmetic.cc
 * 451-570): a = (a0 + a1) + a2 and b = b0 ⊕ b1 ⊕ b2, so a·b = (a0 + a1)·b + a2·b, each term by a
 * three-party OT whose sender knows the term and two of b's shares. OT1: sender P0 (α = a0 + a1,
 * s = b0 ⊕ b1), receiver P2 and helper P1 (both hold the choice c = b2); OT2: sender P2 (α = a2,
 * s = b2 ⊕ b0), receiver P1 and helper P0 (c = b1). The sender's messages are
 * m_j = (j ⊕ s)·α − ρ − σ + w_j (j = 0, 1), w_0, w_1 shared with the helper, who sends the
 * receiver w_c, so the receiver learns m = b·α − ρ − σ and nothing of m_(1−c); round 2 it
 * forwards m to the helper. ρ and σ are the sender's masks shared with the receiver and with
 * the helper, so the three components are ρ (sender and receiver), σ (sender and helper) and
 * m (receiver and helper). Keys: OT1's ρ, OT2's w and σ from K_0 (P0, P2); OT1's w and σ from
 * K_1 (P0, P1); OT2's ρ from K_2 (P1, P2). COST: round 1 P0→P2 16n, P1→P2 8n, P2→P1 16n,
 * P0→P1 8n; round 2 P2→P1 8n, P1→P0 8n (64n). */
static int a_mul_a1b(eng *e, mpc_val *z, const mpc_val *a, const mpc_val *b)
{
    a3 *s = A(e);
    size_t n = a->n;
    int i = s->c.party, rc;
    if (a->dom != DOM_ARITH || b->dom != DOM_BOOL || b->n != n)
        return mpc_fail(&s->c, MS_ERR_INTERNAL, "aby3 mul_a1b: bad operands");
    uint64_t *k0 = mpc_tmp(&s->c, 0, 4 * n), *k1 = mpc_tmp(&s->c, 1, 3 * n);
    uint64_t *k2 = mpc_tmp(&s->c, 2, n), *snd = mpc_tmp(&s->c, 3, 2 * n);
    uint64_t *rcv = mpc_tmp(&s->c, 4, 3 * n), *m = mpc_tmp(&s->c, 5, n);
    if (!k0 || !k1 || !k2 || !snd || !rcv || !m)
        return MS_ERR_NOMEM;
    const void *sb[3] = {0};
    void *rb[3] = {0};
    size_t sl[3] = {0}, rl[3] = {0};
    /* K_0: ρ1, w2_0, w2_1, σ2; K_1: w1_0, w1_1, σ1; K_2: ρ2 */
    if (i == 0) {
        mpc_prg_u64(&s->k0, k0, 4 * n);
        mpc_prg_u64(&s->k1, k1, 3 * n);
        for (size_t q = 0; q < n; q++) {
            uint64_t al = a->s[0][q] + a->s[1][q], sv = (b->s[0][q] ^ b->s[1][q]) & 1;
            uint64_t base = -k0[q] - k1[2 * n + q];
            snd[q] = sv * al + base + k1[q];               /* j = 0 */
            snd[n + q] = (1 - sv) * al + base + k1[n + q]; /* j = 1 */
            m[q] = k0[((b->s[1][q] & 1) + 1) * n + q];     /* OT2's w_c, c = b1 */
        }
        sb[2] = snd, sl[2] = 16 * n;
        sb[1] = m, sl[1] = 8 * n;
        if ((rc = x3m(s, sb, sl, rb, rl)))
            return rc;
        memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl);
        rb[1] = rcv, rl[1] = 8 * n;
        if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
            return rc;
        for (size_t q = 0; q < n; q++) {
            z->s[0][q] = k0[q] + k0[3 * n + q];
            z->s[1][q] = k1[2 * n + q] + rcv[q];
        }
        return MS_OK;
    }
    if (i == 1) {
        mpc_prg_u64(&s->k0, k1, 3 * n);
        mpc_prg_u64(&s->k1, k2, n);
        for (size_t q = 0; q < n; q++)
            m[q] = k1[(b->s[1][q] & 1) * n + q]; /* OT1's w_c, c = b2 */
        sb[2] = m, sl[2] = 8 * n;
        rb[2] = rcv, rl[2] = 16 * n;
        rb[0] = rcv + 2 * n, rl[0] = 8 * n;
        if ((rc = x3m(s, sb, sl, rb, rl)))
            return rc;
        for (size_t q = 0; q < n; q++) /* OT2's m, c = b1 */
            snd[q] = rcv[(b->s[0][q] & 1) * n + q] - rcv[2 * n + q];
        memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl);
        memset(rb, 0, sizeof rb), memset(rl, 0, sizeof rl);
        sb[0] = snd, sl[0] = 8 * n;
        rb[2] = m, rl[2] = 8 * n;
        if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
            return rc;
        for (size_t q = 0; q < n; q++) {
            z->s[0][q] = k1[2 * n + q] + snd[q];
            z->s[1][q] = m[q] + k2[q];
        }
        return MS_OK;
    }
    mpc_prg_u64(&s->k0, k2, n);
    mpc_prg_u64(&s->k1, k0, 4 * n);
    for (size_t q = 0; q < n; q++) {
        uint64_t al = a->s[0][q], sv = (b->s[0][q] ^ b->s[1][q]) & 1;
        uint64_t base = -k2[q] - k0[3 * n + q];
        snd[q] = sv * al + base + k0[n + q];
        snd[n + q] = (1 - sv) * al + base + k0[2 * n + q];
    }
    sb[1] = snd, sl[1] = 16 * n;
    rb[0] = rcv, rl[0] = 16 * n;
    rb[1] = rcv + 2 * n, rl[1] = 8 * n;
    if ((rc = x3m(s, sb, sl, rb, rl)))
        return rc;
    for (size_t q = 0; q < n; q++) /* OT1's m, c = b2 */
        m[q] = rcv[(b->s[0][q] & 1) * n + q] - rcv[2 * n + q];
    memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl);
    memset(rb, 0, sizeof rb), memset(rl, 0, sizeof rl);
    sb[1] = m, sl[1] = 8 * n;
    if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    for (size_t q = 0; q < n; q++) {
        z->s[0][q] = m[q] + k2[q];
        z->s[1][q] = k0[q] + k0[3 * n + q];
    }
    return MS_OK;
}

/* ---------------------------------------------------------------- SPU's aby3 B2A of a word */

/* z = x ^ y on both components (local). */
static void bx_xor(mpc_val *z, const mpc_val *x, const mpc_val *y)
{
    for (int t = 0; t < 2; t++)
        for (size_t q = 0; q < z->n; q++)
            z->s[t][q] = x->s[t][q] ^ y->s[t][q];
}

/* sum = x + y (mod 2^64) on boolean sharings, SPU's ppa_kogge_stone
 * (secretflow/spu@a1411c5489c5599f89b23fe84cdcb01232995b87 libspu/mpc/ab_api.cc 314-337):
 * G = x & y, P = x ^ y, then six levels [P; G] ← [P & (P << s); G ^ (P & (G << s))] as one
 * and_bb of 2n; sum = x ^ y ^ (G << 1). COST: 7 rounds, 8n then 16n six times on each link. */
static int ks_add(eng *e, mpc_val *sum, const mpc_val *x, const mpc_val *y)
{
    size_t n = x->n;
    mpc_val G = {0}, P = {0}, X = {0}, Y = {0}, T = {0};
    int rc = e->vt->alloc(e, &G, n, DOM_BOOL);
    if (!rc)
        rc = e->vt->alloc(e, &P, n, DOM_BOOL);
    if (!rc)
        rc = e->vt->alloc(e, &X, 2 * n, DOM_BOOL);
    if (!rc)
        rc = e->vt->alloc(e, &Y, 2 * n, DOM_BOOL);
    if (!rc)
        rc = e->vt->alloc(e, &T, 2 * n, DOM_BOOL);
    if (!rc)
        rc = a_and(e, &G, x, y);
    if (!rc)
        bx_xor(&P, x, y);
    for (int k = 1; !rc && k <= 32; k *= 2) {
        for (int t = 0; t < 2; t++)
            for (size_t q = 0; q < n; q++) {
                X.s[t][q] = X.s[t][n + q] = P.s[t][q];
                Y.s[t][q] = P.s[t][q] << k;
                Y.s[t][n + q] = G.s[t][q] << k;
            }
        if ((rc = a_and(e, &T, &X, &Y)))
            break;
        for (int t = 0; t < 2; t++)
            for (size_t q = 0; q < n; q++) {
                P.s[t][q] = T.s[t][q];
                G.s[t][q] ^= T.s[t][n + q];
            }
    }
    if (!rc && !(rc = mpc_ensure(&A(e)->c, sum, n, DOM_BOOL))) {
        for (int t = 0; t < 2; t++)
            for (size_t q = 0; q < n; q++)
                sum->s[t][q] = x->s[t][q] ^ y->s[t][q] ^ (G.s[t][q] << 1);
    }
    e->vt->release(e, &G), e->vt->release(e, &P), e->vt->release(e, &X);
    e->vt->release(e, &Y), e->vt->release(e, &T);
    return rc;
}

/* SPU aby3 B2AByOT (libspu/mpc/aby3/conversion.cc 315-455) with the pivot at 0: helper P0,
 * receiver P1, sender P2, per bit. c1 from K_0 (P0, P2), c3 from K_2 (P1, P2); the sender's
 * messages m_j = (j ⊕ x2 ⊕ x0) − c1 − c3 masked by w_j from K_0; the helper sends the receiver
 * w_c (c = x1), the receiver learns c2 = x_bit − c1 − c3 and returns it to the helper. Draws:
 * every party n·bits from each key (the pair c), then P0 2n·bits from K_0 (w_0, w_1), as P2.
 * COST: round 1 P0→P1 8n·bits, P2→P1 16n·bits; round 2 P1→P0 8n·bits. */
static int b2a_ot(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    a3 *s = A(e);
    size_t n = x->n, nb = n * (size_t)bits;
    int i = s->c.party, rc = MS_OK;
    uint64_t *buf = malloc(9 * nb * 8 + 8);
    if (!buf)
        return MS_ERR_NOMEM;
    uint64_t *r0 = buf, *r1 = buf + nb, *w0 = buf + 2 * nb, *w1 = buf + 3 * nb;
    uint64_t *snd = buf + 4 * nb, *rcv = buf + 6 * nb; /* 2nb and 3nb at most */
    const void *sb[3] = {0};
    void *rb[3] = {0};
    size_t sl[3] = {0}, rl[3] = {0};
    mpc_prg_u64(&s->k0, r0, nb);
    mpc_prg_u64(&s->k1, r1, nb);
    if (i == 0) {
        mpc_prg_u64(&s->k0, w0, nb);
        mpc_prg_u64(&s->k0, w1, nb);
        for (size_t q = 0; q < nb; q++)
            snd[q] = (x->s[1][q / bits] >> (q % bits)) & 1 ? w1[q] : w0[q];
        sb[1] = snd, sl[1] = 8 * nb;
    } else if (i == 2) {
        mpc_prg_u64(&s->k1, w0, nb);
        mpc_prg_u64(&s->k1, w1, nb);
        for (size_t q = 0; q < nb; q++) {
            uint64_t xx = (x->s[0][q / bits] ^ x->s[1][q / bits]) >> (q % bits) & 1;
            uint64_t t = r0[q] + r1[q]; /* c3 + c1 */
            snd[q] = w0[q] ^ (xx - t);
            snd[nb + q] = w1[q] ^ ((1 - xx) - t);
        }
        sb[1] = snd, sl[1] = 16 * nb;
    } else {
        rb[0] = rcv, rl[0] = 8 * nb;
        rb[2] = rcv + nb, rl[2] = 16 * nb;
    }
    if ((rc = x3m(s, sb, sl, rb, rl)))
        goto out;
    memset(sb, 0, sizeof sb), memset(sl, 0, sizeof sl);
    memset(rb, 0, sizeof rb), memset(rl, 0, sizeof rl);
    uint64_t *c2 = snd; /* n words */
    if (i == 1) {
        for (size_t q = 0; q < n; q++)
            c2[q] = 0;
        for (size_t q = 0; q < nb; q++) {
            uint64_t c = (x->s[0][q / bits] >> (q % bits)) & 1;
            c2[q / bits] += (rcv[nb + c * nb + q] ^ rcv[q]) << (q % bits);
        }
        sb[0] = c2, sl[0] = 8 * n;
    } else if (i == 0)
        rb[1] = rcv, rl[1] = 8 * n;
    if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        goto out;
    for (size_t q = 0; q < n; q++) {
        uint64_t a = 0, b = 0;
        for (int j = 0; j < bits; j++) {
            a += r0[q * bits + j] << j;
            b += r1[q * bits + j] << j;
        }
        /* P0: (c1, c2); P1: (c2, c3); P2: (c3, c1) */
        z->s[0][q] = i == 1 ? c2[q] : a;
        z->s[1][q] = i == 0 ? rcv[q] : b;
    }
out:
    free(buf);
    return rc;
}

/* SPU aby3 B2AByPPA (libspu/mpc/aby3/conversion.cc 143-310): r = ra_1 + ra_2 from K_1 and K_2,
 * boolean-shared by P1 over a boolean zero sharing and one rotate; x + r by the adder; P2
 * sends P0 its first component of the sum; P0 holds c = x + r, P1 and P2 −ra_1 and −ra_2; one
 * rotate makes them replicated. Draws: every party n from each key twice (ra, then the zero
 * sharing). COST: 10 rounds: rotate 8n on each link, the adder (8n, then 16n six times), 8n
 * P2→P0, rotate 8n on each link. */
static int b2a_ppa(eng *e, mpc_val *z, const mpc_val *x)
{
    a3 *s = A(e);
    size_t n = x->n;
    int i = s->c.party, rc;
    uint64_t *buf = malloc(5 * n * 8 + 8);
    mpc_val R = {0}, S = {0};
    if (!buf)
        return MS_ERR_NOMEM;
    uint64_t *ra0 = buf, *ra1 = buf + n, *z0 = buf + 2 * n, *z1 = buf + 3 * n, *c = buf + 4 * n;
    mpc_prg_u64(&s->k0, ra0, n);
    mpc_prg_u64(&s->k1, ra1, n);
    mpc_prg_u64(&s->k0, z0, n);
    mpc_prg_u64(&s->k1, z1, n);
    rc = e->vt->alloc(e, &R, n, DOM_BOOL);
    if (!rc)
        rc = e->vt->alloc(e, &S, n, DOM_BOOL);
    if (rc)
        goto out;
    for (size_t q = 0; q < n; q++)
        R.s[0][q] = z0[q] ^ z1[q] ^ (i == 1 ? ra0[q] + ra1[q] : 0);
    if ((rc = a3_reshare(s, &R)) || (rc = ks_add(e, &S, x, &R)))
        goto out;
    /* the sum's third component to P0 */
    if ((rc = a3_x3(s, i == 2 ? 0 : -1, S.s[0], 8 * n, i == 0 ? 2 : -1, c, 8 * n)))
        goto out;
    if ((rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        goto out;
    for (size_t q = 0; q < n; q++)
        z->s[0][q] = i == 0 ? S.s[0][q] ^ S.s[1][q] ^ c[q] : -ra0[q];
    rc = a3_reshare(s, z);
out:
    e->vt->release(e, &R), e->vt->release(e, &S);
    free(buf);
    return rc;
}

/* z = Σ_{j<bits} 2^j x_j (eng.h b2a_word) as SPU's B2ASelector picks (conversion.cc 115-127):
 * B2AByOT up to 8 bits, B2AByPPA above (the word's bits above bits are cleared first). */
static int a_b2a_word(eng *e, mpc_val *z, const mpc_val *x, int bits)
{
    a3 *s = A(e);
    int rc = a3_want(s, x, NULL, DOM_BOOL, "b2a_word");
    if (rc)
        return rc;
    if (bits <= 8)
        return b2a_ot(e, z, x, bits);
    mpc_val m = {0};
    uint64_t mk = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    if ((rc = e->vt->alloc(e, &m, x->n, DOM_BOOL)))
        return rc;
    for (int t = 0; t < 2; t++)
        for (size_t q = 0; q < x->n; q++)
            m.s[t][q] = x->s[t][q] & mk;
    rc = b2a_ppa(e, z, &m);
    e->vt->release(e, &m);
    return rc;
}

/* The arithmetic replicated sharing of bit 0 of boolean component j (only P_j, P_{j−1} hold it). */
static void bit_component(a3 *s, mpc_val *b, const mpc_val *x, int j)
{
    int i = s->c.party;
    for (int t = 0; t < 2; t++) {
        int comp = (i + t) % 3;
        for (size_t q = 0; q < x->n; q++)
            b->s[t][q] = comp == j ? (x->s[t][q] & 1) : 0;
    }
}

/* b = b0 ⊕ b1 ⊕ b2 as d = b0 + b1 − 2·b0·b1, b = d + b2 − 2·d·b2.
 * COST: 2 rounds, 8n on each link i→i−1 per round (PRIMITIVES.md aby3 b2a). */
static int a_b2a(eng *e, mpc_val *z, const mpc_val *x)
{
    a3 *s = A(e);
    size_t n = x->n;
    mpc_val b[3] = {{0}}, p = {0};
    int rc = a3_want(s, x, NULL, DOM_BOOL, "b2a");
    for (int j = 0; j < 3 && !rc; j++)
        if (!(rc = mpc_l_alloc(e, &b[j], n, DOM_ARITH)))
            bit_component(s, &b[j], x, j);
    if (!rc)
        rc = a_mul(e, &p, &b[0], &b[1]);
    for (int t = 0; !rc && t < 2; t++)
        for (size_t q = 0; q < n; q++)
            b[0].s[t][q] = b[0].s[t][q] + b[1].s[t][q] - 2 * p.s[t][q];
    if (!rc)
        rc = a_mul(e, &p, &b[0], &b[2]);
    if (!rc)
        rc = mpc_ensure(&s->c, z, n, DOM_ARITH);
    for (int t = 0; !rc && t < 2; t++)
        for (size_t q = 0; q < n; q++)
            z->s[t][q] = b[0].s[t][q] + b[2].s[t][q] - 2 * p.s[t][q];
    for (int j = 0; j < 3; j++)
        mpc_l_release(e, &b[j]);
    mpc_l_release(e, &p);
    return rc;
}

/* ---------------------------------------------------------------- packed circuits */

/* Whether z's first share is the storage of one of v's. */
static int shares_storage(const mpc_val *z, const mpc_val *v)
{
    const uint64_t *z0 = z->s[0];
    return z == v || (z0 && (z0 == v->s[0] || z0 == v->s[1]));
}

/* The operands of and_bits (x, y) or of and_placed (x NULL; the placed words a, b). */
typedef struct and_in {
    const mpc_val *x, *y;    /* and_bits */
    const eng_placed *a, *b; /* and_placed */
} and_in;

/* ABY3 AND on the bits of mask: z_i masked, reshared packed to P_{i−1}.
 * COST: and_bits: 1 round, n·⌈pc/8⌉ on each link i→i−1. */
static int and_round(a3 *s, mpc_val *z, const and_in *in, size_t n, uint64_t mask)
{
    size_t B = mpc_packed_bytes(n, __builtin_popcountll(mask)), pos = 0;
    /* The local product goes straight into z->s[0] unless z is an operand or shares its
     * storage (the zero share drawn first would overwrite it): then into scratch, copied. */
    int own = in->x ? !shares_storage(z, in->x) && !shares_storage(z, in->y)
                    : !shares_storage(z, in->a->x) && !shares_storage(z, in->a->y) &&
                          !shares_storage(z, in->b->x) && !shares_storage(z, in->b->y);
    uint64_t *al = own ? NULL : mpc_tmp(&s->c, 1, n);
    /* snd: packed in full (B bytes), rcv: received in full before it is read */
    uint8_t *snd = mpc_tmp_bytes_w(&s->c, 2, B), *rcv = mpc_tmp_bytes_w(&s->c, 3, B);
    int rc = MS_OK;
    if (own && !(rc = mpc_ensure(&s->c, z, n, DOM_BOOL)))
        al = z->s[0];
    if (rc || !al || !snd || !rcv)
        return rc ? rc : MS_ERR_NOMEM;
    /* The boolean zero share on the mask's bits only: F(K_i) ^ F(K_{i+1}) drawn packed, B
     * bytes from each key (the message's size, not 8n), then placed on the mask by unpacking
     * (PDEP is linear over xor, so the three shares still xor to 0); snd and rcv are free
     * until the product is packed. */
    mpc_prg_bytes(&s->k0, snd, B);
    mpc_prg_bytes(&s->k1, rcv, B);
    size_t q = 0;
    for (; q + 8 <= B; q += 8) {
        uint64_t u, v;
        memcpy(&u, snd + q, 8), memcpy(&v, rcv + q, 8);
        u ^= v;
        memcpy(snd + q, &u, 8);
    }
    for (; q < B; q++)
        snd[q] ^= rcv[q];
    mpc_unpack_bits(al, n, mask, snd, &pos);
    pos = 0;
    if (in->x) {
        const mpc_val *x = in->x, *y = in->y;
        for (size_t k = 0; k < n; k++)
            al[k] = (al[k] ^ (x->s[0][k] & y->s[0][k]) ^ (x->s[0][k] & y->s[1][k]) ^
                     (x->s[1][k] & y->s[0][k])) &
                    mask;
    } else {
        mpc_l_and_placed(al, in->a, in->b, mask, n);
    }
    mpc_pack_bits(snd, &pos, al, n, mask);
    if (!own) {
        if ((rc = mpc_ensure(&s->c, z, n, DOM_BOOL)))
            return rc;
        memcpy(z->s[0], al, n * 8);
    }
    int i = s->c.party;
    if ((rc = a3_x3(s, PREV(i), snd, B, NEXT(i), rcv, B)))
        return rc;
    pos = 0;
    mpc_unpack_bits(z->s[1], n, mask, rcv, &pos);
    return MS_OK;
}

static int a_and_bits(eng *e, mpc_val *z, const mpc_val *x, const mpc_val *y, uint64_t mask,
                      int priv)
{
    a3 *s = A(e);
    (void)priv;
    int rc = a3_want(s, x, y, DOM_BOOL, "and_bits");
    and_in in = {.x = x, .y = y};
    return rc ? rc : and_round(s, z, &in, x->n, mask);
}

/* and_bits of two placed words, placed inside the local product's pass (eng.h).
 * COST: and_placed: as and_bits. */
static int a_and_placed(eng *e, mpc_val *z, const eng_placed *a, const eng_placed *b, uint64_t mask)
{
    a3 *s = A(e);
    const mpc_val *v[4] = {a->x, a->y, b->x, b->y};
    for (int q = 0; q < 4; q++) {
        int rc = a3_want(s, v[q], v[0], DOM_BOOL, "and_placed"); /* boolean, of one length */
        if (rc)
            return rc;
    }
    and_in in = {.a = a, .b = b};
    return and_round(s, z, &in, a->x->n, mask);
}

/* a = x0 + x1 (known to P0) as the boolean sharing (a ^ s1, s1, 0) with s1 from K_1 (P0, P1),
 * P0 sending a ^ s1 to P2; b = x2 as (0, 0, x2), no message. Masked to bits.
 * COST: bool_pair: 1 round, n·⌈bits/8⌉ from P0 to P2. */
static int a_bool_pair(eng *e, mpc_val *a, mpc_val *b, const mpc_val *x, int bits)
{
    a3 *s = A(e);
    size_t n = x->n, B = mpc_packed_bytes(n, bits), pos = 0;
    uint64_t m = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    int i = s->c.party, rc = mpc_ensure(&s->c, a, n, DOM_BOOL);
    if (!rc)
        rc = mpc_ensure(&s->c, b, n, DOM_BOOL);
    uint8_t *buf = mpc_tmp_bytes_w(&s->c, 2, B); /* P0 packs all B bytes, P2 receives them */
    if (rc || !buf)
        return rc ? rc : MS_ERR_NOMEM;
    if (i == 0) {
        mpc_prg_u64(&s->k1, a->s[1], n);
        for (size_t q = 0; q < n; q++) {
            a->s[1][q] &= m;
            a->s[0][q] = ((x->s[0][q] + x->s[1][q]) & m) ^ a->s[1][q];
            b->s[0][q] = b->s[1][q] = 0;
        }
        mpc_pack_bits(buf, &pos, a->s[0], n, m);
        return a3_x3(s, 2, buf, B, -1, NULL, 0);
    }
    if (i == 1) {
        mpc_prg_u64(&s->k0, a->s[0], n);
        for (size_t q = 0; q < n; q++) {
            a->s[0][q] &= m;
            a->s[1][q] = 0;
            b->s[0][q] = 0;
            b->s[1][q] = x->s[1][q] & m;
        }
        return a3_x3(s, -1, NULL, 0, -1, NULL, 0);
    }
    if ((rc = a3_x3(s, -1, NULL, 0, 0, buf, B)))
        return rc;
    mpc_unpack_bits(a->s[1], n, m, buf, &pos);
    for (size_t q = 0; q < n; q++) {
        a->s[0][q] = 0;
        b->s[0][q] = x->s[0][q] & m;
        b->s[1][q] = 0;
    }
    return MS_OK;
}

/* daBit b2a with P2 dealing to P0 and P1 (Rotaru–Wood daBits; the 3PC-to-2PC reduction of
 * the replicated sharing). The bit is β0 ^ β1 with β0 = s0 ^ s1 at P0 and β1 = s2 at P1.
 * P2 draws ρ0, a0 from K_0 (shared with P0) and ρ1 from K_2 (shared with P1), r = ρ0 ^ ρ1,
 * and sends P1 a1 = r − a0. Round 1: P0 and P1 open c = β ^ r (packed) while P2 sends a1.
 * Then z0 = c + (1−2c)a0 at P0, z1 = (1−2c)a1 at P1. Round 2: with u, t from K_1 (P0, P1),
 * y0 = z0 + u, y1 = t, y2 = z1 − u − t: P0 sends y0 and P1 sends y2 to P2.
 * COST: b2a_bit: round 1 n P0↔P1 and 8n P2→P1, round 2 8n P0→P2 and 8n P1→P2. */
static int a_b2a_bit(eng *e, mpc_val *z, const mpc_val *x)
{
    a3 *s = A(e);
    size_t n = x->n, B = mpc_packed_bytes(n, 1), pos = 0;
    int i = s->c.party;
    int rc = a3_want(s, x, NULL, DOM_BOOL, "b2a_bit");
    uint64_t *rho = mpc_tmp(&s->c, 0, n), *ar = mpc_tmp(&s->c, 1, n), *cw = mpc_tmp(&s->c, 2, n);
    /* P0, P1: snd packed in full, rcv received in full; P2 reads neither */
    uint8_t *snd = mpc_tmp_bytes_w(&s->c, 3, B), *rcv = mpc_tmp_bytes_w(&s->c, 4, B);
    if (rc || !rho || !ar || !cw || !snd || !rcv)
        return rc ? rc : MS_ERR_NOMEM;
    const void *sb[3] = {0};
    void *rb[3] = {0};
    size_t sl[3] = {0}, rl[3] = {0};
    if (i == 2) {
        uint64_t *r1 = mpc_tmp(&s->c, 5, n);
        if (!r1)
            return MS_ERR_NOMEM;
        mpc_prg_u64(&s->k1, rho, n); /* K_0 */
        mpc_prg_u64(&s->k1, ar, n);
        mpc_prg_u64(&s->k0, r1, n); /* K_2 */
        for (size_t q = 0; q < n; q++)
            ar[q] = ((rho[q] ^ r1[q]) & 1) - ar[q];
        sb[1] = ar, sl[1] = 8 * n;
    } else {
        mpc_prg_u64(i == 0 ? &s->k0 : &s->k1, rho, n); /* P0: K_0, P1: K_2 */
        if (i == 0)
            mpc_prg_u64(&s->k0, ar, n);
        for (size_t q = 0; q < n; q++)
            cw[q] = ((i == 0 ? x->s[0][q] ^ x->s[1][q] : x->s[1][q]) ^ rho[q]) & 1;
        mpc_pack_bits(snd, &pos, cw, n, 1);
        int o = 1 - i;
        sb[o] = snd, sl[o] = B;
        rb[o] = rcv, rl[o] = B;
        if (i == 1)
            rb[2] = ar, rl[2] = 8 * n;
    }
    if ((rc = x3m(s, sb, sl, rb, rl)) || (rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        return rc;
    memset(sb, 0, sizeof sb), memset(rb, 0, sizeof rb);
    memset(sl, 0, sizeof sl), memset(rl, 0, sizeof rl);
    if (i == 2) {
        rb[0] = z->s[1], rl[0] = 8 * n; /* y0 */
        rb[1] = z->s[0], rl[1] = 8 * n; /* y2 */
        return x3m(s, sb, sl, rb, rl);
    }
    uint64_t *u = mpc_tmp(&s->c, 5, n);
    if (!u)
        return MS_ERR_NOMEM;
    pos = 0;
    mpc_unpack_bits(rho, n, 1, rcv, &pos);                  /* the other party's masked bit */
    mpc_prg_u64(i == 0 ? &s->k1 : &s->k0, u, n);            /* K_1 */
    mpc_prg_u64(i == 0 ? &s->k1 : &s->k0, z->s[i == 0], n); /* t = y1 */
    for (size_t q = 0; q < n; q++) {
        uint64_t c = cw[q] ^ rho[q], zz = (i == 0 ? c : 0) + (1 - 2 * c) * ar[q];
        z->s[i == 0 ? 0 : 1][q] = i == 0 ? zz + u[q] : zz - u[q] - z->s[0][q];
    }
    sb[2] = z->s[i == 0 ? 0 : 1], sl[2] = 8 * n;
    return x3m(s, sb, sl, rb, rl);
}

static int a_bool_components(eng *e, mpc_val comps[3], int *nc, const mpc_val *x)
{
    a3 *s = A(e);
    int i = s->c.party;
    *nc = 3;
    for (int j = 0; j < 3; j++) {
        int rc = mpc_ensure(&s->c, &comps[j], x->n, DOM_BOOL); /* the caller allocated them */
        if (rc)
            return rc;
        for (int t = 0; t < 2; t++) {
            if ((i + t) % 3 == j)
                memcpy(comps[j].s[t], x->s[t], x->n * 8);
            else
                memset(comps[j].s[t], 0, x->n * 8);
        }
    }
    return MS_OK;
}

static int a_sync_public(eng *e, uint64_t *v)
{
    a3 *s = A(e); /* no dealer: every party derives it */
    s->c.pub_n++, s->c.pub_sum += *v;
    return MS_OK;
}

static const eng_vt aby3_vt = {
    .alloc = mpc_l_alloc,
    .alloc_w = mpc_l_alloc_w,
    .release = mpc_l_release,
    .add = mpc_l_add,
    .sub = mpc_l_sub,
    .add_pub = mpc_l_add_pub,
    .mul_pub = mpc_l_mul_pub,
    .shift = mpc_l_shift,
    .place2 = mpc_l_place2,
    .and_placed = a_and_placed,
    .bool_components = a_bool_components,
    .permute = mpc_l_permute,
    .concat = mpc_l_concat,
    .scatter = mpc_l_scatter,
    .input = a_input,
    .open = a_open,
    .mul = a_mul,
    .square = a_square,
    .matmul = a_matmul,
    .and_bb = a_and,
    .trunc = a_trunc,
    .b2a = a_b2a,
    .mul_a1b = a_mul_a1b,
    .and_bits = a_and_bits,
    .bool_pair = a_bool_pair,
    .b2a_bit = a_b2a_bit,
    .b2a_word = a_b2a_word,
    .eqz_spu = a_eqz_spu,
    .open_bit = a_open_bit,
    .shuffle = a3_shuffle,
    .sync_public = a_sync_public,
};

/* ---------------------------------------------------------------- construction */

static void mpc_aby3_free(eng *e)
{
    a3 *s = A(e);
    mpc_prg_free(&s->k0);
    mpc_prg_free(&s->k1);
    mpc_core_free(&s->c);
    free(s);
}

static int mpc_aby3_new(eng *e, mpc_net *net, errbuf *err)
{
    a3 *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(err, MS_ERR_NOMEM, "aby3: out of memory");
    e->impl = s;
    e->vt = &aby3_vt;
    e->n_parties = 3;
    int i = mpc_net_self(net);
    s->c.net = net;
    s->c.party = i;
    e->party = i;
    s->c.ns = 2;
    s->c.pub_slot = i == 0 ? 0 : i == 2 ? 1 : -1; /* component 0 lives at P0 s[0] and P2 s[1] */
    uint8_t mine[MPC_KEY_BYTES], next[MPC_KEY_BYTES];
    int rc = mpc_prg_random_key(mine, err);
    if (!rc)
        rc = mpc_prg_init(&s->c.priv, mine, 1, err);
    if (!rc)
        rc = mpc_prg_random_key(mine, err);
    /* K_i to P_{i−1}, K_{i+1} from P_{i+1}: one setup round */
    if (!rc) {
        const void *send[MPC_NODES_MAX] = {0};
        void *recv[MPC_NODES_MAX] = {0};
        size_t slen[MPC_NODES_MAX] = {0}, rlen[MPC_NODES_MAX] = {0};
        send[PREV(i)] = mine;
        slen[PREV(i)] = sizeof mine;
        recv[NEXT(i)] = next;
        rlen[NEXT(i)] = sizeof next;
        rc = mpc_net_round(net, send, slen, recv, rlen, 1, err);
    }
    if (!rc)
        rc = mpc_prg_init(&s->k0, mine, 3, err);
    if (!rc)
        rc = mpc_prg_init(&s->k1, next, 3, err);
    mpc_prg_wipe(mine, sizeof mine);
    mpc_prg_wipe(next, sizeof next);
    return rc;
}

const mpc_backend mpc_backend_aby3 = {
    .name = "aby3",
    .nodes = "P0, P1, P2",
    .attach = mpc_aby3_new,
    .detach = mpc_aby3_free,
    .setup_fixed = NULL,
    .unbind_fixed = NULL,
};
