/* policy_full.c — the full KV cache: every cached entry is attended, no policy work.
 * The baseline every accuracy metric is measured against. */
#include <stdlib.h>
#include <string.h>

#include "policy.h"

typedef struct full_state {
    uint32_t n_kv;
} full_state;

static int full_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    (void)a;
    full_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy full: out of memory");
    s->n_kv = env->n_kv_heads;
    *st = s;
    return MS_OK;
}

static void full_fini(void *st) { free(st); }

static unsigned full_needs(void *st, uint32_t pos) { return 0; }

static int full_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                       errbuf *e)
{
    full_state *s = st;
    memset(keep, 1, (size_t)s->n_kv * pos);
    return MS_OK;
}

static uint32_t full_count(void *st, uint32_t layer, uint32_t pos) { return pos; }

const policy_ops policy_full = {
    .name = "full",
    .summary = "full KV cache (no eviction): the accuracy baseline",
    .params = NULL,
    .n_params = 0,
    .init = full_init,
    .fini = full_fini,
    .needs = full_needs,
    .select = full_select,
    .count = full_count,
    .check = policy_check_dense,
};
