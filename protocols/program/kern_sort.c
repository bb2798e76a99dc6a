/* kern_sort.c — max and argmax by tree reduction, Batcher odd–even merge sort, top-k (network
 * or shuffle + QuickSelect) (kern_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_int.h"

/* ---- max / argmax: tree reduction ------------------------------------------------------ */

/* The index half of a k_rowmax level: Di = Bi − Ai multiplied by the same c as the values'
 * D in one call ([c; c]·[D; Di]), Ai += c·Di, the index rows rejoined; D becomes c·D. */
static int k_max_index(eng *e, mpc_val *curi, mpc_val *D, const mpc_val *c, size_t R, size_t L)
{
    size_t n = D->n;
    mpc_val Ai, Bi, resti = {0}, Di, DD, CC, T;
    TRY(k_split(e, curi, R, L, &Ai, &Bi, &resti));
    TRY(kal(e, &Di, n, DOM_ARITH));
    TRY(VT->sub(e, &Di, &Bi, &Ai));
    mpc_val pd[2] = {*D, Di}, pc[2] = {*c, *c};
    TRY(k_concat(e, &DD, pd, 2));
    TRY(k_concat(e, &CC, pc, 2));
    TRY(k_imul(e, &T, &CC, &DD));
    krel(e, D), krel(e, &Di), krel(e, &DD), krel(e, &CC);
    TRY(k_slice(e, D, &T, 0, n));
    TRY(k_slice(e, &Di, &T, n, n));
    TRY(VT->add(e, &Ai, &Ai, &Di));
    krel(e, &Bi), krel(e, &T), krel(e, &Di);
    return k_rejoin(e, curi, &Ai, &resti, R, L / 2, (int)(L & 1));
}

/* One level of k_rowmax on R rows of L: c = [A < B] for the pairs (A, B) of the rows' halves,
 * A += c·(B − A) (with curi, the indices alike in the same multiplication), rows rejoined. */
static int k_max_level(eng *e, mpc_val *cur, mpc_val *curi, size_t R, size_t L, int w)
{
    size_t h = L / 2;
    mpc_val A, B, rest = {0}, c, D;
    TRY(k_split(e, cur, R, L, &A, &B, &rest));
    if (!curi && k_lt_bool(e)) { /* SPU: the comparison's bit selects by mul_a1b */
        mpc_val M;
        TRY(k_lt_b(e, &c, &A, &B, w));
        TRY(k_select_bit(e, &M, &c, &B, &A));
        krel(e, &A), krel(e, &B), krel(e, &c);
        return k_rejoin(e, cur, &M, &rest, R, h, (int)(L & 1));
    }
    TRY(k_lt(e, &c, &A, &B, w)); /* 1 where B wins */
    TRY(kal(e, &D, A.n, DOM_ARITH));
    TRY(VT->sub(e, &D, &B, &A));
    if (curi) {
        TRY(k_max_index(e, curi, &D, &c, R, L));
    } else {
        mpc_val T;
        TRY(k_imul(e, &T, &c, &D));
        krel(e, &D);
        D = T;
    }
    TRY(VT->add(e, &A, &A, &D));
    krel(e, &D), krel(e, &B), krel(e, &c);
    return k_rejoin(e, cur, &A, &rest, R, h, (int)(L & 1));
}

/* Row max of R rows of L: ⌈log2 L⌉ levels, each one batched lt over all pairs and one
 * multiplication that selects the value (and, with idx, the index in the same call). */
int k_rowmax(eng *e, mpc_val *mx, mpc_val *ix, const mpc_val *x, size_t R, size_t L, int w)
{
    if (e->kv.compat == KV_COMPAT_CRYPTEN && !ix) /* CrypTen's max (kern_cr.c) */
        return k_max_cr(e, mx, x, R, L);
    mpc_val cur, curi = {0};
    TRY(k_rep(e, &cur, x, 1));
    if (ix)
        TRY(k_iota(e, &curi, x, R, L));
    for (; L > 1; L = L / 2 + (L & 1))
        TRY(k_max_level(e, &cur, ix ? &curi : NULL, R, L, w));
    *mx = cur;
    if (ix)
        *ix = curi;
    return MS_OK;
}

/* ARGMAX: the row max's index, one-hot over the row's n columns; under compat: crypten
 * CrypTen's argmax (kern_cr.c: its max, then eq against it and weighted_index). */
int k_argmax(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int w)
{
    if (e->kv.compat == KV_COMPAT_CRYPTEN)
        return k_rowmax_cr(e, NULL, z, x, R, n);
    mpc_val mx, ix;
    TRY(k_rowmax(e, &mx, &ix, x, R, n, w));
    TRY(k_onehot(e, z, &ix, n));
    krel(e, &mx), krel(e, &ix);
    return MS_OK;
}

/* ---- top-k: Batcher odd–even merge sort ------------------------------------------------- */

/* Comparators (lo, hi) of layer (p, k) of Batcher's odd–even merge sort on n keys (the
 * power-of-two network with every comparator touching a key >= n dropped: those keys act as
 * -inf padding already in place). Fills lo/hi when non-NULL; returns the count. */
size_t kern_oem_layer(size_t n, size_t p, size_t k, uint32_t *lo, uint32_t *hi)
{
    size_t cnt = 0, P2 = 2 * p, keep = 2 * p - k;
    for (size_t j = k % p; j + k < n; j += 2 * k) {
        size_t lim = k < n - j - k ? k : n - j - k;
        if (!lo) { /* t in [j, j+lim) with t mod 2p < 2p - k */
            size_t a = j, b = j + lim;
            size_t cb = (b / P2) * keep + (b % P2 < keep ? b % P2 : keep);
            size_t ca = (a / P2) * keep + (a % P2 < keep ? a % P2 : keep);
            cnt += cb - ca;
            continue;
        }
        for (size_t i = 0; i < lim; i++)
            if ((i + j) / P2 == (i + j + k) / P2) {
                lo[cnt] = (uint32_t)(i + j);
                hi[cnt] = (uint32_t)(i + j + k);
                cnt++;
            }
    }
    return cnt;
}

/* The public maps of one layer (NULL in cost mode): ia, ib the lower and upper key of each of
 * the cnt comparators of every row in each of the nv vectors, map the layer's output over
 * [V; A; B] (a position a comparator touches reads its A or B, the others V). */
static int sort_maps(const mpc_val *V, size_t R, size_t n, int nv, size_t p, size_t k, size_t cnt,
                     uint32_t **ia, uint32_t **ib, uint32_t **map)
{
    size_t N = R * n, P = R * cnt, NV = (size_t)nv;
    *ia = *ib = *map = NULL;
    if (!has_data(V))
        return MS_OK;
    uint32_t *lo = malloc(cnt * sizeof *lo), *hi = malloc(cnt * sizeof *hi);
    uint32_t *a = malloc(NV * P * sizeof *a), *b = malloc(NV * P * sizeof *b);
    uint32_t *mp = malloc(NV * N * sizeof *mp);
    int rc = lo && hi && a && b && mp ? MS_OK : MS_ERR_NOMEM;
    if (!rc) {
        kern_oem_layer(n, p, k, lo, hi);
        for (size_t i = 0; i < NV * N; i++)
            mp[i] = (uint32_t)i;
        for (size_t h = 0; h < NV; h++)
            for (size_t r = 0; r < R; r++)
                for (size_t q = 0; q < cnt; q++) {
                    size_t at = h * P + r * cnt + q;
                    a[at] = (uint32_t)(h * N + r * n + lo[q]);
                    b[at] = (uint32_t)(h * N + r * n + hi[q]);
                    mp[a[at]] = (uint32_t)(NV * N + at);
                    mp[b[at]] = (uint32_t)(NV * N + NV * P + at);
                }
    }
    free(lo), free(hi);
    if (rc) {
        free(a), free(b), free(mp);
        return rc;
    }
    *ia = a, *ib = b, *map = mp;
    return MS_OK;
}

/* Compare-exchange of A and B (nv vectors of P, the keys first): c = [A < B] (desc) or
 * [B < A] on the keys, then A += c·(B − A), B −= c·(B − A) from one multiplication. With an
 * msb variant that keeps the bit boolean (msb: spu) the product is SPU's mul_a1b on that bit
 * (no b2a; SPU's select, libspu/kernel/hal/polymorphic.cc 228-240). The profile compat: spu
 * runs SPU's own compare-exchange instead (hal::sort1d with a secret comparator →
 * odd_even_merge_sort → _cmp_swap, libspu/kernel/hal/permute.cc 85-111 and 117-165): the
 * comparison's bit made arithmetic first (_prefer_a: its B2A) and one ring product per
 * vector (select → _mux), the other side the sum less the first. Under compat: crypten
 * (CrypTen has no sort) the comparison is _ltz and the select crypten.where(c, B, A), two
 * products one after the other (crypten/__init__.py 437-443), on every vector at once; the
 * other side the sum less it: 432 + 64·nv B in 10 rounds a comparator (PRIMITIVES.md). */
static int k_cmp_exchange(eng *e, mpc_val *A, mpc_val *B, size_t P, size_t nv, int w, int desc)
{
    mpc_val Av, Bv, c, C2, D, T;
    int bit = k_lt_bool(e) && e->kv.compat != KV_COMPAT_SPU;
    TRY(k_slice(e, &Av, A, 0, P));
    TRY(k_slice(e, &Bv, B, 0, P));
    if (bit)
        TRY(desc ? k_lt_b(e, &c, &Av, &Bv, w) : k_lt_b(e, &c, &Bv, &Av, w));
    else if (desc)
        TRY(k_lt(e, &c, &Av, &Bv, w)); /* swap when A < B */
    else
        TRY(k_lt(e, &c, &Bv, &Av, w)); /* swap when B < A */
    TRY(k_rep(e, &C2, &c, nv));
    if (e->kv.compat == KV_COMPAT_CRYPTEN) {
        mpc_val Nw;
        TRY(k_select_cr(e, &Nw, &C2, B, A));
        TRY(VT->add(e, B, B, A));
        TRY(VT->sub(e, B, B, &Nw));
        krel(e, A);
        *A = Nw;
        krel(e, &Av), krel(e, &Bv), krel(e, &c), krel(e, &C2);
        return MS_OK;
    }
    TRY(kal(e, &D, nv * P, DOM_ARITH));
    TRY(VT->sub(e, &D, B, A));
    if (bit) {
        TRY(kal(e, &T, nv * P, DOM_ARITH));
        TRY(VT->mul_a1b(e, &T, &D, &C2));
    } else
        TRY(k_imul(e, &T, &C2, &D));
    TRY(VT->add(e, A, A, &T));
    TRY(VT->sub(e, B, B, &T));
    krel(e, &Av), krel(e, &Bv), krel(e, &c), krel(e, &C2), krel(e, &D), krel(e, &T);
    return MS_OK;
}

/* One layer on V = nv vectors of N = R·n ([values] or [values; indices]): compare-exchange
 * cnt pairs per row, the larger value to the lower position when desc, else to the higher.
 * One lt of R·cnt, one multiplication of nv·R·cnt. */
static int k_sort_layer(eng *e, mpc_val *V, size_t R, size_t n, int nv, size_t p, size_t k,
                        size_t cnt, int w, int desc)
{
    size_t N = R * n, P = R * cnt, NV = (size_t)nv;
    uint32_t *ia, *ib, *map;
    mpc_val A, B, cat, nw;
    int rc = sort_maps(V, R, n, nv, p, k, cnt, &ia, &ib, &map);
    if (!rc)
        rc = k_move(e, &A, V, ia, NV * P, DOM_ARITH);
    if (!rc)
        rc = k_move(e, &B, V, ib, NV * P, DOM_ARITH);
    free(ia), free(ib);
    if (!rc)
        rc = k_cmp_exchange(e, &A, &B, P, NV, w, desc);
    if (!rc) {
        mpc_val parts[3] = {*V, A, B};
        rc = k_concat(e, &cat, parts, 3);
    }
    if (!rc)
        rc = k_move(e, &nw, &cat, map, NV * N, DOM_ARITH);
    free(map);
    TRY(rc);
    krel(e, V);
    *V = nw;
    krel(e, &A), krel(e, &B), krel(e, &cat);
    return MS_OK;
}

/* Batcher's odd–even merge sort of every row of V (nv vectors of R·n, the first the keys):
 * ⌈log2 n⌉(⌈log2 n⌉+1)/2 layers, each one lt and one multiplication. */
static int k_sort_net(eng *e, mpc_val *V, size_t R, size_t n, int nv, int w, int desc)
{
    for (size_t p = 1; p < n; p *= 2)
        for (size_t kk = p; kk >= 1; kk /= 2) {
            size_t cnt = kern_oem_layer(n, p, kk, NULL, NULL);
            if (cnt)
                TRY(k_sort_layer(e, V, R, n, nv, p, kk, cnt, w, desc));
        }
    return MS_OK;
}

/* SORT: every row sorted by value (ascending; desc = 1: descending), values only — no index
 * travels, so a layer multiplies one word per comparator where top-k's multiplies two. */
int k_sort(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, int w, int desc)
{
    TRY(k_rep(e, z, x, 1));
    return k_sort_net(e, z, R, n, 1, w, desc);
}

/* Top-k by sorting each row descending with its index travelling (odd–even merge network,
 * ⌈log2 n⌉(⌈log2 n⌉+1)/2 layers), then one-hot rows of the first k indices. */
static int k_topk_sort(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    mpc_val io, V, parts[2], ix, top;
    TRY(k_iota(e, &io, x, R, n));
    parts[0] = *x, parts[1] = io;
    TRY(k_concat(e, &V, parts, 2));
    TRY(k_sort_net(e, &V, R, n, 2, w, 1));
    TRY(k_slice(e, &ix, &V, R * n, R * n));
    TRY(k_cols(e, &top, &ix, R, n, 0, k));
    TRY(k_onehot(e, z, &top, n));
    krel(e, &io), krel(e, &V), krel(e, &ix), krel(e, &top);
    return MS_OK;
}

/* One extraction of k_topk_tree: the one-hot of each row's max (tree + onehot; cr: CrypTen's
 * argmax, kern_cr.c). */
static int k_extract(eng *e, mpc_val *oh, const mpc_val *cur, size_t R, size_t n, int w, int cr)
{
    if (cr)
        return k_rowmax_cr(e, NULL, oh, cur, R, n);
    mpc_val mx, ix;
    TRY(k_rowmax(e, &mx, &ix, cur, R, n, w));
    int rc = k_onehot(e, oh, &ix, n);
    krel(e, &mx), krel(e, &ix);
    return rc;
}

/* Top-k by k extractions: argmax, then the winner is pushed 2^20 below everything (a local
 * multiplication of the public one-hot weight), k times. cr: CrypTen's argmax. */
static int k_topk_tree(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w,
                       int cr)
{
    mpc_val cur, *oh = calloc(k, sizeof *oh), cat;
    if (!oh || k > INT32_MAX) {
        free(oh);
        return MS_ERR_NOMEM;
    }
    int rc = k_rep(e, &cur, x, 1);
    size_t q = 0;
    for (; !rc && q < k; q++) {
        mpc_val pen;
        rc = k_extract(e, &oh[q], &cur, R, n, w, cr);
        if (!rc)
            rc = k_scaled(e, &pen, &oh[q], FX(1048576.0));
        if (!rc) {
            rc = VT->sub(e, &cur, &cur, &pen);
            krel(e, &pen);
        }
    }
    if (!rc)
        rc = k_concat(e, &cat, oh, (int)k); /* (q, r, j) → (r, q, j) */
    uint32_t *idx = NULL;
    if (!rc)
        rc = pub32(x, R * k * n, &idx);
    if (!rc) {
        if (idx)
            for (size_t r = 0; r < R; r++)
                for (size_t s = 0; s < k; s++)
                    for (size_t j = 0; j < n; j++)
                        idx[(r * k + s) * n + j] = (uint32_t)((s * R + r) * n + j);
        rc = k_move(e, z, &cat, idx, R * k * n, DOM_ARITH);
        free(idx);
        krel(e, &cat);
    }
    for (size_t s = 0; s < q && s < k; s++)
        krel(e, &oh[s]);
    free(oh);
    krel(e, &cur);
    return rc;
}

static int ceil_log2(int v)
{
    int l = 0;
    while ((1 << l) < v)
        l++;
    return l;
}

/* Rounds of k_lt and k_eqz at width w, from their constructions (for the public choice
 * between top-k's two constructions). */
static uint64_t rounds_lt(const eng *e, int w)
{
    int three = e->n_parties == 3, b2a = three ? 2 : 1;
    if (k_packed(e))
        return (uint64_t)(three + 1 + ceil_log2((w > 1 && w < 64 ? w : 64) - 1) + b2a);
    return (uint64_t)(three + 7 + b2a);
}

static uint64_t rounds_eq(const eng *e, int w)
{
    int three = e->n_parties == 3, b2a = three ? 2 : 1;
    if (k_packed(e))
        return (uint64_t)(three + ceil_log2(w >= 1 && w < 64 ? w : 64) + b2a);
    return (uint64_t)(three + 6 + b2a);
}

/* ---- top-k: shuffle + QuickSelect (SPU topk_1d) ----------------------------------------- */

static uint64_t qs_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One partition of row r's interval [lo[r], hi[r]] around its first element, given g[j] = 1
 * when the element at position lo+1+j is larger than the pivot (SPU TwoWayPartition's two
 * pointers): larger elements to the left, the pivot between; then the interval narrows to the
 * side holding position k−1, and the row is done when the pivot lands there or one element
 * is left. cur maps positions to elements (public). */
static void qs_partition(uint32_t *cur, uint8_t *g, uint32_t *lo, uint32_t *hi, uint8_t *act,
                         size_t k)
{
    uint32_t l = *lo, left = l + 1, right = *hi;
    uint8_t *f = g - (l + 1); /* f[p]: the flag of position p */
    for (;;) {
        while (left <= right && f[left])
            left++;
        while (left <= right && !f[right])
            right--;
        if (left > right)
            break;
        uint32_t t = cur[left];
        cur[left] = cur[right], cur[right] = t;
        uint8_t u = f[left];
        f[left] = f[right], f[right] = u;
        left++, right--;
    }
    uint32_t t = cur[l]; /* the pivot to its place: after the right-most larger element */
    cur[l] = cur[right], cur[right] = t;
    uint32_t p = right;
    if (p == k - 1) {
        *act = 0;
        return;
    }
    if (p > k - 1)
        *hi = p - 1;
    else
        *lo = p + 1;
    *act = *lo < *hi;
}

/* QuickSelect's public state: per row the element at each position (cur), the interval
 * [lo, hi] and whether it is still active; g the partition flags; rank (cost mode) a seeded
 * random order standing in for the revealed comparisons. */
typedef struct qs_state {
    uint32_t *cur, *lo, *hi;
    uint8_t *act, *g;
    uint64_t *rank;
    size_t R, n, k;
} qs_state;

static void qs_free(qs_state *s)
{
    free(s->cur), free(s->lo), free(s->hi), free(s->act), free(s->g), free(s->rank);
}

static int qs_init(qs_state *s, size_t R, size_t n, size_t k, int data)
{
    size_t N = R * n;
    *s = (qs_state){malloc(N * sizeof *s->cur),
                    malloc(R * sizeof *s->lo),
                    malloc(R * sizeof *s->hi),
                    malloc(R),
                    malloc(N),
                    data ? NULL : malloc(N * sizeof *s->rank),
                    R,
                    n,
                    k};
    if (!s->cur || !s->lo || !s->hi || !s->act || !s->g || (!data && !s->rank)) {
        qs_free(s);
        return MS_ERR_NOMEM;
    }
    uint64_t seed = 0x71c5e1ec7ull ^ ((uint64_t)n << 32) ^ ((uint64_t)k << 8) ^ R, *rk = s->rank;
    for (size_t r = 0; r < R; r++) {
        s->lo[r] = 0, s->hi[r] = (uint32_t)(n - 1), s->act[r] = k < n && n > 1;
        for (size_t i = 0; i < n; i++)
            s->cur[r * n + i] = (uint32_t)i;
        for (size_t i = 0; rk && i < n; i++)
            rk[r * n + i] = i;
        for (size_t i = n - 1; rk && i > 0; i--) {
            size_t j = qs_mix(&seed) % (i + 1);
            uint64_t t = rk[r * n + i];
            rk[r * n + i] = rk[r * n + j], rk[r * n + j] = t;
        }
    }
    return MS_OK;
}

/* The step's comparisons: each active row's pivot (ia) against the rest of its interval (ib). */
static void qs_pairs(const qs_state *s, uint32_t *ia, uint32_t *ib)
{
    size_t n = s->n;
    for (size_t r = 0, q = 0; r < s->R; r++)
        for (uint32_t p = s->lo[r] + 1; s->act[r] && p <= s->hi[r]; p++, q++)
            ia[q] = (uint32_t)(r * n + s->cur[r * n + s->lo[r]]),
            ib[q] = (uint32_t)(r * n + s->cur[r * n + p]);
}

/* Every active row partitioned by its revealed flags (bits; cost mode: the rank order). */
static void qs_partitions(qs_state *s, const uint64_t *bits)
{
    size_t n = s->n;
    for (size_t r = 0, q = 0; r < s->R; r++) {
        if (!s->act[r])
            continue;
        uint32_t len = s->hi[r] - s->lo[r], *cur = s->cur + r * n;
        for (uint32_t j = 0; j < len; j++)
            s->g[r * n + j] =
                bits ? (uint8_t)(bits[q + j] & 1)
                     : s->rank[r * n + cur[s->lo[r] + 1 + j]] > s->rank[r * n + cur[s->lo[r]]];
        q += len;
        qs_partition(cur, s->g + r * n, &s->lo[r], &s->hi[r], &s->act[r], s->k);
    }
}

/* [keys; positions] of every row shuffled by one secret permutation per row, the keys
 * x·2^b + (2^b − 1 − j) (b = ⌈log2 n⌉, local). */
static int k_qs_shuffled(eng *e, mpc_val *S, const mpc_val *x, size_t R, size_t n)
{
    size_t N = R * n;
    unsigned b = 0;
    while (((size_t)1 << b) < n)
        b++;
    mpc_val key, io, V, parts[2];
    TRY(k_scaled(e, &key, x, (uint64_t)1 << b));
    uint64_t *c;
    TRY(pub64(x, N, &c));
    if (c)
        for (size_t i = 0; i < N; i++)
            c[i] = ((uint64_t)1 << b) - 1 - i % n;
    int rc = VT->add_pub(e, &key, &key, c, N);
    free(c);
    TRY(rc);
    TRY(k_iota(e, &io, x, R, n));
    parts[0] = key, parts[1] = io;
    TRY(k_concat(e, &V, parts, 2));
    krel(e, &key), krel(e, &io);
    TRY(kal(e, S, 2 * N, DOM_ARITH));
    TRY(VT->shuffle(e, S, &V, n, 2));
    krel(e, &V);
    return MS_OK;
}

/* One QuickSelect step of every active row: its pivot against the rest of its interval, all
 * rows in one lt and one OPEN to all, then the public partitions (under compat: spu the
 * comparison's boolean bit, opened as SPU's b2p reveals it: open_bit). *C: the comparisons made
 * known to every node (sync_public; 0: every row is done). */
static int k_qs_step(eng *e, qs_state *s, const mpc_val *S, const mpc_val *x, int w, uint64_t *C)
{
    uint64_t own = 0;
    for (size_t r = 0; r < s->R; r++)
        own += s->act[r] ? s->hi[r] - s->lo[r] : 0;
    *C = own;
    TRY(VT->sync_public(e, C));
    if (!*C)
        return MS_OK;
    int mine = *C == own; /* semi2k's dealer may follow counts its own order did not give */
    uint32_t *ia = NULL, *ib = NULL;
    uint64_t *bits = NULL;
    mpc_val A, B, cb;
    int rc = pub32(x, *C, &ia);
    if (!rc)
        rc = pub32(x, *C, &ib);
    if (!rc)
        rc = pub64(x, *C, &bits);
    if (!rc && ia && mine)
        qs_pairs(s, ia, ib);
    int spu = e->kv.compat == KV_COMPAT_SPU && k_lt_bool(e) && VT->open_bit;
    if (!rc && !(rc = k_move(e, &A, S, ia, *C, DOM_ARITH)) &&
        !(rc = k_move(e, &B, S, ib, *C, DOM_ARITH)) &&
        !(rc = spu ? k_lt_b(e, &cb, &A, &B, w) : k_lt(e, &cb, &A, &B, w)) &&
        !(rc = spu ? VT->open_bit(e, bits, &cb) : VT->open(e, bits, &cb, -1))) {
        krel(e, &A), krel(e, &B), krel(e, &cb);
        if (mine)
            qs_partitions(s, bits);
    }
    free(ia), free(ib), free(bits);
    return rc;
}

/* z = the one-hot rows (over n) of the positions payload at positions 0 … k−1 of each row. */
static int k_qs_output(eng *e, mpc_val *z, const mpc_val *S, const qs_state *s, const mpc_val *x)
{
    size_t R = s->R, n = s->n, k = s->k;
    uint32_t *ix;
    mpc_val top;
    TRY(pub32(x, R * k, &ix));
    if (ix)
        for (size_t r = 0; r < R; r++)
            for (size_t q = 0; q < k; q++)
                ix[r * k + q] = (uint32_t)(R * n + r * n + s->cur[r * n + q]);
    int rc = k_move(e, &top, S, ix, R * k, DOM_ARITH);
    free(ix);
    TRY(rc);
    rc = k_onehot(e, z, &top, n);
    krel(e, &top);
    return rc;
}

/* Top-k of R rows of n by a secret shuffle and QuickSelect with revealed comparisons (SPU
 * libspu/kernel/hal/permute.cc topk_1d → PrepareInput, QuickSelectTopk, TwoWayPartition),
 * the rows advancing together (MPCache infer/rank.cc runs the heads concurrently): output
 * (R·k, n) one-hot rows of the k largest, in the order the selection leaves them (the set is
 * exact; not sorted).
 *   keys   x·2^b + (2^b − 1 − j), b = ⌈log2 n⌉ (local): distinct, larger value first and equal
 *          values by smaller position, so the revealed pattern is that of a random order (SPU
 *          adds a secret random tie-breaker instead: `confusion`). Exact while
 *          |x·2^f|·2^b < 2^62.
 *   shuffle [keys; positions] by one secret permutation per row (eng shuffle, 2 rounds).
 *   loop   per active row one comparison of its pivot (first element of its interval) with the
 *          rest, all rows in one LT and one OPEN to all; the partition and the narrowing are
 *          public local work (swaps of shares). A row stops when its pivot lands at position
 *          k−1 or one element is left.
 *   output the positions payload of positions 0 … k−1, one-hot over n.
 * Rounds: 2 + I·(r_lt + 1) + r_eq, I the partitions of the slowest row; bytes follow the
 * interval sizes. Both depend on the data's order after the shuffle — a draw from a
 * distribution that does not depend on the data (keys are distinct): E[I] per row is
 * H_k + H_(n−k+1) − 2 + (a last pivot) ≈ ln k + ln(n − k) (an element j ≠ k-th is ever a
 * pivot with probability 1/(|rank j − k| + 1)). With data the outcomes come from the OPEN; on a
 * cost engine from a seeded random order of the same shape (the security argument's
 * simulator), so a step's cost is one fixed draw; the count of each step is made known to
 * semi2k's dealer (sync_public), which follows the sizes without the outcomes. */
static int k_topk_qs(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    mpc_val S;
    qs_state s;
    uint64_t C = 1;
    TRY(k_qs_shuffled(e, &S, x, R, n));
    TRY(qs_init(&s, R, n, k, has_data(x)));
    int rc = MS_OK;
    while (!rc && C)
        rc = k_qs_step(e, &s, &S, x, w, &C);
    if (!rc)
        rc = k_qs_output(e, z, &S, &s, x);
    qs_free(&s);
    krel(e, &S);
    return rc;
}

/* Top-k of R rows of n, output (R·k, n) one-hot rows in descending order. Whichever of the
 * two constructions has fewer rounds for these public shapes: k extractions cost
 * k(⌈log2 n⌉(r_lt + 1) + r_eq), the sorting network L(r_lt + 1) + r_eq with L its non-empty
 * layers (r_lt, r_eq the rounds of lt at the values' bound w and of the one-hot's eq). */
/* topk: network — k max extractions or an odd–even merge sort, whichever has fewer rounds */
static int k_topk_net(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    uint64_t r_lt = rounds_lt(e, w), r_eq = rounds_eq(e, k_packed(e) ? idx_bits(n) : 64);
    uint64_t lv = 0, layers = 0;
    while (((size_t)1 << lv) < n)
        lv++;
    for (size_t p = 1; p < n; p *= 2)
        for (size_t kk = p; kk >= 1; kk /= 2)
            layers += kern_oem_layer(n, p, kk, NULL, NULL) > 0;
    uint64_t tree = k * (lv * (r_lt + 1) + r_eq), sort = layers * (r_lt + 1) + r_eq;
    if (k <= 64 && tree < sort)
        return k_topk_tree(e, z, x, R, n, k, w, 0);
    return k_topk_sort(e, z, x, R, n, k, w);
}

/* topk: crypten — CrypTen has no top-k: k of its argmaxes or the sort network with CrypTen's
 * compare-exchange, by the rule of kern_cr.c kern_topk_cr_argmaxes (fewer rounds). */
static int k_topk_cr(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    if (kern_topk_cr_argmaxes(n, k))
        return k_topk_tree(e, z, x, R, n, k, w, 1);
    return k_topk_sort(e, z, x, R, n, k, w);
}

const kv_topk_row kv_topk_tab[KV_TOPK_N] = {
    [KV_TOPK_NETWORK] = {"network", k_topk_net, 0,
                         "oblivious: k max extractions or Batcher's odd–even merge sort"},
    [KV_TOPK_QUICKSELECT] = {"quickselect", k_topk_qs, 1,
                             "SPU topk_1d: a secret shuffle, then QuickSelect with revealed "
                             "pivot comparisons"},
    [KV_TOPK_CRYPTEN] = {"crypten", k_topk_cr, 0,
                         "CrypTen has none: k of its argmaxes or Batcher's odd-even merge sort on "
                         "its comparison and where, whichever has fewer rounds (compat: crypten)"},
};

int k_topk(eng *e, mpc_val *z, const mpc_val *x, size_t R, size_t n, size_t k, int w)
{
    return kv_topk_tab[e->kv.topk].fn(e, z, x, R, n, k, w);
}
