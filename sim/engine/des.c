/* des.c — the discrete-event engine: a 4-ary min-heap of (time, seq, data) in one array.
 *
 * A 4-ary heap halves the depth of a binary one and keeps a node's children in one cache line
 * pair; sifts move a hole instead of swapping, and a pop bounces the hole to a leaf before
 * placing the last element (Floyd). Keys compare on time, then seq. */
#include "des.h"

#include <assert.h>
#include <stdlib.h>

struct des {
    des_event *h;
    size_t n, cap;
    uint64_t now;
    uint64_t next_seq;
    uint64_t processed;
};

/* ---- lifetime ---------------------------------------------------------------------------- */

des *des_new(size_t cap_hint)
{
    des *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->cap = cap_hint < 16 ? 16 : cap_hint;
    q->h = malloc(q->cap * sizeof *q->h);
    if (!q->h) {
        free(q);
        return NULL;
    }
    return q;
}

void des_free(des *q)
{
    if (!q)
        return;
    free(q->h);
    free(q);
}

void des_reset(des *q)
{
    q->n = 0;
    q->now = 0;
    q->next_seq = 0;
    q->processed = 0;
}

/* ---- heap -------------------------------------------------------------------------------- */

static inline int before(const des_event *a, const des_event *b)
{
    /* branch-free: (time, seq) compared as one 128-bit number */
    unsigned __int128 ka = ((unsigned __int128)a->time << 64) | a->seq;
    unsigned __int128 kb = ((unsigned __int128)b->time << 64) | b->seq;
    return ka < kb;
}

int des_schedule(des *q, uint64_t t, uint64_t data)
{
    assert(t >= q->now && "event scheduled in the past");
    if (q->n == q->cap) {
        size_t nc = q->cap * 2;
        des_event *nh = realloc(q->h, nc * sizeof *nh);
        if (!nh)
            return -1;
        q->h = nh;
        q->cap = nc;
    }
    des_event ev = {t, q->next_seq++, data};
    des_event *h = q->h;
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) >> 2;
        if (!before(&ev, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = ev;
    return 0;
}

int des_pop(des *q, des_event *ev)
{
    if (q->n == 0)
        return 0;
    des_event *h = q->h;
    *ev = h[0];
    assert(ev->time >= q->now && "time went backwards");
    q->now = ev->time;
    q->processed++;
    des_event last = h[--q->n];
    size_t n = q->n, i = 0;
    if (n == 0)
        return 1;
    /* Floyd's bounce: move the hole down to a leaf along the smaller children, then let the
     * last element rise from there (it usually belongs near the bottom). */
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n)
            break;
        size_t best = c;
        if (c + 4 <= n) { /* full node: a branch-free tournament of four */
            size_t b01 = before(&h[c + 1], &h[c]) ? c + 1 : c;
            size_t b23 = before(&h[c + 3], &h[c + 2]) ? c + 3 : c + 2;
            best = before(&h[b23], &h[b01]) ? b23 : b01;
        } else {
            for (size_t j = c + 1; j < n; j++)
                best = before(&h[j], &h[best]) ? j : best;
        }
        h[i] = h[best];
        i = best;
    }
    while (i > 0) {
        size_t parent = (i - 1) >> 2;
        if (!before(&last, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = last;
    return 1;
}

/* ---- inspection -------------------------------------------------------------------------- */

uint64_t des_now(const des *q) { return q->now; }
size_t des_pending(const des *q) { return q->n; }
uint64_t des_processed(const des *q) { return q->processed; }

int des_is_sane(const des *q)
{
    if (!q || q->n > q->cap)
        return 0;
    for (size_t i = 0; i < q->n; i++) {
        if (q->h[i].time < q->now || q->h[i].seq >= q->next_seq)
            return 0;
        if (i > 0 && before(&q->h[i], &q->h[(i - 1) >> 2]))
            return 0;
    }
    return 1;
}
