/* compose_cs.h — a composition run's state (cstate) and the budget arithmetic its emitters
 * share: compose.c (the policy callbacks, the other emitters) and compose_pages.c (pages). */
#ifndef MPCSIM_COMPOSE_CS_H
#define MPCSIM_COMPOSE_CS_H

#include <math.h>

#include "compose_int.h"

/* ---- the state of a run ------------------------------------------------------------------ */

typedef struct cstate {
    const cslot *sl;
    const cspec *sp;
    policy_env env;
    uint32_t sinks, recent, ktok, min_units, window, kernel, dense, every, page;
    int maxpool;
    double frac, thr;
    uint64_t seed;
    uint32_t max_pages, G;
    float *score;     /* [L][Hkv][max_len] token scores (attention, key norm, random) */
    float *vote;      /* [L][H][P] window votes */
    float *mx, *mn;   /* [L][Hkv][max_pages][d] page bounds */
    uint8_t *alive;   /* [L][Hkv][max_len] the kept set (once, permanent, every N) */
    uint32_t *sel_at; /* [L] the position of the layer's last selection (every N) */
    uint32_t *lk;     /* [L] a pyramid's top-k entries per layer, or NULL */
    uint8_t *lrow;    /* [Hkv][max_len] a leader layer's rows of this step (share layers) */
    uint32_t lrow_at; /* the position and leader layer + 1 they are of */
    uint32_t lrow_layer;
    float *us, *tmp, *acc;
    uint32_t *cand, *sel, *work;
    uint8_t *row;
    float *kmax, *qmax; /* [L] page bounds: the largest |key| seen, |query| of the step */
    float *qlast;       /* [L][H·d] page bounds evicting for good: the prompt's last query */
    uint8_t *qseen;     /* [L] whether it was observed */
    int8_t *preal;      /* [L] compose_pages_real's verdict, -1 before the first */
    int8_t *ppub;       /* [L] compose.c public_layer's verdict, -1 before the first */
} cstate;

/* ---- the budget -------------------------------------------------------------------------- */

/* Sinks, recent window and top-k units of a selection over T cached entries. Under kv_budget F
 * the budget is round(F·B) entries of B: the prompt for a selection made once or evicting
 * permanently (a fixed-size cache), else the T cached entries; the sinks come first, the
 * window is as given (fixed), the rest (rest) or a share of the budget, the top-k the rest. */
static inline void budget(const cstate *s, uint32_t layer, uint32_t T, uint32_t *sinks,
                          uint32_t *recent, uint32_t *k)
{
    const cspec *sp = s->sp;
    *sinks = s->sinks;
    *recent = s->recent;
    if (s->lk) { /* a pyramid: the layer's own count */
        *k = s->lk[layer] == UINT32_MAX ? UINT32_MAX : s->lk[layer] / s->page;
        return;
    }
    if (s->frac <= 0) {
        uint32_t u = s->ktok == UINT32_MAX ? UINT32_MAX : s->ktok / s->page;
        *k = u > s->min_units ? u : s->min_units;
        return;
    }
    uint32_t B = sp->when == W_ONCE || sp->permanent ? s->env.prompt_len : T;
    uint32_t n = policy_budget_entries(s->frac, B);
    *sinks = n < s->sinks ? n : s->sinks;
    if (sp->rmode == R_REST)
        *recent = n - *sinks;
    else if (sp->rmode == R_SHARE)
        *recent = (uint32_t)ceil(sp->rshare * (n - *sinks));
    uint32_t used = *sinks + (*recent < B ? *recent : B);
    if (s->page > 1) {
        double u = floor((s->frac * B - used) / s->page + 0.5);
        *k = u < 1 ? 1 : (uint32_t)u;
    } else {
        *k = n > used ? n - used : 0;
    }
}

/* The candidates [*c0, *c1) of T entries: after the sinks, before the recent window. */
static inline void cand_range(uint32_t T, uint32_t sinks, uint32_t recent, uint32_t *c0,
                              uint32_t *c1)
{
    *c0 = sinks < T ? sinks : T;
    *c1 = T - (recent < T ? recent : T);
    if (*c1 < *c0)
        *c1 = *c0;
}

/* The layer whose selection layer uses: itself, or with `share: {layers: N}` the first of its
 * group of N (counted from the first selecting layer). */
static inline uint32_t leader(const cstate *s, uint32_t layer)
{
    uint32_t n = s->sp->lshare;
    return n > 1 && layer >= s->dense ? layer - (layer - s->dense) % n : layer;
}

/* The largest candidate key norm of [c0, c1) at layer: a KV head's, or shared their sum (the
 * scale of a selection's tie bound). */
static inline double norm_max(const cstate *s, uint32_t layer, uint32_t c0, uint32_t c1, int shared)
{
    uint32_t Hkv = s->env.n_kv_heads;
    double M = 0;
    for (uint32_t j = c0; j < c1; j++) {
        double x = 0;
        for (uint32_t g = 0; g < Hkv; g++) {
            double y = s->score[((size_t)layer * Hkv + g) * s->env.max_len + j];
            x = shared ? x + y : fmax(x, y);
        }
        M = fmax(M, x);
    }
    return M;
}

/* Pages (page_bounds, or key_norm summed per page) with a top-k on real operands
 * (compose_pages.c): compose_pages_real, whether a layer's selection runs on them (its verdict
 * kept in s->preal); compose_emit_pages, its ops of a layer and phase at kv_len cached. */
int compose_pages_real(cstate *s, uint32_t layer);
int compose_emit_pages(cstate *s, int phase, uint32_t layer, uint32_t kv_len, op_program *prog,
                       errbuf *e);

#endif
