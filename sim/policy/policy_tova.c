/* policy_tova.c — Token Omission Via Attention (schwartz-lab-NLP/TOVA, src/tova_cache.py).
 *
 * One index set per layer, shared by all heads. Whenever the layer's cache holds more than
 * cache_size entries, keep the top cache_size by s[j] = mean over heads of the newest query's
 * attention. At the end of the prompt that is one top-k over the prompt (the last prompt query's
 * row); during decoding the cache grows by one per step, so each step evicts exactly its
 * arg-min (possibly the new token itself; ties: the later position goes first). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pcheck.h"
#include "policy.h"

static const policy_param tova_params[] = {
    {"cache_size", "512",
     "entries kept per layer (TOVA's only hyper-parameter; 512 is our default, matching "
     "StreamingLLM's recent window)",
     NULL, 1, 1e9, 1},
    {"dense_layers", "0",
     "the first N layers keep every entry and select nothing (a composition's `layers: {dense: "
     "N}`; TOVA itself has none)",
     NULL, 0, 1e9, 1},
    {"sinks", "0",
     "the first N entries, kept beside the cache_size chosen (attention sinks: a composition's "
     "`sinks`; TOVA itself has none)",
     NULL, 0, 1e9, 1},
    {"recent", "0",
     "the newest N entries, kept beside the cache_size chosen (a composition's recent window; "
     "TOVA itself has none)",
     NULL, 0, 1e9, 1},
};

typedef struct tova_state {
    policy_env env;
    uint32_t cap;
    uint32_t dense;         /* layers [0, dense) keep every entry (below L: the others select) */
    uint32_t sinks, recent; /* entries [0, sinks) and the newest `recent` kept beside the cap
                             * chosen from the candidates between them */
    uint32_t total;         /* sinks + cap + recent: the entries a layer keeps */
    uint8_t *alive;         /* [L][max_len] */
    uint32_t *count;        /* [L] */
    float *s;               /* max_len scratch: head-mean attention */
    uint32_t *work, *sel;
    float *last;      /* [L][max_len]: the head means the layer's last choice ranked */
    uint32_t *last_n; /* [L]: the entries it ranked (0: none yet) */
} tova_state;

static void tova_fini(void *st)
{
    tova_state *s = st;
    if (!s)
        return;
    free(s->alive);
    free(s->count);
    free(s->s);
    free(s->work);
    free(s->sel);
    free(s->last);
    free(s->last_n);
    free(s);
}

static int tova_init(const policy_env *env, const policy_args *a, void **st, errbuf *e)
{
    uint32_t cap, dense = 0, sinks = 0, recent = 0;
    int rc = policy_arg_u32(&policy_tova, a, "cache_size", &cap, e);
    if (!rc)
        rc = policy_arg_u32(&policy_tova, a, "dense_layers", &dense, e);
    if (!rc)
        rc = policy_arg_u32(&policy_tova, a, "sinks", &sinks, e);
    if (!rc)
        rc = policy_arg_u32(&policy_tova, a, "recent", &recent, e);
    double f = 0;
    if (!rc)
        rc = policy_kv_budget(&policy_tova, a, &f, e);
    if (rc)
        return rc;
    if (f > 0) /* kv_budget: round(F·P) entries per layer */
        cap = policy_budget_entries(f, env->prompt_len);
    tova_state *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, MS_ERR_NOMEM, "policy tova: out of memory");
    s->env = *env;
    s->cap = cap;
    s->dense = dense < env->n_layers ? dense : env->n_layers;
    s->sinks = sinks;
    s->recent = recent;
    uint64_t total = (uint64_t)sinks + cap + recent;
    s->total = total < UINT32_MAX ? (uint32_t)total : UINT32_MAX;
    s->alive = calloc((size_t)env->n_layers * env->max_len, 1);
    s->count = calloc(env->n_layers, sizeof *s->count);
    s->s = malloc((size_t)env->max_len * sizeof *s->s);
    s->work = malloc((size_t)env->max_len * sizeof *s->work);
    s->sel = malloc(2 * (size_t)env->max_len * sizeof *s->sel); /* candidates, then chosen */
    s->last = calloc((size_t)env->n_layers * env->max_len, sizeof *s->last);
    s->last_n = calloc(env->n_layers, sizeof *s->last_n);
    if (!s->alive || !s->count || !s->s || !s->work || !s->sel || !s->last || !s->last_n) {
        tova_fini(s);
        return err_set(e, MS_ERR_NOMEM, "policy tova: out of memory");
    }
    *st = s;
    return MS_OK;
}

static unsigned tova_needs(void *st, uint32_t pos)
{
    tova_state *s = st;
    return pos + 1 >= s->env.prompt_len ? POLICY_NEED_ATT : 0;
}

/* A dense layer observes nothing: it keeps every entry. */
static unsigned tova_layer_needs(void *st, uint32_t layer, uint32_t pos)
{
    tova_state *s = st;
    return layer < s->dense ? 0 : tova_needs(st, pos);
}

static void head_mean(const tova_state *s, const float *att, uint32_t n)
{
    uint32_t H = s->env.n_heads;
    for (uint32_t j = 0; j < n; j++)
        s->s[j] = 0;
    for (uint32_t h = 0; h < H; h++)
        for (uint32_t j = 0; j < n; j++)
            s->s[j] += att[(size_t)h * n + j];
    for (uint32_t j = 0; j < n; j++)
        s->s[j] /= (float)H;
}

static int tova_observe(void *st, const policy_obs *o, errbuf *e)
{
    tova_state *s = st;
    uint8_t *alive = s->alive + (size_t)o->layer * s->env.max_len;
    alive[o->pos] = 1;
    s->count[o->layer]++;
    if (!o->att || s->count[o->layer] <= s->total || o->layer < s->dense)
        return MS_OK;
    uint32_t n = o->pos + 1;
    head_mean(s, o->att, n);
    memcpy(s->last + (size_t)o->layer * s->env.max_len, s->s, (size_t)n * sizeof *s->s);
    s->last_n[o->layer] = n;
    /* the candidates [c0, c1): after the sinks, before the recent window (n > total: some) */
    uint32_t c0 = s->sinks, c1 = n - s->recent;
    if (o->pos + 1 == s->env.prompt_len) {
        /* end of prompt: the sinks, the window and topk(s, cache_size) of the candidates */
        for (uint32_t j = c0; j < c1; j++)
            s->sel[j - c0] = j;
        size_t k = policy_topk(s->s, s->sel, c1 - c0, s->cap, s->sel + (c1 - c0), s->work);
        memset(alive + c0, 0, c1 - c0);
        for (size_t i = 0; i < k; i++)
            alive[s->sel[c1 - c0 + i]] = 1;
        s->count[o->layer] = (uint32_t)k + c0 + (n - c1);
        return MS_OK;
    }
    while (s->count[o->layer] > s->total) {
        uint32_t victim = UINT32_MAX;
        float best = INFINITY;
        for (uint32_t j = c0; j < c1; j++)
            if (alive[j] && s->s[j] <= best) {
                best = s->s[j];
                victim = j;
            }
        if (victim == UINT32_MAX)
            break;
        alive[victim] = 0;
        s->count[o->layer]--;
    }
    return MS_OK;
}

static int tova_select(void *st, uint32_t layer, uint32_t pos, const float *q, uint8_t *keep,
                       errbuf *e)
{
    tova_state *s = st;
    const uint8_t *alive = s->alive + (size_t)layer * s->env.max_len;
    for (uint32_t g = 0; g < s->env.n_kv_heads; g++)
        memcpy(keep + (size_t)g * pos, alive, pos);
    return MS_OK;
}

/* policy_ops.choice: the layer's last choice (the prompt's top-k, or a step's eviction) formed
 * the kept set of the step after it, ranking its n entries by head mean. Its error bound on the
 * check's fixed point (u = 2^-frac): the ops sum over the H heads the step's probabilities,
 * each rounded to the nearest multiple of u (u/2), exactly in the ring: their head sum is within
 * H·u/2 of the exact one, the mean within u/2. head_mean's float sum of H probabilities adds at
 * most H·2^-24 to the mean and the division 2^-24; the renormalized rows observe() gets are
 * rounded once more to float (2^-24) where the check renormalizes in double before rounding (the
 * ops' operand): 2^-23. One entry's (u/2 + (H + 3)·2^-24), twice for the two of a swap. */
static int tova_choice(void *st, uint32_t layer, uint32_t pos, uint32_t stage, policy_choice *c)
{
    tova_state *s = st;
    if (stage != 0 || s->last_n[layer] != pos)
        return 0;
    size_t off = (size_t)layer * s->env.max_len;
    *c = (policy_choice){.n = pos,
                         .head_stride = 0,
                         .score = s->last + off,
                         .kept = s->alive + off,
                         .tol = ldexp(1, -pcheck_frac_bits()) + (s->env.n_heads + 3) * 0x1p-23};
    return 1;
}

/* policy_ops.adopt: the layer's cache is the kept set of KV head 0 (one index set per layer). */
static int tova_adopt(void *st, uint32_t layer, uint32_t pos, uint32_t stage, const uint8_t *kept,
                      errbuf *e)
{
    tova_state *s = st;
    if (stage != 0 || pos > s->env.max_len)
        return err_set(e, MS_ERR_INPUT, "policy tova: no choice of stage %u at position %u", stage,
                       pos);
    uint8_t *alive = s->alive + (size_t)layer * s->env.max_len;
    uint32_t n = 0;
    for (uint32_t j = 0; j < pos; j++)
        n += (alive[j] = kept[j] != 0);
    s->count[layer] = n;
    return MS_OK;
}

/* The cached rows are state "tova.slots" (n_kv_heads, cache_size, 2·head_dim) per layer: the
 * kept entries in slot order, the order of the attention over them.
 *
 * An eviction follows its step's attention and nothing in the step waits for it, so the layers'
 * evictions need not wait for one another: each layer's call emits its own part (local: the head
 * mean of its attention row, its new row) into state of no layer that holds every layer's
 * ("tova.mean_all", "tova.kv_all" at the prompt; "tova.neg_all", "tova.new_all" at a decode
 * step), and the last layer's call emits the selection of every layer at once (layer −1: one
 * TOPK and GATHER, or one ARGMAX and SELECT, one set of rounds), as the composition's `evict:
 * permanent` (compose.c) and h2o (h2o_ops.c) run theirs. Every layer's slots are also kept
 * together ("tova.slots_all", (n_kv_heads, L·cache_size, 2·head_dim), rows of layer l at
 * l·cache_size), so a step stacks only its new rows; each layer's "tova.slots" is a copy, the
 * selection its step attends. A layer's call writes its rows into the stacks in place
 * (opb_write): only its rows move, where an append would re-lay the whole stack at every layer
 * (L²·rows of local work). The state carries the parts from one call to the next where each
 * call builds its own program (`policy check`, pcheck.c; the secure session splices each
 * layer's after its softmax: secpol_emit.c). */

/* The state nm of no layer (every layer's rows), for a call of layer `layer`'s. */
static uint32_t all_state(op_program *prog, int phase, const char *nm, uint32_t B, uint32_t R,
                          uint32_t C, int *failed)
{
    opb b;
    opb_init(&b, prog, phase, -1, OPC_POLICY, NULL);
    uint32_t t = opb_shared(&b, nm, OPT_CACHE, B, R, C);
    *failed |= opb_failed(&b);
    return t;
}

/* Layer l's slots (a copy of its rows of "tova.slots_all"). */
static uint32_t layer_slots(op_program *prog, int phase, uint32_t l, uint32_t Hkv, uint32_t B,
                            uint32_t d2, int *failed)
{
    opb b;
    opb_init(&b, prog, phase, (int)l, OPC_POLICY, NULL);
    uint32_t t = opb_shared(&b, "tova.slots", OPT_CACHE, Hkv, B, d2);
    *failed |= opb_failed(&b);
    return t;
}

/* After the selection wrote "tova.slots_all": each selecting layer's slots (layer D + l's at
 * row l·B), its rows there. */
static void split_slots(opb *w, uint32_t all, uint32_t D, uint32_t L, uint32_t Hkv, uint32_t B,
                        uint32_t d2, int *failed)
{
    for (uint32_t l = 0; l < L; l++)
        opb_put(w, opb_rows(w, all, Hkv, l * B, B, d2, "tova.slots_l"),
                layer_slots(w->prog, w->phase, D + l, Hkv, B, d2, failed), Hkv, 0, B, d2);
}

/* x's elements as a new tensor nm of shape (B, R, C) (a copy in the same order: VIEW, local). */
static uint32_t reshape(opb *w, uint32_t x, uint32_t B, uint32_t R, uint32_t C, const char *nm)
{
    uint32_t out = opb_tensor(w, nm, OPT_TEMP, B, R, C);
    opb_op(w, OP_VIEW, B, R, 0, C, x, OP_NONE, OP_NONE, out, 0, 0, 0);
    return out;
}

/* With sinks S or a recent window r: every layer's kept rows (instances [KV head][layer], n0
 * rows each: sinks at rows [0, S), the window's at [n0 − r, n0)) around the k chosen ones
 * into "tova.slots_all" (Hkv, L·(S + k + r), d2), [sinks | chosen | window]: public slices. */
static void put_slots(opb *w, uint32_t all, uint32_t rows, uint32_t n0, uint32_t chosen,
                      uint32_t HL, uint32_t S, uint32_t k, uint32_t r, uint32_t d2)
{
    uint32_t T = S + k + r, slots = opb_tensor(w, "tova.slots_new", OPT_TEMP, HL, T, d2);
    if (S)
        opb_put(w, opb_rows(w, rows, HL, 0, S, d2, "tova.sink_rows"), slots, HL, 0, S, d2);
    opb_put(w, chosen, slots, HL, S, k, d2);
    if (r)
        opb_put(w, opb_rows(w, rows, HL, n0 - r, r, d2, "tova.window_rows"), slots, HL, S + k, r,
                d2);
    opb_op(w, OP_VIEW, HL, T, 0, d2, slots, OP_NONE, OP_NONE, all, 0, 0, 0);
}

/* The prompt: topk(P − S − r, B) of every layer's head mean over the candidates at once, the
 * gather of the B chosen rows of every layer and KV head (one GATHER of batch Hkv·L, instances
 * [KV head][layer]), the sinks and the window beside them. */
static int tova_prompt_all(const tova_state *s, uint32_t P, op_program *prog, errbuf *e)
{
    const policy_env *v = &s->env;
    uint32_t L = v->n_layers - s->dense, Hkv = v->n_kv_heads, d2 = 2 * v->head_dim, B = s->cap;
    uint32_t S = s->sinks, r = s->recent, T = s->total, nc = P - S - r; /* P > T: nc > B */
    int failed = 0, apart = S || r;
    opb w;
    opb_init(&w, prog, PHASE_PREFILL, -1, OPC_POLICY, NULL);
    uint32_t means = all_state(prog, PHASE_PREFILL, "tova.mean_all", 1, L, P, &failed);
    uint32_t kv = all_state(prog, PHASE_PREFILL, "tova.kv_all", Hkv, L * P, d2, &failed);
    if (apart) /* the candidates' means: columns [S, P − r) of each layer's (public slices) */
        means = reshape(&w,
                        opb_rows(&w, reshape(&w, means, L, P, 1, "tova.mean_cols"), L, S, nc, 1,
                                 "tova.cand_cols"),
                        1, L, nc, "tova.cand_mean");
    /* COST: topk(T, B) per layer, every layer's in the same rounds (policies.md §1.12 TOVA
     * "topk(T, B) at prompt end"), T the candidates */
    uint32_t oh = opb_tensor(&w, "tova.topk", OPT_TEMP, 1, L * B, nc);
    opb_op(&w, OP_TOPK, 1, L, 0, nc, means, OP_NONE, OP_NONE, oh, 0, (int32_t)B, 0);
    if (Hkv > 1) { /* a layer's one index set for each of its KV heads (a local product by public
                    * ones, then a transposition): (Hkv·L, B, nc) */
        uint32_t hr = opb_matmul_pub(
            &w, oh, opb_shared(&w, "tova.heads_ones", OPT_PUBLIC, 1, 1, Hkv), L * B * nc, 1, Hkv,
            opb_tensor(&w, "tova.heads_t", OPT_TEMP, 1, L * B * nc, Hkv));
        oh = opb_transpose(&w, hr, 1, L * B * nc, Hkv, "tova.heads");
    }
    /* the layers' rows as instances [KV head][layer] (the gather's right operand per instance) */
    uint32_t tab = opb_tensor(&w, "tova.table", OPT_TEMP, Hkv * L, P, d2);
    opb_op(&w, OP_VIEW, Hkv * L, P, 0, d2, kv, OP_NONE, OP_NONE, tab, 0, 0, 0);
    uint32_t ctab = apart ? opb_rows(&w, tab, Hkv * L, S, nc, d2, "tova.cand_rows") : tab;
    /* COST: the gather of the B kept rows of every layer and KV head, in the same rounds */
    uint32_t all = all_state(prog, PHASE_PREFILL, "tova.slots_all", Hkv, L * T, d2, &failed);
    uint32_t got = apart ? opb_tensor(&w, "tova.chosen", OPT_TEMP, Hkv * L, B, d2) : all;
    opb_op(&w, OP_GATHER, Hkv * L, B, nc, d2, oh, ctab, OP_NONE, got, OPF_NO_TRUNC, 0, 0);
    if (apart)
        put_slots(&w, all, tab, P, got, Hkv * L, S, B, r, d2);
    split_slots(&w, all, s->dense, L, Hkv, T, d2, &failed);
    if (failed)
        return err_set(e, MS_ERR_NOMEM, "policy tova: out of memory emitting its ops");
    return policy_emit_done(&w, "tova", e);
}

/* A decode step: the arg-min of every layer's B + 1 candidates at once, the compaction of every
 * layer's B remaining ones (one SELECT) into "tova.slots_all". evicted: the kept rows are the
 * slots (else the whole cache, "tova.kept_all": the first eviction). The kept rows are [sinks |
 * B chosen | window] and the new entry follows them, so the candidates are rows S … S+B: the
 * chosen ones and the entry leaving the window (with no window: the new entry). */
static int tova_step_all(const tova_state *s, int evicted, op_program *prog, errbuf *e)
{
    const policy_env *v = &s->env;
    uint32_t L = v->n_layers - s->dense, Hkv = v->n_kv_heads, d2 = 2 * v->head_dim, B = s->cap;
    uint32_t S = s->sinks, T = s->total, n = T + 1, nc = B + 1;
    int failed = 0, apart = S || s->recent;
    opb w;
    opb_init(&w, prog, PHASE_DECODE, -1, OPC_POLICY, NULL);
    uint32_t all = all_state(prog, PHASE_DECODE, "tova.slots_all", Hkv, L * T, d2, &failed);
    uint32_t kept =
        evicted ? all : all_state(prog, PHASE_DECODE, "tova.kept_all", Hkv, L * T, d2, &failed);
    uint32_t nw = all_state(prog, PHASE_DECODE, "tova.new_all", Hkv, L, d2, &failed);
    uint32_t negs = all_state(prog, PHASE_DECODE, "tova.neg_all", 1, L, n, &failed);
    /* every layer's n rows, instances [KV head][layer]: slot i keeps its row before the evicted
     * one, takes its successor's from it on */
    uint32_t rows = opb_tensor(&w, "tova.rows", OPT_TEMP, Hkv * L, n, d2);
    opb_put(&w, kept, rows, Hkv * L, 0, T, d2);
    opb_put(&w, nw, rows, Hkv * L, T, 1, d2);
    uint32_t cur = opb_rows(&w, rows, Hkv * L, S, B, d2, "tova.cur");
    uint32_t nxt = opb_rows(&w, rows, Hkv * L, S + 1, B, d2, "tova.next");
    if (apart) /* the candidates' negated means: columns [S, S + B] of each layer's */
        negs = reshape(&w,
                       opb_rows(&w, reshape(&w, negs, L, n, 1, "tova.neg_cols"), L, S, nc, 1,
                                "tova.cand_cols"),
                       1, L, nc, "tova.cand_neg");
    /* COST: arg-min over each layer's nc candidates (nc-1 comparisons, ⌈log2 nc⌉ rounds) as the
     * arg-max of the negated sums, every layer's in the same rounds (§1.5: "In MPC the
     * steady-state step is an arg-min over T") */
    uint32_t oh = opb_tensor(&w, "tova.argmin", OPT_TEMP, 1, L, nc);
    opb_op(&w, OP_ARGMAX, 1, L, 0, nc, negs, OP_NONE, OP_NONE, oh, 0, 0, 0);
    /* the row mask is its prefix sum (a product with a public upper triangle), broadcast over
     * the row (a product with public ones): local */
    uint32_t pre = opb_matmul_pub(&w, oh, opb_shared(&w, "tova.prefix_tri", OPT_PUBLIC, 1, nc, nc),
                                  L, nc, nc, opb_tensor(&w, "tova.prefix", OPT_TEMP, L, nc, 1));
    uint32_t cb = opb_matmul_pub(&w, opb_rows(&w, pre, L, 0, B, 1, "tova.shift"),
                                 opb_shared(&w, "tova.row_ones", OPT_PUBLIC, 1, 1, d2), L * B, 1,
                                 d2, opb_tensor(&w, "tova.shift_rows", OPT_TEMP, 1, L * B, d2));
    /* COST: the oblivious compaction of the remaining rows of every layer and KV head, one
     * select per element, in the same rounds */
    uint32_t got = apart ? opb_tensor(&w, "tova.chosen", OPT_TEMP, Hkv * L, B, d2) : all;
    opb_op(&w, OP_SELECT, Hkv, L * B, 0, d2, cb, nxt, cur, got, 0, 0, 0);
    if (apart) /* the sinks, then the chosen, then the window: rows S+B+1 … T (the new one) */
        put_slots(&w, all, opb_rows(&w, rows, Hkv * L, 0, n, d2, "tova.rows_kept"), n, got, Hkv * L,
                  S, B, s->recent, d2);
    split_slots(&w, all, s->dense, L, Hkv, T, d2, &failed);
    if (failed)
        return err_set(e, MS_ERR_NOMEM, "policy tova: out of memory emitting its ops");
    return policy_emit_done(&w, "tova", e);
}

static int tova_emit(void *st, int phase, uint32_t layer, uint32_t kv_len, const uint32_t *kept,
                     op_program *prog, errbuf *e)
{
    tova_state *s = st;
    const policy_env *v = &s->env;
    /* B: the entries a layer keeps (the sinks and the window with the cache_size chosen) */
    uint32_t d2 = 2 * v->head_dim, H = v->n_heads, Hkv = v->n_kv_heads, B = s->total;
    /* the selecting layers dense … L−1, layer's rows at li among them */
    uint32_t L = v->n_layers - s->dense, li = layer - s->dense;
    int last = layer + 1 == v->n_layers, failed = 0;
    if (layer < s->dense) /* a dense layer keeps every entry: no ops */
        return MS_OK;
    if (phase == PHASE_PREFILL) {
        if (kv_len <= B)
            return MS_OK;
        policy_emitter pe;
        opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
        /* COST: head mean of the last prompt row (local adds: a product with public ones, the
         * mean's order); the layer's sums and rows among every layer's (local) */
        uint32_t att = pcheck_input(&pe, PCHECK_IN_PROMPT_ATT, H, 1, kv_len);
        uint32_t m = opb_transpose(&pe, opb_colsum(&pe, att, 1, H, kv_len, "tova.mean"), 1, kv_len,
                                   1, "tova.mean_r");
        opb_write(&pe, m, all_state(prog, phase, "tova.mean_all", 1, L, kv_len, &failed), 1, li, 1,
                  kv_len);
        opb_write(&pe, pcheck_input(&pe, PCHECK_IN_KV, Hkv, kv_len, d2),
                  all_state(prog, phase, "tova.kv_all", Hkv, L * kv_len, d2, &failed), Hkv,
                  li * kv_len, kv_len, d2);
        int rc = failed ? err_set(e, MS_ERR_NOMEM, "policy tova: out of memory emitting its ops")
                        : policy_emit_done(&pe, "tova", e);
        return rc || !last ? rc : tova_prompt_all(s, kv_len, prog, e);
    }
    /* the kept count is min(kv_len, B) whatever the observations (the secure form passes every
     * cached entry as kept), the same in every layer; a step evicts once it reaches B */
    uint32_t m1 = kept[0] < B ? kept[0] : B, n = m1 + 1;
    if (n <= B)
        return MS_OK;
    policy_emitter pe;
    opb_init(&pe, prog, phase, (int)layer, OPC_POLICY, NULL);
    /* the step's n rows: the kept ones (the slots, or the whole cache before any eviction), then
     * the new entry's */
    int evicted = m1 < kv_len;
    uint32_t slots = opb_shared(&pe, "tova.slots", OPT_CACHE, Hkv, B, d2);
    uint32_t kv = pcheck_input(&pe, PCHECK_IN_KV, Hkv, kv_len, d2);
    if (!evicted)
        opb_write(&pe, kv, all_state(prog, phase, "tova.kept_all", Hkv, L * B, d2, &failed), Hkv,
                  li * B, B, d2);
    opb_write(&pe, pcheck_input(&pe, PCHECK_IN_KV_NEW, Hkv, 1, d2),
              all_state(prog, phase, "tova.new_all", Hkv, L, d2, &failed), Hkv, li, 1, d2);
    /* COST: head mean (H·n local adds: a product with public ones, the mean's order), negated
     * for the arg-min (−x = (x − x) − x, local) */
    uint32_t att = pcheck_input(&pe, PCHECK_IN_ATT_SLOTS, H, 1, n);
    uint32_t sum = opb_colsum(&pe, att, 1, H, n, "tova.mean"); /* (1, n, 1) */
    uint32_t z = opb_op(&pe, OP_SUB, 1, n, 0, 1, sum, sum, OP_NONE,
                        opb_tensor(&pe, "tova.zero_row", OPT_TEMP, 1, n, 1), 0, 0, 0);
    uint32_t ng = opb_op(&pe, OP_SUB, 1, n, 0, 1, z, sum, OP_NONE,
                         opb_tensor(&pe, "tova.neg", OPT_TEMP, 1, 1, n), 0, 0, 0);
    opb_write(&pe, ng, all_state(prog, phase, "tova.neg_all", 1, L, n, &failed), 1, li, 1, n);
    if (evicted) /* the step attends the slots as it began */
        pcheck_selection(&pe, slots, B, 0, kv_len, OP_NONE, 0);
    int rc = failed ? err_set(e, MS_ERR_NOMEM, "policy tova: out of memory emitting its ops")
                    : policy_emit_done(&pe, "tova", e);
    return rc || !last ? rc : tova_step_all(s, evicted, prog, e);
}

const policy_ops policy_tova = {
    .name = "tova",
    .summary = "per-layer top cache_size by head-averaged attention of the newest query",
    .params = tova_params,
    .n_params = sizeof tova_params / sizeof tova_params[0],
    .init = tova_init,
    .fini = tova_fini,
    .needs = tova_needs,
    .layer_needs = tova_layer_needs,
    .observe = tova_observe,
    .select = tova_select,
    .emit_cost = tova_emit,
    .choice = tova_choice,
    .adopt = tova_adopt,
    .budget_keys = "cache_size",
};
