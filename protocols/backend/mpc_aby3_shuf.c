/* mpc_aby3_shuf.c — aby3's shuffle on real shares (eng.h's shuffle), a protocol of its own
 * beside the engine in mpc_aby3.c: three permutations each known to two parties, the
 * vectors masked between them and reshared 2-out-of-3 at the end. */
#include <stdlib.h>
#include <string.h>

#include "mpc_aby3_int.h"
#include "mpc_local.h"

/* Shuffle (eng.h), eprint 2019/695 Algorithm 9 as SPU aby3 PermAM: π = π2∘π1∘π0, π_j drawn from
 * key K_j (held by P_j and P_{j−1}: π0 by P0, P2; π1 by P0, P1; π2 by P1, P2). P0 and P2 split
 * π0(x) as P0's π0(x0 + x1) − a and P2's γ = π0(x2) + a (a from K_0), γ to P1; P0 and P1 apply
 * π1 with mask b (K_1), P0's δ = π1(π0(x0+x1) − a) − b to P2; P1 and P2 apply π2 and reshare
 * 2-out-of-3: y0 = r0 (K_0), y1 = r1 (K_1), y2 = (β1 − r1) + (β2 − r0) exchanged by P1, P2.
 * Draws: K_0: π0, a, r0; K_1: π1, b, r1; K_2: π2. */

/* One shuffle's vectors: n elements in parts of M, permuted in runs of seg; w and w2 the seeds
 * of this party's two permutations (P0: π0, π1; P1: π2, π1; P2: π0, π2), m0 = a, t = b (kept
 * until used), r0, r1 the reshare's masks, u and v the messages. */
typedef struct shuf {
    size_t n, M, seg, parts;
    uint64_t *buf, *m0, *r0, *r1, *t, *u, *v, *w, *w2;
    uint32_t *pi;
} shuf;

static int shuf_alloc(shuf *h, size_t n, size_t M, size_t seg, size_t parts)
{
    uint64_t *buf = malloc((6 * n + 2 * M + 1) * sizeof *buf);
    uint32_t *pi = malloc((M + 1) * sizeof *pi);
    if (!buf || !pi) {
        free(buf), free(pi);
        return MS_ERR_NOMEM;
    }
    *h = (shuf){n,
                M,
                seg,
                parts,
                buf,
                buf,
                buf + n,
                buf + 2 * n,
                buf + 3 * n,
                buf + 4 * n,
                buf + 5 * n,
                buf + 6 * n,
                buf + 6 * n + M,
                pi};
    return MS_OK;
}

/* dst = π(src), π the permutation drawn as seed w, applied to every part. */
static void shuf_perm(shuf *h, uint64_t *dst, const uint64_t *src, const uint64_t *w)
{
    mpc_perm_from(h->pi, w, h->M, h->seg);
    mpc_perm_apply(dst, src, h->pi, h->M, h->parts);
}

/* Every draw from the keys this party holds (K_i in k0, K_{i+1} in k1), in key order. */
static void shuf_draw(a3 *s, shuf *h)
{
    int i = s->c.party;
    mpc_prg *K0 = i == 0 ? &s->k0 : i == 2 ? &s->k1 : NULL;
    mpc_prg *K1 = i == 0 ? &s->k1 : i == 1 ? &s->k0 : NULL;
    mpc_prg *K2 = i == 1 ? &s->k1 : i == 2 ? &s->k0 : NULL;
    if (K0) { /* π0, a, r0 */
        mpc_prg_u64(K0, h->w, h->M);
        mpc_prg_u64(K0, h->m0, h->n);
        mpc_prg_u64(K0, h->r0, h->n);
    }
    if (K1) { /* π1, b, r1 */
        mpc_prg_u64(K1, h->w2, h->M);
        mpc_prg_u64(K1, h->t, h->n); /* b, kept in t until used */
        mpc_prg_u64(K1, h->r1, h->n);
    }
    if (K2 && i == 1)
        mpc_prg_u64(K2, h->w, h->M); /* P1: π2 (it holds no π0) */
    if (K2 && i == 2)
        mpc_prg_u64(K2, h->w2, h->M); /* P2: π2 beside its π0 */
}

/* P0: round 1 sends P2 δ = π1(π0(x0 + x1) − a) − b; round 2 it only waits. */
static int shuf_p0(a3 *s, shuf *h, const mpc_val *x)
{
    size_t n = h->n;
    uint64_t *u = h->u, *v = h->v;
    for (size_t k = 0; k < n; k++)
        u[k] = x->s[0][k] + x->s[1][k];
    shuf_perm(h, v, u, h->w);
    for (size_t k = 0; k < n; k++)
        v[k] -= h->m0[k];
    shuf_perm(h, u, v, h->w2);
    for (size_t k = 0; k < n; k++)
        u[k] -= h->t[k]; /* δ */
    int rc = a3_x3(s, 2, u, 8 * n, -1, NULL, 0);
    return rc ? rc : a3_x3(s, -1, NULL, 0, -1, NULL, 0);
}

/* P1: round 1 receives γ from P2; round 2 sends P2 β1 − r1 = π2(π1(γ) + b) − r1 and receives
 * β2 − r0 into v. */
static int shuf_p1(a3 *s, shuf *h)
{
    size_t n = h->n;
    uint64_t *u = h->u, *v = h->v;
    int rc = a3_x3(s, -1, NULL, 0, 2, u, 8 * n); /* γ */
    if (rc)
        return rc;
    shuf_perm(h, v, u, h->w2);
    for (size_t k = 0; k < n; k++)
        v[k] += h->t[k];      /* π1(γ) + b */
    shuf_perm(h, u, v, h->w); /* β1 */
    for (size_t k = 0; k < n; k++)
        u[k] -= h->r1[k];
    return a3_x3(s, 2, u, 8 * n, 2, v, 8 * n);
}

/* P2: round 1 sends P1 γ = π0(x2) + a and receives δ; round 2 sends P1 β2 − r0 = π2(δ) − r0
 * and receives β1 − r1 into v. */
static int shuf_p2(a3 *s, shuf *h, const mpc_val *x)
{
    size_t n = h->n;
    uint64_t *u = h->u, *v = h->v;
    shuf_perm(h, u, x->s[0], h->w);
    for (size_t k = 0; k < n; k++)
        u[k] += h->m0[k];                        /* γ */
    int rc = a3_x3(s, 1, u, 8 * n, 0, v, 8 * n); /* δ into v */
    if (rc)
        return rc;
    shuf_perm(h, u, v, h->w2); /* β2 */
    for (size_t k = 0; k < n; k++)
        u[k] -= h->r0[k];
    return a3_x3(s, 1, u, 8 * n, 1, v, 8 * n);
}

/* Party i's two components of the result: y_i and y_{i+1} (y2 = u + v at P1 and P2). */
static void shuf_result(const shuf *h, int i, mpc_val *z)
{
    size_t n = h->n;
    if (i == 0) {
        memcpy(z->s[0], h->r0, n * 8);
        memcpy(z->s[1], h->r1, n * 8);
    } else if (i == 1) {
        memcpy(z->s[0], h->r1, n * 8);
        for (size_t k = 0; k < n; k++)
            z->s[1][k] = h->u[k] + h->v[k];
    } else {
        for (size_t k = 0; k < n; k++)
            z->s[0][k] = h->u[k] + h->v[k];
        memcpy(z->s[1], h->r0, n * 8);
    }
}

int a3_shuffle(eng *e, mpc_val *z, const mpc_val *x, size_t seg, size_t parts)
{
    a3 *s = A(e);
    size_t n = x->n, M = parts ? n / parts : 0;
    int i = s->c.party;
    if (!seg || !parts || M * parts != n || M % seg)
        return mpc_fail(&s->c, MS_ERR_INTERNAL,
                        "aby3 shuffle: %zu elements in %zu parts of runs of %zu", n, parts, seg);
    shuf h;
    int rc = a3_want(s, x, NULL, DOM_ARITH, "shuffle");
    if (rc || (rc = shuf_alloc(&h, n, M, seg, parts)))
        return rc;
    shuf_draw(s, &h);
    /* COST: round 1: P0 → P2 δ, P2 → P1 γ (8n each); round 2: P1 ↔ P2 (8n each way) */
    rc = i == 0 ? shuf_p0(s, &h, x) : i == 1 ? shuf_p1(s, &h) : shuf_p2(s, &h, x);
    if (!rc && !(rc = mpc_ensure(&s->c, z, n, DOM_ARITH)))
        shuf_result(&h, i, z);
    free(h.buf), free(h.pi);
    return rc;
}
