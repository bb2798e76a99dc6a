/* check_lower.c — model descriptions, the shape function and the lowering. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "models/lower.h"
#include "models/model.h"
#include "protocols/program/proto.h"

TESTDIR("check_lower")

static model_cfg load(const char *name)
{
    model_cfg m;
    errbuf e;
    int rc = model_load(name, &m, &e);
    ck_assert_msg(rc == MS_OK, "%s", e.msg);
    return m;
}

START_TEST(test_shipped_models)
{
    const char *names[] = {"gpt2",         "llama-2-7b",      "llama-2-13b",
                           "llama-3.1-8b", "longchat-7b-32k", "stories260K"};
    for (size_t i = 0; i < 6; i++) {
        model_cfg m = load(names[i]);
        ck_assert_str_eq(m.name, names[i]);
    }
    char list[64][64];
    size_t n;
    ck_assert_int_eq(model_list(list, 64, &n), MS_OK);
    ck_assert_uint_ge(n, 6);
}
END_TEST

/* Parameter counts against the published sizes: stories260K 260,032 trained parameters
 * (its README), GPT-2 124M (124,439,808 with the tied head), Llama-2-7B 6,738,415,616, and
 * PUMA's models below. */
START_TEST(test_param_counts)
{
    model_cfg s = load("stories260K");
    ck_assert_uint_eq(model_param_count(&s), 260032);
    model_cfg g = load("gpt2");
    ck_assert_uint_eq(model_param_count(&g), 124439808);
    model_cfg l = load("llama-2-7b");
    ck_assert_uint_eq(model_param_count(&l), 6738415616ULL);
    model_cfg l3 = load("llama-3.1-8b");
    ck_assert_uint_eq(model_param_count(&l3), 8030261248ULL);
    /* GPT-2 Medium and Large as Hugging Face counts them (355M, 774M) */
    model_cfg gm = load("gpt2-medium"), gl = load("gpt2-large");
    ck_assert_uint_eq(model_param_count(&gm), 354823168);
    ck_assert_uint_eq(model_param_count(&gl), 774030080);
    /* BERT's shapes without the pooler (d² + d) and the two token-type rows (2d), which the
     * gpt2-family stand-in lacks: 109,482,240 − 590,592 − 1,536 and 335,141,888 − 1,049,600 −
     * 2,048 (Hugging Face bert-base-uncased, bert-large-uncased) */
    model_cfg bb = load("bert-base"), bl = load("bert-large");
    ck_assert_uint_eq(model_param_count(&bb), 109482240 - 590592 - 1536);
    ck_assert_uint_eq(model_param_count(&bl), 335141888 - 1049600 - 2048);
}
END_TEST

START_TEST(test_bad_model_files)
{
    const char *path = testdir_path(&td, "m.yaml");
    errbuf e;
    model_cfg m;
    th_write(path, "name: x\nlayers: 2\ndim: 8\nheads: 2\nkv_heads: 2\nhead_dim: 4\n"
                   "ffn_dim: 16\nvocab: 10\nmax_context: 8\nnorm: rmsnrom\n");
    ck_assert_int_eq(model_load(path, &m, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, ":10:7: error:") && strstr(e.msg, "rmsnorm"), "%s", e.msg);
    th_write(path, "name: x\nlayer: 2\n");
    ck_assert_int_eq(model_load(path, &m, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, ":2:1: error: unknown key 'layer'") &&
                      strstr(e.msg, "did you mean 'layers'"),
                  "%s", e.msg);
    th_write(path, "name: x\nlayers: 2\nlayers: 3\n");
    ck_assert_int_eq(model_load(path, &m, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, ":3:1: error: duplicate key"), "%s", e.msg);
    th_write(path, "name: x\nlayers: 2\ndim: 8\nheads: 3\nkv_heads: 2\nhead_dim: 4\n"
                   "ffn_dim: 16\nvocab: 10\nmax_context: 8\n");
    ck_assert_int_eq(model_load(path, &m, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "multiple of kv_heads"), "%s", e.msg);
    th_write(path, "name: [x\n");
    ck_assert_int_eq(model_load(path, &m, &e), MS_ERR_INPUT);
    ck_assert_msg(strstr(e.msg, "error:"), "%s", e.msg);
    ck_assert_int_eq(model_load("lama-2-7b", &m, &e), MS_ERR_NOTFOUND);
    ck_assert_msg(strstr(e.msg, "did you mean 'llama-2-7b'"), "%s", e.msg);
}
END_TEST

typedef struct sums {
    uint64_t weight_macs, attn_macs, gather_macs;
    size_t n_softmax, n_rope, n_gelu, n_silu, n_layernorm, n_rmsnorm, n_reveal;
} sums;

static sums summarize(const op_program *p)
{
    sums s;
    memset(&s, 0, sizeof s);
    for (size_t i = 0; i < p->n_ops; i++) {
        const op *o = &p->ops[i];
        if (o->kind == OP_MATMUL && (o->flags & OPF_FIXED_B))
            s.weight_macs += op_macs(o);
        else if (o->kind == OP_MATMUL)
            s.attn_macs += op_macs(o);
        s.gather_macs += o->kind == OP_GATHER ? op_macs(o) : 0;
        s.n_softmax += o->kind == OP_SOFTMAX;
        s.n_rope += o->kind == OP_ROPE;
        s.n_gelu += o->kind == OP_GELU;
        s.n_silu += o->kind == OP_SILU;
        s.n_layernorm += o->kind == OP_LAYERNORM;
        s.n_rmsnorm += o->kind == OP_RMSNORM;
        s.n_reveal += o->kind == OP_REVEAL;
    }
    return s;
}

/* The default lowering options at kv_len cached entries. */
static lower_opts opts_at(uint32_t kv_len)
{
    lower_opts o;
    lower_opts_default(&o);
    o.kv_len = kv_len;
    return o;
}

/* m's step lowered with o (which must succeed). */
static op_program lower_ok(const model_cfg *m, const lower_opts *o)
{
    op_program p;
    op_program_init(&p);
    errbuf e;
    ck_assert_msg(lower_step(m, o, &p, &e) == MS_OK, "%s", e.msg);
    return p;
}

START_TEST(test_decode_llama)
{
    model_cfg m = load("llama-2-7b");
    lower_opts o = opts_at(1000);
    op_program p = lower_ok(&m, &o);
    ck_assert(op_program_is_sane(&p));
    sums s = summarize(&p);
    /* one token through every weight matrix once, plus the untied LM head */
    uint64_t per_layer = (uint64_t)m.dim * m.dim * 4 + (uint64_t)m.dim * m.ffn_dim * 3;
    ck_assert_uint_eq(s.weight_macs, per_layer * m.n_layers + (uint64_t)m.vocab * m.dim);
    /* q·Kᵀ and P·V over T+1 entries, every head */
    ck_assert_uint_eq(s.attn_macs, 2ULL * m.n_layers * m.n_heads * m.head_dim * 1001);
    ck_assert_uint_eq(s.gather_macs, (uint64_t)m.vocab * m.dim);
    ck_assert_uint_eq(s.n_softmax, m.n_layers);
    ck_assert_uint_eq(s.n_rope, 2 * m.n_layers);
    ck_assert_uint_eq(s.n_silu, m.n_layers);
    ck_assert_uint_eq(s.n_rmsnorm, 2 * m.n_layers + 1);
    ck_assert_uint_eq(s.n_reveal, 1);
    /* weights are bound by name */
    ck_assert_uint_ne(op_tensor_find(&p, "L31.w2"), OP_NONE);
    ck_assert_uint_ne(op_tensor_find(&p, "wcls"), OP_NONE);
    op_program_free(&p);
}
END_TEST

START_TEST(test_prefill_gpt2)
{
    model_cfg m = load("gpt2");
    lower_opts o;
    lower_opts_default(&o);
    o.phase = PHASE_PREFILL;
    o.n_tokens = 128;
    op_program p = lower_ok(&m, &o);
    sums s = summarize(&p);
    ck_assert_uint_eq(s.n_gelu, m.n_layers);
    ck_assert_uint_eq(s.n_layernorm, 2 * m.n_layers + 1);
    ck_assert_uint_eq(s.n_rope, 0);
    ck_assert_uint_eq(s.attn_macs, 2ULL * m.n_layers * m.n_heads * m.head_dim * 128 * 128);
    /* causal softmax: row i of the 128 new tokens sees i + 1 entries */
    for (size_t i = 0; i < p.n_ops; i++)
        if (p.ops[i].kind == OP_SOFTMAX) {
            ck_assert_int_eq(p.ops[i].iarg, 0);
            ck_assert_uint_eq(p.ops[i].m, 128);
        }
    /* the LM head runs on the last position only */
    uint32_t lg = op_tensor_find(&p, "logits");
    ck_assert_uint_eq(p.tens[lg].rows, 1);
    op_program_free(&p);
}
END_TEST

START_TEST(test_kept_counts)
{
    model_cfg m = load("stories260K");
    uint32_t kept[5 * 4];
    for (int i = 0; i < 20; i++)
        kept[i] = 16;
    lower_opts o;
    lower_opts_default(&o);
    o.kv_len = 200;
    o.kept = kept;
    op_program p;
    op_program_init(&p);
    errbuf e;
    ck_assert_int_eq(lower_step(&m, &o, &p, &e), MS_OK);
    sums s = summarize(&p);
    ck_assert_uint_eq(s.attn_macs, 2ULL * m.n_layers * m.n_heads * m.head_dim * 17);
    /* different kept counts across the KV heads of layer 2: the layer's vectorized attention
     * takes the largest (shorter selections padded), the other layers keep 16 */
    kept[2 * 4 + 1] = 40;
    op_program_clear(&p);
    ck_assert_int_eq(lower_step(&m, &o, &p, &e), MS_OK);
    uint64_t macs = 0;
    for (size_t i = 0; i < p.n_ops; i++)
        if (p.ops[i].kind == OP_SOFTMAX) {
            ck_assert_int_eq(p.ops[i].group, -1);
            ck_assert_uint_eq(p.ops[i].batch, m.n_heads);
            ck_assert_uint_eq(p.ops[i].n, p.ops[i].layer == 2 ? 41 : 17);
        } else if (p.ops[i].kind == OP_MATMUL && !(p.ops[i].flags & OPF_FIXED_B)) {
            macs += op_macs(&p.ops[i]);
        }
    ck_assert_uint_eq(macs, 2ULL * m.head_dim * m.n_heads * (4 * 17 + 41));
    /* kept counts never exceed what is cached */
    for (int i = 0; i < 20; i++)
        kept[i] = 5000;
    op_program_clear(&p);
    ck_assert_int_eq(lower_step(&m, &o, &p, &e), MS_OK);
    s = summarize(&p);
    ck_assert_uint_eq(s.attn_macs, 2ULL * m.n_layers * m.n_heads * m.head_dim * 201);
    op_program_free(&p);
}
END_TEST

/* Per-category totals of one lowered step on a protocol's cost engine. */
static void cat_cost(const op_program *p, const char *proto_name, cost_totals *cat)
{
    const proto *pr = proto_find(proto_name);
    proto_cfg cfg;
    errbuf e;
    ck_assert_int_eq(proto_cfg_default(proto_name, &cfg, &e), MS_OK);
    cost_log log;
    cost_log_init(&log, pr->n_parties);
    ck_assert_msg(proto_cost_program(pr, &cfg, p, &log, &e) == MS_OK, "%s", e.msg);
    memset(cat, 0, OPC_N * sizeof *cat);
    for (size_t i = 0; i < log.n; i++)
        cost_totals_add_round(&cat[p->ops[log.r[i].op].cat], &log.r[i], pr->n_parties);
    cost_log_free(&log);
}

START_TEST(test_attended_cache)
{
    /* a policy that gathers its kept rows into the attention's cache (MPCache): the cache
     * tensors hold the attended rows, the append writes after them; the attention is the same
     * and only the append's local work shrinks (no communication either way) */
    model_cfg m = load("llama-2-7b");
    uint32_t *kept = malloc((size_t)m.n_layers * m.n_kv_heads * sizeof *kept);
    for (uint32_t i = 0; i < m.n_layers * m.n_kv_heads; i++)
        kept[i] = 64;
    lower_opts o;
    lower_opts_default(&o);
    o.kv_len = 4000;
    o.kept = kept;
    op_program a, b;
    op_program_init(&a);
    op_program_init(&b);
    errbuf e;
    ck_assert_int_eq(lower_step(&m, &o, &a, &e), MS_OK);
    o.attended_cache = 1;
    ck_assert_int_eq(lower_step(&m, &o, &b, &e), MS_OK);
    uint32_t ka = op_tensor_find(&a, "L3.kcache"), kb = op_tensor_find(&b, "L3.kcache");
    ck_assert_uint_eq(a.tens[ka].rows, 4001);
    ck_assert_uint_eq(b.tens[kb].rows, 65);
    ck_assert_uint_eq(a.n_ops, b.n_ops);
    for (size_t i = 0; i < b.n_ops; i++)
        if (b.ops[i].kind == OP_VIEW && b.tens[b.ops[i].out].role == OPT_CACHE) {
            ck_assert_int_eq(b.ops[i].iarg, 64);
            ck_assert_int_eq(a.ops[i].iarg, 4000);
        }
    sums sa = summarize(&a), sb = summarize(&b);
    ck_assert_uint_eq(sa.attn_macs, sb.attn_macs);
    cost_totals ca[OPC_N], cb[OPC_N];
    cat_cost(&a, "aby3", ca);
    cat_cost(&b, "aby3", cb);
    ck_assert_uint_eq(ca[OPC_ATTENTION].rounds, cb[OPC_ATTENTION].rounds);
    ck_assert_uint_eq(ca[OPC_ATTENTION].bytes_sent[0], cb[OPC_ATTENTION].bytes_sent[0]);
    /* the append's work: a few passes over the whole (Hkv, T, d) cache of every layer, twice */
    double wa = ca[OPC_ATTENTION].work[0][WK_ELEM], wb = cb[OPC_ATTENTION].work[0][WK_ELEM];
    double full = 2.0 * m.n_layers * m.n_kv_heads * 4001.0 * m.head_dim;
    ck_assert_msg(wa - wb > 2 * (1 - 65.0 / 4001) * full, "%g vs %g", wa, wb);
    free(kept);
    op_program_free(&a);
    op_program_free(&b);
}
END_TEST

START_TEST(test_sparse_ffn)
{
    /* Comet's sparse FFN: gate/up/down and the activation on A of F neurons per token */
    model_cfg m = load("llama-2-7b");
    uint32_t F = m.ffn_dim, A = F / 4, D = m.dim;
    uint32_t *act = malloc(m.n_layers * sizeof *act);
    for (uint32_t l = 0; l < m.n_layers; l++)
        act[l] = A;
    lower_opts o;
    lower_opts_default(&o);
    o.kv_len = 100;
    op_program dn, pb, sc;
    op_program_init(&dn);
    op_program_init(&pb);
    op_program_init(&sc);
    errbuf e;
    ck_assert_int_eq(lower_step(&m, &o, &dn, &e), MS_OK);
    o.ffn_active = act;
    ck_assert_int_eq(lower_step(&m, &o, &pb, &e), MS_OK);
    o.ffn_secret = 1;
    ck_assert_int_eq(lower_step(&m, &o, &sc, &e), MS_OK);
    uint64_t mac[3] = {0, 0, 0}, silu[3] = {0, 0, 0};
    const op_program *ps[3] = {&dn, &pb, &sc};
    for (int v = 0; v < 3; v++)
        for (size_t i = 0; i < ps[v]->n_ops; i++) {
            const op *q = &ps[v]->ops[i];
            if (q->cat == OPC_FFN && q->kind == OP_MATMUL) {
                mac[v] += op_macs(q);
                ck_assert_uint_eq((q->flags & OPF_FIXED_B) != 0, v != 2);
            }
            if (q->kind == OP_SILU)
                silu[v] += op_out_elems(q);
        }
    ck_assert_uint_eq(mac[0], 3ull * D * F * m.n_layers);
    ck_assert_uint_eq(mac[1], 3ull * D * A * m.n_layers);
    ck_assert_uint_eq(mac[2], mac[1]);
    ck_assert_uint_eq(silu[0], (uint64_t)F * m.n_layers);
    ck_assert_uint_eq(silu[1], (uint64_t)A * m.n_layers);
    ck_assert_uint_ne(op_tensor_find(&pb, "L5.w2.active"), OP_NONE);
    ck_assert_uint_ne(op_tensor_find(&sc, "L5.w2.gathered"), OP_NONE);
    /* the activation is element-wise: its bytes scale with the neurons exactly */
    cost_totals c[3][OPC_N];
    for (int v = 0; v < 3; v++)
        cat_cost(ps[v], "semi2k", c[v]);
    ck_assert_uint_eq(c[1][OPC_ACTIVATION].bytes_sent[0] * F,
                      c[0][OPC_ACTIVATION].bytes_sent[0] * A);
    ck_assert_uint_eq(c[1][OPC_ACTIVATION].rounds, c[0][OPC_ACTIVATION].rounds);
    /* semi2k's beaver cache: a public pattern opens only the activations' masks (gate/up: D
     * each, down: A) plus the truncations and the product; a secret one opens the gathered
     * weights too (3·A·D more per layer) */
    ck_assert_uint_lt(c[1][OPC_FFN].bytes_sent[0], c[0][OPC_FFN].bytes_sent[0]);
    ck_assert_uint_eq(c[2][OPC_FFN].bytes_sent[0] - c[1][OPC_FFN].bytes_sent[0],
                      8ull * 3 * A * D * m.n_layers);
    free(act);
    op_program_free(&dn);
    op_program_free(&pb);
    op_program_free(&sc);
}
END_TEST

START_TEST(test_context_overflow)
{
    model_cfg m = load("stories260K");
    lower_opts o = opts_at(512);
    op_program p;
    op_program_init(&p);
    errbuf e;
    ck_assert_int_eq(lower_step(&m, &o, &p, &e), MS_ERR_RANGE);
    ck_assert_msg(strstr(e.msg, "exceed"), "%s", e.msg);
    op_program_free(&p);
}
END_TEST

Suite *lower_suite(void)
{
    Suite *s = suite_create("lower");
    TCase *tc = th_case(s, "models", 0);
    TESTDIR_USE(tc);
    TH_TESTS(tc, test_shipped_models, test_param_counts, test_bad_model_files, test_decode_llama,
             test_attended_cache, test_sparse_ffn, test_prefill_gpt2, test_kept_counts,
             test_context_overflow);
    return s;
}
