/* kvshare.c — the shared KV pool: units (blocks or insensitive runs), an LRU list of unheld
 * units, a block-hash table (prefix, salted) and a k-gram anchor index (span). */
#include "kvshare.h"

#include <stdlib.h>
#include <string.h>

#include "protocols/base/grow.h"

#define NIL UINT32_MAX
#define SPAN_MAX_CANDIDATES 16 /* anchor hits verified per prompt position */

typedef struct unit {
    uint64_t key;        /* prefix/salted: chained block hash */
    uint32_t ref;        /* holders; 0 = on the LRU list */
    uint32_t prev, next; /* LRU list (ref == 0) or free list (next only) */
    uint32_t hnext;      /* block table chain */
    uint32_t n_tok;
    uint32_t pos0; /* span: position of its first token where it was computed */
    uint32_t *tok; /* span: its tokens */
    uint8_t live;
} unit;

typedef struct anchor {
    uint64_t key;
    uint32_t unit, off, next;
} anchor;

struct kvs {
    kvs_params p;
    unit *u;
    size_t n_u, cap_u;
    uint32_t free_u; /* free unit slots (via next) */
    uint32_t lru_head, lru_tail;
    uint32_t *bucket; /* block table or anchor index */
    size_t n_bucket;  /* power of two */
    anchor *a;
    size_t n_a, cap_a;
    uint32_t free_a;
    kvs_stats st;
};

static const char *const kind_names[KVS_N] = {"none", "prefix", "salted", "span"};

const char *kvs_kind_name(int kind) { return kind >= 0 && kind < KVS_N ? kind_names[kind] : "?"; }

int kvs_kind_from_name(const char *s)
{
    for (int k = 0; k < KVS_N; k++)
        if (!strcmp(s, kind_names[k]))
            return k;
    return -1;
}

const char *const *kvs_kind_names(size_t *n)
{
    *n = KVS_N;
    return kind_names;
}

void kvs_params_default(kvs_params *p)
{
    *p = (kvs_params){.kind = KVS_PREFIX,
                      .block = 16,
                      .capacity_tokens = 1u << 20,
                      .min_span = 16,
                      .position = KVS_POS_REROTATE};
}

/* ---- hashing ---------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) /* splitmix64 finalizer */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* vLLM: hash(parent_block_hash, block_tokens, extra_hashes); the salt enters the first block. */
static uint64_t block_hash(uint64_t parent, const uint32_t *t, uint32_t n)
{
    uint64_t h = mix64(parent + 0x9e3779b97f4a7c15ULL);
    for (uint32_t i = 0; i < n; i++)
        h = mix64(h ^ ((uint64_t)t[i] + 1));
    return h;
}

#define ROLL_BASE 0x100000001b3ULL
static uint64_t roll_init(const uint32_t *t, uint32_t k)
{
    uint64_t h = 0;
    for (uint32_t i = 0; i < k; i++)
        h = h * ROLL_BASE + t[i] + 1;
    return h;
}

static size_t bucket_of(const kvs *c, uint64_t key) { return mix64(key) & (c->n_bucket - 1); }

/* ---- units and the LRU list ------------------------------------------------------------- */

static void lru_unlink(kvs *c, uint32_t i)
{
    unit *x = &c->u[i];
    if (x->prev != NIL)
        c->u[x->prev].next = x->next;
    else
        c->lru_head = x->next;
    if (x->next != NIL)
        c->u[x->next].prev = x->prev;
    else
        c->lru_tail = x->prev;
    x->prev = x->next = NIL;
}

static void lru_append(kvs *c, uint32_t i)
{
    unit *x = &c->u[i];
    x->prev = c->lru_tail;
    x->next = NIL;
    if (c->lru_tail != NIL)
        c->u[c->lru_tail].next = i;
    else
        c->lru_head = i;
    c->lru_tail = i;
}

static int hold_push(kvs_hold *h, uint32_t i)
{
    if (ms_grow(&h->unit, &h->cap, h->n, sizeof *h->unit, 16))
        return -1;
    h->unit[h->n++] = i;
    return 0;
}

static int hold_unit(kvs *c, kvs_hold *h, uint32_t i)
{
    if (hold_push(h, i))
        return -1;
    if (c->u[i].ref++ == 0)
        lru_unlink(c, i);
    return 0;
}

static uint32_t unit_alloc(kvs *c)
{
    if (c->free_u != NIL) {
        uint32_t i = c->free_u;
        c->free_u = c->u[i].next;
        return i;
    }
    if (ms_grow(&c->u, &c->cap_u, c->n_u, sizeof *c->u, 256))
        return NIL;
    return (uint32_t)c->n_u++;
}

static void anchors_remove(kvs *c, uint32_t ui);

/* Evicts the least recently released unit; 0 if there was none. */
static int evict_one(kvs *c)
{
    uint32_t i = c->lru_head;
    if (i == NIL)
        return 0;
    lru_unlink(c, i);
    unit *x = &c->u[i];
    if (c->p.kind == KVS_SPAN) {
        anchors_remove(c, i);
        free(x->tok);
        x->tok = NULL;
    } else {
        uint32_t *pp = &c->bucket[bucket_of(c, x->key)];
        while (*pp != i)
            pp = &c->u[*pp].hnext;
        *pp = x->hnext;
    }
    c->st.used_tokens -= x->n_tok;
    c->st.evicted_tokens += x->n_tok;
    x->live = 0;
    x->next = c->free_u;
    c->free_u = i;
    return 1;
}

/* Makes room for n tokens; 0 when the pool is full of held units. */
static int make_room(kvs *c, uint64_t n)
{
    if (n > c->p.capacity_tokens)
        return 0;
    while (c->st.used_tokens + n > c->p.capacity_tokens)
        if (!evict_one(c))
            return 0;
    return 1;
}

static void account(kvs *c, uint32_t n)
{
    c->st.used_tokens += n;
    c->st.inserted_tokens += n;
    if (c->st.used_tokens > c->st.peak_tokens)
        c->st.peak_tokens = c->st.used_tokens;
}

/* ---- open / close ----------------------------------------------------------------------- */

int kvs_open(const kvs_params *p, kvs **out, errbuf *e)
{
    if (p->kind < 0 || p->kind >= KVS_N)
        return err_set(e, MS_ERR_RANGE, "kvshare: unknown policy %d", p->kind);
    if ((p->kind == KVS_PREFIX || p->kind == KVS_SALTED) && p->block == 0)
        return err_set(e, MS_ERR_RANGE, "kvshare: block must be >= 1");
    if (p->kind == KVS_SPAN && p->min_span == 0)
        return err_set(e, MS_ERR_RANGE, "kvshare: min_span must be >= 1");
    kvs *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(e, MS_ERR_NOMEM, "out of memory for the KV cache");
    c->p = *p;
    c->free_u = c->lru_head = c->lru_tail = c->free_a = NIL;
    uint64_t want = p->capacity_tokens / (p->kind == KVS_SPAN ? 1 : (p->block ? p->block : 1));
    if (want > (1u << 22))
        want = 1u << 22;
    c->n_bucket = 1024;
    while (c->n_bucket < want)
        c->n_bucket *= 2;
    c->bucket = malloc(c->n_bucket * sizeof *c->bucket);
    if (!c->bucket) {
        free(c);
        return err_set(e, MS_ERR_NOMEM, "out of memory for the KV cache index");
    }
    memset(c->bucket, 0xff, c->n_bucket * sizeof *c->bucket);
    *out = c;
    return MS_OK;
}

void kvs_close(kvs *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_u; i++)
        free(c->u[i].tok);
    free(c->u);
    free(c->a);
    free(c->bucket);
    free(c);
}

void kvs_hold_free(kvs_hold *h)
{
    free(h->unit);
    memset(h, 0, sizeof *h);
}

const kvs_stats *kvs_get_stats(const kvs *c) { return &c->st; }

/* ---- prefix and salted: block hash chains ----------------------------------------------- */

static uint64_t chain_seed(const kvs *c, const kvs_prompt *p)
{
    /* COST: none — hashing is the client's (plaintext block hashes, as vLLM's scheduler sees) */
    if (c->p.kind == KVS_SALTED)
        return mix64(((uint64_t)p->tenant << 32 | p->user) ^ 0x5a17ULL) | 1;
    return 0;
}

static uint32_t block_find(const kvs *c, uint64_t key)
{
    for (uint32_t i = c->bucket[bucket_of(c, key)]; i != NIL; i = c->u[i].hnext)
        if (c->u[i].key == key)
            return i;
    return NIL;
}

static int prefix_lookup(kvs *c, const kvs_prompt *p, kvs_match *m, kvs_hold *hold)
{
    uint32_t B = c->p.block, nb = (p->n - 1) / B; /* the last token is always computed */
    uint64_t h = chain_seed(c, p);
    uint32_t j = 0;
    for (; j < nb; j++) {
        h = block_hash(h, p->tok + (size_t)j * B, B);
        uint32_t i = block_find(c, h);
        if (i == NIL)
            break;
        if (hold && hold_unit(c, hold, i))
            return MS_ERR_NOMEM;
    }
    m->hit_tokens = j * B;
    if (j) {
        m->n_pieces = 1;
        m->piece_start[0] = 0;
        m->piece_len[0] = j * B;
    }
    return MS_OK;
}

static int prefix_insert(kvs *c, const kvs_prompt *p, const kvs_match *m, kvs_hold *hold)
{
    uint32_t B = c->p.block, nb = p->n / B, j0 = m->hit_tokens / B;
    uint64_t h = chain_seed(c, p);
    for (uint32_t j = 0; j < nb; j++) {
        h = block_hash(h, p->tok + (size_t)j * B, B);
        if (j < j0)
            continue;
        uint32_t i = block_find(c, h);
        if (i == NIL) {
            if (!make_room(c, B)) {
                c->st.dropped_tokens += (uint64_t)(nb - j) * B;
                return MS_OK; /* later blocks would be unreachable without this one */
            }
            if ((i = unit_alloc(c)) == NIL)
                return MS_ERR_NOMEM;
            c->u[i] = (unit){.key = h, .ref = 0, .prev = NIL, .next = NIL, .n_tok = B, .live = 1};
            size_t b = bucket_of(c, h);
            c->u[i].hnext = c->bucket[b];
            c->bucket[b] = i;
            account(c, B);
            lru_append(c, i); /* hold_unit takes it off again */
        }
        if (hold_unit(c, hold, i))
            return MS_ERR_NOMEM;
    }
    return MS_OK;
}

/* ---- span: k-gram anchors into insensitive runs ----------------------------------------- */

static int anchor_add(kvs *c, uint64_t key, uint32_t ui, uint32_t off)
{
    uint32_t i = c->free_a;
    if (i != NIL) {
        c->free_a = c->a[i].next;
    } else {
        if (ms_grow(&c->a, &c->cap_a, c->n_a, sizeof *c->a, 1024))
            return -1;
        i = (uint32_t)c->n_a++;
    }
    size_t b = bucket_of(c, key);
    c->a[i] = (anchor){.key = key, .unit = ui, .off = off, .next = c->bucket[b]};
    c->bucket[b] = i;
    return 0;
}

static void anchors_remove(kvs *c, uint32_t ui)
{
    const unit *x = &c->u[ui];
    uint32_t k = c->p.min_span;
    if (x->n_tok < k)
        return;
    uint64_t h = roll_init(x->tok, k), top = 1;
    for (uint32_t q = 1; q < k; q++)
        top *= ROLL_BASE;
    for (uint32_t o = 0;; o++) {
        uint32_t *pp = &c->bucket[bucket_of(c, h)];
        while (*pp != NIL && !(c->a[*pp].unit == ui && c->a[*pp].off == o))
            pp = &c->a[*pp].next;
        if (*pp != NIL) {
            uint32_t i = *pp;
            *pp = c->a[i].next;
            c->a[i].next = c->free_a;
            c->free_a = i;
        }
        if (o + k >= x->n_tok)
            break;
        h = (h - (x->tok[o] + 1ULL) * top) * ROLL_BASE + x->tok[o + k] + 1;
    }
}

/* Longest verified match of p->tok[i..end) starting at an anchor hit for key h. */
static uint32_t span_best(const kvs *c, const kvs_prompt *p, uint32_t i, uint32_t end, uint64_t h,
                          uint32_t *best_unit, uint32_t *best_off)
{
    uint32_t k = c->p.min_span, best = 0, seen = 0;
    for (uint32_t ai = c->bucket[bucket_of(c, h)]; ai != NIL && seen < SPAN_MAX_CANDIDATES;
         ai = c->a[ai].next) {
        const anchor *a = &c->a[ai];
        if (a->key != h)
            continue;
        seen++;
        const unit *x = &c->u[a->unit];
        if (c->p.position == KVS_POS_RECOMPUTE && x->pos0 + a->off != i)
            continue;
        uint32_t m = 0;
        while (i + m < end && a->off + m < x->n_tok && x->tok[a->off + m] == p->tok[i + m])
            m++;
        if (m >= k && m > best) {
            best = m;
            *best_unit = a->unit;
            *best_off = a->off;
        }
    }
    return best;
}

/* Greedy left-to-right matching inside one insensitive run [a, end). */
static int span_run(kvs *c, const kvs_prompt *p, uint32_t a, uint32_t end, kvs_match *m,
                    kvs_hold *hold)
{
    uint32_t k = c->p.min_span;
    uint64_t top = 1;
    for (uint32_t q = 1; q < k; q++)
        top *= ROLL_BASE;
    uint32_t i = a;
    uint64_t h = end - i >= k ? roll_init(p->tok + i, k) : 0;
    while (end - i >= k && m->n_pieces < KVS_MAX_PIECES) {
        uint32_t ui = NIL, off = 0, len = span_best(c, p, i, end, h, &ui, &off);
        if (len) {
            m->piece_start[m->n_pieces] = i;
            m->piece_len[m->n_pieces++] = len;
            m->hit_tokens += len;
            if (c->u[ui].pos0 + off != i)
                m->shifted_tokens += len;
            if (hold && hold_unit(c, hold, ui))
                return MS_ERR_NOMEM;
            i += len;
            if (end - i >= k)
                h = roll_init(p->tok + i, k);
            continue;
        }
        if (end - i == k)
            break;
        h = (h - (p->tok[i] + 1ULL) * top) * ROLL_BASE + p->tok[i + k] + 1;
        i++;
    }
    return MS_OK;
}

static int span_lookup(kvs *c, const kvs_prompt *p, kvs_match *m, kvs_hold *hold)
{
    uint32_t n = p->n - 1; /* the last token is always computed */
    for (uint32_t i = 0; i < n;) {
        if (p->sens[i]) {
            i++;
            continue;
        }
        uint32_t j = i;
        while (j < n && !p->sens[j])
            j++;
        int rc = span_run(c, p, i, j, m, hold);
        if (rc)
            return rc;
        i = j;
    }
    return MS_OK;
}

static int span_add_unit(kvs *c, const kvs_prompt *p, uint32_t a, uint32_t len, kvs_hold *hold)
{
    if (!make_room(c, len)) {
        c->st.dropped_tokens += len;
        return MS_OK;
    }
    uint32_t i = unit_alloc(c);
    uint32_t *t = malloc(len * sizeof *t);
    if (i == NIL || !t) {
        free(t);
        return MS_ERR_NOMEM;
    }
    memcpy(t, p->tok + a, len * sizeof *t);
    c->u[i] = (unit){.ref = 0,
                     .prev = NIL,
                     .next = NIL,
                     .hnext = NIL,
                     .n_tok = len,
                     .pos0 = a,
                     .tok = t,
                     .live = 1};
    uint32_t k = c->p.min_span;
    uint64_t h = roll_init(t, k), top = 1;
    for (uint32_t q = 1; q < k; q++)
        top *= ROLL_BASE;
    for (uint32_t o = 0;; o++) {
        if (anchor_add(c, h, i, o))
            return MS_ERR_NOMEM;
        if (o + k >= len)
            break;
        h = (h - (t[o] + 1ULL) * top) * ROLL_BASE + t[o + k] + 1;
    }
    account(c, len);
    lru_append(c, i);
    return hold_unit(c, hold, i) ? MS_ERR_NOMEM : MS_OK;
}

/* Caches every maximal run of insensitive, not reused tokens of at least min_span tokens. */
static int span_insert(kvs *c, const kvs_prompt *p, const kvs_match *m, kvs_hold *hold)
{
    uint8_t *cov = calloc(p->n, 1);
    if (!cov)
        return MS_ERR_NOMEM;
    for (uint32_t q = 0; q < m->n_pieces; q++)
        memset(cov + m->piece_start[q], 1, m->piece_len[q]);
    int rc = MS_OK;
    for (uint32_t i = 0; i < p->n && !rc;) {
        if (p->sens[i] || cov[i]) {
            i++;
            continue;
        }
        uint32_t j = i;
        while (j < p->n && !p->sens[j] && !cov[j])
            j++;
        if (j - i >= c->p.min_span)
            rc = span_add_unit(c, p, i, j - i, hold);
        i = j;
    }
    free(cov);
    return rc;
}

/* ---- public entry points ---------------------------------------------------------------- */

int kvs_lookup(kvs *c, const kvs_prompt *p, kvs_match *m, kvs_hold *hold, errbuf *e)
{
    memset(m, 0, sizeof *m);
    if (p->n == 0)
        return err_set(e, MS_ERR_RANGE, "kvshare: empty prompt");
    if (c->p.kind == KVS_SPAN && !p->sens)
        return err_set(e, MS_ERR_INPUT, "kvshare: span sharing needs a sensitivity mask");
    c->st.lookups++;
    int rc = MS_OK;
    if (c->p.kind == KVS_PREFIX || c->p.kind == KVS_SALTED)
        rc = prefix_lookup(c, p, m, hold);
    else if (c->p.kind == KVS_SPAN)
        rc = span_lookup(c, p, m, hold);
    return rc ? err_set(e, rc, "kvshare: out of memory in lookup") : MS_OK;
}

int kvs_insert(kvs *c, const kvs_prompt *p, const kvs_match *m, kvs_hold *hold, errbuf *e)
{
    int rc = MS_OK;
    if (c->p.kind == KVS_PREFIX || c->p.kind == KVS_SALTED)
        rc = prefix_insert(c, p, m, hold);
    else if (c->p.kind == KVS_SPAN)
        rc = span_insert(c, p, m, hold);
    return rc ? err_set(e, rc, "kvshare: out of memory in insert") : MS_OK;
}

void kvs_release(kvs *c, kvs_hold *h)
{
    for (size_t q = h->n; q-- > 0;) { /* reverse: the longest prefix is evicted first */
        uint32_t i = h->unit[q];
        if (--c->u[i].ref == 0)
            lru_append(c, i);
    }
    h->n = 0;
}

int kvs_is_sane(const kvs *c)
{
    uint64_t used = 0, on_lru = 0, unheld = 0;
    for (size_t i = 0; i < c->n_u; i++)
        if (c->u[i].live) {
            used += c->u[i].n_tok;
            unheld += c->u[i].ref == 0;
        }
    for (uint32_t i = c->lru_head, prev = NIL; i != NIL; prev = i, i = c->u[i].next) {
        if (!c->u[i].live || c->u[i].ref != 0 || c->u[i].prev != prev)
            return 0;
        on_lru++;
    }
    return used == c->st.used_tokens && on_lru == unheld &&
           c->st.used_tokens <= c->p.capacity_tokens;
}
