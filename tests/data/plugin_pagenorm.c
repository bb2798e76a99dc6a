/* plugin_pagenorm.c — a test plug-in (tests/check_pagesec.c builds it with the public header
 * alone): attention sinks plus the pages of `page` positions with the largest summed squared
 * key norm. At a decode step of position pos each KV head keeps [0, sink) (sink a multiple of
 * the page) and the `pages` pages of [sink, pos) ranked by the sum of their cached keys'
 * ‖k‖² (ties: the earlier page); everything while they cover the candidates. A partial last
 * page is gathered whole: its rows past pos are padding, biased out with api->selection_bias
 * (ABI 1.2). */
#include <mpcsim/policy_plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mpcsim_api *api;

static const mpcsim_param pn_params[] = {
    {"sink", "8", "attention-sink positions always kept (a multiple of page)", 0, 1e9, 1},
    {"page", "4", "positions per page", 1, 1e6, 1},
    {"pages", "3", "pages kept besides the sinks", 1, 1e9, 1},
};

typedef struct pn {
    mpcsim_env env;
    uint32_t sink, page, pages;
    float *norm; /* [L][Hkv][max_len] squared key norms */
    float *sum;  /* max_len: the pages' sums */
    uint32_t *top, *work;
} pn;

static void pn_fini(void *st)
{
    pn *s = st;
    if (!s)
        return;
    free(s->norm);
    free(s->sum);
    free(s->top);
    free(s->work);
    free(s);
}

static int pn_init(const mpcsim_env *env, const mpcsim_args *a, void **st, mpcsim_err *e)
{
    pn *s = calloc(1, sizeof *s);
    if (!s)
        return api->fail(e, "pagenorm: out of memory");
    s->env = *env;
    int rc = api->arg_u32(a, "sink", &s->sink, e);
    if (!rc)
        rc = api->arg_u32(a, "page", &s->page, e);
    if (!rc)
        rc = api->arg_u32(a, "pages", &s->pages, e);
    if (!rc && s->sink % s->page)
        rc = api->fail(e, "pagenorm: sink %u is not a multiple of page %u", s->sink, s->page);
    if (!rc && api->abi_minor < 2)
        rc = api->fail(e, "pagenorm: needs mpcsim's plug-in ABI 1.2 (selection_bias)");
    if (rc) {
        free(s);
        return rc;
    }
    size_t n = (size_t)env->n_layers * env->n_kv_heads * env->max_len;
    s->norm = calloc(n + 1, sizeof *s->norm);
    s->sum = calloc(env->max_len + 1, sizeof *s->sum);
    s->top = calloc(env->max_len + 1, sizeof *s->top);
    s->work = calloc(env->max_len + 1, sizeof *s->work);
    if (!s->norm || !s->sum || !s->top || !s->work) {
        pn_fini(s);
        return api->fail(e, "pagenorm: out of memory");
    }
    *st = s;
    return 0;
}

static unsigned pn_needs(void *st, uint32_t pos) { return MPCSIM_NEED_K; }

static float *norms(const pn *s, uint32_t layer, uint32_t g)
{
    return s->norm + ((size_t)layer * s->env.n_kv_heads + g) * s->env.max_len;
}

static int pn_observe(void *st, const mpcsim_obs *o, mpcsim_err *e)
{
    pn *s = st;
    uint32_t d = s->env.head_dim;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        double sq = 0;
        for (uint32_t i = 0; i < d; i++)
            sq += (double)o->k[(size_t)g * d + i] * o->k[(size_t)g * d + i];
        norms(s, o->layer, g)[o->pos] = (float)sq;
    }
    return 0;
}

/* The candidate pages of pos cached entries. */
static uint32_t n_pages(const pn *s, uint32_t pos)
{
    return pos > s->sink ? (pos - s->sink + s->page - 1) / s->page : 0;
}

static int pn_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                     mpcsim_err *e)
{
    pn *s = st;
    uint32_t nu = n_pages(s, pos);
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++) {
        uint8_t *row = keep + (size_t)g * pos;
        if (nu <= s->pages) {
            memset(row, 1, pos);
            continue;
        }
        memset(row, 0, pos);
        memset(row, 1, s->sink);
        const float *nm = norms(s, layer, g);
        for (uint32_t u = 0; u < nu; u++) {
            float sum = 0;
            for (uint32_t j = s->sink + u * s->page; j < s->sink + (u + 1) * s->page && j < pos;
                 j++)
                sum += nm[j];
            s->sum[u] = sum;
        }
        size_t n = api->topk(s->sum, nu, s->pages, s->top, s->work);
        for (size_t i = 0; i < n; i++)
            for (uint32_t j = s->sink + s->top[i] * s->page;
                 j < s->sink + (s->top[i] + 1) * s->page && j < pos; j++)
                row[j] = 1;
    }
    return 0;
}

/* The squared norms of n new keys of every KV head, written at row r0 of the norm state. */
static uint32_t emit_norms(pn *s, mpcsim_opb *b, uint32_t n, uint32_t r0)
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
    return st;
}

static int pn_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                   mpcsim_opb *b, mpcsim_err *e)
{
    pn *s = st;
    uint32_t H = s->env.n_kv_heads, d = s->env.head_dim, S = s->page, G = s->env.n_heads / H;
    if (phase == MPCSIM_PHASE_PREFILL) {
        emit_norms(s, b, kv_len, 0);
        return 0;
    }
    uint32_t nst = emit_norms(s, b, 1, kv_len), nu = n_pages(s, kv_len), kp = s->pages;
    if (nu <= kp)
        return 0;
    /* the candidates' norms in whole pages (a partial last page's rows zero: x − x), each
     * page's sum by a product with public ones */
    uint32_t nc = kv_len - s->sink;
    uint32_t cand = api->rows(b, nst, H, s->sink, nc, 1, "cand");
    uint32_t padded = api->tensor(b, "cand_pages", MPCSIM_ROLE_TEMP, H, nu * S, 1);
    api->put(b, cand, padded, H, 0, nc, 1);
    if (nc < nu * S) {
        uint32_t one = api->rows(b, cand, H, 0, 1, 1, "cand_one");
        uint32_t zero = api->op(b, MPCSIM_OP_SUB, H, 1, 0, 1, one, one, MPCSIM_NONE,
                                api->tensor(b, "zero", MPCSIM_ROLE_TEMP, H, 1, 1), 0, 0, 0);
        for (uint32_t r = nc; r < nu * S; r++)
            api->put(b, zero, padded, H, r, 1, 1);
    }
    uint32_t pones = api->shared(b, "page_ones", MPCSIM_ROLE_PUBLIC, 1, S, 1);
    uint32_t sums = api->matmul_pub(b, padded, pones, H * nu, S, 1,
                                    api->tensor(b, "page_sum", MPCSIM_ROLE_TEMP, H, nu, 1));
    uint32_t row = api->transpose(b, sums, H, nu, 1, "page_row");
    uint32_t oh = api->tensor(b, "topk", MPCSIM_ROLE_TEMP, H, kp, nu);
    api->op(b, MPCSIM_OP_TOPK, H, 1, 0, nu, row, MPCSIM_NONE, MPCSIM_NONE, oh, 0, (int32_t)kp, 0);
    /* the cache in whole pages: rows past kv_len are zero (padding) */
    uint32_t kv = api->input(b, MPCSIM_IN_KV, s->sink + nu * S);
    uint32_t tab = api->rows(b, kv, H, s->sink, nu * S, 2 * d, "kv_pages");
    uint32_t out = api->tensor(b, "kv_kept", MPCSIM_ROLE_TEMP, H, kp * S, 2 * d);
    api->op(b, MPCSIM_OP_GATHER, H, kp, nu, 2 * d * S, oh, tab, MPCSIM_NONE, out,
            MPCSIM_OPF_NO_TRUNC, 0, 0);
    /* each entry's score its page's; ties: each norm within (√d·‖k‖ + 2d)·2⁻¹⁸ and its float's
     * 2⁻²⁴, a page's sum of S, twice */
    uint32_t eones = api->shared(b, "entry_ones", MPCSIM_ROLE_PUBLIC, 1, 1, S);
    uint32_t ent = api->matmul_pub(b, row, eones, H * nu, 1, S,
                                   api->tensor(b, "score_entry", MPCSIM_ROLE_TEMP, H, nu * S, 1));
    double M = 0, u = 0x1p-18;
    for (uint32_t g = 0; g < H; g++)
        for (uint32_t j = s->sink; j < kv_len; j++)
            M = norms(s, layer, g)[j] > M ? norms(s, layer, g)[j] : M;
    double tol = 2 * S * (((d + M) / 2 + 2 * d) * u + M * (S + 1) * 0x1p-24);
    api->selection(b, out, kp * S, s->sink, kv_len, api->rows(b, ent, H, 0, nc, 1, "scores"), tol);
    if (nc % S == 0)
        return 0; /* whole pages: no padding */
    /* the padding rows' bias: the one-hot rows times a public per-page bias (0 for the nc
     * cached entries, −MPCSIM_PAD_BIAS after), repeated for the G query heads of a KV head */
    char nm[48];
    snprintf(nm, sizeof nm, "rows_pad%u", nc);
    uint32_t pad = api->shared(b, nm, MPCSIM_ROLE_PUBLIC, 1, nu, S);
    uint32_t bias = api->matmul_pub(b, oh, pad, H * kp, nu, S,
                                    api->tensor(b, "pad_bias", MPCSIM_ROLE_TEMP, H, kp, S));
    if (G > 1) {
        uint32_t gones = api->shared(b, "heads_ones", MPCSIM_ROLE_PUBLIC, 1, 1, G);
        uint32_t r = api->matmul_pub(b, bias, gones, H * kp * S, 1, G,
                                     api->tensor(b, "pad_rep", MPCSIM_ROLE_TEMP, H, kp * S, G));
        bias = api->transpose(b, r, H, kp * S, G, "pad_heads");
    }
    api->selection_bias(b, bias);
    return 0;
}

static const mpcsim_policy pagenorm = {
    MPCSIM_POLICY_HEAD,
    .name = "pagenorm",
    .summary = "attention sinks + the pages of largest summed key norm (test plug-in)",
    .params = pn_params,
    .n_params = sizeof pn_params / sizeof pn_params[0],
    .init = pn_init,
    .fini = pn_fini,
    .needs = pn_needs,
    .observe = pn_observe,
    .select = pn_select,
    .emit_cost = pn_emit,
    .stateless_select = 1,
};

const mpcsim_policy *mpcsim_policy_plugin(const mpcsim_api *a)
{
    api = a;
    return &pagenorm;
}
