/* check_op.c — the op program: storage, names, text round trip, malformed input. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "protocols/program/op.h"
#include "protocols/program/opb.h"

static void build_small(op_program *p)
{
    op_program_init(p);
    snprintf(p->model, sizeof p->model, "tiny");
    uint32_t x = op_tensor_add(p, "x", OPT_INPUT, DOM_ARITH, 1, 4, 8);
    uint32_t w = op_tensor_add(p, "L0.wq", OPT_WEIGHT, DOM_ARITH, 1, 8, 8);
    uint32_t y = op_tensor_add(p, "y", OPT_TEMP, DOM_ARITH, 1, 4, 8);
    op o = {.kind = OP_MATMUL,
            .phase = PHASE_PREFILL,
            .cat = OPC_ATTENTION,
            .layer = 0,
            .group = -1,
            .batch = 1,
            .m = 4,
            .k = 8,
            .n = 8,
            .in = {x, w, OP_NONE},
            .out = y,
            .flags = OPF_FIXED_B,
            .iarg = 0,
            .farg = 0.125};
    ck_assert_int_ge(op_emit(p, &o), 0);
    op s = {.kind = OP_SOFTMAX,
            .phase = PHASE_DECODE,
            .cat = OPC_SOFTMAX,
            .layer = 0,
            .group = 2,
            .batch = 2,
            .m = 2,
            .n = 4,
            .in = {y, OP_NONE, OP_NONE},
            .out = y,
            .iarg = -1,
            .farg = -14.5};
    ck_assert_int_ge(op_emit(p, &s), 0);
}

START_TEST(test_roundtrip)
{
    op_program p, q;
    build_small(&p);
    ck_assert(op_program_is_sane(&p));
    ck_assert_uint_eq(op_macs(&p.ops[0]), 4 * 8 * 8);
    ck_assert_uint_eq(op_out_elems(&p.ops[1]), 2 * 2 * 4);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(op_write(&p, f), MS_OK);
    fclose(f);
    op_program_init(&q);
    f = fmemopen(buf, len, "r");
    errbuf e;
    int rc = op_read(&q, f, "mem", &e);
    fclose(f);
    ck_assert_msg(rc == MS_OK, "%s", e.msg);
    ck_assert_str_eq(q.model, "tiny");
    ck_assert_uint_eq(q.n_ops, p.n_ops);
    ck_assert_uint_eq(q.n_tens, p.n_tens);
    ck_assert_mem_eq(q.ops, p.ops, p.n_ops * sizeof *p.ops);
    ck_assert_str_eq(q.tens[1].name, "L0.wq");
    ck_assert_int_eq(q.tens[1].role, OPT_WEIGHT);
    free(buf);
    op_program_free(&p);
    op_program_free(&q);
}
END_TEST

/* Every token op_write writes is read back: an op with a bit bound (op_write's 17th token,
 * w=) keeps it. */
START_TEST(test_roundtrip_bits)
{
    op_program p, q;
    op_program_init(&p);
    uint32_t a = op_tensor_add(&p, "a", OPT_INPUT, DOM_ARITH, 1, 2, 8);
    uint32_t b = op_tensor_add(&p, "b", OPT_INPUT, DOM_ARITH, 1, 2, 8);
    uint32_t c = op_tensor_add(&p, "c", OPT_TEMP, DOM_ARITH, 1, 2, 8);
    op o = {.kind = OP_LT,
            .phase = PHASE_DECODE,
            .cat = OPC_SOFTMAX,
            .group = -1,
            .batch = 1,
            .m = 2,
            .n = 8,
            .in = {a, b, OP_NONE},
            .out = c,
            .flags = OPF_NO_TRUNC,
            .iarg = 3,
            .farg = 0.5,
            .bits = 20};
    ck_assert_int_ge(op_emit(&p, &o), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(op_write(&p, f), MS_OK);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, " w=20\n"));
    op_program_init(&q);
    f = fmemopen(buf, len, "r");
    errbuf e;
    int rc = op_read(&q, f, "mem", &e);
    fclose(f);
    ck_assert_msg(rc == MS_OK, "%s", e.msg);
    ck_assert_uint_eq(q.n_ops, 1);
    ck_assert_uint_eq(q.ops[0].bits, 20);
    ck_assert_mem_eq(q.ops, p.ops, sizeof *p.ops);
    free(buf);
    op_program_free(&p);
    op_program_free(&q);
}
END_TEST

static int read_text(const char *text, errbuf *e)
{
    op_program q;
    op_program_init(&q);
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    int rc = op_read(&q, f, "bad.ops", e);
    fclose(f);
    op_program_free(&q);
    return rc;
}

START_TEST(test_malformed)
{
    errbuf e;
    ck_assert_int_eq(read_text("hello 1\n", &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad.ops:1: error"));
    ck_assert_int_eq(read_text("mpcsim-op-program 2\n", &e), MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "regenerate"));
    ck_assert_int_eq(read_text("mpcsim-op-program 1\nop 0 frobnicate prefill ffn 0 0 b=1 m=1 k=1 "
                               "n=1 in=-,-,- out=- flags=0 i=0 f=0\n",
                               &e),
                     MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad.ops:2: error"));
    /* operand refers to a tensor that does not exist */
    ck_assert_int_eq(read_text("mpcsim-op-program 1\nop 0 add prefill ffn 0 0 b=1 m=1 k=1 n=1 "
                               "in=5,-,- out=- flags=0 i=0 f=0\n",
                               &e),
                     MS_ERR_FORMAT);
    /* a token past the last field is an error, not dropped */
    ck_assert_int_eq(read_text("mpcsim-op-program 1\ntensor 0 x input arith 1 1 1\nop 0 lt "
                               "prefill ffn 0 0 b=1 m=1 k=1 n=1 in=0,0,- out=0 flags=0 i=0 f=0 "
                               "w=8 w=9 w=10 w=11 w=12 w=13 w=14 w=15 w=16\n",
                               &e),
                     MS_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "bad.ops:3: error"));
}
END_TEST

START_TEST(test_names)
{
    for (int k = 0; k < OP_N_KINDS; k++)
        ck_assert_int_eq(op_kind_from_name(op_kind_name(k)), k);
    for (int c = 0; c < OPC_N; c++)
        ck_assert_int_eq(op_cat_from_name(op_cat_name(c)), c);
    ck_assert_int_eq(op_kind_from_name("nope"), -1);
    ck_assert_int_eq(op_kind_shape(OP_MATMUL), OPS_MM);
    ck_assert_int_eq(op_kind_shape(OP_SOFTMAX), OPS_ROW);
}
END_TEST

/* The op builder: names per layer and prefix, lookups with and without the index, the views'
 * and column sums' shapes, and a failure that sticks. */
START_TEST(test_builder)
{
    op_program p;
    op_program_init(&p);
    for (int indexed = 0; indexed < 2; indexed++) {
        op_program_clear(&p);
        opb b;
        opb_init(&b, &p, PHASE_DECODE, 3, OPC_POLICY, "x.");
        if (indexed)
            opb_index(&b);
        uint32_t t = opb_tensor(&b, "a", OPT_TEMP, 2, 4, 5);
        ck_assert_str_eq(p.tens[t].name, "L3.x.a");
        ck_assert_uint_eq(opb_find(&b, "a"), t);
        ck_assert_uint_eq(opb_find_as(&b, "L3.x.a"), t);
        ck_assert_uint_eq(opb_find(&b, "b"), OP_NONE);
        /* shared: the first of the name whatever its shape; matching: same role and size */
        ck_assert_uint_eq(opb_shared(&b, "a", OPT_CACHE, 1, 1, 1), t);
        ck_assert_uint_eq(opb_matching(&b, "a", OPT_TEMP, 1, 8, 5), t);
        uint32_t u = opb_matching(&b, "a", OPT_CACHE, 2, 4, 5);
        ck_assert_uint_ne(u, t);
        ck_assert_uint_eq(opb_find(&b, "a"), t); /* lookups find the first */
        /* transpose (B, R, C) → (B, C, R) and column sums (B, n, 1) */
        uint32_t tr = opb_transpose(&b, t, 2, 4, 5, "t");
        ck_assert_uint_eq(p.tens[tr].rows, 5);
        ck_assert_uint_eq(p.tens[tr].cols, 4);
        const op *o = &p.ops[p.n_ops - 1];
        ck_assert_int_eq(o->kind, OP_VIEW);
        ck_assert_int_eq(o->layer, 3);
        ck_assert_int_eq(o->cat, OPC_POLICY);
        ck_assert_uint_eq(o->flags, OPF_MERGE_HEADS);
        uint32_t cs = opb_colsum(&b, t, 2, 4, 5, "cs");
        ck_assert_uint_eq(p.tens[cs].batch, 2);
        ck_assert_uint_eq(p.tens[cs].rows, 5);
        ck_assert_uint_eq(p.tens[cs].cols, 1);
        ck_assert_uint_eq(opb_find(&b, "cs_ones"), p.ops[p.n_ops - 1].in[1]);
        ck_assert_int_eq(p.ops[p.n_ops - 1].kind, OP_MATMUL);
        ck_assert_uint_eq(p.ops[p.n_ops - 1].flags, OPF_PUBLIC_B | OPF_NO_TRUNC);
        uint32_t r = opb_rows(&b, t, 2, 1, 2, 5, "r");
        ck_assert_uint_eq(p.tens[r].rows, 2);
        ck_assert_int_eq(p.ops[p.n_ops - 1].iarg, 1);
        ck_assert_uint_eq(opb_op_cat(&b, OPC_FFN, OP_ADD, 2, 4, 0, 5, t, t, OP_NONE, t, 0, 0, 0),
                          t);
        ck_assert_int_eq(p.ops[p.n_ops - 1].cat, OPC_FFN);
        ck_assert(op_program_is_sane(&p));
        ck_assert(!opb_failed(&b));
        /* an op without a result fails, and the failure sticks: nothing more is added */
        size_t n_ops = p.n_ops, n_tens = p.n_tens;
        ck_assert_uint_eq(opb_op(&b, OP_ADD, 1, 1, 0, 1, t, t, OP_NONE, OP_NONE, 0, 0, 0), OP_NONE);
        ck_assert(opb_failed(&b));
        ck_assert_uint_eq(opb_tensor(&b, "c", OPT_TEMP, 1, 1, 1), OP_NONE);
        ck_assert_uint_eq(opb_op(&b, OP_ADD, 1, 1, 0, 5, t, t, OP_NONE, t, 0, 0, 0), OP_NONE);
        ck_assert_uint_eq(opb_find(&b, "a"), OP_NONE);
        ck_assert_uint_eq(p.n_ops, n_ops);
        ck_assert_uint_eq(p.n_tens, n_tens);
        opb_release(&b);
    }
    /* no layer, no prefix */
    opb b;
    opb_init(&b, &p, PHASE_PREFILL, -1, OPC_OTHER, NULL);
    ck_assert_str_eq(p.tens[opb_tensor(&b, "z", OPT_PUBLIC, 1, 1, 1)].name, "z");
    op_program_free(&p);
}
END_TEST

Suite *op_suite(void)
{
    Suite *s = suite_create("op");
    TCase *tc = th_case(s, "program", 0);
    TH_TESTS(tc, test_roundtrip, test_roundtrip_bits, test_malformed, test_names, test_builder);
    return s;
}
