/* des.c — the discrete-event engine: a 4-ary min-heap of (time, seq, data) in one array.
 *
 * A 4-ary heap halves the depth of a binary one and keeps a node's children in one cache line
 * pair; sift-down moves a hole instead of swapping. Keys compare on time, then seq. */
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
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
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
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n)
            break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t j = c + 1; j < end; j++)
            if (before(&h[j], &h[best]))
                best = j;
        if (!before(&h[best], &last))
            break;
        h[i] = h[best];
        i = best;
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
