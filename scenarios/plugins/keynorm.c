/* keynorm.c — an example policy plug-in: attention sinks plus the cached keys of largest L2
 * norm. At a decode step of position pos, each layer and KV head keeps positions [0, sink) and
 * the `keep` positions j in [sink, pos) whose key has the largest ‖k_j‖ (ties: the earlier
 * position); everything while pos ≤ sink + keep.
 *
 * Build: make plugins (or cc -std=c11 -fPIC -shared $(pkg-config --cflags mpcsim-plugin)
 * keynorm.c -o keynorm.so), then name it in a scenario: {plugin: plugins/keynorm.so, keep: 32}.
 *
 * kv_budget F (ABI 1.1): keep = round(F · prompt_len) − sink, the sinks counted in the budget
 * (`keep` itself beside kv_budget is an error). Its rule between parameters (the check hook):
 * sink ≤ keep, the sinks the smaller part of what is kept.
 *
 * MPC cost (emit_cost): which keys are kept is secret, so the norms are computed on shares: each
 * key's squared norm once (a SQUARE of its d elements, summed by a product with a public ones
 * vector: local), kept with the cache; each decode step ranks the pos − sink candidates (TOPK,
 * keep one-hot rows) and gathers the kept rows of [K | V] (GATHER of the one-hot rows). The
 * kept count sink + keep is public. The keys and the cache are mpcsim's operands (api->input)
 * and the gathered rows are named as the selection (api->selection), so `mpcsim policy check`
 * runs these ops on the plain engine and compares what they gather with kn_select's mask. */
#include <mpcsim/policy_plugin.h>

#include <stdlib.h>
#include <string.h>

static const mpcsim_api *api;

static const mpcsim_param kn_params[] = {
    {"sink", "4", "attention-sink positions always kept", 0, 1e9, 1},
    {"keep", "32", "cached keys of largest L2 norm kept besides the sinks", 1, 1e9, 1},
};

typedef struct kn {
    mpcsim_env env;
    uint32_t sink, keep;
    float *norm;   /* [L][Hkv][max_len] squared key norms */
    uint32_t *top; /* max_len scratch: the kept candidates */
    uint32_t *work;
} kn;

static void kn_fini(void *st)
{
    kn *s = st;
    if (!s)
        return;
    free(s->norm);
    free(s->top);
    free(s->work);
    free(s);
}

static int kn_init(const mpcsim_env *env, const mpcsim_args *a, void **st, mpcsim_err *e)
{
    kn *s = calloc(1, sizeof *s);
    if (!s)
        return api->fail(e, "keynorm: out of memory");
    s->env = *env;
    double f = 0;
    int rc = api->arg_u32(a, "sink", &s->sink, e);
    if (!rc)
        rc = api->kv_budget(a, &f, e);
    if (!rc && f > 0) { /* the budget counts the sinks */
        uint32_t n = api->budget_entries(f, env->prompt_len);
        char at[600];
        if (n <= s->sink)
            rc = api->fail(e,
                           "%skv_budget %g keeps %u of the %u prompt entries, no more than the %u "
                           "sinks",
                           api->at(a, "kv_budget", at, sizeof at), f, n, env->prompt_len, s->sink);
        s->keep = n - s->sink;
    } else if (!rc)
        rc = api->arg_u32(a, "keep", &s->keep, e);
    if (rc) {
        free(s);
        return rc;
    }
    size_t n = (size_t)env->n_layers * env->n_kv_heads * env->max_len;
    s->norm = calloc(n ? n : 1, sizeof *s->norm);
    s->top = calloc(env->max_len + 1, sizeof *s->top);
    s->work = calloc(env->max_len + 1, sizeof *s->work);
    if (!s->norm || !s->top || !s->work) {
        kn_fini(s);
        return api->fail(e, "keynorm: out of memory");
    }
    *st = s;
    return 0;
}

/* The rule between parameters: the sinks are the smaller part of the kept entries. */
static int kn_check(const mpcsim_args *a, mpcsim_err *e)
{
    uint32_t sink, keep;
    double f;
    int rc = api->arg_u32(a, "sink", &sink, e);
    if (!rc)
        rc = api->arg_u32(a, "keep", &keep, e);
    if (!rc)
        rc = api->kv_budget(a, &f, e);
    if (rc || f > 0 || sink <= keep)
        return rc;
    char at[600];
    return api->fail(e,
                     "%skeynorm: sink %u is above keep %u\n  hint: keep at least as many keys "
                     "by norm as sinks",
                     api->at(a, "sink", at, sizeof at), sink, keep);
}

static unsigned kn_needs(void *st, uint32_t pos) { return MPCSIM_NEED_K; }

static float *norms(kn *s, uint32_t layer, uint32_t g)
{
    return s->norm + ((size_t)layer * s->env.n_kv_heads + g) * s->env.max_len;
}

static int kn_observe(void *st, const mpcsim_obs *o, mpcsim_err *e)
{
    kn *s = st;
    uint32_t d = s->env.head_dim;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        const float *k = o->k + (size_t)g * d;
        double sq = 0;
        for (uint32_t i = 0; i < d; i++)
            sq += (double)k[i] * k[i];
        norms(s, o->layer, g)[o->pos] = (float)sq;
    }
    return 0;
}

static int kn_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     mpcsim_err *e)
{
    kn *s = st;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        uint8_t *row = keep + (size_t)g * pos;
        if ((uint64_t)pos <= (uint64_t)s->sink + s->keep) {
            memset(row, 1, pos);
            continue;
        }
        memset(row, 0, pos);
        memset(row, 1, s->sink);
        size_t n = api->topk(norms(s, layer, g) + s->sink, pos - s->sink, s->keep, s->top, s->work);
        for (size_t i = 0; i < n; i++)
            row[s->sink + s->top[i]] = 1;
    }
    return 0;
}

/* The squared norms of n new keys of every KV head, written at row r0 of the norm state. */
static void emit_norms(kn *s, mpcsim_opb *b, uint32_t n, uint32_t r0)
{
    uint32_t H = s->env.n_kv_heads, d = s->env.head_dim;
    uint32_t st = api->shared(b, "norm", MPCSIM_ROLE_CACHE, H, s->env.max_len, 1);
    uint32_t k = api->input(b, MPCSIM_IN_KEYS_NEW, n);
    uint32_t sq = api->tensor(b, "k_sq", MPCSIM_ROLE_TEMP, H, n, d);
    api->op(b, MPCSIM_OP_SQUARE, H, n, 0, d, k, MPCSIM_NONE, MPCSIM_NONE, sq, 0, 0, 0);
    uint32_t ones = api->shared(b, "ones", MPCSIM_ROLE_PUBLIC, 1, d, 1);
    uint32_t nn = api->tensor(b, "k_norm", MPCSIM_ROLE_TEMP, H, n, 1);
    api->matmul_pub(b, sq, ones, H * n, d, 1, nn);
    api->put(b, nn, st, H, r0, n, 1);
}

/* How far two candidates' squared norms on the fixed-point engine may be apart and still be a
 * tie to kn_select's float ones. Keys rounded to u = 2^-18 (mpcsim's default fixed point), each
 * square truncated (±u), summed exactly: |ŝ − s| ≤ √d·‖k‖·u + 2d·u; kn_select's float norm adds
 * a relative 2^-24. Twice the largest (√(d·M) ≤ (d + M)/2), for the two candidates of a
 * swap. */
static double tie_tol(const kn *s, uint32_t layer, uint32_t kv_len)
{
    double M = 0, u = 0x1p-18, d = s->env.head_dim;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++)
        for (uint32_t j = s->sink; j < kv_len; j++)
            M = norms((kn *)s, layer, g)[j] > M ? norms((kn *)s, layer, g)[j] : M;
    return 2 * (((d + M) / 2 + 2 * d) * u + M * 0x1p-24);
}

static int kn_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                   mpcsim_opb *b, mpcsim_err *e)
{
    kn *s = st;
    uint32_t H = s->env.n_kv_heads, d = s->env.head_dim;
    if (phase == MPCSIM_PHASE_PREFILL) {
        emit_norms(s, b, kv_len, 0);
        return 0;
    }
    emit_norms(s, b, 1, kv_len); /* the step's own key, a candidate from the next step on */
    if ((uint64_t)kv_len <= (uint64_t)s->sink + s->keep)
        return 0; /* everything kept: nothing secret to choose */
    uint32_t c = kv_len - s->sink;
    uint32_t st_norm = api->shared(b, "norm", MPCSIM_ROLE_CACHE, H, s->env.max_len, 1);
    uint32_t cand = api->rows(b, st_norm, H, s->sink, c, 1, "cand");
    uint32_t row = api->transpose(b, cand, H, c, 1, "cand_row");
    uint32_t oh = api->tensor(b, "topk", MPCSIM_ROLE_TEMP, H, s->keep, c);
    api->op(b, MPCSIM_OP_TOPK, H, 1, 0, c, row, MPCSIM_NONE, MPCSIM_NONE, oh, 0, (int32_t)s->keep,
            0);
    uint32_t kv = api->input(b, MPCSIM_IN_KV, kv_len);
    uint32_t tab = api->rows(b, kv, H, s->sink, c, 2 * d, "kv_cand");
    uint32_t out = api->tensor(b, "kv_kept", MPCSIM_ROLE_TEMP, H, s->keep, 2 * d);
    api->op(b, MPCSIM_OP_GATHER, H, s->keep, c, 2 * d, oh, tab, MPCSIM_NONE, out,
            MPCSIM_OPF_NO_TRUNC, 0, 0);
    /* the sinks stay public; ties: see tie_tol */
    api->selection(b, out, s->keep, s->sink, kv_len, row, tie_tol(s, layer, kv_len));
    return 0;
}

static const mpcsim_policy keynorm = {
    MPCSIM_POLICY_HEAD,
    .name = "keynorm",
    .summary = "attention sinks + the cached keys of largest L2 norm (example plug-in)",
    .params = kn_params,
    .n_params = sizeof kn_params / sizeof kn_params[0],
    .init = kn_init,
    .fini = kn_fini,
    .needs = kn_needs,
    .observe = kn_observe,
    .select = kn_select,
    .emit_cost = kn_emit,
    .metric_stride = "16",
    .stateless_select = 1,
    .budget_keys = "keep",
    .check = kn_check,
};

const mpcsim_policy *mpcsim_policy_plugin(const mpcsim_api *a)
{
    api = a;
    return &keynorm;
}
