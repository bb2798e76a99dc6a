/* stories.c — the stories260K fixture (stories.h). */
#include "stories.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

void fixture_open(fixture *f, int min_tokens)
{
    errbuf e = {{0}};
    ck_assert_msg(model_load("stories260K", &f->m, &e) == MS_OK, "%s", e.msg);
    char wp[1024], tp[1024];
    ck_assert_int_eq(model_file_path(f->m.weights, wp, sizeof wp), 0);
    ck_assert_int_eq(model_file_path(f->m.tokenizer, tp, sizeof tp), 0);
    ck_assert_msg(llama_load(&f->m, wp, &f->L, &e) == MS_OK, "%s", e.msg);
    llama_tok *T;
    ck_assert_msg(llama_tok_load(tp, f->m.vocab, &T, &e) == MS_OK, "%s", e.msg);
    char *text = th_slurp(th_data_path("tests/data/tinystories_sample.txt"), NULL);
    f->n = llama_tok_encode(T, text, f->ids, 1024);
    free(text);
    ck_assert_int_ge(f->n, min_tokens);
    llama_tok_free(T);
}

void fixture_assert_follows(const double *logits, const float *pol, const float *full,
                            uint32_t P, uint32_t n, uint32_t V, double tol)
{
    llama_acc a, moved;
    llama_compare(logits, pol + (size_t)(P - 1) * V, n, V, &a);
    ck_assert_uint_ge(a.top1_agree + 1, n);
    ck_assert_msg(a.miss_gap < 2 * tol, "a disagreement where the replay's margin is %.4f",
                  a.miss_gap);
    ck_assert_msg(a.max_abs < tol, "logit error vs the replay %.4f", a.max_abs);
    llama_compare(logits, full + (size_t)(P - 1) * V, n, V, &moved);
    ck_assert_msg(moved.max_abs > 3 * tol, "the policy moved the logits by only %.4f",
                  moved.max_abs);
}
