/* check_golden.c — the lowering executed through the shared kernels on the clear-text
 * fixed-point engine, against the float reference of the real stories260K model: a prefill
 * and decode steps carrying the secret KV cache from step to step, as the backend runs them.
 * This checks the op program's data flow (layouts, RoPE positions, cache appends, causal
 * masks, the last-row LM head) and the approximations end to end. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/program/eng_plain.h"
#include "protocols/program/kern.h"
#include "models/llama.h"
#include "models/lower.h"
#include "models/model.h"
#include "stories.h"

#define N_POS 24  /* positions compared */
#define PREFILL 6 /* tokens in the prefill step */
#define MAX_CACHE 16

typedef struct cache_entry {
    char name[48];
    mpc_val v;
    uint32_t batch, rows, cols;
} cache_entry;

typedef struct session {
    llama *m;
    eng *e;
    cache_entry cache[MAX_CACHE];
    size_t n_cache;
} session;

static cache_entry *cache_find(session *s, const char *name)
{
    for (size_t i = 0; i < s->n_cache; i++)
        if (!strcmp(s->cache[i].name, name))
            return &s->cache[i];
    return NULL;
}

/* Binds a weight (fixed point), the one-hot input rows (integers: GATHER does not truncate),
 * or the previous step's cache grown by the new rows. */
static void bind(session *s, const op_program *p, uint32_t t, mpc_val *v, const int *toks,
                 uint32_t n_toks)
{
    const op_tensor *T = &p->tens[t];
    size_t n = (size_t)T->batch * T->rows * T->cols;
    int f = s->e->cfg.frac_bits;
    ck_assert_int_eq(s->e->vt->alloc(s->e, v, n, T->dom), MS_OK);
    memset(v->s[0], 0, n * 8);
    if (T->role == OPT_WEIGHT) {
        uint32_t r, c;
        const float *w = llama_weight(s->m, T->name, &r, &c);
        ck_assert_msg(w != NULL, "no weight named %s", T->name);
        ck_assert_uint_eq((uint64_t)r * c, n);
        for (size_t i = 0; i < n; i++)
            v->s[0][i] = fx_encode(w[i], f);
    } else if (T->role == OPT_INPUT) {
        for (uint32_t i = 0; i < n_toks; i++)
            v->s[0][(size_t)i * T->cols + (uint32_t)toks[i]] = 1;
    } else if (T->role == OPT_CACHE) {
        cache_entry *c = cache_find(s, T->name);
        if (c)
            for (uint32_t b = 0; b < c->batch; b++)
                memcpy(v->s[0] + (size_t)b * T->rows * T->cols,
                       c->v.s[0] + (size_t)b * c->rows * c->cols, (size_t)c->rows * c->cols * 8);
    }
}

static void keep_cache(session *s, const op_program *p, mpc_val *vals)
{
    for (uint32_t t = 0; t < p->n_tens; t++) {
        const op_tensor *T = &p->tens[t];
        if (T->role != OPT_CACHE)
            continue;
        cache_entry *c = cache_find(s, T->name);
        if (!c) {
            ck_assert_uint_lt(s->n_cache, MAX_CACHE);
            c = &s->cache[s->n_cache++];
            snprintf(c->name, sizeof c->name, "%s", T->name);
        } else {
            s->e->vt->release(s->e, &c->v);
        }
        c->v = vals[t];
        c->batch = T->batch, c->rows = T->rows, c->cols = T->cols;
        memset(&vals[t], 0, sizeof vals[t]);
    }
}

/* Runs one lowered step; logits of the step's last position go to out. */
static void step(session *s, const model_cfg *m, int phase, const int *toks, uint32_t n,
                 uint32_t kv_len, float *out)
{
    lower_opts o = fixture_step_opts(phase, n, kv_len);
    op_program p;
    op_program_init(&p);
    errbuf err;
    ck_assert_msg(lower_step(m, &o, &p, &err) == MS_OK, "%s", err.msg);
    mpc_val *vals = calloc(p.n_tens, sizeof *vals), *inbuf = calloc(p.n_tens, sizeof *inbuf);
    for (uint32_t t = 0; t < p.n_tens; t++) {
        const op_tensor *T = &p.tens[t];
        vals[t].n = (size_t)T->batch * T->rows * T->cols;
        vals[t].dom = T->dom;
        if (T->role == OPT_WEIGHT || T->role == OPT_INPUT || T->role == OPT_CACHE)
            bind(s, &p, t, &vals[t], toks, n);
        if (T->role == OPT_INPUT)
            inbuf[t] = vals[t];
    }
    for (size_t i = 0; i < p.n_ops; i++) {
        s->e->cur_op = (uint32_t)i;
        int rc = kern_exec(s->e, &p, i, vals, &err);
        ck_assert_msg(rc == MS_OK, "op %zu (%s): %s", i, op_kind_name(p.ops[i].kind), err.msg);
    }
    uint32_t lg = op_tensor_find(&p, "logits");
    ck_assert_uint_ne(lg, OP_NONE);
    for (uint32_t i = 0; i < m->vocab; i++)
        out[i] = (float)fx_decode(vals[lg].s[0][i], s->e->cfg.frac_bits);
    keep_cache(s, &p, vals);
    for (uint32_t t = 0; t < p.n_tens; t++) {
        s->e->vt->release(s->e, &vals[t]);
        if (inbuf[t].s[0] && inbuf[t].s[0] != vals[t].s[0])
            s->e->vt->release(s->e, &inbuf[t]);
    }
    free(vals);
    free(inbuf);
    op_program_free(&p);
}

START_TEST(test_stories260k_fixed_point)
{
    const char *proto_name = _i ? "aby3" : "semi2k";
    model_cfg m;
    errbuf err;
    char path[1024];
    ck_assert_msg(model_load("stories260K", &m, &err) == MS_OK, "%s", err.msg);
    session s;
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(model_file_path(m.weights, path, sizeof path), 0);
    ck_assert_msg(llama_load(&m, path, &s.m, &err) == MS_OK, "%s", err.msg);
    /* the model's own greedy text (the reference file's first ids) as the teacher */
    int toks[N_POS];
    FILE *f = NULL;
    ck_assert_int_eq(model_file_path("stories260K/reference/greedy_bos_256.ids", path, sizeof path),
                     0);
    ck_assert_ptr_nonnull(f = fopen(path, "r"));
    for (int i = 0; i < N_POS; i++)
        ck_assert_int_eq(fscanf(f, "%d", &toks[i]), 1);
    fclose(f);
    proto_cfg cfg;
    ck_assert_int_eq(proto_cfg_default(proto_name, &cfg, &err), MS_OK);
    ck_assert_int_eq(eng_plain_new(&cfg, _i ? 3 : 2, 5, 0, &s.e), MS_OK);

    static float ref[N_POS][512], got[512];
    llama_reset(s.m);
    for (int pos = 0; pos < N_POS; pos++)
        ck_assert_int_eq(llama_forward(s.m, toks[pos], (uint32_t)pos, NULL, ref[pos]), MS_OK);
    double worst = 0;
    int agree = 0, total = 0;
    for (int pos = PREFILL - 1; pos < N_POS; pos++) {
        if (pos == PREFILL - 1)
            step(&s, &m, PHASE_PREFILL, toks, PREFILL, 0, got);
        else
            step(&s, &m, PHASE_DECODE, &toks[pos], 1, (uint32_t)pos, got);
        for (int i = 0; i < 512; i++)
            worst = fmax(worst, fabs(got[i] - ref[pos][i]));
        agree += llama_argmaxf(got, 512) == llama_argmaxf(ref[pos], 512);
        total++;
    }
    /* The error budget: PUMA's SiLU polynomial is off by up to 0.072 near |x| = 4 (kern.c),
     * exp/softmax by ~1e-3, rsqrt by 1e-4 relative, the fixed point by 2^-18 per truncation;
     * through 5 layers this stays well under 0.5 on logits of magnitude ~10-20. */
    ck_assert_msg(worst < 0.5, "%s: max |logit error| %g", proto_name, worst);
    ck_assert_msg(agree == total, "%s: top-1 agreement %d/%d", proto_name, agree, total);
    for (size_t i = 0; i < s.n_cache; i++)
        s.e->vt->release(s.e, &s.cache[i].v);
    eng_free(s.e);
    llama_free(s.m);
}
END_TEST

Suite *golden_suite(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = th_case(s, "stories260K", 120);
    TH_LOOPS(tc, 2, test_stories260k_fixed_point);
    return s;
}
