/* cluster.c — the static vote, the clusters' choice and the ops MPCache and the cluster blocks
 * share (cluster.h). */
#include "cluster.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/program/opb.h"

void cluster_vote(int mode, double thr, uint8_t *pass, double *colsum, float *vote,
                  const policy_env *v, const policy_obs *o)
{
    uint32_t P = v->prompt_len, H = v->n_heads, Hkv = v->n_kv_heads, n = o->pos + 1;
    uint32_t g0 = o->kv_lo, g1 = o->kv_hi ? o->kv_hi : Hkv, G = H / Hkv;
    if (!o->att || mode == CLUSTER_NONE)
        return;
    if (mode == CLUSTER_THRESHOLD) {
        /* the head sum of each column, taken row by row (each column's terms in head order),
         * tested once the last KV head's rows are in */
        uint8_t *ps = pass + (size_t)o->layer * P;
        double *cs = colsum + (size_t)(o->pos % POLICY_SPAN_MAX) * (P + 1);
        if (g0 == 0)
            memset(cs, 0, n * sizeof *cs);
        for (uint32_t h = g0 * G; h < g1 * G; h++)
            policy_add_row_d(cs, o->att + (size_t)h * n, n);
        for (uint32_t j = 0; g1 == Hkv && j < n; j++)
            if (cs[j] / H >= thr)
                ps[j] = 1;
    } else {
        for (uint32_t h = g0 * G; h < g1 * G; h++)
            policy_add_row(vote + ((size_t)o->layer * Hkv + h / G) * P, o->att + (size_t)h * n, n);
    }
}

uint32_t cluster_static_set(int mode, int all, double ratio, const uint8_t *pass, const float *vote,
                            const policy_env *v, uint32_t l, uint32_t g, uint32_t *work)
{
    uint32_t P = v->prompt_len, n = 0;
    if (mode == CLUSTER_NONE || all) {
        for (uint32_t j = 0; j < P; j++)
            work[j] = j;
        return P;
    }
    if (mode == CLUSTER_THRESHOLD) {
        const uint8_t *ps = pass + (size_t)l * P;
        for (uint32_t j = 0; j < P; j++)
            if (ps[j])
                work[n++] = j;
        return n;
    }
    uint32_t k = (uint32_t)(ratio * P);
    uint32_t *tmp = malloc(((size_t)P + 1) * sizeof *tmp);
    if (!tmp)
        return UINT32_MAX;
    n = (uint32_t)policy_topk(vote + ((size_t)l * v->n_kv_heads + g) * P, NULL, P, k, work, tmp);
    free(tmp);
    return n;
}

int cluster_read_keys(const policy_env *v, uint32_t l, uint32_t j, const uint8_t *in, float *kbuf)
{
    if (v->get_k)
        return v->get_k(v->kv_ctx, l, j, kbuf);
    if (!v->gather_k)
        return 1;
    for (uint32_t g = 0; g < v->n_kv_heads; g++)
        if (in[(size_t)g * v->prompt_len + j] &&
            v->gather_k(v->kv_ctx, l, g, &j, 1, kbuf + (size_t)g * v->head_dim))
            return 1;
    return 0;
}

void cluster_group_query(const float *q, uint32_t g, uint32_t G, uint32_t d, float *qs)
{
    for (uint32_t i = 0; i < d; i++) {
        float acc = 0;
        for (uint32_t hq = g * G; hq < (g + 1) * G; hq++)
            acc += q[(size_t)hq * d + i];
        qs[i] = acc;
    }
}

float cluster_bound_score(double alpha, uint32_t d, const float *qs, const float *mx,
                          const float *mn, const float *mx2, const float *mn2)
{
    float a = (float)alpha, b = 1.0f - a, u = 0;
    for (uint32_t i = 0; i < d; i++) {
        float hi = mx[i], lo = mn[i];
        if (mx2) {
            hi = mx2[i] > hi ? mx2[i] : hi;
            lo = mn2[i] < lo ? mn2[i] : lo;
        }
        u += qs[i] * (a * hi + b * lo);
    }
    return u;
}

uint32_t cluster_parents(const float *c1, uint32_t G1, uint32_t G2, double ratio1, int partial,
                         uint32_t *cand, uint32_t *work, uint8_t *mark)
{
    uint32_t k1 = (uint32_t)floor(G1 * ratio1);
    uint32_t n1 = (uint32_t)policy_topk(c1, NULL, G1, k1, cand, work);
    memset(mark, 0, G1);
    for (uint32_t i = 0; i < n1; i++)
        mark[cand[i]] = 1;
    mark[0] = 1;
    if (partial)
        mark[G1 - 1] = 1;
    uint32_t nc = 0;
    for (uint32_t c = 0; c < G1; c++)
        if (mark[c]) {
            cand[nc++] = 2 * c;
            if (2 * c + 1 < G2)
                cand[nc++] = 2 * c + 1;
        }
    return nc;
}

void cluster_keep(const float *c2, const uint32_t *cand, uint32_t nc, uint32_t G2, double ratio2,
                  int partial, uint32_t s2, const uint32_t *idx, uint32_t n, uint32_t *sel,
                  uint32_t *work, uint8_t *row)
{
    uint32_t k2 = (uint32_t)floor(G2 * ratio2);
    uint32_t n2 = (uint32_t)policy_topk(c2, cand, nc, k2, sel, work);
    sel[n2++] = 0;
    if (partial)
        sel[n2++] = G2 - 1;
    for (uint32_t i = 0; i < n2; i++) {
        uint32_t c = sel[i], end = (c + 1) * s2 < n ? (c + 1) * s2 : n;
        for (uint32_t t = c * s2; t < end; t++)
            row[idx[t]] = 1;
    }
}

uint32_t cluster_entries(const uint32_t *idx, uint32_t n, uint32_t kv_len)
{
    while (n > 0 && idx[n - 1] >= kv_len)
        n--;
    return n;
}

int cluster_emit(op_program *prog, const mpcache_shape *sh, int phase, uint32_t layer,
                 uint32_t kv_len, uint32_t prompt_len, const uint32_t *stat, uint32_t n,
                 mpcache_ids *ids, const char *name, errbuf *e)
{
    int kind = mpcache_layer_kind(sh, layer);
    uint32_t Hkv = sh->n_kv_heads, d = sh->head_dim;
    if (phase == PHASE_PREFILL) {
        mpcache_ids pid;
        if (sh->static_mode == CLUSTER_THRESHOLD) /* on shares: the keep bits, their count */
            return mpcache_emit_static(prog, sh, layer, kv_len, OP_NONE, &pid, e);
        uint32_t S = 0;
        for (uint32_t g = 0; g < Hkv; g++)
            S = stat[g] > S ? stat[g] : S;
        if (kind == MPCACHE_LAYER_SELECT && sh->static_mode == CLUSTER_TOPK && S > 0) {
            /* COST: the static top-k (not on shares: an estimate): window vote sums (local),
             * topk(P, ratio·P) per KV head, the kept rows gathered (policies.md §1.8) */
            policy_emitter pe;
            uint32_t w = sh->window ? sh->window : 1;
            opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
            uint32_t vt =
                policy_emit(&pe, OP_ADD, Hkv, w, 0, kv_len, OP_NONE, OP_NONE, 0, 0, 0, "mpc.vote");
            uint32_t oh = policy_emit(&pe, OP_TOPK, Hkv, 1, 0, kv_len, vt, OP_NONE, 0, (int32_t)S,
                                      0, "mpc.topk0");
            policy_emit(&pe, OP_GATHER, Hkv, S, kv_len, 2 * d, oh, OP_NONE, OPF_NO_TRUNC, 0, 0,
                        "mpc.compact");
            int rc = policy_emit_done(&pe, name, e);
            if (rc)
                return rc;
        }
        if (sh->static_mode == CLUSTER_NONE || S == 0)
            S = kv_len;
        return mpcache_emit_prefill(prog, sh, layer, S, OP_NONE, &pid, e);
    }
    const mpcache_ids *src = kind == MPCACHE_LAYER_SHARED ? &ids[layer - 1] : NULL;
    /* after a threshold prompt the first step begins with the compaction to the revealed count */
    uint32_t P0 =
        sh->static_mode == CLUSTER_THRESHOLD && kind != MPCACHE_LAYER_DENSE && kv_len == prompt_len
            ? prompt_len
            : 0;
    int rc = mpcache_emit_decode_first(prog, sh, layer, n, P0, OP_NONE, OP_NONE, OP_NONE, OP_NONE,
                                       src, &ids[layer], e);
    if (!rc)
        rc = mpcache_emit_mask(prog, sh, layer, n, OP_NONE, &ids[layer], e);
    return rc;
}

int cluster_one_time(const mpcache_shape *sh, uint32_t n_layers, uint32_t prompt_len, uint32_t pos)
{
    int any = 0;
    for (uint32_t l = 0; l < n_layers; l++)
        any |= mpcache_layer_kind(sh, l) != MPCACHE_LAYER_DENSE;
    return sh->static_mode == CLUSTER_THRESHOLD && prompt_len > 0 && pos == prompt_len && any;
}
