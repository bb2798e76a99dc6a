/* secpol.c — what the selections on secret shares share (secpol.h): the step list's shapes,
 * keep masks, local re-layouts of shares, splicing ops into a lowered program, the float model
 * for audits. */
#include "secpol.h"

#include <stdlib.h>
#include <string.h>

secpol_step secpol_step_of(const secpol_run *r, uint32_t s)
{
    return (secpol_step){.s = s, .t = s ? 1 : r->prefill, .kv = s ? r->prefill + s - 1 : 0};
}

void secpol_keep_free(secpol_keep *k)
{
    free(k->keep);
    memset(k, 0, sizeof *k);
}

const uint8_t *secpol_keep_mask(const secpol_keep *k, uint32_t pos, uint32_t l, uint32_t g)
{
    if (!k || !k->keep || pos < k->from || pos >= k->max_len)
        return NULL;
    return k->keep + (((size_t)pos * k->n_layers + l) * k->n_kv_heads + g) * k->max_len;
}

int secpol_relayout(eng *e, mpc_val *z, const mpc_val *x, const uint32_t *idx, const uint64_t *sel,
                    size_t n)
{
    mpc_val t = {0};
    int rc = e->vt->alloc(e, &t, n, DOM_ARITH);
    if (!rc)
        rc = e->vt->permute(e, &t, x, idx, n);
    if (!rc)
        rc = e->vt->alloc(e, z, n, DOM_ARITH);
    if (!rc)
        rc = e->vt->mul_pub(e, z, &t, sel, n);
    e->vt->release(e, &t);
    return rc;
}

int secpol_rows_in(eng *e, const mpc_val *st, uint32_t Hkv, uint32_t R, uint32_t F, uint32_t col,
                   uint32_t ncol, uint32_t rows, uint32_t lead, mpc_val *z)
{
    size_t n = (size_t)Hkv * rows * ncol;
    uint32_t *idx = calloc(n, sizeof *idx);
    uint64_t *sel = calloc(n, sizeof *sel);
    int rc = idx && sel ? MS_OK : MS_ERR_NOMEM;
    for (uint32_t g = 0; !rc && g < Hkv; g++)
        for (uint32_t r = 0; r < R && r + lead < rows; r++)
            for (uint32_t c = 0; c < ncol; c++) {
                size_t i = ((size_t)g * rows + r + lead) * ncol + c;
                idx[i] = (uint32_t)(((size_t)g * R + r) * F + col + c);
                sel[i] = 1;
            }
    if (!rc)
        rc = secpol_relayout(e, z, st, idx, sel, n);
    free(idx), free(sel);
    return rc;
}

int secpol_pick(eng *e, mpc_val *z, size_t N, const mpc_val *const *src, int nsrc,
                const uint8_t *which, const uint32_t *idx)
{
    uint32_t *ix = calloc(N + 1, sizeof *ix);
    uint64_t *sel = calloc(N + 1, sizeof *sel);
    int rc = ix && sel ? e->vt->alloc(e, z, N, DOM_ARITH) : MS_ERR_NOMEM;
    for (int k = 0; !rc && k < nsrc; k++) {
        size_t any = 0;
        for (size_t i = 0; i < N; i++) {
            sel[i] = which[i] == k;
            ix[i] = sel[i] ? idx[i] : 0;
            any += sel[i];
        }
        if (!any)
            continue;
        mpc_val part = {0};
        rc = secpol_relayout(e, &part, src[k], ix, sel, N);
        if (!rc)
            rc = e->vt->add(e, z, z, &part);
        e->vt->release(e, &part);
    }
    free(ix), free(sel);
    return rc;
}

int secpol_ops_move(op_program *p, long at, size_t from, errbuf *e)
{
    size_t k = p->n_ops - from;
    if (at < 0)
        return err_set(e, MS_ERR_INTERNAL, "secure inference: no attention op to splice before");
    if (!k || (size_t)at >= from)
        return MS_OK;
    op *tmp = malloc(k * sizeof *tmp);
    if (!tmp)
        return err_set(e, MS_ERR_NOMEM, "secure inference: out of memory");
    memcpy(tmp, &p->ops[from], k * sizeof *tmp);
    memmove(&p->ops[(size_t)at + k], &p->ops[at], (from - (size_t)at) * sizeof *tmp);
    memcpy(&p->ops[at], tmp, k * sizeof *tmp);
    free(tmp);
    return MS_OK;
}

long secpol_find_op(const op_program *p, int kind, uint32_t out)
{
    for (size_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].kind == kind && p->ops[i].out == out)
            return (long)i;
    return -1;
}

int secpol_load_model(const model_cfg *m, const char *what, llama **out, errbuf *e)
{
    char wpath[1024];
    *out = NULL;
    if (model_file_path(m->weights, wpath, sizeof wpath))
        return err_set(e, MS_ERR_NOTFOUND, "%s: no weights for %s", what, m->name);
    return llama_load(m, wpath, out, e);
}

int secpol_audit_forward(const secpol_run *o, const llama_hooks *hk, llama **pm, errbuf *e)
{
    const model_cfg *m = o->model;
    float *lg = malloc(m->vocab * sizeof *lg);
    int rc = lg ? secpol_load_model(m, "selection audit", pm, e)
                : err_set(e, MS_ERR_NOMEM, "selection audit: out of memory");
    for (uint32_t pos = 0; !rc && pos < o->n_tokens; pos++)
        rc = llama_forward(*pm, o->tokens[pos], pos, hk, lg);
    llama_free(*pm);
    *pm = NULL;
    free(lg);
    return rc;
}

int secpol_keep_attend(const secpol_keep *k, uint32_t l, uint32_t g, uint32_t pos, uint8_t *mask)
{
    const uint8_t *pm = secpol_keep_mask(k, pos, l, g);
    if (!pm)
        return 0;
    memcpy(mask, pm, pos);
    mask[pos] = 1;
    return 1;
}

int secpol_same_set(const uint32_t *slot, uint32_t R, const uint8_t *mask, uint32_t pos)
{
    uint32_t cnt = 0;
    for (uint32_t j = 0; j < pos; j++)
        cnt += mask[j] != 0;
    if (cnt != R)
        return 0;
    for (uint32_t q = 0; q < R; q++)
        if (slot[q] >= pos || !mask[slot[q]])
            return 0;
    return 1;
}
