/* kvshare.h — cross-user KV sharing policies for the serving simulation.
 *
 *   none     no sharing: every prompt is prefilled in full.
 *   prefix   vLLM automatic prefix caching: full blocks (default 16 tokens) identified by a
 *            hash chain hash(parent, block tokens); a request reuses the longest run of cached
 *            blocks from position 0; freed blocks go to the tail of an LRU free list in reverse
 *            order (policies.md §2.1).
 *   salted   prefix caching with a per-user cache_salt mixed into the first block's hash, so
 *            only the same user's requests can reuse blocks (vLLM cache_salt, §2.1).
 *   span     CachePrune-style token-level sharing (policies.md §2.4): only insensitive tokens
 *            are ever cached or matched; the cacheable units are maximal runs of insensitive
 *            tokens, matched anywhere in a prompt at token granularity through an index of
 *            k-gram anchors (k = min_span) into the stored runs, greedily left to right,
 *            taking the longest verified extension of any anchor hit. A run's KV is computed
 *            as a context-free segment (its tokens attend only to the segment itself), so it
 *            never depends on a sensitive token before it; this is the block-attention
 *            approximation position-independent reuse makes (its accuracy cost is outside the
 *            serving model). Positions: `rerotate` reuses a run at a different offset and pays
 *            a RoPE re-rotation of its keys (a costed MPC step, see serve.c); `recompute`
 *            reuses a run only at the position it was computed at, otherwise recomputes it.
 *
 * Capacity is in tokens (blocks × block for prefix/salted); eviction is LRU over units that no
 * running request holds. The cache pool is the shared pool only: running requests hold their
 * own KV outside it, and a unit that finds the pool full of held units is simply not cached.
 * A fully matched prompt still computes its last token (its logits give the first output),
 * as vLLM caps hits at prompt_len - 1. */
#ifndef MPCSIM_KVSHARE_H
#define MPCSIM_KVSHARE_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"

typedef enum { KVS_NONE, KVS_PREFIX, KVS_SALTED, KVS_SPAN, KVS_N } kvs_kind;
typedef enum { KVS_POS_RECOMPUTE, KVS_POS_REROTATE } kvs_pos;

typedef struct kvs_params {
    int kind;                 /* kvs_kind */
    uint32_t block;           /* prefix/salted block size (16) */
    uint64_t capacity_tokens; /* shared pool size */
    uint32_t min_span;        /* span: anchor length and shortest reusable run (16) */
    int position;             /* span: kvs_pos (rerotate) */
} kvs_params;

/* A prompt as the cache sees it. */
typedef struct kvs_prompt {
    const uint32_t *tok;
    const uint8_t *sens; /* 1 = sensitive; may be NULL for prefix/salted */
    uint32_t n;
    uint32_t tenant, user;
} kvs_prompt;

/* Units a request holds (so they are not evicted while it runs). */
typedef struct kvs_hold {
    uint32_t *unit;
    size_t n, cap;
} kvs_hold;

/* What a lookup found. */
typedef struct kvs_match {
    uint32_t hit_tokens;     /* prompt tokens whose KV is reused */
    uint32_t shifted_tokens; /* of which reused at another position (span + rerotate) */
    uint32_t n_pieces;       /* reused runs (1 for a prefix hit) */
    /* per reused run: [start, start+len) in the prompt; a lookup reuses at most
     * KVS_MAX_PIECES runs (a prefix hit is one run) */
    uint32_t piece_start[32], piece_len[32];
} kvs_match;
#define KVS_MAX_PIECES 32

typedef struct kvs_stats {
    uint64_t used_tokens, peak_tokens;                        /* tokens held in the pool */
    uint64_t inserted_tokens, evicted_tokens, dropped_tokens; /* dropped: pool full of held */
    uint64_t lookups;
} kvs_stats;

typedef struct kvs kvs;

const char *kvs_kind_name(int kind);
int kvs_kind_from_name(const char *s); /* -1 if unknown */
const char *const *kvs_kind_names(size_t *n);
void kvs_params_default(kvs_params *p);

int kvs_open(const kvs_params *p, kvs **out, errbuf *e);
void kvs_close(kvs *c);

/* Finds reusable KV for a prompt. With hold != NULL the matched units are held by the caller
 * (not evictable) until kvs_release; with NULL the lookup only peeks (and does not touch LRU). */
int kvs_lookup(kvs *c, const kvs_prompt *p, kvs_match *m, kvs_hold *hold, errbuf *e);
/* After the prompt's prefill: caches what is cacheable and not yet matched (m from the lookup),
 * holding the new units for the caller. */
int kvs_insert(kvs *c, const kvs_prompt *p, const kvs_match *m, kvs_hold *hold, errbuf *e);
/* The request finished: its units become evictable (LRU tail; vLLM's reverse order). */
void kvs_release(kvs *c, kvs_hold *hold);
void kvs_hold_free(kvs_hold *h);

const kvs_stats *kvs_get_stats(const kvs *c);
/* Invariant checker for asserts and tests: LRU list = unheld units, usage sums. */
int kvs_is_sane(const kvs *c);

#endif
