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
