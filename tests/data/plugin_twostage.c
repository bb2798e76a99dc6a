/* plugin_twostage.c — a test plug-in (tests/check_pcheck.c builds it with the public header
 * alone): a two-stage selection of the prompt at its end, per KV head. Stage 1 keeps the
 * `first` entries whose key's first channel is negative (a 0/1 score: plateaus of exact ties,
 * the smaller position first); stage 2 keeps `keep` entries, stage 1's first, then the largest
 * squared key norms ‖k‖². Decode steps attend the kept prompt entries and every later one. Its
 * ops break stage 1's ties their own way; the choice and adopt hooks (ABI 1.3) let `policy
 * check` carry them into stage 2. */
#include <mpcsim/policy_plugin.h>

#include <stdlib.h>
#include <string.h>

static const mpcsim_api *api;

static const mpcsim_param ts_params[] = {
    {"keep", "12", "prompt entries kept per KV head", 1, 1e9, 1},
    {"first", "8", "of them, chosen by stage 1", 0, 1e9, 1},
};

typedef struct ts {
    mpcsim_env env;
    uint32_t keep, first;
    float *neg, *norm;    /* [L][Hkv][P]: stage 1's score, stage 2's */
    uint8_t *s1, *alive;  /* [L][Hkv][P]: stage 1's set, the kept one */
    float *score;         /* P scratch */
    uint32_t *top, *work; /* P scratch */
    float kmax;           /* the largest |key channel| */
} ts;

static void ts_fini(void *st)
{
    ts *s = st;
    if (!s)
        return;
    free(s->neg);
    free(s->norm);
    free(s->s1);
    free(s->alive);
    free(s->score);
    free(s->top);
    free(s->work);
    free(s);
}

static int ts_init(const mpcsim_env *env, const mpcsim_args *a, void **st, mpcsim_err *e)
{
    ts *s = calloc(1, sizeof *s);
    if (!s)
        return api->fail(e, "twostage: out of memory");
    s->env = *env;
    int rc = api->arg_u32(a, "keep", &s->keep, e);
    if (!rc)
        rc = api->arg_u32(a, "first", &s->first, e);
    if (!rc && s->first > s->keep)
        rc = api->fail(e, "twostage: first %u is more than keep %u", s->first, s->keep);
    if (rc) {
        free(s);
        return rc;
    }
    size_t n = (size_t)env->n_layers * env->n_kv_heads * env->prompt_len + 1;
    s->neg = calloc(n, sizeof *s->neg);
    s->norm = calloc(n, sizeof *s->norm);
    s->s1 = calloc(n, 1);
    s->alive = calloc(n, 1);
    s->score = calloc(env->prompt_len + 1, sizeof *s->score);
    s->top = calloc(env->prompt_len + 1, sizeof *s->top);
    s->work = calloc(env->prompt_len + 1, sizeof *s->work);
    if (!s->neg || !s->norm || !s->s1 || !s->alive || !s->score || !s->top || !s->work) {
        ts_fini(s);
        return api->fail(e, "twostage: out of memory");
    }
    memset(s->alive, 1, n);
    *st = s;
    return 0;
}

static unsigned ts_needs(void *st, uint32_t pos)
{
    ts *s = st;
    return pos < s->env.prompt_len ? MPCSIM_NEED_K : 0;
}

static size_t at(const ts *s, uint32_t layer, uint32_t g)
{
    return ((size_t)layer * s->env.n_kv_heads + g) * s->env.prompt_len;
}

static int ts_observe(void *st, const mpcsim_obs *o, mpcsim_err *e)
{
    ts *s = st;
    uint32_t d = s->env.head_dim;
    if (o->pos >= s->env.prompt_len)
        return 0;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        const float *k = o->k + (size_t)g * d;
        double sq = 0;
        for (uint32_t i = 0; i < d; i++) {
            sq += (double)k[i] * k[i];
            s->kmax = k[i] > s->kmax ? k[i] : -k[i] > s->kmax ? -k[i] : s->kmax;
        }
        size_t j = at(s, o->layer, g) + o->pos;
        s->norm[j] = (float)sq;
        /* negative once rounded to the fixed point (nearest multiple of 2^-18) */
        s->neg[j] = k[0] < -0x1p-19f ? 1.0f : 0.0f;
    }
    return 0;
}

static int compresses(const ts *s) { return s->env.prompt_len > s->keep; }

/* Stage 2 of KV head g of layer around s->s1. */
static void stage2(ts *s, uint32_t layer, uint32_t g)
{
    uint32_t P = s->env.prompt_len;
    size_t o = at(s, layer, g);
    for (uint32_t j = 0; j < P; j++)
        s->score[j] = s->s1[o + j] ? 1e30f : s->norm[o + j];
    size_t n = api->topk(s->score, P, s->keep, s->top, s->work);
    memset(s->alive + o, 0, P);
    for (size_t i = 0; i < n; i++)
        s->alive[o + s->top[i]] = 1;
}

static int ts_prefill(void *st, mpcsim_err *e)
{
    ts *s = st;
    uint32_t P = s->env.prompt_len;
    if (!compresses(s))
        return 0;
    for (uint32_t l = 0; l < s->env.n_layers; l++)
        for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
            size_t o = at(s, l, g);
            size_t n = api->topk(s->neg + o, P, s->first, s->top, s->work);
            memset(s->s1 + o, 0, P);
            for (size_t i = 0; i < n; i++)
                s->s1[o + s->top[i]] = 1;
            stage2(s, l, g);
        }
    return 0;
}

static int ts_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     mpcsim_err *e)
{
    ts *s = st;
    uint32_t P = s->env.prompt_len, np = pos < P ? pos : P;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        memcpy(keep + (size_t)g * pos, s->alive + at(s, layer, g), np);
        memset(keep + (size_t)g * pos + np, 1, pos - np);
    }
    return 0;
}

/* The error bound of the ops' ‖k‖² against ts_observe's, both of a swap: each channel rounded
 * (u/2), squared (2·|k|·u/2 + u²/4) and truncated (u), d of them; the float sum's 2^-22. */
static double norm_tol(const ts *s)
{
    double u = 0x1p-18, d = s->env.head_dim, k = s->kmax;
    return 2 * (d * (k * u + u * u / 4 + u) + d * k * k * 0x1p-22);
}

static int ts_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                   mpcsim_opb *b, mpcsim_err *e)
{
    ts *s = st;
    uint32_t H = s->env.n_kv_heads, d = s->env.head_dim, P = s->env.prompt_len, B = s->keep;
    if (!compresses(s))
        return 0;
    uint32_t kept_st = api->shared(b, "kept", MPCSIM_ROLE_CACHE, H, B, 2 * d);
    uint32_t sc_st = api->shared(b, "score", MPCSIM_ROLE_CACHE, H, 1, P);
    uint32_t s1_st = api->shared(b, "s1", MPCSIM_ROLE_CACHE, H, 1, P);
    if (phase == MPCSIM_PHASE_DECODE) {
        api->input(b, MPCSIM_IN_KV, kv_len);
        api->selection(b, kept_st, B, 0, P, sc_st, norm_tol(s));
        if (s->first > 0)
            api->selection_stage(b, s1_st);
        return 0;
    }
    uint32_t k = api->input(b, MPCSIM_IN_KEYS_NEW, P); /* (H, P, d) */
    /* stage 1: [k_0 < 0], the top `first` of it */
    uint32_t kt = api->transpose(b, k, H, P, d, "k_t");
    uint32_t k0 = api->rows(b, kt, H, 0, 1, P, "k0"); /* (H, 1, P) */
    uint32_t zero = api->shared(b, "sign_zero", MPCSIM_ROLE_PUBLIC, 1, 1, 1);
    uint32_t neg = api->tensor(b, "neg", MPCSIM_ROLE_TEMP, H, 1, P);
    api->op(b, MPCSIM_OP_LT, H, 1, 0, P, k0, zero, MPCSIM_NONE, neg, MPCSIM_OPF_PUBLIC_B, 0, 0);
    /* stage 2: ‖k‖², stage 1's entries raised by 2^20 */
    uint32_t sq = api->tensor(b, "k_sq", MPCSIM_ROLE_TEMP, H, P, d);
    api->op(b, MPCSIM_OP_SQUARE, H, P, 0, d, k, MPCSIM_NONE, MPCSIM_NONE, sq, 0, 0, 0);
    uint32_t ones = api->shared(b, "ones", MPCSIM_ROLE_PUBLIC, 1, d, 1);
    uint32_t nn = api->tensor(b, "k_norm", MPCSIM_ROLE_TEMP, H, P, 1);
    api->matmul_pub(b, sq, ones, H * P, d, 1, nn);
    uint32_t sc = api->transpose(b, nn, H, P, 1, "k_norm_r"); /* (H, 1, P) */
    if (s->first > 0) {
        uint32_t oh1 = api->tensor(b, "topk1", MPCSIM_ROLE_TEMP, H, s->first, P);
        api->op(b, MPCSIM_OP_TOPK, H, 1, 0, P, neg, MPCSIM_NONE, MPCSIM_NONE, oh1, 0,
                (int32_t)s->first, 0);
        uint32_t s1 =
            api->transpose(b, api->colsum(b, oh1, H, s->first, P, "s1_c"), H, P, 1, "s1_r");
        api->put(b, s1, s1_st, H, 0, 1, P);
        uint32_t big = api->tensor(b, "s1_big", MPCSIM_ROLE_TEMP, H, 1, P);
        api->op(b, MPCSIM_OP_MUL_PUB, H, 1, 0, P, s1, MPCSIM_NONE, MPCSIM_NONE, big,
                MPCSIM_OPF_NO_TRUNC, 0, (double)(1u << 20));
        uint32_t raised = api->tensor(b, "score_s1", MPCSIM_ROLE_TEMP, H, 1, P);
        api->op(b, MPCSIM_OP_ADD, H, 1, 0, P, sc, big, MPCSIM_NONE, raised, 0, 0, 0);
        sc = raised;
    }
    uint32_t oh = api->tensor(b, "topk2", MPCSIM_ROLE_TEMP, H, B, P);
    api->op(b, MPCSIM_OP_TOPK, H, 1, 0, P, sc, MPCSIM_NONE, MPCSIM_NONE, oh, 0, (int32_t)B, 0);
    uint32_t kv = api->input(b, MPCSIM_IN_KV, P);
    api->op(b, MPCSIM_OP_GATHER, H, B, P, 2 * d, oh, kv, MPCSIM_NONE, kept_st, MPCSIM_OPF_NO_TRUNC,
            0, 0);
    api->put(b, sc, sc_st, H, 0, 1, P);
    return 0;
}

/* Stage 1: the 0/1 scores are exact (the fixed point's sign of the rounded channel), so only
 * equal ones tie: tol 0. */
static int ts_choice(void *st, uint32_t layer, uint32_t pos, uint32_t stage, mpcsim_choice *c)
{
    ts *s = st;
    if (stage != 1 || !compresses(s) || !s->first)
        return 0;
    size_t o = at(s, layer, 0);
    *c = (mpcsim_choice){.n = s->env.prompt_len,
                         .head_stride = s->env.prompt_len,
                         .score = s->neg + o,
                         .kept = s->s1 + o,
                         .tol = 0};
    return 1;
}

static int ts_adopt(void *st, uint32_t layer, uint32_t pos, uint32_t stage, const uint8_t *kept,
                    mpcsim_err *e)
{
    ts *s = st;
    if (stage != 1)
        return api->fail(e, "twostage: no choice of stage %u", stage);
    size_t P = s->env.prompt_len;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        for (size_t j = 0; j < P; j++)
            s->s1[at(s, layer, g) + j] = kept[g * P + j] != 0;
        stage2(s, layer, g);
    }
    return 0;
}

static const mpcsim_policy ts_policy = {
    MPCSIM_POLICY_HEAD,
    .name = "twostage",
    .summary = "two stages at the prompt's end: negative first channels, then key norms",
    .params = ts_params,
    .n_params = sizeof ts_params / sizeof ts_params[0],
    .init = ts_init,
    .fini = ts_fini,
    .needs = ts_needs,
    .observe = ts_observe,
    .prefill = ts_prefill,
    .select = ts_select,
    .emit_cost = ts_emit,
    .choice = ts_choice,
    .adopt = ts_adopt,
};

const mpcsim_policy *mpcsim_policy_plugin(const mpcsim_api *a)
{
    api = a;
    return &ts_policy;
}
