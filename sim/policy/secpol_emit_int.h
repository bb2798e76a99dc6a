/* secpol_emit_int.h — what the selection on shares from a policy's emitted ops
 * (secpol_emit.c) shares with its audit (secpol_audit.c). */
#ifndef MPCSIM_SECPOL_EMIT_INT_H
#define MPCSIM_SECPOL_EMIT_INT_H

#include <stdio.h>
#include <stdlib.h>

#include "pcheck.h"
#include "policy.h"
#include "secpol.h"

/* The configuration: the policy, its state (init, never observed) and its shapes. */
/* A state tensor (OPT_CACHE, its spliced name) and the last step whose programs name it: no
 * later step reads it, so it is not carried past that step (tova's stack of every layer's
 * prompt rows, "s.tova.kv_all", ends with the prompt). */
typedef struct estate {
    char name[48];
    uint32_t last;
} estate;

typedef struct ecfg {
    const policy_ops *p;
    void *st;
    void *st_ref; /* a second state, for the audit's select() over the session's values */
    uint32_t L, H, Hkv, d;
    char name[64];
    /* The state tensors the steps' programs name, each with the last step that names it. */
    estate *live;
    size_t n_live;
    uint32_t probed; /* the last step whose programs were probed (beyond it all is carried) */
} ecfg;

/* One layer's program of a step, with what it declared. */
typedef struct eprog {
    op_program prog;
    pcheck_decl io;
} eprog;

static inline void eprog_free(eprog *x) { op_program_free(&x->prog); }

/* emit_cost of (phase, layer) at kv cached entries (prefill: kv = the prompt's length). */
static inline int probe_with(const ecfg *c, void *st, int phase, uint32_t layer, uint32_t kv,
                             eprog *x, errbuf *e)
{
    op_program_init(&x->prog);
    uint32_t *kept = calloc(c->Hkv, sizeof *kept);
    if (!kept)
        return err_set(e, MS_ERR_NOMEM, "selection on shares: out of memory");
    for (uint32_t g = 0; g < c->Hkv; g++)
        kept[g] = kv;
    int rc = pcheck_emit(c->p, st, phase, layer, kv, kept, &x->prog, &x->io, e);
    free(kept);
    return rc;
}

static inline int probe(const ecfg *c, int phase, uint32_t layer, uint32_t kv, eprog *x, errbuf *e)
{
    return probe_with(c, c->st, phase, layer, kv, x, e);
}

/* "L<l>.s.<rest>" for a policy tensor "L<l>.<rest>", "s.<name>" for one of no layer. */
void secpol_rename_tensor(char out[48], const char *name);

/* The audit (secpol_audit.c): the tensors each step opens, and the kept sets they give. */
int secpol_emit_audit_tensor(const void *cfg, const secpol_run *r, const secpol_step *st, size_t i,
                             char name[48], int *is_score);
int secpol_emit_audit_note(const void *cfg, const secpol_run *r, const secpol_opened *opened,
                           const secpol_keep *plain, const float *ref, const char *policy,
                           FILE *out, errbuf *e);

#endif
