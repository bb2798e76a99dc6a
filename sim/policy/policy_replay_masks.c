/* policy_replay_masks.c — keep masks computed outside mpcsim (the user's own implementation of a
 * policy, in PyTorch: scripts/dump_trace.py --keep-masks), replayed over the trace they were
 * dumped with.
 *
 * The masks are keep.npy beside an npy trace (sim/trace/TRACE_FORMAT.md "Keep masks"): int32
 * [L][T][Hkv][T], keep[l][t][g][j] = 1 when at decode position t layer l's KV head g attends
 * cached position j < t. select() reads row t of the file; nothing else decides.
 *
 * Cost. mpcsim cannot derive what secure work computed the masks, so the scenario states it:
 * `cost_as: h2o` (or tova, snapkv, quest) runs that policy beside the masks, with the parameters
 * the entry gives it (its own keys, e.g. heavy: 16), observing what it asks to observe and
 * selecting into a scratch mask, and costs each step by its ops at the masks' kept counts; the
 * accuracy metrics are the masks'. `cost_as: none` declares the selection free (public
 * positions). Its parameters: cost_as, then every key of the four policies (no two share a
 * key); a key of another policy than cost_as is refused at load. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "masks.h"
#include "policy.h"
#include "sim/trace/trace.h"

/* The policies a scenario may cost the masks as (cost_as), after "none". */
static const policy_ops *const cost_pols[] = {&policy_h2o, &policy_tova, &policy_snapkv,
                                              &policy_quest};
#define N_COST (sizeof cost_pols / sizeof cost_pols[0])

#define RM_MAX_PARAMS 32
static policy_param rm_params[RM_MAX_PARAMS] = {
    {"cost_as", "none",
     "the policy whose selection ops cost the masks (its parameters beside this key); none: "
     "the selection is declared free",
     "none|h2o|tova|snapkv|quest", 0, 0, 0},
};
static size_t rm_n_params = 1;

/* A key two cost policies share is listed once, with what it means to each. */
static const policy_param shared_params[] = {
    {"recent", "0",
     "h2o: the recent budget in tokens (0: use recent_ratio); tova: the newest N entries kept "
     "beside cache_size",
     NULL, 0, 1e9, 1},
};
#define N_SHARED (sizeof shared_params / sizeof shared_params[0])

static ssize_t rm_find(const char *key)
{
    for (size_t i = 0; i < rm_n_params; i++)
        if (!strcmp(rm_params[i].key, key))
            return (ssize_t)i;
    return -1;
}

/* cost_as's parameters: each cost policy's, copied; a key two of them share once, from
 * shared_params (its default and range the same in both, which check_masks holds). */
__attribute__((constructor)) static void rm_params_build(void)
{
    for (size_t i = 0; i < N_COST; i++)
        for (size_t k = 0; k < cost_pols[i]->n_params && rm_n_params < RM_MAX_PARAMS; k++) {
            const policy_param *pp = &cost_pols[i]->params[k];
            ssize_t at = rm_find(pp->key);
            if (at < 0) {
                rm_params[rm_n_params++] = *pp;
                continue;
            }
            for (size_t j = 0; j < N_SHARED; j++)
                if (!strcmp(shared_params[j].key, pp->key))
                    rm_params[at].help = shared_params[j].help;
        }
}

typedef struct rm_state {
    policy_env env;
    int fd;
    char path[1100];
    uint64_t T;             /* the masks' positions */
    uint64_t off;           /* data offset in the file */
    int32_t *row;           /* Hkv × T */
    const policy_ops *cost; /* NULL: none */
    void *cst;
    uint8_t *scratch; /* Hkv × max_len: the cost policy's own selection, discarded */
} rm_state;

static int has_param(const policy_ops *p, const char *key)
{
    for (size_t k = 0; k < p->n_params; k++)
        if (!strcmp(p->params[k].key, key))
            return 1;
    return 0;
}

/* A cost policy the parameter belongs to while the one named cost (NULL: none) has no such
 * parameter; NULL when cost has it or no cost policy does. */
static const policy_ops *owner(const char *key, const char *cost)
{
    for (size_t i = 0; i < N_COST; i++)
        if (!strcmp(cost_pols[i]->name, cost) && has_param(cost_pols[i], key))
            return NULL;
    for (size_t i = 0; i < N_COST; i++)
        if (has_param(cost_pols[i], key))
            return cost_pols[i];
    return NULL;
}

int masks_open(const char *dir, uint32_t L, uint32_t Hkv, uint32_t need, int *fd, uint64_t *T,
               uint64_t *off, char *path, size_t cap, errbuf *e)
{
    if (!dir)
        return err_set(
            e, MS_ERR_INPUT,
            "policy replay_masks replays keep.npy beside an npy trace, and this run "
            "has no npy trace\n  hint: trace: {source: npy, path: DIR} with DIR/keep.npy "
            "(scripts/dump_trace.py --keep-masks)");
    snprintf(path, cap, "%s/keep.npy", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, MS_ERR_NOTFOUND,
                       "%s: error: cannot open keep masks: %s\n  hint: "
                       "scripts/dump_trace.py --keep-masks writes them beside the trace",
                       path, strerror(errno));
    trace_npy h;
    int rc = trace_npy_read_header(f, path, &h, e);
    uint64_t bytes = 0;
    if (!rc && (h.dtype != 'i' || h.ndim != 4 || h.shape[0] != L || h.shape[2] != Hkv ||
                h.shape[1] != h.shape[3]))
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s: error: keep masks must be int32 [L][T][Hkv][T] = [%u][T][%u][T] "
                     "(sim/trace/TRACE_FORMAT.md), got %s with %u dimensions",
                     path, L, Hkv, h.dtype == 'i' ? "int32" : "float32", h.ndim);
    if (!rc && h.shape[1] < need)
        rc = err_set(e, MS_ERR_INPUT,
                     "%s: error: keep masks cover %llu positions, and the run needs %u", path,
                     (unsigned long long)h.shape[1], need);
    if (!rc && trace_npy_bytes(&h, &bytes))
        rc = err_set(e, MS_ERR_FORMAT, "%s: error: keep masks' size overflows 64 bits", path);
    if (!rc) {
        long end = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        if (end < 0 || (uint64_t)end < h.data_offset || (uint64_t)end - h.data_offset < bytes)
            rc = err_set(e, MS_ERR_FORMAT,
                         "%s: error: keep masks are cut short: %llu bytes of data expected", path,
                         (unsigned long long)bytes);
    }
    if (!rc) {
        *T = h.shape[1];
        *off = h.data_offset;
        if (fd && (*fd = dup(fileno(f))) < 0)
            rc = err_set(e, MS_ERR_IO, "%s: error: %s", path, strerror(errno));
    }
    fclose(f);
    return rc;
}

int masks_check_params(const kv_param *kv, size_t n, const char *path, errbuf *e)
{
    const char *cost = "none";
    for (size_t i = 0; i < n; i++)
        if (!strcmp(kv[i].key, "cost_as"))
            cost = kv[i].val;
    for (size_t i = 0; i < n; i++) {
        const policy_ops *o = owner(kv[i].key, cost);
        if (o && kv[i].line > 0) /* given in the scenario */
            return err_set(e, MS_ERR_INPUT,
                           "%s:%d:%d: error: '%s' is a parameter of policy %s, and cost_as is %s\n"
                           "  hint: cost_as: %s, or remove '%s'",
                           path ? path : "<scenario>", kv[i].line, kv[i].col, kv[i].key, o->name,
                           cost, o->name, kv[i].key);
    }
    return MS_OK;
}

static void rm_fini(void *st)
{
    rm_state *s = st;
    if (!s)
        return;
    if (s->cost && s->cst)
        s->cost->fini(s->cst);
    if (s->fd >= 0)
        close(s->fd);
    free(s->row);
    free(s->scratch);
    free(s);
}

static int rm_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    int which;
    int rc = policy_arg_choice(&policy_replay_masks, a, "cost_as", &which, e);
    if (!rc && a)
        rc = masks_check_params(a->kv, a->n, a->path, e);
    if (rc)
        return rc;
    rm_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy replay_masks: out of memory");
    s->env = *env;
    s->fd = -1;
    rc = masks_open(env->trace_dir, env->n_layers, env->n_kv_heads, env->max_len, &s->fd, &s->T,
                    &s->off, s->path, sizeof s->path, e);
    if (!rc) {
        s->row = malloc((size_t)env->n_kv_heads * s->T * sizeof *s->row);
        s->scratch = malloc((size_t)env->n_kv_heads * (env->max_len + 1));
        if (!s->row || !s->scratch)
            rc = err_set(e, MS_ERR_NOMEM, "policy replay_masks: out of memory");
    }
    if (!rc && which > 0) {
        s->cost = cost_pols[which - 1];
        rc = s->cost->init(env, a, &s->cst, e);
    }
    if (rc) {
        rm_fini(s);
        return rc;
    }
    *st = s;
    return MS_OK;
}

static unsigned rm_needs(void *st, uint32_t pos)
{
    rm_state *s = st;
    return s->cost && s->cost->needs ? s->cost->needs(s->cst, pos) : 0;
}

static int rm_observe(void *st, const policy_obs *o, errbuf *e)
{
    rm_state *s = st;
    return s->cost && s->cost->observe ? s->cost->observe(s->cst, o, e) : MS_OK;
}

static int rm_prefill(void *st, errbuf *e)
{
    rm_state *s = st;
    return s->cost && s->cost->prefill ? s->cost->prefill(s->cst, e) : MS_OK;
}

static int rm_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     errbuf *e)
{
    rm_state *s = st;
    uint32_t Hkv = s->env.n_kv_heads;
    size_t n = (size_t)Hkv * s->T * sizeof *s->row;
    /* offset of row [layer][pos]: (layer·T + pos)·Hkv·T int32, within the size checked at open */
    uint64_t at = s->off + ((uint64_t)layer * s->T + pos) * n;
    ssize_t got = pread(s->fd, s->row, n, (off_t)at);
    if (got != (ssize_t)n)
        return err_set(e, MS_ERR_IO, "%s: error: cannot read keep masks at layer %u position %u",
                       s->path, layer, pos);
    for (uint32_t g = 0; g < Hkv; g++)
        for (uint32_t j = 0; j < pos; j++) {
            int32_t v = s->row[(size_t)g * s->T + j];
            if (v != 0 && v != 1)
                return err_set(e, MS_ERR_FORMAT,
                               "%s: error: keep[%u][%u][%u][%u] = %d; a keep mask holds 0 or 1",
                               s->path, layer, pos, g, j, v);
            keep[(size_t)g * pos + j] = (uint8_t)v;
        }
    if (s->cost) /* its own state moves on as it would; its selection is not used */
        return s->cost->select(s->cst, layer, pos, q, s->scratch, e);
    return MS_OK;
}

static int rm_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                   op_program *prog, errbuf *e)
{
    rm_state *s = st;
    if (!s->cost || !s->cost->emit_cost)
        return MS_OK;
    return s->cost->emit_cost(s->cst, phase, layer, kv_len, kept, prog, e);
}

const policy_ops policy_replay_masks = {
    .name = "replay_masks",
    .summary = "keep masks dumped beside an npy trace (keep.npy), costed as cost_as's selection",
    .params = rm_params,
    /* cost_as, h2o's 4, tova's 4 less recent (h2o's too), snapkv's 4, quest's 4: the table
     * rm_params_build fills (check_masks holds the two equal) */
    .n_params = 1 + 4 + 3 + 4 + 4,
    .init = rm_init,
    .fini = rm_fini,
    .needs = rm_needs,
    .observe = rm_observe,
    .prefill = rm_prefill,
    .select = rm_select,
    .emit_cost = rm_emit,
    .metric_stride = "16",
};

size_t masks_n_params(void) { return rm_n_params; }
